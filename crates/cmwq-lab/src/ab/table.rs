//! A/B tables in the layout of the seed threads, for `cmwq compare`.
//!
//! Seed 001 is the model:
//!
//! ```text
//! Metric                       Baseline      Experiment     Delta   Sig
//! ---------------------------------------------------------------------
//! L1i-miss :k (kernel)      198,588,165     216,672,536    +9.11%   **
//! Throughput ops/s              431,398         432,897    +0.35%   ns
//! ```
//!
//! Baseline and Experiment are the medians of each side's runs (see
//! [`crate::ab::stats`] for why medians), Delta is their difference in percent
//! of the baseline, and Sig is the [`Verdict`]: `**` beyond noise, `ns`
//! within it, `flat` below the noise floor. A legend under the table says
//! which direction is better for each metric and what the symbols mean, so
//! a table pasted into a mail stands on its own.
//!
//! An [`AbTable`] holds [`TableRow`]s: metrics that were compared, and
//! metrics the machine could not measure (hardware counters in a VM), which
//! are listed as "not supported" instead of being dropped. It renders as
//! plain text ([`AbTable::render_text`]) or Markdown
//! ([`AbTable::render_markdown`]), optionally with extra columns (CI, p, n,
//! min/max/stdev per side, see [`RenderOptions`]), and serialises with serde
//! for `--json`, every number of the table included.
//!
//! ```
//! use cmwq_lab::ab::table::{AbTable, Metric, RenderOptions};
//! use cmwq_lab::ab::stats::{CompareConfig, Direction, Verdict};
//!
//! let a = [431_398.0, 430_950.0, 431_870.0, 431_002.0, 431_455.0];
//! let b = [452_897.0, 452_310.0, 453_120.0, 452_644.0, 452_998.0];
//! let mut table = AbTable::new(CompareConfig::default());
//! let row = table.push(Metric::new("Throughput ops/s", Direction::HigherIsBetter), &a, &b)?;
//! assert_eq!(row.stats.verdict, Verdict::Significant);
//! table.push_not_supported("Cycles", "no hardware counters");
//!
//! let text = table.render_text(&RenderOptions::default());
//! assert!(text.contains("Throughput ops/s    431,398      452,897   +4.98%   **"));
//! let markdown = table.render_markdown(&RenderOptions::all());
//! let json = serde_json::to_string_pretty(&table)?;
//! # let _ = (markdown, json);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

use crate::ab::stats::{CompareConfig, Comparison, Direction, StatsError, Verdict, compare};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A metric to compare: its name in the table, which way is better, and
/// optionally how many decimals to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metric {
    /// Name shown in the Metric column, unit included (e.g. `"Sys (s)"`).
    pub name: String,
    /// Which way is better.
    pub direction: Direction,
    /// Decimals for the value columns; `None` picks them from the values
    /// (see [`auto_decimals`]).
    pub decimals: Option<usize>,
}

impl Metric {
    /// A metric with automatic decimals.
    pub fn new(name: impl Into<String>, direction: Direction) -> Metric {
        Metric {
            name: name.into(),
            direction,
            decimals: None,
        }
    }

    /// The same metric printed with exactly `decimals` decimals.
    pub fn with_decimals(mut self, decimals: usize) -> Metric {
        self.decimals = Some(decimals);
        self
    }
}

/// One compared metric: its name, print precision and all its statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbRow {
    /// Name shown in the Metric column.
    pub metric: String,
    /// Fixed decimals for the value columns, if the metric asked for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decimals: Option<usize>,
    /// The numbers: summaries of both sides, delta, CI, U, p, verdict.
    #[serde(flatten)]
    pub stats: Comparison,
}

/// A row of an [`AbTable`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TableRow {
    /// A metric measured on both sides and compared.
    Compared(AbRow),
    /// A metric this machine cannot measure (e.g. no hardware counters);
    /// listed so that its absence is visible.
    NotSupported {
        /// Name shown in the Metric column.
        metric: String,
        /// Why, e.g. "perf_event_open: ENOENT".
        reason: String,
    },
}

