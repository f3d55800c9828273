//! The isolation experiment: does draining every CPU's cache disturb a CPU that
//! runs a tight loop?
//!
//! A *loop* thread is pinned to one CPU (the last this process may use) and,
//! until told to stop, allocates and frees one object through its slot of a
//! `PerCpu<Magazine>`, reading the cycle counter after each iteration and
//! recording the gap since the previous one. A *drainer* thread, pinned to
//! another CPU when there is one, sleeps `drain_interval` and calls
//! `drain_all`, again and again, for `duration`. The drain function counts
//! the times it ran on the loop's CPU.
//!
//! In `Local` mode the drain of the loop's CPU is a work item on that CPU's
//! bound pool: a worker thread is woken there and the scheduler switches the
//! loop out for it. In `Qpw` mode the drainer takes the slot's lock on its own
//! CPU; the loop can only be held up if it reaches for the lock during the few
//! hundred nanoseconds the drain holds it. The loop's own involuntary context
//! switches (from `/proc/thread-self/status`) are reported next to the gaps:
//! on a shared machine other processes preempt the loop too, so compare the
//! modes within one run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::bench::sys;
use cmwq::percpu::{Mode, PerCpu};

use super::cache::{CAPACITY, Depot, Magazine};
use super::clock;

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct IsolationConfig {
    /// Modes, in table order (each runs once, one after the other).
    pub modes: Vec<Mode>,
    /// How long each mode's loop runs.
    pub duration: Duration,
    /// Sleep between two `drain_all` calls.
    pub drain_interval: Duration,
}

impl Default for IsolationConfig {
    fn default() -> Self {
        IsolationConfig {
            modes: vec![Mode::Local, Mode::Qpw],
            duration: Duration::from_millis(2000),
            drain_interval: Duration::from_millis(5),
        }
    }
}

/// One mode's result.
#[derive(Clone, Debug, Serialize)]
pub struct IsolationRow {
    /// The mode's name.
    pub mode: &'static str,
    /// The CPU the loop was pinned to.
    pub pinned_cpu: usize,
    /// The CPU the drainer was pinned to (`None`: only one CPU is available
    /// and both threads share it, which makes the experiment meaningless).
    pub drainer_cpu: Option<usize>,
    /// Loop iterations.
    pub iterations: u64,
    /// Loop iterations per second.
    pub iterations_per_sec: f64,
    /// `drain_all` calls.
    pub drains: u64,
    /// Drain functions that ran on the loop's CPU.
    pub drains_on_pinned_cpu: u64,
    /// Objects the drains returned to the depot.
    pub objects_drained: u64,
    /// The loop's longest gap between two iterations, ns.
    pub gap_max_ns: u64,
    /// 99.9th percentile of the gaps, ns (upper bound of its histogram bucket, within 7%).
    pub gap_p999_ns: u64,
    /// 99.99th percentile of the gaps, ns (same precision).
    pub gap_p9999_ns: u64,
    /// The five longest gaps, longest first, ns.
    pub top_gaps_ns: Vec<u64>,
    /// Gaps longer than 10 µs.
    pub gaps_over_10us: u64,
    /// Involuntary context switches of the loop thread while it ran (`None`
    /// when `/proc/thread-self/status` cannot be read).
    pub loop_nivcsw: Option<u64>,
}

/// The experiment's result.
#[derive(Clone, Debug, Serialize)]
pub struct IsolationReport {
    /// What ran.
    pub config: IsolationConfig,
    /// One row per mode, in the order asked.
    pub rows: Vec<IsolationRow>,
}

/// A log-linear histogram of gaps in counter ticks: exact below 16, then 16
/// buckets per power of two (bucket width at most 1/16 of its lower bound).
struct Gaps {
    buckets: Vec<u64>,
    top: [u64; 5],
    n: u64,
    over: u64,
    over_threshold: u64,
}

const SUB: u32 = 4;

impl Gaps {
    fn new(over_threshold: u64) -> Gaps {
        Gaps {
            buckets: vec![0; (64 - SUB as usize + 1) << SUB],
            top: [0; 5],
            n: 0,
            over: 0,
            over_threshold,
        }
    }

    fn index(v: u64) -> usize {
        if v < (1 << SUB) {
            return v as usize;
        }
        let e = 63 - v.leading_zeros();
        let sub = (v >> (e - SUB)) & ((1 << SUB) - 1);
        (((e - SUB + 1) << SUB) as u64 + sub) as usize
    }

    /// The largest value that lands in bucket `i`.
    fn upper(i: usize) -> u64 {
        if i < (1 << SUB) {
            return i as u64;
        }
        let e = (i >> SUB) as u32 + SUB - 1;
        let sub = (i & ((1 << SUB) - 1)) as u64;
        let lo = (1u64 << e) + (sub << (e - SUB));
        lo + (1u64 << (e - SUB)) - 1
    }

    #[inline]
    fn record(&mut self, v: u64) {
        self.buckets[Self::index(v)] += 1;
        self.n += 1;
        if v > self.over_threshold {
            self.over += 1;
        }
        if v > self.top[4] {
            self.top[4] = v;
            self.top.sort_unstable_by(|a, b| b.cmp(a));
        }
    }

