#!/usr/bin/env python3
"""A FastCGI 1.0 responder for tests/fcgi.rs: what it does with a request
is chosen by its query string, so one process serves every case.

Usage: fcgiapp.py [--log FILE] [--max-reqs N] [--mpxs 0|1] [--unix PATH]
                  [--no-values] [--ignore-abort]

--no-values answers GET_VALUES with FCGI_UNKNOWN_TYPE; --ignore-abort
never ends an aborted request.

It listens on 127.0.0.1, an ephemeral port (or on the UNIX socket PATH),
prints `port N` (or `ready`) on stdout, and serves until killed. Requests
on one connection run concurrently (it multiplexes). With --log, every
record it reads is logged as `conn=C type=T id=I len=L flags=F`, one line
each, and each connection's close as `conn=C closed`.

By default the answer's body lists the PARAMS it got, `NAME=value` per
line in the order received, then `STDIN=<length>` and the STDIN's md5.
The query string (`a=1&b=2`) changes that:

  status=S         a `Status: S` line (spaces as `+`)
  location=L       a `Location: L` line
  header=N:V       one more line (repeatable)
  stderr=TEXT      TEXT on the error stream first (one record)
  big=N            a body of N bytes ('a'..'z' repeated) in records of
                   chunk=K bytes (default 8000)
  length=1         the body says its Content-Length
  delay=MS         wait MS ms before answering
  pause=MS         wait MS ms between the head and the body
  proto=P          END_REQUEST with protocol status P and no STDOUT
  appstatus=N      END_REQUEST's application status
  pad=N            N bytes of padding on each STDOUT record
  noend=1          no empty STDOUT record (END_REQUEST ends it)
  bad=version      a record of version 2
  bad=endshort     END_REQUEST of 4 bytes
  bad=lines        CGI lines that do not parse
  bad=close        close the connection before the answer
  bad=half         close after half the body
  bad=id           answer with another request id first
  echo=1           the body is the STDIN as it came
  closeafter=1     close the connection after the answer (even kept)
"""

import asyncio
import hashlib
import os
import struct
import sys
import urllib.parse

LOG = None
MAX_REQS = None
MPXS = None
NO_VALUES = False
IGNORE_ABORT = False
CONNS = 0


def log(line):
    if LOG is not None:
        with open(LOG, "a") as f:
            f.write(line + "\n")


def record(rtype, rid, content=b"", padding=0):
    return (
        struct.pack(">BBHHBB", 1, rtype, rid, len(content), padding, 0)
        + content
        + b"\0" * padding
    )


def pairs(data):
    out = []
    i = 0
    while i < len(data):
        lens = []
        for _ in range(2):
            b = data[i]
            if b < 128:
                lens.append(b)
                i += 1
            else:
                lens.append(struct.unpack(">I", data[i : i + 4])[0] & 0x7FFFFFFF)
                i += 4
        n = data[i : i + lens[0]]
        v = data[i + lens[0] : i + lens[0] + lens[1]]
        i += lens[0] + lens[1]
        out.append((n, v))
    return out


def pair(n, v):
    def ln(x):
        return bytes([x]) if x < 128 else struct.pack(">I", x | 0x80000000)

    return ln(len(n)) + ln(len(v)) + n + v


