//! Nothing runs out silently: the thread limit, `fork()`, the disable
//! depth, the worker stack and a job awaiting its own handle.
//!
//! What changes the process (an `RLIMIT_NPROC`, a fork, a stack size read
//! once) runs in a child: this test binary re-executed with `--exact NAME`
//! and an environment variable that tells the child test to act. The thread
//! limit binds only an unprivileged user (root ignores `RLIMIT_NPROC`), so a
//! root run drops the child to `nobody` before its `exec`; where that is
//! impossible the test says so and passes as skipped.

mod common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cmwq::{DelayedWork, Error, JoinError, Work, Workqueue};

// ---- running a child of this binary ----

/// What a child printed and how it ended.
struct Run {
    /// Its exit code; `None` if it was killed (it hung past the deadline).
    code: Option<i32>,
    out: String,
    err: String,
}

impl Run {
    fn ok(&self) -> bool {
        self.code == Some(0)
    }
    fn show(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.out, self.err
        )
    }
}

/// Runs the child test `test` of this binary with `env`; as `nobody` when
/// `as_nobody` and we are root. `None` (with a note) where the child cannot
/// be started that way. Killed after `deadline`.
fn rerun(test: &str, env: &[(&str, &str)], as_nobody: bool, deadline: Duration) -> Option<Run> {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if as_nobody && common::euid() == 0 {
        // SAFETY: the closure runs in the forked child before exec and makes
        // only async-signal-safe syscalls (setgroups, setgid, setuid), on
        // no memory but a null pointer for an empty group list.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SKIP {test}: cannot start the child as an unprivileged user: {e}");
            return None;
        }
    };
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if t0.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Some(Run {
        code,
        out: out.join().unwrap(),
        err: err.join().unwrap(),
    })
}

/// Runs the child test `test` with `env` (as the caller's user) and checks
/// it exited well and printed `marker`.
fn child_ok(test: &str, env: &[(&str, &str)], marker: &str) -> Run {
    let run = rerun(test, env, false, Duration::from_secs(120)).expect("the child starts");
    assert!(run.ok() && run.out.contains(marker), "{}", run.show());
    run
}

/// Polls `f` for up to 30 s.
fn wait_for(f: impl Fn() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

fn counter() -> (Arc<AtomicUsize>, Work) {
    let n = Arc::new(AtomicUsize::new(0));
    let m = n.clone();
    let w = Work::new(move || {
        m.fetch_add(1, Ordering::SeqCst);
    });
    (n, w)
}

// ---- the thread limit ----

/// Sets the soft `RLIMIT_NPROC` to `n`; returns the hard limit (which an
/// unprivileged process may raise its soft limit back to).
fn set_nproc(n: u64) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct through a valid pointer.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut r) }, 0);
    let hard = r.rlim_max;
    r.rlim_cur = n.min(hard);
    // SAFETY: setrlimit reads one rlimit struct through a valid pointer.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &r) }, 0);
    hard
}

/// Whether a thread can start now (the limit binds this user).
fn can_start_thread() -> bool {
    std::thread::Builder::new()
        .spawn(|| {})
        .map(|h| h.join())
        .is_ok()
}

/// Lowers the soft limit to 1 (no thread may start): the hard limit to go
/// back to, or `None`, said on stdout, where the limit does not bind.
fn at_the_limit() -> Option<u64> {
    let hard = set_nproc(1);
    if can_start_thread() {
        println!("NPROC-SKIP the limit does not bind this user");
        return None;
    }
    Some(hard)
}

/// A queue that ran an item: the watchdog and a worker exist. Returns once
/// every worker of its pools is idle: the item's worker starts a spare when
/// it takes the item (the pool keeps one idle in reserve), and a start still
/// in flight when a case lowers the thread limit would succeed after it, end
/// the case's first episode of failures and let the next one be said again
/// (seen in CI: a third "Failed to create" line).
fn warm_queue(name: &str) -> Workqueue {
    let wq = Workqueue::builder(name).build().unwrap();
    let (n, w) = counter();
    assert!(wq.queue(&w));
    w.flush();
    assert_eq!(n.load(Ordering::SeqCst), 1);
    assert!(
        wait_for(|| wq.pool_counts().iter().all(|c| c.idle == c.workers)),
        "the warm queue's workers never all went idle: {:?}",
        wq.pool_counts()
    );
    wq
}

