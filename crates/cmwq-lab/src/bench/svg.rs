//! `--plot FILE.svg`: a hand-written SVG, no plotting dependency.
//!
//! Two panels: items/s per executor and scope (bar = median over rounds, whisker =
//! min..max, since the spread between rounds is the noise floor a reader must see),
//! and the round-trip latency distribution of each row's median-throughput round:
//! log time on x, quantile on a log-tail axis on y (p50, p90, p99, p99.9, ... evenly
//! spaced), because the tail is where sleeping, spinning and IPI-bound executors
//! differ, and a linear CDF squeezes it into one pixel row.

use std::fmt::Write as _;

use super::runner::Report;
use super::summary::RowSummary;
use crate::svg::{PALETTE, axis_titles, esc, nice_ticks, note_lines, svg_open, tick_labels};

const W: f64 = 960.0;
const PANEL_H: f64 = 340.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 180.0;

/// Top of the tail axis, where the maximum sample is drawn (p99.99 is at 4).
const TAIL_MAX: f64 = 4.5;

/// Position of quantile `q` on the tail axis, `-log10(1 - q)`: 0 at q = 0, 1 at p90,
/// 2 at p99, 3 at p99.9, 4 at p99.99, and [`TAIL_MAX`] for the maximum.
fn tail(q: f64) -> f64 {
    if q >= 1.0 {
        TAIL_MAX
    } else {
        (-(1.0 - q).log10()).clamp(0.0, 4.0)
    }
}

/// `executor` or `executor/scope`.
fn row_label(r: &RowSummary) -> String {
    if r.scope == "-" {
        r.executor.clone()
    } else {
        format!("{}/{}", r.executor, r.scope)
    }
}

/// Where a panel's plot area lies: its top, left edge and size.
#[derive(Clone, Copy)]
struct Area {
    top: f64,
    w: f64,
    h: f64,
}

/// Render the report as an SVG document; `notes` go under the title (the
/// machine, the commit and the command: [`crate::svg::provenance`]).
pub fn render(report: &Report, notes: &[String]) -> String {
    let head = 14.0 * notes.len() as f64;
    let h = 2.0 * PANEL_H + 60.0 + head;
    let mut s = String::new();
    let c = &report.config;
    let title = format!(
        "cmwq bench: P={} N={} batch={} workers={} rounds={}",
        c.threads, c.items, c.batch, c.workers, c.rounds
    );
    svg_open(&mut s, (W, h), 11, (20.0, 14), &title);
    note_lines(&mut s, W / 2.0, 36.0, notes);
    let top = 56.0 + head;
    let plot_h = PANEL_H - 80.0;
    throughput_panel(
        &mut s,
        report,
        Area {
            top,
            w: W - LEFT - 40.0,
            h: plot_h,
        },
    );
    latency_panel(
        &mut s,
        report,
        Area {
            top: top + PANEL_H + 40.0,
            w: W - LEFT - RIGHT,
            h: plot_h,
        },
    );
    s.push_str("</svg>\n");
    s
}

/// Panel 1: items/s per row, bars (median) with whiskers (min..max).
fn throughput_panel(s: &mut String, report: &Report, a: Area) {
    let rows = &report.rows;
    let one_round = report.config.rounds < 2;
    let (ticks, step) = nice_ticks(
        0.0,
        rows.iter().map(|r| r.items_per_sec.max).fold(0.0, f64::max),
    );
    let ymax = ticks[ticks.len() - 1];
    let y = |v: f64| a.top + a.h - v / ymax * a.h;
    let whiskers = if one_round {
        "one round: bars only, no whiskers"
    } else {
        "bar = median, whiskers = min..max over rounds"
    };
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{}" >items/s per executor and scope ({whiskers}); higher = better</text>"#,
        a.top - 6.0
    );
    for (&v, label) in ticks.iter().zip(tick_labels(&ticks, step)) {
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{label}</text>"##,
            LEFT + a.w,
            LEFT - 4.0,
            yy + 4.0,
        );
    }
    axis_titles(
        s,
        (18.0, a.top + a.h / 2.0, "items/s"),
        (LEFT + a.w / 2.0, a.top + a.h + 76.0, "executor/scope"),
    );
    if one_round {
        let _ = writeln!(
            s,
            r##"<text class="note" x="{:.1}" y="{:.1}" text-anchor="end" fill="#a00">Note: one round, so there is no spread to show; run --rounds 3 or more to see the noise.</text>"##,
            LEFT + a.w,
            a.top + 10.0
        );
    }
    let slot = a.w / rows.len().max(1) as f64;
    for (i, r) in rows.iter().enumerate() {
        bar(
            s,
            i,
            r,
            (LEFT + slot * i as f64 + slot * 0.15, slot * 0.7),
            a,
            &y,
            one_round,
        );
    }
}

