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
//! see `OldPwqs` in `workqueue/table.rs`) and reused under a new era, so a
//! pool holds as many slots as pwqs were ever attached to it *at once*, not
//! as many as were ever attached ([`PwqId`]).
//!
//! # Rooms
//!
//! This file holds the types (`Pool`, `PoolInner`, `PwqState`, `Item`,
//! `Post`) and the policy predicates. The rest, one job a file:
//! [`registry`] (every pool by id, making and linking pools), [`queue`]
//! (`insert`, `steal`, `find_running`), [`kick`] (waking a worker: the two
//! pod shapes, [`Locality`](kick::Locality)), [`pwq`] (a pwq's life and `dec_in_flight`),
//! [`worker`] (a worker's loop and `process_one_work`), [`manage`] (starting
//! workers), [`lane`] (the argument for lanes and spreading), [`tick`] and
//! [`sleep`] (the watchdog's tick and look), [`lockup`], [`budget`] (the CPU
//! quota), [`hotplug`] (the usable CPUs) and [`snap`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

mod budget;
mod hotplug;
mod kick;
mod lane;
mod lockup;
mod manage;
mod pwq;
mod query;
mod queue;
mod registry;
mod ring;
mod sleep;
mod snap;
mod tick;
mod worker;

pub(crate) use budget::tick as budget_tick;
pub use budget::{CpuBudget, cpu_budget, set_cpu_quota_mode};
pub use hotplug::cpu_changes;
pub(crate) use hotplug::{check as hotplug_check, usable as usable_cpus, watchdog_started};
pub(crate) use kick::Wake;
use kick::{Locality, lanes_from, unlock_wake, unlock_wake_hot};
pub use lane::{DFL_SPREAD_THRESH, set_spread_thresh, spread_thresh};
use lane::{Lane, LazyNow};
pub use lockup::{set_cm_exempt, set_watchdog_thresh, watchdog_thresh};
pub use query::{current_is_rescuer, show_all_workqueues};
pub(crate) use query::{mark_rescuer, show_busy};
pub(crate) use queue::{find_running, steal_at, steal_queued};
pub use registry::set_idle_timeout;
use registry::{
    CURRENT, DEBUG_KILL_WORKER, FAIL_CREATE, IDLE_TIMEOUT_MS, NEXT_POOL, POOLS, WORKER,
};
pub(crate) use registry::{
    MAX_POOLS, bound_pool, current_work_addr, current_wq_addr, get_pool, link_pod, unbound_pool,
};
#[cfg(feature = "failure-injection")]
pub use registry::{debug_fail_worker_creation, debug_kill_next_worker};
pub(crate) use sleep::{LOOK, look_all};
pub use sleep::{partner_kicks, sleeper_takeovers};
pub(crate) use snap::pool_snaps;
#[cfg(feature = "failure-injection")]
pub use tick::debug_pause_tick_spread;
pub(crate) use tick::tick_all;
pub use tick::{BlockingGuard, blocking};

use super::watchdog;
use super::work::WorkInner;
use super::workqueue::WqInner;
use crate::priority::PoolPrio;
use crate::switches::SwitchProbe;
use crate::sync::{Mutex, MutexGuard};
use crate::types::{PwqStats, WakeMode};

/// Number of flush colours per pool workqueue (as the kernel's 4 colour bits).
pub(crate) const NR_COLORS: usize = 16;

/// A list of items (a lane's worklist, a pwq's inactive list, a worker's
/// `scheduled`) whose capacity grew past this many items during a peak is
/// given back once it is empty and its pool or pwq is idle: a worker going
/// idle looks at its lane and its own `scheduled` list, a pwq whose last
/// item ends at its inactive list, and in a pool of several lanes (whose
/// other lanes' lists no worker of theirs may look at) a worker idle for a
/// whole idle timeout at every list of its pool
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
    /// The pwq slot, the colour and the lane, in one word: built in a
    /// register and stored once. An item moved through the stack (a pop, an
    /// activation) is copied with wide loads, and a wide load of what three
    /// narrow stores just wrote cannot be forwarded from them: the CPU waits
    /// for the stores to reach its cache (`perf annotate` found half of the
    /// worklist push's samples there before the push was inlined, see `ring`).
    tag: u64,
}

impl Item {
    /// An item of pwq `pwq`, flush colour `color`, queued on lane `lane`.
    #[inline]
    pub fn new(work: Arc<WorkInner>, pwq: u32, color: u8, lane: u16) -> Item {
        let tag = u64::from(pwq) | u64::from(color) << 32 | u64::from(lane) << 40;
        Item { work, tag }
    }

