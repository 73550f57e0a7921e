#!/usr/bin/env python3
"""Scenario 8 under callgrind: instructions per compressed answer, ebb and HAProxy.

Where bench/run measures CPU time (which needs a quiet machine), this counts the instructions
a proxy executes per answer (valgrind --tool=callgrind), which other load on the machine does
not change. Each proxy runs with one thread in front of an nginx origin serving the bench's
text files (bench/.work/www, made by bench/run; or made here the same way), gzip at level 1
(bench/configs/s8-compress). For each size the proxy is started twice under callgrind, once
serving N1 answers and once N2 on one keep-alive connection; the difference of the two totals
divided by N2 - N1 is the figure (start-up and stop cancel out). It also prints the bytes of
one answer on the wire (head, chunk framing and coded body) and of the coded body.

    bench/comp_callgrind.py --ebb target/release/ebb [--haproxy /usr/sbin/haproxy]
                            [--sizes 16KiB,256KiB] [--coding gzip|deflate] [--n1 20 --n2 120]
                            [--top 12]

With --top, the functions with the most instructions in the N2 run are listed (from
callgrind_annotate). Needs valgrind, nginx and haproxy (Debian packages).
"""
import argparse
import gzip
import zlib
import importlib.machinery
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def load_bench_run():
    """bench/run as a module (it has no .py suffix): its text generator and configs."""
    loader = importlib.machinery.SourceFileLoader("bench_run", str(BENCH / "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with status {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port}")


def read_answer(f):
    """One HTTP/1.1 answer, raw: (bytes on the wire, head fields, coded body)."""
    total = 0
    line = f.readline()
    total += len(line)
    head = {}
    while True:
        h = f.readline()
        total += len(h)
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        head[k.strip().lower()] = v.strip()
    body = bytearray()
    if "chunked" in head.get("transfer-encoding", ""):
        while True:
            sl = f.readline()
            total += len(sl)
            n = int(sl.split(b";")[0].strip() or b"0", 16)
            if n == 0:
                while True:
                    t = f.readline()
                    total += len(t)
                    if t in (b"\r\n", b"\n", b""):
                        break
                break
            body += f.read(n)
            total += n + len(f.readline())
    else:
        n = int(head.get("content-length", "0"))
        body += f.read(n)
        total += n
    return total, head, bytes(body)


def fetch(port, path, n, want, coding):
    """n answers on one keep-alive connection; checks each; returns (wire bytes, body bytes) means."""
    req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: {coding}\r\n\r\n".encode()
    # HTTP's deflate is the zlib format (RFC 9110 8.4.1.2).
    unpack = gzip.decompress if coding == "gzip" else zlib.decompress
    totals, bodies = [], []
    with socket.create_connection(("127.0.0.1", port), timeout=300) as s:
        f = s.makefile("rb")
        for _ in range(n):
            s.sendall(req)
            total, head, body = read_answer(f)
            if head.get("content-encoding") != coding or unpack(body) != want:
                raise RuntimeError(f"an answer did not decode to the content: {head}")
            totals.append(total)
            bodies.append(len(body))
    return sum(totals) / n, sum(bodies) / n


def total_ir(outfile):
    text = Path(outfile).read_text(errors="replace")
    m = re.search(r"^summary:\s+(\d+)", text, re.M) or re.search(r"^totals:\s+(\d+)", text, re.M)
    if not m:
        raise RuntimeError(f"no totals in {outfile}")
    return int(m.group(1))


def run_once(name, argv_of, path, n, want, coding, work, tag):
    out = work / f"cg-{name}-{tag}.out"
    port = free_port()
    argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + argv_of(port)
    log = open(work / f"cg-{name}-{tag}.log", "wb")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_port(port, p)
        wire = fetch(port, path, n, want, coding)
        # Soft stop (SIGUSR1 for both): the process exits and callgrind writes its counts.
        p.send_signal(signal.SIGUSR1)
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        log.close()
    return total_ir(out), wire, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ebb", required=True)
    ap.add_argument("--haproxy", default="/usr/sbin/haproxy")
    ap.add_argument("--servers", default="ebb,haproxy")
    ap.add_argument("--sizes", default="16KiB,256KiB")
    ap.add_argument("--n1", type=int, default=20)
    ap.add_argument("--n2", type=int, default=120)
    ap.add_argument("--coding", default="gzip", choices=["gzip", "deflate"])
    ap.add_argument("--top", type=int, default=0)
    opts = ap.parse_args()
    br = load_bench_run()
    work = Path(tempfile.mkdtemp(prefix="comp-callgrind-"))
    www = work / "www"
    www.mkdir()
    contents = {}
    for name in opts.sizes.split(","):
        data = br.text_content(br.TEXT_SIZES[name])
        (www / f"t{name.lower()}.txt").write_bytes(data)
        contents[name] = data
    oport = free_port()
    ocfg = work / "origin.conf"
    tmpl = (BENCH / "configs" / "s8-compress" / "origin-nginx.conf").read_text()
    ocfg.write_text(tmpl.replace("@PORT@", str(oport)).replace("@NOFILE@", "4096").replace("@MAXCONN@", "1024")
                    .replace("@RUNDIR@", str(work)).replace("@WWW@", str(www)))
    origin = subprocess.Popen(["nginx", "-p", str(work), "-e", str(work / "origin-error.log"), "-c", str(ocfg)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_port(oport, origin)

        def cfg(name, port):
            t = (BENCH / "configs" / "s8-compress" / f"{name}.cfg").read_text()
            t = t.replace("compression algo gzip", f"compression algo {opts.coding}")
            path = work / f"{name}-{port}.cfg"
            path.write_text(t.replace("@THREADS@", "1").replace("@MAXCONN@", "1024").replace("@PORT@", str(port))
                            .replace("@ORIGIN_PORT@", str(oport)))
            return path

        argv = {
            "ebb": lambda port: [opts.ebb, "-f", str(cfg("ebb", port))],
            "haproxy": lambda port: [opts.haproxy, "-db", "-f", str(cfg("haproxy", port))],
        }
        print(f"coding {opts.coding}")
        print(f"{'server':8} {'size':7} {'Ir per answer':>14} {'wire bytes':>11} {'coded body':>11}")
        for size in opts.sizes.split(","):
            path = f"/t{size.lower()}.txt"
            for name in opts.servers.split(","):
                ir1, _, _ = run_once(name, argv[name], path, opts.n1, contents[size], opts.coding,
                                    work, f"{size}-n1")
                ir2, wire, out2 = run_once(name, argv[name], path, opts.n2, contents[size], opts.coding,
                                           work, f"{size}-n2")
                per = (ir2 - ir1) / (opts.n2 - opts.n1)
                print(f"{name:8} {size:7} {per:14,.0f} {wire[0]:11,.0f} {wire[1]:11,.0f}", flush=True)
                if opts.top:
                    ann = subprocess.run(["callgrind_annotate", "--inclusive=no", str(out2)],
                                         capture_output=True, text=True).stdout
                    rows = [l for l in ann.splitlines() if re.match(r"^\s*[\d,]+ \(", l)]
                    for l in rows[1:opts.top + 1]:
                        print("    " + l.strip()[:150])
    finally:
        origin.send_signal(signal.SIGQUIT)
        try:
            origin.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(origin.pid, signal.SIGKILL)
    print(f"(callgrind files in {work})")


if __name__ == "__main__":
    sys.exit(main())
