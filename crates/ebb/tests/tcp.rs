//! `mode tcp` and the PROXY protocol through the real binary: echo and
//! bulk transfers with half-close, servers that close early or are down,
//! SNI routing without termination (openssl s_client), TLS termination in
//! tcp mode, `tcp-request` rules, `option tcplog`, `accept-proxy` and
//! `send-proxy[-v2]` (also against HAProxy 2.6 when it is installed).
//! Every wait ends on an event (a read, a line); none is a sleep.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::origin::{drain, serve_each};
use common::*;

/// Lines long enough for a loaded machine; the tests wait on events.
const LONG: Duration = Duration::from_secs(30);

/// An echo server: each connection gets back what it sent, and a FIN
/// after the client's FIN. With `prefix`, it first reads a PROXY header
/// line (v1) and sends it back before the echo.
fn echo_server(v1_header: bool) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let addr = serve_each(move |mut s| {
        let mut first = Vec::new();
        if v1_header {
            let mut b = [0u8; 1];
            while !first.ends_with(b"\r\n") {
                if s.read_retry(&mut b).unwrap_or(0) == 0 {
                    return;
                }
                first.push(b[0]);
            }
            let _ = s.write_all(&first);
        }
        seen2.lock().unwrap().push(first);
        let mut buf = vec![0u8; 65536];
        loop {
            match s.read_retry(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = s.shutdown(Shutdown::Write);
    });
    (addr, seen)
}

/// Answers one line with itself, then closes (so a client that ignores
/// its own end of input, as `s_client -quiet`, still ends).
fn line_server() -> SocketAddr {
    serve_each(|mut s| {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while !line.ends_with(b"\n") {
            match s.read_retry(&mut b) {
                Ok(1) => line.push(b[0]),
                _ => break,
            }
        }
        let _ = s.write_all(&line);
    })
}

/// Reads until EOF.
fn read_all(s: &mut TcpStream) -> Vec<u8> {
    let mut v = Vec::new();
    s.set_read_timeout(Some(LONG)).unwrap();
    s.read_to_end(&mut v).expect("read to EOF");
    v
}

fn logged(extra_global: &str) -> String {
    format!("global\n    nbthread 2\n    log stdout format raw local0\n{extra_global}defaults\n    mode tcp\n    log global\n    timeout client 30s\n    timeout server 30s\n    timeout connect 2s\n")
}

/// The connection ends with no byte for us: a FIN, or a reset when ebb
/// closed with our bytes unread (as HAProxy does).
fn closed_empty(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(LONG)).unwrap();
    let mut b = [0u8; 64];
    match s.read_retry(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn echo_half_close_and_tcplog() {
    let (echo, _) = echo_server(false);
    let e = Ebb::start(&format!(
        "{}listen l\n    bind BIND\n    option tcplog\n    server s1 {echo}\nlisten plain\n    bind BIND\n    server s1 {echo}\n",
        logged("")
    ));
    let mut c = TcpStream::connect(e.addr()).unwrap();
    c.write_all(b"hello ").unwrap();
    let mut b = [0u8; 6];
    c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"hello ");
    c.write_all(b"world").unwrap();
    // Our FIN goes through; the echo server answers with the rest and its
    // own FIN, which reaches us.
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"world");
    let port = c.local_addr().unwrap().port();
    let l = e
        .wait_stdout(&format!("127.0.0.1:{port} ["), LONG)
        .expect("tcplog line");
    // %ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq
    let f: Vec<&str> = l.split(' ').collect();
    assert_eq!(f.len(), 9, "{l}");
    assert_eq!(f[2], "l");
    assert_eq!(f[3], "l/s1");
    let t: Vec<i64> = f[4].split('/').map(|x| x.parse().unwrap()).collect();
    // HAProxy 2.6's tcp-mode %Tw: accept to server slot, plus one.
    assert!(t[0] >= 1 && t[1] >= 0 && t[2] >= t[1], "{l}");
    assert_eq!(f[5], "11", "bytes from the server: {l}");
    assert_eq!(f[6], "--", "{l}");
    // The server's slot and the backend's count are given back before
    // the line (HAProxy 2.6 logs a lone session `1/1/0/0/0`; ebb wrote
    // 1/1/1/1/0).
    assert_eq!(f[7], "1/1/0/0/0", "{l}");
    assert_eq!(f[8], "0/0", "{l}");
    // Without option tcplog: HAProxy's line at accept.
    let mut c = TcpStream::connect(e.addrs[1]).unwrap();
    let port = c.local_addr().unwrap().port();
    let to = e.addrs[1];
    let l = e
        .wait_stdout(&format!("Connect from 127.0.0.1:{port} "), LONG)
        .expect("connect line");
    assert!(
        l.ends_with(&format!(
            "Connect from 127.0.0.1:{port} to {to} (plain/TCP)"
        )),
        "{l}"
    );
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"");
}

/// A server for bulk transfers: it counts and checks what comes (bytes
/// `i % 251`), and after the client's FIN sends the count, the number of
/// bad bytes, then `down` bytes of a pattern, then its FIN.
fn bulk_server(down: usize) -> SocketAddr {
    serve_each(move |mut s| {
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0usize;
        let mut bad = 0u64;
        loop {
            match s.read_retry(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => {
                    for (i, &b) in buf[..k].iter().enumerate() {
                        if b != ((n + i) % 251) as u8 {
                            bad += 1;
                        }
                    }
                    n += k;
                }
            }
        }
        s.write_all(&(n as u64).to_be_bytes()).unwrap();
        s.write_all(&bad.to_be_bytes()).unwrap();
        let chunk: Vec<u8> = (0..1 << 16).map(|i| (i % 253) as u8).collect();
        let mut left = down;
        while left > 0 {
            let k = left.min(chunk.len());
            s.write_all(&chunk[..k]).unwrap();
            left -= k;
        }
        s.shutdown(Shutdown::Write).unwrap();
    })
}

/// Sends `up` bytes through `to` (a proxy in front of [`bulk_server`]),
/// half-closes, and checks the server's count and the `down` bytes back.
fn bulk_client(to: SocketAddr, up: usize, down: usize) {
    let mut c = TcpStream::connect(to).unwrap();
    let mut w = c.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk: Vec<u8> = (0..251 * 256).map(|i| (i % 251) as u8).collect();
        let mut left = up;
        while left > 0 {
            let k = left.min(chunk.len());
            w.write_all(&chunk[..k]).unwrap();
            left -= k;
        }
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut head = [0u8; 16];
    c.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    c.read_exact(&mut head).unwrap();
    writer.join().unwrap();
    assert_eq!(u64::from_be_bytes(head[..8].try_into().unwrap()), up as u64);
    assert_eq!(
        u64::from_be_bytes(head[8..].try_into().unwrap()),
        0,
        "corrupt bytes"
    );
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match c.read_retry(&mut buf).expect("download") {
            0 => break,
            k => {
                for (i, &b) in buf[..k].iter().enumerate() {
                    assert_eq!(b, ((got + i) % (1 << 16) % 253) as u8);
                }
                got += k;
            }
        }
    }
    assert_eq!(got, down);
}

