//! CPUs, cores, last-level caches and NUMA nodes, and the pods built from them.
//!
//! An unbound workqueue does not get one worker pool per CPU, nor one for the
//! whole machine: the kernel cuts the CPUs into *pods* and gives every pod its
//! own pool, so a work item queued on a CPU runs on a worker that shares a
//! cache with the queuer without every CPU fighting for one pool lock.  How
//! the CPUs are cut is the *affinity scope* ([`Scope`]): one pod per CPU, per
//! SMT core, per last-level cache (LLC), per shard of an LLC, per NUMA node,
//! or one pod for the system.  `cache_shard` is the default: on a 72-core
//! Grace or a big EPYC CCD one pod per LLC puts dozens of CPUs behind one
//! pool lock, and sharding the LLC into groups of about
//! [`DEFAULT_CACHE_SHARD_SIZE`] cores keeps the cache locality while cutting
//! the contention.
//!
//! # Where the machine comes from
//!
//! [`Topology::from_sysfs`] reads the same files the kernel derives its own
//! masks from, under a root that is a parameter so tests can point it at a
//! fixture tree:
//!
//! * `devices/system/cpu/online` and `possible`;
//! * per online CPU, `topology/thread_siblings_list` (else `core_cpus_list`)
//!   for the SMT core, `topology/package_cpus_list` (else
//!   `core_siblings_list`, else `physical_package_id`) for the package, and
//!   among `cache/index*/` the highest `level` whose `type` is `Unified` or
//!   `Data`, whose `shared_cpu_list` is the LLC (what the scheduler's
//!   `cpus_share_cache()` follows);
//! * `devices/system/node/node*/cpulist` for the NUMA node of each CPU.
//!
//! Real machines, containers, old kernels and the dumps tools record lose
//! pieces of this.  A missing piece degrades the way a careful reader would,
//! and says so in [`Topology::notes`]: no `cpu/online` is derived from the
//! `cpuN` directories and their `online` files; a missing `*_list` file is
//! read from its hex mask (`thread_siblings`, `core_siblings`,
//! `shared_cpu_map`, `cpumap`); no cache directories makes the LLC the
//! package; no `node` directory makes one node 0; no sibling file leaves the
//! CPU alone in its core.  The `sysfs` module docs give every fallback chain.
//! A file that is there but does not parse is an error naming the file:
//! guessing around garbage would give pods nobody can explain.
//!
//! The tree is not trusted to be sysfs: every file must be a regular file
//! of at most [`SYSFS_FILE_MAX_BYTES`] (a FIFO or `/dev/zero` is an error,
//! not a hang or an out-of-memory), and the memory kept is linear in the
//! number of CPUs whatever the files say.
//!
//! [`Topology::from_synthetic`] builds a machine from an hwloc-style spec such
//! as `pack:1 l3:11 core:8 pu:2`, so a 2-CPU laptop can compute the pods of an
//! 88-core EPYC; see the `synthetic` module docs for the grammar and CPU
//! numbering.
//!
//! # Pods
//!
//! [`Topology::pods`] follows the kernel's `init_pod_type()`: walking CPUs in
//! ascending order, a CPU joins the pod of the first lower CPU it shares the
//! scope with, or else opens the next pod.  Pods are therefore numbered by
//! their lowest CPU, and `pod_node` is the node of the pod's highest CPU (the
//! kernel overwrites it for every CPU of the pod, so the last one wins).  The
//! `system` pod's node is -1 (`NUMA_NO_NODE`).  `cache_shard` follows the
//! kernel's `precompute_cache_shard_ids()` exactly; see the `pods` module.
//!
//! One difference from the kernel, forced by user space: the kernel cuts pods
//! over *possible* CPUs at boot, when they are normally all online, while
//! sysfs removes the `topology/` and `cache/` directories of an offline CPU.
//! So pods here are cut over the *online* CPUs and an offline CPU belongs to
//! no pod (`cpu_pod` is `None` for it): every scope's pods partition
//! [`Topology::online`].
//!
//! # Restricting to the CPUs we may use
//!
//! The kernel keeps unbound work on `wq_unbound_cpumask`: pods are cut over
//! the whole machine, then each pod is intersected with that mask.
//! [`Topology::restrict_to`] (and [`Topology::restrict_to_affinity`], with the
//! mask from `sched_getaffinity`) does the same: shards are still computed
//! from the whole LLC, pods left empty disappear, and the rest are renumbered
//! in `init_pod_type` order.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

