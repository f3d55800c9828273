//! The control protocol: one JSON object a line each way.
//!
//! ```text
//! -> {"op":"ping"}
//! <- {"ok":true,"pid":4242,"version":1}
//! -> {"op":"snapshot"}
//! <- {"ok":true,"pid":4242,"version":1,"snapshot":{...}}
//! -> {"op":"set","workqueue":"io","knob":"affinity_scope","value":"numa"}
//! <- {"ok":true,"pid":4242,"version":1,"attrs":{...}}
//! <- {"ok":false,"pid":4242,"version":1,"error":"..."}
//! -> {"op":"set_param","param":"watchdog_thresh","value":"5"}
//! <- {"ok":true,"pid":4242,"version":1,"value":"5"}
//! ```
//!
//! `set_param` writes a process-wide parameter, as writing
//! `/sys/module/workqueue/parameters/<param>` does: one of [`PARAMS`].
//!
//! Knobs and values are those of the kernel's sysfs files
//! (`/sys/devices/virtual/workqueue/<wq>/`): `affinity_scope` (a scope name or
//! `default`), `affinity_strict` (`0`/`1`), `cpumask`, `nice` (−20..=19) and
//! `max_active`; plus `cpus`, the same as `cpumask` written as a cpu list.
//! Everything but `max_active` applies to unbound workqueues only.
//!
//! `cpumask` takes a hex mask in either of the two forms an engineer has in
//! front of them: the sysfs file's (32-bit words separated by commas, most
//! significant first: `00000001,00000000`) and the one `cmwq dump` prints,
//! `wq_dump.py`'s `cpumask_str` (words separated by spaces, least significant
//! first: `0x0 00000001`), so a mask copied out of a dump can be written back
//! as it is. A lone word means the same in both. [`echo_cpumask`] writes a
//! mask back in the form it was given.

use serde::{Deserialize, Serialize};

use crate::Workqueue;
use crate::snapshot::{SNAPSHOT_VERSION, Snapshot};
use crate::topology::{CPU_ID_LIMIT, Scope, parse_cpulist};
use crate::types::WqAttrs;

/// The longest request line accepted, in bytes (the newline included).
pub const MAX_REQUEST: usize = 64 * 1024;

/// The knobs `set` accepts. A slice, so that a knob added later changes no
/// type.
pub const KNOBS: &[&str] = &[
    "affinity_scope",
    "affinity_strict",
    "cpumask",
    "cpus",
    "nice",
    "max_active",
];

/// The process-wide parameters `set_param` accepts (the kernel's
/// `/sys/module/workqueue/parameters/` files of the same names).
pub const PARAMS: &[&str] = &["watchdog_thresh", "cpu_intensive_thresh_us"];

/// A request.
///
/// Not part of the stable API; for cmwq-cli and the crate's tests (a program
/// talks to the endpoint through [`Client`](super::Client)).
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Request {
    /// Is anybody there.
    Ping,
    /// A [`Snapshot`] of the process.
    Snapshot,
    /// Write a knob of a workqueue, as writing its sysfs file.
    Set {
        /// The workqueue's name.
        workqueue: String,
        /// One of [`KNOBS`].
        knob: String,
        /// The value, as it would be written to the sysfs file.
        value: String,
    },
    /// Write a process-wide parameter, as writing
    /// `/sys/module/workqueue/parameters/<param>`.
    SetParam {
        /// One of [`PARAMS`].
        param: String,
        /// The value, as it would be written to the file.
        value: String,
    },
}

/// A reply.
///
/// Not part of the stable API; for cmwq-cli and the crate's tests (a program
/// talks to the endpoint through [`Client`](super::Client)).
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Response {
    /// The request was carried out.
    pub ok: bool,
    /// The serving process.
    pub pid: u32,
    /// [`SNAPSHOT_VERSION`] of the serving process.
    pub version: u32,
    /// Why not, when `ok` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The answer to `snapshot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Snapshot>,
    /// The workqueue's attributes after a `set`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attrs: Option<WqAttrs>,
    /// After a `set`: whether the workqueue is unbound (a bound one has only
    /// `max_active` of the attributes; the others are not its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unbound: Option<bool>,
    /// The parameter's value after a `set_param` (as reading its file gives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl Response {
    pub(crate) fn ok() -> Response {
        Response {
            ok: true,
            pid: std::process::id(),
            version: SNAPSHOT_VERSION,
            error: None,
            snapshot: None,
            attrs: None,
            unbound: None,
            value: None,
        }
    }

    pub(crate) fn err(msg: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(msg.into()),
            ..Response::ok()
        }
    }

    /// The reply as one line, newline included.
    pub(crate) fn to_line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_else(|e| {
            format!("{{\"ok\":false,\"pid\":0,\"version\":0,\"error\":\"encode: {e}\"}}")
                .into_bytes()
        });
        v.push(b'\n');
        v
    }
}

