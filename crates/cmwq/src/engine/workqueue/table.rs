//! The pwq table: which pwq serves each CPU (`Pwqs`, one generation, and
//! `PwqMap`, the same as lock-free routing words for `queue`), how a
//! generation is built from the attributes (`build_table`, the kernel's
//! `apply_wqattrs_prepare`), and how an attrs change swaps it in and retires
//! the old one (`apply`, `apply_workqueue_attrs`; `update_pods`,
//! `wq_update_pod`). What an old generation leaves behind and why nothing
//! reaches a freed pwq is argued at [`OldPwqs`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::engine::pool::{self, NR_COLORS, PWQ_BITS, PoolAttrs, PwqId};
use crate::error::Error;
use crate::priority::{self, PoolPrio};
use crate::topology::Topology;
use crate::trace;
use crate::types::{MIN_ACTIVE, PwqStats, UnboundConcurrency, WakeMode, WqAttrs};

use super::{PwqRef, WqInner, system_topology};

/// One generation of a workqueue's pwqs; replaced whole by an attrs change.
/// Shared behind an `Arc` once built and never changed: every field is `I:`.
pub(super) struct Pwqs {
    /// I: per topology CPU id.
    pub(super) cpu: Vec<Option<PwqRef>>,
    /// I: the default pwq (unbound queues).
    pub(super) dfl: Option<PwqRef>,
    /// I: every pwq of the generation.
    pub(super) all: Vec<PwqRef>,
    /// I: topology CPU ids that route work (the online CPUs of the cpumask or machine).
    pub(super) route_cpus: Vec<usize>,
    /// I: the CPUs of the cpumask that were usable when the generation was
    /// built (topology ids; empty: none was, every CPU went to the default
    /// pwq). A change of the usable CPUs that leaves this as it is leaves
    /// the generation in place.
    pub(super) live: Vec<usize>,
    /// I: per real CPU: this workqueue's pwq in the per-CPU pool of that CPU and
    /// its NUMA node, when the CPU is a lane of one pod, or of pods sharing
    /// the per-CPU pools and the node (`Some(None)`: of several otherwise).
    pub(super) lane: Vec<Option<Option<(PwqRef, usize)>>>,
}

impl Pwqs {
    pub(super) fn empty() -> Pwqs {
        Pwqs {
            cpu: Vec::new(),
            dfl: None,
            all: Vec::new(),
            route_cpus: Vec::new(),
            live: Vec::new(),
            lane: Vec::new(),
        }
    }
}

/// The current generation's routing, readable without a lock or an atomic
/// read-modify-write: each CPU's pwq (and the default pwq) encoded in one
/// atomic word as `(pool id + 1) << 48 | slot << 24 | era`, 0 for
/// none (pool ids stay below 2^16, slots and eras below 2^24).
///
/// An attrs change stores the new words one by one, so a queuer may see the
/// old pwq of one CPU and the new pwq of another; either is correct. A
/// retired pwq is freed once its last item ends and its slot reused, so a
/// word read before a change may name a pwq that is gone: its era no
/// longer matches, `Pool::insert` refuses it as it refuses a dead pwq, and
/// the queuer reads again (and `insert` also checks that the pwq is this
/// workqueue's, so even a wrapped era puts the item only on a live
/// pwq of its own queue, never another's).
///
/// Every word is `A:` with `Release` stores (`publish`, under `WQ flush` for
/// an attrs change) and `Acquire` loads: a queuer that reads a word sees the
/// pool and pwq slot it names fully set up (`Pool::attach` wrote the slot
/// under the pool lock before `publish`).
pub(super) struct PwqMap {
    /// A: per topology CPU: its pwq.
    pub(super) cpu: Vec<AtomicU64>,
    /// A: per real CPU: the lane pwq of a pod pool (see `Pwqs::lane`), 0: none.
    pub(super) lane: Vec<AtomicU64>,
    /// A: the default pwq.
    pub(super) dfl: AtomicU64,
    /// A: topology CPUs that route work, for a queuer on a CPU outside the mask.
    pub(super) route: Vec<AtomicUsize>,
    /// A: how many of `route` are valid (shrunk before they change, grown after).
    pub(super) route_len: AtomicUsize,
}