/// The child of the thread-limit tests: `CMWQ_TEST_NPROC` names the case.
#[test]
fn nproc_child() {
    let Ok(case) = std::env::var("CMWQ_TEST_NPROC") else {
        return;
    };
    match case.as_str() {
        "build" => {
            // No thread may start: not even the watchdog.
            let Some(hard) = at_the_limit() else { return };
            let e = Workqueue::builder("lim_build").build().unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, Error::Spawn { .. }), "{e:?}");
            assert!(
                msg.contains("watchdog") && msg.contains("EAGAIN") && msg.contains("ulimit -u"),
                "{msg}"
            );
            println!("BUILD-ERR {msg}");
            // A later build retries, and the engine works.
            set_nproc(hard);
            warm_queue("lim_build");
        }
        "delayed" => {
            let wq = warm_queue("lim_delayed");
            let Some(hard) = at_the_limit() else { return };
            let n = Arc::new(AtomicUsize::new(0));
            let m = n.clone();
            let dw = DelayedWork::new(move || {
                m.fetch_add(1, Ordering::SeqCst);
            });
            // No timer thread can start: refused, not a panic, and the item
            // is left as it was (not pending, nothing to wait for).
            assert!(!wq.queue_delayed(&dw, Duration::from_millis(5)));
            assert!(!dw.is_pending());
            let cpu = cmwq::topology::sched_affinity().unwrap()[0];
            assert_eq!(
                wq.queue_delayed_on(cpu, &dw, Duration::from_millis(5)),
                Ok(false)
            );
            assert!(!wq.mod_delayed(&dw, Duration::from_millis(5)));
            assert!(!dw.is_pending());
            assert!(!dw.flush());
            assert!(!dw.cancel_sync());
            wq.flush();
            // The limit lifted: the next queue_delayed starts the timer.
            set_nproc(hard);
            assert!(wq.queue_delayed(&dw, Duration::from_millis(5)));
            dw.flush();
            assert_eq!(n.load(Ordering::SeqCst), 1);
        }
        "workers" => {
            let _warm = warm_queue("lim_workers_warm");
            for round in 0..2 {
                let Some(hard) = at_the_limit() else { return };
                // A pool of its own (nice 6, 7: no other queue's), so no
                // worker exists and none can start.
                let starved = Workqueue::builder("lim_workers")
                    .unbound()
                    .nice(6 + round)
                    .build()
                    .unwrap();
                let (n, w) = counter();
                assert!(starved.queue(&w));
                // A fixed stretch at the limit; what is bounded is how many
                // times creation was tried in it (a tight loop tried
                // thousands of times, the watchdog's 10 ms tick hundreds).
                std::thread::sleep(Duration::from_secs(2));
                let failed: u64 = starved.pool_counts().iter().map(|c| c.create_failed).sum();
                let ran = n.load(Ordering::SeqCst);
                // Lifted before asserting, so a failure does not hang the
                // queue's drop: the watchdog's next try starts a worker.
                set_nproc(hard);
                println!("CREATE-FAILED round {round}: {failed}");
                assert!(failed >= 1, "creation was tried");
                assert!(failed <= 40, "{failed} failed creations in 2 s: no backoff");
                assert_eq!(ran, 0);
                assert!(wait_for(|| n.load(Ordering::SeqCst) == 1), "never ran");
                starved.flush();
                // Its worker's spare starts too (see `warm_queue`): settled
                // before the next round lowers the limit again.
                assert!(wait_for(|| starved
                    .pool_counts()
                    .iter()
                    .all(|c| c.idle == c.workers)));
            }
        }
        other => panic!("unknown case {other}"),
    }
    println!("NPROC-OK {case}");
}

/// Runs a thread-limit case; `None` if it could not run as an unprivileged user.
fn nproc_case(case: &str) -> Option<Run> {
    let run = rerun(
        "nproc_child",
        &[("CMWQ_TEST_NPROC", case)],
        true,
        Duration::from_secs(120),
    )?;
    if run.out.contains("NPROC-SKIP") {
        eprintln!("SKIP nproc {case}: RLIMIT_NPROC does not bind the child's user");
        return None;
    }
    assert!(
        run.ok() && run.out.contains(&format!("NPROC-OK {case}")),
        "{case}: {}",
        run.show()
    );
    Some(run)
}

