//! Records the git commit the binary is built from (`CMWQ_BUILD_COMMIT`), for
//! the provenance line of `--plot` SVGs; `unknown` outside a git checkout
//! (a crates.io build) or without git.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
    let mark = if dirty { " (with local changes)" } else { "" };
    println!("cargo:rustc-env=CMWQ_BUILD_COMMIT={commit}{mark}");
    // Rebuild when HEAD moves or the branch it names gets a new commit.
    for what in ["HEAD", "index"] {
        if let Some(p) = git(&["rev-parse", "--git-path", what]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--git-path", &r])
    {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
