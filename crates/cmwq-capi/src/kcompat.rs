//! The process-wide parts of the kernel-compat layer (`include/kcompat`):
//! module parameters, the kthread `current` pointer, thread naming and
//! binding, and the online CPUs. The rest of the layer is inline C in the
//! headers, so ThreadSanitizer sees its synchronisation (completions are
//! pthread mutexes and condition variables, `atomic_t` is compiler atomics).

use std::cell::Cell;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::{Mutex, OnceLock};

/// A registered `module_param`.
struct Param {
    name: String,
    kind: c_int,
    ptr: usize,
}

static PARAMS: Mutex<Vec<Param>> = Mutex::new(Vec::new());

/// Registers `module_param(name, type, perm)` (the header's constructor
/// calls this). `kind` numbers the types as `enum cmwq_kc_param_kind` in
/// `linux/moduleparam.h`.
///
/// # Safety
///
/// `name` is a NUL-terminated string; `ptr` points to a variable of the
/// kind's type that lives for the whole program.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_kc_param_register(
    name: *const c_char,
    kind: c_int,
    ptr: *mut c_void,
) {
    // SAFETY: the caller's promise.
    let name = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    crate::lock(&PARAMS).push(Param {
        name,
        kind,
        ptr: ptr as usize,
    });
}

fn parse_int(v: &str) -> Option<i128> {
    let v = v.trim();
    let (neg, v) = match v.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, v.strip_prefix('+').unwrap_or(v)),
    };
    let n = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()?
    } else if v.len() > 1 && v.starts_with('0') {
        i128::from_str_radix(&v[1..], 8).ok()?
    } else {
        v.parse().ok()?
    };
    Some(if neg { -n } else { n })
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim() {
        "" | "1" | "y" | "Y" | "on" | "true" => Some(true),
        "0" | "n" | "N" | "off" | "false" => Some(false),
        _ => None,
    }
}

/// Stores `value` in the parameter; false if it does not fit its type.
///
/// # Safety
///
/// `p.ptr` points to a live variable of `p.kind`'s type.
unsafe fn set(p: &Param, value: &str) -> bool {
    macro_rules! int {
        ($t:ty) => {{
            match parse_int(value).and_then(|n| <$t>::try_from(n).ok()) {
                // SAFETY: the registration's promise: a variable of this type.
                Some(n) => unsafe { (p.ptr as *mut $t).write(n) },
                None => return false,
            }
        }};
    }
    match p.kind {
        0 => int!(i32),
        1 => int!(u32),
        2 => int!(i64),
        3 => int!(u64),
        4 | 5 => match parse_bool(value) {
            // SAFETY: a C `bool`.
            Some(b) => unsafe { (p.ptr as *mut bool).write(b ^ (p.kind == 5)) },
            None => return false,
        },
        6 => {
            let Ok(s) = CString::new(value) else {
                return false;
            };
            // SAFETY: a `char *`; the string is leaked on purpose (the
            // kernel's charp parameters live as long as the module).
            unsafe { (p.ptr as *mut *mut c_char).write(s.into_raw()) }
        }
        7 => int!(i16),
        8 => int!(u16),
        9 => int!(u8),
        10 => int!(i64),
        11 => int!(u64),
        _ => return false,
    }
    true
}

/// Sets the module parameters from the environment (a variable named as the
/// parameter) and then from the command line (`name=value`, which wins).
/// 0, or `-EINVAL` after saying on stderr which argument was refused.
///
/// # Safety
///
/// `argv` holds `argc` NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_kc_params_apply(argc: c_int, argv: *const *const c_char) -> c_int {
    online();
    let params = crate::lock(&PARAMS);
    for p in params.iter() {
        if let Ok(v) = std::env::var(&p.name) {
            // SAFETY: registered with a live variable of its type.
            if !unsafe { set(p, &v) } {
                eprintln!("kcompat: environment {}={v:?}: not a valid value", p.name);
                return -libc::EINVAL;
            }
        }
    }
    for i in 1..argc.max(0) as usize {
        // SAFETY: the caller's promise.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy();
        let (name, value) = arg.split_once('=').unwrap_or((&arg, ""));
        let Some(p) = params.iter().find(|p| p.name == name) else {
            let known: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
            eprintln!(
                "kcompat: unknown parameter {name:?} (parameters: {})",
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            );
            return -libc::EINVAL;
        };
        // SAFETY: registered with a live variable of its type.
        if !unsafe { set(p, value) } {
            eprintln!("kcompat: {name}={value:?}: not a valid value");
            return -libc::EINVAL;
        }
    }
    0
}

thread_local! {
    static CURRENT: Cell<*mut c_void> = const { Cell::new(std::ptr::null_mut()) };
}

/// The calling thread's `struct task_struct` (NULL until set).
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_current() -> *mut c_void {
    CURRENT.with(|c| c.get())
}

/// Sets the calling thread's `struct task_struct`.
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_set_current(task: *mut c_void) {
    CURRENT.with(|c| c.set(task));
}

/// The kernel's `PF_WQ_WORKER` (`linux/sched.h`): the task is a workqueue worker.
const PF_WQ_WORKER: u32 = 0x20;

