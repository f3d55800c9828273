//! A seeded, randomized stress of the public front door: `spawn`, `spawn_on`,
//! `execute`, `execute_on`, `JoinHandle` (`join`, `cancel`, `is_finished`,
//! `.await`), `Work` (`queue`, `cancel`, `cancel_sync`, `disable`/`enable`,
//! `flush`) and `Workqueue` (`flush`, `drain`, destroy on drop), all at once
//! from several producer threads on four queues of different kinds: unbound,
//! ordered, unbound `max_active(2)` and bound. Jobs return a value derived
//! from their id; some spin, some block briefly inside `cmwq::blocking`, a
//! few panic on purpose, and some spawn a child job on the unbound queue and
//! join, cancel or detach it from the worker.
//!
//! What it proves, once every queue is flushed and destroyed:
//!
//! - every closure handed to `spawn` or `execute` either ran exactly once or
//!   was dropped unrun exactly once, and dropped unrun only when its handle's
//!   `cancel` returned true (then `join` gives `Cancelled`), or when a drain of
//!   its queue overlapped the call (then `join` gives `Refused`, or `execute`
//!   returned false);
//! - every joined or awaited handle gave the value its job computed, or the
//!   job's own panic message for a job that panics on purpose;
//! - every panic of an executed job reached its queue's panic handler exactly
//!   once, and nothing else did;
//! - on the ordered queue, the jobs one producer gave it ran in the order it
//!   gave them, one at a time;
//! - the `max_active(2)` queue never ran more than its budget at once (2 on
//!   one NUMA node; the sum of the per-node shares on several, each at
//!   least `min_active`, as in the kernel);
//! - for every `Work`: runs == successful `queue` calls - successful cancels
//!   (a re-queue from inside its own callback counts), and it never ran on
//!   two workers at once;
//! - nothing hangs: the test body runs on its own thread, and the test fails
//!   with its seed if it has not finished after [`HANG_LIMIT`].
//!
//! The seed fixes each producer's sequence of operations, not the schedule;
//! set `CMWQ_FUZZ_SEED` (decimal or `0x` hex) to rerun a failing seed.

mod common;

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, Once, OnceLock, RwLock, Weak, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use cmwq::{JoinError, JoinHandle, Work, Workqueue};
use common::{Rng, block_on};

/// How long the main test thread waits for the body before it calls it a hang.
const HANG_LIMIT: Duration = Duration::from_secs(120);

/// Every panic raised on purpose starts with this, so the quiet hook can
/// tell it from a real failure.
const PANIC_TAG: &str = "fuzz-intentional";

/// The queues, by index.
const UNBOUND: usize = 0;
const ORDERED: usize = 1;
const MAX2: usize = 2;
const BOUND: usize = 3;
const NQ: usize = 4;
const QUEUE_NAMES: [&str; NQ] = ["unbound", "ordered", "max2", "bound"];

/// `Work` items per queue (each item belongs to one queue for its life).
const WORKS_PER_QUEUE: usize = 2;
/// Times each `Work` may queue itself again from inside its callback.
const SELF_REQUEUES: usize = 150;
/// Failures kept for the report (more are only counted).
const MAX_FAILURES_KEPT: usize = 40;

// ---------------------------------------------------------------------------
// Randomness and seeds
// ---------------------------------------------------------------------------

/// The generator of a producer: seeded from the test's seed, spread first
/// so seeds that differ in one bit start apart, and never zero.
fn rng_for(seed: u64) -> Rng {
    Rng(mix64(seed) | 1)
}

/// A 64-bit finalizer (splitmix64's): a bijection that mixes every bit.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The test's seed: `CMWQ_FUZZ_SEED` when set, else the test's own constant.
fn seed_for(default: u64) -> u64 {
    let Ok(v) = std::env::var("CMWQ_FUZZ_SEED") else {
        return default;
    };
    let v = v.trim();
    let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => v.replace('_', "").parse(),
    };
    parsed.unwrap_or_else(|e| panic!("CMWQ_FUZZ_SEED={v:?} is not a number: {e}"))
}

/// The value job `id` computes (and its handle must give back).
fn expected_value(seed: u64, id: usize) -> u64 {
    mix64(seed ^ (id as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// The message job `id` panics with, when it panics on purpose.
fn panic_message_of(id: usize) -> String {
    format!("{PANIC_TAG} job {id}")
}

// ---------------------------------------------------------------------------
// Small helpers: a quiet panic hook, a panic's text, a one-future executor
// ---------------------------------------------------------------------------

fn payload_text(p: &(dyn Any + Send)) -> Option<&str> {
    p.downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| p.downcast_ref::<&str>().copied())
}

/// Keeps the default hook from printing a line for each panic raised on
/// purpose (there are hundreds); every other panic is printed as usual.
fn quiet_intentional_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if payload_text(info.payload()).is_some_and(|m| m.starts_with(PANIC_TAG)) {
                return;
            }
            previous(info);
        }));
    });
}

// ---------------------------------------------------------------------------
// The test's configuration
// ---------------------------------------------------------------------------

/// A drain one producer runs at one point of its operations.
#[derive(Clone, Copy)]
struct DrainAt {
    producer: usize,
    op: usize,
    queue: usize,
}

/// One test's mix: how many producers and operations, and how often each
/// kind of operation and job comes up (weights are relative).
#[derive(Clone, Copy)]
struct Mix {
    producers: usize,
    ops: usize,
    /// Weights of the producers' operations.
    spawn: usize,
    execute: usize,
    work_queue: usize,
    work_cancel: usize,
    work_cancel_sync: usize,
    work_disable: usize,
    work_flush: usize,
    queue_flush: usize,
    resolve_later: usize,
    /// Percent of jobs that block briefly inside `cmwq::blocking`.
    sleep_pct: usize,
    /// Percent of jobs that spin a little.
    spin_pct: usize,
    /// Percent of jobs that panic on purpose.
    panic_pct: usize,
    /// Percent of jobs (not on the unbound queue) that spawn a child job on
    /// the unbound queue, and join, cancel or detach it.
    child_pct: usize,
    /// Percent of spawns and executes aimed at one CPU (`spawn_on`, `execute_on`).
    on_cpu_pct: usize,
    /// The unbound queue binds its workers to their pod.
    strict: bool,
    drains: &'static [DrainAt],
}

