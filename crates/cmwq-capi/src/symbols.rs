//! The name of a C function from its address, for lockup reports (the
//! kernel's `%ps`): the file mapped at the address (`/proc/self/maps`), the
//! address as that file's virtual address (its program headers), and the
//! function symbol around it in the file's symbol table (`.symtab`, which
//! has the `static` functions that `dladdr` cannot see, else `.dynsym`). Read
//! only when a report is printed; each file's functions are read once.
//! A stripped or non-ELF64 file, or an address no file maps, gives the
//! address in hex.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A file's function symbols: (start, end, name), by start.
type Funcs = Arc<Vec<(u64, u64, String)>>;
/// What a file gave: its segments and functions (None: not an ELF64 we read).
type Parsed = Option<(Vec<Load>, Funcs)>;

/// The name of the function at `addr`, or `0x...`.
pub(crate) fn name(addr: usize) -> String {
    lookup(addr as u64).unwrap_or_else(|| format!("0x{addr:x}"))
}

fn lookup(addr: u64) -> Option<String> {
    let (path, file_off) = mapping(addr)?;
    static CACHE: Mutex<Option<HashMap<String, Parsed>>> = Mutex::new(None);
    let entry = {
        let mut c = crate::lock(&CACHE);
        let map = c.get_or_insert_with(HashMap::new);
        map.entry(path.clone())
            .or_insert_with(|| std::fs::read(&path).ok().and_then(|b| parse(&b)))
            .clone()
    }?;
    let (loads, funcs) = entry;
    let vaddr = loads
        .iter()
        .find(|l| file_off >= l.offset && file_off < l.offset + l.filesz)
        .map(|l| file_off - l.offset + l.vaddr)?;
    let i = funcs.partition_point(|f| f.0 <= vaddr);
    let (start, end, name) = funcs.get(i.checked_sub(1)?)?;
    (vaddr >= *start && (vaddr < *end || vaddr == *start)).then(|| name.clone())
}

/// The file mapped at `addr` and the address's offset in it.
fn mapping(addr: u64) -> Option<(String, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        // start-end perms offset dev inode path
        let mut f = l.split_whitespace();
        let (lo, hi) = f.next()?.split_once('-')?;
        let (lo, hi) = (
            u64::from_str_radix(lo, 16).ok()?,
            u64::from_str_radix(hi, 16).ok()?,
        );
        let off = u64::from_str_radix(f.nth(1)?, 16).ok()?;
        let path = f.nth(2)?;
        (addr >= lo && addr < hi && path.starts_with('/'))
            .then(|| (path.to_string(), addr - lo + off))
    })
}

/// A loadable segment: file offset, size in the file, virtual address.
#[derive(Clone)]
struct Load {
    offset: u64,
    filesz: u64,
    vaddr: u64,
}

fn u16_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as u64)
}
fn u32_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as u64)
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The segments and function symbols of a little-endian ELF64 file.
fn parse(b: &[u8]) -> Parsed {
    // Magic, 64-bit, little-endian.
    if b.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let at = |v: u64| usize::try_from(v).ok();
    let (phoff, shoff) = (u64_at(b, 0x20)?, u64_at(b, 0x28)?);
    let (phent, phnum) = (u16_at(b, 0x36)?, u16_at(b, 0x38)?);
    let (shent, shnum) = (u16_at(b, 0x3a)?, u16_at(b, 0x3c)?);
    let mut loads = Vec::new();
    for i in 0..phnum {
        let p = at(phoff + i * phent)?;
        // PT_LOAD
        if u32_at(b, p)? == 1 {
            loads.push(Load {
                offset: u64_at(b, p + 8)?,
                vaddr: u64_at(b, p + 16)?,
                filesz: u64_at(b, p + 32)?,
            });
        }
    }
    let section = |i: u64| at(shoff + i * shent);
    let table = |kind: u64| -> Option<Vec<(u64, u64, String)>> {
        let s = (0..shnum).find_map(|i| {
            let s = section(i)?;
            (u32_at(b, s + 4)? == kind).then_some(s)
        })?;
        let (off, size, ent) = (u64_at(b, s + 24)?, u64_at(b, s + 32)?, u64_at(b, s + 56)?);
        let strs = section(u32_at(b, s + 40)?)?;
        let str_off = at(u64_at(b, strs + 24)?)?;
        let mut v = Vec::new();
        for k in 0..size.checked_div(ent)? {
            let e = at(off + k * ent)?;
            let info = *b.get(e + 4)?;
            let value = u64_at(b, e + 8)?;
            // STT_FUNC, defined.
            if info & 0xf != 2 || value == 0 {
                continue;
            }
            let name_at = str_off + at(u32_at(b, e)?)?;
            let len = b.get(name_at..)?.iter().position(|&c| c == 0)?;
            let name = String::from_utf8_lossy(&b[name_at..name_at + len]).into_owned();
            v.push((value, value + u64_at(b, e + 16)?, name));
        }
        Some(v)
    };
    // SHT_SYMTAB, else SHT_DYNSYM.
    let mut funcs = table(2).filter(|v| !v.is_empty()).or_else(|| table(11))?;
    funcs.sort_by_key(|f| f.0);
    Some((loads, Arc::new(funcs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[unsafe(no_mangle)]
    extern "C" fn cmwq_capi_symbols_probe() {}

    #[test]
    fn a_function_of_this_program_is_named() {
        let f = cmwq_capi_symbols_probe as extern "C" fn() as usize;
        assert_eq!(name(f), "cmwq_capi_symbols_probe");
        assert!(name(8).starts_with("0x8"), "no mapping: hex");
    }
}
