//! Function-by-function size difference of two builds, in the spirit of the
//! kernel's `scripts/bloat-o-meter` (this is an independent implementation).
//!
//! ```text
//! add/remove: 0/1 grow/shrink: 4/0 up/down: 1180/-413 (767)
//! Function                          old     new   delta
//! cmwq::pool::Pool::insert          812    1104    +292
//! cmwq::pool::unlock_wake           413       -    -413
//! Total: Before=2029606, After=2030373, chg +0.04%
//! ```
//!
//! Functions are matched by demangled name without the hash (see
//! [`super::elf::demangle`]). "add/remove" count functions present on only
//! one side, "grow/shrink" those present on both whose size changed,
//! "up/down" sum the positive and negative deltas, and the last number is
//! the net change. Totals are the sums of all function sizes.

use std::collections::BTreeMap;

use super::elf::ElfSizes;

/// The size change of one function.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FuncDelta {
    /// Demangled name.
    pub name: String,
    /// Size in the old (A) build; `None` if the function is new.
    pub old: Option<u64>,
    /// Size in the new (B) build; `None` if the function is gone.
    pub new: Option<u64>,
    /// `new - old` in bytes (a missing side counts as 0).
    pub delta: i64,
}

/// The whole size comparison of two builds.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SizeDiff {
    /// Functions only in the new build.
    pub added: usize,
    /// Functions only in the old build.
    pub removed: usize,
    /// Functions in both that grew.
    pub grown: usize,
    /// Functions in both that shrank.
    pub shrunk: usize,
    /// Sum of positive deltas.
    pub up: i64,
    /// Sum of negative deltas (zero or negative).
    pub down: i64,
    /// Sum of all function sizes in the old build.
    pub total_before: u64,
    /// Sum of all function sizes in the new build.
    pub total_after: u64,
    /// Executable sections' size in the old build.
    pub text_before: u64,
    /// Executable sections' size in the new build.
    pub text_after: u64,
    /// Every changed function, largest |delta| first (ties by name).
    pub changes: Vec<FuncDelta>,
}

impl SizeDiff {
    /// Net change of the function total, in bytes.
    pub fn net(&self) -> i64 {
        self.up + self.down
    }

    /// Net change of the function total, in percent of the old total.
    pub fn total_chg_pct(&self) -> f64 {
        pct(self.total_before, self.total_after)
    }

    /// Change of the executable sections, in percent.
    pub fn text_chg_pct(&self) -> f64 {
        pct(self.text_before, self.text_after)
    }

    /// The `top` functions that grew the most (new ones included), largest first.
    pub fn top_growers(&self, top: usize) -> Vec<&FuncDelta> {
        self.changes
            .iter()
            .filter(|c| c.delta > 0)
            .take(top)
            .collect()
    }

    /// The bloat-o-meter layout: the summary line, a table of the `top`
    /// largest changes (both directions), and the totals.
    pub fn render(&self, top: usize) -> String {
        let mut out = format!(
            "add/remove: {}/{} grow/shrink: {}/{} up/down: {}/{} ({})\n",
            self.added,
            self.removed,
            self.grown,
            self.shrunk,
            self.up,
            self.down,
            self.net()
        );
        let shown: Vec<&FuncDelta> = self.changes.iter().take(top).collect();
        let w = shown
            .iter()
            .map(|c| c.name.chars().count())
            .chain(["Function".len()])
            .max()
            .unwrap_or(8)
            .min(72);
        let clip = |s: &str| -> String {
            if s.chars().count() <= w {
                s.to_string()
            } else {
                let t: String = s.chars().take(w - 3).collect();
                t + "..."
            }
        };
        out.push_str(&format!(
            "{:<w$} {:>8} {:>8} {:>8}\n",
            "Function", "old", "new", "delta"
        ));
        let side = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
        for c in &shown {
            out.push_str(&format!(
                "{:<w$} {:>8} {:>8} {:>+8}\n",
                clip(&c.name),
                side(c.old),
                side(c.new),
                c.delta
            ));
        }
        if self.changes.len() > shown.len() {
            out.push_str(&format!(
                "({} more changed functions not shown)\n",
                self.changes.len() - shown.len()
            ));
        }
        out.push_str(&format!(
            "Total: Before={}, After={}, chg {:+.2}%\n",
            self.total_before,
            self.total_after,
            self.total_chg_pct()
        ));
        out.push_str(&format!(
            "Text sections: Before={}, After={}, chg {:+.2}%\n",
            self.text_before,
            self.text_after,
            self.text_chg_pct()
        ));
        out
    }
}

