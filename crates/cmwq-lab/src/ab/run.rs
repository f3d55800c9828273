//! A/B runs: two commands, interleaved, measured from outside and from their own
//! JSON, compared metric by metric with [`crate::ab::stats`].
//!
//! The seed threads argue with tables of medians over interleaved runs, a delta
//! and a verdict (`**` beyond noise, `ns` within it, `flat`). This module runs
//! the two sides A B A B ... after warm-up runs, records each run's wall, user
//! and system time, context switches and peak RSS (from `wait4`), and every
//! number the command reports: a `cmwq bench --json` document (its summary rows,
//! per executor and scope) or any JSON object with a `"metrics": {name: number}`
//! map. A run that fails or prints no JSON is reported and left out, never
//! averaged in. Hardware counters (cycles, instructions, IPC, L1i misses,
//! frontend bound) come from [`crate::perf`] where the machine has them; where
//! it has not, their rows say "not supported" and why.
//!
//! More than two sides: side 0 is the baseline and every other side is
//! compared against it ([`table_pair`]), as a preset that sweeps a parameter
//! (shard sizes, priorities) needs; the runs still interleave, `0 1 2 0 1 2 ...`.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::ab::stats::{CompareConfig, Direction};
use crate::ab::table::{AbTable, Metric};

/// One side of a comparison: a program and its arguments.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Side {
    /// `A` or `B` label shown in reports.
    pub label: String,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// The command prints JSON metrics (a `cmwq` subcommand run with
    /// `--json`): a run that prints none failed, it is not a run with fewer rows.
    pub json: bool,
}

/// What one run produced.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunRecord {
    /// 0 for A, 1 for B.
    pub side: usize,
    /// Run number on its side, from 0 (warm-ups are not recorded).
    pub index: usize,
    /// Metrics by name; empty if the run failed.
    pub metrics: BTreeMap<String, f64>,
    /// Why the run failed, if it did.
    pub error: Option<String>,
}

/// Metrics a process gives from outside, whatever it prints.
pub const PROCESS_METRICS: [&str; 6] = [
    "wall s",
    "user s",
    "sys s",
    "voluntary ctxsw",
    "involuntary ctxsw",
    "max RSS KiB",
];

/// Hardware counter rows: measured where `perf_event_open` works, "not
/// supported" rows otherwise.
pub const COUNTER_METRICS: [&str; 6] = crate::perf::COUNTER_METRICS;

/// How long one run may take before it is killed (`cmwq compare --timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Most bytes kept of one run's stdout, and of its stderr: 16 MiB. A run that
/// prints more is killed and fails, rather than filling the memory.
pub const MAX_CAPTURED: usize = 16 << 20;

/// Limits of one run of a side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLimits {
    /// The run, its process group with it, is killed after this long.
    pub timeout: Duration,
    /// Most bytes kept of its stdout and of its stderr, each.
    pub max_captured: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            timeout: DEFAULT_TIMEOUT,
            max_captured: MAX_CAPTURED,
        }
    }
}

/// One successful run of a side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SideRun {
    /// Every metric: the process's and the command's own.
    pub metrics: BTreeMap<String, f64>,
    /// Why none of the metrics came from the command's stdout (not JSON, or
    /// JSON without metrics); `None` when some did.
    pub no_metrics: Option<String>,
}

/// Runs one side once; as [`run_once`], and a side that should print JSON
/// metrics but printed none is a failed run.
pub fn run_side(side: &Side) -> Result<BTreeMap<String, f64>, String> {
    run_side_limited(side, &RunLimits::default()).map(|r| r.metrics)
}

/// Runs one side once under `limits`: its metrics, and for a command whose
/// stdout gave none (a `--a-cmd`), why not, so the caller can warn that its
/// metrics come from the process only.
pub fn run_side_limited(side: &Side, limits: &RunLimits) -> Result<SideRun, String> {
    let (metrics, out) = run_measured(&side.argv, limits)?;
    let no_metrics = (out.own == 0).then(|| out.why_no_metrics());
    if side.json
        && let Some(why) = no_metrics
    {
        return Err(format!(
            "{:?} printed no JSON metrics on stdout ({why})",
            side.argv.first().map_or("", String::as_str)
        ));
    }
    Ok(SideRun {
        metrics,
        no_metrics,
    })
}

/// Runs `argv` once (with the [`RunLimits::default`]); returns its metrics
/// (process ones plus those in its JSON).
pub fn run_once(argv: &[String]) -> Result<BTreeMap<String, f64>, String> {
    run_measured(argv, &RunLimits::default()).map(|(m, _)| m)
}

/// What a run printed, as far as the metrics go.
struct Printed {
    /// Metrics from its own stdout.
    own: usize,
    /// Its stdout was one JSON document.
    json: bool,
    /// Its stdout was empty (or blank).
    empty: bool,
}

