#!/usr/bin/env python3
"""The README's first example must be examples/first_use.rs's opening lines.

The README shows a ten-line program that nothing compiles; first_use.rs is
compiled and run by CI. This keeps the two equal: the README block must be
first_use.rs from `use cmwq::` up to the first blank line inside `main`,
closed with `Ok(())` and `}`.
"""
import difflib
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
readme = (root / "README.md").read_text().splitlines()
example = (root / "crates/cmwq/examples/first_use.rs").read_text().splitlines()

marker = next(i for i, l in enumerate(readme) if "examples/first_use.rs" in l and l.startswith("<!--"))
assert readme[marker + 1] == "```rust", "the marker must sit right above a ```rust block"
end = readme.index("```", marker + 2)
shown = readme[marker + 2 : end]

start = example.index("use cmwq::{Work, Workqueue};")
body = example.index("fn main() -> Result<(), cmwq::Error> {", start)
stop = example.index("", body)  # first blank line inside main
expected = example[start:stop] + ["    Ok(())", "}"]

if shown != expected:
    diff = difflib.unified_diff(expected, shown, "first_use.rs", "README.md", lineterm="")
    print("\n".join(diff), file=sys.stderr)
    sys.exit(1)
print(f"README example = first_use.rs ({len(shown)} lines)")
