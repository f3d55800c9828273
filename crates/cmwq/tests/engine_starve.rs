//! A pool that has no worker at all (creation failed when it was made) and
//! gets its first item only after the watchdog went idle: the queueing must
//! wake the watchdog, which sends mayday to the rescuer and retries creation.
//!
//! Its own test binary: worker-creation failure is process-wide.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cmwq::{Work, Workqueue};

/// Polls `f` for up to 30 s.
fn wait_for(f: impl Fn() -> bool) -> bool {
    for _ in 0..6000 {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn work_queued_to_a_workerless_pool_after_the_watchdog_parked_still_runs() {
    cmwq::debug_fail_worker_creation(true);
    // nice 3: a pool of its own, made now, with no worker.
    let wq = Workqueue::builder("starve_reclaim")
        .unbound()
        .nice(3)
        .mem_reclaim()
        .build()
        .unwrap();
    // Let the watchdog find nothing to do and park: its tick count stops.
    let mut last = cmwq::watchdog_ticks();
    let mut still = 0;
    for _ in 0..2000 {
        std::thread::sleep(Duration::from_millis(20));
        let now = cmwq::watchdog_ticks();
        if now == last {
            still += 1;
            if still >= 3 {
                break;
            }
        } else {
            still = 0;
            last = now;
        }
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let w = Work::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    assert!(wq.queue(&w));
    if !wait_for(|| ran.load(Ordering::SeqCst) == 1) {
        std::mem::forget(wq); // its drain would wait forever
        panic!("the item never ran: the watchdog stayed parked, no mayday");
    }
    let st = wq.stats();
    assert!(st.mayday >= 1 && st.rescued >= 1, "{st:?}");
    // Creation works again: the next item runs on a real worker.
    cmwq::debug_fail_worker_creation(false);
    assert!(wq.queue(&w));
    if !wait_for(|| ran.load(Ordering::SeqCst) == 2) {
        std::mem::forget(wq);
        panic!("the second item never ran");
    }
    wq.flush();
}
