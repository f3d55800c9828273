//! The engine's threads: how they start, and what a forked child has of them.
//!
//! Every thread the engine starts (workers, the watchdog, the timer, a
//! rescuer, a deferred destroy) starts through [`start`], which gives it the
//! worker stack size ([`worker_stack_size`]: [`set_worker_stack_size`],
//! else `CMWQ_WORKER_STACK`, else [`DFL_WORKER_STACK`]) and returns
//! the OS error instead of panicking: a process at its thread limit
//! (`ulimit -u`, `kernel.threads-max`) gets an error from `build()`, a
//! refused delayed item or a worker-creation retry with backoff, never a
//! panic in the middle of the engine. [`describe`] words such an error with
//! its errno and what to do about it.
//!
//! # `fork()`
//!
//! A child of `fork()` has one thread, the one that forked: none of the
//! engine's workers, timer or watchdog. Its copies of the workqueues still
//! list the items the parent had in flight, and nothing in the child will
//! ever run them, so anything that waited for them would wait forever. The
//! first [`start`] registers a `pthread_atfork` child handler that sets
//! [`forked`] in the child; from then on the child's queues are inert:
//! queueing is refused (false, `Err(Error::Forked)`, `JoinError::Refused`)
//! with one message on stderr, and `flush`, `drain`, the last handle's drop,
//! `Work::flush`, `cancel_sync` and `JoinHandle::join` return at once instead
//! of waiting. A child forked before the engine started a thread has nothing
//! in flight and uses cmwq normally. `std::process::Command` is unaffected:
//! its child execs at once, and the parent's flag never changes.

use std::io;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::error::Error;

/// The worker stack size when `CMWQ_WORKER_STACK` is unset: 8 MiB, what glibc
/// gives a thread (and Linux the main thread) under the usual `ulimit -s`, so
/// a job that runs on the main thread runs on a worker. It is address space:
/// only the pages a job touches are used.
pub const DFL_WORKER_STACK: usize = 8 << 20;

/// A: set in a child of `fork()` by the `pthread_atfork` handler. `Relaxed`:
/// written once, before the child's only thread returns from `fork`.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Registers [`on_fork_child`] with the first thread the engine starts.
static ATFORK: Once = Once::new();

/// The `pthread_atfork` child handler: async-signal-safe (one atomic store).
extern "C" fn on_fork_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// This process is a child forked after the engine started its threads: its
/// workqueues are inert (see the module docs).
#[inline]
pub(crate) fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// [`forked`], and if so says once on stderr what that means: called where
/// the child is refused something.
#[inline]
pub(crate) fn refuse_forked() -> bool {
    if !forked() {
        return false;
    }
    say_forked();
    true
}

#[cold]
fn say_forked() {
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        use std::io::Write;
        let _ = writeln!(io::stderr(), "cmwq: {FORKED_MSG}");
    });
}

/// What a forked child is told (the one-time note and [`Error::Forked`]).
pub(crate) const FORKED_MSG: &str = "this process was fork()ed from one that runs cmwq's \
    threads, and none of them run here: its workqueues are inert (queueing is refused, \
    nothing waits for work); exec a program in the child, or queue from the parent";

/// A: the stack size [`set_worker_stack_size`] chose, 0 if it was not
/// called. `Relaxed`: a setting read on its own.
static STACK_SET: AtomicUsize = AtomicUsize::new(0);

