//! What the mix's jobs do: burn CPU for a set time, or block in one of three ways.

use std::collections::BinaryHeap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::bench::sys::thread_cpu_now;

/// How a blocking job blocks (`--block-kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockKind {
    /// `std::thread::sleep(B)`.
    Sleep,
    /// Takes a mutex a helper thread holds `B` at a time (waits 0 to `B`).
    Mutex,
    /// Reads a byte a timer thread writes into a fresh pipe `B` later.
    Pipe,
}

impl BlockKind {
    /// Every kind, in the order `--help` lists them.
    pub const ALL: [BlockKind; 3] = [BlockKind::Sleep, BlockKind::Mutex, BlockKind::Pipe];

    /// The name `--block-kind` takes.
    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Sleep => "sleep",
            BlockKind::Mutex => "mutex",
            BlockKind::Pipe => "pipe",
        }
    }
}

impl std::str::FromStr for BlockKind {
    type Err = String;
    fn from_str(s: &str) -> Result<BlockKind, String> {
        BlockKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("--block-kind '{s}': expected sleep, mutex or pipe"))
    }
}

/// Loop iterations of [`spin`] per microsecond of thread CPU time on this
/// machine, measured once per process.
fn iters_per_us() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        // The median of five 2 ms measurements, each timed on the thread's
        // own CPU clock, so preemption during one does not skew it.
        let mut rates: Vec<f64> = (0..5)
            .map(|_| {
                let mut n = 1u64 << 12;
                loop {
                    let t0 = thread_cpu_now();
                    spin(n);
                    let used = thread_cpu_now().saturating_sub(t0);
                    if used >= Duration::from_millis(2) || n >= 1 << 40 {
                        break n as f64 / (used.as_nanos().max(1) as f64 / 1e3);
                    }
                    n *= 2;
                }
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    })
}

/// `n` rounds of a multiply-add the optimizer cannot remove.
fn spin(n: u64) {
    let mut x = 1u64;
    for _ in 0..n {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// Burns about `us` µs of the calling thread's CPU time.
#[derive(Clone, Copy, Debug)]
pub struct Burn {
    iters: u64,
}

impl Burn {
    /// A burn of `us` µs (calibrates the loop on the first call in the process).
    pub fn new(us: u64) -> Burn {
        Burn {
            iters: (iters_per_us() * us as f64).round() as u64,
        }
    }

    /// Burn.
    pub fn run(&self) {
        spin(self.iters);
    }
}

/// A byte due into a pipe: (when, the writer), earliest first in the heap.
struct Due(Instant, std::io::PipeWriter);

impl PartialEq for Due {
    fn eq(&self, o: &Due) -> bool {
        self.0 == o.0
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, o: &Due) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Due {
    fn cmp(&self, o: &Due) -> std::cmp::Ordering {
        // Reversed: BinaryHeap is a max-heap, the earliest must come first.
        o.0.cmp(&self.0)
    }
}

/// What a run's blocking jobs block on, with its helper thread if the kind
/// has one. Dropping it stops and joins the helper.
pub struct Blocker {
    kind: BlockKind,
    block: Duration,
    /// `mutex`: the lock the helper holds.
    lock: Arc<Mutex<()>>,
    /// `pipe`: where jobs ask the timer for a byte.
    timer: Option<mpsc::Sender<Due>>,
    stop: Arc<AtomicBool>,
    helper: Option<JoinHandle<()>>,
    /// Blocks that fell back to a sleep because their pipe could not be made.
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

/// How long the `mutex` helper lets go of the lock between two holds.
const MUTEX_GAP: Duration = Duration::from_micros(20);

impl Blocker {
    /// The blocker of one run: `kind`, for `block` per blocking job. Starts
    /// the helper thread of `mutex` and `pipe` (one more thread in the process).
    pub fn start(kind: BlockKind, block: Duration) -> Result<Blocker, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let lock = Arc::new(Mutex::new(()));
        let (timer, helper) = match kind {
            BlockKind::Sleep => (None, None),
            BlockKind::Mutex => {
                let (l, s) = (lock.clone(), stop.clone());
                let h = thread::Builder::new()
                    .name("mix/lock".into())
                    .spawn(move || {
                        while !s.load(Ordering::Acquire) {
                            let g = l.lock().unwrap_or_else(|e| e.into_inner());
                            thread::sleep(block);
                            drop(g);
                            thread::sleep(MUTEX_GAP);
                        }
                    })
                    .map_err(|e| format!("starting the mutex holder thread: {e}"))?;
                (None, Some(h))
            }
            BlockKind::Pipe => {
                let (tx, rx) = mpsc::channel::<Due>();
                let h = thread::Builder::new()
                    .name("mix/timer".into())
                    .spawn(move || pipe_timer(rx))
                    .map_err(|e| format!("starting the pipe timer thread: {e}"))?;
                (Some(tx), Some(h))
            }
        };
        Ok(Blocker {
            kind,
            block,
            lock,
            timer,
            stop,
            helper,
            failed: AtomicU64::new(0),
            first_error: Mutex::new(None),
        })
    }

    /// Threads this blocker started (its helper).
    pub fn threads(&self) -> usize {
        usize::from(self.helper.is_some())
    }

    /// Block the calling thread, the run's way.
    pub fn block(&self) {
        match self.kind {
            BlockKind::Sleep => thread::sleep(self.block),
            BlockKind::Mutex => drop(self.lock.lock().unwrap_or_else(|e| e.into_inner())),
            BlockKind::Pipe => {
                if let Err(e) = self.pipe_read() {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    let mut f = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
                    f.get_or_insert(e);
                    drop(f);
                    thread::sleep(self.block);
                }
            }
        }
    }

    fn pipe_read(&self) -> Result<(), String> {
        let (mut r, w) = std::io::pipe().map_err(|e| format!("pipe(): {e}"))?;
        let due = Due(Instant::now() + self.block, w);
        self.timer
            .as_ref()
            .ok_or("no pipe timer")?
            .send(due)
            .map_err(|_| "the pipe timer thread is gone".to_string())?;
        let mut b = [0u8; 1];
        r.read_exact(&mut b)
            .map_err(|e| format!("reading the pipe: {e}"))
    }

    /// Blocks that could not block the run's way (and slept instead), with
    /// the first reason; `None` when every block went as asked.
    pub fn failures(&self) -> Option<(u64, String)> {
        let n = self.failed.load(Ordering::Relaxed);
        (n > 0).then(|| {
            let e = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
            (n, e.clone().unwrap_or_default())
        })
    }
}

/// The `pipe` timer: writes one byte into each pipe when it is due, earliest
/// first; returns once the blocker is dropped and nothing is due.
fn pipe_timer(rx: mpsc::Receiver<Due>) {
    let mut heap = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while heap.peek().is_some_and(|d: &Due| d.0 <= now) {
            if let Some(Due(_, mut w)) = heap.pop() {
                // A reader that went away (its job unwound) needs no byte.
                let _ = w.write_all(&[1]);
            }
        }
        let next = match heap.peek() {
            Some(d) => rx.recv_timeout(d.0.saturating_duration_since(now)),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(d) => heap.push(d),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) if heap.is_empty() => return,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(d) = heap.peek() {
                    thread::sleep(d.0.saturating_duration_since(Instant::now()));
                }
            }
        }
    }
}

