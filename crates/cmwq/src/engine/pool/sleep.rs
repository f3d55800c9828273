//! Seeing a worker sleep (`wq_worker_sleeping` / `wq_worker_running` without
//! the scheduler): the queue path's look at a lane's runner, and the
//! watchdog's look every [`LOOK`] while a managed pool has waiting work.
//!
//! Both read a worker's context-switch records where it has a probe
//! ([`crate::switches`]): no syscall, so the queue path can afford it. A
//! counted worker found asleep inside its item's callback, or for
//! [`MIN_ASLEEP`] or more outside it, leaves `nr_running`
//! (`BLOCKED_SAMPLED`) and a worker is woken for what waits; one found
//! running again counts again, as the kernel's `wq_worker_running` has it
//! (its item's end also clears the mark). A preempted worker is runnable and
//! keeps its place, as in the kernel.
//!
//! A worker lent to a partner pool of the pod (a guest there, see
//! [`lane`](super::lane)) holds its own CPU's share in `nr_lent` instead of
//! `nr_running`; it is looked at the same way, and a sleep gives that share
//! back. Before this, a guest asleep in a partner's item kept its own CPU's
//! lane from waking anyone for as long as it slept: `cmwq mix` at 20 ms
//! blocks showed its CPU's items waiting 10-20 ms in some runs, annotated or
//! not (`engine_lanes`' `a_lent_worker_that_blocks_*` tests).
//!
//! A worker with no probe (a pool that has not been seen to block yet, or
//! `perf_event_open` refused) is read through `/proc/self/task/TID/stat` by
//! the watchdog's look, outside the pool lock: at each tick while its pool
//! has waiting work (two reads per 10 ms on this machine), and between ticks
//! only once it has stayed on one item since the previous look (a pool of
//! short items costs no reads, only the look's pass under the lock).
//! A `/proc` read tells only that the thread sleeps, not where, so the
//! look reads the worker's in-callback flag on both sides of it
//! ([`ProcRead`]): a sleep inside the callback counts at once, one outside
//! it (a wait for cmwq's own locks, `current` still set) only when the next
//! read finds it asleep on the same item. Before this rule, on a 16-CPU
//! machine (the device run of stop 38), the sampler took waits for a
//! contended pool lock for sleeps under `cmwq bench --batch 64`: pool after
//! pool of the 16-CPU pod was marked as blocking, and the pod's throughput
//! fell from 12 to 1.2 million items per second as probes and partner
//! kicks came on ([`peek_partners`]).
//! The first sleep the sampler sees in a pool turns probes on for its
//! workers (`Pool::blocks`). Every managed pool with waiting work is looked
//! at every [`LOOK`], and the watchdog's first look after it wakes from
//! idle comes one [`LOOK`] later, not a tick later: a pool whose first item
//! blocks for 20 ms is seen within a millisecond or two, where it used to
//! wait for the next 10 ms tick with its items piling up behind the sleeper.
//!
//! Between ticks the sampler also reads a worker that items wait behind on
//! its lane, however briefly it has been on its item: a sleep shorter than
//! two looks (500 µs, say) was otherwise found only at a tick, and a fresh
//! pool's first round of `cmwq mix` at 500 µs blocks had items waiting
//! 5-10 ms at p99 (0.15-0.4 ms with the rule). Such reads back off,
//! doubling the looks they skip up to 63 while they find nobody asleep
//! (`behind_backoff`), so a pool of CPU-bound items with a backlog pays a
//! read per worker every 64 ms. The first look after the watchdog wakes from
//! idle reads as a tick does.
//!
//! Why several places: the queue path sees a sleeper the moment new work
//! needs its CPU (an item queued behind a worker asleep in a 2 ms read
//! starts within tens of microseconds, not at the next look); the watchdog's
//! look covers items that were queued before their worker fell asleep, when
//! nothing is queued afterwards. In between, a per-CPU pool that was seen
//! to block looks at its partners too ([`peek_partners`]): each queue and
//! item start there kicks a partner that has items waiting behind a counted
//! worker, as that partner's own next queue would, so a sleep is found on
//! the next event of any CPU of the pod, not only of its own. It does so
//! while it keeps seeing sleeps ([`slept_recently`]: within a second of
//! busy time), not for the rest of the process. A sleeper found where no
//! worker of its CPU is idle gets a partner's worker lent, if one can lend.
//!
//! And a fourth place, the workers themselves, for items that block one
//! after another with nothing queued after them (a burst, a backlog). The
//! kernel wakes the next idle worker the moment one sleeps; here the next
//! worker is already awake when the sleep comes:
//!
//! - A worker about to go idle because its lane's items wait behind a
//!   counted worker (just started by the manager rule, or woken) yields
//!   once, so that a worker it preempted on their shared CPU reaches its
//!   sleep, then looks at that worker: its probe, or one `/proc` read with
//!   the lock dropped ([`Pool::work_or_sleeper`]), in a pool seen to block
//!   (under `CMWQ_BLOCK_DETECT=switch`, every pool from the start). If it
//!   sleeps in its item, this worker takes the items over
//!   ([`sleeper_takeovers`] counts them).
//! - A worker that starts an item with more waiting behind it, in a pool
//!   whose items slept within the last second, wakes an idle worker of its
//!   lane as a standby ([`PoolInner::standby`]); the standby does the above.
//!
//! So a chain of sleeping items runs at the speed of a wakeup (or of a
//! thread start, in a pool with no idle worker), not of the watchdog's
//! looks: 300 items queued at once, each sleeping 300 ms unannotated, all
//! started in 180-340 ms before (one per look) and in 5-19 ms after, about
//! what the annotation gives (10-11 ms).
//!
//! Switch tracking (what probes need) comes on with the first
//! context-switch event of the process, which waits for an RCU grace
//! period: 10-13 ms here. The watchdog used to open it, and made no look
//! meanwhile; a thread of its own opens it now ([`start_tracking`]), and
//! workers open their probes once it is on, read through `/proc` until then.
//!
//! What was measured and not kept: the sleep itself as the event. A probe's
//! ring can wake a thread in poll() with every record (`wakeup_watermark`
//! 1), which is the scheduler hook's timing exactly. But every record then
//! queues an irq_work on the switching CPU, a self-IPI, and in this VM that
//! cost 12 µs of CPU per job of `cmwq mix` (33 -> 45 µs, with nobody even
//! polling), because probed workers switch at every park and wake. A
//! watchdog polling the rings itself also fed on its own wakeups (woken on a
//! worker's CPU it preempted the worker, whose record woke it again); a
//! `SCHED_IDLE` listener thread avoided that but not the irq_work cost. A
//! C probe of the same event put it at 5.6 µs per record here (a 1 µs
//! `nanosleep` went from 78 to 89 µs with the wakeups on), and turning the
//! event on and off around each item, so that only an item's switches
//! would wake anyone, costs 1.46 µs per item (two ioctls). On bare metal a
//! self-IPI is far cheaper; here the looks above are cheaper than the event.
//!
//! Nor does a faster look help: the watchdog looking every 50 or 25 µs
//! while a probed pool has items behind a worker (with its timer slack cut
//! to 1 µs, so that it wakes on time) left the mix's p99 at 2 ms blocks
//! where it was (130-134 µs over 24 rounds each). A sleeper found by the
//! watchdog needs a worker woken on the sleeper's CPU, now idle, which in a
//! VM costs about what the earlier look saves; found on the queue path, the
//! worker is woken by the producer running on that very CPU.
//!
//! Nothing here needs more than the pool lock: a probe's ring is read
//! without one (see `switches.rs` for why a torn read is never believed),
//! and `BLOCKED_SAMPLED` is set and cleared under the lock like the other
//! `blocked` bits, so `nr_running` stays the count of workers that run and
//! are not marked, whichever path marked them.

