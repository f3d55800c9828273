//! `cmwq icache-workload` and `cmwq compare --preset icache`: seed 001's
//! inlining study on cmwq's own unlock path.
//!
//! The study itself lives in `cmwq_lab::icache`; this file parses arguments,
//! finds or builds the two binaries, shows progress and prints.
//!
//! The two binaries differ only in the `inline-unlock` feature:
//!
//! ```text
//! cargo build --release -p cmwq-cli                          # A: unlock out of line
//! cargo build --release -p cmwq-cli --features inline-unlock # B: unlock inlined
//! ```
//!
//! Without `--a-bin`/`--b-bin` the preset runs both builds itself in the
//! workspace this binary was built from (one target directory, so the
//! dependencies are built once) and copies the results to
//! `<target>/icache/cmwq-outofline` and `<target>/icache/cmwq-inline`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;

use cmwq_lab::ab::stats::CompareConfig;
use cmwq_lab::icache::cachegrind::Geometry;
use cmwq_lab::icache::study::{self, StudyConfig};
use cmwq_lab::icache::workload::{self, Workload, WorkloadConfig};

/// Arguments of `cmwq icache-workload`.
#[derive(clap::Args, Debug)]
pub struct WorkloadArgs {
    /// `resident` (tiny work function, L1i-resident loop) or `frontend`
    /// (a large code footprint per item)
    #[arg(long, value_name = "NAME", value_parser = ["resident", "frontend"])]
    pub workload: String,
    /// Items to run (rounded up to whole batches; at most 2^40)
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub items: u64,
    /// Items in flight: queue B distinct work items, wait for all B; B x 512
    /// bytes must fit in half the memory available
    #[arg(long, value_name = "B", default_value_t = 16)]
    pub batch: usize,
    /// Print JSON (with a "metrics" object for `cmwq compare`)
    #[arg(long)]
    pub json: bool,
}

/// Runs `cmwq icache-workload`.
pub fn run_workload(a: WorkloadArgs) -> Result<(), String> {
    let r = workload::run(WorkloadConfig {
        workload: Workload::parse(&a.workload)?,
        items: a.items,
        batch: a.batch,
    })?;
    if a.json {
        println!("{}", crate::json::line_first(r.to_json())?);
    } else {
        println!(
            "{}: {} items in {:.3} s, {:.0} items/s (checksum {:016x})",
            a.workload, r.items, r.elapsed_s, r.items_per_sec, r.checksum
        );
    }
    Ok(())
}

/// The options of `cmwq compare` that only `--preset icache` reads.
#[derive(clap::Args, Debug)]
pub struct IcacheArgs {
    /// (preset icache) Baseline binary, unlock out of line [default: build it]
    #[arg(long, value_name = "PATH", requires = "b_bin")]
    pub a_bin: Option<PathBuf>,
    /// (preset icache) Experiment binary, built with --features inline-unlock [default: build it]
    #[arg(long, value_name = "PATH", requires = "a_bin")]
    pub b_bin: Option<PathBuf>,
    /// (preset icache) Items per native run of the resident workload
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub items: u64,
    /// (preset icache) Items per native run of the front-end workload
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub frontend_items: u64,
    /// (preset icache) Items per cachegrind run of the front-end workload; the
    /// resident one runs 10 times as many (its items are cheap, and the
    /// process start-up, counted too, must not dominate)
    #[arg(long, value_name = "N", default_value_t = 2_000)]
    pub cg_items: u64,
    /// (preset icache) Cachegrind runs per side and workload (0: none)
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub cg_runs: usize,
    /// (preset icache) Work items in flight per batch
    #[arg(long, value_name = "B", default_value_t = 16)]
    pub batch: usize,
}

fn workspace_root() -> Option<PathBuf> {
    let dir = PathBuf::from(option_env!("CARGO_MANIFEST_DIR")?);
    let root = dir.parent()?.parent()?.to_path_buf();
    root.join("Cargo.toml").is_file().then_some(root)
}

