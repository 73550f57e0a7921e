//! HAProxy 2.6 compatibility of the sample engine and the CLI through the
//! real binary (issue 14): header values keep their spaces, the CLI's
//! `get var`/`set var` and `experimental-mode`; each compared with
//! `haproxy` side by side where it is installed.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use common::*;

/// Sends `req` on a new connection and returns the response head's field
/// lines exactly as received (no trimming), up to the empty line.
fn raw_head(addr: SocketAddr, req: &str) -> Vec<Vec<u8>> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read_retry(&mut tmp) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(buf.len());
    head_lines(&buf[..end])
}

/// The lines of a response, without their CR.
fn head_lines(buf: &[u8]) -> Vec<Vec<u8>> {
    buf.split(|&c| c == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec())
        .collect()
}

/// The value of field `name` as sent, every byte after `name: `.
fn raw_field(head: &[Vec<u8>], name: &str) -> Option<Vec<u8>> {
    head.iter().find_map(|l| {
        let p = l.iter().position(|&c| c == b':')?;
        if !l[..p].eq_ignore_ascii_case(name.as_bytes()) {
            return None;
        }
        let v = &l[p + 1..];
        Some(v.strip_prefix(b" ").unwrap_or(v).to_vec())
    })
}

/// Field `name` of the answer to `req` sent on a new connection, as text.
fn field_text(addr: SocketAddr, req: &str, name: &str) -> Option<String> {
    raw_field(&raw_head(addr, req), name).map(|v| String::from_utf8_lossy(&v).into_owned())
}

/// Runs `check` against HAProxy started on the configuration `cfg` makes
/// for a free loopback address (the bind line's), once it listens; nothing
/// when HAProxy is not installed.
fn on_haproxy(name: &str, cfg: impl Fn(&str) -> String, check: impl FnOnce(SocketAddr)) {
    let bind = format!("127.0.0.1:{}", free_port());
    if let Some(_h) = haproxy_with(name, &cfg(&bind)) {
        let addr: SocketAddr = bind.parse().unwrap();
        wait_until("haproxy's listener", || TcpStream::connect(addr).is_ok());
        check(addr);
    }
}

/// Checks that HAProxy (when installed) gives `want` to `run` on the
/// configuration `cfg` makes for its bind address.
fn same_on_haproxy<T: PartialEq + std::fmt::Debug>(
    name: &str,
    cfg: impl Fn(&str) -> String,
    run: impl FnOnce(SocketAddr) -> T,
    want: &T,
) {
    on_haproxy(name, cfg, |addr| assert_eq!(&run(addr), want, "haproxy"));
}

/// Starts ebb on the configuration `cfg` makes for `BIND`, checks that
/// `run` gives `want` there, then on HAProxy (when installed).
fn ebb_and_haproxy<T: PartialEq + std::fmt::Debug>(
    name: &str,
    cfg: impl Fn(&str) -> String,
    run: impl Fn(SocketAddr) -> T,
    want: &T,
) {
    let ebb = Ebb::start(&cfg("BIND"));
    assert_eq!(&run(ebb.addr()), want);
    drop(ebb);
    same_on_haproxy(name, cfg, run, want);
}

/// A proxy section that answers itself, with the rules `rules`.
fn answering(bind: &str, rules: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n{rules}    http-request return status 200\n"
    )
}

const SPACES: &str = "    http-request set-var(txn.url) url\n\
    http-request set-var(txn.enc) str(foo=bar+42\\ 42\\ ),url_enc\n\
    http-after-response set-header x-dec0 \"%[var(txn.url),url_dec]\"\n\
    http-after-response set-header x-dec1 \"%[var(txn.url),url_dec(1)]\"\n\
    http-after-response set-header x-enc \"%[var(txn.enc)]\"\n\
    http-after-response set-header x-back \"%[var(txn.enc),url_dec]\"\n\
    http-after-response set-header x-lead \"  a \"\n\
    http-after-response set-header x-read \"<%[res.fhdr(x-lead)]>\"\n";

fn spaces_seen(addr: SocketAddr) -> Vec<Option<Vec<u8>>> {
    let head = raw_head(
        addr,
        "GET /bla+%20?foo%3Dbar%2B42+42%20 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    ["x-dec0", "x-dec1", "x-enc", "x-back", "x-lead", "x-read"]
        .iter()
        .map(|n| raw_field(&head, n))
        .collect()
}

/// HAProxy's reg-tests converter/url_dec, converter/url_enc and
/// http-rules/http_after_response: a value ending (or starting) with
/// spaces is sent with them, and read back without them.
#[test]
fn header_values_keep_their_spaces() {
    let ebb = Ebb::start(&answering("BIND", SPACES));
    let seen = spaces_seen(ebb.addr());
    let want: Vec<Option<Vec<u8>>> = [
        "/bla+ ?foo=bar+42 42 ",
        "/bla  ?foo=bar+42 42 ",
        "foo%3Dbar%2B42%2042%20",
        "foo=bar+42 42 ",
        "  a ",
        // Read back, a value is trimmed (HAProxy's http_find_header).
        "<a>",
    ]
    .iter()
    .map(|v| Some(v.as_bytes().to_vec()))
    .collect();
    assert_eq!(seen, want);
    same_on_haproxy("hap-spaces", |b| answering(b, SPACES), spaces_seen, &want);
}

/// Process-wide variables of each type for the CLI tests, and a frontend.
fn var_config(sock_line: &str, port: u16) -> String {
    format!(
        "global\n{sock_line}    set-var proc.i int(12)\n    set-var proc.s \"str(a\\x01b)\"\n    set-var proc.b bool(1)\n    set-var proc.bin bin(610062)\n\
defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind 127.0.0.1:{port}\n    http-request return status 200 hdr x-t \"%[var(proc.t)]\"\n"
    )
}

/// The CLI lines run against ebb and HAProxy, with ebb's expected answers.
const VAR_CLI: &[(&str, &str)] = &[
    ("get var proc.i", "proc.i: type=sint value=<12>\n"),
    ("get var proc.s", "proc.s: type=str value=<a.b>\n"),
    ("get var proc.b", "proc.b: type=bool value=<1>\n"),
    ("get var proc.bin", "proc.bin: type=bin value=<a>\n"),
    ("get var proc.nope", "Variable not found.\n\n"),
    ("get var txn.i", "Variable not found.\n\n"),
    ("get var", "Missing process-wide variable identifier.\n\n"),
    (
        "set var proc.i int(1)",
        "This command is restricted to experimental mode only.\n\n",
    ),
    ("experimental-mode", "experimental-mode is OFF\n\n"),
    (
        "experimental-mode on; experimental-mode; set var proc.i int(7); get var proc.i",
        "\nexperimental-mode is ON\n\n\nproc.i: type=sint value=<7>\n",
    ),
    (
        "experimental-mode on; set var proc.t fmt %[var(proc.i)]\\ and\\ %[var(proc.s),length]; get var proc.t",
        "\n\nproc.t: type=str value=<7 and 3>\n",
    ),
    (
        "experimental-mode on; set var proc.u expr str(a\\ b),upper; get var proc.u",
        "\n\nproc.u: type=str value=<A B>\n",
    ),
    (
        "experimental-mode on; set var proc.u; get var proc.u",
        "\nMissing either 'expr', 'fmt' or expression.\n\nproc.u: type=str value=<A B>\n",
    ),
];

/// HAProxy's reg-test sample_fetches/vars: `get var` shows a process-wide
/// variable's type and value, `set var` (experimental mode only) sets one
/// from an expression or a format, and rules see the new value.
#[test]
fn cli_get_and_set_var() {
    let dir = scratch("cli-var");
    let sock = dir.join("ebb.sock");
    let port = free_port();
    let cfg = dir.join("ebb.cfg");
    std::fs::write(
        &cfg,
        var_config(
            &format!("    stats socket {} level admin\n", sock.display()),
            port,
        ),
    )
    .unwrap();
    let _ebb = Ebb::start_args(&["-f", cfg.to_str().unwrap()], dir);
    let mut got = Vec::new();
    for (line, want) in VAR_CLI {
        let out = cli_cmd(&sock, line);
        assert_eq!(&out, want, "{line}");
        got.push(out);
    }
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let head = raw_head(
        addr,
        "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(raw_field(&head, "x-t"), Some(b"7 and 3".to_vec()));
    // An operator may read but not switch modes; a user may do neither.
    let port2 = free_port();
    let op = format!("{}.op", sock.display());
    let dir2 = scratch("cli-var-op");
    let cfg2 = dir2.join("ebb.cfg");
    std::fs::write(
        &cfg2,
        var_config(
            &format!(
                "    stats socket {op} level operator\n    stats socket {op}.user level user\n"
            ),
            port2,
        ),
    )
    .unwrap();
    let _ebb2 = Ebb::start_args(&["-f", cfg2.to_str().unwrap()], dir2);
    assert_eq!(
        cli_cmd(Path::new(&op), "get var proc.i"),
        "proc.i: type=sint value=<12>\n"
    );
    assert!(cli_cmd(Path::new(&op), "experimental-mode on").starts_with("Permission denied"));
    assert!(cli_cmd(Path::new(&format!("{op}.user")), "get var proc.i")
        .starts_with("Permission denied"));
    let hport = free_port();
    let rest = var_config("", hport);
    let rest = rest.strip_prefix("global\n").unwrap_or(&rest);
    if let Some(h) = haproxy_with("hap-cli-var", rest) {
        for ((line, _), ours) in VAR_CLI.iter().zip(&got) {
            assert_eq!(&cli_cmd(&h.sock, line), ours, "haproxy: {line}");
        }
    }
}

/// A PROXY v2 header (TCP4 127.0.0.1:42 -> 127.0.0.1:1337) with `tlvs`.
fn pp2(tlvs: &[(u8, &[u8])]) -> Vec<u8> {
    let mut body = vec![127, 0, 0, 1, 127, 0, 0, 1, 0, 42, 5, 57];
    for (k, v) in tlvs {
        body.push(*k);
        body.extend_from_slice(&(v.len() as u16).to_be_bytes());
        body.extend_from_slice(v);
    }
    let mut h = b"\r\n\r\n\0\r\nQUIT\n\x21\x11".to_vec();
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(&body);
    h
}

fn pp_config(b1: &str, b2: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {b1} accept-proxy\n    bind {b2}\n\
    http-after-response set-header x-auth \"%[fc_pp_authority]\"\n\
    http-after-response set-header x-uid \"%[fc_pp_unique_id,hex]\"\n\
    http-after-response set-header x-rcvd \"%[fc_rcvd_proxy]\"\n\
    http-after-response set-header x-src \"%[src]:%[src_port]\"\n\
    http-request return status 200\n"
    )
}

/// What a client sees for a connection that starts with `pre`: the three
/// fields, or `None` when the connection is closed without an answer.
fn pp_seen(addr: SocketAddr, pre: &[u8]) -> Option<Vec<Option<Vec<u8>>>> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(pre).unwrap();
    let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    if buf.is_empty() {
        return None;
    }
    let head = head_lines(&buf);
    Some(
        ["x-auth", "x-uid", "x-rcvd", "x-src"]
            .iter()
            .map(|n| raw_field(&head, n))
            .collect(),
    )
}

fn pp_cases(pp: SocketAddr, plain: SocketAddr) -> Vec<Option<Vec<Option<Vec<u8>>>>> {
    let big_auth = vec![b'a'; 256];
    let big_uid = vec![b'u'; 129];
    vec![
        pp_seen(
            pp,
            &pp2(&[(2, b"www.example.com"), (5, b"12345"), (4, b"xx")]),
        ),
        pp_seen(pp, &pp2(&[])),
        pp_seen(pp, b"PROXY TCP4 192.0.2.1 192.0.2.2 5000 80\r\n"),
        pp_seen(pp, &pp2(&[(2, &big_auth)])),
        pp_seen(pp, &pp2(&[(5, &big_uid)])),
        pp_seen(plain, b""),
    ]
}

/// HAProxy's reg-tests stream/unique-id-from-proxy and
/// connection/proxy_protocol_tlv_validation: `fc_pp_authority`,
/// `fc_pp_unique_id` and `fc_rcvd_proxy` read the PROXY header the
/// connection began with; an authority over 255 bytes or a unique id over
/// 128 is a bad header (the connection is closed).
#[test]
fn proxy_header_fetches() {
    let ebb = Ebb::start(&pp_config("BIND", "BIND"));
    let seen = pp_cases(ebb.addrs[0], ebb.addrs[1]);
    let f = |v: &str| Some(v.as_bytes().to_vec());
    assert_eq!(
        seen[0],
        Some(vec![
            f("www.example.com"),
            f("3132333435"),
            f("1"),
            f("127.0.0.1:42")
        ])
    );
    assert_eq!(seen[1], Some(vec![f(""), f(""), f("1"), f("127.0.0.1:42")]));
    assert_eq!(
        seen[2],
        Some(vec![f(""), f(""), f("1"), f("192.0.2.1:5000")])
    );
    assert_eq!(seen[3], None);
    assert_eq!(seen[4], None);
    let plain = seen[5].clone().unwrap();
    assert_eq!(plain[..3], [f(""), f(""), f("0")]);
    let (p1, p2) = (free_port(), free_port());
    let cfg = pp_config(&format!("127.0.0.1:{p1}"), &format!("127.0.0.1:{p2}"));
    if let Some(_h) = haproxy_with("hap-pp", &cfg) {
        let a1: SocketAddr = format!("127.0.0.1:{p1}").parse().unwrap();
        let a2: SocketAddr = format!("127.0.0.1:{p2}").parse().unwrap();
        wait_until("haproxy's listener", || TcpStream::connect(a2).is_ok());
        let theirs = pp_cases(a1, a2);
        assert_eq!(theirs[..5], seen[..5], "haproxy");
        assert_eq!(theirs[5].as_ref().unwrap()[..3], plain[..3], "haproxy");
    }
}

/// A message with `|` for FIX's SOH delimiter.
fn fix(s: &str) -> Vec<u8> {
    s.bytes().map(|c| if c == b'|' { 1 } else { c }).collect()
}

const FIX_LOGON: &str = "8=FIX.4.4|9=97|35=A|49=CLIENT1|56=EXECUTOR|34=1|52=20201029-13:02:44.535360|98=0|108=30|141=Y|553=user|554=pass|10=083|";
const FIX_REPLY: &str = "8=FIX.4.4|9=79|35=A|34=1|49=EXECUTOR|52=20201029-13:02:44.535360|56=CLIENT1|98=0|108=30|141=Y|10=038|";

