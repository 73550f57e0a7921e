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
//!
//! The parts: this module moves the request and the answer ([`Upstream`],
//! the stream's proxy steps and I/O); `connect` chooses the server and its
//! connection (pool, new connect, HTTP/2 to servers, parking after the
//! exchange); `response` judges and forwards the server's answer and ends
//! the exchange (log line, counters); `failure` handles what goes wrong
//! (connect retries, layer-7 retries, 502/503/504, client aborts and
//! timeouts).

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
use crate::http1::lax;
use crate::http1::{
    eq_nocase, parse_response_into, BodyFraming, ChunkedDecoder, ChunkedRecoder, Method,
    ResponseHead, Status as PStatus, Version,
};
use crate::l4rules::Verdict;
use crate::mux::h1::client::{dst_of, In, LogFacts};
use crate::mux::h1::server::{write_request_head, ReqTail, ServerSide};
use crate::proxy::{BackendKind, BackendRt, BeTimeouts};
use crate::stream::msg::{BodySize, Form, ReqHead};

mod connect;
mod failure;
use failure::Refusal;
mod response;

use connect::shareable;
use response::response_body_ready;

/// What is left of a body to move.
pub(super) enum Left {
    Done,
    Len(u64),
    Chunked(Box<ChunkedDecoder>),
    /// A chunked body, re-emitted with canonical chunk sizes: a request's,
    /// and an answer's passed on chunked as it is (neither compressed,
    /// stored nor de-chunked on its way).
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

    /// A request body re-framed on its way (recoded or compressed): the
    /// input consumed, whether the body is complete, and what it counts
    /// (HAProxy's HTX size, `crate::http1::htx`).
    fn reframe(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(usize, bool, u64), ()> {
        match self {
            Left::Recode(r) => {
                let before = r.htx_size();
                let (n, done) = r.recode(input, out).map_err(drop)?;
                Ok((n, done, r.htx_size() - before))
            }
            Left::Compress(b) => {
                let (n, done) = b.feed(input, out).map_err(drop)?;
                Ok((n, done, n as u64))
            }
            _ => Ok((0, false, 0)),
        }
    }
}

/// An idle server connection private to its client (`http-reuse never`,
/// `dispatch`, a PROXY header, a server without a port), kept for the
/// client's next request, still registered with the server side's tasklet.
pub(super) struct Attached {
    srv: Arc<ServerRt>,
    st: Transport,
    /// Its PROXY header and exchange-dependent SNI (see `pp_sent`).
    key: Vec<u8>,
    /// Still counted in use (HAProxy lists a private connection in its
    /// session, not among the server's idle ones).
    _used: crate::backend::pool::UsedConn,
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
    /// The server whose full queue refused the stream (HAProxy logs its
    /// name): no slot of it is held.
    refused_by: Option<Arc<ServerRt>>,
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
    /// `use_server` counted the server's session of the attempt it
    /// starts; each later connect (a retry to the same server) counts
    /// one more, as HAProxy counts one per `connect_server`.
    attempt_noted: bool,
    avoid: Option<usize>,
    method: Method,
    client_version: Version,
    client_keep_alive: bool,
    lb_src: Option<IpAddr>,
    lb_uri: Vec<u8>,
    lb_hdr: Option<Vec<u8>>,
    /// `balance url_param`: a POST body's bytes as far as they came
    /// (HAProxy's get_server_ph_post), when the URL lacks the parameter.
    lb_post: Option<Vec<u8>>,
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
    /// While connecting: when `timeout connect` ends. The deadline is the
    /// earlier of it and `timeout server` from the connect's start, as
    /// the server side's tasklet completes a connect without waking the
    /// client side: a `timeout server` shorter than `timeout connect`
    /// is then still kept (see `connect_started`).
    pub(super) connect_by: Tick,
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
    /// `option abortonclose` on the backend and on the frontend (see
    /// [`crate::proxy::FrontendRt::abort_on_close`]).
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
    /// The request asked for an upgrade (its `Upgrade` went to the
    /// server): a 101 answering any other is invalid (502, as HAProxy).
    upgrade: bool,
    /// A tunnel's half-close passed on: the server's sending side shut
    /// after the client's close.
    shut_server: bool,
    /// An HTTP/2 client's `:scheme` (http or https) for an HTTP/2 server:
    /// the head written is in origin form.
    scheme: Option<&'static [u8]>,
    /// `http-send-name-header`: where in `head` the field naming the
    /// server goes, and the length of the one there now.
    name_at: Option<(usize, usize)>,
    /// The log line went out with the response head (`option logasap`).
    logged: bool,
    /// A backend with a FastCGI application: what its rules said of the
    /// request, for a `proto fcgi` server's PARAMS (evaluated once the
    /// request's rules ran, as HAProxy's filter does, whatever server
    /// takes it).
    fcgi: Option<Box<crate::fcgi::params::Meta>>,
    /// Bytes (the request's, the answer's: `H1::bytes_in`, `bytes_out`)
    /// already added to the counters: `option contstats` adds them as
    /// they flow (see [`Stream::count_continuously`]).
    counted: (u64, u64),
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
    up.lb_post = None;
    up.ws_accept = None;
    up.fcgi = None;
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
    /// A connect starts at `now`: `timeout connect` runs, and the timer is
    /// also set for `timeout server` from now when that is sooner (the
    /// connect may complete unseen by the client side; `timeout server`
    /// then counts from its completion, never before now).
    pub(super) fn connect_started(&mut self, now: Tick) {
        self.state = UpState::Connecting;
        self.connect_by = ticks::add(now, self.timeouts.connect);
        self.deadline = ticks::first(self.connect_by, ticks::add(now, self.timeouts.server));
    }

