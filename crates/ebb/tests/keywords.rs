//! HAProxy keywords of everyday configurations, through the real binary
//! and side by side with HAProxy 2.6 when it is installed:
//! `http-send-name-header`, `option logasap`, `log-tag`,
//! `tune.http.maxhdr`, `option prefer-last-server`, `maxconnrate`,
//! `maxsessrate`, `rate-limit sessions`, `disabled` and `enabled`; and what HAProxy forwards of
//! the fields a Connection field names, in which order.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;

use common::origin::{Mode, Origin};
use common::*;

/// The lines of the request heads `o` received that name `field`
/// (case-insensitively), as `name: value` lowercased.
fn fields_seen(o: &Origin, field: &str) -> Vec<Vec<String>> {
    o.heads
        .lock()
        .unwrap()
        .iter()
        .map(|h| {
            h.lines()
                .filter(|l| {
                    l.split_once(':')
                        .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(field))
                })
                .map(|l| l.to_ascii_lowercase())
                .collect()
        })
        .collect()
}

/// The last field of each request head `o` received, lowercased.
fn last_fields(o: &Origin) -> Vec<String> {
    o.heads
        .lock()
        .unwrap()
        .iter()
        .filter_map(|h| h.lines().rfind(|l| !l.trim().is_empty()))
        .map(|l| l.trim().to_ascii_lowercase())
        .collect()
}

fn name_hdr_cfg(sock: &Path, bind: &str, dead: u16, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         \x20   http-send-name-header X-Server\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    balance first\n    retries 1\n    option redispatch\n\
         \x20   server dead 127.0.0.1:{dead}\n    server live {o}\n",
        sock.display()
    )
}

/// `http-send-name-header`: the server named in the field, any copy the
/// client sent removed; the first server refuses the connection, the
/// redispatched retry names the server it went to.
#[test]
fn send_name_header_names_the_server_tried_last() {
    let origin = Origin::start("live", Mode::Ok);
    let dead = free_port();
    let send = |fe: SocketAddr| {
        let r = raw(
            fe,
            b"GET / HTTP/1.1\r\nHost: x\r\nx-server: forged\r\nX-SERVER: again\r\nConnection: close\r\n\r\n",
        )
        .expect("an answer");
        assert_eq!(r.status, 200);
    };
    let (ebb, _sock) = ebb_with_admin("sendname", |k, b| name_hdr_cfg(k, b, dead, origin.addr));
    send(ebb.addr());
    let ours = fields_seen(&origin, "x-server");
    assert_eq!(ours, vec![vec!["x-server: live".to_string()]]);
    // Appended last, after `Connection`, as HAProxy appends it.
    assert_eq!(last_fields(&origin), vec!["x-server: live".to_string()]);
    origin.heads.lock().unwrap().clear();
    if let Some((_h, fe)) = haproxy_beside("sendname", |k, b| name_hdr_cfg(k, b, dead, origin.addr))
    {
        send(fe);
        assert_eq!(fields_seen(&origin, "x-server"), ours);
        assert_eq!(last_fields(&origin), vec!["x-server: live".to_string()]);
    }
}

/// Each configuration text is refused by `ebb -c` with its message (the
/// files are `f0.cfg`, `f1.cfg`...).
fn refused(name: &str, cases: &[(String, &str)]) {
    let dir = scratch(name);
    for (i, (text, what)) in cases.iter().enumerate() {
        assert_refused(&dir, &format!("f{i}.cfg"), text, what, false);
    }
}

/// `http-send-name-header` without a name is refused with its line, as
/// HAProxy refuses it; so in a frontend.
#[test]
fn send_name_header_needs_a_name_and_a_backend() {
    let head = "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n";
    refused(
        "sendname-refused",
        &[
            (
                format!("{head}backend be\n    http-send-name-header\n    server a 127.0.0.1:1\n"),
                "f0.cfg:7: 'http-send-name-header' expects a header name",
            ),
            (
                format!("{head}frontend fe\n    bind 127.0.0.1:1\n    http-send-name-header X-S\n"),
                "f1.cfg:8: 'http-send-name-header' is not allowed",
            ),
        ],
    );
}

/// The bytes read from `s` up to the end of a request head (or its close).
fn read_head(s: &mut std::net::TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read_retry(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
    got
}

/// An origin that answers each connection's request with a head and half
/// of a 6-byte body, then the rest once the test sends on the channel;
/// one connection at a time, closed after its answer.
fn stalling_origin() -> (SocketAddr, std::sync::mpsc::Sender<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            read_head(&mut s);
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nabc");
            if rx.recv().is_err() {
                return;
            }
            let _ = s.write_all(b"def");
        }
    });
    (addr, tx)
}

