//! The text of `cmwq dump`: one function per section, run in the order of
//! [`SECTIONS`]: `wq_dump.py`'s five, then what cmwq adds after them (the
//! knobs of unbound queues, priorities, lanes, and the latency of queues
//! that keep histograms).

use std::fmt::Write as _;

use cmwq::snapshot::{PoolSnap, ScopeSnap, Snapshot, WorkqueueSnap};
use cmwq::topology::cpumask_str;

use super::{
    LATENCY_HEADS, WQ_NAME_LEN, WQ_TYPE_LEN, clean, latency_cells, latency_strs, scope_block,
};

/// Column widths more than one section shares.
struct Widths {
    /// Of a pool id.
    id: usize,
    /// Of a pool's `ref` count.
    refs: usize,
}

impl Widths {
    fn of(s: &Snapshot) -> Widths {
        let widest = |f: fn(&PoolSnap) -> usize| s.pools.iter().map(f).max().unwrap_or(1);
        Widths {
            id: widest(|p| p.id.to_string().len()),
            refs: widest(|p| p.refs.to_string().len()),
        }
    }
}

/// One section: writes its heading and its rows.
type Section = fn(&mut String, &Snapshot, &Widths);

/// Every section, in the order printed.
const SECTIONS: &[Section] = &[
    affinity_scopes,
    worker_pools,
    cpu_to_pool,
    rescuers,
    node_nr_active,
    unbound_attrs,
    priorities,
    lanes,
    latency,
];

/// The whole text of `cmwq dump`: `wq_dump.py`'s five sections, then the
/// knobs of the unbound workqueues and every workqueue's priority (with the
/// reason when it fell back to a lower one).
pub fn render_dump(s: &Snapshot) -> String {
    let w = Widths::of(s);
    let mut out = String::new();
    for section in SECTIONS {
        section(&mut out, s, &w);
    }
    out
}

fn heading(out: &mut String, title: &str) {
    let _ = writeln!(out);
    let _ = writeln!(out, "{title}");
    let _ = writeln!(out, "{}", "=".repeat(title.len()));
}

/// `[ workqueue \ ...` : the name column's heading, `wq_dump.py`'s way.
fn name_head(out: &mut String) {
    let _ = write!(out, "[{:^w$}\\ ", "workqueue", w = WQ_NAME_LEN - 2);
}

fn wq_type(w: &WorkqueueSnap) -> &'static str {
    match w.kind.as_str() {
        "ordered" => "ordered",
        "unbound" if w.attrs.affinity_strict => "unbound,S",
        "unbound" => "unbound",
        _ => "percpu",
    }
}

/// The kernel's pool flag bit for workers not bound to the pool's CPU.
const POOL_DISASSOCIATED: u32 = 1 << 2;

fn pool_line(p: &PoolSnap, id_len: usize, ref_len: usize) -> String {
    let mut s = format!(
        "pool[{:0id_len$}] flags=0x{:02x} ref={:ref_len$} nice={:3} idle/workers={:3}/{:3} ",
        p.id, p.flags, p.refs, p.nice, p.idle, p.workers
    );
    match p.cpu {
        Some(c) => {
            let _ = write!(s, "cpu={c:3}");
            // The kernel's POOL_DISASSOCIATED on a bound pool: its CPU is
            // not usable now and its workers run elsewhere.
            if p.flags & POOL_DISASSOCIATED != 0 {
                s.push_str(" DISASSOCIATED");
            }
            if p.rebinds > 0 {
                let _ = write!(s, " rebinds={}", p.rebinds);
            }
        }
        None => {
            let _ = write!(
                s,
                "cpus={} pod_cpus={}",
                cpumask_str(&p.cpus),
                cpumask_str(&p.pod_cpus)
            );
            if let Some(c) = p.lane_cpu {
                let _ = write!(s, " lane={c}");
            }
            if p.strict {
                s.push_str(" strict");
            }
        }
    }
    if p.policy == "fifo" {
        let _ = write!(s, " fifo={}", p.rt_priority);
    }
    // Seen to block without `cmwq::blocking`: its workers read switch records.
    if p.blocks {
        s.push_str(" blocks");
    }
    s
}

