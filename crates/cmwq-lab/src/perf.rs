//! Hardware counters of a child command through `perf_event_open(2)`, the way
//! `perf stat CMD` counts them, with a thin wrapper over the system call
//! (`perf_event_attr` and its constants from the `perf-event-open-sys`
//! bindings of the kernel's UAPI header; no perf library): cycles, instructions (→ IPC), L1i read misses split into user and
//! kernel, and the TopdownL1 frontend-bound share where the PMU exposes it.
//!
//! # How the child is counted
//!
//! [`Counters::open_for_next_exec`] opens every counter on the *calling thread*
//! (`pid = 0, cpu = -1`) with `disabled = 1`, `inherit = 1` and
//! `enable_on_exec = 1`, just before that thread spawns the command:
//!
//! - the parent never `exec`s, so its own counters stay disabled: the
//!   comparing process (reading the child's pipes, waiting in `wait4`) is
//!   never counted;
//! - the child inherits a disabled copy of each counter when it is cloned, and
//!   the kernel enables the copy when the child `exec`s the command, so what
//!   runs between `fork` and `exec` is not counted either;
//! - every thread and process the command creates inherits the counters too,
//!   and when one exits the kernel adds its counts to its parent's counter, up
//!   to ours; after `wait4` has reaped the child, reading our counters gives
//!   the command's totals.
//!
//! The alternative, opening the counters on the child's pid from a `pre_exec`
//! hook, leaves the descriptors in the child; the approach above keeps them in
//! the parent and needs no code between `fork` and `exec`. It requires that the
//! thread which opened the counters is the one that spawns (it is: `run_once`
//! does both) and that no other thread of this process spawns meanwhile.
//!
//! `inherit` rules out `PERF_FORMAT_GROUP` reads, so every counter is its own
//! event, read as `{value, time_enabled, time_running}` and scaled by
//! `enabled / running` when the PMU had to multiplex them.
//!
//! # Where counters are missing
//!
//! Most VMs have no virtual PMU (no `cpu` directory under
//! `/sys/bus/event_source/devices`): opening a hardware event fails with
//! `ENOENT` or `EOPNOTSUPP`; a restrictive `perf_event_paranoid` gives `EACCES`.
//! A counter that cannot be opened is left out of the run's metrics and
//! [`unsupported_reasons`] says why, so `cmwq compare` prints its row as "not
//! supported (reason)" and goes on.
//!
//! # TopdownL1 frontend bound
//!
//! Frontend bound is the share of issue slots the frontend left empty. The
//! pre-Ice Lake Intel core PMU exposes it as two sysfs events,
//! `topdown-fetch-bubbles` and `topdown-total-slots` (with a `.scale` file),
//! which count like any other event: frontend bound = bubbles / slots. Ice
//! Lake and later replaced them with `topdown-fe-bound`, a fixed metric that
//! can only be read in a group led by the `slots` event, which `inherit`
//! forbids; AMD and Arm PMUs have no such sysfs events. There the row is "not
//! supported" with that reason.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// The rows the counters give, in table order.
pub const COUNTER_METRICS: [&str; 6] = [
    "cycles",
    "instructions",
    "IPC",
    "L1i misses user",
    "L1i misses kernel",
    "frontend bound %",
];

use perf_event_open_sys::bindings::{
    self as perf, PERF_COUNT_HW_CACHE_L1I, PERF_COUNT_HW_CACHE_OP_READ,
    PERF_COUNT_HW_CACHE_RESULT_MISS, PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS,
    PERF_FLAG_FD_CLOEXEC, PERF_FORMAT_TOTAL_TIME_ENABLED, PERF_FORMAT_TOTAL_TIME_RUNNING,
    PERF_TYPE_HARDWARE, PERF_TYPE_HW_CACHE,
};

/// The generalized L1i read-miss event: `PERF_COUNT_HW_CACHE_L1I | (OP_READ
/// << 8) | (RESULT_MISS << 16)`, as `perf_event_open(2)` composes cache events.
const L1I_READ_MISS: u64 = PERF_COUNT_HW_CACHE_L1I as u64
    | ((PERF_COUNT_HW_CACHE_OP_READ as u64) << 8)
    | ((PERF_COUNT_HW_CACHE_RESULT_MISS as u64) << 16);

const SYSFS_CPU_PMU: &str = "/sys/bus/event_source/devices/cpu";

