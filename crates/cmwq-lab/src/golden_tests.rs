//! Golden outputs: fixed reports rendered to SVG, text, Markdown and JSON,
//! compared byte for byte with the files in `tests/golden/`. They pin the
//! output of the renderers while their code is moved or split: a change in
//! any byte fails here. After an intended change of the output, regenerate
//! with `UPDATE_GOLDEN=1 cargo test -p cmwq-lab golden` and review the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::ab::run::{self, RunRecord};
use crate::ab::stats::CompareConfig;
use crate::ab::table::RenderOptions;
use crate::bench::summary::{Percentiles, RowSummary, RunResult, cdf_points};
use crate::bench::{BenchConfig, Report};
use crate::icache::study::{self, Sizes, Study, StudyConfig, WorkloadReport, rows};
use crate::icache::workload::Workload;

fn check(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "{name} differs from {} at line {}:\nwant: {:?}\ngot:  {:?}",
            path.display(),
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line)
        );
    }
}

/// One run of the bench fixture: numbers that differ by executor, scope and round.
fn bench_run(executor: &str, scope: &str, round: usize, k: usize) -> RunResult {
    let f = (k + 1) as f64 * (1.0 + 0.07 * round as f64);
    let samples: Vec<u64> = (1..=500u64)
        .map(|i| 900 * (k as u64 + 1) + i * i * (round as u64 + 3))
        .collect();
    RunResult {
        executor: executor.into(),
        scope: scope.into(),
        round,
        completed: 2000,
        elapsed_s: 0.01 * f,
        items_per_sec: 200_000.0 / f,
        enqueue_ns: Percentiles::of_sorted(&samples[..400]),
        round_trip_ns: Percentiles::of_sorted(&samples),
        cpu_user_s: 0.002 * f,
        cpu_sys_s: 0.003 * f,
        cpu_s_per_million: 2.5 * f,
        vcsw_per_item: 0.5 + 0.1 * k as f64,
        ivcsw_per_item: 0.01,
        idle_cpu_ms: 0.1 * k as f64,
        idle_window_ms: 200.0,
        threads_left: 0,
        round_trip_cdf: cdf_points(&samples),
    }
}

fn bench_report(rounds: usize) -> Report {
    let mut config = BenchConfig::with_defaults(2);
    config.rounds = rounds;
    config.items = 1000;
    config.scopes = vec![cmwq::topology::Scope::Cpu, cmwq::topology::Scope::Cache];
    config.vs = vec!["rayon".into()];
    let rows = [
        ("cmwq", "cpu", true),
        ("cmwq", "cache", true),
        ("rayon", "-", false),
    ];
    let mut runs = Vec::new();
    for round in 0..rounds {
        for (k, (e, s, _)) in rows.iter().enumerate() {
            runs.push(bench_run(e, s, round, k));
        }
    }
    let summaries = rows
        .iter()
        .enumerate()
        .map(|(k, (_, _, scoped))| {
            let idx: Vec<usize> = (0..rounds).map(|r| r * rows.len() + k).collect();
            RowSummary::of(&runs, &idx, *scoped)
        })
        .collect();
    Report {
        config,
        cpus: vec![0, 1],
        runs,
        rows: summaries,
    }
}

#[test]
fn bench_svg_text_and_json_are_unchanged() {
    let notes = vec![
        "machine: fixture".to_string(),
        "commit: 0000000".to_string(),
    ];
    for rounds in [1, 3] {
        let r = bench_report(rounds);
        check(
            &format!("bench-{rounds}.svg"),
            &crate::bench::svg::render(&r, &notes),
        );
        check(&format!("bench-{rounds}.txt"), &crate::bench::table(&r));
        check(
            &format!("bench-{rounds}.json"),
            &serde_json::to_string_pretty(&crate::bench::to_json(&r)).unwrap(),
        );
    }
}

fn rec(side: usize, index: usize, m: &[(&str, f64)]) -> RunRecord {
    RunRecord {
        side,
        index,
        metrics: m.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        error: None,
    }
}

