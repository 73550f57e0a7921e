//! The HTTP/2 stream layer seen from the stream: what an HTTP/2 request
//! looks like to rules, logs and servers (HAProxy's internal absolute
//! URI, scheme-based normalization), side by side with HAProxy 2.6 where
//! it is installed. Real clients: nghttp, curl, raw sockets.

mod common;

use common::origin::{Mode, Origin};
use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// The request lines and `host` values an origin got, in order.
fn origin_lines(o: &Origin) -> Vec<String> {
    o.heads
        .lock()
        .unwrap()
        .iter()
        .map(|h| {
            let line = h.lines().next().unwrap_or("").to_string();
            let host = h
                .lines()
                .find_map(|l| {
                    let (n, v) = l.split_once(':')?;
                    n.eq_ignore_ascii_case("host").then(|| v.trim().to_string())
                })
                .unwrap_or_default();
            format!("{line} host={host}")
        })
        .collect()
}

/// The `x-*` fields of an nghttp -v run (`recv (stream_id=N) name: value`).
fn nghttp_fields(args: &[&str]) -> Vec<String> {
    let o = Command::new("nghttp")
        .args(["-v", "-t", "60"])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once(") x-").map(|(_, f)| format!("x-{f}")))
        .collect()
}

/// The `x-*` fields of an HTTP/1.1 answer.
fn h1_fields(a: SocketAddr, req: &str) -> Vec<String> {
    let mut s = TcpStream::connect(a).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("x-"))
        .map(|l| l.to_ascii_lowercase())
        .collect()
}

const NORMALIZE_FE: &str = "    http-request return status 200 hdr x-url \"%[url]\" hdr x-host \"%[req.hdr(host)]\" hdr x-path \"%[path]\" if { path /r }\n    default_backend b\n";

/// Every case of the normalization test on one proxy: its `proto h2` bind
/// `h2` and HTTP/1.1 bind `h1`.
fn normalize_cases(h2: SocketAddr, h1: SocketAddr) -> Vec<Vec<String>> {
    let u = |p: &str| format!("http://{h2}{p}");
    let mut out = vec![
        nghttp_fields(&["-H", ":authority: hostname:80", &u("/r")]),
        nghttp_fields(&["-H", ":authority: hostname:8080", &u("/r")]),
        nghttp_fields(&[
            "-H",
            ":scheme: https",
            "-H",
            ":authority: hostname:443",
            &u("/r"),
        ]),
        nghttp_fields(&[
            "-H",
            ":scheme: https",
            "-H",
            ":authority: hostname:80",
            &u("/r"),
        ]),
    ];
    // curl makes `:authority` of its Host field.
    let (ok, head, err) = curl(&[
        "--http2-prior-knowledge",
        "-H",
        "Host: Hostname:80",
        "-D",
        "-",
        "-o",
        "/dev/null",
        &u("/r?q=1"),
    ]);
    assert!(ok, "curl: {err}");
    out.push(
        head.lines()
            .filter(|l| l.starts_with("x-"))
            .map(str::to_string)
            .collect(),
    );
    // HTTP/1.1 absolute form gets the same normalization.
    out.push(h1_fields(
        h1,
        "GET http://hostname:80/r HTTP/1.1\r\nHost: hostname:80\r\nConnection: close\r\n\r\n",
    ));
    out.push(h1_fields(
        h1,
        "GET HTTPS://hostname:443/r HTTP/1.1\r\nHost: hostname:443\r\nConnection: close\r\n\r\n",
    ));
    out.push(h1_fields(
        h1,
        "GET http://hostname:443/r HTTP/1.1\r\nHost: hostname:443\r\nConnection: close\r\n\r\n",
    ));
    // To the server: an HTTP/2 request goes in origin form, with the
    // normalized host.
    nghttp_fields(&["-H", ":authority: hostname:80", &u("/x?y")]);
    out
}

