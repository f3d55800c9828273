//! Nothing a work item does to the reporting path freezes a pool (issue 15):
//! a panic hook that panics, a closed stderr, a worker thread that dies
//! outside every `catch_unwind`; and a self-wait (an item flushing or
//! cancelling itself or its own queue, from the item or from the panic
//! handler that reports it) panics with the call and the queue instead of
//! hanging. Nor does a finished item's destructor: what a `Work`'s closure
//! captured is dropped on the worker when the worker holds the last handle,
//! and it may call back into cmwq (queue work, announce blocking, drop the
//! last handle of a workqueue) or panic.
//!
//! The panic hook is process-wide, so the tests here run one at a time. A
//! broken engine would hang rather than fail, so every wait goes through
//! [`within`], which fails the test after a generous minute: a deadlock
//! detector, not a timing assert.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cmwq::{Work, Workqueue};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on a thread; fails the test if it has not returned in a minute.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}: still waiting after a minute (hung)"))
}

/// Messages given to the panic hook.
fn captured() -> &'static Mutex<Vec<(String, String)>> {
    static LOG: OnceLock<Mutex<Vec<(String, String)>>> = OnceLock::new();
    LOG.get_or_init(|| Mutex::new(Vec::new()))
}

fn capture_panics() {
    captured().lock().unwrap().clear();
    cmwq::set_panic_hook(|wq, msg| {
        captured()
            .lock()
            .unwrap()
            .push((wq.to_string(), msg.to_string()))
    });
}

fn counting() -> (Arc<AtomicUsize>, Work) {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    (
        n,
        Work::new(move || {
            n2.fetch_add(1, Ordering::SeqCst);
        }),
    )
}

#[test]
fn a_panicking_panic_hook_does_not_kill_the_worker() {
    let _s = serial();
    cmwq::set_panic_hook(|_, _| panic!("the hook itself panics"));
    let failed_before = cmwq::panic_reports_failed();
    within("hook panics", || {
        // Pinned, so both items go to the same per-CPU pool of system().
        common::set_affinity(&[common::current_cpu()]).unwrap();
        let bad = Work::new(|| panic!("item panics"));
        assert!(cmwq::system().queue(&bad));
        bad.flush();
        let (n, good) = counting();
        assert!(cmwq::system().queue(&good));
        good.flush();
        assert_eq!(n.load(Ordering::SeqCst), 1, "the pool runs the next item");
    });
    assert!(cmwq::panic_reports_failed() > failed_before);
    capture_panics();
}

