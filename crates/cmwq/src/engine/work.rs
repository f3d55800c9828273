//! Work items: a callback and one atomic state word.
//!
//! The state word carries the kernel's `PENDING` bit, a disable depth and
//! whether the item is a one-off job's (`ONCE`). Whoever
//! sets `PENDING` owns the next *queue cycle*: that thread, and only that thread,
//! puts the item on a list; the worker that takes it off clears `PENDING` under
//! the pool lock before it calls the callback, so the callback may queue its own
//! item again. A cycle ends when the callback returns or when a cancel steals the
//! item off its list; the `queued` and `done` counters count cycles, which is
//! what [`Work::flush`] waits on (the kernel inserts a barrier work instead; a
//! counter pair gives the same answer without a second list entry).
//!
//! A one-off job's cell (`spawn`, `execute`) is born with its only cycle
//! claimed and is never queued again: the worker leaves its PENDING bit set
//! (the clear above is for items that can be queued again), and ends its
//! cycle only if someone may wait for it (a spawned job whose handle still
//! lives, see [`Job::run`]), which spares two fully ordered read-modify-writes
//! per fire-and-forget job. Its handle's `cancel` needs no retry either: the
//! job is on its pool's lists before `spawn` returns the handle, so the pool
//! named by `pool` either still holds it or a worker has taken it.
//!
//! Where a pending item sits is named by `pool`, the id of the pool whose lists
//! hold it (or where it last ran). A canceller that sees `PENDING` looks there; if
//! the queueing thread has not pushed the item yet it retries, as the kernel's
//! `try_to_grab_pending` returns `-EAGAIN`.

use crate::sync::model::atomic::{AtomicU32, AtomicU64, Ordering};
use std::fmt;
use std::sync::Arc;

use crate::sync::model::{Condvar, Level, Mutex, dekker_point};

pub(crate) const PENDING: u32 = 1;
/// A one-off job's cell (`spawn`, `execute`): queued once, never again, so
/// the worker leaves its PENDING bit alone. Set only while nobody else holds
/// the cell (made or reset with `&mut`); every read-modify-write of the word
/// keeps it (they set or clear PENDING, or add or take a disable, which a
/// one-off cell never gets). A bit of `state` rather than a `bool` of its
/// own: the byte a `bool` takes would pad the cell's header from 48 to 56
/// bytes, and a spawned job's cell past glibc's 128-byte chunk.
const ONCE: u32 = 1 << 1;
const DISABLE_ONE: u32 = 1 << 16;
/// The deepest disable depth the state word holds (its upper 16 bits): a
/// `disable` past it leaves the depth there (and says so once), as the
/// kernel's `WORK_OFFQ_DISABLE_MAX` saturates, rather than wrap to enabled.
pub(crate) const DISABLE_MAX: u32 = u32::MAX / DISABLE_ONE;

/// What a work item runs: a [`Work`]'s callback, or a spawned job
/// ([`crate::JoinHandle`]). Stored inline at the end of the item's
/// [`WorkCell`], so an item is one allocation whatever it runs.
pub(crate) trait Job: Send + Sync + 'static {
    /// Runs one cycle. Returns whether anyone may wait for the cycle's end
    /// ([`WorkCell::wait_cycles`]): always for a [`Work`]'s callback; for a
    /// one-off job only while its handle lives (a detached or handle-less
    /// job has nobody left who could), and the worker then skips
    /// [`WorkCell::finish_cycle`] and its fully ordered read-modify-write.
    fn run(&self) -> bool;

    /// The workqueue refused the cycle (it drains): it will not run. A
    /// [`Work`]'s callback stays for the next queue; a one-off job lets go
    /// of its closure now (its cell may be kept for reuse) and a spawned one
    /// tells its handle.
    fn refused(&self) {}

    /// What the lockup report calls the item (the kernel prints its
    /// callback's symbol): the callback's type, a closure's being named
    /// after the function that made it.
    fn label(&self) -> Label {
        Label::of::<Self>()
    }
}

impl<F: Fn() + Send + Sync + 'static> Job for F {
    fn run(&self) -> bool {
        self();
        true
    }
}