impl Drop for Blocker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.timer = None;
        if let Some(h) = self.helper.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_by_name() {
        for k in BlockKind::ALL {
            assert_eq!(k.name().parse::<BlockKind>(), Ok(k));
        }
        let e = "futex".parse::<BlockKind>().unwrap_err();
        assert!(e.contains("'futex'"), "{e}");
    }

    #[test]
    fn a_burn_uses_cpu_time_in_proportion() {
        let t0 = thread_cpu_now();
        let b = Burn::new(2000);
        for _ in 0..5 {
            b.run();
        }
        // 10 ms asked: at least a millisecond of this thread's CPU time went
        // (a bound loose enough for any machine; zero iterations would fail it).
        assert!(thread_cpu_now() - t0 >= Duration::from_millis(1));
        assert!(Burn::new(1000).iters > Burn::new(10).iters);
    }

    /// Sleep and pipe block the calling thread for the block time (it
    /// sleeps: not runnable); the mutex's helper holds the lock; the helper
    /// threads stop when the blocker is dropped.
    #[test]
    fn every_kind_blocks_and_its_helper_stops() {
        for k in BlockKind::ALL {
            let b = Blocker::start(k, Duration::from_millis(5)).unwrap();
            assert_eq!(b.threads(), usize::from(k != BlockKind::Sleep));
            if k == BlockKind::Mutex {
                // The lock is free only for moments between two holds.
                let t0 = Instant::now();
                while b.lock.try_lock().is_ok() {
                    assert!(t0.elapsed() < Duration::from_secs(30), "never held");
                    thread::sleep(Duration::from_micros(100));
                }
            }
            let c0 = thread_cpu_now();
            let t0 = Instant::now();
            for _ in 0..4 {
                b.block();
            }
            if k != BlockKind::Mutex {
                // Each waited out its 5 ms, sleeping: far less CPU than wall.
                assert!(t0.elapsed() >= Duration::from_millis(20), "{k:?}");
                assert!(thread_cpu_now() - c0 < t0.elapsed(), "{k:?}");
            }
            assert_eq!(b.failures(), None, "{k:?}");
            drop(b);
        }
    }
}