/// HAProxy's reg-test http-messaging/scheme_based_normalize and more: an
/// HTTP/2 request is seen as `scheme://authority/path` by `url` (and `%r`),
/// a default port (80 for http, 443 for https) leaves the authority and
/// `host`, as for an HTTP/1.1 absolute-form request, and the server gets
/// the origin form. Before, `url` was `/r`, the port stayed and HTTP/1.1
/// absolute-form requests kept theirs.
#[test]
fn h2_requests_carry_the_absolute_uri_normalized_as_haproxy() {
    if !have("nghttp") || !have("curl") {
        println!("nghttp or curl missing: skipped");
        return;
    }
    let o = Origin::start("o", Mode::Ok);
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
         frontend f\n    bind BIND proto h2\n    bind BIND\n{NORMALIZE_FE}\
         backend b\n    server s {}\n",
        o.addr
    );
    let e = Ebb::start(&cfg);
    let got = normalize_cases(e.addrs[0], e.addrs[1]);
    let want: Vec<Vec<String>> = [
        ["http://hostname/r", "hostname", "/r"],
        ["http://hostname:8080/r", "hostname:8080", "/r"],
        ["https://hostname/r", "hostname", "/r"],
        ["https://hostname:80/r", "hostname:80", "/r"],
        ["http://Hostname/r?q=1", "Hostname", "/r"],
        ["http://hostname/r", "hostname", "/r"],
        ["https://hostname/r", "hostname", "/r"],
        ["http://hostname:443/r", "hostname:443", "/r"],
    ]
    .iter()
    .map(|[u, h, p]| {
        vec![
            format!("x-url: {u}"),
            format!("x-host: {h}"),
            format!("x-path: {p}"),
        ]
    })
    .collect();
    assert_eq!(got, want);
    wait_until("the origin got the request", || {
        !origin_lines(&o).is_empty()
    });
    assert_eq!(origin_lines(&o), ["GET /x?y HTTP/1.1 host=hostname"]);

    if !have("haproxy") {
        return;
    }
    let o2 = Origin::start("o", Mode::Ok);
    let (p2, p1) = (free_port(), free_port());
    let _h = haproxy_with(
        "normalize",
        &format!(
            "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             frontend f\n    bind 127.0.0.1:{p2} proto h2\n    bind 127.0.0.1:{p1}\n{NORMALIZE_FE}\
             backend b\n    server s {}\n",
            o2.addr
        ),
    );
    let a = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    wait_until("haproxy listens", || TcpStream::connect(a(p1)).is_ok());
    let theirs = normalize_cases(a(p2), a(p1));
    let fold = |v: Vec<Vec<String>>| -> Vec<Vec<String>> {
        v.into_iter()
            .map(|f| f.into_iter().map(|l| l.to_ascii_lowercase()).collect())
            .collect()
    };
    assert_eq!(fold(got), fold(theirs), "ebb (left) and haproxy (right)");
    wait_until("haproxy's origin got the request", || {
        !origin_lines(&o2).is_empty()
    });
    assert_eq!(origin_lines(&o), origin_lines(&o2));
}

// --- protocol upgrades: RFC 8441 extended CONNECT <-> HTTP/1.1 Upgrade ----

/// A raw HTTP/2 client: literal HPACK out, ebb's HPACK decoder in (the
/// frames and the HPACK bytes are RFC 9113 / 7541's, checked by hand).
struct RawH2 {
    s: TcpStream,
    dec: ebb::h2::hpack::Decoder,
    /// The server's first SETTINGS parameters.
    settings: Vec<(u16, u32)>,
}