impl PwqMap {
    pub(super) fn new(n: usize) -> PwqMap {
        PwqMap {
            cpu: (0..n).map(|_| AtomicU64::new(0)).collect(),
            lane: (0..n).map(|_| AtomicU64::new(0)).collect(),
            dfl: AtomicU64::new(0),
            route: (0..n).map(|_| AtomicUsize::new(0)).collect(),
            route_len: AtomicUsize::new(0),
        }
    }

    pub(super) fn encode(r: Option<PwqRef>) -> u64 {
        const { assert!(pool::MAX_POOLS < 1 << 16 && PWQ_BITS == 24) };
        r.map_or(0, |r| {
            ((r.pool.id as u64 + 1) << 48) | ((r.id.slot as u64) << 24) | r.id.era as u64
        })
    }

    #[inline]
    pub(super) fn decode(v: u64) -> Option<PwqRef> {
        let id = (v >> 48) as u32;
        let pool = pool::get_pool(id.checked_sub(1)?)?;
        let mask = (1u64 << PWQ_BITS) - 1;
        Some(PwqRef {
            pool,
            id: PwqId {
                slot: ((v >> PWQ_BITS) & mask) as u32,
                era: (v & mask) as u32,
            },
        })
    }

    /// Makes `tab` the generation queuers see.
    pub(super) fn publish(&self, tab: &Pwqs) {
        for (i, a) in self.cpu.iter().enumerate() {
            a.store(
                Self::encode(tab.cpu.get(i).copied().flatten()),
                Ordering::Release,
            );
        }
        for (i, a) in self.lane.iter().enumerate() {
            let r = tab.lane.get(i).copied().flatten().flatten();
            a.store(Self::encode(r.map(|(r, _)| r)), Ordering::Release);
        }
        // A bound queue has no default pwq: a CPU without one uses the first CPU's.
        let dfl = tab.dfl.or_else(|| tab.all.first().copied());
        self.dfl.store(Self::encode(dfl), Ordering::Release);
        let n = tab.route_cpus.len().min(self.route.len());
        self.route_len.store(
            n.min(self.route_len.load(Ordering::Acquire)),
            Ordering::Release,
        );
        for (a, &c) in self.route.iter().zip(&tab.route_cpus) {
            a.store(c, Ordering::Release);
        }
        self.route_len.store(n, Ordering::Release);
    }

    /// Whether `cpu` has a pwq of its own now.
    #[inline]
    pub(super) fn has(&self, cpu: usize) -> bool {
        self.cpu
            .get(cpu)
            .is_some_and(|a| a.load(Ordering::Acquire) != 0)
    }
}

/// What an attrs change leaves behind: the older generations' pwqs that
/// still hold items, and the counters of those that died and were freed.
/// One lock, since a pwq leaves the list and its counters join `dead_stats`
/// in one step, and a reader must count each pwq exactly once.
///
/// # Nothing reaches a freed pwq
///
/// A retired pwq dies when its last item ends (or at once if it has none);
/// its pool then asks the workqueue to free it ([`WqInner::reap`]), which,
/// under this lock, takes it off `retired`, adds its counters to
/// `dead_stats` and detaches it from its pool, which frees the slot for
/// reuse under a new era. What may still name it afterwards:
///
/// - items: none. Every item on a pool's lists or running counts in its
///   pwq's `nr_in_flight`, and a pwq dies only at zero; a dead pwq takes no
///   new item (`Pool::insert` refuses it).
/// - a queuer that read the routing words before the change, the ordered
///   chain, a flusher's or drainer's list, a snapshot: each holds a
///   [`PwqRef`] with the slot's era, and every pool call checks it
///   under the pool lock: a freed pwq reads as dead and empty (a flusher
///   has nothing to wait for, the chain drops it, a queuer reads again).
/// - a node's list of waiting pwqs and the rescuer's mayday list name a
///   slot only: the pool uses whatever holds that slot only if it is a live
///   pwq of the same workqueue (and, for the node, of the same node and not
///   plugged), so at worst a unit of the queue's own budget or its rescuer
///   serves another of its own pwqs, which is what either is for.
/// - the watchdog's tick and a worker's finished item's destructor (the
///   busy table still lists the item) may add to the counters of the slot:
///   at worst a few counts land on the slot's next pwq.
///
/// So a workqueue keeps only the retired pwqs that still hold items;
/// `destroy` frees the rest.
#[derive(Default)]
pub(super) struct OldPwqs {
    /// WQ old: pwqs of older generations that have not died yet (they hold
    /// items), so flush and stats still see them.
    pub(super) retired: Vec<PwqRef>,
    /// WQ old: the counters of the retired pwqs that died and were freed.
    pub(super) dead_stats: PwqStats,
    /// WQ old: their latency histograms (none if the queue keeps none).
    pub(super) dead_lat: crate::hist::PwqLatency,
}