use std::time::Duration;

use super::{BLOCKED_SAMPLED, Hints, NEXT_POOL, POOLS, Pool, PoolInner, WState, Wake};
use crate::engine::watchdog;
use crate::sched;
use crate::switches::{self, LazyMono, MIN_ASLEEP, RunState, SwitchProbe};
use crate::trace;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How often the watchdog looks at the workers of managed pools that have
/// waiting work: an item queued before its worker fell asleep, with nothing
/// queued after it, starts within about this long.
pub(crate) const LOOK: Duration = Duration::from_millis(1);

/// The most looks the `/proc` sampler skips between reads of workers that
/// items wait behind, in a pool where such reads keep finding nobody asleep:
/// a pool of CPU-bound items with a backlog pays a read per counted worker
/// every 64 ms, not every millisecond.
pub(super) const BEHIND_BACKOFF_MAX: u8 = 63;

/// How many workers out for a sleep a look between ticks reads through
/// `/proc` per pool, at most (a tick reads them all): has one woken and
/// runs on in its item? With hundreds of items asleep at once (`cmwq mix
/// --block-every 2 --block-us 20000`), reading every one at every look made
/// a look cost milliseconds, the watchdog looked every 2 ms instead of every
/// one, and items waited behind sleepers nobody had read. A sleeper that
/// wakes mostly ends its item, which counts it again anyway; one that runs
/// on is counted again by the next tick at the latest.
const OUT_READS_BETWEEN_TICKS: usize = 8;

/// Whether a look reads the `k`-th worker out for a sleep (in slot order),
/// having read `so_far` of them: all of them at a tick; between ticks a
/// few, from the `from`-th on (where the previous look stopped).
fn out_read_allowed(tick: bool, k: usize, from: usize, so_far: usize) -> bool {
    tick || (k >= from && so_far < OUT_READS_BETWEEN_TICKS)
}

/// Where the next look starts reading sleepers ([`out_read_allowed`]'s
/// `from`), after one that started at `from`, read `read` and saw `seen`:
/// after those it read, or back at the first once all had their turn.
fn next_out_read(tick: bool, from: usize, read: usize, seen: usize) -> usize {
    let next = from + read;
    if tick || next >= seen { 0 } else { next }
}

/// Whether a look reads a worker that has no probe through `/proc`: one
/// out for a sleep (has it woken? `out`, within the look's budget), or a
/// counted one at a tick, once it has stayed on one item since the previous
/// look, or when items wait behind it on its lane (`behind`, which the
/// backoff below can withhold).
fn sampler_reads(out: bool, counted: bool, tick: bool, same_item: bool, behind: bool) -> bool {
    out || (counted && (tick || same_item || behind))
}

/// The sampler's backoff after a look (see `PoolInner::sample_backoff`):
/// `None` to leave it, else the new number of looks to skip. A sleep found
/// starts it over; reads made only because items waited behind a worker,
/// that found nobody asleep, double it up to [`BEHIND_BACKOFF_MAX`].
fn behind_backoff(backoff: u8, slept: bool, read_behind: bool) -> Option<u8> {
    if slept {
        Some(0)
    } else if read_behind {
        Some(
            backoff
                .saturating_mul(2)
                .saturating_add(1)
                .min(BEHIND_BACKOFF_MAX),
        )
    } else {
        None
    }
}

/// What a look found a worker doing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Seen {
    /// Asleep inside its item's callback: the item's sleep.
    Asleep,
    /// Asleep outside the callback long enough to count (a probe's past
    /// [`MIN_ASLEEP`], or two `/proc` reads in a row): it leaves
    /// `nr_running` as a sleeper does, but says nothing of the pool's
    /// items, so it neither marks the pool as blocking nor keeps its pod's
    /// partner kicks going (under contention it is a wait for a lock).
    AsleepOutside,
    Awake,
}

impl Seen {
    /// Either kind of sleep: the worker leaves `nr_running`.
    fn asleep(self) -> bool {
        self != Seen::Awake
    }
}

impl Seen {
    /// From a probe: asleep at once inside an item's callback, else only past
    /// [`MIN_ASLEEP`]; `None` while a sleep is too young to tell from a wait
    /// for a lock (its remaining time is put in `next`, so the watchdog looks
    /// again then).
    fn of_probe(p: &SwitchProbe, mono: &mut LazyMono, next: &mut Duration) -> Option<Seen> {
        Seen::of_run_state(p.state(mono), p.in_item(), next)
    }

    /// [`of_probe`](Self::of_probe) from what the probe read.
    fn of_run_state(s: RunState, in_item: bool, next: &mut Duration) -> Option<Seen> {
        match s {
            RunState::Asleep(_) if in_item => Some(Seen::Asleep),
            RunState::Asleep(d) if d >= MIN_ASLEEP => Some(Seen::AsleepOutside),
            RunState::Asleep(d) => {
                *next = (*next).min(MIN_ASLEEP - d);
                None
            }
            RunState::Running | RunState::Preempted => Some(Seen::Awake),
        }
    }

    /// From a `/proc` state letter.
    fn of_state(c: char) -> Seen {
        if c == 'S' || c == 'D' {
            Seen::Asleep
        } else {
            Seen::Awake
        }
    }
}