impl Printed {
    fn why_no_metrics(&self) -> String {
        if self.empty {
            "its stdout is empty".into()
        } else if self.json {
            "its stdout is JSON without a \"metrics\" object".into()
        } else {
            "its stdout is not JSON".into()
        }
    }
}

/// One of the run's output pipes, read to the end on its own thread, keeping
/// at most `cap` bytes; past that, the run's process group is killed.
fn capture(
    mut pipe: impl Read + Send + 'static,
    cap: usize,
    pgid: libc::pid_t,
    over: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) if kept.len() + n <= cap => kept.extend_from_slice(&buf[..n]),
                Ok(n) => {
                    let room = cap - kept.len();
                    kept.extend_from_slice(&buf[..room.min(n)]);
                    if !over.swap(true, Ordering::AcqRel) {
                        kill_group(pgid);
                    }
                    // Drain the rest without keeping it, until the group is gone.
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        kept
    })
}

/// SIGKILL to every process of group `pgid` (the run: its shell and children).
fn kill_group(pgid: libc::pid_t) {
    // SAFETY: kill takes plain integers; `pgid` is the group of a child that
    // has not been reaped yet (callers kill before `reap`), so it names no
    // other process.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Runs `argv` once: its metrics, and what its stdout gave.
fn run_measured(
    argv: &[String],
    limits: &RunLimits,
) -> Result<(BTreeMap<String, f64>, Printed), String> {
    let (prog, args) = argv.split_first().ok_or("empty command")?;
    // Counters must be opened by the thread that spawns, right before it spawns
    // (see `perf`): the child inherits them, enabled at its exec.
    let counters = crate::perf::Counters::open_for_next_exec();
    let t0 = Instant::now();
    // Its own process group, so that a timeout kills what it started too; out
    // of the terminal's group, it would outlive a Ctrl-C of ours, so it gets
    // SIGKILL when we die (PR_SET_PDEATHSIG).
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: the closure runs in the child between fork and exec and only
    // makes the prctl system call, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {prog:?}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    // Both pipes are drained on their own threads: a command that logs more
    // than a pipe holds (64 KiB) while stdout is still open would otherwise
    // block on its write while we block on the other pipe.
    let (out_over, err_over) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let out_reader = child
        .stdout
        .take()
        .map(|o| capture(o, limits.max_captured, pid, out_over.clone()));
    let err_reader = child
        .stderr
        .take()
        .map(|e| capture(e, limits.max_captured, pid, err_over.clone()));
    // The watchdog kills the group at the deadline unless told the run ended.
    let (stop, stopped) = mpsc::channel::<()>();
    let timed_out = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (timeout, timed_out) = (limits.timeout, timed_out.clone());
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(timeout) {
                timed_out.store(true, Ordering::Release);
                kill_group(pid);
            }
        })
    };
    let out = out_reader.and_then(|h| h.join().ok()).unwrap_or_default();
    let err = err_reader.and_then(|h| h.join().ok()).unwrap_or_default();
    // Exited (or killed), not reaped: its pid and group stay ours until the
    // watchdog is stopped, so a late kill cannot reach another process.
    wait_exited(pid)?;
    let _ = stop.send(());
    let _ = watchdog.join();
    let (status, ru) = wait4(pid)?;
    let wall = t0.elapsed().as_secs_f64();
    let out = String::from_utf8_lossy(&out);
    let err = String::from_utf8_lossy(&err);
    let killed_why = if timed_out.load(Ordering::Acquire) {
        Some(format!(
            "timed out after {} s (--timeout) and was killed",
            limits.timeout.as_secs_f64()
        ))
    } else {
        [("stdout", &out_over), ("stderr", &err_over)]
            .iter()
            .find(|(_, o)| o.load(Ordering::Acquire))
            .map(|(which, _)| {
                format!(
                    "printed more than {} on {which} (the most kept of a run) and was killed",
                    crate::limits::human_bytes(limits.max_captured as u64)
                )
            })
    };
    if let Some(why) = killed_why {
        return Err(format!("{prog:?} {why}{}", tail_suffix(&err)));
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!(
            "{prog:?} failed ({}){}",
            describe_status(status),
            tail_suffix(&err)
        ));
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let mut m = BTreeMap::new();
    m.insert("wall s".to_string(), wall);
    m.insert("user s".to_string(), tv(ru.ru_utime));
    m.insert("sys s".to_string(), tv(ru.ru_stime));
    m.insert("voluntary ctxsw".to_string(), ru.ru_nvcsw as f64);
    m.insert("involuntary ctxsw".to_string(), ru.ru_nivcsw as f64);
    m.insert("max RSS KiB".to_string(), ru.ru_maxrss as f64);
    m.extend(crate::perf::derive(&counters.read()));
    let own = extract_metrics(&out);
    let printed = Printed {
        own: own.len(),
        json: serde_json::from_str::<serde_json::Value>(out.trim()).is_ok(),
        empty: out.trim().is_empty(),
    };
    m.extend(own);
    Ok((m, printed))
}

