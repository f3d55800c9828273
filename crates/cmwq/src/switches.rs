//! A worker's context switches, read from another thread: the user-space
//! stand-in for the scheduler's `wq_worker_sleeping` / `wq_worker_running`.
//!
//! The kernel's scheduler tells the workqueue the moment a worker sleeps, so a
//! concurrency-managed pool starts the next item at once. User space gets no
//! such call, and real code blocks without saying so (a file read, a lock, a
//! DNS lookup), so cmwq has to *see* a worker sleep. Three ways were measured
//! on the 2-vCPU build VM (kernel 6.18, `perf_event_paranoid` 2, unprivileged):
//!
//! | way | cost of one look at one worker | tells sleep from preemption | needs |
//! |---|---|---|---|
//! | `/proc/self/task/TID/stat` (open, read, close) | ~10 µs, three syscalls | yes (`S`/`D` against `R`) | nothing |
//! | `schedstat` / `status` switch counters | ~10 µs, and a count, not a state | no | nothing |
//! | this module: the thread's own `PERF_RECORD_SWITCH` ring, mapped | two loads from shared memory, no syscall | yes (`SWITCH_OUT_PREEMPT`) | `perf_event_open` of a software event on one's own thread, allowed at `perf_event_paranoid` <= 2 |
//!
//! A look that costs no syscall can be made where it matters, on the queue
//! path: when an item is queued on a lane whose counted worker is busy, the
//! pool reads that worker's last switch record under its lock, and a worker
//! that has been switched out *asleep* for longer than [`MIN_ASLEEP`] leaves
//! `nr_running` and another worker is woken for the item. The watchdog looks
//! the same way every millisecond (`LOOK` in `engine/pool/sleep.rs`) while a
//! managed pool has waiting work, which covers an item queued before its
//! worker fell asleep.
//!
//! Records are not free: with a probe open, every context switch of that
//! thread writes one and reschedules the perf event, about 1 µs here. A pool
//! whose workers park and wake once per item (`cmwq bench --batch 1`) spent
//! 40% more CPU per item with a probe on every worker (`cmwq compare`, 10
//! runs a side, `**`). So by default ([`BlockDetection::Adaptive`]) a pool
//! starts without probes: the `/proc` sampler looks, every millisecond while
//! the pool has waiting work, at each counted worker that has stayed on one
//! item since the previous look (a pool of short items costs no reads), and
//! the first sleep it sees turns probes on for that pool; its workers open
//! theirs at the end of their next busy spell. Where `perf_event_open` is
//! refused (a stricter `perf_event_paranoid`, a seccomp filter, the per-user
//! `perf_event_mlock_kb` budget spent) a worker has no probe and the sampler
//! keeps looking at it.
//!
//! # The ring
//!
//! Each worker thread opens, on itself, a `PERF_COUNT_SW_DUMMY` event with
//! `context_switch` set and maps it read-only: one metadata page and one data
//! page. A read-only mapping is an *overwrite* ring: the kernel never waits
//! for a reader and the newest record always sits just below `data_head`.
//! With `sample_id_all` and `PERF_SAMPLE_TIME` (on `CLOCK_MONOTONIC`) every
//! record the event produces is 16 bytes, a header and the time of the
//! switch, and 16 divides the data size, so a record never wraps. The last
//! record says where the thread is:
//!
//! - switch-in: running;
//! - switch-out with `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`: runnable, taken
//!   off the CPU by the scheduler (it still counts, as in the kernel);
//! - switch-out without it: asleep since the record's time.
//!
//! A reader loads `data_head` (acquire, pairing with the kernel's release
//! when it publishes a record), reads the record below it, and loads
//! `data_head` again: if it moved, the thread switched meanwhile and the
//! look is retried. A record is overwritten only after 256 newer ones, and
//! a moved head is always noticed, so a torn record is never believed.
//!
//! Why a minimum sleep: a worker also sleeps for a moment inside cmwq itself
//! (waiting for its pool's lock, which the queuer holds while it looks), and
//! waking another worker for that costs a cross-CPU wakeup for nothing. So a
//! sleep counts at once only while the worker is inside its item's callback
//! ([`item_flag`]: a flag the worker sets around the call, which its probe
//! shares), where a sleep is the item's, as the kernel's scheduler hook would
//! see it; outside the callback (cmwq's own bookkeeping) it counts once it is
//! [`MIN_ASLEEP`] old. Measured with `cmwq mix` (see the README): waiting the
//! 50 µs inside the callback too kept the unannotated CPU jobs' p99 queueing
//! delay 50-150 µs behind tokio's `spawn_blocking`.