/// A server of a message protocol: answers each connection, once `whole`
/// says the bytes received are a whole message, with `reply` of them, then
/// closes.
fn reply_server(whole: fn(&[u8]) -> bool, reply: fn(&[u8]) -> Vec<u8>) -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut tmp = [0u8; 1024];
                while !whole(&got) {
                    match c.read_retry(&mut tmp) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&tmp[..n]),
                    }
                }
                let _ = c.write_all(&reply(&got));
            });
        }
    });
    addr
}

/// A FIX server: answers `FIX_REPLY` (with a wrong checksum when the
/// message's MsgType is `B`).
fn fix_server() -> SocketAddr {
    reply_server(
        |got| got.windows(4).any(|w| w == b"\x0110=") && got.last() == Some(&1),
        |got| {
            if got.windows(6).any(|w| w == b"\x0135=B\x01") {
                fix(&FIX_REPLY.replace("10=038", "10=039"))
            } else {
                fix(FIX_REPLY)
            }
        },
    )
}

fn fix_config(bind: &str, server: SocketAddr) -> String {
    format!(
        "defaults\n    mode tcp\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n    tcp-request inspect-delay 10s\n\
    tcp-request content reject unless {{ req.payload(0,0),fix_is_valid }}\n\
    tcp-request content set-var(sess.sender) req.payload(0,0),fix_tag_value(SenderCompID)\n\
    tcp-request content set-var(sess.user) req.payload(0,0),fix_tag_value(553)\n\
    tcp-request content reject unless {{ var(sess.sender) -m str CLIENT1 }} {{ var(sess.user) -m str user }}\n\
    default_backend be\n\
backend be\n    tcp-response inspect-delay 10s\n\
    tcp-response content reject unless {{ res.payload(0,0),fix_is_valid }}\n\
    server s {server}\n"
    )
}

/// Sends `parts` one after the other (a pause between them so they
/// arrive apart) and returns what comes back before the close.
fn exchange(addr: SocketAddr, parts: &[&[u8]]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        if s.write_all(p).is_err() {
            break;
        }
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

fn fix_cases(addr: SocketAddr) -> Vec<Vec<u8>> {
    let logon = fix(FIX_LOGON);
    let (a, b) = logon.split_at(40);
    let other = fix(&FIX_LOGON
        .replace("35=A", "35=B")
        .replace("10=083", "10=084"));
    vec![
        // Whole, then in two parts: the rule waits for the rest.
        exchange(addr, &[&logon]),
        exchange(addr, &[a, b]),
        // A wrong checksum, a wrong sender: refused.
        exchange(addr, &[&fix(&FIX_LOGON.replace("10=083", "10=082"))]),
        exchange(
            addr,
            &[&fix(&FIX_LOGON
                .replace("CLIENT1", "CLIENT2")
                .replace("10=083", "10=084"))],
        ),
        // A server answer with a wrong checksum: refused too.
        exchange(addr, &[&other]),
    ]
}

/// HAProxy's reg-test converter/fix: `fix_is_valid` and `fix_tag_value`
/// on the first bytes of each side, in `tcp-request content` and
/// `tcp-response content` rules; a condition that fails on a message not
/// whole yet waits for more bytes (HAProxy's MISS) instead of deciding.
#[test]
fn fix_converters() {
    let srv = fix_server();
    let ebb = Ebb::start(&fix_config("BIND", srv));
    let seen = fix_cases(ebb.addr());
    let want: Vec<Vec<u8>> = vec![fix(FIX_REPLY), fix(FIX_REPLY), vec![], vec![], vec![]];
    assert_eq!(seen, want);
    same_on_haproxy("hap-fix", |b| fix_config(b, srv), fix_cases, &want);
}

const RAW_RULES: &str = "    http-after-response set-header x-j0 \"%[str(\\xE0),json(utf8)]\"\n\
    http-after-response set-header x-j1 \"%[str(-\\xE0-),json(utf8s)]\"\n\
    http-after-response set-header x-j2 \"%[str(\\xC3\\xA9\\xE0),json(ascii)]\"\n\
    http-after-response set-header x-len \"%[str(a\\xE0\\xFF),length]\"\n\
    http-after-response set-header x-hex \"%[str(\\xE0\\xFF),hex]\"\n\
    http-after-response set-header x-lit \"a\\xE1b\"\n";

/// HAProxy's reg-test converter/json: `\xHH` escapes that make bytes that
/// are not UTF-8 reach `str()` and log-format text as those bytes; where
/// ebb would not read them as bytes the line is refused.
#[test]
fn bytes_that_are_not_utf8_in_words() {
    let ebb = Ebb::start(&answering("BIND", RAW_RULES));
    let see = |addr: SocketAddr| {
        let head = raw_head(
            addr,
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        ["x-j0", "x-j1", "x-j2", "x-len", "x-hex", "x-lit"]
            .iter()
            .map(|n| raw_field(&head, n))
            .collect::<Vec<_>>()
    };
    let seen = see(ebb.addr());
    let f = |v: &[u8]| Some(v.to_vec());
    assert_eq!(
        seen,
        [
            f(b""),
            f(b"--"),
            f(b"\\u00c3\\u00a9\\u00e0"),
            f(b"3"),
            f(b"E0FF"),
            f(b"a\xe1b")
        ]
    );
    same_on_haproxy("hap-raw", |b| answering(b, RAW_RULES), see, &seen);
    // Elsewhere: refused with the line.
    for rules in [
        "    http-request return status 200 content-type text/plain string \"a\\xE0\"\n",
        "    http-request set-header x \"%[str(a),concat(\\xE0)]\"\n",
        "    acl a str(x) -m str \\xE1\n    http-request deny if a\n",
    ] {
        let dir = scratch("raw-refused");
        let cfg = dir.join("r.cfg");
        std::fs::write(&cfg, answering("127.0.0.1:0", rules)).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", cfg.to_str().unwrap()], &dir);
        assert_ne!(code, 0, "{rules}");
        assert!(
            err.contains("r.cfg:8: ") && err.contains("not UTF-8"),
            "{rules}: {err}"
        );
    }
}

/// An MQTT 3.1.1 CONNECT with a client id, a user name and a password.
fn mqtt_connect(id: &str, user: &str, flags: u8) -> Vec<u8> {
    let mut body = b"\x00\x04MQTT\x04".to_vec();
    body.push(flags);
    body.extend_from_slice(&[0, 60]);
    for s in [id, user, "secret"] {
        body.extend_from_slice(&(s.len() as u16).to_be_bytes());
        body.extend_from_slice(s.as_bytes());
    }
    let mut m = vec![0x10, body.len() as u8];
    m.extend_from_slice(&body);
    m
}

/// An MQTT server: a CONNACK accepting the session, refusing it (reason
/// 5) when the client id says `bad`.
fn mqtt_server() -> SocketAddr {
    reply_server(
        |got| got.len() >= 2 && got.len() >= 2 + usize::from(got[1]),
        |got| {
            if got.windows(3).any(|w| w == b"bad") {
                vec![0x20, 2, 0, 5]
            } else {
                vec![0x20, 2, 0, 0]
            }
        },
    )
}

fn mqtt_config(bind: &str, server: SocketAddr) -> String {
    format!(
        "defaults\n    mode tcp\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n    tcp-request inspect-delay 10s\n\
    tcp-request content reject unless {{ req.payload(0,0),mqtt_is_valid }}\n\
    tcp-request content set-var(sess.user) req.payload(0,0),mqtt_field_value(connect,username)\n\
    tcp-request content set-var(sess.ka) req.payload(0,0),mqtt_field_value(1,keepalive)\n\
    tcp-request content reject unless {{ var(sess.user) -m str test }} {{ var(sess.ka) -m str 60 }}\n\
    default_backend be\n\
backend be\n    tcp-response inspect-delay 10s\n\
    tcp-response content reject unless {{ res.payload(0,0),mqtt_is_valid }}\n\
    tcp-response content set-var(res.rc) res.payload(0,0),mqtt_field_value(connack,reason_code)\n\
    tcp-response content reject unless {{ var(res.rc) -m str 0 }}\n\
    server s {server}\n"
    )
}

fn mqtt_cases(addr: SocketAddr) -> Vec<Vec<u8>> {
    let ok = mqtt_connect("client1", "test", 0xC2);
    let (a, b) = ok.split_at(9);
    vec![
        exchange(addr, &[&ok]),
        exchange(addr, &[a, b]),
        // Another user, the reserved flag, a session the server refuses.
        exchange(addr, &[&mqtt_connect("client1", "nope", 0xC2)]),
        exchange(addr, &[&mqtt_connect("client1", "test", 0xC3)]),
        exchange(addr, &[&mqtt_connect("bad", "test", 0xC2)]),
    ]
}

/// HAProxy's reg-test converter/mqtt: `mqtt_is_valid` and
/// `mqtt_field_value` on a CONNECT and its CONNACK in content rules,
/// waiting for a packet not whole yet.
#[test]
fn mqtt_converters() {
    let srv = mqtt_server();
    let ebb = Ebb::start(&mqtt_config("BIND", srv));
    let seen = mqtt_cases(ebb.addr());
    let ack = vec![0x20, 2, 0, 0];
    let want: Vec<Vec<u8>> = vec![ack.clone(), ack, vec![], vec![], vec![]];
    assert_eq!(seen, want);
    same_on_haproxy("hap-mqtt", |b| mqtt_config(b, srv), mqtt_cases, &want);
}

fn hex_config(bind: &str, log: SocketAddr) -> String {
    format!(
        "    log {log} format raw local0\n\
defaults\n    mode http\n    log global\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n\
    log-format \"%{{+X}}o %ci:%cp %fi:%fp %{{-X}}fp %{{+Q}}ci %{{-X,+Q}}ci\"\n\
    http-after-response set-header x-h \"%{{+X}}ci:%{{+X}}cp %{{+X}}fi:%{{+X}}fp\"\n\
    http-after-response set-header x-o \"%{{+X}}o%ci-%cp %{{-X}}cp %[str(12)]\"\n\
    http-request return status 200\n"
    )
}

/// The two fields and the log line for one request from a new connection,
/// with the client's and the proxy's ports, to compare across proxies.
fn hex_seen(addr: SocketAddr, log: &std::net::UdpSocket) -> Vec<String> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let (cp, fp) = (s.local_addr().unwrap().port(), addr.port());
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let head = head_lines(&buf);
    // This connection's line (a proxy may log others before it, such as
    // a probe of its listener).
    let mut d = [0u8; 2048];
    let line = loop {
        let n = retry_eintr(|| log.recv(&mut d)).unwrap_or(0);
        let l = String::from_utf8_lossy(&d[..n]).trim_end().to_string();
        if n == 0 || l.contains(&format!("{cp:04X}")) {
            break l;
        }
    };
    let ports = |t: String| {
        t.replace(&format!("{cp:04X}"), "CP")
            .replace(&format!("{fp:04X}"), "FP")
            .replace(&cp.to_string(), "cp")
            .replace(&fp.to_string(), "fp")
    };
    vec![
        ports(String::from_utf8_lossy(&raw_field(&head, "x-h").unwrap_or_default()).into_owned()),
        ports(String::from_utf8_lossy(&raw_field(&head, "x-o").unwrap_or_default()).into_owned()),
        ports(line),
    ]
}

/// The `+X` log-format flag and `%o`: addresses and ports in hexadecimal
/// in header values and log lines, as HAProxy writes them.
#[test]
fn hexadecimal_log_format_flag() {
    let log = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    log.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let la = log.local_addr().unwrap();
    let ebb = Ebb::start(&format!("global\n{}", hex_config("BIND", la)));
    let seen = hex_seen(ebb.addr(), &log);
    let want = vec![
        "7F000001:CP 7F000001:FP".to_string(),
        "7F000001-CP cp 12".to_string(),
        "7F000001:CP 7F000001:FP fp 7F000001 \"127.0.0.1\"".to_string(),
    ];
    assert_eq!(seen, want);
    same_on_haproxy(
        "hap-hex",
        |b| hex_config(b, la),
        |a| hex_seen(a, &log),
        &want,
    );
}

/// The TLVs (kind, value) of each PROXY header an origin received.
type SeenTlvs = std::sync::Mutex<Vec<Vec<(u8, Vec<u8>)>>>;

/// An HTTP origin behind `send-proxy-v2`: records the TLVs of each
/// connection's PROXY header (kind, value; a CRC32C's value as `crc`), and
/// answers every request 200.
fn pp_origin() -> (SocketAddr, std::sync::Arc<SeenTlvs>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let s2 = std::sync::Arc::clone(&seen);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let seen = std::sync::Arc::clone(&s2);
            std::thread::spawn(move || {
                let mut fixed = [0u8; 16];
                if c.read_exact(&mut fixed).is_err() {
                    return;
                }
                let mut rest = vec![0u8; usize::from(u16::from_be_bytes([fixed[14], fixed[15]]))];
                if c.read_exact(&mut rest).is_err() {
                    return;
                }
                let mut tlvs = Vec::new();
                let mut p = if fixed[13] == 0x11 { 12 } else { 36 };
                while p + 3 <= rest.len() {
                    let n = usize::from(u16::from_be_bytes([rest[p + 1], rest[p + 2]]));
                    let v = rest[p + 3..p + 3 + n].to_vec();
                    tlvs.push((rest[p], if rest[p] == 3 { b"crc".to_vec() } else { v }));
                    p += 3 + n;
                }
                tlvs.sort();
                seen.lock().unwrap().push(tlvs);
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                loop {
                    while let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..i + 4);
                        if c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                            .is_err()
                        {
                            return;
                        }
                    }
                    match c.read_retry(&mut tmp) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn pp_send_config(bind: &str, origin: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind} accept-proxy\n    unique-id-format id-%[req.hdr(in)]\n    default_backend be\n\
backend be\n    server s {origin} send-proxy-v2 proxy-v2-options unique-id,authority,crc32c\n"
    )
}

/// Two requests (`in: a`, `in: b`) on one connection that began with a
/// PROXY header naming an authority; the TLVs the origin saw, per
/// connection.
fn pp_send_seen(addr: SocketAddr, seen: &SeenTlvs) -> Vec<Vec<(u8, Vec<u8>)>> {
    seen.lock().unwrap().clear();
    let mut c = Client::connect(addr);
    c.send(&pp2(&[(2, b"www.example.com")]));
    for v in ["a", "b"] {
        c.send(format!("GET / HTTP/1.1\r\nHost: t\r\nin: {v}\r\n\r\n").as_bytes());
        assert_eq!(c.read_resp().status, 200);
    }
    let got = seen.lock().unwrap().clone();
    got
}

/// HAProxy's reg-test connection/proxy_protocol_send_unique_id:
/// `proxy-v2-options unique-id,authority,crc32c` put the stream's unique
/// id, the client's authority and a checksum in the header; a connection
/// whose header would differ (another unique id) is not reused.
#[test]
fn send_proxy_v2_options() {
    let (origin, seen) = pp_origin();
    let ebb = Ebb::start(&pp_send_config("BIND", origin));
    let got = pp_send_seen(ebb.addr(), &seen);
    let tlvs = |id: &str| {
        vec![
            (2, b"www.example.com".to_vec()),
            (3, b"crc".to_vec()),
            (5, id.as_bytes().to_vec()),
        ]
    };
    let want = vec![tlvs("id-a"), tlvs("id-b")];
    assert_eq!(got, want);
    same_on_haproxy(
        "hap-ppsend",
        |b| pp_send_config(b, origin),
        |a| pp_send_seen(a, &seen),
        &want,
    );
    // A tcp proxy sends them too (the unique id from the frontend's
    // format), one header per connection.
    let tcp = |b: &str| {
        pp_send_config(b, origin)
            .replace("mode http", "mode tcp")
            .replace("id-%[req.hdr(in)]", "tcp-%[fe_name]")
    };
    let ebb = Ebb::start(&tcp("BIND"));
    let got = pp_send_seen(ebb.addr(), &seen);
    assert_eq!(got, vec![tlvs("tcp-fe")]);
    same_on_haproxy("hap-ppsend-tcp", tcp, |a| pp_send_seen(a, &seen), &got);
    // The SSL TLVs are refused.
    let dir = scratch("pp-ssl");
    let cfg = dir.join("p.cfg");
    std::fs::write(
        &cfg,
        pp_send_config("127.0.0.1:0", origin).replace("crc32c", "crc32c,ssl"),
    )
    .unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", cfg.to_str().unwrap()], &dir);
    assert_ne!(code, 0);
    assert!(err.contains("p.cfg:11: ") && err.contains("'ssl'"), "{err}");
}

fn tcp_log_config(bind: &str, log: SocketAddr, server: SocketAddr) -> String {
    format!(
        "    log {log} format raw local0\n\
defaults\n    log global\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n    mode tcp\n\
    log-format \"%ci:%cp %fi:%fp %ft %b/%s %ts %B %{{+X}}fp %[fe_name,upper] %ID\"\n\
    default_backend be\n\
backend be\n    mode tcp\n    server s {server}\n"
    )
}

/// One tcp session through `addr` (`hi` answered `ok`), and its log line
/// with the ports replaced by `CP` and `FP`.
fn tcp_log_seen(addr: SocketAddr, log: &std::net::UdpSocket) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let cp = s.local_addr().unwrap().port();
    s.write_all(b"hi\n").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert_eq!(out, b"ok\n");
    drop(s);
    let mut d = [0u8; 2048];
    loop {
        let n = retry_eintr(|| log.recv(&mut d)).unwrap_or(0);
        let l = String::from_utf8_lossy(&d[..n]).trim_end().to_string();
        if n == 0 || l.contains(&format!(":{cp} ")) {
            return l
                .replace(&format!(":{cp} "), ":CP ")
                .replace(&format!(":{} ", addr.port()), ":FP ")
                .replace(&format!("{:04X}", addr.port()), "XFP");
        }
    }
}

