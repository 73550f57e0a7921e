//! The server side of a proxied exchange, driven by the client
//! connection's tasklet.
//!
//! ```text
//!   pick ──> Queued ──(slot handed over)──┐
//!     │                                   v
//!     └──(slot)──> reuse an idle connection, or Connecting ──> Connected
//!                                                              │   │
//!            request head + body ──> obuf ──> server           │   │
//!            client <── wbuf <── ibuf <── response head + body ┘   │
//!                                           101 Upgrade ──> Tunnel ┘
//! ```
//!
//! Both directions stream with back-pressure: the client's body moves to
//! the server only while the server-side output holds less than a buffer,
//! and the server's response moves to the client only while the client-side
//! output does; a full buffer stops reading that side, and TCP's own window
//! does the rest. Large bodies therefore cost two buffers, never their size.
//!
//! The server socket is registered with the same tasklet as the client's;
//! an event on either wakes it and both sides are tried (a side that has
//! nothing returns `WouldBlock` at once).
//!
//! After the response, a server connection that may be kept stays attached
//! to the client connection (still registered, so the next request of the
//! same client to the same server costs no `epoll_ctl`), and goes to the
//! thread's idle pool when the client leaves or the next request wants
//! another server.
//!
//! Failures: a connect that fails or times out is retried up to `retries`
//! times (the last one on another server with `option redispatch`), then
//! 503. A reused connection found closed when the request is written, or
//! closed before any byte of answer, is replaced silently if the request is
//! safe to replay (idempotent method, no body byte sent). An invalid answer
//! is a 502, no answer within `timeout server` a 504. Past the response
//! head, a failure can only cut the client connection.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};

use crate::transport::Transport;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use sched::{ticks, Ctx, Tick};
use socket2::{Domain, Protocol, Socket, Type};

use super::{Conn, In};
use crate::backend::{Farm, LbInput, Pick, ServerRt, WaitState, Waiter};
use crate::config::HttpReuse;
use crate::http1::{
    forwardable, parse_response_into, BodyFraming, ChunkedDecoder, Method, ResponseHead,
    Status as PStatus, Version,
};
use crate::proxy::{BackendKind, BackendRt, BeTimeouts};

/// What is left of a body to move.
pub(super) enum Left {
    Done,
    Len(u64),
    Chunked(Box<ChunkedDecoder>),
    UntilClose,
}

