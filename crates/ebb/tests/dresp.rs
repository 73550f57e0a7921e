//! The `dreq` and `dresp` columns (requests and responses refused) of
//! `show stat`, beside HAProxy 2.6: an `http-response deny` and `option
//! checkcache`'s block count on the frontend, the backend and the server;
//! a response `redirect` does not; a `tcp-response content reject` counts,
//! a `silent-drop` counts as a refused request of the frontend and the
//! backend (and its client hears nothing: no reset either); a backend's
//! `http-request deny` and `reject` count on it and on the frontend.

mod common;

use common::origin::{read_head, serve_each};
use common::*;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;

/// An origin whose answer depends on the path: `/deny` and `/redir` are
/// marked for the rules by `X-Kind`, `/cookie` sets a cookie on a
/// cacheable answer (what `checkcache` blocks).
fn origin() -> SocketAddr {
    serve_each(|mut s| {
        while let Some(head) = read_head(&mut s) {
            let head = String::from_utf8_lossy(&head).into_owned();
            let extra = if head.starts_with("GET /deny ") {
                "X-Kind: deny\r\n"
            } else if head.starts_with("GET /redir ") {
                "X-Kind: redir\r\n"
            } else if head.starts_with("GET /cookie ") {
                "Set-Cookie: a=b\r\nCache-Control: max-age=60\r\n"
            } else {
                ""
            };
            let r = format!("HTTP/1.1 200 OK\r\n{extra}Content-Length: 2\r\n\r\nok");
            if s.write_all(r.as_bytes()).is_err() {
                return;
            }
        }
    })
}

fn config(sock: &Path, o: SocketAddr, [fe, t, u, r, l]: [u16; 5]) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
         frontend fe\n    mode http\n    bind 127.0.0.1:{fe}\n    http-request deny if {{ path /fedeny }}\n    use_backend c if {{ path /cookie }}\n    default_backend b\n\
         backend b\n    mode http\n    http-request deny if {{ path /bedeny }}\n    http-request reject if {{ path /bereject }}\n\
         \x20   http-response deny if {{ res.hdr(x-kind) deny }}\n\
         \x20   http-response redirect location /elsewhere if {{ res.hdr(x-kind) redir }}\n\
         \x20   server s {o}\n\
         backend c\n    mode http\n    option checkcache\n    server s {o}\n\
         listen t\n    mode tcp\n    bind 127.0.0.1:{t}\n    tcp-response content reject\n    server s {o}\n\
         listen l\n    mode http\n    bind 127.0.0.1:{l}\n    http-request deny if {{ path /ldeny }}\n    http-request reject if {{ path /lreject }}\n    server s {o}\n\
         listen r\n    mode tcp\n    bind 127.0.0.1:{r}\n    tcp-request inspect-delay 10s\n    tcp-request content reject if {{ req.len gt 0 }}\n    server s {o}\n\
         listen u\n    mode tcp\n    bind 127.0.0.1:{u}\n    tcp-response inspect-delay 10s\n    tcp-response content silent-drop if {{ res.len gt 0 }}\n    server s {o}\n",
        sock.display()
    )
}

/// The answer's status line to `GET path` on a new connection (empty
/// when the connection closed without one).
fn status(a: SocketAddr, path: &str) -> String {
    let out = common::origin::exchange(
        a,
        format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let out = String::from_utf8_lossy(&out).into_owned();
    out.lines().next().unwrap_or("").to_string()
}

/// What a client of a `silent-drop` hears within 2 s of its request
/// (the rule waits for the server's answer: one that runs at the connect
/// may close before the request arrives, and the kernel answers the
/// request's segment with a reset, with haproxy as with ebb):
/// "nothing" (HAProxy 2.6 with `CAP_NET_ADMIN`: the socket closed in
/// repair mode), "reset" or "closed".
fn heard(a: SocketAddr) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(a).unwrap();
    s.write_all(b"GET /ok HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => "closed".into(),
        Ok(n) => format!("{n} bytes"),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => "reset".into(),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            "nothing".into()
        }
        Err(e) => format!("{e}"),
    }
}

