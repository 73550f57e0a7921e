//! A test driver for ebb's sans-IO HTTP/2 core (`ebb::h2`), used to run
//! h2spec, curl and nghttp against it before the mux exists: std
//! `TcpListener`, one thread per connection, blocking I/O, cleartext with
//! prior knowledge. Every request gets `200` with a fixed body, sent once
//! its request has ended (a body is read and discarded).
//!
//!   cargo run -p ebb --example h2_driver -- 127.0.0.1:8443
//!   h2spec -h 127.0.0.1 -p 8443

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use ebb::h2::{Config, Connection, Event};

const BODY: &[u8] = b"hello from ebb's h2 core\n";

fn serve(mut sock: TcpStream) -> std::io::Result<()> {
    let t0 = Instant::now();
    let now = || t0.elapsed().as_millis() as u32 | 1;
    let mut c = Connection::new(Config::default());
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
        let n = sock.read(&mut buf[have..])?;
        if n == 0 {
            return Ok(());
        }
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
                Some(Event::GoAway { .. }) => {}
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
    let l = TcpListener::bind(&addr)?;
    eprintln!("h2_driver listening on {}", l.local_addr()?);
    for s in l.incoming() {
        let s = s?;
        std::thread::spawn(move || {
            let _ = serve(s);
        });
    }
    Ok(())
}
