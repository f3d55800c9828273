//! The completion every executor signals: the user-space `struct completion`.
//!
//! `lib/test_workqueue.c` waits for each item with `wait_for_completion()`, and the
//! work function does nothing but `complete()`. The comparison between executors is
//! only fair if that handoff costs the same for all of them, so this one primitive is
//! shared by every executor and lives here, not in any executor.
//!
//! Design: a monotonically increasing `signaled` counter, a `target` the owner raises
//! before it submits a batch, and `thread::park`/`unpark` of the owner (a futex on
//! Linux). A signal that reaches the target unparks the owner; `unpark` of a thread
//! that is not parked is one atomic swap, no syscall. Because the counter never
//! resets, [`Completion::completed`] at the end of a run says how many callbacks ran
//! in total: a lost item hangs the producer, a doubled one shows as a count above
//! the number submitted. The struct is aligned to 128 bytes so the completions of
//! two producers never share a cache line (or an adjacent-line prefetch pair).

use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::{self, Thread};

/// A counting completion owned by one waiting thread (one producer).
///
/// The owner calls [`expect`](Completion::expect) with the number of items it is
/// about to submit, submits them, then [`wait`](Completion::wait)s. Each item's
/// callback calls [`complete`](Completion::complete) exactly once, from any thread.
#[repr(align(128))]
#[derive(Debug)]
pub struct Completion {
    signaled: AtomicU64,
    target: AtomicU64,
    aborted: AtomicBool,
    owner: Thread,
}

impl Completion {
    /// A completion owned (and waited on) by the calling thread.
    pub fn new() -> Completion {
        Completion {
            signaled: AtomicU64::new(0),
            target: AtomicU64::new(0),
            aborted: AtomicBool::new(false),
            owner: thread::current(),
        }
    }

    /// Owner only: `n` more signals are due before the next [`wait`](Self::wait)
    /// returns (`reinit_completion` for a batch of `n`).
    ///
    /// Must be called before the items are submitted: the executor's own queue
    /// handoff publishes the new target to the thread that runs the callback.
    pub fn expect(&self, n: u64) {
        let t = self.target.load(Ordering::Relaxed);
        self.target.store(t + n, Ordering::Release);
    }

    /// Signal one item done (`complete()`); wakes the owner if it was the last one due.
    #[inline]
    pub fn complete(&self) {
        let n = self.signaled.fetch_add(1, Ordering::AcqRel) + 1;
        if n >= self.target.load(Ordering::Acquire) {
            self.owner.unpark();
        }
    }

    /// Owner only: sleep until every signal announced by [`expect`](Self::expect) arrived
    /// (`wait_for_completion`): true; or until [`abort`](Self::abort): false. Never
    /// spins and sets no timer: a spurious unpark only loops once more.
    pub fn wait(&self) -> bool {
        debug_assert_eq!(
            thread::current().id(),
            self.owner.id(),
            "Completion::wait off its owner"
        );
        let t = self.target.load(Ordering::Relaxed);
        while self.signaled.load(Ordering::Acquire) < t {
            if self.aborted.load(Ordering::Acquire) {
                return false;
            }
            thread::park();
        }
        true
    }

    /// Make the owner's current and future [`wait`](Self::wait)s return false: the
    /// harness's watchdog uses it when an executor lost an item, so the run fails with
    /// a message instead of hanging (an untimed wait keeps the fast path timer-free).
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        self.owner.unpark();
    }

    /// How many times [`complete`](Self::complete) has been called in total.
    pub fn completed(&self) -> u64 {
        self.signaled.load(Ordering::Acquire)
    }

    /// How many signals have been announced with [`expect`](Self::expect) in total.
    pub fn expected(&self) -> u64 {
        self.target.load(Ordering::Acquire)
    }
}

impl Default for Completion {
    fn default() -> Self {
        Completion::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn batch_from_other_threads() {
        let c = Arc::new(Completion::new());
        for round in 1..=20u64 {
            c.expect(4);
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    let c = c.clone();
                    thread::spawn(move || c.complete())
                })
                .collect();
            assert!(c.wait());
            assert!(c.completed() >= round * 4 - 3 && c.completed() <= round * 4);
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(c.completed(), round * 4);
        }
        assert_eq!(c.expected(), 80);
    }

    #[test]
    fn abort_ends_the_wait() {
        let c = Arc::new(Completion::new());
        c.expect(1);
        let c2 = c.clone();
        let h = thread::spawn(move || c2.abort());
        assert!(!c.wait());
        h.join().unwrap();
        c.complete();
        assert_eq!(c.completed(), 1);
    }
}
