//! `cmwq::percpu`: which slot each call reaches, where each mode runs a drain,
//! and a stress test in which a per-CPU object cache loses and duplicates nothing
//! while another thread drains every CPU again and again.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use cmwq::percpu::{Mode, PerCpu, PercpuError};
use cmwq::topology::sched_affinity;

const MODES: [Mode; 2] = [Mode::Local, Mode::Qpw];

fn allowed() -> Vec<usize> {
    sched_affinity().expect("sched_getaffinity")
}

/// Runs `f` on a thread pinned to `cpu` and returns what it returned.
fn on_cpu<R: Send>(cpu: usize, f: impl FnOnce() -> R + Send) -> R {
    thread::scope(|s| {
        s.spawn(|| {
            common::set_affinity(&[cpu]).expect("pin");
            assert_eq!(common::current_cpu(), cpu);
            f()
        })
        .join()
        .unwrap()
    })
}

#[test]
fn with_local_reaches_the_slot_of_the_pinned_cpu() {
    for mode in MODES {
        let p = PerCpu::new(mode, |_| Vec::<usize>::new()).unwrap();
        for &cpu in &allowed() {
            on_cpu(cpu, || p.with_local(|s| s.push(cpu)));
        }
        for c in 0..p.nr_slots() {
            let got = p.with_cpu(c, |s| s.clone()).unwrap();
            let want = if allowed().contains(&c) {
                vec![c]
            } else {
                vec![]
            };
            assert_eq!(got, want, "{mode}: slot {c}");
        }
    }
}

#[test]
fn drain_on_reaches_exactly_that_slot() {
    for mode in MODES {
        let p = PerCpu::new(mode, |c| 10 * c + 1).unwrap();
        for cpu in allowed() {
            let got = p.drain_on(cpu, std::mem::take).unwrap();
            assert_eq!(
                got,
                10 * cpu + 1,
                "{mode}: drain_on({cpu}) returned another slot"
            );
            for c in 0..p.nr_slots() {
                let want = if c == cpu || (c < cpu && allowed().contains(&c)) {
                    0
                } else {
                    10 * c + 1
                };
                assert_eq!(p.with_cpu(c, |s| *s).unwrap(), want, "{mode}: slot {c}");
            }
        }
    }
}

#[test]
fn local_mode_drains_on_a_worker_of_the_target_cpu() {
    let p = PerCpu::new(Mode::Local, |_| ()).unwrap();
    let cpus = allowed();
    let caller_cpu = *cpus.last().unwrap();
    on_cpu(caller_cpu, || {
        let me = thread::current().id();
        for &cpu in &cpus {
            let (ran_on, name, tid) = p
                .drain_on(cpu, |_| {
                    let t = thread::current();
                    (
                        common::current_cpu(),
                        t.name().unwrap_or("").to_string(),
                        t.id(),
                    )
                })
                .unwrap();
            assert_eq!(ran_on, cpu, "the drain of CPU {cpu} ran on CPU {ran_on}");
            assert!(
                name.starts_with("cmwq/"),
                "ran on thread {name:?}, not a worker"
            );
            assert_ne!(tid, me, "Local mode ran the drain on the caller");
        }
        let all = p
            .drain_all(|c, _| (c, common::current_cpu(), thread::current().id()))
            .unwrap();
        for (c, ran_on, tid) in all {
            if cpus.contains(&c) {
                assert_eq!(ran_on, c, "drain_all: CPU {c}'s drain ran on CPU {ran_on}");
                assert_ne!(tid, me);
            }
        }
    });
    let st = p.stats();
    assert!(st.queued >= 2 * cpus.len() as u64, "{st:?}");
}

#[test]
fn qpw_mode_drains_on_the_caller() {
    let p = PerCpu::new(Mode::Qpw, |_| ()).unwrap();
    let me = thread::current().id();
    let tid = common::gettid();
    for cpu in 0..p.nr_slots() {
        let (who, os_tid) = p
            .drain_on(cpu, |_| (thread::current().id(), common::gettid()))
            .unwrap();
        assert_eq!(
            (who, os_tid),
            (me, tid),
            "Qpw drain of CPU {cpu} left the caller"
        );
    }
    for (c, who) in p
        .drain_all(|_, _| thread::current().id())
        .unwrap()
        .into_iter()
        .enumerate()
    {
        assert_eq!(who, me, "Qpw drain_all of CPU {c} left the caller");
    }
    let st = p.stats();
    assert_eq!(st.queued, 0);
    assert_eq!(st.on_caller, 2 * p.nr_slots() as u64);
}

