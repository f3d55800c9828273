//! `scripts/device-profile.sh`: its bad inputs are errors that name the
//! value, and `map` names the source of a hot instruction (the one before
//! the sampled address) while it skips other objects' and cold lines.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/device-profile.sh")
}

fn run(args: &[&str], env: &[(&str, &str)], cwd: &Path) -> Output {
    let mut c = Command::new("bash");
    c.arg(script()).args(args).current_dir(cwd);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("bash runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cmwq-dp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn bad_inputs_name_the_value() {
    let d = scratch("bad");
    let o = run(&["map", "/nonexistent/cmwq-dp"], &[], &d);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/nonexistent/cmwq-dp"),
        "{}",
        stderr(&o)
    );

    let o = run(&["run"], &[], &d);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("OUT"), "{}", stderr(&o));

    let out = d.join("out");
    let out = out.to_str().unwrap();
    let o = run(&["run"], &[("OUT", out), ("SHAPES", "cpu:64 pods:8")], &d);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'pods:8'"), "{}", stderr(&o));

    let o = run(&["run"], &[("OUT", out), ("SHAPES", "cpu:x")], &d);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'cpu:x'"), "{}", stderr(&o));

    let o = run(&["run"], &[("OUT", out), ("ITEMS", "1e6")], &d);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'1e6'"), "{}", stderr(&o));

    // Valid settings, nothing prepared: says what to do, names the folder.
    let o = run(&["run"], &[("OUT", out)], &d);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(".manycore/new"), "{}", stderr(&o));

    let o = run(
        &["map", d.to_str().unwrap()],
        &[("BIN", "/nonexistent/bin")],
        &d,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/bin"), "{}", stderr(&o));

    let o = run(&["profile"], &[], &d);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("usage"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// A function of this test binary whose address `map` must resolve.
#[inline(never)]
fn marker_for_map(n: u64) -> u64 {
    let mut x = std::hint::black_box(n);
    for i in 0..std::hint::black_box(8u64) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    x
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn map_names_the_instruction_before_the_sample() {
    assert_ne!(marker_for_map(1), 0);
    if !["nm", "objdump", "addr2line"].iter().all(|t| have(t)) {
        eprintln!("skipped: binutils (nm, objdump, addr2line) not installed");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let nm = Command::new("nm").arg(&exe).output().unwrap();
    let syms = String::from_utf8_lossy(&nm.stdout);
    let Some(addr) = syms
        .lines()
        .find(|l| l.contains("marker_for_map"))
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
    else {
        eprintln!("skipped: this test binary has no symbol table");
        return;
    };
    // The function's first instructions: a sample on the third names the
    // second (the one that held retirement up), not the third or the first.
    let dis = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(format!("--start-address={addr:#x}"))
        .arg(format!("--stop-address={:#x}", addr + 48))
        .arg(&exe)
        .output()
        .unwrap();
    let starts: Vec<u64> = String::from_utf8_lossy(&dis.stdout)
        .lines()
        .filter_map(|l| {
            let (a, _) = l.trim_start().split_once(':')?;
            u64::from_str_radix(a, 16).ok()
        })
        .collect();
    assert!(
        starts.len() >= 4,
        "marker_for_map disassembles: {starts:x?}"
    );
    let d = scratch("map");
    let (want, hot, cold) = (starts[1], starts[2], starts[3]);
    let fixture = format!(
        "===== memcpy\n Percent | Source code & Disassembly of libc.so.6 for cpu-clock (9 samples)\n   90.00 :   {other:x}: mov (%rax),%rax\n\
         ===== marker\n Percent | Source code & Disassembly of new for cpu-clock (100 samples)\n   60.00 :   {hot:x}: mov (%rax),%rax\n    0.50 :   {cold:x}: add %rax,%rcx\n",
        other = addr + 0x100
    );
    std::fs::write(d.join("annot-cpu-b64.txt"), fixture).unwrap();
    let o = run(
        &["map", d.to_str().unwrap()],
        &[("BIN", exe.to_str().unwrap())],
        &d,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{}", out, stderr(&o));
    assert!(out.contains("## annot-cpu-b64"), "{out}");
    let lines: Vec<&str> = out.lines().filter(|l| l.contains('%')).collect();
    assert_eq!(
        lines.len(),
        1,
        "one hot line of ours, not libc's, not the cold one: {out}"
    );
    assert!(lines[0].contains("60.00%"), "{out}");
    assert!(lines[0].contains("marker_for_map"), "{out}");
    let prev = u64::from_str_radix(lines[0].split_whitespace().nth(1).unwrap(), 16).unwrap();
    assert_eq!(
        prev, want,
        "the instruction before the sample at {hot:x}: {out}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
