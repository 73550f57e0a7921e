//! The proxied exchange: a stream whose answer comes from a backend's
//! server (queue wait, connect, retries, the request and response moving
//! both ways, the server connection kept or pooled). Its logic runs when
//! the client connection's tasklet drives the stream; the server socket's
//! I/O runs in the server side's own tasklet.
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
//! The server socket is registered with the server side's own tasklet
//! (`h1_srv`, see [`crate::mux::h1::server`]): it completes connects, writes
//! the request and reads the answer, and wakes the client connection's
//! tasklet only when the client side has work. A server-side event never
//! runs client-side code, and a client-side event never tries the server
//! socket unless it saw an edge.
//!
//! After the response, a server connection that may be kept is idle: in
//! the idle pool, in the client's own place there, still registered (so
//! the next request of the same client to the same server costs no
//! `epoll_ctl`) unless another request took it meanwhile, as `http-reuse`
//! allows ([`crate::backend::pool`]); one private to its client stays
//! attached to it.
//!
//! Failures: a connect that fails or times out is retried up to `retries`
//! times (the last one on another server with `option redispatch`), then
//! 503. A reused connection found closed when the request is written, or
//! closed before any byte of answer, is replaced silently if the request is
//! safe to replay (idempotent method, no body byte sent). An invalid answer
//! is a 502, no answer within `timeout server` a 504. Past the response
//! head, a failure can only cut the client connection.

use std::io;
use std::net::{IpAddr, SocketAddr};

use crate::transport::Transport;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use sched::{ticks, Ctx, TaskletId, Tick};

use super::{Stream, Wait, H1};
use crate::backend::check::{observe, Seen};
use crate::backend::error::ExchangeError;
use crate::backend::{alive, Farm, LbInput, Pick, ServerRt, WaitState, Waiter};
use crate::compress;
use crate::config::{HttpReuse, RetryOn};
use crate::http1::{
    eq_nocase, forwardable, parse_response_into, BodyFraming, ChunkedDecoder, ChunkedRecoder,
    Method, ResponseHead, Status as PStatus, Version,
};
use crate::l4rules::Verdict;
use crate::mux::h1::client::{dst_of, In, LogFacts};
use crate::mux::h1::server::{write_request_head, ReqTail, ServerSide};
use crate::proxy::{BackendKind, BackendRt, BeTimeouts};
use crate::stream::msg::{BodySize, Form, ReqHead};

/// What is left of a body to move.
pub(super) enum Left {
    Done,
    Len(u64),
    Chunked(Box<ChunkedDecoder>),
    /// A chunked request body, re-emitted with canonical chunk sizes.
    Recode(Box<ChunkedRecoder>),
    /// A request body compressed toward the server (`compression
    /// direction request`; the logic is in [`compress::RequestBody`]).
    Compress(Box<compress::RequestBody>),
    UntilClose,
}

impl Left {
    fn done(&self) -> bool {
        matches!(self, Left::Done)
    }

    /// A request body being compressed whose client paused since bytes
    /// were fed: what it sent so far is owed a flush.
    fn compress_unflushed(&self) -> bool {
        matches!(self, Left::Compress(b) if b.unflushed())
    }

    /// A request body re-framed on its way (recoded or compressed).
    fn reframe(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(usize, bool), ()> {
        match self {
            Left::Recode(r) => r.recode(input, out).map_err(drop),
            Left::Compress(b) => b.feed(input, out).map_err(drop),
            _ => Ok((0, false)),
        }
    }
}

/// An idle server connection private to its client (`http-reuse never`,
/// `dispatch`, a PROXY header, a server without a port), kept for the
/// client's next request, still registered with the server side's tasklet.
pub(super) struct Attached {
    srv: Arc<ServerRt>,
    st: Transport,
}

/// Whether another client's request may take an idle connection to `s`:
/// not one that began with a PROXY header naming its client (HAProxy keys
/// such connections by source), nor one of a server without a port or an
/// address (it went to its client's destination), nor the backend's own target
/// (`dispatch`, `option transparent`: HAProxy keeps a connection to no
/// server private to its client).
fn shareable(s: &ServerRt) -> bool {
    s.opts.send_proxy == 0 && !s.follows_client_dst() && !s.backend_target && !dynamic_sni(s)
}

/// Whether a TLS connection to `s` sends an SNI that depends on the
/// exchange (`sni req.hdr(host)`): such a connection is kept for
/// requests that would send the same name (HAProxy keys connections by
/// their SNI), so not shared with other clients.
fn dynamic_sni(s: &ServerRt) -> bool {
    s.tls.as_ref().is_some_and(|t| t.sni_expr.is_some())
}

/// The name a new TLS connection to `s` sends when its `sni` depends on
/// the exchange, evaluated on the request as it goes to the server (after
/// the rules); `None` when `sni` is constant or gives nothing (then the
/// server's own name goes, as [`crate::backend::ServerTls::sni`] says).
fn server_sni(c: &H1, s: &ServerRt, up: &Upstream) -> Option<String> {
    let e = s.tls.as_ref()?.sni_expr.as_ref()?;
    let mut head = crate::http1::RequestHead::default();
    let parsed = matches!(
        crate::http1::parse_request_into(&up.head, &c.w.limits, &mut head),
        Ok(httparse::Status::Complete(()))
    );
    let tr = &c.tr;
    let dst = dst_of(tr, c.dst.as_deref().copied());
    let ctx = crate::sample::Ctx {
        req: parsed.then_some(crate::sample::Req {
            buf: &up.head,
            head: &head,
            body: b"",
        }),
        be: Some(&up.be.name),
        srv: Some(&s.name),
        ..super::sample_ctx(tr, c.sess.peer, &c.fe.name, &dst, c.vars.cell(), &c.stk)
    };
    let name = String::from_utf8(e.eval_text(&ctx)?).ok()?;
    (!name.is_empty()).then_some(name)
}

/// What a new connection to `s` would begin with for this exchange: its
/// PROXY header (`send-proxy[-v2]`, else empty) and its SNI when `sni`
/// depends on the exchange.
fn conn_params(c: &H1, s: &ServerRt, up: &Upstream) -> (Vec<u8>, Option<String>) {
    let pp = if s.opts.send_proxy > 0 {
        pp_header(c, s)
    } else {
        Vec::new()
    };
    (pp, server_sni(c, s, up))
}

/// What keys a connection for reuse by this client's next request (see
/// `pp_sent`): its PROXY header and the SNI it sent.
fn conn_key(pp: &[u8], sni: Option<&str>) -> Vec<u8> {
    let mut k = pp.to_vec();
    if let Some(n) = sni {
        k.push(0);
        k.extend_from_slice(n.as_bytes());
    }
    k
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
    reused: bool,
    pub(super) state: UpState,
    /// The rewritten request head, kept until a response byte arrives so a
    /// safe request can be sent again on another connection.
    head: Vec<u8>,
    body_sent: bool,
    req_left: Left,
    resp: ResponseHead,
    resp_left: Option<Left>,
    /// De-chunk for an HTTP/1.0 client (which cannot read chunked).
    dechunk: bool,
    /// The client asked HEAD but a rule sent the server another method:
    /// the answer's body is read from the server and not forwarded (the
    /// client expects none; forwarding it would desynchronise it).
    skip_body: bool,
    pub(super) status: u16,
    pub(super) bytes_out: u64,
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
    /// Whether the server connection may be kept after the answer.
    keep_server: bool,
    /// `compression`: the policy and the coding the request chose.
    comp_choice: Option<(Arc<compress::Policy>, Option<compress::Coding>)>,
    /// The answer's body is being compressed.
    comp: Option<Box<compress::BodyCompressor>>,
    /// An answer a `cache-store` rule is storing (its body joins it as it
    /// passes; stored when complete).
    store: Option<Box<crate::httpcache::Pending>>,
    /// The server paused mid-body after bytes were compressed: unless it
    /// sends more by this date, the encoder flushes (see `proxy_io`).
    pub(super) flush_at: Option<Tick>,
    /// The same for a request body compressed toward the server: the
    /// client paused (see `proxy_io`).
    pub(super) req_flush_at: Option<Tick>,
    pub(super) term: &'static str,
    /// The client accepts trailers (`TE: trailers`): said to HTTP/2
    /// servers, which may require it (gRPC).
    te_trailers: bool,
    /// Until when an `http-response wait-for-body` rule waits for the
    /// response's body (set when the wait starts).
    resp_wait: Option<Tick>,
    /// `option abortonclose` on the backend.
    abort_on_close: bool,
    /// A layer-7 retry (`retry-on` other than `conn-failure`) may send the
    /// request again: the whole request is in `head`, nothing of the
    /// answer went to the client, no `http-request disable-l7-retry`.
    l7: bool,
    /// A connect refused at once is retried at this date (HAProxy's
    /// turn-around: `timeout connect`, at most 1 s, later).
    retry_at: Option<Tick>,
    /// A websocket upgrade (RFC 6455): the server's 101 must carry
    /// `Sec-WebSocket-Accept` (else 502, as HAProxy), equal to this value
    /// when ebb made the key up (an HTTP/2 extended CONNECT).
    ws_accept: Option<Option<Vec<u8>>>,
    /// An HTTP/2 client's `:scheme` (http or https) for an HTTP/2 server:
    /// the head written is in origin form.
    scheme: Option<&'static [u8]>,
    /// `http-send-name-header`: where in `head` the field naming the
    /// server goes, and the length of the one there now.
    name_at: Option<(usize, usize)>,
    /// The log line went out with the response head (`option logasap`).
    logged: bool,
}

/// How long a compressed answer's server may pause (its read drained)
/// before what was compressed is flushed to the client, in ticks
/// (milliseconds).
const FLUSH_DELAY: Tick = 1;

/// An exchange's buffers, kept per thread between exchanges so that a
/// proxied request reuses the previous one's allocations: the request
/// head for the server, the request line for the log, the balancer's URI
/// key and the parsed response head. Holds no reference to any backend.
#[derive(Default)]
struct UpBufs {
    head: Vec<u8>,
    req_line: Vec<u8>,
    lb_uri: Vec<u8>,
    resp: ResponseHead,
}

thread_local! {
    static SPARE_BUFS: std::cell::RefCell<UpBufs> = std::cell::RefCell::default();
}

impl UpBufs {
    /// This thread's spare buffers, emptied (fresh ones if none).
    fn take() -> UpBufs {
        SPARE_BUFS
            .with(|s| std::mem::take(&mut *s.borrow_mut()))
            .emptied()
    }

    /// The buffers of an ended exchange's server side, emptied.
    fn from_spent(u: &mut Upstream) -> UpBufs {
        UpBufs {
            head: std::mem::take(&mut u.head),
            req_line: std::mem::take(&mut u.req_line),
            lb_uri: std::mem::take(&mut u.lb_uri),
            resp: std::mem::take(&mut u.resp),
        }
        .emptied()
    }