/// "Affinity Scopes": the masks, each scope's pods, then the CPU budget.
fn affinity_scopes(out: &mut String, s: &Snapshot, _: &Widths) {
    let t = &s.topology;
    let _ = writeln!(out, "Affinity Scopes");
    let _ = writeln!(out, "===============");
    let _ = writeln!(
        out,
        "wq_unbound_cpumask={}",
        cpumask_str(&t.unbound_cpumask)
    );
    if !t.usable.is_empty() {
        // What the process may use now (affinity and cpuset) against what
        // the machine has: bound pools of the others are disassociated.
        let _ = writeln!(
            out,
            "possible={} usable={}",
            cpumask_str(&t.possible),
            cpumask_str(&t.usable)
        );
    }
    for sc in &t.scopes {
        let ScopeSnap {
            scope,
            pod_cpus,
            pod_node,
            cpu_pod,
            ..
        } = sc;
        scope_block(
            out,
            scope.name(),
            *scope == t.default_scope,
            pod_cpus,
            pod_node,
            cpu_pod,
        );
    }
    let _ = writeln!(out, "\n{}", s.cpu_budget.line());
    if s.engine_thread_panics > 0 {
        // Never in a healthy process: each was said on its stderr.
        let _ = writeln!(
            out,
            "engine_thread_panics={}: panics of cmwq's own code that its service \
             threads caught and went on from (a bug in cmwq; the process's stderr \
             names each)",
            s.engine_thread_panics
        );
    }
}

/// "Worker Pools": one line per pool.
fn worker_pools(out: &mut String, s: &Snapshot, w: &Widths) {
    heading(out, "Worker Pools");
    for p in &s.pools {
        let _ = writeln!(out, "{}", pool_line(p, w.id, w.refs));
    }
}

/// "Workqueue CPU -> pool": the pool of each possible CPU, and the default.
fn cpu_to_pool(out: &mut String, s: &Snapshot, widths: &Widths) {
    let id_len = widths.id;
    heading(out, "Workqueue CPU -> pool");
    let cpus = &s.topology.possible;
    name_head(out);
    let _ = write!(out, "{:WQ_TYPE_LEN$}", "type   CPU");
    for c in cpus {
        let _ = write!(out, " {c:id_len$}");
    }
    let _ = writeln!(out, " dfl]");
    for w in &s.workqueues {
        let _ = write!(out, "{:WQ_NAME_LEN$} {:10}", clean(&w.name), wq_type(w));
        for &c in cpus {
            let f = c.to_string().len().max(id_len);
            match w.cpu_pool.get(c).copied().flatten() {
                Some(p) => {
                    let _ = write!(out, " {p:f$}");
                }
                None => {
                    let _ = write!(out, " {:>f$}", "-");
                }
            }
        }
        if w.unbound
            && let Some(d) = w.dfl_pool
        {
            let _ = write!(out, " {d:id_len$}");
        }
        if w.custom_topology {
            out.push_str("  (synthetic topology)");
        }
        out.push('\n');
    }
}

/// "Workqueue -> rescuer": each `MEM_RECLAIM` queue's rescuer.
fn rescuers(out: &mut String, s: &Snapshot, _: &Widths) {
    heading(out, "Workqueue -> rescuer");
    let mask_len = cpumask_str(&s.topology.unbound_cpumask).len();
    let ulen = mask_len.max("unbound_cpus".len());
    let rlen = mask_len.max("rescuer_cpus".len());
    name_head(out);
    let _ = writeln!(
        out,
        "{:ulen$}    pid {:rlen$} ]",
        "unbound_cpus", "rescuer_cpus",
    );
    for w in s.workqueues.iter().filter(|w| w.mem_reclaim) {
        let ucpus = if w.unbound {
            cpumask_str(&w.attrs.cpumask)
        } else {
            String::new()
        };
        let (tid, rcpus) = w
            .rescuer
            .as_ref()
            .map_or((0, String::new()), |r| (r.tid, cpumask_str(&r.cpus)));
        let _ = writeln!(
            out,
            "{:WQ_NAME_LEN$} {ucpus:ulen$} {tid:6} {rcpus:rlen$}",
            clean(&w.name)
        );
    }
}

/// "Unbound workqueue -> node_nr/max_active": the nodes, then each unbound
/// queue's items active per node against its share.
fn node_nr_active(out: &mut String, s: &Snapshot, _: &Widths) {
    let t = &s.topology;
    heading(out, "Unbound workqueue -> node_nr/max_active");
    let _ = writeln!(out, "online_cpus={}", cpumask_str(&t.online));
    for n in &t.nodes {
        let _ = writeln!(out, "NODE[{:02}]={}", n.id, cpumask_str(&n.cpus));
    }
    let _ = writeln!(out);
    name_head(out);
    out.push_str("min max");
    for (i, n) in t.nodes.iter().enumerate() {
        if i == 0 {
            let _ = write!(out, "  NODE {}", n.id);
        } else {
            let _ = write!(out, " {:7}", n.id);
        }
    }
    let _ = writeln!(out, " {:>7} ]", "all");
    let _ = writeln!(out);
    for w in s.workqueues.iter().filter(|w| w.unbound) {
        let _ = write!(
            out,
            "{:WQ_NAME_LEN$} {:3} {:3}",
            clean(&w.name),
            w.min_active,
            w.attrs.max_active
        );
        for (nr, max) in w.node_nr_active.iter().zip(&w.node_max_active) {
            let _ = write!(out, " {nr:3}/{max:3}");
        }
        let nr: usize = w.node_nr_active.iter().sum();
        let _ = writeln!(out, " {nr:3}/{:3}", w.attrs.max_active);
    }
}