#[test]
fn bulk_transfer_both_ways_with_half_close() {
    const UP: usize = 256 << 20;
    const DOWN: usize = 64 << 20;
    let addr = bulk_server(DOWN);
    let e = Ebb::start(&format!(
        "{}listen l\n    bind BIND\n    server s1 {addr}\n",
        logged("")
    ));
    bulk_client(e.addr(), UP, DOWN);
}

/// `show info`'s TotalSplicdedBytesOut (HAProxy's spelling).
fn spliced_out(sock: &Path) -> u64 {
    let info = cli_cmd(sock, "show info");
    info.lines()
        .find_map(|l| l.strip_prefix("TotalSplicdedBytesOut: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no TotalSplicdedBytesOut in {info}"))
}

#[test]
fn splice_moves_bulk_bytes_in_the_kernel_both_ways() {
    const UP: usize = 64 << 20;
    const DOWN: usize = 32 << 20;
    let dir = scratch("tcp-splice");
    let sock = dir.join("admin.sock");
    // splice-request and splice-response: both directions from the first
    // byte; splice-auto: once a direction streams (the first buffers are
    // copied); without an option: never.
    let (a1, a2, a3) = (bulk_server(DOWN), bulk_server(DOWN), bulk_server(DOWN));
    let e = Ebb::start(&format!(
        "global\n    stats socket {}\ndefaults\n    mode tcp\n    timeout client 60s\n    timeout server 60s\n    timeout connect 5s\nlisten both\n    bind BIND\n    option splice-request\n    option splice-response\n    server s1 {a1}\nlisten auto\n    bind BIND\n    option splice-auto\n    server s1 {a2}\nfrontend plain\n    bind BIND\n    default_backend b\nbackend b\n    server s1 {a3}\n",
        sock.display()
    ));
    assert_eq!(spliced_out(&sock), 0);
    bulk_client(e.addrs[0], UP, DOWN);
    let after_both = spliced_out(&sock);
    // Copied: what the client sent while the server connection was being
    // made (at most a buffer) and the server's 16-byte report at most.
    assert!(
        after_both >= (UP + DOWN - (64 << 10)) as u64 && after_both <= (UP + DOWN + 16) as u64,
        "{after_both} spliced of {}",
        UP + DOWN
    );
    bulk_client(e.addrs[1], UP, DOWN);
    let auto = spliced_out(&sock) - after_both;
    assert!(
        auto >= (UP + DOWN) as u64 * 9 / 10 && auto <= (UP + DOWN + 16) as u64,
        "splice-auto spliced {auto} of {}",
        UP + DOWN
    );
    bulk_client(e.addrs[2], UP, DOWN);
    assert_eq!(
        spliced_out(&sock),
        after_both + auto,
        "no option, no splice"
    );
    // The sessions ended: their pipes are closed (`show info` counts the
    // open ones).
    wait_until("pipes closed", || {
        cli_cmd(&sock, "show info")
            .lines()
            .any(|l| l == "PipesUsed: 0")
    });
}

#[test]
fn splice_is_refused_in_http_mode_and_left_out_under_tls() {
    let dir = scratch("tcp-splice-http");
    let cfg = dir.join("h.cfg");
    std::fs::write(
        &cfg,
        "defaults\n    mode http\n    option splice-auto\nfrontend f\n    bind 127.0.0.1:0\n    default_backend b\nbackend b\n    server s 127.0.0.1:1\n",
    )
    .unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", cfg.to_str().unwrap()], &dir);
    assert_ne!(code, 0);
    assert!(err.contains("h.cfg:3:") && err.contains("splice"), "{err}");
    // TLS terminated in tcp mode: the bytes must pass through rustls, so
    // the session copies whatever the option says, and nothing is lost.
    if !have("openssl") {
        eprintln!("openssl missing: TLS part skipped");
        return;
    }
    let (_, pem) = cert(&dir, "splice.test");
    let echo = line_server();
    let sock = dir.join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {}\nlisten l\n    mode tcp\n    bind BIND ssl crt {}\n    option splice-request\n    option splice-response\n    server s1 {echo}\n",
        sock.display(),
        pem.display()
    ));
    let out = s_client(e.addr(), "splice.test", "through tls\n");
    assert!(out.contains("through tls"), "{out}");
    assert_eq!(spliced_out(&sock), 0);
}

#[test]
fn server_closing_early_and_client_timeout() {
    // The server says bye and closes without reading.
    let addr = serve_each(|mut s| {
        let _ = s.write_all(b"bye");
        let _ = s.shutdown(Shutdown::Write);
        // Keep reading so our close is a FIN, not a reset.
        drain(&mut s);
    });
    let (echo, _) = echo_server(false);
    let e = Ebb::start(&format!(
        "{}listen early\n    bind BIND\n    option tcplog\n    server s {addr}\nlisten idle\n    bind BIND\n    option tcplog\n    timeout client 200ms\n    server s {echo}\n",
        logged("")
    ));
    let mut c = TcpStream::connect(e.addrs[0]).unwrap();
    let mut b = [0u8; 3];
    c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"bye");
    // The server's FIN reached us; our direction still works until ours.
    let mut more = [0u8; 1];
    c.set_read_timeout(Some(LONG)).unwrap();
    assert_eq!(c.read_retry(&mut more).unwrap(), 0);
    c.write_all(b"late").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let p = c.local_addr().unwrap().port();
    let l = e.wait_stdout(&format!(":{p} ["), LONG).expect("log");
    assert!(l.contains(" early early/s ") && l.contains(" 3 -- "), "{l}");
    // An idle client is cut at `timeout client`: cD.
    let mut c = TcpStream::connect(e.addrs[1]).unwrap();
    c.write_all(b"x").unwrap();
    c.read_exact(&mut more).unwrap();
    assert_eq!(read_all(&mut c), b"");
    let p = c.local_addr().unwrap().port();
    let l = e.wait_stdout(&format!(":{p} ["), LONG).expect("log");
    assert!(l.contains(" 1 cD "), "{l}");
}

