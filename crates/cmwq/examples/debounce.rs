//! Debounce with `DelayedWork` and `mod_delayed`: a burst of events, one run.
//!
//! ```sh
//! cargo run -p cmwq --example debounce
//! ```
//!
//! Each event re-arms the same delayed item to fire `QUIET` from now
//! (`mod_delayed_work` in the kernel), so the item runs once, `QUIET` after the
//! last event of a burst. A config-file watcher, a "save after typing stops"
//! or a batched cache flush all want this shape: the work is idempotent and
//! only the latest state matters. `queue_delayed` would be the wrong call:
//! it leaves an armed timer alone, so the item would run `QUIET` after the
//! *first* event, in the middle of the burst.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cmwq::{DelayedWork, Workqueue};

/// How long events must stop before the work runs.
const QUIET: Duration = Duration::from_millis(100);

fn main() -> Result<(), cmwq::Error> {
    let wq = Workqueue::builder("debounce").unbound().build()?;

    // The state the events change; the work reads only its latest value.
    let latest = Arc::new(Mutex::new(0u32));
    let runs = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();

    let (l, r) = (latest.clone(), runs.clone());
    let save = DelayedWork::new(move || {
        let n = r.fetch_add(1, Ordering::SeqCst) + 1;
        let v = *l.lock().unwrap();
        println!(
            "  run {n} at {:>4} ms: saved value {v}",
            start.elapsed().as_millis()
        );
    });

    // Two bursts of 50 events, 5 ms apart, with a pause longer than QUIET
    // between them: two runs, each seeing its burst's last value.
    for burst in 0..2 {
        println!(
            "burst {burst}: 50 events from {} ms",
            start.elapsed().as_millis()
        );
        for i in 1..=50 {
            *latest.lock().unwrap() = burst * 100 + i;
            // Re-arm: pushes the run QUIET past this event, pending or not.
            wq.mod_delayed(&save, QUIET);
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(QUIET * 2);
    }

    println!(
        "100 events, {} runs (one per burst)",
        runs.load(Ordering::SeqCst)
    );
    // Before exit: take back an armed timer and wait for a running instance.
    save.cancel_sync();
    Ok(())
}
