//! `cmwq dump`, `monitor`, `set` and `ps` against a real child process with
//! a few busy workqueues (`cmwq __control-child`), over its control socket.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use cmwq::snapshot::{Snapshot, WorkqueueSnap};

const BIN: &str = env!("CARGO_BIN_EXE_cmwq");

struct Proc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    dir: std::path::PathBuf,
    _tmp: tempfile::TempDir,
}

impl Proc {
    fn start() -> Proc {
        Proc::start_with(None, &[])
    }

    /// A child serving in `dir` (default: a fresh one), with `args` for
    /// `__control-child`.
    fn start_with(dir: Option<&std::path::Path>, args: &[&str]) -> Proc {
        let tmp = tempfile::tempdir().unwrap();
        let dir = dir.map_or_else(|| tmp.path().join("ctl"), |d| d.to_path_buf());
        let mut child = Command::new(BIN)
            .arg("__control-child")
            .args(args)
            .env("CMWQ_CONTROL_DIR", &dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(line.starts_with("ready "), "child said {line:?}");
        let pid = child.id();
        assert!(line.trim().ends_with(&format!("{pid}.sock")), "{line}");
        Proc {
            child,
            stdin,
            stdout,
            pid,
            dir,
            _tmp: tmp,
        }
    }

    /// The child's snapshot of itself.
    fn own_snapshot(&mut self) -> Snapshot {
        writeln!(self.stdin, "snapshot").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn cmwq(&self, args: &[&str]) -> std::process::Output {
        Command::new(BIN)
            .args(args)
            .env("CMWQ_CONTROL_DIR", &self.dir)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.cmwq(args);
        assert!(
            o.status.success(),
            "cmwq {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    fn err(&self, args: &[&str]) -> String {
        let o = self.cmwq(args);
        assert!(!o.status.success(), "cmwq {args:?} should fail");
        String::from_utf8(o.stderr).unwrap()
    }

    fn dump(&self) -> Snapshot {
        let pid = self.pid.to_string();
        serde_json::from_str(&self.ok(&["dump", "--pid", &pid, "--json"])).unwrap()
    }

    /// Its socket.
    fn sock(&self) -> std::path::PathBuf {
        self.dir.join(format!("{}.sock", self.pid))
    }

    /// Asks the child to exit and waits for it.
    fn exit(&mut self) -> std::process::ExitStatus {
        writeln!(self.stdin, "exit").unwrap();
        self.stdin.flush().unwrap();
        self.child.wait().unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "exit");
        let _ = self.stdin.flush();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
    }
}

fn wq<'a>(s: &'a Snapshot, name: &str) -> &'a WorkqueueSnap {
    s.workqueues
        .iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

/// What does not change while work flows: the shape of the process.
fn shape(s: &Snapshot) -> String {
    let wqs: Vec<_> = s
        .workqueues
        .iter()
        .map(|w| {
            (
                &w.name,
                &w.kind,
                w.flags,
                &w.cpu_pool,
                w.dfl_pool,
                &w.attrs,
                w.rescuer.as_ref().map(|r| r.tid),
            )
        })
        .collect();
    let pools: Vec<_> = s
        .pools
        .iter()
        .map(|p| (p.id, p.cpu, &p.cpus, &p.pod_cpus, p.nice, &p.policy))
        .collect();
    format!("{:?}\n{wqs:?}\n{pools:?}", s.topology)
}

#[test]
fn dump_matches_the_child_and_set_moves_work_to_new_pools() {
    let mut p = Proc::start();
    let pid = p.pid.to_string();

    // ps lists it, serving.
    let ps: serde_json::Value = serde_json::from_str(&p.ok(&["ps", "--json"])).unwrap();
    assert_eq!(ps["schema"], "cmwq-ps/1");
    let me = ps["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["pid"] == p.pid)
        .expect("the child is listed");
    assert_eq!(me["state"], "serving");
    assert!(me["workqueues"].as_u64().unwrap() >= 4);

    // The dump is the child's own picture.
    let own = p.own_snapshot();
    let dumped = p.dump();
    assert_eq!(dumped.pid, p.pid);
    assert_eq!(shape(&dumped), shape(&own));
    assert_eq!(wq(&dumped, "ctl_reclaim").kind, "unbound");
    assert_eq!(wq(&dumped, "ctl_ordered").kind, "ordered");
    assert_eq!(wq(&dumped, "ctl_bound").kind, "percpu");
    let tid = wq(&dumped, "ctl_reclaim").rescuer.as_ref().unwrap().tid;
    assert!(tid > 0);

    // The text has wq_dump.py's sections and rows.
    let text = p.ok(&["dump", "--pid", &pid]);
    for section in [
        "Affinity Scopes",
        "Worker Pools",
        "Workqueue CPU -> pool",
        "Workqueue -> rescuer",
        "Unbound workqueue -> node_nr/max_active",
        "Unbound workqueue -> attrs",
        "Workqueue -> priority",
    ] {
        assert!(
            text.contains(&format!("{section}\n")),
            "{section} missing:\n{text}"
        );
    }
    let row = text
        .lines()
        .find(|l| l.starts_with("ctl_unbound "))
        .unwrap();
    assert!(row.contains(" unbound "), "{row}");
    let resc = text
        .lines()
        .find(|l| l.starts_with("ctl_reclaim ") && l.contains(&tid.to_string()))
        .is_some();
    assert!(resc, "rescuer row with tid {tid}:\n{text}");

    // The queues with latency histograms (ctl_bound, ctl_unbound) have a
    // row of p50/p99 after the kernel's sections; the others none.
    let lat = text
        .split_once("Workqueue -> latency\n")
        .unwrap_or_else(|| panic!("no latency section:\n{text}"))
        .1;
    assert!(lat.contains("q_p50") && lat.contains("run_p99"), "{lat}");
    let cols: Vec<&str> = lat
        .lines()
        .find(|l| l.starts_with("ctl_bound "))
        .unwrap_or_else(|| panic!("ctl_bound latency row:\n{lat}"))
        .split_whitespace()
        .collect();
    assert!(cols[1].parse::<u64>().unwrap() > 0, "items: {cols:?}");
    for c in &cols[2..6] {
        assert!(c.ends_with('s') && c != &"-", "a time: {cols:?}");
    }
    assert!(!lat.contains("ctl_ordered"), "{lat}");

    // Move ctl_unbound from per-CPU pods to one system pod, live.
    let before = wq(&dumped, "ctl_unbound").clone();
    let out = p.ok(&[
        "set",
        "--pid",
        &pid,
        "ctl_unbound",
        "affinity_scope",
        "system",
    ]);
    assert!(out.contains("affinity_scope=system"), "{out}");
    let (new_pool, d_pool) = {
        let s = p.dump();
        let w = wq(&s, "ctl_unbound");
        assert_eq!(w.attrs.affinity_scope, cmwq::topology::Scope::System);
        let d = w.dfl_pool.unwrap();
        let pool = s.pools.iter().find(|q| q.id == d).unwrap();
        assert_eq!(
            pool.pod_cpus, s.topology.online,
            "the system pod spans every CPU"
        );
        // The pool or pools serving the CPUs now: one lane pool per CPU of
        // the system pod (README, "Where user space differs"), each naming
        // the whole pod.
        let serving: Vec<u32> = w.cpu_pool.iter().flatten().copied().collect();
        for id in &serving {
            let q = s.pools.iter().find(|q| q.id == *id).unwrap();
            assert_eq!(
                q.pod_cpus, s.topology.online,
                "pool {id} serves the system pod"
            );
        }
        (serving, d)
    };
    // Work flows through the new pool's pwq; the old pwqs retire.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = p.dump();
        let w = wq(&s, "ctl_unbound");
        let started_new: u64 = w
            .pwqs
            .iter()
            .filter(|q| new_pool.contains(&q.pool) && q.state == "live")
            .map(|q| q.started)
            .sum();
        let old_live = w
            .pwqs
            .iter()
            .filter(|q| q.state == "live" && q.pool != d_pool && !new_pool.contains(&q.pool))
            .count();
        if started_new > 10 && old_live == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "work did not move to pools {new_pool:?}: {:?} (before: {:?})",
            w.pwqs,
            before.pwqs
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Bad writes are refused with the reason, and change nothing.
    for (args, reason) in [
        (vec!["ctl_bound", "affinity_scope", "cpu"], "is bound"),
        (vec!["ctl_unbound", "nice", "99"], "out of range"),
        (vec!["ctl_unbound", "colour", "1"], "unknown knob"),
        (vec!["nope", "nice", "0"], "no workqueue named"),
    ] {
        let mut a = vec!["set", "--pid", &pid];
        a.extend(args.iter().copied());
        let e = p.err(&a);
        assert!(e.contains(reason), "{a:?}: {e}");
    }
    assert_eq!(
        wq(&p.dump(), "ctl_unbound").attrs.affinity_scope,
        cmwq::topology::Scope::System
    );
}

#[test]
fn monitor_prints_wq_monitor_tables_and_json_deltas() {
    let p = Proc::start();
    let pid = p.pid.to_string();
    let once = p.ok(&["monitor", "--pid", &pid, "-i", "0"]);
    let header = once.lines().find(|l| l.contains("total")).unwrap();
    for col in [
        "total", "infl", "CPUtime", "CPUitsv", "CMW/RPR", "mayday", "rescued",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let row = |name: &str| {
        once.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} row:\n{once}"))
            .split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    // Per-CPU queues show CPUitsv; unbound ones a dash; only MEM_RECLAIM queues mayday.
    let b = row("ctl_bound");
    assert_ne!(b[4], "-");
    assert_eq!(b[6], "-");
    // Then p50/p99 of queueing delay and run time, where histograms are kept.
    assert!(
        header.ends_with("q_p50    q_p99  run_p50  run_p99"),
        "{header}"
    );
    assert_eq!(b.len(), 12, "{b:?}");
    assert!(b[8..].iter().all(|c| c.ends_with('s')), "{b:?}");
    assert!(row("ctl_ordered")[8..].iter().all(|c| c == "-"));
    let r = row("ctl_reclaim");
    assert_eq!(r[4], "-");
    assert_ne!(r[6], "-");

    let js = p.ok(&[
        "monitor",
        "--pid",
        &pid,
        "-i",
        "1",
        "--count",
        "2",
        "-j",
        "^ctl_bound$",
    ]);
    let recs: Vec<serde_json::Value> = js
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs.len(), 2, "{js}");
    assert!(recs.iter().all(|r| r["name"] == "ctl_bound"));
    assert!(recs[0].get("delta").is_none());
    let d = &recs[1]["delta"];
    let total1 = recs[1]["started"].as_u64().unwrap();
    let total0 = recs[0]["started"].as_u64().unwrap();
    assert_eq!(d["started"].as_u64().unwrap(), total1 - total0);
    // The interval's latency: one per item completed in it.
    assert_eq!(
        d["latency"]["run"]["count"].as_u64().unwrap(),
        d["completed"].as_u64().unwrap(),
        "{d}"
    );
    assert!(recs[1]["latency"]["queue"]["p99_ns"].as_u64().unwrap() > 0);
    assert!(total1 > total0, "work flows in the child");

    let e = p.err(&["monitor", "--pid", &pid, "--interval=-1"]);
    assert!(e.contains("--interval"), "{e}");
    let e = p.err(&["monitor", "--pid", &pid, "-i", "0", "("]);
    assert!(e.contains("bad workqueue pattern"), "{e}");
}

#[test]
fn other_users_and_missing_endpoints_are_refused_clearly() {
    let p = Proc::start();
    let pid = p.pid.to_string();
    // A process that serves nothing, and one that does not exist.
    let me = std::process::id().to_string();
    let e = p.err(&["dump", "--pid", &me]);
    assert!(e.contains("serves no control endpoint"), "{e}");
    let e = p.err(&["dump", "--pid", "999999999"]);
    assert!(e.contains("no such process"), "{e}");

    // A socket directory others can enter is refused by the client too (it
    // may have been planted by another user).
    let open = p._tmp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    drop(std::os::unix::net::UnixListener::bind(open.join("1.sock")).unwrap());
    let o = Command::new(BIN)
        .args(["dump", "--pid", "1"])
        .env("CMWQ_CONTROL_DIR", &open)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("lets others in"), "{e}");

    // Another uid: only possible to try as root (setuid to nobody). The 0700
    // directory stops it before SO_PEERCRED is reached; the peer-uid check
    // itself is tested in-process (control_proto.rs).
    if euid() == 0 {
        use std::os::unix::process::CommandExt;
        match Command::new(BIN)
            .args(["dump", "--pid", &pid])
            .env("CMWQ_CONTROL_DIR", &p.dir)
            .uid(65534)
            .gid(65534)
            .output()
        {
            Ok(o) => {
                assert!(!o.status.success(), "nobody read root's workqueues");
                let e = String::from_utf8_lossy(&o.stderr);
                assert!(
                    e.contains("another user") || e.contains("ermission denied"),
                    "{e}"
                );
            }
            // No CAP_SETUID in this container, or the binary is not
            // executable by nobody: the in-process test covers the refusal.
            Err(e) => eprintln!("skipped the setuid half: {e}"),
        }
    } else {
        eprintln!("not root: the other-uid refusal is covered in-process (control_proto.rs)");
    }
    // The child still serves.
    assert!(p.ok(&["ps"]).contains("serving"));
}

#[test]
fn cmwq_control_env_starts_the_endpoint_and_ps_prunes_what_is_left() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ctl");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = Command::new(BIN);
        c.args(args).env("CMWQ_CONTROL_DIR", &dir);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    // `cmwq dump` builds the system workqueues; CMWQ_CONTROL=1 serves them.
    let o = run(&["dump", "--json"], &[("CMWQ_CONTROL", "1")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Snapshot = serde_json::from_slice(&o.stdout).unwrap();
    let sock = dir.join(format!("{}.sock", s.pid));
    assert!(dir.is_dir(), "CMWQ_CONTROL=1 served in {}", dir.display());
    // That process exited normally: the exit hook removed its socket.
    assert!(!sock.exists(), "{} stayed behind", sock.display());
    // A process killed by a signal leaves a stale socket until pruned.
    let mut killed = Proc::start_with(Some(&dir), &[]);
    let sock = killed.sock();
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    assert!(sock.exists());
    let out = String::from_utf8(run(&["ps"], &[]).stdout).unwrap();
    assert!(out.contains("stale"), "{out}");
    let out = String::from_utf8(run(&["ps", "--prune"], &[]).stdout).unwrap();
    assert!(out.contains("removed 1"), "{out}");
    assert!(!sock.exists());
    // Without the variable nothing is served.
    let o = run(&["dump", "--json"], &[]);
    let s: Snapshot = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!dir.join(format!("{}.sock", s.pid)).exists());
    // A bad value is an error naming the variable.
    let o = run(&["dump"], &[("CMWQ_CONTROL", "yes")]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("CMWQ_CONTROL=\"yes\""), "{e}");
}

/// The socket of a process that exits normally (without `control::stop()`,
/// the server living in a static that is never dropped) is removed by the
/// exit hook; a socket that is not its own, or another process's, is not.
#[test]
fn a_normal_exit_removes_the_socket_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ctl");
    let other = Proc::start_with(Some(&dir), &[]);
    let mut a = Proc::start_with(Some(&dir), &["--no-stop"]);
    let sock = a.sock();
    assert!(sock.exists());
    assert!(a.exit().success());
    assert!(!sock.exists(), "{} stayed behind", sock.display());
    // The other process's socket is still there, and it still answers.
    assert!(other.sock().exists());
    assert_eq!(other.dump().pid, other.pid);