#[test]
fn timeout_tunnel_replaces_client_and_server_once_connected() {
    let (echo, _) = echo_server(false);
    // Client and server timeouts far beyond the wait below: only the
    // tunnel timeout can end this idle session.
    let e = Ebb::start(&format!(
        "{}listen l\n    bind BIND\n    option tcplog\n    timeout client 1h\n    timeout server 1h\n    timeout tunnel 300ms\n    server s {echo}\n",
        logged("")
    ));
    let mut c = TcpStream::connect(e.addr()).unwrap();
    c.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    c.read_exact(&mut b).unwrap();
    assert_eq!(read_all(&mut c), b"", "closed by the tunnel timeout");
    let p = c.local_addr().unwrap().port();
    let l = e.wait_stdout(&format!(":{p} ["), LONG).unwrap();
    assert!(l.contains(" 1 cD ") || l.contains(" 1 sD "), "{l}");
}

#[test]
fn dead_server_retries_redispatch_and_no_server() {
    let (echo, _) = echo_server(false);
    // Held closed for the test's life: no other listener takes the port.
    let closed = closed_port();
    let dead = closed.addr;
    let e = Ebb::start(&format!(
        "{}listen l\n    bind BIND\n    option tcplog\n    balance roundrobin\n    retries 1\n    option redispatch\n    server dead {dead}\n    server live {echo}\nlisten none\n    bind BIND\n    option tcplog\n    retries 0\n    server dead {dead}\n",
        logged("")
    ));
    // Every connection is served, whichever server round-robin picks.
    for i in 0..6 {
        let mut c = TcpStream::connect(e.addrs[0]).unwrap();
        let msg = format!("try {i}");
        c.write_all(msg.as_bytes()).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        assert_eq!(read_all(&mut c), msg.as_bytes());
    }
    let l = e.wait_stdout(" l/live ", LONG).unwrap();
    assert!(l.contains("/+1 "), "a redispatched session says so: {l}");
    // No server left: the client is closed, the log says SC.
    let mut c = TcpStream::connect(e.addrs[1]).unwrap();
    assert_eq!(read_all(&mut c), b"");
    let l = e.wait_stdout(" none/dead ", LONG).unwrap();
    assert!(l.contains(" SC "), "{l}");
}

/// `%Tw` in tcp mode is HAProxy 2.6's: from the accept to the server slot,
/// the content inspection included, plus one (HAProxy subtracts a request
/// date a tcp stream does not have, -1). Debian's haproxy on this config,
/// a client silent for the 1 s delay: `... insp2/s 1008/0/3017 0 cD ...`.
#[test]
fn tcplog_tw_counts_the_inspection_as_haproxy() {
    let (echo, _) = echo_server(false);
    let e = Ebb::start(&format!(
        "{}listen l\n    bind BIND\n    option tcplog\n    tcp-request inspect-delay 300ms\n    tcp-request content accept if {{ req.len ge 100 }}\n    server s {echo}\n",
        logged("")
    ));
    let mut c = TcpStream::connect(e.addr()).unwrap();
    c.write_all(b"ab").unwrap();
    // Fewer than 100 bytes: the rule waits out the delay, then the bytes
    // go to the server.
    let mut b = [0u8; 2];
    c.read_exact(&mut b).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"");
    let p = c.local_addr().unwrap().port();
    let l = e.wait_stdout(&format!(":{p} ["), LONG).expect("log");
    let tw: i64 = l
        .split(' ')
        .nth(4)
        .and_then(|t| t.split('/').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or(-1);
    assert!(tw >= 301, "{l}");
}

