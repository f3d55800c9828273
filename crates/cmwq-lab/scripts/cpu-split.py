#!/usr/bin/env python3
"""Where an item's CPU goes, cmwq beside `limit`: the floor of issue 30's bar.

Issue 30 asks cmwq to spend at most 1.15x the CPU per item of `limit`, the
bare per-CPU design (one `Mutex<VecDeque>` and one pinned worker per CPU).
`--peer kernel_min` sets cmwq beside the model of `limit` plus the kernel's
per-item rules instead (`crates/cmwq-lab/src/bench/kernel_min.rs`).
Both run under the same harness: the producers stamp every enqueue with the
clock, sleep on a completion, and the kernel switches and wakes the same
threads. Only part of an item's CPU is the executor's own code, so the bar
sets a budget on that part alone. This script measures the split and says
what the budget is:

1. native CPU per item of cmwq (one scope) and of the peer (`limit`), same
   runs (`cmwq bench --vs PEER --json`, `--runs` times, medians);
2. the share of each part, from two runs under the sampler
   (`perf record -e cpu-clock`: software sampling works on VMs with no
   hardware counters), one of cmwq alone and one of the peer alone;
3. each part in native ns per item (its share of the sampled threads times
   the native figure: the sampler's overhead is taken as even across them);
4. the floor: the rest (harness, kernel, anything not the executor's) is
   what cmwq would cost with an executor that cost nothing; the bar allows
   its own code `bar * limit - rest` ns per item, to set beside what
   `limit`'s own code costs (with `--peer kernel_min`, the peer's figures
   stand where `limit`'s do).

The parts, per sampled thread (its name: `wq_bench/*` producers, `cmwq/*`,
`limit/*` and `kmin/*` workers, `cmwq-*` cmwq's service threads; the process's main
thread is left out, it sorts the latency samples after the timed window):

- `own code`: the executor's functions (`cmwq::*`, `limit`'s and
  `kernel_min`'s producer and worker loop, the job call), `sched_getcpu`;
- `allocator`: `malloc`, `free` and their helpers (`limit` allocates a box
  per item; cmwq reuses its cells);
- `thread glue`: user-space futex and parking code (`syscall`, `std`'s
  park and locks);
- `harness`: the bench's own code (`cmwq_lab::*` but `limit`'s, the clock,
  `Instant`, copies);
- `kernel`: every kernel sample (switches, futex wakes, page faults);
- `other`: the rest, listed with its top symbols so nothing hides.

The floor counts own code, allocator and thread glue as the executor's
(the reading most favourable to the bar being reachable): `rest` is
harness, kernel and other.

Usage:
  cpu-split.py [--bin target/release/cmwq] [--scope cpu] [--submit work]
               [--threads 8] [--items 50000] [--batch 64] [--rounds 5]
               [--runs 3] [--bar 1.15] [--freq 10000] [--peer limit|kernel_min]
               [--json]
  cpu-split.py --report-cmwq FILE --report-peer FILE
               --native-cmwq NS --native-peer NS [--peer NAME] [--bar 1.15]
               [--json]

The second form reads `perf report -t '|' --no-children --sort
comm,dso,sym -n --stdio -g none` output saved earlier and native ns per
item given by hand (no perf, no bench: for checking the arithmetic). Needs
`perf` (linux-perf) for the first form; exits 2 with the reason when it is
missing or cannot sample, or when an argument is bad.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

PARTS = ["own code", "allocator", "thread glue", "harness", "kernel", "other"]
EXECUTOR_PARTS = ["own code", "allocator", "thread glue"]
SUBMITS = ("work", "execute", "spawn")
PEERS = ("limit", "kernel_min")
SCOPES = ("cpu", "smt", "cache_shard", "cache", "numa", "system")


def fail(msg):
    print(f"cpu-split.py: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def role(comm):
    """The sampled thread's role from its name, or None for the main thread."""
    if comm.startswith("wq_bench/"):
        return "producer"
    if comm.startswith(("cmwq/", "limit/", "kmin/")):
        return "worker"
    if comm.startswith("cmwq-"):
        return "service"
    return None


ALLOC = re.compile(r"^(__rustc::)?(_int_malloc|_int_free|malloc|free|cfree|__libc_malloc|"
                   r"__libc_free|tcache_|malloc_consolidate|realloc|"
                   r"__rust_alloc|__rust_dealloc|__rust_no_alloc|__rdl_|alloc::alloc::)")
