//! A connection's byte stream: plain TCP, or TLS (rustls) over TCP, behind
//! one set of non-blocking calls so the HTTP code does not care which.
//!
//! The connection code drives an edge-triggered socket: it reads until a
//! call comes back short or with `WouldBlock`, then waits for the next edge.
//! [`Transport`] keeps that contract for TLS too:
//!
//! - [`Transport::read`] returns plaintext. `Ok(n)` with `n < buf.len()`
//!   means the socket is drained *and* rustls holds no decrypted byte, so
//!   waiting for the next read edge is safe. `Ok(0)` is the end of the
//!   stream (a clean `close_notify`, or a TCP close after the handshake).
//!   `WouldBlock` means nothing is available. A TLS protocol error (bad
//!   record, alert, failed handshake) is `InvalidData` with rustls' text;
//!   the alert rustls queued for the peer is sent on a best-effort basis,
//!   and every later call returns the same error.
//! - [`Transport::write`] / [`Transport::write_vectored`] accept plaintext;
//!   for TLS it is encrypted into rustls' record buffer (at most 64 KiB,
//!   rustls' default limit) and flushed as far as the socket takes it. A
//!   short count, or `WouldBlock`, means the socket is full, so waiting for
//!   the next write edge is safe. Accepted bytes may still sit in rustls'
//!   buffer: [`Transport::has_pending_output`] says so, and
//!   [`Transport::flush_pending`] pushes them on each write edge.
//! - A TLS read may have to *write* (handshake messages, session tickets,
//!   alerts); it does so itself, and what the socket does not take stays
//!   pending, exactly like written data.
//!
//! Read-side rules from rustls' documentation that this module keeps:
//! `process_new_packets` after every successful `read_tls`; the decrypted
//! plaintext is drained into the caller's buffer *before* more ciphertext is
//! read (rustls refuses `read_tls` past 16 KiB of unread plaintext);
//! after a protocol error, `read_tls` is never called again, but the queued
//! alert is flushed with `write_tls` before the socket is closed.
//!
//! Nothing here blocks, allocates per call on the plain path, or panics on
//! what the peer sends.

use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

/// Largest plaintext of one TLS record (RFC 8446 §5.1): the file chunk that
/// [`Transport::send_file`] reads for TLS, so one read makes one record.
const TLS_FILE_CHUNK: usize = 16 * 1024;

/// A connection's stream. Both variants own the socket; the fd is the same
/// for the whole life of the value, so it may stay registered in epoll.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

/// TLS over a non-blocking TCP socket, client or server side.
pub struct TlsStream {
    sock: TcpStream,
    conn: Connection,
    /// Set when the socket said it is empty (`WouldBlock`, or a read shorter
    /// than asked) during the current [`Transport::read`] call.
    /// INVARIANT: cleared at the start of every `read`, since the caller
    /// only reads again after a new edge (or to check).
    drained: bool,
    /// The protocol error that ended the connection: returned by every call
    /// after it (rustls' state is dead then).
    failed: Option<String>,
}

fn tls_error(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_owned())
}

/// Counts what a socket read returned against what was asked, so a short
/// read marks the socket drained as in the plain path.
struct DrainReader<'a> {
    sock: &'a mut TcpStream,
    drained: &'a mut bool,
}

impl Read for DrainReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.sock.read(buf) {
            Ok(n) => {
                if n < buf.len() {
                    *self.drained = true;
                }
                Ok(n)
            }
            Err(e) => {
                if e.kind() == io::ErrorKind::WouldBlock {
                    *self.drained = true;
                }
                Err(e)
            }
        }
    }
}

impl TlsStream {
    fn new(sock: TcpStream, conn: Connection) -> Self {
        TlsStream {
            sock,
            conn,
            drained: false,
            failed: None,
        }
    }

    fn check_failed(&self) -> io::Result<()> {
        match &self.failed {
            Some(m) => Err(tls_error(m)),
            None => Ok(()),
        }
    }

