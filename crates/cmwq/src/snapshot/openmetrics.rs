//! [`Snapshot::to_openmetrics`]: the snapshot in the OpenMetrics text
//! exposition format, written from one table of metric families
//! ([`FAMILIES`]): each row names a family, its type, unit and help, and
//! where its samples come from (each workqueue, pool or lane). A new metric
//! is a new row.
//!
//! The latency histograms ([`crate::hist`]) are OpenMetrics histograms: one
//! cumulative `_bucket` per power of two from 64 ns to `2^38` ns (a bound of
//! the engine's buckets, so each count is exact) and `+Inf`, then `_sum` and
//! `_count`; only workqueues that keep histograms have series, and the
//! families are left out when none does.

use std::fmt::Write as _;

use super::{LaneSnap, PoolSnap, Snapshot, WorkqueueSnap};
use crate::hist::{Histogram, MAX_BITS};

/// Kind of an OpenMetrics metric family.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum MetricType {
    Counter,
    Gauge,
    Info,
    Histogram,
}

/// Where one family's samples come from: one per workqueue, pool or lane.
#[derive(Clone, Copy)]
enum Source {
    /// One sample per workqueue, its value as written.
    Wq(fn(&WorkqueueSnap) -> String),
    /// One sample `1` per workqueue, with these labels added (an info).
    WqInfo(fn(&WorkqueueSnap) -> String),
    /// One sample per pool.
    Pool(fn(&PoolSnap) -> u64),
    /// One sample per lane of every pool.
    Lane(fn(&LaneSnap) -> u64),
    /// A histogram per workqueue that keeps one.
    WqHist(fn(&WorkqueueSnap) -> Option<&Histogram>),
    /// One sample per bounded workqueue (`max_queued`); the family is
    /// left out when no workqueue is bounded.
    WqBounded(fn(&WorkqueueSnap) -> u64),
    /// One sample for the process, without labels.
    Process(fn(&Snapshot) -> u64),
}

/// One metric family of the exposition.
struct Family {
    name: &'static str,
    kind: MetricType,
    unit: Option<&'static str>,
    help: &'static str,
    source: Source,
}

/// A family without a unit.
const fn fam(name: &'static str, kind: MetricType, help: &'static str, source: Source) -> Family {
    Family {
        name,
        kind,
        unit: None,
        help,
        source,
    }
}

use MetricType::{Counter, Gauge, Info};
use Source::{Lane, Pool, Process, Wq, WqBounded, WqHist, WqInfo};

