#!/usr/bin/env python3
"""A hostile HTTP/2 origin behind ebb and haproxy, side by side.

The origin (`server ... proto h2`, h2c) speaks raw frames: each request
whose `x-tag` names a case gets that case's frames (bad HPACK, odd or
illegal field names and values, pseudo-headers in answers, no or a bad
`:status`, 1xx sequences, lengths against DATA, DATA or HEADERS after
END_STREAM, RST_STREAM or GOAWAY or a close mid-answer, trailers, huge
heads, CONTINUATION splits, flow-control and frame-size abuse,
PUSH_PROMISE, frames on the wrong stream); any other request gets a
plain 200. Each case goes through ebb and through HAProxy 2.6 from an
HTTP/1 client and from an HTTP/2 (h2c) client, the latter with a plain
sibling stream beside it (on the same server connection); after it, a
second request on the same client connection (when still open) and one
on a new connection. The script prints each case where the client
outcomes differ, and exits 1 when ebb dies, leaves a new-connection
request unanswered, hangs (or leaves the sibling unanswered) where
HAProxy answers, or holds more descriptors at the end than at the start
(a leak). HAProxy 2.6.12 aborts on two cases: it is started again, and
the cases are named at the end.

    tests/garden/h2_origin.py [EBB] [ONLY]
"""
import os, socket, struct, sys, threading, time, re
import hpack
import h2.connection, h2.config, h2.events

from common import WORK, config, free_port, origin, start, wait_listening
EBB = sys.argv[1] if len(sys.argv) > 1 else "target/release/ebb"
ONLY = sys.argv[2] if len(sys.argv) > 2 else None
OPORT, EPORT, HPORT = free_port(), free_port(), free_port()
E2PORT, H2PORT = free_port(), free_port()

# --- frames ---------------------------------------------------------------
DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WINUP, CONT = range(10)
ES, EH, PADDED = 0x1, 0x4, 0x8


