//! One metric, two sides: the numbers and the verdict of one table row.

use super::bootstrap::{BootstrapCi, DEFAULT_SEED, bootstrap_median_delta_ci};
use super::mann_whitney::{MwuMethod, mann_whitney_u};
use super::summary::{Side, StatsError, Summary};
use serde::{Deserialize, Serialize};

/// Which way a metric should move for B to count as an improvement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Throughput, ops/s, IPC: more is better.
    HigherIsBetter,
    /// Latency, cycles, cache misses, wall time: less is better.
    LowerIsBetter,
    /// Neither (e.g. instructions retired, a count kept for context).
    #[default]
    Neutral,
}

impl Direction {
    /// Whether a change of `delta_pct` makes B better (`Some(true)`) or
    /// worse (`Some(false)`); `None` for [`Direction::Neutral`], a zero
    /// delta, or a NaN. Says nothing about significance.
    pub fn better(self, delta_pct: f64) -> Option<bool> {
        if delta_pct == 0.0 || delta_pct.is_nan() {
            return None;
        }
        match self {
            Direction::HigherIsBetter => Some(delta_pct > 0.0),
            Direction::LowerIsBetter => Some(delta_pct < 0.0),
            Direction::Neutral => None,
        }
    }

    /// Short phrase for legends: "higher = better", "lower = better", or
    /// `None` for [`Direction::Neutral`].
    pub fn phrase(self) -> Option<&'static str> {
        match self {
            Direction::HigherIsBetter => Some("higher = better"),
            Direction::LowerIsBetter => Some("lower = better"),
            Direction::Neutral => None,
        }
    }
}

/// The verdict on one metric, as in the seed tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// `flat`: |delta| is below the noise floor; too small to matter
    /// whatever the test says.
    Flat,
    /// `**`: beyond noise. p < α *and* the bootstrap interval of the delta
    /// excludes zero.
    Significant,
    /// `ns`: within noise. The delta is above the floor but the evidence
    /// does not clear both bars.
    NotSignificant,
}

impl Verdict {
    /// Decides the verdict from the numbers of a row.
    ///
    /// * `delta_pct` below `noise_floor_pct` in absolute value (strictly:
    ///   a delta exactly at the floor is not flat) → [`Verdict::Flat`].
    /// * Else `p < alpha` (strictly) and `ci` lying wholly above or below
    ///   zero (an end exactly at 0 does not count) → [`Verdict::Significant`].
    /// * Else [`Verdict::NotSignificant`].
    ///
    /// A `delta_pct` of `None` (zero baseline median) is never flat; a `ci`
    /// of `None` (none could be computed) does not veto significance, so
    /// then p alone decides. A NaN p is never significant.
    pub fn decide(
        delta_pct: Option<f64>,
        p: f64,
        ci: Option<(f64, f64)>,
        noise_floor_pct: f64,
        alpha: f64,
    ) -> Verdict {
        if delta_pct.is_some_and(|d| d.abs() < noise_floor_pct) {
            return Verdict::Flat;
        }
        let interval_clear = ci.is_none_or(|(lo, hi)| lo > 0.0 || hi < 0.0);
        if p < alpha && interval_clear {
            Verdict::Significant
        } else {
            Verdict::NotSignificant
        }
    }

    /// The table's symbol: `**`, `ns` or `flat`.
    pub fn symbol(self) -> &'static str {
        match self {
            Verdict::Flat => "flat",
            Verdict::Significant => "**",
            Verdict::NotSignificant => "ns",
        }
    }
}

/// The statistical knobs of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareConfig {
    /// |delta| below this many percent is [`Verdict::Flat`]. Default 0.1.
    pub noise_floor_pct: f64,
    /// Significance level of the Mann-Whitney test. Default 0.05.
    pub alpha: f64,
    /// Confidence level of the bootstrap interval. Default 0.95.
    pub confidence: f64,
    /// Bootstrap resamples. Default 10,000: the 2.5% and 97.5% ends then
    /// rest on about 250 resamples each, stable to a few hundredths of a
    /// percent for typical run-to-run noise.
    pub resamples: usize,
    /// Bootstrap seed; fixed so that reports are reproducible.
    /// Default [`DEFAULT_SEED`].
    pub seed: u64,
}

