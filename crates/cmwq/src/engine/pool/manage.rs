//! The manager: starting workers, the rule that culls idle ones, and the
//! worker slots that threads from outside (rescuers, guests) borrow
//! (`manage_workers`, `create_worker`, `too_many_workers` in the kernel).
//!
//! A worker that cannot be created (the process is at its thread limit)
//! leaves the pool to the watchdog's retry and to mayday, as in the kernel.
//! The pool then waits before it tries again, 1 ms after the first failure,
//! doubling up to 1 s ([`Backoff`]), so a process at its limit does not spin
//! on `clone()`: every path that asks for a worker (the watchdog's tick, the
//! manager rule, a guest, a dead worker's replacement) honours the wait. The
//! first failure says so on stderr in the kernel's words, once, until a
//! creation succeeds again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::worker::run_worker;
use super::{FAIL_CREATE, Hints, Pool, PoolInner, WState, WorkerSlot};
use crate::engine::{threads, watchdog};
use crate::sched;
use crate::sync::MutexGuard;

/// Idle workers a pool keeps however few are busy: the kernel's
/// `too_many_workers` lets the third idle one go only when idle workers
/// beyond these two are at least a quarter of the busy ones.
const MIN_IDLE_KEPT: usize = 2;

/// The kernel's `MAX_IDLE_WORKERS_RATIO`: one idle worker (beyond
/// [`MIN_IDLE_KEPT`]) per this many busy ones is kept.
const MAX_IDLE_WORKERS_RATIO: usize = 4;

/// The wait after the first failed worker creation of a run of failures.
const BACKOFF_MIN: Duration = Duration::from_millis(1);
/// The longest wait between two tries.
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A: a failed worker creation was reported on stderr and none succeeded
/// since. `Relaxed`: a flag read on its own.
static CREATE_FAIL_SAID: AtomicBool = AtomicBool::new(false);

/// When a pool whose worker creation failed tries again (`L:`).
#[derive(Default)]
pub(super) struct Backoff {
    /// No try before this (`None`: the last try succeeded).
    retry_at: Option<Instant>,
    /// The wait that led to `retry_at`; doubles per failure.
    delay: Duration,
}

impl Backoff {
    /// A failed creation waits and it is not over yet.
    fn waiting(&self) -> bool {
        self.retry_at.is_some_and(|t| Instant::now() < t)
    }

    fn failed(&mut self) {
        self.delay = (self.delay * 2).clamp(BACKOFF_MIN, BACKOFF_MAX);
        self.retry_at = Some(Instant::now() + self.delay);
    }
}

/// Workers on their way up at once, at most, when blocked workers start
/// their own replacements ([`PoolInner::may_create_ahead`]).
const MAX_STARTING: usize = 4;

impl PoolInner {
    /// A worker just left `nr_running` (it blocked) and no idle worker could
    /// be woken for the work that waits: start one even while another is on
    /// its way up, up to [`MAX_STARTING`] at once.
    ///
    /// The manager rule starts one worker at a time, when the last idle one
    /// is taken (the kernel's `POOL_MANAGER_ACTIVE`), which is enough while
    /// blocks are rare. When items block one after another (`cmwq mix`: one
    /// in ten items sleeps 20 ms, so a pool needs 30-40 more workers within
    /// 20 ms of a cold start), one start at a time left items waiting 2-6 ms
    /// behind the chain of starts. Each block now starts its own replacement,
    /// as the kernel's scheduler hook finds an idle worker for each: the
    /// thread that blocked pays for the start (it is about to sleep), and
    /// the starts overlap.
    pub(super) fn may_create_ahead(&self) -> bool {
        self.nr_starting < MAX_STARTING
            && self.lanes.iter().all(|l| l.idle.is_empty())
            && self.need_more_worker(self.cap)
    }

    /// The kernel's cull rule: more than [`MIN_IDLE_KEPT`] idle, and idle
    /// beyond that is at least a quarter ([`MAX_IDLE_WORKERS_RATIO`]) of busy.
    pub(super) fn too_many_workers(&self) -> bool {
        let idle = self.nr_idle();
        let busy = self.nr_workers.saturating_sub(idle);
        idle > MIN_IDLE_KEPT && (idle - MIN_IDLE_KEPT) * MAX_IDLE_WORKERS_RATIO >= busy
    }

    /// A fresh worker slot in state `state`: an exited one reused, else a new one.
    fn alloc_slot(&mut self, state: WState) -> usize {
        let idx = match self.workers.iter().position(|w| w.state == WState::Exited) {
            Some(i) => i,
            None => {
                self.workers.push(WorkerSlot::empty());
                self.workers.len() - 1
            }
        };
        self.workers[idx] = WorkerSlot::empty();
        self.workers[idx].state = state;
        idx
    }
}

impl Pool {
    /// Attaches the calling thread to this pool as a rescuer or a guest: a
    /// worker slot, so the busy table keeps an item off two threads at once.
    pub(super) fn attach_borrowed(g: &mut PoolInner, state: WState) -> usize {
        let idx = g.alloc_slot(state);
        g.workers[idx].thread = Some(thread::current());
        g.workers[idx].tid = sched::gettid();
        g.workers[idx].item_flag = Some(crate::switches::item_flag());
        idx
    }

    /// Gives a borrowed slot back.
    pub(super) fn detach_borrowed(g: &mut PoolInner, idx: usize) {
        g.workers[idx].state = WState::Exited;
        g.workers[idx].thread = None;
        g.workers[idx].tid = 0;
        g.workers[idx].item_flag = None;
    }

