//! Reading the machine from a sysfs tree.
//!
//! The kernel's pods come from its own masks (`cpu_smt_mask()`, the
//! scheduler's LLC domain, `cpu_to_node()`); user space sees the same masks
//! through sysfs, so reading sysfs directly (no hwloc, no C library) gives the
//! pods the kernel computes.  Only online CPUs are read: the kernel removes
//! the `topology/` and `cache/` directories of an offline CPU.
//!
//! Each piece has a fallback chain, and whichever link was used is recorded
//! in the [`Provenance`], whatever was missing in the notes:
//!
//! * SMT core: `topology/thread_siblings_list`, then `topology/core_cpus_list`
//!   (the newer name), then the CPU alone.
//! * Package: `topology/package_cpus_list`, then `core_siblings_list` (its
//!   older name), then CPUs grouped by `physical_package_id`, then one
//!   package.
//! * LLC: among `cache/index*/`, the highest `level` whose `type` is
//!   `Unified` or `Data` (the lowest index on a tie), and its
//!   `shared_cpu_list`; without cache information, the package (what a VM
//!   without cache leaves would share, at best).
//! * Node: the `cpulist` of `devices/system/node/node*`; without that
//!   directory, one node 0; a CPU no node lists goes to node 0.
//!
//! A file that is present but unreadable or garbage is an error naming it.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{Provenance, RawTopology, TopologyError, format_cpulist, parse_cpulist};

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// Reads a small text file; `Ok(None)` if it (or a parent) does not exist.
fn read_opt(path: &Path) -> Result<Option<String>, TopologyError> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| TopologyError::Parse {
                path: path_str(path),
                msg: "not UTF-8 text".into(),
            }),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => Ok(None),
        Err(e) => Err(TopologyError::Io {
            path: path_str(path),
            msg: e.to_string(),
        }),
    }
}

/// Parses a cpu list file; `nonempty` refuses an empty list.
fn list(path: &Path, text: &str, nonempty: bool) -> Result<Vec<usize>, TopologyError> {
    let v = parse_cpulist(text).map_err(|msg| TopologyError::Parse {
        path: path_str(path),
        msg,
    })?;
    if nonempty && v.is_empty() {
        return Err(TopologyError::Parse {
            path: path_str(path),
            msg: "empty cpu list".into(),
        });
    }
    Ok(v)
}

/// Reads an optional cpu list file that must not be empty when present.
fn read_list(path: &Path) -> Result<Option<Vec<usize>>, TopologyError> {
    match read_opt(path)? {
        Some(text) => list(path, &text, true).map(Some),
        None => Ok(None),
    }
}

/// Reads an optional decimal integer file.
fn read_int(path: &Path) -> Result<Option<i64>, TopologyError> {
    match read_opt(path)? {
        Some(text) => text
            .trim()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| TopologyError::Parse {
                path: path_str(path),
                msg: format!("expected an integer, found {:?}", text.trim()),
            }),
        None => Ok(None),
    }
}