/// What the pools of one unbound generation are made with (what
/// `build_table` hands the pods it builds).
struct PodSpec<'a> {
    attrs: &'a WqAttrs,
    prio: PoolPrio,
    color: u8,
    wake: WakeMode,
    /// `UnboundConcurrency::PerCpu`: concurrency-managed pools.
    managed: bool,
    /// The real CPUs of the routing mask, sorted (the pools' `cpus`).
    real_mask: Vec<usize>,
}

impl<'a> PodSpec<'a> {
    fn new(
        wq: &WqInner,
        attrs: &'a WqAttrs,
        prio: PoolPrio,
        color: u8,
        route: &[usize],
    ) -> PodSpec<'a> {
        let mut real_mask: Vec<usize> = route.iter().map(|&c| wq.to_real(c)).collect();
        real_mask.sort_unstable();
        real_mask.dedup();
        PodSpec {
            attrs,
            prio,
            color,
            wake: wq.ctx.wake,
            managed: wq.ctx.concurrency == UnboundConcurrency::PerCpu,
            real_mask,
        }
    }

    /// The attributes of a pool whose lanes are `pod_cpus`, linked to the
    /// per-CPU pools of `pod` (empty: none).
    fn pool_attrs(&self, pod_cpus: Vec<usize>, pod: Vec<usize>) -> PoolAttrs {
        PoolAttrs {
            cpu: None,
            prio: self.prio,
            cpus: self.real_mask.clone(),
            pod_cpus,
            strict: self.attrs.affinity_strict,
            wake: self.wake,
            managed: self.managed,
            pod,
        }
    }
}

impl WqInner {
    pub(super) fn pwqs(&self) -> Arc<Pwqs> {
        self.cur.lock().clone()
    }

    /// Every pwq: the current generation's and the retired ones not freed
    /// yet, read as one picture: `apply` swaps the generation and moves pwqs
    /// to `retired` under the `old` lock, taken first here too (lock order:
    /// old, then cur), so no pwq is seen twice or missed.
    pub(super) fn pwq_list(&self) -> Vec<PwqRef> {
        let old = self.old.lock();
        let mut v = self.pwqs().all.clone();
        v.extend(old.retired.iter());
        v
    }

    /// The floor of each node's share of `max_active` (the kernel's
    /// `min_active`): the one set, or `min(max_active, MIN_ACTIVE)`; never
    /// above `max_active`.
    pub(super) fn min_active(&self, max_active: usize) -> usize {
        match self.min_active.load(Ordering::Relaxed) {
            0 => max_active.min(MIN_ACTIVE),
            m => m.min(max_active),
        }
    }

    pub(super) fn node_maxes(&self, max_active: usize) -> Vec<usize> {
        let node_cpus = self.node_cpus.lock();
        let total: usize = node_cpus.iter().sum::<usize>().max(1);
        let min = self.min_active(max_active);
        node_cpus
            .iter()
            .map(|&c| (max_active * c).div_ceil(total).clamp(min, max_active))
            .collect()
    }

    /// The real CPU a topology CPU of this queue runs on (a custom topology
    /// is folded onto the CPUs usable at start).
    fn to_real(&self, c: usize) -> usize {
        if !self.ctx.custom {
            return c;
        }
        let real = system_topology().online();
        real[c % real.len()]
    }

    /// The topology pods are cut from: a custom one as given; the machine's
    /// with every online CPU, so a CPU given back has its pod.
    fn cut_topology(&self) -> &Topology {
        static MACHINE: OnceLock<Topology> = OnceLock::new();
        if self.ctx.custom {
            &self.ctx.topo
        } else {
            MACHINE.get_or_init(|| system_topology().unrestricted())
        }
    }

    /// The CPUs of `attrs`' cpumask that pods are cut from (online, of the
    /// cut topology) and, of those, the ones usable now (`wq_update_pod`'s
    /// rule): `usable` are real CPU ids. An empty second list: no CPU of the
    /// mask is usable, so every CPU goes to the default pwq.
    fn pod_masks(&self, attrs: &WqAttrs, usable: &[usize]) -> (Vec<usize>, Vec<usize>) {
        let cut: Vec<usize> = self
            .cut_topology()
            .online()
            .iter()
            .copied()
            .filter(|c| attrs.cpumask.contains(c))
            .collect();
        let live = cut
            .iter()
            .copied()
            .filter(|&c| usable.contains(&self.to_real(c)))
            .collect();
        (cut, live)
    }