    /// What worker `idx` serves: its name and what its hooks are told
    /// (`crate::hooks`).
    fn worker_info(&self, idx: usize) -> crate::hooks::WorkerInfo {
        let a = &self.attrs;
        let cpus = if a.pod_cpus.is_empty() {
            &a.cpus
        } else {
            &a.pod_cpus
        };
        crate::hooks::WorkerInfo::pool_worker(self.id, idx, a.cpu, cpus, a.prio.nice())
    }

    /// Starts a worker thread homed on `lane` (the manager's `create_worker`);
    /// called with the lock held, which it drops while the thread starts.
    pub(super) fn create_worker<'a>(
        &'static self,
        mut g: MutexGuard<'a, PoolInner>,
        lane: usize,
    ) -> MutexGuard<'a, PoolInner> {
        if threads::forked() {
            // A forked child starts no threads: its queues are inert.
            return g;
        }
        if g.create_backoff.waiting() {
            // The watchdog tries again once the wait is over.
            watchdog::poke();
            return g;
        }
        let idx = g.alloc_slot(WState::Starting);
        g.workers[idx].lane = lane;
        g.nr_workers += 1;
        g.nr_starting += 1;
        g.manager_active = true;
        let pod = !g.partners.is_empty();
        drop(g);
        let res = if pod && adopt_spare(self, idx, lane) {
            self.adopted.fetch_add(1, Ordering::Relaxed);
            Ok(false)
        } else if FAIL_CREATE.load(Ordering::Relaxed) {
            Err(std::io::Error::other(
                "worker creation disabled by test hook",
            ))
        } else {
            let info = self.worker_info(idx);
            threads::start(info.name.clone(), move || {
                crate::hooks::with_hooks(info, || run_worker(self, idx, lane))
            })
            .map(|_| true)
        };
        // Said with no lock held: stderr may block.
        match &res {
            Err(e) if !CREATE_FAIL_SAID.swap(true, Ordering::Relaxed) => {
                let (text, hint) = threads::describe_parts(e);
                eprintln!(
                    "workqueue: Failed to create a worker thread: {text} (pool {}){hint}; \
                     retrying with a backoff of up to {} s",
                    self.id,
                    BACKOFF_MAX.as_secs()
                );
            }
            Err(_) => {}
            // A thread started: the episode is over. An adopted worker is
            // not one (no thread was created; the limit may still bind), so
            // it leaves the episode open rather than let the next failure
            // say it again.
            Ok(true) => {
                if CREATE_FAIL_SAID.load(Ordering::Relaxed) {
                    CREATE_FAIL_SAID.store(false, Ordering::Relaxed);
                }
            }
            Ok(false) => {}
        }
        let mut g = self.lock();
        g.manager_active = false;
        if res.is_err() {
            self.create_failed.fetch_add(1, Ordering::Relaxed);
            g.workers[idx].state = WState::Exited;
            g.nr_workers -= 1;
            g.nr_starting -= 1;
            g.create_backoff.failed();
            // The watchdog retries, and sends mayday if work starves.
            watchdog::poke();
        } else {
            g.create_backoff = Backoff::default();
        }
        g
    }
}

/// The thread name of worker `idx` of `pool` (see `crate::hooks`:
/// `cmwq/3:1H`, `cmwq/u8:2`).
pub(super) fn worker_name(pool: &Pool, idx: usize) -> String {
    pool.worker_info(idx).name
}

/// Idle workers a per-CPU pool keeps from adoption: its own reserve, which
/// it also lends to a lagging partner (see [`lane`](super::lane)).
pub(super) const KEEP_IDLE: usize = 1;

/// Adoption: a per-CPU pool of a pod that needs a worker takes an idle one
/// of a partner pool instead of starting a thread.
///
/// The kernel has one pool per pod, with one idle list, and keeps one idle
/// worker in reserve for the whole pod. cmwq cuts a managed pod into a pool
/// per CPU (see [`lane`](super::lane)), each with its own idle list and its
/// own reserve; where items block (each block needs another worker), each
/// pool grew to its own peak and kept its own spare, so the pod held the sum
/// of its pools' peaks, several threads more than the peak of their sum.
/// Adopting a partner's idle worker moves the thread, not only the work: it
/// leaves the partner (its slot there exits) and starts in slot `idx` of
/// `to`, which was reserved as a starting worker, so nobody starts another
/// meanwhile; its context-switch probe goes with it. A partner keeps its
/// own reserve ([`KEEP_IDLE`]): it is what it lends when this pool lags,
/// and what it wakes when its own worker blocks. So a thread is started
/// only when no pool of the pod has an idle worker beyond its reserve. Runs
/// with no pool lock held and takes one partner's lock at a time.
fn adopt_spare(to: &'static Pool, idx: usize, lane: usize) -> bool {
    let Some(pods) = to.pod_pools.get() else {
        return false;
    };
    let k = pods.iter().position(|p| std::ptr::eq(*p, to)).unwrap_or(0);
    for j in 1..pods.len() {
        let d = pods[(k + j) % pods.len()];
        if !d.hints.has(Hints::SPARE) {
            continue;
        }
        let mut g = d.lock();
        if g.dying || g.lanes[0].idle.len() <= KEEP_IDLE {
            continue;
        }
        let Some(i) = g.lanes[0].idle.pop() else {
            continue;
        };
        // Off the idle stack and woken: no kick picks it again, and it
        // leaves at its next look (see `wait_for_work`).
        g.workers[i].state = WState::Woken;
        g.workers[i].adopted_by = Some((to, idx, lane));
        let t = g.workers[i].thread.clone();
        d.update_lendable(&g);
        drop(g);
        t.expect("an idle worker has its thread").unpark();
        return true;
    }
    false
}
