//! A worker's life: its loop, entering and leaving idle, running one item
//! (`worker_thread`, `worker_enter_idle`, `worker_leave_idle`,
//! `process_one_work` in the kernel), and what happens when a worker thread
//! dies or a guest from a partner pool helps out.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use std::collections::VecDeque;

use super::budget;
use super::kick::Locality;
use super::lane::{LANE_LIST_CAP, LazyNow};
use super::ring::Ring;
use super::{
    BLOCKED_INTENSIVE, CURRENT, DEBUG_KILL_WORKER, IDLE_TIMEOUT_MS, Item, Pool, PoolInner, Post,
    SHRINK_ABOVE, WORKER, WState, unlock_wake_hot,
};
use crate::engine::watchdog;
use crate::engine::work::WorkInner;
use crate::engine::workqueue::WqInner;
use crate::hist::ItemTimes;
use crate::priority::PoolPrio;
use crate::sched;
use crate::switches::{self, SwitchProbe};
use crate::sync::MutexGuard;
use crate::trace;

/// What the busy table lists for a worker that runs no item but drops what
/// its last item held (its closure's values, its queue): busy, so a wait in
/// a destructor counts as this worker blocking, and no item's address (an
/// item's is at least pointer-aligned), so no queue follows it here.
pub(super) const DROPPING: usize = 1;

/// Items a lent worker takes from a lagging per-CPU pool before it goes home to
/// look at its own lane (it is lent again if the lane still lags).
pub(crate) const GUEST_BATCH: usize = 16;

/// The list references of finished [`Work`](crate::Work) items a busy
/// worker holds back before it lets go of them all in one release (see
/// [`Held`]).
pub(super) const SPENT_BATCH: usize = 32;

/// What a worker holds from one item to the next: the queue of its last
/// item, and the list references of the `Work` items it finished and has
/// not let go of yet.
///
/// The queue is kept for the next item (one reference count operation per
/// change of queue, not per item). One the worker lets go of may be the
/// queue's last reference, whose drop runs the user's destructors (its
/// panic handler's captures): it goes with the lock released.
///
/// The list's reference to a `Work` may be its last (the user dropped every
/// handle while it was queued), and the last drop runs the user's
/// destructors, which must run with no cmwq lock held and with no item
/// taken by this worker (a destructor may wait for the pool's next item).
/// Finding out whether a reference is the last means dropping it, and a
/// release of its own per item (unlock, drop, relock) costs two locked
/// instructions, the busiest of the item's under `perf` (the unlock waits
/// for the stores of the item's bookkeeping). So a busy worker keeps the
/// references here, with the lock held, and lets go of them together, at
/// a point between two items as before: when [`SPENT_BATCH`] are held, and
/// when it leaves its busy section (its lane has no item for it, or it
/// yields its unit of the CPU budget), so an idle worker holds none. What
/// the user can see: a `Work` dropped while queued has its closure's values
/// dropped up to `SPENT_BATCH` items of its worker later, and never after
/// the worker went idle.
///
/// A guest or a rescuer, which runs a few items of a pool not its own,
/// holds none back (`room` 0): each of its items ends with its own release.
pub(super) struct Held {
    wq: Option<Arc<WqInner>>,
    spent: Vec<Arc<WorkInner>>,
    /// How many `spent` may hold.
    room: usize,
}

impl Held {
    /// A pool worker's: up to [`SPENT_BATCH`] references held back.
    fn worker() -> Held {
        Held {
            wq: None,
            spent: Vec::with_capacity(SPENT_BATCH),
            room: SPENT_BATCH,
        }
    }

    /// A guest's or a rescuer's: nothing held back.
    fn borrowed() -> Held {
        Held {
            wq: None,
            spent: Vec::new(),
            room: 0,
        }
    }

    /// Keeps `work`'s list reference back if there is room; else hands it back.
    #[inline]
    fn keep(&mut self, work: Arc<WorkInner>) -> Result<(), Arc<WorkInner>> {
        if self.spent.len() < self.room {
            self.spent.push(work);
            Ok(())
        } else {
            Err(work)
        }
    }
}

impl PoolInner {
    /// Puts worker `me` on its lane's idle stack (`worker_enter_idle`): the
    /// top, so the most recently idled worker is the next one woken.
    fn enter_idle(&mut self, me: usize) {
        self.workers[me].state = WState::Idle;
        let h = self.workers[me].lane;
        let l = &mut self.lanes[h];
        l.idle.push(me);
        if l.worklist.is_empty() && l.worklist.capacity() > SHRINK_ABOVE {
            // The lane drained after a peak: give the memory back.
            l.worklist = Ring::with_capacity(LANE_LIST_CAP);
        }
        let s = &mut self.workers[me].scheduled;
        if s.is_empty() && s.capacity() > SHRINK_ABOVE {
            // Its own list of items that waited for their running instance
            // on it, drained after a peak: the same. (Not empty when it
            // yields its unit of the CPU budget with items handed to it.)
            *s = VecDeque::new();
        }
    }

