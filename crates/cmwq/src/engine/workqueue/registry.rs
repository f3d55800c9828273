//! The process's live workqueues (`R registry`), the views lent to the
//! control endpoint and snapshots (`handles`/`borrows`, a Dekker pair argued
//! at `borrow_of`), the walk that re-cuts every queue's pods when the usable
//! CPUs change, and the system workqueues (`system_wq` and friends).

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::engine::pool::{self};
use crate::sched;
use crate::sync::{Level, Mutex};

use super::{Workqueue, WorkqueueBuilder, WqInner};

/// R registry: the live workqueues, in creation order.
static REGISTRY: Mutex<Vec<std::sync::Weak<WqInner>>> = Mutex::new_at(Level::RRegistry, Vec::new());

pub(super) fn register(wq: &Arc<WqInner>) {
    let mut r = REGISTRY.lock();
    r.retain(|w| w.strong_count() > 0);
    r.push(Arc::downgrade(wq));
}

pub(super) fn unregister(wq: &Arc<WqInner>) {
    let mut r = REGISTRY.lock();
    r.retain(|w| w.upgrade().is_some_and(|x| !Arc::ptr_eq(&x, wq)));
}

/// Names of the live workqueues of this process.
pub fn workqueue_names() -> Vec<String> {
    let r = REGISTRY.lock();
    r.iter()
        .filter_map(|w| w.upgrade())
        .map(|w| w.name.clone())
        .collect()
}

/// Live workqueues in creation order.
fn registered() -> Vec<Arc<WqInner>> {
    let r = REGISTRY.lock();
    r.iter().filter_map(|w| w.upgrade()).collect()
}

/// The name of the workqueue whose item the calling worker runs.
pub(crate) fn current_wq_name() -> Option<String> {
    let addr = pool::current_wq_addr();
    registered()
        .into_iter()
        .find(|w| Arc::as_ptr(w) as usize == addr)
        .map(|w| w.name.clone())
}

/// The usable CPUs changed (`pool/hotplug.rs`): every live unbound
/// workqueue's pods are cut again from the CPUs usable now. Runs on a
/// thread of its own, with no lock held; each queue takes its own locks in
/// turn, as a `set_cpumask` would. A queue that could not follow (no thread
/// or pool for a new pod) keeps its pods and says so on stderr.
pub(crate) fn update_all_pods() {
    for wq in registered().into_iter().filter_map(borrow_of) {
        if let Err(e) = wq.inner.update_pods() {
            eprintln!(
                "cmwq: the pods of workqueue {:?} could not follow the usable CPUs {}: {e}; \
                 it keeps its pods until the CPUs change again",
                wq.inner.name,
                crate::topology::format_cpulist(&pool::usable_cpus())
            );
        }
    }
}

/// The per-workqueue part of [`crate::snapshot()`].
pub(crate) fn workqueue_snaps() -> Vec<crate::snapshot::WorkqueueSnap> {
    registered()
        .into_iter()
        .filter_map(borrow_of)
        .map(|wq| wq.snap())
        .collect()
}

/// Handles to the live workqueues named `name` (for the control endpoint's knobs).
#[cfg(feature = "control")]
pub(crate) fn find_by_name(name: &str) -> Vec<Workqueue> {
    registered()
        .into_iter()
        .filter(|w| w.name == name)
        .filter_map(borrow_of)
        .collect()
}

/// A borrowed view of a workqueue for the control endpoint and snapshots,
/// unless its last handle is gone (it is being destroyed).
///
/// The view is not a handle: the owner's last drop still destroys the queue
/// itself, after waiting for views to be returned (`wait_borrows`); the
/// pair that makes one of the two see the other is `holders.rs`.
fn borrow_of(inner: Arc<WqInner>) -> Option<Workqueue> {
    if !inner
        .holders
        .try_borrow(|| inner.destroyed.load(Ordering::SeqCst))
    {
        return None;
    }
    Some(Workqueue {
        inner,
        borrowed: true,
    })
}

impl WqInner {
    /// Waits until no borrowed view (a snapshot or a control request in
    /// progress) holds this workqueue; then the last handle may destroy it.
    pub(super) fn wait_borrows(&self) {
        while self.holders.lent() {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

impl Workqueue {
    pub(super) fn snap(&self) -> crate::snapshot::WorkqueueSnap {
        let inner = &self.inner;
        let (mut cpu_pool, dfl_pool) = self.cpu_pools();
        if inner.ordered {
            // Every CPU's work goes to the one default pwq (as the kernel's
            // ordered queues point each CPU's pwq at it).
            let route = inner.pwqs().route_cpus.clone();
            for c in route {
                if let Some(slot) = cpu_pool.get_mut(c) {
                    *slot = dfl_pool;
                }
            }
        }
        let attrs = self.attrs();
        let kind = if inner.ordered {
            "ordered"
        } else if inner.unbound {
            "unbound"
        } else {
            "percpu"
        };
        let rescuer = inner.rescuer.as_ref().map(|r| {
            let tid = r.tid.load(Ordering::Relaxed);
            crate::snapshot::RescuerSnap {
                tid,
                cpus: if tid == 0 {
                    Vec::new()
                } else {
                    sched::affinity_of(tid).unwrap_or_default()
                },
            }
        });
        let (stats, latency) = self.stats_and_latency();
        let pwqs = inner
            .pwq_list()
            .iter()
            .map(|r| r.pool.pwq_snap(r.id))
            .collect();
        crate::snapshot::WorkqueueSnap {
            id: inner.id,
            name: inner.name.clone(),
            flags: inner.flags.bits(),
            kind: kind.into(),
            unbound: inner.unbound,
            mem_reclaim: inner.rescuer.is_some(),
            custom_topology: inner.ctx.custom,
            cpu_pool,
            dfl_pool,
            min_active: inner.min_active(attrs.max_active),
            attrs,
            node_nr_active: self.node_nr_active(),
            node_max_active: self.node_max_active(),
            latency,
            rescuer,
            pwqs,
            stats,
        }
    }
}

macro_rules! system_wq {
    ($(#[$m:meta])* $fn:ident, $name:literal, $b:expr) => {
        $(#[$m])*
        ///
        /// # Panics
        ///
        /// On first use, if its build fails: only the thread limit makes it
        /// fail (the watchdog cannot start). Build a queue of your own to get
        /// the error instead.
        pub fn $fn() -> &'static Workqueue {
            static WQ: OnceLock<Workqueue> = OnceLock::new();
            WQ.get_or_init(|| {
                let b: WorkqueueBuilder = $b(Workqueue::builder($name));
                b.build().expect("system workqueue")
            })
        }
    };
}

system_wq!(
    /// The kernel's `system_wq`: bound, normal priority.
    system, "events", |b| b
);
system_wq!(
    /// The kernel's `system_highpri_wq`: bound, high priority.
    system_highpri, "events_highpri", |b: WorkqueueBuilder| b.highpri()
);
system_wq!(
    /// The kernel's `system_long_wq`: bound, for items that run long.
    system_long, "events_long", |b| b
);
system_wq!(
    /// The kernel's `system_unbound_wq`: unbound, default scope.
    system_unbound, "events_unbound", |b: WorkqueueBuilder| b.unbound()
);
