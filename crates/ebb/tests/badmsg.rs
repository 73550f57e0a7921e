//! `option accept-invalid-http-request`, `option accept-invalid-http-response`
//! and the CLI's `show errors`, side by side with HAProxy 2.6 where it is
//! installed: each relaxation refused without the option and forwarded
//! with it (the server's view compared), and the captures printed as
//! HAProxy prints them. Real binary on loopback, real clients.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::origin::{read_head, serve_each};
use common::{cli_cmd, cli_cmd_lossy, free_port, haproxy_with, response_len, scratch, Ebb, Hap};

/// Sends `req` on a new connection to `a` and reads one answer: to its
/// end (its length, or the close).
fn exchange(a: SocketAddr, req: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let _ = s.write_all(req);
    let mut out = Vec::new();
    let mut b = [0u8; 4096];
    while response_len(&out, false).is_none_or(|n| out.len() < n) {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&b[..n]),
        }
    }
    out
}

/// An origin that keeps the last request head it read and answers each
/// with the bytes the test set, then closes.
struct Origin {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<u8>>>,
    answer: Arc<Mutex<Vec<u8>>>,
}

impl Origin {
    fn start() -> Origin {
        let got = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(Mutex::new(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".to_vec(),
        ));
        let (g, a) = (Arc::clone(&got), Arc::clone(&answer));
        let addr = serve_each(move |mut c| {
            let Some(head) = read_head(&mut c) else {
                return;
            };
            *g.lock().unwrap() = head;
            let out = a.lock().unwrap().clone();
            let _ = c.write_all(&out);
        });
        Origin { addr, got, answer }
    }

    fn answer(&self, b: &[u8]) {
        *self.answer.lock().unwrap() = b.to_vec();
    }

    /// The last head read, lower-cased (HAProxy sends field names in
    /// lower case, ebb as they came), and forgets it.
    fn take(&self) -> String {
        let g = std::mem::take(&mut *self.got.lock().unwrap());
        String::from_utf8_lossy(&g).to_lowercase()
    }
}

/// A strict frontend (`strict` to backend `bs`) and a relaxed one (`lax`,
/// `option accept-invalid-http-request`, to `bl`, which has `option
/// accept-invalid-http-response`), both to `origin`; `binds` replace
/// `BIND1` and `BIND2`.
fn config(origin: SocketAddr, sock: &Path) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\
         frontend strict\n    bind BIND1\n    default_backend bs\n\
         frontend lax\n    bind BIND2\n    option accept-invalid-http-request\n    default_backend bl\n\
         backend bs\n    server s1 {origin}\n\
         backend bl\n    option accept-invalid-http-response\n    server s2 {origin}\n",
        sock.display()
    )
}

/// ebb on [`config`] (two frontends) and its admin socket.
fn ebb(name: &str, origin: SocketAddr) -> (Ebb, std::path::PathBuf) {
    let sock = scratch(name).join("admin.sock");
    let cfg = config(origin, &sock)
        .replace("BIND1", "BIND")
        .replace("BIND2", "BIND");
    (Ebb::start(&cfg), sock)
}

/// haproxy on the same configuration: the process and its two addresses.
fn haproxy(name: &str, origin: SocketAddr) -> Option<(Hap, SocketAddr, SocketAddr)> {
    let (p1, p2) = (free_port(), free_port());
    let cfg = config(origin, Path::new("/x"))
        .replace("BIND1", &format!("127.0.0.1:{p1}"))
        .replace("BIND2", &format!("127.0.0.1:{p2}"));
    let rest = cfg.split_once("level admin\n")?.1.to_string();
    let h = haproxy_with(name, &rest)?;
    Some((
        h,
        format!("127.0.0.1:{p1}").parse().ok()?,
        format!("127.0.0.1:{p2}").parse().ok()?,
    ))
}

fn status(answer: &[u8]) -> String {
    let s = String::from_utf8_lossy(answer);
    s.split("\r\n").next().unwrap_or("").to_string()
}

