//! Lifecycles: what a live attribute change retires is freed, a peak's
//! memory comes back once the pool is idle, and the last drop of a frozen
//! queue runs what it holds. The tests that measure the process (RSS, the
//! pools the snapshot lists) run in a child process of their own.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cmwq::topology::Scope;
use cmwq::{Workqueue, WqFlags};

/// Polls `cond` every 10 ms for up to 30 s (generous: a loaded 2-core
/// machine); true as soon as it holds.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    cond()
}

fn all_cpus() -> Vec<usize> {
    (0..thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// One live change of attribute `i % 4` to one of two values.
fn change(wq: &Workqueue, i: usize, cpus: &[usize]) {
    let flip = (i / 4).is_multiple_of(2);
    match i % 4 {
        0 => wq.set_affinity_scope(if flip { Scope::Cpu } else { Scope::System }),
        1 => wq.set_cpumask(if flip { &cpus[..1] } else { cpus }),
        2 => wq.set_nice(i32::from(flip)),
        _ => wq.set_affinity_strict(flip),
    }
    .expect("a live change");
}

/// 20,000 live changes of an idle unbound queue (5,000 of each attribute
/// that builds new pwqs) must not grow the process by more than a few MiB:
/// each retired pwq is freed when it dies. Before, each change kept about
/// 1.4 KiB for good (28 MiB here).
#[test]
fn live_changes_free_what_they_retire() {
    if !common::in_own_process("live_changes_free_what_they_retire", "CMWQ_T_CHURN") {
        return;
    }
    let cpus = all_cpus();
    let wq = Workqueue::builder("churn").unbound().build().unwrap();
    // Warm up: every pool of both values of each attribute exists.
    for i in 0..64 {
        change(&wq, i, &cpus);
    }
    let before = common::rss_kib();
    for i in 0..20_000 {
        change(&wq, i, &cpus);
    }
    let after = common::rss_kib();
    println!("RSS over 20,000 live changes: {before} KiB -> {after} KiB");
    assert!(
        after < before + 8 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 20,000 live changes"
    );
    // The queue still works, and the snapshot lists only its live pwqs.
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        let r = ran.clone();
        assert!(wq.execute(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
    }
    wq.flush();
    assert_eq!(ran.load(Ordering::SeqCst), 100);
    let s = cmwq::snapshot();
    let me = s.workqueues.iter().find(|w| w.name == "churn").unwrap();
    assert_eq!(
        me.pwqs.len(),
        wq.nr_pwqs(),
        "pwqs listed for an idle queue after 20,000 changes: {:?}",
        me.pwqs.iter().map(|p| &p.state).collect::<Vec<_>>()
    );
}

/// Changing `nice` through 20 values makes 20 sets of pools; once the queue
/// moved on (and is dropped), none of them is listed by the snapshot with
/// no reference and no worker. Before, every one stayed listed for good.
#[test]
fn pools_nobody_uses_are_not_listed() {
    if !common::in_own_process("pools_nobody_uses_are_not_listed", "CMWQ_T_POOLS") {
        return;
    }
    let unbound_pools = || {
        cmwq::snapshot()
            .pools
            .into_iter()
            .filter(|p| p.cpu.is_none())
            .collect::<Vec<_>>()
    };
    let base = unbound_pools().len();
    let wq = Workqueue::builder("nices").unbound().build().unwrap();
    for round in 0..2 {
        for nice in 0..20 {
            wq.set_nice(nice).unwrap();
            // Work on every set of pools, so each gets workers that must go.
            let done = Arc::new(AtomicUsize::new(0));
            for _ in 0..4 {
                let d = done.clone();
                wq.execute(move || {
                    d.fetch_add(1, Ordering::SeqCst);
                });
            }
            wq.flush();
            assert_eq!(done.load(Ordering::SeqCst), 4, "round {round} nice {nice}");
        }
    }
    drop(wq);
    let mut last = Vec::new();
    let gone = eventually(|| {
        last = unbound_pools();
        last.iter().all(|p| p.refs > 0 || p.workers > 0) && last.len() <= base
    });
    assert!(
        gone,
        "unbound pools still listed (before the queue: {base}): {:?}",
        last.iter()
            .map(|p| (p.id, p.nice, p.refs, p.workers))
            .collect::<Vec<_>>()
    );
    // A pool let go is found again by the same attributes and works.
    let again = Workqueue::builder("nices2")
        .unbound()
        .nice(7)
        .build()
        .unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    again.execute(move || r.store(true, Ordering::SeqCst));
    again.flush();
    assert!(ran.load(Ordering::SeqCst));
}

/// A queue's retired pwqs holding items die and are freed when their last
/// item ends, while the queue keeps changing: the snapshot never lists more
/// than the live generation and those still running, and every item runs
/// once.
#[test]
fn busy_retired_pwqs_are_freed_when_their_items_end() {
    let cpus = all_cpus();
    let wq = Workqueue::builder("busy_churn").unbound().build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let mut queued = 0;
    for i in 0..2_000 {
        for _ in 0..3 {
            let r = ran.clone();
            queued += usize::from(wq.execute(move || {
                r.fetch_add(1, Ordering::SeqCst);
            }));
        }
        change(&wq, i, &cpus);
    }
    wq.flush();
    assert_eq!(ran.load(Ordering::SeqCst), queued);
    let name = "busy_churn";
    let listed = || {
        cmwq::snapshot()
            .workqueues
            .into_iter()
            .find(|w| w.name == name)
            .map_or(0, |w| w.pwqs.len())
    };
    // Flushed: every retired pwq has ended its last item (its death and
    // freeing follow right after, on the worker that ran it).
    let mut n = 0;
    assert!(
        eventually(|| {
            n = listed();
            n == wq.nr_pwqs()
        }),
        "{n} pwqs listed for an idle queue with {} live ones",
        wq.nr_pwqs()
    );
}

/// Runs `f` on a thread and fails the test if it does not return within a
/// generous wait (rather than hanging the suite).
fn within_30s(what: &str, f: impl FnOnce() + Send + 'static) {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let h = thread::spawn(move || {
        f();
        d.store(true, Ordering::SeqCst);
    });
    assert!(
        eventually(|| done.load(Ordering::SeqCst)),
        "{what} did not return within 30 s"
    );
    h.join().unwrap();
}

/// The last drop of a frozen queue that holds items thaws it and runs them
/// (the documented destroy), where it used to wait forever.
#[test]
fn dropping_a_frozen_queue_runs_what_it_holds() {
    for kind in ["bound", "unbound", "ordered"] {
        let b = Workqueue::builder(&format!("frozen_{kind}")).freezable();
        let b = match kind {
            "bound" => b,
            "unbound" => b.unbound(),
            _ => b.ordered(),
        };
        let wq = b.build().unwrap();
        assert!(wq.flags().contains(WqFlags::FREEZABLE));
        wq.freeze().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..10 {
            let r = ran.clone();
            assert!(wq.execute(move || {
                r.fetch_add(1, Ordering::SeqCst);
            }));
        }
        let delayed = cmwq::DelayedWork::new({
            let r = ran.clone();
            move || {
                r.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert!(wq.queue_delayed(&delayed, Duration::from_secs(3600)));
        thread::sleep(Duration::from_millis(20));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "{kind}: frozen, nothing runs"
        );
        within_30s(&format!("dropping the frozen {kind} queue"), move || {
            drop(wq)
        });
        assert_eq!(
            ran.load(Ordering::SeqCst),
            11,
            "{kind}: everything queued ran"
        );
    }
}

/// Items of the peak in `a_peak_gives_its_memory_back`.
const PEAK: usize = 200_000;

/// A peak of queued items grows a pool's lists; once the pool is idle their
/// memory comes back (it used to stay: about 32 B per peak item).
#[test]
fn a_peak_gives_its_memory_back() {
    if !common::in_own_process("a_peak_gives_its_memory_back", "CMWQ_T_PEAK") {
        return;
    }
    // A long item holds the CPU without being taken for CPU-intensive, so
    // the items queued behind it pile up on its CPU's worklist: 100 queues
    // of 2,000 active items each (a pwq holds at most `max_active` there).
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
    let wqs: Vec<Workqueue> = (0..PEAK / 2000)
        .map(|i| {
            Workqueue::builder(&format!("peak{i}"))
                .max_active(cmwq::MAX_ACTIVE)
                .build()
                .unwrap()
        })
        .collect();
    let wq = &wqs[0];
    let cpu = common::current_cpu();
    let go = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    {
        let (go, started) = (go.clone(), started.clone());
        wq.execute_on(cpu, move || {
            started.store(true, Ordering::SeqCst);
            while !go.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    }
    assert!(eventually(|| started.load(Ordering::SeqCst)));
    let ran = Arc::new(AtomicUsize::new(0));
    for q in &wqs {
        for _ in 0..2000 {
            let r = ran.clone();
            q.execute_on(cpu, move || {
                r.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
    }
    let peak = wq.debug_list_capacity();
    go.store(true, Ordering::SeqCst);
    for q in &wqs {
        q.flush();
    }
    assert_eq!(ran.load(Ordering::SeqCst), PEAK);
    gives_back(wq, peak, "worklist");
    drop(wqs);

    // The same for items held back by max_active (a pwq's inactive list),
    // on a bound and an unbound queue, with a flush waiting while the list
    // drains; and on the bound queue with none: its last item then ends on
    // the inline path (`dec_in_flight_quiet`), which must hand a big list
    // over to the full accounting (nothing else gives it back before the
    // idle timeout of 300 s, far past `gives_back`'s 30 s). An unbound pwq
    // at `max_active` 1 keeps no unit when it idles, so its last item takes
    // the full path anyway.
    for (unbound, flush) in [(false, true), (true, true), (false, false)] {
        let b = Workqueue::builder("peak_inactive")
            .freezable()
            .max_active(1);
        let wq = if unbound { b.unbound() } else { b }.build().unwrap();
        wq.freeze().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..PEAK {
            let r = ran.clone();
            wq.execute(move || {
                r.fetch_add(1, Ordering::Relaxed);
            });
        }
        let peak = wq.debug_list_capacity();
        wq.thaw().unwrap();
        if flush {
            wq.flush();
        } else {
            assert!(eventually(|| ran.load(Ordering::SeqCst) == PEAK));
        }
        assert_eq!(ran.load(Ordering::SeqCst), PEAK);
        gives_back(
            &wq,
            peak,
            &format!("inactive list (unbound {unbound}, flushed {flush})"),
        );
    }
}

/// Asserts that `wq`'s pools' lists, `peak` items big at the peak, come
/// back under a bound once idle.
fn gives_back(wq: &Workqueue, peak: usize, what: &str) {
    const BOUND: usize = 16 * 1024;
    let mut cap = 0;
    let back = eventually(|| {
        cap = wq.debug_list_capacity();
        cap < BOUND
    });
    println!("{what} capacity: {peak} items at the peak, {cap} once idle");
    assert!(
        peak > PEAK / 2,
        "{what}: the peak did not build up ({peak})"
    );
    assert!(
        back,
        "{what}: capacity stayed at {cap} after a peak of {peak}"
    );
}

/// A gate an item waits at until the test opens it.
fn gate() -> (Arc<AtomicBool>, impl Fn() + Send + 'static) {
    let open = Arc::new(AtomicBool::new(false));
    let o = open.clone();
    (open, move || {
        while !o.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(1));
        }
    })
}

/// A flusher lists a queue's pwqs, a retired one among them, and waits. The
/// retired pwq's last item ends, it is freed, and another queue's new pwq
/// takes its slot in the pool and gets an item that blocks. The flusher
/// must not wait for that queue's item: its name for the freed pwq is stale
/// (the slot's era changed), so it reads as dead and empty.
#[test]
fn a_flusher_never_waits_on_the_next_user_of_a_freed_pwq() {
    if !common::in_own_process(
        "a_flusher_never_waits_on_the_next_user_of_a_freed_pwq",
        "CMWQ_T_ERA",
    ) {
        return;
    }
    let cpu = 0;
    let w1 = Workqueue::builder("era1").unbound().build().unwrap();
    let (open_a, wait_a) = gate();
    w1.execute_on(cpu, wait_a).unwrap();
    // A's pwq is retired (it holds A); B goes to the new generation.
    w1.set_nice(1).unwrap();
    let (open_b, wait_b) = gate();
    w1.execute_on(cpu, wait_b).unwrap();
    let flushed = Arc::new(AtomicBool::new(false));
    let flusher = {
        let (w1, f) = (w1.clone(), flushed.clone());
        thread::spawn(move || {
            w1.flush();
            f.store(true, Ordering::SeqCst);
        })
    };
    // The flusher has listed both pwqs once it waits; give it time to.
    thread::sleep(Duration::from_millis(100));
    open_a.store(true, Ordering::SeqCst);
    // A's pwq dies and is freed: the snapshot lists only the live ones.
    assert!(eventually(|| {
        let s = cmwq::snapshot();
        let me = s.workqueues.iter().find(|w| w.name == "era1").unwrap();
        me.pwqs.len() == w1.nr_pwqs()
    }));
    // A queue with A's old attributes reuses the freed slot; its item blocks.
    let w2 = Workqueue::builder("era2").unbound().build().unwrap();
    let (open_c, wait_c) = gate();
    w2.execute_on(cpu, wait_c).unwrap();
    open_b.store(true, Ordering::SeqCst);
    let returned = eventually(|| flushed.load(Ordering::SeqCst));
    open_c.store(true, Ordering::SeqCst);
    // (A flusher that waited on era2's item would not be woken by its end:
    // it is not joined then, and the process ends with the test.)
    assert!(
        returned,
        "era1's flush waited for an item of era2 (a freed pwq's slot reused)"
    );
    flusher.join().unwrap();
}

/// An idle worker of a one-lane pool that is not in excess parks without
/// the idle timeout (no kernel timer armed per park), so a pool that comes
/// to have too many workers must still cull them all: a culled worker that
/// leaves the pool in excess wakes the next idle one, which parks with the
/// timeout. Ten workers go idle at once; the first few park untimed (the
/// pool is not in excess yet) and the rest with the timeout; the pool must
/// end with the kernel's two idle workers, not with the untimed ones too.
/// In a process of its own: the idle timeout is process-wide.
#[test]
fn workers_parked_untimed_are_culled_when_the_pool_has_too_many() {
    if !common::in_own_process(
        "workers_parked_untimed_are_culled_when_the_pool_has_too_many",
        "CMWQ_T_UNTIMED",
    ) {
        return;
    }
    const N: usize = 10;
    cmwq::set_idle_timeout(Duration::from_millis(30));
    // A one-CPU pod: a pool with one lane (nice 13: a pool of its own).
    let wq = Workqueue::builder("untimed_cull")
        .unbound()
        .affinity_scope(Scope::Cpu)
        .nice(13)
        .max_active(N)
        .build()
        .unwrap();
    let cpu = common::current_cpu();
    let gate = Arc::new(std::sync::Barrier::new(N));
    for _ in 0..N {
        let gate = gate.clone();
        wq.execute_on(cpu, move || {
            cmwq::blocking(|| {
                gate.wait();
            })
        })
        .unwrap();
    }
    wq.flush();
    // The pool that ran them (the queue's other pools keep their own).
    let ran = wq
        .pool_counts()
        .into_iter()
        .find(|c| c.local as usize >= N)
        .expect("a pool ran the items")
        .pool;
    let counts = || {
        let c = wq
            .pool_counts()
            .into_iter()
            .find(|c| c.pool == ran)
            .unwrap();
        (c.workers, c.idle)
    };
    let (mut workers, mut idle) = (0, 0);
    let mut peak = 0;
    let settled = eventually(|| {
        (workers, idle) = counts();
        peak = peak.max(workers);
        workers == 2
    });
    assert!(peak >= 3, "the pool never had too many workers ({peak})");
    assert!(
        settled,
        "the pool kept {workers} workers ({idle} idle) after its {N} items: \
         the kernel's rule keeps two idle; {:?}",
        wq.pool_counts()
    );
    // And stays there: nothing culls below the two kept.
    thread::sleep(Duration::from_millis(200));
    assert_eq!(counts().0, 2);
}
