#!/usr/bin/env bash
# bench/track_cost.sh: what `http-request track-sc0 src` and a rate rule
# cost per request, counted in instructions (issue 15's scenario c), for
# ebb and for HAProxy, each under callgrind with one thread.
#
# Two configurations answer a fixed 5-byte `http-request return` over one
# keep-alive client connection:
#
#   plain  the answer alone
#   track  the same behind
#              stick-table type ip size 100k expire 30s store http_req_rate(10s)
#              http-request track-sc0 src
#              http-request deny if { sc_http_req_rate(0) gt 1000000 }
#
# Each server and configuration runs twice under callgrind, for N and 2N
# requests (bench/allocs.sh's method: start-up, the first request and
# shutdown cancel out); (2N - N) / N is one request's instructions. The
# rule's overhead is track - plain, for each server.
#
#   bench/track_cost.sh                  # target/release/ebb and haproxy
#   EBB=path/to/ebb N=500 bench/track_cost.sh
#   SERVERS=ebb bench/track_cost.sh      # one server only
#
# Output: one line per server: plain instr/req, track instr/req, overhead.
set -euo pipefail

cd "$(dirname "$0")/.."
EBB=${EBB:-target/release/ebb}
HAPROXY=${HAPROXY:-haproxy}
N=${N:-300}
PORT=${PORT:-18441}
read -r -a SERVERS <<<"${SERVERS:-ebb haproxy}"

for t in valgrind curl; do
    command -v "$t" >/dev/null || { echo "track_cost.sh: needs $t" >&2; exit 2; }
done

work=$(mktemp -d /tmp/ebb-track.XXXXXX)
trap 'rm -rf "$work"' EXIT

# $1: plain or track. The same text serves ebb and HAProxy.
config() {
    printf 'global\n    nbthread 1\ndefaults\n    mode http\n'
    printf '    timeout %s\n' 'connect 5s' 'client 30s' 'server 30s' 'http-keep-alive 60s'
    printf 'frontend fe\n    bind 127.0.0.1:%s\n' "$PORT"
    if [ "$1" = track ]; then
        printf '    stick-table type ip size 100k expire 30s store http_req_rate(10s)\n'
        printf '    http-request track-sc0 src\n'
        printf '    http-request deny if { sc_http_req_rate(0) gt 1000000 }\n'
    fi
    printf '    http-request return status 200 content-type text/plain string "hello"\n'
}

# Sends $1 requests on one keep-alive connection (one curl, which reuses
# its connection from URL to URL) once the listener answers; fails unless
# every answer is a 200.
client() {
    local tries=0 url="http://127.0.0.1:$PORT/"
    until curl -s -o /dev/null "$url"; do
        tries=$((tries + 1))
        [ "$tries" -lt 600 ] || { echo "track_cost.sh: the server did not listen" >&2; exit 1; }
        sleep 0.2
    done
    for _ in $(seq "$1"); do printf 'url = "%s"\noutput = "/dev/null"\n' "$url"; done >"$work/urls"
    curl -s -K "$work/urls" -w '%{http_code}\n' >"$work/codes"
    if grep -qv '^200$' "$work/codes" || [ "$(wc -l <"$work/codes")" -ne "$1" ]; then
        echo "track_cost.sh: an answer was not a 200" >&2
        exit 1
    fi
}

# Instructions for $3 requests: server $1, configuration $2.
measure() {
    local server=$1 cfg=$2 n=$3 log="$work/$1.$2.$3.log" pid argv
    config "$cfg" >"$work/$cfg.cfg"
    if [ "$server" = ebb ]; then
        argv=("$EBB" -f "$work/$cfg.cfg")
    else
        argv=("$HAPROXY" -d -f "$work/$cfg.cfg")
    fi
    valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file="$log" \
        "${argv[@]}" >/dev/null 2>&1 &
    pid=$!
    client "$n"
    kill -TERM "$pid"
    wait "$pid" || true
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$log"
}

per_req() {
    local a b
    a=$(measure "$1" "$2" "$N")
    b=$(measure "$1" "$2" $((2 * N)))
    echo $(((b - a) / N))
}

printf '%-8s %12s %12s %12s   (instructions per request, N=%d vs 2N)\n' \
    server plain track overhead "$N"
for s in "${SERVERS[@]}"; do
    p=$(per_req "$s" plain)
    t=$(per_req "$s" track)
    printf '%-8s %12d %12d %12d\n' "$s" "$p" "$t" $((t - p))
done