/// An origin that accepts connections and holds them open until the
/// peer closes.
fn holding_origin() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while matches!(s.read_retry(&mut b), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// The fields of the next syslog line on `udp` after the accept date.
fn next_fields(udp: &std::net::UdpSocket) -> Vec<String> {
    let mut b = [0u8; 4096];
    let n = retry_eintr(|| udp.recv(&mut b)).expect("no syslog datagram");
    let l = String::from_utf8_lossy(&b[..n]).into_owned();
    let rest = l.split("] ").nth(1).unwrap_or("");
    rest.split(' ').map(str::to_string).collect()
}

/// A UDP socket to receive syslog lines on (a read waits up to 30 s),
/// and its address.
fn syslog_udp() -> (std::net::UdpSocket, SocketAddr) {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let u = udp.local_addr().unwrap();
    (udp, u)
}

/// Of a timers field (`a/b/c` or `a/b/+c`): its last figure as written,
/// the others as `n` (or -1).
fn last_timer_shape(f: &str) -> String {
    f.split('/')
        .map(|t| match t {
            "-1" => "-1".to_string(),
            t if t.starts_with('+') => "+n".to_string(),
            _ => "n".to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn logasap_cfg(sock: &Path, bind0: &str, bind1: &str, udp: SocketAddr, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n    log {udp} local0\n\
         defaults\n    mode http\n    log global\n    option httplog\n    option logasap\n\
         \x20   timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind0}\n    http-response set-status 299\n    default_backend be\n\
         frontend late\n    bind {bind1}\n    no option logasap\n    default_backend be\n\
         backend be\n    server live {o}\n",
        sock.display()
    )
}

/// `option logasap`: the line leaves when the response head is
/// forwarded, while the body still waits on the server, with `+` before
/// the total time and the size; `no option logasap` logs at the end, once.
/// The status is the one the response rules set (`set-status 299`, whose
/// reason is HAProxy's "Success"), the size HAProxy's of the answer it
/// held then: 20 for the status line, its parts "HTTP/1.1", "299" and
/// "Success" (18), the fields' names and values but `Connection` (15),
/// 1 for the head's end and the 3 body bytes that came with the head.
#[test]
fn logasap_logs_at_the_response_head() {
    let (o, go) = stalling_origin();
    let check = |fe: SocketAddr, late: SocketAddr, udp: &std::net::UdpSocket| {
        let mut c = std::net::TcpStream::connect(fe).unwrap();
        c.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        // The body is held by the origin: this line is the early one.
        let f = next_fields(udp);
        go.send(()).unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        assert!(
            all.ends_with(b"abcdef"),
            "{}",
            String::from_utf8_lossy(&all)
        );
        go.send(()).unwrap();
        let r = get(late, "/b");
        assert_eq!(r.status, 200);
        // The next line is /b's: none more for /a.
        let g = next_fields(udp);
        assert!(g.iter().any(|w| w == "/b"), "{g:?}");
        (f, g)
    };
    let shape = |f: &[String]| {
        (
            f[0].clone(),
            last_timer_shape(&f[2]),
            f[3].clone(),
            match f[4].starts_with('+') {
                true => f[4].clone(),
                false => "n".into(),
            },
            f[5].clone(),
        )
    };
    let (udp, u) = syslog_udp();
    let (ebb, _s) = ebb_with_admin("logasap", |k, b| logasap_cfg(k, b, b, u, o));
    let (f, g) = check(ebb.addrs[0], ebb.addrs[1], &udp);
    let ours = (shape(&f), shape(&g));
    assert_eq!(
        ours.0,
        (
            "fe".into(),
            "n/n/n/n/+n".into(),
            "299".into(),
            "+57".into(),
            "-".into()
        )
    );
    assert_eq!(
        ours.1,
        (
            "late".into(),
            "n/n/n/n/n".into(),
            "200".into(),
            "n".into(),
            "-".into()
        )
    );
    drop(ebb);
    let late = free_port();
    let hap = haproxy_beside("logasap", |k, b| {
        logasap_cfg(k, b, &format!("127.0.0.1:{late}"), u, o)
    });
    if let Some((_h, fe)) = hap {
        let (f, g) = check(fe, format!("127.0.0.1:{late}").parse().unwrap(), &udp);
        assert_eq!((shape(&f), shape(&g)), ours);
    }
}

/// An origin that answers every request with one text answer (an
/// ETag, a Content-Length) written in one piece.
fn text_origin() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            read_head(&mut s);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nETag: \"abc\"\r\n\
                  Content-Length: 6\r\nConnection: close\r\n\r\nabcdef",
            );
        }
    });
    addr
}

fn logasap_gzip_cfg(sock: &Path, bind: &str, udp: SocketAddr, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n    log {udp} local0\n\
         defaults\n    mode http\n    log global\n    option httplog\n    option logasap\n\
         \x20   timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    compression algo gzip\n    server live {o}\n",
        sock.display()
    )
}

