//! First use: an unbound workqueue, one work item, and the three calls most
//! code needs (`queue`, `flush`, `cancel_sync`).
//!
//! ```sh
//! cargo run -p cmwq --example first_use
//! ```
//!
//! A `Work` is a callback with the kernel's state word: it is either idle or
//! pending, so queueing it twice before it runs queues it once. That is what
//! makes a `Work` a good "something changed, go look" signal.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

// The README's example is this file's first lines, line for line, with
// `Ok(())` and the closing brace after them (CI checks that they stay equal).
use cmwq::{Work, Workqueue};

fn main() -> Result<(), cmwq::Error> {
    let wq = Workqueue::builder("first").unbound().build()?;
    let w = Work::new(|| println!("ran"));
    assert!(wq.queue(&w)); // false while it is still pending
    w.flush(); // waits for the last queued instance
    w.cancel_sync(); // cancels a pending one, waits for a running one

    // Queueing an item that is already pending does nothing: the pending bit
    // coalesces requests. While a slow run holds the worker, the first queue
    // call makes the item pending again (one more run after this one) and the
    // other 99 return false.
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let slow = Work::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(50));
    });
    assert!(wq.queue(&slow)); // starts running (or is about to)
    std::thread::sleep(Duration::from_millis(10));
    let accepted = (0..100).filter(|_| wq.queue(&slow)).count();
    slow.flush();
    println!(
        "queued 1 + 100 times while running: {accepted} accepted, {} runs",
        runs.load(Ordering::SeqCst)
    );

    // cancel_sync takes back a pending instance, so it never runs, and returns
    // true when there was one. On an ordered queue (one item at a time) an
    // item queued behind a 50 ms one stays pending long enough to cancel.
    let never = Work::new(|| println!("this line is never printed"));
    let ordered = Workqueue::builder("first-ordered").ordered().build()?;
    let blocker = Work::new(|| std::thread::sleep(Duration::from_millis(50)));
    ordered.queue(&blocker);
    ordered.queue(&never);
    println!(
        "cancel_sync of a pending item: was pending = {}",
        never.cancel_sync()
    );

    // flush waits for everything queued so far; dropping the last handle of a
    // workqueue would drain it too, so nothing queued is ever lost.
    wq.flush();
    let stats = wq.stats();
    println!(
        "workqueue 'first': {} queued, {} completed",
        stats.queued, stats.completed
    );
    Ok(())
}
