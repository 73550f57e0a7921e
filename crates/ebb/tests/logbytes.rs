//! What `%B` and `%U` log, and the stats' `bin`/`bout` add up, as HAProxy
//! 2.6 counts them: in HTTP mode the messages' HTX size (20 for the start
//! line's record and its three parts, each field's name and value but the
//! `close`/`keep-alive` of `Connection`, 1 for the head's end, the data
//! de-chunked, 1 and the trailers for a chunked message), in tcp mode the
//! bytes; and `%ST` where no answer was given. Checked beside Debian's
//! haproxy when it is installed, on the same exchanges (the figures in the
//! tables are the ones it logged).

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use common::{cli_cmd, ebb_with_admin, haproxy_beside, stat_row_of, ReadRetry, Syslog};

/// The origin's answer to a path.
fn answer(path: &str) -> &'static [u8] {
    match path {
        "/chunk" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n3\r\nabc\r\n0\r\nX-T:  1 \r\n\r\n",
        "/chunk0" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        "/close" => b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        "/field" => b"HTTP/1.1 200 OK\r\nX-Aaa:   bbbb\r\nContent-Length: 2\r\n\r\nok",
        "/304" => b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
        _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    }
}

/// Reads one request (head, then a Content-Length or chunked body
/// without trailers); `None` at the end of the connection.
fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, String)> {
    let mut b = [0u8; 4096];
    let at = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read_retry(&mut b).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&b[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..at]).to_ascii_lowercase();
    buf.drain(..at);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next()?.to_string(), words.next()?.to_string());
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let end = |buf: &[u8]| match len {
        Some(n) => (buf.len() >= n).then_some(n),
        None if head.contains("transfer-encoding: chunked") => buf
            .windows(5)
            .position(|w| w == b"0\r\n\r\n")
            .map(|i| i + 5),
        None => Some(0),
    };
    let n = loop {
        if let Some(n) = end(buf) {
            break n;
        }
        let k = s.read_retry(&mut b).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&b[..k]);
    };
    buf.drain(..n);
    Some((method.to_ascii_uppercase(), path))
}

/// An origin answering each request by its path ([`answer`]), keeping
/// its connections open.
fn origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                while let Some((m, p)) = read_request(&mut s, &mut buf) {
                    let a = answer(p.split('?').next().unwrap_or_default());
                    let a = match m.as_str() {
                        // The head only.
                        "HEAD" => {
                            let e = a.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                            &a[..e + 4]
                        }
                        _ => a,
                    };
                    if s.write_all(a).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

fn cfg(sock: &Path, bind: &str, tcp_bind: &str, log: SocketAddr, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n    log {log} local0\n\
         defaults\n    mode http\n    log global\n\
         \x20   timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    log-format \"bytes %{{+Q}}r B=%B U=%U ST=%ST\"\n    default_backend be\n\
         frontend ft\n    mode tcp\n    bind {tcp_bind}\n    log-format \"tcp B=%B U=%U ST=%ST\"\n    default_backend bt\n\
         backend be\n    server s1 {o}\n\
         backend bt\n    mode tcp\n    server s1 {o}\n",
        sock.display()
    )
}

/// Each request (sent alone on its connection), the line's prefix and
/// what HAProxy 2.6 logged for it.
const EXCHANGES: &[(&[u8], &str, &str)] = &[
    // 20 + "HTTP/1.1" "200" "OK" (13) + Content-Length 2 (15) + 1 + 2;
    // 20 + "GET" "/fixed" "HTTP/1.1" (17) + Host x (5) + 1.
    (
        b"GET /fixed HTTP/1.1\r\nHost: x\r\n\r\n",
        "\"GET /fixed HTTP/1.1\"",
        "B=51 U=43 ST=200",
    ),
    // The client's `Connection: close` is not counted either.
    (
        b"GET /fixed?c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "\"GET /fixed?c HTTP/1.1\"",
        "B=51 U=45 ST=200",
    ),
    // Chunked: the data (5), 1 for the end, the trailer's name and value.
    (
        b"GET /chunk HTTP/1.1\r\nHost: x\r\n\r\n",
        "\"GET /chunk HTTP/1.1\"",
        "B=68 U=43 ST=200",
    ),
    (
        b"GET /chunk0 HTTP/1.1\r\nHost: x\r\n\r\n",
        "\"GET /chunk0 HTTP/1.1\"",
        "B=61 U=44 ST=200",
    ),
    (
        b"GET /close HTTP/1.1\r\nHost: x\r\n\r\n",
        "\"GET /close HTTP/1.1\"",
        "B=51 U=43 ST=200",
    ),
    // A value's blanks are not counted.
    (
        b"GET /field HTTP/1.1\r\nHost: x\r\n\r\n",
        "\"GET /field HTTP/1.1\"",
        "B=60 U=43 ST=200",
    ),
    (
        b"GET /304 HTTP/1.1\r\nHost: x\r\n\r\n",
        "\"GET /304 HTTP/1.1\"",
        "B=51 U=41 ST=304",
    ),
    (
        b"HEAD /fixed HTTP/1.1\r\nHost: x\r\n\r\n",
        "\"HEAD /fixed HTTP/1.1\"",
        "B=49 U=44 ST=200",
    ),
    (
        b"POST /post HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        "\"POST /post HTTP/1.1\"",
        "B=51 U=63 ST=200",
    ),
    (
        b"POST /postc HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n",
        "\"POST /postc HTTP/1.1\"",
        "B=51 U=74 ST=200",
    ),
];

