//! Workqueues: the object a user queues to, mapped onto shared worker pools.
//!
//! As in the kernel, a workqueue owns no threads. It owns one *pool workqueue*
//! (pwq) per pool it uses: per CPU for bound queues (the CPU's pool of the right
//! priority), per pod for unbound queues (the pod's pool of the workqueue's
//! attributes, shared with every other workqueue of the same attributes), and a
//! default pwq covering the whole cpumask. A pwq carries the workqueue's
//! per-pool state: `max_active` accounting, the inactive list, and the flush
//! colour counters.
//!
//! `queue` claims the item's PENDING bit, then picks a pwq: the pool where the
//! item runs right now if it does (non-reentrancy), else the pwq of the calling
//! CPU. `max_active` is per CPU for bound queues; for unbound queues it is a
//! system-wide budget cut per NUMA node with the kernel's `min_active` floor of 8.
//!
//! `flush` uses flush colours: each pwq stamps new items with its current colour;
//! a flusher moves every pwq to the next colour and waits until no item of an
//! older colour is left, so it never waits for work queued after it was called.
//! Sixteen colours live at once; a seventeenth flusher waits for the oldest to
//! drain (the kernel queues it on an overflow list).

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use super::node::{NodeActive, NodeGet};
use super::pool::{self, NR_COLORS, PWQ_BITS, Pool, PoolAttrs, PwqId};
use super::spawn::{self, JoinHandle};
use super::threads;
use super::timer;
use super::work::{Work, WorkInner};
use crate::error::Error;
use crate::priority::{self, PoolPrio, Priority};
use crate::sched;
use crate::sync::{Condvar, Mutex, RwLock};
use crate::topology::{Scope, Topology};
use crate::trace;
use crate::types::{
    DFL_ACTIVE, MAX_ACTIVE, MIN_ACTIVE, PoolCounts, PwqStats, UnboundConcurrency, WakeMode,
    WorkqueueStats, WqAttrs, WqFlags,
};

/// Counters of one workqueue (what `wq_monitor.py` shows).
#[derive(Default)]
pub(crate) struct WqStats {
    /// A: queue attempts refused while draining. `Relaxed`: a counter.
    pub rejected: AtomicU64,
}

/// A pwq: its pool and its name there (see [`PwqId`]: a stale one reads
/// as dead).
#[derive(Clone, Copy)]
pub(crate) struct PwqRef {
    pub pool: &'static Pool,
    pub id: PwqId,
}

impl PartialEq for PwqRef {
    fn eq(&self, o: &PwqRef) -> bool {
        std::ptr::eq(self.pool, o.pool) && self.id == o.id
    }
}

/// One generation of a workqueue's pwqs; replaced whole by an attrs change.
/// Shared behind an `Arc` once built and never changed: every field is `I:`.
struct Pwqs {
    /// I: per topology CPU id.
    cpu: Vec<Option<PwqRef>>,
    /// I: the default pwq (unbound queues).
    dfl: Option<PwqRef>,
    /// I: every pwq of the generation.
    all: Vec<PwqRef>,
    /// I: topology CPU ids that route work (the online CPUs of the cpumask or machine).
    route_cpus: Vec<usize>,
    /// I: the CPUs of the cpumask that were usable when the generation was
    /// built (topology ids; empty: none was, every CPU went to the default
    /// pwq). A change of the usable CPUs that leaves this as it is leaves
    /// the generation in place.
    live: Vec<usize>,
    /// I: per real CPU: this workqueue's pwq in the lane pool of that CPU and
    /// its NUMA node, when the CPU is a lane of one pod, or of pods sharing
    /// the lane pools and the node (`Some(None)`: of several otherwise).
    lane: Vec<Option<Option<(PwqRef, usize)>>>,
}

impl Pwqs {
    fn empty() -> Pwqs {
        Pwqs {
            cpu: Vec::new(),
            dfl: None,
            all: Vec::new(),
            route_cpus: Vec::new(),
            live: Vec::new(),
            lane: Vec::new(),
        }
    }
}

/// The current generation's routing, readable without a lock or an atomic
/// read-modify-write: each CPU's pwq (and the default pwq) encoded in one
/// atomic word as `(pool id + 1) << 48 | slot << 24 | era`, 0 for
/// none (pool ids stay below 2^16, slots and eras below 2^24).
///
/// An attrs change stores the new words one by one, so a queuer may see the
/// old pwq of one CPU and the new pwq of another; either is correct. A
/// retired pwq is freed once its last item ends and its slot reused, so a
/// word read before a change may name a pwq that is gone: its era no
/// longer matches, `Pool::insert` refuses it as it refuses a dead pwq, and
/// the queuer reads again (and `insert` also checks that the pwq is this
/// workqueue's, so even a wrapped era puts the item only on a live
/// pwq of its own queue, never another's).
///
/// Every word is `A:` with `Release` stores (`publish`, under `WQ flush` for
/// an attrs change) and `Acquire` loads: a queuer that reads a word sees the
/// pool and pwq slot it names fully set up (`Pool::attach` wrote the slot
/// under the pool lock before `publish`).
struct PwqMap {
    /// A: per topology CPU: its pwq.
    cpu: Vec<AtomicU64>,
    /// A: per real CPU: the lane pwq of a pod pool (see `Pwqs::lane`), 0: none.
    lane: Vec<AtomicU64>,
    /// A: the default pwq.
    dfl: AtomicU64,
    /// A: topology CPUs that route work, for a queuer on a CPU outside the mask.
    route: Vec<AtomicUsize>,
    /// A: how many of `route` are valid (shrunk before they change, grown after).
    route_len: AtomicUsize,
}

impl PwqMap {
    fn new(n: usize) -> PwqMap {
        PwqMap {
            cpu: (0..n).map(|_| AtomicU64::new(0)).collect(),
            lane: (0..n).map(|_| AtomicU64::new(0)).collect(),
            dfl: AtomicU64::new(0),
            route: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            route_len: AtomicUsize::new(0),
        }
    }

    fn encode(r: Option<PwqRef>) -> u64 {
        const { assert!(pool::MAX_POOLS < 1 << 16 && PWQ_BITS == 24) };
        r.map_or(0, |r| {
            ((r.pool.id as u64 + 1) << 48) | ((r.id.slot as u64) << 24) | r.id.era as u64
        })
    }

    fn decode(v: u64) -> Option<PwqRef> {
        let id = (v >> 48) as u32;
        let pool = pool::get_pool(id.checked_sub(1)?)?;
        let mask = (1u64 << PWQ_BITS) - 1;
        Some(PwqRef {
            pool,
            id: PwqId {
                slot: ((v >> PWQ_BITS) & mask) as u32,
                era: (v & mask) as u32,
            },
        })
    }

    /// Makes `tab` the generation queuers see.
    fn publish(&self, tab: &Pwqs) {
        for (i, a) in self.cpu.iter().enumerate() {
            a.store(
                Self::encode(tab.cpu.get(i).copied().flatten()),
                Ordering::Release,
            );
        }
        for (i, a) in self.lane.iter().enumerate() {
            let r = tab.lane.get(i).copied().flatten().flatten();
            a.store(Self::encode(r.map(|(r, _)| r)), Ordering::Release);
        }
        // A bound queue has no default pwq: a CPU without one uses the first CPU's.
        let dfl = tab.dfl.or_else(|| tab.all.first().copied());
        self.dfl.store(Self::encode(dfl), Ordering::Release);
        let n = tab.route_cpus.len().min(self.route.len());
        self.route_len.store(
            n.min(self.route_len.load(Ordering::Acquire)),
            Ordering::Release,
        );
        for (a, &c) in self.route.iter().zip(&tab.route_cpus) {
            a.store(c, Ordering::Release);
        }
        self.route_len.store(n, Ordering::Release);
    }

    /// Whether `cpu` has a pwq of its own now.
    fn has(&self, cpu: usize) -> bool {
        self.cpu
            .get(cpu)
            .is_some_and(|a| a.load(Ordering::Acquire) != 0)
    }
}

/// What a workqueue was built with that the attrs do not say (kept to rebuild pools).
struct WqCtx {
    /// I: the topology its pods are cut from.
    topo: Arc<Topology>,
    /// I: a topology other than the machine's, folded onto the real CPUs.
    custom: bool,
    /// I: when queuers wake workers.
    wake: WakeMode,
    /// I: how unbound pools limit running workers.
    concurrency: UnboundConcurrency,
    /// I: run at the best allowed priority when the one asked for is not.
    fallback: bool,
}

/// A `MEM_RECLAIM` workqueue's rescuer: a thread that exists before it is needed.
struct Rescuer {
    /// WQ mayday: pwqs that asked for help, as (pool id, slot), oldest first.
    mayday: Mutex<VecDeque<(u32, u32)>>,
    /// O: the rescuer thread, to unpark it.
    thread: OnceLock<Thread>,
    /// WQ join: its join handle, taken by destroy.
    join: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// A: set by destroy, which then unparks the rescuer. `Relaxed`: an
    /// unpark synchronizes with the park it ends, so the rescuer sees it.
    stop: AtomicBool,
    /// A: the rescuer's thread id, 0 until it runs. `Relaxed`: a value read
    /// on its own.
    tid: std::sync::atomic::AtomicI32,
}

/// What an attrs change leaves behind: the older generations' pwqs that
/// still hold items, and the counters of those that died and were freed.
/// One lock, since a pwq leaves the list and its counters join `dead_stats`
/// in one step, and a reader must count each pwq exactly once.
///
/// # Nothing reaches a freed pwq
///
/// A retired pwq dies when its last item ends (or at once if it has none);
/// its pool then asks the workqueue to free it ([`WqInner::reap`]), which,
/// under this lock, takes it off `retired`, adds its counters to
/// `dead_stats` and detaches it from its pool, which frees the slot for
/// reuse under a new era. What may still name it afterwards:
///
/// - items: none. Every item on a pool's lists or running counts in its
///   pwq's `nr_in_flight`, and a pwq dies only at zero; a dead pwq takes no
///   new item (`Pool::insert` refuses it).
/// - a queuer that read the routing words before the change, the ordered
///   chain, a flusher's or drainer's list, a snapshot: each holds a
///   [`PwqRef`] with the slot's era, and every pool call checks it
///   under the pool lock: a freed pwq reads as dead and empty (a flusher
///   has nothing to wait for, the chain drops it, a queuer reads again).
/// - a node's list of waiting pwqs and the rescuer's mayday list name a
///   slot only: the pool uses whatever holds that slot only if it is a live
///   pwq of the same workqueue (and, for the node, of the same node and not
///   plugged), so at worst a unit of the queue's own budget or its rescuer
///   serves another of its own pwqs, which is what either is for.
/// - the watchdog's tick and a worker's finished item's destructor (the
///   busy table still lists the item) may add to the counters of the slot:
///   at worst a few counts land on the slot's next pwq.
///
/// So a workqueue keeps only the retired pwqs that still hold items;
/// `destroy` frees the rest.
#[derive(Default)]
struct OldPwqs {
    /// WQ old: pwqs of older generations that have not died yet (they hold
    /// items), so flush and stats still see them.
    retired: Vec<PwqRef>,
    /// WQ old: the counters of the retired pwqs that died and were freed.
    dead_stats: PwqStats,
    /// WQ old: their latency histograms (none if the queue keeps none).
    dead_lat: crate::hist::PwqLatency,
}

