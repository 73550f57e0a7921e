import os, textwrap
# Writes the conformance cases (cases/*.vtc); run it after editing a case
# here: `python3 tests/vtc/gen.py`. Each case is a plain .vtc file.
D = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases")
HEAD = '''process p1 "${lb} ${s1_sock}%s" -start
shell "${lbwait}"
'''
def w(name, desc, body):
    assert '"' not in desc
    with open(os.path.join(D, name + ".vtc"), "w") as f:
        f.write('varnishtest "%s"\n' % desc)
        f.write(textwrap.dedent(body).lstrip("\n"))

def lb(opts=""):
    return HEAD % ((" " + opts) if opts else "")

def refuse(name, desc, status, sends, opts="", empty_conn=False):
    """The request is refused with STATUS and the connection closed; the
    origin receives nothing of it: its first request is the canary."""
    lines = "\n".join("    " + s for s in sends)
    first = "    expect_close\n    accept\n" if empty_conn else ""
    w(name, desc + " (%d, nothing forwarded)" % status, '''
server s1 {
''' + first + '''    rxreq
    expect req.url == "/canary"
    txresp
} -start
''' + lb(opts) + '''client c1 -connect ${lbsock} {
%s
    rxresp
    expect resp.status == %d
    expect_close
} -run
client c2 -connect ${lbsock} {
    txreq -url /canary
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''' % (lines, status))

def close_after(name, desc, sends, http11=True):
    """HAProxy 2.6's reading of a request framed both ways (or chunked in
    HTTP/1.0): chunked wins, Content-Length is not forwarded, the answer
    comes and the client connection closes; nothing after the body is
    read as a request. The origin gets the request, then the canary."""
    lines = "\n".join("    " + s for s in sends)
    conn = '    expect resp.http.connection == "close"\n' if http11 else ""
    w(name, desc + " (chunked wins, then close)", '''
server s1 {
    rxreq
    expect req.url == "/a"
    expect req.http.content-length == <undef>
    expect req.http.transfer-encoding == "chunked"
    txresp
    accept
    rxreq
    expect req.url == "/canary"
    txresp
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
%s
    rxresp
    expect resp.status == 200
%s    expect_close
} -run
client c2 -connect ${lbsock} {
    txreq -url /canary
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''' % (lines, conn))

R = lambda s: 'send "%s"' % s
H = "Host: x\\r\\n"
CRLF = "\\r\\n"
SMUG = "GET /smuggled HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"

