//! The HTTP/2 client side: one client connection speaking HTTP/2 (ALPN
//! `h2` over TLS, or `bind ... proto h2` in cleartext), as one tasklet
//! (`h2_conn`).
//!
//! It owns the socket (the same [`Transport`] as HTTP/1) and an
//! [`h2::Connection`](crate::h2::Connection), the socket-free protocol
//! core: bytes read go into it, frames it queues go out. Each HTTP/2
//! stream is run by a *lane*: an HTTP/1 client side
//! ([`Conn`](crate::mux::h1::Conn), tasklet `h2_stream`) whose transport
//! is a pair of buffers shared with this tasklet
//! ([`crate::transport::LanePipe`]) instead of a socket. The stream of
//! that lane is the very stream an HTTP/1 connection runs: rules, files,
//! services, servers, the log line (which says `HTTP/2.0`). This is
//! HAProxy 1.8's design (its H2 mux spoke HTTP/1 to its streams); the
//! protocol-neutral interface of `stream::msg` is to replace the lane's
//! HTTP/1 bytes later, leaving this connection's code as it is.
//!
//! A stream without a request body starts *inline* ([`native`]): this
//! tasklet runs the start of its exchange on an idle lane's client side
//! (shared with the lane's tasklet), its head built in the lane's buffer
//! with the spans the HTTP/1 parser would have cut, no parse; an answer
//! given whole at once is taken as fields and body and sent here as
//! HEADERS and DATA (a file's body may follow from the lane). Whatever
//! else the stream does (wait for a server, a page, the disk) is the
//! lane's, as below.
//!
//! Per stream, this side writes the request as an HTTP/1.1 head by RFC
//! 9113 §8.3.1 (`h2::RequestHead::write_h1`: request line, `host` from
//! `:authority`, cookie crumbs joined), its DATA as the declared length or
//! chunks, trailers as the last chunk's; it reads the lane's answer back
//! (head, then a body by length, chunks or until the lane closes) into
//! HEADERS and DATA frames, as the stream's send window allows: a lane
//! whose buffer is full waits, as on a full socket. Its buffer shrinks
//! to [`LANE_OUT_SHUT`] while that window is shut (a client that reads
//! nothing), so the answer waits in the stream's own buffers and on the
//! server's socket, not here too. Request DATA is
//! granted back to the client (WINDOW_UPDATE) as the lane reads it. A
//! reset stream aborts its lane (its server side is released as when an
//! HTTP/1 client leaves). Lanes are reused from one stream to the next
//! (their buffers and tasklets stay), up to the number of concurrent
//! streams; one that closed (an answer with `Connection: close`, a
//! timeout) is dropped.
//!
//! Timers, on the tasklet's own timer (`Ctx::tasklet_set_expire`, as the
//! HTTP/1 side): `timeout client` while output waits for the client,
//! `timeout http-keep-alive` while no stream is open (then GOAWAY and
//! close), and a one-second tick while streams are open for the core's
//! stalled-stream bound. A soft stop or reload sends the graceful GOAWAY (RFC 9113 §6.8):
//! streams the client sent before it finish, then the connection closes.

pub(crate) mod native;
pub(crate) mod server;

use std::cell::RefCell;
use std::io;
use std::marker::PhantomData;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use sched::{ticks, Ctx, Reasons, Status, TaskletFn, TaskletId, Tick};

use crate::h2::{Connection, ErrorCode, Event};
use crate::http1::{parse_response_into, BodyFraming, ChunkedDecoder, Method, ResponseHead};
use crate::mux::h1::{Built, Conn, Exchange};
use crate::proxy::FrontendRt;
use crate::transport::{LaneEnd, LanePipe, Transport};
use crate::worker::Worker;

/// Answer bytes a lane may buffer before it waits for the client, while
/// its stream's send window is open (a large answer moves in few runs).
const LANE_OUT_MAX: usize = 32 * 1024;
/// What it may buffer once that window is shut (the client reads
/// nothing): the answer then waits in the stream's own buffers and on
/// the server's socket rather than here too (HAProxy's stream holds one
/// buffer). Not 0: a chunked answer's end and trailers still pass.
const LANE_OUT_SHUT: usize = 1024;
/// Period of the core's timer while streams are open.
const TICK_MS: u32 = 1000;

/// How the answer of a lane's current stream is read.
enum Resp {
    Head,
    Length(u64),
    Chunked(Box<ChunkedDecoder>),
    UntilClose,
}

/// One lane: an HTTP/1 client side running the exchanges of this
/// connection's streams, one at a time.
struct Lane<S> {
    pipe: Rc<RefCell<LanePipe>>,
    task: TaskletId,
    /// Its client side, shared with its tasklet: the start of a stream
    /// runs on it inline ([`native`]).
    conn: Rc<RefCell<Conn<S>>>,
    /// The HTTP/2 stream it serves (0: idle).
    id: u32,
    head_req: bool,
    /// The request body goes chunked (no content-length was declared).
    chunked: bool,
    /// The request body is not all written yet.
    req_open: bool,
    /// An extended CONNECT (RFC 8441): the request went as an HTTP/1.1
    /// upgrade; a 101 answer makes the stream a tunnel (200 to the
    /// client, then bytes both ways as DATA). Or a plain CONNECT (RFC
    /// 9113 §8.5, `connect`): the request went as HTTP/1.1's `CONNECT
    /// host:port`, and a 2xx answer makes the stream the tunnel.
    tunnel: bool,
    /// A plain CONNECT (no `:protocol`).
    connect: bool,
    /// Request bytes given to the lane and not yet granted back.
    unreleased: usize,
    resp: Resp,
    /// Decoded chunk data waiting for send window.
    stage: Vec<u8>,
    /// The answer's trailer section (HTTP/1.1 lines after the last
    /// chunk), sent as HEADERS ending the stream after the data.
    trailers: Vec<u8>,
    /// The lane was aborted or closed: dropped once seen closed.
    gone: bool,
    /// The rest of an answer given inline leaves from its pipe while its
    /// client side idles ([`H2Conn::start_native`]): nothing there waits
    /// for that rest to move, so its moves run no tasklet.
    side_idle: bool,
}

