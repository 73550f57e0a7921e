"""What the garden scripts share: their work directory, free loopback
ports, and ebb and haproxy started side by side on one configuration."""
import os, random, socket, subprocess, threading, time

WORK = os.path.join("target", "garden")
os.makedirs(WORK, exist_ok=True)


_GIVEN = set()


def free_port():
    """A loopback port below the ephemeral range that binds now (within
    `GARDEN_PORTS=LO-HI` when set)."""
    lo, hi = map(int, os.environ.get("GARDEN_PORTS", "20000-32000").split("-"))
    for _ in range(200):
        p = random.randrange(lo, hi + 1)
        if p in _GIVEN:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); _GIVEN.add(p); return p
        except OSError:
            s.close()
    raise SystemExit("no free port")


def origin(port, serve):
    """Listens on the loopback `port` in a thread of its own and runs
    `serve(conn)` in a new thread for each connection accepted."""
    def loop():
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port)); s.listen(128)
        while True:
            c, _ = s.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def config(defaults, bind_extra="", server_extra="", bind_opts=""):
    """The configuration every garden script runs ebb and haproxy on: the
    frontend on `%d` (the program's port, with `bind_opts`) and
    `bind_extra` lines after, the backend's one server on `%d` (the
    origin's) with `server_extra` options; `defaults` are the timeouts
    and options of `defaults`."""
    return ("global\n    maxconn 1000\ndefaults\n    mode http\n    timeout connect 2s\n"
            + "".join("    %s\n" % l for l in defaults)
            + "frontend fe\n    bind 127.0.0.1:%d" + bind_opts + "\n" + bind_extra
            + "    default_backend be\nbackend be\n    server o 127.0.0.1:%d" + server_extra + "\n")


def wait_listening(ports):
    """Returns once each loopback port accepts a connection (5 s each at
    most)."""
    for p in ports:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", p)).close(); break
            except OSError:
                time.sleep(0.05)


def start(argv, text, prefix, who):
    """Writes `text` as WORK/PREFIX+WHO.cfg and starts `argv -f` on it,
    its stderr in WORK/PREFIX+WHO.log; returns its Popen."""
    path = "%s/%s%s.cfg" % (WORK, prefix, who)
    with open(path, "w") as f:
        f.write(text)
    log = open("%s/%s%s.log" % (WORK, prefix, who), "w")
    return subprocess.Popen(argv + ["-f", path], stdout=subprocess.DEVNULL, stderr=log)


def start_pair(ebb, cfg, prefix, eport, hport, oport):
    """Writes `cfg % (port, oport)` for ebb (on eport) and haproxy (on
    hport), starts both, waits until both listen; returns their Popens."""
    e = start([ebb], cfg % (eport, oport), prefix, "e")
    h = start(["haproxy", "-db"], cfg % (hport, oport), prefix, "h")
    wait_listening((eport, hport))
    return e, h
