//! The two drain modes, the process-wide `CMWQ_QPW` switch, and the errors of
//! the per-CPU API.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// The environment variable that picks the default [`Mode`] for the process,
/// as the kernel's `qpw=` boot parameter: `0` is [`Mode::Local`], `1` is
/// [`Mode::Qpw`]; unset means `Local`. It is read once, on first use.
pub const QPW_ENV: &str = "CMWQ_QPW";

/// Who runs a drain of another CPU's slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
pub enum Mode {
    /// The classic pattern (`schedule_on_each_cpu`): a drain of CPU `c` is a
    /// work item queued on `c`'s bound pool and flushed, so CPU `c` is
    /// interrupted to run it. The default, as `qpw=0`.
    #[default]
    Local,
    /// Queue per-CPU work (QPW): a drain of CPU `c` takes `c`'s slot lock and
    /// runs on the caller; CPU `c` is left alone.
    Qpw,
}

impl Mode {
    /// The mode's name: `local` or `qpw`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Local => "local",
            Mode::Qpw => "qpw",
        }
    }

    /// The process-wide default: [`QPW_ENV`] read once (unset or empty: `Local`). A bad
    /// value is an error naming the variable and the value, every time it is asked.
    pub fn from_env() -> Result<Mode, PercpuError> {
        static MODE: OnceLock<Result<Mode, PercpuError>> = OnceLock::new();
        MODE.get_or_init(|| match std::env::var(QPW_ENV) {
            // Empty means unset, as for every CMWQ_* variable.
            Ok(v) if v.trim().is_empty() => Ok(Mode::Local),
            Ok(v) => parse_qpw(&v),
            Err(std::env::VarError::NotPresent) => Ok(Mode::Local),
            Err(std::env::VarError::NotUnicode(v)) => Err(PercpuError::BadEnv {
                var: QPW_ENV,
                value: v.to_string_lossy().into_owned(),
            }),
        })
        .clone()
    }
}

/// Parses a value of [`QPW_ENV`]: `0` is [`Mode::Local`], `1` is [`Mode::Qpw`]
/// (surrounding whitespace ignored); anything else is [`PercpuError::BadEnv`].
pub(crate) fn parse_qpw(value: &str) -> Result<Mode, PercpuError> {
    match value.trim() {
        "0" => Ok(Mode::Local),
        "1" => Ok(Mode::Qpw),
        _ => Err(PercpuError::BadEnv {
            var: QPW_ENV,
            value: value.to_string(),
        }),
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = PercpuError;

    /// `local` or `qpw` (case-insensitive).
    fn from_str(s: &str) -> Result<Mode, PercpuError> {
        match s.to_ascii_lowercase().as_str() {
            "local" => Ok(Mode::Local),
            "qpw" => Ok(Mode::Qpw),
            _ => Err(PercpuError::BadMode(s.to_string())),
        }
    }
}

/// What can go wrong with a [`PerCpu`](super::PerCpu).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PercpuError {
    /// An environment knob has a value it does not accept.
    BadEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// A mode name that is neither `local` nor `qpw`.
    BadMode(String),
    /// A CPU index with no slot (at or above the number of possible CPUs).
    NoSuchCpu {
        /// The CPU asked for.
        cpu: usize,
        /// The number of slots.
        nr_slots: usize,
    },
    /// The drain workqueue of `Local` mode could not be built.
    Workqueue(crate::Error),
    /// The drain function panicked on a worker (`Local` mode; in `Qpw` mode the
    /// panic unwinds through the caller as any panic does).
    DrainPanicked {
        /// The CPU whose slot was being drained.
        cpu: usize,
    },
}

impl fmt::Display for PercpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PercpuError::BadEnv { var, value } => {
                write!(f, "{var}={value:?}: expected 0 (local) or 1 (qpw)")
            }
            PercpuError::BadMode(m) => write!(f, "mode {m:?}: expected local or qpw"),
            PercpuError::NoSuchCpu { cpu, nr_slots } => {
                write!(f, "CPU {cpu} has no per-CPU slot (there are {nr_slots})")
            }
            PercpuError::Workqueue(e) => write!(f, "per-CPU drain workqueue: {e}"),
            PercpuError::DrainPanicked { cpu } => {
                write!(f, "the drain function panicked while draining CPU {cpu}")
            }
        }
    }
}

impl std::error::Error for PercpuError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_qpw_values_are_errors_naming_the_variable_and_value() {
        assert_eq!(parse_qpw("0"), Ok(Mode::Local));
        assert_eq!(parse_qpw("1"), Ok(Mode::Qpw));
        assert_eq!(parse_qpw(" 1\n"), Ok(Mode::Qpw));
        for bad in ["2", "yes", "", "qpw", "-1"] {
            let e = parse_qpw(bad).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(QPW_ENV), "{msg}");
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
        }
    }
}
