//! A stream: one exchange (HAProxy's `process_stream`), whatever mux
//! carried it.
//!
//! A stream receives a request from its client side, runs the frontend's
//! and then the backend's `http-request` rules, chooses the answer (a
//! fixed answer, a redirect, a deny, a file, a service such as the stats
//! page or the Prometheus exporter, or a backend's server: [`proxy`]),
//! applies the `http-response` rules, counts and logs the exchange, and
//! keeps its timers (the server side's deadlines; the client side keeps
//! its own).
//!
//! What it owns: the exchange's state ([`Stream`]): what it waits on (the
//! disk, a page being built, a server), the response rules that apply, the
//! server side of a proxied exchange ([`proxy::Upstream`]), the server
//! side's socket and tasklet ([`crate::mux::h1::server`]) and an idle server
//! connection kept for the client's next request.
//!
//! How it is driven: its client side calls it through
//! [`crate::mux::h1::Exchange`] (a head arrived; move on; a timer fired;
//! the client left), passing itself so the stream reads the request from
//! the client's buffer and writes the answer into its output. An HTTP/1
//! connection takes a stream from its thread's pool for an exchange and
//! gives it back when it goes idle, unless the stream keeps a server
//! connection for the client's next request (no allocation per request). An HTTP/2 connection runs each of its streams
//! on a *lane*: an HTTP/1 client side over buffers shared with it (see
//! `mux/h2`), so this code serves both protocols; a stream answered at
//! once is started by the HTTP/2 connection itself on its lane's client
//! side, and its answer leaves as frames (`mux/h2/native.rs`). The protocol-neutral
//! messages of [`msg`] are the interface the stream is moving to, so that
//! muxes drive it without HTTP/1 bytes in between; today the stream still
//! reads its parsed HTTP/1 head and writes its output directly.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use sched::{Ctx, Reasons, Status, TaskletId, Tick};

use crate::config::HttpRequestAction;
use crate::http1::{BodyFraming, Drain, Method, TargetForm, CONNECT_ALLOW};
use crate::mux::h1::client::{dst_of, Body, In, LogFacts};
use crate::mux::h1::server::ServerSide;
use crate::mux::h1::Exchange;
use crate::proxy::{redirect_location, BackendKind, FrontendRt};
use crate::rules::ReqView;
use crate::serve::cache::{lookup_blocking, Found};
use crate::serve::files::{decide, normalize_path, Conditions, Decision};
use crate::serve::Service;
use crate::transport::Transport;

pub mod msg;
mod proxy;

use msg::{BodySize, FieldBuf, RespHead};

/// Bodies up to this size are copied behind their head so pipelined answers
/// leave in one write; larger ones are written from the cached file or sent
/// with `sendfile`.
const COPY_BODY_MAX: usize = 4096;

/// The HTTP/1 client connection that drives a stream today.
pub(crate) type H1 = crate::mux::h1::Conn<Stream>;

/// What an exchange under way waits on.
#[derive(Default)]
enum Wait {
    /// Nothing: no exchange, or one answered at once.
    #[default]
    None,
    /// A file lookup is on the blocking pool; the head stays in the buffer.
    Disk(Arc<Mutex<Option<Found>>>),
    /// A stats page or metrics answer is being built by a task at the
    /// best nice; the head stays in the buffer.
    Page(Rc<RefCell<Option<crate::serve::Answer>>>),
    /// A proxied exchange is under way (`up` holds its server side).
    Proxy,
    /// The rules wait for the request's body (`option
    /// http-buffer-request`, `http-request wait-for-body`); the head and
    /// what arrived of the body stay in the buffer.
    Body(Box<BodyWait>),
}

/// Where the request's rules go on once its body is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resume {
    /// From the start (a new request).
    Start,
    /// The frontend's `http-request` rules from this one.
    Fe(usize),
    /// Backend `.0` chosen: its `http-request` rules from this one, or
    /// (`None`) its content rules first (its `option
    /// http-buffer-request`).
    Be(usize, Option<usize>),
}

/// A request whose rules wait for its body: where they go on, what the
/// rules before left, and until when they wait (HAProxy's
/// http_wait_for_msg_body).
struct BodyWait {
    at: Resume,
    edited: Option<Box<crate::rewrite::Edited>>,
    cache_hit: Option<crate::httpcache::Hit>,
    /// Enough once this many bytes arrived (0: the whole body).
    at_least: u64,
    /// The bound on the wait (`time`, `timeout http-request`); `None`:
    /// only the client's read timeout.
    time_ms: Option<u32>,
    deadline: Tick,
    /// `timeout client` since the last byte read.
    read_deadline: Tick,
    /// Bytes in the buffer when last looked at.
    seen: usize,
    /// `http-request strict-mode` as the rules before left it.
    strict: bool,
}

/// What of a message's body framed by `framing` is in `after` (the bytes
/// after its head): a chunked body is de-chunked into `decoded`. A
/// broken chunked body counts as complete: the forwarding path answers
/// it.
pub(super) fn body_in(after: &[u8], framing: BodyFraming, decoded: &mut Vec<u8>) -> BodyNow {
    body_of(
        after,
        framing,
        decoded,
        crate::http1::ChunkedDecoder::default(),
    )
}

/// [`body_in`] for an answer's body (its chunked lines may end with a
/// lone LF: [`crate::http1::ChunkedDecoder::answer`]).
pub(super) fn answer_body_in(after: &[u8], framing: BodyFraming, decoded: &mut Vec<u8>) -> BodyNow {
    body_of(
        after,
        framing,
        decoded,
        crate::http1::ChunkedDecoder::answer(),
    )
}

fn body_of(
    after: &[u8],
    framing: BodyFraming,
    decoded: &mut Vec<u8>,
    mut d: crate::http1::ChunkedDecoder,
) -> BodyNow {
    let mut b = BodyNow::default();
    match framing {
        BodyFraming::ContentLength(n) => {
            b.have = n.min(after.len() as u64);
            b.complete = b.have >= n;
        }
        BodyFraming::Chunked => {
            decoded.clear();
            b.complete = d
                .decode_to_vec(after, decoded)
                .map_or(true, |(_, done)| done);
            b.have = decoded.len() as u64;
            b.decoded = true;
        }
        BodyFraming::None => b.complete = true,
        // Complete when the sender closes (the caller knows).
        BodyFraming::UntilClose => b.have = after.len() as u64,
    }
    b
}

/// What of a message's body is in its buffer.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BodyNow {
    /// All of it (or the message has none).
    pub(super) complete: bool,
    /// The buffer is full: no more can come before some leaves.
    pub(super) full: bool,
    /// The sender closed its side.
    pub(super) closed: bool,
    /// Body bytes there (de-chunked).
    pub(super) have: u64,
    /// The bytes are in a buffer of their own (a chunked body,
    /// de-chunked), not in the read buffer after the head.
    pub(super) decoded: bool,
}

impl BodyNow {
    /// Whether a wait for the body (`at_least` bytes of it, 0: all) is
    /// over.
    pub(super) fn enough(&self, at_least: u64) -> bool {
        self.complete || self.full || self.closed || (at_least > 0 && self.have >= at_least)
    }

    /// The body bytes there: in the read buffer `buf` after the head, or
    /// de-chunked in the stream's buffer.
    pub(super) fn data<'a>(&self, decoded: &'a [u8], buf: &'a [u8], head_len: usize) -> &'a [u8] {
        if self.decoded {
            return decoded;
        }
        let from = head_len.min(buf.len());
        let to = from.saturating_add(self.have as usize).min(buf.len());
        &buf[from..to]
    }
}

/// One exchange at a time of a client connection (reused for the next).
#[derive(Default)]
pub struct Stream {
    wait: Wait,
    /// A redirect rule answering the exchange: HAProxy notes it as the
    /// last final rule once its answer went through the
    /// `http-after-response` rules (they see the rule before it).
    late_rule: Option<crate::config::Loc>,
    /// Backend index and clean path of a request waiting on the disk.
    wait_backend: usize,
    wait_clean: String,
    /// Whether the client connection stays open after the current answer.
    keep_alive: bool,
    /// The client's output length when the current answer started (for
    /// the log).
    resp_start: usize,
    /// The server side of a proxied exchange.
    up: Option<Box<proxy::Upstream>>,
    /// The last exchange's server side, ended, kept with its buffers so
    /// that the client's next proxied request reuses its allocation
    /// (holds no server, waiter or compressor: see `proxy::spent`).
    up_spare: Option<Box<proxy::Upstream>>,
    /// The server socket and its buffers, shared with `side_task`.
    side: Rc<RefCell<ServerSide>>,
    /// The server side's tasklet (`h1_srv`), created at the first
    /// proxied request; every server socket of this client is registered
    /// with it.
    side_task: Option<TaskletId>,
    /// The idle server connections private to this client (at most
    /// `max-session-srv-conns`, in the order they were kept), each kept
    /// for its next request to that server, still registered with
    /// `side_task`.
    attached: Vec<proxy::Attached>,
    /// This client's place in the idle pool: its last server connection,
    /// idle, still registered with `side_task` unless another request
    /// took it ([`crate::backend::pool`]).
    parked: Option<crate::backend::pool::Parked>,
    /// The PROXY header the attached server connection began with, and
    /// the SNI it sent when `sni` depends on the exchange: one that would
    /// differ for the next request (another unique id, another name) is
    /// not reused, as HAProxy keys connections by both.
    pp_sent: Vec<u8>,
    /// The fields of the answers the stream builds (fixed answers, pages,
    /// files), reused from one answer to the next.
    fields: FieldBuf,
    /// A body evaluated per request (`return ... lf-string`), reused.
    scratch: Vec<u8>,
    /// The answer being finished is not logged (`monitor-uri`).
    quiet: bool,
    /// The server name the log gives an answer ebb built itself for a
    /// backend (`<CACHE>` for a cache's; `<files>` when none).
    local_server: Option<&'static str>,
    /// The termination state the log gives such an answer (`--` when
    /// none): `cD` for a body that did not come in time.
    local_term: Option<&'static str>,
    /// What of the request's body is there, and a chunked one de-chunked
    /// (`req.body`).
    body_now: BodyNow,
    body_buf: Vec<u8>,
    /// When the current request's rules started waiting on its body.
    body_wait_start: Tick,
    /// The backend whose stats page is being built.
    page_backend: Option<usize>,
    /// `100 Continue` was sent for the current request (a wait for its
    /// body).
    continued: bool,
    /// The connection is to close after this answer only because ebb
    /// itself would not read the request's body: an `Expect:
    /// 100-continue` body that may never come, or one past
    /// `tune.http.drain-max`. A proxied request's server reads it: the
    /// connection stays (as HAProxy keeps it).
    unread_body_close: bool,
    /// A reference to the connection's frontend held across its requests
    /// ([`Stream::dispatch`] lends it to the answer it carries out while
    /// the connection is borrowed): no shared reference count moved per
    /// request (that count's cache line, which also holds the frontend's
    /// first fields, would travel between the threads at every request).
    /// Dropped when the stream goes back to the pool.
    fe_held: Option<Arc<FrontendRt>>,
    /// The `103 Early Hints` answers the request rules made (HTTP/1
    /// bytes), sent before the rules' decision is carried out.
    hints: std::cell::Cell<Vec<u8>>,
}

