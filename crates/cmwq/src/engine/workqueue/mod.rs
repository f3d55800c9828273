//! Workqueues: the object a user queues to, mapped onto shared worker pools.
//!
//! As in the kernel, a workqueue owns no threads. It owns one *pool workqueue*
//! (pwq) per pool it uses: per CPU for bound queues (the CPU's pool of the right
//! priority), per pod for unbound queues (the pod's pool of the workqueue's
//! attributes, shared with every other workqueue of the same attributes), and a
//! default pwq covering the whole cpumask. A pwq carries the workqueue's
//! per-pool state: `max_active` accounting, the inactive list, and the flush
//! colour counters.
//!
//! `queue` claims the item's PENDING bit, then picks a pwq: the pool where the
//! item runs right now if it does (non-reentrancy), else the pwq of the calling
//! CPU. `max_active` is per CPU for bound queues; for unbound queues it is a
//! system-wide budget cut per NUMA node with the kernel's `min_active` floor of 8.
//!
//! `flush` uses flush colours: each pwq stamps new items with its current colour;
//! a flusher moves every pwq to the next colour and waits until no item of an
//! older colour is left, so it never waits for work queued after it was called.
//! Sixteen colours live at once; a seventeenth flusher waits for the oldest to
//! drain (the kernel queues it on an overflow list).
//!
//! # Rooms
//!
//! - [`api`]: the [`Workqueue`] handle and its public calls.
//! - [`builder`]: [`WorkqueueBuilder`] and `build` (`alloc_workqueue`).
//! - [`queue`]: the queue paths: queue, flush, drain, destroy.
//! - [`table`]: the pwq tables (`Pwqs`, `PwqMap`), `build_table` and the
//!   attrs changes that swap them (`apply`), with the argument that nothing
//!   reaches a freed pwq (`OldPwqs`).
//! - [`for_pool`]: the calls a pool makes into a workqueue, in one block.
//! - [`rescuer`]: a `MEM_RECLAIM` queue's rescuer thread.
//! - [`delayed`]: delayed work, [`DelayedWork`].
//! - [`registry`]: the live queues, borrowed views, system queues.
//! - [`panic`]: where an item's panic is reported.
//!
//! This file holds what every room shares: [`WqInner`] and its fields,
//! whose tags name the locks of the engine's legend (`engine/mod.rs`).

mod api;
mod builder;
mod delayed;
mod for_pool;
mod holders;
#[cfg(loom)]
pub(super) use holders::Holders;
mod panic;
mod queue;
mod registry;
mod rescuer;
mod table;

pub use api::Workqueue;
pub use builder::WorkqueueBuilder;
pub use delayed::DelayedWork;
pub(crate) use panic::report_panic;
pub use panic::{panic_reports_failed, set_panic_hook};
#[cfg(feature = "control")]
pub(crate) use registry::find_by_name;
pub(crate) use registry::{current_wq_name, update_all_pods, workqueue_snaps};
pub use registry::{system, system_highpri, system_long, system_unbound, workqueue_names};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, OnceLock};

use crate::engine::node::NodeActive;
use crate::engine::pool::{Pool, PwqId};
use crate::priority::PoolPrio;
use crate::sync::{Condvar, Mutex};
use crate::topology::Topology;
use crate::types::{UnboundConcurrency, WakeMode, WqAttrs, WqFlags};

use panic::PanicHandler;
use rescuer::Rescuer;
use table::{OldPwqs, PwqMap, Pwqs};

/// Counters of one workqueue (what `wq_monitor.py` shows).
#[derive(Default)]
pub(crate) struct WqStats {
    /// A: queue attempts refused while draining. `Relaxed`: a counter.
    pub rejected: AtomicU64,
}

/// A pwq: its pool and its name there (see [`PwqId`]: a stale one reads
/// as dead).
#[derive(Clone, Copy)]
pub(crate) struct PwqRef {
    pub pool: &'static Pool,
    pub id: PwqId,
}

impl PartialEq for PwqRef {
    fn eq(&self, o: &PwqRef) -> bool {
        std::ptr::eq(self.pool, o.pool) && self.id == o.id
    }
}

/// What a workqueue was built with that the attrs do not say (kept to rebuild pools).
struct WqCtx {
    /// I: the topology its pods are cut from.
    topo: Arc<Topology>,
    /// I: a topology other than the machine's, folded onto the real CPUs.
    custom: bool,
    /// I: when queuers wake workers.
    wake: WakeMode,
    /// I: how unbound pools limit running workers.
    concurrency: UnboundConcurrency,
    /// I: run at the best allowed priority when the one asked for is not.
    fallback: bool,
}

