#!/usr/bin/env python3
"""What each source line of the engine costs per item, inlining resolved.

`cost-account.sh` gives an item's instructions function by function; once
the hot functions inline most of what they call, a function's total says
little about where its instructions go. Callgrind's own line counts put an
inlined helper's instructions on the helper's line (`slice/index.rs`,
`option.rs`, `sync.rs`), not on the line of the engine that called it.

This script runs one bench shape under callgrind with `--dump-instr=yes`,
twice (N1 and N2 items per producer, like `cost-account.sh`, so start-up,
the idle window and the exit cancel), takes each instruction's self cost in
the functions that match `--match`, and asks `addr2line -i` for the inline
chain of its address: the cost goes to the innermost frame that lies in
cmwq's own sources (`crates/cmwq/src/`), so `v[i]` costs what its bounds
check costs on the engine's line that wrote it. Instructions with no
line of cmwq's go to their innermost file (`?` when there is no line
information: a function's entry and exit, spills). Prints the costliest
lines per item, with the source text.

Valgrind runs one thread at a time. Its default hand-over lets a thread
run on for long stretches, so how often a worker finds its list empty and
parks changed from run to run: the engine's total per item at batch 64
moved by up to a third (792-1,177 in five runs of `cache_shard`, `work`,
8 producers). `--fair-sched=yes` hands the CPU over in turn; the same five
runs give 874.5-877.1 (and 741.1-742.9 for `cpu`, 799.6-801.1 for
`execute`). With one item in flight every item parks a worker anyway, and
the totals still move by 5-10%: run them several times. (`cost-account.sh`,
whole-process at 2 producers, is not steadied by the flag.)

This is how stop 44 of `crates/cmwq/src/engine/COST.md` found the entry,
exit and spills of `process_one_work`'s call (about 50 instructions per
item on four lines) among some fifty lines of 3 to 15 instructions each.

`--event D1mr` (or any event of callgrind's cache simulation: `D1mr`,
`D1mw`, `DLmr`, `DLmw`, `Dr`, `Dw`, `I1mr`, `ILmr`) counts that event
instead of instructions, with `--cache-sim=yes`: which of the engine's
lines miss in the simulated L1, per item. Valgrind runs one thread at a
time on one simulated cache, so this is the footprint an item's path
has on one CPU (the lines it touches and what evicts them between two
touches), not the traffic between CPUs, which nothing here can count.
This is how stop 50 of COST.md compared the lines an item touches with
the model `kernel_min`'s.

`--from CG1 CG2` reads two callgrind outputs saved earlier (the N1 and N2
runs, made with `--dump-instr=yes`, and `--cache-sim=yes` for a cache
event) instead of running valgrind.

Usage:
  line-cost.py [--bin target/release/cmwq] [--match REGEX] [--top 40]
               [--n1 1000] [--n2 3000] [--threads 2] [--event Ir]
               [--from CG1 CG2] [--json] [-- BENCH ARGS...]

BENCH ARGS default to `--scopes cpu --submit work --batch 64`; `--threads`,
`--items` and `--rounds 1` are the script's. `--match` (a Python regex on
callgrind's function names, default `process_one_work|worker_thread|
queue_counted|insert|dec_in_flight|kick`) picks the functions whose own
instructions are counted. Needs valgrind and addr2line (binutils); exits 2
with the reason when either is missing or the binary is not there.
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEFAULT_BENCH = ["--scopes", "cpu", "--submit", "work", "--batch", "64"]
DEFAULT_MATCH = r"process_one_work|worker_thread|queue_counted|insert|dec_in_flight|kick"
OWN = "/crates/cmwq/src/"

# A callgrind cost line: an address (absolute, relative or `*` for the same),
# a line (absolute, relative or `*`), then the events (Ir first).
SPEC = re.compile(r"^(fl|fi|fe|fn|cfi|cfl|cfn|calls|ob|cob)=(?:\((\d+)\))?\s*(.*)$")


def die(msg):
    print(f"line-cost.py: {msg}", file=sys.stderr)
    sys.exit(2)


# The events callgrind can count with --cache-sim=yes, besides Ir.
CACHE_EVENTS = ("Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def self_costs(path, pattern, event="Ir"):
    """Self cost of `event` by instruction address, for functions whose name
    matches. The event's column comes from the file's `events:` line; a cost
    line may leave out trailing zero columns."""
    names = {}
    fn = None
    after_calls = False
    addr = 0
    col = None
    cost = collections.Counter()
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
                if event not in events:
                    die(f"{path} has no {event} counts (it has {' '.join(events)}); "
                        f"a cache event needs callgrind's --cache-sim=yes")
                # Address and line come first, then the events in order.
                col = 2 + events.index(event)
                continue
            m = SPEC.match(line)
            if m:
                key, idx, name = m.groups()
                name = name.strip()
                if key in ("fn", "cfn"):
                    if idx and name:
                        names[idx] = name
                    if key == "fn":
                        fn = names.get(idx, name) if idx else name
                elif key == "calls":
                    after_calls = True
                continue
            if not line or line[0] not in "0123456789+-*":
                continue
            parts = line.split()
            a = parts[0]
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a[0] in "+-":
                addr += int(a)
            elif a != "*":
                addr = int(a)
            if after_calls:
                # The line after `calls=` is the call's inclusive cost.
                after_calls = False
                continue
            if col is None:
                die(f"{path} has a cost line before its events: line (not callgrind's output?)")
            if fn and pattern.search(fn) and len(parts) > col:
                cost[addr] += int(parts[col])
    if col is None:
        die(f"{path} has no events: line (not callgrind's output?)")
    return cost


def inline_chains(binary, addrs):
    """addr -> [(function, file:line), ...], innermost first."""
    chains = {}
    addrs = sorted(addrs)
    for i in range(0, len(addrs), 2000):
        chunk = addrs[i:i + 2000]
        out = subprocess.run(
            ["addr2line", "-a", "-i", "-f", "-C", "-e", binary] + [f"0x{a:x}" for a in chunk],
            capture_output=True, text=True, check=True).stdout.split("\n")
        cur, frames, j = None, [], 0
        while j < len(out):
            l = out[j]
            if l.startswith("0x"):
                if cur is not None:
                    chains[cur] = frames
                cur, frames = int(l, 16), []
                j += 1
            elif l:
                frames.append((l, out[j + 1] if j + 1 < len(out) else ""))
                j += 2
            else:
                j += 1
        if cur is not None:
            chains[cur] = frames
    return chains


def line_of(frames):
    """The engine's own line an instruction belongs to, else its innermost file."""
    for _func, loc in frames:
        if OWN in loc:
            return loc.split(OWN, 1)[1].split(" ")[0]
    if frames:
        return os.path.basename(frames[0][1].split(" ")[0]) or "?"
    return "?"


