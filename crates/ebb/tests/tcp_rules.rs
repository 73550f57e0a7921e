//! `tcp-request connection|session|content` actions beyond accept and
//! reject (track-sc, sc-inc-gpc0, sc-set-gpt0, set-var, silent-drop,
//! expect-proxy), stick tables counting tcp sessions, `stick on` in a tcp
//! backend, through the real binary, side by side with HAProxy 2.6 where
//! it is installed. Every wait ends on an event (a read, a line, a
//! socket); none is a sleep.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

const LONG: Duration = Duration::from_secs(30);

/// `timeout check`: a check is otherwise bounded by its `inter` (200 or
/// 300 ms here), and on a loaded machine a check of a good server can
/// take longer (reported as a timeout, the server DOWN with `fall 1`).
const DEFAULTS: &str = "defaults\n    mode tcp\n    timeout client 30s\n    timeout server 30s\n    timeout connect 2s\n    timeout check 10s\n";

/// A test server on a free port: `f` runs on each connection, in a
/// thread of its own.
fn serve(f: impl Fn(TcpStream) + Send + Sync + Copy + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || f(s));
        }
    });
    addr
}

/// Answers each connection with `name`, once the client's FIN came.
fn name_server(name: &'static str) -> SocketAddr {
    serve(move |mut s| {
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
        let _ = s.write_all(name.as_bytes());
    })
}

/// One session: sends `msg`, half-closes, reads the answer to EOF. An
/// error (a reset) reads as `None`.
fn session(addr: SocketAddr, msg: &[u8]) -> Option<Vec<u8>> {
    let mut c = TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(LONG)).unwrap();
    let _ = c.write_all(msg);
    let _ = c.shutdown(Shutdown::Write);
    let mut v = Vec::new();
    c.read_to_end(&mut v).ok()?;
    Some(v)
}

