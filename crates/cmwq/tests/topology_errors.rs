//! Bad input: every error names the file or the value, nothing panics.

#[path = "fixtures/sysfs_gen.rs"]
mod sysfs_gen;

use std::fs;
use std::path::Path;

use cmwq::topology::{Scope, Topology, TopologyError, parse_cpulist};
use proptest::prelude::*;

/// Writes the small fixture, replaces `file` (relative to the root) with
/// `contents` (or removes it when `None`) and returns the error and the
/// file's full path.
fn broken(name: &str, file: &str, contents: Option<&[u8]>) -> (String, String) {
    let root = sysfs_gen::small().write_tmp(name);
    let path = root.join(file);
    match contents {
        Some(c) => fs::write(&path, c).unwrap(),
        None => fs::remove_file(&path).unwrap(),
    }
    let err = Topology::from_sysfs(&root).expect_err(file).to_string();
    (err, path.display().to_string())
}

fn assert_names(file: &str, contents: Option<&[u8]>, also: &[&str]) {
    let (err, path) = broken(&file.replace('/', "_"), file, contents);
    assert!(err.contains(&path), "error {err:?} does not name {path}");
    for a in also {
        assert!(err.contains(a), "error {err:?} does not mention {a:?}");
    }
}

#[test]
fn missing_root_names_the_online_file() {
    let err = Topology::from_sysfs(Path::new("/nonexistent/sysroot")).unwrap_err();
    assert!(matches!(err, TopologyError::Io { .. }));
    assert!(
        err.to_string()
            .contains("/nonexistent/sysroot/devices/system/cpu/online"),
        "{err}"
    );
}

#[test]
fn online_file_missing_empty_or_garbage() {
    // Missing with no cpuN directories to derive it from.
    let root = sysfs_gen::tmp_root("noonline-nodirs");
    fs::create_dir_all(root.join("devices/system/cpu/cpufreq")).unwrap();
    fs::write(root.join("devices/system/cpu/possible"), "0-3\n").unwrap();
    let err = Topology::from_sysfs(&root).unwrap_err().to_string();
    let online = root.join("devices/system/cpu/online");
    assert!(err.contains(&online.display().to_string()), "{err}");
    assert!(err.contains("missing"), "{err}");
    assert_names(
        "devices/system/cpu/online",
        Some(b"\n"),
        &["no online CPUs"],
    );
    assert_names("devices/system/cpu/online", Some(b"0-x\n"), &["0-x"]);
    assert_names("devices/system/cpu/online", Some(b"3-1"), &["3-1"]);
    assert_names("devices/system/cpu/online", Some(b"0-99999999"), &["limit"]);
    assert_names("devices/system/cpu/online", Some(b"\xff\xfe"), &["UTF-8"]);
}

#[test]
fn possible_file_empty_or_garbage() {
    assert_names("devices/system/cpu/possible", Some(b""), &["empty"]);
    assert_names("devices/system/cpu/possible", Some(b"all"), &["all"]);
    // Missing is fine: possible = online, and said so.
    let root = sysfs_gen::small().write_tmp("nopossible");
    fs::remove_file(root.join("devices/system/cpu/possible")).unwrap();
    let t = Topology::from_sysfs(&root).unwrap();
    assert!(t.notes().iter().any(|n| n.contains("cpu/possible")));
}

#[test]
fn per_cpu_files_empty_or_garbage() {
    let topo = "devices/system/cpu/cpu1/topology";
    assert_names(
        &format!("{topo}/thread_siblings_list"),
        Some(b""),
        &["empty"],
    );
    assert_names(
        &format!("{topo}/thread_siblings_list"),
        Some(b"zero"),
        &["zero"],
    );
    assert_names(&format!("{topo}/package_cpus_list"), Some(b"0-"), &["0-"]);
    let cache = "devices/system/cpu/cpu2/cache/index3";
    assert_names(&format!("{cache}/level"), Some(b"three\n"), &["three"]);
    assert_names(&format!("{cache}/level"), Some(b""), &["integer"]);
    assert_names(&format!("{cache}/type"), Some(b"Victim\n"), &["Victim"]);
    assert_names(
        &format!("{cache}/shared_cpu_list"),
        Some(b"0-3,"),
        &["empty entry"],
    );
    assert_names(&format!("{cache}/shared_cpu_list"), Some(b""), &["empty"]);
    assert_names(
        "devices/system/node/node0/cpulist",
        Some(b"cpu0"),
        &["cpu0"],
    );
}

