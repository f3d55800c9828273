//! Bad input, as a careless or hostile user gives it: every case must end
//! with a clear message and an exit status, never a panic, a signal or a
//! hang. Each run of `cmwq` gets [`DEADLINE`] (then it is killed and the test
//! fails) under an address-space limit of [`MEMORY`], so that a size that
//! slips past validation fails here instead of swapping the machine.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Longest a single `cmwq` run may take here.
const DEADLINE: Duration = Duration::from_secs(60);

/// `RLIMIT_AS` of every `cmwq` run here: 2 GiB.
const MEMORY: u64 = 2 << 30;

/// What one run did.
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Reads a pipe to the end on its own thread (both pipes must drain at once).
fn drain(p: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut p) = p {
            let _ = p.read_to_string(&mut s);
        }
        s
    })
}

/// `cmwq args` with `env` set, under the deadline and the memory limit.
fn cmwq_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cmwq"));
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: runs in the child between fork and exec; it only makes the
    // setrlimit system call (async-signal-safe) and allocates nothing.
    unsafe {
        cmd.pre_exec(|| cmwq_lab::limits::limit_address_space(MEMORY));
    }
    let mut child = cmd.spawn().expect("start cmwq");
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let status = wait_or_kill(&mut child, args);
    Run {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn cmwq(args: &[&str]) -> Run {
    cmwq_env(args, &[])
}

fn wait_or_kill(child: &mut Child, args: &[&str]) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("wait for cmwq") {
            return st;
        }
        if t0.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cmwq {args:?} hung: killed after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The run ended with an exit code (not a signal), not 0 and not a panic's
/// 101, and said `needle` on stderr.
fn assert_refused(r: &Run, args: &[&str], needle: &str) {
    let code = r.status.code();
    assert!(
        code.is_some(),
        "cmwq {args:?} was killed by a signal: {:?}\n{}",
        r.status,
        r.stderr
    );
    assert!(
        code != Some(0) && code != Some(101),
        "cmwq {args:?} exited {code:?}\n{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("panicked"),
        "cmwq {args:?} panicked:\n{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(needle),
        "cmwq {args:?}: stderr lacks {needle:?}:\n{}",
        r.stderr
    );
}

fn refused(args: &[&str], needle: &str) -> Run {
    let r = cmwq(args);
    assert_refused(&r, args, needle);
    r
}

const HUGE: &str = "18446744073709551615";

#[test]
fn bench_sizes_are_refused_before_anything_starts() {
    // The producer used to panic on a capacity overflow before the start
    // gate, and the gate waited forever.
    let r = refused(
        &[
            "bench",
            "--items",
            HUGE,
            "--threads",
            "1",
            "--scopes",
            "cpu",
        ],
        "--items 18446744073709551615: ",
    );
    assert!(r.stderr.contains("at most"), "{}", r.stderr);
    refused(
        &["bench", "--items", "100000000", "--threads", "64"],
        "--items 100000000: 64 producers x 100000000 items",
    );
    refused(
        &[
            "bench",
            "--items",
            "1000000",
            "--batch",
            "1000000",
            "--threads",
            "4",
        ],
        "--batch 1000000: ",
    );
    refused(
        &["bench", "--threads", "1000000"],
        "--threads 1000000: at most",
    );
    refused(
        &["bench", "--workers", "1000000"],
        "--workers 1000000: at most",
    );
    refused(
        &["bench", "--rounds", HUGE],
        "--rounds 18446744073709551615: at most",
    );
}

#[test]
fn latency_sizes_are_refused() {
    refused(&["latency", "--hogs", "1000000"], "--hogs 1000000: at most");
    refused(
        &["latency", "--interval-us", HUGE],
        "--interval-us 18446744073709551615: at most",
    );
    refused(
        &["latency", "--duration-ms", HUGE],
        "--duration-ms 18446744073709551615: at most",
    );
    refused(
        &["latency", "--interval-us", "1", "--duration-ms", "3600000"],
        "--duration-ms 3600000 with --interval-us 1: 3600000001 items",
    );
    refused(
        &["latency", "--hog-period-ms", HUGE],
        "--hog-period-ms 18446744073709551615: at most",
    );
    refused(
        &["latency", "--work-us", HUGE],
        "--work-us 18446744073709551615: at most",
    );
}

#[test]
fn percpu_and_icache_sizes_are_refused() {
    refused(
        &["percpu", "cost", "--burst", HUGE],
        "--burst 18446744073709551615: ",
    );
    refused(
        &["percpu", "cost", "--runs", HUGE],
        "--runs 18446744073709551615: at most",
    );
    refused(
        &["percpu", "cost", "--ops", HUGE],
        "--ops 18446744073709551615: at most",
    );
    refused(
        &["icache-workload", "--workload", "resident", "--batch", HUGE],
        "--batch 18446744073709551615: ",
    );
    refused(
        &["icache-workload", "--workload", "resident", "--items", HUGE],
        "--items 18446744073709551615: at most",
    );
}

const A: &str = r#"echo '{"metrics":{"x":10}}'"#;

#[test]
fn compare_counts_and_timeout_are_checked() {
    refused(
        &["compare", "--a-cmd", A, "--b-cmd", A, "--runs", HUGE],
        "--runs 18446744073709551615: at most",
    );
    refused(
        &["compare", "--a-cmd", A, "--b-cmd", A, "--warmup", HUGE],
        "--warmup 18446744073709551615: at most",
    );
    refused(
        &["compare", "--a-cmd", A, "--b-cmd", A, "--timeout", "0"],
        "--timeout",
    );
}

#[test]
fn compare_kills_a_run_past_its_timeout_with_its_group() {
    // The shell's child keeps the pipes open: only killing the group ends it.
    let slow = "echo started >&2; sleep 1000 & sleep 1000";
    let args = [
        "compare",
        "--a-cmd",
        slow,
        "--b-cmd",
        A,
        "--runs",
        "2",
        "--warmup",
        "0",
        "--timeout",
        "1",
    ];
    let r = refused(
        &args,
        "timed out after 1 s (--timeout) and was killed: started",
    );
    assert!(r.stderr.contains("too few successful runs"), "{}", r.stderr);
}

#[test]
fn compare_caps_what_it_keeps_of_a_run() {
    let args = [
        "compare", "--a-cmd", "yes", "--b-cmd", A, "--runs", "2", "--warmup", "0",
    ];
    refused(
        &args,
        "printed more than 16.0 MiB on stdout (the most kept of a run) and was killed",
    );
}

#[test]
fn compare_reports_exit_codes_signals_and_the_stderr_tail_in_order() {
    let fails = "echo first >&2; echo second >&2; exit 3";
    let args = [
        "compare", "--a-cmd", fails, "--b-cmd", A, "--runs", "2", "--warmup", "0",
    ];
    let r = refused(&args, "failed (exit code 3): first | second");
    assert!(!r.stderr.contains("status 768"), "{}", r.stderr);
    let killed = "kill -9 $$";
    let args = [
        "compare", "--a-cmd", killed, "--b-cmd", A, "--runs", "2", "--warmup", "0",
    ];
    refused(&args, "failed (killed by signal 9 (SIGKILL))");
}

#[test]
fn compare_warns_when_a_command_prints_no_json() {
    let args = [
        "compare",
        "--a-cmd",
        "echo hello",
        "--b-cmd",
        A,
        "--runs",
        "2",
        "--warmup",
        "0",
    ];
    let r = cmwq(&args);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: side A (sh -c echo hello): its stdout is not JSON; its metrics come from the process only"),
        "{}",
        r.stderr
    );
    // Once per side, not once per run.
    assert_eq!(
        r.stderr.matches("warning: side A").count(),
        1,
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("warning: side B"), "{}", r.stderr);
}