/// The shared state of a workqueue. Locking: see the engine's module docs
/// (`WQ <field>:` names the lock of that field).
pub(crate) struct WqInner {
    /// I: the name (names may repeat).
    pub name: String,
    /// I: gets the payload of this queue's items' panics, instead of the
    /// process-wide hook.
    panic_handler: Option<PanicHandler>,
    /// I: the flags as built.
    pub flags: WqFlags,
    /// I: `WQ_UNBOUND`.
    pub unbound: bool,
    /// I: an ordered queue.
    pub ordered: bool,
    /// I: `WQ_CPU_INTENSIVE`.
    pub cpu_intensive: bool,
    /// I: keeps latency histograms ([`WorkqueueBuilder::latency_histograms`]).
    pub latency: bool,
    /// A: frozen (`FREEZABLE` queues). `Relaxed`: ordered by the pool locks;
    /// `freeze` stores it before it polls every pwq under its pool lock, and
    /// an item is activated only under its pool lock, so an activation that
    /// missed the store is one the poll sees and waits for.
    pub frozen: AtomicBool,
    /// A: drains in progress; queueing from outside the queue is refused while
    /// nonzero. `Relaxed`: a queue that races with the start of a drain may
    /// go either way, and drain loops until nothing is in flight.
    draining: AtomicU32,
    /// A: destroy has begun. `SeqCst`: read with `handles` in `borrow_of`
    /// (the pair with `borrows`, see there).
    destroyed: AtomicBool,
    /// A: counters kept outside the pools (`Relaxed`).
    pub stats: WqStats,
    /// A: `max_active`, written under `WQ attrs`. `Relaxed`: a setting; the
    /// writer runs the activation pass itself.
    max_active: AtomicUsize,
    /// A: `min_active` set by [`Workqueue::set_min_active`] (0: the default,
    /// `min(max_active, MIN_ACTIVE)`), written under `WQ attrs`. `Relaxed`.
    min_active: AtomicUsize,
    /// I (the vector); each node's fields carry their own tags.
    nodes: Vec<NodeActive>,
    /// WQ node_cpus, written only under `WQ attrs` (or before the queue is
    /// shared): CPUs of the mask per node, to cut `max_active` into budgets.
    node_cpus: Mutex<Vec<usize>>,
    /// WQ cur: the current generation of pwqs (for flush, stats and attrs
    /// changes); swapped only under `WQ old`.
    cur: Mutex<Arc<Pwqs>>,
    /// A: the same generation as lock-free routing words (for `queue`).
    map: PwqMap,
    /// WQ old: the retired pwqs not freed yet, and the freed ones' counters.
    old: Mutex<OldPwqs>,
    /// WQ chain: ordered queues' generations oldest first; only the head runs.
    chain: Mutex<VecDeque<PwqRef>>,
    /// I: what the attrs do not say.
    ctx: WqCtx,
    /// WQ attrs: the attributes; held across a whole attrs change.
    attrs: Mutex<WqAttrs>,
    /// WQ prio, written only under `WQ attrs`: the priority in force, and why
    /// it differs from the one asked for.
    prio: Mutex<(PoolPrio, Option<String>)>,
    /// I: the rescuer of a `MEM_RECLAIM` queue.
    rescuer: Option<Rescuer>,
    /// WQ flush: the flush colour counter; flushers wait on `flush_cv`.
    flush_lock: Mutex<u64>,
    /// Waited on under `WQ flush`.
    flush_cv: Condvar,
    /// A: flushers in progress. `Relaxed`: ordered by the pool locks; a
    /// flusher counts itself before it reads any pwq under its pool lock,
    /// and a completer reads it under the pool lock after its decrement, so
    /// a completer that the flusher waits for sees it.
    flushers: AtomicU32,
    /// A: round robin over the mask's CPUs (`Relaxed`: any value will do).
    rr: AtomicUsize,
    /// A: handles. `SeqCst`: pairs with `borrows` (see `borrow_of`).
    handles: AtomicUsize,
    /// A: borrowed views held by the control endpoint and snapshots: the
    /// last handle's drop waits for them, so it still destroys (drains)
    /// itself. `SeqCst`: pairs with `handles` (see `borrow_of`).
    borrows: AtomicUsize,
    /// I: unique for the process's lifetime (names may repeat).
    pub id: u64,
}