#[test]
fn build_at_the_thread_limit_returns_an_error_and_a_later_build_works() {
    let Some(run) = nproc_case("build") else {
        return;
    };
    assert!(
        run.out
            .contains("BUILD-ERR cannot start the cmwq watchdog thread")
    );
}

#[test]
fn delayed_work_with_no_timer_thread_is_refused_and_left_consistent() {
    let Some(run) = nproc_case("delayed") else {
        return;
    };
    assert!(
        run.err.contains("cannot start the timer thread") && run.err.contains("EAGAIN"),
        "{}",
        run.show()
    );
}

#[test]
fn failed_worker_creation_backs_off_and_says_so_once_per_episode() {
    let Some(run) = nproc_case("workers") else {
        return;
    };
    let said = run
        .err
        .matches("workqueue: Failed to create a worker thread")
        .count();
    // One line per episode: two rounds at the limit, each ended by a success.
    assert_eq!(said, 2, "{}", run.show());
    assert!(run.err.contains("EAGAIN"), "{}", run.show());
}

// ---- fork ----

/// What a child had in flight when it forked.
struct Busy {
    wq: Workqueue,
    ordered: Workqueue,
    /// Freezable, with an item running.
    fz: Workqueue,
    /// Runs on `wq` (waits for the gate).
    blocker: Work,
    /// Queued behind `held` on `ordered`: pending.
    pending: Work,
    job: cmwq::JoinHandle<u32>,
    /// Armed for a minute on `wq`.
    dw: DelayedWork,
}