/// Where an event's type and config come from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// A generalized event of a fixed type.
    Generic(u32, u64),
    /// A named event of the core PMU in sysfs (`events/NAME`).
    Sysfs(&'static str),
}

/// One raw counter.
#[derive(Clone, Copy, Debug)]
struct Spec {
    /// Raw count name, the key of [`Counters::read`]'s map.
    name: &'static str,
    source: Source,
    exclude_user: bool,
    exclude_kernel: bool,
}

const SPECS: [Spec; 6] = [
    Spec {
        name: "cycles",
        source: Source::Generic(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES as u64),
        exclude_user: false,
        exclude_kernel: false,
    },
    Spec {
        name: "instructions",
        source: Source::Generic(PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS as u64),
        exclude_user: false,
        exclude_kernel: false,
    },
    Spec {
        name: "L1i misses user",
        source: Source::Generic(PERF_TYPE_HW_CACHE, L1I_READ_MISS),
        exclude_user: false,
        exclude_kernel: true,
    },
    Spec {
        name: "L1i misses kernel",
        source: Source::Generic(PERF_TYPE_HW_CACHE, L1I_READ_MISS),
        exclude_user: true,
        exclude_kernel: false,
    },
    Spec {
        name: "topdown-fetch-bubbles",
        source: Source::Sysfs("topdown-fetch-bubbles"),
        exclude_user: false,
        exclude_kernel: false,
    },
    Spec {
        name: "topdown-total-slots",
        source: Source::Sysfs("topdown-total-slots"),
        exclude_user: false,
        exclude_kernel: false,
    },
];

/// Why `perf_event_open` refused an event, from its errno, in words a reader
/// of the report can act on (the same words for every event, so that rows
/// failing for one cause can share one reason).
pub fn reason(errno: i32) -> String {
    let why = match errno {
        libc::ENOENT => {
            "ENOENT: the CPU exposes no such event (no PMU, as in most VMs, or not this model)"
        }
        libc::EOPNOTSUPP => "EOPNOTSUPP: the PMU cannot count it (no hardware counters here)",
        libc::ENODEV => "ENODEV: no PMU for it on this machine",
        libc::EACCES | libc::EPERM => {
            "EACCES: not permitted (lower /proc/sys/kernel/perf_event_paranoid or run with CAP_PERFMON)"
        }
        libc::ENOSYS => "ENOSYS: this kernel has no perf_event_open",
        libc::EINVAL => "EINVAL: the kernel rejected the event's configuration",
        libc::EMFILE => "EMFILE: too many open files",
        libc::EBUSY => "EBUSY: the counter is held exclusively by another user",
        _ => {
            return format!(
                "perf_event_open: {}",
                std::io::Error::from_raw_os_error(errno)
            );
        }
    };
    why.to_string()
}

/// Parses a sysfs PMU event description (`event=0x9c,umask=0x01`) against the
/// PMU's format fields (`event` → `config:0-7`, `umask` → `config:8-15`) into
/// a `config` value. A term without a value means 1; a field outside `config`
/// (`config1`, `config2`) is an error, as the wrapper sets `config` only.
fn sysfs_config(desc: &str, format: &dyn Fn(&str) -> Option<String>) -> Result<u64, String> {
    let mut config = 0u64;
    for term in desc.trim().split(',').filter(|t| !t.is_empty()) {
        let (key, val) = term.split_once('=').unwrap_or((term, "1"));
        let val = match val.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => val.parse(),
        }
        .map_err(|_| format!("bad value in event term '{term}'"))?;
        let fmt = format(key).ok_or_else(|| format!("no format for event term '{key}'"))?;
        let bits = fmt
            .trim()
            .strip_prefix("config:")
            .ok_or_else(|| format!("term '{key}' is not in config ({})", fmt.trim()))?;
        let (lo, hi) = match bits.split_once('-') {
            Some((a, b)) => (a.parse::<u32>(), b.parse::<u32>()),
            None => (bits.parse::<u32>(), bits.parse::<u32>()),
        };
        let (lo, hi) = match (lo, hi) {
            (Ok(l), Ok(h)) if l <= h && h < 64 => (l, h),
            _ => return Err(format!("bad format bits '{bits}' for '{key}'")),
        };
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        config |= (val & mask) << lo;
    }
    Ok(config)
}

