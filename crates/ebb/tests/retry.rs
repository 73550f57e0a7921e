//! `retry-on` and layer-7 retries, each beside Debian's haproxy 2.6 when
//! it is installed: scripted servers that close without answering, answer
//! junk, never answer, or answer 503 before a good answer; what the
//! client gets, what each attempt brought to the server (a POST's body
//! replayed whole, a body larger than a buffer never replayed), the log's
//! `%ts` and `%rc`, and `show stat`'s `wretr`/`wredis`.

mod common;

use common::*;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What a scripted server does with an attempt.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Closes without a byte of answer.
    Close,
    /// Answers bytes that are not an HTTP response.
    Junk,
    /// Never answers (until the proxy closes).
    Stall,
    /// Answers this status (body `no`).
    Status(u16),
    /// Answers 200, body `ok NAME N` (N: the attempt's number from 1).
    Ok,
}

/// A request a scripted server received: its request line and its body.
type Seen = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A server acting on its attempts (counted across connections) in the
/// order of `script`, the last act repeated; one request per connection.
struct Scripted {
    addr: SocketAddr,
    seen: Seen,
}

impl Scripted {
    fn start(name: &'static str, script: &[Act]) -> Scripted {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let seen: Seen = Arc::default();
        let (s2, script) = (Arc::clone(&seen), script.to_vec());
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { return };
                let (s3, script) = (Arc::clone(&s2), script.clone());
                std::thread::spawn(move || serve(name, c, &s3, &script));
            }
        });
        Scripted { addr, seen }
    }

    fn attempts(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

fn serve(name: &str, mut c: TcpStream, seen: &Seen, script: &[Act]) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 65536];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match c.read_retry(&mut tmp) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < end + len {
        match c.read_retry(&mut tmp) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    let line = head.lines().next().unwrap_or("").to_string();
    let body = buf[end..].to_vec();
    let n = {
        let mut s = seen.lock().unwrap();
        s.push((line, body));
        s.len()
    };
    let act = script[(n - 1).min(script.len() - 1)];
    match act {
        Act::Close => {}
        Act::Junk => {
            let _ = c.write_all(b"this is not http\r\n\r\n");
        }
        Act::Stall => while matches!(c.read_retry(&mut tmp), Ok(k) if k > 0) {},
        Act::Status(s) => {
            let _ = c.write_all(
                format!("HTTP/1.1 {s} Nope\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno")
                    .as_bytes(),
            );
        }
        Act::Ok => {
            let b = format!("ok {name} {n}");
            let _ = c.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                    b.len()
                )
                .as_bytes(),
            );
        }
    }
}

/// The configuration: `backends` after a frontend that sends `/NAME...`
/// to backend NAME; the log line is `%b/%s %ST %ts %rc`.
fn cfg(sock: &Path, bind: &str, log: SocketAddr, backends: &str) -> String {
    let mut c = format!(
        "global\n    stats socket {} level admin\n    log {log} local0\n\
         defaults\n    mode http\n    log global\n    timeout connect 2s\n    timeout client 20s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    log-format \"%b/%s %ST %ts %rc\"\n",
        sock.display()
    );
    for l in backends.lines() {
        if let Some(b) = l.strip_prefix("backend ") {
            c.push_str(&format!("    use_backend {b} if {{ path_beg /{b} }}\n"));
        }
    }
    c.push_str(backends);
    c
}

/// Runs `check` against ebb, then against haproxy (when installed), each
/// with fresh servers from `servers` and the configuration's backends
/// from `backends` (given the servers' addresses).
fn both<S>(
    name: &str,
    servers: impl Fn() -> S,
    backends: impl Fn(&S) -> String,
    check: impl Fn(&str, SocketAddr, &Path, &Syslog, &S),
) {
    {
        let s = servers();
        let log = Syslog::new();
        let (ebb, sock) = ebb_with_admin(name, |k, b| cfg(k, b, log.addr(), &backends(&s)));
        check("ebb", ebb.addr(), &sock, &log, &s);
    }
    let s = servers();
    let log = Syslog::new();
    let Some((h, addr)) = haproxy_beside(name, |k, b| cfg(k, b, log.addr(), &backends(&s))) else {
        return;
    };
    check("haproxy", addr, &h.sock, &log, &s);
}