impl WqInner {
    pub(crate) fn has_flushers(&self) -> bool {
        self.flushers.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn notify_flushers(&self) {
        let _g = self.flush_lock.lock();
        self.flush_cv.notify_all();
    }

    /// Takes one unit of the node's active budget, or queues the pwq as waiting.
    /// Called under the pool lock.
    pub(crate) fn node_try_get(&self, node: usize, pool: u32, slot: u32) -> NodeGet {
        let frozen = self.frozen.load(Ordering::Relaxed);
        self.nodes[node].try_get(frozen, pool, slot)
    }

    /// Registers `n` inactive items of a pwq as waiting for budget (an ordered
    /// queue's pwq being unplugged). Called under that pwq's pool lock.
    pub(crate) fn node_enqueue_waiting(&self, node: usize, pool: u32, slot: u32, n: usize) {
        self.nodes[node].enqueue_waiting(pool, slot, n);
    }

    /// Puts a starving pwq on the rescuer's list; false if there is no rescuer
    /// or it is listed already (the kernel counts a mayday only then).
    pub(crate) fn send_mayday(&self, pool: u32, slot: u32) -> bool {
        let Some(r) = &self.rescuer else {
            return false;
        };
        let mut q = r.mayday.lock();
        if q.contains(&(pool, slot)) {
            return false;
        }
        q.push_back((pool, slot));
        true
    }

    pub(crate) fn wake_rescuer(&self) {
        if let Some(t) = self.rescuer.as_ref().and_then(|r| r.thread.get()) {
            t.unpark();
        }
    }

    /// Ordered queues across an attrs change: drops dead generations from the
    /// head of the chain and lets the oldest live one run.
    pub(crate) fn ordered_advance(self: &Arc<Self>) {
        let mut reap = Vec::new();
        let mut chain = self.chain.lock();
        while let Some(&head) = chain.front() {
            if chain.len() > 1 {
                let (dead, freed_by) = head.pool.kill_if_drained(head.id);
                if dead {
                    chain.pop_front();
                    reap.extend(freed_by.map(|_| head));
                    continue;
                }
            }
            head.pool.unplug(head.id);
            break;
        }
        drop(chain);
        for r in reap {
            self.reap(r.pool, r.id);
        }
    }

    /// Frees a retired pwq that died (see [`OldPwqs`]): off the list, its
    /// counters kept, its slot given back to its pool. Once: whoever finds
    /// it on `retired` (this, `apply`'s sweep or `destroy`) frees it.
    pub(crate) fn reap(&self, pool: &'static Pool, id: PwqId) {
        let mut old = self.old.lock();
        let r = PwqRef { pool, id };
        let Some(i) = old.retired.iter().position(|x| *x == r) else {
            return;
        };
        old.retired.swap_remove(i);
        let st = pool.pwq_stats(id);
        old.dead_stats.add(&st);
        pool.pwq_latency(id, &mut old.dead_lat);
        pool.detach(id);
    }

    /// Returns `units` of budget; true if some pwq waits for it.
    pub(crate) fn node_put(&self, node: usize, units: usize) -> bool {
        self.nodes[node].put(units)
    }

    /// Whether items wait for budget on `node`.
    pub(crate) fn node_has_waiters(&self, node: usize) -> bool {
        self.nodes[node].has_waiters()
    }

    /// How many units a pwq of `node` may keep cached.
    pub(crate) fn node_batch(&self, node: usize) -> usize {
        self.nodes[node].batch()
    }

    /// Activates waiting items while the node's budget allows (`node_activate_pending_pwq`).
    pub(crate) fn node_activate(self: &Arc<Self>, node: usize) {
        self.nodes[node].activate(
            || self.frozen.load(Ordering::Relaxed),
            |pool, slot| {
                pool::get_pool(pool).is_some_and(|p| p.activate_one_unbound(slot, self, node))
            },
        );
    }

    /// Turns away a claimed item (a draining queue takes no new work from
    /// outside): counted, PENDING released, its job told, its cycle ended.
    fn refuse(&self, work: &WorkInner) {
        self.stats.rejected.fetch_add(1, Ordering::Relaxed);
        work.clear_pending();
        work.func.refused();
        work.finish_cycle();
    }

    /// Draining, and the caller is not one of this queue's own items.
    fn refuses_outsiders(self: &Arc<Self>) -> bool {
        self.draining.load(Ordering::Relaxed) > 0
            && pool::current_wq_addr() != Arc::as_ptr(self) as usize
    }

    fn pwqs(&self) -> Arc<Pwqs> {
        self.cur.lock().clone()
    }

    /// Every pwq: the current generation's and the retired ones not freed
    /// yet, read as one picture: `apply` swaps the generation and moves pwqs
    /// to `retired` under the `old` lock, taken first here too (lock order:
    /// old, then cur), so no pwq is seen twice or missed.
    fn pwq_list(&self) -> Vec<PwqRef> {
        let old = self.old.lock();
        let mut v = self.pwqs().all.clone();
        v.extend(old.retired.iter());
        v
    }

    fn nr_in_flight(&self) -> usize {
        self.pwq_list()
            .iter()
            .map(|r| r.pool.with_pwq(r.id, |p| p.nr_in_flight))
            .sum()
    }

    /// The floor of each node's share of `max_active` (the kernel's
    /// `min_active`): the one set, or `min(max_active, MIN_ACTIVE)`; never
    /// above `max_active`.
    fn min_active(&self, max_active: usize) -> usize {
        match self.min_active.load(Ordering::Relaxed) {
            0 => max_active.min(MIN_ACTIVE),
            m => m.min(max_active),
        }
    }

    fn node_maxes(&self, max_active: usize) -> Vec<usize> {
        let node_cpus = self.node_cpus.lock();
        let total: usize = node_cpus.iter().sum::<usize>().max(1);
        let min = self.min_active(max_active);
        node_cpus
            .iter()
            .map(|&c| (max_active * c).div_ceil(total).clamp(min, max_active))
            .collect()
    }

    /// Queues a work whose PENDING bit the caller owns (`__queue_work`),
    /// with a reference to it that the pool keeps (a one-off job hands over
    /// its own; a `Work` clones one). Returns false if the workqueue is
    /// draining and refused it: the item's job is told
    /// ([`Job::refused`](super::work::Job::refused)).
    pub(crate) fn queue_claimed(
        self: &Arc<Self>,
        mut work: Arc<WorkInner>,
        cpu: Option<usize>,
        from_timer: bool,
    ) -> bool {
        if (!from_timer && self.refuses_outsiders()) || threads::refuse_forked() {
            self.refuse(&work);
            return false;
        }
        loop {
            let m = &self.map;
            let word = if self.ordered {
                m.dfl.load(Ordering::Acquire)
            } else {
                let c = cpu.unwrap_or_else(|| self.local_cpu());
                match m.cpu.get(c).map(|a| a.load(Ordering::Acquire)) {
                    Some(w) if w != 0 => w,
                    _ => m.dfl.load(Ordering::Acquire),
                }
            };
            let Some(mut target) = PwqMap::decode(word) else {
                continue; // only while the first table is being published
            };
            // A pod of lane pools: queue on the lane of the CPU we run on when
            // it is in the target's pod (queue_on, or a folded topology whose
            // CPU ids are not the real ones), so the wakeup stays local.
            if (cpu.is_some() || self.ctx.custom)
                && let Some(pod) = target.pool.pod_id()
                && let Some(a) = m.lane.get(sched::current_cpu())
                && let Some(l) = PwqMap::decode(a.load(Ordering::Acquire))
                && l.pool.pod_id() == Some(pod)
            {
                target = l;
            }
            // Non-reentrancy: if the item runs on another pool now, follow it there.
            // If it last ran on the target pool, the worker that takes it checks the
            // busy table under that pool's lock, so no extra lock is needed here;
            // an item that never ran (a one-off job's) runs nowhere.
            let last = work.pool.load(Ordering::Relaxed);
            if !self.ordered
                && last != 0
                && last != target.pool.id + 1
                && let Some((pool, id)) = pool::find_running(&work, self)
            {
                target = PwqRef { pool, id };
            }
            match target.pool.insert(target.id, work, self) {
                Ok(()) => return true,
                // The pwq died (or was freed) under an attrs change after we
                // read the table: the new table is in place by now.
                Err(back) => work = back,
            }
        }
    }

    /// The topology CPU that routes work queued from here: this CPU if it has
    /// a pwq, else the CPUs of the mask in turn.
    fn local_cpu(&self) -> usize {
        let c = sched::current_cpu();
        if self.map.has(c) {
            return c;
        }
        let n = self.map.route_len.load(Ordering::Acquire);
        if n == 0 {
            return c;
        }
        let i = self.rr.fetch_add(1, Ordering::Relaxed);
        self.map.route[i % n].load(Ordering::Acquire)
    }

    fn flush(&self) {
        if threads::forked() {
            // No thread of this child runs what is in flight.
            return;
        }
        // A flush from a worker blocks it: let its pool start another worker.
        let _blocked = pool::BlockingGuard::new();
        self.flushers.fetch_add(1, Ordering::Relaxed);
        let mut g = self.flush_lock.lock();
        let pwqs = self.pwq_list();
        // Make room: the next colour's slot must hold nothing of 16 colours ago.
        // Other flushers may advance the colour while we wait, so `next` is
        // recomputed after every wait.
        let next = loop {
            let next = ((*g + 1) % NR_COLORS as u64) as usize;
            if !pwqs
                .iter()
                .any(|r| r.pool.with_pwq(r.id, |p| p.in_flight[next] > 0))
            {
                break next;
            }
            g = self.flush_cv.wait(g);
        };
        *g += 1;
        let new = *g;
        for r in &pwqs {
            r.pool.pwq_flip_color(r.id, next as u8);
        }
        loop {
            let cur = *g;
            let span = (cur - new) as usize;
            let young = |i: usize| (i + NR_COLORS - next) % NR_COLORS <= span;
            let done = pwqs.iter().all(|r| {
                r.pool.with_pwq(r.id, |p| {
                    (0..NR_COLORS).all(|i| p.in_flight[i] == 0 || young(i))
                })
            });
            if done {
                break;
            }
            g = self.flush_cv.wait(g);
        }
        drop(g);
        self.flushers.fetch_sub(1, Ordering::Relaxed);
    }

    fn drain(&self) {
        if threads::forked() {
            return;
        }
        self.draining.fetch_add(1, Ordering::Relaxed);
        loop {
            self.flush();
            if self.nr_in_flight() == 0 {
                break;
            }
        }
        self.draining.fetch_sub(1, Ordering::Relaxed);
    }

    /// Activates what the limits allow now (after a thaw or a new `max_active`).
    fn reactivate(self: &Arc<Self>) {
        if self.unbound {
            for n in 0..self.nodes.len() {
                self.node_activate(n);
            }
        } else {
            let max = self.max_active.load(Ordering::Relaxed);
            for r in self.pwq_list() {
                r.pool.pwq_set_max_active(r.id, max);
            }
        }
    }

    fn destroy(self: &Arc<Self>) {
        if self.destroyed.swap(true, Ordering::SeqCst) {
            return;
        }
        // The last handle of a frozen queue thaws it: everything queued runs
        // (the drain below would otherwise wait forever for items that a
        // frozen queue never starts).
        if self.frozen.swap(false, Ordering::Relaxed) {
            self.reactivate();
        }
        // Drain for good: from here only the queue's own items (and its timers,
        // armed before or by them) may add work; every timer is fired at once.
        self.draining.fetch_add(1, Ordering::Relaxed);
        loop {
            let fired = timer::fire_all_for(self);
            self.flush();
            if fired == 0 && self.nr_in_flight() == 0 && timer::fire_all_for(self) == 0 {
                break;
            }
        }
        for n in &self.nodes {
            n.clear();
        }
        if let Some(r) = &self.rescuer {
            r.stop.store(true, Ordering::Relaxed);
            if let Some(t) = r.thread.get() {
                t.unpark();
            }
            let h = r.join.lock().take();
            if let Some(h) = h
                && h.thread().id() != std::thread::current().id()
            {
                let _ = h.join();
            }
        }
        // No handle is left, so nothing queues any more: release the pwqs
        // (under `WQ old`, so a late `reap` finds nothing left to free).
        let mut old = self.old.lock();
        let retired = std::mem::take(&mut old.retired);
        for r in self.pwqs().all.iter().chain(&retired) {
            r.pool.detach(r.id);
        }
        drop(old);
        unregister(self);
    }
}

/// Builds a [`Workqueue`], in the kernel's terms (`alloc_workqueue` and its attrs).
#[derive(Clone, Debug)]
pub struct WorkqueueBuilder {
    name: String,
    flags: WqFlags,
    max_active: Option<usize>,
    ordered: bool,
    scope: Option<Scope>,
    strict: bool,
    cpumask: Option<Vec<usize>>,
    wake: WakeMode,
    topology: Option<Arc<Topology>>,
    cache_shard_size: Option<usize>,
    concurrency: UnboundConcurrency,
    priority: Priority,
    fallback: bool,
    nice: Option<i32>,
    panic_handler: Option<PanicHandler>,
    latency: Option<bool>,
}

/// A workqueue's own panic handler (see [`WorkqueueBuilder::panic_handler`]).
#[derive(Clone)]
struct PanicHandler(Arc<dyn Fn(Box<dyn Any + Send>) + Send + Sync>);

impl std::fmt::Debug for PanicHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PanicHandler")
    }
}

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
    inner: Arc<WqInner>,
    /// A view lent to the control endpoint (see [`borrow_of`]): it is not a
    /// handle and never destroys.
    borrowed: bool,
}

impl Clone for Workqueue {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::SeqCst);
        Workqueue {
            inner: self.inner.clone(),
            borrowed: false,
        }
    }
}

