//! `cmwq percpu`: seed 003's two questions about per-CPU state with QPW.
//!
//! `cost` is the `kmalloc_bench` analog (cycles per operation on a per-CPU
//! object cache with no lock, `Local` and `Qpw`); `isolation` measures what
//! remote drains do to a pinned tight loop. The workloads live in
//! `cmwq_lab::percpu`; this file parses arguments, shows progress on a
//! terminal and prints a table or, with `--json`, one document whose flat
//! `"metrics"` object is what `cmwq compare` reads.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

use cmwq::percpu::Mode;
use cmwq_lab::percpu::Variant;
use cmwq_lab::percpu::cost::{self, CostConfig, CostReport};
use cmwq_lab::percpu::isolation::{self, IsolationConfig, IsolationReport};

/// Arguments of `cmwq percpu`.
#[derive(clap::Args, Debug)]
pub struct PercpuArgs {
    #[command(subcommand)]
    cmd: PercpuCmd,
}

#[derive(clap::Subcommand, Debug)]
enum PercpuCmd {
    /// Cycles per allocation/free on a per-CPU object cache: no lock, Local, Qpw (min, mean, median, max over runs)
    Cost(CostArgs),
    /// A pinned tight loop's worst gaps while another CPU drains every CPU's cache: Local vs Qpw
    Isolation(IsolationArgs),
}

/// Arguments of `cmwq percpu cost`.
#[derive(clap::Args, Debug)]
struct CostArgs {
    /// Which variant: nolock (sched_getcpu + array, no lock; single thread only), local, qpw, or all
    #[arg(long, value_name = "MODE", default_value = "all", value_parser = ["nolock", "local", "qpw", "all"])]
    mode: String,
    /// Timed runs per variant (interleaved; at most 100000)
    #[arg(long, value_name = "N", default_value_t = 10)]
    runs: usize,
    /// Allocations per run (each one is freed again; 10000 to 2^40)
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    ops: usize,
    /// Objects allocated before they are freed; each variant keeps this many
    /// plus 128 of 96 bytes, which must fit in half the memory available
    #[arg(long, value_name = "N", default_value_t = 16)]
    burst: usize,
    /// Print one JSON document (schema cmwq-percpu-cost/1) with a flat "metrics" object;
    /// metric names carry a "MODE " prefix (e.g. "qpw ") when more than one mode runs
    #[arg(long)]
    json: bool,
}

/// Arguments of `cmwq percpu isolation`.
#[derive(clap::Args, Debug)]
struct IsolationArgs {
    /// Which mode: local, qpw, or all
    #[arg(long, value_name = "MODE", default_value = "all", value_parser = ["local", "qpw", "all"])]
    mode: String,
    /// How long the pinned loop runs, per mode
    #[arg(long, value_name = "N", default_value_t = 2000)]
    duration_ms: u64,
    /// Sleep between two drains of every CPU
    #[arg(long, value_name = "N", default_value_t = 5)]
    drain_interval_ms: u64,
    /// Print one JSON document (schema cmwq-percpu-isolation/1) with a flat "metrics" object;
    /// metric names carry a "MODE " prefix (e.g. "qpw ") when more than one mode runs
    #[arg(long)]
    json: bool,
}

/// Runs `cmwq percpu`.
pub fn run(a: PercpuArgs) -> Result<(), String> {
    match a.cmd {
        PercpuCmd::Cost(c) => run_cost(c),
        PercpuCmd::Isolation(i) => run_isolation(i),
    }
}

fn run_cost(a: CostArgs) -> Result<(), String> {
    let variants = match a.mode.as_str() {
        "all" => Variant::ALL.to_vec(),
        m => vec![m.parse::<Variant>()?],
    };
    if a.runs == 0 || a.ops == 0 || a.burst == 0 {
        return Err(format!(
            "--runs {}, --ops {}, --burst {}: each must be at least 1",
            a.runs, a.ops, a.burst
        ));
    }
    if a.ops < 10_000 {
        // rdtsc is read twice per run, unserialised: ~15 ticks of skew that
        // only vanish when spread over many operations.
        return Err(format!(
            "--ops {}: at least 10000, or the clock reads themselves dominate cycles/op",
            a.ops
        ));
    }
    let cfg = CostConfig {
        variants,
        runs: a.runs,
        ops: a.ops,
        burst: a.burst,
    };
    let tty = std::io::stderr().is_terminal();
    let report = cost::run_cost(&cfg, &mut |done, total| {
        if tty {
            eprint!("\r  percpu cost: run {done}/{total}   ");
            if done == total {
                eprintln!();
            }
        }
    })?;
    if a.json {
        let doc = serde_json::json!({
            "report": report,
            "metrics": cost_metrics(&report),
        });
        crate::json::print("cmwq-percpu-cost/1", &doc)?;
    } else {
        print_cost(&report);
    }
    Ok(())
}

fn prefix(multi: bool, mode: &str) -> String {
    if multi {
        format!("{mode} ")
    } else {
        String::new()
    }
}

fn cost_metrics(r: &CostReport) -> BTreeMap<String, f64> {
    let multi = r.rows.len() > 1;
    let mut m = BTreeMap::new();
    for row in &r.rows {
        let p = prefix(multi, row.mode);
        let s = &row.summary;
        for (k, v) in [
            ("min", s.min),
            ("mean", s.mean),
            ("median", s.median),
            ("max", s.max),
        ] {
            m.insert(format!("{p}cycles_per_op_{k}"), v);
        }
    }
    m
}

