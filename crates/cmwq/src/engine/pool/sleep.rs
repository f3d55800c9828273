//! Seeing a worker sleep (`wq_worker_sleeping` / `wq_worker_running` without
//! the scheduler): the queue path's look at a lane's runner, and the
//! watchdog's look every [`LOOK`] while a managed pool has waiting work.
//!
//! Both read a worker's context-switch records where it has a probe
//! ([`crate::switches`]): no syscall, so the queue path can afford it. A
//! counted worker found asleep inside its item's callback, or for
//! [`MIN_ASLEEP`] or more outside it, leaves `nr_running`
//! (`BLOCKED_SAMPLED`) and a worker is woken for what waits; one found
//! running again counts again, as the kernel's `wq_worker_running` has it
//! (its item's end also clears the mark). A preempted worker is runnable and
//! keeps its place, as in the kernel.
//!
//! A worker lent to a partner pool of the pod (a guest there, see
//! [`lane`](super::lane)) holds its own CPU's share in `nr_lent` instead of
//! `nr_running`; it is looked at the same way, and a sleep gives that share
//! back. Before this, a guest asleep in a partner's item kept its own CPU's
//! lane from waking anyone for as long as it slept: `cmwq mix` at 20 ms
//! blocks showed its CPU's items waiting 10-20 ms in some runs, annotated or
//! not (`engine_lanes`' `a_lent_worker_that_blocks_*` tests).
//!
//! A worker with no probe (a pool that has not been seen to block yet, or
//! `perf_event_open` refused) is read through `/proc/self/task/TID/stat` by
//! the watchdog's look, outside the pool lock: at each tick while its pool
//! has waiting work (two reads per 10 ms on this machine), and between ticks
//! only once it has stayed on one item since the previous look (a pool of
//! short items costs no reads, only the look's pass under the lock).
//! The first sleep the sampler sees in a pool turns probes on for its
//! workers (`Pool::blocks`). Every managed pool with waiting work is looked
//! at every [`LOOK`], and the watchdog's first look after it wakes from
//! idle comes one [`LOOK`] later, not a tick later: a pool whose first item
//! blocks for 20 ms is seen within a millisecond or two, where it used to
//! wait for the next 10 ms tick with its items piling up behind the sleeper.
//!
//! Why both places: the queue path sees a sleeper the moment new work needs
//! its CPU (an item queued behind a worker asleep in a 2 ms read starts
//! within tens of microseconds, not at the next look); the watchdog's look
//! covers items that were queued before their worker fell asleep, when
//! nothing is queued afterwards.
//!
//! Nothing here needs more than the pool lock: a probe's ring is read
//! without one (see `switches.rs` for why a torn read is never believed),
//! and `BLOCKED_SAMPLED` is set and cleared under the lock like the other
//! `blocked` bits, so `nr_running` stays the count of workers that run and
//! are not marked, whichever path marked them.

use std::time::Duration;

use super::{BLOCKED_SAMPLED, NEXT_POOL, POOLS, Pool, PoolInner, WState, Wake};
use crate::sched;
use crate::switches::{self, LazyMono, MIN_ASLEEP, RunState, SwitchProbe};
use crate::trace;
use std::sync::atomic::Ordering;

/// How often the watchdog looks at the workers of managed pools that have
/// waiting work: an item queued before its worker fell asleep, with nothing
/// queued after it, starts within about this long.
pub(crate) const LOOK: Duration = Duration::from_millis(1);

/// What a look found a worker doing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Asleep,
    Awake,
}

impl Seen {
    /// From a probe: asleep at once inside an item's callback, else only past
    /// [`MIN_ASLEEP`]; `None` while a sleep is too young to tell from a wait
    /// for a lock (its remaining time is put in `next`, so the watchdog looks
    /// again then).
    fn of_probe(p: &SwitchProbe, mono: &mut LazyMono, next: &mut Duration) -> Option<Seen> {
        Seen::of_run_state(p.state(mono), p.in_item(), next)
    }

