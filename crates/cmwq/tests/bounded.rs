//! Bounded workqueues (`max_queued`): the limit holds under many producers,
//! the `try_` calls hand back what they were given, a waiting producer wakes
//! when room frees, a pending `Work` takes no slot, and a call that would
//! wait for its own item is refused.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;

use cmwq::{Error, Work, Workqueue};
use common::wait_for;

/// An ordered queue bounded at `max`, held by a running job until the
/// returned sender sends (or is dropped), with `max` items waiting behind it.
fn full_queue(name: &str, max: usize) -> (Workqueue, mpsc::Sender<()>, cmwq::JoinHandle<()>) {
    let wq = Workqueue::builder(name)
        .ordered()
        .max_queued(max)
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    let gate = wq.spawn(move || {
        let _ = rx.recv();
    });
    // Once the gate runs (its slot given back), fill every slot.
    assert!(wait_for(|| wq.stats().started == 1));
    for _ in 0..max {
        assert!(wq.try_execute(|| ()).is_ok());
    }
    assert!(wq.try_execute(|| ()).is_err());
    (wq, tx, gate)
}

#[test]
fn max_queued_is_never_exceeded_under_8_producers() {
    const MAX: usize = 16;
    const PER: usize = 2_000;
    // One pwq (ordered): its `queued` and `started` are read together under
    // its pool lock, so their difference is what waits at that instant.
    let wq = Workqueue::builder("bounded-8")
        .ordered()
        .max_queued(MAX)
        .build()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let works: Vec<Work> = (0..8)
        .map(|_| {
            let ran = ran.clone();
            Work::new(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let worst = Arc::new(AtomicUsize::new(0));
    let watcher = {
        let (wq, stop, worst) = (wq.clone(), stop.clone(), worst.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let st = wq.stats();
                let waiting = (st.queued - st.started) as usize;
                worst.fetch_max(waiting, Ordering::SeqCst);
            }
        })
    };
    let queued_works = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..8)
        .map(|p| {
            let (wq, ran, w, qw) = (
                wq.clone(),
                ran.clone(),
                works[p].clone(),
                queued_works.clone(),
            );
            thread::spawn(move || {
                for i in 0..PER {
                    match i % 3 {
                        0 => {
                            let ran = ran.clone();
                            wq.execute(move || {
                                ran.fetch_add(1, Ordering::SeqCst);
                            });
                        }
                        1 => {
                            let ran = ran.clone();
                            drop(wq.spawn(move || {
                                ran.fetch_add(1, Ordering::SeqCst);
                            }));
                        }
                        _ => {
                            if wq.queue(&w) {
                                qw.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    wq.flush();
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    let st = wq.stats();
    let jobs = 8 * PER - 8 * (PER / 3);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        jobs + queued_works.load(Ordering::SeqCst),
        "every accepted item ran once"
    );
    assert!(
        worst.load(Ordering::SeqCst) <= MAX,
        "{} waited",
        worst.load(Ordering::SeqCst)
    );
    assert!(st.waiting_peak as usize <= MAX, "{st:?}");
    assert_eq!(st.max_queued, Some(MAX as u64));
    assert!(
        st.queue_full > 0,
        "eight producers never found it full: {st:?}"
    );
    assert!(st.waiting_peak as usize >= MAX / 2, "{st:?}");
    assert_eq!(wq.max_queued(), Some(MAX));
}

#[test]
fn try_calls_hand_the_closure_or_work_back_when_full() {
    let (wq, tx, gate) = full_queue("bounded-try", 2);
    let back = wq.try_spawn(|| 41 + 1).unwrap_err().into_inner();
    assert_eq!(back(), 42);
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let back = wq
        .try_execute(move || f.store(true, Ordering::SeqCst))
        .unwrap_err()
        .into_inner();
    back();
    assert!(
        flag.load(Ordering::SeqCst),
        "the closure came back runnable"
    );
    let w = Work::new(|| {});
    let err = wq.try_queue(&w).unwrap_err();
    assert!(std::ptr::eq(err.into_inner(), &w));
    assert!(!w.is_pending(), "a refused try_queue leaves the work idle");
    assert!(err_text(&wq).contains("max_queued"));
    assert!(wq.stats().queue_full >= 3);
    tx.send(()).unwrap();
    gate.join().unwrap();
    wq.flush();
    // Room again: the same calls go through.
    assert_eq!(wq.try_spawn(|| 7).ok().unwrap().join().unwrap(), 7);
    assert_eq!(wq.try_queue(&w).ok(), Some(true));
    w.flush();
}

fn err_text(wq: &Workqueue) -> String {
    match wq.try_execute(|| ()) {
        Err(e) => e.to_string(),
        Ok(_) => "room".into(),
    }
}

#[test]
fn a_pending_work_takes_no_slot_and_cancel_gives_its_slot_back() {
    let (wq, tx, gate) = full_queue("bounded-pending", 1);
    // The queue is full; `w` is not pending: it cannot get in.
    let w = Work::new(|| {});
    assert!(wq.try_queue(&w).is_err());
    tx.send(()).unwrap();
    gate.join().unwrap();
    wq.flush();
    // Hold the queue again with `w` waiting in the one slot.
    let (tx, rx) = mpsc::channel::<()>();
    let gate = wq.spawn(move || {
        let _ = rx.recv();
    });
    assert!(wait_for(|| wq.stats().started >= 3));
    assert!(wq.queue(&w), "one slot free");
    // Already pending: false at once, from a full queue, with no wait.
    let (wq2, w2) = (wq.clone(), w.clone());
    let again = thread::spawn(move || (wq2.queue(&w2), wq2.try_queue(&w2).ok()));
    assert!(
        wait_for(|| again.is_finished()),
        "queue of a pending work waited for room"
    );
    let (q, t) = again.join().unwrap();
    assert!(!q && t == Some(false));
    // Cancel takes `w` off the list and gives its slot back.
    assert!(w.cancel());
    assert!(
        wq.try_execute(|| ()).is_ok(),
        "the cancelled item's slot is free"
    );
    tx.send(()).unwrap();
    gate.join().unwrap();
    wq.flush();
}

#[test]
fn a_blocked_spawn_wakes_when_room_frees() {
    let (wq, tx, gate) = full_queue("bounded-wait", 1);
    let full_before = wq.stats().queue_full;
    let done = Arc::new(AtomicBool::new(false));
    let (wq2, d) = (wq.clone(), done.clone());
    let producer = thread::spawn(move || {
        let h = wq2.spawn(|| 5);
        d.store(true, Ordering::SeqCst);
        h.join().unwrap()
    });
    // It found the queue full and waits (a count, never a duration).
    assert!(wait_for(|| wq.stats().queue_full > full_before));
    for _ in 0..50 {
        thread::sleep(std::time::Duration::from_millis(1));
        assert!(
            !done.load(Ordering::SeqCst),
            "spawn returned while the queue was full"
        );
    }
    // The gate finishes, the waiting item starts: room for the producer.
    tx.send(()).unwrap();
    assert!(
        wait_for(|| producer.is_finished()),
        "the waiting spawn was not woken"
    );
    assert_eq!(producer.join().unwrap(), 5);
    gate.join().unwrap();
}

#[test]
fn a_full_queue_refuses_its_own_items_calls_that_would_wait_for_themselves() {
    let wq = Workqueue::builder("bounded-self")
        .unbound()
        .max_active(1)
        .max_queued(1)
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let (wq2, s) = (wq.clone(), seen.clone());
    let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    let h = wq.spawn(move || {
        // Take the one slot: the queue is full from here on.
        assert!(wq2.try_execute(|| ()).is_ok());
        let text = |r: std::thread::Result<()>| match r {
            Ok(()) => "returned".to_string(),
            Err(p) => p
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "?".into()),
        };
        let mut s = s.lock().unwrap();
        let q = wq2.clone();
        s.push(text(std::panic::catch_unwind(
            std::panic::AssertUnwindSafe(move || drop(q.spawn(|| ()))),
        )));
        let q = wq2.clone();
        s.push(text(std::panic::catch_unwind(
            std::panic::AssertUnwindSafe(move || {
                q.execute(|| ());
            }),
        )));
        let q = wq2.clone();
        let w = Work::new(|| {});
        s.push(text(std::panic::catch_unwind(
            std::panic::AssertUnwindSafe(move || {
                q.queue(&w);
            }),
        )));
        match wq2.spawn_on(cpu, || ()) {
            Err(e) => s.push(format!("{e:?}")),
            Ok(_) => s.push("spawn_on returned a handle".into()),
        }
        // The try_ form is the way from inside: it fails fast.
        s.push(format!("{:?}", wq2.try_execute(|| ()).is_err()));
    });
    // Bounded: a call that waits for its own item would hang here.
    assert!(
        wait_for(|| h.is_finished()),
        "the item hangs: a call waited for room only it could free"
    );
    h.join().unwrap();
    wq.flush();
    let seen = seen.lock().unwrap();
    for (i, call) in ["Workqueue::spawn", "Workqueue::execute", "Workqueue::queue"]
        .iter()
        .enumerate()
    {
        assert!(
            seen[i].contains(call) && seen[i].contains("from one of its own items"),
            "{seen:?}"
        );
    }
    assert!(
        seen[3].contains("FullFromOwnItem") && seen[3].contains("spawn_on"),
        "{seen:?}"
    );
    assert_eq!(seen[4], "true");
    assert!(matches!(
        Workqueue::builder("bounded-zero").max_queued(0).build(),
        Err(Error::InvalidMaxQueued(0))
    ));
}

#[test]
fn an_unbounded_queue_takes_every_try_call() {
    let wq = Workqueue::builder("unbounded-try")
        .unbound()
        .build()
        .unwrap();
    assert_eq!(wq.max_queued(), None);
    assert_eq!(wq.try_spawn(|| 3).ok().unwrap().join().unwrap(), 3);
    assert_eq!(wq.try_execute(|| ()).ok(), Some(true));
    let w = Work::new(|| {});
    assert_eq!(wq.try_queue(&w).ok(), Some(true));
    wq.flush();
    let st = wq.stats();
    assert_eq!(
        (st.max_queued, st.queue_full, st.waiting_peak),
        (None, 0, 0)
    );
}
