//! A check's connection: TCP, the PROXY header, TLS, HAProxy's wording
//! of connect errors, and the layer-4 probe of a plain `check`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Verdict;
use crate::config::{CheckConnect, CheckStatus};

/// A check's connection, clear or TLS (or HTTP/2 over either).
pub(in crate::backend) trait Wire: Read + Write {
    /// Bounds each read and write from now on (the check's steps after
    /// its connect).
    fn io_timeout(&self, _d: Duration) {}
    /// The protocol the server chose by ALPN (TLS only).
    fn alpn(&self) -> Option<&[u8]> {
        None
    }
    /// The answers come over HTTP/2 (`res.ver` says 2.0).
    fn h2(&self) -> bool {
        false
    }
    /// The connection's local address, when it has one.
    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }
}
impl Wire for TcpStream {
    fn io_timeout(&self, d: Duration) {
        let d = d.max(Duration::from_millis(1));
        let _ = self.set_read_timeout(Some(d));
        let _ = self.set_write_timeout(Some(d));
    }
    fn local_addr(&self) -> Option<SocketAddr> {
        TcpStream::local_addr(self).ok()
    }
}

/// How a check's sequence opens each connection (a socket; for the fuzz
/// target, a script of the server's answer).
pub(in crate::backend) type Connector<'a> =
    dyn FnMut(&crate::config::CheckConnect) -> Result<Box<dyn Wire>, super::Verdict> + 'a;
impl Wire for rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    fn io_timeout(&self, d: Duration) {
        self.sock.io_timeout(d);
    }
    fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }
    fn local_addr(&self) -> Option<SocketAddr> {
        self.sock.local_addr().ok()
    }
}

/// How a server's checks connect beyond their address, TLS and PROXY
/// header: the protocol of an HTTP check, the server's SOCKS4 proxy and
/// whether its default connect goes through it (`check-via-socks4`).
#[derive(Clone, Debug, Default)]
pub struct CheckHow {
    pub mux: CheckMux,
    /// `mux` was set by `check-proto` or the server's `proto`, not
    /// defaulted.
    pub mux_set: bool,
    /// `check-proto fcgi`, or the server speaks FastCGI (`proto fcgi`)
    /// and `check-proto` says nothing: an HTTP check's default connection
    /// goes through FastCGI ([`crate::backend::fcgicheck`]).
    pub fcgi: bool,
    /// The server has `check-alpn`: an HTTP check's connection whose
    /// protocol is not set takes the one ALPN chose (HAProxy installs its
    /// multiplexer after the handshake then).
    pub check_alpn: bool,
    /// The server's TLS settings, for `connect ssl` steps (HAProxy's
    /// server SSL context, prepared when a check rule asks for it).
    pub ssl_ctx: Option<Arc<rustls::ClientConfig>>,
    /// `check-sni` and `check-alpn`: what a `connect default ssl` step
    /// sends on a server whose checks have no TLS of their own (HAProxy's
    /// `tcpcheck_eval_connect` takes them for any `default` step).
    pub check_sni: Option<String>,
    pub check_alpn_list: Option<Vec<String>>,
    pub socks4: Option<SocketAddr>,
    pub via_socks4: bool,
    /// The server is not DOWN (HAProxy's `next_state != STOPPED`): an
    /// HTTP check with `disable-on-404` takes a 404 for a conditional
    /// pass.
    pub running: bool,
    /// With `timeout check`, HAProxy 2.6 bounds a check's connect (TCP
    /// and the TLS handshake) by `inter`, or `timeout connect` when
    /// sooner, and what follows by `timeout check` from the moment the
    /// connection is up. `None`: without `timeout check`, the whole check
    /// is bounded by its timeout (`inter`) from its start.
    pub connect_budget: Option<Duration>,
}

impl CheckHow {
    pub fn of(o: &crate::config::ServerOptions) -> CheckHow {
        CheckHow {
            mux: CheckMux::of(o),
            mux_set: matches!(
                o.check_proto,
                Some(crate::config::CheckProto::H1 | crate::config::CheckProto::H2)
            ) || o.proto_h2
                || o.proto_h1,
            check_alpn: o.check_alpn.is_some(),
            fcgi: match o.check_proto {
                Some(p) => p == crate::config::CheckProto::Fcgi,
                None => o.proto_fcgi,
            },
            ssl_ctx: None,
            check_sni: o.check_sni.clone(),
            check_alpn_list: o.check_alpn.clone(),
            socks4: o.socks4,
            via_socks4: o.check_via_socks4,
            running: false,
            connect_budget: None,
        }
    }

