//! Latency histograms: how long a workqueue's items waited between being
//! queued and starting (the *queueing delay*) and how long they ran.
//!
//! # Buckets
//!
//! Values are nanoseconds, in fixed log-linear buckets (the layout of
//! HdrHistogram with three significant bits): every value below
//! [`SUB`] has a bucket of its own; from there each power of two
//! `[2^k, 2^(k+1))` is cut into [`SUB`] equal buckets, so a bucket is at most
//! 1/8 (12.5 %) of the values it holds, from nanoseconds up to
//! `2^`[`MAX_BITS`] ns (about 4.6 minutes); longer values share one last
//! bucket. [`NR_BUCKETS`] counters in all: a recorder is one fixed array
//! (2.3 KiB), never grows, and recording is an index computed with one
//! `leading_zeros` and two adds.
//!
//! # Where they are kept
//!
//! Each pool workqueue (pwq) keeps its own pair of recorders, allocated when
//! the pwq attaches to its pool (never per item), written under the pool
//! lock the worker takes anyway when an item ends: no atomic instruction and
//! no cache line shared with another pool's CPUs (a per-CPU queue's pwqs are
//! per CPU, so its recorders are too). A workqueue's histogram is the sum
//! over its pwqs, and over those that died under attrs changes.
//!
//! # The clock
//!
//! Three reads of `CLOCK_MONOTONIC` per item (queued, started, ended), each
//! through the vDSO (about 20 ns): the queueing thread stamps the item
//! before it takes the pool lock, the worker reads the clock around the
//! callback, outside the lock. Both times are recorded when the item ends.
//! A queue built without histograms reads no clock (see
//! [`WorkqueueBuilder::latency_histograms`](crate::WorkqueueBuilder::latency_histograms)).

use std::time::Duration;

/// Values below this have a bucket each; each power of two above is cut
/// into this many buckets.
pub const SUB: usize = 1 << SUB_BITS;
const SUB_BITS: u32 = 3;
/// Values from `2^MAX_BITS` ns (about 275 s) up share the last bucket.
pub const MAX_BITS: u32 = 38;
/// Buckets of a histogram, the last one for everything from `2^MAX_BITS`.
pub const NR_BUCKETS: usize = SUB + (MAX_BITS - SUB_BITS) as usize * SUB + 1;

/// The bucket of a value in nanoseconds.
///
/// ```
/// use cmwq::hist::{bucket_of, bucket_range};
/// let b = bucket_of(1_000);
/// let (lo, hi) = bucket_range(b);
/// assert!(lo <= 1_000 && 1_000 <= hi);
/// ```
pub fn bucket_of(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let k = 63 - ns.leading_zeros();
    if k >= MAX_BITS {
        return NR_BUCKETS - 1;
    }
    let shift = k - SUB_BITS;
    // The top bit is the power of two; the next SUB_BITS pick the bucket.
    SUB + shift as usize * SUB + ((ns >> shift) as usize & (SUB - 1))
}

/// The lowest and highest value (inclusive, in ns) of bucket `i`; the last
/// bucket's highest is `u64::MAX`.
pub fn bucket_range(i: usize) -> (u64, u64) {
    if i < SUB {
        return (i as u64, i as u64);
    }
    if i >= NR_BUCKETS - 1 {
        return (1 << MAX_BITS, u64::MAX);
    }
    let shift = ((i - SUB) / SUB) as u32;
    let lo = ((SUB + (i - SUB) % SUB) as u64) << shift;
    (lo, lo + (1 << shift) - 1)
}

/// One histogram as the snapshot carries it: the buckets that hold
/// anything, their total and the sum of the values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct Histogram {
    /// Values recorded (the sum of the buckets' counts).
    pub count: u64,
    /// Sum of the values recorded, in ns (wraps after 584 years of them).
    pub sum_ns: u64,
    /// `(bucket, count)` of each bucket that holds a value, by bucket
    /// ([`bucket_range`] gives its values).
    pub buckets: Vec<(u32, u64)>,
}

impl Histogram {
    /// Values recorded at most `ns` (exact where `ns` is a bucket's highest
    /// value; otherwise counts the whole bucket holding `ns`).
    pub fn count_le(&self, ns: u64) -> u64 {
        let last = bucket_of(ns) as u32;
        self.buckets
            .iter()
            .filter(|(b, _)| *b <= last)
            .map(|(_, n)| n)
            .sum()
    }