impl Default for CompareConfig {
    fn default() -> CompareConfig {
        CompareConfig {
            noise_floor_pct: 0.1,
            alpha: 0.05,
            confidence: 0.95,
            resamples: 10_000,
            seed: DEFAULT_SEED,
        }
    }
}

/// Every number of one A/B row: both summaries, the delta of medians, its
/// bootstrap interval, the Mann-Whitney U and p, the verdict, and whether B
/// is better. Serialises to the `--json` form of a row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Which way is better for this metric.
    pub direction: Direction,
    /// Summary of side A, the baseline.
    pub baseline: Summary,
    /// Summary of side B, the experiment.
    pub experiment: Summary,
    /// (median B - median A) / |median A| · 100; `None` when median A is 0
    /// and median B is not (0 when both are 0).
    pub delta_pct: Option<f64>,
    /// Lower end of the bootstrap interval of the delta, percent; `None`
    /// with `delta_pct`. May be -∞ (`null` in JSON) if resamples of A have
    /// a zero median.
    pub ci_lo_pct: Option<f64>,
    /// Upper end of the bootstrap interval, percent; as `ci_lo_pct`.
    pub ci_hi_pct: Option<f64>,
    /// Confidence level of the interval, e.g. 0.95.
    pub confidence: f64,
    /// Mann-Whitney U of the baseline (SciPy's `statistic` for x = A).
    pub u: f64,
    /// Two-sided Mann-Whitney p-value.
    pub p: f64,
    /// Whether `p` is exact or from the normal approximation.
    pub p_method: MwuMethod,
    /// Noise floor the verdict used, percent.
    pub noise_floor_pct: f64,
    /// Significance level the verdict used.
    pub alpha: f64,
    /// `flat`, `**` or `ns`.
    pub verdict: Verdict,
    /// Whether B's median moved the good way (`Some(true)`) or the bad way
    /// (`Some(false)`), regardless of the verdict; `None` for a neutral
    /// metric or no change. Read it together with `verdict`.
    pub better: Option<bool>,
}

impl Comparison {
    /// The bootstrap interval as a pair, when there is one.
    pub fn ci(&self) -> Option<(f64, f64)> {
        self.ci_lo_pct.zip(self.ci_hi_pct)
    }

    /// True when B is significantly better ([`Verdict::Significant`] and
    /// `better == Some(true)`).
    pub fn is_improvement(&self) -> bool {
        self.verdict == Verdict::Significant && self.better == Some(true)
    }

    /// True when B is significantly worse.
    pub fn is_regression(&self) -> bool {
        self.verdict == Verdict::Significant && self.better == Some(false)
    }
}

/// (b - a) / |a| · 100: the change from `a` to `b` in percent of `a`.
///
/// The absolute value keeps the sign meaning "B is larger" even for a
/// negative baseline. `Some(0.0)` when both are 0, `None` when only `a` is
/// 0 (no finite percentage exists).
pub fn delta_pct(a: f64, b: f64) -> Option<f64> {
    if a == 0.0 {
        return (b == 0.0).then_some(0.0);
    }
    Some((b - a) / a.abs() * 100.0)
}

