#!/usr/bin/env bash
# bench/h2_callgrind.sh: instructions (and syscalls) per HTTP/2 request
# (scenario 9's shape: h2load, 10 connections x 100 concurrent streams,
# cleartext with prior knowledge, `bind ... proto h2`).
#
# Cases (CASES, default "fixed 100b"):
#   fixed   `http-request return` (5-byte body) on every stream (GET /)
#   100b    a served 100-byte file (GET /100b), from memory once cached
#
# The server runs with one thread under `valgrind --tool=callgrind` (or,
# with MODE=strace, under `strace -c -f`), twice: once for N requests and
# once for 2N (h2load -n N -c10 -m100); the difference of the two totals
# divided by N is the steady-state cost of one request (start-up,
# connection setup and shutdown cancel out). Every request must be
# answered 2xx, else the script fails.
#
# CACHE=1 (callgrind) also simulates the caches (`--cache-sim=yes`, the
# sizes valgrind reads from this machine's CPU: a 32 KiB 8-way L1
# instruction cache here) and prints, per request, the L1 instruction
# misses (I1mr), the L1 data read and write misses (D1mr, D1mw) and the
# last level's (ILmr, DLmr, DLmw): what a request's code and data cost
# in cache lines beyond their instructions. Extra valgrind options (say
# `--I1=65536,8,64` to see how the misses fall with a larger cache) go in
# VALGRIND_OPTS, which valgrind reads itself.
#
# MODE=perf runs the server at its own speed instead (no tool slowing it
# down, so how many requests a read or a write carries is what a timed run
# sees): the server (one thread) pinned to CPU 0, h2load (one thread) to
# CPU 1 as bench/run's configuration A, in a network namespace of its own;
# one run of N requests after a warm-up, counted with the kernel's
# tracepoints (`perf stat -e syscalls:sys_enter_*` on the server) and
# `nstat`: system calls, scheduler switches and wake-ups, TCP segments, and
# h2load's bytes (frames, HPACK headers, data) per request.
#
# PATHS=N (default 1): h2load gets N targets, `<path>?v=0` .. `?v=N-1`,
# and each connection cycles through them, so no request repeats the one
# before it (as bench/run's --h2-paths; every server answers them as the
# plain path). With PATHS=1 every request is the same: a server may save
# work on a repeated request (ebb reuses a repeated HTTP/2 head), PATHS=4
# shows the general cost.
#
# SERVER picks the server: ebb (default), h2o (one thread, `file.file` for
# both cases, as bench/run's scenario 9) or haproxy (fixed case only: it
# has no file server, as in scenario 2).
#
#   bench/h2_callgrind.sh                      # ebb, target/release/ebb
#   EBB=path/to/ebb N=10000 bench/h2_callgrind.sh
#   SERVER=h2o bench/h2_callgrind.sh
#   MODE=strace SERVER=haproxy CASES=fixed bench/h2_callgrind.sh
#   ANNOTATE=1 bench/h2_callgrind.sh           # also the top functions (2N run)
#   PATHS=4 SERVER=h2o bench/h2_callgrind.sh   # no request repeats the one before
#   MODE=perf PATHS=4 N=200000 bench/h2_callgrind.sh
#   CACHE=1 PATHS=4 N=5000 bench/h2_callgrind.sh   # also cache misses/req
#
# Output: `<case>-h2c <server> instr/req` (callgrind) or, with
# MODE=strace, one line per system call: `<case>-h2c <server> <call> <calls/req>`;
# with MODE=perf, `<case>-h2c <server> <counter> <per request>` lines and
# `bytes/req`.
set -euo pipefail

cd "$(dirname "$0")/.."
# MODE=perf: a network namespace of its own, so that the TCP counters are
# the benchmark's alone.
if [ "${MODE:-}" = perf ] && [ -z "${H2_CALLGRIND_NETNS:-}" ]; then
    exec env H2_CALLGRIND_NETNS=1 unshare -n sh -c 'ip link set lo up && exec "$0" "$@"' "$0" "$@"
fi
EBB=${EBB:-target/release/ebb}
SERVER=${SERVER:-ebb}
MODE=${MODE:-callgrind}
CASES=${CASES:-fixed 100b}
N=${N:-10000}
PORT=${PORT:-18441}
PATHS=${PATHS:-1}

