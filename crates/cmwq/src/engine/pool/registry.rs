//! Every pool of the process, by id (`POOLS`), the maps that share them by
//! attributes (`R bound`, `R unbound`), how a pool is made (`new_pool`) and
//! linked to its pod (`link_pod`), and the per-thread cells that say which
//! pool, workqueue and item a worker runs. Pools are never freed, so an id
//! read from an item or a stale routing word always names a pool.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::lane::Lane;
use super::{Hints, Pool, PoolAttrs, PoolInner};
use super::{budget, hotplug, lockup, manage};
use crate::engine::watchdog;
use crate::priority::PoolPrio;
use crate::sched;
use crate::sync::{Level, Mutex};
use crate::types::WakeMode;

/// Most pools a process makes (ids are never reused).
pub(crate) const MAX_POOLS: usize = 1 << 14;
/// O: every pool, by id; each slot is set once, before the pool is used.
pub(super) static POOLS: [OnceLock<&'static Pool>; MAX_POOLS] =
    [const { OnceLock::new() }; MAX_POOLS];
/// A: the next pool id. `Relaxed`: a scan bound; each `POOLS` slot publishes
/// its own pool (a scan that sees the id before the slot skips it).
pub(super) static NEXT_POOL: AtomicU32 = AtomicU32::new(0);
/// R unbound: unbound pools by attributes.
static UNBOUND_POOLS: Mutex<Option<HashMap<PoolAttrs, u32>>> = Mutex::new_at(Level::RUnbound, None);
/// Bound pools by (cpu, priority, wake mode).
type BoundKey = (usize, PoolPrio, WakeMode);
/// R bound: bound pools by (cpu, priority, wake mode).
static BOUND_POOLS: Mutex<Option<HashMap<BoundKey, u32>>> = Mutex::new_at(Level::RBound, None);
/// The kernel's `IDLE_WORKER_TIMEOUT`: how long a surplus idle worker
/// lingers before it exits, in ms (300 s).
const IDLE_WORKER_TIMEOUT_MS: u64 = 300_000;
/// A: the idle timeout in ms. `Relaxed`: a setting read on its own.
pub(super) static IDLE_TIMEOUT_MS: AtomicU64 = AtomicU64::new(IDLE_WORKER_TIMEOUT_MS);
/// A: the worker-creation test hook. `Relaxed`: a setting read on its own.
pub(super) static FAIL_CREATE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// (pool id, worker index) of the calling thread if it is a worker.
    pub(super) static WORKER: std::cell::Cell<Option<(u32, usize)>> = const { std::cell::Cell::new(None) };
    /// Addresses of the workqueue and of the work item the calling worker
    /// runs ((0, 0): none); one cell, so a worker sets both with one access.
    pub(super) static CURRENT: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// Sets how long surplus idle workers linger before they exit (kernel: 300 s).
///
/// A pool keeps two idle workers plus one per four busy ones. In a pool of
/// one CPU (a bound queue's, or a per-CPU pool of a pod) only a worker that
/// could be let go waits with this timeout, since a timed wait arms a kernel
/// timer at every park: workers that went idle while the pool was not in
/// excess wait untimed, and when the pool comes to have too many they are
/// let go one timeout after another.
pub fn set_idle_timeout(d: Duration) {
    IDLE_TIMEOUT_MS.store(
        d.as_millis().clamp(1, u64::MAX as u128) as u64,
        Ordering::Relaxed,
    );
}

/// Failure injection: make worker creation fail (as if the thread limit were
/// reached). Only with the `failure-injection` feature, for tests and the lab.
#[cfg(feature = "failure-injection")]
pub fn debug_fail_worker_creation(fail: bool) {
    FAIL_CREATE.store(fail, Ordering::Relaxed);
}

#[inline]
pub(crate) fn get_pool(id: u32) -> Option<&'static Pool> {
    POOLS.get(id as usize).and_then(|c| c.get().copied())
}

/// Address of the workqueue whose item the calling thread runs, if it is a worker.
pub(crate) fn current_wq_addr() -> usize {
    CURRENT.with(|c| c.get().0)
}

/// Address of the work item the calling thread runs, if it is a worker.
pub(crate) fn current_work_addr() -> usize {
    CURRENT.with(|c| c.get().1)
}

/// A: the kill-a-worker test hook. `Relaxed`: a setting read on its own.
pub(super) static DEBUG_KILL_WORKER: AtomicBool = AtomicBool::new(false);

/// Test hook: the next worker to finish an item panics outside every
/// `catch_unwind`, with the item's accounting not done (a bug in the engine
/// would look like that). The pool must recover: see `Pool::worker_died`.
/// Only with the `failure-injection` feature, for tests and the lab.
#[cfg(feature = "failure-injection")]
pub fn debug_kill_next_worker() {
    DEBUG_KILL_WORKER.store(true, Ordering::Relaxed);
}

