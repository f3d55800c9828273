//! Latency under load: a stream of small work items while CPU hogs keep every
//! CPU busy, the experiment of seed 004 (`WQ_SCHED_FIFO`: fio's dm-verity reads,
//! whose post-processing runs on a workqueue, beside 8 `cpuio` jobs at 90%).
//!
//! # What runs
//!
//! - **Hogs**: `hogs` threads, hog `i` pinned to allowed CPU `i mod n`, each
//!   alternating `duty × period` of spinning and `(1 - duty) × period` of
//!   sleep (fio's `cpuload=90`), at the default priority, until the stream ends.
//! - **Stream**: the calling thread queues one work item every `interval` on a
//!   bound workqueue (`latency_wq`, per-CPU pools like `system_highpri_wq`) of
//!   the chosen [`Priority`] (`cmwq::Priority`: nice 0, nice -20, SCHED_FIFO
//!   at RT priority 1; a priority this process may not take is an error, or
//!   with `fallback` the best allowed one, reported), on an absolute schedule (a late tick does not
//!   shift the later ones), for `duration`. Items come from a ring of
//!   [`SLOTS`] work items, each created once and re-queued; a slot whose last
//!   item has not finished yet when its turn comes is counted as `missed`
//!   rather than queued, so a stalled worker shows up instead of hiding.
//! - **clat**: per item, from just before `queue` to the first instruction of
//!   its callback (queue → start: the scheduling delay of the worker, which is
//!   what the pool's priority changes). The callback then spins for `work`
//!   (the item's own small job) and frees its slot.
//!
//! - **lat**: per item, from the tick it was *due* on the schedule to the
//!   first instruction of its callback. It adds the producer's own lateness
//!   (the producer runs at nice 0 beside the hogs and may queue a backlog in a
//!   burst), so a late producer cannot hide the delay a real client would see
//!   (coordinated omission); clat alone would.
//!
//! Statistics are over every item of the run, in microseconds, as fio prints
//! them: min, max, avg, stdev, and percentiles p50, p90, p99, p99.9 (nearest
//! rank: the value at index ⌈n × q⌉ − 1 of the sorted samples).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::limits::Limits;

/// Work items in the stream's ring.
pub const SLOTS: usize = 64;

/// Longest `interval` accepted (`--interval-us`): 10 s.
pub const MAX_INTERVAL: Duration = Duration::from_secs(10);
/// Longest `duration` accepted (`--duration-ms`): one hour.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Longest `hog_period` accepted (`--hog-period-ms`): 10 s.
pub const MAX_HOG_PERIOD: Duration = Duration::from_secs(10);
/// Longest `work` accepted (`--work-us`): 1 s.
pub const MAX_WORK: Duration = Duration::from_secs(1);
/// Bytes kept per item of the stream: its two samples, then the sorted
/// copies the statistics are computed from.
pub const BYTES_PER_SAMPLE: u64 = 48;

/// Priority of the stream's workqueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Default pools (nice 0), like a plain `alloc_workqueue`.
    Normal,
    /// `WQ_HIGHPRI` pools (nice -20).
    High,
    /// SCHED_FIFO pools (the seed's `WQ_SCHED_FIFO`, least important RT priority).
    Fifo,
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Priority, String> {
        match s {
            "normal" => Ok(Priority::Normal),
            "high" | "highpri" => Ok(Priority::High),
            "fifo" => Ok(Priority::Fifo),
            _ => Err(format!("--priority '{s}': expected normal, high or fifo")),
        }
    }
}

/// Parameters of one latency run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LatencyConfig {
    /// Priority of the stream's workqueue.
    pub priority: Priority,
    /// CPU hog threads (default: one per allowed CPU).
    pub hogs: usize,
    /// Share of each hog period spent spinning, in (0, 1].
    pub duty: f64,
    /// Length of a hog's spin + sleep cycle.
    #[serde(serialize_with = "micros")]
    pub hog_period: Duration,
    /// Time between two queued items.
    #[serde(serialize_with = "micros")]
    pub interval: Duration,
    /// How long the stream runs.
    #[serde(serialize_with = "micros")]
    pub duration: Duration,
    /// CPU time each item spends in its callback.
    #[serde(serialize_with = "micros")]
    pub work: Duration,
    /// Run at the best priority allowed when `priority` is not
    /// (`WorkqueueBuilder::priority_fallback`) instead of failing.
    pub fallback: bool,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

