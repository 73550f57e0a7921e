//! The lingering close of the HTTP/1 client side (`mux::h1::client`,
//! `Conn::linger`): a connection that ends while its client still sends
//! (requests pipelined behind a `Connection: close` answer, a body an
//! answer refused, a TLS client's `close_notify`) shuts its sending side
//! and reads on until the client closes, instead of closing over unread
//! bytes (a reset, which drops the answer still in ebb's send queue and
//! fails the client's writes); bounded, so a client that keeps sending is
//! cut. Side by side with HAProxy 2.6 where it helps: HAProxy closes at
//! once (its outcome is printed, not asserted).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::origin::{Mode, Origin};
use common::*;

/// A client socket whose receive buffer is small (set before the
/// connect, so the window stays small): what ebb writes beyond it waits
/// in ebb's send queue, where a reset would drop it.
fn small_window_client(a: SocketAddr) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&a.into()).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// A request answered with `Connection: close` and 64 KiB of requests
/// pipelined behind it, in one write (more than a server reads at once:
/// the rest waits in its socket).
fn closing_request_and_pipelined() -> Vec<u8> {
    let mut out = b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec();
    while out.len() < 64 * 1024 {
        out.extend_from_slice(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    out
}

/// Reads to the end: the bytes, and the error that ended the reading
/// instead of EOF (a reset), if any.
fn read_to_end_or_error(s: &mut impl Read) -> (Vec<u8>, Option<std::io::Error>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match s.read_retry(&mut buf) {
            Ok(0) => return (got, None),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return (got, Some(e)),
        }
    }
}

/// The body of a chunked answer read whole (its bytes, without the chunk
/// framing), or None when it is cut.
fn chunked_body(raw: &[u8]) -> Option<Vec<u8>> {
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let mut rest = &raw[head_end..];
    let mut body = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..eol]).ok()?.trim(), 16).ok()?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

/// What a client that pipelines behind a `Connection: close` request to
/// `a` gets of the 256 KiB answer: the bytes it read, the body when whole,
/// and a reset if one came.
fn pipelined_behind_close(a: SocketAddr) -> (usize, Option<Vec<u8>>, Option<std::io::Error>) {
    let mut s = small_window_client(a);
    s.write_all(&closing_request_and_pipelined()).unwrap();
    // Not reading yet: the answer fills the window and ebb's send queue,
    // and the server ends the connection with the pipelined bytes unread.
    std::thread::sleep(Duration::from_millis(300));
    let (raw, err) = read_to_end_or_error(&mut s);
    (raw.len(), chunked_body(&raw), err)
}

const BIG: usize = 256 * 1024;

#[test]
fn a_client_pipelining_behind_a_close_answer_reads_it_whole() {
    let o = Origin::start("big", Mode::BigChunked(BIG));
    let proxy = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 2s\nfrontend fe\n    bind {bind}\n    default_backend be\nbackend be\n    server o {}\n",
            o.addr
        )
    };
    let e = Ebb::start(&proxy("BIND"));
    let (_, body, err) = pipelined_behind_close(e.addr());
    assert!(err.is_none(), "ebb's answer ended with {err:?}");
    assert_eq!(body.map(|b| b.len()), Some(BIG), "the answer was cut");
    let hap = |sock: &std::path::Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n{}",
            sock.display(),
            proxy(bind)
        )
    };
    if let Some((_h, addr)) = haproxy_beside("linger-pipe", hap) {
        let (n, body, err) = pipelined_behind_close(addr);
        println!(
            "haproxy 2.6: {n} bytes read, whole answer: {}, then {err:?}",
            body.is_some()
        );
    }
}