/// HAProxy's reg-test log/wrong_ip_port_logging: a tcp proxy with a
/// `log-format` logs each session with it at its end (addresses and ports
/// of both sides, termination state, bytes); HTTP variables are refused.
#[test]
fn tcp_log_format() {
    let log = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    log.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let la = log.local_addr().unwrap();
    let srv = reply_server(|g| g.ends_with(b"\n"), |_| b"ok\n".to_vec());
    let ebb = Ebb::start(&format!("global\n{}", tcp_log_config("BIND", la, srv)));
    let seen = tcp_log_seen(ebb.addr(), &log);
    assert_eq!(seen, "127.0.0.1:CP 127.0.0.1:FP fe be/s -- 3 XFP FE -");
    same_on_haproxy(
        "hap-tcplog",
        |b| tcp_log_config(b, la, srv),
        |a| tcp_log_seen(a, &log),
        &seen,
    );
    let dir = scratch("tcplog-http");
    let cfg = dir.join("t.cfg");
    std::fs::write(
        &cfg,
        format!("global\n{}", tcp_log_config("127.0.0.1:0", la, srv)).replace("%ID", "%r"),
    )
    .unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", cfg.to_str().unwrap()], &dir);
    assert_ne!(code, 0);
    assert!(
        err.contains("t.cfg:11: ") && err.contains("'%r' is reserved for HTTP mode"),
        "{err}"
    );
}

const IP_RULES: &str = "    http-request set-var(txn.v4) ipv4(10.1.2.3)\n\
    http-after-response set-header x-ip \"%[var(txn.v4),ipmask(16)] %[ipv6(2001:db8::1)] %[ipv4(192.168.0.1),hex]\"\n";

/// The constant address fetches `ipv4()` and `ipv6()` (HAProxy's reg-test
/// connection/cli_src_dst uses them with `set-src`).
#[test]
fn constant_address_fetches() {
    let ebb = Ebb::start(&answering("BIND", IP_RULES));
    let see = |addr: SocketAddr| {
        let head = raw_head(
            addr,
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        raw_field(&head, "x-ip")
    };
    let want = Some(b"10.1.0.0 2001:db8::1 C0A80001".to_vec());
    assert_eq!(see(ebb.addr()), want);
    same_on_haproxy("hap-ip", |b| answering(b, IP_RULES), see, &want);
}

fn restrict_config(bind: &str, origin: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n\
    use_backend bdel if {{ path /del }}\n    use_backend brej if {{ path /rej }}\n\
    use_backend bfe if {{ path /fe }}\n    default_backend bkeep\n\
backend bdel\n    option http-restrict-req-hdr-names delete\n    server o {origin}\n\
backend brej\n    option http-restrict-req-hdr-names reject\n    server o {origin}\n\
backend bkeep\n    option http-restrict-req-hdr-names preserve\n    server o {origin}\n\
backend bfe\n    http-request set-header x_added 1\n    option http-restrict-req-hdr-names delete\n    server o {origin}\n"
    )
}

