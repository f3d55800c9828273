//! `Workqueue::spawn`: one-off closures under the kernel's rules, with their
//! results and panics delivered through a `JoinHandle` (issue 16).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use cmwq::{JoinError, JoinHandle, Workqueue};

/// Counts allocations made by a thread while it says so.
struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter is a side effect that allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn unbound(name: &str) -> Workqueue {
    Workqueue::builder(name).unbound().build().unwrap()
}

#[test]
fn results_come_back_through_the_handle() {
    let wq = unbound("sp_results");
    let hs: Vec<JoinHandle<u64>> = (0..100u64).map(|i| wq.spawn(move || i * 2)).collect();
    let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 2 * (0..100).sum::<u64>());
    let s = wq.spawn(|| String::from("owned"));
    assert_eq!(s.join().unwrap(), "owned");
}

#[test]
fn a_panic_is_an_err_with_its_payload_and_the_worker_lives_on() {
    let wq = unbound("sp_panic");
    let h = wq.spawn(|| -> u32 { panic!("job {}", 7) });
    match h.join() {
        Err(e @ JoinError::Panicked(_)) => assert_eq!(e.message(), Some("job 7")),
        other => panic!("expected a panic, got {other:?}"),
    }
    assert_eq!(wq.spawn(|| 1).join().unwrap(), 1);
}

