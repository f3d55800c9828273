//! The engine: work items, workqueues, worker pools, delayed work and the
//! watchdog, the parts of `kernel/workqueue.c` that call each other.
//!
//! The modules here form one cycle (a workqueue queues on pools, a pool calls
//! back into its workqueues' node budgets and flushers, a work item asks the
//! pools and the timer where it is) and keep it inside this folder: what the
//! rest of the crate and the public API need is re-exported by `lib.rs`, and
//! nothing here names the layers above it (the control endpoint is reached
//! through [`Hooks`], the snapshot's types are plain data in `crate::snapshot`,
//! the shared vocabulary is in `crate::types`).
//!
//! - [`work`]: a work item's state word, pending bit and cycle counters.
//! - [`workqueue`]: the queue a user holds, its pwq tables, flush colours,
//!   attrs changes, rescuer and registry (a folder: its `mod.rs` lists the
//!   rooms; `workqueue/for_pool.rs` is every call a pool makes into a queue).
//! - [`node`]: an unbound workqueue's per-NUMA-node `max_active` budget.
//! - [`pool`]: worker pools, their lanes, workers, manager and tick (a
//!   folder: `pool/mod.rs` lists the rooms).
//! - [`snap`]: the snapshot `cmwq dump` shows, assembled from each module's
//!   part, and its topology part.
//! - [`spawn`]: one-off jobs (`spawn`, `execute`): a work cell that runs a
//!   closure once, its result slot and the handle's view of it.
//! - [`bounded`]: `max_queued`, the `try_` calls and the wait for room.
//! - [`scope`]: scoped jobs that borrow the caller's data.
//! - [`timer`]: delayed work.
//! - [`watchdog`]: the tick that stands in for the scheduler's hooks.
//! - [`service`]: the timer, the watchdog, the pods thread and the rescuers
//!   go on through a panic of cmwq's code (said, counted, started over).
//! - [`threads`]: how every engine thread starts (stack size, errors instead
//!   of panics), and the forked child's inert queues.
//!
//! # Locking
//!
//! Every shared field carries a tag that says what guards it, as the kernel's
//! `struct worker_pool` does:
//!
//! | tag | meaning |
//! |---|---|
//! | `I:` | set at init, read-only afterwards (no lock) |
//! | `O:` | set once (a `OnceLock`), read without a lock afterwards |
//! | `L:` | the pool lock (`Pool::inner`); every field of `PoolInner` is `L:` |
//! | `N:` | a node's `pending` lock (`NodeActive::pending`) |
//! | `WQ x:` | the workqueue's lock `x` (`WQ attrs:`, `WQ flush:`, `WQ old:`...) |
//! | `T x:` | the timer's lock `x` (`T state:`, `T deliver:`) |
//! | `W:` | a work item's `wait_lock` |
//! | `R x:` | a process-wide registry lock (`R registry:`, `R bound:`, `R unbound:`) |
//! | `A:` | an atomic, read without a lock; the tag says which ordering and why |
//!
//! Locks nest only in this order. An arrow means the left lock may be held
//! while the right one is taken; two locks with no path between them are
//! never held together, and a lock not named here is a leaf.
//!
//! ```text
//! WQ attrs -> WQ prio
//! WQ attrs -> WQ node_cpus
//! WQ attrs -> WQ flush -> WQ old -> WQ cur
//!                         WQ old -> pool
//!             WQ flush -> WQ cur | WQ node_cpus | WQ chain | R bound | R unbound
//!             WQ flush -> pool
//! WQ chain -> pool
//! T deliver -> T state
//! T deliver -> WQ old
//! T deliver -> pool
//! pool -> N
//! pool -> WQ mayday
//! pool -> W
//! R bound -> R usable -> pool
//! ```
//!
//! The graph checks itself: `sync/order.rs` holds it as a table (a unit test
//! reads this text and compares), every lock is made with its level
//! (`Mutex::new_at(Level::Pool, ..)`; a lock named nowhere here is a leaf,
//! a per-CPU slot of `percpu` a user lock), and debug builds panic, naming
//! both locks, when a thread takes a lock out of this order.
//!
//! Where the code that takes each pair lives: `WQ attrs`, `WQ flush`, `WQ
//! old`, `WQ cur` and `WQ chain` in `workqueue/table.rs` (`apply`) and
//! `workqueue/queue.rs` (`flush`, `destroy`); `WQ mayday` in
//! `workqueue/for_pool.rs`, called from `pool/tick.rs`; `T` in `timer.rs`;
//! `pool -> N` in `pool/queue.rs` (`insert`) and `pool/pwq.rs`; `pool -> W`
//! in `pool/worker.rs`; `R bound`, `R unbound` in `pool/registry.rs`; `R
//! usable` in `pool/hotplug.rs`.
//!
//! - `WQ attrs` is held across a whole attrs change (`apply`), `WQ flush`
//!   inside it while the new table is built (pools attached, one pool lock at
//!   a time), published and swapped in, so a flush never sees half a change.
//!   `flush` holds `WQ flush` while it reads and flips the pwqs' colours
//!   (`Pool::with_pwq`, `pwq_flip_color`: one pool lock at a time).
//! - `WQ old` (the retired and dead generations and the dead ones' counters,
//!   one struct) is taken before `WQ cur` by `apply` and by the readers of
//!   every pwq (`pwq_list_and_dead`), and held while dead pwqs' counters are
//!   read from their pools.
//! - `WQ chain` is held while the ordered chain's head pwq is killed or
//!   unplugged (its pool lock; unplugging registers the items with the node,
//!   `N`, under the pool lock, and activates them after dropping it).
//! - `T deliver` is held while fired items are handed to their workqueues
//!   (`queue_claimed`: pool locks, one at a time), never `T state`; a
//!   queue that found its node's budget full activates waiting items after
//!   dropping the pool lock, still under `T deliver` (`node_activate` reads
//!   every pwq under `WQ old`). Nothing takes `T deliver` under a lock of a
//!   workqueue or a pool (`fire_now` and destroy's `fire_all_for` are called
//!   with none held), so the arrow closes no cycle.
//! - Under the pool lock an item takes node budget or registers as waiting
//!   (`N`), the watchdog's tick sends mayday (`WQ mayday`), and a finished
//!   item's cycle ends (`finish_cycle` takes `W` to wake waiters).
//! - Pools never nest: a per-CPU pool lends a worker of a partner only after
//!   dropping its own lock (`lend_to`, `pool/kick.rs`), and wakeups, flusher notifications
//!   (`WQ flush`), node activations and ordered-chain advances found under a
//!   pool lock run after it is dropped (`Post`).
//! - The registries (`R`) only map attributes to pool ids; making a pool
//!   under them takes no pool lock, except a new bound pool's, taken under
//!   `R usable` to set it disassociated (`pool/hotplug.rs`). `R usable` is
//!   held while a change of the usable CPUs walks the pools (one pool lock
//!   at a time); readers under a pool lock use its leaf copy.
//!
//! Atomics are tagged `A:` with their ordering. `SeqCst` is used only where
//! two threads each store one atomic and then load the other (a Dekker
//! pair: `watchdog`'s `BUSY`/`PARKED`, a node's `nr`/`pending_len`, a work
//! item's `done`/`waiters`, a workqueue's `handles`/`borrows`) and for a work
//! item's state word, whose claim must be fully ordered even when it fails;
//! each such field names the field it pairs with. Settings, counters and
//! hints that no other data hangs on are `Relaxed`; a few fields are
//! `Relaxed` because a lock orders them (the tag says which). The lock-free
//! pwq routing words are `Release`/`Acquire`.

