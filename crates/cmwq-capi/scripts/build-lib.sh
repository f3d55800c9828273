#!/usr/bin/env bash
# Builds the C library and names it for -lcmwq in a directory of a checkout
# (`make install PREFIX=...` at the workspace root installs it properly):
#   scripts/build-lib.sh [--from DIR] [OUTDIR]
# (default OUTDIR: $CARGO_TARGET_DIR or target/, then capi-c/) makes
# OUTDIR/libcmwq.so.X.Y.Z (SONAME libcmwq.so.X), the links libcmwq.so.X and
# libcmwq.so to it, and OUTDIR/libcmwq.a. --from DIR takes the
# libcmwq_capi.{so,a} cargo already built there instead of building. Then:
#   cc -I include -I include/kcompat prog.c -L OUTDIR -lcmwq -Wl,-rpath,OUTDIR
#   cc -I include -I include/kcompat prog.c OUTDIR/libcmwq.a $(static-libs below)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
built=
if [ "${1:-}" = --from ]; then built=$2; shift 2; fi
# Not target/release: cargo puts that directory on LD_LIBRARY_PATH when it
# runs tests, where a stale libcmwq.so would shadow the one a test links.
out=${1:-$target/capi-c}
if [ -z "$built" ]; then
    profile=${CMWQ_CAPI_PROFILE:-release}
    if [ "$profile" = release ]; then
        (cd "$root" && cargo build --release -p cmwq-capi)
        built=$target/release
    else
        (cd "$root" && cargo build -p cmwq-capi)
        built=$target/debug
    fi
fi
ver=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -1)
major=${ver%%.*}
mkdir -p "$out"
cp -f "$built/libcmwq_capi.so" "$out/libcmwq.so.$ver.tmp"
mv -f "$out/libcmwq.so.$ver.tmp" "$out/libcmwq.so.$ver"
ln -sfn "libcmwq.so.$ver" "$out/libcmwq.so.$major"
ln -sfn "libcmwq.so.$major" "$out/libcmwq.so"
cp -f "$built/libcmwq_capi.a" "$out/libcmwq.a.tmp"
mv -f "$out/libcmwq.a.tmp" "$out/libcmwq.a"
echo "lib-dir: $out"
echo "include: $here/include $here/include/kcompat"
echo "static-libs: $(cat "$here/scripts/static-libs")"
