//! Simulated instruction-cache misses from `valgrind --tool=cachegrind`.
//!
//! Where the machine has no hardware counters (a VM, like the build machine),
//! cachegrind gives the same two numbers seed 001 counted, user space only:
//! instructions executed (`Ir`) and first-level instruction-cache misses
//! (`I1mr`), from a simulated cache. The geometry is fixed ([`Geometry`],
//! default the seed machine's 32 KiB 8-way L1i with 64-byte lines) rather
//! than read from the host, so results are repeatable across machines; they
//! are exact for the simulated cache, not a measurement of the real one, and
//! the reports say "simulated". Valgrind runs the program's threads one at a
//! time, so thread interleaving (and with it the counts) still varies a
//! little between runs: the study runs it a few times per side.
//!
//! The output file (`--cachegrind-out-file`) has `events:` naming the
//! columns, `summary:` with the program's totals, and per function
//! (`fn=`) lines of per-source-line counts, which [`parse`] sums into
//! per-function totals.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// A simulated cache: size, associativity, line size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Cache {
    /// Total size in bytes.
    pub size: u64,
    /// Ways.
    pub assoc: u64,
    /// Line size in bytes.
    pub line: u64,
}

impl Cache {
    fn arg(&self) -> String {
        format!("{},{},{}", self.size, self.assoc, self.line)
    }
}

/// The simulated hierarchy passed to cachegrind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Geometry {
    /// First-level instruction cache.
    pub i1: Cache,
    /// First-level data cache.
    pub d1: Cache,
    /// Last-level cache.
    pub ll: Cache,
}

impl Default for Geometry {
    /// Seed 001's Skylake-SP: L1i and L1d 32 KiB 8-way, 64-byte lines; a
    /// 1 MiB 16-way last level (its L2).
    fn default() -> Geometry {
        let l1 = Cache {
            size: 32 * 1024,
            assoc: 8,
            line: 64,
        };
        Geometry {
            i1: l1,
            d1: l1,
            ll: Cache {
                size: 1024 * 1024,
                assoc: 16,
                line: 64,
            },
        }
    }
}

/// One cachegrind profile: totals and per-function counts of every event.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Profile {
    /// Event names in file order (`Ir I1mr ILmr Dr ...`).
    pub events: Vec<String>,
    /// The `summary:` line, by event.
    pub totals: BTreeMap<String, u64>,
    /// Per function (demangled by valgrind, as in the file), by event.
    #[serde(skip)]
    pub functions: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Profile {
    /// A total by event name, 0 if absent.
    pub fn total(&self, event: &str) -> u64 {
        self.totals.get(event).copied().unwrap_or(0)
    }

    /// Sum of `event` over functions whose name satisfies `pred`.
    pub fn sum_where(&self, event: &str, pred: impl Fn(&str) -> bool) -> u64 {
        self.functions
            .iter()
            .filter(|(f, _)| pred(f))
            .map(|(_, ev)| ev.get(event).copied().unwrap_or(0))
            .sum()
    }

    /// I1 misses per 1000 instructions.
    pub fn i1_mpki(&self) -> f64 {
        let ir = self.total("Ir");
        if ir == 0 {
            0.0
        } else {
            self.total("I1mr") as f64 * 1000.0 / ir as f64
        }
    }
}

/// Parses a `cachegrind.out` file. Missing `events:` or `summary:` (a run
/// killed before it wrote them) is an error; per-line counts may be shorter
/// than the event list (trailing zeros omitted).
pub fn parse(text: &str) -> Result<Profile, String> {
    let mut p = Profile::default();
    let mut current: Option<String> = None;
    let mut summary = None;
    for line in text.lines() {
        if let Some(ev) = line.strip_prefix("events:") {
            p.events = ev.split_whitespace().map(str::to_string).collect();
        } else if let Some(s) = line.strip_prefix("summary:") {
            summary = Some(s.to_string());
        } else if let Some(f) = line.strip_prefix("fn=") {
            current = Some(f.to_string());
        } else if line.starts_with(|c: char| c.is_ascii_digit()) {
            let Some(f) = &current else { continue };
            let mut nums = line.split_whitespace();
            nums.next(); // the source line number
            let ev = p.functions.entry(f.clone()).or_default();
            for (name, x) in p.events.iter().zip(nums) {
                let x: u64 = x
                    .parse()
                    .map_err(|_| format!("cachegrind: bad count {x:?} in line {line:?}"))?;
                *ev.entry(name.clone()).or_insert(0) += x;
            }
        }
    }
    if p.events.is_empty() {
        return Err("cachegrind output has no `events:` line".into());
    }
    let summary = summary.ok_or("cachegrind output has no `summary:` line (run cut short?)")?;
    let nums: Vec<&str> = summary.split_whitespace().collect();
    if nums.len() != p.events.len() {
        return Err(format!(
            "cachegrind summary has {} numbers for {} events",
            nums.len(),
            p.events.len()
        ));
    }
    for (name, x) in p.events.iter().zip(nums) {
        let x: u64 = x
            .parse()
            .map_err(|_| format!("cachegrind: bad summary count {x:?}"))?;
        p.totals.insert(name.clone(), x);
    }
    Ok(p)
}

