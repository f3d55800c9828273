//! Worker pools: where work items wait and the threads that run them.
//!
//! A pool is a worklist, a set of worker threads and the policy that decides
//! how many of them run, as in `kernel/workqueue.c`. Bound pools (one per CPU and
//! priority) are *concurrency managed*: `nr_running` counts the workers that are
//! running work and not marked blocked or CPU-intensive, and a second worker is
//! woken only when it drops to zero. Unbound pools (one per pod of an affinity
//! scope, shared by every workqueue with the same attributes) wake a worker for
//! every item that waits.
//!
//! A pod pool keeps one worklist, idle stack and `nr_running` per CPU of its
//! pod (a *lane*, see [`lane`]): the kernel leans on the scheduler to run a
//! woken worker next to its waker, user space cannot, so the pool does it.
//! Bound pools have one lane.
//!
//! Policy lives in small predicates on [`PoolInner`] and [`Lane`]:
//! `need_more_worker`, `keep_working`, `may_start_working`, `too_many_workers`,
//! and per lane `unserved`, `lagging`, `stealable`. A worker that leaves
//! idle while no other worker is idle becomes the manager and starts one more
//! thread, so a spare is ready when a running worker blocks (one manager at a
//! time, as the kernel's `POOL_MANAGER_ACTIVE`). Idle workers beyond the kernel's
//! `too_many_workers` bound exit after the idle timeout (300 s by default).
//!
//! # Waking outside the lock, and why no wakeup is lost
//!
//! `kick` runs under the pool lock. It pops the most recently idled worker of
//! the lane that needs one (idle lists are LIFO stacks, so the warmest thread
//! runs next), marks it `Woken` and returns its thread handle (with the CPU to
//! pin it to first, if it was re-homed); the caller unparks it *after* the lock is
//! dropped (the 2026 `kick_pool_pick` + `raw_spin_unlock_irq_wake` order). The
//! worker's side is: under the lock, push itself on the idle stack with state
//! `Idle`; drop the lock; park; retake the lock and look at its state. The
//! argument that no wakeup is lost:
//!
//! 1. A waker can only pick a worker that is on the idle stack, and a worker is
//!    pushed there under the lock before it parks; so every pick happens after
//!    the worker published itself.
//! 2. The pick writes `Woken` under the lock, so the worker's re-check (under the
//!    lock) sees it no matter when the unpark arrives.
//! 3. `Thread::unpark` before `park` leaves a token, so an unpark that lands
//!    between the worker's unlock and its park makes the park return at once.
//!    An unpark that lands later wakes the parked thread.
//! 4. Spurious returns from `park` (a stale token) are harmless: the worker sees
//!    `Idle`, still on the stack, and parks again.
//!
//! [`WakeMode::UnderLock`] keeps the old order (unpark while holding the lock) so
//! the lab can measure the difference.
//!
//! Pools live for the whole process in a registry indexed by id, so a work item
//! can name the pool that last held it with a plain integer (the kernel keeps the
//! pool id in `work->data` for the same reason). An unbound pool whose last
//! workqueue goes away lets its workers exit, gives back the memory of its
//! pwq slots and item lists, is no longer listed by the snapshot, and is
//! revived if the same attributes are asked for again; what stays is its
//! record (attributes, lanes, counters), so that any id an item or a stale
//! routing word holds still names a pool (the kernel frees the pool in
//! `put_unbound_pool`: its ids are RCU-protected, ours are not).
//!
//! A pwq slot is freed when its pwq is (a retired pwq after its last item,
//! see `OldPwqs` in `workqueue.rs`) and reused under a new era, so a pool
//! holds as many slots as pwqs were ever attached to it *at once*, not as
//! many as were ever attached ([`PwqId`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

mod budget;
mod hotplug;
mod lane;
mod lockup;
mod manage;
mod query;
mod sleep;
mod snap;
mod tick;
mod worker;

pub(crate) use budget::tick as budget_tick;
pub use budget::{CpuBudget, cpu_budget, set_cpu_quota_mode};
pub use hotplug::cpu_changes;
pub(crate) use hotplug::{check as hotplug_check, usable as usable_cpus, watchdog_started};
pub use lane::{DFL_SPREAD_THRESH, set_spread_thresh, spread_thresh};
use lane::{Lane, LazyNow};
pub use lockup::{set_cm_exempt, set_watchdog_thresh, watchdog_thresh};
pub use query::{current_is_rescuer, show_all_workqueues};
pub(crate) use query::{mark_rescuer, show_busy};
pub(crate) use sleep::look_all;
pub(crate) use snap::pool_snaps;
pub(crate) use tick::tick_all;
pub use tick::{BlockingGuard, blocking};

use super::node::NodeGet;
use super::watchdog;
use super::work::WorkInner;
use super::workqueue::WqInner;
use crate::priority::PoolPrio;
use crate::sched;
use crate::switches::SwitchProbe;
use crate::sync::{Mutex, MutexGuard};
use crate::types::{PwqStats, WakeMode};

/// Number of flush colours per pool workqueue (as the kernel's 4 colour bits).
pub(crate) const NR_COLORS: usize = 16;

/// A list of items (a lane's worklist, a pwq's inactive list, a worker's
/// `scheduled`) whose capacity grew past this many items during a peak is
/// given back once it is empty and its pool or pwq is idle: a worker going
/// idle looks at its lane, a pwq whose last item ends at its inactive list,
/// a worker idle for a whole idle timeout at every list of its pool
/// ([`PoolInner::shrink_lists`]). The check is one comparison where the
/// list is found empty anyway; the memory moves once per peak.
const SHRINK_ABOVE: usize = 1024;
/// The capacity a pwq's inactive list starts with, and shrinks back to.
const PWQ_LIST_CAP: usize = 8;

/// Bits of a pwq slot's number, and of its era, in a [`PwqId`] (so
/// that a pool id, a slot and an era fit one routing word).
pub(crate) const PWQ_BITS: u32 = 24;
/// The era counter wraps at this mask.
const ERA_MASK: u32 = (1 << PWQ_BITS) - 1;

/// The name of one pwq: its slot in its pool and the era of that
/// slot. A slot is reused once its pwq is freed ([`Pool::detach`]), and each
/// reuse bumps the era (its generation), so a name kept by someone who looked earlier
/// (a queuer that read the routing table before an attrs change, a flusher's
/// list, the ordered chain) no longer matches: every call that takes a
/// `PwqId` checks it under the pool lock and treats a stale one as a dead,
/// empty pwq. Items on the pool's lists name their pwq by slot alone: an item
/// counts in its pwq's `nr_in_flight`, and a pwq is freed only at zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PwqId {
    pub slot: u32,
    pub era: u32,
}

/// What makes two unbound workqueues share a pool (the kernel's attrs hash).
/// `I:` in its pool (`Pool::attrs`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PoolAttrs {
    /// The CPU of a bound pool.
    pub cpu: Option<usize>,
    /// Nice value or FIFO priority of the workers.
    pub prio: PoolPrio,
    /// Real CPUs the workers may run on.
    pub cpus: Vec<usize>,
    /// Real CPUs of the pod the pool serves.
    pub pod_cpus: Vec<usize>,
    pub strict: bool,
    pub wake: WakeMode,
    /// Unbound pools: concurrency managed with a cap of one running worker per pod CPU.
    pub managed: bool,
    /// A pod pool's lane of one CPU: the pod's real CPUs (empty otherwise).
    /// The lanes of a pod are pools of their own, linked by [`link_pod`].
    pub pod: Vec<usize>,
}