def frame(t, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", sid) + payload


def hint(n, prefix, first=0):
    """An HPACK integer with an N-bit prefix."""
    lim = (1 << prefix) - 1
    if n < lim:
        return bytes([first | n])
    out = [first | lim]; n -= lim
    while n >= 128:
        out.append(n % 128 + 128); n //= 128
    out.append(n)
    return bytes(out)


def lit(name, value):
    """A literal field without indexing, new name, no Huffman: any bytes."""
    if isinstance(name, str): name = name.encode("latin1")
    if isinstance(value, str): value = value.encode("latin1")
    return b"\x00" + hint(len(name), 7) + name + hint(len(value), 7) + value


def block(fields):
    return b"".join(lit(n, v) for n, v in fields)


def hdrs(sid, fields, es=False, raw=None):
    return frame(HEADERS, EH | (ES if es else 0), sid, raw if raw is not None else block(fields))


def data(sid, payload, es=False):
    return frame(DATA, ES if es else 0, sid, payload)


def rst(sid, code):
    return frame(RST, 0, sid, struct.pack(">I", code))


def goaway(last, code):
    return frame(GOAWAY, 0, 0, struct.pack(">II", last, code))


OK5 = [(":status", "200"), ("content-length", "5")]

# Each case: function of the stream id -> (list of byte strings, close after)
def ok(fields, body=b"hello"):
    return lambda s: ([hdrs(s, fields), data(s, body, True)], False)


def cont_split(s, fields, parts, body=b"hello"):
    b = block(fields); n = max(1, len(b) // parts); out = []
    chunks = [b[i:i + n] for i in range(0, len(b), n)]
    for i, c in enumerate(chunks):
        last = i == len(chunks) - 1
        out.append(frame(HEADERS if i == 0 else CONT, EH if last else 0, s, c))
    return out + [data(s, body, True)]


CASES = {
    "control": ok(OK5),
    "no_length": ok([(":status", "200")]),
    "hpack_bad_index": lambda s: ([hdrs(s, None, raw=b"\xff\xff\xff\xff\x0f")], False),
    "hpack_truncated": lambda s: ([hdrs(s, None, raw=b"\x88\x00\x05ab")], False),
    "hpack_bad_huffman": lambda s: ([hdrs(s, None, raw=b"\x88\x00\x81\xff\x01v")], False),
    "hpack_table_size_up": lambda s: ([hdrs(s, None, raw=b"\x3f\xe1\xff\x03\x88"), data(s, b"hello", True)], False),
    "hpack_size_update_late": lambda s: ([hdrs(s, None, raw=b"\x88\x20"), data(s, b"hello", True)], False),
    "name_upper": ok(OK5 + [("X-Up", "v")]),
    "name_space": ok(OK5 + [("x y", "v")]),
    "name_colon": ok(OK5 + [("x:y", "v")]),
    "name_empty": ok(OK5 + [("", "v")]),
    "name_del": ok(OK5 + [("x\x7fy", "v")]),
    "value_crlf": ok(OK5 + [("x-v", "a\r\nX-Injected: 1")]),
    "value_lf": ok(OK5 + [("x-v", "a\nb")]),
    "value_nul": ok(OK5 + [("x-v", "a\x00b")]),
    "value_lead_space": ok(OK5 + [("x-v", " a")]),
    "value_trail_tab": ok(OK5 + [("x-v", "a\t")]),
    "value_high": ok(OK5 + [("x-v", "caf\xe9")]),
    "conn_connection": ok(OK5 + [("connection", "close")]),
    "conn_keepalive": ok(OK5 + [("keep-alive", "timeout=5")]),
    "conn_te_chunked": ok(OK5 + [("transfer-encoding", "chunked")]),
    "conn_te_chunked_nolen": ok([(":status", "200"), ("transfer-encoding", "chunked")]),
    "conn_upgrade": ok(OK5 + [("upgrade", "h2c")]),
    "conn_proxy_connection": ok(OK5 + [("proxy-connection", "close")]),
    "te_trailers": ok(OK5 + [("te", "trailers")]),
    "pseudo_unknown": ok(OK5 + [(":foo", "x")]),
    "pseudo_after_regular": ok([("content-length", "5"), (":status", "200")]),
    "pseudo_path": ok(OK5 + [(":path", "/x")]),
    "pseudo_status_twice": ok(OK5 + [(":status", "201")]),
    "status_missing": ok([("content-length", "5")]),
    "status_empty": ok([(":status", ""), ("content-length", "5")]),
    "status_2digit": ok([(":status", "20"), ("content-length", "5")]),
    "status_4digit": ok([(":status", "2000"), ("content-length", "5")]),
    "status_alpha": ok([(":status", "abc"), ("content-length", "5")]),
    "status_099": ok([(":status", "099"), ("content-length", "5")]),
    "status_600": ok([(":status", "600"), ("content-length", "5")]),
    "status_999": ok([(":status", "999"), ("content-length", "5")]),
    "status_space": ok([(":status", " 200"), ("content-length", "5")]),
    "status_reason": ok([(":status", "200 OK"), ("content-length", "5")]),
    "status_101": ok([(":status", "101"), ("upgrade", "websocket")]),
    "status_204_data": ok([(":status", "204")]),
    "status_304_data": ok([(":status", "304")]),
    "interim_103": lambda s: ([hdrs(s, [(":status", "103"), ("link", "</a>")]), hdrs(s, OK5), data(s, b"hello", True)], False),
    "interim_100_100": lambda s: ([hdrs(s, [(":status", "100")]), hdrs(s, [(":status", "100")]), hdrs(s, OK5), data(s, b"hello", True)], False),
    "interim_with_es": lambda s: ([hdrs(s, [(":status", "100")], es=True)], False),
    "interim_then_rst": lambda s: ([hdrs(s, [(":status", "103")]), rst(s, 2)], False),
    "interim_with_length": lambda s: ([hdrs(s, [(":status", "100"), ("content-length", "5")]), hdrs(s, OK5), data(s, b"hello", True)], False),
    "interim_then_data": lambda s: ([hdrs(s, [(":status", "100")]), data(s, b"hello"), hdrs(s, OK5), data(s, b"hello", True)], False),
    "cl_short": ok([(":status", "200"), ("content-length", "3")]),
    "cl_long": ok([(":status", "200"), ("content-length", "10")]),
    "cl_headers_es": lambda s: ([hdrs(s, OK5, es=True)], False),
    "cl_alpha": ok([(":status", "200"), ("content-length", "abc")]),
    "cl_list": ok([(":status", "200"), ("content-length", "5, 5")]),
    "cl_two_same": ok([(":status", "200"), ("content-length", "5"), ("content-length", "5")]),
    "cl_two_differ": ok([(":status", "200"), ("content-length", "5"), ("content-length", "6")]),
    "cl_negative": ok([(":status", "200"), ("content-length", "-5")]),
    "cl_plus": ok([(":status", "200"), ("content-length", "+5")]),
    "data_after_es": lambda s: ([hdrs(s, OK5), data(s, b"hello", True), data(s, b"EXTRA", True)], False),
    "headers_after_es": lambda s: ([hdrs(s, OK5), data(s, b"hello", True), hdrs(s, [("x-late", "1")], es=True)], False),
    "data_before_headers": lambda s: ([data(s, b"hello"), hdrs(s, OK5), data(s, b"hello", True)], False),
    "rst_mid": lambda s: ([hdrs(s, [(":status", "200"), ("content-length", "10")]), data(s, b"hello"), rst(s, 2)], False),
    "rst_before": lambda s: ([rst(s, 2)], False),
    "rst_refused": lambda s: ([rst(s, 7)], False),
    "rst_no_error_after_es": lambda s: ([hdrs(s, OK5), data(s, b"hello", True), rst(s, 0)], False),
    "goaway_mid": lambda s: ([hdrs(s, [(":status", "200"), ("content-length", "10")]), data(s, b"hello"), goaway(s, 0)], True),
    "goaway_before": lambda s: ([goaway(0, 0)], True),
    "goaway_error_after": lambda s: ([hdrs(s, OK5), data(s, b"hello", True), goaway(s, 2)], True),
    "close_mid": lambda s: ([hdrs(s, [(":status", "200"), ("content-length", "10")]), data(s, b"hello")], True),
    "close_before": lambda s: ([], True),
    "close_after_headers_nolen": lambda s: ([hdrs(s, [(":status", "200")]), data(s, b"hello")], True),
    "trailers": lambda s: ([hdrs(s, [(":status", "200")]), data(s, b"hello"), hdrs(s, [("x-t", "1")], es=True)], False),
    "trailers_with_length": lambda s: ([hdrs(s, OK5), data(s, b"hello"), hdrs(s, [("x-t", "1")], es=True)], False),
    "trailers_pseudo": lambda s: ([hdrs(s, [(":status", "200")]), data(s, b"hello"), hdrs(s, [(":status", "200")], es=True)], False),
    "trailers_no_es": lambda s: ([hdrs(s, [(":status", "200")]), data(s, b"hello"), hdrs(s, [("x-t", "1")]), data(s, b"more", True)], False),
    "trailers_upper": lambda s: ([hdrs(s, [(":status", "200")]), data(s, b"hello"), hdrs(s, [("X-T", "1")], es=True)], False),
    "huge_one_field": lambda s: (cont_split(s, OK5 + [("x-big", "b" * 100000)], 8), False),
    "big_field_fits": lambda s: (cont_split(s, OK5 + [("x-big", "b" * 12000)], 2), False),
    "many_fields": ok(OK5 + [("x-f%d" % i, "v") for i in range(300)]),
    "cont_split3": lambda s: (cont_split(s, OK5 + [("x-a", "a" * 50), ("x-b", "b" * 50)], 3), False),
    "cont_split_1byte": lambda s: (cont_split(s, OK5 + [("x-a", "abc")], 1000), False),
    "cont_interleaved_data": lambda s: ([frame(HEADERS, 0, s, block(OK5)[:3]), data(s, b"hello"), frame(CONT, EH, s, block(OK5)[3:]), data(s, b"hello", True)], False),
    "cont_wrong_stream": lambda s: ([frame(HEADERS, 0, s, block(OK5)[:3]), frame(CONT, EH, s + 2, block(OK5)[3:]), data(s, b"hello", True)], False),
    "cont_orphan": lambda s: ([frame(CONT, EH, s, block(OK5)), data(s, b"hello", True)], False),
    "headers_padded_bad": lambda s: ([frame(HEADERS, EH | PADDED, s, b"\xff" + block(OK5)), data(s, b"hello", True)], False),
    "headers_padded_ok": lambda s: ([frame(HEADERS, EH | PADDED, s, b"\x04" + block(OK5) + b"\0" * 4), data(s, b"hello", True)], False),
    "headers_priority_flag": lambda s: ([frame(HEADERS, EH | 0x20, s, b"\x00\x00\x00\x00\x10" + block(OK5)), data(s, b"hello", True)], False),
    "data_padded": lambda s: ([hdrs(s, OK5), frame(DATA, ES | PADDED, s, b"\x03hello\0\0\0")], False),
    "data_padded_bad": lambda s: ([hdrs(s, OK5), frame(DATA, ES | PADDED, s, b"\x09hello")], False),
    "flow_overrun": lambda s: ([hdrs(s, [(":status", "200"), ("content-length", "100000")])] + [data(s, b"x" * 16384) for _ in range(6)] + [data(s, b"x" * (100000 - 6 * 16384), True)], False),
    "flow_at_window": lambda s: ([hdrs(s, [(":status", "200"), ("content-length", "65535")])] + [data(s, b"x" * 16383, False) for _ in range(4)] + [data(s, b"x" * 3, True)], False),
    "frame_too_big": lambda s: ([hdrs(s, [(":status", "200"), ("content-length", "20000")]), data(s, b"x" * 20000, True)], False),
    "window_update_zero": lambda s: ([hdrs(s, OK5), frame(WINUP, 0, s, b"\0\0\0\0"), data(s, b"hello", True)], False),
    "window_update_overflow": lambda s: ([frame(WINUP, 0, 0, b"\x7f\xff\xff\xff"), hdrs(s, OK5), data(s, b"hello", True)], False),
    "push_promise": lambda s: ([frame(PUSH, EH, s, struct.pack(">I", 2) + block([(":method", "GET"), (":path", "/p"), (":scheme", "http"), (":authority", "h")])), hdrs(s, OK5), data(s, b"hello", True)], False),
    "settings_bad_window": lambda s: ([frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0x80000000)), hdrs(s, OK5), data(s, b"hello", True)], False),
    "settings_bad_frame_size": lambda s: ([frame(SETTINGS, 0, 0, struct.pack(">HI", 5, 100)), hdrs(s, OK5), data(s, b"hello", True)], False),
    "settings_on_stream": lambda s: ([frame(SETTINGS, 0, s, b""), hdrs(s, OK5), data(s, b"hello", True)], False),
    "settings_enable_push_2": lambda s: ([frame(SETTINGS, 0, 0, struct.pack(">HI", 2, 2)), hdrs(s, OK5), data(s, b"hello", True)], False),
    "ping_bad_len": lambda s: ([frame(PING, 0, 0, b"\0" * 7), hdrs(s, OK5), data(s, b"hello", True)], False),
    "unknown_frame": lambda s: ([hdrs(s, OK5), frame(0x42, 0xff, s, b"junk"), data(s, b"hello", True)], False),
    "priority_self": lambda s: ([frame(PRIORITY, 0, s, struct.pack(">IB", s, 16)), hdrs(s, OK5), data(s, b"hello", True)], False),
    "data_stream0": lambda s: ([hdrs(s, OK5), data(0, b"hello"), data(s, b"hello", True)], False),
    "headers_idle_stream": lambda s: ([hdrs(s + 2, OK5, es=True), hdrs(s, OK5), data(s, b"hello", True)], False),
    "headers_even_stream": lambda s: ([hdrs(2, OK5, es=True), hdrs(s, OK5), data(s, b"hello", True)], False),
    "garbage": lambda s: ([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"], True),
    "body_64k": lambda s: ([hdrs(s, [(":status", "200"), ("content-length", "60000")])] + [data(s, b"y" * 15000, i == 3) for i in range(4)], False),
}

# --- the origin -----------------------------------------------------------

PROCS = []


def recv_exact(c, n, buf):
    while len(buf) < n:
        d = c.recv(65536)
        if not d: raise EOFError
        buf += d
    return buf


def serve(c):
    c.settimeout(10)
    dec = hpack.Decoder(); dec.max_header_list_size = 1 << 20
    buf = b""
    try:
        buf = recv_exact(c, 24, buf)
        if not buf.startswith(b"PRI * HTTP/2.0"): c.close(); return
        buf = buf[24:]
        c.sendall(frame(SETTINGS, 0, 0, b""))
        hblock = {}
        while True:
            buf = recv_exact(c, 9, buf)
            ln = int.from_bytes(buf[:3], "big"); t = buf[3]; fl = buf[4]; sid = int.from_bytes(buf[5:9], "big") & 0x7fffffff
            buf = recv_exact(c, 9 + ln, buf)
            pl = buf[9:9 + ln]; buf = buf[9 + ln:]
            if t == SETTINGS and not fl & 1:
                c.sendall(frame(SETTINGS, 1, 0)); continue
            if t == PING and not fl & 1:
                c.sendall(frame(PING, 1, 0, pl)); continue
            if t == HEADERS or t == CONT:
                if t == HEADERS:
                    if fl & PADDED: pl = pl[1:len(pl) - pl[0]]
                    if fl & 0x20: pl = pl[5:]
                    hblock[sid] = b""
                hblock[sid] += pl
                if not fl & EH: continue
                fields = dec.decode(hblock.pop(sid), raw=True)
                tag = dict(fields).get(b"x-tag", b"").decode()
                case = CASES.get(tag.split("/")[0])
                if case is None:
                    body = b"second " + tag.encode()
                    c.sendall(hdrs(sid, [(":status", "200"), ("content-length", str(len(body)))]) + data(sid, body, True))
                    continue
                frames, close = case(sid)
                c.sendall(b"".join(frames))
                if close:
                    c.shutdown(socket.SHUT_WR); time.sleep(0.2); c.close(); return
    except (OSError, EOFError, hpack.HPACKError, ValueError):
        pass
    c.close()


CFG = config(["timeout client 5s", "timeout server 2s", "http-reuse always"],
             "    bind 127.0.0.1:{h2port} proto h2\n", " proto h2")

# --- the clients ----------------------------------------------------------

def h1_read(s, limit=4.0):
    """Reads one answer (or until close/timeout): (bytes, how it ended)."""
    out = b""; t0 = time.time()
    while time.time() - t0 < limit:
        if b"\r\n\r\n" in out:
            final = [x for x in re.finditer(rb"HTTP/1\.[01] (\d{3})[^\r]*\r\n", out) if not x.group(1).startswith(b"1")]
            if final:
                fstart = final[-1].start(); fe = out.find(b"\r\n\r\n", fstart)
                if fe >= 0:
                    fh = out[fstart:fe + 4]; body = out[fe + 4:]
                    cl = re.search(rb"(?i)\r\ncontent-length: *(\d+)", fh)
                    if cl and len(body) >= int(cl.group(1)): return out, "done"
                    if re.search(rb"(?i)\r\ntransfer-encoding: *chunked", fh) and body.endswith(b"0\r\n\r\n"): return out, "done"
                    if re.search(rb"HTTP/1\.[01] (204|304)", fh): return out, "done"
        s.settimeout(max(0.05, limit - (time.time() - t0)))
        try:
            d = s.recv(65536)
        except socket.timeout:
            return out, "timeout"
        except OSError:
            return out, "reset"
        if not d: return out, "closed"
        out += d
    return out, "timeout"


def h1_summary(b, how):
    st = [x.decode() for x in re.findall(rb"HTTP/1\.[01] (\d{3})", b)]
    final = b.rsplit(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in b else b""
    body = re.sub(rb"\r\n", b"", final)
    hd = b.split(b"\r\n\r\n")[-2] if b.count(b"\r\n\r\n") else b""
    fields = sorted(set(re.findall(rb"(?im)^(x-[a-z0-9:-]*|connection|transfer-encoding|te|upgrade|keep-alive|proxy-connection|link):", hd)))
    # (Names compared without case: ebb keeps the server's, HAProxy
    # writes its own lower-case ones.)
    return "%s body=%r end=%s fields=%s" % ("/".join(st) or "-", body[:40], how, b",".join(fields).decode().lower())


def h1_case(port, tag):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /x HTTP/1.1\r\nHost: h\r\nX-Tag: " + tag.encode() + b"\r\n\r\n")
    first, how = h1_read(s)
    second = "-"
    if how == "done":
        try:
            s.sendall(b"GET /y HTTP/1.1\r\nHost: h\r\nX-Tag: s" + tag.encode() + b"\r\n\r\n")
            b, h2how = h1_read(s)
            second = "ok" if b"second s" + tag.encode() in b else "%s:%r" % (h2how, b[:40])
        except OSError as e:
            second = "err"
    s.close()
    return h1_summary(first, how), second, first


def h2_client(port):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(4)
    cfg = h2.config.H2Configuration(client_side=True, validate_inbound_headers=False, normalize_inbound_headers=False)
    c = h2.connection.H2Connection(config=cfg)
    c.initiate_connection(); s.sendall(c.data_to_send())
    return s, c


def h2_one(s, c, tag, limit=4.0, sibling=None):
    """Sends a GET tagged `tag` (and one tagged `sibling` right after it,
    when given, on the same connection) and reads until they end: the
    first one's summary and end, and the sibling's outcome ("ok" when its
    plain answer came whole)."""
    sids = {}
    for t in (tag, sibling):
        if t is None: continue
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "GET"), (":path", "/x"), (":scheme", "http"), (":authority", "h"), ("x-tag", t)], end_stream=True)
        sids[sid] = {"res": None, "status": [], "body": b"", "trailers": [], "names": set()}
    s.sendall(c.data_to_send())
    sid = min(sids)
    conn_end = None
    t0 = time.time()
    while conn_end is None and any(v["res"] is None for v in sids.values()) and time.time() - t0 < limit:
        s.settimeout(max(0.05, limit - (time.time() - t0)))
        try:
            d = s.recv(65536)
        except socket.timeout:
            break
        except OSError:
            conn_end = "reset"; break
        if not d:
            conn_end = "closed"; break
        try:
            evs = c.receive_data(d)
        except Exception as e:
            conn_end = "client-protocol-error:%s" % type(e).__name__; break
        for ev in evs:
            if isinstance(ev, h2.events.ConnectionTerminated):
                conn_end = "goaway:%d" % int(ev.error_code)
                continue
            st = sids.get(getattr(ev, "stream_id", None))
            if st is None: continue
            if isinstance(ev, (h2.events.ResponseReceived, h2.events.InformationalResponseReceived)):
                hd = dict(ev.headers); st["status"].append(hd.get(b":status", b"?").decode())
                st["names"] |= {n.decode() for n, v in ev.headers if n.startswith(b"x-") or n in (b"connection", b"transfer-encoding", b"link", b"te", b"upgrade")}
            elif isinstance(ev, h2.events.DataReceived):
                st["body"] += ev.data; c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived):
                st["trailers"] += [n.decode() for n, v in ev.headers]
            elif isinstance(ev, h2.events.StreamEnded):
                st["res"] = "end"
            elif isinstance(ev, h2.events.StreamReset):
                st["res"] = "rst:%d" % int(ev.error_code)
        try:
            s.sendall(c.data_to_send())
        except OSError:
            pass
    m = sids[sid]
    res = m["res"] or conn_end
    summ = "%s body=%r end=%s fields=%s trailers=%s" % ("/".join(m["status"]) or "-", m["body"][:40], res or "timeout", ",".join(sorted(m["names"])), ",".join(m["trailers"]))
    sib = None
    if sibling is not None:
        o = sids[max(sids)]
        if o["res"] == "end" and ("second " + sibling).encode() in o["body"]:
            sib = "ok"
        else:
            sib = "%s %s" % ("/".join(o["status"]) or "-", o["res"] or conn_end or "timeout")
    return summ, res, sib