#[test]
fn a_cpu_without_a_slot_is_an_error() {
    for mode in MODES {
        let p = PerCpu::new(mode, |_| 0u8).unwrap();
        let n = p.nr_slots();
        assert_eq!(
            p.drain_on(n, |s| *s),
            Err(PercpuError::NoSuchCpu {
                cpu: n,
                nr_slots: n
            })
        );
        assert!(p.with_cpu(n + 7, |s| *s).is_err());
    }
}

#[test]
fn a_panicking_local_drain_is_reported_and_the_slot_stays_usable() {
    let p = PerCpu::new(Mode::Local, |_| 5u32).unwrap();
    let cpu = allowed()[0];
    let r: Result<(), _> = p.drain_on(cpu, |_| panic!("drain panics on purpose"));
    assert_eq!(r, Err(PercpuError::DrainPanicked { cpu }));
    assert_eq!(p.drain_on(cpu, |s| *s).unwrap(), 5);
}

#[test]
fn mode_names_parse() {
    assert_eq!("QPW".parse::<Mode>(), Ok(Mode::Qpw));
    assert_eq!("local".parse::<Mode>(), Ok(Mode::Local));
    let e = "fast".parse::<Mode>().unwrap_err().to_string();
    assert!(e.contains("\"fast\""), "{e}");
}

/// A per-CPU object cache over a shared depot, as the lab's benchmark has, with
/// objects that carry identities so loss and duplication both show.
struct Magazine {
    objs: Vec<u32>,
}

const BATCH: usize = 8;
const CAP: usize = 2 * BATCH;

fn stress(mode: Mode) {
    const OBJECTS: u32 = 4096;
    const THREADS: usize = 4;
    const ROUNDS: usize = 20_000;
    let depot = Arc::new(Mutex::new((0..OBJECTS).collect::<Vec<u32>>()));
    let cache = Arc::new(PerCpu::new(mode, |_| Magazine { objs: Vec::new() }).unwrap());
    let stop = Arc::new(AtomicBool::new(false));

    let drainer = {
        let (cache, depot, stop) = (cache.clone(), depot.clone(), stop.clone());
        thread::spawn(move || {
            let mut drains = 0u64;
            while !stop.load(Ordering::Relaxed) || drains < 10 {
                let d = depot.clone();
                cache
                    .drain_all(move |_, m| d.lock().unwrap().append(&mut m.objs))
                    .unwrap();
                drains += 1;
            }
            drains
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (cache, depot) = (cache.clone(), depot.clone());
            thread::spawn(move || {
                let mut hand: Vec<u32> = Vec::new();
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t as u64;
                for _ in 0..ROUNDS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x & 1 == 0 || hand.is_empty() {
                        // Allocate: from the slot, refilling a batch from the depot.
                        let got = cache.with_local(|m| {
                            if m.objs.is_empty() {
                                let mut d = depot.lock().unwrap();
                                let k = d.len().saturating_sub(BATCH);
                                m.objs.extend(d.drain(k..));
                            }
                            m.objs.pop()
                        });
                        hand.extend(got);
                    } else {
                        // Free: to the slot, flushing a batch when it is full.
                        let o = hand.pop().unwrap();
                        cache.with_local(|m| {
                            m.objs.push(o);
                            if m.objs.len() > CAP {
                                let k = m.objs.len() - BATCH;
                                depot.lock().unwrap().extend(m.objs.drain(k..));
                            }
                        });
                    }
                }
                hand
            })
        })
        .collect();
    let mut all: Vec<u32> = Vec::new();
    for w in workers {
        all.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    assert!(drainer.join().unwrap() >= 10);
    for c in 0..cache.nr_slots() {
        all.extend(cache.with_cpu(c, |m| std::mem::take(&mut m.objs)).unwrap());
    }
    all.extend(depot.lock().unwrap().drain(..));
    all.sort_unstable();
    let n = all.len();
    all.dedup();
    assert_eq!(n, all.len(), "{mode}: an object was counted twice");
    assert_eq!(
        all,
        (0..OBJECTS).collect::<Vec<_>>(),
        "{mode}: an object was lost"
    );
}

#[test]
fn object_cache_conserves_objects_under_remote_drains_local() {
    stress(Mode::Local);
}

#[test]
fn object_cache_conserves_objects_under_remote_drains_qpw() {
    stress(Mode::Qpw);
}
