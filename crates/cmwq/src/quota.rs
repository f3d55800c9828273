//! The process's CPU quota, read from its cgroups (the JVM's container
//! support and Go's automaxprocs read the same files; the kernel's workqueue
//! has no quota, see the engine's `pool/budget.rs` for what cmwq does with it).
//!
//! Where it comes from:
//!
//! - cgroup v2: `cpu.max` of the process's cgroup (`0::PATH` in
//!   `/proc/self/cgroup`, under the `cgroup2` mount of `/proc/self/mountinfo`):
//!   `max 100000` (no limit) or `QUOTA PERIOD` in microseconds.
//! - cgroup v1: `cpu.cfs_quota_us` (`-1`: no limit) and `cpu.cfs_period_us` of
//!   the process's cgroup in the hierarchy that has the `cpu` controller.
//!
//! Every cgroup from the process's own up to the mount's root is read, and the
//! smallest limit (in CPUs, quota / period) wins: a parent's limit binds its
//! children whatever they say, so reading the leaf alone (automaxprocs does)
//! misses a limit set one level up, as a container runtime or a systemd slice
//! often sets it (the JVM walks up the same way since JDK 23). A level whose
//! file is missing (the root cgroup, a v2 level without the `cpu` controller)
//! has no limit. Both versions are read where both exist (a hybrid host), and
//! the smaller limit wins again.
//!
//! Every path is taken under a `root` parameter, so tests run on fixture trees
//! (`ROOT/proc/self/cgroup`, `ROOT/proc/self/mountinfo`, and the mount points
//! that mountinfo names, under `ROOT`); [`read_cpu_quota`] reads the real
//! machine from `/`. A file that does not parse is an error naming the file
//! and its text, never a panic.

use std::fmt;
use std::path::{Path, PathBuf};

/// A CPU limit found in a cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuQuota {
    /// Run time allowed per period, in microseconds.
    pub quota_us: u64,
    /// The period, in microseconds.
    pub period_us: u64,
    /// The cgroup that sets the smallest limit (a path under its mount,
    /// e.g. `/system.slice/x.service`).
    pub cgroup: String,
    /// `1` or `2`: the cgroup version of the file it was read from.
    pub version: u8,
}

impl CpuQuota {
    /// The limit in CPUs (quota / period), e.g. 0.5 or 1.5.
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us as f64
    }

    /// ceil(quota / period), at least 1: how many threads may run at once
    /// without exceeding the quota over a period.
    pub fn ceil_cpus(&self) -> usize {
        (self.quota_us.div_ceil(self.period_us) as usize).max(1)
    }

    /// Smaller in CPUs than `o` (exact: quota × period cross-multiplied).
    fn tighter_than(&self, o: &CpuQuota) -> bool {
        (self.quota_us as u128) * (o.period_us as u128)
            < (o.quota_us as u128) * (self.period_us as u128)
    }
}

impl fmt::Display for CpuQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.2} CPUs ({} us per {} us, cgroup v{} {})",
            self.cpus(),
            self.quota_us,
            self.period_us,
            self.version,
            self.cgroup
        )
    }
}

/// A cgroup file could not be read or does not say what it should.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub what: String,
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (set CMWQ_CPU_QUOTA=off or =N to not read the cgroup quota)",
            self.path.display(),
            self.what
        )
    }
}

impl std::error::Error for QuotaError {}

