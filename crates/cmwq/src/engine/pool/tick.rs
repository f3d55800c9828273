//! Concurrency management without scheduler hooks: the watchdog's tick over
//! a pool (`wq_worker_tick`: CPU time, CPU-intensive items; sleeping workers
//! are seen in [`super::sleep`]), mayday and the rescuer's turn (`pool_mayday_timeout`,
//! `rescuer_thread`), and the annotation a worker makes before it blocks
//! (`wq_worker_sleeping`/`wq_worker_running`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::lane::LazyNow;

use super::{
    BLOCKED_ANNOTATED, BLOCKED_INTENSIVE, MAX_POOLS, NEXT_POOL, POOLS, Pool, PoolInner, WORKER,
    WState, Wake, get_pool, unlock_wake,
};
use crate::engine::watchdog;
use crate::engine::workqueue::WqInner;
use crate::sched;
use crate::sync::MutexGuard;
use crate::trace;

/// Items a rescuer runs from one pwq before it looks at the next (the kernel's batch).
pub(crate) const RESCUE_BATCH: usize = 16;

/// What a tick read of one busy slot outside the pool lock.
#[derive(Clone, Copy)]
struct Look {
    /// The slot.
    i: usize,
    /// Its thread then.
    tid: i32,
    /// Its item count then (a new item since: the reading is stale).
    seq: u64,
    /// The thread's CPU clock.
    cpu: Option<Duration>,
}

impl Pool {
    /// One watchdog tick over this pool, in the kernel's parts: charge the
    /// CPU time of busy workers and mark CPU-intensive ones
    /// (`wq_worker_tick`; sleeping workers are the look's, in
    /// [`super::sleep`]), spread lagging lanes, then forward progress:
    /// worker creation retries and mayday (`pool_mayday_timeout`). Returns
    /// whether the pool still needs watching while no worker is busy (it
    /// starves).
    pub(crate) fn tick(&'static self, thresh: Duration, now: Instant) -> bool {
        let looks = self.look_busy();
        let mut wake = Vec::new();
        let g = self.lock();
        let mut g = self.charge_cpu(g, looks, thresh, &mut wake);
        spread_lagging(&mut g, now, &mut wake);
        let (mut g, starving) = self.progress(g, now);
        let mayday = if starving {
            self.send_mayday(&mut g, now)
        } else {
            g.starving_since = None;
            Vec::new()
        };
        self.update_lendable(&g);
        drop(g);
        for w in wake {
            w.run(self);
        }
        for wq in mayday {
            trace::mayday(self.id, &wq.name);
            wq.wake_rescuer();
        }
        starving
    }

    /// Who runs what, read under the lock, and the CPU clocks of those
    /// threads, read by syscalls outside it. A rescuer or a guest runs the
    /// workqueue's items too: its CPU time is charged like a worker's, but
    /// it is never marked (it does not count in `nr_running`).
    fn look_busy(&self) -> Vec<Look> {
        let busy: Vec<(usize, i32, u64)> = self
            .lock()
            .workers
            .iter()
            .enumerate()
            .filter(|(_, w)| w.current != 0 && w.tid != 0 && !w.cm_exempt)
            .map(|(i, w)| (i, w.tid, w.seq))
            .collect();
        busy.iter()
            .map(|&(i, tid, seq)| Look {
                i,
                tid,
                seq,
                cpu: sched::thread_cpu_time(tid),
            })
            .collect()
    }

