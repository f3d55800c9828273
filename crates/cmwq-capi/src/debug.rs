//! What a worker says about itself and what is busy: `set_worker_desc`,
//! `print_worker_info`, `current_is_workqueue_rescuer`,
//! `show_all_workqueues`, `show_one_workqueue`. Printed on stderr, where
//! the kcompat layer's `pr_warn` and the lockup report go.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_void};

use crate::wq::CWq;

/// The kernel's `WORKER_DESC_LEN`: a description keeps 23 bytes and a NUL.
const WORKER_DESC_LEN: usize = 24;

thread_local! {
    /// The description the running callback gave its worker.
    static DESC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A C callback returned: its worker's description goes with it.
pub(crate) fn item_done() {
    DESC.with(|d| d.borrow_mut().clear());
}

/// `set_worker_desc` once the header has formatted it: describes what the
/// calling worker's current item is for, printed by `print_worker_info`
/// (cut to `WORKER_DESC_LEN - 1` bytes). Kept until the callback returns;
/// a call outside a work item's callback does nothing, as in the kernel.
///
/// # Safety
///
/// `desc` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_set_worker_desc(desc: *const c_char) {
    if desc.is_null() || !crate::work::in_callback() {
        return;
    }
    // SAFETY: the caller's promise.
    let b = unsafe { CStr::from_ptr(desc) }.to_bytes();
    let b = &b[..b.len().min(WORKER_DESC_LEN - 1)];
    DESC.with(|d| *d.borrow_mut() = String::from_utf8_lossy(b).into_owned());
}

/// `print_worker_info`: when `task` is the calling thread's task
/// (`current`) and it runs a work item, prints `<log_lvl>Workqueue: <queue>
/// <function> (<description>)` on stderr, as the kernel's stack dumps do;
/// nothing for another task (user space cannot read another thread's
/// worker state) or a thread that runs no item.
///
/// # Safety
///
/// `log_lvl` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn print_worker_info(log_lvl: *const c_char, task: *mut c_void) {
    if task.is_null() || task != crate::kcompat::cmwq_kc_current() {
        return;
    }
    let (Some(wq), Some(func)) = (crate::work::current_wq(), crate::work::current_func()) else {
        return;
    };
    let lvl = if log_lvl.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's promise.
        unsafe { CStr::from_ptr(log_lvl) }
            .to_string_lossy()
            .into_owned()
    };
    let mut line = format!("{lvl}Workqueue: {} {}", wq.name, crate::symbols::name(func));
    DESC.with(|d| {
        let d = d.borrow();
        if !d.is_empty() {
            line.push_str(&format!(" ({d})"));
        }
    });
    eprintln!("{line}");
}

/// `current_is_workqueue_rescuer`: true when the calling thread runs a C
/// work item as a `WQ_MEM_RECLAIM` queue's rescuer (its pool could not
/// start a worker).
#[unsafe(no_mangle)]
pub extern "C" fn current_is_workqueue_rescuer() -> bool {
    crate::work::in_callback() && cmwq::current_is_rescuer()
}

/// `show_all_workqueues`: prints on stderr every workqueue with items
/// active or held back (what runs, what waits), then every pool with a busy
/// worker, in the words of the lockup report.
#[unsafe(no_mangle)]
pub extern "C" fn show_all_workqueues() {
    eprint!("{}", cmwq::show_all_workqueues());
}

/// `show_one_workqueue`: prints on stderr what `show_all_workqueues`
/// prints for `wq` alone; nothing when no item of it is active or held back.
///
/// # Safety
///
/// `wq` is a live workqueue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn show_one_workqueue(wq: *mut CWq) {
    // SAFETY: the caller's promise.
    let w = unsafe { &*wq };
    eprint!("{}", w.wq.show_busy());
}
