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
//!
//! Where each part lives: this file holds the stream's state, the calls
//! its client side makes ([`Exchange`], with the timers) and the thread's
//! pool of streams; then, in the order an exchange goes through them:
//! - [`decide`]: the analysis: a head arrived; the frontend's and the
//!   backend's rules and the choice of what answers ([`decide::Act`]);
//! - [`body`]: the request's body for the rules that wait for it;
//! - [`dispatch`]: carrying out that choice;
//! - [`reply`], [`files`], [`cache`]: the answers ebb makes itself, a
//!   file backend's, a cache's (each through the `http-response` rules);
//!   [`proxy`]: a server's;
//! - [`end`]: the `http-after-response` rules, the counters and the log
//!   line of an answer ebb made (a server's exchange ends in [`proxy`]).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use sched::{Ctx, TaskletId, Tick};

use crate::mux::h1::client::In;
use crate::mux::h1::server::ServerSide;
use crate::mux::h1::Exchange;
use crate::proxy::FrontendRt;
use crate::serve::cache::Found;
use crate::transport::Transport;

mod body;
mod cache;
mod decide;
mod dispatch;
mod end;
mod files;
pub mod msg;
mod proxy;
mod reply;

use body::{answer_body_in, body_in, BodyNow, BodyWait};
use msg::FieldBuf;

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
    /// The rules wait for the answer of a `do-resolve` rule's name (the
    /// resolver wakes the connection); the head stays in the buffer.
    Resolve(Box<BodyWait>),
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
            Wait::Resolve(w) => {
                if w.lookup.as_ref().is_some_and(|l| l.result().is_none()) {
                    self.wait = Wait::Resolve(w);
                    return false;
                }
                let act = self.decide_from(c, w.at, Some(w));
                self.dispatch(c, ctx, act);
                true
            }
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
        matches!(self.wait, Wait::Disk(_) | Wait::Page(_) | Wait::Resolve(_))
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
}

/// The sample context of an exchange on this connection, without request
/// or response (the caller adds what it has): the one place that says
/// what a connection gives to fetches.
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
        fc: Some(tr.tcp()),
        early: false,
    }
}
