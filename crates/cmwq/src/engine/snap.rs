//! The picture `cmwq dump` shows: [`snapshot()`] assembles the parts each
//! engine module builds from what it owns (the topology and workqueues in
//! `workqueue` and here, the pools in `pool::snap`) into the plain data of
//! [`crate::snapshot`], which depends on nothing here.

use super::{pool, workqueue};
use crate::snapshot::Snapshot;
use crate::topology::Scope;

/// Takes a picture of this process's topology, pools and workqueues.
///
/// ```
/// let wq = cmwq::Workqueue::builder("snap_doc").unbound().build().unwrap();
/// let s = cmwq::snapshot();
/// let me = s.workqueues.iter().find(|w| w.name == "snap_doc").unwrap();
/// assert_eq!(me.kind, "unbound");
/// assert!(me.dfl_pool.is_some_and(|p| s.pools.iter().any(|q| q.id == p)));
/// drop(wq);
/// ```
pub fn snapshot() -> Snapshot {
    let topology = topology_snap();
    let workqueues = workqueue::workqueue_snaps();
    // Read after the workqueues, which may name a pool emptied since: it is
    // listed all the same (a dump never routes to a pool it does not show).
    let named: Vec<u32> = workqueues
        .iter()
        .flat_map(|w| {
            let routes = w.cpu_pool.iter().flatten().chain(&w.dfl_pool);
            routes.copied().chain(w.pwqs.iter().map(|p| p.pool))
        })
        .collect();
    let pools = pool::pool_snaps(&named);
    let taken_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    Snapshot {
        version: crate::snapshot::SNAPSHOT_VERSION,
        pid: std::process::id(),
        comm: std::fs::read_to_string("/proc/self/comm")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        taken_unix_ms,
        highpri_policy: match crate::highpri_policy() {
            Ok(crate::HighpriPolicy::Nice) => "nice".into(),
            Ok(crate::HighpriPolicy::Fifo) => "fifo".into(),
            Err(e) => format!("invalid ({e})"),
        },
        cpu_intensive_thresh_us: crate::cpu_intensive_thresh().as_micros() as u64,
        watchdog_thresh: crate::watchdog_thresh(),
        engine_thread_panics: super::service::engine_thread_panics(),
        cpu_budget: crate::cpu_budget().into(),
        topology,
        pools,
        workqueues,
    }
}

/// The "Affinity Scopes" part of [`crate::snapshot()`]: the process's topology
/// cut with its default parameters.
pub(crate) fn topology_snap() -> crate::snapshot::TopologySnap {
    let topo = workqueue::system_topology();
    let params = super::params().ok();
    let default_scope = params.map_or(Scope::CacheShard, |p| p.affinity_scope);
    let size = params.map_or(crate::topology::DEFAULT_CACHE_SHARD_SIZE, |p| {
        p.cache_shard_size
    });
    let unbound_cpumask = params
        .and_then(|p| p.unbound_cpus.clone())
        .unwrap_or_else(|| topo.online().to_vec());
    let nodes = topo
        .nodes()
        .into_iter()
        .map(|id| crate::snapshot::NodeSnap {
            id,
            cpus: topo
                .online()
                .iter()
                .copied()
                .filter(|&c| topo.cpu_node(c) == id)
                .collect(),
        })
        .collect();
    let scopes = Scope::ALL
        .iter()
        .copied()
        .map(|scope| {
            let pt = topo.pods(scope, size);
            crate::snapshot::ScopeSnap {
                scope,
                pod_cpus: pt.pods,
                pod_node: pt.pod_node,
                cpu_pod: pt.cpu_pod,
            }
        })
        .collect();
    crate::snapshot::TopologySnap {
        summary: topo.summary(),
        online: topo.online().to_vec(),
        possible: topo.possible().to_vec(),
        usable: pool::usable_cpus(),
        unbound_cpumask,
        default_scope,
        cache_shard_size: size,
        nodes,
        scopes,
    }
}