/// The requests the option lets through, what ebb's server gets, and the
/// ones refused with it as without it.
#[test]
fn invalid_requests_pass_with_the_option_as_through_haproxy() {
    let o = Origin::start();
    let (e, _sock) = ebb("badreq", o.addr);
    let hap = haproxy("badreq", o.addr);
    // (request, the start of the head the server gets from ebb).
    let relaxed: &[(&[u8], &str)] = &[
        (
            b"GET /a#b HTTP/1.1\r\nHost: x\r\n\r\n",
            "get /a#b http/1.1\r\n",
        ),
        (
            b"GET /a\xe9 HTTP/1.1\r\nHost: x\r\n\r\n",
            "get /a\u{fffd} http/1.1\r\n",
        ),
        (
            b"GET /a HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n",
            "get /a http/1.1\r\nhost: x\r\nbad name: y\r\n",
        ),
        (
            b"GET /a HTTP/1.1\r\nHost: x\r\nA(b)/c: y\r\n\r\n",
            "get /a http/1.1\r\nhost: x\r\na(b)/c: y\r\n",
        ),
        (
            b"GET /a HTTP/1.1\r\nHost: x\r\nAb : y\r\n\r\n",
            "get /a http/1.1\r\nhost: x\r\nab : y\r\n",
        ),
        (
            b"GET /a HTTP/1.10\r\nHost: x\r\n\r\n",
            "get /a http/1.10\r\nhost: x\r\nconnection: keep-alive\r\n",
        ),
        (
            b"GET /a FOO\r\nHost: x\r\n\r\n",
            "get /a foo\r\nhost: x\r\nconnection: keep-alive\r\n",
        ),
        (
            b"GET /a\r\n",
            "get /a http/1.0\r\nconnection: keep-alive\r\n",
        ),
        (
            b"GET /a \r\n",
            "get /a http/1.0\r\nconnection: keep-alive\r\n",
        ),
        (
            b"GET http://a/b HTTP/1.1\r\nHost: b\r\n\r\n",
            "get http://a/b http/1.1\r\nhost: b\r\n",
        ),
    ];
    for (req, want) in relaxed {
        let what = String::from_utf8_lossy(req);
        // Refused without the option, by both.
        assert_eq!(
            status(&exchange(e.addrs[0], req)),
            "HTTP/1.1 400 Bad request",
            "{what}"
        );
        assert_eq!(o.take(), "", "{what}");
        let answer = exchange(e.addrs[1], req);
        assert_eq!(status(&answer), "HTTP/1.1 200 OK", "{what}");
        let got = o.take();
        assert!(got.starts_with(want), "{what}: {got:?}");
        if let Some((_, s, l)) = &hap {
            assert_eq!(
                status(&exchange(*s, req)),
                "HTTP/1.1 400 Bad request",
                "haproxy {what}"
            );
            assert_eq!(o.take(), "");
            assert_eq!(
                status(&exchange(*l, req)),
                "HTTP/1.1 200 OK",
                "haproxy {what}"
            );
            assert_eq!(o.take(), got, "haproxy {what}");
        }
    }
    // Refused with the option too: a control byte in the target, an empty
    // field name, HTTP/0.9 with another method than GET, a Content-Length
    // twice, a control in a value (HAProxy forwards that one: ebb's rule),
    // a line ending in LF alone (HAProxy takes it: ebb's rule), and CR or
    // NUL in a field name (HAProxy's option takes both and sends them on;
    // ebb keeps refusing them).
    let refused: &[(&[u8], bool)] = &[
        (b"GET /a\x01 HTTP/1.1\r\nHost: x\r\n\r\n", true),
        (b"GET /a HTTP/1.1\r\nHost: x\r\n: y\r\n\r\n", true),
        (b"POST /a\r\n", true),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            true,
        ),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n", false),
        (b"GET / HTTP/1.1\nHost: x\n\n", false),
        (b"GET / HTTP/1.1\r\nHost: x\r\nA\rb: y\r\n\r\n", false),
        (b"GET / HTTP/1.1\r\nHost: x\r\nA\x00b: y\r\n\r\n", false),
    ];
    for (req, haproxy_refuses) in refused {
        let what = String::from_utf8_lossy(req);
        assert_eq!(
            status(&exchange(e.addrs[1], req)),
            "HTTP/1.1 400 Bad request",
            "{what}"
        );
        assert_eq!(o.take(), "", "{what}");
        if let (Some((_, _, l)), true) = (&hap, haproxy_refuses) {
            assert_eq!(
                status(&exchange(*l, req)),
                "HTTP/1.1 400 Bad request",
                "haproxy {what}"
            );
            assert_eq!(o.take(), "");
        }
    }
}