    /// Charges each look's CPU time to its item's pwq and takes a worker
    /// that ran one item for `thresh` of CPU out of `nr_running`
    /// (CPU-intensive), waking another for its lane.
    fn charge_cpu<'a>(
        &'static self,
        mut g: MutexGuard<'a, PoolInner>,
        looks: Vec<Look>,
        thresh: Duration,
        wake: &mut Vec<Wake>,
    ) -> MutexGuard<'a, PoolInner> {
        for look in looks {
            if g.charge_look(&look, thresh, self.managed) {
                trace::cpu_intensive(
                    self.id,
                    g.workers[look.i].tid,
                    g.pwqs[g.workers[look.i].current_pwq as usize]
                        .wq
                        .as_ref()
                        .map(|w| w.name.as_str()),
                );
                g = self.kick_past(g, look.i, wake);
            }
        }
        g
    }

    /// Forward progress: work waits, no worker is idle and none runs it,
    /// so a worker is started (unless the manager is at it). Returns whether
    /// the pool still starves.
    fn progress<'a>(
        &'static self,
        mut g: MutexGuard<'a, PoolInner>,
        now: Instant,
    ) -> (MutexGuard<'a, PoolInner>, bool) {
        if g.starving(g.cap) && !g.manager_active {
            let lane = g.lanes.iter().position(|l| l.unserved(g.cap));
            g = self.create_worker(g, lane.unwrap_or(0));
        }
        let starving = g.starving(g.cap);
        if starving {
            g.starving_since.get_or_insert(now);
        }
        (g, starving)
    }

    /// A pool that has starved for [`watchdog::MAYDAY_INITIAL_TIMEOUT`]
    /// sends mayday for every pwq with items waiting (`pool_mayday_timeout`):
    /// returns the workqueues whose rescuers to wake after the unlock.
    fn send_mayday(&self, g: &mut PoolInner, now: Instant) -> Vec<Arc<WqInner>> {
        let mut mayday = Vec::new();
        let since = g.starving_since.unwrap_or(now);
        if now.duration_since(since) < watchdog::MAYDAY_INITIAL_TIMEOUT {
            return mayday;
        }
        let mut slots: Vec<u32> = g.waiting().map(|it| it.pwq()).collect();
        slots.sort_unstable();
        slots.dedup();
        for slot in slots {
            let Some(wq) = g.pwqs[slot as usize].wq.clone() else {
                continue;
            };
            if wq.send_mayday(self.id, slot) {
                g.pwqs[slot as usize].stats.mayday += 1;
                mayday.push(wq);
            }
        }
        mayday
    }

    /// A rescuer's turn on this pool: runs up to [`RESCUE_BATCH`] items of `wq`'s
    /// pwq `slot` on the calling thread, attached to the pool so the busy table
    /// still keeps an item off two threads at once. Returns whether the pool
    /// still starves with items of that pwq waiting (mayday again).
    pub(crate) fn rescue(&'static self, slot: u32, wq: &Arc<WqInner>) -> bool {
        let g = self.lock();
        if !g.pwq_of(slot, wq) {
            return false;
        }
        // The kernel's rescuer attaches to the pool it rescues and takes its
        // CPUs (`worker_attach_to_pool`): a bound pool's items run on their
        // CPU, a pod's on the pod.
        Self::pin(0, &self.rescuer_target(&g));
        // `take_for_rescue` skips items that run elsewhere, so none of its
        // items goes to another worker's `scheduled`.
        let (g, _) = self.run_borrowed(
            g,
            WState::Rescuer,
            RESCUE_BATCH,
            |g| g.take_for_rescue(slot),
            |g| g.pwqs[slot as usize].stats.rescued += 1,
        );
        g.waiting().any(|it| it.pwq() == slot) && g.starving(g.cap)
    }
}

impl PoolInner {
    /// One look at a busy worker (`wq_worker_tick`): its CPU time since the
    /// last look goes to its item's pwq, and a counted worker whose item has
    /// run `thresh` of CPU is marked CPU-intensive. Returns true if it was
    /// (a worker for its lane is kicked). A look whose worker moved on to
    /// another item meanwhile, or whose slot another thread holds now, is
    /// stale and changes nothing.
    fn charge_look(&mut self, look: &Look, thresh: Duration, managed: bool) -> bool {
        let Look { i, tid, seq, cpu } = *look;
        let w = &self.workers[i];
        if w.seq != seq || w.current == 0 || w.tid != tid {
            return false;
        }
        let Some(cpu) = cpu else {
            return false;
        };
        let slot = w.current_pwq as usize;
        let borrowed = w.state.borrowed();
        // The clock of the thread seen last time, not of a thread that held
        // the slot before it.
        if let Some((t, prev)) = self.workers[i].cpu_seen.replace((tid, cpu))
            && t == tid
        {
            self.pwqs[slot].stats.cpu_time_ns += cpu.saturating_sub(prev).as_nanos() as u64;
        }
        let w = &mut self.workers[i];
        if borrowed {
            // Never counted in nr_running: nothing to mark.
            false
        } else if w.obs_seq != seq {
            w.obs_seq = seq;
            w.obs_cpu = cpu;
            false
        } else if managed
            && w.blocked & BLOCKED_INTENSIVE == 0
            && cpu.saturating_sub(w.obs_cpu) >= thresh
        {
            self.mark_out(i, BLOCKED_INTENSIVE, true);
            self.pwqs[slot].stats.cpu_intensive += 1;
            true
        } else {
            false
        }
    }
}

/// A: the watchdog's tick spreads no lagging lane (test hook). `Relaxed`:
/// a setting read on its own.
static TICK_SPREAD_PAUSED: AtomicBool = AtomicBool::new(false);

