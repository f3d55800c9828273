//! The `icache` study: two `cmwq` binaries that differ only in how the pool
//! lock's release path is compiled, measured the way seed 001 measured the
//! inlined `_raw_spin_unlock()`.
//!
//! 1. Sizes: each binary's function symbols, diffed bloat-o-meter style
//!    ([`super::bloat`]), and whether `unlock_wake` exists out of line.
//! 2. Per workload ([`super::workload`]), `runs` interleaved native runs a
//!    side (A B A B after warm-ups) for throughput and process times. If
//!    `perf stat` can count hardware events ([`super::counters`]), each run
//!    is wrapped in it, even runs with `:u` events and odd runs with `:k`
//!    (the seed's split); otherwise those rows say "not supported" and why.
//! 3. Per workload, `cg_runs` interleaved cachegrind runs a side
//!    ([`super::cachegrind`]): instructions, simulated I1 misses and MPKI,
//!    split into misses in cmwq's own code and in everything else (the
//!    seed's "the bill is paid by unrelated code").
//! 4. A table per workload with `**`/`ns`/`flat` verdicts, and a conclusion
//!    written from the verdicts and deltas ([`conclusion`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::bloat::{self, SizeDiff};
use super::cachegrind::{self, Geometry};
use super::counters::{self, Domain};
use super::elf;
use super::workload::Workload;
use crate::ab::run::{RunRecord, run_once};
use crate::ab::stats::{CompareConfig, Direction, Verdict};
use crate::ab::table::{AbTable, Metric, RenderOptions, TableRow};

/// Substring of the out-of-line release path's symbol.
pub const UNLOCK_SYMBOL: &str = "unlock_wake";
/// Substring of the front-end workload's stage functions (demangled).
pub const STAGE_SYMBOL: &str = "icache::workload::stage";

/// Everything a study run needs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StudyConfig {
    /// Baseline binary (out-of-line unlock).
    pub a_bin: PathBuf,
    /// Experiment binary (inlined unlock).
    pub b_bin: PathBuf,
    /// Measured native runs per side and workload.
    pub runs: usize,
    /// Warm-up native runs per side and workload.
    pub warmup: usize,
    /// Items per native run of the resident workload.
    pub resident_items: u64,
    /// Items per native run of the front-end workload.
    pub frontend_items: u64,
    /// Items per cachegrind run of the resident workload.
    pub cg_resident_items: u64,
    /// Items per cachegrind run of the front-end workload.
    pub cg_frontend_items: u64,
    /// Cachegrind runs per side and workload (0: none).
    pub cg_runs: usize,
    /// Items in flight per batch.
    pub batch: usize,
    /// The simulated caches.
    pub geometry: Geometry,
    /// Statistics of the tables.
    pub stats: CompareConfig,
    /// Where temporary files go.
    pub tmp: PathBuf,
}

/// The sizes part of the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sizes {
    /// Function-by-function diff, A → B.
    pub diff: SizeDiff,
    /// Whether `unlock_wake` is a function symbol in A and in B.
    pub unlock_out_of_line: [bool; 2],
    /// Size of the out-of-line `unlock_wake` in A and B (0 if absent).
    pub unlock_bytes: [u64; 2],
    /// Bytes of front-end stage functions in A (the workload's footprint).
    pub frontend_code_bytes: u64,
}

/// One workload's measurements and table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WorkloadReport {
    /// `resident` or `frontend`.
    pub workload: Workload,
    /// Items per native run.
    pub items: u64,
    /// Every native run (side 0 = A).
    pub runs: Vec<RunRecord>,
    /// Every cachegrind run.
    pub cachegrind_runs: Vec<RunRecord>,
    /// The A/B table, every number of it.
    pub table: AbTable,
}

/// The whole study.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Study {
    /// What was run.
    pub config: StudyConfig,
    /// Sizes.
    pub sizes: Sizes,
    /// `None` if hardware counters were read, else why not.
    pub counters_unsupported: Option<String>,
    /// `None` if cachegrind ran, else why not.
    pub cachegrind_unavailable: Option<String>,
    /// One report per workload.
    pub workloads: Vec<WorkloadReport>,
    /// The generated conclusion.
    pub conclusion: String,
}

