//! `cmwq dump`, `cmwq monitor`, `cmwq set` and `cmwq ps`: the kernel's
//! `wq_dump.py`, `wq_monitor.py` and sysfs knobs, for processes that serve
//! cmwq's control endpoint (`CMWQ_CONTROL=1` or `cmwq::control::serve()`).
//!
//! The text layouts follow the kernel's scripts column for column, with the
//! kernel's `cpumask_str` masks, so an engineer who reads one reads the other.
//! Where cmwq shows more (FIFO pools, the attrs of unbound queues) it adds a
//! column at the end of a line or a section after the kernel's, never inside.

use std::fmt::Write as _;
use std::io::{BufRead, Write as _};
use std::time::{Duration, Instant};

use cmwq::control::{self, Client};
use cmwq::hist::WqLatency;
use cmwq::snapshot::{Snapshot, WorkqueueSnap};

mod dump;
use cmwq::topology::cpumask_str;
pub use dump::render_dump;

/// The `--timeout` of every command that talks to a process.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct TimeoutArg {
    /// Seconds to wait for the process: to connect, and for each part of its
    /// reply (a stopped process, or one out of file descriptors, never
    /// answers). From 0.001 to 3600.
    #[arg(long = "timeout", value_name = "SECS", default_value_t = 2.0)]
    pub secs: f64,
}

/// The longest `--timeout`: an hour.
const MAX_TIMEOUT_S: f64 = 3600.0;

impl TimeoutArg {
    /// The timeout, or why it is refused.
    pub fn get(self) -> Result<Duration, String> {
        if self.secs.is_finite() && (0.001..=MAX_TIMEOUT_S).contains(&self.secs) {
            Ok(Duration::from_secs_f64(self.secs))
        } else {
            Err(format!(
                "--timeout {}: expected seconds from 0.001 to {MAX_TIMEOUT_S}",
                self.secs
            ))
        }
    }
}

/// Arguments of `cmwq dump`.
#[derive(clap::Args, Debug)]
pub struct DumpArgs {
    /// The process to dump (see `cmwq ps`); default: this command's own
    /// process, with the system workqueues.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Print the snapshot as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub timeout: TimeoutArg,
}

/// Arguments of `cmwq monitor`.
#[derive(clap::Args, Debug)]
pub struct MonitorArgs {
    /// The process to watch (see `cmwq ps`).
    #[arg(long)]
    pub pid: u32,
    /// Seconds between tables, from 0.05 (20 tables a second) to 86400; 0
    /// prints the totals once and exits.
    #[arg(
        short = 'i',
        long = "interval",
        value_name = "SECS",
        default_value_t = 1.0
    )]
    pub interval: f64,
    /// One JSON object per workqueue and interval instead of tables
    /// (the same as `--format json`).
    #[arg(short = 'j', long = "json", conflicts_with = "format")]
    pub json: bool,
    /// `table` (wq_monitor.py's), `json` (as --json), or `openmetrics`: one
    /// scrape of the workqueue and pool counters in the OpenMetrics text
    /// format (Prometheus' exposition), then exit.
    #[arg(long, value_enum, default_value_t = MonitorFormat::Table)]
    pub format: MonitorFormat,
    /// Stop after this many tables (default: until interrupted or the process exits).
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Only workqueues whose name matches one of these regular expressions.
    #[arg(value_name = "REGEX")]
    pub patterns: Vec<String>,
    #[command(flatten)]
    pub timeout: TimeoutArg,
}

/// Output of `cmwq monitor`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonitorFormat {
    /// wq_monitor.py's table.
    Table,
    /// One JSON object per workqueue and interval (schema cmwq-monitor/1).
    Json,
    /// One OpenMetrics scrape, ending in `# EOF`.
    Openmetrics,
}

/// Arguments of `cmwq set`.
#[derive(clap::Args, Debug)]
pub struct SetArgs {
    /// The process (see `cmwq ps`).
    #[arg(long)]
    pub pid: u32,
    /// The workqueue's name; `workqueue` for a process-wide parameter (as
    /// /sys/module/workqueue/parameters/).
    pub workqueue: String,
    /// affinity_scope, affinity_strict, cpumask, cpus, nice or max_active;
    /// after `workqueue`: watchdog_thresh or cpu_intensive_thresh_us.
    pub knob: String,
    /// The value, as written to the kernel's sysfs file (`cpus` is a cpu
    /// list). `cpumask` is hex in the sysfs form (`00000001,00000000`) or as
    /// `cmwq dump` prints it (`0x0 00000001`, quoted or not).
    #[arg(required = true, num_args = 1.., allow_negative_numbers = true)]
    pub value: Vec<String>,
    /// Print the new attributes as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub timeout: TimeoutArg,
}