use std::cell::OnceCell;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long a worker outside its item's callback must have been asleep
/// before a look takes it out of `nr_running`: longer than a wait for the
/// pool lock. Inside the callback ([`item_flag`]) any sleep counts.
pub(crate) const MIN_ASLEEP: Duration = Duration::from_micros(50);

thread_local! {
    /// The calling thread's "inside an item's callback" flag, shared with
    /// every probe opened on it (made by the first).
    static IN_ITEM: OnceCell<Arc<AtomicBool>> = const { OnceCell::new() };
}

/// The calling thread's "inside an item's callback" flag, made on first use
/// and shared with every probe opened on the thread. A worker takes it at
/// its start and sets it around each item's callback; a look reads it
/// through the worker's probe, or the `/proc` sampler through the worker's
/// slot, to tell a sleep in an item from a wait for one of cmwq's own locks.
/// `Relaxed` stores: a hint; a stale value costs one wakeup too many or a
/// sleep seen a look later, never a wrong count.
pub(crate) fn item_flag() -> Arc<AtomicBool> {
    IN_ITEM.with(|c| c.get_or_init(Default::default).clone())
}

/// Where a probed thread is, from its last switch record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunState {
    /// On a CPU, or no record yet.
    Running,
    /// Runnable but switched out by the scheduler.
    Preempted,
    /// Switched out asleep, this long ago.
    Asleep(Duration),
}

/// How cmwq notices a worker that blocks without [`crate::blocking`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockDetection {
    /// The default (`CMWQ_BLOCK_DETECT=auto`): the `/proc` sampler finds the
    /// first worker of a pool that sleeps in an item; from then on that
    /// pool's workers read their context-switch records, and a sleep is seen
    /// on the next queue to the pool or within the watchdog's look. A pool
    /// whose items never block pays for no records.
    Adaptive,
    /// Every worker reads its context-switch records from its start
    /// (`CMWQ_BLOCK_DETECT=switch`).
    SwitchRecords,
    /// The `/proc/self/task/TID/stat` sampler alone: `perf_event_open` was
    /// refused, or `CMWQ_BLOCK_DETECT=proc` chose it.
    ProcSampler,
    /// Only [`crate::blocking`] and the CPU-intensive tick
    /// (`CMWQ_BLOCK_DETECT=off`).
    AnnotationOnly,
}

/// A: what the process uses; [`MODE_UNSET`] until the first worker asks.
/// `Relaxed`: a setting read on its own (a worker that raced the first
/// decision reads the environment again and decides the same).
static MODE: AtomicU8 = AtomicU8::new(MODE_UNSET);
const MODE_UNSET: u8 = 0;
const MODE_AUTO: u8 = 1;
const MODE_SWITCH: u8 = 2;
const MODE_PROC: u8 = 3;
const MODE_OFF: u8 = 4;

/// The environment variable that picks the detector.
pub(crate) const ENV: &str = "CMWQ_BLOCK_DETECT";

/// Parses a `CMWQ_BLOCK_DETECT` value (`auto`, `switch`, `proc`, `off`;
/// empty: `auto`).
pub(crate) fn parse_mode(v: &str) -> Result<BlockDetection, String> {
    match v.trim() {
        "" | "auto" => Ok(BlockDetection::Adaptive),
        "switch" => Ok(BlockDetection::SwitchRecords),
        "proc" => Ok(BlockDetection::ProcSampler),
        "off" => Ok(BlockDetection::AnnotationOnly),
        other => Err(format!(
            "{ENV}={other:?}: expected auto (the /proc sampler, then switch records \
             for pools seen to block), switch (switch records from the start), proc or off"
        )),
    }
}

