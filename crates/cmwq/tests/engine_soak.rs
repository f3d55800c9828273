//! The soak: 8 producers over every kind of queue (bound, unbound, ordered,
//! `max_active`, high priority, delayed work, one-off jobs) while another
//! thread changes the unbound queues' attributes live every 2-5 ms.
//!
//! What must hold, checked when it ends:
//!
//! - exactly once: for every `Work` and `DelayedWork`, the `queue` calls
//!   that returned true equal its runs plus the cancels that returned true;
//!   every job `execute` or `spawn` accepted ran once;
//! - ordered order: each producer's jobs on the ordered queue ran in the
//!   order it queued them, one at a time;
//! - `max_active`: never more items of a limited queue running at once than
//!   its limit allows;
//! - memory and threads stay flat over the second half of the run (RSS and
//!   the thread count at the end against the middle, with a generous bound).
//!
//! `soak_short` runs for 3 s in CI (`CMWQ_SOAK_SECS` changes it);
//! `soak_long` is ignored by default and runs 300 s:
//!
//! ```text
//! cargo test --release -p cmwq --test engine_soak -- --ignored --nocapture soak_long
//! ```

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cmwq::topology::Scope;
use cmwq::{DelayedWork, JoinHandle, Work, Workqueue};
use common::Rng;

const PRODUCERS: usize = 8;
/// Items of each queue kind per producer.
const ITEMS: usize = 3;

/// One cycle count: `queue` calls that returned true, runs, successful cancels.
#[derive(Default)]
struct Count {
    trues: AtomicUsize,
    runs: AtomicUsize,
    cancels: AtomicUsize,
}

impl Count {
    fn queued(&self, ok: bool) {
        self.trues.fetch_add(usize::from(ok), Ordering::SeqCst);
    }
    fn cancelled(&self, ok: bool) {
        self.cancels.fetch_add(usize::from(ok), Ordering::SeqCst);
    }
}

/// How many items of one queue run at once, and the most ever seen.
#[derive(Default)]
struct Active {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Active {
    fn run(&self, spin: usize) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        for _ in 0..spin {
            std::hint::spin_loop();
        }
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The queues, by kind.
struct Queues {
    bound: Workqueue,
    unbound: Workqueue,
    ordered: Workqueue,
    max_bound: Workqueue,
    max_unbound: Workqueue,
    highpri: Workqueue,
}

const MAX_BOUND: usize = 2;
const MAX_UNBOUND: usize = 3;

impl Queues {
    fn new() -> Queues {
        let b = Workqueue::builder;
        Queues {
            bound: b("soak_bound").build().unwrap(),
            unbound: b("soak_unbound").unbound().build().unwrap(),
            ordered: b("soak_ordered").ordered().build().unwrap(),
            max_bound: b("soak_max_bound").max_active(MAX_BOUND).build().unwrap(),
            max_unbound: b("soak_max_unbound")
                .unbound()
                .max_active(MAX_UNBOUND)
                .build()
                .unwrap(),
            highpri: b("soak_highpri")
                .highpri()
                .priority_fallback(true)
                .build()
                .unwrap(),
        }
    }

