//! The bind options that shape a listener: `maxconn` (a listener's own
//! limit, the other connections waiting in the kernel's backlog), the
//! TCP socket options `mss`, `tcp-ut`, `tfo`, `transparent`,
//! `interface` and `namespace`, NetScaler's client IP insertion
//! (`accept-netscaler-cip`) and `expose-fd listeners`; each beside
//! HAProxy 2.6 where it can run the same configuration.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use common::*;

/// The listening sockets on `port` (one per thread): `(Recv-Q, Send-Q)`
/// of each, as `ss` shows a listener's (its accept queue and backlog).
fn listen_queues(port: u16) -> Vec<(u64, u64)> {
    let out = Command::new("ss")
        .args(["-Htln", &format!("sport = :{port}")])
        .output()
        .expect("run ss");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((w.get(1)?.parse().ok()?, w.get(2)?.parse().ok()?))
        })
        .collect()
}

/// A configuration's `global` section (admin socket `sock`, then
/// `global_more` lines) and an http `defaults` section with 30 s client
/// and server timeouts.
fn head(sock: &Path, global_more: &str) -> String {
    format!(
        "global\n    stats socket {} level admin\n{global_more}\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n",
        sock.display()
    )
}

fn maxconn_cfg(sock: &Path, bind: &str) -> String {
    head(sock, "    nbthread 2\n")
        + &format!(
            "frontend f\n    option socket-stats\n    bind {bind} maxconn 2 name lim\n\
             \x20   http-request return status 200 content-type text/plain string ok\n"
        )
}

/// One run of the held-connections scenario on a proxy listening on
/// `addr` with admin socket `sock`: the listener row while two
/// connections hold its two places and a third waits in the backlog,
/// and once one of the two closed.
fn held_connections(sock: &Path, addr: SocketAddr) -> Vec<String> {
    let row = || {
        let r = stat_row(sock, "f", "lim");
        ["scur", "smax", "slim", "stot", "status"]
            .map(|k| format!("{k}={}", r.get(k).map_or("", String::as_str)))
            .join(" ")
    };
    let req = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut held: Vec<Client> = (0..2)
        .map(|_| {
            let mut c = Client::connect(addr);
            c.send(req);
            assert_eq!(c.read_resp().status, 200);
            c
        })
        .collect();
    // Connected by the kernel, not accepted: it waits in the backlog.
    let mut third = Client::connect(addr);
    third.send(req);
    wait_until("the third connection in the accept queue", || {
        listen_queues(addr.port()).iter().map(|q| q.0).sum::<u64>() == 1
    });
    // The backlog is the bind's maxconn (no `backlog` set).
    assert!(
        listen_queues(addr.port()).iter().all(|q| q.1 == 2),
        "{:?}",
        listen_queues(addr.port())
    );
    let full = row();
    held.remove(0);
    assert_eq!(third.read_resp().status, 200);
    wait_until("the closed connection's place given back", || {
        stat_row(sock, "f", "lim").get("scur").map(String::as_str) == Some("2")
            && listen_queues(addr.port()).iter().all(|q| q.0 == 0)
    });
    vec![full, row()]
}

/// `bind ... maxconn 2`: two connections at once on the listener, a
/// third waits in the kernel's backlog until one closes; the listener's
/// row shows its limit and FULL meanwhile. Beside haproxy.
#[test]
fn maxconn_holds_connections_beyond_it_in_the_backlog() {
    let (e, sock) = ebb_with_admin("maxconn", maxconn_cfg);
    let ebb = held_connections(&sock, e.addr());
    assert_eq!(
        ebb,
        [
            "scur=2 smax=2 slim=2 stot=2 status=FULL",
            "scur=2 smax=2 slim=2 stot=3 status=FULL"
        ]
    );
    if let Some((h, addr)) = haproxy_beside("maxconn", maxconn_cfg) {
        assert_eq!(held_connections(&h.sock, addr), ebb, "haproxy");
    }
}

/// A listener without `maxconn` shows 0 as its limit (not its
/// frontend's), as HAProxy's rows do; bad values are refused.
#[test]
fn maxconn_values() {
    let cfg = |sock: &Path, bind: &str| {
        head(sock, "")
            + &format!(
                "frontend f\n    maxconn 5\n    option socket-stats\n    bind {bind} maxconn 0\n\
                 \x20   http-request return status 200\n"
            )
    };
    let pick = |sock: &Path| {
        let r = stat_row(sock, "f", "sock-1");
        (r["slim"].clone(), r["status"].clone())
    };
    let (_e, sock) = ebb_with_admin("maxconn0", cfg);
    let ebb = pick(&sock);
    assert_eq!(ebb, ("0".to_string(), "OPEN".to_string()));
    if let Some((h, _)) = haproxy_beside("maxconn0", cfg) {
        assert_eq!(pick(&h.sock), ebb, "haproxy");
    }
    let d = scratch("maxconn-bad");
    for (v, what) in [
        ("-1", "'maxconn' expects an integer"),
        ("", "expects a value"),
    ] {
        let text = format!(
            "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
             frontend f\n    bind 127.0.0.1:0 maxconn {v}\n    http-request return status 200\n"
        );
        assert_refused(&d, "bad.cfg", &text, what, true);
    }
}

/// A frontend at its own `maxconn`: the listener a connection waits on
/// shows WAITING (HAProxy's LI_LIMITED), the idle one stays OPEN, and
/// neither is FULL (no bind line has a `maxconn`); the listener that
/// took the waiting connection, filling the frontend again, waits on
/// until a connection closes. Beside haproxy.
#[test]
fn a_full_frontend_leaves_its_listener_waiting() {
    let cfg = |sock: &Path, bind: &str| {
        let bind2 = if bind == "BIND" {
            "BIND".to_string()
        } else {
            format!("127.0.0.1:{}", free_port())
        };
        head(sock, "")
            + &format!(
                "frontend f\n    maxconn 1\n    option socket-stats\n    bind {bind}\n    bind {bind2}\n\
                 \x20   http-request return status 200\n"
            )
    };
    let run = |sock: &Path, addr: SocketAddr| {
        let mut a = Client::connect(addr);
        a.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(a.read_resp().status, 200);
        let mut b = Client::connect(addr);
        b.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let st = |l: &str| stat_row(sock, "f", l)["status"].clone();
        wait_until("the listener waiting", || st("sock-1") == "WAITING");
        let seen = (st("sock-1"), st("sock-2"));
        drop(a);
        assert_eq!(b.read_resp().status, 200);
        // Full again with the second: still waiting; open once it left.
        let again = st("sock-1");
        drop(b);
        wait_until("the listener open again", || st("sock-1") == "OPEN");
        (seen.0, seen.1, again)
    };
    let (e, sock) = ebb_with_admin("fewait", cfg);
    let ebb = run(&sock, e.addr());
    assert_eq!(ebb, ("WAITING".into(), "OPEN".into(), "WAITING".into()));
    if let Some((h, addr)) = haproxy_beside("fewait", cfg) {
        assert_eq!(run(&h.sock, addr), ebb, "haproxy");
    }
}
