//! The server: the process's own endpoint (`serve`, `stop`, the exit hook),
//! its accept loop and one connection's request loop.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::dir::{Probe, checked_socket_dir, private_dir, probe};
use super::discover::prune_stale;
use super::{IDLE_TIMEOUT, MAX_CONNECTIONS, MAX_REQUEST, Response, ctl_err, proto};
use crate::error::Error;
use crate::sched;
use crate::sync::{Level, Mutex};

/// A running control server; stops and removes its socket when dropped.
pub struct Server {
    path: PathBuf,
    /// The socket file's identity, so drop removes ours and nobody else's.
    id: (u64, u64),
    /// A: tells the accept loop to end. `SeqCst`: what wakes the loop is a
    /// syscall (`shutdown` on the listener), not a Rust synchronization, so
    /// the flag keeps the strongest ordering rather than lean on the kernel's.
    stop: Arc<AtomicBool>,
    /// A second descriptor of the listening socket, to shut it down.
    listener: UnixListener,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// The socket it listens on.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop: its accept fails once the socket is shut down.
        // (Connecting to the path would not do: the file may be gone.)
        let _ = sched::shutdown_socket(self.listener.as_fd());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.remove_socket_file();
    }
}

impl Server {
    /// Removes the socket file if it is still the one this server bound.
    fn remove_socket_file(&self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("path", &self.path).finish()
    }
}

/// This process's endpoint, if it serves one.
static GLOBAL: Mutex<Option<Server>> = Mutex::new_at(Level::ControlServer, None);
/// The process that started [`GLOBAL`]'s server (a forked child inherits the
/// static and the exit hook, not the socket). A: written under `GLOBAL`, read
/// at exit without it. `Relaxed`: a value read on its own.
static GLOBAL_PID: AtomicU32 = AtomicU32::new(0);

/// Runs at `exit` (see the module docs): removes [`GLOBAL`]'s socket if it is
/// still the one the server bound. The server thread is left running; the
/// process is ending. Never blocks: if another thread holds the lock (starting
/// or stopping the server), that thread's own code deals with the socket.
extern "C" fn remove_socket_at_exit() {
    if GLOBAL_PID.load(Ordering::Relaxed) != std::process::id() {
        return;
    }
    let Some(g) = GLOBAL.try_lock() else {
        return;
    };
    if let Some(s) = g.as_ref() {
        s.remove_socket_file();
    }
}

/// Registers [`remove_socket_at_exit`] once per process.
fn register_exit_hook() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        // SAFETY: atexit only stores the function pointer; the function is an
        // `extern "C" fn()` with no arguments that lives as long as the
        // program, takes no lock it could wait on (try_lock), and does
        // nothing that panics, so it never unwinds into libc. A failure
        // (no room for another handler) only leaves the socket behind.
        let rc = unsafe { libc::atexit(remove_socket_at_exit) };
        if rc != 0 {
            eprintln!("cmwq: atexit failed: the control socket will stay behind at exit");
        }
    });
}

/// Starts this process's control endpoint (once; later calls return the same
/// socket) and returns the socket's path.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("cmwq-doc-{}", std::process::id()));
/// let server = cmwq::control::serve_at(&dir.join("me.sock"), None).unwrap();
/// let mut c = cmwq::control::Client::connect_path(server.path()).unwrap();
/// assert_eq!(c.ping().unwrap(), std::process::id());
/// drop((c, server)); // the server removes its socket
/// std::fs::remove_dir(&dir).unwrap();
/// ```
pub fn serve() -> Result<PathBuf, Error> {
    let mut g = GLOBAL.lock();
    if let Some(s) = g.as_ref() {
        return Ok(s.path.clone());
    }
    let dir = checked_socket_dir(true)?;
    prune_stale();
    let s = serve_at(&dir.join(format!("{}.sock", std::process::id())), None)?;
    let p = s.path.clone();
    GLOBAL_PID.store(std::process::id(), Ordering::Relaxed);
    register_exit_hook();
    *g = Some(s);
    Ok(p)
}