/// `option logasap` and a compressed answer: HAProxy logs the head as
/// the server sent it, its compression filter's fields (Content-Encoding,
/// Vary, the weak ETag, chunked framing for the Content-Length) added
/// after the line: 20 for the status line, "HTTP/1.1", "200", "OK" (13),
/// Content-Type (22), the server's ETag (9) and Content-Length (15) but
/// not `Connection`, 1 for the head's end and the 6 body bytes.
#[test]
fn logasap_logs_a_compressed_answer_as_the_server_sent_it() {
    let o = text_origin();
    let (udp, u) = syslog_udp();
    let check = |fe: SocketAddr| {
        let mut c = std::net::TcpStream::connect(fe).unwrap();
        c.write_all(
            b"GET /a HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        let head = String::from_utf8_lossy(&all).to_ascii_lowercase();
        assert!(head.contains("content-encoding: gzip\r\n"), "{head}");
        let f = next_fields(&udp);
        (f[3].clone(), f[4].clone())
    };
    let (ebb, _s) = ebb_with_admin("logasap-gzip", |k, b| logasap_gzip_cfg(k, b, u, o));
    let ours = check(ebb.addr());
    assert_eq!(ours, ("200".into(), "+86".into()));
    drop(ebb);
    if let Some((_h, fe)) = haproxy_beside("logasap-gzip", |k, b| logasap_gzip_cfg(k, b, u, o)) {
        assert_eq!(check(fe), ours);
    }
}

/// An origin that sends each request head it reads (lowercased, up to
/// its end) on `tx` and answers with a Connection field naming `X-Foo`,
/// and a Content-Length between other fields.
fn connection_origin(tx: std::sync::mpsc::Sender<String>) -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let head = String::from_utf8_lossy(&read_head(&mut s)).to_ascii_lowercase();
            let _ = tx.send(head);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nConnection: x-foo\r\nX-Foo: 1\r\n\
                  Content-Length: 2\r\nX-After: 1\r\n\r\nok",
            );
        }
    });
    addr
}

fn fields_cfg(sock: &Path, bind: &str, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n\
         \x20   timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    server s {o}\n",
        sock.display()
    )
}

/// The fields of a head (its lines but the first), lowercased.
fn head_fields(head: &str) -> Vec<String> {
    head.split("\r\n")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// As HAProxy 2.6: the fields a Connection field names go on both ways,
/// and so does the Connection field, without the `keep-alive` and
/// `close` the proxy says itself; the fields keep their order, the
/// Content-Length the proxy writes again included.
#[test]
fn connection_named_fields_and_content_length_keep_their_place() {
    let (tx, rx) = std::sync::mpsc::channel();
    let o = connection_origin(tx);
    let check = |fe: SocketAddr| {
        let mut c = Client::connect(fe);
        c.send(
            b"POST /x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nContent-Length: 3\r\n\
              Connection: keep-alive, X-Bar\r\nX-Bar: 2\r\nX-C: 3\r\n\r\nabc",
        );
        let r = c.read_resp();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
        let req = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the origin got no request");
        let resp: Vec<String> = r
            .headers
            .iter()
            .map(|(n, v)| format!("{n}: {v}").to_ascii_lowercase())
            .collect();
        (head_fields(&req), resp)
    };
    let (ebb, _s) = ebb_with_admin("conn-fields", |k, b| fields_cfg(k, b, o));
    let ours = check(ebb.addr());
    assert_eq!(
        ours.0,
        [
            "host: a",
            "x-a: 1",
            "content-length: 3",
            "connection: x-bar",
            "x-bar: 2",
            "x-c: 3"
        ]
    );
    assert_eq!(
        ours.1,
        [
            "connection: x-foo",
            "x-foo: 1",
            "content-length: 2",
            "x-after: 1"
        ]
    );
    drop(ebb);
    if let Some((_h, fe)) = haproxy_beside("conn-fields", |k, b| fields_cfg(k, b, o)) {
        assert_eq!(check(fe), ours);
    }
}

fn tcp_logasap_cfg(sock: &Path, bind: &str, udp: SocketAddr, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n    log {udp} local0\n\
         defaults\n    mode tcp\n    log global\n    option tcplog\n    option logasap\n\
         \x20   timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         listen fe\n    bind {bind}\n    server s {o}\n",
        sock.display()
    )
}

/// `option logasap` in `mode tcp`: the line leaves once the server
/// connection is established, the session still open, with `+` before
/// the total time and the size.
#[test]
fn logasap_logs_a_tcp_session_at_the_connect() {
    let o = holding_origin();
    let (udp, u) = syslog_udp();
    let check = |fe: SocketAddr| {
        let mut c = std::net::TcpStream::connect(fe).unwrap();
        c.write_all(b"hello").unwrap();
        let f = next_fields(&udp);
        drop(c);
        (
            f[0].clone(),
            f[1].clone(),
            last_timer_shape(&f[2]),
            f[3].clone(),
            f[4].clone(),
        )
    };
    let (ebb, _s) = ebb_with_admin("tcp-logasap", |k, b| tcp_logasap_cfg(k, b, u, o));
    let ours = check(ebb.addr());
    assert_eq!(
        ours,
        (
            "fe".into(),
            "fe/s".into(),
            "n/n/+n".into(),
            "+0".into(),
            "--".into()
        )
    );
    drop(ebb);
    if let Some((_h, fe)) = haproxy_beside("tcp-logasap", |k, b| tcp_logasap_cfg(k, b, u, o)) {
        assert_eq!(check(fe), ours);
    }
}

fn log_tag_cfg(
    k: &Path,
    bind0: &str,
    bind1: &str,
    udp: SocketAddr,
    o: SocketAddr,
    dead: u16,
) -> String {
    format!(
        "global\n    stats socket {} level admin\n    log {udp} local0\n    log-tag gtag\n\
         defaults\n    mode http\n    log global\n    option httplog\n\
         \x20   timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind0}\n    log-tag fetag\n    default_backend be\n\
         frontend plain\n    bind {bind1}\n    default_backend be\n\
         backend be\n    log-tag betag\n    server live {o}\n\
         \x20   server dead 127.0.0.1:{dead} backup check inter 200 fall 1\n",
        k.display()
    )
}

