//! A `mode tcp` frontend whose stream becomes HTTP (HAProxy's TCP to
//! HTTP upgrade): implicitly when it reaches a `mode http` backend, or by
//! `tcp-request content switch-mode http [proto h1|h2]`. Through the real
//! binary, side by side with HAProxy 2.6 when it is installed: the
//! status, the fields the server sees, the log lines, keep-alive after the
//! upgrade, HTTP/2 over it, bytes that are not HTTP, `bind ... proto
//! h1|none`. Every wait ends on an event (a read, a line); none is a sleep.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};

use common::*;

/// An HTTP/1.1 origin (keep-alive) answering each GET with the request's
/// head as its body.
fn origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                let mut r = BufReader::new(s);
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        head.push_str(&line);
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let out = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{head}",
                        head.len()
                    );
                    if w.write_all(out.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// The configuration both programs run (the addresses in the order of
/// the frontends: `imp`, `sw`, `plain`, `h2`, `raw`, `h1`, `tcpbe`).
fn config(log: SocketAddr, srv: SocketAddr, binds: &[String]) -> String {
    format!(
        "defaults\n    log {log} local0\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
frontend imp\n    mode tcp\n    option tcplog\n    bind {}\n    default_backend be\n\
frontend sw\n    mode tcp\n    option tcplog\n    bind {}\n    tcp-request inspect-delay 5s\n    tcp-request content set-var(txn.m) internal.strm.is_htx,iif(http,tcp)\n    tcp-request content switch-mode http if HTTP\n    tcp-request content reject\n    http-request set-header x-mode %[var(txn.m)]\n    default_backend be\n\
frontend plain\n    mode tcp\n    bind {}\n    default_backend be\n\
frontend h2\n    mode tcp\n    option tcplog\n    bind {}\n    tcp-request inspect-delay 5s\n    tcp-request content switch-mode http proto h2\n    default_backend be\n\
frontend raw\n    mode tcp\n    option tcplog\n    bind {} proto none\n    tcp-request inspect-delay 5s\n    tcp-request content switch-mode http\n    default_backend be\n\
frontend h1\n    mode tcp\n    option tcplog\n    bind {}\n    tcp-request inspect-delay 5s\n    tcp-request content switch-mode http proto h1\n    default_backend be\n\
frontend tcpbe\n    mode tcp\n    option tcplog\n    bind {}\n    tcp-request inspect-delay 5s\n    tcp-request content switch-mode http\n    default_backend tb\n\
backend be\n    mode http\n    http-request set-header x-be %[be_name]\n    server s1 {srv}\n\
backend tb\n    mode tcp\n    server s1 {srv}\n",
        binds[0], binds[1], binds[2], binds[3], binds[4], binds[5], binds[6]
    )
}

/// One program under test: its frontends' addresses and its log.
struct Side {
    addrs: Vec<SocketAddr>,
    log: Syslog,
}

/// Starts ebb, and HAProxy beside it when installed.
fn both(name: &str) -> (Ebb, Side, Option<(Hap, Side)>) {
    let srv = origin();
    let log = Syslog::new();
    let cfg = config(log.addr(), srv, &vec!["BIND".to_string(); 7]);
    let e = Ebb::start(&cfg);
    let side = Side {
        addrs: e.addrs.clone(),
        log,
    };
    let hlog = Syslog::new();
    let ports: Vec<String> = (0..7)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let hap = haproxy_with(name, &config(hlog.addr(), srv, &ports)).map(|h| {
        // Its frontends listen once its socket answers.
        let addrs = ports.iter().map(|p| p.parse().unwrap()).collect();
        (h, Side { addrs, log: hlog })
    });
    (e, side, hap)
}

/// The programs to check, by name.
fn named<'a>(ebb: &'a Side, hap: &'a Option<(Hap, Side)>) -> Vec<(&'static str, &'a Side)> {
    std::iter::once(("ebb", ebb))
        .chain(hap.as_ref().map(|(_, s)| ("haproxy", s)))
        .collect()
}

