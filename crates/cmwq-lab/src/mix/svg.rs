//! `cmwq mix --plot FILE.svg`: the p99 queueing delay of the CPU jobs, a group
//! of bars per block time, a bar per executor (median over rounds, whisker =
//! min..max), on a log axis: the executors differ by up to four decades.

use std::fmt::Write as _;

use super::report::human_ns;
use super::runner::MixReport;
use crate::svg::{PALETTE, axis_titles, esc, note_lines, svg_open};

const W: f64 = 960.0;
const PLOT_H: f64 = 360.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 170.0;

/// The label of 10^`d` ns: `100ns`, `10us`, `1ms`, `10s`.
fn decade(d: i32) -> String {
    let (unit, exp) = match d {
        ..3 => ("ns", 0),
        3..6 => ("us", 3),
        6..9 => ("ms", 6),
        _ => ("s", 9),
    };
    format!("{}{unit}", 10u64.pow((d.max(0) - exp) as u32))
}

/// Render the report as an SVG document; `notes` go under the title
/// ([`crate::svg::provenance`]).
pub fn render(report: &MixReport, notes: &[String]) -> String {
    let c = &report.config;
    let head = 14.0 * notes.len() as f64;
    let top = 60.0 + head;
    let h = top + PLOT_H + 60.0;
    let plot_w = W - LEFT - RIGHT;
    let mut s = String::new();
    let title = format!(
        "cmwq mix: p99 queueing delay of the CPU jobs (P={} N={} rate={}/s, 1 in {} blocks by {}, C={} us, rounds={}); lower = better",
        c.producers,
        c.jobs,
        c.rate,
        c.block_every,
        c.block_kind.name(),
        c.cpu_us,
        c.rounds
    );
    svg_open(&mut s, (W, h), 11, (20.0, 14), &title);
    note_lines(&mut s, W / 2.0, 36.0, notes);

    let rows = &report.rows;
    let vals = rows.iter().flat_map(|r| {
        let m = &r.cpu_delay_p99_ns;
        [m.min, m.max]
    });
    let (lo, hi) = vals.fold((f64::MAX, 0f64), |(lo, hi), v| {
        (lo.min(v.max(1.0)), hi.max(v))
    });
    let (lo, hi) = if lo > hi { (1e3, 1e6) } else { (lo, hi) };
    let d0 = lo.log10().floor();
    let d1 = hi.log10().ceil().max(d0 + 1.0);
    let y = |ns: f64| top + PLOT_H - (ns.max(1.0).log10() - d0) / (d1 - d0) * PLOT_H;
    for d in d0 as i32..=d1 as i32 {
        let yy = y(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 4.0,
            yy + 4.0,
            decade(d)
        );
    }
    axis_titles(
        &mut s,
        (
            18.0,
            top + PLOT_H / 2.0,
            "p99 delay, submit to start (log scale)",
        ),
        (
            LEFT + plot_w / 2.0,
            top + PLOT_H + 40.0,
            "block time B of the blocking jobs",
        ),
    );
    let execs: Vec<&str> = {
        let mut v: Vec<&str> = Vec::new();
        for r in rows {
            if !v.contains(&r.executor.as_str()) {
                v.push(&r.executor);
            }
        }
        v
    };
    let groups = c.block_us.len().max(1) as f64;
    let gw = plot_w / groups;
    let bw = gw * 0.8 / execs.len().max(1) as f64;
    for (g, &b) in c.block_us.iter().enumerate() {
        let gx = LEFT + gw * g as f64 + gw * 0.1;
        for (i, r) in rows.iter().filter(|r| r.block_us == b).enumerate() {
            let m = &r.cpu_delay_p99_ns;
            let col = execs
                .iter()
                .position(|e| *e == r.executor)
                .map_or(PALETTE[0], |k| PALETTE[k % PALETTE.len()]);
            let x0 = gx + bw * i as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{col}"><title>{} B={}: p99 {} [{}..{}]</title></rect>"#,
                y(m.median),
                bw * 0.9,
                (top + PLOT_H - y(m.median)).max(0.0),
                esc(&r.executor),
                human_ns(b as f64 * 1e3),
                human_ns(m.median),
                human_ns(m.min),
                human_ns(m.max)
            );
            if r.rounds > 1 {
                let xc = x0 + bw * 0.45;
                let _ = writeln!(
                    s,
                    r#"<path class="whisker" d="M{xc:.1} {:.1}V{:.1}" stroke="black" fill="none"/>"#,
                    y(m.min),
                    y(m.max)
                );
            }
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">B = {}</text>"#,
            gx + gw * 0.4,
            top + PLOT_H + 16.0,
            human_ns(b as f64 * 1e3)
        );
    }
    for (k, e) in execs.iter().enumerate() {
        let ly = top + 10.0 + 16.0 * k as f64;
        let lx = LEFT + plot_w + 14.0;
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="10" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            ly - 9.0,
            PALETTE[k % PALETTE.len()],
            lx + 18.0,
            ly,
            esc(e)
        );
    }
    let whiskers = if c.rounds > 1 {
        "bar = median over rounds, whisker = min..max"
    } else {
        "one round: no spread to show"
    };
    let _ = writeln!(
        s,
        r##"<text class="note" x="{LEFT}" y="{:.1}" fill="#444">{whiskers}</text>"##,
        top - 6.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn decades_are_round() {
        let l: Vec<String> = (1..=10).map(super::decade).collect();
        assert_eq!(
            l,
            [
                "10ns", "100ns", "1us", "10us", "100us", "1ms", "10ms", "100ms", "1s", "10s"
            ]
        );
    }
}
