//! `struct work_struct`, its carriers, and the work calls of the C API
//! (`queue_work_on`, `flush_work`, `cancel_work_sync`, `disable_work`, ...).
//! The protocol is described in the crate docs; the rules it keeps:
//!
//! - a carrier is returned only when its cycles and users are both zero, and
//!   both change only under its lock, so nobody can use a carrier that is on
//!   a free list or lent to another item (`owner` is checked under the lock);
//! - once a queue call has handed the item to the engine, or a sync call has
//!   waited, nothing touches the `work_struct` again: its callback may free
//!   it at any moment. Returning a carrier touches only the carrier, so a
//!   `work_struct` may keep a stale pointer, which every use checks;
//! - the `work_struct`'s lock bit is held only around its disable depth and
//!   the lending of a carrier. A disable applied while a carrier is lent is
//!   also applied to the carrier's engine item (`edis`), whose state word
//!   refuses a racing queue atomically; a carrier undoes those when it
//!   goes back to a free list.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use cmwq::DelayedWork;

use crate::rcu::{self, RcuHead};
use crate::tsan;
use crate::wq::CWq;

/// The C function a work item runs.
pub(crate) type WorkFunc = unsafe extern "C" fn(*mut WorkStruct);

/// `struct work_struct` as the header lays it out. `INIT_WORK` writes zeros
/// to `data` and `carrier` and the function to `func`.
#[repr(C)]
pub struct WorkStruct {
    /// Bit 0: the lock bit; bits 16 and up: the disable depth.
    data: AtomicUsize,
    /// The carrier lent to this item, or a stale pointer (checked on use).
    carrier: AtomicPtr<Carrier>,
    /// The callback (`work_func_t`).
    func: AtomicUsize,
}

impl WorkStruct {
    /// An idle item that runs `func` (what `INIT_WORK` makes).
    pub(crate) fn new(func: WorkFunc) -> WorkStruct {
        WorkStruct {
            data: AtomicUsize::new(0),
            carrier: AtomicPtr::new(std::ptr::null_mut()),
            func: AtomicUsize::new(func as usize),
        }
    }
}

/// `struct delayed_work`: a `work_struct` first, as in the kernel.
#[repr(C)]
pub struct DelayedWorkStruct {
    pub(crate) work: WorkStruct,
}

const LOCK: usize = 1;
const DISABLE_ONE: usize = 1 << 16;

/// The lock bit of a `work_struct`, held for as long as the guard lives.
struct WsLock<'a>(&'a WorkStruct);