/// Every family, in the order they are written: the process, the workqueues
/// (what each is, then `wq_monitor.py`'s counters), the pools, the lanes.
const FAMILIES: &[Family] = &[
    fam(
        "cmwq_engine_thread_panics",
        Counter,
        "Panics of cmwq's own code that its service threads (timer, watchdog, pods, rescuers) caught and went on from: each is a bug in cmwq.",
        Process(|s| s.engine_thread_panics),
    ),
    fam(
        "cmwq_workqueue",
        Info,
        "What a workqueue is: its kind, its priority, and why it fell back to a lower one (empty: it did not).",
        WqInfo(|w| {
            format!(
                "kind=\"{}\",mem_reclaim=\"{}\",priority=\"{}\",priority_fallback=\"{}\"",
                super::escape_label_value(&w.kind),
                w.mem_reclaim,
                super::escape_label_value(&w.stats.priority),
                super::escape_label_value(w.stats.priority_fallback.as_deref().unwrap_or(""))
            )
        }),
    ),
    fam(
        "cmwq_workqueue_queued",
        Counter,
        "Items put on a worklist (delayed ones once their timer fired).",
        Wq(|w| w.stats.queued.to_string()),
    ),
    fam(
        "cmwq_workqueue_started",
        Counter,
        "Work item callbacks started (wq_monitor.py's total).",
        Wq(|w| w.stats.started.to_string()),
    ),
    fam(
        "cmwq_workqueue_completed",
        Counter,
        "Work item callbacks returned or panicked.",
        Wq(|w| w.stats.completed.to_string()),
    ),
    fam(
        "cmwq_workqueue_panics",
        Counter,
        "Work item callbacks that panicked (caught; the worker lives on).",
        Wq(|w| w.stats.panics.to_string()),
    ),
    fam(
        "cmwq_workqueue_rejected",
        Counter,
        "Queue attempts refused while the workqueue drained.",
        Wq(|w| w.stats.rejected.to_string()),
    ),
    fam(
        "cmwq_workqueue_cpu_intensive",
        Counter,
        "Items found running past the CPU-intensive threshold (CPUitsv).",
        Wq(|w| w.stats.cpu_intensive.to_string()),
    ),
    fam(
        "cmwq_workqueue_sampled_blocked",
        Counter,
        "Workers the /proc sampler found sleeping in an item that did not say it blocks.",
        Wq(|w| w.stats.sampled.to_string()),
    ),
    fam(
        "cmwq_workqueue_cm_wakeup",
        Counter,
        "Extra workers woken because a worker blocked or turned CPU-intensive (CMW).",
        Wq(|w| w.stats.cm_wakeup.to_string()),
    ),
    fam(
        "cmwq_workqueue_repatriated",
        Counter,
        "Non-strict workers moved back into their pod before running an item (RPR).",
        Wq(|w| w.stats.repatriated.to_string()),
    ),
    fam(
        "cmwq_workqueue_mayday",
        Counter,
        "Times its pools asked the rescuer for help (mayday).",
        Wq(|w| w.stats.mayday.to_string()),
    ),
    fam(
        "cmwq_workqueue_rescued",
        Counter,
        "Items its rescuer ran (rescued).",
        Wq(|w| w.stats.rescued.to_string()),
    ),
    Family {
        name: "cmwq_workqueue_cpu_time_seconds",
        kind: Counter,
        unit: Some("seconds"),
        help: "CPU time of its items, sampled each watchdog tick (CPUtime).",
        source: Wq(|w| seconds(w.stats.cpu_time_ns)),
    },
    fam(
        "cmwq_workqueue_in_flight",
        Gauge,
        "Items started and not completed (infl).",
        Wq(|w| w.stats.in_flight.to_string()),
    ),
    fam(
        "cmwq_workqueue_max_active",
        Gauge,
        "The workqueue's max_active.",
        Wq(|w| w.attrs.max_active.to_string()),
    ),
    fam(
        "cmwq_workqueue_queue_full",
        Counter,
        "Calls that found a bounded workqueue full (a try_ call refused, or a call that waited for room).",
        WqBounded(|w| w.stats.queue_full),
    ),
    fam(
        "cmwq_workqueue_waiting_peak",
        Gauge,
        "A bounded workqueue's most items waiting to start at once (max_queued caps it).",
        WqBounded(|w| w.stats.waiting_peak),
    ),
    Family {
        name: "cmwq_workqueue_queue_delay_seconds",
        kind: MetricType::Histogram,
        unit: Some("seconds"),
        help: "Time from queued (a delayed item: its timer fired) to its callback starting, of items that ended.",
        source: WqHist(|w| w.latency.as_ref().map(|l| &l.queue)),
    },
    Family {
        name: "cmwq_workqueue_run_time_seconds",
        kind: MetricType::Histogram,
        unit: Some("seconds"),
        help: "Time from an item's callback starting to it returning or panicking.",
        source: WqHist(|w| w.latency.as_ref().map(|l| &l.run)),
    },
    fam(
        "cmwq_pool_workers",
        Gauge,
        "Worker threads of the pool.",
        Pool(|p| p.workers as u64),
    ),
    fam(
        "cmwq_pool_idle_workers",
        Gauge,
        "Idle workers.",
        Pool(|p| p.idle as u64),
    ),
    fam(
        "cmwq_pool_running_workers",
        Gauge,
        "Workers counted by concurrency management (nr_running).",
        Pool(|p| p.running as u64),
    ),
    fam(
        "cmwq_pool_worklist_items",
        Gauge,
        "Items waiting on the pool's worklist.",
        Pool(|p| p.worklist as u64),
    ),
    fam(
        "cmwq_pool_repatriated",
        Counter,
        "Workers moved onto another CPU of the pod when woken for it.",
        Pool(|p| p.repatriated),
    ),
    fam(
        "cmwq_pool_create_failed",
        Counter,
        "Worker threads that could not be created.",
        Pool(|p| p.create_failed),
    ),
    fam(
        "cmwq_pool_prio_failed",
        Counter,
        "Workers that could not take the pool's priority.",
        Pool(|p| p.prio_failed),
    ),
    fam(
        "cmwq_pool_lockups",
        Counter,
        "Times the lockup watchdog reported the pool stuck (BUG: workqueue lockup).",
        Pool(|p| p.lockups),
    ),
    fam(
        "cmwq_pool_rebinds",
        Counter,
        "Times the pool's workers were bound to its CPU again after it came back.",
        Pool(|p| p.rebinds),
    ),
    fam(
        "cmwq_lane_local",
        Counter,
        "Items queued from this CPU and run by a worker of this CPU.",
        Lane(|l| l.local),
    ),
    fam(
        "cmwq_lane_stolen",
        Counter,
        "Items queued from this CPU and run by a worker of another CPU.",
        Lane(|l| l.stolen),
    ),
    fam(
        "cmwq_lane_stole",
        Counter,
        "Items of other CPUs that this CPU's workers ran.",
        Lane(|l| l.stole),
    ),
    fam(
        "cmwq_lane_rehomed",
        Counter,
        "Workers re-homed onto this CPU to serve it.",
        Lane(|l| l.rehomed),
    ),
    fam(
        "cmwq_lane_spread",
        Counter,
        "Workers of this CPU woken to help a lagging CPU of the pod.",
        Lane(|l| l.spread),
    ),
];