fn bad(path: &Path, what: impl Into<String>) -> QuotaError {
    QuotaError {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

/// Where a process's cgroup directories are: the cgroup's path inside a
/// mount, and that mount's directory (under the root). Found once; the
/// quota files under it are re-read cheaply ([`CgroupDirs::read`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupDirs {
    /// cgroup v2: the mount directory and the cgroup's path in it.
    v2: Option<(PathBuf, String)>,
    /// cgroup v1, the hierarchy with the `cpu` controller: the same.
    v1: Option<(PathBuf, String)>,
}

/// One mount of `/proc/self/mountinfo`: (its root inside the hierarchy,
/// the mount point, the filesystem type, the super options).
pub(crate) fn mounts(text: &str) -> impl Iterator<Item = (&str, &str, &str, &str)> {
    text.lines().filter_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let pre: Vec<&str> = pre.split(' ').collect();
        let mut post = post.split(' ');
        let fstype = post.next()?;
        let _source = post.next()?;
        let opts = post.next().unwrap_or("");
        Some((*pre.get(3)?, *pre.get(4)?, fstype, opts))
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
pub(crate) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && let Some(d) = b.get(i + 1..i + 4)
            && d.iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = d.iter().fold(0u32, |a, c| a * 8 + u32::from(c - b'0'));
            out.push(v as u8);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup's path relative to the mount: a mount of a sub-tree (its
/// root is not `/`, as in a container without a cgroup namespace) holds the
/// part of the path below that root.
pub(crate) fn below(mount_root: &str, cgroup: &str) -> String {
    if mount_root == "/" {
        return cgroup.to_string();
    }
    match cgroup.strip_prefix(mount_root) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.to_string(),
        // The cgroup is not under the mount (a namespace shows `/`): take the
        // path as it is, relative to the mount.
        _ => cgroup.to_string(),
    }
}

impl CgroupDirs {
    /// Finds the process's cgroups under `root` (`/` for the machine).
    pub fn find(root: &Path) -> Result<CgroupDirs, QuotaError> {
        let cg_path = root.join("proc/self/cgroup");
        let cg = std::fs::read_to_string(&cg_path).map_err(|e| bad(&cg_path, e.to_string()))?;
        let mi_path = root.join("proc/self/mountinfo");
        let mi = std::fs::read_to_string(&mi_path).map_err(|e| bad(&mi_path, e.to_string()))?;
        let mut v2_path = None;
        let mut v1_path = None;
        for line in cg.lines().filter(|l| !l.trim().is_empty()) {
            let mut f = line.splitn(3, ':');
            let (Some(_id), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
                return Err(bad(
                    &cg_path,
                    format!("line {line:?} is not HIERARCHY:CONTROLLERS:PATH"),
                ));
            };
            if !path.starts_with('/') {
                return Err(bad(
                    &cg_path,
                    format!("line {line:?}: the path does not start with /"),
                ));
            }
            if ctrls.is_empty() {
                v2_path = Some(path.to_string());
            } else if ctrls.split(',').any(|c| c == "cpu") {
                v1_path = Some(path.to_string());
            }
        }
        let mut dirs = CgroupDirs::default();
        for (mroot, point, fstype, opts) in mounts(&mi) {
            let dir = root.join(unescape(point).trim_start_matches('/'));
            if fstype == "cgroup2"
                && dirs.v2.is_none()
                && let Some(p) = &v2_path
            {
                dirs.v2 = Some((dir, below(&unescape(mroot), p)));
            } else if fstype == "cgroup"
                && dirs.v1.is_none()
                && opts.split(',').any(|o| o == "cpu")
                && let Some(p) = &v1_path
            {
                dirs.v1 = Some((dir, below(&unescape(mroot), p)));
            }
        }
        Ok(dirs)
    }

    /// Whether any cgroup hierarchy with a CPU limit was found.
    pub fn is_empty(&self) -> bool {
        self.v1.is_none() && self.v2.is_none()
    }

    /// Reads the limits along the path, both versions: the tightest, or
    /// `None` where no level sets one.
    pub fn read(&self) -> Result<Option<CpuQuota>, QuotaError> {
        let mut best: Option<CpuQuota> = None;
        let mut consider = |q: CpuQuota| {
            if best.as_ref().is_none_or(|b| q.tighter_than(b)) {
                best = Some(q);
            }
        };
        if let Some((mount, path)) = &self.v2 {
            for (dir, cg) in levels(mount, path) {
                if let Some(q) = read_v2(&dir.join("cpu.max"), &cg)? {
                    consider(q);
                }
            }
        }
        if let Some((mount, path)) = &self.v1 {
            for (dir, cg) in levels(mount, path) {
                if let Some(q) = read_v1(&dir, &cg)? {
                    consider(q);
                }
            }
        }
        Ok(best)
    }
}

/// Every directory from the cgroup `path` up to the mount's root, with the
/// cgroup path it stands for.
pub(crate) fn levels(mount: &Path, path: &str) -> Vec<(PathBuf, String)> {
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    (0..=parts.len())
        .rev()
        .map(|n| {
            let mut dir = mount.to_path_buf();
            dir.extend(&parts[..n]);
            (dir, format!("/{}", parts[..n].join("/")))
        })
        .collect()
}

/// Reads a file that may be absent (that level sets no limit).
fn read_opt(path: &Path) -> Result<Option<String>, QuotaError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(bad(path, e.to_string())),
    }
}

fn parse_us(path: &Path, text: &str, field: &str) -> Result<u64, QuotaError> {
    field.parse::<u64>().ok().filter(|&v| v > 0).ok_or_else(|| {
        bad(
            path,
            format!("{text:?}: {field:?} is not a positive number of microseconds"),
        )
    })
}

