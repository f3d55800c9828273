//! Errors of the workqueue API: each names the value it refuses.

use std::fmt;

use crate::topology::TopologyError;

/// What can go wrong building or using a workqueue. Non-exhaustive: new
/// failures may be added without a major version.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Reading or building the topology failed.
    Topology(TopologyError),
    /// `max_active` outside `1..=MAX_ACTIVE`.
    InvalidMaxActive {
        /// The value asked for.
        value: usize,
        /// The largest value allowed.
        max: usize,
    },
    /// An ordered workqueue runs one item at a time; `max_active` must be 1.
    OrderedMaxActive(usize),
    /// `min_active` is a floor of the NUMA nodes' shares of an unbound
    /// queue's `max_active`: a per-CPU or ordered queue (named) has none.
    MinActiveNotUnbound(String),
    /// The cpumask leaves no online CPU to run on.
    EmptyCpumask {
        /// The CPUs asked for.
        requested: Vec<usize>,
    },
    /// `queue_on` (and the other `_on` calls) named a CPU id that no CPU of
    /// the workqueue's topology has (not even a possible one). A CPU that
    /// exists but is offline, outside the process's affinity or outside an
    /// unbound queue's cpumask is not an error: the item goes to that CPU's
    /// (disassociated) pool or the queue's default pool, as in the kernel.
    NoSuchCpu {
        /// The CPU asked for.
        cpu: usize,
        /// How many CPU ids the topology has (`nr_cpu_ids`): valid ids are below it.
        nr_cpu_ids: usize,
    },
    /// `freeze`/`thaw` on a workqueue built without `FREEZABLE`.
    NotFreezable {
        /// The workqueue's name.
        name: String,
    },
    /// The workqueue is being drained or destroyed and refuses new work.
    Draining {
        /// The workqueue's name.
        name: String,
    },
    /// [`set_worker_stack_size`](crate::set_worker_stack_size) was given a
    /// size outside 64 KiB to 1 GiB (the bytes asked for).
    InvalidWorkerStack(usize),
    /// `max_queued(0)`: a bounded workqueue must let at least one item wait.
    InvalidMaxQueued(usize),
    /// A bounded workqueue was full and the call was made from one of its
    /// own items: waiting for room could wait for that very item, so the
    /// call refuses (use the `try_` form, or queue from outside).
    FullFromOwnItem {
        /// The workqueue's name.
        name: String,
        /// The call that was refused (`Workqueue::spawn_on`, ...).
        call: &'static str,
    },
    /// The process-wide pool registry is full.
    TooManyPools,
    /// The priority asked for needs a permission the process lacks.
    PriorityDenied {
        /// The priority asked for (`nice -20`, `fifo 1`).
        wanted: String,
        /// What the kernel said, and the limit that applies.
        reason: String,
    },
    /// A nice value outside −20..=19.
    InvalidNice(i32),
    /// A `cache_shard` shard of 0 cores (every place that takes a shard size
    /// refuses 0: the builder, the live setter, `CMWQ_CACHE_SHARD_SIZE`, the CLI).
    InvalidCacheShardSize(usize),
    /// An environment variable holds a value that does not parse.
    BadEnv {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// What it should hold.
        expected: String,
    },
    /// An attribute that only unbound workqueues have (the kernel's sysfs knobs).
    NotUnbound {
        /// The workqueue's name.
        name: String,
        /// The attribute.
        attr: &'static str,
    },
    /// The control endpoint ([`crate::control`]) failed or refused a request.
    Control {
        /// What was being done (`bind /run/user/1000/cmwq/42.sock`, `set nice`).
        what: String,
        /// Why it failed.
        reason: String,
    },
    /// A thread the engine needs (the watchdog, a rescuer) could not be
    /// started: the process is at its thread limit, or out of memory.
    Spawn {
        /// Which thread.
        what: String,
        /// The OS error, its errno and what to raise.
        reason: String,
    },
    /// This process is a child forked from one that runs cmwq's threads:
    /// none of them run here, so its workqueues take no work (see
    /// [`Workqueue`](crate::Workqueue), "After `fork()`").
    Forked,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Topology(e) => write!(f, "topology: {e}"),
            Error::InvalidMaxActive { value, max } => {
                write!(f, "max_active {value} is out of range (1..={max})")
            }
            Error::OrderedMaxActive(v) => {
                write!(f, "max_active {v} on an ordered workqueue (it must be 1)")
            }
            Error::MinActiveNotUnbound(name) => write!(
                f,
                "workqueue {name:?} is per-CPU or ordered: min_active applies only to an unbound, unordered workqueue"
            ),
            Error::EmptyCpumask { requested } => write!(
                f,
                "cpumask {} has no online CPU",
                crate::topology::format_cpulist(requested)
            ),
            Error::NoSuchCpu { cpu, nr_cpu_ids } => write!(
                f,
                "CPU {cpu} does not exist: CPU ids of this machine run from 0 to {} (nr_cpu_ids {nr_cpu_ids}); name one of those",
                nr_cpu_ids.saturating_sub(1)
            ),
            Error::NotFreezable { name } => {
                write!(f, "workqueue {name:?} was not built FREEZABLE")
            }
            Error::Draining { name } => write!(f, "workqueue {name:?} is draining"),
            Error::TooManyPools => write!(f, "too many worker pools in this process"),
            Error::InvalidWorkerStack(n) => write!(
                f,
                "worker stack size {n} bytes is out of range: give 64 KiB to 1 GiB \
                 (e.g. 16 << 20 for 16 MiB)"
            ),
            Error::InvalidMaxQueued(n) => write!(
                f,
                "max_queued({n}): a bounded workqueue must let at least 1 item wait; \
                 leave max_queued unset for no limit"
            ),
            Error::FullFromOwnItem { name, call } => write!(
                f,
                "{call} on workqueue {name:?} from one of its own items while it is full \
                 (max_queued): waiting for room could wait for this item itself; use the \
                 try_ form or queue from outside the workqueue"
            ),
            Error::PriorityDenied { wanted, reason } => write!(
                f,
                "cannot run workers at {wanted}: {reason}; ask for priority_fallback(true) to run at the best allowed priority"
            ),
            Error::InvalidNice(n) => write!(f, "nice {n} is out of range (-20..=19)"),
            Error::InvalidCacheShardSize(n) => {
                write!(f, "cache_shard_size {n}: a shard needs at least 1 core")
            }
            Error::BadEnv {
                var,
                value,
                expected,
            } => write!(f, "{var}={value:?}: expected {expected}"),
            Error::NotUnbound { name, attr } => write!(
                f,
                "workqueue {name:?} is bound: {attr} is an attribute of unbound workqueues"
            ),
            Error::Spawn { what, reason } => write!(f, "cannot start {what}: {reason}"),
            Error::Control { what, reason } => write!(f, "{what}: {reason}"),
            Error::Forked => f.write_str(crate::engine::FORKED_MSG),
        }
    }
}

impl std::error::Error for Error {}

impl From<TopologyError> for Error {
    fn from(e: TopologyError) -> Self {
        Error::Topology(e)
    }
}