/// Test hook: while `paused`, the watchdog's tick leaves the lanes alone:
/// it neither marks them stalled nor spreads the lagging ones (the rest of
/// the tick, the lockup watchdog included, goes on), so that a test can
/// tell what the queues' and the item starts' own looks spread.
/// Only with the `failure-injection` feature, for tests and the lab.
#[cfg(feature = "failure-injection")]
pub fn debug_pause_tick_spread(paused: bool) {
    TICK_SPREAD_PAUSED.store(paused, Ordering::Relaxed);
}

/// Lanes whose items wait behind a slow or stalled worker get help from an
/// idle CPU of the pod (see [`super::lane`]).
fn spread_lagging(g: &mut PoolInner, now: Instant, wake: &mut Vec<Wake>) {
    if TICK_SPREAD_PAUSED.load(Ordering::Relaxed) {
        return;
    }
    let mut clock = LazyNow::at(now);
    for d in 0..g.lanes.len() {
        if g.lanes[d].tick(&mut clock)
            && let Some(t) = g.kick(d)
        {
            wake.push(t);
        }
    }
}

/// Ticks every pool (the watchdog's sweep). Returns whether any pool starves.
pub(crate) fn tick_all(thresh: Duration) -> bool {
    let now = Instant::now();
    let n = (NEXT_POOL.load(Ordering::Relaxed) as usize).min(MAX_POOLS);
    let mut starving = false;
    for p in POOLS[..n].iter().filter_map(|c| c.get()) {
        starving |= p.tick(thresh, now);
    }
    super::lockup::sweep(now);
    starving
}

/// Marks the calling worker as blocked for the duration of `f`, so a
/// concurrency-managed pool starts another worker meanwhile (the kernel learns
/// this from the scheduler; user space has to be told). Outside a worker of a
/// bound pool it just runs `f`.
///
/// ```
/// let v = cmwq::blocking(|| 40 + 2);
/// assert_eq!(v, 42);
/// ```
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let _g = BlockingGuard::new();
    f()
}

/// The guard form of [`blocking`]: the worker counts as blocked until it drops.
///
/// ```
/// use cmwq::{BlockingGuard, Work, Workqueue};
/// use std::sync::{mpsc, Mutex};
///
/// // A bound queue runs one worker per CPU at a time unless one says it blocks.
/// let wq = Workqueue::builder("blocking_doc").build().unwrap();
/// let cpu = cmwq::topology::sched_affinity().unwrap()[0];
/// let (tx, rx) = mpsc::channel();
/// let rx = Mutex::new(rx);
/// let waiter = Work::new(move || {
///     let _g = BlockingGuard::new(); // another worker may start meanwhile
///     rx.lock().unwrap().recv().unwrap()
/// });
/// // Same CPU, same pool: this one runs while `waiter` sleeps, and wakes it.
/// let sender = Work::new(move || tx.send(()).unwrap());
/// assert_eq!(wq.queue_on(cpu, &waiter), Ok(true));
/// assert_eq!(wq.queue_on(cpu, &sender), Ok(true));
/// wq.flush();
/// ```
#[must_use = "the worker counts as blocked only while the guard lives"]
pub struct BlockingGuard {
    slot: Option<(&'static Pool, usize)>,
}

impl BlockingGuard {
    /// Marks the calling worker blocked (no effect outside a bound pool's worker,
    /// or when it is already marked).
    pub fn new() -> BlockingGuard {
        let Some((pid, me)) = WORKER.with(|w| w.get()) else {
            return BlockingGuard { slot: None };
        };
        let Some(pool) = get_pool(pid).filter(|p| p.managed) else {
            return BlockingGuard { slot: None };
        };
        let mut g = pool.lock();
        // A worker lent to a partner pool runs that pool's item: it gives
        // its own lane's share back (`nr_lent`), as a counted worker would.
        if g.workers[me].blocked & BLOCKED_ANNOTATED != 0
            || (g.workers[me].current == 0 && !g.workers[me].lent)
            || g.workers[me].state.borrowed()
            || g.workers[me].cm_exempt
        {
            return BlockingGuard { slot: None };
        }
        if !g.mark_out(me, BLOCKED_ANNOTATED, true) {
            // Already out (intensive or sampled): nothing to hand over.
            return BlockingGuard {
                slot: Some((pool, me)),
            };
        }
        let (g, wake) = pool.hand_over(g, me);
        unlock_wake(pool, g, wake);
        BlockingGuard {
            slot: Some((pool, me)),
        }
    }
}

impl Default for BlockingGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for BlockingGuard {
    fn drop(&mut self) {
        if let Some((pool, me)) = self.slot {
            let mut g = pool.lock();
            g.mark_in(me, BLOCKED_ANNOTATED, true);
            pool.update_lendable(&g);
        }
    }
}
