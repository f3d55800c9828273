//! `cmwq bench`: the kernel's test_workqueue on cmwq, side by side with the peers.
//!
//! The workload, the measurements and the JSON schema are documented in
//! `cmwq_lab::bench` (and `crates/cmwq-lab/src/bench/SCHEMA.md`); this file only
//! turns arguments into a [`BenchConfig`], draws the progress bar and prints.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use cmwq_lab::bench::{self, BenchConfig, ExecutorFactory, Progress};

/// Arguments of `cmwq bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Producer threads P, each pinned to a CPU (producer i on CPU i % ncpu), at
    /// most 4096 (and below RLIMIT_NPROC) [default: online CPUs]
    #[arg(long, value_name = "P")]
    pub threads: Option<usize>,
    /// Items per producer N; P x N x 32 bytes of samples must fit in half the
    /// memory available (MemAvailable, or RLIMIT_AS/RLIMIT_DATA if lower)
    #[arg(long, value_name = "N", default_value_t = 50_000)]
    pub items: usize,
    /// Items in flight per producer: queue B, wait for all B (1 = the kernel's
    /// shape); at most N, and P x B x 512 bytes count against the memory too
    #[arg(long, value_name = "B", default_value_t = 1)]
    pub batch: usize,
    /// Affinity scopes for cmwq, comma-separated; run in the kernel's order
    /// (cpu, smt, cache_shard, cache, numa, system), or `none` to run only the
    /// peers of --vs [default: all]
    #[arg(long, value_name = "LIST")]
    pub scopes: Option<String>,
    /// Peers to run beside cmwq: comma-separated names or `all`
    /// (rayon, tokio, tokio_blocking, crossbeam, threadpool, limit); the model
    /// kernel_min (limit plus the kernel's per-item rules) only by name
    #[arg(long, value_name = "LIST|all")]
    pub vs: Option<String>,
    /// Rounds; executors alternate A B C A B C ... and rows give median
    /// [min..max] (at most 10000)
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub rounds: usize,
    /// Worker threads of every peer, at most 4096 (and below RLIMIT_NPROC)
    /// [default: online CPUs]
    #[arg(long, value_name = "W")]
    pub workers: Option<usize>,
    /// Print one JSON document (schema cmwq-bench/1) on stdout instead of the text report
    #[arg(long)]
    pub json: bool,
    /// Also write an SVG plot (throughput per executor and scope, round-trip
    /// CDF) to FILE.svg (checked before the first run)
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Build cmwq's pods from a synthetic topology mapped onto this machine's CPUs
    #[arg(long, value_name = "SPEC")]
    pub synthetic: Option<String>,
    /// cmwq: bind workers to their pod (affinity_strict=1)
    #[arg(long)]
    pub strict: bool,
    /// cmwq: when to wake a picked worker: `deferred` (after the pool lock is
    /// released, the 2026 order) or `under-lock` (the old order)
    #[arg(long, value_name = "MODE", default_value = "deferred", value_parser = ["deferred", "under-lock"])]
    pub wake: String,
    /// cmwq: how unbound pools limit running workers: `per-cpu` (one running
    /// worker per CPU of the pod, the default) or `unmanaged` (a worker per
    /// waiting item, as the kernel)
    #[arg(long, value_name = "MODE", default_value = "per-cpu", value_parser = ["per-cpu", "unmanaged"])]
    pub unbound_concurrency: String,
    /// cmwq: cores per pod of the cache_shard scope (the kernel's
    /// workqueue.cache_shard_size) [default: 8]
    #[arg(long, value_name = "N")]
    pub cache_shard_size: Option<usize>,
    /// cmwq: how each item is submitted: `work` (a `Work` per in-flight slot,
    /// made once and re-queued, as the kernel's `queue_work` of a
    /// `work_struct`), `spawn` (`Workqueue::spawn` of a one-off closure per
    /// item, its handle dropped) or `execute` (`Workqueue::execute`: a one-off
    /// closure with no handle, as the peers' fire-and-forget closures)
    #[arg(long, value_name = "HOW", default_value = "work", value_parser = ["work", "spawn", "execute"])]
    pub submit: String,
}

