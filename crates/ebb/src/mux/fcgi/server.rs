//! FastCGI connections to a server (`server ... proto fcgi`), as HAProxy
//! 2.6's FCGI mux keeps them.
//!
//! A connection is one tasklet (`fcgi_srv`) owning the socket, a
//! [`Demux`] of the application's records and the requests it carries.
//! A stream of ebb that picked such a server gets a [`Pipe`] to one of
//! them, as for an HTTP/2 server ([`crate::mux::h2::server`]): it writes
//! its request into the pipe as it writes it for any server (an HTTP/1.1
//! head, then the body by length or chunks) and reads the answer back as
//! HTTP/1.1.
//!
//! ```text
//!   stream          ServerSide      fcgi_srv (this)                 application
//!   head + body ──> obuf ──> Pipe.req ──> BEGIN_REQUEST, PARAMS, STDIN ──> socket
//!   answer      <── ibuf <── Pipe.resp <── STDOUT (fcgi::cgi), END_REQUEST
//! ```
//!
//! A request begins once its head is whole (and, for a chunked body, the
//! whole body: CONTENT_LENGTH must say its length; HAProxy's filter waits
//! for it, and refuses one past a buffer with a 400): BEGIN_REQUEST
//! (FCGI_KEEP_CONN with `option keep-conn`), its PARAMS ([`params`]),
//! then its body as STDIN records as it comes, an empty one at its end.
//! Request ids are odd, from 1, as HAProxy numbers them.
//!
//! Sharing: a connection takes one request at a time unless the
//! application multiplexes (`option mpxs-conns`, or FCGI_MPXS_CONNS "1"
//! in its GET_VALUES_RESULT with `option get-values`), then up to
//! `max-reqs` (or FCGI_MAX_REQS). `http-reuse` applies as to HTTP/2
//! connections ([`Reuse`]). Without `keep-conn` the application closes
//! the connection after its answer: one request each. An END_REQUEST
//! saying FCGI_CANT_MPX_CONN takes the connection to one request at a
//! time, FCGI_OVERLOADED or FCGI_UNKNOWN_ROLE to none more (HAProxy's
//! reading of them). With no request left, a kept connection is one of
//! its server's idle connections, closed as the purge timer says (see
//! [`crate::backend::pool`]).
//!
//! Failures: a connect that fails is the stream's connect failure; a
//! connection that closes before an answer's head ends that answer (the
//! proxy sends a safe request again on a new connection when the one it
//! tried was reused, else answers 502); a request that cannot be made
//! into parameters is answered 500 (`Pipe::fault`), an answer that is
//! not CGI 502. A stream that leaves before its answer ends has its
//! request aborted (ABORT_REQUEST); the connection waits for the
//! application's END_REQUEST before it gives that request's place to
//! another (a connection whose requests were all aborted closes when the
//! application has not ended them within `timeout server`). STDERR
//! records go to the application's `log-stderr` targets
//! (level `err`, tagged with the application's name), their control
//! bytes written `.` (HAProxy's later fix: a line per record, no escape
//! sequence reaching a terminal).

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;

use sched::{ticks, Ctx, Reasons, Status, TaskletFn, TaskletId, Tick, ETERNITY};

use crate::fcgi::cgi::Answer;
use crate::fcgi::params::{self, App, Meta};
use crate::fcgi::record::{self, Demux, Event};
use crate::http1::{parse_request, ChunkedDecoder, DateCache, Limits, Status as PStatus};
use crate::mux::h2::server::{Attached, Pipe, Reuse, REQ_MAX};
use crate::stream::msg::{BodySize, ReqHead};
use crate::transport::Transport;

/// Answer bytes a pipe holds before the connection stops reading (the
/// application waits: HAProxy's demux blocked on a full stream buffer).
const RESP_MAX: usize = 64 * 1024;
/// Record bytes waiting for the socket before requests stop feeding it.
const OUT_MAX: usize = 64 * 1024;
/// The highest request id (HAProxy's: ids are 15 bits, odd).
const MAX_ID: u16 = 0x7fff;