/// The type, config and scale of a named core-PMU event from sysfs.
fn sysfs_event(name: &str) -> Result<(u32, u64, f64), String> {
    let read = |p: String| std::fs::read_to_string(p).ok();
    let ty = read(format!("{SYSFS_CPU_PMU}/type"))
        .and_then(|s| s.trim().parse::<u32>().ok())
        .ok_or_else(|| format!("no core PMU ({SYSFS_CPU_PMU} is missing, as in most VMs)"))?;
    let desc = read(format!("{SYSFS_CPU_PMU}/events/{name}")).ok_or_else(|| {
        let newer =
            std::path::Path::new(&format!("{SYSFS_CPU_PMU}/events/topdown-fe-bound")).exists();
        if newer {
            format!(
                "no {name}: this PMU has topdown-fe-bound instead (Ice Lake+), readable only in a \
                 slots-led group, which inherited counters cannot use"
            )
        } else {
            format!("the core PMU has no {name} event (TopdownL1 is Intel-only)")
        }
    })?;
    let format = |key: &str| read(format!("{SYSFS_CPU_PMU}/format/{key}"));
    let config = sysfs_config(&desc, &format).map_err(|e| format!("{name}: {e}"))?;
    let scale = read(format!("{SYSFS_CPU_PMU}/events/{name}.scale"))
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(1.0);
    Ok((ty, config, scale))
}

/// The `perf_event_attr` of one counter: disabled until this thread's children
/// `exec`, inherited by them, read with its enabled and running times. The
/// layout and the bit-field setters come from the kernel's UAPI header,
/// through perf-event-open-sys's generated bindings.
fn attr(ty: u32, config: u64, spec: &Spec) -> perf::perf_event_attr {
    let mut attr = perf::perf_event_attr {
        type_: ty,
        size: std::mem::size_of::<perf::perf_event_attr>() as u32,
        config,
        read_format: (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING) as u64,
        ..Default::default()
    };
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(1);
    attr.set_exclude_hv(1);
    attr.set_exclude_user(u64::from(spec.exclude_user));
    attr.set_exclude_kernel(u64::from(spec.exclude_kernel));
    attr
}

/// Opens one counter on the calling thread: disabled until this thread's
/// children `exec`, inherited by them.
fn open(spec: &Spec) -> Result<(OwnedFd, f64), String> {
    let (ty, config, scale) = match spec.source {
        Source::Generic(t, c) => (t, c, 1.0),
        Source::Sysfs(name) => sysfs_event(name)?,
    };
    let mut attr = attr(ty, config, spec);
    // SAFETY: `attr` is a fully initialised `perf_event_attr` of the size its
    // `size` field states, alive and exclusively borrowed for the call; the
    // other arguments are plain integers (this thread, any CPU, no group,
    // close-on-exec).
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(reason(errno));
    }
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok((fd, scale))
}

/// The counters opened for one child command.
pub struct Counters {
    open: Vec<(&'static str, OwnedFd, f64)>,
    failed: Vec<(&'static str, String)>,
}

impl Counters {
    /// Opens every counter on the calling thread, to count the command the
    /// same thread spawns next (see the module docs). Counters that cannot be
    /// opened are remembered with their reason; this never fails.
    pub fn open_for_next_exec() -> Counters {
        let mut c = Counters {
            open: Vec::new(),
            failed: Vec::new(),
        };
        for spec in &SPECS {
            match open(spec) {
                Ok((fd, scale)) => c.open.push((spec.name, fd, scale)),
                Err(e) => c.failed.push((spec.name, e)),
            }
        }
        c
    }

    /// Whether no counter could be opened.
    pub fn none_open(&self) -> bool {
        self.open.is_empty()
    }

    /// Raw counts by event name (`cycles`, `instructions`, `L1i misses user`,
    /// `L1i misses kernel`, `topdown-fetch-bubbles`, `topdown-total-slots`),
    /// scaled for multiplexing and by the event's sysfs scale; a counter that
    /// never ran is left out. Call after the child was reaped.
    pub fn read(self) -> BTreeMap<String, f64> {
        let mut m = BTreeMap::new();
        for (name, fd, scale) in self.open {
            let mut buf = [0u8; 24];
            if File::from(fd).read_exact(&mut buf).is_err() {
                continue;
            }
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&buf[8 * i..8 * i + 8]);
                u64::from_ne_bytes(w)
            };
            if let Some(v) = scaled(word(0), word(1), word(2)) {
                m.insert(name.to_string(), v * scale);
            }
        }
        m
    }
}

