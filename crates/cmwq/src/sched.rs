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
    set_affinity_of(0, cpus)
}

/// Restricts thread `tid` of this process (0: the calling thread) to `cpus`.
/// An empty list is refused. A pod pool uses it on a sleeping worker before
/// waking it, so the wakeup lands on the CPU the work came from.
pub fn set_affinity_of(tid: i32, cpus: &[usize]) -> io::Result<()> {
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
    // SAFETY: tid names a thread (0: the caller); the set pointer and size
    // describe a valid cpu_set_t that outlives the call.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
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

/// Runs the calling thread as `SCHED_FIFO` at real-time priority `prio` (1 is the
/// lowest, what the kernel list suggested for workqueue threads).
pub fn set_fifo(prio: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the call.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Runs the calling thread under `SCHED_OTHER` at nice `nice` (undoes [`set_fifo`]).
pub fn set_normal(nice: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the call.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    set_nice(nice)
}

/// The soft limit of a resource (`RLIMIT_NICE`, `RLIMIT_RTPRIO`, ...).
pub fn rlimit_cur(resource: libc::__rlimit_resource_t) -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct through a valid pointer.
    let ok = unsafe { libc::getrlimit(resource, &mut r) } == 0;
    ok.then_some(r.rlim_cur)
}

/// CPU time consumed so far by thread `tid` of this process, read from its
/// per-thread CPU clock (nanosecond precision, one syscall). `None` if the thread
/// has exited.
pub fn thread_cpu_time(tid: i32) -> Option<std::time::Duration> {
    // Linux encodes a thread's CPU clock as (~tid << 3) | PERTHREAD (4) | SCHED (2),
    // the encoding glibc's pthread_getcpuclockid uses; the kernel accepts it for
    // any thread of the calling process.
    let clock: libc::clockid_t = ((!tid) << 3) | 4 | 2;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer; a bad
    // clock id only makes it return EINVAL.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    (r == 0).then(|| std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// The scheduler state letter of thread `tid` of this process (`R` running,
/// `S` sleeping, `D` in uninterruptible sleep, ...), read from
/// `/proc/self/task/<tid>/stat`. `None` if it cannot be read.
pub fn thread_state(tid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    parse_stat_state(&s)
}

/// The state field of a `/proc/.../stat` line: the first field after the
/// parenthesised command name (which may itself contain spaces and parentheses).
pub fn parse_stat_state(stat: &str) -> Option<char> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().next()?.chars().next()
}

/// Whether the calling thread runs under a real-time policy (FIFO or RR).
pub fn is_realtime() -> bool {
    // SAFETY: pid 0 is the calling thread; the call only returns a value.
    let p = unsafe { libc::sched_getscheduler(0) };
    p == libc::SCHED_FIFO || p == libc::SCHED_RR
}

/// The CPUs thread `tid` may run on (`sched_getaffinity`), up to CPU 65535.
pub fn affinity_of(tid: i32) -> io::Result<Vec<usize>> {
    // A mask of 65536 bits, wider than glibc's 1024-bit cpu_set_t.
    let mut mask = vec![0u64; 1024];
    // SAFETY: the pointer and byte length describe the writable buffer `mask`;
    // the kernel writes at most that many bytes and returns how many it wrote.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getaffinity,
            tid as libc::pid_t,
            mask.len() * 8,
            mask.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let words = (r as usize / 8).min(mask.len());
    Ok(crate::topology::cpulist::mask_to_cpus(&mask[..words]))
}

/// The effective user id of the process.
#[cfg(feature = "control")]
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The user id of the process at the other end of a connected Unix socket
/// (`SO_PEERCRED`, taken by the kernel at `connect` time, so it cannot be forged).
#[cfg(feature = "control")]
pub fn peer_uid(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: fd is a live socket borrowed for the call; cred and len describe a
    // writable ucred of the size passed.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Shuts a socket down both ways (`shutdown(SHUT_RDWR)`); on a listening
/// socket this wakes a thread blocked in `accept`, which then fails.
#[cfg(feature = "control")]
pub fn shutdown_socket(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fd is a live socket borrowed for the call; shutdown only changes its state.
    let r = unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Connects a Unix stream socket to `path`, waiting at most `timeout` for
/// room in the listener's backlog (a server that stopped accepting, because
/// it is stopped or out of file descriptors, fills it): the wait of a
/// blocking `connect` on a Unix socket is bounded by the socket's send
/// timeout, which std cannot set before connecting. A full backlog past the
/// timeout is `WouldBlock` (`EAGAIN`).
#[cfg(feature = "control")]
pub fn connect_unix(
    path: &std::path::Path,
    timeout: std::time::Duration,
) -> io::Result<std::os::unix::net::UnixStream> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "socket path of {} bytes (at most {}, without NUL)",
                bytes.len(),
                addr.sun_path.len() - 1
            ),
        ));
    }
    for (d, &b) in addr.sun_path.iter_mut().zip(bytes) {
        *d = b as libc::c_char;
    }
    // SAFETY: socket takes no pointers; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by socket and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    // A zero timeval means "wait forever": never ask for less than 1 µs.
    let tv =
        libc::timeval {
            tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_usec: (timeout.subsec_micros() as libc::suseconds_t)
                .max(if timeout.as_secs() == 0 { 1 } else { 0 }),
        };
    // SAFETY: raw is the live socket above; tv is a timeval of the size passed.
    let r = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    loop {
        // SAFETY: raw is the live socket above; addr is a sockaddr_un whose
        // first len bytes hold the family and the NUL-terminated path.
        let r = unsafe { libc::connect(raw, (&addr as *const libc::sockaddr_un).cast(), len) };
        if r == 0 {
            return Ok(std::os::unix::net::UnixStream::from(fd));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The nice value of the calling thread (Linux: nice is per thread).
pub fn current_nice() -> i32 {
    // SAFETY: getpriority only reads; errno is cleared first because -1 is
    // also a valid nice value.
    unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    }
}
