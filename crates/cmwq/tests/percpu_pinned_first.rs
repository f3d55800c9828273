//! The process's topology (and so the drain workqueue of `PerCpu`'s Local
//! mode) must not depend on which thread builds the first workqueue: a pinned
//! thread that comes first must not make other CPUs look unusable.
//!
//! Its own test binary: the process topology is computed once.

mod common;

use cmwq::percpu::{Mode, PerCpu};

#[test]
fn a_pinned_first_user_does_not_narrow_the_process_topology() {
    let cpus = cmwq::topology::sched_affinity().unwrap();
    if cpus.len() < 2 {
        eprintln!("skipped: one CPU available");
        return;
    }
    let (first, other) = (cpus[0], cpus[1]);
    let pc = std::thread::spawn(move || {
        common::set_affinity(&[first]).unwrap();
        PerCpu::new(Mode::Local, |_| 0u64).unwrap()
    })
    .join()
    .unwrap();
    // From the (unpinned) main thread: a drain of the other CPU runs there,
    // as a work item on its bound pool, not on the caller.
    let ran_on = pc.drain_on(other, |_| common::current_cpu()).unwrap();
    let st = pc.stats();
    assert_eq!((st.queued, st.on_caller), (1, 0), "{st:?}");
    assert_eq!(ran_on, other);
}
