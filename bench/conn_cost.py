#!/usr/bin/env python3
"""What one new connection costs a server, counted instead of timed.

Timing a connection on a shared 2-core machine is noise; what the server
asks of the kernel and what it executes itself are not. Two workloads:

  http  scenario 3A's: `GET /` with `Connection: close`, fixed 5-byte
        answer (bench/configs/s1-fixed), one connection per request; the
        server closes, the client reads to the end and closes.
        Servers: ebb, haproxy, nginx, h2o.
  tcp   bench/tcp.py's session through a one-thread tcp-mode proxy to an
        echo origin: connect, 1 byte there and back, the client closes.
        Servers: ebb, haproxy.
  proxy-ka     the HTTP proxy (one thread, scenario 4's nginx origin
               answering `hello`): `GET /` on one keep-alive client
               connection, the server connection kept (`http-reuse
               always`); the figures are per request.
  proxy-close  the same with a new client connection per request
               (`Connection: close`, 3A's client); the server connection
               is taken from the idle pool (`http-reuse always`).
  proxy-never  a new client connection per request and `http-reuse
               never`: a new server connection per request too.
               Proxy servers: ebb, haproxy (nginx needed as the origin).

Two counts per server and workload:

  strace     system calls per connection, by name: the server (every
             process and thread of it) is started, warmed up with a few
             connections, then traced (`strace -f -c -p ...`) over N
             connections; counts are divided by N.
  callgrind  user-space instructions per connection: the server runs under
             callgrind twice, for N and 2N connections; the difference over
             N cancels start-up and shutdown (bench/allocs.sh's method).

A third workload, `startup`, counts what a new worker costs before it
serves (issue 16's reload: the master re-executes the binary, which reads
the configuration and forks a worker): bench/reload.py's configuration
(bench/configs/reload), ebb and haproxy; callgrind's instructions for the
configuration check alone (`-c`) and for a start that serves one
connection and stops, and the check's system calls.

`--trace` prints the full system-call sequence of one connection instead
(after the same warm-up), for reading what a server does and in what order.

  bench/conn_cost.py                          # everything, N=1000 / 500
  bench/conn_cost.py --workloads http --servers ebb,haproxy --tools strace
  bench/conn_cost.py --trace --workloads tcp --servers ebb
  bench/conn_cost.py --ebb target/debug/ebb
  PORT=19341 bench/conn_cost.py ...   # ports PORT..PORT+18 only, in turn
  bench/conn_cost.py --tools callgrind --rounds 3   # median and spread

Needs strace, valgrind, and the peers (Debian's haproxy, nginx, h2o);
servers missing from PATH are skipped. Builds nothing: ebb is
target/release/ebb unless --ebb says otherwise. Every process it starts is
stopped by its pid at the end.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import tcp as tcpbench  # noqa: E402  (bench/tcp.py: its origin, sessions and ports)


def free_port():
    """A port to listen on: with PORT set, the next of PORT..PORT+SPAN-1
    in turn (SPAN: PORT_SPAN, 19), else one the kernel picks."""
    base = os.environ.get("PORT")
    if not base:
        return tcpbench.free_port()
    span = int(os.environ.get("PORT_SPAN", "19"))
    free_port.next = (getattr(free_port, "next", -1) + 1) % span
    return int(base) + free_port.next


PROXY = {"proxy-ka": "always", "proxy-close": "always", "proxy-never": "never"}
CONFIGS = BENCH / "configs"
HTTP_REQ = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"


def wait_port(port, proc, limit=60.0):
    """Whether `proc` listens on `port` within `limit` seconds (valgrind
    starts slowly)."""
    return proc.poll() is None and tcpbench.wait_port(port, limit)


def http_conn(port):
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(HTTP_REQ)
    got = b"".join(iter(lambda: c.recv(4096), b""))
    c.close()
    return got.startswith(b"HTTP/1.1 200") and got.endswith(b"hello")


def keepalive_reqs(port, n):
    """n requests one after the other on one keep-alive connection."""
    c = socket.create_connection(("127.0.0.1", port))
    req = HTTP_REQ.replace(b"Connection: close", b"Connection: keep-alive")
    ok = True
    for _ in range(n):
        c.sendall(req)
        got = b""
        while not got.endswith(b"\r\n\r\nhello"):
            b = c.recv(4096)
            if not b:
                ok = False
                break
            got += b
        ok = ok and got.startswith(b"HTTP/1.1 200")
    c.close()
    return ok


def run_conns(workload, port, n):
    """n connections one after the other (tcp: bench/tcp.py's sessions;
    proxy-ka: n requests on one connection)."""
    if workload == "tcp":
        ok = tcpbench.conns(port, n)
    elif workload == "proxy-ka":
        ok = keepalive_reqs(port, n)
    else:
        ok = all(http_conn(port) for _ in range(n))
    if not ok:
        sys.exit(f"conn_cost: a {workload} connection got a wrong answer")


class Runner:
    def __init__(self, args, tmp):
        self.a, self.tmp = args, Path(tmp)
        self.procs = []
        self.origin_port = None
        (self.tmp / "hello.txt").write_bytes(b"hello")

    def http_origin(self):
        """Scenario 4's nginx origin (`hello`), one for the whole run."""
        if self.origin_port is None:
            port = free_port()
            values = {"PORT": port, "MAXCONN": 4096, "NOFILE": 65536, "RUNDIR": self.tmp}
            cfg = self.render("s4-proxy/origin-nginx.conf", values, self.tmp / "origin-nginx.conf")
            p = self.spawn(["nginx", "-p", str(self.tmp), "-e", str(self.tmp / "origin.err"),
                            "-c", str(cfg)])
            if not wait_port(port, p):
                raise RuntimeError(f"the nginx origin did not listen on {port}")
            self.origin_port = port
        return self.origin_port

    def spawn(self, argv, **kw):
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop_all(self):
        for p in self.procs:
            self.stop(p)

    def render(self, template, values, out):
        text = (CONFIGS / template).read_text()
        for k, v in values.items():
            text = text.replace(f"@{k}@", str(v))
        left = re.findall(r"@[A-Z_]+@", text)
        if left:
            raise RuntimeError(f"{template}: unfilled {sorted(set(left))}")
        out.write_text(text)
        return out

    def server_argv(self, name, workload, port, origin_port, valgrind):
        """The command line for `name` (one worker, one thread)."""
        if workload == "tcp":
            cfg = self.tmp / f"tcp-{name}.cfg"
            cfg.write_text("global\n    nbthread 1\n"
                           "defaults\n    mode tcp\n    timeout client 60s\n    timeout server 60s\n"
                           "    timeout connect 5s\n"
                           f"listen relay\n    bind 127.0.0.1:{port}\n"
                           f"    server origin 127.0.0.1:{origin_port}\n")
        elif workload in PROXY:
            cfg = self.tmp / f"{workload}-{name}.cfg"
            cfg.write_text("global\n    nbthread 1\n    maxconn 4096\n"
                           "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n"
                           "    timeout server 30s\n    timeout http-keep-alive 60s\n"
                           f"    http-reuse {PROXY[workload]}\n"
                           f"frontend fe\n    bind 127.0.0.1:{port}\n    default_backend origin\n"
                           f"backend origin\n    server o1 127.0.0.1:{origin_port}\n")
        else:
            ext = {"nginx": "conf", "h2o": "conf"}.get(name, "cfg")
            values = {"PORT": port, "THREADS": 1, "WORKERS": 1, "MAXCONN": 4096, "NOFILE": 65536,
                      "RUNDIR": self.tmp, "WWW": self.tmp}
            cfg = self.render(f"s1-fixed/{name}.{ext}", values, self.tmp / f"http-{name}.{ext}")
            if name == "nginx" and valgrind:
                # One process, so valgrind sees the worker's instructions.
                cfg.write_text(cfg.read_text().replace("master_process on;", "master_process off;"))
        return {
            "ebb": [self.a.ebb, "-f", str(cfg)],
            "haproxy": ["haproxy", "-db", "-f", str(cfg)],
            "nginx": ["nginx", "-p", str(self.tmp), "-e", str(self.tmp / "nginx.err"), "-c", str(cfg)],
            "h2o": ["h2o", "-m", "worker", "-c", str(cfg)],
        }[name]

    def start(self, name, workload, valgrind=None):
        port = free_port()
        origin_port = None
        if workload == "tcp":
            origin_port = free_port()
            self.spawn([sys.executable, "-c",
                        f"import sys; sys.path.insert(0, {str(BENCH)!r}); "
                        f"import tcp; tcp.origin({origin_port})"])
        elif workload in PROXY:
            origin_port = self.http_origin()
        argv = self.server_argv(name, workload, port, origin_port, valgrind)
        if valgrind:
            argv = ["valgrind", *valgrind, *argv]
        p = self.spawn(argv)
        if not wait_port(port, p):
            raise RuntimeError(f"{name} did not listen on {port}")
        return p, port


