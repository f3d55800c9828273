//! The watchdog: what the kernel learns from scheduler hooks, learned by looking.
//!
//! The kernel hears from the scheduler when a worker sleeps
//! (`wq_worker_sleeping`) and gets a tick while one runs (`wq_worker_tick`).
//! User space gets neither, so one thread looks every [`TICK`] (10 ms) at the
//! pools that have busy workers and does, per pool (`Pool::tick`):
//!
//! - **CPU time**: reads each busy worker's thread CPU clock and charges the
//!   time since the previous tick to the workqueue whose item it runs — the
//!   kernel's tick-sampled `CPUtime`. Rescuers and guests (workers lent by a
//!   partner pool) are charged too, though they are never sampled or
//!   marked: they do not count in `nr_running`.
//! - **CPU-intensive detection**: an item that has used more than the threshold
//!   of CPU (kernel: `wq_cpu_intensive_thresh_us`, 10 ms; here
//!   [`set_cpu_intensive_thresh`]) leaves `nr_running` and the pool kicks
//!   another worker. It is found within one tick of crossing the threshold; the
//!   clock is the thread's CPU time, so an item that sleeps is not mistaken for
//!   one that burns.
//! - **Sleeping workers** (`wq_worker_sleeping`, see `pool/sleep.rs` and
//!   `crate::switches`): after each tick, and every `LOOK` (1 ms) while a
//!   concurrency-managed pool seen to block has waiting work, the watchdog
//!   reads each counted busy worker's last context-switch record (no
//!   syscall), or `/proc/self/task/<tid>/stat` for a worker without one (a
//!   pool not seen to block yet, or perf refused); one found asleep leaves
//!   `nr_running` and another worker is kicked. It counts again once it is seen running, or when its
//!   item ends. The queue path makes the same look at the lane's runner, so
//!   this look only covers items queued before their worker fell asleep.
//! - **CPU hotplug** (`pool/hotplug.rs`): the CPUs the process may use are
//!   re-read (its affinity every tick, its cpuset every tenth); a bound pool
//!   whose CPU left is disassociated, and rebound when the CPU comes back;
//!   the unbound queues' pods are recomputed on a short-lived thread.
//! - **Forward progress**: a pool with waiting work, nothing running it and no
//!   idle worker retries creating a worker each tick; after
//!   [`MAYDAY_INITIAL_TIMEOUT`] of that it sends mayday to the `MEM_RECLAIM`
//!   workqueues whose items wait, and their rescuers run them.
//!
//! No looking happens while nothing runs: workers count themselves in `BUSY`
//! when they leave idle; the watchdog parks when it is zero and no pool
//! starves, and the first worker to become busy unparks it. The hand-off is the
//! usual Dekker pair: the watchdog stores `PARKED` then re-reads `BUSY`; a worker
//! increments `BUSY` then reads `PARKED`; both `SeqCst`, so one of them sees the
//! other, and `unpark` before `park` leaves a token.
//!
//! The cost on the hot path is one atomic add and one subtract per busy
//! spell of a worker (not per item at a backlog), on a word of its CPU's
//! (`watchdog/gate.rs`: one word for the process travelled between the CPUs),
//! and a load when the word was zero. The fast looks cost
//! one wakeup of this thread per millisecond, only while work waits on a
//! managed pool whose items were seen to block.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::threads;
use crate::sync::{Level, Mutex};

mod gate;
pub(crate) use gate::ParkGate;

/// How often the watchdog looks while workers are busy.
pub const TICK: Duration = Duration::from_millis(10);
/// How long work may starve before its rescuers are called (kernel: 10 ms).
pub const MAYDAY_INITIAL_TIMEOUT: Duration = Duration::from_millis(10);

/// A: workers busy and the watchdog parked (`gate.rs`: the Dekker pair
/// above, `busy_enter` adds then reads `parked`, `run` stores `parked` then
/// reads `busy`).
#[cfg(not(loom))]
static GATE: ParkGate = ParkGate::new();
/// Loom builds run only the models, which make their own gates; this one is
/// never touched there (loom's atomics are not `const`).
#[cfg(loom)]
static GATE: std::sync::LazyLock<ParkGate> = std::sync::LazyLock::new(ParkGate::new);
/// A: a pool starves and needs the tick although nothing is busy. `SeqCst`:
/// pairs with the gate's `parked` as `busy` does (`poke` stores it then
/// wakes).
static STARVING: AtomicBool = AtomicBool::new(false);
/// The kernel's default `wq_cpu_intensive_thresh_us`: 10 ms.
const DFL_CPU_INTENSIVE_THRESH_US: u64 = 10_000;

/// A: the CPU-intensive threshold. `Relaxed`: a setting read on its own.
static THRESH_US: AtomicU64 = AtomicU64::new(DFL_CPU_INTENSIVE_THRESH_US);
/// A: sweeps made. `Relaxed`: a counter.
static TICKS: AtomicU64 = AtomicU64::new(0);
/// A: looks made (a full tick is followed by one). `Relaxed`: a counter.
static LOOKS: AtomicU64 = AtomicU64::new(0);
/// O: the watchdog thread.
static WATCHDOG: OnceLock<Thread> = OnceLock::new();
/// A: the watchdog looks for sleeping workers only at its ticks (test
/// hook). `Relaxed`: a setting read on its own.
static LOOKS_PAUSED: AtomicBool = AtomicBool::new(false);

/// Test hook: while `paused`, the watchdog makes none of its looks for
/// sleeping workers between ticks (a tick still looks, every 10 ms), so
/// that a test can tell what finds a sleep sooner from the look. Only with
/// the `failure-injection` feature, for tests and the lab.
#[cfg(feature = "failure-injection")]
pub fn debug_pause_looks(paused: bool) {
    LOOKS_PAUSED.store(paused, Ordering::Relaxed);
}