/// A 403 for a 300 KB upload ebb does not read (past `tune.http.drain-max`:
/// answered `Connection: close`): the client's writes of the whole body
/// succeed (ebb reads and drops it after its answer), then it reads the
/// answer and ebb's close. HAProxy 2.6's outcome is printed.
#[test]
fn a_client_sending_a_refused_body_writes_it_all_and_reads_the_answer() {
    let deny = |bind: &str| {
        format!("defaults\n    mode http\n    timeout client 10s\nfrontend fe\n    bind {bind}\n    http-request deny\n")
    };
    let e = Ebb::start(&deny("BIND"));
    let send = |a: SocketAddr| -> (std::io::Result<()>, Vec<u8>, Option<std::io::Error>) {
        use socket2::{Domain, Socket, Type};
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        // A small send buffer: the body is not all in the kernel before
        // ebb's answer comes.
        s.set_send_buffer_size(16 * 1024).unwrap();
        s.connect(&a.into()).unwrap();
        let mut s: TcpStream = s.into();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
        let n = 300_000;
        let head = format!("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n");
        let w = s
            .write_all(head.as_bytes())
            .and_then(|_| s.write_all(&vec![b'b'; n]));
        let (raw, err) = read_to_end_or_error(&mut s);
        (w, raw, err)
    };
    let (w, raw, err) = send(e.addr());
    assert!(w.is_ok(), "the upload failed: {w:?}");
    assert!(
        raw.starts_with(b"HTTP/1.1 403 "),
        "{:?}",
        String::from_utf8_lossy(&raw)
    );
    assert!(err.is_none(), "{err:?}");
    let hap = |sock: &std::path::Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n{}",
            sock.display(),
            deny(bind)
        )
    };
    if let Some((_h, addr)) = haproxy_beside("linger-upload", hap) {
        let (w, raw, err) = send(addr);
        println!(
            "haproxy 2.6: upload {w:?}, then {:?}, then {err:?}",
            String::from_utf8_lossy(raw.get(..12).unwrap_or(&raw))
        );
    }
}

/// The same over TLS (ebb serving a 256 KiB file): the client reads the
/// whole answer and ebb's `close_notify`, never a reset.
#[test]
fn a_tls_client_pipelining_behind_a_close_answer_reads_it_whole() {
    let d = scratch("linger-tls");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let both = d.join("both.pem");
    std::fs::write(
        &both,
        format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
    )
    .unwrap();
    std::fs::create_dir_all(d.join("www")).unwrap();
    std::fs::write(d.join("www/big"), vec![b'z'; BIG]).unwrap();
    let e = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout client 10s\nfrontend fe\n    bind BIND ssl crt {}\n    default_backend files\nbackend files\n    serve-files {}\n",
        both.display(),
        d.join("www").display()
    ));
    std::fs::write(d.join("ca.pem"), ck.cert.pem()).unwrap();
    let cfg = client_trusting(&d.join("ca.pem"));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(cfg, name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, small_window_client(e.addr()));
    s.write_all(&closing_request_and_pipelined()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (raw, err) = read_to_end_or_error(&mut s);
    assert!(
        err.is_none(),
        "ended with {err:?} after {} bytes",
        raw.len()
    );
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(raw.starts_with(b"HTTP/1.1 200 "));
    assert_eq!(raw.len() - head_end, BIG);
    let _ = std::fs::remove_dir_all(&d);
}

/// Sends a bad request to an ebb whose `timeout client` is `timeout`,
/// then `chunk` bytes every `pause` without end: whether ebb cut the
/// connection (a write failed) within 30 s, the bytes sent, and what the
/// client read (ebb's answer).
fn keep_sending(timeout: &str, chunk: usize, pause: Duration) -> (bool, usize, Vec<u8>) {
    let e = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout client {timeout}\nfrontend fe\n    bind BIND\n    http-request return status 200\n"
    ));
    let mut s = TcpStream::connect(e.addr()).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nNo colon here\r\n\r\n")
        .unwrap();
    let start = Instant::now();
    let mut sent = 0;
    let cut = loop {
        match s.write(&vec![b'x'; chunk]) {
            Ok(n) => sent += n,
            Err(_) => break true,
        }
        if start.elapsed() > Duration::from_secs(30) {
            break false;
        }
        std::thread::sleep(pause);
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (raw, _) = read_to_end_or_error(&mut s);
    (cut, sent, raw)
}

