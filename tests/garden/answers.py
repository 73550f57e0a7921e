#!/usr/bin/env python3
"""Differential fuzzing of HTTP/1 answers: ebb and haproxy side by side.

A recording origin answers each first request with a mutated answer
(status lines, framing, fields, interim answers, bytes after the body,
closes); a second request follows on the same client connection. The
script compares the statuses and bodies the client gets through ebb and
through HAProxy 2.6, and flags any byte of an answer's surplus (EXTRA,
SMUGG) reaching ebb's client as a desync (exit status 1).

    tests/garden/answers.py [EBB] [SEED] [N]    # H2=1: HTTP/2 (h2c) clients
"""
import os, random, socket, subprocess, sys, threading, time, re

from common import WORK, config, free_port, origin, start_pair
EBB = sys.argv[1] if len(sys.argv) > 1 else "target/release/ebb"
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 1
N = int(sys.argv[3]) if len(sys.argv) > 3 else 200
OPORT, EPORT, HPORT = free_port(), free_port(), free_port()
answers = {}  # tag -> bytes to send, close flag


def serve(c):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d: c.close(); return
                buf += d
            i = buf.find(b"\r\n\r\n"); head = buf[:i]; buf = buf[i+4:]
            m = re.search(rb"(?i)\r\nx-tag: *([^\r]*)", head)
            tag = m.group(1).decode() if m else ""
            if tag in answers:
                data, close = answers[tag]
                c.sendall(data)
                if close:
                    c.shutdown(socket.SHUT_WR); time.sleep(0.2); c.close(); return
            else:
                body = b"second " + tag.encode()
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    except OSError:
        pass
    c.close()

H2 = bool(os.environ.get("H2"))
CFG = config(["timeout client 3s", "timeout server 1s", "http-reuse always"],
             bind_opts=" proto h2" if H2 else "")

def start():
    return start_pair(EBB, CFG, "r", EPORT, HPORT, OPORT)

R = random.Random(SEED)
SL = [b"HTTP/1.1 200 OK", b"HTTP/1.1 200", b"HTTP/1.1 200 ", b"HTTP/1.0 200 OK", b"HTTP/1.1 204 No Content", b"HTTP/1.1 304 Not Modified",
      b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK", b"HTTP/1.1 103 Early\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK", b"HTTP/1.1 999 X",
      b"HTTP/1.1 099 X", b"HTTP/1.1 20 X", b"http/1.1 200 OK", b"HTTP/1.1  200 OK", b"HTTP/2.0 200 OK", b"HTTP/1.1 200 O\x00K",
      b"HTTP/1.1 101 Switching", b"HTTP/1.1 404 Not Found", b"HTTP/1.1 500 Err", b"ICY 200 OK", b"HTTP/1.1 2000 OK"]