pub(crate) mod cpulist;
mod pods;
mod synthetic;
mod sysfs;

pub use cpulist::{CPU_ID_LIMIT, cpumask_str, format_cpulist, parse_cpulist};
pub use sysfs::SYSFS_FILE_MAX_BYTES;

/// An affinity scope: how unbound worker pools are cut across the machine.
///
/// The order of [`Scope::ALL`] is the kernel's enum order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
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
    /// Every scope, in the kernel's enum order. A slice, not an array, so
    /// that a scope added later changes no type.
    pub const ALL: &'static [Scope] = &[
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
            .iter()
            .copied()
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
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
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
#[non_exhaustive]
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

/// Where each piece of a [`Topology`] came from, in words (for the summary).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Provenance {
    /// Source of the SMT cores (e.g. `thread_siblings_list`).
    pub smt: String,
    /// Source of the packages (e.g. `package_cpus_list`).
    pub package: String,
    /// Source of the last-level caches (e.g. `cache/index3 (L3)`).
    pub llc: String,
    /// Source of the NUMA nodes (e.g. `node*/cpulist`).
    pub node: String,
}

/// The machine as the workqueue sees it.
///
/// Holds, for every online CPU, its SMT core, package, LLC and NUMA node;
/// pods are computed from these on demand by [`Topology::pods`].
#[derive(Clone, Debug)]
pub struct Topology {
    /// `sysfs:ROOT` or `synthetic:SPEC`.
    source: String,
    possible: Vec<usize>,
    /// Every online CPU: the set pods are cut over.
    machine_online: Vec<usize>,
    /// The CPUs pods are reported for: `machine_online`, or a subset of it
    /// after [`Topology::restrict_to`].
    online: Vec<usize>,
    nr_cpu_ids: usize,
    /// Per CPU id: the lowest CPU of its SMT core (`NONE` when not online).
    core: Vec<usize>,
    /// Per CPU id: the lowest CPU of its package.
    package: Vec<usize>,
    /// Per CPU id: the lowest CPU of its LLC.
    llc: Vec<usize>,
    /// Per CPU id: its NUMA node.
    node: Vec<usize>,
    nr_nodes: usize,
    provenance: Provenance,
    notes: Vec<String>,
}

/// Marks a CPU id that is not an online CPU in the per-CPU tables.
const NONE: usize = usize::MAX;

/// What a reader (sysfs or synthetic) hands to [`Topology::assemble`].
pub(crate) struct RawTopology {
    pub source: String,
    pub possible: Vec<usize>,
    pub online: Vec<usize>,
    /// Per online CPU: the CPUs it says share its SMT core.
    pub smt: HashMap<usize, Vec<usize>>,
    /// Per online CPU: the CPUs it says share its package.
    pub package: HashMap<usize, Vec<usize>>,
    /// Per online CPU: the CPUs it says share its LLC.
    pub llc: HashMap<usize, Vec<usize>>,
    /// Per online CPU: its node (absent: node 0).
    pub node: HashMap<usize, usize>,
    /// One more than the highest node id known (at least 1).
    pub nr_nodes: usize,
    pub provenance: Provenance,
    pub notes: Vec<String>,
    /// Skip the check that every CPU's list names its whole group: the
    /// synthetic builder lists a group once, on its first CPU, and the sysfs
    /// reader hands over components it has already checked, in the same
    /// shape (see `Sharing::into_lists`).
    pub lists_partial: bool,
}

/// `"1 core"`, `"2 cores"`.
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

