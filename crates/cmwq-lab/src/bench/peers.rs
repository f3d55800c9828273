//! The peers: the user-space executors a newcomer would pick instead of cmwq.
//!
//! Every peer gets the same number of worker threads (`--workers`, default: online
//! CPUs) and receives, per submit, one boxed closure that only signals the
//! producer's [`Completion`]: the boxing is part of what their enqueue costs, as it
//! is in real use. None of them has work-item semantics (no pending bit, no
//! flush/cancel of one item, no non-reentrancy): they are the cost of *not* having
//! those, which is why they bound what cmwq may spend on them.
//!
//! - `rayon`: a [`rayon::ThreadPool`] and `spawn` (work stealing, spins before sleeping);
//! - `tokio`: a multi-thread runtime with `worker_threads = workers`, `Handle::spawn`;
//! - `tokio_blocking`: `spawn_blocking` with `max_blocking_threads = workers` (and one
//!   async worker, which stays idle); the cap matters, the default grows to 512;
//! - `crossbeam`: `workers` threads receiving boxed jobs from one unbounded
//!   crossbeam-channel (the textbook pool);
//! - `threadpool`: the `threadpool` crate (an mpsc channel behind a mutex);
//! - `limit`: no shared queue at all, one `Mutex<VecDeque>` and one pinned worker per
//!   CPU, the producer submits to the queue of the CPU it runs on. It is the ceiling
//!   for an executor whose workers sleep: on a VM every cross-vCPU wakeup is an IPI
//!   (~40 µs each way on the build machine), and only per-CPU queues avoid them.
//!   cmwq's `cpu` scope does what `limit` does plus all the kernel's semantics.
//!   Worker `i` is pinned to `cpus[i % ncpu]` and a producer on CPU `c` uses queue
//!   `c % workers`, so with more workers than CPUs the extra queues stay unused.
//!
//! `cmwq mix` runs the closure peers too (rayon, tokio_blocking, crossbeam,
//! threadpool), built by the same constructors and fed through [`JobPool`]; there
//! `tokio_blocking` keeps tokio's defaults (a worker per CPU, up to 512 blocking
//! threads), since growing the blocking pool is what a user gets from it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, JoinHandle, Thread};

use super::completion::Completion;
use super::exec::{BuildCtx, Executor, ExecutorFactory, Producer};
use super::sys;

/// A boxed job, as every closure pool receives it.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// A pool that runs boxed one-off jobs, shared by every thread that submits
/// (`cmwq mix`'s producers): what each closure peer is underneath.
pub trait JobPool: Send + Sync {
    /// Run `job` once, on one of the pool's threads.
    fn submit(&self, job: Job);
}

/// Every peer, in the order `--vs all` runs them.
pub fn all() -> Vec<Box<dyn ExecutorFactory>> {
    vec![
        Box::new(RayonPeer),
        Box::new(TokioPeer),
        Box::new(TokioBlockingPeer),
        Box::new(CrossbeamPeer),
        Box::new(ThreadpoolPeer),
        Box::new(LimitPeer),
    ]
}

/// A producer that boxes one closure per submit and hands it to `spawn`.
struct ClosureProducer<F: FnMut(Job)> {
    done: Arc<Completion>,
    spawn: F,
}

impl<F: FnMut(Job)> Producer for ClosureProducer<F> {
    #[inline]
    fn submit(&mut self, _slot: usize) {
        let d = self.done.clone();
        (self.spawn)(Box::new(move || d.complete()));
    }
}

fn closure_producer<'a>(
    done: Arc<Completion>,
    spawn: impl FnMut(Job) + 'a,
) -> Box<dyn Producer + 'a> {
    Box::new(ClosureProducer { done, spawn })
}

// ---------------------------------------------------------------------------- rayon

/// `rayon::ThreadPool::spawn` on a pool of `workers` threads.
pub struct RayonPeer;

/// A rayon pool (the `rayon` peer).
pub struct RayonExec(rayon::ThreadPool);