    /// Whether an idle worker parks with the idle timeout: where its end can
    /// cull it (the pool has too many workers) or must shrink lists that
    /// no item's path gives back (another lane's worklist, in a pool of
    /// several lanes). A one-lane pool that is not in excess parks its
    /// workers untimed: its worklist shrinks when its worker goes idle, a
    /// pwq's inactive list when the pwq does, a worker's `scheduled` list
    /// when that worker does.
    ///
    /// An untimed worker is looked at again when the pool comes to have
    /// too many: a worker that goes idle then parks timed itself, and a
    /// culled worker that leaves the pool still in excess wakes the next
    /// one ([`idle_to_recheck`](Self::idle_to_recheck)), which parks timed.
    /// So culling never comes early (each culled worker waited a whole
    /// timeout in its last park), and the excess goes one timeout at a time
    /// where several parked untimed.
    #[inline]
    fn idle_timed(&self) -> bool {
        self.lanes.len() > 1 || self.too_many_workers()
    }

    /// A culled worker leaves the pool still in excess: the idle worker to
    /// wake so that it parks again with the timeout (the top of the fullest
    /// idle stack), if any.
    fn idle_to_recheck(&self) -> Option<std::thread::Thread> {
        if !self.too_many_workers() {
            return None;
        }
        let l = self.lanes.iter().max_by_key(|l| l.idle.len())?;
        let &i = l.idle.last()?;
        self.workers[i].thread.clone()
    }

    /// Takes worker `me` off its idle stack (it was not picked by a kick).
    fn leave_idle(&mut self, me: usize) {
        let idle = &mut self.lanes[self.workers[me].lane].idle;
        if let Some(pos) = idle.iter().position(|&i| i == me) {
            idle.remove(pos);
        }
    }
}

impl Pool {
    /// A worker lent by a partner pool runs this lane's items while the
    /// lane lags or nobody serves it (and what its busy table hands it).
    /// Returns how many it ran.
    pub(crate) fn host_guest(&'static self) -> u64 {
        let mut g = self.lock();
        // The manager rule, for the host: a guest came because nobody here
        // was idle; start a worker of its own so the next items need no guest
        // (a pool whose workers could not be started would otherwise live on
        // guests, the watchdog never seeing it starve).
        if !g.may_start_working() && !g.manager_active {
            g = self.create_worker(g, 0);
        }
        // After GUEST_BATCH items home may have work: go and look; if this
        // lane still lags, it asks again.
        let (g, ran) = self.run_borrowed(
            g,
            WState::Guest,
            GUEST_BATCH,
            |g| {
                if !g.lanes[0].stealable(g.cap, &mut LazyNow::default()) {
                    return None;
                }
                g.lanes[0].stats.stolen += 1;
                Some(g.lanes[0].pop().expect("stealable lane has work"))
            },
            |_| {},
        );
        self.update_lendable(&g);
        ran as u64
    }

    /// Runs items on the calling thread, attached to this pool in state
    /// `state` (a guest or a rescuer: a worker slot, never counted in
    /// `nr_running`): first what the busy table hands its slot, then up to
    /// `batch` items from `next`; an item whose previous cycle runs on
    /// another worker of the pool goes to that worker. `started` sees each
    /// item before it runs. Returns with the slot given back, and how many ran.
    pub(super) fn run_borrowed<'a>(
        &'static self,
        mut g: MutexGuard<'a, PoolInner>,
        state: WState,
        batch: usize,
        mut next: impl FnMut(&mut PoolInner) -> Option<Item>,
        mut started: impl FnMut(&mut PoolInner),
    ) -> (MutexGuard<'a, PoolInner>, usize) {
        let idx = Self::attach_borrowed(&mut g, state);
        let guard = BorrowedExit { pool: self, idx };
        let in_item = switches::item_flag();
        let mut held = Held::borrowed();
        let mut ran = 0;
        loop {
            let item = if let Some(it) = g.take_scheduled(idx) {
                it
            } else if ran >= batch {
                break;
            } else if let Some(it) = next(&mut g) {
                it
            } else {
                break;
            };
            if let Some(other) = g.find_executing(&item.work).filter(|&o| o != idx) {
                g.hand_to(other, item);
                continue;
            }
            started(&mut g);
            g = process_borrowed(self, idx, g, item, &mut held, &in_item);
            ran += 1;
        }
        std::mem::forget(guard);
        Self::detach_borrowed(&mut g, idx);
        // The queue reference goes too, with the lock released: this
        // thread keeps nothing here.
        if let Some(wq) = held.wq.take() {
            drop(g);
            guarded_drop(wq);
            g = self.lock();
        }
        (g, ran)
    }
}

