//! The engine's own service threads go on through a panic of cmwq's code.
//!
//! The timer, the watchdog, the thread that recomputes the pods and every
//! rescuer are one thread each for the whole process (a rescuer: for its
//! workqueue). None of them runs a user's callback outside a `catch_unwind`
//! of its own, so a panic that reaches one of their loops is a bug in cmwq:
//! a failed debug check (the lock order), an `expect` on a state that
//! should not happen. Before this module such a thread simply died, and
//! what it stood for died with it, silently: a dead timer holds the PENDING
//! bits of the items it had fired and fires nothing again (the next
//! `cancel` of one of them spins for ever), a dead watchdog never reports a
//! stuck pool nor follows the CPUs, a dead pods thread leaves its claim set
//! so no later CPU change is applied, a dead rescuer leaves its
//! `MEM_RECLAIM` queue without one.
//!
//! [`run`] keeps such a thread's body going: a panic is caught, said on
//! stderr with the thread's name and the panic's text (a body that keeps
//! panicking waits longer between tries, 10 ms doubling to one second),
//! counted in [`engine_thread_panics`] (and in `cmwq dump` and the
//! OpenMetrics exposition), and the body starts over on the same thread, so whoever
//! holds its handle (`unpark`) still reaches it. The body's state lives in
//! statics and under locks, which ignore poisoning, so starting over is the
//! body's normal loop. The timer also catches each hand-off of a fired item
//! on its own ([`caught`]): one item whose hand-off fails does not take the
//! others with it.
//!
//! What a restart cannot give back is said in the message: the item whose
//! hand-off panicked may be left pending (whether it reached its queue is
//! unknown). The counter exists so that tests and monitors can insist on
//! zero; the soak tests do.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A: panics of the engine's own threads caught so far. `Relaxed`: a counter.
static PANICS: AtomicU64 = AtomicU64::new(0);

/// How many panics of cmwq's own code the engine's service threads (the
/// timer, the watchdog, the pods thread, the rescuers) have caught and gone
/// on from since the process started. Each is a bug in cmwq, said on stderr
/// when it happens; a healthy process stays at 0.
///
/// ```
/// assert_eq!(cmwq::engine_thread_panics(), 0);
/// ```
pub fn engine_thread_panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// The text of a panic's payload, or words that say it is not text.
fn payload_text(p: &(dyn Any + Send)) -> &str {
    crate::trace::payload_str(p).unwrap_or("a non-string payload")
}

/// Counts a caught panic of the engine's code and says it on stderr: `what`
/// names where it happened, `after` what happens now.
///
/// Written with `writeln!`, its error ignored: `eprintln!` panics on a
/// closed stderr, which would take the thread down from its own report.
pub(crate) fn caught(what: &str, payload: &(dyn Any + Send), after: &str) {
    use std::io::Write as _;
    let n = PANICS.fetch_add(1, Ordering::Relaxed) + 1;
    let _ = writeln!(
        std::io::stderr(),
        "cmwq: {what} panicked: {} (a bug in cmwq, please report it; engine panics so far: {n}); {after}",
        payload_text(payload)
    );
}

/// Runs `body` on this thread until it returns; a panic is caught, counted
/// and said ([`caught`]), and `body` starts over after a pause (10 ms,
/// doubling up to one second while it keeps panicking within a second of
/// its start).
pub(crate) fn run(name: &str, body: impl Fn()) {
    let mut pause = Duration::from_millis(10);
    loop {
        let started = std::time::Instant::now();
        match catch_unwind(AssertUnwindSafe(&body)) {
            Ok(()) => return,
            Err(p) => {
                caught(&format!("the {name} thread"), &*p, "the thread starts over");
                if started.elapsed() > Duration::from_secs(1) {
                    pause = Duration::from_millis(10);
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Where the test hook [`debug_inject_panic`] makes the engine panic.
#[cfg(feature = "failure-injection")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InjectedPanic {
    /// The timer's next hand-off of a fired item, before it reaches its
    /// queue (the item is left pending).
    TimerHandoff,
    /// The timer thread's loop, at its next wakeup, outside any hand-off.
    TimerLoop,
    /// The watchdog's next tick, before its sweep.
    WatchdogTick,
    /// The pods thread's next round, before it re-applies any workqueue's
    /// attributes (it runs when the usable CPUs change).
    PodsRound,
    /// A rescuer's loop, at its next turn (before it takes a mayday).
    RescuerLoop,
}

/// A: the armed [`InjectedPanic`]s, one bit each. `Relaxed`: test settings.
static INJECT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Test hook: the engine panics once at `at` (as a bug of cmwq's would),
/// and its service thread must go on. Only with the `failure-injection`
/// feature, for tests and the lab.
#[cfg(feature = "failure-injection")]
pub fn debug_inject_panic(at: InjectedPanic) {
    let bit = match at {
        InjectedPanic::TimerHandoff => AT_TIMER_HANDOFF,
        InjectedPanic::TimerLoop => AT_TIMER_LOOP,
        InjectedPanic::WatchdogTick => AT_WATCHDOG_TICK,
        InjectedPanic::PodsRound => AT_PODS_ROUND,
        InjectedPanic::RescuerLoop => AT_RESCUER_LOOP,
    };
    INJECT.fetch_or(bit, Ordering::Relaxed);
}

/// Panics if the test hook armed `bit` (taking it back); nothing without the
/// `failure-injection` feature.
#[inline]
pub(crate) fn injected(bit: u8, what: &str) {
    if cfg!(feature = "failure-injection")
        && INJECT.load(Ordering::Relaxed) & bit != 0
        && INJECT.fetch_and(!bit, Ordering::Relaxed) & bit != 0
    {
        panic!("cmwq: test hook: {what}");
    }
}

/// The bits [`injected`] takes.
pub(crate) const AT_TIMER_HANDOFF: u8 = 1;
/// See [`AT_TIMER_HANDOFF`].
pub(crate) const AT_TIMER_LOOP: u8 = 2;
/// See [`AT_TIMER_HANDOFF`].
pub(crate) const AT_WATCHDOG_TICK: u8 = 4;
/// See [`AT_TIMER_HANDOFF`].
pub(crate) const AT_PODS_ROUND: u8 = 8;
/// See [`AT_TIMER_HANDOFF`].
pub(crate) const AT_RESCUER_LOOP: u8 = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_panicking_body_starts_over_and_is_counted() {
        let before = engine_thread_panics();
        let calls = AtomicUsize::new(0);
        run("test", || {
            if calls.fetch_add(1, Ordering::Relaxed) < 2 {
                panic!("twice");
            }
        });
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        assert!(engine_thread_panics() >= before + 2);
    }

    #[test]
    fn payload_text_reads_both_string_kinds() {
        let a: Box<dyn Any + Send> = Box::new("static");
        let b: Box<dyn Any + Send> = Box::new(String::from("owned"));
        let c: Box<dyn Any + Send> = Box::new(7u8);
        assert_eq!(payload_text(&*a), "static");
        assert_eq!(payload_text(&*b), "owned");
        assert_eq!(payload_text(&*c), "a non-string payload");
    }
}