    /// The proxy a connect step goes through (HAProxy's rule): its own
    /// `via-socks4`, or `check-via-socks4` for the default connect.
    fn socks_for(&self, cc: &CheckConnect) -> Option<SocketAddr> {
        self.socks4
            .filter(|_| cc.via_socks4 || (cc.default && self.via_socks4))
    }

    /// The protocol of an HTTP check's connection (HAProxy's choice of
    /// multiplexer): the step's `proto`; a default connect's
    /// `check-proto` (or the server's `proto`); by ALPN when the step or
    /// the server's checks offer a list; else HTTP/1.
    pub fn mux_for(&self, cc: &CheckConnect) -> CheckMux {
        use crate::config::ConnectProto as P;
        match cc.proto {
            Some(P::H2) => CheckMux::H2,
            Some(P::H1 | P::None | P::Fcgi) => CheckMux::H1,
            None if cc.default && self.mux_set => self.mux,
            None if cc.alpn.is_some() || self.check_alpn => CheckMux::Alpn,
            None => CheckMux::H1,
        }
    }
}

/// The protocol of an HTTP check's default connection (HAProxy's check
/// multiplexer): `check-proto`, else the server's `proto`, else what
/// ALPN chose when the check offers its own list (`check-alpn`), else
/// HTTP/1. (HAProxy 2.6 installs its HTTP/1 multiplexer at once when the
/// check has no ALPN list of its own, even if the server's `alpn` makes
/// the handshake choose `h2`: such a check fails, `L7RSP`.)
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum CheckMux {
    /// HTTP/2 if the TLS handshake chose `h2`, else HTTP/1.
    Alpn,
    #[default]
    H1,
    H2,
}

impl CheckMux {
    /// A server's: `check-proto h1|h2`, else `proto h2|h1`, else by ALPN
    /// with `check-alpn`, else HTTP/1.
    pub fn of(o: &crate::config::ServerOptions) -> CheckMux {
        match o.check_proto {
            Some(crate::config::CheckProto::H1) => CheckMux::H1,
            Some(crate::config::CheckProto::H2) => CheckMux::H2,
            _ if o.proto_h2 => CheckMux::H2,
            _ if o.proto_h1 => CheckMux::H1,
            _ if o.check_alpn.is_some() => CheckMux::Alpn,
            _ => CheckMux::H1,
        }
    }
}

/// A connect error as HAProxy reports it: an error of the `connect()`
/// call itself (no route, no permission, no local address) is a
/// "General socket error (...)"; a refusal or a timeout reported later on
/// the socket is the system's text alone.
fn connect_error(e: &std::io::Error) -> Verdict {
    if timed_out(e) {
        return Verdict::new(CheckStatus::L4Tout, "");
    }
    let sync = matches!(
        e.raw_os_error(),
        Some(libc::ENETUNREACH | libc::EACCES | libc::EPERM | libc::EAFNOSUPPORT | libc::EINVAL)
    );
    if sync {
        Verdict::new(
            CheckStatus::L4Con,
            format!("General socket error ({})", os_text(e)),
        )
    } else if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
        Verdict::new(CheckStatus::L4Con, "Can't connect to server: no free ports")
    } else {
        Verdict::new(CheckStatus::L4Con, os_text(e))
    }
}