impl Drop for Workqueue {
    fn drop(&mut self) {
        if self.borrowed {
            self.inner.borrows.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        if self.inner.handles.fetch_sub(1, Ordering::SeqCst) != 1 || threads::forked() {
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

/// A topology a test put in place of the machine's (see [`debug_use_topology`]).
#[cfg(feature = "failure-injection")]
static TOPOLOGY_OVERRIDE: OnceLock<Topology> = OnceLock::new();

/// Failure injection: the engine reads `t` instead of `/sys` for the machine's
/// topology (its possible and online CPUs, its pods). Takes effect only before
/// the first workqueue is built; returns false when it is too late. For tests
/// of CPUs the machine does not have (a possible CPU that is not online), with
/// the `failure-injection` feature only.
#[cfg(feature = "failure-injection")]
pub fn debug_use_topology(t: Topology) -> bool {
    SYSTEM_TOPOLOGY.get().is_none() && TOPOLOGY_OVERRIDE.set(t).is_ok()
}

/// The machine's topology, read once (restricted to the CPUs the process may
/// use when it was read; the usable set is followed later by `pool::hotplug`).
static SYSTEM_TOPOLOGY: OnceLock<Arc<Topology>> = OnceLock::new();

pub(crate) fn system_topology() -> &'static Arc<Topology> {
    SYSTEM_TOPOLOGY.get_or_init(|| {
        #[cfg(feature = "failure-injection")]
        if let Some(t) = TOPOLOGY_OVERRIDE.get() {
            return Arc::new(t.clone());
        }
        let t = Topology::detect()
            .and_then(|t| t.restrict_to_affinity())
            .or_else(|_| {
                let n = std::thread::available_parallelism().map_or(1, |n| n.get());
                Topology::from_synthetic(&format!("pack:1 l3:1 core:{n} pu:1"))
            })
            .expect("a one-package synthetic topology always builds");
        Arc::new(t)
    })
}

impl WqInner {
    /// The CPUs builds use, for `check_env` (which checks what a build would).
    pub(crate) fn machine_online() -> &'static [usize] {
        system_topology().online()
    }
}

impl WorkqueueBuilder {
    /// Sets flags (ORs them in).
    pub fn flags(mut self, f: WqFlags) -> Self {
        self.flags = self.flags | f;
        self
    }
    /// `WQ_UNBOUND`.
    pub fn unbound(self) -> Self {
        self.flags(WqFlags::UNBOUND)
    }
    /// `WQ_HIGHPRI`.
    pub fn highpri(self) -> Self {
        self.flags(WqFlags::HIGHPRI)
    }
    /// `WQ_CPU_INTENSIVE`.
    pub fn cpu_intensive(self) -> Self {
        self.flags(WqFlags::CPU_INTENSIVE)
    }
    /// `WQ_FREEZABLE`.
    pub fn freezable(self) -> Self {
        self.flags(WqFlags::FREEZABLE)
    }
    /// Keeps latency histograms (time from queued to started, and run
    /// time; see [`crate::hist`] and [`Workqueue::latency`]), or not. The
    /// default is `CMWQ_LATENCY_HIST` (`on` or `off`), off when unset: each
    /// item then costs three clock reads and two bucket increments.
    pub fn latency_histograms(mut self, on: bool) -> Self {
        self.latency = Some(on);
        self
    }
    /// `max_active`: 1..=[`MAX_ACTIVE`]; default [`DFL_ACTIVE`]. Items that
    /// wait for later items of their own queue can use up every slot and
    /// wait forever (see [`ordered`](Self::ordered)).
    ///
    /// ```
    /// use cmwq::{Error, Workqueue};
    /// let wq = Workqueue::builder("max_active_doc").max_active(2).build().unwrap();
    /// assert_eq!(wq.max_active(), 2);
    /// let bad = Workqueue::builder("max_active_doc0").max_active(0).build();
    /// assert!(matches!(bad, Err(Error::InvalidMaxActive { value: 0, .. })));
    /// ```
    pub fn max_active(mut self, n: usize) -> Self {
        self.max_active = Some(n);
        self
    }
    /// An ordered workqueue (`alloc_ordered_workqueue`): unbound, one item at a
    /// time, in queueing order.
    ///
    /// An item that waits for a later item of its own ordered queue (a
    /// `join` of a job it spawned there, a `flush` of a `Work` it queued
    /// there) waits forever: the later item starts only after it ends. The
    /// kernel deadlocks the same way; the same holds for `max_active(n)` once
    /// `n` items wait so. Waits on the item itself and on its whole queue are
    /// refused with a panic instead.
    ///
    /// ```
    /// use cmwq::{Work, Workqueue};
    /// use std::sync::{Arc, Mutex};
    ///
    /// let wq = Workqueue::builder("ordered_doc").ordered().build().unwrap();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let items: Vec<Work> = (0..100)
    ///     .map(|i| {
    ///         let seen = seen.clone();
    ///         Work::new(move || seen.lock().unwrap().push(i))
    ///     })
    ///     .collect();
    /// for w in &items {
    ///     assert!(wq.queue(w));
    /// }
    /// wq.flush();
    /// assert_eq!(*seen.lock().unwrap(), (0..100).collect::<Vec<_>>());
    /// assert_eq!(wq.max_active(), 1);
    /// ```
    pub fn ordered(mut self) -> Self {
        self.ordered = true;
        self.flags = self.flags | WqFlags::UNBOUND;
        self
    }
    /// The affinity scope of an unbound queue (default `cache_shard`).
    ///
    /// ```
    /// use cmwq::{Work, Workqueue, topology::Scope};
    /// let wq = Workqueue::builder("scope_doc")
    ///     .unbound()
    ///     .affinity_scope(Scope::Cpu)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(wq.attrs().affinity_scope, Scope::Cpu);
    /// // One pod, and so one pool, per CPU the queue may use.
    /// assert!(wq.nr_pwqs() >= 1);
    /// let w = Work::new(|| {});
    /// assert!(wq.queue(&w));
    /// w.flush();
    /// ```
    pub fn affinity_scope(mut self, s: Scope) -> Self {
        self.scope = Some(s);
        self
    }
    /// Bind workers to their pod (`affinity_strict`).
    pub fn affinity_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
    /// CPUs the unbound queue may use (topology CPU ids).
    pub fn cpumask(mut self, cpus: &[usize]) -> Self {
        self.cpumask = Some(cpus.to_vec());
        self
    }
    /// When a queueing thread wakes the worker (default: after unlocking).
    pub fn wake_mode(mut self, w: WakeMode) -> Self {
        self.wake = w;
        self
    }
    /// Cut pods from this topology instead of the machine's. A topology larger
    /// than the machine is folded onto the real CPUs (CPU `i` runs on online CPU
    /// `i mod n`), so a Grace or EPYC layout's pools can be exercised anywhere.
    pub fn topology(mut self, t: Arc<Topology>) -> Self {
        self.topology = Some(t);
        self
    }
    /// How unbound pools limit running workers (default [`UnboundConcurrency::PerCpu`]).
    pub fn unbound_concurrency(mut self, c: UnboundConcurrency) -> Self {
        self.concurrency = c;
        self
    }
    /// The shard size of the `cache_shard` scope (default 8; 0 behaves as 1).
    pub fn cache_shard_size(mut self, n: usize) -> Self {
        self.cache_shard_size = Some(n);
        self
    }

    /// `WQ_MEM_RECLAIM`: the workqueue gets a rescuer thread that runs its items
    /// when its pools cannot start workers.
    ///
    /// ```
    /// let wq = cmwq::Workqueue::builder("reclaim_doc").mem_reclaim().build().unwrap();
    /// // The rescuer exists before it is needed: `build` waits for its thread id.
    /// assert!(wq.rescuer_tid().is_some_and(|tid| tid > 0));
    /// let plain = cmwq::Workqueue::builder("reclaim_doc_plain").build().unwrap();
    /// assert_eq!(plain.rescuer_tid(), None);
    /// ```
    pub fn mem_reclaim(self) -> Self {
        self.flags(WqFlags::MEM_RECLAIM)
    }
    /// The workers' priority (default [`Priority::Normal`]; `HIGHPRI` is `High`).
    /// See [`priority_fallback`](Self::priority_fallback) for running where it
    /// is not allowed.
    ///
    /// ```
    /// let wq = cmwq::Workqueue::builder("prio_doc").build().unwrap();
    /// assert_eq!(wq.stats().priority, "nice 0");
    /// assert_eq!(wq.stats().priority_fallback, None);
    /// ```
    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }
    /// When the priority is not allowed (no `CAP_SYS_NICE`, `RLIMIT_RTPRIO` 0),
    /// run at the best allowed one and say so in [`Workqueue::stats`] instead of
    /// failing (default: fail with [`Error::PriorityDenied`]).
    ///
    /// ```
    /// use cmwq::{Priority, Work, Workqueue};
    /// // Builds with or without CAP_SYS_NICE.
    /// let wq = Workqueue::builder("fallback_doc")
    ///     .priority(Priority::High)
    ///     .priority_fallback(true)
    ///     .build()
    ///     .unwrap();
    /// let st = wq.stats();
    /// match &st.priority_fallback {
    ///     // Granted: the workers run above nice 0 ("nice -20", or "fifo 1").
    ///     None => assert_ne!(st.priority, "nice 0"),
    ///     // Denied: the note says what was asked for and what is used instead.
    ///     Some(note) => assert!(note.contains(&st.priority), "{note}"),
    /// }
    /// let w = Work::new(|| {});
    /// assert!(wq.queue(&w));
    /// w.flush();
    /// ```
    pub fn priority_fallback(mut self, yes: bool) -> Self {
        self.fallback = yes;
        self
    }
    /// Hands the payload of every panic of this queue's work items to
    /// `handler` (as rayon's `ThreadPoolBuilder::panic_handler`), instead of
    /// the process-wide [`set_panic_hook`]. The worker survives either way; a
    /// handler that panics itself is caught too ([`panic_reports_failed`]).
    /// Jobs from [`Workqueue::spawn`] hand their panics to their handle.
    ///
    /// The handler runs on the worker, as the end of the item that panicked:
    /// what the item may not wait for, the handler may not either. A
    /// [`flush`](Workqueue::flush), [`drain`](Workqueue::drain) or
    /// [`freeze`](Workqueue::freeze) of this queue, or a `flush` or
    /// `cancel_sync` of the item, panics (the panic is caught and counted,
    /// and the message goes to stderr); dropping the queue's last handle
    /// destroys it on another thread, as from an item.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let seen = Arc::new(Mutex::new(None));
    /// let s = seen.clone();
    /// let wq = cmwq::Workqueue::builder("ph_doc")
    ///     .panic_handler(move |p| *s.lock().unwrap() = p.downcast_ref::<&str>().copied())
    ///     .build()
    ///     .unwrap();
    /// let w = cmwq::Work::new(|| panic!("boom"));
    /// wq.queue(&w);
    /// w.flush();
    /// assert_eq!(*seen.lock().unwrap(), Some("boom"));
    /// ```
    pub fn panic_handler(
        mut self,
        handler: impl Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    ) -> Self {
        self.panic_handler = Some(PanicHandler(Arc::new(handler)));
        self
    }

    /// The nice value of an unbound queue's workers (−20..=19, default 0; the
    /// kernel's `nice` attribute).
    pub fn nice(mut self, n: i32) -> Self {
        self.nice = Some(n);
        self
    }

    /// Creates the workqueue. Besides a refused attribute, an error if a
    /// thread it needs (the process's watchdog, a `MEM_RECLAIM` queue's
    /// rescuer) cannot start ([`Error::Spawn`], naming the errno and the
    /// limit to raise); a later `build` tries again. A worker that cannot be
    /// started is no error: its pool retries with a backoff (see the README).
    pub fn build(self) -> Result<Workqueue, Error> {
        let max_active = match self.max_active {
            None => {
                if self.ordered {
                    1
                } else {
                    DFL_ACTIVE
                }
            }
            Some(n) if n == 0 || n > MAX_ACTIVE => {
                return Err(Error::InvalidMaxActive {
                    value: n,
                    max: MAX_ACTIVE,
                });
            }
            Some(n) if self.ordered && n != 1 => return Err(Error::OrderedMaxActive(n)),
            Some(n) => n,
        };
        let unbound = self.flags.contains(WqFlags::UNBOUND);
        // The attributes of unbound queues, refused on a bound one as the live
        // setters refuse them (rather than silently ignored).
        if !unbound {
            let set = [
                ("cpumask", self.cpumask.is_some()),
                ("nice", self.nice.is_some()),
                ("affinity_scope", self.scope.is_some()),
                ("affinity_strict", self.strict),
                ("cache_shard_size", self.cache_shard_size.is_some()),
            ];
            if let Some((attr, _)) = set.iter().find(|(_, on)| *on) {
                return Err(Error::NotUnbound {
                    name: self.name.clone(),
                    attr,
                });
            }
        }
        if self.cache_shard_size == Some(0) {
            return Err(Error::InvalidCacheShardSize(0));
        }
        let params = crate::params::for_build(system_topology().online())?;
        if params.control {
            (super::hooks().control_autostart)();
        }
        let nice = self.nice.unwrap_or(0);
        if !(-20..=19).contains(&nice) {
            return Err(Error::InvalidNice(nice));
        }
        let want = if self.flags.contains(WqFlags::HIGHPRI) && self.priority == Priority::Normal {
            Priority::High
        } else {
            self.priority
        };
        let (prio, prio_note) = priority::resolve(priority::requested(want, nice)?, self.fallback)?;
        trace::priority_fallback(&self.name, prio_note.as_deref());
        let custom = self.topology.is_some();
        let topo = self
            .topology
            .clone()
            .unwrap_or_else(|| system_topology().clone());
        let cpumask = match (&self.cpumask, unbound, &params.unbound_cpus) {
            (Some(m), _, _) => m.clone(),
            (None, true, Some(u)) => u.clone(),
            (None, _, _) => topo.online().to_vec(),
        };
        let attrs = WqAttrs {
            affinity_scope: self.scope.unwrap_or(params.affinity_scope),
            affinity_strict: self.strict,
            cpumask,
            nice: prio.nice(),
            max_active,
            cache_shard_size: self.cache_shard_size.unwrap_or(params.cache_shard_size),
        };
        let nr_nodes = topo.nr_nodes().max(1);
        let map_len = topo
            .nr_cpu_ids()
            .max(system_topology().online().iter().max().map_or(0, |m| m + 1));
        let ctx = WqCtx {
            topo,
            custom,
            wake: self.wake,
            concurrency: self.concurrency,
            fallback: self.fallback,
        };
        let rescuer = self.flags.contains(WqFlags::MEM_RECLAIM).then(|| Rescuer {
            mayday: Mutex::new(VecDeque::new()),
            thread: OnceLock::new(),
            join: Mutex::new(None),
            stop: AtomicBool::new(false),
            tid: std::sync::atomic::AtomicI32::new(0),
        });
        let nodes = (0..nr_nodes).map(|_| NodeActive::new(max_active)).collect();
        let latency = self.latency.unwrap_or(params.latency_hist);
        let inner = Arc::new(WqInner {
            name: self.name.clone(),
            panic_handler: self.panic_handler.clone(),
            flags: self.flags,
            unbound,
            ordered: self.ordered,
            cpu_intensive: self.flags.contains(WqFlags::CPU_INTENSIVE),
            latency,
            frozen: AtomicBool::new(false),
            draining: AtomicU32::new(0),
            destroyed: AtomicBool::new(false),
            stats: WqStats::default(),
            max_active: AtomicUsize::new(max_active),
            nodes,
            node_cpus: Mutex::new(vec![0; nr_nodes]),
            cur: Mutex::new(Arc::new(Pwqs::empty())),
            map: PwqMap::new(map_len),
            old: Mutex::new(OldPwqs {
                dead_lat: crate::hist::PwqLatency::new(latency),
                ..OldPwqs::default()
            }),
            chain: Mutex::new(VecDeque::new()),
            ctx,
            attrs: Mutex::new(attrs.clone()),
            prio: Mutex::new((prio, prio_note)),
            rescuer,
            flush_lock: Mutex::new(0),
            flush_cv: Condvar::new(),
            flushers: AtomicU32::new(0),
            rr: AtomicUsize::new(0),
            handles: AtomicUsize::new(1),
            borrows: AtomicUsize::new(0),
            id: NEXT_WQ_ID.fetch_add(1, Ordering::Relaxed),
            min_active: AtomicUsize::new(0),
        });
        let tab = inner.build_table(&attrs, prio, 0, false)?;
        inner.set_node_budgets(&attrs, &tab);
        if inner.ordered {
            let dfl = tab.dfl.expect("unbound tables have a default pwq");
            inner.chain.lock().push_back(dfl);
        }
        inner.map.publish(&tab);
        *inner.cur.lock() = Arc::new(tab);
        if let Err(e) = inner.start_rescuer() {
            inner.destroy();
            return Err(e);
        }
        register(&inner);
        Ok(Workqueue {
            inner,
            borrowed: false,
        })
    }
}

/// The kernel's `TASK_COMM_LEN`: a thread name holds this many bytes with
/// its NUL, so names are cut to one less.
const TASK_COMM_LEN: usize = 16;

/// A: source of [`WqInner::id`]. `Relaxed`: only uniqueness matters.
static NEXT_WQ_ID: AtomicU64 = AtomicU64::new(1);

impl WqInner {
    /// The real CPU a topology CPU of this queue runs on (a custom topology
    /// is folded onto the CPUs usable at start).
    fn to_real(&self, c: usize) -> usize {
        if !self.ctx.custom {
            return c;
        }
        let real = system_topology().online();
        real[c % real.len()]
    }

