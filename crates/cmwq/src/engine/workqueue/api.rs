//! The public [`Workqueue`] handle and its API: queueing (`queue`, `queue_on`,
//! `spawn`, `execute`), waiting (`flush`, `drain`, `freeze`), live attribute
//! changes and counters. Each call checks what the caller may do here (a
//! CPU id, a wait from the queue's own item) and hands the work to
//! [`WqInner`]: the queue paths in [`super::queue`], attrs changes in
//! [`super::table`]. Handles are counted: the last one's drop destroys the
//! queue.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::engine::node::NodeActive;
use crate::engine::pool::{self, Pool};
use crate::engine::spawn::{self, JoinHandle};
use crate::engine::threads;
use crate::engine::work::Work;
use crate::error::Error;
use crate::topology::Scope;
use crate::trace;
use crate::types::{MAX_ACTIVE, PoolCounts, WorkqueueStats, WqAttrs, WqFlags};

use super::WqInner;

/// A workqueue: queue [`Work`] to it, or [`spawn`](Workqueue::spawn) one-off
/// jobs; it runs them on shared, topology-aware pools.
///
/// Handles are cheap to clone; when the last one is dropped the workqueue is
/// destroyed: pending delayed work is queued at once, a frozen queue is
/// thawed, everything queued runs, then its pools are released. Nothing
/// queued is dropped.
///
/// # After `fork()`
///
/// A child of `fork()` has none of cmwq's threads, so once cmwq has started
/// one, the child's copies of every workqueue are inert: queueing returns
/// false (`Err(Error::Forked)` from the `_on` calls; a spawned job's handle
/// gives [`JoinError::Refused`](crate::JoinError::Refused)), with one note on
/// stderr; [`flush`](Self::flush), [`drain`](Self::drain),
/// [`freeze`](Self::freeze), the last handle's drop (which leaves the queue
/// as it is), [`Work::flush`] and `cancel_sync` return at once rather than
/// wait for what the parent had in flight, and joining or awaiting an
/// unfinished job gives [`JoinError::Forked`](crate::JoinError::Forked). So
/// a child can always exit; `exec` in it, or use cmwq in the parent.
///
/// ```
/// use cmwq::{Work, Workqueue, topology::Scope};
/// let wq = Workqueue::builder("io").unbound().affinity_scope(Scope::Cache).build().unwrap();
/// let w = Work::new(|| println!("ran"));
/// assert!(wq.queue(&w));
/// wq.flush();
/// ```
pub struct Workqueue {
    pub(super) inner: Arc<WqInner>,
    /// A view lent to the control endpoint (see [`borrow_of`]): it is not a
    /// handle and never destroys.
    pub(super) borrowed: bool,
}

impl Clone for Workqueue {
    fn clone(&self) -> Self {
        self.inner.holders.add_handle();
        Workqueue {
            inner: self.inner.clone(),
            borrowed: false,
        }
    }
}

impl Drop for Workqueue {
    fn drop(&mut self) {
        if self.borrowed {
            self.inner.holders.give_back();
            return;
        }
        if !self.inner.holders.drop_handle() || threads::forked() {
            // A forked child's copy is left as it is: destroying it would
            // wait for items no thread of the child runs.
            return;
        }
        let inner = self.inner.clone();
        if pool::current_wq_addr() == Arc::as_ptr(&inner) as usize {
            // Dropped by its own work item: draining here would wait for ourselves.
            let name = inner.name.clone();
            if let Err(e) = threads::start("cmwq-destroy".into(), move || {
                inner.wait_borrows();
                inner.destroy()
            }) {
                eprintln!(
                    "cmwq: workqueue {name:?} was dropped by its own item and no thread \
                     can destroy it ({}): it stays, with what it holds",
                    threads::describe(&e)
                );
            }
        } else {
            inner.wait_borrows();
            inner.destroy();
        }
    }
}

impl std::fmt::Debug for Workqueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workqueue")
            .field("name", &self.inner.name)
            .field("flags", &self.inner.flags)
            .finish()
    }
}

