//! The executors of the mix: cmwq three ways, and the closure peers of
//! `cmwq bench` (built by the same constructors, [`mod@crate::bench::peers`]).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::bench::peers::{
    CrossbeamExec, Job, JobPool, RayonExec, ThreadpoolExec, TokioBlockingExec,
};

/// One executor of the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixExecutor {
    /// A default unbound cmwq queue, `execute`, blocks unannotated.
    Cmwq,
    /// The same, each block wrapped in `cmwq::blocking(..)`.
    CmwqAnnotated,
    /// A bound (per-CPU) cmwq queue, `execute` on the producer's CPU, unannotated.
    CmwqBound,
    /// `rayon::ThreadPool::spawn`, `--workers` threads.
    Rayon,
    /// tokio `spawn_blocking` with tokio's defaults (up to 512 blocking threads).
    TokioBlocking,
    /// `--workers` threads on one crossbeam channel.
    Crossbeam,
    /// The `threadpool` crate, `--workers` threads.
    Threadpool,
}

/// Every executor, cmwq's first, then the peers in `--vs all` order.
pub const ALL: [MixExecutor; 7] = [
    MixExecutor::Cmwq,
    MixExecutor::CmwqAnnotated,
    MixExecutor::CmwqBound,
    MixExecutor::Rayon,
    MixExecutor::TokioBlocking,
    MixExecutor::Crossbeam,
    MixExecutor::Threadpool,
];

/// A pool built for one run.
pub trait MixPool: JobPool {
    /// Workers of this pool that count as the executor's right now, when the
    /// pool may have had some before it was built (cmwq's pools outlive a
    /// workqueue); `None` when every thread of the pool is new.
    fn own_threads(&self) -> Option<usize> {
        None
    }

    /// cmwq only: the workqueue's `(cm_wakeup, sampled)` counters, how often
    /// concurrency management woke another worker, and how many of the
    /// workers it found asleep were found by the engine rather than told.
    fn cm_counters(&self) -> Option<(u64, u64)> {
        None
    }
}

impl MixPool for RayonExec {}
impl MixPool for TokioBlockingExec {}
impl MixPool for CrossbeamExec {}
impl MixPool for ThreadpoolExec {}

/// A cmwq workqueue made for one run.
struct CmwqPool {
    wq: cmwq::Workqueue,
    bound: bool,
}

impl JobPool for CmwqPool {
    fn submit(&self, job: Job) {
        // False only while the queue drains, which it never does here.
        self.wq.execute(job);
    }
}

impl MixPool for CmwqPool {
    /// Workers of every cmwq pool of the run's kind (per-CPU pools for a
    /// bound queue, the others for an unbound one): the mix makes no other
    /// queue, so those are the pools the run's queue uses.
    fn own_threads(&self) -> Option<usize> {
        let s = cmwq::snapshot();
        Some(
            s.pools
                .iter()
                .filter(|p| p.cpu.is_some() == self.bound)
                .map(|p| p.workers)
                .sum(),
        )
    }

    fn cm_counters(&self) -> Option<(u64, u64)> {
        let s = cmwq::snapshot();
        let w = s.workqueues.iter().find(|w| w.name == self.wq.name())?;
        Some((w.stats.cm_wakeup, w.stats.sampled))
    }
}

impl MixExecutor {
    /// The name `--vs` and the reports use.
    pub fn name(self) -> &'static str {
        match self {
            MixExecutor::Cmwq => "cmwq",
            MixExecutor::CmwqAnnotated => "cmwq_annotated",
            MixExecutor::CmwqBound => "cmwq_bound",
            MixExecutor::Rayon => "rayon",
            MixExecutor::TokioBlocking => "tokio_blocking",
            MixExecutor::Crossbeam => "crossbeam",
            MixExecutor::Threadpool => "threadpool",
        }
    }

    /// A peer, run only when `--vs` names it (cmwq's executors always run).
    pub fn is_peer(self) -> bool {
        !matches!(
            self,
            MixExecutor::Cmwq | MixExecutor::CmwqAnnotated | MixExecutor::CmwqBound
        )
    }

    /// Whether its jobs wrap their blocks in `cmwq::blocking(..)`.
    pub fn annotated(self) -> bool {
        self == MixExecutor::CmwqAnnotated
    }

    /// A fresh pool for one run; `workers` sizes the fixed-size peers.
    pub fn build(self, workers: usize) -> Result<Box<dyn MixPool>, String> {
        Ok(match self {
            MixExecutor::Cmwq | MixExecutor::CmwqAnnotated | MixExecutor::CmwqBound => {
                static SEQ: AtomicU64 = AtomicU64::new(0);
                let bound = self == MixExecutor::CmwqBound;
                let name = format!("mix_wq{}", SEQ.fetch_add(1, Ordering::Relaxed));
                let b = cmwq::Workqueue::builder(&name);
                let b = if bound { b } else { b.unbound() };
                let wq = b
                    .build()
                    .map_err(|e| format!("{}: building {name}: {e}", self.name()))?;
                Box::new(CmwqPool { wq, bound })
            }
            MixExecutor::Rayon => Box::new(RayonExec::start(workers)?),
            MixExecutor::TokioBlocking => Box::new(TokioBlockingExec::start(None)?),
            MixExecutor::Crossbeam => Box::new(CrossbeamExec::start(workers)?),
            MixExecutor::Threadpool => Box::new(ThreadpoolExec::start(workers)),
        })
    }
}

/// The executors a run with peers `vs` runs, in schedule order.
pub fn executors(vs: &[String]) -> Vec<MixExecutor> {
    ALL.into_iter()
        .filter(|e| !e.is_peer() || vs.iter().any(|v| v == e.name()))
        .collect()
}

/// Names of the peers `--vs` may name, in `--vs all` order.
pub fn peer_names() -> Vec<&'static str> {
    ALL.into_iter()
        .filter(|e| e.is_peer())
        .map(MixExecutor::name)
        .collect()
}

/// Names of every executor, cmwq's first.
pub fn executor_names() -> Vec<&'static str> {
    ALL.into_iter().map(MixExecutor::name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmwq_always_peers_on_request() {
        let names = |v: &[&str]| -> Vec<&str> {
            let vs: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            executors(&vs).into_iter().map(MixExecutor::name).collect()
        };
        assert_eq!(names(&[]), ["cmwq", "cmwq_annotated", "cmwq_bound"]);
        assert_eq!(
            names(&["crossbeam", "tokio_blocking"]),
            [
                "cmwq",
                "cmwq_annotated",
                "cmwq_bound",
                "tokio_blocking",
                "crossbeam"
            ]
        );
        assert_eq!(
            peer_names(),
            ["rayon", "tokio_blocking", "crossbeam", "threadpool"]
        );
        assert!(MixExecutor::CmwqAnnotated.annotated());
        assert!(!MixExecutor::Cmwq.annotated());
        assert_eq!(executor_names().len(), ALL.len());
    }
}
