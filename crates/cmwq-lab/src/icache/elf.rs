//! Function sizes from an ELF file's symbol table (`.symtab`), and the names
//! behind Rust's mangled symbols.
//!
//! A small reader of 64-bit little-endian ELF (x86-64, aarch64): the section
//! headers, the executable sections' total size (the "text" of `size`), and
//! every `STT_FUNC` symbol with a non-zero size. Nothing else of the format is
//! read. A binary stripped of `.symtab` is an error that says so: the study
//! needs symbols (the release profile keeps them).

use std::collections::BTreeMap;

/// One function symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncSymbol {
    /// The raw (mangled) name.
    pub name: String,
    /// Address in the file's virtual address space.
    pub addr: u64,
    /// Size in bytes (`st_size`).
    pub size: u64,
}

/// What the study needs from a binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfSizes {
    /// Total size of the executable (`SHF_EXECINSTR`) sections.
    pub text_bytes: u64,
    /// Function symbols with a size, in symbol-table order.
    pub functions: Vec<FuncSymbol>,
}

impl ElfSizes {
    /// Function sizes by demangled name (see [`demangle`]); functions that
    /// share a name after demangling (generic instances, local copies) are
    /// summed, as one entry of `bloat-o-meter` sums same-named statics.
    pub fn by_name(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for f in &self.functions {
            *m.entry(demangle(&f.name)).or_insert(0) += f.size;
        }
        m
    }

    /// True if some function symbol's raw name contains `needle`.
    pub fn has_function(&self, needle: &str) -> bool {
        self.functions.iter().any(|f| f.name.contains(needle))
    }
}

const SHT_SYMTAB: u32 = 2;
const SHF_EXECINSTR: u64 = 4;
const STT_FUNC: u8 = 2;

fn u16_at(b: &[u8], off: usize) -> Result<u16, String> {
    b.get(off..off + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| format!("ELF truncated at byte {off}"))
}

fn u32_at(b: &[u8], off: usize) -> Result<u32, String> {
    b.get(off..off + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| format!("ELF truncated at byte {off}"))
}

fn u64_at(b: &[u8], off: usize) -> Result<u64, String> {
    b.get(off..off + 8)
        .map(|s| {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            u64::from_le_bytes(a)
        })
        .ok_or_else(|| format!("ELF truncated at byte {off}"))
}

fn usize_of(x: u64, what: &str) -> Result<usize, String> {
    usize::try_from(x).map_err(|_| format!("ELF {what} {x} does not fit in memory"))
}