/// The answers `option accept-invalid-http-response` lets through, and
/// the versions HAProxy's strict parser takes.
#[test]
fn invalid_responses_pass_with_the_option_as_through_haproxy() {
    let o = Origin::start();
    let (e, _sock) = ebb("badresp", o.addr);
    let hap = haproxy("badresp", o.addr);
    let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    // (answer, status line without the option, with it).
    let cases: &[(&[u8], &str, &str)] = &[
        (
            b"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 502 Bad Gateway",
            "HTTP/1.1 200 OK",
        ),
        (
            b"HTTP/1.10 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 502 Bad Gateway",
            "HTTP/1.10 200 OK",
        ),
        (
            b"FOO/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 502 Bad Gateway",
            "FOO/1.1 200 OK",
        ),
        (
            b"HTTP/2 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 502 Bad Gateway",
            "HTTP/2 200 OK",
        ),
        // HAProxy's strict test is 8 bytes ending `/` DIGIT `.` DIGIT.
        (
            b"HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 200 OK",
            "HTTP/1.1 200 OK",
        ),
        (
            b"FOOO/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "FOOO/1.0 200 OK",
            "FOOO/1.0 200 OK",
        ),
        (
            b"HTTP/1.1 200 OK\r\n: x\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 502 Bad Gateway",
            "HTTP/1.1 502 Bad Gateway",
        ),
        (
            b"http/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 502 Bad Gateway",
            "HTTP/1.1 502 Bad Gateway",
        ),
    ];
    for (answer, strict, lax) in cases {
        let what = String::from_utf8_lossy(answer);
        o.answer(answer);
        assert_eq!(&status(&exchange(e.addrs[0], req)), strict, "{what}");
        let got = exchange(e.addrs[1], req);
        assert_eq!(&status(&got), lax, "{what}");
        if lax.contains("200") {
            assert!(got.ends_with(b"\r\n\r\nok"), "{what}");
        }
        if let Some((_, s, l)) = &hap {
            assert_eq!(&status(&exchange(*s, req)), strict, "haproxy {what}");
            assert_eq!(&status(&exchange(*l, req)), lax, "haproxy {what}");
        }
    }
}

/// `show errors` as HAProxy's: its lines but the dates, the client's
/// port, HAProxy's H1 flags (ebb has none of them) and where its buffer
/// wraps (ebb's does not).
fn comparable(show: &str) -> Vec<String> {
    show.lines()
        .filter(|l| !l.starts_with("  H1 "))
        .map(|l| {
            let l = match (l.find('['), l.find(']')) {
                (Some(a), Some(b)) if a < b => format!("{}[DATE]{}", &l[..a], &l[b + 1..]),
                _ => l.to_string(),
            };
            let l = match l.find("src 127.0.0.1:") {
                Some(i) => format!("{}src 127.0.0.1:PORT", &l[..i]),
                None => l,
            };
            match l.find(", wraps at ") {
                Some(i) => {
                    let rest = &l[i + 11..];
                    let tail = rest.find(',').map_or("", |j| &rest[j..]);
                    format!("{}, wraps at W{tail}", &l[..i])
                }
                None => l,
            }
        })
        .collect()
}