OWN = re.compile(r"(^|[<\s(&])cmwq::|cmwq_lab::bench::peers::Limit|"
                 r"cmwq_lab::bench::kernel_min::|"
                 r"cmwq_lab::bench::cmwq_exec::|^sched_getcpu")
WORKER_OWN = re.compile(r"__rust_begin_short_backtrace|FnOnce::call_once|"
                        r"\{\{vtable\.shim\}\}")
GLUE = re.compile(r"^(syscall|pthread_|__lll_|futex|__futex|std::sys::sync::|"
                  r"std::thread::|std::sys::pal::unix::thread|"
                  r"std::sys::pal::unix::futex|<std::thread::)")
HARNESS = re.compile(r"cmwq_lab::|clock_gettime|__vdso_|Instant|Timespec|"
                     r"^core::slice::sort::|__mem(move|cpy|set)|"
                     r"^std::sys::backtrace::__rust_begin_short_backtrace")


def part(thread_role, kernel, sym):
    """Which part a sample of `sym` on a thread of `thread_role` belongs to."""
    if kernel:
        return "kernel"
    if ALLOC.search(sym):
        return "allocator"
    if OWN.search(sym):
        return "own code"
    if thread_role in ("worker", "service") and WORKER_OWN.search(sym):
        # `limit`'s worker loop is inlined into its thread's entry, and the
        # job's call (the bench's closure, a counter) is the executor's call.
        return "own code"
    if GLUE.search(sym):
        return "thread glue"
    if HARNESS.search(sym):
        return "harness"
    return "other"


LINE = re.compile(r"^\s*([0-9.]+)%\s*\|\s*(\d+)\s*\|([^|]*)\|([^|]*)\|\s*\[(.)\]\s*(.*)$")


def parse_report(text, source):
    """Samples per (role, part), the main thread's count, other's symbols."""
    by = {}
    main_thread = 0
    other = {}
    lines = 0
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        lines += 1
        n = int(m.group(2))
        comm = m.group(3).strip()
        kernel = m.group(5) == "k"
        sym = m.group(6).strip()
        r = role(comm)
        if r is None:
            main_thread += n
            continue
        p = part(r, kernel, sym)
        by[(r, p)] = by.get((r, p), 0) + n
        if p == "other":
            other[sym] = other.get(sym, 0) + n
    if lines == 0:
        fail(f"{source}: no sample lines (expected `perf report -t '|' "
             "--no-children --sort comm,dso,sym -n --stdio -g none` output)")
    if not by:
        fail(f"{source}: no samples on the bench's threads (wq_bench/*, "
             "cmwq/*, limit/*, kmin/*, cmwq-*)")
    return by, main_thread, other


def split(by, native_ns):
    """Native ns per item of each part, by role and in total."""
    total = sum(by.values())
    parts = {p: 0.0 for p in PARTS}
    roles = {}
    for (r, p), n in by.items():
        ns = native_ns * n / total
        parts[p] += ns
        roles.setdefault(r, {q: 0.0 for q in PARTS})[p] += ns
    return parts, roles, total


def floor(cmwq_parts, peer_parts, cmwq_ns, peer_ns, bar):
    own_c = sum(cmwq_parts[p] for p in EXECUTOR_PARTS)
    own_p = sum(peer_parts[p] for p in EXECUTOR_PARTS)
    rest_c = cmwq_ns - own_c
    budget = bar * peer_ns - rest_c
    return {
        "cmwq_ratio": cmwq_ns / peer_ns,
        "cmwq_executor_ns": own_c,
        "peer_executor_ns": own_p,
        "cmwq_rest_ns": rest_c,
        "peer_rest_ns": peer_ns - own_p,
        "ratio_with_a_free_executor": rest_c / peer_ns,
        "executor_budget_ns": budget,
        "budget_over_peer_executor": budget / own_p if own_p else None,
        "cut_needed": 1 - budget / own_c if own_c else None,
    }


def record(binary, args, freq, out):
    rec = run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(freq),
               "-o", out, "--", binary, "bench", *args])
    if rec.returncode != 0:
        fail(f"perf record failed (is /proc/sys/kernel/perf_event_paranoid "
             f"at most 1, or are you root?): {rec.stderr.strip()[-400:]}")
    rep = run(["perf", "report", "-i", out, "-t", "|", "--no-children",
               "--sort", "comm,dso,sym", "-n", "--stdio", "-g", "none"])
    if rep.returncode != 0:
        fail(f"perf report failed: {rep.stderr.strip()[-400:]}")
    return rep.stdout