/// Names of the table rows (used by [`conclusion`] too).
pub mod rows {
    /// Native throughput.
    pub const THROUGHPUT: &str = "throughput items/s";
    /// Simulated instructions per item.
    pub const SIM_INSNS_PER_ITEM: &str = "instructions/item (sim, :u)";
    /// Simulated instructions.
    pub const SIM_INSNS: &str = "instructions (sim, :u)";
    /// Simulated I1 misses.
    pub const SIM_I1: &str = "I1 misses (sim, :u)";
    /// Simulated I1 misses per kilo-instruction.
    pub const SIM_MPKI: &str = "I1 MPKI (sim, :u)";
    /// Simulated I1 misses in cmwq's code.
    pub const SIM_I1_CMWQ: &str = "I1 misses in cmwq:: (sim)";
    /// Simulated I1 misses elsewhere.
    pub const SIM_I1_OTHER: &str = "I1 misses elsewhere (sim)";
    /// Simulated I1 misses per item with process start-up taken out: (misses
    /// of the run − misses of a one-batch run) / (items − one batch).
    pub const SIM_I1_PER_ITEM_STEADY: &str = "I1 misses/item (sim, steady)";
    /// Simulated instructions per item, start-up taken out likewise.
    pub const SIM_INSNS_PER_ITEM_STEADY: &str = "instructions/item (sim, steady)";
    /// Simulated I1 MPKI of the steady state (differences of both).
    pub const SIM_MPKI_STEADY: &str = "I1 MPKI (sim, steady)";
}

/// Items a workload really runs for `items` asked in batches of `batch`
/// (it rounds up to whole batches).
pub fn items_run(items: u64, batch: usize) -> u64 {
    let b = batch.max(1) as u64;
    items.div_ceil(b) * b
}

/// Adds the steady-state rows to a cachegrind run's metrics, given the
/// instructions and I1 misses of a one-batch run of the same binary (its
/// start-up: loading, the runtime, the first touch of every code path).
pub fn add_steady_metrics(m: &mut BTreeMap<String, f64>, items: u64, base: (f64, f64, u64)) {
    let (ir0, i10, items0) = base;
    let (Some(&ir), Some(&i1)) = (m.get(rows::SIM_INSNS), m.get(rows::SIM_I1)) else {
        return;
    };
    if items <= items0 {
        return;
    }
    let n = (items - items0) as f64;
    let (dir, di1) = ((ir - ir0).max(0.0), (i1 - i10).max(0.0));
    m.insert(rows::SIM_I1_PER_ITEM_STEADY.to_string(), di1 / n);
    m.insert(rows::SIM_INSNS_PER_ITEM_STEADY.to_string(), dir / n);
    if dir > 0.0 {
        m.insert(rows::SIM_MPKI_STEADY.to_string(), 1000.0 * di1 / dir);
    }
}

fn workload_argv(bin: &Path, w: Workload, items: u64, batch: usize) -> Vec<String> {
    vec![
        bin.display().to_string(),
        "icache-workload".into(),
        "--workload".into(),
        w.name().into(),
        "--items".into(),
        items.to_string(),
        "--batch".into(),
        batch.to_string(),
        "--json".into(),
    ]
}

/// Reads the two binaries' sizes.
pub fn sizes(a: &Path, b: &Path) -> Result<Sizes, String> {
    let (ea, eb) = (elf::read(a)?, elf::read(b)?);
    let unlock = |e: &elf::ElfSizes| {
        e.functions
            .iter()
            .filter(|f| f.name.contains(UNLOCK_SYMBOL))
            .map(|f| f.size)
            .sum::<u64>()
    };
    let frontend_code_bytes = ea
        .by_name()
        .iter()
        .filter(|(n, _)| n.contains(STAGE_SYMBOL))
        .map(|(_, s)| s)
        .sum();
    Ok(Sizes {
        diff: bloat::diff(&ea, &eb),
        unlock_out_of_line: [
            ea.has_function(UNLOCK_SYMBOL),
            eb.has_function(UNLOCK_SYMBOL),
        ],
        unlock_bytes: [unlock(&ea), unlock(&eb)],
        frontend_code_bytes,
    })
}

/// Metrics of one cachegrind profile of `items` items.
pub fn cachegrind_metrics(p: &cachegrind::Profile, items: u64) -> BTreeMap<String, f64> {
    let ir = p.total("Ir") as f64;
    let i1 = p.total("I1mr") as f64;
    let cmwq = p.sum_where("I1mr", |f| f.starts_with("cmwq::")) as f64;
    let mut m = BTreeMap::new();
    m.insert(rows::SIM_INSNS.to_string(), ir);
    m.insert(
        rows::SIM_INSNS_PER_ITEM.to_string(),
        ir / items.max(1) as f64,
    );
    m.insert(rows::SIM_I1.to_string(), i1);
    m.insert(rows::SIM_MPKI.to_string(), p.i1_mpki());
    m.insert(rows::SIM_I1_CMWQ.to_string(), cmwq);
    m.insert(rows::SIM_I1_OTHER.to_string(), i1 - cmwq);
    m
}

