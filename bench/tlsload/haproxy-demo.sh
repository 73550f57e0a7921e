#!/bin/bash
# Runs tlsload against HAProxy (Debian's package) on loopback: a TLS frontend
# for the handshake loops and a cleartext one for the keep-alive clients,
# both answering with `http-request return`. First a cleartext-only run
# (the baseline), then the same clients beside the handshakers.
#
#   bench/tlsload/haproxy-demo.sh [HANDSHAKERS] [CLIENTS] [SECONDS] [rsa|ec]
#
# Defaults: 20 handshakers, 10 clients, 12 s (2 s warm-up), RSA-2048 key.
# Needs haproxy and openssl; builds tlsload in release mode.
set -euo pipefail
HS=${1:-20}
CL=${2:-10}
SECS=${3:-12}
KEY=${4:-rsa}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
hp=
trap '[ -n "$hp" ] && kill "$hp" 2>/dev/null; rm -rf "$work"' EXIT
(cd "$here" && cargo build --release -q)
T=$here/target/release/tlsload
case $KEY in
  rsa) newkey=(-newkey rsa:2048) ;;
  ec) newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) ;;
  *) echo "key: rsa or ec" >&2; exit 2 ;;
esac
openssl req -x509 "${newkey[@]}" -nodes -keyout "$work/key.pem" -out "$work/crt.pem" \
  -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost 2>/dev/null
cat "$work/crt.pem" "$work/key.pem" > "$work/combined.pem"
cat > "$work/haproxy.cfg" <<CFG
global
    nbthread 2
    maxconn 4000
defaults
    mode http
    timeout client 10s
    timeout connect 5s
    timeout server 10s
    timeout http-keep-alive 10s
frontend tls
    bind 127.0.0.1:18443 ssl crt $work/combined.pem
    http-request return status 200 content-type text/plain string "ok"
frontend plain
    bind 127.0.0.1:18080
    http-request return status 200 content-type text/plain string "hello"
CFG
haproxy -v | sed -n 1p
haproxy -f "$work/haproxy.cfg" -db > "$work/haproxy.log" 2>&1 &
hp=$!
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/18080) 2>/dev/null && break
  sleep 0.1
done
cpu() { awk '{print $14+$15}' "/proc/$hp/stat"; }
echo "== cleartext only: $CL clients, $SECS s"
"$T" --plain 127.0.0.1:18080 --clients "$CL" --duration "$SECS" --warmup 2
echo "== $HS handshakers ($KEY key) + $CL cleartext clients, $SECS s"
c0=$(cpu)
"$T" --tls 127.0.0.1:18443 --plain 127.0.0.1:18080 --handshakers "$HS" --clients "$CL" \
  --duration "$SECS" --warmup 2
c1=$(cpu)
echo "haproxy CPU during the run: $(( (c1 - c0) * 10 )) ms over $SECS s"
