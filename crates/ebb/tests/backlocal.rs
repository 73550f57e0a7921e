//! The server connection's local address: the log-format variables
//! `%bi`/`%bp` (also in hexadecimal, `%{+X}bi`) and the samples `bc_src`
//! and `bc_src_port`, in an HTTP proxy's log and response rules and in a
//! tcp proxy's log, side by side with HAProxy 2.6 when it is installed:
//! each must be the address the server saw the connection come from.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;

use common::*;

/// A server that answers each connection with the address it came from:
/// an HTTP answer (`http`) or the bare text, then closes.
fn peer_echo(http: bool) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let peer = s.peer_addr().unwrap().to_string();
            std::thread::spawn(move || {
                let mut b = [0u8; 2048];
                let _ = s.read_retry(&mut b);
                let out = if http {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{peer}",
                        peer.len()
                    )
                } else {
                    peer
                };
                let _ = s.write_all(out.as_bytes());
            });
        }
    });
    a
}

/// `%bi:%bp`, then the samples, then the hexadecimal forms, as the
/// expected line reads them for a server connection from `a`.
fn expected(a: SocketAddr) -> String {
    let std::net::IpAddr::V4(ip) = a.ip() else {
        panic!("{a}")
    };
    let hex: String = ip.octets().iter().map(|b| format!("{b:02X}")).collect();
    format!("BI {a} {a} {hex}:{:04X}", a.port())
}

const FMT: &str = "BI %bi:%bp %[bc_src]:%[bc_src_port] %{+X}bi:%{+X}bp";

#[test]
fn http_log_and_response_rules_read_the_server_connection_local_address() {
    let srv = peer_echo(true);
    http_case("backlocal-http", &srv.to_string(), 1);
}

/// Through ebb, then HAProxy beside: `rounds` requests to `server` (a
/// `server` line's address and options), each answered with the address
/// the server saw; the response rules and the log line must say it.
fn http_case(name: &str, server: &str, rounds: usize) {
    let log = Syslog::new();
    let la = log.addr();
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "{}frontend fe\n    bind {bind}\n    log-format \"{FMT}\"\n    default_backend b\n\
             backend b\n    http-response set-header X-B %[bc_src]:%[bc_src_port]\n    server s {server}\n",
            logged_head(sock, la, "http")
        )
    };
    let check = |who: &str, fe: SocketAddr| {
        for _ in 0..rounds {
            let mut c = Client::connect(fe);
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            let r = c.read_resp();
            let seen: SocketAddr = r.text().parse().unwrap();
            assert_eq!(r.header("x-b"), Some(seen.to_string().as_str()), "{who}");
            assert_eq!(log.next("BI "), expected(seen), "{who}");
        }
    };
    let (e, _sock) = ebb_with_admin(name, cfg);
    check("ebb", e.addr());
    drop(e);
    if let Some((_h, fe)) = haproxy_beside(name, cfg) {
        check("haproxy", fe);
    }
}

#[test]
fn tcp_log_reads_the_server_connection_local_address() {
    let srv = peer_echo(false);
    let log = Syslog::new();
    let la = log.addr();
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "{}listen px\n    bind {bind}\n    log-format \"{FMT}\"\n    server s {srv}\n",
            logged_head(sock, la, "tcp")
        )
    };
    let check = |who: &str, fe: SocketAddr| {
        let mut c = std::net::TcpStream::connect(fe).unwrap();
        c.write_all(b"hi").unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).unwrap();
        // The session ends (and logs) once the client closes too.
        drop(c);
        let seen: SocketAddr = got.parse().unwrap();
        assert_eq!(log.next("BI "), expected(seen), "{who}");
    };
    let (e, _sock) = ebb_with_admin("backlocal-tcp", cfg);
    check("ebb", e.addr());
    drop(e);
    if let Some((_h, fe)) = haproxy_beside("backlocal-tcp", cfg) {
        check("haproxy", fe);
    }
}

/// A server spoken to over HTTP/2 (`proto h2`): the connection's local
/// address as for HTTP/1, in the log and the response rules (an ebb
/// answering with the address it saw, `%ci:%cp`, is the server). Before,
/// ebb had `-` for all four (it did not keep that connection's address).
#[test]
fn an_http2_server_connection_local_address_is_known() {
    let srv = Ebb::start(
        "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
         frontend o\n    bind BIND proto h2\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%ci:%cp\"\n",
    );
    http_case("backlocal-h2", &format!("{} proto h2", srv.addr()), 2);
}

/// A server on a UNIX socket, in an HTTP and a tcp proxy: `%bi` is
/// `unix`, `%bp` 0, and the samples have no value (`-`), as HAProxy 2.6
/// logs them (its `addr_to_str`). Before, ebb had `-` for `%bi`/`%bp`.
#[test]
fn a_unix_socket_server_connection_is_logged_unix() {
    let dir = scratch("backlocal-unix");
    let path = dir.join("o.sock");
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut b = [0u8; 2048];
                let _ = s.read_retry(&mut b);
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
            });
        }
    });
    const UFMT: &str = "BI %bi:%bp %[bc_src]:%[bc_src_port]";
    for mode in ["http", "tcp"] {
        let log = Syslog::new();
        let la = log.addr();
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "{}listen px\n    bind {bind}\n    log-format \"{UFMT}\"\n    server s {}\n",
                logged_head(sock, la, mode),
                path.display()
            )
        };
        let check = |who: &str, fe: SocketAddr| {
            let mut c = std::net::TcpStream::connect(fe).unwrap();
            c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut got = String::new();
            let _ = c.read_to_string(&mut got);
            drop(c);
            assert!(got.ends_with("ok"), "{who} {mode}: {got:?}");
            assert_eq!(log.next("BI "), "BI unix:0 -:-", "{who} {mode}");
        };
        let name = format!("backlocal-unix-{mode}");
        let (e, _sock) = ebb_with_admin(&name, cfg);
        check("ebb", e.addr());
        drop(e);
        if let Some((_h, fe)) = haproxy_beside(&name, cfg) {
            check("haproxy", fe);
        }
    }
}
