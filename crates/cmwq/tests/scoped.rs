//! Scoped jobs (`Workqueue::scope`): jobs borrow the caller's data, all of
//! them (and what they captured) are finished before `scope` returns, and a
//! job's panic is resumed after all finished.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use cmwq::{JoinError, Workqueue};

#[test]
fn jobs_borrow_and_write_the_callers_data() {
    let wq = Workqueue::builder("scoped-borrow")
        .unbound()
        .build()
        .unwrap();
    let input: Vec<u64> = (0..10_000).collect();
    let mut out = vec![0u64; input.len()];
    let total = AtomicUsize::new(0);
    let n = wq.scope(|s| {
        for (src, dst) in input.chunks(1000).zip(out.chunks_mut(1000)) {
            let total = &total;
            s.spawn(move || {
                for (d, x) in dst.iter_mut().zip(src) {
                    *d = x * 2;
                }
                total.fetch_add(src.len(), Ordering::SeqCst);
            });
        }
        let h = s.spawn(|| input.iter().sum::<u64>());
        h.join().unwrap()
    });
    assert_eq!(n, 49_995_000);
    assert_eq!(total.load(Ordering::SeqCst), 10_000);
    assert!(out.iter().zip(&input).all(|(o, i)| *o == i * 2));
}

/// Counts its drop in a counter the scope's caller owns.
struct Dropped<'a>(&'a AtomicUsize);

impl Drop for Dropped<'_> {
    fn drop(&mut self) {
        // Late enough that a scope that does not wait returns first.
        thread::sleep(Duration::from_millis(2));
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn every_job_and_what_it_captured_is_finished_before_scope_returns() {
    let wq = Workqueue::builder("scoped-wait").unbound().build().unwrap();
    let ran = AtomicUsize::new(0);
    let dropped = AtomicUsize::new(0);
    for round in 0..20 {
        wq.scope(|s| {
            for i in 0..16 {
                let guard = Dropped(&dropped);
                let ran = &ran;
                s.spawn(move || {
                    let _g = guard;
                    thread::sleep(Duration::from_millis((i % 4) as u64));
                    ran.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(ran.load(Ordering::SeqCst), 16 * (round + 1));
        assert_eq!(dropped.load(Ordering::SeqCst), 16 * (round + 1));
    }
}

#[test]
fn a_jobs_panic_is_resumed_after_all_jobs_finished() {
    let wq = Workqueue::builder("scoped-panic")
        .unbound()
        .build()
        .unwrap();
    let slow_done = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        wq.scope(|s| {
            s.spawn(|| panic!("scoped job fails"));
            for _ in 0..4 {
                s.spawn(|| {
                    thread::sleep(Duration::from_millis(20));
                    slow_done.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    }));
    // Resumed with the job's own payload, once the slow ones were done.
    let p = r.expect_err("the scope resumes the job's panic");
    assert_eq!(p.downcast_ref::<&str>(), Some(&"scoped job fails"));
    assert_eq!(slow_done.load(Ordering::SeqCst), 4);
    // A panic the handle joined is the joiner's, not resumed.
    let v = wq.scope(|s| {
        let h = s.spawn(|| -> u8 { panic!("joined") });
        matches!(h.join(), Err(JoinError::Panicked(_)))
    });
    assert!(v);
    // The scope closure's own panic also waits for the jobs.
    let done = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        wq.scope(|s| {
            s.spawn(|| {
                thread::sleep(Duration::from_millis(20));
                done.fetch_add(1, Ordering::SeqCst);
            });
            panic!("the closure fails");
        })
    }));
    assert!(r.is_err());
    assert_eq!(done.load(Ordering::SeqCst), 1);
}

#[test]
fn a_scope_inside_an_item_of_its_own_queue() {
    // Several slots: the waiting item says it blocks and its jobs run.
    let wq = Workqueue::builder("scoped-nested")
        .unbound()
        .max_active(4)
        .build()
        .unwrap();
    let wq2 = wq.clone();
    let sum = wq
        .spawn(move || {
            let data: Vec<u32> = (1..=100).collect();
            wq2.scope(|s| {
                let hs: Vec<_> = data
                    .chunks(25)
                    .map(|c| s.spawn(move || c.iter().sum::<u32>()))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
            })
        })
        .join()
        .unwrap();
    assert_eq!(sum, 5050);
    // One slot (ordered): the jobs could never start; refused at once.
    let ordered = Workqueue::builder("scoped-ordered")
        .ordered()
        .build()
        .unwrap();
    let o2 = ordered.clone();
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    let err = ordered
        .spawn(move || {
            o2.scope(|s| {
                s.spawn(|| r2.fetch_add(1, Ordering::SeqCst));
            })
        })
        .join()
        .unwrap_err();
    let msg = err.message().unwrap_or_default().to_string();
    assert!(
        msg.contains("Workqueue::scope") && msg.contains("one item at a time"),
        "{msg}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}
