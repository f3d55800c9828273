//! `struct workqueue_struct`: `alloc_workqueue`, `destroy_workqueue`,
//! `flush_workqueue`, `drain_workqueue`, `workqueue_set_max_active`, the
//! system queues, and the `WQ_SYSFS` registry the sysfs files are found in.

use std::ffi::{CStr, c_char, c_int, c_uint};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use cmwq::topology::Scope;
use cmwq::{MAX_ACTIVE, Workqueue, WqFlags};

use crate::tsan;

/// The kernel's `WORK_CPU_UNBOUND` (`NR_CPUS` in the header): any CPU.
pub(crate) const WORK_CPU_UNBOUND: usize = 8192;

const WQ_BH: c_uint = 1 << 0;
const WQ_UNBOUND: c_uint = 1 << 1;
const WQ_FREEZABLE: c_uint = 1 << 2;
const WQ_MEM_RECLAIM: c_uint = 1 << 3;
const WQ_HIGHPRI: c_uint = 1 << 4;
const WQ_CPU_INTENSIVE: c_uint = 1 << 5;
const WQ_SYSFS: c_uint = 1 << 6;
const WQ_ORDERED: c_uint = 1 << 17;

/// `struct workqueue_struct`: a handle to a cmwq workqueue.
pub struct CWq {
    pub(crate) wq: Workqueue,
    pub(crate) name: String,
    /// In the `WQ_SYSFS` registry (`WQ_SYSFS`, or `workqueue_sysfs_register`).
    sysfs: AtomicBool,
    system: bool,
    /// `WQ_ORDERED`: each item happens before the next (see
    /// [`CWq::order_point`]).
    pub(crate) ordered: bool,
}

impl CWq {
    /// The address an ordered queue's callbacks hand over on for
    /// ThreadSanitizer (each releases it when it ends, the next acquires it
    /// when it starts): consecutive items may run on different workers, and
    /// the engine's pool lock that orders them is invisible to TSan. `None`
    /// for other queues: their items are not ordered, and an edge between
    /// them would hide real races.
    pub(crate) fn order_point(&self) -> Option<usize> {
        self.ordered.then_some(self as *const CWq as usize)
    }
}

/// Names and addresses of the live `WQ_SYSFS` queues.
static SYSFS: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());

/// Runs `f` on the `WQ_SYSFS` queue named `name`, under the registry's lock
/// (so `destroy_workqueue` cannot free it meanwhile).
pub(crate) fn with_sysfs<R>(name: &str, f: impl FnOnce(&CWq) -> R) -> Option<R> {
    let r = crate::lock(&SYSFS);
    let &(_, addr) = r.iter().find(|(n, _)| n == name)?;
    // SAFETY: registered queues are live until destroy_workqueue removes
    // them, which takes this lock first.
    Some(f(unsafe { &*(addr as *const CWq) }))
}

/// The kernel's `WQ_NAME_LEN`: a name keeps at most 31 bytes.
const WQ_NAME_LEN: usize = 32;

/// The queue's name from C: NULL is the empty name (what `alloc_workqueue`
/// makes of a NULL format); a longer name than `WQ_NAME_LEN - 1` bytes is
/// cut, saying so on stderr once per process, in the kernel's words
/// (`pr_warn_once`).
///
/// # Safety
///
/// `name` is NULL or a NUL-terminated string.
unsafe fn c_name(name: *const c_char) -> String {
    if name.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise.
    let bytes = unsafe { CStr::from_ptr(name) }.to_bytes();
    if bytes.len() < WQ_NAME_LEN {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let cut = String::from_utf8_lossy(&bytes[..WQ_NAME_LEN - 1]).into_owned();
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| eprintln!("workqueue: name exceeds WQ_NAME_LEN. Truncating to: {cut}"));
    cut
}

/// `max_active` clamped to 1..=`WQ_MAX_ACTIVE`, saying so on stderr when it
/// was out of range, in the kernel's words (`wq_clamp_max_active`).
fn clamp_max_active(name: &str, max_active: c_int) -> usize {
    let lim = MAX_ACTIVE as c_int;
    if !(1..=lim).contains(&max_active) {
        eprintln!(
            "workqueue: max_active {max_active} requested for {name} is out of range, \
             clamping between 1 and {lim}"
        );
    }
    max_active.clamp(1, lim) as usize
}