impl RayonExec {
    /// A pool of `workers` threads.
    pub fn start(workers: usize) -> Result<RayonExec, String> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("rayon/{i}"))
            .build()
            .map_err(|e| format!("rayon: {e}"))?;
        Ok(RayonExec(pool))
    }
}

impl JobPool for RayonExec {
    fn submit(&self, job: Job) {
        self.0.spawn(job);
    }
}

impl ExecutorFactory for RayonPeer {
    fn name(&self) -> &'static str {
        "rayon"
    }
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Executor>, String> {
        Ok(Box::new(RayonExec::start(ctx.workers)?))
    }
}

impl Executor for RayonExec {
    fn producer<'a>(
        &'a self,
        _: usize,
        _: usize,
        _: usize,
        done: Arc<Completion>,
    ) -> Box<dyn Producer + 'a> {
        closure_producer(done, move |j| self.0.spawn(j))
    }
}

// ---------------------------------------------------------------------------- tokio

/// `tokio::runtime::Handle::spawn` on a multi-thread runtime of `workers` workers.
pub struct TokioPeer;

struct TokioExec(tokio::runtime::Runtime);

impl ExecutorFactory for TokioPeer {
    fn name(&self) -> &'static str {
        "tokio"
    }
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Executor>, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(ctx.workers)
            .thread_name("tokio-wrk")
            .build()
            .map_err(|e| format!("tokio: {e}"))?;
        Ok(Box::new(TokioExec(rt)))
    }
}

impl Executor for TokioExec {
    fn producer<'a>(
        &'a self,
        _: usize,
        _: usize,
        _: usize,
        done: Arc<Completion>,
    ) -> Box<dyn Producer + 'a> {
        let h = self.0.handle().clone();
        closure_producer(done, move |j| {
            drop(h.spawn(async move { j() }));
        })
    }
}

/// `tokio::task::spawn_blocking` with `max_blocking_threads = workers`.
pub struct TokioBlockingPeer;

impl ExecutorFactory for TokioBlockingPeer {
    fn name(&self) -> &'static str {
        "tokio_blocking"
    }
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Executor>, String> {
        Ok(Box::new(TokioBlockingExec::start(Some(ctx.workers))?))
    }
}

/// A tokio runtime whose blocking pool runs the jobs (the `tokio_blocking` peer).
pub struct TokioBlockingExec(tokio::runtime::Runtime);

impl TokioBlockingExec {
    /// With `Some(cap)`: one async worker (idle) and at most `cap` blocking
    /// threads, as `cmwq bench` runs it. With `None`: tokio's defaults, as a
    /// user gets them (a worker per CPU, up to 512 blocking threads).
    pub fn start(cap: Option<usize>) -> Result<TokioBlockingExec, String> {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        if let Some(cap) = cap {
            b.worker_threads(1).max_blocking_threads(cap);
        }
        let rt = b
            .thread_name("tokio-blk")
            .build()
            .map_err(|e| format!("tokio_blocking: {e}"))?;
        Ok(TokioBlockingExec(rt))
    }
}

impl JobPool for TokioBlockingExec {
    fn submit(&self, job: Job) {
        drop(self.0.spawn_blocking(job));
    }
}

impl Executor for TokioBlockingExec {
    fn producer<'a>(
        &'a self,
        _: usize,
        _: usize,
        _: usize,
        done: Arc<Completion>,
    ) -> Box<dyn Producer + 'a> {
        let h = self.0.handle().clone();
        closure_producer(done, move |j| {
            drop(h.spawn_blocking(j));
        })
    }
}

// ---------------------------------------------------------------------------- crossbeam

/// A pool of `workers` threads receiving boxed jobs from one unbounded crossbeam channel.
pub struct CrossbeamPeer;

/// `workers` threads fed by one crossbeam channel (the `crossbeam` peer).
pub struct CrossbeamExec {
    tx: Option<crossbeam_channel::Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl ExecutorFactory for CrossbeamPeer {
    fn name(&self) -> &'static str {
        "crossbeam"
    }
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Executor>, String> {
        Ok(Box::new(CrossbeamExec::start(ctx.workers)?))
    }
}