#[test]
fn maxconn_queue_hands_the_slot_over() {
    let (echo, _) = echo_server(false);
    let d = scratch("tcp-queue");
    let sock = d.join("cli.sock");
    let e = Ebb::start(&format!(
        "{}listen l\n    bind BIND\n    option tcplog\n    timeout queue 20s\n    server s {echo} maxconn 1\n",
        logged(&format!("    stats socket {}\n", sock.display()))
    ));
    let mut a = TcpStream::connect(e.addr()).unwrap();
    a.write_all(b"a").unwrap();
    let mut b1 = [0u8; 1];
    a.read_exact(&mut b1).unwrap();
    // The only slot is held: the second session waits in the queue.
    let mut b = TcpStream::connect(e.addr()).unwrap();
    b.write_all(b"b").unwrap();
    wait_until("b queued", || backend_qcur(&sock, "l") == Some(1));
    a.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut a), b"");
    // A's end hands its slot to b at once.
    b.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut b), b"b");
    let p = b.local_addr().unwrap().port();
    let l = e.wait_stdout(&format!(":{p} ["), LONG).unwrap();
    assert!(
        l.contains(" l/s ") && l.contains(" -- ") && l.ends_with(" 0/0"),
        "{l}"
    );
    let tw: i64 = l
        .split(' ')
        .nth(4)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(tw >= 0, "{l}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A self-signed certificate for `name`: (cert.pem, cert+key.pem).
fn cert(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    let c = dir.join(format!("{name}.pem"));
    let both = dir.join(format!("{name}-both.pem"));
    std::fs::write(&c, ck.cert.pem()).unwrap();
    std::fs::write(
        &both,
        format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
    )
    .unwrap();
    (c, both)
}

/// `openssl s_client` with `input` on stdin; its stdout.
fn s_client(addr: SocketAddr, sni: &str, input: &str) -> String {
    let mut ch = Command::new("openssl")
        .args([
            "s_client",
            "-quiet",
            "-connect",
            &addr.to_string(),
            "-servername",
            sni,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ch.stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = ch.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn sni_routing_without_termination_and_tls_termination_in_tcp_mode() {
    if !have("openssl") {
        eprintln!("openssl missing: skipped");
        return;
    }
    let d = scratch("tcp-sni");
    let (_, a) = cert(&d, "a.example");
    let (_, b) = cert(&d, "b.example");
    // Two TLS servers (an ebb in http mode), each saying who it is.
    let origin = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout client 10s\nfrontend a\n    bind BIND ssl crt {}\n    http-request return status 200 content-type text/plain string server-a\nfrontend b\n    bind BIND ssl crt {}\n    http-request return status 200 content-type text/plain string server-b\n",
        a.display(),
        b.display()
    ));
    let echo = line_server();
    let lb = Ebb::start(&format!(
        "{}frontend sni\n    bind BIND\n    option tcplog\n    tcp-request inspect-delay 5s\n    tcp-request content accept if {{ req.ssl_hello_type 1 }}\n    use_backend a if {{ req.ssl_sni -i a.example }}\n    use_backend b if {{ req.ssl_sni -i b.example }}\nbackend a\n    server a {}\nbackend b\n    server b {}\nfrontend term\n    bind BIND ssl crt {}\n    option tcplog\n    default_backend echo\nbackend echo\n    server e {echo}\n",
        logged(""),
        origin.addrs[0],
        origin.addrs[1],
        a.display()
    ));
    let req = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let out = s_client(lb.addrs[0], "a.example", req);
    assert!(out.contains("server-a"), "{out}");
    let out = s_client(lb.addrs[0], "B.EXAMPLE", req);
    assert!(out.contains("server-b"), "{out}");
    let l = lb.wait_stdout(" sni b/b ", LONG).expect("log");
    assert!(l.contains(" -- "), "{l}");
    // Terminated in tcp mode: the echo server sees clear text.
    let out = s_client(lb.addrs[1], "a.example", "ping through tls\n");
    assert!(out.contains("ping through tls"), "{out}");
    let l = lb.wait_stdout(" term~ echo/e ", LONG).expect("log");
    assert!(l.contains(" 17 "), "{l}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn tcp_request_rules() {
    let (echo, _) = echo_server(false);
    let e = Ebb::start(&format!(
        "{}frontend conn\n    bind BIND\n    tcp-request connection reject if {{ src 127.0.0.1 }}\n    default_backend echo\nfrontend content\n    bind BIND\n    option tcplog\n    tcp-request inspect-delay 10s\n    tcp-request content reject if {{ req.ssl_hello_type 1 }}\n    tcp-request content accept if {{ req.len ge 4 }}\n    default_backend echo\nfrontend wait\n    bind BIND\n    tcp-request inspect-delay 20s\n    tcp-request content accept if {{ req.len ge 4 }}\n    tcp-request content reject\n    default_backend echo\nbackend echo\n    server e {echo}\n",
        logged("")
    ));
    // Rejected at accept: closed before any byte, not logged.
    let mut c = TcpStream::connect(e.addrs[0]).unwrap();
    let _ = c.write_all(b"x");
    assert!(closed_empty(&mut c));
    // The same in an http frontend, and an accept rule before it wins.
    let h = Ebb::start(
        "defaults\n    mode http\n    timeout client 10s\nfrontend deny\n    bind BIND\n    tcp-request connection reject if { src 127.0.0.0/8 }\n    http-request return status 200 content-type text/plain string no\nfrontend allow\n    bind BIND\n    tcp-request connection accept if { src 127.0.0.1 }\n    tcp-request connection reject\n    http-request return status 200 content-type text/plain string yes\n",
    );
    let mut c = TcpStream::connect(h.addrs[0]).unwrap();
    let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(closed_empty(&mut c));
    assert_eq!(get(h.addrs[1], "/").text(), "yes");
    // Content: a TLS hello is refused (PR), clear text goes through.
    let mut c = TcpStream::connect(e.addrs[1]).unwrap();
    c.write_all(b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00")
        .unwrap();
    assert_eq!(read_all(&mut c), b"");
    let p = c.local_addr().unwrap().port();
    let l = e.wait_stdout(&format!(":{p} ["), LONG).unwrap();
    assert!(
        l.contains(" content content/<NOSRV> ") && l.contains(" PR "),
        "{l}"
    );
    let mut c = TcpStream::connect(e.addrs[1]).unwrap();
    c.write_all(b"PING").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"PING");
    // Too short for the accept rule yet: it waits for more (within the
    // delay) instead of rejecting on the last rule.
    let mut c = TcpStream::connect(e.addrs[2]).unwrap();
    c.write_all(b"PI").unwrap();
    c.write_all(b"NG").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"PING");
    assert!(e.wait_stdout(" content echo/e ", LONG).is_some());
}

#[test]
fn accept_proxy_and_send_proxy_in_both_modes() {
    let (echo_pp, seen) = echo_server(true);
    let e = Ebb::start(&format!(
        "{}listen tcp\n    bind BIND accept-proxy\n    option tcplog\n    server s {echo_pp} send-proxy\nfrontend http\n    mode http\n    bind BIND accept-proxy\n    log global\n    default_backend pp\nbackend pp\n    mode http\n    server s {echo_pp} send-proxy-v2\n",
        logged("")
    ));
    // v1 in, v1 out: the server sees the original client and address.
    let mut c = TcpStream::connect(e.addrs[0]).unwrap();
    c.write_all(b"PROXY TCP4 192.0.2.1 198.51.100.7 5000 8443\r\nhi")
        .unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(
        read_all(&mut c),
        b"PROXY TCP4 192.0.2.1 198.51.100.7 5000 8443\r\nhi"
    );
    let l = e
        .wait_stdout("192.0.2.1:5000 [", LONG)
        .expect("log with the PROXY source");
    assert!(l.contains(" tcp tcp/s "), "{l}");
    // v2 in (IPv6), v1 out.
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n\x21\x21\x00\x24".to_vec();
    v2.extend_from_slice(
        &"2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v2.extend_from_slice(
        &"2001:db8::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v2.extend_from_slice(&4000u16.to_be_bytes());
    v2.extend_from_slice(&443u16.to_be_bytes());
    let mut c = TcpStream::connect(e.addrs[0]).unwrap();
    c.write_all(&v2).unwrap();
    c.write_all(b"v2").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(
        read_all(&mut c),
        b"PROXY TCP6 2001:db8::1 2001:db8::2 4000 443\r\nv2"
    );
    // Strict: no header, or a bad one, closes and logs.
    let mut c = TcpStream::connect(e.addrs[0]).unwrap();
    c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert!(closed_empty(&mut c));
    assert!(e
        .wait_stdout("not a PROXY protocol header: connection closed", LONG)
        .is_some());
    let mut c = TcpStream::connect(e.addrs[0]).unwrap();
    c.write_all(b"PROXY TCP4 192.0.2.1 1.2.3.4 99999 1\r\n")
        .unwrap();
    assert!(closed_empty(&mut c));
    assert!(e.wait_stdout("bad port in PROXY v1 line", LONG).is_some());
    // HTTP mode: accept-proxy in front, send-proxy-v2 towards the server
    // (whose first line our echo server only passes through as v1... so
    // it reads the v2 header as bytes: check them on the server's side).
    let n_before = seen.lock().unwrap().len();
    let mut c = TcpStream::connect(e.addrs[1]).unwrap();
    c.write_all(b"PROXY TCP4 203.0.113.9 198.51.100.7 6000 80\r\nGET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .unwrap();
    let l = e
        .wait_stdout("203.0.113.9:6000", LONG)
        .expect("http log with the PROXY source");
    assert!(l.contains("\"GET /x HTTP/1.1\""), "{l}");
    drop(c);
    wait_until("server side connected", || {
        seen.lock().unwrap().len() > n_before
    });
    // HTTP mode: fetches see the header's source and destination.
    let h = Ebb::start(
        "defaults\n    mode http\n    timeout client 10s\nfrontend f\n    bind BIND accept-proxy\n    http-request return status 200 content-type text/plain lf-string \"%[src]:%[src_port] %[dst]:%[dst_port]\"\n",
    );
    let r = raw(
        h.addr(),
        b"PROXY TCP4 203.0.113.9 198.51.100.7 6000 8080\r\nGET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    )
    .expect("answer");
    assert_eq!(r.text(), "203.0.113.9:6000 198.51.100.7:8080");
}

/// A client that sends part of a PROXY header and then its FIN is closed
/// at once and logged as such (HAProxy: "Truncated PROXY protocol header
/// received" at once), not held until `timeout client`; a header that
/// arrives in many segments is still read whole (ebb waits where HAProxy
/// 2.6, reading with MSG_PEEK once, refuses it).
#[test]
fn accept_proxy_partial_header_then_fin_closes_at_once() {
    let (echo, _) = echo_server(false);
    let e = Ebb::start(&format!(
        "global\n    log stdout format raw local0\ndefaults\n    mode tcp\n    log global\n    timeout client 1h\n    timeout server 1h\n    timeout connect 2s\nlisten tcp\n    bind BIND accept-proxy\n    option tcplog\n    server s {echo}\n"
    ));
    let hdr = b"PROXY TCP4 192.0.2.1 198.51.100.7 5000 8443\r\n";
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c".to_vec();
    v2.extend_from_slice(&[192, 0, 2, 1, 198, 51, 100, 7, 0x13, 0x88, 0x20, 0xfb]);
    for part in [&hdr[..14], &v2[..5], &v2[..20]] {
        let mut c = TcpStream::connect(e.addrs[0]).unwrap();
        c.write_all(part).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        assert!(closed_empty(&mut c), "{part:?}");
        let l = e
            .wait_stdout("connection closed before a complete PROXY header", LONG)
            .expect("log of the truncated header");
        assert!(!l.contains("timeout"), "{l}");
    }
    // Split over many segments: read whole.
    for h in [&hdr[..], &v2[..]] {
        let mut c = TcpStream::connect(e.addrs[0]).unwrap();
        c.set_nodelay(true).unwrap();
        for b in h.chunks(3) {
            c.write_all(b).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        c.write_all(b"data").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        assert_eq!(read_all(&mut c), b"data");
    }
    assert!(e.wait_stdout("192.0.2.1:5000 [", LONG).is_some());
    // A v2 header as long as HAProxy's buffer takes (16 KiB): accepted.
    let mut big = v2.clone();
    let tlv_len = 16384 - big.len() - 3;
    big.push(0xe0);
    big.extend_from_slice(&(tlv_len as u16).to_be_bytes());
    big.resize(16384, b'z');
    let total = (big.len() - 16) as u16;
    big[14..16].copy_from_slice(&total.to_be_bytes());
    let mut c = TcpStream::connect(e.addrs[0]).unwrap();
    c.write_all(&big).unwrap();
    c.write_all(b"big").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"big");
}

/// A raw-socket server that records the first bytes of each connection:
/// 16 bytes, or a whole `PROXY` v1 line, or what came before the peer
/// closed (or 30 s of silence: the wait ends on the bytes, not a delay a
/// loaded machine could outlast).
fn recorder() -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = Arc::clone(&got);
    let addr = serve_each(move |mut s| {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut v = Vec::new();
        let mut b = [0u8; 256];
        while let Ok(n) = s.read_retry(&mut b) {
            if n == 0 {
                break;
            }
            v.extend_from_slice(&b[..n]);
            if v.len() >= 16 || (v.starts_with(b"PROXY ") && v.ends_with(b"\r\n")) {
                break;
            }
        }
        g.lock().unwrap().push(v);
    });
    (addr, got)
}

#[test]
fn http_send_proxy_v2_and_check_send_proxy() {
    let (rec, got) = recorder();
    let (rec2, got2) = recorder();
    let e = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 2s\n    timeout connect 2s\nfrontend f\n    bind BIND\n    default_backend b\nbackend b\n    server s {rec} send-proxy-v2\nbackend c\n    server s {rec2} check inter 100ms check-send-proxy\n"
    ));
    let mut c = TcpStream::connect(e.addr()).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    wait_until("request reached the server", || {
        !got.lock().unwrap().is_empty()
    });
    let first = got.lock().unwrap()[0].clone();
    assert_eq!(&first[..12], b"\r\n\r\n\0\r\nQUIT\n");
    assert_eq!(first[12], 0x21, "v2 PROXY command");
    assert_eq!(first[13], 0x11, "TCP over IPv4");
    // A check relays no client: v1 UNKNOWN.
    wait_until("a check arrived", || !got2.lock().unwrap().is_empty());
    let chk = got2.lock().unwrap()[0].clone();
    assert_eq!(chk, b"PROXY UNKNOWN\r\n");
}

/// HAProxy 2.6 side by side, when installed: it sends PROXY v2 to ebb's
/// `accept-proxy`, and receives ebb's `send-proxy-v2`.
#[test]
fn haproxy_sends_and_receives_proxy_v2() {
    if !have("haproxy") {
        eprintln!("haproxy missing: skipped");
        return;
    }
    let (echo, _) = echo_server(false);
    let hp_front = SocketAddr::from(([127, 0, 0, 1], free_port())); // haproxy -> ebb
    let hp_back = SocketAddr::from(([127, 0, 0, 1], free_port())); // ebb -> haproxy -> echo
    let e = Ebb::start(&format!(
        "{}listen in\n    bind BIND accept-proxy\n    option tcplog\n    server e {echo}\nlisten out\n    bind BIND\n    server h {hp_back} send-proxy-v2\n",
        logged("")
    ));
    let d = scratch("tcp-haproxy");
    let cfg = d.join("h.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n    log stdout format raw local0\ndefaults\n    mode tcp\n    log global\n    option tcplog\n    timeout client 30s\n    timeout server 30s\n    timeout connect 2s\nlisten to_ebb\n    bind {hp_front}\n    server ebb {} send-proxy-v2\nlisten from_ebb\n    bind {hp_back} accept-proxy\n    server e {echo}\n",
            e.addrs[0]
        ),
    )
    .unwrap();
    let mut hp = Command::new("haproxy")
        .args(["-db", "-f", cfg.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let l2 = Arc::clone(&lines);
    let out = hp.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            l2.lock().unwrap().push(l);
        }
    });
    wait_until("haproxy listens", || TcpStream::connect(hp_front).is_ok());
    // client -> haproxy (send-proxy-v2) -> ebb (accept-proxy) -> echo.
    let mut c = TcpStream::connect(hp_front).unwrap();
    c.write_all(b"via haproxy").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"via haproxy");
    let port = c.local_addr().unwrap().port();
    let l = e
        .wait_stdout(&format!("127.0.0.1:{port} ["), LONG)
        .expect("ebb logs the client haproxy relayed");
    assert!(l.contains(" in in/e "), "{l}");
    // client -> ebb (send-proxy-v2) -> haproxy (accept-proxy) -> echo.
    let mut c = TcpStream::connect(e.addrs[1]).unwrap();
    c.write_all(b"to haproxy").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"to haproxy");
    let port = c.local_addr().unwrap().port();
    let needle = format!("127.0.0.1:{port} [");
    wait_until("haproxy logs the client ebb relayed", || {
        lines.lock().unwrap().iter().any(|l| l.contains(&needle))
    });
    let _ = hp.kill();
    let _ = hp.wait();
    let _ = std::fs::remove_dir_all(&d);
}