fn mode() -> u8 {
    let m = MODE.load(Ordering::Relaxed);
    if m != MODE_UNSET {
        return m;
    }
    // A bad value was refused by `check_env`/`build`; here it falls back to auto.
    let want = std::env::var(ENV)
        .ok()
        .and_then(|v| parse_mode(&v).ok())
        .unwrap_or(BlockDetection::Adaptive);
    let m = match want {
        BlockDetection::Adaptive => MODE_AUTO,
        BlockDetection::SwitchRecords => MODE_SWITCH,
        BlockDetection::ProcSampler => MODE_PROC,
        BlockDetection::AnnotationOnly => MODE_OFF,
    };
    MODE.store(m, Ordering::Relaxed);
    m
}

/// How this process notices unannotated blocking now (after a refused
/// probe, [`BlockDetection::ProcSampler`]).
///
/// ```
/// let d = cmwq::block_detection();
/// assert!(matches!(
///     d,
///     cmwq::BlockDetection::Adaptive
///         | cmwq::BlockDetection::SwitchRecords
///         | cmwq::BlockDetection::ProcSampler
///         | cmwq::BlockDetection::AnnotationOnly
/// ));
/// ```
pub fn block_detection() -> BlockDetection {
    match mode() {
        MODE_AUTO => BlockDetection::Adaptive,
        MODE_SWITCH => BlockDetection::SwitchRecords,
        MODE_PROC => BlockDetection::ProcSampler,
        _ => BlockDetection::AnnotationOnly,
    }
}

/// Whether a new pool's workers open their probes from the start.
pub(crate) fn probe_from_start() -> bool {
    mode() == MODE_SWITCH
}

/// Whether workers may open probes at all (`auto` or `switch`, and no
/// refusal seen yet).
pub(crate) fn probes_allowed() -> bool {
    matches!(mode(), MODE_AUTO | MODE_SWITCH)
}

/// Whether the `/proc` sampler may look at workers (it serves those with no probe).
pub(crate) fn sampler_enabled() -> bool {
    mode() != MODE_OFF
}

// The parts of `struct perf_event_attr` (PERF_ATTR_SIZE_VER5, 112 bytes) this
// module sets, as byte offsets; the rest stays zero.
const ATTR_SIZE: usize = 112;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
const FLAG_CONTEXT_SWITCH: u64 = 1 << 26;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
// `struct perf_event_mmap_page`: where the ring's head and geometry are.
const PAGE_DATA_HEAD: usize = 1024;
const PAGE_DATA_OFFSET: usize = 1040;
const PAGE_DATA_SIZE: usize = 1048;
const PERF_RECORD_SWITCH: u32 = 14;
const MISC_SWITCH_OUT: u16 = 1 << 13;
const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
/// A header and `PERF_SAMPLE_TIME`.
const RECORD_LEN: u64 = 16;

/// The calling thread's switch records, readable from any thread.
pub(crate) struct SwitchProbe {
    fd: libc::c_int,
    map: NonNull<u8>,
    map_len: usize,
    data_off: usize,
    data_size: u64,
    /// The thread's [`item_flag`].
    in_item: Arc<AtomicBool>,
}

// SAFETY: the mapping is read-only shared memory that the kernel writes; every
// read of it goes through atomics or volatile loads, so any thread may read it,
// and the fd and mapping are released once, by `Drop`.
unsafe impl Send for SwitchProbe {}
// SAFETY: as above: `state` takes `&self` and only reads.
unsafe impl Sync for SwitchProbe {}