/// Adds per-run derived counter metrics (MPKI, IPC per domain).
fn derive_counter_metrics(m: &mut BTreeMap<String, f64>) {
    for d in ["u", "k"] {
        let ins = m.get(&format!("instructions :{d}")).copied();
        let cyc = m.get(&format!("cycles :{d}")).copied();
        let l1i = m.get(&format!("L1i misses :{d}")).copied();
        if let (Some(i), Some(c)) = (ins, cyc)
            && c > 0.0
        {
            m.insert(format!("IPC :{d}"), i / c);
        }
        if let (Some(i), Some(l)) = (ins, l1i)
            && i > 0.0
        {
            m.insert(format!("L1i MPKI :{d}"), l * 1000.0 / i);
        }
    }
}

/// Which way is better for a row of this study.
pub fn direction(name: &str) -> Direction {
    if name.starts_with("throughput") || name.starts_with("IPC") {
        Direction::HigherIsBetter
    } else if name.starts_with("instructions") || name.starts_with("cycles") {
        Direction::Neutral
    } else {
        Direction::LowerIsBetter
    }
}

/// Builds a workload's table from its runs: a row for every metric in
/// `order` measured in at least 2 successful runs a side; the hardware
/// counter rows as "not supported" with `counters_unsupported`'s reason, and
/// the simulated rows likewise with `cachegrind_unavailable`'s.
pub fn build_table(
    title: &str,
    runs: &[RunRecord],
    cg_runs: &[RunRecord],
    cfg: &CompareConfig,
    counters_unsupported: Option<&str>,
    cachegrind_unavailable: Option<&str>,
) -> Result<AbTable, String> {
    let mut t = AbTable::new(cfg.clone()).with_title(title);
    let values = |recs: &[RunRecord], side: usize, name: &str| -> Vec<f64> {
        recs.iter()
            .filter(|r| r.side == side && r.error.is_none())
            .filter_map(|r| r.metrics.get(name).copied())
            .collect()
    };
    let push = |t: &mut AbTable, recs: &[RunRecord], name: &str| -> Result<bool, String> {
        let (a, b) = (values(recs, 0, name), values(recs, 1, name));
        if a.len() < 2 || b.len() < 2 {
            return Ok(false);
        }
        t.push(Metric::new(name, direction(name)), &a, &b)
            .map_err(|e| format!("{name}: {e}"))?;
        Ok(true)
    };
    if !push(&mut t, runs, rows::THROUGHPUT)? {
        return Err(format!(
            "{title}: too few successful runs to compare throughput (need 2 a side)"
        ));
    }
    for name in ["wall s", "user s", "sys s"] {
        push(&mut t, runs, name)?;
    }
    let hw = [
        "instructions :u",
        "instructions :k",
        "L1i misses :u",
        "L1i misses :k",
        "L1i MPKI :u",
        "L1i MPKI :k",
        "cycles :u",
        "cycles :k",
        "IPC :u",
        "IPC :k",
    ];
    match counters_unsupported {
        None => {
            for name in hw {
                push(&mut t, runs, name)?;
            }
        }
        Some(why) => {
            for name in ["instructions (hw)", "L1i MPKI :u / :k (hw)", "IPC (hw)"] {
                t.push_not_supported(name, why);
            }
        }
    }
    let sim = [
        rows::SIM_I1_PER_ITEM_STEADY,
        rows::SIM_INSNS_PER_ITEM_STEADY,
        rows::SIM_MPKI_STEADY,
        rows::SIM_INSNS,
        rows::SIM_INSNS_PER_ITEM,
        rows::SIM_I1,
        rows::SIM_MPKI,
        rows::SIM_I1_CMWQ,
        rows::SIM_I1_OTHER,
    ];
    match cachegrind_unavailable {
        None => {
            for name in sim {
                if !push(&mut t, cg_runs, name)? {
                    t.push_not_supported(name, "fewer than 2 cachegrind runs a side");
                }
            }
        }
        Some(why) => t.push_not_supported("I1 MPKI (sim)", why),
    }
    Ok(t)
}

fn row<'a>(t: &'a AbTable, name: &str) -> Option<&'a crate::ab::table::AbRow> {
    t.compared().find(|r| r.metric == name)
}

fn describe(r: &crate::ab::table::AbRow) -> String {
    let d = r
        .stats
        .delta_pct
        .map_or("n/a".to_string(), |d| format!("{d:+.2}%"));
    format!("{d} ({})", r.stats.verdict.symbol())
}

/// Whether a row shows B significantly worse (a cost) or better.
fn cost(r: Option<&crate::ab::table::AbRow>) -> Option<bool> {
    let r = r?;
    (r.stats.verdict == Verdict::Significant).then(|| r.stats.is_regression())
}

