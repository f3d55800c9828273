//! What a run may ask for: memory and threads, checked before anything starts.
//!
//! A size that cannot be met must be refused up front with the option's name
//! and the limit, not found out by a producer that panics on a capacity
//! overflow (and leaves the start gate waiting) or by the OOM killer halfway
//! through a run. Every workload estimates the bytes its sizes need and the
//! threads they start, and compares them with [`Limits`]:
//!
//! - **memory**: half of what this process could get, the smallest of
//!   `MemAvailable` in `/proc/meminfo` ([`FALLBACK_MEMORY`] where it cannot be
//!   read), `RLIMIT_AS` and `RLIMIT_DATA`. Half, because the estimates count
//!   only the big buffers (samples, work items), not the heap around them;
//! - **threads**: at most [`MAX_THREADS`] of one kind (producers, workers,
//!   hogs), and fewer than `RLIMIT_NPROC` where that is finite.

use std::fmt::Display;

/// Most threads of one kind a run may start, whatever the limits say (the
/// kernel caps `test_workqueue`'s `nr_threads` too).
pub const MAX_THREADS: usize = 4096;

/// The memory assumed available when `/proc/meminfo` cannot be read: 4 GiB.
pub const FALLBACK_MEMORY: u64 = 4 << 30;

/// The limits one run is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes the run's big buffers may take in total.
    pub memory: u64,
    /// Threads of one kind the run may start.
    pub threads: usize,
}

impl Limits {
    /// This process's limits (see the module docs).
    pub fn of_this_process() -> Limits {
        let avail = mem_available().unwrap_or(FALLBACK_MEMORY);
        let mem = [
            Some(avail),
            rlimit(libc::RLIMIT_AS),
            rlimit(libc::RLIMIT_DATA),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(avail);
        let threads = rlimit(libc::RLIMIT_NPROC)
            .map_or(MAX_THREADS, |n| {
                usize::try_from(n).unwrap_or(usize::MAX).saturating_sub(1)
            })
            .clamp(1, MAX_THREADS);
        Limits {
            memory: mem / 2,
            threads,
        }
    }

    /// `Err` naming `option value` when `need` bytes (`None`: more than fit in
    /// a u64) exceed [`memory`](Self::memory); `what` says what takes them,
    /// `hint` how to ask for less.
    pub fn check_memory(
        &self,
        option: &str,
        value: impl Display,
        need: Option<u64>,
        what: &str,
        hint: &str,
    ) -> Result<(), String> {
        match need {
            Some(n) if n <= self.memory => Ok(()),
            _ => Err(format!(
                "{option} {value}: {what} need {} of memory, more than a run may use ({}, half of the memory available to this process){}",
                need.map_or_else(|| "more than 16 EiB".to_string(), human_bytes),
                human_bytes(self.memory),
                if hint.is_empty() {
                    String::new()
                } else {
                    format!("; {hint}")
                }
            )),
        }
    }

    /// `Err` naming `option n` when `n` threads exceed [`threads`](Self::threads).
    pub fn check_threads(&self, option: &str, n: usize, what: &str) -> Result<(), String> {
        if n <= self.threads {
            return Ok(());
        }
        Err(format!(
            "{option} {n}: at most {} {what} (the lab's cap is {MAX_THREADS}; RLIMIT_NPROC may lower it)",
            self.threads
        ))
    }
}

/// `n` bytes as `1.5 GiB`, `12.0 MiB`, `512 B`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
pub fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&s)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The soft limit of `resource`; `None` when unlimited or unknown.
fn rlimit(resource: libc::__rlimit_resource_t) -> Option<u64> {
    crate::bench::sys::rlimit_cur(resource).filter(|&v| v != libc::RLIM_INFINITY)
}

/// Sets this process's address-space limit (`RLIMIT_AS`, soft and hard) to
/// `bytes`: for harnesses and tests that run `cmwq` under a memory limit
/// (it is one system call, safe to make between `fork` and `exec`).
pub fn limit_address_space(bytes: u64) -> std::io::Result<()> {
    let r = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: setrlimit only reads `r`, which lives in this frame.
    if unsafe { libc::setrlimit(libc::RLIMIT_AS, &r) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The message of a panic payload (`panic!("...")` or a formatted one), for
/// reporting a thread that died.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_and_sizes() {
        let m = "MemTotal:  8000 kB\nMemFree: 10 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(parse_mem_available(m), Some(2 << 20));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        let l = Limits::of_this_process();
        assert!(l.memory > 0 && (1..=MAX_THREADS).contains(&l.threads));
    }

    #[test]
    fn checks_name_the_option_and_the_limit() {
        let l = Limits {
            memory: 1 << 20,
            threads: 8,
        };
        assert_eq!(l.check_memory("--items", 1, Some(1 << 20), "x", ""), Ok(()));
        let e = l
            .check_memory("--items", 99, None, "99 items", "ask for less")
            .unwrap_err();
        assert!(
            e.starts_with("--items 99: 99 items need more than 16 EiB"),
            "{e}"
        );
        assert!(
            e.contains("1.0 MiB") && e.ends_with("; ask for less"),
            "{e}"
        );
        assert_eq!(l.check_threads("--hogs", 8, "hogs"), Ok(()));
        let e = l.check_threads("--hogs", 9, "hogs").unwrap_err();
        assert!(e.starts_with("--hogs 9: at most 8 hogs"), "{e}");
    }

    #[test]
    fn panic_messages() {
        let p = std::panic::catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_message(&*p), "plain");
        let n = 3;
        let p = std::panic::catch_unwind(|| panic!("formatted {n}")).unwrap_err();
        assert_eq!(panic_message(&*p), "formatted 3");
    }
}
