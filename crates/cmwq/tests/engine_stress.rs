//! Stress with invariants: many threads queue, re-queue, cancel, flush and
//! destroy at random, for a bounded number of operations (not time).
//!
//! Invariant, per work item, once everything is flushed and every workqueue
//! destroyed: `queue calls that returned true == runs + cancels that returned
//! true`. A queue cycle that is lost (by destroy, a race on PENDING, a steal
//! that misses) or run twice breaks it.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use cmwq::topology::{Scope, Topology};
use cmwq::{DelayedWork, Work, Workqueue};
use common::Rng;

#[derive(Default)]
struct Count {
    trues: AtomicUsize,
    cancels: AtomicUsize,
    runs: AtomicUsize,
    /// Self re-queues left (from inside the callback, to system_unbound).
    requeue: AtomicUsize,
}

impl Count {
    fn queued(&self, ok: bool) {
        if ok {
            self.trues.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn cancelled(&self, ok: bool) {
        if ok {
            self.cancels.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn check(&self, what: &str) {
        let (t, r, c) = (
            self.trues.load(Ordering::SeqCst),
            self.runs.load(Ordering::SeqCst),
            self.cancels.load(Ordering::SeqCst),
        );
        assert_eq!(
            t,
            r + c,
            "{what}: {t} queue calls returned true, but {r} runs + {c} successful cancels"
        );
    }
}

fn counted_work(requeue: usize) -> (Arc<Count>, Work) {
    counted_work_spin(requeue, 0)
}

/// A counting work whose callback spins `spin` iterations (a window for
/// cancels and re-queues to race with a running instance).
fn counted_work_spin(requeue: usize, spin: usize) -> (Arc<Count>, Work) {
    let c = Arc::new(Count::default());
    c.requeue.store(requeue, Ordering::SeqCst);
    let me: Arc<OnceLock<Work>> = Arc::new(OnceLock::new());
    let (c2, me2) = (c.clone(), me.clone());
    let w = Work::new(move || {
        c2.runs.fetch_add(1, Ordering::SeqCst);
        for _ in 0..spin {
            std::hint::spin_loop();
        }
        let left = c2.requeue.load(Ordering::SeqCst);
        if left > 0
            && c2
                .requeue
                .compare_exchange(left, left - 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            let ok = cmwq::system_unbound().queue(me2.get().unwrap());
            c2.queued(ok);
        }
    });
    me.set(w.clone()).unwrap();
    (c, w)
}

fn counted_delayed() -> (Arc<Count>, DelayedWork) {
    let c = Arc::new(Count::default());
    let c2 = c.clone();
    let dw = DelayedWork::new(move || {
        c2.runs.fetch_add(1, Ordering::SeqCst);
    });
    (c, dw)
}

fn synthetic() -> Arc<Topology> {
    static T: OnceLock<Arc<Topology>> = OnceLock::new();
    T.get_or_init(|| Arc::new(Topology::from_synthetic("pack:2 l3:2 core:4 pu:2").unwrap()))
        .clone()
}

const CONFIGS: usize = 7;

fn build(kind: usize, generation: usize) -> Workqueue {
    let name = format!("stress-{kind}-{generation}");
    let b = Workqueue::builder(&name);
    match kind {
        0 => b.build(),
        1 => b.max_active(1).cpu_intensive().build(),
        2 => b.unbound().affinity_scope(Scope::Cpu).build(),
        3 => b
            .unbound()
            .affinity_scope(Scope::System)
            .max_active(2)
            .build(),
        4 => b
            .unbound()
            .topology(synthetic())
            .affinity_scope(Scope::Cache)
            .build(),
        5 => b
            .unbound()
            .topology(synthetic())
            .affinity_scope(Scope::Smt)
            .affinity_strict(true)
            .max_active(3)
            .build(),
        _ => b.ordered().build(),
    }
    .unwrap()
}

#[test]
fn random_ops_keep_every_queue_cycle() {
    const THREADS: usize = 6;
    const ITERS: usize = 20_000;
    const WORKS: usize = 24;
    let slots: Arc<Vec<Mutex<(Workqueue, usize)>>> =
        Arc::new((0..CONFIGS).map(|k| Mutex::new((build(k, 0), 0))).collect());
    let works: Arc<Vec<(Arc<Count>, Work)>> = Arc::new(
        (0..WORKS)
            .map(|i| counted_work_spin(if i % 4 == 0 { 1000 } else { 0 }, (i % 3) * 2000))
            .collect(),
    );
    let temp_checked = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let (slots, works, temp_checked) = (slots.clone(), works.clone(), temp_checked.clone());
            thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t as u64 + 1) * 0x1234_5678_9ABC_DEF1));
                // Delayed works owned by this thread (mod_delayed's return is per owner).
                let dws: Vec<(Arc<Count>, DelayedWork)> =
                    (0..3).map(|_| counted_delayed()).collect();
                let mut dw_home: Vec<Option<Workqueue>> = vec![None, None, None];
                for _ in 0..ITERS {
                    let (c, w) = &works[rng.below(WORKS)];
                    let slot = rng.below(CONFIGS);
                    let wq = || slots[slot].lock().unwrap().0.clone();
                    match rng.below(100) {
                        0..=34 => c.queued(wq().queue(w)),
                        35..=44 => c.queued(wq().queue_on(rng.below(2), w).unwrap()),
                        45..=54 => c.cancelled(w.cancel()),
                        55..=59 => c.cancelled(w.cancel_sync()),
                        60..=64 => {
                            w.flush();
                        }
                        65..=66 => wq().flush(),
                        67 => {
                            // destroy: replace the slot's queue, drop the old one
                            let old = {
                                let mut g = slots[slot].lock().unwrap();
                                let generation = g.1 + 1;
                                std::mem::replace(&mut *g, (build(slot, generation), generation))
                            };
                            drop(old);
                        }
                        68..=70 => {
                            c.cancelled(w.disable());
                            if rng.below(2) == 0 {
                                thread::yield_now();
                            }
                            w.enable();
                        }
                        71..=84 => {
                            let i = rng.below(dws.len());
                            let (dc, dw) = &dws[i];
                            let delay = Duration::from_micros(rng.below(3000) as u64);
                            // A delayed work stays on one queue while pending.
                            let home = match &dw_home[i] {
                                Some(h) if dw.is_pending() => h.clone(),
                                _ => {
                                    let h = wq();
                                    dw_home[i] = Some(h.clone());
                                    h
                                }
                            };
                            match rng.below(4) {
                                0 | 1 => dc.queued(home.queue_delayed(dw, delay)),
                                2 => dc.cancelled(dw.cancel()),
                                _ => {
                                    let was = home.mod_delayed(dw, delay);
                                    dc.cancelled(was);
                                    dc.queued(true);
                                }
                            }
                        }
                        85..=86 => {
                            // A short-lived queue: its drop runs everything queued to it.
                            let tmp = build(rng.below(CONFIGS), 1_000_000 + t);
                            let local: Vec<_> = (0..4).map(|_| counted_work(0)).collect();
                            for (lc, lw) in &local {
                                lc.queued(tmp.queue(lw));
                                lc.queued(tmp.queue_on(1, lw).unwrap());
                            }
                            let (dc, dw) = counted_delayed();
                            dc.queued(tmp.queue_delayed(&dw, Duration::from_secs(60)));
                            drop(tmp);
                            for (lc, _) in &local {
                                lc.check("work queued to a destroyed queue");
                            }
                            dc.check("delayed work armed on a destroyed queue");
                            temp_checked.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => c.queued(wq().queue(w)),
                    }
                }
                drop(dw_home);
                dws
            })
        })
        .collect();
    let mut dws = Vec::new();
    for h in hs {
        dws.extend(h.join().unwrap());
    }
    // Destroy every queue: each drains what it was given.
    let Ok(slots) = Arc::try_unwrap(slots) else {
        panic!("threads are done")
    };
    drop(slots);
    for (_, w) in works.iter() {
        w.flush();
    }
    cmwq::system_unbound().flush();
    for (_, w) in works.iter() {
        w.flush();
    }
    for (i, (c, _)) in works.iter().enumerate() {
        c.check(&format!("work {i}"));
    }
    for (i, (c, dw)) in dws.iter().enumerate() {
        assert!(
            !dw.is_pending(),
            "delayed work {i} still pending after its queue was destroyed"
        );
        c.check(&format!("delayed work {i}"));
    }
    let total: usize = works
        .iter()
        .map(|(c, _)| c.runs.load(Ordering::SeqCst))
        .sum();
    let cancels: usize = works
        .iter()
        .map(|(c, _)| c.cancels.load(Ordering::SeqCst))
        .sum();
    eprintln!(
        "stress: {total} runs, {cancels} cancels, {} short-lived queues",
        temp_checked.load(Ordering::Relaxed)
    );
    assert!(total > 1000, "the stress ran work ({total} runs)");
    assert!(temp_checked.load(Ordering::Relaxed) > 0);
}

fn hammer(wq: Workqueue, threads: usize, per: usize) {
    let (c, w) = counted_work(0);
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (wq, w, c) = (wq.clone(), w.clone(), c.clone());
            thread::spawn(move || {
                for i in 0..per {
                    let ok = if (i + t) % 3 == 0 {
                        wq.queue_on((i + t) % 2, &w).unwrap()
                    } else {
                        wq.queue(&w)
                    };
                    c.queued(ok);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    w.flush();
    wq.flush();
    c.check(wq.name());
    assert!(c.runs.load(Ordering::SeqCst) > 0);
}

#[test]
fn pending_bit_hammer_unbound() {
    hammer(
        Workqueue::builder("stress-pending-u")
            .unbound()
            .build()
            .unwrap(),
        4,
        20_000,
    );
}

#[test]
fn pending_bit_hammer_bound() {
    hammer(
        Workqueue::builder("stress-pending-b").build().unwrap(),
        4,
        20_000,
    );
}

#[test]
fn pending_bit_hammer_ordered() {
    hammer(
        Workqueue::builder("stress-pending-o")
            .ordered()
            .build()
            .unwrap(),
        4,
        20_000,
    );
}