/// Connects for a check: TCP, a PROXY header first when `proxy_hdr`
/// holds one, then a TLS handshake when `tls` is set; everything within
/// `timeout` from `start`. `linger`: the connection is reset when
/// dropped, not closed (`tcp-check connect linger`).
pub(in crate::backend) fn open(
    addr: SocketAddr,
    start: Instant,
    timeout: Duration,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
    linger: bool,
    socks: Option<SocketAddr>,
) -> Result<Box<dyn Wire>, Verdict> {
    let to = socks.unwrap_or(addr);
    let mut s = TcpStream::connect_timeout(&to, timeout).map_err(|e| connect_error(&e))?;
    if linger {
        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    }
    // Every read and write below is bounded by what is left of `timeout`.
    let left = timeout
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(1));
    let _ = s.set_read_timeout(Some(left));
    let _ = s.set_write_timeout(Some(left));
    if socks.is_some() {
        // HAProxy's report: the request unsent, layer 4 is not up; once
        // sent it is, and a failure is a socket error (TLS: layer 6's).
        crate::backend::socks4::blocking(&mut s, addr).map_err(|f| match f {
            Some(crate::backend::socks4::Fail::Send) => Verdict::new(
                CheckStatus::L4Con,
                crate::backend::socks4::Fail::Send.text(),
            ),
            Some(f) if tls.is_some() => Verdict::new(CheckStatus::L6Rsp, f.text()),
            Some(f) => Verdict::new(CheckStatus::SockErr, f.text()),
            None if tls.is_some() => Verdict::new(CheckStatus::L6Tout, ""),
            None => Verdict::new(CheckStatus::L7Tout, ""),
        })?;
    }
    if !proxy_hdr.is_empty() {
        s.write_all(proxy_hdr).map_err(|e| {
            Verdict::new(CheckStatus::L4Con, format!("PROXY header: {}", os_text(&e)))
        })?;
    }
    let Some((cfg, sni)) = tls else {
        return Ok(Box::new(s));
    };
    let l6 = |e: String| Verdict::new(CheckStatus::L6Rsp, e);
    let name = rustls::pki_types::ServerName::try_from(sni.clone())
        .map_err(|e| l6(format!("invalid server name: {e}")))?;
    // (rustls sends no SNI for an address.)
    let sni_sent = matches!(name, rustls::pki_types::ServerName::DnsName(_));
    let conn = rustls::ClientConnection::new(Arc::clone(cfg), name)
        .map_err(|e| l6(format!("TLS setup: {e}")))?;
    let mut t = rustls::StreamOwned::new(conn, s);
    while t.conn.is_handshaking() {
        if start.elapsed() > timeout {
            // (HAProxy gives no text.)
            return Err(Verdict::new(CheckStatus::L6Tout, ""));
        }
        if let Err(e) = t.conn.complete_io(&mut t.sock) {
            return Err(if timed_out(&e) {
                Verdict::new(CheckStatus::L6Tout, "")
            } else {
                l6(handshake_failure(&e, sni_sent).to_string())
            });
        }
    }
    Ok(Box::new(t))
}

/// A failed handshake as HAProxy 2.6 reports it (its connection's error
/// text): a certificate that does not name the SNI sent (`check-sni`),
/// or without one `verifyhost`, is told apart; any other failure (the
/// server closed, answered bytes that are not TLS, sent an alert or a
/// certificate that does not verify) is "SSL handshake failure".
fn handshake_failure(e: &std::io::Error, sni_sent: bool) -> &'static str {
    use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
    let tls = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match tls {
        Some(rustls::Error::InvalidCertificate(
            NotValidForName | NotValidForNameContext { .. },
        )) => {
            if sni_sent {
                "Server presented an SSL certificate different from the expected one"
            } else {
                "Server presented an SSL certificate different from the configured one"
            }
        }
        _ => "SSL handshake failure",
    }
}

/// A `connect` step of a check: to the server's address unless the step
/// names its own address or port; the server's PROXY header and TLS with
/// `default`, a v1 PROXY header with `send-proxy`. The check's steps run
/// within `timeout` from `start`; with [`CheckHow::connect_budget`], the
/// connect within that budget from now, and `start` moves to the moment
/// the connection is up.
pub(in crate::backend) fn connect_step(
    cc: &CheckConnect,
    addr: SocketAddr,
    start: &std::cell::Cell<Instant>,
    timeout: Duration,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
    how: &CheckHow,
) -> Result<Box<dyn Wire>, Verdict> {
    let mut target = addr;
    if let Some(a) = cc.addr {
        target.set_ip(a);
    }
    if let Some(p) = cc.port {
        target.set_port(p);
    }
    let hdr: Vec<u8> = if cc.send_proxy {
        crate::proxyproto::header_for(1, None)
    } else if cc.default {
        proxy_hdr.to_vec()
    } else {
        Vec::new()
    };
    let tls = step_tls(cc, target, tls, how)?;
    let (t0, budget) = match how.connect_budget {
        Some(b) => (Instant::now(), b),
        None => (start.get(), timeout),
    };
    let w = open(
        target,
        t0,
        budget,
        tls.as_ref(),
        &hdr,
        cc.linger,
        how.socks_for(cc),
    )?;
    if how.connect_budget.is_some() {
        start.set(Instant::now());
        w.io_timeout(timeout);
    }
    Ok(w)
}

/// Whether a connect step speaks TLS: `ssl`, or `default` on a server
/// whose checks do (`tls_default`).
pub(in crate::backend) fn step_is_tls(cc: &CheckConnect, tls_default: bool) -> bool {
    cc.ssl || (cc.default && tls_default)
}