/// One HTTP/2 client connection.
pub struct H2Conn<S> {
    tr: Transport,
    fd: RawFd,
    peer: SocketAddr,
    dst: Option<SocketAddr>,
    fe: Arc<FrontendRt>,
    w: Rc<Worker>,
    me: Option<TaskletId>,
    h2: Connection,
    rbuf: Vec<u8>,
    rlen: usize,
    lanes: Vec<Lane<S>>,
    /// The lane that answered the last stream started inline, its
    /// buffers kept until the frames read are all handled (the next
    /// stream starts there): released by [`H2Conn::settle_held`].
    held: Option<usize>,
    /// Streams may be answered natively ([`native`]): no
    /// `http-after-response` rule (they edit an answer's HTTP/1 bytes).
    native_ok: bool,
    /// The HTTP/1 head of a stream started inline, reused; how much of
    /// its reading was done as it was written, and what it found
    /// (`h1.headers`: the fields' spans).
    scratch: Vec<u8>,
    line: crate::h2::Written,
    h1: crate::http1::RequestHead,
    /// `scratch`, `line` and `h1` are the last request head's.
    line_written: bool,
    /// A duplicate of the socket its lanes share, for their addresses.
    lane_sock: Option<Rc<TcpStream>>,
    rd_ready: bool,
    /// The poller reported the client's close (RDHUP/HUP): it may come with
    /// the last bytes and no edge follows, so read on until a read says 0.
    rd_hup: bool,
    wr_ready: bool,
    eof: bool,
    /// A byte came from the client (for a connection that ends before
    /// its preface: a probe, or a client that did not speak HTTP/2).
    seen_bytes: bool,
    accepted: SystemTime,
    born: Tick,
    stopping: bool,
    /// The process stops (a soft stop, a reload): a lingering close is
    /// cut to an idle connection's grace.
    proc_stop: bool,
    /// Closing: our side is shut, the client's bytes are dropped until
    /// its end, the bound or this date ([`H2Conn::linger`]).
    linger_until: Option<Tick>,
    linger: super::Linger,
    idle_since: Tick,
    deadline: Tick,
    resp: ResponseHead,
    resets: Vec<u32>,
    /// The session's trackers and variables from `tcp-request
    /// connection|session` rules (or the HTTP/1 side it came from), kept
    /// for the connection's life so its counters (`conn_cur`) stay right;
    /// every lane counts on the same session trackers and shares the same
    /// `sess` variables.
    session: (
        crate::table::Stk,
        std::cell::RefCell<crate::sample::VarStore>,
    ),
    _s: PhantomData<fn() -> S>,
}

/// Where the body of an answer started inline is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Taken with its head ([`native::Captured::body`]).
    Taken,
    /// In the lane's output buffer, whole.
    Output,
    /// Still to come from the lane (its file).
    Lane,
}

/// What to do once the event that borrowed the core is handled.
enum After {
    Nothing,
    Release(u32, usize),
    /// A stream whose head is in `scratch`, to start inline on lane `.0`.
    Native(usize, u32),
    Serve,
    Close,
}