def native(binary, shape, scope, runs, peer):
    """Median CPU ns per item of cmwq in `scope` and of `peer` over `runs` runs."""
    c, l = [], []
    for i in range(runs):
        print(f"cpu-split.py: native run {i + 1}/{runs}", file=sys.stderr)
        r = run([binary, "bench", "--vs", peer, "--scopes", scope, *shape, "--json"])
        if r.returncode != 0:
            fail(f"{binary} bench failed: {r.stderr.strip()[-400:]}")
        doc = json.loads(r.stdout)
        for s in doc["summary"]:
            v = s["cpu_s_per_million"]["median"] * 1000.0
            if s["executor"] == "cmwq" and s["scope"] == scope:
                c.append(v)
            elif s["executor"] == peer:
                l.append(v)
    if not c or not l:
        fail(f"the bench's summary has no cmwq/{scope} or {peer} row")
    return statistics.median(c), statistics.median(l), c, l


def table(cm, pm, cmwq_ns, peer_ns, scope, peer):
    rows = [f"| part | cmwq `{scope}`, ns/item | `{peer}`, ns/item | cmwq - `{peer}` |",
            "|---|---:|---:|---:|"]
    for p in PARTS:
        rows.append(f"| {p} | {cm[p]:.1f} | {pm[p]:.1f} | {cm[p] - pm[p]:+.1f} |")
    rows.append(f"| **total** | {cmwq_ns:.1f} | {peer_ns:.1f} | {cmwq_ns - peer_ns:+.1f} |")
    return "\n".join(rows)


def role_table(roles, name):
    rows = [f"| {name}: thread | " + " | ".join(PARTS) + " |",
            "|---|" + "---:|" * len(PARTS)]
    for r in sorted(roles):
        rows.append(f"| {r} | " + " | ".join(f"{roles[r][p]:.1f}" for p in PARTS) + " |")
    return "\n".join(rows)