/// A HAProxy 2.6 process; killed on drop.
struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts HAProxy on `cfg` (with `HPORT` replaced by a free port and
/// `SOCK` by a stats socket in `dir`); returns it, its address and its
/// socket once both answer.
fn haproxy(dir: &Path, cfg: &str) -> (Haproxy, SocketAddr, std::path::PathBuf) {
    // Below the ephemeral range: ebb's `:0` listeners never get it.
    let port = free_port();
    let sock = dir.join("h.sock");
    let path = dir.join("h.cfg");
    std::fs::write(
        &path,
        cfg.replace("HPORT", &port.to_string())
            .replace("SOCK", &sock.display().to_string()),
    )
    .unwrap();
    let h = Haproxy(
        Command::new("haproxy")
            .args(["-db", "-f", path.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_until("haproxy's socket", || {
        std::os::unix::net::UnixStream::connect(&sock).is_ok()
    });
    (h, addr, sock)
}

/// ebb and, when it is installed, HAProxy on the same sections `body`
/// (`BIND`: the listening address), each with an admin stats socket:
/// their first listening address and socket, ebb first.
fn side_by_side(
    dir: &Path,
    body: &str,
) -> (Ebb, Option<Haproxy>, Vec<(SocketAddr, std::path::PathBuf)>) {
    let esock = dir.join("e.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{DEFAULTS}{body}",
        esock.display()
    ));
    let mut targets = vec![(e.addr(), esock)];
    if !have("haproxy") {
        eprintln!("haproxy missing: ebb alone");
        return (e, None, targets);
    }
    let (h, a, s) = haproxy(
        dir,
        &format!(
            "global\n    stats socket SOCK level admin\n{DEFAULTS}{}",
            body.replace("BIND", "127.0.0.1:HPORT")
        ),
    );
    targets.push((a, s));
    (e, Some(h), targets)
}

/// The data part of `show table T`'s entry lines (what follows `exp=`).
fn table_data(t: &str) -> Vec<String> {
    t.lines()
        .filter(|l| l.starts_with("0x"))
        .map(|l| {
            l.split(' ')
                .filter(|w| !w.starts_with("0x") && !w.starts_with("exp="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// `tcp-request content track-sc0 src` + `reject if { sc0_conn_rate gt 3
/// }`: the 4th connection is refused, as HAProxy does; the table counts
/// the sessions and their bytes the same way in both.
#[test]
fn content_tracking_refuses_the_fourth_connection_as_haproxy() {
    let echo = name_server("pong");
    let dir = scratch("tcp-rules-rate");
    let rules = format!(
        "listen l\n    bind BIND\n    stick-table type ip size 1k expire 60s store conn_cnt,conn_cur,conn_rate(60s),sess_cnt,bytes_in_cnt,bytes_out_cnt\n    tcp-request content track-sc0 src\n    tcp-request content reject if {{ sc0_conn_rate gt 3 }}\n    server e {echo}\n"
    );
    let (_e, _h, targets) = side_by_side(&dir, &rules);
    let mut tables = Vec::new();
    for (addr, sock) in &targets {
        for i in 0..3 {
            assert_eq!(
                session(*addr, b"ping").as_deref(),
                Some(&b"pong"[..]),
                "session {i} on {addr}"
            );
        }
        // The 4th: closed before reaching the server. (It sends nothing:
        // HAProxy counts the bytes it read before the rule ran, which
        // depends on timing.)
        assert_eq!(session(*addr, b"").unwrap_or_default(), b"");
        // Ended sessions release their entry (conn_cur back to 0).
        let mut t = String::new();
        wait_until("the sessions end", || {
            t = cli_cmd(sock, "show table l");
            t.contains(" conn_cur=0 ")
        });
        tables.push(table_data(&t));
    }
    assert_eq!(
        tables[0],
        vec!["key=127.0.0.1 use=0 conn_cnt=4 conn_rate(60000)=4 conn_cur=0 sess_cnt=0 bytes_in_cnt=12 bytes_out_cnt=12".to_string()],
    );
    if tables.len() == 2 {
        assert_eq!(tables[0], tables[1], "ebb vs HAProxy");
    }
}

/// Connection-level tracking in an http frontend: the counters hold for
/// the connection's life (sess_cnt, http_req_cnt of each request) and a
/// `reject` on them runs before the HTTP layer.
#[test]
fn connection_tracking_in_an_http_frontend() {
    let dir = scratch("tcp-rules-http");
    let sock = dir.join("e.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout client 30s\nfrontend f\n    bind BIND\n    stick-table type ip size 1k expire 60s store conn_cnt,conn_rate(60s),sess_cnt,http_req_cnt,gpc0\n    tcp-request connection track-sc1 src\n    tcp-request connection reject if {{ sc1_conn_rate gt 2 }}\n    tcp-request session sc-inc-gpc0(1)\n    tcp-request session set-var(sess.gpc) sc1_get_gpc0\n    http-request return status 200 content-type text/plain lf-string \"gpc=%[var(sess.gpc)]\"\n",
        sock.display()
    ));
    // Two requests on one connection, then one on a second.
    let mut c = Client::connect(e.addr());
    for _ in 0..2 {
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(c.read_resp().text(), "gpc=1");
    }
    drop(c);
    assert_eq!(get(e.addr(), "/").text(), "gpc=2");
    // The third connection is refused at accept.
    let mut c = TcpStream::connect(e.addr()).unwrap();
    c.set_read_timeout(Some(LONG)).unwrap();
    let mut b = [0u8; 16];
    assert!(matches!(c.read_retry(&mut b), Ok(0) | Err(_)));
    let t = cli_cmd(&sock, "show table f");
    assert!(
        t.contains(" gpc0=2 conn_cnt=3 conn_rate(60000)=3 sess_cnt=2 http_req_cnt=3\n"),
        "{t}"
    );
}

/// `silent-drop` resets the connection (no FIN, no log); `reject`
/// closes it; `expect-proxy layer4` makes a PROXY header required for the
/// sources it names, whose address then counts.
#[test]
fn silent_drop_reject_and_expect_proxy() {
    let echo = name_server("pong");
    let e = Ebb::start(&format!(
        "global\n    log stdout format raw local0\n{DEFAULTS}    log global\n    option tcplog\nlisten drop\n    bind BIND\n    tcp-request connection silent-drop if {{ src 127.0.0.1 }}\n    server e {echo}\nlisten content_drop\n    bind BIND\n    tcp-request inspect-delay 10s\n    tcp-request content silent-drop if {{ req.payload(0,4) -m str drop }}\n    server e {echo}\nlisten pp\n    bind BIND\n    tcp-request connection expect-proxy layer4 if {{ src 127.0.0.1 }}\n    server e {echo}\n"
    ));
    // Dropped at accept: nothing heard (or, without the privilege, a
    // reset; never an orderly close).
    let mut c = TcpStream::connect(e.addrs[0]).unwrap();
    assert_silently_dropped(&mut c);
    // Dropped on content: the same, and no log line.
    let mut c = TcpStream::connect(e.addrs[1]).unwrap();
    let port = c.local_addr().unwrap().port();
    c.write_all(b"drop").unwrap();
    assert_silently_dropped(&mut c);
    assert_eq!(session(e.addrs[1], b"keep").as_deref(), Some(&b"pong"[..]));
    // The PROXY header is now required: its source is logged.
    let mut c = TcpStream::connect(e.addrs[2]).unwrap();
    c.write_all(b"PROXY TCP4 192.0.2.7 127.0.0.1 5555 80\r\nhello")
        .unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    c.set_read_timeout(Some(LONG)).unwrap();
    let mut v = Vec::new();
    c.read_to_end(&mut v).unwrap();
    assert_eq!(v, b"pong");
    let l = e.wait_stdout("192.0.2.7:5555 [", LONG).unwrap();
    assert!(l.contains(" pp pp/e "), "{l}");
    // Without a header: closed, and logged as a bad PROXY header.
    assert_eq!(session(e.addrs[2], b"hello").unwrap_or_default(), b"");
    // The content drop left no line; the kept session did.
    assert!(e
        .wait_stdout(" content_drop content_drop/e ", LONG)
        .is_some());
    assert!(!e
        .stdout
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains(&format!(":{port} ["))));
}

/// `stick on src` in a tcp backend keeps a client on one server, where
/// round robin alone alternates; as HAProxy.
#[test]
fn stick_on_src_keeps_a_tcp_client_on_one_server() {
    let a = name_server("A");
    let b = name_server("B");
    let dir = scratch("tcp-rules-stick");
    let body = format!("    balance roundrobin\n    server a {a}\n    server b {b}\n");
    let e = Ebb::start(&format!(
        "{DEFAULTS}listen rr\n    bind BIND\n{body}listen sticky\n    bind BIND\n    stick-table type ip size 1k expire 60s\n    stick on src\n{body}"
    ));
    let seen = |addr| {
        (0..6)
            .map(|_| String::from_utf8(session(addr, b"x").unwrap()).unwrap())
            .collect::<Vec<_>>()
    };
    let rr = seen(e.addrs[0]);
    assert!(rr.contains(&"A".to_string()) && rr.contains(&"B".to_string()));
    let mut runs = vec![seen(e.addrs[1])];
    let _h = if have("haproxy") {
        let (h, addr, _) = haproxy(
            &dir,
            &format!(
                "global\n    stats socket SOCK\n{DEFAULTS}listen sticky\n    bind 127.0.0.1:HPORT\n    stick-table type ip size 1k expire 60s\n    stick on src\n{body}"
            ),
        );
        runs.push(seen(addr));
        Some(h)
    } else {
        None
    };
    for r in &runs {
        assert!(r.iter().all(|x| *x == r[0]), "{r:?}");
    }
}

/// A line server: each connection gets `answer` once it sent a line
/// (or at once when `greet`), then is closed.
fn line_answerer(answer: &'static [u8], greet: bool) -> SocketAddr {
    serve(move |mut s| {
        if !greet {
            let mut line = Vec::new();
            let mut b = [0u8; 1];
            while !line.ends_with(b"\n") {
                match s.read_retry(&mut b) {
                    Ok(1) => line.push(b[0]),
                    _ => return,
                }
            }
        }
        let _ = s.write_all(answer);
    })
}

/// `option tcp-check` with `send` and `expect`: a server that answers
/// right is L7OK, one that answers wrong goes DOWN with L7RSP (also when
/// its close, with the check's line unread, resets the connection after
/// the answer: the data is judged), one that is not there L4CON, a
/// connect-only sequence reports L4OK; the same codes as HAProxy's in
/// `show stat`.
#[test]
fn tcp_check_sequences_report_haproxys_codes() {
    let right = line_answerer(b"+PONG\r\n", false);
    let wrong = line_answerer(b"-ERR unknown\r\n", false);
    let reset = line_answerer(b"-ERR unknown\r\n", true);
    let banner = line_answerer(b"220 ready\r\n", true);
    let dead = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let dir = scratch("tcp-check");
    let backends = format!(
        "backend redis\n    option tcp-check\n    tcp-check comment ping\n    tcp-check send PING\\r\\n\n    tcp-check expect comment pong string +PONG\n    server right {right} check inter 200ms fall 1 rise 1\n    server wrong {wrong} check inter 200ms fall 1 rise 1\n    server reset {reset} check inter 200ms fall 1 rise 1\n    server dead {dead} check inter 200ms fall 1 rise 1\nbackend smtp\n    option tcp-check\n    tcp-check connect\n    tcp-check expect rstring ^220\n    tcp-check expect ! string 554\n    server banner {banner} check inter 200ms fall 1 rise 1\nbackend plain\n    option tcp-check\n    server s {right} check inter 200ms\n"
    );
    let (_e, _h, targets) = side_by_side(
        &dir,
        &format!("frontend f\n    bind BIND\n    default_backend redis\n{backends}"),
    );
    let socks: Vec<_> = targets.into_iter().map(|(_, s)| s).collect();
    let want = [
        ("redis", "right", "UP", "L7OK"),
        ("redis", "wrong", "DOWN", "L7RSP"),
        ("redis", "reset", "DOWN", "L7RSP"),
        ("redis", "dead", "DOWN", "L4CON"),
        ("smtp", "banner", "UP", "L7OK"),
        ("plain", "s", "UP", "L4OK"),
    ];
    for sock in &socks {
        for (be, srv, status, code) in want {
            wait_until(&format!("{be}/{srv} {status} {code}"), || {
                let r = stat_row(sock, be, srv);
                r.get("status").map(String::as_str) == Some(status)
                    && r.get("check_status").map(String::as_str) == Some(code)
            });
        }
        // A row read while the next check runs has an empty `last_chk`
        // (HAProxy's too): the text of a finished check is compared.
        for srv in ["wrong", "reset"] {
            let mut last = String::new();
            wait_until(&format!("redis/{srv}'s finished check"), || {
                last = stat_row(sock, "redis", srv)
                    .get("last_chk")
                    .cloned()
                    .unwrap_or_default();
                !last.is_empty()
            });
            assert_eq!(
                last, "TCPCHK did not match content '+PONG' at step 3 comment: pong",
                "{sock:?} {srv}"
            );
        }
    }
}

/// A server that sends `chunks` (each flushed on its own, a little
/// apart), then waits for the client's FIN and closes; with `hold`, it
/// neither reads nor closes (only a proxy closing ends the session).
fn chunk_server(chunks: &'static [&'static [u8]], hold: bool) -> SocketAddr {
    serve(move |mut s| {
        let _ = s.set_nodelay(true);
        for c in chunks {
            if s.write_all(c).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if hold {
            std::thread::sleep(Duration::from_secs(120));
        }
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    })
}

/// What a client reads until EOF (or a reset) after sending its FIN.
fn read_answer(addr: SocketAddr) -> Vec<u8> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(LONG)).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut v = Vec::new();
    let mut b = [0u8; 256];
    loop {
        match c.read_retry(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => v.extend_from_slice(&b[..n]),
        }
    }
    v
}

/// `tcp-response content accept|reject|close` with `tcp-response
/// inspect-delay` and `res.len`/`res.payload`: the same answers as
/// HAProxy's.
#[test]
fn tcp_response_rules_as_haproxy() {
    let bad = chunk_server(&[b"BAD stuff"], false);
    let split = chunk_server(&[b"ab", b"cdef", b"gh"], false);
    let short = chunk_server(&[b"xy"], false);
    let bye = chunk_server(&[b"bye"], true);
    let dir = scratch("tcp-response");
    let body = format!(
        "listen reject\n    bind BIND\n    tcp-response inspect-delay 10s\n    tcp-response content reject if {{ res.payload(0,3) -m str BAD }}\n    server s {bad}\nlisten wait\n    bind BIND\n    tcp-response inspect-delay 10s\n    tcp-response content accept if {{ res.len ge 6 }}\n    tcp-response content reject\n    server s {split}\nlisten short\n    bind BIND\n    tcp-response inspect-delay 300ms\n    tcp-response content accept if {{ res.len ge 6 }}\n    tcp-response content reject\n    server s {short}\nlisten close\n    bind BIND\n    tcp-response inspect-delay 10s\n    tcp-response content close if {{ res.len gt 0 }}\n    server s {bye}\n"
    );
    let e = Ebb::start(&format!("{DEFAULTS}{body}"));
    let mut runs = vec![e.addrs.clone()];
    let _h = if have("haproxy") {
        // One port per listen section, in order.
        let mut cfg = format!("global\n    stats socket SOCK\n{DEFAULTS}");
        let mut addrs = Vec::new();
        for sec in body.split("listen ").filter(|x| !x.is_empty()) {
            let a = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
            addrs.push(a);
            cfg.push_str(&format!("listen {}", sec.replace("BIND", &a.to_string())));
        }
        let (h, _, _) = haproxy(&dir, &cfg);
        for a in &addrs {
            wait_until("haproxy listens", || TcpStream::connect(a).is_ok());
        }
        runs.push(addrs);
        Some(h)
    } else {
        None
    };
    for (i, addrs) in runs.iter().enumerate() {
        let r: Vec<Vec<u8>> = addrs.iter().map(|a| read_answer(*a)).collect();
        // reject: nothing reaches the client; short: the delay expires,
        // the last rule rejects.
        assert_eq!(
            (&r[0][..], &r[2][..]),
            (&b""[..], &b""[..]),
            "run {i} (0: ebb, 1: haproxy)"
        );
        if i == 1 {
            // HAProxy 2.6's other answers here depend on when the client's
            // early FIN reaches it (seen varying run to run): shown only.
            eprintln!("haproxy: {r:?}");
            continue;
        }
        // wait: 6 bytes, then the whole answer passes; close: the server
        // never closes, `close` ends it and its bytes still pass.
        assert_eq!((&r[1][..], &r[3][..]), (&b"abcdefgh"[..], &b"bye"[..]));
    }
}

/// Server `s` of backend `be` in `show stat` once a check completed and
/// none runs (HAProxy prefixes a running check's status with `* `).
fn checked_row(sock: &Path, be: &str) -> std::collections::HashMap<String, String> {
    let mut row = Default::default();
    wait_until(&format!("{be} checked"), || {
        row = stat_row(sock, be, "s");
        row.get("check_status")
            .is_some_and(|c| !c.is_empty() && c != "INI" && !c.starts_with('*'))
    });
    row
}

/// Steps of a scripted server: bytes to read, then bytes to write.
type Script = &'static [(usize, &'static [u8])];

/// A server that plays `script` on each connection: for each step, reads
/// that many bytes (0: none), then writes the bytes; then, with `close`,
/// closes its side (as VTest's servers do), and waits for the client to
/// close. (A close right after a right answer races with HAProxy's read
/// of it: HAProxy 2.6 then reports an empty response.)
fn scripted(script: Script, close: bool) -> SocketAddr {
    serve(move |mut s| {
        for (n, answer) in script {
            let mut got = vec![0u8; *n];
            if s.read_exact(&mut got).is_err() || s.write_all(answer).is_err() {
                return;
            }
        }
        if close {
            let _ = s.shutdown(Shutdown::Write);
        }
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    })
}

/// The protocol checks (`option redis-check`, `smtpchk`, `pgsql-check`,
/// `mysql-check`, `ldap-check`, `spop-check`) against servers answering
/// right and wrong: the same status, code and description as HAProxy
/// 2.6's in `show stat` (compared side by side when it is installed).
#[test]
fn protocol_checks_report_as_haproxy() {
    const MYSQL_HELLO: &[u8] = b"\x0b\x00\x00\x00\x0a8.0.19\x00\x01\x02\x03\x04";
    const MYSQL_ERR: &[u8] = b"\x0a\x00\x00\x00\xff\xe3\x04Too old";
    const SPOP_OK: &[u8] = b"\x00\x00\x00\x36\x65\x00\x00\x00\x01\x00\x00\x07version\x08\x032.0\x0emax-frame-size\x03\xfc\xf0\x06\x0ccapabilities\x08\x00";
    const SPOP_OLD: &[u8] = b"\x00\x00\x00\x14\x65\x00\x00\x00\x01\x00\x00\x07version\x08\x031.0";
    let servers: Vec<(&str, &str, Script)> = vec![
        ("redis-check", "", &[(14, b"+PONG\r\n")]),
        ("redis-check", "", &[(14, b"-ERR no\r\n")]),
        (
            "smtpchk",
            "",
            &[(0, b"220 hi\r\n"), (16, b"250 mx.test\r\n")],
        ),
        (
            "smtpchk",
            "EHLO t.test",
            &[(0, b"220 hi\r\n"), (13, b"550 go away\r\n")],
        ),
        ("smtpchk", "", &[(0, b"not smtp\r\n")]),
        (
            "pgsql-check",
            "user pg",
            &[(17, b"R\x00\x00\x00\x08\x00\x00\x00\x00")],
        ),
        (
            "pgsql-check",
            "user pg",
            &[(17, b"E\x00\x00\x00\x0bSFATAL\x00")],
        ),
        ("mysql-check", "", &[(0, MYSQL_HELLO)]),
        ("mysql-check", "", &[(0, MYSQL_ERR)]),
        (
            "ldap-check",
            "",
            &[(
                14,
                b"\x30\x0c\x02\x01\x01\x61\x07\x0a\x01\x00\x04\x00\x04\x00",
            )],
        ),
        (
            "ldap-check",
            "",
            &[(
                14,
                b"\x30\x0c\x02\x01\x01\x61\x07\x0a\x01\x31\x04\x00\x04\x00",
            )],
        ),
        ("spop-check", "", &[(82, SPOP_OK)]),
        ("spop-check", "", &[(82, SPOP_OLD)]),
    ];
    // What ebb must report (HAProxy 2.6's, checked side by side below).
    let want: [(&str, &str, &str); 13] = [
        ("L7OK", "0", "Redis server is ok"),
        ("L7STS", "0", "-ERR no"),
        ("L7OK", "250", "mx.test"),
        ("L7STS", "550", "go away"),
        ("L7RSP", "", "not smtp"),
        ("L7OK", "0", "PostgreSQL server is ok"),
        ("L7RSP", "", "FATAL"),
        ("L7OK", "0", ""),
        ("L7STS", "1251", "Too old"),
        ("L7OK", "0", ""),
        (
            "L7STS",
            "49",
            "See RFC: http://tools.ietf.org/html/rfc4511#section-4.1.9",
        ),
        ("L7OK", "0", ""),
        ("L7RSP", "", "unsupported version"),
    ];
    let mut body = String::from("frontend f\n    bind BIND\n    default_backend b0\n");
    for (i, (opt, args, script)) in servers.iter().enumerate() {
        // Wrong answers end with a close, so that a mismatch concludes.
        let addr = scripted(script, want[i].0 != "L7OK");
        body.push_str(&format!(
            "backend b{i}\n    option {opt} {args}\n    server s {addr} check inter 300ms fall 1 rise 1\n"
        ));
    }
    let dir = scratch("protocol-checks");
    let (_e, _h, targets) = side_by_side(&dir, &body);
    let mut seen = Vec::new();
    for (_, sock) in &targets {
        let mut rows = Vec::new();
        for i in 0..servers.len() {
            let be = format!("b{i}");
            let r = checked_row(sock, &be);
            let f = |k: &str| r.get(k).cloned().unwrap_or_default();
            rows.push((f("check_status"), f("check_code"), f("last_chk")));
        }
        seen.push(rows);
    }
    for (i, (st, code, desc)) in want.iter().enumerate() {
        assert_eq!(
            (
                seen[0][i].0.as_str(),
                seen[0][i].1.as_str(),
                seen[0][i].2.as_str()
            ),
            (*st, *code, *desc),
            "ebb, backend b{i} ({})",
            servers[i].0
        );
    }
    if let Some(h) = seen.get(1) {
        // Debian's HAProxy 2.6.12 carries two 2.7 backports to `option
        // smtpchk` (9a8d8a3f: a `QUIT` and its 2xx end the sequence; the
        // EHLO reply rule before it): against these servers, which answer
        // once, its result for the two that pass the HELO/EHLO step
        // depends on timing. ebb follows 2.6.0, whose reg-test
        // checks/smtp-check wants the check to pass on the one answer;
        // those two rows are compared with the reg-test, not here.
        let mut h = h.clone();
        for i in [2, 3] {
            h[i] = seen[0][i].clone();
        }
        assert_eq!(seen[0], h, "ebb (left) and HAProxy (right)");
    }
    // Protocols of the other kind of check, and unknown ones, are
    // refused as HAProxy refuses them.
    for (rule, what) in [
        (
            "option tcp-check\n    tcp-check connect proto h2",
            "invalid MUX protocol 'h2' for tcp-check",
        ),
        (
            "option httpchk\n    http-check connect proto none",
            "invalid MUX protocol 'none' for http-check",
        ),
        (
            "option tcp-check\n    tcp-check connect proto h3",
            "unknown MUX protocol 'h3'",
        ),
        (
            "option tcp-check\n    tcp-check connect alpn",
            "'tcp-check connect alpn' expects",
        ),
        (
            "option tcp-check\n    tcp-check connect sni",
            "'tcp-check connect sni' expects",
        ),
        (
            "option tcp-check\n    tcp-check connect tls",
            "but got 'tls' as argument",
        ),
    ] {
        let text = format!("{DEFAULTS}backend b\n    {rule}\n    server s 127.0.0.1:1 check\n");
        assert_refused(&dir, "bad.cfg", &text, what, true);
    }
}

/// Runs `body` in ebb (and haproxy beside it when installed) and reads
/// the check report of server `s` of each backend in `bes`: its
/// `check_status`, `check_code` and `last_chk`, one list per process.
type Report = (String, String, String);
fn check_reports(name: &str, body: &str, bes: &[&str]) -> Vec<Vec<Report>> {
    let dir = scratch(name);
    let (_e, _h, targets) = side_by_side(&dir, body);
    let mut seen = Vec::new();
    for (_, sock) in &targets {
        let mut rows = Vec::new();
        for be in bes {
            let r = checked_row(sock, be);
            let f = |k: &str| r.get(k).cloned().unwrap_or_default();
            rows.push((f("check_status"), f("check_code"), f("last_chk")));
        }
        seen.push(rows);
    }
    seen
}

/// `tcp-check expect` options: `ok-status`, `error-status`,
/// `on-success`, `on-error`, `status-code`, and `send-lf` with a plain
/// format, as HAProxy reports them.
#[test]
fn tcp_check_expect_options_as_haproxy() {
    let up = scripted(&[(5, b"204 fine\r\n")], false);
    let down = scripted(&[(5, b"503 busy\r\n")], true);
    let rules = "    option tcp-check\n    tcp-check send-lf \"ping\\n\"\n    tcp-check expect rstring ^2 ok-status L4OK error-status L7STS on-success \"all good\" on-error \"it failed\" status-code res.payload(0,3)\n";
    let body = format!(
        "frontend f\n    bind BIND\n    default_backend up\nbackend up\n{rules}    server s {up} check inter 300ms fall 1 rise 1\nbackend down\n{rules}    server s {down} check inter 300ms fall 1 rise 1\n"
    );
    let seen = check_reports("tcp-check-opts", &body, &["up", "down"]);
    let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        seen[0],
        vec![s("L4OK", "", "all good"), s("L7STS", "503", "it failed")]
    );
    if let Some(h) = seen.get(1) {
        assert_eq!(&seen[0], h, "ebb (left) and HAProxy (right)");
    }
}

/// `tcp-request content` rules in http proxies (the frontend's before its
/// `http-request` rules, the backend's once it is chosen) and
/// `tcp-response content` rules in an http backend, inherited from named
/// defaults sections and run before the proxies' own rules: the same
/// answers from ebb and HAProxy 2.6. ebb's log lines are HAProxy's (seen
/// with Debian's 2.6: a frontend reject logs `fe/<NOSRV>
/// -1/-1/-1/-1/0 -1 0 - - PR--` and `"<BADREQ>"`, a backend one
/// `be/<NOSRV>` with the request line, a response reject `-1 0 - - PD--`,
/// a response `close` a 502 with `SH--`).
#[test]
fn content_rules_in_http_proxies_from_named_defaults_as_haproxy() {
    use common::origin::{Mode, Origin};
    let o = Origin::start("o", Mode::Ok);
    let dir = scratch("tcp-rules-http-content");
    let timeouts = "    timeout client 30s\n    timeout server 30s\n    timeout connect 2s\n";
    let body = format!(
        "defaults front\n    mode http\n    log global\n    option httplog\n{timeouts}    tcp-request inspect-delay 5s\n    tcp-request content set-var(txn.x) str(def)\n    tcp-request content reject if {{ path /rej }}\n    tcp-request content accept if {{ path /acc }}\n\
defaults back\n    mode http\n{timeouts}    tcp-request content reject if {{ path /brej }}\n    tcp-response content reject if {{ var(txn.bad) -m found }}\n    tcp-response content close if {{ var(txn.cl) -m found }}\n    tcp-response content set-var(txn.r) str(resp)\n\
frontend fe from front\n    bind BIND\n    stick-table type ip size 1k expire 60s store http_req_cnt\n    tcp-request content silent-drop if {{ path /drop }}\n    tcp-request content capture req.hdr(host) len 10\n    tcp-request content track-sc1 src\n    tcp-request content set-var(txn.x) str(fe)\n    http-request return status 200 content-type text/plain lf-string \"x=%[var(txn.x)] n=%[sc1_http_req_cnt]\" if {{ path /ret }} || {{ path /acc }}\n    default_backend be\n\
backend be from back\n    http-request set-var(txn.bad) int(1) if {{ path /bad }}\n    http-request set-var(txn.cl) int(1) if {{ path /close }}\n    http-response set-header x-r %[var(txn.r)]\n    server o {}\n",
        o.addr
    );
    let e = Ebb::start(&format!("global\n    log stdout format raw local0\n{body}"));
    let mut targets = vec![e.addr()];
    let _h = have("haproxy").then(|| {
        let (h, a, _) = haproxy(
            &dir,
            &format!(
                "global\n    stats socket SOCK\n{}",
                body.replace("BIND", "127.0.0.1:HPORT")
            ),
        );
        targets.push(a);
        h
    });
    let req = |p: &str| format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes();
    for a in &targets {
        // The content tracker is taken again for each request of a
        // connection; it counts the request being analysed.
        let mut c = Client::connect(*a);
        for n in 1..=2 {
            c.send(&req("/ret"));
            assert_eq!(c.read_resp().text(), format!("x=fe n={n}"), "{a}");
        }
        // `accept` ends the content rules: the frontend's never ran.
        assert_eq!(get(*a, "/acc").text(), "x=def n=", "{a}");
        for p in ["/rej", "/brej", "/bad"] {
            assert!(raw(*a, &req(p)).is_none(), "{p} on {a}: no answer");
        }
        assert_eq!(get(*a, "/close").status, 502, "{a}");
        let r = get(*a, "/ok");
        assert_eq!((r.status, r.header("x-r")), (200, Some("resp")), "{a}");
    }
    // `silent-drop`: no answer, and nothing else either (TCP_REPAIR, as
    // HAProxy running as root; a reset without the privilege).
    let mut c = Client::connect(e.addr());
    c.send(&req("/drop"));
    assert_silently_dropped(&mut c.s);
    let l = e.wait_stdout("\"<BADREQ>\"", LONG).unwrap();
    assert!(
        l.contains(" fe fe/<NOSRV> -1/-1/-1/-1/") && l.contains(" -1 0 - - PR-- "),
        "{l}"
    );
    let l = e.wait_stdout("\"GET /brej HTTP/1.1\"", LONG).unwrap();
    assert!(
        l.contains(" fe be/<NOSRV> -1/-1/-1/-1/") && l.contains(" -1 0 - - PR-- "),
        "{l}"
    );
    let l = e.wait_stdout("\"GET /bad HTTP/1.1\"", LONG).unwrap();
    assert!(
        l.contains(" fe be/o ") && l.contains(" -1 0 - - PD-- "),
        "{l}"
    );
    let l = e.wait_stdout("\"GET /close HTTP/1.1\"", LONG).unwrap();
    assert!(l.contains(" 502 ") && l.contains(" SH-- "), "{l}");
    // `capture` fills a request slot, shown by `%hr`.
    let l = e.wait_stdout("\"GET /ok HTTP/1.1\"", LONG).unwrap();
    assert!(l.contains(" 200 ") && l.contains(" {t} "), "{l}");
}

/// Answers each connection with the first line it got (a PROXY header
/// from a `send-proxy` server line), once the client's FIN came.
fn first_line_server() -> SocketAddr {
    serve(|mut s| {
        let mut all = Vec::new();
        let _ = s.read_to_end(&mut all);
        let end = all
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(all.len(), |i| i + 2);
        let _ = s.write_all(&all[..end]);
    })
}

/// `set-src`, `set-src-port` (connection rules), `set-dst`,
/// `set-dst-port` (content rules) as HAProxy 2.6: the rules after them
/// see the new addresses, a session tracker keys on the new source, and
/// the PROXY header sent to the server names them.
#[test]
fn set_src_and_set_dst_as_haproxy() {
    let dir = scratch("tcp-rules-setaddr");
    let echo = first_line_server();
    let body = format!(
        "frontend f\n    bind BIND\n    stick-table type ip size 1k expire 60s store conn_cnt\n    tcp-request connection set-src str(10.1.2.3)\n    tcp-request connection set-src-port int(4242)\n    tcp-request connection reject unless {{ src 10.1.2.3 }}\n    tcp-request session track-sc0 src\n    tcp-request content set-dst str(198.51.100.9)\n    tcp-request content set-dst-port int(8443)\n    tcp-request content reject unless {{ dst 198.51.100.9 }} {{ dst_port 8443 }}\n    default_backend b\nbackend b\n    server s {echo} send-proxy\n"
    );
    let (_e, _h, targets) = side_by_side(&dir, &body);
    for (i, (addr, sock)) in targets.iter().enumerate() {
        let got = session(*addr, b"hi").unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&got),
            "PROXY TCP4 10.1.2.3 198.51.100.9 4242 8443\r\n",
            "run {i} (0: ebb, 1: haproxy)"
        );
        let t = cli_cmd(sock, "show table f");
        assert!(
            t.contains(" key=10.1.2.3 ")
                && table_data(&t).iter().any(|l| l.ends_with("conn_cnt=1")),
            "run {i}: {t}"
        );
    }
}

