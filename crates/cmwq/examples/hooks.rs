//! Worker hooks: a per-thread setup that runs on every worker as it starts
//! and a teardown as it exits. Here a toy "profiler" registers each worker
//! thread (its name says what it serves: `cmwq/3:1H`, `cmwq/u8:2`), counts
//! the items each one ran in a thread-local, and reports it when the worker
//! exits; a worker stack size is set too.
//!
//! Run with `cargo run -p cmwq --example hooks`.

use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cmwq::{WorkerHooks, Workqueue, set_worker_hooks};

thread_local! {
    /// The items this worker ran (what a profiler would keep per thread).
    static RAN: Cell<u64> = const { Cell::new(0) };
}

/// What the exiting workers reported: (thread name, items run).
static REPORTS: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());

/// Unbound workers started (they exit when their queue goes).
static UNBOUND: AtomicUsize = AtomicUsize::new(0);

fn main() -> Result<(), cmwq::Error> {
    // Before the first workqueue, so every worker starts with them.
    cmwq::set_worker_stack_size(4 << 20)?;
    set_worker_hooks(
        WorkerHooks::new()
            .on_start(|w| {
                let what = match (&w.rescuer, w.cpu) {
                    (Some(wq), _) => format!("rescuer of {wq}"),
                    (None, Some(cpu)) => format!("bound pool {:?} on CPU {cpu}", w.pool),
                    (None, None) => format!("unbound pool {:?}, CPUs {:?}", w.pool, w.cpus),
                };
                if !w.bound && w.rescuer.is_none() {
                    UNBOUND.fetch_add(1, Ordering::SeqCst);
                }
                println!("start {:<15} {what}, nice {}", w.name, w.nice);
            })
            .on_exit(|w| {
                let n = RAN.with(Cell::get);
                REPORTS.lock().unwrap().push((w.name.clone(), n));
            }),
    );

    let wq = Workqueue::builder("example_hooks").unbound().build()?;
    let per_cpu = Workqueue::builder("example_hooks_bound").build()?;
    for i in 0..1000u64 {
        let q = if i % 2 == 0 { &wq } else { &per_cpu };
        q.execute(|| RAN.with(|r| r.set(r.get() + 1)));
    }
    wq.flush();
    per_cpu.flush();
    // Dropping an unbound queue lets its pool's workers exit (each runs the
    // exit hook); bound pools keep theirs for the process's life.
    drop(wq);
    let unbound_exits = || {
        let r = REPORTS.lock().unwrap();
        r.iter().filter(|r| r.0.starts_with("cmwq/u")).count()
    };
    for _ in 0..2000 {
        if unbound_exits() == UNBOUND.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for (name, n) in REPORTS.lock().unwrap().iter() {
        println!("exit  {name:<15} ran {n} items");
    }
    println!("hook panics: {}", cmwq::worker_hook_panics());
    Ok(())
}
