//! `cmwq compare`: two configurations or two commands, interleaved A B A B,
//! with the seed threads' table (`Metric  Baseline  Experiment  Delta  Sig`).
//!
//! The running, measuring and statistics live in `cmwq_lab::compare` and
//! `cmwq_lab::stats`; this file turns arguments into the command lines (side 0
//! is the baseline, every other side is compared against it; the seed
//! presets' sides and extra tables are in `presets.rs`), shows progress and
//! prints.

use std::io::IsTerminal;

use cmwq_lab::abtable::{AbTable, RenderOptions};
use cmwq_lab::compare::{self, RunRecord, Side};
use cmwq_lab::stats::CompareConfig;

use crate::presets;

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
    #[arg(long, value_name = "NAME", value_parser = ["wake", "shard", "priority", "qpw-cost", "qpw-isolation", "icache"], conflicts_with_all = ["a_cmd", "b_cmd"])]
    pub preset: Option<String>,
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
    pub icache: crate::icache::IcacheArgs,
}

/// Most runs (and warm-up runs) a side accepts.
pub const MAX_RUNS: usize = 100_000;

/// Side `label` from `--x ARGS` (this binary, `--json` added) or `--x-cmd CMD`.
pub(crate) fn side(
    label: &str,
    args: &Option<String>,
    cmd: &Option<String>,
) -> Result<Side, String> {
    let argv = match (args, cmd) {
        (Some(a), None) => {
            let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
            let mut v = vec![exe.to_string_lossy().into_owned()];
            v.extend(a.split_whitespace().map(str::to_string));
            if v.len() == 1 {
                return Err(format!("--{} is empty", label.to_lowercase()));
            }
            v.push("--json".into());
            v
        }
        (None, Some(c)) if !c.trim().is_empty() => {
            return Ok(Side {
                label: label.into(),
                argv: vec!["sh".into(), "-c".into(), c.clone()],
                json: false,
            });
        }
        (None, Some(_)) => return Err(format!("--{}-cmd is empty", label.to_lowercase())),
        _ => {
            return Err(format!(
                "side {label}: give exactly one of --{l} ARGS or --{l}-cmd CMD",
                l = label.to_lowercase()
            ));
        }
    };
    Ok(Side {
        label: label.into(),
        argv,
        json: true,
    })
}