    /// The topology pods are cut from: a custom one as given; the machine's
    /// with every online CPU, so a CPU given back has its pod.
    fn cut_topology(&self) -> &Topology {
        static MACHINE: OnceLock<Topology> = OnceLock::new();
        if self.ctx.custom {
            &self.ctx.topo
        } else {
            MACHINE.get_or_init(|| system_topology().unrestricted())
        }
    }

    /// The CPUs of `attrs`' cpumask that pods are cut from (online, of the
    /// cut topology) and, of those, the ones usable now (`wq_update_pod`'s
    /// rule): `usable` are real CPU ids. An empty second list: no CPU of the
    /// mask is usable, so every CPU goes to the default pwq.
    fn pod_masks(&self, attrs: &WqAttrs, usable: &[usize]) -> (Vec<usize>, Vec<usize>) {
        let cut: Vec<usize> = self
            .cut_topology()
            .online()
            .iter()
            .copied()
            .filter(|c| attrs.cpumask.contains(c))
            .collect();
        let live = cut
            .iter()
            .copied()
            .filter(|&c| usable.contains(&self.to_real(c)))
            .collect();
        (cut, live)
    }

    /// Builds a generation of pwqs for `attrs` (`apply_wqattrs_prepare`): pools
    /// per pod of the scope (unbound) or per CPU (bound), each pwq attached with
    /// flush colour `color`. Unbound pods hold the CPUs usable now.
    /// On error nothing stays attached.
    fn build_table(
        self: &Arc<Self>,
        attrs: &WqAttrs,
        prio: PoolPrio,
        color: u8,
        plugged: bool,
    ) -> Result<Pwqs, Error> {
        let ctx = &self.ctx;
        let topo = &ctx.topo;
        let real: Vec<usize> = system_topology().machine_online().to_vec();
        let to_real = |c: usize| self.to_real(c);
        let mask: Vec<usize> = topo
            .online()
            .iter()
            .copied()
            .filter(|c| attrs.cpumask.contains(c))
            .collect();
        if mask.is_empty() {
            return Err(Error::EmptyCpumask {
                requested: attrs.cpumask.clone(),
            });
        }
        // Unbound: pods hold only the CPUs usable now; with none usable the
        // default pwq takes the whole mask (the kernel's fallback).
        let (cut_mask, live) = self.pod_masks(attrs, &pool::usable_cpus());
        let route = if live.is_empty() || !self.unbound {
            mask.clone()
        } else {
            live.clone()
        };
        let nr_nodes = self.nodes.len();
        let mut tab = Pwqs {
            cpu: vec![
                None;
                topo.nr_cpu_ids()
                    .max(real.iter().max().map_or(0, |m| m + 1))
            ],
            dfl: None,
            all: Vec::new(),
            route_cpus: route.clone(),
            live: live.clone(),
            lane: vec![None; real.iter().max().map_or(0, |m| m + 1)],
        };
        let max_active = attrs.max_active;
        let res = (|| -> Result<(), Error> {
            if !self.unbound {
                // Every possible CPU of the machine has its pool, usable now
                // or not (one that is not starts disassociated and is served
                // by unbound workers), so `queue_on` of any CPU goes to that
                // CPU's pool, as in the kernel, and a CPU given back or
                // brought online later is served by it.
                for &c in system_topology().possible() {
                    let pool = pool::bound_pool(c, prio, ctx.wake)?;
                    let id = pool.attach(self.clone(), max_active, 0, color, false)?;
                    let r = PwqRef { pool, id };
                    tab.cpu[c] = Some(r);
                    tab.all.push(r);
                }
                return Ok(());
            }
            let managed = ctx.concurrency == UnboundConcurrency::PerCpu;
            let mut real_mask: Vec<usize> = route.iter().map(|&c| to_real(c)).collect();
            real_mask.sort_unstable();
            real_mask.dedup();
            let dfl_node = topo.cpu_node(route[0]).min(nr_nodes - 1);
            let dfl_pool = pool::unbound_pool(PoolAttrs {
                cpu: None,
                prio,
                cpus: real_mask.clone(),
                pod_cpus: real_mask.clone(),
                strict: attrs.affinity_strict,
                wake: ctx.wake,
                managed,
                pod: Vec::new(),
            })?;
            let dfl = PwqRef {
                pool: dfl_pool,
                id: dfl_pool.attach(self.clone(), max_active, dfl_node, color, plugged)?,
            };
            tab.dfl = Some(dfl);
            tab.all.push(dfl);
            if self.ordered {
                return Ok(());
            }
            let pods = self
                .cut_topology()
                .pods(attrs.affinity_scope, attrs.cache_shard_size);
            for pod in &pods.pods {
                let all: Vec<usize> = pod
                    .iter()
                    .copied()
                    .filter(|c| cut_mask.contains(c))
                    .collect();
                let cpus: Vec<usize> = all.iter().copied().filter(|c| live.contains(c)).collect();
                if cpus.is_empty() {
                    // No CPU of the pod is usable: its CPUs go to the default pwq.
                    for &c in &all {
                        tab.cpu[c] = Some(dfl);
                    }
                    continue;
                }
                let mut pod_real: Vec<usize> = cpus.iter().map(|&c| to_real(c)).collect();
                pod_real.sort_unstable();
                pod_real.dedup();
                let node = topo.cpu_node(cpus[0]).min(nr_nodes - 1);
                let attrs_of = |pod_cpus: Vec<usize>, pod: Vec<usize>| PoolAttrs {
                    cpu: None,
                    prio,
                    cpus: real_mask.clone(),
                    pod_cpus,
                    strict: attrs.affinity_strict,
                    wake: ctx.wake,
                    managed,
                    pod,
                };
                if !managed || pod_real.len() == 1 {
                    // One pool for the pod: one CPU, or the kernel's
                    // unmanaged pools (a worker per item, lanes inside).
                    let pool = pool::unbound_pool(attrs_of(pod_real, Vec::new()))?;
                    let r = PwqRef {
                        pool,
                        id: pool.attach(self.clone(), max_active, node, color, false)?,
                    };
                    tab.all.push(r);
                    // The pod's CPUs that are not usable go to what is left of it.
                    for &c in &all {
                        tab.cpu[c] = Some(r);
                    }
                    continue;
                }
                // A managed pod of several CPUs: a lane pool per real CPU
                // (each with its own lock), linked so a lagging one borrows
                // an idle worker of another (engine/pool/lane.rs).
                let lanes = pod_real
                    .iter()
                    .map(|&r| pool::unbound_pool(attrs_of(vec![r], pod_real.clone())))
                    .collect::<Result<Vec<_>, Error>>()?;
                pool::link_pod(&lanes);
                let mut refs: Vec<PwqRef> = Vec::with_capacity(lanes.len());
                for &pool in &lanes {
                    let r = PwqRef {
                        pool,
                        id: pool.attach(self.clone(), max_active, node, color, false)?,
                    };
                    tab.all.push(r);
                    refs.push(r);
                }
                for &c in &all {
                    let i = pod_real.binary_search(&to_real(c)).unwrap_or(0);
                    tab.cpu[c] = Some(refs[i]);
                }
                for (&r, &lane) in pod_real.iter().zip(&refs) {
                    // A real CPU that is a lane of two pods of other CPU
                    // sets, or of two NUMA nodes (folded topologies), has no
                    // lane of its own: such items go by the target CPU, so
                    // each node's `max_active` budget stays its own.
                    match &mut tab.lane[r] {
                        slot @ None => *slot = Some(Some((lane, node))),
                        Some(Some((old, n)))
                            if !std::ptr::eq(old.pool, lane.pool) || *n != node =>
                        {
                            tab.lane[r] = Some(None)
                        }
                        _ => {}
                    }
                }
            }
            Ok(())
        })();
        if let Err(e) = res {
            for r in &tab.all {
                r.pool.detach(r.id);
            }
            return Err(e);
        }
        Ok(tab)
    }