/// The TLS of a connect step (HAProxy's): with `default`, the server's
/// checks' (`check-sni`, `check-alpn`); with `ssl`, the server's TLS
/// settings, and with `default` too on a server whose checks have no TLS
/// (`connect default ssl`), `check-sni` and `check-alpn` over them; the
/// step's `sni` and `alpn` replace the name and the protocols offered.
/// Without a name, none is sent (rustls is given the address, which it
/// does not send).
fn step_tls(
    cc: &CheckConnect,
    target: SocketAddr,
    tls: Option<&CheckTls>,
    how: &CheckHow,
) -> Result<Option<CheckTls>, Verdict> {
    let base = match tls {
        Some((cfg, sni)) if cc.default => (Arc::clone(cfg), sni.clone()),
        _ if cc.ssl => match &how.ssl_ctx {
            Some(cfg) => (Arc::clone(cfg), target.ip().to_string()),
            None => {
                return Err(Verdict::new(
                    CheckStatus::SockErr,
                    "no TLS settings for the check's connection",
                ))
            }
        },
        _ => return Ok(None),
    };
    let (mut cfg, mut sni) = base;
    let mut alpn = cc.alpn.as_ref();
    if cc.default && tls.is_none() {
        if let Some(n) = &how.check_sni {
            sni = n.clone();
        }
        alpn = alpn.or(how.check_alpn_list.as_ref());
    }
    if let Some(n) = &cc.sni {
        sni = n.clone();
    }
    if let Some(list) = alpn {
        let mut c = (*cfg).clone();
        c.alpn_protocols = list.iter().map(|p| p.as_bytes().to_vec()).collect();
        cfg = Arc::new(c);
    }
    Ok(Some((cfg, sni)))
}

pub(in crate::backend) use crate::net::os_text;

pub(in crate::backend) fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// TLS for the checks of an `ssl` server: client configuration and name.
pub type CheckTls = (Arc<rustls::ClientConfig>, String);

/// The PROXY header a check sends first (`check-send-proxy`, or a server
/// with `send-proxy[-v2]` whose checks have neither `port` nor `addr`,
/// HAProxy's rule): v1 `UNKNOWN` or a v2 LOCAL command, since a check
/// relays no client. Empty: none.
pub fn check_proxy_header(o: &crate::config::ServerOptions) -> Vec<u8> {
    // A server added on the CLI inherits nothing (HAProxy 2.6).
    let same_target = o.check_port.is_none() && o.check_addr.is_none() && !o.dynamic;
    if !o.check_send_proxy && (o.send_proxy == 0 || !same_target) {
        return Vec::new();
    }
    crate::proxyproto::header_for(o.send_proxy.max(1), None)
}

/// A layer-4 check as HAProxy runs it: connect with delayed ACKs (its
/// checks' smart-connect: the handshake's last ACK waits for data that
/// never comes) and reset, so the server's application is not handed an
/// empty connection for each check.
pub(super) fn l4_probe(addr: SocketAddr, timeout: Duration) -> Result<(), Verdict> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(|e| connect_error(&e))?;
    let _ = sock.set_tcp_quickack(false);
    sock.connect_timeout(&addr.into(), timeout)
        .map_err(|e| connect_error(&e))?;
    let _ = sock.set_linger(Some(Duration::ZERO));
    Ok(())
}

/// A check connection that speaks another protocol under the HTTP/1.x a
/// check writes and reads (HTTP/2: `backend::h2check`; FastCGI:
/// `backend::fcgicheck`): the request is turned into it as it is written,
/// the answer read back as HTTP/1.1 bytes.
pub(in crate::backend) trait Translated {
    /// The answer as HTTP/1.1 so far, where reading is in it, and whether
    /// it is over (no more will come).
    fn answer(&mut self) -> (&[u8], &mut usize, bool);
    /// Sends what is due of the request.
    fn send(&mut self) -> std::io::Result<()>;
    /// The connection under it.
    fn inner(&mut self) -> &mut dyn Wire;
    /// Bytes the connection gave.
    fn took(&mut self, bytes: &[u8]);
    /// The connection ended.
    fn closed(&mut self);
}

/// [`Read::read`] of a [`Translated`] connection: the answer's bytes as
/// they come, 0 once it is over.
pub(in crate::backend) fn read_translated<T: Translated>(
    t: &mut T,
    out: &mut [u8],
) -> std::io::Result<usize> {
    let mut tmp = [0u8; 4096];
    loop {
        let (resp, pos, end) = t.answer();
        if *pos < resp.len() {
            let n = out.len().min(resp.len() - *pos);
            out[..n].copy_from_slice(&resp[*pos..*pos + n]);
            *pos += n;
            return Ok(n);
        }
        if end {
            return Ok(0);
        }
        t.send()?;
        match t.inner().read(&mut tmp)? {
            0 => t.closed(),
            n => t.took(&tmp[..n]),
        }
    }
}
