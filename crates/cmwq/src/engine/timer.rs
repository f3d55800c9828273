//! Delayed work: one timer thread for the whole process.
//!
//! An armed item owns its PENDING bit (taken by `queue_delayed`), so cancelling
//! it is a matter of removing its entry from `armed`; the heap may keep a stale
//! entry, which the timer thread skips because its sequence number no longer
//! matches. Expiry hands the item to its workqueue with PENDING still held.
//! `deliver` serialises the hand-off with workqueue destruction, which fires
//! every timer of the dying queue at once so nothing it was given is lost.
//!
//! The thread starts with the first `arm`. If it cannot (the process is at
//! its thread limit), `arm` says so and the caller refuses the item, which
//! ends its cycle as a draining queue's refusal does: nothing is left
//! pending, so `flush` and `cancel_sync` return and a later `queue_delayed`
//! arms it, starting the thread then.
//!
//! The thread runs under [`super::service::run`]: a panic of cmwq's code in
//! its loop is said, counted and the loop starts over; each hand-off of a
//! fired item is caught on its own, so one that fails does not lose the
//! items fired with it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::work::WorkInner;
use super::workqueue::WqInner;
use crate::sync::{Condvar, Level, Mutex};

/// An armed item (under `T state`).
struct Armed {
    /// The arming it belongs to (heap entries of older armings are stale).
    seq: u64,
    /// The item; its PENDING bit is held for the timer.
    work: Arc<WorkInner>,
    /// Where it goes when the timer fires.
    wq: Arc<WqInner>,
    /// `queue_on`'s CPU, if any.
    cpu: Option<usize>,
}

/// The timer's lock-protected state: every field is `T state`.
#[derive(Default)]
struct State {
    /// T state: deadlines, with the arming's `seq` and the item's key.
    heap: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    /// T state: armed items by key; the entry that counts.
    armed: HashMap<usize, Armed>,
    /// T state: the last arming's number.
    seq: u64,
}

/// The timer. Lock order: `deliver` before `state`; `deliver` is held while
/// fired items are handed to their workqueues (pool locks), `state` never.
struct Timer {
    /// T state: what is armed.
    state: Mutex<State>,
    /// The timer thread waits on it under `state` for the next deadline.
    cv: Condvar,
    /// T deliver: serialises handing fired items over with destroy's
    /// `fire_all_for`, so a dying queue's items are never handed over late.
    deliver: Mutex<()>,
}

/// O: the timer, made by the first `arm` (its thread may still be missing).
static TIMER: OnceLock<Timer> = OnceLock::new();
/// O: the timer thread runs; set by the `arm` that started it.
static STARTED: OnceLock<()> = OnceLock::new();

/// The timer with its thread running, or why the thread cannot start (the
/// next call tries again).
fn timer() -> std::io::Result<&'static Timer> {
    let t = TIMER.get_or_init(|| Timer {
        state: Mutex::new_at(Level::TState, State::default()),
        cv: Condvar::new(),
        deliver: Mutex::new_at(Level::TDeliver, ()),
    });
    if STARTED.get().is_none() {
        static STARTING: Mutex<()> = Mutex::new_at(Level::TimerStart, ());
        let _g = STARTING.lock();
        if STARTED.get().is_none() {
            if let Err(e) = super::threads::start("cmwq-timer".into(), move || {
                super::service::run("cmwq-timer", || timer_thread(t))
            }) {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    eprintln!(
                        "cmwq: cannot start the timer thread: {}; delayed work is refused \
                         (queue_delayed returns false) until it can start",
                        super::threads::describe(&e)
                    )
                });
                return Err(e);
            }
            let _ = STARTED.set(());
        }
    }
    Ok(t)
}

fn key(w: &Arc<WorkInner>) -> usize {
    super::work::addr(w)
}

/// The longest delay honoured: about 34,800 years. Longer ones (up to
/// `Duration::MAX`) are cut to it, since a deadline past what `Instant` can
/// hold would overflow; the item stays armed and can be cancelled as usual.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(1 << 40);