impl<S: Exchange + Default + 'static> H2Conn<S> {
    /// Starts an HTTP/2 connection on `tr` (already counted as a
    /// connection of `fe`), with `early` bytes already read from it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn(
        ctx: &mut Ctx,
        tr: Transport,
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: Rc<Worker>,
        early: Vec<u8>,
        accepted: SystemTime,
        session: (
            crate::table::Stk,
            std::cell::RefCell<crate::sample::VarStore>,
        ),
    ) -> io::Result<()> {
        let fd = tr.raw_fd();
        let now = ctx.now();
        // One whole frame fits (the core reads a frame at a time), and
        // whatever the HTTP/1 side had read already.
        let size = (fe.h2.max_frame_size as usize + 9 + 1024).max(early.len());
        let mut rbuf = vec![0u8; size];
        let rlen = early.len();
        rbuf[..rlen].copy_from_slice(&early);
        let deadline = ticks::add(now, fe.timeouts.http_request);
        let h2 = Connection::new(fe.h2);
        let native_ok =
            fe.after_response.is_empty() && fe.backends.iter().all(|b| b.after_response.is_empty());
        let conn = H2Conn::<S> {
            tr,
            fd,
            peer,
            dst,
            fe,
            w,
            me: None,
            h2,
            rbuf,
            rlen,
            lanes: Vec::new(),
            held: None,
            native_ok,
            scratch: Vec::new(),
            line: crate::h2::Written::Parse,
            h1: crate::http1::RequestHead::default(),
            line_written: false,
            lane_sock: None,
            rd_ready: true,
            rd_hup: false,
            wr_ready: true,
            eof: false,
            seen_bytes: rlen > 0,
            accepted,
            born: now,
            stopping: false,
            proc_stop: false,
            linger_until: None,
            linger: super::Linger::default(),
            idle_since: now,
            deadline,
            resp: ResponseHead::default(),
            resets: Vec::new(),
            session,
            _s: PhantomData,
        };
        conn.fe.h2_conns.fetch_add(1, Ordering::Relaxed);
        conn.fe.h2_conns_total.fetch_add(1, Ordering::Relaxed);
        let id = ctx.new_tasklet_obj("h2_conn", conn);
        if let Err(e) = ctx.register_fd(fd, id, true) {
            ctx.kill_tasklet(id);
            return Err(e);
        }
        ctx.on_stop_tasklet(id);
        ctx.tasklet_set_expire(id, deadline);
        ctx.tasklet_wakeup(id);
        Ok(())
    }

    /// A new connection of `fe` speaking HTTP/2 from its first byte
    /// (`bind ... proto h2`; with `ssl`, after the handshake whatever
    /// ALPN chose, as HAProxy).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn accept(
        ctx: &mut Ctx,
        sock: TcpStream,
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: Rc<Worker>,
        tls: Option<Arc<rustls::ServerConfig>>,
        session: (
            crate::table::Stk,
            std::cell::RefCell<crate::sample::VarStore>,
        ),
    ) -> io::Result<()> {
        // Non-blocking (SOCK_NONBLOCK) and TCP_NODELAY from the listener.
        let tr = Transport::accept(sock, tls)?;
        w.conn_opened(&fe);
        fe.sessions.fetch_add(1, Ordering::Relaxed);
        let r = Self::spawn(
            ctx,
            tr,
            peer,
            dst,
            Arc::clone(&fe),
            Rc::clone(&w),
            Vec::new(),
            SystemTime::now(),
            session,
        );
        if r.is_err() {
            w.conn_closed(ctx, &fe);
        }
        r
    }

    fn now(ctx: &Ctx) -> u32 {
        ctx.now() | 1
    }

    /// Reads once. Returns whether bytes arrived.
    fn read_in(&mut self) -> io::Result<bool> {
        let mut r = super::Ready {
            rd: true,
            hup: self.rd_hup,
            ..Default::default()
        };
        let got = super::read_once(&mut self.tr, &mut self.rbuf, &mut self.rlen, &mut r)?;
        self.eof |= r.eof;
        self.seen_bytes |= got;
        if !r.rd {
            self.rd_ready = false;
        }
        Ok(got)
    }

    /// Writes the core's output. Returns whether bytes left.
    fn flush(&mut self) -> io::Result<bool> {
        let mut r = super::Ready {
            wr: true,
            ..Default::default()
        };
        let moved = super::write_h2(&mut self.tr, &mut self.h2, &mut r)?;
        if !r.wr {
            self.wr_ready = false;
        }
        Ok(moved)
    }

    fn has_output(&self) -> bool {
        !self.h2.output().is_empty() || self.tr.has_pending_output()
    }

    /// What a new lane starts with: the connection's session trackers and
    /// its `sess` variables, shared (a clone of [`crate::sample::vars::SessVars`]
    /// is the same store), as HAProxy's streams of one session share them.
    fn lane_session(
        &self,
    ) -> (
        crate::table::Stk,
        std::cell::RefCell<crate::sample::VarStore>,
    ) {
        let vars = crate::sample::VarStore {
            sess: self.session.1.borrow().sess.clone(),
            so_name: self.session.1.borrow().so_name.clone(),
            so_idx: self.session.1.borrow().so_idx,
            pp_tlvs: self.session.1.borrow().pp_tlvs.clone(),
            fc_addrs: self.session.1.borrow().fc_addrs,
            h2: true,
            ..Default::default()
        };
        (
            self.session.0.share_session(),
            std::cell::RefCell::new(vars),
        )
    }

    /// A lane for a new stream: an idle one, else a new one.
    fn lane_for(&mut self, ctx: &mut Ctx) -> Option<usize> {
        if let Some(i) = self
            .lanes
            .iter()
            .position(|l| l.id == 0 && !l.gone && !l.pipe.borrow().closed)
        {
            return Some(i);
        }
        let me = self.me?;
        let sock = match &self.lane_sock {
            Some(s) => Rc::clone(s),
            None => {
                let s = Rc::new(self.tr.tcp().try_clone().ok()?);
                self.lane_sock = Some(Rc::clone(&s));
                s
            }
        };
        let pipe = Rc::new(RefCell::new(LanePipe {
            out_max: LANE_OUT_MAX,
            ..Default::default()
        }));
        let tr = Transport::Lane(Box::new(LaneEnd {
            pipe: Rc::clone(&pipe),
            sock,
            tls: self.tr.is_tls(),
            sni: self.tr.sni().map(str::to_string),
            alpn: self.tr.alpn().map(<[u8]>::to_vec),
            client: self.tr.client_cert().map(|c| Arc::new(c.to_owned())),
        }));
        let (task, conn) = Conn::<S>::spawn_lane(
            ctx,
            tr,
            self.peer,
            self.dst,
            Arc::clone(&self.fe),
            Rc::clone(&self.w),
            me,
            self.lane_session(),
        );
        self.lanes.push(Lane {
            pipe,
            task,
            conn,
            id: 0,
            head_req: false,
            chunked: false,
            req_open: false,
            tunnel: false,
            connect: false,
            unreleased: 0,
            resp: Resp::Head,
            stage: Vec::new(),
            trailers: Vec::new(),
            gone: false,
            side_idle: false,
        });
        Some(self.lanes.len() - 1)
    }

    /// Feeds the core what was read and acts on its events.
    fn process(&mut self, ctx: &mut Ctx) -> bool {
        let mut off = 0;
        let mut serve = false;
        let now = Self::now(ctx);
        loop {
            // A new stream needs a lane before the event borrows the core:
            // made when the next frame is HEADERS or CONTINUATION.
            let next = self
                .rbuf
                .get(off + 3)
                .copied()
                .filter(|_| self.rlen - off >= 9);
            let free = if matches!(next, Some(0x1 | 0x9)) {
                self.lane_for(ctx)
            } else {
                None
            };
            let p = self.h2.recv(&self.rbuf[off..self.rlen], now);
            off += p.consumed;
            let after = match p.event {
                None if p.consumed == 0 => break,
                None => After::Nothing,
                Some(Event::Request {
                    id,
                    head,
                    end_stream,
                }) => match free {
                    Some(i) => {
                        let l = &mut self.lanes[i];
                        l.id = id;
                        l.side_idle = false;
                        l.head_req = head.method() == b"HEAD";
                        l.connect = head.protocol().is_none() && head.method() == b"CONNECT";
                        l.tunnel = head.protocol().is_some() || l.connect;
                        l.chunked = !l.tunnel && !end_stream && head.content_length.is_none();
                        l.req_open = !end_stream;
                        l.resp = Resp::Head;
                        l.stage.clear();
                        l.trailers.clear();
                        let mut pp = l.pipe.borrow_mut();
                        pp.out_max = LANE_OUT_MAX;
                        // `te: trailers` (the only `te` HTTP/2 allows) tells
                        // an HTTP/2 server the client takes trailers.
                        let te = head.te();
                        const CHUNKED: (&[u8], &[u8]) = (b"transfer-encoding", b"chunked");
                        const TE: (&[u8], &[u8]) = (b"te", b"trailers");
                        let mut extra: [(&[u8], &[u8]); 4] = [TE; 4];
                        let mut n = 0;
                        if l.chunked {
                            extra[0] = CHUNKED;
                            n = 1;
                        }
                        if te {
                            extra[n] = TE;
                            n += 1;
                        }
                        // A tunnel's request may end with its head.
                        pp.eof = l.tunnel && end_stream;
                        pp.half_close = pp.eof;
                        pp.ws_key = None;
                        let websocket = head
                            .protocol()
                            .is_some_and(|p| p.eq_ignore_ascii_case(b"websocket"));
                        let has = |name: &[u8]| head.fields().any(|(f, _)| f == name);
                        // RFC 8441 §5 has no key: HAProxy makes one up for
                        // an HTTP/1.1 server and checks its answer.
                        let key = (websocket && !has(b"sec-websocket-key"))
                            .then(crate::sample::websocket_key);
                        if let Some(k) = &key {
                            extra[n] = (b"sec-websocket-key", k);
                            n += 1;
                        }
                        pp.ws_key = key;
                        self.fe.h2_streams.fetch_add(1, Ordering::Relaxed);
                        // The HTTP/1 form of the last head, still in
                        // `scratch` and `h1` when that head went inline.
                        let written = std::mem::take(&mut self.line_written);
                        if self.native_ok && end_stream && !l.tunnel {
                            // Started inline once the core is free, the
                            // head as the parser would have cut it. The
                            // same head again (the core says so) has the
                            // same form: the extra fields follow from the
                            // head here (`te`; no body, no upgrade).
                            if !(head.repeated && written) {
                                self.line = head.write_h1_head(
                                    &extra[..n],
                                    &mut self.scratch,
                                    &crate::h2::lane_limits(&self.w.limits),
                                    &mut self.h1,
                                );
                            }
                            self.line_written = true;
                            After::Native(i, id)
                        } else {
                            head.write_h1(&extra[..n], &mut pp.input);
                            drop(pp);
                            ctx.tasklet_wakeup(l.task);
                            After::Nothing
                        }
                    }
                    None => {
                        // No lane could be made (out of fds): refused, so
                        // the client may retry it (RFC 9113 §8.7).
                        self.line_written = false;
                        self.resets.push(id);
                        After::Nothing
                    }
                },
                Some(Event::Data {
                    id,
                    data,
                    end_stream,
                }) => match self.lanes.iter_mut().find(|l| l.id == id && l.req_open) {
                    Some(l) => {
                        let mut pp = l.pipe.borrow_mut();
                        if l.chunked {
                            if !data.is_empty() {
                                pp.input
                                    .extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                                pp.input.extend_from_slice(data);
                                pp.input.extend_from_slice(b"\r\n");
                            }
                            if end_stream {
                                pp.input.extend_from_slice(b"0\r\n\r\n");
                            }
                        } else {
                            pp.input.extend_from_slice(data);
                        }
                        // The end of a tunnel's client side: the lane reads
                        // its end once the bytes are read.
                        pp.eof |= l.tunnel && end_stream;
                        pp.half_close |= l.tunnel && end_stream;
                        drop(pp);
                        l.unreleased += data.len();
                        l.req_open = !end_stream;
                        ctx.tasklet_wakeup(l.task);
                        After::Nothing
                    }
                    None => After::Release(id, data.len()),
                },
                Some(Event::Trailers { id, fields }) => {
                    if let Some(l) = self.lanes.iter_mut().find(|l| l.id == id && l.req_open) {
                        let mut pp = l.pipe.borrow_mut();
                        if l.chunked {
                            pp.input.extend_from_slice(b"0\r\n");
                            for (n, v) in fields.iter() {
                                pp.input.extend_from_slice(n);
                                pp.input.extend_from_slice(b": ");
                                pp.input.extend_from_slice(v);
                                pp.input.extend_from_slice(b"\r\n");
                            }
                            pp.input.extend_from_slice(b"\r\n");
                        }
                        drop(pp);
                        l.req_open = false;
                        ctx.tasklet_wakeup(l.task);
                    }
                    After::Nothing
                }
                Some(Event::Reset { id, .. }) => {
                    if let Some(l) = self.lanes.iter_mut().find(|l| l.id == id) {
                        abort(ctx, l);
                    }
                    After::Nothing
                }
                Some(Event::WindowOpened { .. }) => After::Serve,
                Some(Event::GoAway { .. }) | Some(Event::Response { .. }) => After::Nothing,
                Some(Event::Closed { .. }) => After::Close,
            };
            match after {
                After::Nothing => {}
                After::Release(id, n) => self.h2.release(id, n),
                After::Native(i, id) => self.start_native(ctx, i, id, now),
                After::Serve => serve = true,
                After::Close => {
                    for l in &mut self.lanes {
                        abort(ctx, l);
                    }
                    off = self.rlen;
                    break;
                }
            }
        }
        self.settle_held(ctx);
        for id in std::mem::take(&mut self.resets) {
            let _ = self.h2.reset(id, ErrorCode::REFUSED_STREAM, now);
        }
        self.rbuf.copy_within(off..self.rlen, 0);
        self.rlen -= off;
        serve | (off > 0)
    }

    /// The lane [`H2Conn::held`] names idles as any other: its buffers
    /// go back to the thread's pools.
    fn settle_held(&mut self, ctx: &mut Ctx) {
        let Some(l) = self.held.take().and_then(|i| self.lanes.get(i)) else {
            return;
        };
        if let Ok(mut c) = l.conn.try_borrow_mut() {
            c.settle_inline(ctx, false);
        }
    }

    /// Starts stream `id` (its head in `scratch`) on lane `i` inline: its
    /// rules run now, and an answer given whole at once goes out as
    /// HEADERS and DATA with no HTTP/1 bytes and no wake-up of the lane;
    /// any other answer is the lane's, as when it reads the head itself.
    fn start_native(&mut self, ctx: &mut Ctx, i: usize, id: u32, now: u32) {
        if self.held.is_some_and(|h| h != i) {
            self.settle_held(ctx);
        }
        let Some(l) = self.lanes.get_mut(i) else {
            return;
        };
        let conn = Rc::clone(&l.conn);
        let Ok(mut c) = conn.try_borrow_mut() else {
            l.pipe.borrow_mut().input.extend_from_slice(&self.scratch);
            ctx.tasklet_wakeup(l.task);
            return;
        };
        let built = match self.line {
            crate::h2::Written::Parse => Built::Parse,
            crate::h2::Written::Spans(m, t) => Built::Spans((m, t), &self.h1.headers),
            crate::h2::Written::Complete => Built::Head(&self.h1),
        };
        if !c.start_inline(ctx, l.task, &self.scratch, built) {
            drop(c);
            l.pipe.borrow_mut().input.extend_from_slice(&self.scratch);
            ctx.tasklet_wakeup(l.task);
            return;
        }
        let Some(a) = c.native_answer() else {
            // Not answered whole at once: the lane goes on (its output,
            // its wait) in its own runs.
            self.held = None;
            c.settle_inline(ctx, false);
            drop(c);
            ctx.tasklet_wakeup(l.task);
            return;
        };
        // Where the body is: taken with the head, in the lane's output
        // buffer or the file's bytes in memory after a head taken alone
        // (a small file), or still to come from the lane (a file sent
        // from the disk).
        let src = match (a.follows, c.pending_body()) {
            (0, _) if c.inline_done() => Some(Body::Taken),
            (0, _) => None,
            (n, Some(b)) if b.len() as u64 == n => Some(Body::Output),
            (_, None) if c.has_output() => Some(Body::Lane),
            _ => None,
        };
        let body: &[u8] = match src {
            Some(Body::Taken) => &a.body,
            Some(Body::Output) => c.pending_body().unwrap_or(&[]),
            _ => &[],
        };
        let sent = match src {
            None => Err(ErrorCode::INTERNAL_ERROR),
            Some(src) => {
                let end = body.is_empty() && src != Body::Lane;
                let r = self
                    .h2
                    .send_response_with(id, a.status, end, |h| h.fields_list(&a.fields));
                match r {
                    Ok(()) if body.is_empty() => Ok(0),
                    Ok(()) => self
                        .h2
                        .send_data(id, body, true, now)
                        .map_err(|_| ErrorCode::INTERNAL_ERROR),
                    Err(_) => Err(ErrorCode::INTERNAL_ERROR),
                }
            }
        };
        let rest = match sent {
            Ok(n) => body.get(n..).unwrap_or(&[]),
            Err(_) => &[],
        };
        let follows = a.follows;
        let lane_busy = if !rest.is_empty() {
            // The window is short of the body: the rest leaves from the
            // lane's pipe as its answer would ([`drain_answer`]).
            l.pipe.borrow_mut().output.extend_from_slice(rest);
            l.resp = Resp::Length(rest.len() as u64);
            l.side_idle = true;
            true
        } else if sent.is_ok() && src == Some(Body::Lane) {
            // The lane writes the body into its pipe in its runs.
            l.resp = Resp::Length(follows);
            true
        } else {
            l.id = 0;
            false
        };
        if src == Some(Body::Output) {
            c.drop_output();
        }
        if lane_busy {
            // The lane stays for the rest; it is not closed under it.
            c.closing = false;
        }
        let closing = c.closing;
        // A lane free again keeps its buffers for the next stream of
        // this batch.
        let hold = !lane_busy && !closing && sent.is_ok();
        self.held = hold.then_some(i);
        c.settle_inline(ctx, hold);
        drop(c);
        if let Err(code) = sent {
            let _ = self.h2.reset(id, code, now);
            abort(ctx, l);
        } else if closing {
            // The answer ended the lane's connection (`Connection:
            // close`, a deny): the lane goes, as it would have closed.
            abort(ctx, l);
        } else if src == Some(Body::Lane) {
            ctx.tasklet_wakeup(l.task);
        }
    }

    /// Moves every lane's answer into the core as its windows allow, and
    /// grants consumed request bytes back. Returns whether anything moved.
    fn serve_lanes(&mut self, ctx: &mut Ctx) -> bool {
        let now = Self::now(ctx);
        let mut moved = false;
        // The lane's answer head passed the stream's own checks (an
        // HTTP/2 server's up to its HPACK list, more than `maxhdr`).
        let limits = crate::h2::lane_limits(&self.w.limits);
        for l in &mut self.lanes {
            let closed = l.pipe.borrow().closed;
            let mut lane_moved = false;
            if l.id != 0 {
                // Flow-control credit for what the lane read.
                let read = std::mem::take(&mut l.pipe.borrow_mut().read_count);
                let empty = l.pipe.borrow().input.is_empty();
                let n = if empty {
                    l.unreleased
                } else {
                    read.min(l.unreleased)
                };
                if n > 0 {
                    l.unreleased -= n;
                    self.h2.release(l.id, n);
                }
                match drain_answer(&mut self.h2, l, &mut self.resp, &limits, now) {
                    Ok(m) => lane_moved |= m,
                    Err(code) => {
                        let _ = self.h2.reset(l.id, code, now);
                        abort(ctx, l);
                        lane_moved = true;
                    }
                }
                if l.id != 0 && l.pipe.borrow().closed && !answer_in_pipe(l) {
                    // The lane ended before its answer did: before its
                    // head, REFUSED_STREAM (HAProxy 2.6's h2_do_shutr:
                    // nothing was sent, the client may try again); after,
                    // its timeout while the client read nothing (CANCEL),
                    // or a failure (INTERNAL_ERROR). A lane that shut
                    // down after writing the whole answer is a socket
                    // closed after its last write: the bytes still go out
                    // as the stream's window opens, and the lane goes
                    // after.
                    let code = if l.pipe.borrow().refused || matches!(l.resp, Resp::Head) {
                        ErrorCode::REFUSED_STREAM
                    } else if self.h2.send_window(l.id) <= 0 {
                        ErrorCode::CANCEL
                    } else {
                        ErrorCode::INTERNAL_ERROR
                    };
                    let _ = self.h2.reset(l.id, code, now);
                    abort(ctx, l);
                    lane_moved = true;
                }
            }
            if l.id != 0 && !l.side_idle {
                // The lane's room follows the stream's send window once
                // the head is out (the head itself passes whole).
                let cap = match l.resp {
                    Resp::Head => LANE_OUT_MAX,
                    _ => usize::try_from(self.h2.send_window(l.id))
                        .unwrap_or(0)
                        .clamp(LANE_OUT_SHUT, LANE_OUT_MAX),
                };
                let mut p = l.pipe.borrow_mut();
                // A lane that waited on a full pipe has room again.
                lane_moved |= p.output.len() >= p.out_max && p.output.len() < cap;
                p.out_max = cap;
            }
            if closed && l.id == 0 {
                l.gone = true;
            }
            if lane_moved && !l.gone && !closed && !l.side_idle {
                // Room in its buffer again, or its stream done.
                ctx.tasklet_wakeup(l.task);
            }
            moved |= lane_moved;
        }
        self.lanes.retain(|l| !(l.gone && l.pipe.borrow().closed));
        moved
    }

    fn streams_open(&self) -> bool {
        self.lanes.iter().any(|l| l.id != 0)
    }

    fn next_deadline(&self, now: Tick) -> Tick {
        let t = &self.fe.timeouts;
        if let Some(d) = self.linger_until {
            return d;
        }
        if self.has_output() {
            return ticks::add(self.idle_since, t.client);
        }
        if self.streams_open() || self.h2.open_streams() > 0 {
            return ticks::add(now, TICK_MS);
        }
        ticks::add(self.idle_since, t.keep_alive)
    }

    fn close(&mut self, ctx: &mut Ctx) -> Status {
        self.log_unstarted(ctx);
        for l in &mut self.lanes {
            abort(ctx, l);
        }
        self.lanes.clear();
        let _ = ctx.deregister_fd(self.fd);
        let _ = self.tr.shutdown();
        self.fe.h2_conns.fetch_sub(1, Ordering::Relaxed);
        self.w.conn_closed(ctx, &self.fe);
        Status::Done
    }

    /// A connection that ends (the client's close, or a preface or first
    /// SETTINGS refused) before the client spoke HTTP/2 is logged as
    /// HAProxy logs it, a `<BADREQ>` line with state `PR` and status 0;
    /// one that sent nothing, not with `option dontlognull` or `option
    /// http-ignore-probes`. One that idles to its timeout is not.
    fn log_unstarted(&mut self, ctx: &Ctx) {
        if self.h2.started() || !(self.eof || self.seen_bytes) {
            return;
        }
        if !self.seen_bytes
            && (self.fe.dontlognull || self.fe.ignore_probes || !self.w.logging(&self.fe))
        {
            // (Nor on stderr, where a frontend without log targets sends
            // its error lines: a probe carried nothing to see.)
            return;
        }
        let tt = i64::from(ctx.now().wrapping_sub(self.born) as i32).max(0);
        let mut e = self.fe.no_request_entry(
            self.peer,
            self.accepted,
            tt,
            self.w.actconn(),
            self.fe.log_local(self.tr.tcp()),
            self.tr.is_tls(),
            Some(&self.session.1),
        );
        e.fmt = self.fe.log_format.as_ref();
        let sd = self.fe.log_sd(&e);
        self.w
            .log_fe_error_sd(&self.fe, crate::log::format(&e), sd, self.fe.err_level());
    }

    /// GOAWAY is out and nothing remains: the lingering close HTTP/1
    /// connections make too ([`super::Linger`]), so that a client still
    /// sending (a WINDOW_UPDATE, a PING, a stream opened before it read
    /// the GOAWAY, a body's DATA) does not reset the connection before it
    /// has read the GOAWAY and the last answers. Until the client's end,
    /// [`super::LINGER_MAX_BYTES`] read, or `timeout client` (an idle
    /// connection's grace, [`crate::drain::IDLE_GRACE_MS`], during a stop).
    fn linger(&mut self, ctx: &mut Ctx) -> Status {
        if self.linger_until.is_none() {
            self.linger = super::Linger::start(&mut self.tr, false);
            self.linger_until = Some(ticks::add(ctx.now(), self.fe.timeouts.client));
            self.rlen = 0;
        }
        self.linger_step(ctx)
    }

    /// A run of a lingering connection.
    fn linger_step(&mut self, ctx: &mut Ctx) -> Status {
        let Some(mut until) = self.linger_until else {
            return Status::Continue;
        };
        if self.proc_stop {
            until = ticks::first(until, ticks::add(ctx.now(), crate::drain::IDLE_GRACE_MS));
            self.linger_until = Some(until);
        }
        if ticks::is_expired(until, ctx.now()) {
            return self.close(ctx);
        }
        if self.eof
            || self.linger.step(
                &mut self.tr,
                &mut self.rd_ready,
                self.rd_hup,
                &mut self.wr_ready,
            )
        {
            return self.close(ctx);
        }
        if until != self.deadline {
            self.deadline = until;
            if let Some(me) = self.me {
                ctx.tasklet_set_expire(me, until);
            }
        }
        Status::Continue
    }

    fn pump(&mut self, ctx: &mut Ctx) -> Status {
        if self.linger_until.is_some() {
            return self.linger_step(ctx);
        }
        loop {
            let mut moved = false;
            if self.rd_ready && !self.eof {
                match self.read_in() {
                    Ok(m) => moved |= m,
                    Err(_) => {
                        // A reset: the client is gone, as at its close.
                        self.eof = true;
                        return self.close(ctx);
                    }
                }
            }
            moved |= self.process(ctx);
            moved |= self.serve_lanes(ctx);
            if self.has_output() && self.wr_ready {
                match self.flush() {
                    Ok(m) => moved |= m,
                    Err(_) => {
                        self.eof = true;
                        return self.close(ctx);
                    }
                }
            }
            if moved {
                self.idle_since = ctx.now();
            }
            if self.h2.is_done() && !self.has_output() {
                if self.h2.closed_unspoken() {
                    // Nothing was sent, no answer to keep: closed at once
                    // (HAProxy 2.6 closes a connection whose first bytes
                    // are not the preface).
                    return self.close(ctx);
                }
                return self.linger(ctx);
            }
            if !moved {
                break;
            }
        }
        if self.eof {
            // The client left. Each open stream's lane reads the end of
            // its client side, as an HTTP/1 client's close, and decides
            // as it does: a request all in still goes to its server
            // (HAProxy forwards it unless `option abortonclose`), one
            // whose body was cut is a client abort. The connection ends
            // with its last stream (or when an answer cannot be written).
            for l in &mut self.lanes {
                if l.id != 0 && !l.gone {
                    let mut pp = l.pipe.borrow_mut();
                    // An open tunnel's server gets the end as a half-close
                    // (HAProxy 2.6's shutw: its last bytes still go to a
                    // client that only shut its side), as at END_STREAM.
                    if !pp.eof {
                        pp.eof = true;
                        pp.half_close = l.tunnel && matches!(l.resp, Resp::UntilClose);
                        drop(pp);
                        ctx.tasklet_wakeup(l.task);
                    }
                }
            }
            if !self.streams_open() {
                return self.close(ctx);
            }
        }
        let d = self.next_deadline(ctx.now());
        if d != self.deadline {
            self.deadline = d;
            if let Some(me) = self.me {
                ctx.tasklet_set_expire(me, d);
            }
        }
        Status::Continue
    }

    fn on_timer(&mut self, ctx: &mut Ctx) -> Status {
        let now = ctx.now();
        if self.linger_until.is_some() {
            return self.linger_step(ctx);
        }
        let t = &self.fe.timeouts;
        if self.has_output() && ticks::is_expired(ticks::add(self.idle_since, t.client), now) {
            // The client reads nothing of what we send.
            return self.close(ctx);
        }
        if self.streams_open() || self.h2.open_streams() > 0 {
            let mut reset = std::mem::take(&mut self.resets);
            reset.clear();
            self.h2.tick(Self::now(ctx), &mut reset);
            for id in reset.drain(..) {
                if let Some(l) = self.lanes.iter_mut().find(|l| l.id == id) {
                    abort(ctx, l);
                }
            }
            self.resets = reset;
        } else if ticks::is_expired(ticks::add(self.idle_since, t.keep_alive), now) {
            // Idle past `timeout http-keep-alive`: GOAWAY, then close.
            self.h2.goaway_now();
            self.stopping = true;
        }
        self.pump(ctx)
    }
}

