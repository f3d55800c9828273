//! Percentiles the kernel's way, results of one run, and medians over rounds.

use serde::Serialize;

/// The kernel's percentile: `sorted[total * pct / 100]` on the merged, sorted samples
/// of all producers (clamped to the last sample, so `pct = 100` is the maximum).
/// Returns 0 for no samples.
pub fn percentile(sorted: &[u64], pct: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(sorted.len() * pct / 100).min(sorted.len() - 1)]
}

/// Latency percentiles in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// 50th percentile.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile (not in the kernel's output).
    pub p99: u64,
    /// The largest sample.
    pub max: u64,
}

impl Percentiles {
    /// Percentiles of `sorted` (ascending) by [`percentile`].
    pub fn of_sorted(sorted: &[u64]) -> Percentiles {
        Percentiles {
            p50: percentile(sorted, 50),
            p90: percentile(sorted, 90),
            p95: percentile(sorted, 95),
            p99: percentile(sorted, 99),
            max: sorted.last().copied().unwrap_or(0),
        }
    }
}

/// The quantile levels of the round-trip distribution kept per run (for `--plot`):
/// dense in the tail, where executors differ: steps of 0.01 to 0.9, 0.001 to 0.99,
/// 0.0001 to 0.999, then 0.9999 and 1 (the maximum).
pub fn cdf_levels() -> Vec<f64> {
    let mut v: Vec<f64> = (0..90).map(|i| i as f64 / 100.0).collect();
    v.extend((0..90).map(|i| 0.9 + i as f64 / 1000.0));
    v.extend((0..90).map(|i| 0.99 + i as f64 / 10_000.0));
    v.extend([0.999, 0.9999, 1.0]);
    v
}

/// `(level, sample)` for every [`cdf_levels`] level of `sorted`, by the kernel's index
/// rule (`sorted[floor(len * level)]`, clamped to the last sample).
pub fn cdf_points(sorted: &[u64]) -> Vec<(f64, u64)> {
    if sorted.is_empty() {
        return Vec::new();
    }
    let n = sorted.len();
    cdf_levels()
        .into_iter()
        .map(|q| (q, sorted[((n as f64 * q) as usize).min(n - 1)]))
        .collect()
}

/// Everything measured in one run of one executor (and scope).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    /// Executor name (`rayon`, `cmwq`, ...).
    pub executor: String,
    /// Affinity scope, or `-` for executors without scopes.
    pub scope: String,
    /// Round number, from 0.
    pub round: usize,
    /// Items completed in total, counted by the completions (must equal threads × items).
    pub completed: u64,
    /// Wall time from the start barrier to the last producer done plus the executor's quiesce.
    pub elapsed_s: f64,
    /// Items per second: completed / elapsed.
    pub items_per_sec: f64,
    /// Enqueue latency (the submit call only), ns.
    pub enqueue_ns: Percentiles,
    /// Round trip (submit start to the producer's wait returning), ns.
    pub round_trip_ns: Percentiles,
    /// User CPU seconds of the process during the run.
    pub cpu_user_s: f64,
    /// System CPU seconds of the process during the run.
    pub cpu_sys_s: f64,
    /// (user + sys) CPU seconds per million items.
    pub cpu_s_per_million: f64,
    /// Voluntary context switches of the process per item.
    pub vcsw_per_item: f64,
    /// Involuntary context switches of the process per item.
    pub ivcsw_per_item: f64,
    /// CPU milliseconds the process used while idle after the run, over `idle_window_ms`.
    pub idle_cpu_ms: f64,
    /// Length of the idle window, ms.
    pub idle_window_ms: f64,
    /// Threads of the process after the executor was dropped, minus before it was built.
    pub threads_left: i64,
    /// Round-trip distribution for the plot, `(quantile, ns)` per [`cdf_levels`] level
    /// (not serialized).
    #[serde(skip)]
    pub round_trip_cdf: Vec<(f64, u64)>,
}

/// Median, minimum and maximum of one metric over rounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Mmm {
    /// Median (mean of the two middle values for an even count).
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
}