/// The syslog tag of each kind of line: `/f` through the frontend with
/// its own `log-tag`, `/p` through the one without (the global tag), the
/// backend's server going down (the backend's tag).
fn tags_seen(udp: &std::net::UdpSocket, fe: SocketAddr, plain: SocketAddr) -> Vec<String> {
    assert_eq!(get(fe, "/f").status, 200);
    assert_eq!(get(plain, "/p").status, 200);
    let mut found: [Option<String>; 3] = Default::default();
    let mut b = [0u8; 4096];
    while found.iter().any(Option::is_none) {
        let n = retry_eintr(|| udp.recv(&mut b)).expect("no syslog datagram");
        let l = String::from_utf8_lossy(&b[..n]).into_owned();
        // `<PRI>DATE TAG[PID]: message`
        let tag = l
            .split("]: ")
            .next()
            .and_then(|h| h.rsplit(' ').next())
            .and_then(|t| t.split('[').next())
            .unwrap_or("?")
            .to_string();
        let i = if l.contains("\"GET /f ") {
            0
        } else if l.contains("\"GET /p ") {
            1
        } else if l.contains("dead is DOWN") {
            2
        } else {
            continue;
        };
        found[i] = Some(tag);
    }
    found.into_iter().flatten().collect()
}

/// `log-tag` in `global` and in proxies: a frontend's access lines carry
/// its tag, else the global one; a backend's server events carry the
/// backend's.
#[test]
fn log_tag_per_proxy_and_global() {
    let o = Origin::start("live", Mode::Ok);
    let dead = free_port();
    let (udp, u) = syslog_udp();
    let (ebb, _s) = ebb_with_admin("logtag", |k, b| log_tag_cfg(k, b, b, u, o.addr, dead));
    let ours = tags_seen(&udp, ebb.addrs[0], ebb.addrs[1]);
    assert_eq!(ours, ["fetag", "gtag", "betag"]);
    drop(ebb);
    let plain = free_port();
    let p = format!("127.0.0.1:{plain}");
    if let Some((_h, fe)) = haproxy_beside("logtag", |k, b| log_tag_cfg(k, b, &p, u, o.addr, dead))
    {
        // (Lines of ebb's left in the socket are read past.)
        assert_eq!(tags_seen(&udp, fe, p.parse().unwrap()), ours);
    }
}

/// An origin whose answer to `/rN` has N fields (Content-Length and
/// N - 1 others), closing each connection after its answer.
fn fields_origin() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let got = read_head(&mut s);
            let text = String::from_utf8_lossy(&got);
            let n: usize = text
                .split(' ')
                .nth(1)
                .and_then(|p| p.strip_prefix("/r"))
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            let mut a = String::from("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n");
            for i in 1..n {
                a.push_str(&format!("x-f{i}: v\r\n"));
            }
            a.push_str("\r\n");
            let _ = s.write_all(a.as_bytes());
        }
    });
    addr
}

fn maxhdr_cfg(k: &Path, bind: &str, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n    tune.http.maxhdr 5\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    server s {o}\n",
        k.display()
    )
}

/// `tune.http.maxhdr 5`: four fields pass, a fifth is refused, 400 in a
/// request and 502 in a response (HAProxy counts the start line, not a
/// `Connection: close`).
#[test]
fn maxhdr_bounds_request_and_response_fields() {
    let o = fields_origin();
    let statuses = |fe: SocketAddr| {
        let req = |fields: usize, path: &str| {
            let mut r = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
            for i in 2..fields {
                r.push_str(&format!("x-q{i}: v\r\n"));
            }
            r.push_str("\r\n");
            raw(fe, r.as_bytes()).map_or(0, |r| r.status)
        };
        // `Connection: close` is not counted (HAProxy's parser drops it).
        [req(5, "/r1"), req(6, "/r1"), req(2, "/r4"), req(2, "/r5")]
    };
    let (ebb, _s) = ebb_with_admin("maxhdr", |k, b| maxhdr_cfg(k, b, o));
    let ours = statuses(ebb.addr());
    assert_eq!(ours, [200, 400, 200, 502]);
    drop(ebb);
    if let Some((_h, fe)) = haproxy_beside("maxhdr", |k, b| maxhdr_cfg(k, b, o)) {
        assert_eq!(statuses(fe), ours);
    }
}

/// `tune.http.maxhdr` out of HAProxy's range is refused, and so is a
/// count past what ebb's parser keeps.
#[test]
fn maxhdr_out_of_range_is_refused() {
    let cfg = |v: &str| format!("global\n    tune.http.maxhdr {v}\n");
    refused(
        "maxhdr-refused",
        &[
            (cfg("0"), "f0.cfg:2: 'tune.http.maxhdr'"),
            (cfg("32768"), "f1.cfg:2: 'tune.http.maxhdr'"),
            (
                cfg("1000"),
                "f2.cfg:2: 'tune.http.maxhdr' above 257 is not supported by ebb",
            ),
        ],
    );
}

