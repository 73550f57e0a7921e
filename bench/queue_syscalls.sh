#!/usr/bin/env bash
# bench/queue_syscalls.sh: system calls and context switches per queued
# proxied request, scenario 5A's shape (bench/run's config A): the proxy
# (one thread) and an nginx origin pinned to CPU 0, h2load --h1 with 500
# keep-alive clients pinned to CPU 1, one server with `maxconn 8`.
# Counts come from the kernel's tracepoints (`perf stat -e
# syscalls:sys_enter_*`, per process), not from strace (which slows the
# proxy and changes what it batches), and do not depend on load.
#
#   bench/queue_syscalls.sh                       # ebb, target/release/ebb
#   SERVER=haproxy bench/queue_syscalls.sh        # the same under haproxy -db
#   EBB=path/to/ebb N=100000 C=500 MAXCONN=8 bench/queue_syscalls.sh
#
# Output: one line per counter, `<server> <counter> per request`, for the
# proxy and (prefixed origin) for nginx.
set -euo pipefail

cd "$(dirname "$0")/.."
SERVER=${SERVER:-ebb}
EBB=${EBB:-target/release/ebb}
HAPROXY=${HAPROXY:-haproxy}
N=${N:-100000}
C=${C:-500}
MAXCONN=${MAXCONN:-8}
PORT=${PORT:-18471}
ORIGIN_PORT=${ORIGIN_PORT:-18472}

for t in perf nginx h2load taskset; do
    command -v "$t" >/dev/null || { echo "queue_syscalls.sh: needs $t" >&2; exit 2; }
done
case "$SERVER" in
    ebb) BIN=$EBB; ARGS=() ;;
    haproxy) BIN=$(command -v "$HAPROXY"); ARGS=(-db) ;;
    *) echo "queue_syscalls.sh: SERVER is ebb or haproxy" >&2; exit 2 ;;
esac
[ -x "$BIN" ] || { echo "queue_syscalls.sh: no $BIN" >&2; exit 2; }

work=$(mktemp -d /tmp/ebb-qsys.XXXXXX)
origin_pid= server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    [ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/nginx.conf" <<E2
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.err;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000000;
    server {
        listen 127.0.0.1:$ORIGIN_PORT backlog=4096;
        location / { return 200 "hello"; }
    }
}
E2
taskset -c 0 nginx -c "$work/nginx.conf" -p "$work" &
origin_pid=$!

cat >"$work/q.cfg" <<E2
global
    nbthread 1
    maxconn 5000
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
    server o1 127.0.0.1:$ORIGIN_PORT maxconn $MAXCONN
E2
taskset -c 0 "$BIN" "${ARGS[@]}" -f "$work/q.cfg" >"$work/server.log" 2>&1 &
server_pid=$!

url=http://127.0.0.1:$PORT/
for _ in $(seq 100); do
    curl -fso /dev/null "$url" && break
    sleep 0.1
done
worker=$(pgrep -P "$origin_pid" | head -1)
[ -n "$worker" ] || { echo "queue_syscalls.sh: no nginx worker" >&2; exit 1; }
# Warm-up: every client connected once, the server connections open.
taskset -c 1 h2load --h1 -c"$C" -n$((C * 2)) "$url" >/dev/null

events=sched:sched_switch,sched:sched_wakeup
for s in accept4 connect socket close recvfrom sendto writev setsockopt epoll_ctl epoll_wait; do
    events+=,syscalls:sys_enter_$s
done
perf stat -x, -e "$events" -p "$server_pid" -o "$work/server.perf" &
p1=$!
perf stat -x, -e "$events" -p "$worker" -o "$work/origin.perf" &
p2=$!
sleep 1
out=$(taskset -c 1 h2load --h1 -c"$C" -n"$N" "$url")
kill -INT "$p1" "$p2"
wait "$p1" "$p2" 2>/dev/null || true
ok=$(sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' <<<"$out")
[ "$ok" = "$N" ] || { echo "queue_syscalls.sh: $ok of $N answered 2xx" >&2; echo "$out" >&2; exit 1; }
# `perf stat -x,` lines: value,unit,event,...
for f in server origin; do
    awk -F, -v n="$N" -v who="$SERVER" -v f="$f" '$1 ~ /^[0-9]+$/ {
        name = $3; sub(/^syscalls:sys_enter_/, "", name); sub(/^sched:/, "", name)
        printf "%s%s %s %.3f per request\n", (f == "origin" ? "origin " : ""), who, name, $1 / n
    }' "$work/$f.perf"
done
