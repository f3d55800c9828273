//! How an item gets onto a pool and off it again before it runs: `insert`
//! (the tail of `__queue_work`: the lane, the flush colour, `max_active` or
//! the node budget, then a kick), `steal` (`try_to_grab_pending`), and
//! `find_running` (the busy table a queuer follows for non-reentrancy).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::kick::unlock_wake_hot;
use super::registry::get_pool;
use super::{Item, Pool, PoolInner, Post, PwqId, PwqState};
use crate::engine::node::NodeGet;
use crate::engine::work::WorkInner;
use crate::engine::workqueue::WqInner;
use crate::sched;

impl PoolInner {
    /// The lane an item queued from real CPU `cpu` goes on: that CPU's, or
    /// (queued from outside the pod) one whose CPU runs no worker, else the
    /// next in turn.
    fn queue_lane(&mut self, cpu: usize) -> usize {
        let cap = self.cap;
        if self.lanes.len() == 1 {
            return 0;
        }
        if let Ok(i) = self.lanes.binary_search_by_key(&cpu, |l| l.cpu) {
            return i;
        }
        if let Some(i) = self.lanes.iter().position(|l| l.free(cap) && !l.has_work()) {
            return i;
        }
        self.rr = (self.rr + 1) % self.lanes.len();
        self.rr
    }
}

impl Pool {
    /// Puts a claimed work item on this pool (the tail of `__queue_work`).
    /// The item's reference is handed over: the worklist keeps it. Gives it
    /// back, changing nothing, if the pwq died after the caller picked it:
    /// the caller picks again from the workqueue's current table; also if
    /// `id` is stale (the pwq was freed since the caller read it).
    ///
    /// Inlined into its one caller ([`WqInner::queue_counted`], itself one
    /// out-of-line copy): one call's entry and exit less per queue.
    #[inline(always)]
    pub(crate) fn insert(
        &'static self,
        id: PwqId,
        work: Arc<WorkInner>,
        wq: &Arc<WqInner>,
    ) -> Result<(), Arc<WorkInner>> {
        let unbound = wq.unbound;
        if wq.latency {
            work.queued_at
                .store(crate::hist::now_ns(), Ordering::Relaxed);
        }
        let cpu = if self.attrs.pod_cpus.len() > 1 {
            sched::current_cpu()
        } else {
            0
        };
        let mut g = self.lock();
        // A stale name (the slot freed, maybe reused by another queue) is
        // refused like a dead pwq; `pwq_of` makes a wrap of the era
        // harmless too: the item only ever goes to a live pwq of its queue.
        let Some(i) = g.live(id) else {
            return Err(work);
        };
        if g.pwqs[i].dead || !g.pwq_of(id.slot, wq) {
            return Err(work);
        }
        let slot = id.slot;
        let lane = g.queue_lane(cpu);
        work.pool.store(self.id + 1, Ordering::Relaxed);
        let p = &mut g.pwqs[slot as usize];
        let color = p.work_color;
        p.in_flight[color as usize] += 1;
        p.nr_in_flight += 1;
        p.stats.queued += 1;
        let node = p.node;
        let mut recheck = None;
        let active = if p.plugged {
            false
        } else if unbound {
            let PwqState { wq, credits, .. } = p;
            let wq = wq.as_ref().expect("live pwq");
            if *credits > 0 && !wq.frozen.load(Ordering::Relaxed) && !wq.node_has_waiters(node) {
                *credits -= 1;
                true
            } else {
                match wq.node_try_get(node, self.id, slot) {
                    NodeGet::Active(got) => {
                        *credits += got - 1;
                        true
                    }
                    NodeGet::Waiting => false,
                    NodeGet::WaitingRecheck => {
                        recheck = Some((wq.clone(), node));
                        false
                    }
                }
            }
        } else {
            g.pwq_can_activate(slot)
        };
        // Built where it is stored, after the last index check: the
        // worklist's push is inlined (see `ring`), so the item goes straight
        // into its slot rather than through a copy on the stack.
        if active {
            g.pwqs[slot as usize].nr_active += 1;
            let worklist = &mut g.lanes[lane].worklist;
            worklist.push_back_with(|| Item::new(work, slot, color, lane as u16));
        } else {
            let inactive = &mut g.pwqs[slot as usize].inactive;
            inactive.push_back(Item::new(work, slot, color, lane as u16));
        }
        let wake = g.kick_hot(lane);
        unlock_wake_hot(self, g, wake);
        if let Some((wq, node)) = recheck {
            wq.node_activate(node);
        }
        Ok(())
    }

    /// Removes a pending item from this pool's lists (`try_to_grab_pending`'s
    /// steal), the item at address `a` ([`addr`](crate::engine::work::addr): a live
    /// item's, so no other item can have it while the caller holds one).
    pub(super) fn steal(&'static self, a: usize) -> bool {
        use crate::engine::work::addr;
        let mut g = self.lock();
        let mut found: Option<(Item, bool)> = None;
        for l in g.lanes.iter_mut() {
            let at = l.worklist.iter().position(|it| addr(&it.work) == a);
            if let Some(i) = at {
                found = l.worklist.remove(i).map(|it| (it, true));
                break;
            }
        }
        if found.is_none() {
            for w in g.workers.iter_mut() {
                if let Some(i) = w.scheduled.iter().position(|it| addr(&it.work) == a) {
                    found = w.scheduled.remove(i).map(|it| (it, true));
                    break;
                }
            }
            if found.is_some() {
                g.nr_scheduled -= 1;
            }
        }
        if found.is_none() {
            for p in g.pwqs.iter_mut() {
                if let Some(i) = p.inactive.iter().position(|it| addr(&it.work) == a) {
                    found = p.inactive.remove(i).map(|it| (it, false));
                    break;
                }
            }
        }
        let Some((item, active)) = found else {
            return false;
        };
        // It stops waiting: a bounded queue's slot goes back.
        if let Some(wq) = &g.pwqs[item.pwq() as usize].wq {
            wq.bound_leave();
        }
        item.work.clear_pending();
        let mut post = Post::default();
        self.dec_in_flight(&mut g, item.pwq(), item.color(), active, &mut post);
        post.wake = g.kick(item.lane());
        self.update_lendable(&g);
        drop(g);
        item.work.finish_cycle();
        post.run(self);
        true
    }
}

/// Steals `work` off the pool that holds it, if any.
pub(crate) fn steal_queued(work: &Arc<WorkInner>) -> bool {
    steal_at(
        work.pool.load(Ordering::Relaxed),
        crate::engine::work::addr(&**work),
    )
}

/// Steals the item at address `a` off pool `id_plus_1 - 1` (its `pool`
/// field), if it is still on one of that pool's lists: whoever holds the
/// item by another view (a spawned job's handle) can take it back.
pub(crate) fn steal_at(id_plus_1: u32, a: usize) -> bool {
    if id_plus_1 == 0 {
        return false;
    }
    get_pool(id_plus_1 - 1).is_some_and(|p| p.steal(a))
}

/// The pool and pwq where `work` is executing now, if it runs on `wq`'s pools.
pub(crate) fn find_running(
    work: &Arc<WorkInner>,
    wq: &Arc<WqInner>,
) -> Option<(&'static Pool, PwqId)> {
    let id = work.pool.load(Ordering::Relaxed);
    let pool = get_pool(id.checked_sub(1)?)?;
    let g = pool.lock();
    let w = g.find_executing(work)?;
    let slot = g.workers[w].current_pwq;
    let same = g.pwq_of(slot, wq);
    let era = g.pwqs[slot as usize].era;
    same.then_some((pool, PwqId { slot, era }))
}