/// `: <stderr tail>`, or nothing for a run that printed nothing on stderr.
fn tail_suffix(err: &str) -> String {
    let t = stderr_tail(err);
    if t.is_empty() {
        String::new()
    } else {
        format!(": {t}")
    }
}

/// A wait status as a reader wants it: `exit code N` or `killed by signal S (NAME)`.
pub fn describe_status(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit code {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let name = match sig {
            libc::SIGHUP => " (SIGHUP)",
            libc::SIGINT => " (SIGINT)",
            libc::SIGQUIT => " (SIGQUIT)",
            libc::SIGILL => " (SIGILL)",
            libc::SIGABRT => " (SIGABRT)",
            libc::SIGBUS => " (SIGBUS)",
            libc::SIGFPE => " (SIGFPE)",
            libc::SIGKILL => " (SIGKILL)",
            libc::SIGSEGV => " (SIGSEGV)",
            libc::SIGPIPE => " (SIGPIPE)",
            libc::SIGTERM => " (SIGTERM)",
            _ => "",
        };
        format!("killed by signal {sig}{name}")
    } else {
        format!("wait status {status:#x}")
    }
}

/// Lines of stderr shown when a run fails.
const TAIL_LINES: usize = 4;

/// The end of a failed run's stderr, in order, on one line (` | ` between
/// lines): its last `TAIL_LINES` (4) non-blank lines and, when it came earlier
/// (a panic followed by its backtrace), the last line that reads as the
/// error itself (`error...`, `... panicked at ...` and its message,
/// `cmwq: ...`), before a `...`.
pub fn stderr_tail(err: &str) -> String {
    let lines: Vec<&str> = err
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    let is_error = |l: &str| {
        let t = l.trim_start().to_ascii_lowercase();
        t.starts_with("error") || t.contains("panicked at") || t.starts_with("cmwq: ")
    };
    let mut shown: Vec<&str> = Vec::new();
    if let Some(i) = lines[..from].iter().rposition(|l| is_error(l)) {
        shown.push(lines[i]);
        // A panic's message is on the line after `panicked at file:line:col:`.
        if lines[i].contains("panicked at") && i + 1 < from {
            shown.push(lines[i + 1]);
        }
        shown.push("...");
    }
    shown.extend(&lines[from..]);
    shown.join(" | ")
}

fn wait4(pid: libc::pid_t) -> Result<(i32, libc::rusage), String> {
    let mut status = 0;
    // SAFETY: `ru` is owned by this frame and filled by wait4; `pid` is our own
    // child, which std has not reaped (we never called `wait` on it).
    let (r, ru) = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        let r = libc::wait4(pid, &mut status, 0, &mut ru);
        (r, ru)
    };
    if r < 0 {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    Ok((status, ru))
}

/// Blocks until child `pid` exited (or was killed), leaving it unreaped.
fn wait_exited(pid: libc::pid_t) -> Result<(), String> {
    loop {
        // SAFETY: `info` is owned by this frame and only written by waitid;
        // WNOWAIT leaves the child to be reaped by `wait4`.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("waitid: {e}"));
        }
    }
}

/// The executor whose rows a bench document's other rows are also given
/// relative to (see [`extract_metrics`]).
pub const REFERENCE_EXECUTOR: &str = "limit";

/// The bench fields that also get a row relative to the reference executor.
const RELATIVE_FIELDS: [&str; 2] = ["items_per_sec", "cpu_s_per_million"];

/// Numbers a command reports on stdout: a `cmwq-bench/1` document's summary
/// medians (`<executor>/<scope> <field>`), or a top-level `"metrics"` object.
/// Anything else gives nothing.
///
/// A bench document that measured the bare per-CPU design (`--vs limit`)
/// also gives each other row's throughput and CPU per item over `limit`'s in
/// the same run (`<executor>/<scope> items_per_sec vs limit`): the host's
/// drift between runs (on a shared VM, 10% over minutes) moves both rows of
/// a run alike, so the ratio compares two builds where the raw figures
/// drown in it.
pub fn extract_metrics(stdout: &str) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    let Ok(v) = serde_json::from_str::<serde_json::Value>(stdout.trim()) else {
        return m;
    };
    if let Some(obj) = v.get("metrics").and_then(|x| x.as_object()) {
        for (k, x) in obj {
            if let Some(f) = x.as_f64() {
                m.insert(k.clone(), f);
            }
        }
    }
    if v.get("schema").and_then(|s| s.as_str()) == Some("cmwq-bench/1") {
        for row in v["summary"].as_array().into_iter().flatten() {
            let who = format!(
                "{}/{}",
                row["executor"].as_str().unwrap_or("?"),
                row["scope"].as_str().unwrap_or("-")
            );
            for field in [
                "items_per_sec",
                "enqueue_p50_ns",
                "enqueue_p95_ns",
                "round_trip_p50_ns",
                "round_trip_p95_ns",
                "cpu_s_per_million",
                "vcsw_per_item",
            ] {
                if let Some(f) = row[field]["median"].as_f64() {
                    m.insert(format!("{who} {field}"), f);
                }
            }
        }
        add_relative(&mut m);
    }
    m
}