/// Writes one metric family: `# TYPE`, `# UNIT` (when `unit` is set; the
/// name then ends in it), `# HELP`, then one sample per `(labels, value)`.
/// Counters get their `_total` suffix on the samples, not on the family
/// (infos their `_info`).
pub(super) fn family(
    out: &mut String,
    name: &str,
    kind: MetricType,
    unit: Option<&str>,
    help: &str,
    samples: impl IntoIterator<Item = (String, String)>,
) {
    let (ty, suffix) = match kind {
        MetricType::Counter => ("counter", "_total"),
        MetricType::Gauge => ("gauge", ""),
        MetricType::Info => ("info", "_info"),
        MetricType::Histogram => ("histogram", ""),
    };
    let _ = writeln!(out, "# TYPE {name} {ty}");
    if let Some(u) = unit {
        let _ = writeln!(out, "# UNIT {name} {u}");
    }
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    for (labels, value) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name}{suffix} {value}");
        } else {
            let _ = writeln!(out, "{name}{suffix}{{{labels}}} {value}");
        }
    }
}

/// HELP text as the exposition format writes it: `\` and newlines escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Seconds from nanoseconds, as an exposition-format number.
pub(super) fn seconds(ns: u64) -> String {
    format!("{}", ns as f64 / 1e9)
}

impl Snapshot {
    /// The counters `cmwq monitor` shows, per workqueue and per pool, in the
    /// OpenMetrics text exposition format (what Prometheus scrapes with
    /// `Accept: application/openmetrics-text`), ending with `# EOF`.
    ///
    /// Workqueue series carry the labels `workqueue` (its name) and `id`
    /// (names may repeat; the id does not); pool series carry `pool`, lane
    /// series `pool` and `cpu`. Counters end in `_total`, times are in
    /// seconds (`_seconds` in the name, with a `# UNIT` line). Workqueues
    /// that keep latency histograms have two OpenMetrics histograms,
    /// `cmwq_workqueue_queue_delay_seconds` and
    /// `cmwq_workqueue_run_time_seconds` (see the module docs). Metric names
    /// start with `cmwq_`; the README's "Observability" section lists them.
    ///
    /// ```
    /// let wq = cmwq::Workqueue::builder("om_doc").unbound().build().unwrap();
    /// let text = cmwq::snapshot().to_openmetrics();
    /// assert!(text.contains("# TYPE cmwq_workqueue_started counter"));
    /// assert!(text.contains("cmwq_workqueue_started_total{workqueue=\"om_doc\""));
    /// assert!(text.ends_with("# EOF\n"));
    /// drop(wq);
    /// ```
    pub fn to_openmetrics(&self) -> String {
        let mut out = String::new();
        let wq_labels: Vec<String> = self.workqueues.iter().map(wq_labels).collect();
        for f in FAMILIES {
            if let WqHist(get) = f.source {
                let series: Vec<_> = self
                    .workqueues
                    .iter()
                    .zip(&wq_labels)
                    .filter_map(|(w, l)| Some((l, get(w)?)))
                    .collect();
                // Left out when no workqueue keeps histograms.
                if !series.is_empty() {
                    histogram(&mut out, f, series);
                }
                continue;
            }
            let samples = self.samples(f.source, &wq_labels);
            if matches!(f.source, WqBounded(_)) && samples.is_empty() {
                continue;
            }
            family(&mut out, f.name, f.kind, f.unit, f.help, samples);
        }
        out.push_str("# EOF\n");
        out
    }

