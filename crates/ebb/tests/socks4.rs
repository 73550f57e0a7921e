//! `server ... socks4 ADDR:PORT` through the real binary: HTTP and TCP
//! traffic reach the server through a SOCKS4 proxy (a small one in this
//! test, which keeps each CONNECT request it gets), a refused CONNECT is
//! a failed connect, and with `check-via-socks4` health checks go through
//! the proxy too; their `show stat` fields compared with HAProxy 2.6's
//! when it is installed.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use common::origin::{Mode, Origin};
use common::*;

/// A SOCKS4 proxy: keeps each request (its 8 fixed bytes and user id),
/// then grants it (reply code 90) and relays to the address it names, or
/// refuses it (91) and closes.
fn socks_proxy(grant: bool) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let seen = Arc::clone(&s2);
            std::thread::spawn(move || serve_socks(c, grant, &seen));
        }
    });
    (addr, seen)
}

fn serve_socks(mut c: TcpStream, grant: bool, seen: &Mutex<Vec<Vec<u8>>>) {
    let mut req = vec![0u8; 8];
    if c.read_exact(&mut req).is_err() {
        return;
    }
    // The user id, up to its NUL.
    let mut b = [0u8; 1];
    while c.read_exact(&mut b).is_ok() {
        req.push(b[0]);
        if b[0] == 0 {
            break;
        }
    }
    seen.lock().unwrap().push(req.clone());
    if !grant {
        let _ = c.write_all(&[0, 91, 0, 0, 0, 0, 0, 0]);
        return;
    }
    let port = u16::from_be_bytes([req[2], req[3]]);
    let ip = std::net::Ipv4Addr::new(req[4], req[5], req[6], req[7]);
    let Ok(mut up) = TcpStream::connect((ip, port)) else {
        let _ = c.write_all(&[0, 91, 0, 0, 0, 0, 0, 0]);
        return;
    };
    let _ = c.write_all(&[0, 90, 0, 0, 0, 0, 0, 0]);
    let (mut c2, mut up2) = (c.try_clone().unwrap(), up.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut up2);
        let _ = up2.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut up, &mut c);
    let _ = c.shutdown(std::net::Shutdown::Write);
}

/// The CONNECT request HAProxy sends for `dst`.
fn request_for(dst: SocketAddr) -> Vec<u8> {
    let SocketAddr::V4(v4) = dst else {
        panic!("IPv4 expected")
    };
    let mut r = vec![4, 1];
    r.extend_from_slice(&dst.port().to_be_bytes());
    r.extend_from_slice(&v4.ip().octets());
    r.extend_from_slice(b"HAProxy\0");
    r
}

#[test]
fn http_and_tcp_traffic_go_through_the_socks4_proxy() {
    let origin = Origin::start("o", Mode::Ok);
    let (proxy, seen) = socks_proxy(true);
    let (deny, denied) = socks_proxy(false);
    let o = origin.addr;
    let cfg = |b1: &str, b2: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 2s\n    retries 0\n\
             frontend fe\n    bind {b1}\n    use_backend refused if {{ path_beg /deny }}\n    default_backend via\n\
             backend via\n    server s {o} socks4 {proxy}\n\
             backend refused\n    server s {o} socks4 {deny}\n\
             listen tcp\n    mode tcp\n    bind {b2}\n    server s {o} socks4 {proxy}\n"
        )
    };
    let e = Ebb::start(&cfg("BIND", "BIND"));
    let r = get(e.addrs[0], "/a");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"o /a"[..]));
    // Keep-alive through the tunnel: a second request on the connection.
    let mut c = Client::connect(e.addrs[0]);
    for p in ["/b", "/c"] {
        c.send(format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let r = c.read_resp();
        assert_eq!(r.body, format!("o {p}").into_bytes());
    }
    // The same through the tcp proxy.
    let r = get(e.addrs[1], "/t");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"o /t"[..]));
    let want = request_for(o);
    let got = seen.lock().unwrap().clone();
    assert!(got.len() >= 3, "{got:?}");
    assert!(got.iter().all(|r| *r == want), "{got:?}");
    // A refused CONNECT is a failed connect: 503, the origin untouched.
    let before = origin.requests.load(std::sync::atomic::Ordering::SeqCst);
    let r = get(e.addrs[0], "/deny");
    assert_eq!(r.status, 503);
    assert_eq!(denied.lock().unwrap().first(), Some(&want));
    assert_eq!(
        origin.requests.load(std::sync::atomic::Ordering::SeqCst),
        before
    );
    // HAProxy 2.6 answers the same through the same proxies.
    let (p1, p2) = (free_port(), free_port());
    let (a1, a2) = (format!("127.0.0.1:{p1}"), format!("127.0.0.1:{p2}"));
    if let Some(_h) = haproxy_with("socks4-traffic", &cfg(&a1, &a2)) {
        let (a1, a2): (SocketAddr, SocketAddr) = (a1.parse().unwrap(), a2.parse().unwrap());
        wait_until("haproxy listening", || TcpStream::connect(a2).is_ok());
        let r = get(a1, "/a");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"o /a"[..]));
        assert_eq!(get(a2, "/t").body, b"o /t");
        assert_eq!(get(a1, "/deny").status, 503);
    }
}

/// `check_status` and `last_chk` of `be/srv`.
fn check_fields(sock: &std::path::Path, be: &str) -> (String, String) {
    let r = stat_row(sock, be, "srv");
    let g = |k: &str| r.get(k).cloned().unwrap_or_default();
    (
        g("check_status").trim_start_matches("* ").to_string(),
        g("last_chk"),
    )
}