fn build(name: &str, flags: c_uint, max_active: c_int) -> Result<Workqueue, cmwq::Error> {
    let mut b = Workqueue::builder(name).priority_fallback(true);
    // WQ_BH: user space has no softirq context. A CPU's softirq runs its BH
    // items one at a time, in queue order, ahead of its tasks: here a bound,
    // high-priority queue with max_active 1 runs them so, on threads.
    if flags & WQ_BH != 0 && flags & (WQ_ORDERED | WQ_UNBOUND) == 0 {
        return b.highpri().max_active(1).build();
    }
    if flags & WQ_ORDERED != 0 {
        b = b.ordered();
    } else {
        if flags & WQ_UNBOUND != 0 {
            b = b.unbound();
        }
        // The kernel clamps max_active to 1..=WQ_MAX_ACTIVE; 0 is the default.
        if max_active != 0 {
            b = b.max_active(clamp_max_active(name, max_active));
        }
    }
    if flags & WQ_FREEZABLE != 0 {
        b = b.flags(WqFlags::FREEZABLE);
    }
    if flags & WQ_MEM_RECLAIM != 0 {
        b = b.mem_reclaim();
    }
    if flags & WQ_HIGHPRI != 0 {
        b = b.highpri();
    }
    if flags & WQ_CPU_INTENSIVE != 0 {
        b = b.cpu_intensive();
    }
    b.build()
}

/// `alloc_workqueue` once the header has formatted the name: NULL (with a
/// line on stderr saying why) when the queue cannot be made, or when
/// `WQ_SYSFS` is asked for a name another `WQ_SYSFS` queue has. A NULL
/// `name` is the empty name; a name is cut to 31 bytes and `max_active`
/// clamped to 1..=`WQ_MAX_ACTIVE`, each saying so on stderr (see
/// [`c_name`], [`clamp_max_active`]).
///
/// # Safety
///
/// `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_alloc_workqueue(
    name: *const c_char,
    flags: c_uint,
    max_active: c_int,
) -> *mut CWq {
    // SAFETY: the caller's promise.
    let name = unsafe { c_name(name) };
    let sysfs = flags & WQ_SYSFS != 0;
    let mut reg = crate::lock(&SYSFS);
    if sysfs && reg.iter().any(|(n, _)| *n == name) {
        eprintln!("cmwq: alloc_workqueue({name:?}): a WQ_SYSFS workqueue has this name already");
        return std::ptr::null_mut();
    }
    let wq = match build(&name, flags, max_active) {
        Ok(wq) => wq,
        Err(e) => {
            eprintln!("cmwq: alloc_workqueue({name:?}): {e}");
            return std::ptr::null_mut();
        }
    };
    let p = Box::into_raw(Box::new(CWq {
        wq,
        name: name.clone(),
        sysfs: AtomicBool::new(sysfs),
        system: false,
        ordered: flags & WQ_ORDERED != 0,
    }));
    if sysfs {
        reg.push((name, p as usize));
    }
    p
}

/// `destroy_workqueue`: drains `wq` (everything queued runs) and frees it.
/// The system queues are never destroyed.
///
/// # Safety
///
/// `wq` came from `alloc_workqueue` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn destroy_workqueue(wq: *mut CWq) {
    if wq.is_null() {
        return;
    }
    // SAFETY: the caller's promise.
    let w = unsafe { &*wq };
    if w.system {
        eprintln!(
            "cmwq: destroy_workqueue() on system queue {:?} ignored",
            w.name
        );
        return;
    }
    {
        // Unregistered under the registry's lock, which
        // `workqueue_sysfs_register` sets `sysfs` under too.
        let mut reg = crate::lock(&SYSFS);
        if w.sysfs.load(Ordering::Relaxed) {
            reg.retain(|&(_, a)| a != wq as usize);
        }
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wq.drain()));
    tsan::acquire(tsan::any_callback());
    // SAFETY: made by Box::into_raw in cmwq_alloc_workqueue; unregistered
    // above, so no sysfs write can reach it any more.
    drop(unsafe { Box::from_raw(wq) });
}

/// `flush_workqueue`: waits for every item queued on `wq` before the call.
///
/// # Safety
///
/// `wq` is a live workqueue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn flush_workqueue(wq: *mut CWq) {
    // SAFETY: the caller's promise.
    let w = unsafe { &*wq };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wq.flush()));
    tsan::acquire(tsan::any_callback());
}

/// `drain_workqueue`: waits until `wq` is empty; meanwhile only its own items
/// may queue to it.
///
/// # Safety
///
/// `wq` is a live workqueue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn drain_workqueue(wq: *mut CWq) {
    // SAFETY: the caller's promise.
    let w = unsafe { &*wq };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wq.drain()));
    tsan::acquire(tsan::any_callback());
}

/// `workqueue_set_max_active`: clamped to 1..=`WQ_MAX_ACTIVE` as the kernel
/// does (saying so on stderr); refused (with a line on stderr) for an
/// ordered queue.
///
/// # Safety
///
/// `wq` is a live workqueue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn workqueue_set_max_active(wq: *mut CWq, max_active: c_int) {
    // SAFETY: the caller's promise.
    let w = unsafe { &*wq };
    let n = clamp_max_active(&w.name, max_active);
    if let Err(e) = w.wq.set_max_active(n) {
        eprintln!(
            "cmwq: workqueue_set_max_active({:?}, {max_active}): {e}",
            w.name
        );
    }
}

