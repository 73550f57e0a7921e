"""What the garden scripts share: their work directory, free loopback
ports, and ebb and haproxy started side by side on one configuration."""
import os, random, socket, subprocess, time

WORK = os.path.join("target", "garden")
os.makedirs(WORK, exist_ok=True)


def free_port():
    """A loopback port below the ephemeral range that binds now."""
    for _ in range(200):
        p = random.randrange(20000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port")


def start_pair(ebb, cfg, prefix, eport, hport, oport):
    """Writes `cfg % (port, oport)` for ebb (on eport) and haproxy (on
    hport), starts both, waits until both listen; returns their Popens."""
    procs = []
    for who, argv, port in (("e", [ebb], eport), ("h", ["haproxy", "-db"], hport)):
        path = "%s/%s%s.cfg" % (WORK, prefix, who)
        with open(path, "w") as f:
            f.write(cfg % (port, oport))
        log = open("%s/%s%s.log" % (WORK, prefix, who), "w")
        procs.append(subprocess.Popen(argv + ["-f", path], stdout=subprocess.DEVNULL, stderr=log))
    for p in (eport, hport):
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", p)).close(); break
            except OSError:
                time.sleep(0.05)
    return procs[0], procs[1]