BODY = b"0123456789abcdef"
def mk(tag):
    sl = R.choice(SL[:1] * 6 + SL)
    hdrs = [b"X-R: " + tag]
    body = BODY
    fr = R.randrange(8)
    if fr == 0: hdrs.append(b"Content-Length: %d" % len(body)); raw = body
    elif fr == 1:
        hdrs.append(b"Transfer-Encoding: chunked"); raw = b"6\r\n012345\r\na\r\n6789abcdef\r\n0\r\n\r\n"
    elif fr == 2: hdrs.append(b"Content-Length: %d" % (len(body) + R.choice([-3, 3]))); raw = body
    elif fr == 3: hdrs += [b"Content-Length: %d" % len(body), b"Transfer-Encoding: chunked"]; raw = b"10\r\n" + body + b"\r\n0\r\n\r\n"
    elif fr == 4: raw = body  # until close
    elif fr == 5: hdrs.append(b"Content-Length: %d" % len(body)); raw = body + R.choice([b"EXTRA", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nSMUGG", b"\r\n"])
    elif fr == 6: hdrs.append(b"Transfer-Encoding: chunked"); raw = R.choice([b"10;ext=1\r\n" + body + b"\r\n0\r\n\r\n", b"010\r\n" + body + b"\r\n0\r\nX-T: 1\r\n\r\n",
            b"1g\r\n" + body + b"\r\n0\r\n\r\n", b"10\r\n" + body + b"0\r\n\r\n", b"10\n" + body + b"\n0\n\n", b"ffffffffffffffffff\r\nx\r\n0\r\n\r\n",
            b"10\r\n" + body + b"\r\n0\r\n\r\nEXTRA", b"-1\r\nx\r\n0\r\n\r\n", b"10 \r\n" + body + b"\r\n0\r\n\r\n"])
    else:
        hdrs.append(R.choice([b"Content-Length: 16", b"Content-Length: +16", b"Content-Length: 16, 16", b"Content-Length: 16\r\nContent-Length: 16",
                              b"Content-Length: 16\r\nContent-Length: 17", b"Transfer-Encoding: gzip", b"Transfer-Encoding: chunked, identity",
                              b"Content-Length:16", b"Content-Length: 016", b"Content-Length: 0x10", b"Transfer-Encoding: Chunked\r\nContent-Length: 16"]))
        raw = body
    for _ in range(R.randrange(0, 3)):
        hdrs.insert(R.randrange(len(hdrs) + 1), R.choice([b"X-F: a\r\n b", b"X-N: a\x00b", b"X-S : v", b" X-L: v", b"X-E:", b"Connection: close",
            b"Connection: keep-alive", b"Keep-Alive: timeout=5", b"Set-Cookie: a=b", b"X-Big: " + b"b" * 20000, b"Upgrade: h2c", b"Proxy-Connection: x", b"Trailer: X-T"]))
    sep = b"\r\n" if R.random() < 0.9 else b"\n"
    data = sl + sep + sep.join(hdrs) + sep + sep + raw
    close = fr == 4 or R.random() < 0.2
    return data, close

def exchange(port, t):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(4)
    s.sendall(b"GET /first HTTP/1.1\r\nHost: h\r\nX-Tag: " + t.encode() + b"\r\n\r\n")
    out = b""; t0 = time.time()
    # read first answer for up to 1.5 s, then send a second request on the same connection
    s.settimeout(0.3)
    while time.time() - t0 < 1.5:
        try:
            d = s.recv(65536)
            if not d: break
            out += d
        except socket.timeout:
            if out: break
        except OSError: break
    first = out; out = b""
    try:
        s.settimeout(3)
        s.sendall(b"GET /second HTTP/1.1\r\nHost: h\r\nX-Tag: " + t.encode() + b"b\r\n\r\n")
        while True:
            d = s.recv(65536)
            if not d: break
            out += d
            if b"second " in out: break
    except OSError: pass
    s.close()
    return first, out

def exchange_h2(port, t):
    """`exchange` for an HTTP/2 (h2c) client: each answer written as
    `HTTP/1.1 STATUS` heads then its DATA, `RST n` or `GOAWAY n` for a
    reset."""
    import h2.connection, h2.config, h2.events
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(4)
    c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, validate_inbound_headers=False))
    c.initiate_connection(); s.sendall(c.data_to_send())
    outs = []
    for tag in (t, t + "b"):
        sid = c.get_next_available_stream_id()
        try:
            c.send_headers(sid, [(":method", "GET"), (":path", "/x"), (":scheme", "http"), (":authority", "h"), ("x-tag", tag)], end_stream=True)
            s.sendall(c.data_to_send())
        except Exception:
            outs.append(b""); continue
        out = b""; end = False; t0 = time.time()
        while not end and time.time() - t0 < 3:
            try:
                d = s.recv(65536)
            except OSError:
                break
            if not d: break
            try:
                evs = c.receive_data(d)
            except Exception as x:
                out += b"PROTOCOL-ERROR " + type(x).__name__.encode(); break
            for ev in evs:
                if isinstance(ev, h2.events.ConnectionTerminated):
                    out += b"GOAWAY %d" % int(ev.error_code); end = True
                elif getattr(ev, "stream_id", None) != sid:
                    continue
                elif isinstance(ev, (h2.events.ResponseReceived, h2.events.InformationalResponseReceived)):
                    out += b"HTTP/1.1 " + dict(ev.headers).get(b":status", b"?") + b" \r\n\r\n"
                elif isinstance(ev, h2.events.DataReceived):
                    out += ev.data; c.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, h2.events.StreamEnded):
                    end = True
                elif isinstance(ev, h2.events.StreamReset):
                    out += b"RST %d" % int(ev.error_code); end = True
            try:
                s.sendall(c.data_to_send())
            except OSError:
                break
        outs.append(out)
        if b"GOAWAY" in out: outs.append(b""); break
    s.close()
    return outs[0], outs[1]


def summarize(b):
    st = re.findall(rb"HTTP/1\.[01] (\d{3})", b)
    body = b.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in b else b""
    return st, body

def main():
    origin(OPORT, serve)
    e, h = start()
    nd = 0
    nsmug = 0
    for i in range(N):
        tag = "r%d" % i
        data, close = mk(tag.encode())
        if os.environ.get("ONE"): data = eval(os.environ["ONE"]); close = bool(os.environ.get("CLOSE"))
        answers[tag + "ebb"] = (data, close); answers[tag + "hap"] = (data, close)
        ex = exchange_h2 if H2 else exchange
        fe, se = ex(EPORT, tag + "ebb")
        fh, sh = ex(HPORT, tag + "hap")
        if e.poll() is not None:
            print("EBB DIED", i, data); h.terminate(); sys.exit(1)
        a, b = summarize(fe), summarize(fh)
        sa = [x for x in re.findall(rb"second r\d+(?:ebb|hap)b?", se)]
        sb = [x for x in re.findall(rb"second r\d+(?:ebb|hap)b?", sh)]
        smug_e = b"SMUGG" in se or b"EXTRA" in se
        flag = []
        if a[0] != b[0]: flag.append("STATUS")
        if a[1].replace(b"ebb", b"") != b[1].replace(b"hap", b"") and a[0] == b[0]: flag.append("BODY")
        if smug_e:
            flag.append("EBB-SMUGGLED")
            nsmug += 1
        if (len(sa) > 0) != (len(sb) > 0): flag.append("SECOND")
        if flag:
            nd += 1
            print("=== #%d %s close=%s" % (i, ",".join(flag), close))
            print("  resp:", repr(data[:300]))
            print("  ebb:", a[0], repr(fe[-120:]), "| 2nd:", repr(se[-60:]))
            print("  hap:", b[0], repr(fh[-120:]), "| 2nd:", repr(sh[-60:]))
    print("differences:", nd, "desyncs:", nsmug, "of", N)
    e.terminate(); h.terminate()
    sys.exit(1 if nsmug else 0)

main()
