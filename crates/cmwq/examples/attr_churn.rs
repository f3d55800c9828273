//! Measures what live attribute changes cost in memory: for each attribute
//! an idle unbound workqueue is changed back and forth N times (default
//! 100,000), and the process's RSS is printed before, after, and after the
//! queue is dropped, with the pools the snapshot lists.
//!
//! ```text
//! cargo run --release -p cmwq --example attr_churn -- 100000
//! ```

use cmwq::Workqueue;
use cmwq::topology::Scope;

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() -> Result<(), cmwq::Error> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let cpus: Vec<usize> =
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    type Change = fn(&Workqueue, usize, &[usize]) -> Result<(), cmwq::Error>;
    let attrs: [(&str, Change); 5] = [
        ("set_affinity_scope", |wq, i, _| {
            wq.set_affinity_scope(if i.is_multiple_of(2) {
                Scope::Cpu
            } else {
                Scope::System
            })
        }),
        ("set_cpumask", |wq, i, all| {
            wq.set_cpumask(if i.is_multiple_of(2) { &all[..1] } else { all })
        }),
        ("set_nice", |wq, i, _| wq.set_nice((i % 2) as i32)),
        ("set_affinity_strict", |wq, i, _| {
            wq.set_affinity_strict(i.is_multiple_of(2))
        }),
        ("set_max_active", |wq, i, _| wq.set_max_active(1 + i % 2)),
    ];
    println!(
        "{n} changes of each attribute on an idle unbound workqueue ({} CPUs)",
        cpus.len()
    );
    println!(
        "{:<20} {:>10} {:>10} {:>12} {:>7}",
        "attribute", "RSS before", "RSS after", "after drop", "pools"
    );
    for (name, change) in attrs {
        let wq = Workqueue::builder(name).unbound().build()?;
        // Warm up: the pools of both values exist before the first reading.
        for i in 0..4 {
            change(&wq, i, &cpus)?;
        }
        let before = rss_kib();
        for i in 0..n {
            change(&wq, i, &cpus)?;
        }
        let after = rss_kib();
        drop(wq);
        let dropped = rss_kib();
        let pools = cmwq::snapshot().pools.len();
        println!(
            "{name:<20} {:>7} KiB {:>6} KiB {:>8} KiB {pools:>7}",
            before, after, dropped
        );
    }
    Ok(())
}
