//! The seed experiments as presets of `cmwq compare`: which sides run, and the
//! extra tables their seed threads print.
//!
//! Side 0 is always the baseline; every other side is compared against it.
//! `--a ARGS` adds arguments to the baseline, `--b ARGS` to every other side;
//! an option given there replaces the preset's default for it.
//!
//! - `shard` (seed 002): `bench --scopes cache` against `bench --scopes
//!   cache_shard --cache-shard-size N` for N in `--shard-sizes` (2, 4, 8, 16),
//!   on a synthetic single-LLC 32-core machine (`--synthetic core:32`, 8
//!   producers spread over it) so that the shard sizes cut different pods on
//!   any machine. The seed's table: per shard size, the mean and standard
//!   deviation of the per-round change against the cache run of the same round.
//! - `priority` (seed 004): `cmwq latency` with the stream's workqueue at
//!   normal, high (nice -20) and fifo (SCHED_FIFO) priority while hogs load
//!   every CPU at 90%; fio's clat lines per side (medians of the runs), then
//!   one A/B table per priority against normal.
//! - `wake` (seed 000): `bench --wake deferred` against `--wake under-lock`,
//!   one table per executor and scope.
//! - `qpw-cost`, `qpw-isolation`: `percpu cost` / `percpu isolation` with
//!   `--mode local` against `--mode qpw`.
//! - `icache` (seed 001): a study of its own, in `icache.rs`.
//!
//! What differs from preset to preset is a method of [`Preset`]: its sides,
//! whether runs compare field by field across scopes, the extra tables, and
//! how its A/B tables are laid out.

use std::collections::BTreeMap;

use cmwq_lab::ab::run::{RunRecord, Side};
use cmwq_lab::ab::stats::{Summary, Verdict};
use cmwq_lab::ab::table::AbTable;
use cmwq_lab::latency::Clat;

use super::side::{own, side, with_defaults};

/// A ready-made experiment of `cmwq compare --preset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    // Seed 000: worker wakeups outside the pool lock.
    Wake,
    // Seed 002: the cache_shard scope at several shard sizes.
    Shard,
    // Seed 004: the SCHED_FIFO switch of high-priority pools.
    Priority,
    // QPW per-CPU state: fast-path cost (an A/A check in user space).
    QpwCost,
    // QPW per-CPU state: isolation of a pinned loop.
    QpwIsolation,
    // Seed 001: the unlock path inlined or not (a study of its own).
    Icache,
}

/// What a preset prints besides its A/B tables.
#[derive(Debug, Default)]
pub struct Extras {
    /// Seed 002's rows (`shard`).
    pub shard: Option<Vec<ShardRow>>,
    /// fio's clat lines per side label (`priority`).
    pub fio: Vec<(String, Clat)>,
}

impl Preset {
    /// The name given to `--preset` (and shown in the JSON).
    pub fn name(self) -> &'static str {
        match self {
            Preset::Wake => "wake",
            Preset::Shard => "shard",
            Preset::Priority => "priority",
            Preset::QpwCost => "qpw-cost",
            Preset::QpwIsolation => "qpw-isolation",
            Preset::Icache => "icache",
        }
    }

    /// The sides, baseline first: `extra_a` (`--a`) goes to the baseline,
    /// `extra_b` (`--b`) to every other side. `icache` has no sides of its
    /// own here (it runs two builds of this binary).
    pub fn sides(
        self,
        extra_a: &str,
        extra_b: &str,
        shard_sizes: &str,
    ) -> Result<Vec<Side>, String> {
        let pair = |a: String, b: String| -> Result<Vec<Side>, String> {
            Ok(vec![
                side("A", &Some(a), &None)?,
                side("B", &Some(b), &None)?,
            ])
        };
        match self {
            Preset::Wake => pair(
                format!("bench --wake deferred {extra_a}"),
                format!("bench --wake under-lock {extra_b}"),
            ),
            Preset::Shard => shard(extra_a, extra_b, &parse_shard_sizes(shard_sizes)?),
            Preset::Priority => priority(extra_a, extra_b),
            Preset::QpwCost | Preset::QpwIsolation => {
                let cmd = if self == Preset::QpwCost {
                    "cost"
                } else {
                    "isolation"
                };
                pair(
                    format!("percpu {cmd} --mode local {extra_a}"),
                    format!("percpu {cmd} --mode qpw {extra_b}"),
                )
            }
            Preset::Icache => Err("--preset icache runs its own study, not sides".into()),
        }
    }

    /// Makes runs of different scopes comparable field by field (`shard`:
    /// cache and cache_shard runs name their rows by scope).
    pub fn prepare(self, records: &mut [RunRecord]) {
        if self == Preset::Shard {
            strip_scope(records);
        }
    }

    /// The extra tables: seed 002's rows for `shard` (from the per-round
    /// changes and the verdicts of `tables`), fio's clat lines for `priority`.
    pub fn extras(
        self,
        sides: &[Side],
        records: &[RunRecord],
        tables: &[(usize, AbTable)],
        shard_sizes: &str,
    ) -> Extras {
        match self {
            Preset::Shard => {
                let sizes = parse_shard_sizes(shard_sizes).unwrap_or_default();
                let verdict = |k: usize, m: &str| {
                    tables
                        .iter()
                        .find(|(j, _)| *j == k)
                        .and_then(|(_, t)| t.compared().find(|r| r.metric == m))
                        .map(|r| r.stats.verdict)
                };
                Extras {
                    shard: Some(shard_rows(records, &sizes, &verdict)),
                    fio: Vec::new(),
                }
            }
            Preset::Priority => Extras {
                shard: None,
                fio: (0..sides.len())
                    .filter_map(|k| fio_clat(records, k).map(|c| (sides[k].label.clone(), c)))
                    .collect(),
            },
            _ => Extras::default(),
        }
    }

    /// Whether each A/B table is printed as one table per executor and
    /// scope (seed 000's layout, `wake`).
    pub fn splits_tables(self) -> bool {
        self == Preset::Wake
    }
}

