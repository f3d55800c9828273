//! Concurrency management without scheduler hooks (issue 4): the /proc sampler,
//! the CPU-intensive tick, CPU time accounting, and no polling while idle.
//! Tests here share the process-wide watchdog, so they run one at a time.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use cmwq::{Work, Workqueue};

static SERIAL: Mutex<()> = Mutex::new(());

/// Burns `d` of this thread's CPU time (not wall time: a preempted burn still
/// burns the full amount).
fn burn_cpu(d: Duration) {
    let me = common::gettid();
    let t0 = common::thread_cpu_time(me).unwrap();
    while common::thread_cpu_time(me).unwrap() - t0 < d {
        for _ in 0..1000 {
            std::hint::spin_loop();
        }
    }
}

use common::wait_for;

/// A bound pool runs one worker per CPU; an item that sleeps without saying so
/// is found by the sampler, which lets a second worker run the next item.
#[test]
fn sampler_finds_an_unannotated_sleeper() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cmwq::set_cpu_intensive_thresh(Duration::from_millis(10));
    let wq = Workqueue::builder("cm-sampler").build().unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let second_ran = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    // Sleeps (state S) until the second item has run, or gives up after 20 s.
    let sleeper = Work::new(move || {
        for _ in 0..20_000 {
            if r.load(Ordering::SeqCst) {
                return;
            }
            thread::sleep(Duration::from_millis(1));
        }
    });
    let (sr, rl) = (second_ran.clone(), release.clone());
    let second = Work::new(move || {
        sr.store(true, Ordering::SeqCst);
        rl.store(true, Ordering::SeqCst);
    });
    assert!(wq.queue_on(0, &sleeper).unwrap());
    assert!(wq.queue_on(0, &second).unwrap());
    sleeper.flush();
    assert!(
        second_ran.load(Ordering::SeqCst),
        "the second item had to run while the first slept"
    );
    wq.flush();
    let st = wq.stats();
    assert!(st.sampled >= 1, "{st:?}");
    assert!(st.cm_wakeup >= 1, "{st:?}");
}

/// An item that burns CPU past the threshold stops holding back its pool.
#[test]
fn cpu_intensive_tick_lets_the_next_item_run() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cmwq::set_cpu_intensive_thresh(Duration::from_millis(10));
    let wq = Workqueue::builder("cm-intensive").build().unwrap();
    let second_ran = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(AtomicBool::new(false));
    let (sr, sn) = (second_ran.clone(), seen.clone());
    // Burns until the second item ran (it can only run if this one stops
    // counting), capped at 20 s of CPU.
    let hog = Work::new(move || {
        for _ in 0..20_000 {
            if sr.load(Ordering::SeqCst) {
                sn.store(true, Ordering::SeqCst);
                return;
            }
            burn_cpu(Duration::from_millis(1));
        }
    });
    let sr2 = second_ran.clone();
    let second = Work::new(move || sr2.store(true, Ordering::SeqCst));
    assert!(wq.queue_on(0, &hog).unwrap());
    assert!(wq.queue_on(0, &second).unwrap());
    hog.flush();
    assert!(
        seen.load(Ordering::SeqCst),
        "the hog finished before the second item ran"
    );
    wq.flush();
    let st = wq.stats();
    assert!(st.cpu_intensive >= 1, "{st:?}");
    assert!(st.cm_wakeup >= 1, "{st:?}");
    assert!(st.cpu_time_ns > 0, "{st:?}");
}

/// Control: with the threshold out of reach and no sleeping, a bound pool keeps
/// one worker running: the second item waits for the first.
#[test]
fn without_detection_a_bound_pool_runs_one_at_a_time() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
    let wq = Workqueue::builder("cm-control").build().unwrap();
    let first_done = Arc::new(AtomicBool::new(false));
    let order_ok = Arc::new(AtomicBool::new(false));
    let fd = first_done.clone();
    let first = Work::new(move || {
        burn_cpu(Duration::from_millis(50));
        fd.store(true, Ordering::SeqCst);
    });
    let (fd2, ok) = (first_done.clone(), order_ok.clone());
    let second = Work::new(move || ok.store(fd2.load(Ordering::SeqCst), Ordering::SeqCst));
    assert!(wq.queue_on(0, &first).unwrap());
    assert!(wq.queue_on(0, &second).unwrap());
    wq.flush();
    assert!(
        order_ok.load(Ordering::SeqCst),
        "the second item ran beside a counted burner"
    );
    assert_eq!(wq.stats().cpu_intensive, 0);
    cmwq::set_cpu_intensive_thresh(Duration::from_millis(10));
}

/// CPU time is charged to the workqueue whose item burns it.
#[test]
fn cpu_time_is_charged_to_the_workqueue() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let wq = Workqueue::builder("cm-cputime").unbound().build().unwrap();
    let idle = Workqueue::builder("cm-cputime-idle")
        .unbound()
        .build()
        .unwrap();
    let w = Work::new(|| burn_cpu(Duration::from_millis(200)));
    assert!(wq.queue(&w));
    wq.flush();
    let st = wq.stats();
    // Sampled each 10 ms tick: at least the ticks fully inside the burn.
    assert!(st.cpu_time_ns >= 100_000_000, "{st:?}");
    assert!(st.cpu_time_ns <= 2_000_000_000, "{st:?}");
    assert_eq!(idle.stats().cpu_time_ns, 0);
}

/// Nothing is polled while no worker is busy.
#[test]
fn watchdog_sleeps_while_idle() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let wq = Workqueue::builder("cm-idle").build().unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let w = Work::new(move || {
        n2.fetch_add(1, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(30));
    });
    assert!(wq.queue(&w));
    wq.flush();
    assert!(
        wait_for(|| cmwq::watchdog_ticks() > 0),
        "the watchdog never ticked while busy"
    );
    // Let the watchdog notice that nothing is busy, then count its ticks over a
    // quiet spell: a polling watchdog would tick about 20 times.
    thread::sleep(Duration::from_millis(50));
    let before = cmwq::watchdog_ticks();
    thread::sleep(Duration::from_millis(200));
    let after = cmwq::watchdog_ticks();
    assert!(after - before <= 1, "{} ticks while idle", after - before);
    assert_eq!(n.load(Ordering::SeqCst), 1);
}