/// Where an adopted worker goes: the partner pool, its slot there, its lane.
pub(super) type Adoption = (&'static Pool, usize, usize);

/// A worker thread's life over the pools it serves: it starts in one, and
/// may be adopted by a partner pool of the same pod (see [`manage`]'s
/// adoption), taking its context-switch probe along.
///
/// [`manage`]: super::manage
pub(super) fn run_worker(pool: &'static Pool, me: usize, home: usize) {
    let mut next = worker_thread(pool, me, home, None);
    while let Some(((pool, me, home), probe)) = next.take() {
        crate::engine::threads::rename_current(&super::manage::worker_name(pool, me));
        next = worker_thread(pool, me, home, probe);
    }
}

/// A worker thread in one pool (`worker_thread`): set up, then wait idle for
/// work (`wait_for_work`), help a partner's lagging lane if lent
/// (`help_as_guest`), and run items while its lane has them (`run_busy`);
/// it returns when it leaves the pool: culled or let go (`None`), or
/// adopted by a partner pool (where to go next, and its probe).
fn worker_thread(
    pool: &'static Pool,
    me: usize,
    home: usize,
    carried: Option<SwitchProbe>,
) -> Option<(Adoption, Option<SwitchProbe>)> {
    WORKER.with(|w| w.set(Some((pool.id, me))));
    // Nice 0 keeps what the thread inherited (a process run under `nice` stays
    // niced) unless it inherited a real-time policy from its creator.
    let inherit = pool.attrs.prio == PoolPrio::Nice(0) && !sched::is_realtime();
    if !inherit && pool.attrs.prio.apply().is_err() {
        pool.prio_failed.fetch_add(1, Ordering::Relaxed);
    }
    // Before `exit` and the lock: a thread that unwinds drops what it held
    // back last, with no lock of cmwq's held.
    let mut held = Held::worker();
    let mut exit = WorkerExit {
        pool,
        me,
        busy: false,
        lent: false,
        cpu: 0,
    };
    trace::worker_created(pool.id, me);
    // Opened on this thread, before the lock: a syscall and a mapping. Once
    // tried (now, or after the item during which the pool was first seen
    // to block), never again: a refusal is not retried per item.
    let (mut probe_tried, probe) = match carried {
        Some(p) => (true, Some(p)),
        None => {
            let want = pool.probe_wanted_at_start();
            (want, want.then(SwitchProbe::open_current).flatten())
        }
    };
    // This thread's in-callback flag, which its slot shares (`worker_start`).
    let in_item = switches::item_flag();
    let mut g = worker_start(pool, me, home, probe, &in_item);
    // Went idle to let other pools have its unit of the CPU budget.
    let mut yielded = false;
    loop {
        let h = g.workers[me].lane;
        let work = if std::mem::take(&mut yielded) {
            false
        } else {
            let work;
            (g, work) = pool.work_or_sleeper(g, h);
            work
        };
        let go = work && (!pool.managed || g.budget_take(me, pool));
        if !go {
            match wait_for_work(pool, me, g) {
                Idle::Work(back) => g = back,
                Idle::Left => return None,
                Idle::Adopted(to, probe) => return Some((to, probe)),
            }
        }
        g.workers[me].state = WState::Running;
        // Looked at before it is taken: the usual answer, none, then writes
        // nothing.
        if g.workers[me].guest_for.is_some()
            && let Some(to) = g.workers[me].guest_for.take()
        {
            g = help_as_guest(pool, me, g, to, &mut exit);
        }
        let h = g.workers[me].lane;
        if !g.work_for(h) && g.workers[me].scheduled.is_empty() {
            continue;
        }
        // The manager rule: keep one idle worker in reserve.
        if pool.managed && !g.budget_take(me, pool) {
            // Woken, but another worker took the last unit: this pool is
            // queued for one; wait on the idle stack.
            continue;
        }
        if !g.may_start_working() && !g.manager_active {
            g = pool.create_worker(g, h);
        }
        if pool.managed {
            g.lanes[h].nr_running += 1;
            g.lanes[h].runner = me;
        }
        pool.update_lendable(&g);
        exit.cpu = g.lanes[h].cpu;
        watchdog::busy_enter(exit.cpu);
        exit.busy = true;
        (g, yielded) = run_busy(pool, me, h, g, &mut held, &mut probe_tried, &in_item);
        g.workers[me].last_start = None;
        if pool.managed {
            g.lanes[h].nr_running -= 1;
        }
        g.lanes[h].worker_left();
        watchdog::busy_exit(exit.cpu);
        exit.busy = false;
    }
}

/// The new worker's thread takes its slot: its thread handle and id, its
/// CPU and its probe, under the lock. Bound pools pin to their CPU (to
/// every usable CPU while disassociated); pod pools pin each worker to its
/// lane's CPU (re-homing moves it later), so a wakeup lands where it was
/// meant to. Under the lock, so a change of the usable CPUs (`hotplug`)
/// either sees this worker or is seen by it.
fn worker_start(
    pool: &'static Pool,
    me: usize,
    home: usize,
    probe: Option<SwitchProbe>,
    in_item: &Arc<AtomicBool>,
) -> MutexGuard<'static, PoolInner> {
    let mut g = pool.lock();
    g.workers[me].thread = Some(thread::current());
    g.workers[me].tid = sched::gettid();
    g.workers[me].item_flag = Some(in_item.clone());
    let target = pool.pin_target(&g, g.lanes[home].cpu);
    Pool::pin(0, &target);
    g.set_probe(me, probe);
    g.nr_starting -= 1;
    g.workers[me].state = WState::Running;
    g
}

