//! The server side's socket and its own tasklet.
//!
//! A proxied exchange has two sockets. Each is registered with the tasklet
//! that owns it: the client's with the client connection's tasklet
//! (`h1_conn`), the server's with this one (`h1_srv`, one per client
//! connection, created the first time it proxies). A readiness change of
//! the server socket therefore never runs client-side code and never makes
//! the client side try a `read` that returns `EAGAIN`; the two sides meet
//! in [`ServerSide`], which both reach through an `Rc<RefCell<_>>` on the
//! connection's thread (tasklets of one thread never run at once, so a
//! borrow never meets another).
//!
//! What each tasklet does with it:
//!
//! ```text
//!   h1_srv  (server socket event)     h1_conn  (client event, or woken)
//!   ------------------------------    ----------------------------------
//!   connect done? -> Connected        request head/body -> obuf
//!   obuf -> server socket             obuf -> server (if writable)
//!   server socket -> ibuf             ibuf -> parse, edits -> client
//!   wake h1_conn only when the        timers, log, slot release, pool
//!   client has work: bytes or EOF
//!   arrived, a failure, or room for
//!   more request body it was holding
//! ```
//!
//! Readiness (`rd`, `wr`) follows the edges of the server socket as
//! reported to `h1_srv`, and is cleared only when a call comes back short
//! or with `WouldBlock`, as on the client side. The connection's timer
//! stays with the client tasklet (it holds the exchange's deadlines).

use std::io;

use sched::{Ctx, Reasons, Status, TaskletId, Tick};

use crate::http1::forwardable;
use crate::stream::msg::{BodySize, Form, Omit, ReqHead};
use crate::transport::Transport;

/// The server socket of a client connection's current exchange, and the
/// bytes on their way to and from it.
#[derive(Default)]
pub(crate) struct ServerSide {
    /// The socket of the exchange under way (an idle one kept for the
    /// client's next request lives in `Stream::attached`).
    pub(crate) sock: Option<Transport>,
    /// The local address of the last socket installed (when something
    /// reads it: [`crate::sample::back_local`]); none for an HTTP/2 lane.
    pub(crate) local: Option<crate::sample::BackLocal>,
    /// A non-blocking connect is under way.
    pub(crate) connecting: bool,
    /// The connect failed (seen by `h1_srv`; the client side retries).
    pub(crate) connect_failed: bool,
    /// The TCP connect (and SOCKS4 handshake) is done and the TLS
    /// handshake under way: still `connecting`, as HAProxy counts it (its
    /// failure is a failed connect, `timeout connect` covers it).
    pub(crate) handshaking: bool,
    /// When the connect completed (for the log's `Tc`).
    pub(crate) t_conn: Option<Tick>,
    pub(crate) rd: bool,
    pub(crate) wr: bool,
    /// The poller said the peer closed (`EPOLLRDHUP`): its end of stream
    /// may sit behind the last bytes, with no edge to come, so reads go on
    /// until they return 0.
    pub(crate) hup: bool,
    pub(crate) eof: bool,
    /// A write failed: the client side decides between replay and 502.
    pub(crate) broken: bool,
    /// A read failed (a reset, a TLS alert), not an end of stream: HAProxy
    /// 2.6 counts such an error twice in the server's `eresp` (its stream
    /// and its HTTP analyser each count it).
    pub(crate) errored: bool,
    /// The client side holds more to send (request body, tunnel bytes)
    /// and waits for room in `obuf` or for the connect.
    pub(crate) want_room: bool,
    /// Request bytes for the server, from `opos`.
    pub(crate) obuf: Vec<u8>,
    pub(crate) opos: usize,
    /// Response bytes from the server, `istart..iend`.
    pub(crate) ibuf: Vec<u8>,
    pub(crate) istart: usize,
    pub(crate) iend: usize,
    /// Request bytes written to the server (the stats' "bytes in").
    pub(crate) bytes_in: u64,
    /// An event arrived while no exchange used a socket: the idle one
    /// kept for the client (`Stream::attached`) may have closed.
    pub(crate) idle_event: bool,
    /// `proto h2` and `proto fcgi` servers: the exchange goes through a
    /// stream of an HTTP/2 connection ([`crate::mux::h2::server`]) or a
    /// request of a FastCGI one ([`crate::mux::fcgi::server`]) instead of
    /// `sock`.
    pub(crate) h2: Option<std::rc::Rc<std::cell::RefCell<crate::mux::h2::server::Pipe>>>,
    /// That connection's tasklet, woken by [`ServerSide::wake_mux`].
    pub(crate) mux: Option<TaskletId>,
    /// `socks4`: the proxy's handshake, part of the connect.
    pub(crate) socks: Option<Box<crate::backend::socks4::Socks4>>,
    /// `sock`'s count among its server's connections in use (set by
    /// whoever installs it; [`ServerSide::take_sock`] lets it go).
    pub(crate) used: Option<crate::backend::pool::UsedConn>,
    /// The client's place in the idle pool, where its last connection
    /// stays registered with this side's tasklet: looked at on an event
    /// while no exchange has a socket, so a server's close takes it out of
    /// the pool at once.
    pub(crate) parked: Option<crate::backend::pool::ParkedWatch>,
}

