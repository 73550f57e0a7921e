//! A connection's byte stream: plain TCP, or TLS (rustls) over TCP, behind
//! one set of non-blocking calls so the HTTP code does not care which.
//!
//! The connection code drives an edge-triggered socket: it reads until a
//! call comes back short or with `WouldBlock`, then waits for the next edge.
//! [`Transport`] keeps that contract for TLS too:
//!
//! - [`Transport::read`] returns plaintext. `Ok(n)` with `n < buf.len()`
//!   means the socket is drained *and* rustls holds no decrypted byte, so
//!   waiting for the next read edge is safe, unless
//!   [`Transport::read_pending`] says the end of the stream is already
//!   known: a `close_notify` or a TCP close that came in the same records
//!   as the last bytes (no edge will announce it again, so read once more).
//!   `Ok(0)` is the end of the stream (a clean `close_notify`, or a TCP
//!   close after the handshake).
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
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::tls::hello::HelloGate;
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
    /// One HTTP/2 stream's exchange seen as an HTTP/1 connection (a
    /// *lane* of `mux::h2`): bytes go through a [`LanePipe`] shared with
    /// the HTTP/2 connection's tasklet, never to a socket.
    Lane(Box<LaneEnd>),
}

/// A server connection that may move to another thread (an idle one in
/// a pool the threads share): a socket, or TLS over one; never a lane.
pub enum Movable {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Movable {
    /// The socket's fd.
    pub fn raw_fd(&self) -> RawFd {
        match self {
            Movable::Plain(s) => s.as_raw_fd(),
            Movable::Tls(t) => t.sock.as_raw_fd(),
        }
    }
}

impl Transport {
    /// The connection as another thread may take it (`None` for a lane,
    /// which belongs to its HTTP/2 connection).
    pub fn into_movable(self) -> Option<Movable> {
        match self {
            Transport::Plain(s) => Some(Movable::Plain(s)),
            Transport::Tls(t) => Some(Movable::Tls(t)),
            Transport::Lane(_) => None,
        }
    }
}

impl From<Movable> for Transport {
    fn from(m: Movable) -> Transport {
        match m {
            Movable::Plain(s) => Transport::Plain(s),
            Movable::Tls(t) => Transport::Tls(t),
        }
    }
}

/// The buffers between an HTTP/2 connection and one of its lanes (an
/// HTTP/1 client side running a stream). The HTTP/2 side writes a
/// request's head and body into `input` and takes the answer from
/// `output`; the lane reads and writes them through its [`Transport`].
#[derive(Default)]
pub struct LanePipe {
    /// Request bytes for the lane, from `in_pos` on.
    pub input: Vec<u8>,
    pub in_pos: usize,
    /// Request bytes the lane read since the HTTP/2 side last looked
    /// (granted back to the client as flow-control credit).
    pub read_count: usize,
    /// Answer bytes the lane wrote, not yet taken by the HTTP/2 side.
    pub output: Vec<u8>,
    /// Most bytes `output` holds: a full pipe is a full socket
    /// (`WouldBlock`), so the lane waits for the HTTP/2 send window.
    pub out_max: usize,
    /// The HTTP/2 side dropped the exchange (the client reset the stream
    /// or left): the lane's next read fails, and it closes.
    pub abort: bool,
    /// The lane shut its connection down.
    pub closed: bool,
    /// The lane's exchange was ended before any answer by its server's
    /// state (`on-marked-down shutdown-sessions`): the HTTP/2 side resets
    /// the stream with REFUSED_STREAM, as HAProxy's, so the client may
    /// send it again.
    pub refused: bool,
    /// The lane moved bytes since the HTTP/2 side last looked.
    pub dirty: bool,
    /// The client ended its side of a tunnel (END_STREAM on an extended
    /// CONNECT), or closed the connection: once `input` is read, the lane
    /// reads the end (0).
    pub eof: bool,
    /// That end is the client's END_STREAM on a tunnel (not its close of
    /// the connection): passed on to the server as a half-close, as
    /// HAProxy 2.6 shuts the server's side of a CONNECT tunnel.
    pub half_close: bool,
    /// The `sec-websocket-key` the HTTP/2 side made up for an extended
    /// CONNECT websocket request (RFC 8441 has none): the server's
    /// `sec-websocket-accept` must match it (HAProxy's check).
    pub ws_key: Option<[u8; 24]>,
}

/// The lane's end of a [`LanePipe`], with the facts of the HTTP/2
/// connection that carries it (for sample fetches and the log line).
pub struct LaneEnd {
    pub pipe: std::rc::Rc<std::cell::RefCell<LanePipe>>,
    /// A duplicate of the client's socket, only for its addresses (one
    /// per HTTP/2 connection, shared by its lanes).
    pub sock: std::rc::Rc<TcpStream>,
    pub tls: bool,
    pub sni: Option<String>,
    pub alpn: Option<Vec<u8>>,
    /// The client's certificate (`bind ... verify`), for `ssl_c_*`.
    pub client: Option<Arc<crate::tls::clientauth::ClientCert>>,
}

impl LaneEnd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut p = self.pipe.borrow_mut();
        if p.abort {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        let avail = p.input.len() - p.in_pos;
        if avail == 0 && p.eof {
            return Ok(0);
        }
        if avail == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = avail.min(buf.len());
        let at = p.in_pos;
        buf[..n].copy_from_slice(&p.input[at..at + n]);
        p.in_pos += n;
        p.read_count += n;
        if p.in_pos == p.input.len() {
            p.input.clear();
            p.in_pos = 0;
        }
        p.dirty = true;
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut p = self.pipe.borrow_mut();
        if p.abort {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let mut room = p.out_max.saturating_sub(p.output.len());
        if room == 0 && bufs.iter().any(|b| !b.is_empty()) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut n = 0;
        for b in bufs {
            let k = b.len().min(room);
            p.output.extend_from_slice(&b[..k]);
            room -= k;
            n += k;
        }
        p.dirty = true;
        Ok(n)
    }
}

/// Largest first flight held back from rustls while the hello is read.
const SNIFF_MAX: usize = 70 * 1024;

/// The bytes of a server connection's first flight, held back from rustls
/// until the ClientHello is whole (so the gate may still pick the
/// configuration).
struct Sniffer {
    gate: Arc<dyn HelloGate>,
    buf: Vec<u8>,
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
    /// Server side, until the ClientHello has been read.
    sniffer: Option<Box<Sniffer>>,
    /// Whether a ClientHello was read, and the SNI it named, for the log
    /// line of a failed handshake.
    hello_sni: Option<Option<String>>,
    /// The end of the stream was seen while handing over the last bytes:
    /// the next read returns `Ok(0)` without waiting for an edge.
    eof_pending: bool,
    /// Server side: what verifying the client's certificate found, when
    /// one was presented in this handshake (`verify optional|required`).
    client_note: Option<crate::tls::clientauth::VerifyNote>,
    /// Server side, until the handshake ends: the verifier of the
    /// configuration the hello got, to give a resumed session that had a
    /// client certificate its verify result (`session_verify`).
    auth: Option<Arc<crate::tls::clientauth::ClientAuth>>,
    session_verify: i32,
    /// Server side: the certificate served (`ssl_f_*`): the resolver's
    /// choice, or for a resumed session what its hello names.
    own_cert: Option<Arc<rustls::sign::CertifiedKey>>,
    /// Client side: the handshake failed on a server certificate that
    /// does not name the SNI sent ([`Transport::sni_mismatch`]).
    sni_mismatch: bool,
    /// Client side: bytes for the socket before any TLS record (a PROXY
    /// header, [`Transport::send_first`]).
    prefix: Vec<u8>,
    /// Its place among the process's TLS connections (`maxsslconn`).
    _slot: SslSlot,
}

/// TLS connections open now, both sides (`CurrSslConns`).
static SSL_CUR: AtomicU32 = AtomicU32::new(0);
/// TLS connections since start (`CumSslConns`).
static SSL_TOTAL: AtomicU64 = AtomicU64::new(0);
/// `maxsslconn`; 0: no limit.
static SSL_MAX: AtomicU32 = AtomicU32::new(0);

/// Sets `maxsslconn` (0: none), for the connections made from now on.
pub fn set_max_ssl_conns(n: u32) {
    SSL_MAX.store(n, Ordering::Relaxed);
}

/// `show info`'s `MaxSslConns`, `CurrSslConns` and `CumSslConns`.
pub fn ssl_conns() -> (u32, u32, u64) {
    (
        SSL_MAX.load(Ordering::Relaxed),
        SSL_CUR.load(Ordering::Relaxed),
        SSL_TOTAL.load(Ordering::Relaxed),
    )
}

/// One TLS connection counted against `maxsslconn` (HAProxy counts both
/// sides: a request deciphered then ciphered again holds two); released
/// when the connection is dropped.
struct SslSlot(());

impl SslSlot {
    fn take() -> io::Result<SslSlot> {
        let max = SSL_MAX.load(Ordering::Relaxed);
        SSL_CUR
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                (max == 0 || c < max).then_some(c + 1)
            })
            .map_err(|_| io::Error::other("too many SSL connections (maxsslconn)"))?;
        SSL_TOTAL.fetch_add(1, Ordering::Relaxed);
        Ok(SslSlot(()))
    }
}

