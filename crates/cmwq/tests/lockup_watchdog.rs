//! The lockup watchdog (`BUG: workqueue lockup`), each case in a child
//! process (this binary run again with `CMWQ_LOCKUP_CHILD` set) whose stderr
//! the test reads: a stuck pool is reported once, in the kernel's words, with
//! the busy workqueues and pools; progress re-arms it; 0 disables it; a pool
//! whose items keep starting and a pool with one long item are never
//! reported. The stall: an item hides its worker from concurrency management
//! (`set_cm_exempt`, the kernel's cleared `PF_WQ_WORKER`) and waits, and a
//! second item queued on the same CPU waits behind it.
//!
//! The asserts count reports; the waits are generous polls (a report comes
//! about a second after a stall with the threshold at 1 s).

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cmwq::{Work, Workqueue};

const CHILD: &str = "CMWQ_LOCKUP_CHILD";
const BUG: &str = "BUG: workqueue lockup - pool ";

// ---- the child's side ----

fn cpu() -> usize {
    cmwq::topology::sched_affinity().unwrap()[0]
}

fn lockups() -> u64 {
    cmwq::snapshot().pools.iter().map(|p| p.lockups).sum()
}

fn wait_for(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < end, "child: gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A stuck pool: `first` hides its worker and waits for `release`; `second`,
/// queued on the same CPU once `first` runs, waits behind it.
struct Stall {
    release: Sender<()>,
    ran: Arc<AtomicUsize>,
    _items: (Work, Work),
}

fn stall(wq: &Workqueue) -> Stall {
    let (tx, rx) = channel::<()>();
    let rx = Mutex::new(rx);
    let started = Arc::new(AtomicBool::new(false));
    let ran = Arc::new(AtomicUsize::new(0));
    let (s, r) = (started.clone(), ran.clone());
    let first = Work::new(move || {
        assert!(cmwq::set_cm_exempt(true), "a worker can hide");
        s.store(true, Ordering::SeqCst);
        let _ = rx.lock().unwrap().recv();
        cmwq::set_cm_exempt(false);
        r.fetch_add(1, Ordering::SeqCst);
    });
    let r = ran.clone();
    let second = Work::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(wq.queue_on(cpu(), &first), Ok(true));
    wait_for("the first item to start", || started.load(Ordering::SeqCst));
    assert_eq!(wq.queue_on(cpu(), &second), Ok(true));
    Stall {
        release: tx,
        ran,
        _items: (first, second),
    }
}

impl Stall {
    /// Lets the first item return; both items then run.
    fn end(self, wq: &Workqueue) {
        self.release.send(()).unwrap();
        wq.flush();
        assert_eq!(self.ran.load(Ordering::SeqCst), 2, "both items ran");
    }
}

fn child(case: &str) {
    if case == "bad_env" {
        let e = Workqueue::builder("lockup_bad").build().err();
        let msg = e.map(|e| e.to_string()).unwrap_or_default();
        eprintln!("CHILD: error: {msg}");
        return;
    }
    let wq = Workqueue::builder("lockup_q").build().unwrap();
    match case {
        "once_rearm" => {
            cmwq::set_watchdog_thresh(1);
            let s = stall(&wq);
            wait_for("the first report", || lockups() >= 1);
            // The pool stays stuck for more than twice the threshold: no
            // second report for the same stall.
            std::thread::sleep(Duration::from_millis(2500));
            s.end(&wq);
            eprintln!("CHILD: second stall");
            let s = stall(&wq);
            wait_for("the second report", || lockups() >= 2);
            s.end(&wq);
        }
        "disabled" => {
            cmwq::set_watchdog_thresh(0);
            let s = stall(&wq);
            std::thread::sleep(Duration::from_secs(3));
            // The same stall, the watchdog turned on: it is seen.
            eprintln!("CHILD: enabling");
            cmwq::set_watchdog_thresh(1);
            wait_for("the report", || lockups() >= 1);
            s.end(&wq);
        }
        "env" => {
            // CMWQ_WATCHDOG_THRESH=1, read by the first build.
            assert_eq!(cmwq::watchdog_thresh(), 1);
            assert_eq!(cmwq::snapshot().watchdog_thresh, 1);
            let s = stall(&wq);
            wait_for("the report", || lockups() >= 1);
            s.end(&wq);
        }
        "moving" => {
            cmwq::set_watchdog_thresh(1);
            // 300 items of 10 ms each, one at a time (each hides its worker,
            // so no second worker helps): items wait for about 3 s, and one
            // starts every 10 ms.
            let done = Arc::new(AtomicUsize::new(0));
            let items: Vec<Work> = (0..300)
                .map(|_| {
                    let d = done.clone();
                    Work::new(move || {
                        cmwq::set_cm_exempt(true);
                        std::thread::sleep(Duration::from_millis(10));
                        cmwq::set_cm_exempt(false);
                        d.fetch_add(1, Ordering::SeqCst);
                    })
                })
                .collect();
            for w in &items {
                assert_eq!(wq.queue_on(cpu(), w), Ok(true));
            }
            wq.flush();
            assert_eq!(done.load(Ordering::SeqCst), 300);
            eprintln!("CHILD: moving done");
            // One long item, nothing behind it.
            let long = Work::new(|| {
                cmwq::set_cm_exempt(true);
                std::thread::sleep(Duration::from_millis(2500));
                cmwq::set_cm_exempt(false);
            });
            assert_eq!(wq.queue_on(cpu(), &long), Ok(true));
            wq.flush();
            eprintln!("CHILD: long done");
            // A real stall in the same process is reported.
            let s = stall(&wq);
            wait_for("the report", || lockups() >= 1);
            s.end(&wq);
        }
        other => panic!("unknown child case {other}"),
    }
    eprintln!("CHILD: done");
}

/// Not a test of its own: the entry point of the child processes.
#[test]
fn child_entry() {
    if let Ok(case) = std::env::var(CHILD) {
        child(&case);
    }
}

// ---- the parent's side ----

/// Runs case `case` in a child; returns its stderr (after checking it ended well).
fn run(case: &str, env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .env_remove("CMWQ_WATCHDOG_THRESH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "child {case} failed:\n{err}");
    assert!(
        err.contains("CHILD: done") || case == "bad_env",
        "child {case} did not finish:\n{err}"
    );
    err
}

fn reports(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with(BUG)).collect()
}

/// The position of `needle` in `hay` (panics with the text if absent).
fn at(hay: &str, needle: &str) -> usize {
    hay.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in:\n{hay}"))
}

#[test]
fn a_stuck_pool_is_reported_once_in_the_kernels_words_and_progress_rearms_it() {
    let err = run("once_rearm", &[]);
    let bugs = reports(&err);
    assert_eq!(bugs.len(), 2, "one report per stall:\n{err}");
    let cpu = cpu();
    for b in &bugs {
        let want = format!("{BUG}cpus={cpu} node=");
        assert!(b.starts_with(&want), "{b}");
        assert!(b.contains(" flags=0x0 nice=0 stuck for "), "{b}");
        assert!(b.ends_with("s!"), "{b}");
    }
    // The second report comes after the first stall ended.
    assert!(at(&err, "CHILD: second stall") < err.rfind(BUG).unwrap());
    // show_all_workqueues: the queue, the pwq of the stuck pool, which
    // worker runs which item, what waits; then the busy pool.
    let dump = &err[at(&err, BUG)..];
    at(dump, "\nShowing busy workqueues and worker pools:\n");
    at(dump, "\nworkqueue lockup_q: flags=0x0\n");
    let pwq = &dump[at(dump, "\n  pwq ") + 1..];
    assert!(
        pwq.lines()
            .next()
            .unwrap()
            .contains(&format!(": cpus={cpu} node="))
    );
    assert!(pwq.lines().next().unwrap().contains(" active="), "{pwq}");
    let inflight = pwq.lines().nth(1).unwrap();
    assert!(inflight.starts_with("    in-flight: "), "{pwq}");
    assert!(
        inflight.contains(":lockup_watchdog::stall::{{closure}}"),
        "{inflight}"
    );
    let pending = pwq.lines().nth(2).unwrap();
    assert!(
        pending.starts_with("    pending: lockup_watchdog::stall::{{closure}}"),
        "{pending}"
    );
    let pool = dump
        .lines()
        .find(|l| l.starts_with("pool "))
        .unwrap_or_else(|| panic!("no pool line:\n{dump}"));
    assert!(pool.contains(&format!(": cpus={cpu} node=")), "{pool}");
    assert!(
        pool.contains(" hung=") && pool.contains(" workers="),
        "{pool}"
    );
}

#[test]
fn zero_disables_the_watchdog() {
    let err = run("disabled", &[]);
    let bugs = reports(&err);
    assert_eq!(bugs.len(), 1, "{err}");
    // Nothing while it was off, though the pool was stuck for 3 s.
    assert!(at(&err, "CHILD: enabling") < at(&err, BUG), "{err}");
}

#[test]
fn the_threshold_comes_from_the_environment() {
    let err = run("env", &[("CMWQ_WATCHDOG_THRESH", "1")]);
    assert_eq!(reports(&err).len(), 1, "{err}");
    let err = run("bad_env", &[("CMWQ_WATCHDOG_THRESH", "soon")]);
    let msg = &err[at(&err, "CHILD: error: ")..];
    assert!(
        msg.contains("CMWQ_WATCHDOG_THRESH") && msg.contains("soon") && msg.contains("seconds"),
        "{msg}"
    );
}

#[test]
fn a_moving_pool_and_a_single_long_item_are_never_reported() {
    let err = run("moving", &[]);
    let bugs = reports(&err);
    assert_eq!(bugs.len(), 1, "only the final, real stall:\n{err}");
    assert!(at(&err, "CHILD: long done") < at(&err, BUG), "{err}");
}
