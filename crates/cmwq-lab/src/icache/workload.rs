//! The study's two workloads, chosen the way seed 001 chose its benchmarks.
//!
//! Both run the same queue/run loop on one unbound workqueue: the calling
//! thread is the producer; it announces a batch on a
//! [`Completion`], queues `batch` distinct work
//! items, and sleeps until all ran; repeat until `items` ran. Every item goes
//! through the pool lock's release path (`unlock_wake`) on queue and on run,
//! so both builds execute the variable on every item. What differs is the
//! work function:
//!
//! - [`Workload::Resident`]: a few arithmetic instructions. The whole loop
//!   (queue, worker, completion) stays resident in a 32 KiB L1i: this is the
//!   locktorture-style microbenchmark of the seed, expected to show nothing.
//! - [`Workload::Frontend`]: each item runs [`FRONTEND_STAGES_PER_ITEM`] of
//!   [`STAGES`] distinct parsing/hashing stages, chosen by the item number,
//!   over a varied slice of a fixed input. The stages are separate
//!   functions totalling several hundred KiB of code, so between two passes
//!   through the pool's code the L1i has been refilled with unrelated code:
//!   the pool's own lines miss again on every item, and any bytes the
//!   inlined unlock adds to them are paid for on every item, as nginx's
//!   connection churn pays for the kernel's. The code footprint is checked by
//!   the study from the symbol table (`icache::workload::stage` functions).
//!
//! The checksum of all items is printed with the results, so the compiler
//! cannot drop the work and a wrong run is visible.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::bench::Completion;
use crate::limits::Limits;

/// Which work function the items run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// A tiny work function: the loop stays L1i-resident.
    Resident,
    /// A large code footprint per item: front-end (fetch) bound.
    Frontend,
}

impl Workload {
    /// Both, in report order.
    pub const ALL: [Workload; 2] = [Workload::Resident, Workload::Frontend];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Resident => "resident",
            Workload::Frontend => "frontend",
        }
    }

    /// Parses `resident` or `frontend`.
    pub fn parse(s: &str) -> Result<Workload, String> {
        match s {
            "resident" => Ok(Workload::Resident),
            "frontend" => Ok(Workload::Frontend),
            _ => Err(format!(
                "unknown workload {s:?}: expected resident or frontend"
            )),
        }
    }
}

/// What one run does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WorkloadConfig {
    /// The work function.
    pub workload: Workload,
    /// Items to run in total (rounded up to whole batches).
    pub items: u64,
    /// Items in flight per batch (distinct work items).
    pub batch: usize,
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct WorkloadResult {
    /// The configuration.
    pub config: WorkloadConfig,
    /// Items that ran.
    pub items: u64,
    /// Wall time of the queue/run loop, seconds.
    pub elapsed_s: f64,
    /// `items / elapsed_s`.
    pub items_per_sec: f64,
    /// XOR of every item's result.
    pub checksum: u64,
}

/// Number of distinct stage functions of the front-end workload.
pub const STAGES: usize = 256;
/// Stages each front-end item runs.
pub const FRONTEND_STAGES_PER_ITEM: usize = 48;
const INPUT_LEN: usize = 8192;

/// SplitMix64 finaliser, usable in constants.
const fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The constant `i` of stage `k`.
const fn c(k: u64, i: u64) -> u64 {
    mix(k.wrapping_mul(64).wrapping_add(i)) | 1
}

/// A rotation amount in 1..=63 from stage `k`, slot `i`.
const fn r(k: u64, i: u64) -> u32 {
    (c(k, i) % 63) as u32 + 1
}

/// One stage: a byte-class tokenizer whose every class updates the state
/// differently, with constants unique to `K`, so no two stages share code.
#[inline(never)]
fn stage<const K: u64>(data: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ c(K, 0);
    let mut acc = c(K, 1);
    let mut run = 0u64;
    for &b in data {
        let x = b as u64;
        match b & 15 {
            0 => h = (h ^ x).wrapping_mul(c(K, 2)).rotate_left(r(K, 3)),
            1 => h = h.wrapping_add(x.wrapping_mul(c(K, 4))) ^ (h >> r(K, 5)),
            2 => acc = acc.rotate_left(r(K, 6)).wrapping_add(h ^ c(K, 7)),
            3 => {
                run += 1;
                h ^= run.wrapping_mul(c(K, 8));
            }
            4 => h = (h.wrapping_sub(c(K, 9)) ^ acc).rotate_right(r(K, 10)),
            5 => acc ^= (x << (K % 56)).wrapping_add(c(K, 11)),
            6 => h = h.wrapping_mul(c(K, 12)).wrapping_add(acc >> 7),
            7 => {
                if h & 1 == 0 {
                    h = h.wrapping_add(c(K, 13));
                } else {
                    acc = acc.wrapping_sub(c(K, 14) ^ x);
                }
            }
            8 => h = (h | c(K, 15)).wrapping_sub(x.rotate_left(r(K, 16))),
            9 => acc = (acc ^ h).wrapping_mul(c(K, 17)),
            10 => {
                run = run.wrapping_mul(3) ^ x;
                h = h.rotate_left((run % 63) as u32 + 1) ^ c(K, 18);
            }
            11 => h ^= acc.wrapping_mul(x | c(K, 19)),
            12 => acc = acc.wrapping_add(h.rotate_right(r(K, 20))) ^ c(K, 21),
            13 => h = (h & c(K, 22)).wrapping_add(acc | x),
            14 => {
                let t = h.wrapping_mul(c(K, 23));
                h = t ^ (t >> r(K, 24)) ^ acc;
            }
            _ => {
                acc = acc.wrapping_mul(c(K, 25)).wrapping_add(x);
                h = h.rotate_left(r(K, 26));
            }
        }
        if b > 0xE0 {
            h = h.wrapping_add(acc).wrapping_mul(c(K, 27));
            acc = acc.rotate_left(r(K, 28));
        }
    }
    mix(h ^ acc.wrapping_mul(c(K, 29)) ^ run)
}