/// Child half of the closed-stderr test: does nothing unless the parent set
/// `CMWQ_TEST_CLOSED_STDERR` (it then runs with a closed stderr pipe).
#[test]
fn closed_stderr_child() {
    if std::env::var_os("CMWQ_TEST_CLOSED_STDERR").is_none() {
        return;
    }
    // The default reporter writes to stderr, whose reader is gone.
    for _ in 0..3 {
        let bad = Work::new(|| panic!("item panics with stderr closed"));
        assert!(cmwq::system().queue(&bad));
        bad.flush();
    }
    let (n, good) = counting();
    assert!(cmwq::system().queue(&good));
    good.flush();
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn a_closed_stderr_does_not_kill_the_worker() {
    let _s = serial();
    let status = within("child with closed stderr", || {
        common::run_child_stderr_closed("closed_stderr_child", "CMWQ_TEST_CLOSED_STDERR")
    });
    let status = status.expect("the child hung: its pool froze");
    assert!(status.success(), "child failed: {status:?}");
}

#[test]
fn a_worker_that_dies_is_replaced_and_its_item_completes() {
    let _s = serial();
    capture_panics();
    let wq = Workqueue::builder("panic_dies")
        .unbound()
        .nice(9)
        .build()
        .unwrap();
    let wq2 = wq.clone();
    within("worker death", move || {
        cmwq::debug_kill_next_worker();
        let (n1, w1) = counting();
        assert!(wq2.queue(&w1));
        // The dead worker's item ends its cycle: flush returns.
        w1.flush();
        assert_eq!(n1.load(Ordering::SeqCst), 1);
        // And the pool still runs work (a replacement worker).
        let (n2, w2) = counting();
        assert!(wq2.queue(&w2));
        w2.flush();
        assert_eq!(n2.load(Ordering::SeqCst), 1);
        wq2.flush();
    });
    let lost: u64 = wq.pool_counts().iter().map(|c| c.workers_lost).sum();
    assert_eq!(lost, 1);
    assert!(
        wq.stats().panics >= 1,
        "the unfinished item counts as panicked"
    );
    within("destroy", move || drop(wq));
}

/// The dead worker's entry leaves the busy table with it: the same `Work`
/// queued again on the same pool (a bound queue's CPU) runs, and so does
/// another, on the replacement, with no second worker lost. (The item start's
/// non-reentrancy look skips its scan while the pool counts no busy-table
/// entry; debug builds check that count on every look, so a death that left
/// it counted kills the next worker that looks.)
#[test]
fn a_dead_workers_item_leaves_the_busy_table() {
    let _s = serial();
    capture_panics();
    let wq = Workqueue::builder("panic_dies_bound")
        .highpri()
        .build()
        .unwrap();
    let wq2 = wq.clone();
    within("worker death on a bound pool", move || {
        cmwq::debug_kill_next_worker();
        let (n1, w1) = counting();
        assert!(wq2.queue_on(0, &w1).unwrap());
        w1.flush();
        assert!(wq2.queue_on(0, &w1).unwrap());
        w1.flush();
        assert_eq!(n1.load(Ordering::SeqCst), 2);
        let (n2, w2) = counting();
        assert!(wq2.queue_on(0, &w2).unwrap());
        w2.flush();
        assert_eq!(n2.load(Ordering::SeqCst), 1);
        wq2.flush();
    });
    let lost: u64 = wq.pool_counts().iter().map(|c| c.workers_lost).sum();
    assert_eq!(lost, 1, "only the worker the test hook killed died");
    within("destroy", move || drop(wq));
}

/// Queues an item that calls `call` on itself or its queue, and returns the
/// message its panic reported.
fn self_wait(name: &str, ordered: bool, call: fn(&Workqueue, &Work)) -> String {
    capture_panics();
    let mut b = Workqueue::builder(name).unbound().nice(10).freezable();
    if ordered {
        b = b.ordered();
    }
    let wq = b.build().unwrap();
    let me: Arc<OnceLock<Work>> = Arc::new(OnceLock::new());
    let (wq2, me2) = (wq.clone(), me.clone());
    let w = Work::new(move || call(&wq2, me2.get().unwrap()));
    me.set(w.clone()).ok().unwrap();
    let wq3 = wq.clone();
    within(name, move || {
        assert!(wq3.queue(&w));
        w.flush();
        wq3.flush();
    });
    let log = captured().lock().unwrap();
    let (q, msg) = log.last().cloned().expect("the item panicked");
    assert_eq!(q, name);
    msg
}

#[test]
fn self_waits_panic_with_the_call_and_the_queue() {
    let _s = serial();
    type Call = fn(&Workqueue, &Work);
    let cases: [(&str, bool, Call, &str); 7] = [
        (
            "sw_flush",
            false,
            |_, w| {
                let _ = w.flush();
            },
            "Work::flush",
        ),
        (
            "sw_cancel",
            false,
            |_, w| {
                let _ = w.cancel_sync();
            },
            "Work::cancel_sync",
        ),
        (
            "sw_disable",
            false,
            |_, w| {
                let _ = w.disable_sync();
            },
            "Work::disable_sync",
        ),
        ("sw_wq_flush", false, |q, _| q.flush(), "Workqueue::flush"),
        ("sw_wq_drain", false, |q, _| q.drain(), "Workqueue::drain"),
        ("sw_ordered", true, |q, _| q.flush(), "Workqueue::flush"),
        (
            "sw_freeze",
            false,
            |q, _| {
                let _ = q.freeze();
            },
            "Workqueue::freeze",
        ),
    ];
    for (name, ordered, call, what) in cases {
        let msg = self_wait(name, ordered, call);
        assert!(
            msg.contains(what) && msg.contains(name),
            "{name}: message {msg:?} names neither {what} nor the queue"
        );
    }
}

#[test]
fn delays_past_what_an_instant_holds_are_cut_not_fatal() {
    let _s = serial();
    let wq = Workqueue::builder("max_delay").build().unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let dw = cmwq::DelayedWork::new(move || {
        n2.fetch_add(1, Ordering::SeqCst);
    });
    assert!(wq.queue_delayed(&dw, Duration::MAX));
    assert!(dw.is_pending(), "armed, not lost");
    assert!(wq.mod_delayed(&dw, Duration::MAX), "was pending");
    assert!(dw.cancel_sync(), "the armed item cancels");
    assert!(!dw.is_pending());
    // The item is usable again.
    assert!(wq.queue_delayed(&dw, Duration::ZERO));
    dw.flush();
    assert_eq!(
        n.load(Ordering::SeqCst),
        1,
        "it ran once, when queued with no delay"
    );
}

#[test]
fn mod_delayed_on_a_draining_queue_returns() {
    let _s = serial();
    let wq = Workqueue::builder("mod_draining")
        .unbound()
        .nice(11)
        .build()
        .unwrap();
    let dw = Arc::new(cmwq::DelayedWork::new(|| {}));
    let gate = Arc::new(std::sync::Barrier::new(2));
    // An item of the queue holds the drain open while an outsider calls
    // mod_delayed: the queue refuses it, and mod_delayed must return.
    let g2 = gate.clone();
    let holder = Work::new(move || {
        cmwq::blocking(|| {
            g2.wait();
            g2.wait();
        })
    });
    assert!(wq.queue(&holder));
    let wq_d = wq.clone();
    let drainer = std::thread::spawn(move || wq_d.drain());
    gate.wait();
    // Let the drain start, then call mod_delayed from outside.
    while wq.stats().rejected == 0 {
        wq.queue(&Work::new(|| {}));
        std::thread::yield_now();
    }
    let (wq3, dw3) = (wq.clone(), dw.clone());
    let was = within("mod_delayed while draining", move || {
        wq3.mod_delayed(&dw3, Duration::from_millis(1))
    });
    assert!(!was);
    assert!(!dw.is_pending(), "refused, not left pending");
    gate.wait();
    drainer.join().unwrap();
}

/// A queue whose panic handler runs `call` on the queue and on the item that
/// panicked, under `catch_unwind`; returns whether `call` panicked (was
/// refused) and that the queue still flushes afterwards.
fn handler_wait(name: &str, call: fn(&Workqueue, &Work)) -> bool {
    type Shared = Arc<Mutex<Option<(Workqueue, Work)>>>;
    let shared: Shared = Arc::new(Mutex::new(None));
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let s2 = shared.clone();
    let wq = Workqueue::builder(name)
        .unbound()
        .panic_handler(move |_| {
            let (q, w) = s2.lock().unwrap().clone().expect("set before queueing");
            let refused =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(&q, &w))).is_err();
            tx.lock().unwrap().send(refused).unwrap();
        })
        .build()
        .unwrap();
    let w = Work::new(|| panic!("handler_wait"));
    *shared.lock().unwrap() = Some((wq.clone(), w.clone()));
    let wq2 = wq.clone();
    let refused = within(name, move || {
        assert!(wq2.queue(&w));
        let refused = rx.recv().unwrap();
        // The item completed: the queue is not stuck behind it.
        w.flush();
        wq2.flush();
        refused
    });
    // Break the cycle through the handler so the queue goes.
    shared.lock().unwrap().take();
    refused
}