    // A socket file at our path that is no longer the one we bound (replaced
    // meanwhile) is left alone.
    let mut b = Proc::start_with(Some(&dir), &["--no-stop"]);
    let sock = b.sock();
    std::fs::remove_file(&sock).unwrap();
    let planted = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    assert!(b.exit().success());
    assert!(
        sock.exists(),
        "the exit hook removed a socket it did not bind"
    );
    drop(planted);
    assert!(other.sock().exists());
}

/// `__control-child` with the socket directory left to the temporary-dir
/// fallback (`$TMPDIR/cmwq-<uid>`).
fn child_in_tmpdir(tmpdir: &std::path::Path) -> std::process::Output {
    Command::new(BIN)
        .arg("__control-child")
        .env_remove("CMWQ_CONTROL_DIR")
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", tmpdir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_squatted_temp_dir_is_refused_with_what_to_set() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let name = format!("cmwq-{}", euid());
    let refused = |t: &std::path::Path, why: &str| {
        let o = child_in_tmpdir(t);
        let e = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(!o.status.success(), "served in a squatted {name}: {e}");
        for part in [why, "CMWQ_CONTROL_DIR", "XDG_RUNTIME_DIR", &name] {
            assert!(e.contains(part), "{part:?} missing: {e}");
        }
    };

    // Missing: made, a real directory of ours, mode 0700.
    let t = tempfile::tempdir().unwrap();
    let o = child_in_tmpdir(t.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = std::fs::symlink_metadata(t.path().join(&name)).unwrap();
    assert!(m.file_type().is_dir());
    assert_eq!((m.uid(), m.mode() & 0o7777), (euid(), 0o700));

    // Made by someone with mode 0777.
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join(&name);
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(t.path(), "mode 777");

    // A symlink in its place, even to a private directory.
    let t = tempfile::tempdir().unwrap();
    let real = t.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&real, t.path().join(&name)).unwrap();
    refused(t.path(), "symlink");
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0, "nothing made");

    // Owned by another user, mode 0700: only root can set that up.
    if euid() == 0 {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join(&name);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
        refused(t.path(), "owned by uid 65534");
    } else {
        eprintln!("not root: skipped the directory owned by another uid (needs chown)");
    }
}

