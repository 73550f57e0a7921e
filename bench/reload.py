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
SLOTS_PER_S = 100  # the client counts answers per 10 ms slot for the per-reload timeline
BUCKET_MS = 100  # the timeline's buckets
TIMELINE = (-2, 10)  # buckets around each reload: from 200 ms before the signal to 1 s after
LOST_BUCKETS = 4  # the timeline's "lost": the first 400 ms from the signal


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
    fine = array.array("I", [0]) * (n * SLOTS_PER_S)  # 2xx answers per 10 ms slot
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
                fine[min(int((now - t0) * SLOTS_PER_S), len(fine) - 1)] += 1
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
            "lat": [list(a) for a in lat[:int(seconds)]], "t0": t0,
            "fine": list(fine[:int(seconds) * SLOTS_PER_S])}


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


def live_children(ppid):
    """The master's live children: /proc/PID/task/PID/children (one read), else a /proc walk."""
    try:
        with open(f"/proc/{ppid}/task/{ppid}/children") as f:
            return {int(x) for x in f.read().split()}
    except OSError:
        return children_of(ppid)


def cpu_ticks(pid):
    """utime+stime of one process in clock ticks, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
    except OSError:
        return None
    fields = st[st.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else int(fields[11]) + int(fields[12])


class Reloader(threading.Thread):
    """Sends SIGUSR2 to the master every `every` seconds (from `start_after` on) and watches the
    master's children every 10 ms: when each worker appeared and went (a reload that took effect
    shows a new worker), and its CPU time when a newer one appeared and when last seen (what an
    old worker spent while it finished its connections)."""

    POLL = 0.01

    def __init__(self, master, every, start_after):
        super().__init__(daemon=True)
        self.master, self.every, self.start_after = master, every, start_after
        self.stop_ev = threading.Event()
        self.sent = 0
        self.signals = []  # time.monotonic() of each SIGUSR2
        self.workers = set()
        self.most_live = 0  # the most workers alive at once (old ones still draining + the new one)
        self.seen = {}  # pid -> first seen
        self.gone = {}  # pid -> first poll that did not see it
        self.cpu_last = {}  # pid -> CPU ticks when last seen
        self.cpu_replaced = {}  # pid -> CPU ticks when a newer worker appeared

    def poll(self, now):
        live = live_children(self.master)
        for pid in live - self.workers:
            self.seen[pid] = now
            for old in self.workers:
                if old not in self.gone and old not in self.cpu_replaced:
                    self.cpu_replaced[old] = self.cpu_last.get(old)
        self.workers |= live
        for pid in self.workers - live:
            self.gone.setdefault(pid, now)
        for pid in live:
            c = cpu_ticks(pid)
            if c is not None:
                self.cpu_last[pid] = c
        self.most_live = max(self.most_live, len(live))

    def run(self):
        t0 = time.monotonic()
        next_at = t0 + self.start_after
        while not self.stop_ev.is_set():
            now = time.monotonic()
            self.poll(now)
            if now >= next_at:
                try:
                    os.kill(self.master, signal.SIGUSR2)
                    self.signals.append(time.monotonic())
                    self.sent += 1
                except ProcessLookupError:
                    return
                next_at += self.every
            self.stop_ev.wait(self.POLL)

    def events(self):
        """Per reload: ms from the signal to the new worker's first sighting, ms the replaced
        worker lived on after it (both alive meanwhile), the replaced worker's CPU ms from the
        new one's appearance to its exit (its drain)."""
        order = sorted(self.seen, key=self.seen.get)
        out = []
        for sig in self.signals:
            new = next((p for p in order if self.seen[p] >= sig), None)
            if new is None:
                continue
            i = order.index(new)
            old = order[i - 1] if i > 0 else None
            fork_ms = (self.seen[new] - sig) * 1e3
            overlap_ms = drain_cpu_ms = None
            if old is not None and old in self.gone:
                overlap_ms = (self.gone[old] - self.seen[new]) * 1e3
                a, b = self.cpu_replaced.get(old), self.cpu_last.get(old)
                if a is not None and b is not None:
                    drain_cpu_ms = (b - a) * 1e3 / CLK_TCK
            out.append({"fork_ms": fork_ms, "overlap_ms": overlap_ms, "drain_cpu_ms": drain_cpu_ms})
        return out


