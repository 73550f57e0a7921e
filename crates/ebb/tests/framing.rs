//! Request and response framing as HAProxy 2.6 accepts it (reg-test
//! http-messaging/http_transfer_encoding): Transfer-Encoding wins over
//! Content-Length and closes the connection after the exchange, as it
//! does in an HTTP/1.0 message; a coding other than chunked is 400 or
//! 422 in a request, 502 in an answer. Each case runs through ebb and,
//! when installed, haproxy, with the same results.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};

use common::*;

/// An origin on a free port running `serve` on each connection.
fn origin(serve: fn(TcpStream, &'static [u8]), arg: &'static [u8]) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || serve(s, arg));
        }
    });
    a
}

/// Reads one request head and answers `answer` as is, then closes.
fn answer_once(mut s: TcpStream, answer: &'static [u8]) {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read_retry(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
    let _ = s.write_all(answer);
}

fn raw_origin(answer: &'static [u8]) -> SocketAddr {
    origin(answer_once, answer)
}

/// The proxy section for both programs: `fe` answers 200 itself, `be`
/// forwards to `origin`.
fn cfg(fe: &str, be: &str, origin: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         listen fe\n    bind {fe}\n    http-request return status 200\n\
         listen be\n    bind {be}\n    server s {origin}\n"
    )
}

/// What a client sees: the status, the answer's `Connection` and
/// `Transfer-Encoding`, and whether the connection closed after it.
fn exchange(a: SocketAddr, req: &[u8]) -> (u16, String, String, bool) {
    let mut c = Client::connect(a);
    c.send(req);
    let r = c.read_resp();
    let h = |n: &str| r.header(n).unwrap_or("-").to_string();
    (
        r.status,
        h("connection"),
        h("transfer-encoding"),
        c.closed(),
    )
}

fn cases(fe: SocketAddr, be: SocketAddr) -> Vec<(u16, String, String, bool)> {
    let reqs: &[&[u8]] = &[
        // Both framings: chunked wins, then the connection closes.
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 31\r\n\r\n0\r\n\r\n",
        // Transfer-Encoding in HTTP/1.0: accepted, then closed.
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        // chunked twice, a coding after it, none at all: 400.
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n",
        // Another coding before chunked: 422.
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    ];
    let mut out: Vec<_> = reqs.iter().map(|r| exchange(fe, r)).collect();
    // An answer framed both ways, or chunked in HTTP/1.0: chunked to the
    // client, and the client connection closes too (the origin answers
    // the next requests the same way).
    out.push(exchange(be, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"));
    out
}

#[test]
fn transfer_encoding_as_haproxy() {
    for answer in [
        &b"HTTP/1.0 200 Ok\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"[..],
        b"HTTP/1.1 200 Ok\r\nTransfer-Encoding: chunked\r\nContent-Length: 30\r\n\r\n0\r\n\r\nResponse splitting attach",
    ] {
        let origin = raw_origin(Box::leak(answer.to_vec().into_boxed_slice()));
        let e = Ebb::start(&cfg("BIND", "BIND", origin));
        let ours = cases(e.addrs[0], e.addrs[1]);
        let closed = |s: u16| (s, "close".to_string(), "-".to_string(), true);
        let mut want = vec![closed(200), closed(200)];
        want.extend([closed(400), closed(400), closed(400), closed(422)]);
        want.push((200, "close".to_string(), "chunked".to_string(), true));
        assert_eq!(ours, want);
        let (pf, pb) = (free_port(), free_port());
        let hap = haproxy_with(
            "framing-hap",
            &cfg(
                &format!("127.0.0.1:{pf}"),
                &format!("127.0.0.1:{pb}"),
                origin,
            ),
        );
        if let Some(_h) = hap {
            let fe = SocketAddr::from(([127, 0, 0, 1], pf));
            let be = SocketAddr::from(([127, 0, 0, 1], pb));
            wait_until("haproxy listening", || TcpStream::connect(fe).is_ok());
            let theirs = cases(fe, be);
            // haproxy says `close` only where it closes: compare what
            // the client sees of the framing and the connection.
            let strip = |v: &[(u16, String, String, bool)]| {
                v.iter()
                    .map(|(s, _, te, c)| (*s, te.clone(), *c))
                    .collect::<Vec<_>>()
            };
            assert_eq!(strip(&theirs), strip(&ours), "haproxy differs");
        }
    }
}

/// Answers each request on the connection in HTTP/1.0, kept alive, the
/// body the request line and `Connection` field it got.
fn answer_http10(mut s: TcpStream, _: &'static [u8]) {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_string();
            got.drain(..end + 4);
            let line = head.lines().next().unwrap_or("").to_string();
            let conn = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("connection:")
                        .map(|v| v.trim().to_string())
                })
                .unwrap_or_default();
            let body = format!("{line}|{conn}");
            let r = format!(
                "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if s.write_all(r.as_bytes()).is_err() {
                return;
            }
        }
        match s.read_retry(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
}

