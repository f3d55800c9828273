//! Per-CPU state with and without QPW (seed 003): what the slot lock costs on
//! the fast path, and what remote drains do to a CPU that runs a tight loop.
//!
//! * [`cost`]: the `kmalloc_bench` analog. A per-CPU object cache
//!   ([`cache::Magazine`] over a shared [`cache::Depot`]) is driven by one
//!   thread in bursts of allocations and frees, timed with the cycle counter
//!   ([`clock`]); cycles per operation are summarised as min, mean, median and
//!   max over runs (the QPW reviewers asked for min and max). Three variants:
//!   [`Variant::NoLock`] reaches the caches through `sched_getcpu` and a plain
//!   array with no lock at all (correct only because one thread uses it and
//!   nothing drains it: the price of the kernel's `local_lock` path), and
//!   `cmwq::percpu::PerCpu` in [`Variant::Local`] and [`Variant::Qpw`] mode.
//! * [`isolation`]: one thread pinned to a CPU allocates and frees from its
//!   slot in a tight loop and records the gaps between iterations; another
//!   thread, on another CPU, drains every CPU's cache every few milliseconds.
//!   In `Local` mode each drain of the pinned CPU is a worker thread that must
//!   run there; in `Qpw` mode the drainer empties the slot itself.

pub mod cache;
pub mod clock;
pub mod cost;
pub mod isolation;

use std::fmt;
use std::str::FromStr;

use cmwq::percpu::Mode;

/// How the per-CPU caches are reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// `sched_getcpu` and a plain array, no lock: valid only single-threaded
    /// with no remote drain (a baseline for the lock's cost).
    NoLock,
    /// `PerCpu` in `Local` mode (drains are work items on the target CPU).
    Local,
    /// `PerCpu` in `Qpw` mode (drains run on the caller under the slot lock).
    Qpw,
}

impl Variant {
    /// Every variant, in table order.
    pub const ALL: [Variant; 3] = [Variant::NoLock, Variant::Local, Variant::Qpw];

    /// The variant's name: `nolock`, `local` or `qpw`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::NoLock => "nolock",
            Variant::Local => "local",
            Variant::Qpw => "qpw",
        }
    }

    /// The `PerCpu` mode of a locked variant; `None` for [`Variant::NoLock`].
    pub fn mode(self) -> Option<Mode> {
        match self {
            Variant::NoLock => None,
            Variant::Local => Some(Mode::Local),
            Variant::Qpw => Some(Mode::Qpw),
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = String;

    /// `nolock`, `local` or `qpw`.
    fn from_str(s: &str) -> Result<Variant, String> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| format!("mode {s:?}: expected nolock, local or qpw"))
    }
}