impl CrossbeamExec {
    /// A pool of `workers` threads.
    pub fn start(workers: usize) -> Result<CrossbeamExec, String> {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let threads = (0..workers)
            .map(|i| {
                let rx = rx.clone();
                thread::Builder::new()
                    .name(format!("xbeam/{i}"))
                    .spawn(move || {
                        while let Ok(j) = rx.recv() {
                            j();
                        }
                    })
                    .map_err(|e| format!("crossbeam: spawn: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CrossbeamExec {
            tx: Some(tx),
            threads,
        })
    }
}

impl JobPool for CrossbeamExec {
    fn submit(&self, job: Job) {
        if let Some(tx) = &self.tx {
            // The receivers live as long as `self`: the send cannot fail.
            let _ = tx.send(job);
        }
    }
}

impl Executor for CrossbeamExec {
    fn producer<'a>(
        &'a self,
        _: usize,
        _: usize,
        _: usize,
        done: Arc<Completion>,
    ) -> Box<dyn Producer + 'a> {
        let tx = self.tx.clone().expect("crossbeam pool alive");
        closure_producer(done, move |j| tx.send(j).expect("crossbeam pool alive"))
    }
}

impl Drop for CrossbeamExec {
    fn drop(&mut self) {
        self.tx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

// ---------------------------------------------------------------------------- threadpool

/// The `threadpool` crate with `workers` threads.
pub struct ThreadpoolPeer;

/// The `threadpool` crate's pool (the `threadpool` peer).
pub struct ThreadpoolExec(threadpool::ThreadPool);

impl ThreadpoolExec {
    /// A pool of `workers` threads.
    pub fn start(workers: usize) -> ThreadpoolExec {
        ThreadpoolExec(
            threadpool::Builder::new()
                .num_threads(workers)
                .thread_name("threadpool".into())
                .build(),
        )
    }
}

impl JobPool for ThreadpoolExec {
    fn submit(&self, job: Job) {
        self.0.execute(job);
    }
}

impl ExecutorFactory for ThreadpoolPeer {
    fn name(&self) -> &'static str {
        "threadpool"
    }
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Executor>, String> {
        Ok(Box::new(ThreadpoolExec::start(ctx.workers)))
    }
}

impl Executor for ThreadpoolExec {
    fn producer<'a>(
        &'a self,
        _: usize,
        _: usize,
        _: usize,
        done: Arc<Completion>,
    ) -> Box<dyn Producer + 'a> {
        let pool = self.0.clone();
        closure_producer(done, move |j| pool.execute(j))
    }
    fn quiesce(&self) {
        self.0.join();
    }
}

// ---------------------------------------------------------------------------- limit

/// Bare per-CPU queues: the ceiling for a sleeping executor (see the module docs).
pub struct LimitPeer;

/// One CPU's queue and the state of its worker, on its own cache lines.
#[repr(align(128))]
struct CpuQueue {
    q: Mutex<VecDeque<Job>>,
    /// The worker announced it is about to park (or parked) on an empty queue.
    idle: AtomicBool,
    stop: AtomicBool,
    worker: OnceLock<Thread>,
}

struct LimitExec {
    queues: Arc<Vec<CpuQueue>>,
    threads: Vec<JoinHandle<()>>,
}

impl ExecutorFactory for LimitPeer {
    fn name(&self) -> &'static str {
        "limit"
    }
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Executor>, String> {
        let queues: Arc<Vec<CpuQueue>> = Arc::new(
            (0..ctx.workers)
                .map(|_| CpuQueue {
                    q: Mutex::new(VecDeque::new()),
                    idle: AtomicBool::new(false),
                    stop: AtomicBool::new(false),
                    worker: OnceLock::new(),
                })
                .collect(),
        );
        let qs = queues.clone();
        let threads = pinned_workers(ctx, "limit", move |i| limit_worker(&qs[i]))?;
        for (q, h) in queues.iter().zip(&threads) {
            let _ = q.worker.set(h.thread().clone());
        }
        Ok(Box::new(LimitExec { queues, threads }))
    }
}