/// `set-src` in a connection rule of an http frontend: the request's
/// rules and fetches see the new source for every request of the
/// connection, as in HAProxy.
#[test]
fn set_src_in_an_http_frontend() {
    let e = Ebb::start(
        "defaults\n    mode http\n    timeout client 30s\nfrontend f\n    bind BIND\n    tcp-request connection set-src str(192.0.2.44)\n    http-request return status 403 unless { src 192.0.2.44 }\n    http-request return status 200 content-type text/plain lf-string \"src=%[src]\"\n",
    );
    let mut c = Client::connect(e.addr());
    for _ in 0..2 {
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(c.read_resp().text(), "src=192.0.2.44");
    }
}

/// HTTP fetches in a tcp frontend's `tcp-request content` rules (HAProxy
/// parses the request on the fly; its reg-test peers/basic_sync): `track-sc0
/// url` keys the table on the request's target once its head is whole,
/// a head sent in two parts included (the rules wait within
/// `inspect-delay`); bytes that are not HTTP give the fetch nothing (no
/// entry). Without a backend the connection then closes. Before, ebb
/// refused the configuration ("this rule reads HTTP, which a tcp-mode
/// proxy never parses").
#[test]
fn http_fetches_in_a_tcp_frontends_content_rules_as_haproxy() {
    let dir = scratch("tcp-rules-http");
    let rules = "frontend fe\n    bind BIND\n    stick-table type string size 1k expire 60s store gpc0,conn_cnt\n    tcp-request inspect-delay 10s\n    tcp-request content track-sc0 url\n    tcp-request content sc-inc-gpc0(0)\n    tcp-request content set-var(sess.p) path\n";
    let (_e, _h, targets) = side_by_side(&dir, rules);
    let mut tables = Vec::new();
    for (addr, sock) in &targets {
        // Whole, then in two parts (the second after the first was read).
        assert_eq!(
            session(*addr, b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n"),
            Some(vec![])
        );
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /b HTTP/1.1\r\nHo").unwrap();
        wait_until("the first part is read", || {
            cli_cmd(sock, "show sess").lines().count() >= 2
        });
        s.write_all(b"st: h\r\n\r\n").unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        assert!(out.is_empty());
        // Not HTTP: the head never parses; the rules run at the end of
        // the input (the client closes its side).
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"\x16\x03\x01 not http\r\n\r\n").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let _ = s.read_to_end(&mut out);
        // The client sees the close before the process lets go of the
        // entries (HAProxy frees the stream, and its `use`, just after):
        // wait for both entries unused (this table stores no conn_cur).
        let mut t = String::new();
        wait_until("the sessions end", || {
            t = cli_cmd(sock, "show table fe");
            let d = table_data(&t);
            d.len() == 2 && d.iter().all(|l| l.contains(" use=0 "))
        });
        let mut d = table_data(&t);
        d.sort();
        tables.push(d);
    }
    assert_eq!(
        tables[0],
        [
            // `=` escaped, as HAProxy's `show table` writes a key.
            "key=/a?x\\=1 use=0 gpc0=1 conn_cnt=1",
            "key=/b use=0 gpc0=1 conn_cnt=1"
        ]
    );
    if tables.len() == 2 {
        assert_eq!(tables[0], tables[1], "ebb vs HAProxy");
    }
}