    /// Builds a generation of pwqs for `attrs` (`apply_wqattrs_prepare`): pools
    /// per pod of the scope (unbound) or per CPU (bound), each pwq attached with
    /// flush colour `color`. Unbound pods hold the CPUs usable now.
    /// On error nothing stays attached.
    pub(super) fn build_table(
        self: &Arc<Self>,
        attrs: &WqAttrs,
        prio: PoolPrio,
        color: u8,
        plugged: bool,
    ) -> Result<Pwqs, Error> {
        let topo = &self.ctx.topo;
        let real: Vec<usize> = system_topology().machine_online().to_vec();
        let mask: Vec<usize> = topo
            .online()
            .iter()
            .copied()
            .filter(|c| attrs.cpumask.contains(c))
            .collect();
        if mask.is_empty() {
            return Err(Error::EmptyCpumask {
                requested: attrs.cpumask.clone(),
            });
        }
        if crate::engine::threads::forked() {
            // A child of fork() runs nothing (its queues are inert), and the
            // locks of the pools and registries it inherited may be held
            // for ever by threads that do not exist here: a queue built in
            // the child attaching to a pool hung on that pool's lock. So a
            // child's generation has no pwqs and touches no pool.
            return Ok(Pwqs {
                cpu: vec![None; topo.nr_cpu_ids()],
                dfl: None,
                all: Vec::new(),
                route_cpus: mask,
                live: Vec::new(),
                lane: Vec::new(),
            });
        }
        // Unbound: pods hold only the CPUs usable now; with none usable the
        // default pwq takes the whole mask (the kernel's fallback).
        let (cut_mask, live) = self.pod_masks(attrs, &pool::usable_cpus());
        let route = if live.is_empty() || !self.unbound {
            mask
        } else {
            live.clone()
        };
        let mut tab = Pwqs {
            cpu: vec![
                None;
                topo.nr_cpu_ids()
                    .max(real.iter().max().map_or(0, |m| m + 1))
            ],
            dfl: None,
            all: Vec::new(),
            route_cpus: route,
            live,
            lane: vec![None; real.iter().max().map_or(0, |m| m + 1)],
        };
        let res = if self.unbound {
            let spec = PodSpec::new(self, attrs, prio, color, &tab.route_cpus);
            self.fill_unbound(&mut tab, &spec, &cut_mask, plugged)
        } else {
            self.fill_bound(&mut tab, attrs.max_active, prio, color)
        };
        if let Err(e) = res {
            for r in &tab.all {
                r.pool.detach(r.id);
            }
            return Err(e);
        }
        Ok(tab)
    }

    /// A bound queue's table: every possible CPU of the machine has its
    /// pool, usable now or not (one that is not starts disassociated and is
    /// served by unbound workers), so `queue_on` of any CPU goes to that
    /// CPU's pool, as in the kernel, and a CPU given back or brought online
    /// later is served by it.
    fn fill_bound(
        self: &Arc<Self>,
        tab: &mut Pwqs,
        max_active: usize,
        prio: PoolPrio,
        color: u8,
    ) -> Result<(), Error> {
        for &c in system_topology().possible() {
            let pool = pool::bound_pool(c, prio, self.ctx.wake)?;
            let id = pool.attach(self.clone(), max_active, 0, color, false)?;
            let r = PwqRef { pool, id };
            tab.cpu[c] = Some(r);
            tab.all.push(r);
        }
        Ok(())
    }

    /// An unbound queue's table: the default pwq over the whole routing
    /// mask (all an ordered queue has), then the pwqs of each pod.
    fn fill_unbound(
        self: &Arc<Self>,
        tab: &mut Pwqs,
        spec: &PodSpec<'_>,
        cut_mask: &[usize],
        plugged: bool,
    ) -> Result<(), Error> {
        let topo = &self.ctx.topo;
        let dfl_node = topo.cpu_node(tab.route_cpus[0]).min(self.nodes.len() - 1);
        let dfl_pool = pool::unbound_pool(spec.pool_attrs(spec.real_mask.clone(), Vec::new()))?;
        let dfl = PwqRef {
            pool: dfl_pool,
            id: dfl_pool.attach(
                self.clone(),
                spec.attrs.max_active,
                dfl_node,
                spec.color,
                plugged,
            )?,
        };
        tab.dfl = Some(dfl);
        tab.all.push(dfl);
        if self.ordered {
            return Ok(());
        }
        let pods = self
            .cut_topology()
            .pods(spec.attrs.affinity_scope, spec.attrs.cache_shard_size);
        for pod in &pods.pods {
            self.add_pod(tab, spec, pod, cut_mask, dfl)?;
        }
        Ok(())
    }

