//! The socket directory: where sockets live (`$XDG_RUNTIME_DIR/cmwq` or a
//! private directory under `/tmp`), the checks that it and its ancestors
//! are private to our user, and what a socket file at a path turns out to be.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::ctl_err;
use crate::error::Error;
use crate::sched;

/// Which setting chose the socket directory (its errors say what to change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DirSource {
    /// `$CMWQ_CONTROL_DIR`.
    Env,
    /// `$XDG_RUNTIME_DIR/cmwq`.
    Xdg,
    /// `cmwq-<uid>` in the temporary directory: a predictable name.
    Temp,
}

pub(super) fn socket_dir_and_source() -> (PathBuf, DirSource) {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = var("CMWQ_CONTROL_DIR") {
        return (PathBuf::from(d), DirSource::Env);
    }
    if let Some(x) = var("XDG_RUNTIME_DIR").map(PathBuf::from)
        && x.is_dir()
    {
        return (x.join("cmwq"), DirSource::Xdg);
    }
    (
        std::env::temp_dir().join(format!("cmwq-{}", sched::euid())),
        DirSource::Temp,
    )
}

/// The directory of the sockets: `$CMWQ_CONTROL_DIR` if set, else
/// `$XDG_RUNTIME_DIR/cmwq`, else `cmwq-<uid>` in the temporary directory.
pub fn socket_dir() -> PathBuf {
    socket_dir_and_source().0
}

/// The socket of process `pid`.
pub fn socket_path(pid: u32) -> PathBuf {
    socket_dir().join(format!("{pid}.sock"))
}

/// Why a socket directory cannot be used.
#[derive(Debug)]
pub(super) enum DirProblem {
    /// It, or a directory above it, is not safe: someone else could have
    /// prepared it or could replace what lies under it.
    Unsafe(String),
    /// It cannot be made or used for a reason of its own: a missing parent,
    /// a full disk, a file in its place.
    Unusable(String),
}

impl DirProblem {
    /// The error of a directory `dir` chosen by no setting in particular.
    pub(super) fn into_error(self, dir: &Path) -> Error {
        let (DirProblem::Unsafe(r) | DirProblem::Unusable(r)) = self;
        ctl_err(format!("socket directory {}", dir.display()), r)
    }
}

/// [`socket_dir()`], checked (and with `create`, made) by [`private_dir`];
/// an error says which setting chose the directory and what to set instead.
pub(super) fn checked_socket_dir(create: bool) -> Result<PathBuf, Error> {
    let (dir, source) = socket_dir_and_source();
    let problem = match private_dir(&dir, create) {
        Ok(()) => return Ok(dir),
        Err(p) => p,
    };
    let set_instead = "set CMWQ_CONTROL_DIR to a private directory instead";
    Err(match (source, problem) {
        (DirSource::Env, DirProblem::Unsafe(r) | DirProblem::Unusable(r)) => {
            ctl_err(format!("CMWQ_CONTROL_DIR={}", dir.display()), r)
        }
        (DirSource::Xdg, DirProblem::Unsafe(r) | DirProblem::Unusable(r)) => ctl_err(
            format!("socket directory {} (from XDG_RUNTIME_DIR)", dir.display()),
            format!("{r}; {set_instead}"),
        ),
        (DirSource::Temp, DirProblem::Unsafe(r)) => ctl_err(
            format!("socket directory {}", dir.display()),
            format!(
                "{r}; its name is predictable, so another user may have made it \
                 to catch cmwq's sockets: set CMWQ_CONTROL_DIR to a private directory \
                 (or XDG_RUNTIME_DIR to your runtime directory) instead"
            ),
        ),
        (DirSource::Temp, DirProblem::Unusable(r)) => ctl_err(
            format!("socket directory {}", dir.display()),
            format!("{r}; {set_instead}"),
        ),
    })
}

/// Our effective group id.
pub(super) fn egid() -> u32 {
    // SAFETY: getegid takes no arguments and cannot fail.
    unsafe { libc::getegid() }
}

/// Why the directory `m` (at `at`) would let another user replace what lies
/// under it, if it would.
pub(super) fn unsafe_ancestor(at: &Path, m: &std::fs::Metadata) -> Option<String> {
    let me = sched::euid();
    let mode = m.mode() & 0o7777;
    let sticky = mode & 0o1000 != 0;
    if m.uid() != 0 && m.uid() != me {
        return Some(format!(
            "component {} is owned by uid {}, neither root nor us (uid {me})",
            at.display(),
            m.uid()
        ));
    }
    if mode & 0o002 != 0 && !sticky {
        return Some(format!(
            "component {} (mode {mode:o}) is writable by others and not sticky: \
             anyone could replace what lies under it",
            at.display()
        ));
    }
    if mode & 0o020 != 0 && !sticky && m.gid() != egid() {
        return Some(format!(
            "component {} (mode {mode:o}) is writable by group {}, not ours, and not sticky: \
             its members could replace what lies under it",
            at.display(),
            m.gid()
        ));
    }
    None
}

