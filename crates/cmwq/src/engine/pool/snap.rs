//! The pools' part of the snapshot and of `Workqueue::pool_counts`: each
//! pool read under its own lock.

// ---- snapshot ----

use std::sync::atomic::Ordering;

use super::{MAX_POOLS, NEXT_POOL, Pool, get_pool};
use crate::priority::PoolPrio;
use crate::types::{PoolCounts, WakeMode};

/// The kernel's pool flag: a manager is creating a worker.
const POOL_MANAGER_ACTIVE: u32 = 1 << 1;
/// The kernel's pool flag: the workers are not bound to a CPU (every unbound
/// pool; a bound pool while the process may not use its CPU, see
/// [`super::hotplug`]).
const POOL_DISASSOCIATED: u32 = 1 << 2;

/// Every pool created so far, by id.
fn all_pools() -> impl Iterator<Item = &'static Pool> {
    let n = (NEXT_POOL.load(Ordering::Relaxed) as usize).min(MAX_POOLS);
    (0..n as u32).filter_map(get_pool)
}

/// The "Worker Pools" part of [`crate::snapshot()`]: each pool read under its
/// own lock, one at a time. An unbound pool that no workqueue uses and
/// whose workers have exited is not shown: it holds nothing but its
/// attributes, kept so the same attributes find it again. Unless one of
/// `named` names it: the workqueues' part, read first, may route to a pool
/// that a change of their attributes (or of the usable CPUs) left empty
/// since, and every pool a snapshot names must be in it.
pub(crate) fn pool_snaps(named: &[u32]) -> Vec<crate::snapshot::PoolSnap> {
    all_pools()
        .filter_map(|p| p.snap(named.contains(&p.id)))
        .collect()
}

impl Pool {
    fn snap(&self, named: bool) -> Option<crate::snapshot::PoolSnap> {
        let (workers, idle, running, worklist, refs, flags, lanes, lockups, cap, rebinds) = {
            let g = self.lock();
            if !named
                && self.attrs.cpu.is_none()
                && g.refcnt == 0
                && g.nr_workers == 0
                && !g.has_work()
            {
                return None;
            }
            let lanes: Vec<crate::snapshot::LaneSnap> = g
                .lanes
                .iter()
                .map(|l| crate::snapshot::LaneSnap {
                    cpu: l.cpu,
                    worklist: l.worklist.len(),
                    idle: l.idle.len(),
                    running: l.nr_running,
                    local: l.stats.local,
                    stolen: l.stats.stolen,
                    stole: l.stats.stole,
                    rehomed: l.stats.rehomed,
                    spread: l.stats.spread,
                })
                .collect();
            (
                g.nr_workers,
                g.nr_idle(),
                g.nr_running(),
                g.worklist_len(),
                g.refcnt,
                self.flags(&g),
                lanes,
                g.lockup.lockups,
                g.cap,
                g.rebinds,
            )
        };
        let a = &self.attrs;
        let (policy, rt_priority) = match a.prio {
            PoolPrio::Nice(_) => ("other", 0),
            PoolPrio::Fifo(p) => ("fifo", p),
        };
        Some(crate::snapshot::PoolSnap {
            id: self.id,
            flags,
            refs,
            nice: a.prio.nice(),
            policy: policy.into(),
            rt_priority,
            cpu: a.cpu,
            cpus: a.cpus.clone(),
            pod_cpus: if a.pod.is_empty() {
                a.pod_cpus.clone()
            } else {
                a.pod.clone()
            },
            lane_cpu: (!a.pod.is_empty()).then(|| a.pod_cpus[0]),
            strict: a.strict,
            managed: self.managed,
            // `then`, not `then_some`: an uncapped pool's product overflows.
            cap: (cap != usize::MAX).then(|| cap * lanes.len()),
            wake: match a.wake {
                WakeMode::Deferred => "deferred".into(),
                WakeMode::UnderLock => "under-lock".into(),
            },
            workers,
            idle,
            running,
            worklist,
            repatriated: lanes.iter().map(|l| l.rehomed).sum(),
            create_failed: self.create_failed.load(Ordering::Relaxed),
            prio_failed: self.prio_failed.load(Ordering::Relaxed),
            lockups,
            rebinds,
            adopted: self.adopted.load(Ordering::Relaxed),
            blocks: self.blocks.load(Ordering::Relaxed),
            lanes,
        })
    }

    /// The kernel's pool flag bits that apply (the snapshot's and the lockup
    /// report's `flags=`); `manager`: a manager is creating a worker.
    pub(super) fn flags(&self, g: &super::PoolInner) -> u32 {
        let mut flags = 0;
        if g.manager_active {
            flags |= POOL_MANAGER_ACTIVE;
        }
        if self.attrs.cpu.is_none() || g.disassociated {
            flags |= POOL_DISASSOCIATED;
        }
        flags
    }

    /// One pwq as the snapshot shows it.
    pub(crate) fn pwq_snap(&self, id: super::PwqId) -> crate::snapshot::PwqSnap {
        self.with_pwq(id, |p| crate::snapshot::PwqSnap {
            pool: self.id,
            state: if p.dead {
                "dead"
            } else if p.retired {
                "retired"
            } else if p.plugged {
                "plugged"
            } else {
                "live"
            }
            .into(),
            nr_active: p.nr_active,
            nr_inactive: p.inactive.len(),
            queued: p.stats.queued,
            started: p.stats.started,
            completed: p.stats.completed,
        })
    }
}

impl Pool {
    /// Snapshot numbers: (workers, idle, running, worklist length).
    pub(crate) fn counts(&self) -> PoolCounts {
        let g = self.lock();
        PoolCounts {
            pool: self.id,
            workers: g.nr_workers,
            idle: g.nr_idle(),
            running: g.nr_running(),
            worklist: g.worklist_len(),
            repatriated: g.lanes.iter().map(|l| l.stats.rehomed).sum(),
            create_failed: self.create_failed.load(Ordering::Relaxed),
            local: g.lanes.iter().map(|l| l.stats.local).sum(),
            stolen: g.lanes.iter().map(|l| l.stats.stolen).sum(),
            spread: g.lanes.iter().map(|l| l.stats.spread).sum(),
            workers_lost: self.workers_lost.load(Ordering::Relaxed),
        }
    }
}