impl SwitchProbe {
    /// Opens a probe on the calling thread, if this process uses them. `None`
    /// when the mode says not to or the kernel refuses (after a refusal
    /// for want of permission or support, no worker tries again).
    pub(crate) fn open_current() -> Option<SwitchProbe> {
        if !matches!(mode(), MODE_AUTO | MODE_SWITCH) {
            return None;
        }
        match Self::open() {
            Ok(p) => Some(p),
            Err(e) => {
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES | libc::EPERM | libc::ENOSYS | libc::ENOENT | libc::EINVAL)
                ) {
                    // Not allowed or not supported here: every later worker
                    // would be refused the same way.
                    MODE.store(MODE_PROC, Ordering::Relaxed);
                }
                None
            }
        }
    }

    fn open() -> io::Result<SwitchProbe> {
        let mut attr = [0u8; ATTR_SIZE];
        let put32 = |a: &mut [u8; ATTR_SIZE], off: usize, v: u32| {
            a[off..off + 4].copy_from_slice(&v.to_ne_bytes())
        };
        let put64 = |a: &mut [u8; ATTR_SIZE], off: usize, v: u64| {
            a[off..off + 8].copy_from_slice(&v.to_ne_bytes())
        };
        put32(&mut attr, 0, PERF_TYPE_SOFTWARE);
        put32(&mut attr, 4, ATTR_SIZE as u32);
        put64(&mut attr, 8, PERF_COUNT_SW_DUMMY);
        put64(&mut attr, 24, PERF_SAMPLE_TIME);
        put64(
            &mut attr,
            40,
            FLAG_EXCLUDE_KERNEL
                | FLAG_EXCLUDE_HV
                | FLAG_SAMPLE_ID_ALL
                | FLAG_USE_CLOCKID
                | FLAG_CONTEXT_SWITCH,
        );
        put32(&mut attr, 92, libc::CLOCK_MONOTONIC as u32);
        // SAFETY: perf_event_open reads `size` (112) bytes of `attr`, which is
        // that long; pid 0 and cpu -1 mean the calling thread on any CPU; no
        // group; the result is an fd we own or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                0 as libc::pid_t,
                -1 as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        } as libc::c_int;
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: sysconf only returns a value.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let map_len = 2 * page;
        // SAFETY: a fresh shared read-only mapping of the perf fd, of the size
        // the kernel accepts (one metadata page and 2^0 data pages); the
        // result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: fd is ours and not used again.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let map = NonNull::new(p as *mut u8).expect("mmap returned non-null");
        let mut probe = SwitchProbe {
            fd,
            map,
            map_len,
            data_off: page,
            data_size: page as u64,
            in_item: item_flag(),
        };
        // Kernels since 4.1 say where the data is; older ones put it at one page.
        let (off, size) = (probe.word(PAGE_DATA_OFFSET), probe.word(PAGE_DATA_SIZE));
        if off != 0 && size != 0 {
            probe.data_off = off as usize;
            probe.data_size = size;
        }
        if !probe.data_size.is_multiple_of(RECORD_LEN)
            || probe.data_off + probe.data_size as usize > map_len
        {
            return Err(io::Error::other("unexpected perf ring geometry"));
        }
        Ok(probe)
    }

    /// A 64-bit word of the metadata page.
    fn word(&self, off: usize) -> u64 {
        // SAFETY: `off` is one of the page's 8-aligned fields, inside the
        // mapping; the kernel writes it concurrently, hence the volatile load.
        unsafe { std::ptr::read_volatile(self.map.as_ptr().add(off) as *const u64) }
    }

    fn head(&self) -> u64 {
        // SAFETY: data_head is an 8-aligned u64 inside the mapping, written by
        // the kernel with release semantics; an atomic view of it is sound.
        let head = unsafe { &*(self.map.as_ptr().add(PAGE_DATA_HEAD) as *const AtomicU64) };
        head.load(Ordering::Acquire)
    }

    /// Whether the thread is inside an item's callback (see [`item_flag`]).
    pub(crate) fn in_item(&self) -> bool {
        self.in_item.load(Ordering::Relaxed)
    }

    /// Where the thread is now (see the module docs); `now_ns` is
    /// `CLOCK_MONOTONIC` in nanoseconds, read once by the caller for all
    /// its looks.
    pub(crate) fn state(&self, now_ns: &mut LazyMono) -> RunState {
        for _ in 0..4 {
            let head = self.head();
            if head < RECORD_LEN {
                return RunState::Running;
            }
            let at = self.data_off + ((head - RECORD_LEN) % self.data_size) as usize;
            // SAFETY: `at` is 16-aligned and at least 16 bytes below the end of
            // the data area (checked in `open`), inside the mapping.
            let (hdr, time) = unsafe {
                let p = self.map.as_ptr().add(at) as *const u64;
                (
                    std::ptr::read_volatile(p),
                    std::ptr::read_volatile(p.add(1)),
                )
            };
            if self.head() != head {
                continue;
            }
            let (ty, misc, size) = (hdr as u32, (hdr >> 32) as u16, (hdr >> 48) as u16);
            if ty != PERF_RECORD_SWITCH || u64::from(size) != RECORD_LEN {
                return RunState::Running;
            }
            if misc & MISC_SWITCH_OUT == 0 {
                return RunState::Running;
            }
            if misc & MISC_SWITCH_OUT_PREEMPT != 0 {
                return RunState::Preempted;
            }
            return RunState::Asleep(Duration::from_nanos(now_ns.get().saturating_sub(time)));
        }
        // It keeps switching: it is not stuck asleep.
        RunState::Running
    }
}