/// How an idle wait ends.
enum Idle {
    /// Picked, or work found: the lock, to go on with.
    Work(MutexGuard<'static, PoolInner>),
    /// Left the pool: culled, or the pool was let go.
    Left,
    /// Adopted by a partner pool: left this one, goes there.
    Adopted(Adoption, Option<SwitchProbe>),
}

/// Worker `me` waits on its lane's idle stack until it is picked or finds
/// work (`worker_enter_idle`, park, `worker_leave_idle`), or until it leaves
/// the pool: idle beyond the cull rule, the pool let go (also when that
/// happened while this worker was busy), or adopted by a partner pool.
fn wait_for_work(pool: &'static Pool, me: usize, mut g: MutexGuard<'static, PoolInner>) -> Idle {
    let h = g.workers[me].lane;
    g.enter_idle(me);
    pool.update_lendable(&g);
    // On the idle stack first: a kick for this pool may pick it.
    let mut kick = g.budget_give(me);
    let mut timed_out = false;
    loop {
        // Looked at before it is taken, as `guest_for` above.
        let adopted = if g.workers[me].adopted_by.is_some() {
            g.workers[me].adopted_by.take()
        } else {
            None
        };
        let culled = timed_out && g.too_many_workers();
        if adopted.is_some() || culled || (g.dying && !g.has_work()) {
            if adopted.is_none() {
                trace::worker_culled(pool.id, me, g.dying);
            }
            g.leave_idle(me);
            g.workers[me].state = WState::Exited;
            g.workers[me].thread = None;
            let probe = g.workers[me].probe.take();
            g.nr_workers -= 1;
            pool.update_lendable(&g);
            // Still too many: the idle worker on top of the fullest stack
            // may be in an untimed park; it looks again and parks with the
            // timeout (see `PoolInner::idle_timed`).
            let next = culled.then(|| g.idle_to_recheck()).flatten();
            drop(g);
            if let Some(t) = next {
                t.unpark();
            }
            if kick {
                budget::kick_waiters();
            }
            if let Some(to) = adopted {
                return Idle::Adopted(to, probe);
            }
            // The mapping goes with the lock released.
            drop(probe);
            return Idle::Left;
        }
        let timed = g.idle_timed();
        drop(g);
        if std::mem::take(&mut kick) {
            budget::kick_waiters();
        }
        let waited = park_for_work(timed);
        g = pool.lock();
        if g.workers[me].adopted_by.is_some() {
            // Adopted by a partner pool (also marked woken): leave, at the
            // top of the loop.
            continue;
        }
        if g.workers[me].state == WState::Woken {
            // Picked for a lane (maybe re-homed onto it by the waker). The
            // usual end of a park, so it reads no clock: a picked worker
            // is not culled, and the lists shrink at a park that times out.
            let h = g.workers[me].lane;
            g.lanes[h].nr_woken -= 1;
            return Idle::Work(g);
        }
        timed_out = waited.is_some_and(|(t0, timeout)| t0.elapsed() >= timeout);
        if timed_out {
            // Idle a whole idle timeout: whatever list of the pool
            // a peak left big (another lane's, a pwq's) shrinks now.
            g.shrink_lists();
        }
        // Its probe only: this worker is on the idle stack, so it keeps the
        // lock (a kick may pick it, a partner adopt it, the moment it lets go).
        if (g.work_for(h) || g.took_over_sleeper(h)) && (!pool.managed || g.budget_take(me, pool)) {
            g.leave_idle(me);
            return Idle::Work(g);
        }
    }
}

/// An idle worker's park: with the idle timeout when `timed` (returns when
/// it began, and the timeout), else until it is unparked.
///
/// A park with a timeout arms a kernel timer and cancels it at the wakeup:
/// about 170 ns more per park than an untimed one on this machine (a
/// same-CPU ping-pong of two threads, 3.40 against 3.23 us per round trip),
/// and a worker of a pool with one item in flight parks once per item. The
/// timeout only matters where it can end in a cull or a shrink, so a pool
/// parks with it only where that can happen ([`PoolInner::idle_timed`]).
#[inline]
fn park_for_work(timed: bool) -> Option<(std::time::Instant, Duration)> {
    if !timed {
        thread::park();
        return None;
    }
    let timeout = Duration::from_millis(IDLE_TIMEOUT_MS.load(Ordering::Relaxed));
    let t0 = std::time::Instant::now();
    thread::park_timeout(timeout);
    Some((t0, timeout))
}

/// Lent to a lagging per-CPU pool `to` of the pod: help there, then come
/// back; unless work arrived at home meanwhile, which comes first. A guest
/// holds a unit of the budget there; without one, the pool it was lent to
/// waits for one.
fn help_as_guest(
    pool: &'static Pool,
    me: usize,
    mut g: MutexGuard<'static, PoolInner>,
    to: &'static Pool,
    exit: &mut WorkerExit,
) -> MutexGuard<'static, PoolInner> {
    let h = g.workers[me].lane;
    if !g.work_for(h) && g.budget_take(me, to) {
        g.lanes[h].nr_lent += 1;
        g.workers[me].lent = true;
        exit.cpu = g.lanes[h].cpu;
        pool.update_lendable(&g);
        drop(g);
        exit.lent = true;
        watchdog::busy_enter(exit.cpu);
        let ran = to.host_guest();
        watchdog::busy_exit(exit.cpu);
        exit.lent = false;
        g = pool.lock();
        if g.workers[me].blocked != 0 {
            // Seen asleep over there and not seen awake since: counts again
            // (in `nr_lent`) before it leaves it.
            g.mark_in(me, u8::MAX, pool.managed);
        }
        g.lanes[h].nr_lent -= 1;
        g.workers[me].lent = false;
        g.lanes[h].stats.stole += ran;
    }
    g
}