/// One item on a list: the work, its pool workqueue slot and its flush colour.
/// Owned by the list that holds it (a lane's worklist, a pwq's inactive
/// list, a worker's `scheduled`), so it is `L:` like them.
pub(crate) struct Item {
    pub work: Arc<WorkInner>,
    pub pwq: u32,
    pub color: u8,
    /// The lane (CPU of the pod) it was queued on.
    pub lane: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WState {
    Starting,
    Idle,
    Woken,
    Running,
    Exited,
    /// A workqueue's rescuer, attached while it runs a batch (not a pool worker).
    Rescuer,
    /// A worker of another lane pool of the pod, attached while it takes items
    /// of this one's lagging lane ([`Pool::host_guest`]); like a rescuer it is
    /// not counted in `nr_running` here.
    Guest,
}

impl WState {
    /// Attached from outside the pool (a rescuer or a guest): never counted,
    /// never sampled.
    fn borrowed(self) -> bool {
        matches!(self, WState::Rescuer | WState::Guest)
    }
}

/// Why a busy worker does not count in `nr_running` (bits of `WorkerSlot::blocked`).
pub(crate) const BLOCKED_ANNOTATED: u8 = 1;
/// The CPU-intensive tick marked its item (or its queue is `CPU_INTENSIVE`).
pub(crate) const BLOCKED_INTENSIVE: u8 = 2;
/// The /proc sampler saw it sleep.
pub(crate) const BLOCKED_SAMPLED: u8 = 4;

/// A worker slot of the busy table (the kernel's `struct worker`). Every
/// field is `L:` (in `PoolInner::workers`).
struct WorkerSlot {
    /// L: the thread, to unpark it (`None` while starting or exited).
    thread: Option<Thread>,
    /// L: where it is in its life.
    state: WState,
    /// L: the busy table: the address of the item this worker executes now
    /// (0: none). The worker holds the item itself (see `Running` in
    /// `worker.rs`) until after it clears this, so the address cannot be
    /// reused by another item while it is listed here.
    current: usize,
    /// L: the pwq slot of `current`.
    current_pwq: u32,
    /// L: the flush colour of `current`.
    current_color: u8,
    /// L: items that must run on this worker (re-queued while it runs them).
    scheduled: VecDeque<Item>,
    /// L: out of `nr_running` while nonzero: `BLOCKED_*` bits.
    blocked: u8,
    /// L: kernel thread id (for the watchdog's /proc and CPU-clock reads).
    tid: i32,
    /// L: items started by this worker; the watchdog sees a new item by a new value.
    seq: u64,
    /// L: the watchdog's last look: `seq` then ...
    obs_seq: u64,
    /// L: ... and the thread's CPU time then.
    obs_cpu: Duration,
    /// L: the thread (its id) and its CPU time at the previous tick (CPU
    /// time accounting); a slot taken over by another thread starts over.
    cpu_seen: Option<(i32, Duration)>,
    /// L: re-homed onto another CPU on this wakeup; charged to the next item's pwq.
    repatriated: bool,
    /// L: the lane it is homed on (pinned to that lane's CPU).
    lane: usize,
    /// L: when its current item began, while it is busy (the lane's `slow` test).
    last_start: Option<Instant>,
    /// L: woken to help this lane pool of the pod (a spread, see [`lane`]).
    guest_for: Option<&'static Pool>,
    /// L: the thread's context-switch records (see [`crate::switches`]):
    /// `None` for a borrowed slot, or where the kernel refused a probe (the
    /// `/proc` sampler looks at it instead).
    probe: Option<SwitchProbe>,
    /// L: `seq` at the watchdog's previous look (the `/proc` fallback reads
    /// a worker only once it has stayed on one item since then).
    look_seq: u64,
    /// L: what names `current` in a lockup report (see [`lockup`]).
    label: super::work::Label,
    /// L: hidden from concurrency management (its thread cleared the
    /// kernel's `PF_WQ_WORKER`, see [`set_cm_exempt`]).
    cm_exempt: bool,
    /// L: holds a unit of the CPU budget (see [`budget`]).
    budgeted: bool,
    /// L: handed its unit back while it does not count (blocked); takes
    /// it back when it counts again.
    budget_lent: bool,
}

impl WorkerSlot {
    fn empty() -> WorkerSlot {
        WorkerSlot {
            thread: None,
            state: WState::Exited,
            current: 0,
            current_pwq: 0,
            current_color: 0,
            scheduled: VecDeque::new(),
            blocked: 0,
            tid: 0,
            seq: 0,
            obs_seq: 0,
            obs_cpu: Duration::ZERO,
            cpu_seen: None,
            repatriated: false,
            lane: 0,
            last_start: None,
            guest_for: None,
            probe: None,
            look_seq: 0,
            label: super::work::Label::Static(""),
            cm_exempt: false,
            budgeted: false,
            budget_lent: false,
        }
    }
}

/// The part of a workqueue that lives in one pool (the kernel's
/// `pool_workqueue`). Every field is `L:` (in `PoolInner::pwqs`).
pub(crate) struct PwqState {
    /// L: its workqueue; `None` once detached (the slot is free).
    pub wq: Option<Arc<WqInner>>,
    /// L: the slot's era (see [`PwqId`]), bumped by each attach.
    pub era: u32,
    /// L: bound queues' per-pwq `max_active`.
    pub max_active: usize,
    /// L: items active (on a worklist or running).
    pub nr_active: usize,
    /// L: items held back by `max_active`, the node budget, a plug or a freeze.
    pub inactive: VecDeque<Item>,
    /// L: items in flight per flush colour.
    pub in_flight: [u32; NR_COLORS],
    /// L: items in flight, all colours.
    pub nr_in_flight: usize,
    /// L: the colour new items get.
    pub work_color: u8,
    /// L: the NUMA node whose budget it draws on.
    pub node: usize,
    /// L: unbound pwqs: units of the node's `max_active` budget taken ahead and not
    /// used yet. Batching them keeps the node counter (shared by every CPU) off
    /// the per-item path; they go back as soon as the pwq idles or another pwq
    /// waits, so the limit is never exceeded and nobody waits on cached budget.
    pub credits: usize,
    /// L: counters of this pwq, kept under the pool lock (no shared cache line).
    pub stats: PwqStats,
    /// L: its latency histograms, if its queue keeps them.
    pub lat: crate::hist::PwqLatency,
    /// L: replaced by a newer table (live attrs): dies once it has nothing in flight.
    pub retired: bool,
    /// L: retired and empty: takes no more items; a queuer that finds it retries
    /// with the workqueue's current table (the kernel's `refcnt == 0` check).
    pub dead: bool,
    /// L: an ordered workqueue's newest pwq while an older one still has items:
    /// holds its items inactive so the order survives an attrs change.
    pub plugged: bool,
}

impl PwqState {
    /// A free slot whose last pwq had era `era`: nothing allocated.
    fn free(era: u32) -> PwqState {
        PwqState {
            wq: None,
            era,
            max_active: 0,
            nr_active: 0,
            inactive: VecDeque::new(),
            in_flight: [0; NR_COLORS],
            nr_in_flight: 0,
            work_color: 0,
            node: 0,
            credits: 0,
            stats: PwqStats::default(),
            lat: Default::default(),
            retired: true,
            dead: true,
            plugged: false,
        }
    }