/// One request, raw: the answer's status line, `Connection` field and
/// body, and whether a second request on the connection is answered.
fn versions(a: SocketAddr, req: &str) -> (String, String, String, bool) {
    let mut c = Client::connect(a);
    c.send(req.as_bytes());
    let r = c.read_resp();
    let conn = r.header("connection").unwrap_or("-").to_string();
    let line = format!("{} {}", r.version, r.status);
    let body = r.text();
    c.send(b"GET /again HTTP/1.1\r\nHost: h\r\n\r\n");
    let again = c.read_resp_opt(false).is_some();
    (line, conn, body, again)
}

#[test]
fn http_versions_go_on_as_haproxy_passes_them() {
    let run = |a: SocketAddr| {
        vec![
            // An HTTP/1.0 request reaches the server in HTTP/1.0, asked to
            // keep the connection.
            versions(a, "GET /v10 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
            // The server's HTTP/1.0 answer reaches the client in HTTP/1.0,
            // said kept alive.
            versions(a, "GET /v11 HTTP/1.1\r\nHost: h\r\n\r\n"),
        ]
    };
    let origin = origin(answer_http10, b"");
    let e = Ebb::start(&cfg("BIND", "BIND", origin));
    let ours = run(e.addrs[1]);
    let want = |line: &str| {
        (
            "HTTP/1.0 200".to_string(),
            "keep-alive".to_string(),
            line.to_string(),
            true,
        )
    };
    // (An HTTP/1.1 request keeps the connection without saying so.)
    let want = vec![
        want("GET /v10 HTTP/1.0|keep-alive"),
        want("GET /v11 HTTP/1.1|"),
    ];
    assert_eq!(ours, want);
    let (pf, pb) = (free_port(), free_port());
    let fe = format!("127.0.0.1:{pf}");
    if let Some(_h) = haproxy_with(
        "versions-hap",
        &cfg(&fe, &format!("127.0.0.1:{pb}"), origin),
    ) {
        let be = SocketAddr::from(([127, 0, 0, 1], pb));
        wait_until("haproxy listening", || TcpStream::connect(be).is_ok());
        let theirs = run(be);
        // haproxy names fields in lower case and says keep-alive the same
        // way: compare what the client and the server saw.
        assert_eq!(theirs, ours, "haproxy differs");
    }
}

/// Answers a head and the first bytes of a chunked body, then (after a
/// pause, when given) the rest, then closes.
fn answer_in_two(mut s: TcpStream, rest: &'static [u8]) {
    answer_once(
        s.try_clone().unwrap(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = s.write_all(rest);
}

/// The proxy section with logs to `log` (HAProxy's HTTP format).
fn logged_cfg(be: &str, origin: SocketAddr, log: SocketAddr) -> String {
    format!(
        "    log {log} local0\n\
         defaults\n    mode http\n    log global\n    option httplog\n\
         \x20   timeout client 5s\n    timeout server 5s\n    timeout connect 2s\n\
         listen be\n    bind {be}\n    server s {origin}\n"
    )
}

/// What the client got (the status, or 0 for none) and the log line's
/// `Tr`, status and termination state.
fn broken_exchange(a: SocketAddr, log: &Syslog, path: &str) -> (u16, String, String, String) {
    let mut c = Client::connect(a);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
    let status = c.read_resp_opt(false).map_or(0, |r| r.status);
    let l = log.find("access log line", |l| l.contains(&format!("GET {path} ")));
    let w: Vec<&str> = l.split_whitespace().collect();
    let i = w.iter().position(|x| x.starts_with("be/")).unwrap();
    let tr = w[i + 1].split('/').nth(3).unwrap_or("").to_string();
    (status, tr, w[i + 2].to_string(), w[i + 6].to_string())
}

/// A chunked answer whose framing breaks: in the bytes that came with
/// the head (no CRLF after a chunk's data, a size that is not hex) it is
/// a 502 logged `PH--` without `Tr` (HAProxy's parser reads them before
/// the head goes on); later, once the head went on, the client is cut,
/// logged `SD--` with the 200. As HAProxy 2.6 (compared).
#[test]
fn broken_chunks_from_the_server_as_haproxy() {
    let cases: [(&str, SocketAddr); 3] = [
        (
            "/nocrlf",
            raw_origin(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX"),
        ),
        (
            "/badsize",
            raw_origin(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\nZZ\r\n"),
        ),
        ("/late", origin(answer_in_two, b"ZZ\r\n")),
    ];
    let want = [
        (502, "-1", "502", "PH--"),
        (502, "-1", "502", "PH--"),
        (200, "", "200", "SD--"),
    ];
    let log = Syslog::new();
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for (i, (path, origin)) in cases.iter().enumerate() {
        let e = Ebb::start(&format!(
            "global\n{}",
            logged_cfg("BIND", *origin, log.addr())
        ));
        let got = broken_exchange(e.addrs[0], &log, path);
        let (st, tr, code, term) = want[i];
        assert_eq!(
            (got.0, got.2.as_str(), got.3.as_str()),
            (st, code, term),
            "{path}"
        );
        if !tr.is_empty() {
            assert_eq!(got.1, tr, "{path}");
        }
        ours.push(got);
        let pb = free_port();
        let rest = logged_cfg(&format!("127.0.0.1:{pb}"), *origin, log.addr());
        if let Some(_h) = haproxy_with("broken-chunks-hap", &rest) {
            let be = SocketAddr::from(([127, 0, 0, 1], pb));
            wait_until("haproxy listening", || TcpStream::connect(be).is_ok());
            theirs.push(broken_exchange(be, &log, path));
        }
    }
    if !theirs.is_empty() {
        let strip = |v: &[(u16, String, String, String)]| {
            v.iter()
                .map(|(s, tr, code, term)| (*s, tr == "-1", code.clone(), term.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&theirs), strip(&ours), "haproxy (left), ebb (right)");
    }
}

/// An origin that switches protocols whatever it was asked (`101`, then
/// `hello`), and what it received of each request head.
fn switching_origin() -> SocketAddr {
    raw_origin(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\nhello",
    )
}

/// What the client got: the status (0: none) and whether `hello` came
/// through the tunnel; and the log line's status and termination state.
fn upgrade_exchange(a: SocketAddr, log: &Syslog, req: &str) -> (u16, bool, String, String) {
    let mut c = Client::connect(a);
    c.send(req.as_bytes());
    let r = c.read_resp_opt(false);
    let status = r.as_ref().map_or(0, |r| r.status);
    let mut rest = c.take_buffered();
    if status == 101 {
        let mut b = [0u8; 64];
        while rest.len() < 5 {
            match c.s.read_retry(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => rest.extend_from_slice(&b[..n]),
            }
        }
    }
    let first = req.lines().next().unwrap_or("").trim_end().to_string();
    let l = log.find("access log line", |l| l.contains(&first));
    let w: Vec<&str> = l.split_whitespace().collect();
    let i = w.iter().position(|x| x.starts_with("be/")).unwrap();
    (
        status,
        rest.starts_with(b"hello"),
        w[i + 2].to_string(),
        w[i + 6].to_string(),
    )
}

/// An Upgrade request with a body (a length above 0, chunked) is no
/// upgrade, as HAProxy 2.6 reads it (its Upgrade field is dropped): the
/// server's 101 to it is a 502 `PH--`; with `Content-Length: 0` it is
/// one, tunnelled. From an HTTP/1.0 client Upgrade is ignored (RFC 9110
/// §7.8: a server MUST ignore it), so a 101 is a 502 too, where HAProxy
/// tunnels.
#[test]
fn upgrade_with_a_body_or_from_http10_is_no_upgrade() {
    let origin = switching_origin();
    let log = Syslog::new();
    let up = "Connection: Upgrade\r\nUpgrade: foo\r\n";
    let reqs = [
        format!("POST /cl HTTP/1.1\r\nHost: h\r\n{up}Content-Length: 3\r\n\r\nabc"),
        format!("POST /ch HTTP/1.1\r\nHost: h\r\n{up}Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
        format!("POST /zero HTTP/1.1\r\nHost: h\r\n{up}Content-Length: 0\r\n\r\n"),
        format!("GET /v10 HTTP/1.0\r\nHost: h\r\n{up}\r\n"),
    ];
    let e = Ebb::start(&format!(
        "global\n{}",
        logged_cfg("BIND", origin, log.addr())
    ));
    let ours: Vec<_> = reqs
        .iter()
        .map(|r| upgrade_exchange(e.addrs[0], &log, r))
        .collect();
    let no = (502, false, "502".to_string(), "PH--".to_string());
    let yes = (101, true, "101".to_string(), "----".to_string());
    assert_eq!(
        ours,
        [no.clone(), no.clone(), yes.clone(), no.clone()],
        "{ours:?}"
    );
    let pb = free_port();
    let rest = logged_cfg(&format!("127.0.0.1:{pb}"), origin, log.addr());
    if let Some(_h) = haproxy_with("upgrade-body-hap", &rest) {
        let be = SocketAddr::from(([127, 0, 0, 1], pb));
        wait_until("haproxy listening", || TcpStream::connect(be).is_ok());
        let theirs: Vec<_> = reqs.iter().map(|r| upgrade_exchange(be, &log, r)).collect();
        // The same but HTTP/1.0, which haproxy tunnels.
        assert_eq!(
            theirs,
            [no.clone(), no.clone(), yes.clone(), yes],
            "haproxy"
        );
    }
}

/// Answers `answer` to each request head on the connection (kept open:
/// a proxy's next request may come on it).
fn answer_each(mut s: TcpStream, answer: &'static [u8]) {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            got.drain(..end + 4);
            if s.write_all(answer).is_err() {
                return;
            }
        }
        match s.read_retry(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
}

/// ebb and, when installed, HAProxy (`name`), each forwarding to
/// `origin` (the `be` proxy of [`cfg`]), and the addresses to send to.
fn forwarders(
    origin: SocketAddr,
    name: &str,
) -> (Ebb, Option<Hap>, Vec<(&'static str, SocketAddr)>) {
    let e = Ebb::start(&cfg("BIND", "BIND", origin));
    let hp = free_port();
    let fe = format!("127.0.0.1:{}", free_port());
    let hap = haproxy_with(name, &cfg(&fe, &format!("127.0.0.1:{hp}"), origin));
    let mut addrs = vec![("ebb", e.addrs[1])];
    if hap.is_some() {
        let a = SocketAddr::from(([127, 0, 0, 1], hp));
        wait_until("haproxy listening", || TcpStream::connect(a).is_ok());
        addrs.push(("haproxy", a));
    }
    (e, hap, addrs)
}

/// Reads from `s` until `end` closes what came, or the connection ends.
fn read_until_end(s: &mut TcpStream, end: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !got.ends_with(end) {
        match s.read_retry(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
    got
}

/// Two `GET /` on one connection to `a`: what came for each, read until
/// it ends with `end` (or the connection closed).
fn get_twice(a: SocketAddr, end: &[u8]) -> Vec<Vec<u8>> {
    let mut s = TcpStream::connect(a).unwrap();
    (0..2)
        .map(|_| {
            s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
            read_until_end(&mut s, end)
        })
        .collect()
}

/// An answer whose lines end with a lone LF, after an interim 103 whose
/// lines do too, is taken as HAProxy 2.6 takes it (RFC 9112 §2.2 MAY),
/// and both heads reach the client written again with CRLF only: never a
/// lone LF the client might read otherwise.
#[test]
fn bare_lf_answer_heads_taken_and_written_with_crlf() {
    let origin = origin(
        answer_each,
        b"HTTP/1.1 103 Early Hints\nLink: </a>\n\n\
          HTTP/1.1 200 OK\nX-A: b\r\nContent-Length: 2\n\nok",
    );
    let (_e, _hap, addrs) = forwarders(origin, "framing-barelf-hap");
    for (who, a) in addrs {
        for (round, got) in get_twice(a, b"\r\n\r\nok").iter().enumerate() {
            let text = String::from_utf8_lossy(got);
            assert!(got.ends_with(b"\r\n\r\nok"), "{who} {round}: {text:?}");
            assert!(text.starts_with("HTTP/1.1 103 "), "{who}: {text:?}");
            assert!(text.contains("HTTP/1.1 200 OK\r\n"), "{who}: {text:?}");
            if who == "ebb" {
                let lone = got.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r');
                assert!(!lone, "a lone LF reached the client: {text:?}");
                assert!(text.contains("\r\nLink: </a>\r\n\r\n"), "{text:?}");
                assert!(text.contains("\r\nX-A: b\r\n"), "{text:?}");
            }
        }
    }
}

/// A chunked answer whose size lines (one with an extension), the line
/// ends after the chunks' data, the trailer line and the last line end
/// with a lone LF is taken, as HAProxy 2.6 takes it (`h1_parse_chunk_size`,
/// `h1_skip_chunk_crlf`), twice on one connection; ebb writes it again
/// with CRLF only (canonical chunks, the trailer kept). A request framed
/// so stays a 400 from ebb (its lines keep CRLF, as its head's), where
/// HAProxy forwards it. Before, the answer was a 502.
#[test]
fn bare_lf_chunk_lines_of_answers_taken_and_written_with_crlf() {
    let origin = origin(
        answer_each,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\nhello\n3;x=y\nabc\r\n0\nX-T: 1\n\n",
    );
    let (_e, _hap, addrs) = forwarders(origin, "framing-chunklf-hap");
    for (who, a) in addrs {
        for (round, got) in get_twice(a, b"1\r\n\r\n").iter().enumerate() {
            let text = String::from_utf8_lossy(got);
            assert!(text.starts_with("HTTP/1.1 200 "), "{who} {round}: {text:?}");
            let (_, body) = text.split_once("\r\n\r\n").unwrap();
            let mut dec = String::new();
            let mut rest = body;
            while let Some((size, after)) = rest.split_once("\r\n") {
                let n = usize::from_str_radix(size, 16).unwrap();
                if n == 0 {
                    assert_eq!(after.to_ascii_lowercase(), "x-t: 1\r\n\r\n", "{who}");
                    break;
                }
                dec.push_str(&after[..n]);
                rest = after[n..].strip_prefix("\r\n").unwrap();
            }
            assert_eq!(dec, "helloabc", "{who} {round}: {text:?}");
            let lone = got.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r');
            assert!(!lone, "{who}: a lone LF reached the client: {text:?}");
        }
        let (status, ..) = exchange(
            a,
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n",
        );
        let want = if who == "ebb" { 400 } else { 200 };
        assert_eq!(status, want, "{who}");
    }
}

/// A HEAD's answer and a 304 keep the `Content-Length` the server
/// declared, as one number: `16, 16` (a list of one length, taken from a
/// server) goes on as `16`, as HAProxy 2.6 writes it; before, it went on
/// as it came, which an HTTP/2 client refuses (found by
/// tests/garden/answers.py with HTTP/2 clients). Through ebb and HAProxy
/// beside, from HTTP/1 clients.
#[test]
fn bodyless_answers_keep_their_length_as_one_number() {
    let head = raw_origin(b"HTTP/1.1 200 OK\r\nContent-Length: 16, 16\r\n\r\n");
    let not_modified = raw_origin(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 16, 16\r\n\r\n");
    for (origin, req) in [
        (head, "HEAD / HTTP/1.1\r\nHost: h\r\n\r\n"),
        (not_modified, "GET / HTTP/1.1\r\nHost: h\r\n\r\n"),
    ] {
        let (_e, _hap, addrs) = forwarders(origin, "framing-cllist-hap");
        for (who, a) in addrs {
            let mut s = TcpStream::connect(a).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            let got = read_until_end(&mut s, b"\r\n\r\n");
            let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
            assert!(
                text.contains("\r\ncontent-length: 16\r\n"),
                "{who}: {text:?}"
            );
        }
    }
}

/// The harness's own client (tests/common) reads an answer by its
/// framing and returns at its end, the connection still open: chunked
/// with an extension and trailers, `Content-Length`, a 204, a HEAD's
/// answer, one after the other on a connection the server never closes
/// (reading to the close, as it once did, waited for the read timeout
/// and took them all for the first body); a chunked answer cut short
/// comes back as far as it came, marked broken (`read_resp` fails on it). `response_len` finds the same ends in
/// the raw bytes.
#[test]
fn the_test_client_reads_answers_by_their_framing() {
    const ANSWERS: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;x=y\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-T: v\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\
        HTTP/1.1 204 No Content\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n";
    let a = common::origin::serve_each(|mut s| {
        let head = common::origin::read_head(&mut s).unwrap_or_default();
        if head.starts_with(b"GET /cut ") {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
            return;
        }
        if head.starts_with(b"GET /bad ") {
            // A broken size line, then bytes that are not the body's.
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\nzz\r\nRAW",
            );
            return;
        }
        let _ = s.write_all(ANSWERS);
        common::origin::drain(&mut s);
    });
    let mut c = Client::connect(a);
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_resp();
    assert_eq!(r.text(), "hello, world!!!");
    assert_eq!(r.trailers, [("X-T".to_string(), "v".to_string())]);
    assert_eq!(c.read_resp().text(), "ok");
    assert_eq!(c.read_resp().status, 204);
    let r = c.read_resp_opt(true).expect("the HEAD's answer");
    assert!(r.body.is_empty());
    assert!(c.take_buffered().is_empty());
    let mut c = Client::connect(a);
    c.send(b"GET /cut HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_resp_opt(false).expect("the cut answer's head");
    assert_eq!(r.text(), "hel");
    assert_eq!(r.broken.as_deref(), Some("the chunked body was cut short"));
    let mut c = Client::connect(a);
    c.send(b"GET /bad HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_resp_opt(false).expect("the broken answer's head");
    assert_eq!(r.text(), "hel");
    assert_eq!(r.broken.as_deref(), Some("a bad chunk size line"));
    assert!(c.take_buffered().is_empty());
    // The same ends in raw bytes.
    let first = response_len(ANSWERS, false).expect("the chunked answer's end");
    assert!(ANSWERS[..first].ends_with(b"X-T: v\r\n\r\n"));
    let second = response_len(&ANSWERS[first..], false).expect("the second's end");
    assert!(ANSWERS[first..first + second].ends_with(b"ok"));
    let rest = &ANSWERS[first + second..];
    assert_eq!(response_len(rest, false), Some(27));
    assert_eq!(response_len(&rest[27..], true), Some(rest.len() - 27));
    assert_eq!(response_len(&rest[27..], false), None);
    assert_eq!(response_len(&ANSWERS[..first - 1], false), None);
}
