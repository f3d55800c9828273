//! The size and alignment the library gives each public struct, so a test
//! compiled against the headers can check that the C compiler lays them
//! out the same (`tests/c/t_abi.c`): a struct embedded by value in the
//! user's (`struct work_struct`) is ABI, and a change to it must change
//! the SONAME's major number.

use std::ffi::{CStr, c_char, c_int};
use std::mem::{align_of, size_of};

use crate::attrs::WqAttrsC;
use crate::rcu::RcuWork;
use crate::work::{DelayedWorkStruct, WorkStruct};

/// `struct execute_work`: a `work_struct` (the header's layout; the
/// library only checks it).
#[repr(C)]
struct ExecuteWork {
    work: WorkStruct,
}

/// Every public struct: (name, size, alignment).
const LAYOUTS: [(&str, usize, usize); 5] = [
    (
        "work_struct",
        size_of::<WorkStruct>(),
        align_of::<WorkStruct>(),
    ),
    (
        "delayed_work",
        size_of::<DelayedWorkStruct>(),
        align_of::<DelayedWorkStruct>(),
    ),
    ("rcu_work", size_of::<RcuWork>(), align_of::<RcuWork>()),
    (
        "execute_work",
        size_of::<ExecuteWork>(),
        align_of::<ExecuteWork>(),
    ),
    (
        "workqueue_attrs",
        size_of::<WqAttrsC>(),
        align_of::<WqAttrsC>(),
    ),
];

/// The library's size and alignment of `struct <name>`: 0, or `-ENOENT`
/// for a name that is not a public struct (`*size`, `*align` untouched).
///
/// # Safety
///
/// `name` is a NUL-terminated string; `size` and `align` point to
/// writable `size_t`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cmwq_abi_layout(
    name: *const c_char,
    size: *mut usize,
    align: *mut usize,
) -> c_int {
    // SAFETY: the caller's promise.
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    match LAYOUTS.iter().find(|l| l.0.as_bytes() == name) {
        Some(&(_, s, a)) => {
            // SAFETY: the caller's promise.
            unsafe {
                *size = s;
                *align = a;
            }
            0
        }
        None => -libc::ENOENT,
    }
}

/// How many public structs [`cmwq_abi_layout`] knows (the test checks it
/// checked them all).
#[unsafe(no_mangle)]
pub extern "C" fn cmwq_abi_nr_structs() -> c_int {
    LAYOUTS.len() as c_int
}
