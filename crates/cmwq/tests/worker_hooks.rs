//! Worker lifecycle: start and exit hooks (once per worker, workers started
//! later and rescuers included, a panicking hook contained), and the names
//! worker threads carry.
//!
//! Hooks are process-wide, so each hook test runs in a child process of its
//! own (`common::run_child`); the parent sets none.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use cmwq::{WorkerHooks, WorkerInfo, Workqueue, set_worker_hooks, worker_hook_panics};
use common::wait_for;

/// What the hooks saw: (thread id, the thread's own name, the info).
type Seen = Arc<Mutex<Vec<(i32, Option<String>, WorkerInfo)>>>;

fn recording() -> (Seen, Seen, WorkerHooks) {
    let (starts, exits): (Seen, Seen) = Default::default();
    let (s, e) = (starts.clone(), exits.clone());
    let hooks = WorkerHooks::new()
        .on_start(move |w| {
            let me = std::thread::current();
            s.lock()
                .unwrap()
                .push((common::gettid(), me.name().map(String::from), w.clone()));
        })
        .on_exit(move |w| {
            let me = std::thread::current();
            e.lock()
                .unwrap()
                .push((common::gettid(), me.name().map(String::from), w.clone()));
        });
    (starts, exits, hooks)
}

/// Thread ids in `seen`, each counted.
fn tids(seen: &Seen) -> HashMap<i32, usize> {
    let mut m = HashMap::new();
    for (tid, _, _) in seen.lock().unwrap().iter() {
        *m.entry(*tid).or_insert(0) += 1;
    }
    m
}

/// Runs `n` jobs on `wq` at once: each says it blocks and waits for the
/// others, so the pool must have `n` workers running them together.
fn at_once(wq: &Workqueue, n: usize) -> Vec<i32> {
    let all = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let all = all.clone();
            wq.spawn(move || {
                cmwq::blocking(|| all.wait());
                common::gettid()
            })
        })
        .collect();
    // Bounded, so a pool that stopped serving fails the test instead of
    // hanging it (exiting: the queue's drop would wait for the jobs).
    if !wait_for(|| handles.iter().all(|h| h.is_finished())) {
        eprintln!("{n} jobs never ran together: the pool stopped starting workers");
        std::process::exit(3);
    }
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn hooks_child() {
    if std::env::var_os("CMWQ_TEST_HOOKS").is_none() {
        return;
    }
    let (starts, exits, hooks) = recording();
    set_worker_hooks(hooks);
    let wq = Workqueue::builder("hooked").unbound().build().unwrap();
    let first = wq.spawn(common::gettid).join().unwrap();
    let before = starts.lock().unwrap().len();
    // Workers started later: four items that run at once need four workers.
    let ran = at_once(&wq, 4);
    let later = starts.lock().unwrap().len();
    assert!(later >= 4 && later > before, "{before} then {later} starts");
    // Every thread that ran an item started with the hooks, once.
    let started = tids(&starts);
    for tid in ran.iter().chain([&first]) {
        assert_eq!(started.get(tid), Some(&1), "worker {tid}: {started:?}");
    }
    assert!(started.values().all(|&n| n == 1), "{started:?}");
    // The start hook runs on the worker itself, and the info says what it serves.
    let pools: Vec<u32> = {
        let (cpu, dfl) = wq.cpu_pools();
        cpu.into_iter().flatten().chain(dfl).collect()
    };
    for (_, name, w) in starts.lock().unwrap().iter() {
        assert_eq!(name.as_deref(), Some(w.name.as_str()));
        assert!(w.name.starts_with("cmwq/u"), "{w:?}");
        assert!(
            w.pool.is_some_and(|p| pools.contains(&p)),
            "{w:?} {pools:?}"
        );
        assert!(!w.bound && w.cpu.is_none() && w.rescuer.is_none() && !w.cpus.is_empty());
    }
    // A rescuer: one start on its own thread, named after its queue.
    let reclaim = Workqueue::builder("hooked-r")
        .unbound()
        .mem_reclaim()
        .build()
        .unwrap();
    let rtid = reclaim.rescuer_tid().expect("a rescuer");
    assert!(wait_for(|| tids(&starts).contains_key(&rtid)));
    let r = starts
        .lock()
        .unwrap()
        .iter()
        .find(|s| s.0 == rtid)
        .cloned()
        .unwrap();
    assert_eq!(r.2.rescuer.as_deref(), Some("hooked-r"));
    assert_eq!(r.2.name, "cmwq-r/hooked-r");
    assert_eq!(r.1.as_deref(), Some("cmwq-r/hooked-r"));
    assert_eq!(r.2.pool, None);
    // Its queue's destroy stops the rescuer: its exit hook has run.
    drop(reclaim);
    assert_eq!(tids(&exits).get(&rtid), Some(&1));
    // Letting the queues go lets their pools' workers exit: each runs its
    // exit hook once, on itself, and only workers that started do.
    drop(wq);
    assert!(
        wait_for(|| tids(&exits) == tids(&starts)),
        "starts {:?} exits {:?}",
        tids(&starts),
        tids(&exits)
    );
    for (tid, name, w) in exits.lock().unwrap().iter() {
        assert_eq!(name.as_deref(), Some(w.name.as_str()), "exit of {tid}");
    }
    assert_eq!(worker_hook_panics(), 0);
    println!("HOOKS-OK");
}

