//! When the machine moves: the CPUs a process may use change at run time.
//!
//! - `queue_on` of an unbound queue to a CPU outside its cpumask goes to the
//!   queue's default pool (the kernel's rule), before and after a live
//!   `set_cpumask`; only a CPU id beyond the possible CPUs is an error.
//! - A CPU taken away (the affinity of every thread, as `taskset -a -p`
//!   does; a cgroup cpuset) disassociates its bound pool, whose items keep
//!   running; given back, the pool's workers are bound to it alone again.
//!   Each such test runs in a child process (this binary, re-run with
//!   `CMWQ_HP_CHILD` set), which restores what it changed.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use std::time::Instant;

use cmwq::{DelayedWork, Work, Workqueue};

/// The CPUs this process may run on now (the main thread's affinity).
fn usable() -> Vec<usize> {
    cmwq::topology::sched_affinity().expect("sched_getaffinity")
}

/// Every `_on` call of an unbound queue whose cpumask is `[inside]`, aimed at
/// `outside`: each succeeds and its item runs once, on a CPU of the mask.
fn on_calls_run_in_mask(wq: &Workqueue, outside: usize, inside: usize) {
    let ran = Arc::new(AtomicUsize::new(0));
    let wrong_cpu = Arc::new(AtomicUsize::new(0));
    let count = {
        let (ran, wrong) = (ran.clone(), wrong_cpu.clone());
        move || {
            ran.fetch_add(1, Ordering::SeqCst);
            if common::current_cpu() != inside {
                wrong.fetch_add(1, Ordering::SeqCst);
            }
        }
    };
    let c = count.clone();
    let w = Work::new(c);
    assert_eq!(wq.queue_on(outside, &w), Ok(true), "queue_on({outside})");
    w.flush();
    let c = count.clone();
    let h = wq
        .spawn_on(outside, move || {
            c();
            7
        })
        .unwrap_or_else(|e| panic!("spawn_on({outside}): {e}"));
    assert_eq!(h.join().unwrap(), 7);
    let c = count.clone();
    assert_eq!(wq.execute_on(outside, c), Ok(true));
    let c = count.clone();
    let dw = DelayedWork::new(c);
    assert_eq!(
        wq.queue_delayed_on(outside, &dw, Duration::from_millis(1)),
        Ok(true)
    );
    dw.flush();
    wq.flush();
    assert_eq!(ran.load(Ordering::SeqCst), 4, "each item ran once");
    assert_eq!(
        wrong_cpu.load(Ordering::SeqCst),
        0,
        "items for CPU {outside} run in the queue's cpumask [{inside}] (its default pool)"
    );
}

#[test]
fn queue_on_outside_cpumask_goes_to_the_default_pool() {
    let cpus = usable();
    if cpus.len() < 2 {
        eprintln!("skipped: needs 2 usable CPUs, this process has {cpus:?}");
        return;
    }
    let (a, b) = (cpus[0], cpus[1]);
    let wq = Workqueue::builder("hp-mask")
        .unbound()
        .cpumask(&[b])
        .build()
        .unwrap();
    on_calls_run_in_mask(&wq, a, b);
    // A live cpumask change: calls that worked keep working, now the other way.
    wq.set_cpumask(&[a]).unwrap();
    on_calls_run_in_mask(&wq, b, a);
    wq.set_cpumask(&[b]).unwrap();
    on_calls_run_in_mask(&wq, a, b);
    // A CPU id beyond the possible ones is still refused, and says so.
    let e = wq.queue_on(1 << 20, &Work::new(|| {})).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
}

// ---- CPUs taken and given back ----

/// The kernel's `POOL_DISASSOCIATED` bit in a snapshot's pool flags.
const POOL_DISASSOCIATED: u32 = 1 << 2;
/// Watchdog ticks a change may take to be noticed and applied (the affinity
/// is read every tick, the cpuset every tenth).
const MAX_TICKS: u64 = 40;

/// Sets the affinity of thread `tid` (0: the caller).
fn set_affinity_of(tid: i32, cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: the CPU ids come from sched_getaffinity, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: the pointer and size describe `set`, which outlives the call.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The calling thread's affinity.
fn my_affinity() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(r, 0, "sched_getaffinity");
    // SAFETY: `set` was filled by the kernel above.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// What `taskset -a -p -c LIST PID` does: every thread of this process.
/// Twice, for threads started meanwhile by one not yet changed.
fn taskset_all(cpus: &[usize]) {
    for _ in 0..2 {
        for e in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
            let tid: i32 = e.unwrap().file_name().to_str().unwrap().parse().unwrap();
            // A thread that exited meanwhile is gone: ESRCH is fine.
            let _ = set_affinity_of(tid, cpus);
        }
    }
}

