//! A client connection: the HTTP/1.1 server side, as one tasklet.
//!
//! The connection's fd is registered once, edge-triggered, for reads and
//! writes; every readiness change wakes this tasklet with the `io` reason.
//! A second, tiny *task* carries the connection's timer (tasklets have no
//! timer): when it expires it wakes the tasklet with the `timer` reason.
//!
//! One pass of the tasklet ([`Conn::pump`]) repeats, while something moves:
//! read what the socket has (into a pooled buffer), answer the requests
//! found there in order (pipelining), write what is pending. A request is
//! answered from the compiled frontend rules ([`crate::proxy`]): a fixed
//! response, a redirect, a deny, or a static file. A file lookup that the
//! thread's open-file cache cannot answer goes to the blocking pool; the
//! connection waits, keeping later pipelined requests unparsed in its
//! buffer, and the pool's completion wakes it from the pool thread.
//!
//! Read and write readiness are remembered (`rd_ready`, `wr_ready`) and only
//! cleared when a call comes back short or with `WouldBlock`: after a short
//! read the socket is known to be empty and the next edge will say when
//! data arrives, which saves the `read` returning `EAGAIN` on every request.
//!
//! Idle keep-alive connections give their buffers back to the thread's pool
//! (see [`Worker::get_buf`]), so an idle connection costs its socket, this
//! struct and two scheduler slots.

use std::io::{self, IoSlice};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use sched::{ticks, Ctx, Reasons, Status, TaskId, TaskletFn, TaskletId, Tick, ETERNITY};

use crate::config::HttpRequestAction;
use crate::http1::{
    parse_request_into, write_error_response, BodyFraming, Drain, DrainStep, HttpError, Method,
    RequestHead, ResponseWriter, Status as PStatus, TargetForm, Version, CONNECT_ALLOW,
};
use crate::proxy::{redirect_location, BackendKind, FrontendRt};
use crate::rules::ReqView;
use crate::serve::cache::{lookup_blocking, Found, OpenFile};
use crate::serve::files::{decide, normalize_path, Conditions, Decision};
use crate::transport::Transport;
use crate::worker::Worker;

mod proxy;
mod server_side;

/// Bodies up to this size are copied behind their head so pipelined answers
/// leave in one write; larger ones are written from the cached file or sent
/// with `sendfile`.
const COPY_BODY_MAX: usize = 4096;

/// File bytes one connection sends per run before it yields to the others
/// (it wakes itself and goes on at its next turn, in the bulk class). One
/// `sendfile` of 1 MiB into a socket of a slow reader cost the kernel about
/// 3 ms here (small packets); hundreds of slow readers in one loop pass
/// then delayed new clients by seconds. 256 KiB bounds a pass's cost per
/// connection while keeping large transfers at a few calls per megabyte.
const RUN_QUANTUM: usize = 256 * 1024;

/// What the connection is doing with its input.
enum In {
    /// Waiting for (more of) a request head.
    Head,
    /// Reading and dropping (a bounded part of) a request body we
    /// answered without using it.
    Discard(Box<Drain>),
    /// A file lookup is on the blocking pool; the head stays in the buffer.
    WaitDisk(Arc<Mutex<Option<Found>>>),
    /// A proxied exchange is under way (`up` holds its server side).
    Proxy,
    /// A stats page or metrics answer is being built by a task at the
    /// best nice; the head stays in the buffer.
    WaitPage(Rc<std::cell::RefCell<Option<crate::serve::Answer>>>),
}

/// What one exchange contributes to its log line; [`Conn::log_entry`]
/// adds the connection's part.
pub(super) struct LogFacts<'a> {
    pub(super) backend: &'a str,
    pub(super) server: &'a str,
    /// Tq, Tw, Tc, Tr, Tt in ms (-1: that step did not happen).
    pub(super) times: [i64; 5],
    pub(super) status: u16,
    pub(super) bytes: u64,
    pub(super) term: &'a str,
    pub(super) request_line: &'a [u8],
}

/// A body still to send after the head in `wbuf`.
enum Body {
    Mem {
        file: Arc<OpenFile>,
        pos: usize,
        end: usize,
    },
    Sendfile {
        file: Arc<OpenFile>,
        off: u64,
        end: u64,
    },
    /// A file compressed on the fly, a slice per write (serve::comp).
    Compress {
        file: Arc<OpenFile>,
        pos: u64,
        end: u64,
        comp: Box<crate::compress::BodyCompressor>,
    },
}

pub struct Conn {
    /// The client's stream: plain TCP or TLS.
    tr: Transport,
    fd: RawFd,
    /// Whether the tasklet is flagged heavy (a TLS handshake runs).
    heavy: bool,
    peer: SocketAddr,
    fe: Arc<FrontendRt>,
    w: Rc<Worker>,
    timer: TaskId,
    accept_time: SystemTime,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    body: Option<Body>,
    input: In,
    head: RequestHead,
    rd_ready: bool,
    /// The poller reported the peer's close (see `run`).
    rd_hup: bool,
    wr_ready: bool,
    eof: bool,
    /// Close once the output is flushed.
    closing: bool,
    stopping: bool,
    requests: u64,
    /// When the first byte of the current request head arrived.
    req_start: Option<Tick>,
    /// Start of the current idle or stall period.
    idle_since: Tick,
    deadline: Tick,
    /// Backend index of a request waiting on the disk.
    wait_backend: usize,
    wait_clean: String,
    /// This tasklet's id (known from its first run).
    me: Option<TaskletId>,
    /// Input state after the request being answered (its body, if any).
    next_input: Option<In>,
    /// Whether the connection stays open after the current answer.
    keep_alive: bool,
    /// `wbuf` length when the current answer started (for the log).
    resp_start: usize,
    /// `http-response` edits for the current answer.
    edits: Vec<(bool, usize)>,
    /// Variables of the current exchange and of this connection.
    vars: std::cell::RefCell<crate::sample::VarStore>,
    /// The server side of a proxied exchange.
    up: Option<Box<proxy::Upstream>>,
    /// The server socket and its buffers, shared with `side_task`.
    side: Rc<std::cell::RefCell<server_side::ServerSide>>,
    /// The server side's tasklet (`h1_srv`), created at the first
    /// proxied request; every server socket of this client is registered
    /// with it.
    side_task: Option<TaskletId>,
    /// An idle server connection kept for this client's next request:
    /// (server uid, socket), still registered with this tasklet.
    attached: Option<(Arc<crate::backend::ServerRt>, Transport)>,
    /// This connection in the CLI's session list.
    sess: Arc<crate::registry::SessInfo>,
    /// File bytes sent during the current run (see [`RUN_QUANTUM`]).
    sent_run: usize,
}

