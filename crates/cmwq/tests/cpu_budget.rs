//! The CPU budget (`CMWQ_CPU_QUOTA`, `engine/pool/budget.rs`): at most N
//! workers of managed pools run items at once, process-wide, while a worker
//! that says it blocks lets another run. The budget is read once per
//! process, so every case runs in a child process of this test binary; the
//! cgroup case also moves that child into a cgroup of its own.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use cmwq::{Work, Workqueue};

mod common;

static CUR: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Burns a little CPU (well under the CPU-intensive threshold set below),
/// counted as running meanwhile.
fn burn() {
    let c = CUR.fetch_add(1, Ordering::SeqCst) + 1;
    PEAK.fetch_max(c, Ordering::SeqCst);
    let t0 = Instant::now();
    let mut x = 0u64;
    while t0.elapsed() < Duration::from_micros(300) {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    CUR.fetch_sub(1, Ordering::SeqCst);
}

/// Runs a mix of bound and unbound queues, with blocking items that only
/// finish once items queued after them ran; returns the peak of items
/// running at once.
fn mix() -> usize {
    // No item turns CPU-intensive (that would take it out of the budget).
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(30));
    let cpus = cmwq::topology::sched_affinity().unwrap();
    let b1 = Workqueue::builder("budget_b1").build().unwrap();
    let b2 = Workqueue::builder("budget_b2").build().unwrap();
    let u1 = Workqueue::builder("budget_u1").unbound().build().unwrap();
    let u2 = Workqueue::builder("budget_u2")
        .unbound()
        .affinity_scope(cmwq::topology::Scope::Cpu)
        .build()
        .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut expect = 0;
    // Blocking items on every CPU's bound pool: each waits (annotated) for
    // a message that an item queued later sends. If a blocked worker kept
    // its unit, the sender could never run under a budget of 1.
    let mut senders = Vec::new();
    let mut blockers = Vec::new();
    for &cpu in &cpus {
        let (tx, rx) = mpsc::channel::<()>();
        let rx = std::sync::Mutex::new(rx);
        let d = done.clone();
        let w = Work::new(move || {
            cmwq::blocking(|| rx.lock().unwrap().recv().unwrap());
            d.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(b1.queue_on(cpu, &w), Ok(true));
        blockers.push(w);
        senders.push(tx);
        expect += 1;
    }
    let mut works = Vec::new();
    for round in 0..40 {
        for &cpu in &cpus {
            for (wq, on_cpu) in [(&b1, true), (&b2, true), (&u1, false), (&u2, true)] {
                let d = done.clone();
                let w = Work::new(move || {
                    burn();
                    d.fetch_add(1, Ordering::SeqCst);
                });
                if on_cpu {
                    assert_eq!(wq.queue_on(cpu, &w), Ok(true));
                } else {
                    assert!(wq.queue(&w));
                }
                works.push(w);
                expect += 1;
            }
        }
        if round == 20 {
            for tx in senders.drain(..) {
                let d = done.clone();
                let w = Work::new(move || {
                    burn();
                    tx.send(()).unwrap();
                    d.fetch_add(1, Ordering::SeqCst);
                });
                assert!(u1.queue(&w));
                works.push(w);
                expect += 1;
            }
        }
    }
    if !common::wait_for(|| done.load(Ordering::SeqCst) == expect) {
        // Exit at once: dropping the queues would wait for the stuck items.
        println!(
            "RESULT stuck: only {} of {expect} items ran (a blocked worker kept the budget?)",
            done.load(Ordering::SeqCst)
        );
        std::process::exit(2);
    }
    for wq in [&b1, &b2, &u1, &u2] {
        wq.flush();
    }
    PEAK.load(Ordering::SeqCst)
}

/// The child: runs the mix and prints what it saw.
#[test]
fn child() {
    if std::env::var_os("CMWQ_BUDGET_CHILD").is_none() {
        return;
    }
    if let Ok(procs) = std::env::var("CMWQ_BUDGET_CGROUP_PROCS") {
        // Into the test's cgroup before any worker exists (all threads move).
        std::fs::write(&procs, std::process::id().to_string()).unwrap();
    }
    let peak = mix();
    let b = cmwq::cpu_budget();
    println!(
        "RESULT peak={peak} limit={:?} quota_ceil={:?} waits={}",
        b.limit,
        b.quota.as_ref().map(|q| q.ceil_cpus()),
        b.waits
    );
}

/// Runs the child with `env`; returns its RESULT line.
fn run_child(env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env("CMWQ_BUDGET_CHILD", "1")
        .env_remove("CMWQ_CPU_QUOTA");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r.to_string()))
        .unwrap_or_else(|| panic!("child printed no result: {stdout}"))
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

#[test]
fn a_budget_of_one_runs_one_item_at_a_time_and_blocked_workers_do_not_count() {
    let on = run_child(&[("CMWQ_CPU_QUOTA", "1")]);
    assert_eq!(field(&on, "limit"), "Some(1)", "{on}");
    assert_eq!(field(&on, "peak"), "1", "{on}");
    assert_ne!(field(&on, "waits"), "0", "{on}");
    // The control: the same mix without a budget runs items side by side
    // (on a machine where this process may use two CPUs or more), so the
    // peak above is the budget's doing.
    if cmwq::topology::sched_affinity().unwrap().len() >= 2 {
        let off = run_child(&[("CMWQ_CPU_QUOTA", "off")]);
        assert_eq!(field(&off, "limit"), "None", "{off}");
        assert!(field(&off, "peak").parse::<usize>().unwrap() >= 2, "{off}");
    } else {
        println!("note: one usable CPU: the run without a budget is not compared");
    }
}

/// A cgroup of this test's own with a 1-CPU quota, under the cgroup v2
/// mount (cpu controller enabled) or the v1 `cpu` hierarchy; removed on drop.
struct TestCgroup {
    dir: std::path::PathBuf,
}

impl TestCgroup {
    fn make() -> Result<TestCgroup, String> {
        if common::euid() != 0 {
            return Err("not root".into());
        }
        let mi = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let name = format!("cmwq-budget-test-{}", std::process::id());
        for line in mi.lines() {
            let Some((pre, post)) = line.split_once(" - ") else {
                continue;
            };
            let point = pre.split(' ').nth(4).unwrap_or("");
            let mut post = post.split(' ');
            let (fstype, opts) = (post.next().unwrap_or(""), post.nth(1).unwrap_or(""));
            let root = std::path::Path::new(point);
            let v2 = fstype == "cgroup2"
                && std::fs::read_to_string(root.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu"));
            let v1 = fstype == "cgroup" && opts.split(',').any(|o| o == "cpu");
            if !v1 && !v2 {
                continue;
            }
            if v2 {
                // Let children have the cpu controller (no harm if already on).
                let _ = std::fs::write(root.join("cgroup.subtree_control"), "+cpu");
            }
            let dir = root.join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            let cg = TestCgroup { dir };
            let set = if v2 {
                std::fs::write(cg.dir.join("cpu.max"), "100000 100000")
            } else {
                std::fs::write(cg.dir.join("cpu.cfs_period_us"), "100000")
                    .and_then(|_| std::fs::write(cg.dir.join("cpu.cfs_quota_us"), "100000"))
            };
            match set {
                Ok(()) => return Ok(cg),
                Err(e) => return Err(format!("{}: {e}", cg.dir.display())),
            }
        }
        Err("no writable cgroup with the cpu controller".into())
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // The child exited: the cgroup is empty and can go.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("note: could not remove {}", self.dir.display());
    }
}

#[test]
fn in_a_cgroup_with_a_one_cpu_quota_the_budget_follows_the_quota() {
    let cg = match TestCgroup::make() {
        Ok(cg) => cg,
        Err(why) => {
            println!("note: skipped, cannot make a cgroup with a CPU quota: {why}");
            return;
        }
    };
    let procs = cg.dir.join("cgroup.procs");
    let r = run_child(&[("CMWQ_BUDGET_CGROUP_PROCS", procs.to_str().unwrap())]);
    drop(cg);
    assert_eq!(field(&r, "quota_ceil"), "Some(1)", "{r}");
    assert_eq!(field(&r, "limit"), "Some(1)", "{r}");
    assert_eq!(field(&r, "peak"), "1", "{r}");
}
