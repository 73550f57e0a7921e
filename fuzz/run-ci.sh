#!/usr/bin/env bash
# CI's bounded fuzzing run: every cargo-fuzz target for FUZZ_SECONDS
# (default 30) each, corpus in fuzz/corpus/TARGET (gitignored, kept between
# runs) seeded from fuzz/seeds/TARGET. Fails when a target crashes; the
# crashing input is left in fuzz/artifacts/TARGET/ (turn it into a unit
# test in the module concerned, then fix).
#
#   fuzz/run-ci.sh [TARGET ...]        FUZZ_SECONDS=300 for a longer run
#
# Installs cargo-fuzz (cargo install cargo-fuzz --locked) and the nightly
# toolchain when missing. Prints one line per target with its executions,
# then exactly `N passed, N failed`.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal || exit 2
fi
if ! cargo fuzz --help > /dev/null 2>&1; then
    cargo install cargo-fuzz --locked || exit 2
fi

if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
t0=$(date +%s)
if ! cargo +nightly fuzz build -O > "/tmp/ebb-fuzz-build.$$" 2>&1; then
    tail -30 "/tmp/ebb-fuzz-build.$$"
    rm -f "/tmp/ebb-fuzz-build.$$"
    echo "0 passed, ${#targets[@]} failed"
    exit 1
fi
rm -f "/tmp/ebb-fuzz-build.$$"
echo "build: $(( $(date +%s) - t0 ))s"

passed=0 failed=0
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    seeds=()
    [ -d "fuzz/seeds/$t" ] && seeds=("fuzz/seeds/$t")
    log=$(mktemp)
    # The corpus dir first: libFuzzer writes new inputs into the first dir.
    cargo +nightly fuzz run -O "$t" "fuzz/corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 > "$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
    if [ $rc = 0 ]; then
        passed=$((passed + 1))
        echo "pass $t: ${execs:-?} executions (${rate:-?}/s) in ${secs}s, corpus $corpus"
    else
        failed=$((failed + 1))
        echo "FAIL $t (exit $rc): ${execs:-?} executions; crash input:"
        ls -1 "fuzz/artifacts/$t" | sed "s|^|    fuzz/artifacts/$t/|"
        grep -m1 -E "panicked at|ERROR: (libFuzzer|AddressSanitizer)" "$log" | sed 's/^/    /'
        tail -40 "$log" > "fuzz/artifacts/$t/last-run.log"
    fi
    rm -f "$log"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
