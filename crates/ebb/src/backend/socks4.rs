//! SOCKS4 towards a server (`server ... socks4 ADDR:PORT`, and for its
//! checks `check-via-socks4`), as HAProxy 2.6 speaks it: the TCP
//! connection goes to the proxy, which is asked to CONNECT to the server
//! (version 4, command 1, the server's port and IPv4 address, user id
//! `HAProxy`, 16 bytes); its 8-byte reply must grant it (code 90) before
//! any byte of the server's protocol (PROXY header, TLS, request) leaves.
//! A server address that is not IPv4 goes as 0.0.0.0, as HAProxy sends
//! it. A refusal, or a proxy that closes or fails first, is a failed
//! connect.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

/// Bytes of the request, and of the reply.
const REQ_LEN: usize = 16;
const RSP_LEN: usize = 8;

/// How a handshake failed (HAProxy's connection error codes).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fail {
    Send,
    Recv,
    Deny,
    Abort,
}

impl Fail {
    /// Whether a check's report is one of these.
    pub fn reported(desc: &str) -> bool {
        [Fail::Send, Fail::Recv, Fail::Deny, Fail::Abort]
            .iter()
            .any(|f| desc.starts_with(f.text()))
    }

    /// HAProxy's text for it.
    pub fn text(self) -> &'static str {
        match self {
            Fail::Send => "SOCKS4 Proxy write error during handshake",
            Fail::Recv => "SOCKS4 Proxy read error during handshake",
            Fail::Deny => "SOCKS4 Proxy deny the request",
            Fail::Abort => "SOCKS4 Proxy handshake aborted by server",
        }
    }
}

/// The CONNECT request for `dst`.
pub fn request(dst: SocketAddr) -> [u8; REQ_LEN] {
    let mut r = [0u8; REQ_LEN];
    r[0] = 4;
    r[1] = 1;
    r[2..4].copy_from_slice(&dst.port().to_be_bytes());
    if let SocketAddr::V4(a) = dst {
        r[4..8].copy_from_slice(&a.ip().octets());
    }
    r[8..].copy_from_slice(b"HAProxy\0");
    r
}

/// Judges a whole reply.
fn granted(rsp: &[u8; RSP_LEN]) -> Result<(), Fail> {
    if rsp[1] == 90 {
        Ok(())
    } else {
        Err(Fail::Deny)
    }
}

/// A handshake on a non-blocking socket, driven at each event of its
/// connect.
#[derive(Debug)]
pub struct Socks4 {
    req: [u8; REQ_LEN],
    sent: usize,
}

impl Socks4 {
    pub fn new(dst: SocketAddr) -> Box<Socks4> {
        Box::new(Socks4 {
            req: request(dst),
            sent: 0,
        })
    }

    /// Moves the handshake on once the TCP connect completed: `Ok(true)`
    /// when the proxy granted the request (its reply consumed),
    /// `Ok(false)` while it waits for the socket.
    pub fn advance(&mut self, mut s: &TcpStream) -> Result<bool, Fail> {
        use std::io::ErrorKind::{Interrupted, WouldBlock};
        while self.sent < REQ_LEN {
            match s.write(&self.req[self.sent..]) {
                Ok(0) => return Err(Fail::Send),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == WouldBlock => return Ok(false),
                Err(e) if e.kind() == Interrupted => {}
                Err(_) => return Err(Fail::Send),
            }
        }
        // The reply is peeked until whole, then taken (HAProxy's way:
        // no server byte is read with it).
        let mut rsp = [0u8; RSP_LEN];
        loop {
            match s.peek(&mut rsp) {
                Ok(0) => return Err(Fail::Recv),
                Ok(n) if n < RSP_LEN => return Ok(false),
                Ok(_) => break,
                Err(e) if e.kind() == WouldBlock => return Ok(false),
                Err(e) if e.kind() == Interrupted => {}
                Err(_) => return Err(Fail::Abort),
            }
        }
        granted(&rsp)?;
        match s.read(&mut rsp) {
            Ok(RSP_LEN) => Ok(true),
            _ => Err(Fail::Recv),
        }
    }
}

/// A server connection whose TCP connect completed: Some(true) when it
/// is up (its handshake, if any, done), None while the handshake waits,
/// Some(false) when the proxy refused or failed.
pub fn settle(h: &mut Option<Box<Socks4>>, s: &TcpStream) -> Option<bool> {
    let r = match h.as_mut().map(|h| h.advance(s)) {
        Some(Ok(false)) => return None,
        Some(Err(_)) => false,
        Some(Ok(true)) | None => true,
    };
    *h = None;
    Some(r)
}

/// The handshake on a blocking socket (a check's), within its timeouts;
/// Err(None): the time ran out.
pub fn blocking(s: &mut TcpStream, dst: SocketAddr) -> Result<(), Option<Fail>> {
    let timeout = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    };
    s.write_all(&request(dst))
        .map_err(|e| (!timeout(&e)).then_some(Fail::Send))?;
    let mut rsp = [0u8; RSP_LEN];
    let mut got = 0;
    while got < RSP_LEN {
        match s.read(&mut rsp[got..]) {
            Ok(0) => return Err(Some(Fail::Recv)),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if timeout(&e) => return Err(None),
            Err(_) => return Err(Some(Fail::Abort)),
        }
    }
    granted(&rsp).map_err(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_haproxys() {
        let r = request("10.1.2.3:8080".parse().unwrap());
        assert_eq!(&r[..8], &[4, 1, 0x1f, 0x90, 10, 1, 2, 3]);
        assert_eq!(&r[8..], b"HAProxy\0");
        let r = request("[::1]:80".parse().unwrap());
        assert_eq!(&r[2..8], &[0, 80, 0, 0, 0, 0]);
    }
}
