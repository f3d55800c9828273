//! Semantic tests of the workqueue engine: one test per rule of issue 3.
//!
//! Every assertion is about counts and orders of events. Durations appear only
//! as hang detection (`wait_until`, 10 s) or as short windows that give a broken
//! engine the chance to misbehave (a sleep before checking that nothing ran).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use cmwq::topology::{Scope, Topology};
use cmwq::{DelayedWork, Error, Work, Workqueue};

const HANG: Duration = Duration::from_secs(10);

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < HANG, "timed out (10 s) waiting for {what}");
        thread::sleep(Duration::from_micros(200));
    }
}

/// A one-shot gate a callback can block on (marked blocking for concurrency management).
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate::default())
    }
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
    fn wait(&self) {
        cmwq::blocking(|| {
            let g = self.open.lock().unwrap();
            let _ = self.cv.wait_timeout_while(g, HANG, |o| !*o).unwrap();
        });
    }
}

fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

fn counting_work(n: &Arc<AtomicUsize>) -> Work {
    let n = n.clone();
    Work::new(move || {
        n.fetch_add(1, Ordering::SeqCst);
    })
}

/// A work that blocks on `gate`, counting starts and ends.
fn gated_work(gate: &Arc<Gate>, started: &Arc<AtomicUsize>, done: &Arc<AtomicUsize>) -> Work {
    let (gate, started, done) = (gate.clone(), started.clone(), done.clone());
    Work::new(move || {
        started.fetch_add(1, Ordering::SeqCst);
        gate.wait();
        done.fetch_add(1, Ordering::SeqCst);
    })
}

/// Runs `f` in a thread; returns a flag set when it returned, and the handle.
fn spawn_flagged<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> (Arc<AtomicBool>, thread::JoinHandle<T>) {
    let flag = Arc::new(AtomicBool::new(false));
    let f2 = flag.clone();
    let h = thread::spawn(move || {
        let r = f();
        f2.store(true, Ordering::SeqCst);
        r
    });
    (flag, h)
}

fn ordered(name: &str) -> Workqueue {
    Workqueue::builder(name).ordered().build().unwrap()
}

// ---------------------------------------------------------------- work items

