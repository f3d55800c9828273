//! How a workqueue is made: [`WorkqueueBuilder`], its attributes as the
//! kernel's `alloc_workqueue` flags and sysfs attrs, and `build`, which checks
//! them, resolves the priority and the process's parameters, then builds the
//! first pwq table and starts the rescuer.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::engine::node::NodeActive;
use crate::error::Error;
use crate::priority::{self, PoolPrio, Priority};
use crate::sync::{Condvar, Level, Mutex};
use crate::topology::{Scope, Topology};
use crate::trace;
use crate::types::{DFL_ACTIVE, MAX_ACTIVE, UnboundConcurrency, WakeMode, WqAttrs, WqFlags};

use super::panic::PanicHandler;
use super::registry::register;
use super::rescuer::Rescuer;
use super::table::{OldPwqs, PwqMap, Pwqs};
use super::{Workqueue, WqCtx, WqInner, WqStats, system_topology};

/// Builds a [`Workqueue`], in the kernel's terms (`alloc_workqueue` and its attrs).
#[derive(Clone, Debug)]
pub struct WorkqueueBuilder {
    name: String,
    flags: WqFlags,
    max_active: Option<usize>,
    ordered: bool,
    scope: Option<Scope>,
    strict: bool,
    cpumask: Option<Vec<usize>>,
    wake: WakeMode,
    topology: Option<Arc<Topology>>,
    cache_shard_size: Option<usize>,
    concurrency: UnboundConcurrency,
    priority: Priority,
    fallback: bool,
    nice: Option<i32>,
    panic_handler: Option<PanicHandler>,
    /// `max_queued` (`bounded.rs`).
    pub(crate) max_queued: Option<usize>,
    latency: Option<bool>,
}

/// A: source of [`WqInner::id`]. `Relaxed`: only uniqueness matters.
static NEXT_WQ_ID: AtomicU64 = AtomicU64::new(1);

impl Workqueue {
    /// Starts building a workqueue named `name` (bound, `max_active` default).
    pub fn builder(name: &str) -> WorkqueueBuilder {
        WorkqueueBuilder {
            name: name.to_string(),
            flags: WqFlags::NONE,
            max_active: None,
            ordered: false,
            scope: None,
            strict: false,
            cpumask: None,
            wake: WakeMode::Deferred,
            topology: None,
            cache_shard_size: None,
            concurrency: UnboundConcurrency::PerCpu,
            priority: Priority::Normal,
            fallback: false,
            nice: None,
            panic_handler: None,
            max_queued: None,
            latency: None,
        }
    }
}