impl Left {
    fn done(&self) -> bool {
        matches!(self, Left::Done)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UpState {
    Queued,
    Connecting,
    Connected,
    Tunnel,
}

pub(super) struct Upstream {
    pub(super) be: Arc<BackendRt>,
    farm: Arc<Farm>,
    timeouts: BeTimeouts,
    server: Option<Arc<ServerRt>>,
    waiter: Option<Arc<Waiter>>,
    sock: Option<Transport>,
    reused: bool,
    pub(super) state: UpState,
    s_rd: bool,
    s_wr: bool,
    s_eof: bool,
    obuf: Vec<u8>,
    opos: usize,
    /// The rewritten request head, kept until a response byte arrives so a
    /// safe request can be sent again on another connection.
    head: Vec<u8>,
    body_sent: bool,
    req_left: Left,
    ibuf: Vec<u8>,
    istart: usize,
    iend: usize,
    resp: ResponseHead,
    resp_left: Option<Left>,
    /// De-chunk for an HTTP/1.0 client (which cannot read chunked).
    dechunk: bool,
    pub(super) status: u16,
    pub(super) bytes_out: u64,
    /// Request bytes written to the server (the stats' "bytes in").
    bytes_in: u64,
    retries_left: u32,
    avoid: Option<usize>,
    method: Method,
    client_version: Version,
    client_keep_alive: bool,
    lb_src: Option<IpAddr>,
    lb_uri: Vec<u8>,
    lb_hdr: Option<Vec<u8>>,
    /// First byte of the request; the head complete; a slot obtained; the
    /// connection ready; the first byte of the answer.
    pub(super) t0: Tick,
    t_start: Tick,
    t_queued: Option<Tick>,
    t_served: Option<Tick>,
    t_conn: Option<Tick>,
    t_resp: Option<Tick>,
    /// The request line, for the log.
    req_line: Vec<u8>,
    pub(super) deadline: Tick,
    resp_edits: Vec<(bool, usize)>,
    /// Whether the server connection may be kept after the answer.
    keep_server: bool,
    pub(super) term: &'static str,
}

fn hdr_name_eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

impl Upstream {
    /// Whether the whole request (head and body) was taken from the client.
    pub(super) fn request_done(&self) -> bool {
        self.req_left.done()
    }
}

impl Conn {
    /// Builds the request for the server from the parsed head (in the
    /// buffer), consumes the head, and asks the backend for a server.
    pub(super) fn start_proxy(
        &mut self,
        ctx: &mut Ctx,
        bi: usize,
        req_edits: Vec<(bool, usize)>,
        resp_edits: Vec<(bool, usize)>,
    ) {
        let be = Arc::clone(&self.fe.backends[bi]);
        let BackendKind::Servers(sr) = &be.kind else {
            return;
        };
        let buf = &self.rbuf[self.rstart..self.rend];
        let h = &self.head;
        // --- the request head for the server ---
        let mut out = Vec::with_capacity(h.head_len + 64);
        out.extend_from_slice(h.method_span.get(buf));
        out.push(b' ');
        let target = if matches!(h.target_form, crate::http1::TargetForm::Absolute) {
            h.path.get(buf)
        } else {
            h.target.get(buf)
        };
        out.extend_from_slice(if target.is_empty() { b"/" } else { target });
        out.extend_from_slice(b" HTTP/1.1\r\n");
        let fe = Arc::clone(&self.fe);
        let edit = |&(is_be, i): &(bool, usize)| {
            let r = if is_be {
                be.http_request.get(i)
            } else {
                fe.http_request.get(i)
            };
            r.and_then(|r| r.edit())
        };
        let dels = |name: &[u8]| {
            req_edits
                .iter()
                .any(|x| edit(x).is_some_and(|e| e.removes(name)))
        };
        let tr = &self.tr;
        let dst = move || tr.tcp().local_addr().ok();
        let sctx = crate::sample::Ctx {
            req: Some(crate::sample::Req { buf, head: h }),
            be: Some(&be.name),
            ..super::sample_ctx(tr, self.peer, &fe.name, &dst, &self.vars)
        };
        let mut has_host = false;
        let mut has_xff = false;
        let xff_name = sr
            .forwardfor
            .as_ref()
            .map(|f| f.header.clone())
            .unwrap_or_default();
        // Absolute-form: the target's authority is the host (RFC 9112
        // §3.2.2); the Host field gives way to it (written below).
        let absolute = matches!(h.target_form, crate::http1::TargetForm::Absolute);
        for f in forwardable(buf, &h.headers) {
            let name = f.name.get(buf);
            if hdr_name_eq(name, "content-length")
                || dels(name)
                || (absolute && hdr_name_eq(name, "host"))
            {
                continue;
            }
            has_host |= hdr_name_eq(name, "host");
            has_xff |= !xff_name.is_empty() && hdr_name_eq(name, &xff_name);
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(f.value.get(buf));
            out.extend_from_slice(b"\r\n");
        }
        if !has_host {
            if let Some(host) = h.host {
                out.extend_from_slice(b"Host: ");
                out.extend_from_slice(host.get(buf));
                out.extend_from_slice(b"\r\n");
            }
        }
        for e in req_edits.iter().filter_map(edit) {
            e.write_field(&sctx, &mut out);
        }
        if let Some(ff) = &sr.forwardfor {
            let ip = self.peer.ip();
            let skip = ff.except.is_some_and(|n| n.contains(ip)) || (ff.if_none && has_xff);
            if !skip {
                out.extend_from_slice(ff.header.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(ip.to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
        let req_left = match h.framing {
            BodyFraming::ContentLength(0) | BodyFraming::None | BodyFraming::UntilClose => {
                if matches!(h.framing, BodyFraming::ContentLength(0)) {
                    out.extend_from_slice(b"Content-Length: 0\r\n");
                }
                Left::Done
            }
            BodyFraming::ContentLength(n) => {
                out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes());
                Left::Len(n)
            }
            BodyFraming::Chunked => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                Left::Chunked(Box::default())
            }
        };
        let upgrade = h.upgrade.map(|u| u.get(buf).to_vec());
        if let Some(u) = &upgrade {
            out.extend_from_slice(b"Connection: upgrade\r\nUpgrade: ");
            out.extend_from_slice(u);
            out.extend_from_slice(b"\r\n");
        }
        let keep_server =
            !sr.server_close && sr.farm.reuse != HttpReuse::Never && upgrade.is_none();
        if !keep_server && upgrade.is_none() {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");

        // Keys for the balancer (owned: a queued stream may pick again).
        let lb_hdr = match &sr.farm.balance {
            crate::config::Balance::Hdr { name, .. } => h.header(buf, name).map(|v| v.to_vec()),
            _ => None,
        };
        let lb_uri = h.path.get(buf).to_vec();
        let now = ctx.now();
        let up = Upstream {
            be: Arc::clone(&be),
            farm: Arc::clone(&sr.farm),
            timeouts: sr.timeouts,
            server: None,
            waiter: None,
            sock: None,
            reused: false,
            state: UpState::Queued,
            s_rd: false,
            s_wr: false,
            s_eof: false,
            obuf: Vec::new(),
            opos: 0,
            head: out,
            body_sent: false,
            req_left,
            ibuf: Vec::new(),
            istart: 0,
            iend: 0,
            resp: ResponseHead::default(),
            resp_left: None,
            dechunk: false,
            status: 0,
            bytes_out: 0,
            bytes_in: 0,
            retries_left: sr.farm.retries,
            avoid: None,
            method: h.method,
            client_version: h.version,
            client_keep_alive: self.keep_alive,
            lb_src: Some(self.peer.ip()),
            lb_uri,
            lb_hdr,
            t0: self.req_start.unwrap_or(now),
            t_start: now,
            t_queued: None,
            t_served: None,
            req_line: buf
                .iter()
                .position(|&c| c == b'\r')
                .map(|i| buf[..i].to_vec())
                .unwrap_or_default(),
            t_conn: None,
            t_resp: None,
            deadline: now,
            resp_edits,
            keep_server,
            term: "--",
        };
        // The head is copied: consume it; the body (if any) follows.
        self.rstart += self.head.head_len.min(self.rend - self.rstart);
        self.next_input = None;
        self.input = In::Proxy;
        self.up = Some(Box::new(up));
        self.pick_server(ctx);
    }

    /// Asks the farm for a server and acts on the answer.
    fn pick_server(&mut self, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let me = match self.me {
            Some(m) => m,
            None => {
                self.up = Some(up);
                return;
            }
        };
        let input = LbInput {
            src: up.lb_src,
            uri: &up.lb_uri,
            hdr: up.lb_hdr.as_deref(),
        };
        let pick = up.farm.pick(&input, up.avoid, me, &ctx.handle());
        match pick {
            Pick::Server(s) => {
                self.up = Some(up);
                self.use_server(ctx, s);
            }
            Pick::Queued(w) => {
                up.state = UpState::Queued;
                up.waiter = Some(w);
                up.t_queued.get_or_insert(ctx.now());
                up.deadline = ticks::add(ctx.now(), up.timeouts.queue);
                self.up = Some(up);
            }
            Pick::NoServer(_why) => {
                up.term = "sC";
                self.up = Some(up);
                self.proxy_error(ctx, 503);
            }
        }
    }

    /// We hold a slot of `s`: reuse a connection to it or connect.
    fn use_server(&mut self, ctx: &mut Ctx, s: Arc<ServerRt>) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let now = ctx.now();
        up.t_served = Some(now);
        up.waiter = None;
        s.counters.sessions.fetch_add(1, Ordering::Relaxed);
        // 1. The connection this client already has to that server.
        let mut sock = None;
        if let Some((srv, mut st)) = self.attached.take() {
            if srv.uid == s.uid && alive(&mut st) {
                sock = Some((st, true, true));
            } else {
                self.detach_to_pool(ctx, srv, st);
            }
        }
        // 2. The thread's idle pool (not for a client's first request with
        //    `http-reuse safe`: a failure there could not be told apart).
        let may_share = match up.farm.reuse {
            HttpReuse::Never => false,
            HttpReuse::Safe => self.requests > 1,
            HttpReuse::Aggressive | HttpReuse::Always => true,
        };
        if sock.is_none() && may_share {
            if let Some(st) = self.w.take_idle(&s, ctx.now()) {
                sock = Some((st, true, false));
            }
        }
        up.server = Some(Arc::clone(&s));
        *self.sess.target.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Arc::from(up.be.name.as_str()), Arc::from(s.name.as_str())));
        match sock {
            Some((st, reused, registered)) => {
                if !registered {
                    if let Some(me) = self.me {
                        if ctx.register_fd(st.raw_fd(), me, true).is_err() {
                            drop(st);
                            self.up = Some(up);
                            self.connect_new(ctx);
                            return;
                        }
                    }
                }
                up.sock = Some(st);
                up.reused = reused;
                up.state = UpState::Connected;
                up.t_conn = Some(now);
                up.s_rd = true;
                up.s_wr = true;
                up.obuf.clear();
                up.obuf.extend_from_slice(&up.head);
                up.opos = 0;
                up.deadline = ticks::add(now, up.timeouts.server);
                self.up = Some(up);
            }
            None => {
                self.up = Some(up);
                self.connect_new(ctx);
            }
        }
    }

    /// Starts a non-blocking connect to the held server.
    fn connect_new(&mut self, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let Some(s) = up.server.clone() else {
            self.up = Some(up);
            return;
        };
        let now = ctx.now();
        let r = s
            .addr
            .ok_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable))
            .and_then(start_connect)
            .and_then(|st| match &s.tls {
                // TLS to the server: the handshake starts once connected;
                // the request written meanwhile waits in rustls' buffer.
                Some(t) => Transport::connect_tls(st, Arc::clone(&t.config), &t.sni),
                None => Ok(Transport::plain(st)),
            });
        match r {
            Ok(st) => {
                let registered = match self.me {
                    Some(me) => ctx.register_fd(st.raw_fd(), me, true),
                    None => Err(io::Error::other("no tasklet")),
                };
                if registered.is_err() {
                    self.up = Some(up);
                    self.connect_failed(ctx);
                    return;
                }
                up.sock = Some(st);
                up.reused = false;
                up.state = UpState::Connecting;
                up.s_rd = false;
                up.s_wr = false;
                up.deadline = ticks::add(now, up.timeouts.connect);
                up.obuf.clear();
                up.obuf.extend_from_slice(&up.head);
                up.opos = 0;
                self.up = Some(up);
            }
            Err(_) => {
                self.up = Some(up);
                self.connect_failed(ctx);
            }
        }
    }