impl Drop for SslSlot {
    fn drop(&mut self) {
        SSL_CUR.fetch_sub(1, Ordering::Relaxed);
    }
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
    fn new(sock: TcpStream, conn: Connection, slot: SslSlot) -> Self {
        TlsStream {
            sock,
            conn,
            drained: false,
            failed: None,
            sniffer: None,
            hello_sni: None,
            eof_pending: false,
            client_note: None,
            auth: None,
            session_verify: 0,
            own_cert: None,
            sni_mismatch: false,
            prefix: Vec::new(),
            _slot: slot,
        }
    }

    /// `msg`, with the SNI the client asked for when the handshake failed.
    fn during_handshake(&self, msg: String) -> String {
        match &self.hello_sni {
            Some(Some(n)) if self.conn.is_handshaking() => format!("{msg} (SNI \"{n}\")"),
            Some(None) if self.conn.is_handshaking() => format!("{msg} (no SNI)"),
            _ => msg,
        }
    }

    /// While the ClientHello is incomplete: reads the socket into the
    /// sniffer's buffer (not into rustls). `Ok(true)`: still incomplete and
    /// the socket is drained (wait for the next edge). `Ok(false)`: the
    /// hello passed the gate (or is no hello at all) and everything read so
    /// far went to rustls, which processed it.
    fn sniff(&mut self) -> io::Result<bool> {
        use crate::tls::hello::{alert_record, sniff, Sniff};
        let Some(sn) = self.sniffer.as_mut() else {
            return Ok(false);
        };
        loop {
            let mut chunk = [0u8; 4096];
            match self.sock.read(&mut chunk) {
                Ok(0) => {
                    self.sniffer = None;
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed during the TLS handshake",
                    ));
                }
                Ok(k) => {
                    sn.buf.extend_from_slice(&chunk[..k]);
                    if k < chunk.len() {
                        self.drained = true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.drained = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let verdict = sniff(&sn.buf);
            if verdict == Sniff::Need && sn.buf.len() <= SNIFF_MAX {
                if self.drained {
                    return Ok(true);
                }
                continue;
            }
            let Some(sn) = self.sniffer.take() else {
                return Ok(false);
            };
            if let Sniff::Hello(info) = verdict {
                self.hello_sni = Some(info.sni.clone());
                self.auth = sn.gate.client_auth(&info);
                self.own_cert = sn.gate.own_cert(&info);
                match sn.gate.check(&info) {
                    Err((alert, why)) => {
                        // Nothing was sent yet: the alert is the first record.
                        let _ = self.sock.write(&alert_record(info.record_version, alert));
                        let msg = self.during_handshake(why);
                        self.failed = Some(msg.clone());
                        return Err(tls_error(&msg));
                    }
                    Ok(Some(config)) => {
                        let c = ServerConnection::new(config)
                            .map_err(|e| io::Error::other(e.to_string()))?;
                        self.conn = c.into();
                    }
                    Ok(None) => {}
                }
            }
            self.feed(&sn.buf)?;
            return Ok(false);
        }
    }

    fn facts(&self) -> crate::clientcert::TlsFacts<'_> {
        crate::clientcert::TlsFacts {
            version: self.conn.protocol_version(),
            suite: self.conn.negotiated_cipher_suite().map(|s| s.suite()),
            resumed: self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            alpn: self.conn.alpn_protocol(),
            sni: match &self.conn {
                Connection::Server(s) => s.server_name(),
                Connection::Client(_) => None,
            },
        }
    }

