//! The manager: starting workers, the rule that culls idle ones, and the
//! worker slots that threads from outside (rescuers, guests) borrow
//! (`manage_workers`, `create_worker`, `too_many_workers` in the kernel).

use std::sync::atomic::Ordering;
use std::thread;

use super::worker::worker_thread;
use super::{FAIL_CREATE, Pool, PoolInner, WState, WorkerSlot};
use crate::engine::watchdog;
use crate::sched;
use crate::sync::MutexGuard;

/// Idle workers a pool keeps however few are busy: the kernel's
/// `too_many_workers` lets the third idle one go only when idle workers
/// beyond these two are at least a quarter of the busy ones.
const MIN_IDLE_KEPT: usize = 2;

/// The kernel's `MAX_IDLE_WORKERS_RATIO`: one idle worker (beyond
/// [`MIN_IDLE_KEPT`]) per this many busy ones is kept.
const MAX_IDLE_WORKERS_RATIO: usize = 4;

impl PoolInner {
    /// The kernel's cull rule: more than [`MIN_IDLE_KEPT`] idle, and idle
    /// beyond that is at least a quarter ([`MAX_IDLE_WORKERS_RATIO`]) of busy.
    pub(super) fn too_many_workers(&self) -> bool {
        let idle = self.nr_idle();
        let busy = self.nr_workers.saturating_sub(idle);
        idle > MIN_IDLE_KEPT && (idle - MIN_IDLE_KEPT) * MAX_IDLE_WORKERS_RATIO >= busy
    }

    /// A fresh worker slot in state `state`: an exited one reused, else a new one.
    fn alloc_slot(&mut self, state: WState) -> usize {
        let idx = match self.workers.iter().position(|w| w.state == WState::Exited) {
            Some(i) => i,
            None => {
                self.workers.push(WorkerSlot::empty());
                self.workers.len() - 1
            }
        };
        self.workers[idx] = WorkerSlot::empty();
        self.workers[idx].state = state;
        idx
    }
}

impl Pool {
    /// Attaches the calling thread to this pool as a rescuer or a guest: a
    /// worker slot, so the busy table keeps an item off two threads at once.
    pub(super) fn attach_borrowed(g: &mut PoolInner, state: WState) -> usize {
        let idx = g.alloc_slot(state);
        g.workers[idx].thread = Some(thread::current());
        g.workers[idx].tid = sched::gettid();
        idx
    }

    /// Gives a borrowed slot back.
    pub(super) fn detach_borrowed(g: &mut PoolInner, idx: usize) {
        g.workers[idx].state = WState::Exited;
        g.workers[idx].thread = None;
        g.workers[idx].tid = 0;
    }

    /// Starts a worker thread homed on `lane` (the manager's `create_worker`);
    /// called with the lock held, which it drops while the thread starts.
    pub(super) fn create_worker<'a>(
        &'static self,
        mut g: MutexGuard<'a, PoolInner>,
        lane: usize,
    ) -> MutexGuard<'a, PoolInner> {
        let idx = g.alloc_slot(WState::Starting);
        g.workers[idx].lane = lane;
        g.nr_workers += 1;
        g.nr_starting += 1;
        g.manager_active = true;
        drop(g);
        let res = if FAIL_CREATE.load(Ordering::Relaxed) {
            Err(std::io::Error::other(
                "worker creation disabled by test hook",
            ))
        } else {
            thread::Builder::new()
                .name(format!("cmwq/{}:{}", self.id, idx))
                .spawn(move || worker_thread(self, idx, lane))
        };
        let mut g = self.lock();
        g.manager_active = false;
        if res.is_err() {
            self.create_failed.fetch_add(1, Ordering::Relaxed);
            g.workers[idx].state = WState::Exited;
            g.nr_workers -= 1;
            g.nr_starting -= 1;
            // The watchdog retries, and sends mayday if work starves.
            watchdog::poke();
        }
        g
    }
}
