//! Per-CPU state that other CPUs can drain: QPW ("queue per-CPU work") next to
//! the classic drain-by-work-item pattern.
//!
//! A [`PerCpu<T>`] holds one slot per possible CPU. The owner of a CPU reaches
//! its slot with [`PerCpu::with_local`] (the CPU comes from `sched_getcpu`,
//! which glibc answers from the rseq area without a syscall); anybody reaches
//! any slot by index. Per-CPU caches of this kind (an object cache, an LRU
//! batch) must now and then be emptied from outside: to give memory back, or
//! to make a global count exact. There are two ways to do it, and a [`Mode`]
//! chooses between them, per `PerCpu` at construction or process-wide with
//! `CMWQ_QPW=0|1` (the kernel's `qpw=` parameter, see [`Mode::from_env`]):
//!
//! * [`Mode::Local`]: [`PerCpu::drain_on`] queues a work item on the target
//!   CPU's bound pool (a bound workqueue, `percpu_drain`, shared by the
//!   process) and flushes it; [`PerCpu::drain_all`] queues one on every CPU and
//!   then flushes them all (the kernel's `schedule_on_each_cpu` /
//!   `lru_add_drain_all`). The drain runs *on* the target CPU, which is
//!   interrupted: its running thread is preempted by a worker thread, even if
//!   it is an isolated CPU running a latency-sensitive loop.
//! * [`Mode::Qpw`]: the caller takes the target slot's lock and runs the drain
//!   itself (`queue_percpu_work_on` runs the function in place, and
//!   `flush_percpu_work` has nothing to wait for). The target CPU is not
//!   disturbed unless it is inside [`PerCpu::with_local`] on that very slot at
//!   that moment, in which case one of the two waits for the other's short
//!   critical section.
//!
//! The API is the same in both modes; only *who runs the drain* changes.
//!
//! # Why `Local` mode takes a lock too (where user space differs)
//!
//! In the kernel, `Local` mode's fast path is `local_lock`, which only
//! disables preemption (or migration): while it is held nothing else can run
//! on that CPU, and the drain work item runs on that CPU, so the slot needs no
//! shared lock. QPW swaps it for a real per-CPU spinlock and pays an atomic on
//! the fast path (seed 003: 159 → 190 cycles per kmalloc).
//!
//! User space cannot disable preemption or migration. Between
//! `sched_getcpu()` and the access the thread can be moved to another CPU, so
//! two threads can believe they own the same slot; and a thread can be
//! preempted in the middle of its access by the very worker that drains the
//! slot. A restartable sequence (rseq) is the kernel's answer for user space,
//! but it needs hand-written assembly and `unsafe`, which this crate keeps for
//! syscalls. So **every slot carries a lock in both modes**: a
//! `std::sync::Mutex`, whose uncontended lock and unlock are one atomic
//! compare-and-swap and one atomic swap on a cache line that only this CPU
//! touches in practice (slots are padded to 128 bytes). Contention happens only
//! when a thread migrated in the window, when a holder is preempted, or when a
//! drain meets the owner; all are rare and all are correct.
//!
//! What that costs is measured by the lab (`cmwq percpu cost`): a per-CPU
//! object cache driven through `sched_getcpu` and an array *without* any lock
//! (valid only single-threaded and with no remote drain: it is the price the
//! kernel's `local_lock` path would have), then through `PerCpu` in `Local` and
//! in `Qpw` mode. Since both modes take the same lock here, their fast paths
//! cost the same; the price of QPW's lock that the kernel pays only in `Qpw`
//! mode is paid in both modes in user space, and the choice of mode is only
//! about interruptions (`cmwq percpu isolation`).
//!
//! Measured on the 2-vCPU build machine (TSC ticks at 2.0 GHz, medians over
//! runs, a busy shared machine): the object cache costs ~33 ticks per
//! operation without a lock and ~111–116 through `PerCpu` in either mode, so
//! the lock adds ~80 ticks where seed 003's kernel spinlock added ~30 cycles.
//! Atomic read-modify-writes are slow on this VM (~65 ticks each), and a
//! `std::sync::Mutex` does two per lock/unlock pair (a compare-and-swap, and a
//! swap on release to learn whether to wake a waiter): ~130 ticks for a bare
//! pair, against ~75 for a spin lock's compare-and-swap plus plain release
//! store. A spin lock would halve the price, but it needs `UnsafeCell` and
//! `unsafe` to hand out the data, which the house rules keep out of this
//! crate; `sched_getcpu` through rseq is ~15–20 ticks.
//!
//! A drain function that panics poisons nothing: slot locks ignore poisoning,
//! as kernel spinlocks have none. `Local` mode reports the panic as
//! [`PercpuError::DrainPanicked`] (the worker survives it); `Qpw` mode lets it
//! unwind through the caller.
//!
//! ```
//! use cmwq::percpu::{Mode, PerCpu};
//!
//! // A per-CPU count of cached objects.
//! let cache = PerCpu::new(Mode::Qpw, |_cpu| 0u64).unwrap();
//! cache.with_local(|n| *n += 3);
//! // Give everything back: each slot is emptied, the counts come back.
//! let drained: u64 = cache.drain_all(|_cpu, n| std::mem::take(n)).unwrap().iter().sum();
//! assert_eq!(drained, 3);
//! ```

