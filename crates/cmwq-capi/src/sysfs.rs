//! `filp_open` / `kernel_write` / `kernel_read` / `filp_close` (exported
//! as `cmwq_kc_*`, so a program with functions of those names of its own
//! still links; `linux/fs.h` maps the kernel's names): a file under
//! `/sys/bus/workqueue/devices/<wq>/` (or `/sys/devices/virtual/workqueue/<wq>/`)
//! reaches the live attributes of the `WQ_SYSFS` queue of that name, as the
//! kernel's sysfs files do: `affinity_scope`, `affinity_strict`, `cpumask`,
//! `nice` and `max_active` (written), `per_cpu` (read only). Unbound-only
//! attributes do not exist on a bound queue. Any other path is a real file.

use std::ffi::{CStr, c_char, c_int, c_long, c_uint, c_void};

use crate::wq::{CWq, with_sysfs};

const PREFIXES: [&str; 2] = [
    "/sys/bus/workqueue/devices/",
    "/sys/devices/virtual/workqueue/",
];
const UNBOUND_ATTRS: [&str; 4] = ["affinity_scope", "affinity_strict", "cpumask", "nice"];

/// `struct file`.
pub enum File {
    /// A workqueue attribute.
    Attr {
        /// The workqueue's name.
        wq: String,
        /// The attribute's file name.
        attr: String,
    },
    /// A real file.
    Fd(c_int),
}

fn err_ptr(errno: c_int) -> *mut File {
    (-(errno as isize)) as *mut File
}

fn split(path: &str) -> Option<(&str, &str)> {
    let rest = PREFIXES.iter().find_map(|p| path.strip_prefix(p))?;
    let (wq, attr) = rest.split_once('/')?;
    (!wq.is_empty() && !attr.is_empty() && !attr.contains('/')).then_some((wq, attr))
}

fn attr_exists(w: &CWq, attr: &str) -> bool {
    match attr {
        "per_cpu" | "max_active" => true,
        a => UNBOUND_ATTRS.contains(&a) && w.wq.flags().contains(cmwq::WqFlags::UNBOUND),
    }
}

/// `filp_open`: a workqueue attribute file, or a real file (`open(2)` with
/// `flags` and `mode`). An `ERR_PTR(-errno)` on failure.
///
/// # Safety
///
/// `path` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_kc_filp_open(
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> *mut File {
    // SAFETY: the caller's promise.
    let p = unsafe { CStr::from_ptr(path) }.to_string_lossy();
    if let Some((wq, attr)) = split(&p) {
        return match with_sysfs(wq, |w| attr_exists(w, attr)) {
            Some(true) => Box::into_raw(Box::new(File::Attr {
                wq: wq.into(),
                attr: attr.into(),
            })),
            _ => err_ptr(libc::ENOENT),
        };
    }
    // SAFETY: `path` is a C string; open has no other preconditions.
    let fd = unsafe { libc::open(path, flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return err_ptr(last_errno());
    }
    Box::into_raw(Box::new(File::Fd(fd)))
}

fn store(w: &CWq, attr: &str, value: &str) -> Result<(), String> {
    // The writable files of a WQ_SYSFS queue's directory; the control
    // endpoint's `cpus` knob has no sysfs file.
    const WRITABLE: [&str; 5] = [
        "affinity_scope",
        "affinity_strict",
        "cpumask",
        "nice",
        "max_active",
    ];
    if !WRITABLE.contains(&attr) {
        return Err("read-only attribute".into());
    }
    // One parser for a sysfs-form value, shared with `cmwq set`.
    cmwq::control::store_attr(&w.wq, attr, value).map_err(|e| e.to_string())
}

fn show(w: &CWq, attr: &str) -> String {
    let a = w.wq.attrs();
    let unbound = w.wq.flags().contains(cmwq::WqFlags::UNBOUND);
    match attr {
        "per_cpu" => format!("{}\n", u8::from(!unbound)),
        "max_active" => format!("{}\n", a.max_active),
        "affinity_scope" => format!("{}\n", a.affinity_scope.name()),
        "affinity_strict" => format!("{}\n", u8::from(a.affinity_strict)),
        "nice" => format!("{}\n", a.nice),
        "cpumask" => {
            let mut words = vec![0u32; a.cpumask.iter().max().map_or(1, |m| m / 32 + 1)];
            for &c in &a.cpumask {
                words[c / 32] |= 1 << (c % 32);
            }
            let s: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
            format!("{}\n", s.join(","))
        }
        _ => String::new(),
    }
}

/// `kernel_write`: writes `count` bytes at `*pos`. To an attribute: the
/// value (a trailing newline is ignored), `count` or `-EINVAL` (the reason is
/// printed on stderr); to a real file, `pwrite(2)`.
///
/// # Safety
///
/// `file` came from `filp_open`; `buf` holds `count` bytes; `pos` is NULL or
/// points to the offset.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_kc_kernel_write(
    file: *mut File,
    buf: *const c_void,
    count: usize,
    pos: *mut i64,
) -> isize {
    // SAFETY: the caller's promise.
    let (file, bytes) = unsafe { (&*file, std::slice::from_raw_parts(buf as *const u8, count)) };
    match file {
        File::Attr { wq, attr } => {
            let value = String::from_utf8_lossy(bytes);
            let value = value.trim_end_matches(['\n', '\0']).trim();
            match with_sysfs(wq, |w| store(w, attr, value)) {
                Some(Ok(())) => count as isize,
                Some(Err(msg)) => {
                    eprintln!("cmwq: {wq}/{attr}: {value:?} refused: {msg}");
                    -(libc::EINVAL as isize)
                }
                None => -(libc::ENODEV as isize),
            }
        }
        File::Fd(fd) => {
            // SAFETY: `bytes` is valid for `count` bytes; `pos` as promised.
            let n = unsafe {
                if pos.is_null() {
                    libc::write(*fd, buf, count)
                } else {
                    libc::pwrite(*fd, buf, count, *pos)
                }
            };
            if n < 0 {
                return -(last_errno() as isize);
            }
            if !pos.is_null() {
                // SAFETY: as promised.
                unsafe { *pos += n as i64 };
            }
            n
        }
    }
}

