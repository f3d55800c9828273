//! The engine's shared vocabulary: the types and limits that the public API,
//! the snapshot and the control endpoint name, kept out of the engine's own
//! modules so that those layers depend on this leaf and not on the engine.
//!
//! Nothing here locks, spawns or reads the machine: plain data and constants.

use crate::topology::Scope;

/// The kernel's `WQ_MAX_ACTIVE` (2048 since the 2026 patch).
pub const MAX_ACTIVE: usize = 2048;
/// The kernel's `WQ_DFL_ACTIVE`: `MAX_ACTIVE / 2`.
pub const DFL_ACTIVE: usize = MAX_ACTIVE / 2;
/// The kernel's floor of per-node `max_active` for unbound queues.
pub const MIN_ACTIVE: usize = 8;

/// Workqueue flags, named as the kernel's `WQ_*`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WqFlags(u32);

impl WqFlags {
    /// No flags: a bound (per-CPU) workqueue.
    pub const NONE: WqFlags = WqFlags(0);
    /// Not bound to a CPU: pools per pod of the affinity scope.
    pub const UNBOUND: WqFlags = WqFlags(1 << 1);
    /// Can be frozen with [`Workqueue::freeze`](crate::Workqueue::freeze).
    pub const FREEZABLE: WqFlags = WqFlags(1 << 2);
    /// Guaranteed forward progress under memory pressure (a rescuer).
    pub const MEM_RECLAIM: WqFlags = WqFlags(1 << 3);
    /// Served by the high-priority (nice -20) pools.
    pub const HIGHPRI: WqFlags = WqFlags(1 << 4);
    /// Items do not count toward concurrency management.
    pub const CPU_INTENSIVE: WqFlags = WqFlags(1 << 5);

    /// Whether all flags of `other` are set.
    pub fn contains(self, other: WqFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// The raw bits (the kernel's values).
    pub fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for WqFlags {
    type Output = WqFlags;
    fn bitor(self, rhs: WqFlags) -> WqFlags {
        WqFlags(self.0 | rhs.0)
    }
}

/// The attributes of a workqueue that can change while it runs (unbound
/// queues; the kernel's sysfs knobs).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WqAttrs {
    /// Affinity scope of the pods.
    pub affinity_scope: Scope,
    /// Workers stay inside their pod.
    pub affinity_strict: bool,
    /// CPUs (topology ids) the workqueue may use.
    pub cpumask: Vec<usize>,
    /// Nice value of the workers (−20 for FIFO pools).
    pub nice: i32,
    /// `max_active`.
    pub max_active: usize,
    /// Cores per `cache_shard` pod.
    pub cache_shard_size: usize,
}

/// A snapshot of a workqueue's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WorkqueueStats {
    /// Items put on a list (successful queue cycles, delayed ones once their timer fired).
    pub queued: u64,
    /// Callbacks started (the kernel's `total`).
    pub started: u64,
    /// Callbacks returned or panicked.
    pub completed: u64,
    /// Started but not completed (`infl`).
    pub in_flight: u64,
    /// Callbacks that panicked (caught; the worker lives on).
    pub panics: u64,
    /// Extra workers woken because a worker blocked or turned CPU-intensive (`CM_WAKEUP`).
    pub cm_wakeup: u64,
    /// Queue attempts refused while draining.
    pub rejected: u64,
    /// CPU time of its items, sampled each watchdog tick (`CPUtime`), in ns.
    pub cpu_time_ns: u64,
    /// Items found running past the CPU-intensive threshold (`CPUitsv`).
    pub cpu_intensive: u64,
    /// Workers the /proc sampler found sleeping in an item (no annotation).
    pub sampled: u64,
    /// Non-strict workers moved back into their pod before running an item (`RPR`).
    pub repatriated: u64,
    /// Times its pwqs asked the rescuer for help (`mayday`).
    pub mayday: u64,
    /// Items its rescuer ran (`rescued`).
    pub rescued: u64,
    /// A bounded queue's limit on waiting items
    /// ([`max_queued`](crate::WorkqueueBuilder::max_queued)); `None`: unbounded.
    #[cfg_attr(feature = "serde", serde(default))]
    pub max_queued: Option<u64>,
    /// Bounded queues: calls that found it full (a `try_` call refused, or a
    /// call that waited for room or was refused).
    #[cfg_attr(feature = "serde", serde(default))]
    pub queue_full: u64,
    /// Bounded queues: the most items that waited to start at once.
    #[cfg_attr(feature = "serde", serde(default))]
    pub waiting_peak: u64,
    /// The priority its workers run at (`nice -20`, `fifo 1`, ...).
    pub priority: String,
    /// Set when the priority asked for was not allowed and a lower one is used.
    pub priority_fallback: Option<String>,
}