    /// [`of_probe`](Self::of_probe) from what the probe read.
    fn of_run_state(s: RunState, in_item: bool, next: &mut Duration) -> Option<Seen> {
        match s {
            RunState::Asleep(d) if d >= MIN_ASLEEP || in_item => Some(Seen::Asleep),
            RunState::Asleep(d) => {
                *next = (*next).min(MIN_ASLEEP - d);
                None
            }
            RunState::Running | RunState::Preempted => Some(Seen::Awake),
        }
    }

    /// From a `/proc` state letter.
    fn of_state(c: char) -> Seen {
        if c == 'S' || c == 'D' {
            Seen::Asleep
        } else {
            Seen::Awake
        }
    }
}

impl PoolInner {
    /// A look found counted worker `i` `seen`: it leaves `nr_running` if it
    /// sleeps, or counts again if it was out for a sleep and runs. Returns
    /// whether it just left (the caller kicks its lane).
    fn note_seen(&mut self, i: usize, seen: Seen) -> bool {
        let w = &self.workers[i];
        match seen {
            Seen::Asleep if w.blocked == 0 => {
                let (slot, tid) = (w.current_pwq as usize, w.tid);
                let own = w.current != 0;
                self.mark_out(i, BLOCKED_SAMPLED, true);
                if own {
                    self.pwqs[slot].stats.sampled += 1;
                }
                trace::blocked_sampled(
                    self.pool_id,
                    tid,
                    own.then(|| self.pwqs[slot].wq.as_ref().map(|w| w.name.as_str()))
                        .flatten(),
                );
                true
            }
            Seen::Awake if w.blocked & BLOCKED_SAMPLED != 0 => {
                self.mark_in(i, BLOCKED_SAMPLED, true);
                false
            }
            _ => false,
        }
    }

    /// Lane `h` has work and its counted worker runs: unless that worker fell
    /// asleep in its item. If it did, it leaves `nr_running` and a worker is
    /// woken for the lane (what the kernel's scheduler hook would have done
    /// when it slept). Called from `kick`, under the pool lock, for every
    /// item queued or started behind a busy worker, so it reads memory only,
    /// and in a pool whose workers have no probe (its items were never seen
    /// to block) nobody can be seen asleep: one flag, inlined into `kick`.
    #[inline]
    pub(super) fn wake_past_sleeper(&mut self, h: usize, cap: usize) -> Option<Wake> {
        if !self.probed || self.lanes[h].nr_running + self.lanes[h].nr_lent == 0 {
            // No probe, or not free for a worker on its way or lent, not for
            // one that runs: no runner to look at (and no scan for one).
            return None;
        }
        self.look_past_sleeper(h, cap)
    }

    /// [`wake_past_sleeper`](Self::wake_past_sleeper) past its first test.
    #[inline(never)]
    fn look_past_sleeper(&mut self, h: usize, cap: usize) -> Option<Wake> {
        let mut r = self.lanes[h].runner;
        if !self.workers.get(r).is_some_and(|w| w.counted_on(h)) {
            // The runner left (another worker of the lane went on counting
            // after it): find the one that counts now.
            r = self.workers.iter().position(|w| w.counted_on(h))?;
            self.lanes[h].runner = r;
        }
        let w = &self.workers[r];
        let probe = w.probe.as_ref()?;
        let mut later = Duration::MAX;
        if Seen::of_probe(probe, &mut LazyMono::default(), &mut later) != Some(Seen::Asleep) {
            return None;
        }
        self.note_seen(r, Seen::Asleep);
        if !self.lanes[h].unserved(cap) {
            return None;
        }
        let wake = self.wake_for(h, false);
        if wake.is_some() || self.nr_starting > 0 {
            // Woken, or a worker on its way up takes the item.
            self.count_cm_wakeup(r);
        }
        wake
    }
}

impl PoolInner {
    /// Gives worker `me` its context-switch probe (or none).
    pub(super) fn set_probe(&mut self, me: usize, probe: Option<SwitchProbe>) {
        self.probed |= probe.is_some();
        self.workers[me].probe = probe;
    }
}

impl Pool {
    /// Whether this pool's workers should open switch probes.
    pub(super) fn probe_wanted(&self) -> bool {
        self.blocks.load(Ordering::Relaxed) && switches::probes_allowed()
    }