/// The shared state of a workqueue. Locking: see the engine's module docs
/// (`WQ <field>:` names the lock of that field).
pub(crate) struct WqInner {
    /// I: the name (names may repeat).
    pub name: String,
    /// I: gets the payload of this queue's items' panics, instead of the
    /// process-wide hook.
    panic_handler: Option<PanicHandler>,
    /// I: the flags as built.
    pub flags: WqFlags,
    /// I: `WQ_UNBOUND`.
    pub unbound: bool,
    /// I: an ordered queue.
    pub ordered: bool,
    /// I: `WQ_CPU_INTENSIVE`.
    pub cpu_intensive: bool,
    /// I: keeps latency histograms ([`WorkqueueBuilder::latency_histograms`]).
    pub latency: bool,
    /// A: frozen (`FREEZABLE` queues). `Relaxed`: ordered by the pool locks;
    /// `freeze` stores it before it polls every pwq under its pool lock, and
    /// an item is activated only under its pool lock, so an activation that
    /// missed the store is one the poll sees and waits for.
    pub frozen: AtomicBool,
    /// A: drains in progress; queueing from outside the queue is refused while
    /// nonzero. `Relaxed`: a queue that races with the start of a drain may
    /// go either way, and drain loops until nothing is in flight.
    draining: AtomicU32,
    /// A: destroy has begun. `SeqCst`: read with the handles in `borrow_of`
    /// (after the pair of `holders.rs`).
    destroyed: AtomicBool,
    /// A: counters kept outside the pools (`Relaxed`).
    pub stats: WqStats,
    /// A: `max_active`, written under `WQ attrs`. `Relaxed`: a setting; the
    /// writer runs the activation pass itself.
    max_active: AtomicUsize,
    /// A: `min_active` set by [`Workqueue::set_min_active`] (0: the default,
    /// `min(max_active, MIN_ACTIVE)`), written under `WQ attrs`. `Relaxed`.
    pub(super) min_active: AtomicUsize,
    /// I (the vector); each node's fields carry their own tags.
    nodes: Vec<NodeActive>,
    /// WQ node_cpus, written only under `WQ attrs` (or before the queue is
    /// shared): CPUs of the mask per node, to cut `max_active` into budgets.
    node_cpus: Mutex<Vec<usize>>,
    /// WQ cur: the current generation of pwqs (for flush, stats and attrs
    /// changes); swapped only under `WQ old`.
    cur: Mutex<Arc<Pwqs>>,
    /// A: the same generation as lock-free routing words (for `queue`).
    map: PwqMap,
    /// WQ old: the retired pwqs not freed yet, and the freed ones' counters.
    old: Mutex<OldPwqs>,
    /// WQ chain: ordered queues' generations oldest first; only the head runs.
    chain: Mutex<VecDeque<PwqRef>>,
    /// I: what the attrs do not say.
    ctx: WqCtx,
    /// WQ attrs: the attributes; held across a whole attrs change.
    attrs: Mutex<WqAttrs>,
    /// WQ prio, written only under `WQ attrs`: the priority in force, and why
    /// it differs from the one asked for.
    prio: Mutex<(PoolPrio, Option<String>)>,
    /// I: the rescuer of a `MEM_RECLAIM` queue.
    rescuer: Option<Rescuer>,
    /// WQ flush: the flush colour counter; flushers wait on `flush_cv`.
    flush_lock: Mutex<u64>,
    /// Waited on under `WQ flush`.
    flush_cv: Condvar,
    /// A: flushers in progress. `Relaxed`: ordered by the pool locks; a
    /// flusher counts itself before it reads any pwq under its pool lock,
    /// and a completer reads it under the pool lock after its decrement, so
    /// a completer that the flusher waits for sees it.
    flushers: AtomicU32,
    /// A: round robin over the mask's CPUs (`Relaxed`: any value will do).
    rr: AtomicUsize,
    /// A: handles and borrowed views held by the control endpoint and
    /// snapshots: the last handle's drop waits for the views, so it still
    /// destroys (drains) itself. `SeqCst` pair, see `holders.rs`.
    holders: holders::Holders,
    /// I: unique for the process's lifetime (names may repeat).
    pub id: u64,
    /// I: a bounded queue's limit and count (`bounded.rs`); `None`: unbounded.
    pub(crate) bound: Option<Box<super::bounded::Bound>>,
}

/// A topology a test put in place of the machine's (see [`debug_use_topology`]).
#[cfg(feature = "failure-injection")]
static TOPOLOGY_OVERRIDE: OnceLock<Topology> = OnceLock::new();

/// Failure injection: the engine reads `t` instead of `/sys` for the machine's
/// topology (its possible and online CPUs, its pods). Takes effect only before
/// the first workqueue is built; returns false when it is too late. For tests
/// of CPUs the machine does not have (a possible CPU that is not online), with
/// the `failure-injection` feature only.
#[cfg(feature = "failure-injection")]
pub fn debug_use_topology(t: Topology) -> bool {
    SYSTEM_TOPOLOGY.get().is_none() && TOPOLOGY_OVERRIDE.set(t).is_ok()
}

/// The machine's topology, read once (restricted to the CPUs the process may
/// use when it was read; the usable set is followed later by `pool::hotplug`).
static SYSTEM_TOPOLOGY: OnceLock<Arc<Topology>> = OnceLock::new();

pub(crate) fn system_topology() -> &'static Arc<Topology> {
    SYSTEM_TOPOLOGY.get_or_init(|| {
        #[cfg(feature = "failure-injection")]
        if let Some(t) = TOPOLOGY_OVERRIDE.get() {
            return Arc::new(t.clone());
        }
        let t = Topology::detect()
            .and_then(|t| t.restrict_to_affinity())
            .or_else(|_| {
                let n = std::thread::available_parallelism().map_or(1, |n| n.get());
                Topology::from_synthetic(&format!("pack:1 l3:1 core:{n} pu:1"))
            })
            .expect("a one-package synthetic topology always builds");
        Arc::new(t)
    })
}

impl WqInner {
    /// The CPUs builds use (the online CPUs of the process's topology):
    /// what the usable CPUs start as (`pool/hotplug.rs`).
    pub(crate) fn machine_online() -> &'static [usize] {
        system_topology().online()
    }
}
