//! Lanes: a pod pool kept local, CPU by CPU.
//!
//! # Why a pod pool is cut into lanes
//!
//! The kernel's unbound pool has one worklist per pod and lets the scheduler
//! place the worker it wakes: `select_task_rq` prefers the waker's CPU
//! (wake-affine) and `kick_pool` steers a worker back into its pod through
//! `wake_cpu`. User space has neither. A worker thread woken by `unpark` lands
//! on whichever CPU of its allowed set is idle, and while the producer runs,
//! that is *another* CPU: the wakeup becomes an inter-processor interrupt (in a
//! VM about 40 µs each way, against about 1 µs on the same CPU), the item runs
//! there, and its completion wakes the producer across CPUs again. Measured on
//! a 2-vCPU VM, that made every pod scope half as fast as the `cpu` scope,
//! whose workers are pinned and cannot make the mistake.
//!
//! So work is kept on the CPU that queued it, in one of two shapes (`Locality`
//! in `kick.rs`; the README's "Where user space differs" uses the same names):
//!
//! - **Per-CPU pools** (`Locality::Partners`; a concurrency-managed pod of
//!   several CPUs, the default): one pool per real CPU of the pod, each with
//!   its own lock, worklist and workers pinned to that CPU, linked to the
//!   per-CPU pools of the pod's other CPUs, its *partners* (`link_pod`). A workqueue has a pwq in each; an item queued from CPU c
//!   goes to c's per-CPU pool (`queue_on` and folded topologies too, when the
//!   queuing CPU is in the target's pod). Measured on 2 vCPUs at batch 64,
//!   one shared lock for the pod's CPUs cost 2.7x in throughput (its futex
//!   calls went from 6 thousand to 90 thousand per run): the lock has to be
//!   per CPU, not only the worklist.
//! - **Shared pools** (`Locality::Lanes`; a workqueue's default pool, which
//!   ordered queues use, and the kernel-style unmanaged pools): one pool for
//!   the pod, one lock, and one
//!   [`Lane`] per real CPU inside it. Workers are homed on a lane and pinned
//!   to its CPU; a lane without an idle worker gets one *re-homed* from
//!   another lane: its affinity is set to the lane's CPU (one
//!   `sched_setaffinity` on a sleeping thread) before it is unparked, so it
//!   wakes there. This is the user-space `wake_cpu`, counted as `repatriated`.
//!
//! Either way, concurrency management counts per CPU (`nr_running`,
//! `nr_woken` per lane): a lane with waiting items and no counted worker gets
//! a worker of its own CPU, so the handoff stays on the queuing CPU exactly as
//! in a per-CPU pool. A bound pool is the one-lane case.
//!
//! # When work spreads across the pod
//!
//! Keeping an item behind its CPU's running worker is right while that worker
//! gets through items quickly: waking a worker on another CPU costs two
//! cross-CPU wakeups (there and back to the producer), more than a short item
//! waits. It is wrong when the lane's worker is slow. A lane is **lagging**,
//! and another CPU's worker may take (steal) its items, when
//!
//! - its worker's previous item ran for longer than the spread threshold
//!   ([`set_spread_thresh`], default [`DFL_SPREAD_THRESH`]), or
//! - a queuer saw its worker on the same item for longer than that (or
//!   the worker woken for it not started yet: its CPU is taken), or
//! - the watchdog saw it **stalled**: items waiting and none of them completed
//!   for a whole tick (the worker is preempted by another thread, or woken and
//!   not yet scheduled).
//!
//! A lagging lane's items are offered to a CPU of the pod where no counted
//! worker runs, found when a queue, a chain kick (a worker starting an item)
//! or the watchdog's tick looks. In a shared pool that CPU's idle worker is
//! woken and steals from the lagging lane once its own is empty. A per-CPU pool
//! cannot see its partners' state under its lock, so each per-CPU pool publishes
//! one flag, *lendable* (no counted worker, an idle one), on a cache line of
//! its own, written only when it changes; a lagging per-CPU pool that sees a
//! partner's flag asks it, after dropping its own lock, to lend a worker
//! (`lend_to`, one lock at a time). The lent worker attaches to the lagging
//! pool as a *guest*, the way a rescuer does: a worker slot there, so that
//! pool's busy table keeps every item off two threads at once and its pwqs
//! count the items, and not counted in its `nr_running`. It runs items while
//! the lane lags or nobody serves it, then goes home. Nobody steals from a
//! lane that neither lags nor lacks a worker, so a short item is never
//! carried off to another CPU while its own CPU's worker is about to take it.
//!
//! # What it costs
//!
//! A clock read is about 20 ns here, a tenth of an item's whole cost at batch
//! 64, so nothing reads the clock per item. A worker times its items only
//! while its lane has a backlog *and* another CPU of the pod is free (the only
//! case where `slow` can change a decision). A queuer that finds its lane
//! served and another CPU free notes the lane's `started` count with the time
//! once, and calls the lane lagging when a later look finds the same count a
//! threshold later. A timed start notes its own count with the time it read,
//! and the chain kick that follows it looks with that same time: a worker
//! reads the clock once per timed item, where it read it twice (the start,
//! then its kick's note of the new count). A pool with one lane and no
//! partners (bound pools, one-CPU pods) never reads the clock nor
//! `sched_getcpu`.
//!
//! Everything else is the pool's and unchanged: the pwqs with their flush
//! colours and `max_active` (the node budget spans a pod's per-CPU pools as it
//! spans pods), the busy table (an item whose previous cycle still runs goes
//! to that worker's `scheduled` list, wherever it was queued), rescuers, the
//! manager. A lane only decides *which* worker runs an item and on which CPU.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Item;
use super::ring::Ring;

