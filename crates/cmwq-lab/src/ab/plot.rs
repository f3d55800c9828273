//! `cmwq compare --plot FILE.svg`: every run of every side, metric by metric,
//! as small multiples of strip plots, in hand-written SVG (no plotting
//! dependency); and the SVG helpers the bench plot shares.
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

use crate::compare::RunRecord;

/// Colours of successive series (sides, executors).
pub(crate) const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Escapes text for SVG content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes a panel's two axis titles: `y.2` rotated and centred on `(y.0,
/// y.1)`, `x.2` centred on `(x.0, x.1)`. Both are escaped.
pub(crate) fn axis_titles(s: &mut String, y: (f64, f64, &str), x: (f64, f64, &str)) {
    let (tx, ty, yt) = y;
    let _ = writeln!(
        s,
        r##"<text class="axis-title" x="{tx:.1}" y="{ty:.1}" text-anchor="middle" transform="rotate(-90 {tx:.1} {ty:.1})" fill="#444">{}</text>"##,
        esc(yt)
    );
    let _ = writeln!(
        s,
        r##"<text class="axis-title" x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
        x.0,
        x.1,
        esc(x.2)
    );
}

/// Opens an SVG document of `w` × `h` on a white background with `title`
/// (escaped) centred at the top, `title_y` down, in `title_size` px; the
/// document's own text is `font_size` px.
pub(crate) fn svg_open(
    s: &mut String,
    (w, h): (f64, f64),
    font_size: u32,
    (title_y, title_size): (f64, u32),
    title: &str,
) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="{font_size}">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{title_y}" text-anchor="middle" font-size="{title_size}">{}</text>"#,
        w / 2.0,
        esc(title)
    );
}

/// Writes `notes` as lines centred on `cx`, the first at `y0`, one every 14 px.
pub(crate) fn note_lines(s: &mut String, cx: f64, y0: f64, notes: &[String]) {
    for (i, n) in notes.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text class="note" x="{cx}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
            y0 + 14.0 * i as f64,
            esc(n)
        );
    }
}

/// Checks that `--plot PATH` can be written, before a run that could take
/// minutes: the name ends in `.svg`, and the file can be opened for writing
/// (an existing file is opened without truncating it; a new one is created
/// and removed again). The message names `--plot` and the path.
pub fn check_plot_path(path: &std::path::Path) -> Result<(), String> {
    let shown = path.display();
    let svg = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    if !svg {
        return Err(format!("--plot {shown}: the plot is SVG, name it FILE.svg"));
    }
    if path.is_dir() {
        return Err(format!("--plot {shown}: is a directory"));
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(!existed)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("--plot {shown}: cannot write it: {e}"))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// The lines a plot carries under its title so that it says where it came
/// from: the machine (CPUs, their model, the kernel), the commit of the build
/// and the command that made it (wrapped at spaces into lines a plot can hold).
pub fn provenance(commit: &str, command: &str) -> Vec<String> {
    const WIDTH: usize = 130;
    let mut lines = vec![
        format!("machine: {}", machine()),
        format!("commit: {commit}"),
    ];
    let mut cur = String::from("command:");
    for word in command.split(' ') {
        if cur.chars().count() + 1 + word.chars().count() > WIDTH && cur.len() > "command:".len() {
            lines.push(std::mem::replace(&mut cur, String::from("   ")));
        }
        cur.push(' ');
        cur.push_str(word);
    }
    lines.push(cur);
    lines
}

/// `N CPUs (model), Linux RELEASE`, from `/proc` and sysfs.
pub fn machine() -> String {
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| cmwq::topology::parse_cpulist(s.trim()).ok())
        .map(|v| v.len())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(0);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!("{cpus} CPUs ({model}), Linux {kernel}")
}

/// Tick values for an axis covering `lo..=hi`: four to eight, at a 1-2-5
/// step (…, 0.5, 1, 2, 5, 10, 20, …) and multiples of it, from the step at or
/// below `lo` to the one at or above `hi`. Returns `(ticks, step)`. A metric
/// that is never negative gets `lo = 0` from its caller, so its axis starts at
/// 0 and never shows a negative tick.
pub fn nice_ticks(lo: f64, hi: f64) -> (Vec<f64>, f64) {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo.min(hi), lo.max(hi))
    } else {
        (0.0, 1.0)
    };
    let span = if hi > lo {
        hi - lo
    } else if hi != 0.0 {
        hi.abs()
    } else {
        1.0
    };
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&st| st >= raw * 0.999)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor();
    let mut last = (hi / step).ceil();
    if last <= first {
        last = first + 1.0;
    }
    let ticks = (0..=(last - first) as i64)
        .map(|i| {
            let v = (first + i as f64) * step;
            // -0.0 and float dust (0.30000000000000004) print badly.
            if v.abs() < step * 1e-9 { 0.0 } else { v }
        })
        .collect();
    (ticks, step)
}