impl WorkqueueBuilder {
    /// Sets flags (ORs them in).
    pub fn flags(mut self, f: WqFlags) -> Self {
        self.flags = self.flags | f;
        self
    }
    /// `WQ_UNBOUND`.
    pub fn unbound(self) -> Self {
        self.flags(WqFlags::UNBOUND)
    }
    /// `WQ_HIGHPRI`.
    pub fn highpri(self) -> Self {
        self.flags(WqFlags::HIGHPRI)
    }
    /// `WQ_CPU_INTENSIVE`.
    pub fn cpu_intensive(self) -> Self {
        self.flags(WqFlags::CPU_INTENSIVE)
    }
    /// `WQ_FREEZABLE`.
    pub fn freezable(self) -> Self {
        self.flags(WqFlags::FREEZABLE)
    }
    /// Keeps latency histograms (time from queued to started, and run
    /// time; see [`crate::hist`] and [`Workqueue::latency`]), or not. The
    /// default is `CMWQ_LATENCY_HIST` (`on` or `off`), off when unset: each
    /// item then costs three clock reads and two bucket increments.
    pub fn latency_histograms(mut self, on: bool) -> Self {
        self.latency = Some(on);
        self
    }
    /// `max_active`: 1..=[`MAX_ACTIVE`]; default [`DFL_ACTIVE`]. Items that
    /// wait for later items of their own queue can use up every slot and
    /// wait forever (see [`ordered`](Self::ordered)).
    ///
    /// ```
    /// use cmwq::{Error, Workqueue};
    /// let wq = Workqueue::builder("max_active_doc").max_active(2).build().unwrap();
    /// assert_eq!(wq.max_active(), 2);
    /// let bad = Workqueue::builder("max_active_doc0").max_active(0).build();
    /// assert!(matches!(bad, Err(Error::InvalidMaxActive { value: 0, .. })));
    /// ```
    pub fn max_active(mut self, n: usize) -> Self {
        self.max_active = Some(n);
        self
    }
    /// An ordered workqueue (`alloc_ordered_workqueue`): unbound, one item at a
    /// time, in queueing order.
    ///
    /// An item that waits for a later item of its own ordered queue (a
    /// `join` of a job it spawned there, a `flush` of a `Work` it queued
    /// there) waits forever: the later item starts only after it ends. The
    /// kernel deadlocks the same way; the same holds for `max_active(n)` once
    /// `n` items wait so. Waits on the item itself and on its whole queue are
    /// refused with a panic instead.
    ///
    /// ```
    /// use cmwq::{Work, Workqueue};
    /// use std::sync::{Arc, Mutex};
    ///
    /// let wq = Workqueue::builder("ordered_doc").ordered().build().unwrap();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let items: Vec<Work> = (0..100)
    ///     .map(|i| {
    ///         let seen = seen.clone();
    ///         Work::new(move || seen.lock().unwrap().push(i))
    ///     })
    ///     .collect();
    /// for w in &items {
    ///     assert!(wq.queue(w));
    /// }
    /// wq.flush();
    /// assert_eq!(*seen.lock().unwrap(), (0..100).collect::<Vec<_>>());
    /// assert_eq!(wq.max_active(), 1);
    /// ```
    pub fn ordered(mut self) -> Self {
        self.ordered = true;
        self.flags = self.flags | WqFlags::UNBOUND;
        self
    }
    /// The affinity scope of an unbound queue (default `cache_shard`).
    ///
    /// ```
    /// use cmwq::{Work, Workqueue, topology::Scope};
    /// let wq = Workqueue::builder("scope_doc")
    ///     .unbound()
    ///     .affinity_scope(Scope::Cpu)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(wq.attrs().affinity_scope, Scope::Cpu);
    /// // One pod, and so one pool, per CPU the queue may use.
    /// assert!(wq.nr_pwqs() >= 1);
    /// let w = Work::new(|| {});
    /// assert!(wq.queue(&w));
    /// w.flush();
    /// ```
    pub fn affinity_scope(mut self, s: Scope) -> Self {
        self.scope = Some(s);
        self
    }
    /// Bind workers to their pod (`affinity_strict`).
    pub fn affinity_strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
    /// CPUs the unbound queue may use (topology CPU ids).
    pub fn cpumask(mut self, cpus: &[usize]) -> Self {
        self.cpumask = Some(cpus.to_vec());
        self
    }
    /// When a queueing thread wakes the worker (default: after unlocking).
    pub fn wake_mode(mut self, w: WakeMode) -> Self {
        self.wake = w;
        self
    }
    /// Cut pods from this topology instead of the machine's. A topology larger
    /// than the machine is folded onto the real CPUs (CPU `i` runs on online CPU
    /// `i mod n`), so a Grace or EPYC layout's pools can be exercised anywhere.
    pub fn topology(mut self, t: Arc<Topology>) -> Self {
        self.topology = Some(t);
        self
    }
    /// How unbound pools limit running workers (default [`UnboundConcurrency::PerCpu`]).
    pub fn unbound_concurrency(mut self, c: UnboundConcurrency) -> Self {
        self.concurrency = c;
        self
    }
    /// The shard size of the `cache_shard` scope (default 8; 0 behaves as 1).
    pub fn cache_shard_size(mut self, n: usize) -> Self {
        self.cache_shard_size = Some(n);
        self
    }