# --- request smuggling: Transfer-Encoding / Content-Length ---
close_after("sm02_te_cl", "TE.CL: Transfer-Encoding before a Content-Length",
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: chunked\\r\\nContent-Length: 4\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("sm03_te_xchunked", "TE.TE: Transfer-Encoding xchunked", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: xchunked\\r\\nContent-Length: 5\\r\\n\\r\\n0\\r\\n\\r\\n")])
refuse("sm04_te_space_before_colon", "TE.TE: whitespace between Transfer-Encoding and the colon", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding : chunked\\r\\nContent-Length: 5\\r\\n\\r\\n0\\r\\n\\r\\n")])
refuse("sm05_te_chunked_identity", "TE.TE: Transfer-Encoding chunked, identity (chunked not last)", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: chunked, identity\\r\\n\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("sm06_te_vertical_tab", "TE.TE: vertical tab before chunked", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding:\\x0bchunked\\r\\nContent-Length: 5\\r\\n\\r\\n0\\r\\n\\r\\n")])
close_after("sm07_te_http10", "TE.TE: Transfer-Encoding in an HTTP/1.0 request",
       [R("POST /a HTTP/1.0\\r\\nHost: x\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n" + SMUG)], http11=False)
refuse("sm08_te_gzip_chunked", "TE.TE: a coding ebb does not implement before chunked", 422,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: gzip, chunked\\r\\n\\r\\n0\\r\\n\\r\\n")])
refuse("sm09_te_obs_fold", "TE.TE: Transfer-Encoding value folded onto the next line", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding:\\r\\n chunked\\r\\nContent-Length: 5\\r\\n\\r\\n0\\r\\n\\r\\n")])
refuse("sm10_te_quoted", "TE.TE: quoted chunked", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: \\\"chunked\\\"\\r\\n\\r\\n0\\r\\n\\r\\n")])
refuse("sm11_te_nul_suffix", "TE.TE: NUL after chunked", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: chunked"), 'sendhex "00"',
        R("\\r\\nContent-Length: 5\\r\\n\\r\\n0\\r\\n\\r\\n")])
refuse("cl01_duplicate_same", "Content-Length given twice with the same value", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 5\\r\\nContent-Length: 5\\r\\n\\r\\nhello")])
refuse("cl02_duplicate_differ", "Content-Length given twice with different values", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 5\\r\\nContent-Length: 40\\r\\n\\r\\nhello" + SMUG)])
refuse("cl03_list", "Content-Length as a list 5, 5", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 5, 5\\r\\n\\r\\nhello")])
refuse("cl04_plus_sign", "Content-Length with a plus sign", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: +5\\r\\n\\r\\nhello")])
refuse("cl05_negative", "Content-Length negative", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: -1\\r\\n\\r\\n" + SMUG)])
refuse("cl06_hex", "Content-Length in hex", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0x5\\r\\n\\r\\nhello")])
refuse("cl07_overflow", "Content-Length beyond 64 bits", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 18446744073709551621\\r\\n\\r\\nhello" + SMUG)])
refuse("cl08_inner_space", "Content-Length with a space inside the digits", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 1 5\\r\\n\\r\\nhello")])
refuse("cl09_empty", "Content-Length empty", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: \\r\\n\\r\\n" + SMUG)])

# --- line endings, whitespace, folding, control bytes ---
refuse("lf01_bare_lf_request_line", "bare LF ends the request line", 400,
       [R("GET /a HTTP/1.1\\nHost: x\\r\\n\\r\\n")])
refuse("lf02_bare_lf_header", "bare LF ends a header line", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: x\\nX-A: b\\r\\n\\r\\n")])
refuse("lf03_bare_lf_everywhere", "bare LF line endings only", 400,
       [R("POST /a HTTP/1.1\\nHost: x\\nContent-Length: 5\\n\\nhello")])
refuse("lf04_bare_cr", "bare CR inside a header line", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: x\\rX-A: b\\r\\n\\r\\n")])
refuse("ws01_space_before_colon", "whitespace before the colon of Content-Length", 400,
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length : 5\\r\\n\\r\\nhello")])
refuse("ws02_tab_before_colon", "tab before the colon of Host", 400,
       [R("GET /a HTTP/1.1\\r\\nHost\\t: x\\r\\n\\r\\n")])
refuse("ws03_leading_whitespace_first_field", "whitespace before the first header field", 400,
       [R("GET /a HTTP/1.1\\r\\n Host: x\\r\\n\\r\\n")])
refuse("fold01_obs_fold", "obs-fold continuation line in a request", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: x\\r\\nX-A: one\\r\\n two\\r\\n\\r\\n")])
refuse("ctl01_nul_in_value", "NUL byte in a header value", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: x\\r\\nX-A: a"), 'sendhex "00"', R("b\\r\\n\\r\\n")])
refuse("ctl02_ctl_in_value", "control byte 0x01 in a header value", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: x\\r\\nX-A: a\\001b\\r\\n\\r\\n")])
refuse("ctl03_nul_in_target", "NUL byte in the request target", 400,
       [R("GET /a"), 'sendhex "00"', R("b HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")])
refuse("ctl04_ctl_in_name", "control byte in a header name", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: x\\r\\nX\\001A: b\\r\\n\\r\\n")])
refuse("ctl05_del_in_value", "DEL byte in a header value", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: x\\r\\nX-A: a\\177b\\r\\n\\r\\n")])
refuse("ctl06_space_in_target", "space inside the request target", 400,
       [R("GET /a b HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")])

# --- request line, Host and authority ---
def served_as_11(name, desc, version):
    """A request line of another HTTP/x.y version is read as HTTP/1.1 and
    forwarded so (RFC 9112 section 2.3 for a higher minor; HAProxy 2.6
    serves any `HTTP/x.y`)."""
    w(name, desc, '''
server s1 {
    rxreq
    expect req.url == "/a"
    expect req.proto == "HTTP/1.1"
    txresp -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "GET /a %s\\r\\nHost: x\\r\\n\\r\\n"
    rxresp
    expect resp.status == 200
    expect resp.body == ok
} -run
server s1 -wait
''' % version)

served_as_11("rl01_http12", "version HTTP/1.2 is read as HTTP/1.1", "HTTP/1.2")
served_as_11("rl02_http20_text", "version HTTP/2.0 in an HTTP/1 request line is read as HTTP/1.1, as by HAProxy 2.6", "HTTP/2.0")
refuse("rl02b_http3", "version HTTP/3 (not HTTP/x.y)", 400,
       [R("GET /a HTTP/3\\r\\nHost: x\\r\\n\\r\\n")])
refuse("rl03_bad_method", "method that is not a token", 400,
       [R("G(T /a HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")])
refuse("rl04_lowercase_version", "lower-case http/1.1", 400,
       [R("GET /a http/1.1\\r\\nHost: x\\r\\n\\r\\n")])
refuse("rl05_double_space", "two spaces after the method", 400,
       [R("GET  /a HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")])
refuse("au01_no_host", "HTTP/1.1 request without Host", 400,
       [R("GET /a HTTP/1.1\\r\\n\\r\\n")])
refuse("au02_two_hosts", "two Host fields", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: a.example\\r\\nHost: b.example\\r\\n\\r\\n")])
refuse("au03_host_with_path", "Host with a slash", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: a.example/evil\\r\\n\\r\\n")])
refuse("au04_userinfo", "absolute-form target with userinfo", 400,
       [R("GET http://user@a.example/a HTTP/1.1\\r\\nHost: a.example\\r\\n\\r\\n")])
refuse("au05_unknown_scheme", "absolute-form target with scheme ftp", 400,
       [R("GET ftp://a.example/a HTTP/1.1\\r\\nHost: a.example\\r\\n\\r\\n")])
refuse("au06_fragment", "target with a fragment", 400,
       [R("GET /a#frag HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")])
refuse("au07_host_port_not_digits", "Host with an empty host and a port that is not digits", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: :8443example.org\\r\\n\\r\\n")])

# --- header size limits ---
refuse("hl01_head_too_large", "request head larger than the buffer allows", 431,
       ['txreq -url /a -hdrlen "X-Big" 17000'])
refuse("hl02_too_many_fields", "more than 100 header fields", 400,
       [R("GET /a HTTP/1.1\\r\\nHost: x\\r\\n" + "".join("X-F%d: v\\r\\n" % i for i in range(110)) + "\\r\\n")])
refuse("hl03_long_target", "request target longer than 8 KiB", 414,
       ['txreq -url "/${string,repeat,9000,a}"'])
refuse("hl04_small_bufsize", "tune.bufsize 4096 bounds the head to about 3 KiB", 431,
       ['txreq -url /a -hdrlen "X-Big" 3500'], opts="bufsize=4096")

w("hl05_head_near_limit", "a 14,000-byte header field is forwarded intact", '''
server s1 {
    rxreq
    expect req.url == "/a"
    expect req.http.x-big ~ "^.{14000}$"
    txresp -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -url /a -hdrlen "X-Big" 14000
    rxresp
    expect resp.status == 200
    expect resp.body == ok
} -run
server s1 -wait
''')
w("hl06_response_head_too_large", "a response head larger than the buffer gives 502", '''
server s1 {
    rxreq
    txresp -hdrlen "X-Big" 20000 -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -url /a
    rxresp
    expect resp.status == 502
} -run
server s1 -wait
''')

# --- keep-alive and pipelining ---
w("ka02_pipelining", "pipelining: two requests in one packet, answered in order, origin sees both in order", '''
server s1 {
    rxreq
    expect req.url == "/one"
    txresp -body "first"
    rxreq
    expect req.url == "/two"
    txresp -body "second"
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "GET /one HTTP/1.1\\r\\nHost: x\\r\\n\\r\\nGET /two HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
    rxresp
    expect resp.status == 200
    expect resp.body == "first"
    rxresp
    expect resp.status == 200
    expect resp.body == "second"
} -run
server s1 -wait
''')
w("ka03_pipelined_bodies", "pipelining: POST with a body then GET; the origin gets the exact body, then the GET", '''
server s1 {
    rxreq
    expect req.method == "POST"
    expect req.url == "/post"
    expect req.http.content-length == 5
    expect req.body == "hello"
    txresp -body "posted"
    rxreq
    expect req.method == "GET"
    expect req.url == "/get"
    expect req.bodylen == 0
    txresp -body "got"
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "POST /post HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 5\\r\\n\\r\\nhelloGET /get HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
    rxresp
    expect resp.body == "posted"
    rxresp
    expect resp.body == "got"
} -run
server s1 -wait
''')
w("ka04_http10_closes", "HTTP/1.0 without keep-alive: answered, then the connection closes", '''
server s1 {
    rxreq
    expect req.url == "/a"
    txresp -body "ten"
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "GET /a HTTP/1.0\\r\\n\\r\\n"
    rxresp
    expect resp.status == 200
    expect resp.body == "ten"
    expect_close
} -run
server s1 -wait
''')
w("ka05_http10_keepalive", "HTTP/1.0 with Connection keep-alive stays open for a second request", '''
server s1 {
    rxreq
    expect req.url == "/a"
    txresp -body "one"
    rxreq
    expect req.url == "/b"
    txresp -body "two"
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "GET /a HTTP/1.0\\r\\nConnection: keep-alive\\r\\n\\r\\n"
    rxresp
    expect resp.body == "one"
    expect resp.http.content-length == 3
    send "GET /b HTTP/1.0\\r\\nConnection: keep-alive\\r\\n\\r\\n"
    rxresp
    expect resp.body == "two"
} -run
server s1 -wait
''')
w("ka06_client_close", "Connection close from the client: answered, then closed", '''
server s1 {
    rxreq
    expect req.url == "/a"
    txresp -body "bye"
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -url /a -hdr "Connection: close"
    rxresp
    expect resp.status == 200
    expect resp.body == "bye"
    expect_close
} -run
server s1 -wait
''')
w("ka07_origin_closes", "the origin closes after each answer; the client's connection goes on", '''
server s1 -repeat 2 {
    rxreq
    txresp -hdr "Connection: close" -body "closing"
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -url /a
    rxresp
    expect resp.status == 200
    txreq -url /b
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''')

# --- what is forwarded for good requests ---
w("fw01_content_length_body", "a Content-Length body reaches the origin exactly", '''
server s1 {
    rxreq
    expect req.method == "PUT"
    expect req.http.content-length == 11
    expect req.http.transfer-encoding == <undef>
    expect req.body == "hello world"
    txresp -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -method PUT -url /a -body "hello world"
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''')
w("fw02_chunked_body", "a chunked body reaches the origin chunked, with no Content-Length", '''
server s1 {
    rxreq
    expect req.method == "POST"
    expect req.http.transfer-encoding == "chunked"
    expect req.http.content-length == <undef>
    expect req.body == "hello world"
    txresp -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n6\\r\\n world\\r\\n0\\r\\n\\r\\n"
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''')
w("fw03_te_tab_and_case", "Transfer-Encoding with a tab and upper case (valid) is chunked", '''
server s1 {
    rxreq
    expect req.http.content-length == <undef>
    expect req.body == "hello"
    txresp -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding:\\tChunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n"
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''')
w("fw04_content_length_zero", "POST with Content-Length 0 is forwarded with an empty body", '''
server s1 {
    rxreq
    expect req.method == "POST"
    expect req.bodylen == 0
    txresp -body ok
    rxreq
    expect req.url == "/next"
    txresp -body next
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\n\\r\\nGET /next HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
    rxresp
    expect resp.body == ok
    rxresp
    expect resp.body == next
} -run
server s1 -wait
''')
refuse("fw05b_absolute_form_other_host", "absolute-form target whose authority is not Host, as HAProxy 2.6.12", 400,
       [R("GET http://a.example/p?q=1 HTTP/1.1\\r\\nHost: b.example\\r\\n\\r\\n")])
w("fw05_absolute_form", "absolute-form target: the origin gets the target's authority as Host", '''
server s1 {
    rxreq
    expect req.url ~ "/p[?]q=1$"
    expect req.http.host == "a.example"
    txresp -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "GET http://a.example/p?q=1 HTTP/1.1\\r\\nHost: a.example\\r\\n\\r\\n"
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''')
w("fw06_head", "HEAD is forwarded; the answer's Content-Length is kept, no body waited for", '''
server s1 {
    rxreq
    expect req.method == "HEAD"
    txresp -nolen -hdr "Content-Length: 100"
    rxreq
    expect req.url == "/next"
    txresp -body next
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -method HEAD -url /a
    rxresp -no_obj
    expect resp.status == 200
    expect resp.http.content-length == 100
    txreq -url /next
    rxresp
    expect resp.body == next
} -run
server s1 -wait
''')
w("fw07_chunk_extension", "a chunk extension within bounds passes (re-framed without it: 15 bytes reach the origin)", '''
server s1 {
    rxreqhdrs
    expect req.http.transfer-encoding == "chunked"
    recv 15
    txresp -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5;name=value\\r\\nhello\\r\\n0\\r\\n\\r\\n"
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''')

# --- hop-by-hop ---
w("hh01_request_hop_by_hop", "of the hop-by-hop request fields, those named in Connection, Keep-Alive, Proxy-Connection and Trailer go on, as with HAProxy 2.6", '''
server s1 {
    rxreq
    expect req.http.connection == "X-Drop"
    expect req.http.x-drop == "1"
    expect req.http.keep-alive == "timeout=5"
    expect req.http.te == <undef>
    expect req.http.proxy-connection == "keep-alive"
    expect req.http.trailer == "X-T"
    expect req.http.x-keep == "1"
    txresp -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -url /a -hdr "Connection: keep-alive, X-Drop" -hdr "X-Drop: 1" -hdr "Keep-Alive: timeout=5" -hdr "TE: gzip" -hdr "Proxy-Connection: keep-alive" -hdr "Trailer: X-T" -hdr "X-Keep: 1"
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''')
w("hh02_response_hop_by_hop", "of the hop-by-hop response fields, those named in Connection, Keep-Alive and Proxy-Connection go on, as with HAProxy 2.6", '''
server s1 {
    rxreq
    txresp -hdr "Connection: X-Secret" -hdr "X-Secret: s" -hdr "Keep-Alive: timeout=9" -hdr "Proxy-Connection: keep-alive" -hdr "X-Keep: 1" -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -url /a
    rxresp
    expect resp.status == 200
    expect resp.http.connection == "X-Secret"
    expect resp.http.x-secret == "s"
    expect resp.http.keep-alive == "timeout=9"
    expect resp.http.proxy-connection == "keep-alive"
    expect resp.http.x-keep == "1"
    expect resp.body == ok
} -run
server s1 -wait
''')
w("hh03_upgrade_tunnel", "Upgrade with 101: the connection becomes a tunnel both ways", '''
server s1 {
    rxreq
    expect req.http.upgrade == "websocket"
    expect req.http.connection ~ "(?i)upgrade"
    txresp -status 101 -reason "Switching Protocols" -nolen -hdr "Connection: upgrade" -hdr "Upgrade: websocket" -hdr "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    recv 4
    send "pong"
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -url /ws -hdr "Connection: upgrade" -hdr "Upgrade: websocket" -hdr "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==" -hdr "Sec-WebSocket-Version: 13"
    rxresp -no_obj
    expect resp.status == 101
    expect resp.http.upgrade == "websocket"
    send "ping"
    recv 4
} -run
server s1 -wait
''')
w("hh04_upgrade_not_in_connection", "Upgrade not named in Connection is not forwarded", '''
server s1 {
    rxreq
    expect req.http.upgrade == <undef>
    txresp -body ok
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -url /a -hdr "Upgrade: websocket"
    rxresp
    expect resp.status == 200
    expect resp.body == ok
} -run
server s1 -wait
''')

refuse("hh05_websocket_without_key", "websocket upgrade without Sec-WebSocket-Key", 400,
       [R("GET /ws HTTP/1.1\\r\\nHost: x\\r\\nConnection: upgrade\\r\\nUpgrade: websocket\\r\\nSec-WebSocket-Version: 13\\r\\n\\r\\n")])
refuse("hh06_websocket_bad_key", "websocket upgrade whose key is not 16 bytes of base64, and no version", 400,
       [R("GET /ws HTTP/1.1\\r\\nHost: x\\r\\nConnection: upgrade\\r\\nUpgrade: websocket\\r\\nSec-WebSocket-Key: abc\\r\\n\\r\\n")])

# --- response framing from origins ---
def resp_case(name, desc, server, client, opts=""):
    w(name, desc, "server s1 {\n" + textwrap.indent(textwrap.dedent(server).strip(), "    ") + "\n} -start\n" + lb(opts)
      + "client c1 -connect ${lbsock} {\n" + textwrap.indent(textwrap.dedent(client).strip(), "    ") + "\n} -run\nserver s1 -wait\n")

resp_case("rs01_content_length_zero", "Content-Length 0 answer keeps its length (the client is not left reading to the close)", '''
    rxreq
    txresp
    rxreq
    txresp -body two
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 200
    expect resp.http.content-length == 0
    txreq -url /b
    rxresp
    expect resp.body == two
''')
resp_case("rs02_no_length_until_close", "answer with no length, ended by the origin's close, reaches the client whole", '''
    rxreq
    txresp -nolen -body "hello"
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 200
    expect resp.body == "hello"
''')
resp_case("rs03_http10_answer", "HTTP/1.0 answer without length to an HTTP/1.1 client", '''
    rxreq
    send "HTTP/1.0 200 OK\\r\\n\\r\\nold"
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 200
    expect resp.body == "old"
''')
resp_case("rs04_extra_bytes_after_length", "bytes after a Content-Length body never reach the next client request", '''
    rxreq
    send "HTTP/1.1 200 OK\\r\\nContent-Length: 3\\r\\n\\r\\nhelHTTP/1.1 200 OK\\r\\nContent-Length: 8\\r\\n\\r\\nsmuggled"
    accept
    rxreq
    expect req.url == "/b"
    txresp -body two
''', '''
    txreq -url /a
    rxresp
    expect resp.body == "hel"
    delay 0.2
    txreq -url /b
    rxresp
    expect resp.body == "two"
''')
resp_case("rs05_early_close_content_length", "origin closes before its Content-Length is sent: the client connection is closed", '''
    rxreq
    send "HTTP/1.1 200 OK\\r\\nContent-Length: 10\\r\\n\\r\\nhello"
''', '''
    txreq -url /a
    rxresphdrs
    expect resp.status == 200
    expect resp.http.content-length == 10
    recv 5
    expect_close
''')
resp_case("rs06_early_close_chunked", "origin closes in the middle of a chunked body: the client connection is closed", '''
    rxreq
    send "HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n"
''', '''
    txreq -url /a
    rxresphdrs
    expect resp.status == 200
    rxchunk
    expect_close
''')
resp_case("rs07_100_continue", "interim 100 and 103 answers are relayed before the final one", '''
    rxreq
    send "HTTP/1.1 100 Continue\\r\\n\\r\\nHTTP/1.1 103 Early Hints\\r\\nLink: </s.css>; rel=preload\\r\\n\\r\\n"
    txresp -body final
''', '''
    txreq -url /a
    rxresphdrs
    expect resp.status == 100
    rxresphdrs
    expect resp.status == 103
    rxresp
    expect resp.status == 200
    expect resp.body == "final"
''')
resp_case("rs08_204_then_bytes", "bytes after a 204 never become the next answer", '''
    rxreq
    send "HTTP/1.1 204 No Content\\r\\n\\r\\nHTTP/1.1 200 OK\\r\\nContent-Length: 8\\r\\n\\r\\nsmuggled"
    accept
    rxreq
    expect req.url == "/b"
    txresp -body two
''', '''
    txreq -url /a
    rxresp -no_obj
    expect resp.status == 204
    delay 0.2
    txreq -url /b
    rxresp
    expect resp.body == "two"
''')
resp_case("rs09_304_with_length", "304 with a Content-Length and body bytes: no body to the client, bytes never reused", '''
    rxreq
    send "HTTP/1.1 304 Not Modified\\r\\nContent-Length: 5\\r\\n\\r\\nhello"
    accept
    rxreq
    expect req.url == "/b"
    txresp -body two
''', '''
    txreq -url /a
    rxresp -no_obj
    expect resp.status == 304
    delay 0.2
    txreq -url /b
    rxresp
    expect resp.body == "two"
''')
resp_case("rs10_204_with_content_length", "204 with a non-zero Content-Length is refused (502)", '''
    rxreq
    send "HTTP/1.1 204 No Content\\r\\nContent-Length: 5\\r\\n\\r\\nhello"
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 502
''')
resp_case("rs11_cl_and_te", "answer with Content-Length and Transfer-Encoding: chunked wins, then both connections close", '''
    rxreq
    send "HTTP/1.1 200 OK\\r\\nContent-Length: 3\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nhello\\r\\n0\\r\\n\\r\\n"
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 200
    expect resp.body == "hello"
    expect_close
''')
resp_case("rs12_two_lengths", "answer with two different Content-Length values is refused (502)", '''
    rxreq
    send "HTTP/1.1 200 OK\\r\\nContent-Length: 3\\r\\nContent-Length: 5\\r\\n\\r\\nhello"
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 502
''')
resp_case("rs13_garbage", "an answer that is not HTTP gives 502", '''
    rxreq
    send "this is not http\\r\\n\\r\\n"
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 502
''')
resp_case("rs14_close_without_answer", "the origin reads the request and closes: 502", '''
    rxreq
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 502
''')
resp_case("rs15_no_answer_timeout", "the origin never answers: 504 after timeout server", '''
    rxreq
    delay 6
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 504
''', opts="tserver=1s")
resp_case("rs16_obs_fold_answer", "an answer with an obs-fold line is refused (502)", '''
    rxreq
    send "HTTP/1.1 200 OK\\r\\nX-A: one\\r\\n two\\r\\nContent-Length: 2\\r\\n\\r\\nok"
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 502
''')
resp_case("rs17_bare_lf_answer", "an answer with bare LF line endings is taken, its head written with CRLF", '''
    rxreq
    send "HTTP/1.1 200 OK\\nContent-Length: 2\\nX-A: b\\n\\nok"
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 200
    expect resp.http.x-a == "b"
    expect resp.body == "ok"
''')
resp_case("rs18_chunked_answer", "a chunked answer reaches an HTTP/1.1 client chunked and whole", '''
    rxreq
    txresp -nolen -hdr "Transfer-Encoding: chunked"
    chunked "hello "
    chunked "world"
    chunkedlen 0
''', '''
    txreq -url /a
    rxresp
    expect resp.status == 200
    expect resp.http.transfer-encoding == "chunked"
    expect resp.body == "hello world"
''')
resp_case("rs19_chunked_to_http10", "a chunked answer to an HTTP/1.0 client is de-chunked and ended by close", '''
    rxreq
    txresp -nolen -hdr "Transfer-Encoding: chunked"
    chunked "hello "
    chunked "world"
    chunkedlen 0
''', '''
    send "GET /a HTTP/1.0\\r\\n\\r\\n"
    rxresp
    expect resp.status == 200
    expect resp.http.transfer-encoding == <undef>
    expect resp.body == "hello world"
''')

# --- chunked request bodies ---
CH = "POST /a HTTP/1.1\\r\\nHost: x\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n"
refuse("ck01_size_not_hex", "chunk size that is not hex", 400, [R(CH + "5g\\r\\nhello\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("ck02_size_17_digits", "chunk size of 17 hex digits", 400, [R(CH + "00000000000000005\\r\\nhello\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("ck03_size_overflow", "chunk size beyond 64 bits", 400, [R(CH + "10000000000000005\\r\\nhello\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("ck04_size_negative", "negative chunk size", 400, [R(CH + "-5\\r\\nhello\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("ck05_size_0x", "chunk size with a 0x prefix", 400, [R(CH + "0x5\\r\\nhello\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("ck06_size_leading_space", "chunk size after a space", 400, [R(CH + " 5\\r\\nhello\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("ck08_extension_too_long", "chunk extension over 1 KiB", 400, [R(CH + "5;${string,repeat,2000,a}\\r\\nhello\\r\\n0\\r\\n\\r\\n")])
refuse("ck09_extension_bare_lf", "chunk extension ended by a bare LF", 400, [R(CH + "5;a=b\\nhello\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("ck10_bare_lf_chunk_lines", "chunk lines ended by bare LF", 400, [R(CH + "5\\nhello\\n0\\n\\n" + SMUG)])
w("ck12_bad_chunk_after_forwarding", "a bad chunk size arriving after the head was forwarded: the origin connection is cut, the client gets 400 and a close", '''
server s1 {
    rxreqhdrs
    expect req.url == "/a"
    expect req.http.transfer-encoding == "chunked"
    recv 10
    expect_close
    accept
    rxreq
    expect req.url == "/canary"
    txresp
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    send "''' + CH + '''5\\r\\nhello\\r\\n"
    delay 0.3
    send "zz\\r\\nGET /smuggled HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
    rxresp
    expect resp.status == 400
    expect_close
} -run
client c2 -connect ${lbsock} {
    txreq -url /canary
    rxresp
    expect resp.status == 200
} -run
server s1 -wait
''')

# A body broken in the bytes that came with its head is a bad request
# before any server is asked, as HAProxy 2.6 reads it (its HTTP/1 layer
# parses those bytes with the head); `ck12` breaks later.
refuse("ck07_data_longer_than_size", "chunk data longer than its size (no CRLF where due)", 400, [R(CH + "5\\r\\nhelloXX\\r\\n0\\r\\n\\r\\n" + SMUG)])
refuse("ck11_trailer_content_length", "Content-Length in the trailer section", 400, [R(CH + "5\\r\\nhello\\r\\n0\\r\\nContent-Length: 50\\r\\n\\r\\n" + SMUG)])

close_after("sm01_cl_te", "CL.TE: Content-Length and Transfer-Encoding together",
       [R("POST /a HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 6\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n" + SMUG)])
w("ka01_keepalive", "keep-alive: two requests on one client connection reach the origin on one connection", '''
server s1 {
    rxreq
    expect req.url == "/one"
    expect req.http.host == "example.test"
    txresp -body "first"
    rxreq
    expect req.url == "/two"
    txresp -body "second"
} -start
''' + lb() + '''client c1 -connect ${lbsock} {
    txreq -url /one -hdr "Host: example.test"
    rxresp
    expect resp.status == 200
    expect resp.body == "first"
    txreq -url /two -hdr "Host: example.test"
    rxresp
    expect resp.status == 200
    expect resp.body == "second"
} -run
server s1 -wait
''')