need=(h2load python3)
case $MODE in
callgrind) need+=(valgrind) ;;
strace) need+=(strace) ;;
perf) need+=(perf taskset nstat) ;;
*) echo "h2_callgrind.sh: MODE is callgrind, strace or perf" >&2; exit 2 ;;
esac
case $SERVER in
ebb) [ -x "$EBB" ] || { echo "h2_callgrind.sh: no $EBB (cargo build --release -p ebb)" >&2; exit 2; } ;;
h2o | haproxy) need+=("$SERVER") ;;
*) echo "h2_callgrind.sh: SERVER is ebb, h2o or haproxy" >&2; exit 2 ;;
esac
for t in "${need[@]}"; do
    command -v "$t" >/dev/null || { echo "h2_callgrind.sh: needs $t" >&2; exit 2; }
done

work=$(mktemp -d /tmp/ebb-h2cg.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir "$work/www"
printf hello >"$work/www/hello.txt"
python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 7 + 3) % 251 for i in range(100)))' >"$work/www/100b"

# The configuration of $SERVER (both cases: `/100b` is the file, any other
# path the fixed answer).
config() {
    case $SERVER in
    ebb | haproxy)
        cat <<EOF
global
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
frontend fe
    bind 127.0.0.1:$PORT proto h2
    http-request return status 200 content-type text/plain string "hello" unless { path /100b }
EOF
        [ "$SERVER" = haproxy ] || printf '    default_backend files\nbackend files\n    serve-files %s\n' "$work/www"
        ;;
    h2o)
        cat <<EOF
user: root
num-threads: 1
pid-file: $work/h2o.pid
error-log: $work/h2o-error.log
http2-max-concurrent-requests-per-connection: 128
listen:
  host: 127.0.0.1
  port: $PORT
hosts:
  default:
    paths:
      /100b:
        file.file: $work/www/100b
      /:
        file.file: $work/www/hello.txt
EOF
        ;;
    esac
}
config >"$work/server.cfg"
case $SERVER in
ebb) argv=("$EBB" -f "$work/server.cfg") ;;
haproxy) argv=(haproxy -db -f "$work/server.cfg") ;;
h2o) argv=(h2o -m worker -c "$work/server.cfg") ;;
esac

wait_port() {
    python3 - "$PORT" <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
deadline = time.monotonic() + 120
while True:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("h2_callgrind.sh: the server did not listen")
        time.sleep(0.2)
EOF
}

# MODE=perf: the server pinned to CPU 0 at its own speed, N requests
# after a warm-up, counted per request.
measure_perf() {
    local c=$1 out=$work/perf.$1 pid res path=/
    [ "$c" = 100b ] && path=/100b
    taskset -c 0 "${argv[@]}" >/dev/null 2>&1 &
    pid=$!
    wait_port
    local urls=("http://127.0.0.1:$PORT$path")
    if [ "$PATHS" -gt 1 ]; then
        urls=()
        for ((i = 0; i < PATHS; i++)); do urls+=("http://127.0.0.1:$PORT$path?v=$i"); done
    fi
    taskset -c 1 h2load -t1 -c10 -m100 -n 20000 "${urls[@]}" >/dev/null
    perf stat -x, -e 'sched:sched_switch,sched:sched_wakeup,syscalls:sys_enter_*' -p "$pid" -o "$out" &
    local perf_pid=$!
    sleep 1
    nstat -asz >"$work/nstat.0"
    res=$(taskset -c 1 h2load -t1 -c10 -m100 -n "$N" "${urls[@]}")
    nstat -asz >"$work/nstat.1"
    kill -INT "$perf_pid"
    wait "$perf_pid" 2>/dev/null || true
    kill -TERM "$pid"
    wait "$pid" || true
    grep -q "status codes: $N 2xx" <<<"$res" || {
        echo "h2_callgrind.sh: not every request answered 2xx:" >&2
        echo "$res" >&2
        exit 1
    }
    awk -F, -v n="$N" -v who="$SERVER" -v c="$c-h2c" '$1 ~ /^[0-9]+$/ && $1 > 0 {
        name = $3; sub(/^syscalls:sys_enter_/, "", name); sub(/^sched:/, "", name)
        printf "%s %-8s %-22s %.4f\n", c, who, name, $1 / n
    }' "$out" | sort -k4,4nr
    awk -v n="$N" -v c="$c-h2c" -v who="$SERVER" 'FNR == NR { before[$1] = $2; next }
        $1 ~ /^(TcpInSegs|TcpOutSegs|TcpExtDelayedACKs|TcpExtTCPPureAcks|TcpExtTCPOrigDataSent)$/ {
        printf "%s %-8s %-22s %.4f\n", c, who, $1, ($2 - before[$1]) / n
    }' "$work/nstat.0" "$work/nstat.1"
    sed -n 's/^traffic: .*(\([0-9]*\)) total, .*(\([0-9]*\)) headers.*(\([0-9]*\)) data.*/\1 \2 \3/p' <<<"$res" |
        awk -v n="$N" -v c="$c-h2c" -v who="$SERVER" '{ printf "%s %-8s bytes/req %.1f (headers %.1f, data %.1f)\n", c, who, $1 / n, $2 / n, $3 / n }'
}