#[test]
fn a_control_dir_under_a_writable_ancestor_is_refused_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let open = t.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = Command::new(BIN)
        .arg("__control-child")
        .env("CMWQ_CONTROL_DIR", open.join("ctl"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("CMWQ_CONTROL_DIR="), "{e}");
    assert!(e.contains(&format!("component {} ", open.display())), "{e}");
    assert!(e.contains("writable by others"), "{e}");
    assert!(!open.join("ctl").exists(), "nothing made under it");
}

/// The mask of `wq` as `cmwq dump` prints it ("Unbound workqueue -> attrs").
fn dumped_mask(text: &str, wq: &str) -> String {
    let section = text
        .split("Unbound workqueue -> attrs\n")
        .nth(1)
        .expect("the attrs section");
    let row = section
        .lines()
        .find(|l| l.split_whitespace().next() == Some(wq))
        .unwrap_or_else(|| panic!("{wq} row:\n{section}"));
    // name, affinity_scope, strict, nice, then the mask's words.
    row.split_whitespace().skip(4).collect::<Vec<_>>().join(" ")
}

#[test]
fn set_cpumask_takes_the_form_dump_prints_and_echoes_the_form_given() {
    // ctl_wide runs on a synthetic 72-CPU topology: masks of several words.
    let p = Proc::start_with(None, &["--wide"]);
    let pid = p.pid.to_string();
    let set = |v: &[&str]| {
        let mut a = vec!["set", "--pid", &pid, "ctl_wide", "cpumask"];
        a.extend(v);
        p.ok(&a)
    };
    let mask = || wq(&p.dump(), "ctl_wide").attrs.cpumask.clone();

    // The sysfs form: most significant word first, echoed so.
    let out = set(&["1,00000000"]);
    assert!(out.contains(" cpumask=00000001,00000000 "), "{out}");
    assert_eq!(mask(), vec![32]);
    // The form dump prints, unquoted (as pasted) and quoted; echoed so.
    let out = set(&["0x0", "00000003"]);
    assert!(out.contains(" cpumask=0x0 00000003 "), "{out}");
    assert_eq!(mask(), vec![32, 33]);
    let out = set(&["0x2 00000001"]);
    assert!(out.contains(" cpumask=0x2 00000001 "), "{out}");
    assert_eq!(mask(), vec![1, 32]);

    // What dump prints, written back as it is, changes nothing.
    p.ok(&["set", "--pid", &pid, "ctl_wide", "cpus", "3-5,40"]);
    let printed = dumped_mask(&p.ok(&["dump", "--pid", &pid]), "ctl_wide");
    assert_eq!(printed, "0x38 00000100");
    let words: Vec<&str> = printed.split(' ').collect();
    let out = set(&words);
    assert!(out.contains(&format!(" cpumask={printed} ")), "{out}");
    assert_eq!(mask(), vec![3, 4, 5, 40]);

    // A mask naming no CPU of the workqueue is refused in the user's form,
    // not as a cpu list; a negative value still reaches the server.
    let e = p.err(&["set", "--pid", &pid, "ctl_wide", "cpumask", "1,0,0,0,0"]);
    assert!(e.contains("cpumask 1,0,0,0,0 has no CPU"), "{e}");
    assert!(!e.contains("cpumask 128"), "{e}");
    let e = p.err(&["set", "--pid", &pid, "ctl_wide", "nice", "-99"]);
    assert!(e.contains("out of range"), "{e}");
    assert_eq!(mask(), vec![3, 4, 5, 40]);
}

