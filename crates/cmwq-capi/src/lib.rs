#![warn(missing_docs)]
//! The Linux kernel's workqueue API in C, over cmwq's engine.
//!
//! This crate builds `libcmwq_capi.{so,a}` (named `libcmwq.{so,a}` by
//! `scripts/build-lib.sh`, so C programs link with `-lcmwq`). Its headers are
//! in the crate's `include/` directory: `include/linux/workqueue.h` is the
//! workqueue API with the kernel's names (`struct work_struct`, `INIT_WORK`,
//! `queue_work`, `flush_work`, `cancel_work_sync`, ...), and
//! `include/kcompat/linux/*.h` is just enough of the rest of the kernel
//! (kthreads, completions, `atomic_t`, `ktime`, `pr_*`, `kmalloc`,
//! `module_init`, `module_param`, sysfs file writes) for kernel code such as
//! `lib/test_workqueue.c` to build as a program.
//!
//! # How a C work item reaches the engine: carriers
//!
//! A kernel `struct work_struct` is embedded by value in the user's struct,
//! re-initialised with `INIT_WORK` at will, and freed by the user with no
//! destructor call, so the engine cannot hold it by reference count as it
//! holds a Rust [`cmwq::Work`]. Instead a C work item borrows a *carrier*
//! while it is busy: a [`cmwq::DelayedWork`] whose closure calls the C
//! function with the `work_struct` pointer the carrier is lent to (its
//! `owner`). The `work_struct` itself holds one atomic word (a lock bit and
//! the disable depth) and a pointer to its carrier.
//!
//! A carrier is lent when the item is queued and returned when nobody needs it
//! any more: its *cycles* (queue cycles the engine holds for it: pending or
//! running) and its *users* (callers inside `flush_work`, `cancel_work_sync`,
//! ... that wait on it) both drop to zero. Both counts live under the
//! carrier's own small lock. Whoever brings them to zero returns it to a free
//! list (per CPU, so the steady state allocates nothing): a caller, or the
//! worker right after the callback returns; either touches only the carrier,
//! never the `work_struct`, which the callback may have freed. The pointer
//! left behind in the `work_struct` is then stale, so every
//! use checks `carrier.owner == work` under the carrier's lock, and
//! `INIT_WORK` simply forgets the pointer (the old carrier finishes its cycle
//! and goes back by itself).
//!
//! Non-reentrancy holds because a carrier stays lent while its callback runs
//! (its cycle is open), so queueing the item again from anywhere reuses the
//! same engine item, which the engine never runs twice at once.
//!
//! Once a queue call has handed the carrier to the engine, or a sync call
//! has waited, the caller touches only the carrier: the callback may free the
//! `work_struct` at any moment. The `work_struct`'s lock bit is therefore
//! held only around its disable depth and the lending of a carrier; a
//! `disable_work` that finds a carrier lent also disables the carrier's
//! engine item, whose state word refuses a racing `queue_work` atomically
//! (the carrier undoes those disables when it goes back to a free list).
//!
//! Carriers are never freed: a process holds as many as it ever had busy C
//! items at once, on the free lists when idle.

mod abi;
mod attrs;
mod debug;
mod each_cpu;
mod kcompat;
mod rcu;
mod symbols;
mod sysfs;
mod tsan;
mod work;
mod wq;

pub use tsan::cmwq_capi_set_tsan_hooks;

/// Locks `m`, going on through poisoning: a panic that unwound out of a
/// holder (a C callback cannot unwind through the library, but a Rust bug
/// could) leaves data this crate only appends to or counts, and a C caller
/// has no way to handle a poisoned lock.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
