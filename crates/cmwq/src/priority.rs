//! Worker priorities: normal, high (nice −20) and `SCHED_FIFO`.
//!
//! The kernel runs `WQ_HIGHPRI` work on separate pools whose workers have nice
//! −20. In 2026 a thread on the list asked for `WQ_SCHED_FIFO` so latency
//! sensitive work (crypto completions, dm-verity) is not starved by CPU hogs;
//! the answer was a switch that runs the high-priority pools as `SCHED_FIFO` at
//! the lowest real-time priority rather than a new flag. cmwq offers both: a
//! per-workqueue [`Priority`] and a process-wide [`HighpriPolicy`]
//! ([`set_highpri_policy`], or `CMWQ_HIGHPRI_POLICY=nice|fifo`) that decides
//! what `High` means.
//!
//! User space needs permission the kernel does not: lowering nice below the
//! process's needs `CAP_SYS_NICE` or `RLIMIT_NICE`, real-time scheduling needs
//! `CAP_SYS_NICE` or `RLIMIT_RTPRIO`. A builder asking for a priority it cannot
//! get fails with [`Error::PriorityDenied`](crate::Error::PriorityDenied) by
//! default. With `priority_fallback(true)` it takes the best priority allowed
//! (FIFO → nice −20 → the lowest nice `RLIMIT_NICE` permits → nice 0) and says so
//! in the workqueue's stats. Permission is checked by trying: a short-lived
//! thread applies the priority to itself, so the answer is the kernel's, not a
//! guess from capability bits.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::Error;
use crate::sched;
use crate::sync::{Level, Mutex};

/// The priority of a workqueue's workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum Priority {
    /// Nice 0 (or the unbound attribute `nice`).
    #[default]
    Normal,
    /// The high-priority pools (`WQ_HIGHPRI`): nice −20, or `SCHED_FIFO` when the
    /// [`HighpriPolicy`] says so.
    High,
    /// `SCHED_FIFO` at real-time priority 1, whatever the policy.
    Fifo,
}

/// What [`Priority::High`] means, process-wide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum HighpriPolicy {
    /// Nice −20, as the kernel (default).
    #[default]
    Nice,
    /// `SCHED_FIFO` at the lowest real-time priority.
    Fifo,
}

impl std::str::FromStr for HighpriPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "nice" => Ok(HighpriPolicy::Nice),
            "fifo" => Ok(HighpriPolicy::Fifo),
            other => Err(format!("{other:?} is not a highpri policy (nice or fifo)")),
        }
    }
}

/// How a pool's workers are scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum PoolPrio {
    /// `SCHED_OTHER` at this nice value.
    Nice(i32),
    /// `SCHED_FIFO` at this real-time priority.
    Fifo(i32),
}

impl PoolPrio {
    /// The nice value shown by dumps (−20 for FIFO pools, as a strong hint).
    pub fn nice(self) -> i32 {
        match self {
            PoolPrio::Nice(n) => n,
            PoolPrio::Fifo(_) => -20,
        }
    }
    /// Applies this priority to the calling thread.
    pub fn apply(self) -> std::io::Result<()> {
        match self {
            PoolPrio::Nice(n) => sched::set_normal(n),
            PoolPrio::Fifo(p) => sched::set_fifo(p),
        }
    }
}

impl fmt::Display for PoolPrio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolPrio::Nice(n) => write!(f, "nice {n}"),
            PoolPrio::Fifo(p) => write!(f, "fifo {p}"),
        }
    }
}

const POLICY_UNSET: u8 = 0;
const POLICY_NICE: u8 = 1;
const POLICY_FIFO: u8 = 2;
/// A: the policy set by `set_highpri_policy`. `Relaxed`: a setting read on its own.
static POLICY: AtomicU8 = AtomicU8::new(POLICY_UNSET);
static POLICY_ENV: Mutex<Option<Result<HighpriPolicy, Error>>> =
    Mutex::new_at(Level::PolicyEnv, None);

/// Sets what [`Priority::High`] means for workqueues built from now on
/// (overrides `CMWQ_HIGHPRI_POLICY`). Pools already running keep their priority.
pub fn set_highpri_policy(p: HighpriPolicy) {
    let v = match p {
        HighpriPolicy::Nice => POLICY_NICE,
        HighpriPolicy::Fifo => POLICY_FIFO,
    };
    POLICY.store(v, Ordering::Relaxed);
}