#[test]
fn plot_paths_are_checked_before_the_first_run() {
    // The bench itself would fail (a bad environment): the --plot error
    // coming instead shows the path was checked first.
    let env = [("CMWQ_CACHE_SHARD_SIZE", "0")];
    let args = [
        "bench",
        "--threads",
        "1",
        "--items",
        "10",
        "--rounds",
        "1",
        "--scopes",
        "cpu",
        "--plot",
        "/nonexistent/dir/x.svg",
    ];
    let r = cmwq_env(&args, &env);
    assert_refused(&r, &args, "--plot /nonexistent/dir/x.svg: cannot write it");
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("x.png");
    let args = ["bench", "--plot", png.to_str().unwrap()];
    refused(&args, "the plot is SVG, name it FILE.svg");

    // compare: not a single run happens (the side would leave a mark).
    let mark = dir.path().join("ran");
    let side = format!("touch {}; {A}", mark.display());
    let args = [
        "compare",
        "--a-cmd",
        &side,
        "--b-cmd",
        A,
        "--runs",
        "2",
        "--plot",
        "/nonexistent/dir/x.svg",
    ];
    refused(&args, "--plot /nonexistent/dir/x.svg: cannot write it");
    assert!(!mark.exists(), "a run happened before --plot was checked");
}

