//! CPU hotplug in user space: the CPUs the process may use are an input that
//! changes at run time.
//!
//! The kernel hears of a CPU going away or coming back through its hotplug
//! callbacks (`workqueue_offline_cpu`, `workqueue_online_cpu`). A process sees
//! the same thing as a change of the CPUs it may run on: an affinity change
//! of its threads (`taskset -a -p`), a change of its cgroup cpuset (v1
//! `cpuset.effective_cpus`, v2 `cpuset.cpus.effective`), a CPU taken offline
//! (the kernel drops it from every thread's affinity). The *usable* CPUs are
//! the watchdog thread's own affinity (a thread of ours that nothing pins)
//! intersected with the cpuset; they are re-read:
//!
//! - on every watchdog tick (one `sched_getaffinity`, no allocation beyond a
//!   128-byte mask), the cpuset files every [`CPUSET_EVERY`] ticks;
//! - at the next tick, whatever the count, when a worker could not be pinned
//!   to its CPU ([`pin_failed`]: `sched_setaffinity` said `EINVAL`).
//!
//! Nothing is read on the per-item path. When the set changes, [`apply`] does
//! what the kernel's callbacks do to the per-CPU (bound) pools:
//!
//! - a pool whose CPU left becomes *disassociated* (`POOL_DISASSOCIATED`):
//!   its workers are unbound (their affinity widened to the usable CPUs) and
//!   keep running its items elsewhere, and it is no longer concurrency
//!   managed (its cap is lifted, as the kernel's `WORKER_UNBOUND` takes every
//!   worker out of `nr_running`), so no item waits behind a worker that
//!   shares a CPU with the rest of the machine;
//! - a pool whose CPU came back is associated again: the cap returns and
//!   every worker is bound to that CPU alone (`rebind_workers`, counted in the
//!   pool's `rebinds`);
//! - every other pool's workers are pinned again to their CPU (an affinity
//!   change of all threads, or a v1 cpuset change, overwrote their pins).
//!
//! Bound pools exist for every online CPU of the machine, usable or not, so a
//! process started inside a small cpuset that is later widened finds its
//! pools there; one made for a CPU that is not usable starts disassociated.
//!
//! Unbound pods are recomputed (`wq_update_pod`): after the pools, every
//! live unbound workqueue whose cpumask's usable CPUs changed applies its
//! attrs again, cut from the CPUs usable now (`WqInner::update_pods`): a pod
//! keeps only its usable CPUs, a pod with none sends its CPUs to the
//! queue's default pwq, and with no usable CPU in the mask at all the
//! default pwq takes the whole mask. It is the live attrs change's
//! machinery: new items go to the new pwqs at once, the old pwqs finish what
//! they hold and die, an ordered queue's new pwq waits for the old ones.
//! That runs on a short-lived thread (`cmwq-pods`), not on the watchdog: a
//! re-apply takes `WQ attrs` (a lock a user's `set_cpumask` may hold for a
//! while) and may create pools and start their first workers, once per
//! queue, and the watchdog must keep driving concurrency management and
//! rescuers meanwhile, for the old pools and the new. One such thread at a
//! time; a change seen while it runs makes it go round once more, and if it
//! cannot start (the thread limit) the next tick tries again. Unbound
//! workers whose lane CPU is not usable (a queue whose whole mask left, or
//! a retired pwq's) run on any usable CPU, and are pinned back to their CPU
//! where it is usable.
//!
//! Locking: `R usable` (the usable set) is taken before a pool lock by
//! [`apply`] and after `R bound` by [`super::bound_pool`], so a pool made
//! while the set changes is made with the new set or seen by `apply`. Pins
//! are set under the pool lock here, and a new worker pins itself under the
//! pool lock too, so a pin never lands after the flag it was read from
//! changed (a few syscalls under the lock, only when the set changes or a
//! worker starts).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{MAX_POOLS, NEXT_POOL, Pool, PoolInner, WState, get_pool, unlock_wake};
use crate::sched;
use crate::sync::{Level, Mutex};

/// The cpuset files are read every this many ticks (100 ms); the affinity on
/// every tick.
pub(crate) const CPUSET_EVERY: u64 = 10;

/// R usable: the CPUs the process may use as last read (`None` until the
/// first read: the CPUs the process started with). Held across [`apply`].
static USABLE: Mutex<Option<Vec<usize>>> = Mutex::new_at(Level::RUsable, None);
/// R usable_now (a leaf): a copy of `USABLE` for readers under a pool lock
/// (a worker pinning itself), written under `R usable`.
static USABLE_NOW: Mutex<Option<Vec<usize>>> = Mutex::new_at(Level::RUsableNow, None);
/// A: a worker's pin failed; re-read at the next tick. `Relaxed`: a hint.
static RECHECK: AtomicBool = AtomicBool::new(false);
/// A: times the usable set was found changed (`Relaxed`: a counter).
static CHANGES: AtomicU64 = AtomicU64::new(0);
/// A: changes the unbound pods must follow; the pods thread has followed
/// all of them when it reads the same value before and after a round.
/// `SeqCst`: pairs with `PODS_RUNNING` (the watchdog bumps this, then
/// claims the thread; the thread drops its claim, then reads this).
static PODS_WANTED: AtomicU64 = AtomicU64::new(0);
/// A: the pods thread is running (or being started). `SeqCst`: see
/// `PODS_WANTED`.
static PODS_RUNNING: AtomicBool = AtomicBool::new(false);
/// A: the pods thread could not start; the next tick tries again.
/// `Relaxed`: a hint read on the watchdog thread that sets it.
static PODS_RETRY: AtomicBool = AtomicBool::new(false);

