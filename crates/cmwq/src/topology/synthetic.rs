//! Synthetic machines from an hwloc-style spec.
//!
//! Pods matter most on machines few developers have at their desk: a 72-core
//! single-LLC Grace (`pack:1 l3:1 core:72 pu:1`), an 88-core EPYC with eleven
//! 8-core CCDs (`pack:1 l3:11 core:8 pu:2`), a two-socket Xeon
//! (`pack:2 numa:1 l3:1 core:18 pu:2`).  A synthetic spec lets any machine
//! compute their pods.
//!
//! # Grammar
//!
//! Whitespace-separated `level:count` tokens, outermost level first, each
//! count being the number of that level under *one* instance of the level
//! above (hwloc's convention).  Levels, with accepted aliases
//! (case-insensitive):
//!
//! | level | aliases | meaning |
//! |---|---|---|
//! | `pack` | `package`, `socket` | packages |
//! | `numa` | `node` | NUMA nodes per package |
//! | `l3` | `llc`, `cache` | last-level caches per node |
//! | `l2` | | L2 caches per LLC (no scope sees them) |
//! | `l1` | `l1d` | L1 caches per L2 (no scope sees them) |
//! | `core` | | cores per L1 |
//! | `pu` | `thread`, `smt` | hardware threads per core |
//!
//! A level that is not given counts 1, so the LLC spans a node when `l3` is
//! missing.  Levels must appear in that order, each at most once, with a
//! count of at least 1; the machine may have at most
//! [`CPU_ID_LIMIT`] CPUs.  Errors name the token.
//!
//! # Numbering
//!
//! CPUs are numbered depth-first, like hwloc's synthetic topologies: the
//! threads of one core are adjacent (`pu:2` gives cores {0,1}, {2,3}, ...),
//! then cores of one LLC, and so on.  (Linux on x86 usually numbers the
//! second threads after all first threads, `i` and `i + nr_cores`; use a
//! sysfs fixture to see that numbering.)  Node ids are global across
//! packages: `pack:2 numa:2` has nodes 0 and 1 on package 0, 2 and 3 on
//! package 1.  Every CPU is possible and online.

use std::collections::HashMap;

use super::{CPU_ID_LIMIT, Provenance, RawTopology, TopologyError};

/// The levels, outermost first.
const LEVELS: [(&str, &[&str]); 7] = [
    ("pack", &["pack", "package", "socket"]),
    ("numa", &["numa", "node"]),
    ("l3", &["l3", "llc", "cache"]),
    ("l2", &["l2"]),
    ("l1", &["l1", "l1d"]),
    ("core", &["core"]),
    ("pu", &["pu", "thread", "smt"]),
];
const PACK: usize = 0;
const NUMA: usize = 1;
const L3: usize = 2;
const CORE: usize = 5;

fn bad(token: &str, why: impl Into<String>) -> TopologyError {
    TopologyError::BadValue {
        what: "synthetic topology token".into(),
        value: token.into(),
        why: why.into(),
    }
}

/// Parses `spec` into the count of every level (1 where not given).
pub(crate) fn parse_spec(spec: &str) -> Result<[usize; 7], TopologyError> {
    let mut counts = [1usize; 7];
    let mut last: Option<usize> = None;
    let mut any = false;
    for token in spec.split_whitespace() {
        any = true;
        let Some((name, count)) = token.split_once(':') else {
            return Err(bad(token, "expected LEVEL:COUNT, e.g. core:8"));
        };
        let lname = name.to_ascii_lowercase();
        let Some(level) = LEVELS
            .iter()
            .position(|(_, al)| al.contains(&lname.as_str()))
        else {
            return Err(bad(
                token,
                format!("unknown level {name:?}; levels are pack, numa, l3, l2, l1, core, pu"),
            ));
        };
        if let Some(prev) = last {
            if level == prev {
                return Err(bad(token, format!("level {} given twice", LEVELS[level].0)));
            }
            if level < prev {
                return Err(bad(
                    token,
                    format!(
                        "level {} must come before {} (outermost first)",
                        LEVELS[level].0, LEVELS[prev].0
                    ),
                ));
            }
        }
        let n: usize = match count.parse() {
            Ok(n) if n >= 1 => n,
            Ok(_) => return Err(bad(token, "the count must be at least 1")),
            Err(_) => return Err(bad(token, format!("count {count:?} is not a number"))),
        };
        counts[level] = n;
        last = Some(level);
    }
    if !any {
        return Err(TopologyError::BadValue {
            what: "synthetic topology spec".into(),
            value: spec.into(),
            why: "empty; expected e.g. \"pack:1 l3:11 core:8 pu:2\"".into(),
        });
    }
    let total = counts.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n));
    match total {
        Some(t) if t <= CPU_ID_LIMIT => Ok(counts),
        _ => Err(TopologyError::BadValue {
            what: "synthetic topology spec".into(),
            value: spec.into(),
            why: format!("more than {CPU_ID_LIMIT} CPUs"),
        }),
    }
}

/// Builds the machine described by `spec`.
pub(crate) fn build(spec: &str) -> Result<RawTopology, TopologyError> {
    let counts = parse_spec(spec)?;
    let total: usize = counts.iter().product();
    // Number of CPUs under one instance of each level.
    let span: [usize; 7] = std::array::from_fn(|l| counts[l + 1..].iter().product());
    let group = |cpu: usize, level: usize| -> Vec<usize> {
        let w = span[level];
        let start = cpu / w * w;
        (start..start + w).collect()
    };
    let cpus: Vec<usize> = (0..total).collect();
    let mut smt = HashMap::new();
    let mut package = HashMap::new();
    let mut llc = HashMap::new();
    let mut node = HashMap::new();
    for &c in &cpus {
        // Lists are only needed once per group: give the full list to the
        // group's first CPU and the CPU alone to the others.
        for (map, level) in [(&mut smt, CORE), (&mut package, PACK), (&mut llc, L3)] {
            let w = span[level];
            map.insert(c, if c % w == 0 { group(c, level) } else { vec![c] });
        }
        node.insert(c, c / span[NUMA]);
    }
    let nr_nodes = counts[PACK] * counts[NUMA];
    let normalized: Vec<&str> = spec.split_whitespace().collect();
    Ok(RawTopology {
        source: format!("synthetic:{}", normalized.join(" ")),
        possible: cpus.clone(),
        online: cpus,
        smt,
        package,
        llc,
        node,
        nr_nodes,
        provenance: Provenance {
            smt: "synthetic pu".into(),
            package: "synthetic pack".into(),
            llc: "synthetic l3".into(),
            node: "synthetic numa".into(),
        },
        notes: Vec::new(),
        lists_partial: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(
            parse_spec("pack:2 numa:1 l3:4 core:8 pu:2").unwrap(),
            [2, 1, 4, 1, 1, 8, 2]
        );
        assert_eq!(
            parse_spec("Package:1 LLC:11 core:8 PU:2").unwrap(),
            [1, 1, 11, 1, 1, 8, 2]
        );
        assert_eq!(parse_spec("core:72").unwrap(), [1, 1, 1, 1, 1, 72, 1]);
        for bad in [
            "",
            "pack",
            "pack:0",
            "pack:x",
            "foo:2",
            "core:2 pack:2",
            "pu:2 pu:2",
            "core:100000 pu:2",
        ] {
            assert!(parse_spec(bad).is_err(), "{bad:?}");
        }
    }
}
