//! The backend, frontend and server state fetches (`nbsrv`, `srv_is_up`,
//! `connslots`, `queue`, `avg_queue`, `be_conn_free`, `srv_conn_free`,
//! `srv_queue`, the weights, `fe_defbe`, the `nbsrv` and `srv_queue`
//! converters, and an ACL on them) as servers go down, drain, enter
//! maintenance and streams queue, side by side with HAProxy 2.6 when it
//! is installed: both answer the same text at each step. The rates
//! (`fe_sess_rate`, `fe_req_rate`, `be_sess_rate`) and `dst_conn` count
//! what a burst of requests did.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;

use common::*;

/// A server that accepts connections and answers each request 200
/// (health checks connect only).
fn live_origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut b = [0u8; 2048];
                loop {
                    match s.read_retry(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
    a
}

/// A server that accepts connections and never answers (its streams keep
/// their slot while the test holds them).
fn silent_origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().map_while(Result::ok) {
            held.push(s);
        }
    });
    a
}

/// The configuration's `global` and `defaults` sections (an admin socket
/// at `sock`) and its frontend's first lines (bound to `bind`).
fn head(sock: &Path, bind: &str) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 2s\n    timeout queue 30s\n\
         frontend fe\n    bind {bind}\n",
        sock.display()
    )
}

/// What `GET path` answers, on a new connection.
fn body(fe: SocketAddr, path: &str) -> String {
    let mut c = Client::connect(fe);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
    let r = c.read_resp();
    assert_eq!(r.status, 200, "{path}");
    r.text()
}

const STATE: &str = "nbsrv=%[nbsrv(b)] nbsrv2=%[nbsrv(b2)] up_a=%[srv_is_up(b/a)] \
up_b=%[srv_is_up(b/b)] up_c=%[srv_is_up(b/c)] slots=%[connslots(b)] \
free=%[be_conn_free(b)] free2=%[be_conn_free(b2)] sfree=%[srv_conn_free(b/b)] \
q=%[queue(b)] avgq=%[avg_queue(b)] sq=%[srv_queue(b/a)] w=%[srv_weight(b/b)] \
iw=%[srv_iweight(b/b)] uw=%[srv_uweight(b/b)] defbe=%[fe_defbe] \
conv=%[str(b),nbsrv] convq=%[str(b/b),srv_queue] dead=%[var(txn.dead)]";

#[test]
fn state_fetches_follow_servers_as_haproxy() {
    let live = live_origin();
    let dead = closed_port();
    let mut seen: Vec<Vec<String>> = Vec::new();
    for hap in [false, true] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "{}\
                 \x20   http-request set-var(txn.dead) int(1) if {{ nbsrv(b) lt 1 }}\n\
                 \x20   http-request return status 200 content-type text/plain lf-string \"{STATE}\" if {{ path /state }}\n\
                 \x20   default_backend b\n\
                 backend b\n\
                 \x20   server a {} check inter 100ms fall 1 rise 1 maxconn 10 maxqueue 5\n\
                 \x20   server b {live} check inter 100ms fall 1 rise 1 maxconn 20 maxqueue 7 weight 30\n\
                 \x20   server c {live} backup maxconn 3 maxqueue 2\n\
                 backend b2\n    option allbackups\n\
                 \x20   server x {live} backup\n    server y {live} backup\n",
                head(sock, bind),
                dead.addr
            )
        };
        let Some((_keep, sock, fe, who)) = ebb_or_haproxy(hap, "state-fetches", cfg) else {
            continue;
        };
        wait_until("a DOWN, b UP", || {
            stat_row(&sock, "b", "a")
                .get("status")
                .is_some_and(|s| s == "DOWN")
                && stat_row(&sock, "b", "b")
                    .get("status")
                    .is_some_and(|s| s == "UP")
        });
        let mut steps = vec![body(fe, "/state")];
        for cmd in [
            "set server b/b weight 15",
            "set server b/b state drain",
            "set server b/b state maint",
            "set server b/c state maint",
            "set server b/b state ready",
        ] {
            let _ = cli_cmd(&sock, cmd);
            steps.push(format!("{cmd}: {}", body(fe, "/state")));
        }
        println!("{who}: {steps:#?}");
        seen.push(steps);
    }
    let first = &seen[0];
    if let Some(h) = seen.get(1) {
        assert_eq!(first, h);
    }
    assert_eq!(
        first[0],
        "nbsrv=1 nbsrv2=2 up_a=0 up_b=1 up_c=1 slots=32 free=20 free2=-1 sfree=20 \
         q=0 avgq=0 sq=0 w=30 iw=30 uw=30 defbe=b conv=1 convq=0 dead="
    );
}

