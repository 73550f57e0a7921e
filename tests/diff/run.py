#!/usr/bin/env python3
"""Differential test of HTTP rules, ACLs, fetches and converters: ebb
against HAProxy 2.6 on the same generated configuration.

    tests/diff/run.py [--seed N] [--configs N] [--requests N] [--keep DIR]
                      [--only-config FILE] [-v]

From the seed, it writes configurations made of the keywords ebb accepts
(header rewrites, request-line rewrites, variables, ACLs of every match
method, fetches through converters in log-format strings, return,
redirect, deny), and requests with odd but valid heads. Each configuration
runs on ebb, then on HAProxy, on the same port (so `dst_port`, `%fp` and
the `Host` agree), in front of the same echoing origin. For every request
the harness compares what the origin received (request line, fields in
order, body) and what the client received (status line, fields in order,
body). A difference is reduced (rules dropped one by one while it stays)
and printed with its configuration and request. A configuration HAProxy
refuses and ebb accepts is a difference; one ebb refuses is skipped (ebb
may refuse what it does not support) and counted.

Not compared, because they cannot match by nature: the `Date` field,
unique ids, `rand`, `uuid`, dates and timings, the client's source port;
the generator never uses them.

ebb: $EBB if set, else the debug binary (built with `cargo build -p ebb`).
haproxy: $HAPROXY if set, else `haproxy` on PATH. Exit status 1 when a
difference was found, 0 otherwise (and when HAProxy is not installed).
"""

import argparse
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


# --------------------------------------------------------------------------
# Origin: echoes the request it received in its body.

def recv_until(sock, buf, mark):
    """Reads until `mark` is in `buf`; returns (buf, whether it came)."""
    while mark not in buf:
        d = sock.recv(65536)
        if not d:
            return buf, False
        buf += d
    return buf, True


def read_head(sock, buf):
    buf, ok = recv_until(sock, buf, b"\r\n\r\n")
    if not ok:
        return None, buf
    i = buf.index(b"\r\n\r\n")
    return buf[:i], buf[i + 4:]


def read_body(sock, head_lines, buf, is_resp=False, status=0, head_req=False):
    """Reads a message body after `head_lines`; returns (body, rest, framing)."""
    cl = None
    chunked = False
    for l in head_lines[1:]:
        if b":" not in l:
            continue
        n, v = l.split(b":", 1)
        n = n.strip().lower()
        if n == b"content-length":
            cl = int(v.strip())
        elif n == b"transfer-encoding" and b"chunked" in v.lower():
            chunked = True
    if head_req or (is_resp and (status in (204, 304) or 100 <= status < 200)):
        return b"", buf
    if chunked:
        body = b""
        while True:
            buf, ok = recv_until(sock, buf, b"\r\n")
            if not ok:
                return body, buf
            i = buf.index(b"\r\n")
            size = int(buf[:i].split(b";")[0], 16)
            buf = buf[i + 2:]
            while len(buf) < size + 2:
                d = sock.recv(65536)
                if not d:
                    break
                buf += d
            if size == 0:
                # trailers
                buf, _ = recv_until(sock, buf, b"\r\n")
                if buf.startswith(b"\r\n"):
                    buf = buf[2:]
                else:
                    buf, _ = recv_until(sock, buf, b"\r\n\r\n")
                    buf = buf[buf.find(b"\r\n\r\n") + 4:]
                return body, buf
            body += buf[:size]
            buf = buf[size + 2:]
    if cl is not None:
        while len(buf) < cl:
            d = sock.recv(65536)
            if not d:
                break
            buf += d
        return buf[:cl], buf[cl:]
    if is_resp:
        while True:
            d = sock.recv(65536)
            if not d:
                return buf, b""
            buf += d
    return b"", buf


class Origin:
    """Answers every request with 200 and a body listing what it got; the
    answer carries fixed fields for the response rules."""

    def __init__(self, port):
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", port))
        self.ls.listen(128)
        self.port = self.ls.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        buf = b""
        try:
            while True:
                head, buf = read_head(c, buf)
                if head is None:
                    return
                lines = head.split(b"\r\n")
                body, buf = read_body(c, lines, buf)
                out = b"".join(b"> " + l + b"\n" for l in lines)
                out += b"B " + body + b"\n"
                resp = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                        b"X-Srv: one, Two\r\nX-Srv: three\r\nSet-Cookie: sc=1; Path=/\r\n"
                        b"X-Ip: 10.1.2.3\r\nContent-Length: " + str(len(out)).encode()
                        + b"\r\n\r\n" + out)
                c.sendall(resp)
        except (OSError, ValueError):
            pass
        finally:
            c.close()


