//! Nothing a work item does to the reporting path freezes a pool (issue 15):
//! a panic hook that panics, a closed stderr, a worker thread that dies
//! outside every `catch_unwind`; and a self-wait (an item flushing or
//! cancelling itself or its own queue) panics with the call and the queue
//! instead of hanging.
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
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "closed_stderr_child",
            "--test-threads",
            "1",
            "--nocapture",
        ])
        .env("CMWQ_TEST_CLOSED_STDERR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take()); // the log reader died
    let status = within("child with closed stderr", move || {
        let mut waited = 0;
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return Some(st);
            }
            if waited > 55_000 {
                let _ = child.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
            waited += 20;
        }
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

/// Queues an item that calls `call` on itself or its queue, and returns the
/// message its panic reported.
fn self_wait(name: &str, ordered: bool, call: fn(&Workqueue, &Work)) -> String {
    capture_panics();
    let mut b = Workqueue::builder(name).unbound().nice(10);
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
    let cases: [(&str, bool, Call, &str); 6] = [
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
