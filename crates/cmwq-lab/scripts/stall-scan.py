#!/usr/bin/env python3
"""Where an item's time waits: the sampler's hot instructions, less the atomics.

Callgrind counts instructions; it cannot see an instruction that waits. The
sampler can: `perf record -e cpu-clock` (software sampling works on VMs with
no hardware counters) puts each sample on the instruction after the one that
held the CPU. Most of cmwq's hot instructions follow a locked one (the pool
lock, the pending bit), which the kernel's rules pay for. This script lists
the others: hot instructions whose two predecessors hold no `lock` prefix
and no `xchg`. Each is a load waiting for memory: a cache miss, or a load
the CPU could not forward from the stores just before it (a wide load of
what narrower stores wrote, the stalls stop 41 of COST.md removed).

Usage:
  stall-scan.py [--bin target/release/cmwq] [--symbols 12] [--min-pct 6]
                [--min-samples 40] [--match REGEX] [--data FILE] [--json]
                [-- BENCH ARGS...]

Runs `BIN bench BENCH ARGS` under `perf record` (default: the `work` shape
at batch 64, 8 producers, scope cpu, 5 rounds), or reads `--data` from an
earlier run (then BIN must be the binary that made it). Prints, for each of
the `--symbols` hottest functions whose name matches `--match` (default:
cmwq's and the generic std code instantiated for it), every
instruction holding at least `--min-pct` of the function's samples and
`--min-samples` samples, with its two predecessors. Needs `perf` (linux-perf); exits 2 with the reason when
it is missing or cannot sample (see /proc/sys/kernel/perf_event_paranoid).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEFAULT_BENCH = ["--threads", "8", "--items", "50000", "--batch", "64",
                 "--scopes", "cpu", "--rounds", "5", "--submit", "work"]


def fail(msg):
    print(f"stall-scan.py: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def hot_symbols(data, match, n):
    """The n user-space functions with the most samples, as (samples, name)."""
    rep = run(["perf", "report", "-i", data, "--no-children", "--stdio",
               "--sort", "symbol", "-n"])
    if rep.returncode != 0:
        fail(f"perf report failed: {rep.stderr.strip()}")
    out = []
    for line in rep.stdout.splitlines():
        m = re.match(r"\s+[0-9.]+%\s+(\d+)\s+\[\.\]\s+(.*?)\s*(?:-\s+-\s*)?$", line)
        if m and re.search(match, m.group(2)):
            out.append((int(m.group(1)), m.group(2).strip()))
    return out[:n]


def instructions(data, symbol):
    """(percent of the function's samples, address, text) per instruction."""
    ann = run(["perf", "annotate", "-i", data, "--stdio", "-s", symbol])
    ins = []
    for line in ann.stdout.splitlines():
        m = re.match(r"\s+([0-9.]+) :\s+([0-9a-f]+):\s+(.*)", line)
        if m:
            ins.append((float(m.group(1)), m.group(2), m.group(3).strip()))
    return ins


def locked(text):
    return text.startswith("lock ") or text.startswith("xchg")


def scan(data, match, nsym, min_pct, min_samples):
    found = []
    for samples, sym in hot_symbols(data, match, nsym):
        ins = instructions(data, sym)
        hits = []
        for i, (pct, addr, text) in enumerate(ins):
            prev = [t for _, _, t in ins[max(0, i - 2):i]]
            n = round(pct * samples / 100)
            if pct < min_pct or n < min_samples or any(locked(t) for t in prev):
                continue
            hits.append({"pct": pct, "samples": n,
                         "addr": addr, "before": prev, "at": text})
        found.append({"symbol": sym, "samples": samples, "hits": hits})
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/cmwq")
    ap.add_argument("--symbols", type=int, default=12)
    ap.add_argument("--min-pct", type=float, default=6.0)
    ap.add_argument("--min-samples", type=int, default=40)
    ap.add_argument("--match", default=r"cmwq|alloc::|core::")
    ap.add_argument("--data")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("bench", nargs="*")
    a = ap.parse_args()
    try:
        re.compile(a.match)
    except re.error as e:
        fail(f"--match {a.match!r} is not a regular expression: {e}")
    if a.data is not None and not os.path.isfile(a.data):
        fail(f"--data {a.data!r}: no such file (a perf.data from an earlier run)")
    if shutil.which("perf") is None:
        fail("perf not found (apt-get install linux-perf)")
    if not os.access(a.bin, os.X_OK):
        fail(f"{a.bin} is not an executable cmwq binary "
             "(cargo build --release -p cmwq-cli)")
    data = a.data
    if data is None:
        data = os.path.join(tempfile.mkdtemp(prefix="cmwq-stall."), "perf.data")
        args = a.bench or DEFAULT_BENCH
        print(f"stall-scan.py: sampling {a.bin} bench {' '.join(args)}",
              file=sys.stderr)
        rec = run(["perf", "record", "-e", "cpu-clock", "-F", "20000",
                   "-o", data, a.bin, "bench", *args])
        if rec.returncode != 0:
            fail(f"perf record failed: {rec.stderr.strip()[-400:]}")
    found = scan(data, a.match, a.symbols, a.min_pct, a.min_samples)
    if a.json:
        json.dump({"data": data, "functions": found}, sys.stdout, indent=1)
        print()
        return
    print(f"perf data: {data}\n")
    for f in found:
        if not f["hits"]:
            continue
        print(f"## {f['symbol']} ({f['samples']} samples)\n")
        for h in f["hits"]:
            before = " ; ".join(h["before"]) or "(function entry)"
            print(f"- {h['pct']:.1f}% ({h['samples']} samples) at {h['addr']} "
                  f"`{h['at']}` after `{before}`")
        print()
    if not any(f["hits"] for f in found):
        print("no hot instruction outside the atomics' shadow")


if __name__ == "__main__":
    main()