    /// What a pwq that is gone reads as: dead, empty, no counters.
    fn gone() -> PwqState {
        PwqState::free(0)
    }
}

/// The lock-protected state of a pool: every field is `L:`.
pub(crate) struct PoolInner {
    /// L: one per real CPU of the pod, by CPU number (see [`lane`]).
    pub lanes: Vec<Lane>,
    /// L: the busy table and idle workers' slots, by worker index.
    workers: Vec<WorkerSlot>,
    /// L: worker threads, starting, idle or busy.
    nr_workers: usize,
    /// L: a worker is being created (`POOL_MANAGER_ACTIVE`).
    manager_active: bool,
    /// L: workers created whose threads have not taken their slot yet.
    nr_starting: usize,
    /// L: pwqs, by slot.
    pub pwqs: Vec<PwqState>,
    /// L: detached pwq slots, for reuse.
    free_pwqs: Vec<u32>,
    /// L: pwqs attached and not dead (the kernel's pool `refcnt`).
    refcnt: usize,
    /// L: an unbound pool nobody uses any more: its workers exit.
    dying: bool,
    /// L: round robin over lanes for items queued from outside the pod.
    rr: usize,
    /// L: a lane pool's partners: the other lane pools of its pod.
    partners: Vec<&'static Pool>,
    /// L: since when work has waited with no worker to run it and none could be
    /// started (mayday after `MAYDAY_INITIAL_TIMEOUT`).
    starving_since: Option<Instant>,
    /// I: the pool's id (for trace events raised under the lock).
    pool_id: u32,
    /// L: the lockup watchdog's view of the pool (see [`lockup`]).
    lockup: lockup::Watch,
    /// L: worker creation failed: when to try again (see `manage::Backoff`).
    create_backoff: manage::Backoff,
    /// L: most workers of one lane counted in `nr_running` before no more are
    /// woken there: 1 for bound and managed unbound pools (one running worker
    /// per CPU), `usize::MAX` for an unmanaged (kernel-style) unbound pool and
    /// for a bound pool while it is disassociated (see [`hotplug`]: as in the
    /// kernel, a pool whose CPU is gone is not concurrency managed).
    cap: usize,
    /// L: a bound pool whose CPU the process may not use now (the kernel's
    /// `POOL_DISASSOCIATED`): its workers run on any usable CPU.
    disassociated: bool,
    /// L: times its workers were bound to its CPU again after it came back
    /// (the kernel's `rebind_workers`).
    rebinds: u64,
}

/// A worker pool.
pub(crate) struct Pool {
    /// I: its id, the index in the registry.
    pub id: u32,
    /// I: what it was made for.
    pub attrs: PoolAttrs,
    /// I: concurrency managed: `cap` is finite.
    pub managed: bool,
    /// The pool lock (`L:`).
    inner: Mutex<PoolInner>,
    /// O: a lane pool's pod: every lane pool of it, by CPU, itself included
    /// (set once by [`link_pod`]; empty for other pools).
    pod_pools: OnceLock<Vec<&'static Pool>>,
    /// A: read by the other lane pools of the pod without the lock: this lane
    /// has no counted worker and an idle one to lend (see [`lane`]). Written
    /// under `L:`. `Relaxed`: a hint; a borrower takes the lender's lock and
    /// checks again before it takes a worker.
    lendable: Lendable,
    /// A: its items were seen to block (the `/proc` sampler found a worker
    /// asleep in one), or `CMWQ_BLOCK_DETECT=switch` says to act as if they
    /// had: its workers read their context-switch records where perf allows,
    /// and the watchdog looks at it every millisecond while work waits (see
    /// [`sleep`]). Never cleared. `Relaxed`: a setting; a worker that reads it
    /// late opens its probe one busy spell later.
    blocks: AtomicBool,
    /// A: queued in the CPU budget's waiters (see [`budget`]). `SeqCst`:
    /// set before the registration is counted in `NR_WAITING`.
    budget_waiting: AtomicBool,
    /// A: worker threads that could not be created (`Relaxed`: a counter).
    pub create_failed: AtomicU64,
    /// A: workers that could not take the pool's priority (`Relaxed`: a counter).
    pub prio_failed: AtomicU64,
    /// A: worker threads that died outside every `catch_unwind` (and were
    /// replaced) (`Relaxed`: a counter).
    pub workers_lost: AtomicU64,
}

/// [`Pool::lendable`] on a cache line of its own: the other CPUs of the pod
/// read it on their queue path while this CPU writes it.
#[repr(align(128))]
#[derive(Default)]
struct Lendable(AtomicBool);

/// A wakeup decided under the pool lock, done after it is dropped.
pub(crate) enum Wake {
    /// A worker of this pool picked for a lane.
    Worker {
        thread: Thread,
        /// Re-homed: (thread id, CPU) to pin it to before it is unparked.
        rehome: Option<(i32, usize)>,
    },
    /// This lane pool lags: a partner lane pool of the pod lends it an idle
    /// worker ([`lend_to`]). Decided without the partners' locks.
    Spread,
}

impl Wake {
    /// Wakes the worker; `pool` is the pool whose lock decided it.
    fn run(self, pool: &'static Pool) {
        match self {
            Wake::Worker { thread, rehome } => {
                if let Some((tid, cpu)) = rehome
                    && let Err(e) = sched::set_affinity_of(tid, &[cpu])
                {
                    // The CPU left the process's cpuset: it costs locality
                    // now, and the watchdog looks at the usable CPUs again.
                    hotplug::pin_failed(&e);
                }
                thread.unpark();
            }
            Wake::Spread => lend_to(pool),
        }
    }
}

/// Deferred work found under the pool lock, done after it is dropped.
///
/// [`pending`](Post::pending) must look at every field: a `Post` it calls
/// empty is forgotten rather than dropped on the per-item path
/// (`process_one_work`), so a field it missed would leak what it holds.
#[derive(Default)]
pub(crate) struct Post {
    wake: Option<Wake>,
    notify: Option<Arc<WqInner>>,
    activate: Option<(Arc<WqInner>, usize)>,
    /// A pwq of this ordered workqueue died: unplug the next one.
    died: Option<Arc<WqInner>>,
    /// A retired pwq died: its workqueue frees it ([`WqInner::reap`]).
    reap: Option<(Arc<WqInner>, PwqId)>,
}

impl Post {
    /// Something must be done after the lock is dropped.
    fn pending(&self) -> bool {
        self.wake.is_some()
            || self.activate.is_some()
            || self.notify.is_some()
            || self.died.is_some()
            || self.reap.is_some()
    }

    fn run(self, pool: &'static Pool) {
        if let Some(w) = self.wake {
            w.run(pool);
        }
        if let Some((wq, node)) = self.activate {
            wq.node_activate(node);
        }
        if let Some(wq) = self.notify {
            wq.notify_flushers();
        }
        if let Some(wq) = self.died {
            wq.ordered_advance();
        }
        if let Some((wq, id)) = self.reap {
            wq.reap(pool, id);
        }
    }
}

impl PoolInner {
    /// Gives back the memory of every list of the pool whose capacity is
    /// far above what it holds (see [`SHRINK_ABOVE`]). Not on any item's
    /// path: an idle timeout, or the pool's last pwq going.
    fn shrink_lists(&mut self) {
        fn shrink(v: &mut VecDeque<Item>, floor: usize) {
            if v.capacity() > SHRINK_ABOVE.max(4 * v.len()) {
                v.shrink_to(floor.max(2 * v.len()));
            }
        }
        for l in &mut self.lanes {
            shrink(&mut l.worklist, lane::LANE_LIST_CAP);
        }
        for p in self.pwqs.iter_mut().filter(|p| p.wq.is_some()) {
            shrink(&mut p.inactive, PWQ_LIST_CAP);
        }
        for w in &mut self.workers {
            shrink(&mut w.scheduled, 0);
        }
    }

    /// The lists' capacity, in items (a test's view of [`shrink_lists`](Self::shrink_lists)).
    fn list_capacity(&self) -> usize {
        self.lanes
            .iter()
            .map(|l| l.worklist.capacity())
            .sum::<usize>()
            + self
                .pwqs
                .iter()
                .map(|p| p.inactive.capacity())
                .sum::<usize>()
            + self
                .workers
                .iter()
                .map(|w| w.scheduled.capacity())
                .sum::<usize>()
    }

