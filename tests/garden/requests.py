#!/usr/bin/env python3
"""Differential fuzzing of HTTP/1 requests: ebb and haproxy side by side.

Mutated requests (request lines, fields, framing, bodies, pipelining,
half-closes) go to ebb and to HAProxy 2.6, each in front of the same
recording origin; the script compares the statuses the client gets and
the requests the origin receives. A difference where ebb answers 4xx and
forwards nothing while HAProxy forwards is counted as "stricter" (written
to target/garden/strict.txt); the others are printed. Exit status 1 when
ebb dies or hangs where HAProxy answers.

    tests/garden/requests.py [EBB] [SEED] [N]    # CRLF=1: CRLF line ends only
"""
import os, random, socket, subprocess, sys, threading, time, re

from common import WORK, config, free_port, origin, start_pair
EBB = sys.argv[1] if len(sys.argv) > 1 else "target/release/ebb"
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 1
N = int(sys.argv[3]) if len(sys.argv) > 3 else 300
OPORT, EPORT, HPORT = free_port(), free_port(), free_port()

recv = {}  # tag -> list of (head, body)
lock = threading.Lock()

def parse_reqs(buf):
    out = []
    while True:
        i = buf.find(b"\r\n\r\n")
        if i < 0: return out, buf
        head = buf[:i].decode("latin1"); rest = buf[i+4:]
        lines = head.split("\r\n")
        hdrs = [l.split(":", 1) for l in lines[1:]]
        h = {k.strip().lower(): v.strip() for k, v in hdrs if True}
        body = b""
        if "chunked" in h.get("transfer-encoding", "").lower():
            while True:
                j = rest.find(b"\r\n")
                if j < 0: return out, buf
                sz = int(rest[:j].split(b";")[0], 16)
                if sz == 0:
                    k = rest.find(b"\r\n\r\n", j - 2 if j >= 2 else 0)
                    k = rest.find(b"\r\n", j + 2)
                    # trailers: read until empty line
                    p = j + 2
                    while True:
                        q = rest.find(b"\r\n", p)
                        if q < 0: return out, buf
                        if q == p: rest = rest[q+2:]; break
                        p = q + 2
                    break
                if len(rest) < j + 2 + sz + 2: return out, buf
                body += rest[j+2:j+2+sz]; rest = rest[j+2+sz+2:]
        elif "content-length" in h:
            n = int(h["content-length"])
            if len(rest) < n: return out, buf
            body = rest[:n]; rest = rest[n:]
        out.append((lines, body)); buf = rest


def serve(c):
    buf = b""
    try:
        while True:
            d = c.recv(65536)
            if not d: break
            buf += d
            reqs, buf = parse_reqs(buf)
            for lines, body in reqs:
                tag = None
                for l in lines[1:]:
                    if l.lower().startswith("x-tag:"): tag = l.split(":", 1)[1].strip()
                with lock: recv.setdefault(tag, []).append((lines, body))
                payload = b"ok %d" % len(body)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
    except Exception as e:
        pass
    c.close()

CFG = config(["timeout client 2s", "timeout server 2s", "timeout http-request 1s"])

def start():
    return start_pair(EBB, CFG, "", EPORT, HPORT, OPORT)

def exchange(port, data, halfclose):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(3)
    try:
        s.sendall(data)
        if halfclose: s.shutdown(socket.SHUT_WR)
    except OSError: pass
    out = b""
    t0 = time.time()
    try:
        while time.time() - t0 < 4:
            d = s.recv(65536)
            if not d: break
            out += d
    except (socket.timeout, OSError): out += b"<TIMEOUT>" if not out.endswith(b"<RESET>") else b""
    s.close()
    return out

def statuses(resp):
    return re.findall(rb"HTTP/1\.[01] (\d{3})", resp)