/// What names an item in a lockup report, taken by a worker when it starts
/// the item (one call that returns a constant for a Rust callback) and read
/// only when a report is printed: a function that makes the text.
///
/// One reference to a function object, two words, so `Job::label` returns it
/// in registers. (An enum of a type name and a lookup function took three
/// words, returned through memory; reading it back from there at every item
/// start was a store-forwarding stall, a fifth of `process_one_work`'s
/// samples under `perf`.)
#[derive(Clone, Copy)]
pub(crate) struct Label(&'static (dyn Fn() -> String + Send + Sync));

impl Label {
    /// A Rust callback's: its type's name (a closure is named after the
    /// function that made it).
    pub(crate) fn of<T: ?Sized + 'static>() -> Label {
        Label(&type_label::<T>)
    }

    /// Found when asked: a C callback's symbol, looked up by the C API.
    pub(crate) fn lookup(f: &'static (dyn Fn() -> String + Send + Sync)) -> Label {
        Label(f)
    }

    /// The name, looked up now if it must be.
    pub(crate) fn text(self) -> String {
        (self.0)()
    }
}

fn type_label<T: ?Sized>() -> String {
    std::any::type_name::<T>().to_string()
}

/// A callback that names itself with a function of its own (the C API's
/// carriers name the C function they call): see [`Work::with_label`].
struct Labeled<F> {
    f: F,
    label: &'static (dyn Fn() -> String + Send + Sync),
}

impl<F: Fn() + Send + Sync + 'static> Job for Labeled<F> {
    fn run(&self) -> bool {
        (self.f)();
        true
    }

    fn label(&self) -> Label {
        Label::lookup(self.label)
    }
}

/// The shared part of a [`Work`]: the state word, the cycle counters and the
/// job, in one allocation (the job last, so the cell can be unsized to
/// `WorkCell<dyn Job>`, the type the engine queues).
///
/// Locking (see the engine's module docs):
///
/// - `state` A: PENDING, ONCE and the disable depth. `SeqCst` read-modify-writes:
///   the claim (`try_claim`, success and its RMW on failure) pairs with the
///   worker's `clear_pending`, so whatever a queuer stored before a failed
///   claim is seen by the run that was pending (the kernel's fully ordered
///   `test_and_set_bit`); loom model 1 runs this code.
/// - `pool` A: id + 1 of the pool that holds or last ran the item, written
///   under that pool's lock. `Relaxed`: a queuer reads it after its claim,
///   whose acquire follows the worker's clear, which followed the write; a
///   canceller reads it and then takes that pool's lock (retrying if the
///   item is not there yet).
/// - `queued`, `done` A: cycles begun and ended. `SeqCst`: `done` pairs with
///   `waiters` (a finisher adds to `done` then reads `waiters`; a waiter adds
///   to `waiters` then reads `done`), and `queued` is read with them.
///   `queued` has one writer at a time, the thread whose claim set PENDING:
///   the next claim can succeed only after this cycle's item was put on a
///   list (under a pool or timer lock, after the write) and PENDING was
///   cleared (a `SeqCst` RMW the next claim reads from), so it is a plain
///   load and a `Release` store, not a read-modify-write; a waiter that
///   follows a `queue` (same thread, or synchronized with it) sees the new
///   count, one that races with it may wait for the cycle before.
/// - `waiters` A: threads in `wait_cycles`. `SeqCst`: pairs with `done`.
/// - `wait_lock` W: taken only to wait on and notify `wait_cv`.
/// - `queued_at` A: when the item was put on a worklist (ns, see
///   [`crate::hist`]; 0: not stamped), written by its queuer before it
///   takes the pool lock and read by the worker under that lock before it
///   clears PENDING, so no later queue overwrites it first. `Relaxed`:
///   ordered by the pool lock.
/// - ONCE (in `state`) I: written only with `&mut` (`new_claimed`,
///   `reset_claimed`); read with a `Relaxed` load.
/// - `func` I.
pub(crate) struct WorkCell<J: ?Sized> {
    pub(crate) state: AtomicU32,
    /// Id + 1 of the pool that holds the item or last ran it; 0: never queued.
    pub(crate) pool: AtomicU32,
    pub(crate) queued: AtomicU64,
    pub(crate) done: AtomicU64,
    waiters: AtomicU32,
    /// When the item was put on a worklist, for latency histograms.
    pub(crate) queued_at: AtomicU64,
    wait_lock: Mutex<()>,
    wait_cv: Condvar,
    pub(crate) func: J,
}