/// Shard sizes of seed 002's table.
pub const SEED_SHARD_SIZES: &str = "2,4,8,16";

/// Parses `--shard-sizes 2,4,8,16`: sizes of at least 1, in the order given.
pub fn parse_shard_sizes(list: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    for t in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match t.parse::<usize>() {
            Ok(n) if n >= 1 => v.push(n),
            _ => {
                return Err(format!(
                    "--shard-sizes: '{t}' is not a shard size (cores per pod, at least 1)"
                ));
            }
        }
    }
    if v.is_empty() {
        return Err(format!("--shard-sizes '{list}': no size given"));
    }
    Ok(v)
}

const SHARD_DEFAULTS: [&str; 3] = ["--synthetic core:32", "--threads 8", "--rounds 1"];

/// The `shard` preset's sides: `cache`, then `shard=N` per size.
pub fn shard(extra_a: &str, extra_b: &str, sizes: &[usize]) -> Result<Vec<Side>, String> {
    let mut sides = vec![own(
        "cache",
        with_defaults("bench --scopes cache", &SHARD_DEFAULTS, extra_a),
    )?];
    for n in sizes {
        sides.push(own(
            &format!("shard={n}"),
            with_defaults(
                &format!("bench --scopes cache_shard --cache-shard-size {n}"),
                &SHARD_DEFAULTS,
                extra_b,
            ),
        )?);
    }
    Ok(sides)
}

/// The `priority` preset's sides: normal, high, fifo.
pub fn priority(extra_a: &str, extra_b: &str) -> Result<Vec<Side>, String> {
    let d = ["--duration-ms 1000"];
    Ok(vec![
        own(
            "normal",
            with_defaults("latency --priority normal", &d, extra_a),
        )?,
        own(
            "high",
            with_defaults("latency --priority high", &d, extra_b),
        )?,
        own(
            "fifo",
            with_defaults("latency --priority fifo", &d, extra_b),
        )?,
    ])
}

/// Drops the scope from `<executor>/<scope> <field>` metric names
/// (`cmwq/cache items_per_sec` → `cmwq items_per_sec`), so that runs of
/// different scopes compare field by field.
pub fn strip_scope(records: &mut [RunRecord]) {
    for r in records {
        let m = std::mem::take(&mut r.metrics);
        r.metrics = m
            .into_iter()
            .map(|(k, v)| match k.split_once(' ') {
                Some((who, field)) if who.contains('/') => {
                    let exec = who.split('/').next().unwrap_or(who);
                    (format!("{exec} {field}"), v)
                }
                _ => (k, v),
            })
            .collect();
    }
}