impl Drop for ServerSide {
    /// A client connection that ends without its exchange's usual end
    /// lets go of its HTTP/2 stream too (its connection sees it at its
    /// next run, at most a second later).
    fn drop(&mut self) {
        if let Some(p) = self.h2.take() {
            p.borrow_mut().closed = true;
        }
    }
}

impl ServerSide {
    /// Whether nothing ever used it (a new one's state): its stream may
    /// then serve another client connection.
    pub(crate) fn unused(&self) -> bool {
        // Every field is named: a new one must be considered here.
        let ServerSide {
            sock,
            local,
            connecting,
            connect_failed,
            handshaking,
            t_conn,
            rd,
            wr,
            hup,
            eof,
            broken,
            errored,
            want_room,
            obuf,
            opos,
            ibuf,
            istart,
            iend,
            bytes_in,
            idle_event,
            h2,
            mux,
            socks,
            used,
            parked,
        } = self;
        sock.is_none()
            && local.is_none()
            && !(*connecting || *connect_failed || *handshaking || *rd || *wr || *hup || *eof)
            && !(*broken || *errored || *want_room || *idle_event)
            && t_conn.is_none()
            && obuf.capacity() == 0
            && ibuf.capacity() == 0
            && *opos == 0
            && *istart == 0
            && *iend == 0
            && *bytes_in == 0
            && h2.is_none()
            && mux.is_none()
            && socks.is_none()
            && used.is_none()
            && parked.is_none()
    }

    /// Resets the readiness and input state for a new socket.
    pub(crate) fn install(&mut self, sock: Transport, connecting: bool, now: Tick) {
        if let Some(p) = self.h2.take() {
            p.borrow_mut().closed = true;
        }
        self.local = crate::sample::back_local(sock.tcp());
        self.sock = Some(sock);
        self.used = None;
        self.install_common(connecting, now);
        // A fresh registration reports the socket's state as a first edge;
        // a reused one is known idle (checked alive) and writable.
        self.rd = false;
        self.wr = !connecting;
    }

    /// Puts the exchange on a stream of an HTTP/2 connection
    /// (`connecting` until that connection is established).
    pub(crate) fn install_h2(&mut self, a: crate::mux::h2::server::Attached, now: Tick) {
        let (connecting, local) = {
            let p = a.pipe.borrow();
            (!p.connected, p.local)
        };
        self.install_common(connecting, now);
        self.sock = None;
        self.used = None;
        self.local = local;
        self.h2 = Some(a.pipe);
        self.mux = Some(a.mux);
        self.rd = true;
        self.wr = true;
    }

    fn install_common(&mut self, connecting: bool, now: Tick) {
        self.connecting = connecting;
        self.connect_failed = false;
        self.handshaking = false;
        self.socks = None;
        self.t_conn = if connecting { None } else { Some(now) };
        self.hup = false;
        self.eof = false;
        self.broken = false;
        self.errored = false;
        self.istart = 0;
        self.iend = 0;
    }

    /// The exchange goes through a stream of an HTTP/2 connection (not a
    /// FastCGI one, whose pipe carries what ebb wrote as HTTP/1.1).
    pub(crate) fn is_h2(&self) -> bool {
        self.h2.as_ref().is_some_and(|p| !p.borrow().fcgi)
    }

    /// After the server side wrote into or let go of an HTTP/2 stream:
    /// its connection's tasklet runs.
    pub(crate) fn wake_mux(&mut self, ctx: &mut Ctx) {
        if let Some(t) = self.mux {
            ctx.tasklet_wakeup(t);
            if self.h2.is_none() {
                self.mux = None;
            }
        }
    }

    /// Takes the socket out (to close it or keep it), resetting the state.
    pub(crate) fn take_sock(&mut self) -> Option<Transport> {
        if let Some(p) = self.h2.take() {
            // The HTTP/2 stream is let go (its connection resets it if
            // the server is not done with it).
            p.borrow_mut().closed = true;
        }
        self.connecting = false;
        self.connect_failed = false;
        self.handshaking = false;
        self.socks = None;
        self.rd = false;
        self.wr = false;
        self.hup = false;
        self.eof = false;
        self.broken = false;
        self.errored = false;
        self.istart = 0;
        self.iend = 0;
        self.used = None;
        self.sock.take()
    }

