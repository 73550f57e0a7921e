//! HAProxy 2.6's per-direction timeouts of a tcp stream and `option
//! independent-streams`, side by side with haproxy when it is installed.
//! A read timeout half-closes its side (its FIN goes on, the other
//! direction flows on, the log keeps `cD` or `sD`); writes to a side
//! refresh its read timeout unless the option is set on that side's
//! proxy (the frontend for the client, the backend for the server).
//! A write timeout (a server flooding a client that does not read) aborts
//! the session. Timeouts of 1 s (2 s for the idle server); waits end on events (EOF,
//! a log line); the senders pace their bytes every 100 ms, for 2.5 s at
//! most when no timeout is expected.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::origin::serve_each;
use common::*;

const LONG: Duration = Duration::from_secs(30);
/// How long a sender goes on when no timeout should stop it.
const SENDING: Duration = Duration::from_millis(2500);
const PACE: Duration = Duration::from_millis(100);
const CHUNK: &[u8] = b"0123456789";

/// Sockets the origins keep open until the test ends (the session's end
/// is the proxy's doing).
type Kept = Arc<Mutex<Vec<TcpStream>>>;

/// Reads `s` to its end (or an error): the bytes read.
fn count_to_eof(s: &mut TcpStream) -> usize {
    let mut n = 0;
    let mut b = [0u8; 4096];
    while let Ok(k) = s.read_retry(&mut b) {
        if k == 0 {
            break;
        }
        n += k;
    }
    n
}

/// A thread that reads `s` to its end and says so (bytes read).
fn eof_watch(mut s: TcpStream) -> Receiver<usize> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(count_to_eof(&mut s));
    });
    rx
}

/// Writes a chunk every [`PACE`] until `eof` says the other end closed
/// (then three chunks more) or [`SENDING`] is over. Returns the bytes
/// sent and whether the EOF came while sending.
fn send_until_eof(s: &mut TcpStream, eof: &Receiver<usize>) -> (usize, bool) {
    let start = Instant::now();
    let mut sent = 0;
    let mut seen = false;
    while start.elapsed() < SENDING {
        s.write_all(CHUNK).unwrap();
        sent += CHUNK.len();
        if eof.recv_timeout(PACE).is_ok() {
            seen = true;
            break;
        }
    }
    if seen {
        // The other direction flows on.
        for _ in 0..3 {
            s.write_all(CHUNK).unwrap();
            sent += CHUNK.len();
        }
    }
    (sent, seen)
}

/// A server that never writes: it reports what it read up to the FIN.
fn silent_origin(kept: Kept) -> (SocketAddr, Receiver<usize>) {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let a = serve_each(move |mut s| {
        let n = count_to_eof(&mut s);
        kept.lock().unwrap().push(s);
        let _ = tx.lock().unwrap().send(n);
    });
    (a, rx)
}

/// A server that talks to a silent client: it reports what it sent and
/// whether the proxy's FIN came while it did.
fn talking_origin(kept: Kept) -> (SocketAddr, Receiver<(usize, bool)>) {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let a = serve_each(move |mut s| {
        let eof = eof_watch(s.try_clone().unwrap());
        let r = send_until_eof(&mut s, &eof);
        s.shutdown(Shutdown::Write).unwrap();
        kept.lock().unwrap().push(s);
        let _ = tx.lock().unwrap().send(r);
    });
    (a, rx)
}

/// A server that answers the proxy's FIN with late bytes and stays open.
fn late_origin(kept: Kept) -> SocketAddr {
    serve_each(move |mut s| {
        count_to_eof(&mut s);
        let _ = s.write_all(b"late");
        kept.lock().unwrap().push(s);
    })
}

/// A server that writes as fast as it can until its connection fails.
fn flood_origin() -> SocketAddr {
    serve_each(move |mut s| {
        let b = vec![b'z'; 1 << 16];
        while s.write_all(&b).is_ok() {}
    })
}

struct Origins {
    silent: (SocketAddr, Receiver<usize>),
    talking: (SocketAddr, Receiver<(usize, bool)>),
    late: SocketAddr,
    flood: SocketAddr,
    _kept: Kept,
}

fn origins() -> Origins {
    let kept: Kept = Default::default();
    Origins {
        silent: silent_origin(Arc::clone(&kept)),
        talking: talking_origin(Arc::clone(&kept)),
        late: late_origin(Arc::clone(&kept)),
        flood: flood_origin(),
        _kept: kept,
    }
}

/// Frontends in order: for a client that talks (`c_*`) and one that is
/// silent (`s_*`), without the option, with it on the frontend, with it
/// on the backend; then `idle` (timeout server 2 s, option nowhere) and
/// `flood` (a server that floods a client that does not read).
const PLACES: [&str; 3] = ["none", "fe", "be"];

