#!/usr/bin/env python3
"""A scripted DNS responder for ebb's resolver tests (stdlib only).

    dnsd.py ZONE.json [PORT]

Listens on UDP and TCP 127.0.0.1:PORT (0: any free port, the same for
both), prints `dnsd: listening PORT`, then answers from ZONE.json, which it
reads again whenever the file changes, so a test rewrites it to change
answers. Over TCP each message is preceded by its length in two bytes
(RFC 7766) and a connection may carry many queries:

    {
      "silent": false,              # true: answer nothing at all
      "names": {
        "app.test": {"A": ["127.0.0.2"], "AAAA": ["::1"], "ttl": 1},
        "gone.test": {"rcode": "NXDOMAIN"},
        "_http._tcp.svc.test": {"SRV": [[0, 10, 8080, "a.svc.test"]]},
        "a.svc.test": {"A": ["127.0.0.3"]},
        "www.test": {"CNAME": "app.test"},
        "big.test": {"A": ["127.0.0.2", "..."], "tc": true}
      }
    }

A name may also say "rcode" (NOERROR, NXDOMAIN, SERVFAIL, REFUSED) or
"silent": true. "CNAME": TARGET answers an alias and then TARGET's
records of the type asked (as a recursive server does), the chain followed
up to 8 names. "tc": true answers over UDP with the TC bit set and only
the first record (the rest would not fit); over TCP the whole answer. An SRV answer carries the targets' A/AAAA records in the
additional section when the zone has them (unless the SRV name says
"no_additional": true). A name absent from the zone
gets NXDOMAIN; a type the name has no record of gets NOERROR without
records. Each query is logged as `dnsd: query NAME TYPE -> WHAT`, with
` (tcp)` at the end when it came over TCP.
"""

import json
import os
import socket
import struct
import sys
import threading

TYPES = {1: "A", 28: "AAAA", 33: "SRV", 5: "CNAME"}
RCODES = {"NOERROR": 0, "SERVFAIL": 2, "NXDOMAIN": 3, "REFUSED": 5}


def read_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n == 0:
            return ".".join(labels), off + 1
        if n & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(msg[off + 1 : off + 1 + n].decode("ascii").lower())
        off += 1 + n


def encode_name(name):
    out = b""
    for label in name.strip(".").split("."):
        out += bytes([len(label)]) + label.encode("ascii")
    return out + b"\0"


def rr(name_bytes, rtype, ttl, rdata):
    return name_bytes + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata


def addr_rdata(rtype, ip):
    fam = socket.AF_INET if rtype == 1 else socket.AF_INET6
    return socket.inet_pton(fam, ip)


class Zone:
    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.data = {}

    def get(self):
        try:
            st = os.stat(self.path)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            if key != self.mtime:
                with open(self.path) as f:
                    self.data = json.load(f)
                self.mtime = key
        except (OSError, ValueError) as e:
            print(f"dnsd: zone unreadable: {e}", flush=True)
        return self.data


def answer(zone, msg, tcp=False):
    qid, flags, qd = struct.unpack(">HHH", msg[:6])
    if flags & 0x8000 or qd != 1:
        return None, "not a query"
    name, off = read_name(msg, 12)
    qtype, _qclass = struct.unpack(">HH", msg[off : off + 4])
    question = msg[12 : off + 4]
    z = zone.get()
    tname = TYPES.get(qtype, str(qtype))
    if z.get("silent"):
        return None, f"{name} {tname} -> silent"
    entry = z.get("names", {}).get(name)
    answers, additional = [], []
    if entry is None:
        rcode = RCODES["NXDOMAIN"]
    elif entry.get("silent"):
        return None, f"{name} {tname} -> silent"
    else:
        rcode = RCODES[entry.get("rcode", "NOERROR")]
        ttl = int(entry.get("ttl", 1))
        ptr = b"\xc0\x0c"
        # Aliases: each CNAME record, then the target's records.
        hops = 0
        while rcode == 0 and "CNAME" in entry and hops < 8 and qtype != 5:
            target = entry["CNAME"].lower().strip(".")
            answers.append(rr(ptr, 5, ttl, encode_name(target)))
            ptr = encode_name(target)
            entry = z.get("names", {}).get(target, {})
            hops += 1
        if rcode == 0 and qtype in (1, 28):
            for ip in entry.get(TYPES[qtype], []):
                answers.append(rr(ptr, qtype, ttl, addr_rdata(qtype, ip)))
        if rcode == 0 and qtype == 33:
            for prio, weight, port, target in entry.get("SRV", []):
                rdata = struct.pack(">HHH", prio, weight, port) + encode_name(target)
                answers.append(rr(ptr, 33, ttl, rdata))
                t = z.get("names", {}).get(target.lower().strip("."), {})
                if entry.get("no_additional"):
                    t = {}
                for at in (1, 28):
                    for ip in t.get(TYPES[at], []):
                        additional.append(
                            rr(encode_name(target), at, ttl, addr_rdata(at, ip))
                        )
    tc = 0
    if entry is not None and entry.get("tc") and not tcp:
        answers, additional, tc = answers[:1], [], 0x0200
    flags = 0x8000 | tc | (flags & 0x0100) | 0x0080 | rcode
    head = struct.pack(
        ">HHHHHH", qid, flags, 1, len(answers), 0, len(additional)
    )
    what = f"{name} {tname} -> rcode {rcode}, {len(answers)} answers"
    if tc:
        what += ", truncated"
    return head + question + b"".join(answers) + b"".join(additional), what


def recv_exact(c, n):
    out = b""
    while len(out) < n:
        got = c.recv(n - len(out))
        if not got:
            return None
        out += got
    return out


def serve_tcp(zone, c, lock):
    with c:
        while True:
            head = recv_exact(c, 2)
            if head is None:
                return
            msg = recv_exact(c, struct.unpack(">H", head)[0])
            if msg is None:
                return
            try:
                with lock:
                    out, what = answer(zone, msg, tcp=True)
            except (ValueError, IndexError, struct.error, KeyError) as e:
                print(f"dnsd: bad query: {e} (tcp)", flush=True)
                continue
            print(f"dnsd: query {what} (tcp)", flush=True)
            if out is not None:
                c.sendall(struct.pack(">H", len(out)) + out)


def accept_tcp(zone, t, lock):
    while True:
        c, _ = t.accept()
        threading.Thread(target=serve_tcp, args=(zone, c, lock), daemon=True).start()


def bind_both(port):
    """A UDP and a TCP socket on the same port (any free one for 0)."""
    for _ in range(100):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", port))
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            t.bind(("127.0.0.1", s.getsockname()[1]))
        except OSError:
            s.close()
            t.close()
            if port:
                raise
            continue
        t.listen(16)
        return s, t
    raise OSError("no port free for both UDP and TCP")


def main():
    zone = Zone(sys.argv[1])
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    s, t = bind_both(port)
    lock = threading.Lock()
    threading.Thread(target=accept_tcp, args=(zone, t, lock), daemon=True).start()
    print(f"dnsd: listening {s.getsockname()[1]}", flush=True)
    while True:
        msg, peer = s.recvfrom(65535)
        try:
            with lock:
                out, what = answer(zone, msg)
        except (ValueError, IndexError, struct.error, KeyError) as e:
            print(f"dnsd: bad query: {e}", flush=True)
            continue
        print(f"dnsd: query {what}", flush=True)
        if out is not None:
            s.sendto(out, peer)


if __name__ == "__main__":
    main()
