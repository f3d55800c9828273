//! Scoped jobs: [`Workqueue::scope`] runs jobs that borrow the caller's
//! data, and returns once every one of them has finished.
//!
//! Why: every closure the engine runs is `'static` (a work item outlives the
//! call that queued it), so a job that reads a caller's slice must own a copy
//! or an `Arc` of it. `std::thread::scope`, rayon's `scope` and TBB's
//! `task_group` lift that by waiting, before the call returns, for all the
//! jobs started inside it. This is the same on a workqueue: the jobs are
//! one-off items of the queue (`max_active`, priority, pods, `flush` and
//! `max_queued` apply to them as to any other).
//!
//! # The rules (`std::thread::scope`'s)
//!
//! - `scope` returns when every job spawned in it has finished (run to its
//!   end, or been refused by a draining queue and dropped unrun).
//! - A job's panic is caught; if its handle was not joined, the scope
//!   resumes that panic (the first such, with its own payload) after all
//!   jobs finished. A panic of the scope's closure itself is resumed too,
//!   also only after every job finished, and wins over the jobs'.
//! - [`ScopedJoinHandle::join`] gives a job's value or its panic as a
//!   [`JoinError`].
//!
//! # Why erasing the lifetime is sound
//!
//! The engine keeps items as `'static` closures, so [`JobScope::spawn`]
//! boxes the job (with everything it captures, borrowed data included) and
//! erases the box's `'scope` bound, the one `unsafe` block of this module.
//! That is sound if nothing the box holds is used or dropped after `'scope`
//! ends, which is after `scope` returns. It holds because:
//!
//! 1. Each job is counted in its scope before its box exists, and the count
//!    is given back by [`Pending`]'s destructor, which first drops the box
//!    (so the user's closure and the result slot, the only `'scope` data)
//!    and then decrements. The box is run or dropped exactly once: run by
//!    the worker (consumed; a panic in it is caught inside, so the
//!    decrement follows), or dropped unrun when the queue refuses the item
//!    (draining, a forked child, a bounded queue's refusal): in every case
//!    the engine drops the item, and with it `Pending`. A leaked item would
//!    leave the count above zero: `scope` would wait forever, never return
//!    early.
//! 2. `scope` cannot return before the count is zero, not even by
//!    unwinding: the user's closure runs under `catch_unwind`, the wait
//!    that follows cannot panic (its lock ignores poisoning), and only after
//!    it does `scope` return or resume a panic.
//! 3. What outlives a job's decrement holds no `'scope` data: the
//!    scope's shared state (counters and a `'static` panic payload) and the
//!    engine's cell, whose closure slot is empty by then.
//! 4. `'scope` is invariant and chosen by `scope` (a higher-ranked
//!    closure), so neither a [`JobScope`] nor a handle can leave the closure,
//!    and a job may borrow only what outlives the whole scope. The
//!    compile-fail example on [`Workqueue::scope`] shows it.
//!
//! # From an item of the same workqueue
//!
//! The waiting item holds a `max_active` slot of its queue while its jobs
//! need slots of the same queue. On a queue with one slot (ordered, or
//! `max_active` 1) they could never start, so `scope` refuses there with a
//! panic. Elsewhere the wait counts as blocking (the pool starts another
//! worker for the jobs), but a queue whose every active slot is held by
//! items waiting in scopes is stuck: open scopes on another workqueue than
//! the one the opener runs on when that can happen.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;

use super::pool::{self, BlockingGuard};
use super::spawn::JoinError;
use super::workqueue::Workqueue;
use crate::sync::{Condvar, Level, Mutex};

/// What a scope's jobs share with it: how many are unfinished, and the
/// first unjoined panic. Holds no `'scope` data (see the module docs).
struct ScopeState {
    /// Jobs spawned and not finished; `scope` waits for 0 on `done`.
    pending: Mutex<usize>,
    done: Condvar,
    /// The first panic of a job whose handle did not take it.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl ScopeState {
    fn finished(&self) {
        let mut n = self.pending.lock();
        *n -= 1;
        if *n == 0 {
            self.done.notify_all();
        }
    }

