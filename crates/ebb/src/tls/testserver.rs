//! Loopback peers for the TLS and transport tests: a server that drives a
//! [`Transport`] the way the connection tasklet does (non-blocking, reads
//! until short, echoes what it got), and a non-blocking client driver.
#![allow(dead_code)]

use std::io::{self, ErrorKind};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::transport::Transport;

/// Bound of every loop here: a test that hangs fails instead.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// What the server saw of one connection.
#[derive(Debug, Default)]
pub struct Outcome {
    pub sni: Option<String>,
    pub alpn: Option<Vec<u8>>,
    pub info: Option<(rustls::ProtocolVersion, rustls::HandshakeKind)>,
    pub error: Option<io::Error>,
    pub received: Vec<u8>,
    /// Whether the handshake had completed when the connection ended.
    pub handshake_done: bool,
}

/// Serves `conns` connections, one after another, on an ephemeral loopback
/// port; `make` wraps each accepted (non-blocking) socket. Every
/// connection's plaintext is echoed back until the peer closes.
pub fn serve<F>(conns: usize, make: F) -> (SocketAddr, JoinHandle<Vec<Outcome>>)
where
    F: Fn(TcpStream) -> io::Result<Transport> + Send + 'static,
{
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("local_addr");
    let h = std::thread::spawn(move || {
        let mut out = Vec::new();
        for _ in 0..conns {
            let (s, _) = l.accept().expect("accept");
            s.set_nonblocking(true).expect("nonblocking");
            let mut t = make(s).expect("wrap");
            out.push(echo(&mut t));
        }
        out
    });
    (addr, h)
}

/// Drives one server connection: read until short, echo, flush; a short
/// sleep stands in for waiting on the next edge.
pub fn echo(t: &mut Transport) -> Outcome {
    let mut o = Outcome::default();
    let start = Instant::now();
    let mut buf = vec![0u8; 16 * 1024];
    let mut out: Vec<u8> = Vec::new();
    let mut eof = false;
    loop {
        if start.elapsed() > DEADLINE {
            o.error = Some(io::Error::new(ErrorKind::TimedOut, "test deadline"));
            break;
        }
        let mut moved = false;
        if !eof {
            loop {
                match t.read(&mut buf) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => {
                        moved = true;
                        o.received.extend_from_slice(&buf[..n]);
                        out.extend_from_slice(&buf[..n]);
                        if n < buf.len() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        o.error = Some(e);
                        break;
                    }
                }
            }
        }
        if o.info.is_none() && !t.is_handshaking() {
            o.info = t.tls_info();
            o.sni = t.sni().map(str::to_owned);
            o.alpn = t.alpn().map(<[u8]>::to_vec);
            o.handshake_done = true;
        }
        if o.error.is_some() {
            let _ = t.flush_pending();
            break;
        }
        while !out.is_empty() {
            match t.write(&out) {
                Ok(n) => {
                    moved = true;
                    out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    o.error = Some(e);
                    break;
                }
            }
        }
        match t.flush_pending() {
            Ok(done) => {
                if eof && done && out.is_empty() {
                    break;
                }
            }
            Err(e) => {
                o.error.get_or_insert(e);
                break;
            }
        }
        if o.error.is_some() {
            break;
        }
        if !moved {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let _ = t.shutdown();
    o
}

/// Client side with a non-blocking [`Transport`]: sends `data`, reads until
/// `data.len()` bytes came back, then closes with `close_notify`.
pub fn exchange(t: &mut Transport, data: &[u8]) -> io::Result<Vec<u8>> {
    let start = Instant::now();
    let mut sent = 0;
    let mut got = Vec::with_capacity(data.len());
    let mut buf = vec![0u8; 16 * 1024];
    t.flush_pending()?;
    while got.len() < data.len() {
        if start.elapsed() > DEADLINE {
            return Err(io::Error::new(ErrorKind::TimedOut, "test deadline"));
        }
        let mut moved = false;
        if sent < data.len() {
            match t.write(&data[sent..]) {
                Ok(n) => {
                    sent += n;
                    moved = n > 0;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        t.flush_pending()?;
        match t.read(&mut buf) {
            Ok(0) => return Err(io::Error::new(ErrorKind::UnexpectedEof, "server closed")),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                moved = true;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        if !moved {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    t.close_notify();
    let start = Instant::now();
    while !t.flush_pending()? && start.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = t.shutdown();
    Ok(got)
}

/// A blocking rustls client: connects, completes the handshake, sends
/// `msg`, reads its echo, closes. Returns the client connection for its
/// state (peer certificate, version, handshake kind) or the error.
pub fn blocking_client(
    addr: SocketAddr,
    config: std::sync::Arc<rustls::ClientConfig>,
    name: &str,
    msg: &[u8],
) -> Result<rustls::ClientConnection, io::Error> {
    use std::io::{Read, Write};
    let server_name = rustls::pki_types::ServerName::try_from(name.to_owned())
        .map_err(|e| io::Error::new(ErrorKind::InvalidInput, e))?;
    let mut conn = rustls::ClientConnection::new(config, server_name).map_err(io::Error::other)?;
    let mut sock = TcpStream::connect(addr)?;
    sock.set_read_timeout(Some(DEADLINE))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock)?;
    }
    {
        let mut s = rustls::Stream::new(&mut conn, &mut sock);
        s.write_all(msg)?;
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back)?;
        if back != msg {
            return Err(io::Error::other("echo differs"));
        }
    }
    conn.send_close_notify();
    let _ = conn.complete_io(&mut sock);
    Ok(conn)
}
