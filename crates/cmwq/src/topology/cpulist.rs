//! The two ways the kernel writes a set of CPUs.
//!
//! sysfs writes CPU sets as *lists* (`0-3,8,10-11`, what `%*pbl` prints);
//! that is what every `*_list` file under `devices/system/cpu` holds and what
//! humans type.  `wq_dump.py` prints them as *masks*: 32-bit hex words, lowest
//! word first, the last one zero-padded.  Kernel engineers diff `wq_dump.py`
//! output between boots and patches, so `cmwq topology` prints masks in exactly
//! that shape, down to the oddities (only the final word is padded).

/// The highest CPU id (exclusive) this crate accepts anywhere.
///
/// The kernel's largest `NR_CPUS` is 8192; the limit is set well above that so
/// no real machine hits it, and exists so a garbage range such as
/// `0-4294967295` in a sysfs file is refused instead of allocating gigabytes.
pub const CPU_ID_LIMIT: usize = 1 << 16;

/// Parses a kernel CPU list such as `0-3,8,10-11`.
///
/// Surrounding whitespace (the trailing newline of a sysfs file) and blanks
/// around entries are ignored; an empty (or all-blank) string is the empty
/// list, as sysfs writes an empty mask.  The result is sorted and free of
/// duplicates.  Anything else (an empty entry, a reversed range, a
/// non-number, an id at or above [`CPU_ID_LIMIT`]) is an error that quotes the
/// offending entry.
pub fn parse_cpulist(s: &str) -> Result<Vec<usize>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(Vec::new());
    }
    // A set of CPU_ID_LIMIT bits: memory is bounded by the limit, not by how
    // many (overlapping) ranges the input repeats.
    let mut set = vec![0u64; CPU_ID_LIMIT / 64];
    for entry in s.split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(format!("empty entry in cpu list {s:?}"));
        }
        let (lo, hi) = match entry.split_once('-') {
            Some((a, b)) => (parse_cpu_id(a, entry)?, parse_cpu_id(b, entry)?),
            None => {
                let c = parse_cpu_id(entry, entry)?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(format!("reversed range {entry:?} in cpu list"));
        }
        for c in lo..=hi {
            set[c / 64] |= 1 << (c % 64);
        }
    }
    Ok(mask_to_cpus(&set))
}

/// The CPUs set in a bitmask of 64-bit words, lowest CPU first (the layout of
/// the kernel's `cpu_set_t` and of [`parse_cpulist`]'s set).
pub(crate) fn mask_to_cpus(words: &[u64]) -> Vec<usize> {
    words
        .iter()
        .enumerate()
        .flat_map(|(w, &bits)| {
            (0..64)
                .filter(move |b| bits & (1u64 << b) != 0)
                .map(move |b| w * 64 + b)
        })
        .collect()
}

fn parse_cpu_id(s: &str, entry: &str) -> Result<usize, String> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("bad cpu list entry {entry:?}: not a cpu number"));
    }
    match s.parse::<usize>() {
        Ok(v) if v < CPU_ID_LIMIT => Ok(v),
        _ => Err(format!(
            "bad cpu list entry {entry:?}: cpu id above the limit {}",
            CPU_ID_LIMIT - 1
        )),
    }
}

/// Formats CPUs as a kernel CPU list (`0-3,8,10-11`), the inverse of
/// [`parse_cpulist`]. The input need not be sorted; duplicates are ignored.
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// Formats CPUs as `wq_dump.py`'s `cpumask_str()` does.
///
/// The mask is cut into 32-bit words, lowest CPUs first, separated by one
/// space.  Every word but the last is written like Python's `hex()` (`0x`
/// prefix, no padding, so an empty word is `0x0`); the last word, the one
/// holding the highest CPU, is written as `%08x`.  The empty set is the empty
/// string.  Examples: `{0}` → `00000001`; `{0..=31}` → `ffffffff`;
/// `{0..=32}` → `0xffffffff 00000001`; `{0, 64}` → `0x1 0x0 00000001`.
/// The input need not be sorted; duplicates are ignored.
pub fn cpumask_str(cpus: &[usize]) -> String {
    let Some(&max) = cpus.iter().max() else {
        return String::new();
    };
    let mut words = vec![0u32; max / 32 + 1];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    let last = words.len() - 1;
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if i < last {
            out.push_str(&format!("{w:#x} "));
        } else {
            out.push_str(&format!("{w:08x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpulist(" \n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("5, 1 ,1").unwrap(), vec![1, 5]);
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("0,,1").is_err());
        assert!(parse_cpulist("x").unwrap_err().contains("\"x\""));
        assert!(parse_cpulist("-1").is_err());
        assert!(parse_cpulist("0-99999999999999999999999").is_err());
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpulist(&[]), "");
    }

    #[test]
    fn masks() {
        assert_eq!(cpumask_str(&[]), "");
        assert_eq!(cpumask_str(&[0]), "00000001");
        assert_eq!(cpumask_str(&(0..32).collect::<Vec<_>>()), "ffffffff");
        assert_eq!(
            cpumask_str(&(0..33).collect::<Vec<_>>()),
            "0xffffffff 00000001"
        );
        assert_eq!(cpumask_str(&[0, 64]), "0x1 0x0 00000001");
        assert_eq!(cpumask_str(&[33]), "0x0 00000002");
        assert_eq!(cpumask_str(&[4, 5]), "00000030");
    }

    #[test]
    fn repeated_ranges_cost_no_more_than_one() {
        let s = vec!["0-65535"; 2000].join(",");
        let v = parse_cpulist(&s).unwrap();
        assert_eq!(v.len(), CPU_ID_LIMIT);
        assert_eq!(v[CPU_ID_LIMIT - 1], CPU_ID_LIMIT - 1);
        assert_eq!(parse_cpulist("3,1-2,2").unwrap(), vec![1, 2, 3]);
    }
}
