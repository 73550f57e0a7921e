//! Queue priorities (`set-priority-class`, `set-priority-offset`, the
//! `prio_class`/`prio_offset` fetches) and the client socket's options
//! (`set-mark`, `set-tos`), side by side with haproxy when it is
//! installed.
//!
//! Priorities: a backend whose one server takes one stream at a time
//! (`maxconn 1`); a first request holds the slot (its origin answers only
//! when the test says so) while others queue, each sent once the one
//! before is counted in the queue (`qcur` in `show stat`); then the slot
//! frees and the origin records the order the queued requests reach it.
//! Socket options: `ss --tos -e` shows the proxy's socket to the client
//! (its peer is the client's port) with the mark and the TOS byte.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;

/// An origin answering one connection at a time, `Connection: close`:
/// it records each request's first line's target; the first request's
/// answer waits for the gate. Returns its port, the targets and the gate.
fn gated_origin() -> (u16, Arc<Mutex<Vec<String>>>, Sender<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (gate, opened) = channel::<()>();
    let s2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        let mut first = true;
        for c in l.incoming() {
            let Ok(mut c) = c else { break };
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut line = String::new();
            if r.read_line(&mut line).is_err() {
                continue;
            }
            // The rest of the head.
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            let target = line.split(' ').nth(1).unwrap_or("").to_string();
            s2.lock().unwrap().push(target);
            if first {
                first = false;
                let _ = opened.recv();
            }
            let _ =
                c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (port, seen, gate)
}

fn http_cfg(sock: &Path, bind: &str, origin: u16) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n\
         \x20   timeout connect 5s\n    timeout queue 30s\n\
         frontend f\n    bind {bind}\n\
         \x20   http-request set-priority-class int(-10) if {{ path_sub hi }}\n\
         \x20   http-request set-priority-class int(10) if {{ path_sub lo }}\n\
         \x20   http-request set-priority-offset int(-5000) if {{ path_sub soon }}\n\
         \x20   http-request set-priority-class int(5000) if {{ path_sub huge }}\n\
         \x20   http-request return status 200 hdr x-c %[prio_class] hdr x-o %[prio_offset] if {{ path_beg /show }}\n\
         \x20   default_backend b\n\
         backend b\n    server s 127.0.0.1:{origin} maxconn 1\n",
        sock.display()
    )
}

/// Sends `paths` while the first holds the server's only slot, each once
/// the previous one waits in the backend's queue; frees the slot and
/// returns the order the origin saw them in, and each answer's status.
fn served_order(
    addr: SocketAddr,
    sock: &Path,
    seen: &Arc<Mutex<Vec<String>>>,
    gate: &Sender<()>,
    paths: &[&str],
) -> (Vec<String>, Vec<u16>) {
    let mut waiting = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let req = format!("GET {p} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        waiting.push(std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            c.s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            c.send(req.as_bytes());
            c.read_resp().status
        }));
        if i == 0 {
            wait_until("the first request at the origin", || {
                seen.lock().unwrap().len() == 1
            });
        } else {
            wait_until("the request queued", || {
                backend_qcur(sock, "b") == Some(i as u64)
            });
        }
    }
    gate.send(()).unwrap();
    let statuses: Vec<u16> = waiting.into_iter().map(|t| t.join().unwrap()).collect();
    (seen.lock().unwrap().clone(), statuses)
}

const PATHS: &[&str] = &[
    "/first", "/lo1", "/mid1", "/hi1", "/soon", "/mid2", "/hi2", "/huge",
];
/// Class -10 first (in arrival order), then class 0 by arrival time moved
/// by the offset (`/soon` 5 s earlier than its arrival), then 10, then the
/// class 5000 held to 2047.
const SERVED: &[&str] = &[
    "/first", "/hi1", "/hi2", "/soon", "/mid1", "/mid2", "/lo1", "/huge",
];

/// The order and the fetches on one proxy.
fn check(
    addr: SocketAddr,
    sock: &Path,
    seen: &Arc<Mutex<Vec<String>>>,
    gate: &Sender<()>,
    who: &str,
) {
    let (order, st) = served_order(addr, sock, seen, gate, PATHS);
    assert_eq!(order, SERVED, "{who}");
    assert!(st.iter().all(|s| *s == 200), "{who}: {st:?}");
    // The fetches give what the rules set, bounded as HAProxy bounds them.
    for (p, c, o) in [
        ("/show/hi", "-10", "0"),
        ("/show/soon", "0", "-5000"),
        ("/show/huge", "2047", "0"),
        ("/show", "0", "0"),
    ] {
        let r = get(addr, p);
        assert_eq!(
            (r.header("x-c"), r.header("x-o")),
            (Some(c), Some(o)),
            "{who} {p}"
        );
    }
}

