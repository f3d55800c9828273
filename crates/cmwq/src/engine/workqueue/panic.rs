//! Where a work item's panic goes: the queue's own handler
//! ([`WorkqueueBuilder::panic_handler`]) or the process-wide hook
//! ([`set_panic_hook`]), and the count of reports that failed. Nothing here
//! may unwind into the worker that reports.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sync::RwLock;

/// A workqueue's own panic handler (see [`WorkqueueBuilder::panic_handler`]).
#[derive(Clone)]
pub(super) struct PanicHandler(pub(super) Arc<dyn Fn(Box<dyn Any + Send>) + Send + Sync>);

impl std::fmt::Debug for PanicHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PanicHandler")
    }
}

type PanicHook = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The process-wide panic hook (its own lock, taken with no other held).
static PANIC_HOOK: RwLock<Option<PanicHook>> = RwLock::new(None);

/// Sets what happens when a work item panics: `hook(workqueue name, message)`.
/// The default prints a line to stderr. The worker survives either way: a
/// hook that panics itself, a write to a closed stderr or a payload whose
/// `Drop` panics is caught too (and counted, see [`panic_reports_failed`]).
/// The hook runs on the worker as the end of the item that panicked, so the
/// waits refused to that item are refused to it (see
/// [`WorkqueueBuilder::panic_handler`](crate::WorkqueueBuilder::panic_handler)). It also hears of a panic in the
/// destructor of a finished item (what a [`Work`](crate::Work)'s closure
/// captured), which the worker drops outside its pool's lock.
///
/// ```
/// cmwq::set_panic_hook(|wq, msg| eprintln!("[{wq}] {msg}"));
/// ```
pub fn set_panic_hook(hook: impl Fn(&str, &str) + Send + Sync + 'static) {
    let old = PANIC_HOOK.write().replace(Arc::new(hook));
    // The old hook's captures are the user's: dropped with the lock released
    // (a destructor may set a hook, or wait for work whose panic is reported).
    drop(old);
}

/// A: panics that could not be reported. `Relaxed`: a counter.
pub(super) static REPORTS_FAILED: AtomicU64 = AtomicU64::new(0);

/// How many panics of work items could not be reported: the panic hook
/// panicked, or dropping the panic's payload did. The items still completed.
pub fn panic_reports_failed() -> u64 {
    REPORTS_FAILED.load(Ordering::Relaxed)
}

/// Reports a work item's panic. Nothing here may unwind into the worker: the
/// hook runs under `catch_unwind`, the default line is written with an error
/// that is ignored (`eprintln!` panics on a closed stderr), and the payload is
/// dropped under `catch_unwind` too. A panic that escapes any of these is
/// leaked rather than dropped, since dropping it could panic again.
pub(crate) fn report_panic(wq: &str, payload: Box<dyn Any + Send>) {
    let msg = crate::trace::payload_str(&*payload)
        .unwrap_or("non-string panic payload")
        .to_string();
    let hook = PANIC_HOOK.read().clone();
    let reported = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &hook {
        Some(h) => h(wq, &msg),
        None => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "cmwq: a work item on workqueue {wq:?} panicked: {msg}"
            );
        }
    }));
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload)));
    for r in [reported, dropped] {
        if let Err(p) = r {
            REPORTS_FAILED.fetch_add(1, Ordering::Relaxed);
            std::mem::forget(p);
        }
    }
}
