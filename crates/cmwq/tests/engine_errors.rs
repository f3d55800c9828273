//! Bad use gets an error naming the refused value, or a documented
//! panic-free outcome.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cmwq::{Error, MAX_ACTIVE, Work, Workqueue};

/// `mem_reclaim_progress_without_new_workers` makes worker creation fail for
/// the whole process: the tests of this file run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn max_active_out_of_range() {
    let _s = serial();
    for bad in [0, MAX_ACTIVE + 1] {
        let e = Workqueue::builder("err-max")
            .max_active(bad)
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            Error::InvalidMaxActive {
                value: bad,
                max: MAX_ACTIVE
            }
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&bad.to_string()),
            "message names the value: {msg}"
        );
        let e = Workqueue::builder("err-max-u")
            .unbound()
            .max_active(bad)
            .build()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidMaxActive { value, .. } if value == bad));
    }
    // The bounds themselves are fine.
    assert!(
        Workqueue::builder("err-max-1")
            .max_active(1)
            .build()
            .is_ok()
    );
    assert!(
        Workqueue::builder("err-max-max")
            .max_active(MAX_ACTIVE)
            .build()
            .is_ok()
    );
    // set_max_active checks the same range and keeps the old value.
    let wq = Workqueue::builder("err-setmax")
        .max_active(4)
        .build()
        .unwrap();
    assert!(matches!(
        wq.set_max_active(0),
        Err(Error::InvalidMaxActive { value: 0, .. })
    ));
    assert!(matches!(
        wq.set_max_active(MAX_ACTIVE + 1),
        Err(Error::InvalidMaxActive { .. })
    ));
    assert_eq!(wq.max_active(), 4);
}

#[test]
fn ordered_max_active_must_be_one() {
    let _s = serial();
    let e = Workqueue::builder("err-ord")
        .ordered()
        .max_active(2)
        .build()
        .unwrap_err();
    assert_eq!(e, Error::OrderedMaxActive(2));
    assert!(e.to_string().contains('2'), "{e}");
    let wq = Workqueue::builder("err-ord-ok")
        .ordered()
        .max_active(1)
        .build()
        .unwrap();
    assert!(matches!(
        wq.set_max_active(2),
        Err(Error::OrderedMaxActive(2))
    ));
    assert_eq!(wq.max_active(), 1);
}

#[test]
fn cpumask_without_online_cpu() {
    let _s = serial();
    let e = Workqueue::builder("err-mask")
        .unbound()
        .cpumask(&[99])
        .build()
        .unwrap_err();
    assert_eq!(
        e,
        Error::EmptyCpumask {
            requested: vec![99]
        }
    );
    assert!(e.to_string().contains("99"), "message names the mask: {e}");
    // A mask with one online CPU is fine and routes all work there.
    let wq = Workqueue::builder("err-mask-ok")
        .unbound()
        .cpumask(&[1, 99])
        .build()
        .unwrap();
    let w = runs_once_on(&wq);
    assert!(matches!(
        wq.queue_on(99, &w),
        Err(Error::NoSuchCpu { cpu: 99, .. })
    ));
}

#[test]
fn queue_on_offline_cpu() {
    let _s = serial();
    let w = Work::new(|| {});
    for wq in [
        Workqueue::builder("err-off-b").build().unwrap(),
        Workqueue::builder("err-off-u").unbound().build().unwrap(),
    ] {
        let e = wq.queue_on(999, &w).unwrap_err();
        assert!(matches!(e, Error::NoSuchCpu { cpu: 999, nr_cpu_ids } if nr_cpu_ids <= 999));
        let msg = e.to_string();
        assert!(
            msg.contains("999") && msg.contains("does not exist"),
            "{msg}"
        );
        assert!(
            !msg.contains("not online"),
            "a missing CPU is not an offline one: {msg}"
        );
        assert!(!w.is_pending(), "a refused queue_on leaves the work idle");
        // The work is still usable.
        assert!(wq.queue_on(0, &w).unwrap());
        w.flush();
    }
}