impl TableRow {
    /// The metric's name.
    pub fn metric(&self) -> &str {
        match self {
            TableRow::Compared(row) => &row.metric,
            TableRow::NotSupported { metric, .. } => metric,
        }
    }
}

/// An A/B table: an optional title, the statistical configuration every
/// row was computed with, and the rows in display order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbTable {
    /// Shown above the table (e.g. a preset's scope); `None` for no title.
    pub title: Option<String>,
    /// Noise floor, α, confidence, resamples and seed of the rows.
    pub config: CompareConfig,
    /// The rows, in the order they were pushed.
    pub rows: Vec<TableRow>,
    /// Remarks printed after the legend (a metric some runs lacked, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Which optional columns to show, and how precisely to print deltas.
///
/// The default is the seed's five columns with two-decimal deltas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderOptions {
    /// A column saying whether B is `better` or `worse`, filled for `**`
    /// rows of metrics with a direction.
    pub better: bool,
    /// The bootstrap confidence interval of the delta.
    pub ci: bool,
    /// The Mann-Whitney p-value.
    pub p: bool,
    /// Run counts as `n_A/n_B`.
    pub n: bool,
    /// Min, max and standard deviation of each side.
    pub spread: bool,
    /// Decimals of the Delta column (and CI), default 2.
    pub delta_decimals: usize,
}

impl Default for RenderOptions {
    fn default() -> RenderOptions {
        RenderOptions {
            better: false,
            ci: false,
            p: false,
            n: false,
            spread: false,
            delta_decimals: 2,
        }
    }
}

impl RenderOptions {
    /// Every optional column switched on.
    pub fn all() -> RenderOptions {
        RenderOptions {
            better: true,
            ci: true,
            p: true,
            n: true,
            spread: true,
            delta_decimals: 2,
        }
    }
}