    /// Its pool workqueue's slot.
    #[inline]
    pub fn pwq(&self) -> u32 {
        self.tag as u32
    }

    /// Its flush colour.
    #[inline]
    pub fn color(&self) -> u8 {
        (self.tag >> 32) as u8
    }

    /// The lane (CPU of the pod) it was queued on.
    #[inline]
    pub fn lane(&self) -> usize {
        usize::from((self.tag >> 40) as u16)
    }
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
    /// A worker of another per-CPU pool of the pod, attached while it takes items
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
    /// L: woken to help this per-CPU pool of the pod (a spread, see [`lane`]).
    guest_for: Option<&'static Pool>,
    /// L: woken to move to this per-CPU pool of the pod, into its worker
    /// slot, instead of a thread started there (see [`manage`]'s adoption).
    adopted_by: Option<worker::Adoption>,
    /// L: the thread's context-switch records (see [`crate::switches`]):
    /// `None` for a borrowed slot, or where the kernel refused a probe (the
    /// `/proc` sampler looks at it instead).
    probe: Option<SwitchProbe>,
    /// L: `seq` at the watchdog's previous look (the `/proc` fallback reads
    /// a worker only once it has stayed on one item since then).
    look_seq: u64,
    /// L: the thread's "inside an item's callback" flag
    /// ([`crate::switches::item_flag`]), which the `/proc` sampler reads
    /// around its read of the thread's state (`None` while no thread holds
    /// the slot).
    item_flag: Option<Arc<AtomicBool>>,
    /// L: `seq + 1` when the `/proc` sampler last found this worker asleep
    /// outside its item's callback (0: not so): such a sleep counts only
    /// when the next read finds it still asleep on the same item, as a
    /// probe's counts only past [`crate::switches::MIN_ASLEEP`].
    proc_asleep_out: u64,
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
    /// L: away as a guest of a partner pool (see [`lane`]), counted in its
    /// lane's `nr_lent` unless blocked: its CPU's share, as a counted worker
    /// is in `nr_running`, and given back the same way when it sleeps.
    lent: bool,
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
            adopted_by: None,
            probe: None,
            look_seq: 0,
            item_flag: None,
            proc_asleep_out: 0,
            label: super::work::Label::of::<()>(),
            cm_exempt: false,
            budgeted: false,
            budget_lent: false,
            lent: false,
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
    /// the per-item path. They count in the node's total, so the limit is never
    /// exceeded; a busy pwq gives back all but a batch or two, and all of them
    /// once another pwq waits; an idle one keeps at most a batch, where the node
    /// allows it, and a waiter's activation pass takes those back
    /// (`engine/node.rs`, "Units an idle pwq keeps").
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
    /// L: the busy table's entries: slots whose `current` is an item's
    /// address (not 0, not `DROPPING`). With none but the asker's own (a
    /// worker looks between its items, its `current` 0), the non-reentrancy
    /// look of every item start reads no slot.
    nr_executing: usize,
    /// L: items on the workers' `scheduled` lists, all together (handed to
    /// the worker that runs their other instance). With none, a worker's
    /// look at its own list between two items reads no slot.
    nr_scheduled: usize,
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
    /// L: a per-CPU pool's partners: the other per-CPU pools of its pod.
    partners: Vec<&'static Pool>,
    /// L: the pool's shape, from its lanes and partners (see
    /// [`locality`](Self::locality)); set with them.
    locality: Locality,
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
    /// L: some worker of the pool was given a context-switch probe (see
    /// [`sleep`]); never cleared. Without one nobody can be seen asleep, and
    /// the per-item look for a sleeping runner is skipped.
    probed: bool,
    /// L: looks to skip before the `/proc` sampler next reads a worker just
    /// because items wait behind it (see [`sleep`]'s `Pool::look`), and how
    /// many it skips after a read that found nobody asleep (doubling up to
    /// [`sleep::BEHIND_BACKOFF_MAX`]; a sleep found starts it over).
    sample_skip: u8,
    /// Where the next look between ticks starts reading workers out for a
    /// sleep (the how-many-th of them, in slot order): each such look reads
    /// a few ([`sleep`]'s `OUT_READS_BETWEEN_TICKS`) and the next goes on
    /// after them, so every sleeper is read in turn.
    out_read_from: usize,
    sample_backoff: u8,
    /// L: the watchdog tick (plus one; 0: never) at which a worker of this
    /// pool was last seen asleep in its item. A pool marked `blocks` kicks
    /// its partners only while this is recent ([`sleep::slept_recently`]).
    slept_tick: u64,
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
    /// O: a per-CPU pool's pod: every per-CPU pool of it, by CPU, itself included
    /// (set once by [`link_pod`]; empty for other pools).
    pod_pools: OnceLock<Vec<&'static Pool>>,
    /// A: what a per-CPU pool of a pod tells its partners, read by them
    /// without its lock (see [`Hints`]): it can lend a worker, it has a
    /// spare one, items wait behind its counted worker. Written under `L:`,
    /// only when a bit changes.
    hints: Hints,
    /// A: for the first pool of a pod, the pod's: the watchdog tick (plus
    /// one; 0: never) at which any of its pools last saw a worker asleep
    /// (see [`sleep::slept_recently`]). Each pool publishes its own
    /// `slept_tick` here when it unlocks or looks; its partners' kicks
    /// ([`sleep`]'s `peek_partners`) run only while it is recent.
    /// `Relaxed`, on a line of its own: a hint (a stale value costs a kick
    /// more or a sleeper found by the watchdog's look instead).
    pod_slept: PodSlept,
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
    /// Workers this pool took from a partner pool of its pod instead of
    /// starting a thread (see `manage`'s adoption).
    pub adopted: AtomicU64,
}