impl Topology {
    /// Reads `<root>/devices/system/cpu` and `<root>/devices/system/node`.
    ///
    /// Missing pieces degrade (see the module docs) and are listed in
    /// [`Topology::notes`]; a missing or unparsable `cpu/online`, or any file
    /// that is present but garbage, is an error naming the file.
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
        sysfs::read(root).map(Topology::assemble)
    }

    /// Reads `/sys`.
    pub fn detect() -> Result<Topology, TopologyError> {
        Self::from_sysfs(Path::new("/sys"))
    }

    /// Builds a synthetic topology from an hwloc-style spec such as
    /// `pack:2 numa:1 l3:4 core:8 pu:2` (levels `pack`, `numa`, `l3`, `l2`,
    /// `l1`, `core`, `pu`, outermost first, each count under the level above;
    /// missing levels count 1).  SMT siblings get adjacent CPU ids, as in
    /// hwloc's synthetic topologies.  A bad spec is an error naming the token.
    pub fn from_synthetic(spec: &str) -> Result<Topology, TopologyError> {
        synthetic::build(spec).map(Topology::assemble)
    }

    /// Online CPUs, ascending: the CPUs that pods cover (after
    /// [`Topology::restrict_to`], only the allowed ones).
    pub fn online(&self) -> &[usize] {
        &self.online
    }

    /// Every online CPU of the machine, ascending, ignoring any restriction.
    pub fn machine_online(&self) -> &[usize] {
        &self.machine_online
    }

    /// Possible CPUs, ascending (a superset of the online CPUs).
    pub fn possible(&self) -> &[usize] {
        &self.possible
    }

    /// One more than the highest possible CPU id.
    pub fn nr_cpu_ids(&self) -> usize {
        self.nr_cpu_ids
    }

    /// NUMA node of `cpu` (0 if unknown).
    pub fn cpu_node(&self, cpu: usize) -> usize {
        match self.node.get(cpu) {
            Some(&n) if n != NONE => n,
            _ => 0,
        }
    }

    /// Number of NUMA nodes: one more than the highest node id known, as the
    /// kernel's `nr_node_ids`, so `cpu_node()` is always below it.  Nodes
    /// without CPUs (memory-only) count.
    pub fn nr_nodes(&self) -> usize {
        self.nr_nodes
    }

    /// The nodes that hold at least one CPU of [`Topology::online`], ascending.
    pub fn nodes(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.online.iter().map(|&c| self.node[c]).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Number of SMT cores among [`Topology::online`].
    pub fn cores(&self) -> usize {
        self.count_groups(&self.core)
    }

    /// Number of last-level caches among [`Topology::online`].
    pub fn llcs(&self) -> usize {
        self.count_groups(&self.llc)
    }

    /// Number of packages (sockets) among [`Topology::online`].
    pub fn packages(&self) -> usize {
        self.count_groups(&self.package)
    }

    /// Smallest and largest number of online CPUs in one SMT core (`(2, 2)`
    /// on a uniform SMT-2 machine, `(1, 2)` on a hybrid one).
    pub fn smt_width(&self) -> (usize, usize) {
        let mut sizes: HashMap<usize, usize> = HashMap::new();
        for &c in &self.online {
            *sizes.entry(self.core[c]).or_default() += 1;
        }
        let min = sizes.values().copied().min().unwrap_or(0);
        let max = sizes.values().copied().max().unwrap_or(0);
        (min, max)
    }

    /// The lowest CPU of `cpu`'s SMT core, or `None` if `cpu` is not online.
    pub fn core_of(&self, cpu: usize) -> Option<usize> {
        self.core.get(cpu).copied().filter(|&k| k != NONE)
    }

    /// The lowest CPU of `cpu`'s last-level cache, or `None` if `cpu` is not
    /// online.
    pub fn llc_of(&self, cpu: usize) -> Option<usize> {
        self.llc.get(cpu).copied().filter(|&k| k != NONE)
    }

    /// The lowest CPU of `cpu`'s package, or `None` if `cpu` is not online.
    pub fn package_of(&self, cpu: usize) -> Option<usize> {
        self.package.get(cpu).copied().filter(|&k| k != NONE)
    }

    /// Where the topology came from: `sysfs:ROOT` or `synthetic:SPEC`.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Where each piece (SMT, package, LLC, node) came from.
    pub fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    /// What degraded or was adjusted while reading, one sentence each
    /// (empty on a machine whose sysfs has every piece).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether [`Topology::restrict_to`] narrowed the CPUs.
    pub fn is_restricted(&self) -> bool {
        self.online.len() != self.machine_online.len()
    }

    /// One line describing the machine: CPUs, cores, LLCs, nodes, SMT width,
    /// where each came from, and what degraded.
    pub fn summary(&self) -> String {
        let (wmin, wmax) = self.smt_width();
        let width = if wmin == wmax {
            wmin.to_string()
        } else {
            format!("{wmin}-{wmax}")
        };
        let mut s = format!(
            "{} online ({}) of {} possible, {} (SMT width {}, from {}), \
             {} (from {}), {} (from {}), {} (from {}); source {}",
            plural(self.online.len(), "CPU"),
            format_cpulist(&self.online),
            self.possible.len(),
            plural(self.cores(), "core"),
            width,
            self.provenance.smt,
            plural(self.packages(), "package"),
            self.provenance.package,
            plural(self.llcs(), "LLC"),
            self.provenance.llc,
            plural(self.nodes().len(), "node"),
            self.provenance.node,
            self.source
        );
        if !self.notes.is_empty() {
            s.push_str("; notes: ");
            s.push_str(&self.notes.join("; "));
        }
        s
    }

    /// The same machine with pods reported only for `cpus`, the way the
    /// kernel applies `wq_unbound_cpumask`: pods are still cut over every
    /// online CPU (so LLC shards do not move), then intersected with `cpus`;
    /// pods left empty disappear and the others are renumbered in
    /// `init_pod_type` order; a pod keeps the `pod_node` of the whole pod.
    /// CPUs of `cpus` that are not online are ignored; an error names the
    /// list if none is online.
    pub fn restrict_to(&self, cpus: &[usize]) -> Result<Topology, TopologyError> {
        let allowed: Vec<usize> = self
            .online
            .iter()
            .copied()
            .filter(|c| cpus.contains(c))
            .collect();
        if allowed.is_empty() {
            return Err(TopologyError::BadValue {
                what: "cpu restriction".into(),
                value: format_cpulist(cpus),
                why: format!(
                    "no CPU of it is online (online: {})",
                    format_cpulist(&self.online)
                ),
            });
        }
        let mut t = self.clone();
        if allowed.len() != self.online.len() {
            t.notes.push(format!(
                "restricted to CPUs {} of online {}",
                format_cpulist(&allowed),
                format_cpulist(&self.online)
            ));
        }
        t.online = allowed;
        Ok(t)
    }

    /// The same machine with every online CPU covered again, undoing
    /// [`Topology::restrict_to`]: the pods a change of the usable CPUs is
    /// cut from (a CPU given back that was not usable at start has its pod).
    pub(crate) fn unrestricted(&self) -> Topology {
        let mut t = self.clone();
        t.online = t.machine_online.clone();
        t
    }

    /// [`Topology::restrict_to`] the CPUs this process may run on
    /// (`sched_getaffinity`).  Errors name the syscall and the OS error.
    pub fn restrict_to_affinity(&self) -> Result<Topology, TopologyError> {
        let cpus = sched_affinity()?;
        self.restrict_to(&cpus)
    }

    fn count_groups(&self, keys: &[usize]) -> usize {
        let mut v: Vec<usize> = self.online.iter().map(|&c| keys[c]).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    }

    /// Turns what a reader found into the per-CPU tables.
    ///
    /// Each "CPUs sharing X with me" relation becomes an equivalence by
    /// taking connected components over the online CPUs (ids the lists name
    /// that are not online are dropped), so the pods of every scope are a
    /// partition even when sysfs lists disagree with each other; a
    /// disagreement is reported in the notes.
    pub(crate) fn assemble(raw: RawTopology) -> Topology {
        let RawTopology {
            source,
            mut possible,
            online,
            smt,
            package,
            llc,
            node,
            nr_nodes,
            provenance,
            mut notes,
            lists_partial,
        } = raw;
        let max_online = online.last().copied().unwrap_or(0);
        if online.iter().any(|c| possible.binary_search(c).is_err()) {
            notes.push("online CPUs missing from possible; added".into());
            possible.extend(online.iter().copied());
            possible.sort_unstable();
            possible.dedup();
        }
        let nr_cpu_ids = possible.last().map_or(0, |&m| m + 1).max(max_online + 1);
        let check = !lists_partial;
        let nr = nr_cpu_ids;
        let core = components("SMT sibling", &online, nr, &smt, check, &mut notes);
        let package = components("package", &online, nr, &package, check, &mut notes);
        let llc = components("LLC", &online, nr, &llc, check, &mut notes);
        let mut node_of = vec![NONE; nr_cpu_ids];
        for &c in &online {
            node_of[c] = node.get(&c).copied().unwrap_or(0);
        }
        let nr_nodes = online
            .iter()
            .map(|&c| node_of[c] + 1)
            .max()
            .unwrap_or(1)
            .max(nr_nodes)
            .max(1);
        Topology {
            source,
            possible,
            machine_online: online.clone(),
            online,
            nr_cpu_ids,
            core,
            package,
            llc,
            node: node_of,
            nr_nodes,
            provenance,
            notes,
        }
    }
}

