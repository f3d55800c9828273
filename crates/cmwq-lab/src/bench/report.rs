//! The text and JSON outputs: the kernel module's lines first, then the lab's table.

use std::fmt::Write as _;

use super::runner::Report;
use super::summary::RowSummary;

/// The version tag of the JSON document (see `SCHEMA.md`).
pub const JSON_SCHEMA: &str = "cmwq-bench/1";

/// One per-scope line of `test_workqueue` (values are medians over rounds).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRow {
    /// The label column: the scope for scoped executors, else the executor name.
    pub label: String,
    /// Items per second (printed as an integer, as the kernel's `%llu`).
    pub items_per_sec: f64,
    /// Enqueue p50, ns.
    pub p50: u64,
    /// Enqueue p90, ns.
    pub p90: u64,
    /// Enqueue p95, ns.
    pub p95: u64,
}

impl KernelRow {
    /// The kernel row of a summary row, labelled `label`.
    pub fn of(label: &str, r: &RowSummary) -> KernelRow {
        KernelRow {
            label: label.to_string(),
            items_per_sec: r.items_per_sec.median,
            p50: r.enqueue_p50_ns.median as u64,
            p90: r.enqueue_p90_ns.median as u64,
            p95: r.enqueue_p95_ns.median as u64,
        }
    }
}

/// The lines `lib/test_workqueue.c` prints, byte for byte in its format:
/// `test_workqueue: running %d threads, %d items/thread` and per row
/// `test_workqueue:   %-16s %llu items/sec\tp50=%llu\tp90=%llu\tp95=%llu ns`.
pub fn kernel_lines(threads: usize, items: usize, rows: &[KernelRow]) -> Vec<String> {
    let mut out = vec![format!(
        "test_workqueue: running {threads} threads, {items} items/thread"
    )];
    out.extend(rows.iter().map(|r| {
        format!(
            "test_workqueue:   {:<16} {} items/sec\tp50={}\tp90={}\tp95={} ns",
            r.label, r.items_per_sec as u64, r.p50, r.p90, r.p95
        )
    }));
    out
}

/// Which rows feed the kernel lines: the scoped executors' rows (cmwq), labelled by
/// scope; if the run has no scoped executor (before cmwq is wired, or `--vs` only),
/// every row, labelled by executor name, so the lines still diff against a kernel log.
pub fn kernel_rows(report: &Report) -> Vec<KernelRow> {
    let scoped: Vec<&RowSummary> = report.rows.iter().filter(|r| r.scoped).collect();
    if scoped.is_empty() {
        report
            .rows
            .iter()
            .map(|r| KernelRow::of(&r.executor, r))
            .collect()
    } else {
        scoped.iter().map(|r| KernelRow::of(&r.scope, r)).collect()
    }
}

/// The kernel lines of a report.
pub fn report_kernel_lines(report: &Report) -> Vec<String> {
    kernel_lines(
        report.config.threads,
        report.config.items,
        &kernel_rows(report),
    )
}

/// `1234567.0` -> `1.23M`, `623456.0` -> `623.5k`.
pub fn si(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// The lab's table: one line per executor and scope, medians over rounds (items/s
/// with `[min..max]`), and the ratio to the `crossbeam` row when it ran.
pub fn table(report: &Report) -> String {
    let base = report
        .rows
        .iter()
        .find(|r| r.executor == "crossbeam")
        .map(|r| r.items_per_sec.median);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<15} {:<11} {:>27} {:>7} | {:>6} {:>6} {:>6} {:>7} {:>9} | {:>7} {:>7} {:>8} | {:>8} {:>7} {:>8} {:>4}",
        "executor",
        "scope",
        "items/s median [min..max]",
        "x xbeam",
        "enq50",
        "enq90",
        "enq95",
        "enq99",
        "enqmax",
        "rt50",
        "rt95",
        "rt99",
        "cpus/M",
        "vcsw/it",
        "idle ms",
        "thr"
    );
    let _ = writeln!(
        s,
        "{:63} | {:^38} | {:^24} |",
        "", "enqueue latency, ns", "round trip, ns"
    );
    for r in &report.rows {
        let ips = &r.items_per_sec;
        let ratio = base
            .filter(|b| *b > 0.0)
            .map_or_else(|| "-".to_string(), |b| format!("{:.2}", ips.median / b));
        let _ = writeln!(
            s,
            "{:<15} {:<11} {:>27} {:>7} | {:>6} {:>6} {:>6} {:>7} {:>9} | {:>7} {:>7} {:>8} | {:>8.3} {:>7.3} {:>8.1} {:>4}",
            r.executor,
            r.scope,
            format!("{} [{}..{}]", si(ips.median), si(ips.min), si(ips.max)),
            ratio,
            r.enqueue_p50_ns.median as u64,
            r.enqueue_p90_ns.median as u64,
            r.enqueue_p95_ns.median as u64,
            r.enqueue_p99_ns.median as u64,
            r.enqueue_max_ns.median as u64,
            r.round_trip_p50_ns.median as u64,
            r.round_trip_p95_ns.median as u64,
            r.round_trip_p99_ns.median as u64,
            r.cpu_s_per_million.median,
            r.vcsw_per_item.median,
            r.idle_cpu_ms.median,
            r.threads_left.median as i64,
        );
    }
    let c = &report.config;
    let _ = writeln!(
        s,
        "P={} N={} batch={} workers={} rounds={} cpus={:?}; medians over rounds; cpus/M = CPU s (user+sys) per million items; \
         vcsw/it = voluntary context switches per item; idle ms = CPU ms used in the {} ms after the run; thr = threads left",
        c.threads,
        c.items,
        c.batch,
        c.workers,
        c.rounds,
        report.cpus,
        super::runner::IDLE_WINDOW.as_millis()
    );
    s
}

/// The JSON document of a report (schema `cmwq-bench/1`, described in `SCHEMA.md`).
pub fn to_json(report: &Report) -> serde_json::Value {
    serde_json::json!({
        "schema": JSON_SCHEMA,
        "kernel_lines": report_kernel_lines(report),
        "config": report.config,
        "cpus": report.cpus,
        "runs": report.runs,
        "summary": report.rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_line_format_is_exact() {
        let rows = [
            KernelRow {
                label: "cpu".into(),
                items_per_sec: 2569880.7,
                p50: 1200,
                p90: 3400,
                p95: 5600,
            },
            KernelRow {
                label: "cache_shard".into(),
                items_per_sec: 1633653.0,
                p50: 5337,
                p90: 9000,
                p95: 12000,
            },
        ];
        let l = kernel_lines(8, 200000, &rows);
        assert_eq!(
            l[0],
            "test_workqueue: running 8 threads, 200000 items/thread"
        );
        assert_eq!(
            l[1],
            "test_workqueue:   cpu              2569880 items/sec\tp50=1200\tp90=3400\tp95=5600 ns"
        );
        assert_eq!(
            l[2],
            "test_workqueue:   cache_shard      1633653 items/sec\tp50=5337\tp90=9000\tp95=12000 ns"
        );
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn si_units() {
        assert_eq!(si(1234567.0), "1.23M");
        assert_eq!(si(623456.0), "623.5k");
        assert_eq!(si(12.0), "12");
    }
}
