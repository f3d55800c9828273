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
//!   attrs changes, rescuer and registry.
//! - [`node`]: an unbound workqueue's per-NUMA-node `max_active` budget.
//! - [`pool`]: worker pools, their lanes, workers, manager and tick.
//! - [`timer`]: delayed work.
//! - [`watchdog`]: the tick that stands in for the scheduler's hooks.
//!
//! # Locking
//!
//! Every shared field carries a tag that says what guards it, as the kernel's
//! `struct worker_pool` does:
//!
//! | tag | meaning |
//! |---|---|
//! | `I:` | set at init, read-only afterwards (no lock) |
//! | `L:` | the pool lock (`Pool::inner`); every field of `PoolInner` is `L:` |
//! | `N:` | a node's `pending` lock (`NodeActive::pending`) |
//! | `WQ:` | the workqueue lock named after the colon (`WQ attrs:`, `WQ flush:`, ...) |
//! | `T:` | the timer's locks (`Timer::state`, `Timer::deliver`) |
//! | `W:` | the work item's `wait_lock` |
//! | `R:` | a process-wide registry lock (`REGISTRY`, `BOUND_POOLS`, `UNBOUND_POOLS`) |
//! | `A:` | an atomic, read without a lock; the tag says which ordering and why |
//! | `O:` | set once (`OnceLock`), read without a lock afterwards |
//!
//! Locks nest only in this order (an arrow: the left one may be held while
//! the right one is taken; two locks with no path between them are never held
//! together):
//!
//! ```text
//! WQ attrs -> WQ flush -> WQ old -> WQ cur
//!                      \-> WQ chain -> pool -> N
//!                                            \-> WQ mayday
//! WQ attrs -> WQ prio
//! T deliver -> T state
//! T deliver -> pool            (a fired timer queues its item)
//! R bound/unbound -> pool      (new_pool publishes, link_pod)
//! ```
//!
//! - `WQ flush` is held across `Pool::with_pwq`/`pwq_flip_color` (pool locks,
//!   one at a time) and, in `apply`, across building the new table, which
//!   attaches pwqs to pools (pool locks, one at a time).
//! - `WQ old` (the retired and dead generations and the dead ones' counters,
//!   one struct) is held while `cur` is swapped and while the dead pwqs'
//!   counters are read from their pools (pool locks, one at a time).
//! - `WQ chain` is held while the ordered chain's head pwq is killed or
//!   unplugged (its pool lock; unplugging takes the node lock under it).
//! - The pool lock is held while an item takes node budget or registers as
//!   waiting (`N`), and while the watchdog's tick sends mayday (`WQ mayday`).
//!   Pools never nest: a lane pool lends a worker to a partner only after
//!   dropping its own lock (`lend_to`), and wakeups, flusher notifications,
//!   node activations and ordered-chain advances found under a pool lock run
//!   after it is dropped (`Post`).
//! - `W` (a work item's `wait_lock`) and `WQ flush`'s condvar are taken by a
//!   notifier with no other lock held.
//!
//! What this order is not: `WQ cur` is a leaf (`pwqs()` clones the table's
//! `Arc` and drops the lock), and so are `T state`, `N`, `WQ mayday` and the
//! registries' maps once the pool is made.
//!
//! Atomics are tagged `A:` with their ordering. `SeqCst` is used only where
//! two threads each store one atomic and then load the other (a Dekker pair);
//! such a field names the field it pairs with. Settings and counters that no
//! other data hangs on are `Relaxed`.

pub(crate) mod node;
pub(crate) mod pool;
pub(crate) mod timer;
pub(crate) mod watchdog;
pub(crate) mod work;
pub(crate) mod workqueue;

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
