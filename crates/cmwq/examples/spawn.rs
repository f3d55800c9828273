//! One-off jobs with `Workqueue::spawn`: join a handle, `.await` it, or
//! cancel it before it starts; and `Workqueue::execute` for jobs nobody
//! waits for.
//!
//! Run with `cargo run -p cmwq --example spawn`.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use cmwq::{JoinError, Workqueue};

fn main() {
    let wq = Workqueue::builder("example_spawn")
        .unbound()
        .build()
        .expect("an unbound workqueue");

    // Blocking: spawn jobs, join their handles.
    let handles: Vec<_> = (1..=10u64).map(|n| wq.spawn(move || n * n)).collect();
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    println!("sum of squares 1..=10 = {sum}");

    // A panic comes back as an error carrying the payload.
    match wq.spawn(|| -> u32 { panic!("bad input") }).join() {
        Err(e @ JoinError::Panicked(_)) => println!("the job panicked: {e}"),
        other => println!("unexpected: {other:?}"),
    }

    // A job that has not started can be taken back: it never runs. An
    // ordered queue held by a first job keeps the second one queued.
    let ordered = Workqueue::builder("example_spawn_ordered")
        .unbound()
        .ordered()
        .build()
        .expect("an ordered workqueue");
    let (open, gate) = std::sync::mpsc::channel::<()>();
    let first = ordered.spawn(move || cmwq::blocking(|| gate.recv().is_ok()));
    let second = ordered.spawn(|| unreachable!("cancelled before it started"));
    let taken = second.cancel();
    println!("cancelled the queued job: {taken}");
    open.send(()).expect("the first job waits");
    assert!(first.join().unwrap());
    assert!(matches!(second.join(), Err(JoinError::Cancelled)));

    // Async: a JoinHandle is a Future, woken by the job itself. Any executor
    // works; this example brings a ten-line one so it depends on nothing.
    let total = block_on(async {
        let a = wq.spawn(|| "work".len());
        let b = wq.spawn(|| "queue".len());
        a.await.unwrap() + b.await.unwrap()
    });
    println!("awaited: {total}");

    // Fire and forget: no handle to hold; `flush` waits for them all.
    let hits = Arc::new(AtomicU64::new(0));
    for _ in 0..1000 {
        let hits = hits.clone();
        wq.execute(move || {
            hits.fetch_add(1, Ordering::Relaxed);
        });
    }
    wq.flush();
    println!("executed: {}", hits.load(Ordering::Relaxed));
}

/// Polls `f` on this thread, parking until its waker is called.
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