/// `WAIT_END` (HAProxy's predefined ACL on `wait_end`): while more input
/// may come within `inspect-delay` it has no answer and the walk waits on
/// it; once the input is final (here the client's FIN) it holds, as it
/// does at once without a delay.
#[test]
fn wait_end_holds_once_the_input_is_final() {
    let echo = first_line_server();
    for (i, (rules, want)) in [
        (
            "    tcp-request inspect-delay 30s\n    tcp-request content reject unless WAIT_END\n",
            "hello\r\n",
        ),
        ("    tcp-request content reject if WAIT_END\n", ""),
    ]
    .iter()
    .enumerate()
    {
        let dir = scratch(&format!("tcp-rules-waitend{i}"));
        let body = format!("frontend f\n    bind BIND\n{rules}    default_backend b\nbackend b\n    server s {echo}\n");
        let (_e, _h, targets) = side_by_side(&dir, &body);
        for (j, (addr, _)) in targets.iter().enumerate() {
            let got = session(*addr, b"hello\r\n").unwrap_or_default();
            assert_eq!(
                String::from_utf8_lossy(&got),
                *want,
                "rules {i}, run {j} (0: ebb, 1: haproxy)"
            );
        }
    }
}

/// `internal.strm.is_htx`: false in a tcp session (as HAProxy's, whose tcp
/// streams hold raw bytes), true in an HTTP exchange.
#[test]
fn is_htx_tells_http_exchanges_from_tcp_sessions() {
    let echo = first_line_server();
    let dir = scratch("tcp-rules-ishtx");
    let body = format!(
        "frontend f\n    bind BIND\n    tcp-request content reject if {{ internal.strm.is_htx }}\n    default_backend b\nbackend b\n    server s {echo}\n"
    );
    let (_e, _h, targets) = side_by_side(&dir, &body);
    for (j, (addr, _)) in targets.iter().enumerate() {
        let got = session(*addr, b"hello\r\n").unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&got),
            "hello\r\n",
            "run {j} (0: ebb, 1: haproxy)"
        );
    }
    let dir = scratch("tcp-rules-ishtx-http");
    let body = "frontend f\n    mode http\n    bind BIND\n    http-request return status 200 hdr x-htx \"%[internal.strm.is_htx]\"\n";
    let (_e, _h, targets) = side_by_side(&dir, body);
    for (j, (addr, _)) in targets.iter().enumerate() {
        let mut c = Client::connect(*addr);
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.read_resp().header("x-htx"), Some("1"), "run {j}");
    }
}