/// Per-round changes of side `b` against baseline side `a` in percent,
/// `(b_i - a_i) / |a_i|`, over the rounds where both runs succeeded and
/// reported `metric`.
pub fn paired_deltas(records: &[RunRecord], a: usize, b: usize, metric: &str) -> Vec<f64> {
    let get = |s: usize| -> BTreeMap<usize, f64> {
        records
            .iter()
            .filter(|r| r.side == s && r.error.is_none())
            .filter_map(|r| r.metrics.get(metric).map(|&v| (r.index, v)))
            .collect()
    };
    let (ra, rb) = (get(a), get(b));
    ra.iter()
        .filter_map(|(i, &x)| {
            let y = *rb.get(i)?;
            (x != 0.0).then(|| (y - x) / x.abs() * 100.0)
        })
        .collect()
}

/// One row of seed 002's table: a shard size and, per metric, the mean and
/// stdev of the per-round changes plus the A/B verdict of the medians.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ShardRow {
    /// Cores per shard.
    pub shard_size: usize,
    /// Per metric: mean and stdev of per-round deltas (percent), verdict.
    pub metrics: Vec<ShardCell>,
}

/// One metric's cell of a [`ShardRow`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct ShardCell {
    /// Metric name (`cmwq items_per_sec`).
    pub metric: String,
    /// Mean per-round change, percent.
    pub mean_delta_pct: Option<f64>,
    /// Sample stdev of the per-round changes, percent.
    pub stdev_delta_pct: Option<f64>,
    /// Rounds paired.
    pub n: usize,
    /// The verdict (`**`, `ns`, `flat`) of the medians' comparison.
    pub sig: String,
}

/// The metrics of seed 002's table and their column titles.
pub const SHARD_METRICS: [(&str, &str); 2] = [
    ("cmwq items_per_sec", "tput"),
    ("cmwq enqueue_p95_ns", "p95"),
];

/// Seed 002's rows: one per shard size (side `k` ≥ 1 with size `sizes[k-1]`).
pub fn shard_rows(
    records: &[RunRecord],
    sizes: &[usize],
    verdict: &dyn Fn(usize, &str) -> Option<Verdict>,
) -> Vec<ShardRow> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| ShardRow {
            shard_size: size,
            metrics: SHARD_METRICS
                .iter()
                .map(|(m, _)| {
                    let d = paired_deltas(records, 0, i + 1, m);
                    let s = Summary::new(&d).ok();
                    ShardCell {
                        metric: m.to_string(),
                        mean_delta_pct: s.as_ref().map(|s| s.mean),
                        stdev_delta_pct: s.and_then(|s| s.stdev),
                        n: d.len(),
                        sig: verdict(i + 1, m).map_or("-", |v| v.symbol()).to_string(),
                    }
                })
                .collect(),
        })
        .collect()
}

fn pct(x: Option<f64>, signed: bool) -> String {
    match x {
        Some(v) if signed => format!("{v:+.2}%"),
        Some(v) => format!("{v:.2}%"),
        None => "n/a".into(),
    }
}

/// Renders cells as aligned text (first column left, others right) or as a
/// Markdown pipe table.
pub fn grid(header: &[String], rows: &[Vec<String>], markdown: bool) -> String {
    let mut out = String::new();
    if markdown {
        out.push_str(&format!("| {} |\n", header.join(" | ")));
        let rule: Vec<&str> = (0..header.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for r in rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        return out;
    }
    let w: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<width$}", width = w[i])
                } else {
                    format!("{c:>width$}", width = w[i])
                }
            })
            .collect::<Vec<_>>()
            .join("   ")
            .trim_end()
            .to_string()
    };
    let head = line(header);
    let rule = "-".repeat(head.chars().count());
    out.push_str(&format!("{head}\n{rule}\n"));
    for r in rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out.push_str(&rule);
    out.push('\n');
    out
}

/// Seed 002's table as text or Markdown.
pub fn render_shard(rows: &[ShardRow], markdown: bool) -> String {
    let mut header = vec!["Shard Size".to_string()];
    for (_, t) in SHARD_METRICS {
        header.extend([
            format!("{t} Mean"),
            format!("{t} StDev"),
            format!("{t} Sig"),
        ]);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut v = vec![r.shard_size.to_string()];
            for c in &r.metrics {
                v.extend([
                    pct(c.mean_delta_pct, true),
                    pct(c.stdev_delta_pct, false),
                    c.sig.clone(),
                ]);
            }
            v
        })
        .collect();
    let mut out = String::from(
        "cache_shard vs cache: change per round against the cache run of the same round\n\n",
    );
    out.push_str(&grid(&header, &cells, markdown));
    out.push_str(
        "tput = cmwq items/s (higher is better), p95 = cmwq enqueue p95 (lower is better); \
         Mean, StDev over rounds; Sig = verdict of the medians (** beyond noise, ns within it, flat below the floor).\n",
    );
    out
}