impl PoolInner {
    /// A look found counted worker `i` `seen`: it leaves `nr_running` if it
    /// sleeps, or counts again if it was out for a sleep and runs. Returns
    /// whether it just left (the caller kicks its lane).
    fn note_seen(&mut self, i: usize, seen: Seen) -> bool {
        let w = &self.workers[i];
        match seen {
            Seen::Asleep | Seen::AsleepOutside if w.blocked == 0 => {
                let (slot, tid) = (w.current_pwq as usize, w.tid);
                let own = w.current != 0;
                if seen == Seen::Asleep {
                    self.slept_tick = watchdog::watchdog_ticks() + 1;
                }
                self.mark_out(i, BLOCKED_SAMPLED, true);
                if own {
                    self.pwqs[slot].stats.sampled += 1;
                }
                trace::blocked_sampled(
                    self.pool_id,
                    tid,
                    own.then(|| self.pwqs[slot].wq.as_ref().map(|w| w.name.as_str()))
                        .flatten(),
                );
                true
            }
            Seen::Awake if w.blocked & BLOCKED_SAMPLED != 0 => {
                self.mark_in(i, BLOCKED_SAMPLED, true);
                false
            }
            _ => false,
        }
    }

    /// Lane `h` has work and its counted worker runs: unless that worker fell
    /// asleep in its item. If it did, it leaves `nr_running` and a worker is
    /// woken for the lane (what the kernel's scheduler hook would have done
    /// when it slept). Called from `kick`, under the pool lock, for every
    /// item queued or started behind a busy worker, so it reads memory only,
    /// and in a pool whose workers have no probe (its items were never seen
    /// to block) nobody can be seen asleep: one flag, inlined into `kick`.
    #[inline]
    pub(super) fn wake_past_sleeper(&mut self, h: usize, cap: usize) -> Option<Wake> {
        if !self.may_see_sleeper(h) {
            return None;
        }
        self.look_past_sleeper(h, cap)
    }

    /// A runner of lane `h` could be seen asleep in its item: the pool's
    /// workers have probes and one runs there (counted or lent). Otherwise
    /// (no probe, or the lane's share held only by a worker still on its
    /// way) there is no runner to look at and no scan for one.
    #[inline]
    pub(super) fn may_see_sleeper(&self, h: usize) -> bool {
        self.probed && self.lanes[h].nr_running + self.lanes[h].nr_lent > 0
    }

    /// [`wake_past_sleeper`](Self::wake_past_sleeper) past its first test.
    #[inline(never)]
    fn look_past_sleeper(&mut self, h: usize, cap: usize) -> Option<Wake> {
        let r = self.runner_asleep(h)?;
        if !self.lanes[h].unserved(cap) {
            return None;
        }
        // An idle worker of the lane's CPU, else (a per-CPU pool of a pod) a
        // partner's, lent: with none idle here, the items behind the sleeper
        // used to wait for the next queue to kick the lane again.
        let wake = self
            .wake_for(h, false)
            .or_else(|| (!self.partners.is_empty()).then_some(Wake::Spread));
        if wake.is_some() || self.nr_starting > 0 {
            // Woken, or a worker on its way up takes the item.
            self.count_cm_wakeup(r);
        }
        wake
    }
}

impl PoolInner {
    /// Lane `h`'s counted worker, if its probe says it fell asleep in its
    /// item: it leaves `nr_running` now (`BLOCKED_SAMPLED`). Memory reads
    /// only, under the pool lock.
    fn runner_asleep(&mut self, h: usize) -> Option<usize> {
        let r = self.lane_runner(h)?;
        let probe = self.workers[r].probe.as_ref()?;
        let mut later = Duration::MAX;
        let seen = Seen::of_probe(probe, &mut LazyMono::default(), &mut later)?;
        if !seen.asleep() {
            return None;
        }
        self.note_seen(r, seen);
        Some(r)
    }

    /// Lane `h`'s counted worker (`runner`, found again if it left: another
    /// worker of the lane went on counting after it).
    fn lane_runner(&mut self, h: usize) -> Option<usize> {
        let r = self.lanes[h].runner;
        if self.workers.get(r).is_some_and(|w| w.counted_on(h)) {
            return Some(r);
        }
        let r = self.workers.iter().position(|w| w.counted_on(h))?;
        self.lanes[h].runner = r;
        Some(r)
    }

    /// A worker of lane `h` about to go idle (just started, woken, or back
    /// from a park) because the lane's items wait behind a counted worker
    /// looks at that worker first: if it sleeps in its item, it leaves
    /// `nr_running` and the caller takes the items (counted as a
    /// concurrency-managed wakeup, which is what it stands for).
    ///
    /// Where items block one after another, this is what keeps workers
    /// coming. A worker that starts or is woken for a sleeper takes the next
    /// item; if that one sleeps too, the next worker to come up, started by
    /// the manager rule just before it, finds the lane served and went
    /// idle, until a look (every [`LOOK`]) saw the sleep: one worker a
    /// millisecond. 300 items queued at once that each sleep 300 ms without
    /// the annotation took 300 ms to all start; with this look, 11-15 ms
    /// once the pool's workers have probes (annotated: 10-11 ms). A probe's
    /// read is memory only, so it is done under the lock; a pool without
    /// probes (never seen to block) has nobody to look at.
    pub(super) fn took_over_sleeper(&mut self, h: usize) -> bool {
        if !self.probed || !self.lanes[h].behind_worker(self.cap) {
            return false;
        }
        let Some(r) = self.runner_asleep(h) else {
            return false;
        };
        if !self.lanes[h].unserved(self.cap) {
            return false;
        }
        self.count_takeover(r);
        true
    }

    /// Worker `r` was found asleep by a worker that takes its items over:
    /// a concurrency-managed wakeup, and a take-over
    /// ([`sleeper_takeovers`]).
    fn count_takeover(&mut self, r: usize) {
        self.count_cm_wakeup(r);
        TAKEOVERS.fetch_add(1, Ordering::Relaxed);
    }