/// Row `i`'s bar at `x.0`, `x.1` wide, its whisker unless `one_round`, and
/// its label under the axis.
fn bar(
    s: &mut String,
    i: usize,
    r: &RowSummary,
    (x0, bw): (f64, f64),
    a: Area,
    y: &dyn Fn(f64) -> f64,
    one_round: bool,
) {
    let m = &r.items_per_sec;
    let _ = writeln!(
        s,
        r#"<rect x="{x0:.1}" y="{:.1}" width="{bw:.1}" height="{:.1}" fill="{}"><title>{} {}: {:.0} items/s [{:.0}..{:.0}]</title></rect>"#,
        y(m.median),
        (a.top + a.h - y(m.median)).max(0.0),
        PALETTE[i % PALETTE.len()],
        esc(&r.executor),
        esc(&r.scope),
        m.median,
        m.min,
        m.max
    );
    let xc = x0 + bw / 2.0;
    if !one_round {
        let _ = writeln!(
            s,
            r#"<path class="whisker" d="M{xc:.1} {:.1}V{:.1}M{:.1} {:.1}h{:.1}M{:.1} {:.1}h{:.1}" stroke="black" fill="none"/>"#,
            y(m.min),
            y(m.max),
            xc - 5.0,
            y(m.min),
            10.0,
            xc - 5.0,
            y(m.max),
            10.0
        );
    }
    let label = row_label(r);
    let ly = a.top + a.h + 12.0;
    let _ = writeln!(
        s,
        r#"<text x="{xc:.1}" y="{ly:.1}" text-anchor="end" transform="rotate(-35 {xc:.1} {ly:.1})">{}</text>"#,
        esc(&label)
    );
}

/// The decades (`l0`, `l1`, powers of ten) the round-trip axis spans: those
/// around every row's median-round distribution.
fn decades(report: &Report) -> (f64, f64) {
    let all = report
        .rows
        .iter()
        .flat_map(|r| report.runs[r.median_run].round_trip_cdf.iter().map(|p| p.1));
    let (lo, hi) = all.fold((u64::MAX, 0u64), |(lo, hi), v| {
        (lo.min(v.max(1)), hi.max(v))
    });
    let (lo, hi) = if lo > hi {
        (1u64, 10u64)
    } else {
        (lo, hi.max(lo + 1))
    };
    let l0 = (lo as f64).log10().floor();
    let l1 = (hi as f64).log10().ceil().max(l0 + 1.0);
    (l0, l1)
}

/// Panel 2: round-trip distribution: log time on x, log tail (1 - q) on y.
fn latency_panel(s: &mut String, report: &Report, a: Area) {
    let (l0, l1) = decades(report);
    let x = |ns: u64| LEFT + ((ns.max(1) as f64).log10() - l0) / (l1 - l0) * a.w;
    let y2 = |q: f64| a.top + a.h - tail(q) / TAIL_MAX * a.h;
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{}">round trip (queue to completion seen), median round of each row: further left = better</text>"#,
        a.top - 6.0
    );
    axis_titles(
        s,
        (18.0, a.top + a.h / 2.0, "quantile (tail stretched)"),
        (
            LEFT + a.w / 2.0,
            a.top + a.h + 30.0,
            "round-trip latency (log scale)",
        ),
    );
    latency_grid(s, a, (l0, l1), &y2);
    for (i, r) in report.rows.iter().enumerate() {
        let cdf = &report.runs[r.median_run].round_trip_cdf;
        if cdf.len() < 2 {
            continue;
        }
        let pts: Vec<String> = cdf
            .iter()
            .map(|&(q, v)| format!("{:.1},{:.1}", x(v), y2(q)))
            .collect();
        curve(s, i, r, &pts, a);
    }
}

/// The latency panel's grid: a labelled line per decade of time and per
/// quantile of the tail axis.
fn latency_grid(s: &mut String, a: Area, (l0, l1): (f64, f64), y2: &dyn Fn(f64) -> f64) {
    let mut d = l0 as i32;
    while d <= l1 as i32 {
        let ns = 10f64.powi(d);
        let xx = LEFT + (d as f64 - l0) / (l1 - l0) * a.w;
        let lab = if ns >= 1e6 {
            format!("{}ms", ns / 1e6)
        } else if ns >= 1e3 {
            format!("{}us", ns / 1e3)
        } else {
            format!("{ns}ns")
        };
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{}" y2="{:.1}" stroke="#ddd"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{lab}</text>"##,
            a.top,
            a.top + a.h,
            a.top + a.h + 14.0
        );
        d += 1;
    }
    for (q, lab) in [
        (0.0, "0"),
        (0.5, "p50"),
        (0.9, "p90"),
        (0.99, "p99"),
        (0.999, "p99.9"),
        (0.9999, "p99.99"),
        (1.0, "max"),
    ] {
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{lab}</text>"##,
            LEFT + a.w,
            y2(q),
            y2(q),
            LEFT - 4.0,
            y2(q) + 4.0
        );
    }
}

/// Row `i`'s distribution through `pts` (dashed for an executor without
/// scopes) and its legend entry right of the panel.
fn curve(s: &mut String, i: usize, r: &RowSummary, pts: &[String], a: Area) {
    let col = PALETTE[i % PALETTE.len()];
    let dash = if r.scoped {
        ""
    } else {
        r#" stroke-dasharray="5 3""#
    };
    let label = row_label(r);
    let _ = writeln!(
        s,
        r#"<polyline points="{}" fill="none" stroke="{col}" stroke-width="1.5"{dash}><title>{}</title></polyline>"#,
        pts.join(" "),
        esc(&label)
    );
    let ly = a.top + 10.0 + 14.0 * i as f64;
    let lx = LEFT + a.w + 10.0;
    let _ = writeln!(
        s,
        r#"<line x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{col}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
        lx + 20.0,
        lx + 24.0,
        ly + 4.0,
        esc(&label)
    );
}
