//! Pods of real-looking machines, read from sysfs fixture trees, checked
//! against expectations derived by hand from the kernel's rules (not by the
//! code under test).

#[path = "fixtures/sysfs_gen.rs"]
mod sysfs_gen;

use cmwq::topology::{PodType, Scope, Topology, cpumask_str};

/// CPUs `a..b`.
fn r(a: usize, b: usize) -> Vec<usize> {
    (a..b).collect()
}

/// The concatenation of several ranges (each pod below is written as the
/// ranges it is made of, in ascending order).
fn cat(parts: &[Vec<usize>]) -> Vec<usize> {
    parts.concat()
}

/// Checks pods, pod_node and that cpu_pod agrees with pods.
fn check(pt: &PodType, pods: &[Vec<usize>], nodes: &[i32]) {
    assert_eq!(pt.pods, pods, "pods");
    assert_eq!(pt.pod_node, nodes, "pod_node");
    for (i, p) in pods.iter().enumerate() {
        for &c in p {
            assert_eq!(pt.cpu_pod[c], Some(i), "cpu_pod[{c}]");
        }
    }
    let covered: usize = pods.iter().map(Vec::len).sum();
    assert_eq!(pt.cpu_pod.iter().filter(|p| p.is_some()).count(), covered);
}

fn load(m: sysfs_gen::Machine, name: &str) -> Topology {
    let root = m.write_tmp(name);
    Topology::from_sysfs(&root).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn xeon_two_sockets_smt2_x86_numbering() {
    let t = load(sysfs_gen::xeon_2s(), "xeon");
    assert_eq!(t.online(), r(0, 72).as_slice());
    assert_eq!(t.nr_cpu_ids(), 72);
    assert_eq!(
        (t.cores(), t.llcs(), t.packages(), t.nr_nodes()),
        (36, 2, 2, 2)
    );
    assert_eq!(t.smt_width(), (2, 2));
    assert!(t.notes().is_empty(), "{:?}", t.notes());
    assert_eq!(t.provenance().smt, "thread_siblings_list");
    assert_eq!(t.provenance().package, "package_cpus_list");
    assert_eq!(t.provenance().llc, "cache/index3 (L3 Unified)");
    assert_eq!(t.cpu_node(40), 0);
    assert_eq!(t.cpu_node(60), 1);

    // cpu: one pod per CPU; node by socket (CPUs 0-17 and 36-53 on node 0).
    let cpu = t.pods(Scope::Cpu, 8);
    let nodes: Vec<i32> = (0..72).map(|c| if c % 36 < 18 { 0 } else { 1 }).collect();
    check(&cpu, &(0..72).map(|c| vec![c]).collect::<Vec<_>>(), &nodes);

    // smt: CPUs 0..35 each open a pod, i+36 joins pod i.
    let smt = t.pods(Scope::Smt, 8);
    let pods: Vec<Vec<usize>> = (0..36).map(|i| vec![i, i + 36]).collect();
    let nodes: Vec<i32> = (0..36).map(|i| if i < 18 { 0 } else { 1 }).collect();
    check(&smt, &pods, &nodes);

    let sock0 = cat(&[r(0, 18), r(36, 54)]);
    let sock1 = cat(&[r(18, 36), r(54, 72)]);
    check(
        &t.pods(Scope::Cache, 8),
        &[sock0.clone(), sock1.clone()],
        &[0, 1],
    );
    check(&t.pods(Scope::Numa, 8), &[sock0, sock1], &[0, 1]);

    // cache_shard 8: 18 cores per LLC -> round(18/8) = 2 shards of 9 cores.
    check(
        &t.pods(Scope::CacheShard, 8),
        &[
            cat(&[r(0, 9), r(36, 45)]),
            cat(&[r(9, 18), r(45, 54)]),
            cat(&[r(18, 27), r(54, 63)]),
            cat(&[r(27, 36), r(63, 72)]),
        ],
        &[0, 0, 1, 1],
    );
    // cache_shard 4: round(18/4) = 5 shards, 3 cores each plus one more for
    // the first 18 % 5 = 3: 4+4+4+3+3.
    let mut pods = Vec::new();
    for base in [0, 18] {
        for (a, b) in [(0, 4), (4, 8), (8, 12), (12, 15), (15, 18)] {
            pods.push(cat(&[
                r(base + a, base + b),
                r(base + 36 + a, base + 36 + b),
            ]));
        }
    }
    check(
        &t.pods(Scope::CacheShard, 4),
        &pods,
        &[0, 0, 0, 0, 0, 1, 1, 1, 1, 1],
    );

    check(&t.pods(Scope::System, 8), &[r(0, 72)], &[-1]);
}

#[test]
fn grace_72_cores_one_llc() {
    let t = load(sysfs_gen::grace(), "grace");
    assert_eq!(
        (t.cores(), t.llcs(), t.packages(), t.nr_nodes()),
        (72, 1, 1, 1)
    );
    assert_eq!(t.smt_width(), (1, 1));
    assert!(t.notes().is_empty(), "{:?}", t.notes());
    check(&t.pods(Scope::Cache, 8), &[r(0, 72)], &[0]);
    check(&t.pods(Scope::Numa, 8), &[r(0, 72)], &[0]);
    // smt: every CPU alone.
    let singles: Vec<Vec<usize>> = (0..72).map(|c| vec![c]).collect();
    check(&t.pods(Scope::Smt, 8), &singles, &[0; 72]);
    // cache_shard 8: 72 cores -> nine shards of 8.
    let nine: Vec<Vec<usize>> = (0..9).map(|k| r(8 * k, 8 * k + 8)).collect();
    check(&t.pods(Scope::CacheShard, 8), &nine, &[0; 9]);
    // size 0 behaves as 1: one shard per core.
    check(&t.pods(Scope::CacheShard, 0), &singles, &[0; 72]);
    check(&t.pods(Scope::CacheShard, 1), &singles, &[0; 72]);
    // size 5: round(72/5) = 14 shards; 72/14 = 5, the first 72%14 = 2 get 6.
    let mut pods = vec![r(0, 6), r(6, 12)];
    pods.extend((0..12).map(|k| r(12 + 5 * k, 17 + 5 * k)));
    check(&t.pods(Scope::CacheShard, 5), &pods, &[0; 14]);
    // size 72 or more: one shard.
    check(&t.pods(Scope::CacheShard, 72), &[r(0, 72)], &[0]);
    check(&t.pods(Scope::CacheShard, 1000), &[r(0, 72)], &[0]);
}

#[test]
fn epyc_11_llcs_of_8_smt2_cores() {
    let t = load(sysfs_gen::epyc_11ccd(), "epyc");
    assert_eq!(
        (t.cores(), t.llcs(), t.packages(), t.nr_nodes()),
        (88, 11, 1, 1)
    );
    assert_eq!(t.smt_width(), (2, 2));
    let smt: Vec<Vec<usize>> = (0..88).map(|i| vec![i, i + 88]).collect();
    check(&t.pods(Scope::Smt, 8), &smt, &[0; 88]);
    let ccds: Vec<Vec<usize>> = (0..11)
        .map(|k| cat(&[r(8 * k, 8 * k + 8), r(88 + 8 * k, 88 + 8 * k + 8)]))
        .collect();
    check(&t.pods(Scope::Cache, 8), &ccds, &[0; 11]);
    // 8 cores per LLC, size 8: one shard per LLC, the same as cache.
    check(&t.pods(Scope::CacheShard, 8), &ccds, &[0; 11]);
    // size 4: two shards of 4 cores per CCD.
    let halves: Vec<Vec<usize>> = (0..22)
        .map(|h| cat(&[r(4 * h, 4 * h + 4), r(88 + 4 * h, 88 + 4 * h + 4)]))
        .collect();
    check(&t.pods(Scope::CacheShard, 4), &halves, &[0; 22]);
    check(&t.pods(Scope::Numa, 8), &[r(0, 176)], &[0]);
    check(&t.pods(Scope::System, 8), &[r(0, 176)], &[-1]);
}

#[test]
fn offline_cpus_and_holes() {
    let t = load(sysfs_gen::holes(), "holes");
    let online = cat(&[r(0, 3), r(4, 12), r(16, 20)]);
    assert_eq!(t.online(), online.as_slice());
    assert_eq!(t.possible(), r(0, 24).as_slice());
    assert_eq!(t.nr_cpu_ids(), 24);
    assert_eq!((t.cores(), t.llcs(), t.nr_nodes()), (8, 3, 2));
    assert_eq!(t.smt_width(), (1, 2));
    assert!(t.notes().is_empty(), "{:?}", t.notes());

    let cpu = t.pods(Scope::Cpu, 8);
    assert_eq!(cpu.pods.len(), 15);
    assert_eq!(cpu.cpu_pod.len(), 24);
    for c in [3, 12, 13, 14, 15, 20, 21, 22, 23] {
        assert_eq!(cpu.cpu_pod[c], None, "offline cpu {c}");
    }
    assert_eq!(cpu.cpu_pod[4], Some(3));
    assert_eq!(cpu.cpu_pod[16], Some(11));

    check(
        &t.pods(Scope::Smt, 8),
        &[
            vec![0, 1],
            vec![2],
            vec![4, 5],
            vec![6, 7],
            vec![8, 9],
            vec![10, 11],
            vec![16, 17],
            vec![18, 19],
        ],
        &[0, 0, 0, 0, 1, 1, 1, 1],
    );
    let llc_a = vec![0, 1, 2, 4, 5, 6, 7];
    check(
        &t.pods(Scope::Cache, 8),
        &[llc_a.clone(), r(8, 12), r(16, 20)],
        &[0, 1, 1],
    );
    check(
        &t.pods(Scope::CacheShard, 8),
        &[llc_a.clone(), r(8, 12), r(16, 20)],
        &[0, 1, 1],
    );
    // size 2: LLC A has 4 cores (leaders 0, 2, 4, 6) -> 2 shards of 2; the
    // other LLCs have 2 cores -> one shard each.
    check(
        &t.pods(Scope::CacheShard, 2),
        &[vec![0, 1, 2], r(4, 8), r(8, 12), r(16, 20)],
        &[0, 0, 1, 1],
    );
    check(
        &t.pods(Scope::Numa, 8),
        &[llc_a, cat(&[r(8, 12), r(16, 20)])],
        &[0, 1],
    );
    check(&t.pods(Scope::System, 8), &[online], &[-1]);
}

#[test]
fn no_cache_no_node_directories() {
    let t = load(sysfs_gen::nocache(), "nocache");
    let notes = t.notes().join("\n");
    assert!(notes.contains("LLC = package"), "{notes}");
    assert!(notes.contains("one node 0"), "{notes}");
    assert!(t.provenance().llc.contains("package"));
    assert!(t.summary().contains("LLC = package"));
    assert_eq!(
        (t.cores(), t.llcs(), t.packages(), t.nr_nodes()),
        (4, 2, 2, 1)
    );
    check(&t.pods(Scope::Cache, 8), &[vec![0, 1], vec![2, 3]], &[0, 0]);
    check(
        &t.pods(Scope::CacheShard, 8),
        &[vec![0, 1], vec![2, 3]],
        &[0, 0],
    );
    check(
        &t.pods(Scope::CacheShard, 1),
        &[vec![0], vec![1], vec![2], vec![3]],
        &[0; 4],
    );
    check(&t.pods(Scope::Numa, 8), &[r(0, 4)], &[0]);
}

#[test]
fn no_topology_directory_leaves_each_cpu_alone() {
    let mut m = sysfs_gen::small();
    m.topology = false;
    let root = m.write_tmp("notopo");
    let t = Topology::from_sysfs(&root).unwrap();
    let notes = t.notes().join("\n");
    assert!(notes.contains("thread_siblings_list"), "{notes}");
    assert!(notes.contains("one package"), "{notes}");
    check(
        &t.pods(Scope::Smt, 8),
        &[vec![0], vec![1], vec![2], vec![3]],
        &[0; 4],
    );
    // The caches still say which CPUs share the L3.
    check(&t.pods(Scope::Cache, 8), &[r(0, 4)], &[0]);
}

#[test]
fn older_files_are_used_when_newer_ones_are_missing() {
    // Only core_cpus_list for SMT, physical_package_id for packages.
    let root = sysfs_gen::xeon_2s().write_tmp("older");
    for c in 0..72 {
        let t = root.join(format!("devices/system/cpu/cpu{c}/topology"));
        std::fs::remove_file(t.join("thread_siblings_list")).unwrap();
        std::fs::remove_file(t.join("package_cpus_list")).unwrap();
        std::fs::remove_file(t.join("core_siblings_list")).unwrap();
    }
    // With the lists gone, the package masks still say it.
    let t = Topology::from_sysfs(&root).unwrap();
    assert_eq!(t.provenance().smt, "core_cpus_list");
    assert_eq!(t.provenance().package, "package_cpus (mask)");
    assert_eq!((t.cores(), t.packages()), (36, 2));
    for c in 0..72 {
        let t = root.join(format!("devices/system/cpu/cpu{c}/topology"));
        std::fs::remove_file(t.join("package_cpus")).unwrap();
        std::fs::remove_file(t.join("core_siblings")).unwrap();
    }
    let t = Topology::from_sysfs(&root).unwrap();
    assert_eq!(t.provenance().smt, "core_cpus_list");
    assert_eq!(t.provenance().package, "physical_package_id");
    assert_eq!((t.cores(), t.packages()), (36, 2));
    assert_eq!(t.pods(Scope::Smt, 8).pods[5], vec![5, 41]);
}

#[test]
fn restriction_intersects_pods_cut_for_the_whole_machine() {
    let t = load(sysfs_gen::xeon_2s(), "xeon-restrict");
    // Shards stay where the whole LLC put them: 0-8,36-44 | 9-17,45-53.
    let r1 = t.restrict_to(&[0, 1, 2, 3, 36, 37]).unwrap();
    assert!(r1.is_restricted());
    assert_eq!(r1.online(), &[0, 1, 2, 3, 36, 37]);
    assert_eq!(r1.machine_online().len(), 72);
    check(
        &r1.pods(Scope::CacheShard, 8),
        &[vec![0, 1, 2, 3, 36, 37]],
        &[0],
    );
    let r2 = t.restrict_to(&[50, 9, 0, 100]).unwrap();
    check(
        &r2.pods(Scope::CacheShard, 8),
        &[vec![0], vec![9, 50]],
        &[0, 0],
    );
    check(
        &r2.pods(Scope::Smt, 8),
        &[vec![0], vec![9], vec![50]],
        &[0, 0, 0],
    );
    // A pod keeps the node the whole pod had.
    let r3 = t.restrict_to(&[20]).unwrap();
    check(&r3.pods(Scope::System, 8), &[vec![20]], &[-1]);
    check(&r3.pods(Scope::Numa, 8), &[vec![20]], &[1]);
    assert!(r3.notes().iter().any(|n| n.contains("restricted")));
    let err = t.restrict_to(&[500]).unwrap_err().to_string();
    assert!(err.contains("500"), "{err}");
}

#[test]
fn masks_are_wq_dump_format() {
    let t = load(sysfs_gen::xeon_2s(), "xeon-mask");
    let cs = t.pods(Scope::CacheShard, 8);
    // 0-8 and 36-44: word 0 = 0x1ff, word 1 = bits 4..12 = 0x1ff0.
    assert_eq!(cpumask_str(&cs.pods[0]), "0x1ff 00001ff0");
    // 27-35 and 63-71: word 0 bits 27..31, word 1 bits 0..3 and 31, word 2
    // bits 0..7.
    assert_eq!(cpumask_str(&cs.pods[3]), "0xf8000000 0x8000000f 000000ff");
}

#[test]
fn this_machine() {
    let online = std::path::Path::new("/sys/devices/system/cpu/online");
    if !online.exists() {
        eprintln!("no /sys here; skipped");
        return;
    }
    let t = Topology::detect().expect("reading /sys");
    eprintln!("{}", t.summary());
    assert!(!t.online().is_empty());
    for &scope in Scope::ALL {
        let pt = t.pods(scope, 8);
        let mut all: Vec<usize> = pt.pods.concat();
        all.sort_unstable();
        assert_eq!(all, t.online(), "{scope}");
    }
    let a = t.restrict_to_affinity().expect("sched_getaffinity");
    assert!(!a.online().is_empty());
    assert!(a.online().iter().all(|c| t.online().contains(c)));
}

#[test]
fn disagreeing_sibling_lists_are_merged_and_reported() {
    // cpu0 says it shares a core with cpu2, cpu2 says it is alone.
    let root = sysfs_gen::small().write_tmp("disagree");
    let t = root.join("devices/system/cpu/cpu0/topology/thread_siblings_list");
    std::fs::write(t, "0-2\n").unwrap();
    let t = Topology::from_sysfs(&root).unwrap();
    let notes = t.notes().join("\n");
    assert!(notes.contains("SMT sibling lists of CPUs"), "{notes}");
    // 0 lists 1 and 2; 1 lists 0; 2 and 3 list each other: one component.
    check(&t.pods(Scope::Smt, 8), &[r(0, 4)], &[0]);
}
