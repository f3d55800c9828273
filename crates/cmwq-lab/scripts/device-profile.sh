#!/usr/bin/env bash
# Where the time goes on a machine with more CPUs, in one short call.
#
# Our VMs have 2 vCPUs: a cache line that sixteen CPUs fight over costs
# nothing here and a quarter of the samples there (engine/COST.md, "The node
# budget's line"). A lent machine is bare and its minutes are few, so
# everything it needs travels in one folder and the run is one command:
#
#   prepare (here, in the checkout): builds `cmwq`, keeps its symbols
#     (debug info stripped), and bundles this machine's `perf` with its
#     shared libraries and loader, so it runs on a machine without perf.
#     With BASELINE=<git rev> it also builds that revision (in a scratch
#     worktree) as the A side of an A/B. Everything goes to .manycore/,
#     which .git/info/exclude ignores.
#   run (there, with .manycore carried and OUT set): with a baseline, first
#     `cmwq compare` of it against the new build at batch 64 and 1; then for
#     each SHAPES entry `perf record -e cpu-clock` of `cmwq bench` on every
#     CPU, a flat report and `perf annotate` of the hottest symbols; with
#     BAR=1, issue 30's bar shapes (`bench --vs all`, with the model
#     `kernel_min` beside `work` and `execute`, every submit, one producer
#     per CPU and 2). Without perf (or without the right to sample)
#     it says so and goes on. Each step runs only while the time left under
#     DL allows it, and everything is packed into one file,
#     $OUT/device-profile.tgz: a device call brings back at most 8 files.
#   map (here, on what came back: the .tgz or a folder): names the source
#     line of each hot instruction (addr2line through the inlined frames)
#     with the unstripped binary the prepared one came from, and tabulates
#     the bar (`bar.py`) if the run made one.
#
# Usage:
#   crates/cmwq-lab/scripts/device-profile.sh prepare      [env BASELINE=<rev>]
#   OUT=<dir> bash .manycore/device-profile.sh run         [env SHAPES, ITEMS, RUNS, BAR, DL]
#   crates/cmwq-lab/scripts/device-profile.sh map <tgz|dir> [env BIN, MIN_PCT]
# SHAPES: scope:batch pairs (default "cpu:64 cache_shard:64 cpu:1"); a scope of
# `limit` profiles the bare per-CPU design. ITEMS: items per producer at batch
# 64 (default 400000; a quarter of it at batch 1). RUNS: compare runs a side
# (default 10). BAR: 1 to run the bar's shapes (about 2 minutes on 16 CPUs).
# DL: seconds the whole run may take (default 480; give the call's timeout_s
# a minute more): a step that would start with too little left is skipped
# and says so. MIN_PCT: the share of a symbol's samples an instruction needs
# to be mapped (default 2).
set -u
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}

die() { echo "device-profile.sh: $*" >&2; exit 2; }