    /// The slot of pwq `id` if that pwq is still attached (not freed, and
    /// its slot not reused since `id` was handed out).
    fn live(&self, id: PwqId) -> Option<usize> {
        let i = id.slot as usize;
        self.pwqs
            .get(i)
            .filter(|p| p.era == id.era && p.wq.is_some())
            .map(|_| i)
    }
    fn nr_idle(&self) -> usize {
        self.lanes.iter().map(|l| l.idle.len()).sum()
    }
    fn nr_running(&self) -> usize {
        self.lanes.iter().map(|l| l.nr_running).sum()
    }
    fn worklist_len(&self) -> usize {
        self.lanes.iter().map(|l| l.worklist.len()).sum()
    }
    fn has_work(&self) -> bool {
        self.lanes.iter().any(Lane::has_work)
    }
    /// Every waiting item, lane by lane.
    fn waiting(&self) -> impl Iterator<Item = &Item> {
        self.lanes.iter().flat_map(|l| l.worklist.iter())
    }
    /// Work waits on a lane nobody serves (`need_more_worker`).
    fn need_more_worker(&self, cap: usize) -> bool {
        self.lanes.iter().any(|l| l.unserved(cap))
    }
    /// There is an idle worker to hand work to, or one on its way up (the
    /// kernel's new worker is idle the moment it is made; here its thread
    /// still has to start, and meanwhile it must count as the spare, or every
    /// look would start another).
    fn may_start_working(&self) -> bool {
        self.nr_starting > 0 || self.lanes.iter().any(|l| !l.idle.is_empty())
    }
    /// Work that an idle worker of lane `h` should leave idle for: its own
    /// lane's, unserved, or another lane's that it may steal.
    fn work_for(&mut self, h: usize) -> bool {
        let cap = self.cap;
        let mut now = LazyNow::default();
        self.lanes[h].unserved(cap)
            || self
                .lanes
                .iter_mut()
                .enumerate()
                .any(|(d, l)| d != h && l.stealable(cap, &mut now))
    }

    /// Whether a worker of lane `h` starting an item should time it: only
    /// when items wait behind it and another CPU of the pod could take them
    /// (another lane of this pool, or a partner lane pool that can lend).
    fn should_time(&self, h: usize, cap: usize) -> bool {
        self.lanes[h].has_work()
            && (self
                .lanes
                .iter()
                .enumerate()
                .any(|(d, l)| d != h && l.free(cap))
                || self
                    .partners
                    .iter()
                    .any(|p| p.lendable.0.load(Ordering::Relaxed)))
    }
    /// The lane an item queued from real CPU `cpu` goes on: that CPU's, or
    /// (queued from outside the pod) one whose CPU runs no worker, else the
    /// next in turn.
    fn queue_lane(&mut self, cpu: usize) -> usize {
        let cap = self.cap;
        if self.lanes.len() == 1 {
            return 0;
        }
        if let Ok(i) = self.lanes.binary_search_by_key(&cpu, |l| l.cpu) {
            return i;
        }
        if let Some(i) = self.lanes.iter().position(|l| l.free(cap) && !l.has_work()) {
            return i;
        }
        self.rr = (self.rr + 1) % self.lanes.len();
        self.rr
    }

    /// Picks an idle worker if a lane needs one; the caller wakes it after
    /// the unlock. `hint` is the lane that just changed (its items are looked
    /// at first).
    ///
    /// First, a lane with items and no worker serving them gets one of its
    /// own CPU (re-homed from another lane if it has none idle). Otherwise, if
    /// `hint` lags (see [`lane`]), a CPU of the pod with no counted worker
    /// gets one, which will steal from it.
    #[inline]
    fn kick(&mut self, hint: usize) -> Option<Wake> {
        let cap = self.cap;
        if self.lanes.len() == 1 && self.partners.is_empty() {
            // A bound pool or a one-CPU pod: nothing to lag behind or spread
            // to, so the only question is whether its items wait unserved.
            // Every item asks (twice: queued and started), so it is answered
            // here, inlined, and only a pool that can spread pays for the
            // general search's call.
            if !self.lanes[0].unserved(cap) {
                // Served, unless its worker fell asleep in its item.
                if !self.lanes[0].has_work() {
                    return None;
                }
                return self.wake_past_sleeper(0, cap);
            }
            return self.wake_for(0, false);
        }
        self.kick_pod(hint, cap)
    }

    /// [`kick`](Self::kick) for a pool of several lanes or with partners.
    #[inline(never)]
    fn kick_pod(&mut self, hint: usize, cap: usize) -> Option<Wake> {
        let n = self.lanes.len();
        if self.lanes[hint].has_work()
            && !self.lanes[hint].free(cap)
            && let Some(w) = self.wake_past_sleeper(hint, cap)
        {
            // Served, unless its worker fell asleep in its item.
            return Some(w);
        }
        if let Some(d) = lanes_from(hint, n).find(|&d| self.lanes[d].unserved(cap)) {
            let w = self.wake_for(d, false);
            if w.is_none() && !self.partners.is_empty() {
                // A lane pool with nobody idle: a partner may lend one.
                return Some(Wake::Spread);
            }
            return w;
        }
        if n > 1 && self.lanes[hint].has_work() {
            let mut now = LazyNow::default();
            let free = lanes_from(hint, n)
                .skip(1)
                .find(|&d| self.lanes[d].free(cap));
            if let Some(d) = free
                && self.lanes[hint].lagging(&mut now)
            {
                return self.wake_for(d, true);
            }
        }
        // A lane pool: the other CPUs of the pod are partner pools.
        if n == 1
            && self.lanes[0].has_work()
            && self
                .partners
                .iter()
                .any(|p| p.lendable.0.load(Ordering::Relaxed))
            && self.lanes[0].lagging(&mut LazyNow::default())
        {
            return Some(Wake::Spread);
        }
        None
    }

    /// Wakes a worker for lane `d`: its own most recently idled, else one of
    /// the lane with the most idle, re-homed to `d`'s CPU.
    fn wake_for(&mut self, d: usize, spread: bool) -> Option<Wake> {
        if !self.budget_allows_wake() {
            return None;
        }
        let (i, rehome) = if let Some(i) = self.lanes[d].idle.pop() {
            (i, false)
        } else {
            let from = (0..self.lanes.len())
                .filter(|&e| !self.lanes[e].idle.is_empty())
                .max_by_key(|&e| self.lanes[e].idle.len());
            let Some(e) = from else {
                // Work waits and no worker is idle. If nobody is creating one
                // either (an earlier creation failed, the pool has no worker at
                // all), make sure the watchdog is awake to retry and send mayday:
                // it may have parked while this pool's worklists were still empty.
                if !self.manager_active {
                    watchdog::poke();
                }
                return None;
            };
            (self.lanes[e].idle.pop().expect("lane has idle"), true)
        };
        let lane = &mut self.lanes[d];
        lane.nr_woken += 1;
        lane.stats.spread += u64::from(spread);
        lane.stats.rehomed += u64::from(rehome);
        let cpu = lane.cpu;
        let w = &mut self.workers[i];
        w.state = WState::Woken;
        w.lane = d;
        w.repatriated |= rehome;
        Some(Wake::Worker {
            thread: w.thread.clone().expect("idle worker has a thread"),
            rehome: rehome.then_some((w.tid, cpu)),
        })
    }

    /// The next item for a running worker of lane `h`: its own lane's, else
    /// one stolen from a lane that nobody serves or that lags.
    fn next_item(&mut self, h: usize) -> Option<Item> {
        let cap = self.cap;
        if self.lanes[h].keep_working(cap) {
            let it = self.lanes[h].pop();
            self.lanes[h].stats.local += 1;
            return it;
        }
        let n = self.lanes.len();
        let mut now = LazyNow::default();
        let d = lanes_from(h, n)
            .skip(1)
            .find(|&d| self.lanes[d].stealable(cap, &mut now))?;
        self.lanes[d].stats.stolen += 1;
        self.lanes[h].stats.stole += 1;
        self.lanes[d].pop()
    }