/// Arguments of `cmwq ps`.
#[derive(clap::Args, Debug)]
pub struct PsArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Remove the sockets of processes that have exited.
    #[arg(long)]
    pub prune: bool,
    /// Seconds to wait for each process (they are asked at once, so a
    /// stopped one costs at most this); from 0.001 to 3600.
    #[arg(long = "timeout", value_name = "SECS", default_value_t = 2.0)]
    pub timeout: f64,
}

/// Arguments of the hidden `__control-child` (a process for the tests and for
/// trying the commands: a few workqueues with work flowing).
#[derive(clap::Args, Debug)]
pub struct ChildArgs {
    /// Microseconds between rounds of queueing.
    #[arg(long, default_value_t = 500)]
    pub period_us: u64,
    /// Exit without `control::stop()`, as most programs do: the socket is
    /// then the exit hook's to remove.
    #[arg(long)]
    pub no_stop: bool,
    /// Add `ctl_wide`, an unbound workqueue on a synthetic 72-CPU topology
    /// (folded onto the real CPUs), whose masks take more than one word.
    #[arg(long)]
    pub wide: bool,
}

/// The snapshot of process `pid`, waiting at most `timeout` for it.
fn snapshot_from(pid: u32, timeout: Duration) -> Result<Snapshot, String> {
    Client::connect_timeout(pid, timeout)
        .and_then(|mut c| c.snapshot())
        .map_err(|e| e.to_string())
}

fn snapshot_of(pid: Option<u32>, timeout: Duration) -> Result<Snapshot, String> {
    match pid {
        Some(pid) => snapshot_from(pid, timeout),
        None => {
            cmwq::check_env().map_err(|e| e.to_string())?;
            let _ = (
                cmwq::system(),
                cmwq::system_highpri(),
                cmwq::system_long(),
                cmwq::system_unbound(),
            );
            Ok(cmwq::snapshot())
        }
    }
}

/// Schema tag of `cmwq dump --json` (SCHEMA.md).
pub const DUMP_SCHEMA: &str = "cmwq-dump/1";
/// Schema tag of each line of `cmwq monitor --json` (SCHEMA.md).
pub const MONITOR_SCHEMA: &str = "cmwq-monitor/1";
/// Schema tag of `cmwq set --json` (SCHEMA.md).
pub const SET_SCHEMA: &str = "cmwq-set/1";
/// Schema tag of `cmwq ps --json` (SCHEMA.md).
pub const PS_SCHEMA: &str = "cmwq-ps/1";

/// Runs `cmwq dump`.
pub fn dump(a: DumpArgs) -> Result<(), String> {
    let s = snapshot_of(a.pid, a.timeout.get()?)?;
    if a.json {
        crate::json::print(DUMP_SCHEMA, &s)?;
    } else {
        print!("{}", render_dump(&s));
    }
    Ok(())
}

/// One scope's block of "Affinity Scopes", as `wq_dump.py` prints it.
pub fn scope_block(
    out: &mut String,
    name: &str,
    default: bool,
    pods: &[Vec<usize>],
    pod_node: &[i32],
    cpu_pod: &[Option<usize>],
) {
    let _ = writeln!(out);
    let mark = if default { " (default)" } else { "" };
    let _ = writeln!(out, "{}{mark}", name.to_uppercase());
    let _ = writeln!(out, "  nr_pods  {}", pods.len());
    out.push_str("  pod_cpus");
    for (i, p) in pods.iter().enumerate() {
        let _ = write!(out, " [{i}]={}", cpumask_str(p));
    }
    out.push('\n');
    out.push_str("  pod_node");
    for (i, n) in pod_node.iter().enumerate() {
        let _ = write!(out, " [{i}]={n}");
    }
    out.push('\n');
    out.push_str("  cpu_pod ");
    for (cpu, pod) in cpu_pod.iter().enumerate() {
        if let Some(p) = pod {
            let _ = write!(out, " [{cpu}]={p}");
        }
    }
    out.push('\n');
}

