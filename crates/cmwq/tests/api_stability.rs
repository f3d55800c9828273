//! The rule of the README's "Stability" section, checked on the source: every
//! public data type whose fields or variants users can see is
//! `#[non_exhaustive]`, so that a minor version can add a counter to a stats
//! type, a field to a snapshot type or a variant to an enum without breaking
//! a program that builds or matches it.
//!
//! A struct whose fields are all private (`Workqueue`, `Work`, `WqFlags`) can
//! grow anyway and needs nothing. A new public struct with public fields, or
//! a new public enum, fails here until it carries the attribute or is put on
//! [`USER_BUILT`] with the reason users must build it by hand.

use std::path::{Path, PathBuf};

/// Public types with public fields or variants that stay exhaustive on
/// purpose: (name, why users build or match them whole). Adding a field or
/// variant to one of these is a breaking change. None so far: the types users
/// build (`WqFlags`, `Work`, the builder) keep their fields private.
const USER_BUILT: &[(&str, &str)] = &[];

/// Files that are not part of the public API (`--cfg loom` builds only,
/// behind `#[doc(hidden)]`).
const NOT_API: &[&str] = &["loom_api.rs"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs")
            && !NOT_API
                .iter()
                .any(|n| p.file_name().is_some_and(|f| f == *n))
        {
            out.push(p);
        }
    }
}

/// One `pub struct`/`pub enum` at the top of a file.
#[derive(Debug)]
struct Decl {
    file: String,
    name: String,
    is_enum: bool,
    /// Its doc comment and attributes, the lines above it.
    attrs: Vec<String>,
    /// A struct with a `pub` field (a tuple struct: a `pub` element).
    pub_fields: bool,
}

fn decls(file: &Path) -> Vec<Decl> {
    let text = std::fs::read_to_string(file).expect("a source file");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let (is_enum, rest) = if let Some(r) = line.strip_prefix("pub struct ") {
            (false, r)
        } else if let Some(r) = line.strip_prefix("pub enum ") {
            (true, r)
        } else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The attributes and docs: the lines above, up to a blank line or
        // the end of the previous item.
        let attrs: Vec<String> = lines[..i]
            .iter()
            .rev()
            .take_while(|l| {
                let t = l.trim();
                !t.is_empty() && !t.ends_with('}') && !t.ends_with(';')
            })
            .map(|l| l.trim().to_string())
            .collect();
        let pub_fields = if is_enum {
            false
        } else if rest.contains('(') {
            // `pub struct X(pub T)`, `pub struct X(pub(crate) T)`.
            let inner = &rest[rest.find('(').unwrap()..];
            inner.match_indices("pub").any(|(at, _)| {
                let after = &inner[at + 3..];
                !after.starts_with('(')
            })
        } else if rest.trim_end().ends_with(';') {
            false // a unit struct
        } else {
            // The body, to the closing brace at the start of a line.
            lines[i + 1..]
                .iter()
                .take_while(|l| !l.starts_with('}'))
                .any(|l| {
                    let t = l.trim_start();
                    t.strip_prefix("pub ").is_some_and(|f| {
                        let f = f.trim_start();
                        f.split(':').next().is_some_and(|id| {
                            !id.is_empty() && id.chars().all(|c| c.is_alphanumeric() || c == '_')
                        }) && f.contains(':')
                    })
                })
        };
        out.push(Decl {
            file: file.display().to_string(),
            name,
            is_enum,
            attrs,
            pub_fields,
        });
    }
    out
}

fn all_decls() -> Vec<Decl> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files.iter().flat_map(|f| decls(f)).collect()
}

#[test]
fn open_public_types_are_non_exhaustive() {
    let decls = all_decls();
    let open: Vec<&Decl> = decls.iter().filter(|d| d.is_enum || d.pub_fields).collect();
    // The scan sees what it must: a stats type, a snapshot type, an enum
    // users pass in, an error; and opaque types are told apart.
    for name in [
        "WorkqueueStats",
        "Snapshot",
        "WorkqueueSnap",
        "Scope",
        "Error",
    ] {
        assert!(
            open.iter().any(|d| d.name == name),
            "the scan of src/ missed {name}: {:?}",
            decls.iter().map(|d| &d.name).collect::<Vec<_>>()
        );
    }
    for name in ["Workqueue", "Work", "WqFlags"] {
        let d = decls.iter().find(|d| d.name == name);
        assert!(
            d.is_some_and(|d| !d.pub_fields),
            "{name} should be found, with no public field: {d:?}"
        );
    }

    let missing: Vec<String> = open
        .iter()
        .filter(|d| !d.attrs.iter().any(|a| a == "#[non_exhaustive]"))
        .filter(|d| !USER_BUILT.iter().any(|(n, _)| *n == d.name))
        .map(|d| format!("{} ({})", d.name, d.file))
        .collect();
    assert!(
        missing.is_empty(),
        "public types with public fields or variants but no #[non_exhaustive] \
         (add it, or list the type in USER_BUILT with the reason users build it): {missing:?}"
    );
}
