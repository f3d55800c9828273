//! The locks the crate uses, in one place.
//!
//! [`Mutex`], [`Condvar`] and [`RwLock`] wrap `std`'s and ignore poisoning:
//! a work item's panic is caught inside the worker and never unwinds through
//! a held lock of the engine, and a panic that does (a bug in the engine, see
//! `WorkerExit`) is repaired by the code that catches it, which needs the lock
//! again. So every lock call takes the guard whether or not the lock was
//! poisoned, and says so once, here, instead of at each of its call sites.
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

pub(crate) use std::sync::MutexGuard;

/// A mutex whose `lock` ignores poisoning (see the module docs).
#[derive(Default)]
pub(crate) struct Mutex<T: ?Sized>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `v`.
    pub(crate) const fn new(v: T) -> Mutex<T> {
        Mutex(std::sync::Mutex::new(v))
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Takes the lock, poisoned or not.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lock if it is free (poisoned or not); `None` if it is held.
    #[cfg(feature = "control")]
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
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
        self.0.wait(g).unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a notification for at most `d`.
    pub(crate) fn wait_timeout<'a, T>(
        &self,
        g: MutexGuard<'a, T>,
        d: Duration,
    ) -> MutexGuard<'a, T> {
        self.0
            .wait_timeout(g, d)
            .unwrap_or_else(PoisonError::into_inner)
            .0
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
    #[cfg(not(loom))]
    pub(crate) use super::{Condvar, Mutex};

    /// Atomics of the loom-checked leaves.
    pub(crate) mod atomic {
        #[cfg(loom)]
        pub(crate) use loom::sync::atomic::{
            AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering,
        };
        #[cfg(not(loom))]
        pub(crate) use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
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
        /// A new unlocked mutex holding `v`.
        pub(crate) fn new(v: T) -> Mutex<T> {
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
