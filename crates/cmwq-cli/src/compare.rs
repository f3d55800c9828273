//! `cmwq compare`: two configurations or two commands, interleaved A B A B,
//! with the seed threads' table (`Metric  Baseline  Experiment  Delta  Sig`).
//!
//! The running, measuring and statistics live in `cmwq_lab::compare` and
//! `cmwq_lab::stats`; this file turns arguments into the two command lines,
//! shows progress and prints.

use std::io::IsTerminal;

use cmwq_lab::abtable::RenderOptions;
use cmwq_lab::compare::{self, RunRecord, Side};
use cmwq_lab::stats::CompareConfig;

/// Arguments of `cmwq compare`.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// A seed experiment: `wake` (seed 000: `bench --wake deferred` as A against
    /// `--wake under-lock` as B, one table per scope). `--a`/`--b` add arguments
    /// to both sides of a preset. `icache` (seed 001: the unlock path out of line
    /// as A against the `inline-unlock` build as B: code size, instructions, L1i
    /// misses, throughput on a resident and a front-end-bound workload).
    #[arg(long, value_name = "NAME", value_parser = ["wake", "icache"], conflicts_with_all = ["a_cmd", "b_cmd"])]
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
    /// Measured runs per side (at least 2)
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub runs: usize,
    /// Warm-up runs per side, not recorded
    #[arg(long, value_name = "W", default_value_t = 1)]
    pub warmup: usize,
    /// Deltas below this many percent are `flat`
    #[arg(long, value_name = "PCT", default_value_t = 0.1)]
    pub noise_floor: f64,
    /// Print one JSON document (every run and every row)
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the table as Markdown
    #[arg(long)]
    pub markdown: bool,
    /// Options of `--preset icache`.
    #[command(flatten)]
    pub icache: crate::icache::IcacheArgs,
}

fn side(label: &str, args: &Option<String>, cmd: &Option<String>) -> Result<Side, String> {
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
        (None, Some(c)) if !c.trim().is_empty() => vec!["sh".into(), "-c".into(), c.clone()],
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
    })
}

/// Runs `cmwq compare`.
pub fn run(a: CompareArgs) -> Result<(), String> {
    if a.runs < 2 {
        return Err(format!("--runs {}: need at least 2 runs a side", a.runs));
    }
    if !(a.noise_floor >= 0.0 && a.noise_floor.is_finite()) {
        return Err(format!(
            "--noise-floor {}: must be a percentage >= 0",
            a.noise_floor
        ));
    }
    if a.preset.as_deref() == Some("icache") {
        return crate::icache::run_preset(&a);
    }
    let sides = match a.preset.as_deref() {
        Some("wake") => {
            let extra = |x: &Option<String>| x.clone().unwrap_or_default();
            [
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
            ]
        }
        _ => [side("A", &a.a, &a.a_cmd)?, side("B", &a.b, &a.b_cmd)?],
    };
    let tty = std::io::stderr().is_terminal();
    let total = 2 * (a.runs + a.warmup);
    let t0 = std::time::Instant::now();
    let mut records = Vec::new();
    let mut done = 0;
    for i in 0..a.warmup + a.runs {
        for (s, sd) in sides.iter().enumerate() {
            let res = compare::run_once(&sd.argv);
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
    let cfg = CompareConfig {
        noise_floor_pct: a.noise_floor,
        ..CompareConfig::default()
    };
    let title = format!(
        "A: {}\nB: {}",
        sides[0].argv.join(" "),
        sides[1].argv.join(" ")
    );
    let table = compare::table(&records, cfg, &title)?;
    if a.preset.is_some() && !a.json {
        // Seed 000's layout: one table per executor/scope.
        let opts = RenderOptions {
            spread: true,
            n: true,
            ..RenderOptions::default()
        };
        for (_, t) in compare::split_by_prefix(&table) {
            if a.markdown {
                print!("{}", t.render_markdown(&RenderOptions::default()));
            } else {
                print!("{}", t.render_text(&opts));
            }
            println!();
        }
        return Ok(());
    }
    if a.json {
        let doc = serde_json::json!({
            "schema": "cmwq-compare/1",
            "a": sides[0],
            "b": sides[1],
            "runs": records,
            "table": table,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else if a.markdown {
        print!("{}", table.render_markdown(&RenderOptions::default()));
    } else {
        let opts = RenderOptions {
            spread: true,
            n: true,
            ..RenderOptions::default()
        };
        print!("{}", table.render_text(&opts));
    }
    Ok(())
}
