//! What the tests of the lab's Python scripts share: running a script and
//! a scratch directory of their own.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `scripts/{name}` with `python3` and `args`.
pub fn script(name: &str, args: &[&str]) -> Output {
    Command::new("python3")
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("scripts")
                .join(name),
        )
        .args(args)
        .output()
        .expect("python3 runs")
}

/// The script's standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An empty directory of this test process, named after `tag`.
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cmwq-lab-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