impl Workqueue {
    /// The workqueue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The workqueue's flags.
    pub fn flags(&self) -> WqFlags {
        self.inner.flags
    }

    /// Queues `work` on the calling CPU's pool (`queue_work`). Returns false if it
    /// was already pending, is disabled, or the workqueue is draining and the
    /// caller is not one of its own items.
    ///
    /// # Panics
    ///
    /// On a [bounded](crate::WorkqueueBuilder::max_queued) queue that is full, when
    /// called from one of its own items (elsewhere it waits for room).
    pub fn queue(&self, work: &Work) -> bool {
        if self.inner.bound.is_some() {
            return self.queue_bounded_or_panic(work);
        }
        if !work.0.try_claim() {
            return false;
        }
        self.inner.queue_counted(work.0.clone(), None, false)
    }

    /// The shared state (for the engine's other modules).
    pub(crate) fn inner(&self) -> &Arc<WqInner> {
        &self.inner
    }

    /// Queues `work` for `cpu` (`queue_work_on`): that CPU's pool for a bound
    /// queue (a *disassociated* one, run by unbound workers, while the CPU is
    /// not usable), that CPU's pod for an unbound one, or the queue's default
    /// pool when the CPU is outside the unbound queue's cpumask (the kernel's
    /// rule). Only a CPU id beyond the possible CPUs is an error
    /// ([`Error::NoSuchCpu`]).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    ///
    /// let wq = cmwq::Workqueue::builder("queue_on_doc").build().unwrap();
    /// // A CPU this process may run on (CPU 0 may be outside a container's set).
    /// let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let r = ran.clone();
    /// let w = cmwq::Work::new(move || r.store(true, Ordering::SeqCst));
    /// assert_eq!(wq.queue_on(cpu, &w), Ok(true));
    /// assert!(wq.queue_on(1 << 20, &w).is_err(), "no such CPU");
    /// w.flush();
    /// assert!(ran.load(Ordering::SeqCst));
    /// ```
    pub fn queue_on(&self, cpu: usize, work: &Work) -> Result<bool, Error> {
        self.check_cpu(cpu)?;
        if self.inner.bound.is_some() {
            return self.queue_bounded(work, Some(cpu), "Workqueue::queue_on");
        }
        if !work.0.try_claim() {
            return Ok(false);
        }
        Ok(self.inner.queue_counted(work.0.clone(), Some(cpu), false))
    }

    /// `cpu` is a CPU id of the queue's topology (a possible CPU). Whether
    /// it is online, usable or in the cpumask does not matter here: the pwq
    /// for it is picked in `queue_claimed` (its own, or the default one).
    /// A forked child's queues take nothing (the signature can say so).
    pub(super) fn check_cpu(&self, cpu: usize) -> Result<(), Error> {
        if threads::refuse_forked() {
            return Err(Error::Forked);
        }
        let nr_cpu_ids = self.inner.map.cpu.len();
        if cpu < nr_cpu_ids {
            Ok(())
        } else {
            Err(Error::NoSuchCpu { cpu, nr_cpu_ids })
        }
    }