fn busy(gate: &Arc<AtomicBool>) -> Busy {
    let waiter = |started: Arc<AtomicBool>| {
        let g = gate.clone();
        move || {
            started.store(true, Ordering::SeqCst);
            while !g.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    let wq = Workqueue::builder("fork_busy").build().unwrap();
    let ordered = Workqueue::builder("fork_ordered")
        .ordered()
        .build()
        .unwrap();
    let fz = Workqueue::builder("fork_fz").freezable().build().unwrap();
    let (s1, s2, s3, s4) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let blocker = Work::new(waiter(s1.clone()));
    let held = Work::new(waiter(s2.clone()));
    let sys = Work::new(waiter(s3.clone()));
    let frozen = Work::new(waiter(s4.clone()));
    assert!(fz.queue(&frozen));
    assert!(wq.queue(&blocker));
    assert!(ordered.queue(&held));
    assert!(cmwq::system().queue(&sys));
    assert!(wait_for(|| s1.load(Ordering::SeqCst)
        && s2.load(Ordering::SeqCst)
        && s3.load(Ordering::SeqCst)
        && s4.load(Ordering::SeqCst)));
    let pending = Work::new(|| {});
    assert!(ordered.queue(&pending));
    let g = gate.clone();
    let job = wq.spawn(move || {
        while !g.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        5
    });
    let dw = DelayedWork::new(|| {});
    assert!(wq.queue_delayed(&dw, Duration::from_secs(60)));
    Busy {
        wq,
        ordered,
        fz,
        blocker,
        pending,
        job,
        dw,
    }
}

/// Holds queues until the thread exits (`std::process::exit` runs it).
struct AtExit(Option<Busy>);

impl Drop for AtExit {
    fn drop(&mut self) {
        drop(self.0.take());
        eprintln!("FORK-TLS-DROPPED");
    }
}

thread_local! {
    static HELD: std::cell::RefCell<AtExit> = const { std::cell::RefCell::new(AtExit(None)) };
}

/// One way a forked child may meet the queues it inherited; everything it
/// holds is dropped at the end as well.
fn in_grandchild(way: &str, b: Busy) {
    let (_, fresh) = counter();
    match way {
        "drop" => drop(b),
        "flush" => {
            b.wq.flush();
            b.ordered.flush();
            assert!(!b.blocker.flush());
            assert!(!b.pending.flush());
            cmwq::system().flush();
        }
        "drain" => {
            b.wq.drain();
            b.ordered.drain();
        }
        "cancel" => {
            assert!(b.pending.cancel_sync(), "it was pending");
            assert!(!b.blocker.cancel_sync(), "it was running");
            assert!(!b.blocker.disable_sync());
            assert!(b.dw.cancel_sync(), "it was armed");
        }
        "delayed" => {
            assert!(!b.dw.flush());
            let dw2 = DelayedWork::new(|| {});
            assert!(!b.wq.queue_delayed(&dw2, Duration::from_millis(1)));
            assert!(!b.wq.mod_delayed(&dw2, Duration::from_millis(1)));
            assert!(!dw2.is_pending());
            drop(b.dw);
        }
        "join" => assert!(matches!(b.job.join(), Err(JoinError::Forked))),
        "freeze" => b.fz.freeze().unwrap(),
        "await" => assert!(matches!(common::block_on(b.job), Err(JoinError::Forked))),
        "refuse" => {
            assert!(!b.wq.queue(&fresh));
            assert!(!fresh.is_pending());
            let cpu = cmwq::topology::sched_affinity().unwrap()[0];
            assert_eq!(b.wq.queue_on(cpu, &fresh), Err(Error::Forked));
            assert!(!b.wq.execute(|| {}));
            assert!(matches!(b.wq.spawn(|| 1).join(), Err(JoinError::Refused)));
            // A queue built in the child is as inert (and builds, so the
            // system queues' first use there does not fail).
            let new = Workqueue::builder("in_child").build().unwrap();
            assert!(!new.queue(&fresh));
            new.flush();
        }
        "system" => {
            assert!(!cmwq::system().queue(&fresh));
            assert!(!cmwq::system_unbound().queue(&fresh));
            cmwq::system().flush();
            cmwq::system_unbound().drain();
        }
        "exit" => {
            HELD.with(|h| h.borrow_mut().0 = Some(b));
            std::process::exit(0);
        }
        other => panic!("unknown way {other}"),
    }
}

/// The child of the fork tests: `CMWQ_TEST_FORK` names the way; `quiet:`
/// before it forks with nothing in flight.
#[test]
fn fork_child() {
    let Ok(way) = std::env::var("CMWQ_TEST_FORK") else {
        return;
    };
    let gate = Arc::new(AtomicBool::new(false));
    let (quiet, way) = match way.strip_prefix("quiet:") {
        Some(w) => (true, w.to_string()),
        None => (false, way.clone()),
    };
    let (qwq, b) = if quiet {
        let wq = Workqueue::builder("fork_quiet").build().unwrap();
        let (_, w) = counter();
        assert!(wq.queue(&w));
        w.flush();
        (Some(wq), None)
    } else {
        (None, Some(busy(&gate)))
    };
    // SAFETY: fork takes no arguments; the child runs only this thread's
    // code below and leaves with _exit (or exit, for the way that tests it).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if let Some(wq) = qwq {
                let (_, fresh) = counter();
                match way.as_str() {
                    "queue" => assert!(!wq.queue(&fresh)),
                    "flush" => wq.flush(),
                    "drop" => drop(wq),
                    other => panic!("unknown quiet way {other}"),
                }
            } else {
                in_grandchild(&way, b.unwrap());
            }
        }));
        // SAFETY: ends the forked child without running the parent's
        // atexit handlers or unwinding into the test harness.
        unsafe { libc::_exit(if r.is_ok() { 0 } else { 101 }) };
    }
    let t0 = Instant::now();
    let mut status = 0;
    let exited = loop {
        // SAFETY: waits for our own child, writing its status to a local.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break true;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            break false;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The parent's queues are untouched: what was in flight finishes.
    gate.store(true, Ordering::SeqCst);
    if let Some(b) = b {
        assert_eq!(b.job.join().unwrap(), 5);
        assert!(b.dw.cancel_sync());
        b.wq.flush();
        b.ordered.flush();
        b.fz.flush();
        let (n, w) = counter();
        assert!(b.wq.queue(&w));
        w.flush();
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
    cmwq::system().flush();
    if !exited {
        println!("FORK-VERDICT hung");
    } else if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        println!("FORK-VERDICT ok");
    } else {
        println!("FORK-VERDICT failed {status:#x}");
    }
}

