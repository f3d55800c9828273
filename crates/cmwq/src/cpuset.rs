//! The process's cgroup cpuset, and the CPUs it may use now: its affinity
//! intersected with that cpuset.
//!
//! The machine's *possible* CPUs are those it could ever bring online; the
//! process's *usable* ones are those it may run on now. Two things narrow
//! them: its affinity (`sched_getaffinity`, `taskset -p`) and the cpuset of
//! its cgroup (a container's `--cpuset-cpus`, a systemd `AllowedCPUs=`).
//! The kernel keeps a task's affinity inside its cpuset, but the two are read
//! at different moments, so [`usable_cpus`] intersects them, and keeps the
//! affinity alone when the intersection is empty (a cpuset caught mid-change)
//! or the cpuset cannot be read.
//!
//! Which file holds the cpuset:
//!
//! - cgroup v1: `cpuset.effective_cpus` (else `cpuset.cpus`) of the process's
//!   cgroup in the hierarchy with the `cpuset` controller;
//! - cgroup v2: `cpuset.cpus.effective` of the process's cgroup or, where
//!   that level does not enable the controller, of the nearest ancestor that
//!   does (the root always has it).
//!
//! Paths are taken under a `root` parameter, as in [`crate::quota`], so tests
//! read fixture trees. The engine's watchdog re-reads the usable set on its
//! tick (`cmwq dump` shows it); this module answers the same question for a
//! process with no engine running, such as `cmwq topology`.

use std::path::Path;

use crate::quota::{below, levels, mounts, unescape};
use crate::topology::{TopologyError, parse_cpulist};

fn io(path: &Path, e: impl std::fmt::Display) -> TopologyError {
    TopologyError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    }
}

/// The CPUs in `file`, `None` if it does not exist or lists none.
fn cpus_in(file: &Path) -> Result<Option<Vec<usize>>, TopologyError> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(file, e)),
    };
    let cpus = parse_cpulist(text.trim()).map_err(|msg| TopologyError::Parse {
        path: file.display().to_string(),
        msg,
    })?;
    Ok((!cpus.is_empty()).then_some(cpus))
}

/// The process's cgroup cpuset under `root` (`/` for the machine); `None`
/// where it is in no hierarchy with a cpuset. Errors name the file.
pub fn read_cpuset(root: &Path) -> Result<Option<Vec<usize>>, TopologyError> {
    let cg_path = root.join("proc/self/cgroup");
    let cg = std::fs::read_to_string(&cg_path).map_err(|e| io(&cg_path, e))?;
    let mi_path = root.join("proc/self/mountinfo");
    let mi = std::fs::read_to_string(&mi_path).map_err(|e| io(&mi_path, e))?;
    let (mut v1, mut v2) = (None, None);
    for line in cg.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if ctrls.is_empty() {
            v2 = Some(path.to_string());
        } else if ctrls.split(',').any(|c| c == "cpuset") {
            v1 = Some(path.to_string());
        }
    }
    for (mroot, point, fstype, opts) in mounts(&mi) {
        if fstype != "cgroup" || !opts.split(',').any(|o| o == "cpuset") {
            continue;
        }
        let Some(path) = &v1 else {
            break;
        };
        let dir = root.join(unescape(point).trim_start_matches('/'));
        let leaf = dir.join(below(&unescape(mroot), path).trim_start_matches('/'));
        for name in ["cpuset.effective_cpus", "cpuset.cpus"] {
            if let Some(c) = cpus_in(&leaf.join(name))? {
                return Ok(Some(c));
            }
        }
        break;
    }
    for (mroot, point, fstype, _) in mounts(&mi) {
        if fstype != "cgroup2" {
            continue;
        }
        let Some(path) = &v2 else {
            return Ok(None);
        };
        let dir = root.join(unescape(point).trim_start_matches('/'));
        for (level, _) in levels(&dir, &below(&unescape(mroot), path)) {
            if let Some(c) = cpus_in(&level.join("cpuset.cpus.effective"))? {
                return Ok(Some(c));
            }
        }
        return Ok(None);
    }
    Ok(None)
}

