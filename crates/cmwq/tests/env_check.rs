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
    // What to judge: check_env(), or building a bound or an unbound queue.
    let r = match std::env::var("CMWQ_ENV_CHECK_WHAT").as_deref() {
        Ok("bound") => cmwq::Workqueue::builder("env_bound").build().map(drop),
        Ok("unbound") => cmwq::Workqueue::builder("env_unbound")
            .unbound()
            .build()
            .map(drop),
        _ => cmwq::check_env(),
    };
    match r {
        Ok(()) => println!("VERDICT ok"),
        Err(e) => println!("VERDICT err {e}"),
    }
}

fn verdict(var: &str, value: &str) -> String {
    judged("check", var, value)
}

/// The child's verdict on `what` (`check`, `bound` or `unbound`) with
/// `var=value` in its environment.
fn judged(what: &str, var: &str, value: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env("CMWQ_ENV_CHECK_CHILD", "1")
        .env("CMWQ_ENV_CHECK_WHAT", what)
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
        ("CMWQ_CPU_QUOTA", "0"),
        ("CMWQ_CPU_QUOTA", "half"),
        ("CMWQ_LATENCY_HIST", "yes"),
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
    for mode in ["auto", "off", "3"] {
        assert_eq!(verdict("CMWQ_CPU_QUOTA", mode), "ok");
    }
    for mode in ["on", "off"] {
        assert_eq!(verdict("CMWQ_LATENCY_HIST", mode), "ok");
    }
}

#[test]
fn check_env_refuses_exactly_what_a_build_refuses_with_the_same_message() {
    // A CPU no machine here has (the largest id a cpu list may name).
    let absent = (cmwq::topology::CPU_ID_LIMIT - 1).to_string();
    let with_online = format!("0-{absent}");
    let cases = [
        ("CMWQ_UNBOUND_CPUS", absent.as_str(), true),
        ("CMWQ_UNBOUND_CPUS", with_online.as_str(), false),
        ("CMWQ_UNBOUND_CPUS", "x-y", true),
        ("CMWQ_HIGHPRI_POLICY", "garbage", true),
        ("CMWQ_HIGHPRI_POLICY", "fifo", false),
        ("CMWQ_DEFAULT_AFFINITY_SCOPE", "llc", true),
        ("CMWQ_CONTROL", "yes", true),
        ("CMWQ_SPREAD_US", "0", true),
        ("CMWQ_CACHE_SHARD_SIZE", "2", false),
        ("CMWQ_LATENCY_HIST", "maybe", true),
        ("CMWQ_LATENCY_HIST", "on", false),
    ];
    for (var, value, bad) in cases {
        let check = judged("check", var, value);
        for what in ["bound", "unbound"] {
            let built = judged(what, var, value);
            assert_eq!(
                check, built,
                "{var}={value}: check_env and a {what} build disagree"
            );
        }
        assert_eq!(check.starts_with("err"), bad, "{var}={value}: {check}");
        if bad {
            assert!(check.contains(var) && check.contains(value), "{check}");
        }
    }
}

#[test]
fn an_empty_value_means_unset_for_every_variable() {
    for var in [
        "CMWQ_DEFAULT_AFFINITY_SCOPE",
        "CMWQ_CACHE_SHARD_SIZE",
        "CMWQ_UNBOUND_CPUS",
        "CMWQ_HIGHPRI_POLICY",
        "CMWQ_QPW",
        "CMWQ_CONTROL",
        "CMWQ_SPREAD_US",
        "CMWQ_LATENCY_HIST",
    ] {
        assert_eq!(verdict(var, ""), "ok", "{var}=\"\"");
    }
}