    /// Every queue, by index (the limited ones are 3 and 4).
    fn all(&self) -> [&Workqueue; 6] {
        [
            &self.bound,
            &self.unbound,
            &self.ordered,
            &self.max_bound,
            &self.max_unbound,
            &self.highpri,
        ]
    }
}

/// Everything the run checks, shared by the producers and the items.
#[derive(Default)]
struct Checks {
    /// Running items of the limited queues now, and the most seen.
    max_bound: Active,
    max_unbound: Active,
    ordered: Active,
    /// Per producer: the last sequence number its ordered jobs ran with.
    ordered_last: Vec<AtomicU64>,
    /// Ordered jobs that ran before one queued earlier by the same producer.
    ordered_out_of_order: AtomicUsize,
    /// Jobs accepted by `execute` / `spawn`, and the runs of such jobs.
    jobs_accepted: AtomicUsize,
    jobs_ran: AtomicUsize,
    /// Operations made (queue, cancel, execute, spawn, flush...).
    ops: AtomicU64,
}

impl Checks {
    /// What an item of queue `q` does: on a limited queue, count itself
    /// running for a moment.
    fn limited(&self, q: usize) {
        match q {
            3 => self.max_bound.run(200),
            4 => self.max_unbound.run(200),
            _ => {}
        }
    }
}

/// A counted work item on queue `q` (its runs check that queue's limit).
fn counted(checks: &Arc<Checks>, q: usize) -> (Arc<Count>, Work) {
    let c = Arc::new(Count::default());
    let (c2, ch) = (c.clone(), checks.clone());
    let w = Work::new(move || {
        c2.runs.fetch_add(1, Ordering::SeqCst);
        ch.limited(q);
    });
    (c, w)
}

fn counted_delayed() -> (Arc<Count>, DelayedWork) {
    let c = Arc::new(Count::default());
    let c2 = c.clone();
    let dw = DelayedWork::new(move || {
        c2.runs.fetch_add(1, Ordering::SeqCst);
    });
    (c, dw)
}

/// One producer's loop: random operations on its own items over every
/// queue until `stop`.
fn producer(
    p: usize,
    qs: Arc<Queues>,
    checks: Arc<Checks>,
    stop: Arc<AtomicBool>,
) -> Vec<(Arc<Count>, Option<Work>, Option<DelayedWork>)> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((p as u64 + 1) * 0x1000_0001));
    let works: Vec<(usize, Arc<Count>, Work)> = (0..qs.all().len())
        .flat_map(|q| (0..ITEMS).map(move |_| q))
        .map(|q| {
            let (c, w) = counted(&checks, q);
            (q, c, w)
        })
        .collect();
    let delayed: Vec<(usize, Arc<Count>, DelayedWork)> = [0, 1, 4]
        .iter()
        .flat_map(|&q| (0..ITEMS).map(move |_| q))
        .map(|q| {
            let (c, d) = counted_delayed();
            (q, c, d)
        })
        .collect();
    let mut handles: Vec<JoinHandle<usize>> = Vec::new();
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let all = qs.all();
        match rng.below(100) {
            0..=39 => {
                let (q, c, w) = &works[rng.below(works.len())];
                c.queued(all[*q].queue(w));
            }
            40..=51 => {
                let (_, c, w) = &works[rng.below(works.len())];
                c.cancelled(w.cancel());
            }
            52..=53 => {
                let (_, c, w) = &works[rng.below(works.len())];
                c.cancelled(w.cancel_sync());
            }
            54..=55 => {
                let (_, _, w) = &works[rng.below(works.len())];
                w.flush();
            }
            56..=65 => {
                let (q, c, d) = &delayed[rng.below(delayed.len())];
                let delay = Duration::from_micros(rng.below(2000) as u64);
                c.queued(all[*q].queue_delayed(d, delay));
            }
            66..=69 => {
                let (_, c, d) = &delayed[rng.below(delayed.len())];
                c.cancelled(d.cancel());
            }
            70..=81 => {
                // The ordered queue: a job that knows its place.
                seq += 1;
                let (ch, s) = (checks.clone(), seq);
                let ok = qs.ordered.execute(move || {
                    ch.ordered.run(50);
                    let last = ch.ordered_last[p].swap(s, Ordering::SeqCst);
                    if last >= s {
                        ch.ordered_out_of_order.fetch_add(1, Ordering::SeqCst);
                    }
                    ch.jobs_ran.fetch_add(1, Ordering::SeqCst);
                });
                checks
                    .jobs_accepted
                    .fetch_add(usize::from(ok), Ordering::SeqCst);
            }
            82..=91 => {
                let q = rng.below(all.len());
                let ch = checks.clone();
                let ok = all[q].execute(move || {
                    ch.limited(q);
                    ch.jobs_ran.fetch_add(1, Ordering::SeqCst);
                });
                checks
                    .jobs_accepted
                    .fetch_add(usize::from(ok), Ordering::SeqCst);
            }
            _ => {
                let q = rng.below(all.len());
                let ch = checks.clone();
                handles.push(all[q].spawn(move || {
                    ch.jobs_ran.fetch_add(1, Ordering::SeqCst);
                    q
                }));
                checks.jobs_accepted.fetch_add(1, Ordering::SeqCst);
                if handles.len() >= 32 {
                    for h in handles.drain(..) {
                        h.join().expect("a spawned job that does not panic");
                    }
                }
            }
        }
        checks.ops.fetch_add(1, Ordering::Relaxed);
    }
    for h in handles {
        h.join().expect("a spawned job that does not panic");
    }
    // Every item's last cycle ends: flushed (a delayed one is queued now).
    let mut out = Vec::new();
    for (_, c, w) in works {
        w.flush();
        out.push((c, Some(w), None));
    }
    for (_, c, d) in delayed {
        d.flush();
        out.push((c, None, Some(d)));
    }
    out
}