fn config(sock: &std::path::Path, log: SocketAddr, binds: &[String], o: &Origins) -> String {
    let mut s = format!(
        "global\n    stats socket {} level admin\n    log {log} local0\n\
         defaults\n    mode tcp\n    log global\n    option tcplog\n    timeout connect 5s\n    timeout client 1s\n    timeout server 1s\n",
        sock.display()
    );
    let mut i = 0;
    for (kind, origin) in [("c", o.silent.0), ("s", o.talking.0)] {
        for place in PLACES {
            let fe_opt = if place == "fe" {
                "    option independent-streams\n"
            } else {
                ""
            };
            let be_opt = if place == "be" {
                "    option independent-streams\n"
            } else {
                ""
            };
            s += &format!(
                "frontend {kind}_{place}\n    bind {}\n{fe_opt}    default_backend b_{kind}_{place}\n\
                 backend b_{kind}_{place}\n{be_opt}    server s {origin}\n",
                binds[i]
            );
            i += 1;
        }
    }
    s += &format!(
        "listen idle\n    bind {}\n    timeout server 2s\n    server s {}\n",
        binds[i], o.late
    );
    s += &format!(
        "listen flood\n    bind {}\n    server s {}\n",
        binds[i + 1],
        o.flood
    );
    s
}

/// One proxy's results: per scenario, the facts compared.
fn run(addrs: &[SocketAddr], log: &Syslog, o: &Origins) -> Vec<String> {
    let mut out = Vec::new();
    let line = |c: &TcpStream| {
        let p = c.local_addr().unwrap().port();
        let l = log.find("log line", |l| l.contains(&format!(":{p} [")));
        // `... fe be/s Tw/Tc/Tt bytes flags ...`: bytes and flags.
        let f: Vec<&str> = l.split_whitespace().collect();
        let at = f
            .iter()
            .position(|w| w.ends_with("/s"))
            .expect("server field");
        let bytes: usize = f[at + 2].parse().expect("bytes");
        (f[at + 3].to_string(), bytes)
    };
    // The client talks, the server is silent.
    for (i, place) in PLACES.iter().enumerate() {
        let mut c = TcpStream::connect(addrs[i]).unwrap();
        let eof = eof_watch(c.try_clone().unwrap());
        let (sent, seen) = send_until_eof(&mut c, &eof);
        c.shutdown(Shutdown::Write).unwrap();
        let got = o.silent.1.recv_timeout(LONG).expect("the server's count");
        assert_eq!(got, sent, "c_{place}: every byte reached the server");
        let (flags, bytes) = line(&c);
        assert_eq!(bytes, 0, "c_{place}: nothing came from the server");
        out.push(format!(
            "c_{place}: client saw EOF while sending: {seen}; {flags}"
        ));
    }
    // The server talks, the client is silent.
    for (i, place) in PLACES.iter().enumerate() {
        let c = TcpStream::connect(addrs[3 + i]).unwrap();
        let eof = eof_watch(c.try_clone().unwrap());
        let (sent, seen) = o.talking.1.recv_timeout(LONG).expect("the server's report");
        let got = eof.recv_timeout(LONG).expect("the client's EOF");
        assert_eq!(got, sent, "s_{place}: every byte reached the client");
        let (flags, bytes) = line(&c);
        assert_eq!(
            bytes, sent,
            "s_{place}: the log counts what the server sent"
        );
        out.push(format!(
            "s_{place}: server saw EOF while sending: {seen}; {flags}"
        ));
    }
    // Idle: the client's read timeout passes its FIN on; the server's
    // late answer still reaches the client.
    let mut c = TcpStream::connect(addrs[6]).unwrap();
    c.set_read_timeout(Some(LONG)).unwrap();
    let mut v = Vec::new();
    let r = c.read_to_end(&mut v);
    let (flags, bytes) = line(&c);
    out.push(format!(
        "idle: client got {:?} then {}; {flags} {bytes}",
        String::from_utf8_lossy(&v),
        if r.is_ok() { "EOF" } else { "an error" },
    ));
    // Flood: the client's write timeout aborts the session; the client
    // then reads what its socket holds, up to a FIN.
    let mut c = TcpStream::connect(addrs[7]).unwrap();
    let (flags, bytes) = line(&c);
    c.set_read_timeout(Some(LONG)).unwrap();
    let mut v = Vec::new();
    let r = c.read_to_end(&mut v);
    assert!(v.len() <= bytes, "flood: {} read, {bytes} logged", v.len());
    out.push(format!(
        "flood: {flags}, then {}",
        if r.is_ok() { "EOF" } else { "an error" }
    ));
    out
}