/// The busy section: worker `me` runs what the busy table hands it and the
/// items of its lane `h` (or a lagging lane's, stolen) until none is left.
/// Returns whether it stopped to give its unit of the CPU budget to another
/// pool.
#[inline]
fn run_busy(
    pool: &'static Pool,
    me: usize,
    h: usize,
    mut g: MutexGuard<'static, PoolInner>,
    held: &mut Held,
    probe_tried: &mut bool,
    in_item: &AtomicBool,
) -> (MutexGuard<'static, PoolInner>, bool) {
    let mut items = 0u32;
    loop {
        let item = if let Some(it) = g.take_scheduled(me) {
            it
        } else if let Some(it) = g.next_item(h) {
            it
        } else {
            // An item queued while the held references go is found by the
            // worker loop's next look, as one queued after the busy section.
            return (release_spent(pool, me, g, held), false);
        };
        // A one-off job runs once: no other instance can be running
        // (its cell is reused only after the busy table let go of it). With
        // no busy-table entry in the pool (this worker's is clear between
        // its items), there is nothing to look for: asked first.
        if g.nr_executing > 0
            && !item.work.once()
            && let Some(other) = g.find_executing(&item.work).filter(|&o| o != me)
        {
            // Non-reentrancy inside the pool: the item waits for its running instance.
            g.hand_to(other, item);
            continue;
        }
        g = process_one_work(pool, me, g, item, held, true, in_item);
        if !*probe_tried && pool.probe_wanted() {
            // The pool's items were seen to sleep: this worker reads its
            // switch records from its next item on (a worker may stay
            // busy for a long time; the end of its busy spell is too late).
            *probe_tried = true;
            drop(g);
            let probe = SwitchProbe::open_current();
            g = pool.lock();
            g.set_probe(me, probe);
        }
        items += 1;
        if budget::on() && g.budget_yield(me, items, pool) {
            return (release_spent(pool, me, g, held), true);
        }
    }
}

/// Puts the pool in order if its worker thread unwinds: a panic outside every
/// `catch_unwind` (a bug in the engine) must not leave a slot that counts as
/// running, an item whose cycle never ends, or a pool with nobody to run it.
struct WorkerExit {
    pool: &'static Pool,
    me: usize,
    /// Inside the busy section: counted in `nr_running` unless blocked, and
    /// in the watchdog's `BUSY`.
    busy: bool,
    /// Away as a guest: counted in its lane's `nr_lent` and in `BUSY`.
    lent: bool,
    /// The CPU it counts under in `BUSY` while busy or lent (its lane's when
    /// it entered; the watchdog's gate keeps a word per CPU).
    cpu: usize,
}

impl Drop for WorkerExit {
    fn drop(&mut self) {
        if thread::panicking() {
            self.pool
                .worker_died(self.me, self.busy, self.lent, self.cpu);
        }
    }
}

/// The same for a thread attached to a pool from outside (a rescuer, a
/// guest): its slot there is given up, its item completes as panicked.
struct BorrowedExit {
    pool: &'static Pool,
    idx: usize,
}

impl Drop for BorrowedExit {
    fn drop(&mut self) {
        if thread::panicking() {
            let mut g = self.pool.lock();
            let (unfinished, post) = self.pool.abandon_slot(&mut g, self.idx);
            Pool::detach_borrowed(&mut g, self.idx);
            self.pool.update_lendable(&g);
            drop(g);
            if let Some(work) = unfinished {
                work.finish_cycle();
            }
            post.run(self.pool);
        }
    }
}