/// Arms the timer of a claimed item; the error if the timer thread cannot
/// start, with nothing armed (the caller still owns PENDING).
pub(crate) fn arm(
    work: &Arc<WorkInner>,
    wq: &Arc<WqInner>,
    cpu: Option<usize>,
    delay: Duration,
) -> std::io::Result<()> {
    let t = timer()?;
    let now = Instant::now();
    let at = now
        .checked_add(delay.min(MAX_DELAY))
        .unwrap_or(now + Duration::from_secs(1 << 30));
    let mut s = t.state.lock();
    s.seq += 1;
    let seq = s.seq;
    let k = key(work);
    s.armed.insert(
        k,
        Armed {
            seq,
            work: work.clone(),
            wq: wq.clone(),
            cpu,
        },
    );
    s.heap.push(Reverse((at, seq, k)));
    drop(s);
    t.cv.notify_one();
    Ok(())
}

/// Disarms `work` if its timer is armed; the cycle ends as cancelled.
pub(crate) fn steal(work: &Arc<WorkInner>) -> bool {
    let Some(t) = TIMER.get() else { return false };
    let mut s = t.state.lock();
    if s.armed.remove(&key(work)).is_none() {
        return false;
    }
    work.clear_pending();
    drop(s);
    work.finish_cycle();
    true
}

/// If `work`'s timer is armed, queues it now.
/// Returns whether it was armed.
pub(crate) fn fire_now(work: &Arc<WorkInner>) -> bool {
    let Some(t) = TIMER.get() else { return false };
    let _d = t.deliver.lock();
    let a = t.state.lock().armed.remove(&key(work));
    match a {
        Some(a) => {
            let _ = a.wq.queue_claimed(a.work, a.cpu, true);
            true
        }
        None => false,
    }
}

/// Queues every armed item of `wq` now (workqueue destruction); returns how many.
pub(crate) fn fire_all_for(wq: &Arc<WqInner>) -> usize {
    let Some(t) = TIMER.get() else { return 0 };
    let _d = t.deliver.lock();
    let mut s = t.state.lock();
    let keys: Vec<usize> = s
        .armed
        .iter()
        .filter(|(_, a)| Arc::ptr_eq(&a.wq, wq))
        .map(|(k, _)| *k)
        .collect();
    let fired: Vec<Armed> = keys.iter().filter_map(|k| s.armed.remove(k)).collect();
    drop(s);
    let n = fired.len();
    for a in fired {
        let _ = a.wq.queue_claimed(a.work, a.cpu, true);
    }
    n
}

fn timer_thread(t: &'static Timer) {
    let mut fired = Vec::new();
    loop {
        let d = t.deliver.lock();
        super::service::injected(super::service::AT_TIMER_LOOP, "the timer's loop panics");
        let mut s = t.state.lock();
        let now = Instant::now();
        while let Some(Reverse((at, seq, k))) = s.heap.peek().copied() {
            if at > now {
                break;
            }
            s.heap.pop();
            if s.armed.get(&k).is_some_and(|a| a.seq == seq) {
                fired.extend(s.armed.remove(&k));
            }
        }
        if fired.is_empty() {
            drop(d);
            let wait = s
                .heap
                .peek()
                .map(|Reverse((at, _, _))| at.saturating_duration_since(now));
            let _s = match wait {
                Some(w) => t.cv.wait_timeout(s, w),
                None => t.cv.wait(s),
            };
            continue;
        }
        drop(s);
        for a in fired.drain(..) {
            hand_off(a);
        }
        drop(d);
    }
}

/// Hands one fired item to its workqueue (under `T deliver`). A panic there
/// is cmwq's bug: it is caught and said, with the item named, and the timer
/// goes on with the other items it fired.
fn hand_off(a: Armed) {
    let (label, name) = (a.work.func.label(), a.wq.name.clone());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::service::injected(
            super::service::AT_TIMER_HANDOFF,
            "the timer's hand-off of a fired item panics",
        );
        let _ = a.wq.queue_claimed(a.work, a.cpu, true);
    }));
    if let Err(p) = r {
        super::service::caught(
            &format!(
                "handing the delayed item {} to workqueue {name:?}",
                label.text()
            ),
            &*p,
            "the timer goes on with the other items; that one may be left pending \
             (never run, and a cancel of it may not return)",
        );
    }
}