fn prefer_last_cfg(k: &Path, bind: &str, reuse: &str, a: SocketAddr, b: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    balance roundrobin\n    option prefer-last-server\n    http-reuse {reuse}\n\
         \x20   server a {a}\n    server b {b}\n",
        k.display()
    )
}

/// `option prefer-last-server`: a keep-alive client's requests stay on
/// the server of its private connection (`http-reuse never`); with
/// `http-reuse safe` the connection is shared, not the client's, and
/// round robin goes on, as HAProxy 2.6 does.
#[test]
fn prefer_last_server_keeps_a_client_on_its_private_connection() {
    let a = Origin::start("A", Mode::Ok);
    let b = Origin::start("B", Mode::Ok);
    let served = |fe: SocketAddr| {
        let mut c = Client::connect(fe);
        (0..4)
            .map(|i| {
                c.send(format!("GET /{i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
                let r = c.read_resp();
                assert_eq!(r.status, 200);
                r.text().split(' ').next().unwrap_or("?").to_string()
            })
            .collect::<Vec<_>>()
            .concat()
    };
    let mut ours = Vec::new();
    for reuse in ["never", "safe"] {
        let (ebb, _s) = ebb_with_admin("prefer-last", |k, bd| {
            prefer_last_cfg(k, bd, reuse, a.addr, b.addr)
        });
        ours.push(served(ebb.addr()));
    }
    assert_eq!(ours, ["AAAA", "ABAB"]);
    for (i, reuse) in ["never", "safe"].iter().enumerate() {
        let hap = haproxy_beside("prefer-last", |k, bd| {
            prefer_last_cfg(k, bd, reuse, a.addr, b.addr)
        });
        if let Some((_h, fe)) = hap {
            assert_eq!(served(fe), ours[i], "http-reuse {reuse}");
        }
    }
}

fn rate_cfg(k: &Path, bind: &str, kw: &str) -> String {
    // `rate-limit sessions` belongs to the frontend (here from its
    // defaults); the others to `global`.
    let (g, d) = if kw.starts_with("rate-limit") {
        (String::new(), format!("    {kw} 5\n"))
    } else {
        (format!("    {kw} 5\n"), String::new())
    };
    format!(
        "global\n    stats socket {} level admin\n{g}\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n{d}\
         frontend fe\n    bind {bind}\n    http-request return status 200 content-type text/plain string ok\n\
         frontend other\n    rate-limit sessions 0\n    bind 127.0.0.1:{}\n    http-request return status 200 content-type text/plain string ok\n",
        k.display(),
        free_port()
    )
}

/// `maxconnrate 5`, `maxsessrate 5` and a frontend's `rate-limit sessions
/// 5`: 15 connections one after the other are all served (the listener
/// pauses, it does not refuse), and they take more than a second (at most
/// 5 a second, with the previous second counted as HAProxy counts it,
/// make them take two). `show stat` shows a frontend's limit (`rate_lim`;
/// 0 for none), `show info` the process's (`ConnRateLimit`,
/// `SessRateLimit`).
#[test]
fn conn_and_sess_rates_pause_accepting() {
    let run = |fe: SocketAddr| {
        let t = std::time::Instant::now();
        for i in 0..15 {
            let r = get(fe, &format!("/{i}"));
            assert_eq!(r.status, 200);
        }
        t.elapsed()
    };
    let rate_lim = |sock: &Path| -> Vec<String> {
        let csv = cli_cmd(sock, "show stat -1 1 -1");
        let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let col = head.iter().position(|h| *h == "rate_lim").unwrap();
        csv.lines()
            .skip(1)
            .filter(|l| !l.is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                format!("{}={}", f[0], f[col])
            })
            .chain(
                cli_cmd(sock, "show info")
                    .lines()
                    .filter(|l| l.starts_with("ConnRateLimit:") || l.starts_with("SessRateLimit:"))
                    .map(str::to_string),
            )
            .collect()
    };
    for kw in ["maxconnrate", "maxsessrate", "rate-limit sessions"] {
        let (ebb, sock) = ebb_with_admin("rate", |k, b| rate_cfg(k, b, kw));
        let took = run(ebb.addr());
        assert!(took >= std::time::Duration::from_secs(1), "{kw}: {took:?}");
        let lim = rate_lim(&sock);
        drop(ebb);
        if let Some((h, fe)) = haproxy_beside("rate", |k, b| rate_cfg(k, b, kw)) {
            let took = run(fe);
            assert!(
                took >= std::time::Duration::from_secs(1),
                "haproxy {kw}: {took:?}"
            );
            assert_eq!(lim, rate_lim(&h.sock), "{kw}");
        }
        let want = if kw.starts_with("rate-limit") {
            "5"
        } else {
            "0"
        };
        let conn = if kw == "maxconnrate" { "5" } else { "0" };
        let sess = if kw == "maxsessrate" { "5" } else { "0" };
        assert_eq!(
            lim,
            [
                format!("fe={want}"),
                "other=0".to_string(),
                format!("ConnRateLimit: {conn}"),
                format!("SessRateLimit: {sess}")
            ],
            "{kw}"
        );
    }
}

fn disabled_cfg(k: &Path, bind: &str, off: u16, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    disabled\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend off\n    bind 127.0.0.1:{off}\n    default_backend be\n\
         frontend on\n    enabled\n    bind {bind}\n    default_backend be\n\
         backend be\n    enabled\n    server s {o}\n\
         listen lst\n    bind 127.0.0.1:{}\n    server s {o}\n",
        k.display(),
        off + 1
    )
}