    /// A counted worker of lane `h` starts an item with more waiting behind
    /// it, in a pool whose items slept within the last second
    /// ([`slept_recently`]): an idle worker of the lane is woken as its
    /// standby, unless one is on its way already. The standby, on the same
    /// CPU, yields to the item first, then looks whether it sleeps
    /// ([`Pool::work_or_sleeper`]): if so it takes the items behind it over
    /// and, starting one, wakes the next standby; if not, it goes back to
    /// idle.
    ///
    /// This is the user-space stand-in for the scheduler hook's wakeup: the
    /// moment a worker sleeps, the kernel wakes the next idle one. Without
    /// it, a sleeper with nothing queued after it was found only by the
    /// watchdog's look, one a millisecond: 300 items queued at once into a
    /// pool with idle workers, each sleeping without the annotation, took
    /// 180-340 ms to all start; with it, 5-19 ms (`/proc` alone: 7-14 ms).
    /// `cmwq mix` (1 job in 10 sleeps, 6 interleaved runs a side, rounds
    /// after the first): unannotated p99 132 -> 52 us at 0.5 ms blocks,
    /// 130 -> 61 at 2 ms, 132 -> 81 at 20 ms, the annotation's figures, for
    /// 4-5% more CPU per job (a standby that finds the item running costs a
    /// wakeup, a yield and a look). A pool whose items never sleep pays one
    /// load per item. Never woken where the wakeup would have to wait for a
    /// unit of the CPU budget: it is a guess, not a need.
    pub(super) fn standby(&mut self, h: usize) -> Option<Wake> {
        let l = &self.lanes[h];
        if l.nr_woken > 0
            || l.idle.is_empty()
            || !super::budget::unit_free_now()
            || !l.behind_worker(self.cap)
            || !slept_recently(self.slept_tick, watchdog::watchdog_ticks())
        {
            return None;
        }
        self.wake_for(h, false)
    }

    /// Gives worker `me` its context-switch probe (or none).
    pub(super) fn set_probe(&mut self, me: usize, probe: Option<SwitchProbe>) {
        self.probed |= probe.is_some();
        self.workers[me].probe = probe;
    }
}

impl Pool {
    /// Publishes this pool's last seen sleep to its pod ([`Pool::pod_slept`]),
    /// and says whether the pod saw one recently ([`slept_recently`]): its
    /// partner kicks are worth making. `false` for a pool with no partners.
    pub(super) fn pod_slept_recently(&self, g: &PoolInner) -> bool {
        self.publish_sleep(g)
            .is_some_and(|t| slept_recently(t, watchdog::watchdog_ticks()))
    }

    /// Publishes this pool's last seen sleep to its pod ([`Pool::pod_slept`])
    /// and returns the pod's; `None` for a pool with no partners.
    pub(super) fn publish_sleep(&self, g: &PoolInner) -> Option<u64> {
        let first = self.pod_pools.get()?.first()?;
        let cell = &first.pod_slept.0;
        let t = cell.load(Ordering::Relaxed);
        if g.slept_tick > t {
            cell.store(g.slept_tick, Ordering::Relaxed);
            return Some(g.slept_tick);
        }
        Some(t)
    }

    /// Whether this pool's workers should open switch probes: once switch
    /// tracking is on for good (it is turned on, off the caller's thread, the
    /// first time it is wanted: see [`start_tracking`]).
    pub(super) fn probe_wanted(&self) -> bool {
        if !self.blocks.load(Ordering::Relaxed) || !switches::probes_allowed() {
            return false;
        }
        if switches::tracking_kept() {
            return true;
        }
        start_tracking();
        false
    }

    /// [`probe_wanted`](Self::probe_wanted) for a worker that is starting,
    /// with no lock held. Under `CMWQ_BLOCK_DETECT=switch` (records from
    /// every worker's start, as asked) it waits for switch tracking to come
    /// on, once per process, as the first worker always did: a partner's
    /// queue path can only see a worker that has its probe.
    pub(super) fn probe_wanted_at_start(&self) -> bool {
        if switches::probe_from_start() && self.blocks.load(Ordering::Relaxed) {
            switches::keep_tracking();
        }
        self.probe_wanted()
    }

    /// The `/proc` sampler saw a worker of this pool sleep in an item: from
    /// now on its workers read their switch records and the pool is looked at
    /// every [`LOOK`]. Called outside the pool lock.
    fn note_blocks(&self) {
        if !self.blocks.load(Ordering::Relaxed) {
            if switches::probes_allowed() {
                start_tracking();
            }
            self.blocks.store(true, Ordering::Relaxed);
        }
    }
}

/// O: the thread that turns switch tracking on was started (or tried).
static TRACKING_STARTED: AtomicBool = AtomicBool::new(false);

/// Turns switch tracking on for good ([`switches::keep_tracking`]) on a
/// thread of its own, once per process. The first context-switch event of a
/// process waits for an RCU grace period: 10-13 ms here, during which the
/// watchdog, which used to open it, made no look, so a pool's first sleeps
/// went unseen and `cmwq mix`'s first round at 20 ms blocks had items wait
/// 10-20 ms. Workers open their probes once it is on
/// ([`Pool::probe_wanted`]); until then the `/proc` sampler serves them.
fn start_tracking() {
    if switches::tracking_kept()
        || TRACKING_STARTED.load(Ordering::Relaxed)
        || TRACKING_STARTED.swap(true, Ordering::Relaxed)
    {
        return;
    }
    if crate::engine::threads::start("cmwq-tracking".into(), switches::keep_tracking).is_err() {
        // No thread to spare (a thread limit, a forked child): on this one.
        switches::keep_tracking();
    }
}

impl super::WorkerSlot {
    /// Holds a share of lane `h`'s CPU: runs an item homed there and counts
    /// in its `nr_running`, or is lent to a partner pool and counts in its
    /// `nr_lent`.
    fn counted_on(&self, h: usize) -> bool {
        self.blocked == 0 && self.lane == h && self.watched()
    }

    /// What a look reads: a worker of this pool in an item (or in what its
    /// last item left to drop), or away in a partner pool's item, that
    /// concurrency management may take out of its count.
    fn watched(&self) -> bool {
        (self.current != 0 || self.lent)
            && self.state == WState::Running
            && self.tid != 0
            && !self.cm_exempt
    }
}

impl PoolInner {
    /// Counts a concurrency-managed wakeup on behalf of worker `i` on its
    /// item's pwq (a lent worker's item is the partner pool's: not counted).
    pub(super) fn count_cm_wakeup(&mut self, i: usize) {
        if self.workers[i].current != 0 {
            let slot = self.workers[i].current_pwq as usize;
            self.pwqs[slot].stats.cm_wakeup += 1;
        }
    }
}

/// How long, in watchdog ticks (10 ms each, counted while any worker is
/// busy), the pools of a pod go on kicking their partners after one of them
/// last saw a worker asleep: a second of busy time.
pub(super) const RECENT_SLEEP_TICKS: u64 = 100;

