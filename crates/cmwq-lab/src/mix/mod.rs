//! `cmwq mix`: one-off jobs of which a few block without saying so, on cmwq
//! and on the pools a user would pick instead, in the same run (issue 32).
//!
//! Concurrency management keeps one running worker per CPU and starts another
//! the moment one blocks. The kernel learns of the block from the scheduler;
//! user space learns of it from an annotation (`cmwq::blocking`) or not at all
//! unless the engine detects it. Real code blocks without annotating (a file
//! read, a lock, a DNS lookup), so this workload measures both.
//!
//! # The workload
//!
//! - **Producers**: `P` threads (`--producers`, default 4), not pinned, each
//!   submitting `N` one-off jobs (`--jobs`, default 1000) on a fixed schedule
//!   of `--rate` jobs per second (default 8000): job `i` is due at
//!   `start + i / rate`; a producer that falls behind submits at once, so the
//!   mean rate holds. The default is the shape (4 × 1000 jobs in
//!   about 125 ms) and keeps a 2-vCPU machine about half busy: 4 × 8000
//!   jobs/s at about 28 µs of process CPU each (the 20 µs burn plus the
//!   handoffs and the producers' own timer wakeups) is 0.9 CPUs, and the
//!   `busy` column measured 45-48% for crossbeam and cmwq with no blocking
//!   job (`--block-every 0`), 62% for tokio `spawn_blocking`.
//! - **Blocking jobs**: job `i` of producer `p` blocks when
//!   `(i + p) % K == 0` (`--block-every K`, default 10; 0: none block), for
//!   `B` µs (`--block-us`, default 2000; a list runs each in turn). How it
//!   blocks (`--block-kind`):
//!   - `sleep`: `std::thread::sleep(B)`;
//!   - `mutex`: takes a mutex that a helper thread holds for `B` at a time,
//!     letting go for a moment in between: a contended lock, the wait is
//!     anything from 0 to `B` (about `B/2` on average);
//!   - `pipe`: reads one byte from a fresh pipe that a timer thread writes
//!     `B` after the job asked: a read of a slow file or socket.
//! - **CPU jobs**: the others burn `C` µs of CPU (`--cpu-us`, default 20), a
//!   loop calibrated once per process against the thread CPU clock, so a
//!   preempted job still burns `C` of CPU, not of wall time.
//! - **Annotated**: the `cmwq_annotated` executor wraps each block in
//!   `cmwq::blocking(..)`; every other executor blocks unannotated.
//!
//! # The executors
//!
//! cmwq, always: `cmwq` (a fresh default unbound queue, `execute`),
//! `cmwq_annotated` (the same, blocks annotated) and `cmwq_bound` (a bound
//! queue, `execute` on the producer's CPU, unannotated). Peers (`--vs`, in
//! this order for `all`): `rayon` (`spawn` on a pool of `--workers` threads,
//! default the online CPUs, as rayon's default pool), `tokio_blocking`
//! (`spawn_blocking` on a runtime with tokio's defaults: up to 512 blocking
//! threads, unlike `cmwq bench`, which caps it), `crossbeam` (`--workers`
//! threads on one channel) and `threadpool` (`--workers` threads).
//!
//! # What is measured, per run
//!
//! - **Queueing delay**: per job, from just before its submit call to the
//!   first instruction of the job on a worker; percentiles (the bench's
//!   index rule, [`crate::bench::percentile`]) separately for the CPU jobs
//!   (the figure that shows whether blocked workers hold the CPU jobs up) and
//!   the blocking jobs.
//! - **Wall**: from the start gate to the last job done.
//! - **CPU per job**: process CPU time (`getrusage`, user + sys, every
//!   thread: the producers' timer wakeups and the 1 ms thread sampler too,
//!   whose share grows with the wall) over the run, divided by the jobs;
//!   **busy**: the same CPU time over wall × CPUs.
//! - **Peak threads**: a sampler thread reads the process's thread count
//!   (`/proc/self/stat`) every millisecond during the run; the peak minus the
//!   threads that are not the executor's: the harness's own (the producers,
//!   which live until the last job is done, the sampler, the block kind's
//!   helper) and whatever the process had before the executor was built.
//!   cmwq's per-CPU pools outlive a workqueue and keep idle workers (as the
//!   kernel's do), so for cmwq the workers its pools had before the run count
//!   as the executor's: they are what it runs on. Before each run the harness
//!   waits (at most 5 s) until the threads of the runs before it are gone.
//! - **Exactly once**: every job counts its runs; a run whose jobs did not
//!   each run once is reported as such ([`MixRun::ran_once`]), and `cmwq mix`
//!   fails it. A run in which no job completes for 20 s fails instead of
//!   hanging.
//!
//! Rounds (`--rounds`, default 3) interleave everything:
//! `round { B { executor } }`, and rows give the median over rounds with the
//! minimum and maximum, because only same-run comparisons mean anything on a
//! shared machine.

