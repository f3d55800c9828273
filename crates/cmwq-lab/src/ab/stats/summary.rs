//! Descriptive statistics of one side of an A/B comparison.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which side of an A/B comparison a value belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The baseline, A.
    Baseline,
    /// The experiment, B.
    Experiment,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Baseline => "baseline",
            Side::Experiment => "experiment",
        })
    }
}

/// Why a sample could not be summarised or compared.
#[derive(Clone, Debug, PartialEq)]
pub enum StatsError {
    /// The sample has no values.
    Empty,
    /// The sample holds a NaN or an infinity at `index`.
    NonFinite {
        /// Position of the first offending value.
        index: usize,
        /// The value itself.
        value: f64,
    },
    /// A parameter is out of range (for example a confidence level outside
    /// 0..1 or zero bootstrap resamples).
    InvalidParameter(String),
    /// One side of a comparison is unusable.
    InSide {
        /// The side at fault.
        side: Side,
        /// What is wrong with it.
        error: Box<StatsError>,
    },
}

impl fmt::Display for StatsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatsError::Empty => f.write_str("no values"),
            StatsError::NonFinite { index, value } => {
                write!(f, "value #{index} is not a finite number ({value})")
            }
            StatsError::InvalidParameter(what) => write!(f, "invalid parameter: {what}"),
            StatsError::InSide { side, error } => write!(f, "{side}: {error}"),
        }
    }
}

impl std::error::Error for StatsError {}

impl StatsError {
    /// Attributes this error to `side`.
    pub(crate) fn in_side(self, side: Side) -> StatsError {
        StatsError::InSide {
            side,
            error: Box::new(self),
        }
    }
}

/// Checks that `xs` is non-empty and finite.
pub(crate) fn validate(xs: &[f64]) -> Result<(), StatsError> {
    if xs.is_empty() {
        return Err(StatsError::Empty);
    }
    match xs.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(StatsError::NonFinite {
            index,
            value: xs[index],
        }),
        None => Ok(()),
    }
}

/// n, mean, median, sample standard deviation, min and max of a sample.
///
/// Built by [`Summary::new`], which accepts any non-empty sample of finite
/// numbers, so every field is a finite number; only `stdev` is optional.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median: the middle value, or the mean of the two middle values when
    /// `n` is even (as `numpy.median`).
    pub median: f64,
    /// Sample standard deviation (divisor n - 1, as `numpy.std(ddof=1)`);
    /// `None` when `n < 2`, where it is undefined.
    pub stdev: Option<f64>,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Summarises `xs`.
    ///
    /// Errors with [`StatsError::Empty`] for an empty sample and
    /// [`StatsError::NonFinite`] when a value is NaN or infinite. The mean
    /// and deviation use two passes (mean first, then squared deviations
    /// from it), which stays accurate for values like 9,574,476,543 ± 100.
    pub fn new(xs: &[f64]) -> Result<Summary, StatsError> {
        validate(xs)?;
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let stdev = (n >= 2).then(|| {
            let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
            (ss / (n - 1) as f64).sqrt()
        });
        let mut sorted = xs.to_vec();
        sorted.sort_by(f64::total_cmp);
        Ok(Summary {
            n,
            mean,
            median: median_sorted(&sorted),
            stdev,
            min: sorted[0],
            max: sorted[n - 1],
        })
    }

    /// Coefficient of variation in percent (stdev / |mean| * 100): the
    /// run-to-run noise of this side. `None` when `n < 2` or the mean is 0.
    pub fn cv_pct(&self) -> Option<f64> {
        let sd = self.stdev?;
        (self.mean != 0.0).then(|| sd / self.mean.abs() * 100.0)
    }
}

/// Median of an already sorted, non-empty slice.
pub(crate) fn median_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Median of `xs` (the mean of the two middle values when the length is
/// even); `None` when `xs` is empty or holds a NaN or infinity.
pub fn median(xs: &[f64]) -> Option<f64> {
    validate(xs).ok()?;
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(median_sorted(&sorted))
}

/// The `p`-th percentile (0 ≤ p ≤ 100) of `xs`, by linear interpolation
/// between the closest ranks, as `numpy.percentile(xs, p)` with its default
/// method (Hyndman and Fan's type 7). `None` when `xs` is empty or not
/// finite, or `p` is outside 0..=100 or NaN.
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    validate(xs).ok()?;
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile_sorted(&sorted, p)
}

/// [`percentile`] of a slice that is already sorted ascending; avoids the
/// copy when several percentiles of one sample are wanted. Infinities are
/// allowed here (the bootstrap can produce them) and interpolate to
/// themselves. `None` when `sorted` is empty or `p` is outside 0..=100.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let pos = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    let (a, b) = (sorted[lo], sorted[hi]);
    if frac == 0.0 || a == b || a.is_infinite() {
        return Some(a);
    }
    if b.is_infinite() {
        return Some(b);
    }
    // Interpolate from the nearer end, which keeps the result inside [a, b].
    Some(if frac < 0.5 {
        a + (b - a) * frac
    } else {
        b - (b - a) * (1.0 - frac)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_non_finite_are_errors() {
        assert_eq!(Summary::new(&[]), Err(StatsError::Empty));
        assert!(matches!(
            Summary::new(&[1.0, f64::NAN]),
            Err(StatsError::NonFinite { index: 1, .. })
        ));
        assert!(matches!(
            Summary::new(&[f64::INFINITY]),
            Err(StatsError::NonFinite { index: 0, .. })
        ));
        assert_eq!(median(&[]), None);
        assert_eq!(percentile(&[1.0], 101.0), None);
        assert_eq!(percentile(&[1.0], -0.5), None);
        assert_eq!(percentile(&[1.0], f64::NAN), None);
    }

    #[test]
    fn single_value_has_no_stdev() {
        let s = Summary::new(&[7.5]).unwrap();
        assert_eq!(s.n, 1);
        assert_eq!((s.mean, s.median, s.min, s.max), (7.5, 7.5, 7.5, 7.5));
        assert_eq!(s.stdev, None);
        assert_eq!(s.cv_pct(), None);
    }

    #[test]
    fn two_pass_variance_is_accurate_for_large_offsets() {
        // One-pass sum-of-squares would lose every digit here.
        let base = 9_574_476_543.0;
        let s = Summary::new(&[base - 1.0, base, base + 1.0]).unwrap();
        assert_eq!(s.mean, base);
        assert_eq!(s.stdev, Some(1.0));
    }

    #[test]
    fn median_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn percentile_interpolates_and_handles_infinities() {
        let xs = [10.0, 20.0, 30.0, 40.0];
        assert_eq!(percentile(&xs, 0.0), Some(10.0));
        assert_eq!(percentile(&xs, 100.0), Some(40.0));
        // pos = 0.5 * 3 = 1.5: halfway between 20 and 30.
        assert_eq!(percentile(&xs, 50.0), Some(25.0));
        let inf = [f64::NEG_INFINITY, 1.0, f64::INFINITY, f64::INFINITY];
        assert_eq!(percentile_sorted(&inf, 90.0), Some(f64::INFINITY));
        assert_eq!(percentile_sorted(&inf, 0.0), Some(f64::NEG_INFINITY));
        // Between -inf and a finite value the limit is -inf, not NaN.
        assert_eq!(percentile_sorted(&inf, 10.0), Some(f64::NEG_INFINITY));
    }

    #[test]
    fn error_messages_name_the_side() {
        let e = StatsError::Empty.in_side(Side::Experiment);
        assert_eq!(e.to_string(), "experiment: no values");
    }
}