#[test]
fn a_plot_that_fails_at_the_end_still_prints_the_results() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("plots");
    std::fs::create_dir(&sub).unwrap();
    let svg = sub.join("ab.svg");
    // The directory is there when checked, and gone when the plot is written.
    let side = format!("rm -rf {}; {A}", sub.display());
    let args = [
        "compare",
        "--a-cmd",
        &side,
        "--b-cmd",
        A,
        "--runs",
        "2",
        "--warmup",
        "0",
        "--plot",
        svg.to_str().unwrap(),
    ];
    let r = refused(&args, "--plot ");
    assert!(
        r.stdout.lines().any(|l| l.starts_with("x ")),
        "no table:\n{}",
        r.stdout
    );
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    // More than a pipe holds, so the writer meets the closed pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .args(["topology", "--synthetic", "package:4 core:64 pu:2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let err = drain(child.stderr.take());
    let st = wait_or_kill(&mut child, &["topology"]);
    let err = err.join().unwrap();
    assert_eq!(st.code(), Some(0), "{st:?}\n{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn errors_carry_the_cmwq_prefix_once() {
    let env = [("CMWQ_CACHE_SHARD_SIZE", "0")];
    let args = [
        "bench",
        "--threads",
        "1",
        "--items",
        "10",
        "--rounds",
        "1",
        "--scopes",
        "cpu",
    ];
    let r = cmwq_env(&args, &env);
    assert_refused(
        &r,
        &args,
        "cmwq: cmwq/cpu: building bench_wq: CMWQ_CACHE_SHARD_SIZE=\"0\"",
    );
    assert!(!r.stderr.contains("cmwq: cmwq:"), "{}", r.stderr);
}

#[test]
fn monitor_intervals_out_of_range_are_refused() {
    // Refused before it looks for the process: the pid need not exist.
    for bad in ["1e20", "NaN", "inf", "86401"] {
        refused(&["monitor", "--pid", "1", "-i", bad], "--interval");
    }
    // Below the floor (0 alone means once): a million tables a second would
    // keep the target's control thread busy.
    for bad in ["0.000001", "0.049"] {
        let r = refused(&["monitor", "--pid", "1", "-i", bad], "--interval");
        assert!(r.stderr.contains("0.05"), "{}", r.stderr);
    }
}

#[test]
fn timeouts_out_of_range_are_refused() {
    for bad in ["0", "-1", "NaN", "inf", "1e9"] {
        let t = format!("--timeout={bad}");
        for args in [
            &["dump", "--pid", "1", &t][..],
            &["monitor", "--pid", "1", &t],
            &["set", "--pid", "1", &t, "x", "nice", "0"],
            &["ps", &t],
        ] {
            refused(args, "--timeout");
        }
    }
}

#[test]
fn topology_refuses_a_cache_shard_of_zero_cores() {
    refused(&["topology", "--cache-shard-size", "0"], "0");
}
