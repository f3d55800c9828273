//! `Workqueue::queue_delayed_on`: the timer delivers the item to the CPU asked for.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use cmwq::{DelayedWork, Workqueue};

#[test]
fn delayed_on_runs_on_the_cpu_asked_for() {
    let wq = Workqueue::builder("delayed_on").build().unwrap();
    let (pools, _) = wq.cpu_pools();
    let cpus: Vec<usize> = (0..pools.len()).filter(|&c| pools[c].is_some()).collect();
    assert!(!cpus.is_empty());
    for &cpu in &cpus {
        let seen = Arc::new(AtomicI32::new(-1));
        let s = seen.clone();
        // SAFETY: sched_getcpu has no preconditions.
        let dw =
            DelayedWork::new(move || s.store(unsafe { libc::sched_getcpu() }, Ordering::SeqCst));
        assert_eq!(
            wq.queue_delayed_on(cpu, &dw, Duration::from_millis(3)),
            Ok(true)
        );
        assert_eq!(
            wq.queue_delayed_on(cpu, &dw, Duration::from_millis(3)),
            Ok(false),
            "already pending"
        );
        dw.flush();
        assert_eq!(
            seen.load(Ordering::SeqCst),
            cpu as i32,
            "bound pool of cpu {cpu}"
        );
    }
    let dw = DelayedWork::new(|| {});
    assert!(
        wq.queue_delayed_on(1 << 20, &dw, Duration::from_millis(1))
            .is_err()
    );
    assert!(!dw.is_pending(), "a refused cpu claims nothing");
}