/// Default of [`set_spread_thresh`].
pub const DFL_SPREAD_THRESH: Duration = Duration::from_micros(50);

/// A: the spread threshold in ns (see the module docs). `Relaxed`: a setting
/// read on its own.
static SPREAD_NS: AtomicU64 = AtomicU64::new(DFL_SPREAD_THRESH.as_nanos() as u64);

/// Sets how long a pod pool's worker may spend on one item before the items
/// queued behind it on its CPU are offered to an idle CPU of the pod
/// (default [`DFL_SPREAD_THRESH`], 50 µs: about what waking a worker on another
/// CPU and the producer back costs in a VM). Lower spreads sooner and pays more
/// cross-CPU wakeups; higher keeps short items local longer. Clamped to at
/// least 1 µs.
///
/// ```
/// use std::time::Duration;
/// cmwq::set_spread_thresh(Duration::from_micros(100));
/// assert_eq!(cmwq::spread_thresh(), Duration::from_micros(100));
/// cmwq::set_spread_thresh(cmwq::DFL_SPREAD_THRESH);
/// ```
pub fn set_spread_thresh(d: Duration) {
    let ns = d.as_nanos().clamp(1_000, u64::MAX as u128) as u64;
    // Relaxed: a plain setting read on its own, no other data hangs on it.
    SPREAD_NS.store(ns, Ordering::Relaxed);
}

/// The current spread threshold.
pub fn spread_thresh() -> Duration {
    Duration::from_nanos(SPREAD_NS.load(Ordering::Relaxed))
}

/// The capacity a lane's worklist starts with, and shrinks back to after a
/// peak (see `SHRINK_ABOVE` in the pool module).
pub(crate) const LANE_LIST_CAP: usize = 32;

/// A clock read at most once per decision, and only if a decision needs it.
#[derive(Default)]
pub(crate) struct LazyNow(Option<Instant>);

impl LazyNow {
    /// A clock that reads `now` (the watchdog's tick has one already).
    pub(crate) fn at(now: Instant) -> LazyNow {
        LazyNow(Some(now))
    }

    fn get(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

/// One CPU of a pool's pod (see the module docs). Lives under the pool lock.
pub(crate) struct Lane {
    /// I: the real CPU its workers are pinned to.
    pub cpu: usize,
    /// L: items queued from this CPU, oldest first.
    pub worklist: Ring<Item>,
    /// L: workers homed here and idle, most recently idled last.
    pub idle: Vec<usize>,
    /// L: workers homed here running items and counted by concurrency management.
    pub nr_running: usize,
    /// L: workers picked for this lane and not yet running: they count against
    /// the cap, so a burst of queueing wakes one worker, not one per item.
    pub nr_woken: usize,
    /// L: workers of this lane away helping a lagging per-CPU pool of the pod: they
    /// run on this CPU, so they count against the cap too.
    pub nr_lent: usize,
    /// L: items begun by this lane's counted workers.
    pub started: u64,
    /// L: since when `started` has had its value: the start of the item
    /// that made it when its worker timed it, else when a queuer first saw
    /// it (see the module docs).
    seen: Option<(u64, Instant)>,
    /// L: its worker's previous item ran past the spread threshold.
    pub slow: bool,
    /// L: the watchdog saw items wait a whole tick with none of them completed.
    pub stalled: bool,
    /// L: items of this lane completed (the watchdog's per-lane progress check).
    pub progress: u64,
    /// L: `progress` at the watchdog's previous tick.
    pub tick_progress: u64,
    /// L: counters (see [`crate::snapshot::LaneSnap`]).
    pub stats: LaneStats,
    /// L: the worker that last began counting in `nr_running` here: the one
    /// the queue path looks at to see whether it fell asleep in its item
    /// (`usize::MAX`: none yet; a stale index is checked before it is believed).
    pub runner: usize,
}

/// Counters of one lane, kept under the pool lock.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct LaneStats {
    /// L: items queued on this lane and run by a worker homed on it.
    pub local: u64,
    /// L: items queued on this lane and run by a worker of another lane.
    pub stolen: u64,
    /// L: items of other lanes that this lane's workers ran.
    pub stole: u64,
    /// L: workers re-homed onto this lane's CPU to serve it.
    pub rehomed: u64,
    /// L: workers of this lane woken to help a lagging lane.
    pub spread: u64,
}

impl Lane {
    pub(crate) fn new(cpu: usize) -> Lane {
        Lane {
            cpu,
            // Room for a burst up front: queueing allocates nothing in
            // steady state, even on a lane first used late.
            worklist: Ring::with_capacity(LANE_LIST_CAP),
            idle: Vec::new(),
            nr_running: 0,
            nr_woken: 0,
            nr_lent: 0,
            started: 0,
            seen: None,
            slow: false,
            stalled: false,
            progress: 0,
            tick_progress: 0,
            stats: LaneStats::default(),
            runner: usize::MAX,
        }
    }