/// The CPUs the process may use now, as last read (takes only a leaf lock:
/// callable under a pool lock).
pub(crate) fn usable() -> Vec<usize> {
    USABLE_NOW
        .lock()
        .get_or_insert_with(|| super::WqInner::machine_online().to_vec())
        .clone()
}

/// The usable set under `R usable`, initialized on first use.
fn usable_locked(u: &mut Option<Vec<usize>>) -> Vec<usize> {
    u.get_or_insert_with(|| super::WqInner::machine_online().to_vec())
        .clone()
}

/// Holds `R usable` while a bound pool is made (see the module docs), and
/// returns the set to make it with.
pub(crate) fn hold() -> (
    crate::sync::MutexGuard<'static, Option<Vec<usize>>>,
    Vec<usize>,
) {
    let mut u = USABLE.lock();
    let v = usable_locked(&mut u);
    (u, v)
}

/// How many times the usable CPUs were seen to change.
pub fn cpu_changes() -> u64 {
    CHANGES.load(Ordering::Relaxed)
}

/// A worker could not be pinned (`EINVAL`: the CPU is not in the thread's
/// cpuset any more): look again at the next tick.
pub(crate) fn pin_failed(e: &std::io::Error) {
    if e.raw_os_error() == Some(libc::EINVAL) {
        RECHECK.store(true, Ordering::Relaxed);
        super::watchdog::poke();
    }
}

/// Called by the watchdog thread when it starts: it takes the process's
/// affinity (that of the main thread), not that of whichever thread made the
/// first pool, since its own affinity is what [`check`] reads.
pub(crate) fn watchdog_started() {
    if let Ok(cpus) = crate::topology::sched_affinity() {
        let _ = sched::set_affinity(&cpus);
    }
}

/// The watchdog's tick `n`: re-reads the usable CPUs and applies a change.
pub(crate) fn check(n: u64) {
    let forced = RECHECK.swap(false, Ordering::Relaxed);
    let Ok(mut now) = crate::topology::thread_affinity() else {
        return;
    };
    if forced || n.is_multiple_of(CPUSET_EVERY) {
        if let Some(set) = cpuset_cpus() {
            let inter: Vec<usize> = now.iter().copied().filter(|c| set.contains(c)).collect();
            if !inter.is_empty() {
                now = inter;
            }
        }
    } else if let Some(last) = LAST_CPUSET.lock().as_ref() {
        let inter: Vec<usize> = now.iter().copied().filter(|c| last.contains(c)).collect();
        if !inter.is_empty() {
            now = inter;
        }
    }
    let mut u = USABLE.lock();
    if usable_locked(&mut u) == now {
        drop(u);
        if PODS_RETRY.swap(false, Ordering::Relaxed) {
            start_pods_thread();
        }
        return;
    }
    CHANGES.fetch_add(1, Ordering::Relaxed);
    crate::trace::cpus_changed(&now);
    *u = Some(now.clone());
    *USABLE_NOW.lock() = Some(now.clone());
    apply(&now);
    drop(u);
    // After `R usable` is dropped (a re-apply takes `WQ attrs`, which comes
    // before it) and after `USABLE_NOW` holds the new set, which the
    // re-apply reads.
    PODS_WANTED.fetch_add(1, Ordering::SeqCst);
    start_pods_thread();
}

/// Starts the thread that recomputes the unbound pods, unless it runs (it
/// then sees `PODS_WANTED` moved and goes round again).
fn start_pods_thread() {
    if PODS_RUNNING.swap(true, Ordering::SeqCst) {
        return;
    }
    if super::super::threads::start("cmwq-pods".into(), || {
        super::super::service::run("cmwq-pods", pods_thread)
    })
    .is_err()
    {
        PODS_RUNNING.store(false, Ordering::SeqCst);
        PODS_RETRY.store(true, Ordering::Relaxed);
    }
}

/// Re-applies every unbound workqueue's attrs until no change came in
/// during a round; then exits. A panic starts the round over (it runs under
/// `service::run`, still holding `PODS_RUNNING`).
fn pods_thread() {
    loop {
        let seen = PODS_WANTED.load(Ordering::SeqCst);
        super::super::service::injected(
            super::super::service::AT_PODS_ROUND,
            "the pods thread's round panics",
        );
        super::super::workqueue::update_all_pods();
        PODS_RUNNING.store(false, Ordering::SeqCst);
        // A change counted after `seen` whose starter found us still
        // running: take the claim back and go round again (unless a new
        // thread took it).
        if PODS_WANTED.load(Ordering::SeqCst) == seen || PODS_RUNNING.swap(true, Ordering::SeqCst) {
            return;
        }
    }
}