impl<'a> WsLock<'a> {
    fn new(ws: &'a WorkStruct) -> WsLock<'a> {
        let mut spins = 0u32;
        loop {
            let cur = ws.data.load(Ordering::Relaxed);
            if cur & LOCK == 0
                && ws
                    .data
                    .compare_exchange_weak(cur, cur | LOCK, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return WsLock(ws);
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    fn disabled(&self) -> bool {
        self.0.data.load(Ordering::Relaxed) >= DISABLE_ONE
    }
}

impl Drop for WsLock<'_> {
    fn drop(&mut self) {
        self.0.data.fetch_and(!LOCK, Ordering::Release);
    }
}

/// Counts of a carrier, under its lock.
struct CState {
    /// Callers inside a call on this carrier.
    users: u32,
    /// Queue cycles the engine holds (pending or running). Signed: a
    /// callback may end its cycle before the queueing caller counts it.
    cycles: i64,
    /// Engine-level disables applied for the owner's `disable_work`s.
    edis: u32,
    /// `queue_rcu_work`'s grace period: 0 none; 1 the carrier's RCU
    /// callback is outstanding (it holds a user); 2 outstanding, and a later
    /// `queue_rcu_work` wants a grace period of its own (see [`rcu_ended`]).
    gp: u8,
}

/// What the engine queues for a C work item while it is busy.
pub(crate) struct Carrier {
    st: Mutex<CState>,
    /// The `work_struct` this carrier is lent to (0: on a free list).
    /// Written under `st`.
    owner: AtomicUsize,
    /// Free-list link, written under the free list's lock.
    next: AtomicPtr<Carrier>,
    /// The ordered queue the last queueing went to ([`CWq::order_point`]),
    /// 0 for any other: where the callback hands over to the queue's next.
    order: AtomicUsize,
    /// The C function the carrier last ran or was queued for: what a lockup
    /// report names it by (read from the carrier, never from the
    /// `work_struct`, which may be freed by then).
    func: AtomicUsize,
    /// The `CWq` the last queueing went to (what `print_worker_info` names).
    wq: AtomicUsize,
    /// What `queue_rcu_work` hands to `call_rcu`: the carrier's own, so the
    /// user's `rcu_work` may be freed once it is idle, as any item.
    rcu: UnsafeCell<RcuHead>,
    dw: OnceLock<DelayedWork>,
}

// SAFETY: `rcu` is written only by the RCU library, between `call_rcu`
// and the callback, and `call_rcu` is issued for a carrier at most once at
// a time (`CState::gp`); every other field is a lock or an atomic.
unsafe impl Sync for Carrier {}

impl Carrier {
    fn dw(&self) -> &DelayedWork {
        self.dw.get().expect("set when the carrier is made")
    }

    fn addr(&self) -> *const c_void {
        self as *const Carrier as *const c_void
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CState> {
        crate::lock(&self.st)
    }

    /// The worker's end of a cycle: touches only the carrier.
    fn end_cycle(&'static self) {
        self.settle(0, -1);
    }

    /// Changes the counts; returns the carrier to a free list when both are
    /// zero. Never touches the `work_struct`.
    fn settle(&'static self, users: i32, cycles: i64) {
        let mut g = self.lock();
        // The carrier's lock orders us after every callback that ended on it.
        tsan::acquire(self.addr());
        g.users = g.users.wrapping_add_signed(users);
        g.cycles += cycles;
        if g.users == 0 && g.cycles == 0 {
            self.owner.store(0, Ordering::Release);
            for _ in 0..std::mem::take(&mut g.edis) {
                self.dw().enable();
            }
            drop(g);
            free_list_push(self);
        }
    }

    /// A caller is done with the carrier; its cycles changed by `delta`.
    fn put(&'static self, delta: i64) {
        self.settle(-1, delta);
    }
}

thread_local! {
    static CURRENT: Cell<*mut WorkStruct> = const { Cell::new(std::ptr::null_mut()) };
    /// The `CWq` whose item the calling worker runs (0: none).
    static CURRENT_WQ: Cell<usize> = const { Cell::new(0) };
}

/// The workqueue whose C item the calling thread runs, if it runs one.
pub(crate) fn current_wq() -> Option<&'static CWq> {
    let p = CURRENT_WQ.with(Cell::get) as *const CWq;
    // SAFETY: set by `run` for the length of a callback, during which the
    // queue cannot be destroyed (destroy_workqueue drains it first).
    unsafe { p.as_ref() }
}

/// The C function the calling worker runs, if it runs one.
pub(crate) fn current_func() -> Option<usize> {
    CURRENT_FN.with(Cell::get)
}

thread_local! {
    static CURRENT_FN: Cell<Option<usize>> = const { Cell::new(None) };
}

/// What a carrier's engine item runs.
fn run(c: &'static Carrier) {
    let ws = c.owner.load(Ordering::Acquire) as *mut WorkStruct;
    tsan::acquire(c.addr());
    let order = c.order.load(Ordering::Relaxed) as *const c_void;
    if !order.is_null() {
        tsan::acquire(order);
    }
    if !ws.is_null() {
        // SAFETY: a carrier with an open cycle is lent to `ws`, and the user
        // keeps a pending item alive until its callback has started.
        let f = unsafe { (*ws).func.load(Ordering::Relaxed) };
        if f == 0 {
            eprintln!("cmwq: work item {ws:p} has no function (INIT_WORK missing?)");
        } else {
            c.func.store(f, Ordering::Relaxed);
            let prev = CURRENT.with(|cur| cur.replace(ws));
            let prev_wq = CURRENT_WQ.with(|w| w.replace(c.wq.load(Ordering::Relaxed)));
            let prev_fn = CURRENT_FN.with(|w| w.replace(Some(f)));
            // SAFETY: `func` was written by INIT_WORK from a `work_func_t`,
            // and it is called with the item it was set on, as the kernel does.
            unsafe {
                let f: WorkFunc = std::mem::transmute::<usize, WorkFunc>(f);
                f(ws);
            }
            CURRENT.with(|cur| cur.set(prev));
            CURRENT_WQ.with(|w| w.set(prev_wq));
            CURRENT_FN.with(|w| w.set(prev_fn));
            crate::debug::item_done();
            // A callback that cleared PF_WQ_WORKER is a worker again for the
            // next item (the kernel's sample restores it itself).
            crate::kcompat::worker_item_done();
        }
    }
    // From here on `ws` may be freed: only the carrier is touched.
    if !order.is_null() {
        tsan::release(order);
    }
    tsan::release(c.addr());
    tsan::release(tsan::any_callback());
    c.end_cycle();
}

// ---- free lists ----

#[repr(align(64))]
struct FreeList(Mutex<usize>);

fn lists() -> &'static [FreeList] {
    static L: OnceLock<Box<[FreeList]>> = OnceLock::new();
    L.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize;
        (0..n).map(|_| FreeList(Mutex::new(0))).collect()
    })
}

