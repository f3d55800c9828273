//! What an operator wants to hear about, as `tracing` events (cargo feature
//! `tracing`, off by default).
//!
//! The engine calls one function of this module, in one line, at each place
//! where something worth a log line happens: a work item panicked, a pool
//! starved and sent mayday, a rescuer ran a starving pool's work, a worker
//! was created or culled, the watchdog found a CPU-intensive item or a worker
//! sleeping in an item it was not told about, a workqueue's attributes
//! changed while it ran, a priority was refused and a lower one used.
//!
//! Without the feature every function is an empty `#[inline(always)]` body:
//! nothing is compiled in, no dependency is pulled. With it, each function is
//! one `tracing` event whose callsite the subscriber's filter caches, so an
//! event nobody listens to costs a load and a branch. None of these events
//! sits on the queueing path.
//!
//! Every event has the target `cmwq` (filter with `RUST_LOG=cmwq=debug` and
//! the like), a constant message naming what happened, and fields an
//! operator can filter on:
//!
//! | message | level | fields |
//! |---|---|---|
//! | `work item panicked` | ERROR | `workqueue`, `payload` |
//! | `mayday: pool starves, rescuer called` | WARN | `pool`, `workqueue` |
//! | `rescuer runs a starving pool's work` | INFO | `pool`, `workqueue` |
//! | `worker created` | DEBUG | `pool`, `worker`, `tid` |
//! | `worker culled` | DEBUG | `pool`, `worker`, `tid`, `reason` (`idle` or `pool released`) |
//! | `cpu-intensive work item` | INFO | `pool`, `tid`, `workqueue` |
//! | `worker sleeps in a work item` | INFO | `pool`, `tid`, `workqueue` |
//! | `workqueue attributes changed` | INFO | `workqueue`, `attrs` (or `max_active`) |
//! | `priority fallback` | WARN | `workqueue`, `note` |
//! | `workqueue lockup` | ERROR | `pool`, `stuck_s` |
//! | `usable CPUs changed` | INFO | `cpus` |
//! | `pool disassociated` | INFO | `pool`, `cpu` |
//! | `pool workers rebound` | INFO | `pool`, `cpu` |
//!
//! `worker culled`, `cpu-intensive work item` and `worker sleeps in a work
//! item` fire with the pool's lock held, `workqueue attributes changed` with
//! the workqueue's attrs lock held: a subscriber must not queue, flush or
//! reconfigure cmwq work synchronously from its `event` callback (handing the
//! record to another thread, as log writers do, is fine).

/// The name of a pwq's workqueue (`?`: the pwq is gone).
#[cfg(feature = "tracing")]
fn name(wq: Option<&str>) -> &str {
    wq.unwrap_or("?")
}

/// What a work item panicked with.
type Payload<'a> = &'a (dyn std::any::Any + Send);

/// The text of a panic payload: a `&str` or a `String` (what `panic!` and
/// `expect` give); `None` for a payload of any other type. Every place that
/// words a panic (the panic hook, the worker hooks, `JoinError::message`,
/// the service threads' reports, the events here) reads it through this.
pub(crate) fn payload_str(p: Payload<'_>) -> Option<&str> {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
}

/// [`payload_str`], or words that say the payload is not text.
#[cfg(feature = "tracing")]
fn payload_text(p: Payload<'_>) -> &str {
    payload_str(p).unwrap_or("non-string panic payload")
}

/// A work item on workqueue `wq` panicked with `payload` (caught; the worker
/// lives on).
#[inline(always)]
pub(crate) fn work_panicked(wq: &str, payload: Payload<'_>) {
    #[cfg(feature = "tracing")]
    tracing::error!(target: "cmwq", workqueue = wq, payload = payload_text(payload), "work item panicked");
    #[cfg(not(feature = "tracing"))]
    let _ = (wq, payload);
}

/// Pool `pool` starved past the mayday timeout and asked `wq`'s rescuer for help.
#[inline(always)]
pub(crate) fn mayday(pool: u32, wq: &str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "cmwq", pool, workqueue = wq, "mayday: pool starves, rescuer called");
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, wq);
}

