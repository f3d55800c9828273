//! The text table and the JSON document of `cmwq mix`.

use std::fmt::Write as _;

use super::runner::{MixReport, MixRow};
use crate::bench::Mmm;

/// The version tag of the JSON document (see `bench/SCHEMA.md`).
pub const JSON_SCHEMA: &str = "cmwq-mix/1";

/// A duration in ns for a table cell: `850ns`, `68us`, `1.25ms`, `15.6ms`,
/// `354ms`, `3.88s`.
pub fn human_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.0}us", ns / 1e3)
    } else if ns < 1e7 {
        format!("{:.2}ms", ns / 1e6)
    } else if ns < 1e8 {
        format!("{:.1}ms", ns / 1e6)
    } else if ns < 1e9 {
        format!("{:.0}ms", ns / 1e6)
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

/// `median [min..max]` of a duration in ns.
fn spread_ns(m: &Mmm) -> String {
    format!(
        "{} [{}..{}]",
        human_ns(m.median),
        human_ns(m.min),
        human_ns(m.max)
    )
}

/// A delay cell: `-` where the run had no job of that kind.
fn cell(m: &Mmm, any: bool) -> String {
    if any { human_ns(m.median) } else { "-".into() }
}

/// The text report: one block of rows per block time, then what the columns mean.
pub fn table(report: &MixReport) -> String {
    let c = &report.config;
    let mut s = String::new();
    let any_cpu = c.block_every != 1;
    let any_blk = c.block_every != 0;
    for &b in &c.block_us {
        let who = match c.block_every {
            0 => format!(
                "no job blocks (--block-every 0), every job burns {} us",
                c.cpu_us
            ),
            1 => format!("every job blocks ({})", c.block_kind.name()),
            k => format!(
                "1 job in {k} blocks ({}), the others burn {} us",
                c.block_kind.name(),
                c.cpu_us
            ),
        };
        let _ = writeln!(
            s,
            "B = {}: {who}; queueing delay is submit to start",
            human_ns(b as f64 * 1e3)
        );
        let _ = writeln!(
            s,
            "{:<15} | {:>7} {:>7} {:>27} {:>7} | {:>7} {:>7} | {:>24} | {:>7} {:>5} | {:>12}",
            "executor",
            "cpu p50",
            "p90",
            "p99 median [min..max]",
            "max",
            "blk p50",
            "p99",
            "wall median [min..max]",
            "cpu/job",
            "busy",
            "threads"
        );
        for r in report.rows.iter().filter(|r| r.block_us == b) {
            row(&mut s, r, any_cpu, any_blk);
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "{} round{}: every cell is the median over the rounds, [min..max] where shown; rounds interleave every executor and B",
        c.rounds,
        if c.rounds == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "P={} producers x N={} jobs at {} jobs/s each; workers={} (rayon, crossbeam, threadpool); cpus={:?}",
        c.producers, c.jobs, c.rate, c.workers, report.cpus
    );
    let _ = writeln!(
        s,
        "cpu/blk = the CPU / blocking jobs; cpu/job = process CPU us per job (user+sys of every thread: the producers' timer wakeups and the 1 ms thread sampler too, so it grows with the wall); \
         busy = that CPU over wall x CPUs; threads = most threads of the executor during the run; \
         cmwq_annotated wraps each block in cmwq::blocking, every other executor blocks unannotated"
    );
    s
}

fn row(s: &mut String, r: &MixRow, any_cpu: bool, any_blk: bool) {
    let thr = &r.peak_threads;
    let _ = writeln!(
        s,
        "{:<15} | {:>7} {:>7} {:>27} {:>7} | {:>7} {:>7} | {:>24} | {:>7.1} {:>4.0}% | {:>12}",
        r.executor,
        cell(&r.cpu_delay_p50_ns, any_cpu),
        cell(&r.cpu_delay_p90_ns, any_cpu),
        if any_cpu {
            spread_ns(&r.cpu_delay_p99_ns)
        } else {
            "-".into()
        },
        cell(&r.cpu_delay_max_ns, any_cpu),
        cell(&r.block_delay_p50_ns, any_blk),
        cell(&r.block_delay_p99_ns, any_blk),
        spread_ns(&Mmm {
            median: r.wall_s.median * 1e9,
            min: r.wall_s.min * 1e9,
            max: r.wall_s.max * 1e9,
        }),
        r.cpu_us_per_job.median,
        r.busy_pct.median,
        format!("{:.0} [{:.0}..{:.0}]", thr.median, thr.min, thr.max),
    );
}

/// The JSON document of a report (schema `cmwq-mix/1`, described in
/// `bench/SCHEMA.md`): a struct rather than a `serde_json::Value`, so that
/// `schema` comes first and the fields keep their order.
#[derive(Debug, serde::Serialize)]
pub struct MixDoc<'a> {
    /// [`JSON_SCHEMA`].
    pub schema: &'static str,
    /// What was asked.
    pub config: &'a super::MixConfig,
    /// The CPUs the process may run on.
    pub cpus: &'a [usize],
    /// Every run, in the order it ran.
    pub runs: &'a [super::MixRun],
    /// One row per block time and executor.
    pub summary: &'a [MixRow],
}

/// The JSON document of `report`.
pub fn to_json(report: &MixReport) -> MixDoc<'_> {
    MixDoc {
        schema: JSON_SCHEMA,
        config: &report.config,
        cpus: &report.cpus,
        runs: &report.runs,
        summary: &report.rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(human_ns(850.0), "850ns");
        assert_eq!(human_ns(68_400.0), "68us");
        assert_eq!(human_ns(1_254_000.0), "1.25ms");
        assert_eq!(human_ns(15_640_000.0), "15.6ms");
        assert_eq!(human_ns(354_000_000.0), "354ms");
        assert_eq!(human_ns(3_878_000_000.0), "3.88s");
    }
}
