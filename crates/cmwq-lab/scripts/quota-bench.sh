#!/bin/sh
# `cmwq bench` inside a cgroup with a CPU quota (default 1 CPU: 100000 us per
# 100000 us), with the CPU budget on (CMWQ_CPU_QUOTA=auto) and off, beside
# rayon and crossbeam sized as available_parallelism() is under the quota.
# Prints each run's report and the cgroup's throttled periods. Needs root and
# a writable cgroup v1 `cpu` hierarchy or cgroup v2 with the cpu controller.
# Usage: quota-bench.sh [CMWQ_BINARY] [QUOTA_US] [extra bench args...]
# QUOTA_BENCH_CMD=mix runs `cmwq mix` instead (long CPU-bound jobs:
# `--block-every 0 --cpu-us 2000`).
set -eu
BIN=${1:-target/release/cmwq}; QUOTA=${2:-100000}
shift 2 2>/dev/null || shift $#
if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
  CG=/sys/fs/cgroup/cpu/cmwq-quota-bench; mkdir -p $CG
  echo 100000 > $CG/cpu.cfs_period_us; echo "$QUOTA" > $CG/cpu.cfs_quota_us
else
  ROOT=$(awk '$9=="cgroup2"{print $5; exit}' /proc/self/mountinfo)
  echo +cpu > "$ROOT/cgroup.subtree_control" || true
  CG=$ROOT/cmwq-quota-bench; mkdir -p $CG; echo "$QUOTA 100000" > $CG/cpu.max
fi
trap 'rmdir $CG' EXIT
ARGS="$*"; SUB=${QUOTA_BENCH_CMD:-bench}
stat() { awk '$1=="nr_periods"{p=$2} $1=="nr_throttled"{t=$2} $1=="throttled_time"{n=$2} $1=="throttled_usec"{n=$2*1000} END{print p, t, n}' $CG/cpu.stat; }
for mode in auto off; do
  before=$(stat)
  echo "== CMWQ_CPU_QUOTA=$mode: $BIN $SUB $ARGS"
  sh -c "echo \$\$ > $CG/cgroup.procs; CMWQ_CPU_QUOTA=$mode exec $BIN $SUB $ARGS" 2>&1
  after=$(stat)
  echo "$before $after" | awk '{printf "cgroup: %d periods, %d throttled, %.0f ms throttled\n", $4-$1, $5-$2, ($6-$3)/1e6}'
done
