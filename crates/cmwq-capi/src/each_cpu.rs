//! `schedule_on_each_cpu`: one item per online CPU on `system_wq`, each
//! queued on its CPU, and a wait for all of them.

use std::ffi::c_int;

use crate::work::{WorkFunc, WorkStruct, flush_work, queue_work_on};
use crate::wq::cmwq_system_wq;

/// `schedule_on_each_cpu`: runs `func` once on every online CPU (the CPUs
/// the process may run on, see `linux/cpumask.h`) from `system_wq`'s
/// per-CPU workers, with a `work_struct` of the library's own, and returns
/// once every run has finished. 0 (the kernel's `-ENOMEM` cannot happen:
/// an allocation failure aborts). Not from a callback of `system_wq`,
/// whose CPU's item would wait behind the caller.
///
/// # Safety
///
/// `func` may be called on any CPU's worker with a `work_struct` that lives
/// until the call returns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn schedule_on_each_cpu(func: Option<WorkFunc>) -> c_int {
    let Some(func) = func else {
        eprintln!("cmwq: schedule_on_each_cpu(NULL): no function to run");
        return -libc::EINVAL;
    };
    let cpus = crate::kcompat::online();
    let mut works: Vec<WorkStruct> = cpus.iter().map(|_| WorkStruct::new(func)).collect();
    let wq = cmwq_system_wq(0);
    for (w, &cpu) in works.iter_mut().zip(cpus) {
        // SAFETY: a live system queue and an initialised item that outlives
        // its run (flushed below).
        unsafe { queue_work_on(cpu as c_int, wq, w) };
    }
    for w in &mut works {
        // SAFETY: as above.
        unsafe { flush_work(w) };
    }
    0
}
