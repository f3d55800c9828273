#![warn(missing_docs)]
// docs.rs (`--cfg docsrs`, nightly) marks the items a feature gates.
#![cfg_attr(docsrs, feature(doc_cfg))]
//! cmwq: the Linux kernel's concurrency-managed workqueue, in user space.
//!
//! A [`Work`] is a callback with the kernel's state word: queueing it while it is
//! pending returns false, it never runs on two workers of its workqueue at once, and it can be
//! flushed, cancelled (synchronously too), disabled and re-enabled. A
//! [`Workqueue`] maps work onto shared worker pools: one per CPU and priority for
//! bound queues, one per pod of an affinity scope for unbound queues, with pods
//! cut from the machine's topology exactly as the kernel cuts them
//! ([`topology`]). Bound pools are concurrency managed: one worker runs per CPU
//! unless it says it blocks ([`blocking`]) or its queue is `CPU_INTENSIVE`.
//! Wakeups are issued after the pool lock is released.
//!
//! ```
//! use cmwq::{DelayedWork, Work, Workqueue};
//! use std::time::Duration;
//!
//! let wq = Workqueue::builder("demo").unbound().max_active(4).build().unwrap();
//! let w = Work::new(|| {});
//! assert!(wq.queue(&w));
//! let dw = DelayedWork::new(|| {});
//! assert!(wq.queue_delayed(&dw, Duration::from_millis(5)));
//! assert!(!wq.queue_delayed(&dw, Duration::from_millis(5))); // already pending
//! dw.flush();
//! wq.flush();
//! ```
//!
//! Where user space forces a difference from the kernel, the item's docs say so.
//!
//! Whole programs are in the crate's `examples/` directory, each runnable with
//! `cargo run -p cmwq --example NAME`: `first_use`, `debounce` (a
//! [`DelayedWork`] re-armed on every event), `ordered`, `priorities`
//! ([`Priority`] and its fallback without `CAP_SYS_NICE`), `percpu_drain`
//! ([`percpu::PerCpu`] in QPW mode), `service_dump` ([`control::serve`],
//! read with `cmwq dump --pid PID`), `spawn`, `hooks` ([`set_worker_hooks`]),
//! `backpressure` ([`WorkqueueBuilder::max_queued`]) and `scoped`
//! ([`Workqueue::scope`]).
//!
//! # Stability
//!
//! The data types the crate hands out (the [`snapshot`](mod@snapshot) types,
//! [`WorkqueueStats`], [`PoolCounts`], [`WqAttrs`], [`CpuBudget`], the errors)
//! and the enums that may grow ([`topology::Scope`], [`Priority`],
//! [`percpu::Mode`], ...) are `#[non_exhaustive]`: a compatible release may add a
//! field or a variant, so read their fields and match them with a `_` arm,
//! but do not build them with a struct literal:
//!
//! ```compile_fail,E0639
//! let stats = cmwq::WorkqueueStats { queued: 1, ..Default::default() };
//! ```
//!
//! ```
//! let wq = cmwq::Workqueue::builder("read").build().unwrap();
//! let stats = wq.stats();
//! assert_eq!(stats.queued, 0);
//! ```
//!
//! Items marked `#[doc(hidden)]` are plumbing for `cmwq-cli`, `cmwq-capi`
//! and the crate's tests, not part of the API. The README's "Stability"
//! section says what else may change before 1.0.

#[cfg(feature = "control")]
#[cfg_attr(docsrs, doc(cfg(feature = "control")))]
pub mod control;
pub mod cpuset;
mod engine;
mod error;
pub mod hist;
mod hooks;
mod params;
pub mod percpu;
mod priority;
pub mod quota;
mod sched;
pub mod snapshot;
mod switches;
mod sync;
pub mod topology;
mod trace;
mod types;

/// The engine's leaves for `tests/loom_models.rs` (`--cfg loom` builds only).
#[cfg(loom)]
#[doc(hidden)]
pub use engine::loom_api as __loom;

/// What the engine calls in the layers above it (see `engine::Hooks`).
const ENGINE_HOOKS: engine::Hooks = engine::Hooks {
    #[cfg(feature = "control")]
    control_autostart: control::autostart,
    // Built without the endpoint: `CMWQ_CONTROL=1` has nothing to start; say
    // so once rather than leave `cmwq dump` to find no socket.
    #[cfg(not(feature = "control"))]
    control_autostart: || {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            eprintln!(
                "cmwq: CMWQ_CONTROL=1 ignored: this build of cmwq has no control endpoint \
                 (the `control` feature is off)"
            );
        });
    },
};

#[doc(hidden)]
pub use engine::set_cm_exempt;
pub use engine::{
    BlockingGuard, CpuBudget, DFL_SPREAD_THRESH, DFL_WORKER_STACK, DelayedWork, JobScope,
    JoinError, JoinHandle, MAYDAY_INITIAL_TIMEOUT, QueueFull, ScopedJoinHandle,
    TICK as WATCHDOG_TICK, Work, Workqueue, WorkqueueBuilder, blocking, cpu_budget, cpu_changes,
    cpu_intensive_thresh, current_is_rescuer, engine_thread_panics, panic_reports_failed,
    partner_kicks, set_cpu_intensive_thresh, set_cpu_quota_mode, set_idle_timeout, set_panic_hook,
    set_spread_thresh, set_watchdog_thresh, set_worker_stack_size, show_all_workqueues,
    sleeper_takeovers, snapshot, spread_thresh, system, system_highpri, system_long,
    system_unbound, watchdog_looks, watchdog_thresh, watchdog_ticks, worker_stack_size,
    workqueue_names,
};
#[cfg(feature = "failure-injection")]
#[cfg_attr(docsrs, doc(cfg(feature = "failure-injection")))]
pub use engine::{
    InjectedPanic, debug_fail_worker_creation, debug_inject_panic, debug_kill_next_worker,
    debug_pause_looks, debug_pause_tick_spread, debug_use_topology,
};
pub use error::Error;
pub use hooks::{WorkerHooks, WorkerInfo, set_worker_hooks, worker_hook_panics};
pub use priority::{HighpriPolicy, Priority, highpri_policy, set_highpri_policy};
pub use snapshot::Snapshot;
pub use switches::{BlockDetection, block_detection};
pub use types::{
    DFL_ACTIVE, MAX_ACTIVE, MIN_ACTIVE, PoolCounts, UnboundConcurrency, WakeMode, WorkqueueStats,
    WqAttrs, WqFlags,
};

/// Checks every `CMWQ_*` variable now, for a service that wants a bad value
/// to stop it at startup rather than at its first `build()`: it refuses
/// whatever a build would refuse, with the same error.
///
/// ```
/// cmwq::check_env().expect("the CMWQ_* variables parse");
/// ```
pub fn check_env() -> Result<(), Error> {
    engine::check_env()?;
    if percpu::Mode::from_env().is_err() {
        return Err(Error::BadEnv {
            var: percpu::QPW_ENV.into(),
            value: std::env::var_os(percpu::QPW_ENV)
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_default(),
            expected: "0 or 1".into(),
        });
    }
    Ok(())
}