/// `cpu.max`: `max PERIOD` or `QUOTA PERIOD`.
fn read_v2(path: &Path, cgroup: &str) -> Result<Option<CpuQuota>, QuotaError> {
    let Some(raw) = read_opt(path)? else {
        return Ok(None);
    };
    let text = raw.trim();
    let f: Vec<&str> = text.split_whitespace().collect();
    let [quota, period] = f[..] else {
        return Err(bad(
            path,
            format!("{text:?} is not \"QUOTA PERIOD\" or \"max PERIOD\""),
        ));
    };
    let period_us = parse_us(path, text, period)?;
    if quota == "max" {
        return Ok(None);
    }
    Ok(Some(CpuQuota {
        quota_us: parse_us(path, text, quota)?,
        period_us,
        cgroup: cgroup.to_string(),
        version: 2,
    }))
}

/// `cpu.cfs_quota_us` (`-1`: none) and `cpu.cfs_period_us` in `dir`.
fn read_v1(dir: &Path, cgroup: &str) -> Result<Option<CpuQuota>, QuotaError> {
    let qp = dir.join("cpu.cfs_quota_us");
    let Some(raw) = read_opt(&qp)? else {
        return Ok(None);
    };
    let q = raw.trim();
    if q == "-1" {
        return Ok(None);
    }
    let quota_us = parse_us(&qp, q, q)?;
    let pp = dir.join("cpu.cfs_period_us");
    let Some(raw) = read_opt(&pp)? else {
        return Err(bad(
            &pp,
            format!("missing, though {} sets a quota", qp.display()),
        ));
    };
    let p = raw.trim();
    Ok(Some(CpuQuota {
        quota_us,
        period_us: parse_us(&pp, p, p)?,
        cgroup: cgroup.to_string(),
        version: 1,
    }))
}

/// The process's CPU quota under `root` (`/` for the machine): the tightest
/// limit of its cgroups, `None` if none sets one (or the process is in no
/// cgroup hierarchy with a CPU controller).
pub fn read_cpu_quota(root: &Path) -> Result<Option<CpuQuota>, QuotaError> {
    CgroupDirs::find(root)?.read()
}

/// `CMWQ_CPU_QUOTA`: how many workers may run at once process-wide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuotaMode {
    /// ceil(the cgroup quota), re-read once a second; no budget without a
    /// quota (the default).
    #[default]
    Auto,
    /// No budget.
    Off,
    /// A budget of this many running workers (at least 1).
    Fixed(usize),
}

impl QuotaMode {
    /// Parses `auto`, `off` or a number >= 1.
    pub fn parse(s: &str) -> Option<QuotaMode> {
        match s.trim() {
            "auto" => Some(QuotaMode::Auto),
            "off" => Some(QuotaMode::Off),
            n => n
                .parse::<usize>()
                .ok()
                .filter(|&n| n >= 1)
                .map(QuotaMode::Fixed),
        }
    }
}