    fn emptied(mut self) -> UpBufs {
        let b = &mut self;
        b.head.clear();
        b.req_line.clear();
        b.lb_uri.clear();
        b.resp = ResponseHead {
            headers: std::mem::take(&mut b.resp.headers),
            ..ResponseHead::default()
        };
        b.resp.headers.clear();
        self
    }
}

/// An ended exchange's server side, kept for the client's next proxied
/// request (`Stream::up_spare`): what ties it to a server, a queue or a
/// compressor goes now; its buffers stay for the next one to take.
fn spent(mut up: Box<Upstream>) -> Box<Upstream> {
    up.server = None;
    up.waiter = None;
    up.comp_choice = None;
    up.comp = None;
    up.store = None;
    up.lb_hdr = None;
    up.ws_accept = None;
    up
}

impl Drop for Upstream {
    /// Gives the exchange's buffers back to the thread (the larger ones:
    /// a head that grew past 64 KiB is let go).
    fn drop(&mut self) {
        // (A spare whose buffers the next exchange took has none to give.)
        if self.head.capacity() > 64 * 1024 || self.head.capacity() == 0 {
            return;
        }
        let b = UpBufs {
            head: std::mem::take(&mut self.head),
            req_line: std::mem::take(&mut self.req_line),
            lb_uri: std::mem::take(&mut self.lb_uri),
            resp: std::mem::take(&mut self.resp),
        };
        let _ = SPARE_BUFS.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                *s = b;
            }
        });
    }
}

/// Adds body bytes to an answer being stored; drops it once too big.
fn keep_stored(store: &mut Option<Box<crate::httpcache::Pending>>, data: &[u8]) {
    if let Some(p) = store.as_mut() {
        if !p.push(data) {
            *store = None;
        }
    }
}