#[test]
fn physical_package_id_garbage() {
    let root = sysfs_gen::small().write_tmp("pkgid");
    let t = root.join("devices/system/cpu/cpu0/topology");
    fs::remove_file(t.join("package_cpus_list")).unwrap();
    fs::remove_file(t.join("core_siblings_list")).unwrap();
    fs::remove_file(t.join("package_cpus")).unwrap();
    fs::remove_file(t.join("core_siblings")).unwrap();
    fs::write(t.join("physical_package_id"), "socket0\n").unwrap();
    let err = Topology::from_sysfs(&root).unwrap_err().to_string();
    assert!(
        err.contains(&t.join("physical_package_id").display().to_string()),
        "{err}"
    );
    assert!(err.contains("socket0"), "{err}");
}

#[test]
fn a_directory_where_a_file_belongs() {
    let root = sysfs_gen::small().write_tmp("dir");
    let f = root.join("devices/system/cpu/cpu0/topology/thread_siblings_list");
    fs::remove_file(&f).unwrap();
    fs::create_dir(&f).unwrap();
    let err = Topology::from_sysfs(&root).unwrap_err().to_string();
    assert!(err.contains(&f.display().to_string()), "{err}");
}

#[test]
fn bad_synthetic_specs_name_the_token() {
    for (spec, token) in [
        ("pack:0", "pack:0"),
        ("pack:2 core:x", "core:x"),
        ("pack:2 foo:3", "foo:3"),
        ("core:8 pack:2", "pack:2"),
        ("pu:2 pu:2", "pu:2"),
        ("pack2", "pack2"),
        ("core:-1", "core:-1"),
        ("l3:99999999999999999999", "l3:99999999999999999999"),
    ] {
        let err = Topology::from_synthetic(spec).unwrap_err();
        assert!(matches!(err, TopologyError::BadValue { .. }), "{spec}");
        assert!(err.to_string().contains(token), "{spec}: {err}");
    }
    let err = Topology::from_synthetic("  ").unwrap_err().to_string();
    assert!(err.contains("empty"), "{err}");
    let err = Topology::from_synthetic("core:1000 pu:1000")
        .unwrap_err()
        .to_string();
    assert!(err.contains("core:1000 pu:1000"), "{err}");
}

#[test]
fn bad_scope_names_the_value() {
    let err = "llc".parse::<Scope>().unwrap_err().to_string();
    assert!(err.contains("\"llc\""), "{err}");
    for &s in Scope::ALL {
        assert_eq!(s.name().parse::<Scope>().unwrap(), s);
        assert_eq!(s.to_string(), s.name());
    }
}

/// The files of the small fixture a fuzz case may overwrite.
const FILES: &[&str] = &[
    "devices/system/cpu/online",
    "devices/system/cpu/possible",
    "devices/system/cpu/cpu0/topology/thread_siblings_list",
    "devices/system/cpu/cpu1/topology/core_cpus_list",
    "devices/system/cpu/cpu2/topology/package_cpus_list",
    "devices/system/cpu/cpu3/topology/physical_package_id",
    "devices/system/cpu/cpu1/cache/index0/level",
    "devices/system/cpu/cpu1/cache/index3/level",
    "devices/system/cpu/cpu2/cache/index3/type",
    "devices/system/cpu/cpu3/cache/index3/shared_cpu_list",
    "devices/system/node/node0/cpulist",
];

fn contents() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        "[0-9,\\- \n]{0,16}".prop_map(String::into_bytes),
        "(Data|Unified|Instruction|-1|0|3|0-3|1,3|2-1|7|0-200)\n?".prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    #[test]
    fn random_file_contents_never_panic(which in 0..FILES.len(), which2 in 0..FILES.len(), a in contents(), b in contents()) {
        let root = sysfs_gen::tmp_root("fuzz");
        sysfs_gen::small().write(&root);
        fs::write(root.join(FILES[which]), &a).unwrap();
        fs::write(root.join(FILES[which2]), &b).unwrap();
        match Topology::from_sysfs(&root) {
            Ok(t) => {
                for &sc in Scope::ALL {
                    for size in [0, 1, 8] {
                        let pt = t.pods(sc, size);
                        let mut all: Vec<usize> = pt.pods.concat();
                        all.sort_unstable();
                        prop_assert_eq!(all.as_slice(), t.online());
                    }
                }
                let _ = t.summary();
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains(&root.display().to_string()), "{}", msg);
            }
        }
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn random_strings_never_panic(s in "\\PC{0,40}") {
        let _ = parse_cpulist(&s);
        if let Err(e) = Topology::from_synthetic(&s) {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}
