//! The engine's service threads go on through a panic of cmwq's own code
//! (`engine/service.rs`): the timer (its loop, and each hand-off of a fired
//! item on its own) and the watchdog (its tick). The panics come from the
//! `failure-injection` hook, standing in for a bug of the engine; each is
//! counted in `engine_thread_panics`, which the tests here read as deltas,
//! one test at a time (the counter and the hook are process-wide).

mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use cmwq::{DelayedWork, InjectedPanic, Work, Workqueue, debug_inject_panic, engine_thread_panics};
use common::wait_for;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fifty items armed together fire in one or a few of the timer's wakeups;
/// the first hand-off panics. Only that item is lost: the others fired with
/// it still reach their queue and run (without the per-item catch, the
/// panic dropped every item of its batch with its PENDING bit held).
#[test]
fn a_panic_in_a_timer_hand_off_loses_only_that_item() {
    let _s = serial();
    let wq = Workqueue::builder("svc_handoff").unbound().build().unwrap();
    let before = engine_thread_panics();
    let ran: Arc<Vec<AtomicUsize>> = Arc::new((0..50).map(|_| AtomicUsize::new(0)).collect());
    let items: Vec<DelayedWork> = (0..50)
        .map(|i| {
            let ran = ran.clone();
            DelayedWork::new(move || {
                ran[i].fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    debug_inject_panic(InjectedPanic::TimerHandoff);
    for dw in &items {
        assert!(wq.queue_delayed(dw, Duration::from_millis(20)));
    }
    let total = || ran.iter().map(|r| r.load(Ordering::SeqCst)).sum::<usize>();
    assert!(
        wait_for(|| engine_thread_panics() > before && total() == 49),
        "panics caught {} (want 1), items run {} of 49",
        engine_thread_panics() - before,
        total()
    );
    assert_eq!(engine_thread_panics() - before, 1);
    // The first armed fired first, and its hand-off was the one that panicked.
    assert_eq!(ran[0].load(Ordering::SeqCst), 0);
    assert!(items[0].is_pending(), "the lost item keeps its PENDING bit");
    for (i, r) in ran.iter().enumerate().skip(1) {
        assert_eq!(r.load(Ordering::SeqCst), 1, "item {i}");
    }
    // The timer lives on: a later delayed item fires.
    assert!(wq.queue_delayed(&items[1], Duration::from_millis(1)));
    assert!(wait_for(|| ran[1].load(Ordering::SeqCst) == 2));
    // The lost item is nobody's to cancel: leave its handle behind.
    std::mem::forget(items);
}

/// A panic in the timer thread's loop (outside a hand-off) does not end the
/// thread: it starts over, and the item armed meanwhile fires. Without
/// `service::run` the thread died and no delayed item fired again.
#[test]
fn the_timer_thread_starts_over_after_a_panic_in_its_loop() {
    let _s = serial();
    let wq = Workqueue::builder("svc_timer_loop")
        .unbound()
        .build()
        .unwrap();
    let before = engine_thread_panics();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let dw = DelayedWork::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    debug_inject_panic(InjectedPanic::TimerLoop);
    assert!(wq.queue_delayed(&dw, Duration::from_millis(5)));
    assert!(
        wait_for(|| ran.load(Ordering::SeqCst) == 1),
        "the item never fired (panics caught: {})",
        engine_thread_panics() - before
    );
    assert_eq!(engine_thread_panics() - before, 1);
    // And again, with no panic armed.
    assert!(wq.queue_delayed(&dw, Duration::from_millis(1)));
    assert!(wait_for(|| ran.load(Ordering::SeqCst) == 2));
}

/// A panic in the watchdog's tick does not end the watchdog: it ticks again
/// while a worker is busy. Without `service::run` the thread died and its
/// ticks (the lockup reports, the CPU changes, the sleep looks) stopped.
#[test]
fn the_watchdog_starts_over_after_a_panic_in_its_tick() {
    let _s = serial();
    let wq = Workqueue::builder("svc_watchdog")
        .unbound()
        .build()
        .unwrap();
    let before = engine_thread_panics();
    // A busy worker keeps the watchdog ticking (it parks while all are idle).
    let stop = Arc::new(AtomicUsize::new(0));
    let s = stop.clone();
    let busy = Work::new(move || {
        while s.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    assert!(wq.queue(&busy));
    debug_inject_panic(InjectedPanic::WatchdogTick);
    let caught = wait_for(|| engine_thread_panics() > before);
    let at_panic = cmwq::watchdog_ticks();
    let ticked = caught && wait_for(|| cmwq::watchdog_ticks() >= at_panic + 3);
    stop.store(1, Ordering::SeqCst);
    busy.flush();
    assert!(caught, "the injected tick panic was not caught");
    assert!(ticked, "the watchdog stopped ticking after its panic");
    assert_eq!(engine_thread_panics() - before, 1);
}

/// Child half of the closed-stderr test: does nothing unless the parent set
/// `CMWQ_TEST_SVC_CLOSED_STDERR` (it then runs with a closed stderr pipe).
#[test]
fn closed_stderr_child() {
    if std::env::var_os("CMWQ_TEST_SVC_CLOSED_STDERR").is_none() {
        return;
    }
    let _s = serial();
    let wq = Workqueue::builder("svc_closed_stderr")
        .unbound()
        .build()
        .unwrap();
    let before = engine_thread_panics();
    let ran = Arc::new(AtomicUsize::new(0));
    let items: Vec<DelayedWork> = (0..10)
        .map(|_| {
            let r = ran.clone();
            DelayedWork::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    debug_inject_panic(InjectedPanic::TimerHandoff);
    for dw in &items {
        assert!(wq.queue_delayed(dw, Duration::from_millis(10)));
    }
    assert!(wait_for(|| ran.load(Ordering::SeqCst) == 9));
    assert_eq!(engine_thread_panics() - before, 1);
    assert!(wq.queue_delayed(&items[1], Duration::from_millis(1)));
    assert!(wait_for(|| ran.load(Ordering::SeqCst) == 10));
    std::mem::forget(items);
}

/// The report of a caught panic goes to stderr; with stderr closed (its
/// reader gone) the report's own write fails, which must not take the timer
/// down (`eprintln!` would panic there, outside the per-item catch, and the
/// thread's restart would panic again reporting it). Run in a child whose
/// stderr pipe is closed.
#[test]
fn a_closed_stderr_does_not_kill_the_timer() {
    let _s = serial();
    let status =
        common::run_child_stderr_closed("closed_stderr_child", "CMWQ_TEST_SVC_CLOSED_STDERR")
            .expect("the child hung: its timer died");
    assert!(status.success(), "child failed: {status:?}");
}
