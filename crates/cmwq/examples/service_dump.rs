//! A service that can be looked into while it runs: `cmwq::control::serve()`
//! and `cmwq dump`.
//!
//! ```sh
//! cargo run -p cmwq --example service_dump            # runs 3 s, then exits
//! cargo run -p cmwq --example service_dump -- 120     # runs 120 s
//! CMWQ_EXAMPLE_SECS=120 cargo run -p cmwq --example service_dump
//! ```
//!
//! While it runs, from another terminal (same user; the pid is printed first):
//!
//! ```sh
//! cargo run -p cmwq-cli -- ps                    # processes serving an endpoint
//! cargo run -p cmwq-cli -- dump --pid PID        # wq_dump.py's tables for it
//! cargo run -p cmwq-cli -- monitor --pid PID -i 1   # wq_monitor.py, once a second
//! cargo run -p cmwq-cli -- set --pid PID ingest max_active 2   # a live knob write
//! ```
//!
//! (or `cmwq dump --pid PID` with the installed binary). The kernel offers the
//! same through drgn and sysfs; a user-space process has to opt in, because
//! the endpoint is a thread and a socket. `serve()` starts it once; it is
//! private to this user (see the `control` module docs), and the socket is
//! removed when the process exits normally. Setting `CMWQ_CONTROL=1` in the
//! environment does the same without a code change.

use std::time::{Duration, Instant};

use cmwq::{DelayedWork, Work, Workqueue};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secs: u64 = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("CMWQ_EXAMPLE_SECS").ok())
        .map(|s| s.parse())
        .transpose()
        .map_err(|e| format!("the run time in seconds: {e}"))?
        .unwrap_or(3);

    let socket = cmwq::control::serve()?;
    println!("pid {}", std::process::id());
    println!("socket {}", socket.display());
    println!("inspect with: cmwq dump --pid {}", std::process::id());

    // Some queues with different shapes, so the dump has something to show:
    // an unbound queue with a limit, a bound one, and an ordered one.
    let ingest = Workqueue::builder("ingest")
        .unbound()
        .max_active(4)
        .build()?;
    let events = Workqueue::builder("events").build()?;
    let journal = Workqueue::builder("journal")
        .ordered()
        .mem_reclaim()
        .build()?;

    let parse = Work::new(|| spin(Duration::from_micros(200)));
    let notify = Work::new(|| spin(Duration::from_micros(50)));
    let append = Work::new(|| std::thread::sleep(Duration::from_millis(1)));
    let tick = DelayedWork::new(|| {});

    println!("running work for {secs} s");
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        ingest.queue(&parse);
        events.queue(&notify);
        journal.queue(&append);
        ingest.mod_delayed(&tick, Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(2));
    }

    // What `cmwq dump --pid` would have read, taken in-process. (CPU time,
    // which `cmwq monitor` shows, is sampled once per watchdog tick as the
    // kernel's is, so items this short are charged only now and then.)
    let snap = cmwq::snapshot();
    let ours = ["ingest", "events", "journal"];
    for wq in snap
        .workqueues
        .iter()
        .filter(|w| ours.contains(&w.name.as_str()))
    {
        println!(
            "  {:<8} {:<8} {:>6} queued, {:>6} completed",
            wq.name, wq.kind, wq.stats.queued, wq.stats.completed
        );
    }
    tick.cancel_sync();
    cmwq::control::stop(); // also done by the exit hook; explicit here
    Ok(())
}

/// Burns CPU for `d`, as a parser or a checksum would.
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}