fn hdr_name_eq(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

impl Upstream {
    /// `http-send-name-header`: the head names `s`, the server it goes to
    /// now (a retry or a redispatch renames it); no field for the
    /// backend's own target (`dispatch`, `option transparent`), which is
    /// no server, as HAProxy's.
    fn name_server(&mut self, s: &ServerRt) {
        let Some((at, len)) = self.name_at else {
            return;
        };
        let BackendKind::Servers(sr) = &self.be.kind else {
            return;
        };
        let (Some(name), true) = (&sr.send_name, at + len <= self.head.len()) else {
            return;
        };
        let mut field = Vec::new();
        if !s.backend_target {
            field.extend_from_slice(name.as_bytes());
            field.extend_from_slice(b": ");
            field.extend_from_slice(s.name.as_bytes());
            field.extend_from_slice(b"\r\n");
        }
        self.name_at = Some((at, field.len()));
        self.head.splice(at..at + len, field);
    }

    /// Whether the whole request (head and body) was taken from the client.
    pub(super) fn request_done(&self) -> bool {
        self.req_left.done()
    }
}

impl Stream {
    /// Builds the request for the server from the parsed head (in the
    /// buffer), consumes the head, and asks the backend for a server.
    pub(super) fn start_proxy(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        bi: usize,
        edited: Option<Box<crate::rewrite::Edited>>,
    ) {
        let be = Arc::clone(&c.fe.backends[bi]);
        let BackendKind::Servers(sr) = &be.kind else {
            return;
        };
        // The request as the rules left it; the log keeps the line as
        // received (HAProxy's %r).
        let received = &c.rbuf[c.rstart..c.rend];
        let (buf, h) = match &edited {
            Some(e) => (&e.buf[..], &e.head),
            None => (received, &c.head),
        };
        // --- the request head for the server ---
        let tr = &c.tr;
        let dst = dst_of(tr, c.dst.as_deref().copied());
        let sctx = crate::sample::Ctx {
            req: Some(crate::sample::Req {
                buf,
                head: h,
                body: b"",
            }),
            be: Some(&be.name),
            ..super::sample_ctx(tr, c.sess.peer, &c.fe.name, &dst, c.vars.cell(), &c.stk)
        };
        // Unique id, persistence cookie, `capture cookie` (crate::rewrite).
        let more = crate::rewrite::before_server(&c.fe, &be, &sctx, &c.w.limits);
        let (buf, h) = more.as_ref().map_or((buf, h), |e| (&e.buf[..], &e.head));
        let sctx = crate::sample::Ctx {
            req: Some(crate::sample::Req {
                buf,
                head: h,
                body: b"",
            }),
            ..sctx
        };
        let farm = &sr.farm;
        // `use-server` comes before persistence (cookie, stick match).
        let us = sr.use_server(&be.matcher, &sctx);
        if let Some(mut v) = c.vars.try_borrow_mut() {
            v.info.use_srv = us;
        }
        // `option persist` or `force-persist`: a stored server that is
        // down still takes the request.
        let force = sr.force_persist(&be.matcher, &sctx);
        let persist = (sr.persist || force).then_some(force);
        c.stk
            .stick_request(&be.stick, &be.matcher, &sctx, &farm.servers, persist);
        let comp_choice = c.fe.comp.get(bi).cloned().flatten().map(|p| {
            let k = compress::choose_h1(&p, buf, h);
            (p, k)
        });
        // `compression offload`: the server is not asked to compress.
        let offload = comp_choice.as_ref().is_some_and(|(p, _)| p.offload);
        let continued = self.continued;
        let send_name = sr.send_name.as_deref();
        let omit = |name: &[u8]| {
            (offload && hdr_name_eq(name, "accept-encoding"))
                || (continued && hdr_name_eq(name, "expect"))
                || send_name.is_some_and(|n| hdr_name_eq(name, n))
        };
        let mut view = ReqHead::from_h1(buf, h);
        let mut scheme = None;
        if c.lane_of.is_some() && view.form == Form::Absolute {
            scheme = view.scheme.map(|s| {
                if s.eq_ignore_ascii_case(b"http") {
                    &b"http"[..]
                } else {
                    &b"https"[..]
                }
            });
            // An HTTP/2 request's absolute URI is ebb's (and HAProxy's)
            // internal form of `:scheme` and `:authority`: the server gets
            // the origin form (`*` for OPTIONS without a path), as HAProxy
            // sends a normalized URI.
            view.form = if view.path.is_empty() && h.method == Method::Options {
                Form::Asterisk
            } else {
                Form::Origin
            };
        }
        // `compression direction request`: the body goes coded, chunked.
        let req_comp = comp_choice
            .as_ref()
            .and_then(|(p, _)| compress::RequestBody::for_request(p, buf, h));
        if req_comp.is_some() {
            view.body = BodySize::Unknown;
        }
        let websocket = view.upgrade.is_some_and(|u| {
            u.split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"websocket"))
        });
        let ws_accept = websocket.then(|| match &c.tr {
            crate::transport::Transport::Lane(l) => l
                .pipe
                .borrow()
                .ws_key
                .map(|k| crate::sample::websocket_accept(&k)),
            _ => None,
        });
        let keep_server = !sr.server_close && !c.fe.server_close && view.upgrade.is_none();
        if sr.close {
            // `option httpclose` in the backend closes both sides.
            self.keep_alive = false;
        }
        let xff = AddrField::merge(c.fe.forwardfor.as_ref(), sr.forwardfor.as_ref());
        let xot = AddrField::merge(c.fe.originalto.as_ref(), sr.originalto.as_ref());
        let tail = ReqTail {
            omit: Some(&omit),
            watch: xff.as_ref().map_or(&b""[..], |f| f.header.as_bytes()),
            keep: keep_server,
        };
        // The client's previous exchange's server side, if it ended well:
        // its allocation and its buffers serve this one.
        let mut reuse = self.up_spare.take();
        let mut spare = match reuse.as_deref_mut() {
            Some(u) => UpBufs::from_spent(u),
            None => UpBufs::take(),
        };
        let mut out = std::mem::take(&mut spare.head);
        let peer = c.stream_src().ip();
        let orig_dst = xot.as_ref().and_then(|_| c.stream_dst()).map(|d| d.ip());
        // `TE` is hop-by-hop: only its `trailers` member goes on, as HAProxy
        // passes it to an HTTP/1 server.
        let te_trailers = h.header(buf, "te").is_some_and(|v| {
            v.split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"))
        });
        let mut name_at = None;
        let framing = write_request_head(&mut out, &view, &tail, |out, has_xff| {
            if te_trailers {
                out.extend_from_slice(b"TE: trailers\r\n");
            }
            compress::write_request_fields(out, req_comp.as_ref().map(|b| b.coding()));
            if let Some(ff) = &xff {
                if !(ff.excepted(peer) || (!ff.always && has_xff)) {
                    ff.write(out, peer);
                }
            }
            if let (Some(ot), Some(d)) = (&xot, orig_dst) {
                if !ot.excepted(d) {
                    ot.write(out, d);
                }
            }
            // `http-send-name-header`: its field goes here once the
            // server is known (`Upstream::name_server`).
            name_at = send_name.map(|_| (out.len(), 0));
        });
        let req_left = match (framing, req_comp) {
            (_, Some(b)) => Left::Compress(b),
            (BodySize::Empty, None) => Left::Done,
            (BodySize::Exact(n), None) => Left::Len(n),
            // Re-emitted with canonical chunk sizes.
            (BodySize::Unknown, None) => Left::Recode(Box::default()),
        };

        // Keys for the balancer (owned: a queued stream may pick again).
        let lb_hdr = match &sr.farm.balance {
            crate::config::Balance::Hdr { name, .. } => h.header(buf, name).map(|v| v.to_vec()),
            _ => None,
        };
        let mut lb_uri = std::mem::take(&mut spare.lb_uri);
        if matches!(
            sr.farm.balance,
            crate::config::Balance::Uri { .. } | crate::config::Balance::UrlParam { .. }
        ) {
            lb_uri.extend_from_slice(h.path.get(buf));
        }
        // `http-request set-timeout`: this exchange's own (0: none, as
        // HAProxy's eternity).
        let mut timeouts = sr.timeouts;
        if let Some(v) = c.vars.try_borrow() {
            let t = (v.info.timeout_server, v.info.timeout_tunnel);
            let ms = |t: u32| if t == 0 { i32::MAX as u32 } else { t };
            if let Some(s) = t.0 {
                timeouts.server = ms(s);
                if be.tunnel_ms.is_none() {
                    timeouts.tunnel = ms(s);
                }
            }
            if let Some(tu) = t.1 {
                timeouts.tunnel = ms(tu);
            }
        }
        let now = ctx.now();
        let mut up = Upstream {
            be: Arc::clone(&be),
            farm: Arc::clone(&sr.farm),
            timeouts,
            server: None,
            waiter: None,
            reused: false,
            state: UpState::Queued,
            head: out,
            body_sent: false,
            req_left,
            resp: std::mem::take(&mut spare.resp),
            resp_left: None,
            dechunk: false,
            skip_body: c.head.method == Method::Head && h.method != Method::Head,
            status: 0,
            bytes_out: 0,
            retries_left: sr.farm.retries,
            avoid: None,
            method: h.method,
            client_version: h.version,
            client_keep_alive: self.keep_alive,
            lb_src: Some(c.stream_src().ip()),
            lb_uri,
            lb_hdr,
            t0: c.req_start.unwrap_or(now),
            t_start: now,
            t_queued: None,
            t_served: None,
            req_line: {
                let mut l = std::mem::take(&mut spare.req_line);
                l.extend_from_slice(
                    &received[..received.iter().position(|&c| c == b'\r').unwrap_or(0)],
                );
                l
            },
            t_conn: None,
            t_resp: None,
            deadline: now,
            keep_server,
            term: "--",
            comp_choice,
            comp: None,
            te_trailers,
            store: None,
            flush_at: None,
            req_flush_at: None,
            resp_wait: None,
            abort_on_close: sr.abort_on_close,
            l7: false,
            retry_at: None,
            ws_accept,
            scheme,
            name_at,
            logged: false,
        };
        // The head is copied: consume it; the body (if any) follows.
        c.rstart += c.head.head_len.min(c.rend - c.rstart);
        if let Left::Len(n) = up.req_left {
            // A whole body already read (waited for, or small) goes with
            // the head: the request can then be sent again whole when a
            // reused connection turns out closed (if it is safe to).
            let avail = &c.rbuf[c.rstart..c.rend];
            if self.body_now.complete && n <= avail.len() as u64 && n as usize <= c.w.bufsize {
                up.head.extend_from_slice(&avail[..n as usize]);
                c.rstart += n as usize;
                up.req_left = Left::Done;
            }
        }
        // `retry-on` a layer-7 failure: only a request whole in `head`
        // (it fit the buffer and all of it was read when it went), which
        // a retry sends again (HAProxy's l7 buffer); no copy is made.
        up.l7 = sr.farm.retry_on.l7()
            && up.req_left.done()
            && up.head.len() <= c.w.bufsize
            && !c.vars.try_borrow().is_some_and(|v| v.info.no_l7_retry);
        let body_in = match up.req_left {
            Left::Done => true,
            Left::Len(n) => n <= (c.rend - c.rstart) as u64,
            _ => false,
        };
        if !body_in && !c.tr.is_lane() {
            // HTTP listeners delay the ACK of a connection's first bytes
            // (HAProxy's smart accept, see `server::client_sock_opts`): a
            // body still to come turns quick ACKs back on, as HAProxy
            // does, lest the client wait on delayed ACKs to send it.
            let _ = socket2::SockRef::from(c.tr.tcp()).set_tcp_quickack(true);
        }
        c.next_input = None;
        c.input = In::Stream;
        self.wait = Wait::Proxy;
        self.up = Some(match reuse {
            Some(mut b) => {
                *b = up;
                b
            }
            None => Box::new(up),
        });
        self.side.borrow_mut().bytes_in = 0;
        self.pick_server(c, ctx);
    }

    /// Asks the farm for a server and acts on the answer.
    fn pick_server(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let me = match c.me {
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
        let (ck, force, stay, us) = {
            let v = c.vars.try_borrow();
            let i = v.as_ref().map(|v| &v.info);
            (
                i.and_then(|i| i.ck_direct),
                i.is_some_and(|i| i.ck_force),
                i.is_some_and(|i| i.ck_force_rule),
                i.and_then(|i| i.use_srv),
            )
        };
        // A `use-server` rule's server takes the request even when down
        // (the rule checked it may); else the cookie's, then the stick
        // table's.
        let (prefer, force, stay) = match us {
            Some((i, st)) => (Some(i), true, st),
            None if ck.is_some() => (ck, force, stay),
            None => match c.stk.prefer_force() {
                Some(st) => (c.stk.prefer(), true, st),
                None => (
                    c.stk.prefer().or_else(|| self.last_server(&up)),
                    force,
                    stay,
                ),
            },
        };
        let h = || ctx.handle();
        let pick = (up.farm).pick_cookie(prefer, force, stay, &input, up.avoid, me, h);
        match pick {
            Pick::Server(s) => {
                self.up = Some(up);
                self.use_server(c, ctx, s);
            }
            Pick::Queued(w) => {
                if let Some(mut v) = c.vars.try_borrow_mut() {
                    let at = if w.on_backend {
                        &mut v.info.be_queue
                    } else {
                        &mut v.info.srv_queue
                    };
                    *at = w.ahead;
                }
                up.state = UpState::Queued;
                up.waiter = Some(w);
                up.t_queued.get_or_insert(ctx.now());
                up.deadline = ticks::add(ctx.now(), up.timeouts.queue);
                self.up = Some(up);
            }
            Pick::NoServer(_why) => {
                self.up = Some(up);
                self.fail(c, ctx, ExchangeError::no_server());
            }
        }
    }

    /// `option prefer-last-server`: the server of the connection kept
    /// private to this client (HAProxy's connection attached to the
    /// session; a shared idle one is not), when in this backend and
    /// usable.
    fn last_server(&self, up: &Upstream) -> Option<usize> {
        let BackendKind::Servers(sr) = &up.be.kind else {
            return None;
        };
        let a = self.attached.as_ref().filter(|_| sr.prefer_last)?;
        let s = up.farm.servers.get(a.srv.idx)?;
        (s.uid == a.srv.uid && s.usable()).then_some(s.idx)
    }

    /// We hold a slot of `s`: reuse a connection to it or connect.
    fn use_server(&mut self, c: &mut H1, ctx: &mut Ctx, s: Arc<ServerRt>) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let now = ctx.now();
        up.t_served = Some(now);
        up.waiter = None;
        s.counters.note_session(ctx.now_ns());
        // 1. The connection this client already has to that server: kept
        //    private to it, or parked in the pool where no other request
        //    took it. Still registered with the server side's tasklet:
        //    with no event on it since it went idle, it is known open
        //    without a `peek` (a close or stray bytes would have raised
        //    one).
        let mut sock = None;
        let quiet = !std::mem::take(&mut self.side.borrow_mut().idle_event);
        // A connection that began with a PROXY header is reused only for
        // an exchange whose header would be the same (HAProxy keys such
        // connections by it: another unique id is another connection).
        // The same for an SNI that depends on the exchange.
        let same_pp = (s.opts.send_proxy == 0 && !dynamic_sni(&s)) || {
            let (pp, sni) = conn_params(c, &s, &up);
            conn_key(&pp, sni.as_deref()) == self.pp_sent
        };
        if let Some(mut a) = self.attached.take() {
            if a.srv.uid == s.uid && same_pp && (quiet || alive(&mut a.st)) {
                sock = Some((a.st, true, None));
            } else {
                self.detach_to_pool(c, ctx, a);
            }
        }
        if let Some(p) = self.parked.take() {
            if p.server_uid() == s.uid && same_pp {
                if let Some(mut t) = c.w.shared.idle.unpark(&p) {
                    if quiet || alive(&mut t.st) {
                        sock = Some((t.st, true, None));
                    }
                }
                self.parked = Some(p);
            } else {
                // Its connection to another server stays for others.
                let watch = c.w.idle_watch;
                c.w.shared
                    .idle
                    .release(p, |fd, reg, mark| rehome(ctx, watch, fd, reg, mark));
            }
        }
        // 2. The idle pool, this thread's connections first, as
        //    `http-reuse` allows: `never` keeps connections private,
        //    `safe` sends a client's first request on a connection of its
        //    own (a failure there could not be told apart), `aggressive`
        //    on a safe one (it carried more than one request), `always`
        //    on a safe one, else any.
        use crate::backend::pool::Want;
        let first = c.requests() <= 1;
        let want = match up.farm.reuse {
            HttpReuse::Never => None,
            _ if !first => Some(Want::Any),
            HttpReuse::Safe => None,
            HttpReuse::Aggressive => Some(Want::Safe),
            HttpReuse::Always => Some(Want::SafeFirst),
        };
        if let (None, Some(want), true) = (&sock, want, shareable(&s)) {
            let quiet = |id, mark| ctx.io_mark(id) == Some(mark);
            if let Some(t) = c.w.take_idle(&s, want, ctx.now(), &quiet) {
                // Registered with another client's tasklet until now (on
                // this thread's poller or another's): moved below.
                sock = Some((t.st, false, t.reg));
            }
        }
        up.name_server(&s);
        up.server = Some(Arc::clone(&s));
        c.sess.target.store(s.uid, Ordering::Relaxed);
        match sock {
            Some((st, registered, owner)) => {
                if !registered {
                    // One `EPOLL_CTL_MOD` when the last owner was a
                    // tasklet of this thread (the queue's hand-over of a
                    // server connection), not a delete and an add.
                    let fd = st.raw_fd();
                    let ok = self.side_tasklet(c, ctx).is_some_and(|t| match owner {
                        Some(o) => ctx.move_fd(o.thread(), fd, t, true).is_ok(),
                        None => ctx.register_fd(fd, t, true).is_ok(),
                    });
                    if !ok {
                        if let Some(o) = owner {
                            let _ = ctx.deregister_fd_of(o.thread(), fd);
                        }
                        drop(st);
                        self.up = Some(up);
                        self.connect_new(c, ctx);
                        return;
                    }
                }
                {
                    let mut sd = self.side.borrow_mut();
                    sd.install(st, false, now);
                    sd.obuf.clear();
                    sd.obuf.extend_from_slice(&up.head);
                    sd.opos = 0;
                }
                up.reused = true;
                s.counters.reuses.fetch_add(1, Ordering::Relaxed);
                observe(&s, Seen::L4Ok);
                up.state = UpState::Connected;
                up.t_conn = Some(now);
                up.deadline = ticks::add(now, up.timeouts.server);
                self.up = Some(up);
            }
            None => {
                self.up = Some(up);
                self.connect_new(c, ctx);
            }
        }
    }

    /// Starts a non-blocking connect to the held server.
    fn connect_new(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let Some(s) = up.server.clone() else {
            self.up = Some(up);
            return;
        };
        if s.opts.proto_h2 || s.opts.alpn.iter().any(|p| p == "h2") {
            self.up = Some(up);
            self.connect_h2(c, ctx);
            return;
        }
        let now = ctx.now();
        let client_dst = client_dst(c, &s);
        s.counters.connects.fetch_add(1, Ordering::Relaxed);
        let (pp, sni) = conn_params(c, &s, &up);
        match open_transport(&s, client_dst, sni.as_deref()) {
            Ok((st, socks)) => {
                // Readiness an earlier socket left (a retry, a reused
                // connection found closed) must not pass for this one's
                // connect, which a writable edge settles
                // (`backend::connect_outcome`). No other socket of this
                // client is registered now: `use_server` took, closed or
                // deregistered its idle ones.
                let registered = self.side_tasklet(c, ctx).is_some_and(|t| {
                    let _ = ctx.take_events(t);
                    ctx.register_fd(st.raw_fd(), t, true).is_ok()
                });
                if !registered {
                    self.up = Some(up);
                    self.connect_failed(c, ctx, false);
                    return;
                }
                {
                    let mut sd = self.side.borrow_mut();
                    sd.install(st, true, now);
                    sd.socks = socks;
                    sd.obuf.clear();
                    if !pp.is_empty() || sni.is_some() {
                        sd.obuf.extend_from_slice(&pp);
                        self.pp_sent = conn_key(&pp, sni.as_deref());
                    }
                    sd.obuf.extend_from_slice(&up.head);
                    sd.opos = 0;
                    // Woken at the connect if more request body follows.
                    sd.want_room = !up.req_left.done();
                }
                up.reused = false;
                up.state = UpState::Connecting;
                up.deadline = ticks::add(now, up.timeouts.connect);
                self.up = Some(up);
            }
            Err(_) => {
                self.up = Some(up);
                self.connect_failed(c, ctx, false);
            }
        }
    }

    /// `server ... proto h2`: the exchange goes on a stream of an HTTP/2
    /// connection to the server ([`crate::mux::h2::server`]), one of this
    /// thread's as `http-reuse` allows, else a new one. The request goes
    /// into its pipe as it would go to a socket.
    fn connect_h2(&mut self, c: &mut H1, ctx: &mut Ctx) {
        use crate::mux::h2::server::{attach, Hints, Reuse, Target};
        let Some(mut up) = self.up.take() else {
            return;
        };
        let Some(s) = up.server.clone() else {
            self.up = Some(up);
            return;
        };
        let reuse = match up.farm.reuse {
            HttpReuse::Never => Reuse::Never,
            HttpReuse::Safe => Reuse::Safe {
                first: c.requests() <= 1,
            },
            HttpReuse::Aggressive => Reuse::Aggressive,
            HttpReuse::Always => Reuse::Always,
        };
        // The session: an HTTP/2 client connection for its streams' lanes.
        let owner = c.lane_of.or(c.me);
        // A connection whose SNI depends on the exchange serves only
        // streams that would send the same name.
        let sni = server_sni(c, &s, &up);
        let key = sni.as_deref().map_or(s.uid, |n| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            n.hash(&mut h);
            s.uid ^ h.finish().rotate_left(17)
        });
        let target = Target {
            key,
            negotiate: !s.opts.proto_h2,
            purge: s.opts.pool_purge_delay,
            limits: c.w.limits,
            counters: Arc::clone(&up.be.h2),
        };
        let r = match self.side_tasklet(c, ctx) {
            Some(t) => {
                let client_dst = client_dst(c, &s);
                let hints = Hints {
                    te: up.te_trailers,
                    scheme: up.scheme,
                };
                attach(ctx, &target, reuse, owner, t, hints, || {
                    s.counters.connects.fetch_add(1, Ordering::Relaxed);
                    // (`socks4` is refused on an HTTP/2 server.)
                    open_transport(&s, client_dst, sni.as_deref()).map(|(t, _)| t)
                })
            }
            None => Err(io::ErrorKind::NotConnected.into()),
        };
        let Ok(a) = r else {
            self.up = Some(up);
            self.connect_failed(c, ctx, false);
            return;
        };
        let now = ctx.now();
        up.reused = a.reused;
        if a.reused {
            s.counters.reuses.fetch_add(1, Ordering::Relaxed);
        }
        let mut sd = self.side.borrow_mut();
        sd.install_h2(a, now);
        sd.obuf.clear();
        sd.obuf.extend_from_slice(&up.head);
        sd.opos = 0;
        sd.want_room = !up.req_left.done();
        if sd.connecting {
            up.state = UpState::Connecting;
            up.deadline = ticks::add(now, up.timeouts.connect);
        } else {
            observe(&s, Seen::L4Ok);
            up.state = UpState::Connected;
            up.t_conn = Some(now);
            up.deadline = ticks::add(now, up.timeouts.server);
            sd.send();
        }
        sd.wake_mux(ctx);
        drop(sd);
        self.up = Some(up);
    }

    /// A connect failed or timed out: retry, redispatch, or 503.
    fn connect_failed(&mut self, c: &mut H1, ctx: &mut Ctx, timed_out: bool) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        self.drop_server_sock(ctx, &up);
        let farm = Arc::clone(&up.farm);
        if let Some(s) = &up.server {
            s.counters.conn_errors.fetch_add(1, Ordering::Relaxed);
            observe(s, Seen::L4Err);
        }
        // `retry-on` without `conn-failure`: no connect retry at all.
        if up.retries_left == 0 || !farm.retry_on.has(RetryOn::CONN_FAILURE) {
            // The error answer releases the server (and logs its name).
            self.up = Some(up);
            self.fail(c, ctx, ExchangeError::connect(timed_out));
            return;
        }
        up.retries_left -= 1;
        if let Some(s) = &up.server {
            s.counters.retries.fetch_add(1, Ordering::Relaxed);
        }
        // `option redispatch [N]`: this retry goes to another server.
        if farm.redispatch_on(farm.retries.saturating_sub(up.retries_left)) {
            if let Some(s) = up.server.take() {
                s.counters.redispatches.fetch_add(1, Ordering::Relaxed);
                up.avoid = Some(s.idx);
                farm.release(&s);
            }
            self.up = Some(up);
            self.pick_server(c, ctx);
            return;
        }
        if !timed_out {
            // Refused at once: HAProxy waits before the next attempt
            // (`timeout connect`, at most 1 s; its SC_ST_TAR state).
            let at = ticks::add(ctx.now(), up.timeouts.connect.min(1000));
            up.retry_at = Some(at);
            up.deadline = at;
            self.up = Some(up);
            return;
        }
        self.up = Some(up);
        self.connect_new(c, ctx);
    }

    /// A layer-7 failure `why` (a [`RetryOn`] bit) before any of the
    /// answer went to the client: when `retry-on` names it and a retry
    /// is left, the server connection closes and the whole request goes
    /// again (HAProxy's do_l7_retry): to the same server on a new
    /// connection, or to another one as `option redispatch` says
    /// ([`Farm::leave_on_retry`]). Counted in the server's `wretr` as
    /// HAProxy counts it (twice when it stays: the retry, then the
    /// attempt on the same server; once and a `wredis` when it leaves).
    /// Returns whether a retry started.
    fn l7_retry(&mut self, c: &mut H1, ctx: &mut Ctx, why: u16) -> bool {
        let Some(mut up) = self.up.take() else {
            return false;
        };
        let answered = up.resp_left.is_some();
        if !up.l7 || answered || !up.farm.retry_on.has(why) || up.retries_left == 0 {
            self.up = Some(up);
            return false;
        }
        self.drop_server_sock(ctx, &up);
        up.retries_left -= 1;
        let farm = Arc::clone(&up.farm);
        let k = farm.retries - up.retries_left;
        let (direct, forced) = {
            let v = c.vars.try_borrow();
            let i = v.as_ref().map(|v| &v.info);
            let forced = i.is_some_and(|i| i.ck_force_rule || i.use_srv.is_some_and(|(_, f)| f))
                || c.stk.prefer_force() == Some(true);
            let direct = i.is_some_and(|i| i.ck_direct.is_some() || i.use_srv.is_some())
                || c.stk.prefer().is_some();
            (direct, forced)
        };
        // What the failed attempt learnt of the answer goes.
        up.t_resp = None;
        up.resp_wait = None;
        let Some(s) = up.server.clone() else {
            self.up = Some(up);
            self.pick_server(c, ctx);
            return true;
        };
        s.counters.retries.fetch_add(1, Ordering::Relaxed);
        if farm.leave_on_retry(k, &s, direct, forced) {
            if farm.servers.len() > 1 {
                s.counters.redispatches.fetch_add(1, Ordering::Relaxed);
                up.avoid = Some(s.idx);
            } else {
                s.counters.retries.fetch_add(1, Ordering::Relaxed);
            }
            up.server = None;
            farm.release(&s);
            self.up = Some(up);
            self.pick_server(c, ctx);
            return true;
        }
        s.counters.retries.fetch_add(1, Ordering::Relaxed);
        self.up = Some(up);
        self.connect_new(c, ctx);
        true
    }

    fn drop_server_sock(&mut self, ctx: &mut Ctx, up: &Upstream) {
        let st = {
            let mut sd = self.side.borrow_mut();
            let st = sd.take_sock();
            sd.wake_mux(ctx);
            st
        };
        if let Some(mut st) = st {
            let _ = ctx.deregister_fd(st.raw_fd());
            // `option nolinger`: no FIN first, the close (SO_LINGER 0)
            // sends a RST, as HAProxy's silent shutdown.
            if !up.farm.sock.nolinger {
                let _ = st.shutdown();
            }
        }
    }

    /// The server side's tasklet, created at the first need.
    fn side_tasklet(&mut self, c: &mut H1, ctx: &mut Ctx) -> Option<sched::TaskletId> {
        if let Some(t) = self.side_task {
            return Some(t);
        }
        let client = c.me?;
        let t = ctx.new_tasklet_obj(
            "h1_srv",
            crate::mux::h1::server::SideTasklet {
                side: std::rc::Rc::clone(&self.side),
                w: std::rc::Rc::clone(&c.w),
                client,
            },
        );
        self.side_task = Some(t);
        Some(t)
    }

    /// Takes in what the server side's tasklet saw of a connect: the
    /// exchange moves on to `Connected` (or to a retry). Returns whether
    /// the state changed.
    pub(super) fn sync_side(&mut self, c: &mut H1, ctx: &mut Ctx) -> bool {
        let Some(up) = self.up.as_mut() else {
            return false;
        };
        if up.state != UpState::Connecting || up.retry_at.is_some() {
            return false;
        }
        let (connecting, failed, t_conn) = {
            let mut sd = self.side.borrow_mut();
            sd.refresh_h2_connect(ctx.now());
            (sd.connecting, sd.connect_failed, sd.t_conn)
        };
        if failed {
            self.connect_failed(c, ctx, false);
            return true;
        }
        if connecting {
            return false;
        }
        let t = t_conn.unwrap_or_else(|| ctx.now());
        if let Some(s) = &up.server {
            observe(s, Seen::L4Ok);
        }
        up.state = UpState::Connected;
        up.t_conn = Some(t);
        up.deadline = ticks::add(t, up.timeouts.server);
        true
    }

    /// An error answer for the client (before any response byte went out).
    fn proxy_error(&mut self, c: &mut H1, ctx: &mut Ctx, status: u16) {
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
        self.drop_server_sock(ctx, &up);
        if let Some(s) = up.server.take() {
            up.farm.release(&s);
            // The server tried is named in the log (HAProxy's).
            up.server = Some(s);
        }
        // The client's body may still be on its way: keep the connection
        // only if it was all read.
        let ka = self.keep_alive && up.req_left.done();
        let version = up.client_version;
        let head_req = up.method == Method::Head;
        self.resp_start = c.wbuf.len();
        c.error_response(status, ka, version, head_req, &[]);
        let bi = c.fe.backends.iter().position(|b| Arc::ptr_eq(b, &up.be));
        up.status = self.after_response(c, bi, status);
        let sent = (c.wbuf.len() - self.resp_start) as u64 + c.native_sent();
        self.log_proxy(c, ctx, &up, sent);
        if !up.req_left.done() {
            c.closing = true;
        }
        self.finish_proxy_input(c);
    }

    /// An `http-response deny` held on the server's answer (`denied`;
    /// None: a rewrite failed in strict mode): it is dropped with its
    /// server connection, the rule's answer (or a 500) goes to the
    /// client, whose connection goes on when its request was whole (as
    /// HAProxy's); logged `PH` (`IH`) with the server.
    fn deny_response(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        be: &crate::proxy::BackendRt,
        denied: Option<crate::rewrite::Denied>,
    ) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        self.drop_server_sock(ctx, &up);
        if let Some(s) = up.server.take() {
            up.farm.release(&s);
            up.server = Some(s);
        }
        up.keep_server = false;
        self.resp_start = c.wbuf.len();
        // The client's connection goes on only if its request was whole.
        let keep = self.keep_alive && up.req_left.done();
        let status = match denied {
            Some(d) => {
                up.term = "PH";
                self.write_denied(c, be, d, keep)
            }
            None => {
                // A failed rewrite in strict mode: HAProxy's internal
                // error (500, `IH`).
                up.term = "IH";
                if !keep {
                    self.keep_alive = false;
                    c.closing = true;
                }
                let fe = Arc::clone(&c.fe);
                self.error_answer(c, &fe, 500, keep, Some(&be.name));
                500
            }
        };
        let bi = c.fe.backends.iter().position(|b| Arc::ptr_eq(b, &up.be));
        up.status = self.after_response(c, bi, status);
        self.note_late_rule(c);
        up.bytes_out = (c.wbuf.len() - self.resp_start) as u64 + c.native_sent();
        self.log_proxy(c, ctx, &up, up.bytes_out);
        self.finish_proxy_input(c);
    }

    fn finish_proxy_input(&mut self, c: &mut H1) {
        c.sess.target.store(0, Ordering::Relaxed);
        c.input = In::Head;
        self.wait = Wait::None;
        c.req_start = None;
    }

    /// Drives the exchange. Returns whether anything moved.
    pub(super) fn proxy_step(&mut self, c: &mut H1, ctx: &mut Ctx) -> bool {
        if self
            .up
            .as_ref()
            .is_some_and(|u| u.state == UpState::Connecting)
        {
            // The server side's tasklet may have completed the connect (and
            // sent the request) since this stream last looked: an abort is
            // judged on the phase the exchange is really in.
            self.sync_side(c, ctx);
        }
        let Some(up) = self.up.as_mut() else {
            return false;
        };
        if c.eof && up.abort_on_close && up.req_left.done() && up.resp_left.is_none() {
            // `option abortonclose`: a client that closed its side is not
            // served if it can still be avoided (HAProxy's
            // back_may_abort_req): queued, connecting, or waiting for the
            // answer (the server connection closes; HAProxy logs 400).
            use crate::backend::error::Phase;
            let phase = match up.state {
                UpState::Queued => {
                    // HAProxy's Tw: the time spent in the queue.
                    up.t_served = Some(ctx.now());
                    Phase::Queue
                }
                UpState::Connecting => Phase::Connect,
                UpState::Connected => {
                    up.status = 400;
                    Phase::Head
                }
                UpState::Tunnel => Phase::Data,
            };
            if up.state != UpState::Tunnel {
                self.fail(c, ctx, ExchangeError::client_abort(phase));
                return true;
            }
        }
        match up.state {
            UpState::Queued => {
                let Some(w) = up.waiter.clone() else {
                    return false;
                };
                match w.current() {
                    WaitState::Assigned(s) => {
                        up.waiter = None;
                        self.use_server(c, ctx, s);
                        true
                    }
                    WaitState::Redispatch => {
                        up.waiter = None;
                        self.pick_server(c, ctx);
                        true
                    }
                    WaitState::Waiting | WaitState::Cancelled => false,
                }
            }
            UpState::Connecting => self.sync_side(c, ctx),
            UpState::Connected | UpState::Tunnel => self.proxy_io(c, ctx),
        }
    }

    /// Moves bytes both ways once; handles completion and failures.
    fn proxy_io(&mut self, c: &mut H1, ctx: &mut Ctx) -> bool {
        let Some(mut up) = self.up.take() else {
            return false;
        };
        let bufsize = c.w.bufsize;
        let mut moved = false;
        let tunnel = up.state == UpState::Tunnel;
        let side = std::rc::Rc::clone(&self.side);
        let mut sd = side.borrow_mut();

        // 1. Client body (or tunnel bytes) into the server-side output.
        if sd.out_pending() < bufsize {
            let avail = &c.rbuf[c.rstart..c.rend];
            if tunnel {
                if !avail.is_empty() {
                    sd.obuf.extend_from_slice(avail);
                    c.rstart = c.rend;
                    moved = true;
                }
            } else {
                match &mut up.req_left {
                    Left::Done | Left::UntilClose => {}
                    Left::Len(n) => {
                        let k = (*n).min(avail.len() as u64) as usize;
                        if k > 0 {
                            sd.obuf.extend_from_slice(&avail[..k]);
                            c.rstart += k;
                            *n -= k as u64;
                            up.body_sent = true;
                            moved = true;
                        }
                        if *n == 0 {
                            up.req_left = Left::Done;
                        }
                    }
                    // (Chunked is the response side's only.)
                    Left::Chunked(_) => {}
                    // Recoded or compressed (`Left::reframe`).
                    l => match l.reframe(avail, &mut sd.obuf) {
                        Ok((n, done)) => {
                            if n > 0 {
                                c.rstart += n;
                                up.body_sent = true;
                                moved = true;
                            }
                            if done {
                                up.req_left = Left::Done;
                            }
                        }
                        Err(_) => {
                            // A broken request body: nothing sane to send
                            // on. Before any answer the client gets a 400
                            // (and a close), as for a refused head.
                            let answered = up.resp_left.is_some();
                            drop(sd);
                            self.up = Some(up);
                            self.fail(c, ctx, ExchangeError::bad_request_body(answered));
                            return true;
                        }
                    },
                }
            }
        }
        // A compressed request body is flushed as an answer is (below):
        // only when the client stays silent for a tick after its bytes ran
        // out, not at every read.
        if !tunnel {
            let drained = c.rstart == c.rend;
            if !drained || !up.req_left.compress_unflushed() {
                up.req_flush_at = None;
            } else if let Some(t) = up.req_flush_at {
                if ticks::is_expired(t, ctx.now()) {
                    up.req_flush_at = None;
                    if let Left::Compress(b) = &mut up.req_left {
                        if b.flush(&mut sd.obuf).is_err() {
                            let answered = up.resp_left.is_some();
                            drop(sd);
                            self.up = Some(up);
                            self.fail(c, ctx, ExchangeError::bad_request_body(answered));
                            return true;
                        }
                        moved = true;
                    }
                }
            } else {
                up.req_flush_at = Some(ticks::add(ctx.now(), FLUSH_DELAY));
            }
        }

        sd.want_room = tunnel || !up.req_left.done();

        // 2. Server-side output to the server (and TLS records pending).
        moved |= sd.send();
        sd.wake_mux(ctx);
        if sd.broken {
            drop(sd);
            self.up = Some(up);
            return self.server_broke(c, ctx);
        }

        // 3. Server input (only after an edge the server side's tasklet
        //    saw, or while a previous read filled the buffer).
        moved |= sd.recv(|| c.w.get_buf());
        if sd.sock.as_ref().is_some_and(|s| s.has_pending_output()) {
            // TLS: a read may have produced records to write.
            moved |= sd.send();
        }

        if tunnel {
            if sd.istart < sd.iend && c.pending_out() < bufsize {
                c.wbuf.extend_from_slice(&sd.ibuf[sd.istart..sd.iend]);
                up.bytes_out += (sd.iend - sd.istart) as u64;
                sd.istart = sd.iend;
                moved = true;
            }
            if moved {
                let t = up.timeouts.tunnel;
                up.deadline = ticks::add(ctx.now(), t);
            }
            let server_gone = sd.eof && sd.istart == sd.iend;
            let client_gone = c.eof && c.rstart == c.rend && sd.out_pending() == 0;
            drop(sd);
            self.up = Some(up);
            if server_gone || client_gone {
                // The tunnel's normal end: both connections close.
                self.abort_proxy(c, ctx);
                return true;
            }
            return moved;
        }

        // 4. Response head.
        if up.resp_left.is_none() {
            if sd.istart < sd.iend {
                let limits = c.w.limits;
                let r = parse_response_into(
                    &sd.ibuf[sd.istart..sd.iend],
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
                        if let Some(s) = &up.server {
                            observe(s, Seen::status(up.resp.status));
                        }
                        if up.resp.is_interim() {
                            // 1xx: forward as is, then read the final head
                            // (the client saw an answer: no retry now).
                            up.l7 = false;
                            let n = up.resp.head_len;
                            c.wbuf.extend_from_slice(&sd.ibuf[sd.istart..sd.istart + n]);
                            sd.istart += n;
                            moved = true;
                            drop(sd);
                            self.up = Some(up);
                            return moved;
                        }
                        if up.l7 && up.farm.retry_on.status(up.resp.status) {
                            // `retry-on <status>`: the answer is dropped
                            // with its connection, the request goes again.
                            let st = RetryOn::status_bit(up.resp.status).unwrap_or(0);
                            drop(sd);
                            self.up = Some(up);
                            if self.l7_retry(c, ctx, st) {
                                return true;
                            }
                            let Some(u) = self.up.take() else {
                                return true;
                            };
                            up = u;
                            sd = side.borrow_mut();
                        }
                        if !response_body_ready(c, ctx.now(), &mut up, &sd) {
                            drop(sd);
                            self.up = Some(up);
                            return moved;
                        }
                        drop(sd);
                        self.up = Some(up);
                        self.forward_response_head(c, ctx);
                        return true;
                    }
                    Err(_) => {
                        if let Some(s) = &up.server {
                            s.counters.resp_errors.fetch_add(1, Ordering::Relaxed);
                            observe(s, Seen::HttpHdrRsp);
                        }
                        drop(sd);
                        self.up = Some(up);
                        if self.l7_retry(c, ctx, RetryOn::JUNK_RESPONSE) {
                            return true;
                        }
                        self.fail(c, ctx, ExchangeError::bad_response_head());
                        return true;
                    }
                }
            }
            if sd.eof {
                drop(sd);
                self.up = Some(up);
                return self.server_broke(c, ctx);
            }
            self.up = Some(up);
            return moved;
        }

        // 5. Response body to the client (compressed a slice per run).
        let over = up.comp.is_some() && c.sent_run >= crate::mux::h1::client::RUN_QUANTUM;
        if over && sd.istart < sd.iend {
            if let Some(me) = c.me {
                ctx.tasklet_wakeup(me);
            }
        }
        // Input to compress this run (a range of `sd.ibuf`).
        let mut to_comp = 0..0;
        if c.pending_out() < bufsize && sd.istart < sd.iend && !over {
            let avail = &sd.ibuf[sd.istart..sd.iend];
            let mut fail = false;
            match up.resp_left.as_mut() {
                Some(Left::Len(n)) => {
                    let k = (*n).min(avail.len() as u64) as usize;
                    keep_stored(&mut up.store, &avail[..k]);
                    if !up.skip_body {
                        if up.comp.is_some() {
                            to_comp = sd.istart..sd.istart + k;
                            c.sent_run += k * compress::COST;
                        } else {
                            c.wbuf.extend_from_slice(&avail[..k]);
                        }
                        up.bytes_out += k as u64;
                    }
                    sd.istart += k;
                    *n -= k as u64;
                    moved |= k > 0;
                    if *n == 0 {
                        up.resp_left = Some(Left::Done);
                    }
                }
                Some(Left::Chunked(dec)) => match dec.decode(avail) {
                    Ok(d) => {
                        keep_stored(&mut up.store, &avail[d.data.clone()]);
                        if up.skip_body {
                            // Read and dropped (a HEAD client).
                        } else if up.comp.is_some() {
                            to_comp = sd.istart + d.data.start..sd.istart + d.data.end;
                            c.sent_run += d.data.len() * compress::COST;
                        } else if up.dechunk {
                            c.wbuf.extend_from_slice(&avail[d.data.clone()]);
                            up.bytes_out += d.data.len() as u64;
                        } else {
                            c.wbuf.extend_from_slice(&avail[..d.consumed]);
                            up.bytes_out += d.consumed as u64;
                        }
                        sd.istart += d.consumed;
                        moved |= d.consumed > 0;
                        if d.done {
                            up.resp_left = Some(Left::Done);
                        }
                    }
                    Err(_) => fail = true,
                },
                Some(Left::UntilClose) => {
                    keep_stored(&mut up.store, avail);
                    if !up.skip_body {
                        c.wbuf.extend_from_slice(avail);
                        up.bytes_out += avail.len() as u64;
                    }
                    sd.istart = sd.iend;
                    moved = true;
                }
                // (Recode is the request side's only.)
                Some(Left::Done | Left::Recode(_) | Left::Compress(_)) | None => {
                    // Bytes after the end of the answer: the server is not
                    // following HTTP; do not reuse that connection.
                    up.keep_server = false;
                    sd.istart = sd.iend;
                }
            }
            if fail {
                drop(sd);
                if let Some(s) = &up.server {
                    observe(s, Seen::HttpRsp);
                }
                self.up = Some(up);
                self.fail(c, ctx, ExchangeError::body_cut());
                return true;
            }
        }
        if moved {
            let t = up.timeouts.server;
            up.deadline = ticks::add(ctx.now(), t);
        }
        let resp_done = matches!(up.resp_left, Some(Left::Done));
        if let Some(z) = up.comp.as_mut() {
            // The end, or a pause of the server. A pause is not flushed at
            // once: only if the server stays silent for a tick after its
            // read drained does what was compressed so far leave (a
            // streamed answer is not held back, by more than a
            // millisecond; a bulk one is not cut into flushed pieces each
            // time a read drains the socket). Bytes still waiting in the
            // input (the client is slow) or arriving drop the date: the
            // next drained read sets it again.
            let drained = sd.istart == sd.iend && !sd.rd;
            let then = if resp_done {
                compress::Then::End
            } else if !drained {
                up.flush_at = None;
                compress::Then::More
            } else if let Some(t) = up.flush_at {
                if !ticks::is_expired(t, ctx.now()) {
                    compress::Then::More
                } else {
                    up.flush_at = None;
                    if z.unflushed() {
                        compress::Then::Flush
                    } else {
                        compress::Then::More
                    }
                }
            } else {
                if !to_comp.is_empty() || z.unflushed() {
                    up.flush_at = Some(ticks::add(ctx.now(), FLUSH_DELAY));
                }
                compress::Then::More
            };
            if then != compress::Then::More || !to_comp.is_empty() {
                if z.write(&sd.ibuf[to_comp], then, &mut c.wbuf).is_err() {
                    drop(sd);
                    self.up = Some(up);
                    self.fail(c, ctx, ExchangeError::body_cut());
                    return true;
                }
                moved = true;
            }
        }
        let until_close_done =
            matches!(up.resp_left, Some(Left::UntilClose)) && sd.eof && sd.istart == sd.iend;
        let cut = sd.eof && sd.istart == sd.iend;
        drop(sd);
        if resp_done || until_close_done {
            if until_close_done {
                up.keep_server = false;
            }
            self.up = Some(up);
            self.finish_exchange(c, ctx);
            return true;
        }
        if cut {
            // Cut in the middle of the body.
            self.up = Some(up);
            self.fail(c, ctx, ExchangeError::body_cut());
            return true;
        }
        self.up = Some(up);
        moved
    }

    /// The server closed or reset before a complete answer head.
    fn server_broke(&mut self, c: &mut H1, ctx: &mut Ctx) -> bool {
        let Some(up) = self.up.take() else {
            return false;
        };
        let nothing_back =
            up.resp_left.is_none() && self.side.borrow().iend == 0 && up.t_resp.is_none();
        let replayable = up.method.is_idempotent() && !up.body_sent;
        let e = ExchangeError::closed_before_head(up.reused && nothing_back && replayable);
        if e.retryable {
            // A kept connection the server had closed: send again on a
            // fresh one, without counting a retry.
            self.drop_server_sock(ctx, &up);
            self.up = Some(up);
            self.connect_new(c, ctx);
            return true;
        }
        // `retry-on empty-response`: no complete head came back (HAProxy
        // judges a head cut short by the close the same way).
        self.up = Some(up);
        if self.l7_retry(c, ctx, RetryOn::EMPTY_RESPONSE) {
            return true;
        }
        if let Some(s) = self.up.as_ref().and_then(|u| u.server.as_ref()) {
            s.counters.resp_errors.fetch_add(1, Ordering::Relaxed);
            observe(s, Seen::BrokenPipe);
        }
        self.fail(c, ctx, e);
        true
    }

    /// Ends a failed exchange: the error answer if none started, else
    /// both connections cut; the log line carries the error's code.
    fn fail(&mut self, c: &mut H1, ctx: &mut Ctx, e: ExchangeError) {
        if let Some(up) = self.up.as_mut() {
            up.term = e.term();
            up.keep_server = false;
        }
        match e.status {
            Some(status) => self.proxy_error(c, ctx, status),
            None => self.abort_proxy(c, ctx),
        }
    }

    /// Writes the client's response head from the server's.
    fn forward_response_head(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let be = Arc::clone(&up.be);
        let fe = Arc::clone(&c.fe);
        c.vars.get_mut().begin_response();
        if !be.l4.res_rules.is_empty() {
            // `tcp-response content` rules run before the response head is
            // analysed (HAProxy): they read no HTTP, see l4rules.
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let cx = crate::sample::Ctx {
                be: Some(&be.name),
                srv: up.server.as_ref().map(|s| s.name.as_str()),
                ..super::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            let v = crate::l4rules::run_rules(
                &be.l4.res_rules,
                0,
                &be.matcher,
                &cx,
                false,
                None,
                &mut false,
            );
            match v {
                // HAProxy: nothing reaches the client, logged `PD`, -1.
                Verdict::Reject | Verdict::SilentDrop => {
                    if v == Verdict::SilentDrop {
                        crate::transport::silent_drop(c.tr.tcp());
                    }
                    up.term = "PD";
                    up.keep_server = false;
                    self.up = Some(up);
                    self.abort_proxy(c, ctx);
                    return;
                }
                // HAProxy: the server connection closes, the client gets
                // a 502 (`SH`).
                Verdict::Close => {
                    self.up = Some(up);
                    self.fail(c, ctx, ExchangeError::closed_before_head(false));
                    return;
                }
                _ => {}
            }
        }
        let n = up.resp.head_len;
        let side = std::rc::Rc::clone(&self.side);
        let mut sd = side.borrow_mut();
        let istart = sd.istart;
        let buf = &sd.ibuf[istart..istart + n];
        if let (101, Some(want)) = (up.resp.status, &up.ws_accept) {
            // RFC 6455 §4.2.2: no (or, for a key ebb made, a wrong)
            // `Sec-WebSocket-Accept` is an invalid answer (HAProxy: 502).
            let ok = match (up.resp.header(buf, "sec-websocket-accept"), want) {
                (None, _) => false,
                (Some(got), Some(w)) => got.eq_ignore_ascii_case(w),
                (Some(_), None) => true,
            };
            if !ok {
                drop(sd);
                up.keep_server = false;
                self.up = Some(up);
                self.fail(c, ctx, ExchangeError::bad_response_head());
                return;
            }
        }
        let r = &up.resp;
        up.status = r.status;
        self.resp_start = c.wbuf.len();
        let tunnel = r.tunnel && r.status == 101;
        let mut ka = crate::drain::keep_alive(up.client_keep_alive, c.stopping) && !r.force_close;
        let out = &mut c.wbuf;
        // The server's version goes on, as HAProxy passes it.
        out.extend_from_slice(match r.version {
            Version::Http10 => b"HTTP/1.0 ",
            Version::Http11 => b"HTTP/1.1 ",
        });
        crate::http1::push_decimal(out, u64::from(r.status));
        out.push(b' ');
        out.extend_from_slice(r.reason.get(buf));
        out.extend_from_slice(b"\r\n");
        {
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let cx = crate::sample::Ctx {
                res: Some(crate::sample::Res::H1 { buf, head: r }),
                ..super::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            crate::sample::logline::capture_headers(&fe.captures, true, &cx);
        }
        let verdict = match &up.comp_choice {
            Some((p, k)) if !tunnel => compress::verdict_h1(p, *k, buf, r),
            _ => compress::Verdict::AsIs,
        };
        if let Some(s) = &up.server {
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let sctx = crate::sample::Ctx {
                res: Some(crate::sample::Res::H1 { buf, head: r }),
                be: Some(&be.name),
                srv: Some(s.name.as_str()),
                ..super::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            c.stk.stick_response(&be.stick, &be.matcher, &sctx, &**s);
        }
        let coding = match verdict {
            compress::Verdict::Compress(k) => Some(k),
            _ => None,
        };
        // A compressed answer gets a weak ETag (written below).
        let skip = |name: &[u8]| {
            eq_nocase(name, b"content-length") || (coding.is_some() && eq_nocase(name, b"etag"))
        };
        let sets = [
            (&be.http_response[..], &be.matcher),
            (&fe.http_response[..], &fe.matcher),
            (&be.after_response[..], &be.matcher),
            (&fe.after_response[..], &fe.matcher),
        ];
        if crate::rewrite::any(&sets) || crate::rewrite::cookie_on_response(&fe, &be) {
            // Rules run on the response as a list of fields, in order
            // (`crate::rewrite`); the status line is written again after.
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            // What arrived of the body (`res.body`): all of it when a
            // `wait-for-body` rule waited.
            let mut decoded = Vec::new();
            let after = sd.ibuf.get(istart + n..sd.iend).unwrap_or(&[]);
            let seen = super::body_in(after, r.framing, &mut decoded);
            let size = match r.framing {
                BodyFraming::ContentLength(l) => l,
                _ => seen.have,
            };
            let sctx = crate::sample::Ctx {
                be: Some(&be.name),
                srv: up.server.as_ref().map(|s| s.name.as_str()),
                res_body: Some((seen.data(&decoded, after, 0), size)),
                ..super::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            let mut head = crate::rewrite::ResHead::new(
                r.status,
                r.reason.get(buf).to_vec(),
                forwardable(buf, &r.headers)
                    .filter(|f| !skip(f.name.get(buf)))
                    .map(|f| (f.name.get(buf).to_vec(), f.value.get(buf).to_vec()))
                    .collect(),
            );
            // HAProxy's room for rewrites: the head beside the body bytes
            // that came with it, in `tune.bufsize`.
            head.room(&c.w.limits, n, after.len());
            let srv = up.server.as_deref();
            if let Some(v) = c.vars.cell() {
                crate::rewrite::cookie_response(&fe, &be, srv, up.method, &mut head, v);
            }
            let mut sc = crate::rewrite::StoreCtx {
                method: up.method,
                content_length: match r.framing {
                    BodyFraming::ContentLength(n) => Some(n),
                    BodyFraming::None => Some(0),
                    _ => None,
                },
                pending: None,
            };
            crate::rewrite::run_response_with(&sets, &sctx, &mut head, Some(&mut sc));
            let bh = [&fe.http, &be.http];
            for h in bh {
                h.failed_rewrites
                    .fetch_add(head.failed_rewrites, Ordering::Relaxed);
            }
            let denied = match head.denied.take() {
                Some(d) => Some(Some(d)),
                None if head.internal_error => {
                    for h in bh {
                        h.internal_errors.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(None)
                }
                None => None,
            };
            if let Some(d) = denied {
                out.truncate(self.resp_start);
                drop(sd);
                self.up = Some(up);
                self.deny_response(c, ctx, &be, d);
                return;
            }
            up.store = sc.pending.map(Box::new);
            out.truncate(self.resp_start);
            head.write(out);
            up.status = head.status;
        } else {
            // A line the origin wrote as ebb writes it (`name: value`
            // CRLF) is copied as it is, in one piece with the kept lines
            // right before it: a few copies per head, not four per field.
            let mut run: Option<core::ops::Range<usize>> = None;
            for f in forwardable(buf, &r.headers) {
                let name = f.name.get(buf);
                if skip(name) {
                    continue;
                }
                let (start, ve) = (f.name.start as usize, f.value.end as usize);
                let as_written = buf.get(f.name.end as usize..f.value.start as usize)
                    == Some(b": ")
                    && buf.get(ve..ve + 2) == Some(b"\r\n");
                if as_written {
                    match &mut run {
                        Some(r) if r.end == start => r.end = ve + 2,
                        _ => {
                            if let Some(r) = run.replace(start..ve + 2) {
                                out.extend_from_slice(buf.get(r).unwrap_or(&[]));
                            }
                        }
                    }
                    continue;
                }
                if let Some(r) = run.take() {
                    out.extend_from_slice(buf.get(r).unwrap_or(&[]));
                }
                out.extend_from_slice(name);
                out.extend_from_slice(b": ");
                out.extend_from_slice(f.value.get(buf));
                out.extend_from_slice(b"\r\n");
            }
            if let Some(r) = run {
                out.extend_from_slice(buf.get(r).unwrap_or(&[]));
            }
        }
        if coding.is_some() {
            compress::write_h1_fields(out, verdict, r.header(buf, "etag"));
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
                    if coding.is_some() {
                        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                    } else {
                        out.extend_from_slice(b"Content-Length: ");
                        crate::http1::push_decimal(out, n);
                        out.extend_from_slice(b"\r\n");
                    }
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
        } else if up.client_version == Version::Http10 || r.version == Version::Http10 {
            // Kept alive: said so to an HTTP/1.0 client, or in an
            // HTTP/1.0 answer.
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        up.bytes_out += (c.wbuf.len() - self.resp_start) as u64;
        if c.fe.logasap {
            // `option logasap`: the line goes now, the head forwarded.
            log_line(c, ctx, &up, up.bytes_out, true);
            up.logged = true;
        }
        sd.istart += n;
        drop(sd);
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
        if let Some(k) = coding.filter(|_| !up.skip_body) {
            let level = up.comp_choice.as_ref().map_or(1, |p| p.0.level);
            match compress::BodyCompressor::new(k, level) {
                Ok(b) => up.comp = Some(Box::new(b)),
                Err(_) => up.keep_server = false,
            }
        }
        up.resp_left = Some(left);
        self.up = Some(up);
        if matches!(
            self.up.as_ref().and_then(|u| u.resp_left.as_ref()),
            Some(Left::Done)
        ) {
            self.finish_exchange(c, ctx);
        }
    }

    /// The answer is complete: keep or close the server connection, give
    /// the slot back (or hand it over), log, and go on with the client.
    fn finish_exchange(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        // A request body still on its way is abandoned with the server
        // connection; the client connection cannot be reused either.
        if let Some(p) = up.store.take() {
            p.finish();
        }
        let req_done = up.req_left.done();
        if !req_done {
            up.keep_server = false;
            c.closing = true;
        }
        if !up.client_keep_alive {
            c.closing = true;
        }
        let keep = up.keep_server && {
            let sd = self.side.borrow();
            sd.out_pending() == 0
                && sd.istart == sd.iend
                && !sd.eof
                && !sd.sock.as_ref().is_some_and(|s| s.has_pending_output())
        };
        let s = up.server.take();
        let sock = match (keep, s.as_ref()) {
            (true, Some(_)) => self.side.borrow_mut().take_sock(),
            _ => None,
        };
        match (sock, s.as_ref()) {
            (Some(st), Some(srv)) if up.farm.reuse == HttpReuse::Never || !shareable(srv) => {
                // Private: stays attached to this client (still registered
                // with the server side's tasklet).
                if let Some(old) = self.attached.take() {
                    self.detach_to_pool(c, ctx, old);
                }
                self.side.borrow_mut().idle_event = false;
                self.attached = Some(Attached {
                    srv: Arc::clone(srv),
                    st,
                });
            }
            (Some(st), Some(srv)) => {
                // Idle now, as in HAProxy: parked in the pool, in this
                // client's place, still registered with the server side's
                // tasklet; closed when the pool is full (`pool-max-conn`).
                if let Some(ticket) = srv.idle_ticket() {
                    self.side.borrow_mut().idle_event = false;
                    // The side's tasklet's mark: a close or stray bytes
                    // that reach it later tell whoever takes the
                    // connection to `peek` it.
                    let reg = self.side_task.map(|t| (t, ctx.io_mark(t)));
                    c.w.shared.idle.park(
                        ctx.thread_id(),
                        &mut self.parked,
                        srv,
                        st,
                        up.reused,
                        ticket,
                        reg,
                        ctx.now(),
                    );
                } else {
                    let _ = ctx.deregister_fd(st.raw_fd());
                }
            }
            _ => self.drop_server_sock(ctx, &up),
        }
        let (ibuf, bytes_in) = {
            let mut sd = self.side.borrow_mut();
            (
                std::mem::take(&mut sd.ibuf),
                std::mem::take(&mut sd.bytes_in),
            )
        };
        if !ibuf.is_empty() {
            c.w.put_buf(ibuf);
        }
        if let Some(srv) = &s {
            srv.counters
                .bytes_out
                .fetch_add(up.bytes_out, Ordering::Relaxed);
            srv.counters.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
            up.farm.release(srv);
        }
        up.server = s;
        self.log_proxy(c, ctx, &up, up.bytes_out);
        self.up_spare = Some(spent(up));
        self.finish_proxy_input(c);
        c.idle_since = ctx.now();
    }

    /// A failure after the answer started, or a broken request: cut both.
    fn abort_proxy(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        self.drop_server_sock(ctx, &up);
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
        let ibuf = std::mem::take(&mut self.side.borrow_mut().ibuf);
        if !ibuf.is_empty() {
            c.w.put_buf(ibuf);
        }
        let bytes = up.bytes_out;
        self.log_proxy(c, ctx, &up, bytes);
        c.closing = true;
        self.finish_proxy_input(c);
    }

    /// A deadline of the server side passed.
    pub(super) fn proxy_timeout(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(state) = self.up.as_ref().map(|u| u.state) else {
            return;
        };
        match state {
            UpState::Queued => {
                if let Some(up) = self.up.as_mut() {
                    if let Some(s) = up.server.as_ref() {
                        s.counters.queue_timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                    up.farm
                        .counters
                        .queue_timeouts
                        .fetch_add(1, Ordering::Relaxed);
                }
                self.fail(c, ctx, ExchangeError::queue_timeout());
            }
            UpState::Connecting => {
                if let Some(up) = self.up.as_mut().filter(|u| u.retry_at.is_some()) {
                    // The turn-around is over: the next attempt.
                    up.retry_at = None;
                    self.connect_new(c, ctx);
                    return;
                }
                self.connect_failed(c, ctx, true)
            }
            UpState::Connected => {
                let now = ctx.now();
                let waited = self.up.as_ref().and_then(|u| u.resp_wait);
                if waited.is_some_and(|t| ticks::is_expired(t, now)) {
                    self.fail(c, ctx, ExchangeError::body_wait_timeout());
                    return;
                }
                let started = self.up.as_ref().is_some_and(|u| u.resp_left.is_some());
                if let Some(s) = self.up.as_ref().and_then(|u| u.server.as_ref()) {
                    if !started {
                        observe(s, Seen::ReadTimeout);
                    }
                }
                if !started && self.l7_retry(c, ctx, RetryOn::RESPONSE_TIMEOUT) {
                    return;
                }
                self.fail(c, ctx, ExchangeError::server_timeout(started));
            }
            UpState::Tunnel => self.fail(c, ctx, ExchangeError::server_timeout(true)),
        }
    }

    /// A server's `on-marked-down` / `on-marked-up` action ends the
    /// exchange with it (`why`: b'D' or b'U'): a 503 while connecting, a
    /// 502 before the answer, else both cut; the client connection
    /// closes, logged `DC`, `DH`, `DD` (`U`...) as HAProxy's.
    pub(super) fn proxy_shutdown(&mut self, c: &mut H1, ctx: &mut Ctx, why: u8) {
        use crate::backend::error::Phase;
        // A connect the server side's tasklet completed counts as done.
        self.sync_side(c, ctx);
        let Some(up) = self.up.as_ref().filter(|u| u.server.is_some()) else {
            return;
        };
        let phase = match up.state {
            // Not on the server yet (HAProxy redistributes its queue).
            UpState::Queued => return,
            UpState::Connecting => Phase::Connect,
            UpState::Connected if up.resp_left.is_none() => Phase::Head,
            UpState::Connected | UpState::Tunnel => Phase::Data,
        };
        self.fail(
            c,
            ctx,
            ExchangeError::server_shutdown(why == crate::backend::KILL_UP, phase),
        );
        c.closing = true;
    }

    /// The client went away in the middle of an exchange.
    pub(super) fn proxy_client_gone(&mut self, c: &mut H1, ctx: &mut Ctx) {
        self.fail(c, ctx, ExchangeError::client_gone());
    }

    /// A private idle server connection closes (its client leaves or
    /// wants another server).
    pub(super) fn detach_to_pool(&mut self, _c: &mut H1, ctx: &mut Ctx, a: Attached) {
        let _ = ctx.deregister_fd(a.st.raw_fd());
    }

    /// The client leaves: its idle connections close (a private one) or
    /// stay in the pool for others.
    pub(super) fn release_idle(&mut self, c: &mut H1, ctx: &mut Ctx) {
        if let Some(a) = self.attached.take() {
            self.detach_to_pool(c, ctx, a);
        }
        if let Some(p) = self.parked.take() {
            let watch = c.w.idle_watch;
            c.w.shared
                .idle
                .release(p, |fd, reg, mark| rehome(ctx, watch, fd, reg, mark));
        }
    }

    fn log_proxy(&mut self, c: &mut H1, ctx: &mut Ctx, up: &Upstream, bytes: u64) {
        crate::proxy::count_request(&c.fe, Some(&up.be), up.status, bytes);
        if let Some(z) = &up.comp {
            crate::proxy::count_compressed(&c.fe, Some(&up.be), z.totals());
        }
        // The server's own count of the responses it gave (HAProxy's
        // server `hrsp_*`); not for a backend's dispatch target.
        if let Some(s) = up.server.as_ref().filter(|s| !s.backend_target) {
            s.counters.hrsp[crate::proxy::status_class(up.status)]
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let err = (400..500).contains(&up.status);
        let fail = crate::table::http_failure(up.status, up.term);
        c.stk
            .end(ctx.now(), err, fail, c.head.head_len as u64, bytes);
        note_stream_stats(up, ctx.now());
        if !up.logged {
            log_line(c, ctx, up, bytes, false);
        }
    }
}

/// The exchange's access-log line: at its end, or when the response head
/// was forwarded with `option logasap` (`asap`: the size and the times
/// are then those so far, written with a `+`).
fn log_line(c: &H1, ctx: &Ctx, up: &Upstream, bytes: u64, asap: bool) {
    if !c.w.logging(&c.fe) {
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
    let (srv, left, redisp) = (up.server.as_deref(), up.retries_left, up.avoid.is_some());
    if let Some(v) = c.vars.cell() {
        crate::rewrite::note_for_log(v, &up.farm, srv, left, redisp);
    }
    let server = up.server.as_ref().map_or("<NOSRV>", |s| s.name.as_str());
    let mut entry = c.log_entry(LogFacts {
        backend: &up.be.name,
        server,
        times: [tq, tw, tc, tr, tt],
        status: up.status,
        bytes,
        term: up.term,
        request_line: &up.req_line,
    });
    entry.asap = asap;
    let retried = up.retries_left != up.farm.retries;
    let ab = crate::proxy::abnormal(up.term.as_bytes(), retried, redisp, Some(up.status));
    if let Some(level) = crate::rewrite::exchange_log_level(&c.fe, ab, c.vars.cell()) {
        c.w.log_access(crate::log::format(&entry), level);
    }
}

/// Counts the exchange's times and aborts on its backend and server
/// (HAProxy's stream_update_time_stats and `cli_abrt`/`srv_abrt`): the
/// queue, connect, response and total times when a server answered; the
/// aborts HAProxy's HTTP analysers count: by the client while a body
/// passed (`CD`) or while waiting for the answer (`CH`, with `option
/// abortonclose`), by the server while a body passed (`SD`; a close
/// before the answer's head is a failed response, not an abort).
fn note_stream_stats(up: &Upstream, now: Tick) {
    let d = |a: Tick, b: Tick| u64::from(b.wrapping_sub(a)).min(u64::from(u32::MAX >> 1));
    let times = match (up.t_served, up.t_conn, up.t_resp) {
        (Some(sv), Some(cn), Some(rs)) => {
            Some([d(up.t_start, sv), d(sv, cn), d(cn, rs), d(up.t0, now)])
        }
        _ => None,
    };
    let abort = match up.term {
        "CD" | "CH" => Some(true),
        "SD" => Some(false),
        _ => None,
    };
    let server = up.server.as_ref().filter(|s| !s.backend_target);
    for c in server
        .map(|s| &s.counters)
        .into_iter()
        .chain([&up.farm.counters])
    {
        c.times.note(times);
        match abort {
            Some(true) => c
                .cli_aborts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            Some(false) => c
                .srv_aborts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            None => 0,
        };
    }
}

/// `http-response wait-for-body` (HAProxy's http_wait_for_msg_body on the
/// response): whether the response head just parsed may go on to the
/// rules, because no such rule of the backend or the frontend holds on it,
/// or the body those that hold wait for is there (all of it, their
/// `at-least` bytes, a full buffer, or the server's close). Starts the
/// wait's clock at the first call (`Upstream::resp_wait`). The conditions
/// are evaluated on the response as received.
fn response_body_ready(c: &H1, now: Tick, up: &mut Upstream, sd: &ServerSide) -> bool {
    let fe = &c.fe;
    let be = &up.be;
    let sets = [
        (&be.http_response[..], &be.matcher),
        (&fe.http_response[..], &fe.matcher),
    ];
    let waits = || {
        sets.iter().flat_map(|(rules, m)| {
            rules.iter().filter_map(move |r| match &r.action {
                crate::config::HttpResponseAction::WaitForBody(w) => Some((r, *m, *w)),
                _ => None,
            })
        })
    };
    if waits().next().is_none() {
        return true;
    }
    let n = up.resp.head_len;
    let buf = sd.ibuf.get(sd.istart..sd.iend).unwrap_or(&[]);
    let head = buf.get(..n).unwrap_or(&[]);
    let after = buf.get(n..).unwrap_or(&[]);
    let mut decoded = Vec::new();
    let mut b = super::body_in(after, up.resp.framing, &mut decoded);
    b.closed = sd.eof;
    b.full = !sd.ibuf.is_empty() && sd.iend - sd.istart >= sd.ibuf.len();
    let tr = &c.tr;
    let dst = dst_of(tr, c.dst.as_deref().copied());
    let cx = crate::sample::Ctx {
        res: Some(crate::sample::Res::H1 {
            buf: head,
            head: &up.resp,
        }),
        be: Some(&be.name),
        srv: up.server.as_ref().map(|s| s.name.as_str()),
        ..super::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
    };
    let pending = waits().find(|(r, m, w)| !b.enough(w.at_least) && m.holds(r.cond.as_ref(), &cx));
    let Some((_, _, w)) = pending else {
        return true;
    };
    let until = *up
        .resp_wait
        .get_or_insert_with(|| ticks::add(now, w.time_ms));
    up.deadline = ticks::first(up.deadline, until);
    false
}

/// `option forwardfor` or `option originalto` as HAProxy applies them:
/// the field is added when the frontend or the backend asks for it, named
/// as the backend says (else the frontend), left out for an address in
/// either's `except` network; `if-none` holds only if neither side added
/// the option without it.
struct AddrField<'a> {
    header: &'a str,
    except: [Option<&'a crate::config::IpNet>; 2],
    always: bool,
}

impl<'a> AddrField<'a> {
    fn merge(
        fe: Option<&'a crate::config::ForwardFor>,
        be: Option<&'a crate::config::ForwardFor>,
    ) -> Option<AddrField<'a>> {
        let header = be.or(fe)?.header.as_str();
        Some(AddrField {
            header,
            except: [
                fe.and_then(|f| f.except.as_ref()),
                be.and_then(|f| f.except.as_ref()),
            ],
            always: [fe, be].iter().flatten().any(|f| !f.if_none),
        })
    }

    fn excepted(&self, ip: std::net::IpAddr) -> bool {
        self.except.iter().flatten().any(|n| n.contains(ip))
    }

    fn write(&self, out: &mut Vec<u8>, ip: std::net::IpAddr) {
        out.extend_from_slice(self.header.as_bytes());
        out.extend_from_slice(b": ");
        let _ = std::io::Write::write_fmt(out, format_args!("{ip}"));
        out.extend_from_slice(b"\r\n");
    }
}

/// The PROXY header a connection to `s` begins with for the exchange under
/// way (`send-proxy[-v2]` and `proxy-v2-options`).
fn pp_header(c: &H1, s: &ServerRt) -> Vec<u8> {
    // The stream's addresses (after `http-request set-src`/`set-dst`), as
    // HAProxy's PROXY header to a server carries.
    let addrs = c.stream_dst().map(|d| (c.stream_src(), d));
    let v = c.vars.try_borrow();
    crate::proxyproto::server_header(
        s.opts.send_proxy,
        &s.opts.pp_v2,
        addrs,
        match &v {
            Some(v) => v.pp_authority(c.tr.sni()),
            None => c.tr.sni().map(str::as_bytes),
        },
        v.as_ref().and_then(|v| v.info.unique_id.as_deref()),
    )
}

/// The address the client connected to, asked of the socket only for a
/// server without a port of its own (it takes the client's) and for
/// `option transparent` (it goes there).
fn client_dst(c: &H1, s: &ServerRt) -> Option<SocketAddr> {
    if s.follows_client_dst() || (s.backend_target && s.addr().is_none()) {
        // The stream's: as an `http-request set-dst[-port]` left it.
        c.stream_dst()
    } else {
        None
    }
}

/// A connect to `s` under way, and its SOCKS4 handshake if any.
type Opened = (Transport, Option<Box<crate::backend::socks4::Socks4>>);

fn open_transport(
    s: &ServerRt,
    client_dst: Option<SocketAddr>,
    sni: Option<&str>,
) -> io::Result<Opened> {
    // A server without a port takes the port the client connected to.
    // The request is written as soon as the socket connects.
    let (st, socks) = crate::backend::connect_server_nb(s, || s.dest(|| client_dst), true)?;
    let tr = match &s.tls {
        // TLS to the server: the handshake starts once connected (and
        // the SOCKS4 handshake done); the request written meanwhile waits
        // in rustls' buffer.
        Some(t) => {
            let name = t.name_for(sni, s.dest(|| client_dst));
            Transport::connect_tls(st, Arc::clone(&t.config), &name)?
        }
        None => Transport::plain(st),
    };
    Ok((tr, socks))
}

/// A parked connection whose client leaves: its registration passes from
/// the client's tasklet `reg` to the thread's idle watcher `watch` (no
/// system call), with the watcher's mark when `reg` saw no event since
/// the connection was parked (its `mark`), else none (the taker peeks).
/// Without a watcher the registration is removed.
fn rehome(
    ctx: &mut Ctx,
    watch: Option<TaskletId>,
    fd: std::os::fd::RawFd,
    reg: TaskletId,
    mark: Option<u32>,
) -> Option<(TaskletId, Option<u32>)> {
    let quiet = mark.is_some_and(|m| ctx.io_mark(reg) == Some(m));
    if let Some(w) = watch {
        if ctx.move_fd(reg.thread(), fd, w, true).is_ok() {
            return Some((w, if quiet { ctx.io_mark(w) } else { None }));
        }
    }
    let _ = ctx.deregister_fd(fd);
    None
}