/// Whether the pools of a pod whose last seen sleep was at `slept_tick`
/// (tick plus one; 0: never) still kick their partners at tick `now`.
///
/// Why: `blocks` is never cleared, and a pod's pools that once saw a sleep
/// tried their partners' locks at every queue and item start for the rest
/// of the process. The pod's first sleep is found by its own CPU's next
/// queue or item start, or by the watchdog's look, as in a pool without
/// partners; from then on the partners look too. Under `cmwq bench --batch 64` on this 2-vCPU VM that was
/// 161 instructions and 0.9 locked ones per item (`peek_partners`, with
/// records forced on); on a 16-CPU pod it was most of a 3x slowdown. A pod
/// whose items sleep keeps seeing sleeps and keeps kicking; one whose items
/// stopped sleeping stops a second later, and its own queues and the
/// watchdog's look still find a sleeper, as in a pool without partners.
pub(super) fn slept_recently(slept_tick: u64, now: u64) -> bool {
    slept_tick != 0 && now.wrapping_sub(slept_tick - 1) <= RECENT_SLEEP_TICKS
}

/// The most partners' locks one [`peek_partners`] call tries.
pub(super) const PEEK_TRIES: usize = 2;

thread_local! {
    /// Where this thread's next [`peek_partners`] starts among the pod's
    /// pools: each call starts one further, so that under a backlog every
    /// partner is tried in turn.
    static PEEK_FROM: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A: workers that took over from a sleeping worker
/// ([`PoolInner::took_over_sleeper`], [`Pool::took_over_sampled`]).
/// `Relaxed`: a counter.
static TAKEOVERS: AtomicU64 = AtomicU64::new(0);

/// How many times a worker about to go idle (a standby woken behind an
/// item, or a worker just started) found that the worker its lane's items
/// waited behind slept in its item, and took the items over: sleeps found
/// by the workers themselves, without a queue or the watchdog's look.
///
/// ```
/// let before = cmwq::sleeper_takeovers();
/// assert!(cmwq::sleeper_takeovers() >= before);
/// ```
pub fn sleeper_takeovers() -> u64 {
    TAKEOVERS.load(Ordering::Relaxed)
}

/// A: partners' kicks that woke a worker ([`peek_partners`]). `Relaxed`:
/// a counter.
static PARTNER_KICKS: AtomicU64 = AtomicU64::new(0);

/// How many times a queue or an item start in one per-CPU pool of a pod
/// kicked another, whose items waited behind a counted worker, into waking
/// a worker: past a worker found asleep in its item, or one lent by a
/// partner because the lane lagged (its worker preempted, or woken and not
/// yet on its CPU). These are what no event of the slow pool's own CPU had
/// to wait for; only pools seen to block make such kicks.
///
/// ```
/// let before = cmwq::partner_kicks();
/// assert!(cmwq::partner_kicks() >= before);
/// ```
pub fn partner_kicks() -> u64 {
    PARTNER_KICKS.load(Ordering::Relaxed)
}

/// A per-CPU pool that was seen to block has just queued or started an
/// item: kick, as their own next queue would, its partners that have items
/// waiting behind a counted worker (`Hints::BEHIND`): a worker past one
/// asleep in its item, or a lent one if the lane lags.
///
/// A pool's own queue path finds its sleeper only when the next item comes
/// to its CPU; at a steady rate that is a whole period of the producers
/// there. `cmwq mix` traces at 2 ms blocks put the wait of the items
/// already queued behind a sleeper at 88 µs (median) and 146 µs (p99) from
/// the sleep to the next queue on its CPU; the next queue or item start on
/// either CPU came after 16 µs and 105 µs. And a CPU held by another thread
/// (a kernel thread can hold a vCPU here for milliseconds) makes no events
/// at all: its producers and its pinned workers wait alike, while the
/// other CPUs' events can see its lane lag and lend it a worker.
///
/// No lock is held: a partner's lock is only tried (never waited for, so
/// per-CPU pools still never hold two locks), and only partners that say
/// they have items behind a worker are tried, at most [`PEEK_TRIES`] of
/// them per call, from a place that turns with each call of the thread. A
/// pool never seen to block pays one load in `unlock_wake`.
///
/// Why a bound: under a backlog every partner has items behind a worker.
/// On a 16-CPU machine (the device run of stop 38), with the pools of a
/// 16-CPU pod seen to block, trying all 15 partners' locks at every queue
/// and item start cut `cmwq bench --batch 64` from 12 to 1.2 million items
/// per second (13 µs of CPU per item, against 1.1). Where few partners have
/// items waiting, which is when one sleeps among CPU-bound neighbours,
/// each of them is still tried at every call.
pub(super) fn peek_partners(pool: &'static Pool) {
    let Some(pods) = pool.pod_pools.get() else {
        return;
    };
    let n = pods.len();
    if n == 0 {
        return;
    }
    let from = PEEK_FROM.with(|c| {
        let v = c.get();
        c.set(v.wrapping_add(1));
        v
    }) % n;
    let mut tries = 0;
    for k in 0..n {
        let d = pods[(from + k) % n];
        if std::ptr::eq(d, pool) || !d.hints.has(Hints::BEHIND) {
            continue;
        }
        if tries == PEEK_TRIES {
            break;
        }
        tries += 1;
        let Some(mut g) = d.inner.try_lock() else {
            continue;
        };
        // The kick its own next queue would make: a worker past a sleeper,
        // or a partner's lent if the lane lags (its worker preempted, say,
        // by a kernel thread that holds the CPU for milliseconds).
        let wake = g.kick(0);
        d.update_lendable(&g);
        drop(g);
        if let Some(w) = wake {
            PARTNER_KICKS.fetch_add(1, Ordering::Relaxed);
            w.run(d);
        }
    }
}

/// A worker the look must read through `/proc` (it has no probe).
struct ProcLook {
    i: usize,
    tid: i32,
    seq: u64,
    /// Its thread's "inside an item's callback" flag.
    flag: Option<Arc<AtomicBool>>,
}

/// What one `/proc` read of a worker says, with its item-callback flag read
/// on both sides of it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ProcRead {
    /// Not asleep (running or runnable), or the read failed.
    Awake,
    /// Asleep, inside its item's callback at both flag reads: the item's
    /// sleep (the worker cannot leave the callback and come back into it on
    /// the same item).
    AsleepInItem,
    /// Asleep, and outside the callback at either flag read: maybe a wait
    /// for one of cmwq's own locks (a queuer holds the pool lock while it
    /// looks), which must not count as the item's sleep.
    AsleepOutside,
}

