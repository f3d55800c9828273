//! Builds and runs the C suite (`tests/c/run.sh`) against the library cargo
//! just built, so `cargo test --workspace --release` covers the C API: once
//! plainly and, where the C compiler has them, under AddressSanitizer (leak
//! detection on) and ThreadSanitizer. Skips, saying so, without a C compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "gcc".into())
}

/// The directory cargo put this build's `libcmwq_capi.{so,a}` in:
/// `target/<profile>/deps`, where `cargo test` leaves them (they reach
/// `target/<profile>` only when `cargo build` asks for the crate itself, so a
/// fresh clone's `cargo test` has them in `deps` alone).
fn lib_dir() -> PathBuf {
    // target/<profile>/deps/c_suite-HASH
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("target/<profile>/deps").to_path_buf();
    let has = |d: &Path| d.join("libcmwq_capi.so").exists() && d.join("libcmwq_capi.a").exists();
    if has(&deps) {
        return deps;
    }
    deps.parent().map_or(deps.clone(), Path::to_path_buf)
}

fn sanitizer_works(flag: &str) -> bool {
    let dir = std::env::temp_dir().join(format!("cmwq-capi-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let exe = dir.join("probe");
    let ok = Command::new(cc())
        .arg(format!("-fsanitize={flag}"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(&exe).status().is_ok_and(|s| s.success());
    let _ = std::fs::remove_dir_all(&dir);
    ok
}

#[test]
fn c_suite() {
    if Command::new(cc()).arg("--version").output().is_err() {
        eprintln!("no C compiler ({}): the C suite is skipped", cc());
        return;
    }
    let lib = lib_dir();
    assert!(
        lib.join("libcmwq_capi.so").exists() && lib.join("libcmwq_capi.a").exists(),
        "cargo did not build libcmwq_capi.{{so,a}} in {}",
        lib.display()
    );
    let mut modes = vec!["plain"];
    for (mode, flag) in [("asan", "address"), ("tsan", "thread")] {
        if sanitizer_works(flag) {
            modes.push(mode);
        } else {
            eprintln!(
                "{} has no working -fsanitize={flag}: mode {mode} skipped",
                cc()
            );
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/run.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(&modes)
        .env("CMWQ_CAPI_PREBUILT", &lib)
        // cargo's test LD_LIBRARY_PATH lists target/<profile>: nothing there
        // may stand in for the library the suite links.
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run tests/c/run.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "the C suite failed:\n{text}");
    assert!(text.contains("C suite: all passed"), "{text}");
}

/// `CMWQ_VERSION_MAJOR/MINOR/PATCH` in the header are the crate's version
/// (the SONAME's major and `cmwq.pc`'s version come from Cargo.toml).
#[test]
fn header_version_is_the_crate_version() {
    let h = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("include/linux/workqueue.h"),
    )
    .expect("read include/linux/workqueue.h");
    for (part, want) in [
        ("MAJOR", env!("CARGO_PKG_VERSION_MAJOR")),
        ("MINOR", env!("CARGO_PKG_VERSION_MINOR")),
        ("PATCH", env!("CARGO_PKG_VERSION_PATCH")),
    ] {
        let key = format!("#define CMWQ_VERSION_{part} ");
        let got = h
            .lines()
            .find_map(|l| l.strip_prefix(&key))
            .unwrap_or_else(|| panic!("no `{key}` line in linux/workqueue.h"));
        assert_eq!(
            got.trim(),
            want,
            "CMWQ_VERSION_{part}: header vs Cargo.toml"
        );
    }
}