def positive(kind):
    def conv(s):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{s!r} is not a number")
        if v <= 0:
            raise argparse.ArgumentTypeError(f"{s!r} must be above 0")
        return v
    return conv


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="target/release/cmwq")
    ap.add_argument("--scope", default="cpu")
    ap.add_argument("--submit", default="work")
    ap.add_argument("--threads", type=positive(int), default=8)
    ap.add_argument("--items", type=positive(int), default=50000)
    ap.add_argument("--batch", type=positive(int), default=64)
    ap.add_argument("--rounds", type=positive(int), default=5)
    ap.add_argument("--runs", type=positive(int), default=3)
    ap.add_argument("--bar", type=positive(float), default=1.15)
    ap.add_argument("--freq", type=positive(int), default=10000)
    ap.add_argument("--report-cmwq")
    ap.add_argument("--report-peer")
    ap.add_argument("--native-cmwq", type=positive(float))
    ap.add_argument("--native-peer", type=positive(float))
    ap.add_argument("--peer", default="limit")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.scope not in SCOPES:
        fail(f"--scope {a.scope!r} is not one of {', '.join(SCOPES)}")
    if a.peer not in PEERS:
        fail(f"--peer {a.peer!r} is not one of {', '.join(PEERS)}")
    if a.submit not in SUBMITS:
        fail(f"--submit {a.submit!r} is not one of {', '.join(SUBMITS)}")
    offline = [a.report_cmwq, a.report_peer, a.native_cmwq, a.native_peer]
    if any(x is not None for x in offline) and not all(x is not None for x in offline):
        fail("--report-cmwq, --report-peer, --native-cmwq and --native-peer "
             "go together (all four, or none to measure)")
    shape = ["--submit", a.submit, "--threads", str(a.threads), "--items",
             str(a.items), "--batch", str(a.batch), "--rounds", str(a.rounds)]
    runs_c = runs_p = None
    if a.report_cmwq is not None:
        texts = []
        for flag, path in (("--report-cmwq", a.report_cmwq), ("--report-peer", a.report_peer)):
            if not os.path.isfile(path):
                fail(f"{flag} {path!r}: no such file")
            with open(path) as f:
                texts.append(f.read())
        rep_c, rep_l = texts
        src_c, src_l = a.report_cmwq, a.report_peer
        cmwq_ns, peer_ns = a.native_cmwq, a.native_peer
    else:
        if not (os.path.isfile(a.bin) and os.access(a.bin, os.X_OK)):
            fail(f"--bin {a.bin!r} is not an executable cmwq binary "
                 "(cargo build --release -p cmwq-cli)")
        if shutil.which("perf") is None:
            fail("perf not found (apt-get install linux-perf)")
        if a.peer == "kernel_min" and a.submit == "spawn":
            fail("--peer kernel_min models --submit work and execute, not spawn")
        cmwq_ns, peer_ns, runs_c, runs_p = native(a.bin, shape, a.scope, a.runs, a.peer)
        tmp = tempfile.mkdtemp(prefix="cmwq-split.")
        print("cpu-split.py: sampling cmwq", file=sys.stderr)
        rep_c = record(a.bin, ["--scopes", a.scope, *shape], a.freq,
                       os.path.join(tmp, "cmwq.data"))
        print(f"cpu-split.py: sampling {a.peer}", file=sys.stderr)
        rep_l = record(a.bin, ["--scopes", "none", "--vs", a.peer, *shape], a.freq,
                       os.path.join(tmp, "peer.data"))
        src_c, src_l = "perf report of cmwq", f"perf report of {a.peer}"
    by_c, main_c, other_c = parse_report(rep_c, src_c)
    by_l, main_l, other_l = parse_report(rep_l, src_l)
    cm, roles_c, n_c = split(by_c, cmwq_ns)
    pm, roles_p, n_l = split(by_l, peer_ns)
    fl = floor(cm, pm, cmwq_ns, peer_ns, a.bar)
    doc = {
        "shape": {"scope": a.scope, "submit": a.submit, "threads": a.threads,
                  "items": a.items, "batch": a.batch, "rounds": a.rounds},
        "bar": a.bar,
        "peer": a.peer,
        "native_ns_per_item": {"cmwq": cmwq_ns, "peer": peer_ns,
                               "cmwq_runs": runs_c, "peer_runs": runs_p},
        "samples": {"cmwq": n_c, "peer": n_l,
                    "cmwq_main_thread_left_out": main_c,
                    "peer_main_thread_left_out": main_l},
        "parts_ns": {"cmwq": cm, "peer": pm},
        "by_thread_ns": {"cmwq": roles_c, "peer": roles_p},
        "other_top": {
            "cmwq": sorted(other_c.items(), key=lambda kv: -kv[1])[:5],
            "peer": sorted(other_l.items(), key=lambda kv: -kv[1])[:5],
        },
        "floor": fl,
    }
    if a.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
        return
    print(f"shape: --submit {a.submit} --threads {a.threads} --items {a.items} "
          f"--batch {a.batch} --rounds {a.rounds}; cmwq scope {a.scope}")
    if runs_c is not None:
        print(f"native CPU per item, {a.runs} run(s) of `bench --vs {a.peer}`, median "
              f"[min..max]: cmwq {cmwq_ns:.1f} [{min(runs_c):.1f}..{max(runs_c):.1f}] ns, "
              f"{a.peer} {peer_ns:.1f} [{min(runs_p):.1f}..{max(runs_p):.1f}] ns")
    print(f"sampled: cmwq {n_c} samples, {a.peer} {n_l} (main thread left out: "
          f"{main_c} and {main_l})\n")
    print(table(cm, pm, cmwq_ns, peer_ns, a.scope, a.peer))
    print()
    print(role_table(roles_c, "cmwq"))
    print()
    print(role_table(roles_p, a.peer))
    for name, top in doc["other_top"].items():
        if top:
            name = a.peer if name == "peer" else name
            print(f"\n{name}'s `other`: " + ", ".join(f"{s} ({n})" for s, n in top))
    print(f"\nfloor: cmwq runs at {fl['cmwq_ratio']:.3f}x {a.peer}'s CPU per item; "
          f"with an executor that cost nothing it would run at "
          f"{fl['ratio_with_a_free_executor']:.3f}x (its rest: "
          f"{fl['cmwq_rest_ns']:.1f} ns against {a.peer}'s {fl['peer_rest_ns']:.1f}).")
    print(f"the bar ({a.bar}x) leaves cmwq's executor {fl['executor_budget_ns']:.1f} ns "
          f"per item; it spends {fl['cmwq_executor_ns']:.1f} ns, {a.peer}'s spends "
          f"{fl['peer_executor_ns']:.1f} ns.")
    if fl["budget_over_peer_executor"] is not None:
        print(f"the budget is {fl['budget_over_peer_executor']:.2f}x {a.peer}'s executor; "
              f"cmwq's would have to lose {100 * fl['cut_needed']:.0f}% of its cost.")


if __name__ == "__main__":
    main()