impl LatencyConfig {
    /// Rejects values the run cannot honour; the message names the option.
    /// Sizes are checked against this process's [`Limits`].
    pub fn validate(&self) -> Result<(), String> {
        self.validate_with(&Limits::of_this_process())
    }

    /// [`validate`](Self::validate) against the given limits: at most
    /// `limits.threads` hogs, the durations within their `MAX_*` constants,
    /// and `duration / interval` samples of [`BYTES_PER_SAMPLE`] within
    /// `limits.memory`.
    pub fn validate_with(&self, limits: &Limits) -> Result<(), String> {
        if !(self.duty > 0.0 && self.duty <= 1.0) {
            return Err(format!(
                "--duty {}: must be in (0, 1], e.g. 0.9 for 90%",
                self.duty
            ));
        }
        limits.check_threads("--hogs", self.hogs, "CPU hog threads")?;
        if self.interval.is_zero() {
            return Err("--interval-us 0: need a pause between items".into());
        }
        if self.interval > MAX_INTERVAL {
            return Err(format!(
                "--interval-us {}: at most {} (10 s)",
                self.interval.as_micros(),
                MAX_INTERVAL.as_micros()
            ));
        }
        if self.duration > MAX_DURATION {
            return Err(format!(
                "--duration-ms {}: at most {} (one hour)",
                self.duration.as_millis(),
                MAX_DURATION.as_millis()
            ));
        }
        if self.duration < self.interval {
            return Err(format!(
                "--duration-ms {}: shorter than one interval ({} us)",
                self.duration.as_millis(),
                self.interval.as_micros()
            ));
        }
        if self.hog_period.is_zero() {
            return Err("--hog-period-ms 0: a hog cycle needs a length".into());
        }
        if self.hog_period > MAX_HOG_PERIOD {
            return Err(format!(
                "--hog-period-ms {}: at most {} (10 s)",
                self.hog_period.as_millis(),
                MAX_HOG_PERIOD.as_millis()
            ));
        }
        if self.work > MAX_WORK {
            return Err(format!(
                "--work-us {}: at most {} (1 s)",
                self.work.as_micros(),
                MAX_WORK.as_micros()
            ));
        }
        let items = self.items();
        let max_items = limits.memory / BYTES_PER_SAMPLE;
        limits.check_memory(
            "--duration-ms",
            format!(
                "{} with --interval-us {}",
                self.duration.as_millis(),
                self.interval.as_micros()
            ),
            items.checked_mul(BYTES_PER_SAMPLE),
            &format!("{items} items ({BYTES_PER_SAMPLE} bytes an item)"),
            &format!(
                "at most {max_items} items: a shorter --duration-ms or a longer --interval-us"
            ),
        )
    }

    /// Items the stream queues at most: one per interval of the duration, plus
    /// the first.
    pub fn items(&self) -> u64 {
        let n = self.duration.as_nanos() / self.interval.as_nanos().max(1);
        u64::try_from(n).unwrap_or(u64::MAX).saturating_add(1)
    }
}

/// Why the stream's workqueue could not be built, in the command line's
/// terms: a priority this process may not take names `--priority` and
/// `--priority-fallback` (the library's message names its builder call).
pub fn build_error(p: Priority, e: cmwq::Error) -> String {
    let name = match p {
        Priority::Normal => "normal",
        Priority::High => "high",
        Priority::Fifo => "fifo",
    };
    match e {
        cmwq::Error::PriorityDenied { wanted, reason } => format!(
            "--priority {name}: cannot run workers at {wanted}: {reason}; pass --priority-fallback to run at the best allowed priority instead"
        ),
        e => format!("building latency_wq at priority {name}: {e}"),
    }
}

