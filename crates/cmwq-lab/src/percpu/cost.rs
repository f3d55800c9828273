//! The `kmalloc_bench` analog: cycles per allocation or free on a per-CPU
//! object cache, reached with no lock, through `PerCpu` in `Local` mode, and
//! through `PerCpu` in `Qpw` mode.
//!
//! One thread, pinned to the CPU it starts on (the kernel benchmark disables
//! preemption), allocates `burst` objects, then frees them, until `ops`
//! allocations are done; the counter is read before and after, and the run's
//! figure is ticks / (2 × ops). Runs of the variants are interleaved (run 1 of
//! each, then run 2 of each, …) so that drift of the machine hits every variant
//! alike. Each variant keeps its caches warm across its runs, as the kernel's
//! slab caches are.
//!
//! The `nolock` variant reaches its magazines as `&mut` through `sched_getcpu`
//! and an array: the same per-CPU lookup, no lock. It is only correct because
//! one thread owns the array and nothing drains it remotely; it stands for the
//! kernel's `local_lock` fast path, which user space cannot have (see
//! `cmwq::percpu`).

use serde::Serialize;

use crate::bench::sys;
use cmwq::percpu::PerCpu;

use super::Variant;
use super::cache::{CAPACITY, Depot, Magazine, Obj};
use super::clock;
use crate::ab::stats::Summary;
use crate::limits::Limits;

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct CostConfig {
    /// Variants, in table order.
    pub variants: Vec<Variant>,
    /// Timed runs per variant (at least 1).
    pub runs: usize,
    /// Allocations per run (each is followed by a free; at least 1).
    pub ops: usize,
    /// Objects allocated before they are freed again (at least 1).
    pub burst: usize,
}

/// Most timed runs per variant accepted (`--runs`).
pub const MAX_RUNS: usize = 100_000;
/// Most allocations per run accepted (`--ops`): 2^40.
pub const MAX_OPS: usize = 1 << 40;
/// Bytes per object of a variant's depot (`--burst` plus two magazines):
/// the 64-byte object, the allocator's header and the pointers to it.
pub const BYTES_PER_OBJECT: u64 = 96;

impl CostConfig {
    /// Rejects values the run cannot honour, naming the option and the limit:
    /// every count at least 1, `runs` and `ops` within [`MAX_RUNS`] and
    /// [`MAX_OPS`], and the depots' objects, `variants × (burst + 2 ×
    /// CAPACITY) × BYTES_PER_OBJECT`, within this process's memory [`Limits`].
    pub fn validate(&self) -> Result<(), String> {
        self.validate_with(&Limits::of_this_process())
    }

    /// [`validate`](Self::validate) against the given limits.
    pub fn validate_with(&self, limits: &Limits) -> Result<(), String> {
        if self.runs == 0 || self.ops == 0 || self.burst == 0 {
            return Err(format!(
                "--runs {}, --ops {}, --burst {}: each must be at least 1",
                self.runs, self.ops, self.burst
            ));
        }
        if self.variants.is_empty() {
            return Err("--mode: no variant to run".into());
        }
        if self.runs > MAX_RUNS {
            return Err(format!("--runs {}: at most {MAX_RUNS}", self.runs));
        }
        if self.ops > MAX_OPS {
            return Err(format!("--ops {}: at most {MAX_OPS}", self.ops));
        }
        let v = self.variants.len() as u64;
        let need = (self.burst as u64)
            .checked_add(2 * CAPACITY as u64)
            .and_then(|n| n.checked_mul(BYTES_PER_OBJECT))
            .and_then(|n| n.checked_mul(v));
        let max = (limits.memory / v / BYTES_PER_OBJECT).saturating_sub(2 * CAPACITY as u64);
        limits.check_memory(
            "--burst",
            self.burst,
            need,
            &format!(
                "{} variant(s) x {} objects ({BYTES_PER_OBJECT} bytes each)",
                v, self.burst
            ),
            &format!("at most {max} objects in a burst"),
        )
    }
}

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig {
            variants: Variant::ALL.to_vec(),
            runs: 10,
            ops: 1_000_000,
            burst: 16,
        }
    }
}

/// One variant's runs.
#[derive(Clone, Debug, Serialize)]
pub struct CostRow {
    /// The variant's name.
    pub mode: &'static str,
    /// Counter ticks per operation (an allocation or a free), one per run.
    pub cycles_per_op: Vec<f64>,
    /// min, mean, median, max (and n, stdev) of `cycles_per_op`.
    pub summary: Summary,
}

/// The benchmark's result.
#[derive(Clone, Debug, Serialize)]
pub struct CostReport {
    /// What ran.
    pub config: CostConfig,
    /// What a "cycle" is: `tsc` or `ns` (see [`clock::UNIT`]).
    pub clock: &'static str,
    /// Counter ticks per nanosecond (to turn cycles into time).
    pub ticks_per_ns: f64,
    /// The CPU the benchmark thread was pinned to.
    pub cpu: usize,
    /// One row per variant, in the order asked.
    pub rows: Vec<CostRow>,
}

/// The fast path's access to the caches, without or with `PerCpu`.
trait Caches {
    fn with<R>(&mut self, f: impl FnOnce(&mut Magazine) -> R) -> R;
}