/// What a new connection needs.
pub(crate) struct Target {
    /// Per-server key (the server's uid).
    pub(crate) key: u64,
    /// A new connection in any case (the request goes again after its
    /// attempt on a reused one failed).
    pub(crate) fresh: bool,
    pub(crate) limits: Limits,
    pub(crate) srv: Arc<crate::backend::ServerRt>,
    pub(crate) app: Arc<App>,
    /// The application's `log-stderr` targets (tagged with its name).
    pub(crate) stderr: Option<Arc<crate::log::Logger>>,
    /// How long a connection whose requests were all aborted waits for
    /// their END_REQUEST before it closes (the backend's `timeout
    /// server`, in ms).
    pub(crate) abort_wait: u32,
}

use crate::mux::srvconn::{self, ConnCount as Count};

/// How the request of a stream goes out.
enum Req {
    /// Its head is awaited (then, for a chunked body, the body).
    Head,
    /// A chunked body gathered, to give CONTENT_LENGTH.
    Gather(Box<ChunkedDecoder>, Vec<u8>),
    /// Body bytes left to send as STDIN.
    Len(u64),
    Done,
}

struct FStream {
    pipe: Rc<RefCell<Pipe>>,
    /// The stream's server-side tasklet.
    side: TaskletId,
    meta: Meta,
    id: Option<u16>,
    req: Req,
    answer: Option<Answer>,
    /// Some answer bytes came since its last flush.
    fresh: bool,
    /// ABORT_REQUEST went out.
    aborted: bool,
    /// Its answer is complete: only its END_REQUEST is awaited.
    done: bool,
}

/// One FastCGI connection to a server.
pub(crate) struct FConn {
    tr: Transport,
    fd: RawFd,
    rbuf: Vec<u8>,
    rlen: usize,
    io: super::super::Ready,
    connected: bool,
    dead: bool,
    /// Some record came from the application.
    heard: bool,
    /// The connection ended on an error, not a close.
    conn_error: bool,
    demux: Demux,
    out: Vec<u8>,
    opos: usize,
    streams: Vec<FStream>,
    app: Arc<App>,
    stderr: Option<Arc<crate::log::Logger>>,
    limits: Limits,
    /// The last request id given (0: none yet).
    max_id: u16,
    /// FCGI_KEEP_CONN: the connection outlives its requests.
    keep: bool,
    /// Requests at once (HAProxy's `streams_limit`).
    limit: usize,
    /// GET_VALUES went out, its result is awaited: no request begins.
    values_wait: bool,
    /// GET_VALUES is still to send.
    values_todo: bool,
    /// Takes new streams.
    shared: bool,
    /// Completed an exchange.
    proven: bool,
    /// Streams it was given in all.
    streams_seen: u32,
    /// The session (client connection tasklet) that opened it.
    owner: Option<TaskletId>,
    key: u64,
    srv: Arc<crate::backend::ServerRt>,
    count: Count,
    me: Option<TaskletId>,
    deadline: Tick,
    /// See [`Target::abort_wait`]; when the wait ends, once every request
    /// left was aborted.
    abort_wait: u32,
    abort_by: Option<Tick>,
}

thread_local! {
    /// This thread's connections that may take more streams.
    static POOL: srvconn::Pool<FConn> = const { RefCell::new(Vec::new()) };
    /// The `Date` of answers made here.
    static DATE: RefCell<DateCache> = const { RefCell::new(DateCache::new()) };
}

impl FConn {
    /// Requests under way (begun or waiting for their turn), but those
    /// whose answer is complete: a new one may wait behind such a
    /// request for its END_REQUEST (rather than open a connection while
    /// the application ends it).
    fn active(&self) -> usize {
        self.streams.iter().filter(|s| !s.done).count()
    }

    fn spent(&self) -> bool {
        self.srv
            .opts
            .max_reuse
            .is_some_and(|n| self.streams_seen > n)
            || self.max_id >= MAX_ID - 1
    }

    fn takes(&self, key: u64, reuse: Reuse, owner: Option<TaskletId>) -> bool {
        let mine = owner.is_some() && self.owner == owner;
        !self.dead
            && self.shared
            && self.keep
            && (self.connected || !self.streams.iter().any(|s| s.pipe.borrow().closed))
            && self.key == key
            && self.active() < self.limit
            && !self.spent()
            && reuse.allows(mine, self.proven)
    }
}