impl Pool {
    /// A worker thread died (see [`WorkerExit`]). Its item, if it had one,
    /// completes as panicked (flushers and `cancel_sync` are released), its
    /// `scheduled` items go back on their lanes, it leaves every count, and a
    /// worker is woken or started for what waits. Counted in `workers_lost`.
    fn worker_died(&'static self, me: usize, busy: bool, lent: bool, cpu: usize) {
        self.workers_lost.fetch_add(1, Ordering::Relaxed);
        let mut g = self.lock();
        let h = g.workers[me].lane;
        if lent {
            if !self.managed || g.workers[me].blocked == 0 {
                g.lanes[h].nr_lent -= 1;
            }
            g.workers[me].lent = false;
            g.workers[me].blocked = 0;
            watchdog::busy_exit(cpu);
        }
        match g.workers[me].state {
            WState::Idle => g.leave_idle(me),
            WState::Woken => g.lanes[h].nr_woken -= 1,
            WState::Starting => g.nr_starting -= 1,
            _ => {}
        }
        // A unit of the CPU budget goes back; the watchdog kicks waiters.
        g.budget_lend(me);
        g.workers[me].budget_lent = false;
        if busy {
            if self.managed && g.workers[me].blocked == 0 {
                g.lanes[h].nr_running -= 1;
            }
            g.lanes[h].worker_left();
            watchdog::busy_exit(cpu);
        }
        let (unfinished, mut post) = self.abandon_slot(&mut g, me);
        let w = &mut g.workers[me];
        w.state = WState::Exited;
        w.thread = None;
        w.tid = 0;
        w.item_flag = None;
        w.blocked = 0;
        let probe = w.probe.take();
        g.nr_workers -= 1;
        if post.wake.is_none() {
            post.wake = g.kick(h);
        }
        if post.wake.is_none() && g.need_more_worker(g.cap) && !g.manager_active {
            g = self.create_worker(g, h);
        }
        self.update_lendable(&g);
        // One fewer busy worker may leave the pool in excess while its idle
        // workers park untimed: one looks again (see `idle_timed`).
        let recheck = g.idle_to_recheck();
        drop(g);
        if let Some(t) = recheck {
            t.unpark();
        }
        drop(probe);
        if let Some(work) = unfinished {
            work.finish_cycle();
        }
        post.run(self);
    }
}

impl Pool {
    /// Gives up what slot `idx` held: its current item completes as panicked
    /// (its pwq's counts, flushers, the item's cycle once the caller calls
    /// `finish_cycle` on what is returned), and its `scheduled` items go back
    /// on their lanes, with a worker kicked for them.
    fn abandon_slot(&self, g: &mut PoolInner, idx: usize) -> (Option<Arc<WorkInner>>, Post) {
        let mut post = Post::default();
        let unfinished = ORPHAN.with(|o| o.take());
        if !matches!(std::mem::take(&mut g.workers[idx].current), 0 | DROPPING) {
            g.nr_executing -= 1;
            let slot = g.workers[idx].current_pwq;
            let color = g.workers[idx].current_color;
            let st = &mut g.pwqs[slot as usize].stats;
            st.completed += 1;
            st.panics += 1;
            self.dec_in_flight(g, slot, color, true, &mut post);
        }
        let mut hint = None;
        let handed = std::mem::take(&mut g.workers[idx].scheduled);
        g.nr_scheduled -= handed.len();
        for it in handed {
            hint = Some(it.lane());
            g.push_active(it);
        }
        if let Some(h) = hint {
            post.wake = g.kick(h);
        }
        (unfinished, post)
    }
}

/// Drops `v` with no lock of cmwq's held; a panic in its destructor is
/// reported (to the process-wide hook), not propagated into the worker.
#[inline]
fn guarded_drop<T>(v: T) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(v))) {
        report_drop_panic(payload);
    }
}

#[cold]
fn report_drop_panic(payload: Box<dyn std::any::Any + Send>) {
    crate::engine::workqueue::report_panic("(a finished item's destructor)", payload);
}

thread_local! {
    /// The item of a thread that unwound while it held one (see
    /// [`Running`]), for the exit path ([`Pool::abandon_slot`], on the same
    /// thread) to end its cycle. A thread-local, not a pool field: the
    /// guard may drop while the thread holds the pool's lock.
    static ORPHAN: std::cell::RefCell<Option<Arc<WorkInner>>> =
        const { std::cell::RefCell::new(None) };
}

/// The item a worker runs, held by the worker itself from the moment the
/// busy table lists it until its cycle has ended: the table lists only its
/// address, which saves a reference count's increment and decrement (two
/// locked instructions) per item, and the address cannot be reused while it
/// is listed. If the thread unwinds meanwhile (a bug in the engine), the
/// guard leaves the item in [`ORPHAN`], where the exit path finds it to end
/// its cycle.
struct Running {
    work: Option<Arc<WorkInner>>,
}

impl Running {
    fn work(&self) -> &Arc<WorkInner> {
        self.work.as_ref().expect("held while running")
    }

    /// The item back, its cycle ended.
    fn disarm(mut self) -> Arc<WorkInner> {
        let work = self.work.take().expect("held while running");
        // Nothing is left for the destructor to do: skip its call (once per
        // item).
        std::mem::forget(self);
        work
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Only an unwinding thread gets here with the item (see `disarm`).
        // No lock: the thread may hold its pool's.
        if let Some(work) = self.work.take() {
            ORPHAN.with(|o| *o.borrow_mut() = Some(work));
        }
    }
}

