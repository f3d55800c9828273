//! One-off jobs with `Workqueue::spawn`: join a handle, or `.await` it.
//!
//! Run with `cargo run -p cmwq --example spawn`.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
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

    // Async: a JoinHandle is a Future, woken by the job itself. Any executor
    // works; this example brings a ten-line one so it depends on nothing.
    let total = block_on(async {
        let a = wq.spawn(|| "work".len());
        let b = wq.spawn(|| "queue".len());
        a.await.unwrap() + b.await.unwrap()
    });
    println!("awaited: {total}");
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
