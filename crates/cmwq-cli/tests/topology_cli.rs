//! `cmwq topology`, run as a process on fixture trees and synthetic specs.

#[path = "../../cmwq/tests/fixtures/sysfs_gen.rs"]
mod sysfs_gen;

use std::process::{Command, Output};

use serde_json::Value;

fn cmwq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .arg("topology")
        .args(args)
        .output()
        .expect("running cmwq")
}

fn ok(args: &[&str]) -> String {
    let out = cmwq(args);
    assert!(
        out.status.success(),
        "cmwq topology {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = cmwq(args);
    assert!(!out.status.success(), "cmwq topology {args:?} should fail");
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn text_is_wq_dump_affinity_scopes() {
    let root = sysfs_gen::holes().write_tmp("cli-holes");
    let out = ok(&["--sysfs", root.to_str().unwrap(), "--cache-shard-size", "2"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with(
            "machine: 15 CPUs online (0-2,4-11,16-19) of 24 possible, 8 cores (SMT width 1-2"
        ),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("3 LLCs"));
    assert!(lines[0].contains("2 nodes"));
    // CPUs 0-2,4-11,16-19: 0xff7 | 0xf0000 = 0xf0ff7.
    let expected = "\
Affinity Scopes
===============
wq_unbound_cpumask=000f0ff7

CPU
  nr_pods  15
  pod_cpus [0]=00000001 [1]=00000002 [2]=00000004 [3]=00000010 [4]=00000020 [5]=00000040 [6]=00000080 [7]=00000100 [8]=00000200 [9]=00000400 [10]=00000800 [11]=00010000 [12]=00020000 [13]=00040000 [14]=00080000
  pod_node [0]=0 [1]=0 [2]=0 [3]=0 [4]=0 [5]=0 [6]=0 [7]=1 [8]=1 [9]=1 [10]=1 [11]=1 [12]=1 [13]=1 [14]=1
  cpu_pod  [0]=0 [1]=1 [2]=2 [4]=3 [5]=4 [6]=5 [7]=6 [8]=7 [9]=8 [10]=9 [11]=10 [16]=11 [17]=12 [18]=13 [19]=14

SMT
  nr_pods  8
  pod_cpus [0]=00000003 [1]=00000004 [2]=00000030 [3]=000000c0 [4]=00000300 [5]=00000c00 [6]=00030000 [7]=000c0000
  pod_node [0]=0 [1]=0 [2]=0 [3]=0 [4]=1 [5]=1 [6]=1 [7]=1
  cpu_pod  [0]=0 [1]=0 [2]=1 [4]=2 [5]=2 [6]=3 [7]=3 [8]=4 [9]=4 [10]=5 [11]=5 [16]=6 [17]=6 [18]=7 [19]=7

CACHE
  nr_pods  3
  pod_cpus [0]=000000f7 [1]=00000f00 [2]=000f0000
  pod_node [0]=0 [1]=1 [2]=1
  cpu_pod  [0]=0 [1]=0 [2]=0 [4]=0 [5]=0 [6]=0 [7]=0 [8]=1 [9]=1 [10]=1 [11]=1 [16]=2 [17]=2 [18]=2 [19]=2

CACHE_SHARD (default)
  nr_pods  4
  pod_cpus [0]=00000007 [1]=000000f0 [2]=00000f00 [3]=000f0000
  pod_node [0]=0 [1]=0 [2]=1 [3]=1
  cpu_pod  [0]=0 [1]=0 [2]=0 [4]=1 [5]=1 [6]=1 [7]=1 [8]=2 [9]=2 [10]=2 [11]=2 [16]=3 [17]=3 [18]=3 [19]=3

NUMA
  nr_pods  2
  pod_cpus [0]=000000f7 [1]=000f0f00
  pod_node [0]=0 [1]=1
  cpu_pod  [0]=0 [1]=0 [2]=0 [4]=0 [5]=0 [6]=0 [7]=0 [8]=1 [9]=1 [10]=1 [11]=1 [16]=1 [17]=1 [18]=1 [19]=1

SYSTEM
  nr_pods  1
  pod_cpus [0]=000f0ff7
  pod_node [0]=-1
  cpu_pod  [0]=0 [1]=0 [2]=0 [4]=0 [5]=0 [6]=0 [7]=0 [8]=0 [9]=0 [10]=0 [11]=0 [16]=0 [17]=0 [18]=0 [19]=0
";
    let body = lines[2..].join("\n") + "\n";
    assert_eq!(body, expected);
}

#[test]
fn json_has_the_issue_shape() {
    let root = sysfs_gen::xeon_2s().write_tmp("cli-xeon");
    let out = ok(&["--sysfs", root.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["source"], format!("sysfs:{}", root.display()));
    assert_eq!(v["online"], serde_json::json!((0..72).collect::<Vec<_>>()));
    assert_eq!(v["default_scope"], "cache_shard");
    assert_eq!(v["cache_shard_size"], 8);
    let scopes = v["scopes"].as_object().unwrap();
    let mut names: Vec<&str> = scopes.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["cache", "cache_shard", "cpu", "numa", "smt", "system"]
    );
    let shard = &scopes["cache_shard"];
    let pod0: Vec<usize> = (0..9).chain(36..45).collect();
    assert_eq!(shard["pods"][0], serde_json::json!(pod0));
    assert_eq!(shard["pods"].as_array().unwrap().len(), 4);
    assert_eq!(shard["pod_node"], serde_json::json!([0, 0, 1, 1]));
    assert_eq!(shard["cpu_pod"]["0"], 0);
    assert_eq!(shard["cpu_pod"]["45"], 1);
    assert_eq!(shard["cpu_pod"]["71"], 3);
    assert_eq!(shard["cpu_pod"].as_object().unwrap().len(), 72);
    assert_eq!(scopes["smt"]["pods"][5], serde_json::json!([5, 41]));
    assert_eq!(scopes["system"]["pod_node"], serde_json::json!([-1]));
    // Every scope's pods partition the online CPUs.
    for (name, sc) in scopes {
        let mut all: Vec<u64> = sc["pods"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p.as_array().unwrap().iter().map(|c| c.as_u64().unwrap()))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..72).collect::<Vec<u64>>(), "{name}");
    }
}

#[test]
fn json_for_offline_cpus_leaves_them_out() {
    let root = sysfs_gen::holes().write_tmp("cli-holes-json");
    let v: Value =
        serde_json::from_str(&ok(&["--sysfs", root.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(
        v["online"],
        serde_json::json!([0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19])
    );
    let cpu_pod = v["scopes"]["cpu"]["cpu_pod"].as_object().unwrap();
    assert!(!cpu_pod.contains_key("3"));
    assert_eq!(cpu_pod.len(), 15);
}

#[test]
fn synthetic_epyc_and_grace() {
    let v: Value =
        serde_json::from_str(&ok(&["--synthetic", "pack:1 l3:11 core:8 pu:2", "--json"])).unwrap();
    assert_eq!(v["source"], "synthetic:pack:1 l3:11 core:8 pu:2");
    assert_eq!(v["scopes"]["cache"]["pods"].as_array().unwrap().len(), 11);
    assert_eq!(
        v["scopes"]["cache_shard"]["pods"].as_array().unwrap().len(),
        11
    );
    assert_eq!(v["scopes"]["smt"]["pods"][0], serde_json::json!([0, 1]));
    let text = ok(&["--synthetic", "pack:1 l3:1 core:72 pu:1"]);
    assert!(text.starts_with("machine: 72 CPUs online (0-71)"), "{text}");
    assert!(
        text.contains("\nCACHE_SHARD (default)\n  nr_pods  9\n"),
        "{text}"
    );
    assert!(
        text.contains("\nCACHE\n  nr_pods  1\n  pod_cpus [0]=0xffffffff 0xffffffff 000000ff\n"),
        "{text}"
    );
}

#[test]
fn shard_size_and_default_scope_flags() {
    let v: Value = serde_json::from_str(&ok(&[
        "--synthetic",
        "core:72",
        "--cache-shard-size",
        "1",
        "--json",
    ]))
    .unwrap();
    assert_eq!(v["cache_shard_size"], 1);
    // 0 is refused, as by the builder, the live setter, the env and bench.
    let err = fails(&["--synthetic", "core:72", "--cache-shard-size", "0"]);
    assert!(err.contains("cache_shard_size 0"), "{err}");
    assert_eq!(
        v["scopes"]["cache_shard"]["pods"].as_array().unwrap().len(),
        72
    );
    let text = ok(&["--synthetic", "core:4", "--default-scope", "cache"]);
    assert!(text.contains("\nCACHE (default)\n"));
    assert!(text.contains("\nCACHE_SHARD\n"));
    let text = ok(&["--synthetic", "core:4 pu:2", "--cpus", "2-5"]);
    assert!(text.contains("wq_unbound_cpumask=0000003c\n"), "{text}");
    assert!(
        text.contains("\nSMT\n  nr_pods  2\n  pod_cpus [0]=0000000c [1]=00000030\n"),
        "{text}"
    );
}

#[test]
fn no_cache_machine_says_what_degraded() {
    let root = sysfs_gen::nocache().write_tmp("cli-nocache");
    let out = ok(&["--sysfs", root.to_str().unwrap()]);
    let first = out.lines().next().unwrap();
    assert!(first.contains("LLC = package"), "{first}");
    assert!(first.contains("one node 0"), "{first}");
    let v: Value =
        serde_json::from_str(&ok(&["--sysfs", root.to_str().unwrap(), "--json"])).unwrap();
    assert!(v["notes"].as_array().unwrap().len() >= 2);
}

#[test]
fn this_machine_and_its_affinity() {
    if !std::path::Path::new("/sys/devices/system/cpu/online").exists() {
        return;
    }
    let v: Value = serde_json::from_str(&ok(&["--json"])).unwrap();
    assert!(!v["online"].as_array().unwrap().is_empty());
    let v: Value = serde_json::from_str(&ok(&["--affinity", "--json"])).unwrap();
    assert!(!v["online"].as_array().unwrap().is_empty());
}

/// `cmwq topology` tells usable CPUs from possible ones for the live machine
/// (text and JSON), and a narrower affinity narrows `usable` but not
/// `possible` (the child runs under `taskset`, so this test changes nothing
/// of its own process). A fixture machine has no `usable`: it is not this
/// process's.
#[test]
fn usable_cpus_are_told_from_possible_ones() {
    if !std::path::Path::new("/sys/devices/system/cpu/online").exists() {
        eprintln!("skipped: no /sys/devices/system/cpu/online");
        return;
    }
    let v: Value = serde_json::from_str(&ok(&["--json"])).unwrap();
    let possible: Vec<u64> = serde_json::from_value(v["possible"].clone()).unwrap();
    let usable: Vec<u64> = serde_json::from_value(v["usable"].clone()).unwrap();
    assert!(
        !usable.is_empty() && usable.iter().all(|c| possible.contains(c)),
        "{v}"
    );
    let text = ok(&[]);
    let line = text
        .lines()
        .find(|l| l.starts_with("possible="))
        .unwrap_or_else(|| panic!("no possible= line:\n{text}"));
    assert!(line.contains(" usable="), "{line}");
    assert!(text.contains("cpu_quota="), "{text}");

    let root = sysfs_gen::small().write_tmp("cli-usable");
    let v: Value =
        serde_json::from_str(&ok(&["--sysfs", root.to_str().unwrap(), "--json"])).unwrap();
    assert!(
        v.get("usable").is_none() && v.get("cpu_budget").is_none(),
        "{v}"
    );
    assert!(!ok(&["--sysfs", root.to_str().unwrap()]).contains("usable="));

    let one = usable[usable.len() - 1].to_string();
    let o = match Command::new("taskset")
        .args(["-c", &one, env!("CARGO_BIN_EXE_cmwq"), "topology", "--json"])
        .output()
    {
        Ok(o) if o.status.success() => o,
        r => {
            eprintln!("skipped the narrowed run: taskset -c {one} failed ({r:?})");
            return;
        }
    };
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["usable"],
        serde_json::json!([usable[usable.len() - 1]]),
        "{v}"
    );
    let narrowed: Vec<u64> = serde_json::from_value(v["possible"].clone()).unwrap();
    assert_eq!(
        narrowed, possible,
        "possible does not depend on the affinity"
    );
}

#[test]
fn errors_name_the_file_or_value() {
    let err = fails(&["--synthetic", "pack:2 cores:8"]);
    assert!(err.contains("cores:8"), "{err}");
    let err = fails(&["--sysfs", "/nonexistent/root"]);
    assert!(
        err.contains("/nonexistent/root/devices/system/cpu/online"),
        "{err}"
    );
    let root = sysfs_gen::small().write_tmp("cli-bad");
    let f = root.join("devices/system/cpu/cpu1/cache/index3/shared_cpu_list");
    std::fs::write(&f, "0-1,banana\n").unwrap();
    let err = fails(&["--sysfs", root.to_str().unwrap()]);
    assert!(
        err.contains(&f.display().to_string()) && err.contains("banana"),
        "{err}"
    );
    let err = fails(&["--frobnicate"]);
    assert!(err.contains("--frobnicate"), "{err}");
    let err = fails(&["--cache-shard-size", "-3"]);
    assert!(err.contains("-3"), "{err}");
    let err = fails(&["--default-scope", "llc"]);
    assert!(err.contains("llc"), "{err}");
    let err = fails(&["--cpus", "1-x"]);
    assert!(err.contains("1-x"), "{err}");
    let err = fails(&["--synthetic", "core:4", "--cpus", "100"]);
    assert!(err.contains("100"), "{err}");
    let err = fails(&["--sysfs", "/sys", "--synthetic", "core:2"]);
    assert!(
        err.contains("--synthetic") || err.contains("--sysfs"),
        "{err}"
    );
}

#[test]
fn a_dump_of_another_era_says_what_was_derived() {
    // No cpu/online, masks only, nodes by their cpuN links.
    let root = sysfs_gen::dump_links().write_tmp("cli-dump");
    let out = ok(&["--sysfs", root.to_str().unwrap()]);
    let first = out.lines().next().unwrap();
    assert!(
        first.starts_with("machine: 8 CPUs online (0-3,8-11) of 8 possible, 4 cores"),
        "{first}"
    );
    for what in [
        "from thread_siblings (mask)",
        "from cache/index3 (L3 Unified) shared_cpu_map (mask)",
        "from node*/cpuN links",
        "no cpu/online: online CPUs 0-3,8-11 derived from the cpuN directories",
    ] {
        assert!(first.contains(what), "{what:?} not in {first}");
    }
    assert!(
        out.contains("\nCACHE\n  nr_pods  2\n  pod_cpus [0]=0000000f [1]=00000f00\n"),
        "{out}"
    );
    let v: Value =
        serde_json::from_str(&ok(&["--sysfs", root.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(v["machine"]["provenance"]["node"], "node*/cpuN links");
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("no cpu/online")),
        "{notes:?}"
    );
    assert_eq!(v["scopes"]["smt"]["pods"][2], serde_json::json!([8, 9]));
}