pub mod exec;
pub mod report;
pub mod runner;
pub mod svg;
pub mod work;

use std::time::Duration;

use crate::limits::Limits;

pub use exec::{MixExecutor, executor_names, executors, peer_names};
pub use report::{JSON_SCHEMA, MixDoc, table, to_json};
pub use runner::{MixReport, MixRow, MixRun, run_mix};
pub use work::BlockKind;

/// Longest block accepted (`--block-us`), µs: 10 s.
pub const MAX_BLOCK_US: u64 = 10_000_000;
/// Longest CPU burn accepted (`--cpu-us`), µs: 1 s.
pub const MAX_CPU_US: u64 = 1_000_000;
/// Highest arrival rate accepted (`--rate`), jobs per second per producer.
pub const MAX_RATE: f64 = 10_000_000.0;
/// Bytes a run keeps per job: its delay, its run count, its boxed closure in
/// a queue, rounded up.
pub const BYTES_PER_JOB: u64 = 128;

/// What one `cmwq mix` invocation runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MixConfig {
    /// Producer threads `P` (`--producers`).
    pub producers: usize,
    /// Jobs per producer `N` (`--jobs`).
    pub jobs: usize,
    /// Jobs per second each producer submits (`--rate`).
    pub rate: f64,
    /// One job in `K` blocks (`--block-every`; 0: none).
    pub block_every: usize,
    /// Block times to run, µs, each in turn (`--block-us`).
    pub block_us: Vec<u64>,
    /// How a blocking job blocks (`--block-kind`).
    pub block_kind: BlockKind,
    /// CPU time each other job burns, µs (`--cpu-us`).
    pub cpu_us: u64,
    /// Rounds (`--rounds`).
    pub rounds: usize,
    /// Peers run beside cmwq (`--vs`), in `--vs all` order.
    pub vs: Vec<String>,
    /// Worker threads of rayon, crossbeam and threadpool (`--workers`).
    pub workers: usize,
    /// A run in which no job completes for this long fails (not in the JSON).
    #[serde(skip)]
    pub stall_timeout: Duration,
    /// Where to write one CSV line per job (`--trace`; not in the JSON): see
    /// [`runner::TRACE_HEADER`].
    #[serde(skip)]
    pub trace: Option<std::path::PathBuf>,
}

impl MixConfig {
    /// The shape: 4 producers × 1000 jobs at 8000/s each, 1 in 10
    /// sleeping 2 ms, the others burning 20 µs, 3 rounds, no peers, `workers`
    /// workers for the peers.
    pub fn with_defaults(workers: usize) -> MixConfig {
        MixConfig {
            producers: 4,
            jobs: 1000,
            rate: 8000.0,
            block_every: 10,
            block_us: vec![2000],
            block_kind: BlockKind::Sleep,
            cpu_us: 20,
            rounds: 3,
            vs: Vec::new(),
            workers,
            stall_timeout: crate::bench::runner::STALL_TIMEOUT,
            trace: None,
        }
    }