/// Drops the exchange of lane `l`: its stream was reset or the
/// connection ends. The lane reads an error and closes.
fn abort<S>(ctx: &mut Ctx, l: &mut Lane<S>) {
    if !l.gone {
        l.pipe.borrow_mut().abort = true;
        l.gone = true;
        ctx.tasklet_wakeup(l.task);
    }
    l.id = 0;
}

/// Fields of an HTTP/1 answer that HTTP/2 must not carry (RFC 9113
/// §8.2.2).
fn connection_specific(name: &[u8]) -> bool {
    [
        &b"connection"[..],
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
    ]
    .iter()
    .any(|c| c.eq_ignore_ascii_case(name))
}

/// Moves lane `l`'s answer into the core: its head once whole, then body
/// bytes as the stream's window allows. The stream's end frees the lane
/// (`l.id` 0). An error is the code to reset the stream with.
fn drain_answer<S>(
    h2: &mut Connection,
    l: &mut Lane<S>,
    head: &mut ResponseHead,
    limits: &crate::http1::Limits,
    now: u32,
) -> Result<bool, ErrorCode> {
    let id = l.id;
    let mut moved = false;
    let pipe = Rc::clone(&l.pipe);
    let mut p = pipe.borrow_mut();
    loop {
        match &mut l.resp {
            Resp::Head => {
                if p.output.is_empty() {
                    return Ok(moved);
                }
                let method = if l.head_req {
                    Method::Head
                } else if l.connect {
                    Method::Connect
                } else {
                    Method::Get
                };
                match parse_response_into(&p.output, limits, method, head) {
                    Ok(httparse::Status::Partial) => return Ok(moved),
                    Err(_) => return Err(ErrorCode::INTERNAL_ERROR),
                    Ok(httparse::Status::Complete(())) => {}
                }
                let n = head.head_len;
                moved = true;
                // The server switched protocols for an extended CONNECT: the
                // client gets 200 (RFC 8441 §5) and the stream carries the
                // tunnel's bytes until the lane closes. A plain CONNECT's
                // 2xx makes the tunnel the same way, its status as it came
                // (RFC 9113 §8.5, as HAProxy 2.6).
                let switched = if l.connect {
                    (200..300).contains(&head.status)
                } else {
                    l.tunnel && head.status == 101
                };
                if !switched && head.is_interim() {
                    // An interim answer (`100 Continue`, `103 Early Hints`
                    // of an `http-request early-hint` rule or the server)
                    // goes on as a HEADERS frame, as HAProxy 2.6 sends
                    // every 1xx to an HTTP/2 client.
                    let buf = &p.output[..n];
                    let st = head.status;
                    let r = h2.send_interim_with(id, st, |h| put_fields(h, head, buf));
                    p.output.drain(..n);
                    if r.is_err() {
                        return Err(ErrorCode::INTERNAL_ERROR);
                    }
                    continue;
                }
                if !switched && head.status == 101 {
                    // A 101 outside an extended CONNECT: HTTP/2 has none.
                    p.output.drain(..n);
                    continue;
                }
                let end = !switched
                    && matches!(
                        head.framing,
                        BodyFraming::None | BodyFraming::ContentLength(0)
                    );
                // Refused: an ordinary answer, the stream no tunnel.
                l.tunnel &= switched;
                let status = if switched && !l.connect {
                    200
                } else {
                    head.status
                };
                let buf = &p.output[..n];
                let r = h2.send_response_with(id, status, end, |h| put_fields(h, head, buf));
                p.output.drain(..n);
                if r.is_err() {
                    return Err(ErrorCode::INTERNAL_ERROR);
                }
                if end {
                    finish(h2, l, &mut p, now);
                    return Ok(true);
                }
                l.resp = match head.framing {
                    _ if switched => Resp::UntilClose,
                    BodyFraming::ContentLength(n) => Resp::Length(n),
                    BodyFraming::Chunked => {
                        Resp::Chunked(Box::new(ChunkedDecoder::stopping_at_trailers()))
                    }
                    _ => Resp::UntilClose,
                };
            }
            Resp::Length(left) => {
                // Offered even with no window: the core dates the stall
                // (its `stall_timeout_ms` bound).
                let n = (*left).min(p.output.len() as u64) as usize;
                if n == 0 && *left > 0 {
                    return Ok(moved);
                }
                let last = n as u64 == *left && l.trailers.is_empty();
                let sent = h2
                    .send_data(id, &p.output[..n], last, now)
                    .map_err(|_| ErrorCode::INTERNAL_ERROR)?;
                p.output.drain(..sent);
                *left -= sent as u64;
                moved |= sent > 0;
                if *left == 0 {
                    send_trailers(h2, id, &mut l.trailers)?;
                    finish(h2, l, &mut p, now);
                    return Ok(true);
                }
                if sent < n {
                    return Ok(moved);
                }
            }
            Resp::Chunked(dec) => {
                if !l.stage.is_empty() {
                    let sent = h2
                        .send_data(id, &l.stage, false, now)
                        .map_err(|_| ErrorCode::INTERNAL_ERROR)?;
                    l.stage.drain(..sent);
                    moved |= sent > 0;
                    if !l.stage.is_empty() {
                        return Ok(moved);
                    }
                }
                if p.output.is_empty() {
                    return Ok(moved);
                }
                let in_trailers = dec.in_trailers();
                let d = dec
                    .decode(&p.output)
                    .map_err(|_| ErrorCode::INTERNAL_ERROR)?;
                if in_trailers {
                    l.trailers.extend_from_slice(&p.output[..d.consumed]);
                } else {
                    l.stage.extend_from_slice(&p.output[d.data.clone()]);
                }
                p.output.drain(..d.consumed);
                moved = true;
                if d.done {
                    // Trailers end the stream; without, the last DATA does.
                    let bare = trailer_lines(&l.trailers).next().is_none();
                    if bare {
                        l.trailers.clear();
                    }
                    let sent = h2
                        .send_data(id, &l.stage, bare, now)
                        .map_err(|_| ErrorCode::INTERNAL_ERROR)?;
                    if sent == l.stage.len() {
                        l.stage.clear();
                        send_trailers(h2, id, &mut l.trailers)?;
                        finish(h2, l, &mut p, now);
                        return Ok(true);
                    }
                    // Window short of the end: the rest leaves as plain
                    // bytes once it opens.
                    l.stage.drain(..sent);
                    let rest = std::mem::take(&mut l.stage);
                    p.output.splice(0..0, rest);
                    l.resp = Resp::Length(p.output.len() as u64);
                    continue;
                }
                if d.consumed == 0 {
                    return Ok(moved);
                }
            }
            Resp::UntilClose => {
                let n = p.output.len();
                if n > 0 {
                    let sent = h2
                        .send_data(id, &p.output[..n], false, now)
                        .map_err(|_| ErrorCode::INTERNAL_ERROR)?;
                    p.output.drain(..sent);
                    moved |= sent > 0;
                }
                if p.closed && p.output.is_empty() {
                    let _ = h2.send_data(id, &[], true, now);
                    finish(h2, l, &mut p, now);
                    return Ok(true);
                }
                return Ok(moved);
            }
        }
    }
}