/// A per-CPU pool's hints to the other per-CPU pools of its pod, one bit
/// each, in one word on a cache line of its own: the other CPUs of the pod
/// read it on their queue path while this CPU writes it.
///
/// - [`Hints::LENDABLE`]: its lane has no counted worker and an idle one to
///   lend (see [`lane`]); a borrower takes the lender's lock and checks
///   again before it takes a worker.
/// - [`Hints::SPARE`]: it has an idle worker beyond its reserve, busy lane
///   or not: a partner that needs a worker adopts it rather than start a
///   thread (see [`manage`]).
/// - [`Hints::BEHIND`]: its workers have probes and items wait behind a
///   counted worker, who may have fallen asleep in its item: a partner's
///   queue or item start then looks at that worker too ([`sleep`]'s
///   `peek_partners`).
///
/// `Relaxed`: hints, each checked again under this pool's lock. One word,
/// where each hint had a line of its own (stop 49): the pool publishes
/// them together at every unlock that may change them, and `lendable`
/// changes twice per item with one item in flight (the worker idles, the
/// next queue wakes it), so the line travels anyway; three lines cost
/// three loads per publish where one does.
#[repr(align(128))]
#[derive(Default)]
struct Hints(AtomicU8);

impl Hints {
    const LENDABLE: u8 = 1;
    const SPARE: u8 = 2;
    const BEHIND: u8 = 4;

    /// Whether hint `bit` is set.
    #[inline]
    fn has(&self, bit: u8) -> bool {
        self.0.load(Ordering::Relaxed) & bit != 0
    }

    /// Publishes `bits`, writing the line only if a hint changed.
    #[inline(always)]
    fn publish(&self, bits: u8) {
        if self.0.load(Ordering::Relaxed) != bits {
            self.0.store(bits, Ordering::Relaxed);
        }
    }
}