/// `http-request silent-drop`: the connection is dropped (no answer, no
/// FIN; no reset either with TCP_REPAIR), the request logged as denied
/// (`PR`), as tcp-request content's.
#[test]
fn http_request_silent_drop_resets() {
    let e = Ebb::start(&format!(
        "global\n    log stdout format raw local0\n{DEFAULTS}    log global\n    option httplog\n\
         frontend fe\n    mode http\n    bind BIND\n    http-request silent-drop if {{ path /sd }}\n    http-request reject if {{ path /rj }}\n    http-request return status 200\n"
    ));
    let mut c = Client::connect(e.addr());
    c.send(b"GET /sd HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_silently_dropped(&mut c.s);
    let l = e.wait_stdout("\"GET /sd HTTP/1.1\"", LONG).unwrap();
    assert!(l.contains(" -1 0 - - PR-- "), "{l}");
    // `reject` by the frontend's http-request rules: the request line is
    // logged (HAProxy 2.6 logs it too; only the frontend's tcp-request
    // content rules, which run before the request is parsed, give
    // "<BADREQ>").
    let mut c = Client::connect(e.addr());
    c.send(b"GET /rj HTTP/1.1\r\nHost: h\r\n\r\n");
    assert!(c.closed());
    let l = e.wait_stdout("\"GET /rj HTTP/1.1\"", LONG).unwrap();
    assert!(
        l.contains(" fe fe/<NOSRV> -1/-1/-1/-1/") && l.contains(" -1 0 - - PR-- "),
        "{l}"
    );
    assert_eq!(get(e.addr(), "/ok").status, 200);
}

/// A TLS server (certificate for `origin.test`, written as `dir/ca.pem`)
/// that answers each connection, once a request came, with an HTTP/1.0
/// response whose body tells the SNI and ALPN protocol the client gave
/// (`sni=NAME alpn=PROTO`, `-` for none). It accepts the protocols `foo`
/// and `http/1.1`.
fn tls_echo_server(dir: &Path) -> SocketAddr {
    use std::sync::Arc;
    let ck = rcgen::generate_simple_self_signed(vec!["origin.test".to_string()]).unwrap();
    std::fs::write(dir.join("ca.pem"), ck.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.key_pair.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![ck.cert.der().clone()], key)
    .unwrap();
    config.alpn_protocols = vec![b"foo".to_vec(), b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut t = rustls::StreamOwned::new(conn, s);
                let mut b = [0u8; 4096];
                if !matches!(t.read(&mut b), Ok(n) if n > 0) {
                    return;
                }
                let sni = t.conn.server_name().unwrap_or("-").to_string();
                let alpn = t
                    .conn
                    .alpn_protocol()
                    .map_or("-".to_string(), |p| String::from_utf8_lossy(p).into_owned());
                let body = format!("sni={sni} alpn={alpn}");
                let _ = t.write_all(
                    format!(
                        "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
                let _ = t.flush();
                t.conn.send_close_notify();
                let _ = t.flush();
                let mut sink = Vec::new();
                let _ = t.read_to_end(&mut sink);
            });
        }
    });
    addr
}