/// `disabled` (here from `defaults`) keeps a proxy from starting: its
/// binds are not opened; `enabled` starts one all the same. A disabled
/// proxy is not in `show stat` (nor on the stats page, which lists the
/// same rows): HAProxy 2.6 skips it (`STOP` is a proxy stopped at run
/// time); it still takes its id, the next ones numbered after it.
#[test]
fn disabled_proxies_open_no_bind() {
    let o = Origin::start("o", Mode::Ok);
    let check = |fe: SocketAddr, off: u16, sock: &Path| {
        assert_eq!(get(fe, "/").status, 200);
        for p in [off, off + 1] {
            let c = std::net::TcpStream::connect(("127.0.0.1", p));
            assert!(c.is_err(), "port {p} of a disabled proxy is open");
        }
        let stat = cli_cmd(sock, "show stat");
        // Each proxy's name and id (`iid`): the disabled `off` declared
        // first takes id 2, as in HAProxy.
        let mut rows: Vec<(&str, &str)> = stat
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                Some((*f.first()?, *f.get(27)?))
            })
            .collect();
        rows.dedup();
        assert_eq!(rows, [("on", "3"), ("be", "4")], "{stat}");
    };
    let off = free_port();
    let (ebb, s) = ebb_with_admin("disabled", |k, b| disabled_cfg(k, b, off, o.addr));
    check(ebb.addr(), off, &s);
    drop(ebb);
    let off = free_port();
    if let Some((h, fe)) = haproxy_beside("disabled", |k, b| disabled_cfg(k, b, off, o.addr)) {
        check(fe, off, &h.sock);
    }
}

fn to_disabled_cfg(k: &Path, bind: &str, udp: SocketAddr, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n    log {udp} local0\n\
         defaults\n    mode http\n    log global\n    option httplog\n\
         \x20   timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    use_backend lst if {{ path /l }}\n    default_backend off\n\
         backend off\n    disabled\n    http-request return status 200 content-type text/plain string rules\n\
         \x20   server s {o}\n\
         listen lst\n    disabled\n    bind 127.0.0.1:1\n    server s {o}\n",
        k.display()
    )
}

/// A frontend routing to a `disabled` backend (or listen) starts, as in
/// HAProxy, which never sets such a proxy up: neither its rules nor its
/// servers are used, a request routed there gets 503, logged
/// `fe off/<NOSRV> -1/-1/-1/-1/0 503 217 - - SC--` (the size is not
/// compared: ebb's own answers carry `Date` and `Server`), and the
/// connection stays open for the next one.
#[test]
fn a_disabled_backend_answers_503() {
    let o = Origin::start("o", Mode::Ok);
    let (udp, u) = syslog_udp();
    let check = |fe: SocketAddr| {
        let mut c = Client::connect(fe);
        let mut lines = Vec::new();
        for (path, be) in [("/", "off"), ("/l", "lst")] {
            c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
            let r = c.read_resp();
            assert_eq!(r.status, 503, "{path}");
            let f = next_fields(&udp);
            assert_eq!(f[1], format!("{be}/<NOSRV>"), "{f:?}");
            lines.push((f[2].clone(), f[3].clone(), f[7].clone()));
        }
        lines
    };
    let (ebb, _s) = ebb_with_admin("to-disabled", |k, b| to_disabled_cfg(k, b, u, o.addr));
    let ours = check(ebb.addr());
    let line = ("-1/-1/-1/-1/0".into(), "503".into(), "SC--".into());
    assert_eq!(ours, [line.clone(), line]);
    assert!(o.heads.lock().unwrap().is_empty());
    drop(ebb);
    if let Some((_h, fe)) = haproxy_beside("to-disabled", |k, b| to_disabled_cfg(k, b, u, o.addr)) {
        assert_eq!(check(fe), ours);
    }
}

/// Arguments after `disabled` are refused.
#[test]
fn disabled_takes_no_argument() {
    let head = "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n";
    refused(
        "disabled-refused",
        &[(
            format!("{head}backend be\n    disabled now\n"),
            "f0.cfg:7: 'disabled' takes no argument",
        )],
    );
}

