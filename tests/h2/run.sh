#!/usr/bin/env bash
# The HTTP/2 attack harness (attack.py) against a running server, or
# against ebb's HTTP/2 core served by the h2_driver example (started here).
#
#   tests/h2/run.sh                       build and start h2_driver, attack it
#   tests/h2/run.sh ebb                   start the ebb binary (bind ... proto h2,
#                                         target/debug/ebb or $EBB), attack it
#   tests/h2/run.sh HOST:PORT PID [STALL_MS]   attack a server already running
#                                         (PID: its process, for the RSS check;
#                                         STALL_MS: its stall timeout)
#   H2_ATTACKS=rapid_reset,ping_flood tests/h2/run.sh   some attacks only
#
# Needs python3 (stdlib only). Exits non-zero when an attack is not ended
# as RFC 9113 and ebb's bounds say, or the server's memory grows too much.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
only=()
[ -n "${H2_ATTACKS:-}" ] && only=(--only "$H2_ATTACKS")
if [ $# -ge 2 ]; then
    exec python3 "$here/attack.py" "$1" --pid "$2" --stall-ms "${3:-30000}" "${only[@]}"
fi
# The server's port: below the ephemeral range (see free_port.sh).
. "$here/../free_port.sh"
if [ "${1:-}" = ebb ]; then
    ebb=${EBB:-${CARGO_TARGET_DIR:-$root/target}/debug/ebb}
    [ -n "${EBB:-}" ] || (cd "$root" && cargo build -q -p ebb) || exit 2
    work=$(mktemp -d /tmp/ebb-h2-attack.XXXXXX)
    port=$(free_port)
    # `timeout client` above the core's 30 s stall bound, so a zero-window
    # reader meets the stall reset (CANCEL) first.
    cat > "$work/ebb.cfg" <<CFG
defaults
    mode http
    timeout client 60s
frontend h2
    bind 127.0.0.1:$port proto h2
    http-request return status 200 content-type text/plain string "hello from ebb over h2"
CFG
    "$ebb" -f "$work/ebb.cfg" > "$work/log" 2>&1 &
    pid=$!
    trap 'kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null; rm -rf "$work"' EXIT
    until grep -q "ebb: ready" "$work/log"; do
        kill -0 "$pid" 2> /dev/null || { cat "$work/log"; echo "ebb did not start"; exit 2; }
        read -r -t 0.2 < /dev/zero 2> /dev/null || true
    done
    python3 "$here/attack.py" "127.0.0.1:$port" --pid "$pid" --stall-ms 30000 "${only[@]}"
    rc=$?
    kill -0 "$pid" 2> /dev/null || { cat "$work/log"; echo "ebb died under attack"; exit 1; }
    exit $rc
fi
(cd "$root" && cargo build -q -p ebb --example h2_driver) || exit 2
driver=${CARGO_TARGET_DIR:-$root/target}/debug/examples/h2_driver
port=$(free_port)
stall=2000
log=$(mktemp /tmp/ebb-h2-driver.XXXXXX)
"$driver" "127.0.0.1:$port" "$stall" 2> "$log" &
pid=$!
trap 'kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null; rm -f "$log"' EXIT
# Wait for the driver's "listening" line (or its exit).
while ! grep -q listening "$log"; do
    kill -0 "$pid" 2> /dev/null || { cat "$log"; echo "h2_driver did not start"; exit 2; }
    read -r -t 0.2 < /dev/zero 2> /dev/null || true
done
python3 "$here/attack.py" "127.0.0.1:$port" --pid "$pid" --stall-ms "$stall" "${only[@]}"
