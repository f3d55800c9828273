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
//! # One allocation
//!
//! The closure, its result slot and the item's state word live in one
//! `Arc`: the engine holds it as a `WorkCell<dyn Job>`, the handle as a
//! `WorkCell<dyn Outcome<T>>`, two views of the same allocation. Queueing
//! allocates nothing more in steady state (the `engine_spawn` test counts).
//!
//! # Results, panics, refusals
//!
//! The job's panic is caught and handed to the handle as
//! [`JoinError::Panicked`] with its payload (it is not reported to the panic
//! hooks: the handle is where it goes). A draining workqueue refuses
//! outsiders' items; a spawn it refuses gives [`JoinError::Refused`] at once
//! rather than a handle that never finishes. Dropping the handle detaches the
//! job: it still runs, and its result is dropped.
//!
//! # Waiting
//!
//! [`JoinHandle::join`] blocks (a worker that joins counts as blocked, so its
//! pool starts another); the handle is also a [`Future`], woken by the job
//! itself, so async code can `.await` it on any executor with no runtime
//! dependency. Joining a job from inside that job panics, as any self-wait
//! does.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crate::work::{Job, WorkCell, WorkInner};

/// Why a spawned job gave no value.
pub enum JoinError {
    /// The job panicked; the payload is what it panicked with.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The workqueue was draining and refused the job; it never ran.
    Refused,
}

impl JoinError {
    /// The panic message, if the payload is a string.
    pub fn message(&self) -> Option<&str> {
        match self {
            JoinError::Panicked(p) => p
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(String::as_str)),
            JoinError::Refused => None,
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

/// A spawned job: the closure until it runs, then its result, and the waker
/// of a task that awaits it.
struct Spawned<F, T> {
    inner: Mutex<(State<F, T>, Option<Waker>)>,
}

impl<F, T> Spawned<F, T> {
    fn lock(&self) -> MutexGuard<'_, (State<F, T>, Option<Waker>)> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn finish(&self, r: Result<T, JoinError>) {
        let waker = {
            let mut g = self.lock();
            g.0 = State::Done(r);
            g.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<F, T> Job for Spawned<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(&self) {
        let f = {
            let mut g = self.lock();
            match std::mem::replace(&mut g.0, State::Running) {
                State::Ready(f) => f,
                other => {
                    // A job runs once: it is never queued twice.
                    g.0 = other;
                    return;
                }
            }
        };
        let r = catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::Panicked);
        self.finish(r);
    }
}

/// The handle's view of a spawned job.
trait Outcome<T>: Send + Sync {
    /// The result if the job is done (taken out), else registers `waker`.
    fn poll_result(&self, waker: Option<&Waker>) -> Option<Result<T, JoinError>>;
    fn finished(&self) -> bool;
    fn refuse(&self);
}

impl<F, T> Outcome<T> for Spawned<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn poll_result(&self, waker: Option<&Waker>) -> Option<Result<T, JoinError>> {
        let mut g = self.lock();
        match std::mem::replace(&mut g.0, State::Taken) {
            State::Done(r) => Some(r),
            State::Taken => panic!("cmwq: a JoinHandle's result was taken twice"),
            other => {
                g.0 = other;
                if let Some(w) = waker
                    && !g.1.as_ref().is_some_and(|old| old.will_wake(w))
                {
                    g.1 = Some(w.clone());
                }
                None
            }
        }
    }

    fn finished(&self) -> bool {
        matches!(self.lock().0, State::Done(_) | State::Taken)
    }

    fn refuse(&self) {
        let f = std::mem::replace(&mut self.lock().0, State::Running);
        drop(f);
        self.finish(Err(JoinError::Refused));
    }
}

/// The result of a job spawned with [`Workqueue::spawn`](crate::Workqueue::spawn):
/// [`join`](Self::join) it, poll [`is_finished`](Self::is_finished), or
/// `.await` it. Dropping it detaches the job.
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
    pub fn join(self) -> Result<T, JoinError> {
        self.cell.wait_cycles("JoinHandle::join");
        self.cell
            .func
            .poll_result(None)
            .expect("a finished cycle has a result")
    }

    /// Whether the job has finished (ran, panicked or was refused).
    pub fn is_finished(&self) -> bool {
        self.cell.func.finished()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.cell.func.poll_result(Some(cx.waker())) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

/// Makes the job's item: one allocation, seen by the engine as a work item
/// and by the handle as an outcome.
pub(crate) fn job<F, T>(f: F) -> (Arc<WorkInner>, JoinHandle<T>)
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let cell = Arc::new(WorkCell::new(Spawned {
        inner: Mutex::new((State::Ready(f), None)),
    }));
    let item: Arc<WorkInner> = cell.clone();
    (item, JoinHandle { cell })
}

/// The queue refused the job: the handle reports it at once.
pub(crate) fn refused<T>(h: &JoinHandle<T>) {
    h.cell.func.refuse();
}
