#!/usr/bin/env bash
# Lists what a libcmwq.so exports (nm -D --defined-only) and fails unless
# every name is cmwq_* or a kernel workqueue name the headers provide
# (kernel_names.txt, "have" lines), so no helper name (filp_open, ...) or
# Rust symbol leaks into a program's namespace:
#   check-symbols.sh path/to/libcmwq.so
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
so=$1
mapfile -t syms < <(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | sort -u)
[ ${#syms[@]} -gt 0 ] || { echo "FAILED: $so exports nothing"; exit 1; }
allowed=$(awk '!/^#/ && NF >= 3 && $3 == "have" {print $1}' "$here/kernel_names.txt")
bad=()
kernel=0
for s in "${syms[@]}"; do
    case $s in
        cmwq_*) ;;
        *) if grep -qx "$s" <<<"$allowed"; then kernel=$((kernel + 1)); else bad+=("$s"); fi ;;
    esac
done
if [ ${#bad[@]} -gt 0 ]; then
    echo "FAILED: $so exports names that are neither cmwq_* nor kernel workqueue names: ${bad[*]}"
    exit 1
fi
echo "  symbols: ${#syms[@]} exported, $kernel kernel workqueue names, the rest cmwq_*"
