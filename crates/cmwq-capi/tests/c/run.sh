#!/usr/bin/env bash
# Builds and runs the C suite against libcmwq:
#   tests/c/run.sh [plain|asan|tsan|all]...   (default: all)
# Each mode compiles every t_*.c with the system C compiler ($CC, default
# gcc), links it with -lcmwq (shared; plain mode also links one test
# statically) and runs it; asan runs with leak detection on, tsan with the
# header's acquire/release hand-off. Stops at the first failure.
# t_rcu.c also links liburcu (-lurcu-bp; skipped, saying so, without it).
# Plain mode also checks the library's exported symbols (check-symbols.sh)
# and counts the kernel's names the headers provide (kernel_names.py).
# CMWQ_CAPI_PKGCONFIG=1: build every program with only
# `pkg-config --cflags --libs cmwq` (an installed library, as CI does).
# Plain and asan also run stall_sample.c as a module (insmod to rmmod):
# with CMWQ_WATCHDOG_THRESH=3 the lockup report must appear, then SIGTERM
# unloads it: both items ran, its last line printed, exit 0.
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

if [ -n "${CMWQ_CAPI_PKGCONFIG:-}" ]; then
    # An installed library: its headers and flags come from pkg-config alone.
    read -r -a inc <<<"$(pkg-config --cflags cmwq)"
    read -r -a link <<<"$(pkg-config --libs cmwq)"
    lib=$(pkg-config --variable=libdir cmwq)
    read -r -a static_link <<<"$(pkg-config --static --libs cmwq | sed 's/-lcmwq\b/-l:libcmwq.a/')"
else
    if [ -n "${CMWQ_CAPI_PREBUILT:-}" ]; then
        # Called by `cargo test` (tests/c_suite.rs): use what cargo just built.
        "$crate/scripts/build-lib.sh" --from "$CMWQ_CAPI_PREBUILT" "$lib" >/dev/null
    else
        "$crate/scripts/build-lib.sh" "$lib" >/dev/null
    fi
    inc=(-I "$crate/include" -I "$crate/include/kcompat")
    link=(-L "$lib" -lcmwq)
    read -r -a static_link <<<"$lib/libcmwq.a $(cat "$crate/scripts/static-libs")"
fi
link+=(-Wl,-rpath,"$lib")
# The tests carry an rpath to $lib, but LD_LIBRARY_PATH (cargo sets one for
# tests) comes first: make sure it finds this libcmwq.so, not another.
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
have_urcu=1
echo '#include <urcu-bp.h>' | "${CC:-gcc}" -E -x c - >/dev/null 2>&1 || have_urcu=0
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

# stall_sample.c, loaded as a module; $1: binary, $2: the mode's environment.
module_stall() {
    local bin=$1 name=stall_sample-$2 log=$out/stall_sample-$2.log pid rc=0 i
    shift 2
    env "$@" CMWQ_WATCHDOG_THRESH=3 "$bin" >"$log" 2>&1 &
    pid=$!
    for i in $(seq 600); do
        grep -q '^BUG: workqueue lockup - pool ' "$log" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if ! grep -q '^BUG: workqueue lockup - pool cpus=[0-9]* node=[-0-9]* flags=0x[0-9a-f]* nice=-\?[0-9]* stuck for [0-9]*s!$' "$log"; then
        kill -KILL "$pid" 2>/dev/null || true
        cat "$log"; echo "FAILED: $name: no lockup report within 60 s"; exit 1
    fi
    # The report names the stuck worker's item and the one waiting behind it.
    grep -q '^    in-flight: [0-9]*:holder_fn$' "$log" && grep -q '^    pending: behind_fn$' "$log" \
        || { kill -KILL "$pid"; cat "$log"; echo "FAILED: $name: report lacks the items"; exit 1; }
    grep -q 'behind_fn ran' "$log" && { kill -KILL "$pid"; cat "$log"; echo "FAILED: $name: behind ran during the stall"; exit 1; }
    kill -TERM "$pid"
    wait "$pid" || rc=$?
    if [ "$rc" != 0 ] || [ "$(grep -c '^BUG: workqueue lockup' "$log")" != 1 ] \
        || ! grep -q 'behind_fn ran' "$log" || ! grep -q 'holder_fn woken' "$log" \
        || [ "$(tail -n 1 "$log")" != "stall_sample: unloaded, 2 items ran" ]; then
        cat "$log"; echo "FAILED: $name: unload (exit $rc)"; exit 1
    fi
    echo "  $name: lockup reported once, unloaded on SIGTERM, exit 0"
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
        libs=()
        if [ "$name" = t_rcu ]; then
            if [ "$have_urcu" = 0 ]; then
                echo "  t_rcu-$mode: SKIPPED (no liburcu: apt-get install liburcu-dev)"
                continue
            fi
            libs=(-lurcu-bp)
        fi
        "$CC" "${flags[@]}" "${warn[@]}" "${inc[@]}" "$src" -o "$bin" "${link[@]}" "${libs[@]}" -lpthread
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
    if [ "$mode" != tsan ]; then
        if [ -n "${CMWQ_CAPI_PKGCONFIG:-}" ]; then
            "$CC" "${flags[@]}" "${warn[@]}" "${inc[@]}" "$here/stall_sample.c" \
                -o "$out/stall_sample-$mode" "${link[@]}" -lpthread
        else
            CMWQ_CAPI_LIB=$lib CFLAGS="${flags[*]} ${warn[*]}" "$crate/scripts/run-module.sh" \
                -o "$out/stall_sample-$mode" "$here/stall_sample.c"
        fi
        module_stall "$out/stall_sample-$mode" "$mode" "${env[@]}"
    fi
    if [ "$mode" = plain ]; then
        # The static library too: libcmwq.a and what it needs, no libcmwq.so.
        for t in t_basic t_busy; do
            "$CC" "${flags[@]}" "${warn[@]}" "${inc[@]}" "$here/$t.c" -o "$out/$t-static" \
                "${static_link[@]}"
            if readelf -d "$out/$t-static" | grep -q 'NEEDED.*libcmwq'; then
                echo "FAILED: $t-static needs libcmwq.so"; exit 1
            fi
            run "$t-static" "$out/$t-static"
        done
        # Only cmwq_* and the kernel's workqueue names are exported.
        "$here/check-symbols.sh" "$(readlink -f "$lib/libcmwq.so")"
        # A program with a filp_open (a kcompat helper's kernel name) of its own links.
        printf '%s\n' '#include <linux/workqueue.h>' 'int filp_open(void) { return 7; }' \
            'int kernel_read(void) { return 8; }' \
            'int main(void) { return filp_open() + kernel_read() == 15 && system_wq ? 0 : 1; }' \
            >"$out/own_names.c"
        "$CC" "${warn[@]}" "${inc[@]}" "$out/own_names.c" -o "$out/own_names" "${link[@]}"
        run own_names "$out/own_names"
        "$CC" "${warn[@]}" "${inc[@]}" "$out/own_names.c" -o "$out/own_names-static" "${static_link[@]}"
        run own_names-static "$out/own_names-static"
        python3 "$here/kernel_names.py" "${inc[@]}"
    fi
done
echo "C suite: all passed (${modes[*]})"