/// fio-style completion-latency statistics, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Clat {
    /// Items measured.
    pub n: usize,
    /// Smallest latency.
    pub min: f64,
    /// Largest latency.
    pub max: f64,
    /// Mean.
    pub avg: f64,
    /// Sample standard deviation (n - 1); 0 for one sample.
    pub stdev: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
}

/// The nearest-rank quantile of sorted samples: the value at index
/// ⌈n × permille / 1000⌉ − 1 (clamped).
pub fn quantile_permille(sorted: &[u64], permille: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (sorted.len() * permille).div_ceil(1000).max(1);
    sorted[(rank - 1).min(sorted.len() - 1)]
}

impl Clat {
    /// Statistics of latencies in nanoseconds (any order), reported in µs.
    pub fn from_ns(samples: &[u64]) -> Clat {
        if samples.is_empty() {
            return Clat::default();
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        let n = s.len();
        let us = |ns: u64| ns as f64 / 1e3;
        let mean = s.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let var = if n > 1 {
            s.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Clat {
            n,
            min: us(s[0]),
            max: us(s[n - 1]),
            avg: mean / 1e3,
            stdev: var.sqrt() / 1e3,
            p50: us(quantile_permille(&s, 500)),
            p90: us(quantile_permille(&s, 900)),
            p99: us(quantile_permille(&s, 990)),
            p99_9: us(quantile_permille(&s, 999)),
        }
    }

    /// The metrics a `cmwq compare` run reads: `clat min us` ... `clat p99.9 us`.
    pub fn metrics(&self) -> Vec<(String, f64)> {
        self.metrics_as("clat")
    }

    /// The same rows named `<prefix> min us` ... `<prefix> p99.9 us`.
    pub fn metrics_as(&self, prefix: &str) -> Vec<(String, f64)> {
        [
            ("min", self.min),
            ("avg", self.avg),
            ("max", self.max),
            ("stdev", self.stdev),
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("p99.9", self.p99_9),
        ]
        .into_iter()
        .map(|(k, v)| (format!("{prefix} {k} us"), v))
        .collect()
    }

    /// fio's summary line for these samples under another name (`lat`).
    pub fn fio_summary(&self, name: &str) -> String {
        format!(
            "{name} (usec): min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}",
            self.min, self.max, self.avg, self.stdev
        )
    }

    /// fio's two lines: `clat (usec): min=.., max=.., avg=.., stdev=..` and the
    /// percentiles.
    pub fn fio_lines(&self) -> [String; 2] {
        [
            self.fio_summary("clat"),
            format!(
                "clat percentiles (usec): 50.00th=[{:.0}], 90.00th=[{:.0}], 99.00th=[{:.0}], 99.90th=[{:.0}]",
                self.p50, self.p90, self.p99, self.p99_9
            ),
        ]
    }
}

/// What one run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LatencyReport {
    /// The run's parameters.
    pub config: LatencyConfig,
    /// Queue → start latency of every item run.
    pub clat: Clat,
    /// Due tick → start latency of every item run (the producer's lateness
    /// included; see the module docs).
    pub lat: Clat,
    /// Items queued.
    pub queued: u64,
    /// Ticks skipped because the slot's previous item had not finished.
    pub missed: u64,
    /// The priority the workers run at, as the library reports it
    /// (`nice 0`, `nice -20`, `fifo 1`).
    pub workers_at: String,
    /// Set when the priority asked for was not allowed and the library fell
    /// back to a lower one (only with `fallback`).
    pub priority_note: Option<String>,
}

/// One slot of the ring: its work item, when it was queued, whether it is
/// in flight.
struct Slot {
    queued_at_ns: AtomicU64,
    due_ns: AtomicU64,
    busy: AtomicBool,
}

/// Spins until `until`.
fn spin_until(until: Instant) {
    let mut x = 0u64;
    while Instant::now() < until {
        for _ in 0..64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// The stream's workqueue with `p`'s priority; with `fallback`, the best
/// priority allowed instead of an error. Returns the priority the workers got
/// (`nice -20`, `fifo 1`, ...) and the library's fallback note, if any.
fn build_wq(
    p: Priority,
    fallback: bool,
) -> Result<(cmwq::Workqueue, String, Option<String>), String> {
    let prio = match p {
        Priority::Normal => cmwq::Priority::Normal,
        Priority::High => cmwq::Priority::High,
        Priority::Fifo => cmwq::Priority::Fifo,
    };
    let wq = cmwq::Workqueue::builder("latency_wq")
        .priority(prio)
        .priority_fallback(fallback)
        .build()
        .map_err(|e| build_error(p, e))?;
    let st = wq.stats();
    // Nice-0 pools keep the nice their threads inherit (a run under `nice -n
    // 5` has workers at 5): say what they really run at.
    let inherited = crate::bench::sys::current_nice();
    let at = if st.priority == "nice 0" && inherited != 0 {
        format!("nice {inherited} (inherited; nice-0 pools keep the process's nice)")
    } else {
        st.priority
    };
    Ok((wq, at, st.priority_fallback))
}

/// Workers of `latency_wq`'s pools that could not take the pool's priority.
fn prio_failures() -> u64 {
    let snap = cmwq::snapshot();
    let Some(w) = snap.workqueues.iter().find(|w| w.name == "latency_wq") else {
        return 0;
    };
    snap.pools
        .iter()
        .filter(|p| w.cpu_pool.contains(&Some(p.id)))
        .map(|p| p.prio_failed)
        .sum()
}

/// Runs the hogs and the stream; returns the statistics.
pub fn run(cfg: &LatencyConfig) -> Result<LatencyReport, String> {
    cfg.validate()?;
    let (wq, workers_at, mut note) = build_wq(cfg.priority, cfg.fallback)?;
    let cpus = crate::bench::sys::allowed_cpus();
    let epoch = Instant::now();
    let cap = usize::try_from(cfg.items()).map_err(|_| "too many items".to_string())?;
    let samples = Arc::new(Mutex::new(Vec::<(u64, u64)>::with_capacity(cap)));
    let slots: Arc<Vec<Slot>> = Arc::new(
        (0..SLOTS)
            .map(|_| Slot {
                queued_at_ns: AtomicU64::new(0),
                due_ns: AtomicU64::new(0),
                busy: AtomicBool::new(false),
            })
            .collect(),
    );
    let works: Vec<cmwq::Work> = (0..SLOTS)
        .map(|i| {
            let (slots, samples, work) = (slots.clone(), samples.clone(), cfg.work);
            cmwq::Work::new(move || {
                let start = epoch.elapsed().as_nanos() as u64;
                let s = &slots[i];
                let clat = start.saturating_sub(s.queued_at_ns.load(Ordering::Acquire));
                let lat = start.saturating_sub(s.due_ns.load(Ordering::Acquire));
                samples
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((clat, lat));
                if !work.is_zero() {
                    spin_until(Instant::now() + work);
                }
                s.busy.store(false, Ordering::Release);
            })
        })
        .collect();
    let stop = AtomicBool::new(false);
    let (queued, missed, hogs) = std::thread::scope(|sc| {
        let mut hogs = Vec::with_capacity(cfg.hogs);
        for h in 0..cfg.hogs {
            let cpu = cpus.get(h % cpus.len().max(1)).copied();
            let stop = &stop;
            let (period, duty) = (cfg.hog_period, cfg.duty);
            hogs.push(sc.spawn(move || {
                if let Some(c) = cpu {
                    let _ = crate::bench::sys::pin_current_thread(c);
                }
                let on = period.mul_f64(duty);
                let off = period.saturating_sub(on);
                while !stop.load(Ordering::Relaxed) {
                    spin_until(Instant::now() + on);
                    if !off.is_zero() {
                        std::thread::sleep(off);
                    }
                }
            }));
        }
        // Let the hogs reach their duty cycle before the first item.
        std::thread::sleep(cfg.hog_period * 2);
        let (mut queued, mut missed) = (0u64, 0u64);
        let t0 = Instant::now();
        let mut next = t0;
        let mut seq = 0usize;
        while next - t0 < cfg.duration {
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            }
            let i = seq % SLOTS;
            let s = &slots[i];
            if s.busy.load(Ordering::Acquire) {
                missed += 1;
            } else {
                s.busy.store(true, Ordering::Relaxed);
                s.due_ns.store(
                    next.saturating_duration_since(epoch).as_nanos() as u64,
                    Ordering::Relaxed,
                );
                s.queued_at_ns
                    .store(epoch.elapsed().as_nanos() as u64, Ordering::Release);
                if wq.queue(&works[i]) {
                    queued += 1;
                } else {
                    // Unreachable while only this thread queues and `busy`
                    // is cleared last in the callback; counted, not hidden.
                    missed += 1;
                }
            }
            seq += 1;
            next += cfg.interval;
        }
        wq.flush();
        stop.store(true, Ordering::Relaxed);
        // A hog that died (panicked) fails the run with its message.
        let hogs: Result<(), String> = hogs.into_iter().enumerate().try_for_each(|(h, j)| {
            j.join()
                .map_err(|p| format!("hog {h} panicked: {}", crate::limits::panic_message(&*p)))
        });
        (queued, missed, hogs)
    });
    hogs?;
    let samples = samples.lock().unwrap_or_else(|e| e.into_inner());
    if samples.len() as u64 != queued {
        return Err(format!(
            "{} items ran for {queued} queued (lost or doubled items)",
            samples.len()
        ));
    }
    let failed = prio_failures();
    if failed > 0 {
        let n = format!(
            "{failed} worker(s) could not take the pool's priority and ran at the inherited one"
        );
        note = Some(match note {
            Some(x) => format!("{x}; {n}"),
            None => n,
        });
    }
    let clat: Vec<u64> = samples.iter().map(|s| s.0).collect();
    let lat: Vec<u64> = samples.iter().map(|s| s.1).collect();
    Ok(LatencyReport {
        config: cfg.clone(),
        clat: Clat::from_ns(&clat),
        lat: Clat::from_ns(&lat),
        queued,
        missed,
        workers_at,
        priority_note: note,
    })
}

/// The `"metrics"` object `cmwq compare` reads: the clat rows, `items` and
/// `missed`.
pub fn metrics_json(r: &LatencyReport) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (k, v) in r.clat.metrics().into_iter().chain(r.lat.metrics_as("lat")) {
        m.insert(k, v.into());
    }
    m.insert("items".into(), r.queued.into());
    m.insert("missed".into(), r.missed.into());
    serde_json::Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clat_is_fio_shaped() {
        // 1..=1000 µs: mean 500.5, sample stdev sqrt(1000·1001/12) = 288.8194...
        let ns: Vec<u64> = (1..=1000u64).rev().map(|us| us * 1000).collect();
        let c = Clat::from_ns(&ns);
        assert_eq!(c.n, 1000);
        assert_eq!((c.min, c.max), (1.0, 1000.0));
        assert!((c.avg - 500.5).abs() < 1e-9);
        assert!(
            (c.stdev - 288.819_436_095_749_5).abs() < 1e-6,
            "{}",
            c.stdev
        );
        assert_eq!((c.p50, c.p90, c.p99, c.p99_9), (500.0, 900.0, 990.0, 999.0));
        let [a, b] = c.fio_lines();
        assert_eq!(a, "clat (usec): min=1, max=1000, avg=500.50, stdev=288.82");
        assert!(b.contains("99.90th=[999]"), "{b}");
        let one = Clat::from_ns(&[1500]);
        assert_eq!((one.min, one.p99_9, one.stdev), (1.5, 1.5, 0.0));
        assert_eq!(Clat::from_ns(&[]).n, 0);
    }

    #[test]
    fn bad_config_is_named() {
        let ok = LatencyConfig {
            priority: Priority::Normal,
            hogs: 1,
            duty: 0.9,
            hog_period: Duration::from_millis(10),
            interval: Duration::from_millis(1),
            duration: Duration::from_millis(50),
            work: Duration::ZERO,
            fallback: false,
        };
        assert_eq!(ok.validate(), Ok(()));
        let mut c = ok.clone();
        c.duty = 1.5;
        assert!(c.validate().unwrap_err().contains("--duty 1.5"));
        let mut c = ok.clone();
        c.interval = Duration::ZERO;
        assert!(c.validate().unwrap_err().contains("--interval-us 0"));
        let mut c = ok.clone();
        c.duration = Duration::from_micros(10);
        assert!(c.validate().unwrap_err().contains("--duration-ms"));
        assert!("rt".parse::<Priority>().unwrap_err().contains("'rt'"));
        let limits = Limits {
            memory: 48 << 10,
            threads: 4,
        };
        assert_eq!(ok.validate_with(&limits), Ok(()));
        let mut c = ok.clone();
        c.hogs = 5;
        assert!(
            c.validate_with(&limits)
                .unwrap_err()
                .starts_with("--hogs 5: at most 4")
        );
        let mut c = ok.clone();
        c.interval = Duration::from_secs(11);
        c.duration = Duration::from_secs(20);
        assert!(
            c.validate()
                .unwrap_err()
                .starts_with("--interval-us 11000000: at most")
        );
        let mut c = ok.clone();
        c.duration = Duration::from_secs(3601);
        assert!(
            c.validate()
                .unwrap_err()
                .starts_with("--duration-ms 3601000: at most")
        );
        let mut c = ok.clone();
        c.hog_period = Duration::from_secs(11);
        assert!(
            c.validate()
                .unwrap_err()
                .starts_with("--hog-period-ms 11000")
        );
        let mut c = ok.clone();
        c.work = Duration::from_secs(2);
        assert!(c.validate().unwrap_err().starts_with("--work-us 2000000"));
        // 48 KiB hold 1024 samples: 1024 items fit, 1025 do not.
        let mut c = ok.clone();
        c.interval = Duration::from_micros(1);
        c.duration = Duration::from_micros(1023);
        assert_eq!(c.validate_with(&limits), Ok(()));
        c.duration = Duration::from_micros(1024);
        let e = c.validate_with(&limits).unwrap_err();
        assert!(
            e.starts_with("--duration-ms 1 with --interval-us 1: 1025 items"),
            "{e}"
        );
        assert!(e.contains("at most 1024 items"), "{e}");
        assert_eq!("high".parse::<Priority>(), Ok(Priority::High));
    }

    #[test]
    fn a_denied_priority_names_the_flags_not_the_library_call() {
        let e = build_error(
            Priority::Fifo,
            cmwq::Error::PriorityDenied {
                wanted: "fifo 1".into(),
                reason: "EPERM".into(),
            },
        );
        assert!(
            e.starts_with("--priority fifo: cannot run workers at fifo 1: EPERM"),
            "{e}"
        );
        assert!(e.contains("--priority-fallback"), "{e}");
        assert!(!e.contains("priority_fallback("), "{e}");
    }

    #[test]
    fn every_queued_item_is_measured_once() {
        let cfg = LatencyConfig {
            priority: Priority::High,
            hogs: 1,
            duty: 0.5,
            hog_period: Duration::from_millis(2),
            interval: Duration::from_micros(500),
            duration: Duration::from_millis(40),
            work: Duration::from_micros(5),
            fallback: true,
        };
        let r = run(&cfg).unwrap();
        assert_eq!(r.queued + r.missed, 80);
        assert_eq!(r.clat.n as u64, r.queued);
        // lat runs from the due tick, never after the queue call: sample by
        // sample lat >= clat, so every order statistic is too.
        assert_eq!(r.lat.n, r.clat.n);
        for (l, c) in [
            (r.lat.min, r.clat.min),
            (r.lat.p50, r.clat.p50),
            (r.lat.p99, r.clat.p99),
            (r.lat.max, r.clat.max),
        ] {
            assert!(l >= c, "lat {l} < clat {c}");
        }
        assert!(metrics_json(&r)["lat p99 us"].as_f64().is_some());
        assert!(r.clat.min <= r.clat.p50 && r.clat.p50 <= r.clat.max);
        let m = metrics_json(&r);
        assert_eq!(m["items"], r.queued);
        assert!(m["clat p99.9 us"].as_f64().is_some());
    }
}