/// `quiet` in `global` is `-q`: `-c` says nothing of a valid
/// configuration, nor of a refused one (the exit code alone tells), and a
/// warning at start is not printed. Side by side with HAProxy.
#[test]
fn quiet_says_nothing() {
    let d = scratch("quiet");
    let head = "global\n    quiet\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n";
    let port = free_port();
    let good = format!(
        "{head}frontend fe\n    bind 127.0.0.1:{port}\n    http-request return status 200\n"
    );
    let bad = format!("{good}    no-such-keyword\n");
    for (name, text, want) in [("good.cfg", &good, 0), ("bad.cfg", &bad, 1)] {
        std::fs::write(d.join(name), text).unwrap();
        let (rc, out, err) = run_ebb(&["-c", "-f", name], &d);
        assert_eq!((rc, out.as_str(), err.as_str()), (want, "", ""), "{name}");
        // Without `quiet` ebb speaks.
        std::fs::write(d.join("loud.cfg"), text.replace("    quiet\n", "")).unwrap();
        let (rc, out, err) = run_ebb(&["-c", "-f", "loud.cfg"], &d);
        assert_eq!(rc, want);
        assert!(!(out + &err).is_empty(), "{name}");
        if have("haproxy") {
            let o = std::process::Command::new("haproxy")
                .args(["-c", "-f", name])
                .current_dir(&d)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(want), "haproxy {name}");
            assert!(
                o.stdout.is_empty() && o.stderr.is_empty(),
                "haproxy {name}: {o:?}"
            );
        }
    }
    // Running: no `listening on` or `ebb: ready` line either.
    let child = std::process::Command::new(EBB)
        .args(["-f", "good.cfg"])
        .current_dir(&d)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the listener", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert_eq!(
        get(format!("127.0.0.1:{port}").parse().unwrap(), "/").status,
        200
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
}

