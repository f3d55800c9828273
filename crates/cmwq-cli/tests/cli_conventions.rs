//! What every command shares (issue 18): each `--json` document carries its
//! `"schema"` tag (`cmwq-<what>/<n>`, documented in SCHEMA.md), `monitor
//! --format openmetrics` is a scrape a Prometheus parser reads, and the
//! shell completions and the man page come from the same clap definitions.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_cmwq");

fn run(args: &[&str], env: &[(&str, &std::path::Path)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(args: &[&str], env: &[(&str, &std::path::Path)]) -> String {
    let o = run(args, env);
    assert!(
        o.status.success(),
        "cmwq {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// A `cmwq __control-child` serving in its own socket directory.
struct Served {
    child: Child,
    dir: std::path::PathBuf,
    _tmp: tempfile::TempDir,
}

impl Served {
    fn start() -> Served {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ctl");
        let mut child = Command::new(BIN)
            .arg("__control-child")
            .env("CMWQ_CONTROL_DIR", &dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("ready "), "child said {line:?}");
        Served {
            child,
            dir,
            _tmp: tmp,
        }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut i) = self.child.stdin.take() {
            let _ = writeln!(i, "exit");
        }
        let _ = self.child.wait();
    }
}

/// The `"schema"` tag of `doc`, which must be its first key (SCHEMA.md: a
/// script may read the tag before the rest).
fn schema_of(doc: &str, what: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(doc)
        .unwrap_or_else(|e| panic!("{what}: not one JSON document ({e}):\n{doc}"));
    let head = doc
        .trim_start()
        .strip_prefix('{')
        .unwrap_or("")
        .trim_start();
    assert!(
        head.starts_with("\"schema\""),
        "{what}: \"schema\" is not the first key:\n{}",
        &doc[..doc.len().min(300)]
    );
    v["schema"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no \"schema\" tag:\n{doc}"))
        .to_string()
}

/// Every command that takes `--json` tags its output; the tag names the
/// command's schema, version 1.
#[test]
fn every_json_output_carries_its_schema() {
    let served = Served::start();
    let pid = served.pid();
    let env = [("CMWQ_CONTROL_DIR", served.dir.as_path())];
    let docs: Vec<(&str, Vec<&str>)> = vec![
        ("cmwq-topology/1", vec!["topology", "--json"]),
        ("cmwq-dump/1", vec!["dump", "--json"]),
        ("cmwq-dump/1", vec!["dump", "--pid", &pid, "--json"]),
        (
            "cmwq-set/1",
            vec![
                "set",
                "--pid",
                &pid,
                "ctl_unbound",
                "max_active",
                "5",
                "--json",
            ],
        ),
        (
            "cmwq-set/1",
            vec![
                "set",
                "--pid",
                &pid,
                "workqueue",
                "watchdog_thresh",
                "40",
                "--json",
            ],
        ),
        ("cmwq-ps/1", vec!["ps", "--json"]),
        (
            "cmwq-bench/1",
            vec![
                "bench",
                "--threads",
                "2",
                "--items",
                "100",
                "--rounds",
                "1",
                "--scopes",
                "cpu",
                "--json",
            ],
        ),
        (
            "cmwq-mix/1",
            vec![
                "mix",
                "--producers",
                "1",
                "--jobs",
                "20",
                "--block-us",
                "100",
                "--rounds",
                "1",
                "--json",
            ],
        ),
        (
            "cmwq-compare/1",
            vec![
                "compare",
                "--a-cmd",
                r#"echo '{"metrics":{"x":10}}'"#,
                "--b-cmd",
                r#"echo '{"metrics":{"x":20}}'"#,
                "--runs",
                "2",
                "--warmup",
                "0",
                "--json",
            ],
        ),
        (
            "cmwq-percpu-cost/1",
            vec!["percpu", "cost", "--runs", "1", "--ops", "10000", "--json"],
        ),
        (
            "cmwq-percpu-isolation/1",
            vec![
                "percpu",
                "isolation",
                "--duration-ms",
                "30",
                "--drain-interval-ms",
                "5",
                "--json",
            ],
        ),
        (
            "cmwq-latency/1",
            vec![
                "latency",
                "--hogs",
                "1",
                "--duration-ms",
                "50",
                "--interval-us",
                "1000",
                "--json",
            ],
        ),
        (
            "cmwq-icache-workload/1",
            vec![
                "icache-workload",
                "--workload",
                "resident",
                "--items",
                "20",
                "--batch",
                "4",
                "--json",
            ],
        ),
    ];
    for (want, args) in &docs {
        let out = ok(args, &env);
        assert_eq!(&schema_of(&out, &args.join(" ")), want, "cmwq {args:?}");
    }
    // monitor --json prints JSON lines: each carries the tag.
    let out = ok(&["monitor", "--pid", &pid, "-i", "0", "--json"], &env);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 4, "{out}");
    for l in lines {
        assert_eq!(schema_of(l, "monitor --json"), "cmwq-monitor/1");
    }
    // The same with --format json.
    let out = ok(
        &["monitor", "--pid", &pid, "-i", "0", "--format", "json"],
        &env,
    );
    assert!(
        out.lines()
            .all(|l| l.starts_with("{\"schema\":\"cmwq-monitor/1\""))
    );

    // Each schema is documented.
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../cmwq-lab/src/bench/SCHEMA.md"
    ))
    .unwrap();
    for s in docs
        .iter()
        .map(|d| d.0)
        .chain(["cmwq-monitor/1", "cmwq-icache/1"])
    {
        assert!(doc.contains(&format!("`{s}`")), "SCHEMA.md lacks {s}");
    }
}