/// Labels for the ticks of one axis (from [`nice_ticks`]): one unit for the
/// whole axis (`k` from 10 000, `M` from 1 000 000), and as many decimals as
/// the step needs in that unit: `0 50k 100k 150k`, `0 0.5 1 1.5`,
/// `0 0.2M 0.4M`; 0 is always `0`.
pub fn tick_labels(ticks: &[f64], step: f64) -> Vec<String> {
    let top = ticks.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let (unit, suffix) = if top >= 1e6 {
        (1e6, "M")
    } else if top >= 1e4 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    // The fewest decimals that print every multiple of the step exactly.
    let st = step / unit;
    let d = (0..9)
        .find(|&d| {
            let x = st * 10f64.powi(d);
            (x - x.round()).abs() < 1e-6 * x.abs().max(1.0)
        })
        .unwrap_or(9) as usize;
    ticks
        .iter()
        .map(|&v| {
            if v == 0.0 {
                "0".to_string()
            } else {
                format!("{:.*}{suffix}", d, v / unit)
            }
        })
        .collect()
}

/// What one panel says about an experiment side against the baseline, from
/// its A/B table: `B vs A: +3.21% ** (higher = better)`.
fn verdict_line(
    tables: &[(usize, crate::abtable::AbTable)],
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
        if st.verdict == crate::stats::Verdict::Significant
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
    pub tables: &'a [(usize, crate::abtable::AbTable)],
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
            let med = crate::stats::median(&vs).unwrap_or(vs[0]);
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
        let table =
            crate::compare::table_pair(&recs, 0, 1, crate::stats::CompareConfig::default(), "t")
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
    fn provenance_names_machine_commit_and_command() {
        let long = vec!["--flag value"; 40].join(" ");
        let p = provenance("abc123", &format!("cmwq bench {long}"));
        assert!(p[0].starts_with("machine: ") && p[0].contains("CPUs") && p[0].contains("Linux"));
        assert_eq!(p[1], "commit: abc123");
        assert!(p[2].starts_with("command: cmwq bench --flag value"));
        assert!(p.len() > 3, "a long command wraps: {p:?}");
        assert!(p.iter().all(|l| l.chars().count() <= 130), "{p:?}");
        let joined: String = p[2..]
            .iter()
            .map(|l| l.trim_start_matches("command:").trim())
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(joined, format!("cmwq bench {long}"));
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

    #[test]
    fn plot_paths_are_checked_without_leaving_files() {
        let dir = std::env::temp_dir().join(format!("cmwq-plot-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let new = dir.join("new.SVG");
        assert_eq!(check_plot_path(&new), Ok(()));
        assert!(!new.exists(), "the check left {new:?} behind");
        let old = dir.join("old.svg");
        std::fs::write(&old, "keep").unwrap();
        assert_eq!(check_plot_path(&old), Ok(()));
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "keep");
        let e = check_plot_path(&dir.join("x.png")).unwrap_err();
        assert!(
            e.starts_with("--plot ") && e.contains("x.png: the plot is SVG"),
            "{e}"
        );
        let e = check_plot_path(std::path::Path::new("/nonexistent/dir/x.svg")).unwrap_err();
        assert!(
            e.starts_with("--plot /nonexistent/dir/x.svg: cannot write it"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ticks_step_by_1_2_5_and_start_at_zero_for_non_negative_data() {
        // 0..1037: no negative tick, steps of 200.
        let (t, st) = nice_ticks(0.0, 1037.0);
        assert_eq!(st, 200.0);
        assert_eq!(t, [0.0, 200.0, 400.0, 600.0, 800.0, 1000.0, 1200.0]);
        assert_eq!(
            tick_labels(&t, st),
            ["0", "200", "400", "600", "800", "1000", "1200"]
        );
        let (t, st) = nice_ticks(0.0, 187_000.0);
        assert_eq!(st, 50_000.0);
        assert_eq!(tick_labels(&t, st), ["0", "50k", "100k", "150k", "200k"]);
        let (t, st) = nice_ticks(0.0, 0.73);
        assert_eq!(st, 0.2);
        assert_eq!(tick_labels(&t, st), ["0", "0.2", "0.4", "0.6", "0.8"]);
        let (t, st) = nice_ticks(0.0, 2_600_000.0);
        assert_eq!(
            tick_labels(&t, st),
            ["0", "0.5M", "1.0M", "1.5M", "2.0M", "2.5M", "3.0M"]
        );
        // Every step is 1, 2 or 5 times a power of ten.
        for hi in [0.003, 1.0, 7.7, 12.0, 99.0, 1e3, 4.2e4, 9.9e9] {
            let (t, st) = nice_ticks(0.0, hi);
            let m = st / 10f64.powf(st.log10().floor());
            assert!(
                [1.0, 2.0, 5.0].iter().any(|x| (m - x).abs() < 1e-9),
                "{hi}: step {st}"
            );
            assert!(
                t[0] == 0.0 && *t.last().unwrap() >= hi && t.len() <= 7,
                "{hi}: {t:?}"
            );
        }
        // Data around zero keeps its negative side.
        let (t, _) = nice_ticks(-3.0, 8.0);
        assert!(t[0] <= -3.0, "{t:?}");
    }
}