#[test]
fn queue_returns_false_while_pending() {
    let wq = ordered("sem-pending");
    let gate = Gate::new();
    let (bs, bd) = (counter(), counter());
    let blocker = gated_work(&gate, &bs, &bd);
    assert!(wq.queue(&blocker));
    wait_until("blocker start", || bs.load(Ordering::SeqCst) == 1);
    let n = counter();
    let w = counting_work(&n);
    assert!(!w.is_pending());
    assert!(wq.queue(&w));
    assert!(w.is_pending());
    assert!(
        !wq.queue(&w),
        "second queue of a pending work must return false"
    );
    assert!(!wq.queue_on(0, &w).unwrap());
    gate.open();
    w.flush();
    assert_eq!(
        n.load(Ordering::SeqCst),
        1,
        "two queues of a pending work run it once"
    );
    assert!(!w.is_pending());
    assert!(wq.queue(&w), "after it ran it can be queued again");
    w.flush();
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[test]
fn requeue_from_inside_callback() {
    let wq = Workqueue::builder("sem-requeue-in")
        .unbound()
        .build()
        .unwrap();
    let n = counter();
    let slot: Arc<OnceLock<(Workqueue, Work)>> = Arc::new(OnceLock::new());
    let (n2, s2) = (n.clone(), slot.clone());
    let w = Work::new(move || {
        let k = n2.fetch_add(1, Ordering::SeqCst) + 1;
        if k < 5 {
            let (wq, w) = s2.get().unwrap();
            assert!(
                wq.queue(w),
                "a running work must be re-queueable from its callback"
            );
        }
    });
    slot.set((wq.clone(), w.clone())).unwrap();
    assert!(wq.queue(&w));
    wait_until("5 chained runs", || n.load(Ordering::SeqCst) == 5);
    w.flush();
    wq.flush();
    assert_eq!(n.load(Ordering::SeqCst), 5);
}

#[test]
fn requeue_from_outside_while_running() {
    for wq in [
        Workqueue::builder("sem-requeue-out-b").build().unwrap(),
        Workqueue::builder("sem-requeue-out-u")
            .unbound()
            .build()
            .unwrap(),
    ] {
        let gate = Gate::new();
        let (s, d) = (counter(), counter());
        let w = gated_work(&gate, &s, &d);
        assert!(wq.queue(&w));
        wait_until("first run starts", || s.load(Ordering::SeqCst) == 1);
        assert!(
            !w.is_pending(),
            "PENDING is cleared before the callback runs"
        );
        assert!(wq.queue(&w), "a running work can be queued again");
        assert!(!wq.queue(&w));
        gate.open();
        wait_until("second run", || d.load(Ordering::SeqCst) == 2);
        w.flush();
        assert_eq!(s.load(Ordering::SeqCst), 2);
    }
}

/// A work that records the maximum number of its concurrent executions.
struct Overlap {
    running: AtomicUsize,
    max: AtomicUsize,
    starts: AtomicUsize,
    runs: AtomicUsize,
    /// While set, the callback stays in (blocked) until cleared.
    hold: AtomicBool,
}

fn overlap_work() -> (Arc<Overlap>, Work) {
    let o = Arc::new(Overlap {
        running: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
        starts: AtomicUsize::new(0),
        runs: AtomicUsize::new(0),
        hold: AtomicBool::new(false),
    });
    let o2 = o.clone();
    let w = Work::new(move || {
        let c = o2.running.fetch_add(1, Ordering::SeqCst) + 1;
        o2.max.fetch_max(c, Ordering::SeqCst);
        o2.starts.fetch_add(1, Ordering::SeqCst);
        cmwq::blocking(|| {
            thread::sleep(Duration::from_millis(2));
            let t = Instant::now();
            while o2.hold.load(Ordering::SeqCst) && t.elapsed() < HANG {
                thread::sleep(Duration::from_micros(200));
            }
        });
        o2.running.fetch_sub(1, Ordering::SeqCst);
        o2.runs.fetch_add(1, Ordering::SeqCst);
    });
    (o, w)
}

fn check_non_reentrant(wq: Workqueue) {
    let (o, w) = overlap_work();
    // Deterministic part: queue on CPU 0 while it runs on CPU 1's pool, and back.
    for i in 0..10 {
        let before = o.runs.load(Ordering::SeqCst);
        let (a, b) = if i % 2 == 0 { (1, 0) } else { (0, 1) };
        o.hold.store(true, Ordering::SeqCst);
        assert!(wq.queue_on(a, &w).unwrap());
        wait_until("the work to start", || {
            o.starts.load(Ordering::SeqCst) == before + 1
        });
        assert!(
            wq.queue_on(b, &w).unwrap(),
            "a running work can be queued again"
        );
        // A window in which a reentrant engine would start the second instance.
        thread::sleep(Duration::from_millis(5));
        assert_eq!(
            o.max.load(Ordering::SeqCst),
            1,
            "{}: queued on CPU {b} while running from CPU {a}: ran twice at once",
            wq.name()
        );
        o.hold.store(false, Ordering::SeqCst);
        wait_until("two runs", || o.runs.load(Ordering::SeqCst) == before + 2);
    }
    // Hammer from two threads on both CPUs.
    let hs: Vec<_> = (0..2)
        .map(|t| {
            let (wq, w) = (wq.clone(), w.clone());
            thread::spawn(move || {
                for i in 0..150 {
                    let _ = wq.queue_on((i + t) % 2, &w).unwrap();
                    thread::sleep(Duration::from_micros(300));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    w.flush();
    wq.flush();
    assert_eq!(
        o.max.load(Ordering::SeqCst),
        1,
        "{}: a work ran on two workers at once",
        wq.name()
    );
}

#[test]
fn non_reentrant_bound() {
    check_non_reentrant(Workqueue::builder("sem-nonreent-b").build().unwrap());
}

#[test]
fn non_reentrant_unbound_scope_cpu() {
    let wq = Workqueue::builder("sem-nonreent-u")
        .unbound()
        .affinity_scope(Scope::Cpu)
        .build()
        .unwrap();
    let (pools, _) = wq.cpu_pools();
    assert_ne!(
        pools[0], pools[1],
        "scope cpu: CPUs 0 and 1 have distinct pools"
    );
    check_non_reentrant(wq);
}

#[test]
fn work_flush_semantics() {
    let wq = Workqueue::builder("sem-wflush").unbound().build().unwrap();
    let n = counter();
    let idle = counting_work(&n);
    assert!(!idle.flush(), "flush of a never-queued work does not wait");
    assert!(wq.queue(&idle));
    idle.flush();
    assert!(!idle.flush(), "flush of an idle work does not wait");

    let gate = Gate::new();
    let (s, d) = (counter(), counter());
    let w = gated_work(&gate, &s, &d);
    assert!(wq.queue(&w));
    wait_until("start", || s.load(Ordering::SeqCst) == 1);
    assert!(wq.queue(&w), "re-queue while running");
    let w2 = w.clone();
    let (flushed, h) = spawn_flagged(move || w2.flush());
    thread::sleep(Duration::from_millis(20));
    assert!(
        !flushed.load(Ordering::SeqCst),
        "flush returned while the work ran"
    );
    let d2 = d.clone();
    gate.open();
    assert!(h.join().unwrap(), "flush that waited returns true");
    assert_eq!(
        d2.load(Ordering::SeqCst),
        2,
        "flush waits for the last queued instance"
    );
}

/// An item queued again while it runs, taken by another worker of its pool,
/// waits on the running worker's own list (non-reentrancy); a cancel takes
/// it from there. The pool's count of such items (the gate of every item
/// start's look at that list) follows: a count left at 1 trips the debug
/// check at the next look, the worker dies and `workers_lost` says so; a
/// count that missed the hand would leave the item there unrun.
#[test]
fn cancel_takes_an_item_handed_to_its_running_instance() {
    /// A broken count kills every worker that looks; the queue is then left
    /// behind rather than destroyed (its destroy would wait for ever), so the
    /// test fails instead of hanging.
    struct LeakOnPanic(Option<Workqueue>);
    impl Drop for LeakOnPanic {
        fn drop(&mut self) {
            if thread::panicking() {
                std::mem::forget(self.0.take());
            }
        }
    }
    let keep = LeakOnPanic(Some(
        Workqueue::builder("sem-cancel-handed").build().unwrap(),
    ));
    let wq = keep.0.as_ref().expect("built");
    let pool = wq.cpu_pools().0[0].expect("CPU 0's pool");
    let counts = || {
        wq.pool_counts()
            .into_iter()
            .find(|c| c.pool == pool)
            .expect("the pool's counts")
    };
    let gate = Gate::new();
    let (s, d) = (counter(), counter());
    let w = gated_work(&gate, &s, &d);
    assert!(wq.queue_on(0, &w).unwrap());
    wait_until("start", || s.load(Ordering::SeqCst) == 1);
    // The running instance blocks (annotated): another worker takes the
    // second and hands it to the first.
    assert!(wq.queue_on(0, &w).unwrap());
    wait_until("the hand-off", || counts().worklist == 0);
    assert!(w.is_pending());
    assert!(w.cancel(), "the handed item is pending: cancel takes it");
    assert!(!w.is_pending());
    gate.open();
    wait_until("the first instance's end", || d.load(Ordering::SeqCst) == 1);
    // Handed items run again (the count moves with the hand).
    for i in 0..3 {
        let gate = Gate::new();
        let (s2, d2) = (counter(), counter());
        let v = gated_work(&gate, &s2, &d2);
        assert!(wq.queue_on(0, &v).unwrap());
        wait_until("start", || s2.load(Ordering::SeqCst) == 1);
        assert!(wq.queue_on(0, &v).unwrap());
        wait_until("the hand-off", || counts().worklist == 0);
        gate.open();
        wait_until("both instances' ends", || d2.load(Ordering::SeqCst) == 2);
        assert_eq!(
            (s2.load(Ordering::SeqCst), d2.load(Ordering::SeqCst)),
            (2, 2),
            "round {i}: the handed instance ran after the first"
        );
    }
    assert_eq!(
        s.load(Ordering::SeqCst),
        1,
        "the cancelled instance never ran"
    );
    assert_eq!(counts().workers_lost, 0, "no worker died");
}

#[test]
fn cancel_removes_pending() {
    let wq = ordered("sem-cancel");
    let gate = Gate::new();
    let (bs, bd) = (counter(), counter());
    let blocker = gated_work(&gate, &bs, &bd);
    assert!(wq.queue(&blocker));
    wait_until("blocker start", || bs.load(Ordering::SeqCst) == 1);
    let n = counter();
    let w = counting_work(&n);
    assert!(!w.cancel(), "cancel of an idle work returns false");
    assert!(wq.queue(&w));
    assert!(w.cancel(), "cancel of a pending work returns true");
    assert!(!w.is_pending());
    assert!(!w.cancel());
    assert!(!w.flush(), "a cancelled work has nothing to flush");
    // cancel_sync of a pending (not running) work
    assert!(wq.queue(&w));
    assert!(w.cancel_sync());
    assert!(!w.cancel_sync());
    gate.open();
    wq.flush();
    assert_eq!(n.load(Ordering::SeqCst), 0, "a cancelled work never runs");
    assert!(wq.queue(&w), "a cancelled work can be queued again");
    w.flush();
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn cancel_sync_waits_and_blocks_queueing() {
    let wq = Workqueue::builder("sem-cancel-sync")
        .unbound()
        .build()
        .unwrap();
    let gate = Gate::new();
    let (s, d) = (counter(), counter());
    let w = gated_work(&gate, &s, &d);
    assert!(wq.queue(&w));
    wait_until("start", || s.load(Ordering::SeqCst) == 1);
    let w2 = w.clone();
    let (done, h) = spawn_flagged(move || w2.cancel_sync());
    wait_until("cancel_sync to disable the work", || w.is_disabled());
    assert!(!wq.queue(&w), "queue during cancel_sync returns false");
    assert!(!done.load(Ordering::SeqCst));
    thread::sleep(Duration::from_millis(10));
    assert!(
        !done.load(Ordering::SeqCst),
        "cancel_sync returned while the work ran"
    );
    gate.open();
    assert!(!h.join().unwrap(), "the work was running, not pending");
    assert_eq!(
        d.load(Ordering::SeqCst),
        1,
        "cancel_sync waited for the running instance"
    );
    assert!(!w.is_disabled());
    assert!(wq.queue(&w), "queueable again after cancel_sync");
    w.flush();
    assert_eq!(d.load(Ordering::SeqCst), 2);
}

#[test]
fn disable_enable_nest() {
    let wq = ordered("sem-disable");
    let n = counter();
    let w = counting_work(&n);
    assert!(!w.enable(), "enable of an enabled work returns false");
    assert!(!w.disable());
    assert!(!w.disable());
    assert!(w.is_disabled());
    assert!(!wq.queue(&w));
    assert!(!w.enable(), "one of two disables undone: still disabled");
    assert!(w.is_disabled());
    assert!(!wq.queue(&w));
    assert!(w.enable());
    assert!(!w.is_disabled());
    assert!(wq.queue(&w));
    w.flush();
    assert_eq!(n.load(Ordering::SeqCst), 1);

    // disable of a pending work cancels it
    let gate = Gate::new();
    let (bs, bd) = (counter(), counter());
    let blocker = gated_work(&gate, &bs, &bd);
    assert!(wq.queue(&blocker));
    wait_until("blocker start", || bs.load(Ordering::SeqCst) == 1);
    assert!(wq.queue(&w));
    assert!(w.disable(), "disable returns whether it was pending");
    gate.open();
    wq.flush();
    assert_eq!(n.load(Ordering::SeqCst), 1);
    assert!(w.enable());
    // disable_sync waits for a running instance
    let gate = Gate::new();
    let (s, d) = (counter(), counter());
    let g = gated_work(&gate, &s, &d);
    assert!(wq.queue(&g));
    wait_until("start", || s.load(Ordering::SeqCst) == 1);
    let g2 = g.clone();
    let (done, h) = spawn_flagged(move || g2.disable_sync());
    wait_until("disabled", || g.is_disabled());
    thread::sleep(Duration::from_millis(10));
    assert!(
        !done.load(Ordering::SeqCst),
        "disable_sync returned while it ran"
    );
    gate.open();
    assert!(!h.join().unwrap());
    assert_eq!(d.load(Ordering::SeqCst), 1);
    assert!(g.is_disabled());
    assert!(!wq.queue(&g));
    assert!(g.enable());
}

// ---------------------------------------------------------------- delayed work

fn delayed_counting(n: &Arc<AtomicUsize>) -> DelayedWork {
    let n = n.clone();
    DelayedWork::new(move || {
        n.fetch_add(1, Ordering::SeqCst);
    })
}

#[test]
fn delayed_runs_after_delay_and_is_pending_while_armed() {
    let wq = Workqueue::builder("sem-delayed").unbound().build().unwrap();
    let n = counter();
    let dw = delayed_counting(&n);
    assert!(wq.queue_delayed(&dw, Duration::from_millis(30)));
    assert!(dw.is_pending());
    assert!(
        !wq.queue_delayed(&dw, Duration::from_millis(1)),
        "false while armed"
    );
    wait_until("delayed run", || n.load(Ordering::SeqCst) == 1);
    dw.flush();
    assert!(!dw.is_pending());
    // zero delay queues at once
    assert!(wq.queue_delayed(&dw, Duration::ZERO));
    dw.flush();
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[test]
fn mod_delayed_rearms() {
    let wq = Workqueue::builder("sem-mod-delayed")
        .unbound()
        .build()
        .unwrap();
    let n = counter();
    let dw = delayed_counting(&n);
    assert!(
        !wq.mod_delayed(&dw, Duration::from_secs(60)),
        "was not pending"
    );
    assert!(dw.is_pending());
    assert!(wq.mod_delayed(&dw, Duration::from_millis(5)), "was pending");
    wait_until("re-armed delayed run (60 s timer replaced by 5 ms)", || {
        n.load(Ordering::SeqCst) == 1
    });
    dw.flush();
    assert_eq!(
        n.load(Ordering::SeqCst),
        1,
        "re-arming does not run it twice"
    );
}

#[test]
fn delayed_cancel_sync_prevents_run() {
    let wq = Workqueue::builder("sem-delayed-cancel")
        .unbound()
        .build()
        .unwrap();
    let n = counter();
    let dw = delayed_counting(&n);
    assert!(wq.queue_delayed(&dw, Duration::from_millis(40)));
    assert!(dw.cancel_sync());
    assert!(!dw.is_pending());
    assert!(!dw.cancel_sync());
    let dw2 = delayed_counting(&n);
    assert!(wq.queue_delayed(&dw2, Duration::from_millis(40)));
    assert!(dw2.cancel());
    thread::sleep(Duration::from_millis(120));
    wq.flush();
    assert_eq!(
        n.load(Ordering::SeqCst),
        0,
        "a cancelled timer never runs its work"
    );
    assert!(wq.queue_delayed(&dw, Duration::ZERO));
    dw.flush();
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn delayed_flush_fires_now() {
    let wq = Workqueue::builder("sem-delayed-flush")
        .unbound()
        .build()
        .unwrap();
    let n = counter();
    let dw = delayed_counting(&n);
    assert!(wq.queue_delayed(&dw, Duration::from_secs(60)));
    let dw2 = dw.clone();
    let (done, h) = spawn_flagged(move || dw2.flush());
    wait_until("flush of a 60 s timer to run it now", || {
        done.load(Ordering::SeqCst)
    });
    // (flush's return value may be false here, as in the kernel: the fired
    // item can finish before flush_work looks.)
    h.join().unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 1);
    assert!(!dw.is_pending());
    assert!(!dw.flush());
}

fn timer_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "cmwq-timer")
        .count()
}

#[test]
fn one_timer_thread_for_many_delayed_works() {
    let wq = Workqueue::builder("sem-timers").unbound().build().unwrap();
    let n = counter();
    let dws: Vec<DelayedWork> = (0..100).map(|_| delayed_counting(&n)).collect();
    for dw in &dws {
        assert!(wq.queue_delayed(dw, Duration::from_secs(60)));
    }
    assert_eq!(timer_threads(), 1, "one timer thread for the process");
    for dw in &dws {
        assert!(dw.cancel());
    }
    assert_eq!(timer_threads(), 1);
    assert_eq!(n.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------- workqueues

/// State of a thread in /proc: 'R', 'S', 'D'...
fn thread_state(tid: i32) -> char {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    s.rsplit(')')
        .next()
        .and_then(|r| r.trim().chars().next())
        .unwrap_or('?')
}

#[test]
fn wq_flush_waits_only_for_earlier_work() {
    // A private cpumask-less unbound queue; its pool may be shared, the colours are not.
    let wq = Workqueue::builder("sem-wqflush").unbound().build().unwrap();
    let (ga, gb) = (Gate::new(), Gate::new());
    let (sa, da, sb, db) = (counter(), counter(), counter(), counter());
    let a = gated_work(&ga, &sa, &da);
    let b = gated_work(&gb, &sb, &db);
    assert!(wq.queue(&a));
    wait_until("A start", || sa.load(Ordering::SeqCst) == 1);
    let tid = Arc::new(AtomicUsize::new(0));
    let (wq2, tid2) = (wq.clone(), tid.clone());
    let (flushed, h) = spawn_flagged(move || {
        tid2.store(common::gettid() as usize, Ordering::SeqCst);
        wq2.flush();
    });
    wait_until("flusher tid", || tid.load(Ordering::SeqCst) != 0);
    // The flusher is asleep (waiting for A) once its state reads 'S' for a while.
    let t = tid.load(Ordering::SeqCst) as i32;
    let mut sleeping = 0;
    wait_until("flusher to sleep", || {
        if thread_state(t) == 'S' {
            sleeping += 1;
        } else {
            sleeping = 0;
        }
        sleeping >= 20
    });
    assert!(
        !flushed.load(Ordering::SeqCst),
        "flush returned while A ran"
    );
    // B is queued after flush started: flush must not wait for it.
    assert!(wq.queue(&b));
    wait_until("B start", || sb.load(Ordering::SeqCst) == 1);
    ga.open();
    wait_until(
        "flush to return while B (queued after it) still runs",
        || flushed.load(Ordering::SeqCst),
    );
    h.join().unwrap();
    assert_eq!(da.load(Ordering::SeqCst), 1, "flush waited for A");
    assert_eq!(db.load(Ordering::SeqCst), 0, "B is still blocked");
    gb.open();
    wq.flush();
    assert_eq!(db.load(Ordering::SeqCst), 1);
}

#[test]
fn drain_waits_for_chain_and_rejects_outsiders() {
    const N: usize = 50;
    let wq = Workqueue::builder("sem-drain").unbound().build().unwrap();
    let gate = Gate::new();
    let n = counter();
    let slot: Arc<OnceLock<(Workqueue, Work)>> = Arc::new(OnceLock::new());
    let (n2, s2, g2) = (n.clone(), slot.clone(), gate.clone());
    let chain = Work::new(move || {
        let k = n2.fetch_add(1, Ordering::SeqCst) + 1;
        if k == 10 {
            g2.wait();
        }
        if k < N {
            let (wq, w) = s2.get().unwrap();
            assert!(
                wq.queue(w),
                "chained queueing from its own work is allowed while draining"
            );
        }
    });
    slot.set((wq.clone(), chain.clone())).unwrap();
    assert!(wq.queue(&chain));
    wait_until("chain to reach the gate", || n.load(Ordering::SeqCst) == 10);
    let wq2 = wq.clone();
    let (drained, h) = spawn_flagged(move || wq2.drain());
    let m = counter();
    let outsider = counting_work(&m);
    let rejected0 = wq.stats().rejected;
    // Until drain begins, the outsider is accepted; once it began, refused.
    wait_until("drain to refuse an outside queue", || {
        if wq.queue(&outsider) {
            outsider.flush();
            false
        } else {
            true
        }
    });
    assert!(
        !outsider.is_pending(),
        "a refused queue leaves the work idle"
    );
    assert_eq!(wq.stats().rejected, rejected0 + 1);
    assert!(!drained.load(Ordering::SeqCst));
    gate.open();
    wait_until("drain", || drained.load(Ordering::SeqCst));
    h.join().unwrap();
    assert_eq!(
        n.load(Ordering::SeqCst),
        N,
        "drain returned before the chain ended"
    );
    // After drain, outsiders are accepted again.
    assert!(wq.queue(&outsider));
    outsider.flush();
}

#[test]
fn ordered_runs_one_at_a_time_in_order() {
    for _ in 0..3 {
        ordered_round();
    }
}

fn ordered_round() {
    const PER: usize = 500;
    let wq = ordered("sem-ordered");
    let log: Arc<Mutex<Vec<(usize, usize)>>> = Arc::new(Mutex::new(Vec::with_capacity(2 * PER)));
    let running = counter();
    let max = counter();
    let works: Vec<Vec<Work>> = (0..2)
        .map(|t| {
            (0..PER)
                .map(|i| {
                    let (log, running, max) = (log.clone(), running.clone(), max.clone());
                    Work::new(move || {
                        let c = running.fetch_add(1, Ordering::SeqCst) + 1;
                        max.fetch_max(c, Ordering::SeqCst);
                        log.lock().unwrap().push((t, i));
                        std::hint::spin_loop();
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                })
                .collect()
        })
        .collect();
    let works = Arc::new(works);
    let hs: Vec<_> = (0..2)
        .map(|t| {
            let (wq, works) = (wq.clone(), works.clone());
            thread::spawn(move || {
                for (i, w) in works[t].iter().enumerate() {
                    assert!(wq.queue(w));
                    if i % 4 == 0 {
                        thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    wq.flush();
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 2 * PER);
    assert_eq!(
        max.load(Ordering::SeqCst),
        1,
        "ordered queue ran two items at once"
    );
    for t in 0..2 {
        let seq: Vec<usize> = log.iter().filter(|e| e.0 == t).map(|e| e.1).collect();
        let first_bad = seq.windows(2).position(|w| w[0] > w[1]);
        assert!(
            first_bad.is_none(),
            "thread {t}: items ran out of queueing order at position {:?}: {:?}",
            first_bad,
            &seq[first_bad.unwrap().saturating_sub(3)..(first_bad.unwrap() + 4).min(seq.len())]
        );
    }
}

/// Queues `k` gated works with `queue`, checks that exactly `limit` run at once
/// and that the waiting ones start in queueing order.
fn check_max_active(wq: &Workqueue, limit: usize, k: usize, queue: impl Fn(&Work) -> bool) {
    let running = counter();
    let max = counter();
    let order = Arc::new(Mutex::new(Vec::new()));
    let gates: Vec<Arc<Gate>> = (0..k).map(|_| Gate::new()).collect();
    let works: Vec<Work> = (0..k)
        .map(|i| {
            let (running, max, order, g) = (
                running.clone(),
                max.clone(),
                order.clone(),
                gates[i].clone(),
            );
            Work::new(move || {
                let c = running.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(c, Ordering::SeqCst);
                order.lock().unwrap().push(i);
                g.wait();
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    for w in &works {
        assert!(queue(w));
    }
    wait_until("limit items running", || {
        running.load(Ordering::SeqCst) == limit
    });
    thread::sleep(Duration::from_millis(30)); // a window for a broken limit to show
    assert_eq!(
        max.load(Ordering::SeqCst),
        limit,
        "{}: max_active {limit} exceeded",
        wq.name()
    );
    let mut first = order.lock().unwrap().clone();
    first.sort_unstable();
    assert_eq!(
        first,
        (0..limit).collect::<Vec<_>>(),
        "the first {limit} queued start first"
    );
    // Release one at a time: the next waiting item starts, in order.
    for (i, gate) in gates.iter().enumerate() {
        gate.open();
        let expect = (i + 1 + limit).min(k);
        wait_until("next item start", || order.lock().unwrap().len() == expect);
    }
    wq.flush();
    assert_eq!(max.load(Ordering::SeqCst), limit);
    assert_eq!(
        order.lock().unwrap()[limit..],
        (limit..k).collect::<Vec<_>>(),
        "waiting items start in queueing order"
    );
}

#[test]
fn max_active_bound_per_cpu() {
    let wq = Workqueue::builder("sem-maxact-b")
        .max_active(2)
        .build()
        .unwrap();
    check_max_active(&wq, 2, 6, |w| wq.queue_on(1, w).unwrap());
}

#[test]
fn max_active_unbound() {
    let wq = Workqueue::builder("sem-maxact-u")
        .unbound()
        .max_active(3)
        .build()
        .unwrap();
    check_max_active(&wq, 3, 8, |w| wq.queue(w));
}

/// A busy unbound pwq gives back what its finished items free past two
/// batches of its node's budget (a batch is `max_active / 16` units), not
/// only when it goes idle: with one item held running, the units of 200
/// items that ran and ended behind it go back to the node. (The item end
/// answers its common case inline, `dec_in_flight_quiet`; that path must
/// hand over to the full accounting when the pwq keeps too many.)
#[test]
fn a_busy_unbound_pwq_gives_back_units_past_two_batches() {
    const MAX: usize = 256;
    const QUICK: usize = 200;
    let wq = Workqueue::builder("sem-credits")
        .unbound()
        .affinity_scope(Scope::System)
        .max_active(MAX)
        .build()
        .unwrap();
    let batch_most = wq.node_max_active().into_iter().max().unwrap() / 16;
    assert!(
        batch_most >= 2 && 1 + 2 * batch_most < QUICK,
        "{batch_most}"
    );
    let gate = Gate::new();
    let (started, done) = (counter(), counter());
    let held = gated_work(&gate, &started, &done);
    assert!(wq.queue(&held));
    wait_until("the held item to start", || {
        started.load(Ordering::SeqCst) == 1
    });
    let ran = counter();
    let quick: Vec<Work> = (0..QUICK)
        .map(|_| {
            let ran = ran.clone();
            Work::new(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for w in &quick {
        assert!(wq.queue(w));
    }
    wait_until("the quick items", || ran.load(Ordering::SeqCst) == QUICK);
    // Their ends are accounted under the pool lock after the callback:
    // wait for every cycle to end before reading the node's units.
    for w in &quick {
        w.flush();
    }
    let units: usize = wq.node_nr_active().into_iter().sum();
    assert!(
        units <= 1 + 2 * batch_most,
        "the busy pwq kept {units} units of the node's budget after {QUICK} items \
         ended behind its one running item (at most 1 + 2 x {batch_most} expected)"
    );
    gate.open();
    wq.flush();
    assert_eq!(done.load(Ordering::SeqCst), 1);
    assert_eq!(wq.node_nr_active().into_iter().sum::<usize>(), 0);
}

/// A pwq's last item ends on the inline path (`dec_in_flight_quiet`) when
/// nothing waits on its end, and the units the pwq cached past a batch
/// still go back to the node: an idle pwq keeps at most a batch. Two items
/// held beside a first make the pwq take a second batch from the node, and
/// their ends cache units while the first still runs, so when the first
/// ends the pwq holds more than a batch (`max_active` 32: batches of 2;
/// where idle pwqs may keep nothing, more than 8 CPU ids, it keeps none).
#[test]
fn an_idle_pwq_keeps_at_most_a_batch_of_its_units() {
    const MAX: usize = 32;
    let wq = Workqueue::builder("sem-keep")
        .unbound()
        .affinity_scope(Scope::System)
        .max_active(MAX)
        .build()
        .unwrap();
    let batch = wq.node_max_active().into_iter().max().unwrap() / 16;
    assert!(batch >= 2, "{batch}");
    let (first, rest) = (Gate::new(), Gate::new());
    let (started, done) = (counter(), counter());
    let held = gated_work(&first, &started, &done);
    let others: Vec<Work> = (0..2).map(|_| gated_work(&rest, &started, &done)).collect();
    // All on CPU 0's pwq (a pod's CPUs have a pwq each): the one that keeps.
    assert!(wq.queue_on(0, &held).unwrap());
    for w in &others {
        assert!(wq.queue_on(0, w).unwrap());
    }
    wait_until("the three items to start", || {
        started.load(Ordering::SeqCst) == 3
    });
    rest.open();
    // Their ends are accounted under the pool lock after the callback.
    for w in &others {
        w.flush();
    }
    assert_eq!(done.load(Ordering::SeqCst), 2);
    first.open();
    // No flush while it ends (a flusher sends the end the full way).
    wait_until("the first item to end", || done.load(Ordering::SeqCst) == 3);
    wait_until("its end to be accounted", || {
        wq.node_nr_active().into_iter().sum::<usize>() == 0
    });
    let kept: usize = wq.debug_node_units().into_iter().map(|(_, k)| k).sum();
    assert!(
        kept <= batch,
        "the idle pwq kept {kept} units of the node's budget (a batch is {batch})"
    );
    wq.flush();
}

#[test]
fn set_max_active_raises_live() {
    for wq in [
        Workqueue::builder("sem-setmax-b")
            .max_active(1)
            .build()
            .unwrap(),
        Workqueue::builder("sem-setmax-u")
            .unbound()
            .max_active(1)
            .build()
            .unwrap(),
    ] {
        let gate = Gate::new();
        let (s, d) = (counter(), counter());
        let works: Vec<Work> = (0..4).map(|_| gated_work(&gate, &s, &d)).collect();
        for w in &works {
            assert!(wq.queue_on(0, w).unwrap());
        }
        wait_until("one running", || s.load(Ordering::SeqCst) == 1);
        thread::sleep(Duration::from_millis(20));
        assert_eq!(
            s.load(Ordering::SeqCst),
            1,
            "{}: max_active 1 exceeded",
            wq.name()
        );
        wq.set_max_active(3).unwrap();
        assert_eq!(wq.max_active(), 3);
        wait_until("three running after set_max_active(3)", || {
            s.load(Ordering::SeqCst) == 3
        });
        thread::sleep(Duration::from_millis(20));
        assert_eq!(s.load(Ordering::SeqCst), 3);
        gate.open();
        wq.flush();
        assert_eq!(d.load(Ordering::SeqCst), 4);
    }
}

#[test]
fn freeze_and_thaw() {
    for wq in [
        Workqueue::builder("sem-freeze-b")
            .freezable()
            .max_active(1) // activation order is run order
            .build()
            .unwrap(),
        Workqueue::builder("sem-freeze-u")
            .freezable()
            .unbound()
            .max_active(1) // activation order is run order
            .build()
            .unwrap(),
    ] {
        let order = Arc::new(Mutex::new(Vec::new()));
        let works: Vec<Work> = (0..5)
            .map(|i| {
                let o = order.clone();
                Work::new(move || o.lock().unwrap().push(i))
            })
            .collect();
        wq.freeze().unwrap();
        for w in &works {
            assert!(wq.queue_on(0, w).unwrap());
        }
        thread::sleep(Duration::from_millis(40));
        assert!(
            order.lock().unwrap().is_empty(),
            "{}: work ran while frozen",
            wq.name()
        );
        assert!(works.iter().all(|w| w.is_pending()));
        wq.thaw().unwrap();
        wq.flush();
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4], "{}", wq.name());
    }
    let nf = Workqueue::builder("sem-nofreeze").build().unwrap();
    assert!(matches!(nf.freeze(), Err(Error::NotFreezable { .. })));
    assert!(matches!(nf.thaw(), Err(Error::NotFreezable { .. })));
}

#[test]
fn panic_is_caught_and_reported() {
    static SEEN: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    cmwq::set_panic_hook(|wq, msg| SEEN.lock().unwrap().push((wq.to_string(), msg.to_string())));
    for wq in [
        Workqueue::builder("sem-panic-b").build().unwrap(),
        Workqueue::builder("sem-panic-u")
            .unbound()
            .max_active(1)
            .build()
            .unwrap(),
    ] {
        let n = counter();
        let bad = Work::new(|| panic!("boom from a work item"));
        let good = counting_work(&n);
        assert!(wq.queue_on(0, &bad).unwrap());
        assert!(wq.queue_on(0, &good).unwrap());
        wq.flush();
        assert_eq!(n.load(Ordering::SeqCst), 1, "other work runs after a panic");
        assert_eq!(wq.stats().panics, 1);
        // The same workers keep serving.
        assert!(wq.queue_on(0, &good).unwrap());
        assert!(wq.queue_on(0, &bad).unwrap());
        wq.flush();
        assert_eq!(n.load(Ordering::SeqCst), 2);
        assert_eq!(wq.stats().panics, 2);
        let seen = SEEN.lock().unwrap();
        let mine: Vec<_> = seen.iter().filter(|(w, _)| w == wq.name()).collect();
        assert_eq!(mine.len(), 2, "hook called once per panic with the wq name");
        assert!(
            mine[0].1.contains("boom"),
            "hook gets the message: {:?}",
            mine[0]
        );
    }
}

#[test]
fn destroy_runs_everything_queued() {
    let n = counter();
    let dn = counter();
    let mut keep = Vec::new();
    let mut dkeep = Vec::new();
    {
        let wq = Workqueue::builder("sem-destroy")
            .unbound()
            .max_active(1)
            .build()
            .unwrap();
        for _ in 0..20 {
            let n2 = n.clone();
            let w = Work::new(move || {
                cmwq::blocking(|| thread::sleep(Duration::from_micros(300)));
                n2.fetch_add(1, Ordering::SeqCst);
            });
            assert!(wq.queue(&w));
            keep.push(w);
        }
        for _ in 0..5 {
            let dw = delayed_counting(&dn);
            assert!(wq.queue_delayed(&dw, Duration::from_secs(60)));
            dkeep.push(dw);
        }
        let clone = wq.clone();
        drop(wq);
        // not the last handle: nothing forced
        assert!(dkeep.iter().all(|d| d.is_pending()));
        drop(clone);
    }
    assert_eq!(n.load(Ordering::SeqCst), 20, "destroy dropped queued work");
    assert_eq!(
        dn.load(Ordering::SeqCst),
        5,
        "destroy dropped armed delayed work"
    );
    assert!(keep.iter().all(|w| !w.is_pending()));
    // Bound queue too.
    let m = counter();
    {
        let wq = Workqueue::builder("sem-destroy-b")
            .max_active(1)
            .build()
            .unwrap();
        for i in 0..10 {
            assert!(wq.queue_on(i % 2, &counting_work(&m)).unwrap());
        }
    }
    assert_eq!(m.load(Ordering::SeqCst), 10);
}

#[test]
fn system_queues_run_work() {
    for wq in [
        cmwq::system(),
        cmwq::system_unbound(),
        cmwq::system_highpri(),
        cmwq::system_long(),
    ] {
        let n = counter();
        let w = counting_work(&n);
        assert!(wq.queue(&w));
        w.flush();
        assert_eq!(n.load(Ordering::SeqCst), 1, "{}", wq.name());
    }
    assert!(std::ptr::eq(cmwq::system(), cmwq::system()), "created once");
    assert!(
        cmwq::system_unbound()
            .flags()
            .contains(cmwq::WqFlags::UNBOUND)
    );
    assert!(
        cmwq::system_highpri()
            .flags()
            .contains(cmwq::WqFlags::HIGHPRI)
    );
}

#[test]
fn unbound_pools_shared_by_attrs() {
    let mk = |name: &str, s: Scope| {
        Workqueue::builder(name)
            .unbound()
            .affinity_scope(s)
            .build()
            .unwrap()
    };
    let a = mk("sem-share-a", Scope::Cpu);
    let b = mk("sem-share-b", Scope::Cpu);
    let c = mk("sem-share-c", Scope::System);
    assert_eq!(a.cpu_pools(), b.cpu_pools(), "same attrs share pools");
    assert_ne!(
        a.cpu_pools().0,
        c.cpu_pools().0,
        "different scope, different pools"
    );
    let (pa, _) = a.cpu_pools();
    assert_ne!(pa[0], pa[1], "scope cpu: one pool per CPU");
    // Scope system: one pod of both CPUs, served by a per-CPU pool per CPU
    // (README, "Where user space differs"); each pool names the whole pod.
    let (pc, _) = c.cpu_pools();
    let snap = cmwq::snapshot();
    let pool = |id: Option<u32>| snap.pools.iter().find(|p| Some(p.id) == id).unwrap();
    assert_eq!(pool(pc[0]).pod_cpus, pool(pc[1]).pod_cpus, "one pod");
    assert_eq!(pool(pc[0]).pod_cpus.len(), 2, "of both CPUs");
    assert_eq!(pool(pc[0]).lane_cpu, Some(0));
    assert_eq!(pool(pc[1]).lane_cpu, Some(1));
    // Work queued to both runs.
    let n = counter();
    for wq in [&a, &b, &c] {
        assert!(wq.queue(&counting_work(&n)));
        wq.flush();
    }
    assert_eq!(n.load(Ordering::SeqCst), 3);
}

#[test]
fn pods_from_synthetic_topology() {
    let t = Arc::new(Topology::from_synthetic("pack:1 l3:2 core:4 pu:1").unwrap());
    let mk = |name: &str, s: Scope| {
        Workqueue::builder(name)
            .unbound()
            .topology(t.clone())
            .affinity_scope(s)
            .build()
            .unwrap()
    };
    // The synthetic CPUs fold onto the real ones (CPU i on real CPU i mod n);
    // a pod of several real CPUs has a per-CPU pool (and pwq) per real CPU.
    let real = cmwq::topology::sched_affinity().unwrap().len();
    let lanes = |pod: usize| pod.min(real);
    let cache = mk("sem-pods-cache", Scope::Cache);
    assert_eq!(cache.nr_pwqs(), 2 * lanes(4) + 1, "2 LLC pods + dfl");
    let cpu = mk("sem-pods-cpu", Scope::Cpu);
    assert_eq!(cpu.nr_pwqs(), 9, "8 CPU pods + dfl");
    let system = mk("sem-pods-system", Scope::System);
    assert_eq!(system.nr_pwqs(), lanes(8) + 1, "1 pod + dfl");
    // All 8 synthetic CPUs route somewhere and run work.
    let n = counter();
    for c in 0..8 {
        let w = counting_work(&n);
        assert!(cpu.queue_on(c, &w).unwrap());
        assert!(cache.queue_on(c, &counting_work(&n)).unwrap());
    }
    cpu.flush();
    cache.flush();
    assert_eq!(n.load(Ordering::SeqCst), 16);
    assert!(matches!(
        cpu.queue_on(8, &counting_work(&n)),
        Err(Error::NoSuchCpu {
            cpu: 8,
            nr_cpu_ids: 8
        })
    ));
}

/// A waits on a plain condvar until B has run; both go to CPU 0's one-CPU pod
/// (scope cpu). The kernel never concurrency-manages unbound pools, so there
/// B always runs; cmwq's default cap of one running worker per pod CPU needs
/// A to say it blocks (`annotated`), or the `Unmanaged` option.
fn check_block(wq: &Workqueue, annotated: bool) -> bool {
    let b_ran = Arc::new((Mutex::new(false), Condvar::new()));
    let a_saw_b = Arc::new(AtomicBool::new(false));
    let (br, saw) = (b_ran.clone(), a_saw_b.clone());
    let a = Work::new(move || {
        let wait = || {
            let g = br.0.lock().unwrap();
            let (g, _) =
                br.1.wait_timeout_while(g, Duration::from_secs(3), |ran| !*ran)
                    .unwrap();
            *g
        };
        let seen = if annotated {
            cmwq::blocking(wait)
        } else {
            wait()
        };
        saw.store(seen, Ordering::SeqCst);
    });
    let br = b_ran.clone();
    let b = Work::new(move || {
        *br.0.lock().unwrap() = true;
        br.1.notify_all();
    });
    assert!(wq.queue_on(0, &a).unwrap());
    assert!(wq.queue_on(0, &b).unwrap());
    a.flush();
    b.flush();
    a_saw_b.load(Ordering::SeqCst)
}

/// The documented default (`UnboundConcurrency::PerCpu`): an item that says it
/// blocks lets the next item of its pod run.
#[test]
fn unbound_pool_default_needs_annotation() {
    let wq = Workqueue::builder("sem-unbound-managed")
        .unbound()
        .affinity_scope(Scope::Cpu)
        .build()
        .unwrap();
    assert!(
        check_block(&wq, true),
        "an unbound item inside cmwq::blocking starved the next item of its pod"
    );
}

#[test]
fn unbound_pool_unmanaged_option() {
    let wq = Workqueue::builder("sem-unbound-unmanaged-opt")
        .unbound()
        .affinity_scope(Scope::Cpu)
        .unbound_concurrency(cmwq::UnboundConcurrency::Unmanaged)
        .build()
        .unwrap();
    assert!(check_block(&wq, false));
}

/// A snapshot of an unmanaged pod pool (no cap, one lane per CPU of its
/// pod) says it has no cap. Its "cap times lanes" was computed anyway and
/// overflowed: a panic in debug builds, for any `snapshot()` or `cmwq dump`
/// of a process with such a pool. Needs a pod of two CPUs or more to fail.
#[test]
fn a_snapshot_of_an_unmanaged_pod_pool_reports_no_cap() {
    let wq = Workqueue::builder("sem-unmanaged-snap")
        .unbound()
        .affinity_scope(Scope::System)
        .unbound_concurrency(cmwq::UnboundConcurrency::Unmanaged)
        .build()
        .unwrap();
    let w = Work::new(|| ());
    assert!(wq.queue(&w));
    w.flush();
    let snap = cmwq::snapshot();
    let mine = snap
        .workqueues
        .iter()
        .find(|q| q.name == "sem-unmanaged-snap")
        .expect("the queue is in the snapshot");
    let pools: Vec<_> = snap
        .pools
        .iter()
        .filter(|p| mine.pwqs.iter().any(|q| q.pool == p.id))
        .collect();
    assert!(!pools.is_empty());
    for p in pools {
        assert!(!p.managed);
        assert_eq!(p.cap, None, "pool {}", p.id);
    }
}

/// More concurrent flushers than flush colours (16): each flush still waits for
/// the work its thread queued before it, and none deadlocks.
#[test]
fn many_concurrent_flushers() {
    let wq = Workqueue::builder("sem-flushers")
        .unbound()
        .build()
        .unwrap();
    let hs: Vec<_> = (0..32)
        .map(|t| {
            let wq = wq.clone();
            thread::spawn(move || {
                let done = Arc::new(AtomicUsize::new(0));
                let d2 = done.clone();
                // Items of varied length keep old colours in flight, so flushers
                // must wait for a colour slot ("make room").
                let us = 200 + 300 * (t as u64 % 7);
                let w = Work::new(move || {
                    cmwq::blocking(|| thread::sleep(Duration::from_micros(us)));
                    d2.fetch_add(1, Ordering::SeqCst);
                });
                for i in 1..=10 {
                    assert!(wq.queue(&w));
                    wq.flush();
                    assert_eq!(
                        done.load(Ordering::SeqCst),
                        i,
                        "flush returned before work queued earlier finished"
                    );
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

/// Unbound max_active is cut per NUMA node with the kernel's floor:
/// clamp(DIV_ROUND_UP(max_active * node_cpus, total), min(max_active, 8), max_active).
#[test]
fn unbound_node_max_active_floor() {
    let t = Arc::new(Topology::from_synthetic("pack:1 numa:2 l3:1 core:4 pu:1").unwrap());
    assert_eq!(t.nr_nodes(), 2);
    for (max, want) in [(32, 16), (10, 8), (4, 4), (1, 1), (2048, 1024)] {
        let wq = Workqueue::builder("sem-nodemax")
            .unbound()
            .topology(t.clone())
            .max_active(max)
            .build()
            .unwrap();
        assert_eq!(wq.node_max_active(), vec![want, want], "max_active {max}");
        wq.set_max_active(max.max(20)).unwrap();
        let m = max.max(20);
        let exp = (m * 4).div_ceil(8).clamp(m.min(8), m);
        assert_eq!(
            wq.node_max_active(),
            vec![exp, exp],
            "after set_max_active({m})"
        );
    }
}

/// A work that flushes another work (or another queue) queued behind it on the
/// same CPU sleeps in the flush; as in the kernel (the scheduler's sleep hook),
/// the CPU's pool must start another worker instead of deadlocking.
#[test]
fn flush_inside_a_work_lets_the_pool_progress() {
    let wq1 = Workqueue::builder("sem-flush-in-1").build().unwrap();
    let wq2 = Workqueue::builder("sem-flush-in-2").build().unwrap();
    // If the pool deadlocks, the test must fail, not hang in the queues' drop.
    std::mem::forget((wq1.clone(), wq2.clone()));
    let n = counter();
    let y = counting_work(&n);
    let z = counting_work(&n);
    let (y2, wq2b, n2) = (y.clone(), wq2.clone(), n.clone());
    let go = Arc::new(AtomicBool::new(false));
    let go2 = go.clone();
    let saw = Arc::new(AtomicUsize::new(usize::MAX));
    let saw2 = saw.clone();
    let x = Work::new(move || {
        // Until y and z are queued, x keeps CPU 0's pool busy (a counted,
        // non-blocking wait: nothing else starts on CPU 0 meanwhile).
        let t = Instant::now();
        while !go2.load(Ordering::SeqCst) && t.elapsed() < HANG {
            thread::yield_now();
        }
        y2.flush(); // Work::flush of an item queued behind us on CPU 0
        wq2b.flush(); // Workqueue::flush of another queue with work on CPU 0
        saw2.store(n2.load(Ordering::SeqCst), Ordering::SeqCst);
    });
    assert!(wq1.queue_on(0, &x).unwrap());
    assert!(wq1.queue_on(0, &y).unwrap());
    assert!(wq2.queue_on(0, &z).unwrap());
    go.store(true, Ordering::SeqCst);
    wait_until("x, which flushes y and wq2 from CPU 0's pool", || {
        saw.load(Ordering::SeqCst) != usize::MAX
    });
    assert_eq!(
        saw.load(Ordering::SeqCst),
        2,
        "y and z ran before x's flushes returned"
    );
    x.flush();
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

/// After `flush` returns, the item is done with: `queue_on` another CPU runs
/// it there, never on the worker that ran it last (which used to list it
/// again in its busy table while it dropped its reference, so the queue
/// followed it there as if it still ran). Alternates the CPUs many times.
#[test]
fn queue_on_after_flush_goes_where_it_is_asked() {
    let cpus = cmwq::topology::sched_affinity().unwrap();
    if cpus.len() < 2 {
        eprintln!("skipped: one CPU");
        return;
    }
    let wq = Workqueue::builder("after_flush_on").build().unwrap();
    let ran_on = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(usize::MAX));
    let r = ran_on.clone();
    let w = Work::new(move || {
        let c = common::current_cpu();
        r.store(c, std::sync::atomic::Ordering::SeqCst);
    });
    let mut wrong = Vec::new();
    for i in 0..4000 {
        let cpu = cpus[i % 2];
        assert_eq!(wq.queue_on(cpu, &w), Ok(true));
        w.flush();
        let on = ran_on.load(std::sync::atomic::Ordering::SeqCst);
        if on != cpu {
            wrong.push((i, cpu, on));
        }
    }
    assert!(
        wrong.is_empty(),
        "ran elsewhere than asked: {:?}",
        &wrong[..wrong.len().min(10)]
    );
}
