"""A scripted HTTP/2 server (cleartext, prior knowledge) for
tests/h2server.rs: what a good server rarely does, on purpose.

  h2srvd.py MODE    prints "port N", serves until killed; prints
                    "conn N" when it accepts its Nth connection

MODE:
  refuse   every request is reset REFUSED_STREAM
  second   on each connection the first request gets 200, the second a
           GOAWAY with last-stream-id 1 (so it was not processed) and the
           connection closes
  stall    SETTINGS, then nothing
  rsthead  every answer is `:status 200` without END_STREAM, then
           RST_STREAM INTERNAL_ERROR
  goaway   every answer is `:status 200`, DATA "abc" without END_STREAM,
           then GOAWAY (last-stream-id: that stream, NO_ERROR) and close
  fields:N every answer is `:status 200` and N - 1 fields `x-fNNN: v`
           (literal, not indexed): N fields in the block
  rst2:N   on each connection the first request gets 200, the next ones
           RST_STREAM with code N
  gaclose  on each connection the first request gets 200; the second a
           GOAWAY whose last-stream-id is that stream (NO_ERROR), then
           the connection closes with it unanswered
  len      every answer is 200 `content-length: 5`, DATA "hello"
  lenlist  every answer is 200 `content-length: 5, 5`, DATA "hello"
  lentrailers  every answer is 200 `content-length: 5`, DATA "hello",
           then trailers `x-sum: 42` (END_STREAM)
  headlenlist  as headlen, `content-length: 5, 5`
  headlen  every answer is 200 `content-length: 5` with END_STREAM (what
           a server answers a HEAD)
  s204data every answer is 204, then DATA "oops" (END_STREAM)
  s304data every answer is 304, then DATA "oops" (END_STREAM)
  tronly   every answer is one HEADERS with END_STREAM: 200,
           `content-type: application/grpc`, `grpc-status: 14` (gRPC's
           trailers-only answer)

HTTP/1.1 modes (no HTTP/2 at all):
  h1noread accepts, reads nothing (a receive buffer of 4 KiB)
  h1cont   a request with `Expect: 100-continue` gets `100 Continue`
           after its head; the body read, 200 `got N`

Modes served by `serve2` (a frame reader; they print "goaway CODE" and
"rst CODE" for ebb's GOAWAY and RST_STREAM, "eof" when ebb closed
first, and "excess" for a stream over their limit):
  conc1    SETTINGS_MAX_CONCURRENT_STREAMS 1; a stream above it is reset
           REFUSED_STREAM ("excess"); each answer 200 `x-conn: N` comes
           after 100 ms of silence from the peer
  nowin    SETTINGS_INITIAL_WINDOW_SIZE 0, never opened, never answers
  setwin   SETTINGS_INITIAL_WINDOW_SIZE 0; on a request head, SETTINGS
           raising it to 1 MiB (and the connection's window by as much,
           then by what comes): the body flows; at END_STREAM the answer
           is 200 with the body `N MD5`, as smallwin
  smallwin SETTINGS_INITIAL_WINDOW_SIZE 1000, opened 1000 bytes at a time
           as DATA come (stream and connection); at END_STREAM the answer
           is 200 with the body `N MD5` of what came
  trailers 200 `content-type: application/grpc`, DATA "hello", trailers
           `grpc-status: 0`, `grpc-message: ok` (END_STREAM)
  interim  on a request head: 103 `link: </s.css>`, 100, then, the body
           read, 200 with the body `got N`
  bighead:N  200 and N fields `x-bNNN` of 1000 bytes, the block in
           HEADERS and CONTINUATION frames of at most 16384 bytes
  bigfield:N 200 and one field `x-big` of N bytes (CONTINUATION as above)
  push     the first request gets 200 and DATA "part" (no END_STREAM);
           the second a PUSH_PROMISE on its stream
  noecp    SETTINGS_ENABLE_CONNECT_PROTOCOL 0 (RFC 8441: no extended
           CONNECT); after each RST_STREAM from the peer, a PING; prints
           "pingack" when its ACK comes; a request is answered 200
  early    on a request head: 200, DATA "early" END_STREAM, RST_STREAM
           NO_ERROR; the body that comes is read and dropped ("body N"
           at its END_STREAM)

Answers are HEADERS with `:status 200` (HPACK static index 8) and
END_STREAM: no HPACK decoder is needed, requests are only counted.
"""

