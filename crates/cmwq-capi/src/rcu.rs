//! `struct rcu_work` on a real RCU: the userspace RCU library (liburcu,
//! its "bulletproof" flavour, which needs no thread registration). The
//! library does not link liburcu: the kcompat header `linux/rcupdate.h`,
//! which maps the kernel's `rcu_read_lock`, `synchronize_rcu`, `call_rcu`,
//! `rcu_barrier` to it, registers its `call_rcu` and `rcu_barrier` here
//! from a constructor ([`cmwq_rcu_set_ops`]). A program that never
//! includes it has no RCU readers, so for it a grace period is over at once
//! and `queue_rcu_work` queues at once.
//!
//! `queue_rcu_work` arms the item's carrier "for ever" (so it is pending,
//! as the kernel's is during the grace period) and hands the carrier's own
//! `rcu_head` to `call_rcu`; the callback fires the armed item. See
//! `work::queue_after_gp` for the protocol.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::work::{WorkStruct, flush_work, queue_after_gp};
use crate::wq::CWq;

/// liburcu's `struct rcu_head`: a queue link and the callback.
#[repr(C)]
pub(crate) struct RcuHead {
    next: *mut c_void,
    func: Option<RcuCallback>,
}

impl Default for RcuHead {
    fn default() -> Self {
        RcuHead {
            next: std::ptr::null_mut(),
            func: None,
        }
    }
}

/// A callback for `call_rcu`.
pub(crate) type RcuCallback = unsafe extern "C" fn(*mut RcuHead);
type CallRcu = unsafe extern "C" fn(*mut RcuHead, RcuCallback);
type Barrier = unsafe extern "C" fn();

static CALL_RCU: AtomicUsize = AtomicUsize::new(0);
static BARRIER: AtomicUsize = AtomicUsize::new(0);

/// How long an item waits for its grace period when nothing fires it: long
/// enough never to come (a cancel or `destroy_workqueue` may still end it).
pub(crate) const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Registers the RCU that `queue_rcu_work` waits on (`linux/rcupdate.h`
/// does it from a constructor, with liburcu-bp's `call_rcu` and
/// `rcu_barrier`). Both or neither; the first registration stays.
///
/// # Safety
///
/// `call_rcu` queues `head` and calls `func(head)` after a grace period of
/// the RCU that the program's readers use, and `barrier` waits for every
/// callback queued before it; both callable from any thread for the life of
/// the process.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_rcu_set_ops(call_rcu: Option<CallRcu>, barrier: Option<Barrier>) {
    let (Some(c), Some(b)) = (call_rcu, barrier) else {
        return;
    };
    if CALL_RCU
        .compare_exchange(0, c as usize, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        BARRIER.store(b as usize, Ordering::SeqCst);
    }
}

/// Whether an RCU was registered.
pub(crate) fn registered() -> bool {
    CALL_RCU.load(Ordering::SeqCst) != 0 && BARRIER.load(Ordering::SeqCst) != 0
}

/// `call_rcu(head, func)` of the registered RCU.
///
/// # Safety
///
/// [`registered`]; `head` is not queued already and lives until `func` ran.
pub(crate) unsafe fn call(head: *mut RcuHead, func: RcuCallback) {
    let f = CALL_RCU.load(Ordering::SeqCst);
    // SAFETY: stored from a `CallRcu` by `cmwq_rcu_set_ops` (never 0 here:
    // the caller checked `registered`); the caller's promise for `head`.
    unsafe {
        let f: CallRcu = std::mem::transmute::<usize, CallRcu>(f);
        f(head, func);
    }
}

/// `rcu_barrier` of the registered RCU (nothing without one).
pub(crate) fn barrier() {
    let b = BARRIER.load(Ordering::SeqCst);
    if b != 0 {
        // SAFETY: stored from a `Barrier` by `cmwq_rcu_set_ops`, whose
        // caller promised it is callable from any thread.
        unsafe {
            let f: Barrier = std::mem::transmute::<usize, Barrier>(b);
            f();
        }
    }
}

/// `struct rcu_work`: a `work_struct` first (the header's layout).
#[repr(C)]
pub struct RcuWork {
    pub(crate) work: WorkStruct,
}

/// `queue_rcu_work`: queues `rwork` on `wq` after a grace period that
/// starts after this call (an RCU reader inside `rcu_read_lock` now holds
/// it off until it unlocks). False if it was pending or is disabled.
///
/// # Safety
///
/// `wq` is a live workqueue, `rwork` a live, initialised `rcu_work`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn queue_rcu_work(wq: *mut CWq, rwork: *mut RcuWork) -> bool {
    // SAFETY: the caller's promise.
    unsafe { queue_after_gp(&*wq, &(*rwork).work) }
}

/// `flush_rcu_work`: waits for the grace period, then for the run, of the
/// last `queue_rcu_work` of `rwork`. True if it had to wait.
///
/// # Safety
///
/// `rwork` is a live, initialised `rcu_work`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flush_rcu_work(rwork: *mut RcuWork) -> bool {
    // SAFETY: the caller's promise.
    unsafe { flush_work(&mut (*rwork).work) }
}