fn this_list() -> usize {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    cpu.max(0) as usize % lists().len()
}

fn free_list_push(c: &'static Carrier) {
    push_on(&lists()[this_list()], c);
}

fn push_on(l: &FreeList, c: &'static Carrier) {
    let mut head = crate::lock(&l.0);
    c.next.store(*head as *mut Carrier, Ordering::Relaxed);
    *head = c as *const Carrier as usize;
}

fn pop(l: &FreeList) -> Option<&'static Carrier> {
    let mut head = crate::lock(&l.0);
    if *head == 0 {
        return None;
    }
    // SAFETY: only leaked (never freed) carriers are pushed on a list.
    let c: &'static Carrier = unsafe { &*(*head as *const Carrier) };
    *head = c.next.load(Ordering::Relaxed) as usize;
    Some(c)
}

/// A free carrier: this CPU's list, then the others', then a new one.
fn take_carrier() -> &'static Carrier {
    let ls = lists();
    let me = this_list();
    for i in 0..ls.len() {
        let l = &ls[(me + i) % ls.len()];
        if let Some(c) = pop(l) {
            // A carrier goes back on its list from inside its own callback
            // (`run`'s `end_cycle`), while its engine item still runs: lent
            // now, a queue of it would follow that run to its worker's CPU
            // (the engine's non-reentrancy), not go where it was asked.
            if c.dw().is_running() {
                push_on(l, c);
                continue;
            }
            return c;
        }
    }
    let c: &'static Carrier = Box::leak(Box::new(Carrier {
        st: Mutex::new(CState {
            users: 0,
            cycles: 0,
            edis: 0,
            gp: 0,
        }),
        owner: AtomicUsize::new(0),
        next: AtomicPtr::new(std::ptr::null_mut()),
        order: AtomicUsize::new(0),
        func: AtomicUsize::new(0),
        wq: AtomicUsize::new(0),
        rcu: UnsafeCell::new(RcuHead::default()),
        dw: OnceLock::new(),
    }));
    // Carriers are never freed, so neither is their label.
    let label: &'static (dyn Fn() -> String + Send + Sync) = Box::leak(Box::new(move || {
        crate::symbols::name(c.func.load(Ordering::Relaxed))
    }));
    let _ = c.dw.set(DelayedWork::with_label(move || run(c), label));
    c
}

// ---- lending, under the work_struct's lock ----