    /// rustls' `process_new_packets`, then the note of a client chain it
    /// verified (the verifier leaves it in a thread-local slot).
    fn process(&mut self) -> Result<rustls::IoState, rustls::Error> {
        let r = self.conn.process_new_packets();
        if let Some(n) = crate::tls::clientauth::take_note() {
            self.client_note = Some(n);
        }
        if let Some(k) = crate::tls::take_chosen() {
            self.own_cert = Some(k);
        }
        if !self.conn.is_handshaking() {
            if let Some(auth) = self.auth.take() {
                self.resumed_verify(&auth);
            }
        }
        r
    }

    /// A resumed session keeps the client's chain but was not verified in
    /// this handshake: its `ssl_c_verify` is the chain verified again
    /// (HAProxy keeps the first handshake's result in the session; the two
    /// differ only for a certificate whose dates ended in between).
    fn resumed_verify(&mut self, auth: &crate::tls::clientauth::ClientAuth) {
        if self.client_note.is_some() {
            return;
        }
        if let Connection::Server(s) = &self.conn {
            if let Some((ee, rest)) = s.peer_certificates().and_then(|c| c.split_first()) {
                let (n, _) = auth.check(ee, rest, rustls::pki_types::UnixTime::now());
                self.session_verify = n.verify;
            }
        }
    }

    fn check_failed(&self) -> io::Result<()> {
        match &self.failed {
            Some(m) => Err(tls_error(m)),
            None => Ok(()),
        }
    }