    pub(crate) fn out_pending(&self) -> usize {
        self.obuf.len() - self.opos
    }

    /// An HTTP/2 stream's connection may have come up (or failed) without
    /// this side's tasklet having run since: takes the outcome from the
    /// pipe, so the exchange's deadline moves on from the connect timeout.
    pub(crate) fn refresh_h2_connect(&mut self, now: Tick) {
        if self.connecting && self.h2.is_some() {
            let _ = self.check_connect(now);
        }
    }

    /// Completes a connect once the socket says so. Returns `Some(ok)`
    /// when the outcome is known.
    fn check_connect(&mut self, now: Tick) -> Option<bool> {
        if let Some(p) = &self.h2 {
            let p = p.borrow();
            let ok = match (p.failed, p.connected) {
                (true, _) => false,
                (false, true) => true,
                (false, false) => return None,
            };
            let local = p.local;
            drop(p);
            self.connecting = false;
            self.connect_failed = !ok;
            if ok {
                self.t_conn = Some(now);
                self.local = local;
            }
            return Some(ok);
        }
        let st = self.sock.as_ref()?;
        if !(self.rd || self.wr) {
            return None;
        }
        if !self.handshaking {
            match crate::backend::connect_outcome(st.tcp(), &mut self.socks, self.wr, self.hup) {
                Some(true) => {}
                None => {
                    self.rd = false;
                    self.wr = false;
                    return None;
                }
                Some(false) => {
                    self.connecting = false;
                    self.connect_failed = true;
                    return Some(false);
                }
            }
        }
        // TCP is up: a TLS server's handshake completes the connect.
        let st = self.sock.as_mut()?;
        let tls = st.is_tls();
        let r = crate::backend::handshake_outcome(st);
        self.handshaking = r.is_none();
        self.connecting = r.is_none();
        self.connect_failed = r == Some(false);
        if r.is_none() {
            self.rd = false;
            self.wr = false;
        } else if r == Some(true) {
            // Records past the handshake may wait in rustls or the
            // socket: the next read looks.
            self.rd |= tls;
            self.wr = true;
            self.t_conn = Some(now);
        }
        r
    }

    /// Sends `obuf` on a connect just started, when the kernel may have
    /// completed it within `connect` (a loopback server: the handshake
    /// runs in the calling thread's softirq), as a tcp session does (its
    /// pipe's `send_early`): bytes that leave confirm the
    /// connect, so its writable edge is not waited for and the socket
    /// may be registered for reading alone. Plain sockets, the request
    /// whole in `obuf` (a body the client side still checks is written by
    /// it at the connect), no SOCKS4 handshake. Returns `Some(true)` when
    /// the connect is confirmed (`wr` then says whether all left),
    /// `Some(false)` when it failed (refused: nothing else will say so,
    /// the error is taken), `None` when it is still under way (`EAGAIN`:
    /// the edge settles it).
    pub(crate) fn send_early(&mut self, now: Tick) -> Option<bool> {
        if !self.connecting || self.want_room || self.socks.is_some() || self.h2.is_some() {
            return None;
        }
        let st = self.sock.as_mut().filter(|t| t.is_plain())?;
        if self.opos >= self.obuf.len() {
            return None;
        }
        use crate::transport::Early;
        let want = self.obuf.len() - self.opos;
        match st.send_early(&self.obuf[self.opos..], false) {
            Early::Sent(n) => {
                self.opos += n;
                self.bytes_in += n as u64;
                self.wr = n == want;
                if self.opos == self.obuf.len() {
                    self.obuf.clear();
                    self.opos = 0;
                }
            }
            Early::Blocked => return None,
            Early::Failed(_) => {
                // Refused, or accepted and reset at once: a failed connect,
                // as the edge's `connect_outcome` would say.
                self.connecting = false;
                self.connect_failed = true;
                return Some(false);
            }
        }
        self.connecting = false;
        self.t_conn = Some(now);
        Some(true)
    }

    /// Has the poller watch the socket's writability when a write blocked
    /// (HAProxy's `fd_want_send`): a plain server socket whose connect was
    /// confirmed by [`Self::send_early`] is registered for reading alone,
    /// so a short exchange is not woken by edges with nothing to write
    /// (the ACK of its FIN); this runs after each of its sends. Once
    /// watched, writability stays so (nothing when it is already).
    pub(crate) fn watch_blocked(&mut self, ctx: &mut Ctx) {
        let Some(st) = self.sock.as_ref() else {
            return;
        };
        if self.wr
            || self.broken
            || (self.out_pending() == 0 && !self.connecting && !st.has_pending_output())
        {
            return;
        }
        if ctx.want_write(st.raw_fd()).is_err() {
            self.broken = true;
        }
    }