/// `retry-on 503`: the 503 is dropped with its connection and the request
/// goes again, to the same server; the client sees only the 200. HAProxy
/// counts such a retry twice in the server's `wretr` (once as a retry,
/// once as an attempt on the same server). Without a retry left, the
/// server's 503 goes to the client, `%rc` saying how many were made.
#[test]
fn status_retried_on_same_server() {
    both(
        "retry503",
        || {
            (
                Scripted::start("a", &[Act::Status(503), Act::Ok]),
                Scripted::start("z", &[Act::Status(503)]),
            )
        },
        |(a, z)| {
            format!(
                "backend st\n    retry-on 503\n    server a {}\n\
                 backend ex\n    retries 2\n    retry-on 503 504\n    server z {}\n",
                a.addr, z.addr
            )
        },
        |who, fe, sock, log, (a, z)| {
            let r = get(fe, "/st");
            assert_eq!((r.status, r.text()), (200, "ok a 2".to_string()), "{who}");
            assert_eq!(a.attempts(), 2, "{who}");
            assert_eq!(log.next("st/"), "st/a 200 -- 1", "{who}");
            assert_eq!(stat_row(sock, "st", "a")["wretr"], "2", "{who}");
            assert_eq!(stat_row(sock, "st", "a")["wredis"], "0", "{who}");
            let r = get(fe, "/ex");
            assert_eq!(r.status, 503, "{who}: the server's own 503");
            assert_eq!(r.text(), "no", "{who}");
            assert_eq!(z.attempts(), 3, "{who}: the first and 2 retries");
            assert_eq!(log.next("ex/"), "ex/z 503 -- 2", "{who}");
            println!("{who}: as expected");
        },
    );
}

/// `empty-response` (a close without an answer, or with a head cut
/// short), `junk-response` (not HTTP) and `response-timeout` (`timeout
/// server` before the head): each retried when listed, not otherwise (the
/// default `conn-failure` only: a 502 or 504 at the first failure).
#[test]
fn failures_retried_when_listed() {
    both(
        "retryfail",
        || {
            [
                Scripted::start("e", &[Act::Close, Act::Ok]),
                Scripted::start("j", &[Act::Junk, Act::Ok]),
                Scripted::start("t", &[Act::Stall, Act::Ok]),
                Scripted::start("n", &[Act::Close, Act::Ok]),
                Scripted::start("m", &[Act::Junk, Act::Ok]),
                Scripted::start("k", &[Act::Junk, Act::Junk]),
            ]
        },
        |s| {
            format!(
                "backend em\n    retry-on empty-response\n    server e {}\n\
                 backend ju\n    retry-on junk-response\n    server j {}\n\
                 backend to\n    retry-on response-timeout\n    timeout server 1s\n    server t {}\n\
                 backend no\n    server n {}\n\
                 backend ot\n    retry-on empty-response response-timeout 502\n    server m {}\n\
                 backend jj\n    retry-on junk-response\n    retries 1\n    server k {}\n",
                s[0].addr, s[1].addr, s[2].addr, s[3].addr, s[4].addr, s[5].addr
            )
        },
        |who, fe, _sock, log, s| {
            for (path, name) in [("/em", "e"), ("/ju", "j"), ("/to", "t")] {
                let r = get(fe, path);
                assert_eq!(r.status, 200, "{who} {path}");
                assert_eq!(r.text(), format!("ok {name} 2"), "{who} {path}");
                let b = &path[1..];
                assert_eq!(log.next(&format!("{b}/")), format!("{b}/{name} 200 -- 1"));
            }
            assert_eq!(get(fe, "/no").status, 502, "{who}");
            assert_eq!(s[3].attempts(), 1, "{who}");
            assert_eq!(log.next("no/"), "no/n 502 SH 0", "{who}");
            // Junk is not an empty response (nor a 502 from the server);
            // a refused answer is the proxy's `PH`, retried or not.
            assert_eq!(get(fe, "/ot").status, 502, "{who}");
            assert_eq!(s[4].attempts(), 1, "{who}");
            assert_eq!(log.next("ot/"), "ot/m 502 PH 0", "{who}");
            assert_eq!(get(fe, "/jj").status, 502, "{who}");
            assert_eq!(s[5].attempts(), 2, "{who}");
            assert_eq!(log.next("jj/"), "jj/k 502 PH 1", "{who}");
            println!("{who}: as expected");
        },
    );
}