impl ProcRead {
    /// Reads worker `tid`'s state between two reads of its flag.
    fn of(tid: i32, flag: Option<&AtomicBool>) -> Option<ProcRead> {
        // Acquire on both sides: the state read stays between the two.
        let before = flag.is_some_and(|f| f.load(Ordering::Acquire));
        let c = sched::thread_state(tid)?;
        let after = flag.is_some_and(|f| f.load(Ordering::Acquire));
        Some(match Seen::of_state(c) {
            Seen::Awake => ProcRead::Awake,
            _ if before && after => ProcRead::AsleepInItem,
            _ => ProcRead::AsleepOutside,
        })
    }
}

/// Whether a `/proc` read takes a worker out of `nr_running`, given whether
/// the previous read found it asleep outside its callback on the same item
/// (`out_before`): inside the callback at once, outside only at the second
/// such read in a row, a look or more apart (longer than a lock wait, as a
/// probe's [`MIN_ASLEEP`]). `None`: no verdict yet.
fn proc_verdict(r: ProcRead, out_before: bool) -> Option<Seen> {
    match r {
        ProcRead::Awake => Some(Seen::Awake),
        ProcRead::AsleepInItem => Some(Seen::Asleep),
        ProcRead::AsleepOutside if out_before => Some(Seen::AsleepOutside),
        ProcRead::AsleepOutside => None,
    }
}

impl Pool {
    /// Whether worker `me`, about to go idle, has work on lane `h`: the
    /// lane's (or a stealable lane's) items (`work_for`), or the items
    /// behind a counted worker that sleeps in its item, which it takes over
    /// ([`PoolInner::took_over_sleeper`], and [`took_over_sampled`] where
    /// that worker has no probe).
    ///
    /// [`took_over_sampled`]: Self::took_over_sampled
    pub(super) fn work_or_sleeper(
        &'static self,
        mut g: crate::sync::MutexGuard<'static, PoolInner>,
        h: usize,
    ) -> (crate::sync::MutexGuard<'static, PoolInner>, bool) {
        if g.work_for(h) {
            return (g, true);
        }
        if !self.blocks.load(Ordering::Relaxed) || !g.lanes[h].behind_worker(g.cap) {
            return (g, false);
        }
        // The worker it would take over from may not have reached its sleep
        // yet: this one, just started or woken on the same CPU, may have
        // preempted it. Let it run on first (it sleeps, or it runs on and
        // this worker goes idle); without this, a chain of blocking items
        // stopped at such a race until the next look.
        drop(g);
        std::thread::yield_now();
        let mut g = self.lock();
        if g.work_for(h) || g.took_over_sleeper(h) {
            return (g, true);
        }
        self.took_over_sampled(g, h)
    }

    /// [`PoolInner::took_over_sleeper`] for a runner with no probe, in a
    /// pool already seen to block: one `/proc` read of it, with the lock
    /// dropped; only a sleep inside its item's callback counts (one outside
    /// it is left to the watchdog's looks, which need two reads a look
    /// apart). Before a pool's probes are on (switch tracking takes
    /// 10-13 ms to come on, once per process; never, where
    /// `perf_event_open` is refused, as in many containers), items that
    /// block one after another otherwise got one worker per look. Costs a
    /// read only where a worker would go idle while items wait behind
    /// another, in a pool whose items sleep.
    fn took_over_sampled(
        &'static self,
        mut g: crate::sync::MutexGuard<'static, PoolInner>,
        h: usize,
    ) -> (crate::sync::MutexGuard<'static, PoolInner>, bool) {
        if !switches::sampler_enabled() {
            return (g, false);
        }
        let Some(r) = g.lane_runner(h) else {
            return (g, false);
        };
        let w = &g.workers[r];
        if w.probe.is_some() {
            // Its probe was read: it runs, or its sleep is too young to
            // tell from a wait for a lock.
            return (g, false);
        }
        let (tid, seq, flag) = (w.tid, w.seq, w.item_flag.clone());
        drop(g);
        let state = ProcRead::of(tid, flag.as_deref());
        let mut g = self.lock();
        // Only a sleep inside the item counts here: one outside it needs a
        // second read a look later (`proc_verdict`), not microseconds after
        // a look's. And the lane may have changed while the lock was
        // dropped (a look marked the runner out, finding nobody idle while
        // this worker was neither idle nor counted): it looks at its work
        // again either way.
        let w = &g.workers[r];
        let asleep = state == Some(ProcRead::AsleepInItem)
            && w.seq == seq
            && w.tid == tid
            && w.counted_on(h);
        if asleep && g.note_seen(r, Seen::Asleep) && g.lanes[h].unserved(g.cap) {
            g.count_takeover(r);
            return (g, true);
        }
        let work = g.work_for(h);
        (g, work)
    }