impl Mmm {
    /// Median, min and max of `vals` (all zero when empty).
    pub fn of(vals: impl IntoIterator<Item = f64>) -> Mmm {
        let mut v: Vec<f64> = vals.into_iter().collect();
        if v.is_empty() {
            return Mmm::default();
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Mmm {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// One row of the report: an executor (and scope) summarized over its rounds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RowSummary {
    /// Executor name.
    pub executor: String,
    /// Scope, or `-`.
    pub scope: String,
    /// Whether the executor is scoped (its rows feed the kernel lines).
    pub scoped: bool,
    /// Rounds summarized.
    pub rounds: usize,
    /// Items per second.
    pub items_per_sec: Mmm,
    /// Enqueue p50, ns.
    pub enqueue_p50_ns: Mmm,
    /// Enqueue p90, ns.
    pub enqueue_p90_ns: Mmm,
    /// Enqueue p95, ns.
    pub enqueue_p95_ns: Mmm,
    /// Enqueue p99, ns.
    pub enqueue_p99_ns: Mmm,
    /// Enqueue max, ns.
    pub enqueue_max_ns: Mmm,
    /// Round trip p50, ns.
    pub round_trip_p50_ns: Mmm,
    /// Round trip p95, ns.
    pub round_trip_p95_ns: Mmm,
    /// Round trip p99, ns.
    pub round_trip_p99_ns: Mmm,
    /// CPU seconds per million items.
    pub cpu_s_per_million: Mmm,
    /// Voluntary context switches per item.
    pub vcsw_per_item: Mmm,
    /// CPU ms used in the idle window after the run.
    pub idle_cpu_ms: Mmm,
    /// Threads left after the executor was dropped.
    pub threads_left: Mmm,
    /// Index into the runs of the round with the median throughput (its CDF is plotted).
    #[serde(skip)]
    pub median_run: usize,
}

impl RowSummary {
    /// Summarize `runs` (the rounds of one executor and scope; indices into `all`).
    pub fn of(all: &[RunResult], idx: &[usize], scoped: bool) -> RowSummary {
        let runs: Vec<&RunResult> = idx.iter().map(|&i| &all[i]).collect();
        let m = |f: &dyn Fn(&RunResult) -> f64| Mmm::of(runs.iter().map(|r| f(r)));
        let mut by_tput: Vec<usize> = idx.to_vec();
        by_tput.sort_by(|&a, &b| all[a].items_per_sec.total_cmp(&all[b].items_per_sec));
        RowSummary {
            executor: runs[0].executor.clone(),
            scope: runs[0].scope.clone(),
            scoped,
            rounds: runs.len(),
            items_per_sec: m(&|r| r.items_per_sec),
            enqueue_p50_ns: m(&|r| r.enqueue_ns.p50 as f64),
            enqueue_p90_ns: m(&|r| r.enqueue_ns.p90 as f64),
            enqueue_p95_ns: m(&|r| r.enqueue_ns.p95 as f64),
            enqueue_p99_ns: m(&|r| r.enqueue_ns.p99 as f64),
            enqueue_max_ns: m(&|r| r.enqueue_ns.max as f64),
            round_trip_p50_ns: m(&|r| r.round_trip_ns.p50 as f64),
            round_trip_p95_ns: m(&|r| r.round_trip_ns.p95 as f64),
            round_trip_p99_ns: m(&|r| r.round_trip_ns.p99 as f64),
            cpu_s_per_million: m(&|r| r.cpu_s_per_million),
            vcsw_per_item: m(&|r| r.vcsw_per_item),
            idle_cpu_ms: m(&|r| r.idle_cpu_ms),
            threads_left: m(&|r| r.threads_left as f64),
            median_run: by_tput[by_tput.len() / 2],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_index_rule() {
        // total*P/100 on 0..100: index == value.
        let v: Vec<u64> = (0..100).collect();
        assert_eq!(percentile(&v, 50), 50);
        assert_eq!(percentile(&v, 90), 90);
        assert_eq!(percentile(&v, 95), 95);
        assert_eq!(percentile(&v, 99), 99);
        assert_eq!(percentile(&v, 100), 99);
        // 10 samples: p95 -> index 9 (10*95/100 = 9), p50 -> index 5 (upper median).
        let v: Vec<u64> = (1..=10).map(|x| x * 10).collect();
        assert_eq!(percentile(&v, 50), 60);
        assert_eq!(percentile(&v, 90), 100);
        assert_eq!(percentile(&v, 95), 100);
        // 7 samples: 7*50/100 = 3, 7*90/100 = 6.
        let v = [1, 2, 3, 4, 5, 6, 7];
        assert_eq!(percentile(&v, 50), 4);
        assert_eq!(percentile(&v, 90), 7);
        assert_eq!(percentile(&[], 50), 0);
        assert_eq!(percentile(&[42], 95), 42);
        let p = Percentiles::of_sorted(&(0..1000).collect::<Vec<u64>>());
        assert_eq!(
            (p.p50, p.p90, p.p95, p.p99, p.max),
            (500, 900, 950, 990, 999)
        );
    }

    #[test]
    fn cdf() {
        let v: Vec<u64> = (0..10_000).collect();
        let c = cdf_points(&v);
        assert_eq!(c.len(), cdf_levels().len());
        assert_eq!(c[0], (0.0, 0));
        assert_eq!(c[50], (0.5, 5000));
        assert_eq!(*c.last().unwrap(), (1.0, 9999));
        assert!(c.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert!(cdf_points(&[]).is_empty());
    }

    #[test]
    fn median_min_max() {
        assert_eq!(
            Mmm::of([3.0, 1.0, 2.0]),
            Mmm {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(
            Mmm::of([4.0, 1.0, 2.0, 3.0]),
            Mmm {
                median: 2.5,
                min: 1.0,
                max: 4.0
            }
        );
        assert_eq!(Mmm::of([]), Mmm::default());
    }
}