/// fio's clat lines of one side: each statistic is the median over the
/// side's successful runs. `None` if no run reported clat.
pub fn fio_clat(records: &[RunRecord], side: usize) -> Option<Clat> {
    let med = |m: &str| -> Option<f64> {
        let v: Vec<f64> = records
            .iter()
            .filter(|r| r.side == side && r.error.is_none())
            .filter_map(|r| r.metrics.get(m).copied())
            .collect();
        cmwq_lab::ab::stats::median(&v)
    };
    Some(Clat {
        n: med("items").unwrap_or(0.0) as usize,
        min: med("clat min us")?,
        max: med("clat max us")?,
        avg: med("clat avg us")?,
        stdev: med("clat stdev us")?,
        p50: med("clat p50 us")?,
        p90: med("clat p90 us")?,
        p99: med("clat p99 us")?,
        p99_9: med("clat p99.9 us")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(side: usize, index: usize, m: &[(&str, f64)]) -> RunRecord {
        RunRecord {
            side,
            index,
            metrics: m.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            error: None,
        }
    }

    #[test]
    fn shard_sizes_parse() {
        assert_eq!(parse_shard_sizes("2, 4,8,16").unwrap(), [2, 4, 8, 16]);
        assert!(parse_shard_sizes("2,0").unwrap_err().contains("'0'"));
        assert!(parse_shard_sizes("x").unwrap_err().contains("'x'"));
        assert!(parse_shard_sizes(",").is_err());
    }

    #[test]
    fn scopes_are_stripped_and_rounds_paired() {
        let mut r = vec![
            rec(
                0,
                0,
                &[("cmwq/cache items_per_sec", 100.0), ("wall s", 1.0)],
            ),
            rec(1, 0, &[("cmwq/cache_shard items_per_sec", 110.0)]),
            rec(0, 1, &[("cmwq/cache items_per_sec", 200.0)]),
            rec(1, 1, &[("cmwq/cache_shard items_per_sec", 190.0)]),
            rec(0, 2, &[("cmwq/cache items_per_sec", 50.0)]),
        ];
        r[4].error = None;
        strip_scope(&mut r);
        assert_eq!(r[0].metrics["cmwq items_per_sec"], 100.0);
        assert_eq!(r[0].metrics["wall s"], 1.0);
        // Round 2 has no B run: only rounds 0 and 1 pair.
        let d = paired_deltas(&r, 0, 1, "cmwq items_per_sec");
        assert_eq!(d, [10.0, -5.0]);
        let rows = shard_rows(&r, &[4], &|_, _| Some(Verdict::NotSignificant));
        let c = &rows[0].metrics[0];
        assert_eq!(c.mean_delta_pct, Some(2.5));
        // stdev of {10, -5}: sqrt(112.5) = 10.6066
        assert!((c.stdev_delta_pct.unwrap() - 10.606_601_717_798_2).abs() < 1e-9);
        assert_eq!(c.sig, "ns");
        let text = render_shard(&rows, false);
        let row = text.lines().find(|l| l.starts_with("4 ")).unwrap();
        assert!(row.contains("+2.50%") && row.contains("10.61%"), "{row}");
        assert!(render_shard(&rows, true).contains("| 4 | +2.50% |"));
    }

    #[test]
    fn fio_lines_take_medians_of_runs() {
        let run = |side, i, p99: f64| {
            rec(
                side,
                i,
                &[
                    ("clat min us", 10.0),
                    ("clat max us", 900.0),
                    ("clat avg us", 20.0),
                    ("clat stdev us", 5.0),
                    ("clat p50 us", 15.0),
                    ("clat p90 us", 30.0),
                    ("clat p99 us", p99),
                    ("clat p99.9 us", 500.0),
                    ("items", 1000.0),
                ],
            )
        };
        let r = vec![run(0, 0, 100.0), run(0, 1, 300.0), run(0, 2, 200.0)];
        let c = fio_clat(&r, 0).unwrap();
        assert_eq!(c.p99, 200.0);
        assert_eq!(c.n, 1000);
        assert!(fio_clat(&r, 1).is_none());
    }
}
