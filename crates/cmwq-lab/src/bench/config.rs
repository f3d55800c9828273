//! What a bench run is asked to do, and the checks that reject nonsense early.

use cmwq::topology::Scope;

use crate::limits::Limits;

/// The scopes in the order the kernel benchmark runs them
/// (`cpu, smt, cache_shard, cache, numa, system`; note `cache_shard` before `cache`,
/// unlike the enum order of [`Scope::ALL`]).
pub const KERNEL_SCOPE_ORDER: [Scope; 6] = [
    Scope::Cpu,
    Scope::Smt,
    Scope::CacheShard,
    Scope::Cache,
    Scope::Numa,
    Scope::System,
];

/// Most producer threads accepted (the kernel caps `nr_threads` too).
pub const MAX_THREADS: usize = crate::limits::MAX_THREADS;

/// Bytes a run keeps per item: its enqueue and round-trip samples (8 bytes
/// each), once in the producer and once merged in the main thread.
pub const BYTES_PER_ITEM: u64 = 32;

/// Bytes a run keeps per in-flight slot of a producer: its start time and
/// the executor's work item (cmwq's `Work` and its closure), rounded up.
pub const BYTES_PER_SLOT: u64 = 512;

/// Most rounds accepted (every run's result is kept for the summary).
pub const MAX_ROUNDS: usize = 10_000;

/// A run in which no item completed for this long fails (a lost item would
/// otherwise hang the bench): the main thread's watchdog aborts the completions.
pub const STALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Parameters of one `cmwq bench` invocation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BenchConfig {
    /// Producer threads `P` (`--threads`; kernel `nr_threads`).
    pub threads: usize,
    /// Items per producer `N` (`--items`; kernel `wq_items`).
    pub items: usize,
    /// Items in flight per producer `B` (`--batch`; 1 = the kernel's one in flight).
    pub batch: usize,
    /// Scopes run for scoped executors (cmwq), in kernel order.
    pub scopes: Vec<Scope>,
    /// Peers to run beside the subjects (`--vs`), in `--vs all` order.
    pub vs: Vec<String>,
    /// Rounds (`--rounds`): every executor/scope runs once per round, interleaved.
    pub rounds: usize,
    /// Worker threads for every peer (`--workers`).
    pub workers: usize,
    /// `--synthetic SPEC`, handed to the executors untouched.
    pub synthetic: Option<String>,
    /// cmwq: bind workers to their pod (`affinity_strict`, `--strict`).
    pub strict: bool,
    /// cmwq: wake the picked worker while holding the pool lock (`--wake under-lock`).
    pub wake_under_lock: bool,
    /// cmwq: unbound pools wake a worker per waiting item, as the kernel
    /// (`--unbound-concurrency unmanaged`), instead of one running worker per CPU.
    #[serde(default)]
    pub unmanaged: bool,
    /// cmwq: cores per pod of the `cache_shard` scope (`--cache-shard-size`;
    /// `None`: the library's default, 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_shard_size: Option<usize>,
    /// cmwq: submit each item as a one-off closure with `Workqueue::spawn`
    /// (`--submit spawn`, what the peers do) instead of re-queueing a `Work`
    /// made once per slot (`--submit work`, the kernel's shape).
    #[serde(default)]
    pub spawn: bool,
    /// cmwq: submit each item with `Workqueue::execute`, a one-off closure
    /// with no handle (`--submit execute`), as the peers' fire-and-forget
    /// `spawn`/`execute`.
    #[serde(default)]
    pub execute: bool,
    /// A run in which no item completes for this long fails instead of hanging
    /// (default [`STALL_TIMEOUT`]; not in the JSON).
    #[serde(skip)]
    pub stall_timeout: std::time::Duration,
}

impl BenchConfig {
    /// The defaults of issue 8: one producer per online CPU, 50000 items, one in
    /// flight, every scope, no peers, 3 rounds, one worker per online CPU.
    pub fn with_defaults(online_cpus: usize) -> BenchConfig {
        BenchConfig {
            threads: online_cpus,
            items: 50_000,
            batch: 1,
            scopes: KERNEL_SCOPE_ORDER.to_vec(),
            vs: Vec::new(),
            rounds: 3,
            workers: online_cpus,
            synthetic: None,
            strict: false,
            wake_under_lock: false,
            unmanaged: false,
            cache_shard_size: None,
            spawn: false,
            execute: false,
            stall_timeout: STALL_TIMEOUT,
        }
    }

