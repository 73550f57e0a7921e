#!/usr/bin/env bash
# h2spec (RFC 7540/9113 and RFC 7541 conformance, the Go tool) against
# ebb itself (`bind ... proto h2`), ebb's HTTP/2 core served by the
# h2_driver example, or HAProxy 2.6 (`bind ... proto h2`) for the
# side-by-side figure in the README.
#
#   tests/h2/h2spec.sh            h2_driver; fails unless every case passes
#   tests/h2/h2spec.sh ebb        the ebb binary (target/debug/ebb, or $EBB):
#                                 cleartext (proto h2), then TLS (ALPN h2);
#                                 fails unless every case passes on both
#   tests/h2/h2spec.sh haproxy    HAProxy 2.6; prints its figure, fails only
#                                 when h2spec could not run
#   tests/h2/h2spec.sh HOST:PORT  a server already running (fails on any
#                                 failed case)
#
# Prints h2spec's failures and its summary line, then `h2spec TARGET:
# N passed, N failed of N`. Needs h2spec on PATH or in ~/go/bin (`make
# h2spec-deps` installs it), and haproxy for the second form.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export PATH="$PATH:${GOPATH:-$HOME/go}/bin"
command -v h2spec > /dev/null || { echo "h2spec missing (make h2spec-deps)"; exit 2; }
what=${1:-driver}
work=$(mktemp -d /tmp/ebb-h2spec.XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
    rm -rf "$work"
}
trap cleanup EXIT
# A free port below the ephemeral range, so no other process's bind(:0) can
# be handed it between this probe and the server's own bind.
free_port() {
    python3 -c '
import random, socket
for _ in range(1000):
    p = random.randrange(12000, 32000)
    try:
        socket.socket().bind(("127.0.0.1", p))
    except OSError:
        continue
    print(p)
    break'
}
# wait_listen PORT: until something accepts on 127.0.0.1:PORT (or $pid exits).
wait_listen() {
    until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1)).close()" 2> /dev/null; do
        kill -0 "$pid" 2> /dev/null || { cat "$work"/log 2> /dev/null; echo "server did not start"; exit 2; }
        read -r -t 0.2 < /dev/zero 2> /dev/null || true
    done
}
strict=1
path=/
# run_spec LABEL PORT [ARGS...]: one h2spec run against $host:PORT; prints
# its failures and summary; fails when it did not run to the end, or (when
# strict) on any failed case.
run_spec() {
    local label=$1 p=$2 rc summary total passed skipped failed out=$work/out.$2
    shift 2
    h2spec -h "$host" -p "$p" -P "$path" -o 10 "$@" > "$out" 2>&1
    rc=$?
    sed -n '/^Failures:/,$p' "$out" | grep -E '^ *([0-9]|×)' | grep -v ' tests, '
    summary=$(grep -E '^[0-9]+ tests, [0-9]+ passed' "$out" | tail -1)
    if [ -z "$summary" ]; then
        tail -20 "$out"; echo "h2spec $label: did not run to the end (exit $rc)"; return 2
    fi
    read -r total _ passed _ skipped _ failed _ <<< "${summary//,/}"
    echo "h2spec $label: $passed passed, $failed failed, $skipped skipped of $total"
    [ "$strict" = 0 ] || [ "$failed" = 0 ]
}
case $what in
ebb)
    ebb=${EBB:-${CARGO_TARGET_DIR:-$root/target}/debug/ebb}
    [ -n "${EBB:-}" ] || (cd "$root" && cargo build -q -p ebb) || exit 2
    # Three distinct ports (each probe alone could hand out the same one).
    port=$(free_port)
    until tport=$(free_port) && [ "$tport" != "$port" ]; do :; done
    until oport=$(free_port) && [ "$oport" != "$port" ] && [ "$oport" != "$tport" ]; do :; done
    # The answer comes from a server after 300 ms: some cases send
    # HEADERS, then RST_STREAM or more frames, and expect the error for
    # those before any answer (a server may answer first; on a loaded
    # machine a fixed answer sometimes does).
    python3 -c '
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        time.sleep(0.3)
        body = b"answer from the server behind ebb\n"
        self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    do_POST = do_GET
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
' "$oport" 2> /dev/null &
    opid=$!
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/k.pem" -out "$work/c.pem" \
        -days 2 -subj /CN=localhost 2> /dev/null || exit 2
    cat "$work/c.pem" "$work/k.pem" > "$work/crt.pem"
    cat > "$work/ebb.cfg" <<CFG
defaults
    mode http
    timeout client 10s
    timeout server 10s
    timeout connect 5s
frontend h2
    bind 127.0.0.1:$port proto h2
    bind 127.0.0.1:$tport ssl crt $work/crt.pem alpn h2,http/1.1
    default_backend slow
backend slow
    server s 127.0.0.1:$oport
CFG
    "$ebb" -f "$work/ebb.cfg" > "$work/log" 2>&1 &
    pid=$!
    trap 'kill "$opid" 2> /dev/null; cleanup' EXIT
    host=127.0.0.1
    wait_listen "$port"
    wait_listen "$oport"
    # TLS (its own run) beside the cleartext run below: each spends most
    # of its time waiting for the server's 300 ms, so together they take
    # the time of one. Its lines are printed first.
    run_spec "ebb (TLS)" "$tport" -t -k > "$work/tls" 2>&1 &
    tls=$!
    ;;
driver)
    (cd "$root" && cargo build -q -p ebb --example h2_driver) || exit 2
    port=$(free_port)
    "${CARGO_TARGET_DIR:-$root/target}/debug/examples/h2_driver" "127.0.0.1:$port" 2> "$work/log" &
    pid=$!
    host=127.0.0.1
    wait_listen "$port"
    ;;
haproxy)
    command -v haproxy > /dev/null || { echo "haproxy missing"; exit 2; }
    port=$(free_port)
    cat > "$work/haproxy.cfg" <<CFG
global
    log stderr format raw local0 err
defaults
    mode http
    timeout client 10s
    timeout server 10s
    timeout connect 5s
frontend h2
    bind 127.0.0.1:$port proto h2
    http-request return status 200 content-type text/plain string "hello from haproxy"
CFG
    haproxy -db -f "$work/haproxy.cfg" 2> "$work/log" &
    pid=$!
    host=127.0.0.1
    wait_listen "$port"
    strict=0
    ;;
*:*)
    host=${what%:*} port=${what##*:}
    ;;
*)
    sed -n '2,13p' "$0"; exit 2
    ;;
esac
if [ -n "${tls:-}" ]; then
    run_spec "$what" "$port" > "$work/clear" 2>&1
    rc=$?
    wait "$tls"
    tlsrc=$?
    cat "$work/tls" "$work/clear"
    [ "$tlsrc" = 0 ] || exit "$tlsrc"
    exit "$rc"
fi
run_spec "$what" "$port"
