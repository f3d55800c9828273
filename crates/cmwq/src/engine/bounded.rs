//! Bounded workqueues: a limit on the items that wait (`max_queued`), the
//! `try_` calls that fail fast when it is reached, and the wait of the others.
//!
//! Why: `queue`, `spawn` and `execute` never refuse for lack of room, so a
//! producer faster than its consumers grows the queue without limit (the
//! kernel never needs a limit: its producers are the kernel). A workqueue
//! built with [`WorkqueueBuilder::max_queued`] counts its *waiting* items,
//! those queued and not started, and keeps them at or below the limit:
//!
//! - [`Workqueue::try_queue`], [`Workqueue::try_spawn`] and
//!   [`Workqueue::try_execute`] take a slot or fail at once with
//!   [`QueueFull`], which hands back what was given (the closure, or the
//!   `&Work`).
//! - `queue`, `spawn`, `execute` (and their `_on` forms) wait for a slot.
//!   The wait counts as blocking when the caller is a worker (its pool may
//!   start another). From an item of the *same* workqueue the wait could be
//!   for that very item (a queue whose every active slot waits for room is
//!   stuck), so a full queue refuses those callers: the `_on` calls with
//!   [`Error::FullFromOwnItem`], the others (which return a bool or a
//!   handle) with a panic naming the call; the `try_` forms work there.
//! - A [`Work`] that is already pending is not queued again and takes no
//!   slot: its PENDING bit is claimed first, and a claim that finds no room
//!   is given back (a cycle that ends at once) while the caller waits.
//! - Delayed work counts from the moment its timer fires and never waits
//!   (the timer thread serves every queue): it may take the count past the
//!   limit, which the producers' calls then wait out. Items its own item
//!   queues with room to spare and items a draining queue refuses behave as
//!   on an unbounded queue.
//!
//! # The count
//!
//! One atomic per bounded workqueue: a producer takes a slot with a
//! compare-and-swap that never passes the limit, and the worker that starts
//! an item (or the `cancel` that takes one off its list) gives it back. So
//! "never more than `max_queued` waiting" holds at every instant for the
//! producers' items, with no lock. A producer that finds no room registers
//! as a sleeper and waits on a condition variable; the giver wakes one only
//! when a sleeper is registered. Why no wakeup is lost: the sleeper stores
//! its registration and then loads the count (inside the lock), the giver
//! stores the count and then loads the registrations (`SeqCst`, a Dekker
//! pair), so at least one of them sees the other; a giver that sees a
//! sleeper takes the lock to notify, so the notification lands either
//! before the sleeper's look (which then sees the room) or while it waits.
//!
//! An unbounded workqueue (the default) pays one predictable branch on an
//! `Option` where an item is queued and one where it starts.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::pool::{self, BlockingGuard};
use super::spawn::{self, JoinHandle};
use super::threads;
use super::work::{Work, WorkInner};
use super::workqueue::{Workqueue, WorkqueueBuilder, WqInner};
use crate::error::Error;
use crate::sync::{Condvar, Level, Mutex};
use crate::types::WorkqueueStats;

/// The limit of a bounded workqueue and its count (`WqInner::bound`).
pub(crate) struct Bound {
    /// I: `max_queued`.
    max: usize,
    /// A: items queued and not started (or taken off their list).
    /// `SeqCst`: pairs with `sleepers` (see the module docs).
    waiting: AtomicUsize,
    /// A: producers waiting for room. `SeqCst`: pairs with `waiting`.
    sleepers: AtomicUsize,
    /// A: the most items that waited at once. `Relaxed`: a statistic.
    peak: AtomicUsize,
    /// A: calls that found the queue full (a `try_` refused, or a call that
    /// waited or was refused). `Relaxed`: a counter.
    full: AtomicU64,
    /// Sleepers wait on `room` under this lock (a leaf).
    lock: Mutex<()>,
    room: Condvar,
}

impl Bound {
    pub(crate) fn new(max: usize) -> Bound {
        Bound {
            max,
            waiting: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            full: AtomicU64::new(0),
            lock: Mutex::new_at(Level::BoundedRoom, ()),
            room: Condvar::new(),
        }
    }

    /// Takes a slot if one is free.
    fn try_reserve(&self) -> bool {
        let r = self
            .waiting
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            });
        match r {
            Ok(n) => {
                self.saw(n + 1);
                true
            }
            Err(_) => false,
        }
    }

    /// Counts an item that does not wait for room (delayed work whose timer
    /// fired, a forked child's refused item).
    pub(crate) fn force(&self) {
        let n = self.waiting.fetch_add(1, Ordering::SeqCst);
        self.saw(n + 1);
    }

    fn saw(&self, n: usize) {
        if n > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(n, Ordering::Relaxed);
        }
    }

    /// An item stopped waiting (started, taken off its list, refused): its
    /// slot goes back, and a sleeper, if any, is woken for it.
    pub(crate) fn leave(&self) {
        let prev = self.waiting.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(prev > 0, "a bounded queue's count went below zero");
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock();
            self.room.notify_one();
        }
    }

    fn found_full(&self) {
        self.full.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a `try_` call on a full bounded workqueue hands back: the closure
/// (or the `&Work`) it was given, unqueued. [`into_inner`](Self::into_inner)
/// takes it out, to retry later, run elsewhere or drop.
pub struct QueueFull<T>(T);

impl<T> QueueFull<T> {
    /// What the refused call was given.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for QueueFull<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("QueueFull(..)")
    }
}

