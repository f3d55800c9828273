//! The sides of a comparison as command lines: this `cmwq` binary with
//! arguments (and `--json`), or a shell command; and how a side is shown.
//!
//! A leaf: the presets and `cmwq compare` itself build their sides here.

use cmwq_lab::ab::run::Side;

/// Side `label` from `--x ARGS` (this binary, `--json` added) or `--x-cmd CMD`.
pub fn side(label: &str, args: &Option<String>, cmd: &Option<String>) -> Result<Side, String> {
    let argv = match (args, cmd) {
        (Some(a), None) => {
            let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
            let mut v = vec![exe.to_string_lossy().into_owned()];
            v.extend(a.split_whitespace().map(str::to_string));
            if v.len() == 1 {
                return Err(format!("--{} is empty", label.to_lowercase()));
            }
            v.push("--json".into());
            v
        }
        (None, Some(c)) if !c.trim().is_empty() => {
            return Ok(Side {
                label: label.into(),
                argv: vec!["sh".into(), "-c".into(), c.clone()],
                json: false,
            });
        }
        (None, Some(_)) => return Err(format!("--{}-cmd is empty", label.to_lowercase())),
        _ => {
            return Err(format!(
                "side {label}: give exactly one of --{l} ARGS or --{l}-cmd CMD",
                l = label.to_lowercase()
            ));
        }
    };
    Ok(Side {
        label: label.into(),
        argv,
        json: true,
    })
}

/// A side that runs this `cmwq` binary with `args` (and `--json`).
pub fn own(label: &str, args: String) -> Result<Side, String> {
    side(label, &Some(args), &None)
}

/// `base`, then each of `defaults` ("--flag value") that `extra` does not set
/// itself, then `extra`.
pub fn with_defaults(base: &str, defaults: &[&str], extra: &str) -> String {
    let given: Vec<&str> = extra
        .split_whitespace()
        .filter(|t| t.starts_with("--"))
        .collect();
    let mut out = base.to_string();
    for d in defaults {
        let flag = d.split_whitespace().next().unwrap_or(d);
        if !given.contains(&flag) {
            out.push(' ');
            out.push_str(d);
        }
    }
    if !extra.trim().is_empty() {
        out.push(' ');
        out.push_str(extra.trim());
    }
    out
}

/// The side's command line as a reader would type it (this binary shown as `cmwq`).
pub fn display_argv(s: &Side) -> String {
    let mut v = s.argv.clone();
    if let Some(first) = v.first_mut()
        && std::env::current_exe().is_ok_and(|e| e.to_string_lossy() == *first)
    {
        *first = "cmwq".into();
    }
    v.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_yield_to_the_users_options() {
        assert_eq!(
            with_defaults(
                "bench",
                &["--threads 8", "--rounds 1"],
                "--threads 2 --items 9"
            ),
            "bench --rounds 1 --threads 2 --items 9"
        );
        assert_eq!(with_defaults("x", &["--a 1"], " "), "x --a 1");
    }

    #[test]
    fn own_sides_run_this_binary_with_json() {
        let s = own("fifo", "latency --priority fifo".into()).unwrap();
        assert_eq!(s.label, "fifo");
        assert!(s.json);
        assert_eq!(s.argv.last().map(String::as_str), Some("--json"));
        assert_eq!(display_argv(&s), "cmwq latency --priority fifo --json");
        let e = side("A", &Some("  ".into()), &None).unwrap_err();
        assert_eq!(e, "--a is empty");
        let e = side("B", &None, &None).unwrap_err();
        assert!(e.contains("--b ARGS or --b-cmd CMD"), "{e}");
    }
}
