//! The connection fetches in log lines and rules, side by side with
//! HAProxy 2.6 when it is installed: `bc_err`/`bc_err_str` (0 and
//! `Success` once a server connection was set up, nothing after a failed
//! connect), `bc_dst`, `bc_http_major`, `fc_http_major` over HTTP/1, the
//! `TCP_INFO` fetches in a log line and in request rules, and none of
//! them in `tcp-request session` rules, which run before a stream exists.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;

use common::*;

/// A server answering every request 200 with an empty body.
fn origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read_retry(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&b[..n]),
                    }
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            });
        }
    });
    a
}

const LOG: &str = "X %HP err=%[bc_err] str=%[bc_err_str] bd=%[bc_dst] bmaj=%[bc_http_major] \
maj=%[fc_http_major] rtt=%[fc_rtt(us),bool] early=%[var(sess.r)] \
rule=%[var(txn.r)] loc=%[var(txn.l)] %ST";

#[test]
fn connection_fetches_in_logs_and_rules_as_haproxy() {
    let live = origin();
    let dead = closed_port();
    let mut seen = Vec::new();
    for hap in [false, true] {
        let log = Syslog::new();
        let la = log.addr();
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n    log {la} local0\n\
                 defaults\n    mode http\n    log global\n    timeout client 10s\n    timeout server 10s\n    timeout connect 2s\n\
                 frontend fe\n    bind {bind}\n    log-format \"{LOG}\"\n\
                 \x20   tcp-request session set-var(sess.r) fc_rtt(us)\n\
                 \x20   http-request set-var(txn.r) fc_rtt(us),bool\n\
                 \x20   http-request set-var(txn.l) src_is_local\n\
                 \x20   use_backend dead if {{ path /dead }}\n    default_backend live\n\
                 backend live\n    server s {live}\n\
                 backend dead\n    server s {}\n",
                sock.display(),
                dead.addr
            )
        };
        let Some((_keep, _sock, fe, who)) = ebb_or_haproxy(hap, "conn-fetches", cfg) else {
            continue;
        };
        let mut lines = Vec::new();
        for path in ["/live", "/dead"] {
            let mut c = Client::connect(fe);
            c.send(
                format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
            );
            let _ = c.read_resp();
            let l = log.next(&format!("X {path} "));
            // The dead server's port is this test's; the live one's too.
            lines.push(l.replace(&format!("bd={}", live.ip()), "bd=IP").to_string());
        }
        println!("{who}: {lines:#?}");
        seen.push(lines);
    }
    assert_eq!(
        seen[0],
        [
            "X /live err=0 str=Success bd=IP bmaj=1 maj=1 rtt=1 early=- rule=1 loc=1 200",
            "X /dead err=- str=- bd=IP bmaj=1 maj=1 rtt=1 early=- rule=1 loc=1 503",
        ]
    );
    if let Some(h) = seen.get(1) {
        assert_eq!(&seen[0], h);
    }
}