/// Connected components of "a lists b" over the online CPUs; returns, per CPU
/// id, the lowest CPU of its component (`NONE` for CPUs that are not online).
/// With `check`, lists that disagree with their component are noted.
fn components(
    what: &str,
    online: &[usize],
    nr_cpu_ids: usize,
    lists: &HashMap<usize, Vec<usize>>,
    check: bool,
    notes: &mut Vec<String>,
) -> Vec<usize> {
    let mut sharing = Sharing::new(online, nr_cpu_ids);
    for &c in online {
        if let Some(list) = lists.get(&c) {
            sharing.add_list(c, list);
        }
    }
    sharing.keys(what, check.then_some(notes))
}

/// "CPUs that share X", built one list at a time: a union-find over the
/// online CPUs and, for each CPU whose own list was read, what the
/// consistency check needs.
///
/// Every operation costs what it is given: a list its length, a fallback
/// group ("these CPUs share one package") its size.  Nothing here copies a
/// group once per member, which on a 16384-CPU tree without sibling files
/// would be 16384 copies of 16384 CPUs.
pub(crate) struct Sharing {
    online: Vec<usize>,
    /// Per CPU id: its index in `online`, or `NONE`.
    pos: Vec<usize>,
    /// Union-find over online indexes; a root is its component's lowest index.
    parent: Vec<usize>,
    /// Per online index whose list was read: how many online CPUs the list
    /// names, and whether it names the CPU itself.
    listed: Vec<Option<(usize, bool)>>,
}

