//! The `icache` study of seed 001: what an inlined unlock costs in
//! instruction cache, and where it shows.
//!
//! Seed 001 inlined the kernel's `_raw_spin_unlock()` and found +0.58% text,
//! more L1i misses on every workload, and lost throughput only where the
//! workload was front-end bound. Its lesson is about method: choose a
//! benchmark that can see the cost, count at constant instructions, run
//! enough times a side, and say what is beyond noise. This module applies
//! the same method to cmwq's own release path of the pool lock
//! (`pool::unlock_wake`, compiled out of line by default, inlined at every
//! call site with the `inline-unlock` feature):
//!
//! - [`elf`] and [`bloat`]: function sizes from each binary's symbol table
//!   and their difference, bloat-o-meter style;
//! - [`workload`]: an L1i-resident microbenchmark and a front-end-bound one
//!   (`cmwq icache-workload`);
//! - [`counters`]: hardware counters through `perf stat`, where the machine
//!   has them, user and kernel in separate runs;
//! - [`cachegrind`]: simulated I1 misses where it has not;
//! - [`study`]: the runs, the tables with verdicts, and the generated
//!   conclusion (`cmwq compare --preset icache`).

pub mod bloat;
pub mod cachegrind;
pub mod counters;
pub mod elf;
pub mod study;
pub mod workload;
