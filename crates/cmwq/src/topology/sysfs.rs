//! Reading the machine from a sysfs tree.
//!
//! The kernel's pods come from its own masks (`cpu_smt_mask()`, the
//! scheduler's LLC domain, `cpu_to_node()`); user space sees the same masks
//! through sysfs, so reading sysfs directly (no hwloc, no C library) gives the
//! pods the kernel computes.  Only online CPUs are read: the kernel removes
//! the `topology/` and `cache/` directories of an offline CPU.
//!
//! # Trees of every era
//!
//! The tree may come from an old or a new kernel, or be a dump that a tool
//! such as hwloc recorded, so each piece has a fallback chain; whichever link
//! was used is recorded in the [`Provenance`], whatever was missing or
//! derived in the notes:
//!
//! * Online CPUs: `cpu/online`; without it, the `cpuN` directories, each
//!   online unless its `online` file says `0` (cpu0, and any CPU that cannot
//!   be unplugged, has no such file).  Possible CPUs: `cpu/possible`, else
//!   the online CPUs, or the `cpuN` directories when `online` was derived.
//! * SMT core: `topology/thread_siblings_list`, `core_cpus_list` (the newer
//!   name), then the masks `thread_siblings` and `core_cpus` (trees from
//!   before the `_list` files, or dumps that kept only masks), then the CPU
//!   alone.
//! * Package: `topology/package_cpus_list`, `core_siblings_list` (its older
//!   name), the masks `package_cpus` and `core_siblings`, then CPUs grouped by
//!   `physical_package_id`, then one package.
//! * LLC: among `cache/index*/`, the highest `level` whose `type` is
//!   `Unified` or `Data` (the lowest index on a tie), and its
//!   `shared_cpu_list`, else its mask `shared_cpu_map`; without cache
//!   information, the package (what a VM without cache leaves would share,
//!   at best).
//! * Node: the `cpulist` of `devices/system/node/node*`, else its mask
//!   `cpumap`, else the `cpuN` links in the node's directory; without the
//!   `node` directory, one node 0; a CPU no node lists goes to node 0.  Node
//!   numbers may be sparse and nodes may hold no CPU (memory only); both
//!   count in `nr_nodes`, as in the kernel's `nr_node_ids`.
//!
//! Files may end in NUL bytes (dumps written from fixed-size buffers) or
//! extra whitespace; both are ignored, NULs with a note.  A file that is
//! present but garbage is an error naming it: guessing around garbage would
//! give pods nobody can explain.
//!
//! # Bounded reading
//!
//! A tree handed to `--sysfs` is not trusted to be sysfs.  Every file is
//! opened without blocking (a FIFO would otherwise wait for a writer forever)
//! and without becoming a controlling terminal, refused unless `fstat` says it
//! is a regular file (a `/dev/zero` would otherwise be read until memory runs
//! out), and read up to [`SYSFS_FILE_MAX_BYTES`].  What the reader keeps is
//! linear in the number of CPUs: sibling lists go straight into a union-find
//! ([`Sharing`]) instead of being stored per CPU, a list that the previous CPU
//! also gave costs one union, and every fallback adds a group once, not once
//! per member.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::cpulist::{parse_cpumask, quoted};
use super::{
    CPU_ID_LIMIT, ListSeen, Provenance, RawTopology, Sharing, TopologyError, format_cpulist,
    parse_cpulist,
};

/// The most bytes read from one sysfs file; a longer file is an error.
///
/// An ordinary sysfs attribute is at most one page (4 KiB).  The cpu-list
/// files of `topology/` are binary attributes that may exceed a page, and
/// the longest legitimate content is about 20 KiB (every other CPU of an
/// 8192-CPU machine as a list; a mask of all [`CPU_ID_LIMIT`] CPUs is 18
/// KiB), so 64 KiB leaves room while keeping a hostile tree cheap.
pub const SYSFS_FILE_MAX_BYTES: usize = 64 * 1024;

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

fn io_err(path: &Path, msg: impl Into<String>) -> TopologyError {
    TopologyError::Io {
        path: path_str(path),
        msg: msg.into(),
    }
}