/// `wq`'s rescuer takes a turn on starving pool `pool`.
#[inline(always)]
pub(crate) fn rescue(pool: u32, wq: &str) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "cmwq", pool, workqueue = wq, "rescuer runs a starving pool's work");
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, wq);
}

/// A new worker (slot `worker` of pool `pool`) started; called on that
/// worker's own thread, whose thread id the event carries.
#[inline(always)]
pub(crate) fn worker_created(pool: u32, worker: usize) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "cmwq", pool, worker, tid = crate::sched::gettid(), "worker created");
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, worker);
}

/// A worker leaves its pool: idle too long beyond the cull rule, or the pool
/// was released (`dying`). Called on that worker's own thread.
#[inline(always)]
pub(crate) fn worker_culled(pool: u32, worker: usize, dying: bool) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "cmwq",
        pool,
        worker,
        tid = crate::sched::gettid(),
        reason = if dying { "pool released" } else { "idle" },
        "worker culled"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, worker, dying);
}

/// The watchdog found worker `tid` of pool `pool` running one item of workqueue `wq`
/// (`None`: its pwq is gone) past the CPU-intensive threshold; it no longer holds back the pool.
#[inline(always)]
pub(crate) fn cpu_intensive(pool: u32, tid: i32, wq: Option<&str>) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "cmwq", pool, tid, workqueue = name(wq), "cpu-intensive work item");
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, tid, wq);
}

/// The `/proc` sampler found worker `tid` of pool `pool` asleep (a thread
/// in `S` or `D` state) in an item of workqueue `wq` (`None`: its pwq is gone) that did not say it blocks.
#[inline(always)]
pub(crate) fn blocked_sampled(pool: u32, tid: i32, wq: Option<&str>) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "cmwq", pool, tid, workqueue = name(wq), "worker sleeps in a work item");
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, tid, wq);
}

/// Workqueue `wq`'s attributes were changed while it runs to `attrs`.
#[inline(always)]
pub(crate) fn attrs_changed(wq: &str, attrs: &crate::WqAttrs) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "cmwq", workqueue = wq, attrs = ?attrs, "workqueue attributes changed");
    #[cfg(not(feature = "tracing"))]
    let _ = (wq, attrs);
}

/// Workqueue `wq`'s `max_active` was set to `n` while it runs.
#[inline(always)]
pub(crate) fn max_active_changed(wq: &str, n: usize) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "cmwq", workqueue = wq, max_active = n, "workqueue attributes changed");
    #[cfg(not(feature = "tracing"))]
    let _ = (wq, n);
}

/// Workqueue `wq` was refused the priority it asked for and runs at a lower
/// one; `note` (when set) says which and why. Nothing happens when `note` is
/// `None` (the priority was granted).
#[inline(always)]
pub(crate) fn priority_fallback(wq: &str, note: Option<&str>) {
    #[cfg(feature = "tracing")]
    if let Some(note) = note {
        tracing::warn!(target: "cmwq", workqueue = wq, note, "priority fallback");
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (wq, note);
}

/// The lockup watchdog found pool `pool` stuck: items wait and none started
/// for `stuck_s` seconds (the report itself goes to stderr).
#[inline(always)]
pub(crate) fn lockup(pool: u32, stuck_s: u64) {
    #[cfg(feature = "tracing")]
    tracing::error!(target: "cmwq", pool, stuck_s, "workqueue lockup");
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, stuck_s);
}

/// The CPUs the process may use changed (affinity or cpuset); `cpus` is the
/// new set.
#[inline(always)]
pub(crate) fn cpus_changed(cpus: &[usize]) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "cmwq", cpus = %crate::topology::format_cpulist(cpus), "usable CPUs changed");
    #[cfg(not(feature = "tracing"))]
    let _ = cpus;
}

/// Bound pool `pool`'s CPU `cpu` left the usable CPUs: the pool is
/// disassociated (its workers run anywhere, unmanaged).
#[inline(always)]
pub(crate) fn pool_disassociated(pool: u32, cpu: usize) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "cmwq", pool, cpu, "pool disassociated");
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, cpu);
}

/// Bound pool `pool`'s CPU `cpu` came back: its workers are bound to it again.
#[inline(always)]
pub(crate) fn pool_rebound(pool: u32, cpu: usize) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "cmwq", pool, cpu, "pool workers rebound");
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, cpu);
}
