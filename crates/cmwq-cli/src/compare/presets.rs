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

use std::collections::BTreeMap;

use cmwq_lab::compare::{RunRecord, Side};
use cmwq_lab::latency::Clat;
use cmwq_lab::stats::{Summary, Verdict};

/// Shard sizes of seed 002's table.
pub const SEED_SHARD_SIZES: &str = "2,4,8,16";

/// `base`, then each of `defaults` ("--flag value") that `extra` does not set
/// itself, then `extra`.
pub fn with_defaults(base: &str, defaults: &[&str], extra: &str) -> String {
    let given: Vec<&str> = extra
        .split_whitespace()
        .filter(|t| t.starts_with("--"))
        .collect();
    let mut out = base.to_string();
    for d in defaults {
        let flag = d.split_whitespace().next().unwrap_or(d);
        if !given.contains(&flag) {
            out.push(' ');
            out.push_str(d);
        }
    }
    if !extra.trim().is_empty() {
        out.push(' ');
        out.push_str(extra.trim());
    }
    out
}

/// A side that runs this `cmwq` binary with `args` (and `--json`).
fn own(label: &str, args: String) -> Result<Side, String> {
    let mut s = super::compare::side(label, &Some(args), &None)?;
    s.label = label.to_string();
    Ok(s)
}

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
        cmwq_lab::stats::median(&v)
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
    fn defaults_yield_to_the_users_options() {
        assert_eq!(
            with_defaults(
                "bench",
                &["--threads 8", "--rounds 1"],
                "--threads 2 --items 9"
            ),
            "bench --rounds 1 --threads 2 --items 9"
        );
        assert_eq!(with_defaults("x", &["--a 1"], " "), "x --a 1");
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
