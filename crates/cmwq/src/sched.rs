//! Thread placement and priority: the syscalls the kernel does with kthread
//! helpers (`kthread_bind`, `set_user_nice`), done on our own threads.
//!
//! Every `unsafe` block in the crate lives here, one per syscall.

use std::io;

/// The CPU the calling thread runs on now (glibc reads it through rseq, so it
/// costs a load, not a syscall). Falls back to 0 if the kernel cannot say.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments and only returns a value.
    let c = unsafe { libc::sched_getcpu() };
    if c < 0 { 0 } else { c as usize }
}

/// The kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Restricts the calling thread to `cpus`. An empty list is refused.
pub fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty cpu set"));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &c in cpus {
        if c < max {
            // SAFETY: c is below the set's capacity, checked above.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    // SAFETY: pid 0 is the calling thread; the set pointer and size describe a valid cpu_set_t.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the nice value of the calling thread (Linux: nice is per thread).
pub fn set_nice(nice: i32) -> io::Result<()> {
    let tid = gettid();
    // SAFETY: setpriority with PRIO_PROCESS and a thread id affects only that thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
