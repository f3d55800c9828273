//! The engine's loom-checked leaves, as `tests/loom_models.rs` drives them
//! (`--cfg loom` builds only; re-exported as `cmwq::__loom`). Each wrapper
//! calls the engine's own code: the models test it, not a copy.

use super::node::{NodeActive, NodeGet};
use super::spawn::Handoff;
use super::watchdog::ParkGate;
use super::work::{PENDING, WorkCell};
use super::workqueue::Holders;
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
    /// A node of a workqueue with this `max_active`, on a machine of
    /// `nr_cpus` CPU ids.
    pub fn new(max_active: usize, nr_cpus: usize) -> NodeBudget {
        NodeBudget(NodeActive::new(max_active, nr_cpus))
    }
    /// `NodeActive::may_keep_idle`: a pwq going idle may keep its units.
    pub fn may_keep_idle(&self) -> bool {
        self.0.may_keep_idle()
    }
    /// `NodeActive::batch`.
    pub fn batch(&self) -> usize {
        self.0.batch()
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
    /// `NodeActive::activate`, with `reclaim` taking back the units idle
    /// pwqs keep.
    pub fn activate(
        &self,
        frozen: impl Fn() -> bool,
        reclaim: impl FnOnce() -> usize,
        activate: impl FnMut(u32, u32) -> bool,
    ) {
        self.0.activate(frozen, reclaim, activate)
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

/// The watchdog's park against a worker becoming busy
/// (`engine/watchdog/gate.rs`).
pub struct WatchdogGate(ParkGate);

impl Default for WatchdogGate {
    fn default() -> Self {
        WatchdogGate(ParkGate::new())
    }
}

impl WatchdogGate {
    /// `ParkGate::enter`, as `busy_enter` calls it for a worker of CPU
    /// `cpu`: true when the caller must unpark the watchdog.
    pub fn enter(&self, cpu: usize) -> bool {
        self.0.enter(cpu)
    }
    /// `ParkGate::exit`, as `busy_exit` calls it.
    pub fn exit(&self, cpu: usize) {
        self.0.exit(cpu)
    }
    /// `ParkGate::park_if` with `watchdog::run`'s test (nobody busy).
    pub fn park_if_idle(&self, park: impl FnOnce()) {
        self.0.park_if(|g| g.busy() == 0, park)
    }
    /// `ParkGate::park_if` with a test that always says idle: the broken
    /// watchdog of a model's negative control, which never re-reads `busy`.
    pub fn park_without_recheck(&self, park: impl FnOnce()) {
        self.0.park_if(|_| true, park)
    }
    /// `ParkGate::park_if` with a test that reads only CPU 0's word: the
    /// broken watchdog of a model's negative control for the per-CPU words.
    pub fn park_reading_one_word(&self, park: impl FnOnce()) {
        self.0.park_if(|g| g.busy_in(0) == 0, park)
    }
    /// The watchdog's first look before it parks (`run`): nobody busy.
    pub fn idle(&self) -> bool {
        self.0.busy() == 0
    }
}

/// A workqueue's handles and borrowed views (`engine/workqueue/holders.rs`).
pub struct WqHolders(Holders);

impl Default for WqHolders {
    fn default() -> Self {
        WqHolders(Holders::new())
    }
}

impl WqHolders {
    /// `Holders::add_handle`: `Workqueue::clone`.
    pub fn add_handle(&self) {
        self.0.add_handle()
    }
    /// `Holders::drop_handle`: `Workqueue`'s drop; true for the last handle.
    pub fn drop_handle(&self) -> bool {
        self.0.drop_handle()
    }
    /// `Holders::try_borrow`, as `borrow_of` calls it (`gone`: destroy began).
    pub fn try_borrow(&self, gone: impl FnOnce() -> bool) -> bool {
        self.0.try_borrow(gone)
    }
    /// `Holders::give_back`: a view's drop.
    pub fn give_back(&self) {
        self.0.give_back()
    }
    /// `Holders::lent`: what `wait_borrows` polls.
    pub fn lent(&self) -> bool {
        self.0.lent()
    }
    /// Handles alive (for a model's broken borrower).
    pub fn handles(&self) -> usize {
        self.0.handles()
    }
    /// A view taken without the check (for a model's broken borrower).
    pub fn borrow_blindly(&self) {
        self.0.borrow_blindly()
    }
}
