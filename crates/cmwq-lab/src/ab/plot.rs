//! `cmwq compare --plot FILE.svg`: every run of every side, metric by metric,
//! as small multiples of strip plots, in hand-written SVG (no plotting
//! dependency; the helpers it shares with the bench and mix plots are in
//! [`crate::svg`]).
//!
//! A table of medians hides what an A/B argument turns on: whether the two
//! sides' runs overlap, and whether one run is an outlier. A strip plot shows
//! each run as a point, sides side by side in one panel per metric, the median
//! as a bar across each side's points. Each panel states in words what the
//! table says for it (`B vs A: +3.21% ** (higher = better), better`), so a
//! reader sees the verdict without the table; the y axis of a metric that is
//! never negative starts at 0 with 1-2-5 ticks, so bar heights compare at a
//! glance and a small shift is read from the stated delta, not from a
//! zoomed axis. Every axis has a title; the lines under the plot's title say
//! which machine, commit and command made it; a side with a single run is
//! called out. Failed runs are not drawn (they are reported, not averaged in).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::ab::run::RunRecord;
use crate::svg::{PALETTE, axis_titles, esc, nice_ticks, note_lines, svg_open, tick_labels};

/// What one panel says about an experiment side against the baseline, from
/// its A/B table: `B vs A: +3.21% ** (higher = better)`.
fn verdict_line(
    tables: &[(usize, crate::ab::table::AbTable)],
    sides: &[String],
    metric: &str,
) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (k, t) in tables {
        let Some(row) = t.compared().find(|r| r.metric == metric) else {
            continue;
        };
        let st = &row.stats;
        let delta = st
            .delta_pct
            .map_or_else(|| "n/a".to_string(), |d| format!("{d:+.2}%"));
        let dir = st.direction.phrase().unwrap_or("no better direction");
        let who = |i: usize| sides.get(i).map_or(format!("side {i}"), |l| short_label(l));
        let mut line = format!(
            "{} vs {}: {delta} {} ({dir})",
            who(*k),
            who(0),
            st.verdict.symbol()
        );
        if st.verdict == crate::ab::stats::Verdict::Significant
            && let Some(b) = st.better
        {
            line.push_str(if b { ", better" } else { ", worse" });
        }
        out.push((*k, line));
    }
    out
}

const COLS: usize = 3;
const PW: f64 = 320.0;
const PH: f64 = 200.0;
/// Height of one verdict line at the top of a panel.
const VERDICT_H: f64 = 12.0;

/// What a strip plot shows: every run of every side, one panel per metric.
pub struct StripPlot<'a> {
    /// The title line.
    pub title: &'a str,
    /// Lines under the title: the machine, the commit, the command.
    pub notes: &'a [String],
    /// `sides[i]` labels side `i` (baseline first).
    pub sides: &'a [String],
    /// The runs; failed ones are not drawn.
    pub records: &'a [RunRecord],
    /// The metrics, one panel each, in this order.
    pub metrics: &'a [String],
    /// The A/B tables, as `(experiment side, table)`: each panel states the
    /// delta, the verdict and which direction is better for every experiment
    /// side whose table has the metric.
    pub tables: &'a [(usize, crate::ab::table::AbTable)],
}

