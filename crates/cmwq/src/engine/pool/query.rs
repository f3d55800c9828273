//! Questions a worker's callback (or the C API) asks about the engine: is
//! this thread a rescuer, what is busy (the kernel's `show_all_workqueues`
//! and `show_one_workqueue`, in the lockup report's words).

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    /// The calling thread is a `MEM_RECLAIM` queue's rescuer.
    static RESCUER: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a rescuer (its first act).
pub(crate) fn mark_rescuer() {
    RESCUER.with(|r| r.set(true));
}

/// True when the calling thread is a `MEM_RECLAIM` workqueue's rescuer (the
/// kernel's `current_is_workqueue_rescuer`): an item that runs there runs
/// because its pool could not start a worker.
pub fn current_is_rescuer() -> bool {
    RESCUER.with(Cell::get)
}

/// The busy workqueues and pools (`only`: one workqueue's pwqs, by id), as
/// the lockup report lists them.
pub(crate) fn show_busy(only: Option<u64>) -> String {
    let mut out = String::new();
    super::lockup::show_all(&mut out, Instant::now(), only);
    out
}

/// Every busy workqueue with what runs and what waits, then every pool with
/// a busy worker: what the kernel's `show_all_workqueues` prints (and the
/// lockup report ends with). Empty of items when nothing is busy.
pub fn show_all_workqueues() -> String {
    show_busy(None)
}
