//! One-off jobs: spawn a closure on a workqueue, get a handle to its result.
//!
//! A [`Work`](crate::Work) is the kernel's shape: an item that lives on, is
//! queued again and again, and has the pending bit. Most Rust code has a
//! one-off closure instead and wants its result, as with rayon's `spawn`,
//! `threadpool`'s `execute` or tokio's `spawn_blocking`. [`Workqueue::spawn`]
//! is that, on the same engine and under the same rules: the job is a work
//! item of its workqueue, so `max_active`, ordered order, `flush`, `drain` and
//! destroy treat it like any other item.
//!
//! # One allocation at most
//!
//! The closure, its result slot and the item's state word live in one
//! `Arc`: the engine holds it as a `WorkCell<dyn Job>`, the handle as a
//! `WorkCell<dyn Outcome<T>>`, two views of the same allocation. Queueing
//! allocates nothing more in steady state (the `engine_spawn` test counts).
//!
//! A thread that spawns keeps its last [`SPARE_CELLS`] cells in a ring (one
//! reference each) and reuses the oldest, reset in place, once nobody else
//! holds it: the job ran, the engine let go of it and the handle was joined
//! or dropped; a cell still held gives its slot to a new one. A
//! thread that spawns jobs of one closure type in a loop then allocates
//! nothing per spawn, and the cell is freed by the thread that made it rather
//! than by a worker (glibc's `malloc` pays for a chunk freed on another
//! thread: in callgrind, `malloc` and `free` were 210 of the 510 instructions
//! a spawn cost above a re-queued `Work`). A cell is reused only when its
//! `Arc` is unique, so a live handle or a queued job never shares it.
//!
//! # Results, panics, refusals
//!
//! The job's panic is caught and handed to the handle as
//! [`JoinError::Panicked`] with its payload (it is not reported to the panic
//! hooks: the handle is where it goes). A draining workqueue refuses
//! outsiders' items; a spawn it refuses gives [`JoinError::Refused`] at once
//! rather than a handle that never finishes. Dropping the handle detaches the
//! job: it still runs, and its result is dropped. [`JoinHandle::cancel`]
//! takes a job that has not started off its queue (the kernel's
//! `cancel_work` on a pending item), giving [`JoinError::Cancelled`]; a job
//! that started runs to its end.
//!
//! # Waiting
//!
//! [`JoinHandle::join`] blocks (a worker that joins counts as blocked, so its
//! pool starts another); the handle is also a [`Future`], woken by the job
//! itself, so async code can `.await` it on any executor with no runtime
//! dependency. Joining or polling a job's handle from inside that job
//! panics, as any self-wait does.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::threads::forked;
use super::work::{Job, WorkCell, WorkInner};
use crate::sync::model::atomic::{AtomicU8, Ordering};
use crate::sync::{Level, Mutex, MutexGuard};

/// Why a spawned job gave no value.
#[non_exhaustive]
pub enum JoinError {
    /// The job panicked; the payload is what it panicked with.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The workqueue was draining and refused the job; it never ran.
    Refused,
    /// [`JoinHandle::cancel`] took the job off its queue before it started;
    /// it never ran.
    Cancelled,
    /// The handle was joined in a child forked from the process that spawned
    /// the job, which had not finished then: the job belongs to the parent's
    /// workers, and none of them run in the child.
    Forked,
}

impl JoinError {
    /// The panic message, if the payload is a string.
    pub fn message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(p) => crate::trace::payload_str(&**p),
            JoinError::Refused | JoinError::Cancelled | JoinError::Forked => None,
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => f
                .debug_tuple("Panicked")
                .field(&self.message().unwrap_or("<non-string payload>"))
                .finish(),
            JoinError::Refused => f.write_str("Refused"),
            JoinError::Cancelled => f.write_str("Cancelled"),
            JoinError::Forked => f.write_str("Forked"),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(_) => match self.message() {
                Some(m) => write!(f, "the spawned job panicked: {m}"),
                None => f.write_str("the spawned job panicked"),
            },
            JoinError::Refused => {
                f.write_str("the workqueue was draining and refused the spawned job")
            }
            JoinError::Cancelled => f.write_str("the spawned job was cancelled before it started"),
            JoinError::Forked => f.write_str(
                "the spawned job runs in the parent of this forked child, which cannot wait for it",
            ),
        }
    }
}

impl std::error::Error for JoinError {}

/// Where a spawned job is.
enum State<F, T> {
    /// Queued, not started.
    Ready(F),
    Running,
    Done(Result<T, JoinError>),
    /// The handle took the result.
    Taken,
}