R = random.Random(SEED)
BODY = b"hello world 0123456789"
def base(tag):
    k = R.randrange(5)
    if k == 0: return [b"GET /a?b=c HTTP/1.1", b"Host: example.com", b"X-Tag: " + tag], b""
    if k == 1: return [b"POST /p HTTP/1.1", b"Host: example.com", b"X-Tag: " + tag, b"Content-Length: %d" % len(BODY)], BODY
    if k == 2:
        ch = b"%x\r\n%s\r\n" % (10, BODY[:10]) + b"%x\r\n%s\r\n" % (len(BODY) - 10, BODY[10:]) + b"0\r\n\r\n"
        return [b"POST /c HTTP/1.1", b"Host: example.com", b"X-Tag: " + tag, b"Transfer-Encoding: chunked"], ch
    if k == 3: return [b"GET http://example.com/abs HTTP/1.1", b"Host: example.com", b"X-Tag: " + tag], b""
    return [b"HTTP/1.0 style", b"X-Tag: " + tag], None

JUNK = [b" ", b"\t", b"\r", b"\n", b"\x00", b"\x0b", b"\x0c", b"\x7f", b"\x80", b"\xff", b",", b";", b":", b"\"", b"=", b"%", b"#", b"?", b"/", b"\\", b"0", b"-", b"+", b"x"]
HDRS = [b"Content-Length: 5", b"Content-Length: 0", b"Content-Length: +5", b"Content-Length: 05", b"Content-Length: 5, 5",
        b"Content-Length: 5,6", b"Content-Length:", b"Transfer-Encoding: chunked", b"Transfer-Encoding: Chunked",
        b"Transfer-Encoding: chunked, identity", b"Transfer-Encoding: identity", b"Transfer-Encoding: gzip, chunked",
        b"Transfer-Encoding:\tchunked", b"Transfer-Encoding : chunked", b" Transfer-Encoding: chunked",
        b"Transfer-Encoding: xchunked", b"Transfer-Encoding: chunked\r\n x", b"Host: other.com", b"Host:", b"Host: a b",
        b"Connection: close", b"Connection: keep-alive, close", b"Connection: upgrade", b"Upgrade: websocket",
        b"Expect: 100-continue", b"Expect: 100-Continue", b"TE: trailers", b"Trailer: x", b"Content-Length: 18446744073709551617",
        b"X: \x01", b"X\x00: y", b"X:y", b":x", b"X-Forwarded-For: 1.2.3.4", b"Proxy-Connection: close", b"Keep-Alive: 300",
        b"Content-Length: 1e3", b"Content-Length: -1", b"Content-Length: 0x10", b"Host: example.com:80", b"Host: [::1]:80"]
RL = [b"GET / HTTP/1.1", b"get / HTTP/1.1", b"GET  / HTTP/1.1", b"GET / HTTP/1.1 ", b"GET /\t HTTP/1.1", b"GET / HTTP/1.0",
      b"GET / HTTP/1.2", b"GET / HTTP/2.0", b"GET / http/1.1", b"GET / HTTP/01.1", b"GET / HTTP/1.10", b"GET /", b"GET * HTTP/1.1",
      b"OPTIONS * HTTP/1.1", b"CONNECT example.com:443 HTTP/1.1", b"GET //x HTTP/1.1", b"GET /%00 HTTP/1.1", b"GET /a#b HTTP/1.1",
      b"GET http://a.com:80/ HTTP/1.1", b"GET https://example.com/ HTTP/1.1", b"G\x00T / HTTP/1.1", b"GET /\x7f HTTP/1.1",
      b"GE(T / HTTP/1.1", b"PRI * HTTP/2.0", b"HEAD / HTTP/1.1", b"TRACE / HTTP/1.1", b"DELETE / HTTP/1.1",
      b"GET ?x HTTP/1.1", b"GET a HTTP/1.1", b"GET /\xc3\xa9 HTTP/1.1"]