    /// Items wait here.
    pub(crate) fn has_work(&self) -> bool {
        !self.worklist.is_empty()
    }

    /// Fewer counted, coming or lent workers than the cap: the CPU can take
    /// a worker.
    pub(crate) fn free(&self, cap: usize) -> bool {
        self.nr_running + self.nr_woken + self.nr_lent < cap
    }

    /// Items wait behind a worker that holds the CPU's share (counted,
    /// coming or lent): if that worker fell asleep, they wait for nothing.
    pub(crate) fn behind_worker(&self, cap: usize) -> bool {
        self.has_work() && !self.free(cap)
    }

    /// Items wait and no worker serves them (`need_more_worker`, per lane).
    pub(crate) fn unserved(&self, cap: usize) -> bool {
        self.has_work() && self.free(cap)
    }

    /// A worker of this lane that runs should take the next item here
    /// (`keep_working`, per lane).
    pub(crate) fn keep_working(&self, cap: usize) -> bool {
        self.has_work() && self.nr_running <= cap
    }

    /// Items wait behind a worker that is slow or stalled (module docs).
    /// The first look at a running worker's item notes the time. Inlined
    /// into the pool's `kick` (another module), as it was before the pool
    /// was split.
    #[inline]
    pub(crate) fn lagging(&mut self, now: &mut LazyNow) -> bool {
        if !self.has_work() {
            return false;
        }
        if self.slow || self.stalled {
            return true;
        }
        if self.nr_running == 0 && self.nr_woken == 0 {
            // Nobody runs an item here nor is on the way: `unserved` (the
            // kick wakes one), or its worker is lent elsewhere.
            return false;
        }
        // A worker woken for the lane that has not started an item a
        // threshold later lags like a slow one: its CPU is held by another
        // thread (a kernel thread can hold a vCPU here for milliseconds).
        // It used to count as on its way until the watchdog's tick called
        // the lane stalled, and `cmwq mix` rounds had items waiting 2-5 ms
        // behind a pinned worker that could not get its CPU.
        match self.seen {
            Some((n, t)) if n == self.started => {
                now.get().saturating_duration_since(t) >= spread_thresh()
            }
            _ => {
                self.seen = Some((self.started, now.get()));
                false
            }
        }
    }

    /// A worker of another lane may take items from here.
    pub(crate) fn stealable(&mut self, cap: usize, now: &mut LazyNow) -> bool {
        self.unserved(cap) || self.lagging(now)
    }

    /// A counted worker of this lane starts an item. With `timed`, the clock
    /// is read: `slow` says whether the previous item (begun at `prev`, in the
    /// same busy spell) ran past the threshold, the new count is noted as
    /// seen at that time (so a look at the lane measures from the item's
    /// start and reads no clock of its own to note it), and the time is
    /// returned for the next call. Without, `slow` is cleared.
    pub(crate) fn item_started(&mut self, timed: bool, prev: Option<Instant>) -> Option<Instant> {
        self.started += 1;
        if !timed {
            self.slow = false;
            return None;
        }
        let now = Instant::now();
        self.slow = prev.is_some_and(|p| now.saturating_duration_since(p) >= spread_thresh());
        self.seen = Some((self.started, now));
        Some(now)
    }

    /// A counted worker of this lane stops running items.
    pub(crate) fn worker_left(&mut self) {
        if self.nr_running == 0 {
            self.slow = false;
        }
    }