/// A count corrected for multiplexing: `value × enabled / running`; `None` if
/// the counter never ran on the PMU.
pub fn scaled(value: u64, enabled: u64, running: u64) -> Option<f64> {
    if running == 0 {
        return None;
    }
    Some(value as f64 * enabled as f64 / running as f64)
}

/// The report's counter rows from raw counts: cycles, instructions, IPC
/// (instructions / cycles), L1i misses user and kernel, frontend bound %
/// (100 × fetch bubbles / total slots). A row whose inputs are missing (or
/// whose divisor is 0) is left out.
pub fn derive(raw: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for k in [
        "cycles",
        "instructions",
        "L1i misses user",
        "L1i misses kernel",
    ] {
        if let Some(&v) = raw.get(k) {
            m.insert(k.to_string(), v);
        }
    }
    if let (Some(&c), Some(&i)) = (raw.get("cycles"), raw.get("instructions"))
        && c > 0.0
    {
        m.insert("IPC".to_string(), i / c);
    }
    if let (Some(&b), Some(&s)) = (
        raw.get("topdown-fetch-bubbles"),
        raw.get("topdown-total-slots"),
    ) && s > 0.0
    {
        m.insert("frontend bound %".to_string(), 100.0 * b / s);
    }
    m
}

/// Why each row of [`COUNTER_METRICS`] is missing, from the raw counters that
/// failed to open (`(raw name, reason)`): a derived row takes the reason of
/// its first missing input.
pub fn row_reasons(failed: &[(&str, String)]) -> BTreeMap<String, String> {
    let why = |raw: &str| {
        failed
            .iter()
            .find(|(n, _)| *n == raw)
            .map(|(_, r)| r.clone())
    };
    let inputs: [(&str, &[&str]); 6] = [
        ("cycles", &["cycles"]),
        ("instructions", &["instructions"]),
        ("IPC", &["cycles", "instructions"]),
        ("L1i misses user", &["L1i misses user"]),
        ("L1i misses kernel", &["L1i misses kernel"]),
        (
            "frontend bound %",
            &["topdown-fetch-bubbles", "topdown-total-slots"],
        ),
    ];
    inputs
        .iter()
        .filter_map(|(row, raws)| {
            raws.iter()
                .find_map(|r| why(r))
                .map(|w| (row.to_string(), w))
        })
        .collect()
}

