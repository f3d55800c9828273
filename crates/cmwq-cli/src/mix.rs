//! `cmwq mix`: one-off jobs of which some block without saying so, on cmwq
//! (unannotated, annotated, bound) and the peers, in the same run (issue 32).
//!
//! The workload and what is measured are documented in `cmwq_lab::mix`; this
//! file turns arguments into a [`MixConfig`], shows progress and prints.

use std::io::IsTerminal;
use std::path::PathBuf;

use cmwq_lab::mix::{self, BlockKind, MixConfig};

use crate::bench::Bar;

/// Arguments of `cmwq mix`.
#[derive(clap::Args, Debug)]
pub struct MixArgs {
    /// Producer threads P, not pinned, at most 4096 (and below RLIMIT_NPROC)
    #[arg(long, value_name = "P", default_value_t = 4)]
    pub producers: usize,
    /// One-off jobs per producer N
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub jobs: usize,
    /// Jobs per second each producer submits, on a fixed schedule (the
    /// default keeps a 2-vCPU machine about half busy; see the busy column)
    #[arg(long, value_name = "JOBS/S", default_value_t = 8000.0)]
    pub rate: f64,
    /// One job in K blocks (0: none; 1: all)
    #[arg(long, value_name = "K", default_value_t = 10)]
    pub block_every: usize,
    /// How long a blocking job blocks, µs; a comma-separated list runs each in
    /// turn (e.g. 500,2000,20000), at most 10000000 each
    #[arg(long, value_name = "US[,US...]", default_value = "2000")]
    pub block_us: String,
    /// How a job blocks: sleep (std::thread::sleep), mutex (a lock a helper
    /// thread holds B at a time: waits 0..B) or pipe (a read a timer thread
    /// feeds B later)
    #[arg(long, value_name = "KIND", default_value = "sleep", value_parser = ["sleep", "mutex", "pipe"])]
    pub block_kind: String,
    /// CPU time every other job burns, µs (at most 1000000)
    #[arg(long, value_name = "C", default_value_t = 20)]
    pub cpu_us: u64,
    /// Rounds; everything alternates and rows give median [min..max] (at most 10000)
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub rounds: usize,
    /// Peers to run beside cmwq, cmwq_annotated and cmwq_bound: comma-separated
    /// names or `all` (rayon, tokio_blocking, crossbeam, threadpool)
    #[arg(long, value_name = "LIST|all")]
    pub vs: Option<String>,
    /// Worker threads of rayon, crossbeam and threadpool, at most 4096
    /// [default: online CPUs]
    #[arg(long, value_name = "W")]
    pub workers: Option<usize>,
    /// Print one JSON document (schema cmwq-mix/1) on stdout instead of the table
    #[arg(long)]
    pub json: bool,
    /// Also write an SVG plot (p99 delay of the CPU jobs per executor and
    /// block time) to FILE.svg (checked before the first run)
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Also write one CSV line per job to FILE.csv (executor, block time,
    /// round, producer, job, whether it blocks, submit time in µs after the
    /// run's start, queueing delay in ns, the CPU it started on): when and
    /// where the delays happened, which the percentiles do not show
    #[arg(long, value_name = "FILE.csv")]
    pub trace: Option<PathBuf>,
}

/// Turn the arguments into a validated configuration.
pub fn config(a: &MixArgs) -> Result<MixConfig, String> {
    let ncpu = cmwq_lab::bench::sys::allowed_cpus().len();
    let mut c = MixConfig::with_defaults(a.workers.unwrap_or(ncpu));
    c.producers = a.producers;
    c.jobs = a.jobs;
    c.rate = a.rate;
    c.block_every = a.block_every;
    c.block_us = mix::parse_block_us(&a.block_us)?;
    c.block_kind = a.block_kind.parse::<BlockKind>()?;
    c.cpu_us = a.cpu_us;
    c.rounds = a.rounds;
    c.trace = a.trace.clone();
    if let Some(v) = &a.vs {
        c.vs = cmwq_lab::bench::parse_vs(v, &mix::peer_names())?;
    }
    c.validate()?;
    Ok(c)
}

/// Runs `cmwq mix`.
pub fn run(a: MixArgs) -> Result<(), String> {
    let cfg = config(&a)?;
    if let Some(path) = &a.plot {
        cmwq_lab::svg::check_plot_path(path)?;
    }
    let bar = Bar {
        on: std::io::stderr().is_terminal(),
    };
    let report = mix::run_mix(&cfg, |p| bar.show(p))?;
    for r in &report.runs {
        if r.ran_once != r.jobs || r.runs != r.jobs {
            return Err(format!(
                "{} B={}us round {}: {} of {} jobs ran exactly once ({} runs in all)",
                r.executor,
                r.block_us,
                r.round + 1,
                r.ran_once,
                r.jobs,
                r.runs
            ));
        }
        if r.block_fallbacks > 0 {
            return Err(format!(
                "{} B={}us round {}: {} blocks could not block the {} way and slept instead: {}",
                r.executor,
                r.block_us,
                r.round + 1,
                r.block_fallbacks,
                cfg.block_kind.name(),
                r.block_error.as_deref().unwrap_or("no reason given")
            ));
        }
    }
    crate::bench::emit(
        a.plot.as_deref(),
        || mix::svg::render(&report, &crate::provenance()),
        a.json.then(|| mix::to_json(&report)),
        || mix::table(&report),
    )
}