/// The carrier lent to `ws`, with one more user; None when it has none.
fn find(l: &WsLock<'_>) -> Option<&'static Carrier> {
    let ws = l.0;
    let p = ws.carrier.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: carriers are never freed, so even a stale pointer is valid;
    // whether it is still ours is checked under its lock.
    let c: &'static Carrier = unsafe { &*p };
    let mut g = c.lock();
    if c.owner.load(Ordering::Relaxed) == ws as *const WorkStruct as usize {
        g.users += 1;
        Some(c)
    } else {
        // Idle: the worker that returned this carrier took its lock after
        // the callback, and so did we; tell TSan (a flush that finds the
        // item idle sees what its last callback did).
        tsan::acquire(c.addr());
        None
    }
}

thread_local! {
    /// The item this thread last lent a carrier to, and the carrier.
    static LAST_LENT: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// [`find`], or lends a carrier: the one this thread last lent to the same
/// address if it is still lent to it (`INIT_WORK` forgot it while its
/// worker was finishing the previous run: queueing it again keeps the item
/// on that worker, as re-queueing a running item does), else a free one.
fn find_or_lend(l: &WsLock<'_>) -> &'static Carrier {
    if let Some(c) = find(l) {
        return c;
    }
    let me = l.0 as *const WorkStruct as usize;
    let (ws, last) = LAST_LENT.with(|h| h.get());
    if ws == me && last != 0 {
        // SAFETY: carriers are never freed; ownership is checked under the lock.
        let c: &'static Carrier = unsafe { &*(last as *const Carrier) };
        let mut g = c.lock();
        // Not one that carries disables from before INIT_WORK reset the depth.
        if c.owner.load(Ordering::Relaxed) == me && g.edis == 0 {
            g.users += 1;
            drop(g);
            l.0.carrier
                .store(c as *const Carrier as *mut Carrier, Ordering::Release);
            return c;
        }
    }
    let c = take_carrier();
    LAST_LENT.with(|h| h.set((me, c as *const Carrier as usize)));
    let mut g = c.lock();
    g.users = 1;
    g.cycles = 0;
    g.edis = 0;
    c.owner
        .store(l.0 as *const WorkStruct as usize, Ordering::Release);
    drop(g);
    l.0.carrier
        .store(c as *const Carrier as *mut Carrier, Ordering::Release);
    c
}

/// Runs an engine call that may panic (waiting for itself from its own
/// callback): the panic is reported by the panic hook, and `default` returned.
fn no_unwind<R>(default: R, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(default)
}

fn cpu_of(cpu: c_int) -> Option<usize> {
    usize::try_from(cpu)
        .ok()
        .filter(|&c| c < crate::wq::WORK_CPU_UNBOUND)
}

/// Queues `ws` on `wq` (for `cpu`, after `delay`): the body of every queue call.
fn queue(wq: &CWq, ws: &WorkStruct, cpu: c_int, delay: Duration) -> bool {
    let Some(c) = lend_for_queue(ws) else {
        return false;
    };
    let ok = engine_queue(wq, c, cpu, delay);
    c.put(i64::from(ok));
    ok
}

/// The carrier a queue call hands to the engine (with a user for the
/// caller), None when `ws` is disabled. From here on `ws` is not touched:
/// once queued, its callback may free it.
fn lend_for_queue(ws: &WorkStruct) -> Option<&'static Carrier> {
    let c = {
        let l = WsLock::new(ws);
        if l.disabled() {
            return None;
        }
        let c = find_or_lend(&l);
        c.func
            .store(ws.func.load(Ordering::Relaxed), Ordering::Relaxed);
        c
    };
    tsan::release(c.addr());
    Some(c)
}

fn engine_queue(wq: &CWq, c: &Carrier, cpu: c_int, delay: Duration) -> bool {
    // Before the queueing that may start the callback, which reads it.
    c.order
        .store(wq.order_point().unwrap_or(0), Ordering::Relaxed);
    c.wq.store(wq as *const CWq as usize, Ordering::Relaxed);
    let dw = c.dw();
    match cpu_of(cpu) {
        Some(cpu) => match wq.wq.queue_delayed_on(cpu, dw, delay) {
            Ok(ok) => ok,
            // A CPU with no pool: let the queue pick, as the kernel's
            // unbound queues pick another CPU for an offline one.
            Err(_) => wq.wq.queue_delayed(dw, delay),
        },
        None => wq.wq.queue_delayed(dw, delay),
    }
}

/// One jiffy is one millisecond (`HZ` is 1000).
#[allow(clippy::useless_conversion)] // c_ulong is u32 on 32-bit targets
fn jiffies(delay: c_ulong) -> Duration {
    Duration::from_millis(u64::from(delay))
}

/// # Safety
/// `p` must point to a live `work_struct` (initialised with `INIT_WORK`).
unsafe fn ws<'a>(p: *mut WorkStruct) -> &'a WorkStruct {
    // SAFETY: the caller's promise.
    unsafe { &*p }
}

/// # Safety
/// `p` must point to a live workqueue from `alloc_workqueue` or a system queue.
unsafe fn wq<'a>(p: *mut CWq) -> &'a CWq {
    // SAFETY: the caller's promise.
    unsafe { &*p }
}

/// `queue_work_on`: queues `work` on `wq` for `cpu` (`WORK_CPU_UNBOUND`: the
/// calling CPU). False if it was already pending or is disabled.
///
/// # Safety
///
/// `wq` is a live workqueue, `work` a live, initialised `work_struct`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn queue_work_on(cpu: c_int, wq: *mut CWq, work: *mut WorkStruct) -> bool {
    // SAFETY: the caller's promise.
    unsafe { queue(self::wq(wq), ws(work), cpu, Duration::ZERO) }
}

/// `queue_delayed_work_on`: queues `dwork` after `delay` jiffies (1 ms each).
///
/// # Safety
///
/// As [`queue_work_on`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn queue_delayed_work_on(
    cpu: c_int,
    wq: *mut CWq,
    dwork: *mut DelayedWorkStruct,
    delay: c_ulong,
) -> bool {
    // SAFETY: the caller's promise.
    unsafe { queue(self::wq(wq), &(*dwork).work, cpu, jiffies(delay)) }
}