# --------------------------------------------------------------------------
# Client

def exchange(port, req, head_req=False):
    """Sends `req` on a new connection; returns the response as text lines
    (status line, fields in order, body) or an error word."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError as e:
        return ["<connect: %s>" % e.__class__.__name__]
    try:
        s.sendall(req)
        head, buf = read_head(s, b"")
        if head is None:
            return ["<closed without answer>"]
        lines = head.split(b"\r\n")
        try:
            status = int(lines[0].split(b" ")[1])
        except (IndexError, ValueError):
            status = 0
        body, _ = read_body(s, lines, buf, True, status, head_req)
        return [l.decode("latin-1") for l in lines] + [""] + body.decode("latin-1").split("\n")
    except socket.timeout:
        return ["<timeout>"]
    except OSError as e:
        return ["<error %s>" % e.__class__.__name__]
    finally:
        s.close()


FIELD = re.compile(r"^(> )?([!#$%&'*+.^_`|~0-9A-Za-z-]+):")


def normalize(resp):
    """Drops what differs by design or by nature: field names are compared
    in lower case (HAProxy 2.6 lowercases every name it forwards, ebb keeps
    the client's and the server's case), the `Date` field and ebb's
    `Server: ebb` on its own answers. The origin's echo is split in lines
    and normalized the same way."""
    out = []
    fields = []
    for l in resp:
        low = l.lower()
        if low.startswith("date:") or low == "server: ebb":
            continue
        m = FIELD.match(l)
        if m:
            l = (m.group(1) or "") + m.group(2).lower() + ":" + l[m.end():]
        out.append(l)
    # An answer ebb or HAProxy makes itself (error page, redirect, return)
    # is compared field by field, in order; an error page's status line
    # and text are not (a `tarpit`'s reason, the statuses HAProxy makes no
    # page for), and its `Connection` goes last (HAProxy's raw 400 has it
    # before `Content-Type`: README, "Differential testing").
    if out and out[0].startswith("HTTP/"):
        end = out.index("") if "" in out else len(out)
        fields = out[1:end]
        if (not any(l.startswith("> ") for l in out[end:])
                and "content-type: text/html" in fields and "cache-control: no-cache" in fields):
            conn = [f for f in fields if f.startswith("connection:")]
            rest = [f for f in fields if not f.startswith(("connection:", "content-length:"))]
            out = [out[0][:12]] + rest + conn + ["", "<error page>"]
    return out


# --------------------------------------------------------------------------
# Generator

STR_FETCHES = [
    "path", "url", "query", "base", "method", "pathq",
    "req.hdr(x-a)", "req.hdr(x-a,1)", "req.hdr(x-a,-1)", "hdr(x-a,2)",
    "req.fhdr(x-a)", "req.fhdr(x-a,-1)", "req.hdr(host)", "req.hdr(x-e)",
    "req.hdr(cookie)", "req.fhdr(user-agent)",
    "url_param(a)", "url_param(b)", "urlp(a)", "url_param(a,;)",
    "cook(c1)", "req.cook(c2)", "req.cook", "cook(c3)",
    "req.ver", "str(Hello)", "str(a/b/c)", "str(x,y,z)", "var(txn.v1)",
    "var(txn.v2)", "var(req.r1)", "var(sess.s1)", "var(txn.missing)",
    "src", "dst", "req.hdr(x-ip)", "fe_name", "be_name", "capture.req.uri",
    "capture.req.method", "capture.req.ver", "req.cook_val(c1)",
    "req.hdr(x-a,0)", "req.fhdr(x-a,0)", "url_param", "req.body_param(a)", "req.body_param",
]
INT_FETCHES = [
    "hdr_cnt(x-a)", "req.hdr_cnt(x-e)", "req.fhdr_cnt(x-a)", "req.cook_cnt(c1)",
    "req.cook_cnt", "urlp_val(n)", "url_param(n),hex2i", "base32", "dst_port",
    "int(7)", "int(-3)", "var(txn.n)", "req.hdr_cnt(cookie)", "http_first_req",
    "req.body_len", "req.hdr_cnt(x-none)", "hdr_cnt",
]
IP_FETCHES = ["src", "hdr_ip(x-ip)", "req.hdr_ip(x-ip,-1)", "dst", "ipv4(192.168.7.9)"]

STR_CONV = [
    "lower", "upper", "regsub(a,X)", "regsub(a,X,g)", "regsub(A,x,ig)",
    "regsub(^/,/p/)", "regsub(/+,_,g)", "regsub(x+,<\\0>,g)", "field(2,/)", "field(1,/,2)", "field(-1,/)",
    "field(2,=&)", "word(1,/)", "word(2,/)", "word(-1,/,2)", "word(1,=&)",
    "hex", "base64", "url_dec", "url_dec(1)", "url_enc", "json", "json(utf8s)",
    "json(ascii)", "concat(-,txn.v1,-)", "concat(<,txn.missing,>)", "concat(,txn.v2)",
    "map_str(MAPS)", "map_beg(MAPB)", "map_sub(MAPS,dflt)", "map_end(MAPS)",
    "map_dir(MAPD)", "map_dom(MAPS)", "map_reg(MAPR)", "map_regm(MAPR)",
    "bytes(1,3)", "bytes(2)", "b64dec", "ub64enc", "ub64dec", "host_only",
    "add_item(;,txn.v1)", "add_item(|,,x)", "be2hex(:,2)", "sha1,hex", "sha2,hex",
    "lower,upper", "regsub((.)(.),\\2\\1)", "regsub(\"(.)(.)\",\\2\\1)",
]
STR2INT_CONV = [
    "sdbm", "djb2", "wt6", "crc32", "crc32c", "xxh32", "sdbm(1)", "djb2(1)",
    "wt6(1)", "length", "strcmp(txn.v1)", "map_str_int(MAPI,5)", "hex2i",
    "map_beg_int(MAPI)", "xxh64", "xxh32(7)",
]
INT_CONV = [
    "add(3)", "sub(txn.n)", "mul(-2)", "div(3)", "div(0)", "mod(4)", "mod(0)",
    "neg", "and(6)", "or(9)", "xor(5)", "cpl", "bool", "not", "odd", "even",
    "add(txn.n)", "mul(txn.missing)", "div(txn.n)", "be2dec(:,2)", "be2dec(-,1,1)",
]
IP_CONV = ["ipmask(24)", "ipmask(16)", "ipmask(255.255.0.0)", "ipmask(8,64)",
           "map_ip(MAPIP)", "map_ip(MAPIP,none)"]

HDR_NAMES = ["x-a", "x-e", "x-b", "cookie", "user-agent", "x-ip", "host"]
RES_HDR_NAMES = ["x-srv", "set-cookie", "content-type", "x-ip"]

MAP_FILES = {
    "MAPS": "/a x1\n/a/b x2\nfoo x3\nexample.com dom\nb x4\n",
    "MAPB": "/a beg1\n/ root\n/a/b beg2\n/p/q pq\n",
    # No pattern of delimiters only for `map_dir`: HAProxy's match_word
    # then reads the byte after the sample (see README).
    "MAPD": "/a beg1\n/a/b beg2\n/p/q pq\n",
    "MAPR": "^/a/(.*)$ A\\1\n([0-9]+) num\\1\n^(.)(.) \\2\\1\n",
    "MAPI": "/a 10\nfoo 20\n/ 1\n",
    "MAPIP": "127.0.0.0/8 loop\n10.0.0.0/8 ten\n192.168.0.0/16 lan\n",
    "ACLF": "/a\n/b/\nfoo\n# comment\n\n/x%20y\n",
    "ACLIP": "127.0.0.1\n10.0.0.0/8\n",
}

ACL_METHODS = ["str", "beg", "end", "sub", "reg", "dom", "dir", "len", "found", "int", "ip"]
PATTERNS = ["/a", "/a/b", "a", "b", "/", "x", "foo", "Foo", "c", "1", "3", "0", "5:9",
            "ge", "/A", "^/a", "b$", "[0-9]", ".*", "example.com", "127.0.0.1",
            "10.0.0.0/8", "GET", "POST", "one", "%2F", "a=1", "x1"]


def gen_expr(r, want=None):
    """A fetch with converters; `want` in (None, 'str', 'int', 'ip')."""
    kind = want or r.choice(["str", "str", "int", "ip"])
    if kind == "ip":
        e = r.choice(IP_FETCHES)
        if r.random() < 0.6:
            e += "," + r.choice(IP_CONV)
        return e
    if kind == "int":
        if r.random() < 0.5:
            e = r.choice(INT_FETCHES)
        else:
            e = r.choice(STR_FETCHES) + "," + r.choice(STR2INT_CONV)
        for _ in range(r.randint(0, 2)):
            e += "," + r.choice(INT_CONV)
        return e
    e = r.choice(STR_FETCHES)
    for _ in range(r.randint(0, 3)):
        e += "," + r.choice(STR_CONV)
    return e


def gen_acl_line(r, name):
    m = r.choice(ACL_METHODS + ["", ""])
    flags = []
    if m == "int" or m == "len":
        expr = r.choice([gen_expr(r, "str"), gen_expr(r, "int")])
        pats = [r.choice(["1", "0", "3", "5:9", "gt 2", "le 4", "eq 7", "10:", ":2", "lt -1"])]
    elif m == "ip":
        expr = r.choice(IP_FETCHES + ["req.hdr(x-ip)", "str(10.1.2.3)"])
        pats = r.sample(["127.0.0.1", "10.0.0.0/8", "192.168.7.0/24", "::1", "127.0.0.0/255.0.0.0"],
                        r.randint(1, 2))
        if r.random() < 0.2:
            flags.append("-f ACLIP")
            pats = []
    elif m == "found":
        expr = gen_expr(r, r.choice(["str", "int"]))
        pats = []
    elif m == "":
        expr = r.choice(["path", "path_beg", "path_end", "path_sub", "path_dir", "path_dom",
                         "path_reg", "path_len", "url_beg", "url_sub", "hdr(x-a)",
                         "hdr_beg(x-a)", "hdr_sub(x-a)", "hdr_reg(x-a)", "hdr_end(host)",
                         "hdr_dom(host)", "hdr_len(x-a)", "hdr_cnt(x-a)", "method",
                         "urlp(a)", "urlp_reg(a)", "cook(c1)", "cook_sub(c1)",
                         "req.cook_cnt(c1)", "src", "hdr_val(x-n)", "base_beg", "base_sub",
                         "url_param(b)", "path,lower"])
        if expr in ("src",):
            pats = ["127.0.0.1"]
        elif expr in ("hdr_cnt(x-a)", "req.cook_cnt(c1)", "hdr_val(x-n)", "path_len",
                      "hdr_len(x-a)"):
            pats = [r.choice(["1", "2", "gt 1", "0", "3:"])]
        elif expr == "method":
            pats = r.sample(["GET", "POST", "HEAD", "get", "PUT"], 2)
        else:
            pats = r.sample(PATTERNS, r.randint(1, 3))
    else:
        expr = gen_expr(r, "str")
        pats = r.sample(PATTERNS, r.randint(1, 3))
        if m == "reg":
            pats = [p for p in pats if p not in ("5:9",)] or ["a"]
        if r.random() < 0.15:
            flags.append("-f ACLF")
            pats = pats[:1] if r.random() < 0.5 else []
    if r.random() < 0.3 and m not in ("int", "len", "ip", "found"):
        flags.insert(0, "-i")
    files = [f for f in flags if f.startswith("-f")]
    flags = [f for f in flags if not f.startswith("-f")]
    if r.random() < 0.1 and m not in ("found",):
        flags.append("-n")
    if m:
        flags.append("-m " + m)
    flags += files
    if r.random() < 0.1:
        pats = ["--"] + pats if pats else pats
    return "    acl %s %s %s %s\n" % (name, expr, " ".join(flags), " ".join(pats))


def gen_cond(r, acls):
    if not acls or r.random() < 0.25:
        return ""
    terms = []
    for _ in range(r.randint(1, 2)):
        t = r.choice(acls)
        if r.random() < 0.3:
            t = "!" + t
        terms.append(t)
    if r.random() < 0.2:
        terms.append("{ %s }" % gen_acl_line(r, "x").split(None, 2)[2].strip())
    cond = " ".join(terms)
    if r.random() < 0.3:
        cond += " || " + r.choice(acls)
    return " " + r.choice(["if", "unless"]) + " " + cond


def lf(r):
    """A log-format string."""
    parts = []
    for _ in range(r.randint(1, 2)):
        c = r.random()
        if c < 0.7:
            parts.append("%[" + gen_expr(r) + "]")
        elif c < 0.8:
            parts.append(r.choice(["%HM", "%HV", "%fp", "%ci", "%b", "%f", "%HU", "%HP",
                                   "%HQ", "%r"]))
        else:
            parts.append(r.choice(["lit", "a b", "%%", "x-"]))
    return "\"" + "".join(parts) + "\""


REGEXES = ["^(.*)$", "a", "([a-z]+)", "^/a(.*)", "(.)(.)", "[0-9]+", "^$", ",", "o", "^(T)", "^/"]


def gen_rule(r, i, acls, side):
    cond = gen_cond(r, acls)
    if side == "res":
        c = r.random()
        if c < 0.5:
            return "    http-response set-header x-r%d %s%s\n" % (i, lf(r), cond)
        if c < 0.6:
            return "    http-response add-header x-srv %s%s\n" % (lf(r), cond)
        if c < 0.7:
            return "    http-response del-header %s%s\n" % (r.choice(RES_HDR_NAMES), cond)
        if c < 0.8:
            return "    http-response replace-value %s %s \"<\\1>\"%s\n" % (
                r.choice(RES_HDR_NAMES), r.choice(REGEXES), cond)
        if c < 0.9:
            return "    http-response replace-header %s %s \"[\\1]\"%s\n" % (
                r.choice(RES_HDR_NAMES), r.choice(REGEXES), cond)
        return "    http-response set-header x-s%d \"%%[res.hdr(x-srv)]|%%[res.fhdr(x-srv,%d)]|%%[res.hdr_cnt(x-srv)]|%%[status]|%%[res.hdr_ip(x-ip),ipmask(16)]\"%s\n" % (
            i, r.randint(-2, 2), cond)
    c = r.random()
    if c < 0.35:
        return "    http-request set-header x-h%d %s%s\n" % (i, lf(r), cond)
    if c < 0.42:
        return "    http-request add-header %s %s%s\n" % (r.choice(["x-a", "x-n", "x-h"]), lf(r), cond)
    if c < 0.47:
        return "    http-request del-header %s%s\n" % (r.choice(HDR_NAMES), cond)
    if c < 0.53:
        return "    http-request replace-header %s %s %s%s\n" % (
            r.choice(HDR_NAMES), r.choice(REGEXES),
            r.choice(["\"[\\1]\"", "\\2-\\1", "x%[path]", "\"\""]), cond)
    if c < 0.59:
        return "    http-request replace-value %s %s %s%s\n" % (
            r.choice(HDR_NAMES), r.choice(REGEXES),
            r.choice(["\"<\\1>\"", "\\2\\1", "v", "\"\""]), cond)
    if c < 0.66:
        act = r.choice(["set-path", "set-query", "set-uri", "set-pathq"])
        val = r.choice(["/new", "%[path,lower]", "/p%[path]", "a=1&b=2", "\"\"",
                        "%[url,regsub(x,y)]", "/x?y=1", "%[path]/s"])
        if act == "set-query":
            val = r.choice([val, "%[query]", "%[query,upper]"])
        elif act == "set-uri":
            val = r.choice([val, "foo/bar", "http://u@n.example:81/x?y"])
        return "    http-request %s %s%s\n" % (act, val, cond)
    if c < 0.71:
        act = r.choice(["replace-path", "replace-uri", "replace-pathq"])
        # (No bare `\1`: it may leave an empty target, a difference kept
        # on purpose, see README.)
        tpl = r.choice(["/r\\1", "\\2/\\1", "_", "/x%[query]", "\\1x"])
        if act == "replace-uri":
            # Never an empty target (a difference kept on purpose, README).
            tpl = r.choice(["/", "x"]) + tpl
        return "    http-request %s %s %s%s\n" % (
            act, r.choice(["(.*)", "^/a(.*)", "/+", "^/(.)(.*)", "([^?]*)\\?(.*)", "/"]), tpl, cond)
    if c < 0.80:
        scope = r.choice(["txn", "req", "sess"])
        name = r.choice(["v1", "v2", "n"]) if scope == "txn" else r.choice(["r1", "s1"])
        name = "%s.%s" % (scope, name)
        if r.random() < 0.15:
            return "    http-request unset-var(%s)%s\n" % (name, cond)
        conds = ""
        if r.random() < 0.25:
            conds = "," + r.choice(["ifexists", "ifnotexists", "ifset", "ifnotset", "ifempty",
                                    "ifnotempty", "ifgt", "iflt"])
        if name.endswith(".n"):
            e = gen_expr(r, "int")
        else:
            e = gen_expr(r)
        if r.random() < 0.2:
            return "    http-request set-var-fmt(%s%s) %s%s\n" % (name, conds, lf(r), cond)
        return "    http-request set-var(%s%s) %s%s\n" % (name, conds, e, cond)
    if not cond:
        cond = " if " + (r.choice(acls) if acls else "FALSE")
    if c < 0.86:
        mode = r.choice(["location", "prefix", "scheme"])
        val = {"location": r.choice(["/l", "http://o.example/p", "%[path]x", "/l?a=b"]),
               "prefix": r.choice(["/pre", "http://o.example", "/pre/", "%[hdr(x-a)]"]),
               "scheme": r.choice(["https", "http", "%[str(ftp)]"])}[mode]
        opts = []
        if r.random() < 0.5:
            opts.append("code %d" % r.choice([301, 302, 303, 307, 308]))
        if r.random() < 0.4:
            opts.append("drop-query")
        if r.random() < 0.4:
            opts.append("append-slash")
        if r.random() < 0.3:
            opts.append(r.choice(["set-cookie K=v", "clear-cookie K="]))
        r.shuffle(opts)
        return "    http-request redirect %s %s %s%s\n" % (mode, val, " ".join(opts), cond)
    if c < 0.93:
        st = r.choice([200, 403, 404, 503, 201])
        opts = ["status %d" % st]
        k = r.random()
        if k < 0.4:
            opts.append("content-type text/plain lf-string %s" % lf(r))
        elif k < 0.6:
            opts.append("content-type \"text/x\" string \"hi there\"")
        if r.random() < 0.4:
            opts.append("hdr x-ret %s" % lf(r))
        return "    http-request return %s%s\n" % (" ".join(opts), cond)
    if c < 0.97:
        return "    http-request deny%s%s\n" % (
            r.choice(["", " deny_status 404", " deny_status 429", " deny_status 200"]), cond)
    return "    http-request tarpit%s%s\n" % (r.choice(["", " deny_status 403"]), cond)


def gen_config(r):
    acls = []
    lines = []
    for i in range(r.randint(2, 6)):
        name = "a%d" % i
        for _ in range(r.randint(1, 2)):
            lines.append(gen_acl_line(r, name))
        acls.append(name)
    rules = [gen_rule(r, i, acls, "req") for i in range(r.randint(4, 14))]
    rules += [gen_rule(r, 100 + i, acls, "res") for i in range(r.randint(0, 5))]
    return lines + rules


PATHS = ["/", "/a", "/a/b", "/a/b/", "/A/B", "/a%2Fb", "/a%20b", "/x;p=1/y", "//a//b",
         "/a/../b", "/a/./b", "/foo.bar", "/a/b?", "/a?a=1&b=2", "/a?a=1&a=2",
         "/?a=&b", "/p?n=12", "/p?n=-7&a=x", "/p?b=%41%42", "/a?x=1;a=2", "/a/b/c?c=3",
         "/%7Euser/", "/a+b?q=a+b", "/x1", "/example.com/a", "/a?", "/b/?a=1&&a=3",
         "http://example.com:80/a/b?a=9", "http://example.com/a?", "/a/b?n=0x10", "/1/2/3/4",
         # Bytes HAProxy 2.6 takes in a target beyond RFC 3986's, bad escapes,
         # an absolute URI without a path.
         '/a"b', "/a<b>?c=|", "/a{b}^c`", "/a\\b", "/%zz?q=%4", "/a%", "http://example.com"]
HDRS = [
    ("X-A", ["foo", "Foo, bar", "a/b/c", "one,two , three", "\"q,x\", y", "", "10.0.0.1", " sp ",
             "ABC", "x=1&y=2"]),
    ("x-e", ["", "e1"]),
    ("Cookie", ["c1=v1; c2=v2", "c1=a; c1=b", "c2=; c3=x y", "c1=1", "c1=\"q\"; c3=9"]),
    ("User-Agent", ["Mozilla/5.0 (X11)", "curl/8", ""]),
    ("X-Ip", ["10.1.2.3", "::1", "127.0.0.1:80", "bad", "192.168.7.9, 10.0.0.1"]),
    ("x-n", ["1", "2", "-5", "abc"]),
    ("X-B", ["b1", "B2"]),
]


def gen_request(r, host):
    method = r.choice(["GET", "GET", "GET", "POST", "HEAD", "PUT", "DELETE"])
    path = r.choice(PATHS)
    fields = [("Host", r.choice([host, "example.com", "Sub.Example.COM:8080", "a.b"]))]
    if path.startswith("http://"):
        # HAProxy 2.6 answers 400 when Host is not the URI's authority
        # (without the default port, case aside).
        fields = [("Host", r.choice(["example.com", "Example.COM:80", "other.example"]))]
    for _ in range(r.randint(0, 6)):
        n, vals = r.choice(HDRS)
        if r.random() < 0.3:
            n = n.upper() if r.random() < 0.5 else n.lower()
        fields.append((n, r.choice(vals)))
    body = b""
    if method in ("POST", "PUT"):
        body = r.choice([b"", b"k=v&a=1", b"hello"])
        fields.append(("Content-Length", str(len(body))))
    version = r.choice(["1.1"] * 14 + ["1.2"])
    head = "%s %s HTTP/%s\r\n" % (method, path, version)
    head += "".join("%s: %s\r\n" % (n, v) for n, v in fields)
    return (head + "\r\n").encode("latin-1") + body, method == "HEAD"


# --------------------------------------------------------------------------
# Running a configuration

CFG_HEAD = """global
    maxconn 200