#[test]
fn queue_while_draining_is_refused() {
    let _s = serial();
    let wq = Workqueue::builder("err-drain").unbound().build().unwrap();
    let release = Arc::new(AtomicUsize::new(0));
    let r2 = release.clone();
    let blocker = Work::new(move || {
        let t = Instant::now();
        while r2.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_micros(200));
        }
    });
    assert!(wq.queue(&blocker));
    let wq2 = wq.clone();
    let h = thread::spawn(move || wq2.drain());
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let w = Work::new(move || {
        n2.fetch_add(1, Ordering::SeqCst);
    });
    let t = Instant::now();
    loop {
        if !wq.queue(&w) {
            break;
        }
        w.flush();
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "drain never refused a queue"
        );
    }
    let ran = n.load(Ordering::SeqCst);
    assert!(!w.is_pending());
    assert!(!w.flush(), "a refused cycle leaves nothing to flush");
    assert!(wq.stats().rejected >= 1);
    assert!(
        matches!(wq.queue_on(0, &w), Ok(false)),
        "queue_on is refused too"
    );
    release.store(1, Ordering::SeqCst);
    h.join().unwrap();
    assert_eq!(n.load(Ordering::SeqCst), ran, "the refused work never ran");
    assert!(wq.queue(&w), "accepted again after drain");
    w.flush();
}

#[test]
fn freeze_non_freezable() {
    let _s = serial();
    let wq = Workqueue::builder("err-nofreeze").build().unwrap();
    let e = wq.freeze().unwrap_err();
    assert_eq!(
        e,
        Error::NotFreezable {
            name: "err-nofreeze".into()
        }
    );
    assert!(e.to_string().contains("err-nofreeze"), "{e}");
    assert!(wq.thaw().is_err());
    // Still works.
    let w = Work::new(|| {});
    assert!(wq.queue(&w));
    w.flush();
}

#[test]
fn bad_use_of_work_is_panic_free() {
    let _s = serial();
    // enable without disable, cancel/flush of a never-queued work.
    let w = Work::new(|| {});
    assert!(!w.enable());
    assert!(!w.cancel());
    assert!(!w.cancel_sync());
    assert!(!w.flush());
    assert!(!w.disable_sync());
    assert!(w.enable());
    assert!(!w.enable());
}

/// Worker creation fails (as at the thread limit): a `MEM_RECLAIM` queue must
/// still make progress (the kernel's rescuer, reference section 1 "Pools" and
/// design rule 6). A blocks (annotated) until B ran; the pool has one worker
/// and cannot start another.
#[test]
fn mem_reclaim_progress_without_new_workers() {
    let _s = serial();
    // A private pool: unbound, strict, cpumask {0}, scope cpu.
    let wq = Workqueue::builder("err-reclaim")
        .unbound()
        .flags(cmwq::WqFlags::MEM_RECLAIM)
        .affinity_scope(cmwq::topology::Scope::Cpu)
        .affinity_strict(true)
        .cpumask(&[0])
        .wake_mode(cmwq::WakeMode::UnderLock)
        .build()
        .unwrap();
    // Let the pool's first worker settle (it starts a spare when it first runs).
    let w0 = Work::new(|| {});
    assert!(wq.queue(&w0));
    w0.flush();
    let b_ran = Arc::new(AtomicUsize::new(0));
    let a_saw = Arc::new(AtomicUsize::new(0));
    let (b2, s2) = (b_ran.clone(), a_saw.clone());
    let a = Work::new(move || {
        cmwq::blocking(|| {
            let t = Instant::now();
            while b2.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(3) {
                thread::sleep(Duration::from_micros(200));
            }
        });
        s2.store(b2.load(Ordering::SeqCst), Ordering::SeqCst);
    });
    let b3 = b_ran.clone();
    let b = Work::new(move || {
        b3.fetch_add(1, Ordering::SeqCst);
    });
    // Occupy every existing worker of the pool with a blocked item first.
    let counts = wq.pool_counts();
    let workers = counts.iter().map(|c| c.workers).max().unwrap_or(1);
    let hold = Arc::new(AtomicUsize::new(0));
    let fillers: Vec<Work> = (0..workers.saturating_sub(1))
        .map(|_| {
            let h = hold.clone();
            Work::new(move || {
                cmwq::blocking(|| {
                    let t = Instant::now();
                    while h.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(3) {
                        thread::sleep(Duration::from_micros(200));
                    }
                })
            })
        })
        .collect();
    cmwq::debug_fail_worker_creation(true);
    for f in &fillers {
        assert!(wq.queue(f));
    }
    assert!(wq.queue(&a));
    assert!(wq.queue(&b));
    a.flush();
    cmwq::debug_fail_worker_creation(false);
    hold.store(1, Ordering::SeqCst);
    b.flush();
    wq.flush();
    assert_eq!(
        a_saw.load(Ordering::SeqCst),
        1,
        "MEM_RECLAIM queue made no progress while no worker could be created (no rescuer)"
    );
}