fn parse_err(path: &Path, msg: impl Into<String>) -> TopologyError {
    TopologyError::Parse {
        path: path_str(path),
        msg: msg.into(),
    }
}

/// Whether an open error means "not there" (the file or a parent is missing).
fn is_absent(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

/// What a file that is not a regular file is, in words.
fn file_kind(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading if it is a regular file; `Ok(None)` if absent.
///
/// `O_NONBLOCK` makes opening a FIFO return at once instead of waiting for a
/// writer, `O_NOCTTY` keeps a terminal from becoming ours; `fstat` on the
/// open file (not a second lookup of the path) then decides.
fn open_regular(path: &Path) -> Result<Option<File>, TopologyError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(io_err(path, e.to_string())),
    };
    let meta = file.metadata().map_err(|e| io_err(path, e.to_string()))?;
    if !meta.file_type().is_file() {
        return Err(io_err(
            path,
            format!(
                "{}, not a regular file: refused (sysfs attributes are regular files)",
                file_kind(meta.file_type())
            ),
        ));
    }
    Ok(Some(file))
}

/// Reads the files of one tree, remembering what needs a note.
#[derive(Default)]
struct Files {
    /// Files whose trailing NUL bytes were dropped: how many, and the first.
    nul_trimmed: usize,
    first_nul: Option<String>,
}

impl Files {
    /// Reads a small text file without its trailing NULs and whitespace;
    /// `Ok(None)` if it (or a parent) does not exist.
    fn text(&mut self, path: &Path) -> Result<Option<String>, TopologyError> {
        let Some(file) = open_regular(path)? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        file.take(SYSFS_FILE_MAX_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| io_err(path, e.to_string()))?;
        if bytes.len() > SYSFS_FILE_MAX_BYTES {
            return Err(parse_err(
                path,
                format!(
                    "longer than {SYSFS_FILE_MAX_BYTES} bytes (SYSFS_FILE_MAX_BYTES): \
                     not a sysfs attribute"
                ),
            ));
        }
        let text = String::from_utf8(bytes).map_err(|_| parse_err(path, "not UTF-8 text"))?;
        let kept = text.trim_end_matches(|c: char| c == '\0' || c.is_whitespace());
        if text[kept.len()..].contains('\0') {
            self.nul_trimmed += 1;
            self.first_nul.get_or_insert_with(|| path_str(path));
        }
        Ok(Some(kept.to_string()))
    }

    /// Reads an optional decimal integer file.
    fn int(&mut self, path: &Path) -> Result<Option<i64>, TopologyError> {
        match self.text(path)? {
            Some(text) => text.trim().parse::<i64>().map(Some).map_err(|_| {
                parse_err(
                    path,
                    format!("expected an integer, found {}", quoted(text.trim())),
                )
            }),
            None => Ok(None),
        }
    }

    /// Reads an optional CPU set file in `form`; `nonempty` refuses an empty
    /// set.
    fn set(
        &mut self,
        path: &Path,
        form: Form,
        nonempty: bool,
    ) -> Result<Option<Vec<usize>>, TopologyError> {
        match self.text(path)? {
            Some(text) => form.parse(path, &text, nonempty).map(Some),
            None => Ok(None),
        }
    }

    /// The note about trailing NULs, if any file had them.
    fn nul_note(&self) -> Option<String> {
        self.first_nul.as_ref().map(|first| {
            format!(
                "trailing NUL bytes ignored in {} (first: {first})",
                super::plural(self.nul_trimmed, "file")
            )
        })
    }
}

/// How a file writes a set of CPUs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    /// `0-3,8` (`%*pbl`), the `*_list` files.
    List,
    /// `00000000,0000010f` (`%*pb`), the mask files.
    Mask,
}

impl Form {
    fn parse(self, path: &Path, text: &str, nonempty: bool) -> Result<Vec<usize>, TopologyError> {
        let (v, what) = match self {
            Form::List => (parse_cpulist(text), "cpu list"),
            Form::Mask => (parse_cpumask(text), "cpu mask"),
        };
        let v = v.map_err(|msg| parse_err(path, msg))?;
        if nonempty && v.is_empty() {
            return Err(parse_err(path, format!("empty {what}")));
        }
        Ok(v)
    }
}

