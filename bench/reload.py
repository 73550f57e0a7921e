#!/usr/bin/env python3
"""bench/reload.py: traffic through a reverse proxy whose master reloads every second.

ebb (`ebb -W`) and HAProxy 2.6 (`haproxy -W -db`) proxy to the same nginx origin (the one of
bench/run's scenario 4) while this harness sends SIGUSR2 to the master once a second. A
Python load client (this file with `--client`, a process of its own) counts, second by second,
the answers and every failure: connect errors, read errors (the connection closed or reset
while a request was in flight), write errors, timeouts and non-2xx answers. Two variants:
keep-alive connections, and a new connection per request. Results: bench/results/reload.md
(`--quick`: reload-quick.md). See bench/README.md, "Reload under load".

It reuses bench/run's process handling (process groups, time limits, ports picked at run
time, whole-machine CPU minus the client's).
"""

import argparse
import array
import datetime
import importlib.util
import json
import os
import selectors
import shlex
import signal
import socket
import statistics
import sys
import threading
import time
from importlib.machinery import SourceFileLoader
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

REQ_KEEP = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
REQ_CLOSE = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
REQUEST_TIMEOUT = 10.0
ERROR_KINDS = ("connect", "read", "write", "timeout", "non2xx")


# --------------------------------------------------------------------------- the client

class Slot:
    """One client connection slot: at most one socket, at most one request in flight."""

    __slots__ = ("sock", "buf", "sent", "connecting")

    def __init__(self):
        self.sock, self.buf, self.sent, self.connecting = None, b"", None, False


