//! `cmwq compare`: two configurations or two commands, interleaved A B A B,
//! with the seed threads' table (`Metric  Baseline  Experiment  Delta  Sig`).
//!
//! The running, measuring and statistics live in `cmwq_lab::ab`; this module
//! turns arguments into the command lines (side 0 is the baseline, every
//! other side is compared against it), runs the rounds with a progress line,
//! and prints. Its rooms, each importing only those after it:
//!
//! - `mod.rs`: the arguments, the rounds, the output;
//! - `presets.rs`: [`Preset`], each seed experiment's sides and extra tables;
//! - `icache.rs`: the icache study (`--preset icache`, `cmwq icache-workload`);
//! - `side.rs`: a side's command line.

use std::io::IsTerminal;

use cmwq_lab::ab::run::{self, RunRecord, Side};
use cmwq_lab::ab::stats::CompareConfig;
use cmwq_lab::ab::table::{AbTable, RenderOptions};

pub mod icache;
mod presets;
mod side;

use presets::Extras;
pub use presets::Preset;
use side::{display_argv, side};

/// Arguments of `cmwq compare`.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// A ready-made experiment on one of the kernel changes cmwq carries: `wake`
    /// (worker wakeups outside the pool lock: `bench --wake deferred` as A against
    /// `--wake under-lock` as B, one table per scope); `shard` (the cache_shard
    /// affinity scope: scope cache against cache_shard at each of --shard-sizes,
    /// mean and stdev of the per-round change); `priority` (the SCHED_FIFO switch
    /// for high-priority pools: `latency` at normal against high and fifo
    /// priority under CPU hogs, fio's clat lines); `qpw-cost` and
    /// `qpw-isolation` (QPW per-CPU state: `percpu cost`/`percpu isolation` with
    /// `--mode local` as A against `--mode qpw` as B; in user space both take
    /// the slot lock on the fast path, so `qpw-cost` is an A/A check and the
    /// lock's cost is `percpu cost --mode all`'s no-lock row). `--a` adds arguments
    /// to the baseline side of a preset, `--b` to the other sides. `icache`
    /// (the pool lock's unlock path out of line as A against the `inline-unlock`
    /// build as B: code size, instructions, L1i misses, throughput on a resident
    /// and a front-end-bound workload).
    #[arg(long, value_name = "NAME", value_enum, conflicts_with_all = ["a_cmd", "b_cmd"])]
    pub preset: Option<Preset>,
    /// Side A as arguments of this `cmwq` binary, e.g. "bench --scopes cpu --wake under-lock"
    /// (split on whitespace; `--json` is added)
    #[arg(
        long,
        value_name = "ARGS",
        conflicts_with = "a_cmd",
        allow_hyphen_values = true
    )]
    pub a: Option<String>,
    /// Side B as arguments of this `cmwq` binary
    #[arg(
        long,
        value_name = "ARGS",
        conflicts_with = "b_cmd",
        allow_hyphen_values = true
    )]
    pub b: Option<String>,
    /// Side A as a shell command (two builds, two binaries); its stdout may carry JSON metrics
    #[arg(long, value_name = "CMD")]
    pub a_cmd: Option<String>,
    /// Side B as a shell command
    #[arg(long, value_name = "CMD")]
    pub b_cmd: Option<String>,
    /// Measured runs per side (2 to 100000)
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub runs: usize,
    /// Warm-up runs per side, not recorded (at most 100000)
    #[arg(long, value_name = "W", default_value_t = 1)]
    pub warmup: usize,
    /// Kill a run (its whole process group) that takes longer than this and
    /// report it as failed (1 to 604800, a week); a run's stdout and stderr
    /// are kept up to 16 MiB each, a run that prints more is killed too
    #[arg(long, value_name = "SECS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub timeout: u64,
    /// Order of the sides within each round: `rotate` (A B, then B A, ...: no
    /// side always follows the same one, so cache and clock effects of the
    /// previous run cancel) or `fixed` (A B, A B, ...)
    #[arg(long, value_name = "ORDER", default_value = "rotate", value_parser = ["rotate", "fixed"])]
    pub order: String,
    /// Deltas below this many percent are `flat`
    #[arg(long, value_name = "PCT", default_value_t = 0.1)]
    pub noise_floor: f64,
    /// Print one JSON document (every run and every row)
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the table as Markdown
    #[arg(long)]
    pub markdown: bool,
    /// Also write an SVG of every run's value, one strip plot per metric, sides
    /// side by side (the path is checked before the first run)
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
    /// `--preset shard`: the cache_shard sizes (cores per pod) compared against cache
    #[arg(long, value_name = "LIST", default_value = presets::SEED_SHARD_SIZES)]
    pub shard_sizes: String,
    /// Options of `--preset icache`.
    #[command(flatten)]
    pub icache: icache::IcacheArgs,
}

