//! `scripts/cpu-split.py`: each sample lands in the part its thread and
//! symbol say, the main thread is left out, the floor's arithmetic holds,
//! and bad inputs are errors that name the value.

mod common;

use std::process::Output;

use common::{scratch, stderr};

fn run(args: &[&str]) -> Output {
    common::script("cpu-split.py", args)
}

/// `perf report -t '|' --sort comm,dso,sym -n` lines: percent, samples,
/// thread, object, symbol.
fn report(lines: &[(u64, &str, &str, &str)]) -> String {
    let mut s = String::from("# header lines are skipped\n#\n");
    for (n, comm, dso, sym) in lines {
        s.push_str(&format!(" 1.00%  | {n:<10} |{comm:<12} |{dso:<20}|{sym}\n"));
    }
    s
}

fn f(v: &serde_json::Value, path: &[&str]) -> f64 {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number: {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn samples_land_in_their_parts_and_the_floor_follows() {
    let d = scratch("split-parts");
    let cmwq = d.join("cmwq.txt");
    let limit = d.join("limit.txt");
    std::fs::write(
        &cmwq,
        report(&[
            (
                100,
                "wq_bench/0",
                "cmwq",
                "[.] cmwq::engine::workqueue::queue::<impl cmwq::engine::workqueue::WqInner>::queue_counted",
            ),
            (100, "wq_bench/3", "[vdso]", "[.] __vdso_clock_gettime"),
            (100, "cmwq/u1:0", "[kernel.kallsyms]", "[k] finish_task_switch.isra.0"),
            (60, "cmwq/u1:0", "cmwq", "[.] cmwq::engine::pool::worker::worker_thread"),
            (40, "cmwq-watchdog", "cmwq", "[.] <F as cmwq::engine::work::Job>::run"),
            // The main thread sorts the latency samples after the timed
            // window: left out, whatever it runs.
            (
                500,
                "cmwq",
                "cmwq",
                "[.] core::slice::sort::unstable::quicksort::quicksort",
            ),
        ]),
    )
    .unwrap();
    std::fs::write(
        &limit,
        report(&[
            // `limit`'s worker loop is inlined into its thread's entry: its
            // own code on a worker, the harness on a producer.
            (
                50,
                "limit/0",
                "cmwq",
                "[.] std::sys::backtrace::__rust_begin_short_backtrace",
            ),
            (
                20,
                "wq_bench/1",
                "cmwq",
                "[.] std::sys::backtrace::__rust_begin_short_backtrace",
            ),
            (30, "wq_bench/1", "libc.so.6", "[.] _int_malloc"),
            (20, "limit/1", "cmwq", "[.] __rustc::__rdl_dealloc"),
            (
                80,
                "wq_bench/1",
                "cmwq",
                "[.] cmwq_lab::bench::runner::producer_body",
            ),
            (
                100,
                "limit/0",
                "[kernel.kallsyms]",
                "[k] _raw_spin_unlock_irqrestore",
            ),
        ]),
    )
    .unwrap();
    let o = run(&[
        "--report-cmwq",
        cmwq.to_str().unwrap(),
        "--report-peer",
        limit.to_str().unwrap(),
        "--native-cmwq",
        "400",
        "--native-peer",
        "300",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");

    // cmwq: 400 samples on the bench's threads, 1 ns each.
    assert!(close(f(&v, &["samples", "cmwq"]), 400.0), "{v}");
    assert!(close(
        f(&v, &["samples", "cmwq_main_thread_left_out"]),
        500.0
    ));
    assert!(
        close(f(&v, &["parts_ns", "cmwq", "own code"]), 200.0),
        "{v}"
    );
    assert!(close(f(&v, &["parts_ns", "cmwq", "harness"]), 100.0), "{v}");
    assert!(close(f(&v, &["parts_ns", "cmwq", "kernel"]), 100.0), "{v}");
    assert!(close(
        f(&v, &["by_thread_ns", "cmwq", "service", "own code"]),
        40.0
    ));
    // limit: 300 samples, 1 ns each.
    assert!(close(f(&v, &["parts_ns", "peer", "own code"]), 50.0), "{v}");
    assert!(
        close(f(&v, &["parts_ns", "peer", "allocator"]), 50.0),
        "{v}"
    );
    assert!(close(f(&v, &["parts_ns", "peer", "harness"]), 100.0), "{v}");
    assert!(close(f(&v, &["parts_ns", "peer", "kernel"]), 100.0), "{v}");
    assert!(close(f(&v, &["parts_ns", "peer", "other"]), 0.0), "{v}");

    // The floor: cmwq's rest is 200 ns; with a free executor 200/300; the
    // bar leaves 1.15 * 300 - 200 = 145 ns, 1.45x limit's 100, 27.5% less
    // than cmwq's 200.
    assert!(close(f(&v, &["floor", "cmwq_ratio"]), 400.0 / 300.0));
    assert!(close(f(&v, &["floor", "cmwq_rest_ns"]), 200.0));
    assert!(close(f(&v, &["floor", "peer_executor_ns"]), 100.0));
    assert!(close(
        f(&v, &["floor", "ratio_with_a_free_executor"]),
        200.0 / 300.0
    ));
    assert!(close(f(&v, &["floor", "executor_budget_ns"]), 145.0), "{v}");
    assert!(close(f(&v, &["floor", "budget_over_peer_executor"]), 1.45));
    assert!(close(f(&v, &["floor", "cut_needed"]), 0.275));

    // The text report says the same.
    let o = run(&[
        "--report-cmwq",
        cmwq.to_str().unwrap(),
        "--report-peer",
        limit.to_str().unwrap(),
        "--native-cmwq",
        "400",
        "--native-peer",
        "300",
        "--bar",
        "1.5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("| own code | 200.0 | 50.0 | +150.0 |"),
        "{out}"
    );
    assert!(out.contains("leaves cmwq's executor 250.0 ns"), "{out}");

    // The model's threads and functions count as the executor's too.
    let kmin = d.join("kmin.txt");
    std::fs::write(
        &kmin,
        report(&[
            (
                30,
                "wq_bench/2",
                "cmwq",
                "[.] <cmwq_lab::bench::kernel_min::WorkProducer as cmwq_lab::bench::exec::Producer>::submit",
            ),
            (
                20,
                "kmin/1",
                "cmwq",
                "[.] std::sys::backtrace::__rust_begin_short_backtrace",
            ),
            (50, "kmin/1", "[kernel.kallsyms]", "[k] finish_task_switch.isra.0"),
        ]),
    )
    .unwrap();
    let o = run(&[
        "--report-cmwq",
        cmwq.to_str().unwrap(),
        "--report-peer",
        kmin.to_str().unwrap(),
        "--native-cmwq",
        "400",
        "--native-peer",
        "100",
        "--peer",
        "kernel_min",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(v["peer"], "kernel_min");
    assert!(close(f(&v, &["parts_ns", "peer", "own code"]), 50.0), "{v}");
    assert!(
        close(f(&v, &["by_thread_ns", "peer", "worker", "kernel"]), 50.0),
        "{v}"
    );
    assert!(close(f(&v, &["floor", "cmwq_ratio"]), 4.0), "{v}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_inputs_name_the_value() {
    let d = scratch("split-bad");
    let empty = d.join("empty.txt");
    std::fs::write(&empty, "# nothing sampled\n").unwrap();
    let main_only = d.join("main.txt");
    std::fs::write(&main_only, report(&[(10, "cmwq", "cmwq", "[.] main")])).unwrap();
    let e = empty.to_str().unwrap();
    let m = main_only.to_str().unwrap();

    let cases: &[(&[&str], &str)] = &[
        (&["--scope", "llc"], "'llc'"),
        (&["--submit", "push"], "'push'"),
        (&["--peer", "rayon"], "'rayon'"),
        (&["--runs", "0"], "'0'"),
        (&["--bar", "x1.15"], "'x1.15'"),
        (&["--native-cmwq", "400"], "go together"),
        (
            &[
                "--report-cmwq",
                "/nonexistent/cmwq.txt",
                "--report-peer",
                e,
                "--native-cmwq",
                "1",
                "--native-peer",
                "1",
            ],
            "/nonexistent/cmwq.txt",
        ),
        (
            &[
                "--report-cmwq",
                e,
                "--report-peer",
                e,
                "--native-cmwq",
                "1",
                "--native-peer",
                "1",
            ],
            "no sample lines",
        ),
        (
            &[
                "--report-cmwq",
                m,
                "--report-peer",
                m,
                "--native-cmwq",
                "1",
                "--native-peer",
                "1",
            ],
            "no samples on the bench's threads",
        ),
        (&["--bin", "/nonexistent/cmwq-bin"], "/nonexistent/cmwq-bin"),
    ];
    for (args, want) in cases {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&d);
}