/// The entries of a directory whose name is `prefix` followed by a number
/// (as the kernel writes it: no leading zeros), sorted by that number; empty
/// if the directory does not exist.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<(usize, PathBuf)>, TopologyError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if is_absent(&e) => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir, e.to_string())),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| io_err(dir, e.to_string()))?;
        let name = entry.file_name();
        let Some(num) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        if num.is_empty()
            || !num.bytes().all(|b| b.is_ascii_digit())
            || (num.len() > 1 && num.starts_with('0'))
        {
            continue;
        }
        // Ids beyond any real machine's are not ours to index arrays by.
        if let Ok(n) = num.parse::<usize>()
            && n < CPU_ID_LIMIT
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

/// One "CPUs sharing X" relation being read: the union-find, which files fed
/// it, and the last file read (consecutive CPUs usually list the same
/// group, and then the group costs one union instead of its length).
struct Relation {
    sharing: Sharing,
    used: Used,
    last: Option<Last>,
}

/// The last file a [`Relation`] read: its form and text (`1` is CPU 1 as a
/// list but CPU 0 as a mask), and what it listed.
struct Last {
    form: Form,
    text: String,
    list: Vec<usize>,
    seen: ListSeen,
}

impl Relation {
    fn new(online: &[usize]) -> Relation {
        Relation {
            sharing: Sharing::new(online, 0),
            used: Used::default(),
            last: None,
        }
    }

    /// Adds what `cpu`'s file `path` (in `form`, described as `label` in the
    /// provenance) lists; `Ok(false)` if the file is absent.
    fn read(
        &mut self,
        files: &mut Files,
        cpu: usize,
        path: &Path,
        form: Form,
        label: &str,
    ) -> Result<bool, TopologyError> {
        let Some(text) = files.text(path)? else {
            return Ok(false);
        };
        self.used.add(label);
        if let Some(last) = &self.last
            && last.form == form
            && last.text == text
        {
            self.sharing.add_again(cpu, &last.list, last.seen);
        } else {
            let list = form.parse(path, &text, true)?;
            let seen = self.sharing.add_list(cpu, &list);
            self.last = Some(Last {
                form,
                text,
                list,
                seen,
            });
        }
        Ok(true)
    }

