#!/usr/bin/env bash
# bench/pgo.sh: builds ebb with profile-guided optimization, for a
# timed comparison with the plain release build (not part of `make`).
#
# Why: under `bench/h2_callgrind.sh CACHE=1` the code one HTTP/2 stream
# runs does not fit the L1 instruction cache (ebb's fixed answer touches
# about 600 distinct 64-byte lines of code per stream, h2o's about 370;
# 32 KiB hold 512), so nearly every line misses again on every stream.
# Most of it is layout, not size: the hot instructions sit in short runs
# between blocks that do not run (error and rare paths laid out in source
# order), so a line holds about 9 hot instructions. A profile tells LLVM
# which blocks run, and it packs them.
#
# Steps: (1) an instrumented build (`-Cprofile-generate`) in
# target/pgo-gen; (2) that binary under training loads: h2load over h2c
# (`-c10 -m100`, four targets as `--h2-paths 4`) and over HTTP/1.1
# (`--h1 -c64`), each on the fixed answer and on a 100-byte file (one
# thread, the configuration of bench/h2_callgrind.sh); (3) the profiles
# merged with the toolchain's `llvm-profdata` (`rustup component add
# llvm-tools`); (4) the optimized build (`-Cprofile-use`) in target/pgo:
# target/pgo/release/ebb. Only the crates ebb and sched get the profile
# flags (this script is also their RUSTC_WRAPPER): the other crates are
# target/release's, copied, so each build recompiles only those two. The
# training covers only these paths: the proxy, TLS and the rest run code
# the profile calls cold.
#
#   bench/pgo.sh                    # then EBB=target/pgo/release/ebb ...
#   N=200000 PORT=18451 bench/pgo.sh
set -euo pipefail

# As RUSTC_WRAPPER: the profile flags for ebb and sched only.
if [ -n "${EBB_PGO_FLAG:-}" ]; then
    rustc=$1
    shift
    case " $* " in
    *" --crate-name ebb "* | *" --crate-name sched "*) exec "$rustc" "$@" "$EBB_PGO_FLAG" ;;
    *) exec "$rustc" "$@" ;;
    esac
fi

cd "$(dirname "$0")/.."
N=${N:-50000}
PORT=${PORT:-18451}
root=$PWD
profdata=$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata
[ -x "$profdata" ] || { echo "pgo.sh: no $profdata (rustup component add llvm-tools)" >&2; exit 2; }
command -v h2load >/dev/null || { echo "pgo.sh: needs h2load" >&2; exit 2; }

work=$(mktemp -d /tmp/ebb-pgo.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir "$work/www" "$work/raw"
printf hello >"$work/www/hello.txt"
python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 7 + 3) % 251 for i in range(100)))' >"$work/www/100b"
# One thread; both cases on each bind: `/100b` the file, any other path
# the fixed answer.
cat >"$work/ebb.cfg" <<EOF
global
    nbthread 1
listen train
    mode http
    timeout client 60s
    timeout server 60s
    timeout connect 5s
    bind 127.0.0.1:$PORT proto h2
    bind 127.0.0.1:$((PORT + 1))
    http-request return status 200 content-type text/plain string "hello" unless { path /100b }
    serve-files $work/www
EOF

export CARGO_INCREMENTAL=0
cargo build --release -p ebb
# target/release's build in target/$1, but ebb and sched, built there
# with the profile flag $2.
build() {
    rm -rf "$root/target/$1"
    mkdir -p "$root/target/$1"
    cp -a "$root/target/release" "$root/target/$1/"
    rm -rf "$root/target/$1"/release/.fingerprint/{ebb,sched}-*
    CARGO_TARGET_DIR=$root/target/$1 RUSTC_WRAPPER=$root/bench/pgo.sh EBB_PGO_FLAG=$2 \
        cargo build --release -p ebb
}
build pgo-gen "-Cprofile-generate=$work/raw"
LLVM_PROFILE_FILE="$work/raw/ebb-%p-%m.profraw" "$root/target/pgo-gen/release/ebb" -f "$work/ebb.cfg" &
pid=$!
# Up to a minute for the instrumented ebb to listen.
for _ in $(seq 300); do
    (: </dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break
    sleep 0.2
done
for path in / /100b; do
    urls=()
    for i in 0 1 2 3; do urls+=("http://127.0.0.1:$PORT$path?v=$i"); done
    h2load -n "$N" -c10 -m100 "${urls[@]}" | grep "status codes"
    urls=()
    for i in 0 1 2 3; do urls+=("http://127.0.0.1:$((PORT + 1))$path?v=$i"); done
    h2load --h1 -n "$N" -c64 "${urls[@]}" | grep "status codes"
done
kill -TERM "$pid"
wait "$pid" || true
"$profdata" merge -o "$work/ebb.profdata" "$work"/raw/*.profraw
build pgo "-Cprofile-use=$work/ebb.profdata"
echo "pgo.sh: built target/pgo/release/ebb"
