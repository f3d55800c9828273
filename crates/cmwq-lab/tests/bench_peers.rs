//! Every peer, tiny sizes: each item completes exactly once and the report has all rows.
//! No timing asserts: this machine is noisy; counts and shapes only.

use cmwq_lab::bench::{self, BenchConfig, ExecutorFactory};

fn tiny(batch: usize) -> BenchConfig {
    let mut c = BenchConfig::with_defaults(2);
    c.threads = 2;
    c.items = 200;
    c.batch = batch;
    c.rounds = 2;
    c.workers = 2;
    c.vs = bench::peer_names().iter().map(|s| s.to_string()).collect();
    c
}

fn check(cfg: &BenchConfig) {
    let peers = bench::peers();
    let chosen: Vec<&dyn ExecutorFactory> = peers.iter().map(|p| p.as_ref()).collect();
    let mut calls = 0;
    let report = bench::run_bench(cfg, &chosen, |_| calls += 1).expect("bench runs");
    let names = bench::peer_names();
    assert_eq!(calls, names.len() * cfg.rounds + 1);
    assert_eq!(report.runs.len(), names.len() * cfg.rounds);
    // A B C A B C: round-major order.
    for (i, r) in report.runs.iter().enumerate() {
        assert_eq!(r.executor, names[i % names.len()]);
        assert_eq!(r.round, i / names.len());
        assert_eq!(r.scope, "-");
        assert_eq!(
            r.completed,
            (cfg.threads * cfg.items) as u64,
            "{} completions",
            r.executor
        );
        assert!(r.items_per_sec > 0.0);
        assert!(r.enqueue_ns.p50 <= r.enqueue_ns.p90 && r.enqueue_ns.p90 <= r.enqueue_ns.p95);
        assert!(r.enqueue_ns.p95 <= r.enqueue_ns.p99 && r.enqueue_ns.p99 <= r.enqueue_ns.max);
        assert!(r.round_trip_ns.p50 <= r.round_trip_ns.max);
        assert!(r.round_trip_ns.p50 >= r.enqueue_ns.p50 || cfg.batch > 1);
    }
    let rows: Vec<&str> = report.rows.iter().map(|r| r.executor.as_str()).collect();
    assert_eq!(rows, names);
    for row in &report.rows {
        assert_eq!(row.rounds, cfg.rounds);
        assert!(row.items_per_sec.min <= row.items_per_sec.median);
        assert!(row.items_per_sec.median <= row.items_per_sec.max);
    }
    let lines = bench::report_kernel_lines(&report);
    assert_eq!(
        lines[0],
        format!(
            "test_workqueue: running 2 threads, {} items/thread",
            cfg.items
        )
    );
    assert_eq!(lines.len(), 1 + names.len());
    let t = bench::table(&report);
    for n in &names {
        assert!(t.lines().any(|l| l.starts_with(n)), "table lacks {n}:\n{t}");
    }
    let svg = bench::svg::render(&report, &["machine: test".to_string()]);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // Readable at a glance: provenance, non-negative 1-2-5 ticks from 0, an
    // axis title on each of the four axes, a note instead of whiskers when
    // one round cannot show a spread.
    assert!(svg.contains("machine: test"));
    let ticks: Vec<&str> = svg
        .split(r#"class="tick""#)
        .skip(1)
        .map(|t| &t[t.find('>').unwrap() + 1..t.find('<').unwrap()])
        .collect();
    assert_eq!(ticks.first(), Some(&"0"), "{ticks:?}");
    assert!(ticks.iter().all(|t| !t.starts_with('-')), "{ticks:?}");
    assert_eq!(svg.matches(r#"class="axis-title""#).count(), 4);
    assert!(svg.contains("higher = better"));
    let one_round = cfg.rounds < 2;
    assert_eq!(svg.contains("Note: one round"), one_round);
    assert_eq!(
        svg.contains(r#"class="whisker""#),
        !one_round && !report.rows.is_empty()
    );
}

#[test]
fn every_peer_one_in_flight() {
    check(&tiny(1));
}

#[test]
fn every_peer_batched() {
    // 200 items in batches of 64: three full batches and one of 8.
    check(&tiny(64));
}

#[test]
fn more_producers_than_cpus() {
    let mut c = tiny(1);
    c.threads = 5;
    c.items = 50;
    c.rounds = 1;
    let peers = bench::peers();
    let chosen: Vec<&dyn ExecutorFactory> = peers.iter().map(|p| p.as_ref()).collect();
    let report = bench::run_bench(&c, &chosen, |_| {}).unwrap();
    assert!(report.runs.iter().all(|r| r.completed == 250));
}

#[test]
fn json_shape() {
    let mut c = tiny(1);
    c.rounds = 3;
    c.vs = vec!["crossbeam".into(), "limit".into()];
    let peers = bench::peers();
    let chosen: Vec<&dyn ExecutorFactory> = peers
        .iter()
        .filter(|p| c.vs.iter().any(|v| v == p.name()))
        .map(|p| p.as_ref())
        .collect();
    let report = bench::run_bench(&c, &chosen, |_| {}).unwrap();
    let j = bench::to_json(&report);
    assert_eq!(j["schema"], "cmwq-bench/1");
    assert_eq!(j["config"]["threads"], 2);
    assert_eq!(j["config"]["items"], 200);
    assert_eq!(j["config"]["batch"], 1);
    assert_eq!(j["config"]["rounds"], 3);
    assert_eq!(j["config"]["vs"], serde_json::json!(["crossbeam", "limit"]));
    assert_eq!(j["config"]["scopes"][0], "cpu");
    assert!(!j["cpus"].as_array().unwrap().is_empty());
    assert_eq!(j["kernel_lines"].as_array().unwrap().len(), 3);
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6);
    for r in runs {
        for k in [
            "executor",
            "scope",
            "round",
            "completed",
            "elapsed_s",
            "items_per_sec",
            "cpu_user_s",
            "cpu_sys_s",
            "cpu_s_per_million",
            "vcsw_per_item",
            "ivcsw_per_item",
            "idle_cpu_ms",
            "idle_window_ms",
            "threads_left",
        ] {
            assert!(!r[k].is_null(), "run lacks {k}: {r}");
        }
        for k in ["p50", "p90", "p95", "p99", "max"] {
            assert!(r["enqueue_ns"][k].is_u64(), "enqueue_ns.{k}");
            assert!(r["round_trip_ns"][k].is_u64(), "round_trip_ns.{k}");
        }
        assert!(r.get("round_trip_cdf").is_none());
    }
    let sum = j["summary"].as_array().unwrap();
    assert_eq!(sum.len(), 2);
    for s in sum {
        assert_eq!(s["rounds"], 3);
        assert_eq!(s["scoped"], false);
        for k in [
            "items_per_sec",
            "enqueue_p50_ns",
            "enqueue_p90_ns",
            "enqueue_p95_ns",
            "enqueue_p99_ns",
            "enqueue_max_ns",
            "round_trip_p50_ns",
            "round_trip_p95_ns",
            "round_trip_p99_ns",
            "cpu_s_per_million",
            "vcsw_per_item",
            "idle_cpu_ms",
            "threads_left",
        ] {
            for m in ["median", "min", "max"] {
                assert!(s[k][m].is_number(), "summary {k}.{m}: {s}");
            }
        }
    }
}

#[test]
fn nothing_selected_is_an_error() {
    let e = bench::run_bench(&tiny(1), &[], |_| {}).unwrap_err();
    assert!(e.contains("nothing to run"), "{e}");
    let mut c = tiny(1);
    c.threads = 0;
    let peers = bench::peers();
    let chosen: Vec<&dyn ExecutorFactory> = peers.iter().map(|p| p.as_ref()).collect();
    assert!(
        bench::run_bench(&c, &chosen, |_| {})
            .unwrap_err()
            .contains("--threads 0")
    );
}

/// An executor written outside the lab, through the public abstraction: runs each
/// item inline in `submit`, `times` times (2 = a buggy executor that runs an item twice).
struct Inline {
    times: usize,
}

struct InlineExec(usize);

struct InlineProducer {
    times: usize,
    done: std::sync::Arc<bench::Completion>,
}

impl bench::Producer for InlineProducer {
    fn submit(&mut self, _slot: usize) {
        for _ in 0..self.times {
            self.done.complete();
        }
    }
}

impl bench::Executor for InlineExec {
    fn producer<'a>(
        &'a self,
        _id: usize,
        _cpu: usize,
        _slots: usize,
        done: std::sync::Arc<bench::Completion>,
    ) -> Box<dyn bench::Producer + 'a> {
        Box::new(InlineProducer {
            times: self.0,
            done,
        })
    }
}

impl ExecutorFactory for Inline {
    fn name(&self) -> &'static str {
        "inline"
    }
    fn scoped(&self) -> bool {
        true
    }
    fn build(&self, ctx: &bench::BuildCtx<'_>) -> Result<Box<dyn bench::Executor>, String> {
        assert!(ctx.scope.is_some(), "scoped executors get a scope");
        Ok(Box::new(InlineExec(self.times)))
    }
}

