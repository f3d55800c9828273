//! The shared library answers to `-lcmwq`: its SONAME is `libcmwq.so`, the
//! name `scripts/build-lib.sh` gives it, so a program linked against that
//! name finds it again at run time.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcmwq.so");
}
