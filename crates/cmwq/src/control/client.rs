//! The client: a connection to another process's endpoint and its calls.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::diagnose::{ProcInfo, connect_failure, pid_of_socket, proc_info, why_silent};
use super::dir::{checked_socket_dir, socket_path};
use super::{MAX_REPLY, Request, Response, ctl_err};
use crate::error::Error;
use crate::sched;
use crate::snapshot::Snapshot;
use crate::types::WqAttrs;

/// How long a [`Client`] waits by default: for room in the server's
/// connection backlog, and for each part of a reply.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to a process's control endpoint.
///
/// It checks its side too: the socket's directory must be private to our
/// user, and the server must run as our user (`SO_PEERCRED`), so a socket
/// another user planted is never sent a request.
///
/// It never waits long on a process that does not answer (stopped, out of
/// file descriptors): connecting waits at most its timeout for room in the
/// server's backlog, and each read or write of a request at most the same.
/// Errors start with what happened: `not answering`, `exited`, `not
/// serving`, `refused` or `full`, and say why when `/proc` tells (a stopped
/// process, a zombie, a process out of file descriptors).
#[derive(Debug)]
pub struct Client {
    out: UnixStream,
    reader: BufReader<UnixStream>,
    path: PathBuf,
    /// The pid the socket is named by.
    pid: Option<u32>,
    timeout: Duration,
}

impl Client {
    /// Connects to process `pid` (its socket in [`socket_dir()`](super::socket_dir)), waiting
    /// at most [`DEFAULT_TIMEOUT`].
    pub fn connect(pid: u32) -> Result<Client, Error> {
        Client::connect_timeout(pid, DEFAULT_TIMEOUT)
    }

