//! Live attrs (issue 4): an unbound workqueue's scope, strictness, cpumask, nice
//! and max_active change while work flows, as the kernel's sysfs knobs do.
//! Invariants: every successful queue runs exactly once, an item never runs on
//! two workers at once, an ordered queue keeps its order across changes, and
//! new work lands on the new pools.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use cmwq::topology::{Scope, Topology};
use cmwq::{Error, Work, Workqueue};

fn synth(spec: &str) -> Arc<Topology> {
    Arc::new(Topology::from_synthetic(spec).unwrap())
}

/// A work item that counts its runs and checks it never overlaps itself.
struct Counted {
    work: Work,
    runs: Arc<AtomicUsize>,
    overlap: Arc<AtomicBool>,
}

fn counted() -> Counted {
    let runs = Arc::new(AtomicUsize::new(0));
    let overlap = Arc::new(AtomicBool::new(false));
    let busy = Arc::new(AtomicBool::new(false));
    let (r, o) = (runs.clone(), overlap.clone());
    let work = Work::new(move || {
        if busy.swap(true, Ordering::SeqCst) {
            o.store(true, Ordering::SeqCst);
        }
        r.fetch_add(1, Ordering::SeqCst);
        std::hint::black_box((0..200).sum::<u64>());
        busy.store(false, Ordering::SeqCst);
    });
    Counted {
        work,
        runs,
        overlap,
    }
}

/// The pool of the calling worker of an unbound pool, from its name
/// (`cmwq/u<pool>:<worker>`).
fn my_pool() -> Option<u32> {
    let name = thread::current().name()?.to_string();
    let rest = name.strip_prefix("cmwq/u")?;
    rest.split(':').next()?.parse().ok()
}

#[test]
fn every_queue_runs_once_across_attr_changes() {
    let wq = Workqueue::builder("attrs-stress")
        .unbound()
        .topology(synth("pack:1 l3:2 core:4 pu:2"))
        .affinity_scope(Scope::Cpu)
        .build()
        .unwrap();
    let items: Arc<Vec<Counted>> = Arc::new((0..64).map(|_| counted()).collect());
    let queued = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let (wq, items, queued, stop) =
                (wq.clone(), items.clone(), queued.clone(), stop.clone());
            thread::spawn(move || {
                let mut i = p;
                while !stop.load(Ordering::SeqCst) {
                    let it = &items[i % items.len()];
                    if wq.queue(&it.work) {
                        queued.fetch_add(1, Ordering::SeqCst);
                    }
                    i += 7;
                    if i % 512 == 0 {
                        thread::yield_now();
                    }
                }
            })
        })
        .collect();
    let scopes = [
        Scope::Cpu,
        Scope::Smt,
        Scope::Cache,
        Scope::CacheShard,
        Scope::System,
    ];
    let masks: [&[usize]; 4] = [
        &[0, 1, 2, 3],
        &[4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
        &[3],
        &[0, 15],
    ];
    for round in 0..60 {
        match round % 5 {
            0 => wq
                .set_affinity_scope(scopes[round / 5 % scopes.len()])
                .unwrap(),
            1 => wq.set_affinity_strict(round % 2 == 0).unwrap(),
            2 => wq.set_cpumask(masks[round / 5 % masks.len()]).unwrap(),
            3 => wq.set_nice([0, 5, 2][round / 5 % 3]).unwrap(),
            _ => wq.set_max_active([1, 4, 1024][round / 5 % 3]).unwrap(),
        }
        if round % 10 == 0 {
            wq.flush();
        }
        thread::yield_now();
    }
    stop.store(true, Ordering::SeqCst);
    for p in producers {
        p.join().unwrap();
    }
    wq.flush();
    let runs: usize = items.iter().map(|c| c.runs.load(Ordering::SeqCst)).sum();
    assert_eq!(
        runs,
        queued.load(Ordering::SeqCst),
        "every true queue runs exactly once"
    );
    assert!(queued.load(Ordering::SeqCst) > 0);
    assert!(
        items.iter().all(|c| !c.overlap.load(Ordering::SeqCst)),
        "an item ran on two workers at once"
    );
    let st = wq.stats();
    assert_eq!(st.started as usize, runs);
    assert_eq!(st.completed, st.started);
}

