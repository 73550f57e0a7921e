//! HAProxy keywords of proxies and fetches, through the real binary and
//! side by side with HAProxy 2.6 when it is installed: the `stopping`
//! fetch during a soft stop's `grace`, and `max-session-srv-conns` (the
//! idle server connections a client keeps for itself).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;

/// The `x-stopping` and `x-acl` fields of an answer from `a` on a new
/// connection (None: no answer).
fn stopping_fields(a: SocketAddr) -> Option<(String, String)> {
    let s = TcpStream::connect(a).ok()?;
    let mut c = Client::from_stream(s);
    c.send(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    let r = c.read_resp_opt(false)?;
    let f = |n: &str| r.header(n).unwrap_or("").to_string();
    Some((f("x-stopping"), f("x-acl")))
}

/// `stopping` says 0 while serving, 1 once SIGUSR1 came (the listener
/// still answers under global `grace`), in ACLs too.
#[test]
fn stopping_fetch_follows_the_soft_stop_as_haproxy() {
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n    grace 3s\n\
             defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 10s\n\
             frontend fe\n    bind {bind}\n    http-request return status 200\n\
             \x20   http-after-response set-header x-stopping %[stopping]\n\
             \x20   http-after-response set-header x-acl yes if {{ stopping }}\n",
            sock.display()
        )
    };
    let run = |who: &str, stop: &dyn Fn(), a: SocketAddr| {
        let before = stopping_fields(a);
        assert_eq!(before, Some(("0".to_string(), String::new())), "{who}");
        stop();
        let seen = came_within(Duration::from_secs(10), || {
            stopping_fields(a) == Some(("1".to_string(), "yes".to_string()))
        });
        assert!(seen, "{who}: stopping never said 1 during the grace");
    };
    let (mut e, _sock) = ebb_with_admin("stopping", cfg);
    run("ebb", &|| e.signal("USR1"), e.addr());
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
    if let Some((h, a)) = haproxy_beside("stopping", cfg) {
        // (`Ebb::signal`'s way, for haproxy.)
        let pid = h.pid().to_string();
        let stop = || {
            let st = std::process::Command::new("kill")
                .args(["-USR1", &pid])
                .status();
            assert!(st.is_ok_and(|s| s.success()), "kill -USR1 haproxy");
        };
        run("haproxy", &stop, a);
    }
}

/// An HTTP/1.1 server answering every request on a connection with its
/// own name; counts the connections it accepted.
fn counting_server(name: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = Arc::clone(&n);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            n2.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut b = [0u8; 4096];
                loop {
                    let Ok(k) = s.read(&mut b) else { return };
                    if k == 0 {
                        return;
                    }
                    buf.extend_from_slice(&b[..k]);
                    while let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..i + 4);
                        let body = name.as_bytes();
                        let head =
                            format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                        if s.write_all(head.as_bytes()).is_err() || s.write_all(body).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (a, n)
}

/// One keep-alive client asks each server in turn, `rounds` times
/// (`use-server` by path): the connections each server accepted.
fn rounds_through(
    fe: SocketAddr,
    servers: &[(SocketAddr, Arc<AtomicUsize>)],
    rounds: usize,
) -> Vec<usize> {
    let mut c = Client::connect(fe);
    for _ in 0..rounds {
        for i in 0..servers.len() {
            c.send(format!("GET /s{i} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes());
            let r = c.read_resp();
            assert_eq!(r.status, 200);
            assert_eq!(r.text(), format!("s{i}"));
        }
    }
    servers
        .iter()
        .map(|(_, n)| n.load(Ordering::SeqCst))
        .collect()
}

/// `max-session-srv-conns N`: a client session keeps at most N idle
/// private server connections (`http-reuse never`), HAProxy's default 5;
/// a connection that would be one more is closed after its answer.
#[test]
fn max_session_srv_conns_bounds_the_clients_idle_connections() {
    for max in [None, Some(2), Some(0)] {
        let servers: Vec<_> = ["s0", "s1", "s2"]
            .map(counting_server)
            .into_iter()
            .collect();
        let cfg = |sock: &Path, bind: &str| {
            let mut t = format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 10s\n\
                 frontend fe\n    bind {bind}\n    default_backend be\n",
                sock.display()
            );
            if let Some(m) = max {
                t.push_str(&format!("    max-session-srv-conns {m}\n"));
            }
            t.push_str("backend be\n    http-reuse never\n");
            for (i, (a, _)) in servers.iter().enumerate() {
                t.push_str(&format!("    use-server s{i} if {{ path /s{i} }}\n"));
                let _ = a;
            }
            for (i, (a, _)) in servers.iter().enumerate() {
                t.push_str(&format!("    server s{i} {a}\n"));
            }
            t
        };
        // Three servers, three rounds: with room for all (default 5)
        // each server sees one connection; with 2 the third server's is
        // closed each time; with 0 none is kept.
        let want = match max {
            None => vec![1, 1, 1],
            Some(2) => vec![1, 1, 3],
            _ => vec![3, 3, 3],
        };
        let (_e, _sock) = ebb_with_admin("msc", cfg);
        let base: Vec<usize> = servers
            .iter()
            .map(|(_, n)| n.load(Ordering::SeqCst))
            .collect();
        let got = rounds_through(_e.addr(), &servers, 3);
        let got: Vec<usize> = got.iter().zip(&base).map(|(g, b)| g - b).collect();
        assert_eq!(got, want, "ebb, max-session-srv-conns {max:?}");
        drop(_e);
        if let Some((_h, a)) = haproxy_beside("msc", cfg) {
            let base: Vec<usize> = servers
                .iter()
                .map(|(_, n)| n.load(Ordering::SeqCst))
                .collect();
            let got = rounds_through(a, &servers, 3);
            let got: Vec<usize> = got.iter().zip(&base).map(|(g, b)| g - b).collect();
            assert_eq!(got, want, "haproxy, max-session-srv-conns {max:?}");
        }
    }
}
