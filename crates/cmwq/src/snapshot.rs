//! A serializable picture of the process's workqueues: what the kernel's
//! `wq_dump.py` and `wq_monitor.py` read out of a live kernel with drgn.
//!
//! [`crate::snapshot()`] takes it in-process; the control endpoint
//! ([`crate::control`]) sends the same structure to `cmwq dump` and `cmwq
//! monitor` in another process. Each part is read under its own lock, one
//! pool or workqueue at a time, so the picture is consistent per pool and per
//! workqueue but not across them (as with drgn reading a running kernel); no
//! lock is held across the whole walk, so taking a snapshot never stalls work.
//!
//! CPU numbers are topology CPU ids. For a workqueue built on a synthetic
//! topology (`custom_topology`), its `cpu_pool` is indexed by that topology's
//! ids, not the machine's.
//!
//! Every type here is `#[non_exhaustive]`: a release may add a field (see
//! "Stability" in the crate docs). Read them; build them only by
//! deserializing.

use crate::WorkqueueStats;
use crate::topology::Scope;
use crate::types::WqAttrs;

mod openmetrics;

/// Version of the snapshot layout; bumped when a field changes meaning.
pub const SNAPSHOT_VERSION: u32 = 1;

/// The whole picture.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Snapshot {
    /// [`SNAPSHOT_VERSION`] of the process that took it.
    pub version: u32,
    /// Process id.
    pub pid: u32,
    /// The process's command name (`/proc/self/comm`).
    pub comm: String,
    /// Milliseconds since the Unix epoch when it was taken.
    pub taken_unix_ms: u64,
    /// How `HIGHPRI` pools run (`nice` or `fifo`).
    pub highpri_policy: String,
    /// The CPU-intensive threshold, in microseconds
    /// (the kernel's `workqueue.cpu_intensive_thresh_us`).
    pub cpu_intensive_thresh_us: u64,
    /// The lockup watchdog's threshold in seconds, 0: off (the kernel's
    /// `workqueue.watchdog_thresh`, see [`crate::set_watchdog_thresh`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub watchdog_thresh: u64,
    /// Panics of cmwq's own code its service threads caught and went on
    /// from ([`crate::engine_thread_panics`]); anything but 0 is a bug in
    /// cmwq, said on stderr when it happened.
    #[cfg_attr(feature = "serde", serde(default))]
    pub engine_thread_panics: u64,
    /// The CPU budget and the cgroup quota it follows (`CMWQ_CPU_QUOTA`).
    #[cfg_attr(feature = "serde", serde(default))]
    pub cpu_budget: CpuBudgetSnap,
    /// The machine as the process's default workqueues see it.
    pub topology: TopologySnap,
    /// Every worker pool, by id.
    pub pools: Vec<PoolSnap>,
    /// Every live workqueue, in creation order.
    pub workqueues: Vec<WorkqueueSnap>,
}

/// The CPU budget (see [`crate::cpu_budget`]).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
#[non_exhaustive]
pub struct CpuBudgetSnap {
    /// `CMWQ_CPU_QUOTA`: `auto`, `off` or a number.
    pub mode: String,
    /// The cgroup's CPU quota in CPUs (quota / period), if one is set.
    pub quota_cpus: Option<f64>,
    /// Where the quota comes from, in words (`0.50 CPUs (50000 us per ...)`).
    pub quota: Option<String>,
    /// Why the quota could not be read, if it could not.
    pub error: Option<String>,
    /// Workers of managed pools that may run at once; `None`: no budget.
    pub limit: Option<usize>,
    /// Units held when the snapshot was taken.
    pub running: usize,
    /// The most held at once so far.
    pub peak: usize,
    /// Times a worker waited for a unit.
    pub waits: u64,
    /// Microseconds the last read of the cgroup files took (the first
    /// read also finds the cgroup in mountinfo; re-reads, once a second,
    /// read the quota files only).
    pub read_us: u64,
}

impl CpuBudgetSnap {
    /// One line: `cpu_quota=... budget=...`, as `cmwq dump` and `cmwq
    /// topology` print it.
    ///
    /// Not part of the stable API (the text may change); for cmwq-cli.
    #[doc(hidden)]
    pub fn line(&self) -> String {
        let quota = match (&self.quota, &self.error) {
            (Some(q), _) => q.clone(),
            (None, Some(e)) => format!("unreadable ({e})"),
            (None, None) => "none".into(),
        };
        let limit = self
            .limit
            .map_or_else(|| "off".to_string(), |n| n.to_string());
        format!(
            "cpu_quota={quota} budget={limit} (CMWQ_CPU_QUOTA={}) running={} peak={} waits={} \
             read={}us",
            self.mode, self.running, self.peak, self.waits, self.read_us
        )
    }
}