/// Sets the CPU time after which a running item counts as CPU-intensive and
/// stops holding back other work of its pool (kernel default 10 ms).
pub fn set_cpu_intensive_thresh(d: Duration) {
    THRESH_US.store(
        d.as_micros().clamp(1, u64::MAX as u128) as u64,
        Ordering::Relaxed,
    );
}

/// The current CPU-intensive threshold.
pub fn cpu_intensive_thresh() -> Duration {
    Duration::from_micros(THRESH_US.load(Ordering::Relaxed))
}

/// How many sweeps the watchdog has made (0 while nothing was ever busy): lets
/// a test see that an idle process is not polled.
#[inline]
pub fn watchdog_ticks() -> u64 {
    TICKS.load(Ordering::Relaxed)
}

/// How many looks for sleeping workers the watchdog has made: one after each
/// tick, and one every millisecond while a concurrency-managed pool has
/// waiting work (what the detection of unannotated blocking costs).
pub fn watchdog_looks() -> u64 {
    LOOKS.load(Ordering::Relaxed)
}

/// Starts the watchdog thread if it is not running (called before a pool is
/// made, never under a pool lock). An error if it cannot start (the thread
/// limit): the pool is not made and `build()` says why; the next call tries
/// again.
pub(crate) fn ensure_started() -> Result<(), crate::Error> {
    if WATCHDOG.get().is_some() {
        return Ok(());
    }
    static STARTING: Mutex<()> = Mutex::new_at(Level::WatchdogStart, ());
    let _g = STARTING.lock();
    if WATCHDOG.get().is_none() {
        let h = threads::start("cmwq-watchdog".into(), || {
            super::service::run("cmwq-watchdog", run)
        })
        .map_err(|e| threads::spawn_error("the cmwq watchdog thread", &e))?;
        let _ = WATCHDOG.set(h.thread().clone());
    }
    Ok(())
}

/// A worker of CPU `cpu` (its lane's) leaves idle to run items.
#[inline]
pub(crate) fn busy_enter(cpu: usize) {
    if GATE.enter(cpu) {
        wake();
    }
}

/// A worker goes back to idle; `cpu` is what it entered with.
#[inline]
pub(crate) fn busy_exit(cpu: usize) {
    GATE.exit(cpu);
}

/// A pool could not start a worker: keep watching it even if nothing is busy,
/// and look now (an unpark also cuts a sleep between two looks short).
pub(crate) fn poke() {
    STARVING.store(true, Ordering::SeqCst);
    wake();
}

/// Cuts the watchdog's wait short (a worker handed back a unit of the CPU
/// budget under its pool's lock: the watchdog kicks the pools that wait for
/// one, see `pool/budget.rs`). The caller is busy, so the watchdog is not
/// parked for good.
pub(crate) fn nudge() {
    wake();
}

fn wake() {
    if let Some(t) = WATCHDOG.get() {
        t.unpark();
    }
}

fn run() {
    super::pool::watchdog_started();
    let mut last_tick = Instant::now();
    // When the look wants to run again (`None`: no managed pool has waiting
    // work; the full tick alone paces the thread). A watchdog that starts
    // busy (its first workers were already in their items when its thread
    // came up, so no busy spell woke it) looks as one woken from idle does:
    // it used to wait for its first tick, and a process whose first items
    // blocked had them unseen for 10 ms.
    let mut look: Option<Duration> = Some(super::pool::LOOK);
    // The next look is the first since the watchdog woke from idle.
    let mut after_idle = true;
    loop {
        let idle = |g: &ParkGate| g.busy() == 0 && !STARVING.load(Ordering::SeqCst);
        if idle(&GATE) {
            GATE.park_if(idle, std::thread::park);
            last_tick = Instant::now();
            // Workers just became busy: look once a look's period from now
            // (a worker that blocks in its first item is seen then, not a
            // whole tick later); the look says whether to go on looking.
            look = Some(super::pool::LOOK);
            after_idle = true;
            continue;
        }
        let to_tick = TICK.saturating_sub(last_tick.elapsed());
        let wait = look.map_or(to_tick, |d| d.min(to_tick));
        if !wait.is_zero() {
            // A poke (a pool that could not start a worker) cuts it short.
            std::thread::park_timeout(wait);
        }
        let tick = last_tick.elapsed() >= TICK;
        if tick {
            super::service::injected(
                super::service::AT_WATCHDOG_TICK,
                "the watchdog's tick panics",
            );
            last_tick = Instant::now();
            let n = TICKS.fetch_add(1, Ordering::Relaxed);
            // CPUs taken or given back (affinity, cpuset): see `pool/hotplug.rs`.
            super::pool::hotplug_check(n);
            // Clear before the sweep: a failure during or after it sets it again.
            STARVING.store(false, Ordering::SeqCst);
            if super::pool::tick_all(cpu_intensive_thresh()) {
                STARVING.store(true, Ordering::SeqCst);
            }
        }
        // The first look after idle reads every worker in an item as a
        // tick's does: a worker's "same item as at the previous look" means
        // nothing when that look was before the idle spell, and a fresh
        // pool's first sleep would wait for a second look.
        if tick || !LOOKS_PAUSED.load(Ordering::Relaxed) {
            look = super::pool::look_all(tick || after_idle);
            LOOKS.fetch_add(1, Ordering::Relaxed);
        } else {
            look = None;
        }
        after_idle = false;
        // The CPU budget: the quota re-read once a second, and waiters
        // kicked that a handed-back unit can serve.
        super::pool::budget_tick(tick);
    }
}
