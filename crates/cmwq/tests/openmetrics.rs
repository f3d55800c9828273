//! `Snapshot::to_openmetrics` (issue 18), read back by the reference
//! OpenMetrics parser (Python's `prometheus_client`, which Prometheus' own
//! format tests are written against): the text parses, the families have the
//! format's types and units, and every value equals the snapshot's.
//!
//! Skips, saying so, where `python3` or its `prometheus_client` module is
//! missing (`pip install prometheus_client`; CI installs it when it can).

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use cmwq::{Work, Workqueue};

#[path = "common/golden.rs"]
mod golden;

/// Parses `text` with prometheus_client; returns (family name, type, unit)
/// per family and (sample name, labels, value, family name) per sample, or `None` when
/// the parser is not installed. A parse error fails the test.
#[allow(clippy::type_complexity)]
fn parse(
    text: &str,
) -> Option<(
    Vec<(String, String, String)>,
    Vec<(String, BTreeMap<String, String>, f64, String)>,
)> {
    const SCRIPT: &str = r#"
import json, sys
try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError:
    print("MISSING")
    sys.exit(0)
fams, samples = [], []
for f in text_string_to_metric_families(sys.stdin.read()):
    fams.append([f.name, f.type, f.unit])
    for s in f.samples:
        samples.append([s.name, s.labels, s.value, f.name])
print(json.dumps({"families": fams, "samples": samples}))
"#;
    let mut child = match Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped: python3 not found ({e})");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "prometheus_client refused the text: {}\n--- text ---\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    if stdout.trim() == "MISSING" {
        eprintln!(
            "skipped: python3 has no prometheus_client module (pip install prometheus_client)"
        );
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let fams = v["families"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |i: usize| f[i].as_str().unwrap_or("").to_string();
            (s(0), s(1), s(2))
        })
        .collect();
    let samples = v["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let labels = s[1]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            let text = |i: usize| s[i].as_str().unwrap().to_string();
            (text(0), labels, s[2].as_f64().unwrap(), text(3))
        })
        .collect();
    Some((fams, samples))
}