    /// Takes the oldest item; a drained lane is no longer stalled.
    pub(crate) fn pop(&mut self) -> Option<Item> {
        let it = self.worklist.pop_front();
        if self.worklist.is_empty() {
            self.stalled = false;
        }
        it
    }

    /// The watchdog's look: stalled if items waited the whole tick with none
    /// of this lane's completed. Returns whether it lags now.
    pub(crate) fn tick(&mut self, now: &mut LazyNow) -> bool {
        self.stalled = self.has_work() && self.progress == self.tick_progress;
        self.tick_progress = self.progress;
        self.lagging(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item() -> Item {
        Item::new(crate::Work::new(|| {}).0.clone(), 0, 0, 0)
    }

    #[test]
    fn a_served_lane_with_a_fast_worker_is_not_stealable() {
        let mut l = Lane::new(3);
        l.worklist.push_back(item());
        assert!(l.unserved(1), "nobody runs it yet");
        l.nr_running = 1;
        l.item_started(false, None);
        let mut now = LazyNow::default();
        assert!(!l.unserved(1));
        assert!(!l.stealable(1, &mut now), "its own worker gets to it soon");
    }

    #[test]
    fn a_long_item_makes_its_lane_lag() {
        let mut l = Lane::new(0);
        l.worklist.push_back(item());
        l.nr_running = 1;
        l.item_started(false, None);
        let t0 = Instant::now();
        let later = t0 + spread_thresh() * 2;
        assert!(
            !l.lagging(&mut LazyNow::at(t0)),
            "first look notes the time"
        );
        assert!(
            l.lagging(&mut LazyNow::at(later)),
            "same item a threshold later"
        );
        l.item_started(false, None);
        assert!(
            !l.lagging(&mut LazyNow::at(later)),
            "a new item: noted again"
        );
        // The previous item's length decides `slow` when a timed item starts.
        let t1 = l.item_started(true, None).unwrap();
        assert!(!l.slow);
        l.item_started(true, Some(t1 - spread_thresh() * 2));
        assert!(l.slow);
        assert!(l.lagging(&mut LazyNow::at(t1)));
        l.pop();
        assert!(!l.lagging(&mut LazyNow::at(later)), "nothing waits");
    }

    #[test]
    fn a_timed_start_is_the_time_a_look_measures_from() {
        let mut l = Lane::new(0);
        l.worklist.push_back(item());
        l.nr_running = 1;
        let t0 = l.item_started(true, None).expect("timed");
        // A look with the start's own time (the worker's chain kick) finds
        // nothing to note and no time passed.
        assert!(!l.lagging(&mut LazyNow::at(t0)), "the start itself");
        let t1 = l.item_started(true, Some(t0)).expect("timed");
        // The first look at this count already has its time, the start's:
        // it lags at once when it comes a threshold after the start (after
        // an untimed start it would only note the time).
        assert!(
            l.lagging(&mut LazyNow::at(t1 + spread_thresh() * 2)),
            "first look, a threshold after the item began"
        );
        // An untimed start leaves the count to be noted by the next look.
        l.item_started(false, None);
        let later = t0 + spread_thresh() * 4;
        assert!(!l.lagging(&mut LazyNow::at(later)), "first look notes it");
        assert!(l.lagging(&mut LazyNow::at(later + spread_thresh() * 2)));
    }

    #[test]
    fn a_woken_worker_that_does_not_start_makes_its_lane_lag() {
        let mut l = Lane::new(0);
        l.worklist.push_back(item());
        l.nr_woken = 1;
        let t0 = Instant::now();
        let later = t0 + spread_thresh() * 2;
        assert!(!l.unserved(1), "a worker is on its way");
        assert!(
            !l.lagging(&mut LazyNow::at(t0)),
            "first look notes the time"
        );
        assert!(
            l.lagging(&mut LazyNow::at(later)),
            "still not started a threshold later: its CPU is taken"
        );
        l.nr_woken = 0;
        assert!(
            !l.lagging(&mut LazyNow::at(later)),
            "nobody on the way: unserved, not lagging"
        );
    }

    #[test]
    fn a_tick_without_progress_stalls_the_lane_until_it_drains() {
        let mut l = Lane::new(0);
        l.worklist.push_back(item());
        l.nr_woken = 1;
        let mut now = LazyNow::default();
        assert!(l.tick(&mut now), "no progress since the last tick");
        assert!(l.stealable(1, &mut now));
        l.progress += 1;
        assert!(!l.tick(&mut now), "progress clears it");
        l.tick(&mut now);
        assert!(l.stalled);
        l.pop();
        assert!(!l.stalled, "drained");
    }
}