/// What the job's lock guards.
struct Slot<F, T> {
    state: State<F, T>,
    /// The task awaiting the handle, if it is polled as a future.
    waker: Option<Waker>,
}

/// [`Handoff`]: the handle was dropped.
const DETACHED: u8 = 1;
/// [`Handoff`]: the job stored its result in the slot.
const DONE: u8 = 2;

/// Who drops a detached job's result: the job or the handle.
///
/// A dropped handle (a detached job) means nobody will take the result, so
/// it is dropped as soon as it exists rather than kept in a cell the ring
/// holds. The job and the handle each set their bit with one
/// read-modify-write, and whichever sets its bit second sees the other's and
/// drops the result. A job whose handle was dropped before it finished (fire
/// and forget, the common case) sees that before it stores anything and
/// drops its value without taking the slot's lock; dropping the handle of a
/// job still running is one read-modify-write.
///
/// Why nothing is lost or dropped twice: both bits live in one word, so the
/// two read-modify-writes are ordered, and exactly one of them sees the other
/// bit set. Each side sets only its own bit, once, so the read-modify-write
/// is an add (one `lock xadd` on x86, where an OR whose old value is used
/// becomes a compare-and-swap loop). The job's early look (a load) only skips the store when the
/// handle's bit is already set, so the handle returned without touching the
/// slot. The orderings are `AcqRel`: the side that drops takes the slot's
/// lock after its read-modify-write, which orders the result's accesses.
///
/// [`finish`](Handoff::finish) and [`detach`](Handoff::detach) are the whole
/// protocol, each side's steps in order; the slot itself is the caller's
/// (closures store and take). `tests/loom_models.rs` (model 7) runs these two
/// functions against every interleaving.
pub(crate) struct Handoff(AtomicU8);

impl Handoff {
    pub(crate) fn new() -> Handoff {
        Handoff(AtomicU8::new(0))
    }

    /// The job's side, with its result `r`: dropped at once if the handle is
    /// gone; else `store` puts it in the slot, and if the handle went
    /// meanwhile, `take_back` takes it out again to be dropped here. What is
    /// dropped is dropped outside the caller's lock (a result's destructor is
    /// the user's code).
    ///
    /// Returns false when it dropped `r` unstored: the handle was gone.
    #[inline]
    pub(crate) fn finish<R, U>(
        &self,
        r: R,
        store: impl FnOnce(R),
        take_back: impl FnOnce() -> U,
    ) -> bool {
        if self.handle_gone() {
            drop(r);
            return false;
        }
        store(r);
        if self.stored() {
            drop(take_back());
        }
        true
    }

    /// The handle's side, when it is dropped: if the result is stored, `take`
    /// takes it out to be dropped here, and this returns true; else the job
    /// drops its result when it comes.
    #[inline]
    pub(crate) fn detach<U>(&self, take: impl FnOnce() -> U) -> bool {
        let prev = self.0.fetch_add(DETACHED, Ordering::AcqRel);
        debug_assert_eq!(prev & DETACHED, 0, "a handle detaches once");
        if prev & DONE == 0 {
            return false;
        }
        drop(take());
        true
    }

    /// The job, before storing its result: the handle is gone.
    #[inline]
    pub(crate) fn handle_gone(&self) -> bool {
        self.0.load(Ordering::Acquire) & DETACHED != 0
    }

    /// The job, after storing its result: the handle went meanwhile.
    #[inline]
    fn stored(&self) -> bool {
        let prev = self.0.fetch_add(DONE, Ordering::AcqRel);
        debug_assert_eq!(prev & DONE, 0, "a job stores its result once");
        prev & DETACHED != 0
    }
}

/// A spawned job: the closure until it runs, then its result, and the waker
/// of a task that awaits it.
struct Spawned<F, T> {
    inner: Mutex<Slot<F, T>>,
    /// Whether the job or the handle drops an unwanted result.
    handoff: Handoff,
}

impl<F, T> Spawned<F, T> {
    fn lock(&self) -> MutexGuard<'_, Slot<F, T>> {
        self.inner.lock()
    }

    /// The job will not run (refused, or cancelled): `why` is its result,
    /// and its closure is dropped after that, outside the lock: a closure
    /// whose destructor panics still leaves a finished handle.
    fn never_ran(&self, why: JoinError) {
        let f = std::mem::replace(&mut self.lock().state, State::Running);
        self.finish(Err(why));
        drop(f);
    }

    /// Hands `r` to the handle (see [`Handoff`]); false if the handle was
    /// already gone, so nobody can wait for this job any more.
    #[inline]
    fn finish(&self, r: Result<T, JoinError>) -> bool {
        let mut waker = None;
        let kept = self.handoff.finish(
            r,
            |r| {
                let mut g = self.lock();
                g.state = State::Done(r);
                waker = g.waker.take();
            },
            || std::mem::replace(&mut self.lock().state, State::Taken),
        );
        if let Some(w) = waker {
            w.wake();
        }
        kept
    }
}

