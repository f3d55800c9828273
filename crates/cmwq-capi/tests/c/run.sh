#!/usr/bin/env bash
# Builds and runs the C suite against libcmwq:
#   tests/c/run.sh [plain|asan|tsan|all]...   (default: all)
# Each mode compiles every t_*.c with the system C compiler ($CC, default
# gcc), links it with -lcmwq (shared; plain mode also links one test
# statically) and runs it; asan runs with leak detection on, tsan with the
# header's acquire/release hand-off. Stops at the first failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
crate=$(cd "$here/../.." && pwd)
root=$(cd "$crate/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
lib=$target/capi-c
CC=${CC:-gcc}
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(all)
[ "${modes[0]}" = all ] && modes=(plain asan tsan)

if [ -n "${CMWQ_CAPI_PREBUILT:-}" ]; then
    # Called by `cargo test` (tests/c_suite.rs): use what cargo just built.
    mkdir -p "$lib"
    cp -f "$CMWQ_CAPI_PREBUILT/libcmwq_capi.so" "$lib/libcmwq.so"
    cp -f "$CMWQ_CAPI_PREBUILT/libcmwq_capi.a" "$lib/libcmwq.a"
else
    "$crate/scripts/build-lib.sh" "$lib" >/dev/null
fi
inc=(-I "$crate/include" -I "$crate/include/kcompat")
# The tests carry an rpath to $lib, but LD_LIBRARY_PATH (cargo sets one for
# tests) comes first: make sure it finds this libcmwq.so, not another.
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
warn=(-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Werror)
out=$target/capi-c/tests
mkdir -p "$out"

run() { # name, binary, args...
    local name=$1; shift
    local start=$SECONDS
    if ! timeout 120 "$@" >"$out/$name.log" 2>&1; then
        cat "$out/$name.log"
        echo "FAILED: $name ($*)"
        exit 1
    fi
    grep -E '^ok ' "$out/$name.log" | sed "s/^/  [$name] /" || true
    echo "  $name: passed ($((SECONDS - start)) s)"
}

for mode in "${modes[@]}"; do
    case $mode in
        plain) flags=(-O2 -g) env=() ;;
        asan) flags=(-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
              env=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1) ;;
        tsan) flags=(-O1 -g -fsanitize=thread)
              env=(TSAN_OPTIONS="halt_on_error=1 exitcode=66 report_signal_unsafe=0") ;;
        *) echo "unknown mode $mode (plain, asan, tsan, all)"; exit 2 ;;
    esac
    echo "== C suite: $mode ($CC)"
    for src in "$here"/t_*.c; do
        name=$(basename "$src" .c)
        bin=$out/$name-$mode
        "$CC" "${flags[@]}" "${warn[@]}" "${inc[@]}" "$src" -o "$bin" -L "$lib" -lcmwq -Wl,-rpath,"$lib" -lpthread
        args=()
        extra=()
        if [ "$name" = t_kcompat ]; then args=(count=5 name=hello); extra=(kc_env=7); fi
        run "$name-$mode" env "${env[@]}" "${extra[@]}" "$bin" "${args[@]}"
        if [ "$name" = t_kcompat ] && [ "$mode" = plain ]; then
            # A bad parameter ends the program with 2 before the init runs.
            rc=0; "$bin" count=notanumber >/dev/null 2>&1 || rc=$?
            [ "$rc" = 2 ] || { echo "FAILED: t_kcompat count=notanumber exited $rc, expected 2"; exit 1; }
            rc=0; "$bin" nosuchparam=1 >/dev/null 2>&1 || rc=$?
            [ "$rc" = 2 ] || { echo "FAILED: t_kcompat nosuchparam=1 exited $rc, expected 2"; exit 1; }
        fi
    done
    if [ "$mode" = plain ]; then
        # The static library too: what a static link needs besides libcmwq.a.
        "$CC" "${flags[@]}" "${warn[@]}" "${inc[@]}" "$here/t_basic.c" -o "$out/t_basic-static" \
            "$lib/libcmwq.a" -lpthread -ldl -lm -lrt -lgcc_s -lutil
        run t_basic-static "$out/t_basic-static"
    fi
done
echo "C suite: all passed (${modes[*]})"
