//! The engine's loom-checked leaves, as `tests/loom_models.rs` drives them
//! (`--cfg loom` builds only; re-exported as `cmwq::__loom`). Each wrapper
//! calls the engine's own code: the models test it, not a copy.

use super::node::{NodeActive, NodeGet};
use super::spawn::Handoff;
use super::work::{PENDING, WorkCell};
use crate::sync::model::atomic::Ordering;

/// A work item's state word and cycle counters (`engine/work.rs`), with no job.
pub struct WorkState(WorkCell<()>);

impl Default for WorkState {
    fn default() -> Self {
        Self::new()
    }
}

impl WorkState {
    /// An idle item.
    pub fn new() -> WorkState {
        WorkState(WorkCell::new(()))
    }
    /// `WorkCell::try_claim`: takes the next queue cycle.
    pub fn try_claim(&self) -> bool {
        self.0.try_claim()
    }
    /// `WorkCell::clear_pending`: a worker took the item off its list.
    pub fn clear_pending(&self) {
        self.0.clear_pending()
    }
    /// `WorkCell::finish_cycle` (with nobody waiting: no lock is taken).
    pub fn finish_cycle(&self) {
        self.0.finish_cycle()
    }
    /// `WorkCell::wait_cycles`: waits until every cycle queued so far ended.
    pub fn wait_cycles(&self) -> bool {
        self.0.wait_cycles("loom model")
    }
    /// `WorkCell::disable_inc` (`cancel_sync`'s first step).
    pub fn disable_inc(&self) {
        self.0.loom_disable_inc()
    }
    /// `WorkCell::disable_dec`: true when the item is enabled again.
    pub fn disable_dec(&self) -> bool {
        self.0.loom_disable_dec()
    }
    /// PENDING is set.
    pub fn is_pending(&self) -> bool {
        self.0.state.load(Ordering::SeqCst) & PENDING != 0
    }
    /// Cycles begun.
    pub fn queued(&self) -> u64 {
        self.0.queued.load(Ordering::SeqCst)
    }
    /// Cycles ended.
    pub fn done(&self) -> u64 {
        self.0.done.load(Ordering::SeqCst)
    }
}

/// What [`NodeBudget::try_get`] decided (`NodeGet`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Got {
    /// Budget taken: this many units.
    Active(usize),
    /// The item waits.
    Waiting,
    /// The item waits; budget may be free: run an activation pass.
    WaitingRecheck,
}

/// One NUMA node's `max_active` budget (`engine/node.rs`).
pub struct NodeBudget(NodeActive);

impl NodeBudget {
    /// A node of a workqueue with this `max_active`.
    pub fn new(max_active: usize) -> NodeBudget {
        NodeBudget(NodeActive::new(max_active))
    }
    /// `NodeActive::try_get`.
    pub fn try_get(&self, frozen: bool, pool: u32, slot: u32) -> Got {
        match self.0.try_get(frozen, pool, slot) {
            NodeGet::Active(n) => Got::Active(n),
            NodeGet::Waiting => Got::Waiting,
            NodeGet::WaitingRecheck => Got::WaitingRecheck,
        }
    }
    /// `NodeActive::put`: true if some pwq waits.
    pub fn put(&self, units: usize) -> bool {
        self.0.put(units)
    }
    /// `NodeActive::activate`.
    pub fn activate(&self, frozen: impl Fn() -> bool, activate: impl FnMut(u32, u32) -> bool) {
        self.0.activate(frozen, activate)
    }
    /// Units held.
    pub fn nr(&self) -> usize {
        self.0.nr()
    }
    /// Items wait.
    pub fn has_waiters(&self) -> bool {
        self.0.has_waiters()
    }
}

/// Who drops a detached spawned job's result (`engine/spawn.rs`'s `Handoff`).
pub struct ResultHandoff(Handoff);

impl Default for ResultHandoff {
    fn default() -> Self {
        ResultHandoff(Handoff::new())
    }
}

impl ResultHandoff {
    /// `Handoff::finish`: the job's side, as `Spawned::finish` runs it;
    /// false when the handle was gone (the worker then skips the cycle's end).
    pub fn finish<R, U>(&self, r: R, store: impl FnOnce(R), take_back: impl FnOnce() -> U) -> bool {
        self.0.finish(r, store, take_back)
    }
    /// `Handoff::detach`: the handle's side, as its drop runs it.
    pub fn detach<U>(&self, take: impl FnOnce() -> U) -> bool {
        self.0.detach(take)
    }
    /// `Handoff::handle_gone`, for a model's broken variant of `finish`.
    pub fn handle_gone(&self) -> bool {
        self.0.handle_gone()
    }
}