/// `tcp-check connect` and `http-check connect` with `ssl`, `sni`,
/// `alpn` and `proto` (HAProxy 2.6's meaning): TLS with the server's
/// settings although the server has no `ssl`, the name and protocols
/// sent, the protocol spoken on the connection, and the reports
/// (`check_status`, `last_chk`) side by side with haproxy.
#[test]
fn check_connect_ssl_sni_alpn_proto_as_haproxy() {
    let dir = scratch("check-connect-ssl");
    let t = tls_echo_server(&dir);
    let ca = dir.join("ca.pem");
    // An HTTP origin over TLS that speaks h2 and HTTP/1.1.
    let pem = dir.join("h2.pem");
    self_signed_pem(&pem, "localhost");
    let h2 = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout client 10s\n\
         frontend o\n    bind BIND ssl crt {} alpn h2,http/1.1\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"ver=%[req.ver]\"\n",
        pem.display()
    ));
    let h2 = h2.addrs[0];
    let srv = |a: SocketAddr, extra: &str| {
        format!("    server s {a} check inter 300ms fall 1 rise 1 {extra}\n")
    };
    let none = "verify none";
    let cp = closed_port();
    let req = "    tcp-check send \"GET / HTTP/1.0\\r\\n\\r\\n\"\n";
    let cases: Vec<(&str, String, (&str, &str))> = vec![
        (
            "sni_alpn",
            format!("    option tcp-check\n    tcp-check connect ssl sni chk.test alpn bar,foo\n{req}    tcp-check expect string \"sni=chk.test alpn=foo\"\n{}", srv(t, none)),
            ("L7OK", "(tcp-check)"),
        ),
        (
            "bare",
            format!("    option tcp-check\n    tcp-check connect ssl\n{req}    tcp-check expect string \"sni=- alpn=-\"\n{}", srv(t, none)),
            ("L7OK", "(tcp-check)"),
        ),
        (
            "srv_alpn",
            format!("    option tcp-check\n    tcp-check connect ssl port {}\n{req}    tcp-check expect string \"alpn=foo\"\n{}", t.port(), srv(cp.addr, &format!("{none} alpn foo"))),
            ("L7OK", "(tcp-check)"),
        ),
        (
            "only",
            format!("    option tcp-check\n    tcp-check connect ssl\n{}", srv(t, none)),
            ("L6OK", "(tcp-check)"),
        ),
        (
            "plain",
            format!("    option tcp-check\n    tcp-check connect proto none\n{req}    tcp-check expect string \"sni=\"\n{}", srv(t, none)),
            ("L7RSP", "TCPCHK did not match content 'sni=' at step 3"),
        ),
        (
            "verified",
            format!("    option tcp-check\n    tcp-check connect ssl sni origin.test\n{req}    tcp-check expect string sni=origin.test\n{}", srv(t, &format!("verify required ca-file {}", ca.display()))),
            ("L7OK", "(tcp-check)"),
        ),
        (
            "wrong_name",
            format!("    option tcp-check\n    tcp-check connect ssl sni wrong.test\n{req}    tcp-check expect string sni=\n{}", srv(t, &format!("verify required ca-file {}", ca.display()))),
            ("L6RSP", "Server presented an SSL certificate different from the expected one at step 1 of tcp-check (connect)"),
        ),
        (
            "http_sni",
            format!("    option httpchk\n    http-check connect ssl sni chk.test alpn http/1.1\n    http-check send meth GET uri /\n    http-check expect string \"sni=chk.test alpn=http/1.1\"\n{}", srv(t, none)),
            ("L7OK", ""),
        ),
        (
            "http_h2_alpn",
            format!("    option httpchk\n    http-check connect ssl alpn h2\n    http-check send meth GET uri /\n    http-check expect string ver=2.0\n{}", srv(h2, none)),
            ("L7OK", ""),
        ),
        (
            "http_h2_proto",
            format!("    option httpchk\n    http-check connect ssl proto h2\n    http-check send meth GET uri /\n    http-check expect string ver=2.0\n{}", srv(h2, none)),
            ("L7OK", ""),
        ),
        (
            "http_h1_proto",
            format!("    option httpchk\n    http-check connect ssl alpn http/1.1,h2 proto h1\n    http-check send meth GET uri /\n    http-check expect string ver=1.1\n{}", srv(h2, none)),
            ("L7RSP", "no status line"),
        ),
    ];
    let mut body = "frontend f\n    bind BIND\n    default_backend sni_alpn\n".to_string();
    for (be, rules, _) in &cases {
        body.push_str(&format!("backend {be}\n{rules}"));
    }
    let (_e, _h, targets) = side_by_side(&dir, &body);
    let mut seen = Vec::new();
    for (_, sock) in &targets {
        let rows: Vec<(String, String)> = cases
            .iter()
            .map(|(be, _, _)| {
                let r = checked_row(sock, be);
                let f = |k: &str| r.get(k).cloned().unwrap_or_default();
                (f("check_status"), f("last_chk"))
            })
            .collect();
        seen.push(rows);
    }
    let want: Vec<(String, String)> = cases
        .iter()
        .map(|(_, _, (a, b))| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(seen[0], want, "ebb");
    if let Some(h) = seen.get(1) {
        let mut h = h.clone();
        let at = |n: &str| cases.iter().position(|c| c.0 == n).unwrap();
        // An answer that is not HTTP/1: HAProxy's report has no text,
        // ebb's says why (as for the default connection).
        let i = at("http_h1_proto");
        assert_eq!(h[i], ("L7RSP".to_string(), String::new()), "haproxy");
        h[i] = seen[0][i].clone();
        // `proto h2` without ALPN on a `connect ssl` connection: Debian's
        // HAProxy 2.6.12 reports L7TOUT (its connect bound, `inter`,
        // passes), where the same request with `alpn h2` passes; ebb
        // speaks HTTP/2 as asked and reads it.
        let i = at("http_h2_proto");
        h[i] = seen[0][i].clone();
        assert_eq!(seen[0], h, "ebb (left) and HAProxy (right)");
    }
}

