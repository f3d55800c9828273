//! The locks the crate uses, in one place.
//!
//! [`Mutex`], [`Condvar`] and [`RwLock`] wrap `std`'s and ignore poisoning:
//! a work item's panic is caught inside the worker and never unwinds through
//! a held lock of the engine, and a panic that does (a bug in the engine, see
//! `WorkerExit`) is repaired by the code that catches it, which needs the lock
//! again. So every lock call takes the guard whether or not the lock was
//! poisoned, and says so once, here, instead of at each of its call sites.
//!
//! Every [`Mutex`] is made with its [`Level`] in the lock order
//! (`Mutex::new_at(Level::Pool, ..)`), and debug builds check that order on
//! every `lock` ([`order`]: taking a lock out of order panics with both
//! locks' names), so the debug-build tests check it wherever they run. In
//! release builds the level is dropped at construction: no field, no code,
//! and [`MutexGuard`] is `std`'s.
//!
//! [`model`] is the switch for the loom models (`tests/loom_models.rs`): under
//! `--cfg loom` the leaves built on it (a work item's state word in
//! `engine/work.rs`, a node's `nr_active` budget in `engine/node.rs`, a
//! spawned job's result hand-off in `engine/spawn.rs`) use
//! loom's atomics and mutex, so the models run that code itself; otherwise
//! they are `std`'s. The rest of the engine keeps `std`'s types in both
//! modes: it starts threads, makes syscalls and keeps process-wide statics,
//! which loom cannot run.

use std::sync::PoisonError;
use std::time::Duration;

mod order;

pub(crate) use order::Level;
#[cfg(debug_assertions)]
pub(crate) use order::MutexGuard;
#[cfg(not(debug_assertions))]
pub(crate) use std::sync::MutexGuard;

/// A mutex whose `lock` ignores poisoning (see the module docs) and, in
/// debug builds, checks the lock order.
pub(crate) struct Mutex<T: ?Sized> {
    /// I: where the lock sits in the order (debug builds only).
    #[cfg(debug_assertions)]
    level: Level,
    m: std::sync::Mutex<T>,
}

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `v`, at `level` of the lock order.
    pub(crate) const fn new_at(level: Level, v: T) -> Mutex<T> {
        #[cfg(not(debug_assertions))]
        let _ = level;
        Mutex {
            #[cfg(debug_assertions)]
            level,
            m: std::sync::Mutex::new(v),
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Takes the lock, poisoned or not.
    #[cfg(not(debug_assertions))]
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.m.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lock, poisoned or not, after checking that this thread
    /// may take it under every lock it holds (panics naming both if not).
    #[cfg(debug_assertions)]
    #[track_caller]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        let held = order::acquire(self.level);
        MutexGuard::new(self.m.lock().unwrap_or_else(PoisonError::into_inner), held)
    }

    /// Takes the lock if it is free (poisoned or not); `None` if it is held.
    /// A try cannot deadlock, so the order is not checked, but the lock
    /// counts as held for the locks taken under it.
    #[cfg_attr(debug_assertions, track_caller)]
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        #[cfg(debug_assertions)]
        let held = order::tried(self.level);
        let g = match self.m.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        #[cfg(debug_assertions)]
        let g = MutexGuard::new(g, held);
        Some(g)
    }
}

/// A condition variable for [`Mutex`]'s guards, ignoring poisoning.
#[derive(Default)]
pub(crate) struct Condvar(std::sync::Condvar);

impl Condvar {
    /// A new condition variable.
    pub(crate) const fn new() -> Condvar {
        Condvar(std::sync::Condvar::new())
    }

    /// Waits for a notification (or a spurious wakeup).
    pub(crate) fn wait<'a, T>(&self, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        let wait = |g| self.0.wait(g).unwrap_or_else(PoisonError::into_inner);
        #[cfg(debug_assertions)]
        return g.with_std(wait);
        #[cfg(not(debug_assertions))]
        wait(g)
    }

    /// Waits for a notification for at most `d`.
    pub(crate) fn wait_timeout<'a, T>(
        &self,
        g: MutexGuard<'a, T>,
        d: Duration,
    ) -> MutexGuard<'a, T> {
        let wait = |g| {
            self.0
                .wait_timeout(g, d)
                .unwrap_or_else(PoisonError::into_inner)
                .0
        };
        #[cfg(debug_assertions)]
        return g.with_std(wait);
        #[cfg(not(debug_assertions))]
        wait(g)
    }

    /// Wakes one waiter.
    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    /// Wakes every waiter.
    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// A reader-writer lock ignoring poisoning.