CLK_TCK = os.sysconf("SC_CLK_TCK")


def percentile(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(q / 100.0 * len(v)))]


def one_run(br, name, variant, env, opts, rnd=1):
    """Starts origin and `name` (master-worker), runs the client with reloads, stops both. The
    client's raw counts, the signals' times and the workers' events go to
    bench/.work/reload/NAME-VARIANT-rROUND.json (for a closer look than the report's)."""
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
        if opts.wrk:
            r = from_wrk(br.parse_wrk(text))
        else:
            raw = json.loads(text)
            r = from_client(raw, opts.warmup, reloader.signals)
            raw.update(signals=reloader.signals, seen=reloader.seen, gone=reloader.gone)
            (env["rundir"] / f"{tag}-r{rnd}.json").write_text(json.dumps(raw))
        client_cpu = client_cpu or 0.0
        machine = max((m1 - m0) - client_cpu, 0.0)
        measured = (s1 - s0) + (o1 - o0) + client_cpu
        foreign = max(0.0, (b1 - b0) - measured)
        r.update(reloads=reloader.sent, workers=len(reloader.workers), most_live=reloader.most_live,
                 events=reloader.events(),
                 machine_us=machine / max(r.pop("all_requests"), 1) * 1e6,
                 foreign_pct=100.0 * foreign / max(t1 - t0, 1e-9))
        return r
    finally:
        br.PROCS.stop(server)
        br.PROCS.stop(origin)


def timeline(res, w, signals):
    """Answers per 100 ms bucket around each reload (TIMELINE buckets, from the signal), for the
    reloads whose window lies inside the client's run after the warm-up, and the median bucket of
    the whole run after the warm-up (the steady rate to compare them with)."""
    fine, t0 = res["fine"], res["t0"]
    per = SLOTS_PER_S * BUCKET_MS // 1000
    lo, hi = TIMELINE
    rows = []
    for sig in signals:
        at = int(round((sig - t0) * SLOTS_PER_S))  # the signal's 10 ms slot
        if at + lo * per < w * SLOTS_PER_S or at + hi * per > len(fine):
            continue
        rows.append([sum(fine[at + k * per:at + (k + 1) * per]) for k in range(lo, hi)])
    start = w * SLOTS_PER_S
    buckets = [sum(fine[i:i + per]) for i in range(start, len(fine) - per + 1, per)]
    return rows, (statistics.median(buckets) if buckets else 0)


