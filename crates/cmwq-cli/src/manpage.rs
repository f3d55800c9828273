//! `cmwq man`: the pages clap_mangen makes from the command line, with the
//! sections it cannot know: ENVIRONMENT (every `CMWQ_*` variable the library
//! and the command read) and EXIT STATUS (which `--help` shows too).
//!
//! A test (`tests/man_page.rs`) greps the sources for `CMWQ_` names and fails
//! on one that [`ENVIRONMENT`] does not list, so a new variable cannot go
//! undocumented.

use std::fmt::Write as _;

/// One variable: its name, what it does, its default.
pub struct EnvVar {
    /// `CMWQ_...`.
    pub name: &'static str,
    /// What it sets, and the values it takes.
    pub meaning: &'static str,
    /// What holds when it is unset or empty.
    pub default: &'static str,
}

/// Every environment variable cmwq reads at run time (the library in any
/// process that uses it, and this command).
pub const ENVIRONMENT: &[EnvVar] = &[
    EnvVar {
        name: "CMWQ_DEFAULT_AFFINITY_SCOPE",
        meaning: "Affinity scope of unbound workqueues that do not set one: cpu, smt, cache, \
                  cache_shard, numa or system (the kernel's workqueue.default_affinity_scope).",
        default: "cache_shard",
    },
    EnvVar {
        name: "CMWQ_CACHE_SHARD_SIZE",
        meaning: "Cores per cache_shard pod, at least 1 (workqueue.cache_shard_size).",
        default: "8",
    },
    EnvVar {
        name: "CMWQ_UNBOUND_CPUS",
        meaning: "CPUs unbound workqueues may use, a cpu list such as 0-3,8 that names at least \
                  one CPU the process may run on (workqueue.unbound_cpus).",
        default: "every CPU the process may use",
    },
    EnvVar {
        name: "CMWQ_HIGHPRI_POLICY",
        meaning: "What a high-priority workqueue's workers run at: nice (nice -20) or fifo \
                  (SCHED_FIFO at real-time priority 1).",
        default: "nice",
    },
    EnvVar {
        name: "CMWQ_CONTROL",
        meaning: "1 starts the control endpoint (what cmwq dump, monitor, set and ps talk to) \
                  with the process's first workqueue; 0 does not.",
        default: "0",
    },
    EnvVar {
        name: "CMWQ_CONTROL_DIR",
        meaning: "Directory of the control sockets, for the serving process and for cmwq dump, \
                  monitor, set and ps alike.",
        default: "$XDG_RUNTIME_DIR/cmwq, else cmwq-UID in the temporary directory",
    },
    EnvVar {
        name: "CMWQ_QPW",
        meaning: "0 or 1: the default drain mode of per-CPU state; 1 takes the slot's lock \
                  instead of queueing work on its CPU (the kernel's qpw=).",
        default: "0",
    },
    EnvVar {
        name: "CMWQ_SPREAD_US",
        meaning: "Microseconds a pod pool's worker may spend on an item before the work queued \
                  behind it spreads to idle CPUs of the pod, at least 1.",
        default: "50",
    },
    EnvVar {
        name: "CMWQ_CPU_QUOTA",
        meaning: "How many workers of managed pools may run at once process-wide: auto (the \
                  ceiling of the cgroup CPU quota, re-read once a second; no limit without a \
                  quota), off (no limit) or a number N >= 1.",
        default: "auto",
    },
    EnvVar {
        name: "CMWQ_LATENCY_HIST",
        meaning: "on or off: whether workqueues keep latency histograms (queueing delay and \
                  run time) unless their builder says otherwise \
                  (WorkqueueBuilder::latency_histograms).",
        default: "off",
    },
    EnvVar {
        name: "CMWQ_WATCHDOG_THRESH",
        meaning: "Seconds a pool may have work waiting and start none before the lockup \
                  watchdog reports it on stderr; 0 turns the report off \
                  (workqueue.watchdog_thresh).",
        default: "30",
    },
    EnvVar {
        name: "CMWQ_WORKER_STACK",
        meaning: "Stack size of worker threads in bytes, or with a K, M or G suffix (binary), \
                  64K to 1G.",
        default: "8M",
    },
    EnvVar {
        name: "CMWQ_BLOCK_DETECT",
        meaning: "How workers that block without cmwq::blocking are noticed: auto (the /proc \
                  sampler, then switch records for pools seen to block), switch, proc or off.",
        default: "auto",
    },
];

/// The command's exit statuses and what each means.
pub const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "0",
        "Success, and also when the reader of stdout went away (cmwq topology | head -1): \
         the reader got what it wanted.",
    ),
    (
        "1",
        "The command failed; stderr says why in one line, cmwq: MESSAGE.",
    ),
    ("2", "A command line that cmwq refuses (a usage error)."),
];

/// The exit statuses in one paragraph, for `cmwq --help`.
pub fn exit_status_help() -> String {
    let parts: Vec<String> = EXIT_STATUS
        .iter()
        .map(|(code, what)| format!("{code}: {what}"))
        .collect();
    format!("Exit status: {}", parts.join(" "))
}

/// Escapes text for a roff line: backslashes, hyphens (a `-` is a minus to
/// roff), and a control character at the start of the line.
fn esc(s: &str) -> String {
    let t = s.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// The EXIT STATUS and ENVIRONMENT sections, in roff.
pub fn sections() -> String {
    let mut s = String::from(".SH \"EXIT STATUS\"\n");
    for (code, what) in EXIT_STATUS {
        let _ = writeln!(s, ".TP\n\\fB{code}\\fR\n{}", esc(what));
    }
    s.push_str(".SH ENVIRONMENT\n");
    s.push_str(
        "Read once, when the process builds its first workqueue (CMWQ_CONTROL_DIR also when \
         a command looks for sockets). An empty value is the same as an unset one; a value \
         that does not parse makes every build fail with an error naming the variable.\n",
    );
    for v in ENVIRONMENT {
        let _ = writeln!(
            s,
            ".TP\n\\fB{}\\fR\n{} Default: {}.",
            v.name,
            esc(v.meaning),
            esc(v.default)
        );
    }
    s
}

/// The page of `cmd` (the top-level command): clap_mangen's, without its
/// EXTRA section (the after-help), with [`sections`] before VERSION.
pub fn render(cmd: clap::Command) -> Result<String, String> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.after_help(None::<&str>).after_long_help(None::<&str>))
        .render(&mut out)
        .map_err(|e| e.to_string())?;
    let page = String::from_utf8_lossy(&out).into_owned();
    let at = page.find(".SH VERSION").unwrap_or(page.len());
    Ok(format!("{}{}{}", &page[..at], sections(), &page[at..]))
}

/// Writes `cmwq.1` ([`render`]) and a `cmwq-COMMAND.1` page per command
/// into `dir`.
pub fn write_dir(cmd: clap::Command, dir: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    clap_mangen::generate_to(cmd.clone(), dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let top = dir.join("cmwq.1");
    std::fs::write(&top, render(cmd)?).map_err(|e| format!("{}: {e}", top.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_escapes_hyphens_and_leading_dots() {
        assert_eq!(esc("-20 a-b"), "\\-20 a\\-b");
        assert_eq!(esc(".x"), "\\&.x");
        assert_eq!(esc("a\\b"), "a\\eb");
    }
}