fn expected() -> Vec<&'static str> {
    vec![
        "c_none: client saw EOF while sending: false; sD",
        "c_fe: client saw EOF while sending: false; sD",
        "c_be: client saw EOF while sending: true; sD",
        "s_none: server saw EOF while sending: false; cD",
        "s_fe: server saw EOF while sending: true; cD",
        "s_be: server saw EOF while sending: false; cD",
        "idle: client got \"late\" then EOF; cD 4",
        "flood: cD, then EOF",
    ]
}

#[test]
fn read_timeouts_half_close_and_independent_streams_as_haproxy() {
    let o = origins();
    let log = Syslog::new();
    let (e, _sock) = ebb_with_admin("streams", |sock, _| {
        config(sock, log.addr(), &vec!["BIND".to_string(); 8], &o)
    });
    let got = run(&e.addrs, &log, &o);
    assert_eq!(got, expected());
    let hlog = Syslog::new();
    let ports: Vec<String> = (0..8)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let hd = scratch("streams-h");
    let text = config(&hd.join("h.sock"), hlog.addr(), &ports, &o);
    let Some(rest) = text.split_once("level admin\n").map(|x| x.1.to_string()) else {
        unreachable!()
    };
    let Some(_h) = haproxy_with("streams-h", &rest) else {
        return;
    };
    let addrs: Vec<SocketAddr> = ports.iter().map(|p| p.parse().unwrap()).collect();
    let theirs = run(&addrs, &hlog, &o);
    assert_eq!(got, theirs, "ebb beside haproxy 2.6");
}

/// The option is taken in every mode: `mode http` (also from
/// `defaults`) and a tcp frontend whose streams may become HTTP, as
/// haproxy takes both (before the twenty-fourth session ebb refused them).
#[test]
fn independent_streams_is_taken_in_every_mode() {
    let d = scratch("streams-modes");
    let head = "defaults\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n";
    for (name, text) in [
        ("http.cfg", format!("{head}    mode http\n    option independent-streams\nlisten l\n    bind 127.0.0.1:0\n    server s 127.0.0.1:1\n")),
        ("upg.cfg", format!("{head}frontend f\n    mode tcp\n    bind 127.0.0.1:0\n    option independent-streams\n    default_backend b\nbackend b\n    mode http\n    server s 127.0.0.1:1\n")),
        ("ok.cfg", format!("{head}    option independent-streams\nlisten t\n    mode tcp\n    bind 127.0.0.1:0\n    server s 127.0.0.1:1\nlisten h\n    mode http\n    no option independent-streams\n    bind 127.0.0.1:0\n    server s 127.0.0.1:1\n")),
    ] {
        std::fs::write(d.join(name), text).unwrap();
        let (rc, _, err) = run_ebb(&["-c", "-f", name], &d);
        assert_eq!(rc, 0, "{name}: {err}");
    }
}

/// While the other direction flows on after a read timeout, `show sess`
/// gives the code the log will keep.
#[test]
fn show_sess_names_a_half_closed_session() {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let srv = serve_each(move |s| {
        let eof = eof_watch(s.try_clone().unwrap());
        let _ = eof.recv_timeout(LONG);
        // Held until the test has looked.
        let _ = tx.lock().unwrap().send(s);
    });
    let (e, sock) = ebb_with_admin("streams-sess", |sock, bind| {
        format!("global\n    stats socket {} level admin\ndefaults\n    mode tcp\n    timeout connect 5s\n    timeout client 1s\n    timeout server 1h\nlisten l\n    bind {bind}\n    server s {srv}\n", sock.display())
    });
    let mut c = TcpStream::connect(e.addr()).unwrap();
    let s = rx
        .recv_timeout(LONG)
        .expect("the client's FIN reached the server");
    let l = cli_cmd(&sock, "show sess");
    assert!(l.contains(" term=cD"), "{l}");
    drop(s);
    c.set_read_timeout(Some(LONG)).unwrap();
    let mut v = Vec::new();
    let _ = c.read_to_end(&mut v);
    wait_until("the session's end", || {
        !cli_cmd(&sock, "show sess").contains("term=")
    });
}