    /// Takes worker `me` out of `nr_running` for `why` (a `BLOCKED_*` bit).
    /// Returns true if it counted before.
    fn mark_out(&mut self, me: usize, why: u8, managed: bool) -> bool {
        let was = self.workers[me].blocked;
        self.workers[me].blocked |= why;
        if was == 0 && managed {
            let h = self.workers[me].lane;
            self.lanes[h].nr_running -= 1;
            self.budget_lend(me);
            return true;
        }
        false
    }

    /// Clears `why`; the worker counts again once no reason is left.
    fn mark_in(&mut self, me: usize, why: u8, managed: bool) {
        let was = self.workers[me].blocked;
        self.workers[me].blocked &= !why;
        if was != 0 && self.workers[me].blocked == 0 && managed {
            let h = self.workers[me].lane;
            self.lanes[h].nr_running += 1;
            self.lanes[h].runner = me;
            self.budget_unlend(me);
        }
    }

    /// Work waits, nobody can take it, and no worker is idle to wake.
    fn starving(&self, cap: usize) -> bool {
        self.need_more_worker(cap) && !self.may_start_working()
    }

    /// The worker that executes `work` now, if any (the busy table).
    fn find_executing(&self, work: &Arc<WorkInner>) -> Option<usize> {
        let a = crate::engine::work::addr(work);
        self.workers.iter().position(|w| w.current == a)
    }

    /// Whether a pwq may activate one more item now.
    fn pwq_can_activate(&self, slot: u32) -> bool {
        let p = &self.pwqs[slot as usize];
        let wq = p.wq.as_ref().expect("live pwq");
        !wq.frozen.load(Ordering::Relaxed) && p.nr_active < p.max_active
    }

    /// The oldest waiting item of pwq `slot` that no worker executes now (a
    /// rescuer's next), from whichever lane holds it.
    fn take_for_rescue(&mut self, slot: u32) -> Option<Item> {
        let (d, pos) = self.lanes.iter().enumerate().find_map(|(d, l)| {
            l.worklist
                .iter()
                .position(|it| it.pwq == slot && self.find_executing(&it.work).is_none())
                .map(|p| (d, p))
        })?;
        self.lanes[d].worklist.remove(pos)
    }

    /// Pwq `slot` is still `wq`'s (not freed and reused for another queue).
    fn pwq_of(&self, slot: u32, wq: &Arc<WqInner>) -> bool {
        self.pwqs[slot as usize]
            .wq
            .as_ref()
            .is_some_and(|x| Arc::ptr_eq(x, wq))
    }

    /// Puts an active item on its lane's worklist.
    fn push_active(&mut self, it: Item) {
        self.lanes[usize::from(it.lane)].worklist.push_back(it);
    }
}

/// The `n` lanes in turn, starting at `first` and wrapping around (no
/// division: it runs for every item).
fn lanes_from(first: usize, n: usize) -> impl Iterator<Item = usize> {
    debug_assert!(first < n, "lane {first} of {n}");
    (first..n).chain(0..first.min(n))
}

/// Releases the pool lock and wakes the worker a kick picked: after the unlock
/// ([`WakeMode::Deferred`]) or before it ([`WakeMode::UnderLock`]).
///
/// Every path that unlocks a pool and may wake a worker goes through here, so
/// how this function is compiled decides the code of the whole release path.
/// The `inline-unlock` cargo feature inlines it at every call site (seed 001's
/// inlined `_raw_spin_unlock`); without it, it stays one out-of-line copy. The
/// lab's `icache` study compares the two builds.
#[cfg_attr(feature = "inline-unlock", inline(always))]
#[cfg_attr(not(feature = "inline-unlock"), inline(never))]
fn unlock_wake(pool: &'static Pool, g: MutexGuard<'_, PoolInner>, wake: Option<Wake>) {
    pool.update_lendable(&g);
    match pool.attrs.wake {
        // A spread takes a partner's lock: never while holding ours.
        WakeMode::UnderLock if !matches!(wake, Some(Wake::Spread)) => {
            if let Some(w) = wake {
                w.run(pool);
            }
            drop(g);
        }
        _ => {
            drop(g);
            if let Some(w) = wake {
                w.run(pool);
            }
        }
    }
}

// ---- registry ----

/// Most pools a process makes (ids are never reused).
pub(crate) const MAX_POOLS: usize = 1 << 14;
/// O: every pool, by id; each slot is set once, before the pool is used.
static POOLS: [OnceLock<&'static Pool>; MAX_POOLS] = [const { OnceLock::new() }; MAX_POOLS];
/// A: the next pool id. `Relaxed`: a scan bound; each `POOLS` slot publishes
/// its own pool (a scan that sees the id before the slot skips it).
static NEXT_POOL: AtomicU32 = AtomicU32::new(0);
/// R unbound: unbound pools by attributes.
static UNBOUND_POOLS: Mutex<Option<HashMap<PoolAttrs, u32>>> = Mutex::new(None);
/// Bound pools by (cpu, priority, wake mode).
type BoundKey = (usize, PoolPrio, WakeMode);
/// R bound: bound pools by (cpu, priority, wake mode).
static BOUND_POOLS: Mutex<Option<HashMap<BoundKey, u32>>> = Mutex::new(None);
/// The kernel's `IDLE_WORKER_TIMEOUT`: how long a surplus idle worker
/// lingers before it exits, in ms (300 s).
const IDLE_WORKER_TIMEOUT_MS: u64 = 300_000;
/// A: the idle timeout in ms. `Relaxed`: a setting read on its own.
static IDLE_TIMEOUT_MS: AtomicU64 = AtomicU64::new(IDLE_WORKER_TIMEOUT_MS);
/// A: the worker-creation test hook. `Relaxed`: a setting read on its own.
static FAIL_CREATE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// (pool id, worker index) of the calling thread if it is a worker.
    static WORKER: std::cell::Cell<Option<(u32, usize)>> = const { std::cell::Cell::new(None) };
    /// Addresses of the workqueue and of the work item the calling worker
    /// runs ((0, 0): none); one cell, so a worker sets both with one access.
    static CURRENT: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// Sets how long surplus idle workers linger before they exit (kernel: 300 s).
pub fn set_idle_timeout(d: Duration) {
    IDLE_TIMEOUT_MS.store(
        d.as_millis().clamp(1, u64::MAX as u128) as u64,
        Ordering::Relaxed,
    );
}

/// Failure injection: make worker creation fail (as if the thread limit were
/// reached). Only with the `failure-injection` feature, for tests and the lab.
#[cfg(feature = "failure-injection")]
pub fn debug_fail_worker_creation(fail: bool) {
    FAIL_CREATE.store(fail, Ordering::Relaxed);
}

pub(crate) fn get_pool(id: u32) -> Option<&'static Pool> {
    POOLS.get(id as usize).and_then(|c| c.get().copied())
}

/// Address of the workqueue whose item the calling thread runs, if it is a worker.
pub(crate) fn current_wq_addr() -> usize {
    CURRENT.with(|c| c.get().0)
}

/// Address of the work item the calling thread runs, if it is a worker.
pub(crate) fn current_work_addr() -> usize {
    CURRENT.with(|c| c.get().1)
}

/// A: the kill-a-worker test hook. `Relaxed`: a setting read on its own.
static DEBUG_KILL_WORKER: AtomicBool = AtomicBool::new(false);

/// Test hook: the next worker to finish an item panics outside every
/// `catch_unwind`, with the item's accounting not done (a bug in the engine
/// would look like that). The pool must recover: see [`Pool::worker_died`].
/// Only with the `failure-injection` feature, for tests and the lab.
#[cfg(feature = "failure-injection")]
pub fn debug_kill_next_worker() {
    DEBUG_KILL_WORKER.store(true, Ordering::Relaxed);
}

fn new_pool(attrs: PoolAttrs) -> Result<&'static Pool, crate::Error> {
    // The CPU budget is read before the first worker can run.
    budget::init();
    let managed = attrs.cpu.is_some() || attrs.managed;
    let cap = if managed { 1 } else { usize::MAX };
    // One lane per real CPU of the pod (sorted: lanes are found by binary
    // search); an item names its lane in 16 bits.
    let mut lane_cpus = attrs.pod_cpus.clone();
    lane_cpus.sort_unstable();
    lane_cpus.dedup();
    lane_cpus.truncate(usize::from(u16::MAX) + 1);
    if lane_cpus.is_empty() {
        lane_cpus.push(sched::current_cpu());
    }
    // The watchdog first: a pool it cannot watch is not made.
    watchdog::ensure_started()?;
    let id = NEXT_POOL.fetch_add(1, Ordering::Relaxed);
    if id as usize >= MAX_POOLS {
        return Err(crate::Error::TooManyPools);
    }
    let pool: &'static Pool = Box::leak(Box::new(Pool {
        id,
        attrs,
        managed,
        inner: Mutex::new(PoolInner {
            cap,
            disassociated: false,
            rebinds: 0,
            lanes: lane_cpus.into_iter().map(Lane::new).collect(),
            workers: Vec::new(),
            nr_workers: 0,
            manager_active: false,
            nr_starting: 0,
            pwqs: Vec::new(),
            free_pwqs: Vec::new(),
            refcnt: 0,
            dying: false,
            rr: 0,
            partners: Vec::new(),
            pool_id: id,
            starving_since: None,
            lockup: lockup::Watch::default(),
            create_backoff: manage::Backoff::default(),
        }),
        pod_pools: OnceLock::new(),
        lendable: Lendable::default(),
        blocks: AtomicBool::new(crate::switches::probe_from_start()),
        budget_waiting: AtomicBool::new(false),
        create_failed: AtomicU64::new(0),
        prio_failed: AtomicU64::new(0),
        workers_lost: AtomicU64::new(0),
    }));
    let _ = POOLS[id as usize].set(pool);
    Ok(pool)
}