    /// Writes buffered records to the socket. `Ok(true)`: nothing remains.
    fn flush_tls(&mut self) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Records a protocol error, sends the alert rustls queued for it as far
    /// as the socket takes it, and returns the error to report.
    #[cold]
    fn fail(&mut self, e: rustls::Error) -> io::Error {
        let msg = e.to_string();
        let _ = self.flush_tls();
        self.failed = Some(msg.clone());
        tls_error(&msg)
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.check_failed()?;
        if buf.is_empty() {
            return Ok(0);
        }
        self.drained = false;
        let mut n = 0;
        loop {
            // 1. Hand over what rustls has decrypted.
            match self.conn.reader().read(&mut buf[n..]) {
                Ok(0) => return Ok(n), // close_notify received, all data read
                Ok(k) => {
                    n += k;
                    if n == buf.len() {
                        return Ok(n);
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    // TCP closed without close_notify. HTTP/1 frames its
                    // messages itself, so after the handshake this is a
                    // plain end of stream (as most servers treat it); during
                    // the handshake it is a failed handshake.
                    if n > 0 || !self.conn.is_handshaking() {
                        return Ok(n);
                    }
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed during the TLS handshake",
                    ));
                }
                Err(e) => return Err(e),
            }
            // 2. Nothing decrypted: get more ciphertext, unless the socket
            // already said it is empty.
            if self.drained {
                return if n > 0 {
                    Ok(n)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
            }
            let mut rd = DrainReader {
                sock: &mut self.sock,
                drained: &mut self.drained,
            };
            match self.conn.read_tls(&mut rd) {
                Ok(_) => {} // Ok(0): EOF, step 1 reports it after processing
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // rustls' own refusals ("message buffer full": a record
                    // or handshake message over its size limits) are
                    // protocol errors; others are socket errors.
                    if e.kind() == io::ErrorKind::InvalidData || e.kind() == io::ErrorKind::Other {
                        let msg = e.to_string();
                        self.failed = Some(msg.clone());
                        return Err(tls_error(&msg));
                    }
                    return Err(e);
                }
            }
            // 3. Process every complete record read (rustls' rule: after
            // each successful read_tls).
            if let Err(e) = self.conn.process_new_packets() {
                let err = self.fail(e);
                // Plaintext handed over before the bad record stays valid.
                return if n > 0 { Ok(n) } else { Err(err) };
            }
            // 4. Handshake messages, tickets, key-update answers.
            if self.conn.wants_write() {
                self.flush_tls()?;
            }
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.check_failed()?;
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return Ok(0);
        }
        // Send what is already queued first: it comes before this data.
        if !self.flush_tls()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut done = 0;
        loop {
            let k = if done == 0 {
                self.conn.writer().write_vectored(bufs)?
            } else {
                // Partial acceptance (rustls' buffer limit): rebuild the
                // rest. Rare, so the allocation does not matter.
                let rest = remaining_slices(bufs, done);
                self.conn.writer().write_vectored(&rest)?
            };
            done += k;
            let flushed = self.flush_tls()?;
            if done == total || !flushed {
                break;
            }
            if k == 0 {
                // Buffer empty on the wire side yet nothing accepted: the
                // plaintext waits for the handshake to finish (a client
                // writing early). The next read completes the handshake.
                break;
            }
        }
        if done == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(done)
    }
}

