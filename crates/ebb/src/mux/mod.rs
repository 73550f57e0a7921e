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
//! - [`fcgi`]: FastCGI toward servers (`server ... proto fcgi`).
//! - [`srvconn`]: what the two multiplexed server sides share.
//!
//! A mux owns its sockets' readiness: each socket is registered with the
//! tasklet of the side that owns it, so a server-side event never runs
//! client-side code and vice versa.

pub(crate) mod fcgi;
pub mod h1;
pub mod h2;
pub(crate) mod srvconn;

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

/// Notes the readiness a client socket's poll events bring, as a mux
/// keeps it (`rd`: readable, `hup`: the peer's close reported, `wr`:
/// writable). A hang-up or an error makes the socket both readable and
/// writable (the next read or write says what happened), and sets `hup`:
/// the client's end of stream may sit behind the last bytes with no edge
/// to come, so its connection reads on until a read returns 0. Bits are
/// only ever set here: they are cleared by the reads and writes that find
/// the socket drained or full.
#[inline]
pub(crate) fn note_events(ev: sched::Events, rd: &mut bool, hup: &mut bool, wr: &mut bool) {
    let gone = ev.hup_or_err();
    *rd |= ev.readable() || gone;
    *hup |= gone;
    *wr |= ev.writable() || gone;
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
    read_once_with(tr, buf, len, &mut r.rd, r.hup, &mut r.eof)
}

/// [`read_once`] on readiness bits kept elsewhere (the HTTP/1 server
/// side's): `rd` readable, `hup` the peer's close reported, `eof` the end
/// of stream read.
#[inline]
pub(crate) fn read_once_with(
    tr: &mut Transport,
    buf: &mut [u8],
    len: &mut usize,
    rd: &mut bool,
    hup: bool,
    eof: &mut bool,
) -> std::io::Result<bool> {
    use std::io::ErrorKind;
    if *len == buf.len() {
        return Ok(false);
    }
    let room = buf.len() - *len;
    let mut again = false;
    loop {
        match tr.read(&mut buf[*len..]) {
            Ok(0) => {
                *eof = true;
                return Ok(false);
            }
            Ok(n) => {
                *len += n;
                if n < room && !hup && !tr.read_pending() {
                    *rd = false;
                }
                return Ok(true);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                // A TLS read whose records carried no data (a session
                // ticket: a TLS 1.3 server that closes right after its
                // handshake) and whose socket read came back short takes
                // the socket for empty; the peer's close, which the
                // poller reported, may wait behind them and no new edge
                // would come: one more read finds it (it answered 504
                // after `timeout server` instead of seeing the close).
                if hup && !again {
                    again = true;
                    continue;
                }
                *rd = false;
                return Ok(false);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Most bytes a lingering close ([`Linger`]) reads and drops before it
/// gives up and closes (with a reset, over what still comes): the end of
/// an upload a client sends to an answer that refused it (nginx's default
/// `client_max_body_size`). A client that keeps sending is cut here or at
/// the time bound its connection sets, whichever comes first.
pub(crate) const LINGER_MAX_BYTES: u32 = 1024 * 1024;

/// A lingering close of a client connection, HTTP/1 or HTTP/2 (nginx's
/// `lingering_close`; Apache's): the connection ends its side (TLS's
/// `close_notify`, then the FIN once those records are out) and reads
/// on, dropping what comes, until the client closes too (its FIN, its
/// `close_notify`), so that no byte arrives to a closed socket, whose
/// kernel would answer with a reset (and a reset drops the answer still
/// in the send queue, and the client's unread input). Bounded by
/// [`LINGER_MAX_BYTES`] here and by a date its connection keeps (`timeout
/// client` from the start, shorter during a stop).
///
/// HAProxy 2.6 does not linger: its HTTP/1 and HTTP/2 client sides shut
/// their sending side and close at once (`h1_release`, `h2_release`), so a
/// byte that comes after, or sat unread, gets a reset.
#[derive(Default)]
pub(crate) struct Linger {
    /// Bytes it still reads before it gives up.
    left: u32,
    /// Our FIN left.
    shut: bool,
}

impl Linger {
    /// Starts one: queues TLS's `close_notify`. `shut`: the FIN already
    /// left (with the last answer).
    pub(crate) fn start(tr: &mut Transport, shut: bool) -> Linger {
        tr.close_notify();
        Linger {
            left: LINGER_MAX_BYTES,
            shut,
        }
    }

    /// A run: the end of the TLS records, the FIN, then what the client
    /// sends, read and dropped, with the socket's readiness as its
    /// connection keeps it (`rd`, `wr` cleared when a call finds nothing
    /// more; `hup`: the peer's close was reported). Returns whether the
    /// connection must close now: the client's end, an error, or the
    /// bound (over unread bytes: a reset); `false`: nothing more for now
    /// (wait for the next edge).
    pub(crate) fn step(
        &mut self,
        tr: &mut Transport,
        rd: &mut bool,
        hup: bool,
        wr: &mut bool,
    ) -> bool {
        use std::io::ErrorKind;
        if tr.has_pending_output() && *wr {
            match tr.flush_pending() {
                Ok(true) => {}
                Ok(false) => *wr = false,
                Err(e) if e.kind() == ErrorKind::WouldBlock => *wr = false,
                Err(_) => return true,
            }
        }
        if !self.shut && !tr.has_pending_output() {
            tr.shut_write();
            self.shut = true;
        }
        let mut buf = [0u8; 16 * 1024];
        while *rd {
            match tr.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => {
                    let Some(left) = self.left.checked_sub(n as u32) else {
                        return true;
                    };
                    self.left = left;
                    if n < buf.len() && !hup && !tr.read_pending() {
                        *rd = false;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => *rd = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
        false
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
