//! A NUMA node's share of an unbound workqueue's `max_active` (the kernel's
//! `wq_node_nr_active`).
//!
//! The fast path is one CAS on `nr`; the list of waiting items is only
//! touched when the node is at its limit.
//!
//! # No waiting item is stranded with budget free
//!
//! Two sides race: a queuer that finds the node full, and a completer that
//! gives budget back.
//!
//! 1. The queuer pushes its pwq on `pending`, increments `pending_len`, then
//!    re-reads `nr` ([`NodeActive::try_get`]).
//! 2. The completer decrements `nr`, then reads `pending_len`
//!    ([`NodeActive::put`]).
//!
//! Each side stores one atomic and then loads the other, so with acquire and
//! release alone both loads could miss the other side's store (store
//! buffering) and nobody would activate the waiting item. All four accesses
//! are `SeqCst`: in their single total order one store comes first, so at
//! least one side sees the other and runs [`NodeActive::activate`].
//!
//! # Units an idle pwq keeps
//!
//! A pwq that goes idle may keep up to a batch of units instead of giving
//! them back, so that a queue with one item in flight per CPU does not move
//! `nr`, a line every CPU of the node writes, twice per item. Only where
//! that can never hold back much: a batch of at least two units, and every
//! pwq the node could have (one per CPU at most) keeping a full batch still
//! leaves half of `max` ([`NodeActive::may_keep`]). Kept units are still
//! counted in `nr`, so the limit holds; what must not happen is an item
//! waiting while they sit in an idle pwq that will not run again. A
//! reclaim pass gives them back, and another Dekker pair says when one is
//! due:
//!
//! 1. The keeper, under its pool lock and only while nobody waits, sets
//!    `hoard` (unless already set), then reads `pending_len` again; it keeps
//!    units only if nobody waits ([`NodeActive::may_keep_idle`]).
//! 2. The queuer that must wait increments `pending_len`, then reads `hoard`
//!    ([`NodeActive::try_get`]); if set, it runs an activation pass after its
//!    unlock, which clears `hoard` and takes every pwq's kept units back
//!    before activating ([`NodeActive::activate`]'s `reclaim`).
//!
//! Either the keeper sees the waiter and gives its units back, or the queuer
//! sees `hoard` and reclaims. A keeper that finds `hoard` already set does
//! not store it again, and the pair still holds. Say the queuer reads
//! `hoard` clear: the last store to it before that read is a pass's clear.
//! If that pass visited the keeper's pool before the keeper locked it, the
//! clear came before the keeper's read, which then saw a mark made after the
//! clear and so after the queuer's read; the keeper's read of `pending_len`
//! comes later still and sees the waiter. Otherwise the pass visited the
//! pool after the keeper and took its units.
//!
//! The code here is the code loom checks (`tests/loom_models.rs`, model 6):
//! its atomics and lock come from `crate::sync::model`, and `dekker_point`
//! marks the places where the total order is relied on (nothing in a
//! normal build; a `SeqCst` fence under loom, which does not model `SeqCst`
//! accesses).

use std::collections::VecDeque;

use crate::sync::model::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::model::{Level, Mutex, dekker_point};

/// What [`NodeActive::try_get`] decided.
pub(crate) enum NodeGet {
    /// Budget taken: the item is active; the count is the units taken (the item's
    /// own and any extra the pwq caches).
    Active(usize),
    /// The item waits for budget.
    Waiting,
    /// The item waits, but budget may have been freed meanwhile, or an idle
    /// pwq may keep some: call `node_activate` once the pool lock is
    /// dropped.
    WaitingRecheck,
}