/// A graceful stop (HAProxy's soft stop) closes the listeners and lets
/// running tcp sessions finish; ebb exits after the last one.
#[test]
fn graceful_stop_lets_tcp_sessions_finish() {
    let (echo, _) = echo_server(false);
    let mut e = Ebb::start(&format!(
        "{}listen l\n    bind BIND\n    server s {echo}\n",
        logged("")
    ));
    let addr = e.addr();
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"1").unwrap();
    let mut b = [0u8; 1];
    c.read_exact(&mut b).unwrap();
    e.signal("TERM");
    wait_until("listener closed", || TcpStream::connect(addr).is_err());
    c.write_all(b"2").unwrap();
    c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"2", "the session outlives the stop");
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"");
    assert_eq!(e.wait_exit(LONG), Some(0));
}

/// System calls by name (calls, failures) of the process `pid` (every
/// thread) while `work` runs: `strace -f -c` attached once the process
/// is up, so start-up is not counted.
fn syscalls_during(pid: u32, work: impl FnOnce()) -> std::collections::HashMap<String, (u64, u64)> {
    let out = scratch("strace").join("strace.out");
    strace_during(pid, &["-c", "-U", "calls,errors,name"], &out, work);
    let mut m = std::collections::HashMap::new();
    for l in std::fs::read_to_string(&out).unwrap().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (calls, errors, name) = match f[..] {
            [c, e, n] => (c, e, n),
            [c, n] => (c, "0", n),
            _ => continue,
        };
        if let (Ok(c), Ok(e)) = (calls.parse::<u64>(), errors.parse::<u64>()) {
            if name != "total" {
                m.insert(name.to_string(), (c, e));
            }
        }
    }
    m
}

