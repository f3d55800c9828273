//! `scripts/bar.py` on saved bench documents: each cell's ratios are
//! cmwq's over `limit`'s of the same run, the model `kernel_min` is never
//! the best peer and gives its own column, and bad inputs name the value.

mod common;

use std::process::Output;

use common::scratch;

fn run(args: &[&str]) -> Output {
    common::script("bar.py", args)
}

fn row(executor: &str, scope: &str, ips: f64, cpu: f64) -> serde_json::Value {
    serde_json::json!({
        "executor": executor, "scope": scope,
        "items_per_sec": ips, "cpu_s_per_million": cpu,
    })
}

/// One bench document: `limit` at 10M items/s and 0.2 CPU s per million,
/// cmwq's two scopes, crossbeam, and the model when `model` is given.
fn doc(model: Option<(f64, f64)>) -> String {
    let mut rows = vec![
        row("cmwq", "cpu", 8.0e6, 0.26),
        row("cmwq", "cache_shard", 7.0e6, 0.28),
        row("limit", "-", 10.0e6, 0.20),
        row("crossbeam", "-", 5.0e6, 0.30),
    ];
    if let Some((ips, cpu)) = model {
        rows.push(row("kernel_min", "-", ips, cpu));
    }
    serde_json::json!({"config": {"rounds": 1}, "runs": rows}).to_string()
}

#[test]
fn cells_divide_by_limit_and_the_model_is_no_peer() {
    let d = scratch("bar-cells");
    for shape in ["p8-b1", "p2-b1", "p8-b64"] {
        // The model runs faster than any peer: it must still not be one.
        std::fs::write(
            d.join(format!("work-{shape}.1.json")),
            doc(Some((11.0e6, 0.20))),
        )
        .unwrap();
        std::fs::write(d.join(format!("spawn-{shape}.1.json")), doc(None)).unwrap();
    }
    let o = run(&[
        "--reuse",
        "--out",
        d.to_str().unwrap(),
        "--submits",
        "work,spawn",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 12);
    for r in rows {
        assert_eq!(r["best_peer"], "crossbeam", "{r}");
        let cpu = r["cpu_vs_limit"].as_f64().unwrap();
        let want = if r["scope"] == "cpu" { 1.3 } else { 1.4 };
        assert!((cpu - want).abs() < 1e-9, "{r}");
        let model = &r["cpu_vs_model"];
        if r["submit"] == "work" {
            // cmwq's CPU over the model's 0.20.
            assert!((model.as_f64().unwrap() - want).abs() < 1e-9, "{r}");
        } else {
            assert!(model.is_null(), "{r}");
        }
        assert_eq!(r["meets"], false, "{r}");
    }

    // The table gets the model's column, a dash where it did not run.
    let o = run(&[
        "--reuse",
        "--out",
        d.to_str().unwrap(),
        "--submits",
        "work,spawn",
    ]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("CPU/item over kernel_min's"), "{out}");
    assert!(
        out.contains("| P=8, batch 64 | work | cpu | 0.800 [0.80..0.80] | 0.85 | 1.300 | 1.300 | crossbeam 0.50 | no |"),
        "{out}"
    );
    assert!(out.contains("| 1.300 | - | crossbeam 0.50 | no |"), "{out}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_inputs_name_the_value() {
    let cases: &[(&[&str], &str)] = &[
        (&["--submits", "push"], "'push'"),
        (&["--producers", "8"], "'8'"),
        (&["--reuse"], "--reuse needs --out"),
        (&["--bin", "/nonexistent/cmwq-bar"], "/nonexistent/cmwq-bar"),
    ];
    for (args, want) in cases {
        let o = run(args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
    }
}
