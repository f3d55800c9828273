//! The watchdog's park against a worker becoming busy: the Dekker pair of
//! `watchdog.rs`'s module docs, as a leaf the loom models run (model 5 in
//! `tests/loom_models.rs`, through `cmwq::__loom::WatchdogGate`).
//!
//! The watchdog publishes `parked`, then re-reads `busy` (and whatever else
//! keeps it awake) and parks only if it is still idle; a worker increments
//! `busy`, then reads `parked` and wakes the watchdog if it was the first.
//! Both sides are `SeqCst`, so in their single total order one of the two
//! loads comes after the other side's store: either the watchdog sees the
//! worker and does not park, or the worker sees `parked` and unparks it (an
//! unpark before the park leaves a token, so the park returns at once).

use crate::sync::model::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::model::dekker_point;

/// The two words of the pair.
pub(crate) struct ParkGate {
    /// A: workers in their busy section. `SeqCst`: pairs with `parked`.
    busy: AtomicUsize,
    /// A: the watchdog is about to park or parked. `SeqCst`: pairs with
    /// `busy` (and with the watchdog's `STARVING`).
    parked: AtomicBool,
}

impl ParkGate {
    /// Nobody busy, the watchdog awake (a `static` outside loom builds).
    #[cfg(not(loom))]
    pub(crate) const fn new() -> ParkGate {
        ParkGate {
            busy: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
        }
    }

    /// Nobody busy, the watchdog awake (loom's atomics are not `const`).
    #[cfg(loom)]
    pub(crate) fn new() -> ParkGate {
        ParkGate {
            busy: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
        }
    }

    /// A worker leaves idle; true when it must wake the watchdog (it is the
    /// first busy one and the watchdog is parked or about to park).
    #[inline]
    pub(crate) fn enter(&self) -> bool {
        if self.busy.fetch_add(1, Ordering::SeqCst) != 0 {
            return false;
        }
        dekker_point();
        self.parked.load(Ordering::SeqCst)
    }

    /// A worker goes back to idle.
    #[inline]
    pub(crate) fn exit(&self) {
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }

    /// Workers busy now.
    pub(crate) fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// The watchdog's side: publishes `parked`, then parks (`park`) only if
    /// `idle` still says so, then clears `parked`.
    pub(crate) fn park_if(&self, idle: impl Fn(&ParkGate) -> bool, park: impl FnOnce()) {
        self.parked.store(true, Ordering::SeqCst);
        dekker_point();
        if idle(self) {
            park();
        }
        self.parked.store(false, Ordering::SeqCst);
    }
}
