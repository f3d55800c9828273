//! Process-wide defaults read once from the environment, like the kernel's boot
//! parameters (`workqueue.default_affinity_scope=`, `workqueue.unbound_cpus=`).
//!
//! | variable | meaning | kernel parameter |
//! |---|---|---|
//! | `CMWQ_DEFAULT_AFFINITY_SCOPE` | scope of unbound queues that do not set one | `workqueue.default_affinity_scope` |
//! | `CMWQ_CACHE_SHARD_SIZE` | cores per `cache_shard` pod | `workqueue.cache_shard_size` |
//! | `CMWQ_UNBOUND_CPUS` | CPUs unbound queues may use (a cpu list) | `workqueue.unbound_cpus` |
//! | `CMWQ_HIGHPRI_POLICY` | `nice` or `fifo` (see [`crate::HighpriPolicy`]) | — |
//! | `CMWQ_CONTROL` | `1` starts the control endpoint with the first workqueue ([`crate::control`]) | — |
//! | `CMWQ_QPW` | `0` or `1`: the default mode of [`crate::percpu::PerCpu`] | `qpw=` |
//! | `CMWQ_SPREAD_US` | µs a pod pool's worker may spend on an item before work queued behind it spreads to idle CPUs of the pod ([`crate::set_spread_thresh`]) | — |
//! | `CMWQ_CPU_QUOTA` | `auto` (ceil of the cgroup CPU quota), `off`, or N: most workers of managed pools running at once ([`crate::cpu_budget`]) | — |
//! | `CMWQ_WATCHDOG_THRESH` | seconds a pool may have work waiting and start none before the lockup watchdog reports it; 0 turns it off ([`crate::set_watchdog_thresh`]) | `workqueue.watchdog_thresh` |
//! | `CMWQ_WORKER_STACK` | the stack size of worker threads, in bytes (`K`, `M`, `G` suffixes) | — |
//! | `CMWQ_LATENCY_HIST` | `on` or `off` (default): whether queues keep latency histograms unless built saying ([`crate::WorkqueueBuilder::latency_histograms`]) | — |
//!
//! A value that does not parse is an error naming the variable and the value,
//! returned by every `build()`; it is never silently ignored. One function,
//! [`for_build`], decides what a build refuses, and [`check_env`] calls it
//! too, so the two cannot disagree: `CMWQ_UNBOUND_CPUS` must name at least one
//! CPU the process may run on, and `CMWQ_HIGHPRI_POLICY` must name a policy
//! even for a queue that is not high priority. An empty value is the same as
//! an unset one for every variable.

use std::sync::OnceLock;

use crate::error::Error;
use crate::topology::{self, Scope};

/// The parsed defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    pub affinity_scope: Scope,
    pub cache_shard_size: usize,
    pub unbound_cpus: Option<Vec<usize>>,
    /// `CMWQ_CONTROL=1`: serve the control endpoint.
    pub control: bool,
    /// `CMWQ_LATENCY_HIST=on`: queues keep latency histograms by default.
    pub latency_hist: bool,
    /// `CMWQ_SPREAD_US`: the engine's spread threshold, in µs (applied by
    /// the engine when it first reads the parameters: `engine::params`).
    pub spread_us: Option<u64>,
    /// `CMWQ_WATCHDOG_THRESH`: the lockup watchdog's threshold, in seconds
    /// (applied as `spread_us`).
    pub watchdog_thresh: Option<u64>,
}

