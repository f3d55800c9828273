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
    assert!(
        text.contains("not supported"),
        "counter rows say they are not read"
    );

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
    assert!(String::from_utf8_lossy(&out.stderr).contains("nosuch"));
}