/// Changes the unbound queues' attributes every 2-5 ms until `stop`;
/// returns how many changes it made.
fn changer(qs: Arc<Queues>, stop: Arc<AtomicBool>) -> u64 {
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    let ncpu = thread::available_parallelism().map_or(1, |n| n.get());
    let cpus: Vec<usize> = (0..ncpu).collect();
    let scopes = [Scope::Cpu, Scope::Cache, Scope::System, Scope::Smt];
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_micros(2000 + rng.below(3000) as u64));
        let q = match rng.below(3) {
            0 => &qs.unbound,
            1 => &qs.ordered,
            _ => &qs.max_unbound,
        };
        let r = match rng.below(5) {
            0 => q.set_affinity_scope(scopes[rng.below(scopes.len())]),
            1 => {
                // A random non-empty subset of the CPUs.
                let mut m: Vec<usize> =
                    cpus.iter().copied().filter(|_| rng.below(2) == 0).collect();
                if m.is_empty() {
                    m.push(cpus[rng.below(cpus.len())]);
                }
                q.set_cpumask(&m)
            }
            2 => q.set_nice(rng.below(4) as i32),
            3 => q.set_affinity_strict(rng.below(2) == 0),
            // max_active of the unchecked unbound queue (the ordered one
            // must stay at 1, the checked one at its limit).
            _ => qs.unbound.set_max_active(1 + rng.below(16)),
        };
        r.expect("a live attribute change");
        n += 1;
    }
    n
}

struct Sample {
    at: Duration,
    rss_kib: u64,
    threads: usize,
}

