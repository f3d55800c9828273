//! Waking a worker for a lane: `kick` (the kernel's `kick_pool`) picks one
//! under the pool lock and `unlock_wake` wakes it after the unlock (the
//! argument that no wakeup is lost is in the folder's docs). Every item asks
//! twice (queued and started), so the one-lane case is answered inline and
//! only the two pod shapes ([`Locality`], argued in [`super::lane`]) pay for a
//! call: `kick_lanes` for a shared pool, `kick_partners` for a per-CPU pool,
//! whose partners lend a worker through `lend_to` (a busy per-CPU pool that
//! no partner could help is answered inline too). The release after a kick,
//! `unlock_wake`, is one out-of-line copy but for its common case at the two
//! per-item call sites (`unlock_wake_hot`).

use std::sync::atomic::Ordering;
use std::thread::Thread;

use super::hotplug;
use super::lane::LazyNow;
use super::{Hints, Pool, PoolInner, WState};
use crate::engine::watchdog;
use crate::sched;
use crate::sync::MutexGuard;
use crate::types::WakeMode;

/// The shapes a pool takes to keep work on the CPU that queued it (the
/// argument is in [`lane`](super::lane); the README's "Where user space
/// differs" uses the same words).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Locality {
    /// One lane and no partners: a bound pool, or the pool of a one-CPU pod.
    Single,
    /// A **shared pool**: one pool (one lock) for a pod of several CPUs, with
    /// a lane per CPU inside it; a lane without an idle worker gets one
    /// re-homed from another lane. A workqueue's default pool (which ordered
    /// queues use) and the unmanaged pools have this shape.
    Lanes,
    /// A **per-CPU pool**: the pool of one CPU of a managed pod of several,
    /// with its own lock, linked to the pools of the pod's other CPUs (its
    /// *partners*), which lend it an idle worker when it lags.
    Partners,
}

/// A wakeup decided under the pool lock, done after it is dropped.
pub(crate) enum Wake {
    /// A worker of this pool picked for a lane.
    Worker {
        thread: Thread,
        /// Re-homed: (thread id, CPU) to pin it to before it is unparked.
        rehome: Option<(i32, usize)>,
    },
    /// This per-CPU pool lags: a partner pool of the pod lends it an idle
    /// worker ([`lend_to`]). Decided without the partners' locks.
    Spread,
}

impl Wake {
    /// Wakes the worker; `pool` is the pool whose lock decided it.
    pub(super) fn run(self, pool: &'static Pool) {
        match self {
            Wake::Worker { thread, rehome } => {
                if let Some((tid, cpu)) = rehome
                    && let Err(e) = sched::set_affinity_of(tid, &[cpu])
                {
                    // The CPU left the process's cpuset: it costs locality
                    // now, and the watchdog looks at the usable CPUs again.
                    hotplug::pin_failed(&e);
                }
                thread.unpark();
            }
            Wake::Spread => lend_to(pool),
        }
    }
}

impl PoolInner {
    /// The shape this pool has (see [`Locality`]). Fixed once the pool is
    /// linked to its pod: lanes are set when it is made, partners by
    /// `link_pod`, and only a one-per-CPU pool gets partners. Kept in a
    /// field (stop 49): every item asks it four or five times, and the
    /// answer from the two lists' lengths was two loads and two tests each.
    #[inline]
    pub(super) fn locality(&self) -> Locality {
        debug_assert_eq!(
            self.locality,
            Self::shape_of(self.lanes.len(), &self.partners)
        );
        self.locality
    }