/// One section header, the fields we use.
struct Shdr {
    kind: u32,
    flags: u64,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

/// Reads the text size and the function symbols of an ELF64 LE image.
pub fn parse(b: &[u8]) -> Result<ElfSizes, String> {
    if b.len() < 64 || &b[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    if b[4] != 2 {
        return Err("not a 64-bit ELF file (only ELF64 is read)".into());
    }
    if b[5] != 1 {
        return Err("not a little-endian ELF file".into());
    }
    let shoff = usize_of(u64_at(b, 0x28)?, "section header offset")?;
    let shentsize = u16_at(b, 0x3a)? as usize;
    let shnum = u16_at(b, 0x3c)? as usize;
    if shentsize < 64 {
        return Err(format!("ELF section header size {shentsize} < 64"));
    }
    let mut shdrs = Vec::with_capacity(shnum);
    for i in 0..shnum {
        let o = shoff + i * shentsize;
        shdrs.push(Shdr {
            kind: u32_at(b, o + 4)?,
            flags: u64_at(b, o + 8)?,
            offset: u64_at(b, o + 0x18)?,
            size: u64_at(b, o + 0x20)?,
            link: u32_at(b, o + 0x28)?,
            entsize: u64_at(b, o + 0x38)?,
        });
    }
    let text_bytes = shdrs
        .iter()
        .filter(|s| s.flags & SHF_EXECINSTR != 0)
        .map(|s| s.size)
        .sum();
    let symtab = shdrs.iter().find(|s| s.kind == SHT_SYMTAB).ok_or(
        "no .symtab: the binary is stripped (build without strip, e.g. the release profile)",
    )?;
    let strtab = shdrs
        .get(symtab.link as usize)
        .ok_or_else(|| format!("symtab links to missing section {}", symtab.link))?;
    let str_off = usize_of(strtab.offset, "strtab offset")?;
    let str_end = str_off + usize_of(strtab.size, "strtab size")?;
    let strs = b.get(str_off..str_end).ok_or("ELF strtab out of bounds")?;
    let ent = if symtab.entsize == 0 {
        24
    } else {
        usize_of(symtab.entsize, "symbol size")?
    };
    if ent < 24 {
        return Err(format!("ELF symbol entry size {ent} < 24"));
    }
    let sym_off = usize_of(symtab.offset, "symtab offset")?;
    let nsyms = usize_of(symtab.size, "symtab size")? / ent;
    let mut functions = Vec::new();
    for i in 0..nsyms {
        let o = sym_off + i * ent;
        let name_off = u32_at(b, o)? as usize;
        let info = *b.get(o + 4).ok_or("ELF symtab truncated")?;
        let addr = u64_at(b, o + 8)?;
        let size = u64_at(b, o + 16)?;
        if info & 0xf != STT_FUNC || size == 0 {
            continue;
        }
        let rest = strs
            .get(name_off..)
            .ok_or_else(|| format!("symbol name offset {name_off} outside strtab"))?;
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        functions.push(FuncSymbol {
            name: String::from_utf8_lossy(&rest[..end]).into_owned(),
            addr,
            size,
        });
    }
    Ok(ElfSizes {
        text_bytes,
        functions,
    })
}

/// Reads and parses the ELF file at `path`.
pub fn read(path: &std::path::Path) -> Result<ElfSizes, String> {
    let b = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&b).map_err(|e| format!("{}: {e}", path.display()))
}

/// A readable, build-independent name for a symbol, demangled by
/// `rustc-demangle` (Rust's legacy `_ZN..E` and v0 `_R..` manglings): legacy
/// `_ZN4cmwq4pool11unlock_wake17h<hash>E` and v0 `_RNvNtCs<hash>_4cmwq4pool11unlock_wake`
/// both become `cmwq::pool::unlock_wake`, without the hash or the crate
/// disambiguator (which change with the crate's features, so the two builds
/// would never match otherwise); LLVM's `.llvm.<n>` suffix is dropped. Other
/// names (C symbols) are returned as they are.
pub fn demangle(raw: &str) -> String {
    let base = match raw.find(".llvm.") {
        Some(i) => &raw[..i],
        None => raw,
    };
    match rustc_demangle::try_demangle(base) {
        // `{:#}`: without the hash / disambiguators.
        Ok(d) => format!("{d:#}"),
        Err(_) => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 LE image: null section, .text (exec, 0x40 bytes),
    /// .symtab with a null symbol, two functions (one of size 0) and an
    /// object, and its .strtab.
    fn tiny_elf() -> Vec<u8> {
        let strtab = b"\0_ZN4cmwq4pool11unlock_wake17h52bb9a97cf851554E\0main\0empty\0DATA\0";
        let name = |s: &str| {
            let pat = format!("\0{s}\0");
            let i = strtab
                .windows(pat.len())
                .position(|w| w == pat.as_bytes())
                .unwrap();
            (i + 1) as u32
        };
        let mut syms = vec![0u8; 24];
        let mut sym = |n: u32, info: u8, addr: u64, size: u64| {
            let mut s = Vec::new();
            s.extend(n.to_le_bytes());
            s.push(info);
            s.push(0);
            s.extend(1u16.to_le_bytes());
            s.extend(addr.to_le_bytes());
            s.extend(size.to_le_bytes());
            syms.extend(s);
        };
        sym(
            name("_ZN4cmwq4pool11unlock_wake17h52bb9a97cf851554E"),
            0x02,
            0x1000,
            413,
        );
        sym(name("main"), 0x12, 0x1200, 64);
        sym(name("empty"), 0x12, 0x1300, 0);
        sym(name("DATA"), 0x11, 0x2000, 8);
        let text_off = 64usize;
        let text_len = 0x40usize;
        let sym_off = text_off + text_len;
        let str_off = sym_off + syms.len();
        let sh_off = str_off + strtab.len();
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x28..0x30].copy_from_slice(&(sh_off as u64).to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&4u16.to_le_bytes());
        b.extend(vec![0x90u8; text_len]);
        b.extend(&syms);
        b.extend(strtab);
        let shdr = |kind: u32, flags: u64, off: usize, size: usize, link: u32, ent: u64| {
            let mut h = vec![0u8; 64];
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[8..16].copy_from_slice(&flags.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&(off as u64).to_le_bytes());
            h[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            h[0x28..0x2c].copy_from_slice(&link.to_le_bytes());
            h[0x38..0x40].copy_from_slice(&ent.to_le_bytes());
            h
        };
        b.extend(shdr(0, 0, 0, 0, 0, 0));
        b.extend(shdr(1, 2 | SHF_EXECINSTR, text_off, text_len, 0, 0));
        b.extend(shdr(SHT_SYMTAB, 0, sym_off, syms.len(), 3, 24));
        b.extend(shdr(3, 0, str_off, strtab.len(), 0, 0));
        b
    }

    #[test]
    fn reads_functions_with_size_and_the_text_size() {
        let e = parse(&tiny_elf()).unwrap();
        assert_eq!(e.text_bytes, 0x40);
        let names: Vec<&str> = e.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["_ZN4cmwq4pool11unlock_wake17h52bb9a97cf851554E", "main"]
        );
        assert_eq!(e.functions[0].size, 413);
        assert_eq!(e.functions[0].addr, 0x1000);
        assert!(e.has_function("unlock_wake"));
        assert!(!e.has_function("DATA"));
        let m = e.by_name();
        assert_eq!(m["cmwq::pool::unlock_wake"], 413);
        assert_eq!(m["main"], 64);
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        assert!(parse(b"hello").unwrap_err().contains("not an ELF"));
        let mut b = tiny_elf();
        b[4] = 1;
        assert!(parse(&b).unwrap_err().contains("64-bit"));
        let b = tiny_elf();
        let e = parse(&b[..b.len() - 10]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        // Stripped: the symtab section header retyped as PROGBITS.
        let mut b = tiny_elf();
        let sh = b.len() - 2 * 64;
        b[sh + 4..sh + 8].copy_from_slice(&1u32.to_le_bytes());
        assert!(parse(&b).unwrap_err().contains("stripped"));
    }

    #[test]
    fn demangles_v0_rust_names() {
        // Two builds of one function differ only in the crate disambiguator.
        for sym in [
            "_RNvNtCs1234_4cmwq4pool11unlock_wake",
            "_RNvNtCsfFfFfFfF_4cmwq4pool11unlock_wake.llvm.42",
        ] {
            assert_eq!(demangle(sym), "cmwq::pool::unlock_wake", "{sym}");
        }
        assert_eq!(
            demangle("_RNvMNtCs1234_4cmwq4workNtB2_4Work3new"),
            "<cmwq::work::Work>::new"
        );
    }

    #[test]
    fn demangles_legacy_rust_names() {
        assert_eq!(
            demangle("_ZN4cmwq4pool11unlock_wake17h52bb9a97cf851554E.llvm.7968135626270759774"),
            "cmwq::pool::unlock_wake"
        );
        assert_eq!(
            demangle(
                "_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$closure$u7d$$u7d$$GT$17h0123456789abcdefE"
            ),
            "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>"
        );
        assert_eq!(
            demangle(
                "_ZN53_$LT$cmwq..work..Work$u20$as$u20$core..fmt..Debug$GT$3fmt17h0123456789abcdefE"
            ),
            "<cmwq::work::Work as core::fmt::Debug>::fmt"
        );
        assert_eq!(demangle("memcpy"), "memcpy");
        assert_eq!(demangle("memcpy.llvm.123"), "memcpy");
        assert_eq!(demangle("_ZN3foo"), "_ZN3foo");
        assert_eq!(demangle("_ZN99fooE"), "_ZN99fooE");
    }
}