    fn quantile(&self, q: f64) -> u64 {
        let want = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Self::upper(i).min(self.top[0]);
            }
        }
        self.top[0]
    }
}

/// The calling thread's involuntary context switches, from procfs.
fn thread_nivcsw() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
}

fn one_mode(cfg: &IsolationConfig, mode: Mode) -> Result<IsolationRow, String> {
    let cpus = cmwq::topology::sched_affinity().map_err(|e| e.to_string())?;
    let pinned = *cpus.last().ok_or("no CPU to run on")?;
    let drainer_cpu = cpus.iter().copied().find(|&c| c != pinned);
    let cache = Arc::new(PerCpu::new(mode, |_| Magazine::new()).map_err(|e| e.to_string())?);
    let depot = Arc::new(Depot::with_objects(4 * CAPACITY));
    let (ready, stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let on_pinned = Arc::new(AtomicU64::new(0));
    let tpn = clock::ticks_per_ns();
    let to_ns = |t: u64| (t as f64 / tpn).round() as u64;

    std::thread::scope(|s| {
        let looper = s.spawn(|| {
            if let Err(e) = sys::pin_current_thread(pinned) {
                ready.store(true, Ordering::Release);
                stop.store(true, Ordering::Relaxed);
                return Err(format!("pin to CPU {pinned}: {e}"));
            }
            let mut gaps = Gaps::new((10_000.0 * tpn) as u64);
            let cs0 = thread_nivcsw();
            let t0 = Instant::now();
            ready.store(true, Ordering::Release);
            let mut prev = clock::cycles();
            while !stop.load(Ordering::Relaxed) {
                let mut o = cache.with_local(|m| m.alloc(&depot));
                o[0] = o[0].wrapping_add(1);
                cache.with_local(|m| m.free(o, &depot));
                let now = clock::cycles();
                gaps.record(now.wrapping_sub(prev));
                prev = now;
            }
            let secs = t0.elapsed().as_secs_f64();
            let cs = cs0.zip(thread_nivcsw()).map(|(a, b)| b.saturating_sub(a));
            Ok::<_, String>((gaps, secs, cs))
        });
        let drainer = s.spawn(|| {
            if let Some(c) = drainer_cpu {
                sys::pin_current_thread(c)?;
            }
            while !ready.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let t0 = Instant::now();
            let (mut drains, mut objects) = (0u64, 0u64);
            while t0.elapsed() < cfg.duration && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(cfg.drain_interval);
                let (d, n) = (depot.clone(), on_pinned.clone());
                let got = cache
                    .drain_all(move |_, m| {
                        if sys::current_cpu() == pinned {
                            n.fetch_add(1, Ordering::Relaxed);
                        }
                        m.drain(&d) as u64
                    })
                    .map_err(|e| e.to_string())?;
                objects += got.iter().sum::<u64>();
                drains += 1;
            }
            Ok::<_, String>((drains, objects))
        });
        let drained = drainer
            .join()
            .map_err(|_| "the drainer panicked".to_string());
        stop.store(true, Ordering::Relaxed);
        let looped = looper.join().map_err(|_| "the loop panicked".to_string());
        let (drains, objects) = drained??;
        let (gaps, secs, cs) = looped??;
        Ok(IsolationRow {
            mode: mode.name(),
            pinned_cpu: pinned,
            drainer_cpu,
            iterations: gaps.n,
            iterations_per_sec: gaps.n as f64 / secs.max(1e-9),
            drains,
            drains_on_pinned_cpu: on_pinned.load(Ordering::Relaxed),
            objects_drained: objects,
            gap_max_ns: to_ns(gaps.top[0]),
            gap_p999_ns: to_ns(gaps.quantile(0.999)),
            gap_p9999_ns: to_ns(gaps.quantile(0.9999)),
            top_gaps_ns: gaps.top.iter().map(|&t| to_ns(t)).collect(),
            gaps_over_10us: gaps.over,
            loop_nivcsw: cs,
        })
    })
}

/// Runs the experiment, one mode after the other; `progress(mode)` is called
/// before each.
pub fn run_isolation(
    cfg: &IsolationConfig,
    progress: &mut dyn FnMut(Mode),
) -> Result<IsolationReport, String> {
    if cfg.modes.is_empty() {
        return Err("no mode to run".into());
    }
    if cfg.duration.is_zero() {
        return Err("the duration must be above 0".into());
    }
    let mut rows = Vec::new();
    for &m in &cfg.modes {
        progress(m);
        rows.push(one_mode(cfg, m)?);
    }
    Ok(IsolationReport {
        config: cfg.clone(),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::Gaps;

    #[test]
    fn histogram_buckets_bound_their_values() {
        for v in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, u64::MAX / 3]) {
            let i = Gaps::index(v);
            assert!(Gaps::upper(i) >= v, "{v}");
            assert!(i == 0 || Gaps::upper(i - 1) < v, "{v}");
        }
        let mut g = Gaps::new(100);
        for v in 1..=1000 {
            g.record(v);
        }
        assert_eq!(g.top, [1000, 999, 998, 997, 996]);
        assert_eq!(g.over, 900);
        let p = g.quantile(0.5);
        assert!((500..=532).contains(&p), "{p}");
    }
}