/// One node's budget.
///
/// `nr` sits on a cache line of its own (two, for the adjacent-line
/// prefetcher): every pool of the node writes it when its pwq takes or gives
/// back credits, while every queue and every completion of every CPU reads
/// `pending_len`. Sharing one line, each of those reads missed whenever some
/// other CPU had just moved `nr`: on a 16-CPU machine the read in `insert`
/// and `dec_active` took about a quarter of the process's CPU time at batch
/// 64 (perf, COST.md "The node budget's line"). Apart, `pending_len` stays
/// shared-clean in every cache until the node is full.
pub(crate) struct NodeActive {
    /// A: units held (active items plus credits cached by pwqs). `SeqCst`:
    /// the completer's decrement pairs with the queuer's `pending_len`
    /// increment (module docs).
    nr: OwnLine,
    /// A: the node's limit. `Relaxed`: a setting; a change is followed by an
    /// activation pass on the thread that made it.
    max: AtomicUsize,
    /// A: `pending.len()`, readable without the lock. `SeqCst`: pairs with
    /// `nr` (module docs).
    pending_len: AtomicUsize,
    /// I: how many units a pwq takes at once and may keep cached (see
    /// `PwqState::credits`).
    batch: usize,
    /// I: `batch` times the most pwqs the node can have (one per CPU): what
    /// idle pwqs could keep at most, if each kept a batch.
    kept_at_most: usize,
    /// A: an idle pwq may keep units (module docs). Set by a keeper before
    /// it reads `pending_len`, cleared by a reclaim pass before it visits
    /// the pwqs. `SeqCst`: pairs with `pending_len`.
    hoard: AtomicBool,
    /// N: inactive items waiting for budget, as (pool id, pwq slot), oldest first.
    pending: Mutex<VecDeque<(u32, u32)>>,
}

impl NodeActive {
    /// A node of a workqueue whose `max_active` is `max_active`, on a
    /// machine of `nr_cpus` CPU ids (the most pwqs a node can have).
    pub(crate) fn new(max_active: usize, nr_cpus: usize) -> NodeActive {
        // Small limits stay exact; large ones let pwqs cache 1/16 of the budget.
        let batch = (max_active / BATCH_DIVISOR).clamp(1, MAX_BATCH);
        NodeActive {
            nr: OwnLine(AtomicUsize::new(0)),
            max: AtomicUsize::new(max_active),
            pending_len: AtomicUsize::new(0),
            batch,
            kept_at_most: batch.saturating_mul(nr_cpus.max(1)),
            hoard: AtomicBool::new(false),
            pending: Mutex::new_at(Level::Node, VecDeque::with_capacity(8)),
        }
    }

    /// Whether an idle pwq may keep units at all: batches of two or more,
    /// and all that idle pwqs could keep at most within half of the limit.
    fn may_keep(&self) -> bool {
        self.batch >= 2 && self.kept_at_most <= self.max.load(Ordering::Relaxed) / 2
    }

    /// A pwq going idle asks to keep up to a batch of its units: marks the
    /// node (so that a queuer that must wait reclaims them), then says yes
    /// if nobody waits. Called under the pwq's pool lock; on no, the pwq
    /// gives everything back.
    pub(crate) fn may_keep_idle(&self) -> bool {
        // Not while items wait: a node kept full by a flood would otherwise
        // be marked again after every reclaim, and every waiter would run one.
        if !self.may_keep() || self.pending_len.load(Ordering::SeqCst) > 0 {
            return false;
        }
        if !self.hoard.load(Ordering::SeqCst) {
            self.hoard.store(true, Ordering::SeqCst);
        }
        dekker_point();
        self.pending_len.load(Ordering::SeqCst) == 0
    }

    fn try_inc(&self) -> bool {
        self.try_take(1) == 1
    }

