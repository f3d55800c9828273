//! Latency histograms per workqueue (issue 28): every item that ran is
//! counted once in each histogram, through attrs changes that retire pwqs;
//! the times are real (an item held back behind a blocker shows its wait,
//! one that sleeps its run); queues keep none unless asked
//! (`latency_histograms`, `CMWQ_LATENCY_HIST`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cmwq::hist::{Histogram, WqLatency, bucket_of, bucket_range};
use cmwq::topology::Scope;
use cmwq::{DelayedWork, Work, Workqueue};

/// The buckets hold `count` values, and the snapshot says the same as the
/// queue.
fn consistent(wq: &Workqueue, name: &str) -> WqLatency {
    let lat = wq.latency().expect("histograms kept");
    for h in [&lat.queue, &lat.run] {
        let in_buckets: u64 = h.buckets.iter().map(|(_, n)| n).sum();
        assert_eq!(in_buckets, h.count, "{name}: buckets sum to the count");
    }
    let snap = cmwq::snapshot();
    let w = snap.workqueues.iter().find(|w| w.name == name).unwrap();
    assert_eq!(
        w.latency.as_ref(),
        Some(&lat),
        "{name}: snapshot and queue agree"
    );
    lat
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn counts_equal_items_run_on_every_kind_of_queue() {
    let queues = [
        ("lat_bound", Workqueue::builder("lat_bound")),
        ("lat_unbound", Workqueue::builder("lat_unbound").unbound()),
        ("lat_ordered", Workqueue::builder("lat_ordered").ordered()),
        (
            "lat_reclaim",
            Workqueue::builder("lat_reclaim").unbound().mem_reclaim(),
        ),
    ];
    for (name, b) in queues {
        let wq = b.latency_histograms(true).build().unwrap();
        let works: Vec<Work> = (0..8)
            .map(|_| Work::new(|| std::hint::black_box(())))
            .collect();
        let dw = DelayedWork::new(|| {});
        let mut handles = Vec::new();
        for round in 0..50 {
            for w in &works {
                wq.queue(w);
            }
            handles.push(wq.spawn(move || round));
            wq.execute(|| {});
            if round % 10 == 0 {
                wq.queue_delayed(&dw, Duration::from_millis(1));
            }
            if round == 25 && name != "lat_bound" {
                // Retires the pwqs: their counts must survive them.
                wq.set_affinity_scope(Scope::Cpu).unwrap();
            }
        }
        for h in handles {
            h.join().unwrap();
        }
        wq.flush();
        dw.flush();
        wq.flush();
        // Every item ended: each is in both histograms, once.
        let st = wq.stats();
        assert_eq!(st.started, st.completed, "{name}");
        let lat = consistent(&wq, name);
        assert_eq!(lat.queue.count, st.completed, "{name}: queue-delay count");
        assert_eq!(lat.run.count, st.completed, "{name}: run-time count");
        // 50 spawned and 50 executed jobs at least (a Work still pending
        // coalesces).
        assert!(st.completed >= 100, "{name}: {st:?}");
    }
}

#[test]
fn the_times_are_the_items_own() {
    let wq = Workqueue::builder("lat_times")
        .ordered()
        .latency_histograms(true)
        .build()
        .unwrap();
    // A blocker holds the ordered queue; an item queued behind it waits at
    // least as long as the test sleeps before letting the blocker go.
    let go = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (g, s) = (go.clone(), started.clone());
    let blocker = Work::new(move || {
        s.store(true, Ordering::SeqCst);
        while !g.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let behind = Work::new(|| std::thread::sleep(Duration::from_millis(30)));
    wq.queue(&blocker);
    wait_for("the blocker to start", || started.load(Ordering::SeqCst));
    wq.queue(&behind);
    std::thread::sleep(Duration::from_millis(50));
    go.store(true, Ordering::SeqCst);
    wq.flush();
    let lat = consistent(&wq, "lat_times");
    assert_eq!((lat.queue.count, lat.run.count), (2, 2));
    let ms = |n: u64| n * 1_000_000;
    // Values surely under `ns`: those of the buckets below its bucket.
    let under = |h: &Histogram, ns: u64| h.count_le(bucket_range(bucket_of(ns)).0 - 1);
    // `behind` waited >= 50 ms, and both ran >= 30 ms (the blocker >= 50).
    assert_eq!(under(&lat.queue, ms(50)), 1, "{lat:?}");
    assert_eq!(under(&lat.run, ms(30)), 0, "{lat:?}");
    assert!(lat.queue.p99().unwrap() >= Duration::from_millis(50));
    assert!(lat.run.sum_ns >= ms(80), "{lat:?}");
    assert!(lat.queue.sum_ns >= ms(50), "{lat:?}");
}

#[test]
fn queues_keep_none_unless_asked() {
    let off = Workqueue::builder("lat_off").build().unwrap();
    let w = Work::new(|| {});
    off.queue(&w);
    off.flush();
    assert_eq!(off.latency(), None);
    let snap = cmwq::snapshot();
    let s = snap
        .workqueues
        .iter()
        .find(|s| s.name == "lat_off")
        .unwrap();
    assert!(s.latency.is_none());
    // Off by the builder even where the environment says on (see below).
    let off2 = Workqueue::builder("lat_off2")
        .latency_histograms(false)
        .build()
        .unwrap();
    assert_eq!(off2.latency(), None);
    // A Work stamped by a queue with histograms and then queued on one
    // without is not counted there, nor is the stamp read.
    let on = Workqueue::builder("lat_on")
        .latency_histograms(true)
        .build()
        .unwrap();
    on.queue(&w);
    on.flush();
    off.queue(&w);
    off.flush();
    assert_eq!(on.latency().unwrap().run.count, 1);
    assert_eq!(off.latency(), None);
}

#[test]
fn the_environment_turns_them_on_for_queues_that_do_not_say() {
    if std::env::var_os("CMWQ_LAT_CHILD").is_some() {
        let dflt = Workqueue::builder("lat_env").build().unwrap();
        let off = Workqueue::builder("lat_env_off")
            .latency_histograms(false)
            .build()
            .unwrap();
        for wq in [&dflt, &off] {
            let w = Work::new(|| {});
            wq.queue(&w);
            wq.flush();
        }
        let on: Option<Histogram> = dflt.latency().map(|l| l.run);
        assert_eq!(on.map(|h| h.count), Some(1));
        assert_eq!(off.latency(), None);
        return;
    }
    common::run_child(
        "the_environment_turns_them_on_for_queues_that_do_not_say",
        &[("CMWQ_LAT_CHILD", "1"), ("CMWQ_LATENCY_HIST", "on")],
        &[],
    );
}

/// A snapshot's counters and histograms are read together: while items
/// complete without pause, every snapshot's `completed` equals its run-time
/// count (each pwq's pair is read under one hold of its pool's lock, where
/// the worker updates both). Read one after the other, the items that ended
/// in between were in one and not the other, and `cmwq monitor`'s interval
/// deltas disagreed.
#[test]
fn a_snapshot_counts_each_completed_item_in_its_histograms() {
    let wq = Workqueue::builder("lat_snap_pair")
        .latency_histograms(true)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let works: Vec<Work> = (0..4).map(|_| Work::new(|| {})).collect();
    let (wq2, stop2) = (wq.clone(), stop.clone());
    let producer = std::thread::spawn(move || {
        while !stop2.load(Ordering::Relaxed) {
            for w in &works {
                wq2.queue(w);
            }
            std::thread::yield_now();
        }
        wq2.flush();
    });
    for checked in 0..3000 {
        let snap = cmwq::snapshot();
        let w = snap
            .workqueues
            .iter()
            .find(|w| w.name == "lat_snap_pair")
            .unwrap();
        let run = w.latency.as_ref().expect("histograms kept").run.count;
        assert_eq!(
            w.stats.completed, run,
            "snapshot {checked}: completed and the run-time histogram's count"
        );
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    assert!(wq.stats().completed > 0, "items ran");
}