/// Runs the fork child for `way`: its output, or what went wrong.
fn try_fork_way(way: &str) -> Result<Run, String> {
    let run = rerun(
        "fork_child",
        &[("CMWQ_TEST_FORK", way)],
        false,
        Duration::from_secs(120),
    )
    .expect("the child starts");
    if run.ok() && run.out.contains("FORK-VERDICT ok") {
        Ok(run)
    } else {
        Err(format!("{way}: {}", run.show()))
    }
}

fn fork_way(way: &str) -> Run {
    try_fork_way(way).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_forked_child_never_waits_for_work_it_cannot_run() {
    let failed: Vec<String> = [
        "drop", "flush", "drain", "cancel", "delayed", "join", "await", "system", "freeze",
    ]
    .into_iter()
    .filter_map(|way| try_fork_way(way).err())
    .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn a_forked_child_exits_with_queues_held_by_a_thread_local() {
    let run = fork_way("exit");
    assert!(run.err.contains("FORK-TLS-DROPPED"), "{}", run.show());
}

#[test]
fn a_forked_child_is_refused_queueing_with_one_note() {
    let run = fork_way("refuse");
    assert_eq!(run.err.matches("fork()ed").count(), 1, "{}", run.show());
    for way in ["quiet:queue", "quiet:flush", "quiet:drop"] {
        fork_way(way);
    }
}

/// The child of the `Command` test: spawns programs while work is in flight.
#[test]
fn command_child() {
    if std::env::var_os("CMWQ_TEST_COMMAND").is_none() {
        return;
    }
    let gate = Arc::new(AtomicBool::new(false));
    let b = busy(&gate);
    assert!(Command::new("true").status().unwrap().success());
    // A pre_exec hook makes std fork (not posix_spawn): the atfork handler
    // runs in that child, which then execs.
    let mut c = Command::new("true");
    // SAFETY: the hook does nothing.
    unsafe { c.pre_exec(|| Ok(())) };
    assert!(c.status().unwrap().success());
    // This process is not a forked child: its queues still work.
    let (n, w) = counter();
    assert!(b.wq.queue(&w));
    w.flush();
    assert_eq!(n.load(Ordering::SeqCst), 1);
    assert!(Workqueue::builder("after_command").build().is_ok());
    gate.store(true, Ordering::SeqCst);
    assert_eq!(b.job.join().unwrap(), 5);
    println!("COMMAND-OK");
}

#[test]
fn std_process_command_keeps_working_in_a_process_that_uses_cmwq() {
    let run = child_ok("command_child", &[("CMWQ_TEST_COMMAND", "1")], "COMMAND-OK");
    assert!(!run.err.contains("fork()ed"), "{}", run.show());
}

// ---- the disable depth ----

const DEPTH_MAX: usize = 65_535;

#[test]
fn the_disable_depth_saturates_instead_of_wrapping() {
    let wq = Workqueue::builder("disable_depth").build().unwrap();
    let (n, w) = counter();
    for _ in 0..DEPTH_MAX + 1 {
        w.disable();
    }
    assert!(
        w.is_disabled(),
        "one disable past the limit wrapped to enabled"
    );
    assert!(!wq.queue(&w));
    wq.flush();
    assert_eq!(n.load(Ordering::SeqCst), 0);
    // The depth stayed at the limit: that many enables bring it back.
    for i in 1..DEPTH_MAX {
        assert!(!w.enable(), "enabled after {i} enables");
    }
    assert!(w.enable());
    assert!(wq.queue(&w));
    w.flush();
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[test]
fn cancel_sync_at_the_depth_limit_keeps_the_item_disabled() {
    let (_, w) = counter();
    for _ in 0..DEPTH_MAX {
        w.disable();
    }
    assert!(!w.cancel_sync());
    assert!(
        w.is_disabled(),
        "cancel_sync re-enabled an item 65,535 deep"
    );
    for _ in 1..DEPTH_MAX {
        assert!(!w.enable());
    }
    assert!(w.enable(), "cancel_sync changed the depth");
}

/// The child of the depth note test: saturates two items.
#[test]
fn depth_child() {
    if std::env::var_os("CMWQ_TEST_DEPTH").is_none() {
        return;
    }
    for _ in 0..2 {
        let w = Work::new(|| {});
        for _ in 0..DEPTH_MAX + 3 {
            w.disable();
        }
        assert!(w.is_disabled());
    }
    println!("DEPTH-OK");
}

#[test]
fn the_saturated_disable_depth_is_said_once() {
    let run = child_ok("depth_child", &[("CMWQ_TEST_DEPTH", "1")], "DEPTH-OK");
    assert_eq!(
        run.err.matches("disable depth reached its limit").count(),
        1,
        "{}",
        run.show()
    );
}

// ---- a job awaiting its own handle ----

#[test]
fn polling_a_jobs_own_handle_inside_it_panics_instead_of_hanging() {
    let wq = Workqueue::builder("self_await").unbound().build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<cmwq::JoinHandle<()>>();
    let (said_tx, said) = std::sync::mpsc::channel::<String>();
    let rx = std::sync::Mutex::new(rx);
    let h = wq.spawn(move || {
        let me = rx.lock().unwrap().recv().unwrap();
        // `.await` on its own handle, as an executor inside the job would.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = common::block_on(me);
        }));
        let msg = match r {
            Ok(()) => "it returned".to_string(),
            Err(p) => p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        };
        let _ = said_tx.send(msg);
    });
    tx.send(h).unwrap();
    match said.recv_timeout(Duration::from_secs(30)) {
        Ok(msg) => assert!(
            msg.contains("JoinHandle::poll") && msg.contains("wait for itself"),
            "{msg}"
        ),
        Err(_) => {
            std::mem::forget(wq); // its drain would wait for the hung job
            panic!("the job hung awaiting its own handle");
        }
    }
    wq.flush();
}

