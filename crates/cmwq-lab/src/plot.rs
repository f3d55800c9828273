//! `cmwq compare --plot FILE.svg`: every run of every side, metric by metric,
//! as small multiples of strip plots, in hand-written SVG (no plotting
//! dependency); and the SVG helpers the bench plot shares.
//!
//! A table of medians hides what the seed threads argue about: whether the
//! two sides' runs overlap, and whether one run is an outlier. A strip plot
//! shows each run as a point, sides side by side in one panel per metric, the
//! median as a bar across each side's points, and the y axis of each panel
//! scaled to its own data, so a 1% shift is visible in every panel. Failed
//! runs are not drawn (they are reported, not averaged in).

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

/// A "nice" axis maximum at or above `v`.
pub(crate) fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

/// A short label for an axis value: `1.23M`, `45.6k`, `789`, `0.0123`.
fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

const COLS: usize = 3;
const PW: f64 = 300.0;
const PH: f64 = 190.0;

/// Renders the strip plots of `metrics` (in that order) over the successful
/// runs in `records`; `sides[i]` labels side `i`. Each point is a
/// `<circle class="run">` with `data-side` and `data-run` attributes, inside
/// a `<g class="panel" data-metric="...">` per metric. A metric missing from
/// a successful run is drawn without that run.
pub fn strip_plot(
    title: &str,
    sides: &[String],
    records: &[RunRecord],
    metrics: &[String],
) -> String {
    let rows = metrics.len().div_ceil(COLS).max(1);
    let w = PW * COLS as f64;
    let h = 40.0 + PH * rows as f64 + 20.0 * sides.len() as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="10">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="13">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    let ok: Vec<&RunRecord> = records.iter().filter(|r| r.error.is_none()).collect();
    for (k, m) in metrics.iter().enumerate() {
        let (px, py) = ((k % COLS) as f64 * PW, 30.0 + (k / COLS) as f64 * PH);
        let (left, top, pw, ph) = (px + 52.0, py + 22.0, PW - 66.0, PH - 52.0);
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
        let pad = if hi > lo {
            (hi - lo) * 0.08
        } else {
            (lo.abs() * 0.05).max(1e-9)
        };
        let (lo, hi) = (lo - pad, hi + pad);
        let y = |v: f64| top + ph - (v - lo) / (hi - lo) * ph;
        let _ = writeln!(s, r#"<g class="panel" data-metric="{}">"#, esc(m));
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="middle" font-size="11">{}</text><rect x="{left:.1}" y="{top:.1}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#bbb"/>"##,
            px + PW / 2.0,
            py + 14.0,
            esc(m)
        );
        for i in 0..=2 {
            let v = lo + (hi - lo) * i as f64 / 2.0;
            let yy = y(v);
            let _ = writeln!(
                s,
                r##"<line x1="{left:.1}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                left + pw,
                left - 3.0,
                yy + 3.0,
                short(v)
            );
        }
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
    let ly = 40.0 + PH * rows as f64;
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
        let svg = strip_plot("t", &sides, &recs, &["x".into(), "wall s".into()]);
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
    fn nice_axis_maxima() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(3.2), 5.0);
        assert_eq!(nice_max(180_000.0), 200_000.0);
        assert_eq!(short(1_234_567.0), "1.23M");
        assert_eq!(short(0.5), "0.500");
    }
}