/// Gives a stream a place on a connection to the server `t` names: one
/// of this thread's with room when `reuse` allows, else a new one that
/// `open` connects (non-blocking). `owner` is the stream's session,
/// `side` its server-side tasklet, `meta` what its rules said of the
/// request.
pub(crate) fn attach(
    ctx: &mut Ctx,
    t: &Target,
    reuse: Reuse,
    owner: Option<TaskletId>,
    side: TaskletId,
    meta: Meta,
    open: impl FnOnce() -> io::Result<Transport>,
) -> io::Result<Attached> {
    let found = POOL.with(|p| srvconn::pool_find(p, t.fresh, |c| c.takes(t.key, reuse, owner)));
    let (conn, reused) = match found {
        Some(c) => (c, true),
        None => (new_conn(ctx, t, reuse, owner, open)?, false),
    };
    let mut c = conn.borrow_mut();
    let srv = Arc::clone(&c.srv);
    c.count.take(&srv);
    let pipe = Rc::new(RefCell::new(Pipe {
        connected: c.connected,
        fcgi: true,
        local: if c.connected {
            crate::sample::back_local(c.tr.tcp())
        } else {
            None
        },
        ..Pipe::default()
    }));
    c.streams.push(FStream {
        pipe: Rc::clone(&pipe),
        side,
        meta,
        id: None,
        req: Req::Head,
        answer: None,
        fresh: false,
        aborted: false,
        done: false,
    });
    c.streams_seen = c.streams_seen.saturating_add(1);
    if c.spent() {
        c.shared = false;
    }
    let mux =
        c.me.ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?;
    ctx.tasklet_wakeup(mux);
    Ok(Attached { pipe, mux, reused })
}

fn new_conn(
    ctx: &mut Ctx,
    t: &Target,
    reuse: Reuse,
    owner: Option<TaskletId>,
    open: impl FnOnce() -> io::Result<Transport>,
) -> io::Result<Rc<RefCell<FConn>>> {
    let tr = open()?;
    let fd = tr.raw_fd();
    let app = Arc::clone(&t.app);
    let conn = Rc::new(RefCell::new(FConn {
        tr,
        fd,
        rbuf: vec![0u8; t.limits.buf_size.max(16 * 1024)],
        rlen: 0,
        io: super::super::Ready::default(),
        connected: false,
        dead: false,
        heard: false,
        conn_error: false,
        demux: Demux::new(t.limits.buf_size.max(1024)),
        out: Vec::new(),
        opos: 0,
        streams: Vec::new(),
        keep: app.keep_conn,
        limit: app.max_reqs.max(1) as usize,
        values_wait: false,
        values_todo: app.get_values,
        app,
        stderr: t.stderr.clone(),
        limits: t.limits,
        max_id: 0,
        shared: reuse != Reuse::Never && t.app.keep_conn,
        proven: false,
        streams_seen: 0,
        owner,
        key: t.key,
        srv: Arc::clone(&t.srv),
        count: Count::Used(t.srv.used_conn()),
        me: None,
        deadline: ETERNITY,
        abort_wait: t.abort_wait,
        abort_by: None,
    }));
    let task = ConnTask {
        conn: Rc::clone(&conn),
    };
    let id = srvconn::start_tasklet(ctx, "fcgi_srv", task, fd)?;
    conn.borrow_mut().me = Some(id);
    if reuse != Reuse::Never {
        POOL.with(|p| p.borrow_mut().push(Rc::clone(&conn)));
    }
    Ok(conn)
}

/// Wakes a stream's server side (it then looks at its pipe).
fn wake(ctx: &mut Ctx, side: TaskletId) {
    ctx.tasklet_wakeup_why(side, Reasons::IO);
}

/// Ends a stream's exchange on a fault of the application's: `status`
/// answers it when its answer's head did not go yet, else it is cut.
fn fault(ctx: &mut Ctx, s: &mut FStream, status: u16) {
    let mut p = s.pipe.borrow_mut();
    if !s.answer.as_ref().is_some_and(Answer::head_sent) {
        p.fault = Some(status);
    }
    p.no_replay = true;
    p.end = true;
    drop(p);
    s.req = Req::Done;
    wake(ctx, s.side);
}

/// A STDERR line for the application's log: its control bytes as `.`.
fn stderr_line(line: &[u8]) -> Vec<u8> {
    line.iter()
        .map(|&b| if b.is_ascii_control() { b'.' } else { b })
        .collect()
}

impl FConn {
    fn has_output(&self) -> bool {
        self.opos < self.out.len()
    }