# Runs the server under the tool for $2 requests of case $1; the tool's
# report is in $work/out.$1.$2.
measure() {
    local c=$1 n=$2 out=$work/out.$1.$2 pid res path=/
    [ "$c" = 100b ] && path=/100b
    if [ "$MODE" = callgrind ]; then
        local cgout=/dev/null sim=()
        [ -n "${ANNOTATE:-}" ] && cgout=$work/cg.$c.$n
        [ -n "${CACHE:-}" ] && sim=(--cache-sim=yes)
        valgrind --tool=callgrind "${sim[@]}" --callgrind-out-file="$cgout" --log-file="$out" \
            "${argv[@]}" >/dev/null 2>&1 &
    else
        strace -c -f -o "$out" "${argv[@]}" >/dev/null 2>&1 &
    fi
    pid=$!
    wait_port
    # A first request outside the count (the first lookup of a file).
    h2load -n 1 "http://127.0.0.1:$PORT$path" >/dev/null
    local urls=("http://127.0.0.1:$PORT$path")
    if [ "$PATHS" -gt 1 ]; then
        urls=()
        for ((i = 0; i < PATHS; i++)); do urls+=("http://127.0.0.1:$PORT$path?v=$i"); done
    fi
    res=$(h2load -n "$n" -c 10 -m 100 "${urls[@]}")
    # strace passes no signal on: the server (its child) gets it.
    local target=$pid
    [ "$MODE" = strace ] && target=$(pgrep -P "$pid" | head -1)
    grep -q "status codes: $n 2xx" <<<"$res" || {
        echo "h2_callgrind.sh: not every request answered 2xx:" >&2
        echo "$res" >&2
        kill -TERM "$target"
        exit 1
    }
    kill -TERM "$target"
    wait "$pid" || true
}

for c in $CASES; do
    if [ "$c" = 100b ] && [ "$SERVER" = haproxy ]; then
        continue
    fi
    if [ "$MODE" = perf ]; then
        measure_perf "$c"
        continue
    fi
    measure "$c" "$N"
    measure "$c" $((2 * N))
    if [ "$MODE" = callgrind ]; then
        i1=$(sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$work/out.$c.$N")
        i2=$(sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$work/out.$c.$((2 * N))")
        python3 -c "import sys; i1,i2,n=map(int,sys.argv[1:4]); print(f'{sys.argv[5]}-h2c {sys.argv[4]:8} {(i2-i1)/n:12.0f} instr/req  (N={n} vs 2N, PATHS={sys.argv[6]})')" \
            "$i1" "$i2" "$N" "$SERVER" "$c" "$PATHS"
        if [ -n "${CACHE:-}" ]; then
            python3 - "$work/out.$c.$N" "$work/out.$c.$((2 * N))" "$N" "$SERVER" "$c" <<'EOF'
import re, sys
def counts(path):
    text = open(path).read()
    names = re.search(r"Events *: *(.*)", text).group(1).split()
    values = [int(v) for v in re.search(r"Collected *: *(.*)", text).group(1).split()]
    return dict(zip(names, values))
a, b = counts(sys.argv[1]), counts(sys.argv[2])
n = int(sys.argv[3])
per = {k: (b[k] - a[k]) / n for k in b if k != "Ir"}
print(f"{sys.argv[5]}-h2c {sys.argv[4]:8} " + "  ".join(f"{k} {v:.1f}" for k, v in per.items()) + " per req")
EOF
        fi
        if [ -n "${ANNOTATE:-}" ]; then
            callgrind_annotate "$work/cg.$c.$((2 * N))" 2>/dev/null | sed -n '1,60p'
        fi
    else
        python3 - "$work/out.$c.$N" "$work/out.$c.$((2 * N))" "$N" "$SERVER" "$c" <<'EOF'
import sys
def calls(path):
    got = {}
    for line in open(path):
        f = line.split()
        # % time, seconds, usecs/call, calls, [errors], syscall
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            got[f[-1]] = int(f[3])
    return got
a, b = calls(sys.argv[1]), calls(sys.argv[2])
n = int(sys.argv[3])
total = 0.0
for name in sorted(set(a) | set(b)):
    per = (b.get(name, 0) - a.get(name, 0)) / n
    if abs(per) >= 0.0005:
        total += per
        print(f"{sys.argv[5]}-h2c {sys.argv[4]:8} {name:16} {per:8.4f} calls/req")
print(f"{sys.argv[5]}-h2c {sys.argv[4]:8} {'all':16} {total:8.4f} calls/req")
EOF
    fi
done