/// `mod_delayed_work_on`: (re)arms `dwork` to run after `delay` jiffies
/// whether or not it was pending. True if it was pending.
///
/// # Safety
///
/// As [`queue_work_on`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mod_delayed_work_on(
    cpu: c_int,
    wq: *mut CWq,
    dwork: *mut DelayedWorkStruct,
    delay: c_ulong,
) -> bool {
    // SAFETY: the caller's promise.
    let (wq, ws) = unsafe { (self::wq(wq), &(*dwork).work) };
    let (c, disabled) = {
        let l = WsLock::new(ws);
        let disabled = l.disabled();
        let c = if disabled {
            match find(&l) {
                Some(c) => c,
                None => return false,
            }
        } else {
            find_or_lend(&l)
        };
        (c, disabled)
    };
    // Take the pending cycle, then queue a new one. Another thread may
    // queue the item in between (its cycle, say ten seconds out): then take
    // that cycle too and try again, as the kernel's `try_to_grab_pending`
    // loop does, so the caller's delay is the one that holds.
    let mut taken = 0i64;
    let ok = loop {
        taken += i64::from(c.dw().cancel());
        // A disable racing with us has disabled the carrier's engine item
        // too, so the queue below refuses rather than slipping past it.
        if disabled {
            break false;
        }
        tsan::release(c.addr());
        if engine_queue(wq, c, cpu, jiffies(delay)) {
            break true;
        }
        // Refused with nothing pending (a draining queue, a disable):
        // stop; pending: somebody else's cycle, grab it.
        if !c.dw().is_pending() {
            break false;
        }
        std::thread::yield_now();
    };
    c.put(i64::from(ok) - taken);
    taken > 0
}