/// What [`Sharing::add_list`] learnt about a list, so the same list given by
/// another CPU costs one union instead of its length.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ListSeen {
    /// Online CPUs the list names.
    inside: usize,
    /// Online index of the first online CPU it names.
    first: Option<usize>,
}

impl Sharing {
    /// No CPU shares anything yet; `nr_cpu_ids` bounds the CPU ids to index.
    pub(crate) fn new(online: &[usize], nr_cpu_ids: usize) -> Sharing {
        let nr = nr_cpu_ids.max(online.last().map_or(0, |&m| m + 1));
        let mut pos = vec![NONE; nr];
        for (i, &c) in online.iter().enumerate() {
            pos[c] = i;
        }
        Sharing {
            online: online.to_vec(),
            pos,
            parent: (0..online.len()).collect(),
            listed: vec![None; online.len()],
        }
    }

    fn index(&self, cpu: usize) -> Option<usize> {
        self.pos.get(cpu).copied().filter(|&i| i != NONE)
    }

    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    fn union(&mut self, i: usize, j: usize) {
        let (a, b) = (self.find(i), self.find(j));
        // The root is always the lower index, so the root of a component is
        // its lowest CPU.
        if a != b {
            let (lo, hi) = if a < b { (a, b) } else { (b, a) };
            self.parent[hi] = lo;
        }
    }

    /// `cpu`'s own file lists `list` (sorted): they all share X.  CPUs that
    /// are not online are ignored.
    pub(crate) fn add_list(&mut self, cpu: usize, list: &[usize]) -> ListSeen {
        let me = self.index(cpu);
        let mut seen = ListSeen {
            inside: 0,
            first: None,
        };
        let mut has_self = false;
        for &o in list {
            let Some(j) = self.index(o) else { continue };
            seen.inside += 1;
            seen.first.get_or_insert(j);
            has_self |= o == cpu;
            if let Some(i) = me {
                self.union(i, j);
            }
        }
        if let Some(i) = me {
            self.listed[i] = Some((seen.inside, has_self));
        }
        seen
    }

    /// `cpu`'s file lists the same `list` (sorted) that an earlier
    /// [`Sharing::add_list`] returned `seen` for: the list's CPUs are already
    /// one component, so joining `cpu` to its first one is enough.
    pub(crate) fn add_again(&mut self, cpu: usize, list: &[usize], seen: ListSeen) {
        let Some(i) = self.index(cpu) else { return };
        if let Some(j) = seen.first {
            self.union(i, j);
        }
        self.listed[i] = Some((seen.inside, list.binary_search(&cpu).is_ok()));
    }

    /// A fallback's group: `cpus` share X, and no file said so (nothing is
    /// checked).
    pub(crate) fn add_group(&mut self, cpus: &[usize]) {
        let mut prev = None;
        for &c in cpus {
            let Some(j) = self.index(c) else { continue };
            if let Some(p) = prev {
                self.union(p, j);
            }
            prev = Some(j);
        }
    }