// ---- the worker stack ----

/// The calling thread's stack size, as glibc set it up.
fn my_stack_size() -> usize {
    // SAFETY: pthread_attr_t is plain data that pthread_getattr_np fills in.
    let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
    let mut addr = std::ptr::null_mut();
    let mut size = 0usize;
    // SAFETY: the calling thread's attributes, written to locals, then freed.
    unsafe {
        assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
        assert_eq!(libc::pthread_attr_getstack(&attr, &mut addr, &mut size), 0);
        libc::pthread_attr_destroy(&mut attr);
    }
    size
}

const BIG: usize = 6 << 20;

/// A 6 MiB value, returned by value.
#[inline(never)]
fn big_value() -> [u8; BIG] {
    let mut a = [0u8; BIG];
    a[0] = 1;
    a[BIG - 1] = 2;
    a
}

#[test]
fn workers_get_the_documented_default_stack() {
    if std::env::var_os("CMWQ_WORKER_STACK").is_some() {
        eprintln!("SKIP: CMWQ_WORKER_STACK is set in this environment");
        return;
    }
    let wq = Workqueue::builder("stack_default")
        .unbound()
        .build()
        .unwrap();
    let size = wq.spawn(my_stack_size).join().unwrap();
    assert!(
        size >= cmwq::DFL_WORKER_STACK,
        "a worker has {size} bytes of stack"
    );
}

/// The child of the stack test, run with `CMWQ_WORKER_STACK=256M`: a job's
/// value is moved a few times on the worker's stack (about three copies in
/// a release build, a dozen in a debug one, where 64M overflowed the thread
/// that takes the result), so 6 MiB needs well over 16 MiB.
#[test]
fn stack_child() {
    if std::env::var_os("CMWQ_TEST_STACK").is_none() {
        return;
    }
    let wq = Workqueue::builder("stack_big").unbound().build().unwrap();
    assert!(wq.spawn(my_stack_size).join().unwrap() >= 256 << 20);
    // The result comes back by value too: taken on a thread with room for it.
    let (first, last) = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let a = wq.spawn(big_value).join().unwrap();
            (a[0], a[BIG - 1])
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!((first, last), (1, 2));
    println!("STACK-OK");
}