/// The conclusion paragraph, written from the numbers: the size change, then
/// per workload whether the i-cache cost shows (simulated MPKI, or hardware
/// `:u`/`:k` MPKI) and whether throughput moved beyond noise, then the
/// verdict on the default.
pub fn conclusion(sizes: &Sizes, workloads: &[WorkloadReport]) -> String {
    let d = &sizes.diff;
    let mut s = format!(
        "Inlining the release path changes the function total by {:+} bytes ({:+.3}%; text sections {:+.3}%): \
         {} functions grow and {} shrink, and the out-of-line unlock_wake ({} bytes) is {}.",
        d.net(),
        d.total_chg_pct(),
        d.text_chg_pct(),
        d.grown,
        d.shrunk,
        sizes.unlock_bytes[0],
        match sizes.unlock_out_of_line {
            [true, false] => "gone from the inlined build",
            [true, true] => "still present in the inlined build (the switch did not take)",
            [false, _] => "absent even from the baseline (is A really the default build?)",
        }
    );
    let mut any_cost = false;
    let mut any_gain = false;
    let mut surfaced = Vec::new();
    let mut helped = Vec::new();
    for w in workloads {
        let t = &w.table;
        let name = w.workload.name();
        // The verdict on i-cache cost comes from misses per item, not MPKI:
        // fewer instructions alone raise MPKI without a single extra miss.
        // Steady state (start-up taken out) where cachegrind ran; hardware
        // counters count the same number of items a side, so their raw
        // misses compare directly.
        let misses = row(t, rows::SIM_I1_PER_ITEM_STEADY)
            .map(|r| (r, "simulated I1 misses/item, steady state"))
            .or_else(|| row(t, "L1i misses :u").map(|r| (r, "L1i misses :u (hw)")))
            .or_else(|| row(t, "L1i misses :k").map(|r| (r, "L1i misses :k (hw)")));
        let mpki = row(t, rows::SIM_MPKI_STEADY)
            .or_else(|| row(t, rows::SIM_MPKI))
            .or_else(|| row(t, "L1i MPKI :u"))
            .or_else(|| row(t, "L1i MPKI :k"));
        let insns = row(t, rows::SIM_INSNS_PER_ITEM_STEADY)
            .or_else(|| row(t, rows::SIM_INSNS_PER_ITEM))
            .or_else(|| row(t, "instructions :u"));
        let thr = row(t, rows::THROUGHPUT);
        s.push_str(&format!("\n\n{name}: "));
        match misses {
            Some((m, what)) => {
                let c = cost(Some(m));
                s.push_str(&format!(
                    "{what} {:.3} -> {:.3}, {}: {}",
                    m.stats.baseline.median,
                    m.stats.experiment.median,
                    describe(m),
                    match c {
                        Some(true) => "the i-cache cost is there, beyond noise",
                        Some(false) => "fewer i-cache misses with the inlined unlock",
                        None => "no i-cache cost beyond noise",
                    }
                ));
                any_cost |= c == Some(true);
                any_gain |= c == Some(false);
                if let Some(mp) = mpki {
                    s.push_str(&format!(
                        "; {} {:.3} -> {:.3}, {}",
                        mp.metric,
                        mp.stats.baseline.median,
                        mp.stats.experiment.median,
                        describe(mp)
                    ));
                }
            }
            None => s.push_str("I1 misses not measured (no counters, no cachegrind)"),
        }
        if let Some(i) = insns {
            s.push_str(&format!("; instructions {}", describe(i)));
        }
        if let Some(cm) = row(t, rows::SIM_I1_CMWQ) {
            s.push_str(&format!("; misses in cmwq's own code {}", describe(cm)));
        }
        if let Some(ot) = row(t, rows::SIM_I1_OTHER) {
            s.push_str(&format!(", elsewhere {}", describe(ot)));
        }
        match thr {
            Some(r) => {
                s.push_str(&format!(". Throughput {}", describe(r)));
                match cost(Some(r)) {
                    Some(true) => {
                        s.push_str(": the cost surfaces as lost throughput.");
                        surfaced.push(name);
                    }
                    Some(false) => {
                        s.push_str(": inlining is faster here.");
                        helped.push(name);
                    }
                    None => s.push_str(": it does not surface as throughput at this run count."),
                }
            }
            None => s.push('.'),
        }
    }
    s.push_str("\n\nSo: ");
    s.push_str(match (any_cost, any_gain) {
        (true, false) => "inlining has an i-cache cost",
        (true, true) => {
            "the i-cache effect of inlining is mixed (more misses per item in one workload, \
             fewer in another): code layout, not the inlined bytes, decides"
        }
        (false, true) => "inlining had fewer i-cache misses per item, beyond noise",
        (false, false) => "no i-cache cost of inlining was measured beyond noise",
    });
    s.push_str(&match (surfaced.is_empty(), helped.is_empty()) {
        (true, true) => {
            "; throughput did not move beyond noise in either workload, so nothing speaks for \
             inlining and the out-of-line default stands."
                .to_string()
        }
        (false, true) => format!(
            "; it costs throughput in {}, and it helped nowhere: keep the release path out of line.",
            surfaced.join(", ")
        ),
        (true, false) => format!(
            "; yet inlining was faster in {}: the default deserves a second look with more runs.",
            helped.join(", ")
        ),
        (false, false) => format!(
            "; it cost throughput in {} and gained in {}: mixed, keep the out-of-line default.",
            surfaced.join(", "),
            helped.join(", ")
        ),
    });
    s
}