#[test]
fn scoped_executor_runs_per_scope_and_doubles_are_counted() {
    let mut c = tiny(4);
    c.rounds = 2;
    c.scopes = bench::parse_scopes("system,cpu").unwrap();
    let ok = Inline { times: 1 };
    let double = Inline { times: 2 };
    let peers = bench::peers();
    let xbeam = peers.iter().find(|p| p.name() == "crossbeam").unwrap();
    let report = bench::run_bench(&c, &[&ok, xbeam.as_ref()], |_| {}).unwrap();
    let labels: Vec<(&str, &str)> = report
        .runs
        .iter()
        .map(|r| (r.executor.as_str(), r.scope.as_str()))
        .collect();
    let round = [("inline", "cpu"), ("inline", "system"), ("crossbeam", "-")];
    assert_eq!(labels, [round, round].concat());
    assert!(report.runs.iter().all(|r| r.completed == 400));
    // Kernel lines: the scoped executor's rows, labelled by scope.
    let lines = bench::report_kernel_lines(&report);
    assert_eq!(lines.len(), 3);
    assert!(lines[1].starts_with("test_workqueue:   cpu              "));
    assert!(lines[2].starts_with("test_workqueue:   system           "));
    // An executor that runs every item twice shows twice the completions.
    let report = bench::run_bench(&c, &[&double], |_| {}).unwrap();
    assert!(report.runs.iter().all(|r| r.completed == 800));
}

