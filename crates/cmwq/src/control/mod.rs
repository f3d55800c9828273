//! The control endpoint: `wq_dump.py`, `wq_monitor.py` and the sysfs knobs for
//! a running process.
//!
//! The kernel lets an engineer read its workqueues with drgn and tune unbound
//! ones through sysfs while they run. A process using cmwq opts into the same
//! with [`serve()`] (or `CMWQ_CONTROL=1`, read when the first workqueue is
//! built): a thread listens on a Unix socket, `<pid>.sock` in [`socket_dir()`],
//! and answers the requests of the protocol (`Request`, `Response`) — a [`Snapshot`], or
//! a knob to write. `cmwq dump`, `cmwq monitor`, `cmwq set` and `cmwq ps` are
//! its clients ([`Client`], [`list_processes`]).
//!
//! # Who may talk to it
//!
//! Only the process's own user. Three fences, each enough alone against other
//! users: the directory is created mode 0700 and must be owned by us with no
//! group or other access (a directory someone else prepared is refused, not
//! used); the socket is mode 0600; and every connection's peer uid is read with
//! `SO_PEERCRED` (set by the kernel at `connect`, it cannot be forged) and a
//! connection from another uid gets one error line and is closed before any
//! request is read. The client checks the same from its side (private
//! directory, server uid), so it never sends a request to a socket another
//! user planted, and caps the reply it reads at [`MAX_REPLY`].
//!
//! A socket file is only replaced or pruned when connecting to it is refused
//! (nobody listens: its process exited), and a stopping server removes its
//! socket only if the file is still the one it bound. A server that fails to
//! start after binding (out of file descriptors or threads) removes the file
//! it bound, so no socket stays that nobody will answer on.
//!
//! # A client never waits long
//!
//! A process that is stopped (`SIGSTOP`, a debugger) or out of file
//! descriptors does not accept: its connections wait in the listener's
//! backlog. A [`Client`] waits at most its timeout ([`DEFAULT_TIMEOUT`], or
//! the one given to [`Client::connect_timeout`]) for room in the backlog and
//! for each part of a reply, and its errors start with what happened, with
//! the reason `/proc` gives where it gives one: `not answering` (stopped, out
//! of file descriptors, or busy), `full` (the backlog, or the server's or our
//! file descriptors), `exited` (gone, or a zombie not yet reaped), `not
//! serving` (the process runs but nobody listens on its socket), `refused`
//! (another user's process or socket).
//!
//! # Where the sockets live, and who could meddle with the path
//!
//! A private directory is not enough if someone else can swap a directory
//! above it: every existing ancestor of the socket directory (and every
//! directory a symlink on the way leads to) must be owned by root or by us and
//! not writable by others unless sticky (`/tmp`), and a symlink on the way
//! must be owned by root or by us. A failure names the component and what is
//! wrong with it, and the variable that chose the path.
//!
//! Only the directory itself is made (mode 0700), never a missing parent: a
//! typo in `CMWQ_CONTROL_DIR` is an error naming the parent, not a new tree.
//! A failure to make it that is nobody's doing (a full disk, a read-only file
//! system, a file in its place) says so, not that another user may have made
//! it.
//!
//! The last fallback, `cmwq-<uid>` in the temporary directory, has a name
//! anyone can predict, so another user may create it first (or a symlink in
//! its place) to catch our sockets. It is made with `mkdir` mode 0700 (not
//! made and then chmodded) and then checked with `lstat`: a real directory,
//! ours, mode 0700, else refused with a message saying to set
//! `CMWQ_CONTROL_DIR` or `XDG_RUNTIME_DIR` instead.
//!
//! # The socket outlives nothing
//!
//! [`serve()`]'s server lives in a static, and Rust never drops statics, so
//! without help its socket would stay behind after every normal exit (and
//! pile up for `cmwq ps --prune`). An `atexit` hook, registered when the
//! first such server starts, removes the socket at `exit` if the file is
//! still the one the server bound (same device and inode), and only in the
//! process that started the server (a forked child that calls `exit` leaves
//! its parent's socket alone). A process killed by a signal leaves a stale
//! socket; those are pruned when found.
//!
//! # What a client cannot do to the process
//!
//! A request line longer than [`MAX_REQUEST`] is refused and the
//! connection closed, so memory per connection is bounded (the cpu-list
//! parser's memory is bounded by the CPU id limit, not by the input); at most
//! [`MAX_CONNECTIONS`] connections are served at once, each on its own thread;
//! a connection must start a request within [`IDLE_TIMEOUT`], deliver it whole
//! within the same time, and take its reply within it too, so a client
//! trickling bytes holds a thread for a bounded time; a request that is not
//! JSON, not UTF-8 or not a known operation gets an error reply and the
//! connection stays usable; the handler runs under `catch_unwind`, so even a
//! bug in it costs one error reply, never the server thread. A snapshot or a
//! knob write holds a borrowed view of a workqueue, not a handle: if the owner
//! drops its last handle meanwhile, the owner's drop waits for the view and
//! still drains and destroys the queue itself.
//!
//! Not bounded: each knob write that changes a workqueue's attributes builds a
//! new generation of pwqs (dead ones are compacted away) and, for a new
//! combination of attributes, a new pool; pools live as long as the process,
//! so a script cycling through thousands of distinct cpumasks would exhaust
//! the pool table (16,384 pools). Only the process's own user can do that.
//!
//! # Cost when off
//!
//! Nothing: no thread, no socket, and `build()` reads one cached flag.

