//! Forward progress (issue 4): with worker creation failing, a `MEM_RECLAIM`
//! workqueue's items still run, on its rescuer; other work waits and resumes
//! once creation works again. Worker creation failure is process-wide, so this
//! file holds one test.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use cmwq::{Work, Workqueue};

use common::wait_for;

#[test]
fn mem_reclaim_work_completes_while_workers_cannot_start() {
    cmwq::debug_fail_worker_creation(true);
    // Fresh pools (nice values no other queue uses), so no worker exists yet.
    let reclaim = Workqueue::builder("fp-reclaim")
        .unbound()
        .nice(3)
        .mem_reclaim()
        .build()
        .unwrap();
    let plain = Workqueue::builder("fp-plain")
        .unbound()
        .nice(4)
        .build()
        .unwrap();
    assert!(reclaim.rescuer_tid().is_some() || wait_for(|| reclaim.rescuer_tid().is_some()));
    assert!(plain.rescuer_tid().is_none());
    let ran_r = Arc::new(AtomicUsize::new(0));
    let ran_p = Arc::new(AtomicUsize::new(0));
    let threads = Arc::new(Mutex::new(Vec::new()));
    // Items that saw `current_is_rescuer()`: every rescued one, no plain one.
    let saw_rescuer = Arc::new(AtomicUsize::new(0));
    let rw: Vec<Work> = (0..40)
        .map(|_| {
            let (r, t, s) = (ran_r.clone(), threads.clone(), saw_rescuer.clone());
            Work::new(move || {
                if cmwq::current_is_rescuer() {
                    s.fetch_add(1, Ordering::SeqCst);
                }
                t.lock()
                    .unwrap()
                    .push(thread::current().name().map(str::to_string));
                r.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let pw: Vec<Work> = (0..40)
        .map(|_| {
            let (r, s) = (ran_p.clone(), saw_rescuer.clone());
            Work::new(move || {
                if cmwq::current_is_rescuer() {
                    s.fetch_add(1000, Ordering::SeqCst);
                }
                r.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for w in &rw {
        assert!(reclaim.queue(w));
    }
    for w in &pw {
        assert!(plain.queue(w));
    }
    assert!(
        wait_for(|| ran_r.load(Ordering::SeqCst) == 40),
        "MEM_RECLAIM work stuck: {} of 40 ran",
        ran_r.load(Ordering::SeqCst)
    );
    let st = reclaim.stats();
    assert_eq!(st.rescued, 40, "{st:?}");
    assert_eq!(
        saw_rescuer.load(Ordering::SeqCst),
        40,
        "current_is_rescuer on the rescuer"
    );
    assert!(st.mayday >= 1, "{st:?}");
    assert!(
        threads
            .lock()
            .unwrap()
            .iter()
            .all(|n| n.as_deref().is_some_and(|n| n.starts_with("cmwq-r/"))),
        "rescued items run on the rescuer thread"
    );
    // A rescuer's CPU time is the workqueue's, as a worker's is: the
    // watchdog charges it (it used to skip every slot not counted in
    // nr_running, rescuers and guests alike).
    let before = reclaim.stats().cpu_time_ns;
    let burner = Work::new(|| {
        let me = common::gettid();
        let t0 = common::thread_cpu_time(me).unwrap();
        while common::thread_cpu_time(me).unwrap() - t0 < Duration::from_millis(100) {
            std::hint::spin_loop();
        }
    });
    assert!(reclaim.queue(&burner));
    burner.flush();
    // Asserted once creation works again: a failed assert while it fails
    // would hang the plain queue's destroy.
    let burn_stats = reclaim.stats();
    // The plain queue has no rescuer: nothing of it ran.
    assert_eq!(ran_p.load(Ordering::SeqCst), 0);
    let failed: u64 = plain.pool_counts().iter().map(|c| c.create_failed).sum();
    assert!(failed >= 1, "creation was tried and failed");

    // Creation works again: the watchdog's retry starts a worker and the plain
    // queue's work resumes.
    cmwq::debug_fail_worker_creation(false);
    assert_eq!(burn_stats.rescued, 41, "{burn_stats:?}");
    assert!(
        burn_stats.cpu_time_ns > before,
        "the rescuer's burn was not charged: {burn_stats:?}"
    );
    plain.flush();
    assert_eq!(ran_p.load(Ordering::SeqCst), 40);
    assert_eq!(plain.stats().rescued, 0);
    assert_eq!(
        saw_rescuer.load(Ordering::SeqCst),
        40,
        "a worker is no rescuer"
    );
    // And the reclaim queue is served by workers again, not the rescuer.
    let after = Arc::new(AtomicUsize::new(0));
    let a = after.clone();
    let w = Work::new(move || {
        if thread::current()
            .name()
            .is_some_and(|n| n.starts_with("cmwq/"))
        {
            a.fetch_add(1, Ordering::SeqCst);
        }
    });
    // Queue from every CPU, so each per-CPU pool of the pod has a reason to
    // start a worker (pools start workers when work arrives; the default
    // pool serves only queuers outside the cpumask, so none here).
    let cpus = common::affinity_of(0).unwrap();
    let serving: Vec<u32> = reclaim.cpu_pools().0.into_iter().flatten().collect();
    assert!(wait_for(|| reclaim
        .pool_counts()
        .iter()
        .filter(|c| serving.contains(&c.pool))
        .all(|c| c.workers > 0)
        || {
            for &c in &cpus {
                let (wq, w) = (reclaim.clone(), w.clone());
                thread::spawn(move || {
                    common::set_affinity(&[c]).unwrap();
                    wq.queue(&w);
                })
                .join()
                .unwrap();
            }
            false
        }));
    reclaim.queue(&w);
    reclaim.flush();
    assert!(after.load(Ordering::SeqCst) >= 1);
}

/// The rescuer takes the CPUs of the pool it rescues, as the kernel's
/// attaches to it: a bound queue's item queued for CPU `b` runs on `b` even
/// when the rescuer was started pinned to CPU `a` (its queue was built from a
/// thread pinned there). Worker creation fails, so only the rescuer can run
/// it. In a child process: creation failure is process-wide.
#[test]
fn a_rescued_bound_item_runs_on_its_cpu() {
    if !common::in_own_process(
        "a_rescued_bound_item_runs_on_its_cpu",
        "CMWQ_RESCUE_CPU_CHILD",
    ) {
        return;
    }
    let cpus = common::affinity_of(0).expect("affinity");
    if cpus.len() < 2 {
        eprintln!("skipped: one CPU");
        return;
    }
    let (a, b) = (cpus[0], cpus[1]);
    cmwq::debug_fail_worker_creation(true);
    let wq = thread::spawn(move || {
        common::set_affinity(&[a]).unwrap();
        Workqueue::builder("fp-bound-rescue")
            .mem_reclaim()
            .build()
            .unwrap()
    })
    .join()
    .unwrap();
    let ran_on = Arc::new(AtomicUsize::new(usize::MAX));
    let r = ran_on.clone();
    let w = Work::new(move || r.store(common::current_cpu(), Ordering::SeqCst));
    assert_eq!(wq.queue_on(b, &w), Ok(true));
    assert!(
        wait_for(|| ran_on.load(Ordering::SeqCst) != usize::MAX),
        "the rescuer never ran the item"
    );
    let on = ran_on.load(Ordering::SeqCst);
    cmwq::debug_fail_worker_creation(false);
    assert_eq!(wq.stats().rescued, 1);
    assert_eq!(on, b, "queued for CPU {b}, rescued on CPU {on}");
}

/// A panic of cmwq's code in a rescuer's loop (the `failure-injection`
/// hook) is caught and counted, and the rescuer starts over: with worker
/// creation failing, the `MEM_RECLAIM` queue's items still run on it.
/// Without `service::run` the rescuer thread died and they never ran. In a
/// child process: creation failure is process-wide.
#[test]
fn a_rescuer_starts_over_after_a_panic_in_its_loop() {
    if !common::in_own_process(
        "a_rescuer_starts_over_after_a_panic_in_its_loop",
        "CMWQ_RESCUE_PANIC_CHILD",
    ) {
        return;
    }
    cmwq::debug_fail_worker_creation(true);
    let before = cmwq::engine_thread_panics();
    cmwq::debug_inject_panic(cmwq::InjectedPanic::RescuerLoop);
    let wq = Workqueue::builder("fp-rescuer-panic")
        .unbound()
        .nice(5)
        .mem_reclaim()
        .build()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let works: Vec<Work> = (0..10)
        .map(|_| {
            let r = ran.clone();
            Work::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for w in &works {
        assert!(wq.queue(w));
    }
    let done = wait_for(|| ran.load(Ordering::SeqCst) == 10);
    let panics = cmwq::engine_thread_panics() - before;
    cmwq::debug_fail_worker_creation(false);
    assert!(done, "rescued {} of 10", ran.load(Ordering::SeqCst));
    assert_eq!(panics, 1, "the rescuer's panic, counted once");
    assert_eq!(wq.stats().rescued, 10);
}