// ---------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------

/// How a job came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    Spawn,
    Execute,
    /// Spawned on the unbound queue by another job.
    Child,
}

/// What a job does when it runs.
#[derive(Clone, Copy, Debug)]
enum Flavor {
    Plain,
    Spin(u32),
    /// Sleeps this many microseconds inside `cmwq::blocking`.
    Sleep(u32),
    Panic,
    /// Spawns a child job on the unbound queue.
    Child,
}

#[derive(Clone, Copy, Debug)]
struct JobSpec {
    queue: usize,
    flavor: Flavor,
    /// On the ordered queue: the producer and its sequence number.
    order: Option<(usize, u64)>,
}

/// What is known about a job once its creator has let go of it.
const FATE_UNSET: u8 = 0;
/// Joined or awaited: it gave a value or its panic.
const FATE_JOINED: u8 = 1;
/// `cancel` returned true and `join` gave `Cancelled`.
const FATE_CANCELLED: u8 = 2;
/// `join` gave `Refused`.
const FATE_REFUSED: u8 = 3;
/// The handle was dropped.
const FATE_DETACHED: u8 = 4;
/// `execute` returned true.
const FATE_EXEC_ACCEPTED: u8 = 5;
/// `execute` returned false.
const FATE_EXEC_REFUSED: u8 = 6;

#[derive(Clone, Copy, Debug)]
struct Meta {
    queue: usize,
    how: How,
    panics: bool,
}

/// One job's counters, indexed by its id.
#[derive(Default)]
struct JobRec {
    meta: OnceLock<Meta>,
    /// Times the closure ran.
    runs: AtomicU32,
    /// Times the closure was dropped without running.
    unrun: AtomicU32,
    /// Times the queue's panic handler saw this job's panic.
    reported: AtomicU32,
    /// A drain of the job's queue overlapped the spawn or execute call, so a
    /// refusal is allowed.
    may_refuse: AtomicBool,
    fate: AtomicU8,
}

/// One `Work` item's counters.
#[derive(Default)]
struct WorkRec {
    /// `queue` calls that returned true (the callback's own re-queues too).
    trues: AtomicUsize,
    /// `cancel`, `cancel_sync` and `disable` calls that returned true.
    cancels: AtomicUsize,
    runs: AtomicUsize,
    /// Set while the callback runs.
    busy: AtomicBool,
    /// Times the callback found `busy` already set.
    overlaps: AtomicUsize,
    requeues_left: AtomicUsize,
}

/// One queue's counters.
struct QueueState {
    /// Items of this queue running now, and the most seen at once.
    running: AtomicUsize,
    peak: AtomicUsize,
    /// How many may run at once (`usize::MAX`: not checked).
    limit: AtomicUsize,
    drains_begun: AtomicUsize,
    drains_ended: AtomicUsize,
    /// Panics the queue's handler received.
    handler_calls: AtomicUsize,
}

impl QueueState {
    fn new() -> QueueState {
        QueueState {
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            limit: AtomicUsize::new(usize::MAX),
            drains_begun: AtomicUsize::new(0),
            drains_ended: AtomicUsize::new(0),
            handler_calls: AtomicUsize::new(0),
        }
    }
}

/// Marks one item of a queue running while it lives.
struct Running<'a>(&'a QueueState);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where the body is, for a hang report.
const PHASES: [&str; 6] = [
    "starting",
    "producers running",
    "flushing queues",
    "dropping queues",
    "checking",
    "done",
];

/// Everything the producers, the jobs and the checks share.
struct Shared {
    name: &'static str,
    seed: u64,
    mix: Mix,
    /// The queues, by index; taken out (and dropped) at the end. Jobs and
    /// callbacks reach them here rather than through clones of their own,
    /// so the body's drop is the last handle and destroys each queue.
    queues: RwLock<Option<Vec<Workqueue>>>,
    /// The `Work` items (item `i` belongs to queue `i / WORKS_PER_QUEUE`);
    /// emptied at the end, which breaks the cycle through their callbacks.
    works: RwLock<Vec<Work>>,
    wrecs: Vec<WorkRec>,
    qs: Vec<QueueState>,
    jobs: Vec<JobRec>,
    next_id: AtomicUsize,
    /// Per producer: the sequence number of its last job that ran on the
    /// ordered queue.
    ordered_last: Vec<AtomicU64>,
    /// CPUs this process may run on (for `spawn_on`, `execute_on`, `queue_on`).
    cpus: Vec<usize>,
    failures: Mutex<Vec<String>>,
    nr_failures: AtomicUsize,
    /// Per producer: the operation it is at.
    progress: Vec<AtomicUsize>,
    phase: AtomicUsize,
}

impl Shared {
    fn new(name: &'static str, seed: u64, mix: Mix) -> Arc<Shared> {
        // A producer makes at most one job per operation (and one more per
        // drain it runs), and each job at most one child.
        let cap = mix.producers * mix.ops * 2 + 64;
        let s = Arc::new(Shared {
            name,
            seed,
            mix,
            queues: RwLock::new(None),
            works: RwLock::new(Vec::new()),
            wrecs: (0..NQ * WORKS_PER_QUEUE)
                .map(|_| WorkRec::default())
                .collect(),
            qs: (0..NQ).map(|_| QueueState::new()).collect(),
            jobs: (0..cap).map(|_| JobRec::default()).collect(),
            next_id: AtomicUsize::new(0),
            ordered_last: (0..mix.producers).map(|_| AtomicU64::new(0)).collect(),
            cpus: cmwq::topology::sched_affinity().expect("the process's CPUs"),
            failures: Mutex::new(Vec::new()),
            nr_failures: AtomicUsize::new(0),
            progress: (0..mix.producers).map(|_| AtomicUsize::new(0)).collect(),
            phase: AtomicUsize::new(0),
        });
        let queues: Vec<Workqueue> = (0..NQ).map(|q| build_queue(&s, q)).collect();
        let max2_budget: usize = queues[MAX2].node_max_active().iter().sum();
        s.qs[MAX2].limit.store(max2_budget, Ordering::SeqCst);
        s.qs[ORDERED].limit.store(1, Ordering::SeqCst);
        *s.queues.write().unwrap() = Some(queues);
        let works: Vec<Work> = (0..NQ * WORKS_PER_QUEUE)
            .map(|i| {
                s.wrecs[i]
                    .requeues_left
                    .store(SELF_REQUEUES, Ordering::SeqCst);
                let s2 = s.clone();
                Work::new(move || work_callback(&s2, i))
            })
            .collect();
        *s.works.write().unwrap() = works;
        s
    }