class Conn:
    def __init__(self, reader, writer):
        global CONNS
        CONNS += 1
        self.n = CONNS
        self.r = reader
        self.w = writer
        self.reqs = {}
        self.lock = asyncio.Lock()
        self.tasks = set()
        self.closing = False

    async def send(self, data):
        async with self.lock:
            if self.closing:
                return
            try:
                self.w.write(data)
                await self.w.drain()
            except ConnectionError:
                self.closing = True

    async def run(self):
        try:
            while True:
                h = await self.r.readexactly(8)
                ver, rtype, rid, clen, plen, _ = struct.unpack(">BBHHBB", h)
                content = await self.r.readexactly(clen)
                await self.r.readexactly(plen)
                flags = content[2] if rtype == 1 and len(content) >= 3 else ""
                log(f"conn={self.n} type={rtype} id={rid} len={clen} flags={flags}")
                await self.record(rtype, rid, content)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        log(f"conn={self.n} closed")
        for t in list(self.tasks):
            t.cancel()
        self.w.close()

    async def record(self, rtype, rid, content):
        if rtype == 9 and NO_VALUES:  # GET_VALUES, not known
            await self.send(record(11, 0, bytes([9]) + b"\0" * 7))
        elif rtype == 9:  # GET_VALUES
            out = b""
            for n, _ in pairs(content):
                if n == b"FCGI_MAX_REQS" and MAX_REQS is not None:
                    out += pair(n, MAX_REQS.encode())
                if n == b"FCGI_MPXS_CONNS" and MPXS is not None:
                    out += pair(n, MPXS.encode())
            await self.send(record(10, 0, out))
        elif rtype == 1:  # BEGIN_REQUEST
            self.reqs[rid] = {
                "keep": bool(content[2] & 1),
                "params": b"",
                "stdin": b"",
            }
        elif rtype == 4 and rid in self.reqs:
            r = self.reqs[rid]
            if content:
                r["params"] += content
        elif rtype == 5 and rid in self.reqs:
            r = self.reqs[rid]
            if content:
                r["stdin"] += content
            else:
                t = asyncio.ensure_future(self.answer_safe(rid, self.reqs.pop(rid)))
                self.tasks.add(t)
                t.add_done_callback(self.tasks.discard)
        elif rtype == 2 and IGNORE_ABORT:
            pass
        elif rtype == 2 and rid in self.reqs:  # ABORT_REQUEST
            self.reqs.pop(rid)
            await self.send(record(3, rid, struct.pack(">IB3x", 0, 0)))

    async def answer_safe(self, rid, r):
        try:
            await self.answer(rid, r)
        except (ConnectionError, asyncio.CancelledError):
            pass

    async def answer(self, rid, r):
        params = pairs(r["params"])
        env = dict(params)
        q = urllib.parse.parse_qs(env.get(b"QUERY_STRING", b"").decode())
        one = lambda k, d=None: q[k][0] if k in q else d
        if one("delay"):
            await asyncio.sleep(int(one("delay")) / 1000)
        bad = one("bad")
        if bad == "close":
            await self.close()
            return
        if bad == "version":
            await self.send(b"\x02" + record(6, rid, b"X: 1\r\n\r\n")[1:])
            return
        if bad == "id":
            await self.send(record(6, rid + 100, b"Status: 500\r\n\r\nwrong"))
        if one("stderr"):
            await self.send(record(7, rid, one("stderr").encode()))
        if one("proto"):
            end = struct.pack(">IB3x", int(one("appstatus", "0")), int(one("proto")))
            await self.send(record(3, rid, end))
            await self.done(r)
            return
        if one("echo"):
            body = r["stdin"]
        elif one("big"):
            n = int(one("big"))
            body = (b"abcdefghijklmnopqrstuvwxyz" * (n // 26 + 1))[:n]
        else:
            lines = [n + b"=" + v for n, v in params]
            lines.append(b"STDIN=%d" % len(r["stdin"]))
            lines.append(hashlib.md5(r["stdin"]).hexdigest().encode())
            body = b"\n".join(lines) + b"\n"
        head = b""
        if bad == "lines":
            head += b"Bad Line Here\r\n"
        if one("status"):
            head += b"Status: " + one("status").encode() + b"\r\n"
        if one("location"):
            head += b"Location: " + one("location").encode() + b"\r\n"
        for h in q.get("header", []):
            n, v = h.split(":", 1)
            head += n.encode() + b": " + v.encode() + b"\r\n"
        if one("length"):
            head += b"Content-Length: %d\r\n" % len(body)
        head += b"Content-Type: text/plain\r\n\r\n"
        pad = int(one("pad", "0"))
        chunk = int(one("chunk", "8000"))
        await self.send(record(6, rid, head, pad))
        if one("pause"):
            await asyncio.sleep(int(one("pause")) / 1000)
        if bad == "half":
            await self.send(record(6, rid, body[: len(body) // 2], pad))
            await self.close()
            return
        for i in range(0, len(body), chunk):
            await self.send(record(6, rid, body[i : i + chunk], pad))
        if bad == "endshort":
            await self.send(record(3, rid, b"\0\0\0\0"))
            return
        if not one("noend"):
            await self.send(record(6, rid, b"", pad))
        end = struct.pack(">IB3x", int(one("appstatus", "0")), 0)
        await self.send(record(3, rid, end))
        if one("closeafter"):
            await self.close()
            return
        await self.done(r)

    async def done(self, r):
        if not r["keep"]:
            await self.close()

    async def close(self):
        async with self.lock:
            self.closing = True
            self.w.close()


async def main():
    global LOG, MAX_REQS, MPXS, NO_VALUES, IGNORE_ABORT
    args = sys.argv[1:]
    unix = None
    while args:
        a = args.pop(0)
        if a == "--log":
            LOG = args.pop(0)
        elif a == "--max-reqs":
            MAX_REQS = args.pop(0)
        elif a == "--mpxs":
            MPXS = args.pop(0)
        elif a == "--unix":
            unix = args.pop(0)
        elif a == "--no-values":
            NO_VALUES = True
        elif a == "--ignore-abort":
            IGNORE_ABORT = True

    async def serve(r, w):
        await Conn(r, w).run()

    if unix:
        server = await asyncio.start_unix_server(serve, path=unix)
        print("ready", flush=True)
    else:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        print("port %d" % server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        os._exit(0)
