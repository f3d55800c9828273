//! What a pool asks of a workqueue: every call the engine's pools make into
//! a [`WqInner`] they hold a pwq of, in one `impl` block, so that a reader of
//! `engine/pool/` finds here all a pool may touch of a queue (in the kernel
//! the pool reaches into `struct workqueue_struct` and its `wq_node_nr_active`
//! directly; the list is short enough to be the interface).
//!
//! - the node budget of an unbound queue (`node_try_get`, `node_put`,
//!   `node_activate`...), taken and given back under the pool lock (`pool ->
//!   N` in the lock order) or activated after it is dropped;
//! - the flushers to wake when a colour drains (`notify_flushers`, after the
//!   pool lock is dropped: `Post`);
//! - mayday and the rescuer (`send_mayday` under the pool lock: `pool -> WQ
//!   mayday`; `wake_rescuer` after it);
//! - the ordered chain and the freeing of a retired pwq that died
//!   (`ordered_advance`, `reap`: both with no pool lock held);
//! - a panic of one of the queue's items (`report_panic`, on the worker, with
//!   no lock held).

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::engine::node::NodeGet;
use crate::engine::pool::{self, Pool, PwqId};
use crate::trace;

use super::panic::{REPORTS_FAILED, report_panic};
use super::{PwqRef, WqInner};

impl WqInner {
    pub(crate) fn has_flushers(&self) -> bool {
        self.flushers.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn notify_flushers(&self) {
        let _g = self.flush_lock.lock();
        self.flush_cv.notify_all();
    }

    /// Takes one unit of the node's active budget, or queues the pwq as waiting.
    /// Called under the pool lock.
    pub(crate) fn node_try_get(&self, node: usize, pool: u32, slot: u32) -> NodeGet {
        let frozen = self.frozen.load(Ordering::Relaxed);
        self.nodes[node].try_get(frozen, pool, slot)
    }

    /// Registers `n` inactive items of a pwq as waiting for budget (an ordered
    /// queue's pwq being unplugged). Called under that pwq's pool lock.
    pub(crate) fn node_enqueue_waiting(&self, node: usize, pool: u32, slot: u32, n: usize) {
        self.nodes[node].enqueue_waiting(pool, slot, n);
    }

    /// Puts a starving pwq on the rescuer's list; false if there is no rescuer
    /// or it is listed already (the kernel counts a mayday only then).
    pub(crate) fn send_mayday(&self, pool: u32, slot: u32) -> bool {
        let Some(r) = &self.rescuer else {
            return false;
        };
        let mut q = r.mayday.lock();
        if q.contains(&(pool, slot)) {
            return false;
        }
        q.push_back((pool, slot));
        true
    }

    pub(crate) fn wake_rescuer(&self) {
        if let Some(t) = self.rescuer.as_ref().and_then(|r| r.thread.get()) {
            t.unpark();
        }
    }

    /// Ordered queues across an attrs change: drops dead generations from the
    /// head of the chain and lets the oldest live one run.
    pub(crate) fn ordered_advance(self: &Arc<Self>) {
        let mut reap = Vec::new();
        let mut chain = self.chain.lock();
        while let Some(&head) = chain.front() {
            if chain.len() > 1 {
                let (dead, freed_by) = head.pool.kill_if_drained(head.id);
                if dead {
                    chain.pop_front();
                    reap.extend(freed_by.map(|_| head));
                    continue;
                }
            }
            head.pool.unplug(head.id);
            break;
        }
        drop(chain);
        for r in reap {
            self.reap(r.pool, r.id);
        }
    }

    /// Frees a retired pwq that died (see [`OldPwqs`]): off the list, its
    /// counters kept, its slot given back to its pool. Once: whoever finds
    /// it on `retired` (this, `apply`'s sweep or `destroy`) frees it.
    pub(crate) fn reap(&self, pool: &'static Pool, id: PwqId) {
        let mut old = self.old.lock();
        let r = PwqRef { pool, id };
        let Some(i) = old.retired.iter().position(|x| *x == r) else {
            return;
        };
        old.retired.swap_remove(i);
        let st = pool.pwq_stats(id);
        old.dead_stats.add(&st);
        pool.pwq_latency(id, &mut old.dead_lat);
        pool.detach(id);
    }

    /// Returns `units` of budget; true if some pwq waits for it.
    pub(crate) fn node_put(&self, node: usize, units: usize) -> bool {
        self.nodes[node].put(units)
    }

    /// Whether items wait for budget on `node`.
    pub(crate) fn node_has_waiters(&self, node: usize) -> bool {
        self.nodes[node].has_waiters()
    }

    /// How many units a pwq of `node` may keep cached.
    pub(crate) fn node_batch(&self, node: usize) -> usize {
        self.nodes[node].batch()
    }

    /// Whether a busy pwq of `node` that caches `credits` units may cache
    /// one more at an item end: nobody waits for a unit on the node and it
    /// keeps under two batches (the item end's common case,
    /// `dec_in_flight_quiet`). One look at the node for both.
    #[inline]
    pub(crate) fn node_may_cache_one_more(&self, node: usize, credits: usize) -> bool {
        let n = &self.nodes[node];
        credits < 2 * n.batch() && !n.has_waiters()
    }

    /// A pwq of `node` going idle may keep up to a batch of units (see
    /// `NodeActive::may_keep_idle`). Called under its pool lock.
    pub(crate) fn node_may_keep_idle(&self, node: usize) -> bool {
        self.nodes[node].may_keep_idle()
    }

    /// Activates waiting items while the node's budget allows
    /// (`node_activate_pending_pwq`), after taking back the units idle pwqs
    /// kept if some may (see `engine/node.rs`). Called with no pool lock held.
    pub(crate) fn node_activate(self: &Arc<Self>, node: usize) {
        self.nodes[node].activate(
            || self.frozen.load(Ordering::Relaxed),
            || {
                self.pwq_list()
                    .iter()
                    .map(|r| r.pool.take_kept(r.id, self, node))
                    .sum()
            },
            |pool, slot| {
                pool::get_pool(pool).is_some_and(|p| p.activate_one_unbound(slot, self, node))
            },
        );
    }

    /// Reports a panic of one of this queue's items: to its own handler if it
    /// has one, else as [`report_panic`] does. Never unwinds.
    pub(crate) fn report_panic(&self, payload: Box<dyn Any + Send>) {
        trace::work_panicked(&self.name, &*payload);
        let Some(h) = &self.panic_handler else {
            return report_panic(&self.name, payload);
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (h.0)(payload)));
        if let Err(p) = r {
            REPORTS_FAILED.fetch_add(1, Ordering::Relaxed);
            std::mem::forget(p);
        }
    }
}