/// An executor that loses every 50th item: the run must fail with a message, not hang.
struct Lossy;

struct LossyProducer {
    n: usize,
    done: std::sync::Arc<bench::Completion>,
}

impl bench::Producer for LossyProducer {
    fn submit(&mut self, _slot: usize) {
        self.n += 1;
        if !self.n.is_multiple_of(50) {
            self.done.complete();
        }
    }
}

struct LossyExec;

impl bench::Executor for LossyExec {
    fn producer<'a>(
        &'a self,
        _id: usize,
        _cpu: usize,
        _slots: usize,
        done: std::sync::Arc<bench::Completion>,
    ) -> Box<dyn bench::Producer + 'a> {
        Box::new(LossyProducer { n: 0, done })
    }
}

impl ExecutorFactory for Lossy {
    fn name(&self) -> &'static str {
        "lossy"
    }
    fn build(&self, _: &bench::BuildCtx<'_>) -> Result<Box<dyn bench::Executor>, String> {
        Ok(Box::new(LossyExec))
    }
}

#[test]
fn a_lost_item_fails_the_run() {
    let mut c = tiny(1);
    c.stall_timeout = std::time::Duration::from_millis(300);
    let e = bench::run_bench(&c, &[&Lossy], |_| {}).unwrap_err();
    assert!(e.contains("lossy") && e.contains("stalled"), "{e}");
    assert!(e.contains("49 of 50 items completed"), "{e}");
}
