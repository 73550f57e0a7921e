//! `http-reuse` and the idle pool of server connections, with HAProxy 2.6's
//! meaning, checked side by side with `haproxy` where it is installed: an
//! origin names each answer's connection (`X-Conn`, in accept order) and
//! its rank on that connection (`X-Nth`), and each scenario's trace must be
//! the same through both.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;

/// An origin answering every request `200` with `X-Conn: N` (the
/// connection's number, from 1) and `X-Nth: K` (the request's rank on it).
struct Tagger {
    addr: SocketAddr,
    conns: Arc<AtomicUsize>,
}

impl Tagger {
    fn start() -> Tagger {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let conns = Arc::new(AtomicUsize::new(0));
        let n = Arc::clone(&conns);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                let id = n.fetch_add(1, Ordering::SeqCst) + 1;
                std::thread::spawn(move || serve_tagged(s, id));
            }
        });
        Tagger { addr, conns }
    }

    fn conns(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }
}

/// Answers bodiless requests until the connection closes.
fn serve_tagged(mut s: TcpStream, id: usize) {
    let mut buf = Vec::new();
    let mut nth = 0;
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            nth += 1;
            let r = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Conn: {id}\r\nX-Nth: {nth}\r\n\r\n"
            );
            if s.write_all(r.as_bytes()).is_err() {
                return;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A proxy under test: its address and its CLI socket.
struct Under {
    addr: SocketAddr,
    sock: PathBuf,
}

/// The proxy's connections now (`CurrConns` of `show info`).
fn curr_conns(sock: &Path) -> Option<u64> {
    let info = cli_cmd(sock, "show info");
    info.lines()
        .find_map(|l| l.strip_prefix("CurrConns: "))
        .and_then(|v| v.trim().parse().ok())
}

/// Clients one after the other, each sending `n` requests on its own
/// connection then closing it; the trace is `(X-Conn, X-Nth)` per answer.
/// Between clients, the proxy is left to see the close (the server
/// connection the client had goes back to the pool then).
fn clients(u: &Under, per_client: &[usize]) -> Vec<Vec<(String, String)>> {
    let idle = curr_conns(&u.sock);
    let mut trace = Vec::new();
    for &n in per_client {
        let mut c = Client::connect(u.addr);
        let mut mine = Vec::new();
        for _ in 0..n {
            c.send(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
            let r = c.read_resp();
            assert_eq!(r.status, 200);
            let h = |n: &str| r.header(n).unwrap_or("-").to_string();
            mine.push((h("x-conn"), h("x-nth")));
        }
        drop(c);
        wait_until("the client's close seen", || curr_conns(&u.sock) <= idle);
        trace.push(mine);
    }
    trace
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The same proxy section for ebb and haproxy.
fn section(port_or_bind: &str, reuse: &str, srv_opts: &str, o: &Tagger) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 2s\n\
         listen px\n    bind {port_or_bind}\n    http-reuse {reuse}\n    server s {} {srv_opts}\n",
        o.addr
    )
}

/// Runs `scenario` through ebb (two threads, `global_extra` in its global
/// section) and, when installed, through haproxy (two threads too); both
/// traces are returned (haproxy's `None` when it is absent).
fn both<T>(
    reuse: &str,
    srv_opts: &str,
    global_extra: &str,
    scenario: impl Fn(&Under, &Tagger) -> T,
) -> (T, Option<T>) {
    let o = Tagger::start();
    let dir = scratch("reuse");
    let sock = dir.join("ebb.sock");
    let e = Ebb::start(&format!(
        "global\n    nbthread 2\n    stats socket {} level admin\n{global_extra}{}",
        sock.display(),
        section("BIND", reuse, srv_opts, &o)
    ));
    let ours = scenario(
        &Under {
            addr: e.addr(),
            sock,
        },
        &o,
    );
    let o = Tagger::start();
    let port = free_port();
    let theirs = haproxy_with(
        "reuse-hap",
        &format!(
            "    nbthread 2\n{global_extra}{}",
            section(&format!("127.0.0.1:{port}"), reuse, srv_opts, &o)
        ),
    )
    .map(|h| {
        let u = Under {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            sock: h.sock.clone(),
        };
        scenario(&u, &o)
    });
    (ours, theirs)
}

/// [`both`], then: the trace through ebb is `want`, and haproxy's the
/// same.
fn as_haproxy<T: PartialEq + std::fmt::Debug>(
    reuse: &str,
    srv_opts: &str,
    scenario: impl Fn(&Under, &Tagger) -> T,
    want: T,
) {
    let (ours, theirs) = both(reuse, srv_opts, "", scenario);
    assert_eq!(ours, want);
    if let Some(t) = theirs {
        assert_eq!(t, ours, "haproxy differs");
    }
}

/// Only the rank of each answer on its connection.
fn ranks(t: &[Vec<(String, String)>]) -> Vec<Vec<String>> {
    t.iter()
        .map(|c| c.iter().map(|(_, n)| n.clone()).collect())
        .collect()
}

#[test]
fn never_keeps_each_server_connection_for_its_client() {
    // Private: the client's connection carries all its requests, and is
    // never another client's.
    let want = vec![
        pairs(&[("1", "1"), ("1", "2"), ("1", "3")]),
        pairs(&[("2", "1"), ("2", "2"), ("2", "3")]),
    ];
    let run = |u: &Under, o: &Tagger| (clients(u, &[3, 3]), o.conns());
    as_haproxy("never", "", run, (want, 2));
}

#[test]
fn safe_gives_first_requests_their_own_connection_within_pool_max_conn() {
    // A first request opens a connection; the pool holds one, so a later
    // client's own connection is closed after its first answer and its
    // next requests go on the pooled one.
    let want = vec![
        pairs(&[("1", "1"), ("1", "2"), ("1", "3")]),
        pairs(&[("2", "1"), ("1", "4"), ("1", "5")]),
        pairs(&[("3", "1"), ("1", "6"), ("1", "7")]),
    ];
    let run = |u: &Under, o: &Tagger| (clients(u, &[3, 3, 3]), o.conns());
    as_haproxy("safe", "pool-max-conn 1", run, (want, 3));
}

#[test]
fn aggressive_sends_first_requests_on_proven_connections_only() {
    // The second client's first request may not take the connection that
    // carried one request only: a new one; its second request reuses one
    // (proving it), which the third client's first request then takes.
    let want: Vec<Vec<String>> = [&["1"][..], &["1", "2"], &["3"]]
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let run = |u: &Under, o: &Tagger| (ranks(&clients(u, &[1, 2, 1])), o.conns());
    as_haproxy("aggressive", "", run, (want, 2));
}

#[test]
fn always_shares_idle_connections_between_threads() {
    // Every client, whichever thread accepted it, finds the one idle
    // connection (`tune.idle-pool.shared on`, the default).
    let want: Vec<_> = (1..=8).map(|n| pairs(&[("1", &n.to_string())])).collect();
    let run = |u: &Under, o: &Tagger| (clients(u, &[1; 8]), o.conns());
    as_haproxy("always", "", run, (want, 1));
}

#[test]
fn idle_pool_not_shared_keeps_connections_with_their_thread() {
    let (ours, _) = both("always", "", "    tune.idle-pool.shared off\n", |u, o| {
        clients(u, &[1; 8]);
        o.conns()
    });
    // At most one connection per thread (two threads).
    assert!((1..=2).contains(&ours), "{ours} server connections");
}