fn frame(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK literal without indexing, new name (RFC 7541 §6.2.2), short
/// strings only.
fn literal(out: &mut Vec<u8>, n: &str, v: &str) {
    out.push(0);
    out.push(n.len() as u8);
    out.extend_from_slice(n.as_bytes());
    out.push(v.len() as u8);
    out.extend_from_slice(v.as_bytes());
}

impl RawH2 {
    fn connect(a: SocketAddr) -> RawH2 {
        let mut s = TcpStream::connect(a).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
        s.write_all(&frame(4, 0, 0, &[])).unwrap();
        let mut c = RawH2 {
            s,
            dec: ebb::h2::hpack::Decoder::new(4096),
            settings: Vec::new(),
        };
        let (kind, _, _, p) = c.read_frame();
        assert_eq!(kind, 4, "first frame: SETTINGS");
        c.settings = p
            .chunks(6)
            .map(|x| {
                (
                    u16::from_be_bytes([x[0], x[1]]),
                    u32::from_be_bytes([x[2], x[3], x[4], x[5]]),
                )
            })
            .collect();
        c.s.write_all(&frame(4, 1, 0, &[])).unwrap();
        c
    }

    fn read_frame(&mut self) -> (u8, u8, u32, Vec<u8>) {
        let mut h = [0u8; 9];
        self.s.read_exact(&mut h).unwrap();
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let mut p = vec![0u8; len];
        self.s.read_exact(&mut p).unwrap();
        let id = u32::from_be_bytes([h[5] & 0x7f, h[6], h[7], h[8]]);
        (h[3], h[4], id, p)
    }

    /// Sends a request head on stream `id` (END_STREAM when `end`).
    fn request(&mut self, id: u32, fields: &[(&str, &str)], end: bool) {
        let mut block = Vec::new();
        for (n, v) in fields {
            literal(&mut block, n, v);
        }
        let flags = 0x4 | u8::from(end);
        self.s.write_all(&frame(1, flags, id, &block)).unwrap();
    }

    fn data(&mut self, id: u32, d: &[u8], end: bool) {
        self.s.write_all(&frame(0, u8::from(end), id, d)).unwrap();
    }

    /// The next HEADERS on `id`: its fields (as `name: value`) and
    /// whether it ended the stream. Other frames are skipped.
    fn headers(&mut self, id: u32) -> (Vec<String>, bool) {
        loop {
            let (kind, flags, sid, p) = self.read_frame();
            if kind == 3 && sid == id {
                panic!("stream {id} reset: {p:?}");
            }
            if kind != 1 || sid != id {
                continue;
            }
            let mut l = ebb::h2::hpack::HeaderList::default();
            self.dec.decode(&p, 65536, &mut l).unwrap();
            let f = l
                .iter()
                .map(|(n, v)| {
                    format!(
                        "{}: {}",
                        String::from_utf8_lossy(n),
                        String::from_utf8_lossy(v)
                    )
                })
                .collect();
            return (f, flags & 1 != 0);
        }
    }

    /// DATA on `id` until `want` bytes came (or the stream ended).
    fn read_data(&mut self, id: u32, want: usize) -> (Vec<u8>, bool) {
        let mut got = Vec::new();
        loop {
            let (kind, flags, sid, p) = self.read_frame();
            if sid != id || kind != 0 {
                continue;
            }
            got.extend_from_slice(&p);
            if flags & 1 != 0 {
                return (got, true);
            }
            if got.len() >= want {
                return (got, false);
            }
        }
    }
}

/// RFC 6455 §4.2.2's answer to a key.
fn ws_accept(key: &str) -> String {
    let mut c = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    c.update(key.as_bytes());
    c.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64(c.finish().as_ref())
}

fn base64(d: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::new();
    for ch in d.chunks(3) {
        let n = u32::from(ch[0]) << 16
            | u32::from(*ch.get(1).unwrap_or(&0)) << 8
            | u32::from(*ch.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= ch.len() {
                o.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

/// The `sec-websocket-accept` an [`upgrade_origin`] answers with.
#[derive(Copy, Clone, PartialEq)]
enum Accept {
    Right,
    Wrong,
    Missing,
}

/// An HTTP/1.1 server that takes one upgrade per connection: records the
/// head, answers 101 (with a `sec-websocket-accept` as `accept` says when
/// the request had a key), then echoes bytes in upper case until the
/// client closes.
fn upgrade_origin(accept: Accept) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let h2 = Arc::clone(&heads);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let heads = Arc::clone(&h2);
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                let end = loop {
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match s.read_retry(&mut tmp) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                heads.lock().unwrap().push(head.clone());
                let key = head
                    .lines()
                    .find_map(|l| l.strip_prefix("sec-websocket-key: "))
                    .map(str::to_string);
                // The key's case matters: take it from the raw bytes.
                let raw = String::from_utf8_lossy(&buf[..end]).into_owned();
                let key_raw = raw.lines().find_map(|l| {
                    let (n, v) = l.split_once(':')?;
                    n.eq_ignore_ascii_case("sec-websocket-key")
                        .then(|| v.trim().to_string())
                });
                let proto = head
                    .lines()
                    .find_map(|l| l.strip_prefix("upgrade: "))
                    .unwrap_or("")
                    .to_string();
                let mut out = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: {proto}\r\n"
                );
                if key.is_some() && accept != Accept::Missing {
                    let acc = if accept == Accept::Right {
                        ws_accept(&key_raw.unwrap_or_default())
                    } else {
                        "bad".to_string()
                    };
                    out.push_str(&format!("sec-websocket-accept: {acc}\r\n"));
                }
                out.push_str("\r\n");
                if s.write_all(out.as_bytes()).is_err() {
                    return;
                }
                let mut rest = buf[end..].to_vec();
                loop {
                    if !rest.is_empty() {
                        if s.write_all(&rest.to_ascii_uppercase()).is_err() {
                            return;
                        }
                        rest.clear();
                    }
                    match s.read_retry(&mut tmp) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => rest.extend_from_slice(&tmp[..n]),
                    }
                }
            });
        }
    });
    (a, heads)
}

const UPGRADE_DEFAULTS: &str =
    "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n";