pub(super) fn new_pool(attrs: PoolAttrs) -> Result<&'static Pool, crate::Error> {
    // The CPU budget is read before the first worker can run.
    budget::init();
    let managed = attrs.cpu.is_some() || attrs.managed;
    let cap = if managed { 1 } else { usize::MAX };
    // One lane per real CPU of the pod (sorted: lanes are found by binary
    // search); an item names its lane in 16 bits.
    let mut lane_cpus = attrs.pod_cpus.clone();
    lane_cpus.sort_unstable();
    lane_cpus.dedup();
    lane_cpus.truncate(usize::from(u16::MAX) + 1);
    if lane_cpus.is_empty() {
        lane_cpus.push(sched::current_cpu());
    }
    // The watchdog first: a pool it cannot watch is not made.
    watchdog::ensure_started()?;
    let id = NEXT_POOL.fetch_add(1, Ordering::Relaxed);
    if id as usize >= MAX_POOLS {
        return Err(crate::Error::TooManyPools);
    }
    let pool: &'static Pool = Box::leak(Box::new(Pool {
        id,
        attrs,
        managed,
        inner: Mutex::new_at(
            Level::Pool,
            PoolInner {
                cap,
                disassociated: false,
                rebinds: 0,
                probed: false,
                sample_skip: 0,
                out_read_from: 0,
                sample_backoff: 0,
                slept_tick: 0,
                locality: PoolInner::shape_of(lane_cpus.len(), &[]),
                lanes: lane_cpus.into_iter().map(Lane::new).collect(),
                workers: Vec::new(),
                nr_executing: 0,
                nr_scheduled: 0,
                nr_workers: 0,
                manager_active: false,
                nr_starting: 0,
                pwqs: Vec::new(),
                free_pwqs: Vec::new(),
                refcnt: 0,
                dying: false,
                rr: 0,
                partners: Vec::new(),
                pool_id: id,
                starving_since: None,
                lockup: lockup::Watch::default(),
                create_backoff: manage::Backoff::default(),
            },
        ),
        pod_pools: OnceLock::new(),
        hints: Hints::default(),
        pod_slept: super::PodSlept::default(),
        blocks: AtomicBool::new(crate::switches::probe_from_start()),
        budget_waiting: AtomicBool::new(false),
        create_failed: AtomicU64::new(0),
        prio_failed: AtomicU64::new(0),
        workers_lost: AtomicU64::new(0),
        adopted: AtomicU64::new(0),
    }));
    let _ = POOLS[id as usize].set(pool);
    Ok(pool)
}

/// The bound pool of `cpu` for the given priority.
pub(crate) fn bound_pool(
    cpu: usize,
    prio: PoolPrio,
    wake: WakeMode,
) -> Result<&'static Pool, crate::Error> {
    let mut map = BOUND_POOLS.lock();
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(&id) = map.get(&(cpu, prio, wake)) {
        return Ok(get_pool(id).expect("registered pool"));
    }
    // Made under `R usable`: a change of the usable CPUs sees it, or it
    // sees the change (see `hotplug`).
    let (_usable_lock, usable) = hotplug::hold();
    let pool = new_pool(PoolAttrs {
        cpu: Some(cpu),
        prio,
        cpus: vec![cpu],
        pod_cpus: vec![cpu],
        strict: true,
        wake,
        managed: true,
        pod: Vec::new(),
    })?;
    pool.init_association(&usable);
    map.insert((cpu, prio, wake), pool.id);
    Ok(pool)
}

/// The unbound pool with these attributes, shared (and revived if it was let go).
pub(crate) fn unbound_pool(attrs: PoolAttrs) -> Result<&'static Pool, crate::Error> {
    let mut map = UNBOUND_POOLS.lock();
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(&id) = map.get(&attrs) {
        return Ok(get_pool(id).expect("registered pool"));
    }
    let pool = new_pool(attrs.clone())?;
    map.insert(attrs, pool.id);
    Ok(pool)
}

/// Links the per-CPU pools of one pod (one pool per real CPU, in CPU order) so
/// that a lagging one can borrow an idle worker of another. Pools are shared
/// by attributes, so a later workqueue with the same pod finds them linked
/// already; the link never changes.
pub(crate) fn link_pod(lanes: &[&'static Pool]) {
    for &p in lanes {
        if p.pod_pools.set(lanes.to_vec()).is_ok() {
            let partners = lanes.iter().copied().filter(|q| !std::ptr::eq(*q, p));
            let mut g = p.lock();
            g.partners = partners.collect();
            g.locality = PoolInner::shape_of(g.lanes.len(), &g.partners);
        }
    }
}