/// A POST whose body came with its head is sent again whole; a body
/// larger than a buffer (it streamed to the server) is never replayed,
/// nor a request an `http-request disable-l7-retry` rule marked.
#[test]
fn bodies_and_disable_l7_retry() {
    both(
        "retrybody",
        || {
            [
                Scripted::start("p", &[Act::Close, Act::Ok]),
                Scripted::start("l", &[Act::Close, Act::Ok]),
                Scripted::start("d", &[Act::Status(503)]),
            ]
        },
        |s| {
            format!(
                "backend po\n    retry-on empty-response\n    server p {}\n\
                 backend lg\n    retry-on empty-response\n    server l {}\n\
                 backend di\n    retry-on 503\n    http-request disable-l7-retry if METH_POST\n    server d {}\n",
                s[0].addr, s[1].addr, s[2].addr
            )
        },
        |who, fe, _sock, log, s| {
            let body = b"name=value&other=1";
            let mut c = Client::connect(fe);
            let mut req = format!(
                "POST /po HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            req.extend_from_slice(body);
            c.send(&req);
            let r = c.read_resp();
            assert_eq!((r.status, r.text()), (200, "ok p 2".to_string()), "{who}");
            {
                let seen = s[0].seen.lock().unwrap();
                assert_eq!(seen.len(), 2, "{who}");
                for (line, b) in seen.iter() {
                    assert_eq!(line, "POST /po HTTP/1.1", "{who}");
                    assert_eq!(b, body, "{who}: the body replayed whole");
                }
            }
            assert_eq!(log.next("po/"), "po/p 200 -- 1", "{who}");
            // 256 KiB: more than a buffer, it streams.
            let big = vec![b'x'; 256 * 1024];
            let mut c = Client::connect(fe);
            let mut req = format!(
                "POST /lg HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                big.len()
            )
            .into_bytes();
            req.extend_from_slice(&big);
            c.send(&req);
            let r = c.read_resp();
            assert_eq!(r.status, 502, "{who}: not replayed");
            assert_eq!(s[1].attempts(), 1, "{who}");
            assert_eq!(s[1].seen.lock().unwrap()[0].1.len(), big.len(), "{who}");
            assert_eq!(log.next("lg/"), "lg/l 502 SH 0", "{who}");
            // disable-l7-retry: the POST's 503 goes through; a GET retries.
            let mut c = Client::connect(fe);
            c.send(
                b"POST /di HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
            );
            assert_eq!(c.read_resp().status, 503, "{who}");
            assert_eq!(s[2].attempts(), 1, "{who}");
            assert_eq!(log.next("di/"), "di/d 503 -- 0", "{who}");
            assert_eq!(get(fe, "/di").status, 503, "{who}");
            assert_eq!(s[2].attempts(), 5, "{who}: 1 + the default 3 retries");
            assert_eq!(log.next("di/"), "di/d 503 -- 3", "{who}");
            println!("{who}: as expected");
        },
    );
}

/// With `option redispatch`, the retry goes to another server (here the
/// last and only retry, where HAProxy 2.6.0 and 2.6.12 agree): `%rc`
/// written `+1`, the failed server's `wretr` and `wredis` 1 each. Without
/// `conn-failure` in `retry-on`, a failed connect is not retried at all.
#[test]
fn redispatch_and_no_conn_failure() {
    let dead = free_port();
    both(
        "retryredisp",
        || {
            (
                Scripted::start("a", &[Act::Status(503)]),
                Scripted::start("b", &[Act::Ok]),
                free_port(),
            )
        },
        |(a, b, tc)| {
            format!(
                "backend rd\n    balance first\n    retries 1\n    option redispatch\n    retry-on 503\n    server a {}\n    server b {}\n\
                 backend nc\n    retry-on 503\n    server dead 127.0.0.1:{dead}\n\
                 listen tc\n    mode tcp\n    bind 127.0.0.1:{tc}\n    log-format \"tc/%s %ts %rc\"\n    retry-on none\n    server dead 127.0.0.1:{dead}\n",
                a.addr, b.addr
            )
        },
        |who, fe, sock, log, (a, b, tc)| {
            let r = get(fe, "/rd");
            assert_eq!((r.status, r.text()), (200, "ok b 1".to_string()), "{who}");
            assert_eq!((a.attempts(), b.attempts()), (1, 1), "{who}");
            assert_eq!(log.next("rd/"), "rd/b 200 -- +1", "{who}");
            let row = stat_row(sock, "rd", "a");
            assert_eq!(
                (row["wretr"].as_str(), row["wredis"].as_str()),
                ("1", "1"),
                "{who}"
            );
            assert_eq!(get(fe, "/nc").status, 503, "{who}");
            assert_eq!(log.next("nc/"), "nc/dead 503 SC 0", "{who}");
            let row = stat_row(sock, "nc", "dead");
            assert_eq!(
                (row["econ"].as_str(), row["wretr"].as_str()),
                ("1", "0"),
                "{who}"
            );
            // The same in `mode tcp`, where only `conn-failure` means
            // anything: `none` leaves no connect retry.
            let mut c = Client::connect(SocketAddr::from(([127, 0, 0, 1], *tc)));
            assert!(c.closed(), "{who}");
            assert_eq!(log.next("tc/"), "tc/dead SC 0", "{who}");
            let row = stat_row(sock, "tc", "dead");
            assert_eq!(
                (row["econ"].as_str(), row["wretr"].as_str()),
                ("1", "0"),
                "{who}"
            );
        },
    );
}