/// A client that keeps sending after its connection ended (a bad request,
/// then bytes without end) is cut at the bound: `timeout client` (1 s
/// here) for a slow one, the bytes' bound (1 MiB) for a fast one (well
/// before its 60 s); a reset ends its writes, and the 400 it was sent is
/// whole in what it reads.
#[test]
fn a_client_that_keeps_sending_is_cut_at_the_bound() {
    let (cut, sent, raw) = keep_sending("1s", 100, Duration::from_millis(20));
    assert!(cut, "still open after 30 s and {sent} bytes");
    assert!(
        raw.starts_with(b"HTTP/1.1 400 "),
        "{:?}",
        String::from_utf8_lossy(&raw)
    );
    let (cut, sent, raw) = keep_sending("60s", 65536, Duration::ZERO);
    assert!(cut, "still open after 30 s and {sent} bytes");
    assert!(
        raw.starts_with(b"HTTP/1.1 400 "),
        "{:?}",
        String::from_utf8_lossy(&raw)
    );
}

/// A raw HTTP/2 frame.
fn h2_frame(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len() as u32;
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// What an HTTP/2 client with a small receive window gets of a 256 KiB
/// answer from `a` when it reads it late: it sends its preface (windows
/// opened wide) and `GET /big`, then reads nothing for `pause` (the idle
/// connection's GOAWAY and ebb's end come meanwhile), then sends a PING
/// (as a client that had not read the GOAWAY yet may) and reads to the
/// end. Returns the DATA bytes read, the GOAWAY's code, and the error
/// that ended the reading (a reset), if any.
fn h2_late_reader(a: SocketAddr, pause: Duration) -> (usize, Option<u32>, Option<std::io::Error>) {
    h2_late_reader_on(&mut small_window_client(a), pause)
}

/// [`h2_late_reader`] over a stream already connected (TLS).
fn h2_late_reader_on(
    s: &mut (impl Read + Write),
    pause: Duration,
) -> (usize, Option<u32>, Option<std::io::Error>) {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // SETTINGS_INITIAL_WINDOW_SIZE 2^31-1, the connection's window too.
    out.extend(h2_frame(4, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]));
    out.extend(h2_frame(8, 0, 0, &(0x7fff_ffffu32 - 65535).to_be_bytes()));
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "x"),
        (":path", "/big"),
    ] {
        block.extend([0, n.len() as u8]);
        block.extend_from_slice(n.as_bytes());
        block.push(v.len() as u8);
        block.extend_from_slice(v.as_bytes());
    }
    out.extend(h2_frame(1, 0x5, 1, &block));
    s.write_all(&out).unwrap();
    s.flush().unwrap();
    std::thread::sleep(pause);
    let _ = s.write_all(&h2_frame(6, 0, 0, b"12345678"));
    let _ = s.flush();
    let (raw, err) = read_to_end_or_error(s);
    let (mut i, mut data, mut goaway) = (0, 0, None);
    while i + 9 <= raw.len() {
        let n = (raw[i] as usize) << 16 | (raw[i + 1] as usize) << 8 | raw[i + 2] as usize;
        if i + 9 + n > raw.len() {
            break;
        }
        match raw[i + 3] {
            0 => data += n,
            7 if n >= 8 => {
                goaway = Some(u32::from_be_bytes(raw[i + 13..i + 17].try_into().unwrap()))
            }
            _ => {}
        }
        i += 9 + n;
    }
    (data, goaway, err)
}

