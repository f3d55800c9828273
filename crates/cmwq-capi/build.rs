//! The shared library answers to `-lcmwq` and carries its ABI version: its
//! SONAME is `libcmwq.so.<major>` (the crate's major version), the name
//! `make install` and `scripts/build-lib.sh` give a link to it, so a
//! program linked against `-lcmwq` finds a library of the same ABI at run
//! time. The major changes with any ABI change (a public struct's layout,
//! a function's signature), which `tests/c/t_abi.c` watches.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcmwq.so.{major}");
}
