//! A pwq's life on its pool: `attach` and `detach` (the slot and its era),
//! retiring and killing it after an attrs change, unplugging an ordered
//! queue's next generation, `max_active` and the node budget on activation,
//! and `dec_in_flight` (`pwq_dec_nr_in_flight`), where an item's accounting
//! ends and flushers, waiting pwqs and a dead pwq's workqueue are told.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::Thread;

use super::kick::unlock_wake;
use super::{
    ERA_MASK, NR_COLORS, PWQ_LIST_CAP, Pool, PoolInner, Post, PwqId, PwqState, SHRINK_ABOVE,
};
use crate::engine::workqueue::WqInner;
use crate::types::PwqStats;

impl Pool {
    /// Links a workqueue to this pool: allocates its pwq slot. New items get
    /// flush colour `color` (the workqueue's current one); a `plugged` pwq holds
    /// its items until [`unplug`](Self::unplug). Fails only when the pool
    /// already holds 2^24 pwqs (a slot number must fit a routing word).
    pub(crate) fn attach(
        &'static self,
        wq: Arc<WqInner>,
        max_active: usize,
        node: usize,
        color: u8,
        plugged: bool,
    ) -> Result<PwqId, crate::Error> {
        let mut g = self.lock();
        let slot = match g.free_pwqs.pop() {
            Some(s) => s,
            None if g.pwqs.len() > ERA_MASK as usize => return Err(crate::Error::TooManyPools),
            None => {
                g.pwqs.push(PwqState::free(ERA_MASK));
                (g.pwqs.len() - 1) as u32
            }
        };
        let era = g.pwqs[slot as usize].era.wrapping_add(1) & ERA_MASK;
        g.refcnt += 1;
        g.dying = false;
        let lat = crate::hist::PwqLatency::new(wq.latency);
        g.pwqs[slot as usize] = PwqState {
            wq: Some(wq),
            era,
            max_active,
            nr_active: 0,
            // Room up front, as for the lane worklists: a pwq first used late
            // (a per-CPU pool of the pod the queuer just moved to) must not
            // allocate on the queue path.
            inactive: VecDeque::with_capacity(PWQ_LIST_CAP),
            in_flight: [0; NR_COLORS],
            nr_in_flight: 0,
            work_color: color,
            node,
            credits: 0,
            stats: PwqStats::default(),
            lat,
            retired: false,
            dead: false,
            plugged,
        };
        // A pool starts with one idle worker, except the pool of a CPU that
        // is not usable (never online, or outside the process's CPUs): a
        // machine may list hundreds of possible CPUs, and such a pool gets its
        // first worker from the watchdog when an item is queued there.
        if g.nr_workers == 0 && !g.disassociated {
            g = self.create_worker(g, 0);
        }
        drop(g);
        Ok(PwqId { slot, era })
    }