/// Turn the arguments into a validated configuration.
pub fn config(a: &BenchArgs) -> Result<BenchConfig, String> {
    let ncpu = bench::sys::allowed_cpus().len();
    let mut c = BenchConfig::with_defaults(ncpu);
    c.threads = a.threads.unwrap_or(ncpu);
    c.items = a.items;
    c.batch = a.batch;
    c.rounds = a.rounds;
    c.workers = a.workers.unwrap_or(ncpu);
    c.synthetic = a.synthetic.clone();
    c.strict = a.strict;
    c.wake_under_lock = a.wake == "under-lock";
    c.unmanaged = a.unbound_concurrency == "unmanaged";
    c.spawn = a.submit == "spawn";
    c.execute = a.submit == "execute";
    c.cache_shard_size = a.cache_shard_size;
    if let Some(spec) = &c.synthetic {
        cmwq::topology::Topology::from_synthetic(spec).map_err(|e| format!("--synthetic: {e}"))?;
    }
    if let Some(s) = &a.scopes {
        c.scopes = bench::parse_scopes(s)?;
    }
    if let Some(v) = &a.vs {
        c.vs = bench::parse_vs(v, &bench::peer_names())?;
    }
    c.validate()?;
    Ok(c)
}

/// A one-line progress bar on stderr, only when stderr is a terminal
/// (`cmwq bench` and `cmwq mix`).
pub(crate) struct Bar {
    pub(crate) on: bool,
}

impl Bar {
    pub(crate) fn show(&self, p: &Progress) {
        if !self.on {
            return;
        }
        const WIDTH: usize = 30;
        let filled = (p.done * WIDTH)
            .checked_div(p.total)
            .unwrap_or(WIDTH)
            .min(WIDTH);
        let mut e = std::io::stderr().lock();
        if p.done == p.total {
            let _ = write!(e, "\r\x1b[2K");
        } else {
            let _ = write!(
                e,
                "\r\x1b[2K[{}{}] {}/{} {}",
                "#".repeat(filled),
                " ".repeat(WIDTH - filled),
                p.done,
                p.total,
                p.label
            );
        }
        let _ = e.flush();
    }
}

/// Runs `cmwq bench`.
pub fn run(a: BenchArgs) -> Result<(), String> {
    let cfg = config(&a)?;
    if let Some(path) = &a.plot {
        cmwq_lab::svg::check_plot_path(path)?;
    }
    let subjects = bench::subjects();
    let peers = bench::peers();
    let mut chosen: Vec<&dyn ExecutorFactory> = subjects.iter().map(|f| f.as_ref()).collect();
    chosen.extend(
        peers
            .iter()
            .filter(|p| cfg.vs.iter().any(|v| v == p.name()))
            .map(|p| p.as_ref()),
    );
    if chosen.is_empty() {
        return Err(
            "nothing to run: cmwq is not wired into the bench yet; pass --vs LIST or --vs all"
                .into(),
        );
    }
    let bar = Bar {
        on: std::io::stderr().is_terminal(),
    };
    let report = bench::run_bench(&cfg, &chosen, |p| bar.show(p))?;
    for r in &report.runs {
        let want = (cfg.threads * cfg.items) as u64;
        if r.completed != want {
            return Err(format!(
                "{} {} round {}: {} completions for {want} items",
                r.executor, r.scope, r.round, r.completed
            ));
        }
    }
    emit(
        a.plot.as_deref(),
        || bench::svg::render(&report, &crate::provenance()),
        a.json
            .then(|| crate::json::schema_first(bench::to_json(&report)))
            .transpose()?,
        || {
            let mut t = bench::report_kernel_lines(&report).join("\n");
            t.push_str("\n\n");
            t.push_str(&bench::table(&report));
            t
        },
    )
}

/// Writes the plot to `plot` (if asked) and prints the JSON document `json`
/// (if asked) or the text. The results are printed even when the plot cannot
/// be written after all (its directory went away during the run); its error
/// comes last.
pub(crate) fn emit<D: serde::Serialize>(
    plot: Option<&std::path::Path>,
    svg: impl FnOnce() -> String,
    json: Option<D>,
    text: impl FnOnce() -> String,
) -> Result<(), String> {
    let plotted = match plot {
        Some(path) => std::fs::write(path, svg())
            .map_err(|e| format!("--plot {}: {e} (the results are above)", path.display())),
        None => Ok(()),
    };
    let mut out = std::io::stdout().lock();
    match json {
        Some(doc) => {
            let doc = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
            let _ = writeln!(out, "{doc}");
        }
        None => {
            let _ = write!(out, "{}", text());
        }
    }
    drop(out);
    plotted
}
