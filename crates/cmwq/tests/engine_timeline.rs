//! The three timeline scenarios of the kernel's workqueue documentation
//! (Documentation/core-api/workqueue.rst, "Example Execution Scenarios"):
//!
//! w0 burns CPU for 5 ms, sleeps 10 ms, burns 5 ms again and finishes; w1 and
//! w2 burn 5 ms then sleep 10 ms. All are queued to CPU 0 of bound queues.
//!
//! Assertions are on the order of events only. Where the documented order
//! depends on durations (w0 still asleep when w2 starts, w2 starting while w1
//! still burns), the phase is *extended* until the event the documentation
//! shows before it has happened (with a 10 s hang limit that logs `Timeout`),
//! so the order follows from the engine's logic, never from timing luck: an
//! engine without the rule in question cannot produce the event, the phase
//! times out and the test fails.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cmwq::{Work, Workqueue};

/// The scenarios share CPU 0's pool: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());
const HANG: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    Start,
    Sleep,
    Wake,
    Finish,
    Timeout,
}

#[derive(Default)]
struct Log {
    ev: Mutex<Vec<(usize, Ev)>>,
}

impl Log {
    fn push(&self, w: usize, e: Ev) {
        self.ev.lock().unwrap().push((w, e));
    }
    fn has(&self, w: usize, e: Ev) -> bool {
        self.ev.lock().unwrap().contains(&(w, e))
    }
    /// Global sequence number of an event; panics if it did not happen.
    fn at(&self, w: usize, e: Ev) -> usize {
        let v = self.ev.lock().unwrap();
        v.iter()
            .position(|&x| x == (w, e))
            .unwrap_or_else(|| panic!("w{w} {e:?} never happened: {v:?}"))
    }
    fn dump(&self) -> String {
        let v = self.ev.lock().unwrap();
        v.iter()
            .map(|(w, e)| format!("w{w}:{e:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn burn(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Runs a phase for at least `min` and until `until` holds; logs `Timeout` for
/// `w` if it does not within the hang limit.
fn extend(log: &Log, w: usize, min: Duration, spin: bool, until: impl Fn() -> bool) {
    let t = Instant::now();
    loop {
        let done_min = t.elapsed() >= min;
        if done_min && until() {
            return;
        }
        if t.elapsed() > HANG {
            log.push(w, Ev::Timeout);
            return;
        }
        if spin {
            std::hint::spin_loop();
        } else {
            thread::sleep(Duration::from_micros(200));
        }
    }
}

const MS5: Duration = Duration::from_millis(5);
const MS10: Duration = Duration::from_millis(10);

/// One documented work item. `burn_until`/`sleep_until` extend its phases.
fn item(
    log: &Arc<Log>,
    w: usize,
    burn_until: impl Fn(&Log) -> bool + Send + Sync + 'static,
    sleep_until: impl Fn(&Log) -> bool + Send + Sync + 'static,
) -> Work {
    let log = log.clone();
    Work::new(move || {
        log.push(w, Ev::Start);
        extend(&log, w, MS5, true, || burn_until(&log));
        log.push(w, Ev::Sleep);
        cmwq::blocking(|| extend(&log, w, MS10, false, || sleep_until(&log)));
        log.push(w, Ev::Wake);
        if w == 0 {
            burn(MS5);
        }
        log.push(w, Ev::Finish);
    })
}

fn run(wq0: &Workqueue, wq1: &Workqueue, works: &[Work]) {
    assert!(wq0.queue_on(0, &works[0]).unwrap());
    assert!(wq1.queue_on(0, &works[1]).unwrap());
    assert!(wq1.queue_on(0, &works[2]).unwrap());
    for w in works {
        w.flush();
    }
}

fn no_timeouts(log: &Log) {
    for w in 0..3 {
        assert!(
            !log.has(w, Ev::Timeout),
            "w{w} waited 10 s for an event the documented timeline has: {}",
            log.dump()
        );
    }
}

/// max_active >= 3:
///  0 w0 starts and burns CPU     5 w0 sleeps
///  5 w1 starts and burns CPU    10 w1 sleeps
/// 10 w2 starts and burns CPU    15 w2 sleeps
/// 15 w0 wakes up and burns CPU  20 w0 finishes
/// 20 w1 wakes up and finishes   25 w2 wakes up and finishes
fn scenario_a(max_active: usize) {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The documented timelines predate CPU-intensive detection: the watchdog
    // must not take a long burn out of concurrency management here.
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
    let wq = Workqueue::builder("tl-a")
        .max_active(max_active)
        .build()
        .unwrap();
    let log = Arc::new(Log::default());
    // w0 sleeps (at least 10 ms) until w2 slept: it is asleep when w1 and w2 start.
    let works = [
        item(&log, 0, |_| true, |l| l.has(2, Ev::Sleep)),
        item(&log, 1, |_| true, |_| true),
        item(&log, 2, |_| true, |_| true),
    ];
    run(&wq, &wq, &works);
    let l = &log;
    let d = l.dump();
    no_timeouts(l);
    assert_eq!(l.at(0, Ev::Start), 0, "w0 starts first: {d}");
    // Concurrency management: only one runs while none sleeps.
    assert!(
        l.at(1, Ev::Start) > l.at(0, Ev::Sleep),
        "w1 starts only after w0 sleeps: {d}"
    );
    assert!(
        l.at(2, Ev::Start) > l.at(1, Ev::Sleep),
        "w2 starts only after w1 sleeps: {d}"
    );
    // And the sleeping w0 does not hold the others back.
    assert!(
        l.at(1, Ev::Start) < l.at(0, Ev::Wake),
        "w1 starts while w0 sleeps: {d}"
    );
    assert!(
        l.at(2, Ev::Start) < l.at(0, Ev::Finish),
        "w2 starts before w0 finishes: {d}"
    );
    assert!(
        wq.stats().cm_wakeup >= 2,
        "two concurrency-management wakeups: {:?}",
        wq.stats()
    );
}

#[test]
fn doc_timeline_max_active_3() {
    scenario_a(3);
}

#[test]
fn doc_timeline_max_active_default() {
    scenario_a(cmwq::DFL_ACTIVE);
}

/// max_active == 2:
///  0 w0 starts and burns CPU     5 w0 sleeps
///  5 w1 starts and burns CPU    10 w1 sleeps
/// 15 w0 wakes up and burns CPU  20 w0 finishes
/// 20 w1 wakes up and finishes   20 w2 starts and burns CPU
/// 25 w2 sleeps                  35 w2 wakes up and finishes
#[test]
fn doc_timeline_max_active_2() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The documented timelines predate CPU-intensive detection: the watchdog
    // must not take a long burn out of concurrency management here.
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
    let wq = Workqueue::builder("tl-b").max_active(2).build().unwrap();
    let log = Arc::new(Log::default());
    // w0 sleeps until w1 slept (and 5 ms more, as documented: a window in which
    // an engine ignoring max_active would start w2 on the idle CPU).
    let w1_slept = Arc::new(Mutex::new(None::<Instant>));
    let w1s = w1_slept.clone();
    let works = [
        item(
            &log,
            0,
            |_| true,
            move |l| {
                let mut g = w1s.lock().unwrap();
                if g.is_none() && l.has(1, Ev::Sleep) {
                    *g = Some(Instant::now());
                }
                g.is_some_and(|t| t.elapsed() >= MS5)
            },
        ),
        item(&log, 1, |_| true, |_| true),
        item(&log, 2, |_| true, |_| true),
    ];
    run(&wq, &wq, &works);
    let l = &log;
    let d = l.dump();
    no_timeouts(l);
    assert_eq!(l.at(0, Ev::Start), 0, "w0 starts first: {d}");
    assert!(
        l.at(1, Ev::Start) > l.at(0, Ev::Sleep),
        "w1 starts after w0 sleeps: {d}"
    );
    assert!(
        l.at(1, Ev::Start) < l.at(0, Ev::Wake),
        "w1 starts while w0 sleeps: {d}"
    );
    let first_finish = l.at(0, Ev::Finish).min(l.at(1, Ev::Finish));
    assert!(
        l.at(2, Ev::Start) > first_finish,
        "w2 waits for w0 or w1 to finish (max_active 2): {d}"
    );
}

/// w1 and w2 on a second queue with WQ_CPU_INTENSIVE:
///  0 w0 starts and burns CPU     5 w0 sleeps
///  5 w1 and w2 start and burn CPU
/// 10 w1 sleeps                  15 w2 sleeps
/// 15 w0 wakes up and burns CPU  20 w0 finishes
/// 20 w1 wakes up and finishes   25 w2 wakes up and finishes
#[test]
fn doc_timeline_cpu_intensive() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The documented timelines predate CPU-intensive detection: the watchdog
    // must not take a long burn out of concurrency management here.
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
    let wq0 = Workqueue::builder("tl-c0").build().unwrap();
    let wq1 = Workqueue::builder("tl-c1").cpu_intensive().build().unwrap();
    let log = Arc::new(Log::default());
    // w1 burns until w2 started: only possible if w1 does not count as running.
    // w0 sleeps until w2 slept, as documented.
    let works = [
        item(&log, 0, |_| true, |l| l.has(2, Ev::Sleep)),
        item(&log, 1, |l| l.has(2, Ev::Start), |_| true),
        item(&log, 2, |_| true, |_| true),
    ];
    run(&wq0, &wq1, &works);
    let l = &log;
    let d = l.dump();
    no_timeouts(l);
    assert_eq!(l.at(0, Ev::Start), 0, "w0 starts first: {d}");
    assert!(
        l.at(1, Ev::Start) > l.at(0, Ev::Sleep),
        "w1 waits for w0 to sleep: {d}"
    );
    assert!(
        l.at(2, Ev::Start) > l.at(0, Ev::Sleep),
        "w2 waits for w0 to sleep: {d}"
    );
    assert!(
        l.at(2, Ev::Start) < l.at(1, Ev::Sleep),
        "w1 and w2 burn together (CPU_INTENSIVE): {d}"
    );
    assert!(
        l.at(2, Ev::Start) < l.at(0, Ev::Wake),
        "w2 starts while w0 sleeps: {d}"
    );
}

/// Control for the scenario above: without CPU_INTENSIVE, w2 cannot start while
/// w1 burns; it starts only once w1 sleeps.
#[test]
fn doc_timeline_not_intensive_control() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The documented timelines predate CPU-intensive detection: the watchdog
    // must not take a long burn out of concurrency management here.
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
    let wq = Workqueue::builder("tl-ctl").build().unwrap();
    let log = Arc::new(Log::default());
    let seen = Arc::new(AtomicUsize::new(0));
    let s2 = seen.clone();
    // w1 burns 30 ms: plenty of time for a wrongly woken worker to start w2.
    let works = [
        item(&log, 0, |_| true, |l| l.has(2, Ev::Sleep)),
        item(
            &log,
            1,
            move |_| {
                s2.fetch_add(1, Ordering::Relaxed) > 0 && {
                    burn(Duration::from_millis(25));
                    true
                }
            },
            |_| true,
        ),
        item(&log, 2, |_| true, |_| true),
    ];
    run(&wq, &wq, &works);
    let d = log.dump();
    no_timeouts(&log);
    assert!(
        log.at(2, Ev::Start) > log.at(1, Ev::Sleep),
        "w2 must not start while a counted w1 burns: {d}"
    );
}
