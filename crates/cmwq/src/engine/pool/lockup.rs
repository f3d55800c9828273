//! The lockup watchdog (the kernel's `wq_watchdog`), and the switch that hides
//! a worker from concurrency management (the kernel's `PF_WQ_WORKER`).
//!
//! # Lockups
//!
//! A pool is *stuck* when items wait on its worklist and no item has started
//! in it for [`watchdog_thresh`] seconds (the kernel's
//! `workqueue.watchdog_thresh`, 30 by default, 0 off; here
//! `CMWQ_WATCHDOG_THRESH`, [`set_watchdog_thresh`], or `cmwq set --pid P
//! workqueue watchdog_thresh N`). Items starting is what counts, not items
//! finishing: a pool whose workers all run long items while others start is
//! moving, and a pool with one long item and nothing waiting is merely busy.
//! Neither is reported.
//!
//! The watchdog's tick calls [`sweep`] (at most every [`LOOK_EVERY`]); it
//! looks at each pool under its lock: a count of items started, bumped by
//! the worker as it starts one ([`Watch::started`]), and whether anything
//! waits. The clock of a pool restarts whenever it has nothing waiting or an
//! item started since the last look; a pool whose clock passes the threshold
//! is reported once, on stderr, in the kernel's words:
//!
//! ```text
//! BUG: workqueue lockup - pool cpus=1 node=0 flags=0x0 nice=0 stuck for 31s!
//! Showing busy workqueues and worker pools:
//! workqueue events: flags=0x0
//!   pwq 3: cpus=1 node=0 flags=0x0 nice=0 active=2/256 refcnt=3
//!     in-flight: 4242:my_crate::handler::{{closure}}
//!     pending: my_crate::other::{{closure}}
//! pool 3: cpus=1 node=0 flags=0x0 nice=0 hung=31s workers=2 idle: 4243
//! ```
//!
//! `pwq N` and `pool N` name the pool's id (as `cmwq dump` does); an
//! in-flight item is `thread id:item`, an item being the callback's type (a
//! closure is named after the function that made it) or, for the C API, the
//! C function's symbol. It is reported again only after the pool moved (an
//! item started, or nothing waits) and then stuck again. What user space
//! cannot do: print the stuck workers' backtraces, as recent kernels do.
//!
//! The watchdog thread parks while no worker is busy; a pool with waiting
//! work always has a busy worker or starves (and then keeps the watchdog
//! awake), so no stuck pool goes unseen. When the watchdog was away (parked,
//! or the process stopped) for more than [`GAP`], every clock restarts, as
//! the kernel's `touch_softlockup_watchdog` does after a suspended VM, so a
//! pause is not mistaken for a lockup.
//!
//! # Hiding a worker from concurrency management
//!
//! In the kernel a kworker whose item clears `PF_WQ_WORKER` from its task
//! flags and then sleeps is invisible to concurrency management: the
//! scheduler does not call `wq_worker_sleeping`, `nr_running` keeps counting
//! it, and items queued behind it on its pool wait (the kernel's
//! `samples/workqueue/stall_detector` does this to make the watchdog fire).
//! [`set_cm_exempt`] is the same switch for the calling worker: neither the
//! [`blocking`](super::blocking) annotation nor the /proc sampler nor the
//! CPU-intensive tick looks at it while it is set. The C API's kcompat layer
//! sets it from `current->flags`.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{MAX_POOLS, NEXT_POOL, Pool, PoolInner, WORKER, get_pool};
use crate::engine::work::Label;
use crate::topology::format_cpulist;
use crate::trace;

/// The kernel's default `watchdog_thresh`: 30 s.
pub(crate) const DFL_WATCHDOG_THRESH: u64 = 30;
/// How often the pools are looked at (the kernel's timer fires every
/// quarter of the threshold; this is finer and cheap).
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(100);
/// Looks further apart than this mean the watchdog was away: clocks restart.
pub(crate) const GAP: Duration = Duration::from_secs(1);

/// A: the threshold in seconds, 0: off. `Relaxed`: a setting read on its own.
static THRESH_S: AtomicU64 = AtomicU64::new(DFL_WATCHDOG_THRESH);