/// Runs one item on worker `me` (a rescuer when `counted` is false: it never
/// counts in `nr_running`): the busy table lists it and a worker is kicked
/// for the rest of the lane, it runs with the lock released, its accounting
/// ends under the lock, and what it held goes in the release tail
/// ([`release_item`]).
///
/// Inlined into the worker loop (`run_busy`, where every item of a backlog
/// passes): the call's entry and exit, with seven arguments and the state
/// they keep live, cost about 50 instructions per item. A guest or a
/// rescuer goes through one out-of-line copy ([`process_borrowed`]).
#[inline(always)]
fn process_one_work<'a>(
    pool: &'static Pool,
    me: usize,
    mut g: MutexGuard<'a, PoolInner>,
    item: Item,
    held: &mut Held,
    counted: bool,
    in_item: &AtomicBool,
) -> MutexGuard<'a, PoolInner> {
    let (slot, color, queued_lane) = (item.pwq(), item.color(), item.lane());
    // One borrow of each slot the item touches: every index is checked once.
    let inner = &mut *g;
    let p = &mut inner.pwqs[slot as usize];
    let w = &mut inner.workers[me];
    // The queue of the last item, kept (see `Held`); one let go of goes at
    // the end, with the lock released.
    // Looked at in place: the same queue as the last item's (a backlog) is
    // neither moved out nor stored back.
    let mut stale = None;
    let cur = p.wq.as_ref().expect("live pwq");
    if !held.wq.as_ref().is_some_and(|c| Arc::ptr_eq(c, cur)) {
        stale = held.wq.replace(cur.clone());
    }
    let wq = held.wq.as_ref().expect("set just above");
    p.stats.started += 1;
    wq.bound_leave();
    if std::mem::take(&mut w.repatriated) {
        p.stats.repatriated += 1;
    }
    let addr = crate::engine::work::addr(&item.work);
    w.current = addr;
    inner.nr_executing += 1;
    let running = Running {
        work: Some(item.work),
    };
    w.current_pwq = slot;
    w.current_color = color;
    w.seq += 1;
    w.label = running.work().func.label();
    inner.lockup.started += 1;
    let lane = w.lane;
    let work = running.work();
    // Read before PENDING clears: a queue after that stamps the next cycle.
    let stamp = if wq.latency {
        work.queued_at.load(Ordering::Relaxed)
    } else {
        0
    };
    let mut times = ItemTimes::queued_at(stamp);
    // A one-off job is never queued again, so nothing reads its PENDING bit.
    if !work.once() {
        work.clear_pending();
    }
    let managed = pool.managed && counted;
    if wq.cpu_intensive {
        g.mark_out(me, BLOCKED_INTENSIVE, managed);
    }
    let (hint, started_at, lend) = if counted && matches!(g.locality(), Locality::Single) {
        // A bound pool or a one-CPU pod never times a start, and nothing
        // reads its lane's start count: only the lagging test does, which
        // only pools with another CPU to spread to ask.
        (lane, None, None)
    } else if counted {
        let (timed, lend) = g.should_time(lane, g.cap);
        let prev = g.workers[me].last_start;
        let at = g.lanes[lane].item_started(timed, prev);
        g.workers[me].last_start = at;
        (lane, at, lend)
    } else {
        (queued_lane, None, None)
    };
    // Chain execution: wake another worker if work still waits and nobody
    // runs it, or if this lane lags and another CPU of the pod is free. In
    // a pool whose items sleep, one waits on standby behind this item
    // (`PoolInner::standby`). A timed start's clock read is the kick's too.
    let mut now = started_at.map_or_else(LazyNow::default, LazyNow::at);
    let wake = g.kick_at(hint, &mut now, lend).or_else(|| {
        (counted && pool.blocks.load(Ordering::Relaxed))
            .then(|| g.standby(hint))
            .flatten()
    });
    unlock_wake_hot(pool, g, wake);
    times.start();
    let wq_addr = Arc::as_ptr(wq) as usize;
    CURRENT.with(|c| c.set((wq_addr, addr)));
    // Read by a probe or by the `/proc` sampler: a sleep between these two
    // is the item's; one outside is cmwq's own (a wait for a lock).
    in_item.store(true, Ordering::Relaxed);
    let res = catch_unwind(AssertUnwindSafe(|| work.func.run()));
    in_item.store(false, Ordering::Relaxed);
    times.end();
    // A panic ends a cycle that someone may await (a `Work`'s: one-off jobs
    // catch their own). The handlers run as part of the item: what the item
    // may not wait for (itself, its queue), they may not either.
    let (panicked, awaited) = match res {
        Ok(awaited) => (false, awaited),
        Err(payload) => {
            wq.report_panic(payload);
            (true, true)
        }
    };
    CURRENT.with(|c| c.set((0, 0)));
    // The test hook exists only with the `failure-injection` feature: no
    // load per item in a build without it.
    if cfg!(feature = "failure-injection")
        && DEBUG_KILL_WORKER.load(Ordering::Relaxed)
        && DEBUG_KILL_WORKER.swap(false, Ordering::Relaxed)
    {
        panic!("cmwq: test hook: this worker dies with its item unfinished");
    }
    let mut g = pool.lock();
    // One borrow of each slot again, as at the start.
    let inner = &mut *g;
    let p = &mut inner.pwqs[slot as usize];
    p.stats.completed += 1;
    p.stats.panics += u64::from(panicked);
    p.lat.record(&times);
    inner.lanes[queued_lane].progress += 1;
    let w = &mut inner.workers[me];
    w.current = 0;
    inner.nr_executing -= 1;
    if w.blocked != 0 {
        g.mark_in(me, u8::MAX, managed);
    }
    // The common end (a backlog of the same pwq) inlined; the rest out of
    // line. Only that one fills a `Post`: the common end makes none (its
    // five empty fields were stores on every item).
    let mut post: Option<Post> = None;
    let pending = !g.dec_in_flight_quiet(slot, color)
        && pool.dec_in_flight(&mut g, slot, color, true, post.insert(Post::default()));
    debug_assert_eq!(
        pending,
        post.as_ref().is_some_and(Post::pending),
        "dec_in_flight's answer is post's"
    );
    if awaited {
        running.work().finish_cycle();
    }
    let work = running.disarm();
    let g = release_item(pool, me, g, &mut post, pending, work, stale, managed, held);
    // Never filled, or emptied by `release_item` (it runs what it holds):
    // no field to look at again in a destructor. By reference, not moved
    // into the call: the move copied the whole `Post` per item, a wide load
    // of what narrower stores had just written (a stall the sampler showed
    // at the call).
    std::mem::forget(post);
    g
}