const BUILD_HELP: &str = "build the two binaries and pass them:\n  \
    cargo build --release -p cmwq-cli && cp target/release/cmwq cmwq-outofline\n  \
    cargo build --release -p cmwq-cli --features inline-unlock && cp target/release/cmwq cmwq-inline\n  \
    cmwq compare --preset icache --a-bin cmwq-outofline --b-bin cmwq-inline";

/// Builds both variants in the workspace this binary came from.
fn build_both(progress: &mut dyn FnMut(&str)) -> Result<(PathBuf, PathBuf), String> {
    let root = workspace_root().ok_or_else(|| {
        format!("--a-bin/--b-bin not given and the cmwq workspace is not here to build them; {BUILD_HELP}")
    })?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"));
    let dest = target.join("icache");
    std::fs::create_dir_all(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let mut out = Vec::new();
    for (features, name) in [
        (None, "cmwq-outofline"),
        (Some("inline-unlock"), "cmwq-inline"),
    ] {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(&root)
            .args(["build", "--release", "-p", "cmwq-cli"])
            .env("CARGO_TARGET_DIR", &target);
        if let Some(f) = features {
            cmd.args(["--features", f]);
        }
        progress(&format!(
            "building {name}: cargo build --release -p cmwq-cli{}",
            features
                .map(|f| format!(" --features {f}"))
                .unwrap_or_default()
        ));
        let st = cmd
            .status()
            .map_err(|e| format!("cannot run cargo ({e}); {BUILD_HELP}"))?;
        if !st.success() {
            return Err(format!("cargo build of {name} failed ({st}); {BUILD_HELP}"));
        }
        let to = dest.join(name);
        copy_bin(&target.join("release").join("cmwq"), &to)?;
        out.push(to);
    }
    let b = out.pop().unwrap_or_default();
    let a = out.pop().unwrap_or_default();
    Ok((a, b))
}

fn copy_bin(from: &Path, to: &Path) -> Result<(), String> {
    // Remove first: the destination may be running (an earlier study).
    let _ = std::fs::remove_file(to);
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("copy {} to {}: {e}", from.display(), to.display()))
}

/// The options of `cmwq compare` that the icache study shares with the
/// other comparisons.
pub struct Shared {
    /// `--runs`.
    pub runs: usize,
    /// `--warmup`.
    pub warmup: usize,
    /// `--noise-floor`.
    pub noise_floor: f64,
    /// `--json`.
    pub json: bool,
    /// `--markdown`.
    pub markdown: bool,
}

/// Runs `cmwq compare --preset icache`.
pub fn run_preset(ic: &IcacheArgs, a: &Shared) -> Result<(), String> {
    let tty = std::io::stderr().is_terminal();
    let mut progress = |s: &str| {
        if tty {
            eprint!("\r\x1b[2K  {s}");
        }
    };
    let (a_bin, b_bin) = match (&ic.a_bin, &ic.b_bin) {
        (Some(x), Some(y)) => (x.clone(), y.clone()),
        _ => build_both(&mut |s| eprintln!("cmwq compare: {s}"))?,
    };
    for p in [&a_bin, &b_bin] {
        if !p.is_file() {
            return Err(format!("{}: no such binary; {BUILD_HELP}", p.display()));
        }
    }
    let cfg = StudyConfig {
        a_bin,
        b_bin,
        runs: a.runs,
        warmup: a.warmup,
        resident_items: ic.items,
        frontend_items: ic.frontend_items,
        cg_resident_items: ic.cg_items.saturating_mul(10),
        cg_frontend_items: ic.cg_items,
        cg_runs: ic.cg_runs,
        batch: ic.batch,
        geometry: Geometry::default(),
        stats: CompareConfig {
            noise_floor_pct: a.noise_floor,
            ..CompareConfig::default()
        },
        tmp: std::env::temp_dir().join(format!("cmwq-icache-{}", std::process::id())),
    };
    let res = study::run(&cfg, &mut progress);
    let _ = std::fs::remove_dir_all(&cfg.tmp);
    if tty {
        eprintln!();
    }
    let s = res?;
    if a.json {
        crate::json::print("cmwq-icache/1", &serde_json::json!({ "study": s }))?;
    } else {
        print!("{}", s.render(a.markdown));
    }
    Ok(())
}
