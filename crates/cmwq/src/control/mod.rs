//! The control endpoint: `wq_dump.py`, `wq_monitor.py` and the sysfs knobs for
//! a running process.
//!
//! The kernel lets an engineer read its workqueues with drgn and tune unbound
//! ones through sysfs while they run. A process using cmwq opts into the same
//! with [`serve()`] (or `CMWQ_CONTROL=1`, read when the first workqueue is
//! built): a thread listens on a Unix socket, `<pid>.sock` in [`socket_dir()`],
//! and answers the requests of the protocol (`Request`, `Response`) — a [`Snapshot`](crate::snapshot::Snapshot), or
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

//! # Rooms
//!
//! - `dir`: the socket directory and its privacy checks, and what a socket
//!   file at a path is (live, stale, something else).
//! - `server`: this process's endpoint, its accept loop and connections.
//! - `client`: a connection to another process's endpoint.
//! - `diagnose`: why a process does not answer, from `/proc`.
//! - `discover`: the sockets of this user; pruning the stale ones.
//! - `proto`: the wire format and the request handlers.

mod client;
mod diagnose;
mod dir;
mod discover;
mod proto;
mod server;

use std::time::Duration;

use crate::error::Error;
pub use client::{Client, DEFAULT_TIMEOUT};
pub use dir::{socket_dir, socket_path};
pub use discover::{ProcessEntry, list_processes, prune_stale};
pub use proto::{KNOBS, MAX_REQUEST, PARAMS};
// Not part of the stable API: the wire types and the sysfs-form knob writer,
// for cmwq-cli, cmwq-capi and the crate's tests.
#[doc(hidden)]
pub use proto::{Request, Response, StoreAttrError, echo_cpumask, store_attr};
pub(crate) use server::autostart;
pub use server::{Server, serve, serve_at, serving, stop};

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