/// Why cachegrind cannot run here, or `None` if it can.
pub fn unavailable() -> Option<String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!("valgrind --version failed ({})", o.status)),
        Err(e) => Some(format!(
            "valgrind not found ({e}); install it, e.g. apt-get install valgrind"
        )),
    }
}

/// Runs `argv` under cachegrind with `geometry`, writing the profile to
/// `out_file`; returns the parsed profile and the program's stdout.
pub fn run(
    argv: &[String],
    geometry: &Geometry,
    out_file: &Path,
) -> Result<(Profile, String), String> {
    let (prog, args) = argv.split_first().ok_or("empty command")?;
    let out = Command::new("valgrind")
        .arg("--tool=cachegrind")
        .arg("--cache-sim=yes")
        .arg(format!("--I1={}", geometry.i1.arg()))
        .arg(format!("--D1={}", geometry.d1.arg()))
        .arg(format!("--LL={}", geometry.ll.arg()))
        .arg(format!("--cachegrind-out-file={}", out_file.display()))
        .arg(prog)
        .args(args)
        .output()
        .map_err(|e| format!("cannot start valgrind: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(4).collect();
        return Err(format!(
            "cachegrind run of {prog:?} failed ({}): {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    let text =
        std::fs::read_to_string(out_file).map_err(|e| format!("{}: {e}", out_file.display()))?;
    let _ = std::fs::remove_file(out_file);
    Ok((
        parse(&text)?,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Abridged from a real run here: valgrind-3.19.0,
    /// `valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64
    /// --D1=32768,8,64 --LL=1048576,16,64 /bin/true`: header, events and
    /// summary as written; of the function blocks, `init_cacheinfo` is cut
    /// to two of its lines and the `cmwq::pool::unlock_wake` block is made
    /// up, to test the per-function sums.
    const REAL: &str = "\
desc: I1 cache:         32768 B, 64 B, 8-way associative
desc: D1 cache:         32768 B, 64 B, 8-way associative
desc: LL cache:         1048576 B, 64 B, 16-way associative
cmd: /bin/true
events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw 
fl=./elf/../sysdeps/x86/dl-cacheinfo.h
fn=init_cacheinfo
889 7 1 1 0 0 0 0 0 0
891 3 0 0 1 1 1
fn=cmwq::pool::unlock_wake
12 10 2 2 4 0 0 2
13 5 0 0 1
summary: 129339 1091 1072 29700 1225 1017 10265 341 311
";

    #[test]
    fn parses_events_summary_and_functions() {
        let p = parse(REAL).unwrap();
        assert_eq!(p.events.len(), 9);
        assert_eq!(p.total("Ir"), 129_339);
        assert_eq!(p.total("I1mr"), 1_091);
        assert_eq!(p.total("DLmw"), 311);
        assert_eq!(p.total("nope"), 0);
        assert!((p.i1_mpki() - 1091.0 * 1000.0 / 129_339.0).abs() < 1e-9);
        assert_eq!(p.functions["init_cacheinfo"]["Ir"], 10);
        assert_eq!(p.functions["init_cacheinfo"]["I1mr"], 1);
        assert_eq!(p.functions["init_cacheinfo"]["D1mr"], 1);
        assert_eq!(p.functions["cmwq::pool::unlock_wake"]["Ir"], 15);
        assert_eq!(p.sum_where("I1mr", |f| f.starts_with("cmwq::")), 2);
        assert_eq!(p.sum_where("Ir", |_| true), 25);
    }

    #[test]
    fn cut_short_or_garbled_output_is_an_error() {
        let cut = REAL.replace(
            "summary: 129339 1091 1072 29700 1225 1017 10265 341 311\n",
            "",
        );
        assert!(parse(&cut).unwrap_err().contains("summary"));
        assert!(parse("summary: 1 2\n").unwrap_err().contains("events"));
        let short = REAL.replace("341 311\n", "\n");
        assert!(
            parse(&short)
                .unwrap_err()
                .contains("7 numbers for 9 events")
        );
        let bad = REAL.replace("13 5 0 0 1", "13 5 x 0 1");
        assert!(parse(&bad).unwrap_err().contains("bad count"));
    }
}
