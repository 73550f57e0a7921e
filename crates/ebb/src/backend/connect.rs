//! Connects to servers: a non-blocking connect (TCP, an abstract UNIX
//! socket, through a SOCKS4 proxy) and the rule that tells its outcome
//! from the poller's events, shared by both proxy modes; and the test of
//! an idle connection before reuse.
//!
//! Nothing here knows about balancing or queues: a stream that holds a
//! slot of a server ([`super::queue`]) calls [`connect_server_nb`] and
//! settles the connect with [`connect_outcome`] at its socket's events.

use std::net::SocketAddr;

use super::{socks4, ServerRt};
use crate::config::UnixTarget;

/// Starts a non-blocking connect to `addr` (with `TCP_NODELAY`): the
/// socket is returned while the connect is under way; its outcome is the
/// first write edge (writable without an error: connected; otherwise
/// `SO_ERROR`, then a peer address, tell).
pub fn connect_nb(addr: SocketAddr) -> std::io::Result<std::net::TcpStream> {
    connect_nb_from(addr, None, false, false)
}

/// [`connect_nb`] from the local address `source` (a backend's `source`;
/// port 0: one the system picks). `delack`: `TCP_QUICKACK` off before the
/// connect (`option tcp-smart-connect` with bytes to send): the kernel
/// does not acknowledge the server's SYN-ACK on its own, the first bytes
/// written carry that ACK. `tfo`: TCP fast open (`server ... tfo`), the
/// first bytes written go in the SYN when the kernel has the server's
/// cookie.
pub fn connect_nb_from(
    addr: SocketAddr,
    source: Option<SocketAddr>,
    delack: bool,
    tfo: bool,
) -> std::io::Result<std::net::TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    // Non-blocking from the start: no `fcntl` pair per connection.
    let s = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )?;
    s.set_tcp_nodelay(true)?;
    if delack {
        s.set_tcp_quickack(false)?;
    }
    if tfo {
        use std::os::fd::AsRawFd;
        crate::sys::set_tcp_fastopen_connect(s.as_raw_fd())?;
    }
    if let Some(src) = source {
        // As HAProxy: a fixed source port may be reused at once.
        s.set_reuse_address(true)?;
        s.bind(&src.into())?;
    }
    match s.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(s.into())
}

/// Whether a connecting socket has a peer now (its connect completed),
/// whatever its family (a TCP or a UNIX socket).
pub fn connected(s: &std::net::TcpStream) -> bool {
    socket2::SockRef::from(s).peer_addr().is_ok()
}

/// The outcome of a connect under way at an event of its socket: Some(ok)
/// once known, None while it goes on; the one rule of both proxy modes
/// (`mode tcp` sessions, HTTP server sides).
///
/// `writable` and `hup` are what the poller said since the connect began,
/// of this socket alone (the caller drops what an earlier socket left
/// before connecting, and registers no other socket with the same
/// tasklet meanwhile). A connecting socket turns writable only once
/// established; a failed one is reported with `EPOLLERR`/`EPOLLHUP`. So a
/// writable edge without a hang-up settles it with no system call, as in
/// HAProxy; otherwise the socket is asked: an error pending means refused
/// or reset, no error and no peer yet means still under way. With
/// `socks4`, the proxy's handshake is part of the connect.
pub fn connect_outcome(
    s: &std::net::TcpStream,
    socks: &mut Option<Box<socks4::Socks4>>,
    writable: bool,
    hup: bool,
) -> Option<bool> {
    match connect_outcome_reset(s, socks, writable, hup) {
        Some(Ok(ok)) => Some(ok),
        Some(Err(Reset)) => Some(false),
        None => None,
    }
}

/// The TLS handshake of a server connection whose TCP connect (and
/// SOCKS4 handshake) is done, moved on as far as the socket allows: it
/// ends the connect, as in HAProxy (`timeout connect` covers it, its
/// failure is a failed connect). Some(ok) once known (at once for plain
/// TCP), None while it waits for an edge of the socket.
pub fn handshake_outcome(tr: &mut crate::transport::Transport) -> Option<bool> {
    match tr.handshake() {
        Ok(true) => Some(true),
        Ok(false) => None,
        Err(_) => Some(false),
    }
}

/// The server reset a connection it had accepted (see
/// [`connect_outcome_reset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reset;

