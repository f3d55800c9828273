//! `cmwq compare` as a user runs it: two commands, the table, --json, bad input.

use std::process::{Command, Output};

fn cmwq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .args(args)
        .output()
        .expect("run cmwq")
}

const A: &str = r#"echo '{"metrics":{"x":10}}'"#;
const B: &str = r#"echo '{"metrics":{"x":20}}'"#;

#[test]
fn two_commands_give_a_table_and_json() {
    let out = cmwq(&[
        "compare", "--a-cmd", A, "--b-cmd", B, "--runs", "3", "--warmup", "0",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Metric") && text.contains("Baseline") && text.contains("Sig"));
    let x = text.lines().find(|l| l.starts_with("x ")).expect("row x");
    assert!(x.contains("+100.00%"), "{x}");
    // Counter rows are measured, or say why not (no PMU on most VMs).
    for c in [
        "cycles",
        "instructions",
        "IPC",
        "L1i misses user",
        "L1i misses kernel",
    ] {
        assert!(text.lines().any(|l| l.starts_with(c)), "row {c}:\n{text}");
    }

    let out = cmwq(&[
        "compare", "--a-cmd", A, "--b-cmd", B, "--runs", "4", "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["schema"], "cmwq-compare/1");
    assert_eq!(j["runs"].as_array().unwrap().len(), 8);
    let rows = j["table"]["rows"].as_array().unwrap();
    let x = rows.iter().find(|r| r["metric"] == "x").expect("row x");
    assert_eq!(x["delta_pct"], 100.0);
    assert_eq!(x["baseline"]["median"], 10.0);
}

#[test]
fn bad_input_is_named() {
    let out = cmwq(&["compare", "--a-cmd", A, "--b-cmd", B, "--runs", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--runs 1"));

    let out = cmwq(&["compare", "--a-cmd", A]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("side B"));

    // A side whose every run fails is reported and never averaged in.
    let out = cmwq(&[
        "compare", "--a-cmd", A, "--b-cmd", "exit 3", "--runs", "2", "--warmup", "0",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("failed and is left out"), "{err}");
    assert!(err.contains("B: 0"), "{err}");
}

#[test]
fn wake_preset_gives_a_table_per_scope() {
    let tiny = "--scopes cpu,cache --threads 2 --items 200 --rounds 1";
    let out = cmwq(&[
        "compare", "--preset", "wake", "--a", tiny, "--b", tiny, "--runs", "2", "--warmup", "0",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("--wake deferred") && text.contains("--wake under-lock"));
    for scope in ["cmwq/cpu", "cmwq/cache"] {
        assert!(
            text.lines().any(|l| l == scope),
            "a table titled {scope}:\n{text}"
        );
    }
    assert!(text.lines().any(|l| l.starts_with("items_per_sec ")));

    let out = cmwq(&["compare", "--preset", "nosuch"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nosuch"), "{err}");
    for valid in ["wake", "shard", "priority"] {
        assert!(err.contains(valid), "the error lists {valid}: {err}");
    }
}

fn ok_json(args: &[&str]) -> serde_json::Value {
    let out = cmwq(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn rows_of(t: &serde_json::Value) -> Vec<&str> {
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metric"].as_str().unwrap())
        .collect()
}

#[test]
fn shard_preset_gives_seed_002s_table() {
    let tiny = "--items 100 --threads 2";
    let j = ok_json(&[
        "compare",
        "--preset",
        "shard",
        "--a",
        tiny,
        "--b",
        tiny,
        "--shard-sizes",
        "2,16",
        "--runs",
        "2",
        "--warmup",
        "0",
        "--json",
    ]);
    let sides: Vec<&str> = j["sides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert_eq!(sides, ["cache", "shard=2", "shard=16"]);
    let argv = j["sides"][2]["argv"].to_string();
    assert!(argv.contains("\"--cache-shard-size\",\"16\""), "{argv}");
    // The user's --threads replaced the preset's default.
    assert!(
        argv.contains("\"--threads\",\"2\"") && !argv.contains("\"8\""),
        "{argv}"
    );
    assert_eq!(j["runs"].as_array().unwrap().len(), 6);
    let tables = j["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 2);
    assert_eq!(tables[1]["experiment"], "shard=16");
    // Scopes are stripped so that cache and cache_shard rows compare.
    let rows = rows_of(&tables[0]["table"]);
    assert!(rows.contains(&"cmwq items_per_sec"), "{rows:?}");
    assert!(rows.contains(&"cmwq enqueue_p95_ns"), "{rows:?}");
    let shard = j["shard"].as_array().unwrap();
    assert_eq!(shard.len(), 2);
    assert_eq!(shard[0]["shard_size"], 2);
    let tput = &shard[1]["metrics"][0];
    assert_eq!(tput["metric"], "cmwq items_per_sec");
    assert_eq!(tput["n"], 2);
    assert!(tput["mean_delta_pct"].is_f64() && tput["stdev_delta_pct"].is_f64());
    assert!(["**", "ns", "flat"].contains(&tput["sig"].as_str().unwrap()));

    let out = cmwq(&[
        "compare",
        "--preset",
        "shard",
        "--a",
        tiny,
        "--b",
        tiny,
        "--shard-sizes",
        "4",
        "--runs",
        "2",
        "--warmup",
        "0",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Shard Size") && text.contains("tput Mean") && text.contains("p95 StDev")
    );
    assert!(text.lines().any(|l| l.starts_with("4 ")), "{text}");

    let out = cmwq(&["compare", "--preset", "shard", "--shard-sizes", "2,0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'0'"));
}

#[test]
fn priority_preset_gives_fio_lines_and_tables() {
    let tiny = "--duration-ms 60 --interval-us 1000 --hog-period-ms 2";
    let out = cmwq(&[
        "compare", "--preset", "priority", "--a", tiny, "--b", tiny, "--runs", "2", "--warmup",
        "0", "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sides: Vec<&str> = j["sides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert_eq!(sides, ["normal", "high", "fifo"]);
    let tables = j["tables"].as_array().unwrap();
    let high = tables
        .iter()
        .find(|t| t["experiment"] == "high")
        .expect("normal vs high");
    let rows = rows_of(&high["table"]);
    for m in [
        "clat min us",
        "clat avg us",
        "clat max us",
        "clat stdev us",
        "clat p99.9 us",
    ] {
        assert!(rows.contains(&m), "{m} in {rows:?}");
    }
    let fio = &j["fio"]["normal"];
    assert!(fio["p99_9"].as_f64().unwrap() >= fio["p50"].as_f64().unwrap());
    assert!(fio["max"].as_f64().unwrap() >= fio["min"].as_f64().unwrap());
    // fifo is compared where this process may use SCHED_FIFO (root here);
    // where it may not, its failing runs are reported and left out.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        tables.iter().any(|t| t["experiment"] == "fifo")
            || (err.contains("no table for normal vs fifo")
                && err.contains("cannot run workers at fifo")),
        "{err}"
    );
}

#[test]
fn plot_has_a_point_per_successful_run() {
    let dir = std::env::temp_dir().join(format!("cmwq-compare-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("ab.svg");
    let out = cmwq(&[
        "compare",
        "--a-cmd",
        A,
        "--b-cmd",
        B,
        "--runs",
        "3",
        "--warmup",
        "0",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
    // Six process metrics and x, each with 3 runs a side.
    assert_eq!(s.matches(r#"class="panel""#).count(), 7);
    assert_eq!(s.matches(r#"class="run""#).count(), 7 * 6);
    let x_panel = &s[s.find(r#"data-metric="x""#).unwrap()..];
    let x_panel = &x_panel[..x_panel.find("</g>").unwrap()];
    assert_eq!(x_panel.matches(r#"data-side="0""#).count(), 3);
    assert_eq!(x_panel.matches(r#"data-side="1""#).count(), 3);
    // Each panel states B's delta, verdict and the better direction; x (10
    // and 20 every run) has no direction; wall s is lower = better.
    assert!(x_panel.contains(r#"class="verdict""#), "{x_panel}");
    assert!(x_panel.contains("B vs A: +100.00% "), "{x_panel}");
    assert!(x_panel.contains("(no better direction)"), "{x_panel}");
    let wall = &s[s.find(r#"data-metric="wall s""#).unwrap()..];
    let wall = &wall[..wall.find("</g>").unwrap()];
    assert!(wall.contains("(lower = better)"), "{wall}");
    assert!(
        ["** (", "ns (", "flat ("].iter().any(|v| wall.contains(v)),
        "{wall}"
    );
    // Non-negative metrics: no negative tick anywhere.
    for t in s.split(r#"class="tick""#).skip(1) {
        let t = &t[t.find('>').unwrap() + 1..t.find('<').unwrap()];
        assert!(!t.starts_with('-'), "negative tick {t}");
    }
    assert!(s.contains("command: cmwq compare"));

    let out = cmwq(&[
        "compare",
        "--a-cmd",
        A,
        "--b-cmd",
        B,
        "--runs",
        "2",
        "--plot",
        "/nonexistent/dir/x.svg",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--plot /nonexistent/dir/x.svg"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn latency_prints_fio_lines_and_metrics() {
    let args = [
        "latency",
        "--priority",
        "high",
        "--hogs",
        "1",
        "--duration-ms",
        "30",
        "--hog-period-ms",
        "2",
    ];
    let out = cmwq(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("clat (usec): min="), "{text}");
    assert!(text.contains("99.90th=["), "{text}");
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = cmwq(&json_args);
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["schema"], "cmwq-latency/1");
    let m = &j["metrics"];
    assert_eq!(
        m["items"].as_u64().unwrap() + m["missed"].as_u64().unwrap(),
        30
    );
    assert!(m["clat p99 us"].as_f64().unwrap() >= m["clat p50 us"].as_f64().unwrap());

    // FIFO workers, or with --priority-fallback the best allowed priority, said.
    let out = cmwq(&[
        "latency",
        "--priority",
        "fifo",
        "--priority-fallback",
        "--hogs",
        "1",
        "--duration-ms",
        "10",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let at = j["report"]["workers_at"].as_str().unwrap();
    assert!(
        at.starts_with("fifo") || j["report"]["priority_note"].is_string(),
        "{j}"
    );

    let out = cmwq(&["latency", "--duty", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--duty 0"));
}

/// Runs cmwq with a deadline: a hang is a failure, not a stuck test run.
fn cmwq_within(args: &[&str], secs: u64) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run cmwq");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("cmwq {args:?} hung for {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_command_that_floods_stderr_does_not_hang_the_run() {
    // 200 KB on stderr before the JSON on stdout: more than a pipe holds.
    let noisy = r#"head -c 200000 /dev/zero | tr '\0' x >&2; echo '{"metrics":{"x":10}}'"#;
    let out = cmwq_within(
        &[
            "compare", "--a-cmd", noisy, "--b-cmd", B, "--runs", "2", "--warmup", "0",
        ],
        120,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("+100.00%"));
}

#[test]
fn metrics_some_runs_lack_are_compared_over_the_others_and_noted() {
    // y appears in 2 of 3 A runs (not the first): compared over those, with a
    // note; z, only in B's runs, is left out with a note (it used to vanish
    // silently).
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("count");
    let a = format!(
        r#"n=$(cat {f} 2>/dev/null || echo 0); echo $((n+1)) > {f}; if [ $n -eq 0 ]; then echo '{{"metrics":{{"x":10}}}}'; else echo '{{"metrics":{{"x":10,"y":5}}}}'; fi"#,
        f = f.display()
    );
    let b = r#"echo '{"metrics":{"x":20,"y":6,"z":1}}'"#;
    let out = cmwq_within(
        &[
            "compare", "--a-cmd", &a, "--b-cmd", b, "--runs", "3", "--warmup", "0",
        ],
        120,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().any(|l| l.starts_with("y ")), "{text}");
    assert!(
        text.contains("Note: y: reported by 2 of 3 A runs"),
        "{text}"
    );
    assert!(text.contains("Note: z: left out"), "{text}");
}

#[test]
fn a_cmwq_side_that_prints_no_metrics_is_a_failed_run() {
    // `topology` prints its own JSON, not metrics: every run of that side
    // fails, is reported, and too few runs remain.
    let out = cmwq_within(
        &[
            "compare", "--a", "topology", "--b-cmd", B, "--runs", "2", "--warmup", "0",
        ],
        120,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("printed no JSON metrics"), "{err}");
}

#[test]
fn sides_alternate_their_order_unless_fixed() {
    let order = |extra: &[&str]| -> Vec<u64> {
        let mut args = vec![
            "compare", "--a-cmd", A, "--b-cmd", B, "--runs", "3", "--warmup", "0", "--json",
        ];
        args.extend_from_slice(extra);
        let out = cmwq(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        j["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["side"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(order(&[]), vec![0, 1, 1, 0, 0, 1]);
    assert_eq!(order(&["--order", "fixed"]), vec![0, 1, 0, 1, 0, 1]);
}
