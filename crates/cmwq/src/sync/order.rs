//! The lock order, checked: every [`Mutex`](super::Mutex) is made with a
//! [`Level`], and in debug builds each thread keeps the levels it holds; a
//! lock taken out of the written order panics, naming both locks and where
//! each was taken, before it blocks (so a would-be deadlock is a report, not
//! a hang). The kernel's lockdep does the same job with a learned graph; here
//! the graph is the one written at the top of `engine/mod.rs`, and
//! [`ORDER`] is that graph as data (a test reads the text and compares).
//!
//! The rules, for a lock `B` taken while `A` is held:
//!
//! - both named in the graph: there must be a path `A -> ... -> B`. The graph
//!   has no cycle, so a lock of a kind never nests in one of its own kind
//!   (two pool locks, two node locks, two flush locks are an error);
//! - `B` a [leaf](Kind::Leaf): allowed under any lock but a leaf (a leaf is
//!   innermost: nothing is taken while it is held);
//! - `A` a [user lock](Kind::User) (held while the caller's closure runs:
//!   a per-CPU slot): anything may be taken under it, since the closure may
//!   call the whole API; a user lock itself may be taken only under other
//!   user locks (the engine never runs a caller's closure under its locks).
//!
//! In release builds none of this exists at run time: the level is an
//! argument `Mutex::new_at` drops (no field), `lock` is `std`'s lock, and the
//! guard is `std`'s guard (see `sync.rs`).

/// A lock's place in the order: a name from the lock legend of
/// `engine/mod.rs` for the locks its graph names, one name per leaf
/// otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// `WQ attrs`: a workqueue's attributes, held across an attrs change.
    WqAttrs,
    /// `WQ prio`: a workqueue's scheduling priority.
    WqPrio,
    /// `WQ node_cpus`: a workqueue's per-node CPU counts.
    WqNodeCpus,
    /// `WQ flush`: a workqueue's flush colours.
    WqFlush,
    /// `WQ old`: a workqueue's retired and dead pwq generations.
    WqOld,
    /// `WQ cur`: a workqueue's current pwq table.
    WqCur,
    /// `WQ chain`: an ordered workqueue's chain of pwqs.
    WqChain,
    /// `WQ mayday`: a workqueue's mayday list (its rescuer's).
    WqMayday,
    /// `T deliver`: the timer's hand-off of fired items.
    TDeliver,
    /// `T state`: the timer's armed items.
    TState,
    /// `pool`: a worker pool's lock (`Pool::inner`).
    Pool,
    /// `N`: a node's `pending` lock (`NodeActive::pending`).
    Node,
    /// `W`: a work item's `wait_lock`.
    Wait,
    /// `R bound`: the registry of bound pools.
    RBound,
    /// `R unbound`: the registry of unbound pools.
    RUnbound,
    /// `R usable`: the CPUs the process may use.
    RUsable,
    /// Leaf `R registry`: every live workqueue.
    RRegistry,
    /// Leaf `R usable_now`: the pools' leaf copy of the usable CPUs.
    RUsableNow,
    /// Leaf `R cpuset`: the last cpuset the hotplug poll saw.
    RLastCpuset,
    /// Leaf `WQ join`: a workqueue's rescuer thread handle.
    WqJoin,
    /// Leaf `spawn f`: a spawned job's closure before it runs.
    SpawnFn,
    /// Leaf `spawn slot`: a spawned job's result and waker.
    SpawnSlot,
    /// Leaf `T starting`: who starts the timer thread.
    TimerStart,
    /// Leaf `watchdog starting`: who starts the watchdog thread.
    WatchdogStart,
    /// Leaf `R policy`: the highpri policy read from the environment.
    PolicyEnv,
    /// Leaf `control server`: the running control endpoint.
    #[cfg(feature = "control")]
    ControlServer,
    /// Leaf `bounded room`: a bounded queue's waiters' lock (`max_queued`).
    BoundedRoom,
    /// Leaf `scope pending`: a scope's count of unfinished jobs.
    ScopePending,
    /// Leaf `scope panic`: a scope's first unjoined panic.
    ScopePanic,
    /// Leaf `scope slot`: a scoped job's result.
    ScopeSlot,
    /// Leaf `worker hooks`: the process-wide worker start and exit hooks.
    WorkerHooks,
    /// User lock `percpu slot`: one CPU's value of a `PerCpu`, held while
    /// the caller's closure runs on it.
    PerCpuSlot,
    /// User lock `percpu mailbox`: a drain's closure and result, held while
    /// the closure runs on a slot.
    PerCpuMailbox,
    /// Test-only: the outer lock of the unit tests' pair.
    #[cfg(test)]
    TestOuter,
    /// Test-only: the inner lock of the unit tests' pair.
    #[cfg(test)]
    TestInner,
}