/// Per path: the status, and which of the request's fields the origin
/// received.
fn restrict_seen(addr: SocketAddr, o: &common::origin::Origin) -> Vec<(u16, Vec<&'static str>)> {
    ["/del", "/rej", "/keep", "/fe"]
        .iter()
        .map(|p| {
            let r = raw(
                addr,
                format!(
                    "GET {p} HTTP/1.1\r\nHost: t\r\nx_a_b: 1\r\nkeep-me: 2\r\nx.dot: 3\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
            let head = o.heads.lock().unwrap().last().cloned().unwrap_or_default().to_ascii_lowercase();
            let got = if r.status == 200 && head.contains(p) {
                ["x_a_b:", "keep-me:", "x.dot:", "x_added:"]
                    .into_iter()
                    .filter(|n| head.contains(n))
                    .collect()
            } else {
                Vec::new()
            };
            (r.status, got)
        })
        .collect()
}

/// `option http-restrict-req-hdr-names` (HAProxy's reg-test
/// http-rules/restrict_req_hdr_names, which also needs `fcgi-app`):
/// after the proxy's rules, fields whose name is not letters, digits and
/// `-` are removed (`delete`) or make the answer 403 (`reject`).
#[test]
fn restrict_request_header_names() {
    let o = common::origin::Origin::start("o", common::origin::Mode::Ok);
    let ebb = Ebb::start(&restrict_config("BIND", o.addr));
    let seen = restrict_seen(ebb.addr(), &o);
    let want = vec![
        (200, vec!["keep-me:"]),
        (403, vec![]),
        (200, vec!["x_a_b:", "keep-me:", "x.dot:"]),
        (200, vec!["keep-me:"]),
    ];
    assert_eq!(seen, want);
    same_on_haproxy(
        "hap-restrict",
        |b| restrict_config(b, o.addr),
        |a| restrict_seen(a, &o),
        &want,
    );
}

const COND_RULES: &str = "    http-request set-var(txn.a) str(a)\n\
    http-request set-var(txn.a,ifnotexists) str(b)\n\
    http-request set-var(txn.b,ifexists) str(b)\n\
    http-request set-var(txn.c) int(5)\n\
    http-request set-var(txn.c,ifgt) int(7)\n\
    http-request set-var(txn.c,ifgt) int(2)\n\
    http-request set-var(txn.d) int(5)\n\
    http-request set-var(txn.d,iflt) int(7)\n\
    http-request set-var(txn.e) str(x)\n\
    http-request set-var(txn.e,ifempty) bool(true)\n\
    http-request set-var(txn.e,ifempty) str()\n\
    http-request set-var(txn.f) str(x)\n\
    http-request unset-var(txn.f)\n\
    http-request set-var(txn.f,ifset) str(y)\n\
    http-request set-var(txn.g,ifnotset,ifnotempty) str(z)\n\
    http-request set-var(proc.p,ifexists) str(p)\n\
    http-request set-var(txn.h,ifexists) str(h)\n\
    http-request set-var(txn.i) req.hdr(x-cust),set-var(txn.j,ifnotempty),length\n\
    http-request return status 200 hdr x-var \"a=%[var(txn.a)] b=%[var(txn.b)] c=%[var(txn.c)] d=%[var(txn.d)] e=<%[var(txn.e)]> f=%[var(txn.f)] g=%[var(txn.g)] p=%[var(proc.p)] h=%[var(txn.h)] i=%[var(txn.i)] j=%[var(txn.j)]\"\n";

/// HAProxy's reg-test sample_fetches/cond_set_var (which also needs
/// `req.len` in HTTP rules): `set-var(NAME,COND...)` conditions as
/// HAProxy evaluates them, and the `set-var` converter.
#[test]
fn conditional_set_var() {
    // `answering` ends with a `return` the rules above already make.
    let cfg = |b: &str| answering(b, COND_RULES);
    let ebb = Ebb::start(&cfg("BIND"));
    let see = |addr: SocketAddr| {
        let req = "GET / HTTP/1.1\r\nHost: t\r\nx-cust: foobar\r\nConnection: close\r\n\r\n";
        field_text(addr, req, "x-var")
    };
    let want = Some("a=a b= c=2 d=7 e=<> f= g=z p=p h= i=6 j=foobar".to_string());
    assert_eq!(see(ebb.addr()), want);
    same_on_haproxy("hap-condvar", cfg, see, &want);
}

const FC_RULES: &str = "    tcp-request connection set-src ipv4(10.0.0.1)\n\
    tcp-request session set-src ipv4(10.1.0.1)\n\
    tcp-request session set-dst ipv4(10.1.0.2)\n\
    http-request return status 200 hdr x-a \"%[fc_src] %[src] %[fc_dst] %[dst] %[fc_src_port] %[src_port] %[fc_dst_port] %[dst_port]\"\n";

/// `fc_src`, `fc_dst` and their ports: the connection's addresses, which a
/// `tcp-request connection` rule changes and a `tcp-request session` rule
/// does not (it changes the session's: `src`, `dst`), as HAProxy 2.6.
#[test]
fn front_connection_addresses() {
    let cfg = |b: &str| answering(b, FC_RULES);
    let ebb = Ebb::start(&cfg("BIND"));
    let see = |addr: SocketAddr| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let cp = s.local_addr().unwrap().port().to_string();
        s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let head = head_lines(&buf);
        let v = String::from_utf8_lossy(&raw_field(&head, "x-a").unwrap_or_default()).into_owned();
        v.split(' ')
            .map(|w| match w {
                w if w == cp => "CP",
                w if w == addr.port().to_string() => "FP",
                w => w,
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let seen = see(ebb.addr());
    assert!(
        seen.starts_with("10.0.0.1 10.1.0.1 127.0.0.1 10.1.0.2 CP "),
        "{seen}"
    );
    same_on_haproxy("hap-fc", cfg, see, &seen);
}

/// `req.len` in HTTP rules: HAProxy's size of the request's HTX form
/// (reg-test sample_fetches/cond_set_var reads it), before and after a
/// rule adds a field.
#[test]
fn request_length_in_http_rules() {
    let rules = "    http-request set-var(txn.a) req.len\n    http-request set-header x-added abc\n    http-request set-var(txn.b) req.len\n    http-request return status 200 hdr x-len \"%[var(txn.a)] %[var(txn.b)]\"\n";
    let cfg = |b: &str| answering(b, rules);
    let ebb = Ebb::start(&cfg("BIND"));
    let see = |addr: SocketAddr| {
        [
            "Connection: close",
            "Connection: keep-alive, Upgrade\r\nUpgrade: x",
        ]
        .iter()
        .map(|c| {
            let req = format!(
                "GET /some/path?q=1 HTTP/1.1\r\nHost: example.com\r\nX-Cust:  foobar  \r\n{c}\r\n\r\n"
            );
            raw_field(&raw_head(addr, &req), "x-len")
        })
        .collect::<Vec<_>>()
    };
    // 20 + GET /some/path?q=1 HTTP/1.1 (3 + 14 + 8), host (4 + 11),
    // x-cust (6 + 6), 1; then x-added (7 + 3). Connection: close is not
    // counted; Connection: Upgrade is (10 + 7), with Upgrade (7 + 1).
    let want = vec![Some(b"73 83".to_vec()), Some(b"98 108".to_vec())];
    assert_eq!(see(ebb.addr()), want);
    same_on_haproxy("hap-reqlen", cfg, see, &want);
}

/// Rules reading what earlier rules edited: `return`'s `hdr` and
/// `lf-string`, `redirect location`, `set-var` (each on the request),
/// and `http-response` rules after an `http-response set-header`.
fn edited_config(bind: &str, origin: u16) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n\
    http-request set-header x-a edited\n\
    http-request set-var(txn.v) req.hdr(x-a)\n\
    http-request redirect location /r/%[req.hdr(x-a)] if {{ path /redir }}\n\
    http-request return status 200 hdr x-got %[req.hdr(x-a)] hdr x-var %[var(txn.v)] content-type text/plain lf-string \"body=%[req.hdr(x-a)]\" if {{ path /ret }}\n\
    default_backend be\n\
backend be\n\
    http-response set-header x-r one\n\
    http-response set-header x-r2 %[res.hdr(x-r)]\n\
    http-response set-var(txn.r) res.hdr(x-r)\n\
    http-response set-header x-r3 %[var(txn.r)]\n\
    server o 127.0.0.1:{origin}\n\
listen origin\n    bind 127.0.0.1:{origin}\n\
    http-request return status 200 content-type text/plain string origin\n"
    )
}

fn edited_seen(addr: SocketAddr) -> Vec<Option<Vec<u8>>> {
    let get = |path: &str| {
        raw(
            addr,
            format!("GET {path} HTTP/1.1\r\nHost: t\r\nx-a: orig\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .expect("an answer")
    };
    let ret = get("/ret");
    let redir = get("/redir");
    let proxied = get("/p");
    let f = |r: &Resp, n: &str| r.header(n).map(|v| v.as_bytes().to_vec());
    vec![
        f(&ret, "x-got"),
        f(&ret, "x-var"),
        Some(ret.body.clone()),
        f(&redir, "location"),
        f(&proxied, "x-r2"),
        f(&proxied, "x-r3"),
    ]
}

/// HAProxy evaluates a rule's formats when the rule runs, on the message
/// as the rules before it edited it (ebb's `return` used to read the
/// request as received).
#[test]
fn rules_read_the_message_as_earlier_rules_edited_it() {
    let dir = scratch("edited");
    let (port, origin) = (free_port(), free_port());
    std::fs::write(
        dir.join("ebb.cfg"),
        edited_config(&format!("127.0.0.1:{port}"), origin),
    )
    .unwrap();
    let ebb = Ebb::start_args(&["-f", dir.join("ebb.cfg").to_str().unwrap()], dir);
    let want: Vec<Option<Vec<u8>>> = ["edited", "edited", "body=edited", "/r/edited", "one", "one"]
        .iter()
        .map(|v| Some(v.as_bytes().to_vec()))
        .collect();
    assert_eq!(edited_seen(ebb.addr()), want);
    let horigin = free_port();
    same_on_haproxy(
        "hap-edited",
        |b| edited_config(b, horigin),
        edited_seen,
        &want,
    );
}

/// `http-request set-src`/`set-src-port` (and `tcp-request content
/// set-dst` in an HTTP proxy) change the request's stream addresses, as
/// HAProxy 2.6's: `src`, `src_port`, `dst` see them, `fc_src` stays the
/// connection's, and the next request of the connection starts from the
/// connection's again.
#[test]
fn http_request_set_src_is_the_streams() {
    let rules = "    tcp-request content set-dst ipv4(10.2.0.2)\n\
    http-request set-src hdr(x-src) if { hdr(x-src) -m found }\n\
    http-request set-src-port hdr(x-port) if { hdr(x-port) -m found }\n\
    http-after-response set-header x-a \"%[fc_src] %[src] %[dst]\"\n\
    http-after-response set-header x-p \"%[src_port]\"\n";
    let cfg = |b: &str| answering(b, rules);
    let ebb = Ebb::start(&cfg("BIND"));
    let see = |addr: SocketAddr| {
        let mut c = Client::connect(addr);
        let cp = c.s.local_addr().unwrap().port().to_string();
        let mut out = Vec::new();
        for extra in [
            "x-src: 10.9.8.7\r\nx-port: 4242\r\n",
            "",
            "x-src: 2001:db8::5\r\n",
        ] {
            c.send(format!("GET / HTTP/1.1\r\nHost: t\r\n{extra}\r\n").as_bytes());
            let r = c.read_resp();
            let p = r.header("x-p").unwrap_or("").to_string();
            let p = if p == cp { "CP".to_string() } else { p };
            out.push(format!("{} {p}", r.header("x-a").unwrap_or("")));
        }
        out
    };
    let want = vec![
        "127.0.0.1 10.9.8.7 10.2.0.2 4242".to_string(),
        "127.0.0.1 127.0.0.1 10.2.0.2 CP".to_string(),
        "127.0.0.1 2001:db8::5 10.2.0.2 CP".to_string(),
    ];
    assert_eq!(see(ebb.addr()), want);
    same_on_haproxy("hap-setsrc", cfg, see, &want);
}

/// With a PROXY header (`accept-proxy`), the header's addresses are the
/// session's (`src`, `dst`) while `fc_src`/`fc_dst` stay the socket's as
/// the `tcp-request connection` rules left them (HAProxy 2.6's
/// conn_recv_proxy; reg-test connection/cli_src_dst).
#[test]
fn a_proxy_header_gives_the_session_its_addresses() {
    let cfg = |b: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {b} accept-proxy\n    tcp-request connection set-src ipv4(10.1.0.1)\n\
    http-request return status 200 hdr x-a \"%[fc_src] %[src] %[dst]\"\n"
        )
    };
    let ebb = Ebb::start(&cfg("BIND"));
    let see = |addr: SocketAddr| {
        let req = "PROXY TCP4 192.168.0.1 192.168.0.2 1111 80\r\nGET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        field_text(addr, req, "x-a")
    };
    let want = Some("10.1.0.1 192.168.0.1 192.168.0.2".to_string());
    assert_eq!(see(ebb.addr()), want);
    same_on_haproxy("hap-ppaddrs", cfg, see, &want);
}

/// The `defaults` section of the two-proxy configurations below.
const HTTP_DEFAULTS: &str = "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n";

/// `option forwardfor` and `option originalto` (HAProxy's merge: the
/// frontend's or the backend's option adds the field, either's `except`
/// network leaves it out, the backend names it) with the addresses an
/// `http-request set-src`/`set-dst` gave the request; and an
/// `http-request return` field whose value is empty is not sent.
#[test]
fn forwarded_addresses_follow_the_stream() {
    let cfg = |b: &str| {
        let p2 = free_port();
        format!(
            "{HTTP_DEFAULTS}frontend fe1\n    bind {b}\n    option originalto except 10.0.0.0/8\n    option forwardfor except 172.16.0.0/12\n\
    http-request set-src hdr(x-src)\n    http-request set-dst hdr(x-dst)\n    default_backend be\n\
backend be\n    option forwardfor except 192.168.0.0/16 header x-client\n    server s 127.0.0.1:{p2}\n\
frontend fe2\n    bind 127.0.0.1:{p2}\n\
    http-request return status 200 hdr x-ff \"%[req.hdr(x-client)]\" hdr x-ot \"%[req.hdr(x-original-to)]\" hdr x-xff \"%[req.hdr(x-forwarded-for)]\"\n"
        )
    };
    let ebb = Ebb::start(&cfg("BIND"));
    let see = |addr: SocketAddr| {
        [
            ("1.2.3.4", "5.6.7.8"),
            ("192.168.1.1", "10.1.1.1"),
            ("172.16.0.9", "::1"),
        ]
        .iter()
        .map(|(s, d)| {
            let req = format!("GET / HTTP/1.1\r\nHost: t\r\nx-src: {s}\r\nx-dst: {d}\r\nConnection: close\r\n\r\n");
            ["x-ff", "x-ot", "x-xff"]
                .iter()
                .map(|n| field_text(addr, &req, n))
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
    };
    let s = |v: &str| Some(v.to_string());
    let want = vec![
        vec![s("1.2.3.4"), s("5.6.7.8"), None],
        vec![None, None, None],
        vec![None, s("::1"), None],
    ];
    assert_eq!(see(ebb.addr()), want);
    same_on_haproxy("hap-fwd", cfg, see, &want);
}

/// The rule a `last_rule_file:last_rule_line` pair names, read from the
/// configuration file itself (`-` for none).
fn rule_at(v: &str) -> String {
    let Some((file, line)) = v.rsplit_once(':') else {
        return format!("unparsed {v}");
    };
    let Ok(n) = line.parse::<usize>() else {
        return "-".to_string();
    };
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines().nth(n - 1).unwrap_or("?").trim().to_string()
}

/// `last_rule_file`/`last_rule_line`: the last final rule of the exchange
/// (`tcp-request content accept`, `http-request deny|allow`,
/// `http-response deny|allow`; a `set-var` is not final), also
/// `http-response redirect` itself, and the connection going on after a
/// deny or a redirect, as HAProxy 2.6 (reg-test log/last_rule: the log
/// line names redirects too).
#[test]
fn last_rule_names_the_final_rule() {
    let cfg = |b: &str| {
        let p2 = free_port();
        format!(
            "{HTTP_DEFAULTS}frontend fe\n    bind {b}\n    tcp-request content accept if {{ path /tcp }}\n\
    http-request set-var(txn.p) path\n    http-request deny if {{ path /deny }}\n\
    http-request redirect location /r if {{ path /redir }}\n    http-request allow if {{ path /allow }}\n\
    http-after-response set-header x-lr \"%[last_rule_file]:%[last_rule_line]\"\n    default_backend be\n\
backend be\n    http-response redirect location /x%[status] code 303 if {{ var(txn.p) -m str /rsredir }}\n\
    http-response deny if {{ var(txn.p) -m str /rsdeny }}\n    http-response allow if {{ var(txn.p) -m str /rsallow }}\n\
    server s 127.0.0.1:{p2}\n\
frontend fe2\n    bind 127.0.0.1:{p2}\n    http-request return status 200\n"
        )
    };
    let ebb = Ebb::start(&cfg("BIND"));
    let see = |addr: SocketAddr| {
        let mut c = Client::connect(addr);
        [
            "/none", "/tcp", "/deny", "/redir", "/allow", "/rsredir", "/rsdeny", "/rsallow",
        ]
        .iter()
        .map(|p| {
            c.send(format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            let r = c.read_resp();
            format!(
                "{} {} {}",
                r.status,
                r.header("location").unwrap_or("-"),
                rule_at(r.header("x-lr").unwrap_or(""))
            )
        })
        .collect::<Vec<_>>()
    };
    let want = [
        "200 - -",
        "200 - tcp-request content accept if { path /tcp }",
        "403 - http-request deny if { path /deny }",
        // A redirect's answer goes through `http-after-response` before
        // HAProxy notes the rule: they see none (the log line names it,
        // reg-test log/last_rule).
        "302 /r -",
        "200 - http-request allow if { path /allow }",
        "303 /x200 -",
        "502 - http-response deny if { var(txn.p) -m str /rsdeny }",
        "200 - http-response allow if { var(txn.p) -m str /rsallow }",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(see(ebb.addr()), want);
    same_on_haproxy("hap-lastrule", cfg, see, &want);
}

const NORMALIZE_RULES: &str =
    "    http-request normalize-uri path-merge-slashes if { req.hdr(x-n) -m str merge }\n\
    http-request normalize-uri path-strip-dot if { req.hdr(x-n) -m str dot }\n\
    http-request normalize-uri path-strip-dotdot if { req.hdr(x-n) -m str dotdot }\n\
    http-request normalize-uri path-strip-dotdot full if { req.hdr(x-n) -m str full }\n\
    http-request normalize-uri query-sort-by-name if { req.hdr(x-n) -m str sort }\n\
    http-request normalize-uri percent-to-uppercase strict if { req.hdr(x-n) -m str upper }\n\
    http-request normalize-uri percent-decode-unreserved if { req.hdr(x-n) -m str decode }\n\
    http-request normalize-uri fragment-encode if { req.hdr(x-n) -m str frag }\n\
    http-request set-var(txn.u) url\n    http-request set-var(txn.p) path\n\
    http-request return status 200 hdr x-url \"%[var(txn.u)]\" hdr x-path \"%[var(txn.p)]\"\n";

/// `http-request normalize-uri` (with `expose-experimental-directives`):
/// each normalizer on the request's path and query, as HAProxy 2.6 (its
/// reg-test http-rules/normalize_uri has more cases, in the unit tests of
/// `rewrite::normalize`); the rules after it see the new target.
#[test]
fn normalize_uri_as_haproxy() {
    let cfg = |b: &str| {
        format!(
            "global\n    expose-experimental-directives\n{}",
            answering(b, NORMALIZE_RULES)
        )
    };
    let ebb = Ebb::start(&cfg("BIND"));
    let see = |addr: SocketAddr| {
        [
            ("merge", "//a///b//?x=//"),
            ("dot", "/a/./b/."),
            ("dotdot", "/a/../../b/"),
            ("full", "/a/../../b/"),
            ("sort", "/p?z=1&a=2&m&a=1"),
            ("upper", "/%aa/%2f?q=%c3%a9"),
            ("decode", "/%61%2F%7e?%41=%3d"),
            ("frag", "/a/b"),
            ("merge", "http://h//a//b?c"),
        ]
        .iter()
        .map(|(n, t)| {
            let req =
                format!("GET {t} HTTP/1.1\r\nHost: h\r\nx-n: {n}\r\nConnection: close\r\n\r\n");
            let head = raw_head(addr, &req);
            let f = |k: &str| raw_field(&head, k).map(|v| String::from_utf8_lossy(&v).into_owned());
            format!(
                "{} {}",
                f("x-url").unwrap_or_default(),
                f("x-path").unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
    };
    let want = [
        "/a/b/?x=// /a/b/",
        "/a/b/ /a/b/",
        "/../b/ /../b/",
        "/b/ /b/",
        "/p?a=2&a=1&m&z=1 /p",
        "/%AA/%2F?q=%C3%A9 /%AA/%2F",
        "/a%2F~?A=%3d /a%2F~",
        "/a/b /a/b",
        "http://h/a/b?c /a/b",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(see(ebb.addr()), want);
    // HAProxy 2.6 (checked with 2.6.12) parses `path-strip-dotdot`,
    // `percent-to-uppercase` and `percent-decode-unreserved` followed
    // directly by `if`/`unless` without setting the normalizer: those rules
    // then merge slashes. ebb gives them their documented meaning, so
    // these two cases are left out of the comparison.
    let skip = |v: Vec<String>| {
        v.into_iter()
            .enumerate()
            .filter(|(i, _)| *i != 2 && *i != 6)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
    };
    let hap_want = skip(want);
    same_on_haproxy("hap-normalize", cfg, |a| skip(see(a)), &hap_want);
}

/// Without `expose-experimental-directives` before it, `normalize-uri` is
/// refused at start with its line, as HAProxy does.
#[test]
fn normalize_uri_needs_experimental_directives() {
    let d = scratch("normalize-refused");
    std::fs::write(d.join("a.cfg"), answering("127.0.0.1:0", NORMALIZE_RULES)).unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", "a.cfg"], &d);
    assert_ne!(code, 0);
    assert!(
        err.contains("a.cfg:8:") && err.contains("expose-experimental-directives"),
        "{err}"
    );
    let bad = format!(
        "global\n    expose-experimental-directives\n{}",
        answering(
            "127.0.0.1:0",
            "    http-request normalize-uri path-strip-dotdot fully\n"
        )
    );
    std::fs::write(d.join("b.cfg"), bad).unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", "b.cfg"], &d);
    assert_ne!(code, 0);
    assert!(
        err.contains("b.cfg:10:") && err.contains("'fully'"),
        "{err}"
    );
}

/// An `http-request return` after rewriting rules reads the rewritten
/// request in its `hdr` values, as HAProxy's (which rewrites in place).
#[test]
fn return_reads_the_rewritten_request() {
    let rules = "    http-request set-path /new%[path]\n    http-request set-header x-a b\n\
    http-request return status 200 hdr x-p \"%[path] %[req.hdr(x-a)]\"\n";
    let cfg = |b: &str| answering(b, rules);
    let ebb = Ebb::start(&cfg("BIND"));
    let see = |addr: SocketAddr| {
        field_text(
            addr,
            "GET /old?q HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            "x-p",
        )
    };
    let want = Some("/new/old b".to_string());
    assert_eq!(see(ebb.addr()), want);
    same_on_haproxy("hap-retedit", cfg, see, &want);
}

/// The log line names the client as `http-request set-src`/`set-src-port`
/// left it (HAProxy logs the stream's address), in `option httplog`'s
/// line and in a `log-format`'s `%ci:%cp`.
#[test]
fn set_src_shows_in_the_log_line() {
    let rules = "    http-request set-src hdr(x-src)\n    http-request set-src-port int(4242)\n";
    for fmt in ["    option httplog\n", "    log-format \"cip=%ci:%cp\"\n"] {
        let cfg = format!(
            "global\n    log stdout format raw local0\n{}",
            answering("BIND", &format!("    log global\n{fmt}{rules}"))
        );
        let e = Ebb::start(&cfg);
        let head = raw_head(
            e.addr(),
            "GET / HTTP/1.1\r\nHost: t\r\nx-src: 10.9.8.7\r\nConnection: close\r\n\r\n",
        );
        assert!(head[0].starts_with(b"HTTP/1.1 200"), "{head:?}");
        let want = if fmt.contains("cip") {
            "cip=10.9.8.7:4242"
        } else {
            "10.9.8.7:4242 ["
        };
        let l = e.wait_stdout(want, Duration::from_secs(20));
        assert!(l.is_some(), "{want}: {:?}", e.stdout.lock().unwrap());
    }
}

/// An origin on a free loopback port that answers every request with the
/// head it received as its body (and closes): what a proxy sent, byte for
/// byte.
fn head_echo() -> SocketAddr {
    reply_server(
        |g| g.windows(4).any(|w| w == b"\r\n\r\n"),
        |g| {
            let head = &g[..g
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map_or(g.len(), |p| p + 4)];
            let mut out = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                head.len()
            )
            .into_bytes();
            out.extend_from_slice(head);
            out
        },
    )
}

/// The head the origin received for `req`, its field names lowered
/// (HAProxy 2.6 lowercases them, ebb keeps their case).
fn sent_head(addr: SocketAddr, req: &str) -> Vec<Vec<u8>> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    // The answer's head, then its Content-Length's worth of body (the
    // client's connection stays open).
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let mut want = None;
    loop {
        if want.is_none() {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let len = raw_field(&head_lines(&buf[..p]), "content-length")
                    .and_then(|v| String::from_utf8(v).ok()?.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                want = Some((p + 4, len));
            }
        }
        if let Some((start, len)) = want {
            if buf.len() >= start + len {
                break;
            }
        }
        match s.read_retry(&mut tmp) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    let body = want.map_or(&buf[..0], |(start, _)| &buf[start.min(buf.len())..]);
    head_lines(body)
        .into_iter()
        .filter(|l| !l.is_empty())
        .map(|mut l| {
            if let Some(p) = l.iter().position(|&c| c == b':') {
                l[..p].make_ascii_lowercase();
            }
            l
        })
        .collect()
}

const REBUILT: &str = "    http-request del-header host if { path_beg /nohost }\n\
    http-request set-path a=1 if { path_beg /rel }\n\
    http-request set-header x-p \"<%[path]>\"\n\
    http-request set-var(txn.d) path,url_dec if { path_beg /ctl }\n\
    http-request set-header x-h \"<%[var(txn.d)]>\" if { path_beg /ctl }\n\
    http-request set-var-fmt(txn.f) \"<%[var(txn.d)]>\" if { path_beg /ctl }\n\
    http-request set-header x-f \"%[var(txn.f)]\" if { path_beg /ctl }\n";

/// A frontend with `rules` in front of `origin`.
fn to_origin(bind: &str, rules: &str, origin: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n{rules}    default_backend be\nbackend be\n    server s1 {origin}\n"
    )
}

fn rebuilt_cfg(bind: &str, origin: SocketAddr) -> String {
    to_origin(bind, REBUILT, origin)
}

fn rebuilt_seen(addr: SocketAddr) -> Vec<Vec<Vec<u8>>> {
    [
        "GET /nohost HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /rel?x=1 HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /ctl%0Db%0Ac%00d%01e%7f%09t%C3%A9 HTTP/1.1\r\nHost: t\r\n\r\n",
    ]
    .iter()
    .map(|r| sent_head(addr, r))
    .collect()
}

/// Found by the differential harness (tests/diff/run.py): HAProxy edits
/// a request in place and sends it on as rules left it: without `Host`
/// after `del-header host`, with a target that is no path after `set-path
/// a=1` (its `path` fetch then finds none); the control bytes (but HTAB)
/// of a `%[...]` value in an HTTP action are written `%XX`
/// (`LOG_OPT_HTTP`), and a `set-var-fmt` value ends at its first NUL.
/// ebb answered 500 to the first two and dropped CR, LF and NUL.
#[test]
fn rewritten_heads_go_as_haproxy_sends_them() {
    let origin = head_echo();
    let e = Ebb::start(&rebuilt_cfg("BIND", origin));
    let seen = rebuilt_seen(e.addr());
    let l = |s: &[u8]| s.to_vec();
    let want = vec![
        vec![l(b"GET /nohost HTTP/1.1"), l(b"x-p: </nohost>")],
        vec![l(b"GET a=1?x=1 HTTP/1.1"), l(b"host: t"), l(b"x-p: <>")],
        vec![
            l(b"GET /ctl%0Db%0Ac%00d%01e%7f%09t%C3%A9 HTTP/1.1"),
            l(b"host: t"),
            l(b"x-p: </ctl%0Db%0Ac%00d%01e%7f%09t%C3%A9>"),
            l(b"x-h: </ctl%0Db%0Ac%00d%01e%7F\tt\xc3\xa9>"),
            l(b"x-f: </ctl%0Db%0Ac>"),
        ],
    ];
    assert_eq!(seen, want);
    same_on_haproxy(
        "hap-rebuilt",
        |b| rebuilt_cfg(b, origin),
        rebuilt_seen,
        &want,
    );
}

/// HAProxy 2.6 takes an empty word (`""`) as a missing argument of the
/// header and request-line actions, and refuses the line.
#[test]
fn empty_words_are_missing_arguments() {
    let dir = scratch("emptyargs");
    for (rule, what) in [
        ("http-request set-header x-a \"\"", "expects NAME VALUE"),
        (
            "http-response add-header x-a \"\" if TRUE",
            "expects NAME VALUE",
        ),
        (
            "http-request replace-value x-a a \"\"",
            "expects NAME REGEX FORMAT",
        ),
        (
            "http-request replace-header x-a \"\" b",
            "expects NAME REGEX FORMAT",
        ),
        ("http-request set-uri \"\"", "expects one format string"),
        ("http-request set-path \"\"", "expects one format string"),
        ("http-request set-method \"\"", "expects one format string"),
        ("http-request replace-path ^/ \"\"", "expects REGEX FORMAT"),
    ] {
        let cfg = format!(
            "defaults\n    mode http\nfrontend fe\n    bind 127.0.0.1:{}\n    {rule}\n    default_backend be\nbackend be\n    server s1 127.0.0.1:9\n",
            free_port()
        );
        assert_refused(&dir, "e.cfg", &cfg, what, true);
    }
}

fn cook_vals(addr: SocketAddr) -> Vec<Option<String>> {
    ["c=12", "c=v1", "c=\"q\"", "c=-3x", "c=\"7\"", "d=1"]
        .iter()
        .map(|c| {
            let req =
                format!("GET / HTTP/1.1\r\nHost: t\r\nCookie: {c}\r\nConnection: close\r\n\r\n");
            field_text(addr, &req, "x-v")
        })
        .collect()
}

/// Found by the differential harness: `req.cook_val` is HAProxy's
/// `strl2ic` of the value, which gives 0 without digits and counts a
/// byte below `0` (a quote) as a negative digit; ebb gave no value.
#[test]
fn cook_val_reads_as_haproxy_strl2ic() {
    let rules = "    http-request return status 200 hdr x-v \"<%[req.cook_val(c)]>\"\n";
    let e = Ebb::start(&answering("BIND", rules));
    let want: Vec<Option<String>> = ["<12>", "<0>", "<-14>", "<-3>", "<-1344>", "<>"]
        .iter()
        .map(|v| Some(v.to_string()))
        .collect();
    assert_eq!(cook_vals(e.addr()), want);
    same_on_haproxy("hap-cookval", |b| answering(b, rules), cook_vals, &want);
}

fn url_params(addr: SocketAddr) -> Vec<Option<String>> {
    ["/?x=1;a=2", "/?a=1&a=2", "/?x=1!a=3", "/?b=1;c=2&a=4"]
        .iter()
        .map(|p| {
            let req = format!("GET {p} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            field_text(addr, &req, "x-v")
        })
        .collect()
}

/// Found by the differential harness: `&` and `;` always separate URL
/// parameters (`http_is_param_delimiter`), and `url_param`'s delimiter
/// argument is the byte the parameters come after, in place of `?`
/// (`http_find_param_list`); ebb took it for the separator.
#[test]
fn url_param_splits_on_semicolons_too() {
    let rules =
        "    http-request return status 200 hdr x-v \"<%[url_param(a)]><%[url_param(a,!)]>\"\n";
    let e = Ebb::start(&answering("BIND", rules));
    let want: Vec<Option<String>> = ["<2><>", "<1><>", "<><3>", "<4><>"]
        .iter()
        .map(|v| Some(v.to_string()))
        .collect();
    assert_eq!(url_params(e.addr()), want);
    same_on_haproxy("hap-urlparam", |b| answering(b, rules), url_params, &want);
}

const HUNT_SAMPLES: &str = "    option http-buffer-request\n\
    http-request set-var(txn.i) str(1) if { str(abc),lower -m int 0 } { str(-7x),lower -m int lt -6 } { str(+5),lower -m int 5 } { str(1.1),lower -m int lt -1 } { int(4) -m int gt 5 3 }\n\
    http-request set-path /new if { path_beg /abs }\n\
    http-request return status 200 hdr x-arg \"<%[str(a(b)]|%[str(\\\"a)b\\\")]|%[str(a(),regsub(\\(,x)]>\" \
hdr x-occ \"<%[req.hdr(x,0)]|%[req.fhdr(x,0)]|%[req.fhdr(x,-1)]|%[req.hdr(x,-2)]|%[req.hdr_cnt(x)]>\" \
hdr x-int \"<%[var(txn.i)]>\" \
hdr x-prm \"<%[url_param]|%[url_param(b)]|%[req.body_param(b)]|%[req.body_param]|%[req.body_param(c)]>\" \
hdr x-line \"<%HM|%HU|%HP|%HQ|%HV>\"\n";

fn hunt_samples_seen(addr: SocketAddr) -> Vec<Option<String>> {
    let body = "q&x=1;b=2;c=3";
    let req = format!(
        "POST /p?y&b=2;c=4 HTTP/1.1\r\nHost: t\r\nx: 1, 2\r\nx: 3\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let head = raw_head(addr, &req);
    let abs = raw_head(addr, "GET http://t/abs?q=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    let text =
        |h: &[Vec<u8>], n: &str| raw_field(h, n).map(|v| String::from_utf8_lossy(&v).into_owned());
    let mut out: Vec<Option<String>> = ["x-arg", "x-occ", "x-int", "x-prm"]
        .iter()
        .map(|n| text(&head, n))
        .collect();
    out.push(text(&abs, "x-line"));
    out
}

/// Found by the differential harness (hunt3), each as HAProxy 2.6 does
/// it: a converter argument ends at an unquoted `,` or `)` (parentheses
/// do not nest; `\(` stays `\(`); an occurrence 0 is the last one; a
/// string cast to an integer reads its leading digits (none: 0) after a
/// sign; an integer pattern with `-` is a range whatever the operator
/// before it (`lt -1` is `:1`), and an operator holds for every value
/// after it; `url_param` and `req.body_param` split parameters on `&` and
/// `;`, and without a name give the value after the first `=`; `%HM`,
/// `%HU`, `%HP`, `%HQ`, `%HV` read the request line as received (an
/// absolute URI whole, before `set-path`).
#[test]
fn samples_read_as_haproxy_reads_them() {
    let e = Ebb::start(&answering("BIND", HUNT_SAMPLES));
    let want: Vec<Option<String>> = [
        "<a(b|a)b|ax>",
        "<3|3|3|2|3>",
        "<1>",
        "<2|2|2|1|3>",
        "<GET|http://t/abs?q=1|http://t/abs|?q=1|HTTP/1.1>",
    ]
    .iter()
    .map(|v| Some(v.to_string()))
    .collect();
    assert_eq!(hunt_samples_seen(e.addr()), want);
    same_on_haproxy(
        "hap-hunt-samples",
        |b| answering(b, HUNT_SAMPLES),
        hunt_samples_seen,
        &want,
    );
}

/// HAProxy 2.6 refuses these (ebb accepted them): an unquoted `(` that
/// leaves the argument list before the converter's end, a second
/// argument of `req.body_param` (`,i` came in 2.8), and an ACL on
/// `req.body_param` without `-m` (HAProxy declares it binary).
#[test]
fn sample_lines_haproxy_refuses() {
    let dir = scratch("hunt-refused");
    for (rule, what) in [
        (
            "http-request set-header x \"%[path,regsub((.)(.),\\2\\1)]\"",
            "regsub",
        ),
        (
            "http-request set-header x \"%[req.body_param(b,i)]\"",
            "req.body_param",
        ),
        (
            "acl a req.body_param(b) x\n    http-request deny if a",
            "-m",
        ),
    ] {
        let cfg = format!(
            "defaults\n    mode http\nfrontend fe\n    bind 127.0.0.1:{}\n    {rule}\n    default_backend be\nbackend be\n    server s1 127.0.0.1:9\n",
            free_port()
        );
        assert_refused(&dir, "e.cfg", &cfg, what, true);
        let err = run_ebb(&["-c", "-f", "e.cfg"], &dir).2;
        assert!(err.contains("e.cfg:5"), "{err}");
    }
}

const HUNT_REWRITES: &str =
    "    http-request replace-value host (.*) \"<\\1>\" if { path_beg /rv }\n\
    http-request set-uri foo/bar if { path_beg /su }\n\
    http-request set-uri http://u@n.example:81/x?y if { path_beg /abs }\n\
    http-request replace-uri ^/ru(.*) x\\1 if { path_beg /ru }\n";

fn hunt_rewrites_cfg(bind: &str, origin: SocketAddr) -> String {
    to_origin(bind, HUNT_REWRITES, origin)
}

fn hunt_rewrites_seen(addr: SocketAddr) -> Vec<Vec<Vec<u8>>> {
    ["/rv", "/su", "/abs", "/ru/p"]
        .iter()
        .map(|p| sent_head(addr, &format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n")))
        .collect()
}

/// Found by the differential harness (hunt3): a `Host` a rule rewrote
/// goes as the rule left it (ebb answered 500 to `<t>`, which is no
/// authority), and `set-uri`/`replace-uri` give every `Host` the new
/// target's authority, also from a target that is no absolute URI
/// (`foo/bar`: `foo`) and without the user part (HAProxy's
/// http_update_host).
#[test]
fn rewritten_uris_carry_their_host_as_haproxy() {
    let origin = head_echo();
    let e = Ebb::start(&hunt_rewrites_cfg("BIND", origin));
    let l = |s: &[u8]| s.to_vec();
    let want = vec![
        vec![l(b"GET /rv HTTP/1.1"), l(b"host: <t>")],
        vec![l(b"GET foo/bar HTTP/1.1"), l(b"host: foo")],
        // (`sent_head` lowers a line up to its first colon.)
        vec![
            l(b"get http://u@n.example:81/x?y HTTP/1.1"),
            l(b"host: n.example:81"),
        ],
        vec![l(b"GET x/p HTTP/1.1"), l(b"host: x")],
    ];
    assert_eq!(hunt_rewrites_seen(e.addr()), want);
    same_on_haproxy(
        "hap-hunt-rewrites",
        |b| hunt_rewrites_cfg(b, origin),
        hunt_rewrites_seen,
        &want,
    );
}

/// An origin whose answer holds its `Content-Length` between two fields.
fn framed_origin() -> SocketAddr {
    reply_server(
        |g| g.windows(4).any(|w| w == b"\r\n\r\n"),
        |_| {
            b"HTTP/1.1 200 OK\r\nA: 1\r\nContent-Length: 2\r\nB: 2\r\nConnection: close\r\n\r\nok"
                .to_vec()
        },
    )
}

const HUNT_RESPONSE: &str =
    "    http-request redirect prefix /pre append-slash if { path_beg /r }\n\
    http-request set-var(txn.p) path\n\
    http-response del-header a if { var(txn.p) -m beg /d }\n\
    http-response add-header x-a 1\n\
    http-response set-header b 3 if { var(txn.p) -m beg /s }\n";

fn hunt_response_cfg(bind: &str, origin: SocketAddr) -> String {
    to_origin(bind, HUNT_RESPONSE, origin)
}

fn hunt_response_seen(addr: SocketAddr) -> Vec<Vec<Vec<u8>>> {
    let lowered = |h: Vec<Vec<u8>>| -> Vec<Vec<u8>> {
        h.into_iter()
            .skip(1)
            .filter(|l| !l.is_empty())
            .map(|mut l| {
                l.make_ascii_lowercase();
                l
            })
            .filter(|l| !l.starts_with(b"date:") && !l.starts_with(b"connection:"))
            .collect()
    };
    let mut out: Vec<Vec<Vec<u8>>> = ["/p", "/d", "/s"]
        .iter()
        .map(|p| {
            lowered(raw_head(
                addr,
                &format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n"),
            ))
        })
        .collect();
    let r = raw_head(addr, "GET /r/p?n=12 HTTP/1.1\r\nHost: t\r\n\r\n");
    out.push(raw_field(&r, "location").into_iter().collect());
    out
}

/// Found by the differential harness (hunt3): the server's
/// `Content-Length` stays where the server put it while response rules
/// delete fields before it and append theirs after the last field (ebb
/// wrote it after the added ones); `redirect ... append-slash` appends
/// the slash to the location it built, query included (`/pre/r/p?n=12/`).
#[test]
fn response_rules_keep_the_framing_in_place_as_haproxy() {
    let origin = framed_origin();
    let e = Ebb::start(&hunt_response_cfg("BIND", origin));
    let l = |s: &[u8]| s.to_vec();
    let want = vec![
        vec![
            l(b"a: 1"),
            l(b"content-length: 2"),
            l(b"b: 2"),
            l(b"x-a: 1"),
        ],
        vec![l(b"content-length: 2"), l(b"b: 2"), l(b"x-a: 1")],
        vec![
            l(b"a: 1"),
            l(b"content-length: 2"),
            l(b"x-a: 1"),
            l(b"b: 3"),
        ],
        vec![l(b"/pre/r/p?n=12/")],
    ];
    assert_eq!(hunt_response_seen(e.addr()), want);
    same_on_haproxy(
        "hap-hunt-response",
        |b| hunt_response_cfg(b, origin),
        hunt_response_seen,
        &want,
    );
}

const SEEDS_2_3: &str = "    http-request replace-header host ^(T) x if { path_beg /rh }\n\
    http-request replace-path / _ if { hdr(x-t) rp }\n\
    http-request set-uri xc=3//a if { path_beg /su }\n\
    http-request replace-path / _ if { path_beg /su }\n\
    http-request set-header x-w \"%[str(a/b),word(3,/)]|%[req.ver]|%[capture.req.ver]|%b|%[str(A:80:90),host_only]\"\n\
    http-request set-header x-f found if { str(a/b),word(3,/) -m found } { be_name fe }\n";

fn seeds_seen(addr: SocketAddr) -> Vec<Vec<Vec<u8>>> {
    [
        "GET http://example.com/a HTTP/1.1\r\nHost: EXAMPLE.com\r\n\r\n",
        "GET http://example.com/a HTTP/1.1\r\nHost: Example.COM:80\r\n\r\n",
        "GET http://example.com/a HTTP/1.1\r\n\r\n",
        "GET http://example.com/rh HTTP/1.1\r\nHost: Example.COM:80\r\n\r\n",
        "GET http://example.com HTTP/1.1\r\nHost: example.com\r\nx-t: rp\r\n\r\n",
        "GET /su HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /v HTTP/1.2\r\nHost: t\r\n\r\n",
    ]
    .iter()
    .map(|r| {
        sent_head(addr, r)
            .into_iter()
            .filter(|l| !l.is_empty() && !l.starts_with(b"connection:"))
            .collect()
    })
    .collect()
}

/// Found by the differential harness, seeds 2 and 3, each as HAProxy 2.6
/// does it: an absolute target's `Host` goes as the client sent it (case
/// and a default port kept; ebb sent the target's authority), and a
/// request without one is served and sent on without one (ebb answered
/// 400); a `replace-header host` whose regex matches nothing leaves the
/// target alone (ebb wrote the Host into it); `replace-path` finds no
/// path in `http://a` nor in `xc=3//a` and changes nothing (ebb
/// replaced in the whole target); `word` of a word that is not there is
/// the empty string, found; `req.ver` is the version as received (1.2)
/// and `capture.req.ver` says HTTP/1.1 for it. Seed 4: `host_only`
/// lowers and cuts at the last `:` (`a:80`); `be_name` in a frontend's
/// ACL is the frontend's name (ebb: no value) and `%b` there is taken
/// (ebb refused it).
#[test]
fn seeds_two_and_three_as_haproxy() {
    let origin = head_echo();
    let want = seeds_want();
    assert_eq!(
        seeds_seen(Ebb::start(&to_origin("BIND", SEEDS_2_3, origin)).addr()),
        want
    );
    same_on_haproxy(
        "hap-seeds-2-3",
        |b| to_origin(b, SEEDS_2_3, origin),
        seeds_seen,
        &want,
    );
}

/// What the origin gets for each of `seeds_seen`'s requests.
fn seeds_want() -> Vec<Vec<Vec<u8>>> {
    let l = |s: &[u8]| s.to_vec();
    let w = |v: &[u8]| [&b"x-w: |"[..], v, b"|fe|a:80"].concat();
    let f = l(b"x-f: found");
    vec![
        vec![
            l(b"get http://example.com/a HTTP/1.1"),
            l(b"host: EXAMPLE.com"),
            w(b"1.1|HTTP/1.1"),
            f.clone(),
        ],
        vec![
            l(b"get http://example.com/a HTTP/1.1"),
            l(b"host: Example.COM:80"),
            w(b"1.1|HTTP/1.1"),
            f.clone(),
        ],
        vec![
            l(b"get http://example.com/a HTTP/1.1"),
            w(b"1.1|HTTP/1.1"),
            f.clone(),
        ],
        vec![
            l(b"get http://example.com/rh HTTP/1.1"),
            l(b"host: Example.COM:80"),
            w(b"1.1|HTTP/1.1"),
            f.clone(),
        ],
        vec![
            l(b"get http://example.com HTTP/1.1"),
            l(b"host: example.com"),
            l(b"x-t: rp"),
            w(b"1.1|HTTP/1.1"),
            f.clone(),
        ],
        vec![
            l(b"GET xc=3//a HTTP/1.1"),
            l(b"host: xc=3"),
            w(b"1.1|HTTP/1.1"),
            f.clone(),
        ],
        vec![l(b"GET /v HTTP/1.1"), l(b"host: t"), w(b"1.2|HTTP/1.1"), f],
    ]
}

const OWN_ANSWERS: &str = "    timeout tarpit 50ms\n\
    http-request deny if { path_beg /deny }\n\
    http-request tarpit deny_status 403 if { path_beg /tarpit }\n\
    http-request redirect location /l code 302 if { path_beg /redir }\n\
    http-request return status 200 content-type text/plain string hi hdr x-a b if { path_beg /ret }\n";

fn own_answers_seen(addr: SocketAddr) -> Vec<Vec<Vec<u8>>> {
    [
        "GET /deny HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /tarpit HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /redir HTTP/1.1\r\nHost: t\r\n\r\n",
        "POST /redir HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello",
        "GET /ret HTTP/1.1\r\nHost: t\r\n\r\n",
    ]
    .iter()
    .map(|r| {
        raw_head(addr, r)
            .into_iter()
            .skip(1)
            .map(|mut l| {
                l.make_ascii_lowercase();
                l
            })
            .filter(|l| !l.starts_with(b"date:") && !l.starts_with(b"server:"))
            .collect()
    })
    .collect()
}

/// The answers ebb makes itself have HAProxy 2.6's fields in its order
/// (after ebb's `Server` and `Date`): an error page's length first, a
/// tarpit's page without `Connection: close`, a redirect's length before
/// its `Location` and `Connection: close` when it answers a request with
/// a body (HAProxy closes then), a `return`'s length between its `hdr`
/// fields and its type. ebb wrote the length after the fields, and kept
/// the connection after such a redirect.
#[test]
fn own_answers_in_haproxys_field_order() {
    let origin = head_echo();
    let l = |s: &str| s.as_bytes().to_vec();
    let page = |n: &str| {
        vec![
            l(&format!("content-length: {n}")),
            l("cache-control: no-cache"),
            l("content-type: text/html"),
        ]
    };
    let redirect = vec![
        l("content-length: 0"),
        l("location: /l"),
        l("cache-control: no-cache"),
    ];
    let mut closed_redirect = redirect.clone();
    closed_redirect.push(l("connection: close"));
    let want = vec![
        page("93"),
        page("93"),
        redirect,
        closed_redirect,
        vec![
            l("x-a: b"),
            l("content-length: 2"),
            l("content-type: text/plain"),
        ],
    ];
    let e = Ebb::start(&to_origin("BIND", OWN_ANSWERS, origin));
    assert_eq!(own_answers_seen(e.addr()), want);
    same_on_haproxy(
        "hap-own-answers",
        |b| to_origin(b, OWN_ANSWERS, origin),
        own_answers_seen,
        &want,
    );
}

/// Proxies numbered as HAProxy 2.6 numbers them (from 1 in configuration
/// order, skipping the ids set by `id`; the CLI frontend of a global
/// `stats` line takes a number at its place), each listener of a
/// frontend from 1: `fe_id`, `be_id`, `so_id` seen through both bind
/// lines (the second has two addresses).
fn ids_config(global: &str, bind: &str, p2: u16, p3: u16) -> String {
    format!(
        "{global}defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
backend first\n    server s 127.0.0.1:1\n\
frontend fe\n    bind {bind}\n    bind 127.0.0.1:{p2},127.0.0.1:{p3}\n    default_backend be\n\
backend fixed\n    id 3\n    server s 127.0.0.1:1\n\
backend be\n    http-request set-var(txn.own) str(y) if {{ be_id 4 6 }}\n\
    http-request return status 200 content-type text/plain lf-string \"%[fe_id] %[be_id] %[so_id] %[var(txn.own)]\"\n"
    )
}

fn ids_seen(addrs: &[SocketAddr]) -> Vec<String> {
    addrs
        .iter()
        .map(|a| String::from_utf8_lossy(&get(*a, "/").body).into_owned())
        .collect()
}

#[test]
fn proxy_and_listener_ids() {
    let (p2, p3) = (free_port(), free_port());
    let at = |a: SocketAddr| [a, ([127, 0, 0, 1], p2).into(), ([127, 0, 0, 1], p3).into()];
    // No CLI frontend: `fe` is 2, `be` 4 (3 is `fixed`'s).
    let ebb = Ebb::start(&ids_config("", "BIND", p2, p3));
    assert_eq!(ids_seen(&at(ebb.addr())), ["2 4 1 y", "2 4 2 y", "2 4 3 y"]);
    drop(ebb);
    // The CLI frontend first: `first` is 2, `fe` 4 (3 is taken), `be` 6
    // (`fixed` moved HAProxy's counter to 6).
    let ebb = Ebb::start(&ids_config(
        "global\n    stats timeout 10s\n",
        "BIND",
        p2,
        p3,
    ));
    let want = ["4 6 1 y", "4 6 2 y", "4 6 3 y"];
    assert_eq!(ids_seen(&at(ebb.addr())), want);
    drop(ebb);
    // haproxy_with puts the `stats socket` line first.
    same_on_haproxy(
        "hap-ids",
        |b| ids_config("", b, p2, p3),
        |a| ids_seen(&at(a)),
        &want.map(String::from).to_vec(),
    );
}

/// An RDP connection request: the TPKT and X.224 headers, then `text`.
fn rdp(text: &str) -> Vec<u8> {
    let len = 11 + text.len();
    let mut v = vec![
        3,
        0,
        (len >> 8) as u8,
        len as u8,
        (len - 5) as u8,
        0xe0,
        0,
        0,
        0,
        0,
        0,
    ];
    v.extend_from_slice(text.as_bytes());
    v
}

fn rdp_config(bind: &str, server: SocketAddr) -> String {
    format!(
        "defaults\n    mode tcp\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n    tcp-request inspect-delay 10s\n\
    tcp-request content reject unless {{ req.rdp_cookie_cnt gt 0 }}\n\
    tcp-request content reject unless {{ rdp_cookie(mstshash) -m str alice }} {{ req.rdp_cookie -i ALICE }}\n\
    default_backend be\n\
backend be\n    server s {server}\n"
    )
}

fn rdp_cases(addr: SocketAddr) -> Vec<Vec<u8>> {
    let alice = rdp("Cookie: mstshash=alice\r\n");
    let (a, b) = alice.split_at(20);
    vec![
        exchange(addr, &[&alice]),
        // Cut in the name, then in the value: each rule waits.
        exchange(addr, &[a, b]),
        exchange(addr, &[&alice[..27], &alice[27..]]),
        // The name compared in any case, `Cookie:` too.
        exchange(addr, &[&rdp("cookie:   MSTSHASH=alice\r\n")]),
        // Another value, another name, no CRLF, no cookie: refused.
        exchange(addr, &[&rdp("Cookie: mstshash=bob\r\n")]),
        exchange(addr, &[&rdp("Cookie: msts=alice\r\n")]),
        exchange(addr, &[&rdp("Cookie: mstshash=alice\rx")]),
        exchange(addr, &[&rdp("Nope: mstshash=alice\r\n")]),
    ]
}

/// `req.rdp_cookie`, `rdp_cookie_cnt` on a tcp proxy's first bytes, as
/// HAProxy's `fetch_rdp_cookie_name` reads them.
#[test]
fn rdp_cookie_fetches() {
    let srv = reply_server(
        |got| got.ends_with(b"\r\n") || got.len() > 40,
        |_| b"ok".to_vec(),
    );
    let ok = b"ok".to_vec();
    let want: Vec<Vec<u8>> = vec![
        ok.clone(),
        ok.clone(),
        ok.clone(),
        ok,
        vec![],
        vec![],
        vec![],
        vec![],
    ];
    ebb_and_haproxy("hap-rdp", |b| rdp_config(b, srv), rdp_cases, &want);
}

/// A server that answers each request with the `x-uid` field it got.
fn uid_echo() -> SocketAddr {
    common::origin::serve_each(|mut s| {
        while let Some(head) = common::origin::read_head(&mut s) {
            let text = String::from_utf8_lossy(&head).into_owned();
            let uid = text
                .lines()
                .find_map(|l| l.strip_prefix("x-uid: "))
                .unwrap_or("-")
                .to_string();
            let r = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{uid}",
                uid.len()
            );
            if s.write_all(r.as_bytes()).is_err() {
                return;
            }
        }
    })
}

fn uid_config(bind: &str, server: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n    unique-id-format id-%[req.hdr(x-a)]\n    unique-id-header x-uid\n\
    http-request set-var(txn.early) unique-id if {{ path /early }}\n\
    http-request set-header x-a changed\n\
    http-response set-header x-res \"%[unique-id] %[var(txn.early)]\"\n\
    default_backend be\n\
backend be\n    server s {server}\n"
    )
}

fn uid_seen(addr: SocketAddr) -> Vec<(String, Option<String>)> {
    ["/early", "/late"]
        .iter()
        .map(|p| {
            let mut c = Client::connect(addr);
            c.send(
                format!("GET {p} HTTP/1.1\r\nHost: t\r\nx-a: orig\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            );
            let r = c.read_resp();
            (
                String::from_utf8_lossy(&r.body).into_owned(),
                r.header("x-res").map(String::from),
            )
        })
        .collect()
}

/// The `unique-id` fetch in request rules makes the exchange's id from
/// `unique-id-format` on first use, and that id stays (the header sent
/// to the server, response rules): HAProxy's `stream_generate_unique_id`.
#[test]
fn unique_id_made_on_first_use() {
    let srv = uid_echo();
    let want = vec![
        ("id-orig".to_string(), Some("id-orig id-orig".to_string())),
        ("id-changed".to_string(), Some("id-changed".to_string())),
    ];
    ebb_and_haproxy("hap-uid", |b| uid_config(b, srv), uid_seen, &want);
}

fn map_acl_config(bind: &str, dir: &Path) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n\
    http-request set-var(txn.m) str(map) if {{ path -M -f {d}/keys.map }}\n\
    http-request set-var(txn.v) path,map({d}/keys.map)\n\
    http-request return status 200 content-type text/plain lf-string \"%[var(txn.m)] %[var(txn.v)]\"\n",
        d = dir.display()
    )
}

fn map_acl_seen(addr: SocketAddr) -> Vec<String> {
    ["/a", "/b", "/c"]
        .iter()
        .map(|p| String::from_utf8_lossy(&get(addr, p).body).into_owned())
        .collect()
}

/// `-M`: an ACL reads its `-f` file as a map, matching its keys (the
/// same file a map converter reads); a one-column use of a map's file is
/// refused, as HAProxy's `pattern_read_from_file` does.
#[test]
fn acl_on_map_keys() {
    let dir = scratch("acl-map");
    std::fs::write(dir.join("keys.map"), "/a one\n/b  two words\n# c\n").unwrap();
    let ebb = Ebb::start(&map_acl_config("BIND", &dir));
    let want: Vec<String> = ["map one", "map two words", " "].map(String::from).to_vec();
    assert_eq!(map_acl_seen(ebb.addr()), want);
    same_on_haproxy(
        "hap-acl-map",
        |b| map_acl_config(b, &dir),
        map_acl_seen,
        &want,
    );
    let refused = |acl: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
frontend fe\n    bind 127.0.0.1:0\n    http-request set-var(txn.v) path,map({d}/keys.map)\n\
    http-request deny if {{ {acl} }}\n",
            d = dir.display()
        )
    };
    assert_refused(
        &dir,
        "one.cfg",
        &refused(&format!("path -f {}/keys.map", dir.display())),
        "is already used as two column file and cannot be used by as one column file",
        true,
    );
    // `-M` after `-f` comes too late for that file.
    assert_refused(
        &dir,
        "late.cfg",
        &refused(&format!("path -f {}/keys.map -M", dir.display())),
        "already used as two column file",
        true,
    );
}

fn h2_front(bind: &str, origin: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n    http-after-response set-header x-ver %[res.ver]\n\
    use_backend deny if {{ path /deny }}\n    default_backend be\n\
backend deny\n    http-response deny if {{ status 200 }}\n    server s {origin} proto h2\n\
backend be\n    server s {origin} proto h2\n"
    )
}

fn h2_versions(addr: SocketAddr) -> Vec<(u16, Option<String>)> {
    ["/", "/deny"]
        .iter()
        .map(|p| {
            let r = get(addr, p);
            (r.status, r.header("x-ver").map(String::from))
        })
        .collect()
}

/// `res.ver` is 2.0 for an HTTP/2 server's answer, and 1.1 once ebb's own
/// answer replaced it (`http-response deny`), as HAProxy's.
#[test]
fn res_ver_of_a_replaced_h2_answer() {
    let origin = Ebb::start(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend o\n    bind BIND proto h2\n    http-request return status 200 content-type text/plain string ok\n",
    );
    let want = vec![
        (200, Some("2.0".to_string())),
        (502, Some("1.1".to_string())),
    ];
    ebb_and_haproxy(
        "hap-h2ver",
        |b| h2_front(b, origin.addr()),
        h2_versions,
        &want,
    );
}

fn targets_config(bind: &str, server: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n    http-request set-header x-0 z\n\
    http-request set-header x-sub y if {{ path_sub example.com }}\n\
    http-request set-header x-cap \"%[capture.req.uri,concat(-,txn.none,-)]\"\n\
    http-request replace-uri /+ x/ if {{ hdr(x-case) 3 }}\n\
    http-request set-header x-reg y if {{ hdr(x-case) 3 }} {{ path_reg .* }}\n\
    http-request set-uri http://u@n.example:81/x?y if {{ hdr(x-case) 4 }}\n\
    http-request replace-value host [0-9]+ v if {{ hdr(x-case) 4 }}\n\
    default_backend be\n\
backend be\n    server s {server}\n"
    )
}

/// What the server got: the request line, then each field as
/// `name: value` with the name in lower case (HAProxy lowers them).
fn targets_seen(addr: SocketAddr) -> Vec<Vec<String>> {
    [
        "GET http://example.com/a? HTTP/1.1\r\nHost: example.com\r\nx-case: 1\r\n\r\n",
        "GET http://example.com HTTP/1.1\r\nHost: example.com\r\nx-case: 2\r\n\r\n",
        "GET /A/B HTTP/1.1\r\nHost: example.com\r\nx-case: 3\r\n\r\n",
        "GET /p HTTP/1.1\r\nHost: h\r\nx-case: 4\r\n\r\n",
    ]
    .iter()
    .map(|req| {
        let mut c = Client::connect(addr);
        c.send(req.as_bytes());
        let body = String::from_utf8_lossy(&c.read_resp().body).into_owned();
        body.split("\r\n")
            .filter(|l| !l.is_empty())
            .enumerate()
            .map(|(i, l)| match l.split_once(": ") {
                Some((n, v)) if i > 0 => format!("{}: {v}", n.to_ascii_lowercase()),
                _ => l.to_string(),
            })
            .collect()
    })
    .collect()
}

/// tests/diff seeds 6 to 8, side by side: a classic `path` ACL reads the
/// path of an absolute target once a rule edited the head (not its
/// authority) and matches nothing when there is no path;
/// `capture.req.uri` gives nothing for a target without a path; a `Host`
/// a rule rewrote becomes the authority of the absolute target a
/// `set-uri` made, its user part kept.
#[test]
fn targets_after_rewrites() {
    let srv = head_echo();
    let lines = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let want = vec![
        lines(&[
            "GET http://example.com/a? HTTP/1.1",
            "host: example.com",
            "x-case: 1",
            "x-0: z",
            "x-cap: /a?--",
        ]),
        lines(&[
            "GET http://example.com HTTP/1.1",
            "host: example.com",
            "x-case: 2",
            "x-0: z",
            "x-cap: ",
        ]),
        lines(&[
            "GET x/ HTTP/1.1",
            "host: x",
            "x-case: 3",
            "x-0: z",
            "x-cap: /A/B--",
        ]),
        lines(&[
            "GET http://u@v/x?y HTTP/1.1",
            "host: v",
            "x-case: 4",
            "x-0: z",
            "x-cap: /p--",
        ]),
    ];
    ebb_and_haproxy(
        "hap-targets",
        |b| targets_config(b, srv),
        targets_seen,
        &want,
    );
}

/// A server whose every answer is 300 bytes of text/plain.
fn text_origin() -> SocketAddr {
    common::origin::serve_each(|mut s| {
        while common::origin::read_head(&mut s).is_some() {
            let r = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 300\r\n\r\n{}",
                "x".repeat(300)
            );
            if s.write_all(r.as_bytes()).is_err() {
                return;
            }
        }
    })
}

fn comp_config(bind: &str, server: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n    compression algo raw-deflate gzip\n    compression type text/plain\n\
    http-response set-header x-comp \"%[res.comp] <%[res.comp_algo]>\"\n\
    http-after-response set-header x-after \"%[res.comp] <%[res.comp_algo]>\"\n\
    default_backend be\n\
backend be\n    server s {server}\n"
    )
}

fn comp_seen(addr: SocketAddr) -> Vec<(Option<String>, Option<String>)> {
    ["gzip", "deflate", "identity;q=1, *;q=0"]
        .iter()
        .map(|ae| {
            let mut c = Client::connect(addr);
            c.send(format!("GET / HTTP/1.1\r\nHost: t\r\nAccept-Encoding: {ae}\r\nConnection: close\r\n\r\n").as_bytes());
            let r = c.read_resp();
            (r.header("x-comp").map(String::from), r.header("x-after").map(String::from))
        })
        .collect()
}

/// `res.comp` and `res.comp_algo` in response rules: the compression is
/// decided before they run, as HAProxy's filter decides it.
#[test]
fn compression_fetches() {
    let srv = text_origin();
    let pair = |v: &str| (Some(v.to_string()), Some(v.to_string()));
    let want = vec![pair("1 <gzip>"), pair("1 <raw-deflate>"), pair("0 <>")];
    ebb_and_haproxy("hap-comp", |b| comp_config(b, srv), comp_seen, &want);
}

/// base64url without padding (a JWT's parts).
fn b64url(d: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut o = String::new();
    for ch in d.chunks(3) {
        let n = ch
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=ch.len() {
            o.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
        }
    }
    o
}

const CRYPTO_RULES: &str =
    "    http-request set-var(txn.key) str(my_super_secret_long_key),base64\n\
    http-request set-var(txn.h) req.hdr(raw),sha1\n\
    http-after-response set-header x-md5 \"%[str(abc),digest(md5),hex]\"\n\
    http-after-response set-header x-s256 \"%[str(abc),digest(SHA256),hex]\"\n\
    http-after-response set-header x-rsa1 \"%[str(abc),digest(rsa-sha1),hex]\"\n\
    http-after-response set-header x-oid224 \"%[str(abc),digest(2.16.840.1.101.3.4.2.4),hex]\"\n\
    http-after-response set-header x-s512-256 \"%[str(abc),digest(sha512-256),hex]\"\n\
    http-after-response set-header x-hm5 \"%[str(abc),hmac(md5,a2V5),hex]\"\n\
    http-after-response set-header x-hm384 \"%[str(abc),hmac(sha384,txn.key),hex]\"\n\
    http-after-response set-header x-eq \"%[str(1),sha1,secure_memcmp(txn.h)]\"\n\
    http-after-response set-header x-ne \"%[str(2),sha1,secure_memcmp(txn.h)]\"\n\
    http-after-response set-header x-len \"%[str(1),secure_memcmp(txn.h)]\"\n\
    http-after-response set-header x-unset \"<%[str(1),secure_memcmp(txn.none)]>\"\n";

fn crypto_seen(addr: SocketAddr) -> Vec<Option<String>> {
    let head = raw_head(
        addr,
        "GET / HTTP/1.1\r\nHost: t\r\nRaw: 1\r\nConnection: close\r\n\r\n",
    );
    [
        "x-md5",
        "x-s256",
        "x-rsa1",
        "x-oid224",
        "x-s512-256",
        "x-hm5",
        "x-hm384",
        "x-eq",
        "x-ne",
        "x-len",
        "x-unset",
    ]
    .iter()
    .map(|n| raw_field(&head, n).map(|v| String::from_utf8_lossy(&v).into_owned()))
    .collect()
}

/// `digest` under OpenSSL's names, `hmac` with a base64 key and with a
/// variable holding one, `secure_memcmp` (HAProxy's reg-tests
/// converter/digest, converter/hmac, converter/secure_memcmp), each
/// beside haproxy.
#[test]
fn crypto_converters() {
    let want: Vec<Option<String>> = [
        "900150983CD24FB0D6963F7D28E17F72",
        "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
        "A9993E364706816ABA3E25717850C26C9CD0D89D",
        "23097D223405D8228642A477BDA255B32AADBCE4BDA0B3F7E36C9DA7",
        "53048E2681941EF99B2E29B76B4C7DABE4C2D0C634FC6D46E0E2F13107E7AF23",
        "D2FE98063F876B03193AFB49B4979591",
        "3FF535D89E50F59E716F1DB795B7BEC3AC2A5F6F8356810DBA80373C4CC322A2E9829A70684095ECB25032A32763F63B",
        "1",
        "0",
        "0",
        "<>",
    ]
    .map(|v| Some(v.to_string()))
    .to_vec();
    let cfg = |b: &str| answering(b, CRYPTO_RULES);
    ebb_and_haproxy("hap-crypto", cfg, crypto_seen, &want);
}

/// Converter arguments refused at start, by haproxy too (`hmac`'s key
/// must be base64 or a variable; PS algorithms are not managed in 2.6),
/// and by ebb alone: a digest OpenSSL knows but ebb does not compute, and
/// an unreadable key file for a literal RS or ES algorithm (HAProxy
/// accepts it and answers -5 at run time).
#[test]
fn crypto_converters_refused_at_start() {
    let dir = scratch("crypto-refused");
    for (conv, what, hap) in [
        ("digest(bogus)", "valid OpenSSL message digest name", true),
        (
            "digest(sha3-256)",
            "valid OpenSSL message digest name",
            false,
        ),
        ("hmac(sha1,abc)", "base64", true),
        ("hmac(nope,a2V5)", "valid OpenSSL message digest name", true),
        (
            "secure_memcmp(nope)",
            "failed to register variable name",
            true,
        ),
        ("jwt_verify(XS256,k)", "unknown JWT algorithm", true),
        ("jwt_verify(PS256,k)", "RSASSA-PSS", true),
        (
            "jwt_verify(RS256,/nonexistent.pem)",
            "/nonexistent.pem",
            false,
        ),
        (
            "jwt_payload_query('$.a',str)",
            "only supports \"int\"",
            true,
        ),
    ] {
        let cfg = answering(
            "127.0.0.1:1",
            &format!("    http-request set-var(txn.x) str(a),{conv}\n"),
        );
        assert_refused(&dir, "e.cfg", &cfg, what, hap);
        let (_, _, err) = run_ebb(&["-c", "-f", "e.cfg"], &dir);
        assert!(err.contains("e.cfg:"), "{conv}: file:line in {err}");
    }
}

/// A P-256 key pair: its public key's PEM (SubjectPublicKeyInfo) and the
/// ring signer.
fn p256_signer() -> (String, ring::signature::EcdsaKeyPair) {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let signer = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &kp.serialize_der(),
        &ring::rand::SystemRandom::new(),
    )
    .unwrap();
    (kp.public_key_pem(), signer)
}

/// A JWT with `header` and `claims`, signed by `sign` over its first two
/// parts.
fn jwt(header: &str, claims: &str, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
    let signed = format!(
        "{}.{}",
        b64url(header.as_bytes()),
        b64url(claims.as_bytes())
    );
    let sig = sign(signed.as_bytes());
    format!("{signed}.{}", b64url(&sig))
}

fn jwt_rules(pem: &Path) -> String {
    format!(
        "    http-request set-var(txn.bearer) http_auth_bearer\n\
    http-request set-var(txn.alg) var(txn.bearer),jwt_header_query('$.alg')\n\
    http-request set-var(txn.name) var(txn.bearer),jwt_payload_query('$.name')\n\
    http-request set-var(txn.iat) var(txn.bearer),jwt_payload_query('$.iat',int),add(1)\n\
    http-request set-var(txn.custom) http_auth_bearer(x-tok)\n\
    http-after-response set-header x-alg \"%[var(txn.alg)]\"\n\
    http-after-response set-header x-name \"%[var(txn.name)]\"\n\
    http-after-response set-header x-iat \"%[var(txn.iat)]\"\n\
    http-after-response set-header x-hdr \"<%[var(txn.bearer),jwt_header_query,length]>\"\n\
    http-after-response set-header x-hs \"%[var(txn.bearer),jwt_verify(txn.alg,\\\"hmac key hs256\\\")]\"\n\
    http-after-response set-header x-es \"%[var(txn.bearer),jwt_verify(ES256,\\\"{}\\\")]\"\n\
    http-after-response set-header x-custom \"<%[var(txn.custom)]>\"\n",
        pem.display()
    )
}

fn jwt_seen(addr: SocketAddr, token: &str) -> Vec<Option<String>> {
    let head = raw_head(
        addr,
        &format!(
            "GET / HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer  {token}\r\nX-Tok: bearer x\r\nConnection: close\r\n\r\n"
        ),
    );
    [
        "x-alg", "x-name", "x-iat", "x-hdr", "x-hs", "x-es", "x-custom",
    ]
    .iter()
    .map(|n| raw_field(&head, n).map(|v| String::from_utf8_lossy(&v).into_owned()))
    .collect()
}

/// `http_auth_bearer`, `jwt_header_query`, `jwt_payload_query` and
/// `jwt_verify` on HS256 and ES256 tokens (the ES signature as RFC 7518
/// has it, R and S side by side), good and bad, beside haproxy; a query
/// without a path gives no sample (HAProxy 2.6 decodes the part, then
/// answers nothing).
#[test]
fn jwt_converters() {
    let dir = scratch("jwt");
    let pem = dir.join("es256.pem");
    let (pub_pem, signer) = p256_signer();
    std::fs::write(&pem, pub_pem).unwrap();
    let claims = r#"{"sub":"1","name":"John Doe","iat":1516239022}"#;
    let hs = jwt(r#"{"alg":"HS256","typ":"JWT"}"#, claims, |m| {
        ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"hmac key hs256"),
            m,
        )
        .as_ref()
        .to_vec()
    });
    let es = jwt(r#"{"alg":"ES256"}"#, claims, |m| {
        signer
            .sign(&ring::rand::SystemRandom::new(), m)
            .unwrap()
            .as_ref()
            .to_vec()
    });
    // The HS256 token's signature with its last character changed.
    let mut bad = hs.clone();
    let last = if bad.ends_with('A') { "B" } else { "A" };
    bad.replace_range(bad.len() - 1.., last);
    // Per token: alg, name, iat + 1, header query without a path, the
    // HS check (an ES token's names an unloaded key: -5), the ES check.
    // The third has a bad signature; the fourth two parts only.
    let want: Vec<Vec<Option<String>>> = [
        ["HS256", "1", "0"],
        ["ES256", "-5", "1"],
        ["HS256", "0", "0"],
        ["HS256", "-3", "-3"],
    ]
    .iter()
    .map(|[alg, hs, es]| {
        [*alg, "John Doe", "1516239023", "<>", hs, es, "<x>"]
            .map(|v| Some(v.to_string()))
            .to_vec()
    })
    .collect();
    let two = hs.rsplit_once('.').unwrap().0.to_string();
    let tokens = [hs, es, bad, two];
    let run = |addr: SocketAddr| -> Vec<Vec<Option<String>>> {
        tokens.iter().map(|t| jwt_seen(addr, t)).collect()
    };
    ebb_and_haproxy("hap-jwt", |b| answering(b, &jwt_rules(&pem)), run, &want);
}

