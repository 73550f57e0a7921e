//! What HTTP/2 streams hold in memory when their client reads nothing
//! (issue 13): each stream's answer stops at about one buffer
//! (`tune.bufsize`) in the stream and one on the client side, and the
//! server's socket stops being read (backpressure), as HAProxy 2.6's
//! streams hold one buffer. Measured with /proc/PID/status (VmHWM), the
//! peak resident size, once every server connection is blocked.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;

const BODY: usize = 16 << 20;
const CONNS: usize = 5;
const STREAMS: usize = 100;
const BUFSIZE: usize = 16_384;

/// An HTTP/1.1 origin answering every request with `BODY` bytes; counts
/// the requests it read and the connections whose answer could not be
/// written whole (the reader stopped: its socket is full).
struct BigOrigin {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    blocked: Arc<AtomicUsize>,
}

fn big_origin() -> BigOrigin {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let blocked = Arc::new(AtomicUsize::new(0));
    let (r2, b2) = (Arc::clone(&requests), Arc::clone(&blocked));
    // Larger than what the kernel buffers on a loopback connection, so
    // that a reader that stops is seen by the writer.
    let body = Arc::new(vec![b'x'; BODY]);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let (r, b, body) = (Arc::clone(&r2), Arc::clone(&b2), Arc::clone(&body));
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read_retry(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                r.fetch_add(1, Ordering::SeqCst);
                let out = format!("HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n");
                if s.write_all(out.as_bytes()).is_err() {
                    return;
                }
                s.set_nonblocking(true).unwrap();
                let mut at = 0;
                while at < body.len() {
                    match s.write(&body[at..]) {
                        Ok(n) => at += n,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            b.fetch_add(1, Ordering::SeqCst);
                            s.set_nonblocking(false).unwrap();
                            let _ = s.write_all(&body[at..]);
                            return;
                        }
                        Err(_) => return,
                    }
                }
            });
        }
    });
    BigOrigin {
        addr,
        requests,
        blocked,
    }
}

fn frame(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A prior-knowledge HTTP/2 connection with a 4 KB receive buffer that
/// asks `STREAMS` times for `path` and then reads nothing.
fn never_reading_client(a: SocketAddr, path: &str) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&a.into()).unwrap();
    let mut s: TcpStream = s.into();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(4, 0, 0, &[]));
    // GET (static 2), http (6), :path literal (name 4), :authority (1).
    let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 1, b'x']);
    for i in 0..STREAMS as u32 {
        out.extend(frame(1, 0x5, 2 * i + 1, &block));
    }
    s.write_all(&out).unwrap();
    s
}

/// `VmHWM` of process `pid`, in bytes.
fn peak_rss(pid: u32) -> usize {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: usize = st
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// 5 connections x 100 streams, each asking a 16 MB answer through ebb
/// from an HTTP/1.1 server, the client reading nothing: once every server
/// connection is blocked (ebb stopped reading it), ebb's peak resident
/// size grew by at most 5 buffers a stream (the lane's request buffer,
/// the answer in the stream's buffer, in the client side's and in the
/// HTTP/2 lane's pipe, the last one shut with the stream's window; the
/// structures of the lane and its exchange) and a fixed 8 MB: 39 MB
/// measured (2 threads), against 48 MB for this bound; before the bound
/// on the pipe and the client side's buffer, about 47 MB (HAProxy 2.6
/// grows by 18 MB under the same load, by hand).
#[test]
fn a_client_that_reads_nothing_pins_a_bounded_answer_per_stream() {
    let o = big_origin();
    let e = Ebb::start(&format!(
        "global\n    maxconn 4000\n\
         defaults\n    mode http\n    timeout client 120s\n    timeout server 120s\n    timeout connect 5s\n\
         frontend fe\n    bind BIND proto h2\n    default_backend be\n\
         backend be\n    server s {}\n",
        o.addr
    ));
    let before = peak_rss(e.pid());
    let _clients: Vec<TcpStream> = (0..CONNS)
        .map(|_| never_reading_client(e.addrs[0], "/big"))
        .collect();
    let all = CONNS * STREAMS;
    wait_until("every request reached the server", || {
        o.requests.load(Ordering::SeqCst) == all
    });
    wait_until("every server connection blocked", || {
        o.blocked.load(Ordering::SeqCst) == all
    });
    let grew = peak_rss(e.pid()).saturating_sub(before);
    let bound = all * 5 * BUFSIZE + 8 * 1024 * 1024;
    println!(
        "peak RSS grew by {} KB (bound {} KB)",
        grew / 1024,
        bound / 1024
    );
    assert!(grew <= bound, "grew by {grew} bytes, bound {bound}");
}
