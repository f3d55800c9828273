//! `cmwq mix`, tiny sizes, every executor and every block kind: each job runs
//! exactly once, the split into CPU and blocking jobs is as asked, the
//! percentiles are ordered, the threads are counted, the report has every
//! row in schedule order. No timing asserts: counts and shapes only.

use cmwq_lab::mix::{self, BlockKind, MixConfig, MixReport};

fn tiny() -> MixConfig {
    let mut c = MixConfig::with_defaults(2);
    c.producers = 3;
    c.jobs = 60;
    c.rate = 20_000.0;
    c.block_every = 4;
    c.block_us = vec![300, 1500];
    c.rounds = 2;
    c
}

fn run(cfg: &MixConfig) -> MixReport {
    let mut calls = 0;
    let r = mix::run_mix(cfg, |_| calls += 1).expect("the mix runs");
    assert_eq!(
        calls,
        r.runs.len() + 1,
        "one progress call a run, one at the end"
    );
    r
}

fn check(cfg: &MixConfig, r: &MixReport) {
    let execs = mix::executors(&cfg.vs);
    let names: Vec<&str> = execs.iter().map(|e| e.name()).collect();
    let per_round = cfg.block_us.len() * names.len();
    assert_eq!(r.runs.len(), cfg.rounds * per_round);
    let n = (cfg.producers * cfg.jobs) as u64;
    let blocking = (0..cfg.producers)
        .flat_map(|p| (0..cfg.jobs).map(move |i| (p, i)))
        .filter(|&(p, i)| cfg.blocks(p, i))
        .count() as u64;
    for (k, run) in r.runs.iter().enumerate() {
        let what = format!("{} B={} round {}", run.executor, run.block_us, run.round);
        // Round-major, then block time, then executor.
        assert_eq!(run.round, k / per_round, "{what}");
        assert_eq!(
            run.block_us,
            cfg.block_us[k % per_round / names.len()],
            "{what}"
        );
        assert_eq!(run.executor, names[k % names.len()], "{what}");
        assert_eq!(run.jobs, n, "{what}");
        assert_eq!(run.ran_once, n, "{what}: every job ran exactly once");
        assert_eq!(run.runs, n, "{what}: no job ran twice");
        assert_eq!(run.block_jobs, blocking, "{what}");
        assert_eq!(run.cpu_jobs + run.block_jobs, n, "{what}");
        assert_eq!(run.block_fallbacks, 0, "{what}: {:?}", run.block_error);
        for p in [run.cpu_delay_ns, run.block_delay_ns] {
            let p = p.unwrap_or_else(|| panic!("{what}: both kinds of job ran"));
            assert!(
                p.p50 <= p.p90 && p.p90 <= p.p95 && p.p95 <= p.p99 && p.p99 <= p.max,
                "{what}: {p:?}"
            );
        }
        assert!(
            run.peak_threads >= 1,
            "{what}: {} threads",
            run.peak_threads
        );
        assert!(run.wall_s > 0.0 && run.cpu_us_per_job > 0.0, "{what}");
        assert!(run.busy_pct > 0.0, "{what}");
        // The workqueue's counters, for cmwq's executors only.
        let cmwq = run.executor.starts_with("cmwq");
        assert_eq!(run.cm_wakeup.is_some(), cmwq, "{what}");
        assert_eq!(run.cm_sampled.is_some(), cmwq, "{what}");
        assert_eq!(run.cm_partner_kicks.is_some(), cmwq, "{what}");
        assert_eq!(run.cm_takeovers.is_some(), cmwq, "{what}");
    }
    // One row per block time and executor, in schedule order.
    assert_eq!(r.rows.len(), per_round);
    for (k, row) in r.rows.iter().enumerate() {
        assert_eq!(row.block_us, cfg.block_us[k / names.len()]);
        assert_eq!(row.executor, names[k % names.len()]);
        assert_eq!(row.rounds, cfg.rounds);
        assert_eq!(row.annotated, row.executor == "cmwq_annotated");
        let p99 = &row.cpu_delay_p99_ns;
        assert!(p99.min <= p99.median && p99.median <= p99.max, "{row:?}");
        assert!(row.cpu_delay_p50_ns.median <= row.cpu_delay_max_ns.median);
        assert!(row.peak_threads.min >= 1.0, "{row:?}");
    }
}

/// One test: the runs count the process's threads, so no other test may
/// start or end threads meanwhile.
#[test]
fn the_mix_runs_every_job_once_and_counts_it() {
    every_executor_runs_every_job_once();
    a_mutex_and_a_pipe_block_too();
    no_blocking_job_leaves_no_blocking_delays();
}

fn every_executor_runs_every_job_once() {
    let mut cfg = tiny();
    cfg.vs = mix::peer_names().iter().map(|s| s.to_string()).collect();
    let r = run(&cfg);
    check(&cfg, &r);
    // The annotation reaches cmwq: its blocks woke other workers. (The
    // producers offer more work than two CPUs run, so items always wait when
    // a worker blocks.)
    let woken: u64 = r
        .runs
        .iter()
        .filter(|r| r.executor == "cmwq_annotated")
        .filter_map(|r| r.cm_wakeup)
        .sum();
    assert!(woken >= 1, "no cm_wakeup in any annotated run");
    // The fixed-size peers never have more threads than their workers.
    for run in r.runs.iter().filter(|r| r.executor == "crossbeam") {
        assert!(run.peak_threads <= cfg.workers as i64, "{run:?}");
    }
    // The text report names every executor under every block time.
    let t = mix::table(&r);
    for b in ["B = 300us", "B = 1.50ms"] {
        let block = t.split(b).nth(1).unwrap_or_else(|| panic!("{b} in\n{t}"));
        for n in mix::executor_names() {
            assert!(
                block.lines().any(|l| l.starts_with(n)),
                "{n} under {b}:\n{t}"
            );
        }
    }
    assert!(t.contains("2 rounds: every cell is the median"), "{t}");
    // The JSON document: the schema tag first, and every run in it.
    let doc = serde_json::to_string_pretty(&mix::to_json(&r)).unwrap();
    assert!(doc.starts_with("{\n  \"schema\": \"cmwq-mix/1\""), "{doc}");
    let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), r.runs.len());
    assert_eq!(v["summary"].as_array().unwrap().len(), r.rows.len());
    assert_eq!(v["config"]["block_kind"], "sleep");
    assert_eq!(v["runs"][0]["ran_once"], (cfg.producers * cfg.jobs) as u64);
    // The plot draws a bar per row.
    let svg = mix::svg::render(&r, &["note".into()]);
    assert_eq!(svg.matches("<rect x=").count(), r.rows.len() + 7);
}

fn a_mutex_and_a_pipe_block_too() {
    for kind in [BlockKind::Mutex, BlockKind::Pipe] {
        let mut cfg = tiny();
        cfg.block_kind = kind;
        cfg.rounds = 1;
        cfg.vs = vec!["crossbeam".into()];
        check(&cfg, &run(&cfg));
    }
}

fn no_blocking_job_leaves_no_blocking_delays() {
    let mut cfg = tiny();
    cfg.block_every = 0;
    cfg.block_us = vec![1000];
    cfg.rounds = 1;
    let r = run(&cfg);
    for run in &r.runs {
        assert_eq!(run.block_jobs, 0);
        assert_eq!(run.block_delay_ns, None);
        assert_eq!(run.ran_once, (cfg.producers * cfg.jobs) as u64);
        assert!(run.cpu_delay_ns.is_some());
    }
    let t = mix::table(&r);
    assert!(t.contains("no job blocks"), "{t}");
}