/// "Unbound workqueue -> attrs": the knobs of each unbound queue.
fn unbound_attrs(out: &mut String, s: &Snapshot, _: &Widths) {
    heading(out, "Unbound workqueue -> attrs");
    name_head(out);
    let _ = writeln!(
        out,
        "{:14} {:6} {:4} cpumask ]",
        "affinity_scope", "strict", "nice",
    );
    for w in s.workqueues.iter().filter(|w| w.unbound) {
        let a = &w.attrs;
        let _ = writeln!(
            out,
            "{:WQ_NAME_LEN$} {:14} {:6} {:4} {}",
            clean(&w.name),
            a.affinity_scope.name(),
            u8::from(a.affinity_strict),
            a.nice,
            cpumask_str(&a.cpumask)
        );
    }
}

/// "Workqueue -> priority": each queue's, and why it fell back if it did.
fn priorities(out: &mut String, s: &Snapshot, _: &Widths) {
    heading(out, "Workqueue -> priority");
    name_head(out);
    let _ = writeln!(out, "{:10} fallback ]", "priority");
    for w in &s.workqueues {
        let _ = writeln!(
            out,
            "{:WQ_NAME_LEN$} {:10} {}",
            clean(&w.name),
            w.stats.priority,
            w.stats.priority_fallback.as_deref().unwrap_or("-")
        );
    }
}

/// "Pod pool -> lanes". Not in `wq_dump.py`: the kernel's pod pool has one
/// worklist; cmwq's has a lane per CPU of the pod (see the README's "Where
/// user space differs").
fn lanes(out: &mut String, s: &Snapshot, w: &Widths) {
    let id_len = w.id;
    heading(out, "Pod pool -> lanes");
    let _ = writeln!(
        out,
        "[{:>id_len$} {:>4} {:>6} {:>4} {:>4} {:>12} {:>10} {:>10} {:>9} {:>9}]",
        "pool", "cpu", "queued", "idle", "run", "local", "stolen", "stole", "rehomed", "spread"
    );
    for p in s
        .pools
        .iter()
        .filter(|p| p.lanes.len() > 1 || p.lane_cpu.is_some())
    {
        for l in &p.lanes {
            let _ = writeln!(
                out,
                " {:>id_len$} {:>4} {:>6} {:>4} {:>4} {:>12} {:>10} {:>10} {:>9} {:>9}",
                p.id,
                l.cpu,
                l.worklist,
                l.idle,
                l.running,
                l.local,
                l.stolen,
                l.stole,
                l.rehomed,
                l.spread
            );
        }
    }
}

/// "Workqueue -> latency", only when a queue keeps latency histograms: the
/// items each recorded, the p50 and p99 of their queueing delay and of
/// their run time, since the queue was made.
fn latency(out: &mut String, s: &Snapshot, _: &Widths) {
    if s.workqueues.iter().all(|w| w.latency.is_none()) {
        return;
    }
    heading(out, "Workqueue -> latency");
    name_head(out);
    let heads = latency_cells(LATENCY_HEADS.map(String::from));
    let _ = writeln!(out, "{:>10} {heads} ]", "items");
    for w in &s.workqueues {
        let Some(l) = &w.latency else { continue };
        let cells = latency_cells(latency_strs(Some(l)));
        let _ = writeln!(
            out,
            "{:WQ_NAME_LEN$} {:>10} {cells}",
            clean(&w.name),
            l.run.count
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_thread_panics_show_only_when_there_are_some() {
        let mut s = cmwq::snapshot();
        s.engine_thread_panics = 0;
        assert!(!render_dump(&s).contains("engine_thread_panics"));
        s.engine_thread_panics = 3;
        let text = render_dump(&s);
        let line = text
            .lines()
            .find(|l| l.starts_with("engine_thread_panics="))
            .expect("the line");
        assert!(line.starts_with("engine_thread_panics=3: "), "{line}");
    }
}