/// Reads `var`: `Ok(None)` if unset or empty, the parsed value, or an error
/// naming the variable, the value and what was expected.
pub(crate) fn env_parse<T>(
    var: &str,
    expected: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>, Error> {
    let Ok(raw) = std::env::var(var) else {
        return Ok(None);
    };
    if raw.trim().is_empty() {
        return Ok(None);
    }
    parse(raw.trim()).map(Some).ok_or_else(|| Error::BadEnv {
        var: var.to_string(),
        value: raw.clone(),
        expected: expected.to_string(),
    })
}

/// Parses the three variables from a lookup function (testable without the
/// process environment).
pub(crate) fn parse_params(
    scope: Option<&str>,
    shard: Option<&str>,
    cpus: Option<&str>,
) -> Result<Params, Error> {
    let bad = |var: &str, value: &str, expected: &str| Error::BadEnv {
        var: var.into(),
        value: value.into(),
        expected: expected.into(),
    };
    let affinity_scope = match scope.map(str::trim).filter(|s| !s.is_empty()) {
        None => Scope::CacheShard,
        Some(s) => s.parse::<Scope>().map_err(|_| {
            bad(
                "CMWQ_DEFAULT_AFFINITY_SCOPE",
                s,
                "cpu, smt, cache, cache_shard, numa or system",
            )
        })?,
    };
    let cache_shard_size = match shard.map(str::trim).filter(|s| !s.is_empty()) {
        None => topology::DEFAULT_CACHE_SHARD_SIZE,
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| bad("CMWQ_CACHE_SHARD_SIZE", s, "a number of cores >= 1"))?,
    };
    let unbound_cpus = match cpus.map(str::trim).filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(
            topology::parse_cpulist(s)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| bad("CMWQ_UNBOUND_CPUS", s, "a cpu list such as 0-3,8"))?,
        ),
    };
    Ok(Params {
        affinity_scope,
        cache_shard_size,
        unbound_cpus,
        control: false,
        latency_hist: false,
        spread_us: None,
        watchdog_thresh: None,
    })
}

/// The lockup watchdog's threshold (the kernel's `workqueue.watchdog_thresh`).
pub(crate) const WATCHDOG_THRESH_ENV: &str = "CMWQ_WATCHDOG_THRESH";

/// Whether queues keep latency histograms by default (see [`crate::hist`]).
pub(crate) const LATENCY_HIST_ENV: &str = "CMWQ_LATENCY_HIST";

/// The CPU budget's mode (see [`crate::quota::QuotaMode`]).
pub(crate) const CPU_QUOTA_ENV: &str = "CMWQ_CPU_QUOTA";

/// The process's defaults, read from the environment on first use.
pub(crate) fn params() -> Result<&'static Params, Error> {
    static P: OnceLock<Result<Params, Error>> = OnceLock::new();
    P.get_or_init(|| {
        let v = |k: &str| std::env::var(k).ok();
        let mut p = parse_params(
            v("CMWQ_DEFAULT_AFFINITY_SCOPE").as_deref(),
            v("CMWQ_CACHE_SHARD_SIZE").as_deref(),
            v("CMWQ_UNBOUND_CPUS").as_deref(),
        )?;
        p.control = env_parse("CMWQ_CONTROL", "0 or 1", |s| match s {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        })?
        .unwrap_or(false);
        p.latency_hist = env_parse(LATENCY_HIST_ENV, "on or off", |s| match s {
            "on" | "1" => Some(true),
            "off" | "0" => Some(false),
            _ => None,
        })?
        .unwrap_or(false);
        p.spread_us = env_parse("CMWQ_SPREAD_US", "a number of microseconds >= 1", |s| {
            s.parse::<u64>().ok().filter(|&n| n >= 1)
        })?;
        // Read by the engine where it is first needed; refused here, where
        // `build()` and `check_env()` both see it.
        env_parse(crate::switches::ENV, "auto, switch, proc or off", |s| {
            crate::switches::parse_mode(s).ok()
        })?;
        // `CMWQ_CPU_QUOTA`: read by the engine when its first pool is made;
        // refused here, where `build()` and `check_env()` both see it.
        env_parse(
            CPU_QUOTA_ENV,
            "auto (the cgroup's quota), off, or a number of running workers >= 1",
            crate::quota::QuotaMode::parse,
        )?;
        p.watchdog_thresh = env_parse(
            WATCHDOG_THRESH_ENV,
            "a whole number of seconds (30 by default; 0 turns the lockup watchdog off)",
            |s| s.parse::<u64>().ok(),
        )?;
        worker_stack()?;
        Ok(p)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// What every `build()` checks of the environment, with the machine's
/// `online` CPUs: the parsed defaults (which it returns), `CMWQ_UNBOUND_CPUS`
/// naming at least one of `online`, and `CMWQ_HIGHPRI_POLICY` (unless
/// [`crate::set_highpri_policy`] chose the policy). [`crate::check_env`] calls it
/// too, so it refuses exactly what a build would, with the same error.
pub(crate) fn for_build(online: &[usize]) -> Result<&'static Params, Error> {
    let p = params()?;
    if let Some(cpus) = &p.unbound_cpus {
        check_unbound_cpus(cpus, online)?;
    }
    crate::priority::highpri_policy()?;
    Ok(p)
}

/// `CMWQ_UNBOUND_CPUS` (parsed as `cpus`) must leave unbound queues at least
/// one of the `online` CPUs, or every unbound build would fail.
fn check_unbound_cpus(cpus: &[usize], online: &[usize]) -> Result<(), Error> {
    if cpus.iter().any(|c| online.contains(c)) {
        return Ok(());
    }
    Err(Error::BadEnv {
        var: "CMWQ_UNBOUND_CPUS".into(),
        value: std::env::var("CMWQ_UNBOUND_CPUS")
            .unwrap_or_else(|_| topology::format_cpulist(cpus)),
        expected: format!(
            "a cpu list with at least one CPU this process may run on ({})",
            topology::format_cpulist(online)
        ),
    })
}

/// The smallest and largest `CMWQ_WORKER_STACK`.
pub(crate) const WORKER_STACK_RANGE: std::ops::RangeInclusive<usize> = (64 << 10)..=(1 << 30);

/// Parses a stack size: bytes, or a number with a `K`, `M` or `G` suffix
/// (binary: `16M` is 16 MiB), within [`WORKER_STACK_RANGE`].
pub(crate) fn parse_stack_size(s: &str) -> Option<usize> {
    let (num, shift) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 10),
        b'm' | b'M' => (&s[..s.len() - 1], 20),
        b'g' | b'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: usize = num.trim().parse().ok()?;
    let bytes = n.checked_mul(1 << shift)?;
    WORKER_STACK_RANGE.contains(&bytes).then_some(bytes)
}

