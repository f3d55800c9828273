//! `cmwq topology`: the machine and the pods of every affinity scope.
//!
//! The text output is the "Affinity Scopes" section of the kernel's
//! `tools/workqueue/wq_dump.py` (scope names upper-case, in the kernel's enum
//! order, masks in its `cpumask_str` format), so it can be diffed against
//! the kernel's own view of the same machine; one summary line above it says
//! what the machine is and where each piece came from.  Two differences,
//! both because pods here cover online CPUs only: `cpu_pod` lists online
//! CPUs (`wq_dump.py` lists possible ones), and `wq_unbound_cpumask` is the
//! online CPUs (narrowed by `--affinity` / `--cpus`).
//!
//! For the live machine (not `--sysfs`, not `--synthetic`) two lines more
//! say what this process may use, as `cmwq dump` does: `possible=` (every CPU
//! the machine could bring online) against `usable=` (the process's affinity
//! intersected with its cgroup cpuset, [`cmwq::cpuset::usable_cpus`]), and
//! the CPU quota with the budget it gives.
//!
//! `--json` prints the same data for scripts (schema `cmwq-topology/1`,
//! documented in SCHEMA.md), from [`TopologyDoc`]: `{"schema", "source",
//! "online", "possible", "usable", "nr_cpu_ids", "default_scope",
//! "cache_shard_size", "summary", "notes", "cpu_budget", "machine", "scopes":
//! {NAME: {"pods", "pod_node", "cpu_pod"}}}` (`usable` and `cpu_budget` for
//! the live machine only).  `cache_shard_size` is the size used (a requested
//! 0 shows as 1, as the kernel turns 0 into 1).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use cmwq::snapshot::CpuBudgetSnap;
use cmwq::topology::{
    DEFAULT_CACHE_SHARD_SIZE, PodType, Provenance, Scope, Topology, cpumask_str, parse_cpulist,
};
use serde::Serialize;

/// Arguments of `cmwq topology`.
#[derive(clap::Args, Debug)]
pub struct TopologyArgs {
    /// Read the machine from this sysfs root instead of /sys.
    #[arg(long, value_name = "ROOT", conflicts_with = "synthetic")]
    pub sysfs: Option<PathBuf>,
    /// Use a synthetic machine, e.g. "pack:1 l3:11 core:8 pu:2"
    /// (levels pack, numa, l3, l2, l1, core, pu; SMT siblings numbered adjacent).
    #[arg(long, value_name = "SPEC")]
    pub synthetic: Option<String>,
    /// Cores per cache shard for the cache_shard scope (at least 1; the kernel
    /// turns a 0 boot parameter into 1, cmwq refuses it everywhere).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CACHE_SHARD_SIZE)]
    pub cache_shard_size: usize,
    /// The scope marked "(default)".
    #[arg(long, value_name = "SCOPE", default_value = "cache_shard", value_parser = parse_scope)]
    pub default_scope: Scope,
    /// Keep only the CPUs this process may run on (sched_getaffinity), as the
    /// kernel keeps unbound work on wq_unbound_cpumask.
    #[arg(long)]
    pub affinity: bool,
    /// Keep only these CPUs (a cpu list such as 0-3,8), like workqueue.unbound_cpus=.
    #[arg(long, value_name = "LIST", value_parser = parse_list)]
    pub cpus: Option<CpuList>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_scope(s: &str) -> Result<Scope, String> {
    s.parse::<Scope>().map_err(|e| e.to_string())
}

/// A non-empty cpu list given on the command line.
#[derive(Clone, Debug)]
pub struct CpuList(pub Vec<usize>);

fn parse_list(s: &str) -> Result<CpuList, String> {
    let v = parse_cpulist(s)?;
    if v.is_empty() {
        return Err("empty cpu list".into());
    }
    Ok(CpuList(v))
}

/// Runs `cmwq topology`.
pub fn run(a: TopologyArgs) -> Result<(), String> {
    let out = render(&a)?;
    print!("{out}");
    Ok(())
}

/// Builds the whole output of `cmwq topology` for `a`.
pub fn render(a: &TopologyArgs) -> Result<String, String> {
    let mut topo = match (&a.synthetic, &a.sysfs) {
        (Some(spec), _) => Topology::from_synthetic(spec),
        (None, Some(root)) => Topology::from_sysfs(root),
        (None, None) => Topology::detect(),
    }
    .map_err(|e| e.to_string())?;
    if a.affinity {
        topo = topo.restrict_to_affinity().map_err(|e| e.to_string())?;
    }
    if let Some(cpus) = &a.cpus {
        topo = topo.restrict_to(&cpus.0).map_err(|e| e.to_string())?;
    }
    // One rule everywhere (builder, live setter, env, bench): 0 is refused.
    if a.cache_shard_size == 0 {
        return Err(cmwq::Error::InvalidCacheShardSize(0).to_string() + " (--cache-shard-size)");
    }
    let size = a.cache_shard_size;
    let scopes: Vec<(Scope, PodType)> = Scope::ALL
        .into_iter()
        .map(|s| (s, topo.pods(s, size)))
        .collect();
    // The usable CPUs and the quota are this process's (of its affinity
    // and cgroup), so they are shown for the live machine only.
    let live = (a.synthetic.is_none() && a.sysfs.is_none())
        .then(|| -> Result<Live, String> {
            Ok(Live {
                usable: cmwq::cpuset::usable_cpus().map_err(|e| e.to_string())?,
                budget: CpuBudgetSnap::from(cmwq::cpu_budget()),
            })
        })
        .transpose()?;
    Ok(if a.json {
        let doc = TopologyDoc::new(&topo, a.default_scope, size, &scopes, live.as_ref());
        crate::json::document(TOPOLOGY_SCHEMA, &doc)? + "\n"
    } else {
        let mut s = text(&topo, a.default_scope, &scopes, live.as_ref());
        if let Some(l) = &live {
            s.insert_str(
                s.find('\n').map_or(0, |i| i + 1),
                &format!("{}\n", l.budget.line()),
            );
        }
        s
    })
}

/// What only the live machine has: this process's usable CPUs and its CPU
/// budget.
pub struct Live {
    /// Affinity intersected with the cgroup cpuset.
    pub usable: Vec<usize>,
    /// The quota and the budget it gives.
    pub budget: CpuBudgetSnap,
}

fn text(topo: &Topology, dfl: Scope, scopes: &[(Scope, PodType)], live: Option<&Live>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "machine: {}", topo.summary());
    let _ = writeln!(s);
    let _ = writeln!(s, "Affinity Scopes");
    let _ = writeln!(s, "===============");
    let _ = writeln!(s, "wq_unbound_cpumask={}", cpumask_str(topo.online()));
    if let Some(l) = live {
        // What this process may use (affinity and cpuset) against what the
        // machine has, in `cmwq dump`'s words.
        let _ = writeln!(
            s,
            "possible={} usable={}",
            cpumask_str(topo.possible()),
            cpumask_str(&l.usable)
        );
    }
    for (scope, pt) in scopes {
        crate::control::scope_block(
            &mut s,
            scope.name(),
            *scope == dfl,
            &pt.pods,
            &pt.pod_node,
            &pt.cpu_pod,
        );
    }
    s
}