/// Waits on `ws`'s carrier outside the lock bit with `f`, which returns its
/// answer and whether it took a pending cycle away; None when idle.
fn wait_on(ws: &WorkStruct, f: impl FnOnce(&'static Carrier) -> bool, steals: bool) -> bool {
    if refuse_self_wait(ws) {
        return false;
    }
    let c = {
        let l = WsLock::new(ws);
        match find(&l) {
            Some(c) => c,
            None => return false,
        }
    };
    let r = f(c);
    tsan::acquire(c.addr());
    c.put(if steals && r { -1 } else { 0 });
    r
}

/// Whether the calling thread runs a C work item's callback now.
pub(crate) fn in_callback() -> bool {
    !CURRENT.with(|c| c.get()).is_null()
}

/// Waiting for an item from its own callback would never end: say so and
/// return instead (the kernel warns, then deadlocks).
fn refuse_self_wait(ws: &WorkStruct) -> bool {
    let me = CURRENT.with(|c| c.get()) as *const WorkStruct;
    if std::ptr::eq(me, ws) {
        eprintln!(
            "cmwq: work item {ws:p} waits for itself from its own callback \
             (flush_work/cancel_work_sync/disable_work_sync): refused"
        );
        return true;
    }
    false
}

/// `flush_work`: waits until the last queued run of `work` has finished.
/// True if it had to wait. A delayed item's timer is fired at once.
///
/// # Safety
///
/// `work` is a live, initialised `work_struct`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flush_work(work: *mut WorkStruct) -> bool {
    // SAFETY: the caller's promise.
    let ws = unsafe { ws(work) };
    wait_on(ws, |c| no_unwind(false, || flush_carrier(c)), false)
}

/// Flushes a carrier: an item waiting out `queue_rcu_work`'s grace period
/// is waited for, not fired early (the RCU callbacks run first, which
/// queue it); any other armed timer is fired now.
fn flush_carrier(c: &'static Carrier) -> bool {
    let mut waited = false;
    while c.lock().gp != 0 {
        rcu::barrier();
        waited = true;
    }
    c.dw().flush() || waited
}

/// `flush_delayed_work`: queues an armed timer's item now and waits for it.
///
/// # Safety
///
/// `dwork` is a live, initialised `delayed_work`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flush_delayed_work(dwork: *mut DelayedWorkStruct) -> bool {
    // SAFETY: the caller's promise.
    unsafe { flush_work(&mut (*dwork).work) }
}

/// `cancel_work`: takes `work` off its queue (or disarms its timer) if it is
/// pending; does not wait for a running callback. True if it was pending.
///
/// # Safety
///
/// `work` is a live, initialised `work_struct`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cancel_work(work: *mut WorkStruct) -> bool {
    // SAFETY: the caller's promise.
    let c = {
        let l = WsLock::new(unsafe { ws(work) });
        match find(&l) {
            Some(c) => c,
            None => return false,
        }
    };
    let was = c.dw().cancel();
    c.put(-i64::from(was));
    was
}

/// `cancel_work_sync`: cancels `work` and waits for a running callback;
/// queueing it meanwhile returns false. True if it was pending.
///
/// # Safety
///
/// `work` is a live, initialised `work_struct`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cancel_work_sync(work: *mut WorkStruct) -> bool {
    // SAFETY: the caller's promise.
    let ws = unsafe { ws(work) };
    wait_on(ws, |c| no_unwind(false, || c.dw().cancel_sync()), true)
}

/// `cancel_delayed_work`: [`cancel_work`] for a delayed item.
///
/// # Safety
///
/// `dwork` is a live, initialised `delayed_work`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cancel_delayed_work(dwork: *mut DelayedWorkStruct) -> bool {
    // SAFETY: the caller's promise.
    unsafe { cancel_work(&mut (*dwork).work) }
}

/// `cancel_delayed_work_sync`: [`cancel_work_sync`] for a delayed item.
///
/// # Safety
///
/// `dwork` is a live, initialised `delayed_work`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cancel_delayed_work_sync(dwork: *mut DelayedWorkStruct) -> bool {
    // SAFETY: the caller's promise.
    unsafe { cancel_work_sync(&mut (*dwork).work) }
}

/// `disable_work`: one more disable level (queueing returns false until a
/// matching `enable_work`); cancels a pending run. True if it was pending.
///
/// # Safety
///
/// `work` is a live, initialised `work_struct`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn disable_work(work: *mut WorkStruct) -> bool {
    // SAFETY: the caller's promise.
    let ws = unsafe { ws(work) };
    let (c, was) = {
        let l = WsLock::new(ws);
        match disable_locked(&l) {
            Some(cw) => cw,
            None => return false,
        }
    };
    c.put(-i64::from(was));
    was
}