    /// As [`Client::connect`], waiting at most `timeout` to connect and for
    /// each part of a reply. An error tells a process that serves nothing
    /// from one that does not exist, a zombie and another user's process.
    pub fn connect_timeout(pid: u32, timeout: Duration) -> Result<Client, Error> {
        let path = socket_path(pid);
        let what = || format!("connect to pid {pid}");
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let me = sched::euid();
                let hint = match proc_info(pid) {
                    None => "no such process".to_string(),
                    Some(p) if p.state == Some('Z') => format!(
                        "exited: pid {pid} has exited and its parent has not reaped it (a \
                         zombie): it serves nothing"
                    ),
                    Some(ProcInfo { uid: Some(u), .. }) if u != me => format!(
                        "refused: pid {pid} runs as uid {u}, not as us (uid {me}); an endpoint \
                         serves only its own user, in that user's socket directory: run cmwq as \
                         uid {u}"
                    ),
                    Some(_) => "the process runs but serves no control endpoint (start it with \
                                CMWQ_CONTROL=1 in its environment, or have it call \
                                cmwq::control::serve())"
                        .to_string(),
                };
                return Err(ctl_err(what(), format!("{hint} (no {})", path.display())));
            }
            Err(e) => {
                return Err(ctl_err(
                    what(),
                    format!(
                        "refused: {}: {e} (it belongs to another user)",
                        path.display()
                    ),
                ));
            }
        }
        checked_socket_dir(false)?;
        Client::connect_path_timeout(&path, timeout)
    }

    /// Connects to the endpoint listening on `path`, waiting at most
    /// [`DEFAULT_TIMEOUT`]; the server must run as our user.
    pub fn connect_path(path: &Path) -> Result<Client, Error> {
        Client::connect_path_timeout(path, DEFAULT_TIMEOUT)
    }

    /// As [`Client::connect_path`], waiting at most `timeout` (at least a
    /// millisecond) to connect and for each part of a reply.
    pub fn connect_path_timeout(path: &Path, timeout: Duration) -> Result<Client, Error> {
        let timeout = timeout.max(Duration::from_millis(1));
        let pid = pid_of_socket(path);
        let what = || format!("connect to {}", path.display());
        let s = sched::connect_unix(path, timeout)
            .map_err(|e| ctl_err(what(), connect_failure(path, pid, &e, timeout)))?;
        let uid = sched::peer_uid(s.as_fd()).map_err(|e| ctl_err(what(), e))?;
        if uid != sched::euid() {
            return Err(ctl_err(
                what(),
                format!(
                    "refused: the server runs as uid {uid}, not as us (uid {}); not talking to it",
                    sched::euid()
                ),
            ));
        }
        s.set_read_timeout(Some(timeout))
            .and_then(|()| s.set_write_timeout(Some(timeout)))
            .map_err(|e| ctl_err(what(), e))?;
        let out = s.try_clone().map_err(|e| ctl_err(what(), e))?;
        Ok(Client {
            out,
            reader: BufReader::new(s),
            path: path.to_path_buf(),
            pid,
            timeout,
        })
    }

    /// An I/O error of a request, with what it means.
    fn io_failure(&self, e: &std::io::Error) -> String {
        use std::io::ErrorKind as K;
        match (e.kind(), self.pid) {
            (K::WouldBlock | K::TimedOut, Some(pid)) => format!(
                "not answering: pid {pid} did not reply within {:?}: {}",
                self.timeout,
                why_silent(pid)
            ),
            (K::WouldBlock | K::TimedOut, None) => {
                format!("not answering: no reply within {:?}", self.timeout)
            }
            (K::BrokenPipe | K::ConnectionReset, Some(pid)) => match proc_info(pid) {
                Some(p) if p.state != Some('Z') => {
                    format!("the server of pid {pid} closed the connection ({e})")
                }
                _ => format!("exited: pid {pid} exited while we talked to it ({e})"),
            },
            _ => e.to_string(),
        }
    }

    /// Sends raw bytes (a newline is added if missing) and returns the raw
    /// reply line. A reply the server sent before closing (a refusal) is
    /// returned even when the send itself failed.
    #[doc(hidden)]
    pub fn raw(&mut self, line: &[u8]) -> Result<String, Error> {
        let what = || match self.pid {
            Some(pid) => format!("request to pid {pid}"),
            None => format!("request to {}", self.path.display()),
        };
        let mut v = line.to_vec();
        if v.last() != Some(&b'\n') {
            v.push(b'\n');
        }
        let sent = self.out.write_all(&v);
        let mut reply = Vec::new();
        let read = self
            .reader
            .by_ref()
            .take(MAX_REPLY as u64)
            .read_until(b'\n', &mut reply);
        match (read, sent) {
            (Ok(n), _) if n > 0 && reply.last() == Some(&b'\n') => {
                String::from_utf8(reply).map_err(|e| ctl_err(what(), e))
            }
            (Ok(n), _) if n >= MAX_REPLY => Err(ctl_err(
                what(),
                format!("reply longer than {MAX_REPLY} bytes"),
            )),
            (_, Err(e)) => Err(ctl_err(what(), self.io_failure(&e))),
            (Ok(_), Ok(())) => Err(ctl_err(what(), "the server closed the connection")),
            (Err(e), Ok(())) => Err(ctl_err(what(), self.io_failure(&e))),
        }
    }

    fn request(&mut self, req: &Request) -> Result<Response, Error> {
        let line = serde_json::to_vec(req).map_err(|e| ctl_err("encode request", e))?;
        let reply = self.raw(&line)?;
        let resp: Response = serde_json::from_str(&reply).map_err(|e| {
            ctl_err(
                format!("reply from {}", self.path.display()),
                format!("not a cmwq control reply ({e})"),
            )
        })?;
        if resp.ok {
            Ok(resp)
        } else {
            Err(ctl_err(
                format!("pid {}", resp.pid),
                resp.error.unwrap_or_else(|| "refused".into()),
            ))
        }
    }

    /// Checks the server answers; returns its pid.
    pub fn ping(&mut self) -> Result<u32, Error> {
        Ok(self.request(&Request::Ping)?.pid)
    }

    /// The process's [`Snapshot`].
    pub fn snapshot(&mut self) -> Result<Snapshot, Error> {
        self.request(&Request::Snapshot)?
            .snapshot
            .ok_or_else(|| ctl_err("snapshot", "the reply carries no snapshot"))
    }

    /// Writes a knob of the workqueue `workqueue` (see [`KNOBS`](super::KNOBS)); returns its
    /// attributes after the change.
    pub fn set(&mut self, workqueue: &str, knob: &str, value: &str) -> Result<WqAttrs, Error> {
        Ok(self.set_knob(workqueue, knob, value)?.0)
    }

    /// As [`Client::set`], and whether the workqueue is unbound (`None` from
    /// a server too old to say): a bound workqueue's only attribute of its
    /// own is `max_active`.
    pub fn set_knob(
        &mut self,
        workqueue: &str,
        knob: &str,
        value: &str,
    ) -> Result<(WqAttrs, Option<bool>), Error> {
        let r = self.request(&Request::Set {
            workqueue: workqueue.into(),
            knob: knob.into(),
            value: value.into(),
        })?;
        let attrs = r
            .attrs
            .ok_or_else(|| ctl_err("set", "the reply carries no attributes"))?;
        Ok((attrs, r.unbound))
    }

    /// Writes a process-wide parameter (see [`PARAMS`](super::PARAMS)); returns its value
    /// after the change.
    pub fn set_param(&mut self, param: &str, value: &str) -> Result<String, Error> {
        self.request(&Request::SetParam {
            param: param.into(),
            value: value.into(),
        })?
        .value
        .ok_or_else(|| ctl_err("set_param", "the reply carries no value"))
    }
}