/// A cached file is a body the client side can send.
impl crate::mux::h1::FileBody for crate::serve::cache::OpenFile {
    fn bytes(&self) -> Option<&[u8]> {
        self.small.as_deref()
    }

    fn file(&self) -> &std::fs::File {
        &self.file
    }
}

/// A file compressed on the fly: the client side asks for it a slice at a
/// time (`serve::comp`).
struct FileSlices {
    file: Arc<crate::serve::cache::OpenFile>,
    pos: u64,
    end: u64,
    comp: Box<crate::compress::BodyCompressor>,
}

impl crate::mux::h1::SliceBody for FileSlices {
    fn next_slice(&mut self, out: &mut Vec<u8>) -> std::io::Result<usize> {
        // A slice costs `compress::COST` times its size of the run's share.
        let n = crate::serve::comp::compress_slice(
            &self.file,
            &mut self.pos,
            self.end,
            &mut self.comp,
            out,
        )?;
        Ok(n * crate::compress::COST)
    }

    fn is_finished(&self) -> bool {
        self.comp.is_finished()
    }
}

impl Exchange for Stream {
    fn start(&mut self, c: &mut H1, ctx: &mut Ctx) {
        self.answer(c, ctx);
    }

    fn step(&mut self, c: &mut H1, ctx: &mut Ctx) -> bool {
        // The usual states are looked at in place: nothing to take out
        // and put back (nor to drop).
        match self.wait {
            Wait::None => return false,
            Wait::Proxy => return self.proxy_step(c, ctx),
            _ => {}
        }
        match std::mem::take(&mut self.wait) {
            Wait::None | Wait::Proxy => false,
            Wait::Body(w) => self.body_step(c, ctx, w),
            Wait::Disk(slot) => {
                let done = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                let Some(found) = done else {
                    self.wait = Wait::Disk(slot);
                    return false;
                };
                let now = ctx.now();
                let clean = std::mem::take(&mut self.wait_clean);
                if let Some(b) = c.fe.backends.get(self.wait_backend) {
                    c.w.files.borrow_mut().put(b.id, clean, &found, now);
                }
                c.input = In::Head;
                let b = self.wait_backend;
                self.answer_found(c, ctx, b, found);
                true
            }
            Wait::Page(slot) => {
                let done = slot.borrow_mut().take();
                let Some(a) = done else {
                    self.wait = Wait::Page(slot);
                    return false;
                };
                c.input = In::Head;
                // The page is written now: the answer starts here.
                self.resp_start = c.wbuf.len();
                self.fields.clear();
                for (n, v) in &a.headers {
                    self.fields.push(n.as_bytes(), v.as_bytes());
                }
                // A tarpit's error page has its length first, and no
                // `Connection: close` though the connection ends after it
                // (HAProxy's http_reply_and_close says nothing).
                let tarpit = self.local_term == Some("PT");
                if tarpit {
                    let (ka, closing) = (self.keep_alive, c.closing);
                    (self.keep_alive, c.closing) = (true, false);
                    self.reply_at(c, a.status, &[], &a.body, Some(0));
                    (self.keep_alive, c.closing) = (ka, closing || !ka);
                } else {
                    self.reply(c, a.status, &[], &a.body);
                }
                let be = self.page_backend.take();
                if be.is_some() {
                    // A backend's tarpit answers with no server.
                    let tarpit = self.local_term == Some("PT");
                    self.local_server = Some(if tarpit { "<NOSRV>" } else { "<STATS>" });
                }
                self.finish_request(c, ctx, a.status, be, 0);
                true
            }
        }
    }

    fn holds_head(&self) -> bool {
        matches!(self.wait, Wait::Disk(_) | Wait::Page(_))
    }

    fn deadline(&self) -> Option<Tick> {
        if let Wait::Body(w) = &self.wait {
            return Some(sched::ticks::first(w.deadline, w.read_deadline));
        }
        // A compressed body's owed flush (`proxy::FLUSH_DELAY`, either
        // way) is a date too.
        self.up.as_ref().map(|u| {
            [u.flush_at, u.req_flush_at]
                .into_iter()
                .flatten()
                .fold(u.deadline, sched::ticks::first)
        })
    }

    fn active(&self) -> bool {
        self.up.is_some()
    }

    fn on_timer(&mut self, c: &mut H1, ctx: &mut Ctx) -> bool {
        // A connect the server side's tasklet saw complete moves the
        // exchange's deadline on (it did not wake us for it).
        let now = ctx.now();
        if let Wait::Body(w) = &self.wait {
            let d = sched::ticks::first(w.deadline, w.read_deadline);
            if !sched::ticks::is_expired(d, now) {
                return false;
            }
            let at = w.at;
            self.wait = Wait::None;
            self.body_timeout(c, ctx, at);
            return true;
        }
        self.sync_side(c, ctx);
        let expired = self
            .up
            .as_ref()
            .is_some_and(|u| sched::ticks::is_expired(u.deadline, now));
        if expired {
            self.proxy_timeout(c, ctx);
            return true;
        }
        // An owed flush: the run that follows the timer does it.
        self.up.as_ref().is_some_and(|u| {
            [u.flush_at, u.req_flush_at]
                .into_iter()
                .flatten()
                .any(|f| sched::ticks::is_expired(f, now))
        })
    }

    fn reading_request(&self) -> bool {
        self.up.as_ref().is_some_and(|u| !u.request_done())
    }

    fn watches_client(&self) -> bool {
        matches!(self.wait, Wait::Body(_)) || self.up.as_ref().is_some_and(|u| u.watches_client())
    }

    fn client_gone(&mut self, c: &mut H1, ctx: &mut Ctx) {
        if self.up.is_some() {
            self.proxy_client_gone(c, ctx);
        }
        self.release_idle(c, ctx);
        if let Some(t) = self.side_task.take() {
            ctx.kill_tasklet(t);
        }
    }

    fn server_shutdown(&mut self, c: &mut H1, ctx: &mut Ctx, why: u8) {
        if self.up.is_some() {
            self.proxy_shutdown(c, ctx, why);
        }
    }

    fn parkable(&self) -> bool {
        // The server side (`side`) must be as new: no tasklet of its own
        // was ever made (a closing connection's was just killed), nothing
        // used its socket or buffers.
        matches!(self.wait, Wait::None)
            && self.up.is_none()
            && self.side_task.is_none()
            && self.attached.is_empty()
            && self.parked.is_none()
            && Rc::strong_count(&self.side) == 1
            && self.side.try_borrow().is_ok_and(|s| s.unused())
    }

    fn from_pool(_: &crate::worker::Worker) -> Box<Self> {
        STREAMS.with(|p| p.take(Box::default))
    }

    fn to_pool(mut self: Box<Self>, _: &crate::worker::Worker) {
        let keep = self.recycle();
        STREAMS.with(|p| p.give(self, keep));
    }
}

/// The coding a cache hit is sent with under its backend's compression
/// (decided as for a server's answer, [`crate::compress::verdict_stored`]),
/// and its compressor; None: sent as stored.
fn hit_compression(
    c: &H1,
    bi: usize,
    e: &crate::httpcache::Entry,
) -> Option<(
    crate::compress::Coding,
    Box<crate::compress::BodyCompressor>,
)> {
    use crate::compress as z;
    let policy = c.fe.comp.get(bi).cloned().flatten()?;
    let buf = c.rbuf.get(c.rstart..c.rend)?;
    let coding = z::choose_h1(&policy, buf, &c.head)?;
    match z::verdict_stored(&policy, Some(coding), e.status, &e.fields, e.body.len()) {
        z::Verdict::Compress(k) => {
            let enc = z::BodyCompressor::new(k, policy.level).ok()?;
            Some((k, Box::new(enc)))
        }
        z::Verdict::AsIs => None,
    }
}

/// [`crate::proxy::count_denied_req`] with the backend by its index in
/// `fe` (a backend's rules refused the request: it was chosen).
fn count_denied_req(fe: &FrontendRt, be: Option<usize>) {
    let be = be.and_then(|b| fe.backends.get(b));
    crate::proxy::count_denied_req(&fe.http, be.map(|b| &**b));
}

thread_local! {
    /// Exchange states of HTTP/1 streams, taken for an exchange and given
    /// back while their connections idle: one list per scheduler thread
    /// (kept here, not in the thread's `Worker`, which the muxes under
    /// the stream import).
    static STREAMS: crate::worker::FreeList<Box<Stream>> = crate::worker::FreeList::default();
}

/// Buffers of a pooled stream larger than this are freed rather than kept.
const POOLED_BUF_MAX: usize = 16 * 1024;

impl Stream {
    /// Clears what a connection's exchanges left in a parkable stream
    /// (see [`Exchange::parkable`]), keeping its buffers, so that another
    /// connection's next exchange can take it from the thread's pool.
    /// Returns whether it is worth keeping (no buffer grew for an
    /// unusually large message).
    fn recycle(&mut self) -> bool {
        // Every field is named: a new one must be considered here. What
        // ties the stream to its connection is its server side, unused in
        // a parkable stream (`wait` and `up` are `None`, no tasklet, no
        // attached or parked connection); the rest is what one answer
        // leaves for the log of the next, cleared as a new stream's.
        let Stream {
            wait: _,
            wait_backend,
            wait_clean,
            keep_alive,
            resp_start,
            up: _,
            up_spare,
            side: _,
            side_task: _,
            attached: _,
            parked: _,
            pp_sent,
            fields,
            scratch,
            quiet,
            local_server,
            local_term,
            body_now,
            body_buf,
            body_wait_start,
            page_backend,
            continued,
            unread_body_close,
            late_rule,
            fe_held,
            hints,
        } = self;
        hints.get_mut().clear();
        *late_rule = None;
        *fe_held = None;
        // Its backend is its connection's frontend's: not kept past it.
        *up_spare = None;
        *wait_backend = 0;
        wait_clean.clear();
        *keep_alive = false;
        *resp_start = 0;
        pp_sent.clear();
        fields.clear();
        scratch.clear();
        *quiet = false;
        *local_server = None;
        *local_term = None;
        *body_now = BodyNow::default();
        body_buf.clear();
        *body_wait_start = 0;
        *page_backend = None;
        *continued = false;
        *unread_body_close = false;
        // The largest buffers go rather than sit in the pool.
        wait_clean.capacity() <= POOLED_BUF_MAX
            && scratch.capacity() <= POOLED_BUF_MAX
            && body_buf.capacity() <= POOLED_BUF_MAX
    }

    /// Looks at what of the request's body is in the read buffer
    /// ([`BodyNow`]); a chunked body is de-chunked into `body_buf`.
    fn scan_body(&mut self, c: &H1) {
        let buf = &c.rbuf[c.rstart..c.rend];
        let after = buf.get(c.head.head_len..).unwrap_or(&[]);
        let mut b = body_in(after, c.head.framing, &mut self.body_buf);
        b.closed = c.eof;
        b.full = !c.rbuf.is_empty() && c.rend - c.rstart >= c.rbuf.len();
        self.body_now = b;
    }