fn pct(a: u64, b: u64) -> f64 {
    if a == 0 {
        0.0
    } else {
        (b as f64 - a as f64) / a as f64 * 100.0
    }
}

/// Compares the functions of an old (A) and a new (B) build.
pub fn diff(old: &ElfSizes, new: &ElfSizes) -> SizeDiff {
    diff_maps(
        &old.by_name(),
        &new.by_name(),
        old.text_bytes,
        new.text_bytes,
    )
}

/// Compares two name → size maps (the core of [`diff`]).
pub fn diff_maps(
    old: &BTreeMap<String, u64>,
    new: &BTreeMap<String, u64>,
    text_before: u64,
    text_after: u64,
) -> SizeDiff {
    let mut d = SizeDiff {
        added: 0,
        removed: 0,
        grown: 0,
        shrunk: 0,
        up: 0,
        down: 0,
        total_before: old.values().sum(),
        total_after: new.values().sum(),
        text_before,
        text_after,
        changes: Vec::new(),
    };
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let (o, n) = (old.get(name).copied(), new.get(name).copied());
        let delta = n.unwrap_or(0) as i64 - o.unwrap_or(0) as i64;
        match (o, n) {
            (None, Some(_)) => d.added += 1,
            (Some(_), None) => d.removed += 1,
            _ if delta > 0 => d.grown += 1,
            _ if delta < 0 => d.shrunk += 1,
            _ => continue,
        }
        if delta > 0 {
            d.up += delta;
        } else {
            d.down += delta;
        }
        d.changes.push(FuncDelta {
            name: name.clone(),
            old: o,
            new: n,
            delta,
        });
    }
    d.changes
        .sort_by(|x, y| y.delta.abs().cmp(&x.delta.abs()).then(x.name.cmp(&y.name)));
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(xs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        xs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn counts_sums_and_orders_like_bloat_o_meter() {
        let old = map(&[
            ("cmwq::pool::unlock_wake", 413),
            ("cmwq::pool::Pool::insert", 800),
            ("cmwq::pool::worker_loop", 2000),
            ("same", 50),
            ("shrinks", 100),
        ]);
        let new = map(&[
            ("cmwq::pool::Pool::insert", 1100),
            ("cmwq::pool::worker_loop", 2400),
            ("same", 50),
            ("shrinks", 90),
            ("new_fn", 7),
        ]);
        let d = diff_maps(&old, &new, 10_000, 10_300);
        assert_eq!((d.added, d.removed, d.grown, d.shrunk), (1, 1, 2, 1));
        assert_eq!((d.up, d.down, d.net()), (707, -423, 284));
        assert_eq!((d.total_before, d.total_after), (3363, 3647));
        let order: Vec<&str> = d.changes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            order,
            [
                "cmwq::pool::unlock_wake",
                "cmwq::pool::worker_loop",
                "cmwq::pool::Pool::insert",
                "shrinks",
                "new_fn"
            ]
        );
        let top: Vec<i64> = d.top_growers(2).iter().map(|c| c.delta).collect();
        assert_eq!(top, [400, 300]);
        assert!((d.text_chg_pct() - 3.0).abs() < 1e-9);
        let text = d.render(10);
        assert!(
            text.starts_with("add/remove: 1/1 grow/shrink: 2/1 up/down: 707/-423 (284)\n"),
            "{text}"
        );
        assert!(
            text.contains("cmwq::pool::unlock_wake       413        -     -413\n"),
            "{text}"
        );
        assert!(
            text.contains("new_fn                          -        7       +7\n"),
            "{text}"
        );
        assert!(
            text.contains("Total: Before=3363, After=3647, chg +8.44%\n"),
            "{text}"
        );
        let short = d.render(2);
        assert!(
            short.contains("(3 more changed functions not shown)"),
            "{short}"
        );
    }

    #[test]
    fn identical_builds_have_no_changes() {
        let m = map(&[("a", 1), ("b", 2)]);
        let d = diff_maps(&m, &m, 3, 3);
        assert!(d.changes.is_empty());
        assert_eq!(d.net(), 0);
        assert!(
            d.render(5)
                .starts_with("add/remove: 0/0 grow/shrink: 0/0 up/down: 0/0 (0)")
        );
    }
}