impl From<crate::CpuBudget> for CpuBudgetSnap {
    fn from(b: crate::CpuBudget) -> Self {
        CpuBudgetSnap {
            mode: b.mode.to_string(),
            quota_cpus: b.quota.as_ref().map(crate::quota::CpuQuota::cpus),
            quota: b.quota.as_ref().map(ToString::to_string),
            error: b.error,
            limit: b.limit,
            running: b.running,
            peak: b.peak,
            waits: b.waits,
            read_us: b.read_cost.as_micros() as u64,
        }
    }
}

/// The "Affinity Scopes" section.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct TopologySnap {
    /// One line saying what the machine is.
    pub summary: String,
    /// Online CPUs the process could use when it started (what unbound
    /// pods are cut from).
    pub online: Vec<usize>,
    /// Possible CPUs.
    pub possible: Vec<usize>,
    /// CPUs the process may use now (its threads' affinity and its cgroup
    /// cpuset, re-read on the watchdog tick); a bound pool whose CPU is not
    /// among them is disassociated.
    #[cfg_attr(feature = "serde", serde(default))]
    pub usable: Vec<usize>,
    /// CPUs unbound workqueues may use by default (`wq_unbound_cpumask`).
    pub unbound_cpumask: Vec<usize>,
    /// The default affinity scope of unbound workqueues.
    pub default_scope: Scope,
    /// Cores per `cache_shard` pod by default.
    pub cache_shard_size: usize,
    /// The NUMA nodes and their online CPUs.
    pub nodes: Vec<NodeSnap>,
    /// Pods of every scope, in the kernel's order.
    pub scopes: Vec<ScopeSnap>,
}

/// A NUMA node.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct NodeSnap {
    /// The node id (ids may have gaps).
    pub id: usize,
    /// Its online CPUs.
    pub cpus: Vec<usize>,
}

/// The pods of one affinity scope.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ScopeSnap {
    /// The scope.
    pub scope: Scope,
    /// CPUs of each pod.
    pub pod_cpus: Vec<Vec<usize>>,
    /// NUMA node of each pod (−1 for the `system` pod, as the kernel).
    pub pod_node: Vec<i32>,
    /// The pod of each CPU (`None`: offline).
    pub cpu_pod: Vec<Option<usize>>,
}

/// One worker pool (the "Worker Pools" section).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct PoolSnap {
    /// Pool id.
    pub id: u32,
    /// The kernel's pool flag bits that apply: `0x02` a manager is creating a
    /// worker, `0x04` disassociated (every unbound pool).
    pub flags: u32,
    /// Pool workqueues attached (the kernel's `ref`).
    pub refs: usize,
    /// Nice value of the workers (−20 for FIFO pools).
    pub nice: i32,
    /// Scheduling policy of the workers: `other` or `fifo`.
    pub policy: String,
    /// Real-time priority of a FIFO pool, 0 otherwise.
    pub rt_priority: i32,
    /// The CPU of a per-CPU pool.
    pub cpu: Option<usize>,
    /// Real CPUs the workers may run on.
    pub cpus: Vec<usize>,
    /// Real CPUs of the pod the pool serves.
    pub pod_cpus: Vec<usize>,
    /// A pod of several CPUs is served by one pool per CPU (a *per-CPU pool*,
    /// see the README's "Where user space differs"): this pool's CPU. `None`
    /// for every other pool.
    #[cfg_attr(feature = "serde", serde(default))]
    pub lane_cpu: Option<usize>,
    /// Workers are kept inside the pod.
    pub strict: bool,
    /// Concurrency managed (`nr_running` is capped).
    pub managed: bool,
    /// The most workers counted in `nr_running` before no more are woken
    /// (`None`: no cap, the kernel's unbound pools).
    pub cap: Option<usize>,
    /// `deferred` or `under-lock`.
    pub wake: String,
    /// Worker threads.
    pub workers: usize,
    /// Idle workers.
    pub idle: usize,
    /// Workers counted by concurrency management.
    pub running: usize,
    /// Items waiting on the worklist.
    pub worklist: usize,
    /// Workers moved onto another CPU of the pod when woken for it
    /// (`REPATRIATED`; the user-space `wake_cpu`).
    pub repatriated: u64,
    /// Worker threads that could not be created.
    pub create_failed: u64,
    /// Workers that could not take the pool's priority.
    pub prio_failed: u64,
    /// Times the lockup watchdog reported this pool stuck (`BUG: workqueue
    /// lockup` on stderr).
    #[cfg_attr(feature = "serde", serde(default))]
    pub lockups: u64,
    /// Times the workers of this bound pool were bound to its CPU again
    /// after the CPU came back (the kernel's `rebind_workers`).
    #[cfg_attr(feature = "serde", serde(default))]
    pub rebinds: u64,
    /// Idle workers this per-CPU pool took from a partner pool of its pod
    /// instead of starting a thread (adoption; see the README's "Where user
    /// space differs").
    #[cfg_attr(feature = "serde", serde(default))]
    pub adopted: u64,
    /// A worker of this pool was seen asleep inside an item it ran without
    /// [`crate::blocking`] (the `/proc` sampler's find, see
    /// `CMWQ_BLOCK_DETECT`): from then on its workers read their
    /// context-switch records where `perf_event_open` allows it. A pool of
    /// items that never sleep should show `false`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub blocks: bool,
    /// One per real CPU of the pod (a bound pool has one): where items were
    /// queued and who ran them. Not in the kernel, which has one worklist per
    /// pool; see the README's "Where user space differs".
    #[cfg_attr(feature = "serde", serde(default))]
    pub lanes: Vec<LaneSnap>,
}