def source_text(root, key):
    m = re.match(r"(.+):(\d+)$", key)
    if not m:
        return ""
    path = os.path.join(root, "crates/cmwq/src", m.group(1))
    try:
        with open(path) as f:
            lines = f.read().split("\n")
        return lines[int(m.group(2)) - 1].strip()
    except (OSError, IndexError):
        return ""


def run(binary, n, threads, bench, outdir, event):
    path = os.path.join(outdir, f"lc.{n}.cg")
    sim = ["--cache-sim=yes"] if event != "Ir" else []
    cmd = ["valgrind", "--tool=callgrind", "--fair-sched=yes", "--dump-instr=yes"] + sim + [
           f"--callgrind-out-file={path}", binary, "bench", "--threads", str(threads), "--items", str(n), "--rounds", "1"] + bench
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"the bench failed under callgrind ({' '.join(cmd)}):\n{r.stderr[-2000:]}")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="target/release/cmwq")
    ap.add_argument("--match", default=DEFAULT_MATCH)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--n1", type=int, default=1000)
    ap.add_argument("--n2", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--event", default="Ir")
    ap.add_argument("--from", dest="saved", nargs=2, metavar=("CG1", "CG2"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("bench", nargs="*")
    a = ap.parse_args()
    if a.event != "Ir" and a.event not in CACHE_EVENTS:
        die(f"--event {a.event!r} is not Ir or one of callgrind's cache events ({', '.join(CACHE_EVENTS)})")
    for tool in ("addr2line",) if a.saved else ("valgrind", "addr2line"):
        if not shutil.which(tool):
            die(f"{tool} not found (apt-get install {'valgrind' if tool == 'valgrind' else 'binutils'})")
    if not (os.path.isfile(a.bin) and os.access(a.bin, os.X_OK)):
        die(f"{a.bin} is not an executable cmwq binary (cargo build --release -p cmwq-cli)")
    if a.n2 <= a.n1 or a.n1 < 1:
        die(f"--n2 ({a.n2}) must be greater than --n1 ({a.n1}), both at least 1")
    if a.threads < 1:
        die(f"--threads must be at least 1, not {a.threads}")
    try:
        pattern = re.compile(a.match)
    except re.error as e:
        die(f"--match {a.match!r} is not a regular expression: {e}")
    bench = a.bench or DEFAULT_BENCH
    items = a.threads * (a.n2 - a.n1)
    for f in a.saved or []:
        if not os.path.isfile(f):
            die(f"--from {f}: no such file")
    with tempfile.TemporaryDirectory(prefix="cmwq-line-cost.") as d:
        paths = a.saved or [run(a.bin, n, a.threads, bench, d, a.event) for n in (a.n1, a.n2)]
        c1, c2 = (self_costs(p, pattern, a.event) for p in paths)
    if not c2:
        die(f"no function matching {a.match!r} ran (see callgrind's names: callgrind_annotate)")
    chains = inline_chains(a.bin, set(c1) | set(c2))
    per_line = collections.Counter()
    for addr in set(c1) | set(c2):
        per_line[line_of(chains.get(addr, []))] += c2.get(addr, 0) - c1.get(addr, 0)
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../.."))
    total = sum(per_line.values()) / items
    # Instructions keep their field name (`ir_per_item`); another event is
    # `per_item`, with `event` saying which.
    key = "ir_per_item" if a.event == "Ir" else "per_item"
    rows = [{"line": k, key: round(v / items, 2), "source": source_text(root, k)}
            for k, v in per_line.most_common(a.top)]
    if a.json:
        print(json.dumps({"schema": "cmwq-line-cost/1", "bench": bench, "threads": a.threads,
                          "n1": a.n1, "n2": a.n2, "match": a.match, "event": a.event,
                          key: round(total, 2), "lines": rows}, indent=1))
        return
    what = "instructions" if a.event == "Ir" else f"{a.event} events"
    print(f"Self {what} per item of the functions matching {a.match!r}: {total:.2f}")
    print(f"(bench {' '.join(bench)}, {a.threads} producers, items {a.n1} -> {a.n2} each)")
    print()
    print(f"| {a.event}/item | line | source |")
    print("|---:|---|---|")
    for r in rows:
        src = r["source"].replace("|", "\\|")
        print(f"| {r[key]:.2f} | {r['line']} | `{src}` |" if src else
              f"| {r[key]:.2f} | {r['line']} | |")


if __name__ == "__main__":
    main()