    /// Tries each `(file, form, label)` under `dir` in order; whether one
    /// was there.
    fn read_first(
        &mut self,
        files: &mut Files,
        cpu: usize,
        dir: &Path,
        chain: &[(&str, Form, &str)],
    ) -> Result<bool, TopologyError> {
        for &(name, form, label) in chain {
            if self.read(files, cpu, &dir.join(name), form, label)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// SMT-core files, preferred first.
const SMT_CHAIN: &[(&str, Form, &str)] = &[
    ("thread_siblings_list", Form::List, "thread_siblings_list"),
    ("core_cpus_list", Form::List, "core_cpus_list"),
    ("thread_siblings", Form::Mask, "thread_siblings (mask)"),
    ("core_cpus", Form::Mask, "core_cpus (mask)"),
];

/// Package files, preferred first (`physical_package_id` comes after).
const PACKAGE_CHAIN: &[(&str, Form, &str)] = &[
    ("package_cpus_list", Form::List, "package_cpus_list"),
    ("core_siblings_list", Form::List, "core_siblings_list"),
    ("package_cpus", Form::Mask, "package_cpus (mask)"),
    ("core_siblings", Form::Mask, "core_siblings (mask)"),
];

/// The cache index that holds one CPU's LLC.
struct LlcIndex {
    dir: PathBuf,
    /// `cache/index3 (L3 Unified)`.
    label: String,
}

/// Finds the LLC index of a CPU: the highest level of type Unified or Data.
fn find_llc(files: &mut Files, cpu_path: &Path) -> Result<Option<LlcIndex>, TopologyError> {
    let cache = cpu_path.join("cache");
    let mut best: Option<(u64, usize, PathBuf, String)> = None;
    for (idx, dir) in numbered_entries(&cache, "index")? {
        let level_path = dir.join("level");
        let Some(level) = files.int(&level_path)? else {
            continue;
        };
        if level < 0 {
            return Err(parse_err(
                &level_path,
                format!("negative cache level {level}"),
            ));
        }
        let type_path = dir.join("type");
        let Some(ty) = files.text(&type_path)? else {
            continue;
        };
        let ty = ty.trim();
        match ty {
            "Unified" | "Data" => {}
            "Instruction" => continue,
            other => {
                return Err(parse_err(
                    &type_path,
                    format!(
                        "unknown cache type {} (expected Data, Instruction or Unified)",
                        quoted(other)
                    ),
                ));
            }
        }
        let level = level as u64;
        if best.as_ref().is_none_or(|b| level > b.0) {
            best = Some((level, idx, dir, ty.to_string()));
        }
    }
    Ok(best.map(|(level, idx, dir, ty)| LlcIndex {
        dir,
        label: format!("cache/index{idx} (L{level} {ty})"),
    }))
}

/// The online and possible CPUs, and a note when they were derived.
struct CpuSets {
    online: Vec<usize>,
    possible: Vec<usize>,
}

/// Reads `cpu/online` and `cpu/possible`, deriving what is missing.
fn read_cpu_sets(
    files: &mut Files,
    cpu_dir: &Path,
    notes: &mut Vec<String>,
) -> Result<CpuSets, TopologyError> {
    let online_path = cpu_dir.join("online");
    let (online, derived_from) = match files.set(&online_path, Form::List, false)? {
        Some(online) => (online, None),
        None => {
            let (online, present) = derive_online(files, cpu_dir, &online_path, notes)?;
            (online, Some(present))
        }
    };
    if online.is_empty() {
        return Err(parse_err(&online_path, "no online CPUs (empty list)"));
    }
    let possible_path = cpu_dir.join("possible");
    let possible = match files.set(&possible_path, Form::List, true)? {
        Some(possible) => possible,
        None => match derived_from {
            Some(present) => {
                notes.push("no cpu/possible: possible CPUs = the cpuN directories".into());
                present
            }
            None => {
                notes.push("no cpu/possible: possible CPUs = online CPUs".into());
                online.clone()
            }
        },
    };
    Ok(CpuSets { online, possible })
}

/// Without `cpu/online`: the `cpuN` directories, each online unless its
/// `online` file says 0.  Returns (online, every cpuN directory).
fn derive_online(
    files: &mut Files,
    cpu_dir: &Path,
    online_path: &Path,
    notes: &mut Vec<String>,
) -> Result<(Vec<usize>, Vec<usize>), TopologyError> {
    let dirs: Vec<(usize, PathBuf)> = numbered_entries(cpu_dir, "cpu")?
        .into_iter()
        .filter(|(_, p)| p.is_dir())
        .collect();
    if dirs.is_empty() {
        return Err(io_err(
            online_path,
            "missing (no such file), and no cpuN directories to derive it from; \
             is this a sysfs root?",
        ));
    }
    let (mut online, mut offline, mut no_file) = (Vec::new(), Vec::new(), Vec::new());
    for (cpu, dir) in &dirs {
        let path = dir.join("online");
        match files.text(&path)?.as_deref() {
            None => {
                no_file.push(*cpu);
                online.push(*cpu);
            }
            Some("1") => online.push(*cpu),
            Some("0") => offline.push(*cpu),
            Some(other) => {
                return Err(parse_err(
                    &path,
                    format!("expected 0 or 1, found {}", quoted(other)),
                ));
            }
        }
    }
    let mut note = format!(
        "no cpu/online: online CPUs {} derived from the cpuN directories",
        format_cpulist(&online)
    );
    if !no_file.is_empty() {
        note.push_str(&format!(
            " (CPUs {} have no online file: online, as cpu0 usually)",
            format_cpulist(&no_file)
        ));
    }
    if !offline.is_empty() {
        note.push_str(&format!(
            "; CPUs {} offline (online file 0)",
            format_cpulist(&offline)
        ));
    }
    notes.push(note);
    let present = dirs.into_iter().map(|(c, _)| c).collect();
    Ok((online, present))
}

/// What the per-CPU pass found.
struct PerCpu {
    smt: Relation,
    package: Relation,
    llc: Relation,
}

/// Reads each online CPU's `topology/` and `cache/`, applies the fallbacks
/// and notes what degraded.
fn read_per_cpu(
    files: &mut Files,
    cpu_dir: &Path,
    online: &[usize],
    notes: &mut Vec<String>,
) -> Result<PerCpu, TopologyError> {
    let mut smt = Relation::new(online);
    let mut package = Relation::new(online);
    let mut llc = Relation::new(online);
    let (mut no_dir, mut smt_alone, mut pkg_unknown, mut llc_missing) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut pkg_by_id: BTreeMap<i64, Vec<usize>> = BTreeMap::new();

    for &c in online {
        let cpu_path = cpu_dir.join(format!("cpu{c}"));
        if !cpu_path.is_dir() {
            // Nothing to read; every fallback below applies.
            no_dir.push(c);
            smt_alone.push(c);
            pkg_unknown.push(c);
            llc_missing.push(c);
            continue;
        }
        let topo = cpu_path.join("topology");
        if !smt.read_first(files, c, &topo, SMT_CHAIN)? {
            smt_alone.push(c);
        }
        if !package.read_first(files, c, &topo, PACKAGE_CHAIN)? {
            if let Some(id) = files.int(&topo.join("physical_package_id"))? {
                package.used.add("physical_package_id");
                pkg_by_id.entry(id).or_default().push(c);
            } else {
                pkg_unknown.push(c);
            }
        }
        let found = match find_llc(files, &cpu_path)? {
            Some(ix) => {
                llc.read(
                    files,
                    c,
                    &ix.dir.join("shared_cpu_list"),
                    Form::List,
                    &ix.label,
                )? || llc.read(
                    files,
                    c,
                    &ix.dir.join("shared_cpu_map"),
                    Form::Mask,
                    &format!("{} shared_cpu_map (mask)", ix.label),
                )?
            }
            None => false,
        };
        if !found {
            llc_missing.push(c);
        }
    }

    if !no_dir.is_empty() {
        notes.push(format!(
            "no cpuN directory for online CPUs {}: nothing per CPU to read",
            format_cpulist(&no_dir)
        ));
    }
    if !smt_alone.is_empty() {
        smt.used.add("none for some CPUs");
        notes.push(format!(
            "no topology/thread_siblings_list, core_cpus_list, thread_siblings or core_cpus \
             for CPUs {}: each is its own SMT core",
            format_cpulist(&smt_alone)
        ));
    }
    for cpus in pkg_by_id.values() {
        package.sharing.add_group(cpus);
    }
    if !pkg_unknown.is_empty() {
        package.used.add("none for some CPUs");
        notes.push(format!(
            "no package information (package_cpus_list, core_siblings_list, package_cpus, \
             core_siblings, physical_package_id) for CPUs {}: they share one package",
            format_cpulist(&pkg_unknown)
        ));
        package.sharing.add_group(&pkg_unknown);
    }
    if !llc_missing.is_empty() {
        llc.used.add("package (no cache information)");
        notes.push(format!(
            "no usable cache/index*/ (level, type Unified or Data, shared_cpu_list or \
             shared_cpu_map) for CPUs {}: LLC = package",
            format_cpulist(&llc_missing)
        ));
        llc_is_package(&mut llc.sharing, &mut package.sharing, online, &llc_missing);
    }
    Ok(PerCpu { smt, package, llc })
}

/// The LLC fallback: every package holding a CPU without cache information
/// becomes one LLC.  One pass over the CPUs, whatever the package sizes.
fn llc_is_package(llc: &mut Sharing, package: &mut Sharing, online: &[usize], missing: &[usize]) {
    let roots: HashSet<usize> = missing.iter().filter_map(|&c| package.lowest(c)).collect();
    for &c in online {
        if let Some(r) = package.lowest(c)
            && roots.contains(&r)
        {
            llc.join(c, r);
        }
    }
}

/// NUMA nodes: per online CPU its node, one more than the highest node id,
/// and where they came from.
struct Nodes {
    node: HashMap<usize, usize>,
    nr_nodes: usize,
    source: String,
}

/// Reads `devices/system/node/node*`; see the module docs.
fn read_nodes(
    files: &mut Files,
    root: &Path,
    online: &[usize],
    notes: &mut Vec<String>,
) -> Result<Nodes, TopologyError> {
    let node_dir = root.join("devices/system/node");
    let nodes = numbered_entries(&node_dir, "node")?;
    let mut out = Nodes {
        node: HashMap::new(),
        nr_nodes: 1,
        source: String::new(),
    };
    if nodes.is_empty() {
        notes.push(format!("no {}/node*: one node 0", path_str(&node_dir)));
        out.source = "none (one node 0)".into();
        return Ok(out);
    }
    let is_online: HashSet<usize> = online.iter().copied().collect();
    let mut used = Used::default();
    let mut twice = Vec::new();
    let mut from_links = Vec::new();
    for (id, dir) in &nodes {
        out.nr_nodes = out.nr_nodes.max(id + 1);
        let cpus = if let Some(v) = files.set(&dir.join("cpulist"), Form::List, false)? {
            used.add("node*/cpulist");
            v
        } else if let Some(v) = files.set(&dir.join("cpumap"), Form::Mask, false)? {
            used.add("node*/cpumap (mask)");
            v
        } else {
            let links: Vec<usize> = numbered_entries(dir, "cpu")?
                .into_iter()
                .map(|(c, _)| c)
                .collect();
            used.add("node*/cpuN links");
            from_links.push(*id);
            links
        };
        for c in cpus.into_iter().filter(|c| is_online.contains(c)) {
            match out.node.entry(c) {
                Entry::Occupied(_) => twice.push(c),
                Entry::Vacant(v) => {
                    v.insert(*id);
                }
            }
        }
    }
    if !from_links.is_empty() {
        notes.push(format!(
            "no cpulist or cpumap in nodes {}: their CPUs are the cpuN entries of the node \
             directory",
            format_cpulist(&from_links)
        ));
    }
    if !twice.is_empty() {
        twice.sort_unstable();
        notes.push(format!(
            "CPUs {} are listed by more than one node: the lowest node kept",
            format_cpulist(&twice)
        ));
    }
    let orphans: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !out.node.contains_key(c))
        .collect();
    if !orphans.is_empty() {
        notes.push(format!(
            "CPUs {} are in no node*/cpulist: node 0",
            format_cpulist(&orphans)
        ));
    }
    out.source = used.describe();
    Ok(out)
}

/// Reads everything under `root`; see the module docs.
pub(crate) fn read(root: &Path) -> Result<RawTopology, TopologyError> {
    let cpu_dir = root.join("devices/system/cpu");
    let mut files = Files::default();
    let mut notes = Vec::new();
    let CpuSets { online, possible } = read_cpu_sets(&mut files, &cpu_dir, &mut notes)?;
    let PerCpu { smt, package, llc } = read_per_cpu(&mut files, &cpu_dir, &online, &mut notes)?;
    let nodes = read_nodes(&mut files, root, &online, &mut notes)?;
    if let Some(n) = files.nul_note() {
        notes.push(n);
    }
    let provenance = Provenance {
        smt: smt.used.describe(),
        package: package.used.describe(),
        llc: llc.used.describe(),
        node: nodes.source,
    };
    Ok(RawTopology {
        source: format!("sysfs:{}", path_str(root)),
        possible,
        smt: smt.sharing.into_lists("SMT sibling", &mut notes),
        package: package.sharing.into_lists("package", &mut notes),
        llc: llc.sharing.into_lists("LLC", &mut notes),
        online,
        node: nodes.node,
        nr_nodes: nodes.nr_nodes,
        provenance,
        notes,
        // The lists are components already, checked above.
        lists_partial: true,
    })
}