prepare() {
  root=$(git rev-parse --show-toplevel 2>/dev/null) || die "prepare runs in a cmwq checkout"
  cd "$root" || exit 2
  mkdir -p .manycore "$(git rev-parse --git-path info)"
  excl=$(git rev-parse --git-path info/exclude)
  grep -qx '/.manycore/' "$excl" 2>/dev/null || echo /.manycore/ >> "$excl"
  cargo build --release -p cmwq-cli >&2 || die "cargo build failed"
  strip --strip-debug -o .manycore/new target/release/cmwq || die "strip failed"
  cp target/release/cmwq target/device-profile-new.debug
  if [ -n "${BASELINE:-}" ]; then
    rev=$(git rev-parse --verify "${BASELINE}^{commit}" 2>/dev/null) || die "BASELINE=$BASELINE names no commit"
    wt=$(mktemp -d /tmp/cmwq-baseline.XXXXXX)
    git worktree add -q --detach "$wt" "$rev" || die "git worktree add failed for $rev"
    if ! (cd "$wt" && CARGO_TARGET_DIR="$root/target/baseline" cargo build --release -p cmwq-cli >&2); then
      git worktree remove --force "$wt"
      die "the baseline $rev did not build"
    fi
    git worktree remove --force "$wt"
    strip --strip-debug -o .manycore/old target/baseline/release/cmwq || die "strip failed"
    cp target/baseline/release/cmwq target/device-profile-old.debug
  else
    rm -f .manycore/old
  fi
  p=$(command -v perf 2>/dev/null) && p=$(readlink -f "$p")
  if [ -n "$p" ] && ! ldd "$p" >/dev/null 2>&1; then
    echo "device-profile.sh: $p is no dynamic executable (a wrapper script?): the run will compare but not profile" >&2
    p=""
  fi
  if [ -n "$p" ]; then
    rm -rf .manycore/perf
    mkdir -p .manycore/perf/lib
    cp "$p" .manycore/perf/perf
    ldd "$p" | awk '/=>/ && $3 ~ /^\// {print $3}' | while read -r l; do cp -L "$l" .manycore/perf/lib/; done
    ld=$(ldd "$p" | awk '/ld-linux/ {print $1}' | head -1)
    [ -n "$ld" ] && cp -L "$ld" .manycore/perf/ld.so
  else
    echo "device-profile.sh: no perf here: the run will compare but not profile" >&2
    rm -rf .manycore/perf
  fi
  cp "$here/device-profile.sh" .manycore/
  du -sh .manycore >&2
  mib=$(du -sm .manycore | cut -f1)
  [ "$mib" -lt 60 ] || echo "device-profile.sh: .manycore is $mib MiB: a device call carries at most 64 MiB with the tree" >&2
  echo "prepared: run there with  OUT=\$OUT bash .manycore/device-profile.sh run  (carry .manycore)" >&2
}

run() {
  [ -n "${OUT:-}" ] || die "run needs OUT (the folder whose files come back)"
  t0=$(date +%s)
  dl=${DL:-480}
  case "$dl" in ''|*[!0-9]*) die "DL '$dl' must be whole seconds";; esac
  case "${BAR:-0}" in 0|1) ;; *) die "BAR '${BAR}' must be 0 or 1";; esac
  # Seconds left under DL.
  left() { echo $(( dl - ($(date +%s) - t0) )); }
  final=$OUT
  OUT=$(mktemp -d /tmp/device-profile.XXXXXX)
  shapes=${SHAPES:-cpu:64 cache_shard:64 cpu:1}
  for shape in $shapes; do
    case "$shape" in
      cpu:*|smt:*|cache_shard:*|cache:*|numa:*|system:*|limit:*) ;;
      *) die "SHAPES entry '$shape' is not scope:batch (scopes cpu, smt, cache_shard, cache, numa, system, limit)";;
    esac
    case "${shape##*:}" in ''|*[!0-9]*) die "SHAPES entry '$shape' has no batch number";; esac
  done
  items=${ITEMS:-400000}; runs=${RUNS:-10}
  case "$items$runs" in *[!0-9]*) die "ITEMS '$items' and RUNS '$runs' must be whole numbers";; esac
  [ -x .manycore/new ] || die "no .manycore/new under $(pwd): run 'prepare' first, and carry .manycore"
  mkdir -p "$final"
  n=$(nproc)
  { nproc; lscpu 2>/dev/null | grep -E 'Model name|L3|NUMA node\(s\)|Hypervisor'; } > "$OUT/machine.txt"
  if [ -x .manycore/old ]; then
    for b in 64 1; do
      if [ "$b" = 64 ]; then it=50000; else it=20000; fi
      # About 7 s a run pair on 16 CPUs at batch 64, 4 s at batch 1.
      if [ "$(left)" -lt $(( runs * 8 + 30 )) ]; then
        echo "compare at batch $b skipped: $(left) s left under DL=$dl" | tee -a "$OUT/skipped.txt" >&2
        continue
      fi
      args="bench --vs limit --scopes cpu,cache_shard --threads $n --items $it --batch $b --rounds 3 --json"
      echo "compare at batch $b ($runs runs a side, $(left) s left)" >&2
      timeout $(( $(left) - 20 )) .manycore/new compare --runs "$runs" --markdown \
        --a-cmd ".manycore/old $args" --b-cmd ".manycore/new $args" 2>&1 \
        | grep -v 'not supported' > "$OUT/compare-b$b.md"
    done
  fi
  P=""
  if [ -x .manycore/perf/perf ]; then
    P=".manycore/perf/ld.so --library-path .manycore/perf/lib .manycore/perf/perf"
    if ! $P record -q -e cpu-clock -o /tmp/dp-probe.data -- true >/dev/null 2>&1; then
      echo "perf cannot sample here (perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)): no profiles" | tee "$OUT/perf-missing.txt" >&2
      P=""
    fi
  else
    echo "no perf was prepared: no profiles" > "$OUT/perf-missing.txt"
  fi
  [ -n "$P" ] && profile
  [ "${BAR:-0}" = 1 ] && bar
  tar czf "$final/device-profile.tgz" -C "$OUT" . && rm -rf "$OUT"
  ls -la "$final"
}

