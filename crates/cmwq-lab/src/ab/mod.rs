//! A/B comparisons, the numbers behind `cmwq compare`, in one place.
//!
//! The path of a comparison, in the order it runs:
//!
//! 1. [`run`]: run the sides interleaved (A B, B A, ...) after warm-ups,
//!    measure each run from outside (`wait4`, hardware counters) and read the
//!    metrics it prints ([`run::RunRecord`]);
//! 2. [`stats`]: per metric, medians, delta, Mann-Whitney U, a bootstrap
//!    interval and the verdict (`**`, `ns`, `flat`);
//! 3. [`table`]: the seed threads' table (`Metric  Baseline  Experiment
//!    Delta  Sig`) as text, Markdown or JSON;
//! 4. [`plot`]: every run as a strip plot, one panel per metric (SVG, with
//!    the helpers of [`crate::svg`]).
//!
//! Each step imports only the steps before it: `stats` knows nothing of
//! runs, `table` renders what `stats` computed, `run` builds tables from its
//! records, `plot` draws records and tables.

pub mod plot;
pub mod run;
pub mod stats;
pub mod table;