/// The bound pools of `cpu` in the snapshot: (disassociated, rebinds) each.
/// A disassociated pool is not concurrency managed (no cap), an associated
/// one runs one counted worker at a time.
fn bound_pools_of(cpu: usize) -> Vec<(bool, u64)> {
    cmwq::snapshot()
        .pools
        .iter()
        .filter(|p| p.cpu == Some(cpu))
        .map(|p| {
            let dis = p.flags & POOL_DISASSOCIATED != 0;
            assert_eq!(p.cap, (!dis).then_some(1), "pool {} cap", p.id);
            (dis, p.rebinds)
        })
        .collect()
}

/// Keeps the watchdog ticking (it parks while nothing is busy) until `cond`
/// holds; panics with `what` after [`MAX_TICKS`] ticks (or a minute, should
/// the watchdog stop ticking at all).
fn within_ticks(what: &str, wq: &Workqueue, cond: impl Fn() -> bool) {
    let t0 = cmwq::watchdog_ticks();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if cond() {
            return;
        }
        let ticks = cmwq::watchdog_ticks() - t0;
        assert!(
            ticks <= MAX_TICKS && Instant::now() < deadline,
            "{what}: not within {ticks} watchdog ticks"
        );
        // A busy worker for a tick or two.
        wq.execute(|| std::thread::sleep(Duration::from_millis(15)));
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Items queued on every usable CPU of the start set: each runs exactly once.
/// Returns, per item queued on `probe`, the CPU it ran on and its worker's
/// affinity.
fn run_counted(
    wq: &Workqueue,
    cpus: &[usize],
    per_cpu: usize,
    probe: usize,
) -> Vec<(usize, Vec<usize>)> {
    let ran = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut works = Vec::new();
    for &c in cpus {
        for _ in 0..per_cpu {
            let (ran, seen) = (ran.clone(), seen.clone());
            let w = Work::new(move || {
                ran.fetch_add(1, Ordering::SeqCst);
                if c == probe {
                    seen.lock()
                        .unwrap()
                        .push((common::current_cpu(), my_affinity()));
                }
            });
            assert_eq!(wq.queue_on(c, &w), Ok(true));
            works.push(w);
        }
    }
    wq.flush();
    for w in &works {
        assert!(!w.is_pending(), "flush waited for every item");
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        cpus.len() * per_cpu,
        "every item ran exactly once"
    );
    std::mem::take(&mut *seen.lock().unwrap())
}

/// Runs test `name` of this binary in a child process with `CMWQ_HP_CHILD`
/// set; the child prints `skipped:` where it lacks what it needs.
fn in_child(name: &str) {
    eprintln!(
        "{}",
        common::run_child(name, &[("CMWQ_HP_CHILD", name)], &[])
    );
}

/// In the test process: runs test `name` in a child and returns `None`. In
/// that child: the usable CPUs, or `None` (and a note) if there are not two.
fn child_with_two_cpus(name: &str) -> Option<Vec<usize>> {
    if std::env::var("CMWQ_HP_CHILD").is_ok_and(|v| v == name) {
        let start = usable();
        if start.len() >= 2 {
            return Some(start);
        }
        println!("skipped: needs 2 usable CPUs, this process has {start:?}");
    } else {
        in_child(name);
    }
    None
}

/// What a CPU leaving and coming back does to its bound pool, with `take`
/// and `give` changing the process's CPUs (affinity or cpuset).
fn leave_and_come_back(take: impl Fn(&[usize]), give: impl Fn()) {
    let start = usable();
    let (stay, leave) = (start[0], start[1]);
    let wq = Workqueue::builder("hp-bound").build().unwrap();
    let ticker = Workqueue::builder("hp-tick").unbound().build().unwrap();
    // Before: items of `leave` run on it, on a worker bound to it alone.
    for (cpu, aff) in run_counted(&wq, &start, 20, leave) {
        assert_eq!((cpu, aff), (leave, vec![leave]), "bound before the change");
    }
    assert!(
        bound_pools_of(leave).iter().all(|&(dis, _)| !dis),
        "associated before"
    );
    let rebinds0: u64 = bound_pools_of(leave).iter().map(|p| p.1).sum();
    let changes0 = cmwq::cpu_changes();

    take(&[stay]);
    within_ticks(
        "the pool of the CPU taken is disassociated",
        &ticker,
        || bound_pools_of(leave).iter().all(|&(dis, _)| dis),
    );
    assert!(cmwq::cpu_changes() > changes0, "the change was counted");
    let snap = cmwq::snapshot();
    assert_eq!(snap.topology.usable, vec![stay], "usable CPUs shown");
    assert!(
        snap.topology.online.contains(&leave),
        "still a possible CPU"
    );
    // Meanwhile: items of every CPU still run exactly once (those of
    // `leave` on the CPU that is left), and flush and cancel still work.
    for (cpu, _) in run_counted(&wq, &start, 50, leave) {
        assert_eq!(cpu, stay, "a disassociated pool's items run elsewhere");
    }
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    let dw = DelayedWork::new(move || {
        f.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(
        wq.queue_delayed_on(leave, &dw, Duration::from_secs(3600)),
        Ok(true)
    );
    assert!(
        dw.cancel_sync(),
        "cancel works on a disassociated CPU's item"
    );
    assert_eq!(
        fired.load(Ordering::SeqCst),
        0,
        "the cancelled item never ran"
    );

    give();
    within_ticks("the pool of the CPU given back is rebound", &ticker, || {
        bound_pools_of(leave).iter().all(|&(dis, _)| !dis)
    });
    let rebinds1: u64 = bound_pools_of(leave).iter().map(|p| p.1).sum();
    assert!(
        rebinds1 > rebinds0,
        "rebinds counted: {rebinds0} -> {rebinds1}"
    );
    // After: every item of `leave` runs on it, on a worker bound to it alone.
    for (cpu, aff) in run_counted(&wq, &start, 50, leave) {
        assert_eq!(aff, vec![leave], "worker bound to CPU {leave} alone");
        assert_eq!(cpu, leave, "item for CPU {leave} ran there");
    }
}

#[test]
fn affinity_of_every_thread_taken_and_given_back() {
    const NAME: &str = "affinity_of_every_thread_taken_and_given_back";
    let Some(start) = child_with_two_cpus(NAME) else {
        return;
    };
    leave_and_come_back(taskset_all, || taskset_all(&start));
}

/// A cgroup cpuset the test made (v1 `cpuset` or v2 with the `cpuset`
/// controller): the child process moves itself in, changes its CPUs, and
/// moves back out; the directory is removed when this is dropped.
struct Cpuset {
    dir: std::path::PathBuf,
    /// The file that holds the CPUs (`cpuset.cpus`).
    cpus: std::path::PathBuf,
    /// `cgroup.procs` of the cgroup the process came from.
    home: std::path::PathBuf,
}

impl Cpuset {
    /// Makes one with `list`, or says why not.
    fn make(list: &str) -> Result<Cpuset, String> {
        let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let cg = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        for line in info.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let Some(dash) = f.iter().position(|&x| x == "-") else {
                continue;
            };
            let (root, mnt, fstype) = (f[3], f[4], f[dash + 1]);
            let opts = f.get(dash + 3).copied().unwrap_or("");
            let v1 = fstype == "cgroup" && opts.split(',').any(|o| o == "cpuset");
            let v2 = fstype == "cgroup2"
                && std::fs::read_to_string(format!("{mnt}/cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpuset"));
            if !v1 && !v2 {
                continue;
            }
            // The cgroup the process is in, on that hierarchy.
            let path = cg.lines().find_map(|l| {
                let mut p = l.splitn(3, ':');
                let (_, ctrl, path) = (p.next()?, p.next()?, p.next()?);
                let mine = if v1 {
                    ctrl.split(',').any(|c| c == "cpuset")
                } else {
                    ctrl.is_empty()
                };
                mine.then(|| path.to_string())
            });
            let Some(path) = path else { continue };
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let here = std::path::Path::new(mnt).join(rel.trim_start_matches('/'));
            // v2: processes live only in leaves, so the new cgroup goes under
            // the mount's root, whose subtree gets the cpuset controller.
            let parent = if v2 {
                std::path::PathBuf::from(mnt)
            } else {
                here.clone()
            };
            if v2 {
                let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+cpuset");
            }
            let dir = parent.join(format!("cmwq-hotplug-{}", std::process::id()));
            std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
            let set = Cpuset {
                cpus: dir.join("cpuset.cpus"),
                home: here.join("cgroup.procs"),
                dir,
            };
            if v1 {
                let mems = std::fs::read_to_string(here.join("cpuset.mems"))
                    .map_err(|e| format!("cpuset.mems: {e}"))?;
                std::fs::write(set.dir.join("cpuset.mems"), mems.trim())
                    .map_err(|e| format!("cpuset.mems: {e}"))?;
            }
            set.set(list)?;
            return Ok(set);
        }
        Err("no writable cgroup cpuset (v1 cpuset mount or v2 cpuset controller)".into())
    }

    fn set(&self, list: &str) -> Result<(), String> {
        std::fs::write(&self.cpus, list).map_err(|e| format!("{}: {e}", self.cpus.display()))
    }

    /// Moves the whole process (every thread) in.
    fn enter(&self) -> Result<(), String> {
        std::fs::write(
            self.dir.join("cgroup.procs"),
            std::process::id().to_string(),
        )
        .map_err(|e| format!("move into {}: {e}", self.dir.display()))
    }

    /// Moves it back where it was.
    fn leave(&self) {
        let _ = std::fs::write(&self.home, std::process::id().to_string());
    }
}

impl Drop for Cpuset {
    fn drop(&mut self) {
        self.leave();
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}

#[test]
fn cgroup_cpuset_taken_and_given_back() {
    const NAME: &str = "cgroup_cpuset_taken_and_given_back";
    let Some(start) = child_with_two_cpus(NAME) else {
        return;
    };
    let list = start
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let set = match Cpuset::make(&list) {
        Ok(s) => s,
        Err(why) => {
            println!("skipped: cannot make a cgroup cpuset here: {why}");
            return;
        }
    };
    if let Err(why) = set.enter() {
        println!("skipped: {why}");
        return;
    }
    leave_and_come_back(
        |cpus| set.set(&cpus[0].to_string()).expect("shrink the cpuset"),
        || set.set(&list).expect("widen the cpuset"),
    );
    drop(set);
    println!("cpuset test ran");
}

// ---- unbound pods follow the usable CPUs (`wq_update_pod`) ----

/// The pools workqueue `name` routes to now (each usable-at-start CPU's
/// and its default pool): (CPU, pool's `cpus`, pool's `pod_cpus`), CPU
/// `None` for the default pool.
type Routes = Vec<(Option<usize>, Vec<usize>, Vec<usize>)>;

fn routes_of(name: &str, cpus: &[usize]) -> Routes {
    let snap = cmwq::snapshot();
    let wq = snap
        .workqueues
        .iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("workqueue {name} in the snapshot"));
    let pool = |id: u32| {
        let p = snap.pools.iter().find(|p| p.id == id).expect("its pool");
        (p.cpus.clone(), p.pod_cpus.clone())
    };
    let mut v: Routes = Vec::new();
    for &c in cpus {
        if let Some(Some(id)) = wq.cpu_pool.get(c) {
            let (a, b) = pool(*id);
            v.push((Some(c), a, b));
        }
    }
    if let Some(id) = wq.dfl_pool {
        let (a, b) = pool(id);
        v.push((None, a, b));
    }
    v
}

/// No pool the queue routes to holds `cpu`.
fn routes_avoid(r: &Routes, cpu: usize) -> bool {
    !r.is_empty()
        && r.iter()
            .all(|(_, cpus, pod)| !cpus.contains(&cpu) && !pod.contains(&cpu))
}

/// The pool that CPU `cpu` routes to.
fn route_of(r: &Routes, cpu: usize) -> Option<(&[usize], &[usize])> {
    r.iter()
        .find(|(c, _, _)| *c == Some(cpu))
        .map(|(_, a, b)| (a.as_slice(), b.as_slice()))
}

#[test]
fn unbound_pods_follow_the_usable_cpus() {
    use cmwq::topology::Scope;
    const NAME: &str = "unbound_pods_follow_the_usable_cpus";
    let Some(start) = child_with_two_cpus(NAME) else {
        return;
    };
    let (stay, leave) = (start[0], start[1]);
    let ticker = Workqueue::builder("hp-pods-tick")
        .unbound()
        .build()
        .unwrap();
    for scope in [None, Some(Scope::Cpu)] {
        let name = format!("hp-pods-{scope:?}");
        let mut b = Workqueue::builder(&name).unbound();
        if let Some(s) = scope {
            b = b.affinity_scope(s);
        }
        let wq = Arc::new(b.build().unwrap());
        let oname = format!("hp-pods-ordered-{scope:?}");
        let ordered = Arc::new(
            Workqueue::builder(&oname)
                .unbound()
                .ordered()
                .build()
                .unwrap(),
        );
        let before = routes_of(&name, &start);
        let (_, pod) = route_of(&before, leave).expect("CPU routes to a pod");
        assert!(
            pod.contains(&leave),
            "{name}: pod of CPU {leave}: {before:?}"
        );

        // A producer queues on every CPU throughout, plus a sequence on the
        // ordered queue, until told to stop.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ran = Arc::new(AtomicUsize::new(0));
        let next = Arc::new(AtomicUsize::new(0));
        let out_of_order = Arc::new(AtomicUsize::new(0));
        let producer = {
            let (stop, ran, next, ooo) = (
                stop.clone(),
                ran.clone(),
                next.clone(),
                out_of_order.clone(),
            );
            let (wq, ordered, start) = (wq.clone(), ordered.clone(), start.clone());
            std::thread::spawn(move || {
                let mut queued = 0usize;
                let mut seq = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    for &c in &start {
                        let r = ran.clone();
                        assert_eq!(
                            wq.execute_on(c, move || {
                                r.fetch_add(1, Ordering::SeqCst);
                            }),
                            Ok(true)
                        );
                        queued += 1;
                    }
                    let (n, o, me) = (next.clone(), ooo.clone(), seq);
                    assert!(ordered.execute(move || {
                        if n.fetch_add(1, Ordering::SeqCst) != me {
                            o.fetch_add(1, Ordering::SeqCst);
                        }
                    }));
                    seq += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
                (queued, seq)
            })
        };

        taskset_all(&[stay]);
        within_ticks(
            &format!("{name}: the pods leave CPU {leave}"),
            &ticker,
            || {
                routes_avoid(&routes_of(&name, &start), leave)
                    && routes_avoid(&routes_of(&oname, &start), leave)
            },
        );
        let during = routes_of(&name, &start);
        if scope == Some(Scope::Cpu) {
            // The pod of the CPU taken has no usable CPU: its CPU goes to
            // the default pool (which holds only the CPU left).
            let (cpus, _) = route_of(&during, leave).expect("CPU taken still routes");
            assert_eq!(cpus, [stay], "{name}: {during:?}");
            let dfl = during.iter().find(|r| r.0.is_none()).expect("default pool");
            assert_eq!(dfl.1, [stay], "{name}: {during:?}");
        }

        taskset_all(&start);
        within_ticks(
            &format!("{name}: the pods take CPU {leave} back"),
            &ticker,
            || {
                let r = routes_of(&name, &start);
                let o = routes_of(&oname, &start);
                route_of(&r, leave).is_some_and(|(_, pod)| pod.contains(&leave))
                    && o.iter().all(|(_, cpus, _)| cpus.contains(&leave))
            },
        );
        if scope == Some(Scope::Cpu) {
            let r = routes_of(&name, &start);
            assert_eq!(route_of(&r, leave).unwrap().1, [leave], "{name}: {r:?}");
        }

        stop.store(true, Ordering::SeqCst);
        let (queued, seq) = producer.join().unwrap();
        wq.flush();
        ordered.flush();
        assert_eq!(
            ran.load(Ordering::SeqCst),
            queued,
            "{name}: every item ran once"
        );
        assert_eq!(
            next.load(Ordering::SeqCst),
            seq,
            "{name}: every ordered item ran once"
        );
        assert_eq!(
            out_of_order.load(Ordering::SeqCst),
            0,
            "{name}: ordered stays ordered"
        );
        assert!(queued > 0 && seq > 0);
    }
}

/// A panic of cmwq's code in the round that re-cuts the pods (the
/// `failure-injection` hook) is caught, counted, and the round starts over:
/// the pods still leave the CPU taken and take it back. Without
/// `service::run` the pods thread died holding its claim, and no change of
/// the usable CPUs was applied again.
#[test]
fn a_panic_in_the_pods_round_is_caught_and_the_pods_still_follow() {
    const NAME: &str = "a_panic_in_the_pods_round_is_caught_and_the_pods_still_follow";
    let Some(start) = child_with_two_cpus(NAME) else {
        return;
    };
    let (stay, leave) = (start[0], start[1]);
    let ticker = Workqueue::builder("hp-svc-tick").unbound().build().unwrap();
    let name = "hp-svc-pods";
    let _wq = Workqueue::builder(name)
        .unbound()
        .affinity_scope(cmwq::topology::Scope::Cpu)
        .build()
        .unwrap();
    let before = cmwq::engine_thread_panics();
    cmwq::debug_inject_panic(cmwq::InjectedPanic::PodsRound);
    taskset_all(&[stay]);
    within_ticks(
        &format!("{name}: the pods leave CPU {leave} after a panicked round"),
        &ticker,
        || routes_avoid(&routes_of(name, &start), leave),
    );
    assert_eq!(
        cmwq::engine_thread_panics() - before,
        1,
        "the round's panic"
    );
    taskset_all(&start);
    within_ticks(
        &format!("{name}: the pods take CPU {leave} back"),
        &ticker,
        || route_of(&routes_of(name, &start), leave).is_some_and(|(_, pod)| pod.contains(&leave)),
    );
    assert_eq!(cmwq::engine_thread_panics() - before, 1);
}

/// A machine that lists more possible CPUs than are online (as VMs and
/// servers with hot-pluggable sockets do): a bound queue's `queue_on` of a
/// possible CPU that is not online goes to that CPU's own pool, which is
/// disassociated and served by unbound workers, as in the kernel; a pool
/// nothing was queued on has no worker. Runs in a child process, since the
/// machine's topology is read once, by the first workqueue.
#[test]
fn possible_but_offline_cpu_has_its_own_disassociated_pool() {
    if !common::in_own_process(
        "possible_but_offline_cpu_has_its_own_disassociated_pool",
        "CMWQ_HP_POSSIBLE_CHILD",
    ) {
        return;
    }
    // The real online CPUs, plus two possible ones beyond them.
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("cpu/online");
    let real = cmwq::topology::parse_cpulist(online.trim()).expect("a cpu list");
    let max = *real.last().expect("an online CPU");
    let (offline, untouched) = (max + 1, max + 2);
    let root = std::env::temp_dir().join(format!("cmwq-possible-{}", std::process::id()));
    let cpu_dir = root.join("devices/system/cpu");
    std::fs::create_dir_all(&cpu_dir).expect("fixture dir");
    std::fs::write(cpu_dir.join("possible"), format!("0-{untouched}\n")).unwrap();
    std::fs::write(cpu_dir.join("online"), online).unwrap();
    let topo = cmwq::topology::Topology::from_sysfs(&root).expect("fixture topology");
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(topo.nr_cpu_ids(), untouched + 1);
    assert!(
        cmwq::debug_use_topology(topo),
        "set before the first workqueue"
    );

    let wq = Workqueue::builder("possible_offline").build().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let w = Work::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    for _ in 0..3 {
        assert_eq!(wq.queue_on(offline, &w), Ok(true));
        w.flush();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    let snap = cmwq::snapshot();
    let pool_of = |cpu: usize| {
        snap.pools
            .iter()
            .find(|p| p.cpu == Some(cpu))
            .unwrap_or_else(|| panic!("no pool for possible CPU {cpu}: {:?}", snap.pools))
    };
    let p = pool_of(offline);
    assert_ne!(p.flags & 0x04, 0, "CPU {offline}'s pool is disassociated");
    let pwq = snap
        .workqueues
        .iter()
        .find(|q| q.name == "possible_offline")
        .expect("the queue")
        .pwqs
        .iter()
        .find(|q| q.pool == p.id)
        .unwrap_or_else(|| panic!("no pwq on CPU {offline}'s pool"));
    assert_eq!(pwq.completed, 3, "every item ran on CPU {offline}'s pool");
    let idle = pool_of(untouched);
    assert_eq!(
        idle.workers, 0,
        "a pool of a CPU never used starts no thread"
    );
    // A CPU beyond the possible ones is still an error.
    assert!(wq.queue_on(untouched + 1, &w).is_err());
}