    /// The `/proc` sampler saw a worker of this pool sleep in an item: from
    /// now on its workers read their switch records and the pool is looked at
    /// every [`LOOK`]. Called outside the pool lock.
    fn note_blocks(&self) {
        if !self.blocks.load(Ordering::Relaxed) {
            if switches::probes_allowed() {
                switches::keep_tracking();
            }
            self.blocks.store(true, Ordering::Relaxed);
        }
    }
}

impl super::WorkerSlot {
    /// Holds a share of lane `h`'s CPU: runs an item homed there and counts
    /// in its `nr_running`, or is lent to a partner pool and counts in its
    /// `nr_lent`.
    fn counted_on(&self, h: usize) -> bool {
        self.blocked == 0 && self.lane == h && self.watched()
    }

    /// What a look reads: a worker of this pool in an item (or in what its
    /// last item left to drop), or away in a partner pool's item, that
    /// concurrency management may take out of its count.
    fn watched(&self) -> bool {
        (self.current != 0 || self.lent)
            && self.state == WState::Running
            && self.tid != 0
            && !self.cm_exempt
    }
}

impl PoolInner {
    /// Counts a concurrency-managed wakeup on behalf of worker `i` on its
    /// item's pwq (a lent worker's item is the partner pool's: not counted).
    pub(super) fn count_cm_wakeup(&mut self, i: usize) {
        if self.workers[i].current != 0 {
            let slot = self.workers[i].current_pwq as usize;
            self.pwqs[slot].stats.cm_wakeup += 1;
        }
    }
}

/// A worker the look must read through `/proc` (it has no probe).
struct ProcLook {
    i: usize,
    tid: i32,
    seq: u64,
}

impl Pool {
    /// The watchdog's look at this pool (see the module docs). Returns when it
    /// wants to look again before the next tick: `None` when nothing here
    /// needs it (not managed, or no waiting work and no worker out for a
    /// sleep).
    pub(crate) fn look(&'static self, mono: &mut LazyMono, tick: bool) -> Option<Duration> {
        if !self.managed {
            return None;
        }
        let mut g = self.lock();
        let watched = g.has_work()
            || g.workers
                .iter()
                .any(|w| w.watched() && w.blocked & BLOCKED_SAMPLED != 0);
        if !watched {
            return None;
        }
        let mut next = LOOK;
        let mut wake = Vec::new();
        let mut reads = Vec::new();
        let mut slept = false;
        // Someone to look at next time: a worker in an item that may fall
        // asleep or wake. Without one (the pool's workers cannot start, or
        // every one is exempt) the pool waits for the tick, not the look.
        let mut again = false;
        let mut i = 0;
        while i < g.workers.len() {
            let w = &g.workers[i];
            // An exempt worker (its thread cleared `PF_WQ_WORKER`) is not
            // the pool's to take out of `nr_running`, as in the kernel.
            if !w.watched() {
                i += 1;
                continue;
            }
            again = true;
            let seen = match w.probe.as_ref() {
                Some(p) => Seen::of_probe(p, mono, &mut next),
                None => {
                    let out = w.blocked & BLOCKED_SAMPLED != 0;
                    // Out for a sleep (has it woken?), or counted while work
                    // waits: at a tick, always (that is how a pool's first
                    // sleep is found, and a tick is 10 ms apart); between
                    // ticks only once on one item since the previous look.
                    if switches::sampler_enabled()
                        && (out || (w.blocked == 0 && (tick || w.look_seq == w.seq)))
                    {
                        reads.push(ProcLook {
                            i,
                            tid: w.tid,
                            seq: w.seq,
                        });
                    }
                    g.workers[i].look_seq = g.workers[i].seq;
                    None
                }
            };
            if let Some(seen) = seen
                && g.note_seen(i, seen)
            {
                g = self.kick_past(g, i, &mut wake);
            }
            i += 1;
        }
        if !reads.is_empty() {
            drop(g);
            let states: Vec<Option<char>> =
                reads.iter().map(|r| sched::thread_state(r.tid)).collect();
            g = self.lock();
            for (r, state) in reads.iter().zip(states) {
                let w = &g.workers[r.i];
                // Moved on to another item, or another thread holds the slot.
                if w.seq != r.seq || w.tid != r.tid || !w.watched() {
                    continue;
                }
                if let Some(c) = state
                    && g.note_seen(r.i, Seen::of_state(c))
                {
                    slept = true;
                    g = self.kick_past(g, r.i, &mut wake);
                }
            }
        }
        // Work waits, nobody can take it and no worker is idle: start one
        // now rather than at the next tick.
        if g.starving(g.cap) && !g.manager_active {
            let lane = g.lanes.iter().position(|l| l.unserved(g.cap));
            g = self.create_worker(g, lane.unwrap_or(0));
        }
        self.update_lendable(&g);
        drop(g);
        for w in wake {
            w.run(self);
        }
        if slept {
            self.note_blocks();
        }
        again.then_some(next)
    }

