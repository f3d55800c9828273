//! The queue paths of a workqueue: `queue_claimed` (`__queue_work`: pick a
//! pwq from the routing words, follow a running item for non-reentrancy,
//! insert), `flush` (flush colours), `drain`, and `destroy` (the last
//! handle's drain for good and release of the pwqs). The public calls in
//! [`super::api`] and the timer come here; the pools answer through
//! `Pool::insert` and [`super::for_pool`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::engine::pool::{self, NR_COLORS};
use crate::engine::threads;
use crate::engine::timer;
use crate::engine::work::WorkInner;
use crate::sched;

use super::registry::unregister;
use super::table::PwqMap;
use super::{PwqRef, WqInner};

impl WqInner {
    /// Turns away a claimed item (a draining queue takes no new work from
    /// outside): counted, PENDING released, its job told, its cycle ended.
    pub(super) fn refuse(&self, work: &WorkInner) {
        self.stats.rejected.fetch_add(1, Ordering::Relaxed);
        work.clear_pending();
        work.func.refused();
        work.finish_cycle();
    }

    /// Draining, and the caller is not one of this queue's own items.
    #[inline]
    pub(super) fn refuses_outsiders(self: &Arc<Self>) -> bool {
        self.draining.load(Ordering::Relaxed) > 0
            && pool::current_wq_addr() != Arc::as_ptr(self) as usize
    }

    /// Queues a work whose PENDING bit the caller owns (`__queue_work`),
    /// with a reference to it that the pool keeps (a one-off job hands over
    /// its own; a `Work` clones one). Returns false if the workqueue is
    /// draining and refused it: the item's job is told
    /// ([`Job::refused`](super::work::Job::refused)). A bounded queue counts
    /// it without waiting for room (delayed work: see `bounded.rs`).
    pub(crate) fn queue_claimed(
        self: &Arc<Self>,
        work: Arc<WorkInner>,
        cpu: Option<usize>,
        from_timer: bool,
    ) -> bool {
        self.bound_force();
        self.queue_counted(work, cpu, from_timer)
    }

    /// [`queue_claimed`](Self::queue_claimed) for an item a bounded queue
    /// counted already (the caller took its slot), or any item of an
    /// unbounded one. A refused item gives its slot back.
    ///
    /// One out-of-line copy for the dozen paths that queue: the pool's
    /// insert is inlined into it.
    #[inline(never)]
    pub(crate) fn queue_counted(
        self: &Arc<Self>,
        mut work: Arc<WorkInner>,
        cpu: Option<usize>,
        from_timer: bool,
    ) -> bool {
        if (!from_timer && self.refuses_outsiders()) || threads::refuse_forked() {
            self.bound_leave();
            self.refuse(&work);
            return false;
        }
        loop {
            let m = &self.map;
            let word = if self.ordered {
                m.dfl.load(Ordering::Acquire)
            } else {
                let c = cpu.unwrap_or_else(|| self.local_cpu());
                match m.cpu.get(c).map(|a| a.load(Ordering::Acquire)) {
                    Some(w) if w != 0 => w,
                    _ => m.dfl.load(Ordering::Acquire),
                }
            };
            let Some(mut target) = PwqMap::decode(word) else {
                continue; // only while the first table is being published
            };
            // A pod of per-CPU pools: queue on the lane of the CPU we run on when
            // it is in the target's pod (queue_on, or a folded topology whose
            // CPU ids are not the real ones), so the wakeup stays local.
            if (cpu.is_some() || self.ctx.custom)
                && let Some(pod) = target.pool.pod_id()
                && let Some(a) = m.lane.get(sched::current_cpu())
                && let Some(l) = PwqMap::decode(a.load(Ordering::Acquire))
                && l.pool.pod_id() == Some(pod)
            {
                target = l;
            }
            // Non-reentrancy: if the item runs on another pool now, follow it there.
            // If it last ran on the target pool, the worker that takes it checks the
            // busy table under that pool's lock, so no extra lock is needed here;
            // an item that never ran (a one-off job's) runs nowhere.
            let last = work.pool.load(Ordering::Relaxed);
            if !self.ordered
                && last != 0
                && last != target.pool.id + 1
                && let Some((pool, id)) = pool::find_running(&work, self)
            {
                target = PwqRef { pool, id };
            }
            match target.pool.insert(target.id, work, self) {
                Ok(()) => return true,
                // The pwq died (or was freed) under an attrs change after we
                // read the table: the new table is in place by now.
                Err(back) => work = back,
            }
        }
    }