def descendants(pid):
    """pid and every process below it (nginx's worker, ...)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for t in os.listdir(f"/proc/{p}/task"):
            try:
                kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
            except OSError:
                kids = []
            todo.extend(int(k) for k in kids)
    return out


def tasks(pid):
    tids = []
    for p in descendants(pid):
        tids.extend(int(t) for t in os.listdir(f"/proc/{p}/task"))
    return tids


def traced(tid):
    try:
        for line in Path(f"/proc/{tid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                return int(line.split()[1]) != 0
    except OSError:
        return True  # gone: nothing to wait for
    return False


def strace_over(runner, p, port, workload, n, summary):
    run_conns(workload, port, 20)  # warm-up: pools, caches, lazy set-up
    out = runner.tmp / "strace.out"
    tids = tasks(p.pid)
    argv = ["strace", "-f", "-qq", "-o", str(out)]
    argv += ["-c", "-U", "calls,errors,name"] if summary else ["-e", "trace=all"]
    for t in tids:
        argv += ["-p", str(t)]
    st = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 30
    while not all(traced(t) for t in tids):
        if time.monotonic() > end or st.poll() is not None:
            raise RuntimeError("strace did not attach")
        time.sleep(0.05)
    run_conns(workload, port, n)
    time.sleep(0.5)  # let the last close reach the server's loop
    st.send_signal(signal.SIGINT)
    st.wait(timeout=60)
    text = out.read_text()
    if not summary:
        return text
    calls, errors = Counter(), Counter()
    for line in text.splitlines():
        f = line.split()
        if f and f[-1] == "total":
            continue
        if len(f) == 3 and f[0].isdigit() and f[1].isdigit():
            calls[f[2]] += int(f[0])
            errors[f[2]] += int(f[1])
        elif len(f) == 2 and f[0].isdigit() and f[1] != "total":
            calls[f[1]] += int(f[0])
    return calls, errors


def callgrind_total(runner, name, workload, n):
    log = runner.tmp / f"cg-{name}-{workload}-{n}.log"
    p, port = runner.start(name, workload, ["--tool=callgrind", "--callgrind-out-file=/dev/null",
                                            f"--log-file={log}"])
    run_conns(workload, port, n)
    runner.stop(p, signal.SIGINT if name == "h2o" else signal.SIGTERM)
    m = re.search(r"Collected : *(\d+)", log.read_text())
    if not m:
        raise RuntimeError(f"callgrind gave no total for {name} (see {log})")
    return int(m.group(1))


SERVERS = {"http": ["ebb", "haproxy", "nginx", "h2o"], "tcp": ["ebb", "haproxy"],
           "startup": ["ebb", "haproxy"], **{w: ["ebb", "haproxy"] for w in PROXY}}


def startup(r, name):
    """Instructions of `-c` and of start, one connection, stop; system
    calls of `-c`. Prints one line."""
    port = free_port()
    values = {"THREADS": 1, "MAXCONN": 4096, "HARD_STOP": "10s", "PORT": port, "ORIGIN_PORT": free_port()}
    cfg = r.render(f"reload/{name}.cfg", values, r.tmp / f"startup-{name}.cfg")
    binary = r.a.ebb if name == "ebb" else "haproxy"
    check = [binary, "-c", "-f", str(cfg)]
    log = r.tmp / f"startup-{name}-c.log"
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={log}",
                    *check], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    i_check = int(re.search(r"Collected : *(\d+)", log.read_text()).group(1))
    out = r.tmp / "startup-strace.out"
    subprocess.run(["strace", "-f", "-qq", "-c", "-o", str(out), *check],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    m = re.search(r"(\d+)\s+(\d+\s+)?total", out.read_text())
    sys_check = int(m.group(1)) if m else -1
    log = r.tmp / f"startup-{name}-run.log"
    argv = [binary, "-f", str(cfg)] if name == "ebb" else [binary, "-db", "-f", str(cfg)]
    p = r.spawn(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--log-file={log}", *argv])
    if not wait_port(port, p):
        raise RuntimeError(f"{name} did not listen on {port}")
    r.stop(p)
    i_run = int(re.search(r"Collected : *(\d+)", log.read_text()).group(1))
    print(f"start {name:8} config check (-c): {i_check:,} instructions, {sys_check} system calls; "
          f"start, serve one connection, stop: {i_run:,} instructions", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--ebb", default=str(BENCH.parent / "target/release/ebb"))
    ap.add_argument("--servers", default="ebb,haproxy,nginx,h2o")
    ap.add_argument("--workloads", default="http,tcp,proxy-ka,proxy-close,proxy-never,startup")
    ap.add_argument("--tools", default="strace,callgrind")
    ap.add_argument("--n", type=int, default=1000, help="connections traced by strace (1000)")
    ap.add_argument("--cg-n", type=int, default=500, help="N for callgrind's N vs 2N (500)")
    ap.add_argument("--rounds", type=int, default=1, help="callgrind rounds: median and spread (1)")
    ap.add_argument("--trace", action="store_true", help="print one connection's system calls")
    a = ap.parse_args()
    want = a.servers.split(",")
    tools = a.tools.split(",")
    for t in ["strace"] + (["valgrind"] if "callgrind" in tools and not a.trace else []):
        if not shutil.which(t):
            sys.exit(f"conn_cost: needs {t}")
    with tempfile.TemporaryDirectory(prefix="ebb-conncost.") as tmp:
        r = Runner(a, tmp)
        try:
            for w in a.workloads.split(","):
                for name in [s for s in SERVERS[w] if s in want]:
                    if name != "ebb" and not shutil.which(name):
                        print(f"{w:11} {name:8} skipped: not installed")
                        continue
                    if w == "startup":
                        if not a.trace:
                            startup(r, name)
                        continue
                    unit = "req " if w == "proxy-ka" else "conn"
                    if w in PROXY and not shutil.which("nginx"):
                        print(f"{w:11} {name:8} skipped: nginx (the origin) not installed")
                        continue
                    if a.trace:
                        p, port = r.start(name, w)
                        print(f"==== {w} {name}: one connection")
                        print(strace_over(r, p, port, w, 1, False), end="")
                        r.stop(p)
                        continue
                    if "strace" in tools:
                        p, port = r.start(name, w)
                        calls, errors = strace_over(r, p, port, w, a.n, True)
                        r.stop(p)
                        total = sum(calls.values())
                        detail = ", ".join(
                            f"{k} {v / a.n:.2f}" + (f" ({errors[k] / a.n:.2f} failed)" if errors[k] else "")
                            for k, v in calls.most_common() if v / a.n >= 0.005)
                        print(f"{w:11} {name:8} syscalls/{unit} {total / a.n:6.2f}: {detail}", flush=True)
                    if "callgrind" in tools:
                        # A server's loop turns follow the peers' timing, so
                        # its count moves between runs: --rounds gives the
                        # median and the spread.
                        per = sorted((callgrind_total(r, name, w, 2 * a.cg_n)
                                      - callgrind_total(r, name, w, a.cg_n)) / a.cg_n
                                     for _ in range(a.rounds))
                        spread = f" ({per[0]:.0f}-{per[-1]:.0f})" if len(per) > 1 else ""
                        print(f"{w:11} {name:8} instructions/{unit} {per[len(per) // 2]:8.0f}{spread}"
                              f"  (callgrind, N={a.cg_n} vs 2N, {a.rounds} round(s))", flush=True)
        finally:
            r.stop_all()


if __name__ == "__main__":
    main()
