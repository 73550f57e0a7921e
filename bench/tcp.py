#!/usr/bin/env python3
"""tcp-mode side by side: ebb and HAProxy 2.6 relaying bytes.

Two measurements per proxy, each proxy with one thread on one CPU
(`taskset`), the origin and the client on the other CPUs:

  bulk   one session carries SIZE MiB client -> proxy -> sink; figures: MB/s,
         the proxy's CPU time per GiB (user + system, /proc/PID/stat) and
         the whole machine's (/proc/stat: every CPU's non-idle time, so the
         kernel's share of a splice and the client's and origin's count).
  conns  COUNT short sessions one after the other (connect, 1 byte there and
         back, close); figures: sessions/s and the proxy's CPU time per
         session.

CPU per unit of work is the figure that compares proxies on a loaded or
small machine; throughput is bounded by the Python origin and client here.

  bench/tcp.py                 # 1 GiB bulk, 5000 sessions, 3 rounds
  bench/tcp.py --quick         # smoke: 64 MiB, 300 sessions, 1 round
  bench/tcp.py --ebb target/debug/ebb --quick

The proxies listen on 127.0.0.1 ports picked at run time; every process this
script starts is stopped at the end (by its pid). A proxy that does not
start or relays wrong bytes is reported as not available, never as a figure.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing import Process

CLK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    """User + system time of a process and its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def machine_busy():
    """Non-idle CPU seconds of the whole machine since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / CLK


def origin(port):
    """Sink and echo: a connection whose first byte is 'B' is drained and
    answered with its byte count; any other is echoed byte for byte."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(1024)
    while True:
        s, _ = ls.accept()
        first = s.recv(1)
        if first == b"B":
            n = 1
            while True:
                b = s.recv(1 << 20)
                if not b:
                    break
                n += len(b)
            s.sendall(str(n).encode())
        elif first:
            s.sendall(first)
            while True:
                b = s.recv(65536)
                if not b:
                    break
                s.sendall(b)
        s.close()


def wait_port(port, limit=10.0):
    end = time.time() + limit
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def start_proxy(name, binary, port, origin_port, cpu, tmp):
    cfg = os.path.join(tmp, f"{name}.cfg")
    # "haproxy+splice": HAProxy with `option splice-auto` (splice(2) through
    # a pipe), to see whether splicing pays on this machine.
    splice = "    option splice-auto\n" if name.endswith("+splice") else ""
    with open(cfg, "w") as f:
        f.write(
            "global\n    nbthread 1\n"
            "defaults\n    mode tcp\n    timeout client 60s\n    timeout server 60s\n"
            "    timeout connect 5s\n"
            f"listen relay\n    bind 127.0.0.1:{port}\n{splice}"
            f"    server origin 127.0.0.1:{origin_port}\n"
        )
    argv = [binary, "-f", cfg] if name == "ebb" else [binary, "-db", "-f", cfg]
    if shutil.which("taskset"):
        argv = ["taskset", "-c", str(cpu)] + argv
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_port(port):
        p.kill()
        p.wait()
        return None
    # Warm-up session, so the first figure pays no start-up cost.
    socket.create_connection(("127.0.0.1", port)).close()
    return p


def bulk(port, mib):
    c = socket.create_connection(("127.0.0.1", port))
    chunk = b"B" + b"x" * ((1 << 20) - 1)
    rest = b"x" * (1 << 20)
    c.sendall(chunk)
    for _ in range(mib - 1):
        c.sendall(rest)
    c.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = c.recv(64)
        if not b:
            break
        got += b
    c.close()
    return got == str(mib << 20).encode()


def conns(port, count):
    for _ in range(count):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"e")
        if c.recv(1) != b"e":
            return False
        c.close()
    return True


def measure(p, fn, *args):
    c0, m0, t0 = cpu_seconds(p.pid), machine_busy(), time.monotonic()
    ok = fn(*args)
    return ok, time.monotonic() - t0, cpu_seconds(p.pid) - c0, machine_busy() - m0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ebb", default=os.path.join(root, "target/release/ebb"))
    ap.add_argument("--haproxy", default=shutil.which("haproxy") or "haproxy")
    ap.add_argument("--size", type=int, default=1024, help="bulk MiB")
    ap.add_argument("--count", type=int, default=5000, help="short sessions")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="64 MiB, 300 sessions, 1 round")
    a = ap.parse_args()
    if a.quick:
        a.size, a.count, a.rounds = 64, 300, 1
    ncpu = os.cpu_count() or 1
    tmp = tempfile.mkdtemp(prefix="ebb-tcpbench-")
    oport = free_port()
    o = Process(target=origin, args=(oport,), daemon=True)
    o.start()
    if not wait_port(oport):
        sys.exit("origin did not start")
    rows = []
    try:
        for name, binary in (("ebb", a.ebb), ("haproxy", a.haproxy),
                             ("haproxy+splice", a.haproxy)):
            if not (os.path.exists(binary) or shutil.which(binary)):
                rows.append((name, "not available (no binary)"))
                continue
            port = free_port()
            p = start_proxy(name, binary, port, oport, ncpu - 1, tmp)
            if p is None:
                rows.append((name, "not available (did not start)"))
                continue
            try:
                b, c = [], []
                for _ in range(a.rounds):
                    ok, wall, cpu, box = measure(p, bulk, port, a.size)
                    if not ok:
                        b = None
                        break
                    b.append((a.size * 1.048576 / wall, cpu * 1000 * 1024 / a.size,
                              box * 1000 * 1024 / a.size))
                    ok, wall, cpu, _ = measure(p, conns, port, a.count)
                    if not ok:
                        c = None
                        break
                    c.append((a.count / wall, cpu * 1e6 / a.count))
                if b is None or c is None:
                    rows.append((name, "not available (wrong bytes relayed)"))
                    continue
                med = lambda v, i: sorted(x[i] for x in v)[len(v) // 2]
                rows.append((name, f"{med(b, 0):.0f} MB/s | {med(b, 1):.0f} ms/GiB | "
                                   f"{med(b, 2):.0f} ms/GiB | "
                                   f"{med(c, 0):.0f}/s | {med(c, 1):.0f} µs"))
            finally:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    finally:
        o.terminate()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"tcp mode, 1 proxy thread, {a.size} MiB bulk, {a.count} sessions, "
          f"{a.rounds} round(s), medians; ebb = {a.ebb}")
    print("| proxy | bulk | proxy CPU per GiB | machine CPU per GiB | sessions "
          "| proxy CPU per session |")
    print("|---|---|---|---|---|---|")
    for name, text in rows:
        cells = text.split(" | ")
        cells += [""] * (5 - len(cells))
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