/// Three sides, five runs each (one failed), two metrics.
fn compare_records() -> Vec<RunRecord> {
    let mut out = Vec::new();
    for i in 0..5 {
        for side in 0..3 {
            let j = i as f64;
            let mut r = rec(
                side,
                i,
                &[
                    ("items/s", 1000.0 + 40.0 * side as f64 + 3.0 * j * j),
                    ("wall s", 2.0 - 0.1 * side as f64 + 0.01 * j),
                ],
            );
            if side == 2 && i == 3 {
                r.metrics.clear();
                r.error = Some("exit status 1".into());
            }
            out.push(r);
        }
    }
    out
}

#[test]
fn ab_tables_and_strip_plot_are_unchanged() {
    let records = compare_records();
    let tables: Vec<(usize, crate::ab::table::AbTable)> = (1..3)
        .map(|k| {
            let t = run::table_pair(&records, 0, k, CompareConfig::default(), "A vs B").unwrap();
            (k, t)
        })
        .collect();
    let mut text = String::new();
    let spread = RenderOptions {
        spread: true,
        n: true,
        ..RenderOptions::default()
    };
    let all = RenderOptions {
        better: true,
        ci: true,
        p: true,
        n: true,
        spread: true,
        ..RenderOptions::default()
    };
    for (_, t) in &tables {
        for o in [&RenderOptions::default(), &spread, &all] {
            text.push_str(&t.render_text(o));
            text.push_str(&t.render_markdown(o));
        }
    }
    check("ab-tables.txt", &text);
    check(
        "ab-tables.json",
        &serde_json::to_string_pretty(&tables).unwrap(),
    );
    let sides: Vec<String> = ["A: base", "B: one", "C: two"].map(String::from).to_vec();
    let metrics: Vec<String> = ["items/s", "wall s"].map(String::from).to_vec();
    let notes = vec!["machine: fixture".to_string()];
    let svg = crate::ab::plot::strip_plot(&crate::ab::plot::StripPlot {
        title: "fixture",
        notes: &notes,
        sides: &sides,
        records: &records,
        metrics: &metrics,
        tables: &tables,
    });
    check("strip.svg", &svg);
}

fn workload_report(w: Workload, thr: [f64; 2], misses: [f64; 2]) -> WorkloadReport {
    let mut runs = Vec::new();
    let mut cg = Vec::new();
    for i in 0..5 {
        let j = i as f64 * 0.003;
        for side in 0..2 {
            runs.push(rec(side, i, &[(rows::THROUGHPUT, thr[side] * (1.0 + j))]));
            let m = misses[side] * (1.0 + j);
            cg.push(rec(
                side,
                i,
                &[
                    (rows::SIM_I1_PER_ITEM_STEADY, m),
                    (rows::SIM_INSNS_PER_ITEM_STEADY, 1000.0 + side as f64),
                    (rows::SIM_MPKI_STEADY, m),
                ],
            ));
        }
    }
    study::tests::assemble(w.name(), w, 1000, runs, cg)
}

#[test]
fn icache_study_renders_are_unchanged() {
    let old: BTreeMap<String, u64> = [
        ("cmwq::pool::unlock_wake".to_string(), 413u64),
        ("f".to_string(), 100),
    ]
    .into();
    let new: BTreeMap<String, u64> = [("f".to_string(), 900u64)].into();
    let sizes = Sizes {
        diff: crate::icache::bloat::diff_maps(&old, &new, 1000, 1400),
        unlock_out_of_line: [true, false],
        unlock_bytes: [413, 0],
        frontend_code_bytes: 4096,
    };
    let workloads = vec![
        workload_report(Workload::Resident, [1000.0, 1010.0], [0.5, 0.5]),
        workload_report(Workload::Frontend, [500.0, 480.0], [30.0, 36.0]),
    ];
    let s = Study {
        config: StudyConfig {
            a_bin: "a".into(),
            b_bin: "b".into(),
            runs: 5,
            warmup: 1,
            resident_items: 100,
            frontend_items: 10,
            cg_resident_items: 20,
            cg_frontend_items: 2,
            cg_runs: 5,
            batch: 16,
            geometry: Default::default(),
            stats: CompareConfig::default(),
            tmp: "/tmp/x".into(),
        },
        conclusion: study::conclusion(&sizes, &workloads),
        sizes,
        counters_unsupported: Some("no perf".into()),
        cachegrind_unavailable: None,
        workloads,
    };
    check("icache.txt", &s.render(false));
    check("icache.md", &s.render(true));
    check("icache.json", &serde_json::to_string_pretty(&s).unwrap());
}