/// `monitor --format openmetrics` prints one scrape of the served process,
/// filtered by the name patterns, which Python's prometheus_client reads
/// (checked where it is installed; the library's own test compares values).
#[test]
fn monitor_scrapes_openmetrics_once() {
    let served = Served::start();
    let pid = served.pid();
    let env = [("CMWQ_CONTROL_DIR", served.dir.as_path())];
    let out = ok(
        &["monitor", "--pid", &pid, "--format", "openmetrics", "^ctl_"],
        &env,
    );
    assert!(out.ends_with("# EOF\n"), "{out}");
    assert!(
        out.contains("# TYPE cmwq_workqueue_started counter"),
        "{out}"
    );
    assert!(
        out.contains("# UNIT cmwq_workqueue_cpu_time_seconds seconds"),
        "{out}"
    );
    for wq in ["ctl_bound", "ctl_unbound", "ctl_ordered", "ctl_reclaim"] {
        assert!(
            out.contains(&format!("cmwq_workqueue_started_total{{workqueue=\"{wq}\"")),
            "{wq}:\n{out}"
        );
    }
    // The pattern kept the system workqueues out.
    assert!(!out.contains("workqueue=\"events\""), "{out}");
    let mut py = match Command::new("python3")
        .args([
            "-c",
            "import sys\n\
             try:\n    from prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n\
             except ImportError:\n    print('MISSING'); sys.exit(0)\n\
             print(sum(len(f.samples) for f in p(sys.stdin.read())))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped the parser check: no python3 ({e})");
            return;
        }
    };
    py.stdin.take().unwrap().write_all(out.as_bytes()).unwrap();
    let o = py.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "prometheus_client refused the scrape: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let said = String::from_utf8_lossy(&o.stdout);
    if said.trim() == "MISSING" {
        eprintln!("skipped the parser check: no prometheus_client (pip install prometheus_client)");
        return;
    }
    let n: usize = said.trim().parse().unwrap();
    let lines = out.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(n, lines, "every sample line parsed");
}

#[test]
fn completions_and_man_page_come_from_the_command_line() {
    const COMMANDS: [&str; 11] = [
        "bench",
        "compare",
        "percpu",
        "latency",
        "icache-workload",
        "topology",
        "dump",
        "monitor",
        "set",
        "ps",
        "completions",
    ];
    for shell in ["bash", "zsh", "fish"] {
        let s = ok(&["completions", shell], &[]);
        for c in COMMANDS {
            assert!(s.contains(c), "{shell} completion lacks {c}");
        }
        assert!(s.contains("--format"), "{shell}: monitor's options");
    }
    let bash = ok(&["completions", "bash"], &[]);
    assert!(bash.contains("complete -F _cmwq"), "{bash}");
    let o = run(&["completions", "tcsh"], &[]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );

    let man = ok(&["man"], &[]);
    assert!(
        man.starts_with(".ie") || man.contains(".TH cmwq 1"),
        "{man}"
    );
    assert!(man.contains(".TH cmwq 1"), "{man}");
    for c in COMMANDS {
        assert!(
            man.contains(&format!("cmwq\\-{}", c.replace('-', "\\-"))),
            "man lacks {c}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    ok(&["man", "--dir", dir.path().to_str().unwrap()], &[]);
    for page in ["cmwq.1", "cmwq-monitor.1", "cmwq-bench.1", "cmwq-man.1"] {
        let p = dir.path().join(page);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page}");
    }
    let monitor = std::fs::read_to_string(dir.path().join("cmwq-monitor.1")).unwrap();
    assert!(monitor.contains("openmetrics"), "{monitor}");
}
