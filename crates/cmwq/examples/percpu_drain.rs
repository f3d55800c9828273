//! Per-CPU state drained from another CPU, in QPW mode.
//!
//! ```sh
//! cargo run -p cmwq --example percpu_drain
//! ```
//!
//! `PerCpu<T>` keeps one `T` per possible CPU; threads add to the slot of the
//! CPU they run on (`with_local`), without sharing a cache line with other
//! CPUs. Now and then someone must empty every slot: to give cached memory
//! back, or to make a total exact. In `Mode::Local` (the kernel's `qpw=0`)
//! a drain is a work item *on the target CPU*, which interrupts whatever runs
//! there. In `Mode::Qpw` the caller takes the slot's lock and drains it
//! itself: the target CPU is left alone, which is what an isolated CPU
//! running a latency-sensitive loop needs. The API is the same; `stats()`
//! says where the drains ran.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use cmwq::percpu::{Mode, PerCpu};

fn main() {
    // A per-CPU count of "objects cached", as a slab or LRU batch would keep.
    let cache = Arc::new(PerCpu::new(Mode::Qpw, |_cpu| 0u64).expect("Qpw needs no workqueue"));
    println!(
        "{} slots (possible CPUs), mode {}",
        cache.nr_slots(),
        cache.mode()
    );

    // Producers on every CPU keep adding to their local slot...
    let stop = Arc::new(AtomicBool::new(false));
    let produced = Arc::new(AtomicU64::new(0));
    let producers: Vec<_> = (0..4)
        .map(|_| {
            let (cache, stop, produced) = (cache.clone(), stop.clone(), produced.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    cache.with_local(|n| *n += 1);
                    produced.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    // ...while this thread drains every slot remotely, ten times, taking each
    // slot's count (the slot is empty afterwards) without waking its CPU.
    let mut drained = 0u64;
    for round in 1..=10 {
        std::thread::sleep(Duration::from_millis(20));
        let per_cpu = cache.drain_all(|_cpu, n| std::mem::take(n)).expect("drain");
        drained += per_cpu.iter().sum::<u64>();
        if round == 1 {
            println!("first drain, per CPU: {per_cpu:?}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in producers {
        t.join().expect("producer panicked");
    }
    // One last drain after the producers stopped: nothing is lost.
    drained += cache
        .drain_all(|_cpu, n| std::mem::take(n))
        .expect("drain")
        .iter()
        .sum::<u64>();

    let produced = produced.load(Ordering::Relaxed);
    println!(
        "produced {produced}, drained {drained}: equal = {}",
        produced == drained
    );
    let s = cache.stats();
    println!(
        "drains run by the caller: {}, as work items on the target CPU: {}",
        s.on_caller, s.queued
    );
    assert_eq!(produced, drained);
}