/// The effective user id of this process (`/proc/self/status`, `Uid:`'s second field).
fn euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
        .expect("an effective uid")
}

/// The uid that owns `/proc/<pid>` (the process's user), if it exists.
fn owner_of(pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid())
}

/// The state letter of `/proc/<pid>/stat`.
fn state_of(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Polls `cond` for up to 20 s.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `cmwq args` with the control directory `dir`, killed (and the test
/// failed) if it runs past 20 s: only a hang, never a slow machine, takes
/// that long.
fn bounded(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env("CMWQ_CONTROL_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cmwq {args:?} hung on a process that does not answer: killed after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Sends `sig` (`STOP`, `CONT`, `KILL`) to `pid` with kill(1).
fn signal(sig: &str, pid: u32) {
    let st = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill -{sig} {pid}");
}

/// Resumes a stopped process when dropped, even if the test failed.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        signal("CONT", self.0);
    }
}

#[test]
fn a_stopped_process_does_not_stall_the_commands_and_is_named() {
    let p = Proc::start();
    let pid = p.pid.to_string();
    signal("STOP", p.pid);
    let _resume = Resume(p.pid);
    wait_for("the child to stop", || state_of(p.pid) == Some('T'));
    // Every command that talks to a process gives up after --timeout and
    // says who did not answer, for how long, and why.
    for args in [
        &["dump", "--pid", &pid, "--timeout", "1"][..],
        &["monitor", "--pid", &pid, "-i", "0", "--timeout", "1"],
        &[
            "set",
            "--pid",
            &pid,
            "--timeout",
            "1",
            "ctl_bound",
            "max_active",
            "2",
        ],
    ] {
        let o = bounded(&p.dir, args);
        assert!(!o.status.success(), "cmwq {args:?} succeeded");
        let e = String::from_utf8_lossy(&o.stderr);
        for part in [
            "not answering",
            &format!("pid {pid}"),
            "within 1s",
            "stopped",
        ] {
            assert!(e.contains(part), "cmwq {args:?}: {part:?} missing: {e}");
        }
    }
    // ps lists it (with the others it would list) and says the same.
    let o = bounded(&p.dir, &["ps", "--timeout", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(&pid))
        .unwrap_or_else(|| panic!("pid {pid} not listed: {out}"));
    assert!(
        line.contains("not answering") && line.contains("stopped"),
        "{line}"
    );
    // Resumed, it answers again.
    signal("CONT", p.pid);
    assert!(p.ok(&["ps"]).contains("serving"));
}

#[test]
fn an_endpoint_that_cannot_start_leaves_no_socket_behind() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("skipped: no prlimit(1) to run a child with 4 file descriptors");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ctl");
    // 0, 1, 2 and one more: the listening socket binds, then the server
    // cannot get a second descriptor and does not start.
    let o = Command::new("prlimit")
        .args(["--nofile=4", "--"])
        .arg(BIN)
        .arg("__control-child")
        .env("CMWQ_CONTROL_DIR", &dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "served with 4 descriptors? {e}");
    assert!(e.contains("Too many open files"), "{e}");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?} ({e})");
}

#[test]
fn a_zombie_another_users_process_and_one_serving_nothing_are_told_apart() {
    let p = Proc::start();
    let dump = |pid: u32| {
        let o = bounded(&p.dir, &["dump", "--pid", &pid.to_string()]);
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // A zombie: exited, not reaped.
    let mut z = Command::new("true").spawn().unwrap();
    wait_for("a zombie", || state_of(z.id()) == Some('Z'));
    let e = dump(z.id());
    assert!(e.contains("zombie") && e.contains("exited"), "{e}");
    assert!(!e.contains("serves no control endpoint"), "{e}");
    z.wait().unwrap();

    // A live process of ours that serves nothing.
    let e = dump(std::process::id());
    assert!(e.contains("serves no control endpoint"), "{e}");

    // PID 1: serves nothing if it is ours, else it is another user's.
    let e = dump(1);
    match owner_of(1) {
        Some(u) if u == euid() => assert!(e.contains("serves no control endpoint"), "{e}"),
        Some(u) => assert!(e.contains(&format!("runs as uid {u}")), "{e}"),
        None => eprintln!("no /proc/1 here: {e}"),
    }

    // A socket left with nobody listening, named by a process that runs:
    // not "exited".
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    drop(
        std::os::unix::net::UnixListener::bind(p.dir.join(format!("{}.sock", sleeper.id())))
            .unwrap(),
    );
    let e = dump(sleeper.id());
    assert!(e.contains("not serving") && !e.contains("exited"), "{e}");
    let _ = sleeper.kill();
    let _ = sleeper.wait();

    // Another user's process (as root: a sleep run as nobody).
    if euid() == 0 {
        use std::os::unix::process::CommandExt;
        match Command::new("sleep")
            .arg("30")
            .uid(65534)
            .gid(65534)
            .spawn()
        {
            Ok(mut other) => {
                wait_for("the setuid child", || owner_of(other.id()) == Some(65534));
                let e = dump(other.id());
                let _ = other.kill();
                let _ = other.wait();
                assert!(
                    e.contains("runs as uid 65534") && e.contains("run cmwq as uid 65534"),
                    "{e}"
                );
            }
            Err(e) => eprintln!("skipped the other-user case: {e}"),
        }
    }
}

#[test]
fn set_on_a_bound_queue_echoes_only_max_active() {
    let p = Proc::start();
    let pid = p.pid.to_string();
    let out = p.ok(&["set", "--pid", &pid, "ctl_bound", "max_active", "3"]);
    assert_eq!(out, "ctl_bound: max_active=3\n");
    // An unbound one still echoes all of its attributes.
    let out = p.ok(&["set", "--pid", &pid, "ctl_unbound", "max_active", "3"]);
    assert!(
        out.contains("affinity_scope=") && out.contains("max_active=3"),
        "{out}"
    );
}

#[test]
fn a_full_disk_is_called_full_not_another_users_doing() {
    // Needs a file system with no room for a directory: a one-inode tmpfs in
    // a mount namespace of its own (root only).
    if euid() != 0 {
        eprintln!("skipped: not root, cannot mount a full tmpfs");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=64k,nr_inodes=1 none '{0}' && \
         exec env -u CMWQ_CONTROL_DIR -u XDG_RUNTIME_DIR TMPDIR='{0}' '{BIN}' __control-child",
        full.display()
    );
    let o = match Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: no unshare(1): {e}");
            return;
        }
    };
    let e = String::from_utf8_lossy(&o.stderr);
    if !e.contains("cmwq:") {
        eprintln!("skipped: could not mount a tmpfs here: {e}");
        return;
    }
    assert!(!o.status.success(), "{e}");
    assert!(e.contains("is full") && e.contains("No space left"), "{e}");
    assert!(!e.contains("another user"), "{e}");
}