    /// Takes up to `want` units (at least one, or none if the node is full).
    fn try_take(&self, want: usize) -> usize {
        let max = self.max.load(Ordering::Relaxed);
        match self
            .nr
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then(|| n + want.min(max - n))
            }) {
            Ok(prev) => want.min(max - prev),
            Err(_) => 0,
        }
    }

    /// Takes budget for one item (and up to a batch to cache), or queues the
    /// pwq as waiting. Called under the pwq's pool lock.
    pub(crate) fn try_get(&self, frozen: bool, pool: u32, slot: u32) -> NodeGet {
        if !frozen && self.pending_len.load(Ordering::SeqCst) == 0 {
            let got = self.try_take(self.batch);
            if got > 0 {
                return NodeGet::Active(got);
            }
        }
        let mut q = self.pending.lock();
        q.push_back((pool, slot));
        self.pending_len.fetch_add(1, Ordering::SeqCst);
        drop(q);
        dekker_point();
        let free = self.nr.load(Ordering::SeqCst) < self.max.load(Ordering::Relaxed);
        let kept = self.hoard.load(Ordering::SeqCst);
        if (free || kept) && !frozen {
            NodeGet::WaitingRecheck
        } else {
            NodeGet::Waiting
        }
    }

    /// Registers `n` inactive items of a pwq as waiting for budget (an ordered
    /// queue's pwq being unplugged). Called under that pwq's pool lock.
    pub(crate) fn enqueue_waiting(&self, pool: u32, slot: u32, n: usize) {
        let mut q = self.pending.lock();
        for _ in 0..n {
            q.push_back((pool, slot));
        }
        self.pending_len.fetch_add(n, Ordering::SeqCst);
    }

    /// Returns `units` of budget; true if some pwq waits for it.
    pub(crate) fn put(&self, units: usize) -> bool {
        self.nr.fetch_sub(units, Ordering::SeqCst);
        dekker_point();
        self.pending_len.load(Ordering::SeqCst) > 0
    }

    /// Whether items wait for budget (a hint; `put` is the check that counts).
    pub(crate) fn has_waiters(&self) -> bool {
        self.pending_len.load(Ordering::SeqCst) > 0
    }

    /// How many units a pwq may keep cached.
    pub(crate) fn batch(&self) -> usize {
        self.batch
    }

    /// The limit.
    pub(crate) fn max(&self) -> usize {
        self.max.load(Ordering::Relaxed)
    }

    /// Sets the limit (the caller runs an activation pass afterwards).
    pub(crate) fn set_max(&self, max: usize) {
        self.max.store(max, Ordering::Relaxed);
    }

    /// Units held now.
    pub(crate) fn nr(&self) -> usize {
        self.nr.load(Ordering::SeqCst)
    }

    /// Forgets every waiting item (the workqueue is destroyed, drained).
    pub(crate) fn clear(&self) {
        self.pending.lock().clear();
        self.pending_len.store(0, Ordering::SeqCst);
    }

    /// Activates waiting items while the budget allows
    /// (`node_activate_pending_pwq`): each popped (pool, slot) is handed to
    /// `activate`, which returns false if that pwq had nothing inactive left
    /// (the unit then goes back). Stops while `frozen()` says so. First, if
    /// items wait and an idle pwq may keep units, clears the mark and calls
    /// `reclaim`, which takes every pwq's kept units (each under its pool
    /// lock) and returns how many: they go back to the node (module docs).
    pub(crate) fn activate(
        &self,
        frozen: impl Fn() -> bool,
        reclaim: impl FnOnce() -> usize,
        mut activate: impl FnMut(u32, u32) -> bool,
    ) {
        if !frozen()
            && self.pending_len.load(Ordering::SeqCst) > 0
            && self.hoard.load(Ordering::SeqCst)
            && self.hoard.swap(false, Ordering::SeqCst)
        {
            let units = reclaim();
            if units > 0 {
                self.nr.fetch_sub(units, Ordering::SeqCst);
            }
        }
        loop {
            let (pool, slot) = {
                let mut q = self.pending.lock();
                if frozen() || q.is_empty() || !self.try_inc() {
                    return;
                }
                self.pending_len.fetch_sub(1, Ordering::SeqCst);
                q.pop_front().expect("checked non-empty")
            };
            if !activate(pool, slot) {
                self.nr.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// An atomic on a 128-byte block of its own.
#[repr(align(128))]
struct OwnLine(AtomicUsize);

impl std::ops::Deref for OwnLine {
    type Target = AtomicUsize;
    fn deref(&self) -> &AtomicUsize {
        &self.0
    }
}

/// A pwq caches at most `max_active / BATCH_DIVISOR` units of its node's budget.
const BATCH_DIVISOR: usize = 16;
/// ... and never more than this many.
const MAX_BATCH: usize = 32;
