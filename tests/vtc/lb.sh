#!/usr/bin/env bash
# Starts the load balancer under test for one .vtc case, from the case's
# own dynamic addresses. Called by the cases through macros the runner
# defines (see run.sh):
#   ${lb} S1_ADDR [key=value ...]   write the config, exec the server (run it
#                                   as `process p1 "${lb} ${s1_sock}" -start`)
#   ${lbwait}                       wait until it listens on ${lbsock}
# Environment (set by run.sh): LB_TARGET (ebb|haproxy), LB_PORT, LB_BIN,
# LB_DIR (this directory). Keys: bufsize=N, tserver=T.
set -euo pipefail
: "${LB_TARGET:?}" "${LB_PORT:?}" "${LB_BIN:?}" "${LB_DIR:?}"

if [ "${1:-}" = wait ]; then
    # Up to 60 s (a loaded machine); the wait ends when it listens.
    for _ in $(seq 1 3000); do
        if ss -Hltn "sport = :$LB_PORT" | grep -q .; then exit 0; fi
        sleep 0.02
    done
    echo "nothing listens on port $LB_PORT" >&2
    exit 1
fi

s1=$1; shift
bufsize=16384 tserver=2s
for kv in "$@"; do
    case $kv in
        bufsize=*) bufsize=${kv#*=} ;;
        tserver=*) tserver=${kv#*=} ;;
        *) echo "lb.sh: unknown option $kv" >&2; exit 2 ;;
    esac
done
sed -e "s|@LB@|127.0.0.1:$LB_PORT|" -e "s|@S1@|$s1|" \
    -e "s|@BUFSIZE@|$bufsize|" -e "s|@TSERVER@|$tserver|" \
    "$LB_DIR/targets/$LB_TARGET.cfg" > lb.cfg
case $LB_TARGET in
    ebb) exec "$LB_BIN" -f lb.cfg ;;
    haproxy) exec "$LB_BIN" -db -f lb.cfg ;;
esac