/// Schema tag of `cmwq topology --json` (SCHEMA.md).
pub const TOPOLOGY_SCHEMA: &str = "cmwq-topology/1";

/// The document of `cmwq topology --json` (after its `schema`), fields in
/// reading order.
#[derive(Serialize)]
pub struct TopologyDoc<'a> {
    source: &'a str,
    online: &'a [usize],
    possible: &'a [usize],
    #[serde(skip_serializing_if = "Option::is_none")]
    usable: Option<&'a [usize]>,
    nr_cpu_ids: usize,
    default_scope: &'static str,
    cache_shard_size: usize,
    summary: String,
    notes: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_budget: Option<&'a CpuBudgetSnap>,
    machine: MachineDoc<'a>,
    /// Per scope name, in the kernel's order (a map keeps it: serde writes
    /// a `Vec` of pairs through `collect_map`).
    #[serde(serialize_with = "scope_map")]
    scopes: Vec<(&'static str, ScopeDoc<'a>)>,
}

/// `machine`: counts of what the topology holds.
#[derive(Serialize)]
struct MachineDoc<'a> {
    cpus: usize,
    cores: usize,
    packages: usize,
    llcs: usize,
    nodes: usize,
    nr_nodes: usize,
    smt_width_min: usize,
    smt_width_max: usize,
    provenance: &'a Provenance,
}

/// One scope's pods.
#[derive(Serialize)]
struct ScopeDoc<'a> {
    pods: &'a [Vec<usize>],
    pod_node: &'a [i32],
    /// Pod of each CPU of the topology, keyed by CPU number (in order).
    cpu_pod: BTreeMap<usize, usize>,
}

fn scope_map<S: serde::Serializer>(
    v: &[(&'static str, ScopeDoc<'_>)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(v.iter().map(|(k, d)| (k, d)))
}

impl<'a> TopologyDoc<'a> {
    fn new(
        topo: &'a Topology,
        dfl: Scope,
        size: usize,
        scopes: &'a [(Scope, PodType)],
        live: Option<&'a Live>,
    ) -> TopologyDoc<'a> {
        let (smt_width_min, smt_width_max) = topo.smt_width();
        TopologyDoc {
            source: topo.source(),
            online: topo.online(),
            possible: topo.possible(),
            usable: live.map(|l| l.usable.as_slice()),
            nr_cpu_ids: topo.nr_cpu_ids(),
            default_scope: dfl.name(),
            cache_shard_size: size,
            summary: topo.summary(),
            notes: topo.notes(),
            cpu_budget: live.map(|l| &l.budget),
            machine: MachineDoc {
                cpus: topo.online().len(),
                cores: topo.cores(),
                packages: topo.packages(),
                llcs: topo.llcs(),
                nodes: topo.nodes().len(),
                nr_nodes: topo.nr_nodes(),
                smt_width_min,
                smt_width_max,
                provenance: topo.provenance(),
            },
            scopes: scopes
                .iter()
                .map(|(scope, pt)| {
                    let cpu_pod = pt
                        .cpu_pod
                        .iter()
                        .enumerate()
                        .filter_map(|(cpu, p)| p.map(|p| (cpu, p)))
                        .collect();
                    (
                        scope.name(),
                        ScopeDoc {
                            pods: &pt.pods,
                            pod_node: &pt.pod_node,
                            cpu_pod,
                        },
                    )
                })
                .collect(),
        }
    }
}
