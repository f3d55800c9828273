//! Properties of pods over random synthetic machines.
//!
//! The ground truth is the spec itself: with hwloc's depth-first numbering,
//! CPU `c` of `pack:P numa:N l3:L core:C pu:T` is thread `c % T` of core
//! `c / T`, in LLC `c / (C*T)`, node `c / (L*C*T)`.

use std::collections::{BTreeMap, BTreeSet};

use cmwq::topology::{PodType, Scope, Topology, format_cpulist, parse_cpulist};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Spec {
    pack: usize,
    numa: usize,
    l3: usize,
    core: usize,
    pu: usize,
    /// Which optional tokens to leave out when their count is 1.
    omit: [bool; 5],
}

impl Spec {
    fn text(&self) -> String {
        let levels = [
            ("pack", self.pack),
            ("numa", self.numa),
            ("l3", self.l3),
            ("core", self.core),
            ("pu", self.pu),
        ];
        let mut toks: Vec<String> = levels
            .iter()
            .zip(self.omit)
            .filter(|((_, n), omit)| !(*n == 1 && *omit))
            .map(|((l, n), _)| format!("{l}:{n}"))
            .collect();
        if toks.is_empty() {
            toks.push("pu:1".into());
        }
        toks.join(" ")
    }
    fn nr(&self) -> usize {
        self.pack * self.numa * self.l3 * self.core * self.pu
    }
    fn core_of(&self, c: usize) -> usize {
        c / self.pu
    }
    fn llc_of(&self, c: usize) -> usize {
        c / (self.core * self.pu)
    }
    fn node_of(&self, c: usize) -> usize {
        c / (self.l3 * self.core * self.pu)
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        1usize..=3,
        1usize..=2,
        1usize..=4,
        1usize..=20,
        1usize..=4,
        any::<[bool; 5]>(),
    )
        .prop_map(|(pack, numa, l3, core, pu, omit)| Spec {
            pack,
            numa,
            l3,
            core,
            pu,
            omit,
        })
}

/// The kernel's `init_pod_type()`, written out literally (O(N²)), over
/// `cpus` ascending with predicate `share`, `pod_node` from `node`.
fn init_pod_type(
    cpus: &[usize],
    share: impl Fn(usize, usize) -> bool,
    node: impl Fn(usize) -> i32,
) -> (Vec<Vec<usize>>, Vec<i32>) {
    let mut cpu_pod = BTreeMap::new();
    let mut nr_pods = 0;
    for &cur in cpus {
        for &pre in cpus {
            if pre >= cur {
                cpu_pod.insert(cur, nr_pods);
                nr_pods += 1;
                break;
            }
            if share(cur, pre) {
                let p = cpu_pod[&pre];
                cpu_pod.insert(cur, p);
                break;
            }
        }
    }
    let mut pods = vec![Vec::new(); nr_pods];
    let mut nodes = vec![0; nr_pods];
    for &c in cpus {
        pods[cpu_pod[&c]].push(c);
        nodes[cpu_pod[&c]] = node(c);
    }
    (pods, nodes)
}

/// Pods partition exactly `online`, sorted, in order of lowest CPU, and
/// `cpu_pod` agrees.
fn assert_partition(pt: &PodType, online: &[usize], what: &str) {
    let mut seen = BTreeSet::new();
    for (i, p) in pt.pods.iter().enumerate() {
        assert!(!p.is_empty(), "{what}: empty pod {i}");
        assert!(
            p.windows(2).all(|w| w[0] < w[1]),
            "{what}: pod {i} unsorted"
        );
        for &c in p {
            assert!(seen.insert(c), "{what}: cpu {c} in two pods");
            assert_eq!(pt.cpu_pod[c], Some(i), "{what}: cpu_pod[{c}]");
        }
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        online,
        "{what}: not a partition of online"
    );
    assert!(
        pt.pods.windows(2).all(|w| w[0][0] < w[1][0]),
        "{what}: pods not in init_pod_type order"
    );
    assert_eq!(pt.pod_node.len(), pt.pods.len());
    let covered = pt.cpu_pod.iter().filter(|p| p.is_some()).count();
    assert_eq!(covered, online.len(), "{what}: cpu_pod covers other CPUs");
}