impl<T> fmt::Display for QueueFull<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "the workqueue is full (max_queued items wait to start); retry later, \
             or call the waiting form (queue, spawn, execute)",
        )
    }
}

impl<T> std::error::Error for QueueFull<T> {}

/// A claimed cycle that finds no room goes back: PENDING released and the
/// cycle ended at once, so a flush of the item does not wait for it.
fn unclaim(work: &WorkInner) {
    work.clear_pending();
    work.finish_cycle();
}

impl WqInner {
    /// The item stopped waiting: called where a worker starts it and where
    /// `cancel` takes it off its list. One branch on an unbounded queue.
    #[inline]
    pub(crate) fn bound_leave(&self) {
        if let Some(b) = &self.bound {
            b.leave();
        }
    }

    /// An item that takes no slot beforehand (delayed work whose timer
    /// fired): counted, never waits.
    #[inline]
    pub(crate) fn bound_force(&self) {
        if let Some(b) = &self.bound {
            b.force();
        }
    }

    /// The bounded queue's counters into `out`.
    pub(crate) fn bound_stats(&self, out: &mut WorkqueueStats) {
        if let Some(b) = &self.bound {
            out.max_queued = Some(b.max as u64);
            out.queue_full = b.full.load(Ordering::Relaxed);
            out.waiting_peak = b.peak.load(Ordering::Relaxed) as u64;
        }
    }

    /// Takes a slot for a call of `call`: at once if there is room, else
    /// waits for one (see the module docs), or refuses a caller that is an
    /// item of this queue.
    fn reserve(self: &Arc<Self>, b: &Bound, call: &'static str) -> Result<(), Error> {
        if b.try_reserve() {
            return Ok(());
        }
        if threads::forked() {
            // Nothing of a forked child's ever starts: the queue refuses the
            // item, which gives the slot back.
            b.force();
            return Ok(());
        }
        b.found_full();
        if pool::current_wq_addr() == Arc::as_ptr(self) as usize {
            return Err(Error::FullFromOwnItem {
                name: self.name.clone(),
                call,
            });
        }
        // A worker that waits lets its pool start another.
        let _blocked = BlockingGuard::new();
        b.sleepers.fetch_add(1, Ordering::SeqCst);
        let mut g = b.lock.lock();
        while !b.try_reserve() {
            g = b.room.wait(g);
        }
        drop(g);
        b.sleepers.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A refusal of a call that cannot return an error: a panic naming it.
#[cold]
#[track_caller]
fn refused(e: Error) -> ! {
    panic!("cmwq: {e}")
}

impl WorkqueueBuilder {
    /// Bounds the items that wait to start (queued, not started) at `n`:
    /// [`try_queue`](Workqueue::try_queue), [`try_spawn`](Workqueue::try_spawn)
    /// and [`try_execute`](Workqueue::try_execute) fail fast when `n` wait,
    /// handing back what they were given; `queue`, `spawn` and `execute`
    /// wait for room (refused from an item of the same queue, which could
    /// wait for itself). Off by default (no limit). `build()` refuses 0.
    ///
    /// ```
    /// use std::sync::mpsc;
    ///
    /// let wq = cmwq::Workqueue::builder("bounded_doc").ordered().max_queued(1).build().unwrap();
    /// let (tx, rx) = mpsc::channel::<()>();
    /// let first = wq.spawn(move || rx.recv().unwrap());
    /// // `first` may not have started yet: wait until only the next one can wait.
    /// while wq.try_execute(|| ()).is_ok() {}
    /// let back = wq.try_spawn(|| 7).unwrap_err().into_inner();
    /// assert_eq!(back(), 7, "the closure came back unrun");
    /// tx.send(()).unwrap();
    /// first.join().unwrap();
    /// assert!(wq.stats().queue_full >= 1);
    /// ```
    pub fn max_queued(mut self, n: usize) -> Self {
        self.max_queued = Some(n);
        self
    }
}

impl Workqueue {
    /// The limit on waiting items ([`WorkqueueBuilder::max_queued`]); `None`
    /// when unbounded.
    pub fn max_queued(&self) -> Option<usize> {
        self.inner().bound.as_ref().map(|b| b.max)
    }

    /// [`queue`](Self::queue) that never waits: `Ok(true)` queued,
    /// `Ok(false)` already pending (or refused by a draining queue, as
    /// `queue`), `Err` when the bounded queue is full, handing `work` back
    /// (it was not queued and is not pending). On an unbounded queue it is
    /// `queue`.
    pub fn try_queue<'a>(&self, work: &'a Work) -> Result<bool, QueueFull<&'a Work>> {
        let inner = self.inner();
        let Some(b) = &inner.bound else {
            return Ok(self.queue(work));
        };
        if !work.0.try_claim() {
            return Ok(false);
        }
        if !b.try_reserve() {
            unclaim(&work.0);
            b.found_full();
            return Err(QueueFull(work));
        }
        Ok(inner.queue_counted(work.0.clone(), None, false))
    }