/// One short session: connect, a byte there and back, the client's FIN,
/// then the end (the echo server's FIN, passed on by the proxy).
fn short_sessions(to: SocketAddr, n: usize) {
    for _ in 0..n {
        let mut c = TcpStream::connect(to).unwrap();
        c.write_all(b"e").unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"e");
        c.shutdown(Shutdown::Write).unwrap();
        assert_eq!(read_all(&mut c), b"");
    }
}

/// What a short session costs in system calls (bench/conn_cost.py counts
/// the same): the server socket is made non-blocking at `socket()` (no
/// `fcntl`), its connect is confirmed by the writable edge (no
/// `SO_ERROR`, no `getpeername`) or, a loopback server's, by the client's
/// byte sent at once (no writable edge either: both sockets are
/// registered for reading alone), and at the end a socket closed both
/// ways is closed without a failing `shutdown` and without
/// `EPOLL_CTL_DEL` (closing it takes it out of the poller), and the FIN
/// that ends the session is sent by that close. HAProxy 2.6,
/// when installed, does the same sessions beside it and makes more calls
/// (not counting its clock reads and either one's `epoll_wait`, which
/// follow timing).
#[test]
fn a_short_session_costs_few_system_calls() {
    if !have("strace") {
        println!("strace is not installed: nothing to count");
        return;
    }
    const N: u64 = 40;
    let (echo, _) = echo_server(false);
    let cfg = |bind: &str| {
        format!("global\n    nbthread 1\ndefaults\n    mode tcp\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\nlisten relay\n    bind {bind}\n    server s1 {echo}\n")
    };
    let e = Ebb::start(&cfg("BIND"));
    short_sessions(e.addr(), 3);
    let m = syscalls_during(e.pid(), || short_sessions(e.addr(), N as usize));
    let get = |n: &str| m.get(n).copied().unwrap_or((0, 0));
    println!("ebb, {N} sessions: {m:?}");
    // Each session: 1 getsockopt (TCP_INFO: the listener's queue count),
    // 1 accept4 (none that says EAGAIN: the kernel builds and frees a
    // socket for that one), 1 socket, 1 setsockopt (TCP_NODELAY),
    // 1 connect, 2 EPOLL_CTL_ADD, 4 recvfrom, 2 sendto, 1 shutdown(WR)
    // (the client's FIN passed on; the server's, which ends the session,
    // goes out with the close, as HAProxy's), 2 close.
    assert!(get("accept4").0 >= N, "{m:?}");
    assert_eq!(
        get("accept4").1,
        0,
        "an accept4 found the queue empty: {m:?}"
    );
    assert!(get("epoll_ctl").0 <= 2 * N + 2, "{m:?}");
    assert_eq!(get("shutdown"), (N, 0), "{m:?}");
    // A debug build's std checks each descriptor it closes (`F_GETFD`).
    let debug_fcntl = if cfg!(debug_assertions) {
        get("close").0
    } else {
        0
    };
    assert!(get("fcntl").0 <= debug_fcntl + 2, "{m:?}");
    // No SO_ERROR nor getpeername for the server side's connect.
    assert!(
        get("getsockopt").0 + get("getpeername").0 <= get("accept4").0 + 2,
        "{m:?}"
    );
    let counted = |m: &std::collections::HashMap<String, (u64, u64)>| -> u64 {
        m.iter()
            .filter(|(k, _)| !matches!(k.as_str(), "epoll_wait" | "clock_gettime" | "futex"))
            .map(|(_, v)| v.0)
            .sum()
    };
    let ebb_calls = counted(&m) - debug_fcntl;
    assert!(
        ebb_calls <= 17 * N,
        "{ebb_calls} calls for {N} sessions: {m:?}"
    );
    if !have("haproxy") {
        println!("haproxy is not installed: ebb is counted on its own");
        return;
    }
    let port = free_port();
    let h =
        haproxy_with("short-sessions", &cfg(&format!("127.0.0.1:{port}"))).expect("haproxy starts");
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    short_sessions(to, 3);
    let hm = syscalls_during(h.pid(), || short_sessions(to, N as usize));
    println!("haproxy, {N} sessions: {hm:?}");
    let hap_calls = counted(&hm);
    assert!(
        ebb_calls < hap_calls,
        "ebb {ebb_calls} calls, haproxy {hap_calls}: {m:?} / {hm:?}"
    );
}

