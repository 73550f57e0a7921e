//! `accept-proxy`: the PROXY protocol header (v1 or v2) every connection
//! of the bind line starts with, read before anything else (before TLS,
//! before HTTP), by a tasklet of its own that then hands the socket over
//! with the addresses the header gave; and `accept-netscaler-cip MAGIC`:
//! NetScaler's Client IP header ([`crate::proxyproto::cip`]), read the
//! same way, before the PROXY header when the line asks for both
//! (HAProxy's handshake order: the PROXY header's addresses then win).
//!
//! The header is *peeked* ([`std::net::TcpStream::peek`]) until it is
//! whole, then exactly its bytes are read: the payload behind it stays in
//! the socket for the connection's own reader, so nothing is copied across
//! the hand-over. Strict, as HAProxy: a connection whose first bytes are
//! not a valid header, or that closes or stays silent for `timeout client`
//! before one is whole, is closed and logged. (A header split over several
//! segments is waited for; HAProxy 2.6 peeks once and refuses it.) A LOCAL (v2) or UNKNOWN (v1)
//! header keeps the connection's real addresses (the spec's rule). A
//! NetScaler header is waited for whole likewise (HAProxy 2.6 peeks once:
//! the protocol sends it in one segment); a wrong magic number, a
//! protocol other than TCP over IPv4 or IPv6, a length that cannot hold
//! the headers, a close or `timeout client` before it is whole, closes the
//! connection with HAProxy's texts, logged.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;

use sched::{ticks, Ctx, Reasons, Status, TaskletId, Tick};

use crate::proxy::FrontendRt;
use crate::proxyproto::{parse, Parsed};
use crate::worker::Worker;

/// Largest header accepted: v1's 107 bytes, a v2 header with the TLVs a
/// load balancer sends (ALPN, authority, unique id, SSL details). HAProxy
/// 2.6 peeks the header into one buffer (`tune.bufsize`, 16 KiB): the same
/// bound, so a header one accepts the other does.
const MAX_HEADER: usize = 16384;

/// The headers a connection starts with.
#[derive(Clone, Copy, Debug)]
pub(super) struct Headers {
    /// A NetScaler Client IP header with this magic number.
    pub cip: Option<u32>,
    /// Then a PROXY header (`accept-proxy`, `expect-proxy layer4`).
    pub proxy: bool,
}

