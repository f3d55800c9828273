//! Helpers the integration tests share: where a thread runs, who it is, its
//! nice value; a small random number generator; a one-thread executor. The library's own syscall wrappers are private (they
//! are not part of its API), so the tests read `/proc` where it says enough
//! and call libc where they must change something.

#![allow(dead_code)] // each test binary uses a few of these

use std::io;

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments and only returns a value.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).unwrap_or(0)
}

/// The kernel thread id of the calling thread (`/proc/thread-self` names it).
pub fn gettid() -> i32 {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    let tid = link.file_name().and_then(|s| s.to_str()).expect("a tid");
    tid.parse().expect("a numeric tid")
}

/// Pins the calling thread to `cpus`.
pub fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        assert!(c < libc::CPU_SETSIZE as usize, "cpu {c} beyond cpu_set_t");
        // SAFETY: c is below the set's capacity, asserted above.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A field of `/proc/self/task/<tid>/status` (`tid` 0: the calling thread).
fn status_field(tid: i32, key: &str) -> Option<String> {
    let path = if tid == 0 {
        "/proc/thread-self/status".to_string()
    } else {
        format!("/proc/self/task/{tid}/status")
    };
    let s = std::fs::read_to_string(path).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// The CPUs thread `tid` (0: the calling thread) may run on.
pub fn affinity_of(tid: i32) -> io::Result<Vec<usize>> {
    let list = status_field(tid, "Cpus_allowed_list")
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("thread {tid}")))?;
    cmwq::topology::parse_cpulist(&list)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

/// The effective user id of the process.
pub fn euid() -> u32 {
    let uids = status_field(0, "Uid").expect("Uid in /proc status");
    uids.split_whitespace()
        .nth(1)
        .and_then(|u| u.parse().ok())
        .expect("an effective uid")
}

/// Sets the calling thread's nice value.
pub fn set_nice(nice: i32) -> io::Result<()> {
    let tid = gettid() as libc::id_t;
    // SAFETY: setpriority with PRIO_PROCESS and a thread id changes only that thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// CPU time thread `tid` of this process has used (`schedstat`'s first field).
pub fn thread_cpu_time(tid: i32) -> Option<std::time::Duration> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let ns = s.split_whitespace().next()?.parse().ok()?;
    Some(std::time::Duration::from_nanos(ns))
}

/// xorshift64*: small, fast, and good enough to pick operations. Never seed
/// it with zero (it would stay there).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True `pct` times in a hundred.
    pub fn chance(&mut self, pct: usize) -> bool {
        self.below(100) < pct
    }
}

/// Runs one future to completion on the calling thread, parking between
/// polls (a `JoinHandle` needs no runtime: any waker does).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    use std::thread::{self, Thread};
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

/// Polls `f` every millisecond, at most 20,000 times (a bounded count of
/// naps, never asserted as a duration); whether it came true.
pub fn wait_for(f: impl Fn() -> bool) -> bool {
    for _ in 0..20_000 {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    false
}

/// The process's resident set size, in KiB (`VmRSS` of `/proc/self/status`).
pub fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// The process's threads now (`/proc/self/task`).
pub fn nr_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// Runs test `name` of this test binary again in a child process of its
/// own (with `env` set to "1"), so that what it measures (RSS, threads) is
/// its alone; returns true in the child, where the caller does the work,
/// and asserts the child passed in the parent.
pub fn in_own_process(name: &str, env: &str) -> bool {
    in_own_process_with(name, env, &[])
}

/// [`in_own_process`], with the variables `envs` set in the child too.
pub fn in_own_process_with(name: &str, env: &str, envs: &[(&str, &str)]) -> bool {
    if std::env::var_os(env).is_some() {
        return true;
    }
    let mut all = vec![(env, "1")];
    all.extend_from_slice(envs);
    println!("{}", run_child(name, &all, &["--include-ignored"]));
    false
}

/// Runs test `name` of this test binary in a child process with the
/// variables `envs` set (and `extra` arguments), asserts that it passed,
/// and returns what it printed.
pub fn run_child(name: &str, envs: &[(&str, &str)], extra: &[&str]) -> String {
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .args(extra)
        .envs(envs.iter().copied())
        .output()
        .expect("re-run the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {name} failed: {text}");
    assert!(
        text.contains("1 passed"),
        "child {name} did not run its test: {text}"
    );
    text
}

/// Runs test `name` of this test binary in a child process with `env` set to
/// "1" and its stderr a pipe whose reader is gone (a closed log), and waits
/// for it: at most 2,750 naps of 20 ms (a bounded count, never asserted as a
/// duration), after which a child still running is killed. Its exit status,
/// or `None` if it hung.
pub fn run_child_stderr_closed(name: &str, env: &str) -> Option<std::process::ExitStatus> {
    let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", name, "--test-threads", "1", "--nocapture"])
        .env(env, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("re-run the test binary");
    drop(child.stderr.take()); // the log reader died
    for _ in 0..2_750 {
        if let Some(st) = child.try_wait().expect("the child's status") {
            return Some(st);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}