/// Adds `<row> <field> vs limit` for every row but the reference's, where
/// the reference row (`limit/-`) has the field and it is not zero.
fn add_relative(m: &mut BTreeMap<String, f64>) {
    let reference = format!("{REFERENCE_EXECUTOR}/");
    let mut derived = Vec::new();
    for field in RELATIVE_FIELDS {
        let Some(base) = m
            .iter()
            .find(|(k, _)| k.starts_with(&reference) && k.ends_with(&format!(" {field}")))
            .map(|(_, v)| *v)
            .filter(|v| *v != 0.0)
        else {
            continue;
        };
        for (k, v) in m.iter() {
            if !k.starts_with(&reference) && k.ends_with(&format!(" {field}")) {
                derived.push((format!("{k} vs {REFERENCE_EXECUTOR}"), v / base));
            }
        }
    }
    m.extend(derived);
}

/// Which way is better for a metric, from its name.
pub fn direction_of(name: &str) -> Direction {
    let n = name.to_ascii_lowercase();
    if n.contains("per_sec") || n.contains("items/s") || n.contains("throughput") || n == "ipc" {
        Direction::HigherIsBetter
    } else if n.ends_with(" s")
        || n.ends_with("_ns")
        || n.contains("ctxsw")
        || n.contains("rss")
        || n.contains("cpu_s")
        || n.contains("vcsw")
        || n.contains("latency")
        || n.contains("cycles")
        || n.starts_with("clat")
        || n == "cycles"
        || n == "instructions"
        || n.contains("misses")
        || n.contains("bound %")
        || n == "missed"
        || n.starts_with("gaps_over")
        || n.contains("nivcsw")
        || n.contains("worst_gap")
    {
        Direction::LowerIsBetter
    } else {
        Direction::Neutral
    }
}

/// Builds the A/B table from the successful runs of sides 0 (A) and 1 (B):
/// see [`table_pair`].
pub fn table(records: &[RunRecord], cfg: CompareConfig, title: &str) -> Result<AbTable, String> {
    table_pair(records, 0, 1, cfg, title)
}