#[test]
fn a_job_returning_6_mib_by_value_completes_with_a_larger_cmwq_worker_stack() {
    child_ok(
        "stack_child",
        &[("CMWQ_TEST_STACK", "1"), ("CMWQ_WORKER_STACK", "256M")],
        "STACK-OK",
    );
}

/// The child of the bad-value test: what `check_env` and `build` say.
#[test]
fn stack_env_child() {
    if std::env::var_os("CMWQ_TEST_STACK_ENV").is_none() {
        return;
    }
    let checked = cmwq::check_env().unwrap_err().to_string();
    let built = Workqueue::builder("stack_bad")
        .build()
        .unwrap_err()
        .to_string();
    println!("CHECK {checked}");
    println!("BUILD {built}");
}

#[test]
fn a_bad_cmwq_worker_stack_is_refused_by_check_env_and_build_alike() {
    for bad in ["12Q", "1K", "4G"] {
        let run = child_ok(
            "stack_env_child",
            &[("CMWQ_TEST_STACK_ENV", "1"), ("CMWQ_WORKER_STACK", bad)],
            "BUILD ",
        );
        let line = |p: &str| {
            run.out
                .lines()
                .find_map(|l| l.split_once(p).map(|(_, v)| v.to_string()))
                .unwrap_or_default()
        };
        let (checked, built) = (line("CHECK "), line("BUILD "));
        assert!(
            checked.contains("CMWQ_WORKER_STACK") && checked.contains(bad),
            "{checked}"
        );
        assert_eq!(checked, built);
    }
}

/// Stack a job needs in the stack tests: 8 MiB in one frame.
const NEEDS: usize = 8 << 20;

/// A job that needs [`NEEDS`] bytes of stack: one frame that large, its
/// first and last bytes written (so every page between is probed).
#[inline(never)]
fn needs_8_mib() -> u8 {
    let mut a = [0u8; NEEDS];
    std::hint::black_box(&mut a);
    a[0] = 1;
    a[NEEDS - 1] = 2;
    std::hint::black_box(&a);
    a[0] + a[NEEDS - 1]
}

/// The child of the 8 MiB tests: runs [`needs_8_mib`] on a worker, with
/// the stack size from `CMWQ_WORKER_STACK`, or from the API when
/// `CMWQ_TEST_STACK8=api`.
#[test]
fn stack8_child() {
    let Some(how) = std::env::var_os("CMWQ_TEST_STACK8") else {
        return;
    };
    if how == "api" {
        assert!(cmwq::set_worker_stack_size(1024).is_err());
        cmwq::set_worker_stack_size(16 << 20).unwrap();
    }
    println!("STACK {}", cmwq::worker_stack_size());
    let wq = Workqueue::builder("stack8").unbound().build().unwrap();
    assert_eq!(wq.spawn(needs_8_mib).join().unwrap(), 3);
    println!("STACK8-OK");
}

#[test]
fn a_job_that_needs_8_mib_of_stack_runs_with_cmwq_worker_stack_16m_and_overflows_without() {
    // The default must be too small for the job, or the test proves nothing.
    const { assert!(cmwq::DFL_WORKER_STACK <= NEEDS) };
    let run = child_ok(
        "stack8_child",
        &[("CMWQ_TEST_STACK8", "env"), ("CMWQ_WORKER_STACK", "16M")],
        "STACK8-OK",
    );
    assert!(
        run.out.contains(&format!("STACK {}", 16 << 20)),
        "{}",
        run.show()
    );
    // The same job on the default stack overflows it (an empty value is unset).
    let run = rerun(
        "stack8_child",
        &[("CMWQ_TEST_STACK8", "env"), ("CMWQ_WORKER_STACK", "")],
        false,
        Duration::from_secs(120),
    )
    .expect("the child starts");
    assert!(
        !run.ok() && !run.out.contains("STACK8-OK"),
        "{}",
        run.show()
    );
    assert!(
        run.err.contains("has overflowed its stack"),
        "{}",
        run.show()
    );
}

#[test]
fn set_worker_stack_size_sizes_workers_started_afterwards() {
    child_ok(
        "stack8_child",
        &[("CMWQ_TEST_STACK8", "api"), ("CMWQ_WORKER_STACK", "")],
        "STACK8-OK",
    );
}