#[test]
fn unbound_attributes_on_a_bound_queue_are_refused_as_the_live_setters_refuse_them() {
    let _s = serial();
    type Set = fn(cmwq::WorkqueueBuilder) -> cmwq::WorkqueueBuilder;
    let cases: [(&str, Set); 4] = [
        ("cpumask", |b| b.cpumask(&[0])),
        ("nice", |b| b.nice(5)),
        ("affinity_scope", |b| {
            b.affinity_scope(cmwq::topology::Scope::Cpu)
        }),
        ("cache_shard_size", |b| b.cache_shard_size(4)),
    ];
    for (attr, set) in cases {
        let e = set(Workqueue::builder("err-bound-attr"))
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            Error::NotUnbound {
                name: "err-bound-attr".into(),
                attr
            }
        );
        assert!(e.to_string().contains(attr), "{e}");
    }
    // The live setter says the same.
    let wq = Workqueue::builder("err-bound-live").build().unwrap();
    assert!(matches!(
        wq.set_nice(5),
        Err(Error::NotUnbound { attr: "nice", .. })
    ));
}

#[test]
fn a_cache_shard_of_zero_cores_is_refused_everywhere() {
    let _s = serial();
    let e = Workqueue::builder("err-shard0")
        .unbound()
        .cache_shard_size(0)
        .build()
        .unwrap_err();
    assert_eq!(e, Error::InvalidCacheShardSize(0));
    assert!(e.to_string().contains("cache_shard_size 0"), "{e}");
    let wq = Workqueue::builder("err-shard0-live")
        .unbound()
        .build()
        .unwrap();
    assert_eq!(
        wq.set_cache_shard_size(0),
        Err(Error::InvalidCacheShardSize(0))
    );
    assert_eq!(
        wq.attrs().cache_shard_size,
        cmwq::topology::DEFAULT_CACHE_SHARD_SIZE
    );
}

#[test]
fn a_rescuer_queue_may_have_a_nul_in_its_name() {
    let _s = serial();
    // The rescuer's thread is named after the queue, and a thread name
    // cannot hold a NUL byte: the byte is left out of the thread's name.
    let wq = Workqueue::builder("nul\0name")
        .unbound()
        .mem_reclaim()
        .build()
        .expect("a name is a label: any string builds");
    assert_eq!(wq.name(), "nul\0name");
    runs_once_on(&wq);
}

/// Queues a counting item on `wq`, checks that it ran once, and returns it.
fn runs_once_on(wq: &Workqueue) -> Work {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    let w = Work::new(move || {
        n2.fetch_add(1, Ordering::SeqCst);
    });
    assert!(wq.queue(&w));
    w.flush();
    assert_eq!(n.load(Ordering::SeqCst), 1);
    w
}