/// The kernel's name length for workqueues (`WQ_NAME_LEN`), the width of the name column.
const WQ_NAME_LEN: usize = 32;
/// Width of `wq_dump.py`'s type column.
const WQ_TYPE_LEN: usize = 9;

/// A workqueue name fit for a terminal: control characters (an escape
/// sequence in a name) are shown escaped, never sent raw.
fn clean(name: &str) -> String {
    if name.chars().any(char::is_control) {
        name.chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_default().collect::<Vec<_>>()
                } else {
                    vec![c]
                }
            })
            .collect()
    } else {
        name.to_string()
    }
}

/// The counters `wq_monitor.py` shows, for one workqueue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    started: u64,
    completed: u64,
    cpu_time_ns: u64,
    cpu_intensive: u64,
    cm_wakeup: u64,
    repatriated: u64,
    mayday: u64,
    rescued: u64,
}

impl Counts {
    fn of(w: &WorkqueueSnap) -> Counts {
        let s = &w.stats;
        Counts {
            started: s.started,
            completed: s.completed,
            cpu_time_ns: s.cpu_time_ns,
            cpu_intensive: s.cpu_intensive,
            cm_wakeup: s.cm_wakeup,
            repatriated: s.repatriated,
            mayday: s.mayday,
            rescued: s.rescued,
        }
    }

    fn minus(self, o: Counts) -> Counts {
        Counts {
            started: self.started.saturating_sub(o.started),
            completed: self.completed.saturating_sub(o.completed),
            cpu_time_ns: self.cpu_time_ns.saturating_sub(o.cpu_time_ns),
            cpu_intensive: self.cpu_intensive.saturating_sub(o.cpu_intensive),
            cm_wakeup: self.cm_wakeup.saturating_sub(o.cm_wakeup),
            repatriated: self.repatriated.saturating_sub(o.repatriated),
            mayday: self.mayday.saturating_sub(o.mayday),
            rescued: self.rescued.saturating_sub(o.rescued),
        }
    }
}

/// `wq_monitor.py`'s header line.
pub fn monitor_header() -> String {
    format!(
        "{:>24} {:>8} {:>5} {:>8} {:>7} {:>7} {:>7} {:>7}",
        "", "total", "infl", "CPUtime", "CPUitsv", "CMW/RPR", "mayday", "rescued"
    )
}

/// One row: `c` are the counters to show (totals or deltas), `infl` the
/// items in flight now.
fn monitor_row(w: &WorkqueueSnap, c: Counts, infl: u64) -> String {
    let dash = || "-".to_string();
    let (itsv, cmw) = if w.unbound {
        (dash(), c.repatriated.to_string())
    } else {
        (c.cpu_intensive.to_string(), c.cm_wakeup.to_string())
    };
    let (mayday, rescued) = if w.mem_reclaim {
        (c.mayday.to_string(), c.rescued.to_string())
    } else {
        (dash(), dash())
    };
    let name: String = {
        let n: Vec<char> = clean(&w.name).chars().collect();
        n[n.len().saturating_sub(24)..].iter().collect()
    };
    format!(
        "{name:24} {:8} {infl:5} {:8.1} {itsv:>7} {cmw:>7} {mayday:>7} {rescued:>7}",
        c.started,
        c.cpu_time_ns as f64 / 1e9,
    )
}

/// A table of `cur`, with deltas against `prev` when given. When a queue
/// shown keeps latency histograms, four columns follow: the p50 and p99 of
/// the queueing delay and of the run time (over the interval when deltas
/// are shown; `-` for queues without histograms or items).
pub fn render_monitor(prev: Option<&Snapshot>, cur: &Snapshot, filter: &Filter) -> String {
    let shown: Vec<_> = cur
        .workqueues
        .iter()
        .filter(|w| filter.matches(&w.name))
        .collect();
    let lat = shown.iter().any(|w| w.latency.is_some());
    let mut out = String::new();
    let _ = writeln!(out);
    let _ = write!(out, "{}", monitor_header());
    if lat {
        let _ = write!(out, " {}", latency_cells(LATENCY_HEADS.map(String::from)));
    }
    out.push('\n');
    for w in shown {
        let before = prev.and_then(|p| p.workqueues.iter().find(|x| x.id == w.id));
        let now = Counts::of(w);
        let counts = match before {
            Some(p) => now.minus(Counts::of(p)),
            None => now,
        };
        let _ = write!(out, "{}", monitor_row(w, counts, w.stats.in_flight));
        if lat {
            let _ = write!(
                out,
                " {}",
                latency_cells(latency_strs(interval_latency(w, before).as_ref()))
            );
        }
        out.push('\n');
    }
    out
}

