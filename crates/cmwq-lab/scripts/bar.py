#!/usr/bin/env python3
"""Issue 30's bar: cmwq against the bare per-CPU design, every cell, one table.

The bar: in the same run as `limit` (one `Mutex<VecDeque>` and one pinned
worker per CPU), the `cpu` scope and the default scope (`cache_shard`) reach
at least 0.95x `limit`'s items/s with one item in flight (8 and 2
producers) and 0.85x at batch 64 (8 producers), for `--submit work`,
`execute` and `spawn`, at no more than 1.15x `limit`'s CPU per item.

This script runs the nine shapes

  BIN bench --vs all --scopes cpu,cache_shard --submit S --rounds R --json
      --threads 8 --items 20000              (P=8, one in flight)
      --threads 2 --items 20000              (P=2, one in flight)
      --threads 8 --items 50000 --batch 64   (P=8, batch 64)

`--runs` times each (interleaved: every shape once, then again), and prints
one row per shape and submit: the median over the runs of each run's ratio
(cmwq's median items/s over `limit`'s median of the same run), the min and
max of the per-round ratios over all runs, CPU per item over `limit`'s, the
best peer's ratio, and whether the cell meets the bar. One run of a shape
moves with the host by 10-20% on a shared VM; several runs give the cell's
spread, and with more than one run each cell also says in how many of
them it met the bar on that run's own figures (`yes (1/2 runs)`; JSON
`runs_meeting`), and the headline how many cells met it in every run and
in at least one: a cell that sits on the bar meets it in some runs and
not in others (stop 49's two runs met 9 and 7). The JSON documents stay
in `--out` (re-tabulate with `--reuse`).

`--producers WIDE,NARROW` (default 8,2) sets the producers of the shapes:
on a machine with more CPUs, `--producers 16,2` runs the wide shapes with
one producer per CPU (the bar itself is set on the 2-vCPU VM). The rounds
shown are those the documents say they ran (`--reuse` of another run's
documents included).

`--model` also runs `kernel_min` (`limit` plus the kernel's per-item rules,
COST.md stop 48) beside `--submit work` and `execute` (it does not model
`spawn`), and adds a column: cmwq's CPU per item over the model's, the
part of the distance the rules do not explain. A model is never the best
peer.

Usage:
  bar.py [--bin target/release/cmwq] [--runs 1] [--rounds 5] [--out DIR]
         [--reuse] [--submits work,execute,spawn] [--producers 8,2] [--model]
         [--json]

Exits 2 naming the problem when the binary is missing or an argument is
out of range; 1 when a bench run fails (its stderr is shown).
"""

import argparse
import glob
import json
import os
import statistics as st
import subprocess
import sys
import tempfile

def shapes(wide, narrow):
    """The three shapes of the bar: `wide` producers with one item in flight,
    `narrow` with one, `wide` at batch 64 (8 and 2 by default; a machine
    with more CPUs runs them with as many producers as it has CPUs)."""
    out = [
        (f"p{wide}-b1", f"P={wide}, one in flight",
         ["--threads", str(wide), "--items", "20000"], 0.95),
        (f"p{narrow}-b1", f"P={narrow}, one in flight",
         ["--threads", str(narrow), "--items", "20000"], 0.95),
        (f"p{wide}-b64", f"P={wide}, batch 64",
         ["--threads", str(wide), "--items", "50000", "--batch", "64"], 0.85),
    ]
    # One shape, not two, where both counts are the same (a 2-CPU machine).
    return out if narrow != wide else [out[0], out[2]]



SUBMITS = ["work", "execute", "spawn"]
SCOPES = ["cpu", "cache_shard"]
CPU_BAR = 1.15
# Executors run to measure against, never peers (`cmwq bench --vs kernel_min`).
MODEL = "kernel_min"
MODELLED = ("work", "execute")


def die(msg, code=2):
    print(f"bar.py: {msg}", file=sys.stderr)
    sys.exit(code)


def cell(runs_docs, scope, bar):
    """Ratios of one scope over the runs of one shape and submit, and how
    many of the runs met `bar` (items/s) and the CPU bar on their own."""
    per_run, per_round, cpu, peers, model = [], [], [], {}, []
    for doc in runs_docs:
        rows = doc["runs"]
        lim = [r for r in rows if r["executor"] == "limit"]
        if not lim:
            die("a bench document has no `limit` row (was --vs all dropped?)", 1)
        l_ips = st.median(r["items_per_sec"] for r in lim)
        l_cpu = st.median(r["cpu_s_per_million"] for r in lim)
        mine = [r for r in rows if r["executor"] == "cmwq" and r.get("scope") == scope]
        if not mine:
            die(f"a bench document has no cmwq row for scope {scope}", 1)
        per_run.append(st.median(r["items_per_sec"] for r in mine) / l_ips)
        per_round.extend(r["items_per_sec"] / l_ips for r in mine)
        cpu.append(st.median(r["cpu_s_per_million"] for r in mine) / l_cpu)
        km = [r for r in rows if r["executor"] == MODEL]
        if km:
            model.append(st.median(r["cpu_s_per_million"] for r in mine)
                         / st.median(r["cpu_s_per_million"] for r in km))
        for r in rows:
            if r["executor"] not in ("cmwq", "limit", MODEL):
                peers.setdefault(r["executor"], []).append(r["items_per_sec"] / l_ips)
    best = max(peers.items(), key=lambda kv: st.median(kv[1])) if peers else ("-", [0.0])
    return {
        "items_vs_limit": st.median(per_run),
        "round_min": min(per_round),
        "round_max": max(per_round),
        "cpu_vs_limit": st.median(cpu),
        "best_peer": best[0],
        "best_peer_vs_limit": st.median(best[1]),
        "cpu_vs_model": st.median(model) if model else None,
        "runs_meeting": sum(i >= bar and c <= CPU_BAR for i, c in zip(per_run, cpu)),
    }


