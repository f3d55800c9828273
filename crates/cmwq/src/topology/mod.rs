//! CPUs, cores, last-level caches and NUMA nodes, and the pods built from them.
//!
//! (API skeleton: the topology helper replaces the bodies and this doc.)

use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// An affinity scope: how unbound worker pools are cut across the machine.
///
/// The order of [`Scope::ALL`] is the kernel's enum order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One pod per CPU.
    Cpu,
    /// One pod per SMT core.
    Smt,
    /// One pod per last-level cache.
    Cache,
    /// An LLC cut into shards of about `cache_shard_size` cores (the default).
    CacheShard,
    /// One pod per NUMA node.
    Numa,
    /// One pod for the whole machine.
    System,
}

impl Scope {
    /// Every scope, in the kernel's enum order.
    pub const ALL: [Scope; 6] = [
        Scope::Cpu,
        Scope::Smt,
        Scope::Cache,
        Scope::CacheShard,
        Scope::Numa,
        Scope::System,
    ];
    /// The kernel's name of the scope (`cpu`, `smt`, `cache`, `cache_shard`, `numa`, `system`).
    pub fn name(self) -> &'static str {
        match self {
            Scope::Cpu => "cpu",
            Scope::Smt => "smt",
            Scope::Cache => "cache",
            Scope::CacheShard => "cache_shard",
            Scope::Numa => "numa",
            Scope::System => "system",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scope {
    type Err = TopologyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|sc| sc.name() == s)
            .ok_or_else(|| TopologyError::BadValue {
                what: "affinity scope".into(),
                value: s.into(),
                why: "expected one of cpu, smt, cache, cache_shard, numa, system".into(),
            })
    }
}

/// The default shard size of the `cache_shard` scope, in cores.
pub const DEFAULT_CACHE_SHARD_SIZE: usize = 8;

/// Pods of one scope, as the kernel's `struct wq_pod_type`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PodType {
    /// Each pod's CPUs, sorted; pods in `init_pod_type` order.
    pub pods: Vec<Vec<usize>>,
    /// NUMA node of each pod (-1 for the `system` pod, as the kernel).
    pub pod_node: Vec<i32>,
    /// Pod of each CPU, indexed by CPU id up to the highest possible CPU;
    /// `None` for ids that are not CPUs of the topology.
    pub cpu_pod: Vec<Option<usize>>,
}

/// An error reading or building a topology; always names the file or value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyError {
    /// A file could not be read.
    Io {
        /// The file.
        path: String,
        /// The OS error.
        msg: String,
    },
    /// A file's contents did not parse.
    Parse {
        /// The file.
        path: String,
        /// What was wrong.
        msg: String,
    },
    /// A bad value (spec string, scope name, shard size...).
    BadValue {
        /// What the value is for.
        what: String,
        /// The value as given.
        value: String,
        /// Why it is refused.
        why: String,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::Io { path, msg } => write!(f, "{path}: {msg}"),
            TopologyError::Parse { path, msg } => write!(f, "{path}: {msg}"),
            TopologyError::BadValue { what, value, why } => {
                write!(f, "bad {what} {value:?}: {why}")
            }
        }
    }
}

impl std::error::Error for TopologyError {}

/// The machine as the workqueue sees it.
#[derive(Clone, Debug)]
pub struct Topology {
    _todo: (),
}

impl Topology {
    /// Reads `<root>/devices/system/cpu` and `<root>/devices/system/node`.
    pub fn from_sysfs(_root: &Path) -> Result<Topology, TopologyError> {
        todo!()
    }
    /// Reads `/sys`.
    pub fn detect() -> Result<Topology, TopologyError> {
        Self::from_sysfs(Path::new("/sys"))
    }
    /// Builds a synthetic topology from an hwloc-style spec.
    pub fn from_synthetic(_spec: &str) -> Result<Topology, TopologyError> {
        todo!()
    }
    /// Online CPUs, ascending.
    pub fn online(&self) -> &[usize] {
        todo!()
    }
    /// One more than the highest possible CPU id.
    pub fn nr_cpu_ids(&self) -> usize {
        todo!()
    }
    /// NUMA node of `cpu` (0 if unknown).
    pub fn cpu_node(&self, _cpu: usize) -> usize {
        todo!()
    }
    /// Number of NUMA nodes.
    pub fn nr_nodes(&self) -> usize {
        todo!()
    }
    /// The pods of `scope`; `cache_shard_size` 0 behaves as 1.
    pub fn pods(&self, _scope: Scope, _cache_shard_size: usize) -> PodType {
        todo!()
    }
}

/// Parses a kernel cpu list (`0-3,8,10-11`).
pub fn parse_cpulist(_s: &str) -> Result<Vec<usize>, String> {
    todo!()
}

/// Formats CPUs as the kernel's cpumask hex (wq_dump.py's `cpumask_str`).
pub fn cpumask_str(_cpus: &[usize]) -> String {
    todo!()
}