    /// Runs a one-off closure on this workqueue and returns a handle to its
    /// result (see [`JoinHandle`]). The job is an item of this queue:
    /// `max_active`, ordered order, [`flush`](Self::flush), [`drain`](Self::drain)
    /// and destroy treat it as any other. One allocation per spawn at most
    /// (a thread reuses the cells of its finished jobs). Without a result to
    /// wait for, [`execute`](Self::execute) is cheaper.
    ///
    /// Use a [`Work`] for an item that is queued again and again (it has the
    /// pending bit: queueing it while pending does nothing, and it can be
    /// disabled, or cancelled and waited for with `cancel_sync`); use `spawn`
    /// for a job that runs once and returns something (its handle can
    /// [`cancel`](JoinHandle::cancel) it until it starts).
    ///
    /// ```
    /// let wq = cmwq::Workqueue::builder("spawn_doc2").unbound().build().unwrap();
    /// let handles: Vec<_> = (0..4u64).map(|i| wq.spawn(move || i * i)).collect();
    /// let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    /// assert_eq!(sum, 14);
    /// ```
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if self.inner.bound.is_some() {
            return self.spawn_bounded_or_panic(f);
        }
        self.spawn_at(None, f)
    }

    /// [`spawn`](Self::spawn) for `cpu`, as [`queue_on`](Self::queue_on): that
    /// CPU's pool for a bound queue, its pod (or the default pool) for an
    /// unbound one; only a CPU id beyond the possible CPUs is an error.
    pub fn spawn_on<F, T>(&self, cpu: usize, f: F) -> Result<JoinHandle<T>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.check_cpu(cpu)?;
        if self.inner.bound.is_some() {
            return self.spawn_bounded(Some(cpu), f, "Workqueue::spawn_on");
        }
        Ok(self.spawn_at(Some(cpu), f))
    }

    /// Runs a one-off closure on this workqueue with no handle: fire and
    /// forget, as rayon's `spawn` or `threadpool`'s `execute`. Cheaper than
    /// [`spawn`](Self::spawn) (no result slot, nothing to detach); a panic goes
    /// to the queue's panic handler and the process-wide hook, as a [`Work`]'s.
    /// [`flush`](Self::flush) waits for it. False if the queue is draining and
    /// refused it (the closure is dropped unrun).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let wq = cmwq::Workqueue::builder("execute_doc").unbound().build().unwrap();
    /// let n = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..10 {
    ///     let n = n.clone();
    ///     assert!(wq.execute(move || { n.fetch_add(1, Ordering::Relaxed); }));
    /// }
    /// wq.flush();
    /// assert_eq!(n.load(Ordering::Relaxed), 10);
    /// ```
    pub fn execute<F: FnOnce() + Send + 'static>(&self, f: F) -> bool {
        if self.inner.bound.is_some() {
            return self.execute_bounded_or_panic(f);
        }
        self.execute_at(None, f)
    }

    /// [`execute`](Self::execute) for `cpu`, as [`queue_on`](Self::queue_on).
    pub fn execute_on<F: FnOnce() + Send + 'static>(
        &self,
        cpu: usize,
        f: F,
    ) -> Result<bool, Error> {
        self.check_cpu(cpu)?;
        if self.inner.bound.is_some() {
            return self.execute_bounded(Some(cpu), f, "Workqueue::execute_on");
        }
        Ok(self.execute_at(Some(cpu), f))
    }

    fn execute_at<F: FnOnce() + Send + 'static>(&self, cpu: Option<usize>, f: F) -> bool {
        self.inner.queue_counted(spawn::detached(f), cpu, false)
    }

    fn spawn_at<F, T>(&self, cpu: Option<usize>, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // The job's item comes with its one queue cycle claimed, and the
        // queue takes its reference; a refusal reaches the handle through
        // the job (`Job::refused`) before this returns.
        let (item, handle) = spawn::job(f);
        self.inner.queue_counted(item, cpu, false);
        handle
    }

    /// Waits until every item queued before the call has finished (`flush_workqueue`).
    ///
    /// ```
    /// use cmwq::{Work, Workqueue};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let wq = Workqueue::builder("flush_doc").build().unwrap();
    /// let n = Arc::new(AtomicUsize::new(0));
    /// let items: Vec<Work> = (0..8)
    ///     .map(|_| {
    ///         let n = n.clone();
    ///         Work::new(move || { n.fetch_add(1, Ordering::SeqCst); })
    ///     })
    ///     .collect();
    /// items.iter().for_each(|w| assert!(wq.queue(w)));
    /// wq.flush();
    /// assert_eq!(n.load(Ordering::SeqCst), 8);
    /// ```
    ///
    /// # Panics
    ///
    /// When called from a work item of this workqueue, which would wait for
    /// itself (the kernel warns through `check_flush_dependency`).
    pub fn flush(&self) {
        self.refuse_self_wait("Workqueue::flush");
        self.inner.flush();
    }

    /// Waits until the workqueue is empty (`drain_workqueue`). While draining,
    /// only its own items may queue more work to it; other queue attempts return
    /// false and are counted as rejected.
    ///
    /// ```
    /// use cmwq::{Work, Workqueue};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::{Arc, OnceLock};
    ///
    /// // An item that queues itself again until it has run 5 times: a flush
    /// // could return before the chain ends, a drain waits for all of it.
    /// let wq = Workqueue::builder("drain_doc").build().unwrap();
    /// let n = Arc::new(AtomicUsize::new(0));
    /// let me: Arc<OnceLock<(Workqueue, Work)>> = Arc::new(OnceLock::new());
    /// let (n2, me2) = (n.clone(), me.clone());
    /// let w = Work::new(move || {
    ///     if n2.fetch_add(1, Ordering::SeqCst) < 4 {
    ///         let (wq, w) = me2.get().unwrap();
    ///         wq.queue(w);
    ///     }
    /// });
    /// me.set((wq.clone(), w.clone())).unwrap();
    /// assert!(wq.queue(&w));
    /// wq.drain();
    /// assert_eq!(n.load(Ordering::SeqCst), 5);
    /// ```
    ///
    /// # Panics
    ///
    /// When called from a work item of this workqueue, which would wait for itself.
    pub fn drain(&self) {
        self.refuse_self_wait("Workqueue::drain");
        self.inner.drain();
    }

    fn refuse_self_wait(&self, call: &str) {
        if pool::current_wq_addr() == Arc::as_ptr(&self.inner) as usize {
            panic!(
                "cmwq: {call} called from a work item of workqueue {:?}: it would wait \
                 for itself forever",
                self.inner.name
            );
        }
    }

    /// Stops activating new items (`FREEZABLE` only) and waits for the running
    /// ones to finish; queued items wait, in order, until [`thaw`](Self::thaw),
    /// or until the last handle is dropped: that thaws the queue and runs
    /// them, as it runs everything queued.
    ///
    /// # Panics
    ///
    /// When called from a work item of this workqueue, which would wait for
    /// itself (before anything is frozen).
    pub fn freeze(&self) -> Result<(), Error> {
        if !self.inner.flags.contains(WqFlags::FREEZABLE) {
            return Err(Error::NotFreezable {
                name: self.inner.name.clone(),
            });
        }
        self.refuse_self_wait("Workqueue::freeze");
        self.inner.frozen.store(true, Ordering::Relaxed);
        // Freezing is rare: poll the pwqs until nothing is active (in a
        // forked child nothing ever finishes: don't wait).
        while !threads::forked()
            && self
                .inner
                .pwq_list()
                .iter()
                .any(|r| r.pool.with_pwq(r.id, |p| p.nr_active > 0))
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Lets a frozen workqueue run again.
    pub fn thaw(&self) -> Result<(), Error> {
        if !self.inner.flags.contains(WqFlags::FREEZABLE) {
            return Err(Error::NotFreezable {
                name: self.inner.name.clone(),
            });
        }
        self.inner.frozen.store(false, Ordering::Relaxed);
        self.reactivate();
        Ok(())
    }

    pub(super) fn reactivate(&self) {
        self.inner.reactivate();
    }

    /// The current `max_active`.
    pub fn max_active(&self) -> usize {
        self.inner.max_active.load(Ordering::Relaxed)
    }

    /// Changes `max_active` (`workqueue_set_max_active`); waiting items start if
    /// the new limit allows. Not allowed on ordered queues.
    ///
    /// ```
    /// use cmwq::{Error, Workqueue};
    /// let wq = Workqueue::builder("set_max_doc").unbound().max_active(1).build().unwrap();
    /// wq.set_max_active(8).unwrap();
    /// assert_eq!(wq.max_active(), 8);
    /// assert_eq!(wq.attrs().max_active, 8);
    /// let ord = Workqueue::builder("set_max_doc_ord").ordered().build().unwrap();
    /// assert!(matches!(ord.set_max_active(2), Err(Error::OrderedMaxActive(2))));
    /// ```
    pub fn set_max_active(&self, n: usize) -> Result<(), Error> {
        if n == 0 || n > MAX_ACTIVE {
            return Err(Error::InvalidMaxActive {
                value: n,
                max: MAX_ACTIVE,
            });
        }
        if self.inner.ordered && n != 1 {
            return Err(Error::OrderedMaxActive(n));
        }
        {
            // Under the attrs lock, as `apply` (which also writes these), so
            // a concurrent attrs change cannot leave an older value behind.
            let mut attrs = self.inner.attrs.lock();
            attrs.max_active = n;
            self.inner.max_active.store(n, Ordering::Relaxed);
            if self.inner.unbound {
                for (node, max) in self.inner.node_maxes(n).into_iter().enumerate() {
                    self.inner.nodes[node].set_max(max);
                }
            }
        }
        trace::max_active_changed(&self.inner.name, n);
        self.reactivate();
        Ok(())
    }

    /// Sets the floor of each NUMA node's share of an unbound queue's
    /// `max_active` (the kernel's `workqueue_set_min_active`; by default
    /// `min(max_active, 8)`): `n` is clamped to 1..=`max_active`. Refused
    /// for a per-CPU or an ordered queue, as the kernel refuses it.
    pub fn set_min_active(&self, n: usize) -> Result<(), Error> {
        if !self.inner.unbound || self.inner.ordered {
            return Err(Error::MinActiveNotUnbound(self.inner.name.clone()));
        }
        {
            let attrs = self.inner.attrs.lock();
            let n = n.clamp(1, attrs.max_active);
            self.inner.min_active.store(n, Ordering::Relaxed);
            for (node, max) in self
                .inner
                .node_maxes(attrs.max_active)
                .into_iter()
                .enumerate()
            {
                self.inner.nodes[node].set_max(max);
            }
        }
        self.reactivate();
        Ok(())
    }

    /// The picture of this queue that [`crate::snapshot()`] holds for it.
    pub fn snapshot(&self) -> crate::snapshot::WorkqueueSnap {
        self.snap()
    }

    /// What the kernel's `show_one_workqueue` prints for this queue (nothing
    /// when no item of it is active or held back): its pwqs with what runs
    /// and what waits, in the words of the lockup report.
    pub fn show_busy(&self) -> String {
        super::super::pool::show_busy(Some(self.inner.id))
    }

    /// The per-node `max_active` of an unbound queue (kernel: `node_nr_active[].max`).
    pub fn node_max_active(&self) -> Vec<usize> {
        self.inner.nodes.iter().map(NodeActive::max).collect()
    }

    /// Units of each node's budget held now by work (active items plus budget
    /// cached by busy pwqs); 0 on every node once the workqueue is idle
    /// (kernel: `node_nr_active[].nr`). Units an idle pwq keeps for its next
    /// item are not counted: they go back to the node as soon as an item
    /// waits for budget.
    pub fn node_nr_active(&self) -> Vec<usize> {
        self.debug_node_units()
            .into_iter()
            .map(|(held, kept)| held.saturating_sub(kept))
            .collect()
    }

    /// Each node's budget as (units held in all, units idle pwqs keep): a
    /// snapshot, exact once the queue is idle. For tests of the engine's
    /// accounting; not a stable interface.
    #[doc(hidden)]
    pub fn debug_node_units(&self) -> Vec<(usize, usize)> {
        let held: Vec<usize> = self.inner.nodes.iter().map(NodeActive::nr).collect();
        let mut kept = vec![0; held.len()];
        for r in self.inner.pwq_list() {
            r.pool.with_pwq(r.id, |p| {
                if p.nr_active == 0 && p.inactive.is_empty() && p.node < kept.len() {
                    kept[p.node] += p.credits;
                }
            });
        }
        held.into_iter().zip(kept).collect()
    }

    /// Capacity of the item lists of the pools this workqueue queues to now,
    /// in items (a peak's memory shows here until it is given back). For
    /// tests of the engine's memory; not a stable interface.
    #[doc(hidden)]
    pub fn debug_list_capacity(&self) -> usize {
        let mut pools: Vec<&Pool> = self.inner.pwqs().all.iter().map(|r| r.pool).collect();
        pools.sort_unstable_by_key(|p| p.id);
        pools.dedup_by_key(|p| p.id);
        pools.iter().map(|p| p.list_capacity()).sum()
    }

    /// Number of pwqs of the current generation (pools this workqueue queues to).
    ///
    /// Not part of the stable API; for the crate's tests and cmwq-lab.
    #[doc(hidden)]
    pub fn nr_pwqs(&self) -> usize {
        self.inner.pwqs().all.len()
    }

    /// The pool ids serving each topology CPU (`None`: no pwq), and the default pool.
    ///
    /// Not part of the stable API; for the crate's tests and cmwq-lab
    /// (a program reads the same in [`crate::snapshot()`]'s `cpu_pool`).
    #[doc(hidden)]
    pub fn cpu_pools(&self) -> (Vec<Option<u32>>, Option<u32>) {
        let p = self.inner.pwqs();
        (
            p.cpu.iter().map(|r| r.map(|r| r.pool.id)).collect(),
            p.dfl.map(|r| r.pool.id),
        )
    }

    /// Workers and counters of each pool this workqueue queues to now, by pool id.
    pub fn pool_counts(&self) -> Vec<PoolCounts> {
        let mut v: Vec<_> = self
            .inner
            .pwqs()
            .all
            .iter()
            .map(|r| r.pool.counts())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The workqueue's counters.
    pub fn stats(&self) -> WorkqueueStats {
        self.stats_of(self.sum_pwqs(false).0)
    }

    /// [`stats`](Self::stats) and [`latency`](Self::latency) read together,
    /// as a snapshot has them: each pwq's counters and histograms under one
    /// hold of its pool's lock, where a worker updates both when an item
    /// ends, so `completed` and the latency counts agree. Read one after the
    /// other, items that ended in between were in one and not the other
    /// (`cmwq monitor`'s interval deltas disagreed by a few items under load).
    pub(crate) fn stats_and_latency(&self) -> (WorkqueueStats, Option<crate::hist::WqLatency>) {
        let (sum, lat) = self.sum_pwqs(true);
        (self.stats_of(sum), lat.snap())
    }

    /// The counters (and, with `lat`, the latency histograms) of every pwq
    /// this queue has had, summed: under `WQ old`, so a pwq freed meanwhile
    /// is counted once, in `dead_stats` (`dead_lat`) or here.
    fn sum_pwqs(&self, lat: bool) -> (crate::types::PwqStats, crate::hist::PwqLatency) {
        let mut hist = crate::hist::PwqLatency::new(lat && self.inner.latency);
        let old = self.inner.old.lock();
        let mut sum = old.dead_stats;
        hist.add(&old.dead_lat);
        for r in self.inner.pwqs().all.iter().chain(&old.retired) {
            r.pool.with_pwq(r.id, |p| {
                sum.add(&p.stats);
                hist.add(&p.lat);
            });
        }
        (sum, hist)
    }

    /// The public counters from the pwqs' sum.
    fn stats_of(&self, sum: crate::types::PwqStats) -> WorkqueueStats {
        let mut out = WorkqueueStats {
            rejected: self.inner.stats.rejected.load(Ordering::Relaxed),
            ..WorkqueueStats::default()
        };
        sum.write_to(&mut out);
        self.inner.bound_stats(&mut out);
        out.in_flight = out.started.saturating_sub(out.completed);
        let (prio, note) = self.inner.prio.lock().clone();
        out.priority = prio.to_string();
        out.priority_fallback = note;
        out
    }

    /// The latency histograms (see [`crate::hist`]): time from queued to
    /// started and from started to ended of every item that ended, summed
    /// over the queue's pwqs; `None` for a queue built without them
    /// ([`WorkqueueBuilder::latency_histograms`](crate::WorkqueueBuilder::latency_histograms)).
    ///
    /// ```
    /// use cmwq::{Work, Workqueue};
    /// let wq = Workqueue::builder("lat").latency_histograms(true).build().unwrap();
    /// let w = Work::new(|| {});
    /// wq.queue(&w);
    /// wq.flush();
    /// let lat = wq.latency().unwrap();
    /// assert_eq!((lat.queue.count, lat.run.count), (1, 1));
    /// assert!(lat.queue.p99().is_some());
    /// ```
    pub fn latency(&self) -> Option<crate::hist::WqLatency> {
        self.sum_pwqs(true).1.snap()
    }

    /// The current attributes (the kernel's sysfs files of an unbound queue).
    pub fn attrs(&self) -> WqAttrs {
        self.inner.attrs.lock().clone()
    }

    /// Moves an unbound queue to the pods of another affinity scope, live
    /// (`affinity_scope` in sysfs): new work goes to the new pools at once, work
    /// already queued finishes where it is, nothing is lost or run twice, and an
    /// ordered queue stays ordered.
    ///
    /// ```
    /// use cmwq::{Work, Workqueue, topology::Scope};
    /// let wq = Workqueue::builder("live").unbound().affinity_scope(Scope::Cpu).build().unwrap();
    /// let w = Work::new(|| {});
    /// wq.queue(&w);
    /// wq.set_affinity_scope(Scope::System).unwrap();
    /// assert_eq!(wq.attrs().affinity_scope, Scope::System);
    /// wq.queue(&w);
    /// wq.flush();
    /// ```
    pub fn set_affinity_scope(&self, scope: Scope) -> Result<(), Error> {
        self.named(
            self.inner.apply(|a| a.affinity_scope = scope),
            "affinity_scope",
        )
    }

    /// Binds (or frees) workers to their pod, live (`affinity_strict`).
    pub fn set_affinity_strict(&self, strict: bool) -> Result<(), Error> {
        self.named(
            self.inner.apply(|a| a.affinity_strict = strict),
            "affinity_strict",
        )
    }

    /// Changes the CPUs an unbound queue may use, live (`cpumask`). As the
    /// kernel, the mask is first cut down to the possible CPUs; a mask with no
    /// online CPU is refused and nothing changes.
    pub fn set_cpumask(&self, cpus: &[usize]) -> Result<(), Error> {
        let possible = self.inner.ctx.topo.possible();
        let mut v: Vec<usize> = cpus
            .iter()
            .copied()
            .filter(|c| possible.binary_search(c).is_ok())
            .collect();
        v.sort_unstable();
        v.dedup();
        if v.is_empty() {
            return Err(Error::EmptyCpumask {
                requested: cpus.iter().copied().take(64).collect(),
            });
        }
        self.named(self.inner.apply(|a| a.cpumask = v), "cpumask")
    }

    /// Changes the workers' nice value, live (`nice`); the workqueue moves to
    /// pools of that priority. Needs the same permission as the builder's.
    pub fn set_nice(&self, nice: i32) -> Result<(), Error> {
        self.named(self.inner.apply(|a| a.nice = nice), "nice")
    }

    /// Changes the `cache_shard` shard size of an unbound queue, live.
    pub fn set_cache_shard_size(&self, n: usize) -> Result<(), Error> {
        if n == 0 {
            return Err(Error::InvalidCacheShardSize(0));
        }
        self.named(
            self.inner.apply(|a| a.cache_shard_size = n),
            "cache_shard_size",
        )
    }

    fn named(&self, r: Result<(), Error>, attr: &'static str) -> Result<(), Error> {
        r.map_err(|e| match e {
            Error::NotUnbound { name, .. } => Error::NotUnbound { name, attr },
            e => e,
        })
    }

    /// The thread id of the rescuer of a `MEM_RECLAIM` queue.
    pub fn rescuer_tid(&self) -> Option<i32> {
        self.inner
            .rescuer
            .as_ref()
            .map(|r| r.tid.load(Ordering::Relaxed))
            .filter(|&t| t != 0)
    }
}