/// One CPU of a pool's pod: its worklist and the locality counters.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LaneSnap {
    /// The real CPU its workers are pinned to.
    pub cpu: usize,
    /// Items waiting that were queued from this CPU.
    pub worklist: usize,
    /// Idle workers homed here.
    pub idle: usize,
    /// Workers homed here counted in `nr_running`.
    pub running: usize,
    /// Items queued here and run by a worker of this CPU.
    pub local: u64,
    /// Items queued here and run by a worker of another CPU (stolen).
    pub stolen: u64,
    /// Items of other CPUs that this CPU's workers ran.
    pub stole: u64,
    /// Workers re-homed onto this CPU to serve it.
    pub rehomed: u64,
    /// Workers of this CPU woken to help a lagging CPU of the pod.
    pub spread: u64,
}

/// One workqueue's part in one pool (the kernel's `pool_workqueue`).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct PwqSnap {
    /// The pool.
    pub pool: u32,
    /// `live`, `plugged` (an ordered queue's newer pwq), `retired` (replaced by
    /// an attrs change, still draining) or `dead` (drained).
    pub state: String,
    /// Items active in the pool.
    pub nr_active: usize,
    /// Items held back by `max_active`.
    pub nr_inactive: usize,
    /// Items queued through this pwq.
    pub queued: u64,
    /// Items started.
    pub started: u64,
    /// Items completed.
    pub completed: u64,
}

/// One workqueue.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WorkqueueSnap {
    /// Unique for the process's lifetime (names may repeat).
    pub id: u64,
    /// Name.
    pub name: String,
    /// The kernel's flag bits ([`crate::WqFlags`]).
    pub flags: u32,
    /// `percpu`, `unbound` or `ordered` (`wq_dump.py`'s type column).
    pub kind: String,
    /// Unbound.
    pub unbound: bool,
    /// Has a rescuer.
    pub mem_reclaim: bool,
    /// Built on a topology other than the process's (a synthetic one).
    pub custom_topology: bool,
    /// The pool serving each topology CPU (`None`: no pool).
    pub cpu_pool: Vec<Option<u32>>,
    /// The default pool of an unbound queue.
    pub dfl_pool: Option<u32>,
    /// The knobs (for per-CPU queues only `max_active` can change).
    pub attrs: WqAttrs,
    /// `min_active` (`min(max_active, 8)`).
    pub min_active: usize,
    /// Per NUMA node: items active now.
    pub node_nr_active: Vec<usize>,
    /// Per NUMA node: the share of `max_active`.
    pub node_max_active: Vec<usize>,
    /// The rescuer's thread id and the CPUs it may run on.
    pub rescuer: Option<RescuerSnap>,
    /// Every pwq: the current ones and those retired by attrs changes.
    pub pwqs: Vec<PwqSnap>,
    /// The counters (`wq_monitor.py`).
    pub stats: WorkqueueStats,
    /// Its latency histograms, if it keeps them ([`crate::hist`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub latency: Option<crate::hist::WqLatency>,
}

/// A `MEM_RECLAIM` workqueue's rescuer.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RescuerSnap {
    /// Thread id (0: not started yet).
    pub tid: i32,
    /// CPUs it may run on (its affinity).
    pub cpus: Vec<usize>,
}

/// A label value as the exposition format writes it: `\`, `"` and newlines escaped.
fn escape_label_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label_value("plain"), "plain");
        assert_eq!(
            escape_label_value("a\"b\\c\nd"),
            "a\\\"b\\\\c\\nd",
            "quote, backslash and newline escaped"
        );
    }
}