/// How a level takes part in the order.
#[cfg(any(debug_assertions, test))]
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Named in the graph of `engine/mod.rs`: nests as [`ORDER`] says.
    Graph,
    /// Innermost: taken under anything, nothing taken under it.
    Leaf,
    /// Held while a caller's closure runs: anything under it, only user
    /// locks above it.
    User,
}

#[cfg(any(debug_assertions, test))]
impl Level {
    /// The name the lock legend uses, which reports print.
    pub(crate) fn name(self) -> &'static str {
        use Level::*;
        match self {
            WqAttrs => "WQ attrs",
            WqPrio => "WQ prio",
            WqNodeCpus => "WQ node_cpus",
            WqFlush => "WQ flush",
            WqOld => "WQ old",
            WqCur => "WQ cur",
            WqChain => "WQ chain",
            WqMayday => "WQ mayday",
            TDeliver => "T deliver",
            TState => "T state",
            Pool => "pool",
            Node => "N",
            Wait => "W",
            RBound => "R bound",
            RUnbound => "R unbound",
            RUsable => "R usable",
            RRegistry => "R registry",
            RUsableNow => "R usable_now",
            RLastCpuset => "R cpuset",
            WqJoin => "WQ join",
            SpawnFn => "spawn f",
            SpawnSlot => "spawn slot",
            TimerStart => "T starting",
            WatchdogStart => "watchdog starting",
            PolicyEnv => "R policy",
            #[cfg(feature = "control")]
            ControlServer => "control server",
            BoundedRoom => "bounded room",
            ScopePending => "scope pending",
            ScopePanic => "scope panic",
            ScopeSlot => "scope slot",
            WorkerHooks => "worker hooks",
            PerCpuSlot => "percpu slot",
            PerCpuMailbox => "percpu mailbox",
            #[cfg(test)]
            TestOuter => "test outer",
            #[cfg(test)]
            TestInner => "test inner",
        }
    }

    fn kind(self) -> Kind {
        use Level::*;
        match self {
            WqAttrs | WqPrio | WqNodeCpus | WqFlush | WqOld | WqCur | WqChain | WqMayday
            | TDeliver | TState | Pool | Node | Wait | RBound | RUnbound | RUsable => Kind::Graph,
            PerCpuSlot | PerCpuMailbox => Kind::User,
            #[cfg(test)]
            TestOuter | TestInner => Kind::Graph,
            _ => Kind::Leaf,
        }
    }
}

/// The graph at the top of `engine/mod.rs`, one arrow a row: the left lock
/// may be held while the right one is taken. A lock may also be taken under
/// any lock from which a path of arrows leads to it.
#[cfg(any(debug_assertions, test))]
const ORDER: &[(Level, Level)] = {
    use Level::*;
    &[
        (WqAttrs, WqPrio),
        (WqAttrs, WqNodeCpus),
        (WqAttrs, WqFlush),
        (WqFlush, WqOld),
        (WqOld, WqCur),
        (WqOld, Pool),
        (WqFlush, WqCur),
        (WqFlush, WqNodeCpus),
        (WqFlush, WqChain),
        (WqFlush, RBound),
        (WqFlush, RUnbound),
        (WqFlush, Pool),
        (WqChain, Pool),
        (TDeliver, TState),
        (TDeliver, WqOld),
        (TDeliver, Pool),
        (Pool, Node),
        (Pool, WqMayday),
        (Pool, Wait),
        (RBound, RUsable),
        (RUsable, Pool),
    ]
};

/// The unit tests' own arrow, beside the written ones.
#[cfg(test)]
const TEST_ORDER: &[(Level, Level)] = &[(Level::TestOuter, Level::TestInner)];
#[cfg(all(debug_assertions, not(test)))]
const TEST_ORDER: &[(Level, Level)] = &[];

/// Whether a path of [`ORDER`]'s arrows leads from `from` to `to`. It
/// allocates nothing (locks are taken on paths that must not allocate, see
/// `tests/engine_alloc.rs`): the levels seen and to visit are bit sets.
#[cfg(any(debug_assertions, test))]
fn reaches(from: Level, to: Level) -> bool {
    let bit = |l: Level| 1u64 << (l as u32);
    let (mut todo, mut seen) = (bit(from), 0u64);
    while todo != 0 {
        let a = todo.trailing_zeros();
        todo &= todo - 1;
        for &(x, y) in ORDER.iter().chain(TEST_ORDER) {
            if x as u32 == a && seen & bit(y) == 0 {
                if y == to {
                    return true;
                }
                seen |= bit(y);
                todo |= bit(y);
            }
        }
    }
    false
}