/// The current highpri policy: set by [`set_highpri_policy`], else read once
/// from `CMWQ_HIGHPRI_POLICY` (a bad value is an error naming it), else `Nice`.
pub fn highpri_policy() -> Result<HighpriPolicy, Error> {
    match POLICY.load(Ordering::Relaxed) {
        POLICY_NICE => return Ok(HighpriPolicy::Nice),
        POLICY_FIFO => return Ok(HighpriPolicy::Fifo),
        _ => {}
    }
    let mut g = POLICY_ENV.lock();
    g.get_or_insert_with(|| {
        crate::params::env_parse("CMWQ_HIGHPRI_POLICY", "nice or fifo", |s| {
            s.parse::<HighpriPolicy>().ok()
        })
        .map(|o| o.unwrap_or_default())
    })
    .clone()
}

/// The pool priority a workqueue asks for.
pub(crate) fn requested(p: Priority, nice: i32) -> Result<PoolPrio, Error> {
    Ok(match p {
        Priority::Normal => PoolPrio::Nice(nice),
        Priority::High => match highpri_policy()? {
            HighpriPolicy::Nice => PoolPrio::Nice(-20),
            HighpriPolicy::Fifo => PoolPrio::Fifo(1),
        },
        Priority::Fifo => PoolPrio::Fifo(1),
    })
}

/// Whether a thread started now may run at `p`: tried on a short-lived thread.
fn probe(p: PoolPrio) -> Result<(), String> {
    // Raising nice (or keeping it) needs no permission; lowering it below
    // what threads inherit here does, even for a positive value (a process
    // started at nice 10 asking for nice 3).
    if matches!(p, PoolPrio::Nice(n) if n >= sched::current_nice()) {
        return Ok(());
    }
    let r = std::thread::Builder::new()
        .name("cmwq-prio-probe".into())
        .spawn(move || p.apply().map_err(|e| e.to_string()))
        .map_err(|e| format!("cannot start a probe thread: {e}"))?
        .join()
        .unwrap_or_else(|_| Err("probe thread panicked".into()));
    r.map_err(|e| {
        let limit = match p {
            PoolPrio::Nice(_) => format!(
                "RLIMIT_NICE {}",
                sched::rlimit_cur(libc::RLIMIT_NICE).map_or("?".into(), |v| v.to_string())
            ),
            PoolPrio::Fifo(_) => format!(
                "RLIMIT_RTPRIO {}",
                sched::rlimit_cur(libc::RLIMIT_RTPRIO).map_or("?".into(), |v| v.to_string())
            ),
        };
        format!("{e} (needs CAP_SYS_NICE or a higher {limit})")
    })
}

/// The priority a workqueue gets: `want` if allowed; else an error, or with
/// `fallback` the best allowed priority and a note saying what happened.
pub(crate) fn resolve(want: PoolPrio, fallback: bool) -> Result<(PoolPrio, Option<String>), Error> {
    let reason = match probe(want) {
        Ok(()) => return Ok((want, None)),
        Err(r) => r,
    };
    if !fallback {
        return Err(Error::PriorityDenied {
            wanted: want.to_string(),
            reason,
        });
    }
    let want_nice = want.nice();
    let floor = sched::rlimit_cur(libc::RLIMIT_NICE)
        .map_or(0, |r| 20 - r.min(40) as i32)
        .min(0);
    let mut candidates = Vec::new();
    if matches!(want, PoolPrio::Fifo(_)) {
        candidates.push(PoolPrio::Nice(-20));
    }
    candidates.push(PoolPrio::Nice(want_nice.max(floor)));
    candidates.push(PoolPrio::Nice(0));
    for c in candidates {
        if c != want && probe(c).is_ok() {
            return Ok((
                c,
                Some(format!("asked for {want}: {reason}; running at {c}")),
            ));
        }
    }
    Ok((
        PoolPrio::Nice(0),
        Some(format!("asked for {want}: {reason}; running at nice 0")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_parses_and_names_bad_values() {
        assert_eq!("fifo".parse::<HighpriPolicy>(), Ok(HighpriPolicy::Fifo));
        assert_eq!(" nice ".parse::<HighpriPolicy>(), Ok(HighpriPolicy::Nice));
        let e = "rt".parse::<HighpriPolicy>().unwrap_err();
        assert!(e.contains("\"rt\"") && e.contains("nice or fifo"), "{e}");
    }

    #[test]
    fn stat_state_survives_odd_command_names() {
        assert_eq!(parse("12 (cmwq/3:0) S 1 2"), Some('S'));
        assert_eq!(parse("12 (a) b) (c) R 1 2"), Some('R'));
        assert_eq!(parse("12 (x) D"), Some('D'));
        assert_eq!(parse("garbage"), None);
        assert_eq!(parse("12 (x)"), None);
    }

    fn parse(s: &str) -> Option<char> {
        sched::parse_stat_state(s)
    }
}
