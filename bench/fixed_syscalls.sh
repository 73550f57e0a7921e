#!/usr/bin/env bash
# bench/fixed_syscalls.sh: the kernel-side cost of scenario 1A (the fixed
# 5-byte 200, keep-alive, bench/run's config A), counted rather than timed:
# system calls, scheduler switches and wake-ups per request of the server
# process (every thread), and TCP segments per request on the loopback.
# The server (one thread) is pinned to CPU 0, wrk (one thread, 64
# connections) to CPU 1, as in bench/run. Counts come from the kernel's
# tracepoints (`perf stat -e syscalls:sys_enter_*`, per thread of the server
# process) and `nstat`; they do not depend on load the way times do.
#
#   bench/fixed_syscalls.sh                 # ebb, target/release/ebb
#   SERVER=sol bench/fixed_syscalls.sh      # bench/sol (cargo build --release
#                                           #   --manifest-path bench/sol/Cargo.toml)
#   SERVER=haproxy bench/fixed_syscalls.sh  # haproxy -db, the same config
#   EBB=path/to/ebb D=5 C=64 PORT=18631 bench/fixed_syscalls.sh
#
# THREADS=2 is configuration B instead: two server threads (`nbthread 2`,
# `sol --threads 2`) and wrk with two threads, nothing pinned.
#
# Output: `<server> <thread> <counter> <per response>` lines (the non-zero
# ones), then the TCP counters of the loopback (both ends: wrk's and the
# server's) per request.
set -euo pipefail

cd "$(dirname "$0")/.."
# A network namespace of our own: the TCP counters are then only the
# benchmark's (other loopback traffic on the machine is not counted), and
# the port cannot clash.
if [ -z "${FIXED_SYSCALLS_NETNS:-}" ]; then
    exec env FIXED_SYSCALLS_NETNS=1 unshare -n sh -c 'ip link set lo up && exec "$0" "$@"' "$0" "$@"
fi
SERVER=${SERVER:-ebb}
EBB=${EBB:-target/release/ebb}
SOL=${SOL:-bench/sol/target/release/sol}
HAPROXY=${HAPROXY:-haproxy}
D=${D:-5}
C=${C:-64}
THREADS=${THREADS:-1}
PORT=${PORT:-18631}

for t in perf wrk taskset nstat curl; do
    command -v "$t" >/dev/null || { echo "fixed_syscalls.sh: needs $t" >&2; exit 2; }
done

work=$(mktemp -d /tmp/ebb-fsys.XXXXXX)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The benchmark's own configuration of scenario 1.
sed -e "s/@THREADS@/$THREADS/; s/@MAXCONN@/4096/; s/@PORT@/$PORT/" \
    bench/configs/s1-fixed/ebb.cfg >"$work/fixed.cfg"

case "$SERVER" in
    ebb) argv=("$EBB" -f "$work/fixed.cfg") ;;
    haproxy) argv=("$(command -v "$HAPROXY")" -db -f "$work/fixed.cfg") ;;
    sol) argv=("$SOL" --port "$PORT" --threads "$THREADS") ;;
    *) echo "fixed_syscalls.sh: SERVER is ebb, sol or haproxy" >&2; exit 2 ;;
esac
[ -x "${argv[0]}" ] || { echo "fixed_syscalls.sh: no ${argv[0]}" >&2; exit 2; }
# Configuration A pins the server to CPU 0 and wrk to CPU 1; B pins nothing.
server_cpu=(taskset -c 0) client_cpu=(taskset -c 1)
if [ "$THREADS" != 1 ]; then
    server_cpu=() client_cpu=()
fi
"${server_cpu[@]}" "${argv[@]}" >"$work/server.log" 2>&1 &
server_pid=$!

url=http://127.0.0.1:$PORT/
timeout 10 sh -c "until curl -fso /dev/null $url; do sleep 0.1; done"
# Warm-up: every connection made once.
"${client_cpu[@]}" wrk -t"$THREADS" -c"$C" -d1s "$url" >/dev/null

events=sched:sched_switch,sched:sched_wakeup,syscalls:sys_enter_*
perf stat --per-thread -x, -e "$events" -p "$server_pid" -o "$work/server.perf" &
perf_pid=$!
sleep 1
nstat -asz >"$work/nstat.0"
out=$("${client_cpu[@]}" wrk -t"$THREADS" -c"$C" -d"${D}s" "$url")
nstat -asz >"$work/nstat.1"
kill -INT "$perf_pid"
wait "$perf_pid" 2>/dev/null || true
n=$(sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out")
[ -n "$n" ] && [ "$n" -gt 0 ] || { echo "fixed_syscalls.sh: wrk: $out" >&2; exit 1; }
if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
    echo "fixed_syscalls.sh: wrk saw errors:" >&2
    echo "$out" >&2
    exit 1
fi
# perf attaches while the process runs, and may start counting late on a
# busy machine: its counts are divided by the responses it saw (one write
# each: `write`, `sendto` or `writev`, every server here answers so), the
# TCP counters (read right before and after wrk) by wrk's requests.
resp=$(awk -F, '$4 ~ /sys_enter_(write|sendto|writev)$/ { s += $2 } END { print s + 0 }' "$work/server.perf")
[ "$resp" -gt 0 ] || { echo "fixed_syscalls.sh: perf saw no write" >&2; exit 1; }
echo "$SERVER: wrk $n requests in ${D}s; perf saw $resp responses (server counts are per response)"
awk -F, -v n="$resp" -v who="$SERVER" '$2 ~ /^[0-9]+$/ && $2 > 0 {
    name = $4; sub(/^syscalls:sys_enter_/, "", name); sub(/^sched:/, "", name)
    printf "%s %-28s %-22s %.4f\n", who, $1, name, $2 / n
}' "$work/server.perf" | sort -k2,2 -k4,4nr
awk -v n="$n" 'FNR == NR { before[$1] = $2; next } $1 ~ /^(TcpInSegs|TcpOutSegs|TcpExtDelayedACKs|TcpExtTCPHPAcks|TcpExtTCPPureAcks|TcpExtTCPHPHits|TcpExtTCPAutoCorking|TcpExtTCPOrigDataSent|TcpExtTCPDelivered|TcpExtTCPBacklogCoalesce|TcpExtTCPRcvCoalesce|TcpExtTCPOFOQueue|TcpExtTCPWantZeroWindowAdv|TcpExtTCPFromZeroWindowAdv|TcpExtTCPToZeroWindowAdv)$/ {
    printf "tcp %-28s %.4f\n", $1, ($2 - before[$1]) / n
}' "$work/nstat.0" "$work/nstat.1"