/// A work item as the engine holds it.
pub(crate) type WorkInner = WorkCell<dyn Job>;

impl<J> WorkCell<J> {
    /// A fresh, idle item running `func`.
    pub(crate) fn new(func: J) -> WorkCell<J> {
        WorkCell {
            state: AtomicU32::new(0),
            pool: AtomicU32::new(0),
            queued: AtomicU64::new(0),
            done: AtomicU64::new(0),
            waiters: AtomicU32::new(0),
            queued_at: AtomicU64::new(0),
            wait_lock: Mutex::new_at(Level::Wait, ()),
            wait_cv: Condvar::new(),
            func,
        }
    }

    /// A one-off job's item (`spawn`, `execute`): born with its only queue
    /// cycle claimed (PENDING set, one cycle queued). Nobody else can see the
    /// cell yet, so plain stores do what [`try_claim`](Self::try_claim)'s
    /// two fully ordered read-modify-writes do for an item others share; the
    /// pool lock that queues it publishes them to the worker.
    pub(crate) fn new_claimed(func: J) -> WorkCell<J> {
        let c = WorkCell::new(func);
        c.state.store(PENDING | ONCE, Ordering::Relaxed);
        c.queued.store(1, Ordering::Relaxed);
        c
    }

    /// Makes an idle item nobody else holds (`&mut`) new again, running
    /// `func`, with its only queue cycle claimed: what
    /// [`new_claimed`](Self::new_claimed) gives, without building a second
    /// cell. The counters start over: nobody waits on a unique cell's last
    /// cycle. Inlined into the spawn path, so the new `func` is written
    /// straight into the cell rather than built on the caller's stack and
    /// copied with wider loads than the stores that just wrote it (a stall
    /// on every reuse, `perf annotate`: most of this function's samples).
    #[inline(always)]
    pub(crate) fn reset_claimed(&mut self, func: J) {
        self.state.store(PENDING | ONCE, Ordering::Relaxed);
        self.pool.store(0, Ordering::Relaxed);
        self.queued.store(1, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
        self.waiters.store(0, Ordering::Relaxed);
        self.func = func;
    }
}

/// The address that names an item (thin, whatever its job type).
pub(crate) fn addr<J: ?Sized>(w: &WorkCell<J>) -> usize {
    w as *const WorkCell<J> as *const u8 as usize
}

impl<J: ?Sized> WorkCell<J> {
    /// A one-off job's cell (`spawn`, `execute`): queued once, never again,
    /// so the worker leaves its PENDING bit alone (see [`ONCE`]).
    #[inline]
    pub(crate) fn once(&self) -> bool {
        self.state.load(Ordering::Relaxed) & ONCE != 0
    }

