#!/usr/bin/env python3
"""tcp-mode side by side: ebb and HAProxy 2.6 relaying bytes.

Two measurements per proxy, each proxy with one thread pinned to CPU 0
(`taskset`), the client (this process) on CPU 1 and the origin on CPU 2 (or
beside the client on a 2-CPU machine):

  bulk   one session carries SIZE MiB client -> proxy -> sink; figures: MB/s,
         the proxy's CPU time per GiB (user + system, /proc/PID/stat) and
         the whole machine's minus the client's own (/proc/stat: every CPU's
         non-idle time, so the kernel's share of a splice, softirq and the
         origin's count), as bench/run ranks servers.
  conns  COUNT short sessions one after the other (connect, 1 byte there and
         back, close); figures: sessions/s, the proxy's CPU and the
         machine's (minus the client's) per session.

The proxies run side by side: each starts once, and the rounds alternate
them in a rotated order. Foreign CPU (machine minus client, proxy and
origin) says how far to trust a row. The last line gives ebb's efficiency
relative to HAProxy's (the issue's goal: >= 1.2).

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


def start_proxy(name, binary, port, origin_port, cpu, tmp, splice_mode="forced"):
    cfg = os.path.join(tmp, f"{name}.cfg")
    # "ebb+splice", "haproxy+splice": splice(2) through a pipe, to see
    # whether splicing pays on this machine. "forced" (the default):
    # `option splice-request` + `option splice-response`, which splice
    # every read in both proxies; "auto": `option splice-auto`, which
    # HAProxy 2.6 applies only to a stream it has seen fill its buffer
    # fast (CF_STREAMER_FAST): under this Python client it did not splice
    # at all (`strace -c`: recvfrom/sendto only, 2026-12-01).
    splice = ""
    if name.endswith("+splice"):
        splice = ("    option splice-auto\n" if splice_mode == "auto"
                  else "    option splice-request\n    option splice-response\n")
    with open(cfg, "w") as f:
        f.write(
            "global\n    nbthread 1\n"
            "defaults\n    mode tcp\n    timeout client 60s\n    timeout server 60s\n"
            "    timeout connect 5s\n"
            f"listen relay\n    bind 127.0.0.1:{port}\n{splice}"
            f"    server origin 127.0.0.1:{origin_port}\n"
        )
    argv = [binary, "-f", cfg] if name.startswith("ebb") else [binary, "-db", "-f", cfg]
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


def measure(p, origin_pid, fn, *args):
    """Runs `fn`; returns (ok, wall s, proxy CPU s, machine CPU s minus the
    client's, foreign CPU s). The client is this process (its CPU:
    time.process_time, every thread); foreign = machine - client - proxy -
    origin, the load of anything else (it is inside the machine figure)."""
    c0, o0, m0, k0 = cpu_seconds(p.pid), cpu_seconds(origin_pid), machine_busy(), time.process_time()
    t0 = time.monotonic()
    ok = fn(*args)
    wall = time.monotonic() - t0
    proxy = cpu_seconds(p.pid) - c0
    client = time.process_time() - k0
    machine = machine_busy() - m0 - client
    foreign = max(0.0, machine - proxy - (cpu_seconds(origin_pid) - o0))
    return ok, wall, proxy, machine, foreign


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ebb", default=os.path.join(root, "target/release/ebb"))
    ap.add_argument("--haproxy", default=shutil.which("haproxy") or "haproxy")
    ap.add_argument("--size", type=int, default=1024, help="bulk MiB")
    ap.add_argument("--count", type=int, default=5000, help="short sessions")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-splice", action="store_true", help="leave out the +splice rows")
    ap.add_argument("--splice", choices=["forced", "auto"], default="forced",
                    help="the +splice rows' options: splice-request + splice-response (forced) or splice-auto")
    ap.add_argument("--quick", action="store_true", help="64 MiB, 300 sessions, 1 round")
    a = ap.parse_args()
    if a.quick:
        a.size, a.count, a.rounds = 64, 300, 1
    ncpu = os.cpu_count() or 1
    # The proxies on CPU 0; the client (this process) on CPU 1 and the
    # origin on CPU 2 when there is one (else beside the client).
    proxy_cpu = 0
    client_cpus = {1 % ncpu}
    origin_cpus = {2 % ncpu} if ncpu > 2 else client_cpus
    tmp = tempfile.mkdtemp(prefix="ebb-tcpbench-")
    oport = free_port()
    o = Process(target=origin, args=(oport,), daemon=True)
    o.start()
    if hasattr(os, "sched_setaffinity") and ncpu > 1:
        os.sched_setaffinity(o.pid, origin_cpus)
        os.sched_setaffinity(0, client_cpus)
    if not wait_port(oport):
        sys.exit("origin did not start")
    names = [("ebb", a.ebb), ("haproxy", a.haproxy)]
    if not a.no_splice:
        names.append(("ebb+splice", a.ebb))
        names.append(("haproxy+splice", a.haproxy))
    procs, runs, why = {}, {}, {}
    try:
        # Every proxy is started once and idles while the others run; the
        # rounds alternate them (order rotated each round), so a change in
        # the machine's other load hits them alike.
        for name, binary in names:
            if not (os.path.exists(binary) or shutil.which(binary)):
                why[name] = "not available (no binary)"
                continue
            port = free_port()
            p = start_proxy(name, binary, port, oport, proxy_cpu, tmp, a.splice)
            if p is None:
                why[name] = "not available (did not start)"
                continue
            procs[name] = (p, port)
            runs[name] = []
        for rnd in range(a.rounds):
            order = list(procs)
            k = rnd % max(len(order), 1)
            for name in order[k:] + order[:k]:
                if name in why:
                    continue
                p, port = procs[name]
                ok, wall, cpu, box, fb = measure(p, o.pid, bulk, port, a.size)
                ok2, wall2, cpu2, box2, fc = measure(p, o.pid, conns, port, a.count) if ok else (False,) * 5
                if not (ok and ok2):
                    why[name] = "not available (wrong bytes relayed)"
                    continue
                gib = a.size / 1024
                runs[name].append({
                    "mbs": a.size * 1.048576 / wall, "proxy_ms_gib": cpu * 1000 / gib,
                    "machine_ms_gib": box * 1000 / gib,
                    "foreign_bulk": 100 * fb / (wall * ncpu),
                    "sps": a.count / wall2, "proxy_us_sess": cpu2 * 1e6 / a.count,
                    "machine_us_sess": box2 * 1e6 / a.count,
                    "foreign_conns": 100 * fc / (wall2 * ncpu),
                })
    finally:
        for p, _ in procs.values():
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        o.terminate()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"tcp mode, 1 proxy thread on CPU {proxy_cpu}, {a.size} MiB bulk, {a.count} sessions, "
          f"{a.rounds} round(s), medians; +splice rows: "
          f"{'option splice-auto' if a.splice == 'auto' else 'option splice-request + splice-response'}; ebb = {a.ebb}")
    print("Machine CPU = every CPU's non-idle time (/proc/stat) minus the client's own; "
          "it includes the origin's and any foreign load (last columns).")
    print("| proxy | bulk MB/s | proxy CPU ms/GiB | machine CPU ms/GiB | sessions/s "
          "| proxy CPU µs/session | machine CPU µs/session | foreign % (bulk, sessions) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    med = {}
    for name, _ in names:
        if name in why or not runs.get(name):
            print(f"| {name} | {why.get(name, 'not run')} | | | | | | |")
            continue
        m = {k: median([r[k] for r in runs[name]]) for k in runs[name][0]}
        med[name] = m
        print(f"| {name} | {m['mbs']:.0f} | {m['proxy_ms_gib']:.0f} | {m['machine_ms_gib']:.0f} | "
              f"{m['sps']:.0f} | {m['proxy_us_sess']:.0f} | {m['machine_us_sess']:.0f} | "
              f"{m['foreign_bulk']:.0f}, {m['foreign_conns']:.0f} |")
    if "ebb" in med and "haproxy" in med:
        e, h = med["ebb"], med["haproxy"]
        ratio = lambda k: h[k] / e[k] if e[k] else float("nan")
        print(f"\nebb's efficiency relative to HAProxy (HAProxy's CPU / ebb's; the issue's goal is >= 1.2): "
              f"bulk {ratio('machine_ms_gib'):.2f} (machine), {ratio('proxy_ms_gib'):.2f} (proxy); "
              f"sessions {ratio('machine_us_sess'):.2f} (machine), {ratio('proxy_us_sess'):.2f} (proxy)")
    if "ebb+splice" in med and "haproxy+splice" in med:
        e, h = med["ebb+splice"], med["haproxy+splice"]
        print(f"with splice on both: bulk {h['machine_ms_gib'] / e['machine_ms_gib']:.2f} (machine), "
              f"{h['proxy_ms_gib'] / e['proxy_ms_gib']:.2f} (proxy)")
    best = min((n for n in med if n.startswith("haproxy")), key=lambda n: med[n]["machine_ms_gib"], default=None)
    if best and "ebb+splice" in med:
        print(f"ebb with splice against HAProxy's best bulk figure ({best}): "
              f"{med[best]['machine_ms_gib'] / med['ebb+splice']['machine_ms_gib']:.2f} (machine)")


if __name__ == "__main__":
    main()