struct Unlocked(Vec<Magazine>);

impl Caches for Unlocked {
    #[inline]
    fn with<R>(&mut self, f: impl FnOnce(&mut Magazine) -> R) -> R {
        let n = self.0.len();
        f(&mut self.0[sys::current_cpu() % n])
    }
}

struct Locked<'a>(&'a PerCpu<Magazine>);

impl Caches for Locked<'_> {
    #[inline]
    fn with<R>(&mut self, f: impl FnOnce(&mut Magazine) -> R) -> R {
        self.0.with_local(f)
    }
}

#[inline(never)]
fn one_run(
    c: &mut impl Caches,
    depot: &Depot,
    ops: usize,
    burst: usize,
    hand: &mut Vec<Obj>,
) -> f64 {
    let t0 = clock::cycles();
    let mut done = 0;
    while done < ops {
        let k = burst.min(ops - done);
        for _ in 0..k {
            let mut o = c.with(|m| m.alloc(depot));
            o[0] = o[0].wrapping_add(1);
            hand.push(o);
        }
        for o in hand.drain(..) {
            c.with(|m| m.free(o, depot));
        }
        done += k;
    }
    let t1 = clock::cycles();
    t1.wrapping_sub(t0) as f64 / (2 * ops) as f64
}

enum Subject {
    Unlocked(Unlocked),
    Locked(PerCpu<Magazine>),
}

/// Runs the benchmark; `progress(done, total)` is called after every run.
pub fn run_cost(
    cfg: &CostConfig,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<CostReport, String> {
    cfg.validate()?;
    let ticks_per_ns = clock::ticks_per_ns();
    std::thread::scope(|s| {
        s.spawn(|| {
            let cpu = sys::current_cpu();
            // The report names this CPU: a failed pin would make it a lie.
            sys::pin_current_thread(cpu)?;
            let mut subjects = Vec::new();
            for &v in &cfg.variants {
                let subject = match v.mode() {
                    None => Subject::Unlocked(Unlocked(
                        (0..cmwq::percpu::nr_possible_cpus())
                            .map(|_| Magazine::new())
                            .collect(),
                    )),
                    Some(m) => Subject::Locked(
                        PerCpu::new(m, |_| Magazine::new()).map_err(|e| e.to_string())?,
                    ),
                };
                let depot = Depot::with_objects(cfg.burst + 2 * CAPACITY);
                subjects.push((v, subject, depot, Vec::with_capacity(cfg.burst)));
            }
            let mut results = vec![Vec::with_capacity(cfg.runs); cfg.variants.len()];
            let total = cfg.runs * cfg.variants.len();
            // One untimed warm-up pass of each, then the interleaved runs.
            for round in 0..=cfg.runs {
                let ops = if round == 0 {
                    cfg.ops.min(10_000)
                } else {
                    cfg.ops
                };
                for (i, (_, subject, depot, hand)) in subjects.iter_mut().enumerate() {
                    let x = match subject {
                        Subject::Unlocked(u) => one_run(u, depot, ops, cfg.burst, hand),
                        Subject::Locked(p) => one_run(&mut Locked(p), depot, ops, cfg.burst, hand),
                    };
                    if round > 0 {
                        results[i].push(x);
                        progress((round - 1) * cfg.variants.len() + i + 1, total);
                    }
                }
            }
            let rows = subjects
                .iter()
                .zip(results)
                .map(|((v, ..), xs)| {
                    Ok(CostRow {
                        mode: v.name(),
                        summary: Summary::new(&xs).map_err(|e| e.to_string())?,
                        cycles_per_op: xs,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(CostReport {
                config: cfg.clone(),
                clock: clock::UNIT,
                ticks_per_ns,
                cpu,
                rows,
            })
        })
        .join()
        .map_err(|p| {
            format!(
                "the benchmark thread panicked: {}",
                crate::limits::panic_message(&*p)
            )
        })?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_name_the_option_and_the_limit() {
        let limits = Limits {
            memory: 1 << 20,
            threads: 1,
        };
        let ok = CostConfig::default();
        assert_eq!(ok.validate_with(&limits), Ok(()));
        let bad = |f: fn(&mut CostConfig), needle: &str| {
            let mut c = ok.clone();
            f(&mut c);
            let e = c.validate_with(&limits).unwrap_err();
            assert!(
                e.starts_with(needle),
                "{e:?} does not start with {needle:?}"
            );
        };
        bad(|c| c.burst = 0, "--runs 10, --ops 1000000, --burst 0");
        bad(|c| c.runs = MAX_RUNS + 1, "--runs 100001: at most");
        bad(
            |c| c.ops = usize::MAX,
            "--ops 18446744073709551615: at most",
        );
        bad(
            |c| c.burst = usize::MAX,
            "--burst 18446744073709551615: 3 variant(s)",
        );
        // 1 MiB / 3 variants / 96 bytes = 3640 objects, 128 of them the magazines'.
        bad(|c| c.burst = 3513, "--burst 3513");
        let mut c = ok.clone();
        c.burst = 3512;
        assert_eq!(c.validate_with(&limits), Ok(()));
    }
}