pub(crate) struct RwLock<T>(std::sync::RwLock<T>);

impl<T> RwLock<T> {
    /// A new unlocked lock holding `v`.
    pub(crate) const fn new(v: T) -> RwLock<T> {
        RwLock(std::sync::RwLock::new(v))
    }

    /// Shared access, poisoned or not.
    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Exclusive access, poisoned or not.
    pub(crate) fn write(&self) -> std::sync::RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the loom-checked leaves are built on: loom's types under
/// `--cfg loom`, `std`'s (and [`Mutex`]) otherwise. Only code that never runs
/// outside a loom model in a loom build may use it (loom's types panic
/// outside `loom::model`), which is why it is kept to the leaves.
pub(crate) mod model {
    pub(crate) use super::Level;
    #[cfg(not(loom))]
    pub(crate) use super::{Condvar, Mutex};

    /// Atomics of the loom-checked leaves.
    pub(crate) mod atomic {
        #[cfg(loom)]
        pub(crate) use loom::sync::atomic::{
            AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        };
        #[cfg(not(loom))]
        pub(crate) use std::sync::atomic::{
            AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        };
    }

    /// The point between a Dekker pair's store and its load (see
    /// `engine/node.rs`). With `std` it is nothing: both accesses are
    /// `SeqCst`, and their single total order is the argument. Loom models
    /// `SeqCst` accesses as `AcqRel` only (its README, "Unsupported
    /// features"), which would report a lost hand-off that cannot happen; it
    /// does model `fence(SeqCst)`, so under loom the same total order is asked
    /// for here with a fence.
    #[inline(always)]
    pub(crate) fn dekker_point() {
        #[cfg(loom)]
        loom::sync::atomic::fence(atomic::Ordering::SeqCst);
    }

    /// loom's mutex with [`Mutex`](super::Mutex)'s `lock`.
    #[cfg(loom)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    #[cfg(loom)]
    impl<T> Mutex<T> {
        /// A new unlocked mutex holding `v`; loom checks every order
        /// itself, so the level is not kept.
        pub(crate) fn new_at(_level: super::Level, v: T) -> Mutex<T> {
            Mutex(loom::sync::Mutex::new(v))
        }

        /// Takes the lock, poisoned or not.
        pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }

    /// loom's condition variable with [`Condvar`](super::Condvar)'s calls.
    #[cfg(loom)]
    pub(crate) struct Condvar(loom::sync::Condvar);

    #[cfg(loom)]
    impl Condvar {
        /// A new condition variable.
        pub(crate) fn new() -> Condvar {
            Condvar(loom::sync::Condvar::new())
        }

        /// Waits for a notification.
        pub(crate) fn wait<'a, T>(
            &self,
            g: loom::sync::MutexGuard<'a, T>,
        ) -> loom::sync::MutexGuard<'a, T> {
            self.0
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        /// Wakes every waiter.
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::{Condvar, Level, Mutex};
    use std::time::Duration;

    /// Takes a lock at `first`, then one at `second` while holding it.
    fn nest(first: Level, second: Level) {
        let (a, b) = (Mutex::new_at(first, ()), Mutex::new_at(second, ()));
        let _a = a.lock();
        let _b = b.lock();
    }

    #[test]
    #[should_panic(expected = "taking `test outer` while holding `test inner`")]
    fn a_reversed_pair_panics_naming_both_locks() {
        nest(Level::TestInner, Level::TestOuter);
    }

    #[test]
    fn the_written_order_and_dropped_guards_pass() {
        let outer = Mutex::new_at(Level::TestOuter, 1);
        let inner = Mutex::new_at(Level::TestInner, 2);
        {
            let o = outer.lock();
            let i = inner.lock();
            // Guards may drop in any order; the record of each goes with it.
            drop(o);
            assert_eq!(*i, 2);
        }
        // Nothing is held now, so the inner lock first is fine, and a wait
        // keeps the lock's record through the wait.
        let i = inner.lock();
        let i = Condvar::new().wait_timeout(i, Duration::from_millis(1));
        drop(i);
        let _o = outer.lock();
        let _i = inner.lock();
    }

    #[test]
    #[should_panic(expected = "while holding `test outer`")]
    fn two_locks_of_one_kind_never_nest() {
        nest(Level::TestOuter, Level::TestOuter);
    }
}
