//! Unannotated blocking (issue 32): a worker that sleeps in its item without
//! `cmwq::blocking` leaves `nr_running` within a bounded number of the
//! watchdog's looks while its pool has waiting work, whether it sleeps, waits
//! for a contended mutex or reads a pipe; a CPU-bound worker that is only
//! preempted keeps its place; and a sleeper that wakes counts again.
//!
//! Each test runs with the process's default detector (the `/proc` sampler
//! finds a pool's first sleeper, then its workers' switch records), and again
//! in child processes with `CMWQ_BLOCK_DETECT=proc` (the sampler alone, where
//! `perf_event_open` is refused) and `CMWQ_BLOCK_DETECT=switch` (switch
//! records from the start).
//! The tests share the process-wide watchdog and bound pools, so they run
//! one at a time.

mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use cmwq::{BlockDetection, Work, Workqueue};

static SERIAL: Mutex<()> = Mutex::new(());

/// Set in the child process that runs a test under the `/proc` sampler.
const CHILD: &str = "CMWQ_ENGINE_SLEEP_CHILD";

use common::wait_for;

/// The scheduler state letter of thread `tid` of this process.
fn state_of(tid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    s[s.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Runs `name` again in child processes, once under the `/proc` sampler alone
/// and once with switch records from every worker's start (from the parent
/// only), and asserts it passed there.
fn also_under_the_other_detectors(name: &str) {
    if let Some(mode) = std::env::var_os(CHILD) {
        let want = if mode == "proc" {
            BlockDetection::ProcSampler
        } else {
            BlockDetection::SwitchRecords
        };
        let got = cmwq::block_detection();
        // Where perf_event_open is refused, switch falls back to /proc.
        assert!(got == want || got == BlockDetection::ProcSampler, "{got:?}");
        return;
    }
    for mode in ["proc", "switch"] {
        common::run_child(name, &[(CHILD, mode), ("CMWQ_BLOCK_DETECT", mode)], &[]);
    }
}

/// The bound pool of `cpu` at nice 0: its counted running workers.
fn running_on(cpu: usize) -> usize {
    cmwq::snapshot()
        .pools
        .iter()
        .filter(|p| p.cpu == Some(cpu) && p.nice == 0 && p.policy == "other")
        .map(|p| p.running)
        .sum()
}

/// How an item blocks until the next item releases it.
enum Block {
    Sleep(Arc<AtomicBool>),
    Mutex(Arc<Mutex<()>>, Arc<AtomicBool>),
    Pipe(std::io::PipeReader, std::io::PipeWriter),
}

/// Item A blocks without saying so; item B, queued behind it on the same CPU
/// once A sleeps, is what ends the block. B runs only if A left `nr_running`.
fn blocked_item_lets_the_next_run(kind: &str) {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
    let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    let wq = Workqueue::builder(&format!("sleep-{kind}"))
        .build()
        .unwrap();
    let (block, release): (Block, Box<dyn FnOnce() + Send>) = match kind {
        "sleep" => {
            let f = Arc::new(AtomicBool::new(false));
            let g = f.clone();
            (
                Block::Sleep(f),
                Box::new(move || g.store(true, Ordering::SeqCst)),
            )
        }
        "mutex" => {
            // The test thread holds the lock until B has run.
            let m = Arc::new(Mutex::new(()));
            let b_ran = Arc::new(AtomicBool::new(false));
            let r = b_ran.clone();
            (
                Block::Mutex(m, b_ran),
                Box::new(move || r.store(true, Ordering::SeqCst)),
            )
        }
        _ => {
            let (r, w) = std::io::pipe().unwrap();
            let w2 = w.try_clone().unwrap();
            (
                Block::Pipe(r, w),
                Box::new(move || {
                    let mut w2 = w2;
                    w2.write_all(b"x").unwrap();
                }),
            )
        }
    };
    let tid = Arc::new(AtomicI32::new(0));
    let released_by_b = Arc::new(AtomicBool::new(false));
    let (t, rb) = (tid.clone(), released_by_b.clone());
    let mut held = None;
    let a_block = match block {
        Block::Sleep(f) => Box::new(move || {
            for _ in 0..20_000 {
                if f.load(Ordering::SeqCst) {
                    return true;
                }
                thread::sleep(Duration::from_millis(1));
            }
            false
        }) as Box<dyn FnOnce() -> bool + Send>,
        Block::Mutex(m, b_ran) => {
            held = Some(m.clone());
            Box::new(move || {
                let _g = m.lock().unwrap();
                b_ran.load(Ordering::SeqCst)
            })
        }
        Block::Pipe(mut r, w) => {
            // Keep a writer open in the item so the read cannot see EOF.
            Box::new(move || {
                let _w = w;
                let mut buf = [0u8; 1];
                r.read_exact(&mut buf).is_ok()
            })
        }
    };
    let a_block = Mutex::new(Some(a_block));
    let a = Work::new(move || {
        t.store(common::gettid(), Ordering::SeqCst);
        let f = a_block.lock().unwrap().take().unwrap();
        rb.store(f(), Ordering::SeqCst);
    });
    let release = Mutex::new(Some(release));
    let b_looks = Arc::new(AtomicU64::new(0));
    let b_ran = Arc::new(AtomicBool::new(false));
    let (bl, br) = (b_looks.clone(), b_ran.clone());
    let b = Work::new(move || {
        bl.store(cmwq::watchdog_looks(), Ordering::SeqCst);
        br.store(true, Ordering::SeqCst);
        if let Some(r) = release.lock().unwrap().take() {
            r();
        }
    });
    // The mutex case: the test thread holds the lock while A waits for it.
    let guard = held.as_ref().map(|m| m.lock().unwrap());
    assert_eq!(wq.queue_on(cpu, &a), Ok(true));
    assert!(
        wait_for(|| {
            let t = tid.load(Ordering::SeqCst);
            t != 0 && matches!(state_of(t), Some('S' | 'D'))
        }),
        "{kind}: item A never blocked"
    );
    let looks_before = cmwq::watchdog_looks();
    assert_eq!(wq.queue_on(cpu, &b), Ok(true));
    // B ran while A was blocked: in the mutex case B's run is what lets the
    // test thread drop the lock.
    if let Some(g) = guard {
        assert!(
            wait_for(|| b_ran.load(Ordering::SeqCst)),
            "{kind}: B never ran while A waited for the mutex"
        );
        drop(g);
    }
    a.flush();
    b.flush();
    assert!(
        released_by_b.load(Ordering::SeqCst),
        "{kind}: A's block ended without B (B could not run while A blocked)"
    );
    let looks = b_looks.load(Ordering::SeqCst).saturating_sub(looks_before);
    assert!(
        looks <= 50,
        "{kind}: B started {looks} looks after it was queued behind a sleeper"
    );
    let st = wq.stats();
    assert!(st.sampled >= 1, "{kind}: {st:?}");
    cmwq::set_cpu_intensive_thresh(Duration::from_millis(10));
}

#[test]
fn an_unannotated_sleep_lets_the_next_item_run() {
    blocked_item_lets_the_next_run("sleep");
    also_under_the_other_detectors("an_unannotated_sleep_lets_the_next_item_run");
}

#[test]
fn a_contended_mutex_lets_the_next_item_run() {
    blocked_item_lets_the_next_run("mutex");
    also_under_the_other_detectors("a_contended_mutex_lets_the_next_item_run");
}

#[test]
fn a_pipe_read_lets_the_next_item_run() {
    blocked_item_lets_the_next_run("pipe");
    also_under_the_other_detectors("a_pipe_read_lets_the_next_item_run");
}

/// A CPU-bound item that another thread on its CPU keeps preempting is
/// runnable, not blocked: it keeps its place in `nr_running`, so the item
/// behind it waits for it (as in the kernel, where only a sleep calls
/// `wq_worker_sleeping`).
#[test]
fn a_preempted_cpu_bound_worker_keeps_its_place() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
    let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    let wq = Workqueue::builder("sleep-preempted").build().unwrap();
    // A competitor pinned to the same CPU: the item shares it and is
    // preempted many times while it spins.
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let hog = thread::spawn(move || {
        common::set_affinity(&[cpu]).unwrap();
        while !st.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    let first_done = Arc::new(AtomicBool::new(false));
    let second_saw_first_done = Arc::new(AtomicBool::new(false));
    let spins = Arc::new(AtomicU64::new(0));
    let (fd, sp) = (first_done.clone(), spins.clone());
    // Spins for about 300 ms of wall time (a bounded count of clock reads).
    let spinner = Work::new(move || {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_millis(300) {
            sp.fetch_add(1, Ordering::Relaxed);
            std::hint::spin_loop();
        }
        fd.store(true, Ordering::SeqCst);
    });
    let (fd2, saw) = (first_done.clone(), second_saw_first_done.clone());
    let second = Work::new(move || saw.store(fd2.load(Ordering::SeqCst), Ordering::SeqCst));
    assert_eq!(wq.queue_on(cpu, &spinner), Ok(true));
    assert!(wait_for(|| spins.load(Ordering::Relaxed) > 0));
    assert_eq!(wq.queue_on(cpu, &second), Ok(true));
    wq.flush();
    stop.store(true, Ordering::Relaxed);
    hog.join().unwrap();
    cmwq::set_cpu_intensive_thresh(Duration::from_millis(10));
    assert!(
        second_saw_first_done.load(Ordering::SeqCst),
        "the item behind a preempted (runnable) worker ran before it finished"
    );
    assert_eq!(
        wq.stats().sampled,
        0,
        "a preempted worker was taken for a sleeper"
    );
    drop(wq);
    also_under_the_other_detectors("a_preempted_cpu_bound_worker_keeps_its_place");
}

/// A worker taken out of `nr_running` for a sleep counts again once it is
/// seen running (the kernel's `wq_worker_running`), not only when its item
/// ends.
#[test]
fn a_sleeper_that_wakes_counts_again() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
    let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    let wq = Workqueue::builder("sleep-wakes").build().unwrap();
    let wake = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let awake = Arc::new(AtomicBool::new(false));
    let (w, s, aw) = (wake.clone(), stop.clone(), awake.clone());
    // Sleeps until told, then spins (runnable, on a CPU) until told to stop.
    let a = Work::new(move || {
        for _ in 0..20_000 {
            if w.load(Ordering::SeqCst) {
                break;
            }
            thread::sleep(Duration::from_millis(1));
        }
        aw.store(true, Ordering::SeqCst);
        let t0 = std::time::Instant::now();
        while !s.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(20) {
            std::hint::spin_loop();
        }
    });
    let b_ran = Arc::new(AtomicBool::new(false));
    let br = b_ran.clone();
    let b = Work::new(move || br.store(true, Ordering::SeqCst));
    assert_eq!(wq.queue_on(cpu, &a), Ok(true));
    thread::sleep(Duration::from_millis(5));
    assert_eq!(wq.queue_on(cpu, &b), Ok(true));
    // B runs: A was taken out for its sleep.
    assert!(wait_for(|| b_ran.load(Ordering::SeqCst)), "B never ran");
    wake.store(true, Ordering::SeqCst);
    assert!(wait_for(|| awake.load(Ordering::SeqCst)));
    // A spins now, the only busy worker of the pool (B's is idle again):
    // the looks see it running and it counts again; without that the pool
    // would show no running worker until A's item ends.
    b.flush();
    let counted = wait_for(|| running_on(cpu) == 1);
    stop.store(true, Ordering::SeqCst);
    wq.flush();
    cmwq::set_cpu_intensive_thresh(Duration::from_millis(10));
    assert!(
        counted,
        "the woken sleeper never counted in nr_running again"
    );
    drop(wq);
    also_under_the_other_detectors("a_sleeper_that_wakes_counts_again");
}

/// Short sleeps (2 ms, a read from a slow disk) each end long before the
/// next 10 ms tick: the sampler must find them while work waits anyway, so
/// a pool of such items is seen to block and its workers get their switch
/// records. Run in a child process of its own, where no earlier test has
/// taught the CPU's pool that its items block.
#[test]
fn short_sleeps_are_found_while_work_waits() {
    if !common::in_own_process(
        "short_sleeps_are_found_while_work_waits",
        "CMWQ_SLEEP_SHORT_CHILD",
    ) {
        return;
    }
    let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    let wq = Workqueue::builder("sleep-short").build().unwrap();
    // 300 items of 2 ms sleep each, all queued at once: work always waits.
    let items: Vec<Work> = (0..300)
        .map(|_| Work::new(|| thread::sleep(Duration::from_millis(2))))
        .collect();
    for w in &items {
        assert_eq!(wq.queue_on(cpu, w), Ok(true));
    }
    wq.flush();
    let st = wq.stats();
    assert!(
        st.sampled >= 1,
        "300 items that sleep 2 ms behind each other were never seen asleep: {st:?}"
    );
}

/// A gate items wait at, in a futex sleep with no wakeup until it opens.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut g = self.open.lock().unwrap();
        while !*g {
            g = self.cv.wait(g).unwrap();
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

/// How many sleepers the burst tests queue at once.
const BURST: usize = 24;

/// Runs test `name` in a child process per detector (the default, `/proc`
/// alone, switch records from the start); in the child, returns the mode
/// and the CPU to queue on, with the CPU-intensive threshold out of the
/// way (the bursts spin and sleep, and must stay counted as they do).
fn per_detector(name: &str) -> Option<(String, usize)> {
    const CHILD_MODE: &str = "CMWQ_SLEEP_BURST_CHILD";
    if let Some(mode) = std::env::var_os(CHILD_MODE) {
        cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
        let cpu = cmwq::topology::sched_affinity().unwrap()[0];
        return Some((mode.to_string_lossy().into_owned(), cpu));
    }
    for mode in ["auto", "proc", "switch"] {
        common::run_child(
            name,
            &[(CHILD_MODE, mode), ("CMWQ_BLOCK_DETECT", mode)],
            &[],
        );
    }
    None
}

/// Items that wait at a gate, counting their starts.
struct Sleepers {
    gate: Arc<Gate>,
    started: Arc<AtomicU64>,
}

impl Sleepers {
    fn new() -> Sleepers {
        Sleepers {
            gate: Arc::new(Gate::default()),
            started: Arc::new(AtomicU64::new(0)),
        }
    }

    fn item(&self) -> Work {
        let (g, s) = (self.gate.clone(), self.started.clone());
        Work::new(move || {
            s.fetch_add(1, Ordering::SeqCst);
            g.wait();
        })
    }

    fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }
}

/// Queues a sleeper on `cpu` and, once it started, an item behind it:
/// returns when that item ran, that is when the watchdog saw the sleep
/// (the pool now knows that its items sleep). The sleeper sleeps on.
fn first_sleep_seen(wq: &Workqueue, cpu: usize, s: &Sleepers, mode: &str) -> Work {
    let first = s.item();
    let b_ran = Arc::new(AtomicBool::new(false));
    let br = b_ran.clone();
    let b = Work::new(move || br.store(true, Ordering::SeqCst));
    let before = s.started();
    assert_eq!(wq.queue_on(cpu, &first), Ok(true));
    assert!(wait_for(|| s.started() == before + 1));
    assert_eq!(wq.queue_on(cpu, &b), Ok(true));
    assert!(
        wait_for(|| b_ran.load(Ordering::SeqCst)),
        "{mode}: the first sleeper was never seen"
    );
    b.flush();
    first
}

/// Queues [`BURST`] sleepers at once on `cpu` and asserts that they all
/// start, most of them taken over by the worker that comes up behind the
/// one before (`cmwq::sleeper_takeovers`): with nothing queued after them,
/// the only other way past a sleeper is the watchdog's look. Its looks
/// between ticks are paused meanwhile (a slow CPU, a debug build, made
/// them race the chain and win), so it looks every 10 ms: a chain that
/// breaks (a worker that looked before the one it waited behind reached its
/// sleep) goes on after a tick. A quarter is far below what a chain makes
/// and far above what ticks alone make (none). Opens the gate before it
/// returns.
fn burst_is_taken_over(wq: &Workqueue, cpu: usize, s: &Sleepers, mode: &str, what: &str) {
    // The burst is queued behind an item that spins until it is all in:
    // a queue that found a worker asleep would wake one itself (with
    // records on, that is the queue path's look), which is not under test.
    let (spinning, queued) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (sp, q) = (spinning.clone(), queued.clone());
    let spinner = Work::new(move || {
        sp.store(true, Ordering::SeqCst);
        while !q.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
    });
    assert_eq!(wq.queue_on(cpu, &spinner), Ok(true));
    assert!(wait_for(|| spinning.load(Ordering::SeqCst)));
    cmwq::debug_pause_looks(true);
    let (takeovers, before) = (cmwq::sleeper_takeovers(), s.started());
    let burst: Vec<Work> = (0..BURST).map(|_| s.item()).collect();
    for w in &burst {
        assert_eq!(wq.queue_on(cpu, w), Ok(true));
    }
    queued.store(true, Ordering::SeqCst);
    let all = wait_for(|| s.started() == before + BURST as u64);
    let took = cmwq::sleeper_takeovers() - takeovers;
    let n = s.started() - before;
    cmwq::debug_pause_looks(false);
    s.gate.open();
    wq.flush();
    assert!(
        all,
        "{mode}: {n} of {BURST} sleepers queued at once {what} started"
    );
    assert!(
        took >= BURST as u64 / 4,
        "{mode}: of {BURST} sleepers queued at once {what}, {took} were taken over by the next worker"
    );
}

/// Items that block one after another, queued at once into a pool that
/// has no idle worker yet: each worker that comes up (the manager rule
/// starts the next as the last idle one leaves) finds the lane behind a
/// counted worker that sleeps, takes its items over and starts the next.
/// Before it, one item started per look (300 such items queued at once
/// took 300 ms to start). The pool is an unbound one that was seen to
/// block, let go and revived (as `cmwq mix` makes one per run): it keeps
/// knowing that its items sleep, and starts with no worker. Under each
/// detector: the default (the first workers read through `/proc` while
/// switch tracking comes on, the later ones through their probes), `/proc`
/// alone, and switch records from the start.
#[test]
fn a_burst_of_sleepers_starts_workers_that_take_over() {
    let Some((mode, cpu)) = per_detector("a_burst_of_sleepers_starts_workers_that_take_over")
    else {
        return;
    };
    // A child process of its own: every item is queued from this CPU.
    common::set_affinity(&[cpu]).unwrap();
    let s = Sleepers::new();
    let wq = Workqueue::builder("sleep-burst-a")
        .unbound()
        .build()
        .unwrap();
    let first = first_sleep_seen(&wq, cpu, &s, &mode);
    s.gate.open();
    first.flush();
    drop(wq);
    // Let go: its workers leave. The same attributes revive it, empty.
    assert!(
        wait_for(|| cmwq::snapshot()
            .pools
            .iter()
            .filter(|p| p.cpu.is_none() && p.lane_cpu == Some(cpu))
            .all(|p| p.workers == 0)),
        "{mode}: the released pool kept its workers"
    );
    let s = Sleepers::new();
    let wq = Workqueue::builder("sleep-burst-b")
        .unbound()
        .build()
        .unwrap();
    burst_is_taken_over(&wq, cpu, &s, &mode, "into a pool with no worker");
}

/// The same burst into a pool that has idle workers (nobody starts one):
/// a worker that starts an item with more behind it, in a pool whose items
/// sleep, wakes an idle one as its standby, which takes over when the item
/// sleeps and, starting the next item, wakes the next standby. Before it,
/// one item started per look.
#[test]
fn a_burst_of_sleepers_wakes_idle_workers_that_take_over() {
    let Some((mode, cpu)) = per_detector("a_burst_of_sleepers_wakes_idle_workers_that_take_over")
    else {
        return;
    };
    let wq = Workqueue::builder("sleep-burst-warm").build().unwrap();
    let s = Sleepers::new();
    let first = first_sleep_seen(&wq, cpu, &s, &mode);
    // A first burst leaves a worker per sleeper behind, idle, once the
    // gate opens (a pool keeps its idle workers for the idle timeout).
    burst_is_taken_over(&wq, cpu, &s, &mode, "into a pool with no idle worker");
    first.flush();
    let idle = || {
        cmwq::snapshot()
            .pools
            .iter()
            .filter(|p| p.cpu == Some(cpu) && p.nice == 0 && p.policy == "other")
            .map(|p| p.idle)
            .sum::<usize>()
    };
    assert!(
        wait_for(|| idle() > BURST),
        "{mode}: {} idle workers after the first burst",
        idle()
    );
    let s = Sleepers::new();
    let _first = first_sleep_seen(&wq, cpu, &s, &mode);
    burst_is_taken_over(&wq, cpu, &s, &mode, "into a pool with idle workers");
}