impl<F, T> Job for Spawned<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(&self) -> bool {
        let f = {
            let mut g = self.lock();
            match std::mem::replace(&mut g.state, State::Running) {
                State::Ready(f) => f,
                other => {
                    // A job runs once: it is never queued twice.
                    g.state = other;
                    return true;
                }
            }
        };
        let r = catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::Panicked);
        // Only a live handle can join: a detached job's cycle has no waiter.
        self.finish(r)
    }

    fn refused(&self) {
        self.never_ran(JoinError::Refused);
    }

    fn label(&self) -> super::work::Label {
        super::work::Label::of::<F>()
    }
}

/// The handle's view of a spawned job.
trait Outcome<T>: Send + Sync {
    /// The result if the job is done (taken out), else registers `waker`.
    fn poll_result(&self, waker: Option<&Waker>) -> Option<Result<T, JoinError>>;
    fn finished(&self) -> bool;
    /// The handle is gone: drop the result now or when it comes; `polled`:
    /// the handle registered a waker, which goes now too.
    fn detach(&self, polled: bool);
    /// The handle took the job off its queue before it started.
    fn cancelled(&self);
}

impl<F, T> Outcome<T> for Spawned<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn poll_result(&self, waker: Option<&Waker>) -> Option<Result<T, JoinError>> {
        let mut g = self.lock();
        match std::mem::replace(&mut g.state, State::Taken) {
            State::Done(r) => Some(r),
            State::Taken => panic!("cmwq: a JoinHandle's result was taken twice"),
            other => {
                g.state = other;
                let mut old = None;
                if let Some(w) = waker
                    && !g.waker.as_ref().is_some_and(|old| old.will_wake(w))
                {
                    old = g.waker.replace(w.clone());
                }
                // A replaced waker (another task's) is dropped outside the
                // slot's lock: its drop is the executor's code.
                drop(g);
                drop(old);
                None
            }
        }
    }

    fn finished(&self) -> bool {
        matches!(self.lock().state, State::Done(_) | State::Taken)
    }

    fn cancelled(&self) {
        self.never_ran(JoinError::Cancelled);
    }

    fn detach(&self, polled: bool) {
        let took = self.handoff.detach(|| {
            let mut g = self.lock();
            (
                std::mem::replace(&mut g.state, State::Taken),
                g.waker.take(),
            )
        });
        if !took && polled {
            // Still to finish, and a task's waker may be registered: it goes
            // now, not when the cell is reused (it may hold the task).
            let w = self.lock().waker.take();
            drop(w);
        }
    }
}

/// The result of a job spawned with [`Workqueue::spawn`](crate::Workqueue::spawn):
/// [`join`](Self::join) it, poll [`is_finished`](Self::is_finished), or
/// `.await` it; [`cancel`](Self::cancel) it while it has not started.
/// Dropping it detaches the job.
///
/// ```
/// let wq = cmwq::Workqueue::builder("spawn_doc").unbound().build().unwrap();
/// let h = wq.spawn(|| 6 * 7);
/// assert_eq!(h.join().unwrap(), 42);
/// let bad = wq.spawn(|| -> u8 { panic!("no") });
/// assert_eq!(bad.join().unwrap_err().message(), Some("no"));
/// ```
#[must_use = "dropping a JoinHandle detaches the job; join or await it to get its result"]
pub struct JoinHandle<T> {
    cell: Arc<WorkCell<dyn Outcome<T>>>,
    /// The result was taken (`join`, or a poll that returned `Ready`): the
    /// drop has nothing to detach and skips the job's lock.
    taken: bool,
    /// A poll returned `Pending`: a waker may be registered in the job.
    polled: bool,
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    /// Waits for the job and returns its value, or why there is none.
    ///
    /// # Panics
    ///
    /// When called from the job itself (it would wait for itself), or when the
    /// handle was already polled to completion as a future.
    pub fn join(mut self) -> Result<T, JoinError> {
        self.cell.wait_cycles("JoinHandle::join");
        let r = self.cell.func.poll_result(None).unwrap_or_else(|| {
            // Only a forked child's wait returns before the job finished.
            assert!(forked(), "a finished cycle has a result");
            Err(JoinError::Forked)
        });
        self.taken = true;
        r
    }