/// Why counter rows are missing on this machine (row → reason), found once by
/// opening the counters on this thread and closing them again.
pub fn unsupported_reasons() -> &'static BTreeMap<String, String> {
    static R: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    R.get_or_init(|| {
        let c = Counters::open_for_next_exec();
        let failed: Vec<(&str, String)> = c.failed.iter().map(|(n, r)| (*n, r.clone())).collect();
        row_reasons(&failed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attrs_count_the_child_only_and_split_user_from_kernel() {
        assert_eq!(L1I_READ_MISS, 0x10001);
        let user = SPECS.iter().find(|s| s.name == "L1i misses user").unwrap();
        let a = attr(PERF_TYPE_HW_CACHE, L1I_READ_MISS, user);
        assert!(a.size >= perf::PERF_ATTR_SIZE_VER5, "{}", a.size);
        assert_eq!((a.type_, a.config), (PERF_TYPE_HW_CACHE, 0x10001));
        assert_eq!(
            (
                a.disabled(),
                a.inherit(),
                a.enable_on_exec(),
                a.exclude_hv()
            ),
            (1, 1, 1, 1)
        );
        assert_eq!((a.exclude_user(), a.exclude_kernel()), (0, 1));
        assert_eq!(a.read_format, 0b11, "time enabled and running");
        // The bits where perf_event_open(2) documents them in the flags word.
        let word = a._bitfield_1.get(0, 64);
        assert_eq!(word, 1 | 1 << 1 | 1 << 5 | 1 << 6 | 1 << 12, "{word:#x}");
        let kernel = SPECS
            .iter()
            .find(|s| s.name == "L1i misses kernel")
            .unwrap();
        let k = attr(PERF_TYPE_HW_CACHE, L1I_READ_MISS, kernel);
        assert_eq!((k.exclude_user(), k.exclude_kernel()), (1, 0));
    }

    #[test]
    fn errno_reasons_name_the_cause() {
        let r = reason(libc::ENOENT);
        assert!(r.starts_with("ENOENT") && r.contains("no PMU"), "{r}");
        assert!(reason(libc::EOPNOTSUPP).starts_with("EOPNOTSUPP"));
        assert!(reason(libc::EACCES).contains("perf_event_paranoid"));
        assert!(reason(libc::EPERM).contains("perf_event_paranoid"));
        assert!(reason(libc::ENODEV).starts_with("ENODEV"));
        assert!(reason(libc::ENOSYS).starts_with("ENOSYS"));
        assert!(reason(libc::EINVAL).starts_with("EINVAL"));
        let other = reason(libc::E2BIG);
        assert!(other.starts_with("perf_event_open: "), "{other}");
        assert!(other.contains("os error 7"), "{other}");
    }

    #[test]
    fn ipc_and_frontend_bound_are_derived() {
        let raw: BTreeMap<String, f64> = [
            ("cycles", 2_000_000.0),
            ("instructions", 3_000_000.0),
            ("L1i misses user", 1200.0),
            ("L1i misses kernel", 800.0),
            ("topdown-fetch-bubbles", 250.0),
            ("topdown-total-slots", 1000.0),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
        let m = derive(&raw);
        assert_eq!(m["IPC"], 1.5);
        assert_eq!(m["frontend bound %"], 25.0);
        assert_eq!(m["L1i misses user"], 1200.0);
        assert_eq!(m["L1i misses kernel"], 800.0);
        assert_eq!(m.len(), COUNTER_METRICS.len());
        assert!(m.keys().all(|k| COUNTER_METRICS.contains(&k.as_str())));

        // Zero cycles or a missing input: no IPC, no division by zero.
        let raw: BTreeMap<String, f64> = [("cycles".to_string(), 0.0)].into();
        let m = derive(&raw);
        assert_eq!(m.get("IPC"), None);
        assert_eq!(m.get("frontend bound %"), None);
        assert_eq!(m["cycles"], 0.0);
    }

    #[test]
    fn multiplexed_counts_are_scaled() {
        assert_eq!(scaled(1000, 10, 10), Some(1000.0));
        assert_eq!(scaled(1000, 10, 5), Some(2000.0));
        assert_eq!(scaled(1000, 10, 0), None);
    }

    #[test]
    fn derived_rows_take_their_inputs_reasons() {
        let failed = [
            ("instructions", "instructions: ENOENT".to_string()),
            ("topdown-total-slots", "slots: none".to_string()),
        ];
        let r = row_reasons(&failed);
        assert_eq!(r["instructions"], "instructions: ENOENT");
        assert_eq!(r["IPC"], "instructions: ENOENT");
        assert_eq!(r["frontend bound %"], "slots: none");
        assert!(!r.contains_key("cycles"));
        assert!(!r.contains_key("L1i misses user"));
    }

    #[test]
    fn sysfs_event_terms_map_onto_config_bits() {
        let fmt = |k: &str| match k {
            "event" => Some("config:0-7\n".to_string()),
            "umask" => Some("config:8-15".to_string()),
            "any" => Some("config:21".to_string()),
            "ldlat" => Some("config1:0-15".to_string()),
            _ => None,
        };
        assert_eq!(sysfs_config("event=0x9c,umask=0x01\n", &fmt), Ok(0x019c));
        assert_eq!(
            sysfs_config("event=0x3c,umask=0x00,any=1", &fmt),
            Ok(0x3c | (1 << 21))
        );
        assert_eq!(sysfs_config("event=0x3c,any", &fmt), Ok(0x3c | (1 << 21)));
        // Values wider than their field are cut to it.
        assert_eq!(sysfs_config("event=0x1ff", &fmt), Ok(0xff));
        assert!(
            sysfs_config("ldlat=3", &fmt)
                .unwrap_err()
                .contains("config1")
        );
        assert!(sysfs_config("cmask=1", &fmt).unwrap_err().contains("cmask"));
        assert!(sysfs_config("event=zz", &fmt).is_err());
    }

    #[test]
    fn counting_a_child_works_or_says_why() {
        // Whatever the machine: either the counters count an exec'd child,
        // or every missing row has a reason.
        let c = Counters::open_for_next_exec();
        let all_failed = c.none_open();
        let st = std::process::Command::new("true").status().unwrap();
        assert!(st.success());
        let m = derive(&c.read());
        let reasons = unsupported_reasons();
        for row in COUNTER_METRICS {
            assert!(
                m.contains_key(row) || reasons.contains_key(row),
                "{row}: neither counted nor explained"
            );
        }
        if all_failed {
            assert!(m.is_empty());
        }
    }
}