/// The text of a log line from its frontend's name on, without the
/// client's port, date and times (they differ between the programs).
fn shape(line: &str) -> String {
    let w: Vec<&str> = line.split_whitespace().collect();
    // `ip:port [date] fe be/srv tw/tc/tt bytes ts counts queues`
    let pick: Vec<&str> = [2usize, 3, 6]
        .iter()
        .filter_map(|&i| w.get(i).copied())
        .collect();
    pick.join(" ")
}

/// Two requests on one connection of frontend `i`: the bodies (the heads
/// the server saw) and statuses.
fn two_requests(a: SocketAddr) -> Vec<(u16, String)> {
    let mut c = Client::connect(a);
    let mut out = Vec::new();
    for p in ["/a", "/b"] {
        c.send(format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let r = c.read_resp();
        out.push((r.status, r.text().to_ascii_lowercase()));
    }
    out
}

#[test]
fn keep_alive_after_implicit_and_explicit_upgrades_as_haproxy() {
    let (_e, ebb, hap) = both("upgrade-ka");
    let sides = named(&ebb, &hap);
    for (who, s) in sides {
        // Implicit: the backend's rules run on each request.
        let r = two_requests(s.addrs[0]);
        for (st, head) in &r {
            assert_eq!(*st, 200, "{who}");
            assert!(head.contains("x-be: be"), "{who}: {head}");
        }
        // The tcplog line of each request, the backend's server.
        for _ in 0..2 {
            let l = s.log.next("127.0.0.1:");
            assert_eq!(shape(&l), "imp be/s1 --", "{who}: {l}");
        }
        // Explicit: the first request is the tcp stream's (its `txn`
        // variable set before the switch), the second a new HTTP one
        // (the content rules run again, `switch-mode` ends them as
        // `accept` and `reject` is never reached).
        let r = two_requests(s.addrs[1]);
        assert_eq!(r[0].0, 200, "{who}");
        assert!(r[0].1.contains("x-mode: tcp"), "{who}: {}", r[0].1);
        assert!(r[1].1.contains("x-mode: http"), "{who}: {}", r[1].1);
        assert!(r[1].1.contains("x-be: be"), "{who}: {}", r[1].1);
        for _ in 0..2 {
            let l = s.log.next("127.0.0.1:");
            assert_eq!(shape(&l), "sw be/s1 --", "{who}: {l}");
        }
        // Without a log format: HAProxy's line at each stream's start,
        // one per request after the upgrade in place.
        let a = s.addrs[2];
        let r = two_requests(a);
        assert!(r.iter().all(|(st, _)| *st == 200), "{who}");
        for _ in 0..2 {
            let l = s.log.next("Connect from");
            assert!(l.ends_with(&format!("to {a} (plain/TCP)")), "{who}: {l}");
        }
        // One more request on a new connection: its line is the next
        // one (no third line came for the two above).
        let _ = two_requests(s.addrs[0]);
        let l = s.log.next("");
        assert!(!l.starts_with("Connect from"), "{who}: {l}");
    }
}

#[test]
fn http2_over_the_upgrade_as_haproxy() {
    // nghttp runs both requests on one connection (curl 7.88 with
    // prior knowledge does not send a second URL's).
    if !have("nghttp") {
        println!("nghttp is not installed: not checked");
        return;
    }
    let (_e, ebb, hap) = both("upgrade-h2");
    let sides = named(&ebb, &hap);
    for (who, s) in sides {
        // Prior knowledge on an implicit upgrade, on `switch-mode http`
        // (the preface says HTTP/2), and on `proto h2`: two streams on one
        // connection, each a new HTTP stream (the frontend's rules run on
        // each: `x-mode` says http).
        for (i, fe) in [(0usize, "imp"), (1, "sw"), (3, "h2")] {
            let u = |p: &str| format!("http://{}/{p}", s.addrs[i]);
            let o = std::process::Command::new("nghttp")
                .args(["-t", "30", &u("a"), &u("b")])
                .output()
                .unwrap();
            let out = String::from_utf8_lossy(&o.stdout).to_ascii_lowercase();
            assert!(o.status.success(), "{who} {fe}: {o:?}");
            assert!(
                out.contains("get /a http/1.1") && out.contains("get /b http/1.1"),
                "{who} {fe}: {out}"
            );
            assert_eq!(out.matches("x-be: be").count(), 2, "{who} {fe}: {out}");
            if fe == "sw" {
                assert_eq!(out.matches("x-mode: http").count(), 2, "{who}: {out}");
            }
            for _ in 0..2 {
                let l = s.log.next("127.0.0.1:");
                assert_eq!(shape(&l), format!("{fe} be/s1 --"), "{who}: {l}");
            }
        }
        // `proto h2` and an HTTP/1 request: no answer.
        let mut c = Client::connect(s.addrs[3]);
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.read_resp_opt(false);
        assert!(r.is_none(), "{who}: {r:?}");
    }
}

#[test]
fn bytes_that_are_not_http_after_the_switch_as_haproxy() {
    let (_e, ebb, hap) = both("upgrade-bad");
    let sides = named(&ebb, &hap);
    for (who, s) in sides {
        // Not HTTP after an implicit upgrade: 400 and close.
        let mut c = Client::connect(s.addrs[0]);
        c.send(b"GARBAGE\r\n\r\n");
        assert_eq!(c.read_resp().status, 400, "{who}");
        assert!(c.closed(), "{who}");
        let l = s.log.next("127.0.0.1:");
        assert_eq!(shape(&l), "imp imp/<NOSRV> PR", "{who}: {l}");
        // Not HTTP where `switch-mode http if HTTP` waits: the rules
        // decide at the end of the input (reject: closed, no answer).
        let mut c = Client::connect(s.addrs[1]);
        c.send(b"GARBAGE\r\n\r\n");
        c.s.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(c.read_resp_opt(false).is_none(), "{who}");
        let l = s.log.next("127.0.0.1:");
        assert_eq!(shape(&l), "sw sw/<NOSRV> PR", "{who}: {l}");
        // `proto h1`: the HTTP/2 preface is a bad request.
        let mut c = Client::connect(s.addrs[5]);
        c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        assert_eq!(c.read_resp().status, 400, "{who}");
        let _ = s.log.next("127.0.0.1:");
        // `bind ... proto none`: the stream may not become HTTP.
        let mut c = Client::connect(s.addrs[4]);
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(c.read_resp_opt(false).is_none(), "{who}");
        let l = s.log.next("127.0.0.1:");
        assert_eq!(shape(&l), "raw raw/<NOSRV> PR", "{who}: {l}");
        // An upgraded stream routed to a tcp backend: closed without an
        // answer, logged `IR` (an internal error, not a denied request).
        let mut c = Client::connect(s.addrs[6]);
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(c.read_resp_opt(false).is_none(), "{who}");
        let l = s.log.next("127.0.0.1:");
        assert_eq!(shape(&l), "tcpbe tb/<NOSRV> IR", "{who}: {l}");
    }
}

#[test]
fn switch_mode_refusals_match_haproxy() {
    let d = scratch("upgrade-refused");
    let tail = "    default_backend b\nbackend b\n    mode http\n    server s 127.0.0.1:1\n";
    for (rule, what) in [
        (
            "tcp-request content switch-mode tcp",
            "expects a valid mode",
        ),
        ("tcp-request content switch-mode", "expects a mode"),
        (
            "tcp-request content switch-mode http proto fcgi",
            "not compatible",
        ),
        (
            "tcp-request content switch-mode http proto foo",
            "valid MUX protocol",
        ),
        ("tcp-request session switch-mode http", "not supported"),
    ] {
        let text = format!("frontend f\n    mode tcp\n    bind 127.0.0.1:0\n    {rule}\n{tail}");
        assert_refused(&d, "f.cfg", &text, what, true);
    }
    let text = format!(
        "frontend f\n    mode tcp\n    bind 127.0.0.1:0\n{tail}    tcp-request content switch-mode http\n"
    );
    assert_refused(&d, "b.cfg", &text, "no frontend capability", true);
    for (bind, mode) in [
        ("proto h1", "tcp"),
        ("proto h2", "tcp"),
        ("proto none", "http"),
    ] {
        let text = format!("frontend f\n    mode {mode}\n    bind 127.0.0.1:0 {bind}\n{tail}");
        assert_refused(&d, "p.cfg", &text, "is not usable for 'bind'", true);
    }
}
