//! Sysfs of every era: trees from old and new kernels and from dumps that
//! tools record must give the kernel's pods, and say in the notes and the
//! provenance what was derived from what.
//!
//! Each machine is written by `fixtures/sysfs_gen.rs` in one style (no
//! `cpu/online`, masks only, NUL-padded files, sparse CPU or node numbering,
//! nodes without CPUs); the expected pods are worked out by hand from the
//! machine's description and the kernel's rules, per scope.

#[path = "fixtures/sysfs_gen.rs"]
mod sysfs_gen;

use cmwq::topology::{PodType, Scope, Topology};
use sysfs_gen::Style;

/// Checks pods, pod_node and that cpu_pod agrees with pods.
fn check(pt: &PodType, pods: &[Vec<usize>], nodes: &[i32], what: &str) {
    assert_eq!(pt.pods, pods, "{what}: pods");
    assert_eq!(pt.pod_node, nodes, "{what}: pod_node");
    for (i, p) in pods.iter().enumerate() {
        for &c in p {
            assert_eq!(pt.cpu_pod[c], Some(i), "{what}: cpu_pod[{c}]");
        }
    }
    let covered: usize = pods.iter().map(Vec::len).sum();
    assert_eq!(
        pt.cpu_pod.iter().filter(|p| p.is_some()).count(),
        covered,
        "{what}: cpu_pod covers other CPUs"
    );
}

/// Checks every scope (cache_shard at `size`).
fn check_all(t: &Topology, size: usize, want: [(&[Vec<usize>], &[i32]); 6]) {
    for (scope, (pods, nodes)) in Scope::ALL.iter().copied().zip(want) {
        check(&t.pods(scope, size), pods, nodes, scope.name());
    }
}

fn load(m: sysfs_gen::Machine, name: &str) -> Topology {
    let root = m.write_tmp(name);
    Topology::from_sysfs(&root).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn notes(t: &Topology) -> String {
    t.notes().join("\n")
}

fn singles(cpus: &[usize]) -> Vec<Vec<usize>> {
    cpus.iter().map(|&c| vec![c]).collect()
}

#[test]
fn old_kernel_with_masks_only() {
    let t = load(sysfs_gen::old_masks_only(), "era-masks");
    assert_eq!(t.online(), &[0, 1, 2, 3, 4, 5, 6, 7]);
    assert!(t.notes().is_empty(), "{:?}", t.notes());
    let p = t.provenance();
    assert_eq!(p.smt, "thread_siblings (mask)");
    assert_eq!(p.package, "core_siblings (mask)");
    assert_eq!(p.llc, "cache/index3 (L3 Unified) shared_cpu_map (mask)");
    assert_eq!(p.node, "node*/cpumap (mask)");
    assert_eq!(
        (t.cores(), t.packages(), t.llcs(), t.nr_nodes()),
        (4, 2, 2, 2)
    );
    let smt = vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]];
    let sockets = vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]];
    check_all(
        &t,
        8,
        [
            (
                &singles(&[0, 1, 2, 3, 4, 5, 6, 7]),
                &[0, 0, 1, 1, 0, 0, 1, 1],
            ),
            (&smt, &[0, 0, 1, 1]),
            (&sockets, &[0, 1]),
            // Two cores per LLC: round(2 / 8) = 0 -> one shard.
            (&sockets, &[0, 1]),
            (&sockets, &[0, 1]),
            (&[vec![0, 1, 2, 3, 4, 5, 6, 7]], &[-1]),
        ],
    );
    // Shards of one core keep SMT siblings together.
    check(
        &t.pods(Scope::CacheShard, 1),
        &smt,
        &[0, 0, 1, 1],
        "cache_shard 1",
    );
}

#[test]
fn masks_and_lists_give_the_same_pods() {
    let mut m = sysfs_gen::old_masks_only();
    m.style = Style::MODERN;
    let modern = load(m, "era-modern");
    let old = load(sysfs_gen::old_masks_only(), "era-old");
    for &scope in Scope::ALL {
        for size in [0, 1, 2, 8] {
            assert_eq!(modern.pods(scope, size), old.pods(scope, size), "{scope}");
        }
    }
    assert_eq!(modern.provenance().smt, "thread_siblings_list");
}