    /// Reject values the run cannot honour; the message names the option and
    /// value. Sizes are checked against this process's [`Limits`].
    pub fn validate(&self) -> Result<(), String> {
        self.validate_with(&Limits::of_this_process())
    }

    /// [`validate`](Self::validate) against the given limits: at most
    /// `limits.threads` producers and workers, at most [`MAX_ROUNDS`] rounds,
    /// and `threads × (items × BYTES_PER_ITEM + batch × BYTES_PER_SLOT)`
    /// within `limits.memory`.
    pub fn validate_with(&self, limits: &Limits) -> Result<(), String> {
        if self.threads == 0 {
            return Err("--threads 0: need at least one producer thread".into());
        }
        limits.check_threads("--threads", self.threads, "producer threads")?;
        if self.items == 0 {
            return Err("--items 0: each producer needs at least one item".into());
        }
        if self.batch == 0 {
            return Err("--batch 0: need at least one item in flight".into());
        }
        if self.batch > self.items {
            return Err(format!(
                "--batch {} is larger than --items {}: a producer cannot keep more items in flight than it queues",
                self.batch, self.items
            ));
        }
        let t = self.threads as u64;
        let per_thread = |n: usize, bytes: u64| (n as u64).checked_mul(bytes);
        let items = per_thread(self.items, BYTES_PER_ITEM).and_then(|b| b.checked_mul(t));
        let max_items = limits.memory / t / BYTES_PER_ITEM;
        limits.check_memory(
            "--items",
            self.items,
            items,
            &format!(
                "{} producers x {} items ({BYTES_PER_ITEM} bytes an item)",
                self.threads, self.items
            ),
            &format!(
                "at most {max_items} items per producer with --threads {}",
                self.threads
            ),
        )?;
        let slots = per_thread(self.batch, BYTES_PER_SLOT).and_then(|b| b.checked_mul(t));
        limits.check_memory(
            "--batch",
            self.batch,
            slots.and_then(|s| s.checked_add(items?)),
            &format!(
                "{} producers x {} items ({BYTES_PER_ITEM} bytes an item) and x {} in flight ({BYTES_PER_SLOT} bytes each)",
                self.threads, self.items, self.batch
            ),
            "",
        )?;
        if self.rounds == 0 {
            return Err("--rounds 0: need at least one round".into());
        }
        if self.rounds > MAX_ROUNDS {
            return Err(format!(
                "--rounds {}: at most {MAX_ROUNDS} rounds",
                self.rounds
            ));
        }
        if self.workers == 0 {
            return Err("--workers 0: every executor needs at least one worker".into());
        }
        limits.check_threads("--workers", self.workers, "worker threads")?;
        if self.cache_shard_size == Some(0) {
            return Err("--cache-shard-size 0: a shard needs at least one core".into());
        }
        if self.scopes.is_empty() && self.vs.is_empty() {
            return Err(
                "--scopes none: with no cmwq scope there is nothing to run; name peers with --vs LIST"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Parse `--scopes cpu,smt,...` into kernel order, without duplicates;
/// `none` alone selects no scope (only the peers of `--vs` run, e.g. `limit`
/// under callgrind without cmwq beside it).
pub fn parse_scopes(list: &str) -> Result<Vec<Scope>, String> {
    if list.trim() == "none" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim) {
        if name.is_empty() {
            continue;
        }
        let sc: Scope = name.parse().map_err(|_| {
            format!("--scopes: unknown scope '{name}' (expected cpu, smt, cache_shard, cache, numa, system)")
        })?;
        out.push(sc);
    }
    if out.is_empty() {
        return Err(format!("--scopes '{list}': no scope given"));
    }
    Ok(KERNEL_SCOPE_ORDER
        .into_iter()
        .filter(|s| out.contains(s))
        .collect())
}

/// Parse `--vs LIST|all` against the available peer names; keeps `available`'s order.
/// `all` picks every available name but the models ([`super::MODELS`]), which
/// only their own names pick.
pub fn parse_vs(list: &str, available: &[&str]) -> Result<Vec<String>, String> {
    let mut picked = Vec::new();
    for name in list.split(',').map(str::trim) {
        if name.is_empty() {
            continue;
        }
        if name == "all" {
            picked.extend(
                available
                    .iter()
                    .filter(|s| !super::MODELS.contains(s))
                    .map(|s| s.to_string()),
            );
        } else if available.contains(&name) {
            picked.push(name.to_string());
        } else {
            return Err(format!(
                "--vs: unknown peer '{name}' (expected all or some of {})",
                available.join(", ")
            ));
        }
    }
    if picked.is_empty() {
        return Err(format!("--vs '{list}': no peer given"));
    }
    Ok(available
        .iter()
        .filter(|a| picked.iter().any(|p| p == *a))
        .map(|s| s.to_string())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_value() {
        let ok = BenchConfig::with_defaults(2);
        assert_eq!(ok.validate(), Ok(()));
        let bad = |f: fn(&mut BenchConfig), needle: &str| {
            let mut c = ok.clone();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.contains(needle), "{e:?} lacks {needle:?}");
        };
        bad(|c| c.threads = 0, "--threads 0");
        bad(|c| c.threads = MAX_THREADS + 1, "--threads 4097");
        bad(|c| c.items = 0, "--items 0");
        bad(|c| c.batch = 0, "--batch 0");
        bad(|c| c.rounds = 0, "--rounds 0");
        bad(|c| c.workers = 0, "--workers 0");
        bad(|c| c.workers = MAX_THREADS + 1, "--workers 4097");
        bad(|c| c.rounds = MAX_ROUNDS + 1, "--rounds 10001");
        bad(|c| c.items = usize::MAX, "--items 18446744073709551615");
        bad(|c| c.cache_shard_size = Some(0), "--cache-shard-size 0");
        bad(
            |c| {
                c.items = 10;
                c.batch = 64
            },
            "--batch 64 is larger than --items 10",
        );
        let mut c = ok.clone();
        c.items = 64;
        c.batch = 64;
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn sizes_are_checked_against_the_limits() {
        let l = Limits {
            memory: 1 << 20,
            threads: 4,
        };
        let mut c = BenchConfig::with_defaults(2);
        c.items = 1000;
        assert_eq!(c.validate_with(&l), Ok(()));
        c.threads = 5;
        let e = c.validate_with(&l).unwrap_err();
        assert!(e.starts_with("--threads 5: at most 4"), "{e}");
        c.threads = 2;
        c.workers = 5;
        assert!(c.validate_with(&l).unwrap_err().starts_with("--workers 5"));
        c.workers = 2;
        // 2 x 16384 items x 32 bytes is the whole MiB; one more is too many.
        c.items = 16_385;
        let e = c.validate_with(&l).unwrap_err();
        assert!(
            e.starts_with("--items 16385: 2 producers x 16385 items"),
            "{e}"
        );
        assert!(
            e.contains("at most 16384 items per producer with --threads 2"),
            "{e}"
        );
        c.items = 8000;
        c.batch = 8000;
        let e = c.validate_with(&l).unwrap_err();
        assert!(e.starts_with("--batch 8000"), "{e}");
    }

    #[test]
    fn scopes_parse_in_kernel_order() {
        assert_eq!(
            parse_scopes("system,cache,cache_shard,cpu,cpu").unwrap(),
            vec![Scope::Cpu, Scope::CacheShard, Scope::Cache, Scope::System]
        );
        assert_eq!(
            parse_scopes("cpu,smt,cache_shard,cache,numa,system").unwrap(),
            KERNEL_SCOPE_ORDER.to_vec()
        );
        let e = parse_scopes("cpu,llc").unwrap_err();
        assert!(e.contains("'llc'"), "{e}");
        assert!(parse_scopes(",").is_err());
        assert_eq!(parse_scopes("none").unwrap(), vec![]);
        assert!(parse_scopes("none,cpu").is_err());
        let mut c = BenchConfig::with_defaults(2);
        c.scopes = parse_scopes("none").unwrap();
        let e = c.validate().unwrap_err();
        assert!(e.contains("--scopes none"), "{e}");
        c.vs = vec!["limit".into()];
        c.validate().unwrap();
    }

    #[test]
    fn vs_parse() {
        let av = ["rayon", "tokio", "crossbeam", "limit"];
        assert_eq!(parse_vs("all", &av).unwrap(), av.to_vec());
        assert_eq!(
            parse_vs("limit,rayon", &av).unwrap(),
            vec!["rayon", "limit"]
        );
        // A model runs only when named, never in `all`.
        let with_model = ["rayon", "limit", "kernel_min"];
        assert_eq!(
            parse_vs("all", &with_model).unwrap(),
            vec!["rayon", "limit"]
        );
        assert_eq!(
            parse_vs("kernel_min,all", &with_model).unwrap(),
            with_model.to_vec()
        );
        let e = parse_vs("rayon,smol", &av).unwrap_err();
        assert!(e.contains("'smol'"), "{e}");
        assert!(parse_vs("", &av).is_err());
    }
}
