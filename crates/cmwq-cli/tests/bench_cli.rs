//! `cmwq bench` as a user runs it: kernel lines, the table, --json, --plot, bad arguments.

use std::process::{Command, Output};

fn cmwq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .args(args)
        .output()
        .expect("run cmwq")
}

const TINY: &[&str] = &["bench", "--threads", "2", "--items", "200", "--rounds", "1"];

#[test]
fn kernel_lines_then_table() {
    let out = cmwq(&[TINY, &["--vs", "crossbeam,limit", "--scopes", "cache,cpu"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        lines[0],
        "test_workqueue: running 2 threads, 200 items/thread"
    );
    // One kernel line per cmwq scope, in the kernel's order whatever the order asked.
    for (line, name) in lines[1..3].iter().zip(["cpu", "cache"]) {
        let rest = line
            .strip_prefix("test_workqueue:   ")
            .expect("kernel prefix");
        assert_eq!(&rest[..17], format!("{name:<16} "));
        let (ips, lat) = rest[17..].split_once(" items/sec\t").expect("items/sec");
        assert!(ips.parse::<u64>().is_ok(), "{line}");
        let f: Vec<&str> = lat
            .strip_suffix(" ns")
            .expect("ns suffix")
            .split('\t')
            .collect();
        assert_eq!(f.len(), 3);
        for (kv, k) in f.iter().zip(["p50=", "p90=", "p95="]) {
            assert!(kv.strip_prefix(k).unwrap().parse::<u64>().is_ok(), "{line}");
        }
    }
    assert_eq!(lines[3], "");
    assert!(lines[4].starts_with("executor"));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("cmwq") && l.contains(" cpu "))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("cmwq") && l.contains(" cache "))
    );
    assert!(lines.iter().any(|l| l.starts_with("crossbeam")));
    assert!(lines.iter().any(|l| l.starts_with("limit")));
    // Not a terminal: no progress bar.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn json_parses_and_plot_is_written() {
    let dir = std::env::temp_dir().join(format!("cmwq-bench-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("b.svg");
    let out = cmwq(
        &[
            TINY,
            &[
                "--vs",
                "all",
                "--scopes",
                "cpu,system",
                "--batch",
                "8",
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
    let j: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(j["schema"], "cmwq-bench/1");
    assert_eq!(j["config"]["batch"], 8);
    // cmwq once per scope, then the six peers.
    assert_eq!(j["summary"].as_array().unwrap().len(), 8);
    assert_eq!(j["runs"].as_array().unwrap().len(), 8);
    assert_eq!(j["kernel_lines"].as_array().unwrap().len(), 3);
    for r in j["runs"].as_array().unwrap() {
        assert_eq!(r["completed"], 400);
    }
    assert_eq!(
        j["kernel_lines"][0],
        "test_workqueue: running 2 threads, 200 items/thread"
    );
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.contains("polyline"));
    // Where it came from, and a note instead of whiskers for one round.
    assert!(s.contains("machine: ") && s.contains("commit: ") && s.contains("command: cmwq bench"));
    assert!(s.contains("Note: one round") && !s.contains(r#"class="whisker""#));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_are_named() {
    for (args, needle) in [
        (
            &["bench", "--threads", "0", "--vs", "all"][..],
            "--threads 0",
        ),
        (&["bench", "--items", "0", "--vs", "all"][..], "--items 0"),
        (&["bench", "--rounds", "0", "--vs", "all"][..], "--rounds 0"),
        (
            &["bench", "--workers", "0", "--vs", "all"][..],
            "--workers 0",
        ),
        (
            &["bench", "--items", "10", "--batch", "64", "--vs", "all"][..],
            "--batch 64 is larger than --items 10",
        ),
        (
            &["bench", "--scopes", "cpu,llc", "--vs", "all"][..],
            "'llc'",
        ),
        (&["bench", "--vs", "rayon,smol"][..], "'smol'"),
        (
            &[
                "bench",
                "--cache-shard-size",
                "0",
                "--scopes",
                "cache_shard",
            ][..],
            "--cache-shard-size 0",
        ),
    ] {
        let out = cmwq(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    }
}
