#!/bin/sh
# Runs HAProxy's reg-tests with VTest against ebb (or haproxy).
#
#   tests/regtests/run.sh REGTESTS_DIR VTEST_BIN [PROGRAM] [TEST...]
#
# REGTESTS_DIR: a HAProxy source tree's reg-tests/ directory (v2.6.0 is
#   the reference; it is not kept in this repository).
# VTEST_BIN:    the vtest binary (github.com/vtest/VTest, `make`).
# PROGRAM:      the program to test (default: target/debug/ebb).
# TEST...:      tests to run, relative to REGTESTS_DIR, ".vtc" optional (default: every
#               line of tests/regtests/in-scope.txt).
#
# Prints one line per test (PASS, FAIL or SKIP, the test, and for a
# failure the first error VTest reported), then `N passed, N failed`
# (skipped tests count as failed: the program did not pass them).
# VTEST_TIMEOUT (seconds per test, default 20), JOBS (tests at once,
# default 1), KEEP=1 (keep VTest's logs under $TMPDIR) and BLOCKERS=1
# (before the summary, the refused configuration lines that stop the most
# tests) may be set.
# Exit status: 0 when every test passed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ $# -lt 2 ]; then
    echo "usage: $0 REGTESTS_DIR VTEST_BIN [PROGRAM] [TEST...]" >&2
    exit 2
fi
dir=$1
vtest=$2
shift 2
prog=${1:-$root/target/debug/ebb}
[ $# -gt 0 ] && shift
[ -d "$dir" ] || { echo "$0: $dir: not a directory" >&2; exit 2; }
[ -x "$vtest" ] || { echo "$0: $vtest: not executable" >&2; exit 2; }
command -v "$prog" >/dev/null 2>&1 || [ -x "$prog" ] || { echo "$0: $prog: not executable" >&2; exit 2; }
# A bare name is looked up in PATH (`haproxy`), a relative path made absolute.
case $prog in
/*) ;;
*/*) prog=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog") ;;
*) prog=$(command -v "$prog") ;;
esac
if [ $# -gt 0 ]; then
    list=$(printf '%s\n' "$@")
else
    list=$(grep -v '^#' "$here/in-scope.txt" | grep -v '^$')
fi
export HAPROXY_PROGRAM="$prog"
tmo=${VTEST_TIMEOUT:-20}
# One test: prints its result line.
run_one() {
    t=$1
    # A name given without its extension (tcp-rules/default_rules) is the
    # .vtc file: VTest would find no file, run nothing and exit 0.
    case $t in *.vtc) ;; *) t=$t.vtc ;; esac
    log="$work/$(echo "$t" | tr / _).log"
    (cd "$work" && "$vtest" -b $((2 << 20)) -k -t "$tmo" -v "$dir/$t") >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -qE "(^|[^0-9])0 tests passed" "$log"; then
        echo "FAIL $t: VTest ran nothing ($(grep -m1 'Cannot stat' "$log" || echo 'no test'))"
    elif [ $rc -eq 0 ] && ! grep -q "SKIPPING test" "$log"; then
        echo "PASS $t"
    elif [ $rc -eq 77 ] || grep -q "SKIPPING test" "$log"; then
        echo "SKIP $t: $(grep -m1 -o 'SKIPPING test.*' "$log")"
    else
        # The program's own first complaint (a refused configuration line)
        # says more than the timeout it causes on the client side.
        why=$(grep -m1 -E '^\*+ +h[0-9a-z_]* +debug\|.*(cfg:[0-9]+:|\[ALERT\]|ebb: .*not supported)' "$log" | sed 's/^.*debug|//; s/^.*\/cfg:/cfg:/')
        [ -n "$why" ] || why=$(grep -m1 -E '^---- ' "$log" | sed 's/^[- ]*//')
        [ -n "$why" ] || why=$(grep -m1 -o 'TIMED OUT.*' "$log")
        # Every refused line of the test, once, for BLOCKERS=1.
        grep -E '^\*+ +h[0-9a-z_]* +debug\|(.*cfg:[0-9]+: |ebb: -)' "$log" |
            sed 's/^.*cfg:[0-9]*: //; s/^.*debug|ebb: //; s/ (supported:.*//; s/ (did you mean.*//; s/: run ebb as.*//' |
            sed 's/set-var([^)]*)/set-var(...)/; s/track-sc[0-9]/track-scN/' |
            sort -u | sed "s|^|$t\t|" >>"$work/blockers"
        why=$(printf '%s' "$why" | cut -c1-200)
        echo "FAIL $t: ${why:-exit $rc}"
    fi
}
if [ "${RUN_ONE:-}" = 1 ]; then
    # Internal: one test per process when JOBS > 1.
    work=$RUN_WORK
    run_one "$1"
    exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ebb-regtests.XXXXXX")
# JOBS (default 1): tests run at once; most of a failing test's time is
# spent waiting for a timeout, so a few at a time fit on a small machine.
jobs=${JOBS:-1}
results="$work/results"
if [ "$jobs" -gt 1 ]; then
    printf '%s\n' $list | RUN_ONE=1 RUN_WORK="$work" xargs -P "$jobs" -I{} sh "$0" "$dir" "$vtest" "$prog" {} | tee "$results"
else
    for t in $list; do
        run_one "$t"
    done | tee "$results"
fi
pass=$(grep -c '^PASS ' "$results")
fail=$(grep -vc '^PASS ' "$results")
if [ "${BLOCKERS:-0}" = 1 ] && [ -s "$work/blockers" ]; then
    # The refusals that stop the most tests (each test counted once per
    # message; a test refused on several lines appears under each).
    echo "refused configuration lines, by number of tests:"
    cut -f2 "$work/blockers" | sort | uniq -c | sort -rn | head -${BLOCKERS_TOP:-30}
fi
echo "$pass passed, $fail failed"
if [ "${KEEP:-0}" = 1 ]; then
    echo "logs in $work" >&2
else
    rm -rf "$work"
fi
[ $fail -eq 0 ]