/// Checks every existing ancestor of `dir` (not `dir` itself, which
/// [`private_dir`] holds to a stricter rule) as the module docs say: each
/// directory on the path, as written and as the symlinks on it resolve, is
/// owned by root or us and not writable by others unless sticky, and each
/// symlink on the path is owned by root or us. A missing component ends the
/// walk ([`private_dir`] then says which parent is missing).
pub(super) fn check_ancestors(dir: &Path) -> Result<(), DirProblem> {
    let abs = std::path::absolute(dir).map_err(|e| DirProblem::Unusable(e.to_string()))?;
    let me = sched::euid();
    let comps: Vec<_> = abs.components().collect();
    let mut at = PathBuf::new();
    let mut deepest = None;
    for c in &comps[..comps.len().saturating_sub(1)] {
        at.push(c);
        let m = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => {
                return Err(DirProblem::Unusable(format!(
                    "component {}: {e}",
                    at.display()
                )));
            }
        };
        let m = if m.file_type().is_symlink() {
            if m.uid() != 0 && m.uid() != me {
                return Err(DirProblem::Unsafe(format!(
                    "component {} is a symlink owned by uid {}, neither root nor us \
                     (uid {me}): its owner decides where the sockets go",
                    at.display(),
                    m.uid()
                )));
            }
            std::fs::metadata(&at).map_err(|e| {
                DirProblem::Unusable(format!(
                    "component {} is a symlink that leads nowhere ({e})",
                    at.display()
                ))
            })?
        } else {
            m
        };
        if !m.file_type().is_dir() {
            return Err(DirProblem::Unusable(format!(
                "component {} is not a directory",
                at.display()
            )));
        }
        if let Some(why) = unsafe_ancestor(&at, &m) {
            return Err(DirProblem::Unsafe(why));
        }
        deepest = Some(at.clone());
    }
    // The directories a symlink on the way leads through.
    if let Some(real) = deepest.and_then(|d| std::fs::canonicalize(d).ok()) {
        for a in real.ancestors() {
            let m = std::fs::symlink_metadata(a)
                .map_err(|e| DirProblem::Unusable(format!("component {}: {e}", a.display())))?;
            if let Some(why) = unsafe_ancestor(a, &m) {
                return Err(DirProblem::Unsafe(why));
            }
        }
    }
    Ok(())
}

/// Checks that `dir` is a directory (not a symlink) owned by us with no group
/// or other access, under ancestors nobody else can write
/// ([`check_ancestors`]); with `create`, makes it (`mkdir` mode 0700, so it
/// never exists with wider access) first if missing. Only `dir` itself is
/// made: a missing parent is an error naming it (a typo in a path must not
/// grow a tree). Servers and clients both check: a directory another user
/// prepared (the temp-dir fallback has a predictable name) is refused, never
/// used.
pub(super) fn private_dir(dir: &Path, create: bool) -> Result<(), DirProblem> {
    check_ancestors(dir)?;
    if create {
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            // Checked below like any directory found there.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(DirProblem::Unusable(create_failure(dir, &e))),
        }
        // A component made meanwhile by someone else (in a sticky /tmp, say).
        check_ancestors(dir)?;
    }
    let m = std::fs::symlink_metadata(dir)
        .map_err(|e| DirProblem::Unusable(format!("{}: {e}", dir.display())))?;
    if m.file_type().is_symlink() {
        return Err(DirProblem::Unsafe(
            "a symlink, not a directory; refusing to follow it".into(),
        ));
    }
    if !m.file_type().is_dir() {
        return Err(DirProblem::Unusable("exists and is not a directory".into()));
    }
    if m.uid() != sched::euid() {
        return Err(DirProblem::Unsafe(format!(
            "owned by uid {}, not by us (uid {}); refusing to use it",
            m.uid(),
            sched::euid()
        )));
    }
    if m.mode() & 0o077 != 0 {
        return Err(DirProblem::Unsafe(format!(
            "mode {:o} lets others in; it must be 0700",
            m.mode() & 0o777
        )));
    }
    Ok(())
}

/// Why `mkdir dir` failed, in words that say what to do.
pub(super) fn create_failure(dir: &Path, e: &std::io::Error) -> String {
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match e.raw_os_error() {
        Some(libc::ENOENT) => format!(
            "cannot create it: its parent {} does not exist (only the last component is \
             made: create the parent first)",
            parent.display()
        ),
        Some(libc::ENOSPC | libc::EDQUOT) => format!(
            "cannot create it: the disk holding {} is full ({e}); free some space",
            parent.display()
        ),
        Some(libc::EROFS) => format!(
            "cannot create it: {} is on a read-only file system",
            parent.display()
        ),
        _ => format!("cannot create it: {e}"),
    }
}

/// What a socket file at a path turns out to be.
pub(super) enum Probe {
    /// Nothing there.
    Missing,
    /// A socket nobody listens on (its server exited).
    Stale,
    /// A server answers there.
    Live,
    /// Something else, or a socket we cannot probe.
    Other(String),
}

pub(super) fn probe(path: &Path) -> Probe {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Probe::Missing,
        Err(e) => Probe::Other(e.to_string()),
        Ok(m) if !m.file_type().is_socket() => Probe::Other("not a socket".into()),
        Ok(m) if m.uid() != sched::euid() => {
            Probe::Other(format!("a socket owned by uid {}", m.uid()))
        }
        // A full backlog (a stopped server) must not hold `serve()` or
        // `prune_stale()`: it means a live process, so it is not stale.
        Ok(_) => match sched::connect_unix(path, Duration::from_millis(100)) {
            Ok(_) => Probe::Live,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Probe::Stale,
            Err(e) => Probe::Other(e.to_string()),
        },
    }
}
