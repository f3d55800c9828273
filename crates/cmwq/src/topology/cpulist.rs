//! The two ways the kernel writes a set of CPUs.
//!
//! sysfs writes CPU sets as *lists* (`0-3,8,10-11`, what `%*pbl` prints);
//! that is what every `*_list` file under `devices/system/cpu` holds and what
//! humans type.  `wq_dump.py` prints them as *masks*: 32-bit hex words, lowest
//! word first, the last one zero-padded.  Kernel engineers diff `wq_dump.py`
//! output between boots and patches, so `cmwq topology` prints masks in exactly
//! that shape, down to the oddities (only the final word is padded).
//!
//! Older sysfs trees, and dumps that tools record, may hold only the third
//! form, the `%*pb` *mask* (`00000000,0000000f`: 32-bit hex words, highest
//! first, comma separated) of `thread_siblings`, `shared_cpu_map` or a node's
//! `cpumap`; [`parse_cpumask`] reads it.  Both parsers work in a set of
//! [`CPU_ID_LIMIT`] bits, so what they allocate is bounded by the limit
//! whatever the input repeats.

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
            return Err(format!("empty entry in cpu list {}", quoted(s)));
        }
        let (lo, hi) = match entry.split_once('-') {
            Some((a, b)) => (parse_cpu_id(a, entry)?, parse_cpu_id(b, entry)?),
            None => {
                let c = parse_cpu_id(entry, entry)?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(format!("reversed range {} in cpu list", quoted(entry)));
        }
        fill_range(&mut set, lo, hi);
    }
    Ok(mask_to_cpus(&set))
}

/// Sets bits `lo..=hi` (both below [`CPU_ID_LIMIT`]) a word at a time, so a
/// range costs its length in words, not in CPUs.
fn fill_range(set: &mut [u64], lo: usize, hi: usize) {
    let (first, last) = (lo / 64, hi / 64);
    for (w, word) in set.iter_mut().enumerate().take(last + 1).skip(first) {
        let from = if w == first { lo % 64 } else { 0 };
        let to = if w == last { hi % 64 } else { 63 };
        // Bits from..=to: all ones shifted, without overflowing at 64.
        let ones = u64::MAX >> (63 - (to - from));
        *word |= ones << from;
    }
}

/// Parses a kernel CPU mask as sysfs prints it (`%*pb`): 32-bit hex words,
/// highest first, comma separated, such as `00000000,000000f3`.
///
/// The kernel pads every word to 8 digits but the highest, which is only as
/// wide as `nr_cpu_ids` needs (`f` on a 4-CPU machine), so any word of 1 to
/// 8 digits is accepted.  Surrounding whitespace is ignored and an empty
/// string is the empty set, as for lists.  Words above [`CPU_ID_LIMIT`] must
/// be zero.  Anything else (an empty or over-long word, a non-hex digit) is
/// an error that quotes the offending word.
pub(crate) fn parse_cpumask(s: &str) -> Result<Vec<usize>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let mut set = vec![0u64; CPU_ID_LIMIT / 64];
    // Walk the words lowest first: the last one holds CPUs 0-31.
    for (i, word) in s.rsplit(',').enumerate() {
        let bits = parse_mask_word(word)?;
        if bits == 0 {
            continue;
        }
        if i >= CPU_ID_LIMIT / 32 {
            return Err(format!(
                "bad cpu mask word {}: sets cpus above the limit {}",
                quoted(word),
                CPU_ID_LIMIT - 1
            ));
        }
        set[i / 2] |= u64::from(bits) << (32 * (i % 2));
    }
    Ok(mask_to_cpus(&set))
}

fn parse_mask_word(word: &str) -> Result<u32, String> {
    if word.is_empty() || word.len() > 8 || !word.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "bad cpu mask word {}: expected 1 to 8 hex digits",
            quoted(word)
        ));
    }
    u32::from_str_radix(word, 16).map_err(|e| format!("bad cpu mask word {word:?}: {e}"))
}

/// The CPUs set in a bitmask of 64-bit words, lowest CPU first (the layout of
/// the kernel's `cpu_set_t` and of [`parse_cpulist`]'s set).
pub(crate) fn mask_to_cpus(words: &[u64]) -> Vec<usize> {
    words
        .iter()
        .enumerate()
        .filter(|(_, bits)| **bits != 0)
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
        return Err(format!(
            "bad cpu list entry {}: not a cpu number",
            quoted(entry)
        ));
    }
    match s.parse::<usize>() {
        Ok(v) if v < CPU_ID_LIMIT => Ok(v),
        _ => Err(format!(
            "bad cpu list entry {}: cpu id above the limit {}",
            quoted(entry),
            CPU_ID_LIMIT - 1
        )),
    }
}

/// `s` quoted for an error message, cut after its first 64 characters: a
/// garbage file may hold 64 KiB of one "entry", and the message should
/// still fit on a screen.
pub(crate) fn quoted(s: &str) -> String {
    const MAX_CHARS: usize = 64;
    match s.char_indices().nth(MAX_CHARS) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes in all)", &s[..cut], s.len()),
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
    fn kernel_masks() {
        assert_eq!(parse_cpumask("f\n").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_cpumask("00000001,80000000").unwrap(), vec![31, 32]);
        assert_eq!(parse_cpumask("  ").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpumask("0,00000000").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpumask("1,00000000,00000000").unwrap(), vec![64]);
        for bad in ["x", "123456789", "1,,2", ",1", "0x1", "1 2"] {
            let e = parse_cpumask(bad).unwrap_err();
            assert!(e.contains("bad cpu mask word"), "{bad}: {e}");
        }
        // Leading zero words beyond the limit are fine; a set bit is not.
        let zeros = vec!["00000000"; CPU_ID_LIMIT / 32 + 3].join(",");
        assert_eq!(parse_cpumask(&zeros).unwrap(), Vec::<usize>::new());
        let high = format!("1,{zeros}");
        assert!(parse_cpumask(&high).unwrap_err().contains("limit"));
    }

    #[test]
    fn long_garbage_is_quoted_short() {
        let e = parse_cpulist(&"x".repeat(5000)).unwrap_err();
        assert!(e.len() < 200, "{e}");
        assert!(e.contains("5000 bytes in all"), "{e}");
        assert_eq!(quoted("ab"), "\"ab\"");
    }

    #[test]
    fn ranges_fill_whole_words() {
        assert_eq!(parse_cpulist("63-64").unwrap(), vec![63, 64]);
        assert_eq!(parse_cpulist("0-63").unwrap(), (0..64).collect::<Vec<_>>());
        assert_eq!(
            parse_cpulist("5-200").unwrap(),
            (5..=200).collect::<Vec<_>>()
        );
        let top = CPU_ID_LIMIT - 1;
        assert_eq!(parse_cpulist(&format!("{top}")).unwrap(), vec![top]);
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