/// The entries of a directory whose name is `prefix` followed by a number,
/// sorted by that number; empty if the directory does not exist.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<(usize, PathBuf)>, TopologyError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(Vec::new());
        }
        Err(e) => {
            return Err(TopologyError::Io {
                path: path_str(dir),
                msg: e.to_string(),
            });
        }
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| TopologyError::Io {
            path: path_str(dir),
            msg: e.to_string(),
        })?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(num) = name.strip_prefix(prefix) else {
            continue;
        };
        if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // Ids beyond any real machine's are not ours to index arrays by.
        if let Ok(n) = num.parse::<usize>()
            && n < super::CPU_ID_LIMIT
        {
            out.push((n, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Which links of a fallback chain were used, for the provenance line.
#[derive(Default)]
struct Used(BTreeSet<String>);

impl Used {
    fn add(&mut self, s: impl Into<String>) {
        self.0.insert(s.into());
    }
    fn describe(self) -> String {
        self.0.into_iter().collect::<Vec<_>>().join(" + ")
    }
}

/// The LLC of one CPU as found under `cache/`.
enum CacheFound {
    /// `shared_cpu_list` of the chosen index, and a description of it.
    Llc(Vec<usize>, String),
    /// No usable cache information.
    Missing,
}

fn read_llc(cpu_path: &Path) -> Result<CacheFound, TopologyError> {
    let cache = cpu_path.join("cache");
    let mut best: Option<(u64, usize, PathBuf, String)> = None;
    for (idx, dir) in numbered_entries(&cache, "index")? {
        let level_path = dir.join("level");
        let Some(level) = read_int(&level_path)? else {
            continue;
        };
        if level < 0 {
            return Err(TopologyError::Parse {
                path: path_str(&level_path),
                msg: format!("negative cache level {level}"),
            });
        }
        let type_path = dir.join("type");
        let Some(ty) = read_opt(&type_path)? else {
            continue;
        };
        let ty = ty.trim();
        match ty {
            "Unified" | "Data" => {}
            "Instruction" => continue,
            other => {
                return Err(TopologyError::Parse {
                    path: path_str(&type_path),
                    msg: format!(
                        "unknown cache type {other:?} (expected Data, Instruction or Unified)"
                    ),
                });
            }
        }
        let level = level as u64;
        if best.as_ref().is_none_or(|b| level > b.0) {
            best = Some((level, idx, dir, ty.to_string()));
        }
    }
    let Some((level, idx, dir, ty)) = best else {
        return Ok(CacheFound::Missing);
    };
    match read_list(&dir.join("shared_cpu_list"))? {
        Some(l) => Ok(CacheFound::Llc(
            l,
            format!("cache/index{idx} (L{level} {ty})"),
        )),
        None => Ok(CacheFound::Missing),
    }
}

/// Reads everything under `root`; see the module docs.
pub(crate) fn read(root: &Path) -> Result<RawTopology, TopologyError> {
    let cpu_dir = root.join("devices/system/cpu");
    let online_path = cpu_dir.join("online");
    let online = match read_opt(&online_path)? {
        Some(text) => list(&online_path, &text, false)?,
        None => {
            return Err(TopologyError::Io {
                path: path_str(&online_path),
                msg: "missing (no such file); is this a sysfs root?".into(),
            });
        }
    };
    if online.is_empty() {
        return Err(TopologyError::Parse {
            path: path_str(&online_path),
            msg: "no online CPUs (empty list)".into(),
        });
    }
    let mut notes = Vec::new();
    let possible_path = cpu_dir.join("possible");
    let possible = match read_opt(&possible_path)? {
        Some(text) => list(&possible_path, &text, true)?,
        None => {
            notes.push("no cpu/possible: possible CPUs = online CPUs".into());
            online.clone()
        }
    };

    let mut smt = HashMap::new();
    let mut package = HashMap::new();
    let mut llc = HashMap::new();
    let (mut smt_used, mut pkg_used, mut llc_used) =
        (Used::default(), Used::default(), Used::default());
    let mut smt_alone = Vec::new();
    let mut pkg_by_id: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    let mut pkg_unknown = Vec::new();
    let mut llc_missing = Vec::new();

    for &c in &online {
        let cpu_path = cpu_dir.join(format!("cpu{c}"));
        let topo = cpu_path.join("topology");

        if let Some(l) = read_list(&topo.join("thread_siblings_list"))? {
            smt_used.add("thread_siblings_list");
            smt.insert(c, l);
        } else if let Some(l) = read_list(&topo.join("core_cpus_list"))? {
            smt_used.add("core_cpus_list");
            smt.insert(c, l);
        } else {
            smt_alone.push(c);
        }

        if let Some(l) = read_list(&topo.join("package_cpus_list"))? {
            pkg_used.add("package_cpus_list");
            package.insert(c, l);
        } else if let Some(l) = read_list(&topo.join("core_siblings_list"))? {
            pkg_used.add("core_siblings_list");
            package.insert(c, l);
        } else if let Some(id) = read_int(&topo.join("physical_package_id"))? {
            pkg_used.add("physical_package_id");
            pkg_by_id.entry(id).or_default().push(c);
        } else {
            pkg_unknown.push(c);
        }

        match read_llc(&cpu_path)? {
            CacheFound::Llc(l, how) => {
                llc_used.add(how);
                llc.insert(c, l);
            }
            CacheFound::Missing => llc_missing.push(c),
        }
    }

    if !smt_alone.is_empty() {
        smt_used.add("none for some CPUs");
        notes.push(format!(
            "no topology/thread_siblings_list or core_cpus_list for CPUs {}: each is its own SMT core",
            format_cpulist(&smt_alone)
        ));
    }
    for cpus in pkg_by_id.into_values() {
        for &c in &cpus {
            package.insert(c, cpus.clone());
        }
    }
    if !pkg_unknown.is_empty() {
        pkg_used.add("none for some CPUs");
        notes.push(format!(
            "no package information (package_cpus_list, core_siblings_list, physical_package_id) \
             for CPUs {}: they share one package",
            format_cpulist(&pkg_unknown)
        ));
        for &c in &pkg_unknown {
            package.insert(c, pkg_unknown.clone());
        }
    }
    if !llc_missing.is_empty() {
        llc_used.add("package (no cache information)");
        notes.push(format!(
            "no usable cache/index*/ (level, type Unified or Data, shared_cpu_list) for CPUs {}: \
             LLC = package",
            format_cpulist(&llc_missing)
        ));
        for &c in &llc_missing {
            llc.insert(c, package.get(&c).cloned().unwrap_or_else(|| vec![c]));
        }
    }

    // NUMA nodes.
    let node_dir = root.join("devices/system/node");
    let nodes = numbered_entries(&node_dir, "node")?;
    let mut node = HashMap::new();
    let mut nr_nodes = 1;
    let node_src;
    if nodes.is_empty() {
        notes.push(format!("no {}/node*: one node 0", path_str(&node_dir)));
        node_src = "none (one node 0)".to_string();
    } else {
        node_src = "node*/cpulist".to_string();
        let mut twice = Vec::new();
        for (id, dir) in &nodes {
            nr_nodes = nr_nodes.max(id + 1);
            let path = dir.join("cpulist");
            let Some(text) = read_opt(&path)? else {
                notes.push(format!(
                    "no {}: node {id} treated as having no CPUs",
                    path_str(&path)
                ));
                continue;
            };
            for c in list(&path, &text, false)? {
                match node.entry(c) {
                    Entry::Occupied(_) => twice.push(c),
                    Entry::Vacant(v) => {
                        v.insert(*id);
                    }
                }
            }
        }
        if !twice.is_empty() {
            notes.push(format!(
                "CPUs {} are listed by more than one node: the lowest node kept",
                format_cpulist(&twice)
            ));
        }
        let orphans: Vec<usize> = online
            .iter()
            .copied()
            .filter(|c| !node.contains_key(c))
            .collect();
        if !orphans.is_empty() {
            notes.push(format!(
                "CPUs {} are in no node*/cpulist: node 0",
                format_cpulist(&orphans)
            ));
        }
    }

    Ok(RawTopology {
        source: format!("sysfs:{}", path_str(root)),
        possible,
        online,
        smt,
        package,
        llc,
        node,
        nr_nodes,
        provenance: Provenance {
            smt: smt_used.describe(),
            package: pkg_used.describe(),
            llc: llc_used.describe(),
            node: node_src,
        },
        notes,
        lists_partial: false,
    })
}