    /// Hands bytes already read from the socket to rustls.
    fn feed(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.conn.read_tls(&mut bytes) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    let msg = self.during_handshake(e.to_string());
                    self.failed = Some(msg.clone());
                    return Err(tls_error(&msg));
                }
            }
            if let Err(e) = self.process() {
                return Err(self.fail(e));
            }
        }
        if self.conn.wants_write() {
            self.flush_tls()?;
        }
        Ok(())
    }

    /// Writes buffered records to the socket. `Ok(true)`: nothing remains.
    fn flush_tls(&mut self) -> io::Result<bool> {
        while !self.prefix.is_empty() {
            match (&self.sock).write(&self.prefix) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => drop(self.prefix.drain(..n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
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
        // The verifier's note, taken only for its own error (one left by
        // a check's handshake on this thread is not this connection's).
        self.sni_mismatch = matches!(
            e,
            rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. }
            )
        ) && crate::tls::take_sni_mismatch();
        let msg = self.during_handshake(e.to_string());
        let _ = self.flush_tls();
        self.failed = Some(msg.clone());
        tls_error(&msg)
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.read_inner(buf) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                ) && self.hello_sni.is_some()
                    && self.conn.is_handshaking() =>
            {
                // A client that read the server's answer and dropped the
                // connection (often after disliking the certificate): a
                // failed handshake to log, not a mere reset.
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    self.during_handshake(format!(
                        "connection reset by the client during the TLS handshake ({e})"
                    )),
                ))
            }
            r => r,
        }
    }

    fn read_inner(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.check_failed()?;
        if buf.is_empty() {
            return Ok(0);
        }
        if self.eof_pending {
            self.eof_pending = false;
            return Ok(0);
        }
        self.drained = false;
        if self.sniffer.is_some() && self.sniff()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut n = 0;
        loop {
            // 1. Hand over what rustls has decrypted.
            match self.conn.reader().read(&mut buf[n..]) {
                Ok(0) => {
                    // close_notify received, all data read.
                    self.eof_pending = n > 0;
                    return Ok(n);
                }
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
                        self.eof_pending = n > 0;
                        return Ok(n);
                    }
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        self.during_handshake("connection closed during the TLS handshake".into()),
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
                        let msg = self.during_handshake(e.to_string());
                        self.failed = Some(msg.clone());
                        return Err(tls_error(&msg));
                    }
                    return Err(e);
                }
            }
            // 3. Process every complete record read (rustls' rule: after
            // each successful read_tls).
            if let Err(e) = self.process() {
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

    /// See [`Transport::handshake`].
    fn handshake(&mut self) -> io::Result<bool> {
        self.check_failed()?;
        loop {
            if self.conn.wants_write() {
                // A full socket: the server's flight may still come.
                let _ = self.flush_tls()?;
            }
            if !self.conn.is_handshaking() {
                return Ok(true);
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) => {
                    let msg = "connection closed during the TLS handshake".to_string();
                    self.failed = Some(msg.clone());
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, msg));
                }
                Ok(_) => {
                    if let Err(e) = self.process() {
                        return Err(self.fail(e));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let msg = format!("TLS handshake: {e}");
                    self.failed = Some(msg.clone());
                    return Err(io::Error::new(e.kind(), msg));
                }
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

/// Reads up to one record's worth (at most `count` bytes) of `file` at
/// `*off` and writes it with `write`; advances `*off` by what `write`
/// took. `Ok(0)`: the file ended before `*off`.
fn copy_file_chunk(
    file: &File,
    off: &mut u64,
    count: usize,
    write: impl FnOnce(&[IoSlice<'_>]) -> io::Result<usize>,
) -> io::Result<usize> {
    if count == 0 {
        return Ok(0);
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
    let n = write(&[IoSlice::new(&chunk[..got])])?;
    *off += n as u64;
    Ok(n)
}

impl Transport {
    /// A cleartext connection, or the server side of TLS when `tls` is
    /// given (see [`Transport::accept_tls`]).
    pub fn accept(sock: TcpStream, tls: Option<Arc<ServerConfig>>) -> io::Result<Transport> {
        match tls {
            Some(cfg) => Transport::accept_tls(sock, cfg),
            None => Ok(Transport::plain(sock)),
        }
    }

    /// A cleartext connection.
    pub fn plain(sock: TcpStream) -> Transport {
        Transport::Plain(sock)
    }

    /// The server side of TLS on an accepted (non-blocking) socket. Nothing
    /// is read or written yet: the first [`Transport::read`] runs the
    /// handshake as far as the client's bytes allow.
    ///
    /// A configuration built by [`crate::tls::TlsAcceptor`] comes with its
    /// bind line's hello gate (see [`Transport::accept_tls_gated`]).
    pub fn accept_tls(sock: TcpStream, config: Arc<ServerConfig>) -> io::Result<Transport> {
        if let Some(gate) = crate::tls::gate_for(&config) {
            return Transport::accept_tls_gated(sock, config, gate);
        }
        let slot = SslSlot::take()?;
        let conn = ServerConnection::new(config).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Transport::Tls(Box::new(TlsStream::new(
            sock,
            conn.into(),
            slot,
        ))))
    }

    /// As [`Transport::accept_tls`], with `gate` looking at the ClientHello
    /// first: a refusal sends the gate's alert, and every failed
    /// handshake's error names the SNI the client asked for.
    pub fn accept_tls_gated(
        sock: TcpStream,
        config: Arc<ServerConfig>,
        gate: Arc<dyn HelloGate>,
    ) -> io::Result<Transport> {
        let slot = SslSlot::take()?;
        let conn = ServerConnection::new(config).map_err(|e| io::Error::other(e.to_string()))?;
        let mut t = TlsStream::new(sock, conn.into(), slot);
        t.sniffer = Some(Box::new(Sniffer {
            gate,
            buf: Vec::new(),
        }));
        Ok(Transport::Tls(Box::new(t)))
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
        let slot = SslSlot::take()?;
        let conn =
            ClientConnection::new(config, name).map_err(|e| io::Error::other(e.to_string()))?;
        Ok(Transport::Tls(Box::new(TlsStream::new(
            sock,
            conn.into(),
            slot,
        ))))
    }

    /// Reads plaintext (see the module doc for what a short count means).
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            // (`TcpStream::read` without the C library's wrapper.)
            Transport::Plain(s) => crate::sys::recv(s.as_raw_fd(), buf),
            Transport::Tls(t) => t.read(buf),
            Transport::Lane(l) => l.read(buf),
        }
    }

    /// Whether the next [`Transport::read`] has something to return (the
    /// end of the stream) although the last one came back short: no edge
    /// will say so, the caller must read again.
    pub fn read_pending(&self) -> bool {
        match self {
            Transport::Plain(_) | Transport::Lane(_) => false,
            Transport::Tls(t) => t.eof_pending,
        }
    }

    /// Writes plaintext; a short count or `WouldBlock` means the socket is
    /// full.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            // (`TcpStream::write` without the C library's wrapper.)
            Transport::Plain(s) => crate::sys::send(s.as_raw_fd(), buf),
            Transport::Tls(t) => t.write_vectored(&[IoSlice::new(buf)]),
            Transport::Lane(l) => l.write_vectored(&[IoSlice::new(buf)]),
        }
    }

    /// As [`Transport::write`], gathering several slices (for TLS, into the
    /// same records: a small head and its body make one record, not two).
    pub fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write_vectored(bufs),
            Transport::Tls(t) => t.write_vectored(bufs),
            Transport::Lane(l) => l.write_vectored(bufs),
        }
    }

    /// Whether the connection is plain TCP on its own socket (no TLS, no
    /// HTTP/2 lane).
    pub fn is_plain(&self) -> bool {
        matches!(self, Transport::Plain(_))
    }

    /// As [`Transport::write_vectored`], for the last bytes a plain TCP
    /// connection sends before it closes: they go with `MSG_MORE`, so
    /// the kernel holds them for the FIN that [`Transport::end_output`]
    /// sends right after; one segment then carries the answer and the
    /// FIN, and the client acknowledges both at once (two segments fewer
    /// per connection on the wire than a send followed by a close).
    /// Held bytes always leave: at the FIN, at `close`, or when an ACK of
    /// earlier bytes comes back (`MSG_MORE` holds only the call's own
    /// tail). Other transports write as usual.
    pub fn write_last(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let Transport::Plain(s) = self else {
            return self.write_vectored(bufs);
        };
        let s = socket2::SockRef::from(&*s);
        let flags = libc::MSG_NOSIGNAL | libc::MSG_MORE;
        match bufs {
            [one] => s.send_with_flags(one, flags),
            [one, rest @ ..] if rest.iter().all(|b| b.is_empty()) => s.send_with_flags(one, flags),
            _ => s.send_vectored_with_flags(bufs, flags),
        }
    }

    /// Ends the output of a plain TCP connection whose last bytes left
    /// through [`Transport::write_last`]: the FIN goes out with them. The
    /// descriptor's `close` follows as before (a reset over unread
    /// input); the answer is on the wire by then. Other transports: no-op.
    pub fn end_output(&mut self) {
        if let Transport::Plain(s) = self {
            let _ = s.shutdown(Shutdown::Write);
        }
    }

    /// Shuts the socket's sending side down (the FIN after what left),
    /// keeping its receiving side open: a lingering close (the HTTP/1
    /// client side's) reads on until the peer's own end. For TLS, call
    /// [`Transport::close_notify`] and flush it first. A lane: no-op.
    pub fn shut_write(&mut self) {
        if !self.is_lane() {
            let _ = self.tcp().shutdown(Shutdown::Write);
        }
    }

    /// Sends buffered TLS records. `Ok(true)` when nothing remains (always,
    /// for plain TCP); `Ok(false)` when the socket is full.
    pub fn flush_pending(&mut self) -> io::Result<bool> {
        match self {
            Transport::Plain(_) | Transport::Lane(_) => Ok(true),
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
            Transport::Plain(_) | Transport::Lane(_) => false,
            Transport::Tls(t) => t.conn.wants_write(),
        }
    }

    /// Drives the client side of a TLS handshake toward a server, as far
    /// as the socket allows, before any plaintext is written: the step of
    /// a server connection's establishment that follows the TCP connect
    /// (HAProxy counts it in the connect: `timeout connect`, retries).
    /// `Ok(true)` once the handshake is complete (at once for plain TCP);
    /// `Ok(false)` while it waits for the socket (an edge, either way:
    /// the server's next flight, or room for ours). Any failure (the
    /// server's alert, a certificate that does not verify, bytes that
    /// are not TLS, a close or reset) is an error, the same at every
    /// later call. Records read past the handshake stay with rustls for
    /// the next [`Transport::read`], which the caller must try (the
    /// socket may not be drained).
    pub fn handshake(&mut self) -> io::Result<bool> {
        match self {
            Transport::Plain(_) | Transport::Lane(_) => Ok(true),
            Transport::Tls(t) => t.handshake(),
        }
    }

    /// Has `bytes` go to the socket in clear before the first TLS record
    /// (the ClientHello) of a connection to a server: its PROXY header,
    /// which HAProxy sends before the handshake. Plain TCP: nothing (the
    /// caller writes them as data).
    pub fn send_first(&mut self, bytes: &[u8]) {
        if let Transport::Tls(t) = self {
            t.prefix.extend_from_slice(bytes);
        }
    }

    /// Whether a TLS handshake toward a server failed on a certificate
    /// that does not name the SNI sent (HAProxy 2.6 then gives up the
    /// connect without retrying).
    pub fn sni_mismatch(&self) -> bool {
        matches!(self, Transport::Tls(t) if t.sni_mismatch)
    }

    /// Whether the TLS handshake is still running (false for plain TCP).
    /// Turns false when the peer's Finished message has been processed by a
    /// [`Transport::read`]: that is when a connection's tasklet stops being
    /// heavy.
    pub fn is_handshaking(&self) -> bool {
        match self {
            Transport::Plain(_) | Transport::Lane(_) => false,
            Transport::Tls(t) => t.conn.is_handshaking(),
        }
    }

    /// Whether this is a TLS stream.
    pub fn is_tls(&self) -> bool {
        match self {
            Transport::Lane(l) => l.tls,
            t => matches!(t, Transport::Tls(_)),
        }
    }

    /// Whether this is a lane of an HTTP/2 connection.
    pub fn is_lane(&self) -> bool {
        matches!(self, Transport::Lane(_))
    }

    /// The pipe of a lane.
    pub fn lane_pipe(&self) -> Option<&std::rc::Rc<std::cell::RefCell<LanePipe>>> {
        match self {
            Transport::Lane(l) => Some(&l.pipe),
            _ => None,
        }
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
                copy_file_chunk(file, off, count, |b| t.write_vectored(b))
            }
            Transport::Lane(l) => {
                let room = {
                    let p = l.pipe.borrow();
                    p.out_max.saturating_sub(p.output.len())
                };
                if room == 0 && count > 0 {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                copy_file_chunk(file, off, count.min(room), |b| l.write_vectored(b))
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
            Transport::Lane(l) => &l.sock,
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
        if let Transport::Lane(l) = self {
            // The lane ends; the HTTP/2 connection's socket stays open.
            let mut p = l.pipe.borrow_mut();
            p.closed = true;
            p.dirty = true;
            return Ok(());
        }
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
            Transport::Lane(l) => l.alpn.as_deref(),
        }
    }

    /// For a log line about a handshake that did not finish: ` (SNI
    /// "name")` or ` (no SNI)` once the ClientHello was read, else nothing.
    pub fn hello_note(&self) -> String {
        match self {
            Transport::Tls(t) => match &t.hello_sni {
                Some(Some(n)) => format!(" (SNI \"{n}\")"),
                Some(None) => " (no SNI)".to_string(),
                None => String::new(),
            },
            Transport::Plain(_) | Transport::Lane(_) => String::new(),
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
            Transport::Lane(l) => l.sni.as_deref(),
            Transport::Plain(_) => None,
        }
    }

    /// The server side of TLS: the certificate the client presented and
    /// its verification (`None` for plain TCP and the client side).
    pub fn client_cert(&self) -> Option<crate::tls::clientauth::ClientCertView<'_>> {
        match self {
            Transport::Tls(t) => match &t.conn {
                Connection::Server(s) => Some(crate::tls::clientauth::ClientCertView {
                    chain: s.peer_certificates().unwrap_or(&[]),
                    note: t.client_note,
                    verify: t.client_note.map_or(t.session_verify, |n| n.verify),
                    own: t.own_cert.as_ref().map_or(&[], |k| &k.cert),
                    facts: t.facts(),
                }),
                Connection::Client(_) => None,
            },
            Transport::Lane(l) => l.client.as_ref().map(|c| c.view()),
            Transport::Plain(_) => None,
        }
    }

    /// What the handshake settled (`None` for plain TCP).
    pub fn tls_facts(&self) -> Option<crate::clientcert::TlsFacts<'_>> {
        match self {
            Transport::Tls(t) => Some(t.facts()),
            Transport::Plain(_) | Transport::Lane(_) => None,
        }
    }

    /// The client side of TLS: the certificates the server presented
    /// (`ssl_s_*`; `None` for plain TCP and the server side).
    pub fn server_chain(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        match self {
            Transport::Tls(t) => match &t.conn {
                Connection::Client(c) => c.peer_certificates(),
                Connection::Server(_) => None,
            },
            Transport::Plain(_) | Transport::Lane(_) => None,
        }
    }

    /// What the `ssl_s_*` and `ssl_bc*` fetches read of a server
    /// connection, once its handshake ended: `None` for plain TCP, or
    /// when no fetch of the configuration reads it
    /// ([`crate::sample::SRV_TLS`]).
    pub fn server_tls(&self) -> Option<Arc<crate::clientcert::ServerTls>> {
        if !crate::sample::SRV_TLS.load(Ordering::Relaxed) {
            return None;
        }
        Some(Arc::new(crate::clientcert::ServerTls {
            chain: self.server_chain().map(<[_]>::to_vec).unwrap_or_default(),
            facts: self.tls_facts()?.to_owned(),
        }))
    }

    /// The negotiated protocol version and how the handshake went (full or
    /// resumed), for logs and tests. `None` before the handshake ends.
    pub fn tls_info(&self) -> Option<(rustls::ProtocolVersion, rustls::HandshakeKind)> {
        match self {
            Transport::Plain(_) | Transport::Lane(_) => None,
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
            Transport::Lane(l) => f.debug_tuple("Lane").field(&l.sock).finish(),
        }
    }
}