    /// Writes what `obuf` holds (and TLS records rustls keeps). Returns
    /// whether bytes left; a failure sets `broken`. Called at every step
    /// of an exchange: with nothing to write it returns at once, inlined.
    #[inline]
    pub(crate) fn send(&mut self) -> bool {
        if self.h2.is_none()
            && self.opos >= self.obuf.len()
            && !self.sock.as_ref().is_some_and(|s| s.has_pending_output())
        {
            return false;
        }
        self.send_pending()
    }

    fn send_pending(&mut self) -> bool {
        let mut moved = false;
        if let Some(p) = &self.h2 {
            return self.send_h2(&std::rc::Rc::clone(p));
        }
        if !self.wr || self.broken {
            return false;
        }
        let Some(st) = self.sock.as_mut() else {
            return false;
        };
        if st.has_pending_output() {
            match st.flush_pending() {
                Ok(true) => moved = true,
                Ok(false) => self.wr = false,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wr = false,
                Err(_) => {
                    self.broken = true;
                    return moved;
                }
            }
        }
        if self.opos < self.obuf.len() && self.wr {
            match st.write(&self.obuf[self.opos..]) {
                Ok(n) => {
                    let want = self.obuf.len() - self.opos;
                    self.opos += n;
                    self.bytes_in += n as u64;
                    moved |= n > 0;
                    if n < want {
                        self.wr = false;
                    }
                    if self.opos == self.obuf.len() {
                        self.obuf.clear();
                        self.opos = 0;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wr = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.broken = true,
            }
        }
        moved
    }

    /// Request bytes into the HTTP/2 stream's pipe, as its room allows
    /// (after the answer ended they are dropped: the server needs none).
    fn send_h2(
        &mut self,
        p: &std::rc::Rc<std::cell::RefCell<crate::mux::h2::server::Pipe>>,
    ) -> bool {
        let mut p = p.borrow_mut();
        let pending = self.obuf.len() - self.opos;
        if pending == 0 || self.connecting {
            return false;
        }
        let n = if p.end {
            pending
        } else {
            let room = crate::mux::h2::server::REQ_MAX.saturating_sub(p.req.len());
            let n = pending.min(room);
            p.req
                .extend_from_slice(&self.obuf[self.opos..self.opos + n]);
            n
        };
        self.opos += n;
        self.bytes_in += n as u64;
        if n < pending {
            p.want_room = true;
            self.wr = false;
        }
        if self.opos == self.obuf.len() {
            self.obuf.clear();
            self.opos = 0;
        }
        n > 0
    }

    /// Makes room in `ibuf` (a pooled buffer if it has none); false when
    /// it is full.
    fn ibuf_room(&mut self, get_buf: impl FnOnce() -> Vec<u8>) -> bool {
        if self.ibuf.is_empty() {
            self.ibuf = get_buf();
        }
        if self.istart == self.iend {
            self.istart = 0;
            self.iend = 0;
        } else if self.iend == self.ibuf.len() && self.istart > 0 {
            self.ibuf.copy_within(self.istart..self.iend, 0);
            self.iend -= self.istart;
            self.istart = 0;
        }
        self.iend < self.ibuf.len()
    }

    /// Answer bytes from the HTTP/2 stream's pipe; its end is the EOF.
    fn recv_h2(&mut self, get_buf: impl FnOnce() -> Vec<u8>) -> bool {
        let Some(p) = self.h2.clone() else {
            return false;
        };
        if self.eof || !self.ibuf_room(get_buf) {
            return false;
        }
        let mut p = p.borrow_mut();
        let avail = p.resp.len() - p.resp_pos;
        if avail == 0 {
            self.eof = p.end;
            return false;
        }
        let n = avail.min(self.ibuf.len() - self.iend);
        let at = p.resp_pos;
        self.ibuf[self.iend..self.iend + n].copy_from_slice(&p.resp[at..at + n]);
        self.iend += n;
        p.resp_pos += n;
        p.read_count += n;
        if p.resp_pos == p.resp.len() {
            p.resp.clear();
            p.resp_pos = 0;
        }
        true
    }

    /// Reads once into `ibuf` (taking a pooled buffer if it has none).
    /// Returns whether bytes arrived; EOF and errors set `eof`.
    pub(crate) fn recv(&mut self, get_buf: impl FnOnce() -> Vec<u8>) -> bool {
        if self.h2.is_some() {
            return self.recv_h2(get_buf);
        }
        if !self.rd || self.eof || self.sock.is_none() {
            return false;
        }
        if !self.ibuf_room(get_buf) {
            // Full: the client side must take some first.
            return false;
        }
        let Some(st) = self.sock.as_mut() else {
            return false;
        };
        let got = crate::mux::read_once_with(
            st,
            &mut self.ibuf,
            &mut self.iend,
            &mut self.rd,
            self.hup,
            &mut self.eof,
        );
        got.unwrap_or_else(|_| {
            self.eof = true;
            self.errored = true;
            false
        })
    }

    /// One run of `h1_srv` after an event: moves what it can and says
    /// whether the client side has something to do.
    pub(crate) fn drive(&mut self, now: Tick, get_buf: impl FnOnce() -> Vec<u8>) -> bool {
        if self.sock.is_none() && self.h2.is_none() {
            // An event of a socket no longer in use, or of the idle one
            // kept for the client: its liveness is checked at reuse.
            self.idle_event = true;
            return false;
        }
        let mut wake = false;
        if self.connecting {
            match self.check_connect(now) {
                None => return false,
                Some(false) => return true,
                // Connected. When the client side holds request body,
                // it writes the head itself together with what it checked
                // of the body (a broken chunk already in its buffer must
                // stop the request before any byte of it leaves).
                Some(true) if self.want_room => return true,
                // Otherwise the request waits whole in `obuf`: send it
                // from here, without a client-side run.
                Some(true) => {}
            }
        }
        let before = self.out_pending();
        self.send();
        let room_made = before > 0 && self.out_pending() < before;
        if self.sock.as_ref().is_some_and(|s| s.has_pending_output()) && self.wr {
            // TLS: a handshake step may have queued records to write.
            self.send();
        }
        let eof_before = self.eof;
        let got = self.recv(get_buf);
        if self.sock.as_ref().is_some_and(|s| s.has_pending_output()) && self.wr {
            self.send();
        }
        wake |= got || self.eof != eof_before || self.broken || (room_made && self.want_room);
        wake
    }
}

/// How a request for a server ends its head, beyond the client's fields.
pub(crate) struct ReqTail<'a> {
    /// Names the request rules delete.
    pub omit: Option<Omit<'a>>,
    /// A field name to look for among the client's (the backend's
    /// `option forwardfor` header): [`write_request_head`] tells `extra`
    /// whether it was there.
    pub watch: &'a [u8],
    /// The server connection is kept after the exchange (else
    /// `Connection: close`).
    pub keep: bool,
}

/// Writes the HTTP/1.1 request head a server gets (RFC 9112 §3, RFC 9110
/// §7.6): the request line (an absolute-form target as received), the
/// client's fields (`Host` as sent, none added) less the
/// connection-specific ones, `Content-Length` and `tail.omit`, what
/// `extra` writes (the rules' added fields, `X-Forwarded-For`), the
/// framing, the upgrade or `Connection: close`, the empty line. Returns the
/// framing of the body that follows: what the server side must send.
pub(crate) fn write_request_head(
    out: &mut Vec<u8>,
    h: &ReqHead<'_>,
    tail: &ReqTail<'_>,
    extra: impl FnOnce(&mut Vec<u8>, bool),
) -> BodySize {
    out.extend_from_slice(h.method_raw);
    out.push(b' ');
    // An absolute-form URI is sent as received (scheme, authority, path),
    // as HAProxy sends it to HTTP/1.1 servers.
    if let (Form::Absolute, Some(scheme), Some(auth)) = (h.form, h.scheme, h.authority) {
        out.extend_from_slice(scheme);
        out.extend_from_slice(b"://");
        out.extend_from_slice(auth);
    }
    let target: &[u8] = match h.form {
        Form::Origin | Form::Absolute => h.path,
        Form::Authority => h.authority.unwrap_or(b""),
        Form::Asterisk => b"*",
    };
    // An absolute URI without a path (`http://a`) goes without one, as
    // HAProxy 2.6 sends it.
    let slash = target.is_empty() && h.form != Form::Absolute;
    out.extend_from_slice(if slash { b"/" } else { target });
    // The client's version goes on, as HAProxy passes it (an HTTP/2
    // client's request is HTTP/1.1 here).
    let http10 = h.version == crate::stream::msg::Version::Http10;
    if let Some(v) = h.version_raw {
        out.push(b' ');
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(if http10 {
            b" HTTP/1.0\r\n"
        } else {
            b" HTTP/1.1\r\n"
        });
    }
    let mut seen = false;
    // The framing goes where the client's first framing field was, as
    // HAProxy keeps the fields' order; without one, after the fields.
    let buf = h.fields.buf;
    let is_framing = |n: &[u8]| {
        n.eq_ignore_ascii_case(b"content-length") || n.eq_ignore_ascii_case(b"transfer-encoding")
    };
    let mut framing_at = h.fields.list.iter().find(|f| is_framing(f.name.get(buf)));
    let mut written = false;
    for f in forwardable(buf, h.fields.list) {
        let name = f.name.get(buf);
        if framing_at.is_some_and(|at| f.name.start >= at.name.start) {
            framing_at = None;
            written = true;
            write_framing(out, h);
        }
        if name.eq_ignore_ascii_case(b"content-length") || tail.omit.is_some_and(|o| o(name)) {
            continue;
        }
        seen |= !tail.watch.is_empty() && name.eq_ignore_ascii_case(tail.watch);
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        // `Host` too goes as the client sent it, beside an absolute
        // target as well (HAProxy 2.6 checked that it names the target's
        // authority, case and default port aside, and changes it only
        // for the scheme's default port, as `http1::scheme_normalized`);
        // a request without one gets none (an HTTP/2 request's `host`
        // line is written from `:authority` before it comes here).
        crate::http1::push_forwarded_value(out, name, f.value.get(buf));
        out.extend_from_slice(b"\r\n");
    }
    if framing_at.is_some() {
        // No field forwarded came after the framing field.
        written = true;
        write_framing(out, h);
    }
    extra(out, seen);
    if !written {
        write_framing(out, h);
    }
    if let Some(u) = h.upgrade {
        out.extend_from_slice(b"Connection: upgrade\r\nUpgrade: ");
        out.extend_from_slice(u);
        out.extend_from_slice(b"\r\n");
    } else if !tail.keep {
        // HTTP/1.0 closes unless told otherwise: HAProxy says nothing.
        if !http10 {
            out.extend_from_slice(b"Connection: close\r\n");
        }
    } else if http10 {
        // HTTP/1.0 closes unless told otherwise.
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    h.body
}

/// The framing field of a request for a server: its Content-Length (an
/// explicit zero stays explicit: a POST without it may get a 411), or
/// chunked for a body of unknown length.
fn write_framing(out: &mut Vec<u8>, h: &ReqHead<'_>) {
    if h.method == crate::http1::Method::Connect {
        // No content (RFC 9110 §9.3.6): no framing field goes.
        return;
    }
    match h.body {
        BodySize::Empty => {
            if h.fields.get(b"content-length").is_some() {
                out.extend_from_slice(b"Content-Length: 0\r\n");
            }
        }
        BodySize::Exact(n) => {
            out.extend_from_slice(b"Content-Length: ");
            crate::http1::push_decimal(out, n);
            out.extend_from_slice(b"\r\n");
        }
        BodySize::Unknown => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
}

/// The server-side tasklet's body: one per client connection.
pub(crate) struct SideTasklet {
    pub(crate) side: std::rc::Rc<std::cell::RefCell<ServerSide>>,
    pub(crate) w: std::rc::Rc<crate::worker::Worker>,
    /// The client connection's tasklet, woken when it has work.
    pub(crate) client: TaskletId,
}

impl sched::TaskletFn for SideTasklet {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        if !why.intersects(Reasons::IO) {
            return Status::Continue;
        }
        let ev = ctx.take_events(me);
        let mut s = self.side.borrow_mut();
        let side = &mut *s;
        // (The close is noted for the socket of an exchange only: the
        // idle one's is seen at its reuse.)
        let mut hup = false;
        crate::mux::note_events(ev, &mut side.rd, &mut hup, &mut side.wr);
        side.hup |= hup && side.sock.is_some();
        if s.h2.is_some() {
            // Woken by its HTTP/2 connection: the pipe has news.
            s.rd = true;
            s.wr = true;
            // `alpn`: the server chose HTTP/1.1; the connection is ours.
            let h1 = s.h2.as_ref().and_then(|p| {
                let mut p = p.borrow_mut();
                p.h1.take().map(|st| (st, p.h1_used.take()))
            });
            if let Some((st, used)) = h1 {
                if ctx.register_fd(st.raw_fd(), me, true).is_ok() {
                    s.install(st, false, ctx.now());
                    s.used = used;
                } else {
                    s.connecting = false;
                    s.connect_failed = true;
                }
                drop(s);
                ctx.tasklet_wakeup(self.client);
                return Status::Continue;
            }
        }
        let w = &self.w;
        let idle = s.sock.is_none() && s.h2.is_none();
        let wake = s.drive(ctx.now(), || w.get_buf());
        if idle {
            // The event may be a close of the connection parked for the
            // client (HAProxy closes an idle connection on its event).
            let dead = s
                .parked
                .as_ref()
                .and_then(|p| w.shared.idle.check_parked(p, me, ctx.io_mark(me)));
            if let Some(st) = dead {
                // Closed as it drops: no `EPOLL_CTL_DEL`.
                ctx.forget_fd(st.raw_fd());
            }
        }
        s.watch_blocked(ctx);
        s.wake_mux(ctx);
        if wake {
            s.want_room = false;
            drop(s);
            ctx.tasklet_wakeup(self.client);
        }
        Status::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn pair() -> (ServerSide, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.set_nonblocking(true).unwrap();
        let (s, _) = l.accept().unwrap();
        let mut side = ServerSide::default();
        side.install(Transport::plain(c), false, 1);
        (side, s)
    }

    fn to_server(raw: &[u8], tail: &ReqTail<'_>) -> (String, BodySize) {
        let h = match crate::http1::parse_request(raw, &Default::default()).unwrap() {
            crate::http1::Status::Complete(h) => h,
            crate::http1::Status::Partial => panic!("partial"),
        };
        let mut out = Vec::new();
        let body = write_request_head(&mut out, &ReqHead::from_h1(raw, &h), tail, |o, seen| {
            o.extend_from_slice(if seen {
                b"X-Seen: 1\r\n"
            } else {
                b"X-Seen: 0\r\n"
            });
        });
        (String::from_utf8(out).unwrap(), body)
    }

    const KEEP: ReqTail<'static> = ReqTail {
        omit: None,
        watch: b"x-forwarded-for",
        keep: true,
    };

    #[test]
    fn a_request_for_a_server_keeps_haproxys_fields_and_order() {
        // As HAProxy 2.6: the fields Connection names go on, Connection
        // without `keep-alive`, the framing in the client's place.
        let (out, body) = to_server(
            b"POST /a?b HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nContent-Length: 3\r\nX-Forwarded-For: 1.2.3.4\r\nAccept: */*\r\n\r\nabc",
            &KEEP,
        );
        assert_eq!(
            out,
            "POST /a?b HTTP/1.1\r\nHost: h\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nContent-Length: 3\r\nX-Forwarded-For: 1.2.3.4\r\nAccept: */*\r\nX-Seen: 1\r\n\r\n"
        );
        assert_eq!(body, BodySize::Exact(3));
        // The framing field last: after the fields, before what is added.
        let (out, _) = to_server(
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
            &KEEP,
        );
        assert_eq!(
            out,
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nX-Seen: 0\r\n\r\n"
        );
    }

    #[test]
    fn absolute_form_is_kept_with_host_as_sent() {
        let omit = |n: &[u8]| n.eq_ignore_ascii_case(b"x-drop");
        let tail = ReqTail {
            omit: Some(&omit),
            watch: b"",
            keep: false,
        };
        let (out, body) = to_server(
            b"GET http://example.com:8080/p HTTP/1.1\r\nHost: EXAMPLE.com:8080\r\nX-Drop: y\r\nTransfer-Encoding: chunked\r\n\r\n",
            &tail,
        );
        assert_eq!(
            out,
            "GET http://example.com:8080/p HTTP/1.1\r\nHost: EXAMPLE.com:8080\r\nTransfer-Encoding: chunked\r\nX-Seen: 0\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(body, BodySize::Unknown);
        // Without Host, none is added (HAProxy 2.6 sends none).
        let (out, _) = to_server(b"GET http://a/p HTTP/1.1\r\n\r\n", &tail);
        assert_eq!(
            out,
            "GET http://a/p HTTP/1.1\r\nX-Seen: 0\r\nConnection: close\r\n\r\n"
        );
        // Without a path, as HAProxy 2.6 sends it (no `/` added).
        let (out, _) = to_server(b"GET http://a HTTP/1.1\r\nHost: a\r\n\r\n", &tail);
        assert!(
            out.starts_with("GET http://a HTTP/1.1\r\nHost: a\r\n"),
            "{out}"
        );
    }

    #[test]
    fn http_1_0_without_host_explicit_zero_length_and_upgrade() {
        // The client's version passes on (HAProxy's rule); keep-alive
        // toward the server is said explicitly in HTTP/1.0.
        let (out, body) = to_server(b"GET / HTTP/1.0\r\n\r\n", &KEEP);
        assert_eq!(
            out,
            "GET / HTTP/1.0\r\nX-Seen: 0\r\nConnection: keep-alive\r\n\r\n"
        );
        assert_eq!(body, BodySize::Empty);
        // Closing after it: HTTP/1.0's default, nothing said (HAProxy).
        let (out, _) = to_server(
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            &ReqTail {
                keep: false,
                ..KEEP
            },
        );
        assert_eq!(out, "GET / HTTP/1.0\r\nX-Seen: 0\r\n\r\n");
        let (out, _) = to_server(
            b"PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
            &KEEP,
        );
        assert!(
            out.ends_with("Content-Length: 0\r\nX-Seen: 0\r\n\r\n"),
            "{out}"
        );
        let (out, _) = to_server(
            b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: foo/1\r\n\r\n",
            &ReqTail {
                keep: false,
                ..KEEP
            },
        );
        assert!(
            out.ends_with("X-Seen: 0\r\nConnection: upgrade\r\nUpgrade: foo/1\r\n\r\n"),
            "{out}"
        );
    }

    #[test]
    fn reused_socket_is_writable_not_readable() {
        let (mut side, mut peer) = pair();
        assert!(side.wr && !side.rd);
        side.obuf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        // Writing needs no event; nothing is read without one.
        assert!(!side.drive(2, || vec![0; 64]));
        assert_eq!(side.out_pending(), 0);
        assert_eq!(side.bytes_in, 18);
        let mut b = [0u8; 18];
        peer.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn bytes_or_eof_wake_the_client_side() {
        let (mut side, mut peer) = pair();
        peer.write_all(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
        side.rd = true;
        // Loopback delivers before write_all returns.
        assert!(side.drive(2, || vec![0; 64]));
        assert_eq!(
            &side.ibuf[side.istart..side.iend],
            b"HTTP/1.1 200 OK\r\n\r\n"
        );
        assert!(!side.rd, "a short read clears readiness");
        drop(peer);
        side.rd = true;
        side.istart = side.iend;
        assert!(side.drive(3, || vec![0; 64]));
        assert!(side.eof);
    }

    #[test]
    fn no_event_no_syscall_result() {
        let (mut side, _peer) = pair();
        side.wr = false;
        side.obuf.extend_from_slice(b"x");
        assert!(!side.drive(2, || vec![0; 64]));
        assert_eq!(side.out_pending(), 1, "not writable: nothing written");
    }

    #[test]
    fn room_wakes_only_a_waiting_client() {
        let (mut side, _peer) = pair();
        side.obuf.extend_from_slice(b"body");
        assert!(!side.drive(2, || vec![0; 64]));
        side.obuf.extend_from_slice(b"more");
        side.want_room = true;
        assert!(side.drive(3, || vec![0; 64]));
    }

    #[test]
    fn connect_with_body_pending_leaves_the_write_to_the_client_side() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .unwrap();
        s.set_nonblocking(true).unwrap();
        let _ = s.connect(&l.local_addr().unwrap().into());
        let mut side = ServerSide::default();
        side.install(Transport::plain(s.into()), true, 1);
        side.obuf.extend_from_slice(b"POST / HTTP/1.1\r\n\r\n");
        side.want_room = true;
        assert!(!side.drive(2, || vec![0; 64]), "no event yet");
        assert!(side.connecting);
        // The poller reports the socket writable once its connect is
        // established (`backend::connect_outcome`): that edge, when the
        // kernel says so, and no sooner.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !side
            .sock
            .as_ref()
            .is_some_and(|t| crate::backend::connected(t.tcp()))
        {
            assert!(std::time::Instant::now() < until, "connect never completed");
            std::thread::yield_now();
        }
        side.wr = true;
        assert!(
            side.drive(2, || vec![0; 64]),
            "the edge settles the connect"
        );
        assert!(!side.connecting && !side.connect_failed);
        assert_eq!(
            side.out_pending(),
            19,
            "nothing written before the body is checked"
        );
        assert_eq!(side.t_conn, Some(2));
    }

    #[test]
    fn connect_refused_is_reported() {
        // A port held bound but not listening: a connect to it is refused,
        // and no other socket (another test's listener) can take it
        // meanwhile, as it could a port released from `:0`.
        let hold =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        hold.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        let addr = hold.local_addr().unwrap();
        let s = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .unwrap();
        s.set_nonblocking(true).unwrap();
        let _ = s.connect(&addr);
        let mut side = ServerSide::default();
        side.install(Transport::plain(s.into()), true, 1);
        assert!(!side.drive(2, || vec![0; 64]), "no event yet");
        // The refusal as the poller reports it: writable with a hang-up
        // and an error (`SideTasklet` sets all three), which sends the
        // outcome to `SO_ERROR`; before the refusal lands, the socket
        // stays "connecting" (no error, no peer).
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            side.rd = true;
            side.wr = true;
            side.hup = true;
            if side.drive(3, || vec![0; 64]) {
                break;
            }
            assert!(std::time::Instant::now() < until, "no refusal seen");
            std::thread::yield_now();
        }
        assert!(side.connect_failed && !side.connecting);
    }
}