impl Conn {
    /// Takes an accepted socket: registers it and its timer with the thread's
    /// scheduler and queues a first run.
    pub fn spawn(
        ctx: &mut Ctx,
        sock: TcpStream,
        peer: SocketAddr,
        fe: Arc<FrontendRt>,
        w: Rc<Worker>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> io::Result<()> {
        sock.set_nonblocking(true)?;
        let _ = sock.set_nodelay(true);
        let fd = sock.as_raw_fd();
        let tr = match tls {
            Some(cfg) => Transport::accept_tls(sock, cfg)?,
            None => Transport::plain(sock),
        };
        let target: Rc<std::cell::Cell<Option<TaskletId>>> = Rc::new(std::cell::Cell::new(None));
        let t2 = Rc::clone(&target);
        let timer = ctx.new_task("h1_conn_timer", move |ctx: &mut Ctx, me, _why| {
            ctx.set_expire(me, ETERNITY);
            if let Some(t) = t2.get() {
                ctx.tasklet_wakeup_why(t, Reasons::TIMER);
            }
            Status::Continue
        });
        let now = ctx.now();
        let first_deadline = ticks::add(now, fe.timeouts.http_request);
        let sess = w
            .sessions
            .add(ctx.thread_id(), peer, Arc::from(fe.name.as_str()));
        let sess2 = Arc::clone(&sess);
        let heavy = tr.is_handshaking() && w.heavy_enabled;
        let conn = Conn {
            tr,
            fd,
            heavy,
            peer,
            fe,
            w,
            timer,
            accept_time: SystemTime::now(),
            rbuf: Vec::new(),
            rstart: 0,
            rend: 0,
            wbuf: Vec::new(),
            wpos: 0,
            body: None,
            input: In::Head,
            head: RequestHead::with_capacity(16),
            rd_ready: true,
            rd_hup: false,
            wr_ready: true,
            eof: false,
            closing: false,
            stopping: false,
            requests: 0,
            req_start: None,
            idle_since: now,
            deadline: first_deadline,
            wait_backend: 0,
            wait_clean: String::new(),
            me: None,
            next_input: None,
            keep_alive: true,
            resp_start: 0,
            edits: Vec::new(),
            vars: Default::default(),
            up: None,
            side: Rc::default(),
            side_task: None,
            attached: None,
            sess,
            sent_run: 0,
        };
        conn.w.conn_opened(&conn.fe);
        conn.w.debug(|| {
            format!(
                "thread {} accepted {} on frontend {}{}",
                ctx.thread_id(),
                conn.peer,
                conn.fe.name,
                if conn.tr.is_tls() { " (TLS)" } else { "" }
            )
        });
        conn.fe
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // TLS connections get their own profiling name, so `show profiling`
        // tells handshake-heavy work from cleartext work.
        let name = if conn.tr.is_tls() {
            "h1_tls_conn"
        } else {
            "h1_conn"
        };
        let id = ctx.new_tasklet_obj(name, conn);
        target.set(Some(id));
        *sess2.tasklet.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
        if let Err(e) = ctx.register_fd(fd, id, true) {
            ctx.kill_tasklet(id);
            ctx.kill(timer);
            return Err(e);
        }
        ctx.on_stop_tasklet(id);
        ctx.set_expire(timer, first_deadline);
        if heavy {
            // A TLS handshake is expensive: at most a few per loop turn,
            // so it cannot add its cost to everyone's latency.
            ctx.set_heavy(id, true);
        }
        ctx.tasklet_wakeup(id);
        Ok(())
    }

    fn has_output(&self) -> bool {
        self.wpos < self.wbuf.len() || self.body.is_some() || self.tr.has_pending_output()
    }

    fn pending_out(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Reads once into the buffer. Returns whether bytes arrived.
    fn read_in(&mut self) -> io::Result<bool> {
        if self.rbuf.is_empty() {
            self.rbuf = self.w.get_buf();
        }
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        if self.rend == self.rbuf.len() {
            // Full: make room by moving the unread bytes down, unless a head
            // waiting on the disk still points into them.
            if self.rstart == 0 || matches!(self.input, In::WaitDisk(_) | In::WaitPage(_)) {
                return Ok(false);
            }
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        let room = self.rbuf.len() - self.rend;
        loop {
            match self.tr.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.rend += n;
                    if n < room && !self.rd_hup && !self.tr.read_pending() {
                        // Short read: the socket is drained; the next edge
                        // tells when more arrives.
                        self.rd_ready = false;
                    }
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.rd_ready = false;
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes what is pending. Returns whether bytes left.
    fn flush(&mut self) -> io::Result<bool> {
        let mut moved = false;
        loop {
            while let (
                true,
                Some(Body::Compress {
                    file,
                    pos,
                    end,
                    comp,
                }),
            ) = (self.wpos == self.wbuf.len(), &mut self.body)
            {
                // The next slices, once the previous ones left (an encoder
                // may keep a slice's output back); a slice costs
                // `compress::COST` times its size of the run's share.
                if self.sent_run >= RUN_QUANTUM {
                    return Ok(moved);
                }
                self.wbuf.clear();
                self.wpos = 0;
                match crate::serve::comp::compress_slice(file, pos, *end, comp, &mut self.wbuf) {
                    Ok(n) => self.sent_run += n * crate::compress::COST,
                    Err(_) => {
                        // The promised body cannot be completed.
                        self.closing = true;
                        self.body = None;
                        self.wbuf.clear();
                        return Ok(moved);
                    }
                }
                if comp.is_finished() {
                    self.body = None;
                }
            }
            let head = &self.wbuf[self.wpos..];
            let r = match &self.body {
                Some(Body::Mem { file, pos, end }) if !head.is_empty() || pos < end => {
                    let data = file.small.as_deref().unwrap_or(&[]);
                    let b = data.get(*pos..*end).unwrap_or(&[]);
                    let want = head.len() + b.len();
                    self.tr
                        .write_vectored(&[IoSlice::new(head), IoSlice::new(b)])
                        .map(|n| (n, want))
                }
                _ if !head.is_empty() => self.tr.write(head).map(|n| (n, head.len())),
                Some(Body::Sendfile { file, off, end }) => {
                    let mut o = *off;
                    // sendfile moves up to 1 MiB per call; TLS encrypts one
                    // record (16 KiB) per call, so a short count means a
                    // full socket only against that size.
                    let step = if self.tr.supports_sendfile() {
                        RUN_QUANTUM as u64
                    } else {
                        16 * 1024
                    };
                    let count = (*end - *off).min(step) as usize;
                    let r = self.tr.send_file(&file.file, &mut o, count);
                    match r {
                        Ok(0) => {
                            // The file shrank under us: the promised length
                            // cannot be met, so the connection must end.
                            self.closing = true;
                            self.body = None;
                            self.wbuf.clear();
                            self.wpos = 0;
                            return Ok(moved);
                        }
                        Ok(n) => {
                            if let Some(Body::Sendfile { off, end, .. }) = &mut self.body {
                                *off = o;
                                if *off >= *end {
                                    self.body = None;
                                }
                            }
                            moved = true;
                            self.sent_run += n;
                            if n < count {
                                self.wr_ready = false;
                                return Ok(moved);
                            }
                            if self.sent_run >= RUN_QUANTUM {
                                // Our share of this run is used: the pump
                                // yields and wakes us again.
                                return Ok(moved);
                            }
                            continue;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            self.wr_ready = false;
                            return Ok(moved);
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    }
                }
                _ => {
                    // Nothing left (an empty Mem body ends here).
                    if matches!(self.body, Some(Body::Mem { .. })) {
                        self.body = None;
                    }
                    self.wbuf.clear();
                    self.wpos = 0;
                    // TLS records accepted but not yet on the wire.
                    if self.tr.has_pending_output() {
                        match self.tr.flush_pending() {
                            Ok(true) => moved = true,
                            Ok(false) => self.wr_ready = false,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                                self.wr_ready = false
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    return Ok(moved);
                }
            };
            match r {
                Ok((n, want)) => {
                    moved |= n > 0;
                    let hl = self.wbuf.len() - self.wpos;
                    let from_head = n.min(hl);
                    self.wpos += from_head;
                    let rest = n - from_head;
                    if let Some(Body::Mem { pos, end, .. }) = &mut self.body {
                        *pos += rest;
                        if *pos >= *end {
                            self.body = None;
                        }
                    }
                    if self.wpos == self.wbuf.len() {
                        self.wbuf.clear();
                        self.wpos = 0;
                    }
                    if n < want {
                        self.wr_ready = false;
                        return Ok(moved);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wr_ready = false;
                    return Ok(moved);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Answers what the input holds, in order. Returns whether anything
    /// was consumed or produced.
    fn process(&mut self, ctx: &mut Ctx) -> bool {
        let mut progress = false;
        loop {
            match &mut self.input {
                In::WaitDisk(slot) => {
                    let done = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                    match done {
                        Some(found) => {
                            let now = ctx.now();
                            let clean = std::mem::take(&mut self.wait_clean);
                            if let Some(b) = self.fe.backends.get(self.wait_backend) {
                                self.w.files.borrow_mut().put(b.id, clean, &found, now);
                            }
                            self.input = In::Head;
                            let b = self.wait_backend;
                            self.answer_found(ctx, b, found);
                            progress = true;
                        }
                        None => return progress,
                    }
                }
                In::WaitPage(slot) => {
                    let done = slot.borrow_mut().take();
                    let Some(a) = done else {
                        return progress;
                    };
                    self.input = In::Head;
                    let version = self.head.version;
                    let head_req = self.head.method == Method::Head;
                    let hdrs: Vec<(&[u8], &[u8])> = a
                        .headers
                        .iter()
                        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
                        .collect();
                    let ka = self.keep_alive;
                    self.simple_response(a.status, ka, version, &hdrs, &a.body, head_req);
                    self.finish_request(ctx, a.status, None, 0);
                    progress = true;
                }
                In::Discard(d) => {
                    let (n, step) = d.feed(&self.rbuf[self.rstart..self.rend]);
                    self.rstart += n;
                    progress |= n > 0;
                    match step {
                        DrainStep::More => return progress,
                        DrainStep::Done => self.input = In::Head,
                        DrainStep::Stop => {
                            // Past `tune.http.drain-max` or broken: the
                            // answer already left; the connection ends.
                            self.closing = true;
                            self.rstart = self.rend;
                            self.input = In::Head;
                            return true;
                        }
                    }
                }
                In::Proxy => {
                    // Step while bytes move (a response head, then its
                    // body), so they leave in one write.
                    let mut moved = self.proxy_step(ctx);
                    progress |= moved;
                    while moved && matches!(self.input, In::Proxy) {
                        moved = self.proxy_step(ctx);
                    }
                    if matches!(self.input, In::Proxy) {
                        return progress;
                    }
                }
                In::Head => {
                    if self.closing || self.body.is_some() || self.pending_out() > self.w.bufsize {
                        return progress;
                    }
                    if self.rstart == self.rend {
                        return progress;
                    }
                    if self.req_start.is_none() {
                        self.req_start = Some(ctx.now());
                    }
                    let r = parse_request_into(
                        &self.rbuf[self.rstart..self.rend],
                        &self.w.limits,
                        &mut self.head,
                    );
                    match r {
                        Ok(PStatus::Partial) => return progress,
                        Ok(PStatus::Complete(())) => {
                            self.answer(ctx);
                            progress = true;
                        }
                        Err(e) => {
                            self.bad_request(ctx, e);
                            return true;
                        }
                    }
                }
            }
        }
    }

    /// A request that could not be parsed: its status, a log line, close.
    fn bad_request(&mut self, ctx: &mut Ctx, e: HttpError) {
        let status = e.status();
        let start = self.wbuf.len();
        self.error_response(status, false, Version::Http11, false, &[]);
        let bytes = (self.wbuf.len() - start) as u64;
        let end = self.rbuf[self.rstart..self.rend]
            .iter()
            .position(|&c| c == b'\r' || c == b'\n')
            .unwrap_or((self.rend - self.rstart).min(256));
        let line = self.rbuf[self.rstart..self.rstart + end].to_vec();
        let tq = self.elapsed(ctx, self.req_start);
        let entry = self.log_entry(LogFacts {
            backend: &self.fe.name,
            server: "<NOSRV>",
            times: [tq, -1, -1, -1, tq],
            status,
            bytes,
            term: "PR",
            request_line: &line,
        });
        let mut l = crate::log::format(&entry);
        l.extend_from_slice(format!(" ({})", e.reason()).as_bytes());
        self.w.log_error(l);
        self.rstart = self.rend;
        self.closing = true;
        self.req_start = None;
    }

    /// The one place a log entry is built: the connection's facts (client,
    /// accept date, frontend, connection counts) around the exchange's.
    fn log_entry<'a>(&'a self, f: LogFacts<'a>) -> crate::log::Entry<'a> {
        let [tq, tw, tc, tr, tt] = f.times;
        crate::log::Entry {
            client: self.peer,
            accept: self.accept_time,
            frontend: &self.fe.name,
            backend: f.backend,
            server: f.server,
            tq,
            tw,
            tc,
            tr,
            tt,
            status: f.status,
            bytes: f.bytes,
            term: f.term,
            actconn: self.w.actconn(),
            feconn: self.fe.cur_conns(),
            request_line: f.request_line,
        }
    }

    fn elapsed(&self, ctx: &Ctx, since: Option<Tick>) -> i64 {
        match since {
            Some(t) => ctx.now().wrapping_sub(t) as i32 as i64,
            None => 0,
        }
    }

    /// Writes an error response (or the frontend's errorfile for it).
    fn error_response(
        &mut self,
        status: u16,
        keep_alive: bool,
        version: Version,
        head_req: bool,
        extra: &[(&[u8], &[u8])],
    ) {
        if let Some(f) = self.fe.errorfile(status) {
            self.wbuf.extend_from_slice(f);
            // An errorfile is sent as written; its framing is its own, so
            // the connection ends after it.
            self.closing = true;
            return;
        }
        let date = *self.w.date.borrow_mut().get();
        write_error_response(
            &mut self.wbuf,
            status,
            &date,
            keep_alive,
            version,
            head_req,
            extra,
        );
        if !keep_alive {
            self.closing = true;
        }
    }

    /// A response with a small in-memory body (fixed responses, redirects).
    fn simple_response(
        &mut self,
        status: u16,
        keep_alive: bool,
        version: Version,
        hdrs: &[(&[u8], &[u8])],
        body: &[u8],
        head_req: bool,
    ) {
        let date = *self.w.date.borrow_mut().get();
        let mut w = ResponseWriter::new(&mut self.wbuf, status, &date);
        for (n, v) in hdrs {
            let _ = w.header(n, v);
        }
        let framing = if status == 204 || status == 304 || (100..200).contains(&status) {
            BodyFraming::None
        } else {
            BodyFraming::ContentLength(body.len() as u64)
        };
        w.finish(framing, keep_alive, version);
        if !head_req && framing != BodyFraming::None {
            self.wbuf.extend_from_slice(body);
        }
        if !keep_alive {
            self.closing = true;
        }
    }

    /// Runs one proxy's `http-request` rules in order: the first final
    /// action that holds decides the answer; header edits that hold are
    /// collected for the request forwarded to a server. `be` names the
    /// backend whose rules these are (`None`: the frontend's).
    fn request_rules(
        &self,
        rules: &[crate::proxy::ReqRule],
        matcher: &crate::rules::Matcher,
        view: &ReqView<'_>,
        be: Option<usize>,
        edits: &mut Vec<(bool, usize)>,
    ) -> Option<Act> {
        for (i, rule) in rules.iter().enumerate() {
            if !matcher.holds(rule.cond.as_ref(), view) {
                continue;
            }
            match &rule.action {
                HttpRequestAction::Return(_) => return Some(Act::Return(be, i)),
                HttpRequestAction::UseService(_) => return Some(Act::Service),
                HttpRequestAction::Redirect(rd) => {
                    let buf = &self.rbuf[self.rstart..self.rend];
                    let host = self.head.host.map(|h| h.get(buf));
                    let loc = redirect_location(rd, self.head.path.get(buf), host);
                    return Some(Act::Redirect(loc, rd.code));
                }
                HttpRequestAction::Deny { status } => return Some(Act::Deny(*status)),
                HttpRequestAction::Allow => break,
                HttpRequestAction::Var(v) => v.run(view),
                // Header edits change what is forwarded to a server.
                _ => edits.push((be.is_some(), i)),
            }
        }
        None
    }

    /// Decides what answers the request in `head` (reading the buffer and
    /// the rules, changing nothing).
    fn decide(&self) -> Act {
        let buf = &self.rbuf[self.rstart..self.rend];
        let fe = &self.fe;
        if self.head.target_form == TargetForm::Asterisk {
            return Act::Options;
        }
        if self.head.method == Method::Connect {
            return Act::Connect;
        }
        let tr = &self.tr;
        let dst = move || tr.tcp().local_addr().ok();
        let view = ReqView {
            req: Some(crate::sample::Req {
                buf,
                head: &self.head,
            }),
            ..sample_ctx(tr, self.peer, &fe.name, &dst, &self.vars)
        };
        let mut req_edits = Vec::new();
        if let Some(a) =
            self.request_rules(&fe.http_request, &fe.matcher, &view, None, &mut req_edits)
        {
            return a;
        }
        if let Some(a) = stats_act(fe.stats.as_ref(), &fe.matcher, &view) {
            return a;
        }
        let Some(bi) = fe.choose_backend(&view) else {
            return Act::NoBackend;
        };
        let Some(backend) = self.fe.backends.get(bi) else {
            return Act::NoBackend;
        };
        let view = ReqView {
            be: Some(&backend.name),
            ..view
        };
        // The backend's own http-request rules come after the frontend's.
        if let Some(a) = self.request_rules(
            &backend.http_request,
            &backend.matcher,
            &view,
            Some(bi),
            &mut req_edits,
        ) {
            return a;
        }
        if let Some(a) = stats_act(backend.stats.as_ref(), &backend.matcher, &view) {
            return a;
        }
        let mut edits = Vec::new();
        for (i, r) in fe.http_response.iter().enumerate() {
            if fe.matcher.holds(r.cond.as_ref(), &view) {
                edits.push((false, i));
            }
        }
        for (i, r) in backend.http_response.iter().enumerate() {
            if backend.matcher.holds(r.cond.as_ref(), &view) {
                edits.push((true, i));
            }
        }
        match &backend.kind {
            BackendKind::Servers(_) => Act::Proxy(bi, req_edits, edits),
            BackendKind::Files(_) => {
                if !matches!(self.head.method, Method::Get | Method::Head) {
                    return Act::Files(bi, Err(405), edits);
                }
                match normalize_path(self.head.path.get(buf)) {
                    Ok(c) => Act::Files(bi, Ok(c), edits),
                    Err(r) => Act::Files(bi, Err(r.status()), edits),
                }
            }
        }
    }

    /// A complete request head is in `head`: decide and queue the answer.
    fn answer(&mut self, ctx: &mut Ctx) {
        self.requests += 1;
        self.sess
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.fe.http.bytes_in.fetch_add(
            self.head.head_len as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        self.resp_start = self.wbuf.len();
        self.vars.get_mut().begin_request();
        let mut keep_alive = self.head.keep_alive && self.fe.keep_alive && !self.stopping;
        // A body we will not read: with `Expect: 100-continue` the client
        // has not sent it yet, so answer and close rather than wait for it;
        // otherwise drop it as it comes, before the next request.
        // A body past `tune.http.drain-max` is not read at all.
        let (drain, drain_keep) = Drain::plan(self.head.framing, self.w.limits.max_drain);
        let mut next = In::Head;
        match drain {
            Some(_) if self.head.expect_continue => keep_alive = false,
            Some(d) => next = In::Discard(Box::new(d)),
            None => keep_alive &= drain_keep,
        }
        self.next_input = Some(next);
        self.keep_alive = keep_alive;
        let version = self.head.version;
        let head_req = self.head.method == Method::Head;
        let fe = Arc::clone(&self.fe);
        match self.decide() {
            Act::Options => {
                self.simple_response(
                    200,
                    keep_alive,
                    version,
                    &[(b"Allow", b"GET, HEAD, OPTIONS")],
                    b"",
                    head_req,
                );
                self.finish_request(ctx, 200, None, 0);
            }
            Act::Return(be, i) => {
                let be_arc = be.and_then(|b| self.fe.backends.get(b).cloned());
                let rules = match &be_arc {
                    Some(b) => &b.http_request,
                    None => &fe.http_request,
                };
                let Some(p) = rules.get(i).and_then(|r| r.prepared.as_ref()) else {
                    return;
                };
                // The prepared answer: Date and Connection are added, and
                // what `lf-string` / `hdr` evaluate to for this request.
                let dynamic = {
                    let tr = &self.tr;
                    let dst = move || tr.tcp().local_addr().ok();
                    let buf = &self.rbuf[self.rstart..self.rend];
                    p.render(&ReqView {
                        req: Some(crate::sample::Req {
                            buf,
                            head: &self.head,
                        }),
                        be: be_arc.as_ref().map(|b| b.name.as_str()),
                        ..sample_ctx(tr, self.peer, &fe.name, &dst, &self.vars)
                    })
                };
                let date = *self.w.date.borrow_mut().get();
                p.write(
                    &mut self.wbuf,
                    &date,
                    dynamic.as_ref(),
                    keep_alive,
                    version,
                    head_req,
                );
                if !keep_alive {
                    self.closing = true;
                }
                let st = p.status;
                self.finish_request(ctx, st, None, 0);
            }
            Act::Connect => {
                // No tunnel can be configured: CONNECT is refused, not
                // forwarded as an ordinary request.
                let allow: &[(&[u8], &[u8])] = &[(b"Allow", CONNECT_ALLOW)];
                self.error_response(405, keep_alive, version, head_req, allow);
                self.finish_request(ctx, 405, None, 0);
            }
            Act::Redirect(loc, code) => {
                self.simple_response(
                    code,
                    keep_alive,
                    version,
                    &[(b"Location", &loc), (b"Cache-Control", b"no-cache")],
                    b"",
                    head_req,
                );
                self.finish_request(ctx, code, None, 0);
            }
            Act::Stats(..) | Act::Service => {
                // The page is built by a task at the best nice: tasks join
                // the normal class, whose share of each turn is kept even
                // when I/O floods the urgent one, and a nice of -1024 puts
                // it before every other task; so the stats answer under
                // full load (HAProxy runs its stats applet niced the same
                // way).
                let job: Box<dyn FnOnce() -> crate::serve::Answer> = match self.decide() {
                    Act::Stats(st, admin) => {
                        let buf = &self.rbuf[self.rstart..self.rend];
                        let path = self.head.path.get(buf).to_vec();
                        let authz = self.head.header(buf, "authorization").map(|v| v.to_vec());
                        Box::new(move || crate::stats::page(&st, &path, authz.as_deref(), admin))
                    }
                    _ => Box::new(crate::metrics::answer),
                };
                let slot = Rc::new(std::cell::RefCell::new(None));
                let s2 = Rc::clone(&slot);
                let me = self.me;
                let mut job = Some(job);
                let t = ctx.new_task("stats_page", move |ctx: &mut Ctx, _id, _why| {
                    if let Some(j) = job.take() {
                        *s2.borrow_mut() = Some(j());
                    }
                    if let Some(me) = me {
                        ctx.tasklet_wakeup(me);
                    }
                    Status::Done
                });
                ctx.set_nice(t, -1024);
                ctx.wakeup(t, Reasons::INIT);
                self.input = In::WaitPage(slot);
            }
            Act::Deny(st) => {
                fe.http
                    .denied
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.error_response(st, false, version, head_req, &[]);
                self.finish_request(ctx, st, None, 0);
            }
            Act::NoBackend => {
                self.error_response(503, keep_alive, version, head_req, &[]);
                self.finish_request(ctx, 503, None, 0);
            }
            Act::Files(bi, Err(st), _) => {
                let extra: &[(&[u8], &[u8])] = if st == 405 {
                    &[(b"Allow", b"GET, HEAD")]
                } else {
                    &[]
                };
                self.error_response(st, keep_alive, version, head_req, extra);
                self.finish_request(ctx, st, Some(bi), 0);
            }
            Act::Proxy(bi, req_edits, resp_edits) => {
                self.start_proxy(ctx, bi, req_edits, resp_edits);
            }
            Act::Files(bi, Ok(clean), edits) => {
                self.edits = edits;
                let now = ctx.now();
                let bid = self.fe.backends.get(bi).map_or(0, |b| b.id);
                let hit = self.w.files.borrow_mut().get(bid, &clean, now);
                if let Some(found) = hit {
                    self.answer_found(ctx, bi, found);
                    return;
                }
                // Off to the blocking pool; the head stays in the buffer
                // until the answer is written.
                let BackendKind::Files(cfg) = &self.fe.backends[bi].kind else {
                    return;
                };
                let slot = Arc::new(Mutex::new(None));
                let s2 = Arc::clone(&slot);
                let cfg = cfg.clone();
                let c2 = clean.clone();
                let handle = ctx.handle();
                let me = self.me;
                let job = move || {
                    let f = lookup_blocking(&cfg, &c2);
                    *s2.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
                    if let Some(me) = me {
                        handle.wake_tasklet(me);
                    }
                };
                if self.w.pool.submit(job).is_err() {
                    self.error_response(503, keep_alive, version, head_req, &[]);
                    self.finish_request(ctx, 503, Some(bi), 0);
                    return;
                }
                self.wait_backend = bi;
                self.wait_clean = clean;
                self.input = In::WaitDisk(slot);
            }
        }
    }

    /// Writes the answer for a file lookup's result.
    fn answer_found(&mut self, ctx: &mut Ctx, bi: usize, found: Found) {
        // The answer starts here: the output may have been written out
        // (and the buffer emptied) while the file was looked up.
        self.resp_start = self.wbuf.len();
        self.vars.get_mut().begin_response();
        let version = self.head.version;
        let head_req = self.head.method == Method::Head;
        let keep_alive = self.keep_alive;
        let f = match found {
            Found::Refused(r) => {
                let st = r.status();
                self.error_response(st, keep_alive, version, head_req, &[]);
                self.finish_request(ctx, st, Some(bi), 0);
                return;
            }
            Found::AddSlash(loc) => {
                self.simple_response(
                    301,
                    keep_alive,
                    version,
                    &[(b"Location", loc.as_bytes())],
                    b"",
                    head_req,
                );
                self.finish_request(ctx, 301, Some(bi), 0);
                return;
            }
            Found::Listing(html) => {
                let ct: &[u8] = b"text/html; charset=utf-8";
                let coded = {
                    let buf = &self.rbuf[self.rstart..self.rend];
                    let policy = self.fe.comp.get(bi).and_then(|p| p.as_deref());
                    crate::serve::comp::whole_body(policy, buf, &self.head, ct, html.as_bytes())
                };
                let mut hdrs: Vec<(&[u8], &[u8])> = vec![(b"Content-Type", ct)];
                let body = match &coded {
                    Some((ce, b)) => {
                        hdrs.push((b"Content-Encoding", ce.as_bytes()));
                        hdrs.push((b"Vary", b"Accept-Encoding"));
                        b.as_slice()
                    }
                    None => html.as_bytes(),
                };
                self.simple_response(200, keep_alive, version, &hdrs, body, head_req);
                self.finish_request(ctx, 200, Some(bi), 0);
                return;
            }
            Found::File(f) => f,
        };
        // A precompressed sibling, or compression on the fly (serve::comp).
        let plan = {
            let buf = &self.rbuf[self.rstart..self.rend];
            let policy = self.fe.comp.get(bi).and_then(|p| p.as_deref());
            crate::serve::comp::plan_file(f, policy, buf, &self.head)
        };
        let f = Arc::clone(&plan.file);
        let v = &f.validators;
        let decision = {
            let buf = &self.rbuf[self.rstart..self.rend];
            let h = |n: &str| {
                self.head
                    .header(buf, n)
                    .and_then(|v| std::str::from_utf8(v).ok())
            };
            let c = Conditions {
                if_none_match: h("if-none-match"),
                if_modified_since: h("if-modified-since"),
                if_range: h("if-range"),
                range: h("range"),
            };
            decide(&c, v)
        };
        let backend = Arc::clone(&self.fe.backends[bi]);
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
        let date = *self.w.date.borrow_mut().get();
        let lm = httpdate::fmt_http_date(v.mtime);
        let mut cr = String::new();
        let cc = max_age.map(|a| format!("max-age={a}"));
        let compress = plan.compress.filter(|_| status == 200);
        let weak = compress.and_then(|_| crate::compress::weak_etag(v.etag.as_bytes()));
        let coding = plan.sibling.or(compress).and_then(|c| c.content_encoding());
        {
            let mut hdrs: Vec<(&[u8], &[u8])> = Vec::with_capacity(8);
            if status != 416 {
                hdrs.push((b"Content-Type", f.content_type.as_bytes()));
                hdrs.push((b"Last-Modified", lm.as_bytes()));
                hdrs.push((b"ETag", weak.as_deref().unwrap_or(v.etag.as_bytes())));
                if compress.is_none() {
                    hdrs.push((b"Accept-Ranges", b"bytes"));
                }
                if let Some(cc) = &cc {
                    hdrs.push((b"Cache-Control", cc.as_bytes()));
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
            let tr = &self.tr;
            let dst = move || tr.tcp().local_addr().ok();
            let sctx = crate::sample::Ctx {
                be: Some(&backend.name),
                ..sample_ctx(tr, self.peer, &self.fe.name, &dst, &self.vars)
            };
            let edited = apply_edits(&self.fe, &backend, &self.edits, hdrs, status, &sctx);
            let mut w = ResponseWriter::new(&mut self.wbuf, status, &date);
            for (n, val) in &edited {
                let _ = w.header(n, val);
            }
            let framing = match range {
                Some(_) if compress.is_some() => BodyFraming::Chunked,
                Some((s, e)) => BodyFraming::ContentLength(e - s),
                None if status == 416 => BodyFraming::ContentLength(0),
                None => BodyFraming::None,
            };
            w.finish(framing, keep_alive, version);
        }
        let mut body_len = 0;
        let comp = compress.and_then(|c| {
            let level = self
                .fe
                .comp
                .get(bi)
                .and_then(|p| p.as_ref())
                .map_or(1, |p| p.level);
            crate::compress::BodyCompressor::new(c, level).ok()
        });
        if let (Some((s, e)), false, Some(comp)) = (range, head_req, comp) {
            self.body = Some(Body::Compress {
                file: Arc::clone(&f),
                pos: s,
                end: e,
                comp: Box::new(comp),
            });
        } else if let (Some((s, e)), false) = (range, head_req) {
            body_len = e - s;
            if let Some(data) = &f.small {
                let (s, e) = (s as usize, (e as usize).min(data.len()));
                if e - s <= COPY_BODY_MAX {
                    self.wbuf.extend_from_slice(&data[s..e]);
                } else {
                    self.body = Some(Body::Mem {
                        file: Arc::clone(&f),
                        pos: s,
                        end: e,
                    });
                }
            } else if e > s {
                self.body = Some(Body::Sendfile {
                    file: Arc::clone(&f),
                    off: s,
                    end: e,
                });
            }
        }
        if !keep_alive {
            self.closing = true;
        }
        self.finish_request(ctx, status, Some(bi), body_len);
    }

    /// The answer is queued: log it and move on to what follows the head.
    fn finish_request(&mut self, ctx: &mut Ctx, status: u16, backend: Option<usize>, body: u64) {
        let now = ctx.now();
        let be = backend.and_then(|b| self.fe.backends.get(b));
        let sent = (self.wbuf.len() - self.resp_start) as u64 + body;
        crate::proxy::count_request(&self.fe, be.map(|b| &**b), status, sent);
        if self.w.logging(&self.fe) {
            let buf = &self.rbuf[self.rstart..self.rend];
            let line_end = buf
                .iter()
                .position(|&c| c == b'\r' || c == b'\n')
                .unwrap_or(0);
            let tq = self.elapsed(ctx, self.req_start);
            let (bname, server) = match backend.and_then(|b| self.fe.backends.get(b)) {
                Some(b) => (b.name.as_str(), "<files>"),
                None => (self.fe.name.as_str(), "<NOSRV>"),
            };
            let entry = self.log_entry(LogFacts {
                backend: bname,
                server,
                times: [tq, -1, -1, 0, tq],
                status,
                bytes: (self.wbuf.len() - self.resp_start) as u64 + body,
                term: "--",
                request_line: &buf[..line_end],
            });
            self.w.log_access(crate::log::format(&entry));
        }
        self.rstart += self.head.head_len.min(self.rend - self.rstart);
        self.input = self.next_input.take().unwrap_or(In::Head);
        self.req_start = None;
        self.idle_since = now;
        self.edits.clear();
    }

    /// The connection's timer fired: 408 for a head that did not arrive in
    /// time, a plain close for an idle or stalled connection.
    fn on_timeout(&mut self, ctx: &mut Ctx) -> Status {
        if self.wbuf.capacity() == 0 {
            self.wbuf = self.w.get_wbuf();
        }
        if self.tr.is_handshaking() {
            self.w.log_error(
                format!(
                    "{} [{}] {}: SSL handshake timeout{}",
                    self.peer,
                    self.fe.name,
                    self.fe.name,
                    self.tr.hello_note()
                )
                .into_bytes(),
            );
            return self.close(ctx);
        }
        if matches!(self.input, In::Head) && self.rstart < self.rend && !self.has_output() {
            let status = 408;
            self.error_response(status, false, Version::Http11, false, &[]);
            let _ = self.flush();
            let entry_line = b"<BADREQ>".to_vec();
            let tq = self.elapsed(ctx, self.req_start);
            let e = self.log_entry(LogFacts {
                backend: &self.fe.name,
                server: "<NOSRV>",
                times: [tq, -1, -1, -1, tq],
                status,
                bytes: 0,
                term: "cR",
                request_line: &entry_line,
            });
            self.w.log_error(crate::log::format(&e));
        }
        self.close(ctx)
    }

    /// The next date this connection must act by, given its state.
    fn next_deadline(&self) -> Tick {
        let t = &self.fe.timeouts;
        if let Some(up) = &self.up {
            // The server side's own date; the client's applies only while
            // it holds our output back.
            return if self.has_output() {
                ticks::first(up.deadline, ticks::add(self.idle_since, t.client))
            } else {
                up.deadline
            };
        }
        if self.has_output() || !matches!(self.input, In::Head) {
            return ticks::add(self.idle_since, t.client);
        }
        match self.req_start {
            Some(s) => ticks::add(s, t.http_request),
            None if self.requests == 0 => ticks::add(self.idle_since, t.http_request),
            None => ticks::add(self.idle_since, t.keep_alive),
        }
    }

    fn close(&mut self, ctx: &mut Ctx) -> Status {
        if self.up.is_some() {
            self.proxy_client_gone(ctx);
        }
        if let Some((srv, st)) = self.attached.take() {
            self.detach_to_pool(ctx, srv, st);
        }
        if let Some(t) = self.side_task.take() {
            ctx.kill_tasklet(t);
        }
        let _ = ctx.deregister_fd(self.fd);
        ctx.kill(self.timer);
        self.w.sessions.remove(&self.sess);
        self.w.debug(|| {
            format!(
                "closed {} on frontend {} after {} requests",
                self.peer, self.fe.name, self.requests
            )
        });
        let _ = self.tr.shutdown();
        self.release_buffers();
        self.w.conn_closed(ctx, &self.fe);
        Status::Done
    }

    fn release_buffers(&mut self) {
        if !self.rbuf.is_empty() {
            self.w.put_buf(std::mem::take(&mut self.rbuf));
        }
        self.rstart = 0;
        self.rend = 0;
        if self.wbuf.capacity() > 0 && !self.has_output() {
            self.w.put_wbuf(std::mem::take(&mut self.wbuf));
            self.wpos = 0;
        }
    }

    /// One pass: read, answer, write, while anything moves.
    fn pump(&mut self, ctx: &mut Ctx) -> Status {
        if self.wbuf.capacity() == 0 {
            self.wbuf = self.w.get_wbuf();
        }
        loop {
            let mut moved = false;
            if self.rd_ready && !self.eof && !self.closing {
                match self.read_in() {
                    Ok(m) => moved |= m,
                    Err(e) => {
                        if self.tr.is_tls() && e.kind() != io::ErrorKind::ConnectionReset {
                            // A TLS failure (plaintext on a TLS port, a bad
                            // or truncated handshake, an alert) is logged.
                            let what = if self.tr.is_handshaking() {
                                "SSL handshake failure"
                            } else {
                                "SSL error"
                            };
                            self.w.log_error(
                                format!(
                                    "{} [{}] {}: {what}: {e}",
                                    self.peer, self.fe.name, self.fe.name
                                )
                                .into_bytes(),
                            );
                        }
                        return self.close(ctx);
                    }
                }
            }
            moved |= self.process(ctx);
            if self.has_output() && self.wr_ready {
                match self.flush() {
                    Ok(m) => moved |= m,
                    Err(_) => return self.close(ctx),
                }
            }
            if self.sent_run >= RUN_QUANTUM && self.has_output() && self.wr_ready {
                // A large transfer used its share: let the others run and
                // come back at the next turn.
                if let Some(me) = self.me {
                    ctx.tasklet_wakeup(me);
                }
                self.idle_since = ctx.now();
                break;
            }
            if self.has_output() {
                // Progress on the write side counts as activity for the
                // client timeout.
                if moved {
                    self.idle_since = ctx.now();
                }
            } else if self.closing && self.up.is_none() {
                return self.close(ctx);
            }
            if !moved {
                break;
            }
        }
        if self.eof && self.up.as_ref().is_some_and(|u| !u.request_done()) {
            // The client left before its request was all sent.
            self.proxy_client_gone(ctx);
            return self.close(ctx);
        }
        let idle = matches!(self.input, In::Head) && self.rstart == self.rend && !self.has_output();
        if idle {
            if self.eof || self.stopping {
                return self.close(ctx);
            }
            self.release_buffers();
        } else if self.eof && matches!(self.input, In::Head) && !self.has_output() {
            // The client closed in the middle of a head: nothing to answer.
            return self.close(ctx);
        }
        let d = self.next_deadline();
        if d != self.deadline {
            self.deadline = d;
            ctx.set_expire(self.timer, d);
        }
        Status::Continue
    }
}

/// Applies `http-response set-header|add-header|del-header` edits (frontend
/// rules first, then the backend's, as HAProxy orders them) to the fields
/// of an answer ebb builds itself; `ctx` gets the response from them.
fn apply_edits<'a>(
    fe: &'a FrontendRt,
    be: &'a crate::proxy::BackendRt,
    edits: &[(bool, usize)],
    hdrs: Vec<(&'a [u8], &'a [u8])>,
    status: u16,
    ctx: &crate::sample::Ctx<'_>,
) -> Vec<(&'a [u8], std::borrow::Cow<'a, [u8]>)> {
    let mut out: Vec<_> = hdrs
        .into_iter()
        .map(|(n, v)| (n, std::borrow::Cow::Borrowed(v)))
        .collect();
    for &(is_be, i) in edits {
        let rule = if is_be {
            be.http_response.get(i)
        } else {
            fe.http_response.get(i)
        };
        let Some(rule) = rule else { continue };
        let Some(e) = rule.edit() else {
            // A variable action: runs on the answer as it is now.
            let list: Vec<(&[u8], &[u8])> = out.iter().map(|(n, v)| (*n, v.as_ref())).collect();
            let c = crate::sample::Ctx {
                res: Some(crate::sample::Res::List {
                    status,
                    hdrs: &list,
                }),
                ..*ctx
            };
            rule.apply(&c, &mut Vec::new());
            continue;
        };
        let list: Vec<(&[u8], &[u8])> = out.iter().map(|(n, v)| (*n, v.as_ref())).collect();
        let c = crate::sample::Ctx {
            res: Some(crate::sample::Res::List {
                status,
                hdrs: &list,
            }),
            ..*ctx
        };
        let mut next = out.clone();
        e.apply_to_list(&c, &mut next);
        drop(list);
        out = next;
    }
    out
}

/// The sample context of an exchange on this connection, without request
/// or response (the caller adds what it has): the one place that says
/// what a connection gives to fetches.
pub(crate) fn sample_ctx<'a>(
    tr: &'a Transport,
    peer: SocketAddr,
    fe: &'a str,
    dst: &'a dyn Fn() -> Option<SocketAddr>,
    vars: &'a std::cell::RefCell<crate::sample::VarStore>,
) -> crate::sample::Ctx<'a> {
    crate::sample::Ctx {
        src: peer,
        dst,
        fe,
        be: None,
        srv: None,
        tls: tr.is_tls(),
        sni: tr.sni(),
        req: None,
        res: None,
        vars: Some(vars),
    }
}

/// What answers a request, decided before anything is written.
enum Act {
    Options,
    /// A CONNECT request: 405 (ebb has no tunnel to offer).
    Connect,
    /// An `http-request return` rule: (the backend's, or the frontend's
    /// when `None`; index).
    Return(Option<usize>, usize),
    /// A server backend: the request header edits (frontend or backend
    /// rule, index) and the response edits.
    Proxy(usize, Vec<(bool, usize)>, Vec<(bool, usize)>),
    Redirect(Vec<u8>, u16),
    Deny(u16),
    NoBackend,
    /// A file backend: the clean path, or the status refusing it; and the
    /// `http-response` edits that apply.
    Files(usize, Result<String, u16>, Vec<(bool, usize)>),
    /// The stats page (`stats uri`); whether `stats admin` allows actions.
    Stats(Arc<crate::proxy::StatsRt>, bool),
    /// `http-request use-service prometheus-exporter`.
    Service,
}

/// The stats page's act when the request is for it.
fn stats_act(
    st: Option<&Arc<crate::proxy::StatsRt>>,
    m: &crate::rules::Matcher,
    view: &ReqView<'_>,
) -> Option<Act> {
    let st = st?;
    let req = view.req?;
    if !crate::stats::is_page(st, req.head.path.get(req.buf)) {
        return None;
    }
    let admin = st.admin.iter().any(|c| m.holds(Some(c), view));
    Some(Act::Stats(Arc::clone(st), admin))
}

impl TaskletFn for Conn {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        self.me = Some(me);
        self.sent_run = 0;
        if why.intersects(Reasons::IO) {
            let ev = ctx.take_events(me);
            if ev.readable() || ev.hup_or_err() {
                self.rd_ready = true;
            }
            if ev.hup_or_err() {
                // The client's end of stream may sit behind the last bytes
                // with no edge to come: read on until a read returns 0.
                self.rd_hup = true;
            }
            if ev.writable() || ev.hup_or_err() {
                self.wr_ready = true;
            }
        }
        if why.intersects(Reasons::SIGNAL) || ctx.stopping() {
            self.stopping = true;
        }
        if self.sess.kill.load(std::sync::atomic::Ordering::Relaxed) {
            // `shutdown session` from the CLI.
            return self.close(ctx);
        }
        if why.intersects(Reasons::TIMER) && ticks::is_expired(self.deadline, ctx.now()) {
            // A connect the server side's tasklet saw complete moves the
            // exchange's deadline on (it did not wake us for it).
            self.sync_side(ctx);
            let now = ctx.now();
            let server_side = self
                .up
                .as_ref()
                .is_some_and(|u| ticks::is_expired(u.deadline, now));
            if server_side {
                self.proxy_timeout(ctx);
            } else if ticks::is_expired(self.next_deadline(), now) {
                return self.on_timeout(ctx);
            }
        }
        let st = self.pump(ctx);
        if self.heavy && st == Status::Continue && !self.tr.is_handshaking() {
            // Handshake done: back to the ordinary classes.
            self.heavy = false;
            ctx.set_heavy(me, false);
        }
        st
    }
}
