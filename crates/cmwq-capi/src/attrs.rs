//! `struct workqueue_attrs` (`alloc_workqueue_attrs`,
//! `free_workqueue_attrs`, `apply_workqueue_attrs`) and the other queue
//! knobs and questions: `workqueue_set_min_active`, `workqueue_congested`.

use std::ffi::{c_int, c_ulong};

use crate::wq::{CWq, WORK_CPU_UNBOUND, scope_of};

/// Bits in a `c_ulong`.
const BITS: usize = c_ulong::BITS as usize;

/// `struct cpumask` (`linux/cpumask_types.h`): one bit per possible CPU id
/// (`NR_CPUS` of them).
#[repr(C)]
pub struct CpuMask {
    bits: [c_ulong; WORK_CPU_UNBOUND / BITS],
}

impl CpuMask {
    /// The CPUs set, in order.
    fn cpus(&self) -> Vec<usize> {
        (0..WORK_CPU_UNBOUND)
            .filter(|&c| self.bits[c / BITS] & (1 << (c % BITS)) != 0)
            .collect()
    }
}

/// `struct workqueue_attrs` as `linux/workqueue.h` lays it out.
#[repr(C)]
pub struct WqAttrsC {
    nice: c_int,
    cpumask: CpuMask,
    affn_strict: bool,
    affn_scope: c_int,
    ordered: bool,
}

/// `alloc_workqueue_attrs`: nice 0, every possible CPU, the default scope,
/// not strict; free it with `free_workqueue_attrs`. Never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn alloc_workqueue_attrs() -> *mut WqAttrsC {
    let mut a = Box::new(WqAttrsC {
        nice: 0,
        cpumask: CpuMask {
            bits: [0; WORK_CPU_UNBOUND / BITS],
        },
        affn_strict: false,
        affn_scope: 0,
        ordered: false,
    });
    for &c in crate::kcompat::online() {
        if c < WORK_CPU_UNBOUND {
            a.cpumask.bits[c / BITS] |= 1 << (c % BITS);
        }
    }
    Box::into_raw(a)
}

/// `free_workqueue_attrs`: frees what `alloc_workqueue_attrs` made (NULL:
/// nothing).
///
/// # Safety
///
/// `attrs` is NULL or came from `alloc_workqueue_attrs` and is not used
/// afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn free_workqueue_attrs(attrs: *mut WqAttrsC) {
    if !attrs.is_null() {
        // SAFETY: made by Box::into_raw in alloc_workqueue_attrs.
        drop(unsafe { Box::from_raw(attrs) });
    }
}

/// `apply_workqueue_attrs`: gives an unbound, unordered `wq` the nice
/// value, cpumask, affinity scope and strictness of `attrs`, live. 0, or
/// `-EINVAL` (the reason on stderr, nothing changed) for a per-CPU or
/// ordered queue, a nice value outside -20..=19, an unknown scope or a
/// cpumask with no online CPU.
///
/// # Safety
///
/// `wq` is a live workqueue; `attrs` points to a `workqueue_attrs`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn apply_workqueue_attrs(wq: *mut CWq, attrs: *const WqAttrsC) -> c_int {
    // SAFETY: the caller's promise.
    let (w, a) = unsafe { (&*wq, &*attrs) };
    let refuse = |why: String| {
        eprintln!("cmwq: apply_workqueue_attrs({:?}): {why}", w.name);
        -libc::EINVAL
    };
    if !w.wq.flags().contains(cmwq::WqFlags::UNBOUND) || w.ordered {
        return refuse("only an unbound, unordered workqueue has attributes to apply".into());
    }
    if !(-20..=19).contains(&a.nice) {
        return refuse(format!("nice {} is outside -20..=19", a.nice));
    }
    let Some(scope) = scope_of(a.affn_scope) else {
        return refuse(format!("affinity scope {} is unknown", a.affn_scope));
    };
    let cpus = a.cpumask.cpus();
    let online = crate::kcompat::online();
    if !cpus.iter().any(|c| online.contains(c)) {
        return refuse("the cpumask has no online CPU".into());
    }
    let r =
        w.wq.set_cpumask(&cpus)
            .and_then(|()| w.wq.set_nice(a.nice))
            .and_then(|()| w.wq.set_affinity_scope(scope))
            .and_then(|()| w.wq.set_affinity_strict(a.affn_strict));
    match r {
        Ok(()) => 0,
        Err(e) => refuse(e.to_string()),
    }
}

/// `workqueue_set_min_active`: the floor of each NUMA node's share of an
/// unbound queue's `max_active`, clamped to 1..=`max_active` (see
/// `cmwq::Workqueue::set_min_active`); a per-CPU or ordered queue is
/// refused with a line on stderr, as the kernel warns.
///
/// # Safety
///
/// `wq` is a live workqueue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn workqueue_set_min_active(wq: *mut CWq, min_active: c_int) {
    // SAFETY: the caller's promise.
    let w = unsafe { &*wq };
    if let Err(e) = w.wq.set_min_active(min_active.max(1) as usize) {
        eprintln!(
            "cmwq: workqueue_set_min_active({:?}, {min_active}): {e}",
            w.name
        );
    }
}

/// `workqueue_congested`: whether items queued on `wq` for `cpu`
/// (`WORK_CPU_UNBOUND`: the calling CPU) wait for `max_active` now: the
/// pwq serving that CPU holds items back. A hint, as in the kernel.
///
/// # Safety
///
/// `wq` is a live workqueue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn workqueue_congested(cpu: c_int, wq: *mut CWq) -> bool {
    // SAFETY: the caller's promise.
    let w = unsafe { &*wq };
    let cpu = match usize::try_from(cpu) {
        Ok(c) if c < WORK_CPU_UNBOUND => c,
        _ => crate::kcompat::cmwq_kc_this_cpu() as usize,
    };
    let s = w.wq.snapshot();
    let pool = if w.ordered {
        s.dfl_pool
    } else {
        s.cpu_pool.get(cpu).copied().flatten().or(s.dfl_pool)
    };
    s.pwqs
        .iter()
        .any(|p| Some(p.pool) == pool && p.nr_inactive > 0)
}