/// An HTTP/2 connection ends as HTTP/1 ones do (`mux::Linger`): after its
/// GOAWAY (here `timeout http-keep-alive`'s) it shuts its side and reads
/// on until the client closes, so a client that reads late and sends a
/// frame meanwhile (a PING, a WINDOW_UPDATE, a stream it opened before it
/// saw the GOAWAY) still reads the whole answer and the GOAWAY, not a
/// reset. (ebb used to close 1 s after the GOAWAY, as HAProxy 2.6 closes
/// at once: the PING met a closed socket, whose reset dropped the answer
/// still in the send queue. HAProxy's outcome is printed.)
#[test]
fn an_h2_client_sending_after_the_goaway_reads_the_whole_answer() {
    let o = Origin::start("big", Mode::BigChunked(BIG));
    let proxy = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 20s\n    timeout server 10s\n    timeout connect 2s\n    timeout http-keep-alive 200ms\nfrontend fe\n    bind {bind} proto h2\n    default_backend be\nbackend be\n    server o {}\n",
            o.addr
        )
    };
    let e = Ebb::start(&proxy("BIND"));
    let pause = Duration::from_millis(2500);
    let (data, goaway, err) = h2_late_reader(e.addr(), pause);
    assert!(err.is_none(), "ended with {err:?} after {data} bytes");
    assert_eq!((data, goaway), (BIG, Some(0)));
    let hap = |sock: &std::path::Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n{}",
            sock.display(),
            proxy(bind)
        )
    };
    if let Some((_h, addr)) = haproxy_beside("linger-h2", hap) {
        let (data, goaway, err) = h2_late_reader(addr, pause);
        println!("haproxy 2.6: {data} bytes of DATA, GOAWAY {goaway:?}, then {err:?}");
    }
}

/// A lingering connection is still an open socket: it counts in `show
/// info` CurrConns (and `maxconn`) until it ends, and `show sess` lists
/// it with `state=linger`; it leaves both when the client closes.
#[test]
fn a_lingering_connection_is_counted_and_listed_until_its_end() {
    let (e, sock) = ebb_with_admin("linger-sess", |sock, bind| {
        format!(
            "global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout client 20s\nfrontend fe\n    bind {bind}\n    http-request return status 200\n",
            sock.display()
        )
    });
    let curr = || {
        cli_cmd(&sock, "show info")
            .lines()
            .find_map(|l| l.strip_prefix("CurrConns: "))
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    let before = curr().expect("CurrConns");
    let mut s = TcpStream::connect(e.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // An answer that closes, a request pipelined behind it: ebb lingers.
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .unwrap();
    let (raw, err) = read_to_end_or_error(&mut s);
    assert!(
        raw.starts_with(b"HTTP/1.1 200 ") && err.is_none(),
        "{err:?}"
    );
    // ebb's FIN came; the client has not closed: ebb lingers.
    let sess = cli_cmd(&sock, "show sess");
    let local = s.local_addr().unwrap().to_string();
    let line = sess.lines().find(|l| l.contains(&format!("src={local} ")));
    assert!(line.is_some_and(|l| l.ends_with(" state=linger")), "{sess}");
    assert_eq!(curr(), Some(before + 1));
    drop(s);
    wait_until("the lingering connection ends", || {
        curr() == Some(before) && !cli_cmd(&sock, "show sess").contains(&local)
    });
}

/// The same over TLS (ALPN h2): the late reader gets the whole answer,
/// the GOAWAY and ebb's `close_notify` (its reading ends without an
/// error: rustls reports a TCP end without `close_notify` as one).
#[test]
fn an_h2_tls_client_sending_after_the_goaway_reads_the_whole_answer() {
    let o = Origin::start("big", Mode::BigChunked(BIG));
    let d = scratch("linger-h2-tls");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let both = d.join("both.pem");
    std::fs::write(
        &both,
        format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
    )
    .unwrap();
    std::fs::write(d.join("ca.pem"), ck.cert.pem()).unwrap();
    let e = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout client 20s\n    timeout server 10s\n    timeout connect 2s\n    timeout http-keep-alive 200ms\nfrontend fe\n    bind BIND ssl crt {} alpn h2\n    default_backend be\nbackend be\n    server o {}\n",
        both.display(),
        o.addr
    ));
    let mut cfg = (*client_trusting(&d.join("ca.pem"))).clone();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, small_window_client(e.addr()));
    let (data, goaway, err) = h2_late_reader_on(&mut s, Duration::from_millis(2500));
    assert!(err.is_none(), "ended with {err:?} after {data} bytes");
    assert_eq!((data, goaway), (BIG, Some(0)));
    let _ = std::fs::remove_dir_all(&d);
}
