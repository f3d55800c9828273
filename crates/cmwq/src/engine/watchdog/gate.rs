//! The watchdog's park against a worker becoming busy: the Dekker pair of
//! `watchdog.rs`'s module docs, as a leaf the loom models run (model 5 in
//! `tests/loom_models.rs`, through `cmwq::__loom::WatchdogGate`).
//!
//! The watchdog publishes `parked`, then re-reads the busy count (and
//! whatever else keeps it awake) and parks only if it is still idle; a worker
//! increments the count, then reads `parked` and wakes the watchdog if it was
//! the first. Both sides are `SeqCst`, so in their single total order one of
//! the two loads comes after the other side's store: either the watchdog sees
//! the worker and does not park, or the worker sees `parked` and unparks it
//! (an unpark before the park leaves a token, so the park returns at once).
//!
//! The count is cut into [`SHARDS`] words on lines of their own, and a worker
//! counts itself in its CPU's: every worker adds and subtracts once per busy
//! spell, which with one item in flight is once per item, and one word for
//! the process made that line travel between the CPUs at every item (about
//! 4% of an item's cost with two producers on two CPUs: `cmwq compare`, this
//! gate against none). The argument holds per shard: a worker that finds its
//! shard already non-zero need not look at `parked`, because the worker that
//! made it non-zero either woke the watchdog or was seen by it, and the
//! watchdog cannot park while any shard is non-zero (it reads them all after
//! publishing `parked`).

use crate::sync::model::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::model::dekker_point;

/// Words of the busy count (a worker's CPU modulo this picks its word).
#[cfg(not(loom))]
pub(crate) const SHARDS: usize = 64;
/// Two words in the models: enough for two workers to use different ones.
#[cfg(loom)]
pub(crate) const SHARDS: usize = 2;

/// A word of the count on a cache line of its own (two lines, for the
/// adjacent-line prefetcher).
#[repr(align(128))]
struct Shard(AtomicUsize);

/// `parked`, on a line of its own: read by every worker's first busy spell
/// of a shard, written by the watchdog only.
#[repr(align(128))]
struct Parked(AtomicBool);

/// The two sides of the pair.
pub(crate) struct ParkGate {
    /// A: workers in their busy section, per shard. `SeqCst`: pairs with
    /// `parked`.
    busy: [Shard; SHARDS],
    /// A: the watchdog is about to park or parked. `SeqCst`: pairs with
    /// `busy` (and with the watchdog's `STARVING`).
    parked: Parked,
}

impl ParkGate {
    /// Nobody busy, the watchdog awake (a `static` outside loom builds).
    #[cfg(not(loom))]
    pub(crate) const fn new() -> ParkGate {
        ParkGate {
            busy: [const { Shard(AtomicUsize::new(0)) }; SHARDS],
            parked: Parked(AtomicBool::new(false)),
        }
    }

    /// Nobody busy, the watchdog awake (loom's atomics are not `const`).
    #[cfg(loom)]
    pub(crate) fn new() -> ParkGate {
        ParkGate {
            busy: std::array::from_fn(|_| Shard(AtomicUsize::new(0))),
            parked: Parked(AtomicBool::new(false)),
        }
    }

    /// A worker of CPU `cpu` leaves idle; true when it must wake the
    /// watchdog (it is the first busy one of its shard and the watchdog is
    /// parked or about to park).
    #[inline]
    pub(crate) fn enter(&self, cpu: usize) -> bool {
        if self.busy[cpu % SHARDS].0.fetch_add(1, Ordering::SeqCst) != 0 {
            return false;
        }
        dekker_point();
        self.parked.0.load(Ordering::SeqCst)
    }

    /// A worker goes back to idle; `cpu` is what it entered with.
    #[inline]
    pub(crate) fn exit(&self, cpu: usize) {
        self.busy[cpu % SHARDS].0.fetch_sub(1, Ordering::SeqCst);
    }

    /// Workers busy now (the watchdog's look before it parks, not a hot
    /// path: every shard is read).
    pub(crate) fn busy(&self) -> usize {
        self.busy.iter().map(|s| s.0.load(Ordering::SeqCst)).sum()
    }

    /// Workers busy in `cpu`'s word (a model's broken watchdog reads only
    /// one).
    #[cfg(loom)]
    pub(crate) fn busy_in(&self, cpu: usize) -> usize {
        self.busy[cpu % SHARDS].0.load(Ordering::SeqCst)
    }

    /// The watchdog's side: publishes `parked`, then parks (`park`) only if
    /// `idle` still says so, then clears `parked`.
    pub(crate) fn park_if(&self, idle: impl Fn(&ParkGate) -> bool, park: impl FnOnce()) {
        self.parked.0.store(true, Ordering::SeqCst);
        dekker_point();
        if idle(self) {
            park();
        }
        self.parked.0.store(false, Ordering::SeqCst);
    }
}