type StageFn = fn(&[u8], u64) -> u64;

macro_rules! stage_row {
    ($r:literal) => {
        [
            stage::<{ $r * 16 }>,
            stage::<{ $r * 16 + 1 }>,
            stage::<{ $r * 16 + 2 }>,
            stage::<{ $r * 16 + 3 }>,
            stage::<{ $r * 16 + 4 }>,
            stage::<{ $r * 16 + 5 }>,
            stage::<{ $r * 16 + 6 }>,
            stage::<{ $r * 16 + 7 }>,
            stage::<{ $r * 16 + 8 }>,
            stage::<{ $r * 16 + 9 }>,
            stage::<{ $r * 16 + 10 }>,
            stage::<{ $r * 16 + 11 }>,
            stage::<{ $r * 16 + 12 }>,
            stage::<{ $r * 16 + 13 }>,
            stage::<{ $r * 16 + 14 }>,
            stage::<{ $r * 16 + 15 }>,
        ]
    };
}

/// Every stage, 16 × 16.
static STAGE_TABLE: [[StageFn; 16]; 16] = [
    stage_row!(0),
    stage_row!(1),
    stage_row!(2),
    stage_row!(3),
    stage_row!(4),
    stage_row!(5),
    stage_row!(6),
    stage_row!(7),
    stage_row!(8),
    stage_row!(9),
    stage_row!(10),
    stage_row!(11),
    stage_row!(12),
    stage_row!(13),
    stage_row!(14),
    stage_row!(15),
];

/// The fixed, varied input the stages parse.
fn input() -> Vec<u8> {
    (0..INPUT_LEN as u64)
        .map(|i| (mix(i) >> 24) as u8)
        .collect()
}

/// One front-end item: [`FRONTEND_STAGES_PER_ITEM`] stages picked by the
/// item number, each over its own short slice of the input (12..=27 bytes):
/// much code touched, little time in any one place.
pub fn frontend_item(input: &[u8], id: u64) -> u64 {
    let mut h = id;
    for s in 0..FRONTEND_STAGES_PER_ITEM as u64 {
        let z = mix(id.wrapping_mul(FRONTEND_STAGES_PER_ITEM as u64) ^ s);
        let which = (z % STAGES as u64) as usize;
        let len = 12 + ((z >> 16) % 16) as usize;
        let start = ((z >> 32) as usize) % (input.len() - len);
        h ^= STAGE_TABLE[which / 16][which % 16](&input[start..start + len], h);
    }
    h
}

/// One resident item: a handful of instructions.
#[inline]
pub fn resident_item(id: u64) -> u64 {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
}

/// Most items a run accepts (`--items`): 2^40.
pub const MAX_ITEMS: u64 = 1 << 40;

/// Bytes per item in flight: a `cmwq::Work` and its closure, rounded up.
pub const BYTES_PER_SLOT: u64 = 512;

impl WorkloadConfig {
    /// Rejects values the run cannot honour, naming the option and the
    /// limit: `items` in 1..=[`MAX_ITEMS`], `batch` at least 1 and its work
    /// items ([`BYTES_PER_SLOT`] each) within the memory [`Limits`].
    pub fn validate_with(&self, limits: &Limits) -> Result<(), String> {
        if self.items == 0 {
            return Err("--items 0: need at least one item".into());
        }
        if self.items > MAX_ITEMS {
            return Err(format!("--items {}: at most {MAX_ITEMS}", self.items));
        }
        if self.batch == 0 {
            return Err("--batch 0: need at least one item in flight".into());
        }
        limits.check_memory(
            "--batch",
            self.batch,
            (self.batch as u64).checked_mul(BYTES_PER_SLOT),
            &format!("{} work items ({BYTES_PER_SLOT} bytes each)", self.batch),
            &format!("at most {} items in flight", limits.memory / BYTES_PER_SLOT),
        )
    }
}

