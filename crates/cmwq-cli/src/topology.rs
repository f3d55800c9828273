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
//! `--json` prints the same data for scripts (schema `cmwq-topology/1`,
//! documented in SCHEMA.md): `{"schema", "source", "online", "default_scope", "cache_shard_size", "scopes": {NAME:
//! {"pods", "pod_node", "cpu_pod"}}}` plus `possible`, `nr_cpu_ids`,
//! `summary`, `notes` and `machine`.  `cache_shard_size` is the size used
//! (a requested 0 shows as 1, as the kernel turns 0 into 1).

use std::fmt::Write as _;
use std::path::PathBuf;

use cmwq::topology::{
    DEFAULT_CACHE_SHARD_SIZE, PodType, Scope, Topology, cpumask_str, parse_cpulist,
};

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
        .iter()
        .copied()
        .map(|s| (s, topo.pods(s, size)))
        .collect();
    // The quota is this machine's (of this process's cgroup), so it is
    // shown for the live machine only.
    let budget = (a.synthetic.is_none() && a.sysfs.is_none())
        .then(|| cmwq::snapshot::CpuBudgetSnap::from(cmwq::cpu_budget()));
    Ok(if a.json {
        json(&topo, a.default_scope, size, &scopes, budget.as_ref())
    } else {
        let mut s = text(&topo, a.default_scope, &scopes);
        if let Some(b) = &budget {
            s.insert_str(
                s.find('\n').map_or(0, |i| i + 1),
                &format!("{}\n", b.line()),
            );
        }
        s
    })
}

fn text(topo: &Topology, dfl: Scope, scopes: &[(Scope, PodType)]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "machine: {}", topo.summary());
    let _ = writeln!(s);
    let _ = writeln!(s, "Affinity Scopes");
    let _ = writeln!(s, "===============");
    let _ = writeln!(s, "wq_unbound_cpumask={}", cpumask_str(topo.online()));
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

fn js(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// Schema tag of `cmwq topology --json` (SCHEMA.md).
pub const TOPOLOGY_SCHEMA: &str = "cmwq-topology/1";

/// Writes the JSON by hand so keys keep a reading order (scopes in kernel
/// order, `cpu_pod` by CPU number).
fn json(
    topo: &Topology,
    dfl: Scope,
    size: usize,
    scopes: &[(Scope, PodType)],
    budget: Option<&cmwq::snapshot::CpuBudgetSnap>,
) -> String {
    let (wmin, wmax) = topo.smt_width();
    let mut s = String::from("{\n");
    let _ = writeln!(s, "  \"schema\": {},", js(&TOPOLOGY_SCHEMA));
    let _ = writeln!(s, "  \"source\": {},", js(&topo.source()));
    let _ = writeln!(s, "  \"online\": {},", js(&topo.online()));
    let _ = writeln!(s, "  \"possible\": {},", js(&topo.possible()));
    let _ = writeln!(s, "  \"nr_cpu_ids\": {},", topo.nr_cpu_ids());
    let _ = writeln!(s, "  \"default_scope\": {},", js(&dfl.name()));
    let _ = writeln!(s, "  \"cache_shard_size\": {size},");
    let _ = writeln!(s, "  \"summary\": {},", js(&topo.summary()));
    let _ = writeln!(s, "  \"notes\": {},", js(&topo.notes()));
    if let Some(b) = budget {
        let _ = writeln!(s, "  \"cpu_budget\": {},", js(b));
    }
    let _ = writeln!(
        s,
        "  \"machine\": {{\"cpus\": {}, \"cores\": {}, \"packages\": {}, \"llcs\": {}, \
         \"nodes\": {}, \"nr_nodes\": {}, \"smt_width_min\": {wmin}, \"smt_width_max\": {wmax}, \
         \"provenance\": {}}},",
        topo.online().len(),
        topo.cores(),
        topo.packages(),
        topo.llcs(),
        topo.nodes().len(),
        topo.nr_nodes(),
        js(topo.provenance())
    );
    s.push_str("  \"scopes\": {\n");
    for (i, (scope, pt)) in scopes.iter().enumerate() {
        let _ = writeln!(s, "    {}: {{", js(&scope.name()));
        let _ = writeln!(s, "      \"pods\": {},", js(&pt.pods));
        let _ = writeln!(s, "      \"pod_node\": {},", js(&pt.pod_node));
        let pairs: Vec<String> = pt
            .cpu_pod
            .iter()
            .enumerate()
            .filter_map(|(cpu, p)| p.map(|p| format!("\"{cpu}\": {p}")))
            .collect();
        let _ = writeln!(s, "      \"cpu_pod\": {{{}}}", pairs.join(", "));
        let comma = if i + 1 < scopes.len() { "," } else { "" };
        let _ = writeln!(s, "    }}{comma}");
    }
    s.push_str("  }\n}\n");
    s
}
