#!/usr/bin/env bash
# Builds a kernel-style module (module_init/module_exit, e.g. the kernel's
# samples/workqueue/stall_detector/wq_stall.c) against libcmwq and the
# kcompat headers, and runs it as insmod would:
#   scripts/run-module.sh [-o BIN] FILE.c [param=value]...
# The module stays loaded until SIGTERM or SIGINT (Ctrl-C), then its
# module_exit runs and the program exits 0 (see include/kcompat/linux/module.h).
# -o BIN only builds BIN. Environment: CC (default gcc), CFLAGS (default
# -O2 -g), CMWQ_CAPI_LIB=DIR (a libcmwq.so already built there; default:
# build it with scripts/build-lib.sh), and the CMWQ_* knobs for the run
# (CMWQ_WATCHDOG_THRESH=3 makes the lockup watchdog report after 3 s).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
out=
if [ "${1:-}" = -o ]; then out=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: $0 [-o BIN] FILE.c [param=value]..." >&2; exit 2; }
src=$1; shift
[ -f "$src" ] || { echo "$0: no such file: $src" >&2; exit 2; }
lib=${CMWQ_CAPI_LIB:-}
if [ -z "$lib" ]; then
    lib=${CARGO_TARGET_DIR:-$root/target}/capi-c
    "$here/scripts/build-lib.sh" "$lib" >/dev/null
fi
bin=${out:-${TMPDIR:-/tmp}/cmwq-module-$(id -u)-$(basename "$src" .c)}
# shellcheck disable=SC2086 # CFLAGS is a list of words
${CC:-gcc} ${CFLAGS:--O2 -g} -I "$here/include" -I "$here/include/kcompat" "$src" -o "$bin" \
    -L "$lib" -lcmwq -Wl,-rpath,"$lib" -lpthread
[ -n "$out" ] && exit 0
# The module takes this process's place, so SIGTERM to it (or Ctrl-C)
# reaches the module, which unloads.
exec "$bin" "$@"