#[test]
fn no_cpu_online_file_and_sparse_cpu_numbering() {
    let t = load(sysfs_gen::sparse_no_online(), "era-noonline");
    assert_eq!(t.online(), &[0, 2, 5]);
    assert_eq!(t.possible(), &[0, 2, 5, 7]);
    assert_eq!(t.nr_cpu_ids(), 8);
    let n = notes(&t);
    assert!(
        n.contains("no cpu/online: online CPUs 0,2,5 derived from the cpuN directories"),
        "{n}"
    );
    assert!(n.contains("CPUs 0 have no online file: online"), "{n}");
    assert!(n.contains("CPUs 7 offline (online file 0)"), "{n}");
    assert!(n.contains("possible CPUs = the cpuN directories"), "{n}");
    assert!(t.summary().contains("derived from the cpuN directories"));
    check_all(
        &t,
        8,
        [
            (&singles(&[0, 2, 5]), &[0, 0, 0]),
            (&[vec![0, 2], vec![5]], &[0, 0]),
            (&[vec![0, 2, 5]], &[0]),
            (&[vec![0, 2, 5]], &[0]),
            (&[vec![0, 2, 5]], &[0]),
            (&[vec![0, 2, 5]], &[-1]),
        ],
    );
    // Two cores, shards of one: the siblings 0 and 2 stay together.
    check(
        &t.pods(Scope::CacheShard, 1),
        &[vec![0, 2], vec![5]],
        &[0, 0],
        "cache_shard 1",
    );
    let cpu = t.pods(Scope::Cpu, 8);
    for c in [1, 3, 4, 6, 7] {
        assert_eq!(cpu.cpu_pod[c], None, "cpu {c} is no online CPU");
    }
}

#[test]
fn an_online_file_that_is_not_0_or_1_is_an_error() {
    let root = sysfs_gen::sparse_no_online().write_tmp("era-badonline");
    let f = root.join("devices/system/cpu/cpu5/online");
    std::fs::write(&f, "yes\n").unwrap();
    let err = Topology::from_sysfs(&root).unwrap_err().to_string();
    assert!(err.contains(&f.display().to_string()), "{err}");
    assert!(err.contains("\"yes\""), "{err}");
}

#[test]
fn trailing_nuls_and_whitespace_are_ignored_and_noted() {
    let t = load(sysfs_gen::nul_padded(), "era-nul");
    let clean = {
        let mut m = sysfs_gen::nul_padded();
        m.style.trailer = "\n";
        load(m, "era-nul-clean")
    };
    let n = notes(&t);
    assert!(n.contains("trailing NUL bytes ignored in"), "{n}");
    assert_eq!(t.notes().len(), 1, "{n}");
    assert!(clean.notes().is_empty(), "{:?}", clean.notes());
    assert_eq!(t.provenance(), clean.provenance());
    let smt = vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]];
    let halves = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
    let all = vec![(0..8).collect::<Vec<usize>>()];
    check_all(
        &t,
        8,
        [
            (
                &singles(&[0, 1, 2, 3, 4, 5, 6, 7]),
                &[0, 0, 0, 0, 1, 1, 1, 1],
            ),
            (&smt, &[0, 0, 1, 1]),
            (&halves, &[0, 1]),
            (&halves, &[0, 1]),
            (&halves, &[0, 1]),
            (&all, &[-1]),
        ],
    );
    check(
        &t.pods(Scope::CacheShard, 1),
        &smt,
        &[0, 0, 1, 1],
        "cache_shard 1",
    );
    for &scope in Scope::ALL {
        assert_eq!(t.pods(scope, 1), clean.pods(scope, 1), "{scope}");
    }
}

#[test]
fn a_nul_inside_a_file_is_garbage() {
    let root = sysfs_gen::small().write_tmp("era-nul-inside");
    let f = root.join("devices/system/cpu/cpu1/topology/thread_siblings_list");
    std::fs::write(&f, "0\0-1\n").unwrap();
    let err = Topology::from_sysfs(&root).unwrap_err().to_string();
    assert!(err.contains(&f.display().to_string()), "{err}");
}