/// One more disable level; a lent carrier's engine item is disabled too,
/// which cancels a pending cycle. Returns the carrier (with a user) and
/// whether a cycle was cancelled; None when no carrier is lent.
fn disable_locked(l: &WsLock<'_>) -> Option<(&'static Carrier, bool)> {
    l.0.data.fetch_add(DISABLE_ONE, Ordering::Relaxed);
    let c = find(l)?;
    let was = c.dw().disable();
    c.lock().edis += 1;
    Some((c, was))
}

/// `disable_work_sync`: [`disable_work`], then waits for a running callback.
///
/// # Safety
///
/// `work` is a live, initialised `work_struct`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn disable_work_sync(work: *mut WorkStruct) -> bool {
    // SAFETY: the caller's promise.
    let ws = unsafe { ws(work) };
    if refuse_self_wait(ws) {
        return false;
    }
    let (c, was) = {
        let l = WsLock::new(ws);
        match disable_locked(&l) {
            Some(cw) => cw,
            None => return false,
        }
    };
    // The disable cancelled a pending cycle and refuses new ones, so what
    // is left to wait for is a running callback.
    no_unwind(false, || c.dw().cancel_sync());
    tsan::acquire(c.addr());
    c.put(-i64::from(was));
    was
}

/// `enable_work`: undoes one `disable_work`. True when the item is enabled
/// afterwards (an unbalanced enable warns once and leaves it enabled).
///
/// # Safety
///
/// `work` is a live, initialised `work_struct`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn enable_work(work: *mut WorkStruct) -> bool {
    // SAFETY: the caller's promise.
    let l = WsLock::new(unsafe { ws(work) });
    let d = l.0.data.load(Ordering::Relaxed);
    if d >= DISABLE_ONE {
        l.0.data.fetch_sub(DISABLE_ONE, Ordering::Relaxed);
        if let Some(c) = find(&l) {
            let mut g = c.lock();
            if g.edis > 0 {
                g.edis -= 1;
                drop(g);
                c.dw().enable();
            } else {
                drop(g);
            }
            c.put(0);
        }
        d < 2 * DISABLE_ONE
    } else {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| eprintln!("cmwq: enable_work() on a work item that is not disabled"));
        true
    }
}

/// `disable_delayed_work`: [`disable_work`] for a delayed item.
///
/// # Safety
///
/// `dwork` is a live, initialised `delayed_work`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn disable_delayed_work(dwork: *mut DelayedWorkStruct) -> bool {
    // SAFETY: the caller's promise.
    unsafe { disable_work(&mut (*dwork).work) }
}

/// `disable_delayed_work_sync`: [`disable_work_sync`] for a delayed item.
///
/// # Safety
///
/// `dwork` is a live, initialised `delayed_work`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn disable_delayed_work_sync(dwork: *mut DelayedWorkStruct) -> bool {
    // SAFETY: the caller's promise.
    unsafe { disable_work_sync(&mut (*dwork).work) }
}

/// `enable_delayed_work`: [`enable_work`] for a delayed item.
///
/// # Safety
///
/// `dwork` is a live, initialised `delayed_work`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn enable_delayed_work(dwork: *mut DelayedWorkStruct) -> bool {
    // SAFETY: the caller's promise.
    unsafe { enable_work(&mut (*dwork).work) }
}

/// `work_pending`: true while `work` is queued (or its timer armed) and its
/// callback has not started.
///
/// # Safety
///
/// `work` is a live, initialised `work_struct`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_work_pending(work: *const WorkStruct) -> bool {
    // SAFETY: the caller's promise.
    let ws = unsafe { &*work };
    let p = ws.carrier.load(Ordering::Acquire);
    if p.is_null() {
        return false;
    }
    // SAFETY: carriers are never freed; ownership is checked under the lock.
    let c: &Carrier = unsafe { &*p };
    let _g = c.lock();
    c.owner.load(Ordering::Relaxed) == work as usize && c.dw().is_pending()
}

/// `work_busy`: `WORK_BUSY_PENDING` (1) while `work` is queued or its timer
/// armed, `WORK_BUSY_RUNNING` (2) while its callback runs, both or 0. A
/// hint, as in the kernel: it may change as soon as it is read.
///
/// # Safety
///
/// `work` is a live, initialised `work_struct`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn work_busy(work: *mut WorkStruct) -> c_uint {
    // SAFETY: the caller's promise.
    let c = {
        let l = WsLock::new(unsafe { ws(work) });
        match find(&l) {
            Some(c) => c,
            None => return 0,
        }
    };
    let dw = c.dw();
    let busy = c_uint::from(dw.is_pending()) | (c_uint::from(dw.is_running()) << 1);
    c.put(0);
    busy
}

