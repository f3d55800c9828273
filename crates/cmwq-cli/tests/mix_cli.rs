//! `cmwq mix` as a user runs it: the table, --json, --plot, bad arguments.
//! Counts and shapes only, never durations.

use std::process::{Command, Output};

fn cmwq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .args(args)
        .output()
        .expect("run cmwq")
}

const TINY: &[&str] = &[
    "mix",
    "--producers",
    "2",
    "--jobs",
    "40",
    "--rate",
    "20000",
    "--block-every",
    "5",
    "--rounds",
    "1",
];

#[test]
fn a_table_per_block_time() {
    let out = cmwq(&[TINY, &["--block-us", "200,1000", "--vs", "crossbeam"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    let blocks: Vec<&str> = s.split("\n\n").collect();
    assert_eq!(blocks.len(), 3, "two tables and the legend:\n{s}");
    for (b, head) in blocks.iter().zip(["B = 200us:", "B = 1.00ms:"]) {
        let lines: Vec<&str> = b.lines().collect();
        assert!(lines[0].starts_with(head), "{b}");
        assert!(lines[1].starts_with("executor"), "{b}");
        let names: Vec<&str> = lines[2..]
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(
            names,
            ["cmwq", "cmwq_annotated", "cmwq_bound", "crossbeam"],
            "{b}"
        );
    }
    assert!(blocks[2].starts_with("1 round: "), "{}", blocks[2]);
    // Not a terminal: no progress bar.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn json_parses_and_plot_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("mix.svg");
    let out = cmwq(
        &[
            TINY,
            &[
                "--block-us",
                "300",
                "--block-kind",
                "pipe",
                "--vs",
                "all",
                "--json",
                "--plot",
                svg.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("{\n  \"schema\": \"cmwq-mix/1\""),
        "{text}"
    );
    let j: serde_json::Value = serde_json::from_str(&text).expect("one JSON document");
    assert_eq!(j["config"]["block_kind"], "pipe");
    assert_eq!(j["config"]["vs"].as_array().unwrap().len(), 4);
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 7, "three cmwq executors and four peers");
    for r in runs {
        assert_eq!(r["jobs"], 80);
        assert_eq!(r["ran_once"], 80, "{r}");
        assert_eq!(r["block_jobs"], 16, "{r}");
        let p = &r["cpu_delay_ns"];
        let v = |k: &str| p[k].as_u64().unwrap();
        assert!(v("p50") <= v("p90") && v("p90") <= v("p99") && v("p99") <= v("max"));
        assert!(r["peak_threads"].as_i64().unwrap() >= 1, "{r}");
    }
    assert_eq!(j["summary"].as_array().unwrap().len(), 7);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.contains("B = 300us"));
    assert!(s.contains("command: cmwq mix") && s.contains("tokio_blocking"));
}

#[test]
fn bad_arguments_are_named() {
    for (args, needle) in [
        (&["mix", "--producers", "0"][..], "--producers 0"),
        (&["mix", "--jobs", "0"][..], "--jobs 0"),
        (&["mix", "--rate", "0"][..], "--rate 0"),
        (&["mix", "--block-us", "500,2ms"][..], "'2ms'"),
        (
            &["mix", "--block-us", "20000000"][..],
            "--block-us 20000000",
        ),
        (&["mix", "--cpu-us", "2000000"][..], "--cpu-us 2000000"),
        (&["mix", "--rounds", "0"][..], "--rounds 0"),
        (&["mix", "--vs", "rayon,smol"][..], "'smol'"),
        (&["mix", "--block-kind", "futex"][..], "futex"),
        (&["mix", "--plot", "mix.png"][..], "--plot mix.png"),
    ] {
        let out = cmwq(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    }
}

/// `--trace` writes a header and one line per job of every run: the three
/// cmwq executors, one round, one block time, 2 producers x 40 jobs; the
/// jobs that block are those of `--block-every 5`, and each line's numbers
/// parse. A path that cannot be written is named before any run.
#[test]
fn trace_has_a_line_per_job() {
    let dir = std::env::temp_dir().join(format!("cmwq-mix-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("jobs.csv");
    let p = path.to_str().unwrap();
    let out = cmwq(&[TINY, &["--block-us", "200", "--trace", p]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("executor,block_us,round,producer,job,blocks,submit_us,delay_ns,cpu")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 3 * 2 * 40, "{text}");
    for r in &rows {
        assert_eq!(r.len(), 9, "{r:?}");
        assert!(
            ["cmwq", "cmwq_annotated", "cmwq_bound"].contains(&r[0]),
            "{r:?}"
        );
        assert_eq!((r[1], r[2]), ("200", "0"), "{r:?}");
        let (prod, job): (usize, usize) = (r[3].parse().unwrap(), r[4].parse().unwrap());
        let blocks = (job + prod) % 5 == 0;
        assert_eq!(r[5], if blocks { "1" } else { "0" }, "{r:?}");
        for n in &r[6..] {
            n.parse::<u64>()
                .unwrap_or_else(|e| panic!("{n}: {e} in {r:?}"));
        }
    }
    let bad = cmwq(&[TINY, &["--trace", "/nonexistent-dir/jobs.csv"]].concat());
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--trace /nonexistent-dir/jobs.csv"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