/// Builds the table of side `b` against baseline side `a` from their
/// successful runs: a row per metric present in every successful run of both
/// sides, process metrics first, then counter rows (measured, or "not
/// supported" with the reason, given once for a run of rows that share it),
/// then the command's own metrics.
pub fn table_pair(
    records: &[RunRecord],
    a: usize,
    b: usize,
    cfg: CompareConfig,
    title: &str,
) -> Result<AbTable, String> {
    let side = |s: usize| {
        records
            .iter()
            .filter(move |r| r.side == s && r.error.is_none())
    };
    let (na, nb) = (side(a).count(), side(b).count());
    let label = side_label;
    if na < 2 || nb < 2 {
        return Err(format!(
            "too few successful runs to compare ({}: {na}, {}: {nb}; need 2 a side)",
            label(a),
            label(b)
        ));
    }
    let mut names: Vec<String> = PROCESS_METRICS.iter().map(|s| s.to_string()).collect();
    names.extend(COUNTER_METRICS.iter().map(|s| s.to_string()));
    // One row on each side that the other lacks (`bench --scopes cache`
    // against `--scopes cache_shard`): compared as one row, named for both.
    let paired = paired_rows(side(a), side(b));
    let value = |r: &RunRecord, name: &str| -> Option<f64> {
        if let Some((ra, rb, joint)) = &paired
            && let Some(metric) = name.strip_prefix(joint.as_str())
        {
            let row = if r.side == a { ra } else { rb };
            return r.metrics.get(&format!("{row}{metric}")).copied();
        }
        r.metrics.get(name).copied()
    };
    // Every metric any successful run of either side reported.
    let mut rest: Vec<String> = side(a)
        .chain(side(b))
        .flat_map(|r| r.metrics.keys().cloned())
        .map(|k| match &paired {
            Some((ra, rb, joint)) => match row_of(&k) {
                Some((row, metric)) if row == ra || row == rb => format!("{joint}{metric}"),
                _ => k,
            },
            None => k,
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    rest.retain(|k| !names.contains(k));
    rest.sort_by_key(|n| match clat_rank(n) {
        Some(r) => (0, r, String::new()),
        None => (1, 0, n.clone()),
    });
    names.extend(rest);
    let mut t = AbTable::new(cfg).with_title(title);
    if let Some((ra, rb, joint)) = &paired {
        t.note(format!(
            "{joint}: {} reported row {ra} and {} row {rb}, compared as one",
            label(a),
            label(b)
        ));
    }
    let mut last_reason: Option<String> = None;
    for name in names {
        let va: Vec<f64> = side(a).filter_map(|r| value(r, &name)).collect();
        let vb: Vec<f64> = side(b).filter_map(|r| value(r, &name)).collect();
        let counter = COUNTER_METRICS.contains(&name.as_str());
        if va.len() == na && vb.len() == nb {
            t.push(Metric::new(name.clone(), direction_of(&name)), &va, &vb)
                .map_err(|e| format!("{name}: {e}"))?;
            last_reason = None;
        } else if !counter && va.len() >= 2 && vb.len() >= 2 {
            // Some runs lack it: compare the runs that have it, and say so.
            t.push(Metric::new(name.clone(), direction_of(&name)), &va, &vb)
                .map_err(|e| format!("{name}: {e}"))?;
            t.note(format!(
                "{name}: reported by {} of {na} {} runs and {} of {nb} {} runs; compared over those",
                va.len(),
                label(a),
                vb.len(),
                label(b)
            ));
            last_reason = None;
        } else if !counter {
            t.note(format!(
                "{name}: left out, reported by only {} {} and {} {} runs",
                va.len(),
                label(a),
                vb.len(),
                label(b)
            ));
        } else {
            let why = crate::perf::unsupported_reasons()
                .get(&name)
                .cloned()
                .unwrap_or_else(|| "not counted in every run".to_string());
            let shown = if last_reason.as_deref() == Some(why.as_str()) {
                "same reason".to_string()
            } else {
                why.clone()
            };
            t.push_not_supported(name, shown);
            last_reason = Some(why);
        }
    }
    Ok(t)
}

/// A metric's row and the rest of its name, split at the first space
/// (`cmwq/cache items_per_sec` is row `cmwq/cache`, metric ` items_per_sec`);
/// `None` for a name without a row (`wall s` and the other process metrics
/// have a space too, but no `/`).
fn row_of(name: &str) -> Option<(&str, &str)> {
    let sp = name.find(' ')?;
    let row = &name[..sp];
    row.contains('/').then(|| (row, &name[sp..]))
}

/// The rows to compare as one: where every run of side A reports one row
/// that no run of B reports and B one that A never does (the same bench
/// with `--scopes cache` against `--scopes cache_shard`), that pair and the
/// name of the joint row (`cmwq/cache|cache_shard`, the executor named
/// once where both rows share it). `None` where the sides differ in more
/// rows than that, or in none.
fn paired_rows<'r>(
    a: impl Iterator<Item = &'r RunRecord>,
    b: impl Iterator<Item = &'r RunRecord>,
) -> Option<(String, String, String)> {
    use std::collections::BTreeSet;
    fn rows<'r>(it: impl Iterator<Item = &'r RunRecord>) -> BTreeSet<String> {
        it.flat_map(|r| r.metrics.keys())
            .filter_map(|k| row_of(k).map(|(row, _)| row.to_string()))
            .collect()
    }
    let (ra, rb) = (rows(a), rows(b));
    let only_a: Vec<&String> = ra.difference(&rb).collect();
    let only_b: Vec<&String> = rb.difference(&ra).collect();
    let ([x], [y]) = (only_a.as_slice(), only_b.as_slice()) else {
        return None;
    };
    let joint = match (x.split_once('/'), y.split_once('/')) {
        (Some((ex, sx)), Some((ey, sy))) if ex == ey => format!("{ex}/{sx}|{sy}"),
        _ => format!("{x}|{y}"),
    };
    Some(((*x).clone(), (*y).clone(), joint))
}

/// fio's order of clat statistics (`clat min us` first, `clat p99.9 us`
/// last); `None` for other metrics.
fn clat_rank(name: &str) -> Option<usize> {
    let stat = name.strip_prefix("clat ")?.split(' ').next()?;
    ["min", "avg", "max", "stdev", "p50", "p90", "p99", "p99.9"]
        .iter()
        .position(|s| *s == stat)
}

/// `A`, `B` for two sides; `side N` past them (labels live in the caller's
/// [`Side`]s, records carry only the index).
fn side_label(s: usize) -> String {
    match s {
        0 => "A".into(),
        1 => "B".into(),
        n => format!("side {n}"),
    }
}

