//! The man page documents what the command line cannot say: every `CMWQ_*`
//! variable the library and the command read (ENVIRONMENT), and the exit
//! statuses (EXIT STATUS, not clap's "EXTRA"). The variables are found by
//! reading the sources, so a new one that the page does not list fails here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn man(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .arg("man")
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The lines of section `name` of a roff page (`.SH NAME` or `.SH "NAME"`
/// up to the next `.SH`).
fn section<'a>(page: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = page.lines().skip_while(|l| {
        l.strip_prefix(".SH ")
            .is_none_or(|h| h.trim_matches('"') != name)
    });
    assert!(lines.next().is_some(), "no section {name}:\n{page}");
    lines.take_while(|l| !l.starts_with(".SH ")).collect()
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `CMWQ_*` names in `text` outside its test module: a name is upper-case
/// letters, digits and underscores after `CMWQ_`, not ending in `_` (a bare
/// `CMWQ_` prefix in prose is not a variable).
fn names_in(text: &str, out: &mut BTreeSet<String>) {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let b = code.as_bytes();
    let mut i = 0;
    while let Some(at) = code[i..].find("CMWQ_") {
        let start = i + at;
        let mut end = start + 5;
        while end < b.len()
            && (b[end].is_ascii_uppercase() || b[end].is_ascii_digit() || b[end] == b'_')
        {
            end += 1;
        }
        let name = code[start..end].trim_end_matches('_');
        // Set at build time (`env!`), not read when the program runs.
        let compile_time = code[..start].ends_with("env!(\"");
        if name.len() > 5 && !compile_time {
            out.insert(name.to_string());
        }
        i = end;
    }
}

/// Every `CMWQ_*` variable read in the sources of the library, the command,
/// the C API and the lab (not counting the page's own list, `manpage.rs`).
fn variables_in_the_code() -> BTreeSet<String> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in ["cmwq", "cmwq-cli", "cmwq-capi", "cmwq-lab"] {
        rs_files(&crates.join(c).join("src"), &mut files);
    }
    files.retain(|f| !f.ends_with("cmwq-cli/src/manpage.rs"));
    let mut names = BTreeSet::new();
    for f in files {
        names_in(&std::fs::read_to_string(&f).unwrap(), &mut names);
    }
    names
}

#[test]
fn every_variable_in_the_code_is_in_environment() {
    let found = variables_in_the_code();
    // The scan works: it finds the variables everyone knows.
    for known in [
        "CMWQ_CONTROL",
        "CMWQ_CPU_QUOTA",
        "CMWQ_WORKER_STACK",
        "CMWQ_BLOCK_DETECT",
    ] {
        assert!(found.contains(known), "the scan missed {known}: {found:?}");
    }
    assert!(
        !found.contains("CMWQ_BUILD_COMMIT"),
        "a build-time name is not read at run time"
    );
    let page = man(&[]);
    let env = section(&page, "ENVIRONMENT");
    let listed: BTreeSet<String> = env
        .iter()
        .filter_map(|l| l.strip_prefix("\\fB")?.strip_suffix("\\fR"))
        .map(str::to_string)
        .collect();
    let missing: Vec<&String> = found.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "read in the code but not in the man page's ENVIRONMENT (crates/cmwq-cli/src/manpage.rs): {missing:?}"
    );
    let stale: Vec<&String> = listed.difference(&found).collect();
    assert!(
        stale.is_empty(),
        "ENVIRONMENT lists variables nothing reads: {stale:?}"
    );
    // Each entry says its default.
    let entries = env.iter().filter(|l| l.starts_with(".TP")).count();
    let defaults = env.iter().filter(|l| l.contains(" Default: ")).count();
    assert_eq!(entries, listed.len());
    assert_eq!(defaults, listed.len(), "{env:?}");
}

#[test]
fn exit_status_has_its_own_section() {
    for page in [man(&[]), {
        let dir = tempfile::tempdir().unwrap();
        man(&["--dir", dir.path().to_str().unwrap()]);
        std::fs::read_to_string(dir.path().join("cmwq.1")).unwrap()
    }] {
        let exit = section(&page, "EXIT STATUS").join("\n");
        for code in ["\\fB0\\fR", "\\fB1\\fR", "\\fB2\\fR"] {
            assert!(exit.contains(code), "{exit}");
        }
        assert!(
            !page.contains(".SH EXTRA"),
            "the exit status moved out of EXTRA"
        );
        section(&page, "ENVIRONMENT");
        section(&page, "SUBCOMMANDS");
    }
    // `--help` still says it, from the same table.
    let o = Command::new(env!("CARGO_BIN_EXE_cmwq"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(o.stdout).unwrap();
    assert!(help.contains("Exit status: 0: Success"), "{help}");
}