defaults
    mode http
    timeout client 10s
    timeout server 10s
    timeout connect 5s
    timeout tarpit 50ms
frontend fe
    bind 127.0.0.1:{port}
"""
CFG_TAIL = """    default_backend be
backend be
    server s1 127.0.0.1:{oport}
"""


def config_text(rules, port, oport, d):
    t = CFG_HEAD.format(port=port) + "".join(rules) + CFG_TAIL.format(oport=oport)
    for k in MAP_FILES:
        t = re.sub(r"\b%s\b" % k, os.path.join(d, k.lower() + ".txt"), t)
    return t


def wait_port(port, proc, limit=15):
    t = time.time()
    while time.time() - t < limit:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


def start(target, cfg_path, port):
    if target == "ebb":
        argv = [EBB, "-f", cfg_path]
    else:
        argv = [HAPROXY, "-db", "-f", cfg_path]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    if not wait_port(port, p):
        err = b""
        if p.poll() is None:
            p.kill()
        try:
            _, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return None, err.decode("latin-1", "replace")
    return p, ""


def stop(p):
    if p is None:
        return
    try:
        p.send_signal(signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def refused(target, cfg_path):
    """Whether `target` refuses the configuration (its check mode)."""
    if target == "ebb":
        argv = [EBB, "-c", "-f", cfg_path]
    else:
        argv = [HAPROXY, "-c", "-f", cfg_path]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode != 0, (p.stdout + p.stderr).decode("latin-1", "replace")


RULE_LINE0 = CFG_HEAD.count("\n") + 1


def settle(rules, port, oport, d, verbose):
    """Drops the lines refused until both targets accept the configuration.
    Returns the rules left, how many lines ebb alone refused, and the lines
    HAProxy refuses and ebb accepts (with HAProxy's message)."""
    cfg = os.path.join(d, "check.cfg")
    ebb_only = 0
    accepted = []
    rules = list(rules)
    for _ in range(40):
        if not rules:
            break
        with open(cfg, "w") as f:
            f.write(config_text(rules, port, oport, d))
        e_ref, e_msg = refused("ebb", cfg)
        h_ref, h_msg = refused("haproxy", cfg)
        if not e_ref and not h_ref:
            return rules, ebb_only, accepted
        e_lines = {int(n) - RULE_LINE0 for n in re.findall(r"check\.cfg:(\d+)", e_msg)}
        h_lines = {int(n) - RULE_LINE0 for n in re.findall(r"check\.cfg:(\d+)\]", h_msg)}
        e_lines = {i for i in e_lines if 0 <= i < len(rules)}
        h_lines = {i for i in h_lines if 0 <= i < len(rules)}
        if e_ref and not h_ref:
            drop = e_lines
            ebb_only += len(drop)
            if verbose:
                print("ebb refuses: " + e_msg.strip()[:300])
        elif h_ref and not e_ref:
            drop = h_lines
            for i in sorted(drop):
                m = [l for l in h_msg.splitlines() if "check.cfg:%d]" % (i + RULE_LINE0) in l]
                accepted.append((rules[i].strip(), "\n".join(m)))
        else:
            drop = e_lines | h_lines
        if not drop:
            break
        rules = [l for i, l in enumerate(rules) if i not in drop]
    return [], ebb_only, accepted


def run_target(target, rules, reqs, port, oport, d):
    path = os.path.join(d, target + ".cfg")
    with open(path, "w") as f:
        f.write(config_text(rules, port, oport, d))
    p, err = start(target, path, port)
    if p is None:
        return None, err
    try:
        out = [normalize(exchange(port, q, h)) for q, h in reqs]
    finally:
        stop(p)
    return out, ""


def differs(rules, reqs, port, oport, d):
    """The indexes of the requests whose answers differ, or None when a
    target does not start."""
    a, _ = run_target("ebb", rules, reqs, port, oport, d)
    b, _ = run_target("haproxy", rules, reqs, port, oport, d)
    if a is None or b is None:
        return None
    return [i for i in range(len(reqs)) if a[i] != b[i]], a, b


def reduce_case(rules, req, port, oport, d):
    """Drops rules (then ACLs) one at a time while the difference stays."""
    cur = list(rules)
    i = len(cur) - 1
    while i >= 0:
        trial = cur[:i] + cur[i + 1:]
        r = differs(trial, [req], port, oport, d)
        if r is not None and r[0]:
            cur = trial
        i -= 1
    r = differs(cur, [req], port, oport, d)
    return cur, r


def main():
    global EBB, HAPROXY
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DIFF_SEED", "1")))
    ap.add_argument("--configs", type=int, default=int(os.environ.get("DIFF_CONFIGS", "40")))
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--max-diffs", type=int, default=10)
    ap.add_argument("--no-reduce", action="store_true")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()

    HAPROXY = os.environ.get("HAPROXY") or shutil.which("haproxy")
    if not HAPROXY:
        print("haproxy missing: nothing compared")
        return 0
    EBB = os.environ.get("EBB")
    if not EBB:
        if subprocess.run(["cargo", "build", "-q", "-p", "ebb", "--bin", "ebb"], cwd=ROOT).returncode:
            return 2
        EBB = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                           "debug", "ebb")

    port = int(os.environ.get("PORT", "0")) or free_port()
    origin = Origin(int(os.environ.get("ORIGIN_PORT", "0")))
    d = tempfile.mkdtemp(prefix="ebb-diff-")
    for k, v in MAP_FILES.items():
        with open(os.path.join(d, k.lower() + ".txt"), "w") as f:
            f.write(v)

    r = random.Random(args.seed)
    cases = 0
    found = []
    skipped_ebb = 0
    both_refuse = 0
    haproxy_failed = 0
    empty_targets = 0
    for ci in range(args.configs):
        rules = gen_config(r)
        reqs = [gen_request(r, "127.0.0.1:%d" % port) for _ in range(args.requests)]
        rules, nref, acc = settle(rules, port, origin.port, d, args.v)
        skipped_ebb += nref
        for line, msg in acc:
            if len(found) < args.max_diffs:
                found.append("config %d: HAProxy refuses, ebb accepts:\n%s\n%s" % (ci, line, msg))
                print(found[-1])
        if not rules:
            continue
        res = differs(rules, reqs, port, origin.port, d)
        if res is None:
            found.append("config %d: a target did not start\n%s" % (ci, "".join(rules)))
            print(found[-1])
            continue
        idx, a, b = res
        cases += len(reqs)
        seen_diff = set()
        for i in idx:
            if len(found) >= args.max_diffs:
                break
            if args.no_reduce:
                rr, rd = rules, ([0], [a[i]], [b[i]])
            else:
                rr, rd = reduce_case(rules, reqs[i], port, origin.port, d)
            key = "".join(rr)
            if key in seen_diff:
                continue
            seen_diff.add(key)
            if rd is None or not rd[0]:
                continue
            if empty_target(rd[1][0], rd[2][0]):
                # A rule left the target empty (`set-pathq %[path]` on
                # `http://a`): HAProxy sends `M  HTTP/1.1`, ebb answers
                # 500, on purpose (README); counted, shown with -v.
                empty_targets += 1
                if args.v:
                    print("config %d request %d: empty target:\n%s" % (ci, i, key))
                continue
            if rd[2][0][0].startswith("<") and not rd[1][0][0].startswith("<"):
                # HAProxy gave no answer (it closed, or its process died)
                # where ebb answered: HAProxy's failure, not a behaviour to
                # match; counted and shown with -v.
                haproxy_failed += 1
                if args.v:
                    print("config %d request %d: HAProxy gave no answer:\n%s" % (ci, i, key))
                continue
            msg = "=== config %d request %d\n--- rules\n%s--- request\n%s\n--- ebb\n%s\n--- haproxy\n%s\n" % (
                ci, i, key, reqs[i][0].decode("latin-1"),
                "\n".join(rd[1][0]), "\n".join(rd[2][0]))
            found.append(msg)
            print(msg)
            sys.stdout.flush()
        if len(found) >= args.max_diffs:
            break
    shutil.rmtree(d, ignore_errors=True)
    print("seed %d: %d configurations, %d requests compared, %d ebb refused, %d both refused, "
          "%d without HAProxy's answer, %d empty targets, %d differences"
          % (args.seed, args.configs, cases, skipped_ebb, both_refuse, haproxy_failed,
             empty_targets, len(found)))
    return 1 if found else 0


def empty_target(ebb, haproxy):
    """Whether HAProxy's origin got an empty target (`> M  HTTP/1.x`)
    where ebb answered 500: a difference kept on purpose."""
    return (ebb[:1] == ["HTTP/1.1 500"] and
            any(re.match(r"^> \S+  HTTP/", l) for l in haproxy))


def free_port():
    for _ in range(50):
        p = random.randint(20000, 31999)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            s.close()
            return p
        except OSError:
            s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