    /// Reject values the run cannot honour; the message names the option and value.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_with(&Limits::of_this_process())
    }

    /// [`validate`](Self::validate) against the given limits.
    pub fn validate_with(&self, limits: &Limits) -> Result<(), String> {
        if self.producers == 0 {
            return Err("--producers 0: need at least one producer".into());
        }
        limits.check_threads("--producers", self.producers, "producer threads")?;
        if self.jobs == 0 {
            return Err("--jobs 0: each producer needs at least one job".into());
        }
        let total = (self.jobs as u64)
            .checked_mul(self.producers as u64)
            .and_then(|n| n.checked_mul(BYTES_PER_JOB));
        limits.check_memory(
            "--jobs",
            self.jobs,
            total,
            &format!(
                "{} producers x {} jobs ({BYTES_PER_JOB} bytes a job)",
                self.producers, self.jobs
            ),
            "",
        )?;
        if !(self.rate.is_finite() && self.rate > 0.0 && self.rate <= MAX_RATE) {
            return Err(format!(
                "--rate {}: jobs per second per producer must be above 0 and at most {MAX_RATE}",
                self.rate
            ));
        }
        if self.block_us.is_empty() {
            return Err("--block-us: no block time given".into());
        }
        if let Some(b) = self.block_us.iter().find(|&&b| b > MAX_BLOCK_US) {
            return Err(format!(
                "--block-us {b}: at most {MAX_BLOCK_US} (10 s) a block"
            ));
        }
        if self.cpu_us > MAX_CPU_US {
            return Err(format!(
                "--cpu-us {}: at most {MAX_CPU_US} (1 s) a job",
                self.cpu_us
            ));
        }
        if self.rounds == 0 {
            return Err("--rounds 0: need at least one round".into());
        }
        if self.rounds > crate::bench::config::MAX_ROUNDS {
            return Err(format!(
                "--rounds {}: at most {} rounds",
                self.rounds,
                crate::bench::config::MAX_ROUNDS
            ));
        }
        if self.workers == 0 {
            return Err("--workers 0: every pool needs at least one worker".into());
        }
        limits.check_threads("--workers", self.workers, "worker threads")?;
        Ok(())
    }

    /// Whether job `i` of producer `p` blocks (1 in `block_every`, staggered
    /// across producers so that their blocks do not line up).
    pub fn blocks(&self, p: usize, i: usize) -> bool {
        self.block_every != 0 && (i + p).is_multiple_of(self.block_every)
    }
}

/// Parse `--block-us 500,2000,20000`: block times in µs, in the order given,
/// without duplicates. The message names the option and the bad value.
pub fn parse_block_us(list: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for v in list.split(',').map(str::trim).filter(|v| !v.is_empty()) {
        let us: u64 = v.parse().map_err(|_| {
            format!("--block-us: '{v}' is not a number of microseconds (e.g. 500,2000,20000)")
        })?;
        if !out.contains(&us) {
            out.push(us);
        }
    }
    if out.is_empty() {
        return Err(format!("--block-us '{list}': no block time given"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_value() {
        let ok = MixConfig::with_defaults(2);
        assert_eq!(ok.validate(), Ok(()));
        let bad = |f: fn(&mut MixConfig), needle: &str| {
            let mut c = ok.clone();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.contains(needle), "{e:?} lacks {needle:?}");
        };
        bad(|c| c.producers = 0, "--producers 0");
        bad(|c| c.producers = 5000, "--producers 5000");
        bad(|c| c.jobs = 0, "--jobs 0");
        bad(|c| c.jobs = usize::MAX, "--jobs 18446744073709551615");
        bad(|c| c.rate = 0.0, "--rate 0");
        bad(|c| c.rate = f64::NAN, "--rate NaN");
        bad(|c| c.rate = 1e9, "--rate 1000000000");
        bad(|c| c.block_us = vec![], "--block-us");
        bad(
            |c| c.block_us = vec![500, 10_000_001],
            "--block-us 10000001",
        );
        bad(|c| c.cpu_us = 1_000_001, "--cpu-us 1000001");
        bad(|c| c.rounds = 0, "--rounds 0");
        bad(|c| c.rounds = 10_001, "--rounds 10001");
        bad(|c| c.workers = 0, "--workers 0");
    }

    #[test]
    fn one_job_in_k_blocks_staggered() {
        let mut c = MixConfig::with_defaults(2);
        let n = |c: &MixConfig, p| (0..1000).filter(|&i| c.blocks(p, i)).count();
        assert_eq!(n(&c, 0), 100);
        assert_eq!(n(&c, 3), 100);
        assert!(c.blocks(0, 0) && !c.blocks(1, 0) && c.blocks(1, 9));
        c.block_every = 0;
        assert_eq!(n(&c, 0), 0);
        c.block_every = 1;
        assert_eq!(n(&c, 2), 1000);
    }

    #[test]
    fn block_lists_parse_in_order() {
        assert_eq!(
            parse_block_us("500, 2000,20000,500").unwrap(),
            vec![500, 2000, 20000]
        );
        let e = parse_block_us("500,2ms").unwrap_err();
        assert!(e.contains("'2ms'"), "{e}");
        assert!(parse_block_us(",").is_err());
    }
}
