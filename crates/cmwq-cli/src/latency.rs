//! `cmwq latency`: a stream of small work items while CPU hogs load every CPU,
//! with fio's clat lines (seed 004). The workload is `cmwq_lab::latency`; this
//! file turns arguments into its configuration and prints.

use std::time::Duration;

use cmwq_lab::latency::{self, LatencyConfig, Priority};

/// Arguments of `cmwq latency`.
#[derive(clap::Args, Debug)]
pub struct LatencyArgs {
    /// Priority of the stream's workqueue: normal (nice 0), high (WQ_HIGHPRI,
    /// nice -20) or fifo (SCHED_FIFO)
    #[arg(long, value_name = "P", default_value = "normal", value_parser = ["normal", "high", "fifo"])]
    pub priority: String,
    /// CPU hog threads, hog i pinned to CPU i mod n; at most 4096 (and below
    /// RLIMIT_NPROC) [default: one per allowed CPU]
    #[arg(long, value_name = "N")]
    pub hogs: Option<usize>,
    /// Share of each hog period spent spinning (fio's cpuload=90 is 0.9)
    #[arg(long, value_name = "F", default_value_t = 0.9)]
    pub duty: f64,
    /// Length of a hog's spin + sleep cycle (at most 10000)
    #[arg(long, value_name = "MS", default_value_t = 10)]
    pub hog_period_ms: u64,
    /// Time between two queued items (1 to 10000000, 10 s)
    #[arg(long, value_name = "US", default_value_t = 1000)]
    pub interval_us: u64,
    /// How long the stream runs (at most 3600000, one hour); its samples, 48
    /// bytes for each item of duration / interval, must fit in half the memory
    /// available
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub duration_ms: u64,
    /// CPU time each work item spends in its callback (at most 1000000)
    #[arg(long, value_name = "US", default_value_t = 20)]
    pub work_us: u64,
    /// When the priority is not allowed (no CAP_SYS_NICE / RLIMIT_RTPRIO), run at
    /// the best allowed one and say so, instead of failing
    #[arg(long)]
    pub priority_fallback: bool,
    /// Print one JSON document (schema cmwq-latency/1, with a "metrics" object)
    #[arg(long)]
    pub json: bool,
}

/// Runs `cmwq latency`.
pub fn run(a: LatencyArgs) -> Result<(), String> {
    let priority: Priority = a.priority.parse()?;
    let cfg = LatencyConfig {
        priority,
        hogs: a
            .hogs
            .unwrap_or_else(|| cmwq_lab::bench::sys::allowed_cpus().len().max(1)),
        duty: a.duty,
        hog_period: Duration::from_millis(a.hog_period_ms),
        interval: Duration::from_micros(a.interval_us),
        duration: Duration::from_millis(a.duration_ms),
        work: Duration::from_micros(a.work_us),
        fallback: a.priority_fallback,
    };
    let r = latency::run(&cfg)?;
    if a.json {
        let doc = serde_json::json!({
            "report": r,
            "metrics": latency::metrics_json(&r),
        });
        crate::json::print("cmwq-latency/1", &doc)?;
        return Ok(());
    }
    println!(
        "latency_wq: priority={} (workers at {}) hogs={} duty={:.0}% interval={}us duration={}ms work={}us",
        a.priority,
        r.workers_at,
        cfg.hogs,
        cfg.duty * 100.0,
        a.interval_us,
        a.duration_ms,
        a.work_us
    );
    for l in r.clat.fio_lines() {
        println!("  {l}");
    }
    // From the due tick: what a client on that schedule waited (clat starts
    // at the queue call and misses a late producer).
    println!("  {}, p99=[{:.0}]", r.lat.fio_summary(" lat"), r.lat.p99);
    println!("  items={}, missed={}", r.queued, r.missed);
    if let Some(n) = &r.priority_note {
        println!("  note: {n}");
    }
    Ok(())
}
