# free_port: prints a loopback port nothing listens on, drawn below the
# kernel's ephemeral range (32768 and up): a port released from `:0` could
# be taken by a client socket's connect, or handed to another `:0`
# listener, before the server binds it. Sourced by the suites' scripts.
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 12000))
        ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return; }
    done
    echo 0
}
