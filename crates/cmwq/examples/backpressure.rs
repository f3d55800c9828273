//! Backpressure: a producer much faster than its consumers, on a workqueue
//! bounded with `max_queued`. `execute` waits for room, so the producer
//! slows to the consumers' pace and memory stays bounded; `try_execute`
//! fails fast instead and hands the job back, here to be shed (counted).
//!
//! Run with `cargo run -p cmwq --example backpressure`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cmwq::Workqueue;

/// A consumer's work: about 50 µs of sleep (an I/O call, say).
fn consume(done: &AtomicU64) {
    cmwq::blocking(|| std::thread::sleep(Duration::from_micros(50)));
    done.fetch_add(1, Ordering::Relaxed);
}

fn main() -> Result<(), cmwq::Error> {
    let wq = Workqueue::builder("example_backpressure")
        .unbound()
        .max_active(4)
        .max_queued(64)
        .build()?;
    let done = Arc::new(AtomicU64::new(0));

    // Waiting: every job gets in, at the consumers' pace.
    let t0 = Instant::now();
    for _ in 0..2_000 {
        let done = done.clone();
        wq.execute(move || consume(&done));
    }
    wq.flush();
    let st = wq.stats();
    println!(
        "execute: 2000 jobs in {:?}, at most {} waited (max_queued 64), {} calls found it full",
        t0.elapsed(),
        st.waiting_peak,
        st.queue_full
    );

    // Failing fast: what does not fit is handed back and shed here.
    let mut shed = 0u64;
    for _ in 0..2_000 {
        let d = done.clone();
        if let Err(full) = wq.try_execute(move || consume(&d)) {
            drop(full.into_inner());
            shed += 1;
        }
    }
    wq.flush();
    println!(
        "try_execute: {} ran, {shed} shed while the queue was full",
        done.load(Ordering::Relaxed) - 2_000
    );
    assert!(wq.stats().waiting_peak <= 64);
    Ok(())
}