/// `CMWQ_WORKER_STACK`, read once: the stack size of the engine's threads
/// (`None`: unset, the default `engine::threads::DFL_WORKER_STACK`).
pub(crate) fn worker_stack() -> Result<Option<usize>, Error> {
    static S: OnceLock<Result<Option<usize>, Error>> = OnceLock::new();
    S.get_or_init(|| {
        env_parse(
            "CMWQ_WORKER_STACK",
            "a stack size in bytes, with an optional K, M or G suffix, from 64K to 1G",
            parse_stack_size,
        )
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbound_cpus_must_meet_an_online_cpu() {
        assert!(check_unbound_cpus(&[1, 5], &[0, 1]).is_ok());
        let e = check_unbound_cpus(&[5], &[0, 1]).unwrap_err();
        assert!(matches!(e, Error::BadEnv { .. }));
        let msg = e.to_string();
        assert!(
            msg.contains("CMWQ_UNBOUND_CPUS") && msg.contains("(0-1)"),
            "{msg}"
        );
    }

    #[test]
    fn unset_gives_the_kernel_defaults() {
        let p = parse_params(None, Some(" "), None).unwrap();
        assert_eq!(p.affinity_scope, Scope::CacheShard);
        assert_eq!(p.cache_shard_size, topology::DEFAULT_CACHE_SHARD_SIZE);
        assert_eq!(p.unbound_cpus, None);
    }

    #[test]
    fn values_parse() {
        let p = parse_params(Some("numa"), Some("4"), Some("0-2,5")).unwrap();
        assert_eq!(p.affinity_scope, Scope::Numa);
        assert_eq!(p.cache_shard_size, 4);
        assert_eq!(p.unbound_cpus, Some(vec![0, 1, 2, 5]));
    }

    #[test]
    fn stack_sizes_parse_with_suffixes_and_bounds() {
        assert_eq!(parse_stack_size("16M"), Some(16 << 20));
        assert_eq!(parse_stack_size("512k"), Some(512 << 10));
        assert_eq!(parse_stack_size("1G"), Some(1 << 30));
        assert_eq!(parse_stack_size("1048576"), Some(1 << 20));
        for bad in [
            "",
            "M",
            "16Q",
            "-1M",
            "1.5M",
            "32K",
            "2G",
            "99999999999999999999G",
        ] {
            assert_eq!(parse_stack_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn bad_values_name_variable_and_value() {
        for (args, var, val) in [
            (
                (Some("l3"), None, None),
                "CMWQ_DEFAULT_AFFINITY_SCOPE",
                "l3",
            ),
            ((None, Some("0"), None), "CMWQ_CACHE_SHARD_SIZE", "0"),
            (
                (None, Some("eight"), None),
                "CMWQ_CACHE_SHARD_SIZE",
                "eight",
            ),
            ((None, None, Some("3-1")), "CMWQ_UNBOUND_CPUS", "3-1"),
        ] {
            let e = parse_params(args.0, args.1, args.2).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(var) && msg.contains(val), "{msg}");
            assert!(matches!(e, Error::BadEnv { .. }));
        }
    }
}
