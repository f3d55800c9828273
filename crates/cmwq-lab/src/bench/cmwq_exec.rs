//! The cmwq adapter: the subject of `cmwq bench`.
//!
//! NOT declared in `bench/mod.rs` yet: it is written against the engine's announced
//! API and compiles once that lands. To wire it, the engine author adds
//! `pub mod cmwq_exec;` to `bench/mod.rs` and returns
//! `vec![Box::new(cmwq_exec::CmwqFactory)]` from `bench::subjects()`.
//!
//! Like the kernel benchmark, each run allocates a fresh unbound `bench_wq` with
//! the run's affinity scope (the kernel writes `affinity_scope` in sysfs between
//! runs; a fresh workqueue per run also gives every run cold pools, as every peer
//! gets a fresh pool). Unlike the peers, no closure is boxed per submit: each
//! producer creates one [`cmwq::Work`] per in-flight slot up front, bound to its
//! completion, and the timed call only re-queues it, as `queue_work()` re-queues a
//! `work_struct` that lives in the producer's frame.
//!
//! `--workers` does not apply: cmwq sizes its pools itself (concurrency management
//! is the point), so its worker count is whatever the engine decides per pod.

use std::sync::Arc;

use super::completion::Completion;
use super::exec::{BuildCtx, Executor, ExecutorFactory, Producer};

/// Builds an unbound `bench_wq` per run, with the run's affinity scope.
pub struct CmwqFactory;

impl ExecutorFactory for CmwqFactory {
    fn name(&self) -> &'static str {
        "cmwq"
    }

    fn scoped(&self) -> bool {
        true
    }

    fn build(&self, ctx: &BuildCtx<'_>) -> Result<Box<dyn Executor>, String> {
        let (wq, virt) = build_wq(ctx)?;
        Ok(Box::new(CmwqExec {
            wq,
            virt,
            producers: ctx.producers,
            spawn: ctx.spawn,
            execute: ctx.execute,
        }))
    }
}

/// The run's `bench_wq`, and the online CPUs of the synthetic topology if any.
fn build_wq(ctx: &BuildCtx<'_>) -> Result<(cmwq::Workqueue, Option<Vec<usize>>), String> {
    {
        let scope = ctx.scope.ok_or("a run needs an affinity scope")?;
        let mut b = cmwq::Workqueue::builder("bench_wq")
            .unbound()
            .affinity_scope(scope)
            .affinity_strict(ctx.strict)
            .wake_mode(if ctx.wake_under_lock {
                cmwq::WakeMode::UnderLock
            } else {
                cmwq::WakeMode::Deferred
            });
        if let Some(n) = ctx.cache_shard_size {
            b = b.cache_shard_size(n);
        }
        if ctx.unmanaged {
            b = b.unbound_concurrency(cmwq::UnboundConcurrency::Unmanaged);
        }
        // With a synthetic topology, producer i queues for a CPU of the synthetic
        // machine (spread evenly over it) with `queue_on`, as the kernel's
        // producers queue from their own CPUs; the pods' workers run folded onto
        // the real CPUs.
        let mut virt = None;
        if let Some(spec) = ctx.synthetic {
            let t = cmwq::topology::Topology::from_synthetic(spec)
                .map_err(|e| format!("--synthetic: {e}"))?;
            virt = Some(t.online().to_vec());
            b = b.topology(Arc::new(t));
        }
        let wq = b.build().map_err(|e| format!("building bench_wq: {e}"))?;
        Ok((wq, virt))
    }
}

/// One run's workqueue.
struct CmwqExec {
    wq: cmwq::Workqueue,
    /// Online CPUs of the synthetic topology, if any.
    virt: Option<Vec<usize>>,
    /// Producer threads of the run.
    producers: usize,
    /// `--submit spawn`: a one-off closure per item.
    spawn: bool,
    /// `--submit execute`: a one-off closure per item, with no handle.
    execute: bool,
}

/// A producer's work items, one per in-flight slot, created once and re-queued.
struct CmwqProducer<'a> {
    wq: &'a cmwq::Workqueue,
    works: Vec<cmwq::Work>,
    /// The synthetic CPU this producer queues for.
    cpu: Option<usize>,
}

