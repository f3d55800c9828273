//! When the machine moves: the CPUs a process may use change at run time.
//!
//! - `queue_on` of an unbound queue to a CPU outside its cpumask goes to the
//!   queue's default pool (the kernel's rule), before and after a live
//!   `set_cpumask`; only a CPU id beyond the possible CPUs is an error.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cmwq::{DelayedWork, Work, Workqueue};

/// The CPUs this process may run on now (the main thread's affinity).
fn usable() -> Vec<usize> {
    cmwq::topology::sched_affinity().expect("sched_getaffinity")
}

/// Every `_on` call of an unbound queue whose cpumask is `[inside]`, aimed at
/// `outside`: each succeeds and its item runs once, on a CPU of the mask.
fn on_calls_run_in_mask(wq: &Workqueue, outside: usize, inside: usize) {
    let ran = Arc::new(AtomicUsize::new(0));
    let wrong_cpu = Arc::new(AtomicUsize::new(0));
    let count = {
        let (ran, wrong) = (ran.clone(), wrong_cpu.clone());
        move || {
            ran.fetch_add(1, Ordering::SeqCst);
            if common::current_cpu() != inside {
                wrong.fetch_add(1, Ordering::SeqCst);
            }
        }
    };
    let c = count.clone();
    let w = Work::new(move || c());
    assert_eq!(wq.queue_on(outside, &w), Ok(true), "queue_on({outside})");
    w.flush();
    let c = count.clone();
    let h = wq
        .spawn_on(outside, move || {
            c();
            7
        })
        .unwrap_or_else(|e| panic!("spawn_on({outside}): {e}"));
    assert_eq!(h.join().unwrap(), 7);
    let c = count.clone();
    assert_eq!(wq.execute_on(outside, move || c()), Ok(true));
    let c = count.clone();
    let dw = DelayedWork::new(move || c());
    assert_eq!(
        wq.queue_delayed_on(outside, &dw, Duration::from_millis(1)),
        Ok(true)
    );
    dw.flush();
    wq.flush();
    assert_eq!(ran.load(Ordering::SeqCst), 4, "each item ran once");
    assert_eq!(
        wrong_cpu.load(Ordering::SeqCst),
        0,
        "items for CPU {outside} run in the queue's cpumask [{inside}] (its default pool)"
    );
}

#[test]
fn queue_on_outside_cpumask_goes_to_the_default_pool() {
    let cpus = usable();
    if cpus.len() < 2 {
        eprintln!("skipped: needs 2 usable CPUs, this process has {cpus:?}");
        return;
    }
    let (a, b) = (cpus[0], cpus[1]);
    let wq = Workqueue::builder("hp-mask")
        .unbound()
        .cpumask(&[b])
        .build()
        .unwrap();
    on_calls_run_in_mask(&wq, a, b);
    // A live cpumask change: calls that worked keep working, now the other way.
    wq.set_cpumask(&[a]).unwrap();
    on_calls_run_in_mask(&wq, b, a);
    wq.set_cpumask(&[b]).unwrap();
    on_calls_run_in_mask(&wq, a, b);
    // A CPU id beyond the possible ones is still refused, and says so.
    let e = wq.queue_on(1 << 20, &Work::new(|| {})).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
}
