//! Process discovery: the control sockets of this user, and pruning the
//! stale ones.

use std::path::PathBuf;

use super::dir::{Probe, checked_socket_dir, probe};

/// A control socket found in [`socket_dir()`](super::socket_dir).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ProcessEntry {
    /// The process id the socket is named by.
    pub pid: u32,
    /// The socket.
    pub socket: PathBuf,
    /// The process's command name, if it runs.
    pub comm: Option<String>,
    /// The process exists (else the socket is stale).
    pub alive: bool,
}

/// The control sockets of this user, by pid (none if the socket directory is
/// missing or not private to us).
pub fn list_processes() -> Vec<ProcessEntry> {
    let Ok(dir) = checked_socket_dir(false) else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut v: Vec<ProcessEntry> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let pid: u32 = name.strip_suffix(".sock")?.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .ok()
                .map(|s| s.trim().to_string());
            Some(ProcessEntry {
                pid,
                socket: e.path(),
                alive: comm.is_some(),
                comm,
            })
        })
        .collect();
    v.sort_by_key(|e| e.pid);
    v
}

/// Removes the sockets nobody listens on any more (their process exited);
/// returns how many. A socket counts as stale only when connecting to it is
/// refused, so a live server in another PID namespace is left alone.
pub fn prune_stale() -> usize {
    list_processes()
        .into_iter()
        .filter(|e| matches!(probe(&e.socket), Probe::Stale))
        .filter(|e| std::fs::remove_file(&e.socket).is_ok())
        .count()
}
