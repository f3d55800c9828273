//! `cmwq icache-workload` and `cmwq compare --preset icache` as a user runs
//! them, with tiny sizes. The preset is given the test's own binary as both
//! sides (building two binaries here would take minutes); that checks the
//! plumbing, the JSON and the fallbacks, not the effect (the README has a
//! measured run). Without valgrind the simulated rows must say why.

use std::process::{Command, Output};

fn cmwq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .args(args)
        .output()
        .expect("run cmwq")
}

fn have_valgrind() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn workload_prints_metrics_json() {
    for w in ["resident", "frontend"] {
        let out = cmwq(&[
            "icache-workload",
            "--workload",
            w,
            "--items",
            "50",
            "--batch",
            "4",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["schema"], "cmwq-icache-workload/1");
        assert_eq!(v["result"]["items"], 52);
        assert!(v["metrics"]["throughput items/s"].as_f64().unwrap() > 0.0);
    }
    let out = cmwq(&["icache-workload", "--workload", "nginx"]);
    assert!(!out.status.success());
    let out = cmwq(&["icache-workload", "--workload", "resident", "--items", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--items 0"));
}

#[test]
fn preset_runs_end_to_end_and_json_carries_the_tables() {
    let bin = env!("CARGO_BIN_EXE_cmwq");
    let out = cmwq(&[
        "compare",
        "--preset",
        "icache",
        "--a-bin",
        bin,
        "--b-bin",
        bin,
        "--runs",
        "2",
        "--warmup",
        "0",
        "--items",
        "500",
        "--frontend-items",
        "50",
        "--cg-items",
        "20",
        "--cg-runs",
        "2",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "cmwq-icache/1");
    let s = &v["study"];
    // The same binary on both sides: no size change at all.
    assert_eq!(s["sizes"]["diff"]["up"], 0);
    assert_eq!(s["sizes"]["diff"]["changes"].as_array().unwrap().len(), 0);
    assert!(s["sizes"]["frontend_code_bytes"].as_u64().unwrap() > 32 * 1024);
    let ws = s["workloads"].as_array().unwrap();
    assert_eq!(ws.len(), 2);
    for w in ws {
        let rows = w["table"]["rows"].as_array().unwrap();
        let row = |name: &str| rows.iter().find(|r| r["metric"] == name).cloned();
        let thr = row("throughput items/s").expect("throughput row");
        assert_eq!(thr["status"], "compared");
        assert!(thr["baseline"]["median"].as_f64().unwrap() > 0.0);
        assert_eq!(w["runs"].as_array().unwrap().len(), 4);
        if have_valgrind() {
            let mpki = row("I1 MPKI (sim, :u)").expect("simulated MPKI row");
            assert_eq!(mpki["status"], "compared");
            assert!(mpki["baseline"]["median"].as_f64().unwrap() > 0.0);
            assert_eq!(w["cachegrind_runs"].as_array().unwrap().len(), 4);
        } else {
            eprintln!("valgrind not installed: checking that the simulated rows say so");
            let r = row("I1 MPKI (sim)").expect("not-supported row");
            assert_eq!(r["status"], "not_supported");
            assert!(r["reason"].as_str().unwrap().contains("valgrind"));
        }
    }
    assert!(s["conclusion"].as_str().unwrap().contains("resident: "));
    assert!(
        s["conclusion"]
            .as_str()
            .unwrap()
            .contains("still present in the inlined build"),
        "same binary twice: the switch did not take, and the conclusion says so"
    );
}

#[test]
fn preset_errors_name_the_problem() {
    let out = cmwq(&[
        "compare",
        "--preset",
        "icache",
        "--a-bin",
        "/nonexistent/cmwq-a",
        "--b-bin",
        "/nonexistent/cmwq-b",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/cmwq-a: no such binary"), "{err}");
    assert!(err.contains("--features inline-unlock"), "{err}");
}