const QUEUE: &str = "q=%[queue(q)] avgq=%[avg_queue(q)] sq=%[srv_queue(q/s)] \
slots=%[connslots(q)] free=%[be_conn_free(q)] sfree=%[srv_conn_free(q/s)] \
conv=%[str(q/s),srv_queue]";

#[test]
fn queue_fetches_count_waiting_streams_as_haproxy() {
    let silent = silent_origin();
    let mut seen = Vec::new();
    for hap in [false, true] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "{}\
                 \x20   http-request return status 200 content-type text/plain lf-string \"{QUEUE}\" if {{ path /state }}\n\
                 \x20   default_backend q\n\
                 backend q\n    server s {silent} maxconn 1 maxqueue 4\n",
                head(sock, bind)
            )
        };
        let Some((_keep, sock, fe, who)) = ebb_or_haproxy(hap, "queue-fetches", cfg) else {
            continue;
        };
        // One stream holds the slot, two wait for it.
        let mut held = Vec::new();
        for i in 0..3 {
            let mut c = Client::connect(fe);
            c.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
            held.push(c);
            wait_until(&format!("{who}: stream {i} in"), || {
                let csv = cli_cmd(&sock, "show stat");
                let n = |srv: &str, k: &str| {
                    stat_row_of(&csv, "q", srv)
                        .get(k)
                        .and_then(|v| v.parse::<u32>().ok())
                        .unwrap_or(0)
                };
                n("s", "scur") + n("s", "qcur") + n("BACKEND", "qcur") == i + 1
            });
        }
        let b = body(fe, "/state");
        println!("{who}: {b}");
        seen.push(b);
    }
    if let Some(h) = seen.get(1) {
        assert_eq!(&seen[0], h);
    }
    // They wait in the backend's queue (no server was assigned them).
    assert_eq!(seen[0], "q=2 avgq=2 sq=0 slots=4 free=0 sfree=0 conv=0");
}

#[test]
fn rates_count_sessions_and_requests() {
    let live = live_origin();
    for hap in [false, true] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "{}\
                 \x20   http-request return status 200 content-type text/plain lf-string \"%[fe_sess_rate] %[fe_req_rate(fe)] %[be_sess_rate(b)] %[dst_conn]\" if {{ path /state }}\n\
                 \x20   default_backend b\n\
                 backend b\n    server s {live}\n",
                head(sock, bind)
            )
        };
        let Some((_keep, _sock, fe, who)) = ebb_or_haproxy(hap, "rate-fetches", cfg) else {
            continue;
        };
        // Five requests to the backend on one connection, then another
        // connection asks; again until the burst fits in the counters'
        // second (a loaded machine may spread it).
        let mut v = Vec::new();
        wait_until(&format!("{who}: a burst counted"), || {
            let mut c = Client::connect(fe);
            for _ in 0..5 {
                c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
                assert_eq!(c.read_resp().status, 200);
            }
            let mut q = Client::connect(fe);
            q.send(b"GET /state HTTP/1.1\r\nHost: t\r\n\r\n");
            v = q
                .read_resp()
                .text()
                .split(' ')
                .map(|x| x.parse::<u64>().unwrap())
                .collect();
            v[0] >= 2 && v[1] >= 6 && v[2] >= 5
        });
        println!("{who}: {v:?}");
        // The asking connection is the frontend's only one now, or one
        // of two while the burst's closes.
        assert!((1..=2).contains(&v[3]), "{who}: dst_conn {v:?}");
    }
}
