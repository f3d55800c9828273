//! The CPU budget: at most so many workers run at once, process-wide.
//!
//! The kernel has no CPU quota; a process in a cgroup with one does (see
//! [`crate::quota`]). Without a budget its pools are those of the whole
//! machine: on a 1-CPU quota of a 2-CPU machine two per-CPU workers run at
//! once, burn the period's quota in half of it and are throttled for the
//! rest, every item queued meanwhile waiting out the throttle. The JVM
//! (container support) and Go (automaxprocs) size their thread pools to
//! ceil(quota); cmwq keeps its pools and caps how many of their workers run:
//! the *budget*, `LIMIT` running workers, `CMWQ_CPU_QUOTA=auto` (ceil of the
//! cgroup quota, re-read once a second on the watchdog's tick; the default),
//! `off`, or a number.
//!
//! # What counts
//!
//! A unit of budget is held by a worker of a concurrency-managed pool (bound,
//! or unbound with the default [`UnboundConcurrency::PerCpu`]) from the moment
//! it leaves idle with work until it goes idle again, and handed back
//! meanwhile while it does not count in `nr_running` (it said it blocks,
//! the sampler saw it asleep, its item turned CPU-intensive): the budget
//! counts what concurrency management counts, so a blocked worker lets
//! another run, as in the kernel. A worker lent to a partner pool (a
//! guest) holds its unit there too. Unmanaged unbound pools
//! ([`UnboundConcurrency::Unmanaged`]: a worker per item, as the kernel's
//! unbound pools) and rescuers stay outside the budget: their items cannot
//! say they block, and a budget there could hold back the very item a
//! budgeted one waits for.
//!
//! A worker that returns from a block takes its unit back at once, even
//! when that puts `RUNNING` over the limit (its item is running already, as
//! the kernel lets `nr_running` go above 1 when a sleeper wakes); after its
//! item it sees the excess and goes idle, handing its pool's remaining work
//! to the queue of waiters below.
//!
//! # The cost
//!
//! Off (no quota, or `off`): one relaxed load of `LIMIT` where a worker leaves
//! idle, where a kick would wake one, and after each item; no atomic
//! read-modify-write anywhere. On: one compare-and-swap on `RUNNING` when a
//! worker leaves idle and one subtraction when it goes idle (per busy spell,
//! not per item), and per item a load of `RUNNING` and `NR_WAITING`.
//!
//! # Waiting for budget, and why no wakeup is lost
//!
//! A pool whose work needs a worker while the budget is spent registers
//! itself in `WAITERS` (a FIFO of pools, each at most once: its
//! `budget_waiting` flag) and increments `NR_WAITING`, then reads `RUNNING`
//! again. Whoever hands a unit back decrements `RUNNING`, then reads
//! `NR_WAITING`; both `SeqCst`: a Dekker pair, so either the registrant sees
//! the freed unit (and wakes its worker itself) or the releaser sees the
//! registration and kicks the waiters ([`kick_waiters`]: pops pools in FIFO
//! order, takes each one's lock in turn, with no lock held, and kicks it,
//! until as many workers were woken as units are free). Who kicks:
//!
//! 1. A worker going idle hands its unit back after it is on its idle
//!    stack, then kicks with no lock held (its own pool may be the waiter,
//!    and it may be the worker picked).
//! 2. A worker that stops counting while busy (marked blocked, asleep or
//!    CPU-intensive, or dead) hands its unit back under its pool's lock,
//!    where no other pool's lock may be taken: it nudges the watchdog
//!    thread, which kicks the waiters after its look (a worker is busy, so
//!    the watchdog is not parked: see `watchdog.rs`).
//! 3. A limit raised or turned off (the quota re-read on the tick) kicks.
//! 4. The watchdog checks after every look (`tick`): waiters and a free unit
//!    mean a kick, whatever was missed.
//!
//! A woken worker takes its unit when it leaves idle; if another took it
//! first, it registers its pool again and parks: that other worker holds a
//! unit, and case 1 or 2 runs when it lets go. A worker kicked for a pool
//! whose work is gone finds nothing and goes idle, handing back nothing; the
//! kick went on to the next waiter only if no worker was woken, and a worker
//! that finds nothing goes idle through case 1, which kicks again.
//!
//! A busy worker that holds a unit while other pools wait goes idle after
//! [`YIELD_AFTER`] items, registering its own pool at the back of the queue if
//! it still has work: one pool cannot keep the only unit while another's
//! items wait forever.
//!
//! `WAITERS` is a leaf lock taken under a pool lock (`pool -> R budget`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::{Pool, PoolInner, get_pool, unlock_wake};
use crate::engine::watchdog;
use crate::quota::{CgroupDirs, CpuQuota, QuotaMode};

