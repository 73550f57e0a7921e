#!/usr/bin/env bash
# bench/allocs.sh: heap allocations and instructions per request on ebb's
# three hot paths, measured under valgrind (this machine has no hardware
# performance counters):
#
#   fixed   `http-request return` (5-byte body)
#   static  a 100-byte file through `serve-files`
#   proxy   a keep-alive proxied request (`http-reuse always`) to an nginx
#           origin answering 5 bytes
#   rr3     the same through `balance roundrobin` over three servers (all
#           on that origin): the cost of a pick among several servers
#           (not run unless named: `bench/allocs.sh rr3`)
#
# Each path runs twice, N and 2N requests over one keep-alive client
# connection, once under DHAT (heap blocks allocated) and once under
# callgrind (instructions executed, every thread); the difference divided
# by N is the steady-state cost of one request: start-up, the first
# request and shutdown cancel out.
#
#   bench/allocs.sh                 # builds nothing: uses target/release/ebb
#   EBB=path/to/ebb N=500 bench/allocs.sh
#   bench/allocs.sh proxy           # one path only
#   SERVER=haproxy bench/allocs.sh fixed proxy   # the same under haproxy -db
#                                   # (static: ebb's serve-files only)
#   CG_OUT=DIR bench/allocs.sh proxy  # keep callgrind's files (DIR/PATH.N.out)
#                                   # for bench/cg_diff.py
#
# Output: one line per path, `path allocs/req instr/req`.
set -euo pipefail

cd "$(dirname "$0")/.."
SERVER=${SERVER:-ebb}
EBB=${EBB:-target/release/ebb}
HAPROXY=${HAPROXY:-haproxy}
N=${N:-200}
PORT=${PORT:-18431}
ORIGIN_PORT=${ORIGIN_PORT:-18432}
PATHS=("$@")
[ ${#PATHS[@]} -eq 0 ] && PATHS=(fixed static proxy)

for t in valgrind nginx python3; do
    command -v "$t" >/dev/null || { echo "allocs.sh: needs $t" >&2; exit 2; }
done
case $SERVER in
    ebb)
        [ -x "$EBB" ] || { echo "allocs.sh: no $EBB (cargo build --release -p ebb)" >&2; exit 2; }
        BIN=$EBB; ARGS=() ;;
    haproxy)
        BIN=$(command -v "$HAPROXY") || { echo "allocs.sh: no $HAPROXY" >&2; exit 2; }
        ARGS=(-db) ;;
    *) echo "allocs.sh: SERVER is ebb or haproxy" >&2; exit 2 ;;
esac

work=$(mktemp -d /tmp/ebb-allocs.XXXXXX)
origin_pid=
cleanup() {
    [ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/www"
head -c 100 /dev/zero | tr '\0' 'x' >"$work/www/f100.bin"

cat >"$work/common.cfg" <<EOF
global
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    timeout http-keep-alive 60s
    http-reuse always
EOF
{
    cat "$work/common.cfg"
    printf 'frontend fe\n    bind 127.0.0.1:%s\n' "$PORT"
    printf '    http-request return status 200 content-type text/plain string "hello"\n'
} >"$work/fixed.cfg"
{
    cat "$work/common.cfg"
    printf 'frontend fe\n    bind 127.0.0.1:%s\n    default_backend files\n' "$PORT"
    printf 'backend files\n    serve-files %s\n' "$work/www"
} >"$work/static.cfg"
{
    cat "$work/common.cfg"
    printf 'frontend fe\n    bind 127.0.0.1:%s\n    default_backend origin\n' "$PORT"
    printf 'backend origin\n    server o1 127.0.0.1:%s\n' "$ORIGIN_PORT"
} >"$work/proxy.cfg"
{
    cat "$work/common.cfg"
    printf 'frontend fe\n    bind 127.0.0.1:%s\n    default_backend origin\n' "$PORT"
    printf 'backend origin\n    balance roundrobin\n'
    for s in o1 o2 o3; do printf '    server %s 127.0.0.1:%s\n' "$s" "$ORIGIN_PORT"; done
} >"$work/rr3.cfg"

declare -A URL=([fixed]=/ [static]=/f100.bin [proxy]=/hello [rr3]=/hello)

# The origin: nginx, keep-alive for as many requests as we send.
start_origin() {
    cat >"$work/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx.err;
events { worker_connections 64; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$ORIGIN_PORT;
        location / { return 200 "hello"; }
    }
}
EOF
    nginx -c "$work/nginx.conf" -p "$work" &
    origin_pid=$!
}

# Sends $2 requests for $1 on one keep-alive connection (after waiting for
# the listener); fails unless every answer is a 200.
client() {
    python3 - "$PORT" "$1" "$2" <<'EOF'
import http.client, sys, time
port, url, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
deadline = time.monotonic() + 120
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.connect()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("allocs.sh: ebb did not listen")
        time.sleep(0.2)
for i in range(n):
    c.request("GET", url)
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"allocs.sh: {url}: status {r.status}")
c.close()
EOF
}

# Runs the server under valgrind tool $2 for $3 requests of path $1; prints the
# tool's total (blocks for dhat, instructions for callgrind).
measure() {
    local path=$1 tool=$2 n=$3 log="$work/$1.$2.$3.log" pid
    local extra=(--dhat-out-file=/dev/null)
    if [ "$tool" = callgrind ]; then
        extra=(--callgrind-out-file="${CG_OUT:-/dev/null}${CG_OUT:+/$path.$n.out}")
    fi
    valgrind --tool="$tool" "${extra[@]}" --log-file="$log" \
        "$BIN" "${ARGS[@]}" -f "$work/$path.cfg" >/dev/null 2>&1 &
    pid=$!
    client "${URL[$path]}" "$n"
    kill -TERM "$pid"
    wait "$pid" || true
    if [ "$tool" = dhat ]; then
        sed -n 's/.*Total: *[0-9,]* bytes in \([0-9,]*\) blocks.*/\1/p' "$log" | tr -d ,
    else
        sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$log"
    fi
}

start_origin
printf '%-8s %12s %12s   (N=%d vs 2N, %s)\n' path allocs/req instr/req "$N" "$BIN"
for p in "${PATHS[@]}"; do
    [ -n "${URL[$p]:-}" ] || { echo "allocs.sh: unknown path '$p'" >&2; exit 2; }
    if [ "$SERVER" = haproxy ] && [ "$p" = static ]; then
        echo "allocs.sh: haproxy serves no files (static is ebb's only)" >&2; continue
    fi
    a1=$(measure "$p" dhat "$N")
    a2=$(measure "$p" dhat $((2 * N)))
    i1=$(measure "$p" callgrind "$N")
    i2=$(measure "$p" callgrind $((2 * N)))
    python3 -c "import sys; a1,a2,i1,i2,n=map(int,sys.argv[1:6]); print(f'{sys.argv[6]:<8} {(a2-a1)/n:12.2f} {(i2-i1)/n:12.0f}')" \
        "$a1" "$a2" "$i1" "$i2" "$N" "$p"
done