    /// An exchange's server side before `Stream::start_proxy` fills it
    /// (which sets every field).
    fn blank(be: &Arc<BackendRt>, farm: &Arc<Farm>, timeouts: BeTimeouts, now: Tick) -> Upstream {
        Upstream {
            be: Arc::clone(be),
            farm: Arc::clone(farm),
            timeouts,
            server: None,
            waiter: None,
            refused_by: None,
            reused: false,
            state: UpState::Queued,
            head: Vec::new(),
            body_sent: false,
            req_left: Left::Done,
            resp: ResponseHead::default(),
            resp_left: None,
            dechunk: false,
            skip_body: false,
            status: 0,
            bytes_out: 0,
            retries_left: 0,
            attempt_noted: false,
            avoid: None,
            method: Method::Get,
            client_version: Version::Http11,
            client_keep_alive: false,
            lb_src: None,
            lb_uri: Vec::new(),
            lb_hdr: None,
            lb_post: None,
            t0: now,
            t_start: now,
            t_queued: None,
            t_served: None,
            t_conn: None,
            t_resp: None,
            req_line: Vec::new(),
            deadline: now,
            connect_by: now,
            keep_server: false,
            comp_choice: None,
            comp: None,
            store: None,
            flush_at: None,
            req_flush_at: None,
            term: "--",
            te_trailers: false,
            resp_wait: None,
            abort_on_close: false,
            l7: false,
            retry_at: None,
            ws_accept: None,
            upgrade: false,
            shut_server: false,
            scheme: None,
            name_at: None,
            logged: false,
            fcgi: None,
            counted: (0, 0),
        }
    }

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
            if let Some(m) = &self.be.h1_case {
                m.adjust_fields(&mut field);
            }
        }
        self.name_at = Some((at, field.len()));
        self.head.splice(at..at + len, field);
    }

    /// Whether the whole request (head and body) was taken from the client.
    pub(super) fn request_done(&self) -> bool {
        self.req_left.done()
    }

    /// Whether the client's socket must be heard from while this exchange
    /// works (see `Exchange::watches_client`): its request is still being
    /// read, a tunnel carries its bytes, `option abortonclose` watches for
    /// it leaving, or the request is a POST (as HAProxy reads on after
    /// one: some clients send a CRLF after its body, which a close would
    /// otherwise find unread and answer with a reset).
    pub(super) fn watches_client(&self) -> bool {
        !self.req_left.done()
            || self.state == UpState::Tunnel
            || self.abort_on_close
            || self.method == Method::Post
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
        // `use-fcgi-app`: its rules, on the request as the proxies' rules
        // left it (HAProxy's filter, on the request's headers).
        let fcgi = sr.fcgi.as_ref().map(|f| {
            let mut m = f.meta(&sctx);
            m.src = Some(c.stream_src());
            m.dst = c.stream_dst();
            m.https = c.tr.is_tls();
            m.h2 = c.lane_of.is_some();
            m.send_name = sr.send_name.as_ref().map(|n| n.as_bytes().to_vec());
            Box::new(m)
        });
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
        let upgrade = view.upgrade.is_some();
        // A CONNECT's server connection becomes its tunnel on a 2xx: never
        // pooled after it.
        let keep_server =
            !sr.server_close && !c.fe.server_close && !upgrade && h.method != Method::Connect;
        if std::mem::take(&mut self.unread_body_close) {
            // The server reads the body (an answer before all of it came
            // closes the connection: `finish_exchange`).
            self.keep_alive = true;
        }
        if sr.close {
            // `option httpclose` in the backend closes both sides.
            self.keep_alive = false;
        }
        let xff = AddrField::merge(c.fe.forwardfor.as_ref(), sr.forwardfor.as_ref());
        let xot = AddrField::merge(c.fe.originalto.as_ref(), sr.originalto.as_ref());
        let tail = ReqTail {
            omit: Some(&omit),
            watch: xff.as_ref().map_or(&b""[..], |f| f.header.as_bytes()),
            // `option http-pretend-keepalive`: the server is not told; nor
            // is a CONNECT's server (its connection becomes the tunnel, or
            // goes on after a refusal: HAProxy sends no `Connection`).
            keep: keep_server || sr.pretend_keepalive || h.method == Method::Connect,
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
        });
        if let Some(m) = &be.h1_case {
            // `option h1-case-adjust-bogus-server`.
            m.adjust_head(&mut out);
        }
        // `http-send-name-header`: its field goes last, as HAProxy
        // appends it to the head (after `Connection`), once the server is
        // known (`Upstream::name_server`).
        let name_at = send_name.map(|_| (out.len().saturating_sub(2), 0));
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
        // HAProxy 2.6 looks for a `url_param` in a POST's body when its URL
        // has none (with or without `check_post`): the body as far as it
        // came, de-chunked (all of it after `option http-buffer-request`).
        let lb_post = match &sr.farm.balance {
            crate::config::Balance::UrlParam { name }
                if c.head.method == Method::Post
                    && crate::backend::lb::url_param_value(&lb_uri, name.as_bytes()).is_none() =>
            {
                let after = received.get(c.head.head_len..).unwrap_or(&[]);
                let mut data = Vec::new();
                let b = crate::stream::body_in(after, c.head.framing, &mut data);
                if !b.decoded {
                    data.clear();
                    data.extend_from_slice(&after[..(b.have as usize).min(after.len())]);
                }
                Some(data)
            }
            _ => None,
        };
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
        // Filled in place: the client's previous exchange's box (whose
        // buffers `spare` holds), else a new one. Every field is named
        // below, so a field added to `Upstream` is set here too.
        let mut up =
            reuse.unwrap_or_else(|| Box::new(Upstream::blank(&be, &sr.farm, timeouts, now)));
        let Upstream {
            be: u_be,
            farm: u_farm,
            timeouts: u_timeouts,
            server,
            waiter,
            refused_by,
            reused,
            state,
            head,
            body_sent,
            req_left: u_req_left,
            resp,
            resp_left,
            dechunk,
            skip_body,
            status,
            bytes_out,
            retries_left,
            attempt_noted,
            avoid,
            method,
            client_version,
            client_keep_alive,
            lb_src,
            lb_uri: u_lb_uri,
            lb_hdr: u_lb_hdr,
            lb_post: u_lb_post,
            t0,
            t_start,
            t_queued,
            t_served,
            t_conn,
            t_resp,
            req_line,
            deadline,
            connect_by,
            keep_server: u_keep_server,
            comp_choice: u_comp_choice,
            comp,
            store,
            flush_at,
            req_flush_at,
            term,
            te_trailers: u_te_trailers,
            resp_wait,
            abort_on_close,
            l7,
            retry_at,
            ws_accept: u_ws_accept,
            upgrade: u_upgrade,
            shut_server,
            scheme: u_scheme,
            name_at: u_name_at,
            logged,
            fcgi: u_fcgi,
            counted,
        } = &mut *up;
        // (The same backend's again: no reference count changes.)
        if !Arc::ptr_eq(u_be, &be) {
            *u_be = Arc::clone(&be);
        }
        if !Arc::ptr_eq(u_farm, &sr.farm) {
            *u_farm = Arc::clone(&sr.farm);
        }
        *u_timeouts = timeouts;
        *server = None;
        *waiter = None;
        *refused_by = None;
        *reused = false;
        *state = UpState::Queued;
        *head = out;
        *body_sent = false;
        *u_req_left = req_left;
        *resp = std::mem::take(&mut spare.resp);
        *resp_left = None;
        *dechunk = false;
        *skip_body = c.head.method == Method::Head && h.method != Method::Head;
        *status = 0;
        *bytes_out = 0;
        *retries_left = sr.farm.retries;
        *attempt_noted = false;
        *avoid = None;
        *method = h.method;
        *client_version = h.version;
        *client_keep_alive = self.keep_alive;
        *lb_src = Some(c.stream_src().ip());
        *u_lb_uri = lb_uri;
        *u_lb_hdr = lb_hdr;
        *u_lb_post = lb_post;
        *t0 = c.req_start.unwrap_or(now);
        *t_start = now;
        *t_queued = None;
        *t_served = None;
        *t_conn = None;
        *t_resp = None;
        *req_line = {
            let mut l = std::mem::take(&mut spare.req_line);
            l.extend_from_slice(
                &received[..received.iter().position(|&c| c == b'\r').unwrap_or(0)],
            );
            l
        };
        *deadline = now;
        *connect_by = now;
        *u_keep_server = keep_server;
        *u_comp_choice = comp_choice;
        *comp = None;
        *store = None;
        *flush_at = None;
        *req_flush_at = None;
        *term = "--";
        *u_te_trailers = te_trailers;
        *resp_wait = None;
        *abort_on_close = sr.abort_on_close && c.fe.abort_on_close;
        *l7 = false;
        *retry_at = None;
        *u_ws_accept = ws_accept;
        *u_upgrade = upgrade;
        *shut_server = false;
        *u_scheme = scheme;
        *u_name_at = name_at;
        *logged = false;
        *u_fcgi = fcgi;
        *counted = (0, 0);
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
                c.bytes_in += n;
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
        self.up = Some(up);
        self.side.borrow_mut().bytes_in = 0;
        self.pick_server(c, ctx);
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
            // answer (HAProxy 2.6 then resets the server connection at
            // once, answers 400 and logs `CH`, even when the server would
            // have answered).
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
        let moved = match up.state {
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
        };
        self.count_continuously(c, ctx.now());
        moved
    }

    /// `option contstats`, as HAProxy 2.6: the bytes that moved since the
    /// last count (the request's as the client sent them, the answer's as
    /// it is forwarded, HAProxy's HTX sizes) go to the frontend's, the
    /// backend's and the server's counters and to the trackers' byte
    /// counts and rates at each run of a proxied exchange that moves data
    /// (each read of either side wakes it), not only at its end;
    /// [`Stream::log_proxy`] adds what is left.
    fn count_continuously(&mut self, c: &H1, now: Tick) {
        if !c.fe.contstats {
            return;
        }
        let Some(up) = self.up.as_mut() else {
            return;
        };
        let d_in = c.bytes_in.saturating_sub(up.counted.0);
        let d_out = up.bytes_out.saturating_sub(up.counted.1);
        if d_in == 0 && d_out == 0 {
            return;
        }
        up.counted = (up.counted.0 + d_in, up.counted.1 + d_out);
        for h in [&c.fe.http, &up.be.http] {
            let h = h.local();
            h.bytes_in.fetch_add(d_in, Ordering::Relaxed);
            h.bytes_out.fetch_add(d_out, Ordering::Relaxed);
        }
        if let Some(s) = &up.server {
            s.counters.bytes_in.fetch_add(d_in, Ordering::Relaxed);
            s.counters.bytes_out.fetch_add(d_out, Ordering::Relaxed);
        }
        c.stk.add_bytes(now, d_in, d_out);
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
                    c.bytes_in += avail.len() as u64;
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
                            c.bytes_in += k as u64;
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
                        Ok((n, done, counted)) => {
                            c.bytes_in += counted;
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
        let sent = sd.send();
        moved |= sent;
        if sent
            && !tunnel
            && up.resp_left.is_none()
            && up.state == UpState::Connected
            && !up.be.l4.indep_streams
        {
            // What is written to the server refreshes its read timeout
            // (HAProxy 2.6 without `option independent-streams`): a slow
            // upload is not cut by `timeout server` while the answer is
            // awaited, as long as its bytes flow. With the option (the
            // backend's), only what the server sends does: an upload
            // longer than `timeout server` gets 504, as with HAProxy.
            let at = ticks::add(ctx.now(), up.timeouts.server);
            up.deadline = up.resp_wait.map_or(at, |w| ticks::first(at, w));
        }
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
        sd.watch_blocked(ctx);

        if tunnel {
            let mut from_server = false;
            if sd.istart < sd.iend && c.pending_out() < bufsize {
                c.wbuf.extend_from_slice(&sd.ibuf[sd.istart..sd.iend]);
                up.bytes_out += (sd.iend - sd.istart) as u64;
                sd.istart = sd.iend;
                moved = true;
                from_server = true;
            }
            // Any movement keeps the tunnel up; with the backend's `option
            // independent-streams` only the server's bytes do (HAProxy
            // 2.6: a server silent for `timeout tunnel` ends the tunnel
            // while its client talks; a silent client does not).
            if moved && (from_server || !up.be.l4.indep_streams) {
                let t = up.timeouts.tunnel;
                up.deadline = ticks::add(ctx.now(), t);
            }
            let server_gone = sd.eof && sd.istart == sd.iend;
            let client_gone = c.eof && c.rstart == c.rend && sd.out_pending() == 0;
            // The client's close is passed on as a half-close (HAProxy's
            // tunnel): the server may still send its last bytes (a
            // CONNECT client's FIN while its server answers). The server's
            // close ends both connections, as HAProxy 2.6 ends the stream
            // then (`tests/framing.rs`, beside haproxy). An HTTP/2
            // client's END_STREAM on its tunnel is such a half-close too
            // (its connection's close is not: it ends both), and an HTTP/2
            // server gets the half-close as its stream's END_STREAM.
            let client_half = c.tr.lane_pipe().is_none_or(|p| p.borrow().half_close);
            let halves = client_half && (sd.h2.is_some() || sd.sock.is_some());
            if halves && client_gone && !server_gone && !up.shut_server {
                if let Some(p) = sd.h2.as_ref() {
                    p.borrow_mut().req_end = true;
                    up.shut_server = true;
                    moved = true;
                    sd.wake_mux(ctx);
                } else if let Some(tr) = sd.sock.as_mut() {
                    tr.close_notify();
                    if let Ok(true) = tr.flush_pending() {
                        let _ = tr.tcp().shutdown(std::net::Shutdown::Write);
                        up.shut_server = true;
                        moved = true;
                    }
                }
            }
            drop(sd);
            self.up = Some(up);
            if server_gone || (client_gone && !halves) {
                // The tunnel's normal end: both connections close.
                self.abort_proxy(c, ctx);
                return true;
            }
            return moved;
        }

        // 4. Response head.
        if up.resp_left.is_none() {
            if sd.istart < sd.iend {
                // An HTTP/2 server's head is bounded by its HPACK list
                // (the connection's `max_fields`), not `tune.http.maxhdr`:
                // HAProxy 2.6 counts that only in its HTTP/1 parser.
                let limits = if sd.is_h2() {
                    crate::h2::lane_limits(&c.w.limits)
                } else {
                    c.w.limits
                };
                let mut r = parse_response_into(
                    &sd.ibuf[sd.istart..sd.iend],
                    &limits,
                    up.method,
                    &mut up.resp,
                );
                if r.is_err() && sd.h2.is_none() {
                    r = relaxed_response(c, &mut up, &sd.ibuf[sd.istart..sd.iend], &limits, r);
                }
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
                            response::count_head(&up);
                            up.l7 = false;
                            let n = up.resp.head_len;
                            let at = c.wbuf.len();
                            let head = &sd.ibuf[sd.istart..sd.istart + n];
                            if up.resp.bare_lf {
                                // Never a lone LF to the client.
                                up.resp.write_crlf(head, &mut c.wbuf);
                            } else {
                                c.wbuf.extend_from_slice(head);
                            }
                            if let Some(m) = &c.fe.h1_case {
                                m.adjust_head(c.wbuf.get_mut(at..).unwrap_or(&mut []));
                            }
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
                        let after = sd.ibuf.get(sd.istart + up.resp.head_len..sd.iend);
                        if up.resp.framing == BodyFraming::Chunked
                            && after.is_some_and(chunks_broken)
                        {
                            // HAProxy's parser reads the body bytes that
                            // came with the head before the head goes on:
                            // a broken chunk there is a 502 (`PH`, no
                            // `Tr`), as a bad head.
                            if let Some(s) = &up.server {
                                s.counters.resp_errors.fetch_add(1, Ordering::Relaxed);
                                observe(s, Seen::HttpRsp);
                            }
                            let buf = &sd.ibuf[sd.istart..sd.iend];
                            let pos = lax::error_position(
                                buf,
                                true,
                                crate::http1::HttpError::BadChunkSize,
                            );
                            capture_response(c, &up, buf, pos);
                            up.t_resp = None;
                            up.keep_server = false;
                            drop(sd);
                            self.up = Some(up);
                            self.fail(c, ctx, ExchangeError::bad_response_head());
                            return true;
                        }
                        if sd.is_h2() {
                            // Its lane's HTTP/1.1 head stands for it.
                            c.vars.get_mut().info.srv_h2 = true;
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
            // No more than fills the client's buffer: a client that reads
            // nothing holds one buffer of answer there and one here (the
            // rest waits on the server's socket), not a buffer and a half.
            let room = bufsize - c.pending_out();
            let avail = &sd.ibuf[sd.istart..sd.iend.min(sd.istart + room)];
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
                        if !up.skip_body {
                            // HAProxy counts the data, de-chunked, as it
                            // came (before compression): `http1::htx`.
                            up.bytes_out += d.data.len() as u64;
                            if d.done {
                                // An HTTP/2 server's answer (chunked by its
                                // pipe) has no end block in HAProxy's HTX
                                // but with trailers.
                                let tail = dec.htx_tail();
                                let h2_bare = sd.is_h2() && tail == 1;
                                up.bytes_out += if h2_bare { 0 } else { tail };
                            }
                        }
                        if up.skip_body {
                            // Read and dropped (a HEAD client).
                        } else if up.comp.is_some() {
                            to_comp = sd.istart + d.data.start..sd.istart + d.data.end;
                            c.sent_run += d.data.len() * compress::COST;
                        } else {
                            // De-chunked (an HTTP/1.0 client): the data
                            // only.
                            c.wbuf.extend_from_slice(&avail[d.data.clone()]);
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
                    sd.istart += avail.len();
                    moved = true;
                }
                Some(Left::Recode(r)) => {
                    let before = r.htx_size();
                    let store = &mut up.store;
                    match r.recode_with(avail, &mut c.wbuf, |d| keep_stored(store, d)) {
                        Ok((n, done)) => {
                            up.bytes_out += r.htx_size() - before;
                            if done && sd.is_h2() && r.htx_tail() == 1 {
                                // (No end block: see `Left::Chunked`.)
                                up.bytes_out = up.bytes_out.saturating_sub(1);
                            }
                            sd.istart += n;
                            moved |= n > 0;
                            if done {
                                up.resp_left = Some(Left::Done);
                            }
                        }
                        Err(_) => fail = true,
                    }
                }
                Some(Left::Done | Left::Compress(_)) | None => {
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
}

/// An HTTP/1 server's answer the strict parser refused (`strict`, its
/// error): read again as HAProxy 2.6 reads it when the backend has `option
/// accept-invalid-http-response`, and kept for `show errors` when it is
/// refused (where HAProxy's parser stops) or taken thanks to a byte only
/// the option lets through (the first such byte), as HAProxy's HTTP/1
/// layer captures it. HTTP/2 servers are not concerned (HAProxy's option
/// is its HTTP/1 parser's).
#[cold]
fn relaxed_response(
    c: &H1,
    up: &mut Upstream,
    buf: &[u8],
    limits: &crate::http1::Limits,
    strict: Result<PStatus<()>, crate::http1::HttpError>,
) -> Result<PStatus<()>, crate::http1::HttpError> {
    let mut r = strict;
    let mut pos = None;
    // Without the option, what HAProxy's strict parser takes and ebb's
    // does not: a version of 8 bytes ending `/` DIGIT `.` DIGIT
    // (`HTTP/1.2`, `FOOO/1.1`).
    {
        let relaxed = up.be.accept_invalid;
        match crate::http1::parse_response_lax(buf, limits, up.method, &mut up.resp, relaxed) {
            Ok(PStatus::Partial) => return Ok(PStatus::Partial),
            Ok(PStatus::Complete(err)) => {
                r = Ok(PStatus::Complete(()));
                pos = err;
            }
            Err(_) => {}
        }
    }
    if let Err(e) = r {
        pos = Some(lax::error_position(buf, true, e));
    }
    if let Some(pos) = pos {
        capture_response(c, up, buf, pos);
    }
    r
}

/// Keeps an HTTP/1 server's answer as its backend's last invalid one
/// (`show errors`), `pos` the byte at fault.
#[cold]
fn capture_response(c: &H1, up: &Upstream, buf: &[u8], pos: usize) {
    up.be.invalid_rep.store(
        buf,
        pos,
        c.w.limits.buf_size,
        Some(c.sess.peer),
        Some((c.fe.name.clone(), c.fe.uuid as i64)),
        up.server
            .as_ref()
            .map(|s| (s.name.clone(), i64::from(s.id))),
    );
}

/// Whether the chunked body bytes `after` (those that came with the
/// head) already break the framing: a bad size, no CRLF after a chunk.
fn chunks_broken(mut after: &[u8]) -> bool {
    let mut d = ChunkedDecoder::answer();
    while !after.is_empty() {
        match d.decode(after) {
            Err(_) => return true,
            Ok(x) if x.done || x.consumed == 0 => return false,
            Ok(x) => after = after.get(x.consumed..).unwrap_or(&[]),
        }
    }
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
