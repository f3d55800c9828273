//! `cmwq::check_env()` checks every `CMWQ_*` variable the README lists, so a
//! service can stop at startup on a bad one. Variables are read once per
//! process, so each case runs in a child process of this test binary.

use std::process::Command;

/// The child: checks the environment it was given and prints the verdict.
#[test]
fn child() {
    if std::env::var_os("CMWQ_ENV_CHECK_CHILD").is_none() {
        return;
    }
    match cmwq::check_env() {
        Ok(()) => println!("VERDICT ok"),
        Err(e) => println!("VERDICT err {e}"),
    }
}

fn verdict(var: &str, value: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env("CMWQ_ENV_CHECK_CHILD", "1")
        .env(var, value)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    stdout
        .lines()
        .find_map(|l| l.split_once("VERDICT ").map(|(_, v)| v.to_string()))
        .unwrap_or_else(|| panic!("child printed no verdict: {stdout}"))
}

#[test]
fn every_listed_variable_is_checked() {
    for (var, bad) in [
        ("CMWQ_DEFAULT_AFFINITY_SCOPE", "llc"),
        ("CMWQ_CACHE_SHARD_SIZE", "0"),
        ("CMWQ_UNBOUND_CPUS", "x-y"),
        ("CMWQ_HIGHPRI_POLICY", "rt"),
        ("CMWQ_QPW", "2"),
        ("CMWQ_CONTROL", "yes"),
        ("CMWQ_SPREAD_US", "0"),
        ("CMWQ_BLOCK_DETECT", "perf"),
    ] {
        let v = verdict(var, bad);
        assert!(
            v.starts_with("err") && v.contains(var) && v.contains(bad),
            "{var}={bad}: {v}"
        );
    }
    assert_eq!(verdict("CMWQ_QPW", "1"), "ok");
    for mode in ["auto", "switch", "proc", "off"] {
        assert_eq!(verdict("CMWQ_BLOCK_DETECT", mode), "ok");
    }
}