def mutate(tag):
    lines, body = base(tag)
    if body is None:
        lines[0] = R.choice(RL); body = b""
        lines.insert(1, b"Host: example.com")
    for _ in range(R.randrange(1, 4)):
        m = R.randrange(9)
        if m == 0: lines[0] = R.choice(RL)
        elif m == 1: lines.insert(R.randrange(1, len(lines) + 1), R.choice(HDRS))
        elif m == 2 and len(lines) > 2:
            i = R.randrange(1, len(lines)); lines.insert(i, lines[i])
        elif m == 3:
            i = R.randrange(len(lines)); l = lines[i]; p = R.randrange(len(l) + 1)
            lines[i] = l[:p] + R.choice(JUNK) + l[p:]
        elif m == 4 and body:
            p = R.randrange(len(body) + 1); body = body[:p] + R.choice(JUNK + [b"\r\n", b"0\r\n\r\n", b";ext=1", b"00", b"A"]) + body[p:]
        elif m == 5 and body:
            body = body[:R.randrange(len(body))]
        elif m == 6: body = body + R.choice([b"GET /smug HTTP/1.1\r\nHost: example.com\r\nX-Tag: " + tag + b"s\r\n\r\n", b"\r\n", b"junk"])
        elif m == 7:
            i = R.randrange(1, len(lines) + 1) if len(lines) > 1 else 1
            lines.insert(i, R.choice([b"X-A: b", b"X-A: " + b"a" * R.choice([100, 8000, 20000])]))
        elif m == 8: pass
    sep = b"\r\n" if os.environ.get("CRLF") else R.choice([b"\r\n"] * 8 + [b"\n", b"\r\n"])
    data = sep.join(lines) + sep + sep + body
    if R.random() < 0.3:
        data += b"GET /second HTTP/1.1\r\nHost: example.com\r\nX-Tag: " + tag + b"2\r\n\r\n"
    return data

def norm(reqs):
    out = []
    for lines, body in reqs:
        hs = [l for l in lines[1:] if not l.lower().startswith(("x-tag", "connection", "x-forwarded-for"))]
        out.append((lines[0], tuple(sorted(h.lower() for h in hs)), body))
    return out

def main():
    origin(OPORT, serve)
    e, h = start()
    ndiff = 0
    nstrict = 0
    nhang = 0
    for i in range(N):
        tag = b"t%d" % i
        data = mutate(tag)
        if os.environ.get("ONE"):
            data = eval(os.environ["ONE"]).replace(b"TAG", tag)
        hc = R.random() < 0.3
        res = {}
        for name, port in (("ebb", EPORT), ("hap", HPORT)):
            t = (tag.decode() + name)
            d2 = data.replace(b"X-Tag: " + tag, b"X-Tag: " + t.encode())
            resp = exchange(port, d2, hc)
            time.sleep(0.05)
            with lock:
                got = {k: v for k, v in recv.items() if k and k.startswith(tag.decode()) and k.endswith(name) or (k and k.startswith(tag.decode()) and name in k)}
            res[name] = (statuses(resp), resp, got)
        if e.poll() is not None:
            print("EBB DIED at", i, repr(data)); h.terminate(); sys.exit(1)
        es, er, eg = res["ebb"]; hs_, hr, hg = res["hap"]
        def fwd(g):
            return sorted((k.replace("ebb", "").replace("hap", ""), tuple(norm(v))) for k, v in g.items())
        ef, hf = fwd(eg), fwd(hg)
        timeout_e = er.endswith(b"<TIMEOUT>")
        flag = []
        if ef != hf: flag.append("FORWARD")
        if [x[:1] for x in es] != [x[:1] for x in hs_]: flag.append("STATUS")
        if timeout_e and not hr.endswith(b"<TIMEOUT>"): flag.append("EBB-HANG")
        stricter = es and all(x.startswith(b"4") for x in es[:1]) and not ef and hf
        if flag and stricter and "EBB-HANG" not in flag:
            nstrict += 1
            open(WORK + "/strict.txt", "a").write(repr(data[:300]) + "\n")
            continue
        if flag:
            ndiff += 1
            nhang += "EBB-HANG" in flag
            print("=== #%d %s hc=%s" % (i, ",".join(flag), hc))
            print("  req:", repr(data[:600]))
            print("  ebb:", es, repr(er[-80:]), ef)
            print("  hap:", hs_, repr(hr[-80:]), hf)
    print("differences:", ndiff, "stricter:", nstrict, "hangs:", nhang, "of", N)
    e.terminate(); h.terminate()
    sys.exit(1 if nhang else 0)

main()