def from_client(res, w, signals=()):
    """The Python client's per-second counts, over the seconds after the first reload (the `w`
    seconds before it are warm-up)."""
    ok = res["ok"][w:]
    errors = {k: sum(v[w:]) for k, v in res["errors"].items()}
    lat = [x for sec in res["lat"][w:] for x in sec]
    per_sec_p99 = [percentile(sec, 99) for sec in res["lat"][w:] if sec]
    requests = sum(ok) + errors["non2xx"]
    tl, bucket_median = timeline(res, w, signals)
    return {"requests": requests, "rps": requests / max(len(ok), 1),
            "sec_median": statistics.median(ok) if ok else 0, "sec_min": min(ok) if ok else 0,
            "series": res["ok"], "p50": percentile(lat, 50), "p99": percentile(lat, 99),
            "p99_worst": max(per_sec_p99) if per_sec_p99 else None, "errors": errors,
            "all_requests": sum(res["ok"]) + sum(res["errors"]["non2xx"]),
            "timeline": tl, "bucket_median": bucket_median}


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


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summary(rows):
    """Across rounds: medians per server and variant, the ebb/HAProxy ratio of the slowest seconds
    round by round, the per-reload timeline and the workers' reload events."""
    good = [((n, v, k), r) for (n, v, k), r in rows if "series" in r]
    servers = list(dict.fromkeys(n for (n, _v, _k), _r in good))
    variants = list(dict.fromkeys(v for (_n, v, _k), _r in good))
    L = ["", "### Across rounds", "",
         "Medians over the rounds (each round runs every server once per variant, the order "
         "alternating between rounds). Dip = slowest second / median second of the same run; "
         "100 ms dip = the slowest 100 ms bucket after any reload / the run's median bucket.", "",
         "| variant | server | rounds | req/s | median second | slowest second | dip % (min–max) | "
         "100 ms dip % | errors (all rounds) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    runs = {}
    for (n, v, k), r in good:
        runs.setdefault((v, n), []).append((k, r))
    for v in variants:
        for n in servers:
            rs = [r for _k, r in runs.get((v, n), [])]
            if not rs:
                continue
            dips = [100.0 * r["sec_min"] / r["sec_median"] for r in rs if r["sec_median"]]
            fine_dips = [100.0 * min(min(row) for row in r["timeline"]) / r["bucket_median"]
                         for r in rs if r["timeline"] and r["bucket_median"]]
            errs = sum(sum(r["errors"].values()) for r in rs)
            L.append(f"| {v} | {n} | {len(rs)} | {med([r['rps'] for r in rs]):,.0f} | "
                     f"{med([r['sec_median'] for r in rs]):,.0f} | {med([r['sec_min'] for r in rs]):,.0f} | "
                     f"{med(dips):.0f} ({min(dips):.0f}–{max(dips):.0f}) | "
                     f"{'–' if not fine_dips else f'{med(fine_dips):.0f}'} | {errs} |")
    if "ebb" in servers and "haproxy" in servers:
        L += ["", "ebb's slowest second / HAProxy's, round by round (same round, same noise):", ""]
        for v in variants:
            e = dict(runs.get((v, "ebb"), []))
            h = dict(runs.get((v, "haproxy"), []))
            ratios = [e[k]["sec_min"] / h[k]["sec_min"] for k in sorted(e) if k in h and h[k]["sec_min"]]
            medians = [e[k]["sec_median"] / h[k]["sec_median"] for k in sorted(e) if k in h and h[k]["sec_median"]]
            if ratios:
                L.append(f"- {v}: " + " ".join(f"{x:.2f}" for x in ratios)
                         + f"; median **{med(ratios):.2f}** (median seconds' ratio {med(medians):.2f})")
    lo, hi = TIMELINE
    L += ["", f"Per-reload timeline: answers per {BUCKET_MS} ms bucket around each reload (0 = the "
          "bucket that starts with SIGUSR2), as % of the run's median bucket: mean over every reload "
          "of every round / the lowest. Lost = what the mean falls short of the median over the "
          f"{LOST_BUCKETS * BUCKET_MS} ms from the signal, in ms of service at the median rate.", "",
          "| variant | server | reloads | lost, ms | " + " | ".join(f"{k * BUCKET_MS:+d}" for k in range(lo, hi)) + " |",
          "|---|---|---:|---:|" + "---:|" * (hi - lo)]
    for v in variants:
        for n in servers:
            norm = [[100.0 * x / r["bucket_median"] for x in row]
                    for _k, r in runs.get((v, n), []) if r["bucket_median"] for row in r["timeline"]]
            if not norm:
                continue
            means = [statistics.mean(c) for c in zip(*norm)]
            lost = sum(100.0 - m for m in means[-lo:-lo + LOST_BUCKETS]) * BUCKET_MS / 100.0
            cols = [f"{m:.0f} / {min(c):.0f}" for m, c in zip(means, zip(*norm))]
            L.append(f"| {v} | {n} | {len(norm)} | {lost:.0f} | " + " | ".join(cols) + " |")
    L += ["", "Workers at each reload (polled every 10 ms, so ±10 ms; CPU in 10 ms ticks): the new "
          "worker's first sighting after the signal, how long the replaced worker lived on beside "
          "it, the replaced worker's CPU time over that while (its drain); medians (max).", "",
          "| variant | server | reloads | new worker seen, ms | both alive, ms | old worker's drain CPU, ms |",
          "|---|---|---:|---:|---:|---:|"]
    for v in variants:
        for n in servers:
            ev = [e for _k, r in runs.get((v, n), []) for e in r.get("events", [])]
            if not ev:
                continue

            def col(key):
                xs = [e[key] for e in ev if e[key] is not None]
                return f"{med(xs):.0f} ({max(xs):.0f})" if xs else "–"
            L.append(f"| {v} | {n} | {len(ev)} | {col('fork_ms')} | {col('overlap_ms')} | {col('drain_cpu_ms')} |")
    return L


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
    L.append("| round | server | variant | reloads sent | workers seen (most at once) | answers | req/s | median second | slowest second "
             "(dip) | p50 ms | p99 ms | worst second's p99 ms | connect err | read err | write err | timeouts | "
             "non-2xx | machine CPU µs/req | foreign CPU % |")
    L.append("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (name, variant, rnd), r in rows:
        if "unavailable" in r:
            L.append(f"| {rnd} | {name} | {variant} | not available ({r['unavailable']}) |" + " |" * 15)
            continue
        e = r["errors"]
        if r["sec_median"] is None:
            seconds = "– | –"
        else:
            dip = 100.0 * r["sec_min"] / r["sec_median"] if r["sec_median"] else 0.0
            seconds = f"{r['sec_median']:,.0f} | {r['sec_min']:,} ({dip:.0f}%)"
        L.append(f"| {rnd} | {name} | {variant} | {r['reloads']} | {r['workers']} ({r['most_live']}) | {r['requests']:,} | {r['rps']:,.0f} | "
                 f"{seconds} | {fmt_ms(r['p50'])} | {fmt_ms(r['p99'])} | "
                 f"{fmt_ms(r['p99_worst'])} | {e['connect']} | {e['read']} | {e['write']} | {e['timeout']} | "
                 f"{e['non2xx']} | {r['machine_us']:.1f} | {r['foreign_pct']:.0f} |")
    if meta["wrk"]:
        path.write_text("\n".join(L + [""]))
        return
    L.extend(summary(rows))
    L.append("")
    L.append("Answers per second, second by second (the first "
             f"{meta['warmup']} before any reload):")
    L.append("")
    for (name, variant, rnd), r in rows:
        if "series" in r:
            L.append(f"- round {rnd}, {name} {variant}: " + " ".join(f"{x:,}" for x in r["series"]))
    L.append("")
    path.write_text("\n".join(L))


def parse_args():
    ap = argparse.ArgumentParser(description="reload under load: ebb -W vs haproxy -W (see bench/README.md)")
    ap.add_argument("--quick", action="store_true", help="smoke: 4-second runs (under 30 s in all)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds: every server once per variant in each, "
                    "the servers' order alternating; the report gives medians across rounds")
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
        servers = [s.strip() for s in opts.servers.split(",") if s.strip()]
        for rnd, variant in [(k, v) for k in range(1, opts.rounds + 1)
                             for v in [v.strip() for v in opts.variants.split(",") if v.strip()]]:
            # The order alternates between rounds: neither server always runs first.
            for name in (servers if rnd % 2 else servers[::-1]):
                try:
                    r = one_run(br, name, variant, env, opts, rnd)
                    br.log(f"round {rnd}: {name} {variant}: {r['rps']:.0f} req/s, slowest second {r['sec_min'] or '–'}, "
                           f"p99 {fmt_ms(r['p99'])} ms, errors {r['errors']}, reloads {r['reloads']}, "
                           f"workers {r['workers']}")
                except (br.Unavailable, RuntimeError) as e:
                    r = {"unavailable": str(e)}
                    br.log(f"{name} {variant}: not available ({e})")
                    if name != "ebb":
                        failed_peer.append(f"{name} {variant}: {e}")
                rows.append(((name, variant, rnd), r))
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
        br.log(f"wrote {os.path.relpath(md, REPO)} in {elapsed:.0f} s")
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