/// [`connect_outcome`], telling a connection that was established and
/// then reset before its first event was seen (`Err(Reset)`: the
/// kernel's `ECONNRESET`, or `EPIPE` after the server's FIN) from a
/// failed connect (a refusal is `ECONNREFUSED`). A server that accepts
/// and resets at once is then an established connection ending on a
/// server error (`SD` in a tcp session, as HAProxy logs it when it saw
/// the connect first), not a failed connect to retry. The error is
/// taken from the socket here: its next read finds the end.
pub fn connect_outcome_reset(
    s: &std::net::TcpStream,
    socks: &mut Option<Box<socks4::Socks4>>,
    writable: bool,
    hup: bool,
) -> Option<Result<bool, Reset>> {
    if writable && !hup {
        return socks4::settle(socks, s).map(Ok);
    }
    match (s.take_error(), connected(s)) {
        (Ok(None), true) => socks4::settle(socks, s).map(Ok),
        (Ok(None), false) => None,
        (Ok(Some(e)), _)
            if socks.is_none()
                && matches!(e.raw_os_error(), Some(libc::ECONNRESET | libc::EPIPE)) =>
        {
            Some(Err(Reset))
        }
        _ => Some(Ok(false)),
    }
}

/// Starts a non-blocking connect to the Linux abstract UNIX socket
/// `abns@NAME` (the name padded with zeros to the length HAProxy binds
/// it with). The socket is carried as a stream like a TCP one.
pub fn connect_abns_nb(name: &str) -> std::io::Result<std::net::TcpStream> {
    let mut path = vec![0u8];
    path.extend_from_slice(name.as_bytes());
    path.resize(1 + crate::listener::ABNS_LEN, 0);
    connect_unix_nb(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&path))
}

/// Starts a non-blocking connect to the UNIX socket at `path` (a leading
/// zero byte: an abstract one), carried as a stream like a TCP one.
fn connect_unix_nb(path: &std::ffi::OsStr) -> std::io::Result<std::net::TcpStream> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let addr = SockAddr::unix(path)?;
    let s = Socket::new(Domain::UNIX, Type::STREAM.nonblocking(), None)?;
    match s.connect(&addr) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(s.into())
}

/// A connect under way, and the SOCKS4 handshake to complete once it
/// is (`socks4`).
pub type Connecting = (std::net::TcpStream, Option<Box<socks4::Socks4>>);

/// Starts a connect to server `s`: its abstract UNIX socket, or `addr`
/// (through its `socks4` proxy if it has one). `has_data`: bytes wait to
/// be sent once connected (HAProxy's condition, with a PROXY header, for
/// `option tcp-smart-connect`'s delayed ACK). `first`: the first attempt
/// of the exchange, not a retry: with `has_data`, HAProxy's condition for
/// the server's `tfo`.
pub fn connect_server_nb(
    s: &ServerRt,
    addr: impl FnOnce() -> Option<SocketAddr>,
    has_data: bool,
    first: bool,
) -> std::io::Result<Connecting> {
    match &s.opts.unix {
        Some(UnixTarget::Abns(name)) => Ok((connect_abns_nb(name)?, None)),
        Some(UnixTarget::Path(p)) => Ok((connect_unix_nb(p.as_os_str())?, None)),
        None => {
            let a =
                addr().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrNotAvailable))?;
            let src = s.opts.sock.source;
            let delack = s.opts.sock.smart_connect && (has_data || s.opts.send_proxy > 0);
            let tfo = s.opts.tfo && has_data && first;
            let (st, socks) = match s.opts.socks4 {
                Some(proxy) => (
                    connect_nb_from(proxy, src, delack, tfo)?,
                    Some(socks4::Socks4::new(a)),
                ),
                None => (connect_nb_from(a, src, delack, tfo)?, None),
            };
            let o = &s.opts.sock;
            if o.tcpka.on || o.nolinger {
                // The backend's `option srvtcpka` and `option nolinger`.
                let r = socket2::SockRef::from(&st);
                o.tcpka.apply(&r, false)?;
                if o.nolinger {
                    crate::net::set_nolinger(&r, true)?;
                }
            }
            Ok((st, socks))
        }
    }
}

/// Whether an idle connection is still open: nothing to read (a closed one
/// reads EOF, a confused one has bytes we never asked for).
pub(crate) fn alive(s: &mut crate::transport::Transport) -> bool {
    let mut b = [0u8; 1];
    if s.is_tls() {
        // TLS: records may come unasked (session tickets): read through
        // rustls; no plaintext and no close means alive.
        return matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    }
    matches!(s.tcp().peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}