    /// Cuts `max_active` into per-node budgets by the CPUs of the table's mask.
    fn set_node_budgets(&self, attrs: &WqAttrs, tab: &Pwqs) {
        let nr_nodes = self.nodes.len();
        let mut node_cpus = vec![0usize; nr_nodes];
        for &c in &tab.route_cpus {
            node_cpus[self.ctx.topo.cpu_node(c).min(nr_nodes - 1)] += 1;
        }
        *self.node_cpus.lock() = node_cpus;
        for (node, max) in self.node_maxes(attrs.max_active).into_iter().enumerate() {
            self.nodes[node].set_max(max);
        }
    }

    /// Starts the rescuer thread of a `MEM_RECLAIM` queue.
    fn start_rescuer(self: &Arc<Self>) -> Result<(), Error> {
        let Some(r) = &self.rescuer else {
            return Ok(());
        };
        let weak = Arc::downgrade(self);
        // A thread name cannot hold a NUL byte (a workqueue name may).
        let name: String = format!("cmwq-r/{}", self.name)
            .chars()
            .filter(|&c| c != '\0')
            .take(TASK_COMM_LEN - 1)
            .collect();
        let h = threads::start(name, move || rescuer_thread(weak)).map_err(|e| {
            threads::spawn_error(format!("the rescuer of workqueue {:?}", self.name), &e)
        })?;
        let _ = r.thread.set(h.thread().clone());
        *r.join.lock() = Some(h);
        // The rescuer publishes its thread id first thing; wait for it so
        // `rescuer_tid()` and dumps name it as soon as `build()` returns.
        let t0 = std::time::Instant::now();
        while r.tid.load(Ordering::Relaxed) == 0 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(())
    }

    /// Frees the dead pwqs of `retired` whose `reap` has not run yet,
    /// their counters to `dead_stats`. Dead is final (a dead pwq takes no
    /// items and has none in flight), so flush and stats lose nothing.
    fn compact_retired(old: &mut OldPwqs) {
        let OldPwqs {
            retired,
            dead_stats,
            dead_lat,
        } = old;
        retired.retain(|r| {
            if !r.pool.with_pwq(r.id, |p| p.dead) {
                return true;
            }
            dead_stats.add(&r.pool.pwq_stats(r.id));
            r.pool.pwq_latency(r.id, dead_lat);
            r.pool.detach(r.id);
            false
        });
    }

    /// Waits until no borrowed view (a snapshot or a control request in
    /// progress) holds this workqueue; then the last handle may destroy it.
    fn wait_borrows(&self) {
        while self.borrows.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// Replaces the pwqs with a generation built for the new attributes
    /// (`apply_workqueue_attrs`): new work goes to the new pools at once; the
    /// old pwqs keep and finish what they hold, then die. An ordered queue's new
    /// pwq stays plugged until every older one has drained.
    fn apply(self: &Arc<Self>, change: impl FnOnce(&mut WqAttrs)) -> Result<(), Error> {
        self.apply_with(change, false)
    }

    /// `wq_update_pod`: the usable CPUs changed; if that changes which CPUs
    /// of the cpumask the pods hold, the same attrs are applied again, cut
    /// from the CPUs usable now (in-flight items finish where they are).
    pub(crate) fn update_pods(self: &Arc<Self>) -> Result<(), Error> {
        if !self.unbound {
            return Ok(());
        }
        self.apply_with(|_| {}, true)
    }

    /// [`apply`](Self::apply); `repod`: rebuild with unchanged attrs when
    /// the usable CPUs of the mask differ from those of the current table.
    fn apply_with(
        self: &Arc<Self>,
        change: impl FnOnce(&mut WqAttrs),
        repod: bool,
    ) -> Result<(), Error> {
        if !self.unbound {
            return Err(Error::NotUnbound {
                name: self.name.clone(),
                attr: "this attribute",
            });
        }
        let mut cur = self.attrs.lock();
        let mut new = cur.clone();
        change(&mut new);
        if !(-20..=19).contains(&new.nice) {
            return Err(Error::InvalidNice(new.nice));
        }
        if new == *cur
            && !(repod && self.pod_masks(&cur, &pool::usable_cpus()).1 != self.pwqs().live)
        {
            return Ok(());
        }
        let (old_prio, old_note) = self.prio.lock().clone();
        let (prio, note) = if new.nice != cur.nice {
            priority::resolve(PoolPrio::Nice(new.nice), self.ctx.fallback)?
        } else {
            (old_prio, old_note)
        };
        new.nice = prio.nice();
        let g = self.flush_lock.lock();
        let color = (*g % NR_COLORS as u64) as u8;
        let tab = self.build_table(&new, prio, color, self.ordered)?;
        self.set_node_budgets(&new, &tab);
        let dfl = tab.dfl;
        self.map.publish(&tab);
        let old = {
            // Under the `old` lock, so a reader of pwq_list_and_dead sees
            // the old generation either as current or as retired, once.
            let mut gens = self.old.lock();
            let old = std::mem::replace(&mut *self.cur.lock(), Arc::new(tab));
            Self::compact_retired(&mut gens);
            gens.retired.extend(old.all.iter().copied());
            old
        };
        if self.ordered {
            let mut chain = self.chain.lock();
            chain.push_back(dfl.expect("unbound tables have a default pwq"));
        }
        drop(g);
        for r in &old.all {
            r.pool.retire(r.id);
        }
        if self.ordered {
            self.ordered_advance();
        }
        *self.prio.lock() = (prio, note);
        self.max_active.store(new.max_active, Ordering::Relaxed);
        trace::attrs_changed(&self.name, &new);
        *cur = new;
        drop(cur);
        for n in 0..self.nodes.len() {
            self.node_activate(n);
        }
        Ok(())
    }
}

/// The rescuer: sleeps until a pool sends mayday, then runs batches of the
/// starving pwq's items on this thread; exits when the workqueue is destroyed.
fn rescuer_thread(wq: std::sync::Weak<WqInner>) {
    super::pool::mark_rescuer();
    if let Some(w) = wq.upgrade()
        && let Some(r) = &w.rescuer
    {
        r.tid.store(sched::gettid(), Ordering::Relaxed);
    }
    loop {
        let next = {
            let Some(w) = wq.upgrade() else { return };
            let r = w
                .rescuer
                .as_ref()
                .expect("rescuer thread of a rescuer queue");
            if r.stop.load(Ordering::Relaxed) {
                return;
            }
            let job = r.mayday.lock().pop_front();
            job.map(|j| (w, j))
        };
        let Some((w, (pool_id, slot))) = next else {
            std::thread::park();
            continue;
        };
        trace::rescue(pool_id, &w.name);
        if let Some(pool) = pool::get_pool(pool_id)
            && pool.rescue(slot, &w)
        {
            // Still starving with items of this pwq left: back on the list.
            w.send_mayday(pool_id, slot);
        }
    }
}

impl Workqueue {
    /// Starts building a workqueue named `name` (bound, `max_active` default).
    pub fn builder(name: &str) -> WorkqueueBuilder {
        WorkqueueBuilder {
            name: name.to_string(),
            flags: WqFlags::NONE,
            max_active: None,
            ordered: false,
            scope: None,
            strict: false,
            cpumask: None,
            wake: WakeMode::Deferred,
            topology: None,
            cache_shard_size: None,
            concurrency: UnboundConcurrency::PerCpu,
            priority: Priority::Normal,
            fallback: false,
            nice: None,
            panic_handler: None,
            latency: None,
        }
    }

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
    pub fn queue(&self, work: &Work) -> bool {
        if !work.0.try_claim() {
            return false;
        }
        self.inner.queue_claimed(work.0.clone(), None, false)
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
        if !work.0.try_claim() {
            return Ok(false);
        }
        Ok(self.inner.queue_claimed(work.0.clone(), Some(cpu), false))
    }

    /// `cpu` is a CPU id of the queue's topology (a possible CPU). Whether
    /// it is online, usable or in the cpumask does not matter here: the pwq
    /// for it is picked in `queue_claimed` (its own, or the default one).
    /// A forked child's queues take nothing (the signature can say so).
    fn check_cpu(&self, cpu: usize) -> Result<(), Error> {
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
        self.execute_at(None, f)
    }

    /// [`execute`](Self::execute) for `cpu`, as [`queue_on`](Self::queue_on).
    pub fn execute_on<F: FnOnce() + Send + 'static>(
        &self,
        cpu: usize,
        f: F,
    ) -> Result<bool, Error> {
        self.check_cpu(cpu)?;
        Ok(self.execute_at(Some(cpu), f))
    }

    fn execute_at<F: FnOnce() + Send + 'static>(&self, cpu: Option<usize>, f: F) -> bool {
        self.inner.queue_claimed(spawn::detached(f), cpu, false)
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
        self.inner.queue_claimed(item, cpu, false);
        handle
    }

    /// Queues `dw` after `delay` (`queue_delayed_work`); false if already
    /// pending, or refused: the queue drains, or the timer thread cannot start
    /// (the thread limit; said once on stderr). A refused item is left idle,
    /// not pending, so nothing waits for it and it can be queued again.
    pub fn queue_delayed(&self, dw: &DelayedWork, delay: Duration) -> bool {
        if !dw.work.0.try_claim() {
            return false;
        }
        self.queue_delayed_claimed(dw, None, delay)
    }

