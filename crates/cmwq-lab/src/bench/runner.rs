//! The run loop: producers, the start barrier, timing, rusage, idle and thread checks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use cmwq::topology::Scope;
use serde::Serialize;

use super::completion::Completion;
use super::config::BenchConfig;
use super::exec::{BuildCtx, Executor, ExecutorFactory};
use super::summary::{Percentiles, RowSummary, RunResult, cdf_points};
use super::sys::{self, Usage};

/// How long the process is watched for CPU use after a run, with the executor idle.
pub const IDLE_WINDOW: Duration = Duration::from_millis(200);

/// A run in which no item completed for this long fails (a lost item would
/// otherwise hang the bench): the main thread's watchdog aborts the completions.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(20);

/// How long to wait for an executor's threads to exit after it was dropped.
pub const THREAD_GRACE: Duration = Duration::from_millis(500);

/// One entry of the run schedule: an executor and, if it is scoped, a scope.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    /// The executor's factory.
    pub factory: &'a dyn ExecutorFactory,
    /// The scope for scoped executors.
    pub scope: Option<Scope>,
}

impl Job<'_> {
    /// `executor` or `executor/scope`, for progress lines.
    pub fn label(&self) -> String {
        match self.scope {
            Some(s) => format!("{}/{}", self.factory.name(), s),
            None => self.factory.name().to_string(),
        }
    }
}

/// Progress of a whole bench, reported before each run starts.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Runs finished so far.
    pub done: usize,
    /// Runs in total.
    pub total: usize,
    /// The run about to start (`executor` or `executor/scope`), empty when all are done.
    pub label: String,
}

/// The result of a whole bench: the configuration, every run, and one row per executor/scope.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// What was asked.
    pub config: BenchConfig,
    /// The CPUs the run used (producer `i` on `cpus[i % len]`).
    pub cpus: Vec<usize>,
    /// Every run, in the order they ran.
    pub runs: Vec<RunResult>,
    /// One row per executor and scope, in schedule order.
    pub rows: Vec<RowSummary>,
}

/// The schedule of one round: each subject per selected scope (if scoped), then each peer.
pub fn schedule<'a>(cfg: &BenchConfig, factories: &[&'a dyn ExecutorFactory]) -> Vec<Job<'a>> {
    let mut jobs = Vec::new();
    for &f in factories {
        if f.scoped() {
            jobs.extend(cfg.scopes.iter().map(|&s| Job {
                factory: f,
                scope: Some(s),
            }));
        } else {
            jobs.push(Job {
                factory: f,
                scope: None,
            });
        }
    }
    jobs
}

/// Run the bench: `cfg.rounds` rounds of the schedule (A B C A B C ...), then summarize.
///
/// `factories` are the executors to run (subjects first, then the peers of `--vs`);
/// `progress` is called before every run and once at the end.
pub fn run_bench(
    cfg: &BenchConfig,
    factories: &[&dyn ExecutorFactory],
    mut progress: impl FnMut(&Progress),
) -> Result<Report, String> {
    cfg.validate()?;
    if factories.is_empty() {
        return Err("nothing to run: no executor selected (pass --vs LIST or --vs all)".into());
    }
    let cpus = sys::allowed_cpus();
    let jobs = schedule(cfg, factories);
    let total = jobs.len() * cfg.rounds;
    let mut runs = Vec::with_capacity(total);
    for round in 0..cfg.rounds {
        for job in &jobs {
            progress(&Progress {
                done: runs.len(),
                total,
                label: format!("{} (round {}/{})", job.label(), round + 1, cfg.rounds),
            });
            runs.push(run_once(cfg, &cpus, job, round)?);
        }
    }
    progress(&Progress {
        done: total,
        total,
        label: String::new(),
    });
    let rows = jobs
        .iter()
        .enumerate()
        .map(|(j, job)| {
            let idx: Vec<usize> = (0..cfg.rounds).map(|r| r * jobs.len() + j).collect();
            RowSummary::of(&runs, &idx, job.factory.scoped())
        })
        .collect();
    Ok(Report {
        config: cfg.clone(),
        cpus,
        runs,
        rows,
    })
}