/// Whether `taking` may be taken while `held` is held (the module docs'
/// rules).
#[cfg(any(debug_assertions, test))]
fn may_nest(held: Level, taking: Level) -> bool {
    match (held.kind(), taking.kind()) {
        (Kind::User, _) => true,
        (_, Kind::User) => false,
        (Kind::Leaf, _) => false,
        (_, Kind::Leaf) => true,
        (Kind::Graph, Kind::Graph) => reaches(held, taking),
    }
}

#[cfg(all(debug_assertions, feature = "control"))]
pub(crate) use checked::tried;
#[cfg(debug_assertions)]
pub(crate) use checked::{MutexGuard, acquire};

/// The run-time half, in debug builds only.
#[cfg(debug_assertions)]
mod checked {
    use std::cell::RefCell;
    use std::ops::{Deref, DerefMut};
    use std::panic::Location;

    use super::{Level, may_nest};

    /// One lock this thread holds: its level and where it was taken.
    #[derive(Clone, Copy)]
    pub(crate) struct Held {
        level: Level,
        at: &'static Location<'static>,
    }

    /// The most locks one thread holds at once; the engine nests at most
    /// five, so more is a leak of records (a bug of this module).
    const DEPTH: usize = 16;

    /// The locks a thread holds, in the order it took them, in a fixed
    /// array: recording a lock allocates nothing.
    struct Stack {
        held: [Option<Held>; DEPTH],
        len: usize,
    }

    thread_local! {
        /// The locks this thread holds.
        static HELD: RefCell<Stack> = const {
            RefCell::new(Stack { held: [None; DEPTH], len: 0 })
        };
    }

    impl Stack {
        fn iter(&self) -> impl Iterator<Item = &Held> {
            self.held[..self.len].iter().flatten()
        }
    }

    /// Checks that `level`, taken at the caller's place, may be taken under
    /// every lock this thread holds, and panics naming both locks if not.
    /// Called before the lock blocks; the returned record goes into the
    /// guard once the lock is held.
    #[track_caller]
    pub(crate) fn acquire(level: Level) -> Held {
        let at = Location::caller();
        if std::thread::panicking() {
            // Unwinding from a report (or any panic): the locks its drops
            // take are not checked, so the first report is the one seen
            // and a second cannot turn the panic into an abort.
            return Held { level, at };
        }
        let bad = HELD
            .try_with(|h| {
                h.borrow()
                    .iter()
                    .find(|held| !may_nest(held.level, level))
                    .copied()
            })
            .ok()
            .flatten();
        if let Some(held) = bad {
            let (taking, held_name) = (level.name(), held.level.name());
            panic!(
                "lock order: taking `{taking}` while holding `{held_name}`: the order \
                 written in engine/mod.rs has no `{held_name} -> {taking}` (`{held_name}` \
                 taken at {}, `{taking}` at {at})",
                held.at
            );
        }
        Held { level, at }
    }

    /// The record of a lock taken by a try, which cannot deadlock and so is
    /// not checked.
    #[track_caller]
    #[cfg(feature = "control")]
    pub(crate) fn tried(level: Level) -> Held {
        Held {
            level,
            at: Location::caller(),
        }
    }

    /// Records `held` as held by this thread.
    fn push(held: Held) {
        let _ = HELD.try_with(|h| {
            let mut h = h.borrow_mut();
            assert!(
                h.len < DEPTH,
                "lock order: more than {DEPTH} locks held by one thread"
            );
            let n = h.len;
            h.held[n] = Some(held);
            h.len += 1;
        });
    }

    /// Forgets the latest record of `level` (guards may drop in any order).
    fn pop(level: Level) {
        let _ = HELD.try_with(|h| {
            let mut h = h.borrow_mut();
            let n = h.len;
            if let Some(i) = h.held[..n]
                .iter()
                .rposition(|x| x.is_some_and(|x| x.level == level))
            {
                h.held.copy_within(i + 1..n, i);
                h.held[n - 1] = None;
                h.len -= 1;
            }
        });
    }

