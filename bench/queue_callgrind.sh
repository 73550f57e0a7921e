#!/usr/bin/env bash
# bench/queue_callgrind.sh: instructions per queued proxied request
# (scenario 5A's shape, small: 50 keep-alive clients through a server with
# `maxconn 2`, so nearly every request waits in the backend's queue and is
# handed a slot when one ends; an nginx origin answers 5 bytes).
#
# The proxy runs with one thread under `valgrind --tool=callgrind` twice,
# for N and 2N requests (h2load --h1 -c50 -m1); the difference of the two
# totals divided by N is the steady-state cost of one request. Every
# request must be answered 2xx, else the script fails.
#
#   bench/queue_callgrind.sh                       # ebb, target/release/ebb
#   EBB=path/to/ebb N=2000 bench/queue_callgrind.sh
#   SERVER=haproxy bench/queue_callgrind.sh        # the same under haproxy -db
#
# Output: `queue <server> instr/req`.
set -euo pipefail

cd "$(dirname "$0")/.."
SERVER=${SERVER:-ebb}
EBB=${EBB:-target/release/ebb}
HAPROXY=${HAPROXY:-haproxy}
N=${N:-1000}
PORT=${PORT:-18451}
ORIGIN_PORT=${ORIGIN_PORT:-18452}

for t in valgrind nginx h2load; do
    command -v "$t" >/dev/null || { echo "queue_callgrind.sh: needs $t" >&2; exit 2; }
done
case "$SERVER" in
    ebb) BIN=$EBB; ARGS=() ;;
    haproxy) BIN=$(command -v "$HAPROXY"); ARGS=(-db) ;;
    *) echo "queue_callgrind.sh: SERVER is ebb or haproxy" >&2; exit 2 ;;
esac
[ -x "$BIN" ] || { echo "queue_callgrind.sh: no $BIN" >&2; exit 2; }

work=$(mktemp -d /tmp/ebb-queue.XXXXXX)
origin_pid=
cleanup() {
    [ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/nginx.conf" <<E2
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.err;
events { worker_connections 256; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$ORIGIN_PORT;
        location / { return 200 "hello"; }
    }
}
E2
nginx -c "$work/nginx.conf" -p "$work" &
origin_pid=$!

cat >"$work/q.cfg" <<E2
global
    nbthread 1
    maxconn 1000
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    timeout queue 30s
    timeout http-keep-alive 60s
    http-reuse always
frontend fe
    bind 127.0.0.1:$PORT
    default_backend origin
backend origin
    server o1 127.0.0.1:$ORIGIN_PORT maxconn 2
E2

# Runs the proxy under callgrind for $1 requests; prints its total.
measure() {
    local n=$1 log="$work/cg.$1.log" pid
    valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file="$log" \
        "$BIN" "${ARGS[@]}" -f "$work/q.cfg" >/dev/null 2>&1 &
    pid=$!
    local i
    for i in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
        sleep 0.3
    done
    h2load --h1 -c 50 -m 1 -n "$n" "http://127.0.0.1:$PORT/hello" >"$work/h2load.$n" 2>&1 || true
    kill -TERM "$pid"
    wait "$pid" || true
    grep -q "status codes: $n 2xx" "$work/h2load.$n" ||
        { echo "queue_callgrind.sh: not every request was answered 2xx:" >&2; cat "$work/h2load.$n" >&2; exit 1; }
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$log"
}

i1=$(measure "$N")
i2=$(measure $((2 * N)))
echo "queue $SERVER $(((i2 - i1) / N))"