/// Starts `ctx.workers` threads, the `i`th named `{name}/{i}`, pinned to
/// `ctx.cpus[i % ctx.cpus.len()]` and running `body(i)`: the per-CPU
/// workers of `limit` and of the model `kernel_min`.
pub(super) fn pinned_workers<F>(
    ctx: &BuildCtx<'_>,
    name: &str,
    body: F,
) -> Result<Vec<JoinHandle<()>>, String>
where
    F: Fn(usize) + Send + Clone + 'static,
{
    let mut threads = Vec::with_capacity(ctx.workers);
    for i in 0..ctx.workers {
        let cpu = ctx.cpus[i % ctx.cpus.len()];
        let body = body.clone();
        let h = thread::Builder::new()
            .name(format!("{name}/{i}"))
            .spawn(move || {
                let _ = sys::pin_current_thread(cpu);
                body(i);
            })
            .map_err(|e| format!("{name}: spawn: {e}"))?;
        threads.push(h);
    }
    Ok(threads)
}

/// The worker of one CPU queue.
///
/// The no-lost-wakeup argument: the worker stores `idle = true` *before* it re-checks
/// the queue under the lock; a submitter pushes under the lock *before* it swaps
/// `idle` to false. Either the re-check sees the job, or the push took the lock
/// after the re-check, so the submitter's swap comes after the worker's store, sees
/// `true`, and unparks. The worker parks only while `idle` is still true.
fn limit_worker(cq: &CpuQueue) {
    loop {
        let job = cq.q.lock().expect("limit queue").pop_front();
        if let Some(j) = job {
            j();
            continue;
        }
        if cq.stop.load(Ordering::Acquire) {
            return;
        }
        cq.idle.store(true, Ordering::SeqCst);
        if !cq.q.lock().expect("limit queue").is_empty() {
            cq.idle.store(false, Ordering::SeqCst);
            continue;
        }
        while cq.idle.load(Ordering::SeqCst) && !cq.stop.load(Ordering::Acquire) {
            thread::park();
        }
    }
}

struct LimitProducer<'a> {
    queues: &'a [CpuQueue],
    done: Arc<Completion>,
}

impl Producer for LimitProducer<'_> {
    #[inline]
    fn submit(&mut self, _slot: usize) {
        let cq = &self.queues[sys::current_cpu() % self.queues.len()];
        let d = self.done.clone();
        cq.q.lock()
            .expect("limit queue")
            .push_back(Box::new(move || d.complete()));
        if cq.idle.swap(false, Ordering::SeqCst)
            && let Some(w) = cq.worker.get()
        {
            w.unpark();
        }
    }
}

impl Executor for LimitExec {
    fn producer<'a>(
        &'a self,
        _: usize,
        _: usize,
        _: usize,
        done: Arc<Completion>,
    ) -> Box<dyn Producer + 'a> {
        Box::new(LimitProducer {
            queues: &self.queues,
            done,
        })
    }
}

impl Drop for LimitExec {
    fn drop(&mut self) {
        stop_workers(
            self.queues.iter().map(|q| (&q.stop, &q.worker)),
            &mut self.threads,
        );
    }
}

/// Stops per-CPU workers started by [`pinned_workers`]: raises each one's
/// `stop` flag and wakes it, then joins every thread.
pub(super) fn stop_workers<'a>(
    workers: impl Iterator<Item = (&'a AtomicBool, &'a OnceLock<Thread>)>,
    threads: &mut Vec<JoinHandle<()>>,
) {
    for (stop, worker) in workers {
        stop.store(true, Ordering::Release);
        if let Some(t) = worker.get() {
            t.unpark();
        }
    }
    for t in threads.drain(..) {
        let _ = t.join();
    }
}