/// Answers one request line (without its newline). Never panics on any input:
/// bytes that are not a request get an error reply.
#[doc(hidden)]
pub fn handle_line(line: &[u8]) -> Response {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t.trim(),
        Err(e) => return Response::err(format!("malformed request: not UTF-8 ({e})")),
    };
    if text.is_empty() {
        return Response::err("malformed request: empty line");
    }
    let req: Request = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) => {
            return Response::err(format!(
                "malformed request: {e} (expected {{\"op\":\"ping\"|\"snapshot\"|\"set\"|\"set_param\", ...}})"
            ));
        }
    };
    match req {
        Request::Ping => Response::ok(),
        Request::Snapshot => Response {
            snapshot: Some(crate::snapshot()),
            ..Response::ok()
        },
        Request::Set {
            workqueue,
            knob,
            value,
        } => match set_knob(&workqueue, &knob, &value) {
            Ok((attrs, unbound)) => Response {
                attrs: Some(attrs),
                unbound: Some(unbound),
                ..Response::ok()
            },
            Err(e) => Response::err(e),
        },
        Request::SetParam { param, value } => match set_param(&param, value.trim()) {
            Ok(value) => Response {
                value: Some(value),
                ..Response::ok()
            },
            Err(e) => Response::err(e),
        },
    }
}

/// Writes a process-wide parameter (one of [`PARAMS`]) and returns its value
/// as its file would read afterwards.
fn set_param(param: &str, value: &str) -> Result<String, String> {
    let refused = |what: &str| format!("{param}={value:?} refused: expected {what}");
    match param {
        "watchdog_thresh" => {
            let secs: u64 = value
                .parse()
                .map_err(|_| refused("a whole number of seconds (0 turns the watchdog off)"))?;
            crate::set_watchdog_thresh(secs);
            Ok(crate::watchdog_thresh().to_string())
        }
        "cpu_intensive_thresh_us" => {
            let us: u64 = value
                .parse()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| refused("a whole number of microseconds >= 1"))?;
            crate::set_cpu_intensive_thresh(std::time::Duration::from_micros(us));
            Ok(crate::cpu_intensive_thresh().as_micros().to_string())
        }
        _ => Err(format!(
            "unknown parameter {param:?}: expected one of {}",
            PARAMS.join(", ")
        )),
    }
}

/// Writes `knob` of the workqueue named `name`, as the sysfs file would;
/// returns its attributes after the change and whether it is unbound.
fn set_knob(name: &str, knob: &str, value: &str) -> Result<(WqAttrs, bool), String> {
    if !KNOBS.contains(&knob) {
        return Err(format!(
            "unknown knob {knob:?}: expected one of {}",
            KNOBS.join(", ")
        ));
    }
    let mut found = crate::engine::find_by_name(name);
    let wq = match found.len() {
        0 => return Err(format!("no workqueue named {name:?}")),
        1 => found.pop().expect("one"),
        n => {
            return Err(format!(
                "{n} workqueues are named {name:?}: the knob would be ambiguous"
            ));
        }
    };
    store_attr(&wq, knob, value).map_err(|e| format!("{name}: {knob}={value:?} refused: {e}"))?;
    Ok((wq.attrs(), wq.flags().contains(crate::WqFlags::UNBOUND)))
}

/// Why [`store_attr`] refused a write. `Display` says why and what the knob
/// takes; the caller names the workqueue, the knob and the value (as `cmwq
/// set` and the C API's sysfs writes do).
///
/// Not part of the stable API; for cmwq-capi and the control endpoint.
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreAttrError {
    /// The knob is not one of [`KNOBS`].
    UnknownKnob(String),
    /// The value is not in the form the knob's file takes: what it takes.
    Malformed(String),
    /// A `cpumask` (as written) that selects no CPU the workqueue can use.
    NoUsableCpu(String),
    /// The workqueue refused the value (out of range, not an unbound queue).
    Refused(crate::Error),
}