mod mode;

pub use mode::{Mode, PercpuError, QPW_ENV};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::sched;
use crate::sync::{Level, Mutex, MutexGuard};
use crate::topology::Topology;
use crate::{Work, Workqueue};

/// One CPU's slot, alone on its cache lines (128 bytes covers the adjacent-line
/// prefetcher of x86 and the 128-byte lines of some Arm parts).
#[repr(align(128))]
struct Slot<T> {
    lock: Mutex<T>,
}

impl<T> Slot<T> {
    fn lock(&self) -> MutexGuard<'_, T> {
        // A panic under the lock leaves the slot as the panicking code left it;
        // kernel locks have no poisoning, and neither do these.
        self.lock.lock()
    }
}

struct Inner<T> {
    slots: Box<[Slot<T>]>,
    queued: AtomicU64,
    on_caller: AtomicU64,
}

/// How a [`PerCpu`]'s drains ran, since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DrainStats {
    /// Drains that ran as a work item on the target CPU's pool (`Local` mode).
    pub queued: u64,
    /// Drains that ran on the caller: every drain in `Qpw` mode, and in `Local`
    /// mode the drains of CPUs that have no bound pool in this process (outside
    /// its affinity or offline: no thread of ours can be running there).
    pub on_caller: u64,
}

/// One `T` per possible CPU, reached from the current CPU or by index; see the
/// [module docs](self) for the two drain modes.
///
/// ```
/// use cmwq::percpu::{Mode, PerCpu};
///
/// // A per-CPU event counter, bumped locally and summed on demand.
/// let hits = PerCpu::new(Mode::Local, |_cpu| 0u64).unwrap();
/// assert_eq!(hits.nr_slots(), cmwq::percpu::nr_possible_cpus());
/// for _ in 0..10 {
///     hits.with_local(|n| *n += 1);
/// }
/// let sum: u64 = (0..hits.nr_slots()).map(|c| hits.with_cpu(c, |n| *n).unwrap()).sum();
/// assert_eq!(sum, 10);
/// // `Local` mode drains each slot on its own CPU's worker.
/// let cpu = cmwq::topology::sched_affinity().unwrap()[0];
/// hits.drain_on(cpu, |n| *n = 0).unwrap();
/// ```
pub struct PerCpu<T> {
    inner: Arc<Inner<T>>,
    mode: Mode,
    wq: Option<Workqueue>,
}

impl<T> std::fmt::Debug for PerCpu<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerCpu")
            .field("mode", &self.mode)
            .field("nr_slots", &self.inner.slots.len())
            .finish()
    }
}

/// The number of possible CPUs (`nr_cpu_ids`): from sysfs, else the number of
/// CPUs this process may use.
pub fn nr_possible_cpus() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        let avail = std::thread::available_parallelism().map_or(1, |n| n.get());
        Topology::detect()
            .map(|t| t.nr_cpu_ids())
            .unwrap_or(avail)
            .max(avail)
            .max(sched::current_cpu() + 1)
    })
}