#[test]
fn a_panic_handler_may_not_wait_for_its_item_or_its_queue() {
    let _s = serial();
    capture_panics();
    type Call = fn(&Workqueue, &Work);
    let cases: [(&str, Call); 4] = [
        ("ph_flush", |q, _| q.flush()),
        ("ph_drain", |q, _| q.drain()),
        ("ph_work_flush", |_, w| {
            let _ = w.flush();
        }),
        ("ph_cancel_sync", |_, w| {
            let _ = w.cancel_sync();
        }),
    ];
    for (name, call) in cases {
        assert!(handler_wait(name, call), "{name}: the wait was not refused");
    }
    // A wait on another queue is allowed from the handler.
    let other = Workqueue::builder("ph_other").unbound().build().unwrap();
    let (o2, n) = (other.clone(), Arc::new(AtomicUsize::new(0)));
    let n2 = n.clone();
    let before = n.load(Ordering::SeqCst);
    let w = Work::new(move || {
        n2.fetch_add(1, Ordering::SeqCst);
    });
    let probe = Workqueue::builder("ph_probe")
        .unbound()
        .panic_handler(move |_| {
            o2.queue(&w);
            o2.flush();
        })
        .build()
        .unwrap();
    let p = Work::new(|| panic!("probe"));
    within("ph_probe", move || {
        assert!(probe.queue(&p));
        p.flush();
    });
    assert_eq!(
        n.load(Ordering::SeqCst),
        before + 1,
        "flushed from the handler"
    );
}