#[test]
fn sparse_node_numbering_and_nodes_without_cpus() {
    for (style, name) in [
        (Style::MODERN, "cpulist"),
        (Style::MASKS_ONLY, "cpumap (mask)"),
    ] {
        let mut m = sysfs_gen::sparse_nodes();
        m.style = style;
        let t = load(m, "era-nodes");
        assert_eq!(t.provenance().node, format!("node*/{name}"));
        assert!(t.notes().is_empty(), "{:?}", t.notes());
        // Node ids 0, 1, 3, 5: nr_node_ids is one more than the highest.
        assert_eq!(t.nr_nodes(), 6);
        assert_eq!(t.nodes(), vec![0, 3]);
        assert_eq!((t.cpu_node(2), t.cpu_node(6)), (0, 3));
        let halves = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        let all = vec![(0..8).collect::<Vec<usize>>()];
        let eight = singles(&[0, 1, 2, 3, 4, 5, 6, 7]);
        let nodes8 = [0, 0, 0, 0, 3, 3, 3, 3];
        check_all(
            &t,
            8,
            [
                (&eight, &nodes8),
                (&eight, &nodes8),
                (&halves, &[0, 3]),
                // Four cores per LLC: round(4 / 8) = 1 shard.
                (&halves, &[0, 3]),
                (&halves, &[0, 3]),
                (&all, &[-1]),
            ],
        );
        check(
            &t.pods(Scope::CacheShard, 2),
            &[vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]],
            &[0, 0, 3, 3],
            "cache_shard 2",
        );
    }
}

#[test]
fn a_dump_with_masks_and_node_links_only() {
    let t = load(sysfs_gen::dump_links(), "era-dump");
    let online = [0, 1, 2, 3, 8, 9, 10, 11];
    assert_eq!(t.online(), &online);
    assert_eq!(t.nr_cpu_ids(), 12);
    let p = t.provenance();
    assert_eq!(p.smt, "thread_siblings (mask)");
    assert_eq!(p.llc, "cache/index3 (L3 Unified) shared_cpu_map (mask)");
    assert_eq!(p.node, "node*/cpuN links");
    let n = notes(&t);
    assert!(n.contains("online CPUs 0-3,8-11 derived"), "{n}");
    assert!(
        n.contains("no cpulist or cpumap in nodes 0-1: their CPUs are the cpuN entries"),
        "{n}"
    );
    let smt = vec![vec![0, 1], vec![2, 3], vec![8, 9], vec![10, 11]];
    let groups = vec![vec![0, 1, 2, 3], vec![8, 9, 10, 11]];
    check_all(
        &t,
        8,
        [
            (&singles(&online), &[0, 0, 0, 0, 1, 1, 1, 1]),
            (&smt, &[0, 0, 1, 1]),
            (&groups, &[0, 1]),
            (&groups, &[0, 1]),
            (&groups, &[0, 1]),
            (&[online.to_vec()], &[-1]),
        ],
    );
    check(
        &t.pods(Scope::CacheShard, 1),
        &smt,
        &[0, 0, 1, 1],
        "cache_shard 1",
    );
}

#[test]
fn leading_zeros_do_not_make_a_second_cpu() {
    // `cpu01` is not how the kernel names cpu1: it must not be read as cpu1
    // again when cpu/online is derived.
    let root = sysfs_gen::sparse_no_online().write_tmp("era-zeros");
    let cpu = root.join("devices/system/cpu");
    std::fs::create_dir_all(cpu.join("cpu05/topology")).unwrap();
    std::fs::create_dir_all(cpu.join("cpu1x")).unwrap();
    let t = Topology::from_sysfs(&root).unwrap();
    assert_eq!(t.online(), &[0, 2, 5]);
}

#[test]
fn a_list_and_a_mask_with_the_same_text_are_not_confused() {
    // cpu1's list "1" is CPU 1; cpu2 has only a mask, "1", which is CPU 0.
    // Reading the mask as the list just read would put cpu2 with cpu1.
    let mut m = sysfs_gen::small();
    m.place = |c| sysfs_gen::Place {
        core: c,
        package: 0,
        llc: 0,
        node: 0,
    };
    let root = m.write_tmp("era-same-text");
    let topo = |c: usize| root.join(format!("devices/system/cpu/cpu{c}/topology"));
    for name in ["thread_siblings_list", "core_cpus_list"] {
        std::fs::remove_file(topo(2).join(name)).unwrap();
    }
    std::fs::write(topo(2).join("thread_siblings"), "1\n").unwrap();
    let t = Topology::from_sysfs(&root).unwrap();
    assert!(t.provenance().smt.contains("thread_siblings (mask)"));
    check(
        &t.pods(Scope::Smt, 8),
        &[vec![0, 2], vec![1], vec![3]],
        &[0, 0, 0],
        "smt",
    );
    // cpu2 says it shares with cpu0, cpu0 says it is alone: cpu0 disagrees.
    assert!(
        notes(&t).contains("SMT sibling lists of CPUs 0 disagree"),
        "{}",
        notes(&t)
    );
}