/// The process-wide bound workqueue that runs `Local` mode's drains (the
/// kernel's `mm_percpu_wq` plays this part for `lru_add_drain_all`).
fn drain_wq() -> Result<Workqueue, PercpuError> {
    static WQ: OnceLock<Result<Workqueue, crate::Error>> = OnceLock::new();
    WQ.get_or_init(|| Workqueue::builder("percpu_drain").build())
        .clone()
        .map_err(PercpuError::Workqueue)
}

/// A drain in flight on a worker: the function goes in, the result comes out.
type Mailbox<F, R> = Arc<Mutex<(Option<F>, Option<R>)>>;

impl<T: Send + 'static> PerCpu<T> {
    /// One slot per possible CPU, slot `c` made by `init(c)`, drained as `mode`
    /// says. `Local` mode needs the process's drain workqueue; failing to build
    /// it is [`PercpuError::Workqueue`].
    pub fn new(mode: Mode, mut init: impl FnMut(usize) -> T) -> Result<PerCpu<T>, PercpuError> {
        let wq = match mode {
            Mode::Local => Some(drain_wq()?),
            Mode::Qpw => None,
        };
        let slots = (0..nr_possible_cpus())
            .map(|c| Slot {
                lock: Mutex::new_at(Level::PerCpuSlot, init(c)),
            })
            .collect();
        Ok(PerCpu {
            inner: Arc::new(Inner {
                slots,
                queued: AtomicU64::new(0),
                on_caller: AtomicU64::new(0),
            }),
            mode,
            wq,
        })
    }

    /// As [`PerCpu::new`] with the process-wide mode ([`Mode::from_env`]): a bad
    /// `CMWQ_QPW` is an error naming the variable and its value.
    pub fn new_default(init: impl FnMut(usize) -> T) -> Result<PerCpu<T>, PercpuError> {
        PerCpu::new(Mode::from_env()?, init)
    }

    /// The drain mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The number of slots (possible CPUs).
    pub fn nr_slots(&self) -> usize {
        self.inner.slots.len()
    }

    /// Runs `f` on the slot of the CPU the caller runs on (the fast path).
    ///
    /// The slot's lock is held while `f` runs, so `f` must be short and must not
    /// call into this `PerCpu` again. If the thread migrates after picking the
    /// slot, `f` still runs on that slot, correctly, just not locally.
    #[inline]
    pub fn with_local<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let slots = &self.inner.slots;
        let cpu = sched::current_cpu() % slots.len();
        f(&mut slots[cpu].lock())
    }

    /// Runs `f` on `cpu`'s slot, under its lock, on the caller, whatever the
    /// mode: for reads such as summing counters (`percpu_counter_sum`). Use
    /// [`PerCpu::drain_on`] for the drain whose place the mode decides.
    pub fn with_cpu<R>(&self, cpu: usize, f: impl FnOnce(&mut T) -> R) -> Result<R, PercpuError> {
        let slot = self.slot(cpu)?;
        Ok(f(&mut slot.lock()))
    }

    /// Drains `cpu`'s slot with `f` and returns what `f` returned. `Local`: `f`
    /// runs as a work item on `cpu`'s bound pool, and the call waits for it;
    /// `Qpw`: `f` runs here, under the slot's lock. Either way the slot is
    /// locked while `f` runs: `f` must not call into this `PerCpu` again
    /// (a `drain_all` from `f` waits for the slot `f` holds, forever).
    pub fn drain_on<R, F>(&self, cpu: usize, f: F) -> Result<R, PercpuError>
    where
        R: Send + 'static,
        F: FnOnce(&mut T) -> R + Send + 'static,
    {
        let slot = self.slot(cpu)?;
        let Some(wq) = &self.wq else {
            return Ok(self.on_caller(slot, f));
        };
        match self.queue_drain(wq, cpu, f) {
            Ok((work, mailbox)) => {
                work.flush();
                Self::collect(cpu, &mailbox)
            }
            Err(f) => Ok(self.on_caller(slot, f)),
        }
    }

    /// Drains every slot with `f(cpu, slot)` and returns the results in CPU
    /// order. `Local`: one work item per CPU, all queued, then all flushed, so
    /// the CPUs drain in parallel (`schedule_on_each_cpu`); `Qpw`: the caller
    /// drains them one after the other, each under its lock. As with
    /// [`drain_on`](Self::drain_on), `f` must not call into this `PerCpu`.
    pub fn drain_all<R, F>(&self, f: F) -> Result<Vec<R>, PercpuError>
    where
        R: Send + 'static,
        F: Fn(usize, &mut T) -> R + Send + Sync + 'static,
    {
        let n = self.nr_slots();
        let Some(wq) = &self.wq else {
            return Ok((0..n)
                .map(|c| self.on_caller(&self.inner.slots[c], |s| f(c, s)))
                .collect());
        };
        let f = Arc::new(f);
        // Queue everywhere first, then wait: the drains overlap.
        let mut pending = Vec::with_capacity(n);
        for c in 0..n {
            let g = f.clone();
            match self.queue_drain(wq, c, move |s: &mut T| g(c, s)) {
                Ok((work, mailbox)) => pending.push(Err((work, mailbox))),
                Err(g) => pending.push(Ok(self.on_caller(&self.inner.slots[c], g))),
            }
        }
        pending
            .into_iter()
            .enumerate()
            .map(|(c, p)| match p {
                Ok(r) => Ok(r),
                Err((work, mailbox)) => {
                    work.flush();
                    Self::collect(c, &mailbox)
                }
            })
            .collect()
    }

    /// How the drains ran so far.
    pub fn stats(&self) -> DrainStats {
        DrainStats {
            queued: self.inner.queued.load(Ordering::Relaxed),
            on_caller: self.inner.on_caller.load(Ordering::Relaxed),
        }
    }

    fn slot(&self, cpu: usize) -> Result<&Slot<T>, PercpuError> {
        self.inner.slots.get(cpu).ok_or(PercpuError::NoSuchCpu {
            cpu,
            nr_slots: self.inner.slots.len(),
        })
    }

    fn on_caller<R>(&self, slot: &Slot<T>, f: impl FnOnce(&mut T) -> R) -> R {
        self.inner.on_caller.fetch_add(1, Ordering::Relaxed);
        f(&mut slot.lock())
    }

    /// Queues `f` on `cpu`'s bound pool; gives `f` back if that CPU has no pool
    /// here (the caller then drains it in place).
    #[allow(clippy::type_complexity)]
    fn queue_drain<R, F>(
        &self,
        wq: &Workqueue,
        cpu: usize,
        f: F,
    ) -> Result<(Work, Mailbox<F, R>), F>
    where
        R: Send + 'static,
        F: FnOnce(&mut T) -> R + Send + 'static,
    {
        let mailbox: Mailbox<F, R> = Arc::new(Mutex::new_at(Level::PerCpuMailbox, (Some(f), None)));
        let (inner, mb) = (self.inner.clone(), mailbox.clone());
        let work = Work::new(move || {
            let mut m = mb.lock();
            if let Some(f) = m.0.take() {
                let r = f(&mut inner.slots[cpu].lock());
                m.1 = Some(r);
            }
        });
        match wq.queue_on(cpu, &work) {
            Ok(true) => {
                self.inner.queued.fetch_add(1, Ordering::Relaxed);
                Ok((work, mailbox))
            }
            // No pool for that CPU (outside our affinity or offline), or the
            // queue refused: nobody of ours runs there, drain in place.
            Ok(false) | Err(_) => {
                let mut m = mailbox.lock();
                Err(m.0.take().expect("the work item never ran"))
            }
        }
    }

    fn collect<F, R>(cpu: usize, mailbox: &Mailbox<F, R>) -> Result<R, PercpuError> {
        let mut m = mailbox.lock();
        m.1.take().ok_or(PercpuError::DrainPanicked { cpu })
    }
}