import os
import socket
import struct
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "h2"))
from attack import hpack_int  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def read_exact(s, n):
    b = b""
    while len(b) < n:
        x = s.recv(n - len(b))
        if not x:
            raise EOFError
        b += x
    return b


def leave(conn):
    """Closes after what was sent arrived: a close with bytes of the peer
    unread is a reset, and the kernel drops what it had not sent yet (a
    frame Nagle held back), so the peer would never see the GOAWAY."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(5)
        while conn.recv(65536):
            pass
    except OSError:
        pass


def hint(n, prefix, first=0):
    """An HPACK integer of `prefix` bits, `first` the bits above them
    (the h2 attack harness's encoder, tests/h2/attack.py)."""
    return hpack_int(n, prefix, first)


def lit(name, value):
    """A literal field without indexing, new name, no Huffman."""
    return b"\x00" + hint(len(name), 7) + name + hint(len(value), 7) + value


def status(code):
    """`:status` (static index 8's name), literal without indexing."""
    return b"\x08" + hint(3, 7) + b"%d" % code


def head_frames(stream, block, end_stream, size=16384):
    """A field block as HEADERS then CONTINUATION frames."""
    parts = [block[i : i + size] for i in range(0, len(block), size)] or [b""]
    out = b""
    for i, p in enumerate(parts):
        flags = 4 if i == len(parts) - 1 else 0
        if i == 0:
            out += frame(1, flags | (1 if end_stream else 0), stream, p)
        else:
            out += frame(9, flags, stream, p)
    return out


class Reader:
    """Frames from a socket; `get(timeout)` is None when none came."""

    def __init__(self, conn):
        self.conn = conn
        self.buf = b""

    def get(self, timeout=None):
        self.conn.settimeout(timeout)
        while True:
            if len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + n:
                    h, self.buf = self.buf[: 9 + n], self.buf[9 + n :]
                    sid = int.from_bytes(h[5:9], "big") & 0x7FFFFFFF
                    return h[3], h[4], sid, h[9:]
            try:
                x = self.conn.recv(65536)
            except socket.timeout:
                return None
            if not x:
                raise EOFError
            self.buf += x


def serve2(conn, mode):
    import hashlib
    import time

    global conns
    conns += 1
    me = conns
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    r = Reader(conn)
    settings = {"conc1": (3, 1), "nowin": (4, 0), "smallwin": (4, 1000), "setwin": (4, 0), "noecp": (8, 0)}.get(mode)
    bodies = {}
    pending = []
    requests = 0
    try:
        read_exact(conn, len(PREFACE))
        conn.sendall(frame(4, 0, 0, struct.pack(">HI", *settings) if settings else b""))
        while True:
            wait = 0.1 if pending else None
            f = r.get(wait)
            if f is None:
                # conc1: 100 ms of silence, the open stream is answered.
                sid = pending.pop(0)
                conn.sendall(head_frames(sid, b"\x88" + lit(b"x-conn", b"%d" % me), True))
                continue
            ftype, flags, sid, payload = f
            if ftype == 4 and not flags & 1:
                conn.sendall(frame(4, 1, 0))
            elif ftype == 7:
                print("goaway %d" % struct.unpack(">I", payload[4:8])[0], flush=True)
                leave(conn)
                return
            elif ftype == 3:
                print("rst %d" % struct.unpack(">I", payload)[0], flush=True)
                if mode == "noecp":
                    conn.sendall(frame(6, 0, 0, b"noecp-01"))
            elif ftype == 6 and flags & 1:
                print("pingack", flush=True)
            elif ftype == 1:
                requests += 1
                end = flags & 1
                bodies[sid] = hashlib.md5(), 0
                if mode == "conc1":
                    if pending:
                        print("excess", flush=True)
                        conn.sendall(frame(3, 0, sid, struct.pack(">I", 7)))
                    else:
                        pending.append(sid)
                elif mode == "trailers":
                    conn.sendall(
                        head_frames(sid, b"\x88" + lit(b"content-type", b"application/grpc"), False)
                        + frame(0, 0, sid, b"hello")
                        + head_frames(sid, lit(b"grpc-status", b"0") + lit(b"grpc-message", b"ok"), True)
                    )
                elif mode == "interim":
                    conn.sendall(
                        head_frames(sid, status(103) + lit(b"link", b"</s.css>"), False)
                        + head_frames(sid, status(100), False)
                    )
                    if end:
                        conn.sendall(head_frames(sid, b"\x88", False) + frame(0, 1, sid, b"got 0"))
                elif mode.startswith("bighead:"):
                    n = int(mode[8:])
                    block = b"\x88" + b"".join(lit(b"x-b%03d" % i, b"v" * 1000) for i in range(n))
                    conn.sendall(head_frames(sid, block, True))
                elif mode.startswith("bigfield:"):
                    n = int(mode[9:])
                    conn.sendall(head_frames(sid, b"\x88" + lit(b"x-big", b"v" * n), True))
                elif mode == "push":
                    if requests == 1:
                        conn.sendall(head_frames(sid, b"\x88", False) + frame(0, 0, sid, b"part"))
                    else:
                        promise = struct.pack(">I", 2) + b"\x82\x84\x86" + lit(b":authority", b"x")
                        conn.sendall(frame(5, 4, sid, promise))
                elif mode == "noecp":
                    conn.sendall(head_frames(sid, b"\x88", True))
                elif mode == "early":
                    conn.sendall(
                        head_frames(sid, b"\x88", False)
                        + frame(0, 1, sid, b"early")
                        + frame(3, 0, sid, struct.pack(">I", 0))
                    )
                elif mode == "setwin":
                    conn.sendall(
                        frame(4, 0, 0, struct.pack(">HI", 4, 1 << 20))
                        + frame(8, 0, 0, struct.pack(">I", 1 << 20))
                    )
                elif mode == "smallwin" and end:
                    conn.sendall(head_frames(sid, b"\x88", False) + frame(0, 1, sid, b"0 " + hashlib.md5().hexdigest().encode()))
            elif ftype == 0 and sid in bodies:
                h, n = bodies[sid]
                h.update(payload)
                n += len(payload)
                bodies[sid] = h, n
                if mode == "smallwin" and payload:
                    conn.sendall(
                        frame(8, 0, sid, struct.pack(">I", len(payload)))
                        + frame(8, 0, 0, struct.pack(">I", len(payload)))
                    )
                elif mode == "setwin" and payload:
                    conn.sendall(frame(8, 0, 0, struct.pack(">I", len(payload))))
                elif mode == "early" and payload:
                    conn.sendall(frame(8, 0, 0, struct.pack(">I", len(payload))))
                elif mode == "interim" and payload:
                    conn.sendall(
                        frame(8, 0, sid, struct.pack(">I", len(payload)))
                        + frame(8, 0, 0, struct.pack(">I", len(payload)))
                    )
                if flags & 1 and mode == "early":
                    print("body %d" % n, flush=True)
                if flags & 1 and mode in ("smallwin", "interim", "setwin"):
                    body = b"%d %s" % (n, h.hexdigest().encode()) if mode != "interim" else b"got %d" % n
                    conn.sendall(head_frames(sid, b"\x88", False) + frame(0, 1, sid, body))
    except EOFError:
        print("eof", flush=True)
    except OSError:
        pass
    finally:
        conn.close()


conns = 0
MODES2 = ("noecp", "conc1", "nowin", "smallwin", "setwin", "trailers", "interim", "bighead:", "bigfield:", "push", "early")


def serve_h1(conn, mode):
    if mode == "h1noread":
        # Holds the connection and reads nothing (until killed).
        import time

        time.sleep(3600)
        return
    f = conn.makefile("rb")
    try:
        while True:
            head = []
            while True:
                line = f.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                head.append(line.decode("latin-1").strip())
            fields = {}
            for l in head[1:]:
                k, _, v = l.partition(":")
                fields[k.strip().lower()] = v.strip()
            if fields.get("expect", "").lower() == "100-continue":
                conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            n = int(fields.get("content-length", "0"))
            body = f.read(n) if n else b""
            out = b"got %d" % len(body)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(out), out))
    except OSError:
        pass
    finally:
        conn.close()