fn print_cost(r: &CostReport) {
    let c = &r.config;
    println!(
        "percpu cost: {} runs x {} allocs + frees (burst {}), on CPU {}; cycles = {} ticks ({:.2}/ns)",
        c.runs, c.ops, c.burst, r.cpu, r.clock, r.ticks_per_ns
    );
    println!(
        "{:<8} {:>8} {:>8} {:>8} {:>8}  median vs nolock",
        "mode", "min", "mean", "median", "max"
    );
    let base = r
        .rows
        .iter()
        .find(|x| x.mode == "nolock")
        .map(|x| x.summary.median);
    for row in &r.rows {
        let s = &row.summary;
        let delta = match base {
            Some(b) if row.mode != "nolock" && b > 0.0 => {
                format!("{:+.1} ({:+.0}%)", s.median - b, 100.0 * (s.median - b) / b)
            }
            _ => String::new(),
        };
        println!(
            "{:<8} {:>8.1} {:>8.1} {:>8.1} {:>8.1}  {}",
            row.mode, s.min, s.mean, s.median, s.max, delta
        );
    }
    println!("(cycles per operation: one allocation or one free from the CPU's cache)");
}

fn run_isolation(a: IsolationArgs) -> Result<(), String> {
    let modes = match a.mode.as_str() {
        "all" => vec![Mode::Local, Mode::Qpw],
        m => vec![m.parse::<Mode>().map_err(|e| e.to_string())?],
    };
    if a.duration_ms == 0 || a.drain_interval_ms == 0 {
        return Err(format!(
            "--duration-ms {}, --drain-interval-ms {}: each must be at least 1",
            a.duration_ms, a.drain_interval_ms
        ));
    }
    let cfg = IsolationConfig {
        modes,
        duration: Duration::from_millis(a.duration_ms),
        drain_interval: Duration::from_millis(a.drain_interval_ms),
    };
    let tty = std::io::stderr().is_terminal();
    let report = isolation::run_isolation(&cfg, &mut |m| {
        if tty {
            eprintln!("  percpu isolation: {m} ({} ms)", a.duration_ms);
        }
    })?;
    if a.json {
        let doc = serde_json::json!({
            "report": report,
            "metrics": isolation_metrics(&report),
        });
        crate::json::print("cmwq-percpu-isolation/1", &doc)?;
    } else {
        print_isolation(&report);
    }
    Ok(())
}

fn isolation_metrics(r: &IsolationReport) -> BTreeMap<String, f64> {
    let multi = r.rows.len() > 1;
    let mut m = BTreeMap::new();
    for row in &r.rows {
        let p = prefix(multi, row.mode);
        let top5 = row.top_gaps_ns.iter().sum::<u64>() as f64 / row.top_gaps_ns.len().max(1) as f64;
        let mut put = |k: &str, v: f64| {
            m.insert(format!("{p}{k}"), v);
        };
        put("gap_max_ns", row.gap_max_ns as f64);
        put("gap_top5_mean_ns", top5);
        put("gap_p9999_ns", row.gap_p9999_ns as f64);
        put("gap_p999_ns", row.gap_p999_ns as f64);
        put("gaps_over_10us", row.gaps_over_10us as f64);
        put("drains", row.drains as f64);
        put("drains_on_pinned_cpu", row.drains_on_pinned_cpu as f64);
        put("loop_iterations_per_sec", row.iterations_per_sec);
        if let Some(cs) = row.loop_nivcsw {
            put("loop_nivcsw", cs as f64);
        }
    }
    m
}

fn print_isolation(r: &IsolationReport) {
    let c = &r.config;
    if let Some(row) = r.rows.first() {
        let drainer = row
            .drainer_cpu
            .map_or("the same CPU (only one available)".to_string(), |d| {
                format!("CPU {d}")
            });
        println!(
            "percpu isolation: loop pinned to CPU {}, drain_all every {} ms from {}, {} ms per mode",
            row.pinned_cpu,
            c.drain_interval.as_millis(),
            drainer,
            c.duration.as_millis()
        );
    }
    println!(
        "{:<6} {:>7} {:>10} {:>9} {:>9} {:>9} {:>7} {:>7} {:>11}  top-5 gaps (us)",
        "mode",
        "drains",
        "on_pinned",
        "max_us",
        "p99.99_us",
        "p99.9_us",
        ">10us",
        "nivcsw",
        "iter/s",
    );
    let us = |ns: u64| ns as f64 / 1000.0;
    for row in &r.rows {
        let top: Vec<String> = row
            .top_gaps_ns
            .iter()
            .map(|&g| format!("{:.0}", us(g)))
            .collect();
        println!(
            "{:<6} {:>7} {:>10} {:>9.1} {:>9.1} {:>9.2} {:>7} {:>7} {:>11.0}  {}",
            row.mode,
            row.drains,
            row.drains_on_pinned_cpu,
            us(row.gap_max_ns),
            us(row.gap_p9999_ns),
            us(row.gap_p999_ns),
            row.gaps_over_10us,
            row.loop_nivcsw.map_or("-".into(), |x| x.to_string()),
            row.iterations_per_sec,
            top.join(" ")
        );
    }
    println!(
        "(on_pinned: drain functions that ran on the loop's CPU; nivcsw: the loop's involuntary context switches)"
    );
}