#[test]
fn queued_requests_are_served_by_priority_class_then_offset() {
    let (port, seen, gate) = gated_origin();
    let (ebb, sock) = ebb_with_admin("prio", |s, b| http_cfg(s, b, port));
    check(ebb.addr(), &sock, &seen, &gate, "ebb");
    let (hport, hseen, hgate) = gated_origin();
    if let Some((h, a)) = haproxy_beside("prio", |s, b| http_cfg(s, b, hport)) {
        check(a, &h.sock, &hseen, &hgate, "haproxy");
    }
}

/// What `ss` says of the proxy's socket to the client whose port is
/// `client` (its mark `fwmark:0x..`, its TOS byte `tos:0x..`).
fn proxy_side(client: u16) -> String {
    let o = Command::new("ss")
        .args(["-tn", "--tos", "-e", "state", "established"])
        .arg(format!("( dport = :{client} )"))
        .output()
        .expect("run ss");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn sockopt_cfg(sock: &Path, bind: &str, origin: u16) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n\
         \x20   timeout connect 5s\n\
         frontend f\n    bind {bind}\n\
         \x20   tcp-request connection set-mark 7\n\
         \x20   http-request set-mark 0x2a if {{ path /mark }}\n\
         \x20   http-request set-tos 0x28 if {{ path /tos }}\n\
         \x20   http-request return status 200 if !{{ path_beg /srv }}\n\
         \x20   default_backend b\n\
         backend b\n\
         \x20   http-response set-tos 0x48\n\
         \x20   http-response set-mark 010\n\
         \x20   server s 127.0.0.1:{origin}\n",
        sock.display()
    )
}

/// One keep-alive connection: each request's rule leaves its mark on the
/// socket (a connection rule's first), as `ss` shows it.
fn check_sockopts(addr: SocketAddr, who: &str) {
    let mut c = Client::connect(addr);
    let port = c.s.local_addr().unwrap().port();
    let mut ask = |path: &str| {
        c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        assert_eq!(c.read_resp().status, 200, "{who} {path}");
        proxy_side(port)
    };
    // (mark, TOS) as ss shows them; an absent mark is 0.
    let both = |s: String| (field(&s, "fwmark:"), field(&s, "tos:"));
    assert_eq!(both(ask("/plain")), (7, 0), "{who}");
    assert_eq!(both(ask("/mark")), (0x2a, 0), "{who}");
    assert_eq!(both(ask("/tos")), (0x2a, 0x28), "{who}");
    // The response rules (an octal mark, as strtoul reads `010`).
    assert_eq!(both(ask("/srv")), (8, 0x48), "{who}");
}

/// The number after `name` in ss's line (hexadecimal with `0x`); 0 when
/// ss does not show it.
fn field(s: &str, name: &str) -> u32 {
    let Some(v) = s.split_whitespace().find_map(|w| w.strip_prefix(name)) else {
        return 0;
    };
    match v.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).unwrap(),
        None => v.parse().unwrap(),
    }
}

#[test]
fn set_mark_and_set_tos_reach_the_client_socket() {
    if !as_root() || !have("ss") {
        println!("needs root (SO_MARK) and ss");
        return;
    }
    let (port, _seen, gate) = gated_origin();
    gate.send(()).unwrap();
    let (ebb, _sock) = ebb_with_admin("sockopt", |s, b| sockopt_cfg(s, b, port));
    check_sockopts(ebb.addr(), "ebb");
    let (hport, _hseen, hgate) = gated_origin();
    hgate.send(()).unwrap();
    if let Some((_h, a)) = haproxy_beside("sockopt", |s, b| sockopt_cfg(s, b, hport)) {
        check_sockopts(a, "haproxy");
    }
}