mod proto;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::sched;
use crate::snapshot::Snapshot;
use crate::sync::Mutex;
use crate::types::WqAttrs;
pub use proto::{KNOBS, MAX_REQUEST, PARAMS};
// Not part of the stable API: the wire types and the sysfs-form knob writer,
// for cmwq-cli, cmwq-capi and the crate's tests.
#[doc(hidden)]
pub use proto::{Request, Response, StoreAttrError, echo_cpumask, store_attr};

/// Connections served at once; more are told the server is busy.
pub const MAX_CONNECTIONS: usize = 16;
/// A connection that starts no request for this long is closed; a request
/// must arrive whole, and a reply be taken whole, within it too.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest reply a [`Client`] accepts (a snapshot of a very large process
/// is a few MB).
pub const MAX_REPLY: usize = 256 << 20;

fn ctl_err(what: impl Into<String>, reason: impl ToString) -> Error {
    Error::Control {
        what: what.into(),
        reason: reason.to_string(),
    }
}

/// Which setting chose the socket directory (its errors say what to change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DirSource {
    /// `$CMWQ_CONTROL_DIR`.
    Env,
    /// `$XDG_RUNTIME_DIR/cmwq`.
    Xdg,
    /// `cmwq-<uid>` in the temporary directory: a predictable name.
    Temp,
}

fn socket_dir_and_source() -> (PathBuf, DirSource) {
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
enum DirProblem {
    /// It, or a directory above it, is not safe: someone else could have
    /// prepared it or could replace what lies under it.
    Unsafe(String),
    /// It cannot be made or used for a reason of its own: a missing parent,
    /// a full disk, a file in its place.
    Unusable(String),
}

impl DirProblem {
    /// The error of a directory `dir` chosen by no setting in particular.
    fn into_error(self, dir: &Path) -> Error {
        let (DirProblem::Unsafe(r) | DirProblem::Unusable(r)) = self;
        ctl_err(format!("socket directory {}", dir.display()), r)
    }
}

/// [`socket_dir()`], checked (and with `create`, made) by [`private_dir`];
/// an error says which setting chose the directory and what to set instead.
fn checked_socket_dir(create: bool) -> Result<PathBuf, Error> {
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
fn egid() -> u32 {
    // SAFETY: getegid takes no arguments and cannot fail.
    unsafe { libc::getegid() }
}

/// Why the directory `m` (at `at`) would let another user replace what lies
/// under it, if it would.
fn unsafe_ancestor(at: &Path, m: &std::fs::Metadata) -> Option<String> {
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
fn check_ancestors(dir: &Path) -> Result<(), DirProblem> {
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
fn private_dir(dir: &Path, create: bool) -> Result<(), DirProblem> {
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
fn create_failure(dir: &Path, e: &std::io::Error) -> String {
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
enum Probe {
    /// Nothing there.
    Missing,
    /// A socket nobody listens on (its server exited).
    Stale,
    /// A server answers there.
    Live,
    /// Something else, or a socket we cannot probe.
    Other(String),
}

fn probe(path: &Path) -> Probe {
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
static GLOBAL: Mutex<Option<Server>> = Mutex::new(None);
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
    /// Over [`MAX_REQUEST`] bytes without a newline.
    TooLarge,
    /// EOF, a timeout or an error: close.
    Close,
}

/// Reads requests off a connection with deadlines that cannot be stretched:
/// [`IDLE_TIMEOUT`] to start a request, and the same to finish it once its
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

/// Writes all of `bytes` within [`IDLE_TIMEOUT`] in total (a client reading
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

/// How long a [`Client`] waits by default: for room in the server's
/// connection backlog, and for each part of a reply.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// What `/proc` says about a process, for the errors of a [`Client`].
struct ProcInfo {
    /// The state letter of `/proc/<pid>/stat` (`T` stopped, `Z` zombie).
    state: Option<char>,
    /// The process's user (the owner of `/proc/<pid>`).
    uid: Option<u32>,
    comm: Option<String>,
}

/// `None`: no such process.
fn proc_info(pid: u32) -> Option<ProcInfo> {
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
fn fd_use(pid: u32) -> Option<(usize, u64)> {
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
fn why_silent(pid: u32) -> String {
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
fn pid_of_socket(path: &Path) -> Option<u32> {
    path.file_name()?
        .to_str()?
        .strip_suffix(".sock")?
        .parse()
        .ok()
}

/// Why connecting to the socket at `path` (of process `pid`, if its name
/// says) failed: not answering, exited, refused or full.
fn connect_failure(path: &Path, pid: Option<u32>, e: &std::io::Error, timeout: Duration) -> String {
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
    /// Connects to process `pid` (its socket in [`socket_dir()`]), waiting
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

    /// Writes a knob of the workqueue `workqueue` (see [`KNOBS`]); returns its
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

    /// Writes a process-wide parameter (see [`PARAMS`]); returns its value
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

/// A control socket found in [`socket_dir()`].
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
