//! Why a process does not answer, as far as `/proc` tells: the words of a
//! [`Client`](super::Client)'s connect errors.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::sched;

/// What `/proc` says about a process, for the errors of a [`Client`](super::Client).
pub(super) struct ProcInfo {
    /// The state letter of `/proc/<pid>/stat` (`T` stopped, `Z` zombie).
    pub(super) state: Option<char>,
    /// The process's user (the owner of `/proc/<pid>`).
    pub(super) uid: Option<u32>,
    pub(super) comm: Option<String>,
}

/// `None`: no such process.
pub(super) fn proc_info(pid: u32) -> Option<ProcInfo> {
    let m = std::fs::metadata(format!("/proc/{pid}")).ok()?;
    Some(ProcInfo {
        state: std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| sched::parse_stat_state(&s)),
        uid: Some(m.uid()),
        comm: std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()
            .map(|s| s.trim().to_string()),
    })
}

/// The file descriptors process `pid` has open and its soft limit, if
/// `/proc` lets us read them.
pub(super) fn fd_use(pid: u32) -> Option<(usize, u64)> {
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((open, soft))
}

/// Why process `pid` may not be answering, as far as `/proc` tells.
pub(super) fn why_silent(pid: u32) -> String {
    match proc_info(pid) {
        None => "it has exited".into(),
        Some(p) if p.state == Some('Z') => {
            "it has exited (a zombie its parent has not reaped)".into()
        }
        Some(p) if matches!(p.state, Some('T' | 't')) => format!(
            "it is stopped (state {}: SIGSTOP, job control or a debugger; `kill -CONT {pid}` resumes it)",
            p.state.unwrap_or('T')
        ),
        Some(_) => match fd_use(pid) {
            Some((open, limit)) if open as u64 >= limit => format!(
                "it is out of file descriptors ({open} open, its limit is {limit}), so it \
                 cannot accept a connection"
            ),
            _ => "it may be busy or stuck".into(),
        },
    }
}

/// The pid a socket is named by (`<pid>.sock`).
pub(super) fn pid_of_socket(path: &Path) -> Option<u32> {
    path.file_name()?
        .to_str()?
        .strip_suffix(".sock")?
        .parse()
        .ok()
}

/// Why connecting to the socket at `path` (of process `pid`, if its name
/// says) failed: not answering, exited, refused or full.
pub(super) fn connect_failure(
    path: &Path,
    pid: Option<u32>,
    e: &std::io::Error,
    timeout: Duration,
) -> String {
    use std::io::ErrorKind as K;
    let sock = path.display();
    match (e.kind(), e.raw_os_error()) {
        (_, Some(libc::EMFILE | libc::ENFILE)) => {
            format!("full: this command is out of file descriptors ({e}); raise `ulimit -n`")
        }
        (K::WouldBlock | K::TimedOut, _) => match pid {
            Some(pid) => format!(
                "full: the connection backlog of pid {pid} stayed full for {timeout:?}, so it is \
                 not accepting connections: {}",
                why_silent(pid)
            ),
            None => format!("full: the connection backlog of {sock} stayed full for {timeout:?}"),
        },
        (K::ConnectionRefused, _) => match pid.map(|p| (p, proc_info(p))) {
            Some((pid, Some(p))) if p.state == Some('Z') => format!(
                "exited: pid {pid} has exited and its parent has not reaped it (a zombie); \
                 {sock} is stale"
            ),
            Some((pid, Some(p))) => format!(
                "not serving: pid {pid} ({}) runs, but nobody listens on {sock}: its control \
                 endpoint stopped or failed to start (or the pid now belongs to another process)",
                p.comm.as_deref().unwrap_or("?")
            ),
            _ => format!("exited: {sock} is a stale socket: its process has exited ({e})"),
        },
        (K::NotFound, _) => {
            format!("exited: {sock} is gone: its process exited or stopped serving")
        }
        (K::PermissionDenied, _) => format!(
            "refused: {e}: the socket belongs to another user (an endpoint serves only its \
             own user: run cmwq as that user)"
        ),
        _ => e.to_string(),
    }
}
