//! The executor abstraction: one shape for closure-based pools and for cmwq's work items.
//!
//! The kernel benchmark does `INIT_WORK` + `queue_work` per item on a work item that
//! lives in the producer's frame. cmwq follows the kernel: a `cmwq::Work` item
//! is created once and re-queued, so the cost of creating it must not be charged to
//! the enqueue. Closure pools (rayon, tokio, channels) have no such object: they box
//! a fresh closure per submit, and that allocation *is* part of their enqueue cost.
//!
//! Both fit one shape: before the start barrier the harness asks the executor for a
//! [`Producer`] per producer thread, telling it how many items that producer keeps in
//! flight (`slots`: 1, or `--batch B`) and handing it the producer's [`Completion`].
//! cmwq pre-creates one work item per slot bound to the completion; peers keep a
//! handle to their pool and the completion. The timed call is then always
//! [`Producer::submit`]`(slot)`: "queue the item of this slot", whatever that costs
//! the executor.
//!
//! Contract for implementors:
//! - the item submitted for a slot must call [`Completion::complete`] exactly once,
//!   and do nothing else (the kernel's work function only `complete()`s);
//! - a slot is never re-submitted before its previous item signalled completion;
//! - [`Executor::quiesce`] returns once the executor has nothing queued or running
//!   (`flush_workqueue`); the elapsed time includes it, as the kernel's does;
//! - dropping the [`Executor`] stops its threads (the harness counts threads left).

use std::sync::Arc;

use cmwq::topology::Scope;

use super::completion::Completion;

/// One producer's submit handle, created on (and used only by) the producer's thread.
pub trait Producer {
    /// Queue the item of in-flight slot `slot` (`0..slots`). This call is what the
    /// enqueue latency times.
    fn submit(&mut self, slot: usize);
}

/// A running executor (a workqueue, a thread pool, a runtime), built for one run.
pub trait Executor: Send + Sync {
    /// The submit handle of producer `id`, pinned to CPU `cpu`, which keeps up to
    /// `slots` items in flight; every item signals `done`. Called on the producer's
    /// own thread, after it was pinned and before the start barrier.
    fn producer<'a>(
        &'a self,
        id: usize,
        cpu: usize,
        slots: usize,
        done: Arc<Completion>,
    ) -> Box<dyn Producer + 'a>;

    /// Wait until nothing is queued or running (`flush_workqueue`). The default does
    /// nothing: once every producer's completion fired, closure pools are idle.
    fn quiesce(&self) {}
}

/// What an executor is built with, for one run.
#[derive(Clone, Copy, Debug)]
pub struct BuildCtx<'a> {
    /// Worker threads (`--workers`, default: online CPUs). Executors that size their
    /// pools themselves (cmwq) may ignore it and say so in their docs.
    pub workers: usize,
    /// The affinity scope for this run; `None` for executors that are not
    /// [`scoped`](ExecutorFactory::scoped).
    pub scope: Option<Scope>,
    /// `--synthetic SPEC`, passed through untouched for executors that understand it.
    pub synthetic: Option<&'a str>,
    /// Producer threads of the run (P).
    pub producers: usize,
    /// cmwq only: `affinity_strict` for the run's workqueue.
    pub strict: bool,
    /// cmwq only: wake workers under the pool lock (the pre-2026 order).
    pub wake_under_lock: bool,
    /// cmwq only: unbound pools not concurrency managed (the kernel's way).
    pub unmanaged: bool,
    /// cmwq only: cores per `cache_shard` pod (`None`: the library's default).
    pub cache_shard_size: Option<usize>,
    /// cmwq only: submit one-off closures with `spawn` instead of re-queueing
    /// a `Work` per slot.
    pub spawn: bool,
    /// cmwq only: submit handle-less one-off closures with `execute`.
    pub execute: bool,
    /// The CPUs this process may run on, in ascending order (producer `i` is pinned
    /// to `cpus[i % cpus.len()]`).
    pub cpus: &'a [usize],
}

/// Builds one kind of executor; the harness builds a fresh one for every run.
pub trait ExecutorFactory: Send + Sync {
    /// The name used by `--vs` and in every report (`rayon`, `cmwq`, ...).
    fn name(&self) -> &'static str;

    /// Whether the executor has affinity scopes: scoped executors run once per
    /// selected scope, the others once per round with scope `-`.
    fn scoped(&self) -> bool {
        false
    }

    /// A new executor for one run.
    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Executor>, String>;
}
