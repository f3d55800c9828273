//! The few Linux calls the harness needs: pinning, the current CPU, rusage, threads.
//!
//! The kernel benchmark binds each producer kthread to its CPU (`kthread_bind`); the
//! user-space analogue is `sched_setaffinity` on the producer thread. CPU time and
//! context switches come from `getrusage(RUSAGE_SELF)`, which on Linux sums every
//! thread of the process, dead ones included, so executor threads that exited
//! during a run are still charged.

use std::time::Duration;

/// The CPUs this process may run on (its affinity mask), ascending; `[0]` if unknown.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `set` is a plain bitmask owned by this frame; sched_getaffinity writes
    // at most `size_of::<cpu_set_t>()` bytes into it, and CPU_ISSET only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        if cpus.is_empty() { vec![0] } else { cpus }
    }
}

/// Pin the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    // SAFETY: `set` is a zeroed cpu_set_t owned by this frame; CPU_SET writes one bit
    // inside it (cpu is checked against CPU_SETSIZE first); sched_setaffinity(0, ..)
    // reads it for the calling thread only.
    let rc = unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(format!("cpu {cpu} out of range"));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "sched_setaffinity(cpu {cpu}): {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// The CPU the calling thread runs on now (`sched_getcpu`), 0 if unknown.
#[inline]
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments and only returns a value.
    let c = unsafe { libc::sched_getcpu() };
    if c < 0 { 0 } else { c as usize }
}

/// The soft limit of a resource (`RLIMIT_NPROC`, `RLIMIT_AS`, ...), `None` if
/// it cannot be read.
pub fn rlimit_cur(resource: libc::__rlimit_resource_t) -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct through a valid pointer.
    let ok = unsafe { libc::getrlimit(resource, &mut r) } == 0;
    ok.then_some(r.rlim_cur)
}

/// The nice value of the calling thread (Linux: nice is per thread), read
/// from `/proc/thread-self/stat` (its 19th field); 0 if it cannot be read.
pub fn current_nice() -> i32 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // Fields after the parenthesised command name start at the 3rd (state).
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().nth(19 - 3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Process-wide resource usage (all threads).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// User CPU time.
    pub user: Duration,
    /// System CPU time.
    pub sys: Duration,
    /// Voluntary context switches (a thread blocked: futex wait, sleep).
    pub nvcsw: u64,
    /// Involuntary context switches (preempted).
    pub nivcsw: u64,
}

impl Usage {
    /// `getrusage(RUSAGE_SELF)` now.
    pub fn now() -> Usage {
        // SAFETY: `ru` is owned by this frame and getrusage fills it completely.
        let ru = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut ru);
            ru
        };
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        Usage {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
            nvcsw: ru.ru_nvcsw as u64,
            nivcsw: ru.ru_nivcsw as u64,
        }
    }

    /// User plus system time.
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }

    /// `self - earlier`, saturating.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
            nvcsw: self.nvcsw.saturating_sub(earlier.nvcsw),
            nivcsw: self.nivcsw.saturating_sub(earlier.nivcsw),
        }
    }
}

/// Threads of this process now (entries of `/proc/self/task`), 0 if unreadable.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`);
/// zero if the clock cannot be read.
pub fn thread_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Reads this process's thread count from `/proc/self/stat` (its 20th
/// field, `num_threads`), the file kept open so that a sampler reading it
/// every millisecond pays one `pread` a sample, not an `open` and a
/// directory walk as [`thread_count`] does.
pub struct ThreadCounter {
    stat: std::fs::File,
    buf: Vec<u8>,
}

impl ThreadCounter {
    /// Opens `/proc/self/stat`; the error names the file.
    pub fn open() -> Result<ThreadCounter, String> {
        let stat = std::fs::File::open("/proc/self/stat")
            .map_err(|e| format!("/proc/self/stat: {e} (is /proc mounted?)"))?;
        Ok(ThreadCounter {
            stat,
            buf: vec![0; 4096],
        })
    }

    /// Threads of the process now; `None` if the file could not be read or parsed.
    pub fn now(&mut self) -> Option<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.stat.read_at(&mut self.buf, 0).ok()?;
        let s = std::str::from_utf8(&self.buf[..n]).ok()?;
        // Fields after the parenthesised command name start at the 3rd (state).
        let rest = &s[s.rfind(')')? + 1..];
        rest.split_whitespace().nth(20 - 3)?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        assert!(thread_count() >= 1);
        let u = Usage::now();
        assert!(u.since(&u).cpu().is_zero());
        // Other tests start and end threads meanwhile: the two readings
        // agree on one of many tries, a wrong field would not.
        let mut tc = ThreadCounter::open().unwrap();
        assert!(
            (0..1000).any(|_| tc.now() == Some(thread_count())),
            "num_threads of /proc/self/stat never matched /proc/self/task"
        );
        let t0 = thread_cpu_now();
        let mut x = 0u64;
        while thread_cpu_now() < t0 + Duration::from_millis(2) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(thread_cpu_now() > t0);
        std::thread::spawn(move || {
            pin_current_thread(cpus[0]).unwrap();
            assert_eq!(current_cpu(), cpus[0]);
        })
        .join()
        .unwrap();
    }
}