    /// The topology CPU that routes work queued from here: this CPU if it has
    /// a pwq, else the CPUs of the mask in turn.
    #[inline]
    pub(super) fn local_cpu(&self) -> usize {
        let c = sched::current_cpu();
        if self.map.has(c) {
            return c;
        }
        let n = self.map.route_len.load(Ordering::Acquire);
        if n == 0 {
            return c;
        }
        let i = self.rr.fetch_add(1, Ordering::Relaxed);
        self.map.route[i % n].load(Ordering::Acquire)
    }

    pub(super) fn nr_in_flight(&self) -> usize {
        self.pwq_list()
            .iter()
            .map(|r| r.pool.with_pwq(r.id, |p| p.nr_in_flight))
            .sum()
    }

    pub(super) fn flush(&self) {
        if threads::forked() {
            // No thread of this child runs what is in flight.
            return;
        }
        // A flush from a worker blocks it: let its pool start another worker.
        let _blocked = pool::BlockingGuard::new();
        self.flushers.fetch_add(1, Ordering::Relaxed);
        let mut g = self.flush_lock.lock();
        let pwqs = self.pwq_list();
        // Make room: the next colour's slot must hold nothing of 16 colours ago.
        // Other flushers may advance the colour while we wait, so `next` is
        // recomputed after every wait.
        let next = loop {
            let next = ((*g + 1) % NR_COLORS as u64) as usize;
            if !pwqs
                .iter()
                .any(|r| r.pool.with_pwq(r.id, |p| p.in_flight[next] > 0))
            {
                break next;
            }
            g = self.flush_cv.wait(g);
        };
        *g += 1;
        let new = *g;
        for r in &pwqs {
            r.pool.pwq_flip_color(r.id, next as u8);
        }
        loop {
            let cur = *g;
            let span = (cur - new) as usize;
            let young = |i: usize| (i + NR_COLORS - next) % NR_COLORS <= span;
            let done = pwqs.iter().all(|r| {
                r.pool.with_pwq(r.id, |p| {
                    (0..NR_COLORS).all(|i| p.in_flight[i] == 0 || young(i))
                })
            });
            if done {
                break;
            }
            g = self.flush_cv.wait(g);
        }
        drop(g);
        self.flushers.fetch_sub(1, Ordering::Relaxed);
    }

    pub(super) fn drain(&self) {
        if threads::forked() {
            return;
        }
        self.draining.fetch_add(1, Ordering::Relaxed);
        loop {
            self.flush();
            if self.nr_in_flight() == 0 {
                break;
            }
        }
        self.draining.fetch_sub(1, Ordering::Relaxed);
    }

    /// Activates what the limits allow now (after a thaw or a new `max_active`).
    pub(super) fn reactivate(self: &Arc<Self>) {
        if self.unbound {
            for n in 0..self.nodes.len() {
                self.node_activate(n);
            }
        } else {
            let max = self.max_active.load(Ordering::Relaxed);
            for r in self.pwq_list() {
                r.pool.pwq_set_max_active(r.id, max);
            }
        }
    }

    pub(super) fn destroy(self: &Arc<Self>) {
        if self.destroyed.swap(true, Ordering::SeqCst) {
            return;
        }
        // The last handle of a frozen queue thaws it: everything queued runs
        // (the drain below would otherwise wait forever for items that a
        // frozen queue never starts).
        if self.frozen.swap(false, Ordering::Relaxed) {
            self.reactivate();
        }
        // Drain for good: from here only the queue's own items (and its timers,
        // armed before or by them) may add work; every timer is fired at once.
        self.draining.fetch_add(1, Ordering::Relaxed);
        loop {
            let fired = timer::fire_all_for(self);
            self.flush();
            if fired == 0 && self.nr_in_flight() == 0 && timer::fire_all_for(self) == 0 {
                break;
            }
        }
        for n in &self.nodes {
            n.clear();
        }
        if let Some(r) = &self.rescuer {
            r.stop.store(true, Ordering::Relaxed);
            if let Some(t) = r.thread.get() {
                t.unpark();
            }
            let h = r.join.lock().take();
            if let Some(h) = h
                && h.thread().id() != std::thread::current().id()
            {
                let _ = h.join();
            }
        }
        // No handle is left, so nothing queues any more: release the pwqs
        // (under `WQ old`, so a late `reap` finds nothing left to free).
        let mut old = self.old.lock();
        let retired = std::mem::take(&mut old.retired);
        for r in self.pwqs().all.iter().chain(&retired) {
            r.pool.detach(r.id);
        }
        drop(old);
        unregister(self);
    }
}
