//! `cmwq bench`: the kernel's `lib/test_workqueue.c`, in user space, beside the peers.
//!
//! # What is measured, and why this way
//!
//! The kernel benchmark binds one producer kthread per online CPU and has each queue
//! a work item whose function only calls `complete()`, wait for that completion, and
//! repeat: **one item in flight per producer**. With one in flight there is no
//! queue depth to hide behind, so every item pays the whole handoff: enqueue, wake an
//! idle worker, run, wake the producer. That is the cost a workqueue adds to every
//! deferred action, and it is dominated by where the wakeups land (on a VM a
//! cross-vCPU wakeup is an IPI, ~40 µs each way on the build machine, a same-vCPU one
//! ~1 µs). This module reproduces it and runs the user-space executors people would
//! pick instead in the same process, in interleaved rounds, with the same completion.
//!
//! - **Producers**: `P` threads (`--threads`, default one per online CPU), producer
//!   `i` pinned with `sched_setaffinity` to `cpus[i % cpus.len()]` (the kernel's
//!   `kthread_bind`), `N` items each (`--items`, default 50000).
//! - **In flight**: one item (the kernel's shape), or `--batch B`: queue `B` items,
//!   wait for all `B`, repeat; that measures queue throughput, not wakeup latency.
//! - **Start**: every producer builds its submit handles, then waits at a gate the
//!   main thread opens at once (`complete_all(&start_comp)`); the clock starts there.
//! - **Enqueue latency**: only the [`Producer::submit`] call is timed, as the kernel
//!   times only `queue_work()`.
//! - **Round trip**: per item, from just before its submit to the moment its
//!   producer's [`Completion::wait`] returns. With one in flight that is queue to
//!   completion *seen by the waiter* (it includes waking the producer, as
//!   `wait_for_completion` does). With a batch every item of the batch ends at the
//!   same instant, when the whole batch has completed, so early items carry the
//!   batch's queueing time: it is the latency a batching producer observes. The work
//!   function does not read the clock, so the callback stays a bare `complete()`.
//! - **Throughput**: total items / elapsed, elapsed = gate open to every producer done
//!   plus [`Executor::quiesce`] (`flush_workqueue`), as in the kernel.
//! - **Percentiles**: samples of all producers merged and sorted, index
//!   `total * P / 100` ([`summary::percentile`]); p50/p90/p95 as the kernel, plus p99
//!   and max.
//! - **CPU**: `getrusage(RUSAGE_SELF)` user+sys over the timed interval, per million
//!   items; voluntary context switches per item (every futex sleep is one).
//! - **Idle CPU**: the process CPU time consumed over 200 ms right after the run, the
//!   executor still alive and idle. A pool that sleeps shows ~0; one that spins or
//!   polls shows its cost here.
//! - **Threads left**: threads of the process after the executor is dropped (waiting
//!   up to 500 ms for them to exit) minus before it was built.
//! - **Lost or doubled items**: completions are counted; a run in which no item
//!   completes for 20 s (`BenchConfig::stall_timeout`) fails with the counts instead
//!   of hanging, and `cmwq bench` rejects a run whose count is not `P × N`.
//! - **Rounds**: executors (and cmwq's scopes) alternate, `A B C A B C ...`, `--rounds`
//!   times; rows give the median with min and max, because this machine drifts by up
//!   to 2x between runs and only same-run comparisons mean anything.
//!
//! # Plugging an executor in
//!
//! Implement [`ExecutorFactory`] (name, whether it has scopes, build one for a run),
//! [`Executor`] (hand out a [`Producer`] per producer thread, optionally quiesce) and
//! [`Producer`] (`submit(slot)`). See [`exec`] for the contract. cmwq's adapter is in
//! `cmwq_exec.rs` and is wired in [`subjects`] once the engine's API exists.

pub mod cmwq_exec;
pub mod completion;
pub mod config;
pub mod exec;
pub mod kernel_min;
pub mod peers;
pub mod report;
pub mod runner;
pub mod summary;
pub mod svg;
pub mod sys;

pub use completion::Completion;
pub use config::{BenchConfig, KERNEL_SCOPE_ORDER, parse_scopes, parse_vs};
pub use exec::{BuildCtx, Executor, ExecutorFactory, Producer};
pub use report::{KernelRow, kernel_lines, report_kernel_lines, table, to_json};
pub use runner::{Progress, Report, run_bench};
pub use summary::{Mmm, Percentiles, RowSummary, RunResult, percentile};

/// The executors under test, run on every selected scope (if scoped) in every round,
/// before the peers.
///
/// Empty until the cmwq engine lands; then the engine author adds
/// `pub mod cmwq_exec;` above and returns `vec![Box::new(cmwq_exec::CmwqFactory)]`.
pub fn subjects() -> Vec<Box<dyn ExecutorFactory>> {
    vec![Box::new(cmwq_exec::CmwqFactory)]
}

/// The peers `--vs` may name, in the order `--vs all` runs them, then the
/// models ([`MODELS`]), which only their names select.
pub fn peers() -> Vec<Box<dyn ExecutorFactory>> {
    let mut v = peers::all();
    v.push(Box::new(kernel_min::KernelMinPeer));
    v
}

/// Executors `--vs` runs only when named: models to measure against, not
/// peers a user would pick ([`kernel_min`]).
pub const MODELS: &[&str] = &[kernel_min::NAME];

/// Names of [`peers()`], for `--vs` parsing and help.
pub fn peer_names() -> Vec<&'static str> {
    peers().iter().map(|p| p.name()).collect()
}