/// Sets the stack size of the engine's threads started from now on (workers,
/// rescuers, the timer and the watchdog), in bytes: it wins over
/// `CMWQ_WORKER_STACK`, which is the default when this is not called, and
/// [`DFL_WORKER_STACK`] when neither is. Threads already running keep their
/// stack; call it before the first workqueue is built to size every
/// worker. A job that needs more stack than its worker has overflows it,
/// which aborts the process as on any thread.
///
/// An error ([`Error::InvalidWorkerStack`]) for a size outside 64 KiB to
/// 1 GiB, the range `CMWQ_WORKER_STACK` accepts.
///
/// ```
/// cmwq::set_worker_stack_size(16 << 20).unwrap();
/// assert_eq!(cmwq::worker_stack_size(), 16 << 20);
/// assert!(cmwq::set_worker_stack_size(1024).is_err());
/// ```
pub fn set_worker_stack_size(bytes: usize) -> Result<(), Error> {
    if !crate::params::WORKER_STACK_RANGE.contains(&bytes) {
        return Err(Error::InvalidWorkerStack(bytes));
    }
    STACK_SET.store(bytes, Ordering::Relaxed);
    Ok(())
}

/// The stack size a worker started now gets: [`set_worker_stack_size`]'s,
/// else `CMWQ_WORKER_STACK`, else [`DFL_WORKER_STACK`] (a bad
/// `CMWQ_WORKER_STACK` never gets here: `build()` refuses it first).
pub fn worker_stack_size() -> usize {
    match STACK_SET.load(Ordering::Relaxed) {
        0 => crate::params::worker_stack()
            .ok()
            .flatten()
            .unwrap_or(DFL_WORKER_STACK),
        set => set,
    }
}

/// Starts an engine thread named `name` running `f`, with the worker stack
/// size; the OS error if it cannot start (or in a forked child, which
/// starts none).
pub(crate) fn start<F, T>(name: String, f: F) -> io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if forked() {
        return Err(io::Error::other(FORKED_MSG));
    }
    ATFORK.call_once(|| {
        // SAFETY: registers a handler with no prepare or parent part; the
        // child part is a function that only stores an atomic, which is
        // allowed in a child of a multi-threaded fork. The call reads no
        // memory of ours.
        unsafe { libc::pthread_atfork(None, None, Some(on_fork_child)) };
    });
    std::thread::Builder::new()
        .name(name)
        .stack_size(worker_stack_size())
        .spawn(f)
}

/// `e` in words a user can act on: the OS's text, the errno's name and,
/// for a limit, which one to raise.
pub(crate) fn describe(e: &io::Error) -> String {
    let (text, hint) = describe_parts(e);
    format!("{text}{hint}")
}

/// [`describe`] in two parts: what happened (the OS's text and the errno's
/// name) and what to do (`"; raise ..."`, or empty).
pub(crate) fn describe_parts(e: &io::Error) -> (String, &'static str) {
    let Some(code) = e.raw_os_error() else {
        return (e.to_string(), "");
    };
    let text = e.to_string();
    let text = text.trim_end_matches(&format!(" (os error {code})"));
    let (name, hint) = match code {
        libc::EAGAIN => (
            "EAGAIN",
            "; raise the process limit (ulimit -u) or kernel.threads-max",
        ),
        libc::ENOMEM => (
            "ENOMEM",
            "; free memory, or lower CMWQ_WORKER_STACK (each thread's stack)",
        ),
        libc::EPERM => ("EPERM", ""),
        libc::EINVAL => ("EINVAL", ""),
        _ => return (format!("{text} (errno {code})"), ""),
    };
    (format!("{text} ({name})"), hint)
}

/// The error a thread that could not start gives `build()`.
pub(crate) fn spawn_error(what: impl Into<String>, e: &io::Error) -> Error {
    Error::Spawn {
        what: what.into(),
        reason: describe(e),
    }
}

/// Renames the calling thread (what `ps -L`, `top -H` and `/proc/self/task/*/comm`
/// show), cut to the 15 bytes Linux keeps; a name with a NUL is left as it is.
pub(crate) fn rename_current(name: &str) {
    let mut buf = [0u8; 16];
    let n = name.len().min(15);
    buf[..n].copy_from_slice(&name.as_bytes()[..n]);
    if buf[..n].contains(&0) {
        return;
    }
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes
    // from the pointer; `buf` is 16 bytes and its last byte stays 0.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
}
