#!/usr/bin/env bash
# bench/tcp_callgrind.sh: user-space instructions per MiB of a tcp-mode
# bulk transfer, counted by callgrind (one proxy thread, no splice), for
# ebb and for HAProxy.
#
# A Python origin (port PORT+1) sends M MiB on each connection and closes;
# a Python client reads two sessions through a `mode tcp` listen section
# (port PORT) to their end. The proxy runs under callgrind twice, for
# M=16 and M=48; instructions per MiB = (run 48 - run 16) / 64 (start-up,
# connects and shutdown cancel out).
#
#   bench/tcp_callgrind.sh                       # target/release/ebb and haproxy
#   SERVERS=ebb PROFILING=auto bench/tcp_callgrind.sh
#
# PROFILING (default off) is `profiling.tasks`: `auto` turns task
# profiling on under valgrind (the loop is slow there), whose clock reads
# are a valgrind artefact.
set -euo pipefail

cd "$(dirname "$0")/.."
EBB=${EBB:-target/release/ebb}
HAPROXY=${HAPROXY:-haproxy}
PORT=${PORT:-18931}
PROFILING=${PROFILING:-off}
read -r -a SERVERS <<<"${SERVERS:-ebb haproxy}"

for t in valgrind python3; do
    command -v "$t" >/dev/null || { echo "tcp_callgrind.sh: needs $t" >&2; exit 2; }
done

work=$(mktemp -d /tmp/ebb-tcpcg.XXXXXX)
origin_pid=
cleanup() {
    [ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/origin.py" <<'EOF'
import socketserver, sys
MIB = b"x" * (1 << 20)
class Send(socketserver.BaseRequestHandler):
    # The first line says how many MiB to send; the close ends them.
    def handle(self):
        m = int(self.request.recv(16).strip() or b"0")
        for _ in range(m):
            self.request.sendall(MIB)
socketserver.TCPServer.allow_reuse_address = True
socketserver.TCPServer(("127.0.0.1", int(sys.argv[1])), Send).serve_forever()
EOF

cat >"$work/client.py" <<'EOF'
import socket, sys, time
port, mib, sessions = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
deadline = time.time() + 120
for _ in range(sessions):
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"%d\n" % mib)
            break
        except OSError:
            if time.time() > deadline:
                sys.exit("tcp_callgrind.sh: the proxy did not listen")
            time.sleep(0.2)
    with s, s.makefile("rb") as f:
        got = len(f.read())
    if got != mib << 20:
        sys.exit("tcp_callgrind.sh: got %d bytes, wanted %d" % (got, mib << 20))
EOF

python3 "$work/origin.py" $((PORT + 1)) &
origin_pid=$!

config() {
    printf 'global\n    nbthread 1\n'
    if [ "$1" = ebb ]; then printf '    profiling.tasks %s\n' "$PROFILING"; fi
    printf 'defaults\n    mode tcp\n'
    printf '    timeout %s\n' 'connect 5s' 'client 60s' 'server 60s'
    printf 'listen l\n    bind 127.0.0.1:%s\n    server s 127.0.0.1:%s\n' "$PORT" $((PORT + 1))
}

# Instructions for two sessions of $2 MiB each through server $1.
measure() {
    local server=$1 m=$2 log="$work/$1.$2.log" pid argv
    config "$server" >"$work/$server.cfg"
    if [ "$server" = ebb ]; then
        argv=("$EBB" -f "$work/$server.cfg")
    else
        argv=("$HAPROXY" -d -f "$work/$server.cfg")
    fi
    local out=/dev/null
    [ -n "${CGOUT:-}" ] && out="$CGOUT/$server.$m.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" --log-file="$log" \
        "${argv[@]}" >/dev/null 2>&1 &
    pid=$!
    python3 "$work/client.py" "$PORT" "$m" 2 || { cat "$log" >&2; exit 1; }
    kill -TERM "$pid"
    wait "$pid" || true
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$log"
}

printf '%-8s %14s %14s %12s\n' server 'run 16' 'run 48' 'instr/MiB'
for s in "${SERVERS[@]}"; do
    a=$(measure "$s" 16)
    b=$(measure "$s" 48)
    printf '%-8s %14d %14d %12d\n' "$s" "$a" "$b" $(((b - a) / 64))
done