/// Items a worker runs while other pools wait for budget before it lets
/// them have its unit.
pub(crate) const YIELD_AFTER: u32 = 16;

/// How often `auto` re-reads the cgroup quota.
const REREAD: Duration = Duration::from_secs(1);

/// A: workers that may run at once; 0: no budget. `Relaxed`: a setting;
/// a raise is followed by a kick, a cut is seen after the next item.
static LIMIT: AtomicUsize = AtomicUsize::new(0);
/// A: units held. `SeqCst`: pairs with `NR_WAITING` (module docs).
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// A: pools in `WAITERS`. `SeqCst`: pairs with `RUNNING`.
static NR_WAITING: AtomicUsize = AtomicUsize::new(0);
/// A: the highest `RUNNING` seen. `Relaxed`: a statistic.
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// A: times a worker was not woken, or did not start, for want of budget.
/// `Relaxed`: a counter.
static WAITS: AtomicU64 = AtomicU64::new(0);
/// R budget: pools waiting for a unit, oldest first.
static WAITERS: Mutex<VecDeque<&'static Pool>> = Mutex::new(VecDeque::new());

/// What the budget was made from (for `dump`/`topology` and the re-read).
struct Source {
    mode: QuotaMode,
    dirs: Option<CgroupDirs>,
    quota: Option<CpuQuota>,
    error: Option<String>,
    read_at: Instant,
    /// Time the last read took.
    read_cost: Duration,
}

/// O: the mode and the last reading.
static SOURCE: OnceLock<Mutex<Source>> = OnceLock::new();

/// The budget as it stands, for the snapshot and `cmwq topology`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CpuBudget {
    /// `CMWQ_CPU_QUOTA`: auto, off or a number.
    pub mode: QuotaMode,
    /// The cgroup quota (read in every mode, used by `auto`).
    pub quota: Option<CpuQuota>,
    /// Why the quota could not be read, if it could not.
    pub error: Option<String>,
    /// Workers that may run at once; `None`: no budget.
    pub limit: Option<usize>,
    /// Units held now.
    pub running: usize,
    /// The most units held at once so far.
    pub peak: usize,
    /// Times a worker waited for a unit.
    pub waits: u64,
    /// How long the last read of the cgroup files took.
    pub read_cost: Duration,
}

/// Whether a budget is set (one relaxed load).
#[inline]
pub(super) fn on() -> bool {
    LIMIT.load(Ordering::Relaxed) != 0
}

fn limit_for(mode: QuotaMode, quota: Option<&CpuQuota>) -> usize {
    match mode {
        QuotaMode::Off => 0,
        QuotaMode::Fixed(n) => n,
        QuotaMode::Auto => quota.map_or(0, CpuQuota::ceil_cpus),
    }
}

fn read(dirs: &mut Option<CgroupDirs>) -> (Option<CpuQuota>, Option<String>, Duration) {
    let t0 = Instant::now();
    let root = std::path::Path::new("/");
    let r = match dirs {
        Some(d) => d.read(),
        None => CgroupDirs::find(root).and_then(|d| {
            let r = d.read();
            *dirs = Some(d);
            r
        }),
    };
    let cost = t0.elapsed();
    match r {
        Ok(q) => (q, None, cost),
        Err(e) => (None, Some(e.to_string()), cost),
    }
}