    /// [`spawn`](Self::spawn) that never waits: `Err` when the bounded queue
    /// is full, handing the closure back unrun.
    ///
    /// ```
    /// let wq = cmwq::Workqueue::builder("try_spawn_doc").unbound().max_queued(64).build().unwrap();
    /// match wq.try_spawn(|| 6 * 7) {
    ///     Ok(h) => assert_eq!(h.join().unwrap(), 42),
    ///     Err(full) => assert_eq!((full.into_inner())(), 42, "run here instead"),
    /// }
    /// ```
    pub fn try_spawn<F, T>(&self, f: F) -> Result<JoinHandle<T>, QueueFull<F>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let inner = self.inner();
        let Some(b) = &inner.bound else {
            return Ok(self.spawn(f));
        };
        if !b.try_reserve() {
            b.found_full();
            return Err(QueueFull(f));
        }
        let (item, handle) = spawn::job(f);
        inner.queue_counted(item, None, false);
        Ok(handle)
    }

    /// [`execute`](Self::execute) that never waits: `Ok` as `execute`'s
    /// bool, `Err` when the bounded queue is full, handing the closure back.
    pub fn try_execute<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<bool, QueueFull<F>> {
        let inner = self.inner();
        let Some(b) = &inner.bound else {
            return Ok(self.execute(f));
        };
        if !b.try_reserve() {
            b.found_full();
            return Err(QueueFull(f));
        }
        Ok(inner.queue_counted(spawn::detached(f), None, false))
    }

    /// `queue`/`queue_on` on a bounded queue: claim, then a slot (waiting
    /// for one with the claim given back), then queue.
    pub(crate) fn queue_bounded(
        &self,
        work: &Work,
        cpu: Option<usize>,
        call: &'static str,
    ) -> Result<bool, Error> {
        let inner = self.inner();
        let b = inner.bound.as_deref().expect("a bounded queue");
        if !work.0.try_claim() {
            return Ok(false);
        }
        if !b.try_reserve() {
            unclaim(&work.0);
            inner.reserve(b, call)?;
            if !work.0.try_claim() {
                // Queued by someone else meanwhile (or disabled): no slot.
                b.leave();
                return Ok(false);
            }
        }
        Ok(inner.queue_counted(work.0.clone(), cpu, false))
    }

    /// `queue` on a bounded queue: refused from its own item with a panic.
    // Out of line: the unbounded front door stays a test and a jump.
    #[inline(never)]
    pub(crate) fn queue_bounded_or_panic(&self, work: &Work) -> bool {
        self.queue_bounded(work, None, "Workqueue::queue")
            .unwrap_or_else(|e| refused(e))
    }

    /// `spawn`/`spawn_on` on a bounded queue.
    pub(crate) fn spawn_bounded<F, T>(
        &self,
        cpu: Option<usize>,
        f: F,
        call: &'static str,
    ) -> Result<JoinHandle<T>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let inner = self.inner();
        inner.reserve(inner.bound.as_deref().expect("a bounded queue"), call)?;
        let (item, handle) = spawn::job(f);
        inner.queue_counted(item, cpu, false);
        Ok(handle)
    }

    /// `spawn` on a bounded queue: refused from its own item with a panic.
    // Out of line: the unbounded front door stays a test and a jump.
    #[inline(never)]
    pub(crate) fn spawn_bounded_or_panic<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.spawn_bounded(None, f, "Workqueue::spawn")
            .unwrap_or_else(|e| refused(e))
    }

    /// `execute`/`execute_on` on a bounded queue.
    pub(crate) fn execute_bounded<F: FnOnce() + Send + 'static>(
        &self,
        cpu: Option<usize>,
        f: F,
        call: &'static str,
    ) -> Result<bool, Error> {
        let inner = self.inner();
        inner.reserve(inner.bound.as_deref().expect("a bounded queue"), call)?;
        Ok(inner.queue_counted(spawn::detached(f), cpu, false))
    }

    /// `execute` on a bounded queue: refused from its own item with a panic.
    // Out of line: the unbounded front door stays a test and a jump.
    #[inline(never)]
    pub(crate) fn execute_bounded_or_panic<F: FnOnce() + Send + 'static>(&self, f: F) -> bool {
        self.execute_bounded(None, f, "Workqueue::execute")
            .unwrap_or_else(|e| refused(e))
    }
}
