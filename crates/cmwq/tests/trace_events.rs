//! The `tracing` feature (issue 18): each situation an operator must see
//! fires its event, with the fields that name the workqueue and pool.
//!
//! A recording subscriber is installed process-wide (events fire on worker,
//! watchdog and rescuer threads); the tests run one at a time, as worker
//! creation failure and the CPU-intensive threshold are process-wide.
//!
//! Run with `cargo test -p cmwq --release --features tracing --test trace_events`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use cmwq::topology::Scope;
use cmwq::{Priority, Work, Workqueue};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One recorded event: target, level, and its fields as text (`message` too).
#[derive(Clone, Debug)]
struct Rec {
    target: String,
    level: Level,
    fields: BTreeMap<String, String>,
}

impl Rec {
    fn msg(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }
    fn field(&self, k: &str) -> &str {
        self.fields.get(k).map_or("", String::as_str)
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().to_string(), v.to_string());
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.0.insert(f.name().to_string(), format!("{v:?}"));
    }
}

/// A subscriber that keeps every event.
struct Recorder {
    events: Arc<Mutex<Vec<Rec>>>,
    next_span: AtomicU64,
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &Event<'_>) {
        let mut fields = BTreeMap::new();
        e.record(&mut Fields(&mut fields));
        let r = Rec {
            target: e.metadata().target().to_string(),
            level: *e.metadata().level(),
            fields,
        };
        self.events.lock().unwrap().push(r);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The recorded events; installs the recorder on first use.
fn events() -> &'static Arc<Mutex<Vec<Rec>>> {
    static EV: OnceLock<Arc<Mutex<Vec<Rec>>>> = OnceLock::new();
    EV.get_or_init(|| {
        let events = Arc::new(Mutex::new(Vec::new()));
        tracing::subscriber::set_global_default(Recorder {
            events: events.clone(),
            next_span: AtomicU64::new(0),
        })
        .expect("no other global subscriber");
        events
    })
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Waits up to 30 s for an event with message `msg` whose fields match `pred`.
fn wait_event(msg: &str, pred: impl Fn(&Rec) -> bool) -> Rec {
    for _ in 0..3000 {
        if let Some(r) = events()
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.msg() == msg && pred(r))
        {
            return r.clone();
        }
        thread::sleep(Duration::from_millis(10));
    }
    let seen: Vec<String> = events()
        .lock()
        .unwrap()
        .iter()
        .map(|r| format!("{:?}", r.fields))
        .collect();
    panic!("no {msg:?} event matched; saw:\n{}", seen.join("\n"));
}

fn wait_for(f: impl Fn() -> bool) -> bool {
    for _ in 0..20_000 {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn a_panic_names_its_workqueue_and_payload() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    events();
    let wq = Workqueue::builder("tr-panic").unbound().build().unwrap();
    let w = Work::new(|| panic!("disk on fire"));
    assert!(wq.queue(&w));
    wq.flush();
    let r = wait_event("work item panicked", |r| r.field("workqueue") == "tr-panic");
    assert_eq!(r.field("payload"), "disk on fire");
    assert_eq!(r.level, Level::ERROR);
    assert_eq!(r.target, "cmwq");
}

#[test]
fn workers_are_created_and_culled() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    events();
    cmwq::set_idle_timeout(Duration::from_millis(20));
    // nice 6: a pool of its own, whose workers start here.
    let wq = Workqueue::builder("tr-workers")
        .unbound()
        .affinity_scope(Scope::System)
        .nice(6)
        .max_active(8)
        .build()
        .unwrap();
    // Eight items that say they block, all at once: the pool grows. The
    // guard releases them however the test ends (a panic too), so the
    // workqueue's drop does not wait forever.
    struct Release(Arc<AtomicBool>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let go = Arc::new(AtomicBool::new(false));
    let release = Release(go.clone());
    let items: Vec<Work> = (0..8)
        .map(|_| {
            let go = go.clone();
            Work::new(move || {
                cmwq::blocking(|| {
                    while !go.load(Ordering::SeqCst) {
                        thread::sleep(Duration::from_millis(1));
                    }
                })
            })
        })
        .collect();
    let start = events().lock().unwrap().len();
    for w in &items {
        assert!(wq.queue(w));
    }
    // Several workers of one pool are created (each reporting its thread id).
    let busiest = || {
        let ev = events().lock().unwrap();
        let mut per_pool: BTreeMap<String, usize> = BTreeMap::new();
        for r in ev[start..].iter().filter(|r| r.msg() == "worker created") {
            assert!(r.field("tid").parse::<i32>().is_ok_and(|t| t > 0), "{r:?}");
            *per_pool.entry(r.field("pool").to_string()).or_default() += 1;
        }
        per_pool.into_iter().max_by_key(|(_, n)| *n)
    };
    assert!(
        wait_for(|| busiest().is_some_and(|(_, n)| n >= 3)),
        "fewer than 3 workers created in a pool: {:?}",
        busiest()
    );
    let pool = busiest().unwrap().0;
    // All idle now: the surplus beyond the kernel's two is culled.
    drop(release);
    wq.flush();
    let culled = wait_event("worker culled", |r| r.field("pool") == pool);
    assert_eq!(culled.field("reason"), "idle");
    assert!(culled.field("tid").parse::<i32>().is_ok_and(|t| t > 0));
    cmwq::set_idle_timeout(Duration::from_secs(300));
}

/// An item that burns CPU past the threshold is reported, with its queue.
#[test]
fn a_cpu_intensive_item_is_reported() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    events();
    cmwq::set_cpu_intensive_thresh(Duration::from_millis(10));
    let wq = Workqueue::builder("tr-intensive").build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let spin = Work::new(move || {
        let t0 = std::time::Instant::now();
        while !s.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(20) {
            std::hint::spin_loop();
        }
    });
    assert!(wq.queue_on(0, &spin).unwrap());
    let r = wait_event("cpu-intensive work item", |r| {
        r.field("workqueue") == "tr-intensive"
    });
    stop.store(true, Ordering::SeqCst);
    wq.flush();
    assert!(r.field("tid").parse::<i32>().is_ok_and(|t| t > 0));
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
}