impl AbTable {
    /// An empty table whose rows will be computed with `config`.
    pub fn new(config: CompareConfig) -> AbTable {
        AbTable {
            title: None,
            config,
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The same table with a title.
    pub fn with_title(mut self, title: impl Into<String>) -> AbTable {
        self.title = Some(title.into());
        self
    }

    /// Compares runs `b` against runs `a` of `metric` with the table's
    /// configuration, appends the row and returns it. On error (an empty or
    /// non-finite side) nothing is appended.
    pub fn push(&mut self, metric: Metric, a: &[f64], b: &[f64]) -> Result<&AbRow, StatsError> {
        let stats = compare(a, b, metric.direction, &self.config)?;
        self.rows.push(TableRow::Compared(AbRow {
            metric: metric.name,
            decimals: metric.decimals,
            stats,
        }));
        match self.rows.last() {
            Some(TableRow::Compared(row)) => Ok(row),
            _ => unreachable!("a compared row was just pushed"),
        }
    }

    /// Appends an already computed row.
    pub fn push_row(&mut self, row: AbRow) {
        self.rows.push(TableRow::Compared(row));
    }

    /// Appends a "not supported" row for a metric this machine cannot
    /// measure.
    pub fn push_not_supported(&mut self, metric: impl Into<String>, reason: impl Into<String>) {
        self.rows.push(TableRow::NotSupported {
            metric: metric.into(),
            reason: reason.into(),
        });
    }

    /// Adds a remark shown after the legend.
    pub fn note(&mut self, line: impl Into<String>) {
        self.notes.push(line.into());
    }

    /// The compared rows, skipping "not supported" ones.
    pub fn compared(&self) -> impl Iterator<Item = &AbRow> {
        self.rows.iter().filter_map(|r| match r {
            TableRow::Compared(row) => Some(row),
            TableRow::NotSupported { .. } => None,
        })
    }

    /// The legend printed under the table: which direction is better for
    /// which metric (omitted if no metric has one), what `**`, `ns` and
    /// `flat` mean with this table's α, confidence and noise floor, and
    /// what the value columns hold.
    pub fn legend(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut directions = Vec::new();
        for dir in [Direction::HigherIsBetter, Direction::LowerIsBetter] {
            let names: Vec<&str> = self
                .compared()
                .filter(|r| r.stats.direction == dir)
                .map(|r| r.metric.as_str())
                .collect();
            if let (false, Some(phrase)) = (names.is_empty(), dir.phrase()) {
                directions.push(format!("{}: {phrase}.", names.join(", ")));
            }
        }
        if !directions.is_empty() {
            lines.push(directions.join(" "));
        }
        let c = &self.config;
        lines.push(format!(
            "** = beyond noise (Mann-Whitney p < {} and the {} bootstrap CI of the delta excludes 0), \
             ns = within noise, flat = |delta| < {}%.",
            trim_number(c.alpha),
            confidence_label(c.confidence),
            trim_number(c.noise_floor_pct),
        ));
        let mut counts: Vec<(usize, usize)> = self
            .compared()
            .map(|r| (r.stats.baseline.n, r.stats.experiment.n))
            .collect();
        counts.sort_unstable();
        counts.dedup();
        let runs = match counts.as_slice() {
            [(a, b)] if a == b => format!("medians of {a} runs a side"),
            [(a, b)] => format!("medians of {a} (baseline) and {b} (experiment) runs"),
            _ => "medians of each side's runs".to_string(),
        };
        lines.push(format!(
            "Baseline, Experiment: {runs}. Delta = (Experiment - Baseline) / |Baseline|."
        ));
        lines.extend(self.notes.iter().map(|n| format!("Note: {n}")));
        lines
    }

    /// Renders the table as plain text in the seed's layout: title (if
    /// any), header, a rule, one line per row, a rule, the legend. Lines
    /// carry no trailing spaces; the text ends with a newline.
    pub fn render_text(&self, opts: &RenderOptions) -> String {
        let grid = self.grid(opts);
        let widths = grid.widths();
        let gap = "   ";
        let mut body: Vec<String> = Vec::new();
        let line_of = |cells: &[String]| -> String {
            let mut line = String::new();
            for (i, (cell, col)) in cells.iter().zip(&grid.columns).enumerate() {
                if i > 0 {
                    line.push_str(gap);
                }
                let w = widths[i];
                match col.align {
                    Align::Left => line.push_str(&format!("{cell:<w$}")),
                    Align::Right => line.push_str(&format!("{cell:>w$}")),
                }
            }
            line.trim_end().to_string()
        };
        let header: Vec<String> = grid.columns.iter().map(|c| c.header.clone()).collect();
        body.push(line_of(&header));
        for row in &grid.rows {
            body.push(match row {
                GridRow::Cells(cells) => line_of(cells),
                GridRow::NotSupported { metric, reason } => {
                    let w = widths[0];
                    format!("{metric:<w$}{gap}not supported ({reason})")
                }
            });
        }
        let rule_width = body.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        let rule = "-".repeat(rule_width);
        let mut out = String::new();
        if let Some(title) = &self.title {
            out.push_str(title);
            out.push_str("\n\n");
        }
        out.push_str(&body[0]);
        out.push('\n');
        out.push_str(&rule);
        out.push('\n');
        for line in &body[1..] {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&rule);
        out.push('\n');
        for line in self.legend() {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// Renders the same table as GitHub-flavoured Markdown: an optional
    /// `###` title, a pipe table (text left-aligned, numbers
    /// right-aligned), and the legend as paragraphs. Markdown's special
    /// characters in cells and legend are escaped, so `**` shows as `**`
    /// rather than turning on bold.
    pub fn render_markdown(&self, opts: &RenderOptions) -> String {
        let grid = self.grid(opts);
        let ncols = grid.columns.len();
        let mut out = String::new();
        if let Some(title) = &self.title {
            out.push_str(&format!("### {}\n\n", escape_markdown(title)));
        }
        let row_of = |cells: &[String]| -> String {
            let escaped: Vec<String> = cells.iter().map(|c| escape_markdown(c)).collect();
            format!("| {} |\n", escaped.join(" | "))
        };
        let header: Vec<String> = grid.columns.iter().map(|c| c.header.clone()).collect();
        out.push_str(&row_of(&header));
        let aligns: Vec<&str> = grid
            .columns
            .iter()
            .map(|c| match c.align {
                Align::Left => ":---",
                Align::Right => "---:",
            })
            .collect();
        out.push_str(&format!("| {} |\n", aligns.join(" | ")));
        for row in &grid.rows {
            match row {
                GridRow::Cells(cells) => out.push_str(&row_of(cells)),
                GridRow::NotSupported { metric, reason } => {
                    let mut cells = vec![String::new(); ncols];
                    cells[0] = metric.clone();
                    cells[1] = format!("not supported ({reason})");
                    out.push_str(&row_of(&cells));
                }
            }
        }
        for line in self.legend() {
            out.push('\n');
            out.push_str(&escape_markdown(&line));
            out.push('\n');
        }
        out
    }

    /// Lays the table out as columns of strings, shared by both renderers.
    fn grid(&self, opts: &RenderOptions) -> Grid {
        let mut columns = vec![
            Column::left("Metric"),
            Column::right("Baseline"),
            Column::right("Experiment"),
            Column::right("Delta"),
            Column::left("Sig"),
        ];
        if opts.better {
            columns.push(Column::left("B is"));
        }
        if opts.ci {
            columns.push(Column::right(&format!(
                "{} CI",
                confidence_label(self.config.confidence)
            )));
        }
        if opts.p {
            columns.push(Column::right("p"));
        }
        if opts.n {
            columns.push(Column::right("n"));
        }
        if opts.spread {
            for h in ["A min", "A max", "A stdev", "B min", "B max", "B stdev"] {
                columns.push(Column::right(h));
            }
        }
        let rows = self
            .rows
            .iter()
            .map(|row| match row {
                TableRow::Compared(r) => GridRow::Cells(cells_of(r, opts)),
                TableRow::NotSupported { metric, reason } => GridRow::NotSupported {
                    metric: metric.clone(),
                    reason: reason.clone(),
                },
            })
            .collect();
        Grid { columns, rows }
    }
}

impl fmt::Display for AbTable {
    /// The plain-text rendering with default options.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render_text(&RenderOptions::default()))
    }
}

/// The cells of one compared row, in column order.
fn cells_of(r: &AbRow, opts: &RenderOptions) -> Vec<String> {
    let s = &r.stats;
    let (a, b) = (&s.baseline, &s.experiment);
    let decimals = r.decimals.unwrap_or_else(|| {
        let mut values = vec![a.median, b.median];
        if opts.spread {
            values.extend([a.min, a.max, b.min, b.max]);
        }
        auto_decimals(&values)
    });
    let num = |x: f64| format_thousands(x, decimals);
    let mut cells = vec![
        r.metric.clone(),
        num(a.median),
        num(b.median),
        format_delta(s.delta_pct, opts.delta_decimals),
        s.verdict.symbol().to_string(),
    ];
    if opts.better {
        let word = match (s.verdict, s.better) {
            (Verdict::Significant, Some(true)) => "better",
            (Verdict::Significant, Some(false)) => "worse",
            _ => "",
        };
        cells.push(word.to_string());
    }
    if opts.ci {
        cells.push(match s.ci() {
            Some((lo, hi)) => format!(
                "{} .. {}",
                format_delta(Some(lo), opts.delta_decimals),
                format_delta(Some(hi), opts.delta_decimals)
            ),
            None => "n/a".to_string(),
        });
    }
    if opts.p {
        cells.push(format_p(s.p));
    }
    if opts.n {
        cells.push(format!("{}/{}", a.n, b.n));
    }
    if opts.spread {
        let sd = |x: Option<f64>| x.map_or_else(|| "-".to_string(), num);
        cells.extend([
            num(a.min),
            num(a.max),
            sd(a.stdev),
            num(b.min),
            num(b.max),
            sd(b.stdev),
        ]);
    }
    cells
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

struct Column {
    header: String,
    align: Align,
}

impl Column {
    fn left(h: &str) -> Column {
        Column {
            header: h.to_string(),
            align: Align::Left,
        }
    }
    fn right(h: &str) -> Column {
        Column {
            header: h.to_string(),
            align: Align::Right,
        }
    }
}

enum GridRow {
    Cells(Vec<String>),
    NotSupported { metric: String, reason: String },
}

struct Grid {
    columns: Vec<Column>,
    rows: Vec<GridRow>,
}

impl Grid {
    /// Width of each column in characters: its widest cell or header. A
    /// "not supported" row only widens the Metric column.
    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self
            .columns
            .iter()
            .map(|c| c.header.chars().count())
            .collect();
        for row in &self.rows {
            match row {
                GridRow::Cells(cells) => {
                    for (i, c) in cells.iter().enumerate() {
                        w[i] = w[i].max(c.chars().count());
                    }
                }
                GridRow::NotSupported { metric, .. } => w[0] = w[0].max(metric.chars().count()),
            }
        }
        w
    }
}

/// Formats `x` with `decimals` decimals and commas between thousands:
/// `1234567.0, 0` → `1,234,567`; `1234.5, 1` → `1,234.5`;
/// `-999.996, 2` → `-1,000.00`.
///
/// Rounds to nearest, ties to even on the exact binary value (Rust's and
/// C's `printf` rule: 0.125 with 2 decimals is `0.12`). A value that
/// rounds to zero prints without a minus sign. NaN and infinities print as
/// `NaN`, `inf`, `-inf`.
pub fn format_thousands(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "NaN".to_string()
        } else if x > 0.0 {
            "inf".to_string()
        } else {
            "-inf".to_string()
        };
    }
    let plain = format!("{:.*}", decimals, x.abs());
    let (int_part, frac_part) = match plain.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (plain.as_str(), None),
    };
    let mut out = String::with_capacity(plain.len() + plain.len() / 3 + 1);
    let nonzero = plain.bytes().any(|c| (b'1'..=b'9').contains(&c));
    if x < 0.0 && nonzero {
        out.push('-');
    }
    let digits = int_part.len();
    for (i, ch) in int_part.chars().enumerate() {
        if i > 0 && (digits - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if let Some(f) = frac_part {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// Formats a delta in percent with an explicit sign: `+9.11%`, `-0.62%`;
/// `0.00%` for exactly zero (a tiny non-zero delta keeps its sign, e.g.
/// `-0.00%`); `n/a` for `None` (zero baseline). Thousands are separated
/// (`+1,250.00%`).
pub fn format_delta(delta_pct: Option<f64>, decimals: usize) -> String {
    let Some(d) = delta_pct else {
        return "n/a".to_string();
    };
    if d.is_nan() {
        return "n/a".to_string();
    }
    let sign = if d > 0.0 {
        "+"
    } else if d < 0.0 {
        "-"
    } else {
        ""
    };
    format!("{sign}{}%", format_thousands(d.abs(), decimals))
}

/// Formats a p-value with three decimals, or `<0.001` below 0.0005 where
/// three decimals would print a misleading `0.000`.
pub fn format_p(p: f64) -> String {
    if p < 0.0005 {
        "<0.001".to_string()
    } else {
        format!("{p:.3}")
    }
}

/// Decimals for printing a row whose values are `values`: 0 when every
/// finite value is a whole number (counts, ops/s); otherwise enough for
/// four significant digits of the largest magnitude, at least 1 and at
/// most 6 (`2.045` → 3, `70.06` → 2, `478.25` → 1, `1234.5` → 1,
/// `0.000123` → 6).
pub fn auto_decimals(values: &[f64]) -> usize {
    let finite = || values.iter().copied().filter(|v| v.is_finite());
    if finite().all(|v| v.fract() == 0.0) {
        return 0;
    }
    let largest = finite().map(f64::abs).fold(0.0, f64::max);
    let digits = largest.log10().floor() as i64 + 1;
    (4 - digits).clamp(1, 6) as usize
}

/// `0.95` → `95%`, `0.999` → `99.9%`.
fn confidence_label(confidence: f64) -> String {
    format!("{}%", trim_number(confidence * 100.0))
}

/// Shortest decimal of `x` up to 6 decimals, trailing zeros trimmed
/// (`0.05` → `0.05`, `95.00000000000001` → `95`).
fn trim_number(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Backslash-escapes the characters that Markdown would interpret in a
/// table cell or paragraph.
fn escape_markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(
            ch,
            '\\' | '|' | '*' | '_' | '`' | '<' | '>' | '[' | ']' | '#'
        ) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ab::stats::{MwuMethod, Summary};

    /// A row with the given medians and verdict; other numbers plausible.
    fn row(name: &str, direction: Direction, a: f64, b: f64, verdict: Verdict) -> AbRow {
        let side = |m: f64| Summary {
            n: 20,
            mean: m,
            median: m,
            stdev: Some(m.abs() * 0.001),
            min: m * 0.99,
            max: m * 1.01,
        };
        let delta = crate::ab::stats::delta_pct(a, b);
        AbRow {
            metric: name.to_string(),
            decimals: None,
            stats: Comparison {
                direction,
                baseline: side(a),
                experiment: side(b),
                delta_pct: delta,
                ci_lo_pct: delta.map(|d| d - 0.25),
                ci_hi_pct: delta.map(|d| d + 0.25),
                confidence: 0.95,
                u: 100.0,
                p: if verdict == Verdict::Significant {
                    0.0001
                } else {
                    0.3
                },
                p_method: MwuMethod::Asymptotic,
                noise_floor_pct: 0.1,
                alpha: 0.05,
                verdict,
                better: delta.and_then(|d| direction.better(d)),
            },
        }
    }

    /// Seed 001's ROCKSDB table, plus a counter this machine lacks.
    fn seed_table() -> AbTable {
        use Direction::*;
        use Verdict::*;
        let mut t = AbTable::new(CompareConfig::default());
        let rows = [
            (
                "Instructions (total)",
                Neutral,
                9_574_476_543.0,
                9_573_602_441.0,
                Flat,
            ),
            (
                "L1i-miss :k (kernel)",
                LowerIsBetter,
                198_588_165.0,
                216_672_536.0,
                Significant,
            ),
            (
                "Throughput ops/s",
                HigherIsBetter,
                431_398.0,
                432_897.0,
                NotSignificant,
            ),
            ("IPC", HigherIsBetter, 2.045, 2.052, NotSignificant),
            (
                "Time elapsed (s)",
                LowerIsBetter,
                2.4012,
                2.3865,
                NotSignificant,
            ),
        ];
        for (name, dir, a, b, v) in rows {
            t.push_row(row(name, dir, a, b, v));
        }
        t.push_not_supported("TopdownL1 frontend", "no PMU in this VM");
        t
    }

    #[test]
    fn text_table_in_the_seed_layout() {
        let got = seed_table().render_text(&RenderOptions::default());
        let want = "\
Metric                      Baseline      Experiment    Delta   Sig
--------------------------------------------------------------------
Instructions (total)   9,574,476,543   9,573,602,441   -0.01%   flat
L1i-miss :k (kernel)     198,588,165     216,672,536   +9.11%   **
Throughput ops/s             431,398         432,897   +0.35%   ns
IPC                            2.045           2.052   +0.34%   ns
Time elapsed (s)               2.401           2.386   -0.61%   ns
TopdownL1 frontend     not supported (no PMU in this VM)
--------------------------------------------------------------------
Throughput ops/s, IPC: higher = better. L1i-miss :k (kernel), Time elapsed (s): lower = better.
** = beyond noise (Mann-Whitney p < 0.05 and the 95% bootstrap CI of the delta excludes 0), ns = within noise, flat = |delta| < 0.1%.
Baseline, Experiment: medians of 20 runs a side. Delta = (Experiment - Baseline) / |Baseline|.
";
        assert_eq!(got, want, "\n{got}");
    }

    #[test]
    fn markdown_table_escapes_and_aligns() {
        let got = seed_table()
            .with_title("rocksdb deleteseq")
            .render_markdown(&RenderOptions::default());
        let want = "\
### rocksdb deleteseq

| Metric | Baseline | Experiment | Delta | Sig |
| :--- | ---: | ---: | ---: | :--- |
| Instructions (total) | 9,574,476,543 | 9,573,602,441 | -0.01% | flat |
| L1i-miss :k (kernel) | 198,588,165 | 216,672,536 | +9.11% | \\*\\* |
| Throughput ops/s | 431,398 | 432,897 | +0.35% | ns |
| IPC | 2.045 | 2.052 | +0.34% | ns |
| Time elapsed (s) | 2.401 | 2.386 | -0.61% | ns |
| TopdownL1 frontend | not supported (no PMU in this VM) |  |  |  |

Throughput ops/s, IPC: higher = better. L1i-miss :k (kernel), Time elapsed (s): lower = better.

\\*\\* = beyond noise (Mann-Whitney p \\< 0.05 and the 95% bootstrap CI of the delta excludes 0), ns = within noise, flat = \\|delta\\| \\< 0.1%.

Baseline, Experiment: medians of 20 runs a side. Delta = (Experiment - Baseline) / \\|Baseline\\|.
";
        assert_eq!(got, want, "\n{got}");
    }

    #[test]
    fn optional_columns() {
        let mut t = AbTable::new(CompareConfig::default());
        t.push_row(row(
            "req/s",
            Direction::HigherIsBetter,
            25_113.0,
            24_795.0,
            Verdict::Significant,
        ));
        let mut one = row(
            "clat max (us)",
            Direction::LowerIsBetter,
            1_234.5,
            1_300.25,
            Verdict::NotSignificant,
        );
        one.stats.baseline.n = 1;
        one.stats.baseline.stdev = None;
        one.decimals = Some(1);
        t.push_row(one);
        let got = t.render_text(&RenderOptions::all());
        let lines: Vec<&str> = got.lines().collect();
        // With min/max shown, auto decimals also cover them (here they are
        // fractional); 1,300.25 rounds to even.
        assert_eq!(
            lines[0],
            "Metric          Baseline   Experiment    Delta   Sig   B is              95% CI        p       n\
             \x20     A min      A max   A stdev      B min      B max   B stdev"
        );
        assert_eq!(
            lines[2],
            "req/s           25,113.0     24,795.0   -1.27%   **    worse   -1.52% .. -1.02%   <0.001   20/20\
             \x20  24,861.9   25,364.1      25.1   24,547.0   25,043.0      24.8"
        );
        assert_eq!(
            lines[3],
            "clat max (us)    1,234.5      1,300.2   +5.33%   ns            +5.08% .. +5.58%    0.300    1/20\
             \x20   1,222.2    1,246.8         -    1,287.2    1,313.3       1.3"
        );
        assert_eq!(lines[1], "-".repeat(lines[0].len()));
        // Mixed run counts change the legend.
        assert!(got.contains("medians of each side's runs"), "{got}");
    }

    #[test]
    fn json_round_trip_keeps_every_row() {
        let t = seed_table().with_title("t");
        let json = serde_json::to_string(&t).unwrap();
        let back: AbTable = serde_json::from_str(&json).unwrap();
        // serde_json's default float parser may be one ulp off (its
        // `float_roundtrip` feature fixes that), so compare the rendering,
        // which every such ulp leaves unchanged, and the structure.
        assert_eq!(
            back.render_text(&RenderOptions::all()),
            t.render_text(&RenderOptions::all())
        );
        assert_eq!(back.rows.len(), t.rows.len());
        for (x, y) in back.compared().zip(t.compared()) {
            assert_eq!(
                (x.stats.verdict, x.stats.better),
                (y.stats.verdict, y.stats.better)
            );
            assert_eq!(x.stats.baseline.n, y.stats.baseline.n);
            let d = x.stats.delta_pct.unwrap() - y.stats.delta_pct.unwrap();
            assert!(d.abs() < 1e-12, "{d}");
        }
        assert_eq!(back.rows[5], t.rows[5]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["rows"][1]["status"], "compared");
        assert_eq!(v["rows"][1]["metric"], "L1i-miss :k (kernel)");
        assert_eq!(v["rows"][1]["verdict"], "significant");
        assert_eq!(v["rows"][1]["baseline"]["median"], 198_588_165.0);
        assert_eq!(v["rows"][5]["status"], "not_supported");
        assert_eq!(v["config"]["noise_floor_pct"], 0.1);
    }

    #[test]
    fn push_computes_and_rejects_bad_input() {
        let mut t = AbTable::new(CompareConfig::default());
        let a = [
            100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 100.1, 99.9, 100.3, 99.8,
        ];
        let b: Vec<f64> = a.iter().map(|x| x * 1.05).collect();
        let r = t
            .push(Metric::new("ops/s", Direction::HigherIsBetter), &a, &b)
            .unwrap();
        assert_eq!(r.stats.verdict, Verdict::Significant);
        assert_eq!(r.stats.better, Some(true));
        assert!(
            t.push(Metric::new("bad", Direction::Neutral), &a, &[])
                .is_err()
        );
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.rows[0].metric(), "ops/s");
        assert!(t.to_string().contains("ops/s: higher = better."));
    }

    #[test]
    fn thousands_separators_and_rounding() {
        assert_eq!(format_thousands(1_234_567.0, 0), "1,234,567");
        assert_eq!(format_thousands(1_234.5, 1), "1,234.5");
        assert_eq!(format_thousands(12_345_678.9, 1), "12,345,678.9");
        assert_eq!(format_thousands(999.0, 0), "999");
        assert_eq!(format_thousands(1_000.0, 0), "1,000");
        assert_eq!(format_thousands(100_000.0, 0), "100,000");
        assert_eq!(format_thousands(0.5, 3), "0.500");
        // Rounding can carry into a new group.
        assert_eq!(format_thousands(999.996, 2), "1,000.00");
        assert_eq!(format_thousands(-999_999.5, 0), "-1,000,000");
        assert_eq!(format_thousands(-1_234.0, 0), "-1,234");
        // Ties go to even on the exact binary value; no "-0".
        assert_eq!(format_thousands(0.125, 2), "0.12");
        assert_eq!(format_thousands(0.375, 2), "0.38");
        assert_eq!(format_thousands(2.5, 0), "2");
        assert_eq!(format_thousands(-0.004, 2), "0.00");
        assert_eq!(format_thousands(-0.0, 0), "0");
        assert_eq!(format_thousands(f64::NAN, 2), "NaN");
        assert_eq!(format_thousands(f64::NEG_INFINITY, 2), "-inf");
    }

    #[test]
    fn deltas_and_p_values() {
        assert_eq!(format_delta(Some(17.94), 1), "+17.9%");
        assert_eq!(format_delta(Some(-13.6), 1), "-13.6%");
        assert_eq!(format_delta(Some(9.114), 2), "+9.11%");
        assert_eq!(format_delta(Some(0.0), 2), "0.00%");
        assert_eq!(format_delta(Some(-0.001), 2), "-0.00%");
        assert_eq!(format_delta(Some(1_250.0), 2), "+1,250.00%");
        assert_eq!(format_delta(None, 2), "n/a");
        assert_eq!(format_delta(Some(f64::INFINITY), 2), "+inf%");
        assert_eq!(format_p(0.0004), "<0.001");
        assert_eq!(format_p(0.036), "0.036");
        assert_eq!(format_p(1.0), "1.000");
    }

    #[test]
    fn automatic_decimals() {
        assert_eq!(auto_decimals(&[431_398.0, 432_897.0]), 0);
        assert_eq!(auto_decimals(&[0.0, 0.0]), 0);
        assert_eq!(auto_decimals(&[2.045, 2.052]), 3);
        assert_eq!(auto_decimals(&[70.06, 72.1]), 2);
        assert_eq!(auto_decimals(&[478.25, 482.42]), 1);
        assert_eq!(auto_decimals(&[1_234.5, 4_022.046]), 1);
        assert_eq!(auto_decimals(&[0.000123]), 6);
        assert_eq!(auto_decimals(&[0.947]), 4);
        assert_eq!(auto_decimals(&[f64::NAN, 3.0]), 0);
    }

    #[test]
    fn labels() {
        assert_eq!(confidence_label(0.95), "95%");
        assert_eq!(confidence_label(0.999), "99.9%");
        assert_eq!(trim_number(0.05), "0.05");
        assert_eq!(escape_markdown("a|b*c_d"), "a\\|b\\*c\\_d");
    }
}
