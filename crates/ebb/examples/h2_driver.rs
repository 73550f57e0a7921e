//! A test driver for ebb's sans-IO HTTP/2 core (`ebb::h2`), used to run
//! h2spec, curl and nghttp against it before the mux exists: std
//! `TcpListener`, one thread per connection, blocking I/O, cleartext with
//! prior knowledge. Every request gets `200` with a fixed body, sent once
//! its request has ended (a body is read and discarded).
//!
//!   cargo run -p ebb --example h2_driver -- 127.0.0.1:8443 [STALL_MS]
//!   h2spec -h 127.0.0.1 -p 8443
//!
//! STALL_MS sets `Config::stall_timeout_ms` (the attack harness,
//! tests/h2/run.sh, uses a short one to see a stalled stream reset). The
//! connection calls `tick` every 100 ms of read silence. After a
//! connection error it shuts its write side and drains the client's bytes
//! for a moment, so the client reads the GOAWAY before the socket closes.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ebb::h2::{Config, Connection, Event};

const BODY: &[u8] = b"hello from ebb's h2 core\n";

/// Lingering close: the peer gets our last bytes before a reset.
fn linger(sock: &mut TcpStream) {
    let _ = sock.shutdown(Shutdown::Write);
    let _ = sock.set_read_timeout(Some(Duration::from_secs(1)));
    let mut b = [0u8; 16 * 1024];
    let mut left = 1 << 20;
    while left > 0 {
        match sock.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => left -= n.min(left),
        }
    }
}

fn serve(mut sock: TcpStream, cfg: Config) -> std::io::Result<()> {
    let r = serve_inner(&mut sock, cfg);
    linger(&mut sock);
    r
}

fn serve_inner(sock: &mut TcpStream, cfg: Config) -> std::io::Result<()> {
    let t0 = Instant::now();
    let now = || t0.elapsed().as_millis() as u32 | 1;
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut c = Connection::new(cfg);
    let mut reset = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut have = 0;
    // Streams whose answer waits for window: (id, bytes already sent).
    let mut waiting: Vec<(u32, usize)> = Vec::new();
    loop {
        if !c.output().is_empty() {
            sock.write_all(c.output())?;
            let n = c.output().len();
            c.consume_output(n);
        }
        if c.is_done() {
            return Ok(());
        }
        let n = match sock.read(&mut buf[have..]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                reset.clear();
                c.tick(now(), &mut reset);
                waiting.retain(|w| !reset.contains(&w.0));
                continue;
            }
            Err(e) => return Err(e),
        };
        have += n;
        let mut off = 0;
        loop {
            let p = c.recv(&buf[off..have], now());
            off += p.consumed;
            let mut answer = None;
            let mut retry = false;
            match p.event {
                None if p.consumed == 0 => break,
                None => {}
                Some(Event::Request {
                    id,
                    end_stream: true,
                    ..
                }) => answer = Some(id),
                Some(Event::Request { .. }) => {}
                Some(Event::Data {
                    id,
                    data,
                    end_stream,
                }) => {
                    let len = data.len();
                    c.release(id, len);
                    if end_stream {
                        answer = Some(id);
                    }
                }
                Some(Event::Trailers { id, .. }) => answer = Some(id),
                Some(Event::Reset { id, .. }) => waiting.retain(|w| w.0 != id),
                Some(Event::WindowOpened { .. }) => retry = true,
                Some(Event::GoAway { .. }) | Some(Event::Response { .. }) => {}
                Some(Event::Closed { .. }) => break,
            }
            if let Some(id) = answer {
                let len = BODY.len().to_string();
                let fields: [(&[u8], &[u8]); 2] = [
                    (b"content-type", b"text/plain"),
                    (b"content-length", len.as_bytes()),
                ];
                if c.send_response(id, 200, &fields, false).is_ok() {
                    waiting.push((id, 0));
                    retry = true;
                }
            }
            if retry {
                let t = now();
                waiting.retain_mut(
                    |(id, sent)| match c.send_data(*id, &BODY[*sent..], true, t) {
                        Ok(n) => {
                            *sent += n;
                            *sent < BODY.len()
                        }
                        Err(_) => false,
                    },
                );
            }
        }
        buf.copy_within(off..have, 0);
        have -= off;
    }
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8443".to_string());
    let mut cfg = Config::default();
    if let Some(ms) = std::env::args().nth(2).and_then(|a| a.parse().ok()) {
        cfg.stall_timeout_ms = ms;
    }
    let l = TcpListener::bind(&addr)?;
    eprintln!("h2_driver listening on {}", l.local_addr()?);
    for s in l.incoming() {
        let s = s?;
        std::thread::spawn(move || {
            let _ = serve(s, cfg);
        });
    }
    Ok(())
}
