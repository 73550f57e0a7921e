#!/bin/bash
# The fairness result (issue 8): cleartext clients measure their latency
# while handshakers do full TLS handshakes in a loop against the same
# process. Runs, side by side in one go, with the same load:
#   ebb with the heavy flag off, ebb with it on, ebb with it on plus
#   tune.sched.low-latency, and HAProxy (Debian's package).
# Prints one table (Markdown) and, when the CLI socket is available, ebb's
# `show profiling` captured during each ebb run.
#
#   bench/fairness.sh [HANDSHAKERS] [CLIENTS] [SECONDS] [rsa|ec]
set -euo pipefail
HS=${1:-20}
CL=${2:-10}
SECS=${3:-10}
KEY=${4:-rsa}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
(cd "$root/bench/tlsload" && cargo build --release -q)
(cd "$root" && cargo build --release -q -p ebb)
T=$root/bench/tlsload/target/release/tlsload
EBB=$root/target/release/ebb
case $KEY in
  rsa) newkey=(-newkey rsa:2048) ;;
  ec) newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) ;;
  *) echo "key: rsa or ec" >&2; exit 2 ;;
esac
openssl req -x509 "${newkey[@]}" -nodes -keyout "$work/key.pem" -out "$work/crt.pem" \
  -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost 2>/dev/null
cat "$work/crt.pem" "$work/key.pem" > "$work/combined.pem"

frontends() {
  cat <<CFG
defaults
    mode http
    timeout client 10s
    timeout http-keep-alive 10s
frontend tls
    bind 127.0.0.1:18443 ssl crt $work/combined.pem
    http-request return status 200 content-type text/plain string "ok"
frontend plain
    bind 127.0.0.1:18080
    http-request return status 200 content-type text/plain string "hello"
CFG
}

wait_port() {
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/18080) 2>/dev/null && return 0
    sleep 0.1
  done
  echo "server did not start" >&2
  return 1
}

rows=()
profiles=()
run() { # label, then the command starting the server
  local label=$1; shift
  "$@" > "$work/server.log" 2>&1 &
  pid=$!
  wait_port
  local out
  out=$("$T" --tls 127.0.0.1:18443 --plain 127.0.0.1:18080 --handshakers "$HS" \
    --clients "$CL" --duration "$SECS" --warmup 2 2>&1 | grep '^RESULT' || true)
  if [ -S "$work/ebb.sock" ]; then
    profiles+=("### $label" '```' "$("$EBB" cli "$work/ebb.sock" "show profiling" 2>/dev/null | head -20)" '```')
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  rm -f "$work/ebb.sock"
  get() { echo "$out" | tr ' ' '\n' | awk -F= -v k="$1" '$1==k{print $2}'; }
  rows+=("| $label | $(get hs_rate) | $(get req_rate) | $(get avg_us) | $(get p50_us) | $(get p99_us) | $(get p999_us) |")
}

ebb_cfg() { # heavy low-latency
  {
    echo "global"
    echo "    nbthread 2"
    echo "    tune.heavy-tasklets $1"
    echo "    tune.sched.low-latency $2"
    echo "    profiling.tasks on"
    if "$EBB" -c -f /dev/stdin >/dev/null 2>&1 <<<"global
    stats socket $work/probe.sock
frontend f
    mode http
    bind 127.0.0.1:0
    http-request return status 204"; then
      echo "    stats socket $work/ebb.sock level admin"
    fi
    frontends
  } > "$work/ebb-$1-$2.cfg"
  echo "$work/ebb-$1-$2.cfg"
}

{ echo "global"; echo "    nbthread 2"; echo "    maxconn 4000"; frontends; } > "$work/haproxy.cfg"

run "ebb, heavy off" "$EBB" -f "$(ebb_cfg off off)"
run "ebb, heavy on" "$EBB" -f "$(ebb_cfg on off)"
run "ebb, heavy on + low-latency" "$EBB" -f "$(ebb_cfg on on)"
run "HAProxy $(haproxy -v | sed -n '1s/.*version \([^ ]*\).*/\1/p')" haproxy -f "$work/haproxy.cfg" -db

echo "Fairness: $HS handshakers ($KEY) + $CL cleartext keep-alive clients, ${SECS}s, $(date -u +%Y-%m-%d)"
echo
echo "| server | handshakes/s | cleartext req/s | avg µs | p50 µs | p99 µs | p99.9 µs |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
if [ ${#profiles[@]} -gt 0 ]; then
  echo
  printf '%s\n' "${profiles[@]}"
fi