/// Runs `cmwq compare`.
pub fn run(a: CompareArgs) -> Result<(), String> {
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
    if a.preset.as_deref() == Some("icache") {
        return crate::icache::run_preset(&a);
    }
    if let Some(path) = &a.plot {
        cmwq_lab::plot::check_plot_path(path)?;
    }
    let limits = compare::RunLimits {
        timeout: std::time::Duration::from_secs(a.timeout),
        ..compare::RunLimits::default()
    };
    let extra = |x: &Option<String>| x.clone().unwrap_or_default();
    let sides: Vec<Side> = match a.preset.as_deref() {
        Some("wake") => vec![
            side(
                "A",
                &Some(format!("bench --wake deferred {}", extra(&a.a))),
                &None,
            )?,
            side(
                "B",
                &Some(format!("bench --wake under-lock {}", extra(&a.b))),
                &None,
            )?,
        ],
        Some("shard") => presets::shard(
            &extra(&a.a),
            &extra(&a.b),
            &presets::parse_shard_sizes(&a.shard_sizes)?,
        )?,
        Some("priority") => presets::priority(&extra(&a.a), &extra(&a.b))?,
        Some(p @ ("qpw-cost" | "qpw-isolation")) => {
            let cmd = if p == "qpw-cost" { "cost" } else { "isolation" };
            vec![
                side(
                    "A",
                    &Some(format!("percpu {cmd} --mode local {}", extra(&a.a))),
                    &None,
                )?,
                side(
                    "B",
                    &Some(format!("percpu {cmd} --mode qpw {}", extra(&a.b))),
                    &None,
                )?,
            ]
        }
        _ => vec![side("A", &a.a, &a.a_cmd)?, side("B", &a.b, &a.b_cmd)?],
    };
    let tty = std::io::stderr().is_terminal();
    let total = sides.len() * (a.runs + a.warmup);
    let t0 = std::time::Instant::now();
    let mut records = Vec::new();
    let mut done = 0;
    let mut warned = vec![false; sides.len()];
    for i in 0..a.warmup + a.runs {
        // Rotate the order each round (A B, B A, ... ; 0 1 2, 1 2 0, ...) so no
        // side always runs right after another (caches, page cache, clocks).
        let n = sides.len();
        let shift = if a.order == "fixed" { 0 } else { i };
        for s in (0..n).map(|k| (k + shift) % n) {
            let sd = &sides[s];
            let res = compare::run_side_limited(sd, &limits).map(|r| {
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
            done += 1;
            if tty {
                let per = t0.elapsed().as_secs_f64() / done as f64;
                eprint!(
                    "\r  run {done}/{total} ({}) ~{:.0}s left   ",
                    sd.label,
                    per * (total - done) as f64
                );
            }
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
    if tty {
        eprintln!();
    }
    if a.preset.as_deref() == Some("shard") {
        // cache and cache_shard runs name their rows by scope; compare field by field.
        presets::strip_scope(&mut records);
    }
    let cfg = CompareConfig {
        noise_floor_pct: a.noise_floor,
        ..CompareConfig::default()
    };
    let tables = pair_tables(&sides, &records, &cfg)?;
    // The results are printed even when the plot cannot be written after all
    // (the directory went away during the runs); its error comes last.
    let mut plotted = Ok(());
    if let Some(path) = &a.plot {
        let mut metrics: Vec<String> = Vec::new();
        for (_, t) in &tables {
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
        let svg = cmwq_lab::plot::strip_plot(&cmwq_lab::plot::StripPlot {
            title: "cmwq compare: every run, and each experiment against the baseline",
            notes: &notes,
            sides: &labels,
            records: &records,
            metrics: &metrics,
            tables: &tables,
        });
        plotted = std::fs::write(path, svg)
            .map_err(|e| format!("--plot {}: {e} (the results are above)", path.display()));
    }
    let shard_rows = (a.preset.as_deref() == Some("shard")).then(|| {
        let sizes = presets::parse_shard_sizes(&a.shard_sizes).unwrap_or_default();
        let verdict = |k: usize, m: &str| {
            tables
                .iter()
                .find(|(j, _)| *j == k)
                .and_then(|(_, t)| t.compared().find(|r| r.metric == m))
                .map(|r| r.stats.verdict)
        };
        presets::shard_rows(&records, &sizes, &verdict)
    });
    let fio: Vec<(String, cmwq_lab::latency::Clat)> = if a.preset.as_deref() == Some("priority") {
        (0..sides.len())
            .filter_map(|k| presets::fio_clat(&records, k).map(|c| (sides[k].label.clone(), c)))
            .collect()
    } else {
        Vec::new()
    };
    if a.json {
        let doc = serde_json::json!({
            "schema": "cmwq-compare/1",
            "preset": a.preset,
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
            "shard": shard_rows,
            "fio": fio.iter().map(|(l, c)| (l.clone(), c)).collect::<std::collections::BTreeMap<_, _>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
        return plotted;
    }
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
    if let Some(rows) = &shard_rows {
        println!("{}", presets::render_shard(rows, a.markdown));
    }
    if !fio.is_empty() {
        println!("clat of each side (median of its runs' statistics):");
        for (label, c) in &fio {
            println!("{label}:");
            for l in c.fio_lines() {
                println!("  {l}");
            }
        }
        println!();
    }
    for (_, t) in &tables {
        if a.preset.as_deref() == Some("wake") {
            // Seed 000's layout: one table per executor/scope.
            for (_, part) in compare::split_by_prefix(t) {
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
    plotted
}

/// The side's command line as a reader would type it (this binary shown as `cmwq`).
fn display_argv(s: &Side) -> String {
    let mut v = s.argv.clone();
    if let Some(first) = v.first_mut()
        && std::env::current_exe().is_ok_and(|e| e.to_string_lossy() == *first)
    {
        *first = "cmwq".into();
    }
    v.join(" ")
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
        match compare::table_pair(records, 0, k, cfg.clone(), &title) {
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
