//! Worker priorities: a `HIGHPRI` queue (nice −20) and a `SCHED_FIFO` queue,
//! with `priority_fallback(true)` for processes that may not have them.
//!
//! ```sh
//! cargo run -p cmwq --example priorities
//! # as root, to see the fallback, drop the permission first:
//! cargo build -p cmwq --example priorities
//! setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice target/debug/examples/priorities
//! ```
//!
//! Raising a thread's priority needs `CAP_SYS_NICE` (or `RLIMIT_NICE` /
//! `RLIMIT_RTPRIO`), which the kernel's own workers never lack and most
//! processes do. So by default `build()` refuses a priority it cannot get
//! (`Error::PriorityDenied`) rather than run latency-sensitive work at nice 0
//! without saying so; `priority_fallback(true)` instead takes the best
//! priority allowed and records what happened in `stats().priority_fallback`.
//! Each work item below reports how its worker thread is actually scheduled.

use std::sync::mpsc;

use cmwq::{Priority, Work, Workqueue};

/// How the calling thread is scheduled, from `/proc/thread-self/stat`: its
/// nice value (field 19) and policy (field 41: 0 other, 1 FIFO, 2 RR).
fn my_sched() -> String {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // The fields after the parenthesised command name start at field 3.
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let field = |n: usize| rest.split_whitespace().nth(n - 3).unwrap_or("?");
    let policy = match field(41) {
        "0" => "SCHED_OTHER",
        "1" => "SCHED_FIFO",
        "2" => "SCHED_RR",
        _ => "policy ?",
    };
    format!("{policy}, nice {}", field(19))
}

/// Runs one item on `wq` and returns how its worker thread is scheduled.
fn worker_sched(wq: &Workqueue) -> String {
    let (tx, rx) = mpsc::channel();
    let w = Work::new(move || {
        let _ = tx.send(my_sched());
    });
    wq.queue(&w);
    w.flush();
    rx.recv().unwrap_or_else(|_| "did not run".into())
}

/// Prints what `wq` asked for, what it got, and what its worker sees.
fn report(wq: &Workqueue) {
    let s = wq.stats();
    println!("  {:<10} runs at {}", wq.name(), s.priority);
    match &s.priority_fallback {
        Some(why) => println!("  {:<10} fell back: {why}", ""),
        None => println!("  {:<10} got what it asked for (no fallback)", ""),
    }
    println!("  {:<10} worker thread: {}", "", worker_sched(wq));
}

fn main() -> Result<(), cmwq::Error> {
    // Without fallback, a missing permission is an error that names the
    // priority and the limit; here it is printed, not propagated.
    println!("HIGHPRI, no fallback:");
    match Workqueue::builder("hi-strict").highpri().build() {
        Ok(wq) => report(&wq),
        Err(e) => println!("  build() refused: {e}"),
    }

    // With fallback: nice −20 if allowed, else the lowest nice RLIMIT_NICE
    // permits, else nice 0, and the stats say which.
    println!("HIGHPRI, priority_fallback(true):");
    let hi = Workqueue::builder("hi")
        .highpri()
        .priority_fallback(true)
        .build()?;
    report(&hi);

    // SCHED_FIFO at real-time priority 1: a CPU hog at nice 0 can no longer
    // delay these workers. Falls back FIFO -> nice -20 -> RLIMIT_NICE -> 0.
    println!("Priority::Fifo, priority_fallback(true):");
    let rt = Workqueue::builder("rt")
        .priority(Priority::Fifo)
        .priority_fallback(true)
        .build()?;
    report(&rt);
    Ok(())
}