/// R cpuset: the cpuset as last read, intersected on the ticks between reads.
static LAST_CPUSET: Mutex<Option<Vec<usize>>> = Mutex::new_at(Level::RLastCpuset, None);

/// The cpuset of the cgroup the process is in now (it may be moved; `None`:
/// no cpuset controller, or unreadable), read by `crate::cpuset`, the reader
/// `cmwq topology` uses too.
fn cpuset_cpus() -> Option<Vec<usize>> {
    let v = crate::cpuset::read_cpuset(std::path::Path::new("/"))
        .ok()
        .flatten();
    *LAST_CPUSET.lock() = v.clone();
    v
}

/// Every pool made so far.
fn pools() -> impl Iterator<Item = &'static Pool> {
    let n = (NEXT_POOL.load(Ordering::Relaxed) as usize).min(MAX_POOLS);
    (0..n as u32).filter_map(get_pool)
}

/// Applies a new usable set to every pool (under `R usable`).
fn apply(usable: &[usize]) {
    for pool in pools() {
        let mut g = pool.lock();
        let wake = match pool.attrs.cpu {
            Some(cpu) => pool.set_associated(&mut g, usable.contains(&cpu), usable),
            None => {
                pool.repin_unbound(&g, usable);
                None
            }
        };
        unlock_wake(pool, g, wake);
    }
}

impl Pool {
    /// A new bound pool (made under [`hold`]): disassociated from the start
    /// if its CPU is not in `usable`.
    pub(super) fn init_association(&self, usable: &[usize]) {
        if let Some(cpu) = self.attrs.cpu
            && !usable.contains(&cpu)
        {
            let mut g = self.lock();
            g.disassociated = true;
            g.cap = usize::MAX;
        }
    }

    /// Where worker threads of this pool belong now: its CPU (bound and
    /// associated), any usable CPU (disassociated), or lane CPU `lane_cpu`
    /// (any usable CPU while that one is not usable).
    pub(super) fn pin_target(&self, g: &PoolInner, lane_cpu: usize) -> Vec<usize> {
        match self.attrs.cpu {
            Some(_) if g.disassociated => usable(),
            Some(cpu) => vec![cpu],
            None => {
                let u = usable();
                if u.contains(&lane_cpu) {
                    vec![lane_cpu]
                } else {
                    u
                }
            }
        }
    }

    /// Where a rescuer runs this pool's items: its CPU (any usable one while
    /// disassociated) for a bound pool, the usable CPUs of its pod otherwise.
    pub(super) fn rescuer_target(&self, g: &PoolInner) -> Vec<usize> {
        match self.attrs.cpu {
            Some(cpu) => self.pin_target(g, cpu),
            None => {
                let u = usable();
                let pod: Vec<usize> = self
                    .attrs
                    .cpus
                    .iter()
                    .copied()
                    .filter(|c| u.contains(c))
                    .collect();
                if pod.is_empty() { u } else { pod }
            }
        }
    }

    /// Pins worker thread `tid` (under the pool lock); a refusal asks for a
    /// fresh look at the usable CPUs.
    pub(super) fn pin(tid: i32, cpus: &[usize]) {
        if let Err(e) = sched::set_affinity_of(tid, cpus) {
            pin_failed(&e);
        }
    }

    /// The pool's own workers (not rescuers or guests), by thread id.
    fn worker_tids(g: &PoolInner) -> impl Iterator<Item = (i32, usize)> + '_ {
        g.workers
            .iter()
            .filter(|w| w.tid > 0 && w.state != WState::Exited && !w.state.borrowed())
            .map(|w| (w.tid, w.lane))
    }

    /// `workqueue_offline_cpu` / `workqueue_online_cpu` for one bound pool.
    fn set_associated(
        &'static self,
        g: &mut PoolInner,
        associated: bool,
        usable: &[usize],
    ) -> Option<super::Wake> {
        let cpu = self.attrs.cpu.expect("a bound pool");
        if associated {
            if g.disassociated {
                g.disassociated = false;
                g.cap = 1;
                g.rebinds += 1;
                crate::trace::pool_rebound(self.id, cpu);
            }
            for (tid, _) in Self::worker_tids(g) {
                Self::pin(tid, &[cpu]);
            }
            return None;
        }
        let newly = !g.disassociated;
        g.disassociated = true;
        g.cap = usize::MAX;
        for (tid, _) in Self::worker_tids(g) {
            Self::pin(tid, usable);
        }
        if newly {
            crate::trace::pool_disassociated(self.id, cpu);
        }
        // No longer managed: items that waited for the one running worker
        // get workers of their own.
        g.kick(0)
    }

    /// Unbound pools: each worker back on its lane's CPU where that is
    /// usable, on any usable CPU where it is not.
    fn repin_unbound(&self, g: &PoolInner, usable: &[usize]) {
        for (tid, lane) in Self::worker_tids(g) {
            let cpu = g.lanes[lane].cpu;
            if usable.contains(&cpu) {
                Self::pin(tid, &[cpu]);
            } else {
                Self::pin(tid, usable);
            }
        }
    }
}