/// In `mode http` too, what is written to the server refreshes its read
/// timeout: a chunked upload paced over 2.5 s through `timeout server 1s`
/// gets its answer, as from haproxy (ebb answered 504 at 1 s before).
#[test]
fn a_slow_upload_refreshes_the_server_timeout_in_http() {
    let srv = serve_each(|mut s| {
        let mut got = Vec::new();
        let mut b = [0u8; 4096];
        while !got.ends_with(b"0\r\n\r\n") {
            match s.read_retry(&mut b) {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&b[..n]),
            }
        }
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    });
    let cfg_with = |opt: &'static str| {
        move |sock: &std::path::Path, bind: &str| {
            format!("global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 1s\nlisten l\n    bind {bind}\n{opt}    server s {srv}\n", sock.display())
        }
    };
    let cfg = cfg_with("");
    let upload = |a: SocketAddr| {
        let mut c = TcpStream::connect(a).unwrap();
        c.write_all(b"POST / HTTP/1.1\r\nHost: t\r\ntransfer-encoding: chunked\r\n\r\n")
            .unwrap();
        let start = Instant::now();
        while start.elapsed() < SENDING {
            c.write_all(b"a\r\n0123456789\r\n").unwrap();
            std::thread::sleep(PACE);
        }
        c.write_all(b"0\r\n\r\n").unwrap();
        c.set_read_timeout(Some(LONG)).unwrap();
        let mut v = [0u8; 12];
        c.read_exact(&mut v).unwrap();
        String::from_utf8_lossy(&v).into_owned()
    };
    let (e, _) = ebb_with_admin("streams-upload", cfg);
    assert_eq!(upload(e.addr()), "HTTP/1.1 200");
    if let Some((_h, a)) = haproxy_beside("streams-upload", cfg) {
        assert_eq!(upload(a), "HTTP/1.1 200", "haproxy");
    }
    // With `option independent-streams` only what the server sends
    // refreshes `timeout server`: the same upload gets 504 (at 1 s), as
    // from haproxy.
    let cfg = cfg_with("    option independent-streams\n");
    let upload_cut = |a: SocketAddr| {
        let mut c = TcpStream::connect(a).unwrap();
        c.write_all(b"POST / HTTP/1.1\r\nHost: t\r\ntransfer-encoding: chunked\r\n\r\n")
            .unwrap();
        let start = Instant::now();
        while start.elapsed() < SENDING {
            if c.write_all(b"a\r\n0123456789\r\n").is_err() {
                break;
            }
            std::thread::sleep(PACE);
        }
        c.set_read_timeout(Some(LONG)).unwrap();
        let mut v = [0u8; 12];
        c.read_exact(&mut v).map_or_else(
            |e| e.to_string(),
            |_| String::from_utf8_lossy(&v).into_owned(),
        )
    };
    let (e, _) = ebb_with_admin("streams-upload-i", cfg);
    assert_eq!(upload_cut(e.addr()), "HTTP/1.1 504");
    if let Some((_h, a)) = haproxy_beside("streams-upload-i", cfg) {
        assert_eq!(upload_cut(a), "HTTP/1.1 504", "haproxy");
    }
}

/// In an HTTP tunnel (a WebSocket) the backend's `option
/// independent-streams` lets only the server's bytes keep the tunnel up:
/// a client talking to a silent server is cut at `timeout tunnel`, as by
/// haproxy; without the option the tunnel lives while either side talks.
#[test]
fn independent_streams_in_an_http_tunnel_as_haproxy() {
    let srv = serve_each(|mut s| {
        let mut got = Vec::new();
        let mut b = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read_retry(&mut b) {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&b[..n]),
            }
        }
        let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
        // Silent: reads until the end.
        while let Ok(n) = s.read_retry(&mut b) {
            if n == 0 {
                break;
            }
        }
    });
    let cfg_with = |opt: &'static str| {
        move |sock: &std::path::Path, bind: &str| {
            format!("global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 1s\n    timeout server 1s\n    timeout tunnel 1s\nlisten l\n    bind {bind}\n{opt}    server s {srv}\n", sock.display())
        }
    };
    // Whether the tunnel was cut while the client talked for SENDING.
    let cut = |a: SocketAddr| {
        let mut c = TcpStream::connect(a).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
        c.set_read_timeout(Some(LONG)).unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(c.read(&mut b).unwrap(), 1, "the 101");
            head.push(b[0]);
        }
        assert!(head.starts_with(b"HTTP/1.1 101"));
        c.set_nonblocking(true).unwrap();
        let start = Instant::now();
        while start.elapsed() < SENDING {
            if c.write_all(b"y").is_err() {
                return true;
            }
            match c.read(&mut b) {
                Ok(0) => return true,
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return true,
                _ => {}
            }
            std::thread::sleep(PACE);
        }
        false
    };
    for (opt, want) in [("", false), ("    option independent-streams\n", true)] {
        let cfg = cfg_with(opt);
        let (e, _) = ebb_with_admin("streams-tunnel", cfg);
        assert_eq!(cut(e.addr()), want, "ebb, {opt:?}");
        if let Some((_h, a)) = haproxy_beside("streams-tunnel", cfg) {
            assert_eq!(cut(a), want, "haproxy, {opt:?}");
        }
    }
}
