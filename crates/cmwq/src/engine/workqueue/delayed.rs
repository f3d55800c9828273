//! Delayed work (`struct delayed_work`, `queue_delayed_work`,
//! `mod_delayed_work`): a [`Work`] with a timer. The timer thread
//! (`engine/timer.rs`) hands a fired item back to `queue_claimed`.

use std::time::Duration;

use crate::engine::threads;
use crate::engine::timer;
use crate::engine::work::Work;
use crate::error::Error;

use super::Workqueue;

impl Workqueue {
    /// Queues `dw` after `delay` (`queue_delayed_work`); false if already
    /// pending, or refused: the queue drains, or the timer thread cannot start
    /// (the thread limit; said once on stderr). A refused item is left idle,
    /// not pending, so nothing waits for it and it can be queued again.
    pub fn queue_delayed(&self, dw: &DelayedWork, delay: Duration) -> bool {
        if !dw.work.0.try_claim() {
            return false;
        }
        self.queue_delayed_claimed(dw, None, delay)
    }

    /// `queue_delayed(_on)` once PENDING is ours: false if refused (a
    /// draining queue, a forked child, no timer thread), the item's cycle
    /// ended so nothing waits for it and it can be queued again.
    fn queue_delayed_claimed(&self, dw: &DelayedWork, cpu: Option<usize>, delay: Duration) -> bool {
        if delay.is_zero() {
            self.inner.queue_claimed(dw.work.0.clone(), cpu, false)
        } else if self.inner.refuses_outsiders()
            || threads::refuse_forked()
            || timer::arm(&dw.work.0, &self.inner, cpu, delay).is_err()
        {
            // As `queue`: a draining queue takes no new work from outside.
            self.inner.refuse(&dw.work.0);
            false
        } else {
            true
        }
    }

    /// [`queue_delayed`](Self::queue_delayed) for `cpu` (`queue_delayed_work_on`):
    /// when the timer fires, the item goes to that CPU's pool (bound queue) or
    /// pod (unbound queue), as [`queue_on`](Self::queue_on). False if already
    /// pending or refused by a draining queue; only a CPU id beyond the
    /// possible CPUs is an error.
    ///
    /// ```
    /// use cmwq::{DelayedWork, Workqueue};
    /// use std::time::Duration;
    ///
    /// let wq = Workqueue::builder("delayed_on_doc").build().unwrap();
    /// let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    /// let dw = DelayedWork::new(|| {});
    /// assert_eq!(wq.queue_delayed_on(cpu, &dw, Duration::from_millis(2)), Ok(true));
    /// // Already pending: refused, as `queue_delayed`.
    /// assert_eq!(wq.queue_delayed_on(cpu, &dw, Duration::ZERO), Ok(false));
    /// dw.flush();
    /// assert!(!dw.is_pending());
    /// ```
    pub fn queue_delayed_on(
        &self,
        cpu: usize,
        dw: &DelayedWork,
        delay: Duration,
    ) -> Result<bool, Error> {
        self.check_cpu(cpu)?;
        if !dw.work.0.try_claim() {
            return Ok(false);
        }
        Ok(self.queue_delayed_claimed(dw, Some(cpu), delay))
    }

    /// Re-arms `dw` to run after `delay` whether or not it was pending
    /// (`mod_delayed_work`). Returns whether it was pending before.
    ///
    /// ```
    /// use cmwq::{DelayedWork, Workqueue};
    /// use std::time::Duration;
    ///
    /// let wq = Workqueue::builder("mod_delayed_doc").build().unwrap();
    /// let dw = DelayedWork::new(|| {});
    /// // Not pending yet: arms it.
    /// assert!(!wq.mod_delayed(&dw, Duration::from_secs(60)));
    /// // Pending: pulls the timer in (a debounce re-arms this way).
    /// assert!(wq.mod_delayed(&dw, Duration::from_millis(1)));
    /// dw.flush();
    /// assert!(!dw.is_pending());
    /// ```
    pub fn mod_delayed(&self, dw: &DelayedWork, delay: Duration) -> bool {
        if threads::refuse_forked() {
            // Its timer or queued cycle belongs to the parent's threads.
            return false;
        }
        let mut was = false;
        loop {
            was |= dw.work.0.grab_pending();
            if dw.work.0.try_claim() {
                // Ours now: armed, queued, or refused by a draining queue
                // (counted as rejected); never retried, so never a spin.
                self.queue_delayed_claimed(dw, None, delay);
                return was;
            }
            if dw.work.is_disabled() {
                return was;
            }
            // Another thread queued it between the grab and the claim:
            // grab that cycle too (`try_to_grab_pending`'s -EAGAIN).
            std::thread::yield_now();
        }
    }
}

/// A work item that can be queued after a delay (`struct delayed_work`).
///
/// All delayed work of the process shares one timer thread.
///
/// ```
/// use cmwq::{DelayedWork, Workqueue};
/// use std::time::Duration;
///
/// let wq = Workqueue::builder("delayed_doc").build().unwrap();
/// let dw = DelayedWork::new(|| {});
/// // Cancelled before its timer fires: it never runs.
/// assert!(wq.queue_delayed(&dw, Duration::from_secs(60)));
/// assert!(dw.is_pending());
/// assert!(dw.cancel_sync());
/// assert!(!dw.is_pending());
/// // Disabled: queueing is refused until enabled again.
/// dw.disable();
/// assert!(!wq.queue_delayed(&dw, Duration::from_millis(1)));
/// assert!(dw.enable());
/// assert!(wq.queue_delayed(&dw, Duration::from_secs(60)));
/// // `flush` fires an armed timer now and waits for the item.
/// dw.flush();
/// assert!(!dw.is_pending());
/// ```
#[derive(Clone, Debug)]
pub struct DelayedWork {
    work: Work,
}

impl DelayedWork {
    /// Makes a delayed work item running `f`.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> DelayedWork {
        DelayedWork { work: Work::new(f) }
    }
    /// [`DelayedWork::new`] with a label for lockup reports (see `Work::with_label`).
    #[doc(hidden)]
    pub fn with_label(
        f: impl Fn() + Send + Sync + 'static,
        label: &'static (dyn Fn() -> String + Send + Sync),
    ) -> DelayedWork {
        DelayedWork {
            work: Work::with_label(f, label),
        }
    }
    /// True while its timer is armed or it is queued and has not started.
    pub fn is_pending(&self) -> bool {
        self.work.is_pending()
    }
    /// Cancels the timer or the queued item; does not wait (`cancel_delayed_work`).
    pub fn cancel(&self) -> bool {
        self.work.cancel()
    }
    /// Cancels and waits for a running instance (`cancel_delayed_work_sync`).
    pub fn cancel_sync(&self) -> bool {
        self.work.cancel_sync()
    }
    /// Queues an armed timer's item now and waits for it (`flush_delayed_work`).
    pub fn flush(&self) -> bool {
        if !threads::forked() {
            timer::fire_now(&self.work.0);
        }
        self.work.flush()
    }
    /// Disables the item (see [`Work::disable`]).
    pub fn disable(&self) -> bool {
        self.work.disable()
    }
    /// True while a callback of the item runs (see [`Work::is_running`]).
    pub fn is_running(&self) -> bool {
        self.work.is_running()
    }
    /// Queues the item now if its timer is armed, without waiting; returns
    /// whether it was armed (an idle, queued or running item is left alone).
    pub fn fire(&self) -> bool {
        !threads::forked() && timer::fire_now(&self.work.0)
    }
    /// Enables the item (see [`Work::enable`]).
    pub fn enable(&self) -> bool {
        self.work.enable()
    }
}