/// `bufs` with the first `skip` bytes removed.
fn remaining_slices<'a>(bufs: &'a [IoSlice<'a>], mut skip: usize) -> Vec<IoSlice<'a>> {
    let mut out = Vec::with_capacity(bufs.len());
    for b in bufs {
        let s: &'a [u8] = b;
        if skip >= s.len() {
            skip -= s.len();
            continue;
        }
        out.push(IoSlice::new(&s[skip..]));
        skip = 0;
    }
    out
}

impl Transport {
    /// A cleartext connection.
    pub fn plain(sock: TcpStream) -> Transport {
        Transport::Plain(sock)
    }

    /// The server side of TLS on an accepted (non-blocking) socket. Nothing
    /// is read or written yet: the first [`Transport::read`] runs the
    /// handshake as far as the client's bytes allow.
    pub fn accept_tls(sock: TcpStream, config: Arc<ServerConfig>) -> io::Result<Transport> {
        let conn = ServerConnection::new(config).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Transport::Tls(Box::new(TlsStream::new(sock, conn.into()))))
    }

    /// The client side of TLS to a server, on a (non-blocking) socket whose
    /// connect may still be in progress. `server_name` is the name to send
    /// as SNI and to verify the certificate against (a DNS name or an IP
    /// literal; rustls sends no SNI for an IP). The ClientHello is queued:
    /// call [`Transport::flush_pending`] once the socket is writable, then
    /// read as usual; writes made before the handshake ends are buffered
    /// (up to 64 KiB) and leave when it completes.
    pub fn connect_tls(
        sock: TcpStream,
        config: Arc<ClientConfig>,
        server_name: &str,
    ) -> io::Result<Transport> {
        let name = ServerName::try_from(server_name.to_owned()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad TLS server name {server_name:?}: {e}"),
            )
        })?;
        let conn =
            ClientConnection::new(config, name).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Transport::Tls(Box::new(TlsStream::new(sock, conn.into()))))
    }

    /// Reads plaintext (see the module doc for what a short count means).
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(t) => t.read(buf),
        }
    }

    /// Writes plaintext; a short count or `WouldBlock` means the socket is
    /// full.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(t) => t.write_vectored(&[IoSlice::new(buf)]),
        }
    }

    /// As [`Transport::write`], gathering several slices (for TLS, into the
    /// same records: a small head and its body make one record, not two).
    pub fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write_vectored(bufs),
            Transport::Tls(t) => t.write_vectored(bufs),
        }
    }

    /// Sends buffered TLS records. `Ok(true)` when nothing remains (always,
    /// for plain TCP); `Ok(false)` when the socket is full.
    pub fn flush_pending(&mut self) -> io::Result<bool> {
        match self {
            Transport::Plain(_) => Ok(true),
            Transport::Tls(t) => {
                // After a failure the alert may still be pending: flushing
                // it is allowed (and wanted).
                t.flush_tls()
            }
        }
    }

    /// Whether TLS records wait to be written (accepted data, handshake
    /// messages, an alert). Keep the connection open and writing until
    /// this is false.
    pub fn has_pending_output(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(t) => t.conn.wants_write(),
        }
    }

    /// Whether the TLS handshake is still running (false for plain TCP).
    /// Turns false when the peer's Finished message has been processed by a
    /// [`Transport::read`]: that is when a connection's tasklet stops being
    /// heavy.
    pub fn is_handshaking(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(t) => t.conn.is_handshaking(),
        }
    }

    /// Whether this is a TLS stream.
    pub fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }

    /// Whether `sendfile` may write to the fd (false for TLS: the kernel
    /// would send cleartext). [`Transport::send_file`] handles both.
    pub fn supports_sendfile(&self) -> bool {
        matches!(self, Transport::Plain(_))
    }

    /// Sends up to `count` bytes of `file` from `*off` and advances `*off`
    /// by what left: `sendfile` for plain TCP, a `pread` of one record's
    /// worth and [`Transport::write`] for TLS. Same results as
    /// [`crate::sys::sendfile`]: `Ok(0)` means the file ended before `*off`
    /// (it shrank); a count below `count` or `WouldBlock` means the socket
    /// is full. For TLS, file bytes read but not accepted are read again by
    /// the next call, so nothing is kept between calls.
    pub fn send_file(&mut self, file: &File, off: &mut u64, count: usize) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => {
                crate::sys::sendfile(s.as_raw_fd(), file.as_raw_fd(), off, count)
            }
            Transport::Tls(t) => {
                if count == 0 {
                    return Ok(0);
                }
                if !t.flush_tls()? {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                let mut chunk = [0u8; TLS_FILE_CHUNK];
                let want = count.min(TLS_FILE_CHUNK);
                let got = loop {
                    match file.read_at(&mut chunk[..want], *off) {
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        r => break r?,
                    }
                };
                if got == 0 {
                    return Ok(0);
                }
                let n = t.write_vectored(&[IoSlice::new(&chunk[..got])])?;
                *off += n as u64;
                Ok(n)
            }
        }
    }

    /// The socket's fd (the same for both kinds; register it once).
    pub fn raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }

    /// The TCP socket under the stream (for options, peer address).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => &t.sock,
        }
    }

    /// Queues a TLS `close_notify` (nothing for plain TCP). For a graceful
    /// close: call it, [`Transport::flush_pending`] until it returns true
    /// (or the close timer fires), then [`Transport::shutdown`].
    pub fn close_notify(&mut self) {
        if let Transport::Tls(t) = self {
            if t.failed.is_none() {
                t.conn.send_close_notify();
            }
        }
    }

    /// Ends the connection now: queues `close_notify` (once; not after a
    /// protocol error, where the alert already said it), writes what the
    /// socket takes of the pending records, then shuts the TCP socket down
    /// both ways. Records the socket did not take are lost; use
    /// [`Transport::close_notify`] and [`Transport::flush_pending`] first
    /// when that matters.
    pub fn shutdown(&mut self) -> io::Result<()> {
        if let Transport::Tls(t) = self {
            if t.failed.is_none() {
                t.conn.send_close_notify();
            }
            let _ = t.flush_tls();
        }
        self.tcp().shutdown(Shutdown::Both)
    }

    /// The ALPN protocol agreed in the handshake.
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(t) => t.conn.alpn_protocol(),
        }
    }

    /// The SNI name the client sent (server side; `None` on the client
    /// side, for plain TCP, or when the client sent none).
    pub fn sni(&self) -> Option<&str> {
        match self {
            Transport::Tls(t) => match &t.conn {
                Connection::Server(s) => s.server_name(),
                Connection::Client(_) => None,
            },
            Transport::Plain(_) => None,
        }
    }

    /// The negotiated protocol version and how the handshake went (full or
    /// resumed), for logs and tests. `None` before the handshake ends.
    pub fn tls_info(&self) -> Option<(rustls::ProtocolVersion, rustls::HandshakeKind)> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(t) => Some((t.conn.protocol_version()?, t.conn.handshake_kind()?)),
        }
    }
}

/// The std traits, so generic code (and tests) can use `write_all` and
/// friends; the inherent methods above are what the connection calls.
impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Transport::read(self, buf)
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Transport::write(self, buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        Transport::write_vectored(self, bufs)
    }

    /// Pushes pending records; `WouldBlock` while some remain.
    fn flush(&mut self) -> io::Result<()> {
        if self.flush_pending()? {
            Ok(())
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Plain(s) => f.debug_tuple("Plain").field(s).finish(),
            Transport::Tls(t) => f
                .debug_struct("Tls")
                .field("sock", &t.sock)
                .field("handshaking", &t.conn.is_handshaking())
                .field("failed", &t.failed)
                .finish(),
        }
    }
}