/// `queue_rcu_work`'s body: queues `ws` on `wq` once a grace period that
/// starts after this call has ended. False if it was pending or disabled.
/// Without an RCU registered ([`rcu::call`] is None) no thread can be in
/// an RCU read-side section, so the grace period is over at once.
pub(crate) fn queue_after_gp(wq: &CWq, ws: &WorkStruct) -> bool {
    if !rcu::registered() {
        return queue(wq, ws, -1, Duration::ZERO);
    }
    let Some(c) = lend_for_queue(ws) else {
        return false;
    };
    // Armed "for ever" under the carrier's lock, so an RCU callback still
    // outstanding from an earlier, cancelled cycle sees this one and asks
    // for a grace period of its own instead of firing it (see `rcu_ended`).
    let mut g = c.lock();
    if !engine_queue(wq, c, -1, rcu::FOREVER) {
        drop(g);
        c.put(0);
        return false;
    }
    g.cycles += 1;
    if g.gp != 0 {
        g.gp = 2;
        g.users -= 1; // cycles > 0: the carrier stays lent
        return true;
    }
    // The callback keeps this call's user until it has run.
    g.gp = 1;
    drop(g);
    // SAFETY: `gp` was 0, so the RCU library holds no callback of this
    // carrier; the head lives for ever (carriers are never freed).
    unsafe { rcu::call(c.rcu.get(), rcu_ended) };
    true
}

/// A grace period since `queue_rcu_work` ended: fire the armed item (if a
/// cancel has not taken it), or, when a later `queue_rcu_work` armed a new
/// cycle meanwhile, wait for another grace period first.
unsafe extern "C" fn rcu_ended(head: *mut RcuHead) {
    // SAFETY: `head` is the `rcu` field of a leaked carrier (see
    // `queue_after_gp`), so stepping back to the carrier stays in it.
    let c: &'static Carrier =
        unsafe { &*((head as *mut u8).sub(std::mem::offset_of!(Carrier, rcu)) as *const Carrier) };
    let mut g = c.lock();
    if g.gp == 2 {
        g.gp = 1;
        drop(g);
        // SAFETY: the library has handed the head back (it runs us).
        unsafe { rcu::call(head, rcu_ended) };
        return;
    }
    g.gp = 0;
    // Under the lock: a `queue_rcu_work` arming a new cycle waits for it,
    // then finds gp 0 and starts its own grace period.
    c.dw().fire();
    drop(g);
    c.put(0);
}

/// `current_work`: the `work_struct` whose callback the calling thread is
/// running, or NULL.
#[unsafe(no_mangle)]
pub extern "C" fn current_work() -> *mut WorkStruct {
    CURRENT.with(|c| c.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    static RAN: AtomicU32 = AtomicU32::new(0);

    unsafe extern "C" fn bump(_w: *mut WorkStruct) {
        RAN.fetch_add(1, Ordering::SeqCst);
    }

    fn new_work() -> Box<WorkStruct> {
        Box::new(WorkStruct::new(bump))
    }

    /// Carriers go back to the free lists: a loop of queue/flush on one
    /// item keeps reusing a couple of them instead of making one per queue.
    #[test]
    fn carriers_come_back() {
        let wq = crate::wq::test_wq();
        let mut w = new_work();
        let before = RAN.load(Ordering::SeqCst);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..500 {
            // SAFETY: `w` and `wq` live through the calls.
            unsafe {
                assert!(queue_work_on(-1, wq, &mut *w));
                seen.insert(w.carrier.load(Ordering::Acquire) as usize);
                flush_work(&mut *w);
            }
        }
        assert_eq!(RAN.load(Ordering::SeqCst) - before, 500);
        assert!(seen.len() <= 4, "{} carriers for one item", seen.len());
    }
}