    /// Records a broken invariant; the body reports them all at the end.
    fn fail(&self, msg: String) {
        if self.nr_failures.fetch_add(1, Ordering::SeqCst) < MAX_FAILURES_KEPT {
            self.failures.lock().unwrap().push(msg);
        }
    }

    /// A fresh job id with its description.
    fn alloc(&self, meta: Meta) -> usize {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        assert!(id < self.jobs.len(), "job table full: the test's sizing");
        self.jobs[id].meta.set(meta).expect("ids are unique");
        id
    }

    fn enter(&self, q: usize, what: &str) -> Running<'_> {
        let st = &self.qs[q];
        let n = st.running.fetch_add(1, Ordering::SeqCst) + 1;
        st.peak.fetch_max(n, Ordering::SeqCst);
        let limit = st.limit.load(Ordering::SeqCst);
        if n > limit {
            self.fail(format!(
                "{} queue: {n} items running at once (limit {limit}), seen by {what}",
                QUEUE_NAMES[q]
            ));
        }
        Running(st)
    }

    /// Reads the drain counter before a spawn or execute on `q`.
    fn drains_ended(&self, q: usize) -> usize {
        self.qs[q].drains_ended.load(Ordering::SeqCst)
    }

    /// After the call: did a drain of `q` overlap it? The fence pairs with
    /// the one in [`Producer::drain`]: a call that saw the queue draining
    /// (the library reads that flag relaxed) then sees the drain counted.
    fn drain_overlapped(&self, q: usize, ended_before: usize) -> bool {
        fence(Ordering::SeqCst);
        self.qs[q].drains_begun.load(Ordering::SeqCst) > ended_before
    }

    /// The queue's panic handler: every panic must be one of an executed job
    /// of this queue that panics on purpose.
    fn on_handler_panic(&self, q: usize, payload: Box<dyn Any + Send>) {
        self.qs[q].handler_calls.fetch_add(1, Ordering::SeqCst);
        let text = payload_text(&*payload).map(str::to_owned);
        let id = text
            .as_deref()
            .and_then(|t| t.strip_prefix(PANIC_TAG))
            .and_then(|t| t.strip_prefix(" job "))
            .and_then(|t| t.parse::<usize>().ok());
        let Some(id) = id.filter(|&id| id < self.jobs.len()) else {
            self.fail(format!(
                "{} queue's panic handler got an unexpected panic: {text:?}",
                QUEUE_NAMES[q]
            ));
            return;
        };
        let meta = self.jobs[id].meta.get().copied();
        match meta {
            Some(m) if m.how == How::Execute && m.queue == q && m.panics => {
                self.jobs[id].reported.fetch_add(1, Ordering::SeqCst);
            }
            _ => self.fail(format!(
                "{} queue's panic handler got job {id}'s panic, which is not an executed \
                 panicking job of this queue ({meta:?})",
                QUEUE_NAMES[q]
            )),
        }
    }

    /// Checks what a handle gave for job `id`; `cancelled`: its `cancel`
    /// returned true just before.
    fn check_outcome(&self, id: usize, r: Result<u64, JoinError>, cancelled: bool) {
        let rec = &self.jobs[id];
        let meta = *rec.meta.get().expect("a job has its meta");
        let runs = rec.runs.load(Ordering::SeqCst);
        let unrun = rec.unrun.load(Ordering::SeqCst);
        let ctx = || format!("job {id} ({meta:?}, runs {runs}, dropped unrun {unrun})");
        let fate = match r {
            Ok(v) => {
                if cancelled || meta.panics {
                    self.fail(format!(
                        "{}: join gave Ok({v}) but cancel returned {cancelled} and the job \
                         panics: {}",
                        ctx(),
                        meta.panics
                    ));
                }
                let want = expected_value(self.seed, id);
                if v != want {
                    self.fail(format!(
                        "{}: join gave {v:#x}, the job computed {want:#x}",
                        ctx()
                    ));
                }
                if runs != 1 || unrun != 0 {
                    self.fail(format!(
                        "{}: joined a value, but it did not run once",
                        ctx()
                    ));
                }
                FATE_JOINED
            }
            Err(e @ JoinError::Panicked(_)) => {
                let want = panic_message_of(id);
                if !meta.panics || cancelled || e.message() != Some(want.as_str()) {
                    self.fail(format!(
                        "{}: join gave {e:?} (cancel returned {cancelled}), expected the \
                         job's own panic {want:?} only if it panics",
                        ctx()
                    ));
                }
                if runs != 1 || unrun != 0 {
                    self.fail(format!(
                        "{}: joined a panic, but it did not run once",
                        ctx()
                    ));
                }
                FATE_JOINED
            }
            Err(JoinError::Cancelled) => {
                if !cancelled {
                    self.fail(format!(
                        "{}: join gave Cancelled, but cancel was not true",
                        ctx()
                    ));
                }
                if runs != 0 || unrun != 1 {
                    self.fail(format!("{}: cancelled, but ran or was not dropped", ctx()));
                }
                FATE_CANCELLED
            }
            Err(JoinError::Refused) => {
                if cancelled {
                    self.fail(format!(
                        "{}: cancel returned true, join gave Refused",
                        ctx()
                    ));
                }
                if !rec.may_refuse.load(Ordering::SeqCst) {
                    self.fail(format!(
                        "{}: join gave Refused, but no drain of its queue overlapped the spawn",
                        ctx()
                    ));
                }
                if runs != 0 || unrun != 1 {
                    self.fail(format!("{}: refused, but ran or was not dropped", ctx()));
                }
                FATE_REFUSED
            }
            Err(e) => {
                self.fail(format!("{}: join gave an unknown error {e:?}", ctx()));
                FATE_JOINED
            }
        };
        self.set_fate(id, fate);
    }

    fn set_fate(&self, id: usize, fate: u8) {
        let old = self.jobs[id].fate.swap(fate, Ordering::SeqCst);
        if old != FATE_UNSET {
            self.fail(format!(
                "job {id}: fate set twice ({old} then {fate}): a test bug"
            ));
        }
    }

    /// Right after a spawn or execute returned: a closure already dropped
    /// unrun was refused, which needs an overlapping drain.
    fn check_fresh_refusal(&self, id: usize, finished: bool) {
        let rec = &self.jobs[id];
        if rec.unrun.load(Ordering::SeqCst) == 0 {
            return;
        }
        if !rec.may_refuse.load(Ordering::SeqCst) {
            self.fail(format!(
                "job {id} ({:?}): dropped unrun at once with no drain of its queue under way",
                rec.meta.get()
            ));
        }
        if !finished {
            self.fail(format!(
                "job {id}: refused (its closure is gone) but its handle is not finished"
            ));
        }
    }
}