/// Compares runs `b` (experiment) against runs `a` (baseline) of one metric.
///
/// Any non-empty samples of finite numbers are accepted, one run a side
/// included (then p is 1 and the interval is the single delta, so the
/// verdict is `flat` or `ns`, never `**`). Errors name the side at fault,
/// or report a bad `config` (confidence outside 0..1, zero resamples).
pub fn compare(
    a: &[f64],
    b: &[f64],
    direction: Direction,
    config: &CompareConfig,
) -> Result<Comparison, StatsError> {
    let baseline = Summary::new(a).map_err(|e| e.in_side(Side::Baseline))?;
    let experiment = Summary::new(b).map_err(|e| e.in_side(Side::Experiment))?;
    let mwu = mann_whitney_u(a, b)?;
    let delta = delta_pct(baseline.median, experiment.median);
    let ci: Option<BootstrapCi> = match delta {
        Some(_) => Some(bootstrap_median_delta_ci(
            a,
            b,
            config.resamples,
            config.confidence,
            config.seed,
        )?),
        None => None,
    };
    let ci_pair = ci.map(|c| (c.lo, c.hi));
    let verdict = Verdict::decide(delta, mwu.p, ci_pair, config.noise_floor_pct, config.alpha);
    let better = match delta {
        Some(d) => direction.better(d),
        None => direction.better(experiment.median - baseline.median),
    };
    Ok(Comparison {
        direction,
        baseline,
        experiment,
        delta_pct: delta,
        ci_lo_pct: ci_pair.map(|c| c.0),
        ci_hi_pct: ci_pair.map(|c| c.1),
        confidence: config.confidence,
        u: mwu.u,
        p: mwu.p,
        p_method: mwu.method,
        noise_floor_pct: config.noise_floor_pct,
        alpha: config.alpha,
        verdict,
        better,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOOR: f64 = 0.1;
    const ALPHA: f64 = 0.05;

    #[test]
    fn delta_exactly_at_the_floor_is_not_flat() {
        assert_eq!(
            Verdict::decide(Some(0.1), 0.01, Some((0.05, 0.2)), FLOOR, ALPHA),
            Verdict::Significant
        );
        assert_eq!(
            Verdict::decide(Some(-0.1), 0.5, Some((-0.3, 0.1)), FLOOR, ALPHA),
            Verdict::NotSignificant
        );
        let just_below = f64::from_bits(0.1f64.to_bits() - 1);
        assert_eq!(
            Verdict::decide(Some(just_below), 0.0, Some((0.05, 0.2)), FLOOR, ALPHA),
            Verdict::Flat
        );
        assert_eq!(
            Verdict::decide(Some(-just_below), 0.0, Some((-0.2, -0.05)), FLOOR, ALPHA),
            Verdict::Flat
        );
    }

    #[test]
    fn p_just_under_and_just_over_alpha() {
        let ci = Some((0.5, 1.5));
        let under = f64::from_bits(0.05f64.to_bits() - 1);
        assert_eq!(
            Verdict::decide(Some(1.0), under, ci, FLOOR, ALPHA),
            Verdict::Significant
        );
        assert_eq!(
            Verdict::decide(Some(1.0), 0.05, ci, FLOOR, ALPHA),
            Verdict::NotSignificant
        );
        assert_eq!(
            Verdict::decide(Some(1.0), 0.0501, ci, FLOOR, ALPHA),
            Verdict::NotSignificant
        );
        assert_eq!(
            Verdict::decide(Some(1.0), f64::NAN, ci, FLOOR, ALPHA),
            Verdict::NotSignificant
        );
    }

    #[test]
    fn interval_touching_or_spanning_zero_vetoes() {
        for ci in [(0.0, 2.0), (-2.0, 0.0), (-0.5, 2.0)] {
            assert_eq!(
                Verdict::decide(Some(1.0), 0.001, Some(ci), FLOOR, ALPHA),
                Verdict::NotSignificant,
                "{ci:?}"
            );
        }
        assert_eq!(
            Verdict::decide(Some(-1.0), 0.001, Some((-2.0, -0.1)), FLOOR, ALPHA),
            Verdict::Significant
        );
    }

    #[test]
    fn undefined_delta_is_never_flat_and_p_decides() {
        assert_eq!(
            Verdict::decide(None, 0.01, None, FLOOR, ALPHA),
            Verdict::Significant
        );
        assert_eq!(
            Verdict::decide(None, 0.2, None, FLOOR, ALPHA),
            Verdict::NotSignificant
        );
    }

    #[test]
    fn direction_says_better_or_worse() {
        use Direction::*;
        assert_eq!(HigherIsBetter.better(2.0), Some(true));
        assert_eq!(HigherIsBetter.better(-2.0), Some(false));
        assert_eq!(LowerIsBetter.better(-2.0), Some(true));
        assert_eq!(LowerIsBetter.better(2.0), Some(false));
        assert_eq!(Neutral.better(2.0), None);
        assert_eq!(HigherIsBetter.better(0.0), None);
    }

    #[test]
    fn delta_pct_rules() {
        assert_eq!(delta_pct(200.0, 250.0), Some(25.0));
        assert_eq!(delta_pct(200.0, 150.0), Some(-25.0));
        // Negative baseline: B larger still reads as a positive change.
        assert_eq!(delta_pct(-200.0, -150.0), Some(25.0));
        assert_eq!(delta_pct(0.0, 0.0), Some(0.0));
        assert_eq!(delta_pct(0.0, 1.0), None);
    }

    #[test]
    fn separated_runs_are_a_significant_regression() {
        // Latency: B is 10% slower in every run.
        let a: Vec<f64> = (0..20).map(|i| 100.0 + f64::from(i) * 0.1).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.1).collect();
        let c = compare(&a, &b, Direction::LowerIsBetter, &CompareConfig::default()).unwrap();
        assert_eq!(c.verdict, Verdict::Significant);
        assert_eq!(c.better, Some(false));
        assert!(c.is_regression() && !c.is_improvement());
        let d = c.delta_pct.unwrap();
        assert!((d - 10.0).abs() < 1e-9, "{d}");
        let (lo, hi) = c.ci().unwrap();
        assert!(lo > 9.0 && hi < 11.0 && lo <= d && d <= hi, "{lo} {hi}");
        assert_eq!(c.u, 0.0);
        assert_eq!(c.p_method, MwuMethod::Asymptotic);
    }

    #[test]
    fn one_run_a_side_is_never_significant() {
        let cfg = CompareConfig::default();
        let c = compare(&[100.0], &[150.0], Direction::HigherIsBetter, &cfg).unwrap();
        assert_eq!(c.verdict, Verdict::NotSignificant);
        assert_eq!(c.p, 1.0);
        assert_eq!(c.ci(), Some((50.0, 50.0)));
        assert_eq!(c.better, Some(true));
        let c = compare(&[100.0], &[100.05], Direction::HigherIsBetter, &cfg).unwrap();
        assert_eq!(c.verdict, Verdict::Flat);
    }

    #[test]
    fn zero_baseline_has_no_delta_but_a_direction() {
        let cfg = CompareConfig::default();
        let c = compare(
            &[0.0, 0.0, 0.0],
            &[1.0, 2.0, 3.0],
            Direction::LowerIsBetter,
            &cfg,
        )
        .unwrap();
        assert_eq!(c.delta_pct, None);
        assert_eq!(c.ci(), None);
        assert_eq!(c.better, Some(false));
        // p with 3 vs 3 and ties is asymptotic and above 0.05 here.
        assert_eq!(c.verdict, Verdict::NotSignificant);
    }

    #[test]
    fn errors_name_the_side() {
        let cfg = CompareConfig::default();
        let e = compare(&[1.0], &[f64::NAN], Direction::Neutral, &cfg).unwrap_err();
        assert!(e.to_string().starts_with("experiment:"), "{e}");
        let bad = CompareConfig {
            confidence: 1.5,
            ..CompareConfig::default()
        };
        assert!(compare(&[1.0], &[2.0], Direction::Neutral, &bad).is_err());
    }
}