    /// Takes the next queue cycle: sets PENDING unless it is set or the work is disabled.
    pub(crate) fn try_claim(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & PENDING != 0 || s >= DISABLE_ONE {
                // Fail through a write, never a plain load: the caller's earlier
                // stores must be ordered before the worker's clear of PENDING, or
                // the pending run may miss what the caller published (the kernel
                // made test_and_set_bit fully ordered on failure for this reason).
                match self
                    .state
                    .compare_exchange_weak(s, s, Ordering::SeqCst, Ordering::Relaxed)
                {
                    Ok(_) => return false,
                    Err(now) => {
                        s = now;
                        continue;
                    }
                }
            }
            match self.state.compare_exchange_weak(
                s,
                s | PENDING,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    // Only the owner of PENDING writes `queued` (see the
                    // struct's docs): a load and a store count the cycle,
                    // no second read-modify-write.
                    let q = self.queued.load(Ordering::Relaxed);
                    self.queued.store(q + 1, Ordering::Release);
                    return true;
                }
                Err(now) => s = now,
            }
        }
    }

    pub(crate) fn clear_pending(&self) {
        self.state.fetch_and(!PENDING, Ordering::SeqCst);
    }

    /// Ends one cycle (ran or was cancelled) and wakes flushers.
    pub(crate) fn finish_cycle(&self) {
        self.done.fetch_add(1, Ordering::SeqCst);
        dekker_point();
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.wait_lock.lock();
            self.wait_cv.notify_all();
        }
    }

    /// Waits until every cycle queued so far has ended; true if it had to wait.
    /// `call` names the public call, for the self-wait panic.
    pub(crate) fn wait_cycles(&self, call: &str) -> bool {
        self.refuse_self_wait(call);
        let target = self.queued.load(Ordering::SeqCst);
        if self.done.load(Ordering::SeqCst) >= target || super::threads::forked() {
            // Done, or in a forked child, where no thread runs the cycles
            // the parent had in flight.
            return false;
        }
        // Waiting on a worker is blocking: let its pool start another worker.
        let _blocked = super::pool::BlockingGuard::new();
        self.waiters.fetch_add(1, Ordering::SeqCst);
        dekker_point();
        let mut g = self.wait_lock.lock();
        while self.done.load(Ordering::SeqCst) < target {
            g = self.wait_cv.wait(g);
        }
        drop(g);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        true
    }

    /// Waiting for this item from its own callback would never end (the cycle
    /// that waits is one of those waited for): panic with the call and the
    /// queue instead of hanging, as the kernel's `check_flush_dependency` and
    /// lockdep report it. The worker survives the panic (it is the item's).
    pub(crate) fn refuse_self_wait(&self, call: &str) {
        if super::pool::current_work_addr() == addr(self) {
            let wq = super::workqueue::current_wq_name().unwrap_or_else(|| "?".into());
            panic!(
                "cmwq: {call} called from the work item it waits for (on workqueue {wq:?}): \
                 it would wait for itself forever"
            );
        }
    }

    /// One more disable; false (and a note on stderr, once per process) if
    /// the depth is at [`DISABLE_MAX`] already and stays there.
    fn disable_inc(&self) -> bool {
        let r = self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                (s / DISABLE_ONE < DISABLE_MAX).then(|| s + DISABLE_ONE)
            });
        if r.is_err() {
            disable_saturated();
        }
        r.is_ok()
    }

    fn disable_dec(&self) -> bool {
        let prev = self
            .state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                (s >= DISABLE_ONE).then(|| s - DISABLE_ONE)
            });
        matches!(prev, Ok(s) if s < 2 * DISABLE_ONE)
    }
}

/// A `disable` found the depth at its limit: said once per process.
#[cold]
fn disable_saturated() {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!(
            "cmwq: a work item's disable depth reached its limit of {DISABLE_MAX}: it stays \
             disabled, and further disable() calls do not nest (the kernel saturates it too)"
        )
    });
}

impl WorkInner {
    /// Steals a pending cycle off whatever list holds it. True if it was pending.
    /// Only a `Work`'s item: a one-off job's keeps PENDING after it ran, so
    /// this would wait forever for a push that never comes (its handle's
    /// `cancel` steals by address instead).
    pub(crate) fn grab_pending(self: &Arc<Self>) -> bool {
        debug_assert!(!self.once(), "grab_pending on a one-off job's cell");
        loop {
            if self.state.load(Ordering::SeqCst) & PENDING == 0 {
                return false;
            }
            if super::timer::steal(self) {
                return true;
            }
            if super::pool::steal_queued(self) {
                return true;
            }
            if super::threads::forked() {
                // The thread that owns PENDING is the parent's.
                return false;
            }
            // The queueing thread owns PENDING but has not pushed the item yet.
            std::thread::yield_now();
        }
    }
}