#[test]
fn the_exposition_parses_and_equals_the_snapshot() {
    // A name that needs escaping, a panic counted, work done on a few queues.
    let odd = Workqueue::builder("om \"quoted\" \\ name")
        .unbound()
        .build()
        .unwrap();
    let plain = Workqueue::builder("om-plain").build().unwrap();
    let reclaim = Workqueue::builder("om-reclaim")
        .unbound()
        .mem_reclaim()
        .latency_histograms(true)
        .build()
        .unwrap();
    let ok = Work::new(|| {
        std::hint::black_box((0..1000u64).sum::<u64>());
    });
    let bad = Work::new(|| panic!("om test panic"));
    for _ in 0..5 {
        for wq in [&odd, &plain, &reclaim] {
            wq.queue(&ok);
            wq.flush();
        }
    }
    odd.queue(&bad);
    odd.flush();
    // A bounded queue found full once: held by a job, one item waiting.
    let bounded = Workqueue::builder("om-bounded")
        .ordered()
        .max_queued(1)
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let gate = bounded.spawn(move || {
        let _ = rx.recv();
    });
    while bounded.stats().started == 0 {
        std::thread::yield_now();
    }
    assert!(bounded.try_execute(|| ()).is_ok());
    assert!(bounded.try_execute(|| ()).is_err());
    tx.send(()).unwrap();
    gate.join().unwrap();
    bounded.flush();
    assert_eq!(bounded.stats().queue_full, 1);

    let snap = cmwq::snapshot();
    let text = snap.to_openmetrics();
    assert!(text.ends_with("# EOF\n"), "{text}");
    // Without the parser, the histograms' arithmetic still holds.
    histograms_add_up(&snap, &text);
    let Some((fams, samples)) = parse(&text) else {
        return;
    };

    // Types and units as the format wants them.
    let fam = |n: &str| {
        fams.iter()
            .find(|f| f.0 == n)
            .unwrap_or_else(|| panic!("no family {n}: {fams:?}"))
            .clone()
    };
    assert_eq!(fam("cmwq_workqueue_started").1, "counter");
    assert_eq!(fam("cmwq_workqueue_in_flight").1, "gauge");
    assert_eq!(fam("cmwq_workqueue").1, "info");
    let cpu = fam("cmwq_workqueue_cpu_time_seconds");
    assert_eq!((cpu.1.as_str(), cpu.2.as_str()), ("counter", "seconds"));
    assert_eq!(fam("cmwq_pool_workers").1, "gauge");
    assert_eq!(fam("cmwq_pool_create_failed").1, "counter");
    for f in fams.iter().filter(|f| f.1 == "counter") {
        let of_f: Vec<_> = samples.iter().filter(|s| s.3 == f.0).collect();
        assert!(
            of_f.iter().all(|s| s.0 == format!("{}_total", f.0)),
            "counter {} has a sample without _total: {of_f:?}",
            f.0
        );
    }

    // Every workqueue's values, found by id, equal the snapshot's.
    let get = |name: &str, key: &str, val: &str| -> f64 {
        let hits: Vec<f64> = samples
            .iter()
            .filter(|s| s.0 == name && s.1.get(key).map(String::as_str) == Some(val))
            .map(|s| s.2)
            .collect();
        assert_eq!(hits.len(), 1, "{name}{{{key}={val:?}}}: {hits:?}");
        hits[0]
    };
    for w in &snap.workqueues {
        let id = w.id.to_string();
        let st = &w.stats;
        let info: Vec<_> = samples
            .iter()
            .filter(|s| s.0 == "cmwq_workqueue_info" && s.1["id"] == id)
            .collect();
        assert_eq!(info.len(), 1);
        assert_eq!(info[0].1["workqueue"], w.name, "label escaping round-trips");
        assert_eq!(info[0].1["kind"], w.kind);
        assert_eq!(info[0].1["priority"], st.priority);
        for (metric, want) in [
            ("cmwq_workqueue_queued_total", st.queued),
            ("cmwq_workqueue_started_total", st.started),
            ("cmwq_workqueue_completed_total", st.completed),
            ("cmwq_workqueue_panics_total", st.panics),
            ("cmwq_workqueue_rejected_total", st.rejected),
            ("cmwq_workqueue_cpu_intensive_total", st.cpu_intensive),
            ("cmwq_workqueue_sampled_blocked_total", st.sampled),
            ("cmwq_workqueue_cm_wakeup_total", st.cm_wakeup),
            ("cmwq_workqueue_repatriated_total", st.repatriated),
            ("cmwq_workqueue_mayday_total", st.mayday),
            ("cmwq_workqueue_rescued_total", st.rescued),
            ("cmwq_workqueue_in_flight", st.in_flight),
            ("cmwq_workqueue_max_active", w.attrs.max_active as u64),
        ] {
            assert_eq!(
                get(metric, "id", &id),
                want as f64,
                "{metric} of {}",
                w.name
            );
        }
        // Bounded queues only: `om-bounded` here.
        let bounded: Vec<_> = samples
            .iter()
            .filter(|s| s.0 == "cmwq_workqueue_queue_full_total" && s.1["id"] == id)
            .collect();
        assert_eq!(
            bounded.len(),
            usize::from(st.max_queued.is_some()),
            "{}",
            w.name
        );
        if st.max_queued.is_some() {
            assert_eq!(
                get("cmwq_workqueue_queue_full_total", "id", &id),
                st.queue_full as f64
            );
            assert_eq!(
                get("cmwq_workqueue_waiting_peak", "id", &id),
                st.waiting_peak as f64
            );
        }
        let secs = get("cmwq_workqueue_cpu_time_seconds_total", "id", &id);
        assert!(
            (secs - st.cpu_time_ns as f64 / 1e9).abs() < 1e-9,
            "{secs} vs {st:?}"
        );
    }
    let odd_snap = snap
        .workqueues
        .iter()
        .find(|w| w.name.starts_with("om \""))
        .unwrap();
    assert_eq!(odd_snap.stats.panics, 1);
    assert_eq!(odd_snap.stats.started, 6);

    // The latency histograms: OpenMetrics histograms in seconds, with
    // `_bucket` (cumulative, ending in +Inf), `_sum` and `_count`, for the
    // queues that keep them and no other.
    for (hist, pick) in [
        (
            "cmwq_workqueue_queue_delay_seconds",
            (|l| &l.queue) as fn(&cmwq::hist::WqLatency) -> &cmwq::hist::Histogram,
        ),
        ("cmwq_workqueue_run_time_seconds", |l| &l.run),
    ] {
        let f = fam(hist);
        assert_eq!((f.1.as_str(), f.2.as_str()), ("histogram", "seconds"));
        for w in &snap.workqueues {
            let id = w.id.to_string();
            let of = |suffix: &str| -> Vec<_> {
                samples
                    .iter()
                    .filter(|s| s.0 == format!("{hist}{suffix}") && s.1["id"] == id)
                    .collect()
            };
            let Some(l) = &w.latency else {
                assert!(of("_count").is_empty(), "{} keeps no histograms", w.name);
                continue;
            };
            let h = pick(l);
            assert_eq!(h.count, w.stats.completed, "{}: one per item run", w.name);
            let count = of("_count");
            assert_eq!(count.len(), 1);
            assert_eq!(count[0].2, h.count as f64);
            let sum = of("_sum")[0].2;
            assert!((sum - h.sum_ns as f64 / 1e9).abs() < 1e-9, "{sum} vs {h:?}");
            let buckets = of("_bucket");
            assert_eq!(buckets.last().unwrap().1["le"], "+Inf");
            assert_eq!(buckets.last().unwrap().2, h.count as f64);
            let mut prev = 0.0;
            for b in &buckets {
                assert!(b.2 >= prev, "cumulative: {buckets:?}");
                prev = b.2;
                let le: f64 = b.1["le"].parse().unwrap();
                if le.is_finite() {
                    // Each bound is 2^k ns: the values below it.
                    let ns = (le * 1e9).round() as u64;
                    assert_eq!(b.2, h.count_le(ns - 1) as f64, "le={le}");
                }
            }
        }
    }
    let om_reclaim = snap.workqueues.iter().find(|w| w.name == "om-reclaim");
    assert_eq!(om_reclaim.unwrap().latency.as_ref().unwrap().run.count, 5);

    // Every pool's, by id; every lane's, by pool and CPU.
    for p in &snap.pools {
        let id = p.id.to_string();
        for (metric, want) in [
            ("cmwq_pool_workers", p.workers as u64),
            ("cmwq_pool_idle_workers", p.idle as u64),
            ("cmwq_pool_running_workers", p.running as u64),
            ("cmwq_pool_worklist_items", p.worklist as u64),
            ("cmwq_pool_repatriated_total", p.repatriated),
            ("cmwq_pool_create_failed_total", p.create_failed),
            ("cmwq_pool_prio_failed_total", p.prio_failed),
        ] {
            assert_eq!(
                get(metric, "pool", &id),
                want as f64,
                "{metric} of pool {id}"
            );
        }
        for l in &p.lanes {
            let cpu = l.cpu.to_string();
            for (metric, want) in [
                ("cmwq_lane_local_total", l.local),
                ("cmwq_lane_stolen_total", l.stolen),
                ("cmwq_lane_stole_total", l.stole),
                ("cmwq_lane_rehomed_total", l.rehomed),
                ("cmwq_lane_spread_total", l.spread),
            ] {
                let hits: Vec<f64> = samples
                    .iter()
                    .filter(|s| s.0 == metric && s.1["pool"] == id && s.1["cpu"] == cpu)
                    .map(|s| s.2)
                    .collect();
                assert_eq!(hits, vec![want as f64], "{metric} of pool {id} cpu {cpu}");
            }
        }
    }
}