/// The bound pool of `cpu` for the given priority.
pub(crate) fn bound_pool(
    cpu: usize,
    prio: PoolPrio,
    wake: WakeMode,
) -> Result<&'static Pool, crate::Error> {
    let mut map = BOUND_POOLS.lock();
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(&id) = map.get(&(cpu, prio, wake)) {
        return Ok(get_pool(id).expect("registered pool"));
    }
    // Made under `R usable`: a change of the usable CPUs sees it, or it
    // sees the change (see `hotplug`).
    let (_usable_lock, usable) = hotplug::hold();
    let pool = new_pool(PoolAttrs {
        cpu: Some(cpu),
        prio,
        cpus: vec![cpu],
        pod_cpus: vec![cpu],
        strict: true,
        wake,
        managed: true,
        pod: Vec::new(),
    })?;
    pool.init_association(&usable);
    map.insert((cpu, prio, wake), pool.id);
    Ok(pool)
}

/// The unbound pool with these attributes, shared (and revived if it was let go).
pub(crate) fn unbound_pool(attrs: PoolAttrs) -> Result<&'static Pool, crate::Error> {
    let mut map = UNBOUND_POOLS.lock();
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(&id) = map.get(&attrs) {
        return Ok(get_pool(id).expect("registered pool"));
    }
    let pool = new_pool(attrs.clone())?;
    map.insert(attrs, pool.id);
    Ok(pool)
}