/// Renders the strip plots of `p.metrics` (in that order) over the successful
/// runs in `p.records`. Each point is a `<circle class="run">` with
/// `data-side` and `data-run` attributes, inside a `<g class="panel"
/// data-metric="...">` per metric, whose `<text class="verdict">` lines give
/// the A/B verdicts. The y axis of a metric with no negative value starts at
/// 0, with 1-2-5 ticks ([`nice_ticks`]); every axis has a title.
pub fn strip_plot(p: &StripPlot<'_>) -> String {
    let StripPlot {
        title,
        notes,
        sides,
        records,
        metrics,
        tables,
    } = *p;
    let nexp = tables.len();
    let ph_all = PH + VERDICT_H * nexp as f64;
    let rows = metrics.len().div_ceil(COLS).max(1);
    let w = PW * COLS as f64;
    let head = 34.0 + 14.0 * notes.len() as f64;
    let ok: Vec<&RunRecord> = records.iter().filter(|r| r.error.is_none()).collect();
    let runs_per_side: Vec<usize> = (0..sides.len())
        .map(|si| ok.iter().filter(|r| r.side == si).count())
        .collect();
    let thin = runs_per_side.iter().any(|&n| n < 2);
    let foot = 20.0 * sides.len() as f64 + if thin { 20.0 } else { 0.0 } + 10.0;
    let h = head + ph_all * rows as f64 + foot;
    let mut s = String::new();
    svg_open(&mut s, (w, h), 10, (18.0, 13), title);
    note_lines(&mut s, w / 2.0, 32.0, notes);
    for (k, m) in metrics.iter().enumerate() {
        let (px, py) = ((k % COLS) as f64 * PW, head + (k / COLS) as f64 * ph_all);
        let vtop = py + 20.0;
        let (left, top) = (px + 62.0, vtop + VERDICT_H * nexp as f64 + 4.0);
        let (pw, ph) = (PW - 76.0, PH - 66.0);
        let mut by_side: BTreeMap<usize, Vec<(usize, f64)>> = BTreeMap::new();
        for r in &ok {
            if let Some(&v) = r.metrics.get(m).filter(|v| v.is_finite()) {
                by_side.entry(r.side).or_default().push((r.index, v));
            }
        }
        let all: Vec<f64> = by_side.values().flatten().map(|&(_, v)| v).collect();
        let (mut lo, mut hi) = all
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        // A metric that is never negative starts at 0.
        if lo >= 0.0 {
            lo = 0.0;
        }
        if hi <= 0.0 && lo < 0.0 {
            hi = 0.0;
        }
        let (ticks, step) = nice_ticks(lo, hi);
        let (lo, hi) = (ticks[0], ticks[ticks.len() - 1]);
        let y = |v: f64| top + ph - (v - lo) / (hi - lo) * ph;
        let _ = writeln!(s, r#"<g class="panel" data-metric="{}">"#, esc(m));
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="middle" font-size="11" font-weight="bold">{}</text><rect x="{left:.1}" y="{top:.1}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#bbb"/>"##,
            px + PW / 2.0,
            py + 14.0,
            esc(m)
        );
        for (i, (side, line)) in verdict_line(tables, sides, m).into_iter().enumerate() {
            let _ = writeln!(
                s,
                r#"<text class="verdict" x="{}" y="{:.1}" text-anchor="middle" fill="{}">{}</text>"#,
                px + PW / 2.0,
                vtop + VERDICT_H * (i as f64 + 0.8),
                PALETTE[side % PALETTE.len()],
                esc(&line)
            );
        }
        for (&v, label) in ticks.iter().zip(tick_labels(&ticks, step)) {
            let yy = y(v);
            let _ = writeln!(
                s,
                r##"<line x1="{left:.1}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#eee"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                left + pw,
                left - 3.0,
                yy + 3.0,
                label
            );
        }
        // Axis titles: the metric on y, the sides on x.
        axis_titles(
            &mut s,
            (px + 12.0, top + ph / 2.0, m),
            (
                left + pw / 2.0,
                top + ph + 26.0,
                "side (each dot a run, bar = median)",
            ),
        );
        let nsides = sides.len().max(1) as f64;
        let slot = pw / nsides;
        for (si, label) in sides.iter().enumerate() {
            let cx = left + slot * (si as f64 + 0.5);
            let col = PALETTE[si % PALETTE.len()];
            let _ = writeln!(
                s,
                r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                top + ph + 12.0,
                esc(&short_label(label))
            );
            let Some(pts) = by_side.get(&si) else {
                continue;
            };
            let n = pts.len().max(1) as f64;
            for &(run, v) in pts {
                // Spread the runs across 60% of the slot, in run order.
                let jx = cx + slot * 0.6 * ((run as f64 + 0.5) / n - 0.5);
                let _ = writeln!(
                    s,
                    r#"<circle class="run" data-side="{si}" data-run="{run}" cx="{jx:.1}" cy="{:.1}" r="3" fill="{col}" fill-opacity="0.7"><title>{} run {run}: {v}</title></circle>"#,
                    y(v),
                    esc(label)
                );
            }
            let vs: Vec<f64> = pts.iter().map(|&(_, v)| v).collect();
            let med = crate::ab::stats::median(&vs).unwrap_or(vs[0]);
            let _ = writeln!(
                s,
                r#"<line x1="{:.1}" x2="{:.1}" y1="{ym:.1}" y2="{ym:.1}" stroke="{col}" stroke-width="2"/>"#,
                cx - slot * 0.38,
                cx + slot * 0.38,
                ym = y(med)
            );
        }
        let _ = writeln!(s, "</g>");
    }
    let mut ly = head + ph_all * rows as f64 + 6.0;
    if thin {
        let _ = writeln!(
            s,
            r##"<text class="note" x="16" y="{ly:.1}" fill="#a00">Note: a side with a single run shows no spread and gets no meaningful verdict; use more --runs.</text>"##
        );
        ly += 20.0;
    }
    for (si, label) in sides.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<circle cx="16" cy="{:.1}" r="4" fill="{}"/><text x="26" y="{:.1}">{}</text>"#,
            ly + 20.0 * si as f64 - 4.0,
            PALETTE[si % PALETTE.len()],
            ly + 20.0 * si as f64,
            esc(label)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The first word of a long side label, for the x axis (`A: bench ...` → `A`).
fn short_label(label: &str) -> String {
    let l = label.split(':').next().unwrap_or(label).trim();
    if l.chars().count() > 14 {
        l.chars().take(13).collect::<String>() + "…"
    } else {
        l.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(side: usize, index: usize, x: f64, ok: bool) -> RunRecord {
        RunRecord {
            side,
            index,
            metrics: if ok {
                [("x".to_string(), x), ("wall s".to_string(), 1.0)].into()
            } else {
                BTreeMap::new()
            },
            error: (!ok).then(|| "boom".to_string()),
        }
    }

    #[test]
    fn one_point_per_successful_run_and_metric() {
        let recs = vec![
            rec(0, 0, 10.0, true),
            rec(1, 0, 20.0, true),
            rec(0, 1, 11.0, true),
            rec(1, 1, 0.0, false),
            rec(0, 2, 12.0, true),
            rec(1, 2, 21.0, true),
        ];
        let sides = ["A: x <&> y".to_string(), "B".to_string()];
        let svg = strip_plot(&StripPlot {
            title: "t",
            notes: &[],
            sides: &sides,
            records: &recs,
            metrics: &["x".into(), "wall s".into()],
            tables: &[],
        });
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches(r#"class="run""#).count(), 2 * 5);
        assert_eq!(svg.matches(r#"data-side="1""#).count(), 2 * 2);
        assert_eq!(svg.matches(r#"class="panel""#).count(), 2);
        assert!(svg.contains("A: x &lt;&amp;&gt; y") && !svg.contains("<&>"));
        // A higher value is drawn higher (smaller y).
        let cy = |side: &str, run: &str| -> f64 {
            let at = svg
                .find(&format!(r#"data-side="{side}" data-run="{run}""#))
                .unwrap();
            let rest = &svg[at..];
            let v = &rest[rest.find("cy=\"").unwrap() + 4..];
            v[..v.find('"').unwrap()].parse().unwrap()
        };
        assert!(cy("1", "0") < cy("0", "0"));
    }

    /// The numbers of every tick label in `svg`.
    fn ticks_of(svg: &str) -> Vec<String> {
        svg.split(r#"class="tick""#)
            .skip(1)
            .map(|t| {
                let t = &t[t.find('>').unwrap() + 1..];
                t[..t.find('<').unwrap()].to_string()
            })
            .collect()
    }

    #[test]
    fn panels_state_delta_verdict_and_direction_without_negative_ticks() {
        // items/s: B 10% faster in every run, clearly beyond noise.
        let mut recs = Vec::new();
        for i in 0..8 {
            let a = 1000.0 + i as f64;
            for (side, v) in [(0, a), (1, a * 1.1)] {
                recs.push(RunRecord {
                    side,
                    index: i,
                    metrics: [
                        ("items/s".to_string(), v),
                        ("p99_ns".to_string(), 50.0 + (i % 3) as f64),
                    ]
                    .into(),
                    error: None,
                });
            }
        }
        let table = crate::ab::run::table_pair(
            &recs,
            0,
            1,
            crate::ab::stats::CompareConfig::default(),
            "t",
        )
        .unwrap();
        let sides = ["A: base".to_string(), "B: new".to_string()];
        let notes = [
            "machine: 2 CPUs".to_string(),
            "command: cmwq compare".to_string(),
        ];
        let svg = strip_plot(&StripPlot {
            title: "t",
            notes: &notes,
            sides: &sides,
            records: &recs,
            metrics: &["items/s".into(), "p99_ns".into()],
            tables: &[(1, table)],
        });
        assert!(svg.contains("machine: 2 CPUs") && svg.contains("command: cmwq compare"));
        let verdicts: Vec<&str> = svg
            .split(r#"class="verdict""#)
            .skip(1)
            .map(|t| &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()])
            .collect();
        assert_eq!(verdicts.len(), 2, "{verdicts:?}");
        assert!(
            verdicts[0].starts_with("B vs A: +10.")
                && verdicts[0].contains("% ** (higher = better), better"),
            "{}",
            verdicts[0]
        );
        assert!(
            verdicts[1].starts_with("B vs A: ") && verdicts[1].contains("(lower = better)"),
            "{}",
            verdicts[1]
        );
        assert!(
            verdicts[1].contains(" flat ") || verdicts[1].contains(" ns "),
            "{}",
            verdicts[1]
        );
        // Positive metrics: the axis starts at 0, no tick is negative.
        let ticks = ticks_of(&svg);
        assert!(!ticks.is_empty());
        assert!(ticks.iter().all(|t| !t.starts_with('-')), "{ticks:?}");
        assert_eq!(ticks.iter().filter(|t| *t == "0").count(), 2, "{ticks:?}");
        // An axis title on both axes of each panel.
        assert_eq!(svg.matches(r#"class="axis-title""#).count(), 2 * 2);
        // Enough runs: no single-run note.
        assert!(!svg.contains("single run"));
    }

    #[test]
    fn a_single_run_is_called_out() {
        let recs = vec![rec(0, 0, 10.0, true), rec(1, 0, 12.0, true)];
        let sides = ["A".to_string(), "B".to_string()];
        let svg = strip_plot(&StripPlot {
            title: "t",
            notes: &[],
            sides: &sides,
            records: &recs,
            metrics: &["x".into()],
            tables: &[],
        });
        assert!(
            svg.contains("a side with a single run shows no spread"),
            "{svg}"
        );
    }
}