/// Sets the lockup watchdog's threshold in seconds: a pool with items waiting
/// and none started for this long is reported on stderr (see the README's
/// "Reading a lockup report"). 0 turns the watchdog off. The kernel's
/// `workqueue.watchdog_thresh`; the default, 30, can be set with
/// `CMWQ_WATCHDOG_THRESH`.
pub fn set_watchdog_thresh(secs: u64) {
    THRESH_S.store(secs, Ordering::Relaxed);
}

/// The lockup watchdog's threshold in seconds (0: off).
pub fn watchdog_thresh() -> u64 {
    THRESH_S.load(Ordering::Relaxed)
}

/// Hides the calling worker from concurrency management (`true`) or shows it
/// again (`false`), as clearing and setting the kernel's `PF_WQ_WORKER` does:
/// while hidden, it keeps counting as running, whatever it does, so items
/// behind it on its pool wait. Returns false when the caller is not a pool's
/// worker. For the C API's `current->flags`; the C API clears it when the
/// item returns.
#[doc(hidden)]
pub fn set_cm_exempt(exempt: bool) -> bool {
    let Some((pid, me)) = WORKER.with(|w| w.get()) else {
        return false;
    };
    let Some(pool) = get_pool(pid) else {
        return false;
    };
    pool.lock().workers[me].cm_exempt = exempt;
    true
}

/// The watchdog's view of one pool. Every field is `L:`.
#[derive(Default)]
pub(super) struct Watch {
    /// L: items started in the pool (the worker bumps it as it starts one).
    pub(super) started: u64,
    /// L: `started` at the last look.
    seen: u64,
    /// L: when the pool last moved (started an item, or had nothing waiting),
    /// as seen by the looks (the kernel's `watchdog_ts`).
    ts: Option<Instant>,
    /// L: the last look.
    last_look: Option<Instant>,
    /// L: this stall was reported.
    reported: bool,
    /// L: stalls reported.
    pub(super) lockups: u64,
}

impl Watch {
    /// One look. Returns how long the pool has been stuck when this look
    /// finds a stall not reported yet.
    fn look(&mut self, waiting: bool, now: Instant, thresh: Duration) -> Option<Duration> {
        let away = self
            .last_look
            .is_none_or(|t| now.saturating_duration_since(t) > GAP);
        self.last_look = Some(now);
        if away || !waiting || self.started != self.seen {
            self.seen = self.started;
            self.ts = Some(now);
            self.reported = false;
            return None;
        }
        let stuck = now.saturating_duration_since(self.ts?);
        if stuck < thresh || self.reported {
            return None;
        }
        self.reported = true;
        self.lockups += 1;
        Some(stuck)
    }

    /// How long the pool's waiting items have waited with nothing started
    /// (0 when nothing waits): the `hung=` of the report.
    fn hung(&self, waiting: bool, now: Instant) -> Duration {
        match self.ts {
            Some(ts) if waiting => now.saturating_duration_since(ts),
            _ => Duration::ZERO,
        }
    }
}

thread_local! {
    /// The watchdog thread's next sweep.
    static NEXT_SWEEP: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Every pool created so far.
fn pools() -> impl Iterator<Item = &'static Pool> {
    let n = (NEXT_POOL.load(Ordering::Relaxed) as usize).min(MAX_POOLS);
    (0..n as u32).filter_map(get_pool)
}