/// Sends each exchange to `fe` and `tcp`, and a connection that closes
/// without a request; returns the lines logged and the stats rows (fe,
/// be, be/s1, bt/s1) as `bin/bout`.
fn run(fe: SocketAddr, tcp: SocketAddr, sock: &Path, log: &Syslog) -> (Vec<String>, Vec<String>) {
    let send = |a: SocketAddr, req: &[u8]| {
        let mut c = TcpStream::connect(a).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(req).unwrap();
        // The answer's end: the origin's bytes are known.
        let mut got = Vec::new();
        let mut b = [0u8; 4096];
        let head_req = req.starts_with(b"HEAD");
        // (HAProxy writes the chunks again: one, lower-case trailers.)
        let last_chunk = |g: &[u8]| g.windows(5).any(|w| w == b"\r\n0\r\n");
        while !(got.ends_with(b"ok")
            || ((head_req || got.starts_with(b"HTTP/1.1 304") || last_chunk(&got))
                && got.ends_with(b"\r\n\r\n")))
        {
            match c.read_retry(&mut b) {
                Ok(n) if n > 0 => got.extend_from_slice(&b[..n]),
                _ => panic!("cut: {}", String::from_utf8_lossy(&got)),
            }
        }
    };
    let mut lines = Vec::new();
    for (req, prefix, _) in EXCHANGES {
        send(fe, req);
        lines.push(log.next(&format!("bytes {prefix} ")));
    }
    // An HTTP/2 request (its only field `:authority`, which makes an
    // absolute target and a `host` field).
    let (ok, _, err) = common::curl(&[
        "--http2-prior-knowledge",
        "-o",
        "/dev/null",
        "-H",
        "User-Agent:",
        "-H",
        "Accept:",
        &format!("http://{fe}/h2"),
    ]);
    assert!(ok, "{err}");
    lines.push(log.next(&format!("bytes \"GET http://{fe}/h2 HTTP/2.0\" ")));
    // A connection with no request (no `dontlognull`): HAProxy's 400, as
    // the client closed, and nothing counted.
    drop(TcpStream::connect(fe).unwrap());
    lines.push(log.next("bytes \"<BADREQ>\""));
    // tcp: the bytes each way; no transaction, `%ST` 0.
    send(tcp, b"GET /fixed HTTP/1.1\r\nHost: x\r\n\r\n");
    lines.push(log.next("tcp "));
    let csv = cli_cmd(sock, "show stat");
    let rows = [
        ("fe", "FRONTEND"),
        ("be", "BACKEND"),
        ("be", "s1"),
        ("bt", "s1"),
    ]
    .iter()
    .map(|(p, s)| {
        let r = stat_row_of(&csv, p, s);
        format!("{p}/{s} {}/{}", r["bin"], r["bout"])
    })
    .collect();
    (lines, rows)
}

#[test]
fn bytes_logged_and_counted_as_haproxy_counts_them() {
    let o = origin();
    let log = Syslog::new();
    let l = log.addr();
    let (ebb, sock) = ebb_with_admin("logbytes", |k, b| cfg(k, b, b, l, o));
    let check = |fe: SocketAddr, lines: Vec<String>, rows: Vec<String>, who: &str| {
        let mut want: Vec<String> = EXCHANGES
            .iter()
            .map(|(_, p, w)| format!("bytes {p} {w}"))
            .collect();
        // 20 + "GET" + the URI + "HTTP/2.0", "host" and the authority, 1.
        let h2 = 20 + 3 + format!("http://{fe}/h2").len() + 8 + 4 + fe.to_string().len() + 1;
        want.push(format!(
            "bytes \"GET http://{fe}/h2 HTTP/2.0\" B=51 U={h2} ST=200"
        ));
        want.push("bytes \"<BADREQ>\" B=0 U=0 ST=400".into());
        want.push("tcp B=40 U=32 ST=0".into());
        assert_eq!(lines, want, "{who}");
        // Sums of the lines: the frontend's and the backend's, its
        // server's (HAProxy's server `bin` is what went to it, the
        // request).
        let (bin, bout) = (
            43 + 45 + 43 + 44 + 43 + 43 + 41 + 44 + 63 + 74 + h2,
            51 * 6 + 68 + 61 + 60 + 49 + 51,
        );
        let want_rows = vec![
            format!("fe/FRONTEND {bin}/{bout}"),
            format!("be/BACKEND {bin}/{bout}"),
            format!("be/s1 {bin}/{bout}"),
            "bt/s1 32/40".to_string(),
        ];
        assert_eq!(rows, want_rows, "{who}");
    };
    let (lines, rows) = run(ebb.addrs[0], ebb.addrs[1], &sock, &log);
    check(ebb.addrs[0], lines, rows, "ebb");
    drop(ebb);
    let tcp = common::free_port();
    let tb = format!("127.0.0.1:{tcp}");
    if let Some((h, fe)) = haproxy_beside("logbytes", |k, b| cfg(k, b, &tb, l, o)) {
        let (lines, rows) = run(fe, tb.parse().unwrap(), &h.sock, &log);
        check(fe, lines, rows, "haproxy");
    }
}
