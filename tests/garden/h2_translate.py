#!/usr/bin/env python3
"""HTTP/2 requests translated to HTTP/1: ebb and haproxy side by side.

A fixed list of HTTP/2 requests (python `h2`, its validation off) with
malformed or unusual fields, pseudo-headers, lengths and trailers goes to
an h2c bind of ebb and of HAProxy 2.6, each in front of the same recording
HTTP/1 origin; the script prints what each answered (status, RST_STREAM or
GOAWAY code) and, where they differ, what reached the origin.

    tests/garden/h2_translate.py [EBB]
"""
import os, socket, subprocess, sys, threading, time, re
import h2.connection, h2.config, h2.events

from common import free_port, origin, start_pair
EBB = sys.argv[1] if len(sys.argv) > 1 else "target/release/ebb"
OPORT, EPORT, HPORT = free_port(), free_port(), free_port()
seen = {}
lock = threading.Lock()


def serve(c):
    c.settimeout(2)
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d: return
                buf += d
            i = buf.find(b"\r\n\r\n"); head = buf[:i].decode("latin1"); buf = buf[i+4:]
            lines = head.split("\r\n")
            hd = {}
            for l in lines[1:]:
                k, _, v = l.partition(":"); hd.setdefault(k.strip().lower(), []).append(v.strip())
            body = b""
            if "chunked" in ",".join(hd.get("transfer-encoding", [])):
                while True:
                    while b"\r\n" not in buf:
                        d = c.recv(65536)
                        if not d: return
                        buf += d
                    j = buf.find(b"\r\n"); n = int(buf[:j].split(b";")[0], 16)
                    while len(buf) < j + 2 + n + 2:
                        d = c.recv(65536)
                        if not d: return
                        buf += d
                    if n == 0:
                        # trailers
                        while b"\r\n\r\n" not in buf[j:]:
                            d = c.recv(65536)
                            if not d: return
                            buf += d
                        k = buf.find(b"\r\n\r\n", j)
                        trailers = buf[j+2:k]; buf = buf[k+4:]
                        if trailers: hd["<trailers>"] = [trailers.decode("latin1")]
                        break
                    body += buf[j+2:j+2+n]; buf = buf[j+2+n+2:]
            elif "content-length" in hd:
                n = int(hd["content-length"][0])
                while len(buf) < n:
                    d = c.recv(65536)
                    if not d: return
                    buf += d
                body = buf[:n]; buf = buf[n:]
            tag = hd.get("x-tag", ["?"])[0]
            with lock: seen.setdefault(tag, []).append((lines[0], {k: v for k, v in hd.items() if k not in ("x-tag", "x-forwarded-for", "connection")}, body))
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    except (OSError, ValueError):
        pass
    finally:
        c.close()

CFGE = """defaults
    mode http
    timeout connect 2s
    timeout client 3s
    timeout server 2s
frontend fe
    bind 127.0.0.1:%d proto h2
    default_backend be
backend be
    server o 127.0.0.1:%d
"""

def h2req(port, headers, data=None, end=True, trailers=None, split_data=None):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(2)
    cfg = h2.config.H2Configuration(client_side=True, validate_outbound_headers=False, normalize_outbound_headers=False, validate_inbound_headers=False)
    c = h2.connection.H2Connection(config=cfg)
    c.initiate_connection(); s.sendall(c.data_to_send())
    sid = c.get_next_available_stream_id()
    try:
        c.send_headers(sid, headers, end_stream=(data is None and trailers is None))
        if data is not None:
            c.send_data(sid, data, end_stream=trailers is None)
        if trailers is not None:
            c.send_headers(sid, trailers, end_stream=True)
        s.sendall(c.data_to_send())
    except Exception as e:
        return ("client-error", str(e)[:60])
    result = None; body = b""
    t0 = time.time()
    try:
        while time.time() - t0 < 3 and result is None:
            d = s.recv(65536)
            if not d: result = ("closed",); break
            for ev in c.receive_data(d):
                if isinstance(ev, h2.events.ResponseReceived): status = dict(ev.headers).get(b":status")
                elif isinstance(ev, h2.events.DataReceived): body += ev.data
                elif isinstance(ev, h2.events.StreamEnded): result = ("status", status)
                elif isinstance(ev, h2.events.StreamReset): result = ("rst", int(ev.error_code))
                elif isinstance(ev, h2.events.ConnectionTerminated): result = ("goaway", int(ev.error_code))
            try: s.sendall(c.data_to_send())
            except OSError: pass
    except socket.timeout: result = result or ("timeout",)
    except Exception as e: result = result or ("err", type(e).__name__)
    s.close()
    return result

