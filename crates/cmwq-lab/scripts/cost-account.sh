#!/bin/sh
# The per-item account of crates/cmwq/src/engine/COST.md: instructions (Ir)
# and locked instructions (Ge: callgrind's "global bus events", one per
# atomic read-modify-write: every lock-prefixed instruction and every xchg
# with memory, which VEX turns into a compare-and-swap) per item, function by
# function, for cmwq (`--submit work|execute|spawn`, scopes cpu and
# cache_shard) and for the bare per-CPU design (`--scopes none --vs limit`).
#
# Each shape runs twice under callgrind, with N1 and N2 items per producer;
# a function's cost per item is (cost at N2 - cost at N1) / (P x (N2 - N1)),
# so start-up, the 200 ms idle window and the exit drop out. Valgrind runs
# one thread at a time, so how often a worker finds its queue empty and
# parks (and the futex calls that go with it) varies from run to run: each
# figure is the median of REPS runs. (Whole-process rows at P=2 move by up
# to a fifth at batch 64 even with valgrind's `--fair-sched=yes`; for an
# A/B of two builds use line-cost.py's engine total at 8 producers, which
# that flag makes repeat to 0.3%: see its header.) Valgrind also refuses rseq, so
# sched_getcpu takes glibc's fallback under it (about 30 instructions,
# about 8 natively) for cmwq and limit alike.
#
# Usage: cost-account.sh [CMWQ_BINARY] [OUT_DIR]
#   env: N1 (default 1000), N2 (3000), P (2), BATCHES ("1 64"),
#        SUBMITS ("work execute spawn"), SCOPES ("cpu cache_shard"),
#        TOP (functions listed per shape, 14), REPS (runs per shape and
#        item count, 3: each figure is the median over them), SHAPES (only these
#        "submit/scope/batch" triples, e.g. "work/cpu/1 limit/-/64"; default all),
#        REUSE (set: keep the callgrind files already in OUT_DIR, only re-tabulate)
# Needs valgrind (callgrind) and python3. Prints Markdown on stdout; the
# callgrind files stay in OUT_DIR (default a fresh /tmp dir).
set -eu
BIN=${1:-target/release/cmwq}
OUT=${2:-$(mktemp -d /tmp/cmwq-cost.XXXXXX)}
N1=${N1:-1000}; N2=${N2:-3000}; P=${P:-2}
BATCHES=${BATCHES:-"1 64"}; SUBMITS=${SUBMITS:-"work execute spawn"}
SCOPES=${SCOPES:-"cpu cache_shard"}; TOP=${TOP:-14}; REPS=${REPS:-3}
mkdir -p "$OUT"
command -v valgrind >/dev/null || { echo "cost-account.sh: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "cost-account.sh: $BIN is not an executable cmwq binary (cargo build --release -p cmwq-cli)" >&2; exit 2; }

shapes=""
for b in $BATCHES; do
  shapes="$shapes limit/-/$b"
  for s in $SUBMITS; do for sc in $SCOPES; do shapes="$shapes $s/$sc/$b"; done; done
done
[ -n "${SHAPES:-}" ] && shapes=$SHAPES

run() { # shape n rep -> callgrind file
  sub=${1%%/*}; rest=${1#*/}; sc=${rest%%/*}; b=${rest#*/}
  f="$OUT/$(echo "$1" | tr / _).$2.$3.cg"
  if [ "$sub" = limit ]; then args="--scopes none --vs limit"; else args="--scopes $sc --submit $sub"; fi
  if [ -n "${REUSE:-}" ] && [ -s "$f" ]; then echo "$f"; return; fi
  valgrind --tool=callgrind --collect-bus=yes --callgrind-out-file="$f" \
    "$BIN" bench $args --threads "$P" --items "$2" --batch "$b" --rounds 1 \
    >"$f.log" 2>&1 || { echo "cost-account.sh: $1 at $2 items failed, see $f.log" >&2; exit 1; }
  echo "$f"
}

list=""
for sh in $shapes; do
  echo "cost-account.sh: $sh" >&2
  reps=""
  r=1
  while [ "$r" -le "$REPS" ]; do
    reps="$reps${reps:+;}$(run "$sh" "$N1" "$r"),$(run "$sh" "$N2" "$r")"
    r=$((r + 1))
  done
  list="$list $sh=$reps"
done

exec python3 - "$P" "$N1" "$N2" "$TOP" $list <<'EOF'
import re, sys
P, N1, N2, TOP = (int(x) for x in sys.argv[1:5])
items = P * (N2 - N1)

def self_costs(path):
    """Self cost (Ir, Ge) per function symbol, inlined code counted in its caller."""
    names, cost, fn, skip = {}, {}, None, False
    for line in open(path, errors="replace"):
        if line.startswith(("fn=", "cfn=")):
            # fn= and cfn= share one table of compressed names: "(id) name"
            # defines an id, "(id)" uses it.
            m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
            if m and m.group(2) is not None:
                names[m.group(1)] = m.group(2)
            if line.startswith("fn="):
                fn = names[m.group(1)] if m else line[3:].rstrip("\n")
        elif line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost
        elif line[:1].isdigit() or line[:1] in "+-*":
            if skip:
                skip = False
                continue
            f = line.split()
            ir = int(f[1]) if len(f) > 1 else 0
            ge = int(f[2]) if len(f) > 2 else 0
            c = cost.setdefault(fn, [0, 0])
            c[0] += ir
            c[1] += ge
    return cost

def short(fn):
    # <path::Type as path::Trait>::method -> Type::method; other generics go.
    fn = re.sub(r"<(?:[\w:]+::)?(\w+)(?:<[^<>]*>)? as [^<>]*(?:<[^<>]*>)?>", r"\1", fn)
    fn = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", fn))
    fn = re.sub(r"::h[0-9a-f]{16}$", "", fn)
    parts = fn.split("::")
    return "::".join(parts[-2:]) if len(parts) > 1 else fn

# What each function's cost buys, by name (first match wins): the kernel rule
# it keeps, the bench harness both sides pay for, or the bare design itself.
TAGS = [
    (r"quicksort|small_sort|median3|ipnsort|__rust_begin_short_backtrace|Completion|__memcpy|"
     r"CmwqProducer|SpawnProducer|call_once\{\{vtable|F::run$",
     "harness: producer loop, samples, completion"),
    (r"sub_timespec|::now$|clock_gettime|Instant::sub|::elapsed$",
     "clock reads: harness; cmwq also times idle parks and lanes"),
    (r"process_one_work|process_borrowed", "busy table, pending, colours, nr_running, lockup seq, stats"),
    (r"Pool::insert", "pwq era check, colours, max_active credits, lane"),
    # Since stop 44 `Pool::insert` is inlined into `queue_counted`, and
    # `process_one_work` into the worker loop (`worker_thread`).
    (r"queue_claimed|queue_counted",
     "pwq routing, draining, non-reentrancy; insert: era check, colours, max_active credits, lane"),
    (r"Workqueue::queue$|try_claim", "pending bit, flush_work cycles, list reference"),
    (r"finish_cycle", "flush_work cycles"),
    (r"unlock_wake|update_lendable", "pool unlock, wake outside the lock"),
    (r"wake_past_sleeper", "sleep detection"),
    (r"kick|wake_for", "concurrency management (nr_running, idle stack)"),
    (r"next_item|Lane::|item_started|should_time|Chain::try_fold", "lanes: local first, steal"),
    (r"dec_in_flight|dec_active|node_|NodeActive", "colours, max_active node budget"),
    (r"worker_thread",
     "worker loop, idle stack, CPU budget; process_one_work: busy table, pending, colours, lockup seq, stats"),
    (r"enter_idle|work_for|budget", "worker loop, idle stack, CPU budget"),
    (r"park|unpark|futex|syscall|Wake::run", "sleep/wake"),
    (r"execute_at|spawn_at|cell_for|Ring", "one-off cell reuse (ring)"),
    (r"Detached::run|Spawned::", "one-off job: closure slot, result hand-off"),
    (r"malloc|free|alloc|dealloc", "allocation"),
    (r"limit_worker|LimitProducer", "limit: the bare design"),
    (r"sched_getcpu|current_cpu", "current CPU"),
    (r"label", "lockup report label"),
    (r"VecDeque", "worklist"),
]

def tag(name):
    for rx, t in TAGS:
        if re.search(rx, name):
            return t
    return ""

def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

summary = []
for arg in sys.argv[5:]:
    shape, reps = arg.split("=", 1)
    per_rep = []
    for rep in reps.split(";"):
        a, b = (self_costs(p) for p in rep.split(","))
        merged = {}
        for fn in set(a) | set(b):
            ca, cb = a.get(fn, [0, 0]), b.get(fn, [0, 0])
            m = merged.setdefault(short(fn), [0.0, 0.0])
            m[0] += (cb[0] - ca[0]) / items
            m[1] += (cb[1] - ca[1]) / items
        per_rep.append(merged)
    names = set().union(*per_rep)
    rows = {n: (median([r.get(n, [0, 0])[0] for r in per_rep]),
                median([r.get(n, [0, 0])[1] for r in per_rep])) for n in names}
    rows = sorted(rows.items(), key=lambda r: -abs(r[1][0]))
    tot_ir = median([sum(v[0] for v in r.values()) for r in per_rep])
    tot_ge = median([sum(v[1] for v in r.values()) for r in per_rep])
    h_ir = median([sum(v[0] for n, v in r.items() if tag(n).startswith(("harness", "clock")))
                   for r in per_rep])
    summary.append((shape, tot_ir, tot_ge, h_ir))
    print(f"\n#### {shape} (submit/scope/batch)\n")
    print("| function | Ir/item | locked/item | pays for |\n|---|---:|---:|---|")
    shown_ir = shown_ge = 0.0
    for n, (ir, ge) in rows[:TOP]:
        shown_ir += ir
        shown_ge += ge
        print(f"| `{n}` | {ir:.0f} | {ge:.2f} | {tag(n)} |")
    print(f"| (the rest) | {tot_ir - shown_ir:.0f} | {tot_ge - shown_ge:.2f} | |")
    print(f"| **total** | **{tot_ir:.0f}** | **{tot_ge:.2f}** | |")

print(f"\n#### Totals per item (P={P}, items {N1} -> {N2} per producer, median of the runs)\n")
print("Harness: the bench's own per-item work (the producer loop, the completion, the clock")
print("reads and the sort of the latency samples), taken from `limit`'s run of the same batch,")
print("which reads no clock of its own; cmwq's own clock reads (idle parks, lane timing) stay in.\n")
print("| shape (submit/scope/batch) | Ir/item | locked/item | harness Ir | Ir less harness | vs limit | locked vs limit |")
print("|---|---:|---:|---:|---:|---:|---:|")
lim = {s.rsplit("/", 1)[1]: (ir, ge, h) for s, ir, ge, h in summary if s.startswith("limit/")}
for s, ir, ge, h in summary:
    l = lim.get(s.rsplit("/", 1)[1])
    if l:
        h = l[2]
    rel = f"{(ir - h) / (l[0] - l[2]):.2f}x | {ge / l[1]:.2f}x" if l and l[0] > l[2] and l[1] else "- | -"
    print(f"| {s} | {ir:.0f} | {ge:.2f} | {h:.0f} | {ir - h:.0f} | {rel} |")
EOF