/// The histogram lines of `text` against the snapshot, without a parser:
/// per queue that keeps histograms, the +Inf bucket and `_count` equal the
/// items it ran, and its buckets' counts sum to them.
fn histograms_add_up(snap: &cmwq::Snapshot, text: &str) {
    let mut seen = 0;
    for w in snap.workqueues.iter().filter(|w| w.latency.is_some()) {
        let l = w.latency.as_ref().unwrap();
        for (name, h) in [("queue_delay", &l.queue), ("run_time", &l.run)] {
            assert_eq!(h.buckets.iter().map(|b| b.1).sum::<u64>(), h.count);
            let inf = format!(
                "cmwq_workqueue_{name}_seconds_bucket{{workqueue=\"{}\",id=\"{}\",le=\"+Inf\"}} {}\n",
                w.name, w.id, w.stats.completed
            );
            assert!(text.contains(&inf), "{inf} in\n{text}");
            let count = format!(
                "cmwq_workqueue_{name}_seconds_count{{workqueue=\"{}\",id=\"{}\"}} {}\n",
                w.name, w.id, w.stats.completed
            );
            assert!(text.contains(&count), "{count}");
            seen += 1;
        }
    }
    assert!(seen >= 2, "a queue with histograms was shown");
}

/// The exposition of a fixed snapshot (a `cmwq __control-child --wide`'s,
/// one queue renamed to need escaping) equals the text written before
/// `to_openmetrics` became a table of families (issue 31): any change to
/// the layout shows here as a diff. `CMWQ_BLESS=1` writes the file anew.
#[test]
fn a_fixed_snapshot_renders_as_before() {
    let snap: cmwq::snapshot::Snapshot =
        serde_json::from_str(include_str!("fixtures/snapshot/ctl_child.json")).unwrap();
    let text = snap.to_openmetrics();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/snapshot/ctl_child.openmetrics"
    );
    golden::assert_golden(path, &text);
}
