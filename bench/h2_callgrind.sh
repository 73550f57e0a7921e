#!/usr/bin/env bash
# bench/h2_callgrind.sh: instructions per HTTP/2 request under callgrind
# (scenario 9's shape: h2load, 10 connections x 100 concurrent streams,
# cleartext with prior knowledge, `bind ... proto h2`).
#
#   fixed   `http-request return` (5-byte body) on every stream
#
# ebb runs with one thread under `valgrind --tool=callgrind`, twice: once
# for N requests and once for 2N (h2load -n N -c10 -m100); the difference
# of the two totals divided by N is the steady-state cost of one request
# (start-up, connection setup and shutdown cancel out). Every request must
# be answered 2xx, else the script fails.
#
#   bench/h2_callgrind.sh                      # uses target/release/ebb
#   EBB=path/to/ebb N=10000 bench/h2_callgrind.sh
#
# Output: `fixed-h2c instr/req`.
set -euo pipefail

cd "$(dirname "$0")/.."
EBB=${EBB:-target/release/ebb}
N=${N:-10000}
PORT=${PORT:-18441}

for t in valgrind h2load python3; do
    command -v "$t" >/dev/null || { echo "h2_callgrind.sh: needs $t" >&2; exit 2; }
done
[ -x "$EBB" ] || { echo "h2_callgrind.sh: no $EBB (cargo build --release -p ebb)" >&2; exit 2; }

work=$(mktemp -d /tmp/ebb-h2cg.XXXXXX)
trap 'rm -rf "$work"' EXIT

cat >"$work/fixed.cfg" <<EOF
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
    http-request return status 200 content-type text/plain string "hello"
EOF

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
            sys.exit("h2_callgrind.sh: ebb did not listen")
        time.sleep(0.2)
EOF
}

# Runs ebb under callgrind for $1 requests; prints its instruction total.
measure() {
    local n=$1 log="$work/cg.$1.log" pid out
    valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file="$log" \
        "$EBB" -f "$work/fixed.cfg" >/dev/null 2>&1 &
    pid=$!
    wait_port
    out=$(h2load -n "$n" -c 10 -m 100 "http://127.0.0.1:$PORT/")
    grep -q "status codes: $n 2xx" <<<"$out" || {
        echo "h2_callgrind.sh: not every request answered 2xx:" >&2
        echo "$out" >&2
        kill -TERM "$pid"
        exit 1
    }
    kill -TERM "$pid"
    wait "$pid" || true
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$log"
}

i1=$(measure "$N")
i2=$(measure $((2 * N)))
python3 -c "import sys; i1,i2,n=map(int,sys.argv[1:4]); print(f'fixed-h2c {(i2-i1)/n:12.0f}   (N={n} vs 2N, {sys.argv[4]})')" \
    "$i1" "$i2" "$N" "$EBB"