    /// The `q` quantile (0.0 to 1.0) in ns: the highest value of the bucket
    /// that holds the value of rank ⌈q·count⌉ (the lowest value of the last,
    /// unbounded bucket), so the true quantile is in the same bucket, at
    /// most 12.5 % below. `None` when nothing was recorded.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for &(b, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                let (lo, hi) = bucket_range(b as usize);
                return Some(if b as usize == NR_BUCKETS - 1 { lo } else { hi });
            }
        }
        // Only if count disagrees with the buckets (a hand-built value).
        self.buckets
            .last()
            .map(|&(b, _)| bucket_range(b as usize).1)
    }

    /// The median (see [`quantile_ns`](Self::quantile_ns)).
    pub fn p50(&self) -> Option<Duration> {
        self.quantile_ns(0.5).map(Duration::from_nanos)
    }

    /// The 99th percentile (see [`quantile_ns`](Self::quantile_ns)).
    pub fn p99(&self) -> Option<Duration> {
        self.quantile_ns(0.99).map(Duration::from_nanos)
    }

    /// What was recorded since `earlier` (a snapshot of the same histogram
    /// taken before this one): per bucket, this count minus that one.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let mut out = Histogram {
            count: 0,
            sum_ns: self.sum_ns.wrapping_sub(earlier.sum_ns),
            buckets: Vec::new(),
        };
        for &(b, n) in &self.buckets {
            let before = earlier
                .buckets
                .iter()
                .find(|(e, _)| *e == b)
                .map_or(0, |(_, n)| *n);
            let d = n.saturating_sub(before);
            if d > 0 {
                out.buckets.push((b, d));
                out.count += d;
            }
        }
        out
    }
}

/// A workqueue's two latency histograms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct WqLatency {
    /// From queued (put on a worklist; a delayed item once its timer fired)
    /// to its callback starting.
    pub queue: Histogram,
    /// From the callback starting to it returning (or panicking).
    pub run: Histogram,
}

impl WqLatency {
    /// What was recorded since `earlier` (see [`Histogram::since`]).
    pub fn since(&self, earlier: &WqLatency) -> WqLatency {
        WqLatency {
            queue: self.queue.since(&earlier.queue),
            run: self.run.since(&earlier.run),
        }
    }
}

/// One fixed-size histogram as the engine fills it.
#[derive(Clone)]
struct Recorder {
    counts: [u64; NR_BUCKETS],
    sum: u64,
}

impl Recorder {
    const EMPTY: Recorder = Recorder {
        counts: [0; NR_BUCKETS],
        sum: 0,
    };

    #[inline]
    fn record(&mut self, ns: u64) {
        self.counts[bucket_of(ns)] += 1;
        self.sum = self.sum.wrapping_add(ns);
    }

    fn add(&mut self, o: &Recorder) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.sum = self.sum.wrapping_add(o.sum);
    }

    fn snap(&self) -> Histogram {
        let buckets: Vec<(u32, u64)> = (0..NR_BUCKETS)
            .filter(|&i| self.counts[i] != 0)
            .map(|i| (i as u32, self.counts[i]))
            .collect();
        Histogram {
            count: buckets.iter().map(|(_, n)| n).sum(),
            sum_ns: self.sum,
            buckets,
        }
    }
}

/// A pwq's pair of recorders (queueing delay, run time), or nothing for a
/// queue built without histograms. `L:` under its pool's lock, like the
/// pwq's other counters.
#[derive(Clone, Default)]
pub(crate) struct PwqLatency(Option<Box<[Recorder; 2]>>);

impl PwqLatency {
    /// Recorders for a pwq of a queue with histograms (`on`), or none.
    pub(crate) fn new(on: bool) -> PwqLatency {
        PwqLatency(on.then(|| Box::new([Recorder::EMPTY, Recorder::EMPTY])))
    }

    /// Records the times of an item that ended (nothing if it was not
    /// stamped, or this pwq keeps no histograms).
    #[inline]
    pub(crate) fn record(&mut self, t: &ItemTimes) {
        if t.queued == 0 {
            return;
        }
        if let Some(r) = &mut self.0 {
            r[0].record(t.started.saturating_sub(t.queued));
            r[1].record(t.ended.saturating_sub(t.started));
        }
    }

    /// Adds `o`'s counts to these (nothing if these keep none).
    pub(crate) fn add(&mut self, o: &PwqLatency) {
        if let (Some(a), Some(b)) = (&mut self.0, &o.0) {
            a[0].add(&b[0]);
            a[1].add(&b[1]);
        }
    }

    /// The histograms, if kept.
    pub(crate) fn snap(&self) -> Option<WqLatency> {
        self.0.as_ref().map(|r| WqLatency {
            queue: r[0].snap(),
            run: r[1].snap(),
        })
    }
}

/// `CLOCK_MONOTONIC` in ns: never 0 once the machine has been up a
/// nanosecond, so 0 can mean "not stamped".
#[inline]
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively
    // borrowed `ts`; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The three times of one item on a worker's stack: queued (0: not
/// stamped, nothing read or recorded), started and ended.
#[derive(Clone, Copy, Default)]
pub(crate) struct ItemTimes {
    queued: u64,
    started: u64,
    ended: u64,
}