#[test]
fn ordered_queues_run_spawned_jobs_in_order() {
    let wq = Workqueue::builder("sp_ordered")
        .unbound()
        .ordered()
        .build()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let hs: Vec<_> = (0..300)
        .map(|i| {
            let log = log.clone();
            wq.spawn(move || log.lock().unwrap().push(i))
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let log = log.lock().unwrap();
    assert_eq!(*log, (0..300).collect::<Vec<_>>());
}

#[test]
fn max_active_bounds_spawned_jobs() {
    let wq = Workqueue::builder("sp_max")
        .unbound()
        .max_active(2)
        .build()
        .unwrap();
    let (now, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let hs: Vec<_> = (0..40)
        .map(|_| {
            let (now, peak) = (now.clone(), peak.clone());
            wq.spawn(move || {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                cmwq::blocking(|| thread::sleep(Duration::from_micros(200)));
                now.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert!(peak.load(Ordering::SeqCst) <= 2);
}

#[test]
fn flush_drain_and_destroy_wait_for_spawned_jobs() {
    let ran = Arc::new(AtomicUsize::new(0));
    let spawn_some = |wq: &Workqueue, n: usize| -> Vec<JoinHandle<()>> {
        (0..n)
            .map(|_| {
                let ran = ran.clone();
                wq.spawn(move || {
                    cmwq::blocking(|| thread::sleep(Duration::from_micros(100)));
                    ran.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect()
    };
    let wq = unbound("sp_drain");
    let hs = spawn_some(&wq, 20);
    wq.flush();
    assert!(
        hs.iter().all(JoinHandle::is_finished),
        "flush waited for all"
    );
    let hs = spawn_some(&wq, 20);
    wq.drain();
    assert!(
        hs.iter().all(JoinHandle::is_finished),
        "drain waited for all"
    );
    let hs = spawn_some(&wq, 20);
    drop(wq); // destroy runs what was queued
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 60);
}

#[test]
fn a_draining_queue_refuses_a_spawn_at_once() {
    let wq = unbound("sp_refused");
    let gate = Arc::new(std::sync::Barrier::new(2));
    let g2 = gate.clone();
    let holder = wq.spawn(move || {
        cmwq::blocking(|| {
            g2.wait();
            g2.wait();
        })
    });
    gate.wait();
    let wq2 = wq.clone();
    let drainer = thread::spawn(move || wq2.drain());
    while wq.stats().rejected == 0 {
        drop(wq.spawn(|| ()));
        thread::yield_now();
    }
    let h = wq.spawn(|| 5);
    assert!(h.is_finished());
    assert!(matches!(h.join(), Err(JoinError::Refused)));
    gate.wait();
    drainer.join().unwrap();
    holder.join().unwrap();
}

#[test]
fn joining_a_job_from_itself_panics_instead_of_hanging() {
    let wq = unbound("sp_self");
    let slot: Arc<Mutex<Option<JoinHandle<()>>>> = Arc::new(Mutex::new(None));
    let said = Arc::new(Mutex::new(None));
    let gate = Arc::new(std::sync::Barrier::new(2));
    let (slot2, said2, g2) = (slot.clone(), said.clone(), gate.clone());
    let h = wq.spawn(move || {
        g2.wait();
        // This job's own handle: joining it would wait for itself.
        let me = slot2.lock().unwrap().take().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| me.join()));
        let msg = r.err().map(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic".into())
        });
        *said2.lock().unwrap() = msg;
    });
    *slot.lock().unwrap() = Some(h);
    gate.wait();
    wq.flush();
    let msg = said
        .lock()
        .unwrap()
        .clone()
        .expect("the self-join panicked");
    assert!(msg.contains("JoinHandle::join"), "{msg}");
    // The queue runs on.
    assert_eq!(wq.spawn(|| 3).join().unwrap(), 3);
}

#[test]
fn a_spawn_makes_at_most_one_allocation() {
    let wq = unbound("sp_alloc");
    // Warm-up: pools, workers and lists reach their steady size.
    for i in 0..2000u64 {
        wq.spawn(move || i).join().unwrap();
    }
    let mut worst = 0;
    for i in 0..2000u64 {
        COUNTING.with(|c| c.set(true));
        let before = ALLOCS.load(Ordering::Relaxed);
        let h = wq.spawn(move || i + 1);
        let n = ALLOCS.load(Ordering::Relaxed) - before;
        COUNTING.with(|c| c.set(false));
        worst = worst.max(n);
        assert_eq!(h.join().unwrap(), i + 1);
    }
    // The counter works (a control).
    COUNTING.with(|c| c.set(true));
    let before = ALLOCS.load(Ordering::Relaxed);
    drop(std::hint::black_box(Box::new(1u8)));
    let ctl = ALLOCS.load(Ordering::Relaxed) - before;
    COUNTING.with(|c| c.set(false));
    assert_eq!(ctl, 1);
    assert_eq!(worst, 1, "a spawn allocated {worst} times");
}

/// A minimal executor: poll on this thread, park until woken.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

#[test]
fn a_handle_is_a_future() {
    let wq = unbound("sp_future");
    let v = block_on(async {
        let a = wq.spawn(|| {
            cmwq::blocking(|| thread::sleep(Duration::from_millis(2)));
            20
        });
        let b = wq.spawn(|| 22);
        a.await.unwrap() + b.await.unwrap()
    });
    assert_eq!(v, 42);
    let e = block_on(wq.spawn(|| -> u8 { panic!("async boom") }));
    assert_eq!(e.unwrap_err().message(), Some("async boom"));
}

#[test]
fn spawn_on_runs_on_that_cpu_of_a_bound_queue() {
    let wq = Workqueue::builder("sp_on").build().unwrap();
    for cpu in cmwq::sched::affinity_of(0).unwrap() {
        let ran = wq
            .spawn_on(cpu, cmwq::sched::current_cpu)
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(ran, cpu);
    }
    assert!(wq.spawn_on(1 << 20, || ()).is_err());
}

#[test]
fn a_workqueue_panic_handler_gets_the_payload() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let wq = Workqueue::builder("sp_handler")
        .panic_handler(move |p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            s.lock().unwrap().push(msg.unwrap_or_default())
        })
        .build()
        .unwrap();
    let w = cmwq::Work::new(|| panic!("item {}", 1));
    assert!(wq.queue(&w));
    w.flush();
    assert_eq!(*seen.lock().unwrap(), vec!["item 1".to_string()]);
    assert_eq!(wq.stats().panics, 1);
}