/// Most runs (and warm-up runs) a side accepts.
pub const MAX_RUNS: usize = 100_000;

/// Refuses counts out of range; warns when too few runs can show `**`.
fn check_args(a: &CompareArgs) -> Result<(), String> {
    if a.runs < 2 {
        return Err(format!("--runs {}: need at least 2 runs a side", a.runs));
    }
    if a.runs > MAX_RUNS {
        return Err(format!("--runs {}: at most {MAX_RUNS} runs a side", a.runs));
    }
    if a.warmup > MAX_RUNS {
        return Err(format!(
            "--warmup {}: at most {MAX_RUNS} warm-up runs a side",
            a.warmup
        ));
    }
    if !(a.noise_floor >= 0.0 && a.noise_floor.is_finite()) {
        return Err(format!(
            "--noise-floor {}: must be a percentage >= 0",
            a.noise_floor
        ));
    }
    if a.runs <= 3 {
        // The smallest two-sided Mann-Whitney p with n runs a side is
        // 2 / C(2n, n): 0.33 for 2, 0.1 for 3, 0.029 for 4.
        let n = a.runs as f64;
        let c: f64 = (1..=a.runs).map(|i| (n + i as f64) / i as f64).product();
        eprintln!(
            "cmwq compare: with {} runs a side the smallest possible p is {:.2}: no row can be `**`; use --runs 4 or more",
            a.runs,
            2.0 / c
        );
    }
    Ok(())
}

/// Runs `cmwq compare`.
pub fn run(a: CompareArgs) -> Result<(), String> {
    check_args(&a)?;
    if a.preset == Some(Preset::Icache) {
        if a.a.is_some() || a.b.is_some() {
            return Err("--a/--b do not apply to --preset icache (use --a-bin/--b-bin)".into());
        }
        let shared = icache::Shared {
            runs: a.runs,
            warmup: a.warmup,
            noise_floor: a.noise_floor,
            json: a.json,
            markdown: a.markdown,
        };
        return icache::run_preset(&a.icache, &shared);
    }
    if let Some(path) = &a.plot {
        cmwq_lab::svg::check_plot_path(path)?;
    }
    let extra = |x: &Option<String>| x.clone().unwrap_or_default();
    let sides: Vec<Side> = match a.preset {
        Some(p) => p.sides(&extra(&a.a), &extra(&a.b), &a.shard_sizes)?,
        None => vec![side("A", &a.a, &a.a_cmd)?, side("B", &a.b, &a.b_cmd)?],
    };
    let mut records = run_rounds(&a, &sides)?;
    if let Some(p) = a.preset {
        p.prepare(&mut records);
    }
    let cfg = CompareConfig {
        noise_floor_pct: a.noise_floor,
        ..CompareConfig::default()
    };
    let tables = pair_tables(&sides, &records, &cfg)?;
    // The results are printed even when the plot cannot be written after all
    // (the directory went away during the runs); its error comes last.
    let plotted = match &a.plot {
        Some(path) => write_plot(path, &sides, &records, &tables),
        None => Ok(()),
    };
    let extras = a
        .preset
        .map(|p| p.extras(&sides, &records, &tables, &a.shard_sizes))
        .unwrap_or_default();
    if a.json {
        print_json(&a, &sides, &records, &tables, &extras)?;
    } else {
        print_text(&a, &tables, &extras);
    }
    plotted
}