    /// Keeps `p` for the scope to resume, if it is the first.
    fn keep_panic(&self, p: Box<dyn Any + Send>) {
        let mut first = self.panic.lock();
        if first.is_none() {
            *first = Some(p);
        }
    }

    fn wait_all(&self) {
        let mut n = self.pending.lock();
        while *n > 0 {
            n = self.done.wait(n);
        }
    }
}

/// A job's erased closure: run (`true`) or dropped unrun (`false`).
type ErasedJob = Box<dyn FnOnce(bool) + Send + 'static>;

/// The engine's view of a scoped job: its erased closure and its place in
/// the scope's count, given back when this is dropped, after the closure is
/// (see the module docs, point 1).
struct Pending {
    job: Option<ErasedJob>,
    state: Arc<ScopeState>,
}

impl Pending {
    fn run(mut self) {
        if let Some(job) = self.job.take() {
            job(true);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            // Never run (refused): the handle learns it, the captures go. A
            // destructor's panic must not skip the count (the scope would
            // wait forever): it is kept for the scope to resume.
            if let Err(p) = catch_unwind(AssertUnwindSafe(move || job(false))) {
                self.state.keep_panic(p);
            }
        }
        self.state.finished();
    }
}

/// A job's result, shared by the job and its handle.
struct Packet<T> {
    slot: Mutex<Option<Result<T, JoinError>>>,
    ready: Condvar,
    state: Arc<ScopeState>,
}

impl<T> Packet<T> {
    fn set(&self, r: Result<T, JoinError>) {
        *self.slot.lock() = Some(r);
        self.ready.notify_all();
    }
}

impl<T> Drop for Packet<T> {
    fn drop(&mut self) {
        // The last of job and handle: a panic nobody joined goes to the scope
        // (taken out first: the slot's lock is not held while the scope's
        // is taken, two leaves never nest).
        let left = self.slot.lock().take();
        if let Some(Err(JoinError::Panicked(p))) = left {
            self.state.keep_panic(p);
        }
    }
}

/// The scope a [`Workqueue::scope`] closure spawns its jobs in.
pub struct JobScope<'scope, 'env: 'scope> {
    wq: Workqueue,
    state: Arc<ScopeState>,
    /// Invariant in `'scope` and `'env`, as `std::thread::Scope`.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

impl fmt::Debug for JobScope<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobScope")
            .field("workqueue", &self.wq.name())
            .field("unfinished", &*self.state.pending.lock())
            .finish()
    }
}

/// The handle of a scoped job: [`join`](Self::join) it for its value.
/// Dropping it leaves the job to the scope (its panic is resumed when the
/// scope ends).
pub struct ScopedJoinHandle<'scope, T> {
    packet: Arc<Packet<T>>,
    scope: PhantomData<&'scope ()>,
}

impl<T> fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedJoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the job: its value, [`JoinError::Panicked`] with its panic
    /// (which the scope then does not resume), or [`JoinError::Refused`] if
    /// the queue refused it (draining). A worker that joins counts as
    /// blocked, so its pool may start another.
    pub fn join(self) -> Result<T, JoinError> {
        let _blocked = BlockingGuard::new();
        let mut g = self.packet.slot.lock();
        loop {
            if let Some(r) = g.take() {
                return r;
            }
            g = self.packet.ready.wait(g);
        }
    }

    /// Whether the job has finished (ran, panicked or was refused).
    pub fn is_finished(&self) -> bool {
        self.packet.slot.lock().is_some()
    }
}