/// Reads the mode and the quota, once, before the first pool runs a worker.
pub(super) fn init() {
    source();
}

fn source() -> &'static Mutex<Source> {
    SOURCE.get_or_init(|| {
        // A bad value was refused by `build()`/`check_env`; here it is auto.
        let mode = std::env::var(crate::params::CPU_QUOTA_ENV)
            .ok()
            .and_then(|s| QuotaMode::parse(&s))
            .unwrap_or_default();
        let mut dirs = None;
        let (quota, error, read_cost) = read(&mut dirs);
        LIMIT.store(limit_for(mode, quota.as_ref()), Ordering::Relaxed);
        Mutex::new(Source {
            mode,
            dirs,
            quota,
            error,
            read_at: Instant::now(),
            read_cost,
        })
    })
}

fn set_limit(limit: usize) {
    let old = LIMIT.swap(limit, Ordering::Relaxed);
    if old != limit && (limit == 0 || limit > old) {
        kick_waiters();
    }
}

/// Sets the mode (what `CMWQ_CPU_QUOTA` sets at start): the budget follows
/// at once.
pub fn set_cpu_quota_mode(mode: QuotaMode) {
    let mut s = source().lock().unwrap_or_else(|e| e.into_inner());
    s.mode = mode;
    let limit = limit_for(mode, s.quota.as_ref());
    drop(s);
    set_limit(limit);
}

/// The budget and where it came from.
pub fn cpu_budget() -> CpuBudget {
    let s = source().lock().unwrap_or_else(|e| e.into_inner());
    let limit = LIMIT.load(Ordering::Relaxed);
    CpuBudget {
        mode: s.mode,
        quota: s.quota.clone(),
        error: s.error.clone(),
        limit: (limit != 0).then_some(limit),
        running: RUNNING.load(Ordering::Relaxed),
        peak: PEAK.load(Ordering::Relaxed),
        waits: WAITS.load(Ordering::Relaxed),
        read_cost: s.read_cost,
    }
}

/// The watchdog, after each look: re-reads the quota once a second (`auto`,
/// on a full `tick`) and kicks waiters that a free unit could serve (the
/// backstop, case 4).
pub(crate) fn tick(tick: bool) {
    if tick
        && let Some(src) = SOURCE.get()
        && let Ok(mut s) = src.try_lock()
        && s.mode == QuotaMode::Auto
        && s.read_at.elapsed() >= REREAD
    {
        let now = Instant::now();
        let (quota, error, cost) = read(&mut s.dirs);
        s.read_at = now;
        s.read_cost = cost;
        let limit = limit_for(s.mode, quota.as_ref());
        s.quota = quota;
        s.error = error;
        drop(s);
        set_limit(limit);
    }
    if NR_WAITING.load(Ordering::SeqCst) != 0 && unit_free() {
        kick_waiters();
    }
}

/// A unit of the budget is free now, or there is no budget: a wakeup that
/// is only worth making if it costs no wait (a standby) asks this first.
pub(super) fn unit_free_now() -> bool {
    !on() || unit_free()
}

fn unit_free() -> bool {
    let limit = LIMIT.load(Ordering::Relaxed);
    limit == 0 || RUNNING.load(Ordering::SeqCst) < limit
}

/// Takes a unit if one is free.
fn try_take() -> bool {
    let limit = LIMIT.load(Ordering::Relaxed);
    let mut r = RUNNING.load(Ordering::SeqCst);
    loop {
        if limit != 0 && r >= limit {
            return false;
        }
        match RUNNING.compare_exchange_weak(r, r + 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => {
                PEAK.fetch_max(r + 1, Ordering::Relaxed);
                return true;
            }
            Err(now) => r = now,
        }
    }
}