def base(tag, method="GET", path="/p", auth="example.com"):
    return [(":method", method), (":scheme", "http"), (":path", path), (":authority", auth), ("x-tag", tag)]

CASES = []
def case(name, hdrs, **kw): CASES.append((name, hdrs, kw))
case("plain", lambda t: base(t))
case("host-and-authority-differ", lambda t: base(t) + [("host", "other.com")])
case("host-only", lambda t: [(":method", "GET"), (":scheme", "http"), (":path", "/p"), ("host", "h.com"), ("x-tag", t)])
case("cl-mismatch-more-data", lambda t: base(t, "POST") + [("content-length", "5")], data=b"0123456789")
case("cl-mismatch-less-data", lambda t: base(t, "POST") + [("content-length", "15")], data=b"0123456789")
case("cl-with-no-data", lambda t: base(t, "POST") + [("content-length", "5")])
case("te-chunked", lambda t: base(t, "POST") + [("transfer-encoding", "chunked")], data=b"5\r\nhello\r\n0\r\n\r\n")
case("connection-hdr", lambda t: base(t) + [("connection", "keep-alive")])
case("keep-alive-hdr", lambda t: base(t) + [("keep-alive", "300")])
case("proxy-connection", lambda t: base(t) + [("proxy-connection", "close")])
case("upgrade-hdr", lambda t: base(t) + [("upgrade", "websocket")])
case("te-gzip", lambda t: base(t) + [("te", "gzip")])
case("te-trailers", lambda t: base(t) + [("te", "trailers")])
case("uppercase-name", lambda t: base(t) + [("X-Upper", "v")])
case("crlf-in-value", lambda t: base(t) + [("x-a", "b\r\nTransfer-Encoding: chunked")])
case("lf-in-value", lambda t: base(t) + [("x-a", "b\nx-b: c")])
case("nul-in-value", lambda t: base(t) + [("x-a", "b\x00c")])
case("space-in-name", lambda t: base(t) + [("x a", "b")])
case("colon-in-name", lambda t: base(t) + [("x:a", "b")])
case("empty-name", lambda t: base(t) + [("", "b")])
case("leading-space-value", lambda t: base(t) + [("x-a", " b")])
case("trailing-space-value", lambda t: base(t) + [("x-a", "b ")])
case("tab-in-value", lambda t: base(t) + [("x-a", "b\tc")])
case("path-empty", lambda t: base(t, path=""))
case("path-no-slash", lambda t: base(t, path="p"))
case("path-star-get", lambda t: base(t, path="*"))
case("path-star-options", lambda t: base(t, method="OPTIONS", path="*"))
case("path-absolute", lambda t: base(t, path="http://evil.com/x"))
case("path-space", lambda t: base(t, path="/a b"))
case("path-crlf", lambda t: base(t, path="/a\r\nX: y"))
case("path-fragment", lambda t: base(t, path="/a#b"))
case("method-lower", lambda t: base(t, method="get"))
case("method-space", lambda t: base(t, method="GET /x"))
case("authority-userinfo", lambda t: base(t, auth="u@example.com"))
case("authority-bad", lambda t: base(t, auth="exa mple.com"))
case("authority-crlf", lambda t: base(t, auth="a.com\r\nX: y"))
case("authority-empty", lambda t: base(t, auth=""))
case("scheme-https", lambda t: [(":method", "GET"), (":scheme", "https"), (":path", "/p"), (":authority", "e.com"), ("x-tag", t)])
case("scheme-weird", lambda t: [(":method", "GET"), (":scheme", "foo"), (":path", "/p"), (":authority", "e.com"), ("x-tag", t)])
case("pseudo-after-regular", lambda t: [(":method", "GET"), (":scheme", "http"), ("x-tag", t), (":path", "/p"), (":authority", "e.com")])
case("dup-path", lambda t: base(t) + [(":path", "/q")])
case("unknown-pseudo", lambda t: base(t) + [(":foo", "bar")])
case("missing-method", lambda t: [(":scheme", "http"), (":path", "/p"), (":authority", "e.com"), ("x-tag", t)])
case("missing-path", lambda t: [(":method", "GET"), (":scheme", "http"), (":authority", "e.com"), ("x-tag", t)])
case("cookies-split", lambda t: base(t) + [("cookie", "a=1"), ("cookie", "b=2")])
case("two-cl-same", lambda t: base(t, "POST") + [("content-length", "5"), ("content-length", "5")], data=b"hello")
case("two-cl-diff", lambda t: base(t, "POST") + [("content-length", "5"), ("content-length", "6")], data=b"hello")
case("cl-plus", lambda t: base(t, "POST") + [("content-length", "+5")], data=b"hello")
case("body-no-cl", lambda t: base(t, "POST"), data=b"hello")
case("get-with-body", lambda t: base(t), data=b"hello")
case("trailers", lambda t: base(t, "POST"), data=b"hello", trailers=[("x-t", "1")])
case("trailers-pseudo", lambda t: base(t, "POST"), data=b"hello", trailers=[(":path", "/x")])
case("trailers-cl", lambda t: base(t, "POST"), data=b"hello", trailers=[("content-length", "5")])
case("trailers-crlf", lambda t: base(t, "POST"), data=b"hello", trailers=[("x-t", "a\r\nb: c")])
case("connect-plain", lambda t: [(":method", "CONNECT"), (":authority", "e.com:443"), ("x-tag", t)])
case("connect-with-path", lambda t: [(":method", "CONNECT"), (":authority", "e.com:443"), (":path", "/"), ("x-tag", t)])
case("head-method", lambda t: base(t, "HEAD"))
case("huge-value", lambda t: base(t) + [("x-big", "a" * 70000)])
case("many-headers", lambda t: base(t) + [("x-h%d" % i, "v") for i in range(150)])
case("host-with-port-vs-auth", lambda t: base(t, auth="e.com:80") + [("host", "e.com:80")])
case("expect-100", lambda t: base(t, "POST") + [("expect", "100-continue"), ("content-length", "5")], data=b"hello")