/// A work item: a callback that a [`Workqueue`](crate::Workqueue) runs on one of its workers.
///
/// Cloning a `Work` gives another handle to the same item. As in the kernel:
/// queueing an item that is already pending returns false; an item queued on
/// one workqueue never runs on two workers at once; a running item may be
/// queued again. Queued on two workqueues, it may run on both at once (the
/// kernel gives the same guarantee, per workqueue).
///
/// The closure lives as long as the item's last handle. When a worker holds
/// that last handle (the item was queued and every `Work` dropped), the
/// closure and what it captured are dropped on the worker after its run,
/// with no lock of cmwq's held: a destructor may queue work or drop a
/// [`Workqueue`](crate::Workqueue). A busy worker drops such closures 32
/// at a time, between two of its items, and all of them before it goes
/// idle, so the drop may come up to 32 of that worker's items after the run.
///
/// ```
/// use cmwq::{Work, Workqueue};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// let wq = Workqueue::builder("example").build().unwrap();
/// let n = Arc::new(AtomicUsize::new(0));
/// let n2 = n.clone();
/// let w = Work::new(move || { n2.fetch_add(1, Ordering::SeqCst); });
/// assert!(wq.queue(&w));
/// w.flush();
/// assert_eq!(n.load(Ordering::SeqCst), 1);
/// ```
#[derive(Clone)]
pub struct Work(pub(crate) Arc<WorkInner>);

impl fmt::Debug for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Work")
            .field("pending", &self.is_pending())
            .field("queued", &self.0.queued.load(Ordering::SeqCst))
            .field("done", &self.0.done.load(Ordering::SeqCst))
            .finish()
    }
}