/// `shutdown sessions server` ends an established tcp session with
/// termination state `K-`, as HAProxy 2.6 logs it (checked by hand with
/// Debian's haproxy: `... 80 K- 1/1/0/0/0 0/0`).
#[test]
fn a_session_shut_down_from_the_cli_is_logged_killed() {
    let (echo, _) = echo_server(false);
    let d = scratch("tcp-kill");
    let sock = d.join("cli.sock");
    let e = Ebb::start(&format!(
        "{}listen l\n    bind BIND\n    option tcplog\n    server s {echo}\n",
        logged(&format!(
            "    stats socket {} level admin\n",
            sock.display()
        ))
    ));
    let mut a = TcpStream::connect(e.addr()).unwrap();
    a.write_all(b"a").unwrap();
    let mut b1 = [0u8; 1];
    a.read_exact(&mut b1).unwrap();
    assert_eq!(cli_cmd(&sock, "shutdown sessions server l/s"), "\n");
    assert!(closed_empty(&mut a));
    let p = a.local_addr().unwrap().port();
    let l = e.wait_stdout(&format!(":{p} ["), LONG).unwrap();
    assert_eq!(l.split(' ').nth(6), Some("K-"), "{l}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_side_that_reads_writes_on_to_the_other_side_itself() {
    // The origin sends 32 KiB chunks, each once the client has read the
    // previous one and sent a byte for it: the client's socket always has
    // room, so whatever the server side's tasklet (tcp_srv) reads it
    // writes to the client at once, without running the client side's
    // (tcp_cli). tcp_cli then runs for the client's byte (which it
    // writes to the server itself) and a few times for the session's
    // start and end. Before, every buffer the server side read woke
    // tcp_cli to write it: at least two runs per chunk besides the
    // byte's.
    const CHUNK: usize = 32 << 10;
    const N: usize = 64;
    let origin = serve_each(|mut s| {
        let chunk = vec![7u8; CHUNK];
        let mut b = [0u8; 1];
        for _ in 0..N {
            if s.read_exact(&mut b).is_err() || s.write_all(&chunk).is_err() {
                return;
            }
        }
        let _ = s.shutdown(Shutdown::Write);
        let _ = s.read_retry(&mut b);
    });
    let dir = scratch("tcp-pass-on");
    let sock = dir.join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    nbthread 1\n    profiling.tasks on\n    stats socket {}\ndefaults\n    mode tcp\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\nlisten l\n    bind BIND\n    server s {origin}\n",
        sock.display()
    ));
    let mut c = TcpStream::connect(e.addr()).unwrap();
    c.set_read_timeout(Some(LONG)).unwrap();
    let mut buf = vec![0u8; CHUNK];
    for _ in 0..N {
        c.write_all(b"+").unwrap();
        c.read_exact(&mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 7));
    }
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"", "the origin's FIN passed on");
    let p = cli_cmd(&sock, "show profiling");
    let (cli, srv) = (
        profiling_calls(&p, "tcp_cli"),
        profiling_calls(&p, "tcp_srv"),
    );
    println!("tcp_cli {cli} runs, tcp_srv {srv}");
    // Each chunk is at least two of the server side's 16 KiB reads.
    assert!(srv >= 2 * N as u64, "tcp_srv {srv}\n{p}");
    assert!(cli <= N as u64 + N as u64 / 2, "tcp_cli {cli}\n{p}");
}