/// Links the lane pools of one pod (one pool per real CPU, in CPU order) so
/// that a lagging one can borrow an idle worker of another. Pools are shared
/// by attributes, so a later workqueue with the same pod finds them linked
/// already; the link never changes.
pub(crate) fn link_pod(lanes: &[&'static Pool]) {
    for &p in lanes {
        if p.pod_pools.set(lanes.to_vec()).is_ok() {
            let partners = lanes.iter().copied().filter(|q| !std::ptr::eq(*q, p));
            p.lock().partners = partners.collect();
        }
    }
}

/// A partner of the lagging lane pool `to` lends it an idle worker: the next
/// partner, in CPU order after `to`, whose lane has no counted worker and an
/// idle one. Runs with no pool lock held and takes one partner's lock at a
/// time, so lane pools never hold two locks.
fn lend_to(to: &'static Pool) {
    let Some(pods) = to.pod_pools.get() else {
        return;
    };
    let k = pods.iter().position(|p| std::ptr::eq(*p, to)).unwrap_or(0);
    for j in 1..pods.len() {
        let d = pods[(k + j) % pods.len()];
        if !d.lendable.0.load(Ordering::Relaxed) {
            continue;
        }
        let mut g = d.lock();
        if !g.lanes[0].free(g.cap) {
            continue;
        }
        let Some(i) = g.lanes[0].idle.pop() else {
            continue;
        };
        g.lanes[0].nr_woken += 1;
        g.lanes[0].stats.spread += 1;
        g.workers[i].state = WState::Woken;
        g.workers[i].guest_for = Some(to);
        let t = g.workers[i].thread.clone();
        d.update_lendable(&g);
        drop(g);
        if let Some(t) = t {
            t.unpark();
        }
        return;
    }
}

impl Pool {
    /// Takes the pool lock. Inlined: its callers are spread over this
    /// folder's modules, and the lock is on every item's path.
    #[inline]
    fn lock(&self) -> MutexGuard<'_, PoolInner> {
        self.inner.lock()
    }

    /// The capacity of the pool's item lists, in items (see
    /// [`PoolInner::shrink_lists`]).
    pub(crate) fn list_capacity(&self) -> usize {
        self.lock().list_capacity()
    }

    /// A lane pool's pod, named by the id of its first lane pool.
    pub(crate) fn pod_id(&self) -> Option<u32> {
        self.pod_pools.get().and_then(|v| v.first()).map(|p| p.id)
    }

    /// A lane pool tells its partners whether it can lend a worker now (no
    /// counted worker on its CPU, one idle). Written only when it changes, so
    /// the partners' reads stay on a shared cache line.
    fn update_lendable(&self, g: &PoolInner) {
        if g.partners.is_empty() {
            return;
        }
        let l = &g.lanes[0];
        let v = l.free(g.cap) && !l.idle.is_empty();
        if self.lendable.0.load(Ordering::Relaxed) != v {
            self.lendable.0.store(v, Ordering::Relaxed);
        }
    }

    /// Links a workqueue to this pool: allocates its pwq slot. New items get
    /// flush colour `color` (the workqueue's current one); a `plugged` pwq holds
    /// its items until [`unplug`](Self::unplug). Fails only when the pool
    /// already holds 2^24 pwqs (a slot number must fit a routing word).
    pub(crate) fn attach(
        &'static self,
        wq: Arc<WqInner>,
        max_active: usize,
        node: usize,
        color: u8,
        plugged: bool,
    ) -> Result<PwqId, crate::Error> {
        let mut g = self.lock();
        let slot = match g.free_pwqs.pop() {
            Some(s) => s,
            None if g.pwqs.len() > ERA_MASK as usize => return Err(crate::Error::TooManyPools),
            None => {
                g.pwqs.push(PwqState::free(ERA_MASK));
                (g.pwqs.len() - 1) as u32
            }
        };
        let era = g.pwqs[slot as usize].era.wrapping_add(1) & ERA_MASK;
        g.refcnt += 1;
        g.dying = false;
        let lat = crate::hist::PwqLatency::new(wq.latency);
        g.pwqs[slot as usize] = PwqState {
            wq: Some(wq),
            era,
            max_active,
            nr_active: 0,
            // Room up front, as for the lane worklists: a pwq first used late
            // (a lane pool of the pod the queuer just moved to) must not
            // allocate on the queue path.
            inactive: VecDeque::with_capacity(PWQ_LIST_CAP),
            in_flight: [0; NR_COLORS],
            nr_in_flight: 0,
            work_color: color,
            node,
            credits: 0,
            stats: PwqStats::default(),
            lat,
            retired: false,
            dead: false,
            plugged,
        };
        // A pool starts with one idle worker, except the pool of a CPU that
        // is not usable (never online, or outside the process's CPUs): a
        // machine may list hundreds of possible CPUs, and such a pool gets its
        // first worker from the watchdog when an item is queued there.
        if g.nr_workers == 0 && !g.disassociated {
            g = self.create_worker(g, 0);
        }
        drop(g);
        Ok(PwqId { slot, era })
    }

    /// Unlinks a drained pwq and frees its slot (a dead pwq gave up its pool
    /// reference already); its memory goes with it, and the slot is reused
    /// by the next attach under a new era. Does nothing for a stale
    /// `id` (freed already: `destroy` and [`WqInner::reap`] may both try).
    pub(crate) fn detach(&'static self, id: PwqId) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return;
        };
        let dead = g.pwqs[i].dead;
        debug_assert_eq!(g.pwqs[i].nr_in_flight, 0, "detaching a pwq with items");
        // Dropped after the unlock: the workqueue reference may be the last.
        let old = std::mem::replace(&mut g.pwqs[i], PwqState::free(id.era));
        g.free_pwqs.push(id.slot);
        let wake = if dead {
            Vec::new()
        } else {
            self.put_ref(&mut g)
        };
        if g.refcnt == 0 && g.free_pwqs.len() == g.pwqs.len() {
            // No workqueue uses the pool any more: its lists' memory goes too.
            g.shrink_lists();
        }
        drop(g);
        drop(old);
        for t in wake {
            t.unpark();
        }
    }

    /// Drops one workqueue's reference; an unbound pool with no users lets its
    /// workers go (returns the idle ones to wake so they exit).
    fn put_ref(&self, g: &mut PoolInner) -> Vec<Thread> {
        g.refcnt -= 1;
        let mut wake = Vec::new();
        if g.refcnt == 0 && self.attrs.cpu.is_none() {
            g.dying = true;
            for &i in g.lanes.iter().flat_map(|l| l.idle.iter()) {
                if let Some(t) = &g.workers[i].thread {
                    wake.push(t.clone());
                }
            }
        }
        wake
    }

    /// Marks a retired pwq dead: no more items, pool reference released.
    /// The slot stays allocated until its workqueue frees it
    /// ([`WqInner::reap`], asked for through `post`), which takes it off its
    /// lists first.
    fn kill_pwq(&self, g: &mut PoolInner, slot: u32, post: &mut Post) -> Vec<Thread> {
        let p = &mut g.pwqs[slot as usize];
        p.dead = true;
        let wq = p.wq.clone().expect("live pwq");
        let id = PwqId { slot, era: p.era };
        if wq.ordered {
            post.died = Some(wq.clone());
        }
        debug_assert!(post.reap.is_none(), "one pwq dies per post");
        post.reap = Some((wq, id));
        self.put_ref(g)
    }

    /// Retires a pwq replaced by a new table; it dies at once if empty, else
    /// when its last item completes.
    pub(crate) fn retire(&'static self, id: PwqId) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return;
        };
        let mut post = Post::default();
        g.pwqs[i].retired = true;
        let wake = if g.pwqs[i].nr_in_flight == 0 && !g.pwqs[i].dead {
            self.kill_pwq(&mut g, id.slot, &mut post)
        } else {
            Vec::new()
        };
        drop(g);
        for t in wake {
            t.unpark();
        }
        post.run(self);
    }

    /// Kills a retired, empty pwq found while advancing an ordered chain.
    /// Returns whether it is dead (or gone), and the workqueue that must
    /// free it ([`WqInner::reap`], which the caller runs once it holds no
    /// lock: it is the chain walker, and `died` would re-enter it).
    pub(crate) fn kill_if_drained(&'static self, id: PwqId) -> (bool, Option<Arc<WqInner>>) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return (true, None);
        };
        let p = &g.pwqs[i];
        if p.dead {
            return (true, None);
        }
        if !(p.retired && p.nr_in_flight == 0) {
            return (false, None);
        }
        let mut post = Post::default();
        let wake = self.kill_pwq(&mut g, id.slot, &mut post);
        drop(g);
        for t in wake {
            t.unpark();
        }
        (true, post.reap.take().map(|(wq, _)| wq))
    }

    /// Lets a plugged pwq's items compete for the node budget, oldest first.
    pub(crate) fn unplug(&'static self, id: PwqId) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return;
        };
        let p = &mut g.pwqs[i];
        if !p.plugged {
            return;
        }
        p.plugged = false;
        let n = p.inactive.len();
        let node = p.node;
        let wq = p.wq.clone().expect("live pwq");
        if n == 0 {
            return;
        }
        // Registered under the pool lock, so an item queued right after the
        // unlock finds waiters and lines up behind these.
        wq.node_enqueue_waiting(node, self.id, id.slot, n);
        drop(g);
        wq.node_activate(node);
    }

    /// Sets the flush colour that new items of a pwq get.
    pub(crate) fn pwq_flip_color(&self, id: PwqId, color: u8) {
        let mut g = self.lock();
        if let Some(i) = g.live(id) {
            g.pwqs[i].work_color = color;
        }
    }

    /// A pwq's counters (zero for one that is gone).
    pub(crate) fn pwq_stats(&self, id: PwqId) -> PwqStats {
        self.with_pwq(id, |p| p.stats)
    }

    /// Adds a pwq's latency histograms to `sum` (nothing for one that is gone).
    pub(crate) fn pwq_latency(&self, id: PwqId, sum: &mut crate::hist::PwqLatency) {
        self.with_pwq(id, |p| sum.add(&p.lat));
    }

    /// Runs `f` on a pwq's state under the pool lock; a pwq that is gone
    /// reads as dead and empty.
    pub(crate) fn with_pwq<R>(&self, id: PwqId, f: impl FnOnce(&PwqState) -> R) -> R {
        let g = self.lock();
        match g.live(id) {
            Some(i) => f(&g.pwqs[i]),
            None => f(&PwqState::gone()),
        }
    }

    /// Changes a pwq's max_active and activates what the new limit allows.
    pub(crate) fn pwq_set_max_active(&'static self, id: PwqId, max: usize) {
        let mut g = self.lock();
        let Some(i) = g.live(id) else {
            return;
        };
        g.pwqs[i].max_active = max;
        let hint = self.activate_pwq(&mut g, id.slot);
        let wake = g.kick(hint);
        unlock_wake(self, g, wake);
    }

    /// Activates inactive items of a bound pwq while its limit allows.
    /// Returns the lane of the last one activated (0 if none), a kick's hint.
    fn activate_pwq(&self, g: &mut PoolInner, slot: u32) -> usize {
        let mut hint = 0;
        while g.pwq_can_activate(slot) {
            let Some(it) = g.pwqs[slot as usize].inactive.pop_front() else {
                break;
            };
            g.pwqs[slot as usize].nr_active += 1;
            hint = usize::from(it.lane);
            g.push_active(it);
        }
        hint
    }

    /// Activates one inactive item of an unbound pwq that holds a node budget slot.
    /// Returns false (budget not used) if the pwq has nothing inactive.
    ///
    /// A waiting entry names its pwq by slot alone and may outlive it (its
    /// items were cancelled, the pwq died and was freed): whatever pwq holds
    /// the slot now is used only if it is `wq`'s, draws on the same `node`
    /// and is not plugged, so the unit is one of that pwq's own budget and an
    /// ordered queue's held-back generation stays held back.
    pub(crate) fn activate_one_unbound(
        &'static self,
        slot: u32,
        wq: &Arc<WqInner>,
        node: usize,
    ) -> bool {
        let mut g = self.lock();
        if !g.pwq_of(slot, wq) {
            return false;
        }
        let p = &g.pwqs[slot as usize];
        if p.node != node || p.plugged {
            return false;
        }
        let Some(it) = g.pwqs[slot as usize].inactive.pop_front() else {
            return false;
        };
        g.pwqs[slot as usize].nr_active += 1;
        let hint = usize::from(it.lane);
        g.push_active(it);
        let wake = g.kick(hint);
        unlock_wake(self, g, wake);
        true
    }

    /// Puts a claimed work item on this pool (the tail of `__queue_work`).
    /// The item's reference is handed over: the worklist keeps it. Gives it
    /// back, changing nothing, if the pwq died after the caller picked it:
    /// the caller picks again from the workqueue's current table; also if
    /// `id` is stale (the pwq was freed since the caller read it).
    pub(crate) fn insert(
        &'static self,
        id: PwqId,
        work: Arc<WorkInner>,
        wq: &Arc<WqInner>,
    ) -> Result<(), Arc<WorkInner>> {
        let unbound = wq.unbound;
        if wq.latency {
            work.queued_at
                .store(crate::hist::now_ns(), Ordering::Relaxed);
        }
        let cpu = if self.attrs.pod_cpus.len() > 1 {
            sched::current_cpu()
        } else {
            0
        };
        let mut g = self.lock();
        // A stale name (the slot freed, maybe reused by another queue) is
        // refused like a dead pwq; `pwq_of` makes a wrap of the era
        // harmless too: the item only ever goes to a live pwq of its queue.
        let Some(i) = g.live(id) else {
            return Err(work);
        };
        if g.pwqs[i].dead || !g.pwq_of(id.slot, wq) {
            return Err(work);
        }
        let slot = id.slot;
        let lane = g.queue_lane(cpu);
        work.pool.store(self.id + 1, Ordering::Relaxed);
        let p = &mut g.pwqs[slot as usize];
        let color = p.work_color;
        p.in_flight[color as usize] += 1;
        p.nr_in_flight += 1;
        p.stats.queued += 1;
        let node = p.node;
        let item = Item {
            work,
            pwq: slot,
            color,
            lane: lane as u16,
        };
        let mut recheck = None;
        let active = if p.plugged {
            false
        } else if unbound {
            let PwqState { wq, credits, .. } = p;
            let wq = wq.as_ref().expect("live pwq");
            if *credits > 0 && !wq.frozen.load(Ordering::Relaxed) && !wq.node_has_waiters(node) {
                *credits -= 1;
                true
            } else {
                match wq.node_try_get(node, self.id, slot) {
                    NodeGet::Active(got) => {
                        *credits += got - 1;
                        true
                    }
                    NodeGet::Waiting => false,
                    NodeGet::WaitingRecheck => {
                        recheck = Some((wq.clone(), node));
                        false
                    }
                }
            }
        } else {
            g.pwq_can_activate(slot)
        };
        if active {
            g.pwqs[slot as usize].nr_active += 1;
            g.push_active(item);
        } else {
            g.pwqs[slot as usize].inactive.push_back(item);
        }
        let wake = g.kick(lane);
        unlock_wake(self, g, wake);
        if let Some((wq, node)) = recheck {
            wq.node_activate(node);
        }
        Ok(())
    }

    /// Ends an item's accounting on its pwq (`pwq_dec_nr_in_flight`).
    fn dec_in_flight(
        &self,
        g: &mut PoolInner,
        slot: u32,
        color: u8,
        active: bool,
        post: &mut Post,
    ) {
        let p = &mut g.pwqs[slot as usize];
        p.in_flight[color as usize] -= 1;
        p.nr_in_flight -= 1;
        if p.nr_in_flight == 0 && p.inactive.capacity() > SHRINK_ABOVE {
            // The pwq went idle after a peak held back by `max_active`:
            // the list's memory goes back (once per peak, not per item).
            p.inactive = VecDeque::with_capacity(PWQ_LIST_CAP);
        }
        let wq = p.wq.as_ref().expect("live pwq");
        if (p.in_flight[color as usize] == 0 || p.nr_in_flight == 0) && wq.has_flushers() {
            post.notify = Some(wq.clone());
        }
        let dies = p.retired && p.nr_in_flight == 0 && !p.dead;
        if active {
            self.dec_active(g, slot, post);
        }
        if dies {
            for t in self.kill_pwq(g, slot, post) {
                t.unpark();
            }
        }
    }

    /// An active item of a pwq left: its `max_active` unit goes back.
    fn dec_active(&self, g: &mut PoolInner, slot: u32, post: &mut Post) {
        let p = &mut g.pwqs[slot as usize];
        let wq = p.wq.as_ref().expect("live pwq");
        p.nr_active -= 1;
        if wq.unbound {
            let node = p.node;
            p.credits += 1;
            let idle = p.nr_active == 0 && p.inactive.is_empty();
            let give = if idle || wq.node_has_waiters(node) {
                std::mem::take(&mut p.credits)
            } else if p.credits > 2 * wq.node_batch(node) {
                let keep = wq.node_batch(node);
                std::mem::replace(&mut p.credits, keep) - keep
            } else {
                0
            };
            if give > 0 && wq.node_put(node, give) {
                post.activate = Some((wq.clone(), node));
            }
        } else {
            self.activate_pwq(g, slot);
        }
    }

    /// Removes a pending item from this pool's lists (`try_to_grab_pending`'s
    /// steal), the item at address `a` ([`addr`](super::work::addr): a live
    /// item's, so no other item can have it while the caller holds one).
    fn steal(&'static self, a: usize) -> bool {
        use super::work::addr;
        let mut g = self.lock();
        let mut found: Option<(Item, bool)> = None;
        for l in g.lanes.iter_mut() {
            if let Some(i) = l.worklist.iter().position(|it| addr(&it.work) == a) {
                found = l.worklist.remove(i).map(|it| (it, true));
                break;
            }
        }
        if found.is_none() {
            for w in g.workers.iter_mut() {
                if let Some(i) = w.scheduled.iter().position(|it| addr(&it.work) == a) {
                    found = w.scheduled.remove(i).map(|it| (it, true));
                    break;
                }
            }
        }
        if found.is_none() {
            for p in g.pwqs.iter_mut() {
                if let Some(i) = p.inactive.iter().position(|it| addr(&it.work) == a) {
                    found = p.inactive.remove(i).map(|it| (it, false));
                    break;
                }
            }
        }
        let Some((item, active)) = found else {
            return false;
        };
        item.work.clear_pending();
        let mut post = Post::default();
        self.dec_in_flight(&mut g, item.pwq, item.color, active, &mut post);
        post.wake = g.kick(usize::from(item.lane));
        self.update_lendable(&g);
        drop(g);
        item.work.finish_cycle();
        post.run(self);
        true
    }
}