#[test]
fn hooks_run_once_per_worker_start_and_exit_including_later_workers_and_rescuers() {
    let out = common::run_child("hooks_child", &[("CMWQ_TEST_HOOKS", "1")], &[]);
    assert!(out.contains("HOOKS-OK"), "{out}");
}

#[test]
fn late_and_panicking_child() {
    if std::env::var_os("CMWQ_TEST_HOOKS_PANIC").is_none() {
        return;
    }
    // A worker started before any hook runs neither hook.
    let wq = Workqueue::builder("late").unbound().build().unwrap();
    let early = wq.spawn(common::gettid).join().unwrap();
    let (starts, exits) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, e) = (starts.clone(), exits.clone());
    set_worker_hooks(
        WorkerHooks::new()
            .on_start(move |_| {
                s.fetch_add(1, Ordering::SeqCst);
                panic!("start hook fails on purpose");
            })
            .on_exit(move |_| {
                e.fetch_add(1, Ordering::SeqCst);
                panic!("exit hook fails on purpose");
            }),
    );
    // New workers start with the panicking hooks and still run items.
    // (The pool had a few workers before: the one that ran `early`'s job
    // and the spares the manager keeps; six at once need more.)
    let ran = at_once(&wq, 6);
    assert!(
        starts.load(Ordering::SeqCst) >= 1,
        "no worker started after the hooks"
    );
    let n = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        let n = n.clone();
        wq.execute(move || {
            n.fetch_add(1, Ordering::SeqCst);
        });
    }
    wq.flush();
    assert_eq!(n.load(Ordering::SeqCst), 100, "the pool works on");
    assert_eq!(ran.len(), 6);
    drop(wq);
    // The pool's workers exit. Each hooked one runs its (panicking) exit
    // hook once; the early one, started before the hooks, runs none (an
    // exit without a start would keep `exits` above `starts`).
    let gone = |tid: i32| !std::path::Path::new(&format!("/proc/self/task/{tid}")).exists();
    assert!(
        wait_for(|| gone(early) && ran.iter().all(|&t| gone(t))),
        "the workers exit with their pool"
    );
    assert!(wait_for(
        || exits.load(Ordering::SeqCst) == starts.load(Ordering::SeqCst)
    ));
    let hooked = starts.load(Ordering::SeqCst);
    assert!(wait_for(|| worker_hook_panics() as usize == 2 * hooked));
    println!("PANIC-HOOKS-OK {hooked}");
}

#[test]
fn hooks_set_late_apply_to_later_workers_and_a_panicking_hook_is_contained() {
    let out = common::run_child(
        "late_and_panicking_child",
        &[("CMWQ_TEST_HOOKS_PANIC", "1")],
        &[],
    );
    assert!(out.contains("PANIC-HOOKS-OK"), "{out}");
    assert!(
        out.contains("cmwq: the worker start hook panicked on cmwq/u")
            && out.contains("start hook fails on purpose; the worker goes on"),
        "{out}"
    );
    assert!(
        out.contains("cmwq: the worker exit hook panicked on cmwq/u"),
        "{out}"
    );
}

#[test]
fn worker_names_say_what_they_serve() {
    // A bound queue's worker is named after its CPU; a high-priority one ends in H.
    let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    for (wq, suffix) in [
        (Workqueue::builder("names-b").build().unwrap(), ""),
        (
            Workqueue::builder("names-h").highpri().build().unwrap(),
            "H",
        ),
    ] {
        let name = wq
            .spawn_on(cpu, || std::thread::current().name().map(String::from))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        let rest = name
            .strip_prefix(&format!("cmwq/{cpu}:"))
            .unwrap_or_else(|| panic!("{name} on CPU {cpu}"));
        let idx = rest
            .strip_suffix(suffix)
            .unwrap_or_else(|| panic!("{name}"));
        assert!(idx.parse::<usize>().is_ok(), "{name}");
        assert!(name.len() <= 15);
    }
    // An unbound queue's worker is named after its pool.
    let wq = Workqueue::builder("names-u").unbound().build().unwrap();
    let name = wq
        .spawn(|| std::thread::current().name().map(String::from))
        .join()
        .unwrap()
        .unwrap();
    let (cpu_pools, dfl) = wq.cpu_pools();
    let pool: u32 = name
        .strip_prefix("cmwq/u")
        .and_then(|r| r.split(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{name}"));
    assert!(
        cpu_pools.iter().flatten().chain(&dfl).any(|&p| p == pool),
        "{name}: {cpu_pools:?} {dfl:?}"
    );
}