#[test]
fn a_panic_handler_may_drop_the_last_handle_of_its_queue() {
    let _s = serial();
    capture_panics();
    let slot: Arc<Mutex<Option<Workqueue>>> = Arc::new(Mutex::new(None));
    let s2 = slot.clone();
    let wq = Workqueue::builder("ph_last_handle")
        .unbound()
        .panic_handler(move |_| drop(s2.lock().unwrap().take()))
        .build()
        .unwrap();
    let (n, later) = counting();
    let w = Work::new(|| panic!("drop my queue"));
    // Only the slot holds the queue once this scope ends.
    let w2 = w.clone();
    let l2 = later.clone();
    *slot.lock().unwrap() = Some(wq);
    {
        let g = slot.lock().unwrap();
        let q = g.as_ref().unwrap();
        assert!(q.queue(&l2));
        assert!(q.queue(&w2));
    }
    within("the queue's destroy", move || {
        w.flush();
        later.flush();
        while cmwq::workqueue_names()
            .iter()
            .any(|n| n == "ph_last_handle")
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    assert!(
        slot.lock().unwrap().is_none(),
        "the handler took the handle"
    );
    assert_eq!(
        n.load(Ordering::SeqCst),
        1,
        "queued work ran before the destroy"
    );
}

/// Calls `on_drop` when dropped.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// Queues a `Work` that captures `guard` and whose run waits for the go
/// this returns, and drops the caller's handle: once it runs, the worker
/// holds the item's last handle, and the guard is dropped on the worker
/// after the run.
fn run_holding_the_last_handle<G: Send + Sync + 'static>(
    wq: &Workqueue,
    guard: G,
) -> mpsc::Sender<()> {
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let w = Work::new(move || {
        let _ = &guard;
        let _ = go_rx.lock().unwrap().recv();
    });
    assert!(wq.queue(&w));
    drop(w);
    go_tx
}

#[test]
fn a_finished_items_destructor_may_queue_work_and_announce_blocking() {
    let _s = serial();
    for (name, bound) in [("dtor_bound", true), ("dtor_unbound", false)] {
        let b = Workqueue::builder(name);
        let wq = if bound { b } else { b.unbound() }.build().unwrap();
        // A bound queue shares its per-CPU pools with every bound queue.
        let other = Workqueue::builder("dtor_other").build().unwrap();
        let (tx, rx) = mpsc::channel::<&'static str>();
        let (q1, q2, tx1, tx2) = (wq.clone(), other.clone(), tx.clone(), tx);
        let guard = Mutex::new((q1, q2, tx1, tx2));
        let guard = OnDrop(move || {
            let g = guard.lock().unwrap();
            let (q1, q2, tx1, tx2) = (&g.0, &g.1, g.2.clone(), g.3.clone());
            cmwq::blocking(|| {});
            q1.execute(move || tx1.send("same queue").unwrap());
            q2.execute(move || tx2.send("other queue").unwrap());
        });
        let wq2 = wq.clone();
        within(name, move || {
            let go = run_holding_the_last_handle(&wq2, Mutex::new(guard));
            go.send(()).unwrap();
            let mut got = [rx.recv().unwrap(), rx.recv().unwrap()];
            got.sort();
            assert_eq!(got, ["other queue", "same queue"]);
            wq2.flush();
        });
    }
}

#[test]
fn a_finished_items_destructor_may_drop_the_last_handle_of_its_queue() {
    let _s = serial();
    let wq = Workqueue::builder("dtor_last_handle").build().unwrap();
    let (n, other_item) = counting();
    assert!(wq.queue(&other_item));
    let holder = Mutex::new(Some(wq.clone()));
    let wq2 = wq.clone();
    drop(wq);
    within("the queue's destroy", move || {
        let go = run_holding_the_last_handle(&wq2, holder);
        // The test's own handle goes first: the guard's is the last.
        drop(wq2);
        go.send(()).unwrap();
        while cmwq::workqueue_names()
            .iter()
            .any(|n| n == "dtor_last_handle")
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn a_finished_items_destructor_that_panics_is_reported_and_the_worker_lives() {
    let _s = serial();
    capture_panics();
    let wq = Workqueue::builder("dtor_panics").unbound().build().unwrap();
    let wq2 = wq.clone();
    within("dtor_panics", move || {
        let go = run_holding_the_last_handle(&wq2, Mutex::new(OnDrop(|| panic!("dtor boom"))));
        go.send(()).unwrap();
        // The destructor runs after the item, outside the pool's lock: wait
        // for its report.
        while !captured()
            .lock()
            .unwrap()
            .iter()
            .any(|(_, m)| m.contains("dtor boom"))
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let (n, w) = counting();
        assert!(wq2.queue(&w));
        w.flush();
        assert_eq!(n.load(Ordering::SeqCst), 1, "the pool still runs work");
    });
    let lost: u64 = wq.pool_counts().iter().map(|c| c.workers_lost).sum();
    assert_eq!(lost, 0, "no worker died of it");
    let log = captured().lock().unwrap();
    let (q, _) = log.iter().find(|(_, m)| m.contains("dtor boom")).unwrap();
    assert!(
        q.contains("destructor"),
        "reported as a destructor's: {q:?}"
    );
}

#[test]
fn a_finished_items_destructor_may_wait_for_the_next_item_of_its_pool() {
    let _s = serial();
    // Two bound queues share the per-CPU pools: A (on rx) ends, and its
    // destructor flushes ry, whose item B is queued on the same CPU's pool
    // while the destructor runs. The worker is between items then (B waits
    // on its lane), and the destructor's wait counts as the worker
    // blocking, so another worker runs B.
    let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    let rx = Workqueue::builder("dtor_rx").build().unwrap();
    let ry = Workqueue::builder("dtor_ry").build().unwrap();
    let (n, b) = counting();
    let (tx, rx_done) = mpsc::channel::<usize>();
    let (in_dtor_tx, in_dtor_rx) = mpsc::channel::<()>();
    let (queued_tx, queued_rx) = mpsc::channel::<()>();
    let (ry2, n2) = (ry.clone(), n.clone());
    let guard = Mutex::new(OnDrop(move || {
        let _ = in_dtor_tx.send(());
        let _ = queued_rx.recv();
        ry2.flush();
        let _ = tx.send(n2.load(Ordering::SeqCst));
    }));
    let (rx2, ry3) = (rx.clone(), ry.clone());
    let seen = within("a destructor's flush of the pool's next item", move || {
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let go_rx = Mutex::new(go_rx);
        let a = Work::new(move || {
            let _ = &guard;
            let _ = go_rx.lock().unwrap().recv();
        });
        assert_eq!(rx2.queue_on(cpu, &a), Ok(true));
        drop(a);
        go_tx.send(()).unwrap();
        in_dtor_rx.recv().unwrap();
        assert_eq!(ry3.queue_on(cpu, &b), Ok(true));
        queued_tx.send(()).unwrap();
        rx_done.recv().unwrap()
    });
    assert_eq!(seen, 1, "the flush waited for B, and B ran");
}

/// A busy worker keeps the list references of the `Work` items it finished
/// and lets go of them together (the engine's `SPENT_BATCH`, 32): what a
/// dropped `Work`'s closure captured is dropped at most that many of its
/// worker's items later, and all of it once the worker goes idle.
///
/// Item 0 sleeps, so the pool's next worker runs the N orphaned items (each
/// holds a token whose drop is counted) and then the checker in one busy
/// spell; the checker reads the count from inside that spell.
#[test]
fn a_busy_worker_lets_go_of_finished_items_in_batches_and_before_it_idles() {
    let _s = serial();
    /// At most this many references held back (the engine's `SPENT_BATCH`).
    const HELD_AT_MOST: usize = 32;
    const N: usize = 200;
    struct Token(Arc<AtomicUsize>);
    impl Drop for Token {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    let wq = Workqueue::builder("spent_batch").build().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let (at_check, at_idle) = within("a busy spell of orphaned items", {
        let (wq, dropped) = (wq.clone(), dropped.clone());
        move || {
            let (go_tx, go_rx) = mpsc::channel::<()>();
            let go_rx = Mutex::new(go_rx);
            let first = Work::new(move || {
                let _ = go_rx.lock().unwrap().recv();
            });
            assert_eq!(wq.queue_on(cpu, &first), Ok(true));
            for _ in 0..N {
                let token = Token(dropped.clone());
                let w = Work::new(move || {
                    let _ = &token;
                });
                assert_eq!(wq.queue_on(cpu, &w), Ok(true));
                drop(w);
            }
            let (seen_tx, seen_rx) = mpsc::channel::<usize>();
            let seen_tx = Mutex::new(seen_tx);
            let d = dropped.clone();
            let check = Work::new(move || {
                let _ = seen_tx.lock().unwrap().send(d.load(Ordering::SeqCst));
            });
            assert_eq!(wq.queue_on(cpu, &check), Ok(true));
            let at_check = seen_rx.recv().unwrap();
            go_tx.send(()).unwrap();
            wq.flush();
            // Flushed: every item ended; the workers let go of what they
            // held when they went idle, which follows.
            while dropped.load(Ordering::SeqCst) < N {
                std::thread::sleep(Duration::from_millis(1));
            }
            (at_check, dropped.load(Ordering::SeqCst))
        }
    });
    assert!(
        at_check + HELD_AT_MOST >= N,
        "{at_check} of {N} tokens dropped when the checker ran: a worker held more than {HELD_AT_MOST}"
    );
    assert_eq!(
        at_idle, N,
        "every token dropped once, after the workers idled"
    );
}
