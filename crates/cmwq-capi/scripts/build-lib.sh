#!/usr/bin/env bash
# Builds the C library and names it for -lcmwq:
#   scripts/build-lib.sh [OUTDIR]     (default: $CARGO_TARGET_DIR or target/, then capi-c/)
# makes OUTDIR/libcmwq.so and OUTDIR/libcmwq.a (copies of libcmwq_capi.*; the
# shared one's SONAME is libcmwq.so). Then:
#   cc -I include -I include/kcompat prog.c -L OUTDIR -lcmwq -Wl,-rpath,OUTDIR
#   cc -I include -I include/kcompat prog.c OUTDIR/libcmwq.a -lpthread -ldl -lm -lrt -lgcc_s -lutil
# (the static link needs the system libraries it prints as "static-libs:").
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
# Not target/release: cargo puts that directory on LD_LIBRARY_PATH when it
# runs tests, where a stale libcmwq.so would shadow the one a test links.
out=${1:-$target/capi-c}
profile=${CMWQ_CAPI_PROFILE:-release}
if [ "$profile" = release ]; then
    (cd "$root" && cargo build --release -p cmwq-capi)
    built=$target/release
else
    (cd "$root" && cargo build -p cmwq-capi)
    built=$target/debug
fi
mkdir -p "$out"
for ext in so a; do
    if [ "$built/libcmwq_capi.$ext" != "$out/libcmwq.$ext" ]; then
        cp -f "$built/libcmwq_capi.$ext" "$out/libcmwq.$ext.tmp"
        mv -f "$out/libcmwq.$ext.tmp" "$out/libcmwq.$ext"
    fi
done
echo "lib-dir: $out"
echo "include: $here/include $here/include/kcompat"
echo "static-libs: -lpthread -ldl -lm -lrt -lgcc_s -lutil -lc"
