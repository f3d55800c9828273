//! Steady-state `queue` allocates nothing: a counting global allocator counts
//! the allocations made on the calling thread while it is inside `queue()`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cmwq::{Work, Workqueue};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

fn note() {
    // try_with: the thread-local may be gone while a thread exits.
    if COUNTING.try_with(|c| c.get()).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The two tests share the counter: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Calls `f` with allocation counting on for this thread; returns the count.
fn counted(f: impl FnOnce() -> bool) -> (bool, usize) {
    let before = ALLOCS.load(Ordering::SeqCst);
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, ALLOCS.load(Ordering::SeqCst) - before)
}

fn check(wq: &Workqueue, queue: impl Fn(&Work) -> bool) {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let works: Vec<Work> = (0..4).map(|_| Work::new(|| {})).collect();
    // Warm-up (1000 cycles, the same pattern): pools, workers, lists reach
    // their steady size. Then 10 000 counted cycles.
    let mut allocs = 0;
    for i in 0..11_000 {
        let w = &works[i % works.len()];
        let (ok, n) = counted(|| queue(w));
        assert!(ok);
        if i >= 1000 {
            allocs += n;
        }
        if i % 2 == 1 {
            // Two in flight at a time, then wait for both.
            works[(i - 1) % works.len()].flush();
            w.flush();
        }
    }
    wq.flush();
    // The counter itself works (a control on this thread).
    let (_, ctl) = counted(|| std::hint::black_box(Box::new(1u8)) != Box::new(2u8));
    assert!(ctl >= 1, "the counting allocator counts");
    assert_eq!(
        allocs,
        0,
        "{}: queue() allocated {allocs} times in 10 000 steady-state cycles",
        wq.name()
    );
}

#[test]
fn queue_allocates_nothing_bound() {
    let wq = Workqueue::builder("alloc-bound").build().unwrap();
    check(&wq, |w| wq.queue(w));
    check(&wq, |w| wq.queue_on(1, w).unwrap());
}

#[test]
fn queue_allocates_nothing_unbound() {
    let wq = Workqueue::builder("alloc-unbound")
        .unbound()
        .build()
        .unwrap();
    check(&wq, |w| wq.queue(w));
    let limited = Workqueue::builder("alloc-unbound-limited")
        .unbound()
        .max_active(1)
        .build()
        .unwrap();
    check(&limited, |w| limited.queue(w));
}