def parse_answer(buf):
    """(status, bytes of the whole answer, server closes) once `buf` holds a whole answer with
    a Content-Length body (what the origin sends through every proxy), else None."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = buf[:end].decode("latin-1").lower()
    lines = head.split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, close = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if name == "content-length":
            length = int(value)
        elif name == "connection" and "close" in value:
            close = True
    total = end + 4 + length
    return (status, total, close) if len(buf) >= total else None


def client(port, conns, seconds, new_conn):
    """Runs `conns` connection slots for `seconds`; returns the per-second counts and latencies."""
    req = REQ_CLOSE if new_conn else REQ_KEEP
    sel = selectors.DefaultSelector()
    slots = [Slot() for _ in range(conns)]
    n = int(seconds) + 1
    ok = [0] * n
    errs = {k: [0] * n for k in ERROR_KINDS}
    lat = [array.array("f") for _ in range(n)]  # ms
    t0 = time.monotonic()
    t_end = t0 + seconds

    def sec(now):
        return min(int(now - t0), n - 1)

    def drop(s, kind, now):
        if kind:
            errs[kind][sec(now)] += 1
        if s.sock is not None:
            try:
                sel.unregister(s.sock)
            except (KeyError, ValueError):
                pass
            s.sock.close()
        s.sock, s.buf, s.sent, s.connecting = None, b"", None, False

    def send(s, now):
        try:
            s.sock.send(req)
        except OSError:
            drop(s, "write", now)
            return
        s.sent = now
        sel.modify(s.sock, selectors.EVENT_READ, s)

    def open_(s):
        sk = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sk.setblocking(False)
        sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sk.connect_ex(("127.0.0.1", port))
        s.sock, s.buf, s.sent, s.connecting = sk, b"", time.monotonic(), True
        sel.register(sk, selectors.EVENT_WRITE, s)

    last_sweep = t0
    while True:
        now = time.monotonic()
        if now >= t_end:
            break
        for s in slots:
            if s.sock is None:
                open_(s)
        for key, _ev in sel.select(timeout=0.05):
            s = key.data
            now = time.monotonic()
            if s.connecting:
                err = s.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    drop(s, "connect", now)
                    continue
                s.connecting = False
                send(s, now)
                continue
            try:
                chunk = s.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                # Closed with our request in flight: the request is lost.
                drop(s, "read", now)
                continue
            s.buf += chunk
            try:
                got = parse_answer(s.buf)
            except (ValueError, IndexError):
                drop(s, "read", now)
                continue
            if got is None:
                continue
            status, total, close = got
            i = sec(now)
            lat[i].append((now - s.sent) * 1e3)
            if 200 <= status < 300:
                ok[i] += 1
            else:
                errs["non2xx"][i] += 1
            s.buf = s.buf[total:]
            if close or new_conn:
                drop(s, None, now)  # an announced close is no error: reconnect
            else:
                send(s, now)
        if now - last_sweep > 0.5:
            last_sweep = now
            for s in slots:
                if s.sock is not None and s.sent is not None and now - s.sent > REQUEST_TIMEOUT:
                    drop(s, "connect" if s.connecting else "timeout", now)
    # What is still in flight at the end is neither an answer nor an error.
    for s in slots:
        if s.sock is not None:
            s.sock.close()
    return {"seconds": seconds, "ok": ok[:int(seconds)], "errors": {k: v[:int(seconds)] for k, v in errs.items()},
            "lat": [list(a) for a in lat[:int(seconds)]]}


# --------------------------------------------------------------------------- the harness

def load_run():
    """bench/run as a module (its main() runs only as a script)."""
    loader = SourceFileLoader("benchrun", str(BENCH / "run"))
    spec = importlib.util.spec_from_loader("benchrun", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def children_of(ppid):
    out = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[1]) == ppid and fields[0] != "Z":
            out.add(int(d))
    return out


class Reloader(threading.Thread):
    """Sends SIGUSR2 to the master every `every` seconds (from `start_after` on) and notes every
    worker pid it sees (a reload that took effect shows a new worker)."""

    def __init__(self, master, every, start_after):
        super().__init__(daemon=True)
        self.master, self.every, self.start_after = master, every, start_after
        self.stop_ev = threading.Event()
        self.sent = 0
        self.workers = set()
        self.most_live = 0  # the most workers alive at once (old ones still draining + the new one)

    def run(self):
        t0 = time.monotonic()
        next_at = t0 + self.start_after
        while not self.stop_ev.is_set():
            live = children_of(self.master)
            self.workers |= live
            self.most_live = max(self.most_live, len(live))
            now = time.monotonic()
            if now >= next_at:
                try:
                    os.kill(self.master, signal.SIGUSR2)
                    self.sent += 1
                except ProcessLookupError:
                    return
                next_at += self.every
            self.stop_ev.wait(0.05)


def percentile(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(q / 100.0 * len(v)))]


def one_run(br, name, variant, env, opts):
    """Starts origin and `name` (master-worker), runs the client with reloads, stops both."""
    server = origin = None
    tag = f"{name}-{variant}"
    logfile = env["rundir"] / f"{tag}.log"
    try:
        origin_port = br.free_port()
        ocfg = br.render("s4-proxy/origin-nginx.conf",
                         {"PORT": origin_port, "NOFILE": br.NOFILE, "MAXCONN": 4096, "RUNDIR": env["rundir"]},
                         env["rundir"] / f"{tag}-origin.conf")
        ologfile = env["rundir"] / f"{tag}-origin.log"
        origin = br.PROCS.start(br.pinned(["nginx", "-p", str(env["rundir"]), "-e",
                                           str(env["rundir"] / f"{tag}-origin-error.log"), "-c", str(ocfg)],
                                          br.SERVER_CPU), ologfile)
        try:
            br.wait_listening(origin, origin_port, ologfile)
        except br.Unavailable as e:
            raise RuntimeError(f"origin nginx: {e}") from None
        port = br.free_port()
        values = {"PORT": port, "ORIGIN_PORT": origin_port, "THREADS": 1, "MAXCONN": 4096,
                  "HARD_STOP": f"{opts.hard_stop}s"}
        cfg = br.render(f"reload/{name}.cfg", values, env["rundir"] / f"{tag}.cfg")
        if name == "ebb":
            if env["ebb"] is None:
                raise br.Unavailable(env["ebb_reason"])
            argv = [str(env["ebb"]), "-W", "-f", str(cfg)]
        else:
            argv = ["haproxy", "-W", "-db", "-f", str(cfg)]
        argv = br.pinned(argv, br.SERVER_CPU)
        with open(logfile, "ab") as f:
            f.write(("$ " + shlex.join(argv) + "\n").encode())
        server = br.PROCS.start(argv, logfile)
        br.wait_listening(server, port, logfile, timeout=20.0)
        case = br.Case("reload", 0, "", [name], "reload")
        br.check_answer(port, case)

        if opts.wrk:
            close = ["-H", "Connection: close"] if variant == "newconn" else []
            client_argv = ["wrk", "-t1", f"-c{opts.conns}", f"-d{opts.duration}s", "--latency", "--timeout", "10s",
                           *close, f"http://127.0.0.1:{port}/"]
        else:
            client_argv = [sys.executable, str(Path(__file__).resolve()), "--client", str(port), str(opts.conns),
                           str(opts.duration), variant]
        client_argv = br.pinned(client_argv, br.CLIENT_CPU)
        reloader = Reloader(server.pid, 1.0, opts.warmup)
        s0 = br.group_cpu(server.pid)
        o0 = br.group_cpu(origin.pid)
        b0, t0, _q0, m0 = br.machine_cpu()
        reloader.start()
        try:
            text, rc, client_cpu = br.run_client(client_argv, opts.duration + 60)
        finally:
            reloader.stop_ev.set()
            reloader.join(5)
        b1, t1, _q1, m1 = br.machine_cpu()
        o1 = br.group_cpu(origin.pid)
        s1 = br.group_cpu(server.pid)
        if rc != 0:
            raise RuntimeError(f"client exited with status {rc}: {text.strip()[-300:]}")
        if server.poll() is not None:
            raise br.Unavailable(f"master exited with status {server.returncode} during the run")
        br.check_answer(port, case)  # still right after the reloads
        r = from_wrk(br.parse_wrk(text)) if opts.wrk else from_client(json.loads(text), opts.warmup)
        client_cpu = client_cpu or 0.0
        machine = max((m1 - m0) - client_cpu, 0.0)
        measured = (s1 - s0) + (o1 - o0) + client_cpu
        foreign = max(0.0, (b1 - b0) - measured)
        r.update(reloads=reloader.sent, workers=len(reloader.workers), most_live=reloader.most_live,
                 machine_us=machine / max(r.pop("all_requests"), 1) * 1e6,
                 foreign_pct=100.0 * foreign / max(t1 - t0, 1e-9))
        return r
    finally:
        br.PROCS.stop(server)
        br.PROCS.stop(origin)


def from_client(res, w):
    """The Python client's per-second counts, over the seconds after the first reload (the `w`
    seconds before it are warm-up)."""
    ok = res["ok"][w:]
    errors = {k: sum(v[w:]) for k, v in res["errors"].items()}
    lat = [x for sec in res["lat"][w:] for x in sec]
    per_sec_p99 = [percentile(sec, 99) for sec in res["lat"][w:] if sec]
    requests = sum(ok) + errors["non2xx"]
    return {"requests": requests, "rps": requests / max(len(ok), 1),
            "sec_median": statistics.median(ok) if ok else 0, "sec_min": min(ok) if ok else 0,
            "series": res["ok"], "p50": percentile(lat, 50), "p99": percentile(lat, 99),
            "p99_worst": max(per_sec_p99) if per_sec_p99 else None, "errors": errors,
            "all_requests": sum(res["ok"]) + sum(res["errors"]["non2xx"])}


def from_wrk(w):
    """wrk's totals (`--wrk`): the whole run, warm-up included; no second-by-second figures."""
    e = w["errors"] or {}
    errors = {"connect": e.get("connect", 0), "read": e.get("read", 0), "write": e.get("write", 0),
              "timeout": e.get("timeout", 0), "non2xx": w["non2xx"]}
    return {"requests": w["requests"], "rps": w["rps"], "sec_median": None, "sec_min": None,
            "p50": w["p50_ms"], "p99": w["p99_ms"], "p99_worst": None, "errors": errors,
            "all_requests": w["requests"]}


