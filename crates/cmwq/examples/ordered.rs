//! An ordered workqueue runs its items one at a time, in the order they were
//! queued, whoever queued them.
//!
//! ```sh
//! cargo run -p cmwq --example ordered
//! ```
//!
//! Four producer threads queue 250 items each onto one ordered queue (the
//! kernel's `alloc_ordered_workqueue`). The example records the global order
//! of the `queue` calls and the order the items ran in, then checks that the
//! two are the same and that no two items ever ran at once. An unbound queue
//! with `max_active > 1` gives neither promise: its items run in parallel.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cmwq::{Work, Workqueue};

const PRODUCERS: usize = 4;
const PER_PRODUCER: usize = 250;

fn main() -> Result<(), cmwq::Error> {
    let wq = Workqueue::builder("ordered-log").ordered().build()?;

    let queued = Arc::new(Mutex::new(Vec::new())); // (producer, seq) per queue call
    let ran = Arc::new(Mutex::new(Vec::new())); // (producer, seq) per run
    let running = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (wq, queued, ran) = (wq.clone(), queued.clone(), ran.clone());
            let (running, overlaps) = (running.clone(), overlaps.clone());
            std::thread::spawn(move || {
                // Each item is its own Work: a pending Work queues only once.
                let mut items = Vec::with_capacity(PER_PRODUCER);
                for seq in 0..PER_PRODUCER {
                    let (ran, running, overlaps) = (ran.clone(), running.clone(), overlaps.clone());
                    let w = Work::new(move || {
                        if running.fetch_add(1, Ordering::SeqCst) != 0 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        ran.lock().unwrap().push((p, seq));
                        running.fetch_sub(1, Ordering::SeqCst);
                    });
                    // Hold the log's lock across `queue`, so the log's order
                    // is the order in which the queue saw the calls.
                    let mut log = queued.lock().unwrap();
                    assert!(wq.queue(&w));
                    log.push((p, seq));
                    drop(log);
                    items.push(w);
                }
                items
            })
        })
        .collect();
    for t in producers {
        t.join().expect("producer panicked");
    }
    wq.flush();

    let queued = queued.lock().unwrap();
    let ran = ran.lock().unwrap();
    let interleaved = queued.windows(2).filter(|w| w[0].0 != w[1].0).count();
    println!(
        "{} items from {PRODUCERS} producers, producer changed {interleaved} times in queue order",
        queued.len()
    );
    println!("ran in queue order: {}", *queued == *ran);
    println!(
        "items that started while another ran: {}",
        overlaps.load(Ordering::SeqCst)
    );
    assert_eq!(*queued, *ran);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    Ok(())
}