impl std::fmt::Display for StoreAttrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreAttrError::UnknownKnob(knob) => write!(
                f,
                "unknown knob {knob:?}: expected one of {}",
                KNOBS.join(", ")
            ),
            StoreAttrError::Malformed(expected) => f.write_str(expected),
            StoreAttrError::NoUsableCpu(mask) => {
                write!(f, "cpumask {mask} has no CPU this workqueue can use")
            }
            StoreAttrError::Refused(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StoreAttrError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreAttrError::Refused(e) => Some(e),
            _ => None,
        }
    }
}

/// Writes the attribute `knob` of `wq` as writing its sysfs file
/// (`/sys/bus/workqueue/devices/<name>/<knob>`) would: one of [`KNOBS`], the
/// value in the file's form (`affinity_scope` takes a scope name or
/// `default`, `cpumask` hex words; surrounding whitespace is ignored). The
/// C API's sysfs writes and the control endpoint's `set` both end here.
///
/// Not part of the stable API; for cmwq-capi and the control endpoint.
#[doc(hidden)]
pub fn store_attr(wq: &Workqueue, knob: &str, value: &str) -> Result<(), StoreAttrError> {
    use StoreAttrError::{Malformed, Refused};
    let value = value.trim();
    match knob {
        "affinity_scope" => {
            let scope = if value == "default" {
                crate::engine::params().map_err(Refused)?.affinity_scope
            } else {
                value.parse::<Scope>().map_err(|_| {
                    Malformed(
                        "expected cpu, smt, cache, cache_shard, numa, system or default".into(),
                    )
                })?
            };
            wq.set_affinity_scope(scope).map_err(Refused)
        }
        "affinity_strict" => {
            let strict = match value {
                "0" | "false" => false,
                "1" | "true" => true,
                _ => return Err(Malformed("expected 0 or 1".into())),
            };
            wq.set_affinity_strict(strict).map_err(Refused)
        }
        "cpumask" => {
            let cpus = parse_hex_cpumask(value).map_err(Malformed)?;
            // The engine names an unusable mask as a cpu list; the user wrote
            // hex, so say it back in their form.
            wq.set_cpumask(&cpus).map_err(|err| match err {
                crate::Error::EmptyCpumask { .. } => StoreAttrError::NoUsableCpu(value.into()),
                err => Refused(err),
            })
        }
        "cpus" => {
            let cpus = parse_cpulist(value).map_err(Malformed)?;
            if cpus.is_empty() {
                return Err(Malformed("empty cpu list".into()));
            }
            wq.set_cpumask(&cpus).map_err(Refused)
        }
        "nice" => {
            let n: i32 = value
                .parse()
                .map_err(|_| Malformed("expected an integer in -20..=19".into()))?;
            wq.set_nice(n).map_err(Refused)
        }
        "max_active" => {
            let n: usize = value.parse().map_err(|_| {
                Malformed(format!("expected an integer in 1..={}", crate::MAX_ACTIVE))
            })?;
            wq.set_max_active(n).map_err(Refused)
        }
        _ => Err(StoreAttrError::UnknownKnob(knob.into())),
    }
}