    /// The rules wait for the body (`Act::WaitBody`): HAProxy's
    /// http_wait_for_msg_body. An `Expect: 100-continue` client is told
    /// to send it.
    fn wait_body(&mut self, c: &mut H1, ctx: &mut Ctx, mut w: Box<BodyWait>) {
        let now = ctx.now();
        w.deadline = match w.time_ms {
            Some(t) => sched::ticks::add(self.body_wait_start, t),
            None => sched::ticks::ETERNITY,
        };
        w.read_deadline = sched::ticks::add(now, c.fe.timeouts.client);
        w.seen = c.rend - c.rstart;
        if c.head.expect_continue && !self.continued && self.body_now.have == 0 {
            // HAProxy's http_handle_expect_hdr: the client is told to send
            // its body, and `Expect` is not forwarded (the server would
            // answer 100 again).
            c.wbuf.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            self.continued = true;
            self.resp_start = c.wbuf.len();
        }
        c.input = In::Stream;
        self.wait = Wait::Body(w);
    }

    /// More of the body may have come: go on with the rules once enough
    /// is there (or the client closed, or the buffer is full).
    fn body_step(&mut self, c: &mut H1, ctx: &mut Ctx, mut w: Box<BodyWait>) -> bool {
        let n = c.rend - c.rstart;
        if n != w.seen {
            w.seen = n;
            w.read_deadline = sched::ticks::add(ctx.now(), c.fe.timeouts.client);
        }
        self.scan_body(c);
        if !self.body_now.enough(w.at_least) {
            self.wait = Wait::Body(w);
            return false;
        }
        let at = w.at;
        let act = self.decide_from(c, at, Some(w));
        if let (true, Act::Proxy(bi, _)) = (self.body_now.closed, &act) {
            // The client left before its whole request came: no server is
            // asked (HAProxy logs the backend, no server, `CR`).
            let bi = *bi;
            self.keep_alive = false;
            c.closing = true;
            self.local_server = Some("<NOSRV>");
            self.local_term = Some("CR");
            let be = c.fe.backends.get(bi).cloned();
            crate::proxy::count_request(&c.fe, be.as_deref(), 0, c.bytes_in, 0);
            self.end_exchange(c, ctx, 0, Some(bi), 0, None);
            return true;
        }
        self.dispatch(c, ctx, act);
        true
    }

    /// The body did not come in time: 408 and close (HAProxy's
    /// `cD` termination, the request counted as failed).
    fn body_timeout(&mut self, c: &mut H1, ctx: &mut Ctx, at: Resume) {
        let fe = Arc::clone(&c.fe);
        let bi = match at {
            Resume::Be(b, _) => Some(b),
            _ => None,
        };
        let be_name = bi.and_then(|b| fe.backends.get(b)).map(|b| b.name.clone());
        self.keep_alive = false;
        c.closing = true;
        self.resp_start = c.wbuf.len();
        self.error_answer(c, &fe, 408, false, be_name.as_deref());
        self.local_server = Some("<NOSRV>");
        self.local_term = Some("cD");
        self.finish_request(c, ctx, 408, bi, 0);
    }