/// The progress line on stderr (when it is a terminal): runs done of all,
/// and the time left at the pace so far.
struct Progress {
    tty: bool,
    total: usize,
    done: usize,
    t0: std::time::Instant,
}

impl Progress {
    fn step(&mut self, label: &str) {
        self.done += 1;
        if self.tty {
            let per = self.t0.elapsed().as_secs_f64() / self.done as f64;
            eprint!(
                "\r  run {}/{} ({label}) ~{:.0}s left   ",
                self.done,
                self.total,
                per * (self.total - self.done) as f64
            );
        }
    }
}

/// Runs `--warmup` then `--runs` rounds of every side and records the
/// measured ones; a failed warm-up is the command's error, a failed run is
/// reported and recorded without metrics.
fn run_rounds(a: &CompareArgs, sides: &[Side]) -> Result<Vec<RunRecord>, String> {
    let limits = run::RunLimits {
        timeout: std::time::Duration::from_secs(a.timeout),
        ..run::RunLimits::default()
    };
    let mut progress = Progress {
        tty: std::io::stderr().is_terminal(),
        total: sides.len() * (a.runs + a.warmup),
        done: 0,
        t0: std::time::Instant::now(),
    };
    let mut records = Vec::new();
    let mut warned = vec![false; sides.len()];
    for i in 0..a.warmup + a.runs {
        // Rotate the order each round (A B, B A, ... ; 0 1 2, 1 2 0, ...) so no
        // side always runs right after another (caches, page cache, clocks).
        let n = sides.len();
        let shift = if a.order == "fixed" { 0 } else { i };
        for s in (0..n).map(|k| (k + shift) % n) {
            let sd = &sides[s];
            let res = run::run_side_limited(sd, &limits).map(|r| {
                if let Some(why) = r.no_metrics
                    && !warned[s]
                {
                    warned[s] = true;
                    eprintln!(
                        "cmwq compare: warning: side {} ({}): {why}; its metrics come from the process only (wall, CPU, context switches, RSS)",
                        sd.label,
                        display_argv(sd)
                    );
                }
                r.metrics
            });
            progress.step(&sd.label);
            if i < a.warmup {
                if let Err(e) = res {
                    return Err(format!("warm-up run of {} failed: {e}", sd.label));
                }
                continue;
            }
            let (metrics, error) = match res {
                Ok(m) => (m, None),
                Err(e) => {
                    eprintln!(
                        "cmwq compare: run {} of {} failed and is left out: {e}",
                        i - a.warmup,
                        sd.label
                    );
                    (Default::default(), Some(e))
                }
            };
            records.push(RunRecord {
                side: s,
                index: i - a.warmup,
                metrics,
                error,
            });
        }
    }
    if progress.tty {
        eprintln!();
    }
    Ok(records)
}

/// Writes the strip plot of every compared metric to `path`.
fn write_plot(
    path: &std::path::Path,
    sides: &[Side],
    records: &[RunRecord],
    tables: &[(usize, AbTable)],
) -> Result<(), String> {
    let mut metrics: Vec<String> = Vec::new();
    for (_, t) in tables {
        for r in t.compared() {
            if !metrics.contains(&r.metric) {
                metrics.push(r.metric.clone());
            }
        }
    }
    let labels: Vec<String> = sides
        .iter()
        .map(|s| format!("{}: {}", s.label, display_argv(s)))
        .collect();
    let notes = crate::provenance();
    let svg = cmwq_lab::ab::plot::strip_plot(&cmwq_lab::ab::plot::StripPlot {
        title: "cmwq compare: every run, and each experiment against the baseline",
        notes: &notes,
        sides: &labels,
        records,
        metrics: &metrics,
        tables,
    });
    std::fs::write(path, svg)
        .map_err(|e| format!("--plot {}: {e} (the results are above)", path.display()))
}