/// The start gate: `complete_all(&start_comp)`, plus a count of producers ready, so
/// the clock starts only once every producer built its submit handle, and an abort
/// for when a producer could not be spawned.
struct StartGate {
    /// (producers ready, 0 = closed / 1 = open / 2 = aborted)
    state: Mutex<(usize, u8)>,
    cv: Condvar,
    /// Producers not finished yet; the last one to finish unparks `main`.
    running: AtomicUsize,
    /// The thread that opens the gate and waits for the producers.
    main: Thread,
    /// Every producer's completion, for the watchdog.
    completions: Mutex<Vec<Arc<Completion>>>,
}

impl StartGate {
    /// A closed gate for `n` producers, opened by the calling thread.
    fn new(n: usize) -> StartGate {
        StartGate {
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
            running: AtomicUsize::new(n),
            main: thread::current(),
            completions: Mutex::new(Vec::with_capacity(n)),
        }
    }

    /// Producer side: register `done`, announce ready, sleep until opened; false if aborted.
    fn arrive_and_wait(&self, done: &Arc<Completion>) -> bool {
        self.completions
            .lock()
            .expect("start gate")
            .push(done.clone());
        let mut g = self.state.lock().expect("start gate");
        g.0 += 1;
        self.cv.notify_all();
        while g.1 == 0 {
            g = self.cv.wait(g).expect("start gate");
        }
        g.1 == 1
    }

    /// Main side: wait until `n` producers are ready.
    fn wait_ready(&self, n: usize) {
        let mut g = self.state.lock().expect("start gate");
        while g.0 < n {
            g = self.cv.wait(g).expect("start gate");
        }
    }

    /// Main side: open (`true`) or abort (`false`) the gate.
    fn release(&self, open: bool) {
        let mut g = self.state.lock().expect("start gate");
        g.1 = if open { 1 } else { 2 };
        self.cv.notify_all();
    }
}

/// Marks one producer finished when dropped (on every return path of its body).
struct Finished<'a>(&'a StartGate);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.main.unpark();
        }
    }
}

/// Main thread: sleep until the last producer finished (it unparks us, so the end
/// time is not delayed); if meanwhile no item completes for `stall`, abort every
/// completion so the producers return an error instead of hanging. The 100 ms
/// wakeups to check progress cost the run nothing measurable.
fn watchdog(gate: &StartGate, stall: Duration) {
    let completions = gate.completions.lock().expect("start gate").clone();
    let progress = || completions.iter().map(|c| c.completed()).sum::<u64>();
    let (mut last, mut since) = (progress(), Instant::now());
    while gate.running.load(Ordering::Acquire) > 0 {
        thread::park_timeout(Duration::from_millis(100));
        let now = progress();
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= stall {
            completions.iter().for_each(|c| c.abort());
            return;
        }
    }
}

/// What one producer thread measured.
struct ProducerOut {
    enqueue: Vec<u64>,
    round_trip: Vec<u64>,
    completed: u64,
}

/// The body of producer `id`: the kernel's `bench_thread`, batched by `cfg.batch`.
fn producer_body(
    cfg: &BenchConfig,
    exec: &dyn Executor,
    id: usize,
    cpu: usize,
    start: &StartGate,
) -> Result<ProducerOut, String> {
    let _finished = Finished(start);
    let pinned = sys::pin_current_thread(cpu);
    let done = Arc::new(Completion::new());
    let mut prod = exec.producer(id, cpu, cfg.batch, done.clone());
    let mut enqueue = Vec::with_capacity(cfg.items);
    let mut round_trip = Vec::with_capacity(cfg.items);
    let mut t0s = vec![Instant::now(); cfg.batch];
    if !start.arrive_and_wait(&done) {
        return Err("aborted before the start".into());
    }
    pinned?;
    let mut left = cfg.items;
    while left > 0 {
        let k = left.min(cfg.batch);
        done.expect(k as u64);
        for (slot, t0) in t0s.iter_mut().enumerate().take(k) {
            let a = Instant::now();
            prod.submit(slot);
            let b = Instant::now();
            *t0 = a;
            enqueue.push((b - a).as_nanos() as u64);
        }
        if !done.wait() {
            return Err(format!(
                "producer {id} stalled: {} of {} items completed, none for {:.1} s",
                done.completed(),
                done.expected(),
                cfg.stall_timeout.as_secs_f64()
            ));
        }
        let end = Instant::now();
        round_trip.extend(t0s[..k].iter().map(|t| (end - *t).as_nanos() as u64));
        left -= k;
    }
    drop(prod);
    Ok(ProducerOut {
        enqueue,
        round_trip,
        completed: done.completed(),
    })
}