/// Heads of the latency columns of `monitor` and `dump`.
pub(crate) const LATENCY_HEADS: [&str; 4] = ["q_p50", "q_p99", "run_p50", "run_p99"];

/// The four latency cells, right-aligned.
pub(crate) fn latency_cells(c: [String; 4]) -> String {
    format!("{:>8} {:>8} {:>8} {:>8}", c[0], c[1], c[2], c[3])
}

/// p50 and p99 of the queueing delay and of the run time (`-`: none).
pub(crate) fn latency_strs(l: Option<&WqLatency>) -> [String; 4] {
    let q = |h: Option<&cmwq::hist::Histogram>, q: f64| {
        h.and_then(|h| h.quantile_ns(q))
            .map_or_else(|| "-".to_string(), short_ns)
    };
    let (queue, run) = (l.map(|l| &l.queue), l.map(|l| &l.run));
    [q(queue, 0.5), q(queue, 0.99), q(run, 0.5), q(run, 0.99)]
}

/// `w`'s latency since `before` (its previous sample), or in all.
fn interval_latency(w: &WorkqueueSnap, before: Option<&WorkqueueSnap>) -> Option<WqLatency> {
    let now = w.latency.as_ref()?;
    Some(match before.and_then(|b| b.latency.as_ref()) {
        Some(b) => now.since(b),
        None => now.clone(),
    })
}