struct Reader {
    /// The headers still to read.
    hdrs: Headers,
    /// The addresses a header read so far gave, and the PROXY header's
    /// TLVs.
    addrs: Option<(SocketAddr, SocketAddr)>,
    tlvs: Option<Vec<crate::proxyproto::Tlv>>,
    sock: Option<TcpStream>,
    peer: SocketAddr,
    fe: Arc<FrontendRt>,
    w: Rc<Worker>,
    tls: Option<Arc<rustls::ServerConfig>>,
    early: Option<super::Early>,
    /// `proto h2` on the bind line.
    h2: bool,
    deadline: Tick,
    /// The peer's FIN (or a hang-up) was seen: what the socket holds is
    /// all that will come.
    hup: bool,
    /// When the connection was accepted (`error-log-format`'s `%Tt`).
    accepted: std::time::SystemTime,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn spawn(
    ctx: &mut Ctx,
    sock: TcpStream,
    peer: SocketAddr,
    fe: Arc<FrontendRt>,
    w: Rc<Worker>,
    tls: Option<Arc<rustls::ServerConfig>>,
    early: super::Early,
    h2: bool,
    hdrs: Headers,
) -> std::io::Result<()> {
    // Non-blocking since `accept4` (the listener).
    let fd = sock.as_raw_fd();
    let deadline = ticks::add(ctx.now(), fe.timeouts.client);
    let r = Reader {
        hdrs,
        addrs: None,
        tlvs: None,
        sock: Some(sock),
        peer,
        fe,
        w,
        tls,
        early: Some(early),
        h2,
        deadline,
        hup: false,
        accepted: std::time::SystemTime::now(),
    };
    let id = ctx.new_tasklet_obj("proxy_hdr", r);
    if let Err(e) = ctx.register_fd(fd, id, false) {
        ctx.kill_tasklet(id);
        return Err(e);
    }
    ctx.tasklet_set_expire(id, deadline);
    ctx.tasklet_wakeup(id);
    Ok(())
}

/// What the bytes received so far say.
enum Step {
    Wait,
    Fail(String),
    Done(
        usize,
        Option<(SocketAddr, SocketAddr)>,
        Option<Vec<crate::proxyproto::Tlv>>,
    ),
}

/// Looks at the first bytes (sans-IO): `closed` says the peer sent its FIN.
fn judge(buf: &[u8], closed: bool) -> Step {
    match parse(buf) {
        Parsed::Partial if closed => {
            Step::Fail("connection closed before a complete PROXY header".to_string())
        }
        Parsed::Partial if buf.len() >= MAX_HEADER => {
            Step::Fail(format!("PROXY header longer than {MAX_HEADER} bytes"))
        }
        Parsed::Partial => Step::Wait,
        Parsed::Error(e) => Step::Fail(e.to_string()),
        Parsed::Done(h, n) => Step::Done(n, h.addrs.socket_addrs(), Some(h.tlvs)),
    }
}

/// The same for a NetScaler Client IP header with `magic`.
fn judge_cip(buf: &[u8], closed: bool, magic: u32) -> Step {
    use crate::proxyproto::cip;
    match cip::parse(buf, magic) {
        cip::Cip::Partial if closed && buf.is_empty() => Step::Fail(cip::EMPTY.to_string()),
        cip::Cip::Partial if closed || buf.len() >= MAX_HEADER => {
            Step::Fail(cip::TRUNCATED.to_string())
        }
        cip::Cip::Partial => Step::Wait,
        cip::Cip::Error(e) => Step::Fail(e.to_string()),
        cip::Cip::Done { len, src, dst } => Step::Done(len, Some((src, dst)), None),
    }
}

impl Reader {
    fn fail(&mut self, ctx: &mut Ctx, why: &str) -> Status {
        let fmt = self.fe.error_log_format.as_ref();
        if let Some(fmt) = fmt.filter(|_| self.w.logging(&self.fe)) {
            // HAProxy's `error-log-format` line for a connection that
            // failed before any request (as `mux::h1`'s TLS failures).
            let tt = std::time::SystemTime::now()
                .duration_since(self.accepted)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let mut e = self.fe.no_request_entry(
                self.peer,
                self.accepted,
                tt,
                self.w.actconn(),
                self.sock.as_ref().and_then(|s| self.fe.log_local(s)),
                self.tls.is_some(),
                self.early.as_ref().map(|e| &*e.vars),
            );
            e.fmt = Some(fmt);
            let sd = self.fe.log_sd(&e);
            self.w
                .log_access_sd(crate::log::format(&e), sd, self.fe.err_level());
        } else {
            self.w.log_error(
                format!(
                    "{}: {}: {why}: connection closed ({})",
                    self.fe.name,
                    self.peer,
                    if self.hdrs.cip.is_some() {
                        "accept-netscaler-cip"
                    } else {
                        "accept-proxy"
                    }
                )
                .into_bytes(),
            );
        }
        self.drop_sock(ctx);
        Status::Done
    }