/// The lines of `/proc/PID/limits` for the core and file sizes, and the
/// owner of `/proc/PID/status` (root for a process that is not dumpable).
fn dump_state(pid: u32) -> (Vec<String>, u32) {
    use std::os::unix::fs::MetadataExt;
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let lines = limits
        .lines()
        .filter(|l| l.starts_with("Max core file size") || l.starts_with("Max file size"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let owner = std::fs::metadata(format!("/proc/{pid}/status"))
        .unwrap()
        .uid();
    (lines, owner)
}

/// `set-dumpable` after `user nobody`: the process is dumpable again (its
/// /proc files belong to nobody, not root) and the core and file size
/// limits (here a soft core limit of 0) are unlimited; without it neither.
/// Side by side with HAProxy. Needs root (to switch users).
#[test]
fn set_dumpable_reenables_core_dumps() {
    // `id -u [USER]`: a user's id, or this process's.
    let uid = |who: &[&str]| -> Option<u32> {
        let o = std::process::Command::new("id")
            .arg("-u")
            .args(who)
            .output()
            .ok()?;
        String::from_utf8_lossy(&o.stdout).trim().parse().ok()
    };
    if uid(&[]) != Some(0) {
        println!("not root: cannot switch users, skipped");
        return;
    }
    let Some(nobody) = uid(&["nobody"]) else {
        println!("no user nobody: skipped");
        return;
    };
    let d = scratch("dumpable");
    let mut progs = vec![EBB.to_string()];
    if have("haproxy") {
        progs.push("haproxy".to_string());
    }
    for prog in &progs {
        for on in [true, false] {
            let port = free_port();
            let cfg = format!(
                "global\n    user nobody\n{}defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
                 frontend fe\n    bind 127.0.0.1:{port}\n    http-request return status 200\n",
                if on { "    set-dumpable\n" } else { "" }
            );
            std::fs::write(d.join("d.cfg"), cfg).unwrap();
            let mut child = std::process::Command::new("sh")
                .args(["-c", "ulimit -S -c 0; exec \"$0\" -db -f d.cfg", prog])
                .current_dir(&d)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            // An answer, not a connect: both bind before they switch
            // users and set the limits, and serve after (a state read
            // once the listener took a connection could be root's).
            wait_until("an answer", || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok_and(|s| {
                    let mut c = Client::from_stream(s);
                    c.send(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                    c.read_resp_opt(false).is_some_and(|r| r.status == 200)
                })
            });
            let (limits, owner) = dump_state(child.id());
            let _ = child.kill();
            let _ = child.wait();
            if on {
                assert_eq!(owner, nobody, "{prog}");
                assert_eq!(
                    limits,
                    [
                        "Max file size unlimited unlimited bytes",
                        "Max core file size unlimited unlimited bytes"
                    ],
                    "{prog}"
                );
            } else {
                assert_eq!(owner, 0, "{prog}");
                assert!(
                    limits[1].starts_with("Max core file size 0 "),
                    "{prog}: {limits:?}"
                );
            }
        }
    }
}

fn pretend_cfg(k: &Path, bind: &str, opts: &str, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n{opts}    server s {o}\n",
        k.display()
    )
}

/// `option http-pretend-keepalive` with `http-server-close`: the requests
/// a server gets say nothing of the close (an HTTP/1.0 one asks for
/// keep-alive), and each server connection still closes after its
/// answer, the client's staying open. Without the option the server is
/// told `Connection: close` (an HTTP/1.1 request; an HTTP/1.0 one closes
/// anyway and is told nothing). Side by side with HAProxy.
#[test]
fn pretend_keepalive_hides_the_close_from_the_server() {
    let o = Origin::start("o", Mode::Ok);
    let run = |fe: SocketAddr| -> (Vec<Vec<String>>, usize) {
        o.heads.lock().unwrap().clear();
        let before = o.conns.load(std::sync::atomic::Ordering::SeqCst);
        let mut c = Client::connect(fe);
        for v in ["1.1", "1.0", "1.1"] {
            let keep = if v == "1.0" {
                "Connection: keep-alive\r\n"
            } else {
                ""
            };
            c.send(format!("GET / HTTP/{v}\r\nHost: x\r\n{keep}\r\n").as_bytes());
            assert_eq!(c.read_resp().status, 200, "HTTP/{v}");
        }
        let conns = o.conns.load(std::sync::atomic::Ordering::SeqCst) - before;
        (fields_seen(&o, "connection"), conns)
    };
    let close = "    option http-server-close\n";
    let pretend = "    option http-server-close\n    option http-pretend-keepalive\n";
    let mut ours = Vec::new();
    for opts in [close, pretend] {
        let (ebb, _s) = ebb_with_admin("pretend", |k, b| pretend_cfg(k, b, opts, o.addr));
        ours.push(run(ebb.addr()));
    }
    let none: Vec<String> = Vec::new();
    let ka = vec!["connection: keep-alive".to_string()];
    let cl = vec!["connection: close".to_string()];
    assert_eq!(
        ours[1],
        (vec![none.clone(), ka, none.clone()], 3),
        "pretend"
    );
    // An HTTP/1.0 request closes by default: nothing is said (HAProxy).
    assert_eq!(
        ours[0],
        (vec![cl.clone(), none.clone(), cl], 3),
        "server-close"
    );
    for (i, opts) in [close, pretend].iter().enumerate() {
        if let Some((_h, fe)) = haproxy_beside("pretend", |k, b| pretend_cfg(k, b, opts, o.addr)) {
            assert_eq!(run(fe), ours[i], "haproxy: {opts}");
        }
    }
}

/// A server that answers a chunked request chunk by chunk: the head at
/// once, then each chunk of the request echoed as it arrives.
fn interactive_server() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let head = read_head(&mut s);
                let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                    return;
                };
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
                // Body bytes read with the head.
                let _ = s.write_all(&head[end + 4..]);
                // Echo every byte of the body as it comes (the chunk
                // framing included: the client sends one chunk at a time
                // and the echo is framed the same).
                let mut buf = [0u8; 4096];
                loop {
                    match s.read_retry(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                            if buf[..n].ends_with(b"0\r\n\r\n") {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

/// `option http-no-delay`: an exchange whose request and answer bodies
/// interleave goes through, each piece forwarded as it comes (the client
/// sends its next chunk only once the echo of the previous one came
/// back, so a proxy holding either side back would never finish). ebb
/// holds nothing back in any case; the option is accepted (frontend and
/// backend) and changes nothing. Side by side with HAProxy.
#[test]
fn http_no_delay_exchanges_interleave() {
    let srv = interactive_server();
    let cfg = |k: &Path, b: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
             frontend fe\n    option http-no-delay\n    bind {b}\n    default_backend be\n\
             backend be\n    option http-no-delay\n    server s {srv}\n",
            k.display()
        )
    };
    let run = |fe: SocketAddr| {
        let mut s = std::net::TcpStream::connect(fe).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        for i in 0..5 {
            let piece = format!("ping{i}");
            s.write_all(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes())
                .unwrap();
            while !String::from_utf8_lossy(&got).contains(&piece) {
                let n = s.read_retry(&mut buf).expect("the echo of the last chunk");
                assert_ne!(n, 0, "closed before {piece}");
                got.extend_from_slice(&buf[..n]);
            }
        }
        s.write_all(b"0\r\n\r\n").unwrap();
        while !got.ends_with(b"0\r\n\r\n") {
            let n = s.read_retry(&mut buf).expect("the end of the answer");
            assert_ne!(n, 0);
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got.starts_with(b"HTTP/1.1 200"), "{got:?}");
    };
    let (ebb, _s) = ebb_with_admin("nodelay", cfg);
    run(ebb.addr());
    if let Some((_h, fe)) = haproxy_beside("nodelay", cfg) {
        run(fe);
    }
}

/// `option forceclose` and `option http_proxy`, gone from HAProxy before
/// 2.6, are refused with HAProxy 2.6's own words (and haproxy refuses
/// them too).
#[test]
fn removed_options_are_refused_with_haproxys_words() {
    let dir = scratch("removed-options");
    for (opt, words) in [
        (
            "forceclose",
            "option 'forceclose' is not supported any more since HAProxy 2.0, please just remove it, or use 'option httpclose' if absolutely needed.",
        ),
        (
            "http_proxy",
            "option 'http_proxy' is not supported any more since HAProxy 2.5. This option stopped working in HAProxy 1.9 and usually had nasty side effects. It can be more reliably implemented with combinations of 'http-request set-dst' and 'http-request set-uri', and even 'http-request do-resolve' if DNS resolution is desired.",
        ),
    ] {
        // (`-c` binds nothing: the fixed port is never used.)
        let cfg = format!(
            "defaults\n mode http\n timeout client 1s\n timeout server 1s\n timeout connect 1s\nlisten a\n bind 127.0.0.1:19830\n option {opt}\n server s 127.0.0.1:1\n"
        );
        assert_refused(&dir, "o.cfg", &cfg, &format!("o.cfg:8: {words}"), true);
    }
}
