#![warn(missing_docs)]
//! Workloads, peers and statistics for measuring cmwq.
//!
//! The library crate `cmwq` knows nothing of this crate: the lab depends on the
//! library, never the other way round.

pub mod abtable;
pub mod bench;
pub mod compare;
pub mod icache;
pub mod latency;
pub mod limits;
pub mod mix;
pub mod percpu;
pub mod perf;
pub mod plot;
pub mod stats;
#[cfg(test)]
mod ab {
    pub use crate::abtable as table;
    pub use crate::compare as run;
    pub use crate::plot;
    pub use crate::stats;
}
#[cfg(test)]
mod golden_tests;