/// Runs one workload to the end on a fresh unbound workqueue.
pub fn run(cfg: WorkloadConfig) -> Result<WorkloadResult, String> {
    cfg.validate_with(&Limits::of_this_process())?;
    let wq = cmwq::Workqueue::builder("icache_wq")
        .unbound()
        .build()
        .map_err(|e| format!("building icache_wq: {e}"))?;
    let done = Arc::new(Completion::new());
    let checksum = Arc::new(AtomicU64::new(0));
    let input: Arc<[u8]> = input().into();
    let batch = cfg.batch as u64;
    let works: Vec<cmwq::Work> = (0..batch)
        .map(|slot| {
            let done = done.clone();
            let sum = checksum.clone();
            let input = input.clone();
            let calls = AtomicU64::new(0);
            let kind = cfg.workload;
            cmwq::Work::new(move || {
                let id = calls.fetch_add(1, Ordering::Relaxed) * batch + slot;
                let h = match kind {
                    Workload::Resident => resident_item(id),
                    Workload::Frontend => frontend_item(&input, id),
                };
                sum.fetch_xor(h, Ordering::Relaxed);
                done.complete();
            })
        })
        .collect();
    let rounds = cfg.items.div_ceil(batch);
    let t0 = Instant::now();
    for _ in 0..rounds {
        done.expect(batch);
        for w in &works {
            if !wq.queue(w) {
                return Err("a work item was still pending after its batch completed".into());
            }
        }
        if !done.wait() {
            return Err("completion aborted".into());
        }
    }
    let elapsed_s = t0.elapsed().as_secs_f64();
    let items = done.completed();
    if items != rounds * batch {
        return Err(format!("{items} items ran, {} queued", rounds * batch));
    }
    Ok(WorkloadResult {
        config: cfg,
        items,
        elapsed_s,
        items_per_sec: items as f64 / elapsed_s.max(1e-9),
        checksum: checksum.load(Ordering::Relaxed),
    })
}

impl WorkloadResult {
    /// The JSON document `cmwq icache-workload --json` prints: the result and
    /// a `"metrics"` map that `cmwq compare` reads.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "schema": "cmwq-icache-workload/1",
            "result": self,
            "metrics": { "throughput items/s": self.items_per_sec },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_workloads_run_every_item_and_are_deterministic() {
        for w in Workload::ALL {
            let cfg = WorkloadConfig {
                workload: w,
                items: 100,
                batch: 8,
            };
            let a = run(cfg).unwrap();
            let b = run(cfg).unwrap();
            assert_eq!(a.items, 104, "{w:?}: rounded up to whole batches");
            assert_eq!(a.checksum, b.checksum, "{w:?}");
            assert_ne!(a.checksum, 0);
        }
        let want = (0..104u64).fold(0, |s, id| s ^ resident_item(id));
        let got = run(WorkloadConfig {
            workload: Workload::Resident,
            items: 104,
            batch: 8,
        })
        .unwrap();
        assert_eq!(got.checksum, want);
    }

    #[test]
    fn stages_are_distinct_functions() {
        let input = input();
        let mut outs: Vec<u64> = (0..STAGES)
            .map(|i| STAGE_TABLE[i / 16][i % 16](&input[..100], 7))
            .collect();
        outs.sort_unstable();
        outs.dedup();
        assert_eq!(outs.len(), STAGES);
        assert_ne!(frontend_item(&input, 1), frontend_item(&input, 2));
    }

    #[test]
    fn bad_config_and_names() {
        let cfg = WorkloadConfig {
            workload: Workload::Resident,
            items: 0,
            batch: 1,
        };
        assert!(run(cfg).unwrap_err().contains("--items 0"));
        assert!(
            run(WorkloadConfig {
                items: 1,
                batch: 0,
                ..cfg
            })
            .unwrap_err()
            .contains("--batch 0")
        );
        let limits = Limits {
            memory: 1 << 20,
            threads: 1,
        };
        let e = WorkloadConfig { batch: 2049, ..cfg };
        let e = WorkloadConfig { items: 1, ..e }
            .validate_with(&limits)
            .unwrap_err();
        assert!(e.starts_with("--batch 2049: 2049 work items"), "{e}");
        assert!(e.contains("at most 2048 items in flight"), "{e}");
        let e = run(WorkloadConfig {
            items: 1,
            batch: usize::MAX,
            ..cfg
        })
        .unwrap_err();
        assert!(e.starts_with("--batch 18446744073709551615"), "{e}");
        assert!(
            run(WorkloadConfig {
                items: u64::MAX,
                ..cfg
            })
            .unwrap_err()
            .starts_with("--items 18446744073709551615: at most")
        );
        assert_eq!(Workload::parse("frontend"), Ok(Workload::Frontend));
        assert!(Workload::parse("nginx").unwrap_err().contains("nginx"));
    }
}