def meets_runs(r):
    """` (k/N runs)` after a cell's verdict when it has more than one run."""
    return f" ({r['runs_meeting']}/{r['runs']} runs)" if r["runs"] > 1 else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="target/release/cmwq")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--submits", default=",".join(SUBMITS))
    ap.add_argument("--producers", default="8,2",
                    help="WIDE,NARROW: producers of the wide shapes and of the narrow one")
    ap.add_argument("--model", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        wide, narrow = (int(x) for x in a.producers.split(","))
    except ValueError:
        die(f"--producers {a.producers!r}: two whole numbers, WIDE,NARROW (e.g. 16,2)")
    if not (1 <= wide <= 4096 and 1 <= narrow <= 4096):
        die(f"--producers {a.producers!r}: each must be 1 to 4096")
    SHAPES = shapes(wide, narrow)
    submits = [s for s in a.submits.split(",") if s]
    bad = [s for s in submits if s not in SUBMITS]
    if bad or not submits:
        die(f"--submits {a.submits!r}: each must be one of {', '.join(SUBMITS)}")
    if not 1 <= a.runs <= 100:
        die(f"--runs must be 1 to 100, not {a.runs}")
    if not 1 <= a.rounds <= 10000:
        die(f"--rounds must be 1 to 10000, not {a.rounds}")
    if a.reuse and not a.out:
        die("--reuse needs --out (the directory of an earlier run)")
    out = a.out or tempfile.mkdtemp(prefix="cmwq-bar.")
    os.makedirs(out, exist_ok=True)
    if not a.reuse:
        if not (os.path.isfile(a.bin) and os.access(a.bin, os.X_OK)):
            die(f"{a.bin} is not an executable cmwq binary (cargo build --release -p cmwq-cli)")
        total = a.runs * len(SHAPES) * len(submits)
        done = 0
        for run in range(1, a.runs + 1):
            for key, _label, args, _bar in SHAPES:
                for s in submits:
                    done += 1
                    print(f"bar.py: [{done}/{total}] run {run}, {key}, --submit {s}",
                          file=sys.stderr)
                    vs = f"all,{MODEL}" if a.model and s in MODELLED else "all"
                    cmd = [a.bin, "bench", "--vs", vs, "--scopes", ",".join(SCOPES),
                           "--submit", s, "--rounds", str(a.rounds), "--json"] + args
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    if r.returncode != 0:
                        die(f"{' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr[-2000:]}", 1)
                    with open(os.path.join(out, f"{s}-{key}.{run}.json"), "w") as f:
                        f.write(r.stdout)
    rows = []
    rounds = set()
    for key, label, _args, bar in SHAPES:
        for s in submits:
            files = sorted(glob.glob(os.path.join(out, f"{s}-{key}.*.json")))
            if not files:
                die(f"no runs of {s} {key} in {out}", 1)
            docs = [json.load(open(f)) for f in files]
            rounds.update(d.get("config", {}).get("rounds", a.rounds) for d in docs)
            for sc in SCOPES:
                c = cell(docs, sc, bar)
                c.update({"shape": key, "label": label, "submit": s, "scope": sc,
                          "runs": len(docs), "items_bar": bar, "cpu_bar": CPU_BAR,
                          "meets": c["items_vs_limit"] >= bar and c["cpu_vs_limit"] <= CPU_BAR})
                rows.append(c)
    met = sum(r["meets"] for r in rows)
    every = sum(r["runs_meeting"] == r["runs"] for r in rows)
    some = sum(r["runs_meeting"] > 0 for r in rows)
    if a.json:
        print(json.dumps({"schema": "cmwq-bar/1", "dir": out, "cells": len(rows),
                          "met": met, "met_every_run": every, "met_some_run": some,
                          "producers": [wide, narrow],
                          "rounds": sorted(rounds), "rows": rows}, indent=1))
        return
    rtext = "/".join(str(r) for r in sorted(rounds))
    runs = max(r["runs"] for r in rows)
    per_run = (f"; {every} in every run, {some} in at least one" if runs > 1 else "")
    print(f"Issue 30's bar, {runs} run(s) a shape, {rtext} rounds each "
          f"(documents in {out}): {met} of {len(rows)} cells meet it{per_run}")
    print()
    with_model = any(r["cpu_vs_model"] is not None for r in rows)
    mh, ms = (f" CPU/item over {MODEL}'s |", "---:|") if with_model else ("", "")
    print("| shape | submit | scope | items/s over limit's [rounds' min..max] | bar | "
          f"CPU/item over limit's |{mh} best peer | meets |")
    print(f"|---|---|---|---:|---:|---:|{ms}---|---|")
    for r in rows:
        mv = ""
        if with_model:
            v = r["cpu_vs_model"]
            mv = f" {v:.3f} |" if v is not None else " - |"
        print(f"| {r['label']} | {r['submit']} | {r['scope']} | {r['items_vs_limit']:.3f} "
              f"[{r['round_min']:.2f}..{r['round_max']:.2f}] | {r['items_bar']:.2f} | "
              f"{r['cpu_vs_limit']:.3f} |{mv} {r['best_peer']} {r['best_peer_vs_limit']:.2f} | "
              f"{'yes' if r['meets'] else 'no'}{meets_runs(r)} |")


if __name__ == "__main__":
    main()