    /// `queue_delayed(_on)` once PENDING is ours: false if refused (a
    /// draining queue, a forked child, no timer thread), the item's cycle
    /// ended so nothing waits for it and it can be queued again.
    fn queue_delayed_claimed(&self, dw: &DelayedWork, cpu: Option<usize>, delay: Duration) -> bool {
        if delay.is_zero() {
            self.inner.queue_claimed(dw.work.0.clone(), cpu, false)
        } else if self.inner.refuses_outsiders()
            || threads::refuse_forked()
            || timer::arm(&dw.work.0, &self.inner, cpu, delay).is_err()
        {
            // As `queue`: a draining queue takes no new work from outside.
            self.inner.refuse(&dw.work.0);
            false
        } else {
            true
        }
    }

    /// [`queue_delayed`](Self::queue_delayed) for `cpu` (`queue_delayed_work_on`):
    /// when the timer fires, the item goes to that CPU's pool (bound queue) or
    /// pod (unbound queue), as [`queue_on`](Self::queue_on). False if already
    /// pending or refused by a draining queue; only a CPU id beyond the
    /// possible CPUs is an error.
    ///
    /// ```
    /// use cmwq::{DelayedWork, Workqueue};
    /// use std::time::Duration;
    ///
    /// let wq = Workqueue::builder("delayed_on_doc").build().unwrap();
    /// let cpu = cmwq::topology::sched_affinity().unwrap()[0];
    /// let dw = DelayedWork::new(|| {});
    /// assert_eq!(wq.queue_delayed_on(cpu, &dw, Duration::from_millis(2)), Ok(true));
    /// // Already pending: refused, as `queue_delayed`.
    /// assert_eq!(wq.queue_delayed_on(cpu, &dw, Duration::ZERO), Ok(false));
    /// dw.flush();
    /// assert!(!dw.is_pending());
    /// ```
    pub fn queue_delayed_on(
        &self,
        cpu: usize,
        dw: &DelayedWork,
        delay: Duration,
    ) -> Result<bool, Error> {
        self.check_cpu(cpu)?;
        if !dw.work.0.try_claim() {
            return Ok(false);
        }
        Ok(self.queue_delayed_claimed(dw, Some(cpu), delay))
    }

    /// Re-arms `dw` to run after `delay` whether or not it was pending
    /// (`mod_delayed_work`). Returns whether it was pending before.
    ///
    /// ```
    /// use cmwq::{DelayedWork, Workqueue};
    /// use std::time::Duration;
    ///
    /// let wq = Workqueue::builder("mod_delayed_doc").build().unwrap();
    /// let dw = DelayedWork::new(|| {});
    /// // Not pending yet: arms it.
    /// assert!(!wq.mod_delayed(&dw, Duration::from_secs(60)));
    /// // Pending: pulls the timer in (a debounce re-arms this way).
    /// assert!(wq.mod_delayed(&dw, Duration::from_millis(1)));
    /// dw.flush();
    /// assert!(!dw.is_pending());
    /// ```
    pub fn mod_delayed(&self, dw: &DelayedWork, delay: Duration) -> bool {
        if threads::refuse_forked() {
            // Its timer or queued cycle belongs to the parent's threads.
            return false;
        }
        let mut was = false;
        loop {
            was |= dw.work.0.grab_pending();
            if dw.work.0.try_claim() {
                // Ours now: armed, queued, or refused by a draining queue
                // (counted as rejected); never retried, so never a spin.
                self.queue_delayed_claimed(dw, None, delay);
                return was;
            }
            if dw.work.is_disabled() {
                return was;
            }
            // Another thread queued it between the grab and the claim:
            // grab that cycle too (`try_to_grab_pending`'s -EAGAIN).
            std::thread::yield_now();
        }
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

    fn reactivate(&self) {
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
        super::pool::show_busy(Some(self.inner.id))
    }

    /// The per-node `max_active` of an unbound queue (kernel: `node_nr_active[].max`).
    pub fn node_max_active(&self) -> Vec<usize> {
        self.inner.nodes.iter().map(NodeActive::max).collect()
    }

    /// Units of each node's budget held now (active items plus budget cached by
    /// pwqs); 0 on every node once the workqueue is idle (kernel: `node_nr_active[].nr`).
    pub fn node_nr_active(&self) -> Vec<usize> {
        self.inner.nodes.iter().map(NodeActive::nr).collect()
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
    pub fn nr_pwqs(&self) -> usize {
        self.inner.pwqs().all.len()
    }

    /// The pool ids serving each topology CPU (`None`: no pwq), and the default pool.
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
        let mut out = WorkqueueStats {
            rejected: self.inner.stats.rejected.load(Ordering::Relaxed),
            ..WorkqueueStats::default()
        };
        let sum = {
            // Under `WQ old`, so a pwq freed meanwhile is counted once: in
            // `dead_stats` or here.
            let old = self.inner.old.lock();
            let mut sum = old.dead_stats;
            for r in self.inner.pwqs().all.iter().chain(&old.retired) {
                sum.add(&r.pool.pwq_stats(r.id));
            }
            sum
        };
        sum.write_to(&mut out);
        out.in_flight = out.started.saturating_sub(out.completed);
        let (prio, note) = self.inner.prio.lock().clone();
        out.priority = prio.to_string();
        out.priority_fallback = note;
        out
    }

    /// The latency histograms (see [`crate::hist`]): time from queued to
    /// started and from started to ended of every item that ended, summed
    /// over the queue's pwqs; `None` for a queue built without them
    /// ([`WorkqueueBuilder::latency_histograms`]).
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
        let mut sum = crate::hist::PwqLatency::new(self.inner.latency);
        // Under `WQ old`, as in `stats`: each pwq counted once.
        let old = self.inner.old.lock();
        sum.add(&old.dead_lat);
        for r in self.inner.pwqs().all.iter().chain(&old.retired) {
            r.pool.pwq_latency(r.id, &mut sum);
        }
        drop(old);
        sum.snap()
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

/// A work item that can be queued after a delay (`struct delayed_work`).
///
/// All delayed work of the process shares one timer thread.
///
/// ```
/// use cmwq::{DelayedWork, Workqueue};
/// use std::time::Duration;
///
/// let wq = Workqueue::builder("delayed_doc").build().unwrap();
/// let dw = DelayedWork::new(|| {});
/// // Cancelled before its timer fires: it never runs.
/// assert!(wq.queue_delayed(&dw, Duration::from_secs(60)));
/// assert!(dw.is_pending());
/// assert!(dw.cancel_sync());
/// assert!(!dw.is_pending());
/// // Disabled: queueing is refused until enabled again.
/// dw.disable();
/// assert!(!wq.queue_delayed(&dw, Duration::from_millis(1)));
/// assert!(dw.enable());
/// assert!(wq.queue_delayed(&dw, Duration::from_secs(60)));
/// // `flush` fires an armed timer now and waits for the item.
/// dw.flush();
/// assert!(!dw.is_pending());
/// ```
#[derive(Clone, Debug)]
pub struct DelayedWork {
    work: Work,
}

impl DelayedWork {
    /// Makes a delayed work item running `f`.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> DelayedWork {
        DelayedWork { work: Work::new(f) }
    }
    /// [`DelayedWork::new`] with a label for lockup reports (see `Work::with_label`).
    #[doc(hidden)]
    pub fn with_label(
        f: impl Fn() + Send + Sync + 'static,
        label: &'static (dyn Fn() -> String + Send + Sync),
    ) -> DelayedWork {
        DelayedWork {
            work: Work::with_label(f, label),
        }
    }
    /// True while its timer is armed or it is queued and has not started.
    pub fn is_pending(&self) -> bool {
        self.work.is_pending()
    }
    /// Cancels the timer or the queued item; does not wait (`cancel_delayed_work`).
    pub fn cancel(&self) -> bool {
        self.work.cancel()
    }
    /// Cancels and waits for a running instance (`cancel_delayed_work_sync`).
    pub fn cancel_sync(&self) -> bool {
        self.work.cancel_sync()
    }
    /// Queues an armed timer's item now and waits for it (`flush_delayed_work`).
    pub fn flush(&self) -> bool {
        if !threads::forked() {
            timer::fire_now(&self.work.0);
        }
        self.work.flush()
    }
    /// Disables the item (see [`Work::disable`]).
    pub fn disable(&self) -> bool {
        self.work.disable()
    }
    /// True while a callback of the item runs (see [`Work::is_running`]).
    pub fn is_running(&self) -> bool {
        self.work.is_running()
    }
    /// Queues the item now if its timer is armed, without waiting; returns
    /// whether it was armed (an idle, queued or running item is left alone).
    pub fn fire(&self) -> bool {
        !threads::forked() && timer::fire_now(&self.work.0)
    }
    /// Enables the item (see [`Work::enable`]).
    pub fn enable(&self) -> bool {
        self.work.enable()
    }
}

// ---- registry, panic hook, system queues ----

/// R registry: the live workqueues, in creation order.
static REGISTRY: Mutex<Vec<std::sync::Weak<WqInner>>> = Mutex::new(Vec::new());

fn register(wq: &Arc<WqInner>) {
    let mut r = REGISTRY.lock();
    r.retain(|w| w.strong_count() > 0);
    r.push(Arc::downgrade(wq));
}

fn unregister(wq: &Arc<WqInner>) {
    let mut r = REGISTRY.lock();
    r.retain(|w| w.upgrade().is_some_and(|x| !Arc::ptr_eq(&x, wq)));
}

/// Names of the live workqueues of this process.
pub fn workqueue_names() -> Vec<String> {
    let r = REGISTRY.lock();
    r.iter()
        .filter_map(|w| w.upgrade())
        .map(|w| w.name.clone())
        .collect()
}

type PanicHook = Arc<dyn Fn(&str, &str) + Send + Sync>;
/// The process-wide panic hook (its own lock, taken with no other held).
static PANIC_HOOK: RwLock<Option<PanicHook>> = RwLock::new(None);

/// Sets what happens when a work item panics: `hook(workqueue name, message)`.
/// The default prints a line to stderr. The worker survives either way: a
/// hook that panics itself, a write to a closed stderr or a payload whose
/// `Drop` panics is caught too (and counted, see [`panic_reports_failed`]).
/// The hook runs on the worker as the end of the item that panicked, so the
/// waits refused to that item are refused to it (see
/// [`WorkqueueBuilder::panic_handler`]). It also hears of a panic in the
/// destructor of a finished item (what a [`Work`](crate::Work)'s closure
/// captured), which the worker drops outside its pool's lock.
///
/// ```
/// cmwq::set_panic_hook(|wq, msg| eprintln!("[{wq}] {msg}"));
/// ```
pub fn set_panic_hook(hook: impl Fn(&str, &str) + Send + Sync + 'static) {
    let old = PANIC_HOOK.write().replace(Arc::new(hook));
    // The old hook's captures are the user's: dropped with the lock released
    // (a destructor may set a hook, or wait for work whose panic is reported).
    drop(old);
}

/// A: panics that could not be reported. `Relaxed`: a counter.
static REPORTS_FAILED: AtomicU64 = AtomicU64::new(0);

/// How many panics of work items could not be reported: the panic hook
/// panicked, or dropping the panic's payload did. The items still completed.
pub fn panic_reports_failed() -> u64 {
    REPORTS_FAILED.load(Ordering::Relaxed)
}

/// Reports a work item's panic. Nothing here may unwind into the worker: the
/// hook runs under `catch_unwind`, the default line is written with an error
/// that is ignored (`eprintln!` panics on a closed stderr), and the payload is
/// dropped under `catch_unwind` too. A panic that escapes any of these is
/// leaked rather than dropped, since dropping it could panic again.
/// The name of the workqueue whose item the calling worker runs.
pub(crate) fn current_wq_name() -> Option<String> {
    let addr = pool::current_wq_addr();
    registered()
        .into_iter()
        .find(|w| Arc::as_ptr(w) as usize == addr)
        .map(|w| w.name.clone())
}

impl WqInner {
    /// Reports a panic of one of this queue's items: to its own handler if it
    /// has one, else as [`report_panic`] does. Never unwinds.
    pub(crate) fn report_panic(&self, payload: Box<dyn Any + Send>) {
        trace::work_panicked(&self.name, &*payload);
        let Some(h) = &self.panic_handler else {
            return report_panic(&self.name, payload);
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (h.0)(payload)));
        if let Err(p) = r {
            REPORTS_FAILED.fetch_add(1, Ordering::Relaxed);
            std::mem::forget(p);
        }
    }
}