/// Schema tag of `cmwq compare --json` (SCHEMA.md).
pub const COMPARE_SCHEMA: &str = "cmwq-compare/1";

/// `cmwq compare --json`: every run and every table (`cmwq-compare/1`).
fn print_json(
    a: &CompareArgs,
    sides: &[Side],
    records: &[RunRecord],
    tables: &[(usize, AbTable)],
    extras: &Extras,
) -> Result<(), String> {
    let doc = serde_json::json!({
        "preset": a.preset.map(Preset::name),
        "order": a.order,
        "warmup": a.warmup,
        "a": sides[0],
        "b": sides[1],
        "sides": sides,
        "runs": records,
        "table": tables.first().map(|(_, t)| t),
        "tables": tables.iter().map(|(k, t)| serde_json::json!({
            "baseline": sides[0].label,
            "experiment": sides[*k].label,
            "table": t,
        })).collect::<Vec<_>>(),
        "shard": extras.shard,
        "fio": extras.fio.iter().map(|(l, c)| (l.clone(), c)).collect::<std::collections::BTreeMap<_, _>>(),
    });
    crate::json::print(COMPARE_SCHEMA, &doc)
}

/// The tables as text or Markdown: the preset's extra tables first, then
/// one A/B table per experiment side.
fn print_text(a: &CompareArgs, tables: &[(usize, AbTable)], extras: &Extras) {
    let opts = if a.markdown {
        RenderOptions::default()
    } else {
        RenderOptions {
            spread: true,
            n: true,
            ..RenderOptions::default()
        }
    };
    let render = |t: &AbTable| {
        if a.markdown {
            t.render_markdown(&opts)
        } else {
            t.render_text(&opts)
        }
    };
    if let Some(rows) = &extras.shard {
        println!("{}", presets::render_shard(rows, a.markdown));
    }
    if !extras.fio.is_empty() {
        println!("clat of each side (median of its runs' statistics):");
        for (label, c) in &extras.fio {
            println!("{label}:");
            for l in c.fio_lines() {
                println!("  {l}");
            }
        }
        println!();
    }
    for (_, t) in tables {
        if a.preset.is_some_and(Preset::splits_tables) {
            // Seed 000's layout: one table per executor/scope.
            for (_, part) in run::split_by_prefix(t) {
                print!("{}", render(&part));
                println!();
            }
        } else {
            print!("{}", render(t));
            if a.preset.is_some() {
                println!();
            }
        }
    }
}

/// One table per side `k >= 1` against side 0. With two sides an error (too
/// few successful runs) is the command's error; with more, a side that
/// cannot be compared is reported and the others go on.
fn pair_tables(
    sides: &[Side],
    records: &[RunRecord],
    cfg: &CompareConfig,
) -> Result<Vec<(usize, AbTable)>, String> {
    let mut out = Vec::new();
    for k in 1..sides.len() {
        let title = if sides.len() == 2 {
            format!(
                "A: {}\nB: {}",
                sides[0].argv.join(" "),
                sides[1].argv.join(" ")
            )
        } else {
            format!(
                "{} vs {}\nA: {}\nB: {}",
                sides[0].label,
                sides[k].label,
                display_argv(&sides[0]),
                display_argv(&sides[k])
            )
        };
        match run::table_pair(records, 0, k, cfg.clone(), &title) {
            Ok(t) => out.push((k, t)),
            Err(e) if sides.len() == 2 => return Err(e),
            Err(e) => eprintln!(
                "cmwq compare: no table for {} vs {}: {e}",
                sides[0].label, sides[k].label
            ),
        }
    }
    if out.is_empty() {
        return Err("no side could be compared with the baseline".into());
    }
    Ok(out)
}