impl fmt::Display for QuotaMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaMode::Auto => f.write_str("auto"),
            QuotaMode::Off => f.write_str("off"),
            QuotaMode::Fixed(n) => write!(f, "{n}"),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fixture tree in a fresh temporary directory (cgroup files for
    /// these tests and those of `cpuset.rs`).
    pub(crate) struct Tree(pub(crate) PathBuf);

    impl Tree {
        pub(crate) fn new(name: &str) -> Tree {
            let d = std::env::temp_dir().join(format!("cmwq-quota-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Tree(d)
        }
        pub(crate) fn put(&self, rel: &str, text: &str) -> &Tree {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
            self
        }
        fn read(&self) -> Result<Option<CpuQuota>, QuotaError> {
            read_cpu_quota(&self.0)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const MI_V2: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
    const MI_V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
";

    #[test]
    fn v2_quota_of_the_leaf() {
        let t = Tree::new("v2");
        t.put("proc/self/cgroup", "0::/app\n")
            .put("proc/self/mountinfo", MI_V2)
            .put("sys/fs/cgroup/app/cpu.max", "50000 100000\n");
        let q = t.read().unwrap().unwrap();
        assert_eq!((q.quota_us, q.period_us, q.version), (50000, 100000, 2));
        assert_eq!(q.cgroup, "/app");
        assert_eq!(q.ceil_cpus(), 1);
        assert!((q.cpus() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn v2_max_is_no_limit() {
        let t = Tree::new("v2max");
        t.put("proc/self/cgroup", "0::/app\n")
            .put("proc/self/mountinfo", MI_V2)
            .put("sys/fs/cgroup/app/cpu.max", "max 100000\n");
        assert_eq!(t.read().unwrap(), None);
    }

    #[test]
    fn nested_the_tightest_ancestor_wins() {
        let t = Tree::new("nested");
        t.put("proc/self/cgroup", "0::/a/b/c\n")
            .put("proc/self/mountinfo", MI_V2)
            .put("sys/fs/cgroup/a/cpu.max", "150000 100000\n")
            .put("sys/fs/cgroup/a/b/cpu.max", "max 100000\n")
            .put("sys/fs/cgroup/a/b/c/cpu.max", "300000 100000\n");
        let q = t.read().unwrap().unwrap();
        assert_eq!(q.cgroup, "/a");
        assert_eq!(q.ceil_cpus(), 2);
        // A different period compares by the ratio, not by the quota.
        t.put("sys/fs/cgroup/a/b/cpu.max", "100000 1000000\n");
        let q = t.read().unwrap().unwrap();
        assert_eq!((q.cgroup.as_str(), q.ceil_cpus()), ("/a/b", 1));
    }

    #[test]
    fn v1_cpu_controller_and_a_mount_of_a_subtree() {
        let t = Tree::new("v1");
        t.put(
            "proc/self/cgroup",
            "5:memory:/docker/x\n3:cpu,cpuacct:/docker/x\n0::/\n",
        )
        .put("proc/self/mountinfo", MI_V1)
        .put(
            "sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_quota_us",
            "250000\n",
        )
        .put(
            "sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_period_us",
            "100000\n",
        )
        .put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
        .put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
        let q = t.read().unwrap().unwrap();
        assert_eq!(
            (q.version, q.ceil_cpus(), q.cgroup.as_str()),
            (1, 3, "/docker/x")
        );
        // A container's view: the mount's root is the container's cgroup.
        let t = Tree::new("v1ns");
        t.put("proc/self/cgroup", "3:cpu,cpuacct:/docker/x\n")
            .put(
                "proc/self/mountinfo",
                "32 31 0:29 /docker/x /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpuacct,cpu\n",
            )
            .put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "100000\n")
            .put("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
        let q = t.read().unwrap().unwrap();
        assert_eq!((q.ceil_cpus(), q.cgroup.as_str()), (1, "/"));
    }

    #[test]
    fn v1_minus_one_and_no_hierarchy_are_no_limit() {
        let t = Tree::new("v1none");
        t.put("proc/self/cgroup", "3:cpu,cpuacct:/\n")
            .put("proc/self/mountinfo", MI_V1)
            .put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
        assert_eq!(t.read().unwrap(), None);
        let t = Tree::new("nohier");
        t.put("proc/self/cgroup", "5:memory:/x\n")
            .put("proc/self/mountinfo", MI_V1);
        assert_eq!(t.read().unwrap(), None);
        assert!(CgroupDirs::find(&t.0).unwrap().is_empty());
    }

    #[test]
    fn malformed_files_are_errors_naming_the_file() {
        for (file, text, says) in [
            ("sys/fs/cgroup/app/cpu.max", "50000\n", "QUOTA PERIOD"),
            ("sys/fs/cgroup/app/cpu.max", "half 100000\n", "\"half\""),
            ("sys/fs/cgroup/app/cpu.max", "max 0\n", "\"0\""),
            ("sys/fs/cgroup/app/cpu.max", "", "QUOTA PERIOD"),
        ] {
            let t = Tree::new("bad");
            t.put("proc/self/cgroup", "0::/app\n")
                .put("proc/self/mountinfo", MI_V2)
                .put(file, text);
            let e = t.read().unwrap_err();
            assert!(e.path.ends_with("cpu.max"), "{e}");
            assert!(e.to_string().contains(says), "{e}");
        }
        let t = Tree::new("badv1");
        t.put("proc/self/cgroup", "3:cpu,cpuacct:/\n")
            .put("proc/self/mountinfo", MI_V1)
            .put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "50000\n");
        let e = t.read().unwrap_err();
        assert!(e.to_string().contains("cpu.cfs_period_us"), "{e}");
        t.put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "-5\n");
        assert!(t.read().unwrap_err().to_string().contains("\"-5\""));
        t.put("proc/self/cgroup", "garbage\n");
        let e = t.read().unwrap_err();
        assert!(e.path.ends_with("proc/self/cgroup"), "{e}");
        let t = Tree::new("nofile");
        let e = t.read().unwrap_err();
        assert!(e.path.ends_with("proc/self/cgroup"), "{e}");
    }

    #[test]
    fn mode_parses() {
        assert_eq!(QuotaMode::parse("auto"), Some(QuotaMode::Auto));
        assert_eq!(QuotaMode::parse(" off "), Some(QuotaMode::Off));
        assert_eq!(QuotaMode::parse("3"), Some(QuotaMode::Fixed(3)));
        assert_eq!(QuotaMode::parse("0"), None);
        assert_eq!(QuotaMode::parse("1.5"), None);
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain\\"), "/plain\\");
    }
}