/// RFC 8441 on a client connection: ebb announces
/// SETTINGS_ENABLE_CONNECT_PROTOCOL, and an extended CONNECT for websocket
/// reaches an HTTP/1.1 server as `GET` + `Upgrade: websocket` with a key
/// ebb made up; the server's 101 is the client's 200 and the stream then
/// carries the tunnel's bytes both ways. A server whose
/// `sec-websocket-accept` does not match the key ebb made gets the client
/// a 502 (HAProxy's reg-test http-messaging/websocket, c4 and c5). Before,
/// `:protocol` was a malformed request (RST_STREAM PROTOCOL_ERROR).
#[test]
fn websocket_over_h2_reaches_an_http1_server() {
    let (good, heads) = upgrade_origin(Accept::Right);
    let (bad, _) = upgrade_origin(Accept::Wrong);
    let (none, _) = upgrade_origin(Accept::Missing);
    let e = Ebb::start(&format!(
        "{UPGRADE_DEFAULTS}listen good\n    bind BIND proto h2\n    server s {good}\n\
         listen bad\n    bind BIND proto h2\n    server s {bad}\n\
         listen none\n    bind BIND\n    server s {none}\n"
    ));
    let mut c = RawH2::connect(e.addrs[0]);
    assert!(c.settings.contains(&(8, 1)), "{:?}", c.settings);
    let ws = [
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        (":scheme", "http"),
        (":path", "/chat"),
        (":authority", "a.example"),
    ];
    c.request(1, &ws, false);
    let (f, end) = c.headers(1);
    assert_eq!(f.first().map(String::as_str), Some(":status: 200"), "{f:?}");
    assert!(!end, "the tunnel stays open");
    let head = heads.lock().unwrap()[0].clone();
    assert!(head.starts_with("get /chat http/1.1\r\n"), "{head}");
    for l in [
        "connection: upgrade",
        "upgrade: websocket",
        "host: a.example",
    ] {
        assert!(head.contains(l), "{l}: {head}");
    }
    assert!(head.contains("sec-websocket-key: "), "{head}");
    assert!(!head.contains("sec-websocket-version"), "{head}");
    c.data(1, b"hello", false);
    assert_eq!(c.read_data(1, 5), (b"HELLO".to_vec(), false));
    c.data(1, b" again", false);
    assert_eq!(c.read_data(1, 6), (b" AGAIN".to_vec(), false));
    // The client's end of the stream ends the tunnel.
    c.data(1, b"", true);
    let (rest, end) = c.read_data(1, usize::MAX);
    assert!(rest.is_empty() && end);

    let mut c = RawH2::connect(e.addrs[1]);
    c.request(1, &ws, false);
    let (f, _) = c.headers(1);
    assert_eq!(f.first().map(String::as_str), Some(":status: 502"), "{f:?}");

    // HTTP/1.1 both sides: a 101 without `sec-websocket-accept` is a 502
    // (HAProxy's reg-test http-messaging/websocket, c3).
    let r = raw(
        e.addrs[2],
        b"GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .expect("an answer");
    assert_eq!(r.status, 502);
}

/// The other direction: an HTTP/1.1 upgrade toward a `proto h2` server
/// goes as an extended CONNECT (`:protocol`, `:scheme https` for an
/// origin-form request as HAProxy sends it) once the server announced
/// RFC 8441; its 200 is the client's 101 (with the `sec-websocket-accept`
/// of the client's key), then bytes flow as DATA. The server here is ebb
/// itself with an HTTP/2 bind in front of an HTTP/1.1 upgrade server (the
/// chain of HAProxy's reg-test http-messaging/protocol_upgrade). Before,
/// the upgrade reached the server as a plain GET.
#[test]
fn http1_upgrade_reaches_an_h2_server_as_extended_connect() {
    let (o, heads) = upgrade_origin(Accept::Right);
    let front = free_port();
    let e = Ebb::start(&format!(
        "{UPGRADE_DEFAULTS}listen h2 \n    bind 127.0.0.1:{front} proto h2\n    server s {o}\n\
         listen h1\n    bind BIND\n    server s 127.0.0.1:{front} proto h2\n"
    ));
    let a = e.addrs.iter().find(|a| a.port() != front).copied().unwrap();
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    s.write_all(
        format!(
            "GET /chat HTTP/1.1\r\nHost: b.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read_retry(&mut tmp).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101 "), "{head}");
    assert!(head.contains("upgrade: websocket"), "{head}");
    let want = format!("sec-websocket-accept: {}", ws_accept(key)).to_ascii_lowercase();
    assert!(head.contains(&want), "{head}");
    // The origin behind the HTTP/2 hop got the client's key.
    let got = heads.lock().unwrap()[0].clone();
    assert!(
        got.contains(&format!("sec-websocket-key: {}", key.to_ascii_lowercase())),
        "{got}"
    );
    s.write_all(b"ping").unwrap();
    let mut echo = buf[end..].to_vec();
    while echo.len() < 4 {
        let n = s.read_retry(&mut tmp).unwrap();
        assert!(n > 0);
        echo.extend_from_slice(&tmp[..n]);
    }
    assert_eq!(echo, b"PING");
}

/// What a raw HTTP/1.1 exchange got: the answer's status line and its
/// fields other than `server` and `date` (lower-cased, sorted), and
/// whether the connection closed after it (`<closed>`).
fn h1_answer(a: SocketAddr, req: &str) -> Vec<String> {
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_ascii_lowercase();
    let mut lines = text.lines();
    let mut v = vec![lines.next().unwrap_or("").to_string()];
    let mut fields: Vec<String> = lines
        .take_while(|l| !l.is_empty())
        .filter(|l| !l.starts_with("server:") && !l.starts_with("date:"))
        .map(str::to_string)
        .collect();
    fields.sort();
    v.extend(fields);
    v.push("<closed>".to_string());
    v
}

const WS_RULES: &str = "    acl ws_handshake hdr(sec-websocket-key) -m found\n\
    http-request reject unless ws_handshake\n\
    capture request header sec-websocket-key len 128\n\
    http-request return status 200 hdr connection upgrade hdr upgrade websocket hdr sec-websocket-accept \"%[capture.req.hdr(0),concat(258EAFA5-E914-47DA-95CA-C5AB0DC85B11,,),sha1,base64]\"\n\
    http-after-response set-status 101 if { status eq 200 }\n";

/// The websocket server of HAProxy's reg-test http-messaging/websocket,
/// made of rules: `http-request reject` closes a request without a key
/// with no answer; a `return` with `hdr connection upgrade hdr upgrade
/// websocket` made a 101 by `http-after-response set-status` goes as
/// HAProxy sends it (`connection: upgrade`, `upgrade`, no length) and the
/// connection ends; a key without `Sec-WebSocket-Version` is taken (as
/// HAProxy does), a websocket upgrade without a key is a 400. Before,
/// `reject` and `hdr connection` were refused at start, and a request
/// without a version was a 400.
#[test]
fn websocket_server_made_of_rules_as_haproxy() {
    let e = Ebb::start(&format!(
        "{UPGRADE_DEFAULTS}listen fe1\n    bind BIND\n{WS_RULES}"
    ));
    let reqs = [
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
    ];
    let run = |a: SocketAddr| -> Vec<Vec<String>> {
        reqs.iter()
            .map(|r| {
                let mut v = h1_answer(a, r);
                // The status line's reason and the 400's page differ.
                v.truncate(1);
                v[0] = v[0].split(' ').take(2).collect::<Vec<_>>().join(" ");
                v
            })
            .collect()
    };
    let full = h1_answer(e.addr(), reqs[0]);
    assert_eq!(
        full,
        [
            "http/1.1 101 switching protocols",
            "connection: upgrade",
            "sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=",
            "upgrade: websocket",
            "<closed>"
        ]
    );
    let ours = run(e.addr());
    assert_eq!(ours, [vec!["http/1.1 101"], vec![""], vec!["http/1.1 400"]]);
    if !have("haproxy") {
        return;
    }
    let p = free_port();
    let _h = haproxy_with(
        "wsrules",
        &format!("{UPGRADE_DEFAULTS}listen fe1\n    bind 127.0.0.1:{p}\n{WS_RULES}"),
    );
    let a = SocketAddr::from(([127, 0, 0, 1], p));
    wait_until("haproxy listens", || TcpStream::connect(a).is_ok());
    assert_eq!(h1_answer(a, reqs[0]), full, "haproxy");
    assert_eq!(run(a), ours, "haproxy");
}

/// Each DATA frame a stream takes is granted back on that stream at once,
/// even the one ending it and below half the window, before the answer,
/// as HAProxy does (VTest's `rxwinup` in reg-test
/// http-messaging/h2_to_h1 waits for it). Before, ebb granted a stream's
/// window only once half of it was used, and never after END_STREAM.
#[test]
fn request_data_is_granted_back_on_its_stream_before_the_answer() {
    let o = Origin::start("o", Mode::Ok);
    let e = Ebb::start(&format!(
        "{UPGRADE_DEFAULTS}listen l\n    bind BIND proto h2\n    server s {}\n",
        o.addr
    ));
    let mut c = RawH2::connect(e.addr());
    let head = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/up"),
        (":authority", "a.example"),
        ("content-length", "38"),
    ];
    c.request(1, &head, false);
    c.data(1, b"this must be delivered, like it or not", true);
    let mut stream_wu = None;
    loop {
        let (kind, _, id, p) = c.read_frame();
        if kind == 8 && id == 1 {
            stream_wu = Some(u32::from_be_bytes([p[0] & 0x7f, p[1], p[2], p[3]]));
        }
        if kind == 1 && id == 1 {
            break;
        }
        assert!(kind != 3, "stream reset");
    }
    assert_eq!(
        stream_wu,
        Some(38),
        "WINDOW_UPDATE on stream 1 before its HEADERS"
    );
}