def h2_case(port, tag):
    """The case's request with a plain sibling stream beside it, then a
    second request on the connection when it is still open."""
    s, c = h2_client(port)
    try:
        summ, res, sib = h2_one(s, c, tag, sibling="p" + tag)
    except Exception as e:
        summ, res, sib = "client-error:%s" % type(e).__name__, "err", "-"
    second = "-"
    if res is not None and not res.startswith(("goaway", "closed", "reset", "client")):
        try:
            ssum, _, _ = h2_one(s, c, "s" + tag)
            second = "ok" if "second s" + tag in ssum else ssum
        except Exception as e:
            second = "err:%s" % type(e).__name__
    s.close()
    return summ, second, sib


def alive(port, h2port, tag):
    """A plain request on a new connection, HTTP/1 then HTTP/2."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /z HTTP/1.1\r\nHost: h\r\nX-Tag: a" + tag.encode() + b"\r\n\r\n")
    b, _ = h1_read(s); s.close()
    ok1 = b"second a" + tag.encode() in b
    s, c = h2_client(h2port)
    try:
        summ, _, _ = h2_one(s, c, "b" + tag)
    except Exception:
        summ = ""
    s.close()
    return ok1 and ("second b" + tag) in summ


def fds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return -1


def main():
    origin(OPORT, serve)
    hcfg = CFG.replace("{h2port}", str(H2PORT)) % (HPORT, OPORT)
    e = start([EBB], CFG.replace("{h2port}", str(E2PORT)) % (EPORT, OPORT), "o", "e")
    h = start(["haproxy", "-db"], hcfg, "o", "h")
    PROCS.extend((e, h))
    wait_listening((EPORT, E2PORT, HPORT, H2PORT))
    alive(EPORT, E2PORT, "warm")
    fd0 = fds(e.pid)
    ndiff = 0; bad = 0; n = 0; hap_aborts = []
    for name in CASES:
        if ONLY and ONLY not in name: continue
        n += 1
        out = {}
        for side, p1, p2 in (("ebb", EPORT, E2PORT), ("hap", HPORT, H2PORT)):
            try:
                r1 = h1_case(p1, name + "/1" + side)
            except OSError:
                r1 = ("refused", "-")
            try:
                r2 = h2_case(p2, name + "/2" + side)
            except OSError:
                r2 = ("refused", "-", "-")
            if side == "ebb" and "refused" in (r1[0], r2[0]):
                print("!!! ebb refused a connection at %s (alive: %s)" % (name, e.poll() is None))
                sys.exit(1)
            if side == "hap" and h.poll() is not None:
                # HAProxy 2.6.12 aborted (its log says why): noted, started again.
                print("=== %s: HAProxy aborted (%s)" % (name, open("%s/oh.log" % WORK).read().strip().splitlines()[-10:][:1]))
                hap_aborts.append(name)
                h = start(["haproxy", "-db"], hcfg, "o", "h")
                PROCS.append(h)
                wait_listening((HPORT, H2PORT))
            out[side] = (r1[0].replace(side, "S"), r1[1], r2[0].replace(side, "S"), r2[1], r2[2])
            if side == "ebb":
                if e.poll() is not None:
                    print("EBB DIED at", name); sys.exit(1)
                if not alive(EPORT, E2PORT, name):
                    print("!!! ebb does not answer a new connection after", name); bad += 1
        a, b = out["ebb"], out["hap"]
        flags = []
        if a[0] != b[0] or a[1] != b[1]: flags.append("H1")
        if a[2] != b[2] or a[3] != b[3]: flags.append("H2")
        if a[4] != b[4]: flags.append("SIBLING")
        for x, y in ((a[0], b[0]), (a[2], b[2])):
            if "end=timeout" in x and "end=timeout" not in y:
                flags.append("EBB-HANGS"); bad += 1
        if a[4].endswith("timeout") and not b[4].endswith("timeout"):
            flags.append("EBB-HANGS-SIBLING"); bad += 1
        if flags:
            ndiff += 1
        if flags or os.environ.get("V"):
            print("=== %s %s" % (name, ",".join(flags)))
            print("  h1 ebb: %s | 2nd %s" % (a[0], a[1]))
            print("  h1 hap: %s | 2nd %s" % (b[0], b[1]))
            print("  h2 ebb: %s | 2nd %s | sibling %s" % (a[2], a[3], a[4]))
            print("  h2 hap: %s | 2nd %s | sibling %s" % (b[2], b[3], b[4]))
    # Let ebb's timeouts pass, then count its descriptors again.
    time.sleep(3)
    alive(EPORT, E2PORT, "end")
    fd1 = fds(e.pid)
    leak = fd1 > fd0 + 2
    print("cases: %d, differences: %d, ebb failures: %d, ebb fds %d -> %d%s; HAProxy aborted at %s" % (n, ndiff, bad, fd0, fd1, " LEAK" if leak else "", hap_aborts))
    e.terminate(); h.terminate()
    sys.exit(1 if bad or leak else 0)


try:
    main()
finally:
    for p in PROCS:
        if p.poll() is None:
            p.terminate()