    /// Worker `i` just left `nr_running` (asleep, or a CPU hog): wake a
    /// worker for its lane, or start one if none is idle; the wakeup goes
    /// on `wake`.
    pub(super) fn kick_past<'a>(
        &'static self,
        g: crate::sync::MutexGuard<'a, PoolInner>,
        i: usize,
        wake: &mut Vec<Wake>,
    ) -> crate::sync::MutexGuard<'a, PoolInner> {
        let (g, t) = self.hand_over(g, i);
        wake.extend(t);
        g
    }

    /// [`kick_past`](Self::kick_past) for any way of leaving the count (a
    /// `BlockingGuard` too): returns the worker to wake after the unlock.
    pub(super) fn hand_over<'a>(
        &'static self,
        mut g: crate::sync::MutexGuard<'a, PoolInner>,
        i: usize,
    ) -> (crate::sync::MutexGuard<'a, PoolInner>, Option<Wake>) {
        let h = g.workers[i].lane;
        let wake = g.kick(h);
        if wake.is_some() || g.nr_starting > 0 {
            // Woken, or a worker on its way up takes the pool's next item.
            g.count_cm_wakeup(i);
        }
        if wake.is_none() && g.may_create_ahead() {
            g = self.create_worker(g, h);
        }
        (g, wake)
    }
}

/// The watchdog's look over every pool (`tick`: right after a tick, when
/// every managed pool is looked at; between ticks only those seen to block).
/// Returns when to look again (`None`: no pool needs it before the next
/// tick).
pub(crate) fn look_all(tick: bool) -> Option<Duration> {
    if !switches::sampler_enabled() {
        return None;
    }
    let n = (NEXT_POOL.load(Ordering::Relaxed) as usize).min(super::MAX_POOLS);
    let mut mono = LazyMono::default();
    let mut next: Option<Duration> = None;
    for p in POOLS[..n].iter().filter_map(|c| c.get()) {
        if let Some(d) = p.look(&mut mono, tick) {
            next = Some(next.map_or(d, |n| n.min(d)));
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_in_the_callback_counts_at_once_one_between_items_after_min_asleep() {
        let young = RunState::Asleep(MIN_ASLEEP / 5);
        let mut next = Duration::MAX;
        assert!(Seen::of_run_state(young, true, &mut next) == Some(Seen::Asleep));
        assert_eq!(next, Duration::MAX, "nothing to look at again");
        assert!(Seen::of_run_state(young, false, &mut next).is_none());
        assert_eq!(
            next,
            MIN_ASLEEP - MIN_ASLEEP / 5,
            "look again once it is old enough"
        );
        let old = RunState::Asleep(MIN_ASLEEP);
        assert!(Seen::of_run_state(old, false, &mut next) == Some(Seen::Asleep));
        for awake in [RunState::Running, RunState::Preempted] {
            assert!(Seen::of_run_state(awake, true, &mut next) == Some(Seen::Awake));
        }
    }

    #[test]
    fn a_probe_sees_its_threads_in_item_flag() {
        let Some(probe) = SwitchProbe::open_current() else {
            eprintln!("perf_event_open refused here: nothing to check");
            return;
        };
        assert!(!probe.in_item());
        switches::in_item(true);
        assert!(
            probe.in_item(),
            "set on the probe's thread, read through the probe"
        );
        switches::in_item(false);
        assert!(!probe.in_item());
    }
}