    /// Unlinks a drained pwq and frees its slot (a dead pwq gave up its pool
    /// reference already); its memory goes with it, and the slot is reused
    /// by the next attach under a new era. Does nothing for a stale
    /// `id` (freed already: `destroy` and [`WqInner::reap`] may both try).
    pub(crate) fn detach(&'static self, id: PwqId) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return;
        };
        let dead = g.pwqs[i].dead;
        debug_assert_eq!(g.pwqs[i].nr_in_flight, 0, "detaching a pwq with items");
        // Dropped after the unlock: the workqueue reference may be the last.
        let old = std::mem::replace(&mut g.pwqs[i], PwqState::free(id.era));
        g.free_pwqs.push(id.slot);
        let wake = if dead {
            Vec::new()
        } else {
            self.put_ref(&mut g)
        };
        if g.refcnt == 0 && g.free_pwqs.len() == g.pwqs.len() {
            // No workqueue uses the pool any more: its lists' memory goes too.
            g.shrink_lists();
        }
        drop(g);
        drop(old);
        for t in wake {
            t.unpark();
        }
    }

    /// Drops one workqueue's reference; an unbound pool with no users lets its
    /// workers go (returns the idle ones to wake so they exit).
    pub(super) fn put_ref(&self, g: &mut PoolInner) -> Vec<Thread> {
        g.refcnt -= 1;
        let mut wake = Vec::new();
        if g.refcnt == 0 && self.attrs.cpu.is_none() {
            g.dying = true;
            for &i in g.lanes.iter().flat_map(|l| l.idle.iter()) {
                if let Some(t) = &g.workers[i].thread {
                    wake.push(t.clone());
                }
            }
        }
        wake
    }

    /// Marks a retired pwq dead: no more items, pool reference released.
    /// The slot stays allocated until its workqueue frees it
    /// ([`WqInner::reap`], asked for through `post`), which takes it off its
    /// lists first. Out of line: a pwq dies once, items end by the million.
    #[cold]
    #[inline(never)]
    pub(super) fn kill_pwq(&self, g: &mut PoolInner, slot: u32, post: &mut Post) -> Vec<Thread> {
        let p = &mut g.pwqs[slot as usize];
        p.dead = true;
        let wq = p.wq.clone().expect("live pwq");
        let id = PwqId { slot, era: p.era };
        // Units it kept while idle go back with it.
        let kept = std::mem::take(&mut p.credits);
        if kept > 0 && wq.node_put(p.node, kept) {
            post.activate = Some((wq.clone(), p.node));
        }
        if wq.ordered {
            post.died = Some(wq.clone());
        }
        debug_assert!(post.reap.is_none(), "one pwq dies per post");
        post.reap = Some((wq, id));
        self.put_ref(g)
    }

    /// Retires a pwq replaced by a new table; it dies at once if empty, else
    /// when its last item completes.
    pub(crate) fn retire(&'static self, id: PwqId) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return;
        };
        let mut post = Post::default();
        g.pwqs[i].retired = true;
        let wake = if g.pwqs[i].nr_in_flight == 0 && !g.pwqs[i].dead {
            self.kill_pwq(&mut g, id.slot, &mut post)
        } else {
            Vec::new()
        };
        drop(g);
        for t in wake {
            t.unpark();
        }
        post.run(self);
    }

    /// Kills a retired, empty pwq found while advancing an ordered chain.
    /// Returns whether it is dead (or gone), and the workqueue that must
    /// free it ([`WqInner::reap`], which the caller runs once it holds no
    /// lock: it is the chain walker, and `died` would re-enter it).
    pub(crate) fn kill_if_drained(&'static self, id: PwqId) -> (bool, Option<Arc<WqInner>>) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return (true, None);
        };
        let p = &g.pwqs[i];
        if p.dead {
            return (true, None);
        }
        if !(p.retired && p.nr_in_flight == 0) {
            return (false, None);
        }
        let mut post = Post::default();
        let wake = self.kill_pwq(&mut g, id.slot, &mut post);
        drop(g);
        for t in wake {
            t.unpark();
        }
        if let Some((wq, node)) = post.activate.take() {
            wq.node_activate(node);
        }
        (true, post.reap.take().map(|(wq, _)| wq))
    }

    /// Lets a plugged pwq's items compete for the node budget, oldest first.
    pub(crate) fn unplug(&'static self, id: PwqId) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return;
        };
        let p = &mut g.pwqs[i];
        if !p.plugged {
            return;
        }
        p.plugged = false;
        let n = p.inactive.len();
        let node = p.node;
        let wq = p.wq.clone().expect("live pwq");
        if n == 0 {
            return;
        }
        // Registered under the pool lock, so an item queued right after the
        // unlock finds waiters and lines up behind these.
        wq.node_enqueue_waiting(node, self.id, id.slot, n);
        drop(g);
        wq.node_activate(node);
    }

    /// Takes back the units of `wq`'s node budget a pwq of `node` keeps
    /// (a reclaim pass: items wait on the node); returns how many.
    pub(crate) fn take_kept(&self, id: PwqId, wq: &Arc<WqInner>, node: usize) -> usize {
        let mut g = self.lock();
        match g.live(id) {
            Some(i) if g.pwq_of(id.slot, wq) && g.pwqs[i].node == node => {
                std::mem::take(&mut g.pwqs[i].credits)
            }
            _ => 0,
        }
    }

    /// Sets the flush colour that new items of a pwq get.
    pub(crate) fn pwq_flip_color(&self, id: PwqId, color: u8) {
        let mut g = self.lock();
        if let Some(i) = g.live(id) {
            g.pwqs[i].work_color = color;
        }
    }

    /// A pwq's counters (zero for one that is gone).
    pub(crate) fn pwq_stats(&self, id: PwqId) -> PwqStats {
        self.with_pwq(id, |p| p.stats)
    }

    /// Adds a pwq's latency histograms to `sum` (nothing for one that is gone).
    pub(crate) fn pwq_latency(&self, id: PwqId, sum: &mut crate::hist::PwqLatency) {
        self.with_pwq(id, |p| sum.add(&p.lat));
    }

    /// Runs `f` on a pwq's state under the pool lock; a pwq that is gone
    /// reads as dead and empty.
    pub(crate) fn with_pwq<R>(&self, id: PwqId, f: impl FnOnce(&PwqState) -> R) -> R {
        let g = self.lock();
        match g.live(id) {
            Some(i) => f(&g.pwqs[i]),
            None => f(&PwqState::gone()),
        }
    }

    /// Changes a pwq's max_active and activates what the new limit allows.
    pub(crate) fn pwq_set_max_active(&'static self, id: PwqId, max: usize) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return;
        };
        g.pwqs[i].max_active = max;
        let hint = self.activate_pwq(&mut g, id.slot);
        let wake = g.kick(hint);
        unlock_wake(self, g, wake);
    }

    /// Activates inactive items of a bound pwq while its limit allows.
    /// Returns the lane of the last one activated (0 if none), a kick's hint.
    pub(super) fn activate_pwq(&self, g: &mut PoolInner, slot: u32) -> usize {
        let mut hint = 0;
        while g.pwq_can_activate(slot) {
            let Some(it) = g.pwqs[slot as usize].inactive.pop_front() else {
                break;
            };
            g.pwqs[slot as usize].nr_active += 1;
            hint = it.lane();
            g.push_active(it);
        }
        hint
    }

    /// Activates one inactive item of an unbound pwq that holds a node budget slot.
    /// Returns false (budget not used) if the pwq has nothing inactive.
    ///
    /// A waiting entry names its pwq by slot alone and may outlive it (its
    /// items were cancelled, the pwq died and was freed): whatever pwq holds
    /// the slot now is used only if it is `wq`'s, draws on the same `node`
    /// and is not plugged, so the unit is one of that pwq's own budget and an
    /// ordered queue's held-back generation stays held back.
    pub(crate) fn activate_one_unbound(
        &'static self,
        slot: u32,
        wq: &Arc<WqInner>,
        node: usize,
    ) -> bool {
        let mut g = self.lock();
        if !g.pwq_of(slot, wq) {
            return false;
        }
        let p = &g.pwqs[slot as usize];
        if p.node != node || p.plugged {
            return false;
        }
        let Some(it) = g.pwqs[slot as usize].inactive.pop_front() else {
            return false;
        };
        g.pwqs[slot as usize].nr_active += 1;
        let hint = it.lane();
        g.push_active(it);
        let wake = g.kick(hint);
        unlock_wake(self, g, wake);
        true
    }

    /// Ends an item's accounting on its pwq (`pwq_dec_nr_in_flight`). The
    /// worker's item end asks [`PoolInner::dec_in_flight_quiet`] first: an
    /// end that changes only counts never gets here.
    /// Returns whether it gave `post` something to do (a flusher to notify,
    /// units that activate waiting items, a pwq that died): an empty `post`
    /// stays as it was. The per-item path takes this answer rather than
    /// looking at every field of `post` again.
    pub(super) fn dec_in_flight(
        &self,
        g: &mut PoolInner,
        slot: u32,
        color: u8,
        active: bool,
        post: &mut Post,
    ) -> bool {
        let p = &mut g.pwqs[slot as usize];
        p.in_flight[color as usize] -= 1;
        p.nr_in_flight -= 1;
        if p.nr_in_flight == 0 && p.inactive.capacity() > SHRINK_ABOVE {
            // The pwq went idle after a peak held back by `max_active`:
            // the list's memory goes back (once per peak, not per item).
            p.inactive = VecDeque::with_capacity(PWQ_LIST_CAP);
        }
        let wq = p.wq.as_ref().expect("live pwq");
        let mut gave = false;
        if (p.in_flight[color as usize] == 0 || p.nr_in_flight == 0) && wq.has_flushers() {
            post.notify = Some(wq.clone());
            gave = true;
        }
        let dies = p.retired && p.nr_in_flight == 0 && !p.dead;
        if active {
            gave |= self.dec_active(g, slot, post);
        }
        if dies {
            for t in self.kill_pwq(g, slot, post) {
                t.unpark();
            }
        }
        gave || dies
    }

    /// An active item of a pwq left: its `max_active` unit goes back.
    /// Inlined into [`dec_in_flight`](Self::dec_in_flight), its only caller
    /// (per item): one call's entry and exit less. Returns whether it gave
    /// `post` units to activate waiting items with.
    #[inline(always)]
    pub(super) fn dec_active(&self, g: &mut PoolInner, slot: u32, post: &mut Post) -> bool {
        let p = &mut g.pwqs[slot as usize];
        let wq = p.wq.as_ref().expect("live pwq");
        p.nr_active -= 1;
        if wq.unbound {
            let node = p.node;
            p.credits += 1;
            let idle = p.nr_active == 0 && p.inactive.is_empty();
            let give = if idle {
                // Up to a batch stays where the node allows it and nobody
                // waits (`node.rs`, "Units an idle pwq keeps"): with one item
                // in flight, the next item then takes none from the node.
                let keep = if wq.node_may_keep_idle(node) {
                    p.credits.min(wq.node_batch(node))
                } else {
                    0
                };
                std::mem::replace(&mut p.credits, keep) - keep
            } else if wq.node_has_waiters(node) {
                std::mem::take(&mut p.credits)
            } else if p.credits > 2 * wq.node_batch(node) {
                let keep = wq.node_batch(node);
                std::mem::replace(&mut p.credits, keep) - keep
            } else {
                0
            };
            if give > 0 && wq.node_put(node, give) {
                post.activate = Some((wq.clone(), node));
                return true;
            }
        } else {
            self.activate_pwq(g, slot);
        }
        false
    }
}

