//! `cmwq percpu` as a user runs it: tables, --json documents with their metrics,
//! bad modes, and the compare presets that drive it.

use std::process::{Command, Output};

fn cmwq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .args(args)
        .output()
        .expect("run cmwq")
}

fn ok_json(args: &[&str]) -> serde_json::Value {
    let out = cmwq(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

const COST: &[&str] = &["percpu", "cost", "--runs", "2", "--ops", "10000"];
const ISO: &[&str] = &[
    "percpu",
    "isolation",
    "--duration-ms",
    "60",
    "--drain-interval-ms",
    "5",
];

#[test]
fn cost_json_has_three_rows_and_prefixed_metrics() {
    let v = ok_json(&[COST, &["--json"]].concat());
    assert_eq!(v["schema"], "cmwq-percpu-cost/1");
    let rows = v["report"]["rows"].as_array().unwrap();
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["nolock", "local", "qpw"]);
    for r in rows {
        assert_eq!(r["cycles_per_op"].as_array().unwrap().len(), 2);
        let s = &r["summary"];
        let (min, med, max) = (
            s["min"].as_f64().unwrap(),
            s["median"].as_f64().unwrap(),
            s["max"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= med && med <= max, "{s}");
    }
    let m = v["metrics"].as_object().unwrap();
    for mode in ["nolock", "local", "qpw"] {
        for k in ["min", "mean", "median", "max"] {
            let name = format!("{mode} cycles_per_op_{k}");
            assert!(m[&name].as_f64().unwrap() > 0.0, "{name}");
        }
    }
}

#[test]
fn one_mode_gives_unprefixed_metrics_that_compare_can_pair() {
    let v = ok_json(&[COST, &["--mode", "qpw", "--json"]].concat());
    let m = v["metrics"].as_object().unwrap();
    let keys: Vec<&str> = m.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "cycles_per_op_max",
            "cycles_per_op_mean",
            "cycles_per_op_median",
            "cycles_per_op_min"
        ]
    );
}

#[test]
fn cost_table() {
    let out = cmwq(&[COST, &["--mode", "all"]].concat());
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert!(lines[0].starts_with("percpu cost: 2 runs x 10000"), "{s}");
    assert!(
        lines[1].starts_with("mode") && lines[1].contains("median"),
        "{s}"
    );
    for (l, mode) in lines[2..5].iter().zip(["nolock", "local", "qpw"]) {
        assert!(l.starts_with(mode), "{s}");
    }
}

#[test]
fn isolation_json_counts_drains_on_the_pinned_cpu() {
    let v = ok_json(&[ISO, &["--json"]].concat());
    assert_eq!(v["schema"], "cmwq-percpu-isolation/1");
    let rows = v["report"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        let drains = r["drains"].as_u64().unwrap();
        assert!(drains >= 1, "{r}");
        assert!(r["iterations"].as_u64().unwrap() > 0);
        assert_eq!(r["top_gaps_ns"].as_array().unwrap().len(), 5);
        let on = r["drains_on_pinned_cpu"].as_u64().unwrap();
        match (r["mode"].as_str().unwrap(), r["drainer_cpu"].is_null()) {
            // Local: every drain_all runs one drain function on the loop's CPU.
            ("local", _) => assert_eq!(on, drains, "{r}"),
            // Qpw with the drainer on another CPU: never on the loop's CPU.
            ("qpw", false) => assert_eq!(on, 0, "{r}"),
            _ => {}
        }
    }
    let m = v["metrics"].as_object().unwrap();
    for k in ["gap_max_ns", "gap_p999_ns", "drains_on_pinned_cpu"] {
        assert!(m.contains_key(&format!("local {k}")), "{k}");
        assert!(m.contains_key(&format!("qpw {k}")), "{k}");
    }
}

#[test]
fn bad_modes_are_refused_with_the_choices() {
    for (args, bad) in [
        (vec!["percpu", "cost", "--mode", "fast"], "fast"),
        (vec!["percpu", "isolation", "--mode", "nolock"], "nolock"),
    ] {
        let out = cmwq(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(bad) && e.contains("--mode"), "{e}");
        assert!(e.contains("qpw"), "the choices are listed: {e}");
    }
    let out = cmwq(&["percpu", "cost", "--runs", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--runs 0"));
}

#[test]
fn compare_preset_pairs_local_with_qpw() {
    let v = ok_json(&[
        "compare",
        "--preset",
        "qpw-cost",
        "--runs",
        "2",
        "--warmup",
        "0",
        "--a",
        "--runs 2 --ops 10000",
        "--b",
        "--runs 2 --ops 10000",
        "--json",
    ]);
    let a = v["a"]["argv"].as_array().unwrap();
    let b = v["b"]["argv"].as_array().unwrap();
    let s = |x: &Vec<serde_json::Value>| {
        x.iter()
            .map(|y| y.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(s(a).contains("percpu cost --mode local"), "{}", s(a));
    assert!(s(b).contains("percpu cost --mode qpw"), "{}", s(b));
    let text = v["table"].to_string();
    assert!(text.contains("cycles_per_op_median"), "{text}");
}