/// A refused request, a request the option let through and the answer
/// the option let through: `show errors` prints the three as haproxy
/// does, the filters too.
#[test]
fn show_errors_is_haproxys() {
    let o = Origin::start();
    let bad_answer =
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    o.answer(bad_answer);
    let run = |strict: SocketAddr, lax: SocketAddr| {
        let long = format!(
            "GET /{} HTTP/1.1\r\nHost: x\r\nBad\\Name: \x1b\t\r\n\r\n",
            "a".repeat(90)
        );
        assert_eq!(
            status(&exchange(strict, long.as_bytes())),
            "HTTP/1.1 400 Bad request"
        );
        assert_eq!(
            status(&exchange(lax, b"GET /a#b HTTP/1.1\r\nHost: x\r\n\r\n")),
            "HTTP/1.1 200 OK"
        );
        // Without a byte only the option lets through, the request is
        // not kept (its answer, invalid, is: the event after the first
        // answer's, which it replaces).
        assert_eq!(
            status(&exchange(lax, b"GET /a FOO\r\nHost: x\r\n\r\n")),
            "HTTP/1.1 200 OK"
        );
    };
    let (e, sock) = ebb("showerr", o.addr);
    assert!(cli_cmd(&sock, "show errors").contains(": 0\n"));
    run(e.addrs[0], e.addrs[1]);
    let show = cli_cmd(&sock, "show errors");
    let ours = comparable(&show);
    let want = [
        "Total events captured on [DATE] : 4",
        " ",
        "[DATE] frontend strict (#2): invalid request",
        "  backend <NONE> (#-1), server <NONE> (#-1), event #0, src 127.0.0.1:PORT",
        "  buffer starts at 0 (including 0 out), 16253 free,",
        "  len 131, wraps at W, error at position 118",
        "  ",
        "  00000  GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "  00070+ aaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\\r\\n",
        "  00106  Host: x\\r\\n",
        "  00115  Bad\\\\Name: \\e\\t\\r\\n",
        "  00129  \\r\\n",
        " ",
        "[DATE] frontend lax (#3): invalid request",
        "  backend <NONE> (#-1), server <NONE> (#-1), event #1, src 127.0.0.1:PORT",
        "  buffer starts at 0 (including 0 out), 16354 free,",
        "  len 30, wraps at W, error at position 6",
        "  ",
        "  00000  GET /a#b HTTP/1.1\\r\\n",
        "  00019  Host: x\\r\\n",
        "  00028  \\r\\n",
        " ",
        "[DATE] backend bl (#5): invalid response",
        "  frontend lax (#3), server s2 (#1), event #3, src 127.0.0.1:PORT",
        "  buffer starts at 0 (including 0 out), 16312 free,",
        "  len 72, wraps at W, error at position 20",
        "  ",
        "  00000  HTTP/1.1 200 OK\\r\\n",
        "  00017  Bad Name: x\\r\\n",
        "  00030  Content-Length: 2\\r\\n",
        "  00049  Connection: close\\r\\n",
        "  00068  \\r\\n",
        "  00070  ok",
        "",
    ];
    assert_eq!(ours, want, "{show}");
    let cmds = [
        "show errors lax",
        "show errors 3 request",
        "show errors 5",
        "show errors -1 response",
        "show errors 2 response",
        "show errors 42",
        "show errors nosuch",
    ];
    let answers: Vec<Vec<String>> = cmds
        .iter()
        .map(|c| comparable(&cli_cmd(&sock, c)))
        .collect();
    // `lax` (#3): its request, and the answer whose frontend it is.
    assert_eq!(answers[0].len(), 23, "{:?}", answers[0]);
    assert_eq!(answers[5], ["Total events captured on [DATE] : 4", ""]);
    assert_eq!(answers[6], ["No such proxy.", ""]);
    let Some((h, s, l)) = haproxy("showerr", o.addr) else {
        return;
    };
    run(s, l);
    assert_eq!(comparable(&cli_cmd_lossy(&h.sock, "show errors")), want);
    for (c, ours) in cmds.iter().zip(&answers) {
        assert_eq!(&comparable(&cli_cmd_lossy(&h.sock, c)), ours, "{c}");
    }
}
