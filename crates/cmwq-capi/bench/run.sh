#!/usr/bin/env bash
# The C API beside the Rust API, in the kernel's test_workqueue shape:
#   bench/run.sh [RUNS] [THREADS] [ITEMS]      (defaults: 5, 2, 50000)
# Builds libcmwq (scripts/build-lib.sh), bench/c_bench.c and the `cmwq`
# binary, then runs, alternating RUNS times each:
#   c_bench nr_threads=THREADS wq_items=ITEMS scopes=cpu
#   cmwq bench --submit work --scopes cpu --threads THREADS --items ITEMS --rounds 1
# and prints each run's cpu-scope items/s, the medians and their ratio.
# TWQ_SRC=/path/to/test_workqueue.c adds the kernel's own module (built with
# the same headers and library) as a third side; it runs every scope, and its
# cpu line is the one compared.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
crate=$(cd "$here/.." && pwd)
root=$(cd "$crate/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
runs=${1:-5}; threads=${2:-2}; items=${3:-50000}
lib=$target/capi-c
out=$target/capi-c/bench
mkdir -p "$out"
"$crate/scripts/build-lib.sh" "$lib" >/dev/null
(cd "$root" && cargo build --release -p cmwq-cli >/dev/null)
CC=${CC:-gcc}
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
inc=(-I "$crate/include" -I "$crate/include/kcompat")
"$CC" -O2 -Wall "${inc[@]}" "$here/c_bench.c" -o "$out/c_bench" -L "$lib" -lcmwq -Wl,-rpath,"$lib"
sides=(c_bench cmwq)
if [ -n "${TWQ_SRC:-}" ]; then
    "$CC" -O2 -Wall "${inc[@]}" "$TWQ_SRC" -o "$out/test_workqueue" -L "$lib" -lcmwq -Wl,-rpath,"$lib"
    sides=(test_workqueue c_bench cmwq)
fi

# Every side prints the kernel module's lines; take the cpu scope's items/s.
cpu_rate() { awk '$1 == "test_workqueue:" && $2 == "cpu" {print $3}'; }
rate() { # side -> items/s of the cpu scope
    case $1 in
        c_bench) "$out/c_bench" nr_threads="$threads" wq_items="$items" scopes=cpu 2>/dev/null | cpu_rate ;;
        test_workqueue) "$out/test_workqueue" nr_threads="$threads" wq_items="$items" 2>/dev/null | cpu_rate ;;
        cmwq) "$target/release/cmwq" bench --submit work --scopes cpu --threads "$threads" \
                  --items "$items" --rounds 1 | cpu_rate ;;
    esac
}

declare -A vals
for i in $(seq "$runs"); do
    for s in "${sides[@]}"; do
        v=$(rate "$s")
        vals[$s]="${vals[$s]:-} $v"
        echo "run $i  $s  $v items/s"
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
ref=$(echo "${vals[cmwq]}" | median)
for s in "${sides[@]}"; do
    m=$(echo "${vals[$s]}" | median)
    echo "median $s: $m items/s ($(python3 -c "print(f'{$m/$ref:.3f}')") x cmwq bench)"
done
