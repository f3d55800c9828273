//! Worker lifecycle: hooks that run on every worker thread as it starts and
//! as it exits, what the worker is told about itself, and the names worker
//! threads carry.
//!
//! Why a module of its own: workers come and go on demand (a pool starts one
//! when its running worker blocks, culls idle ones after the idle timeout,
//! lets a dead pool's go), and they are shared by every workqueue that maps
//! onto their pool, as kworkers are in the kernel. So thread-local setup (a
//! profiler's per-thread registration, an allocator arena, a tracing
//! context, a JNI attach) cannot be done from a work item: it needs a place
//! that runs once per thread, on that thread. This module is that place; the
//! engine calls [`with_hooks`] around every worker's and rescuer's body and
//! knows nothing else of it.
//!
//! # When hooks apply
//!
//! [`set_worker_hooks`] replaces the process's hooks. A worker takes the
//! hooks in force when it starts and keeps them: it runs that `on_start`
//! first thing, and that same set's `on_exit` last thing, so every start is
//! paired with the exit of the same [`WorkerHooks`] even if the hooks are
//! replaced in between. Workers already running when hooks are set run
//! neither (they started without them); set the hooks before the first
//! workqueue is built to see every worker. A worker still alive when the
//! process exits runs no exit hook (as no thread-local destructor runs then).
//!
//! Hooks run once per thread: a worker of a pod's per-CPU pool that a
//! partner pool adopts keeps running on its thread (renamed for its new
//! pool), and its [`WorkerInfo`] stays the one it started with.
//!
//! A hook that panics is contained: the panic is caught, said on stderr in
//! one line naming the worker, and counted ([`worker_hook_panics`]); the
//! worker goes on (a start hook's panic does not stop it from serving).
//!
//! # Names
//!
//! In the kernel's spirit (`kworker/3:1H` is CPU 3's worker 1 of the
//! high-priority pool, `kworker/u8:2` unbound pool 8's worker 2), within the
//! 15 bytes Linux keeps of a thread's name:
//!
//! | thread | name |
//! |---|---|
//! | worker `I` of CPU `C`'s bound pool | `cmwq/C:I` |
//! | the same, of the high-priority pool (nice < 0 or FIFO) | `cmwq/C:IH` |
//! | worker `I` of unbound (pod) pool `P` | `cmwq/uP:I` |
//! | the rescuer of workqueue `NAME` | `cmwq-r/NAME` (cut to 15 bytes) |
//!
//! `P` is the pool id `cmwq dump` shows. A name longer than 15 bytes is cut.

use std::any::Any;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sync::{Level, Mutex};

/// The kernel's `TASK_COMM_LEN` less its NUL: the bytes of a thread name
/// Linux keeps.
pub(crate) const NAME_MAX: usize = 15;

/// A hook: what it is given is the worker it runs on.
type Hook = Arc<dyn Fn(&WorkerInfo) + Send + Sync>;

/// What a worker thread serves, given to the [`WorkerHooks`].
///
/// Non-exhaustive: fields may be added.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// The thread's name (see the module docs: `cmwq/3:1H`, `cmwq/u8:2`,
    /// `cmwq-r/NAME`).
    pub name: String,
    /// The pool it belongs to, as `cmwq dump` numbers them; `None` for a
    /// rescuer, which serves a workqueue and visits the pools it starves on.
    pub pool: Option<u32>,
    /// A bound pool's CPU; `None` for an unbound pool or a rescuer.
    pub cpu: Option<usize>,
    /// The CPUs its pool serves: the bound pool's CPU, the unbound pool's
    /// pod; empty for a rescuer.
    pub cpus: Vec<usize>,
    /// The pool's nice value (-20 for a `SCHED_FIFO` pool); a rescuer's is
    /// the one it inherited from the thread that built its workqueue.
    pub nice: i32,
    /// A per-CPU (bound) pool's worker.
    pub bound: bool,
    /// The workqueue a rescuer serves; `None` for a pool's worker.
    pub rescuer: Option<String>,
}

impl WorkerInfo {
    /// A pool's worker `idx`: named here, so the name and the info agree.
    pub(crate) fn pool_worker(
        pool: u32,
        idx: usize,
        cpu: Option<usize>,
        cpus: &[usize],
        nice: i32,
    ) -> WorkerInfo {
        let name = match cpu {
            Some(c) => format!("cmwq/{c}:{idx}{}", if nice < 0 { "H" } else { "" }),
            None => format!("cmwq/u{pool}:{idx}"),
        };
        WorkerInfo {
            name: cut_name(&name),
            pool: Some(pool),
            cpu,
            cpus: cpus.to_vec(),
            nice,
            bound: cpu.is_some(),
            rescuer: None,
        }
    }

    /// The rescuer of workqueue `wq`.
    pub(crate) fn rescuer(wq: &str) -> WorkerInfo {
        WorkerInfo {
            name: cut_name(&format!("cmwq-r/{wq}")),
            pool: None,
            cpu: None,
            cpus: Vec::new(),
            nice: crate::sched::current_nice(),
            bound: false,
            rescuer: Some(wq.to_string()),
        }
    }
}

/// `name` as a thread may carry it: no NUL byte (a workqueue name may hold
/// one), at most [`NAME_MAX`] bytes, cut at a character boundary.
fn cut_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().filter(|&c| c != '\0') {
        if out.len() + c.len_utf8() > NAME_MAX {
            break;
        }
        out.push(c);
    }
    out
}