    /// Whether the job has finished (ran, panicked, was refused or cancelled).
    pub fn is_finished(&self) -> bool {
        self.cell.func.finished()
    }

    /// Takes the job off its queue if it has not started, as the kernel's
    /// `cancel_work` takes a pending item: it will not run, its closure is
    /// dropped before this returns, and the handle's result is
    /// [`JoinError::Cancelled`]. Returns whether it did; false once a worker
    /// took the job (it runs to its end: a job is never stopped midway) or
    /// if it was refused. The queue's `flush` and `drain` stop waiting for a
    /// cancelled job, and a `max_active` slot it held goes to the next.
    ///
    /// ```
    /// use std::sync::mpsc;
    ///
    /// let wq = cmwq::Workqueue::builder("cancel_job_doc").ordered().build().unwrap();
    /// // The first job holds the ordered queue, so the second stays queued.
    /// let (tx, rx) = mpsc::channel::<()>();
    /// let first = wq.spawn(move || rx.recv().unwrap());
    /// let second = wq.spawn(|| unreachable!("cancelled before it started"));
    /// assert!(second.cancel());
    /// assert!(second.is_finished());
    /// assert!(matches!(second.join(), Err(cmwq::JoinError::Cancelled)));
    /// tx.send(()).unwrap();
    /// first.join().unwrap();
    /// ```
    pub fn cancel(&self) -> bool {
        let c = &*self.cell;
        // The pool that holds the job is written (under its lock) before
        // `spawn` returns this handle; the pool's lock then decides the race
        // with a worker taking the job.
        if !super::pool::steal_at(c.pool.load(Ordering::Relaxed), super::work::addr(c)) {
            return false;
        }
        c.func.cancelled();
        true
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // A forked child's handle lets go of its cell and nothing else: the
        // job's lock may have been held by a thread the child does not have.
        if !self.taken && !forked() {
            self.cell.func.detach(self.polled);
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// # Panics
    ///
    /// When polled from the job itself, which would wait for itself forever
    /// (as [`join`](JoinHandle::join) there panics), or after it returned
    /// `Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.cell.refuse_self_wait("JoinHandle::poll");
        match this.cell.func.poll_result(Some(cx.waker())) {
            Some(r) => {
                this.taken = true;
                Poll::Ready(r)
            }
            None if forked() => {
                // Nothing in a forked child would ever wake this task.
                this.taken = true;
                Poll::Ready(Err(JoinError::Forked))
            }
            None => {
                this.polled = true;
                Poll::Pending
            }
        }
    }
}

/// Cells a spawning thread keeps for reuse (see the module docs): enough for
/// a producer with a few dozen jobs in flight to find its oldest one done.
pub(crate) const SPARE_CELLS: usize = 128;

/// A job cell as the spawning thread's ring holds it, its types erased.
type Spare = Arc<dyn Any + Send + Sync>;

/// The cells a thread spawned last: slot `next` holds the one made
/// [`SPARE_CELLS`] spawns ago, the next to reuse or replace.
struct Ring {
    /// Each `Some` but while [`Ring::cell_for`] looks at it.
    cells: Vec<Option<Spare>>,
    next: usize,
}

thread_local! {
    static SPARE: RefCell<Ring> = const {
        RefCell::new(Ring {
            cells: Vec::new(),
            next: 0,
        })
    };
}

impl Ring {
    /// A cell for `job`: the one in slot `next`, reset in place, if nobody
    /// else holds it (the job ran, the engine dropped it, the handle is gone)
    /// and it was made for `J`; else a new one, which takes the slot (the old
    /// cell lives on with whoever still holds it, and is returned to be
    /// dropped once the ring is released).
    fn cell_for<J: Job>(&mut self, job: impl FnOnce() -> J) -> (Arc<WorkCell<J>>, Option<Spare>) {
        let i = self.next;
        self.next = (i + 1) % SPARE_CELLS;
        let Some(slot) = self.cells.get_mut(i) else {
            let cell = Arc::new(WorkCell::new_claimed(job()));
            self.cells.push(Some(cell.clone()));
            return (cell, None);
        };
        // The cell is taken out of its slot to be typed: one type check.
        let old = match slot.take().map(|c| c.downcast::<WorkCell<J>>()) {
            Some(Ok(mut typed)) => {
                // `get_mut` is `Some` only for a unique `Arc` (no weak ones
                // exist), and orders the last holder's drop before the reset.
                if let Some(cell) = Arc::get_mut(&mut typed) {
                    cell.reset_claimed(job());
                    *slot = Some(typed.clone());
                    return (typed, None);
                }
                Some(typed as Spare)
            }
            Some(Err(other)) => Some(other),
            None => None,
        };
        let cell = Arc::new(WorkCell::new_claimed(job()));
        *slot = Some(cell.clone());
        (cell, old)
    }
}

/// A fresh cell running what `job` makes, its only queue cycle claimed: a
/// spare one of this thread when there is one, else a new allocation (see
/// [`Ring::cell_for`]). The job is made where it is stored, not moved there
/// through every call.
fn cell_for<J: Job>(job: impl FnOnce() -> J) -> Arc<WorkCell<J>> {
    let mut job = Some(job);
    let made = SPARE
        .try_with(|ring| {
            // Busy only when a cell dropped below runs a destructor that spawns.
            let mut ring = ring.try_borrow_mut().ok()?;
            Some(ring.cell_for(job.take().expect("taken once")))
        })
        .ok()
        .flatten();
    match made {
        Some((cell, replaced)) => {
            // Dropped with the ring released: a result's destructor may spawn.
            drop(replaced);
            cell
        }
        None => Arc::new(WorkCell::new_claimed(job.take().expect("not taken")())),
    }
}

/// A job with no handle ([`Workqueue::execute`](crate::Workqueue::execute)):
/// the closure until it runs. Its panic goes to the panic hooks, as a
/// [`Work`](crate::Work)'s does.
struct Detached<F> {
    f: Mutex<Option<F>>,
}

impl<F: FnOnce() + Send + 'static> Job for Detached<F> {
    /// No handle exists, so nobody waits for the cycle: false.
    fn run(&self) -> bool {
        let f = self.f.lock().take();
        if let Some(f) = f {
            f();
        }
        false
    }

