#!/usr/bin/env bash
# CI's bounded fuzzing run: every cargo-fuzz target for FUZZ_SECONDS
# (default 30) each, corpus in fuzz/corpus/TARGET (gitignored, kept between
# runs) seeded from fuzz/seeds/TARGET. Fails when a target crashes; the
# crashing input is left in fuzz/artifacts/TARGET/ (turn it into a unit
# test in the module concerned, then fix).
#
#   fuzz/run-ci.sh [TARGET ...]        FUZZ_SECONDS=300 for a longer run
#
# FUZZ_JOBS targets run at a time (default: the number of CPUs; libFuzzer
# runs one process on one CPU, so each still has its CPU for its whole
# FUZZ_SECONDS on a quiet machine). Installs cargo-fuzz (cargo install
# cargo-fuzz --locked) and the nightly toolchain when missing. Prints one
# line per target with its executions, in the targets' order, then exactly
# `N passed, N failed`.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}
jobs=${FUZZ_JOBS:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || jobs=1

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal || exit 2
fi
if ! cargo fuzz --help > /dev/null 2>&1; then
    cargo install cargo-fuzz --locked || exit 2
fi

if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
t0=$(date +%s)
# The same flags for the build and each run (other flags would rebuild).
# Optimized, with debug assertions and overflow checks (`-a`: what catches
# a bug in safe Rust, which the targets drive), without AddressSanitizer
# (`-s none`: the targets reach no `unsafe` code of ebb's but the
# scheduler's under `cli`; its build took twice the CPU and its runs a
# third to a sixth of the executions). FUZZ_SANITIZER=address brings it
# back for a run.
flags=(-O -a -s "${FUZZ_SANITIZER:-none}")
if ! cargo +nightly fuzz build "${flags[@]}" > "/tmp/ebb-fuzz-build.$$" 2>&1; then
    tail -30 "/tmp/ebb-fuzz-build.$$"
    rm -f "/tmp/ebb-fuzz-build.$$"
    echo "0 passed, ${#targets[@]} failed"
    exit 1
fi
rm -f "/tmp/ebb-fuzz-build.$$"
echo "build: $(( $(date +%s) - t0 ))s"

# run_one TARGET: fuzzes it, writes its result line(s) to $res/TARGET
# (the first word `pass` or `FAIL`).
res=$(mktemp -d)
run_one() {
    local t=$1 seeds=() log rc execs rate corpus
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    [ -d "fuzz/seeds/$t" ] && seeds=("fuzz/seeds/$t")
    log=$(mktemp)
    # The corpus dir first: libFuzzer writes new inputs into the first dir.
    cargo +nightly fuzz run "${flags[@]}" "$t" "fuzz/corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 > "$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
    if [ $rc = 0 ]; then
        echo "pass $t: ${execs:-?} executions (${rate:-?}/s) in ${secs}s, corpus $corpus" > "$res/$t"
    else
        {
            echo "FAIL $t (exit $rc): ${execs:-?} executions; crash input:"
            ls -1 "fuzz/artifacts/$t" | sed "s|^|    fuzz/artifacts/$t/|"
            grep -m1 -E "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$log" | sed 's/^/    /'
        } > "$res/$t"
        tail -40 "$log" > "fuzz/artifacts/$t/last-run.log"
    fi
    rm -f "$log"
}

t0=$(date +%s)
running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
    run_one "$t" &
    running=$((running + 1))
done
wait
echo "fuzzing: $(( $(date +%s) - t0 ))s, $jobs at a time"

passed=0 failed=0
for t in "${targets[@]}"; do
    if [ -f "$res/$t" ]; then cat "$res/$t"; else echo "FAIL $t: no result" > "$res/$t"; cat "$res/$t"; fi
    if [ "$(head -c 4 "$res/$t")" = pass ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
rm -rf "$res"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