    /// A connect failed or timed out: retry, redispatch, or 503.
    fn connect_failed(&mut self, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        self.drop_server_sock(ctx, &mut up);
        let farm = Arc::clone(&up.farm);
        if let Some(s) = &up.server {
            s.counters.conn_errors.fetch_add(1, Ordering::Relaxed);
        }
        if up.retries_left == 0 {
            if let Some(s) = up.server.take() {
                farm.release(&s);
            }
            up.term = "sC";
            self.up = Some(up);
            self.proxy_error(ctx, 503);
            return;
        }
        up.retries_left -= 1;
        if let Some(s) = &up.server {
            s.counters.retries.fetch_add(1, Ordering::Relaxed);
        }
        // `option redispatch`: the last retry goes to another server.
        if farm.redispatch && up.retries_left == 0 {
            if let Some(s) = up.server.take() {
                s.counters.redispatches.fetch_add(1, Ordering::Relaxed);
                up.avoid = Some(s.idx);
                farm.release(&s);
            }
            self.up = Some(up);
            self.pick_server(ctx);
            return;
        }
        self.up = Some(up);
        self.connect_new(ctx);
    }

    fn drop_server_sock(&mut self, ctx: &mut Ctx, up: &mut Upstream) {
        if let Some(mut st) = up.sock.take() {
            let _ = ctx.deregister_fd(st.raw_fd());
            let _ = st.shutdown();
        }
        up.s_rd = false;
        up.s_wr = false;
        up.s_eof = false;
        up.istart = 0;
        up.iend = 0;
    }