impl Executor for CmwqExec {
    fn producer<'a>(
        &'a self,
        id: usize,
        _cpu: usize,
        slots: usize,
        done: Arc<Completion>,
    ) -> Box<dyn Producer + 'a> {
        // Producers are spread evenly over the synthetic machine's CPUs.
        let cpu = self
            .virt
            .as_ref()
            .map(|v| v[(id * v.len() / self.producers.max(1)) % v.len()]);
        if self.spawn || self.execute {
            return Box::new(SpawnProducer {
                wq: &self.wq,
                done,
                cpu,
                handle: self.spawn,
            });
        }
        let works = (0..slots)
            .map(|_| {
                let d = done.clone();
                cmwq::Work::new(move || d.complete())
            })
            .collect();
        Box::new(CmwqProducer {
            wq: &self.wq,
            works,
            cpu,
        })
    }

    fn quiesce(&self) {
        self.wq.flush();
    }
}

/// `--submit spawn`: each submit spawns a one-off closure that signals the
/// producer's completion; the handle is dropped (the job is detached), as
/// the peers' boxed closures are fire-and-forget.
struct SpawnProducer<'a> {
    wq: &'a cmwq::Workqueue,
    done: Arc<Completion>,
    cpu: Option<usize>,
    /// `spawn` (a handle, dropped) rather than `execute` (none).
    handle: bool,
}

impl Producer for SpawnProducer<'_> {
    #[inline]
    fn submit(&mut self, _slot: usize) {
        let d = self.done.clone();
        let job = move || d.complete();
        if !self.handle {
            let queued = match self.cpu {
                Some(c) => self
                    .wq
                    .execute_on(c, job)
                    .expect("cmwq: a synthetic CPU of the run has a pool"),
                None => self.wq.execute(job),
            };
            assert!(queued, "bench_wq refused a job");
            return;
        }
        let h = match self.cpu {
            Some(c) => self
                .wq
                .spawn_on(c, job)
                .expect("cmwq: a synthetic CPU of the run has a pool"),
            None => self.wq.spawn(job),
        };
        drop(h);
    }
}

impl Producer for CmwqProducer<'_> {
    #[inline]
    fn submit(&mut self, slot: usize) {
        // The harness re-queues a slot only after its callback signalled completion,
        // and PENDING is cleared before the callback runs (as in the kernel), so this
        // must succeed; a `false` would silently lose an item and hang the producer.
        let queued = match self.cpu {
            Some(c) => self.wq.queue_on(c, &self.works[slot]).unwrap_or(false),
            None => self.wq.queue(&self.works[slot]),
        };
        assert!(queued, "work of slot {slot} still pending when re-queued");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cmwq::topology::Scope;

    #[test]
    fn cache_shard_size_cuts_the_synthetic_llc_into_pools() {
        let cpus = [0usize];
        let ctx = |scope, shard| BuildCtx {
            workers: 1,
            scope: Some(scope),
            synthetic: Some("l3:1 core:32 pu:1"),
            producers: 1,
            strict: false,
            wake_under_lock: false,
            unmanaged: false,
            spawn: false,
            execute: false,
            cache_shard_size: shard,
            cpus: &cpus,
        };
        // Distinct pods serving the 32 synthetic CPUs (the default pwq aside),
        // told apart by the real CPUs each pool's pod spans.
        let pods = |scope, shard| {
            let wq = build_wq(&ctx(scope, shard)).unwrap().0;
            let (per_cpu, _) = wq.cpu_pools();
            let snap = cmwq::snapshot();
            let mut pods: Vec<Vec<usize>> = per_cpu
                .into_iter()
                .flatten()
                .map(|id| {
                    snap.pools
                        .iter()
                        .find(|p| p.id == id)
                        .unwrap()
                        .pod_cpus
                        .clone()
                })
                .collect();
            pods.sort_unstable();
            pods.dedup();
            pods.len()
        };
        // The synthetic CPUs fold onto the real ones (CPU i on online CPU
        // i mod n), and pods are told apart by their real CPU sets, as the
        // kernel shares unbound pools by attrs: a shard becomes a pod of its
        // own only when its real CPUs differ from the other shards'. One core
        // per shard spreads over every real CPU; one shard of all 32 is the LLC.
        assert_eq!(pods(Scope::Cache, None), 1);
        assert_eq!(pods(Scope::CacheShard, Some(32)), 1);
        let real = std::thread::available_parallelism().map_or(1, |n| n.get());
        if real >= 2 {
            assert!(pods(Scope::CacheShard, Some(1)) >= 2);
        }
    }
}