    /// The `(labels, value)` of each sample of a family.
    fn samples(&self, source: Source, wq_labels: &[String]) -> Vec<(String, String)> {
        let wqs = self.workqueues.iter().zip(wq_labels);
        match source {
            Process(get) => vec![(String::new(), get(self).to_string())],
            Wq(get) => wqs.map(|(w, l)| (l.clone(), get(w))).collect(),
            // Written by `histogram`, not as single samples.
            WqHist(_) => Vec::new(),
            WqBounded(get) => wqs
                .filter(|(w, _)| w.stats.max_queued.is_some())
                .map(|(w, l)| (l.clone(), get(w).to_string()))
                .collect(),
            WqInfo(get) => wqs
                .map(|(w, l)| (format!("{l},{}", get(w)), "1".to_string()))
                .collect(),
            Pool(get) => self
                .pools
                .iter()
                .map(|p| (format!("pool=\"{}\"", p.id), get(p).to_string()))
                .collect(),
            Lane(get) => self
                .pools
                .iter()
                .flat_map(|p| {
                    p.lanes.iter().map(move |l| {
                        (
                            format!("pool=\"{}\",cpu=\"{}\"", p.id, l.cpu),
                            get(l).to_string(),
                        )
                    })
                })
                .collect(),
        }
    }
}

/// Writes a histogram family: its header, then per `(labels, histogram)`
/// a cumulative `_bucket` per bound (`2^k` ns for k from [`LE_LOW_BITS`]
/// to [`MAX_BITS`], each a bound of the engine's buckets, so the counts are
/// exact) and `+Inf`, then `_sum` and `_count`.
fn histogram<'a>(
    out: &mut String,
    f: &Family,
    series: impl IntoIterator<Item = (&'a String, &'a Histogram)>,
) {
    let name = f.name;
    family(out, name, f.kind, f.unit, f.help, []);
    for (l, h) in series {
        for k in LE_LOW_BITS..=MAX_BITS {
            // Values under 2^k ns.
            let n = h.count_le((1 << k) - 1);
            let _ = writeln!(out, "{name}_bucket{{{l},le=\"{}\"}} {n}", seconds(1 << k));
        }
        let _ = writeln!(out, "{name}_bucket{{{l},le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum{{{l}}} {}", seconds(h.sum_ns));
        let _ = writeln!(out, "{name}_count{{{l}}} {}", h.count);
    }
}

/// The lowest `le` bound of the histograms: `2^6` ns.
const LE_LOW_BITS: u32 = 6;

/// The labels that name a workqueue: `workqueue` (its name) and `id`.
fn wq_labels(w: &WorkqueueSnap) -> String {
    format!(
        "workqueue=\"{}\",id=\"{}\"",
        super::escape_label_value(&w.name),
        w.id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_have_type_help_and_suffixes() {
        let mut out = String::new();
        family(
            &mut out,
            "x_seconds",
            MetricType::Counter,
            Some("seconds"),
            "help\\me",
            [("a=\"1\"".to_string(), "0.5".to_string())],
        );
        assert_eq!(
            out,
            "# TYPE x_seconds counter\n# UNIT x_seconds seconds\n# HELP x_seconds help\\\\me\n\
             x_seconds_total{a=\"1\"} 0.5\n"
        );
        let mut out = String::new();
        family(
            &mut out,
            "y",
            MetricType::Counter,
            None,
            "h",
            [(String::new(), "3".to_string())],
        );
        assert_eq!(out, "# TYPE y counter\n# HELP y h\ny_total 3\n");
        assert_eq!(seconds(1_500_000_000), "1.5");
        assert_eq!(seconds(0), "0");
    }
}
