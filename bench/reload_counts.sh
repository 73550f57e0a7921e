#!/usr/bin/env bash
# bench/reload_counts.sh: what one master-worker reload costs, in counts that do not
# depend on the machine's other load (bench/reload.py's timings do):
#
#   cost   CPU time, page faults and context switches of the whole process tree
#          (master, its re-executions, every worker) for N reloads without traffic,
#          minus the same run without reloads (`perf stat`, software events), for ebb
#          and HAProxy 2.6. Output: `SERVER cost/reload: X ms CPU, Y faults, Z switches`.
#   gap    R reloads of ebb under bench/reload.py's new-connection load, with the
#          kernel's tracepoints (`perf record -e syscalls:sys_exit_accept4 ...`): per
#          reload, when the master forked the new worker and sent SIGUSR1 to the old
#          one, the old worker's last accept and the new worker's first, from the
#          SIGUSR2. Output: one line per reload and the medians.
#
#   bench/reload_counts.sh cost gap     # both (the default); needs perf and root
#   EBB=path/to/ebb N=10 R=8 bench/reload_counts.sh gap
#
# Server and origin (nginx) on CPU 0, the load client on CPU 1, as bench/reload.py.
set -euo pipefail

cd "$(dirname "$0")/.."
# Defaults: the release build, 10 reloads for `cost`, 8 for `gap`, two ports below the
# ephemeral range.
: "${EBB:=target/release/ebb}" "${N:=10}" "${R:=8}" "${PORT:=18631}" "${ORIGIN_PORT:=18632}"
WHAT=("$@")
[ ${#WHAT[@]} -eq 0 ] && WHAT=(cost gap)

for t in perf nginx haproxy python3 taskset; do
    command -v "$t" >/dev/null || { echo "reload_counts.sh: needs $t" >&2; exit 2; }
done
[ -x "$EBB" ] || { echo "reload_counts.sh: no $EBB (cargo build --release -p ebb)" >&2; exit 2; }
EBB=$(realpath "$EBB")

work=$(mktemp -d /tmp/ebb-reload-counts.XXXXXX)
origin_pid=
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    [ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

render() { # template, output
    sed -e "s/@PORT@/$PORT/; s/@ORIGIN_PORT@/$ORIGIN_PORT/; s/@THREADS@/1/; s/@MAXCONN@/4096/;
            s/@HARD_STOP@/5s/" "$1" >"$2"
}
render bench/configs/reload/ebb.cfg "$work/ebb.cfg"
render bench/configs/reload/haproxy.cfg "$work/haproxy.cfg"
sed -e "s/@PORT@/$ORIGIN_PORT/g; s/@NOFILE@/65536/; s/@MAXCONN@/4096/; s#@RUNDIR@#$work#" \
    bench/configs/s4-proxy/origin-nginx.conf >"$work/origin.conf"
taskset -c 0 nginx -p "$work" -e "$work/origin-error.log" -c "$work/origin.conf" &
origin_pid=$!

wait_port() {
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "reload_counts.sh: nothing listens on port $1" >&2
    exit 1
}
wait_port "$ORIGIN_PORT"

start() { # server (ebb|haproxy), extra command prefix...
    local name=$1
    shift
    if [ "$name" = ebb ]; then
        "$@" taskset -c 0 "$EBB" -W -f "$work/ebb.cfg" >"$work/server.log" 2>&1 &
    else
        "$@" taskset -c 0 haproxy -W -db -f "$work/haproxy.cfg" >"$work/server.log" 2>&1 &
    fi
    server_pid=$!
    wait_port "$PORT"
}

# The master: the child of $server_pid under `perf stat`, else $server_pid itself
# (taskset executes the server in place).
master_of() {
    if [ "$(cat "/proc/$1/comm" 2>/dev/null)" = perf ]; then
        pgrep -P "$1" | head -1
    else
        echo "$1"
    fi
}

stop() {
    kill -INT "$(master_of "$server_pid")" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
}

cost() {
    for name in ebb haproxy; do
        local line=()
        for reloads in 0 "$N"; do
            start "$name" perf stat -x, -e task-clock,page-faults,context-switches -o "$work/stat"
            local m
            m=$(master_of "$server_pid")
            for _ in $(seq 1 "$N"); do
                sleep 0.3
                [ "$reloads" -gt 0 ] && kill -USR2 "$m"
            done
            sleep 0.5
            stop
            line+=("$(awk -F, '/task-clock/ {c=$1} /page-faults/ {f=$1} /context-switches/ {s=$1}
                           END {print c, f, s}' "$work/stat")")
        done
        echo "${line[0]} ${line[1]}" | awk -v n="$N" -v s="$name" \
            '{printf "%s cost/reload: %.2f ms CPU, %.0f faults, %.0f switches\n", s, ($4-$1)/n, ($5-$2)/n, ($6-$3)/n}'
    done
}

gap() {
    start ebb
    local m
    m=$(master_of "$server_pid")
    taskset -c 1 python3 bench/reload.py --client "$PORT" 20 $((R + 3)) newconn >/dev/null &
    local client=$!
    sleep 1
    perf record -q -a -o "$work/gap.data" -e syscalls:sys_exit_accept4 -e sched:sched_process_fork \
        -e signal:signal_generate -- sleep $((R + 1)) >/dev/null 2>&1 &
    local rec=$!
    sleep 0.5
    for _ in $(seq 1 "$R"); do
        kill -USR2 "$m"
        sleep 1
    done
    wait "$rec"
    wait "$client"
    stop
    perf script -i "$work/gap.data" -F pid,time,event,trace 2>/dev/null >"$work/gap.txt"
    python3 - "$work/gap.txt" "$m" <<'EOF'
import re, statistics, sys
master = int(sys.argv[2])
ev = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*(\d+)\s+([\d.]+):\s+(\S+): (.*)", line)
    if m:
        ev.append((float(m.group(2)), int(m.group(1)), m.group(3), m.group(4)))
ev.sort()
acc = [(t, p) for t, p, n, r in ev if n.endswith("accept4") and not r.strip().startswith("0xfffffff")]
sig = lambda num, t0: [t for t, p, n, r in ev if n.endswith("signal_generate") and f"sig={num} " in r
                       and (num != 12 or f" pid={master} " in r) and (num == 12 or p == master) and t > t0]
rows = []
for s in sig(12, 0):
    forks = [(t, int(re.search(r"child_pid=(\d+)", r).group(1))) for t, p, n, r in ev
             if n.endswith("process_fork") and p == master and t > s]
    usr1 = sig(10, s)
    if not forks or not usr1:
        continue
    fork_t, new = forks[0]
    first = next((t for t, p in acc if p == new), None)
    last = max((t for t, p in acc if p != new and t < (first or 1e18)), default=None)
    if first is None or last is None:
        continue
    ms = lambda t: (t - s) * 1e3
    rows.append((first - last, first - usr1[0]))
    print(f"reload: fork +{ms(fork_t):.1f} ms, SIGUSR1 +{ms(usr1[0]):.1f}, old worker's last accept "
          f"+{ms(last):.1f}, new worker's first +{ms(first):.1f}: gap {(first - last) * 1e3:.2f} ms")
if rows:
    print(f"median gap {statistics.median(r[0] for r in rows) * 1e3:.2f} ms; new worker's first accept "
          f"{statistics.median(r[1] for r in rows) * 1e3:.2f} ms after SIGUSR1 (median, {len(rows)} reloads)")
EOF
}

for w in "${WHAT[@]}"; do
    case "$w" in
    cost) cost ;;
    gap) gap ;;
    *) echo "reload_counts.sh: cost or gap, not $w" >&2; exit 2 ;;
    esac
done
