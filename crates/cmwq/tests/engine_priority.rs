//! Priorities (issue 4): HIGHPRI pools at nice −20, FIFO pools, the process-wide
//! highpri policy, and what happens without the permission. The policy is
//! process-wide, so the tests run one at a time.

mod common;

use std::sync::{Arc, Mutex};

use cmwq::{Error, HighpriPolicy, Priority, Work, Workqueue};

static SERIAL: Mutex<()> = Mutex::new(());

/// (nice, rt_priority, policy) of the calling thread, from /proc.
fn my_sched() -> (i64, i64, i64) {
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let f: Vec<&str> = s[s.rfind(')').unwrap() + 1..].split_whitespace().collect();
    // Fields after the command name start at field 3 (state).
    let field = |n: usize| f[n - 3].parse::<i64>().unwrap();
    (field(19), field(40), field(41))
}

/// Runs one item on `wq` and returns the scheduling of the worker that ran it.
fn sched_of(wq: &Workqueue) -> (i64, i64, i64) {
    let out = Arc::new(Mutex::new(None));
    let o = out.clone();
    let w = Work::new(move || *o.lock().unwrap() = Some(my_sched()));
    assert!(wq.queue(&w));
    w.flush();
    out.lock().unwrap().take().expect("the item ran")
}

const SCHED_OTHER: i64 = 0;
const SCHED_FIFO: i64 = 1;

#[test]
fn highpri_runs_at_nice_minus_20_and_fifo_as_sched_fifo() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cmwq::set_highpri_policy(HighpriPolicy::Nice);
    let normal = Workqueue::builder("prio-normal").build().unwrap();
    assert_eq!(sched_of(&normal).2, SCHED_OTHER);
    let high = Workqueue::builder("prio-high").highpri().build().unwrap();
    let (nice, _, pol) = sched_of(&high);
    assert_eq!((nice, pol), (-20, SCHED_OTHER));
    assert_eq!(high.stats().priority, "nice -20");
    let fifo = Workqueue::builder("prio-fifo")
        .unbound()
        .priority(Priority::Fifo)
        .build()
        .unwrap();
    let (_, rt, pol) = sched_of(&fifo);
    assert_eq!((rt, pol), (1, SCHED_FIFO));
    assert_eq!(fifo.stats().priority, "fifo 1");
    assert_eq!(fifo.stats().priority_fallback, None);
    // Unbound nice attribute.
    let niced = Workqueue::builder("prio-nice5")
        .unbound()
        .nice(5)
        .build()
        .unwrap();
    assert_eq!(sched_of(&niced).0, 5);
    assert!(matches!(
        Workqueue::builder("prio-bad").unbound().nice(-30).build(),
        Err(Error::InvalidNice(-30))
    ));
}

#[test]
fn highpri_policy_fifo_switches_high_to_sched_fifo() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cmwq::set_highpri_policy(HighpriPolicy::Fifo);
    let high = Workqueue::builder("prio-high-fifo")
        .highpri()
        .unbound()
        .build()
        .unwrap();
    cmwq::set_highpri_policy(HighpriPolicy::Nice);
    let (_, rt, pol) = sched_of(&high);
    assert_eq!((rt, pol), (1, SCHED_FIFO));
    // Built after the switch back: nice -20 again.
    let high2 = Workqueue::builder("prio-high-nice")
        .highpri()
        .unbound()
        .build()
        .unwrap();
    assert_eq!(sched_of(&high2).2, SCHED_OTHER);
    assert_eq!(sched_of(&high2).0, -20);
}

// ---- without permission ----

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
const CAP_V3: u32 = 0x2008_0522;
const CAP_SYS_NICE: u32 = 23;

/// Drops CAP_SYS_NICE from the calling thread's effective set (capabilities are
/// per thread; threads it starts inherit the set). Returns false if it could
/// not read or write the set.
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
    let r = unsafe { libc::syscall(libc::SYS_capset, &hdr, data.as_ptr()) };
    r == 0
}

fn set_rlimit(res: libc::__rlimit_resource_t, v: u64) {
    let r = libc::rlimit {
        rlim_cur: v,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads one rlimit struct through a valid pointer.
    unsafe { libc::setrlimit(res, &r) };
}

#[test]
fn without_permission_the_builder_errors_or_falls_back() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    cmwq::set_highpri_policy(HighpriPolicy::Nice);
    // No real-time or lowered-nice allowance from the limits either.
    set_rlimit(libc::RLIMIT_RTPRIO, 0);
    set_rlimit(libc::RLIMIT_NICE, 0);
    let r = std::thread::spawn(|| {
        if !drop_sys_nice() {
            return None;
        }
        let denied = Workqueue::builder("prio-denied")
            .unbound()
            .priority(Priority::Fifo)
            .build();
        let denied_high = Workqueue::builder("prio-denied-high").highpri().build();
        let fell = Workqueue::builder("prio-fallback")
            .unbound()
            .priority(Priority::Fifo)
            .priority_fallback(true)
            .build();
        // Lowering nice needs the permission too, even to a positive value:
        // from nice 10 (inherited by the probe), nice 3 is refused.
        common::set_nice(10).unwrap();
        let lower = Workqueue::builder("prio-denied-lower")
            .unbound()
            .nice(3)
            .build();
        assert!(
            matches!(lower, Err(Error::PriorityDenied { .. })),
            "nice 3 from nice 10 without CAP_SYS_NICE: {lower:?}"
        );
        common::set_nice(0).ok();
        Some((denied.map(|_| ()), denied_high.map(|_| ()), fell))
    })
    .join()
    .unwrap();
    let Some((denied, denied_high, fell)) = r else {
        eprintln!("skipped: cannot change this thread's capabilities here");
        return;
    };
    match denied {
        Err(Error::PriorityDenied { wanted, reason }) => {
            assert_eq!(wanted, "fifo 1");
            assert!(reason.contains("RLIMIT_RTPRIO 0"), "{reason}");
        }
        other => panic!("FIFO without CAP_SYS_NICE must be refused: {other:?}"),
    }
    match denied_high {
        Err(e @ Error::PriorityDenied { .. }) => {
            assert!(e.to_string().contains("nice -20"), "{e}");
            assert!(e.to_string().contains("priority_fallback"), "{e}");
        }
        other => panic!("nice -20 without CAP_SYS_NICE must be refused: {other:?}"),
    }
    let wq = fell.expect("fallback builds");
    let st = wq.stats();
    assert_eq!(st.priority, "nice 0");
    let note = st.priority_fallback.expect("the fallback is recorded");
    assert!(note.contains("fifo 1") && note.contains("nice 0"), "{note}");
    // The dump (cmwq::snapshot, what `cmwq dump` prints) carries it too.
    let snap = cmwq::snapshot();
    let me = snap
        .workqueues
        .iter()
        .find(|w| w.name == "prio-fallback")
        .expect("in the snapshot");
    assert_eq!(me.stats.priority_fallback.as_deref(), Some(note.as_str()));
    assert_eq!(sched_of(&wq).2, SCHED_OTHER);
    set_rlimit(libc::RLIMIT_RTPRIO, libc::RLIM_INFINITY);
}
