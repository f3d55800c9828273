//! The SVG helpers every plot of the lab shares (`cmwq bench --plot`,
//! `cmwq mix --plot`, `cmwq compare --plot`): hand-written SVG, no plotting
//! dependency. The document's frame and title, escaping, axis titles, 1-2-5
//! ticks and their labels, the provenance lines under a title (machine,
//! commit, command), and the check of a `--plot` path before a long run.

use std::fmt::Write as _;

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

#[cfg(test)]
mod tests {
    use super::*;

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