// --- a client that leaves right after its request -------------------------

/// A `proto h2` listener proxying to `origin`.
fn gone_cfg(bind: &str, origin: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
         listen l\n    bind {bind} proto h2\n    server o {origin}\n"
    )
}

/// After the SETTINGS exchange, sends a whole GET (END_STREAM) and closes
/// at once, reading nothing (the reg-test's client c6).
fn request_and_leave(a: SocketAddr) {
    let mut c = RawH2::connect(a);
    // The server's SETTINGS ACK, so nothing is left to read.
    loop {
        let (kind, flags, _, _) = c.read_frame();
        if kind == 4 && flags & 1 != 0 {
            break;
        }
    }
    c.request(
        1,
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/gone"),
            (":authority", "hostname"),
        ],
        true,
    );
    let _ = c.s.shutdown(std::net::Shutdown::Both);
}

/// HAProxy's reg-test http-messaging/h2_desync_attacks (its last client
/// sends a request and closes without reading): a request all in still
/// reaches the server when the client closed right after it (no `option
/// abortonclose`). ebb used to drop the stream when its request and the
/// close were read together, as a loaded machine reads them.
#[test]
fn a_whole_request_reaches_the_server_after_the_client_left() {
    let o = Origin::start("o", Mode::Ok);
    let e = Ebb::start(&gone_cfg("BIND", o.addr));
    request_and_leave(e.addr());
    wait_until("ebb's request at the origin", || {
        o.requests.load(std::sync::atomic::Ordering::SeqCst) >= 1
    });
    assert_eq!(origin_lines(&o), ["GET /gone HTTP/1.1 host=hostname"]);
    let h = Origin::start("h", Mode::Ok);
    let port = free_port();
    if let Some(_h) = haproxy_with("h2-gone", &gone_cfg(&format!("127.0.0.1:{port}"), h.addr)) {
        let a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_until("haproxy's listener", || TcpStream::connect(a).is_ok());
        request_and_leave(a);
        wait_until("haproxy's request at the origin", || {
            h.requests.load(std::sync::atomic::Ordering::SeqCst) >= 1
        });
        assert_eq!(origin_lines(&h), ["GET /gone HTTP/1.1 host=hostname"]);
    }
}