    fn drop_sock(&mut self, ctx: &mut Ctx) {
        if let Some(s) = self.sock.take() {
            let _ = ctx.deregister_fd(s.as_raw_fd());
        }
    }
}

impl sched::TaskletFn for Reader {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        if why.intersects(Reasons::IO) && ctx.take_events(me).hup_or_err() {
            self.hup = true;
        }
        let Some(sock) = self.sock.as_ref() else {
            return Status::Done;
        };
        let mut buf = [0u8; MAX_HEADER];
        let (n, closed) = match sock.peek(&mut buf) {
            Ok(0) => (0, true),
            Ok(n) => (n, self.hup),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => (0, false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                ctx.tasklet_wakeup(me);
                return Status::Continue;
            }
            Err(e) => return self.fail(ctx, &format!("read error: {e}")),
        };
        // A FIN behind a partial header does not show in a peek (the
        // bytes before it stay unread): the poller's hang-up event says
        // it came, and the header can no longer be completed.
        let step = match self.hdrs.cip {
            Some(magic) => judge_cip(&buf[..n], closed, magic),
            None => judge(&buf[..n], closed),
        };
        match step {
            Step::Fail(why) => self.fail(ctx, &why),
            Step::Wait => {
                if why.intersects(Reasons::TIMER) && ticks::is_expired(self.deadline, ctx.now()) {
                    let what = if self.hdrs.cip.is_some() {
                        crate::proxyproto::cip::TIMEOUT
                    } else {
                        "timeout before a complete PROXY header"
                    };
                    return self.fail(ctx, what);
                }
                Status::Continue
            }
            Step::Done(len, addrs, tlvs) => {
                let mut hdr = vec![0u8; len];
                let Some(s) = self.sock.as_mut() else {
                    return Status::Done;
                };
                // The bytes were peeked: this read takes exactly them.
                if let Err(e) = s.read_exact(&mut hdr) {
                    return self.fail(ctx, &format!("read error: {e}"));
                }
                // A LOCAL PROXY header keeps what came before (none).
                if addrs.is_some() {
                    self.addrs = addrs;
                }
                if tlvs.is_some() {
                    self.tlvs = tlvs;
                }
                if self.hdrs.cip.take().is_some() && self.hdrs.proxy {
                    // The PROXY header follows: read on (what came behind
                    // the NetScaler header may already hold it).
                    ctx.tasklet_wakeup(me);
                    return Status::Continue;
                }
                let Some(s) = self.sock.take() else {
                    return Status::Done;
                };
                let _ = ctx.deregister_fd(s.as_raw_fd());
                let addrs = self.addrs;
                let conn_dst = self.early.as_ref().and_then(|e| e.dst);
                let (peer, dst) = match addrs {
                    Some((src, dst)) => (src, Some(dst)),
                    None => (self.peer, conn_dst),
                };
                let fe = Arc::clone(&self.fe);
                let Some(mut early) = self.early.take() else {
                    return Status::Done;
                };
                // As HAProxy 2.6 (conn_recv_proxy, conn_recv_netscaler_cip):
                // the header's addresses are the session's (`src`, `dst`);
                // the connection's (`fc_src`, `fc_dst`) stay the socket's,
                // as the `tcp-request connection` rules left them.
                if addrs.is_some() {
                    let fc_dst = conn_dst.or_else(|| s.local_addr().ok());
                    early.vars.get_mut().fc_addrs = Some((self.peer, fc_dst));
                }
                if let Some(tlvs) = self.tlvs.take() {
                    early.vars.get_mut().pp_tlvs = Some(tlvs.into());
                }
                let w = Rc::clone(&self.w);
                if let Err(e) =
                    super::start(ctx, s, peer, dst, fe, w, self.tls.take(), early, self.h2)
                {
                    self.w.log_error(
                        format!(
                            "{}: cannot set up a connection from {peer}: {e}",
                            self.fe.name
                        )
                        .into_bytes(),
                    );
                }
                Status::Done
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_headers_as_the_spec_says() {
        let v1 = b"PROXY TCP4 192.0.2.1 192.0.2.2 5000 80\r\nGET /";
        match judge(v1, false) {
            Step::Done(n, Some((s, d)), _) => {
                assert_eq!(n, 40);
                assert_eq!(s, "192.0.2.1:5000".parse().unwrap());
                assert_eq!(d, "192.0.2.2:80".parse().unwrap());
            }
            _ => panic!("v1 not accepted"),
        }
        assert!(matches!(judge(b"PROXY TCP4 1.2", false), Step::Wait));
        assert!(matches!(judge(b"PROXY TCP4 1.2", true), Step::Fail(_)));
        assert!(matches!(judge(b"GET / HTTP/1.1\r\n", false), Step::Fail(_)));
        assert!(matches!(judge(b"", false), Step::Wait));
        assert!(matches!(judge(b"", true), Step::Fail(_)));
        assert!(matches!(
            judge(b"PROXY UNKNOWN\r\n", false),
            Step::Done(15, None, _)
        ));
        let v2 = crate::proxyproto::header_for(2, None);
        assert!(matches!(judge(&v2, false), Step::Done(16, None, _)));
    }
}