/// Hands a unit back; returns whether pools wait for one.
fn give() -> bool {
    RUNNING.fetch_sub(1, Ordering::SeqCst);
    NR_WAITING.load(Ordering::SeqCst) != 0
}

/// Puts `pool` on the queue of waiters (once), then says whether a unit
/// is free after all (the registrant's half of the Dekker pair).
fn wait(pool: &'static Pool) -> bool {
    WAITS.fetch_add(1, Ordering::Relaxed);
    if !pool
        .budget_waiting
        .swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        WAITERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(pool);
        NR_WAITING.fetch_add(1, Ordering::SeqCst);
    }
    unit_free()
}

/// Wakes workers of waiting pools for the free units (no lock held).
pub(crate) fn kick_waiters() {
    let mut woken = 0;
    loop {
        let limit = LIMIT.load(Ordering::Relaxed);
        if limit != 0 && RUNNING.load(Ordering::SeqCst) + woken >= limit {
            return;
        }
        let Some(pool) = WAITERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
        else {
            return;
        };
        NR_WAITING.fetch_sub(1, Ordering::SeqCst);
        pool.budget_waiting.store(false, Ordering::SeqCst);
        let mut g = pool.lock();
        let wake = g.kick(0);
        woken += usize::from(wake.is_some());
        unlock_wake(pool, g, wake);
    }
}

impl PoolInner {
    /// Worker `me` of `pool` (managed) may run: it holds a unit, takes one,
    /// or (none free) `waiter` is queued for one and it may not.
    pub(super) fn budget_take(&mut self, me: usize, waiter: &'static Pool) -> bool {
        if !on() || self.workers[me].budgeted {
            return true;
        }
        if try_take() || (wait(waiter) && try_take()) {
            self.workers[me].budgeted = true;
            return true;
        }
        false
    }

    /// Worker `me` goes idle: hands its unit back. Returns whether the
    /// caller must [`kick_waiters`] once it dropped the lock.
    pub(super) fn budget_give(&mut self, me: usize) -> bool {
        std::mem::take(&mut self.workers[me].budgeted) && give()
    }

    /// Worker `me` stops counting while busy (`mark_out`) or dies: hands its
    /// unit back under the lock; the watchdog kicks the waiters (case 2).
    pub(super) fn budget_lend(&mut self, me: usize) {
        if std::mem::take(&mut self.workers[me].budgeted) {
            self.workers[me].budget_lent = true;
            if give() {
                watchdog::nudge();
            }
        }
    }

    /// Worker `me` counts again (`mark_in`): takes its unit back, over the
    /// limit if need be.
    pub(super) fn budget_unlend(&mut self, me: usize) {
        if std::mem::take(&mut self.workers[me].budget_lent) {
            let r = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
            PEAK.fetch_max(r, Ordering::Relaxed);
            self.workers[me].budgeted = true;
        }
    }

    /// A kick would wake a worker: whether the budget lets it (when not,
    /// this pool waits for a unit).
    #[inline]
    pub(super) fn budget_allows_wake(&self) -> bool {
        if unit_free_now() {
            return true;
        }
        // Unmanaged pools are outside the budget.
        match get_pool(self.pool_id) {
            Some(p) if p.managed => wait(p),
            _ => true,
        }
    }

    /// After each item of a busy spell (`items` so far): whether worker `me`
    /// should go idle and let other pools have its unit (over the limit, or
    /// pools waited through [`YIELD_AFTER`] items). Its pool, with work
    /// left, queues for a unit again.
    #[inline]
    pub(super) fn budget_yield(&self, me: usize, items: u32, pool: &'static Pool) -> bool {
        if !on() || !self.workers[me].budgeted {
            return false;
        }
        let limit = LIMIT.load(Ordering::Relaxed);
        let over = RUNNING.load(Ordering::SeqCst) > limit;
        if !over && (items < YIELD_AFTER || NR_WAITING.load(Ordering::SeqCst) == 0) {
            return false;
        }
        if self.has_work() {
            wait(pool);
        }
        true
    }
}
