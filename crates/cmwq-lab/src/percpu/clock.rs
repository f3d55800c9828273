//! The cycle counter the cost benchmark reads: `rdtsc` on x86-64 (what the
//! kernel's `get_cycles` reads there), nanoseconds of a monotonic clock elsewhere.

use std::sync::OnceLock;
use std::time::Instant;

/// What [`cycles`] counts: `"tsc"` (x86-64 time-stamp counter ticks) or `"ns"`.
pub const UNIT: &str = if cfg!(target_arch = "x86_64") {
    "tsc"
} else {
    "ns"
};

/// The current value of the cycle counter (see [`UNIT`]).
#[inline]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc only reads the time-stamp counter; every x86-64 CPU has it
        // and user space may execute it unless the OS sets CR4.TSD, which Linux
        // does not do for ordinary processes.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Counter ticks per nanosecond, measured once against the monotonic clock
/// over 20 ms (1.0 when [`UNIT`] is `ns`).
pub fn ticks_per_ns() -> f64 {
    static F: OnceLock<f64> = OnceLock::new();
    *F.get_or_init(|| {
        if UNIT == "ns" {
            return 1.0;
        }
        let (t0, c0) = (Instant::now(), cycles());
        while t0.elapsed().as_millis() < 20 {
            std::hint::spin_loop();
        }
        let (dt, dc) = (t0.elapsed().as_nanos() as f64, cycles() - c0);
        (dc as f64 / dt).max(f64::MIN_POSITIVE)
    })
}