def fmt_ms(x):
    return "–" if x is None else f"{x:.2f}"


def write_markdown(path, rows, meta):
    L = [f"# Reload under load{' (quick smoke)' if meta['quick'] else ''}", ""]
    L.append(f"- Date: {meta['date']} (took {meta['elapsed']})")
    L.append(f"- Machine: {meta['machine']}; other load at start: loadavg {meta['loadavg']}")
    L.append(f"- Command: `{meta['command']}`")
    L.append(f"- Versions: {meta['versions']}")
    L.append(f"- {meta['conns']} client connections for {meta['duration']} s; SIGUSR2 to the master every "
             f"second from second {meta['warmup']} on; figures cover the seconds after the first reload. "
             f"`hard-stop-after {meta['hard_stop']}s` in both configurations.")
    L.append("")
    client = ("wrk (`--wrk`: one thread; its totals cover the whole run, warm-up included, and it gives no "
              "second-by-second figures)" if meta["wrk"] else "the Python client (`bench/reload.py --client`)")
    L.append("Proxy and origin (nginx, `return 200 \"hello\"`) pinned to CPU 0, " + client + " to CPU 1. Errors: **connect** = a connection refused or not established; **read** = the "
             "connection closed or reset while a request was in flight (the request is lost); **write** = the "
             "request could not be sent; **timeout** = no answer in 10 s; **non-2xx** = an answer other than "
             "2xx. A connection the server closed after an answer with `Connection: close` is no error (the "
             "client reconnects). **Dip** = the slowest second's answers as a share of the median second's. "
             "Workers = distinct worker processes seen under the master (reloads that took effect + 1), and the "
             "most alive at once (old ones still finishing + the current one). Machine "
             "CPU µs per request = the whole machine's CPU minus the client's (origin included, as in bench/run); "
             "foreign = other processes' share of both CPUs during the run.")
    if meta["shared"]:
        L.append("")
        L.append(f"**Shared machine**: {meta['shared']}")
    L.append("")
    L.append("| server | variant | reloads sent | workers seen (most at once) | answers | req/s | median second | slowest second "
             "(dip) | p50 ms | p99 ms | worst second's p99 ms | connect err | read err | write err | timeouts | "
             "non-2xx | machine CPU µs/req | foreign CPU % |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (name, variant), r in rows:
        if "unavailable" in r:
            L.append(f"| {name} | {variant} | not available ({r['unavailable']}) |" + " |" * 15)
            continue
        e = r["errors"]
        if r["sec_median"] is None:
            seconds = "– | –"
        else:
            dip = 100.0 * r["sec_min"] / r["sec_median"] if r["sec_median"] else 0.0
            seconds = f"{r['sec_median']:,.0f} | {r['sec_min']:,} ({dip:.0f}%)"
        L.append(f"| {name} | {variant} | {r['reloads']} | {r['workers']} ({r['most_live']}) | {r['requests']:,} | {r['rps']:,.0f} | "
                 f"{seconds} | {fmt_ms(r['p50'])} | {fmt_ms(r['p99'])} | "
                 f"{fmt_ms(r['p99_worst'])} | {e['connect']} | {e['read']} | {e['write']} | {e['timeout']} | "
                 f"{e['non2xx']} | {r['machine_us']:.1f} | {r['foreign_pct']:.0f} |")
    if meta["wrk"]:
        path.write_text("\n".join(L + [""]))
        return
    L.append("")
    L.append("Answers per second, second by second (the first "
             f"{meta['warmup']} before any reload):")
    L.append("")
    for (name, variant), r in rows:
        if "series" in r:
            L.append(f"- {name} {variant}: " + " ".join(f"{x:,}" for x in r["series"]))
    L.append("")
    path.write_text("\n".join(L))


def parse_args():
    ap = argparse.ArgumentParser(description="reload under load: ebb -W vs haproxy -W (see bench/README.md)")
    ap.add_argument("--quick", action="store_true", help="smoke: 4-second runs (under 30 s in all)")
    ap.add_argument("--duration", type=int, default=12, help="seconds per run (warm-up included)")
    ap.add_argument("--warmup", type=int, default=2, help="seconds before the first reload")
    ap.add_argument("--conns", type=int, default=20, help="client connections")
    ap.add_argument("--variants", default="keepalive,newconn")
    ap.add_argument("--servers", default="ebb,haproxy")
    ap.add_argument("--hard-stop", type=int, default=5, help="hard-stop-after, seconds")
    ap.add_argument("--ebb", default=None, help="the ebb binary (default target/release/ebb, as bench/run builds it)")
    ap.add_argument("--out", default=None, help="result name in bench/results (default reload, "
                    "reload-quick for --quick)")
    ap.add_argument("--wrk", action="store_true", help="load with wrk instead of the Python client (totals for "
                    "the whole run, warm-up included; no second-by-second figures)")
    ap.add_argument("--shared", default="", help="a note that the machine was shared, printed above the table")
    ap.add_argument("--client", nargs=4, metavar=("PORT", "CONNS", "SECONDS", "VARIANT"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.quick:
        a.duration, a.warmup = 4, 1
    if a.out is None:
        a.out = "reload-quick" if a.quick else "reload"
    return a


def main():
    opts = parse_args()
    if opts.client:
        port, conns, seconds, variant = opts.client
        print(json.dumps(client(int(port), int(conns), float(seconds), variant == "newconn")))
        return 0
    br = load_run()
    started = time.monotonic()
    started_at = datetime.datetime.now(datetime.timezone.utc)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, br.on_signal)
    br.raise_nofile()
    # Where bench/run builds it (CARGO_TARGET_DIR honoured), unless --ebb says.
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    ebb = Path(opts.ebb) if opts.ebb else (target if target.is_absolute() else REPO / target) / "release" / "ebb"
    env = {"ebb": ebb if ebb.exists() else None, "ebb_reason": f"no binary at {ebb}"}
    rundir = br.WORK / "reload"
    rundir.mkdir(parents=True, exist_ok=True)
    env["rundir"] = rundir
    rows, failed_peer = [], []
    code = 0
    try:
        for variant in [v.strip() for v in opts.variants.split(",") if v.strip()]:
            for name in [s.strip() for s in opts.servers.split(",") if s.strip()]:
                try:
                    r = one_run(br, name, variant, env, opts)
                    br.log(f"{name} {variant}: {r['rps']:.0f} req/s, slowest second {r['sec_min'] or '–'}, "
                           f"p99 {fmt_ms(r['p99'])} ms, errors {r['errors']}, reloads {r['reloads']}, "
                           f"workers {r['workers']}")
                except (br.Unavailable, RuntimeError) as e:
                    r = {"unavailable": str(e)}
                    br.log(f"{name} {variant}: not available ({e})")
                    if name != "ebb":
                        failed_peer.append(f"{name} {variant}: {e}")
                rows.append(((name, variant), r))
        with open("/proc/loadavg") as f:
            loadavg = " ".join(f.read().split()[:3])
        versions = br.run_cmd(["haproxy", "-v"], 10).stdout.splitlines()[0]
        if env["ebb"]:
            versions = (br.run_cmd([str(env["ebb"]), "--version"], 10).stdout.strip()
                        + f" ({env['ebb']}); " + versions)
        elapsed = time.monotonic() - started
        meta = {"quick": opts.quick, "date": started_at.strftime("%Y-%m-%d %H:%M UTC"),
                "elapsed": f"{elapsed:.0f} s", "machine": br.machine_facts(), "loadavg": loadavg,
                "command": "bench/reload.py " + shlex.join(sys.argv[1:]), "versions": versions,
                "conns": opts.conns, "duration": opts.duration, "warmup": opts.warmup,
                "hard_stop": opts.hard_stop, "shared": opts.shared, "wrk": opts.wrk}
        br.RESULTS.mkdir(exist_ok=True)
        md = br.RESULTS / f"{opts.out}.md"
        write_markdown(md, rows, meta)
        print(md.read_text())
        br.log(f"wrote {md.relative_to(REPO)} in {elapsed:.0f} s")
        if failed_peer:
            br.log("peers that failed: " + "; ".join(failed_peer))
            code = 1
    except KeyboardInterrupt as e:
        br.log(f"interrupted ({e or 'Ctrl-C'}); stopping everything")
        code = 130
    finally:
        br.PROCS.stop_all()
    return code


if __name__ == "__main__":
    sys.exit(main())