#[test]
fn new_work_goes_to_the_new_pools() {
    let wq = Workqueue::builder("attrs-move")
        .unbound()
        .topology(synth("pack:1 l3:1 core:8 pu:1"))
        .affinity_scope(Scope::Cpu)
        .build()
        .unwrap();
    let (before, _) = wq.cpu_pools();
    // The 8 synthetic CPUs fold onto the real ones (i -> i mod n); the even
    // ones all map to real CPU 0, so this mask needs pools of other cpus.
    wq.set_cpumask(&[0, 2, 4, 6]).unwrap();
    let (after, dfl) = wq.cpu_pools();
    assert_eq!(wq.attrs().cpumask, vec![0, 2, 4, 6]);
    for c in 0..8 {
        assert_eq!(after[c].is_some(), c % 2 == 0, "cpu {c}: {after:?}");
    }
    let old: HashSet<u32> = before.iter().flatten().copied().collect();
    let new: HashSet<u32> = after.iter().flatten().copied().chain(dfl).collect();
    assert!(
        old.is_disjoint(&new),
        "the new cpumask needs new pools: {old:?} {new:?}"
    );
    // Work queued now runs on a worker of a new pool.
    let seen = Arc::new(Mutex::new(Vec::new()));
    for cpu in [0, 2, 4, 6] {
        let s = seen.clone();
        let w = Work::new(move || s.lock().unwrap().push(my_pool()));
        assert!(wq.queue_on(cpu, &w).unwrap());
        w.flush();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    for p in seen.iter() {
        let p = p.expect("runs on a cmwq worker");
        assert!(new.contains(&p), "ran on pool {p}, new pools {new:?}");
    }
    // A scope change rebuilds the pods: System is one pod for the whole mask.
    wq.set_affinity_scope(Scope::System).unwrap();
    let (sys, _) = wq.cpu_pools();
    let distinct: HashSet<u32> = sys.iter().flatten().copied().collect();
    assert_eq!(distinct.len(), 1, "{sys:?}");
    assert_eq!(wq.nr_pwqs(), 2, "one pod pwq and the default pwq");
}

#[test]
fn ordered_stays_ordered_across_changes() {
    // Two NUMA nodes: the masks below alternate between them, so the old and the
    // new pwq draw on different node budgets and only plugging keeps the order.
    let wq = Workqueue::builder("attrs-ordered")
        .ordered()
        .topology(synth("pack:1 numa:2 l3:1 core:4 pu:1"))
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let busy = Arc::new(AtomicBool::new(false));
    let overlap = Arc::new(AtomicBool::new(false));
    let n = 2000;
    let works: Vec<Work> = (0..n)
        .map(|i| {
            let (log, busy, overlap) = (log.clone(), busy.clone(), overlap.clone());
            Work::new(move || {
                if busy.swap(true, Ordering::SeqCst) {
                    overlap.store(true, Ordering::SeqCst);
                }
                log.lock().unwrap().push(i);
                let t = std::time::Instant::now();
                while t.elapsed() < std::time::Duration::from_micros(30) {
                    std::hint::spin_loop();
                }
                busy.store(false, Ordering::SeqCst);
            })
        })
        .collect();
    // Queue in chunks and change attrs between chunks, so every generation of
    // pwqs still holds items when the next one gets its first.
    for (chunk, ws) in works.chunks(n / 40).enumerate() {
        for w in ws {
            assert!(wq.queue(w));
        }
        let m: &[usize] = if chunk % 2 == 0 {
            &[4, 5, 6, 7]
        } else {
            &[0, 1, 2]
        };
        wq.set_cpumask(m).unwrap();
        if chunk % 3 == 0 {
            wq.set_nice(if chunk % 2 == 0 { 1 } else { 0 }).unwrap();
        }
    }
    wq.flush();
    let log = log.lock().unwrap();
    assert_eq!(log.len(), n, "every item ran once");
    assert!(
        log.windows(2).all(|w| w[0] < w[1]),
        "order broken across an attrs change"
    );
    assert!(
        !overlap.load(Ordering::SeqCst),
        "two items of an ordered queue ran at once"
    );
}

#[test]
fn bad_attrs_are_refused_and_change_nothing() {
    let wq = Workqueue::builder("attrs-bad")
        .unbound()
        .topology(synth("pack:1 l3:1 core:4 pu:1"))
        .build()
        .unwrap();
    let before = wq.attrs();
    assert!(matches!(
        wq.set_cpumask(&[99]),
        Err(Error::EmptyCpumask { .. })
    ));
    assert!(matches!(wq.set_nice(-21), Err(Error::InvalidNice(-21))));
    assert!(matches!(wq.set_nice(20), Err(Error::InvalidNice(20))));
    assert!(matches!(
        wq.set_max_active(0),
        Err(Error::InvalidMaxActive { .. })
    ));
    assert_eq!(wq.attrs(), before);
    let w = Work::new(|| {});
    assert!(wq.queue(&w));
    wq.flush();

    let bound = Workqueue::builder("attrs-bound").build().unwrap();
    let e = bound.set_affinity_scope(Scope::Cpu).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NotUnbound {
                attr: "affinity_scope",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("affinity_scope"));
    assert!(matches!(
        bound.set_cpumask(&[0]),
        Err(Error::NotUnbound { .. })
    ));
}

#[test]
fn retired_pools_let_their_workers_go() {
    // Nice 7 is used by no other test: its pools exist only for this queue.
    let wq = Workqueue::builder("attrs-retire")
        .unbound()
        .nice(7)
        .topology(synth("pack:1 l3:1 core:2 pu:1"))
        .affinity_scope(Scope::System)
        .build()
        .unwrap();
    let w = Work::new(|| {});
    assert!(wq.queue(&w));
    wq.flush();
    let old: Vec<u32> = wq.pool_counts().iter().map(|c| c.pool).collect();
    wq.set_nice(6).unwrap();
    assert_eq!(wq.attrs().nice, 6);
    let now: Vec<u32> = wq.pool_counts().iter().map(|c| c.pool).collect();
    assert!(old.iter().all(|p| !now.contains(p)), "{old:?} {now:?}");
    assert!(wq.queue(&w));
    wq.flush();
    assert_eq!(wq.stats().completed, 2);
}

/// Each attrs change retires a generation of pwqs; dead generations are
/// compacted away (flush and stats stop walking them) and their counters are
/// kept.
#[test]
fn dead_generations_are_compacted_and_keep_their_counts() {
    let wq = cmwq::Workqueue::builder("attrs_compact")
        .unbound()
        .affinity_scope(cmwq::topology::Scope::Cpu)
        .build()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let w = cmwq::Work::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    let rounds = 40;
    for i in 0..rounds {
        assert!(wq.queue(&w));
        wq.flush();
        let scope = if i % 2 == 0 {
            cmwq::topology::Scope::System
        } else {
            cmwq::topology::Scope::Cpu
        };
        wq.set_affinity_scope(scope).unwrap();
    }
    assert!(wq.queue(&w));
    wq.flush();
    assert_eq!(ran.load(Ordering::SeqCst), rounds + 1);
    let st = wq.stats();
    assert_eq!(
        st.completed as usize,
        rounds + 1,
        "counters of dead pwqs are kept"
    );
    assert_eq!(st.queued as usize, rounds + 1);
    let snap = cmwq::snapshot();
    let me = snap
        .workqueues
        .iter()
        .find(|x| x.name == "attrs_compact")
        .unwrap();
    let per_gen = wq.nr_pwqs().max(2);
    assert!(
        me.pwqs.len() <= 3 * per_gen,
        "{} pwqs walked after {rounds} changes: dead generations were not compacted",
        me.pwqs.len()
    );
}

/// An ordered queue's new pwq waits plugged behind the old one; when the old
/// one drains with nobody flushing and no further attrs change, the new one
/// must still be unplugged (the drain's deferred `died` action).
#[test]
fn ordered_unplugs_when_the_old_pwq_drains_unobserved() {
    let topo = Arc::new(Topology::from_synthetic("pack:1 numa:2 l3:1 core:4 pu:1").unwrap());
    let wq = Workqueue::builder("attrs_unplug")
        .ordered()
        .topology(topo)
        .build()
        .unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let ran_b = Arc::new(AtomicUsize::new(0));
    let (s, r) = (started.clone(), release.clone());
    let a = Work::new(move || {
        s.store(true, Ordering::SeqCst);
        while !r.load(Ordering::SeqCst) {
            thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    let rb = ran_b.clone();
    let b = Work::new(move || {
        rb.fetch_add(1, Ordering::SeqCst);
    });
    assert!(wq.queue(&a));
    while !started.load(Ordering::SeqCst) {
        thread::sleep(std::time::Duration::from_millis(1));
    }
    wq.set_cpumask(&[4, 5, 6, 7]).unwrap(); // the new pwq is plugged behind a's
    assert!(wq.queue(&b));
    assert_eq!(ran_b.load(Ordering::SeqCst), 0, "b ran before a finished");
    release.store(true, Ordering::SeqCst);
    // Nobody flushes: b must run on its own.
    let mut waited = 0;
    while ran_b.load(Ordering::SeqCst) == 0 && waited < 30_000 {
        thread::sleep(std::time::Duration::from_millis(5));
        waited += 5;
    }
    if ran_b.load(Ordering::SeqCst) != 1 {
        std::mem::forget(wq); // its drain would wait forever
        panic!("b never ran: the new pwq stayed plugged after the old one drained");
    }
    wq.flush();
}

/// `set_min_active` (the kernel's `workqueue_set_min_active`): the floor of
/// each NUMA node's share of `max_active`, clamped to it; refused for a
/// per-CPU or ordered queue.
#[test]
fn min_active_floors_each_nodes_share() {
    // Two nodes: 6 CPUs and 2 CPUs, so max_active 16 cuts into 12 and 4.
    let topo = Arc::new(Topology::from_synthetic("pack:1 numa:2 l3:1 core:4 pu:1").unwrap());
    let wq = Workqueue::builder("min-active")
        .unbound()
        .topology(topo)
        .max_active(16)
        .cpumask(&[0, 1, 2, 3, 4, 5, 6])
        .build()
        .unwrap();
    let before = wq.node_max_active();
    assert_eq!(wq.snapshot().min_active, 8);
    wq.set_min_active(10).unwrap();
    assert_eq!(wq.snapshot().min_active, 10);
    let after = wq.node_max_active();
    assert!(after.iter().all(|&m| m >= 10), "{before:?} -> {after:?}");
    assert!(
        before.iter().any(|&m| m < 10),
        "the floor changed nothing: {before:?}"
    );
    wq.set_min_active(100).unwrap();
    assert_eq!(wq.snapshot().min_active, 16, "clamped to max_active");
    let bound = Workqueue::builder("min-active-bound").build().unwrap();
    assert!(matches!(
        bound.set_min_active(2),
        Err(cmwq::Error::MinActiveNotUnbound(_))
    ));
}