impl ItemTimes {
    /// An item's times, from the stamp its queuer left (0 if none).
    #[inline]
    pub(crate) fn queued_at(stamp: u64) -> ItemTimes {
        ItemTimes {
            queued: stamp,
            ..ItemTimes::default()
        }
    }

    /// The callback starts now.
    #[inline]
    pub(crate) fn start(&mut self) {
        if self.queued != 0 {
            self.started = now_ns();
        }
    }

    /// The callback ended now.
    #[inline]
    pub(crate) fn end(&mut self) {
        if self.queued != 0 {
            self.ended = now_ns();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_values_in_order() {
        assert_eq!(NR_BUCKETS, 289);
        let mut next = 0;
        for i in 0..NR_BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert_eq!(lo, next, "bucket {i} starts where {} ended", i.max(1) - 1);
            assert!(hi >= lo);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi), i);
            // At most 1/8 of its values wide.
            if i + 1 < NR_BUCKETS {
                assert!(
                    (hi - lo + 1) * SUB as u64 <= lo.max(SUB as u64),
                    "bucket {i}"
                );
            }
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
        assert_eq!(bucket_of(u64::MAX), NR_BUCKETS - 1);
        assert_eq!(bucket_of((1 << MAX_BITS) - 1), NR_BUCKETS - 2);
    }

    /// Fills a recorder the way the engine does, from (queued, started, ended).
    fn filled(values: impl IntoIterator<Item = u64>) -> Histogram {
        let mut p = PwqLatency::new(true);
        for v in values {
            // Queued at 1000, started after `v`, ran 5 ns.
            let mut t = ItemTimes::queued_at(1000);
            t.started = 1000 + v;
            t.ended = t.started + 5;
            p.record(&t);
        }
        p.snap().unwrap().queue
    }

    #[test]
    fn quantiles_are_within_one_bucket_of_the_truth() {
        // 1..=100_000 ns uniform, then a long tail: 2 % at 10 ms.
        let mut vals: Vec<u64> = (1..=100_000).collect();
        vals.extend(std::iter::repeat_n(10_000_000, 2_000));
        let h = filled(vals.iter().copied());
        assert_eq!(h.count, vals.len() as u64);
        assert_eq!(h.sum_ns, vals.iter().sum::<u64>());
        vals.sort_unstable();
        for q in [0.0, 0.1, 0.5, 0.9, 0.98, 0.99, 0.999, 1.0] {
            let rank = ((q * vals.len() as f64).ceil() as usize).max(1);
            let truth = vals[rank - 1];
            let got = h.quantile_ns(q).unwrap();
            assert_eq!(bucket_of(got), bucket_of(truth), "q={q}: {got} vs {truth}");
            assert!(
                got >= truth && got - truth <= truth / 8,
                "q={q}: {got} vs {truth}"
            );
        }
        assert_eq!(
            h.p50(),
            Some(Duration::from_nanos(h.quantile_ns(0.5).unwrap()))
        );
        assert_eq!(h.p99(), Some(Duration::from_nanos(10_485_759)));
        assert_eq!(filled([]).p99(), None);
    }

    #[test]
    fn counts_and_sums_add_up() {
        let h = filled([0, 7, 8, 1000, 1001, 1 << 40]);
        assert_eq!(h.count, 6);
        assert_eq!(h.buckets.iter().map(|(_, n)| n).sum::<u64>(), 6);
        assert_eq!(h.count_le(7), 2);
        assert_eq!(h.count_le(1 << 37), 5);
        assert_eq!(h.count_le(u64::MAX), 6);
        assert_eq!(h.quantile_ns(1.0), Some(1 << MAX_BITS), "the open bucket");
        // Run times: 5 ns each.
        let mut p = PwqLatency::new(true);
        let mut t = ItemTimes::queued_at(10);
        t.started = 20;
        t.ended = 25;
        p.record(&t);
        p.record(&ItemTimes::default());
        let mut sum = PwqLatency::new(true);
        sum.add(&p);
        sum.add(&p);
        let s = sum.snap().unwrap();
        assert_eq!((s.queue.count, s.queue.sum_ns), (2, 20));
        assert_eq!((s.run.count, s.run.sum_ns), (2, 10));
        assert_eq!(s.run.buckets, vec![(5, 2)]);
        assert!(PwqLatency::new(false).snap().is_none());
        // Deltas.
        let later = filled([7, 8, 8, 9]);
        let d = later.since(&filled([8]));
        assert_eq!(d.count, 3);
        assert_eq!(d.buckets, vec![(7, 1), (8, 1), (9, 1)]);
    }

    #[test]
    fn the_clock_moves_and_is_never_zero() {
        let a = now_ns();
        let b = now_ns();
        assert!(a != 0 && b >= a);
        let mut t = ItemTimes::queued_at(0);
        t.start();
        t.end();
        assert_eq!(
            (t.started, t.ended),
            (0, 0),
            "an unstamped item reads no clock"
        );
    }
}