/// Hooks run on every worker thread (pools' workers and rescuers) as it
/// starts and as it exits; install them with [`set_worker_hooks`].
///
/// ```
/// use cmwq::{WorkerHooks, set_worker_hooks};
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// static LIVE: AtomicUsize = AtomicUsize::new(0);
/// set_worker_hooks(
///     WorkerHooks::new()
///         .on_start(|w| {
///             assert_eq!(std::thread::current().name(), Some(w.name.as_str()));
///             LIVE.fetch_add(1, Ordering::SeqCst);
///         })
///         .on_exit(|_| {
///             LIVE.fetch_sub(1, Ordering::SeqCst);
///         }),
/// );
/// let wq = cmwq::Workqueue::builder("hooks_doc").unbound().build().unwrap();
/// wq.spawn(|| ()).join().unwrap();
/// assert!(LIVE.load(Ordering::SeqCst) >= 1, "the worker that ran the job started with the hooks");
/// # set_worker_hooks(WorkerHooks::new());
/// ```
#[derive(Clone, Default)]
pub struct WorkerHooks {
    on_start: Option<Hook>,
    on_exit: Option<Hook>,
}

impl fmt::Debug for WorkerHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerHooks")
            .field("on_start", &self.on_start.is_some())
            .field("on_exit", &self.on_exit.is_some())
            .finish()
    }
}

impl WorkerHooks {
    /// No hooks.
    pub fn new() -> WorkerHooks {
        WorkerHooks::default()
    }

    /// `f` runs on each worker thread first thing, before it takes an item.
    pub fn on_start(mut self, f: impl Fn(&WorkerInfo) + Send + Sync + 'static) -> WorkerHooks {
        self.on_start = Some(Arc::new(f));
        self
    }

    /// `f` runs on each worker thread last thing, when it exits (culled
    /// after the idle timeout, its pool let go, its workqueue's rescuer
    /// stopped), if the worker started with these hooks.
    pub fn on_exit(mut self, f: impl Fn(&WorkerInfo) + Send + Sync + 'static) -> WorkerHooks {
        self.on_exit = Some(Arc::new(f));
        self
    }
}

/// R hooks: the hooks a worker starting now takes.
static HOOKS: Mutex<Option<Arc<WorkerHooks>>> = Mutex::new_at(Level::WorkerHooks, None);

/// A: hook panics caught. `Relaxed`: a counter.
static HOOK_PANICS: AtomicU64 = AtomicU64::new(0);

/// Replaces the process's worker hooks (see [`WorkerHooks`]). They apply to
/// workers started from now on; a running worker keeps the hooks it started
/// with, and runs that set's exit hook. `set_worker_hooks(WorkerHooks::new())`
/// removes them for workers started later.
pub fn set_worker_hooks(hooks: WorkerHooks) {
    let new = (hooks.on_start.is_some() || hooks.on_exit.is_some()).then(|| Arc::new(hooks));
    // The old set is dropped outside the lock: its captures are the user's.
    let old = std::mem::replace(&mut *HOOKS.lock(), new);
    drop(old);
}

/// How many worker hooks panicked (each caught, said on stderr, and the
/// worker went on).
pub fn worker_hook_panics() -> u64 {
    HOOK_PANICS.load(Ordering::Relaxed)
}

/// Runs a worker thread's `body` between the hooks in force now: the start
/// hook first, the exit hook when `body` returns or unwinds.
pub(crate) fn with_hooks<R>(info: WorkerInfo, body: impl FnOnce() -> R) -> R {
    let hooks = HOOKS.lock().clone();
    let Some(hooks) = hooks else {
        return body();
    };
    if let Some(h) = &hooks.on_start {
        call(h, "start", &info);
    }
    let _exit = Exit { hooks, info };
    body()
}

/// Runs the exit hook when the worker's body returns or unwinds.
struct Exit {
    hooks: Arc<WorkerHooks>,
    info: WorkerInfo,
}

impl Drop for Exit {
    fn drop(&mut self) {
        if let Some(h) = &self.hooks.on_exit {
            call(h, "exit", &self.info);
        }
    }
}

/// Calls hook `h` on `info`'s worker, its panic contained.
fn call(h: &Hook, which: &str, info: &WorkerInfo) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| h(info))) {
        hook_panicked(which, info, payload);
    }
}

#[cold]
fn hook_panicked(which: &str, info: &WorkerInfo, payload: Box<dyn Any + Send>) {
    HOOK_PANICS.fetch_add(1, Ordering::Relaxed);
    let msg = crate::trace::payload_str(&*payload).unwrap_or("<non-string payload>");
    eprintln!(
        "cmwq: the worker {which} hook panicked on {}: {msg}; the worker goes on",
        info.name
    );
    // The payload's destructor is the user's: contained too.
    if catch_unwind(AssertUnwindSafe(move || drop(payload))).is_err() {
        HOOK_PANICS.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_kernel_and_fit_15_bytes() {
        let n = |cpu, pool, idx, nice| WorkerInfo::pool_worker(pool, idx, cpu, &[], nice).name;
        assert_eq!(n(Some(3), 7, 1, -20), "cmwq/3:1H");
        assert_eq!(n(Some(3), 7, 1, 0), "cmwq/3:1");
        assert_eq!(n(None, 8, 2, 0), "cmwq/u8:2");
        assert_eq!(
            n(None, 8, 2, -20),
            "cmwq/u8:2",
            "the kernel marks only bound pools"
        );
        assert_eq!(n(None, 123456, 7890, 0).len(), NAME_MAX);
        assert_eq!(WorkerInfo::rescuer("io").name, "cmwq-r/io");
        let long = WorkerInfo::rescuer("a\0very-long-name-é");
        assert_eq!(long.name, "cmwq-r/avery-lo");
        assert_eq!(long.rescuer.as_deref(), Some("a\0very-long-name-é"));
        assert_eq!(
            cut_name("cmwq-r/abcdefgé"),
            "cmwq-r/abcdefg",
            "cut at a char boundary"
        );
    }
}