    /// The watchdog's look at this pool (see the module docs). Returns when it
    /// wants to look again before the next tick: `None` when nothing here
    /// needs it (not managed, or no waiting work and no worker out for a
    /// sleep).
    pub(crate) fn look(&'static self, mono: &mut LazyMono, tick: bool) -> Option<Duration> {
        if !self.managed {
            return None;
        }
        let mut g = self.lock();
        let watched = g.has_work()
            || g.workers
                .iter()
                .any(|w| w.watched() && w.blocked & BLOCKED_SAMPLED != 0);
        if !watched {
            return None;
        }
        let mut next = LOOK;
        let mut wake = Vec::new();
        let mut reads = Vec::new();
        let mut slept = false;
        // A sleep inside an item's callback: the pool's items block.
        let mut item_slept = false;
        // Someone to look at next time: a worker in an item that may fall
        // asleep or wake. Without one (the pool's workers cannot start, or
        // every one is exempt) the pool waits for the tick, not the look.
        let mut again = false;
        // Whether this look may read a worker only because items wait
        // behind it (see `sample_skip`).
        let behind_reads = if g.sample_skip == 0 {
            true
        } else {
            g.sample_skip -= 1;
            false
        };
        let mut read_behind = false;
        let (out_from, mut out_seen, mut out_reads) = (g.out_read_from, 0, 0);
        let mut i = 0;
        while i < g.workers.len() {
            let w = &g.workers[i];
            // An exempt worker (its thread cleared `PF_WQ_WORKER`) is not
            // the pool's to take out of `nr_running`, as in the kernel.
            if !w.watched() {
                i += 1;
                continue;
            }
            again = true;
            let seen = match w.probe.as_ref() {
                Some(p) => Seen::of_probe(p, mono, &mut next),
                None => {
                    let out = w.blocked & BLOCKED_SAMPLED != 0;
                    // Out for a sleep (has it woken?), or counted while work
                    // waits: at a tick, always (that is how a pool's first
                    // sleep is found, and a tick is 10 ms apart); between
                    // ticks once on one item since the previous look, or
                    // when items wait behind it on its lane. The last is how
                    // a sleep shorter than two looks is found (a pool's
                    // first 500 µs sleeps went unseen until a tick, with
                    // items piling up behind each); it backs off while it
                    // finds nobody asleep, so CPU-bound backlogs pay little.
                    let behind = behind_reads && g.lanes[w.lane].behind_worker(g.cap);
                    let same_item = w.look_seq == w.seq;
                    let k = out_seen;
                    out_seen += usize::from(out);
                    let out = out && out_read_allowed(tick, k, out_from, out_reads);
                    out_reads += usize::from(out);
                    if switches::sampler_enabled()
                        && sampler_reads(out, w.blocked == 0, tick, same_item, behind)
                    {
                        read_behind |= behind && !tick && !same_item;
                        reads.push(ProcLook {
                            i,
                            tid: w.tid,
                            seq: w.seq,
                            flag: w.item_flag.clone(),
                        });
                    }
                    g.workers[i].look_seq = g.workers[i].seq;
                    None
                }
            };
            if let Some(seen) = seen
                && g.note_seen(i, seen)
            {
                g = self.kick_past(g, i, &mut wake);
            }
            i += 1;
        }
        g.out_read_from = next_out_read(tick, out_from, out_reads, out_seen);
        if !reads.is_empty() {
            drop(g);
            let states: Vec<Option<ProcRead>> = reads
                .iter()
                .map(|r| ProcRead::of(r.tid, r.flag.as_deref()))
                .collect();
            g = self.lock();
            for (r, state) in reads.iter().zip(states) {
                let w = &mut g.workers[r.i];
                // Moved on to another item, or another thread holds the slot.
                if w.seq != r.seq || w.tid != r.tid || !w.watched() {
                    continue;
                }
                let Some(state) = state else { continue };
                let out_before = w.proc_asleep_out == r.seq + 1;
                w.proc_asleep_out = if state == ProcRead::AsleepOutside {
                    r.seq + 1
                } else {
                    0
                };
                if let Some(seen) = proc_verdict(state, out_before)
                    && g.note_seen(r.i, seen)
                {
                    slept = true;
                    item_slept |= seen == Seen::Asleep;
                    g = self.kick_past(g, r.i, &mut wake);
                }
            }
        }
        if let Some(b) = behind_backoff(g.sample_backoff, slept, read_behind) {
            g.sample_backoff = b;
            g.sample_skip = b;
        }
        // Work waits, nobody can take it and no worker is idle: start one
        // now rather than at the next tick.
        if g.starving(g.cap) && !g.manager_active {
            let lane = g.lanes.iter().position(|l| l.unserved(g.cap));
            g = self.create_worker(g, lane.unwrap_or(0));
        }
        self.update_lendable(&g);
        // A sleep this look found starts the pod's partner kicks now, not
        // at this pool's next unlock.
        self.publish_sleep(&g);
        drop(g);
        for w in wake {
            w.run(self);
        }
        if item_slept {
            self.note_blocks();
        }
        again.then_some(next)
    }

    /// Worker `i` just left `nr_running` (asleep, or a CPU hog): wake a
    /// worker for its lane, or start one if none is idle; the wakeup goes
    /// on `wake`.
    pub(super) fn kick_past<'a>(
        &'static self,
        g: crate::sync::MutexGuard<'a, PoolInner>,
        i: usize,
        wake: &mut Vec<Wake>,
    ) -> crate::sync::MutexGuard<'a, PoolInner> {
        let (g, t) = self.hand_over(g, i);
        wake.extend(t);
        g
    }

    /// [`kick_past`](Self::kick_past) for any way of leaving the count (a
    /// `BlockingGuard` too): returns the worker to wake after the unlock.
    pub(super) fn hand_over<'a>(
        &'static self,
        mut g: crate::sync::MutexGuard<'a, PoolInner>,
        i: usize,
    ) -> (crate::sync::MutexGuard<'a, PoolInner>, Option<Wake>) {
        let h = g.workers[i].lane;
        let wake = g.kick(h);
        if wake.is_some() || g.nr_starting > 0 {
            // Woken, or a worker on its way up takes the pool's next item.
            g.count_cm_wakeup(i);
        }
        if wake.is_none() && g.may_create_ahead() {
            g = self.create_worker(g, h);
        }
        (g, wake)
    }
}