#[test]
fn ps_asks_every_process_at_once() {
    // 25 processes whose sockets take connections but never answer (held
    // here, never accepted): asked one after another at 1 s each, ps would
    // pass the 20 s that `bounded` allows; asked at once, it takes about 1 s.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ctl");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let mut sleepers = Vec::new();
    let mut listeners = Vec::new();
    for _ in 0..25 {
        let s = Command::new("sleep").arg("60").spawn().unwrap();
        let sock = dir.join(format!("{}.sock", s.id()));
        listeners.push(std::os::unix::net::UnixListener::bind(sock).unwrap());
        sleepers.push(s);
    }
    let o = bounded(&dir, &["ps", "--timeout", "1"]);
    for mut s in sleepers {
        let _ = s.kill();
        let _ = s.wait();
    }
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.matches("not answering").count(), 25, "{out}");
    drop(listeners);
}
#[test]
fn set_writes_the_process_wide_parameters_as_sys_module_workqueue() {
    let mut p = Proc::start();
    let pid = p.pid.to_string();
    assert_eq!(p.dump().watchdog_thresh, 30, "the kernel's default");
    let out = p.ok(&["set", "--pid", &pid, "workqueue", "watchdog_thresh", "7"]);
    assert_eq!(out.trim(), "workqueue.watchdog_thresh=7");
    assert_eq!(p.own_snapshot().watchdog_thresh, 7, "the child's own view");
    let out = p.ok(&[
        "set",
        "--pid",
        &pid,
        "workqueue",
        "cpu_intensive_thresh_us",
        "20000",
    ]);
    assert_eq!(out.trim(), "workqueue.cpu_intensive_thresh_us=20000");
    assert_eq!(p.own_snapshot().cpu_intensive_thresh_us, 20000);
    let e = p.err(&["set", "--pid", &pid, "workqueue", "watchdog_thresh", "-1"]);
    assert!(
        e.contains("watchdog_thresh=\"-1\" refused") && e.contains("seconds"),
        "{e}"
    );
    let e = p.err(&["set", "--pid", &pid, "events", "watchdog_thresh", "5"]);
    assert!(
        e.contains("process-wide parameter") && e.contains(" workqueue watchdog_thresh 5"),
        "{e}"
    );
    assert_eq!(
        p.own_snapshot().watchdog_thresh,
        7,
        "refused writes change nothing"
    );
}