    /// Whether the connect completed (or failed: `dead`).
    fn check_connect(&mut self, ctx: &mut Ctx) {
        match srvconn::connect_outcome(&self.tr, self.srv.opts.tfo, &mut self.io) {
            Some(true) => {
                self.connected = true;
                let local = crate::sample::back_local(self.tr.tcp());
                for s in &self.streams {
                    let mut p = s.pipe.borrow_mut();
                    p.connected = true;
                    p.local = local;
                    drop(p);
                    wake(ctx, s.side);
                }
            }
            None => {}
            Some(false) => {
                for s in &self.streams {
                    s.pipe.borrow_mut().failed = true;
                }
                self.dead = true;
            }
        }
    }

    fn flush(&mut self) -> io::Result<bool> {
        let mut moved = false;
        while self.has_output() && self.io.wr {
            match self.tr.write(&self.out[self.opos..]) {
                Ok(0) => self.io.wr = false,
                Ok(n) => {
                    self.opos += n;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.io.wr = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.opos == self.out.len() {
            self.out.clear();
            self.opos = 0;
        }
        Ok(moved)
    }

    /// Whether a stream's unread answer is large enough that reading
    /// waits.
    fn resp_full(&self) -> bool {
        self.streams.iter().any(|s| {
            let p = s.pipe.borrow();
            p.resp.len() - p.resp_pos > RESP_MAX
        })
    }

    /// Feeds the demux what was read; answers go into the pipes.
    fn process(&mut self, ctx: &mut Ctx) -> bool {
        let mut off = 0;
        let mut moved = false;
        while off < self.rlen && !self.demux.is_dead() {
            let (n, ev) = self.demux.feed(&self.rbuf[off..self.rlen]);
            off += n;
            let Some(ev) = ev else {
                if n == 0 {
                    break;
                }
                continue;
            };
            moved = true;
            self.heard = true;
            match ev {
                Event::Stdout(id, data) => {
                    let Some(s) = self.streams.iter_mut().find(|s| s.id == Some(id)) else {
                        continue;
                    };
                    let (Some(a), false) = (s.answer.as_mut(), s.aborted) else {
                        continue;
                    };
                    let r = a.stdout(data, &mut s.pipe.borrow_mut().resp);
                    s.fresh = true;
                    if r.is_err() {
                        fault(ctx, s, 502);
                        s.answer = None;
                    }
                }
                Event::StdoutEnd(id) => {
                    if let Some(a) =
                        self.streams
                            .iter_mut()
                            .find(|s| s.id == Some(id))
                            .and_then(|s| {
                                s.fresh = true;
                                s.answer.as_mut()
                            })
                    {
                        a.end();
                    }
                }
                Event::Stderr(_, line) => {
                    if let Some(l) = &self.stderr {
                        l.send(crate::syslog::LOG_ERR, &stderr_line(&line));
                    }
                }
                Event::End {
                    id,
                    protocol_status,
                    ..
                } => {
                    match protocol_status {
                        record::CANT_MPX_CONN => self.limit = 1,
                        record::OVERLOADED | record::UNKNOWN_ROLE => {
                            self.keep = false;
                            self.shared = false;
                        }
                        _ => {}
                    }
                    let Some(i) = self.streams.iter().position(|s| s.id == Some(id)) else {
                        continue;
                    };
                    let mut s = self.streams.remove(i);
                    if let Some(a) = s.answer.as_mut() {
                        a.end();
                        let date = DATE.with(|d| *d.borrow_mut().get());
                        let r = a.flush(&date, &mut s.pipe.borrow_mut().resp);
                        match r {
                            Ok(_) if a.head_sent() => {
                                self.proven = true;
                                s.pipe.borrow_mut().end = true;
                                wake(ctx, s.side);
                            }
                            // No answer at all (an END_REQUEST refusing
                            // the request): as a connection closed before
                            // the head, which a reused one may be.
                            Ok(_) | Err(_) if protocol_status != record::REQUEST_COMPLETE => {
                                s.pipe.borrow_mut().end = true;
                                wake(ctx, s.side);
                            }
                            _ => fault(ctx, &mut s, 502),
                        }
                    } else if !s.aborted {
                        s.pipe.borrow_mut().end = true;
                        wake(ctx, s.side);
                    }
                }
                Event::BadEnd(id) => {
                    if let Some(i) = self.streams.iter().position(|s| s.id == Some(id)) {
                        let mut s = self.streams.remove(i);
                        fault(ctx, &mut s, 502);
                    }
                }
                // The application has no GET_VALUES: the section's options.
                Event::UnknownType => self.values_wait = false,
                Event::Values(v) => match v {
                    Some(v) if self.values_wait => {
                        self.values_wait = false;
                        let mpxs = v.mpxs_conns.unwrap_or(self.app.mpxs_conns);
                        if let Some(n) = v.max_reqs {
                            self.limit = n as usize;
                        }
                        if !mpxs {
                            self.limit = 1;
                        }
                        self.limit = self.limit.max(1);
                    }
                    Some(_) => {}
                    None => self.broken(ctx),
                },
                Event::Broken => self.broken(ctx),
            }
        }
        self.rbuf.copy_within(off..self.rlen, 0);
        self.rlen -= off;
        // Heads and ends of the answers this batch touched (a head goes
        // with a length when its whole answer came with it).
        let date = DATE.with(|d| *d.borrow_mut().get());
        for s in self.streams.iter_mut().filter(|s| s.fresh) {
            s.fresh = false;
            let Some(a) = s.answer.as_mut() else { continue };
            let r = a.flush(&date, &mut s.pipe.borrow_mut().resp);
            match r {
                Ok(done) => {
                    if done {
                        s.pipe.borrow_mut().end = true;
                        s.done = true;
                    }
                    wake(ctx, s.side);
                }
                Err(_) => {
                    fault(ctx, s, 502);
                    s.answer = None;
                }
            }
        }
        moved
    }

    /// The application broke the protocol: the connection ends.
    fn broken(&mut self, ctx: &mut Ctx) {
        for s in self.streams.iter_mut() {
            if s.id.is_some() {
                fault(ctx, s, 502);
            }
        }
        self.dead = true;
    }

    /// Requests into records, as the connection allows.
    fn serve(&mut self, ctx: &mut Ctx) -> bool {
        let mut moved = false;
        // Streams that left: not begun, dropped; begun, aborted.
        let mut i = 0;
        while i < self.streams.len() {
            let closed = self.streams[i].pipe.borrow().closed;
            if !closed {
                i += 1;
                continue;
            }
            let s = &mut self.streams[i];
            match s.id {
                None => {
                    self.streams.remove(i);
                    moved = true;
                    continue;
                }
                Some(id) if !s.aborted => {
                    // (An answer complete but for its END_REQUEST needs
                    // no abort.)
                    if !s.pipe.borrow().end {
                        record::put_empty(&mut self.out, record::ABORT_REQUEST, id);
                        moved = true;
                    }
                    s.aborted = true;
                    s.answer = None;
                }
                Some(_) => {}
            }
            i += 1;
        }
        if !self.connected {
            return moved;
        }
        if self.values_todo {
            self.values_todo = false;
            self.values_wait = true;
            record::put_get_values(&mut self.out);
            moved = true;
        }
        if self.values_wait {
            return moved;
        }
        let begun = self.streams.iter().filter(|s| s.id.is_some()).count();
        let mut room = self.limit.saturating_sub(begun);
        for k in 0..self.streams.len() {
            if self.out.len() - self.opos > OUT_MAX {
                break;
            }
            if self.streams[k].id.is_none() {
                if room == 0 || self.max_id >= MAX_ID - 1 {
                    continue;
                }
                match self.begin(ctx, k) {
                    Some(true) => {
                        room -= 1;
                        moved = true;
                    }
                    Some(false) => continue,
                    None => {
                        moved = true;
                        continue;
                    }
                }
            }
            moved |= self.stdin(ctx, k);
        }
        // Streams a fault ended before they began.
        let before = self.streams.len();
        self.streams
            .retain(|s| s.id.is_some() || !s.pipe.borrow().end || s.pipe.borrow().fault.is_none());
        moved |= self.streams.len() < before;
        moved
    }

    /// Begins stream `k`'s request once its head (and a chunked body)
    /// is there: `Some(true)` begun, `Some(false)` not yet, `None` ended
    /// (a fault).
    fn begin(&mut self, ctx: &mut Ctx, k: usize) -> Option<bool> {
        let limits = self.limits;
        let s = &mut self.streams[k];
        let pipe = Rc::clone(&s.pipe);
        let mut p = pipe.borrow_mut();
        let head = match parse_request(&p.req, &limits) {
            Ok(PStatus::Complete(h)) => h,
            Ok(PStatus::Partial) => return Some(false),
            Err(_) => {
                // ebb wrote it: cannot happen; end the exchange.
                drop(p);
                fault(ctx, s, 500);
                return None;
            }
        };
        let (body, head_req, http11) = {
            let view = ReqHead::from_h1(&p.req, &head);
            (
                view.body,
                view.method == crate::http1::Method::Head,
                view.version != crate::stream::msg::Version::Http10,
            )
        };
        if matches!(s.req, Req::Head) {
            s.req = match body {
                BodySize::Unknown => Req::Gather(Box::default(), Vec::new()),
                BodySize::Exact(n) => Req::Len(n),
                BodySize::Empty => Req::Len(0),
            };
        }
        let hl = head.head_len;
        if let Req::Gather(dec, got) = &mut s.req {
            let input = &p.req[hl..];
            let Ok(d) = dec.decode(input) else {
                drop(p);
                fault(ctx, s, 400);
                return None;
            };
            got.extend_from_slice(&input[d.data.clone()]);
            let (consumed, done) = (d.consumed, d.done);
            p.req.drain(hl..hl + consumed);
            if p.want_room && p.req.len() < REQ_MAX {
                p.want_room = false;
                wake(ctx, s.side);
            }
            if got.len() > limits.buf_size {
                // HAProxy's filter waits for the body within a buffer.
                drop(p);
                fault(ctx, s, 400);
                return None;
            }
            if !done {
                return Some(false);
            }
        }
        let gathered = match &s.req {
            Req::Gather(_, g) => g.len() as u64,
            _ => 0,
        };
        let fields: Vec<(&[u8], &[u8])> = head
            .headers
            .iter()
            .map(|f| (f.name.get(&p.req), f.value.get(&p.req)))
            .collect();
        let ph = params::Head {
            method: head.method_span.get(&p.req),
            uri: head.target.get(&p.req),
            version: if http11 { b"HTTP/1.1" } else { b"HTTP/1.0" },
            fields,
        };
        let Ok(pairs) = params::build(&self.app, &s.meta, &ph, gathered) else {
            drop(p);
            fault(ctx, s, 500);
            return None;
        };
        let id = self.max_id.wrapping_add(1) | 1;
        let mut recs = Vec::new();
        record::put_begin_request(&mut recs, id, self.keep);
        if record::put_params(&mut recs, id, pairs.iter().map(|(n, v)| (&n[..], &v[..]))).is_err() {
            drop(p);
            fault(ctx, s, 500);
            return None;
        }
        p.req.drain(..hl);
        drop(p);
        self.max_id = id;
        self.out.extend_from_slice(&recs);
        s.id = Some(id);
        s.answer = Some(Answer::new(head_req, http11, limits));
        if let Req::Gather(_, got) = &s.req {
            record::put_stream(&mut self.out, record::STDIN, id, got);
            s.req = Req::Len(0);
        }
        Some(true)
    }

    /// Body bytes of begun stream `k` as STDIN records; the empty one at
    /// the end.
    fn stdin(&mut self, ctx: &mut Ctx, k: usize) -> bool {
        let s = &mut self.streams[k];
        let Some(id) = s.id else { return false };
        let mut p = s.pipe.borrow_mut();
        let before = p.req.len();
        match &mut s.req {
            Req::Len(left) => {
                let n = (*left).min(p.req.len() as u64) as usize;
                if n > 0 {
                    record::put_stream(&mut self.out, record::STDIN, id, &p.req[..n]);
                    p.req.drain(..n);
                    *left -= n as u64;
                }
                if *left == 0 {
                    record::put_empty(&mut self.out, record::STDIN, id);
                    s.req = Req::Done;
                }
            }
            Req::Done => {
                // (Nothing more is the request's.)
                p.req.clear();
            }
            Req::Head | Req::Gather(..) => {}
        }
        let moved = p.req.len() < before || matches!(s.req, Req::Done) && before > 0;
        if p.req.len() < before && p.want_room && p.req.len() < REQ_MAX {
            p.want_room = false;
            drop(p);
            wake(ctx, s.side);
        }
        moved
    }

    fn close(&mut self, ctx: &mut Ctx) -> Status {
        self.dead = true;
        self.count = Count::Off;
        for s in self.streams.drain(..) {
            let mut p = s.pipe.borrow_mut();
            if !self.connected {
                p.failed = true;
            }
            p.conn_error = self.conn_error;
            p.end = true;
            drop(p);
            wake(ctx, s.side);
        }
        let _ = ctx.deregister_fd(self.fd);
        let _ = self.tr.shutdown();
        POOL.with(|p| srvconn::pool_prune(p, |c| c.dead));
        Status::Done
    }

    fn pump(&mut self, ctx: &mut Ctx) -> Status {
        if !self.connected && !self.dead {
            self.check_connect(ctx);
        }
        if self.dead {
            return self.close(ctx);
        }
        if !self.connected {
            // A stream that gave up waiting (its connect timeout) makes
            // this connection take no other; with none left it closes.
            let before = self.streams.len();
            self.streams.retain(|s| !s.pipe.borrow().closed);
            if self.streams.len() < before {
                self.shared = false;
            }
            if self.streams.is_empty() && !self.shared {
                return self.close(ctx);
            }
            return Status::Continue;
        }
        loop {
            let mut moved = false;
            if self.io.rd && !self.io.eof && !self.resp_full() && self.rlen < self.rbuf.len() {
                let r = super::super::read_once(
                    &mut self.tr,
                    &mut self.rbuf,
                    &mut self.rlen,
                    &mut self.io,
                );
                match r {
                    Ok(m) => moved |= m,
                    Err(_) => {
                        self.conn_error = true;
                        return self.close(ctx);
                    }
                }
            }
            if self.rlen > 0 {
                moved |= self.process(ctx);
            }
            if self.dead {
                let _ = self.flush();
                return self.close(ctx);
            }
            moved |= self.serve(ctx);
            if self.has_output() && self.io.wr {
                match self.flush() {
                    Ok(m) => moved |= m,
                    Err(_) => {
                        self.conn_error = true;
                        return self.close(ctx);
                    }
                }
            }
            if !moved {
                break;
            }
        }
        if self.io.eof {
            return self.close(ctx);
        }
        let now = ctx.now();
        if self.streams.is_empty() && (!self.shared || !self.keep) {
            let _ = self.flush();
            return self.close(ctx);
        } else if self.streams.is_empty()
            && self.count.is_used()
            && !self.count.go_idle(&self.srv, ctx.thread_id(), now)
        {
            // Idle now: among the server's idle connections, or closed
            // when `pool-max-conn` are there already.
            let _ = self.flush();
            return self.close(ctx);
        }
        // Requests all aborted: their END_REQUEST is waited for a while.
        let aborted = !self.streams.is_empty() && self.streams.iter().all(|s| s.aborted);
        self.abort_by = match self.abort_by {
            _ if !aborted => None,
            Some(t) => Some(t),
            None => Some(ticks::add(now, self.abort_wait)),
        };
        // (Idle, it looks once a second whether its server's purge timer
        // closes it; the wait for aborted requests is looked at as well.)
        let d = srvconn::next_look(ctx);
        srvconn::set_deadline(ctx, self.me, &mut self.deadline, d);
        Status::Continue
    }

    fn on_timer(&mut self, ctx: &mut Ctx) -> Status {
        if self
            .abort_by
            .is_some_and(|t| ticks::is_expired(t, ctx.now()))
        {
            // The application never ended what was aborted.
            return self.close(ctx);
        }
        if self.streams.is_empty() {
            if !self.count.purged(&self.srv, ctx.thread_id()) {
                let d = srvconn::next_look(ctx);
                srvconn::set_deadline(ctx, self.me, &mut self.deadline, d);
                return Status::Continue;
            }
            return self.close(ctx);
        }
        self.pump(ctx)
    }
}

/// The connection's tasklet.
struct ConnTask {
    conn: Rc<RefCell<FConn>>,
}

impl TaskletFn for ConnTask {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        let conn = Rc::clone(&self.conn);
        let mut c = conn.borrow_mut();
        if why.intersects(Reasons::IO) {
            let ev = ctx.take_events(me);
            let c = &mut *c;
            super::super::note_events(ev, &mut c.io.rd, &mut c.io.hup, &mut c.io.wr);
        }
        if (why.intersects(Reasons::SIGNAL) || ctx.stopping()) && !c.dead {
            // Soft stop: no new request here; those under way finish.
            c.shared = false;
        }
        if why.intersects(Reasons::TIMER) && ticks::is_expired(c.deadline, ctx.now()) {
            return c.on_timer(ctx);
        }
        c.pump(ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_lines_lose_their_control_bytes() {
        assert_eq!(stderr_line(b"a\r\nb\x1b[31mc\td"), b"a..b.[31mc.d");
        assert_eq!(stderr_line("é".as_bytes()), "é".as_bytes());
    }
}