    /// A held [`Mutex`](crate::sync::Mutex) that takes its level off the
    /// thread's list when dropped. `inner` is `None` only while a condition
    /// variable waits with it.
    pub(crate) struct MutexGuard<'a, T: ?Sized + 'a> {
        inner: Option<std::sync::MutexGuard<'a, T>>,
        level: Level,
    }

    impl<'a, T: ?Sized> MutexGuard<'a, T> {
        /// Wraps a lock just taken, recording it as held.
        pub(crate) fn new(g: std::sync::MutexGuard<'a, T>, held: Held) -> Self {
            push(held);
            MutexGuard {
                inner: Some(g),
                level: held.level,
            }
        }

        /// Runs `f` (a condition variable's wait) on `std`'s guard; the
        /// record stays, as the lock is held again when `f` returns.
        pub(crate) fn with_std(
            mut self,
            f: impl FnOnce(std::sync::MutexGuard<'a, T>) -> std::sync::MutexGuard<'a, T>,
        ) -> Self {
            let g = self
                .inner
                .take()
                .expect("a guard outside a wait holds its lock");
            self.inner = Some(f(g));
            self
        }
    }

    impl<T: ?Sized> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.inner
                .as_deref()
                .expect("a guard outside a wait holds its lock")
        }
    }

    impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.inner
                .as_deref_mut()
                .expect("a guard outside a wait holds its lock")
        }
    }

    impl<T: ?Sized> Drop for MutexGuard<'_, T> {
        fn drop(&mut self) {
            // The lock goes first, then the record.
            drop(self.inner.take());
            pop(self.level);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind, Level, ORDER, reaches};

    /// The level a name of the graph in `engine/mod.rs` stands for.
    fn level_named(name: &str) -> Level {
        use Level::*;
        let all = [
            WqAttrs, WqPrio, WqNodeCpus, WqFlush, WqOld, WqCur, WqChain, WqMayday, TDeliver,
            TState, Pool, Node, Wait, RBound, RUnbound, RUsable,
        ];
        all.into_iter()
            .find(|l| l.name() == name)
            .unwrap_or_else(|| panic!("engine/mod.rs's graph names `{name}`, which no Level has"))
    }

    /// The arrows the text of `engine/mod.rs`'s graph draws: each line is a
    /// chain `A -> B -> C`, where a link may list alternatives `B | C`.
    fn written_edges() -> Vec<(Level, Level)> {
        let src = include_str!("../engine/mod.rs");
        let start = src
            .find("//! ```text\n")
            .expect("engine/mod.rs draws its lock graph");
        let body = &src[start + "//! ```text\n".len()..];
        let body = &body[..body.find("//! ```").expect("the graph's block ends")];
        let mut edges = Vec::new();
        for line in body.lines() {
            let line = line.trim_start_matches("//!").trim();
            let links: Vec<Vec<Level>> = line
                .split("->")
                .map(|part| part.split('|').map(|n| level_named(n.trim())).collect())
                .collect();
            for pair in links.windows(2) {
                for &a in &pair[0] {
                    for &b in &pair[1] {
                        edges.push((a, b));
                    }
                }
            }
        }
        edges
    }

    #[test]
    fn the_order_table_is_the_graph_engine_mod_draws() {
        let mut written = written_edges();
        let mut table = ORDER.to_vec();
        let key = |e: &(Level, Level)| (e.0 as u8, e.1 as u8);
        written.sort_by_key(key);
        written.dedup();
        table.sort_by_key(key);
        assert_eq!(written, table);
        for (a, b) in table {
            assert!(a.kind() == Kind::Graph && b.kind() == Kind::Graph);
            assert!(
                !reaches(b, a),
                "the order has a cycle through {a:?} and {b:?}"
            );
        }
    }

    #[test]
    fn the_graph_allows_paths_and_forbids_two_of_a_kind() {
        use Level::*;
        // (held, taken, allowed, why)
        let cases = [
            (WqAttrs, Pool, true, "attrs -> flush -> pool"),
            (WqFlush, Wait, true, "flush -> pool -> W"),
            (Pool, Pool, false, "pools never nest"),
            (Pool, WqFlush, false, "no path back up"),
            (Pool, RRegistry, true, "a leaf under anything"),
            (RRegistry, Pool, false, "nothing under a leaf"),
            (PerCpuSlot, WqAttrs, true, "anything under a user lock"),
            (Pool, PerCpuSlot, false, "no caller code under the engine"),
        ];
        for (held, taken, allowed, why) in cases {
            assert_eq!(super::may_nest(held, taken), allowed, "{why}");
        }
    }
}