/// `affinity` narrowed to `cpuset`, or `affinity` itself where there is no
/// cpuset or the two share no CPU.
pub fn intersect(affinity: &[usize], cpuset: Option<&[usize]>) -> Vec<usize> {
    let Some(set) = cpuset else {
        return affinity.to_vec();
    };
    let both: Vec<usize> = affinity
        .iter()
        .copied()
        .filter(|c| set.contains(c))
        .collect();
    if both.is_empty() {
        affinity.to_vec()
    } else {
        both
    }
}

/// The CPUs this process may use now: its affinity ([`crate::topology::sched_affinity`])
/// intersected with its cgroup cpuset ([`read_cpuset`] of `/`; an unreadable
/// cpuset leaves the affinity alone).
pub fn usable_cpus() -> Result<Vec<usize>, TopologyError> {
    let affinity = crate::topology::sched_affinity()?;
    let cpuset = read_cpuset(Path::new("/")).ok().flatten();
    Ok(intersect(&affinity, cpuset.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::tests::Tree;

    const V2_MOUNT: &str = "30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n";

    #[test]
    fn v2_reads_the_nearest_level_with_the_controller() {
        let t = Tree::new("cpuset-v2");
        t.put("proc/self/cgroup", "0::/a/b\n")
            .put("proc/self/mountinfo", V2_MOUNT)
            .put("sys/fs/cgroup/cpuset.cpus.effective", "0-7\n")
            .put("sys/fs/cgroup/a/cpuset.cpus.effective", "2-3\n")
            // b does not enable cpuset: no file there.
            .put("sys/fs/cgroup/a/b/cpu.max", "max 100000\n");
        assert_eq!(read_cpuset(&t.0).unwrap(), Some(vec![2, 3]));
        t.put("sys/fs/cgroup/a/b/cpuset.cpus.effective", "3\n");
        assert_eq!(read_cpuset(&t.0).unwrap(), Some(vec![3]));
    }

    #[test]
    fn v1_reads_the_cpuset_hierarchy_and_a_bad_file_is_named() {
        let t = Tree::new("cpuset-v1");
        t.put(
            "proc/self/cgroup",
            "5:cpu,cpuacct:/x\n4:cpuset:/docker/c1\n0::/\n",
        )
        .put(
            "proc/self/mountinfo",
            "40 30 0:35 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n\
             41 30 0:36 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n",
        )
        .put("sys/fs/cgroup/cpuset/docker/c1/cpuset.cpus", "1,4-5\n");
        assert_eq!(read_cpuset(&t.0).unwrap(), Some(vec![1, 4, 5]));
        t.put(
            "sys/fs/cgroup/cpuset/docker/c1/cpuset.effective_cpus",
            "4\n",
        );
        assert_eq!(read_cpuset(&t.0).unwrap(), Some(vec![4]));
        t.put(
            "sys/fs/cgroup/cpuset/docker/c1/cpuset.effective_cpus",
            "four\n",
        );
        let e = read_cpuset(&t.0).unwrap_err().to_string();
        assert!(e.contains("cpuset.effective_cpus"), "{e}");
    }

    #[test]
    fn no_cpuset_anywhere_is_none() {
        let t = Tree::new("cpuset-none");
        t.put("proc/self/cgroup", "0::/\n").put(
            "proc/self/mountinfo",
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n",
        );
        assert_eq!(read_cpuset(&t.0).unwrap(), None);
        assert!(read_cpuset(&t.0.join("missing")).is_err());
    }

    #[test]
    fn the_affinity_is_narrowed_unless_nothing_is_left() {
        assert_eq!(intersect(&[0, 1, 2, 3], Some(&[1, 3, 9])), [1, 3]);
        assert_eq!(intersect(&[0, 1], None), [0, 1]);
        assert_eq!(intersect(&[0, 1], Some(&[5])), [0, 1]);
        let u = usable_cpus().unwrap();
        let a = crate::topology::sched_affinity().unwrap();
        assert!(
            !u.is_empty() && u.iter().all(|c| a.contains(c)),
            "{u:?} of {a:?}"
        );
    }
}