/// Runs the whole study; `progress` gets one line per step.
pub fn run(cfg: &StudyConfig, progress: &mut dyn FnMut(&str)) -> Result<Study, String> {
    if cfg.runs < 2 {
        return Err(format!("--runs {}: need at least 2 runs a side", cfg.runs));
    }
    for p in [&cfg.a_bin, &cfg.b_bin] {
        if !p.is_file() {
            return Err(format!("{}: no such binary", p.display()));
        }
    }
    std::fs::create_dir_all(&cfg.tmp).map_err(|e| format!("{}: {e}", cfg.tmp.display()))?;
    progress("sizes: reading symbol tables");
    let sizes = sizes(&cfg.a_bin, &cfg.b_bin)?;
    let counters_unsupported = counters::probe(&cfg.tmp).err();
    let cachegrind_unavailable = if cfg.cg_runs == 0 {
        Some("cachegrind runs switched off (--cg-runs 0)".to_string())
    } else {
        cachegrind::unavailable()
    };
    let mut workloads = Vec::new();
    for w in Workload::ALL {
        let (items, cg_items) = match w {
            Workload::Resident => (cfg.resident_items, cfg.cg_resident_items),
            Workload::Frontend => (cfg.frontend_items, cfg.cg_frontend_items),
        };
        let runs = native_runs(cfg, w, items, counters_unsupported.is_none(), progress)?;
        let cg_runs = if cachegrind_unavailable.is_none() {
            let startup = cachegrind_startup(cfg, w, progress);
            cachegrind_runs(cfg, w, cg_items, &startup, progress)
        } else {
            Vec::new()
        };
        let title = format!(
            "workload {}: {items} items a run (cachegrind: {}), batch {}; A = out-of-line unlock, B = inlined",
            w.name(),
            cg_items,
            cfg.batch
        );
        let table = build_table(
            &title,
            &runs,
            &cg_runs,
            &cfg.stats,
            counters_unsupported.as_deref(),
            cachegrind_unavailable.as_deref(),
        )?;
        workloads.push(WorkloadReport {
            workload: w,
            items,
            runs,
            cachegrind_runs: cg_runs,
            table,
        });
    }
    let conclusion = conclusion(&sizes, &workloads);
    Ok(Study {
        config: cfg.clone(),
        sizes,
        counters_unsupported,
        cachegrind_unavailable,
        workloads,
        conclusion,
    })
}

/// The two binaries, side 0 (A) first.
fn bins(cfg: &StudyConfig) -> [&Path; 2] {
    [&cfg.a_bin, &cfg.b_bin]
}

