//! Statistics for A/B comparisons: the numbers behind `cmwq compare`.
//!
//! The seed threads argue with A/B tables (seed 001 is the model: 20 runs a
//! side, medians, a delta in percent, and a verdict of `**`, `ns` or
//! `flat`). This module computes every number in such a table; the
//! [`crate::ab::table`] module renders it.
//!
//! # What is computed, and why
//!
//! * [`Summary`]: n, mean, median, sample standard deviation, min and max
//!   of one side. Kernel reviewers ask for min and max (seed 003), so they
//!   are always at hand.
//! * **Medians, not means.** Benchmark runs are skewed and have outliers
//!   (a run that caught a page-cache flush, a migration, an interrupt
//!   storm). The median ignores a few bad runs; the mean is dragged by them.
//!   The headline delta is therefore the delta of medians, in percent of the
//!   baseline median.
//! * **Mann-Whitney U test** ([`mann_whitney_u`]): a rank test, so it makes
//!   no normality assumption and, like the median, is not moved by how far
//!   out an outlier lies. It answers "do the runs of B tend to be larger or
//!   smaller than the runs of A?". It matches
//!   `scipy.stats.mannwhitneyu(x, y, alternative='two-sided')` of SciPy 1.17
//!   (exact or tie-corrected normal approximation, chosen as SciPy does; see
//!   [`mann_whitney_u`]). The same test drives Go's benchstat.
//! * **Bootstrap confidence interval of the delta of medians**
//!   ([`bootstrap_median_delta_ci`]): the U test says *whether* the sides
//!   differ, not *by how much*, and the median has no simple closed-form
//!   standard error. Resampling each side with replacement and recomputing
//!   the delta of medians many times gives its sampling distribution
//!   directly; the percentile interval is read off it. A fixed seed makes
//!   the interval reproducible run to run and machine to machine.
//! * **Verdict** ([`Verdict`]): `flat` when the delta is below the noise
//!   floor (default 0.1%): a change that small does not matter even when it
//!   is real, and benchmark noise of that order is routine (seed 001 quotes
//!   per-run noise of 0.1..0.36%). Otherwise `**` ("beyond noise") needs
//!   *both* p < 0.05 and a 95% interval that excludes zero, two views of the
//!   evidence that must agree; anything else is `ns` ("within noise").
//! * [`Direction`]: whether higher or lower is better for a metric, so a
//!   report can say whether B is an improvement or a regression.
//!
//! No multiple-testing correction is applied: a table of ten metrics at
//! α = 0.05 will show a spurious `**` now and then, as benchstat's will.
//!
//! Everything here is deterministic and allocation-light; nothing panics on
//! empty or one-element samples (those return errors or `None`, as
//! documented per item).

#![warn(missing_docs)]

mod bootstrap;
mod compare;
mod mann_whitney;
mod normal;
mod rng;
mod summary;

pub use bootstrap::{
    BootstrapCi, DEFAULT_SEED, bootstrap_median_delta_ci, bootstrap_median_deltas,
};
pub use compare::{CompareConfig, Comparison, Direction, Verdict, compare, delta_pct};
pub use mann_whitney::{MannWhitney, MwuMethod, PERMUTATION_LIMIT, mann_whitney_u};
pub use normal::{erfc, normal_sf};
pub use rng::{SplitMix64, Xoshiro256StarStar};
pub use summary::{Side, StatsError, Summary, median, percentile, percentile_sorted};