/// What [`Transport::send_early`] did.
pub(crate) enum Early {
    /// This many bytes left: the connect is confirmed.
    Sent(usize),
    /// The connect is still under way (`EAGAIN`): its edge settles it.
    Blocked,
    /// The write failed: the connect's outcome, for the caller to read.
    Failed(io::Error),
}

impl Transport {
    /// Writes `buf` on a plain server socket whose connect was just
    /// started, when the kernel may have completed it within `connect` (a
    /// loopback server: the handshake runs in the calling thread's
    /// softirq): bytes that leave confirm the connect, so its writable
    /// edge need not be waited for. `last`: the bytes are the last ones
    /// (see [`Transport::write_last`]). The HTTP/1 server side's and a
    /// tcp session's early sends.
    pub(crate) fn send_early(&mut self, buf: &[u8], last: bool) -> Early {
        let r = if last {
            self.write_last(&[IoSlice::new(buf)])
        } else {
            self.write(buf)
        };
        match r {
            Ok(n) => Early::Sent(n),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Early::Blocked
            }
            Err(e) => Early::Failed(e),
        }
    }
}

/// `silent-drop` on a socket about to be closed, as HAProxy 2.6 does it:
/// what the client sent is read and acknowledged at once (a quick ACK, so
/// that it does not retransmit into a reset), lingering is off, and the
/// socket goes into repair mode (`TCP_REPAIR`, allowed with
/// `CAP_NET_ADMIN`), in which its close sends nothing at all: the client
/// is left waiting. Without that privilege, HAProxy's fallback: a
/// time-to-live (hop limit) of 1, so the reset the close sends does not
/// pass the first router (a client on the same host or network still
/// sees it). The caller must neither write to the socket nor shut it
/// down after this (a FIN would leave even in repair mode).
pub(crate) fn silent_drop(sock: &TcpStream) {
    use std::io::Read;
    let mut scratch = [0u8; 4096];
    let mut r = sock;
    for _ in 0..64 {
        match r.read(&mut scratch) {
            Ok(n) if n > 0 => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => break,
        }
    }
    let s = socket2::SockRef::from(sock);
    let _ = s.set_tcp_quickack(true);
    let _ = s.set_linger(Some(std::time::Duration::ZERO));
    if crate::sys::set_tcp_repair(std::os::fd::AsRawFd::as_raw_fd(sock)).is_ok() {
        return;
    }
    let _ = match sock.peer_addr() {
        Ok(std::net::SocketAddr::V6(_)) => s.set_unicast_hops_v6(1),
        _ => s.set_ttl_v4(1),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BindSsl, Loc, Verify};
    use crate::tls::testserver::{echo, exchange, serve, DEADLINE};
    use crate::tls::testutil::{temp_dir, test_cert};
    use crate::tls::{client_config, TlsAcceptor};
    use std::io::ErrorKind;
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    fn acceptor(tag: &str) -> (Arc<TlsAcceptor>, Arc<ClientConfig>) {
        let dir = temp_dir(tag);
        let (crt, _, pem) = test_cert(&dir, &["localhost"]);
        let ssl = BindSsl {
            crts: vec![pem],
            key: None,
            alpn: Vec::new(),
            min_ver: None,
            strict_sni: false,
            no_tls_tickets: false,
            cache_size: None,
            ..Default::default()
        };
        let loc = Loc {
            file: "t.cfg".into(),
            line: 1,
        };
        let acc = TlsAcceptor::new(&ssl, &loc).expect("acceptor");
        let cc = client_config(Verify::Required, Some(&crt)).expect("client config");
        (Arc::new(acc), cc)
    }

    fn connect(addr: std::net::SocketAddr, cc: &Arc<ClientConfig>) -> Transport {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nonblocking(true).expect("nonblocking");
        Transport::connect_tls(s, Arc::clone(cc), "localhost").expect("connect_tls")
    }

    fn blob(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn plain_transport_echo() {
        let (addr, h) = serve(1, |s| Ok(Transport::plain(s)));
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nonblocking(true).expect("nonblocking");
        let mut t = Transport::plain(s);
        assert!(!t.is_tls() && !t.is_handshaking() && t.supports_sendfile());
        assert!(!t.has_pending_output() && t.alpn().is_none() && t.sni().is_none());
        let data = blob(300_000);
        assert_eq!(exchange(&mut t, &data).expect("exchange"), data);
        let o = h.join().expect("server").remove(0);
        assert!(o.error.is_none(), "{:?}", o.error);
        assert_eq!(o.received.len(), data.len());
    }

    /// A megabyte each way through TLS, both ends non-blocking: exercises
    /// rustls' buffer limits, partial writes and `WouldBlock` on both sides.
    #[test]
    fn tls_bulk_echo_non_blocking() {
        let (acc, cc) = acceptor("bulk");
        let (addr, h) = serve(1, move |s| Transport::accept_tls(s, acc.config()));
        let mut t = connect(addr, &cc);
        let data = blob(1 << 20);
        assert_eq!(exchange(&mut t, &data).expect("exchange"), data);
        let o = h.join().expect("server").remove(0);
        assert!(o.error.is_none(), "{:?}", o.error);
        assert_eq!(o.received, data);
    }

    /// The edge-triggered contract. The server sends bursts of records, one
    /// at a time, each fully written to the socket before the client is
    /// told; the client then makes one pass of "read until short", as the
    /// connection does on one edge, and must have the whole burst: a short
    /// count that left bytes in the socket or decrypted plaintext inside
    /// rustls would leave the pass short of the burst, and the connection
    /// would wait for an edge that never comes.
    #[test]
    fn one_pass_per_edge_drains_everything() {
        use std::sync::mpsc;
        const BURSTS: usize = 12;
        const BURST: usize = 40_000;
        for bufsize in [1usize, 100, 4096, 16 * 1024, 64 * 1024] {
            let (acc, cc) = acceptor("edge");
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = l.local_addr().expect("addr");
            let (go_tx, go_rx) = mpsc::channel::<()>();
            let (sent_tx, sent_rx) = mpsc::channel::<()>();
            let h = std::thread::spawn(move || {
                let (s, _) = l.accept().expect("accept");
                s.set_nonblocking(true).expect("nonblocking");
                // Without it, Nagle holds a burst (smaller than loopback's
                // 64 KiB MSS) until the previous one is acknowledged.
                s.set_nodelay(true).expect("nodelay");
                let mut t = Transport::accept_tls(s, acc.config()).expect("accept tls");
                let start = Instant::now();
                let mut buf = [0u8; 64];
                while t.is_handshaking() || t.has_pending_output() {
                    assert!(start.elapsed() < DEADLINE, "server handshake stuck");
                    match t.read(&mut buf) {
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(e) => panic!("server read: {e}"),
                    }
                    let _ = t.flush_pending();
                    std::thread::sleep(Duration::from_micros(200));
                }
                for i in 0..BURSTS {
                    if go_rx.recv().is_err() {
                        return;
                    }
                    let data = blob(BURST * (i + 1));
                    let data = &data[BURST * i..];
                    let mut sent = 0;
                    while sent < data.len() || t.has_pending_output() {
                        assert!(start.elapsed() < DEADLINE, "server send stuck");
                        if sent < data.len() {
                            match t.write(&data[sent..]) {
                                Ok(n) => sent += n,
                                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                                Err(e) => panic!("server write: {e}"),
                            }
                        }
                        let _ = t.flush_pending();
                    }
                    let _ = sent_tx.send(());
                }
                let _ = go_rx.recv();
            });
            let mut t = connect(addr, &cc);
            let start = Instant::now();
            // Handshake (the client sees it end on its own reads).
            while t.is_handshaking() {
                assert!(start.elapsed() < DEADLINE, "client handshake stuck");
                t.flush_pending().expect("flush");
                match t.read(&mut [0u8; 1]) {
                    Ok(_) => panic!("no data expected yet"),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("client read: {e}"),
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            t.flush_pending().expect("flush");
            let mut got = Vec::new();
            let mut buf = vec![0u8; bufsize];
            for i in 0..BURSTS {
                go_tx.send(()).expect("go");
                sent_rx.recv().expect("sent");
                // Loopback delivery may lag the sender's write a little
                // when softirqs are deferred (a busy machine): wait until
                // the kernel holds at least the burst's size in ciphertext.
                let mut peek = vec![0u8; 2 * BURST];
                while t.tcp().peek(&mut peek).unwrap_or(0) < BURST {
                    assert!(start.elapsed() < DEADLINE, "burst {i} never arrived");
                    std::thread::sleep(Duration::from_micros(200));
                }
                std::thread::sleep(Duration::from_millis(2));
                // One edge: read until short or WouldBlock.
                loop {
                    match t.read(&mut buf) {
                        Ok(0) => panic!("early EOF"),
                        Ok(n) => {
                            got.extend_from_slice(&buf[..n]);
                            if n < buf.len() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => panic!("client read: {e}"),
                    }
                }
                assert_eq!(
                    got.len(),
                    BURST * (i + 1),
                    "burst {i}, buffer {bufsize}: one pass left data behind"
                );
            }
            assert!(got == blob(BURST * BURSTS), "buffer {bufsize}");
            let _ = go_tx.send(());
            let _ = t.shutdown();
            h.join().expect("server");
        }
    }

    /// `send_file` sends the same bytes over plain TCP (sendfile) and TLS
    /// (pread + records), resuming from the offset after partial sends.
    #[test]
    fn send_file_plain_and_tls() {
        let dir = temp_dir("sendfile");
        let path = dir.join("body.bin");
        let data = blob(700_000);
        std::fs::write(&path, &data).expect("write");
        let (acc, cc) = acceptor("sendfile-tls");
        for tls in [false, true] {
            let acc2 = Arc::clone(&acc);
            let (addr, h) = serve(1, move |s| {
                if tls {
                    Transport::accept_tls(s, acc2.config())
                } else {
                    Ok(Transport::plain(s))
                }
            });
            let mut t = if tls {
                connect(addr, &cc)
            } else {
                let s = TcpStream::connect(addr).expect("connect");
                s.set_nonblocking(true).expect("nonblocking");
                Transport::plain(s)
            };
            let file = File::open(&path).expect("open");
            let mut off = 0u64;
            let end = data.len() as u64;
            let mut back = Vec::new();
            let mut buf = vec![0u8; 32 * 1024];
            let start = Instant::now();
            while back.len() < data.len() {
                assert!(start.elapsed() < DEADLINE, "stuck (tls {tls})");
                if off < end {
                    let count = (end - off).min(1 << 20) as usize;
                    match t.send_file(&file, &mut off, count) {
                        Ok(0) => panic!("file shrank?"),
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(e) => panic!("send_file: {e}"),
                    }
                }
                t.flush_pending().expect("flush");
                match t.read(&mut buf) {
                    Ok(0) => panic!("EOF"),
                    Ok(n) => back.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_micros(200))
                    }
                    Err(e) => panic!("read: {e}"),
                }
            }
            assert!(back == data, "tls {tls}");
            // Past the end of the file: Ok(0), as sendfile says.
            let mut past = end;
            assert_eq!(t.send_file(&file, &mut past, 10).expect("past end"), 0);
            let _ = t.shutdown();
            let o = h.join().expect("server").remove(0);
            assert!(o.error.is_none(), "{:?}", o.error);
        }
    }

    /// Vectored writes gather slices into the same records, and a write
    /// before the handshake ends is buffered and delivered after it.
    #[test]
    fn vectored_and_early_writes() {
        let (acc, cc) = acceptor("vectored");
        let (addr, h) = serve(1, move |s| Transport::accept_tls(s, acc.config()));
        let mut t = connect(addr, &cc);
        // Written while the handshake has not even started: buffered.
        let n = t.write(b"early ").expect("early write");
        assert_eq!(n, 6);
        let head = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        let body = blob(50_000);
        let bufs = [IoSlice::new(&head), IoSlice::new(&body)];
        let start = Instant::now();
        let want: Vec<u8> = [&b"early "[..], &head, &body].concat();
        let mut done = 0;
        let mut back = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        while back.len() < want.len() {
            assert!(start.elapsed() < DEADLINE, "stuck");
            if done < head.len() + body.len() {
                let rest = remaining_slices(&bufs, done);
                match t.write_vectored(&rest) {
                    Ok(n) => done += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("write_vectored: {e}"),
                }
            }
            t.flush_pending().expect("flush");
            match t.read(&mut buf) {
                Ok(0) => panic!("EOF"),
                Ok(n) => back.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_micros(200))
                }
                Err(e) => panic!("read: {e}"),
            }
        }
        assert!(back == want);
        let _ = t.shutdown();
        h.join().expect("server");
    }

    /// After a protocol error every call keeps failing the same way, and
    /// nothing panics.
    #[test]
    fn error_is_sticky() {
        let (acc, _) = acceptor("sticky");
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let mut c = TcpStream::connect(addr).expect("connect");
        let (s, _) = l.accept().expect("accept");
        s.set_nonblocking(true).expect("nonblocking");
        let mut t = Transport::accept_tls(s, acc.config()).expect("tls");
        c.write_all(b"GET / HTTP/1.0\r\n\r\n").expect("send");
        let start = Instant::now();
        let e = loop {
            assert!(start.elapsed() < DEADLINE);
            match t.read(&mut [0u8; 100]) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => break e,
                Ok(n) => panic!("read {n} bytes of plaintext HTTP as TLS"),
            }
        };
        assert_eq!(e.kind(), ErrorKind::InvalidData);
        let again = t.read(&mut [0u8; 100]).expect_err("sticky");
        assert_eq!(again.to_string(), e.to_string());
        assert_eq!(
            t.write(b"x").expect_err("write").kind(),
            ErrorKind::InvalidData
        );
        let _ = t.flush_pending();
        assert!(t.shutdown().is_ok());
        let _ = echo; // (the echo server is used by the other tests)
    }
}