/// The socket of this process's endpoint, if it serves one.
pub fn serving() -> Option<PathBuf> {
    GLOBAL.lock().as_ref().map(|s| s.path.clone())
}

/// Stops this process's endpoint and removes its socket.
pub fn stop() {
    let s = GLOBAL.lock().take();
    drop(s);
}

/// `CMWQ_CONTROL=1`: start the endpoint once; a failure is reported on stderr,
/// not to the workqueue's builder (a debugging aid must not stop a service).
pub(crate) fn autostart() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Err(e) = serve() {
            eprintln!("cmwq: CMWQ_CONTROL=1 but the control endpoint did not start: {e}");
        }
    });
}

/// Serves on `path` in a server of its own (tests, embedding); `owner` is the
/// uid allowed to connect (default: ours). The socket's directory is created
/// private if missing and must be ours and private if present. A stale socket
/// at `path` (nobody listening) is replaced; a live one is an error.
pub fn serve_at(path: &Path, owner: Option<u32>) -> Result<Server, Error> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    private_dir(dir, true).map_err(|p| p.into_error(dir))?;
    let what = || path.display().to_string();
    match probe(path) {
        Probe::Missing => {}
        Probe::Stale => {
            let _ = std::fs::remove_file(path);
        }
        Probe::Live => return Err(ctl_err(what(), "another server is listening there")),
        Probe::Other(why) => return Err(ctl_err(what(), format!("{why}; not replacing it"))),
    }
    let listener =
        UnixListener::bind(path).map_err(|e| ctl_err(format!("bind {}", path.display()), e))?;
    // From here the file is ours: if the server does not start (out of file
    // descriptors or threads), it goes, or a client would find a socket
    // nobody will ever listen on while this process runs.
    let bound = Unbind(Some(path));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| ctl_err(format!("chmod {}", path.display()), e))?;
    let m = std::fs::symlink_metadata(path).map_err(|e| ctl_err(what(), e))?;
    let dup = listener.try_clone().map_err(|e| {
        ctl_err(
            format!("start the control endpoint on {}", path.display()),
            format!("{e}; no socket was left behind"),
        )
    })?;
    let owner = owner.unwrap_or_else(sched::euid);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let thread = std::thread::Builder::new()
        .name("cmwq-control".into())
        .spawn(move || accept_loop(listener, owner, st))
        .map_err(|e| {
            ctl_err(
                "start the control thread",
                format!("{e}; no socket was left behind"),
            )
        })?;
    bound.keep();
    Ok(Server {
        path: path.to_path_buf(),
        id: (m.dev(), m.ino()),
        stop,
        listener: dup,
        thread: Some(thread),
    })
}

/// Removes a socket file just bound unless [`Unbind::keep`] is called (the
/// server started).
struct Unbind<'a>(Option<&'a Path>);

