//! ThreadSanitizer hand-off: the library is not instrumented, so TSan cannot
//! see the synchronisation the engine does between `queue_work` and the
//! callback, or between the callback and `flush_work`. When the C header is
//! compiled with `-fsanitize=thread` it registers `__tsan_acquire` and
//! `__tsan_release` here (from a constructor), and the library calls them at
//! the points where it synchronises: release when queueing, acquire before
//! the callback, release after it, and acquire when a wait (`flush_work`,
//! `cancel_work_sync`, `flush_workqueue`, ...) returns. Without
//! registration the hooks cost one relaxed load each.

use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

type Hook = unsafe extern "C" fn(*mut c_void);

static ACQUIRE: AtomicUsize = AtomicUsize::new(0);
static RELEASE: AtomicUsize = AtomicUsize::new(0);

/// One address every callback releases on and every workqueue-wide wait
/// acquires: `flush_workqueue` waits for all of them.
static ANY_CALLBACK: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Registers ThreadSanitizer's `__tsan_acquire` / `__tsan_release` (the
/// header does this itself under `-fsanitize=thread`). Null turns them off.
///
/// # Safety
///
/// Each non-null pointer must be a function taking one address and returning
/// nothing, callable from any thread for the life of the process.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_capi_set_tsan_hooks(
    acquire: Option<unsafe extern "C" fn(*mut c_void)>,
    release: Option<unsafe extern "C" fn(*mut c_void)>,
) {
    ACQUIRE.store(acquire.map_or(0, |f| f as usize), Ordering::SeqCst);
    RELEASE.store(release.map_or(0, |f| f as usize), Ordering::SeqCst);
}

fn call(slot: &AtomicUsize, addr: *const c_void) {
    let f = slot.load(Ordering::Relaxed);
    if f != 0 {
        // SAFETY: only `cmwq_capi_set_tsan_hooks` stores here, from a
        // function pointer of type `Hook` whose caller promised it stays
        // callable; 0 (none) was excluded above.
        unsafe {
            let hook: Hook = std::mem::transmute::<usize, Hook>(f);
            hook(addr as *mut c_void);
        }
    }
}

/// Tells TSan that what this thread did so far happens before a later
/// [`acquire`] of `addr`.
pub(crate) fn release(addr: *const c_void) {
    call(&RELEASE, addr);
}

/// The other end of [`release`].
pub(crate) fn acquire(addr: *const c_void) {
    call(&ACQUIRE, addr);
}

/// The address of [`ANY_CALLBACK`].
pub(crate) fn any_callback() -> *const c_void {
    &ANY_CALLBACK as *const AtomicPtr<c_void> as *const c_void
}