/// An item that sleeps without saying so is found by the sampler.
#[test]
fn a_sleeping_worker_found_by_the_sampler_is_reported() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    events();
    cmwq::set_cpu_intensive_thresh(Duration::from_millis(10));
    let wq = Workqueue::builder("tr-sampler").build().unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let sleeper = Work::new(move || {
        for _ in 0..20_000 {
            if r.load(Ordering::SeqCst) {
                return;
            }
            thread::sleep(Duration::from_millis(1));
        }
    });
    let rl = release.clone();
    let second = Work::new(move || rl.store(true, Ordering::SeqCst));
    assert!(wq.queue_on(0, &sleeper).unwrap());
    assert!(wq.queue_on(0, &second).unwrap());
    let ev = wait_event("worker sleeps in a work item", |r| {
        r.field("workqueue") == "tr-sampler"
    });
    release.store(true, Ordering::SeqCst);
    wq.flush();
    assert_eq!(ev.level, Level::INFO);
    cmwq::set_cpu_intensive_thresh(Duration::from_secs(3600));
}

/// With worker creation failing, a `MEM_RECLAIM` queue's pool sends mayday
/// and its rescuer runs the work: both are reported.
#[test]
fn mayday_and_rescue_are_reported() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    events();
    cmwq::debug_fail_worker_creation(true);
    // nice 3: a fresh pool, no worker yet.
    let wq = Workqueue::builder("tr-reclaim")
        .unbound()
        .nice(3)
        .mem_reclaim()
        .build()
        .unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let w = Work::new(move || r.store(true, Ordering::SeqCst));
    assert!(wq.queue(&w));
    let ok = wait_for(|| ran.load(Ordering::SeqCst));
    cmwq::debug_fail_worker_creation(false);
    assert!(ok, "the rescuer never ran the item");
    let m = wait_event("mayday: pool starves, rescuer called", |r| {
        r.field("workqueue") == "tr-reclaim"
    });
    assert_eq!(m.level, Level::WARN);
    let r = wait_event("rescuer runs a starving pool's work", |r| {
        r.field("workqueue") == "tr-reclaim"
    });
    assert_eq!(r.field("pool"), m.field("pool"));
    wq.flush();
}

/// Live changes of a workqueue's knobs are reported with the new values.
#[test]
fn live_attrs_changes_are_reported() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    events();
    let wq = Workqueue::builder("tr-attrs").unbound().build().unwrap();
    wq.set_affinity_scope(Scope::System).unwrap();
    let r = wait_event("workqueue attributes changed", |r| {
        r.field("workqueue") == "tr-attrs" && r.fields.contains_key("attrs")
    });
    assert!(r.field("attrs").contains("System"), "{r:?}");
    wq.set_max_active(3).unwrap();
    wait_event("workqueue attributes changed", |r| {
        r.field("workqueue") == "tr-attrs" && r.field("max_active") == "3"
    });
}

const CAP_V3: u32 = 0x2008_0522;
const CAP_SYS_NICE: u32 = 23;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Drops CAP_SYS_NICE from the calling thread's effective set; false if it
/// could not.
fn drop_sys_nice() -> bool {
    let mut hdr = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget fills two CapData structs for version 3 through valid pointers.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) };
    if r != 0 {
        return false;
    }
    data[0].effective &= !(1 << CAP_SYS_NICE);
    // SAFETY: capset reads the header and two CapData structs through valid pointers.
    unsafe { libc::syscall(libc::SYS_capset, &hdr, data.as_ptr()) == 0 }
}

fn set_rlimit(res: libc::__rlimit_resource_t, v: u64) {
    let r = libc::rlimit {
        rlim_cur: v,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads one rlimit struct through a valid pointer.
    unsafe { libc::setrlimit(res, &r) };
}

/// A priority refused and replaced by a lower one is reported (where the
/// test can take the permission away; it says so and passes where not).
#[test]
fn a_priority_fallback_is_reported() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    events();
    set_rlimit(libc::RLIMIT_RTPRIO, 0);
    set_rlimit(libc::RLIMIT_NICE, 0);
    let built = thread::spawn(|| {
        if !drop_sys_nice() {
            return None;
        }
        Some(
            Workqueue::builder("tr-fallback")
                .unbound()
                .priority(Priority::Fifo)
                .priority_fallback(true)
                .build(),
        )
    })
    .join()
    .unwrap();
    set_rlimit(libc::RLIMIT_RTPRIO, libc::RLIM_INFINITY);
    set_rlimit(libc::RLIMIT_NICE, libc::RLIM_INFINITY);
    let Some(wq) = built else {
        eprintln!("skipped: cannot change this thread's capabilities here");
        return;
    };
    let wq = wq.expect("the fallback builds");
    let note = wq.stats().priority_fallback.expect("a fallback happened");
    let r = wait_event("priority fallback", |r| {
        r.field("workqueue") == "tr-fallback"
    });
    assert_eq!(r.field("note"), note);
    assert_eq!(r.level, Level::WARN);
}