/// Whether the rest of lane `l`'s answer is all in its pipe (its end
/// included), so that nothing more is needed from the lane.
fn answer_in_pipe<S>(l: &Lane<S>) -> bool {
    let p = l.pipe.borrow();
    match &l.resp {
        Resp::Head => false,
        Resp::Length(left) => p.output.len() as u64 >= *left,
        Resp::UntilClose => true,
        Resp::Chunked(dec) => {
            let mut d = (**dec).clone();
            let mut at = 0;
            while let Some(rest) = p.output.get(at..) {
                match d.decode(rest) {
                    Ok(r) if r.done => return true,
                    Ok(r) if r.consumed > 0 => at += r.consumed,
                    _ => return false,
                }
            }
            false
        }
    }
}

/// The fields of a server's answer head (in `buf`) an HTTP/2 client gets:
/// all but the connection-specific ones.
fn put_fields(h: &mut crate::h2::HeadEncoder<'_>, head: &ResponseHead, buf: &[u8]) {
    for f in &head.headers {
        let name = f.name.get(buf);
        if !connection_specific(name) {
            h.field(name, f.value.get(buf));
        }
    }
}

/// The `name: value` lines of an HTTP/1.1 trailer section.
fn trailer_lines(section: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    section.split(|&b| b == b'\n').filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        Some((&line[..colon], line[colon + 1..].trim_ascii()))
    })
}

