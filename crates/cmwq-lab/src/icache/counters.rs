//! Hardware counters for the study, through `perf stat`, as seed 001 read them.
//!
//! Each counted run wraps the workload in `perf stat -x, -o FILE -e
//! cycles:D,instructions:D,L1-icache-load-misses:D -- CMD` with one domain
//! `D` (`u` or `k`): three events, so no multiplexing on a 4-counter PMU,
//! and user and kernel misses from separate runs, as in the seed. The CSV
//! file is parsed by [`parse_csv`]. Where the machine has no PMU (a VM),
//! `perf` prints `<not supported>` and [`probe`] says so; where `perf` is
//! missing or not permitted, the reason is reported the same way, and the
//! study falls back to cachegrind. This module keeps to the `perf` tool on
//! purpose: it needs no `unsafe` and no second counter implementation in
//! the lab.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// A counting domain: user (`:u`) or kernel (`:k`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Domain {
    /// User space only.
    User,
    /// Kernel only.
    Kernel,
}

impl Domain {
    /// The perf modifier letter.
    pub fn modifier(self) -> &'static str {
        match self {
            Domain::User => "u",
            Domain::Kernel => "k",
        }
    }
}

/// The events of one counted run, in `-e` order; names of the metrics they give.
pub const EVENTS: [(&str, &str); 3] = [
    ("cycles", "cycles"),
    ("instructions", "instructions"),
    ("L1-icache-load-misses", "L1i misses"),
];

/// The `perf stat` arguments (before `--`) for one domain, writing CSV to `out`.
pub fn perf_args(domain: Domain, out: &Path) -> Vec<String> {
    let ev: Vec<String> = EVENTS
        .iter()
        .map(|(e, _)| format!("{e}:{}", domain.modifier()))
        .collect();
    vec![
        "perf".into(),
        "stat".into(),
        "-x,".into(),
        "-o".into(),
        out.display().to_string(),
        "-e".into(),
        ev.join(","),
        "--".into(),
    ]
}

/// Parses `perf stat -x,` output for the [`EVENTS`] in order. Returns the
/// metrics (`"instructions :u"`, ...) or why they are not available
/// (`<not supported>`, `<not counted>`, missing lines).
pub fn parse_csv(text: &str, domain: Domain) -> Result<BTreeMap<String, f64>, String> {
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split(',').collect())
        .collect();
    if rows.len() < EVENTS.len() {
        return Err(format!(
            "perf stat gave {} counter lines, expected {}",
            rows.len(),
            EVENTS.len()
        ));
    }
    let mut m = BTreeMap::new();
    for ((event, metric), row) in EVENTS.iter().zip(&rows) {
        let v = row.first().copied().unwrap_or("").trim();
        if v.starts_with('<') {
            return Err(format!("perf stat: {event}: {v}"));
        }
        let x: f64 = v
            .parse()
            .map_err(|_| format!("perf stat: {event}: unreadable count {v:?}"))?;
        m.insert(format!("{metric} :{}", domain.modifier()), x);
    }
    Ok(m)
}

/// Whether hardware counters can be read here: `Ok` or the reason they cannot
/// (perf missing, not permitted, or `<not supported>` in a VM).
pub fn probe(tmp: &Path) -> Result<(), String> {
    let out = tmp.join("perf-probe.csv");
    let mut argv = perf_args(Domain::User, &out);
    argv.push("true".into());
    let res = Command::new(&argv[0]).args(&argv[1..]).output();
    let o = match res {
        Ok(o) => o,
        Err(e) => return Err(format!("perf not found ({e})")),
    };
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("perf stat failed: {first}"));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("perf stat output: {e}"))?;
    let _ = std::fs::remove_file(&out);
    parse_csv(&text, Domain::User).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_event_and_domain() {
        let text = "# started on Sun Nov 22 07:41:27 2026\n\n\
            4816000000,,cycles:k,4077000000,100.00,,\n\
            5860000000,,instructions:k,4077000000,100.00,1.22,insn per cycle\n\
            410000000,,L1-icache-load-misses:k,4077000000,100.00,,\n";
        let m = parse_csv(text, Domain::Kernel).unwrap();
        assert_eq!(m["cycles :k"], 4.816e9);
        assert_eq!(m["instructions :k"], 5.86e9);
        assert_eq!(m["L1i misses :k"], 4.1e8);
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn not_supported_is_a_reason() {
        // Written by `perf stat -x, -o F -e cycles:u,instructions:u,
        // L1-icache-load-misses:u -- true` on the build machine (a VM).
        let text = "# started on Sun Nov 22 07:41:27 2026\n\n\
            <not supported>,,cycles:u,0,100.00,,\n\
            <not supported>,,instructions:u,0,100.00,,\n\
            <not supported>,,L1-icache-load-misses,0,100.00,,\n";
        let e = parse_csv(text, Domain::User).unwrap_err();
        assert_eq!(e, "perf stat: cycles: <not supported>");
        assert!(
            parse_csv("# nothing\n", Domain::User)
                .unwrap_err()
                .contains("0 counter lines")
        );
        let args = perf_args(Domain::Kernel, Path::new("/tmp/x.csv"));
        assert_eq!(args[6], "cycles:k,instructions:k,L1-icache-load-misses:k");
    }
}