/// Steals `work` off the pool that holds it, if any.
pub(crate) fn steal_queued(work: &Arc<WorkInner>) -> bool {
    steal_at(
        work.pool.load(Ordering::Relaxed),
        super::work::addr(&**work),
    )
}

/// Steals the item at address `a` off pool `id_plus_1 - 1` (its `pool`
/// field), if it is still on one of that pool's lists: whoever holds the
/// item by another view (a spawned job's handle) can take it back.
pub(crate) fn steal_at(id_plus_1: u32, a: usize) -> bool {
    if id_plus_1 == 0 {
        return false;
    }
    get_pool(id_plus_1 - 1).is_some_and(|p| p.steal(a))
}

/// The pool and pwq where `work` is executing now, if it runs on `wq`'s pools.
pub(crate) fn find_running(
    work: &Arc<WorkInner>,
    wq: &Arc<WqInner>,
) -> Option<(&'static Pool, PwqId)> {
    let id = work.pool.load(Ordering::Relaxed);
    let pool = get_pool(id.checked_sub(1)?)?;
    let g = pool.lock();
    let w = g.find_executing(work)?;
    let slot = g.workers[w].current_pwq;
    let same = g.pwq_of(slot, wq);
    let era = g.pwqs[slot as usize].era;
    same.then_some((pool, PwqId { slot, era }))
}