    /// An error answer for the client (before any response byte went out).
    fn proxy_error(&mut self, ctx: &mut Ctx, status: u16) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        if let Some(w) = up.waiter.take() {
            let farm = Arc::clone(&up.farm);
            farm.unqueue(&w);
            if let Some(s) = w.cancel() {
                farm.release(&s);
            }
        }
        self.drop_server_sock(ctx, &mut up);
        if let Some(s) = up.server.take() {
            up.farm.release(&s);
        }
        // The client's body may still be on its way: keep the connection
        // only if it was all read.
        let ka = self.keep_alive && up.req_left.done();
        let version = up.client_version;
        let head_req = up.method == Method::Head;
        self.resp_start = self.wbuf.len();
        self.error_response(status, ka, version, head_req, &[]);
        up.status = status;
        self.log_proxy(ctx, &up, (self.wbuf.len() - self.resp_start) as u64);
        if !up.req_left.done() {
            self.closing = true;
        }
        self.finish_proxy_input();
    }

    fn finish_proxy_input(&mut self) {
        *self.sess.target.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.input = In::Head;
        self.req_start = None;
        self.edits.clear();
    }

    /// Drives the exchange. Returns whether anything moved.
    pub(super) fn proxy_step(&mut self, ctx: &mut Ctx) -> bool {
        let Some(up) = self.up.as_mut() else {
            return false;
        };
        match up.state {
            UpState::Queued => {
                let Some(w) = up.waiter.clone() else {
                    return false;
                };
                match w.current() {
                    WaitState::Assigned(s) => {
                        up.waiter = None;
                        self.use_server(ctx, s);
                        true
                    }
                    WaitState::Redispatch => {
                        up.waiter = None;
                        self.pick_server(ctx);
                        true
                    }
                    WaitState::Waiting | WaitState::Cancelled => false,
                }
            }
            UpState::Connecting => {
                if !(up.s_wr || up.s_rd) {
                    return false;
                }
                // Events are per tasklet: this wake may be the client's.
                // An error pending means refused or reset; no error and no
                // peer yet means the connect is still under way.
                let state = up
                    .sock
                    .as_ref()
                    .map(|st| (st.tcp().take_error(), st.tcp().peer_addr().is_ok()));
                match state {
                    Some((Ok(None), true)) => {
                        up.state = UpState::Connected;
                        up.t_conn = Some(ctx.now());
                        up.s_wr = true;
                        up.s_rd = true;
                        let sr_t = up.timeouts.server;
                        up.deadline = ticks::add(ctx.now(), sr_t);
                        true
                    }
                    Some((Ok(None), false)) => {
                        up.s_wr = false;
                        up.s_rd = false;
                        false
                    }
                    _ => {
                        self.connect_failed(ctx);
                        true
                    }
                }
            }
            UpState::Connected | UpState::Tunnel => self.proxy_io(ctx),
        }
    }

    /// Moves bytes both ways once; handles completion and failures.
    fn proxy_io(&mut self, ctx: &mut Ctx) -> bool {
        let Some(mut up) = self.up.take() else {
            return false;
        };
        let bufsize = self.w.bufsize;
        let mut moved = false;
        let tunnel = up.state == UpState::Tunnel;

        // 1. Client body (or tunnel bytes) into the server-side output.
        if up.obuf.len() - up.opos < bufsize {
            let avail = &self.rbuf[self.rstart..self.rend];
            if tunnel {
                if !avail.is_empty() {
                    up.obuf.extend_from_slice(avail);
                    self.rstart = self.rend;
                    moved = true;
                }
            } else {
                match &mut up.req_left {
                    Left::Done | Left::UntilClose => {}
                    Left::Len(n) => {
                        let k = (*n).min(avail.len() as u64) as usize;
                        if k > 0 {
                            up.obuf.extend_from_slice(&avail[..k]);
                            self.rstart += k;
                            *n -= k as u64;
                            up.body_sent = true;
                            moved = true;
                        }
                        if *n == 0 {
                            up.req_left = Left::Done;
                        }
                    }
                    Left::Chunked(dec) => match dec.decode(avail) {
                        Ok(d) => {
                            if d.consumed > 0 {
                                up.obuf.extend_from_slice(&avail[..d.consumed]);
                                self.rstart += d.consumed;
                                up.body_sent = true;
                                moved = true;
                            }
                            if d.done {
                                up.req_left = Left::Done;
                            }
                        }
                        Err(_) => {
                            // A broken request body: nothing sane to send
                            // on. Before any answer the client gets a 400
                            // (and a close), as for a refused head.
                            up.term = "CR";
                            let answered = up.resp_left.is_some();
                            self.up = Some(up);
                            if answered {
                                self.abort_proxy(ctx);
                            } else {
                                self.proxy_error(ctx, 400);
                            }
                            return true;
                        }
                    },
                }
            }
        }

        // 2. Server-side output to the server (and TLS records pending).
        if up.s_wr {
            if let Some(st) = up.sock.as_mut() {
                if st.has_pending_output() {
                    match st.flush_pending() {
                        Ok(true) => moved = true,
                        Ok(false) => up.s_wr = false,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => up.s_wr = false,
                        Err(_) => {
                            self.up = Some(up);
                            return self.server_broke(ctx);
                        }
                    }
                }
            }
        }
        if up.opos < up.obuf.len() && up.s_wr {
            if let Some(st) = up.sock.as_mut() {
                match st.write(&up.obuf[up.opos..]) {
                    Ok(n) => {
                        let want = up.obuf.len() - up.opos;
                        up.opos += n;
                        up.bytes_in += n as u64;
                        moved |= n > 0;
                        if n < want {
                            up.s_wr = false;
                        }
                        if up.opos == up.obuf.len() {
                            up.obuf.clear();
                            up.opos = 0;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => up.s_wr = false,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        self.up = Some(up);
                        return self.server_broke(ctx);
                    }
                }
            }
        }

        // 3. Server input.
        if up.s_rd && !up.s_eof {
            if up.ibuf.is_empty() {
                up.ibuf = self.w.get_buf();
            }
            if up.istart == up.iend {
                up.istart = 0;
                up.iend = 0;
            } else if up.iend == up.ibuf.len() && up.istart > 0 {
                up.ibuf.copy_within(up.istart..up.iend, 0);
                up.iend -= up.istart;
                up.istart = 0;
            }
            if up.iend < up.ibuf.len() {
                if let Some(st) = up.sock.as_mut() {
                    let room = up.ibuf.len() - up.iend;
                    match st.read(&mut up.ibuf[up.iend..]) {
                        Ok(0) => up.s_eof = true,
                        Ok(n) => {
                            up.iend += n;
                            moved = true;
                            if n < room {
                                up.s_rd = false;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => up.s_rd = false,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => up.s_eof = true,
                    }
                }
            }
        }

        if tunnel {
            if up.istart < up.iend && self.pending_out() < bufsize {
                self.wbuf.extend_from_slice(&up.ibuf[up.istart..up.iend]);
                up.bytes_out += (up.iend - up.istart) as u64;
                up.istart = up.iend;
                moved = true;
            }
            if moved {
                let t = up.timeouts.tunnel;
                up.deadline = ticks::add(ctx.now(), t);
            }
            let server_gone = up.s_eof && up.istart == up.iend;
            let client_gone = self.eof && self.rstart == self.rend && up.opos == up.obuf.len();
            self.up = Some(up);
            if server_gone || client_gone {
                self.end_tunnel(ctx);
                return true;
            }
            return moved;
        }

        // 4. Response head.
        if up.resp_left.is_none() {
            if up.istart < up.iend {
                let limits = self.w.limits;
                let r = parse_response_into(
                    &up.ibuf[up.istart..up.iend],
                    &limits,
                    up.method,
                    &mut up.resp,
                );
                match r {
                    Ok(PStatus::Partial) => {}
                    Ok(PStatus::Complete(())) => {
                        if up.t_resp.is_none() {
                            up.t_resp = Some(ctx.now());
                        }
                        if up.resp.is_interim() {
                            // 1xx: forward as is, then read the final head.
                            let n = up.resp.head_len;
                            self.wbuf
                                .extend_from_slice(&up.ibuf[up.istart..up.istart + n]);
                            up.istart += n;
                            moved = true;
                            self.up = Some(up);
                            return moved;
                        }
                        self.up = Some(up);
                        self.forward_response_head(ctx);
                        return true;
                    }
                    Err(_) => {
                        if let Some(s) = &up.server {
                            s.counters.resp_errors.fetch_add(1, Ordering::Relaxed);
                        }
                        up.term = "SH";
                        up.keep_server = false;
                        self.up = Some(up);
                        self.proxy_error(ctx, 502);
                        return true;
                    }
                }
            }
            if up.s_eof {
                self.up = Some(up);
                return self.server_broke(ctx);
            }
            self.up = Some(up);
            return moved;
        }

        // 5. Response body to the client.
        if self.pending_out() < bufsize && up.istart < up.iend {
            let avail = &up.ibuf[up.istart..up.iend];
            let mut fail = false;
            match up.resp_left.as_mut() {
                Some(Left::Len(n)) => {
                    let k = (*n).min(avail.len() as u64) as usize;
                    self.wbuf.extend_from_slice(&avail[..k]);
                    up.istart += k;
                    up.bytes_out += k as u64;
                    *n -= k as u64;
                    moved |= k > 0;
                    if *n == 0 {
                        up.resp_left = Some(Left::Done);
                    }
                }
                Some(Left::Chunked(dec)) => match dec.decode(avail) {
                    Ok(d) => {
                        if up.dechunk {
                            self.wbuf.extend_from_slice(&avail[d.data.clone()]);
                            up.bytes_out += d.data.len() as u64;
                        } else {
                            self.wbuf.extend_from_slice(&avail[..d.consumed]);
                            up.bytes_out += d.consumed as u64;
                        }
                        up.istart += d.consumed;
                        moved |= d.consumed > 0;
                        if d.done {
                            up.resp_left = Some(Left::Done);
                        }
                    }
                    Err(_) => fail = true,
                },
                Some(Left::UntilClose) => {
                    self.wbuf.extend_from_slice(avail);
                    up.bytes_out += avail.len() as u64;
                    up.istart = up.iend;
                    moved = true;
                }
                Some(Left::Done) | None => {
                    // Bytes after the end of the answer: the server is not
                    // following HTTP; do not reuse that connection.
                    up.keep_server = false;
                    up.istart = up.iend;
                }
            }
            if fail {
                up.term = "SD";
                self.up = Some(up);
                self.abort_proxy(ctx);
                return true;
            }
        }
        if moved {
            let t = up.timeouts.server;
            up.deadline = ticks::add(ctx.now(), t);
        }
        let resp_done = matches!(up.resp_left, Some(Left::Done));
        let until_close_done =
            matches!(up.resp_left, Some(Left::UntilClose)) && up.s_eof && up.istart == up.iend;
        if resp_done || until_close_done {
            if until_close_done {
                up.keep_server = false;
            }
            self.up = Some(up);
            self.finish_exchange(ctx);
            return true;
        }
        if up.s_eof && up.istart == up.iend {
            // Cut in the middle of the body.
            up.term = "SD";
            self.up = Some(up);
            self.abort_proxy(ctx);
            return true;
        }
        self.up = Some(up);
        moved
    }

    /// The server closed or reset before a complete answer head.
    fn server_broke(&mut self, ctx: &mut Ctx) -> bool {
        let Some(mut up) = self.up.take() else {
            return false;
        };
        let nothing_back = up.resp_left.is_none() && up.iend == 0 && up.t_resp.is_none();
        let replayable = up.method.is_idempotent() && !up.body_sent;
        if up.reused && nothing_back && replayable {
            // A kept connection the server had closed: send again on a
            // fresh one, without counting a retry.
            self.drop_server_sock(ctx, &mut up);
            self.up = Some(up);
            self.connect_new(ctx);
            return true;
        }
        if let Some(s) = &up.server {
            s.counters.resp_errors.fetch_add(1, Ordering::Relaxed);
        }
        up.keep_server = false;
        up.term = "SH";
        self.up = Some(up);
        self.proxy_error(ctx, 502);
        true
    }

    /// Writes the client's response head from the server's.
    fn forward_response_head(&mut self, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let be = Arc::clone(&up.be);
        let fe = Arc::clone(&self.fe);
        let n = up.resp.head_len;
        let buf = &up.ibuf[up.istart..up.istart + n];
        let r = &up.resp;
        up.status = r.status;
        self.resp_start = self.wbuf.len();
        let tunnel = r.tunnel && r.status == 101;
        let mut ka = up.client_keep_alive;
        let out = &mut self.wbuf;
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(r.status.to_string().as_bytes());
        out.push(b' ');
        out.extend_from_slice(r.reason.get(buf));
        out.extend_from_slice(b"\r\n");
        let rule = |&(is_be, i): &(bool, usize)| {
            if is_be {
                be.http_response.get(i)
            } else {
                fe.http_response.get(i)
            }
        };
        let edit = |x: &(bool, usize)| rule(x).and_then(|r| r.edit());
        self.vars.get_mut().begin_response();
        let dels = |name: &[u8]| {
            up.resp_edits
                .iter()
                .any(|x| edit(x).is_some_and(|e| e.removes(name)))
        };
        let tr = &self.tr;
        let dst = move || tr.tcp().local_addr().ok();
        let sctx = crate::sample::Ctx {
            res: Some(crate::sample::Res::H1 { buf, head: r }),
            be: Some(&be.name),
            srv: up.server.as_ref().map(|s| s.name.as_str()),
            ..super::sample_ctx(tr, self.peer, &fe.name, &dst, &self.vars)
        };
        for f in forwardable(buf, &r.headers) {
            let name = f.name.get(buf);
            if hdr_name_eq(name, "content-length") || dels(name) {
                continue;
            }
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(f.value.get(buf));
            out.extend_from_slice(b"\r\n");
        }
        for r in up.resp_edits.iter().filter_map(rule) {
            r.apply(&sctx, out);
        }
        let left = if tunnel {
            let upg = r.header(buf, "upgrade").map(|v| v.to_vec());
            out.extend_from_slice(b"Connection: upgrade\r\n");
            if let Some(u) = upg {
                out.extend_from_slice(b"Upgrade: ");
                out.extend_from_slice(&u);
                out.extend_from_slice(b"\r\n");
            }
            Left::Done
        } else {
            match r.framing {
                BodyFraming::None => {
                    if up.method == Method::Head || r.status == 304 {
                        if let Some(cl) = r.header(buf, "content-length") {
                            out.extend_from_slice(b"Content-Length: ");
                            out.extend_from_slice(cl);
                            out.extend_from_slice(b"\r\n");
                        }
                    }
                    Left::Done
                }
                BodyFraming::ContentLength(n) => {
                    out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes());
                    if n == 0 {
                        Left::Done
                    } else {
                        Left::Len(n)
                    }
                }
                BodyFraming::Chunked => {
                    if up.client_version == Version::Http10 {
                        // HTTP/1.0 cannot read chunked: send the data and
                        // mark the end by closing.
                        up.dechunk = true;
                        ka = false;
                    } else {
                        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                    }
                    Left::Chunked(Box::default())
                }
                BodyFraming::UntilClose => {
                    ka = false;
                    Left::UntilClose
                }
            }
        };
        if !r.keep_alive {
            up.keep_server = false;
        }
        if tunnel {
            // Nothing after a tunnel on either connection.
        } else if !ka {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if up.client_version == Version::Http10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        up.bytes_out += (self.wbuf.len() - self.resp_start) as u64;
        up.istart += n;
        up.head.clear(); // no replay once an answer arrived
        up.client_keep_alive = ka;
        self.keep_alive = ka;
        if tunnel {
            up.state = UpState::Tunnel;
            up.resp_left = Some(Left::Done);
            let t = up.timeouts.tunnel;
            up.deadline = ticks::add(ctx.now(), t);
            self.up = Some(up);
            return;
        }
        up.resp_left = Some(left);
        self.up = Some(up);
        if matches!(
            self.up.as_ref().and_then(|u| u.resp_left.as_ref()),
            Some(Left::Done)
        ) {
            self.finish_exchange(ctx);
        }
    }

    /// The answer is complete: keep or close the server connection, give
    /// the slot back (or hand it over), log, and go on with the client.
    fn finish_exchange(&mut self, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        // A request body still on its way is abandoned with the server
        // connection; the client connection cannot be reused either.
        let req_done = up.req_left.done();
        if !req_done {
            up.keep_server = false;
            self.closing = true;
        }
        if !up.client_keep_alive {
            self.closing = true;
        }
        let keep = up.keep_server
            && up.opos == up.obuf.len()
            && up.istart == up.iend
            && !up.s_eof
            && !up.sock.as_ref().is_some_and(|s| s.has_pending_output());
        let s = up.server.take();
        if let (true, Some(st), Some(srv)) = (keep, up.sock.take(), s.as_ref()) {
            // Stays attached to this client (still registered).
            if let Some((old_srv, old)) = self.attached.take() {
                self.detach_to_pool(ctx, old_srv, old);
            }
            self.attached = Some((Arc::clone(srv), st));
        } else {
            self.drop_server_sock(ctx, &mut up);
        }
        if !up.ibuf.is_empty() {
            self.w.put_buf(std::mem::take(&mut up.ibuf));
        }
        if let Some(srv) = &s {
            srv.counters
                .bytes_out
                .fetch_add(up.bytes_out, Ordering::Relaxed);
            srv.counters
                .bytes_in
                .fetch_add(up.bytes_in, Ordering::Relaxed);
            up.farm.release(srv);
        }
        up.server = s;
        self.log_proxy(ctx, &up, up.bytes_out);
        up.server = None;
        self.finish_proxy_input();
        self.idle_since = ctx.now();
    }

    /// A failure after the answer started, or a broken request: cut both.
    fn abort_proxy(&mut self, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        self.drop_server_sock(ctx, &mut up);
        if let Some(w) = up.waiter.take() {
            let farm = Arc::clone(&up.farm);
            farm.unqueue(&w);
            if let Some(s) = w.cancel() {
                farm.release(&s);
            }
        }
        if let Some(s) = up.server.take() {
            up.farm.release(&s);
            up.server = Some(s);
        }
        if !up.ibuf.is_empty() {
            self.w.put_buf(std::mem::take(&mut up.ibuf));
        }
        let bytes = up.bytes_out;
        self.log_proxy(ctx, &up, bytes);
        self.closing = true;
        self.finish_proxy_input();
    }

    fn end_tunnel(&mut self, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        self.drop_server_sock(ctx, &mut up);
        if let Some(s) = up.server.take() {
            up.farm.release(&s);
            up.server = Some(s);
        }
        let bytes = up.bytes_out;
        self.log_proxy(ctx, &up, bytes);
        self.closing = true;
        self.finish_proxy_input();
    }

    /// A deadline of the server side passed.
    pub(super) fn proxy_timeout(&mut self, ctx: &mut Ctx) {
        let Some(state) = self.up.as_ref().map(|u| u.state) else {
            return;
        };
        match state {
            UpState::Queued => {
                if let Some(up) = self.up.as_mut() {
                    up.term = "sQ";
                    if let Some(s) = up.server.as_ref() {
                        s.counters.queue_timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                    up.farm
                        .counters
                        .queue_timeouts
                        .fetch_add(1, Ordering::Relaxed);
                }
                self.proxy_error(ctx, 503);
            }
            UpState::Connecting => self.connect_failed(ctx),
            UpState::Connected => {
                let started = self.up.as_ref().is_some_and(|u| u.resp_left.is_some());
                if let Some(up) = self.up.as_mut() {
                    up.keep_server = false;
                    up.term = if started { "sD" } else { "sH" };
                }
                if started {
                    self.abort_proxy(ctx);
                } else {
                    self.proxy_error(ctx, 504);
                }
            }
            UpState::Tunnel => {
                if let Some(up) = self.up.as_mut() {
                    up.term = "sD";
                }
                self.end_tunnel(ctx);
            }
        }
    }

    /// The client went away in the middle of an exchange.
    pub(super) fn proxy_client_gone(&mut self, ctx: &mut Ctx) {
        if let Some(up) = self.up.as_mut() {
            up.term = "CD";
            up.keep_server = false;
        }
        self.abort_proxy(ctx);
    }

    /// Marks the server socket ready after an event (events are per
    /// tasklet, so both sides are tried).
    pub(super) fn proxy_events(&mut self, readable: bool, writable: bool) {
        if let Some(up) = self.up.as_mut() {
            up.s_rd |= readable;
            up.s_wr |= writable;
        }
    }

    /// An attached idle server connection goes to the thread's pool.
    pub(super) fn detach_to_pool(&mut self, ctx: &mut Ctx, srv: Arc<ServerRt>, mut st: Transport) {
        let _ = ctx.deregister_fd(st.raw_fd());
        if alive(&mut st) {
            self.w.put_idle(&srv, st, ctx.now());
        }
    }

    fn log_proxy(&mut self, ctx: &mut Ctx, up: &Upstream, bytes: u64) {
        crate::proxy::count_request(&self.fe, Some(&up.be), up.status, bytes);
        if !self.w.logging(&self.fe) {
            return;
        }
        let now = ctx.now();
        let d = |a: Tick, b: Tick| b.wrapping_sub(a) as i32 as i64;
        let tq = d(up.t0, up.t_start);
        let tw = match up.t_served {
            Some(sv) => d(up.t_start, sv),
            None => -1,
        };
        let tc = match (up.t_served, up.t_conn) {
            (Some(sv), Some(c)) => d(sv, c),
            _ => -1,
        };
        let tr = match (up.t_conn, up.t_resp) {
            (Some(c), Some(r)) => d(c, r),
            _ => -1,
        };
        let tt = d(up.t0, now);
        let server = up
            .server
            .as_ref()
            .map_or("<NOSRV>".to_string(), |s| s.name.clone());
        let entry = crate::log::Entry {
            client: self.peer,
            accept: self.accept_time,
            frontend: &self.fe.name,
            backend: &up.be.name,
            server: &server,
            tq,
            tw,
            tc,
            tr,
            tt,
            status: up.status,
            bytes,
            term: up.term,
            actconn: self.w.actconn(),
            feconn: self.fe.cur_conns(),
            request_line: &up.req_line,
        };
        self.w.log_access(crate::log::format(&entry));
    }
}

/// Whether an idle connection is still open: nothing to read (a closed one
/// reads EOF, a confused one has bytes we never asked for).
pub(crate) fn alive(s: &mut Transport) -> bool {
    let mut b = [0u8; 1];
    if s.is_tls() {
        // TLS: records may come unasked (session tickets): read through
        // rustls; no plaintext and no close means alive.
        return matches!(s.read(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
    }
    matches!(s.tcp().peek(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// A non-blocking connect.
fn start_connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_nonblocking(true)?;
    s.set_tcp_nodelay(true)?;
    match s.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(s.into())
}