/// A tick on a cache line of its own (see [`Pool::pod_slept`]).
#[derive(Default)]
#[repr(align(128))]
struct PodSlept(AtomicU64);

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
        /// What a list of `len` items in room for `cap` shrinks to (never
        /// below `floor`), if its room is far above what it holds.
        fn shrunk(len: usize, cap: usize, floor: usize) -> Option<usize> {
            (cap > SHRINK_ABOVE.max(4 * len)).then(|| floor.max(2 * len))
        }
        for l in &mut self.lanes {
            let v = &mut l.worklist;
            if let Some(n) = shrunk(v.len(), v.capacity(), lane::LANE_LIST_CAP) {
                v.shrink_to(n);
            }
        }
        for p in self.pwqs.iter_mut().filter(|p| p.wq.is_some()) {
            let v = &mut p.inactive;
            if let Some(n) = shrunk(v.len(), v.capacity(), PWQ_LIST_CAP) {
                v.shrink_to(n);
            }
        }
        for w in &mut self.workers {
            let v = &mut w.scheduled;
            if let Some(n) = shrunk(v.len(), v.capacity(), 0) {
                v.shrink_to(n);
            }
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
    /// (another lane of this pool, or a partner pool that can lend). The
    /// second answer is the partners' (`partner_can_lend`) when it was read
    /// for the first: the chain kick right after, under the same lock
    /// hold, takes it rather than reading every partner's flag again.
    ///
    /// A bound pool or a one-CPU pod (one lane, no partners) never times:
    /// answered first, with no look at the lanes or partners (every item
    /// of such a pool asks).
    #[inline]
    fn should_time(&self, h: usize, cap: usize) -> (bool, Option<bool>) {
        let locality = self.locality();
        if matches!(locality, Locality::Single) || !self.lanes[h].has_work() {
            return (false, None);
        }
        // A per-CPU pool of a pod has one lane: only its partners can help.
        if matches!(locality, Locality::Lanes)
            && self
                .lanes
                .iter()
                .enumerate()
                .any(|(d, l)| d != h && l.free(cap))
        {
            return (true, None);
        }
        let lend = self.partner_can_lend();
        (lend, Some(lend))
    }

    /// The next item for a running worker of lane `h`: its own lane's, else
    /// one stolen from a lane that nobody serves or that lags. The own lane's
    /// case (every item of a backlog) is inlined into the worker loop, so the
    /// item comes back in registers rather than through a copy on the stack.
    #[inline]
    fn next_item(&mut self, h: usize) -> Option<Item> {
        let cap = self.cap;
        if self.lanes[h].keep_working(cap) {
            let it = self.lanes[h].pop();
            self.lanes[h].stats.local += 1;
            return it;
        }
        self.steal_item(h, cap)
    }

    /// [`next_item`](Self::next_item) past its own lane: an item of another
    /// lane that nobody serves or that lags (`None` in a one-lane pool).
    #[inline(never)]
    fn steal_item(&mut self, h: usize, cap: usize) -> Option<Item> {
        let n = self.lanes.len();
        if n == 1 {
            // A bound pool or a per-CPU pool: no other lane to steal from
            // (every item's last look, so no search is set up for it).
            return None;
        }
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
            if self.workers[me].lent {
                self.lanes[h].nr_lent -= 1;
            } else {
                self.lanes[h].nr_running -= 1;
            }
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
            if self.workers[me].lent {
                self.lanes[h].nr_lent += 1;
            } else {
                self.lanes[h].nr_running += 1;
                self.lanes[h].runner = me;
            }
            self.budget_unlend(me);
        }
    }

    /// Work waits, nobody can take it, and no worker is idle to wake.
    fn starving(&self, cap: usize) -> bool {
        self.need_more_worker(cap) && !self.may_start_working()
    }

    /// The worker that executes `work` now, if any (the busy table).
    ///
    /// Every item start of a `Work` asks (its running instance, if any, runs
    /// it: non-reentrancy), between two items of its own: with no other
    /// worker of the pool in an item, the answer is known without the scan.
    #[inline]
    fn find_executing(&self, work: &Arc<WorkInner>) -> Option<usize> {
        debug_assert_eq!(
            self.nr_executing,
            self.workers
                .iter()
                .filter(|w| w.current > worker::DROPPING)
                .count(),
            "nr_executing counts the busy table's entries"
        );
        if self.nr_executing == 0 {
            return None;
        }
        let a = crate::engine::work::addr(work);
        self.workers.iter().position(|w| w.current == a)
    }

    /// Hands `item` to worker `other`, which runs its other instance now:
    /// it runs it next (non-reentrancy inside the pool).
    fn hand_to(&mut self, other: usize, item: Item) {
        self.workers[other].scheduled.push_back(item);
        self.nr_scheduled += 1;
    }

    /// The next item handed to worker `me`, if any (see [`hand_to`](Self::hand_to)).
    #[inline]
    fn take_scheduled(&mut self, me: usize) -> Option<Item> {
        debug_assert_eq!(
            self.nr_scheduled,
            self.workers
                .iter()
                .map(|w| w.scheduled.len())
                .sum::<usize>(),
            "nr_scheduled counts the workers' scheduled items"
        );
        if self.nr_scheduled == 0 {
            return None;
        }
        let it = self.workers[me].scheduled.pop_front()?;
        self.nr_scheduled -= 1;
        Some(it)
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
                .position(|it| it.pwq() == slot && self.find_executing(&it.work).is_none())
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
        self.lanes[it.lane()].worklist.push_back(it);
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

    /// A per-CPU pool's pod, named by the id of its first per-CPU pool.
    pub(crate) fn pod_id(&self) -> Option<u32> {
        self.pod_pools.get().and_then(|v| v.first()).map(|p| p.id)
    }
}
