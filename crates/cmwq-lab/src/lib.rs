#![warn(missing_docs)]
//! Workloads, peers and statistics for measuring cmwq.
//!
//! The library crate `cmwq` knows nothing of this crate: the lab depends on the
//! library, never the other way round.
//!
//! - [`bench`](mod@bench), [`mix`], [`latency`], [`percpu`], [`icache`]: the workloads
//!   behind `cmwq bench`, `mix`, `latency`, `percpu` and the icache study;
//! - [`ab`]: A/B comparisons (`cmwq compare`): running the sides, the
//!   statistics, the table and the strip plot;
//! - [`svg`]: the SVG helpers every plot shares;
//! - [`perf`], [`limits`]: hardware counters, and the process's limits.

pub mod ab;
pub mod bench;
pub mod icache;
pub mod latency;
pub mod limits;
pub mod mix;
pub mod percpu;
pub mod perf;
pub mod svg;

/// The statistics of [`ab`], also at the crate's root (their first home).
pub use ab::stats;

#[cfg(test)]
mod golden_tests;
