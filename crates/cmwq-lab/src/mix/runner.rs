//! The run loop of the mix: producers on a schedule, the thread sampler,
//! the delays of every job, CPU time, and the summary over rounds.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::MixConfig;
use super::exec::{MixExecutor, MixPool, executors};
use super::work::{Blocker, Burn};
use crate::bench::sys::{self, ThreadCounter, Usage};
use crate::bench::{Completion, Mmm, Percentiles, Progress};

/// How often the sampler reads the thread count.
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(1);

/// Longest wait before a run for the threads of the runs before it to exit
/// (hundreds of tokio's blocking threads take a while on a loaded machine;
/// a joined thread lingers in `/proc/self/task` for a moment): the run's
/// thread count would be off while they linger.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Threads of the process less the workers of cmwq's per-CPU pools: what
/// must come back to its level before a run starts. Per-CPU pools live as
/// long as the process and keep idle workers (as the kernel's); an unbound
/// pool goes with its last workqueue, and its workers, on their way out,
/// count here until their threads are gone.
fn non_worker_threads(counter: &mut ThreadCounter) -> Option<usize> {
    let workers: usize = cmwq::snapshot()
        .pools
        .iter()
        .filter(|p| p.cpu.is_some())
        .map(|p| p.workers)
        .sum();
    counter.now().map(|n| n.saturating_sub(workers))
}

/// The level of [`non_worker_threads`] the runs start from: its value once
/// it held still for 50 ms (at most 2 s). With cmwq in the run, one
/// workqueue is made and dropped first, so that the engine's own threads
/// (the watchdog) are part of the level, not of the first run.
fn thread_floor(counter: &mut ThreadCounter, cmwq: bool) -> Result<usize, String> {
    if cmwq {
        let wq = cmwq::Workqueue::builder("mix_warmup")
            .unbound()
            .build()
            .map_err(|e| format!("building mix_warmup: {e}"))?;
        wq.execute(|| {});
        wq.flush();
    }
    let t0 = Instant::now();
    let (mut level, mut still) = (non_worker_threads(counter), 0);
    while still < 10 && t0.elapsed() < Duration::from_secs(2) {
        thread::sleep(Duration::from_millis(5));
        let now = non_worker_threads(counter);
        if now == level {
            still += 1;
        } else {
            (level, still) = (now, 0);
        }
    }
    level.ok_or_else(|| "cannot read /proc/self/stat".to_string())
}