# The bar's shapes, bar.py's file names (its --producers N,2 tabulates them).
bar() {
  mkdir -p "$OUT/bar"
  for shape in "$n:20000:1" "2:20000:1" "$n:50000:64"; do
    IFS=: read -r p it b <<< "$shape"
    for s in work execute spawn; do
      if [ "$(left)" -lt 40 ]; then
        echo "bar p$p-b$b $s skipped: $(left) s left under DL=$dl" | tee -a "$OUT/skipped.txt" >&2
        continue
      fi
      echo "bar p$p-b$b --submit $s" >&2
      # The model kernel_min (limit plus the kernel's rules) beside work and
      # execute: bar.py's column of cmwq's CPU over the model's.
      vs=all; [ "$s" = spawn ] || vs=all,kernel_min
      timeout 60 .manycore/new bench --vs "$vs" --scopes cpu,cache_shard --submit "$s" --threads "$p" \
        --items "$it" --batch "$b" --rounds 3 --json > "$OUT/bar/$s-p$p-b$b.1.json" 2>/dev/null \
        || { echo "bar p$p-b$b $s failed or timed out" >> "$OUT/skipped.txt"; rm -f "$OUT/bar/$s-p$p-b$b.1.json"; }
    done
  done
}

profile() {
  for shape in $shapes; do
    if [ "$(left)" -lt 60 ]; then
      echo "profile $shape skipped: $(left) s left under DL=$dl" | tee -a "$OUT/skipped.txt" >&2
      continue
    fi
    scope=${shape%%:*}; b=${shape##*:}
    if [ "$scope" = limit ]; then args="--scopes none --vs limit"; else args="--scopes $scope"; fi
    if [ "$b" = 1 ]; then it=$((items / 4)); else it=$items; fi
    name="$scope-b$b"
    echo "profile $name" >&2
    $P record -q -e cpu-clock -F 1999 -o "/tmp/dp-$name.data" -- \
      .manycore/new bench $args --threads "$n" --items "$it" --batch "$b" --rounds 3 > /dev/null 2> "/tmp/dp-$name.err" \
      || { echo "perf record of $name failed: $(tail -2 "/tmp/dp-$name.err")" > "$OUT/prof-$name.txt"; continue; }
    $P report -i "/tmp/dp-$name.data" --stdio --no-children --sort dso,sym --percent-limit 0.3 2>/dev/null \
      | grep '%' > "$OUT/prof-$name.txt"
    $P report -i "/tmp/dp-$name.data" --stdio --no-children --sort sym --percent-limit 1.5 2>/dev/null \
      | grep '\[\.\]' | grep -v vdso | head -8 | sed 's/.*\[\.\] //' > "/tmp/dp-$name.syms"
    while IFS= read -r s; do
      [ -n "$s" ] || continue
      echo "===== $s"
      $P annotate -i "/tmp/dp-$name.data" --stdio -s "$s" 2>/dev/null | awk '$1+0 >= 1 || /Percent/' | head -40
    done < "/tmp/dp-$name.syms" > "$OUT/annot-$name.txt"
  done
}

map() {
  dir=${1:-}
  if [ -f "$dir" ]; then
    t=$(mktemp -d /tmp/device-profile-map.XXXXXX)
    tar xzf "$dir" -C "$t" || die "'$dir' is no tar.gz the run made"
    echo "(unpacked into $t)" >&2
    dir=$t
  fi
  [ -d "$dir" ] || die "map needs the device-profile.tgz the run brought back, or a folder (got '${dir}')"
  if [ -d "$dir/bar" ]; then
    wide=$(ls "$dir/bar" | sed -n 's/^work-p\([0-9]*\)-b64\..*/\1/p' | head -1)
    if [ -n "$wide" ]; then
      echo "## the bar, $wide producers"
      python3 "$here/bar.py" --reuse --out "$dir/bar" --producers "$wide,2" || true
      echo
    fi
  fi
  bin=${BIN:-target/device-profile-new.debug}
  [ -f "$bin" ] || die "no unstripped binary at '$bin' (set BIN to the one 'prepare' built)"
  command -v addr2line >/dev/null || die "addr2line not found (binutils)"
  min=${MIN_PCT:-2}
  case "$min" in ''|*[!0-9.]*) die "MIN_PCT '$min' is not a number";; esac
  found=0
  for f in "$dir"/annot-*.txt; do
    [ -f "$f" ] || continue
    found=1
    echo "## $(basename "$f" .txt)"
    awk -v min="$min" '
      /^===== / { sym = substr($0, 7); ours = 0; next }
      /Disassembly of/ { ours = ($0 !~ /libc|vdso|kernel/); next }
      ours && $1 + 0 >= min && $2 == ":" { a = $3; sub(":", "", a); print $1 "\t" a "\t" sym }
    ' "$f" | while IFS=$'\t' read -r pct addr sym; do
      # A timer sample lands on the instruction after the one that held
      # retirement up (a missed load, a locked instruction): name that one.
      a=$((0x$addr))
      prev=$(objdump -d --no-show-raw-insn --start-address=$((a > 48 ? a - 48 : 0)) --stop-address=$a "$bin" 2>/dev/null \
        | grep -E '^ +[0-9a-f]+:' | tail -1)
      paddr=$(echo "$prev" | awk -F: '{gsub(/ /, "", $1); print $1}')
      [ -n "$paddr" ] || paddr=$addr
      insn=$(echo "$prev" | cut -d: -f2- | sed 's/^[[:space:]]*//; s/[[:space:]]\+/ /g' | cut -c1-48)
      chain=$(addr2line -i -f -C -e "$bin" "0x$paddr" | paste - - \
        | awk -F'\t' '{n = split($2, p, "/"); printf "%s%s (%s/%s)", (NR > 1 ? " <- " : ""), $1, p[n-1], p[n]}')
      printf '%6s%%  %s  [%s]  %s\n' "$pct" "$paddr" "$insn" "$chain"
    done
  done
  for f in "$dir"/compare-b*.md "$dir"/skipped.txt "$dir"/perf-missing.txt; do
    [ -f "$f" ] || continue
    echo "## $(basename "$f")"
    cat "$f"
  done
  [ "$found" = 1 ] || [ -d "$dir/bar" ] || die "no annot-*.txt and no bar in '$dir'"
}

case "$cmd" in
  prepare) prepare ;;
  run) run ;;
  map) shift; map "$@" ;;
  *) die "usage: device-profile.sh prepare | run | map <dir>  (see the header)" ;;
esac
