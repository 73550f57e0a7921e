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

Answers are HEADERS with `:status 200` (HPACK static index 8) and
END_STREAM: no HPACK decoder is needed, requests are only counted.
"""

import socket
import struct
import sys
import threading

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


def serve(conn, mode):
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