    /// The shape of a pool with `lanes` lanes and these partners.
    pub(super) fn shape_of(lanes: usize, partners: &[&'static Pool]) -> Locality {
        match (lanes, partners.is_empty()) {
            (1, true) => Locality::Single,
            (1, false) => Locality::Partners,
            _ => Locality::Lanes,
        }
    }

    /// Picks an idle worker if a lane needs one; the caller wakes it after
    /// the unlock. `hint` is the lane that just changed (its items are looked
    /// at first).
    ///
    /// First, a lane with items and no worker serving them gets one of its
    /// own CPU (re-homed from another lane if it has none idle). Otherwise, if
    /// `hint` lags (see [`lane`](super::lane)), a CPU of the pod with no
    /// counted worker gets one, which will steal from it.
    ///
    /// One out-of-line copy for the paths that are not per item; the two
    /// that are (a queue's insert, a worker's item start) inline the same
    /// steps ([`kick_hot`](Self::kick_hot), [`kick_at`](Self::kick_at)).
    #[inline(never)]
    pub(super) fn kick(&mut self, hint: usize) -> Option<Wake> {
        self.kick_at(hint, &mut LazyNow::default(), None)
    }

    /// [`kick`](Self::kick) inlined, for a queue's insert (per item).
    #[inline(always)]
    pub(super) fn kick_hot(&mut self, hint: usize) -> Option<Wake> {
        self.kick_at(hint, &mut LazyNow::default(), None)
    }

    /// [`kick`](Self::kick) with the clock read already made under this
    /// lock hold, if any (a worker's timed item start): the lagging test
    /// uses it rather than reading its own; and with the partners' answer
    /// to [`partner_can_lend`](Self::partner_can_lend) if it was read under
    /// this hold too (`lend`). Inlined into its callers (the
    /// two per-item sites and `kick`'s one copy): the common answers are a
    /// few loads, and the call's entry and exit cost more than they do.
    #[inline(always)]
    pub(super) fn kick_at(
        &mut self,
        hint: usize,
        now: &mut LazyNow,
        lend: Option<bool>,
    ) -> Option<Wake> {
        let cap = self.cap;
        match self.locality() {
            Locality::Single => {
                // A bound pool or a one-CPU pod: nothing to lag behind or
                // spread to, so the only question is whether its items wait
                // unserved. Every item asks (twice: queued and started), so
                // it is answered here, inlined, and only a pod's shapes pay
                // for a call.
                if !self.lanes[0].unserved(cap) {
                    // Served, unless its worker fell asleep in its item.
                    if !self.lanes[0].has_work() {
                        return None;
                    }
                    return self.wake_past_sleeper(0, cap);
                }
                self.wake_for(0, false)
            }
            Locality::Lanes => self.kick_lanes(hint, cap, now),
            // The common case of a busy per-CPU pool, answered inline: its
            // items wait behind its running worker, which nobody could see
            // asleep, and no partner could lend one if it lagged. These are
            // `kick_partners`'s own tests (`wake_past_busy`'s, then not
            // `unserved`, then no lender): it would find nothing to do.
            Locality::Partners
                if self.lanes[0].behind_worker(cap)
                    && !self.may_see_sleeper(0)
                    && !lend.unwrap_or_else(|| self.partner_can_lend()) =>
            {
                None
            }
            Locality::Partners => self.kick_partners(cap, now),
        }
    }

    /// Lane `h` has items and a counted worker: a worker for it only if
    /// that one fell asleep in its item.
    #[inline]
    fn wake_past_busy(&mut self, h: usize, cap: usize) -> Option<Wake> {
        if self.lanes[h].behind_worker(cap) {
            self.wake_past_sleeper(h, cap)
        } else {
            None
        }
    }

    /// [`kick`](Self::kick) for a shared pool: a lane nobody serves gets a
    /// worker of its own CPU; else, if lane `hint` lags, a free lane's CPU
    /// gets one, which will steal from it.
    #[inline(never)]
    fn kick_lanes(&mut self, hint: usize, cap: usize, now: &mut LazyNow) -> Option<Wake> {
        if let Some(w) = self.wake_past_busy(hint, cap) {
            return Some(w);
        }
        let n = self.lanes.len();
        if let Some(d) = lanes_from(hint, n).find(|&d| self.lanes[d].unserved(cap)) {
            return self.wake_for(d, false);
        }
        if self.lanes[hint].has_work() {
            let free = lanes_from(hint, n)
                .skip(1)
                .find(|&d| self.lanes[d].free(cap));
            if let Some(d) = free
                && self.lanes[hint].lagging(now)
            {
                return self.wake_for(d, true);
            }
        }
        None
    }

    /// [`kick`](Self::kick) for a per-CPU pool: its own idle worker for
    /// items nobody serves; a partner's, lent ([`Wake::Spread`]), when none
    /// is idle here or when its lane lags and a partner can lend.
    #[inline(never)]
    fn kick_partners(&mut self, cap: usize, now: &mut LazyNow) -> Option<Wake> {
        if let Some(w) = self.wake_past_busy(0, cap) {
            return Some(w);
        }
        if self.lanes[0].unserved(cap) {
            // Nobody idle here: a partner may lend one. If none says it can,
            // `None`, so that a worker that just blocked starts its own
            // replacement (`may_create_ahead`) instead of asking partners
            // that have nobody to lend: on a 16-CPU pod with hundreds of
            // items blocked at once, every lane was short, the spread found
            // no lender, and no replacement was started ahead (the device
            // run of stop 38: `cmwq mix` at 20 ms blocks, 16 producers).
            return self
                .wake_for(0, false)
                .or_else(|| self.partner_can_lend().then_some(Wake::Spread));
        }
        if self.lanes[0].has_work() && self.partner_can_lend() && self.lanes[0].lagging(now) {
            return Some(Wake::Spread);
        }
        None
    }

    /// A partner pool of the pod says it can lend a worker (its `lendable`
    /// hint; the lender checks again under its own lock).
    pub(super) fn partner_can_lend(&self) -> bool {
        self.partners.iter().any(|p| p.hints.has(Hints::LENDABLE))
    }

    /// Wakes a worker for lane `d`: its own most recently idled, else one of
    /// the lane with the most idle, re-homed to `d`'s CPU.
    pub(super) fn wake_for(&mut self, d: usize, spread: bool) -> Option<Wake> {
        if !self.budget_allows_wake() {
            return None;
        }
        let (i, rehome) = if let Some(i) = self.lanes[d].idle.pop() {
            (i, false)
        } else {
            let from = (0..self.lanes.len())
                .filter(|&e| !self.lanes[e].idle.is_empty())
                .max_by_key(|&e| self.lanes[e].idle.len());
            let Some(e) = from else {
                // Work waits and no worker is idle. If nobody is creating one
                // either (an earlier creation failed, the pool has no worker at
                // all), make sure the watchdog is awake to retry and send mayday:
                // it may have parked while this pool's worklists were still empty.
                if !self.manager_active {
                    watchdog::poke();
                }
                return None;
            };
            (self.lanes[e].idle.pop().expect("lane has idle"), true)
        };
        let lane = &mut self.lanes[d];
        lane.nr_woken += 1;
        lane.stats.spread += u64::from(spread);
        lane.stats.rehomed += u64::from(rehome);
        let cpu = lane.cpu;
        let w = &mut self.workers[i];
        w.state = WState::Woken;
        w.lane = d;
        w.repatriated |= rehome;
        Some(Wake::Worker {
            thread: w.thread.clone().expect("idle worker has a thread"),
            rehome: rehome.then_some((w.tid, cpu)),
        })
    }
}

/// The `n` lanes in turn, starting at `first` and wrapping around (no
/// division: it runs for every item).
pub(super) fn lanes_from(first: usize, n: usize) -> impl Iterator<Item = usize> {
    debug_assert!(first < n, "lane {first} of {n}");
    (first..n).chain(0..first.min(n))
}

/// [`unlock_wake`] at the two call sites every item passes (a queue's
/// insert, a worker's item start): the common case there, nobody to wake in
/// a pool whose items never blocked, is the partners' flags (a per-CPU pool
/// of a pod) and the bare unlock, inlined (the out-of-line call's entry and
/// exit were 40 of the 96 instructions its two calls cost per item). Only
/// these two sites: the rest of the release path stays out of line (the
/// `icache` study).
#[inline(always)]
pub(super) fn unlock_wake_hot(
    pool: &'static Pool,
    g: MutexGuard<'_, PoolInner>,
    wake: Option<Wake>,
) {
    // The steps of `unlock_wake` with nobody to wake and no sleep seen in
    // the pod (`peek` is false): the flags, then the unlock.
    if wake.is_none() && !pool.blocks.load(Ordering::Relaxed) {
        if !g.partners.is_empty() {
            pool.publish_lendable(&g);
        }
        drop(g);
        return;
    }
    unlock_wake(pool, g, wake);
}

/// Releases the pool lock and wakes the worker a kick picked: after the unlock
/// ([`WakeMode::Deferred`]) or before it ([`WakeMode::UnderLock`]).
///
/// Every path that unlocks a pool and may wake a worker goes through here, so
/// how this function is compiled decides the code of the whole release path
/// (but for [`unlock_wake_hot`]'s inlined common case). The `inline-unlock`
/// cargo feature inlines it at every call site (seed 001's inlined
/// `_raw_spin_unlock`); without it, it stays one out-of-line copy. The lab's
/// `icache` study compares the two builds.
#[cfg_attr(feature = "inline-unlock", inline(always))]
#[cfg_attr(not(feature = "inline-unlock"), inline(never))]
pub(super) fn unlock_wake(pool: &'static Pool, g: MutexGuard<'_, PoolInner>, wake: Option<Wake>) {
    pool.update_lendable(&g);
    // Kick partners only while the pod's items are seen to sleep (a pool
    // never seen to block pays the one load).
    let peek = pool.blocks.load(Ordering::Relaxed) && pool.pod_slept_recently(&g);
    match pool.attrs.wake {
        // A spread takes a partner's lock: never while holding ours.
        WakeMode::UnderLock if !matches!(wake, Some(Wake::Spread)) => {
            if let Some(w) = wake {
                w.run(pool);
            }
            drop(g);
        }
        _ => {
            drop(g);
            if let Some(w) = wake {
                w.run(pool);
            }
        }
    }
    if peek {
        super::sleep::peek_partners(pool);
    }
}

/// A partner of the lagging per-CPU pool `to` lends it an idle worker: the next
/// partner, in CPU order after `to`, whose lane has no counted worker and an
/// idle one. Runs with no pool lock held and takes one partner's lock at a
/// time, so per-CPU pools never hold two locks.
pub(super) fn lend_to(to: &'static Pool) {
    let Some(pods) = to.pod_pools.get() else {
        return;
    };
    let k = pods.iter().position(|p| std::ptr::eq(*p, to)).unwrap_or(0);
    for j in 1..pods.len() {
        let d = pods[(k + j) % pods.len()];
        if !d.hints.has(Hints::LENDABLE) {
            continue;
        }
        let mut g = d.lock();
        if !g.lanes[0].free(g.cap) {
            continue;
        }
        let Some(i) = g.lanes[0].idle.pop() else {
            continue;
        };
        g.lanes[0].nr_woken += 1;
        g.lanes[0].stats.spread += 1;
        g.workers[i].state = WState::Woken;
        g.workers[i].guest_for = Some(to);
        let t = g.workers[i].thread.clone();
        d.update_lendable(&g);
        drop(g);
        if let Some(t) = t {
            t.unpark();
        }
        return;
    }
}

impl Pool {
    /// A per-CPU pool tells its partners what they may ask of it now (see
    /// [`Hints`]: it can lend a worker, it has a spare one, items wait behind
    /// its worker). Written only when a hint changes, so the partners' reads
    /// stay on a shared cache line.
    pub(super) fn update_lendable(&self, g: &PoolInner) {
        if g.partners.is_empty() {
            return;
        }
        self.publish_lendable(g);
    }

    /// [`update_lendable`](Self::update_lendable) for a pool with partners,
    /// inlined where every item passes ([`unlock_wake_hot`]).
    #[inline(always)]
    fn publish_lendable(&self, g: &PoolInner) {
        let l = &g.lanes[0];
        let idle = l.idle.len();
        let mut bits = 0;
        if idle > 0 && l.free(g.cap) {
            bits |= Hints::LENDABLE;
        }
        if idle > super::manage::KEEP_IDLE && !g.dying {
            bits |= Hints::SPARE;
        }
        if g.probed && l.behind_worker(g.cap) {
            bits |= Hints::BEHIND;
        }
        self.hints.publish(bits);
    }
}