    /// Joins the components of two CPUs (either not online: nothing).
    pub(crate) fn join(&mut self, a: usize, b: usize) {
        if let (Some(i), Some(j)) = (self.index(a), self.index(b)) {
            self.union(i, j);
        }
    }

    /// The lowest CPU of `cpu`'s component, `None` if `cpu` is not online.
    pub(crate) fn lowest(&mut self, cpu: usize) -> Option<usize> {
        let i = self.index(cpu)?;
        let r = self.find(i);
        Some(self.online[r])
    }

    /// Per CPU id, the lowest CPU of its component (`NONE` for CPUs that are
    /// not online).  With `notes`, a CPU whose list does not name exactly its
    /// component (itself aside) is reported: the files disagree.
    pub(crate) fn keys(&mut self, what: &str, notes: Option<&mut Vec<String>>) -> Vec<usize> {
        let n = self.online.len();
        let mut key = vec![NONE; self.pos.len()];
        let mut size = vec![0usize; n];
        let mut root = vec![0usize; n];
        for i in 0..n {
            root[i] = self.find(i);
            key[self.online[i]] = self.online[root[i]];
            size[root[i]] += 1;
        }
        let Some(notes) = notes else { return key };
        let bad: Vec<usize> = (0..n)
            .filter(|&i| {
                self.listed[i].is_some_and(|(inside, has_self)| {
                    inside + usize::from(!has_self) != size[root[i]]
                })
            })
            .map(|i| self.online[i])
            .collect();
        if !bad.is_empty() {
            notes.push(format!(
                "{what} lists of CPUs {} disagree with each other; CPUs that list each other \
                 (directly or through others) were merged",
                format_cpulist(&bad)
            ));
        }
        key
    }

    /// The components as lists that [`Topology::assemble`] reads back in
    /// linear time (with `lists_partial`): the lowest CPU of a component
    /// lists all of it, the others list themselves.  Disagreements are noted
    /// as by [`Sharing::keys`].
    pub(crate) fn into_lists(
        mut self,
        what: &str,
        notes: &mut Vec<String>,
    ) -> HashMap<usize, Vec<usize>> {
        let key = self.keys(what, Some(notes));
        let mut lists: HashMap<usize, Vec<usize>> = HashMap::with_capacity(self.online.len());
        for &c in &self.online {
            lists.entry(key[c]).or_default().push(c);
            if key[c] != c {
                lists.insert(c, vec![c]);
            }
        }
        lists
    }
}

/// The CPUs this process may run on: `sched_getaffinity` of the process
/// (its main thread, what `taskset -p` shows), not of the calling thread, so a
/// pinned thread that asks first does not narrow the answer for everyone.
pub fn sched_affinity() -> Result<Vec<usize>, TopologyError> {
    // SAFETY: getpid takes no arguments and cannot fail.
    let pid = unsafe { libc::getpid() };
    affinity_of(pid)
}

/// The CPUs the calling thread may run on (`sched_getaffinity(0)`).
pub(crate) fn thread_affinity() -> Result<Vec<usize>, TopologyError> {
    affinity_of(0)
}

/// `sched_getaffinity` of `pid` (0: the calling thread), as a CPU list.
fn affinity_of(pid: libc::pid_t) -> Result<Vec<usize>, TopologyError> {
    // Start with room for 1024 CPUs (glibc's cpu_set_t) and grow while the
    // kernel says the buffer is smaller than its cpumask (EINVAL).
    let mut words = 1024 / 64;
    loop {
        let mut buf = vec![0u64; words];
        let bytes = words * std::mem::size_of::<u64>();
        // SAFETY: `buf` is a live, writable allocation of exactly `bytes`
        // bytes; the kernel writes at most `bytes` bytes of mask into it, and
        // a cpu_set_t is nothing but an array of unsigned longs.
        let rc = unsafe {
            libc::sched_getaffinity(pid, bytes, buf.as_mut_ptr().cast::<libc::cpu_set_t>())
        };
        if rc == 0 {
            return Ok(cpulist::mask_to_cpus(&buf));
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINVAL) && words * 64 < CPU_ID_LIMIT {
            words *= 2;
            continue;
        }
        return Err(TopologyError::Io {
            path: format!("sched_getaffinity({pid})"),
            msg: err.to_string(),
        });
    }
}