/// Every pod of `inner` lies inside one pod of `outer`.
fn assert_nested(inner: &PodType, outer: &PodType, what: &str) {
    for p in &inner.pods {
        let o = outer.cpu_pod[p[0]];
        assert!(
            p.iter().all(|&c| outer.cpu_pod[c] == o),
            "{what}: {p:?} straddles pods"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, .. ProptestConfig::default() })]

    #[test]
    fn pods_follow_the_kernel_rules(s in spec(), size in 0usize..=14) {
        let t = Topology::from_synthetic(&s.text()).unwrap();
        let n = s.nr();
        let online: Vec<usize> = (0..n).collect();
        prop_assert_eq!(t.online(), online.as_slice());
        prop_assert_eq!(t.nr_cpu_ids(), n);
        prop_assert_eq!(t.cores(), n / s.pu);
        prop_assert_eq!(t.llcs(), s.pack * s.numa * s.l3);
        prop_assert_eq!(t.nr_nodes(), s.pack * s.numa);
        prop_assert_eq!(t.smt_width(), (s.pu, s.pu));
        prop_assert!(t.notes().is_empty(), "{:?}", t.notes());

        let pods: BTreeMap<Scope, PodType> = Scope::ALL.iter().copied().map(|sc| (sc, t.pods(sc, size))).collect();
        for (sc, pt) in &pods {
            assert_partition(pt, &online, sc.name());
        }
        // The scopes with a plain predicate match a literal init_pod_type.
        let node = |c: usize| s.node_of(c) as i32;
        let expect = [
            (Scope::Cpu, init_pod_type(&online, |_, _| false, node)),
            (Scope::Smt, init_pod_type(&online, |a, b| s.core_of(a) == s.core_of(b), node)),
            (Scope::Cache, init_pod_type(&online, |a, b| s.llc_of(a) == s.llc_of(b), node)),
            (Scope::Numa, init_pod_type(&online, |a, b| s.node_of(a) == s.node_of(b), node)),
            (Scope::System, init_pod_type(&online, |_, _| true, |_| -1)),
        ];
        for (sc, (p, nd)) in expect {
            prop_assert_eq!(&pods[&sc].pods, &p, "{}", sc);
            prop_assert_eq!(&pods[&sc].pod_node, &nd, "{}", sc);
        }

        let (smt, shard, cache) = (&pods[&Scope::Smt], &pods[&Scope::CacheShard], &pods[&Scope::Cache]);
        assert_nested(smt, shard, "smt in cache_shard");
        assert_nested(shard, cache, "cache_shard in cache");

        // Per LLC: shard count is max(1, round_closest(cores / size)), shard
        // sizes in cores differ by at most one, larger shards come first,
        // and each shard is a run of consecutive cores.
        let sz = size.max(1);
        for llc in &cache.pods {
            let cores: BTreeSet<usize> = llc.iter().map(|&c| s.core_of(c)).collect();
            let nr_cores = cores.len();
            let want = ((2 * nr_cores + sz) / (2 * sz)).max(1);
            let shards: BTreeSet<usize> = llc.iter().map(|&c| shard.cpu_pod[c].unwrap()).collect();
            prop_assert_eq!(shards.len(), want, "llc {}: cores {} size {}", format_cpulist(llc), nr_cores, sz);
            let sizes: Vec<usize> = shards
                .iter()
                .map(|&p| shard.pods[p].iter().map(|&c| s.core_of(c)).collect::<BTreeSet<_>>().len())
                .collect();
            let (mn, mx) = (*sizes.iter().min().unwrap(), *sizes.iter().max().unwrap());
            prop_assert!(mx - mn <= 1, "sizes {:?}", sizes);
            prop_assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "large shards first: {:?}", sizes);
            prop_assert_eq!(sizes.iter().sum::<usize>(), nr_cores);
            for &p in &shards {
                let cs: Vec<usize> = shard.pods[p].iter().map(|&c| s.core_of(c)).collect::<BTreeSet<_>>().into_iter().collect();
                prop_assert!(cs.windows(2).all(|w| w[1] == w[0] + 1), "shard cores {:?}", cs);
            }
        }
    }

    #[test]
    fn restricted_pods_partition_the_allowed_cpus(s in spec(), size in 0usize..=10, mask in proptest::collection::vec(any::<bool>(), 1..400)) {
        let t = Topology::from_synthetic(&s.text()).unwrap();
        let allowed: Vec<usize> = (0..s.nr()).filter(|&c| mask[c % mask.len()]).collect();
        match t.restrict_to(&allowed) {
            Err(e) => {
                prop_assert!(allowed.is_empty());
                prop_assert!(e.to_string().contains("cpu restriction"));
            }
            Ok(r) => {
                prop_assert_eq!(r.online(), allowed.as_slice());
                for &sc in Scope::ALL {
                    let full = t.pods(sc, size);
                    let part = r.pods(sc, size);
                    assert_partition(&part, &allowed, sc.name());
                    assert_nested(&part, &full, "restricted in full");
                    // Each full pod that keeps CPUs becomes exactly one pod.
                    let kept: BTreeSet<usize> = allowed.iter().map(|&c| full.cpu_pod[c].unwrap()).collect();
                    prop_assert_eq!(kept.len(), part.pods.len());
                    for p in &part.pods {
                        let fp = full.cpu_pod[p[0]].unwrap();
                        prop_assert_eq!(part.pod_node[part.cpu_pod[p[0]].unwrap()], full.pod_node[fp]);
                    }
                }
            }
        }
    }

    #[test]
    fn cpulists_round_trip(set in proptest::collection::btree_set(0usize..300, 0..60)) {
        let v: Vec<usize> = set.into_iter().collect();
        let text = format_cpulist(&v);
        prop_assert_eq!(parse_cpulist(&format!(" {text}\n")).unwrap(), v);
    }

    #[test]
    fn cpumask_matches_the_python_algorithm(set in proptest::collection::btree_set(0usize..200, 0..40)) {
        // wq_dump.py's loop, transcribed: walk CPUs ascending, flushing a
        // word with hex() whenever the next CPU is 32 or more beyond base.
        let v: Vec<usize> = set.into_iter().collect();
        let mut out = String::new();
        let (mut base, mut w) = (0usize, 0u64);
        for &c in &v {
            while c - base >= 32 {
                out += &format!("{w:#x} ");
                base += 32;
                w = 0;
            }
            w |= 1 << (c - base);
        }
        if w > 0 {
            out += &format!("{w:08x}");
        }
        prop_assert_eq!(cmwq::topology::cpumask_str(&v), out.trim());
    }
}

