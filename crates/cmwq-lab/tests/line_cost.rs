//! `scripts/line-cost.py` on saved callgrind outputs (`--from`): the chosen
//! event's column is read from the file's `events:` line, a call's inclusive
//! cost is not counted as the caller's own, only the matching functions
//! count, and bad inputs are errors that name the value.

mod common;

use std::path::Path;
use std::process::Output;

use common::{scratch, stderr};

/// A callgrind output with `--dump-instr=yes` and `--cache-sim=yes`'s
/// columns (`events`), `k` times the base counts: `worker_thread` owns three
/// instructions (the last written with its zero columns left out) and calls
/// `other`, whose own instruction does not count under `--match
/// worker_thread`; the call's inclusive cost (the line after `calls=`) must
/// not count as `worker_thread`'s own.
fn callgrind(events: &str, k: u64) -> String {
    format!(
        "version: 1\ncreator: line_cost test\nevents: {events}\n\
         ob=(1) cmwq\nfl=(1) worker.rs\n\
         fn=(1) cmwq::engine::pool::worker::worker_thread\n\
         0xdead0000 10 {} {} {}\n\
         +4 * {} {} {}\n\
         cfn=(2) other\n\
         calls=1 0xdead1000 5\n\
         +4 * {} {} {}\n\
         +4 * {}\n\
         fn=(2)\n\
         0xdead1000 5 {} {} {}\n",
        100 * k,
        40 * k,
        4 * k,
        200 * k,
        80 * k,
        8 * k,
        // The call's inclusive cost, which grows with the items too.
        1000 * k,
        500 * k,
        70 * k,
        // Trailing zero columns left out, as callgrind writes them.
        300 * k,
        50 * k,
        20 * k,
        2 * k,
    )
}

fn run(args: &[&str]) -> Output {
    common::script("line-cost.py", args)
}

fn line_cost(d: &Path, events: &str, extra: &[&str]) -> Output {
    let (c1, c2) = (d.join("lc.1.cg"), d.join("lc.3.cg"));
    std::fs::write(&c1, callgrind(events, 1)).unwrap();
    std::fs::write(&c2, callgrind(events, 3)).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut args = vec![
        "--bin",
        exe.to_str().unwrap(),
        "--from",
        c1.to_str().unwrap(),
        c2.to_str().unwrap(),
        "--threads",
        "1",
        "--n1",
        "1",
        "--n2",
        "3",
        "--match",
        "worker_thread",
        "--json",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "line-cost.py failed: {}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("line-cost.py --json prints JSON")
}

#[test]
fn the_chosen_events_column_counts_and_calls_do_not() {
    let d = scratch("line-cost-events");
    // Two items (one producer, 1 -> 3): worker_thread's own instructions
    // grow from 100 + 200 + 300 to three times that.
    let ir = json(&line_cost(&d, "Ir Dr D1mr", &[]));
    assert_eq!(ir["event"], "Ir");
    assert_eq!(ir["ir_per_item"].as_f64(), Some(600.0), "{ir}");
    let miss = json(&line_cost(&d, "Ir Dr D1mr", &["--event", "D1mr"]));
    assert_eq!(miss["event"], "D1mr");
    // 4 + 8 (the line with its trailing columns left out counts 0), tripled.
    assert_eq!(miss["per_item"].as_f64(), Some(12.0), "{miss}");
    let rows = miss["lines"].as_array().unwrap();
    let sum: f64 = rows.iter().map(|r| r["per_item"].as_f64().unwrap()).sum();
    assert_eq!(sum, 12.0, "the lines add up to the total: {miss}");
    let reads = json(&line_cost(&d, "Ir Dr D1mr", &["--event", "Dr"]));
    assert_eq!(reads["per_item"].as_f64(), Some(120.0), "{reads}");
}

#[test]
fn bad_inputs_are_errors_that_name_the_value() {
    let d = scratch("line-cost-errors");
    let o = line_cost(&d, "Ir", &["--event", "D1mr"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("no D1mr counts") && e.contains("--cache-sim=yes"),
        "{e}"
    );
    let o = line_cost(&d, "Ir", &["--event", "Bogus"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'Bogus'"), "{}", stderr(&o));
    // A file that is not there, and one that is not callgrind's output:
    // each named.
    let junk = d.join("junk.cg");
    std::fs::write(&junk, "0xdead0000 1 2\n").unwrap();
    for f in [d.join("nope.cg"), junk] {
        let f = f.to_str().unwrap();
        let exe = std::env::current_exe().unwrap();
        let o = run(&["--bin", exe.to_str().unwrap(), "--from", f, f]);
        assert_eq!(o.status.code(), Some(2), "{f}");
        assert!(stderr(&o).contains(f), "{f}: {}", stderr(&o));
    }
}