impl PoolInner {
    /// [`Pool::dec_in_flight`] for an active item whose end changes nothing
    /// but its pwq's counts, inlined at the item end. Two common cases:
    ///
    /// - **A backlog** (stop 46): its colour and its pwq keep other items in
    ///   flight, another item stays active, and nothing waits for its
    ///   `max_active` unit (a bound pwq's inactive list is empty; an unbound
    ///   pwq's node has no waiter and the pwq keeps no more units than
    ///   `dec_active` lets it keep).
    /// - **The pwq's last item** (stop 49; with one item in flight, every
    ///   item): the colour or the pwq empties, but no flusher waits on the
    ///   queue, the pwq is not retired (it does not die) and its inactive
    ///   list is small (no peak's list to shrink); the pwq goes idle
    ///   keeping its units, as `dec_active` lets it when they fit in a
    ///   batch and the node allows it (nobody waits).
    ///
    /// Returns false, changing nothing, when any of that fails: the caller
    /// then runs [`Pool::dec_in_flight`].
    #[inline(always)]
    pub(super) fn dec_in_flight_quiet(&mut self, slot: u32, color: u8) -> bool {
        let p = &mut self.pwqs[slot as usize];
        let c = color as usize;
        let wq = p.wq.as_ref().expect("live pwq");
        let empties = p.in_flight[c] <= 1 || p.nr_in_flight <= 1;
        let idles = p.nr_active <= 1;
        if (empties || idles) && !quiet_drain(p, wq) {
            return false;
        }
        if wq.unbound {
            let kept = if idles {
                // `dec_active`'s idle case gives nothing back only when the
                // units fit in a batch and the node lets an idle pwq keep
                // them (asked last: it marks the node).
                p.credits < wq.node_batch(p.node) && wq.node_may_keep_idle(p.node)
            } else {
                wq.node_may_cache_one_more(p.node, p.credits)
            };
            if !kept {
                return false;
            }
            p.credits += 1;
        } else if !p.inactive.is_empty() {
            return false;
        }
        p.in_flight[c] -= 1;
        p.nr_in_flight -= 1;
        p.nr_active -= 1;
        true
    }
}

/// An item end that empties its colour, its pwq or the pwq's active count
/// may still be quiet: nobody flushes the queue (no flusher to notify), the
/// pwq is not retired (it does not die when it empties) and its inactive
/// list is small (no peak's list to give back). Its inactive list need not
/// be empty: items there keep the pwq in flight; a bound pwq's wait for
/// the unit (the caller's test), an unbound pwq's for its node, which then
/// has waiters (`node_may_keep_idle` and `node_may_cache_one_more` say no).
/// A few loads: inlined into the item end.
#[inline(always)]
fn quiet_drain(p: &PwqState, wq: &WqInner) -> bool {
    !wq.has_flushers() && !p.retired && p.inactive.capacity() <= SHRINK_ABOVE
}
