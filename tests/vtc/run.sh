#!/usr/bin/env bash
# Runs the varnishtest conformance corpus (cases/*.vtc) against ebb or
# HAProxy. One line per case, then exactly `N passed, N failed`.
#
#   tests/vtc/run.sh [--target ebb|haproxy] [-j JOBS] [--keep] [CASE.vtc ...]
#   tests/vtc/run.sh --compare          both targets, then a Markdown table
#
# ebb: $EBB if set, else the debug binary (built by `cargo build -p ebb`).
# haproxy: $HAPROXY if set, else `haproxy` on PATH (Debian's 2.6).
# Exit status: non-zero when a case fails against ebb; always 0 against
# HAProxy (its differences are the point of that run, see README).
# Logs of failed cases: $VTC_OUT (default target/vtc/TARGET/).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=ebb jobs=3 keep=0 compare=0
cases=()
while [ $# -gt 0 ]; do
    case $1 in
        --target) target=$2; shift 2 ;;
        --target=*) target=${1#*=}; shift ;;
        -j) jobs=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --compare) compare=1; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) cases+=("$1"); shift ;;
    esac
done
[ ${#cases[@]} -gt 0 ] || cases=("$here"/cases/*.vtc)

if [ "$compare" = 1 ]; then
    "$0" --target ebb -j "$jobs" "${cases[@]}" > /dev/null
    "$0" --target haproxy -j "$jobs" "${cases[@]}" > /dev/null
    out=${VTC_OUT:-$root/target/vtc}
    echo "| case | what it checks | ebb | HAProxy 2.6 |"
    echo "|---|---|---|---|"
    agree=0 differ=0
    for c in "${cases[@]}"; do
        n=$(basename "$c" .vtc)
        what=$(sed -n '1s/^varnishtest "\(.*\)"$/\1/p' "$c")
        e=$(awk -v n="$n" '$2==n{print $1}' "$out/ebb/results")
        h=$(awk -v n="$n" '$2==n{print $1}' "$out/haproxy/results")
        if [ "$e" = "$h" ]; then agree=$((agree+1)); else differ=$((differ+1)); fi
        echo "| \`$n\` | $what | $e | $h |"
    done
    echo
    echo "$agree agree, $differ differ"
    exit 0
fi

command -v varnishtest > /dev/null || { echo "varnishtest missing (apt-get install varnish)"; exit 2; }
case $target in
    ebb)
        if [ -z "${EBB:-}" ]; then
            (cd "$root" && cargo build -q -p ebb --bin ebb) || exit 2
            EBB=${CARGO_TARGET_DIR:-$root/target}/debug/ebb
        fi
        bin=$EBB ;;
    haproxy) bin=${HAPROXY:-$(command -v haproxy)} || { echo "haproxy missing"; exit 2; } ;;
    *) echo "unknown target $target"; exit 2 ;;
esac
out=${VTC_OUT:-$root/target/vtc}/$target
rm -rf "$out"; mkdir -p "$out/.ports"

# A free port outside the ephemeral range, so client sockets cannot take it.
. "$here/../free_port.sh"

one() {
    local c=$1 n p t0 t1 rc
    n=$(basename "$c" .vtc)
    # A port handed out once per run: the jobs run side by side, and two
    # that drew the same free port before either bound it would share it
    # (mkdir is the atomic claim).
    for _ in $(seq 1 50); do
        p=$(free_port)
        mkdir "$out/.ports/$p" 2> /dev/null && break
    done
    t0=$(date +%s%N)
    LB_TARGET=$target LB_PORT=$p LB_BIN=$bin LB_DIR=$here \
        varnishtest -t 30 $([ "$keep" = 1 ] && echo -v) -D lb="$here/lb.sh" -D lbwait="$here/lb.sh wait" \
        -D lbsock="127.0.0.1:$p" "$c" > "$out/$n.log" 2>&1
    rc=$?
    t1=$(date +%s%N)
    if [ $rc = 0 ]; then
        printf 'pass %s %d.%02ds\n' "$n" $(((t1-t0)/1000000000)) $(((t1-t0)/10000000%100))
        [ "$keep" = 1 ] || rm -f "$out/$n.log"
    else
        printf 'FAIL %s (log: %s)\n' "$n" "$out/$n.log"
    fi
}
export -f one free_port
export target bin here out keep

printf '%s\n' "${cases[@]}" | xargs -P "$jobs" -I{} bash -c 'one "$1"' _ {} | tee "$out/lines"
sed -e 's/^pass /pass /' -e 's/^FAIL \([^ ]*\).*/fail \1/' "$out/lines" | sort -k2 > "$out/results"
passed=$(grep -c '^pass ' "$out/lines")
failed=$(grep -c '^FAIL ' "$out/lines")
echo "$passed passed, $failed failed"
if [ "$target" = ebb ] && [ "$failed" != 0 ]; then exit 1; fi
exit 0