/// Parses a hex cpumask in the sysfs form (`ffffffff,0000000f`: 32-bit words
/// separated by commas, most significant first; a `0x` prefix is accepted) or
/// in the form `cmwq dump` prints (`0xffffffff 0000000f`: `wq_dump.py`'s
/// `cpumask_str`, words separated by spaces, least significant first, each
/// with or without `0x`). Commas select the sysfs form, spaces between words
/// the dump's; one word is the same in both. An empty mask is refused.
pub(crate) fn parse_hex_cpumask(s: &str) -> Result<Vec<usize>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty cpumask".into());
    }
    // The words, least significant first.
    let words: Vec<&str> = if s.contains(',') {
        let words: Vec<&str> = s.split(',').map(str::trim).collect();
        if words.iter().any(|w| w.contains(char::is_whitespace)) {
            return Err(format!(
                "cpumask {s:?} mixes commas (the sysfs form, most significant word first) \
                 and spaces (the form `cmwq dump` prints, least significant word first)"
            ));
        }
        words.into_iter().rev().collect()
    } else {
        s.split_whitespace().collect()
    };
    if words.len() > CPU_ID_LIMIT / 32 {
        return Err(format!("cpumask too long (more than {CPU_ID_LIMIT} CPUs)"));
    }
    let mut cpus = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let digits = w
            .strip_prefix("0x")
            .or_else(|| w.strip_prefix("0X"))
            .unwrap_or(w);
        if digits.is_empty() || digits.len() > 8 {
            return Err(format!(
                "bad cpumask word {w:?}: expected 1 to 8 hex digits per 32-bit word"
            ));
        }
        let v =
            u32::from_str_radix(digits, 16).map_err(|_| format!("bad hex in cpumask: {w:?}"))?;
        cpus.extend((0..32).filter(|b| v & (1 << b) != 0).map(|b| i * 32 + b));
    }
    cpus.sort_unstable();
    if cpus.is_empty() {
        return Err("cpumask selects no CPU".into());
    }
    Ok(cpus)
}

