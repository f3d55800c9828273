//! The two-sided Mann-Whitney U test (Wilcoxon rank-sum test).
//!
//! Pool both samples, rank them (ties get the average of the ranks they
//! span), and count how often a value of x beats a value of y: that count,
//! U, is near n1·n2/2 when the samples come from the same distribution.

use super::normal::normal_sf;
use super::summary::{Side, StatsError, validate};
use serde::{Deserialize, Serialize};

/// How the p-value of a [`MannWhitney`] result was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MwuMethod {
    /// From the exact null distribution of U (small samples, no ties).
    Exact,
    /// From the normal approximation with tie and continuity corrections.
    Asymptotic,
    /// Small samples with ties: from every one of the C(N, n1) ways to split
    /// the pooled (mid-)ranks, as `scipy.stats.mannwhitneyu(method=
    /// PermutationMethod())` when its resamples cover them all.
    Permutation,
}

/// Result of [`mann_whitney_u`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U of the first sample: the number of pairs (x, y) with x > y, ties
    /// counting one half. SciPy's `statistic`. Ranges over 0..=n1·n2.
    pub u: f64,
    /// Two-sided p-value, in 0..=1.
    pub p: f64,
    /// Which computation gave `p`.
    pub method: MwuMethod,
}

/// Largest `min(U1, U2) + 1` for which the exact distribution is tabulated.
/// With one side of at most 8 values this allows the other up to about
/// 260,000 values; beyond it (never reached by benchmark run counts) the
/// normal approximation is used, and at such sizes it is excellent.
const EXACT_TABLE_LIMIT: usize = 1 << 20;

/// Two-sided Mann-Whitney U test of `x` against `y`.
///
/// Matches `scipy.stats.mannwhitneyu(x, y, alternative='two-sided')` with
/// its defaults (`use_continuity=True`, `method='auto'`) in SciPy 1.17:
///
/// * **Exact** when at least one sample has at most 8 values and the pooled
///   sample has no ties: p = 2·P(U ≥ max(U1, U2)) under the null
///   distribution, capped at 1. (This is SciPy's current rule; SciPy before
///   1.7 used other rules, and its `'auto'` is not documented as stable.)
/// * **Permutation** (a deliberate departure from SciPy's `'auto'`) when at
///   least one sample has at most 8 values and there *are* ties: SciPy falls
///   back to the normal approximation there, which is anti-conservative for
///   tiny samples (3 × 100 vs 3 × 101 gives p = 0.047 where no split of six
///   values can give less than 0.1), and integer metrics (RSS, context
///   switches, counts) tie often. The null distribution of the rank sum is
///   counted over all C(N, n1) splits of the pooled mid-ranks; p =
///   2·min(P(R ≤ r), P(R ≥ r)), capped at 1 — SciPy's
///   `mannwhitneyu(method=PermutationMethod())` with exhaustive resamples.
///   Beyond [`PERMUTATION_LIMIT`] work the normal approximation is used.
/// * **Asymptotic** otherwise: z = (max(U1, U2) - n1·n2/2 - 1/2) / σ with
///   σ² = n1·n2/12 · ((N + 1) - Σ(t³ - t) / (N(N - 1))), where N = n1 + n2
///   and t runs over the sizes of groups of tied values; p = 2·P(Z > z),
///   capped at 1. When every value is equal σ = 0 and p = 1.
///
/// `u` is U1 of `x` (SciPy's `statistic`), whichever method is used.
///
/// Errors when either sample is empty or holds a NaN or infinity; the error
/// names the side (`x` is [`Side::Baseline`]).
pub fn mann_whitney_u(x: &[f64], y: &[f64]) -> Result<MannWhitney, StatsError> {
    validate(x).map_err(|e| e.in_side(Side::Baseline))?;
    validate(y).map_err(|e| e.in_side(Side::Experiment))?;
    let (n1, n2) = (x.len(), y.len());

    let ranks = RankSums::of(x, y);
    let u1 = ranks.r1 - (n1 as f64) * (n1 as f64 + 1.0) / 2.0;
    let u2 = (n1 as f64) * (n2 as f64) - u1;
    let u_big = u1.max(u2);

    let exact_allowed = (n1 <= 8 || n2 <= 8) && !ranks.ties;
    if exact_allowed {
        // Without ties U is an integer.
        let k = u1.min(u2) as usize;
        if let Some(p) = exact_two_sided_p(n1.min(n2), n1.max(n2), k) {
            return Ok(MannWhitney {
                u: u1,
                p,
                method: MwuMethod::Exact,
            });
        }
    }

    if ranks.ties
        && (n1 <= 8 || n2 <= 8)
        && let Some(p) = permutation_two_sided_p(x, y)
    {
        return Ok(MannWhitney {
            u: u1,
            p,
            method: MwuMethod::Permutation,
        });
    }

    let (f1, f2) = (n1 as f64, n2 as f64);
    let big_n = f1 + f2;
    let sigma2 = f1 * f2 / 12.0 * ((big_n + 1.0) - ranks.tie_term / (big_n * (big_n - 1.0)));
    let p = if sigma2 > 0.0 {
        let z = (u_big - f1 * f2 / 2.0 - 0.5) / sigma2.sqrt();
        (2.0 * normal_sf(z)).clamp(0.0, 1.0)
    } else {
        1.0
    };
    Ok(MannWhitney {
        u: u1,
        p,
        method: MwuMethod::Asymptotic,
    })
}