/// The lockup check, called on every watchdog tick: looks at each pool (one
/// lock at a time) every [`LOOK_EVERY`], and reports the pools found stuck.
pub(crate) fn sweep(now: Instant) {
    if NEXT_SWEEP.with(|n| n.get()).is_some_and(|t| now < t) {
        return;
    }
    NEXT_SWEEP.with(|n| n.set(Some(now + LOOK_EVERY)));
    let thresh = watchdog_thresh();
    if thresh == 0 {
        return;
    }
    let thresh = Duration::from_secs(thresh);
    let stuck: Vec<(&'static Pool, Duration)> = pools()
        .filter_map(|p| {
            let mut g = p.lock();
            let waiting = g.has_work();
            g.lockup.look(waiting, now, thresh).map(|d| (p, d))
        })
        .collect();
    if stuck.is_empty() {
        return;
    }
    let mut out = String::new();
    for &(p, d) in &stuck {
        let flags = p.flags(&p.lock());
        let _ = writeln!(
            out,
            "BUG: workqueue lockup - pool {} stuck for {}s!",
            p.info(flags),
            d.as_secs()
        );
        trace::lockup(p.id, d.as_secs());
    }
    show_all(&mut out, now, None);
    // One write, so the report is not interleaved with other output.
    eprint!("{out}");
}

impl Pool {
    /// The kernel's `pr_cont_pool_info`: `cpus=<list> node=<n> flags=0x<f>
    /// nice=<n>`.
    fn info(&self, flags: u32) -> String {
        let a = &self.attrs;
        let topo = crate::engine::workqueue::system_topology();
        let mut nodes = a.cpus.iter().map(|&c| topo.cpu_node(c));
        let first = nodes.next();
        // A pool spread over several nodes has none (NUMA_NO_NODE).
        let node = match first {
            Some(n) if nodes.all(|m| m == n) => n as i64,
            _ => -1,
        };
        format!(
            "cpus={} node={node} flags=0x{flags:x} nice={}",
            format_cpulist(&a.cpus),
            a.prio.nice()
        )
    }
}

/// One pwq with something active or held back, as read under its pool's lock.
struct PwqView {
    wq_id: u64,
    wq_name: String,
    wq_flags: u32,
    pool: u32,
    info: String,
    active: usize,
    max_active: usize,
    in_flight: usize,
    /// (thread id, item, a rescuer).
    running: Vec<(i32, Label, bool)>,
    pending: Vec<Label>,
    inactive: Vec<Label>,
}

/// The kernel's `show_all_workqueues`: every workqueue with items active or
/// held back, pwq by pwq (what runs, what waits), then every pool with a
/// busy worker. `only`: the workqueue of that id alone, without the header
/// line and the pools (the kernel's `show_one_workqueue`).
pub(super) fn show_all(out: &mut String, now: Instant, only: Option<u64>) {
    if only.is_none() {
        out.push_str("Showing busy workqueues and worker pools:\n");
    }
    let mut views = Vec::new();
    let mut pool_lines = Vec::new();
    for p in pools() {
        let g = p.lock();
        let info = p.info(p.flags(&g));
        pwq_views(p, &g, &info, only, &mut views);
        if only.is_none() {
            pool_lines.extend(busy_pool_line(p, &g, &info, now));
        }
    }
    // Labels are looked up with no pool lock held (a C symbol is read from
    // the program's symbol table).
    views.sort_by_key(|v| (v.wq_id, v.pool));
    let mut last = None;
    for v in &views {
        if last != Some(v.wq_id) {
            let _ = writeln!(out, "workqueue {}: flags=0x{:x}", v.wq_name, v.wq_flags);
            last = Some(v.wq_id);
        }
        write_pwq(out, v);
    }
    for l in pool_lines {
        out.push_str(&l);
        out.push('\n');
    }
}

/// The pwqs of pool `p` (its lock held: `g`) with something active or held
/// back, of workqueue `only` if given, added to `views`.
fn pwq_views(p: &Pool, g: &PoolInner, info: &str, only: Option<u64>, views: &mut Vec<PwqView>) {
    for (slot, pwq) in g.pwqs.iter().enumerate() {
        let Some(wq) = &pwq.wq else { continue };
        if only.is_some_and(|id| id != wq.id) {
            continue;
        }
        if pwq.nr_active == 0 && pwq.inactive.is_empty() {
            continue;
        }
        let slot = slot as u32;
        let running = g
            .workers
            .iter()
            .filter(|w| w.current != 0 && w.current_pwq == slot)
            .map(|w| (w.tid, w.label, w.state == super::WState::Rescuer))
            .collect();
        let pending = g
            .waiting()
            .chain(g.workers.iter().flat_map(|w| w.scheduled.iter()))
            .filter(|it| it.pwq() == slot)
            .map(|it| it.work.func.label())
            .collect();
        views.push(PwqView {
            wq_id: wq.id,
            wq_name: wq.name.clone(),
            wq_flags: wq.flags.bits() | if wq.ordered { 1 << 17 } else { 0 },
            pool: p.id,
            info: info.to_string(),
            active: pwq.nr_active,
            max_active: pwq.max_active,
            in_flight: pwq.nr_in_flight,
            running,
            pending,
            inactive: pwq.inactive.iter().map(|it| it.work.func.label()).collect(),
        });
    }
}

/// Pool `p`'s line (its lock held: `g`) if a worker of it is busy: how long
/// it has made no progress, its workers and its idle ones.
fn busy_pool_line(p: &Pool, g: &PoolInner, info: &str, now: Instant) -> Option<String> {
    if g.nr_workers <= g.nr_idle() {
        return None;
    }
    let waiting = g.has_work();
    let mut line = format!(
        "pool {}: {info} hung={}s workers={}",
        p.id,
        g.lockup.hung(waiting, now).as_secs(),
        g.nr_workers
    );
    let idle = g
        .lanes
        .iter()
        .flat_map(|l| l.idle.iter())
        .map(|&i| g.workers[i].tid);
    for (k, tid) in idle.enumerate() {
        let _ = write!(line, " {}{tid}", if k == 0 { "idle: " } else { "" });
    }
    Some(line)
}

/// One pwq's lines: its pool and counts, what runs, what waits.
fn write_pwq(out: &mut String, v: &PwqView) {
    let _ = writeln!(
        out,
        "  pwq {}: {} active={}/{} refcnt={}",
        v.pool,
        v.info,
        v.active,
        v.max_active,
        v.in_flight + 1
    );
    if !v.running.is_empty() {
        let items: Vec<String> = v
            .running
            .iter()
            .map(|&(tid, l, rescuer)| {
                format!(
                    "{tid}{}:{}",
                    if rescuer { "(RESCUER)" } else { "" },
                    l.text()
                )
            })
            .collect();
        let _ = writeln!(out, "    in-flight: {}", items.join(", "));
    }
    for (what, labels) in [("pending", &v.pending), ("inactive", &v.inactive)] {
        if !labels.is_empty() {
            let _ = writeln!(out, "    {what}: {}", runs(labels));
        }
    }
}

/// Labels as the kernel lists them: a run of the same one as `N*name`.
fn runs(labels: &[Label]) -> String {
    let texts: Vec<String> = labels.iter().map(|l| l.text()).collect();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < texts.len() {
        let n = texts[i..].iter().take_while(|t| **t == texts[i]).count();
        parts.push(if n > 1 {
            format!("{n}*{}", texts[i])
        } else {
            texts[i].clone()
        });
        i += n;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_reported_once_and_progress_rearms() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let thresh = Duration::from_secs(1);
        let mut w = Watch::default();
        assert_eq!(
            w.look(true, at(0), thresh),
            None,
            "the first look starts the clock"
        );
        assert_eq!(w.look(true, at(500), thresh), None);
        assert_eq!(w.look(true, at(1000), thresh), Some(Duration::from_secs(1)));
        assert_eq!(w.look(true, at(1500), thresh), None, "reported once");
        assert_eq!(w.lockups, 1);
        // An item starts: the clock restarts, and a new stall is reported.
        w.started += 1;
        assert_eq!(w.look(true, at(2000), thresh), None);
        assert_eq!(w.look(true, at(2900), thresh), None);
        assert!(w.look(true, at(3000), thresh).is_some());
        assert_eq!(w.lockups, 2);
    }

    #[test]
    fn moving_idle_or_paused_pools_are_not_stuck() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let thresh = Duration::from_secs(1);
        let mut w = Watch::default();
        // Items start between every look.
        for k in 0..30 {
            w.started += 1;
            assert_eq!(w.look(true, at(k * 100), thresh), None);
        }
        // Nothing waits (a single long item): never stuck.
        for k in 30..60 {
            assert_eq!(w.look(false, at(k * 100), thresh), None);
        }
        // The watchdog was away for longer than GAP: the clock restarts.
        assert_eq!(w.look(true, at(6000), thresh), None);
        assert_eq!(
            w.look(true, at(6000 + 1100 + GAP.as_millis() as u64), thresh),
            None
        );
        assert_eq!(w.lockups, 0);
    }

    #[test]
    fn runs_of_one_label_are_counted() {
        struct A;
        struct B;
        let (a, b) = (Label::of::<A>(), Label::of::<B>());
        let (ta, tb) = (a.text(), b.text());
        assert!(ta.ends_with("::A") && tb.ends_with("::B"), "{ta} {tb}");
        assert_eq!(runs(&[a, a, b, a]), format!("2*{ta}, {tb}, {ta}"));
    }
}
