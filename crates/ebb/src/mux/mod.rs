//! Muxes: protocols over a connection. A mux turns one protocol's bytes
//! into the messages of `stream::msg` and back, on either side of
//! a stream: the client side (requests in, responses out) and the server
//! side (requests out, responses in).
//!
//! - [`h1`]: HTTP/1.1, both sides (client connections, server connections).
//! - [`h2`]: HTTP/2, the client side, over the socket-free core in
//!   [`crate::h2`]; each stream runs on a lane of the HTTP/1 client side.
//!   Its `server` module is the server side (`server ... proto h2`): the
//!   streams of several exchanges on one connection to a server.
//!
//! A mux owns its sockets' readiness: each socket is registered with the
//! tasklet of the side that owns it, so a server-side event never runs
//! client-side code and vice versa.

pub mod h1;
pub mod h2;

use crate::transport::Transport;

/// The readiness of an HTTP/2 connection's socket, as its tasklet saw the
/// edges: readable, the peer's close reported (read on to the end of
/// stream), writable, the end of stream read.
#[derive(Default)]
pub(crate) struct Ready {
    pub(crate) rd: bool,
    pub(crate) hup: bool,
    pub(crate) wr: bool,
    pub(crate) eof: bool,
}

/// Reads once from `tr` into `buf[*len..]`. Returns whether bytes
/// arrived; a short read clears `r.rd` (the socket is drained, the next
/// edge says when more comes), the end of stream sets `r.eof`.
pub(crate) fn read_once(
    tr: &mut Transport,
    buf: &mut [u8],
    len: &mut usize,
    r: &mut Ready,
) -> std::io::Result<bool> {
    use std::io::ErrorKind;
    if *len == buf.len() {
        return Ok(false);
    }
    let room = buf.len() - *len;
    loop {
        match tr.read(&mut buf[*len..]) {
            Ok(0) => {
                r.eof = true;
                return Ok(false);
            }
            Ok(n) => {
                *len += n;
                if n < room && !r.hup && !tr.read_pending() {
                    r.rd = false;
                }
                return Ok(true);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                r.rd = false;
                return Ok(false);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Writes an HTTP/2 connection's output (and the TLS records pending) to
/// `tr` while it takes them; `r.wr` is cleared when it takes no more.
/// Returns whether bytes left.
pub(crate) fn write_h2(
    tr: &mut Transport,
    h2: &mut crate::h2::Connection,
    r: &mut Ready,
) -> std::io::Result<bool> {
    use std::io::ErrorKind;
    let mut moved = false;
    while !h2.output().is_empty() && r.wr {
        match tr.write(h2.output()) {
            Ok(0) => r.wr = false,
            Ok(n) => {
                h2.consume_output(n);
                moved = true;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => r.wr = false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if tr.has_pending_output() {
        match tr.flush_pending() {
            Ok(true) => {}
            Ok(false) => r.wr = false,
            Err(e) if e.kind() == ErrorKind::WouldBlock => r.wr = false,
            Err(e) => return Err(e),
        }
    }
    Ok(moved)
}
