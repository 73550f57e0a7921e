#!/usr/bin/env bash
# testssl.sh against ebb's own TLS settings (an optional extra, not part of
# `make test`): a bind with `ssl crt` and nothing else, scanned for
# protocols, ciphers, server preferences, defaults, vulnerabilities and
# headers. Fails when testssl rates any finding HIGH or CRITICAL, except the
# certificate's own (`cert_*`: the test's certificate is self-signed, which
# says nothing of ebb's settings).
#
#   tests/tls/testssl.sh [EBB]        (default: target/release/ebb)
#   BIND_OPTS="prefer-client-ciphers" tests/tls/testssl.sh   other settings
#
# Needs testssl.sh (Debian: apt install testssl.sh) and openssl.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ebb=${1:-$root/target/release/ebb}
tssl=$(command -v testssl || command -v testssl.sh) || { echo "testssl.sh missing (apt install testssl.sh)"; exit 2; }
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/k.pem" -out "$work/c.pem" \
    -days 400 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2> /dev/null
cat "$work/c.pem" "$work/k.pem" > "$work/both.pem"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/ebb.cfg" <<CFG
defaults
    mode http
    timeout client 10s
frontend tls
    bind 127.0.0.1:$port ssl crt $work/both.pem alpn h2,http/1.1 ${BIND_OPTS:-}
    http-request return status 200 content-type text/plain string ok
CFG
"$ebb" -f "$work/ebb.cfg" > "$work/ebb.out" 2>&1 &
pid=$!
for _ in $(seq 200); do
    grep -q 'ebb: ready' "$work/ebb.out" 2> /dev/null && break
    kill -0 "$pid" 2> /dev/null || { cat "$work/ebb.out"; exit 1; }
    sleep 0.05
done
"$tssl" --quiet --color 0 --warnings off -p -s -S -P -h -U \
    --jsonfile "$work/scan.json" "127.0.0.1:$port" > "$work/scan.txt" 2>&1
python3 - "$work/scan.json" <<'PY'
import json, sys
bad, cert = [], []
for f in json.load(open(sys.argv[1])):
    if f.get("severity") in ("HIGH", "CRITICAL"):
        (cert if f["id"].startswith("cert_") else bad).append(f)
for f in cert:
    print(f"ignored (the test's certificate): {f['severity']} {f['id']}: {f['finding']}")
for f in bad:
    print(f"FAIL {f['severity']} {f['id']}: {f['finding']}")
print(f"{len(bad)} HIGH or CRITICAL findings on ebb's settings")
sys.exit(1 if bad else 0)
PY