/// Drives the same requests through one server; the `dresp` column of
/// each row of interest, and each answer's status line.
fn run(sock: &Path, [fe, t, u, r, l]: [u16; 5]) -> (Vec<String>, Vec<String>) {
    let a = |p: u16| -> SocketAddr { format!("127.0.0.1:{p}").parse().unwrap() };
    let answers = vec![
        status(a(fe), "/ok"),
        status(a(fe), "/deny"),
        status(a(fe), "/redir"),
        status(a(fe), "/cookie"),
        status(a(fe), "/fedeny"),
        status(a(fe), "/bedeny"),
        status(a(fe), "/bereject"),
        status(a(r), "/ok"),
        status(a(l), "/ldeny"),
        status(a(l), "/lreject"),
        status(a(t), "/ok"),
        heard(a(u)),
    ];
    let csv = cli_cmd(sock, "show stat");
    let rows = [
        ("fe", "FRONTEND"),
        ("b", "BACKEND"),
        ("b", "s"),
        ("c", "BACKEND"),
        ("c", "s"),
        ("t", "FRONTEND"),
        ("t", "BACKEND"),
        ("t", "s"),
        ("u", "FRONTEND"),
        ("u", "BACKEND"),
        ("u", "s"),
        ("r", "FRONTEND"),
        ("r", "BACKEND"),
        ("l", "FRONTEND"),
        ("l", "BACKEND"),
    ];
    let dresp = rows
        .iter()
        .map(|(p, s)| {
            let r = stat_row_of(&csv, p, s);
            let col = |c: &str| r.get(c).cloned().unwrap_or_default();
            format!("{p}/{s}={}/{}", col("dreq"), col("dresp"))
        })
        .collect();
    (dresp, answers)
}

fn ports() -> [u16; 5] {
    [
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    ]
}

#[test]
fn refused_responses_are_counted_as_haproxy_counts_them() {
    let o = origin();
    let p = ports();
    let (e, sock) = ebb_with_admin("dresp", |s, _| config(s, o, p));
    let (got, answers) = run(&sock, p);
    drop(e);
    // DREQ/DRESP of each row (a server row has no `dreq`): haproxy 2.6's
    // figures, taken side by side below too.
    let want: Vec<String> = [
        "fe/FRONTEND=3/2",
        "b/BACKEND=2/1",
        "b/s=/1",
        "c/BACKEND=0/1",
        "c/s=/1",
        "t/FRONTEND=0/1",
        "t/BACKEND=0/1",
        "t/s=/1",
        "u/FRONTEND=1/0",
        "u/BACKEND=1/0",
        "u/s=/0",
        "r/FRONTEND=1/0",
        "r/BACKEND=0/0",
        // A listen's deny counts on its frontend row, its reject on both.
        "l/FRONTEND=2/0",
        "l/BACKEND=1/0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want, "answers: {answers:?}");
    let statuses = ["200", "502", "302", "200", "403", "403"];
    for (a, st) in answers.iter().zip(statuses) {
        assert!(a.starts_with(&format!("HTTP/1.1 {st} ")), "{answers:?}");
    }
    // (checkcache's refusal is the error page of the answer's status:
    // HAProxy's 200 page for a 200.) Nothing of the server's answer
    // reaches a tcp client refused.
    assert_eq!(answers[6..8], ["", ""], "{answers:?}");
    assert!(answers[8].starts_with("HTTP/1.1 403 "), "{answers:?}");
    assert_eq!(answers[9..11], ["", ""], "{answers:?}");
    // A silent-drop sends nothing, not even a reset, when ebb may put the
    // socket in repair mode (root here, as CI runs).
    if as_root() {
        assert_eq!(answers[11], "nothing", "{answers:?}");
    }
    if !have("haproxy") {
        return;
    }
    let p = ports();
    let d = scratch("dresp-h");
    let text = config(&d.join("h.sock"), o, p);
    let rest = text.split_once("level admin\n").unwrap().1.to_string();
    let Some(h) = haproxy_with("dresp", &rest) else {
        return;
    };
    let (hgot, hanswers) = run(&h.sock, p);
    assert_eq!(got, hgot, "ebb and haproxy 2.6");
    assert_eq!(answers, hanswers, "ebb and haproxy 2.6");
}