/// A server that reads the client's `hello`, sends each connection
/// `chunks` chunks of 100 kB, one every 100 ms, then closes (a long
/// download). Its close is a FIN after the client's: a close with the
/// `hello` unread was a reset, which dropped the bytes still in its send
/// buffer when the proxy had not read them yet (a loaded machine).
fn trickle_server(chunks: usize) -> SocketAddr {
    serve_each(move |mut s| {
        let mut hello = [0u8; 5];
        if s.read_exact(&mut hello).is_err() {
            return;
        }
        for _ in 0..chunks {
            if s.write_all(&[b'x'; 100_000]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = s.shutdown(Shutdown::Write);
        drain(&mut s);
    })
}

/// What a proxy with `option contstats` (admin socket `sock`, serving
/// `a`) showed of a 10 MB download taking 10 s: the frontend's `bout`
/// once it moved, with the bytes the client had then, and at the end.
fn contstats_run(sock: &Path, a: SocketAddr) -> (u64, u64, u64) {
    let got = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let g2 = Arc::clone(&got);
    let mut c = TcpStream::connect(a).unwrap();
    c.write_all(b"hello").unwrap();
    let reader = std::thread::spawn(move || {
        let mut b = vec![0u8; 65536];
        while let Ok(n) = c.read_retry(&mut b) {
            if n == 0 {
                break;
            }
            g2.fetch_add(n as u64, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let bout = || -> u64 {
        stat_row(sock, "px", "FRONTEND")
            .get("bout")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let mut moved = (0, 0);
    assert!(came_within(LONG, || {
        let b = bout();
        moved = (b, got.load(std::sync::atomic::Ordering::SeqCst));
        b > 0
    }));
    reader.join().unwrap();
    let mut end = 0;
    came_within(LONG, || {
        end = bout();
        end == 10_000_000
    });
    (moved.0, moved.1, end)
}

/// `option contstats` in tcp mode: `show stat`'s byte counters move while
/// a long transfer runs (at least every 5 s), not only at its end; the
/// end total is the same. Beside haproxy.
#[test]
fn contstats_counts_a_long_transfer_as_it_flows() {
    let origin = trickle_server(100);
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode tcp\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             listen px\n    bind {bind}\n    option contstats\n    server s1 {origin}\n",
            sock.display()
        )
    };
    let check = |who: &str, (moved, had, end): (u64, u64, u64)| {
        assert!(
            moved > 0 && had < 10_000_000,
            "{who}: bout {moved} with {had} bytes received"
        );
        assert_eq!(end, 10_000_000, "{who}");
    };
    let (e, sock) = ebb_with_admin("contstats", cfg);
    check("ebb", contstats_run(&sock, e.addr()));
    if let Some((h, a)) = haproxy_beside("contstats", cfg) {
        check("haproxy", contstats_run(&h.sock, a));
    }
}

/// A server that accepts and resets at once (SO_LINGER 0) ends each
/// session as an established one the server cut: `SD`, no retry, a
/// connect time in milliseconds, as HAProxy 2.6 logs it. The reset may
/// come before the proxy saw its connect complete; the kernel's error
/// then says `ECONNRESET`, not `ECONNREFUSED`: the server had accepted.
/// (ebb took it for a refused connect now and then, retried after the
/// 1 s turn-around and logged `Tc` 1029.) HAProxy beside, on the same
/// origin: it loses the same race now and then (1-2 sessions in 40
/// retried in runs by hand, 20-40 % under load), so only that its usual
/// line occurs is checked.
#[test]
fn a_server_that_accepts_and_resets_is_sd_not_a_failed_connect() {
    const N: usize = 30;
    let origin = serve_each(|s| {
        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
        drop(s);
    });
    let sessions = |to: SocketAddr| {
        for _ in 0..N {
            let mut c = TcpStream::connect(to).unwrap();
            let _ = c.write_all(b"x");
            assert!(closed_empty(&mut c));
        }
    };
    // (Tc, termination, counts `%ac/%fc/%bc/%sc/%rc`) of each tcplog line.
    let lines = |log: &Syslog| -> Vec<(i64, String, String)> {
        (0..N)
            .map(|_| {
                let l = log.find("tcplog line", |l| l.contains(" l/s "));
                let f: Vec<&str> = l
                    .split_once("]: ")
                    .map_or(&l[..], |x| x.1)
                    .split(' ')
                    .collect();
                let tc = f[4].split('/').nth(1).and_then(|t| t.parse().ok());
                let rc = f[7].to_string();
                (tc.unwrap_or(-2), f[6].to_string(), rc)
            })
            .collect()
    };
    let rest = |log: SocketAddr, bind: &str| {
        format!("    log {log} local0\ndefaults\n    mode tcp\n    log global\n    option tcplog\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\nlisten l\n    bind {bind}\n    server s {origin}\n")
    };
    let log = Syslog::new();
    let e = Ebb::start(&format!(
        "global\n    nbthread 1\n{}",
        rest(log.addr(), "BIND")
    ));
    sessions(e.addr());
    for (tc, term, rc) in lines(&log) {
        assert!(
            term == "SD" && rc == "1/1/0/0/0" && (0..900).contains(&tc),
            "Tc {tc} {term} counts {rc}"
        );
    }
    let hlog = Syslog::new();
    let bind = format!("127.0.0.1:{}", free_port());
    let Some(_h) = haproxy_with("tcp-reset", &rest(hlog.addr(), &bind)) else {
        return;
    };
    sessions(bind.parse().unwrap());
    let h = lines(&hlog);
    let usual = h
        .iter()
        .filter(|(tc, term, rc)| term == "SD" && rc == "1/1/0/0/0" && (0..900).contains(tc))
        .count();
    // HAProxy loses the race often on a loaded machine (20-40 % of its
    // sessions retried after its 1 s turn-around, timed by hand): its
    // usual line is shown by one session, not a majority (a majority
    // made this test fail now and then).
    assert!(usual > 0, "haproxy: {h:?}");
}

/// HAProxy 2.6 logs a tcp session when its server connection is up if the
/// frontend's `log-format` reads nothing of the session's end (no size,
/// timer, count, `%ts`: its LW_BYTES items), as under `option logasap`;
/// with one of them, at the end. Checked by hand beside Debian's haproxy:
/// `%f %b/%s %tsc %[src]` came at the connect (`----`), `... %ts` at the
/// close; a session whose connect failed logs at its end either way.
#[test]
fn a_tcp_format_without_end_values_logs_at_the_connect() {
    let (echo, _) = echo_server(false);
    let e = Ebb::start(&format!(
        "global\n    nbthread 1\n    log stdout format raw local0\ndefaults\n    mode tcp\n    log global\n    timeout client 30s\n    timeout server 30s\n    timeout connect 2s\n\
         listen late\n    bind BIND\n    log-format \"late %cp %f %b/%s %ts\"\n    server s {echo}\n\
         listen early\n    bind BIND\n    log-format \"early %cp %f %b/%s %tsc %[src]\"\n    server s {echo}\n"
    ));
    let round = |c: &mut TcpStream| {
        c.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        c.set_read_timeout(Some(LONG)).unwrap();
        c.read_exact(&mut b).unwrap();
    };
    let mut late = TcpStream::connect(e.addrs[0]).unwrap();
    round(&mut late);
    let lp = late.local_addr().unwrap().port();
    let mut early = TcpStream::connect(e.addrs[1]).unwrap();
    round(&mut early);
    let ep = early.local_addr().unwrap().port();
    // The early line comes with both sessions open; the late session,
    // connected first, has written none yet (one thread: lines in order).
    let l = e
        .wait_stdout(&format!("early {ep} "), LONG)
        .expect("early line at the connect");
    assert_eq!(l, format!("early {ep} early early/s ---- 127.0.0.1"));
    assert!(
        !e.stdout
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.starts_with("late ")),
        "the late line came before the session's end"
    );
    late.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut late), b"");
    let l = e
        .wait_stdout(&format!("late {lp} "), LONG)
        .expect("late line");
    assert_eq!(l, format!("late {lp} late late/s --"));
    // The early session logs once: its end writes no second line.
    early.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut early), b"");
    let mut last = TcpStream::connect(e.addrs[0]).unwrap();
    let last_port = last.local_addr().unwrap().port();
    round(&mut last);
    last.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut last), b"");
    e.wait_stdout(&format!("late {last_port} "), LONG)
        .expect("a later line");
    let n = e
        .stdout
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with(&format!("early {ep} ")))
        .count();
    assert_eq!(n, 1);
}