impl Unbind<'_> {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Unbind<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn accept_loop(listener: UnixListener, owner: u32, stop: Arc<AtomicBool>) {
    // Connections being served. `Relaxed`: a counter; the read-modify-writes
    // alone keep it exact.
    let live = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut conn) = conn else {
            // EMFILE and the like: back off instead of spinning.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if live.fetch_add(1, Ordering::Relaxed) >= MAX_CONNECTIONS {
            live.fetch_sub(1, Ordering::Relaxed);
            let _ = conn.set_write_timeout(Some(Duration::from_millis(100)));
            let _ = conn.write_all(
                &Response::err(format!(
                    "busy: {MAX_CONNECTIONS} connections are open; try again"
                ))
                .to_line(),
            );
            continue;
        }
        let l = live.clone();
        let spawned = std::thread::Builder::new()
            .name("cmwq-control-conn".into())
            .spawn(move || {
                serve_conn(conn, owner);
                l.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// What reading the next request found.
enum Next {
    /// A whole line (without its newline).
    Line(Vec<u8>),
    /// The last bytes before EOF, without a newline.
    Last(Vec<u8>),
    /// Over [`MAX_REQUEST`](super::MAX_REQUEST) bytes without a newline.
    TooLarge,
    /// EOF, a timeout or an error: close.
    Close,
}

/// Reads requests off a connection with deadlines that cannot be stretched:
/// [`IDLE_TIMEOUT`](super::IDLE_TIMEOUT) to start a request, and the same to finish it once its
/// first byte came (a client trickling bytes cannot hold the thread).
struct Requests {
    conn: UnixStream,
    buf: Vec<u8>,
}

impl Requests {
    fn next(&mut self) -> Next {
        let mut deadline = (!self.buf.is_empty()).then(|| Instant::now() + IDLE_TIMEOUT);
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf[..i].to_vec();
                self.buf.drain(..=i);
                return Next::Line(line);
            }
            if self.buf.len() >= MAX_REQUEST {
                return Next::TooLarge;
            }
            let wait = match deadline {
                None => IDLE_TIMEOUT,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(w) if !w.is_zero() => w,
                    _ => return Next::Close,
                },
            };
            let _ = self.conn.set_read_timeout(Some(wait));
            let mut chunk = [0u8; 4096];
            let room = (MAX_REQUEST - self.buf.len()).min(chunk.len());
            match self.conn.read(&mut chunk[..room]) {
                Ok(0) if self.buf.is_empty() => return Next::Close,
                Ok(0) => return Next::Last(std::mem::take(&mut self.buf)),
                Ok(n) => {
                    if self.buf.is_empty() {
                        deadline = Some(Instant::now() + IDLE_TIMEOUT);
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
    }
}

/// Writes all of `bytes` within [`IDLE_TIMEOUT`](super::IDLE_TIMEOUT) in total (a client reading
/// one byte at a time cannot hold the thread either).
fn write_reply(out: &mut UnixStream, bytes: &[u8]) -> bool {
    let deadline = Instant::now() + IDLE_TIMEOUT;
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(w) = deadline
            .checked_duration_since(Instant::now())
            .filter(|w| !w.is_zero())
        else {
            return false;
        };
        let _ = out.set_write_timeout(Some(w));
        match out.write(rest) {
            Ok(0) => return false,
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Serves one connection until EOF, an oversized line, a deadline or an error.
fn serve_conn(mut conn: UnixStream, owner: u32) {
    let mut out = match conn.try_clone() {
        Ok(o) => o,
        Err(e) => {
            write_reply(
                &mut conn,
                &Response::err(format!(
                    "full: the process is out of file descriptors ({e}); it cannot serve \
                     this connection"
                ))
                .to_line(),
            );
            return;
        }
    };
    match sched::peer_uid(conn.as_fd()) {
        Ok(uid) if uid == owner => {}
        Ok(uid) => {
            write_reply(
                &mut out,
                &Response::err(format!(
                    "permission denied: peer uid {uid} is not the owner uid {owner}"
                ))
                .to_line(),
            );
            return;
        }
        Err(e) => {
            write_reply(
                &mut out,
                &Response::err(format!("SO_PEERCRED: {e}")).to_line(),
            );
            return;
        }
    }
    let mut reqs = Requests {
        conn,
        buf: Vec::new(),
    };
    loop {
        let (body, last) = match reqs.next() {
            Next::Line(l) => (l, false),
            Next::Last(l) => (l, true),
            Next::TooLarge => {
                write_reply(
                    &mut out,
                    &Response::err(format!(
                        "request too large: more than {MAX_REQUEST} bytes without a newline"
                    ))
                    .to_line(),
                );
                return;
            }
            Next::Close => return,
        };
        let resp = std::panic::catch_unwind(|| proto::handle_line(&body))
            .unwrap_or_else(|_| Response::err("internal error while handling the request"));
        if !write_reply(&mut out, &resp.to_line()) || last {
            return;
        }
    }
}