/// A time in ns, short: `850ns`, `12.3us`, `4.1ms`, `2.50s`.
pub(crate) fn short_ns(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// The latency record of `monitor --json`: counts and quantiles in ns.
fn latency_json(l: &WqLatency) -> serde_json::Value {
    let h = |h: &cmwq::hist::Histogram| {
        serde_json::json!({
            "count": h.count,
            "sum_ns": h.sum_ns,
            "p50_ns": h.quantile_ns(0.5),
            "p99_ns": h.quantile_ns(0.99),
        })
    };
    serde_json::json!({ "queue": h(&l.queue), "run": h(&l.run) })
}

/// `wq_monitor.py -j`'s record of one workqueue, plus the deltas since the
/// previous sample.
fn monitor_json(
    prev: Option<&Snapshot>,
    cur: &Snapshot,
    w: &WorkqueueSnap,
) -> Result<String, String> {
    let c = Counts::of(w);
    let obj = |c: Counts| {
        serde_json::json!({
            "started": c.started,
            "completed": c.completed,
            "cpu_time": c.cpu_time_ns / 1000,
            "cpu_intensive": c.cpu_intensive,
            "cm_wakeup": c.cm_wakeup,
            "repatriated": c.repatriated,
            "mayday": c.mayday,
            "rescued": c.rescued,
        })
    };
    let mut v = obj(c);
    let m = v.as_object_mut().expect("an object");
    m.insert(
        "timestamp".into(),
        (cur.taken_unix_ms as f64 / 1000.0).into(),
    );
    m.insert("name".into(), w.name.clone().into());
    m.insert("unbound".into(), w.unbound.into());
    m.insert("mem_reclaim".into(), w.mem_reclaim.into());
    m.insert("in_flight".into(), w.stats.in_flight.into());
    if let Some(l) = &w.latency {
        m.insert("latency".into(), latency_json(l));
    }
    if let Some(p) = prev.and_then(|p| p.workqueues.iter().find(|x| x.id == w.id)) {
        let mut d = obj(c.minus(Counts::of(p)));
        if let Some(l) = interval_latency(w, Some(p)) {
            d.as_object_mut()
                .expect("an object")
                .insert("latency".into(), latency_json(&l));
        }
        m.insert("delta".into(), d);
        m.insert(
            "delta_secs".into(),
            (cur.taken_unix_ms
                .saturating_sub(prev.map_or(0, |p| p.taken_unix_ms)) as f64
                / 1000.0)
                .into(),
        );
    }
    crate::json::line(MONITOR_SCHEMA, &v)
}

/// Workqueue name patterns (`wq_monitor.py`'s REGEX arguments).
pub struct Filter(Option<regex_lite::Regex>);

impl Filter {
    /// Any of `patterns`; none matches everything.
    pub fn new(patterns: &[String]) -> Result<Filter, String> {
        if patterns.is_empty() {
            return Ok(Filter(None));
        }
        let re = patterns.join("|");
        regex_lite::Regex::new(&re)
            .map(|r| Filter(Some(r)))
            .map_err(|e| format!("bad workqueue pattern {re:?}: {e}"))
    }

    fn matches(&self, name: &str) -> bool {
        self.0.as_ref().is_none_or(|r| r.is_match(name))
    }
}

/// The longest `monitor --interval`: a day (longer ones cannot be slept).
const MAX_INTERVAL_S: f64 = 86_400.0;
/// The shortest `monitor --interval` but 0: each table is a whole snapshot
/// of the process, taken by its control thread.
const MIN_INTERVAL_S: f64 = 0.05;

/// Runs `cmwq monitor`.
pub fn monitor(a: MonitorArgs) -> Result<(), String> {
    if !(a.interval.is_finite()
        && (a.interval == 0.0 || (MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&a.interval)))
    {
        return Err(format!(
            "--interval {}: expected 0 (print once) or seconds from {MIN_INTERVAL_S} \
             (each table is a snapshot the process takes) to {MAX_INTERVAL_S} (a day)",
            a.interval
        ));
    }
    let timeout = a.timeout.get()?;
    let filter = Filter::new(&a.patterns)?;
    if a.format == MonitorFormat::Openmetrics {
        let mut s = snapshot_from(a.pid, timeout)?;
        s.workqueues.retain(|w| filter.matches(&w.name));
        print!("{}", s.to_openmetrics());
        return Ok(());
    }
    let json = a.json || a.format == MonitorFormat::Json;
    // A connection per sample: the server closes idle connections after
    // control::IDLE_TIMEOUT, and intervals may be longer.
    let sample = || snapshot_from(a.pid, timeout);
    let mut prev: Option<Snapshot> = None;
    let mut shown = 0u64;
    let period = Duration::from_secs_f64(a.interval);
    let mut next = Instant::now();
    let stdout = std::io::stdout();
    loop {
        let cur = match sample() {
            Ok(s) => s,
            Err(e) if shown > 0 => {
                return Err(format!(
                    "pid {} stopped answering after {shown} table(s): {e}",
                    a.pid
                ));
            }
            Err(e) => return Err(e),
        };
        let mut text = String::new();
        if json {
            for w in cur.workqueues.iter().filter(|w| filter.matches(&w.name)) {
                let _ = writeln!(text, "{}", monitor_json(prev.as_ref(), &cur, w)?);
            }
        } else {
            text = render_monitor(prev.as_ref(), &cur, &filter);
            if shown == 0 && a.interval > 0.0 {
                text.insert_str(
                    0,
                    "\n# the first table shows totals; each later one, what changed over the interval\n",
                );
            }
        }
        {
            let mut o = stdout.lock();
            if o.write_all(text.as_bytes())
                .and_then(|_| o.flush())
                .is_err()
            {
                return Ok(()); // stdout closed (a pager quit)
            }
        }
        shown += 1;
        if a.interval == 0.0 || a.count.is_some_and(|n| shown >= n) {
            return Ok(());
        }
        prev = Some(cur);
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
}

/// Runs `cmwq set`. The value's words are joined with spaces, so a mask
/// copied out of `cmwq dump` (`0x0 00000001`) may be pasted unquoted; the
/// new mask is printed back in the form it was given (as a cpu list after
/// `cpus`, else as `cmwq dump` prints masks).
pub fn set(a: SetArgs) -> Result<(), String> {
    let value = a.value.join(" ");
    if control::PARAMS.contains(&a.knob.as_str()) {
        return set_param(&a, &value);
    }
    let mut c = Client::connect_timeout(a.pid, a.timeout.get()?).map_err(|e| e.to_string())?;
    let (attrs, unbound) = c
        .set_knob(&a.workqueue, &a.knob, &value)
        .map_err(|e| e.to_string())?;
    if a.json {
        crate::json::print(SET_SCHEMA, &attrs)?;
    } else if unbound == Some(false) {
        // A bound workqueue's only attribute is max_active (the kernel's
        // sysfs shows it and per_cpu): the rest are not its own.
        println!("{}: max_active={}", a.workqueue, attrs.max_active);
    } else {
        let mask = match a.knob.as_str() {
            "cpumask" => format!("cpumask={}", control::echo_cpumask(&value, &attrs.cpumask)),
            "cpus" => format!("cpus={}", cmwq::topology::format_cpulist(&attrs.cpumask)),
            _ => format!("cpumask={}", cpumask_str(&attrs.cpumask)),
        };
        println!(
            "{}: affinity_scope={} affinity_strict={} {mask} nice={} max_active={}",
            a.workqueue,
            attrs.affinity_scope.name(),
            u8::from(attrs.affinity_strict),
            attrs.nice,
            attrs.max_active
        );
    }
    Ok(())
}

/// Processes `cmwq ps` asks at once: a stopped one costs its `--timeout`
/// once per batch, not once per process.
const PS_BATCH: usize = 64;

/// What `cmwq ps` found of one process: workqueues, pools, state.
fn ps_probe(
    p: &control::ProcessEntry,
    timeout: Duration,
) -> (Option<usize>, Option<usize>, String) {
    if !p.alive {
        return (None, None, "stale".to_string());
    }
    match Client::connect_path_timeout(&p.socket, timeout).and_then(|mut c| c.snapshot()) {
        Ok(s) => (
            Some(s.workqueues.len()),
            Some(s.pools.len()),
            "serving".into(),
        ),
        Err(e) => (None, None, format!("unreachable: {e}")),
    }
}

/// `cmwq set --pid P workqueue PARAM VALUE`: a process-wide parameter, named
/// as the kernel's `/sys/module/workqueue/parameters/PARAM`.
fn set_param(a: &SetArgs, value: &str) -> Result<(), String> {
    if a.workqueue != "workqueue" {
        return Err(format!(
            "{} is a process-wide parameter: write it as `cmwq set --pid {} workqueue {} {value}`",
            a.knob, a.pid, a.knob
        ));
    }
    let mut c = Client::connect_timeout(a.pid, a.timeout.get()?).map_err(|e| e.to_string())?;
    let now = c.set_param(&a.knob, value).map_err(|e| e.to_string())?;
    if a.json {
        let doc = serde_json::json!({ "param": a.knob, "value": now });
        crate::json::print(SET_SCHEMA, &doc)?;
    } else {
        println!("workqueue.{}={now}", a.knob);
    }
    Ok(())
}

/// Runs `cmwq ps`.
pub fn ps(a: PsArgs) -> Result<(), String> {
    let timeout = TimeoutArg { secs: a.timeout }.get()?;
    let pruned = if a.prune { control::prune_stale() } else { 0 };
    let procs = control::list_processes();
    // Every process is asked on a thread of its own (in batches), so the
    // whole listing waits about one timeout for the slowest, not the sum.
    let mut found = Vec::with_capacity(procs.len());
    for batch in procs.chunks(PS_BATCH) {
        std::thread::scope(|sc| {
            // A thread that cannot start (a thread limit) asks in line.
            let hs: Vec<_> = batch
                .iter()
                .map(|p| {
                    std::thread::Builder::new()
                        .spawn_scoped(sc, move || ps_probe(p, timeout))
                        .map_err(|_| p)
                })
                .collect();
            for h in hs {
                found.push(match h {
                    Ok(h) => h
                        .join()
                        .unwrap_or_else(|_| (None, None, "unreachable: probe failed".into())),
                    Err(p) => ps_probe(p, timeout),
                });
            }
        });
    }
    let rows: Vec<serde_json::Value> = procs
        .iter()
        .zip(found)
        .map(|(p, (wqs, pools, state))| {
            serde_json::json!({
                "pid": p.pid,
                "comm": p.comm,
                "state": state,
                "workqueues": wqs,
                "pools": pools,
                "socket": p.socket,
            })
        })
        .collect();
    if a.json {
        let doc = serde_json::json!({
            "socket_dir": control::socket_dir(),
            "processes": rows,
        });
        crate::json::print(PS_SCHEMA, &doc)?;
        return Ok(());
    }
    println!("control sockets in {}", control::socket_dir().display());
    println!(
        "{:>8} {:16} {:>4} {:>5}  state",
        "PID", "COMM", "WQS", "POOLS"
    );
    let opt = |v: &serde_json::Value| v.as_u64().map_or("-".into(), |n| n.to_string());
    for r in &rows {
        println!(
            "{:>8} {:16} {:>4} {:>5}  {}",
            opt(&r["pid"]),
            r["comm"].as_str().unwrap_or("?"),
            opt(&r["workqueues"]),
            opt(&r["pools"]),
            r["state"].as_str().unwrap_or("")
        );
    }
    if rows.is_empty() {
        println!(
            "(none: start a process with CMWQ_CONTROL=1 in its environment, or have it serve the endpoint)"
        );
    }
    let stale = procs.iter().filter(|p| !p.alive).count();
    if stale > 0 {
        println!("{stale} stale socket(s): `cmwq ps --prune` removes them");
    }
    if pruned > 0 {
        println!("removed {pruned} stale socket(s)");
    }
    Ok(())
}

/// Runs the hidden `__control-child`: four workqueues with work flowing (five
/// with `--wide`), the control endpoint served, `ready SOCKET` on stdout;
/// each stdin line `snapshot` prints the process's own snapshot as one JSON
/// line; EOF or `exit` ends it (with `--no-stop`, leaving the socket to the
/// exit hook).
pub fn child(a: ChildArgs) -> Result<(), String> {
    use cmwq::topology::{Scope, Topology};
    use cmwq::{Work, Workqueue};
    let e = |e: cmwq::Error| e.to_string();
    let mut wqs = vec![
        Workqueue::builder("ctl_bound")
            .latency_histograms(true)
            .build()
            .map_err(e)?,
        Workqueue::builder("ctl_unbound")
            .latency_histograms(true)
            .unbound()
            .affinity_scope(Scope::Cpu)
            .build()
            .map_err(e)?,
        Workqueue::builder("ctl_ordered")
            .ordered()
            .build()
            .map_err(e)?,
        Workqueue::builder("ctl_reclaim")
            .unbound()
            .mem_reclaim()
            .build()
            .map_err(e)?,
    ];
    if a.wide {
        let t = Topology::from_synthetic("pack:1 l3:1 core:72 pu:1").map_err(|e| e.to_string())?;
        wqs.push(
            Workqueue::builder("ctl_wide")
                .unbound()
                .topology(std::sync::Arc::new(t))
                .build()
                .map_err(e)?,
        );
    }
    let path = control::serve().map_err(e)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder = {
        let stop = stop.clone();
        let wqs = wqs.clone();
        std::thread::spawn(move || {
            let works: Vec<Vec<Work>> = wqs
                .iter()
                .map(|_| {
                    (0..4)
                        .map(|_| {
                            Work::new(|| {
                                std::hint::black_box((0..200u64).sum::<u64>());
                            })
                        })
                        .collect()
                })
                .collect();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                for (wq, ws) in wqs.iter().zip(&works) {
                    for w in ws {
                        wq.queue(w);
                    }
                }
                std::thread::sleep(Duration::from_micros(a.period_us));
            }
        })
    };
    // One item on every queue run to its end before `ready`: a command
    // sent right after it sees each queue with items counted and latency
    // samples kept (on a loaded machine `monitor` found `ctl_bound` at
    // zero, the feeder not yet scheduled).
    for wq in &wqs {
        let w = Work::new(|| {});
        wq.queue(&w);
        w.flush();
    }
    println!("ready {}", path.display());
    let _ = std::io::stdout().flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.trim() {
            "snapshot" => {
                let s = cmwq::snapshot();
                println!("{}", serde_json::to_string(&s).map_err(|e| e.to_string())?);
                let _ = std::io::stdout().flush();
            }
            "exit" => break,
            _ => {}
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = feeder.join();
    for wq in &wqs {
        wq.flush();
    }
    if !a.no_stop {
        control::stop();
    }
    Ok(())
}

/// The golden-file check the library's tests use.
#[cfg(test)]
#[path = "../../cmwq/tests/common/golden.rs"]
mod golden;

#[cfg(test)]
mod tests {
    use super::*;

    /// `cmwq dump`'s text of a fixed snapshot (a `__control-child --wide`'s,
    /// one queue renamed to need cleaning) equals what it printed before
    /// `render_dump` became a table of sections (issue 31).
    /// `CMWQ_BLESS=1` writes the file anew.
    #[test]
    fn a_fixed_snapshot_dumps_as_before() {
        let snap: Snapshot = serde_json::from_str(include_str!(
            "../../cmwq/tests/fixtures/snapshot/ctl_child.json"
        ))
        .unwrap();
        let text = render_dump(&snap);
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ctl_child.dump");
        golden::assert_golden(path, &text);
    }
}