pub(crate) fn report_panic(wq: &str, payload: Box<dyn Any + Send>) {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into());
    let hook = PANIC_HOOK.read().clone();
    let reported = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &hook {
        Some(h) => h(wq, &msg),
        None => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "cmwq: a work item on workqueue {wq:?} panicked: {msg}"
            );
        }
    }));
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload)));
    for r in [reported, dropped] {
        if let Err(p) = r {
            REPORTS_FAILED.fetch_add(1, Ordering::Relaxed);
            std::mem::forget(p);
        }
    }
}

macro_rules! system_wq {
    ($(#[$m:meta])* $fn:ident, $name:literal, $b:expr) => {
        $(#[$m])*
        ///
        /// # Panics
        ///
        /// On first use, if its build fails: only the thread limit makes it
        /// fail (the watchdog cannot start). Build a queue of your own to get
        /// the error instead.
        pub fn $fn() -> &'static Workqueue {
            static WQ: OnceLock<Workqueue> = OnceLock::new();
            WQ.get_or_init(|| {
                let b: WorkqueueBuilder = $b(Workqueue::builder($name));
                b.build().expect("system workqueue")
            })
        }
    };
}

system_wq!(
    /// The kernel's `system_wq`: bound, normal priority.
    system, "events", |b| b
);
system_wq!(
    /// The kernel's `system_highpri_wq`: bound, high priority.
    system_highpri, "events_highpri", |b: WorkqueueBuilder| b.highpri()
);
system_wq!(
    /// The kernel's `system_long_wq`: bound, for items that run long.
    system_long, "events_long", |b| b
);
system_wq!(
    /// The kernel's `system_unbound_wq`: unbound, default scope.
    system_unbound, "events_unbound", |b: WorkqueueBuilder| b.unbound()
);

// ---- snapshot and control ----

/// The "Affinity Scopes" part of [`crate::snapshot()`]: the process's topology
/// cut with its default parameters.
pub(crate) fn topology_snap() -> crate::snapshot::TopologySnap {
    let topo = system_topology();
    let params = crate::params::params().ok();
    let default_scope = params.map_or(Scope::CacheShard, |p| p.affinity_scope);
    let size = params.map_or(crate::topology::DEFAULT_CACHE_SHARD_SIZE, |p| {
        p.cache_shard_size
    });
    let unbound_cpumask = params
        .and_then(|p| p.unbound_cpus.clone())
        .unwrap_or_else(|| topo.online().to_vec());
    let nodes = topo
        .nodes()
        .into_iter()
        .map(|id| crate::snapshot::NodeSnap {
            id,
            cpus: topo
                .online()
                .iter()
                .copied()
                .filter(|&c| topo.cpu_node(c) == id)
                .collect(),
        })
        .collect();
    let scopes = Scope::ALL
        .into_iter()
        .map(|scope| {
            let pt = topo.pods(scope, size);
            crate::snapshot::ScopeSnap {
                scope,
                pod_cpus: pt.pods,
                pod_node: pt.pod_node,
                cpu_pod: pt.cpu_pod,
            }
        })
        .collect();
    crate::snapshot::TopologySnap {
        summary: topo.summary(),
        online: topo.online().to_vec(),
        possible: topo.possible().to_vec(),
        usable: pool::usable_cpus(),
        unbound_cpumask,
        default_scope,
        cache_shard_size: size,
        nodes,
        scopes,
    }
}

/// The usable CPUs changed (`pool/hotplug.rs`): every live unbound
/// workqueue's pods are cut again from the CPUs usable now. Runs on a
/// thread of its own, with no lock held; each queue takes its own locks in
/// turn, as a `set_cpumask` would. A queue that could not follow (no thread
/// or pool for a new pod) keeps its pods and says so on stderr.
pub(crate) fn update_all_pods() {
    for wq in registered().into_iter().filter_map(borrow_of) {
        if let Err(e) = wq.inner.update_pods() {
            eprintln!(
                "cmwq: the pods of workqueue {:?} could not follow the usable CPUs {}: {e}; \
                 it keeps its pods until the CPUs change again",
                wq.inner.name,
                crate::topology::format_cpulist(&pool::usable_cpus())
            );
        }
    }
}

/// Live workqueues in creation order.
fn registered() -> Vec<Arc<WqInner>> {
    let r = REGISTRY.lock();
    r.iter().filter_map(|w| w.upgrade()).collect()
}

/// The per-workqueue part of [`crate::snapshot()`].
pub(crate) fn workqueue_snaps() -> Vec<crate::snapshot::WorkqueueSnap> {
    registered()
        .into_iter()
        .filter_map(borrow_of)
        .map(|wq| wq.snap())
        .collect()
}

/// Handles to the live workqueues named `name` (for the control endpoint's knobs).
#[cfg(feature = "control")]
pub(crate) fn find_by_name(name: &str) -> Vec<Workqueue> {
    registered()
        .into_iter()
        .filter(|w| w.name == name)
        .filter_map(borrow_of)
        .collect()
}

/// A borrowed view of a workqueue for the control endpoint and snapshots,
/// unless its last handle is gone (it is being destroyed).
///
/// The view is not a handle: the owner's last drop still destroys the queue
/// itself, after waiting for views to be returned (`wait_borrows`). The
/// owner's drop decrements `handles` then reads `borrows`; a borrower
/// increments `borrows` then reads `handles`. Both SeqCst, so at least one sees
/// the other: either the owner waits for the view, or the borrower sees no
/// handle and backs off.
fn borrow_of(inner: Arc<WqInner>) -> Option<Workqueue> {
    inner.borrows.fetch_add(1, Ordering::SeqCst);
    if inner.handles.load(Ordering::SeqCst) == 0 || inner.destroyed.load(Ordering::SeqCst) {
        inner.borrows.fetch_sub(1, Ordering::SeqCst);
        return None;
    }
    Some(Workqueue {
        inner,
        borrowed: true,
    })
}

impl Workqueue {
    fn snap(&self) -> crate::snapshot::WorkqueueSnap {
        let inner = &self.inner;
        let (mut cpu_pool, dfl_pool) = self.cpu_pools();
        if inner.ordered {
            // Every CPU's work goes to the one default pwq (as the kernel's
            // ordered queues point each CPU's pwq at it).
            let route = inner.pwqs().route_cpus.clone();
            for c in route {
                if let Some(slot) = cpu_pool.get_mut(c) {
                    *slot = dfl_pool;
                }
            }
        }
        let attrs = self.attrs();
        let kind = if inner.ordered {
            "ordered"
        } else if inner.unbound {
            "unbound"
        } else {
            "percpu"
        };
        let rescuer = inner.rescuer.as_ref().map(|r| {
            let tid = r.tid.load(Ordering::Relaxed);
            crate::snapshot::RescuerSnap {
                tid,
                cpus: if tid == 0 {
                    Vec::new()
                } else {
                    sched::affinity_of(tid).unwrap_or_default()
                },
            }
        });
        let pwqs = inner
            .pwq_list()
            .iter()
            .map(|r| r.pool.pwq_snap(r.id))
            .collect();
        crate::snapshot::WorkqueueSnap {
            id: inner.id,
            name: inner.name.clone(),
            flags: inner.flags.bits(),
            kind: kind.into(),
            unbound: inner.unbound,
            mem_reclaim: inner.rescuer.is_some(),
            custom_topology: inner.ctx.custom,
            cpu_pool,
            dfl_pool,
            min_active: inner.min_active(attrs.max_active),
            attrs,
            node_nr_active: self.node_nr_active(),
            node_max_active: self.node_max_active(),
            latency: self.latency(),
            rescuer,
            pwqs,
            stats: self.stats(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Work;
    use std::sync::atomic::AtomicUsize;

    /// The node budget is conserved: batches of cached credits go back, so an
    /// idle unbound workqueue holds no budget, and no item is left waiting.
    #[test]
    fn node_budget_returns_to_zero_when_idle() {
        for max in [1usize, 3, 8, 64, 1024] {
            let wq = Workqueue::builder("budget")
                .unbound()
                .affinity_scope(Scope::Cpu)
                .max_active(max)
                .build()
                .unwrap();
            let ran = Arc::new(AtomicUsize::new(0));
            let works: Vec<Work> = (0..200)
                .map(|_| {
                    let r = ran.clone();
                    Work::new(move || {
                        r.fetch_add(1, Ordering::SeqCst);
                    })
                })
                .collect();
            let mut queued = 0;
            for round in 0..20 {
                for (i, w) in works.iter().enumerate() {
                    let cpus = wq.inner.pwqs().route_cpus.clone();
                    let cpu = cpus[(i + round) % cpus.len()];
                    queued += usize::from(wq.queue_on(cpu, w).unwrap());
                }
                if round % 3 == 0 {
                    wq.flush();
                    assert_eq!(
                        wq.node_nr_active().iter().sum::<usize>(),
                        0,
                        "max_active {max}"
                    );
                }
            }
            wq.flush();
            assert_eq!(ran.load(Ordering::SeqCst), queued, "max_active {max}");
            assert!(queued >= 200 * 7, "every flush round re-queues everything");
            assert_eq!(
                wq.node_nr_active().iter().sum::<usize>(),
                0,
                "max_active {max}"
            );
        }
    }
}