/// One run: build the executor, release the producers, time, measure, drop, count threads.
pub fn run_once(
    cfg: &BenchConfig,
    cpus: &[usize],
    job: &Job<'_>,
    round: usize,
) -> Result<RunResult, String> {
    let threads_before = sys::thread_count() as i64;
    let ctx = BuildCtx {
        workers: cfg.workers,
        scope: job.scope,
        synthetic: cfg.synthetic.as_deref(),
        producers: cfg.threads,
        strict: cfg.strict,
        wake_under_lock: cfg.wake_under_lock,
        unmanaged: cfg.unmanaged,
        cache_shard_size: cfg.cache_shard_size,
        cpus,
    };
    let exec = job.factory.build(&ctx)?;
    let start = StartGate::new(cfg.threads);
    let (outs, elapsed, usage, idle) = thread::scope(|s| {
        let handles = (0..cfg.threads)
            .map(|id| {
                let cpu = cpus[id % cpus.len()];
                let (exec, start) = (&*exec, &start);
                thread::Builder::new()
                    .name(format!("wq_bench/{id}"))
                    .spawn_scoped(s, move || producer_body(cfg, exec, id, cpu, start))
                    .map_err(|e| format!("spawning producer {id}: {e}"))
            })
            .collect::<Result<Vec<_>, String>>();
        let handles = match handles {
            Ok(h) => h,
            Err(e) => {
                start.release(false);
                return Err(e);
            }
        };
        start.wait_ready(cfg.threads);
        let u0 = Usage::now();
        let t0 = Instant::now();
        start.release(true); // complete_all(&start_comp)
        watchdog(&start, cfg.stall_timeout);
        let outs = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("producer panicked".into())))
            .collect::<Result<Vec<ProducerOut>, String>>()
            .map_err(|e| format!("{}: {e}", job.label()))?;
        exec.quiesce(); // flush_workqueue
        let elapsed = t0.elapsed();
        let u1 = Usage::now();
        thread::sleep(IDLE_WINDOW);
        let u2 = Usage::now();
        Ok((outs, elapsed, u1.since(&u0), u2.since(&u1)))
    })?;
    drop(exec);
    let grace = Instant::now();
    let mut threads_after = sys::thread_count() as i64;
    while threads_after > threads_before && grace.elapsed() < THREAD_GRACE {
        thread::sleep(Duration::from_millis(5));
        threads_after = sys::thread_count() as i64;
    }

    let mut enq = Vec::with_capacity(cfg.threads * cfg.items);
    let mut rt = Vec::with_capacity(cfg.threads * cfg.items);
    let mut completed = 0;
    for o in outs {
        enq.extend_from_slice(&o.enqueue);
        rt.extend_from_slice(&o.round_trip);
        completed += o.completed;
    }
    enq.sort_unstable();
    rt.sort_unstable();
    let items = (cfg.threads * cfg.items) as f64;
    let secs = elapsed.as_secs_f64().max(1e-9);
    let cpu_s = usage.cpu().as_secs_f64();
    Ok(RunResult {
        executor: job.factory.name().to_string(),
        scope: job
            .scope
            .map_or_else(|| "-".to_string(), |s| s.name().to_string()),
        round,
        completed,
        elapsed_s: secs,
        items_per_sec: completed as f64 / secs,
        enqueue_ns: Percentiles::of_sorted(&enq),
        round_trip_ns: Percentiles::of_sorted(&rt),
        cpu_user_s: usage.user.as_secs_f64(),
        cpu_sys_s: usage.sys.as_secs_f64(),
        cpu_s_per_million: cpu_s / items * 1e6,
        vcsw_per_item: usage.nvcsw as f64 / items,
        ivcsw_per_item: usage.nivcsw as f64 / items,
        idle_cpu_ms: idle.cpu().as_secs_f64() * 1e3,
        idle_window_ms: IDLE_WINDOW.as_secs_f64() * 1e3,
        threads_left: threads_after - threads_before,
        round_trip_cdf: cdf_points(&rt),
    })
}