impl Drop for SwitchProbe {
    fn drop(&mut self) {
        // SAFETY: the mapping and fd were made in `open` and are released once.
        unsafe {
            libc::munmap(self.map.as_ptr() as *mut libc::c_void, self.map_len);
            libc::close(self.fd);
        }
    }
}

/// O: a probe opened on the thread that first turned probes on (which may
/// exit: the event lives as long as its fd), held for the process's life. The kernel turns its context-switch tracking on with the
/// first such event of a process (about 10 ms, once) and off after the last
/// closes; with this one open, a worker's probe opens in microseconds however
/// workers come and go.
static KEEPER: OnceLock<Option<SwitchProbe>> = OnceLock::new();

/// Makes sure switch tracking stays on (see [`KEEPER`]); call it before the
/// first workers are asked to open probes, outside every lock.
pub(crate) fn keep_tracking() {
    KEEPER.get_or_init(SwitchProbe::open_current);
}

/// Whether switch tracking is on for good: the keeper was tried (opened,
/// or failed; after a refusal for want of permission or support no probe
/// opens anyway, after another failure each worker tries its own).
pub(crate) fn tracking_kept() -> bool {
    KEEPER.get().is_some()
}

/// `CLOCK_MONOTONIC` in nanoseconds, read at most once per batch of looks.
#[derive(Default)]
pub(crate) struct LazyMono(Option<u64>);

impl LazyMono {
    /// The time, read on first use.
    pub(crate) fn get(&mut self) -> u64 {
        *self.0.get_or_insert_with(mono_ns)
    }
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_tells_a_sleeping_thread_from_a_running_one() {
        let Ok(probe) = SwitchProbe::open() else {
            eprintln!("perf_event_open refused here: nothing to check");
            return;
        };
        // This thread is running while it reads its own record.
        assert!(!matches!(
            probe.state(&mut LazyMono::default()),
            RunState::Asleep(_)
        ));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // Another probe, on a thread that sleeps until told.
        let (ptx, prx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            ptx.send(SwitchProbe::open().ok()).unwrap();
            rx.recv().unwrap();
        });
        let Some(other) = prx.recv().unwrap() else {
            return;
        };
        let mut seen = false;
        for _ in 0..2000 {
            if matches!(other.state(&mut LazyMono::default()), RunState::Asleep(_)) {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(seen, "a thread blocked in recv was never seen asleep");
        tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn modes_parse_and_refuse_garbage() {
        assert_eq!(parse_mode(""), Ok(BlockDetection::Adaptive));
        assert_eq!(parse_mode("switch"), Ok(BlockDetection::SwitchRecords));
        assert_eq!(parse_mode("proc"), Ok(BlockDetection::ProcSampler));
        assert_eq!(parse_mode("off"), Ok(BlockDetection::AnnotationOnly));
        assert!(
            parse_mode("perf?")
                .unwrap_err()
                .contains("CMWQ_BLOCK_DETECT")
        );
    }
}