mod bounded;
#[cfg(loom)]
pub mod loom_api;
mod node;
mod pool;
mod scope;
mod service;
mod snap;
mod spawn;
mod threads;
mod timer;
mod watchdog;
mod work;
mod workqueue;

// What the rest of the crate may use: the public API (re-exported again by
// `lib.rs`) and the parts of the snapshot and of the control endpoint's
// knobs that are built here. Everything else stays inside this folder.
pub use bounded::QueueFull;
pub use pool::{
    BlockingGuard, CpuBudget, DFL_SPREAD_THRESH, blocking, cpu_budget, cpu_changes,
    current_is_rescuer, partner_kicks, set_cm_exempt, set_cpu_quota_mode, set_idle_timeout,
    set_spread_thresh, set_watchdog_thresh, show_all_workqueues, sleeper_takeovers, spread_thresh,
    watchdog_thresh,
};
#[cfg(feature = "failure-injection")]
pub use pool::{debug_fail_worker_creation, debug_kill_next_worker, debug_pause_tick_spread};
pub use scope::{JobScope, ScopedJoinHandle};
pub use service::engine_thread_panics;
#[cfg(feature = "failure-injection")]
pub use service::{InjectedPanic, debug_inject_panic};
pub use snap::snapshot;
pub use spawn::{JoinError, JoinHandle};
pub(crate) use threads::FORKED_MSG;
pub use threads::{DFL_WORKER_STACK, set_worker_stack_size, worker_stack_size};
#[cfg(feature = "failure-injection")]
pub use watchdog::debug_pause_looks;
pub use watchdog::{
    MAYDAY_INITIAL_TIMEOUT, TICK, cpu_intensive_thresh, set_cpu_intensive_thresh, watchdog_looks,
    watchdog_ticks,
};
pub use work::Work;
#[cfg(feature = "failure-injection")]
pub use workqueue::debug_use_topology;
#[cfg(feature = "control")]
pub(crate) use workqueue::find_by_name;
pub use workqueue::{
    DelayedWork, Workqueue, WorkqueueBuilder, panic_reports_failed, set_panic_hook, system,
    system_highpri, system_long, system_unbound, workqueue_names,
};