    /// `WQ_MEM_RECLAIM`: the workqueue gets a rescuer thread that runs its items
    /// when its pools cannot start workers.
    ///
    /// ```
    /// let wq = cmwq::Workqueue::builder("reclaim_doc").mem_reclaim().build().unwrap();
    /// // The rescuer exists before it is needed: `build` waits for its thread id.
    /// assert!(wq.rescuer_tid().is_some_and(|tid| tid > 0));
    /// let plain = cmwq::Workqueue::builder("reclaim_doc_plain").build().unwrap();
    /// assert_eq!(plain.rescuer_tid(), None);
    /// ```
    pub fn mem_reclaim(self) -> Self {
        self.flags(WqFlags::MEM_RECLAIM)
    }
    /// The workers' priority (default [`Priority::Normal`]; `HIGHPRI` is `High`).
    /// See [`priority_fallback`](Self::priority_fallback) for running where it
    /// is not allowed.
    ///
    /// ```
    /// let wq = cmwq::Workqueue::builder("prio_doc").build().unwrap();
    /// assert_eq!(wq.stats().priority, "nice 0");
    /// assert_eq!(wq.stats().priority_fallback, None);
    /// ```
    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }
    /// When the priority is not allowed (no `CAP_SYS_NICE`, `RLIMIT_RTPRIO` 0),
    /// run at the best allowed one and say so in [`Workqueue::stats`] instead of
    /// failing (default: fail with [`Error::PriorityDenied`]).
    ///
    /// ```
    /// use cmwq::{Priority, Work, Workqueue};
    /// // Builds with or without CAP_SYS_NICE.
    /// let wq = Workqueue::builder("fallback_doc")
    ///     .priority(Priority::High)
    ///     .priority_fallback(true)
    ///     .build()
    ///     .unwrap();
    /// let st = wq.stats();
    /// match &st.priority_fallback {
    ///     // Granted: the workers run above nice 0 ("nice -20", or "fifo 1").
    ///     None => assert_ne!(st.priority, "nice 0"),
    ///     // Denied: the note says what was asked for and what is used instead.
    ///     Some(note) => assert!(note.contains(&st.priority), "{note}"),
    /// }
    /// let w = Work::new(|| {});
    /// assert!(wq.queue(&w));
    /// w.flush();
    /// ```
    pub fn priority_fallback(mut self, yes: bool) -> Self {
        self.fallback = yes;
        self
    }
    /// Hands the payload of every panic of this queue's work items to
    /// `handler` (as rayon's `ThreadPoolBuilder::panic_handler`), instead of
    /// the process-wide [`set_panic_hook`](crate::set_panic_hook). The worker survives either way; a
    /// handler that panics itself is caught too ([`panic_reports_failed`](crate::panic_reports_failed)).
    /// Jobs from [`Workqueue::spawn`] hand their panics to their handle.
    ///
    /// The handler runs on the worker, as the end of the item that panicked:
    /// what the item may not wait for, the handler may not either. A
    /// [`flush`](Workqueue::flush), [`drain`](Workqueue::drain) or
    /// [`freeze`](Workqueue::freeze) of this queue, or a `flush` or
    /// `cancel_sync` of the item, panics (the panic is caught and counted,
    /// and the message goes to stderr); dropping the queue's last handle
    /// destroys it on another thread, as from an item.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let seen = Arc::new(Mutex::new(None));
    /// let s = seen.clone();
    /// let wq = cmwq::Workqueue::builder("ph_doc")
    ///     .panic_handler(move |p| *s.lock().unwrap() = p.downcast_ref::<&str>().copied())
    ///     .build()
    ///     .unwrap();
    /// let w = cmwq::Work::new(|| panic!("boom"));
    /// wq.queue(&w);
    /// w.flush();
    /// assert_eq!(*seen.lock().unwrap(), Some("boom"));
    /// ```
    pub fn panic_handler(
        mut self,
        handler: impl Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    ) -> Self {
        self.panic_handler = Some(PanicHandler(Arc::new(handler)));
        self
    }

    /// The nice value of an unbound queue's workers (−20..=19, default 0; the
    /// kernel's `nice` attribute).
    pub fn nice(mut self, n: i32) -> Self {
        self.nice = Some(n);
        self
    }

    /// Creates the workqueue. Besides a refused attribute, an error if a
    /// thread it needs (the process's watchdog, a `MEM_RECLAIM` queue's
    /// rescuer) cannot start ([`Error::Spawn`], naming the errno and the
    /// limit to raise); a later `build` tries again. A worker that cannot be
    /// started is no error: its pool retries with a backoff (see the README).
    pub fn build(self) -> Result<Workqueue, Error> {
        let max_active = self.checked_max_active()?;
        let unbound = self.flags.contains(WqFlags::UNBOUND);
        self.refuse_unbound_attrs(unbound)?;
        if self.cache_shard_size == Some(0) {
            return Err(Error::InvalidCacheShardSize(0));
        }
        if self.max_queued == Some(0) {
            return Err(Error::InvalidMaxQueued(0));
        }
        let params = crate::engine::params_for_build()?;
        if params.control {
            (crate::engine::hooks().control_autostart)();
        }
        let nice = self.nice.unwrap_or(0);
        if !(-20..=19).contains(&nice) {
            return Err(Error::InvalidNice(nice));
        }
        let want = if self.flags.contains(WqFlags::HIGHPRI) && self.priority == Priority::Normal {
            Priority::High
        } else {
            self.priority
        };
        let (prio, prio_note) = priority::resolve(priority::requested(want, nice)?, self.fallback)?;
        trace::priority_fallback(&self.name, prio_note.as_deref());
        let topo = self
            .topology
            .clone()
            .unwrap_or_else(|| system_topology().clone());
        let cpumask = match (&self.cpumask, unbound, &params.unbound_cpus) {
            (Some(m), _, _) => m.clone(),
            (None, true, Some(u)) => u.clone(),
            (None, _, _) => topo.online().to_vec(),
        };
        let attrs = WqAttrs {
            affinity_scope: self.scope.unwrap_or(params.affinity_scope),
            affinity_strict: self.strict,
            cpumask,
            nice: prio.nice(),
            max_active,
            cache_shard_size: self.cache_shard_size.unwrap_or(params.cache_shard_size),
        };
        let latency = self.latency.unwrap_or(params.latency_hist);
        let inner = self.new_inner(topo, &attrs, (prio, prio_note), latency);
        let tab = inner.build_table(&attrs, prio, 0, false)?;
        inner.set_node_budgets(&attrs, &tab);
        let forked = crate::engine::threads::forked();
        if inner.ordered && !forked {
            let dfl = tab.dfl.expect("unbound tables have a default pwq");
            inner.chain.lock().push_back(dfl);
        }
        inner.map.publish(&tab);
        *inner.cur.lock() = Arc::new(tab);
        if let Err(e) = inner.start_rescuer() {
            inner.destroy();
            return Err(e);
        }
        // A forked child's queue is inert and not listed: the registry's
        // lock may be held for ever there (see `build_table`).
        if !forked {
            register(&inner);
        }
        Ok(Workqueue {
            inner,
            borrowed: false,
        })
    }

    /// The `max_active` asked for, or the default (1 for an ordered queue).
    fn checked_max_active(&self) -> Result<usize, Error> {
        match self.max_active {
            None => {
                if self.ordered {
                    Ok(1)
                } else {
                    Ok(DFL_ACTIVE)
                }
            }
            Some(n) if n == 0 || n > MAX_ACTIVE => Err(Error::InvalidMaxActive {
                value: n,
                max: MAX_ACTIVE,
            }),
            Some(n) if self.ordered && n != 1 => Err(Error::OrderedMaxActive(n)),
            Some(n) => Ok(n),
        }
    }

    /// The attributes of unbound queues, refused on a bound one as the live
    /// setters refuse them (rather than silently ignored).
    fn refuse_unbound_attrs(&self, unbound: bool) -> Result<(), Error> {
        if unbound {
            return Ok(());
        }
        let set = [
            ("cpumask", self.cpumask.is_some()),
            ("nice", self.nice.is_some()),
            ("affinity_scope", self.scope.is_some()),
            ("affinity_strict", self.strict),
            ("cache_shard_size", self.cache_shard_size.is_some()),
        ];
        match set.iter().find(|(_, on)| *on) {
            Some((attr, _)) => Err(Error::NotUnbound {
                name: self.name.clone(),
                attr,
            }),
            None => Ok(()),
        }
    }

    /// The shared state of the queue being built, with no pwq yet.
    fn new_inner(
        &self,
        topo: Arc<Topology>,
        attrs: &WqAttrs,
        prio: (PoolPrio, Option<String>),
        latency: bool,
    ) -> Arc<WqInner> {
        let max_active = attrs.max_active;
        let nr_nodes = topo.nr_nodes().max(1);
        let map_len = topo
            .nr_cpu_ids()
            .max(system_topology().online().iter().max().map_or(0, |m| m + 1));
        let ctx = WqCtx {
            topo,
            custom: self.topology.is_some(),
            wake: self.wake,
            concurrency: self.concurrency,
            fallback: self.fallback,
        };
        let rescuer = self.flags.contains(WqFlags::MEM_RECLAIM).then(|| Rescuer {
            mayday: Mutex::new_at(Level::WqMayday, VecDeque::new()),
            thread: OnceLock::new(),
            join: Mutex::new_at(Level::WqJoin, None),
            stop: AtomicBool::new(false),
            tid: std::sync::atomic::AtomicI32::new(0),
        });
        let nodes = (0..nr_nodes)
            .map(|_| NodeActive::new(max_active, map_len))
            .collect();
        Arc::new(WqInner {
            name: self.name.clone(),
            panic_handler: self.panic_handler.clone(),
            flags: self.flags,
            unbound: self.flags.contains(WqFlags::UNBOUND),
            ordered: self.ordered,
            cpu_intensive: self.flags.contains(WqFlags::CPU_INTENSIVE),
            latency,
            frozen: AtomicBool::new(false),
            draining: AtomicU32::new(0),
            destroyed: AtomicBool::new(false),
            stats: WqStats::default(),
            max_active: AtomicUsize::new(max_active),
            nodes,
            node_cpus: Mutex::new_at(Level::WqNodeCpus, vec![0; nr_nodes]),
            cur: Mutex::new_at(Level::WqCur, Arc::new(Pwqs::empty())),
            map: PwqMap::new(map_len),
            old: Mutex::new_at(
                Level::WqOld,
                OldPwqs {
                    dead_lat: crate::hist::PwqLatency::new(latency),
                    ..OldPwqs::default()
                },
            ),
            chain: Mutex::new_at(Level::WqChain, VecDeque::new()),
            ctx,
            attrs: Mutex::new_at(Level::WqAttrs, attrs.clone()),
            prio: Mutex::new_at(Level::WqPrio, prio),
            rescuer,
            flush_lock: Mutex::new_at(Level::WqFlush, 0),
            flush_cv: Condvar::new(),
            flushers: AtomicU32::new(0),
            rr: AtomicUsize::new(0),
            holders: super::holders::Holders::new(),
            id: NEXT_WQ_ID.fetch_add(1, Ordering::Relaxed),
            bound: self
                .max_queued
                .map(|n| Box::new(super::super::bounded::Bound::new(n))),
            min_active: AtomicUsize::new(0),
        })
    }
}
