//! The `inline-unlock` switch really changes the unlock path's code: the
//! `cmwq` binary of this test run has `unlock_wake` as a function symbol of
//! its own when built without the feature (out of line, the default), and no
//! such symbol when built with it (inlined at every call site).
//!
//! CI runs this file twice: `cargo test` (default) and
//! `cargo test -p cmwq-cli --features inline-unlock --test inline_unlock`.

use std::path::Path;

use cmwq_lab::icache::elf;

#[test]
fn unlock_wake_is_out_of_line_exactly_without_the_feature() {
    let bin = Path::new(env!("CARGO_BIN_EXE_cmwq"));
    let e = elf::read(bin).expect("read the cmwq binary's symbol table");
    // The binary does link the engine's queue path: its other functions are
    // there in both builds. (`WqInner::queue_counted`, in
    // `engine/workqueue/queue.rs`, is kept out of line on purpose: the one
    // copy that `Pool::insert` is inlined into since stop 44.)
    let queue = |name: &str| {
        name.starts_with("cmwq::engine::workqueue::")
            && name.ends_with("WqInner>::queue_counted")
            && name.contains("<impl cmwq::engine::workqueue::WqInner>")
    };
    assert!(
        e.functions.iter().any(|f| queue(&elf::demangle(&f.name))),
        "WqInner::queue_counted (cmwq::engine::workqueue::queue::<impl WqInner>::queue_counted) \
         missing: is this the cmwq binary?"
    );
    let out_of_line: Vec<String> = e
        .functions
        .iter()
        .filter(|f| f.name.contains("unlock_wake"))
        .map(|f| format!("{} ({} bytes)", elf::demangle(&f.name), f.size))
        .collect();
    if cfg!(feature = "inline-unlock") {
        assert!(
            out_of_line.is_empty(),
            "built with inline-unlock, yet unlock_wake is out of line: {out_of_line:?}"
        );
    } else {
        assert_eq!(
            out_of_line.len(),
            1,
            "built without inline-unlock: want one out-of-line unlock_wake, got {out_of_line:?}"
        );
    }
}