/// A TLS record with a ClientHello offering the ALPN protocols `names`.
fn alpn_hello(names: &[&str]) -> Vec<u8> {
    let list: Vec<u8> = names
        .iter()
        .flat_map(|n| std::iter::once(n.len() as u8).chain(n.bytes()))
        .collect();
    let be16 = |n: usize| (n as u16).to_be_bytes();
    let mut body = [&[3u8, 3][..], &[9; 32], &[0, 0, 2, 0x13, 0x01, 1, 0]].concat();
    let ext = [
        &[0u8, 16][..],
        &be16(list.len() + 2),
        &be16(list.len()),
        &list,
    ]
    .concat();
    body.extend_from_slice(&be16(ext.len()));
    body.extend_from_slice(&ext);
    let hs = [&[1u8, 0][..], &be16(body.len()), &body].concat();
    [&[0x16u8, 3, 1][..], &be16(hs.len()), &hs].concat()
}

/// Sends `parts` on a new connection and reads to the end: what the
/// server behind answered ("OK"), or nothing when a rule rejected it.
fn alpn_seen(addr: SocketAddr, parts: &[&[u8]]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for p in parts {
        s.write_all(p).unwrap();
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// `req.ssl_alpn` in a tcp-request content ACL (HAProxy's reg-test
/// checks/tcp-check-ssl): any of the ClientHello's protocols matches,
/// a hello cut in two is waited for, beside haproxy.
#[test]
fn req_ssl_alpn_matches_each_protocol() {
    let origin = common::origin::serve_each(|mut s| {
        let _ = s.write_all(b"OK");
    });
    let cfg = move |bind: &str| {
        format!(
            "defaults\n    mode tcp\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n    tcp-request inspect-delay 10s\n\
    tcp-request content accept if {{ req.ssl_alpn http/1.1 }}\n    tcp-request content reject\n\
    default_backend b\nbackend b\n    server s {origin}\n"
        )
    };
    let both = alpn_hello(&["h2", "http/1.1"]);
    let h2 = alpn_hello(&["h2"]);
    let run = |addr: SocketAddr| -> Vec<String> {
        vec![
            alpn_seen(addr, &[&both]),
            alpn_seen(addr, &[&h2]),
            alpn_seen(addr, &[&both[..20], &both[20..]]),
            alpn_seen(addr, &[b"GET / HTTP/1.0\r\n\r\n"]),
        ]
    };
    let want: Vec<String> = ["OK", "", "OK", ""].iter().map(|s| s.to_string()).collect();
    ebb_and_haproxy("hap-alpn", cfg, run, &want);
}

/// Answers of a server, by path, each sent whole then the connection
/// closed: the framing fields in several forms.
const FRAMED: &[(&str, &str)] = &[
    ("/cl", "HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 5\r\nX-B: 2\r\n\r\nhello"),
    ("/te", "HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\nX-B: 2\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
    ("/both", "HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nX-B: 2\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
    ("/none", "HTTP/1.1 200 OK\r\nX-A: 1\r\nX-B: 2\r\nConnection: close\r\n\r\nhello"),
    ("/twice", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\ncontent-length: 5\r\n\r\nhello"),
    ("/304", "HTTP/1.1 304 Not Modified\r\nX-A: 1\r\nContent-Length: 5\r\n\r\n"),
];

/// Response rules see the server's framing fields as HAProxy 2.6's do:
/// one `Content-Length` (duplicates merged), `Transfer-Encoding` instead
/// when the body is chunked, in the counts too; the client still gets
/// one framing field of ebb's writing.
#[test]
fn response_rules_see_the_framing_fields() {
    let srv = common::origin::serve_each(|mut s| {
        let Some(head) = common::origin::read_head(&mut s) else {
            return;
        };
        let text = String::from_utf8_lossy(&head).into_owned();
        let path = text.split(' ').nth(1).unwrap_or("");
        let answer = FRAMED.iter().find(|(p, _)| *p == path).map_or("", |a| a.1);
        let _ = s.write_all(answer.as_bytes());
    });
    let cfg = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind}\n\
             \x20   http-response set-header x-cl \"%[res.hdr(content-length)]\"\n\
             \x20   http-response set-header x-te \"%[res.hdr(transfer-encoding)]\"\n\
             \x20   http-response set-header x-cnt \"%[res.hdr_cnt]\"\n\
             \x20   http-response set-header x-clcnt \"%[res.hdr_cnt(content-length)]\"\n\
             \x20   http-response set-header x-fcl \"%[res.fhdr(content-length)]\"\n\
             \x20   http-response set-header x-len-ok 1 if {{ res.hdr_val(content-length) eq 5 }}\n\
             \x20   default_backend be\n\
             backend be\n    server s {srv}\n"
        )
    };
    let run = |addr: SocketAddr| -> Vec<Vec<Option<String>>> {
        FRAMED
            .iter()
            .map(|(p, _)| {
                let req = format!("GET {p} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
                let head = raw_head(addr, &req);
                let framing = head
                    .iter()
                    .filter(|l| {
                        let l = String::from_utf8_lossy(l).to_ascii_lowercase();
                        l.starts_with("content-length:") || l.starts_with("transfer-encoding:")
                    })
                    .count();
                let mut got: Vec<Option<String>> =
                    ["x-cl", "x-te", "x-cnt", "x-clcnt", "x-fcl", "x-len-ok"]
                        .iter()
                        .map(|n| raw_field(&head, n).map(|v| String::from_utf8_lossy(&v).into()))
                        .collect();
                got.push(Some(framing.to_string()));
                got
            })
            .collect()
    };
    let s = |v: &str| Some(v.to_string());
    let want = vec![
        vec![s("5"), s(""), s("5"), s("1"), s("5"), s("1"), s("1")],
        vec![s(""), s("chunked"), s("5"), s("0"), s(""), None, s("1")],
        vec![s(""), s("chunked"), s("5"), s("0"), s(""), None, s("1")],
        vec![s(""), s(""), s("4"), s("0"), s(""), None, s("0")],
        vec![s("5"), s(""), s("4"), s("1"), s("5"), s("1"), s("1")],
        vec![s("5"), s(""), s("4"), s("1"), s("5"), s("1"), s("1")],
    ];
    ebb_and_haproxy("hap-framing", cfg, run, &want);
}

/// `http-after-response` rules on ebb's own answers (a `return`, a
/// deny's error page, a 503 without server) see their `Content-Length`,
/// as HAProxy's do on its own.
#[test]
fn after_response_rules_see_the_length_of_own_answers() {
    let cfg = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind}\n\
             \x20   http-request return status 200 content-type text/plain string hello if {{ path /r }}\n\
             \x20   http-request deny if {{ path /d }}\n\
             \x20   http-after-response set-header x-cl \"%[res.hdr(content-length)]\"\n\
             \x20   http-after-response set-header x-clcnt \"%[res.hdr_cnt(content-length)]\"\n\
             \x20   default_backend be\n\
             backend be\n"
        )
    };
    let run = |addr: SocketAddr| -> Vec<(Option<String>, Option<String>)> {
        ["/r", "/d", "/x"]
            .iter()
            .map(|p| {
                let req = format!("GET {p} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
                let head = raw_head(addr, &req);
                let f = |n| raw_field(&head, n).map(|v| String::from_utf8_lossy(&v).into_owned());
                (f("x-cl"), f("x-clcnt"))
            })
            .collect()
    };
    let s = |v: &str| Some(v.to_string());
    let want = vec![(s("5"), s("1")), (s("93"), s("1")), (s("107"), s("1"))];
    ebb_and_haproxy("hap-ownlen", cfg, run, &want);
}