/// [`process_one_work`] for a thread attached from outside (a guest, a
/// rescuer: never counted), out of line: one copy for the paths that run a
/// few items of a pool not their own.
#[inline(never)]
fn process_borrowed<'a>(
    pool: &'static Pool,
    idx: usize,
    g: MutexGuard<'a, PoolInner>,
    item: Item,
    held: &mut Held,
    in_item: &AtomicBool,
) -> MutexGuard<'a, PoolInner> {
    process_one_work(pool, idx, g, item, held, false, in_item)
}

/// The release tail of [`process_one_work`]: what the item held goes with
/// the lock released.
///
/// The item may be gone but for this reference, and a `Work`'s closure
/// holds the user's values: their destructors may call into cmwq (queue
/// on this pool, drop a workqueue, wait), so they run with the lock
/// released, and before this thread takes another item (a wait on that
/// item would wait for this very thread). Meanwhile the busy table lists
/// the item again (it is alive until the drop), so a wait there counts as
/// this worker blocking (`blocking`, the sampler) and another worker
/// takes what the pool has. A one-off job's cell holds nothing of the
/// user's once it ran (its closure was taken, its result and waker went
/// to the handle or were dropped): it needs none of this.
///
/// A busy worker's `Work` references wait in [`Held`] while it has room
/// and nothing else needs the lock released; a release lets go of them all.
/// What `post` holds (`pending`: anything) runs with the lock released;
/// `post` is left empty or `None`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn release_item<'a>(
    pool: &'static Pool,
    me: usize,
    mut g: MutexGuard<'a, PoolInner>,
    post: &mut Option<Post>,
    pending: bool,
    mut work: Arc<WorkInner>,
    stale: Option<Arc<WqInner>>,
    managed: bool,
    held: &mut Held,
) -> MutexGuard<'a, PoolInner> {
    let once = work.once();
    if !pending && stale.is_none() {
        if once {
            // The cell holds nothing of the user's: its reference goes here.
            return g;
        }
        match held.keep(work) {
            Ok(()) => return g,
            Err(back) => work = back,
        }
    }
    let release = !once || stale.is_some();
    if release {
        // Busy while a destructor may run, but under no item's address: the
        // item is done with and `flush` has returned for it, so a queue of it
        // now (`queue_on` another CPU) must not follow it to this worker as
        // if it still ran, and a worker that dies here left nothing unfinished.
        g.workers[me].current = DROPPING;
    }
    drop(g);
    // Every deferred action runs, `died` included: an ordered queue's retired
    // pwq that drains here must unplug the next generation, or it waits forever.
    if pending && let Some(p) = post.take() {
        p.run(pool);
    }
    if release {
        guarded_drop(work);
        guarded_drop(stale);
        held.spent.drain(..).for_each(guarded_drop);
        return dropped(pool, me, managed);
    }
    drop(work);
    pool.lock()
}

/// Back under the lock after dropping what items held (busy as
/// `DROPPING`): no longer busy, and counted again if the watchdog counted
/// a destructor as the item's (a sleep sampled, a CPU hog marked).
fn dropped(pool: &'static Pool, me: usize, managed: bool) -> MutexGuard<'static, PoolInner> {
    let mut g = pool.lock();
    g.workers[me].current = 0;
    if g.workers[me].blocked != 0 {
        g.mark_in(me, u8::MAX, managed);
    }
    g
}

/// A busy worker leaves its busy section: it lets go of the `Work`
/// references it held back (see [`Held`]), with the lock released and
/// busy under no item's address, as [`release_item`] does.
fn release_spent(
    pool: &'static Pool,
    me: usize,
    mut g: MutexGuard<'static, PoolInner>,
    held: &mut Held,
) -> MutexGuard<'static, PoolInner> {
    if held.spent.is_empty() {
        return g;
    }
    g.workers[me].current = DROPPING;
    drop(g);
    held.spent.drain(..).for_each(guarded_drop);
    dropped(pool, me, pool.managed)
}