/// The watchdog's look over every pool (`tick`: right after a tick, or the
/// first look after the watchdog woke from idle, when every counted worker
/// in an item of a pool with waiting work is read, however briefly it has
/// been on its item).
/// Returns when to look again (`None`: no pool needs it before the next
/// tick).
pub(crate) fn look_all(tick: bool) -> Option<Duration> {
    if !switches::sampler_enabled() {
        return None;
    }
    let n = (NEXT_POOL.load(Ordering::Relaxed) as usize).min(super::MAX_POOLS);
    let mut mono = LazyMono::default();
    let mut next: Option<Duration> = None;
    for p in POOLS[..n].iter().filter_map(|c| c.get()) {
        if let Some(d) = p.look(&mut mono, tick) {
            next = Some(next.map_or(d, |n| n.min(d)));
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_in_the_callback_counts_at_once_one_between_items_after_min_asleep() {
        let young = RunState::Asleep(MIN_ASLEEP / 5);
        let mut next = Duration::MAX;
        assert!(Seen::of_run_state(young, true, &mut next) == Some(Seen::Asleep));
        assert_eq!(next, Duration::MAX, "nothing to look at again");
        assert!(Seen::of_run_state(young, false, &mut next).is_none());
        assert_eq!(
            next,
            MIN_ASLEEP - MIN_ASLEEP / 5,
            "look again once it is old enough"
        );
        let old = RunState::Asleep(MIN_ASLEEP);
        assert!(Seen::of_run_state(old, false, &mut next) == Some(Seen::AsleepOutside));
        assert!(Seen::of_run_state(old, true, &mut next) == Some(Seen::Asleep));
        for awake in [RunState::Running, RunState::Preempted] {
            assert!(Seen::of_run_state(awake, true, &mut next) == Some(Seen::Awake));
        }
    }

    #[test]
    fn a_proc_read_counts_a_sleep_in_the_callback_at_once_one_outside_at_the_second_read() {
        assert_eq!(
            proc_verdict(ProcRead::AsleepInItem, false),
            Some(Seen::Asleep)
        );
        // Outside the callback it may be a wait for the pool lock: the first
        // read gives no verdict, the second in a row on the same item counts.
        assert_eq!(proc_verdict(ProcRead::AsleepOutside, false), None);
        assert_eq!(
            proc_verdict(ProcRead::AsleepOutside, true),
            Some(Seen::AsleepOutside)
        );
        for out_before in [false, true] {
            assert_eq!(proc_verdict(ProcRead::Awake, out_before), Some(Seen::Awake));
        }
    }

    #[test]
    fn a_proc_read_tells_a_sleep_in_an_item_from_one_outside() {
        use std::sync::mpsc;
        // A thread that sleeps with its flag as given, until told to stop.
        let sleeper = |in_item: bool| {
            let flag = Arc::new(AtomicBool::new(in_item));
            let (tid_tx, tid_rx) = mpsc::channel();
            let (stop_tx, stop_rx) = mpsc::channel::<()>();
            let h = std::thread::spawn(move || {
                tid_tx.send(sched::gettid()).unwrap();
                let _ = stop_rx.recv();
            });
            let tid = tid_rx.recv().unwrap();
            (flag, tid, stop_tx, h)
        };
        for (in_item, want) in [
            (true, ProcRead::AsleepInItem),
            (false, ProcRead::AsleepOutside),
        ] {
            let (flag, tid, stop, h) = sleeper(in_item);
            // It blocks in recv() soon; a read may first find it running.
            let mut got = None;
            for _ in 0..2000 {
                got = ProcRead::of(tid, Some(&flag));
                if got == Some(want) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(got, Some(want), "in_item {in_item}");
            stop.send(()).unwrap();
            h.join().unwrap();
        }
        // No flag (a thread that never took one): never the item's sleep.
        let (_, tid, stop, h) = sleeper(true);
        let mut got = None;
        for _ in 0..2000 {
            got = ProcRead::of(tid, None);
            if got == Some(ProcRead::AsleepOutside) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(got, Some(ProcRead::AsleepOutside));
        stop.send(()).unwrap();
        h.join().unwrap();
        // A thread that spins is awake.
        let spin = Arc::new(AtomicBool::new(true));
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let s2 = spin.clone();
        let h = std::thread::spawn(move || {
            tid_tx.send(sched::gettid()).unwrap();
            while s2.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let tid = tid_rx.recv().unwrap();
        let flag = AtomicBool::new(true);
        let mut awake = false;
        for _ in 0..2000 {
            if ProcRead::of(tid, Some(&flag)) == Some(ProcRead::Awake) {
                awake = true;
                break;
            }
        }
        spin.store(false, Ordering::Relaxed);
        h.join().unwrap();
        assert!(awake, "a spinning thread reads as awake");
    }

    #[test]
    fn partners_are_kicked_for_a_second_of_ticks_after_a_sleep_and_never_before_one() {
        assert!(!slept_recently(0, 0), "never slept: no kicks");
        assert!(!slept_recently(0, 5_000));
        // Seen asleep at tick 7 (stored as 8).
        assert!(slept_recently(8, 7));
        assert!(slept_recently(8, 7 + RECENT_SLEEP_TICKS));
        assert!(!slept_recently(8, 8 + RECENT_SLEEP_TICKS));
    }

    #[test]
    fn looks_between_ticks_read_sleepers_a_few_at_a_time_in_turn() {
        // 20 workers out for a sleep: a tick reads them all.
        let look = |tick: bool, from: usize| {
            let mut read = Vec::new();
            for k in 0..20 {
                if out_read_allowed(tick, k, from, read.len()) {
                    read.push(k);
                }
            }
            (next_out_read(tick, from, read.len(), 20), read)
        };
        assert_eq!(look(true, 5).1.len(), 20);
        assert_eq!(look(true, 5).0, 0);
        // Between ticks: a few each, every one in turn, then from the first.
        let mut from = 0;
        let mut all = Vec::new();
        for _ in 0..3 {
            let (next, read) = look(false, from);
            assert!(read.len() <= OUT_READS_BETWEEN_TICKS);
            all.extend(read);
            from = next;
        }
        assert_eq!(all, (0..20).collect::<Vec<_>>());
        assert_eq!(from, 0);
    }

    #[test]
    fn the_sampler_reads_a_worker_that_items_wait_behind_at_once() {
        // Between ticks, on a new item, nothing waiting: not read (a pool of
        // short items costs no reads).
        assert!(!sampler_reads(false, true, false, false, false));
        // Items wait behind it: read at this look, not two looks later (a
        // sleep shorter than two looks used to be found only at a tick).
        assert!(sampler_reads(false, true, false, false, true));
        assert!(sampler_reads(false, true, false, true, false));
        assert!(sampler_reads(false, true, true, false, false));
        // Out of the count for another reason (annotated, CPU-intensive):
        // not the sampler's to read.
        assert!(!sampler_reads(false, false, true, true, true));
        // Out for a sleep: always read, to count it again when it wakes.
        assert!(sampler_reads(true, false, false, false, false));
    }

    #[test]
    fn reads_behind_a_worker_back_off_while_they_find_nobody_asleep() {
        let mut b = 0;
        let mut seen = Vec::new();
        for _ in 0..8 {
            b = behind_backoff(b, false, true).expect("a fruitless read moves it");
            seen.push(b);
        }
        assert_eq!(seen, [1, 3, 7, 15, 31, 63, 63, 63]);
        assert_eq!(behind_backoff(b, false, false), None, "no such read: kept");
        assert_eq!(
            behind_backoff(b, true, true),
            Some(0),
            "a sleep found: over"
        );
    }

    #[test]
    fn a_probe_sees_its_threads_in_item_flag() {
        let Some(probe) = SwitchProbe::open_current() else {
            eprintln!("perf_event_open refused here: nothing to check");
            return;
        };
        assert!(!probe.in_item());
        let flag = switches::item_flag();
        flag.store(true, Ordering::Relaxed);
        assert!(
            probe.in_item(),
            "set on the probe's thread, read through the probe"
        );
        flag.store(false, Ordering::Relaxed);
        assert!(!probe.in_item());
    }
}