impl<'scope, 'env> JobScope<'scope, 'env> {
    /// Spawns `f` on the scope's workqueue. It may borrow anything that
    /// outlives the scope; the scope returns only after it finished. As
    /// [`Workqueue::spawn`]: it waits for room on a full bounded queue.
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let packet = Arc::new(Packet {
            slot: Mutex::new_at(Level::ScopeSlot, None),
            ready: Condvar::new(),
            state: self.state.clone(),
        });
        let theirs = packet.clone();
        let job = move |run: bool| {
            let r = if run {
                catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::Panicked)
            } else {
                drop(f);
                Err(JoinError::Refused)
            };
            theirs.set(r);
            // `theirs` (maybe the last reference, with an unjoined value)
            // drops here, before `Pending` gives the count back.
        };
        let job: Box<dyn FnOnce(bool) + Send + 'scope> = Box::new(job);
        // SAFETY: only the lifetime bound changes (same layout, a boxed trait
        // object); the box is run or dropped before its job leaves the
        // scope's count, and the scope does not end before the count is
        // zero, so nothing borrowed for 'scope is used after it (module
        // docs, "Why erasing the lifetime is sound").
        let job: ErasedJob =
            unsafe { std::mem::transmute::<Box<dyn FnOnce(bool) + Send + 'scope>, ErasedJob>(job) };
        *self.state.pending.lock() += 1;
        let pending = Pending {
            job: Some(job),
            state: self.state.clone(),
        };
        // Refused (false): `Pending` was dropped unrun, the handle says so.
        self.wq.execute(move || pending.run());
        ScopedJoinHandle {
            packet,
            scope: PhantomData,
        }
    }
}

impl Workqueue {
    /// Runs `f` with a [`JobScope`] whose jobs may borrow from the caller,
    /// and returns when `f` and every job spawned in the scope finished,
    /// with `f`'s value. A job's panic that no handle joined is resumed
    /// then, after all jobs finished, as `std::thread::scope` does.
    ///
    /// ```
    /// let wq = cmwq::Workqueue::builder("scope_doc").unbound().build().unwrap();
    /// let data: Vec<u64> = (1..=1000).collect();
    /// let total: u64 = wq.scope(|s| {
    ///     let parts: Vec<_> = data.chunks(100).map(|c| s.spawn(move || c.iter().sum::<u64>())).collect();
    ///     parts.into_iter().map(|h| h.join().unwrap()).sum()
    /// });
    /// assert_eq!(total, 500_500);
    /// ```
    ///
    /// A job cannot borrow what the scope's closure owns, which is gone
    /// before the jobs are waited for:
    ///
    /// ```compile_fail,E0373
    /// let wq = cmwq::Workqueue::builder("scope_fail").build().unwrap();
    /// wq.scope(|s| {
    ///     let local = vec![1, 2, 3];
    ///     s.spawn(|| local.len());
    /// });
    /// ```
    ///
    /// nor can a handle leave the scope:
    ///
    /// ```compile_fail
    /// let wq = cmwq::Workqueue::builder("scope_fail2").build().unwrap();
    /// let data = vec![1, 2, 3];
    /// let h = wq.scope(|s| s.spawn(|| data.len()));
    /// ```
    ///
    /// # Panics
    ///
    /// Resumes the panic of `f` or of an unjoined job. Panics at once when
    /// called from an item of this workqueue if it runs one item at a time
    /// (ordered, or `max_active` 1): the jobs could never start while the
    /// item waits (see the module docs of `scope.rs` for other queues).
    pub fn scope<'env, F, R>(&self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope JobScope<'scope, 'env>) -> R,
    {
        if pool::current_wq_addr() == std::sync::Arc::as_ptr(self.inner()) as usize
            && self.max_active() == 1
        {
            panic!(
                "cmwq: Workqueue::scope called from an item of workqueue {:?}, which runs one \
                 item at a time: the scope's jobs could never start while that item waits; \
                 spawn them on another workqueue",
                self.name()
            );
        }
        let scope = JobScope {
            wq: self.clone(),
            state: Arc::new(ScopeState {
                pending: Mutex::new_at(Level::ScopePending, 0),
                done: Condvar::new(),
                panic: Mutex::new_at(Level::ScopePanic, None),
            }),
            scope: PhantomData,
            env: PhantomData,
        };
        let r = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        {
            // A worker that waits lets its pool start another.
            let _blocked = BlockingGuard::new();
            scope.state.wait_all();
        }
        let job_panic = scope.state.panic.lock().take();
        match (r, job_panic) {
            (Err(p), _) => resume_unwind(p),
            (Ok(_), Some(p)) => resume_unwind(p),
            (Ok(v), None) => v,
        }
    }
}