/// The `errno` of the last failed libc call (`EIO` if it set none).
fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// `kernel_read`: reads up to `count` bytes at `*pos`: an attribute's value
/// as its sysfs file shows it, or `pread(2)` of a real file.
///
/// # Safety
///
/// As [`cmwq_kc_kernel_write`], with `buf` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_kc_kernel_read(
    file: *mut File,
    buf: *mut c_void,
    count: usize,
    pos: *mut i64,
) -> isize {
    // SAFETY: the caller's promise.
    let file = unsafe { &*file };
    let off = if pos.is_null() {
        0
    } else {
        // SAFETY: as promised.
        unsafe { *pos }
    };
    let n = match file {
        File::Attr { wq, attr } => {
            let Some(text) = with_sysfs(wq, |w| show(w, attr)) else {
                return -(libc::ENODEV as isize);
            };
            let b = text.as_bytes();
            let from = (off.max(0) as usize).min(b.len());
            let n = (b.len() - from).min(count);
            // SAFETY: `buf` has room for `count` >= n bytes.
            unsafe { std::ptr::copy_nonoverlapping(b[from..].as_ptr(), buf as *mut u8, n) };
            n as isize
        }
        File::Fd(fd) => {
            // SAFETY: `buf` has room for `count` bytes.
            let n = unsafe { libc::pread(*fd, buf, count, off) };
            if n < 0 {
                return -(last_errno() as isize);
            }
            n
        }
    };
    if !pos.is_null() {
        // SAFETY: as promised.
        unsafe { *pos += n as i64 };
    }
    n
}

/// `filp_close`: closes a file from `filp_open`. 0 or `-errno`.
///
/// # Safety
///
/// `file` came from `filp_open` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_kc_filp_close(file: *mut File, _id: *mut c_void) -> c_int {
    if (file as c_long) < 0 && (file as c_long) >= -4095 {
        return -libc::EBADF;
    }
    // SAFETY: made by Box::into_raw in cmwq_kc_filp_open.
    let f = unsafe { Box::from_raw(file) };
    if let File::Fd(fd) = *f {
        // SAFETY: our own descriptor, closed once.
        if unsafe { libc::close(fd) } < 0 {
            return -libc::EIO;
        }
    }
    0
}