#[test]
fn sockopt_and_priority_values_are_checked_at_start() {
    let d = scratch("prio-check");
    let head = "defaults\n  mode http\n  timeout client 5s\n  timeout server 5s\n  timeout connect 5s\nfrontend f\n  bind 127.0.0.1:19999\n";
    for (line, what) in [
        ("http-request set-mark", "expects exactly 1 argument"),
        ("http-request set-mark 0x", "is not an integer/hex value"),
        ("http-request set-mark 12ab", "is not an integer/hex value"),
        ("http-request set-tos x", "is not an integer/hex value"),
        (
            "http-request set-priority-class",
            "expects a sample expression",
        ),
        (
            "http-request set-priority-offset nosuchfetch",
            "nosuchfetch",
        ),
        (
            "tcp-request connection set-priority-class int(1)",
            "set-priority-class",
        ),
    ] {
        let text = format!("{head}  {line}\n  http-request return status 200\n");
        assert_refused(&d, "t.cfg", &text, what, true);
    }
    // A mark needs the privilege `uid` would give up (HAProxy refuses the
    // pair at start).
    let text = format!(
        "global\n  uid 65534\n{head}  http-request set-mark 1\n  http-request return status 200\n"
    );
    assert_refused(&d, "t.cfg", &text, "full privileges", false);
    // Accepted where HAProxy takes them.
    for line in [
        "tcp-request connection set-tos 0x10",
        "tcp-request session set-mark 0xffffffff",
        "tcp-request content set-priority-offset int(-1000)",
        "http-response set-tos 8",
    ] {
        std::fs::write(
            d.join("ok.cfg"),
            format!("{head}  {line}\n  http-request return status 200\n"),
        )
        .unwrap();
        let (rc, _o, e) = run_ebb(&["-c", "-f", "ok.cfg"], &d);
        assert_eq!(rc, 0, "{line}: {e}");
        assert_eq!(
            haproxy_refuses(&d.join("ok.cfg")),
            Some(false).filter(|_| have("haproxy")),
            "{line}"
        );
    }
}

fn tcp_cfg(sock: &Path, bind: &str, origin: u16) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode tcp\n    timeout client 30s\n    timeout server 30s\n\
         \x20   timeout connect 5s\n    timeout queue 30s\n\
         listen b\n    bind {bind}\n\
         \x20   tcp-request content set-priority-class int(-5) if {{ src 127.0.0.3 }}\n\
         \x20   tcp-request content set-priority-class int(5) if {{ src 127.0.0.4 }}\n\
         \x20   server s 127.0.0.1:{origin} maxconn 1\n",
        sock.display()
    )
}

/// The tcp sessions of a `listen` section queue by their content rules'
/// classes (sources 127.0.0.3 first, 127.0.0.4 last).
fn check_tcp(
    addr: SocketAddr,
    sock: &Path,
    seen: &Arc<Mutex<Vec<String>>>,
    gate: &Sender<()>,
    who: &str,
) {
    let mut waiting = Vec::new();
    let order = [
        ("127.0.0.2", "/first"),
        ("127.0.0.4", "/lo"),
        ("127.0.0.2", "/mid"),
        ("127.0.0.3", "/hi"),
    ];
    for (i, (src, p)) in order.into_iter().enumerate() {
        let req = format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n");
        let mut c = connect_from(src, addr);
        c.send(req.as_bytes());
        waiting.push(std::thread::spawn(move || {
            c.s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            c.read_resp().status
        }));
        if i == 0 {
            wait_until("the first session at the origin", || {
                seen.lock().unwrap().len() == 1
            });
        } else {
            wait_until("the session queued", || {
                backend_qcur(sock, "b") == Some(i as u64)
            });
        }
    }
    gate.send(()).unwrap();
    for t in waiting {
        assert_eq!(t.join().unwrap(), 200, "{who}");
    }
    assert_eq!(
        *seen.lock().unwrap(),
        ["/first", "/hi", "/mid", "/lo"],
        "{who}"
    );
}

#[test]
fn tcp_sessions_queue_by_priority_class() {
    let (port, seen, gate) = gated_origin();
    let (ebb, sock) = ebb_with_admin("prio-tcp", |s, b| tcp_cfg(s, b, port));
    check_tcp(ebb.addr(), &sock, &seen, &gate, "ebb");
    let (hport, hseen, hgate) = gated_origin();
    if let Some((h, a)) = haproxy_beside("prio-tcp", |s, b| tcp_cfg(s, b, hport)) {
        check_tcp(a, &h.sock, &hseen, &hgate, "haproxy");
    }
}