    /// The pwqs of one pod: none if no CPU of it is usable (its CPUs go to
    /// the default pwq), one pool for a one-CPU pod or an unmanaged one (a
    /// shared pool, lanes inside), else a per-CPU pool for each real CPU.
    fn add_pod(
        self: &Arc<Self>,
        tab: &mut Pwqs,
        spec: &PodSpec<'_>,
        pod: &[usize],
        cut_mask: &[usize],
        dfl: PwqRef,
    ) -> Result<(), Error> {
        let all: Vec<usize> = pod
            .iter()
            .copied()
            .filter(|c| cut_mask.contains(c))
            .collect();
        let cpus: Vec<usize> = all
            .iter()
            .copied()
            .filter(|c| tab.live.contains(c))
            .collect();
        if cpus.is_empty() {
            // No CPU of the pod is usable: its CPUs go to the default pwq.
            for &c in &all {
                tab.cpu[c] = Some(dfl);
            }
            return Ok(());
        }
        let mut pod_real: Vec<usize> = cpus.iter().map(|&c| self.to_real(c)).collect();
        pod_real.sort_unstable();
        pod_real.dedup();
        let node = self.ctx.topo.cpu_node(cpus[0]).min(self.nodes.len() - 1);
        if !spec.managed || pod_real.len() == 1 {
            // One pool for the pod: one CPU, or the kernel's
            // unmanaged pools (a worker per item, lanes inside).
            let pool = pool::unbound_pool(spec.pool_attrs(pod_real, Vec::new()))?;
            let r = PwqRef {
                pool,
                id: pool.attach(self.clone(), spec.attrs.max_active, node, spec.color, false)?,
            };
            tab.all.push(r);
            // The pod's CPUs that are not usable go to what is left of it.
            for &c in &all {
                tab.cpu[c] = Some(r);
            }
            return Ok(());
        }
        self.add_per_cpu_pools(tab, spec, &all, &pod_real, node)
    }