    /// Runs one proxy's `http-request` rules in order, from rule `from`,
    /// on the request as it is now (`st`: rewriting rules change it,
    /// `crate::rewrite`); the first final action that holds decides the
    /// answer. `be` names the backend whose rules these are (`None`: the
    /// frontend's). A `wait-for-body` rule whose body is not there yet
    /// stops the run: [`Act::WaitBody`] says where to go on.
    #[allow(clippy::too_many_arguments)]
    fn request_rules(
        &self,
        c: &H1,
        rules: &[crate::proxy::ReqRule],
        matcher: &crate::rules::Matcher,
        base: &ReqView<'_>,
        st: &mut crate::rewrite::ReqState<'_>,
        be: Option<usize>,
        from: usize,
        body: &BodyNow,
    ) -> Option<Act> {
        let ready = |w: &crate::config::WaitForBody| body.enough(w.at_least);
        let r =
            crate::rewrite::run_request_from(rules, matcher, base, st, &c.w.limits, from, &ready);
        // HAProxy's counters: cache lookups and hits on the proxy whose
        // rules ran; failed rewrites and internal errors on the frontend,
        // and on the backend once one is assigned.
        let counts = std::mem::take(&mut st.counts);
        let mut made = st.take_hints();
        if !made.is_empty() {
            let mut h = self.hints.take();
            h.append(&mut made);
            self.hints.set(h);
        }
        let bhttp = be.and_then(|b| c.fe.backends.get(b)).map(|b| &b.http);
        match bhttp {
            // Nothing to add: no atomic operation on the shared counters.
            _ if counts == crate::proxy::RuleCounts::default() => {}
            Some(h) => {
                h.note_rules(counts);
                c.fe.http
                    .failed_rewrites
                    .fetch_add(counts.failed_rewrites, std::sync::atomic::Ordering::Relaxed);
            }
            None => c.fe.http.note_rules(counts),
        }
        let i = match r {
            Ok(Some(i)) => i,
            Ok(None) => return None,
            Err(_) => {
                for h in std::iter::once(&c.fe.http).chain(bhttp) {
                    h.internal_errors
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                return Some(Act::Error(500));
            }
        };
        let action = &rules.get(i)?.action;
        if be.is_none()
            && matches!(
                action,
                HttpRequestAction::Return(_)
                    | HttpRequestAction::Redirect(_)
                    | HttpRequestAction::Auth { .. }
                    | HttpRequestAction::UseService(_)
            )
        {
            // Answered by the frontend itself (HAProxy counts it when the
            // stream's backend is still the frontend).
            intercepted(&c.fe);
        }
        Some(match action {
            HttpRequestAction::Return(_) => {
                // Its formats see the request as edited so far.
                let done = rules.get(i)?.prepared.as_ref().and_then(|p| {
                    p.evaluate(|| crate::sample::Ctx {
                        req: Some(st.req()),
                        ..*base
                    })
                });
                base.note_last_rule(&rules.get(i)?.loc);
                Act::Return(be, i, done)
            }
            HttpRequestAction::Redirect(rd) => {
                let r = st.req();
                // The Host field as it came (HAProxy's `redirect scheme`),
                // not an absolute target's authority.
                let host = r.head.header(r.buf, "host");
                let cx = crate::sample::Ctx {
                    req: Some(r),
                    ..*base
                };
                let loc = redirect_location(rd, r.head.target.get(r.buf), host, Some(&cx));
                Act::Redirect(
                    loc,
                    rd.code,
                    rules.get(i).map(|r| r.loc.clone()),
                    rd.cookie.clone(),
                )
            }
            HttpRequestAction::Deny { status } => Act::Deny(be, *status),
            HttpRequestAction::Tarpit { status } => Act::Tarpit(be, *status),
            HttpRequestAction::Auth { realm } => {
                // HAProxy: the realm is the rule's proxy's name by default.
                let r = match (realm, be) {
                    (Some(r), _) => r.clone(),
                    (None, Some(b)) => {
                        c.fe.backends
                            .get(b)
                            .map_or_else(String::new, |b| b.name.clone())
                    }
                    (None, None) => c.fe.name.clone(),
                };
                Act::Auth(be, r)
            }
            HttpRequestAction::WaitForBody(w) => {
                let at = match be {
                    Some(b) => Resume::Be(b, Some(i)),
                    None => Resume::Fe(i),
                };
                Act::WaitBody(Box::new(BodyWait {
                    at,
                    edited: st.edited.take(),
                    cache_hit: st.cache_hit.take(),
                    at_least: w.at_least,
                    time_ms: Some(w.time_ms),
                    deadline: 0,
                    read_deadline: 0,
                    seen: 0,
                    strict: st.strict,
                }))
            }
            HttpRequestAction::Reject => Act::Reject(false, be, true),
            HttpRequestAction::SilentDrop => Act::Reject(true, be, true),
            // A strict normalizer refused the target.
            HttpRequestAction::NormalizeUri(_) => Act::Error(400),
            _ => Act::Service,
        })
    }

    /// Decides what answers the request in `head` (reading the buffer and
    /// the rules, changing nothing).
    fn decide(&self, c: &H1) -> Act {
        self.decide_from(c, Resume::Start, None)
    }

    /// [`Stream::decide`] from a point where the rules waited for the
    /// body (`resume`, with what the rules before it left).
    fn decide_from(&self, c: &H1, at: Resume, left: Option<Box<BodyWait>>) -> Act {
        let buf = &c.rbuf[c.rstart..c.rend];
        let fe = &c.fe;
        let body = self.body_now;
        let orig = crate::sample::Req {
            buf,
            head: &c.head,
            body: body.data(&self.body_buf, buf, c.head.head_len),
        };
        let mut st = crate::rewrite::ReqState::new(orig);
        if let Some(l) = left {
            let l = *l;
            st.edited = l.edited;
            st.cache_hit = l.cache_hit;
            st.strict = l.strict;
        }
        let tr = &c.tr;
        let dst = dst_of(tr, c.dst.as_deref().copied());
        // With the request as it came: the rules read it from this context
        // itself until one changes it (`rewrite::run_request_from`).
        let base = ReqView {
            req: Some(orig),
            ..sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
        };
        let wait_here = |at: Resume, time_ms: Option<u32>| {
            Act::WaitBody(Box::new(BodyWait {
                at,
                edited: None,
                cache_hit: None,
                at_least: 0,
                time_ms,
                deadline: 0,
                read_deadline: 0,
                seen: 0,
                strict: true,
            }))
        };
        let (fe_from, be_at) = match at {
            Resume::Start => {
                // The request as a sample context, only for a frontend
                // that reads it here (most have none of these).
                if fe.monitor.is_some()
                    || !fe.captures.is_empty()
                    || !fe.l4.content_rules.is_empty()
                {
                    let received = ReqView {
                        req: Some(st.req()),
                        ..base
                    };
                    // `monitor-uri`: before any rule (HAProxy's order). A URI from
                    // `/` is compared with the path, another with the whole target.
                    if let Some((uri, fail)) = &fe.monitor {
                        let target = if uri.starts_with('/') {
                            c.head.path.get(buf)
                        } else {
                            c.head.target.get(buf)
                        };
                        if target == uri.as_bytes() {
                            intercepted(fe);
                            let failed = fail.iter().any(|f| fe.matcher.holds(Some(f), &received));
                            return Act::Monitor(failed);
                        }
                    }
                    crate::sample::logline::capture_headers(&fe.captures, false, &received);
                    // HAProxy runs `tcp-request content` rules before the HTTP ones.
                    if let Some(a) =
                        content_rules(&fe.l4.content_rules, &fe.matcher, &received, None)
                    {
                        return a;
                    }
                }
                // `option http-buffer-request`: the body before the
                // frontend's rules (HAProxy's http_wait_for_request_body,
                // bounded by `timeout http-request`).
                if fe.buffer_request && !body.enough(0) {
                    return wait_here(Resume::Fe(0), Some(fe.timeouts.http_request));
                }
                (0, None)
            }
            Resume::Fe(i) => (i, None),
            Resume::Be(bi, j) => (0, Some((bi, j))),
        };
        let bi = match be_at {
            Some((bi, _)) => bi,
            None => {
                if !no_rule_left(&fe.http_request, fe_from, &mut st) {
                    if let Some(a) = self.request_rules(
                        c,
                        &fe.http_request,
                        &fe.matcher,
                        &base,
                        &mut st,
                        None,
                        fe_from,
                        &body,
                    ) {
                        return a;
                    }
                }
                if let Some(a) = restrict_names(&mut st, fe.restrict_hdr_names, &c.w.limits) {
                    return a;
                }
                // Without stats or `use_backend` rules the default backend
                // takes it: no sample context to build.
                if fe.stats.is_none() && fe.use_backends.is_empty() {
                    let Some(bi) = fe.default_backend else {
                        return Act::NoBackend;
                    };
                    bi
                } else {
                    let view = ReqView {
                        req: Some(st.req()),
                        ..base
                    };
                    if let Some(a) = stats_act(fe.stats.as_ref(), &fe.matcher, &view, None) {
                        // An admin form comes whole before the page reads it.
                        if stats_post_waits(&a, &c.head, &body) {
                            let end = Resume::Fe(fe.http_request.len());
                            return wait_here(end, Some(fe.timeouts.http_request));
                        }
                        intercepted(fe);
                        return a;
                    }
                    let Some(bi) = fe.choose_backend(&view) else {
                        return Act::NoBackend;
                    };
                    bi
                }
            }
        };
        let Some(backend) = c.fe.backends.get(bi) else {
            return Act::NoBackend;
        };
        if backend.l4.tcp_mode {
            // A tcp frontend's upgraded stream routed to a tcp backend
            // (`tcp::upgrade`): HAProxy cannot set it and closes the
            // connection without an answer, logged `IR` (an internal
            // error, not a denied request).
            return Act::TcpBackend(bi);
        }
        // The backend's view, made only for the rules that read it (most
        // backends have none: a copy of the whole context saved).
        let be_base = || ReqView {
            be: Some(&backend.name),
            ..base
        };
        let be_from = match be_at {
            Some((_, Some(j))) => j,
            _ => {
                // The backend's `option http-buffer-request` when the
                // frontend did not wait: before the backend's rules.
                if backend.buffer_request
                    && !fe.buffer_request
                    && !body.enough(0)
                    && be_at.is_none()
                {
                    return wait_here(Resume::Be(bi, None), backend.http_request_ms);
                }
                // The backend's content rules, then its own http-request
                // rules, come after the frontend's.
                if !backend.l4.content_rules.is_empty() {
                    let view = ReqView {
                        req: Some(st.req()),
                        ..be_base()
                    };
                    if let Some(a) =
                        content_rules(&backend.l4.content_rules, &backend.matcher, &view, Some(bi))
                    {
                        return a;
                    }
                }
                // The backend's HTTP processing begins: its content
                // rules' trackers count the request (HAProxy's order).
                c.stk.count_backend_request();
                0
            }
        };
        if !no_rule_left(&backend.http_request, be_from, &mut st) {
            if let Some(a) = self.request_rules(
                c,
                &backend.http_request,
                &backend.matcher,
                &be_base(),
                &mut st,
                Some(bi),
                be_from,
                &body,
            ) {
                return a;
            }
        }
        if let Some(a) = restrict_names(&mut st, backend.restrict_hdr_names, &c.w.limits) {
            return a;
        }
        if backend.stats.is_some() {
            let view = ReqView {
                req: Some(st.req()),
                ..be_base()
            };
            if let Some(a) = stats_act(backend.stats.as_ref(), &backend.matcher, &view, Some(bi)) {
                if stats_post_waits(&a, &c.head, &body) {
                    let end = Resume::Be(bi, Some(backend.http_request.len()));
                    return wait_here(end, backend.http_request_ms);
                }
                return a;
            }
        }
        // A `cache-use` rule found the answer: the cache answers instead of
        // the backend (HAProxy's cache applet).
        if let Some(hit) = st.cache_hit.take() {
            return Act::Cache(bi, Box::new(hit));
        }
        match &backend.kind {
            BackendKind::Servers(_) => Act::Proxy(bi, st.edited),
            // `OPTIONS *` goes through the rules and to the servers as any
            // request (HAProxy's); ebb's file server answers it itself.
            BackendKind::Files(_) if c.head.target_form == TargetForm::Asterisk => Act::Options,
            // A CONNECT goes through the rules to the servers as any
            // request (HAProxy's: a 2xx answer makes the exchange a
            // tunnel); the file server opens no tunnel.
            BackendKind::Files(_) if c.head.method == Method::Connect => Act::Connect,
            BackendKind::Files(_) => {
                let r = st.req();
                if !matches!(r.head.method, Method::Get | Method::Head) {
                    return Act::Files(bi, Err(405));
                }
                let target = r.head.path.get(r.buf);
                // The head as received (no rule rewrote it) and its path
                // clean already: read in place by the answer.
                if st.edited.is_none() {
                    if let Some(n) = crate::serve::files::clean_len(target) {
                        return Act::Files(bi, Ok(CleanPath::Head(n)));
                    }
                }
                match normalize_path(target) {
                    Ok(p) => Act::Files(bi, Ok(CleanPath::Made(p))),
                    Err(e) => Act::Files(bi, Err(e.status())),
                }
            }
        }
    }

    /// A complete request head is in `head`: decide and queue the answer.
    fn answer(&mut self, c: &mut H1, ctx: &mut Ctx) {
        c.sess
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // What the client sent, as HAProxy counts it (`crate::http1::htx`): the head
        // now, the body as it is forwarded (`%U`, the stats' `bin`).
        let h = &c.head;
        c.bytes_in = crate::http1::htx::head_size(
            h.method_span.len() + h.target.len() + 8,
            c.rbuf.get(c.rstart..c.rend).unwrap_or_default(),
            &h.headers,
        );
        self.resp_start = c.wbuf.len();
        {
            let v = c.vars.get_mut();
            v.begin_request();
            v.info.accept_date = Some(c.sess.accepted());
            v.info.req_age_ms = c.req_start.map_or(0, |t| ctx.now().wrapping_sub(t));
            // The request line for the `capture.req.*` fetches: the
            // parser took it as `method SP target SP HTTP/1.x` (one space
            // each, as the HTTP/2 side writes it too), so its end is known
            // from the head without a scan for it.
            let buf = &c.rbuf[c.rstart..c.rend];
            let start = c.head.method_span.start as usize;
            let end = (c.head.target.end as usize + b" HTTP/1.1".len()).min(buf.len());
            v.req_line.clear();
            v.req_line
                .extend_from_slice(buf.get(start..end).unwrap_or_default());
        }
        c.stk.begin(ctx.now());
        let mut keep_alive =
            crate::drain::keep_alive(c.head.keep_alive && c.fe.keep_alive, c.stopping);
        // A body we will not read: with `Expect: 100-continue` the client
        // has not sent it yet, so answer and close rather than wait for it;
        // otherwise drop it as it comes, before the next request.
        // A body past `tune.http.drain-max` is not read at all.
        let (drain, drain_keep) = Drain::plan(c.head.framing, c.w.limits.max_drain);
        let mut next = In::Head;
        self.unread_body_close = false;
        match drain {
            Some(_) if c.head.expect_continue => {
                self.unread_body_close = keep_alive;
                keep_alive = false;
            }
            Some(d) => next = In::Discard(Box::new(d)),
            None => {
                if !drain_keep {
                    self.unread_body_close = keep_alive;
                }
                keep_alive &= drain_keep;
            }
        }
        c.next_input = Some(next);
        self.keep_alive = keep_alive;
        self.body_wait_start = ctx.now();
        self.continued = false;
        self.scan_body(c);
        let act = match c.upgraded.take() {
            None => self.decide(c),
            // The first request of a tcp stream that became HTTP goes on
            // where the stream was (`tcp::upgrade`): after the frontend's
            // content rules, or at the backend it chose.
            Some(u) => {
                let at = match u.backend {
                    Some(b) => Resume::Be(b as usize, None),
                    None => Resume::Fe(0),
                };
                self.decide_from(c, at, None)
            }
        };
        self.dispatch(c, ctx, act);
    }

    /// Carries out the answer [`Stream::decide`] chose, with the
    /// frontend the stream holds for its connection ([`Stream::fe_held`]).
    fn dispatch(&mut self, c: &mut H1, ctx: &mut Ctx, act: Act) {
        let hints = self.hints.get_mut();
        if !hints.is_empty() {
            // `http-request early-hint`: the 103s go first.
            let at = c.wbuf.len();
            c.wbuf.append(hints);
            if let Some(m) = &c.fe.h1_case {
                m.adjust_heads(c.wbuf.get_mut(at..).unwrap_or(&mut []));
            }
        }
        let fe = match self.fe_held.take() {
            Some(f) if Arc::ptr_eq(&f, &c.fe) => f,
            _ => Arc::clone(&c.fe),
        };
        self.dispatch_with(c, ctx, act, &fe);
        self.fe_held = Some(fe);
    }

    /// [`Stream::dispatch`]'s work, `fe` being the connection's frontend.
    fn dispatch_with(&mut self, c: &mut H1, ctx: &mut Ctx, act: Act, fe: &Arc<FrontendRt>) {
        let keep_alive = self.keep_alive;
        let version = c.head.version;
        let head_req = c.head.method == Method::Head;
        match act {
            Act::WaitBody(w) => self.wait_body(c, ctx, w),
            Act::Auth(bi, realm) => {
                // HAProxy's http_action_auth: the proxy's 401 answer with
                // `WWW-Authenticate`, the connection kept; an HTTP error
                // for the trackers, logged `LR`.
                c.stk.note_error();
                let v = format!("Basic realm=\"{}\"", realm.replace(['"', '\\'], ""));
                let hdr: [(&[u8], &[u8]); 1] = [(b"WWW-Authenticate", v.as_bytes())];
                match fe.error_replies.iter().find(|(s, _)| *s == 401) {
                    Some((_, p)) => {
                        let be_name = bi.and_then(|b| fe.backends.get(b)).map(|b| b.name.clone());
                        self.answer_prepared(c, fe, p, keep_alive, be_name.as_deref(), &hdr);
                    }
                    None => match fe.errorfile(401) {
                        // Sent as written, the field added after its
                        // status line (HAProxy adds it to the answer).
                        Some(raw) => {
                            let at = raw
                                .windows(2)
                                .position(|w| w == b"\r\n")
                                .map_or(raw.len(), |p| p + 2);
                            c.wbuf.extend_from_slice(&raw[..at]);
                            c.wbuf.extend_from_slice(b"WWW-Authenticate: ");
                            c.wbuf.extend_from_slice(v.as_bytes());
                            c.wbuf.extend_from_slice(b"\r\n");
                            c.wbuf.extend_from_slice(&raw[at..]);
                            c.closing = true;
                        }
                        None => c.error_response(401, keep_alive, version, head_req, &hdr),
                    },
                }
                self.local_term = Some("LR");
                self.finish_request(c, ctx, 401, bi, 0);
            }
            Act::Monitor(failed) => {
                // Not logged: HAProxy's monitor requests never are.
                if failed {
                    c.error_response(503, keep_alive, version, head_req, &[]);
                } else {
                    self.fields.clear();
                    self.reply(
                        c,
                        200,
                        &[(b"Content-Type", b"text/html")],
                        b"<html><body><h1>200 OK</h1>\nService ready.\n</body></html>\n",
                    );
                }
                self.quiet = true;
                self.finish_request(c, ctx, if failed { 503 } else { 200 }, None, 0);
                self.quiet = false;
            }
            Act::Options => {
                self.fields.clear();
                self.reply(c, 200, &[(b"Allow", b"GET, HEAD, OPTIONS")], b"");
                self.finish_request(c, ctx, 200, None, 0);
            }
            Act::Return(be, i, done) => {
                let be_arc = be.and_then(|b| c.fe.backends.get(b).cloned());
                let rules = match &be_arc {
                    Some(b) => &b.http_request,
                    None => &fe.http_request,
                };
                let Some(p) = rules.get(i).and_then(|r| r.prepared.as_ref()) else {
                    return;
                };
                let reply = match rules.get(i).map(|r| &r.action) {
                    Some(HttpRequestAction::Return(r)) => r,
                    _ => return,
                };
                if reply.deny {
                    // A deny with its own answer: counted; the connection
                    // goes on when the exchange allows, as HAProxy's.
                    c.stk.note_error();
                    count_denied_req(fe, be);
                }
                let be_name = be_arc.as_ref().map(|b| b.name.as_str());
                if let crate::config::ReturnBody::Errorfile(raw) = &reply.body {
                    let st = p.status;
                    match raw {
                        // Sent as written: its framing is its own.
                        Some(bytes) => {
                            c.wbuf.extend_from_slice(bytes);
                            c.closing = true;
                        }
                        None => self.error_answer(c, fe, st, keep_alive, be_name),
                    }
                    self.local_term = Some("LR");
                    self.finish_return(c, ctx, st, be);
                    return;
                }
                let now = ctx.now();
                self.answer_done(c, fe, p, done.as_deref(), keep_alive, be_name, &[], now);
                let st = p.status;
                self.local_term = Some("LR");
                self.finish_return(c, ctx, st, be);
            }
            Act::Connect => {
                // The file server opens no tunnel: CONNECT is refused.
                let allow: &[(&[u8], &[u8])] = &[(b"Allow", CONNECT_ALLOW)];
                c.error_response(405, keep_alive, version, head_req, allow);
                self.finish_request(c, ctx, 405, None, 0);
            }
            Act::Redirect(loc, code, rule, cookie) => {
                self.late_rule = rule;
                // HAProxy 2.6 closes after a redirect answering a request
                // with a body (its rules run before the body is read:
                // `Connection: close`, http_apply_redirect_rule).
                if c.head.framing != BodyFraming::None {
                    self.keep_alive = false;
                    c.closing = true;
                }
                self.fields.clear();
                let (f, n) = redirect_fields(code, &loc, cookie.as_deref());
                self.reply_at(c, code, &f[..n], b"", Some(0));
                self.local_term = Some("LR");
                self.finish_request(c, ctx, code, None, 0);
            }
            act @ (Act::Stats(..) | Act::Service) => {
                // The page is built by a task at the best nice: tasks join
                // the normal class, whose share of each turn is kept even
                // when I/O floods the urgent one, and a nice of -1024 puts
                // it before every other task; so the stats answer under
                // full load (HAProxy runs its stats applet niced the same
                // way).
                let svc = match act {
                    Act::Stats(rt, admin, be) => {
                        // A backend's page: its `http-after-response`
                        // rules run on it and the log names it.
                        self.page_backend = be;
                        let buf = &c.rbuf[c.rstart..c.rend];
                        let post = (c.head.method == Method::Post).then(|| {
                            self.body_now
                                .data(&self.body_buf, buf, c.head.head_len)
                                .to_vec()
                        });
                        Service::Stats {
                            rt,
                            path: c.head.path.get(buf).to_vec(),
                            authz: c.head.header(buf, "authorization").map(|v| v.to_vec()),
                            admin,
                            post,
                        }
                    }
                    _ => {
                        let buf = &c.rbuf[c.rstart..c.rend];
                        Service::Prometheus {
                            uri: c.head.path.get(buf).to_vec(),
                        }
                    }
                };
                let mut job = Some(svc);
                let slot = Rc::new(std::cell::RefCell::new(None));
                let s2 = Rc::clone(&slot);
                let me = c.me;
                let t = ctx.new_task("stats_page", move |ctx: &mut Ctx, _id, _why| {
                    if let Some(j) = job.take() {
                        *s2.borrow_mut() = Some(j.answer());
                    }
                    if let Some(me) = me {
                        ctx.tasklet_wakeup(me);
                    }
                    Status::Done
                });
                ctx.set_nice(t, -1024);
                ctx.wakeup(t, Reasons::INIT);
                c.input = In::Stream;
                self.wait = Wait::Page(slot);
            }
            Act::Error(st) => {
                c.error_response(st, false, version, head_req, &[]);
                self.finish_request(c, ctx, st, None, 0);
            }
            Act::Deny(be, st) => {
                c.stk.note_error();
                count_denied_req(fe, be);
                // HAProxy keeps the connection when the exchange allows,
                // and logs the refusal `PR` (the proxy's condition).
                let be_name = be
                    .and_then(|b| c.fe.backends.get(b))
                    .map(|b| b.name.clone());
                self.error_answer(c, fe, st, keep_alive, be_name.as_deref());
                self.local_term = Some("PR");
                self.finish_return(c, ctx, st, be);
            }
            Act::Tarpit(be, st) => {
                // HAProxy counts a tarpit as a denied request, holds it
                // `timeout tarpit`, then answers and reads nothing more
                // (it leaves the connection to its timeout; ebb closes).
                c.stk.note_error();
                count_denied_req(fe, be);
                self.keep_alive = false;
                // Logged `PT` once answered, the wait as its Tw.
                self.local_term = Some("PT");
                if be.is_some() {
                    self.page_backend = be;
                }
                let slot = Rc::new(std::cell::RefCell::new(None));
                let (s2, me) = (Rc::clone(&slot), c.me);
                let t = ctx.new_task("tarpit", move |ctx: &mut Ctx, _id, _why| {
                    *s2.borrow_mut() = Some(crate::serve::error(st));
                    if let Some(me) = me {
                        ctx.tasklet_wakeup(me);
                    }
                    Status::Done
                });
                ctx.set_expire(t, sched::ticks::add(ctx.now(), fe.timeouts.tarpit));
                c.input = In::Stream;
                self.wait = Wait::Page(slot);
            }
            Act::Reject(silent, bi, line) => {
                // HAProxy counts it as a denied request and logs it with
                // `PR` and no status; nothing is sent. (Its reject counts
                // on the stream's backend even before one is chosen: the
                // proxy itself, a `listen` section's own backend row.)
                count_denied_req(fe, bi.or(fe.own_backend));
                if silent {
                    crate::transport::silent_drop(c.tr.tcp());
                    c.silent = true;
                }
                self.keep_alive = false;
                c.closing = true;
                self.end_exchange(c, ctx, 0, bi, 0, Some(line));
            }
            Act::TcpBackend(bi) => {
                self.keep_alive = false;
                c.closing = true;
                self.local_term = Some("IR");
                self.end_exchange(c, ctx, 0, Some(bi), 0, Some(true));
            }
            Act::NoBackend => {
                c.error_response(503, keep_alive, version, head_req, &[]);
                self.finish_request(c, ctx, 503, None, 0);
            }
            Act::Files(bi, Err(st)) => {
                let extra: &[(&[u8], &[u8])] = if st == 405 {
                    &[(b"Allow", b"GET, HEAD")]
                } else {
                    &[]
                };
                c.error_response(st, keep_alive, version, head_req, extra);
                self.finish_request(c, ctx, st, Some(bi), 0);
            }
            Act::Proxy(bi, edited) => {
                self.start_proxy(c, ctx, bi, edited);
            }
            Act::Cache(bi, hit) => self.answer_cached(c, ctx, bi, &hit),
            Act::Files(bi, Ok(path)) => {
                let now = ctx.now();
                let bid = c.fe.backends.get(bi).map_or(0, |b| b.id);
                let buf = &c.rbuf[c.rstart..c.rend];
                let clean: &[u8] = match &path {
                    CleanPath::Head(n) => c.head.path.get(buf).get(..*n).unwrap_or_default(),
                    CleanPath::Made(p) => p.as_bytes(),
                };
                let hit = c.w.files.borrow_mut().get(bid, clean, now);
                if let Some(found) = hit {
                    if let CleanPath::Made(p) = path {
                        crate::serve::files::recycle_path(p);
                    }
                    self.answer_found(c, ctx, bi, found);
                    return;
                }
                let clean = match path {
                    CleanPath::Made(p) => p,
                    // (Clean is ASCII: always text.)
                    CleanPath::Head(_) => String::from_utf8(clean.to_vec()).unwrap_or_default(),
                };
                if clean.is_empty() {
                    // (Not reached: a clean path starts with `/`.)
                    c.error_response(404, keep_alive, version, head_req, &[]);
                    self.finish_request(c, ctx, 404, Some(bi), 0);
                    return;
                }
                // Off to the blocking pool; the head stays in the buffer
                // until the answer is written.
                let BackendKind::Files(cfg) = &c.fe.backends[bi].kind else {
                    return;
                };
                let slot = Arc::new(Mutex::new(None));
                let s2 = Arc::clone(&slot);
                let cfg = cfg.clone();
                let c2 = clean.clone();
                let handle = ctx.handle();
                let me = c.me;
                let job = move || {
                    let f = lookup_blocking(&cfg, &c2);
                    *s2.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
                    if let Some(me) = me {
                        handle.wake_tasklet(me);
                    }
                };
                if c.w.pool.submit(job).is_err() {
                    c.error_response(503, keep_alive, version, head_req, &[]);
                    self.finish_request(c, ctx, 503, Some(bi), 0);
                    return;
                }
                self.wait_backend = bi;
                self.wait_clean = clean;
                c.input = In::Stream;
                self.wait = Wait::Disk(slot);
            }
        }
    }

    /// Writes the answer for a file lookup's result.
    fn answer_found(&mut self, c: &mut H1, ctx: &mut Ctx, bi: usize, found: Found) {
        // The answer starts here: the output may have been written out
        // (and the buffer emptied) while the file was looked up.
        self.resp_start = c.wbuf.len();
        c.vars.get_mut().begin_response();
        let version = c.head.version;
        let head_req = c.head.method == Method::Head;
        let keep_alive = self.keep_alive;
        let f = match found {
            Found::Refused(r) => {
                let st = r.status();
                c.error_response(st, keep_alive, version, head_req, &[]);
                self.finish_request(c, ctx, st, Some(bi), 0);
                return;
            }
            Found::AddSlash(loc) => {
                self.fields.clear();
                self.reply(c, 301, &[(b"Location", loc.as_bytes())], b"");
                self.finish_request(c, ctx, 301, Some(bi), 0);
                return;
            }
            Found::Listing(html) => {
                let ct: &[u8] = b"text/html; charset=utf-8";
                let coded = {
                    let buf = &c.rbuf[c.rstart..c.rend];
                    let policy = c.fe.comp.get(bi).and_then(|p| p.as_deref());
                    crate::serve::comp::whole_body(policy, buf, &c.head, ct, html.as_bytes())
                };
                self.fields.clear();
                self.fields.push(b"Content-Type", ct);
                let body = match &coded {
                    Some((ce, b)) => {
                        self.fields.push(b"Content-Encoding", ce.as_bytes());
                        self.fields.push(b"Vary", b"Accept-Encoding");
                        b.as_slice()
                    }
                    None => html.as_bytes(),
                };
                self.reply(c, 200, &[], body);
                self.finish_request(c, ctx, 200, Some(bi), 0);
                return;
            }
            Found::File(f) => f,
        };
        // A precompressed sibling, or compression on the fly (serve::comp).
        let plan = {
            let buf = &c.rbuf[c.rstart..c.rend];
            let policy = c.fe.comp.get(bi).and_then(|p| p.as_deref());
            crate::serve::comp::plan_file(f, policy, buf, &c.head)
        };
        let f = Arc::clone(&plan.file);
        let v = &f.validators;
        let decision = {
            let buf = &c.rbuf[c.rstart..c.rend];
            decide(&Conditions::of_request(buf, &c.head.headers), v)
        };
        let backend = Arc::clone(&c.fe.backends[bi]);
        let max_age = match &backend.kind {
            BackendKind::Files(c) => c.max_age,
            BackendKind::Servers(_) => None,
        };
        let (status, range) = match decision {
            Decision::Full => (200, Some((0, v.len))),
            Decision::Partial { start, end } => (206, Some((start, end + 1))),
            Decision::NotModified => (304, None),
            Decision::Unsatisfiable => (416, None),
        };
        let mut cr = String::new();
        let logged;
        let compress = plan.compress.filter(|_| status == 200);
        let weak = compress.and_then(|_| crate::compress::weak_etag(v.etag.as_bytes()));
        let coding = plan.sibling.or(compress).and_then(|c| c.content_encoding());
        let rules = !backend.http_response.is_empty() || !c.fe.http_response.is_empty();
        // The file's own fields as its cache entry holds them ready, when
        // they go out as they are: no rule to see them, no weak ETag, not
        // a 416 (which has none).
        let own = (!rules && compress.is_none() && status != 416 && f.fields.max_age == max_age)
            .then_some(&f.fields);
        let cc = max_age
            .filter(|_| own.is_none())
            .map(|a| format!("max-age={a}"));
        // The common answer (the file's own fields alone, whole or 304, no
        // rule): no field list to build.
        let bare = own.is_some()
            && coding.is_none()
            && !plan.vary
            && matches!(decision, Decision::Full | Decision::NotModified);
        if bare {
            self.fields.clear();
            logged = status;
        } else {
            let mut hdrs = crate::http1::Fields::<8>::new();
            if status != 416 {
                if own.is_none() {
                    hdrs.push((b"Content-Type", f.content_type.as_bytes()));
                    hdrs.push((b"Last-Modified", v.last_modified.as_bytes()));
                    hdrs.push((b"ETag", weak.as_deref().unwrap_or(v.etag.as_bytes())));
                    if compress.is_none() {
                        hdrs.push((b"Accept-Ranges", b"bytes"));
                    }
                    if let Some(cc) = &cc {
                        hdrs.push((b"Cache-Control", cc.as_bytes()));
                    }
                }
                if let Some(ce) = coding {
                    hdrs.push((b"Content-Encoding", ce.as_bytes()));
                }
                if plan.vary {
                    hdrs.push((b"Vary", b"Accept-Encoding"));
                }
            }
            match decision {
                Decision::Partial { start, end } => {
                    cr = format!("bytes {start}-{end}/{}", v.len);
                }
                Decision::Unsatisfiable => cr = format!("bytes */{}", v.len),
                _ => {}
            }
            if !cr.is_empty() {
                hdrs.push((b"Content-Range", cr.as_bytes()));
            }
            // No response rule: the fields go out as they are.
            let edited = rules.then(|| {
                let tr = &c.tr;
                let dst = dst_of(tr, c.dst.as_deref().copied());
                let sctx = crate::sample::Ctx {
                    be: Some(&backend.name),
                    ..sample_ctx(tr, c.sess.peer, &c.fe.name, &dst, c.vars.cell(), &c.stk)
                };
                apply_edits(&c.fe, &backend, hdrs.to_vec(), status, &sctx)
            });
            if let Some((_, _, Some(d))) = edited {
                // `http-response deny`: an answer of its own instead.
                self.resp_start = c.wbuf.len();
                let st = self.write_denied(c, &backend, d, self.keep_alive);
                self.finish_request(c, ctx, st, Some(bi), 0);
                return;
            }
            logged = edited.as_ref().map_or(status, |e| e.1);
            self.fields.clear();
            match &edited {
                Some((fields, _, _)) => {
                    for (n, val) in fields {
                        self.fields.push(n, val);
                    }
                }
                None => {
                    for (n, val) in hdrs.iter() {
                        self.fields.push(n, val);
                    }
                }
            }
        }
        // The body's size follows the file's status (a 304 has none); the
        // rules' status is the one sent and logged. A compressed body is
        // produced chunked by its slices (`serve::comp`), so its size is
        // unknown (compression is for HTTP/1.1 clients only).
        let size = match range {
            Some(_) if compress.is_some() => BodySize::Unknown,
            Some((s, e)) => BodySize::Exact(e - s),
            None => BodySize::Empty,
        };
        let head = RespHead {
            fields: own.map_or(msg::Fields::EMPTY, |o| o.list.fields()),
            pre: own.map(|o| o.prepared()),
            extra: self.fields.fields(),
            close: !keep_alive,
            ..RespHead::new(logged, size)
        };
        c.respond_head(head);
        let mut body_len = 0;
        // Made (and boxed at once: the compressor is large, not moved
        // about) only when a body goes out compressed.
        let comp = match (range, head_req, compress) {
            (Some(_), false, Some(k)) => {
                let level =
                    c.fe.comp
                        .get(bi)
                        .and_then(|p| p.as_ref())
                        .map_or(1, |p| p.level);
                crate::compress::BodyCompressor::new(k, level)
                    .ok()
                    .map(Box::new)
            }
            _ => None,
        };
        if let (Some((s, e)), Some(comp)) = (range, comp) {
            c.body = Some(Body::Slices(Box::new(FileSlices {
                file: Arc::clone(&f),
                pos: s,
                end: e,
                comp,
            })));
        } else if let (Some((s, e)), false) = (range, head_req) {
            body_len = e - s;
            if let Some(data) = &f.small {
                let (s, e) = (s as usize, (e as usize).min(data.len()));
                // A head the HTTP/2 connection took: it sends the body
                // from the file's bytes, not through the output buffer.
                let native = c.native_answer().is_some_and(|a| a.follows > 0);
                if e - s <= COPY_BODY_MAX && !native {
                    // Counted in the output buffer's growth, not again.
                    body_len = 0;
                    c.wbuf.extend_from_slice(&data[s..e]);
                } else {
                    c.body = Some(Body::Mem {
                        file: Arc::clone(&f) as Arc<dyn crate::mux::h1::FileBody>,
                        pos: s,
                        end: e,
                    });
                }
            } else if e > s {
                c.body = Some(Body::Sendfile {
                    file: Arc::clone(&f) as Arc<dyn crate::mux::h1::FileBody>,
                    off: s,
                    end: e,
                });
            }
        }
        self.finish_request(c, ctx, logged, Some(bi), body_len);
    }

    /// A small answer the stream makes itself (fixed answers, redirects,
    /// pages): the fields already in `self.fields`, then `hdrs`, then the
    /// body, through the client side's one output path.
    fn reply(&mut self, c: &mut H1, status: u16, hdrs: &[(&[u8], &[u8])], body: &[u8]) {
        self.reply_at(c, status, hdrs, body, None);
    }

    /// [`Stream::reply`] with the `Content-Length` before the field
    /// `length_at` ([`RespHead::length_at`]).
    fn reply_at(
        &mut self,
        c: &mut H1,
        status: u16,
        hdrs: &[(&[u8], &[u8])],
        body: &[u8],
        length_at: Option<u8>,
    ) {
        for (n, v) in hdrs {
            self.fields.push(n, v);
        }
        let size = match body.len() {
            0 => BodySize::Empty,
            n => BodySize::Exact(n as u64),
        };
        let head = RespHead {
            extra: self.fields.fields(),
            close: !self.keep_alive,
            length_at,
            ..RespHead::new(status, size)
        };
        c.respond(head, &[body]);
    }

    /// Writes an answer from a cache: the stored head (or `304 Not
    /// Modified` for a conditional request it satisfies) with its `Age`,
    /// through the backend's and the frontend's `http-response` rules as
    /// a server's answer would go, then the body (none for HEAD or 304).
    fn answer_cached(&mut self, c: &mut H1, ctx: &mut Ctx, bi: usize, hit: &crate::httpcache::Hit) {
        self.resp_start = c.wbuf.len();
        {
            let v = c.vars.get_mut();
            v.begin_response();
            v.info.cache_hit = Some(Arc::clone(&hit.cache.name));
        }
        let e = &hit.entry;
        let version = c.head.version;
        let head_req = c.head.method == Method::Head;
        let ka = self.keep_alive;
        // The backend's compression applies to a hit as to a server's
        // answer (HAProxy 2.6's compression filter comes after its cache).
        let comp = if hit.not_modified {
            None
        } else {
            hit_compression(c, bi, e)
        };
        if let Some(Ok(mut v)) = c.vars.cell().map(|v| v.try_borrow_mut()) {
            v.info.res_comp = comp.as_ref().map(|(k, _)| k.name());
        }
        let out = &mut c.wbuf;
        let status = if hit.not_modified { 304 } else { e.status };
        out.extend_from_slice(b"HTTP/1.1 ");
        crate::http1::push_decimal(out, u64::from(status));
        out.push(b' ');
        if hit.not_modified {
            out.extend_from_slice(b"Not Modified");
        } else {
            out.extend_from_slice(&e.reason);
        }
        out.extend_from_slice(b"\r\n");
        let mut etag = None;
        for (n, v) in &e.fields {
            if comp.is_some() && n.eq_ignore_ascii_case(b"etag") {
                etag = Some(&v[..]);
                continue;
            }
            out.extend_from_slice(n);
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"Age: ");
        crate::http1::push_decimal(out, crate::httpcache::age_of(e));
        out.extend_from_slice(b"\r\n");
        if let Some((k, _)) = &comp {
            let v = crate::compress::Verdict::Compress(*k);
            crate::compress::write_h1_fields(out, v, etag);
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
        } else if !hit.not_modified || e.had_length {
            // (A 304 says the stored answer's length too when the server
            // gave one, as HAProxy's cache replays its head: RFC 9110
            // §8.6 allows it.)
            out.extend_from_slice(b"Content-Length: ");
            crate::http1::push_decimal(out, e.body.len() as u64);
            out.extend_from_slice(b"\r\n");
        }
        if !ka {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if version == crate::http1::Version::Http10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        let backend = Arc::clone(&c.fe.backends[bi]);
        let logged = {
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let buf = &c.rbuf[c.rstart..c.rend];
            let sctx = crate::sample::Ctx {
                req: Some(crate::sample::Req {
                    buf,
                    head: &c.head,
                    body: self.body_now.data(&self.body_buf, buf, c.head.head_len),
                }),
                be: Some(&backend.name),
                ..sample_ctx(tr, c.sess.peer, &c.fe.name, &dst, c.vars.cell(), &c.stk)
            };
            let sets = [
                (&backend.http_response[..], &backend.matcher),
                (&c.fe.http_response[..], &c.fe.matcher),
            ];
            crate::rewrite::rewrite_in_place(&sets, &sctx, &mut c.wbuf, self.resp_start)
                .unwrap_or((status, None))
        };
        if let (_, Some(d)) = logged {
            // `http-response deny`: the cached answer is replaced.
            c.wbuf.truncate(self.resp_start);
            let st = self.write_denied(c, &backend, d, self.keep_alive);
            self.local_server = Some("<CACHE>");
            self.finish_request(c, ctx, st, Some(bi), 0);
            return;
        }
        let logged = logged.0;
        if let Some((_, mut z)) = comp {
            let at = c.wbuf.len();
            if z.write(&e.body, crate::compress::Then::End, &mut c.wbuf)
                .is_ok()
            {
                crate::proxy::count_compressed(&c.fe, Some(&backend), z.totals());
            } else {
                // (Not reached with ebb's encoders; the client then sees
                // a cut body rather than a wrong one.)
                c.wbuf.truncate(at);
                c.closing = true;
            }
        } else if !hit.not_modified && !head_req {
            c.wbuf.extend_from_slice(&e.body);
        }
        if !ka {
            c.closing = true;
        }
        self.local_server = Some("<CACHE>");
        self.finish_request(c, ctx, logged, Some(bi), 0);
    }

    /// A `return` (or `deny` with an answer) of the frontend's rules, or
    /// of backend `be`'s: that backend's `http-after-response` rules run
    /// on it too, and the log names it without a server (HAProxy's).
    fn finish_return(&mut self, c: &mut H1, ctx: &mut Ctx, status: u16, be: Option<usize>) {
        if be.is_some() {
            self.local_server = Some("<NOSRV>");
        }
        self.finish_request(c, ctx, status, be, 0);
    }

    /// Notes a redirect rule held back for the `http-after-response` rules
    /// as the exchange's last final rule.
    pub(super) fn note_late_rule(&mut self, c: &H1) {
        if let Some(loc) = self.late_rule.take() {
            if let Some(mut v) = c.vars.try_borrow_mut() {
                v.info.last_rule = Some(loc);
            }
        }
    }

    /// The answer is queued: log it and move on to what follows the head.
    fn finish_request(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        status: u16,
        backend: Option<usize>,
        body: u64,
    ) {
        let status = self.after_response(c, backend, status);
        self.note_late_rule(c);
        if status == 101 {
            // An answer of ebb's made a 101 by a rule: no tunnel follows
            // (there is no server), the connection ends after it.
            c.closing = true;
            self.keep_alive = false;
        }
        let be = backend.and_then(|b| c.fe.backends.get(b));
        let sent = (c.wbuf.len() - self.resp_start) as u64 + body + c.native_sent();
        crate::proxy::count_request(&c.fe, be.map(|b| &**b), status, c.bytes_in, sent);
        self.end_exchange(c, ctx, status, backend, sent, None);
    }

    /// Ends an exchange ebb answered itself (`rejected`: a `tcp-request
    /// content` rule refused it, nothing was sent): counters, log line,
    /// and on to what follows the head.
    fn end_exchange(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        status: u16,
        backend: Option<usize>,
        sent: u64,
        // A rule refused the request (logged `PR`): `Some(true)` once the
        // request line is known (http-request rules, a backend's content
        // rules), `Some(false)` before (a frontend's content rules).
        rejected: Option<bool>,
    ) {
        let now = ctx.now();
        let err = backend.is_some() && (400..500).contains(&status);
        c.stk.end(now, err, false, c.bytes_in, sent);
        if !self.quiet && c.logs_exchange() {
            let buf = &c.rbuf[c.rstart..c.rend];
            let line_end = buf
                .iter()
                .position(|&c| c == b'\r' || c == b'\n')
                .unwrap_or(0);
            let tq = c.elapsed(ctx, c.req_start);
            let local = self.local_server.take().unwrap_or("<files>");
            let (bname, server) = match backend.and_then(|b| c.fe.backends.get(b)) {
                Some(b) if rejected.is_none() => (b.name.as_str(), local),
                Some(b) => (b.name.as_str(), "<NOSRV>"),
                None => (c.fe.name.as_str(), "<NOSRV>"),
            };
            // HAProxy's line for a request its rules refused: no timer but
            // Tt, status -1, and "<BADREQ>" when the frontend's content
            // rules refused it (they run before it notes the request). An
            // answer ebb made itself (`L`: return, redirect, auth; `P`: a
            // deny) has no server time (Tr -1); a tarpit's wait is its Tw.
            let local_term = self.local_term.take().unwrap_or("--");
            let (times, term, line) = match rejected {
                None if local_term == "PT" => ([-1, tq, -1, -1, tq], "PT", &buf[..line_end]),
                None if matches!(local_term.as_bytes()[0], b'C' | b'L' | b'P') => {
                    ([tq, -1, -1, -1, tq], local_term, &buf[..line_end])
                }
                None => ([tq, -1, -1, 0, tq], local_term, &buf[..line_end]),
                // `IR`: an upgraded stream routed to a tcp backend.
                Some(true) if local_term == "IR" => ([-1, -1, -1, -1, tq], "IR", &buf[..line_end]),
                Some(true) => ([-1, -1, -1, -1, tq], "PR", &buf[..line_end]),
                Some(false) => ([-1, -1, -1, -1, tq], "PR", &b"<BADREQ>"[..]),
            };
            let entry = c.log_entry(LogFacts {
                backend: bname,
                server,
                times,
                status,
                bytes: sent,
                term,
                request_line: line,
            });
            let ab = crate::proxy::abnormal(term.as_bytes(), false, false, Some(status));
            if let Some(level) = crate::rewrite::exchange_log_level(&c.fe, ab, c.vars.cell()) {
                c.w.log_access_sd(crate::log::format(&entry), c.fe.log_sd(&entry), level);
            }
        }
        c.rstart += c.head.head_len.min(c.rend - c.rstart);
        c.input = c.next_input.take().unwrap_or(In::Head);
        c.req_start = None;
        c.idle_since = now;
    }

    /// Runs the `http-after-response` rules on the answer ebb wrote at
    /// `resp_start` (still all in the buffer); returns the status to log.
    pub(super) fn after_response(
        &mut self,
        c: &mut H1,
        backend: Option<usize>,
        status: u16,
    ) -> u16 {
        if c.wpos > self.resp_start {
            return status;
        }
        let be = backend.and_then(|b| c.fe.backends.get(b));
        // No rule to run: no sample context to build for them.
        if c.fe.after_response.is_empty() && be.is_none_or(|b| b.after_response.is_empty()) {
            return status;
        }
        let tr = &c.tr;
        let dst = dst_of(tr, c.dst.as_deref().copied());
        let sctx = crate::sample::Ctx {
            be: be.map(|b| b.name.as_str()),
            ..sample_ctx(tr, c.sess.peer, &c.fe.name, &dst, c.vars.cell(), &c.stk)
        };
        let be = be.map(|b| &**b);
        crate::rewrite::after_local(&c.fe, be, &sctx, &mut c.wbuf, self.resp_start)
            .unwrap_or(status)
    }
}

impl Stream {
    /// Writes a prepared answer (`http-request return`, an `http-error`
    /// reply) through the client side's one output path, with what
    /// `lf-string` / `hdr` evaluate to for this request, and `extra`
    /// fields after its own.
    #[allow(clippy::too_many_arguments)]
    fn answer_prepared(
        &mut self,
        c: &mut H1,
        fe: &FrontendRt,
        p: &crate::proxy::Prepared,
        keep_alive: bool,
        be: Option<&str>,
        extra: &[(&[u8], &[u8])],
    ) {
        self.answer_done(c, fe, p, None, keep_alive, be, extra, 0);
    }

    /// [`Stream::answer_prepared`] with the formats already evaluated
    /// (`done`) when the rule ran; `now` is the scheduler turn's tick (0
    /// when unknown), for the `Date` of a whole literal answer.
    #[allow(clippy::too_many_arguments)]
    fn answer_done(
        &mut self,
        c: &mut H1,
        fe: &FrontendRt,
        p: &crate::proxy::Prepared,
        done: Option<&crate::proxy::Evaluated>,
        keep_alive: bool,
        be: Option<&str>,
        extra: &[(&[u8], &[u8])],
        now: Tick,
    ) {
        if let (None, Some(lit), true) = (done, &p.literal, extra.is_empty()) {
            // All literal: an HTTP/1.1 request kept alive takes the whole
            // answer written ahead (the same bytes: `WholeAnswer`), made
            // at the first one.
            // HAProxy's `content-length` goes before the `content-type`
            // it adds last (when it adds one).
            let length_at = p.literal_length_at;
            if keep_alive && p.literal_plain {
                let whole = p.h1_whole.get_or_init(|| {
                    let head = RespHead {
                        fields: lit.fields(),
                        pre: Some(lit.prepared()),
                        length_at,
                        ..RespHead::new(p.status, BodySize::Exact(p.body.len() as u64))
                    };
                    crate::mux::h1::out::whole_answer(head, &[&p.body])
                });
                if let Some(w) = whole {
                    if c.respond_whole(w, now) {
                        return;
                    }
                }
            }
            // Else its fields and body as they were built; the
            // muxes copy the fields' prepared forms unless one of them is
            // a field a mux decides on (then read from the added ones).
            let base = RespHead::new(p.status, BodySize::Exact(p.body.len() as u64));
            let head = if p.literal_plain {
                RespHead {
                    fields: lit.fields(),
                    pre: Some(lit.prepared()),
                    close: !keep_alive,
                    length_at,
                    ..base
                }
            } else {
                RespHead {
                    extra: lit.fields(),
                    close: !keep_alive,
                    length_at,
                    ..base
                }
            };
            c.respond(head, &[&p.body]);
            return;
        }
        self.fields.clear();
        let mut scratch = std::mem::take(&mut self.scratch);
        let body = {
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let buf = &c.rbuf[c.rstart..c.rend];
            let cx = ReqView {
                req: Some(crate::sample::Req {
                    buf,
                    head: &c.head,
                    body: self.body_now.data(&self.body_buf, buf, c.head.head_len),
                }),
                be,
                ..sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            p.render(&cx, done, &mut self.fields, &mut scratch)
        };
        let length_at = p.content_type_at(body, self.fields.fields());
        for (n, v) in extra {
            self.fields.push(n, v);
        }
        let head = RespHead {
            extra: self.fields.fields(),
            close: !keep_alive,
            length_at,
            ..RespHead::new(p.status, BodySize::Exact(body.len() as u64))
        };
        c.respond(head, &[body]);
        self.scratch = scratch;
    }

    /// Writes the answer of the `http-response deny` rule at `denied`
    /// (set 0: the backend's rules, 1: the frontend's) in place of the
    /// one refused, and closes after it (HAProxy's http_reply_and_close).
    /// Returns its status.
    pub(super) fn write_denied(
        &mut self,
        c: &mut H1,
        be: &crate::proxy::BackendRt,
        denied: crate::rewrite::Denied,
        keep_alive: bool,
    ) -> u16 {
        let fe = Arc::clone(&c.fe);
        // The server's answer is replaced by ebb's (HTTP/1.1: `res.ver`).
        if let Some(mut v) = c.vars.try_borrow_mut() {
            v.info.srv_h2 = false;
        }
        let rules = if denied.set == 0 {
            &be.http_response
        } else {
            &fe.http_response
        };
        let Some(rule) = rules.get(denied.rule) else {
            return 0;
        };
        if let (crate::config::HttpResponseAction::Redirect(rd), Some(loc)) =
            (&rule.action, &denied.location)
        {
            // As HAProxy's answer: the code, the location, no body.
            self.late_rule = Some(rule.loc.clone());
            if !keep_alive {
                self.keep_alive = false;
                c.closing = true;
            }
            self.fields.clear();
            let (f, n) = redirect_fields(rd.code, loc, rd.cookie.as_deref());
            self.reply_at(c, rd.code, &f[..n], b"", Some(0));
            return rd.code;
        }
        let crate::config::HttpResponseAction::Deny(ret) = &rule.action else {
            return 0;
        };
        // HAProxy keeps the client's connection after the answer when the
        // exchange allows it; an errorfile's bytes are sent as written
        // (their framing is their own): the connection closes after them.
        let raw = matches!(ret.body, crate::config::ReturnBody::Errorfile(Some(_)));
        let keep_alive = keep_alive && !raw;
        if !keep_alive {
            self.keep_alive = false;
            c.closing = true;
        }
        match (&ret.body, &rule.prepared) {
            (crate::config::ReturnBody::Errorfile(Some(raw)), _) => {
                c.wbuf.extend_from_slice(raw);
            }
            (_, Some(p)) => self.answer_prepared(c, &fe, p, keep_alive, Some(&be.name), &[]),
            _ => self.error_answer(c, &fe, ret.status, keep_alive, Some(&be.name)),
        }
        // Noted once its answer is made, as HAProxy's.
        if let Some(mut v) = c.vars.try_borrow_mut() {
            v.info.note_last_rule(&rule.loc);
        }
        ret.status
    }

    /// The frontend's error answer for `status`: its `http-error` reply,
    /// its errorfile, or ebb's page.
    fn error_answer(
        &mut self,
        c: &mut H1,
        fe: &FrontendRt,
        status: u16,
        keep_alive: bool,
        be: Option<&str>,
    ) {
        match fe.error_replies.iter().find(|(s, _)| *s == status) {
            Some((_, p)) => self.answer_prepared(c, fe, p, keep_alive, be, &[]),
            None => {
                let (version, head_req) = (c.head.version, c.head.method == Method::Head);
                c.error_response(status, keep_alive, version, head_req, &[]);
            }
        }
    }
}

/// Runs the `http-response` rules (the backend's, then the frontend's, as
/// HAProxy orders them) on the fields of a file answer ebb builds itself;
/// returns the fields and the status they leave.
fn apply_edits(
    fe: &FrontendRt,
    be: &crate::proxy::BackendRt,
    hdrs: Vec<(&[u8], &[u8])>,
    status: u16,
    ctx: &crate::sample::Ctx<'_>,
) -> (crate::rewrite::Fields, u16, Option<crate::rewrite::Denied>) {
    let mut head = crate::rewrite::ResHead::new(
        status,
        Vec::new(),
        hdrs.into_iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect(),
    );
    let sets = [
        (&be.http_response[..], &be.matcher),
        (&fe.http_response[..], &fe.matcher),
    ];
    crate::rewrite::run_response(&sets, ctx, &mut head);
    (head.fields, head.status, head.denied)
}

/// Whether a proxy's `http-request` rules from `from` on are none (most
/// proxies have none): then a run would only reset the mode, as it does
/// when a proxy's rules start, and add no counter; done here, with no
/// call.
#[inline(always)]
fn no_rule_left(
    rules: &[crate::proxy::ReqRule],
    from: usize,
    st: &mut crate::rewrite::ReqState<'_>,
) -> bool {
    if from < rules.len() || st.counts != crate::proxy::RuleCounts::default() {
        return false;
    }
    if from == 0 {
        st.strict = true;
    }
    true
}

/// The sample context of an exchange on this connection, without request
/// or response (the caller adds what it has): the one place that says
/// what a connection gives to fetches.
/// `option http-restrict-req-hdr-names` after a proxy's rules: the
/// answer when the request stops there (403 for `reject`, as HAProxy's
/// deny; 500 when the edited request is no longer valid).
fn restrict_names(
    st: &mut crate::rewrite::ReqState<'_>,
    mode: crate::config::RestrictHdrNames,
    limits: &crate::http1::Limits,
) -> Option<Act> {
    match st.restrict_hdr_names(mode, limits) {
        Ok(()) => None,
        Err(crate::rewrite::RestrictRefused::Forbidden) => Some(Act::Deny(None, 403)),
        Err(crate::rewrite::RestrictRefused::Failed) => Some(Act::Error(500)),
    }
}

pub(crate) fn sample_ctx<'a>(
    tr: &'a Transport,
    peer: SocketAddr,
    fe: &'a str,
    dst: &'a dyn Fn() -> Option<SocketAddr>,
    vars: Option<&'a std::cell::RefCell<crate::sample::VarStore>>,
    stk: &'a crate::table::Stk,
) -> crate::sample::Ctx<'a> {
    crate::sample::Ctx {
        src: peer,
        dst,
        fe,
        be: None,
        srv: None,
        tls: tr.is_tls(),
        sni: tr.sni(),
        client_cert: tr.client_cert(),
        req: None,
        res: None,
        vars,
        stk: Some(stk),
        payload: None,
        res_body: None,
    }
}

/// Where a file request's clean path is ([`Act::Files`]).
enum CleanPath {
    /// The first that many bytes of the head's path: already clean
    /// (`serve::files::clean_len`), read in place.
    Head(usize),
    /// Made by `serve::files::normalize_path`.
    Made(String),
}

/// What answers a request, decided before anything is written.
enum Act {
    /// `monitor-uri`: whether a `monitor fail` condition holds (503).
    Monitor(bool),
    Options,
    /// A CONNECT request to the file server, or from an HTTP/2 client:
    /// 405 (no tunnel opened).
    Connect,
    /// An `http-request return` rule: (the backend's, or the frontend's
    /// when `None`; index).
    Return(Option<usize>, usize, Option<Box<crate::proxy::Evaluated>>),
    /// A server backend, and the request as rules rewrote it (`None`:
    /// unchanged).
    Proxy(usize, Option<Box<crate::rewrite::Edited>>),
    /// A redirect: the location, the code, and the rule (where it is
    /// written).
    /// The location, the code, the rule, its `Set-Cookie` value.
    Redirect(Vec<u8>, u16, Option<crate::config::Loc>, Option<String>),
    /// `http-request deny` (the rule's backend, `None` for the
    /// frontend's; the status).
    Deny(Option<usize>, u16),
    /// `http-request tarpit`: this status after `timeout tarpit` (the
    /// rule's backend, as `Deny`).
    Tarpit(Option<usize>, u16),
    NoBackend,
    /// A file backend: the clean path, or the status refusing it.
    Files(usize, Result<CleanPath, u16>),
    /// A failed rewrite (HAProxy's strict mode): 500.
    Error(u16),
    /// The stats page (`stats uri`); whether `stats admin` allows actions.
    Stats(Arc<crate::proxy::StatsRt>, bool, Option<usize>),
    /// `http-request use-service prometheus-exporter`.
    Service,
    /// An answer from a cache (`http-request cache-use`).
    Cache(usize, Box<crate::httpcache::Hit>),
    /// The rules wait for the request's body first.
    WaitBody(Box<BodyWait>),
    /// `http-request auth`: 401 with this realm (the rule's backend, or
    /// the frontend's).
    Auth(Option<usize>, String),
    /// A `reject` (true: `silent-drop`) of the frontend's rules (`None`)
    /// or a backend's: the connection closes without an answer; the last
    /// field says whether the log knows the request line (not when the
    /// frontend's `tcp-request content` rules refused it).
    Reject(bool, Option<usize>, bool),
    /// A tcp frontend's upgraded stream routed to this tcp backend: the
    /// connection closes without an answer, logged `IR`.
    TcpBackend(usize),
}

/// Runs `tcp-request content` rules on a parsed request (HAProxy: in an
/// HTTP proxy they see the whole head at once, so they never wait): a
/// `reject` or `silent-drop` closes the connection without an answer.
fn content_rules(
    rules: &[crate::l4rules::TcpRuleRt],
    m: &crate::rules::Matcher,
    view: &ReqView<'_>,
    be: Option<usize>,
) -> Option<Act> {
    if rules.is_empty() {
        return None;
    }
    match crate::l4rules::run_rules(rules, 0, m, view, false, None, &mut false) {
        crate::l4rules::Verdict::Reject => Some(Act::Reject(false, be, be.is_some())),
        crate::l4rules::Verdict::SilentDrop => Some(Act::Reject(true, be, be.is_some())),
        _ => None,
    }
}

/// Whether the stats page's act must wait for the rest of a POST's body
/// (an admin form, read only when `stats admin` allows it).
fn stats_post_waits(a: &Act, head: &crate::http1::RequestHead, body: &BodyNow) -> bool {
    matches!(a, Act::Stats(_, true, _)) && head.method == Method::Post && !body.enough(0)
}

/// Counts a request the frontend answered itself.
fn intercepted(fe: &FrontendRt) {
    fe.http
        .local()
        .intercepted
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The stats page's act when the request is for it.
fn stats_act(
    st: Option<&Arc<crate::proxy::StatsRt>>,
    m: &crate::rules::Matcher,
    view: &ReqView<'_>,
    be: Option<usize>,
) -> Option<Act> {
    let st = st?;
    let req = view.req?;
    let method_ok = matches!(req.head.method, Method::Get | Method::Head | Method::Post);
    if !crate::serve::is_stats_page(st, req.head.path.get(req.buf), method_ok) {
        return None;
    }
    let admin = st.admin.iter().any(|c| m.holds(Some(c), view));
    Some(Act::Stats(Arc::clone(st), admin, be))
}

/// A field's name and value.
type Field<'a> = (&'a [u8], &'a [u8]);

/// A redirect's fields, as HAProxy 2.6's http_apply_redirect_rule: the
/// location, and `Cache-Control: no-cache` for the codes a cache may not
/// keep on their own (302, 303, 307; not 301 nor 308), then the rule's
/// `Set-Cookie` (`set-cookie`, `clear-cookie`).
/// Returns the fields and how many of them go.
fn redirect_fields<'a>(
    code: u16,
    loc: &'a [u8],
    cookie: Option<&'a str>,
) -> ([Field<'a>; 3], usize) {
    let mut f: [Field<'a>; 3] = [(b"Location", loc), (b"", b""), (b"", b"")];
    let mut n = 1;
    if matches!(code, 302 | 303 | 307) {
        f[n] = (b"Cache-Control", b"no-cache");
        n += 1;
    }
    if let Some(c) = cookie {
        f[n] = (b"Set-Cookie", c.as_bytes());
        n += 1;
    }
    (f, n)
}