    /// A refused closure is dropped at once, not kept in the thread's spare
    /// cells.
    fn refused(&self) {
        let f = self.f.lock().take();
        drop(f);
    }

    fn label(&self) -> super::work::Label {
        super::work::Label::of::<F>()
    }
}

/// A handle-less job's item (at most one allocation), its one queue cycle
/// claimed, for the queue to take.
pub(crate) fn detached<F: FnOnce() + Send + 'static>(f: F) -> Arc<WorkInner> {
    cell_for(|| Detached {
        f: Mutex::new_at(Level::SpawnFn, Some(f)),
    })
}

/// Makes the job's item: at most one allocation, seen by the engine as a
/// work item and by the handle as an outcome.
#[inline]
pub(crate) fn job<F, T>(f: F) -> (Arc<WorkInner>, JoinHandle<T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let cell = cell_for(|| Spawned {
        inner: Mutex::new_at(
            Level::SpawnSlot,
            Slot {
                state: State::Ready(f),
                waker: None,
            },
        ),
        handoff: Handoff::new(),
    });
    let item: Arc<WorkInner> = cell.clone();
    let handle = JoinHandle {
        cell,
        taken: false,
        polled: false,
    };
    (item, handle)
}

/// The release layout only: a debug build's locks carry the lock-order
/// check's level, and its cells are bigger by design.
#[cfg(all(
    test,
    target_os = "linux",
    target_pointer_width = "64",
    not(debug_assertions)
))]
mod tests {
    use super::*;

    /// The cell of a spawned job whose closure holds one pointer (the
    /// bench's `--submit spawn`: an `Arc` clone) and returns `()`, with the
    /// `Arc`'s two counts before it, is at most 120 bytes: one 128-byte
    /// chunk of glibc's `malloc` (8 bytes of it its header), with the
    /// header of `WorkCell` at 48 bytes. One byte more in the header pads
    /// it to 56 and the cell to 128, a 144-byte chunk: the ring's cells
    /// then span 12% more memory and more of them a third cache line
    /// (cachegrind: about 0.15 more L1 misses per spawn).
    #[test]
    fn a_spawned_jobs_cell_fits_a_128_byte_chunk() {
        let header = std::mem::size_of::<WorkCell<()>>();
        assert!(header <= 48, "WorkCell's header grew to {header} bytes");
        fn arc_inner<J: Job>(_: &J) -> usize {
            2 * std::mem::size_of::<usize>() + std::mem::size_of::<WorkCell<J>>()
        }
        let d = Arc::new(());
        let job = Spawned {
            inner: Mutex::new_at(
                Level::SpawnSlot,
                Slot {
                    state: State::Ready(move || drop(d)),
                    waker: None,
                },
            ),
            handoff: Handoff::new(),
        };
        let n = arc_inner(&job);
        assert!(n <= 120, "a spawned job's cell takes {n} bytes");
    }
}