def serve(conn, mode):
    if mode.startswith(MODES2):
        return serve2(conn, mode)
    if mode.startswith("h1"):
        return serve_h1(conn, mode)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        read_exact(conn, len(PREFACE))
        conn.sendall(frame(4, 0, 0))
        if mode == "stall":
            while conn.recv(65536):
                pass
            return
        requests = 0
        while True:
            head = read_exact(conn, 9)
            length = int.from_bytes(head[:3], "big")
            ftype, flags = head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            read_exact(conn, length)
            if ftype == 4 and not flags & 1:
                conn.sendall(frame(4, 1, 0))
            elif ftype == 1:
                requests += 1
                if mode == "refuse":
                    conn.sendall(frame(3, 0, stream, struct.pack(">I", 7)))
                elif mode.startswith("rst2:") and requests >= 2:
                    code = int(mode[5:])
                    conn.sendall(frame(3, 0, stream, struct.pack(">I", code)))
                elif mode == "len":
                    conn.sendall(
                        frame(1, 4, stream, b"\x88" + lit(b"content-length", b"5"))
                        + frame(0, 1, stream, b"hello")
                    )
                elif mode == "lentrailers":
                    conn.sendall(
                        frame(1, 4, stream, b"\x88" + lit(b"content-length", b"5"))
                        + frame(0, 0, stream, b"hello")
                        + frame(1, 5, stream, lit(b"x-sum", b"42"))
                    )
                elif mode == "lenlist":
                    conn.sendall(
                        frame(1, 4, stream, b"\x88" + lit(b"content-length", b"5, 5"))
                        + frame(0, 1, stream, b"hello")
                    )
                elif mode == "headlen":
                    conn.sendall(frame(1, 5, stream, b"\x88" + lit(b"content-length", b"5")))
                elif mode == "headlenlist":
                    conn.sendall(frame(1, 5, stream, b"\x88" + lit(b"content-length", b"5, 5")))
                elif mode in ("s204data", "s304data"):
                    code = 204 if mode == "s204data" else 304
                    conn.sendall(frame(1, 4, stream, status(code)) + frame(0, 1, stream, b"oops"))
                elif mode == "tronly":
                    block = b"\x88" + lit(b"content-type", b"application/grpc") + lit(b"grpc-status", b"14")
                    conn.sendall(frame(1, 5, stream, block))
                elif mode == "gaclose" and requests >= 2:
                    conn.sendall(frame(7, 0, 0, struct.pack(">II", stream, 0)))
                    leave(conn)
                    return
                elif mode == "second" and requests >= 2:
                    conn.sendall(frame(7, 0, 0, struct.pack(">II", 1, 0)))
                    leave(conn)
                    return
                elif mode == "rsthead":
                    conn.sendall(frame(1, 4, stream, b"\x88") + frame(3, 0, stream, struct.pack(">I", 2)))
                elif mode == "goaway":
                    conn.sendall(
                        frame(1, 4, stream, b"\x88")
                        + frame(0, 0, stream, b"abc")
                        + frame(7, 0, 0, struct.pack(">II", stream, 0))
                    )
                    leave(conn)
                    return
                elif mode.startswith("fields:"):
                    n = int(mode[7:])
                    block = b"\x88" + b"".join(
                        b"\x00\x06x-f%03d\x01v" % i for i in range(n - 1)
                    )
                    conn.sendall(frame(1, 5, stream, block))
                else:
                    conn.sendall(frame(1, 5, stream, b"\x88"))
    except (EOFError, OSError):
        pass
    finally:
        conn.close()


def main():
    mode = sys.argv[1]
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if mode == "h1noread":
        l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    l.bind(("127.0.0.1", 0))
    l.listen(64)
    print("port %d" % l.getsockname()[1], flush=True)
    n = 0
    while True:
        c, _ = l.accept()
        n += 1
        print("conn %d" % n, flush=True)
        threading.Thread(target=serve, args=(c, mode), daemon=True).start()


if __name__ == "__main__":
    main()