/// Writes `cpus` as a hex mask in the form of `given` (a mask
/// [`parse_hex_cpumask`] accepted), so a reply repeats the user's notation:
/// words separated by spaces, least significant first, as `cmwq dump` prints
/// them, when `given` had several words so; else the sysfs form, with at least
/// as many words as `given` and its `0x` prefix if it had one.
///
/// Not part of the stable API; for cmwq-cli (`cmwq set`).
#[doc(hidden)]
pub fn echo_cpumask(given: &str, cpus: &[usize]) -> String {
    let given = given.trim();
    if !given.contains(',') && given.split_whitespace().nth(1).is_some() {
        return crate::topology::cpumask_str(cpus);
    }
    let need = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut words = vec![0u32; need.max(given.split(',').count())];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    let hex: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
    let prefix = if given.starts_with("0x") || given.starts_with("0X") {
        "0x"
    } else {
        ""
    };
    format!("{prefix}{}", hex.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_masks_parse_like_sysfs() {
        assert_eq!(parse_hex_cpumask("f").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_hex_cpumask("0x00000005").unwrap(), vec![0, 2]);
        assert_eq!(parse_hex_cpumask("1,00000002").unwrap(), vec![1, 32]);
        assert!(parse_hex_cpumask("0").is_err());
        assert!(parse_hex_cpumask("xyz").is_err());
        assert!(parse_hex_cpumask("123456789").is_err());
        assert!(parse_hex_cpumask("1,,2").is_err());
    }

    #[test]
    fn the_form_dump_prints_parses_too() {
        use crate::topology::cpumask_str;
        // cpumask_str: least significant word first, spaces, 0x on all but the last.
        assert_eq!(parse_hex_cpumask("0x0 00000001").unwrap(), vec![32]);
        assert_eq!(parse_hex_cpumask("0x1 0x0 00000001").unwrap(), vec![0, 64]);
        assert_eq!(parse_hex_cpumask("00000030").unwrap(), vec![4, 5]);
        for cpus in [vec![0], vec![0, 64], (0..33).collect(), vec![31, 32, 95]] {
            assert_eq!(parse_hex_cpumask(&cpumask_str(&cpus)).unwrap(), cpus);
        }
        let e = parse_hex_cpumask("0x1 0x0,00000001").unwrap_err();
        assert!(e.contains("mixes commas"), "{e}");
        assert!(parse_hex_cpumask("0x 1").is_err());
    }

    #[test]
    fn masks_are_echoed_in_the_form_given() {
        assert_eq!(echo_cpumask("1,00000000", &[32]), "00000001,00000000");
        assert_eq!(echo_cpumask("0x1,0", &[32]), "0x00000001,00000000");
        assert_eq!(echo_cpumask("0x0 00000001", &[32]), "0x0 00000001");
        assert_eq!(echo_cpumask("f", &[0, 1, 2, 3]), "0000000f");
        // More words than the user gave when the result needs them.
        assert_eq!(echo_cpumask("f", &[40]), "00000100,00000000");
        for given in ["ffffffff,0000000f", "0xffffffff 0000000f", "3"] {
            let cpus = parse_hex_cpumask(given).unwrap();
            let echoed = echo_cpumask(given, &cpus);
            assert_eq!(parse_hex_cpumask(&echoed).unwrap(), cpus, "{given}");
        }
    }

    #[test]
    fn bad_requests_get_errors_not_panics() {
        for line in [
            &b""[..],
            b"{",
            b"\xff\xfe",
            b"{\"op\":\"reboot\"}",
            b"{\"op\":\"set\"}",
            b"[1,2,3]",
            b"null",
        ] {
            let r = handle_line(line);
            assert!(!r.ok, "{:?} was accepted", String::from_utf8_lossy(line));
            assert!(r.error.unwrap().starts_with("malformed request"));
        }
    }

    #[test]
    fn set_param_writes_the_module_parameters() {
        let before = crate::watchdog_thresh();
        let r = handle_line(br#"{"op":"set_param","param":"watchdog_thresh","value":" 12 "}"#);
        assert_eq!(r.value.as_deref(), Some("12"), "{r:?}");
        assert_eq!(crate::watchdog_thresh(), 12);
        let r = handle_line(br#"{"op":"set_param","param":"watchdog_thresh","value":"1.5"}"#);
        assert!(r.error.unwrap().contains("whole number of seconds"));
        assert_eq!(
            crate::watchdog_thresh(),
            12,
            "a refused value changes nothing"
        );
        let r = handle_line(br#"{"op":"set_param","param":"colour","value":"1"}"#);
        assert!(r.error.unwrap().contains("unknown parameter \"colour\""));
        crate::set_watchdog_thresh(before);
    }

    #[test]
    fn store_attr_says_which_part_failed() {
        // Two CPUs, 0 and 1, whatever the machine.
        let two = crate::topology::Topology::from_synthetic("pack:1 l3:1 core:2 pu:1").unwrap();
        let wq = crate::Workqueue::builder("store-attr-errors")
            .unbound()
            .topology(std::sync::Arc::new(two))
            .build()
            .unwrap();
        let bound = crate::Workqueue::builder("store-attr-bound")
            .build()
            .unwrap();
        let err =
            |wq: &Workqueue, knob: &str, value: &str| store_attr(wq, knob, value).unwrap_err();
        assert_eq!(
            err(&wq, "colour", "1"),
            StoreAttrError::UnknownKnob("colour".into())
        );
        let e = err(&wq, "affinity_strict", "2");
        assert_eq!(e, StoreAttrError::Malformed("expected 0 or 1".into()));
        assert!(matches!(
            err(&wq, "cpumask", "zz"),
            StoreAttrError::Malformed(m) if m.contains("zz")
        ));
        // CPU 31 is not in the workqueue's topology: said back in hex, as written.
        let e = err(&wq, "cpumask", " 0x80000000 ");
        assert_eq!(e, StoreAttrError::NoUsableCpu("0x80000000".into()));
        assert!(
            e.to_string().starts_with("cpumask 0x80000000 has no CPU"),
            "{e}"
        );
        let e = err(&wq, "nice", "40");
        assert_eq!(e, StoreAttrError::Refused(crate::Error::InvalidNice(40)));
        assert!(std::error::Error::source(&e).is_some());
        assert!(matches!(
            err(&bound, "nice", "0"),
            StoreAttrError::Refused(crate::Error::NotUnbound { attr: "nice", .. })
        ));
        // What succeeds changes the workqueue.
        store_attr(&wq, "max_active", " 7\n").unwrap();
        assert_eq!(wq.attrs().max_active, 7);
    }

    #[test]
    fn set_names_the_problem() {
        let r = handle_line(br#"{"op":"set","workqueue":"no such wq","knob":"nice","value":"0"}"#);
        assert_eq!(
            r.error.as_deref(),
            Some("no workqueue named \"no such wq\"")
        );
        let r = handle_line(br#"{"op":"set","workqueue":"x","knob":"colour","value":"0"}"#);
        assert!(r.error.unwrap().contains("unknown knob \"colour\""));
    }
}

#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

        /// Any bytes: the handler answers with an error or a reply, never panics.
        #[test]
        fn handler_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let r = super::handle_line(&bytes);
            prop_assert!(r.ok || r.error.is_some());
        }
    }
}