#[test]
fn kernel_shard_examples() {
    // From the CACHE_SHARD patch: 36 cores -> 8+7+7+7+7; 72 -> 9x8;
    // 1..=11 -> one pod; 12 -> 2x6.
    let shard_sizes = |cores: usize| -> Vec<usize> {
        let t = Topology::from_synthetic(&format!("pack:1 l3:1 core:{cores} pu:2")).unwrap();
        t.pods(Scope::CacheShard, 8)
            .pods
            .iter()
            .map(|p| p.len() / 2)
            .collect()
    };
    assert_eq!(shard_sizes(36), vec![8, 7, 7, 7, 7]);
    assert_eq!(shard_sizes(72), vec![8; 9]);
    for n in 1..=11 {
        assert_eq!(shard_sizes(n), vec![n], "{n} cores");
    }
    assert_eq!(shard_sizes(12), vec![6, 6]);
}

#[test]
fn synthetic_machines_of_the_issue() {
    let grace = Topology::from_synthetic("pack:1 l3:1 core:72 pu:1").unwrap();
    assert_eq!(grace.online().len(), 72);
    assert_eq!(grace.pods(Scope::Cache, 8).pods.len(), 1);
    assert_eq!(grace.pods(Scope::CacheShard, 8).pods.len(), 9);
    let epyc = Topology::from_synthetic("pack:1 l3:11 core:8 pu:2").unwrap();
    assert_eq!(epyc.online().len(), 176);
    assert_eq!(epyc.cores(), 88);
    let cache = epyc.pods(Scope::Cache, 8);
    assert_eq!(cache.pods.len(), 11);
    assert_eq!(cache.pods[1], (16..32).collect::<Vec<_>>());
    assert_eq!(epyc.pods(Scope::CacheShard, 8), cache);
    // hwloc numbering: siblings are adjacent.
    assert_eq!(epyc.pods(Scope::Smt, 8).pods[3], vec![6, 7]);
    let two = Topology::from_synthetic("pack:2 numa:1 l3:4 core:8 pu:2").unwrap();
    assert_eq!(
        (
            two.online().len(),
            two.llcs(),
            two.packages(),
            two.nr_nodes()
        ),
        (128, 8, 2, 2)
    );
    assert_eq!(two.pods(Scope::Numa, 8).pod_node, vec![0, 1]);
    assert_eq!(two.source(), "synthetic:pack:2 numa:1 l3:4 core:8 pu:2");
    // l2/l1 levels multiply cores but no scope sees them.
    let l2 = Topology::from_synthetic("l3:1 l2:4 core:2").unwrap();
    assert_eq!((l2.online().len(), l2.llcs()), (8, 1));
}