/// Sends the trailer section `t` holds (if any) as the HEADERS that end
/// stream `id` (RFC 9113 §8.1), less the fields HTTP/2 forbids.
fn send_trailers(h2: &mut Connection, id: u32, t: &mut Vec<u8>) -> Result<(), ErrorCode> {
    if t.is_empty() {
        return Ok(());
    }
    let r = h2.send_trailers_with(id, |h| {
        for (n, v) in trailer_lines(t) {
            if !connection_specific(n) && !n.eq_ignore_ascii_case(b"te") {
                h.field(n, v);
            }
        }
    });
    t.clear();
    r.map_err(|_| ErrorCode::INTERNAL_ERROR)
}

/// The answer of lane `l`'s stream is complete. If the client is still
/// sending the request, the stream is reset NO_ERROR (RFC 9113 §8.1),
/// unless it is an open tunnel, and the lane, which would read the rest
/// as a body to drop, is given up.
fn finish<S>(h2: &mut Connection, l: &mut Lane<S>, p: &mut LanePipe, now: u32) {
    if l.req_open {
        // A tunnel's server closed: the client's side of the stream stays
        // open, its DATA dropped, until its END_STREAM (HAProxy 2.6 sends
        // no RST_STREAM then either; it does after a refusal).
        if !l.tunnel {
            let _ = h2.reset(l.id, ErrorCode::NO_ERROR, now);
        }
        p.abort = true;
        l.gone = true;
    }
    l.id = 0;
    l.resp = Resp::Head;
    p.out_max = LANE_OUT_MAX;
}

impl<S: Exchange + Default + 'static> TaskletFn for H2Conn<S> {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        self.me = Some(me);
        if why.intersects(Reasons::IO) {
            let ev = ctx.take_events(me);
            let (rd, hup, wr) = (&mut self.rd_ready, &mut self.rd_hup, &mut self.wr_ready);
            crate::mux::note_events(ev, rd, hup, wr);
        }
        if why.intersects(Reasons::SIGNAL) || ctx.stopping() {
            self.proc_stop = true;
            if !self.stopping {
                // Soft stop or reload: the graceful GOAWAY (§6.8).
                self.stopping = true;
                crate::drain::saw_stop(ctx.now());
                self.h2.shutdown();
            }
        }
        if why.intersects(Reasons::TIMER) && ticks::is_expired(self.deadline, ctx.now()) {
            return self.on_timer(ctx);
        }
        self.pump(ctx)
    }
}