macro_rules! pwq_counters {
    ($($(#[$m:meta])* $f:ident,)*) => {
        /// Per-pwq counters, summed over pwqs for a workqueue's totals. The
        /// fields are those of [`WorkqueueStats`] that pwqs count, listed once
        /// here: [`add`](Self::add) and [`write_to`](Self::write_to) follow.
        #[derive(Clone, Copy, Default)]
        pub(crate) struct PwqStats {
            $($(#[$m])* pub $f: u64,)*
        }

        impl PwqStats {
            /// Adds `o`'s counters to these.
            pub(crate) fn add(&mut self, o: &PwqStats) {
                $(self.$f += o.$f;)*
            }

            /// Copies these counters into a workqueue's totals.
            pub(crate) fn write_to(&self, out: &mut WorkqueueStats) {
                $(out.$f = self.$f;)*
            }
        }
    };
}

pwq_counters! {
    queued,
    started,
    completed,
    panics,
    cm_wakeup,
    cpu_time_ns,
    cpu_intensive,
    sampled,
    repatriated,
    mayday,
    rescued,
}

/// How many workers of an unbound pool run at once.
///
/// The kernel does not concurrency-manage unbound pools: it wakes a worker for
/// every waiting item and lets the scheduler sort them out, which is cheap in the
/// kernel. In user space each extra runnable thread costs a futex wake and a
/// context switch, and a pool that wakes a thread per item grows to dozens of
/// threads per pod under a test_workqueue load (measured: 20 workers in a
/// one-CPU pod). So by default an unbound pool is managed like a bound one with
/// a cap of one running worker per CPU of its pod; a worker that blocks says so
/// with [`blocking`](crate::blocking) and a spare takes over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnboundConcurrency {
    /// At most one running worker per pod CPU (default).
    #[default]
    PerCpu,
    /// The kernel's behaviour: wake a worker for every waiting item.
    Unmanaged,
}

/// When a queueing thread wakes the worker it picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum WakeMode {
    /// Pick the worker under the pool lock, unpark it after the lock is released (default).
    #[default]
    Deferred,
    /// Unpark the worker while still holding the pool lock (the pre-2026 kernel order).
    UnderLock,
}

/// A picture of one pool's workers and counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct PoolCounts {
    /// Pool id.
    pub pool: u32,
    /// Worker threads, idle or not.
    pub workers: usize,
    /// Workers on the idle lists.
    pub idle: usize,
    /// Workers counted by concurrency management (`nr_running`).
    pub running: usize,
    /// Items waiting on the worklists.
    pub worklist: usize,
    /// Workers moved onto another CPU of the pod on wakeup (`REPATRIATED`).
    pub repatriated: u64,
    /// Worker threads that could not be created.
    pub create_failed: u64,
    /// Items run by a worker of the CPU that queued them.
    pub local: u64,
    /// Items run by a worker of another CPU of the pod (stolen from a lagging lane).
    pub stolen: u64,
    /// Workers woken on an idle CPU of the pod to help a lagging one.
    pub spread: u64,
    /// Worker threads that died outside every `catch_unwind` and were replaced.
    pub workers_lost: u64,
}