impl Work {
    /// Makes a work item that runs `f` each time it is queued.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> Work {
        // One allocation: the callback lives inside the cell.
        Work(Arc::new(WorkCell::new(f)))
    }

    /// [`Work::new`], with `label` giving the name the lockup report prints
    /// for the item (by default the closure's type). For the C API, whose
    /// items all run one closure that calls a C function.
    #[doc(hidden)]
    pub fn with_label(
        f: impl Fn() + Send + Sync + 'static,
        label: &'static (dyn Fn() -> String + Send + Sync),
    ) -> Work {
        Work(Arc::new(WorkCell::new(Labeled { f, label })))
    }

    /// True while the item is queued and has not started (the kernel's `work_pending`).
    pub fn is_pending(&self) -> bool {
        self.0.state.load(Ordering::SeqCst) & PENDING != 0
    }

    /// True while a callback of the item runs (the kernel's
    /// `WORK_BUSY_RUNNING`): a cycle began and has not ended, besides the
    /// one that is pending. A hint, as the kernel's `work_busy` is: it may
    /// change as soon as it is read.
    pub fn is_running(&self) -> bool {
        let done = self.0.done.load(Ordering::SeqCst);
        let queued = self.0.queued.load(Ordering::SeqCst);
        let pending = u64::from(self.is_pending());
        queued.saturating_sub(done) > pending
    }

    /// True while the item is disabled (queueing it returns false).
    pub fn is_disabled(&self) -> bool {
        self.0.state.load(Ordering::SeqCst) >= DISABLE_ONE
    }

    /// Waits until the last queued instance has finished running (`flush_work`).
    /// Returns false if there was nothing to wait for.
    ///
    /// # Panics
    ///
    /// When called from this item's own callback, which would wait for itself.
    pub fn flush(&self) -> bool {
        self.0.wait_cycles("Work::flush")
    }

    /// Takes the item off its queue if it is pending (`cancel_work`); does not wait
    /// for a running instance. Returns whether it was pending.
    ///
    /// ```
    /// use cmwq::{Work, Workqueue};
    /// use std::sync::mpsc;
    ///
    /// let wq = Workqueue::builder("cancel_doc").ordered().build().unwrap();
    /// // Hold the queue's only slot so the second item stays pending.
    /// let (tx, rx) = mpsc::channel::<()>();
    /// let rx = std::sync::Mutex::new(rx);
    /// let gate = Work::new(move || { let _ = rx.lock().unwrap().recv(); });
    /// let w = Work::new(|| unreachable!("cancelled before it ran"));
    /// assert!(wq.queue(&gate));
    /// assert!(wq.queue(&w));
    /// assert!(w.cancel());
    /// assert!(!w.is_pending());
    /// assert!(!w.cancel(), "nothing left to cancel");
    /// tx.send(()).unwrap();
    /// wq.flush();
    /// ```
    pub fn cancel(&self) -> bool {
        self.0.grab_pending()
    }

    /// Cancels a pending instance and waits for a running one (`cancel_work_sync`).
    /// While it runs, queueing the item returns false. Returns whether it was pending.
    ///
    /// ```
    /// use cmwq::{Work, Workqueue};
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    ///
    /// let wq = Workqueue::builder("cancel_sync_doc").build().unwrap();
    /// let (started, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    /// let (s, d) = (started.clone(), done.clone());
    /// let w = Work::new(move || {
    ///     s.store(true, Ordering::SeqCst);
    ///     std::thread::sleep(std::time::Duration::from_millis(2));
    ///     d.store(true, Ordering::SeqCst);
    /// });
    /// assert!(wq.queue(&w));
    /// while !started.load(Ordering::SeqCst) {
    ///     std::thread::yield_now();
    /// }
    /// // Running, not pending: nothing to cancel, but the call waits for it.
    /// assert!(!w.cancel_sync());
    /// assert!(done.load(Ordering::SeqCst));
    /// assert!(!w.is_disabled(), "usable again afterwards");
    /// assert!(wq.queue(&w));
    /// w.flush();
    /// ```
    ///
    /// # Panics
    ///
    /// When called from this item's own callback, which would wait for itself.
    pub fn cancel_sync(&self) -> bool {
        self.0.refuse_self_wait("Work::cancel_sync");
        // At the depth limit, the disable it could not add is not taken off.
        let added = self.0.disable_inc();
        let was = self.0.grab_pending();
        self.0.wait_cycles("Work::cancel_sync");
        if added {
            self.0.disable_dec();
        }
        was
    }

    /// Disables the item: cancels a pending instance and makes `queue` return false
    /// until a matching [`enable`](Self::enable). Nests, up to a depth of 65,535:
    /// further calls leave the depth there (said once on stderr), as the kernel
    /// saturates it, so the item stays disabled until enabled 65,535 times.
    /// Returns whether it was pending.
    ///
    /// ```
    /// use cmwq::{Work, Workqueue};
    /// let wq = Workqueue::builder("disable_doc").build().unwrap();
    /// let w = Work::new(|| {});
    /// w.disable();
    /// w.disable(); // nests
    /// assert!(w.is_disabled());
    /// assert!(!wq.queue(&w));
    /// assert!(!w.enable(), "still disabled once");
    /// assert!(!wq.queue(&w));
    /// assert!(w.enable());
    /// assert!(wq.queue(&w));
    /// w.flush();
    /// ```
    pub fn disable(&self) -> bool {
        self.0.disable_inc();
        self.0.grab_pending()
    }

    /// Like [`disable`](Self::disable), then waits for a running instance.
    ///
    /// ```
    /// use cmwq::{Work, Workqueue};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let wq = Workqueue::builder("disable_sync_doc").build().unwrap();
    /// let n = Arc::new(AtomicUsize::new(0));
    /// let n2 = n.clone();
    /// let w = Work::new(move || { n2.fetch_add(1, Ordering::SeqCst); });
    /// wq.queue(&w);
    /// w.disable_sync();
    /// // Whether it ran or was cancelled, nothing of it runs any more.
    /// let ran = n.load(Ordering::SeqCst);
    /// assert!(ran <= 1);
    /// assert!(!wq.queue(&w));
    /// wq.flush();
    /// assert_eq!(n.load(Ordering::SeqCst), ran);
    /// assert!(w.enable());
    /// ```
    ///
    /// # Panics
    ///
    /// When called from this item's own callback, which would wait for itself.
    pub fn disable_sync(&self) -> bool {
        self.0.refuse_self_wait("Work::disable_sync");
        let was = self.disable();
        self.0.wait_cycles("Work::disable_sync");
        was
    }

    /// Undoes one [`disable`](Self::disable). Returns true when the item is enabled again.
    /// Enabling an item that is not disabled does nothing and returns false.
    /// See [`disable`](Self::disable) for an example.
    pub fn enable(&self) -> bool {
        self.0.disable_dec()
    }
}

/// What `loom_api` (a sibling module) needs of the private methods, for the
/// loom models: `--cfg loom` builds only.
#[cfg(loom)]
impl<J: ?Sized> WorkCell<J> {
    pub(super) fn loom_disable_inc(&self) {
        self.disable_inc();
    }

    pub(super) fn loom_disable_dec(&self) -> bool {
        self.disable_dec()
    }
}