// --- CONNECT (RFC 9113 §8.5) ------------------------------------------------

/// An HTTP/1.1 server for CONNECT: records each head it reads; `refuse`
/// answers 403 with a 4-byte body; `bye` answers 200, sends `BYE` and
/// closes; otherwise it answers 200 and echoes in upper case, and at the
/// client's half-close sends `FIN-SEEN` and closes.
fn connect_origin(mode: &'static str) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let heads = Arc::new(Mutex::new(Vec::new()));
    let h = Arc::clone(&heads);
    let a = common::origin::serve_each(move |mut s| {
        let Some(head) = common::origin::read_head(&mut s) else {
            return;
        };
        let end = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        h.lock()
            .unwrap()
            .push(String::from_utf8_lossy(&head[..end]).into_owned());
        let early = head[end..].to_ascii_uppercase();
        let answer: &[u8] = match mode {
            "refuse" => b"HTTP/1.1 403 Forbidden\r\ncontent-length: 4\r\nx-o: 1\r\n\r\nnope",
            _ => b"HTTP/1.1 200 Connection established\r\nx-o: 1\r\n\r\n",
        };
        if s.write_all(answer).is_err() || s.write_all(&early).is_err() {
            return;
        }
        match mode {
            "refuse" => common::origin::drain(&mut s),
            "bye" => {
                let _ = s.write_all(b"BYE");
            }
            _ => {
                let mut b = [0u8; 4096];
                loop {
                    match s.read_retry(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if s.write_all(&b[..n].to_ascii_uppercase()).is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = s.write_all(b"FIN-SEEN");
            }
        }
    });
    (a, heads)
}

/// A `proto h2` listener in front of `origin`, on `bind`.
fn connect_cfg(bind: &str, origin: SocketAddr) -> String {
    format!("{UPGRADE_DEFAULTS}listen l\n    bind {bind} proto h2\n    server s {origin}\n")
}

/// `cfg` with its access log on stdout (ebb's only: HAProxy's is not read).
fn logged(cfg: &str) -> String {
    format!(
        "global\n    log stdout format raw local0\n{}",
        cfg.replace(
            "listen l\n",
            "listen l\n    log global\n    option httplog\n"
        )
    )
}

const CONNECT: [(&str, &str); 2] = [(":method", "CONNECT"), (":authority", "example.com:443")];

/// A client's CONNECT through `a` to a tunnelling origin: what it saw.
fn connect_tunnel(a: SocketAddr) -> Vec<String> {
    let mut c = RawH2::connect(a);
    let mut seen = Vec::new();
    c.request(1, &CONNECT, false);
    let (f, end) = c.headers(1);
    seen.push(format!("{f:?} end={end}"));
    c.data(1, b"hello", false);
    let (d, end) = c.read_data(1, 5);
    seen.push(format!("{} end={end}", String::from_utf8_lossy(&d)));
    // END_STREAM: the server reads the end of the tunnel, and may still
    // answer; its close ends the stream.
    c.data(1, b"", true);
    let (d, end) = c.read_data(1, usize::MAX);
    seen.push(format!("{} end={end}", String::from_utf8_lossy(&d)));
    // A second tunnel, whose client shuts its side of the TCP connection
    // instead: a half-close as well, the server's last bytes still come.
    let mut c = RawH2::connect(a);
    c.request(1, &CONNECT, false);
    c.headers(1);
    c.data(1, b"again", false);
    let (d, _) = c.read_data(1, 5);
    seen.push(String::from_utf8_lossy(&d).into_owned());
    c.s.shutdown(std::net::Shutdown::Write).unwrap();
    let (d, end) = c.read_data(1, usize::MAX);
    seen.push(format!("{} end={end}", String::from_utf8_lossy(&d)));
    seen
}

/// An HTTP/2 client's CONNECT (`:method CONNECT`, `:authority`, no
/// `:scheme` nor `:path`) reaches an HTTP/1.1 server as `CONNECT
/// host:port HTTP/1.1` with that `host`; its 2xx makes the stream the
/// tunnel: DATA go raw both ways, the client's END_STREAM is the
/// server's end of input (a half-close: the server still answers), and
/// so is the client's shutdown of its side of the TCP connection; the
/// server's close is the stream's END_STREAM. The same as HAProxy 2.6,
/// side by side. Before, ebb answered 405.
#[test]
fn h2_connect_is_a_tunnel_to_an_http1_server() {
    let (o, heads) = connect_origin("echo");
    let e = Ebb::start(&logged(&connect_cfg("BIND", o)));
    let want = [
        r#"[":status: 200", "x-o: 1"] end=false"#,
        "HELLO end=false",
        "FIN-SEEN end=true",
        "AGAIN",
        "FIN-SEEN end=true",
    ];
    assert_eq!(connect_tunnel(e.addr()), want);
    let head = "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n";
    assert_eq!(heads.lock().unwrap().as_slice(), [head, head]);
    // The log line says what HAProxy's does.
    wait_until("the log line", || {
        e.stdout
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(" 200 71 ") && l.contains("\"CONNECT example.com:443 HTTP/2.0\""))
    });
    let (ho, hheads) = connect_origin("echo");
    let port = free_port();
    if let Some(_h) = haproxy_with("h2connect", &connect_cfg(&format!("127.0.0.1:{port}"), ho)) {
        let a = SocketAddr::from(([127, 0, 0, 1], port));
        wait_until("haproxy listens", || TcpStream::connect(a).is_ok());
        assert_eq!(connect_tunnel(a), want, "haproxy");
        assert_eq!(hheads.lock().unwrap().as_slice(), [head, head], "haproxy");
    }
}

/// A CONNECT on a new connection to `a`, its answer read to the end of
/// the stream into `seen`.
fn connect_to_end(a: SocketAddr, seen: &mut Vec<String>) -> RawH2 {
    let mut c = RawH2::connect(a);
    c.request(1, &CONNECT, false);
    let (f, end) = c.headers(1);
    seen.push(format!("{f:?} end={end}"));
    let (d, end) = c.read_data(1, usize::MAX);
    seen.push(format!("{} end={end}", String::from_utf8_lossy(&d)));
    c
}

/// What a client sees of a refused CONNECT and of a tunnel whose server
/// closes first, then of a second CONNECT on the same connection.
fn connect_ends(refuse: SocketAddr, bye: SocketAddr) -> Vec<String> {
    let mut seen = Vec::new();
    // Refused: an ordinary answer, then the stream is reset (the client
    // had not ended it).
    let mut c = connect_to_end(refuse, &mut seen);
    loop {
        let (kind, _, id, _) = c.read_frame();
        if kind == 3 && id == 1 {
            seen.push("reset".into());
            break;
        }
    }
    // The server closes first: END_STREAM and no reset; the client may
    // still send and end its side; the connection goes on.
    let mut c = connect_to_end(bye, &mut seen);
    c.data(1, b"late", false);
    c.data(1, b"", true);
    c.request(3, &CONNECT, false);
    loop {
        let (kind, _, id, _) = c.read_frame();
        assert!(!(kind == 3 && id == 1), "stream 1 reset");
        if kind == 1 && id == 3 {
            seen.push("second answered".into());
            break;
        }
    }
    seen
}

/// A CONNECT the server refuses is an ordinary answer (status, fields,
/// body), the stream then reset; a tunnel whose server closes first ends
/// with END_STREAM and no RST_STREAM, the client's later DATA dropped.
/// As HAProxy 2.6, side by side.
#[test]
fn h2_connect_refused_or_closed_by_the_server() {
    let (refuse, _) = connect_origin("refuse");
    let (bye, _) = connect_origin("bye");
    let e = Ebb::start(&format!(
        "{}{}",
        connect_cfg("BIND", refuse),
        connect_cfg("BIND", bye)
            .split_once("listen l\n")
            .map(|(_, l)| format!("listen l2\n{l}"))
            .unwrap()
    ));
    let want = [
        r#"[":status: 403", "content-length: 4", "x-o: 1"] end=false"#,
        "nope end=true",
        "reset",
        r#"[":status: 200", "x-o: 1"] end=false"#,
        "BYE end=true",
        "second answered",
    ];
    assert_eq!(connect_ends(e.addrs[0], e.addrs[1]), want);
    let (p1, p2) = (free_port(), free_port());
    let hcfg = format!(
        "{}listen l2\n    bind 127.0.0.1:{p2} proto h2\n    server s {bye}\n",
        connect_cfg(&format!("127.0.0.1:{p1}"), refuse)
    );
    if let Some(_h) = haproxy_with("h2connect-ends", &hcfg) {
        let a1 = SocketAddr::from(([127, 0, 0, 1], p1));
        let a2 = SocketAddr::from(([127, 0, 0, 1], p2));
        wait_until("haproxy listens", || TcpStream::connect(a2).is_ok());
        assert_eq!(connect_ends(a1, a2), want, "haproxy");
    }
}

/// An HTTP/1.1 client's CONNECT toward a `proto h2` server goes as an
/// HTTP/2 CONNECT (`:method`, `:authority`), its 2xx the client's
/// `HTTP/1.1 200 ` and the tunnel, the client's half-close the stream's
/// END_STREAM: here through ebb's own HTTP/2 bind to an HTTP/1.1 server,
/// so both translations at once. HAProxy 2.6 sends the same (checked by
/// hand with a Python h2 server). Before, the stream ended with its head
/// and the answer came chunked.
#[test]
fn http1_connect_reaches_an_h2_server() {
    let (o, heads) = connect_origin("echo");
    let front = free_port();
    let e = Ebb::start(&format!(
        "{}listen h1\n    bind BIND\n    server s 127.0.0.1:{front} proto h2\n",
        connect_cfg(&format!("127.0.0.1:{front}"), o)
    ));
    let a = e.addrs.iter().find(|a| a.port() != front).copied().unwrap();
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    s.write_all(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        .unwrap();
    let head = common::origin::read_head(&mut s).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&head),
        "HTTP/1.1 200 \r\nx-o: 1\r\n\r\n"
    );
    s.write_all(b"hello").unwrap();
    let mut b = [0u8; 5];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"HELLO");
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"FIN-SEEN");
    assert_eq!(
        heads.lock().unwrap().as_slice(),
        ["CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n"]
    );
}