/// `ok-status L7OKC` and `error-status L7OKC` (in any case, as HAProxy
/// reads them) on `tcp-check` and `http-check` expects: a conditional
/// pass that takes the server out of load balancing (NOLB); a failed
/// expect reported L7OKC still ends the sequence. Side by side with
/// haproxy.
#[test]
fn l7okc_statuses_as_haproxy() {
    let hello = scripted(&[(0, b"hello\n")], false);
    let bye = scripted(&[(0, b"hello\n")], true);
    let http = scripted(
        &[(0, b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")],
        true,
    );
    let srv = |a: SocketAddr| format!("    server s {a} check inter 300ms fall 1 rise 1\n");
    let cases: Vec<(&str, String, (&str, &str, &str))> = vec![
        (
            "tcp_ok",
            format!("    option tcp-check\n    tcp-check expect string hello ok-status l7okc\n{}", srv(hello)),
            ("L7OKC", "(tcp-check)", "NOLB"),
        ),
        (
            "tcp_err",
            format!("    option tcp-check\n    tcp-check expect string bye error-status L7OKC\n{}", srv(bye)),
            ("L7OKC", "TCPCHK did not match content 'bye' at step 1", "NOLB"),
        ),
        (
            "http_ok",
            format!("    option httpchk\n    http-check expect status 200 ok-status L7OKC\n{}", srv(http)),
            ("L7OKC", "", "NOLB"),
        ),
        (
            "http_err",
            format!("    option httpchk\n    http-check expect status 500 error-status L7OKC\n    http-check expect string nope\n{}", srv(http)),
            ("L7OKC", "OK", "NOLB"),
        ),
    ];
    let mut body = "frontend f\n    bind BIND\n    default_backend tcp_ok\n".to_string();
    for (be, rules, _) in &cases {
        body.push_str(&format!("backend {be}\n{rules}"));
    }
    let dir = scratch("l7okc");
    let (_e, _h, targets) = side_by_side(&dir, &body);
    let mut seen = Vec::new();
    for (_, sock) in &targets {
        let rows: Vec<(String, String, String)> = cases
            .iter()
            .map(|(be, _, _)| {
                let mut r = checked_row(sock, be);
                wait_until(&format!("{be} NOLB"), || {
                    r = stat_row(sock, be, "s");
                    r.get("status").is_some_and(|s| s != "UP")
                });
                let f = |k: &str| r.get(k).cloned().unwrap_or_default();
                (f("check_status"), f("last_chk"), f("status"))
            })
            .collect();
        seen.push(rows);
    }
    let want: Vec<(String, String, String)> = cases
        .iter()
        .map(|(_, _, (a, b, c))| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(seen[0], want, "ebb");
    if let Some(h) = seen.get(1) {
        assert_eq!(&seen[0], h, "ebb (left) and HAProxy (right)");
    }
}

/// `tcp-check expect` and `http-check expect` `on-success`/`on-error`
/// log-format strings and
/// `status-code` sample expressions (HAProxy 2.6's): rendered with the
/// answer (`res.payload`), the names and the check's code; compared with
/// haproxy's `last_chk` and `check_code`.
#[test]
fn check_messages_are_log_formats_as_haproxy() {
    let up = scripted(&[(5, b"204 fine\r\n")], false);
    let down = scripted(&[(5, b"503 busy\r\n")], true);
    let rules = "    option tcp-check\n    tcp-check send \"ping\\n\"\n    tcp-check expect rstring ^2 on-success \"code=%[res.payload(0,3)] in %[be_name]/%[srv_name]\" on-error \"got [%[res.payload(4,4)]] on %[srv_name]\" status-code \"res.payload(0,1),concat(9)\"\n";
    let fixed = "    option tcp-check\n    tcp-check send \"ping\\n\"\n    tcp-check expect rstring ^2 on-success \"%%-sign\" status-code int(42) min-recv 4\n";
    let h200 = scripted(
        &[(
            0,
            b"HTTP/1.0 200 OK\r\nX-Code: 42\r\nContent-Length: 2\r\n\r\nok",
        )],
        true,
    );
    let h503 = scripted(
        &[(
            0,
            b"HTTP/1.0 503 Busy\r\nX-Code: 7\r\nContent-Length: 4\r\n\r\nbusy",
        )],
        true,
    );
    let http = "    option httpchk\n    http-check expect status 200 on-success \"fine %[res.hdr(x-code)]\" on-error \"bad %[res.hdr(x-code)] on %[srv_name]\" status-code res.hdr(x-code) comment C\n";
    let body = format!(
        "frontend f\n    bind BIND\n    default_backend up\nbackend up\n{rules}    server s {up} check inter 300ms fall 1 rise 1\nbackend down\n{rules}    server s {down} check inter 300ms fall 1 rise 1\nbackend fixed\n{fixed}    server s {up} check inter 300ms fall 1 rise 1\n\
         backend h_up\n{http}    server s {h200} check inter 300ms fall 1 rise 1\nbackend h_down\n{http}    server s {h503} check inter 300ms fall 1 rise 1\n"
    );
    let backends = ["up", "down", "fixed", "h_up", "h_down"];
    let seen = check_reports("tcp-check-lf", &body, &backends);
    let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        seen[0],
        vec![
            s("L7OK", "29", "code=204 in up/s"),
            // (L7RSP shows no code.)
            s("L7RSP", "", "got [busy] on s"),
            s("L7OK", "42", "%-sign"),
            s("L7OK", "42", "fine 42"),
            s("L7STS", "7", "bad 7 on s comment: C"),
        ]
    );
    if let Some(h) = seen.get(1) {
        assert_eq!(&seen[0], h, "ebb (left) and HAProxy (right)");
    }
}

/// `tcp-check set-var`/`unset-var`, `send-lf`/`send-binary-lf` with
/// fields and `expect string-lf`/`binary-lf`, `http-check expect
/// string-lf` (HAProxy 2.6's): variables
/// set before the connect are read by the steps after it, patterns are
/// rendered at each check; an empty pattern is L7RSP with HAProxy's text.
/// Side by side with haproxy.
#[test]
fn tcp_check_variables_and_log_format_steps_as_haproxy() {
    let echo = scripted(&[(8, b"hello-back\n")], false);
    let pong = scripted(&[(5, b"+PONG\r\n")], false);
    let fine = scripted(&[(5, b"204 fine\r\n")], true);
    let h200 = scripted(
        &[(0, b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")],
        true,
    );
    let srv = |a: SocketAddr| format!("    server s {a} check inter 300ms fall 1 rise 1\n");
    let body = format!(
        "frontend f\n    bind BIND\n    default_backend vars\n\
         backend vars\n    option tcp-check\n    tcp-check set-var(check.greet) str(hello)\n    tcp-check connect\n    tcp-check send-lf \"%[var(check.greet)] %[srv_name]\\n\"\n    tcp-check expect string-lf \"%[var(check.greet)]-back\"\n{}\
         backend bin\n    option tcp-check\n    tcp-check set-var(check.h) str(50494E47)\n    tcp-check send-binary-lf \"%[var(check.h)]0A\"\n    tcp-check expect binary-lf \"2B%[str(504F4E47)]\"\n{}\
         backend unset\n    option tcp-check\n    tcp-check set-var(check.x) str(zz)\n    tcp-check unset-var(check.x)\n    tcp-check send \"ping\\n\"\n    tcp-check expect string-lf \"%[var(check.x)]\" comment C\n{}\
         backend miss\n    option tcp-check\n    tcp-check send \"ping\\n\"\n    tcp-check expect string-lf \"x%[srv_name]\"\n{}\
         backend h_lf\n    option httpchk\n    http-check set-var(check.w) str(ok)\n    http-check expect string-lf \"%[var(check.w)]\"\n{}\
         backend h_empty\n    option httpchk\n    http-check expect string-lf \"%[var(check.none)]\"\n{}",
        srv(echo),
        srv(pong),
        srv(fine),
        srv(fine),
        srv(h200),
        srv(h200)
    );
    let bes = ["vars", "bin", "unset", "miss", "h_lf", "h_empty"];
    let seen = check_reports("tcp-check-vars", &body, &bes);
    // (A code shows from L7OK on.)
    let s = |a: &str, c: &str| {
        let code = if a == "L7OK" { "0" } else { "" };
        (a.to_string(), code.to_string(), c.to_string())
    };
    let h = |a: &str, code: &str, c: &str| (a.to_string(), code.to_string(), c.to_string());
    assert_eq!(
        seen[0],
        vec![
            s("L7OK", "(tcp-check)"),
            s("L7OK", "(tcp-check)"),
            s(
                "L7RSP",
                "log-format string evaluated to an empty string comment: C"
            ),
            s(
                "L7RSP",
                "TCPCHK did not match content (log-format string) at step 2"
            ),
            h("L7OK", "200", ""),
            h(
                "L7RSP",
                "",
                "log-format string evaluated to an empty string"
            ),
        ]
    );
    if let Some(h) = seen.get(1) {
        assert_eq!(&seen[0], h, "ebb (left) and HAProxy (right)");
    }
}