/// Splits a table into one per `<executor>/<scope>` prefix of its metric names
/// (process metrics and the rest go to a first table named `process`).
pub fn split_by_prefix(t: &AbTable) -> Vec<(String, AbTable)> {
    let mut out: Vec<(String, AbTable)> = Vec::new();
    for row in t.compared() {
        let (group, name) = match row.metric.split_once(' ') {
            Some((g, n)) if g.contains('/') => (g.to_string(), n.to_string()),
            _ => ("process".to_string(), row.metric.clone()),
        };
        let i = match out.iter().position(|(g, _)| *g == group) {
            Some(i) => i,
            None => {
                let title = format!(
                    "{}{group}",
                    t.title.clone().map(|x| x + "\n").unwrap_or_default()
                );
                out.push((
                    group.clone(),
                    AbTable::new(t.config.clone()).with_title(title),
                ));
                out.len() - 1
            }
        };
        let mut r = row.clone();
        r.metric = name;
        out[i].1.push_row(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_json_gives_summary_medians() {
        let j = r#"{"schema":"cmwq-bench/1","summary":[{"executor":"cmwq","scope":"cpu",
            "items_per_sec":{"median":400000.0,"min":1.0,"max":2.0},
            "enqueue_p95_ns":{"median":900.0,"min":1.0,"max":2.0}}]}"#;
        let m = extract_metrics(j);
        assert_eq!(m.get("cmwq/cpu items_per_sec"), Some(&400000.0));
        assert_eq!(m.get("cmwq/cpu enqueue_p95_ns"), Some(&900.0));
        assert_eq!(m.len(), 2, "no limit row, no ratios: {m:?}");
    }

    #[test]
    fn bench_json_with_limit_gives_same_run_ratios() {
        let j = r#"{"schema":"cmwq-bench/1","summary":[
            {"executor":"cmwq","scope":"cpu",
             "items_per_sec":{"median":600.0},"cpu_s_per_million":{"median":0.3},
             "enqueue_p95_ns":{"median":900.0}},
            {"executor":"limit","scope":"-",
             "items_per_sec":{"median":800.0},"cpu_s_per_million":{"median":0.2}}]}"#;
        let m = extract_metrics(j);
        assert_eq!(m.get("cmwq/cpu items_per_sec vs limit"), Some(&0.75));
        let cpu = m["cmwq/cpu cpu_s_per_million vs limit"];
        assert!((cpu - 1.5).abs() < 1e-12, "{cpu}");
        assert!(
            !m.keys()
                .any(|k| k.starts_with("limit/") && k.contains(" vs "))
        );
        assert!(!m.contains_key("cmwq/cpu enqueue_p95_ns vs limit"));
        // The ratio rows read the right way round and sit in the row's table.
        assert_eq!(
            direction_of("cmwq/cpu items_per_sec vs limit"),
            Direction::HigherIsBetter
        );
        assert_eq!(
            direction_of("cmwq/cpu cpu_s_per_million vs limit"),
            Direction::LowerIsBetter
        );
        assert_eq!(
            row_of("cmwq/cpu items_per_sec vs limit"),
            Some(("cmwq/cpu", " items_per_sec vs limit"))
        );
    }

    fn record(side: usize, index: usize, metrics: &[(&str, f64)]) -> RunRecord {
        RunRecord {
            side,
            index,
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            error: None,
        }
    }

    #[test]
    fn one_row_a_side_that_the_other_lacks_is_compared_as_one() {
        // `bench --scopes cache` against `--scopes cache_shard`: every metric
        // of one row was left out before, and the compare said nothing.
        let mut recs = Vec::new();
        for i in 0..3 {
            let x = i as f64;
            recs.push(record(
                0,
                i,
                &[("cmwq/cache items_per_sec", 100.0 + x), ("wall s", 1.0)],
            ));
            recs.push(record(
                1,
                i,
                &[
                    ("cmwq/cache_shard items_per_sec", 200.0 + x),
                    ("wall s", 1.0),
                ],
            ));
        }
        let p = paired_rows(
            recs.iter().filter(|r| r.side == 0),
            recs.iter().filter(|r| r.side == 1),
        );
        assert_eq!(
            p,
            Some((
                "cmwq/cache".to_string(),
                "cmwq/cache_shard".to_string(),
                "cmwq/cache|cache_shard".to_string()
            ))
        );
        let t = table_pair(&recs, 0, 1, CompareConfig::default(), "t").unwrap();
        let row = t
            .compared()
            .find(|r| r.metric == "cmwq/cache|cache_shard items_per_sec")
            .expect("the joint row is compared");
        assert_eq!(
            (row.stats.baseline.median, row.stats.experiment.median),
            (101.0, 201.0)
        );
        let text = t.render_text(&crate::ab::table::RenderOptions::all());
        assert!(
            !text.contains("cmwq/cache items_per_sec: left out"),
            "{text}"
        );
        // Rows shared by both sides, or several rows apart: no pairing.
        let same: Vec<RunRecord> = (0..2)
            .flat_map(|i| {
                [
                    record(0, i, &[("cmwq/cpu items_per_sec", 1.0)]),
                    record(1, i, &[("cmwq/cpu items_per_sec", 2.0)]),
                ]
            })
            .collect();
        assert_eq!(
            paired_rows(
                same.iter().filter(|r| r.side == 0),
                same.iter().filter(|r| r.side == 1)
            ),
            None
        );
        let two = [
            record(0, 0, &[("cmwq/cpu x", 1.0), ("cmwq/smt x", 1.0)]),
            record(1, 0, &[("cmwq/cache x", 1.0), ("cmwq/numa x", 1.0)]),
        ];
        assert_eq!(
            paired_rows(
                two.iter().filter(|r| r.side == 0),
                two.iter().filter(|r| r.side == 1)
            ),
            None
        );
        // Process metrics have no row.
        assert_eq!(row_of("wall s"), None);
        assert_eq!(
            row_of("cmwq/cpu items_per_sec"),
            Some(("cmwq/cpu", " items_per_sec"))
        );
    }

    #[test]
    fn metrics_object_and_garbage() {
        let m = extract_metrics(r#"{"metrics":{"x":1.5,"name":"not a number"}}"#);
        assert_eq!(m.len(), 1);
        assert_eq!(m["x"], 1.5);
        assert!(extract_metrics("hello").is_empty());
    }

    #[test]
    fn stderr_tails_keep_the_order_and_the_error_line() {
        assert_eq!(stderr_tail(""), "");
        assert_eq!(stderr_tail("one\ntwo\n\n"), "one | two");
        assert_eq!(stderr_tail("a\nb\nc\nd\ne\n"), "b | c | d | e");
        let panic = "thread 'main' panicked at src/x.rs:1:2:\ncapacity overflow\nstack backtrace:\n   0: f\n   1: g\n   2: h\nnote: run with RUST_BACKTRACE=full\n";
        assert_eq!(
            stderr_tail(panic),
            "thread 'main' panicked at src/x.rs:1:2: | capacity overflow | ... |    0: f |    1: g |    2: h | note: run with RUST_BACKTRACE=full"
        );
        assert_eq!(
            stderr_tail("cmwq: --items 0: bad\nx\ny\nz\nw\n"),
            "cmwq: --items 0: bad | ... | x | y | z | w"
        );
    }

    #[test]
    fn statuses_read_as_exit_codes_and_signals() {
        let run = |sh: &str| {
            let st = Command::new("sh").args(["-c", sh]).status().unwrap();
            use std::os::unix::process::ExitStatusExt;
            describe_status(st.into_raw())
        };
        assert_eq!(run("exit 1"), "exit code 1");
        assert_eq!(run("exit 3"), "exit code 3");
        assert_eq!(run("kill -9 $$"), "killed by signal 9 (SIGKILL)");
    }

    #[test]
    fn a_run_past_its_timeout_or_output_cap_is_killed_and_says_why() {
        let argv = |s: &str| vec!["sh".to_string(), "-c".to_string(), s.to_string()];
        let side = |s: &str| Side {
            label: "A".into(),
            argv: argv(s),
            json: false,
        };
        let limits = RunLimits {
            timeout: Duration::from_secs(1),
            max_captured: 1000,
        };
        // A child of the shell that keeps the pipes open is killed too (its group).
        let e = run_side_limited(&side("echo started >&2; sleep 1000 & sleep 1000"), &limits)
            .unwrap_err();
        assert!(
            e.contains("timed out after 1 s (--timeout) and was killed: started"),
            "{e}"
        );
        let e = run_side_limited(&side("yes"), &limits).unwrap_err();
        assert!(e.contains("printed more than 1000 B on stdout"), "{e}");
        let e = run_side_limited(&side("echo boom >&2; exit 2"), &limits).unwrap_err();
        assert!(e.ends_with("failed (exit code 2): boom"), "{e}");
        let r = run_side_limited(&side("echo hello"), &limits).unwrap();
        assert_eq!(r.no_metrics.as_deref(), Some("its stdout is not JSON"));
        assert!(r.metrics.contains_key("wall s"));
        let r = run_side_limited(&side("true"), &limits).unwrap();
        assert_eq!(r.no_metrics.as_deref(), Some("its stdout is empty"));
        let r = run_side_limited(&side(r#"echo '{"metrics":{"x":1}}'"#), &limits).unwrap();
        assert_eq!((r.no_metrics, r.metrics.get("x")), (None, Some(&1.0)));
    }

    #[test]
    fn directions() {
        assert_eq!(
            direction_of("cmwq/cpu items_per_sec"),
            Direction::HigherIsBetter
        );
        assert_eq!(
            direction_of("cmwq/cpu enqueue_p95_ns"),
            Direction::LowerIsBetter
        );
        assert_eq!(direction_of("wall s"), Direction::LowerIsBetter);
        assert_eq!(direction_of("widgets"), Direction::Neutral);
        assert_eq!(direction_of("IPC"), Direction::HigherIsBetter);
        assert_eq!(direction_of("L1i misses kernel"), Direction::LowerIsBetter);
        assert_eq!(direction_of("frontend bound %"), Direction::LowerIsBetter);
        assert_eq!(direction_of("clat p99 us"), Direction::LowerIsBetter);
    }

    fn rec(side: usize, x: f64, err: bool) -> RunRecord {
        let mut metrics = BTreeMap::new();
        for p in PROCESS_METRICS {
            metrics.insert(p.to_string(), 1.0);
        }
        metrics.insert("x".into(), x);
        RunRecord {
            side,
            index: 0,
            metrics: if err { BTreeMap::new() } else { metrics },
            error: err.then(|| "boom".to_string()),
        }
    }

    #[test]
    fn failed_runs_are_left_out_and_too_few_is_an_error() {
        let recs = vec![
            rec(0, 1.0, false),
            rec(1, 2.0, false),
            rec(0, 1.0, true),
            rec(1, 2.0, false),
        ];
        let e = table(&recs, CompareConfig::default(), "t").unwrap_err();
        assert!(e.contains("A: 1"), "{e}");
        let recs = vec![
            rec(0, 10.0, false),
            rec(1, 20.0, false),
            rec(0, 10.0, false),
            rec(1, 20.0, false),
            rec(0, 999.0, true),
        ];
        let t = table(&recs, CompareConfig::default(), "t").unwrap();
        let x = t.compared().find(|r| r.metric == "x").unwrap();
        assert_eq!(x.stats.baseline.median, 10.0);
        assert_eq!(x.stats.delta_pct, Some(100.0));
    }

    #[test]
    fn counter_rows_are_measured_or_say_why_once() {
        let mut recs: Vec<RunRecord> = (0..4).map(|i| rec(i % 2, 1.0, false)).collect();
        let t = table(&recs, CompareConfig::default(), "t").unwrap();
        let missing: Vec<(&str, &str)> = t
            .rows
            .iter()
            .filter_map(|r| match r {
                crate::ab::table::TableRow::NotSupported { metric, reason } => {
                    Some((metric.as_str(), reason.as_str()))
                }
                _ => None,
            })
            .collect();
        let names: Vec<&str> = missing.iter().map(|(m, _)| *m).collect();
        assert_eq!(names, COUNTER_METRICS);
        // cycles' reason is given in full; IPC fails for the same reason as
        // instructions just above it, and says so instead of repeating it.
        assert_ne!(missing[0].1, "same reason");
        assert_eq!(missing[2].1, "same reason");
        // Counted in every run: a compared row, with IPC higher-is-better.
        for (i, r) in recs.iter_mut().enumerate() {
            r.metrics.insert("IPC".into(), 1.0 + (i % 2) as f64);
        }
        let t = table(&recs, CompareConfig::default(), "t").unwrap();
        let ipc = t.compared().find(|r| r.metric == "IPC").unwrap();
        // Command metrics: fio's clat order first, then by name.
        for r in recs.iter_mut() {
            for m in ["clat p50 us", "clat max us", "clat min us", "items"] {
                r.metrics.insert(m.into(), 1.0);
            }
        }
        let t2 = table(&recs, CompareConfig::default(), "t").unwrap();
        let order: Vec<&str> = t2
            .compared()
            .map(|r| r.metric.as_str())
            .filter(|m| m.starts_with("clat") || *m == "items" || *m == "x")
            .collect();
        assert_eq!(
            order,
            ["clat min us", "clat max us", "clat p50 us", "items", "x"]
        );
        assert_eq!(ipc.stats.delta_pct, Some(100.0));
        assert_eq!(ipc.stats.direction, Direction::HigherIsBetter);
    }

    #[test]
    fn split_groups_rows_by_executor_and_scope() {
        let mut recs = Vec::new();
        for side in [0, 1, 0, 1] {
            let mut r = rec(side, 1.0, false);
            let v = if side == 0 { 100.0 } else { 200.0 };
            r.metrics.insert("cmwq/cpu items_per_sec".into(), v);
            r.metrics.insert("cmwq/cache items_per_sec".into(), v * 2.0);
            recs.push(r);
        }
        let t = table(&recs, CompareConfig::default(), "t").unwrap();
        let groups = split_by_prefix(&t);
        let names: Vec<&str> = groups.iter().map(|(g, _)| g.as_str()).collect();
        assert_eq!(names, ["process", "cmwq/cache", "cmwq/cpu"]);
        let cache = &groups[1].1;
        let row = cache.compared().next().unwrap();
        assert_eq!(row.metric, "items_per_sec");
        assert_eq!(row.stats.baseline.median, 200.0);
    }
}