/// The native runs of workload `w`, `items` each, A B A B ... after the
/// warm-ups (a failed warm-up is the study's error); `with_counters`: under
/// `perf stat`, user and kernel counters on alternate rounds.
fn native_runs(
    cfg: &StudyConfig,
    w: Workload,
    items: u64,
    with_counters: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<RunRecord>, String> {
    let mut runs = Vec::new();
    for i in 0..cfg.warmup + cfg.runs {
        for (side, bin) in bins(cfg).into_iter().enumerate() {
            let domain = if i % 2 == 0 {
                Domain::User
            } else {
                Domain::Kernel
            };
            let csv = cfg.tmp.join(format!("perf-{side}.csv"));
            let mut argv = workload_argv(bin, w, items, cfg.batch);
            if with_counters {
                let mut wrapped = counters::perf_args(domain, &csv);
                wrapped.extend(argv);
                argv = wrapped;
            }
            progress(&format!(
                "{}: run {}/{} side {}",
                w.name(),
                i + 1,
                cfg.warmup + cfg.runs,
                ["A", "B"][side]
            ));
            let res = run_once(&argv).and_then(|mut m| {
                if with_counters {
                    let text = std::fs::read_to_string(&csv).map_err(|e| e.to_string())?;
                    m.extend(counters::parse_csv(&text, domain)?);
                    derive_counter_metrics(&mut m);
                }
                Ok(m)
            });
            if i < cfg.warmup {
                res.map_err(|e| format!("warm-up run of {} failed: {e}", bin.display()))?;
                continue;
            }
            let (metrics, error) = match res {
                Ok(m) => (m, None),
                Err(e) => (BTreeMap::new(), Some(e)),
            };
            runs.push(RunRecord {
                side,
                index: i - cfg.warmup,
                metrics,
                error,
            });
        }
    }
    Ok(runs)
}

/// One one-batch cachegrind run a side: its counts (instructions, I1
/// misses, items) are start-up, taken out of every run's steady-state rows.
fn cachegrind_startup(
    cfg: &StudyConfig,
    w: Workload,
    progress: &mut dyn FnMut(&str),
) -> [Option<(f64, f64, u64)>; 2] {
    let mut startup = [None, None];
    for (side, bin) in bins(cfg).into_iter().enumerate() {
        progress(&format!(
            "{}: cachegrind start-up run side {}",
            w.name(),
            ["A", "B"][side]
        ));
        let items0 = items_run(cfg.batch as u64, cfg.batch);
        let argv = workload_argv(bin, w, items0, cfg.batch);
        let out = cfg.tmp.join(format!("cachegrind.out.{side}"));
        if let Ok((p, _)) = cachegrind::run(&argv, &cfg.geometry, &out) {
            startup[side] = Some((p.total("Ir") as f64, p.total("I1mr") as f64, items0));
        }
    }
    startup
}

/// `cfg.cg_runs` cachegrind runs a side of workload `w`, `cg_items` each.
fn cachegrind_runs(
    cfg: &StudyConfig,
    w: Workload,
    cg_items: u64,
    startup: &[Option<(f64, f64, u64)>; 2],
    progress: &mut dyn FnMut(&str),
) -> Vec<RunRecord> {
    let cg_items_run = items_run(cg_items, cfg.batch);
    let mut cg_runs = Vec::new();
    for i in 0..cfg.cg_runs {
        for (side, bin) in bins(cfg).into_iter().enumerate() {
            progress(&format!(
                "{}: cachegrind {}/{} side {}",
                w.name(),
                i + 1,
                cfg.cg_runs,
                ["A", "B"][side]
            ));
            let argv = workload_argv(bin, w, cg_items, cfg.batch);
            let out = cfg.tmp.join(format!("cachegrind.out.{side}"));
            let (metrics, error) = match cachegrind::run(&argv, &cfg.geometry, &out) {
                Ok((p, stdout)) => cachegrind_record(&p, &stdout, cg_items_run, startup[side]),
                Err(e) => (BTreeMap::new(), Some(e)),
            };
            cg_runs.push(RunRecord {
                side,
                index: i,
                metrics,
                error,
            });
        }
    }
    cg_runs
}

/// The metrics of one cachegrind run of `items` items (steady-state rows
/// where the side's start-up run counted), and the workload's own metrics
/// (`... under cachegrind`); an error if it printed none.
fn cachegrind_record(
    p: &cachegrind::Profile,
    stdout: &str,
    items: u64,
    startup: Option<(f64, f64, u64)>,
) -> (BTreeMap<String, f64>, Option<String>) {
    let n = crate::ab::run::extract_metrics(stdout);
    let mut m = cachegrind_metrics(p, items);
    if let Some(base) = startup {
        add_steady_metrics(&mut m, items, base);
    }
    if n.is_empty() {
        return (m, Some("the workload printed no JSON".to_string()));
    }
    m.extend(
        n.into_iter()
            .map(|(k, v)| (format!("{k} under cachegrind"), v)),
    );
    (m, None)
}

impl Study {
    /// The report as text: sizes, one table per workload, the conclusion.
    /// `markdown` renders the tables as Markdown.
    pub fn render(&self, markdown: bool) -> String {
        let s = &self.sizes;
        let mut out = String::new();
        out.push_str(&format!(
            "icache study, the pool lock's unlock path inlined or not: A = {} (out of line), B = {} (inline-unlock)\n\n",
            self.config.a_bin.display(),
            self.config.b_bin.display()
        ));
        out.push_str("Code size, A -> B (bloat-o-meter style, function symbols):\n");
        out.push_str(&s.diff.render(12));
        out.push_str(&format!(
            "unlock_wake out of line: A {} ({} bytes), B {}; front-end workload code: {} bytes in stage functions\n",
            yes(s.unlock_out_of_line[0]),
            s.unlock_bytes[0],
            yes(s.unlock_out_of_line[1]),
            s.frontend_code_bytes
        ));
        if let Some(why) = &self.counters_unsupported {
            out.push_str(&format!("Hardware counters: not supported ({why}); I1 figures below are simulated by cachegrind.\n"));
        }
        if self.cachegrind_unavailable.is_none() {
            let g = &self.config.geometry;
            out.push_str(&format!(
                "cachegrind: I1 {} B {}-way {} B lines, {} runs a side (user space only, simulated).\n",
                g.i1.size, g.i1.assoc, g.i1.line, self.config.cg_runs
            ));
        }
        let opts = RenderOptions {
            n: true,
            ..RenderOptions::default()
        };
        for w in &self.workloads {
            out.push('\n');
            out.push_str(&if markdown {
                w.table.render_markdown(&opts)
            } else {
                w.table.render_text(&opts)
            });
            let failed = w
                .runs
                .iter()
                .chain(&w.cachegrind_runs)
                .filter_map(|r| r.error.as_ref())
                .count();
            if failed > 0 {
                out.push_str(&format!("({failed} failed runs left out; see --json)\n"));
            }
        }
        out.push_str("\nConclusion\n\n");
        out.push_str(&self.conclusion);
        out.push('\n');
        out
    }

    /// Every row of every table that was not measured, as `(workload, metric, reason)`.
    pub fn not_supported(&self) -> Vec<(&str, &str, &str)> {
        let mut v = Vec::new();
        for w in &self.workloads {
            for r in &w.table.rows {
                if let TableRow::NotSupported { metric, reason } = r {
                    v.push((w.workload.name(), metric.as_str(), reason.as_str()));
                }
            }
        }
        v
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn rec(side: usize, m: &[(&str, f64)]) -> RunRecord {
        RunRecord {
            side,
            index: 0,
            metrics: m.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            error: None,
        }
    }

    /// A workload's report; `misses` are I1 misses per item (steady), and
    /// MPKI follows from them and `insns` instructions per item.
    fn report_full(
        w: Workload,
        thr: [f64; 2],
        misses: [f64; 2],
        insns: [f64; 2],
    ) -> WorkloadReport {
        let mut runs = Vec::new();
        let mut cg = Vec::new();
        for i in 0..5 {
            let j = i as f64 * 0.0001;
            for side in 0..2 {
                runs.push(rec(side, &[(rows::THROUGHPUT, thr[side] * (1.0 + j))]));
                let m = misses[side] * (1.0 + j);
                cg.push(rec(
                    side,
                    &[
                        (rows::SIM_I1_PER_ITEM_STEADY, m),
                        (rows::SIM_INSNS_PER_ITEM_STEADY, insns[side]),
                        (rows::SIM_MPKI_STEADY, 1000.0 * m / insns[side]),
                    ],
                ));
            }
        }
        assemble("t", w, 1, runs, cg)
    }

    /// A workload's report from its runs, as `run` makes it (counters not
    /// supported, cachegrind there).
    pub(crate) fn assemble(
        title: &str,
        w: Workload,
        items: u64,
        runs: Vec<RunRecord>,
        cg: Vec<RunRecord>,
    ) -> WorkloadReport {
        let table = build_table(
            title,
            &runs,
            &cg,
            &CompareConfig::default(),
            Some("perf stat: cycles: <not supported>"),
            None,
        )
        .unwrap();
        WorkloadReport {
            workload: w,
            items,
            runs,
            cachegrind_runs: cg,
            table,
        }
    }

    fn report(w: Workload, thr: [f64; 2], misses: [f64; 2]) -> WorkloadReport {
        report_full(w, thr, misses, [1000.0, 1000.0])
    }

    fn sizes() -> Sizes {
        let old = [
            ("cmwq::pool::unlock_wake".to_string(), 413u64),
            ("f".to_string(), 100),
        ];
        let new = [("f".to_string(), 900u64)];
        Sizes {
            diff: bloat::diff_maps(&old.into(), &new.into(), 1000, 1400),
            unlock_out_of_line: [true, false],
            unlock_bytes: [413, 0],
            frontend_code_bytes: 0,
        }
    }

    #[test]
    fn conclusion_follows_the_numbers() {
        let quiet = report(Workload::Resident, [100.0, 100.0], [1.0, 1.0]);
        let costly = report(Workload::Frontend, [100.0, 90.0], [10.0, 12.0]);
        let c = conclusion(&sizes(), &[quiet.clone(), costly]);
        assert!(c.contains("by +387 bytes"), "{c}");
        assert!(c.contains("gone from the inlined build"), "{c}");
        assert!(
            c.contains(
                "resident: simulated I1 misses/item, steady state 1.000 -> 1.000, +0.00% (flat): no i-cache cost"
            ),
            "{c}"
        );
        assert!(
            c.contains(
                "frontend: simulated I1 misses/item, steady state 10.002 -> 12.002, +20.00% (**): the i-cache cost is there"
            ),
            "{c}"
        );
        assert!(c.contains("I1 MPKI (sim, steady) 10.002 -> 12.002"), "{c}");
        assert!(
            c.contains("Throughput -10.00% (**): the cost surfaces"),
            "{c}"
        );
        assert!(c.contains("it costs throughput in frontend"), "{c}");
        let c = conclusion(&sizes(), std::slice::from_ref(&quiet));
        assert!(
            c.contains("no i-cache cost of inlining was measured"),
            "{c}"
        );
        assert!(c.contains("the out-of-line default stands"), "{c}");
        let faster = report(Workload::Frontend, [100.0, 110.0], [10.0, 10.0]);
        let c = conclusion(&sizes(), &[faster]);
        assert!(c.contains("inlining was faster in frontend"), "{c}");
        // Fewer instructions with the same misses raise MPKI: not a cost.
        let fewer_insns = report_full(
            Workload::Resident,
            [100.0, 100.0],
            [1.0, 1.0],
            [1000.0, 940.0],
        );
        assert!(
            fewer_insns
                .table
                .compared()
                .any(|r| r.metric == rows::SIM_MPKI_STEADY && r.stats.is_regression())
        );
        let c = conclusion(&sizes(), &[fewer_insns]);
        assert!(
            c.contains("no i-cache cost of inlining was measured"),
            "{c}"
        );
        // More misses in one workload, fewer in the other: mixed.
        let more = report(Workload::Resident, [100.0, 100.0], [1.0, 1.2]);
        let less = report(Workload::Frontend, [100.0, 100.0], [10.0, 9.0]);
        let c = conclusion(&sizes(), &[more, less]);
        assert!(c.contains("is mixed"), "{c}");
    }

    #[test]
    fn steady_rows_take_start_up_out() {
        let mut m = BTreeMap::new();
        // Start-up: 1M instructions, 8000 misses; each item: 100 and 2.
        m.insert(rows::SIM_INSNS.to_string(), 1_000_000.0 + 100.0 * 516.0);
        m.insert(rows::SIM_I1.to_string(), 8_000.0 + 2.0 * 516.0);
        // A 16-item run: start-up plus 16 items' worth.
        add_steady_metrics(&mut m, 516, (1_000_000.0 + 1_600.0, 8_032.0, 16));
        assert_eq!(m[rows::SIM_I1_PER_ITEM_STEADY], 2.0);
        assert_eq!(m[rows::SIM_INSNS_PER_ITEM_STEADY], 100.0);
        assert_eq!(m[rows::SIM_MPKI_STEADY], 20.0);
        assert_eq!(items_run(20, 16), 32);
    }

    #[test]
    fn table_marks_what_was_not_measured() {
        let r = report(Workload::Frontend, [100.0, 90.0], [10.0, 12.0]);
        let names: Vec<&str> = r.table.rows.iter().map(|x| x.metric()).collect();
        assert_eq!(
            names,
            [
                rows::THROUGHPUT,
                "instructions (hw)",
                "L1i MPKI :u / :k (hw)",
                "IPC (hw)",
                rows::SIM_I1_PER_ITEM_STEADY,
                rows::SIM_INSNS_PER_ITEM_STEADY,
                rows::SIM_MPKI_STEADY,
                rows::SIM_INSNS,
                rows::SIM_INSNS_PER_ITEM,
                rows::SIM_I1,
                rows::SIM_MPKI,
                rows::SIM_I1_CMWQ,
                rows::SIM_I1_OTHER
            ]
        );
        let text = r.table.render_text(&RenderOptions::default());
        assert!(text.contains("IPC (hw)"), "{text}");
        assert!(
            text.contains("not supported (perf stat: cycles: <not supported>)"),
            "{text}"
        );
        assert!(
            text.contains("not supported (fewer than 2 cachegrind runs a side)"),
            "{text}"
        );
        let e = build_table("x", &[], &[], &CompareConfig::default(), None, None).unwrap_err();
        assert!(e.contains("too few"), "{e}");
    }

    #[test]
    fn counter_metrics_are_derived_per_domain() {
        let mut m: BTreeMap<String, f64> = [
            ("instructions :k".to_string(), 2000.0),
            ("cycles :k".to_string(), 1000.0),
            ("L1i misses :k".to_string(), 30.0),
        ]
        .into();
        derive_counter_metrics(&mut m);
        assert_eq!(m["IPC :k"], 2.0);
        assert_eq!(m["L1i MPKI :k"], 15.0);
        assert!(!m.contains_key("IPC :u"));
        assert_eq!(direction("IPC :k"), Direction::HigherIsBetter);
        assert_eq!(direction(rows::SIM_MPKI), Direction::LowerIsBetter);
        assert_eq!(direction(rows::SIM_INSNS), Direction::Neutral);
    }

    #[test]
    fn cachegrind_metrics_split_cmwq_from_the_rest() {
        let text = "events: Ir I1mr\nfn=cmwq::pool::Pool::insert\n1 600 4\nfn=cmwq_lab::icache::workload::stage\n2 400 6\nsummary: 1000 10\n";
        let p = cachegrind::parse(text).unwrap();
        let m = cachegrind_metrics(&p, 10);
        assert_eq!(m[rows::SIM_INSNS_PER_ITEM], 100.0);
        assert_eq!(m[rows::SIM_MPKI], 10.0);
        assert_eq!(m[rows::SIM_I1_CMWQ], 4.0);
        assert_eq!(m[rows::SIM_I1_OTHER], 6.0);
    }
}