thread_local! {
    /// A worker thread's `struct task_struct`, made the first time its
    /// callback reads `current` (zeroed, `flags` first: see `linux/sched.h`).
    static WORKER_TASK: std::cell::RefCell<Option<Box<[u64]>>> =
        const { std::cell::RefCell::new(None) };
    /// The engine was told this worker is hidden (`PF_WQ_WORKER` cleared).
    static HIDDEN: Cell<bool> = const { Cell::new(false) };
    /// The blocking annotations of `cmwq_kc_block_begin`, innermost last.
    static BLOCKED: std::cell::RefCell<Vec<cmwq::BlockingGuard>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// `current` on a worker thread that runs a C callback: its task (`size`
/// bytes, zeroed, with `flags` = `PF_WQ_WORKER`), made on first use and
/// freed when the thread exits; NULL on any other thread. The header fills
/// in the rest.
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_worker_task(size: usize) -> *mut c_void {
    if !crate::work::in_callback() {
        return std::ptr::null_mut();
    }
    let p = WORKER_TASK.with(|t| {
        let mut t = t.borrow_mut();
        let task = t.get_or_insert_with(|| {
            let mut v = vec![0u64; size.div_ceil(8).max(1)].into_boxed_slice();
            let mut first = [0u8; 8];
            first[..4].copy_from_slice(&PF_WQ_WORKER.to_ne_bytes());
            v[0] = u64::from_ne_bytes(first);
            v
        });
        task.as_mut_ptr() as *mut c_void
    });
    cmwq_kc_set_current(p);
    p
}

/// The `flags` word of this worker's task (its first field), if it has one.
fn worker_flags() -> Option<u32> {
    WORKER_TASK.with(|t| {
        t.borrow().as_ref().map(|v| {
            let b = v[0].to_ne_bytes();
            u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
        })
    })
}

/// Tells the engine whether the calling worker cleared `PF_WQ_WORKER` from
/// `current->flags` (hidden from concurrency management) or set it again.
/// The kcompat headers call it before they sleep.
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_worker_sync() {
    let Some(flags) = worker_flags() else {
        return;
    };
    let hide = flags & PF_WQ_WORKER == 0;
    if hide != HIDDEN.with(Cell::get) && cmwq::set_cm_exempt(hide) {
        HIDDEN.with(|h| h.set(hide));
    }
}

/// A kcompat sleep begins (`wait_event`): the worker counts as blocked, as
/// the scheduler's `wq_worker_sleeping` makes it, unless it cleared
/// `PF_WQ_WORKER`. Pairs with [`cmwq_kc_block_end`].
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_block_begin() {
    cmwq_kc_worker_sync();
    BLOCKED.with(|b| b.borrow_mut().push(cmwq::BlockingGuard::new()));
}

/// The sleep of the last [`cmwq_kc_block_begin`] ended.
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_block_end() {
    let g = BLOCKED.with(|b| b.borrow_mut().pop());
    drop(g);
}

/// A C callback returned: the worker is a worker again (`PF_WQ_WORKER` set,
/// and shown to the engine) for its next item.
pub(crate) fn worker_item_done() {
    WORKER_TASK.with(|t| {
        if let Some(v) = t.borrow_mut().as_mut() {
            let mut b = v[0].to_ne_bytes();
            let flags = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) | PF_WQ_WORKER;
            b[..4].copy_from_slice(&flags.to_ne_bytes());
            v[0] = u64::from_ne_bytes(b);
        }
    });
    if HIDDEN.with(|h| h.replace(false)) {
        cmwq::set_cm_exempt(false);
    }
}

/// Names the calling thread (first 15 bytes) and, when `cpu >= 0`, binds it
/// to that CPU. 0 or `-errno`.
///
/// # Safety
///
/// `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_kc_thread_setup(name: *const c_char, cpu: c_int) -> c_int {
    if !name.is_null() {
        // SAFETY: the caller's promise.
        let n = unsafe { CStr::from_ptr(name) }.to_bytes();
        let mut buf = [0u8; 16];
        let k = n.len().min(15);
        buf[..k].copy_from_slice(&n[..k]);
        // SAFETY: PR_SET_NAME reads a NUL-terminated buffer of 16 bytes.
        unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr()) };
    }
    if cpu >= 0 {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return -libc::EINVAL;
        }
        // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays in bounds
        // (checked above); sched_setaffinity reads the set we pass.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return -std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EINVAL);
            }
        }
    }
    0
}

/// The online CPUs: those the process may run on when first asked (the
/// kernel's online mask, seen from user space).
pub(crate) fn online() -> &'static [usize] {
    static O: OnceLock<Vec<usize>> = OnceLock::new();
    O.get_or_init(|| {
        // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
        let set = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return vec![0];
            }
            set
        };
        let v: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `c` is below CPU_SETSIZE.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect();
        if v.is_empty() { vec![0] } else { v }
    })
}

/// The first online CPU after `cpu` (`cpu = -1` for the first), or
/// `nr_cpu_ids` when there is none.
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_next_online_cpu(cpu: c_int) -> c_int {
    let o = online();
    o.iter()
        .copied()
        .find(|&c| c as i64 > cpu as i64)
        .map_or_else(|| cmwq_kc_nr_cpu_ids(), |c| c as c_int)
}

/// How many CPUs are online.
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_num_online_cpus() -> c_int {
    online().len() as c_int
}

/// One more than the highest online CPU id.
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_nr_cpu_ids() -> c_int {
    online().last().map_or(1, |&c| c as c_int + 1)
}

/// Whether `cpu` is online.
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_cpu_online(cpu: c_int) -> bool {
    cpu >= 0 && online().contains(&(cpu as usize))
}

/// The CPU the calling thread runs on (`smp_processor_id`).
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_kc_this_cpu() -> c_int {
    // SAFETY: sched_getcpu has no preconditions.
    unsafe { libc::sched_getcpu() }.max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_parse_as_the_kernel_does() {
        assert_eq!(parse_int("42"), Some(42));
        assert_eq!(parse_int("-7"), Some(-7));
        assert_eq!(parse_int("0x10"), Some(16));
        assert_eq!(parse_int("010"), Some(8));
        assert_eq!(parse_int("x"), None);
        assert_eq!(parse_bool("Y"), Some(true));
        assert_eq!(parse_bool("maybe"), None);
    }
}