/// Most steps (pooled size × smaller side × rank-sum range) the permutation
/// distribution may take; about 50 ms. Far above benchmark run counts.
pub const PERMUTATION_LIMIT: usize = 50_000_000;

/// The two-sided p of the rank sum of the smaller sample over every split of
/// the pooled mid-ranks (ties kept), or `None` beyond [`PERMUTATION_LIMIT`].
///
/// Mid-ranks are halves at worst, so they are doubled to integers; `ways[j][s]`
/// counts the subsets of j of the ranks seen so far whose doubled sum is s (a
/// 0/1 knapsack count). The counts are at most C(N, m), kept as f64: exact up
/// to 2^53, and relative error below 1e-15 beyond that.
fn permutation_two_sided_p(x: &[f64], y: &[f64]) -> Option<f64> {
    let (small, other) = if x.len() <= y.len() { (x, y) } else { (y, x) };
    let m = small.len();
    let mut pooled: Vec<(f64, bool)> = small
        .iter()
        .map(|&v| (v, true))
        .chain(other.iter().map(|&v| (v, false)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = pooled.len();
    // Doubled mid-ranks: positions start..end share (start+1+end).
    let mut ranks2 = vec![0usize; n];
    let mut observed = 0usize;
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && pooled[end].0 == pooled[start].0 {
            end += 1;
        }
        for i in start..end {
            ranks2[i] = start + 1 + end;
            if pooled[i].1 {
                observed += start + 1 + end;
            }
        }
        start = end;
    }
    let max_sum: usize = {
        let mut r = ranks2.clone();
        r.sort_unstable_by(|a, b| b.cmp(a));
        r.iter().take(m).sum()
    };
    if n.saturating_mul(m).saturating_mul(max_sum + 1) > PERMUTATION_LIMIT {
        return None;
    }
    let mut ways = vec![vec![0f64; max_sum + 1]; m + 1];
    ways[0][0] = 1.0;
    for &r in &ranks2 {
        for j in (1..=m).rev() {
            let (lo, hi) = ways.split_at_mut(j);
            let (prev, cur) = (&lo[j - 1], &mut hi[0]);
            for s in (r..=max_sum).rev() {
                cur[s] += prev[s - r];
            }
        }
    }
    let dist = &ways[m];
    let total: f64 = dist.iter().sum();
    let le: f64 = dist[..=observed.min(max_sum)].iter().sum();
    let ge: f64 = dist[observed.min(max_sum + 1)..].iter().sum();
    Some((2.0 * le.min(ge) / total).min(1.0))
}

/// Rank sum of the first sample and the tie bookkeeping of the pooled one.
struct RankSums {
    /// Sum of the (average) ranks of the values of `x`, ranks from 1.
    r1: f64,
    /// Σ (t³ - t) over groups of t tied values.
    tie_term: f64,
    /// Whether any value occurs more than once in the pooled sample.
    ties: bool,
}

impl RankSums {
    fn of(x: &[f64], y: &[f64]) -> RankSums {
        let mut pooled: Vec<(f64, bool)> = x
            .iter()
            .map(|&v| (v, true))
            .chain(y.iter().map(|&v| (v, false)))
            .collect();
        pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out = RankSums {
            r1: 0.0,
            tie_term: 0.0,
            ties: false,
        };
        let mut start = 0;
        while start < pooled.len() {
            let mut end = start + 1;
            while end < pooled.len() && pooled[end].0 == pooled[start].0 {
                end += 1;
            }
            // Positions start..end hold ranks start+1 ..= end.
            let average_rank = (start + 1 + end) as f64 / 2.0;
            let from_x = pooled[start..end].iter().filter(|v| v.1).count();
            out.r1 += average_rank * from_x as f64;
            let t = (end - start) as f64;
            if end - start > 1 {
                out.ties = true;
                out.tie_term += t * t * t - t;
            }
            start = end;
        }
        out
    }
}

/// 2·P(U ≤ k) for the null distribution of U with sample sizes `m ≤ n`,
/// capped at 1; by symmetry of the distribution this equals
/// 2·P(U ≥ m·n - k). `None` when the counts would not fit the table or an
/// `i128` (the caller then falls back to the normal approximation).
///
/// Under the null every one of the C(m+n, m) orderings of the pooled sample
/// is equally likely, and the number of orderings with U = u is the
/// coefficient of q^u in the Gaussian binomial coefficient
/// [m+n choose m]_q = Π_{i=1..m} (1 - q^(n+i)) / (1 - q^i). The product is
/// built one factor i at a time; after each, the polynomial is exactly
/// [n+i choose i]_q, so every coefficient stays between 0 and C(m+n, m) and
/// integer arithmetic is exact. Only coefficients up to q^k are kept: both
/// the multiplication and the division by (1 - q^i) (a running sum with
/// stride i) only read lower powers.
fn exact_two_sided_p(m: usize, n: usize, k: usize) -> Option<f64> {
    if k >= EXACT_TABLE_LIMIT {
        return None;
    }
    let mut total: i128 = 1;
    for i in 1..=m {
        // C(n+i, i) = C(n+i-1, i-1) · (n+i) / i, exact at every step.
        total = total.checked_mul((n + i) as i128)? / i as i128;
    }
    let mut coef = vec![0i128; k + 1];
    coef[0] = 1;
    for i in 1..=m {
        let shift = n + i;
        for u in (shift..=k).rev() {
            coef[u] -= coef[u - shift];
        }
        for u in i..=k {
            coef[u] += coef[u - i];
        }
    }
    let at_most_k: i128 = coef.iter().sum();
    Some((2.0 * (at_most_k as f64 / total as f64)).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts orderings by brute force: every m-subset of positions.
    fn brute_force_cdf(m: usize, n: usize, k: usize) -> f64 {
        let big = m + n;
        let (mut hits, mut all) = (0u64, 0u64);
        for mask in 0u32..(1 << big) {
            if mask.count_ones() as usize != m {
                continue;
            }
            all += 1;
            // U = Σ over x positions of the number of y positions below.
            let mut u = 0;
            let mut ys_below = 0;
            for pos in 0..big {
                if mask & (1 << pos) != 0 {
                    u += ys_below;
                } else {
                    ys_below += 1;
                }
            }
            if u <= k {
                hits += 1;
            }
        }
        hits as f64 / all as f64
    }

    #[test]
    fn exact_distribution_matches_brute_force() {
        for m in 1..=5 {
            for n in m..=7 {
                for k in 0..=(m * n / 2) {
                    let want = (2.0 * brute_force_cdf(m, n, k)).min(1.0);
                    let got = exact_two_sided_p(m, n, k).unwrap();
                    assert!((got - want).abs() < 1e-15, "m={m} n={n} k={k}");
                }
            }
        }
    }

    #[test]
    fn u_counts_pairs() {
        // x beats y in 3>2, 3>1, 5>2, 5>1, 5>4, 4>2, 4>1 (7 pairs), and
        // the tie 4 = 4 counts one half.
        let r = mann_whitney_u(&[3.0, 5.0, 4.0], &[2.0, 1.0, 4.0]).unwrap();
        assert_eq!(r.u, 7.5);
        // A tie in samples this small: counted over every split.
        assert_eq!(r.method, MwuMethod::Permutation);
    }

    #[test]
    fn swapping_sides_mirrors_u_and_keeps_p() {
        let x = [1.0, 4.0, 9.0, 12.0, 13.0];
        let y = [2.0, 3.0, 5.0, 6.0, 7.0, 8.0];
        let a = mann_whitney_u(&x, &y).unwrap();
        let b = mann_whitney_u(&y, &x).unwrap();
        assert_eq!(a.u + b.u, 30.0);
        assert_eq!(a.p, b.p);
    }

    #[test]
    fn huge_unbalanced_exact_falls_back_instead_of_overflowing() {
        // C(400_008, 8) overflows i128: must not panic, must use the normal
        // approximation.
        let x: Vec<f64> = (0..8).map(|i| f64::from(i) + 0.5).collect();
        let y: Vec<f64> = (0..400_000).map(f64::from).collect();
        let r = mann_whitney_u(&x, &y).unwrap();
        assert_eq!(r.method, MwuMethod::Asymptotic);
        assert!(r.p < 1e-5, "{}", r.p);
    }

    #[test]
    fn empty_side_is_named() {
        let e = mann_whitney_u(&[1.0], &[]).unwrap_err();
        assert_eq!(e.to_string(), "experiment: no values");
        let e = mann_whitney_u(&[f64::NAN], &[1.0]).unwrap_err();
        assert!(e.to_string().starts_with("baseline:"), "{e}");
    }

    #[test]
    fn ties_in_tiny_samples_use_the_permutation_distribution() {
        // 3 x 100 vs 3 x 101: one split in C(6,3) = 20 puts every 100 in x.
        let r = mann_whitney_u(&[100.0; 3], &[101.0; 3]).unwrap();
        assert_eq!(r.method, MwuMethod::Permutation);
        assert!((r.p - 0.1).abs() < 1e-12, "{r:?}");
        // 2 x 100 vs 5 x 101: 1 split in C(7,2) = 21, two-sided 2/21.
        let r = mann_whitney_u(&[100.0; 2], &[101.0; 5]).unwrap();
        assert!((r.p - 2.0 / 21.0).abs() < 1e-12, "{r:?}");
        // All equal: every split has the same rank sum.
        let r = mann_whitney_u(&[7.0; 4], &[7.0; 4]).unwrap();
        assert_eq!(r.p, 1.0);
    }
}