/// Wait until the threads of earlier runs are gone: [`non_worker_threads`]
/// back at `floor`; after [`SETTLE_TIMEOUT`], take the level as it is.
fn settle(counter: &mut ThreadCounter, floor: &mut usize) {
    let t0 = Instant::now();
    loop {
        match non_worker_threads(counter) {
            Some(n) if n <= *floor => return,
            Some(n) if t0.elapsed() >= SETTLE_TIMEOUT => {
                *floor = n;
                return;
            }
            None => return,
            Some(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Everything measured in one run of one executor at one block time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MixRun {
    /// Executor name (`cmwq`, `crossbeam`, ...).
    pub executor: String,
    /// Block time of the blocking jobs, µs.
    pub block_us: u64,
    /// Round, from 0.
    pub round: usize,
    /// Jobs submitted (producers × jobs).
    pub jobs: u64,
    /// Jobs that ran exactly once (equals `jobs` unless one was lost or doubled).
    pub ran_once: u64,
    /// Job runs counted in total.
    pub runs: u64,
    /// CPU jobs submitted.
    pub cpu_jobs: u64,
    /// Blocking jobs submitted.
    pub block_jobs: u64,
    /// Queueing delay (submit to start) of the CPU jobs, ns; `None` if there were none.
    pub cpu_delay_ns: Option<Percentiles>,
    /// Queueing delay of the blocking jobs, ns; `None` if there were none.
    pub block_delay_ns: Option<Percentiles>,
    /// Start gate to the last job done, s.
    pub wall_s: f64,
    /// User CPU time of the process over the wall, s.
    pub cpu_user_s: f64,
    /// System CPU time of the process over the wall, s.
    pub cpu_sys_s: f64,
    /// (user + sys) per job, µs.
    pub cpu_us_per_job: f64,
    /// (user + sys) over wall × CPUs, %.
    pub busy_pct: f64,
    /// Most threads of the executor seen during the run.
    pub peak_threads: i64,
    /// Blocks that slept instead because they could not block the asked way
    /// (a pipe that could not be made); 0 normally.
    pub block_fallbacks: u64,
    /// cmwq only: times concurrency management woke another worker because
    /// one blocked or ran long (the workqueue's `cm_wakeup`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cm_wakeup: Option<u64>,
    /// cmwq only: blocked workers the engine found itself, unannotated (the
    /// workqueue's `sampled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cm_sampled: Option<u64>,
    /// cmwq only: kicks of one per-CPU pool by a partner of its pod that woke
    /// a worker during the run (`cmwq::partner_kicks`, process-wide: the
    /// mix runs one executor at a time): sleepers found, and lagging lanes
    /// lent a worker, on another CPU's event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cm_partner_kicks: Option<u64>,
    /// cmwq only: sleeps found by the workers themselves during the run (a
    /// standby or a just-started worker took over from a worker asleep in
    /// its item: `cmwq::sleeper_takeovers`, process-wide).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cm_takeovers: Option<u64>,
    /// Why the first of those could not block, if any did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_error: Option<String>,
}

/// One executor at one block time, over the rounds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MixRow {
    /// Executor name.
    pub executor: String,
    /// Block time, µs.
    pub block_us: u64,
    /// Whether its blocks were annotated (`cmwq::blocking`).
    pub annotated: bool,
    /// Runs summarized.
    pub rounds: usize,
    /// CPU jobs' delay p50, ns.
    pub cpu_delay_p50_ns: Mmm,
    /// CPU jobs' delay p90, ns.
    pub cpu_delay_p90_ns: Mmm,
    /// CPU jobs' delay p99, ns.
    pub cpu_delay_p99_ns: Mmm,
    /// CPU jobs' largest delay, ns.
    pub cpu_delay_max_ns: Mmm,
    /// Blocking jobs' delay p50, ns.
    pub block_delay_p50_ns: Mmm,
    /// Blocking jobs' delay p99, ns.
    pub block_delay_p99_ns: Mmm,
    /// Wall time, s.
    pub wall_s: Mmm,
    /// CPU per job, µs.
    pub cpu_us_per_job: Mmm,
    /// Busy share of the CPUs, %.
    pub busy_pct: Mmm,
    /// Peak threads.
    pub peak_threads: Mmm,
    /// Index in [`MixReport::runs`] of the median round by CPU p99 (for the plot).
    #[serde(skip)]
    pub median_run: usize,
}

/// The result of a whole `cmwq mix`.
#[derive(Clone, Debug, Serialize)]
pub struct MixReport {
    /// What was asked.
    pub config: MixConfig,
    /// The CPUs the process may run on.
    pub cpus: Vec<usize>,
    /// Every run, in the order it ran.
    pub runs: Vec<MixRun>,
    /// One row per block time and executor, in schedule order.
    pub rows: Vec<MixRow>,
}

/// The first line of a `--trace` file; then one line per job of every run,
/// in run order: the executor, the block time (µs), the round (from 0), the
/// producer and the job's index in it, whether the job blocks (1) or burns
/// CPU (0), when it was submitted (µs after the run's start gate opened),
/// its queueing delay (ns) and the CPU it started on. It shows when and
/// where a run's delays happened, which the percentiles do not: a stall of
/// one CPU for a few milliseconds is a run of consecutive jobs there.
pub const TRACE_HEADER: &str = "executor,block_us,round,producer,job,blocks,submit_us,delay_ns,cpu";

/// Creates (or truncates) the trace file and writes its header: before the
/// first run, so a path that cannot be written is said at once.
fn trace_start(path: &std::path::Path) -> Result<(), String> {
    std::fs::write(path, format!("{TRACE_HEADER}\n"))
        .map_err(|e| format!("--trace {}: {e}", path.display()))
}

/// Per job: its delay and how often it ran; the completion the main thread waits on.
struct Shared {
    delay_ns: Vec<AtomicU64>,
    /// With `--trace`: when each job was submitted (ns after `base`) and the
    /// CPU it started on; empty without.
    submit_ns: Vec<AtomicU64>,
    cpu: Vec<AtomicU32>,
    base: Instant,
    count: Vec<AtomicU32>,
    done: Completion,
    blocker: Blocker,
    burn: Burn,
    annotated: bool,
}

impl Shared {
    /// The body of job `idx`, submitted at `at`.
    fn run_job(&self, idx: usize, at: Instant, blocks: bool) {
        let d = at.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.count[idx].fetch_add(1, Ordering::Relaxed);
        self.delay_ns[idx].store(d, Ordering::Relaxed);
        if let (Some(s), Some(c)) = (self.submit_ns.get(idx), self.cpu.get(idx)) {
            let since = at.saturating_duration_since(self.base).as_nanos();
            s.store(since.min(u64::MAX as u128) as u64, Ordering::Relaxed);
            c.store(sys::current_cpu() as u32, Ordering::Relaxed);
        }
        if !blocks {
            self.burn.run();
        } else if self.annotated {
            cmwq::blocking(|| self.blocker.block());
        } else {
            self.blocker.block();
        }
        self.done.complete();
    }
}

/// Run the mix: `cfg.rounds` rounds of every block time of every executor.
/// `progress` is called before every run and once at the end.
pub fn run_mix(cfg: &MixConfig, mut progress: impl FnMut(&Progress)) -> Result<MixReport, String> {
    cfg.validate()?;
    if let Some(path) = &cfg.trace {
        trace_start(path)?;
    }
    let cpus = sys::allowed_cpus();
    let execs = executors(&cfg.vs);
    let total = cfg.rounds * cfg.block_us.len() * execs.len();
    let mut runs = Vec::with_capacity(total);
    let mut counter = ThreadCounter::open()?;
    let mut floor = thread_floor(&mut counter, execs.iter().any(|e| !e.is_peer()))?;
    for round in 0..cfg.rounds {
        for &b in &cfg.block_us {
            for &e in &execs {
                progress(&Progress {
                    done: runs.len(),
                    total,
                    label: format!("{} B={b}us (round {}/{})", e.name(), round + 1, cfg.rounds),
                });
                settle(&mut counter, &mut floor);
                let r = run_once(cfg, e, b, round, cpus.len())
                    .map_err(|m| format!("{} B={b}us round {}: {m}", e.name(), round + 1))?;
                runs.push(r);
            }
        }
    }
    progress(&Progress {
        done: total,
        total,
        label: String::new(),
    });
    let mut rows = Vec::new();
    for (bi, &b) in cfg.block_us.iter().enumerate() {
        for (ei, &e) in execs.iter().enumerate() {
            let idx: Vec<usize> = (0..cfg.rounds)
                .map(|r| (r * cfg.block_us.len() + bi) * execs.len() + ei)
                .collect();
            rows.push(summarize(&runs, &idx, e, b));
        }
    }
    Ok(MixReport {
        config: cfg.clone(),
        cpus,
        runs,
        rows,
    })
}

fn summarize(runs: &[MixRun], idx: &[usize], e: MixExecutor, block_us: u64) -> MixRow {
    let m = |f: &dyn Fn(&MixRun) -> f64| Mmm::of(idx.iter().map(|&i| f(&runs[i])));
    let cpu = |f: fn(&Percentiles) -> u64| {
        move |r: &MixRun| r.cpu_delay_ns.as_ref().map_or(0.0, |p| f(p) as f64)
    };
    let blk = |f: fn(&Percentiles) -> u64| {
        move |r: &MixRun| r.block_delay_ns.as_ref().map_or(0.0, |p| f(p) as f64)
    };
    let mut by_p99: Vec<usize> = idx.to_vec();
    by_p99.sort_by_key(|&i| runs[i].cpu_delay_ns.map_or(0, |p| p.p99));
    MixRow {
        executor: e.name().to_string(),
        block_us,
        annotated: e.annotated(),
        rounds: idx.len(),
        cpu_delay_p50_ns: m(&cpu(|p| p.p50)),
        cpu_delay_p90_ns: m(&cpu(|p| p.p90)),
        cpu_delay_p99_ns: m(&cpu(|p| p.p99)),
        cpu_delay_max_ns: m(&cpu(|p| p.max)),
        block_delay_p50_ns: m(&blk(|p| p.p50)),
        block_delay_p99_ns: m(&blk(|p| p.p99)),
        wall_s: m(&|r| r.wall_s),
        cpu_us_per_job: m(&|r| r.cpu_us_per_job),
        busy_pct: m(&|r| r.busy_pct),
        peak_threads: m(&|r| r.peak_threads as f64),
        median_run: by_p99[by_p99.len() / 2],
    }
}

/// The sampler: the most threads seen until `stop`, reading every
/// [`SAMPLE_PERIOD`]; aborts `done` when no job completed for `stall`.
fn sample(
    mut counter: ThreadCounter,
    stop: &AtomicBool,
    done: &Completion,
    stall: Duration,
) -> usize {
    let mut peak = 0;
    let (mut last, mut since) = (done.completed(), Instant::now());
    loop {
        if let Some(n) = counter.now() {
            peak = peak.max(n);
        }
        if stop.load(Ordering::Acquire) {
            return peak;
        }
        let c = done.completed();
        if c != last {
            (last, since) = (c, Instant::now());
        } else if since.elapsed() >= stall {
            done.abort();
            return peak;
        }
        thread::sleep(SAMPLE_PERIOD);
    }
}

/// The start gate: producers wait until the main thread opens it (true) or
/// gives up because a producer could not be started (false).
#[derive(Default)]
struct Gate {
    open: Mutex<Option<bool>>,
    cv: Condvar,
}

impl Gate {
    fn wait(&self) -> bool {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match *g {
                Some(open) => return open,
                None => g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
            }
        }
    }

    fn release(&self, open: bool) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = Some(open);
        self.cv.notify_all();
    }
}

/// The body of producer `p`: `cfg.jobs` jobs on the rate's schedule, then
/// a wait at `end`, so that every producer lives from the start to the last
/// job done and the threads the harness subtracts are all there when sampled.
fn produce(
    cfg: &MixConfig,
    p: usize,
    pool: &dyn MixPool,
    sh: &Arc<Shared>,
    (gate, end): (&Gate, &Gate),
) {
    if !gate.wait() {
        return;
    }
    let start = Instant::now();
    for i in 0..cfg.jobs {
        let due = start + Duration::from_secs_f64(i as f64 / cfg.rate);
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        let idx = p * cfg.jobs + i;
        let blocks = cfg.blocks(p, i);
        let s = sh.clone();
        let at = Instant::now();
        pool.submit(Box::new(move || s.run_job(idx, at, blocks)));
    }
    end.wait();
}

/// One run of `e` with blocks of `block_us`.
pub fn run_once(
    cfg: &MixConfig,
    e: MixExecutor,
    block_us: u64,
    round: usize,
    ncpu: usize,
) -> Result<MixRun, String> {
    let n = cfg.producers * cfg.jobs;
    let blocker = Blocker::start(cfg.block_kind, Duration::from_micros(block_us))?;
    let traced = if cfg.trace.is_some() { n } else { 0 };
    let sh = Arc::new(Shared {
        delay_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
        submit_ns: (0..traced).map(|_| AtomicU64::new(0)).collect(),
        cpu: (0..traced).map(|_| AtomicU32::new(0)).collect(),
        base: Instant::now(),
        count: (0..n).map(|_| AtomicU32::new(0)).collect(),
        done: Completion::new(),
        blocker,
        burn: Burn::new(cfg.cpu_us),
        annotated: e.annotated(),
    });
    let mut counter = ThreadCounter::open()?;
    let sampler_counter = ThreadCounter::open()?;
    let t_before = counter.now().ok_or("cannot read /proc/self/stat")?;
    let kicks_before = cmwq::partner_kicks();
    let takeovers_before = cmwq::sleeper_takeovers();
    let pool = e.build(cfg.workers)?;
    let t_after = counter.now().ok_or("cannot read /proc/self/stat")?;
    // Threads that are not the executor's: the process's before it was
    // built (less cmwq's pool workers, which are), the producers, the sampler.
    let own = pool.own_threads();
    let others = match own {
        Some(own) => t_after.saturating_sub(own),
        None => t_before,
    } + cfg.producers
        + 1;
    sh.done.expect(n as u64);
    let (gate, end) = (Gate::default(), Gate::default());
    let stop = AtomicBool::new(false);
    let (wall, usage, peak, ok, opened) = thread::scope(|s| {
        let sampler = thread::Builder::new()
            .name("mix/sampler".into())
            .spawn_scoped(s, || {
                sample(sampler_counter, &stop, &sh.done, cfg.stall_timeout)
            })
            .map_err(|e| format!("spawning the thread sampler: {e}"))?;
        let mut producers = Vec::with_capacity(cfg.producers);
        for p in 0..cfg.producers {
            let (pool, sh, gates) = (&*pool, &sh, (&gate, &end));
            let h = thread::Builder::new()
                .name(format!("mix/p{p}"))
                .spawn_scoped(s, move || produce(cfg, p, pool, sh, gates));
            match h {
                Ok(h) => producers.push(h),
                Err(err) => {
                    stop.store(true, Ordering::Release);
                    gate.release(false);
                    return Err(format!("spawning producer {p}: {err}"));
                }
            }
        }
        let opened = Instant::now();
        gate.release(true);
        let u0 = Usage::now();
        let t0 = Instant::now();
        let ok = sh.done.wait();
        let wall = t0.elapsed();
        let usage = Usage::now().since(&u0);
        stop.store(true, Ordering::Release);
        end.release(true);
        for (p, h) in producers.into_iter().enumerate() {
            h.join()
                .map_err(|x| format!("producer {p}: {}", crate::limits::panic_message(&*x)))?;
        }
        let peak = sampler.join().map_err(|_| "the sampler panicked")?;
        Ok((wall, usage, peak, ok, opened))
    })?;
    if !ok {
        return Err(format!(
            "stalled: {} of {n} jobs done, none for {:.1} s",
            sh.done.completed(),
            cfg.stall_timeout.as_secs_f64()
        ));
    }
    let fallbacks = sh.blocker.failures();
    let cm = pool.cm_counters();
    let kicks = cmwq::partner_kicks().saturating_sub(kicks_before);
    let takeovers = cmwq::sleeper_takeovers().saturating_sub(takeovers_before);
    drop(pool);
    if let Some(path) = &cfg.trace {
        let open_ns = opened.saturating_duration_since(sh.base).as_nanos() as u64;
        write_trace(path, cfg, e, block_us, round, &sh, open_ns)?;
    }
    let (mut cpu, mut blk) = (Vec::new(), Vec::new());
    let (mut ran_once, mut runs) = (0u64, 0u64);
    for p in 0..cfg.producers {
        for i in 0..cfg.jobs {
            let idx = p * cfg.jobs + i;
            let c = sh.count[idx].load(Ordering::Relaxed);
            runs += u64::from(c);
            ran_once += u64::from(c == 1);
            if c == 0 {
                continue;
            }
            let d = sh.delay_ns[idx].load(Ordering::Relaxed);
            if cfg.blocks(p, i) {
                blk.push(d);
            } else {
                cpu.push(d);
            }
        }
    }
    let block_jobs = (0..cfg.producers)
        .map(|p| (0..cfg.jobs).filter(|&i| cfg.blocks(p, i)).count() as u64)
        .sum::<u64>();
    let pct = |mut v: Vec<u64>| {
        v.sort_unstable();
        (!v.is_empty()).then(|| Percentiles::of_sorted(&v))
    };
    let secs = wall.as_secs_f64().max(1e-9);
    let cpu_s = usage.cpu().as_secs_f64();
    Ok(MixRun {
        executor: e.name().to_string(),
        block_us,
        round,
        jobs: n as u64,
        ran_once,
        runs,
        cpu_jobs: n as u64 - block_jobs,
        block_jobs,
        cpu_delay_ns: pct(cpu),
        block_delay_ns: pct(blk),
        wall_s: secs,
        cpu_user_s: usage.user.as_secs_f64(),
        cpu_sys_s: usage.sys.as_secs_f64(),
        cpu_us_per_job: cpu_s / n as f64 * 1e6,
        busy_pct: cpu_s / (secs * ncpu.max(1) as f64) * 100.0,
        peak_threads: peak as i64 - others as i64,
        cm_wakeup: cm.map(|c| c.0),
        cm_sampled: cm.map(|c| c.1),
        cm_partner_kicks: cm.map(|_| kicks),
        cm_takeovers: cm.map(|_| takeovers),
        block_fallbacks: fallbacks.as_ref().map_or(0, |f| f.0),
        block_error: fallbacks.map(|f| f.1),
    })
}

/// Appends one run's lines to the `--trace` file (see [`TRACE_HEADER`]).
fn write_trace(
    path: &std::path::Path,
    cfg: &MixConfig,
    e: MixExecutor,
    block_us: u64,
    round: usize,
    sh: &Shared,
    open_ns: u64,
) -> Result<(), String> {
    use std::io::Write;
    let err = |e: std::io::Error| format!("--trace {}: {e}", path.display());
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(err)?;
    let mut w = std::io::BufWriter::new(f);
    for p in 0..cfg.producers {
        for i in 0..cfg.jobs {
            let idx = p * cfg.jobs + i;
            let at = sh.submit_ns[idx]
                .load(Ordering::Relaxed)
                .saturating_sub(open_ns);
            writeln!(
                w,
                "{},{block_us},{round},{p},{i},{},{},{},{}",
                e.name(),
                u8::from(cfg.blocks(p, i)),
                at / 1000,
                sh.delay_ns[idx].load(Ordering::Relaxed),
                sh.cpu[idx].load(Ordering::Relaxed),
            )
            .map_err(err)?;
        }
    }
    w.flush().map_err(err)
}