fn build_queue(s: &Arc<Shared>, q: usize) -> Workqueue {
    let weak: Weak<Shared> = Arc::downgrade(s);
    let name = format!("fz-{}-{}", s.name, QUEUE_NAMES[q]);
    let b = Workqueue::builder(&name).panic_handler(move |p| {
        if let Some(s) = weak.upgrade() {
            s.on_handler_panic(q, p);
        }
    });
    let b = match q {
        UNBOUND => b.unbound().affinity_strict(s.mix.strict),
        ORDERED => b.ordered(),
        MAX2 => b.unbound().max_active(2),
        _ => b,
    };
    b.build().expect("the test's queues build")
}

// ---------------------------------------------------------------------------
// What runs on the workers
// ---------------------------------------------------------------------------

/// A job's closure owns one: dropped without having run, it counts the job
/// as dropped unrun.
struct Ticket {
    s: Arc<Shared>,
    id: usize,
    ran: bool,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.ran {
            self.s.jobs[self.id].unrun.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn job_closure(s: Arc<Shared>, id: usize, spec: JobSpec) -> impl FnOnce() -> u64 + Send + 'static {
    let ticket = Ticket { s, id, ran: false };
    move || {
        let mut t = ticket;
        t.ran = true;
        job_body(&t.s, t.id, spec)
    }
}

fn job_body(s: &Arc<Shared>, id: usize, spec: JobSpec) -> u64 {
    let _running = s.enter(spec.queue, &format!("job {id}"));
    s.jobs[id].runs.fetch_add(1, Ordering::SeqCst);
    if let Some((p, seq)) = spec.order {
        let prev = s.ordered_last[p].swap(seq, Ordering::SeqCst);
        if prev >= seq {
            s.fail(format!(
                "ordered queue: producer {p}'s job #{seq} (id {id}) ran after its job #{prev}"
            ));
        }
    }
    match spec.flavor {
        Flavor::Plain => {}
        Flavor::Spin(n) => {
            for i in 0..n {
                std::hint::black_box(i);
            }
        }
        Flavor::Sleep(us) => {
            cmwq::blocking(|| thread::sleep(Duration::from_micros(u64::from(us))));
        }
        Flavor::Panic => panic!("{}", panic_message_of(id)),
        Flavor::Child => spawn_child(s, id),
    }
    expected_value(s.seed, id)
}

/// A job's child on the unbound queue: joined, cancelled then joined, or
/// detached, chosen from the parent's id.
fn spawn_child(s: &Arc<Shared>, parent: usize) {
    let mut rng = rng_for(s.seed ^ (parent as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let flavor = match rng.below(10) {
        0 => Flavor::Panic,
        1 => Flavor::Sleep(20 + rng.below(80) as u32),
        2 => Flavor::Spin(rng.below(2000) as u32),
        _ => Flavor::Plain,
    };
    let spec = JobSpec {
        queue: UNBOUND,
        flavor,
        order: None,
    };
    let guard = s.queues.read().unwrap();
    let Some(qs) = guard.as_ref() else {
        s.fail(format!("job {parent} ran after the queues were dropped"));
        return;
    };
    let id = s.alloc(Meta {
        queue: UNBOUND,
        how: How::Child,
        panics: matches!(flavor, Flavor::Panic),
    });
    let ended = s.drains_ended(UNBOUND);
    let h = qs[UNBOUND].spawn(job_closure(s.clone(), id, spec));
    drop(guard);
    s.jobs[id]
        .may_refuse
        .store(s.drain_overlapped(UNBOUND, ended), Ordering::SeqCst);
    s.check_fresh_refusal(id, h.is_finished());
    match rng.below(10) {
        0..=4 => s.check_outcome(id, h.join(), false),
        5..=6 => {
            let c = h.cancel();
            if c {
                check_just_cancelled(s, id, &h);
            }
            s.check_outcome(id, h.join(), c);
        }
        _ => {
            s.set_fate(id, FATE_DETACHED);
            drop(h);
        }
    }
}

/// After `cancel` returned true: the closure is already dropped and the
/// handle finished.
fn check_just_cancelled(s: &Shared, id: usize, h: &JoinHandle<u64>) {
    let rec = &s.jobs[id];
    let (runs, unrun) = (
        rec.runs.load(Ordering::SeqCst),
        rec.unrun.load(Ordering::SeqCst),
    );
    if runs != 0 || unrun != 1 || !h.is_finished() {
        s.fail(format!(
            "job {id}: cancel returned true, but runs {runs}, dropped unrun {unrun}, \
             finished {}",
            h.is_finished()
        ));
    }
}

/// A `Work`'s callback: checks it runs alone, counts the run, sometimes
/// blocks or spins, and sometimes queues itself again.
fn work_callback(s: &Arc<Shared>, i: usize) {
    let q = i / WORKS_PER_QUEUE;
    let _running = s.enter(q, &format!("work {i}"));
    let r = &s.wrecs[i];
    if r.busy.swap(true, Ordering::SeqCst) {
        r.overlaps.fetch_add(1, Ordering::SeqCst);
    }
    let n = r.runs.fetch_add(1, Ordering::SeqCst);
    match n % 8 {
        0 => cmwq::blocking(|| thread::sleep(Duration::from_micros(30))),
        3 => {
            for k in 0..3000u32 {
                std::hint::black_box(k);
            }
        }
        _ => {}
    }
    if n.is_multiple_of(3)
        && r.requeues_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| l.checked_sub(1))
            .is_ok()
    {
        let qs = s.queues.read().unwrap();
        let works = s.works.read().unwrap();
        if let (Some(qs), Some(w)) = (qs.as_ref(), works.get(i))
            && qs[q].queue(w)
        {
            r.trues.fetch_add(1, Ordering::SeqCst);
        }
    }
    r.busy.store(false, Ordering::SeqCst);
}

// ---------------------------------------------------------------------------
// Producers
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Op {
    Spawn,
    Execute,
    WorkQueue,
    WorkCancel,
    WorkCancelSync,
    WorkDisable,
    WorkFlush,
    QueueFlush,
    ResolveLater,
}

/// How a producer deals with a spawned job's handle.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resolve {
    Join,
    Await,
    CancelThenJoin,
}

struct Producer {
    s: Arc<Shared>,
    p: usize,
    rng: Rng,
    queues: Vec<Workqueue>,
    works: Vec<Work>,
    table: Vec<(usize, Op)>,
    total_weight: usize,
    /// Handles to resolve later.
    later: Vec<(usize, JoinHandle<u64>)>,
    /// The next sequence number for the ordered queue.
    ordered_seq: u64,
}

impl Producer {
    fn new(s: Arc<Shared>, p: usize) -> Producer {
        let m = s.mix;
        let table = vec![
            (m.spawn, Op::Spawn),
            (m.execute, Op::Execute),
            (m.work_queue, Op::WorkQueue),
            (m.work_cancel, Op::WorkCancel),
            (m.work_cancel_sync, Op::WorkCancelSync),
            (m.work_disable, Op::WorkDisable),
            (m.work_flush, Op::WorkFlush),
            (m.queue_flush, Op::QueueFlush),
            (m.resolve_later, Op::ResolveLater),
        ];
        let total_weight = table.iter().map(|(w, _)| w).sum();
        let queues = s.queues.read().unwrap().clone().expect("queues exist");
        let works = s.works.read().unwrap().clone();
        let rng = rng_for(s.seed ^ (p as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Producer {
            s,
            p,
            rng,
            queues,
            works,
            table,
            total_weight,
            later: Vec::new(),
            ordered_seq: 0,
        }
    }

    fn pick_op(&mut self) -> Op {
        let mut x = self.rng.below(self.total_weight);
        for &(w, op) in &self.table {
            if x < w {
                return op;
            }
            x -= w;
        }
        unreachable!("the weights add up")
    }

    fn run(mut self) {
        let m = self.s.mix;
        for op in 0..m.ops {
            self.s.progress[self.p].store(op, Ordering::Relaxed);
            let me = self.p;
            for d in m.drains.iter().filter(|d| d.producer == me && d.op == op) {
                self.drain(d.queue);
            }
            let q = self.rng.below(NQ);
            match self.pick_op() {
                Op::Spawn => self.spawn(q),
                Op::Execute => self.execute(q),
                Op::WorkQueue => self.work_queue(q),
                Op::WorkCancel => {
                    let i = self.work_of(q);
                    if self.works[i].cancel() {
                        self.s.wrecs[i].cancels.fetch_add(1, Ordering::SeqCst);
                    }
                }
                Op::WorkCancelSync => {
                    let i = self.work_of(q);
                    if self.works[i].cancel_sync() {
                        self.s.wrecs[i].cancels.fetch_add(1, Ordering::SeqCst);
                    }
                }
                Op::WorkDisable => {
                    let i = self.work_of(q);
                    if self.works[i].disable() {
                        self.s.wrecs[i].cancels.fetch_add(1, Ordering::SeqCst);
                    }
                    if self.rng.chance(50) {
                        thread::yield_now();
                    }
                    self.works[i].enable();
                }
                Op::WorkFlush => {
                    let i = self.work_of(q);
                    self.works[i].flush();
                }
                Op::QueueFlush => self.queues[q].flush(),
                Op::ResolveLater => self.resolve_one_later(),
            }
            // Keep the number of unresolved handles bounded.
            if self.later.len() > 48 {
                self.resolve_one_later();
            }
        }
        self.s.progress[self.p].store(m.ops, Ordering::Relaxed);
        while !self.later.is_empty() {
            self.resolve_one_later();
        }
    }

    fn work_of(&mut self, q: usize) -> usize {
        q * WORKS_PER_QUEUE + self.rng.below(WORKS_PER_QUEUE)
    }

    /// Drains queue `q`. A slow job queued just before keeps the drain going
    /// for a few milliseconds, so the other producers' calls meet it.
    fn drain(&mut self, q: usize) {
        let mut spec = self.job_spec(q);
        spec.flavor = Flavor::Sleep(3000);
        let (id, slow) = self.spawn_job(spec);
        let st = &self.s.qs[q];
        st.drains_begun.fetch_add(1, Ordering::SeqCst);
        // Counted before the queue starts draining (see `drain_overlapped`).
        fence(Ordering::SeqCst);
        self.queues[q].drain();
        st.drains_ended.fetch_add(1, Ordering::SeqCst);
        resolve(&self.s, id, slow, Resolve::Join);
    }

    fn cpu(&mut self) -> usize {
        self.s.cpus[self.rng.below(self.s.cpus.len())]
    }

    /// A random job for queue `q`.
    fn job_spec(&mut self, q: usize) -> JobSpec {
        let m = self.s.mix;
        let mut x = self.rng.below(100);
        let mut take = |pct: usize| {
            let hit = x < pct;
            x = x.saturating_sub(pct);
            hit
        };
        let flavor = if take(m.panic_pct) {
            Flavor::Panic
        } else if take(m.sleep_pct) {
            Flavor::Sleep(20 + self.rng.below(130) as u32)
        } else if take(m.spin_pct) {
            Flavor::Spin(self.rng.below(5000) as u32)
        } else if take(m.child_pct) && q != UNBOUND {
            Flavor::Child
        } else {
            Flavor::Plain
        };
        let order = (q == ORDERED).then(|| {
            self.ordered_seq += 1;
            (self.p, self.ordered_seq)
        });
        JobSpec {
            queue: q,
            flavor,
            order,
        }
    }

    /// Spawns the job `spec` describes (on one CPU now and then).
    fn spawn_job(&mut self, spec: JobSpec) -> (usize, JoinHandle<u64>) {
        let q = spec.queue;
        let s = self.s.clone();
        let id = s.alloc(Meta {
            queue: q,
            how: How::Spawn,
            panics: matches!(spec.flavor, Flavor::Panic),
        });
        let f = job_closure(s.clone(), id, spec);
        let ended = s.drains_ended(q);
        let h = if self.rng.chance(s.mix.on_cpu_pct) {
            let cpu = self.cpu();
            self.queues[q]
                .spawn_on(cpu, f)
                .unwrap_or_else(|e| panic!("spawn_on({cpu}) on the {}: {e}", QUEUE_NAMES[q]))
        } else {
            self.queues[q].spawn(f)
        };
        s.jobs[id]
            .may_refuse
            .store(s.drain_overlapped(q, ended), Ordering::SeqCst);
        s.check_fresh_refusal(id, h.is_finished());
        (id, h)
    }

    fn spawn(&mut self, q: usize) {
        let spec = self.job_spec(q);
        let (id, h) = self.spawn_job(spec);
        let s = self.s.clone();
        match self.rng.below(100) {
            0..=19 => resolve(&s, id, h, Resolve::Join),
            20..=34 => resolve(&s, id, h, Resolve::Await),
            35..=49 => resolve(&s, id, h, Resolve::CancelThenJoin),
            50..=79 => self.later.push((id, h)),
            _ => {
                s.set_fate(id, FATE_DETACHED);
                drop(h);
            }
        }
    }

    fn execute(&mut self, q: usize) {
        let spec = self.job_spec(q);
        let s = self.s.clone();
        let id = s.alloc(Meta {
            queue: q,
            how: How::Execute,
            panics: matches!(spec.flavor, Flavor::Panic),
        });
        let f = job_closure(s.clone(), id, spec);
        let f = move || {
            f();
        };
        let ended = s.drains_ended(q);
        let accepted = if self.rng.chance(s.mix.on_cpu_pct) {
            let cpu = self.cpu();
            self.queues[q]
                .execute_on(cpu, f)
                .unwrap_or_else(|e| panic!("execute_on({cpu}) on the {}: {e}", QUEUE_NAMES[q]))
        } else {
            self.queues[q].execute(f)
        };
        let rec = &s.jobs[id];
        rec.may_refuse
            .store(s.drain_overlapped(q, ended), Ordering::SeqCst);
        if accepted {
            s.set_fate(id, FATE_EXEC_ACCEPTED);
        } else {
            s.set_fate(id, FATE_EXEC_REFUSED);
            if rec.unrun.load(Ordering::SeqCst) != 1 {
                s.fail(format!(
                    "job {id}: execute returned false, but its closure was not dropped"
                ));
            }
        }
        s.check_fresh_refusal(id, !accepted);
    }

    fn work_queue(&mut self, q: usize) {
        let i = self.work_of(q);
        let rounds = if self.rng.chance(30) { 2 } else { 1 };
        for _ in 0..rounds {
            let ok = if q == BOUND && self.rng.chance(30) {
                let cpu = self.cpu();
                self.queues[q]
                    .queue_on(cpu, &self.works[i])
                    .unwrap_or_else(|e| panic!("queue_on({cpu}): {e}"))
            } else {
                self.queues[q].queue(&self.works[i])
            };
            if ok {
                self.s.wrecs[i].trues.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    fn resolve_one_later(&mut self) {
        if self.later.is_empty() {
            return;
        }
        let k = self.rng.below(self.later.len());
        let (id, h) = self.later.swap_remove(k);
        let how = match self.rng.below(4) {
            0 | 1 => Resolve::Join,
            2 => Resolve::Await,
            _ => Resolve::CancelThenJoin,
        };
        resolve(&self.s, id, h, how);
    }
}

fn resolve(s: &Shared, id: usize, h: JoinHandle<u64>, how: Resolve) {
    let cancelled = how == Resolve::CancelThenJoin && h.cancel();
    if cancelled {
        check_just_cancelled(s, id, &h);
    }
    let r = if how == Resolve::Await {
        block_on(h)
    } else {
        h.join()
    };
    s.check_outcome(id, r, cancelled);
}

// ---------------------------------------------------------------------------
// The body and its checks
// ---------------------------------------------------------------------------

/// Runs the producers, quiesces and destroys the queues, and checks every
/// record. Returns a one-line summary, or the failures.
fn body(s: &Arc<Shared>) -> Result<String, String> {
    let start = Instant::now();
    let producers: Vec<_> = (0..s.mix.producers)
        .map(|p| {
            let s = s.clone();
            thread::Builder::new()
                .name(format!("fz-producer-{p}"))
                .spawn(move || Producer::new(s, p).run())
                .expect("a producer thread")
        })
        .collect();
    s.phase.store(1, Ordering::SeqCst);
    for (p, h) in producers.into_iter().enumerate() {
        if let Err(e) = h.join() {
            s.fail(format!(
                "producer {p} panicked: {}",
                payload_text(&*e).unwrap_or("<non-string payload>")
            ));
        }
    }

    // Quiesce: jobs that spawn children first, the children's queue last.
    s.phase.store(2, Ordering::SeqCst);
    {
        let qs = s.queues.read().unwrap();
        let qs = qs.as_ref().expect("queues exist");
        for q in [ORDERED, MAX2, BOUND, UNBOUND] {
            qs[q].flush();
        }
    }
    for w in s.works.read().unwrap().iter() {
        w.flush();
    }

    // Destroy: the body holds the last handle of each queue.
    s.phase.store(3, Ordering::SeqCst);
    let queues = s.queues.write().unwrap().take().expect("queues exist");
    let mut queues: Vec<Option<Workqueue>> = queues.into_iter().map(Some).collect();
    for q in [ORDERED, MAX2, BOUND, UNBOUND] {
        drop(queues[q].take());
    }
    let works = std::mem::take(&mut *s.works.write().unwrap());

    s.phase.store(4, Ordering::SeqCst);
    for (i, w) in works.iter().enumerate() {
        let r = &s.wrecs[i];
        let (t, c, n) = (
            r.trues.load(Ordering::SeqCst),
            r.cancels.load(Ordering::SeqCst),
            r.runs.load(Ordering::SeqCst),
        );
        if w.is_pending() {
            s.fail(format!(
                "work {i}: still pending after its queue was destroyed"
            ));
        }
        if t != n + c {
            s.fail(format!(
                "work {i} ({} queue): {t} queue calls returned true, but {n} runs + {c} \
                 successful cancels",
                QUEUE_NAMES[i / WORKS_PER_QUEUE]
            ));
        }
        let o = r.overlaps.load(Ordering::SeqCst);
        if o != 0 {
            s.fail(format!("work {i}: ran on two workers at once {o} times"));
        }
    }
    drop(works);

    let mut tally = [0usize; 7];
    let mut runs_total = 0;
    for id in 0..s.next_id.load(Ordering::SeqCst) {
        check_job(s, id, &mut tally);
        runs_total += s.jobs[id].runs.load(Ordering::SeqCst) as usize;
    }
    let nr_jobs = s.next_id.load(Ordering::SeqCst);
    for (q, (st, qname)) in s.qs.iter().zip(QUEUE_NAMES).enumerate() {
        let (peak, limit) = (
            st.peak.load(Ordering::SeqCst),
            st.limit.load(Ordering::SeqCst),
        );
        if peak > limit {
            s.fail(format!(
                "{qname} queue: {peak} items ran at once, limit {limit}"
            ));
        }
        let want: usize = (0..nr_jobs)
            .filter(|&id| {
                let rec = &s.jobs[id];
                let m = rec.meta.get().expect("meta");
                m.queue == q
                    && m.how == How::Execute
                    && m.panics
                    && rec.fate.load(Ordering::SeqCst) == FATE_EXEC_ACCEPTED
            })
            .count();
        let got = st.handler_calls.load(Ordering::SeqCst);
        if got != want {
            s.fail(format!(
                "{qname} queue: its panic handler ran {got} times, for {want} panicking \
                 executed jobs"
            ));
        }
    }
    if runs_total == 0 {
        s.fail("no job ran at all".into());
    }
    s.phase.store(5, Ordering::SeqCst);

    let n = s.nr_failures.load(Ordering::SeqCst);
    if n > 0 {
        let kept = s.failures.lock().unwrap();
        return Err(format!(
            "{n} invariant failure(s); the first {}:\n  {}",
            kept.len(),
            kept.join("\n  ")
        ));
    }
    let work_runs: usize = s.wrecs.iter().map(|r| r.runs.load(Ordering::SeqCst)).sum();
    let peaks: Vec<usize> = s.qs.iter().map(|q| q.peak.load(Ordering::SeqCst)).collect();
    Ok(format!(
        "{} jobs ({runs_total} ran): joined {}, cancelled {}, refused {}, detached {}, \
         executed {}, execute refused {}; {work_runs} work runs; peaks {peaks:?} \
         (unbound, ordered, max2, bound); {:.1?}",
        s.next_id.load(Ordering::SeqCst),
        tally[FATE_JOINED as usize],
        tally[FATE_CANCELLED as usize],
        tally[FATE_REFUSED as usize],
        tally[FATE_DETACHED as usize],
        tally[FATE_EXEC_ACCEPTED as usize],
        tally[FATE_EXEC_REFUSED as usize],
        start.elapsed(),
    ))
}

/// The end-of-run check of one job: its closure ran or was dropped, once,
/// as its fate allows.
fn check_job(s: &Shared, id: usize, tally: &mut [usize; 7]) {
    let rec = &s.jobs[id];
    let meta = *rec.meta.get().expect("a job has its meta");
    let runs = rec.runs.load(Ordering::SeqCst);
    let unrun = rec.unrun.load(Ordering::SeqCst);
    let reported = rec.reported.load(Ordering::SeqCst);
    let may_refuse = rec.may_refuse.load(Ordering::SeqCst);
    let fate = rec.fate.load(Ordering::SeqCst);
    tally[usize::from(fate).min(6)] += 1;
    let ctx = format!(
        "job {id} ({meta:?}, fate {fate}, runs {runs}, dropped unrun {unrun}, \
         may be refused {may_refuse})"
    );
    if runs + unrun != 1 {
        s.fail(format!(
            "{ctx}: its closure ran or was dropped {} times, not once",
            runs + unrun
        ));
    }
    let ok = match fate {
        FATE_JOINED | FATE_EXEC_ACCEPTED => runs == 1,
        FATE_CANCELLED => runs == 0,
        FATE_REFUSED | FATE_EXEC_REFUSED => runs == 0 && may_refuse,
        FATE_DETACHED => runs == 1 || may_refuse,
        _ => {
            s.fail(format!("{ctx}: its handle was never resolved (a test bug)"));
            true
        }
    };
    if !ok {
        s.fail(format!("{ctx}: lost or refused without cause"));
    }
    let want_reported =
        u32::from(meta.how == How::Execute && meta.panics && fate == FATE_EXEC_ACCEPTED);
    if reported != want_reported {
        s.fail(format!(
            "{ctx}: its panic reached the queue's handler {reported} times, expected \
             {want_reported}"
        ));
    }
}

/// What the library says about our queues, for a hang report (taken on a
/// thread of its own, in case the hang holds a lock the snapshot needs).
fn snapshot_of(prefix: &str) -> String {
    let prefix = prefix.to_owned();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let snap = cmwq::snapshot();
        let ours: Vec<String> = snap
            .workqueues
            .iter()
            .filter(|w| w.name.starts_with(&prefix))
            .map(|w| {
                format!(
                    "{}: node_nr_active {:?}, pwqs {:?}, stats {:?}",
                    w.name, w.node_nr_active, w.pwqs, w.stats
                )
            })
            .collect();
        let _ = tx.send(ours.join("\n"));
    });
    rx.recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|_| "(the snapshot did not come back within 5 s)".into())
}

/// Runs one fuzz test: the body on its own thread, the calling thread
/// waiting at most [`HANG_LIMIT`] for it.
fn run_fuzz(name: &'static str, default_seed: u64, mix: Mix) {
    quiet_intentional_panics();
    let seed = seed_for(default_seed);
    let rerun = format!(
        "seed {seed:#x}; rerun with CMWQ_FUZZ_SEED={seed:#x} cargo test -p cmwq --test \
         engine_frontdoor_fuzz {name}"
    );
    let s = Shared::new(name, seed, mix);
    let (tx, rx) = mpsc::channel();
    let s2 = s.clone();
    thread::Builder::new()
        .name(format!("fz-body-{name}"))
        .spawn(move || {
            let r = panic::catch_unwind(AssertUnwindSafe(|| body(&s2))).unwrap_or_else(|p| {
                Err(format!(
                    "the body panicked: {}",
                    payload_text(&*p).unwrap_or("<non-string payload>")
                ))
            });
            let _ = tx.send(r);
        })
        .expect("the body's thread");
    match rx.recv_timeout(HANG_LIMIT) {
        Ok(Ok(summary)) => eprintln!("{name} ({seed:#x}): {summary}"),
        Ok(Err(msg)) => panic!("{name} failed, {rerun}\n{msg}"),
        Err(_) => {
            let progress: Vec<usize> = s
                .progress
                .iter()
                .map(|p| p.load(Ordering::Relaxed))
                .collect();
            let phase = PHASES[s.phase.load(Ordering::SeqCst).min(PHASES.len() - 1)];
            let failures = s
                .failures
                .lock()
                .map(|f| f.join("\n  "))
                .unwrap_or_default();
            panic!(
                "{name} hung: no result after {HANG_LIMIT:?}, {rerun}\nphase: {phase}; \
                 producers at operation {progress:?} of {}\nfailures so far:\n  {failures}\n\
                 queues:\n{}",
                mix.ops,
                snapshot_of(&format!("fz-{name}-"))
            );
        }
    }
}

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

/// Every kind of operation, a drain of the unbound queue (which refuses the
/// children spawned meanwhile) and one of the bound queue.
#[test]
fn mixed_front_door() {
    run_fuzz(
        "mixed",
        0x5EED_F00D_0000_0001,
        Mix {
            producers: 4,
            ops: 4000,
            spawn: 30,
            execute: 15,
            work_queue: 15,
            work_cancel: 6,
            work_cancel_sync: 2,
            work_disable: 2,
            work_flush: 2,
            queue_flush: 1,
            resolve_later: 10,
            sleep_pct: 10,
            spin_pct: 10,
            panic_pct: 5,
            child_pct: 10,
            on_cpu_pct: 15,
            strict: false,
            drains: &[
                DrainAt {
                    producer: 0,
                    op: 1400,
                    queue: UNBOUND,
                },
                DrainAt {
                    producer: 2,
                    op: 2800,
                    queue: BOUND,
                },
            ],
        },
    );
}

/// Cancels and late resolutions weigh more, jobs block more often (so more
/// are still queued when cancelled), and the ordered and `max_active(2)`
/// queues are drained under the producers' feet; the unbound queue is strict.
#[test]
fn cancel_and_drain_heavy() {
    run_fuzz(
        "cancel",
        0x5EED_F00D_0000_0002,
        Mix {
            producers: 3,
            ops: 5000,
            spawn: 35,
            execute: 10,
            work_queue: 12,
            work_cancel: 10,
            work_cancel_sync: 3,
            work_disable: 3,
            work_flush: 1,
            queue_flush: 1,
            resolve_later: 15,
            sleep_pct: 20,
            spin_pct: 5,
            panic_pct: 4,
            child_pct: 8,
            on_cpu_pct: 10,
            strict: true,
            drains: &[
                DrainAt {
                    producer: 1,
                    op: 1200,
                    queue: ORDERED,
                },
                DrainAt {
                    producer: 2,
                    op: 3000,
                    queue: MAX2,
                },
            ],
        },
    );
}

/// Mostly fire and forget: `execute` and detached spawns with panics in the
/// mix, against `Work` items queued and re-queued hard; no drains, so
/// nothing may be refused.
#[test]
fn execute_and_work_heavy() {
    run_fuzz(
        "exec",
        0x5EED_F00D_0000_0003,
        Mix {
            producers: 3,
            ops: 5000,
            spawn: 15,
            execute: 35,
            work_queue: 30,
            work_cancel: 8,
            work_cancel_sync: 2,
            work_disable: 2,
            work_flush: 2,
            queue_flush: 2,
            resolve_later: 4,
            sleep_pct: 8,
            spin_pct: 15,
            panic_pct: 8,
            child_pct: 6,
            on_cpu_pct: 20,
            strict: false,
            drains: &[],
        },
    );
}
