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

/// A run's stall limit, defined with the configuration that carries it.
pub use super::config::STALL_TIMEOUT;

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
/// for when a producer could not be spawned or died before it was ready.
struct StartGate {
    /// (producers ready, 0 = closed / 1 = open / 2 = aborted, a producer died
    /// before it was ready)
    state: Mutex<(usize, u8, bool)>,
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
            state: Mutex::new((0, 0, false)),
            cv: Condvar::new(),
            running: AtomicUsize::new(n),
            main: thread::current(),
            completions: Mutex::new(Vec::with_capacity(n)),
        }
    }

    /// The state, whether or not a thread panicked while holding it (the
    /// gate's data stays consistent: every update is a single store).
    fn state(&self) -> std::sync::MutexGuard<'_, (usize, u8, bool)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Producer side: register `done`, announce ready, sleep until opened; false if aborted.
    fn arrive_and_wait(&self, done: &Arc<Completion>) -> bool {
        self.completions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(done.clone());
        let mut g = self.state();
        g.0 += 1;
        self.cv.notify_all();
        while g.1 == 0 {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        g.1 == 1
    }

    /// Producer side: this producer dies (panics) before it was ready; the
    /// main thread must not wait for it.
    fn died_before_ready(&self) {
        self.state().2 = true;
        self.cv.notify_all();
    }

    /// Main side: wait until `n` producers are ready (true), or until one died
    /// before it was ready (false).
    fn wait_ready(&self, n: usize) -> bool {
        let mut g = self.state();
        while g.0 < n && !g.2 {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        !g.2
    }

    /// Main side: open (`true`) or abort (`false`) the gate.
    fn release(&self, open: bool) {
        let mut g = self.state();
        g.1 = if open { 1 } else { 2 };
        self.cv.notify_all();
    }
}

/// Marks one producer finished when dropped (on every return path of its body,
/// unwinding included); a producer that unwinds before it was ready also
/// tells the gate, so that the main thread stops waiting for it.
struct Finished<'a> {
    gate: &'a StartGate,
    ready: bool,
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        if !self.ready && thread::panicking() {
            self.gate.died_before_ready();
        }
        if self.gate.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.gate.main.unpark();
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
    let mut finished = Finished {
        gate: start,
        ready: false,
    };
    let pinned = sys::pin_current_thread(cpu);
    let done = Arc::new(Completion::new());
    let mut prod = exec.producer(id, cpu, cfg.batch, done.clone());
    let mut enqueue = Vec::with_capacity(cfg.items);
    let mut round_trip = Vec::with_capacity(cfg.items);
    let mut t0s = vec![Instant::now(); cfg.batch];
    finished.ready = true;
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

/// Joins every producer; the first error, or the message of the first producer
/// that panicked, labelled with the run.
fn join_producers(
    handles: Vec<thread::ScopedJoinHandle<'_, Result<ProducerOut, String>>>,
    job: &Job<'_>,
) -> Result<Vec<ProducerOut>, String> {
    let mut first_err = None;
    let mut outs = Vec::with_capacity(handles.len());
    for (id, h) in handles.into_iter().enumerate() {
        let r = h.join().unwrap_or_else(|p| {
            Err(format!(
                "producer {id} panicked: {}",
                crate::limits::panic_message(&*p)
            ))
        });
        match r {
            Ok(o) => outs.push(o),
            // A panic says more than the others' "aborted before the start".
            Err(e) if first_err.is_none() || e.contains("panicked") => {
                if !first_err
                    .as_deref()
                    .is_some_and(|f: &str| f.contains("panicked"))
                {
                    first_err = Some(e);
                }
            }
            Err(_) => {}
        }
    }
    match first_err {
        Some(e) => Err(format!("{}: {e}", job.label())),
        None => Ok(outs),
    }
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
        spawn: cfg.spawn,
        execute: cfg.execute,
        cache_shard_size: cfg.cache_shard_size,
        cpus,
    };
    let exec = job
        .factory
        .build(&ctx)
        .map_err(|e| format!("{}: {e}", job.label()))?;
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
        if !start.wait_ready(cfg.threads) {
            // A producer died before the start: abort the others, report it.
            start.release(false);
            return Err(join_producers(handles, job)
                .err()
                .unwrap_or_else(|| format!("{}: a producer died before the start", job.label())));
        }
        let u0 = Usage::now();
        let t0 = Instant::now();
        start.release(true); // complete_all(&start_comp)
        watchdog(&start, cfg.stall_timeout);
        let outs = join_producers(handles, job)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::exec::Producer;
    use std::sync::mpsc;

    /// An executor whose producer 1 panics while building its submit handle,
    /// before the start gate (as a producer whose buffers cannot be allocated).
    struct DiesBeforeStart;

    struct Inline(Arc<Completion>);

    impl Producer for Inline {
        fn submit(&mut self, _slot: usize) {
            self.0.complete();
        }
    }

    impl Executor for DiesBeforeStart {
        fn producer<'a>(
            &'a self,
            id: usize,
            _cpu: usize,
            _slots: usize,
            done: Arc<Completion>,
        ) -> Box<dyn Producer + 'a> {
            if id == 1 {
                panic!("producer setup failed on purpose");
            }
            Box::new(Inline(done))
        }
    }

    impl ExecutorFactory for DiesBeforeStart {
        fn name(&self) -> &'static str {
            "dies"
        }
        fn build(&self, _: &BuildCtx<'_>) -> Result<Box<dyn Executor>, String> {
            Ok(Box::new(DiesBeforeStart))
        }
    }

    #[test]
    fn a_producer_that_dies_before_the_start_aborts_the_run_with_its_message() {
        let (tx, rx) = mpsc::channel();
        // The run goes on its own thread: without the abort it would wait at
        // the gate forever, and the test must fail rather than hang.
        thread::spawn(move || {
            let mut cfg = BenchConfig::with_defaults(2);
            cfg.threads = 3;
            cfg.items = 10;
            let f = DiesBeforeStart;
            let _ = tx.send(run_bench(&cfg, &[&f], |_| {}).map(|_| ()));
        });
        let r = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the run hung at the start gate");
        let e = r.unwrap_err();
        assert!(
            e.contains("dies: producer 1 panicked: producer setup failed on purpose"),
            "{e}"
        );
    }
}