#[test]
fn checks_go_through_the_proxy_with_check_via_socks4_as_haproxy() {
    let origin = Origin::start("o", Mode::Ok);
    let o = origin.addr;
    let (proxy, seen) = socks_proxy(true);
    let (deny, _) = socks_proxy(false);
    let (unused, unused_seen) = socks_proxy(true);
    let srv = |via: &str| format!("    server srv {o} check inter 100ms rise 1 fall 1 {via}\n");
    let backends = format!(
        "backend via\n    option httpchk GET /chk\n{}\
         backend refused\n    option httpchk\n{}\
         backend l4\n{}\
         backend direct\n    option httpchk GET /direct\n{}\
         backend rule\n    option httpchk\n    http-check connect via-socks4\n    http-check send uri /rule\n{}\
         backend tcprule\n    option tcp-check\n    tcp-check connect via-socks4\n{}",
        srv(&format!("socks4 {proxy} check-via-socks4")),
        srv(&format!("socks4 {deny} check-via-socks4")),
        srv(&format!("socks4 {deny} check-via-socks4")),
        srv(&format!("socks4 {unused}")),
        srv(&format!("socks4 {proxy}")),
        srv(&format!("socks4 {deny}")),
    );
    let cfg = |sock: &std::path::Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 2s\n\
             frontend fe\n    bind {bind}\n    default_backend via\n{backends}",
            sock.display()
        )
    };
    let want = [
        ("via", ("L7OK", "")),
        ("refused", ("SOCKERR", "SOCKS4 Proxy deny the request")),
        ("l4", ("SOCKERR", "SOCKS4 Proxy deny the request")),
        ("direct", ("L7OK", "")),
        // `connect via-socks4` rules go through the proxy without
        // `check-via-socks4`.
        ("rule", ("L7OK", "")),
        (
            "tcprule",
            (
                "SOCKERR",
                "SOCKS4 Proxy deny the request at step 1 of tcp-check",
            ),
        ),
    ];
    // The rows that showed every status, none read while its next check
    // ran (the status stays then, but `last_chk` is empty: a row read
    // again after the wait differed).
    let settled = |sock: &std::path::Path| {
        let mut rows = Vec::new();
        wait_until("the checks", || {
            rows = want
                .iter()
                .map(|(be, _)| (be.to_string(), check_fields(sock, be)))
                .collect::<Vec<_>>();
            rows.iter()
                .zip(want.iter())
                .all(|((_, got), (_, (st, last)))| {
                    got.0 == *st && (last.is_empty() || !got.1.is_empty())
                })
        });
        rows
    };
    let (_e, sock) = ebb_with_admin("socks4-checks", cfg);
    let ours = settled(&sock);
    for ((be, got), (_, (st, last))) in ours.iter().zip(want.iter()) {
        assert_eq!((got.0.as_str(), got.1.as_str()), (*st, *last), "{be}");
    }
    // The checks went through the proxy to the server's address; those
    // of a server without `check-via-socks4` went straight to it.
    assert!(seen.lock().unwrap().iter().all(|r| *r == request_for(o)));
    assert!(!seen.lock().unwrap().is_empty());
    assert!(unused_seen.lock().unwrap().is_empty());
    let heads = origin.heads.lock().unwrap().clone();
    assert!(
        heads.iter().any(|h| h.starts_with("GET /chk ")),
        "{heads:?}"
    );
    assert!(heads.iter().any(|h| h.starts_with("GET /direct ")));
    assert!(
        heads.iter().any(|h| h.starts_with("OPTIONS /rule ")),
        "{heads:?}"
    );
    if let Some((h, _)) = haproxy_beside("socks4-checks", cfg) {
        // HAProxy 2.6's text after the reason varies from run to run: the
        // text of whatever errno its thread last left (" (Message too
        // long)" or nothing), and for the tcp-check, " at step 1 of
        // tcp-check" or nothing (by where the refusal found the
        // sequence): compared up to the reason.
        let reason = |v: Vec<(String, (String, String))>| -> Vec<_> {
            v.into_iter()
                .map(|(be, (st, last))| {
                    let r = "SOCKS4 Proxy deny the request";
                    let last = if last.starts_with(r) {
                        r.to_string()
                    } else {
                        last
                    };
                    (be, (st, last))
                })
                .collect()
        };
        assert_eq!(
            reason(settled(&h.sock)),
            reason(ours),
            "haproxy (left), ebb (right)"
        );
    }
}

/// What ebb does not do through SOCKS4 is refused at start with the line.
#[test]
fn unsupported_socks4_uses_are_refused() {
    let dir = scratch("socks4-refuse");
    for (i, (srv, what)) in [
        (
            "127.0.0.1:1 socks4 127.0.0.1:2 proto h2",
            "'socks4' on a 'proto h2'",
        ),
        ("abns@x socks4 127.0.0.1:2", "'socks4' on an abns@ server"),
        ("127.0.0.1:1 socks4 127.0.0.1", "a port is mandatory"),
    ]
    .iter()
    .enumerate()
    {
        let p = dir.join(format!("c{i}.cfg"));
        std::fs::write(
            &p,
            format!("defaults\n    mode http\nbackend be\n    server s {srv}\n"),
        )
        .unwrap();
        let (code, _out, err) = run_ebb(&["-c", "-f", p.to_str().unwrap()], &dir);
        assert_ne!(code, 0, "{srv}");
        assert!(
            err.contains(what) && err.contains(&format!("c{i}.cfg:4")),
            "{err}"
        );
    }
}