/// What an `h2` bind sends to a client speaking HTTP/1.1, and whether it
/// then closed.
fn h1_on_h2(a: SocketAddr) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let closed = s.read_to_end(&mut out).is_ok();
    (out, closed)
}

/// HTTP/1.1 bytes on a `bind ... proto h2`: not the preface, so nothing
/// is sent (no SETTINGS, no GOAWAY) and the connection closes, logged
/// `<BADREQ>` `PR--` without captures, as HAProxy 2.6 does
/// (`h2c_frt_recv_preface`: no GOAWAY before the preface; no stream, so
/// no `{...}`). Before, ebb sent SETTINGS and a GOAWAY, and logged `{|}`.
#[test]
fn http1_bytes_on_an_h2_bind_are_closed_without_a_frame() {
    let (o, _) = connect_origin("echo");
    let cfg = logged(&connect_cfg("BIND", o));
    let e = Ebb::start(&cfg.replace(
        "listen l\n",
        "listen l\n    http-request capture req.hdr(host) len 50\n",
    ));
    assert_eq!(h1_on_h2(e.addr()), (Vec::new(), true));
    wait_until("the log line", || {
        e.stdout
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(" PR-- ") && l.contains("\"<BADREQ>\""))
    });
    // No stream, so no captures: no `{...}` (HAProxy's line has none).
    let lines = e.stdout.lock().unwrap().clone();
    assert!(lines.iter().all(|l| !l.contains('{')), "{lines:?}");
    let port = free_port();
    if let Some(_h) = haproxy_with("h2-h1bytes", &connect_cfg(&format!("127.0.0.1:{port}"), o)) {
        let a = SocketAddr::from(([127, 0, 0, 1], port));
        wait_until("haproxy listens", || TcpStream::connect(a).is_ok());
        assert_eq!(h1_on_h2(a), (Vec::new(), true), "haproxy");
    }
}