fn soak(run: Duration) {
    let qs = Arc::new(Queues::new());
    let checks = Arc::new(Checks {
        ordered_last: (0..PRODUCERS).map(|_| AtomicU64::new(0)).collect(),
        ..Checks::default()
    });
    let unbound_limit: usize = qs.max_unbound.node_max_active().iter().sum();
    let ncpu = thread::available_parallelism().map_or(1, |n| n.get());
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (qs, ch, st) = (qs.clone(), checks.clone(), stop.clone());
            thread::spawn(move || producer(p, qs, ch, st))
        })
        .collect();
    let ch = {
        let (qs, st) = (qs.clone(), stop.clone());
        thread::spawn(move || changer(qs, st))
    };
    let samples = Mutex::new(Vec::new());
    let sample = || Sample {
        at: t0.elapsed(),
        rss_kib: common::rss_kib(),
        threads: common::nr_threads(),
    };
    while t0.elapsed() < run {
        thread::sleep(Duration::from_millis(100).min(run / 20));
        samples.lock().unwrap().push(sample());
    }
    stop.store(true, Ordering::SeqCst);
    let changes = ch.join().unwrap();
    let items: Vec<_> = producers
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let end = sample();
    let ops = checks.ops.load(Ordering::SeqCst);
    // Destroying the queues drains them: every job accepted has run after.
    drop(Arc::into_inner(qs).expect("the producers are done"));

    // ---- exactly once ----
    let (mut trues, mut runs, mut cancels) = (0, 0, 0);
    for (i, (c, _, _)) in items.iter().enumerate() {
        let (t, r, k) = (
            c.trues.load(Ordering::SeqCst),
            c.runs.load(Ordering::SeqCst),
            c.cancels.load(Ordering::SeqCst),
        );
        assert_eq!(t, r + k, "item {i}: {t} queued, {r} runs + {k} cancels");
        (trues, runs, cancels) = (trues + t, runs + r, cancels + k);
    }
    let (accepted, ran) = (
        checks.jobs_accepted.load(Ordering::SeqCst),
        checks.jobs_ran.load(Ordering::SeqCst),
    );
    assert_eq!(accepted, ran, "jobs accepted against jobs run");
    // ---- order and limits ----
    assert_eq!(
        checks.ordered_out_of_order.load(Ordering::SeqCst),
        0,
        "ordered jobs ran out of order"
    );
    assert_eq!(
        checks.ordered.max.load(Ordering::SeqCst),
        1,
        "ordered: one at a time"
    );
    let mb = checks.max_bound.max.load(Ordering::SeqCst);
    assert!(
        mb <= MAX_BOUND * ncpu,
        "bound max_active {MAX_BOUND} per CPU: {mb} ran at once"
    );
    let mu = checks.max_unbound.max.load(Ordering::SeqCst);
    assert!(
        mu <= unbound_limit,
        "unbound max_active {unbound_limit}: {mu} ran at once"
    );

    // ---- flat over the second half ----
    let samples = samples.into_inner().unwrap();
    let mid = samples.iter().find(|s| s.at >= run / 2).unwrap_or(&end);
    let first = &samples[0];
    let peak_threads = samples
        .iter()
        .filter(|s| s.at >= run / 2)
        .map(|s| s.threads)
        .max()
        .unwrap_or(end.threads);
    println!(
        "soak {:.0} s: {ops} operations, {changes} attribute changes, {trues} queued \
         ({runs} runs, {cancels} cancels), {accepted} jobs; RSS start {} KiB, middle {} KiB, \
         end {} KiB; threads start {}, middle {}, end {}, most in the second half {peak_threads}",
        run.as_secs_f64(),
        first.rss_kib,
        mid.rss_kib,
        end.rss_kib,
        first.threads,
        mid.threads,
        end.threads,
    );
    assert!(changes > 0 && ops > 0, "the soak did nothing");
    // A panic of cmwq's own code on its timer, watchdog, pods or rescuer
    // threads is survived (`engine/service.rs`), not ignored: it is a bug.
    assert_eq!(
        cmwq::engine_thread_panics(),
        0,
        "cmwq's service threads caught panics of cmwq's code (stderr names them)"
    );
    let rss_slack = 16 * 1024 + mid.rss_kib / 4;
    assert!(
        end.rss_kib <= mid.rss_kib + rss_slack,
        "RSS grew over the second half: {} KiB in the middle, {} KiB at the end",
        mid.rss_kib,
        end.rss_kib
    );
    assert!(
        peak_threads <= mid.threads + 32 + mid.threads / 2,
        "threads grew over the second half: {} in the middle, up to {peak_threads} later",
        mid.threads
    );
}

fn secs(default: u64) -> Duration {
    let s = std::env::var("CMWQ_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Duration::from_secs(s)
}

#[test]
fn soak_short() {
    if common::in_own_process("soak_short", "CMWQ_T_SOAK") {
        soak(secs(3));
    }
}

#[test]
#[ignore = "runs 300 s (CMWQ_SOAK_SECS): cargo test --release -p cmwq --test engine_soak -- --ignored soak_long"]
fn soak_long() {
    if common::in_own_process("soak_long", "CMWQ_T_SOAK") {
        soak(secs(300));
    }
}