/// The current `max_active` of `wq` (cmwq addition, for tests and tools).
///
/// # Safety
///
/// `wq` is a live workqueue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_workqueue_max_active(wq: *mut CWq) -> c_int {
    // SAFETY: the caller's promise.
    unsafe { &*wq }.wq.max_active() as c_int
}

/// The scope an `enum wq_affn_scope` value names (`WQ_AFFN_DFL` being
/// `cache_shard`, the process default); None out of range.
pub(crate) fn scope_of(scope: c_int) -> Option<Scope> {
    Some(match scope {
        0 | 4 => Scope::CacheShard,
        1 => Scope::Cpu,
        2 => Scope::Smt,
        3 => Scope::Cache,
        5 => Scope::Numa,
        6 => Scope::System,
        _ => return None,
    })
}

/// Sets the affinity scope of an unbound `wq` (cmwq addition; the value is
/// an `enum wq_affn_scope`, `WQ_AFFN_DFL` being `cache_shard`). 0 or
/// `-EINVAL`.
///
/// # Safety
///
/// `wq` is a live workqueue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_workqueue_set_affinity_scope(wq: *mut CWq, scope: c_int) -> c_int {
    // SAFETY: the caller's promise.
    let w = unsafe { &*wq };
    let Some(s) = scope_of(scope) else {
        return -libc::EINVAL;
    };
    match w.wq.set_affinity_scope(s) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("cmwq: {:?}: affinity scope: {e}", w.name);
            -libc::EINVAL
        }
    }
}

/// How many system queues `cmwq_system_wq` knows.
const NR_SYSTEM_WQS: usize = 7;

fn system_build(kind: c_int) -> Workqueue {
    let made = match kind {
        1 => Workqueue::builder("events_highpri")
            .highpri()
            .priority_fallback(true)
            .build(),
        2 => return cmwq::system_long().clone(),
        3 => return cmwq::system_unbound().clone(),
        // The BH queues (see `build`): one item at a time per CPU, in queue
        // order, high priority.
        4 => build("events_bh", WQ_BH, 0),
        5 => build("events_bh_highpri", WQ_BH | WQ_HIGHPRI, 0),
        6 => Workqueue::builder("events_dfl_long").unbound().build(),
        _ => return cmwq::system().clone(),
    };
    made.unwrap_or_else(|_| cmwq::system().clone())
}

/// The system queues: 0 `system_wq`, 1 `system_highpri_wq`, 2
/// `system_long_wq`, 3 `system_unbound_wq`, 4 `system_bh_wq`, 5
/// `system_bh_highpri_wq`, 6 `system_dfl_long_wq` (the header's macros call
/// this); another number is `system_wq`.
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_system_wq(kind: c_int) -> *mut CWq {
    static Q: [OnceLock<usize>; NR_SYSTEM_WQS] = [const { OnceLock::new() }; NR_SYSTEM_WQS];
    let k = if (0..NR_SYSTEM_WQS as c_int).contains(&kind) {
        kind
    } else {
        0
    };
    *Q[k as usize].get_or_init(|| {
        let wq = system_build(k);
        let name = wq.name().to_string();
        Box::into_raw(Box::new(CWq {
            wq,
            name,
            sysfs: AtomicBool::new(false),
            system: true,
            ordered: false,
        })) as usize
    }) as *mut CWq
}

/// `workqueue_sysfs_register`: gives a queue made without `WQ_SYSFS` its
/// directory of attribute files (`/sys/bus/workqueue/devices/<name>/`, see
/// `linux/fs.h`). 0; `-EINVAL` for an ordered queue (as the kernel refuses
/// it); `-EEXIST` when it has one already or another queue has its name.
///
/// # Safety
///
/// `wq` is a live workqueue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn workqueue_sysfs_register(wq: *mut CWq) -> c_int {
    // SAFETY: the caller's promise.
    let w = unsafe { &*wq };
    if w.ordered {
        eprintln!(
            "cmwq: workqueue_sysfs_register({:?}): an ordered workqueue has no attribute files",
            w.name
        );
        return -libc::EINVAL;
    }
    let mut reg = crate::lock(&SYSFS);
    if w.sysfs.load(Ordering::Relaxed) || reg.iter().any(|(n, _)| *n == w.name) {
        eprintln!(
            "cmwq: workqueue_sysfs_register({:?}): the name has attribute files already",
            w.name
        );
        return -libc::EEXIST;
    }
    w.sysfs.store(true, Ordering::Relaxed);
    reg.push((w.name.clone(), wq as usize));
    0
}

/// A workqueue for the crate's unit tests.
#[cfg(test)]
pub(crate) fn test_wq() -> *mut CWq {
    // SAFETY: a NUL-terminated literal.
    unsafe { cmwq_alloc_workqueue(c"capi_test".as_ptr(), WQ_UNBOUND, 0) }
}