/// Calls from the engine into the layers above it, filled in by the crate
/// root (`crate::ENGINE_HOOKS`), so that no module of the engine names them.
pub(crate) struct Hooks {
    /// `CMWQ_CONTROL=1`: a workqueue was built; start the control endpoint
    /// (once; the callee keeps the `Once`).
    pub(crate) control_autostart: fn(),
}

/// The hooks the crate root set.
pub(crate) fn hooks() -> &'static Hooks {
    &crate::ENGINE_HOOKS
}

/// The process's `CMWQ_*` defaults ([`crate::params`]) as the engine reads
/// them: the first read that parses applies the engine settings they name
/// (`CMWQ_SPREAD_US`, `CMWQ_WATCHDOG_THRESH`) once, as the `set_*` calls
/// would, so a later `set_*` call wins. The parameters know nothing of the
/// engine; the engine pulls them.
pub(crate) fn params() -> Result<&'static crate::params::Params, crate::Error> {
    static APPLIED: std::sync::Once = std::sync::Once::new();
    let p = crate::params::params()?;
    APPLIED.call_once(|| {
        if let Some(us) = p.spread_us {
            set_spread_thresh(std::time::Duration::from_micros(us));
        }
        if let Some(secs) = p.watchdog_thresh {
            set_watchdog_thresh(secs);
        }
    });
    Ok(p)
}

/// What every `build()` checks of the environment ([`crate::params::for_build`]),
/// with the CPUs builds use.
pub(crate) fn params_for_build() -> Result<&'static crate::params::Params, crate::Error> {
    params()?;
    crate::params::for_build(workqueue::system_topology().online())
}

/// The engine's part of [`crate::check_env`]: what a build would refuse.
pub(crate) fn check_env() -> Result<(), crate::Error> {
    params_for_build().map(|_| ())
}
