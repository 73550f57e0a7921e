#!/usr/bin/env bash
# pgo/train.sh: makes pgo/ebb.profdata, the execution profile that
# `cargo build --release` applies (pgo/rustc-wrapper; see pgo/README.md).
#
#   pgo/train.sh            # about 15 minutes: an instrumented build, the
#                           # training runs, the merge; then commit
#                           # pgo/ebb.profdata and pgo/rustc.txt
#   KEEP=1 pgo/train.sh     # keeps the raw profiles (printed path)
#   EBB_GEN=PATH pgo/train.sh   # trains that instrumented binary, no build
#
# (1) An instrumented build (`-Cprofile-generate`) of the crates the
# profile is for (crates/: ebb, sched, ebtree) in target/pgo-gen. (2) That binary under the
# side-by-side benchmark's own loads, every scenario and configuration
# (bench/run: fixed answers, files, proxying with and without keep-alive,
# the server queue, TLS, compression, HTTP/2 over TLS and h2c, stick-table
# tracking, idle connections), short runs, ebb alone; then tcp mode
# (bench/tcp.py --quick) and reloads under load (bench/reload.py --quick),
# and an HTTP/2 client proxied to an HTTP/1.1 server. (3) The raw profiles
# merged by the toolchain's `llvm-profdata` (`rustup component add
# llvm-tools`, done here when missing) into pgo/ebb.profdata, and
# `rustc -vV` into pgo/rustc.txt: the wrapper applies the profile only
# with that rustc.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_INCREMENTAL=0
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata
if [ ! -x "$profdata" ]; then
    rustup component add llvm-tools
fi
for tool in h2load wrk nginx haproxy; do
    command -v "$tool" >/dev/null || { echo "pgo/train.sh: needs $tool (make deps)" >&2; exit 2; }
done

work=$(mktemp -d /tmp/ebb-pgo.XXXXXX)
if [ -n "${KEEP:-}" ]; then echo "pgo/train.sh: raw profiles in $work/raw"; else trap 'rm -rf "$work"' EXIT; fi
mkdir -p "$work/raw" "$work/www"

# The workspace's crates instrumented (pgo/rustc-wrapper with
# EBB_PGO_GEN; the directory is only a default, LLVM_PROFILE_FILE below
# names the files), the dependencies as in a plain release build, taken
# from target/release when it is there (nothing to recompile).
gen=$root/target/pgo-gen
if [ -z "${EBB_GEN:-}" ]; then
    rel=${CARGO_TARGET_DIR:-$root/target}/release
    if [ ! -d "$gen/release" ] && [ -d "$rel" ]; then
        mkdir -p "$gen"
        cp -a "$rel" "$gen/"
    fi
    rm -rf "$gen"/release/.fingerprint/{ebb,sched,ebtree}-*
    EBB_PGO_GEN=$gen/raw CARGO_TARGET_DIR=$gen cargo build --release -p ebb --bin ebb
fi
ebb=${EBB_GEN:-$gen/release/ebb}
# Every process the instrumented binary becomes writes its own file.
export LLVM_PROFILE_FILE="$work/raw/ebb-%p-%m.profraw"

# (2) The benchmark's loads, ebb alone, one short round of each.
python3 bench/run --servers ebb --ebb "$ebb" --no-install --no-build --rounds 1 --duration 2 \
    --warmup 1 --max-repeats 0 --h2-paths 4 --out "$work/bench"
python3 bench/tcp.py --ebb "$ebb" --quick >"$work/tcp.txt"
python3 bench/reload.py --ebb "$ebb" --quick --servers ebb --out "$work/reload"

# HTTP/2 (h2c and TLS) and HTTP/1.1 clients proxied to an HTTP/1.1
# server (a second instrumented ebb with a fixed answer and a file).
read -r oport h2port h1port tlsport < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
head -c 4096 /dev/urandom >"$work/www/4k.bin"
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 2 \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
cat "$work/cert.pem" "$work/key.pem" >"$work/site.pem"
cat >"$work/origin.cfg" <<CFG
global
    nbthread 1
defaults
    mode http
    timeout client 30s
    timeout server 30s
    timeout connect 5s
listen origin
    bind 127.0.0.1:$oport
    http-request return status 200 content-type text/plain string "hello" unless { path_end .bin }
    serve-files $work/www
CFG
cat >"$work/proxy.cfg" <<CFG
global
    nbthread 2
defaults
    mode http
    timeout client 30s
    timeout server 30s
    timeout connect 5s
    option httplog
frontend fe
    bind 127.0.0.1:$h2port proto h2
    bind 127.0.0.1:$h1port
    bind 127.0.0.1:$tlsport ssl crt $work/site.pem alpn h2,http/1.1
    http-request set-header x-forwarded-proto https if { ssl_fc }
    http-response set-header x-served-by ebb
    default_backend be
backend be
    http-reuse always
    server o1 127.0.0.1:$oport
CFG
"$ebb" -f "$work/origin.cfg" >>"$work/ebb.log" 2>&1 &
opid=$!
"$ebb" -f "$work/proxy.cfg" >>"$work/ebb.log" 2>&1 &
ppid=$!
up() { for _ in $(seq 300); do (: </dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.2; done; return 1; }
up "$oport"
up "$tlsport"
for path in / /4k.bin; do
    h2load -n 20000 -c10 -m20 "http://127.0.0.1:$h2port$path" | grep 'status codes'
    h2load -n 20000 -c10 -m20 "https://127.0.0.1:$tlsport$path" | grep 'status codes'
    h2load --h1 -n 20000 -c20 "http://127.0.0.1:$h1port$path" | grep 'status codes'
done
kill -TERM "$ppid" "$opid"
wait "$ppid" "$opid" || true

count=$(find "$work/raw" -name '*.profraw' | wc -l)
[ "$count" -gt 0 ] || { echo "pgo/train.sh: no raw profile written" >&2; exit 1; }
"$profdata" merge -o "$root/pgo/ebb.profdata" "$work"/raw/*.profraw
rustc -vV >"$root/pgo/rustc.txt"
echo "pgo/train.sh: pgo/ebb.profdata from $count raw profiles ($(du -h "$root/pgo/ebb.profdata" | cut -f1))"