def main():
    origin(OPORT, serve)
    e, h = start_pair(EBB, CFGE, "h2", EPORT, HPORT, OPORT)
    nd = 0
    for name, hf, kw in CASES:
        out = {}
        for who, port in (("ebb", EPORT), ("hap", HPORT)):
            tag = name + "-" + who
            r = h2req(port, hf(tag), **kw)
            time.sleep(0.1)
            with lock: got = seen.get(tag, [])
            out[who] = (r, got)
        if e.poll() is not None:
            print("EBB DIED at", name); h.terminate(); sys.exit(1)
        (re_, ge), (rh, gh) = out["ebb"], out["hap"]
        fe = [(a, b, c) for a, b, c in ge]; fh = [(a, b, c) for a, b, c in gh]
        same_fwd = repr(fe).replace("-ebb", "") == repr(fh).replace("-hap", "")
        mark = "" if (re_ == rh and same_fwd) else "DIFF"
        if mark: nd += 1
        print("%-28s %-4s ebb=%-22s hap=%-22s" % (name, mark, re_, rh))
        if not same_fwd:
            print("    ebb fwd:", repr(fe)[:400]); print("    hap fwd:", repr(fh)[:400])
    print("differences:", nd, "of", len(CASES))
    e.terminate(); h.terminate()
main()