    /// A managed pod of several CPUs: a per-CPU pool for each real CPU
    /// (each with its own lock), linked so a lagging one borrows an idle
    /// worker of a partner (engine/pool/lane.rs).
    fn add_per_cpu_pools(
        self: &Arc<Self>,
        tab: &mut Pwqs,
        spec: &PodSpec<'_>,
        all: &[usize],
        pod_real: &[usize],
        node: usize,
    ) -> Result<(), Error> {
        let lanes = pod_real
            .iter()
            .map(|&r| pool::unbound_pool(spec.pool_attrs(vec![r], pod_real.to_vec())))
            .collect::<Result<Vec<_>, Error>>()?;
        pool::link_pod(&lanes);
        let mut refs: Vec<PwqRef> = Vec::with_capacity(lanes.len());
        for &pool in &lanes {
            let r = PwqRef {
                pool,
                id: pool.attach(self.clone(), spec.attrs.max_active, node, spec.color, false)?,
            };
            tab.all.push(r);
            refs.push(r);
        }
        for &c in all {
            let i = pod_real.binary_search(&self.to_real(c)).unwrap_or(0);
            tab.cpu[c] = Some(refs[i]);
        }
        for (&r, &lane) in pod_real.iter().zip(&refs) {
            // A real CPU that is a lane of two pods of other CPU
            // sets, or of two NUMA nodes (folded topologies), has no
            // lane of its own: such items go by the target CPU, so
            // each node's `max_active` budget stays its own.
            match &mut tab.lane[r] {
                slot @ None => *slot = Some(Some((lane, node))),
                Some(Some((old, n))) if !std::ptr::eq(old.pool, lane.pool) || *n != node => {
                    tab.lane[r] = Some(None)
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Cuts `max_active` into per-node budgets by the CPUs of the table's mask.
    pub(super) fn set_node_budgets(&self, attrs: &WqAttrs, tab: &Pwqs) {
        let nr_nodes = self.nodes.len();
        let mut node_cpus = vec![0usize; nr_nodes];
        for &c in &tab.route_cpus {
            node_cpus[self.ctx.topo.cpu_node(c).min(nr_nodes - 1)] += 1;
        }
        *self.node_cpus.lock() = node_cpus;
        for (node, max) in self.node_maxes(attrs.max_active).into_iter().enumerate() {
            self.nodes[node].set_max(max);
        }
    }

    /// Frees the dead pwqs of `retired` whose `reap` has not run yet,
    /// their counters to `dead_stats`. Dead is final (a dead pwq takes no
    /// items and has none in flight), so flush and stats lose nothing.
    pub(super) fn compact_retired(old: &mut OldPwqs) {
        let OldPwqs {
            retired,
            dead_stats,
            dead_lat,
        } = old;
        retired.retain(|r| {
            if !r.pool.with_pwq(r.id, |p| p.dead) {
                return true;
            }
            dead_stats.add(&r.pool.pwq_stats(r.id));
            r.pool.pwq_latency(r.id, dead_lat);
            r.pool.detach(r.id);
            false
        });
    }

    /// Replaces the pwqs with a generation built for the new attributes
    /// (`apply_workqueue_attrs`): new work goes to the new pools at once; the
    /// old pwqs keep and finish what they hold, then die. An ordered queue's new
    /// pwq stays plugged until every older one has drained.
    pub(super) fn apply(self: &Arc<Self>, change: impl FnOnce(&mut WqAttrs)) -> Result<(), Error> {
        self.apply_with(change, false)
    }

    /// `wq_update_pod`: the usable CPUs changed; if that changes which CPUs
    /// of the cpumask the pods hold, the same attrs are applied again, cut
    /// from the CPUs usable now (in-flight items finish where they are).
    pub(crate) fn update_pods(self: &Arc<Self>) -> Result<(), Error> {
        if !self.unbound {
            return Ok(());
        }
        self.apply_with(|_| {}, true)
    }

    /// [`apply`](Self::apply); `repod`: rebuild with unchanged attrs when
    /// the usable CPUs of the mask differ from those of the current table.
    fn apply_with(
        self: &Arc<Self>,
        change: impl FnOnce(&mut WqAttrs),
        repod: bool,
    ) -> Result<(), Error> {
        if !self.unbound {
            return Err(Error::NotUnbound {
                name: self.name.clone(),
                attr: "this attribute",
            });
        }
        let mut cur = self.attrs.lock();
        let mut new = cur.clone();
        change(&mut new);
        if !(-20..=19).contains(&new.nice) {
            return Err(Error::InvalidNice(new.nice));
        }
        if new == *cur
            && !(repod && self.pod_masks(&cur, &pool::usable_cpus()).1 != self.pwqs().live)
        {
            return Ok(());
        }
        let (old_prio, old_note) = self.prio.lock().clone();
        let (prio, note) = if new.nice != cur.nice {
            priority::resolve(PoolPrio::Nice(new.nice), self.ctx.fallback)?
        } else {
            (old_prio, old_note)
        };
        new.nice = prio.nice();
        let g = self.flush_lock.lock();
        let color = (*g % NR_COLORS as u64) as u8;
        let tab = self.build_table(&new, prio, color, self.ordered)?;
        self.set_node_budgets(&new, &tab);
        let dfl = tab.dfl;
        self.map.publish(&tab);
        let old = {
            // Under the `old` lock, so a reader of pwq_list_and_dead sees
            // the old generation either as current or as retired, once.
            let mut gens = self.old.lock();
            let old = std::mem::replace(&mut *self.cur.lock(), Arc::new(tab));
            Self::compact_retired(&mut gens);
            gens.retired.extend(old.all.iter().copied());
            old
        };
        if self.ordered {
            let mut chain = self.chain.lock();
            chain.push_back(dfl.expect("unbound tables have a default pwq"));
        }
        drop(g);
        for r in &old.all {
            r.pool.retire(r.id);
        }
        if self.ordered {
            self.ordered_advance();
        }
        *self.prio.lock() = (prio, note);
        self.max_active.store(new.max_active, Ordering::Relaxed);
        trace::attrs_changed(&self.name, &new);
        *cur = new;
        drop(cur);
        for n in 0..self.nodes.len() {
            self.node_activate(n);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Scope;
    use crate::{Work, Workqueue};
    use std::sync::atomic::AtomicUsize;

    /// An unbound queue with a pwq per CPU.
    fn per_cpu_unbound(name: &str, max_active: usize) -> Workqueue {
        Workqueue::builder(name)
            .unbound()
            .affinity_scope(Scope::Cpu)
            .max_active(max_active)
            .build()
            .unwrap()
    }

    /// The node budget is conserved: batches of cached credits go back, so an
    /// idle unbound workqueue holds no budget, and no item is left waiting.
    #[test]
    fn node_budget_returns_to_zero_when_idle() {
        for max in [1usize, 3, 8, 64, 1024] {
            let wq = per_cpu_unbound("budget", max);
            let ran = Arc::new(AtomicUsize::new(0));
            let works: Vec<Work> = (0..200)
                .map(|_| {
                    let r = ran.clone();
                    Work::new(move || {
                        r.fetch_add(1, Ordering::SeqCst);
                    })
                })
                .collect();
            let mut queued = 0;
            for round in 0..20 {
                for (i, w) in works.iter().enumerate() {
                    let cpus = wq.inner.pwqs().route_cpus.clone();
                    let cpu = cpus[(i + round) % cpus.len()];
                    queued += usize::from(wq.queue_on(cpu, w).unwrap());
                }
                if round % 3 == 0 {
                    wq.flush();
                    assert_eq!(
                        wq.node_nr_active().iter().sum::<usize>(),
                        0,
                        "max_active {max}"
                    );
                }
            }
            wq.flush();
            assert_eq!(ran.load(Ordering::SeqCst), queued, "max_active {max}");
            assert!(queued >= 200 * 7, "every flush round re-queues everything");
            assert_eq!(
                wq.node_nr_active().iter().sum::<usize>(),
                0,
                "max_active {max}"
            );
            // What the node still counts is exactly what idle pwqs keep.
            for (held, kept) in wq.debug_node_units() {
                assert_eq!(held, kept, "max_active {max}");
            }
        }
    }

    /// An idle pwq keeps the rest of its batch (with one item in flight, the
    /// next item takes nothing from the node), and a queuer that finds the
    /// node full takes those units back: `max_active` items that wait for
    /// each other all run at once.
    #[test]
    fn idle_pwqs_keep_units_and_waiters_take_them_back() {
        use std::time::{Duration, Instant};
        const MAX: usize = 32;
        let wq = per_cpu_unbound("keep", MAX);
        let cpus = wq.inner.pwqs().route_cpus.clone();
        if cpus.len() < 2 {
            eprintln!("skipped: needs two CPUs with pwqs of their own");
            return;
        }
        // Batches of 2 (32 / 16): idle pwqs may keep units where a batch per
        // CPU id is at most half the limit, 8 CPU ids.
        if super::super::system_topology().nr_cpu_ids() > 8 {
            eprintln!("skipped: more than 8 CPU ids, so idle pwqs keep nothing at max_active 32");
            return;
        }
        let one = Work::new(|| {});
        assert!(wq.queue_on(cpus[0], &one).unwrap());
        wq.flush();
        let units = wq.debug_node_units();
        assert!(
            units.iter().any(|&(held, kept)| kept > 0 && held == kept),
            "the idle pwq keeps its units: {units:?}"
        );
        assert_eq!(wq.node_nr_active().iter().sum::<usize>(), 0);

        // `arrived` counts items that started, `inside` those running now.
        let arrived = Arc::new(AtomicUsize::new(0));
        let inside = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let works: Vec<Work> = (0..MAX)
            .map(|_| {
                let (arrived, inside, peak) = (arrived.clone(), inside.clone(), peak.clone());
                Work::new(move || {
                    let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(n, Ordering::SeqCst);
                    arrived.fetch_add(1, Ordering::SeqCst);
                    // Waits for the others; the bound only ends a failing run.
                    let t0 = Instant::now();
                    crate::blocking(|| {
                        while arrived.load(Ordering::SeqCst) < MAX
                            && t0.elapsed() < Duration::from_secs(20)
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    });
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for w in &works {
            assert!(wq.queue_on(cpus[1], w).unwrap());
        }
        wq.flush();
        assert_eq!(
            peak.load(Ordering::SeqCst),
            MAX,
            "every item active at once: the kept units went back to the waiters"
        );
        for (held, kept) in wq.debug_node_units() {
            assert_eq!(held, kept);
        }
    }
}
