//! The HTTP/1 client side: one client connection, as one tasklet
//! (`h1_conn`, `h1_tls_conn` with TLS).
//!
//! It owns the client's socket (plain or TLS [`Transport`]), its pooled
//! read and write buffers, the HTTP/1 parser state (one reused
//! [`RequestHead`]), pipelining, keep-alive and the connection's timers;
//! and it holds its current stream (`st`, one exchange at a time on
//! HTTP/1), which it drives through [`Exchange`]. What answers a request
//! (rules, files, services, servers, the log line) is the stream's
//! business (the `stream` module); this side only reads, parses, writes.
//!
//! The connection's fd is registered once, edge-triggered, for reads, at
//! the end of the first run that leaves the connection waiting on its
//! socket (see [`Conn::needs_poller`]: a request answered with
//! `Connection: close`, at once or by a server, never touches the
//! poller); writability is watched from the first write that blocks on
//! (`Ctx::want_write`, one `EPOLL_CTL_MOD` for the rest of its life).
//! Every readiness change watched wakes this tasklet with the `io` reason.
//! The connection's deadline is the tasklet's own timer
//! (`Ctx::tasklet_set_expire`): when it expires the tasklet runs with the
//! `timer` reason. No second task and no shared cell per connection.
//!
//! One pass of the tasklet ([`Conn::pump`]) repeats, while something moves:
//! read what the socket has (into a pooled buffer), hand each complete
//! request head found there to the stream in order (pipelining), let the
//! stream move (a file looked up, a server's answer), write what is
//! pending. While the stream works, later pipelined requests stay unparsed
//! in the buffer.
//!
//! Read and write readiness are remembered (`rd_ready`, `wr_ready`) and only
//! cleared when a call comes back short or with `WouldBlock`: after a short
//! read the socket is known to be empty and the next edge will say when
//! data arrives, which saves the `read` returning `EAGAIN` on every request.
//!
//! A connection that ends while its client may still be sending (bytes
//! of a request not read to their end, pipelined requests, a TLS
//! client's own `close_notify`) does not close at once: closing over
//! unread bytes sends a reset, which can destroy the answer still in
//! either side's queue. It shuts its sending side (after TLS's
//! `close_notify`) and reads on, dropping what comes, until the client
//! closes or a bound: [`Conn::linger`]. One whose request was read to its
//! end and answered (the usual `Connection: close`) closes at once.
//!
//! Idle keep-alive connections give their buffers, their header index and
//! their stream back to the thread's pools (see [`Worker::get_buf`],
//! [`Exchange::parkable`]); then [`Conn`] itself gives way to the few
//! fields that last ([`Idle`], about a quarter of its size), so an idle
//! connection costs its socket, that, its registry entry and its
//! scheduler slot and timer. A few idle connections per thread keep their
//! whole state, stream and variables, which spares a busy connection the
//! trip to the pools at every request (see
//! [`crate::worker::WARM_IDLE_MAX`]).

use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;

use sched::{ticks, Ctx, Reasons, Status, TaskletFn, TaskletId, Tick};

use crate::http1::{
    error_page, error_reason, parse_request_into, scheme_normalized, Drain, DrainStep, HttpError,
    Method, RequestHead, Status as PStatus, Version,
};
use crate::mux::h1::out::H1Out;
use crate::proxy::FrontendRt;
use crate::stream::msg::{BodySize, Msg, MsgSink, RespHead};
use crate::transport::Transport;
use crate::worker::Worker;

/// File bytes one connection sends per run before it yields to the others
/// (it wakes itself and goes on at its next turn, in the bulk class). One
/// `sendfile` of 1 MiB into a socket of a slow reader cost the kernel about
/// 3 ms here (small packets); hundreds of slow readers in one loop pass
/// then delayed new clients by seconds. 256 KiB bounds a pass's cost per
/// connection while keeping large transfers at a few calls per megabyte.
pub(crate) const RUN_QUANTUM: usize = 256 * 1024;

/// The HTTP/2 connection preface (RFC 9113 §3.4): on an HTTP/1 bind, the
/// client speaks HTTP/2 with prior knowledge (HAProxy's implicit upgrade).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Most bytes a lingering close ([`Conn::linger`]) reads and drops before
/// it gives up and closes (with a reset, over what still comes): the end
/// of an upload a client sends to an answer that refused it (nginx's
/// default `client_max_body_size`). HAProxy 2.6 does not linger (see
/// [`Conn::linger`]); a client that keeps sending is cut here or at the
/// time bound, whichever comes first.
const LINGER_MAX_BYTES: u32 = 1024 * 1024;

/// Where the first request of a tcp stream upgraded in place starts
/// (`tcp::upgrade`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Upgraded {
    /// The backend the tcp stream chose (the implicit upgrade): the
    /// request goes on with its rules. `None` (`switch-mode http`): the
    /// frontend's HTTP rules, then `use_backend` on the request.
    pub backend: Option<u32>,
}

/// What the connection is doing with its input.
pub(crate) enum In {
    /// Waiting for (more of) a request head.
    Head,
    /// Reading and dropping (a bounded part of) a request body we
    /// answered without using it.
    Discard(Box<Drain>),
    /// The stream has the request (it waits on the disk, a page, a
    /// server); see [`Exchange::holds_head`] for the head's bytes.
    Stream,
}

/// What the client side asks of its stream. The stream reaches back into
/// the connection (its buffers, its transport for the sample fetches) through
/// the `&mut Conn` each call passes.
pub trait Exchange: Sized {
    /// A complete request head is in `c.head`, over
    /// `c.rbuf[c.rstart..c.rend]`: start the exchange. The stream either
    /// answers at once (and moves `c.input` on) or sets `c.input` to
    /// [`In::Stream`].
    fn start(&mut self, c: &mut Conn<Self>, ctx: &mut Ctx);
    /// Moves an exchange under way (`c.input` is [`In::Stream`]): a lookup
    /// finished, a page built, server bytes. Returns whether anything
    /// moved; when the exchange ends it sets `c.input` back.
    fn step(&mut self, c: &mut Conn<Self>, ctx: &mut Ctx) -> bool;
    /// Whether the request head still lies in the read buffer (the buffer
    /// must not be compacted under it).
    fn holds_head(&self) -> bool;
    /// The date the exchange's server side must act by, while one is
    /// under way.
    fn deadline(&self) -> Option<Tick>;
    /// The timer fired: handles a deadline of the exchange's server side.
    /// Returns whether it was one (else the client side's own date is
    /// checked).
    fn on_timer(&mut self, c: &mut Conn<Self>, ctx: &mut Ctx) -> bool;
    /// Whether an exchange with a server side is under way.
    fn active(&self) -> bool;
    /// Whether a proxied request is still being read from the client.
    fn reading_request(&self) -> bool;
    /// Whether the exchange under way needs to hear from the client's
    /// socket: its request's body is still to come (or the rules wait for
    /// it), a tunnel carries the client's bytes, `option abortonclose`
    /// watches for the client leaving, or a POST may be followed by a
    /// stray CRLF to read. Otherwise the client is not polled while the
    /// exchange works (HAProxy's H1 side subscribes for reads once the
    /// request is whole only with `abortonclose`, and reads on after a
    /// POST).
    fn watches_client(&self) -> bool;
    /// The client went away (or the connection is closing) in the middle
    /// of an exchange, or between two: release what it holds (server
    /// connections, queue places, tasklets).
    fn client_gone(&mut self, c: &mut Conn<Self>, ctx: &mut Ctx);
    /// The server of the exchange under way went DOWN (`why` b'D') or an
    /// active one came UP while it is a backup (b'U'), with the action that
    /// ends its sessions: the exchange ends as HAProxy's killed stream.
    fn server_shutdown(&mut self, _c: &mut Conn<Self>, _ctx: &mut Ctx, _why: u8) {}
    /// Whether the stream holds nothing of its connection between two
    /// exchanges (no server connection, no tasklet of its own): it then
    /// goes back to the thread's pool while the connection idles.
    fn parkable(&self) -> bool;
    /// A stream from the thread's pool, or a new one.
    fn from_pool(w: &Worker) -> Box<Self>;
    /// Gives a parkable stream back to the thread's pool, cleared of what
    /// its connection left in it.
    fn to_pool(self: Box<Self>, w: &Worker);
}

/// A file the connection sends as a body: the bytes when it is small
/// enough to live in memory, else the open file for `sendfile`.
pub trait FileBody {
    /// The whole content, when kept in memory.
    fn bytes(&self) -> Option<&[u8]>;
    /// The open file.
    fn file(&self) -> &std::fs::File;
}

/// A body produced a slice at a time (a file compressed on the fly): the
/// connection asks for the next slice once the previous ones left, and
/// counts each slice against its share of the run ([`RUN_QUANTUM`]).
pub trait SliceBody {
    /// Appends the next slice to `out` (the last one ends the body).
    /// Returns what the slice costs of the run's share; an error means
    /// the promised body cannot be completed.
    fn next_slice(&mut self, out: &mut Vec<u8>) -> io::Result<usize>;
    /// Whether the whole body was produced.
    fn is_finished(&self) -> bool;
}

/// What one exchange contributes to its log line; [`Conn::log_entry`]
/// adds the connection's part.
pub(crate) struct LogFacts<'a> {
    pub(crate) backend: &'a str,
    pub(crate) server: &'a str,
    /// Tq, Tw, Tc, Tr, Tt in ms (-1: that step did not happen).
    pub(crate) times: [i64; 5],
    pub(crate) status: u16,
    pub(crate) bytes: u64,
    pub(crate) term: &'a str,
    pub(crate) request_line: &'a [u8],
}

/// A body still to send after the head in `wbuf`.
pub(crate) enum Body {
    Mem {
        file: Arc<dyn FileBody>,
        pos: usize,
        end: usize,
    },
    Sendfile {
        file: Arc<dyn FileBody>,
        off: u64,
        end: u64,
    },
    /// A body made a slice per write (see [`SliceBody`]).
    Slices(Box<dyn SliceBody>),
}

/// What the HTTP/2 side read of a head it wrote (see
/// [`Conn::start_inline`]).
pub(crate) enum Built<'a> {
    /// Nothing: the head is parsed.
    Parse,
    /// The request line's (method, target) and the fields' spans.
    Spans(
        (crate::http1::Span, crate::http1::Span),
        &'a [crate::http1::HeaderSpan],
    ),
    /// The whole head, as a parse would have made it.
    Head(&'a RequestHead),
}

/// One HTTP/1 client connection and its current stream.
pub struct Conn<S> {
    /// The client's stream: plain TCP or TLS.
    pub(crate) tr: Transport,
    pub(crate) fd: RawFd,
    /// Whether the tasklet is flagged heavy (a TLS handshake runs).
    pub(crate) heavy: bool,
    /// The address the client reached, when a PROXY header
    /// (`accept-proxy`) said it; else the socket's own. Boxed: most
    /// connections have none, and every connection holds this field.
    pub(crate) dst: Option<Box<SocketAddr>>,
    pub(crate) fe: Arc<FrontendRt>,
    pub(crate) w: std::rc::Rc<Worker>,
    pub(crate) rbuf: Vec<u8>,
    pub(crate) rstart: usize,
    pub(crate) rend: usize,
    pub(crate) wbuf: Vec<u8>,
    pub(crate) wpos: usize,
    pub(crate) body: Option<Body>,
    pub(crate) input: In,
    pub(crate) head: RequestHead,
    pub(crate) rd_ready: bool,
    /// The poller reported the peer's close (see `run`).
    pub(crate) rd_hup: bool,
    pub(crate) wr_ready: bool,
    pub(crate) eof: bool,
    /// Close once the output is flushed.
    pub(crate) closing: bool,
    /// Close with a reset, without shutting the socket down first (a
    /// `silent-drop` rule set its lingering off).
    pub(crate) silent: bool,
    pub(crate) stopping: bool,
    /// When the first byte of the current request head arrived.
    pub(crate) req_start: Option<Tick>,
    /// What the client sent of the current exchange, in HAProxy's HTX
    /// size (`crate::http1::htx`): `%U`, the stats' `bin`.
    pub(crate) bytes_in: u64,
    /// Start of the current idle or stall period.
    pub(crate) idle_since: Tick,
    pub(crate) deadline: Tick,
    /// This tasklet's id (known from its first run).
    pub(crate) me: Option<TaskletId>,
    /// Input state after the request being answered (its body, if any).
    pub(crate) next_input: Option<In>,
    /// Variables of the current exchange and of this connection (boxed:
    /// they are large, and the connection's state stays small enough for
    /// the allocator's per-thread cache).
    pub(crate) vars: crate::sample::vars::ConnVars,
    /// What this connection tracks in stick tables (`track-sc`).
    pub(crate) stk: crate::table::Stk,
    /// This connection in the CLI's session list.
    pub(crate) sess: Arc<crate::registry::SessInfo>,
    /// File bytes sent during the current run (see [`RUN_QUANTUM`]).
    pub(crate) sent_run: usize,
    /// The current stream (taken out while it runs: see
    /// [`Conn::with_stream`]). Between exchanges a stream that holds
    /// nothing of the connection goes back to the thread's pool (`parked`),
    /// so an idle connection does not keep an exchange's state.
    st: Option<Box<S>>,
    /// The stream is in the pool, not out running (`st` is `None`).
    parked: bool,
    /// Idle with its stream and variables kept, in one of the thread's
    /// few places (see [`crate::worker::WARM_IDLE_MAX`]).
    warm: Option<crate::worker::WarmPlace>,
    /// This connection is a lane of an HTTP/2 connection (its transport
    /// is a [`Transport::Lane`]): the tasklet of that connection, woken
    /// when the lane moved bytes or ended.
    pub(crate) lane_of: Option<TaskletId>,
    /// The socket is in the thread's poller. A new connection is not
    /// registered until a run ends with it waiting on the socket (see
    /// [`Conn::needs_poller`]): a request that arrived with the connection
    /// and an answer that fit in the socket's buffer (a connection per
    /// request, answered at once or by a server) then cost no `epoll_ctl`
    /// at all (adding an fd that is already ready reports it at once, so
    /// nothing is missed by registering late).
    registered: bool,
    /// A lane run inline by its HTTP/2 connection: the whole answer its
    /// stream gives at once, kept for HTTP/2 frames instead of written as
    /// HTTP/1 (see `mux::h2::native`).
    pub(crate) native: Option<Box<crate::mux::h2::native::Captured>>,
    /// A tcp stream that became HTTP here (`tcp::upgrade`): where its
    /// first request's processing starts; taken by that request.
    pub(crate) upgraded: Option<Upgraded>,
    /// `bind ... proto h1`, `switch-mode http proto h1`: the HTTP/2
    /// preface is a bad request, not an upgrade.
    h1_only: bool,
    /// The connection ended its side and reads on until the client's own
    /// end or a bound ([`Conn::linger`]).
    lingering: bool,
    /// The socket's sending side is shut down (its FIN left).
    wr_shut: bool,
    /// The client may still send bytes of a request ebb did not read to
    /// its end (the rest of a bad request, a body not drained): the
    /// connection lingers at its end.
    unread: bool,
    /// Bytes a lingering close still reads before it gives up.
    linger_left: u32,
}

/// The address a client reached, as a fetch asks for it (`dst`,
/// `dst_port`): the PROXY header's destination (`pp`, from `accept-proxy`)
/// when one came, else the socket's own local address, asked of the socket
/// only when called. Borrows only the transport, so the caller may still
/// change the connection's buffers while it holds the closure.
pub(crate) fn dst_of(
    tr: &Transport,
    pp: Option<SocketAddr>,
) -> impl Fn() -> Option<SocketAddr> + Copy + '_ {
    move || pp.or_else(|| crate::sys::original_dst(tr.tcp()))
}

impl<S> Conn<S> {
    /// Requests this connection started (its registry entry counts them).
    pub(crate) fn requests(&self) -> u64 {
        self.sess
            .requests
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The address a PROXY header said the client reached, if one did.
    pub(crate) fn pp_dst(&self) -> Option<SocketAddr> {
        self.dst.as_deref().copied()
    }

    /// The address the client reached (see [`dst_of`]).
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        dst_of(&self.tr, self.pp_dst())()
    }

    /// The exchange's source: as an `http-request set-src[-port]` left
    /// it, else the connection's (HAProxy's stream address).
    pub(crate) fn stream_src(&self) -> SocketAddr {
        let set = self.vars.try_borrow().and_then(|v| v.info.src);
        set.unwrap_or(self.sess.peer)
    }

    /// The exchange's destination: as an `http-request set-dst[-port]`
    /// left it, else the connection's.
    pub(crate) fn stream_dst(&self) -> Option<SocketAddr> {
        let set = self.vars.try_borrow().and_then(|v| v.info.dst);
        set.or_else(|| self.local_addr())
    }
}

impl<S: Exchange + Default + 'static> Conn<S> {
    /// Takes an accepted socket: makes its tasklet, arms the tasklet's
    /// timer and queues a first run (the socket joins the poller when a run
    /// leaves the connection open).
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        ctx: &mut Ctx,
        sock: TcpStream,
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: std::rc::Rc<Worker>,
        tls: Option<Arc<rustls::ServerConfig>>,
        // Trackers and variables of the `tcp-request connection|session` rules.
        early: Option<(
            crate::table::Stk,
            Box<std::cell::RefCell<crate::sample::VarStore>>,
        )>,
        // `bind ... proto h1`.
        h1_only: bool,
    ) -> io::Result<()> {
        // Non-blocking (SOCK_NONBLOCK) and TCP_NODELAY from the listener:
        // no system call here.
        let fd = sock.as_raw_fd();
        let tr = Transport::accept(sock, tls)?;
        let mut conn = Self::make(ctx, tr, fd, peer, dst, fe, w, early);
        conn.h1_only = h1_only;
        conn.w.conn_opened(&conn.fe);
        conn.w.debug(|| {
            format!(
                "thread {} accepted {} on frontend {}{}",
                ctx.thread_id(),
                conn.sess.peer,
                conn.fe.name,
                if conn.tr.is_tls() { " (TLS)" } else { "" }
            )
        });
        conn.fe
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self::launch(ctx, conn);
        Ok(())
    }

    /// Takes the client connection of a tcp stream that becomes HTTP/1
    /// (`tcp::upgrade`): its session counted it on the frontend already;
    /// `pre`, the bytes it read, is the start of the first request, which
    /// begins where `first` says.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn adopt(
        ctx: &mut Ctx,
        tr: Transport,
        pre: &[u8],
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: std::rc::Rc<Worker>,
        early: (
            crate::table::Stk,
            Box<std::cell::RefCell<crate::sample::VarStore>>,
        ),
        first: Upgraded,
        h1_only: bool,
    ) {
        let fd = tr.raw_fd();
        let mut conn = Self::make(ctx, tr, fd, peer, dst, fe, w, Some(early));
        if !pre.is_empty() {
            let mut buf = conn.w.get_buf();
            if buf.len() < pre.len() {
                buf.resize(pre.len(), 0);
            }
            buf[..pre.len()].copy_from_slice(pre);
            conn.rbuf = buf;
            conn.rend = pre.len();
        }
        conn.h1_only = h1_only;
        conn.upgraded = Some(first);
        Self::launch(ctx, conn);
    }

    /// Gives a new connection its tasklet and queues its first run.
    fn launch(ctx: &mut Ctx, conn: Box<Self>) {
        // TLS connections get their own profiling name, so `show profiling`
        // tells handshake-heavy work from cleartext work.
        let name = if conn.tr.is_tls() {
            "h1_tls_conn"
        } else {
            "h1_conn"
        };
        let (first_deadline, heavy) = (conn.deadline, conn.heavy);
        let sess2 = Arc::clone(&conn.sess);
        let id = ctx.new_tasklet_boxed(name, Box::new(H1Task::Busy(conn)));
        sess2.set_tasklet(id);
        // Registered with the poller at the end of its first run that
        // leaves it open (see `registered`).
        ctx.on_stop_tasklet(id);
        ctx.tasklet_set_expire(id, first_deadline);
        if heavy {
            // A TLS handshake is expensive: at most a few per loop turn,
            // so it cannot add its cost to everyone's latency.
            ctx.set_heavy(id, true);
        }
        ctx.tasklet_wakeup(id);
    }

    /// The connection's state, its first deadline in `deadline` (the
    /// caller arms the tasklet's timer with it). Built in its box, which
    /// the tasklet holds while the connection is busy.
    #[allow(clippy::too_many_arguments)]
    fn make(
        ctx: &mut Ctx,
        tr: Transport,
        fd: RawFd,
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: std::rc::Rc<Worker>,
        early: Option<(
            crate::table::Stk,
            Box<std::cell::RefCell<crate::sample::VarStore>>,
        )>,
    ) -> Box<Self> {
        let now = ctx.now();
        let first_deadline = ticks::add(now, fe.timeouts.http_request);
        let sess = w.sessions.add(ctx.thread_id(), peer, Arc::clone(&fe));
        let heavy = tr.is_handshaking() && w.heavy_enabled;
        let (stk, vars) = early.unwrap_or_else(|| {
            (
                crate::table::Stk::new(Arc::clone(&fe.tables)),
                Default::default(),
            )
        });
        let lasting = Idle {
            tr,
            dst: dst.map(Box::new),
            fe,
            w,
            sess,
            vars: crate::sample::vars::ConnVars::new(vars),
            stk: None,
            stk_now: 0,
            // Set at the first run.
            me: TaskletId::from_local(0, u64::MAX),
            fd,
            idle_since: now,
            deadline: first_deadline,
            // Ready to read and write; not registered with the poller.
            flags: 0b101,
        };
        let mut c = Self::with_lasting(lasting, stk);
        c.heavy = heavy;
        c.me = None;
        c
    }

    /// Starts a lane of the HTTP/2 connection whose tasklet is `mux`: an
    /// HTTP/1 client side over `tr` (a [`Transport::Lane`]) running one
    /// stream per HTTP/2 stream, one after the other. Returns its tasklet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn_lane(
        ctx: &mut Ctx,
        tr: Transport,
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: std::rc::Rc<Worker>,
        mux: TaskletId,
        session: (
            crate::table::Stk,
            std::cell::RefCell<crate::sample::VarStore>,
        ),
    ) -> (TaskletId, Rc<RefCell<Self>>) {
        let session = (session.0, Box::new(session.1));
        let mut conn = Self::make(ctx, tr, -1, peer, dst, fe, w, Some(session));
        conn.lane_of = Some(mux);
        let first_deadline = conn.deadline;
        let sess = std::sync::Arc::clone(&conn.sess);
        // Shared with the HTTP/2 connection, which runs the start of its
        // streams on it inline (`start_inline`).
        let shared = Rc::new(RefCell::new(*conn));
        let id = ctx.new_tasklet_obj("h2_stream", LaneTask(Rc::clone(&shared)));
        sess.set_tasklet(id);
        ctx.on_stop_tasklet(id);
        ctx.tasklet_set_expire(id, first_deadline);
        (id, shared)
    }

    /// The HTTP/2 connection starts its stream on this lane inline: `head`
    /// is the request's head (a request without body), the lane's tasklet
    /// `me`. The stream's rules run and its answer is chosen now; a whole
    /// answer given at once is kept in [`Conn::native`] (not written as
    /// HTTP/1), anything else (a wait, bytes written as they are) stays
    /// for the lane's tasklet. Returns false, having done nothing, when
    /// the lane cannot take it this way (the caller writes `head` into its
    /// pipe instead).
    ///
    /// `built`: what the HTTP/2 side read of the head as it wrote it
    /// (`h2::RequestHead::write_h1_head`): nothing (parsed here), its
    /// request line's and fields' spans (completed without a parse), or the
    /// whole head.
    pub(crate) fn start_inline(
        &mut self,
        ctx: &mut Ctx,
        me: TaskletId,
        head: &[u8],
        built: Built<'_>,
    ) -> bool {
        if !matches!(self.input, In::Head)
            || self.rstart != self.rend
            || self.has_output()
            || self.closing
            || self.eof
        {
            return false;
        }
        if self.rbuf.is_empty() {
            self.rbuf = self.w.get_buf();
        }
        if head.len() > self.rbuf.len() {
            return false;
        }
        if self.head.headers.capacity() == 0 {
            self.head.headers = self.w.get_head_index();
        }
        if self.wbuf.capacity() == 0 {
            self.wbuf = self.w.get_wbuf();
        }
        self.me = Some(me);
        if ctx.stopping() {
            self.stopping = true;
        }
        self.rbuf[..head.len()].copy_from_slice(head);
        self.rstart = 0;
        self.rend = head.len();
        self.native.get_or_insert_with(Default::default).arm();
        match built {
            Built::Parse => {
                self.process(ctx);
            }
            Built::Spans(line, fields) => {
                self.head.headers.clear();
                self.head.headers.extend_from_slice(fields);
                self.start_built(ctx, Some(line));
            }
            Built::Head(h) => {
                self.head.assign(h);
                self.start_built(ctx, None);
            }
        }
        if let Some(n) = self.native.as_deref_mut() {
            n.armed = false;
        }
        true
    }

    /// [`Conn::process`] for a head in the buffer whose syntax is known:
    /// its fields' spans in `self.head`, completed as after a parse
    /// (`line`: the request line's spans), or (`None`) the whole head;
    /// then started.
    fn start_built(
        &mut self,
        ctx: &mut Ctx,
        line: Option<(crate::http1::Span, crate::http1::Span)>,
    ) {
        if self.req_start.is_none() {
            self.req_start = Some(ctx.now());
        }
        let mut r = match line {
            Some(line) => crate::http1::complete_request_into(
                &self.rbuf[self.rstart..self.rend],
                line,
                Version::Http11,
                self.rend - self.rstart,
                &self.req_limits(),
                &mut self.head,
                false,
            ),
            None => Ok(PStatus::Complete(())),
        };
        if let Ok(PStatus::Complete(())) = r {
            r = self.normalize_head();
        }
        match r {
            Ok(PStatus::Complete(())) => {
                // The lane's stream and variables may be in the thread's
                // pools since its last stream (as after a parse).
                self.unpark();
                self.with_stream(|st, c| st.start(c, ctx));
            }
            // A whole head is never partial; the parser says why not.
            Ok(PStatus::Partial) => {
                self.process(ctx);
            }
            Err(e) => self.bad_request(ctx, e),
        }
    }

    /// The answer [`Conn::start_inline`] kept, if one was.
    pub(crate) fn native_answer(&self) -> Option<&crate::mux::h2::native::Captured> {
        self.native.as_deref().filter(|n| n.done)
    }

    /// The answer's body bytes, when they are all of what remains to
    /// write: in the output buffer, or a file's held in memory with
    /// nothing before them (a small file's after its head was taken by
    /// [`Conn::native`]).
    pub(crate) fn pending_body(&self) -> Option<&[u8]> {
        if !matches!(self.input, In::Head) || self.rstart != self.rend {
            return None;
        }
        match &self.body {
            None => Some(&self.wbuf[self.wpos..]),
            Some(Body::Mem { file, pos, end }) if self.wpos == self.wbuf.len() => {
                file.bytes().and_then(|b| b.get(*pos..*end))
            }
            Some(_) => None,
        }
    }

    /// The output was sent by other means (the HTTP/2 connection took it).
    pub(crate) fn drop_output(&mut self) {
        self.wbuf.clear();
        self.wpos = 0;
        self.body = None;
    }

    /// Whether the exchange started inline is over on this side (its
    /// answer given whole, nothing left to write or wait for).
    pub(crate) fn inline_done(&self) -> bool {
        matches!(self.input, In::Head) && self.rstart == self.rend && !self.has_output()
    }

    /// After an exchange run inline: the lane idles (its buffers go back
    /// to the pool) and its timer follows its state, as at the end of a
    /// run of its own. `hold`: the buffers stay for now, as the next
    /// stream of the same batch of frames is likely to start here at
    /// once (the caller settles it again, not holding, when the batch
    /// ends).
    pub(crate) fn settle_inline(&mut self, ctx: &mut Ctx, hold: bool) {
        if let Some(n) = self.native.as_deref_mut() {
            n.done = false;
        }
        if hold {
            return;
        }
        if self.inline_done() {
            // Idle again, as at the end of a run of its own: buffers,
            // stream and variables go back to the thread's pools.
            self.release_buffers();
            self.park();
        }
        let d = self.next_deadline();
        if d != self.deadline {
            self.deadline = d;
            if let Some(me) = self.me {
                ctx.tasklet_set_expire(me, d);
            }
        }
    }

    /// Whether the first bytes read are the HTTP/2 connection preface
    /// (RFC 9113 §3.4), whole.
    fn h2_preface(&self) -> bool {
        self.rstart == 0
            && self
                .rbuf
                .get(..self.rend)
                .is_some_and(|b| b.starts_with(H2_PREFACE))
    }

    /// The TLS handshake chose `h2` (ALPN), or the client sent the HTTP/2
    /// preface on an HTTP/1 bind: hands the transport and the
    /// bytes already read to an HTTP/2 connection, and this tasklet ends.
    fn hand_to_h2(&mut self, ctx: &mut Ctx) -> Status {
        let Ok(dup) = self.tr.tcp().try_clone() else {
            return self.close(ctx);
        };
        let placeholder = Transport::Lane(Box::new(crate::transport::LaneEnd {
            pipe: Default::default(),
            sock: std::rc::Rc::new(dup),
            tls: false,
            sni: None,
            alpn: None,
        }));
        let tr = std::mem::replace(&mut self.tr, placeholder);
        if std::mem::take(&mut self.registered) {
            let _ = ctx.deregister_fd(self.fd);
        }
        self.w.sessions.remove(&self.sess);
        let early = self
            .rbuf
            .get(self.rstart..self.rend)
            .unwrap_or(&[])
            .to_vec();
        self.rstart = self.rend;
        self.release_buffers();
        let fe = Arc::clone(&self.fe);
        let w = std::rc::Rc::clone(&self.w);
        let fresh = crate::table::Stk::new(Arc::clone(&self.fe.tables));
        let session = (
            std::mem::replace(&mut self.stk, fresh),
            std::cell::RefCell::new(
                std::mem::take(&mut self.vars).into_store(self.sess.peer, self.pp_dst()),
            ),
        );
        let started = crate::mux::h2::H2Conn::<S>::spawn(
            ctx,
            tr,
            self.sess.peer,
            self.pp_dst(),
            fe,
            w,
            early,
            self.sess.accepted(),
            session,
        );
        if started.is_err() {
            self.w.conn_closed(ctx, &self.fe);
        }
        Status::Done
    }

    /// Runs `f` on the current stream, which reaches the connection
    /// through its second argument. `None` if the stream is already out
    /// (a call from within the stream's own run).
    fn with_stream<R>(&mut self, f: impl FnOnce(&mut S, &mut Self) -> R) -> Option<R> {
        let mut st = self.st.take()?;
        let r = f(&mut st, self);
        self.st = Some(st);
        Some(r)
    }

    /// Takes a stream from the thread's pool for a new exchange, if the
    /// connection's went back there.
    fn unpark(&mut self) {
        // Busy again: the thread's place goes back.
        self.warm = None;
        if std::mem::take(&mut self.parked) {
            self.st = Some(S::from_pool(&self.w));
        }
        let w = &self.w;
        self.vars
            .unpark(self.sess.peer, self.pp_dst(), || w.take_vars());
    }

    /// Gives the stream back to the thread's pool between two exchanges,
    /// when it holds nothing of this connection, and the variables' store
    /// likewise (see [`crate::sample::vars::ConnVars`]); unless the thread
    /// lets it keep them (a few idle connections may: see
    /// [`crate::worker::WARM_IDLE_MAX`]).
    fn park(&mut self) {
        if self.warm.is_some() {
            return;
        }
        self.park_in(true);
    }

    /// [`Conn::park`]'s work; `warm_ok`: whether the connection may keep
    /// its state in one of the thread's warm places (an idle one, which
    /// may have a next exchange; not a closing one, whose state would be
    /// freed with it while the thread's next connection allocates a new
    /// stream and store).
    fn park_in(&mut self, warm_ok: bool) {
        if warm_ok && !self.parked {
            self.warm = Worker::warm_idle(&self.w);
            if self.warm.is_some() {
                return;
            }
        }
        if self.st.as_ref().is_some_and(|s| s.parkable()) {
            if let Some(st) = self.st.take() {
                st.to_pool(&self.w);
                self.parked = true;
            }
        }
        let w = &self.w;
        self.vars.park(self.sess.peer, self.pp_dst(), |v, keep| {
            w.give_vars(v, keep)
        });
    }

    pub(crate) fn has_output(&self) -> bool {
        self.wpos < self.wbuf.len() || self.body.is_some() || self.tr.has_pending_output()
    }

    pub(crate) fn pending_out(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Reads once into the buffer. Returns whether bytes arrived.
    fn read_in(&mut self) -> io::Result<bool> {
        if self.rbuf.is_empty() {
            self.rbuf = self.w.get_buf();
            // Bytes may come: the exchange's variables with them.
            let w = &self.w;
            self.vars
                .unpark(self.sess.peer, self.pp_dst(), || w.take_vars());
        }
        if self.head.headers.capacity() == 0 {
            self.head.headers = self.w.get_head_index();
        }
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        if self.rend == self.rbuf.len() {
            // Full: make room by moving the unread bytes down, unless a head
            // waiting on the disk still points into them.
            let held = matches!(self.input, In::Stream)
                && self.st.as_ref().is_some_and(|s| s.holds_head());
            if self.rstart == 0 || held {
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
        // The connection closes once this output is out (the pump's
        // close below follows in the same pass): its last write carries
        // the FIN (see [`Transport::write_last`]).
        let ends = self.closing
            && !self.silent
            && self.tr.is_plain()
            && !self.st.as_ref().is_some_and(|s| s.active());
        loop {
            while let (true, Some(Body::Slices(src))) =
                (self.wpos == self.wbuf.len(), &mut self.body)
            {
                // The next slices, once the previous ones left (an encoder
                // may keep a slice's output back).
                if self.sent_run >= RUN_QUANTUM {
                    return Ok(moved);
                }
                self.wbuf.clear();
                self.wpos = 0;
                match src.next_slice(&mut self.wbuf) {
                    Ok(cost) => self.sent_run += cost,
                    Err(_) => {
                        // The promised body cannot be completed.
                        self.closing = true;
                        self.body = None;
                        self.wbuf.clear();
                        return Ok(moved);
                    }
                }
                if src.is_finished() {
                    self.body = None;
                }
            }
            let head = &self.wbuf[self.wpos..];
            let r = match &self.body {
                Some(Body::Mem { file, pos, end }) if !head.is_empty() || pos < end => {
                    let data = file.bytes().unwrap_or(&[]);
                    let b = data.get(*pos..*end).unwrap_or(&[]);
                    let want = head.len() + b.len();
                    let bufs = [IoSlice::new(head), IoSlice::new(b)];
                    if ends {
                        self.tr.write_last(&bufs).map(|n| (n, want, true))
                    } else {
                        self.tr.write_vectored(&bufs).map(|n| (n, want, false))
                    }
                }
                _ if !head.is_empty() && ends && self.body.is_none() => self
                    .tr
                    .write_last(&[IoSlice::new(head)])
                    .map(|n| (n, head.len(), true)),
                _ if !head.is_empty() => self.tr.write(head).map(|n| (n, head.len(), false)),
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
                    let r = self.tr.send_file(file.file(), &mut o, count);
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
                Ok((n, want, last)) => {
                    moved |= n > 0;
                    if last && n == want {
                        self.tr.end_output();
                        self.wr_shut = true;
                    }
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
                            self.unread = true;
                            self.rstart = self.rend;
                            self.input = In::Head;
                            return true;
                        }
                    }
                }
                In::Stream => {
                    // Step while bytes move (a response head, then its
                    // body), so they leave in one write.
                    let mut moved = self.with_stream(|st, c| st.step(c, ctx)).unwrap_or(false);
                    progress |= moved;
                    while moved && matches!(self.input, In::Stream) {
                        moved = self.with_stream(|st, c| st.step(c, ctx)).unwrap_or(false);
                    }
                    if matches!(self.input, In::Stream) {
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
                    if self.requests() == 0
                        && self.lane_of.is_none()
                        && self.rstart == 0
                        && self.rend < H2_PREFACE.len()
                        && H2_PREFACE.starts_with(&self.rbuf[..self.rend])
                    {
                        // Maybe the HTTP/2 preface: wait for all of it.
                        return progress;
                    }
                    if self.req_start.is_none() {
                        self.req_start = Some(ctx.now());
                    }
                    let limits = self.req_limits();
                    let mut r = parse_request_into(
                        &self.rbuf[self.rstart..self.rend],
                        &limits,
                        &mut self.head,
                    );
                    if let Ok(PStatus::Complete(())) = r {
                        r = self.normalize_head();
                    }
                    match r {
                        Ok(PStatus::Partial) => return progress,
                        Ok(PStatus::Complete(())) => {
                            if let Some(e) = self.early_body_error() {
                                self.bad_request(ctx, e);
                                return true;
                            }
                            self.unpark();
                            self.with_stream(|st, c| st.start(c, ctx));
                            progress = true;
                        }
                        Err(HttpError::UnsupportedVersion)
                            if self.rbuf[self.rstart..self.rend].starts_with(&H2_PREFACE[..16]) =>
                        {
                            // The HTTP/2 preface where HTTP/2 may not
                            // start (`proto h1`, a later request): a bad
                            // request to HAProxy, not a version it lacks.
                            self.bad_request(ctx, HttpError::BadRequestLine);
                            return true;
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

    /// A chunked body broken in the bytes that came with its head. HAProxy
    /// 2.6's HTTP/1 layer reads those before any stream starts, so there
    /// the request is a bad one (raw 400, `PR`, no server
    /// asked), as a bad head; a chunk that breaks later fails the exchange
    /// (`PH`/`PD`, [`crate::backend::error::ExchangeError::bad_request_body`]).
    /// One decoder pass over those bytes, for chunked requests only.
    fn early_body_error(&self) -> Option<HttpError> {
        if self.lane_of.is_some() || self.head.framing != crate::http1::BodyFraming::Chunked {
            return None;
        }
        let mut rest = self.rbuf.get(self.rstart + self.head.head_len..self.rend)?;
        let mut d = crate::http1::ChunkedDecoder::default();
        while !rest.is_empty() {
            match d.decode(rest) {
                Err(e) => return Some(e),
                Ok(x) if x.done || x.consumed == 0 => break,
                Ok(x) => rest = rest.get(x.consumed..).unwrap_or_default(),
            }
        }
        None
    }

    /// Scheme-based normalization of an absolute-form request (see
    /// [`scheme_normalized`]): the shorter head is written back so that it
    /// ends where the received one did (the body after it stays in place),
    /// and parsed again.
    #[inline]
    fn normalize_head(&mut self) -> Result<PStatus<()>, HttpError> {
        // What `scheme_normalized` looks at first, without a call: only an
        // absolute target whose authority ends in a default port changes
        // (most heads, an HTTP/2 one's absolute URI too, do not).
        let buf = self.rbuf.get(self.rstart..self.rend).unwrap_or_default();
        let default_port = self.head.target_form == crate::http1::TargetForm::Absolute
            && self.head.host.is_some_and(|h| {
                let a = h.get(buf);
                a.ends_with(b":80") || a.ends_with(b":443")
            });
        if !default_port {
            return Ok(PStatus::Complete(()));
        }
        self.normalize_scheme()
    }

    /// [`Conn::normalize_head`] past its first look.
    fn normalize_scheme(&mut self) -> Result<PStatus<()>, HttpError> {
        let old = &self.rbuf[self.rstart..self.rend];
        let Some(new) = scheme_normalized(old, &self.head) else {
            return Ok(PStatus::Complete(()));
        };
        let end = self.rstart + self.head.head_len;
        if let Some(start) = end.checked_sub(new.len()).filter(|&s| s >= self.rstart) {
            self.rbuf[start..end].copy_from_slice(&new);
            self.rstart = start;
        } else {
            // Longer (a `Host` shorter than the host it becomes): the
            // bytes after the head move up, if the buffer has the room.
            let grow = new.len() - self.head.head_len;
            if self.rbuf.len() - self.rend < grow {
                return Err(HttpError::HeadTooLarge);
            }
            self.rbuf.copy_within(end..self.rend, end + grow);
            self.rend += grow;
            self.rbuf[self.rstart..self.rstart + new.len()].copy_from_slice(&new);
        }
        let limits = self.req_limits();
        parse_request_into(&self.rbuf[self.rstart..self.rend], &limits, &mut self.head)
    }

    /// The limits a request head is read with: the thread's, without the
    /// field count on an HTTP/2 lane (its connection bounds the fields as
    /// HAProxy does, `crate::h2::lane_limits`).
    fn req_limits(&self) -> crate::http1::Limits {
        match self.lane_of {
            Some(_) => crate::h2::lane_limits(&self.w.limits),
            None => self.w.limits,
        }
    }

    /// A request that could not be read (malformed, cut short, late):
    /// counted as HAProxy counts it, a request (`req_tot`), its status's
    /// class and a failed request (`ereq`).
    fn count_failed_request(&self, status: u16) {
        use std::sync::atomic::Ordering::Relaxed;
        let h = &self.fe.http;
        h.failed_req.fetch_add(1, Relaxed);
        let h = h.local();
        h.requests.fetch_add(1, Relaxed);
        let class = usize::from(status / 100).wrapping_sub(1).min(5);
        h.hrsp[class].fetch_add(1, Relaxed);
    }

    /// A request that could not be parsed: its status, a log line, close.
    fn bad_request(&mut self, ctx: &mut Ctx, e: HttpError) {
        let status = e.status();
        self.count_failed_request(status);
        let start = self.wbuf.len();
        self.parse_error_response(status);
        let bytes = (self.wbuf.len() - start) as u64 + self.native_sent();
        let end = self.rbuf[self.rstart..self.rend]
            .iter()
            .position(|&c| c == b'\r' || c == b'\n')
            .unwrap_or((self.rend - self.rstart).min(256));
        let line = self.rbuf[self.rstart..self.rstart + end].to_vec();
        let tq = self.elapsed(ctx, self.req_start);
        self.bytes_in = 0;
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
        let sd = self.fe.log_sd(&entry);
        self.w.log_fe_error_sd(&self.fe, l, sd, self.fe.err_level());
        self.rstart = self.rend;
        self.closing = true;
        // The rest of what the client sent is not read.
        self.unread = true;
        self.req_start = None;
    }

    /// The one place a log entry is built: the connection's facts (client,
    /// accept date, frontend, connection counts) around the exchange's.
    /// Whether the exchange's access-log line goes out: not the first
    /// one of a tcp stream upgraded in place (an HTTP/1 connection of a
    /// tcp frontend) when its frontend logs HAProxy's default line, which
    /// the stream's start gave already.
    pub(crate) fn logs_exchange(&self) -> bool {
        let l4 = &self.fe.l4;
        let connect_line = l4.tcp_mode && !l4.tcplog && self.fe.log_format.is_none();
        let first_in_place = self.lane_of.is_none() && self.requests() == 1;
        !(connect_line && first_in_place) && self.w.logging(&self.fe)
    }

    pub(crate) fn log_entry<'a>(&'a self, f: LogFacts<'a>) -> crate::log::Entry<'a> {
        let [tq, tw, tc, tr, tt] = f.times;
        let l4 = &self.fe.l4;
        // A tcp frontend's upgraded stream (`tcp::upgrade`): its line,
        // `option tcplog`'s or HAProxy's default one.
        let tcp_fmt = (l4.tcp_mode && self.fe.log_format.is_none())
            .then(|| crate::sample::logline::tcplog(!l4.tcplog));
        crate::log::Entry {
            client: self.stream_src(),
            accept: self.sess.accepted(),
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
            bytes_in: self.bytes_in,
            txn: true,
            term: f.term,
            actconn: self.w.actconn(),
            feconn: self.fe.cur_conns(),
            request_line: f.request_line,
            request_date: std::time::SystemTime::now()
                .checked_sub(std::time::Duration::from_millis(tt.max(0) as u64)),
            local: match tcp_fmt {
                Some(_) if !l4.tcplog => self.stream_dst(),
                _ => self.fe.log_local(self.tr.tcp()),
            },
            tls: self.tr.is_tls(),
            cookie_flags: "--",
            h2: self.lane_of.is_some(),
            vars: self.vars.cell(),
            ncaps: self.fe.ncaps(),
            fmt: self.fe.log_format.as_ref().or(tcp_fmt),
            asap: false,
        }
    }

    /// The HTTP/1 size of the answer kept for HTTP/2 frames for the
    /// current request (0 when it was written here).
    pub(crate) fn native_sent(&self) -> u64 {
        self.native.as_deref().map_or(0, |n| n.sent())
    }

    pub(crate) fn elapsed(&self, ctx: &Ctx, since: Option<Tick>) -> i64 {
        match since {
            Some(t) => ctx.now().wrapping_sub(t) as i32 as i64,
            None => 0,
        }
    }

    /// The one output path of this client side: writes an answer to the
    /// current request (`head`), given as messages (a head view, its body
    /// parts, its end), as HTTP/1 into the output buffer ([`H1Out`]). The
    /// framing and the `Connection:` field follow the request's version
    /// and method; the connection closes after the answer when the head
    /// asks to ([`RespHead::close`]) or the framing needs it.
    pub(crate) fn respond(&mut self, head: RespHead<'_>, body: &[&[u8]]) {
        let (version, head_req) = (self.head.version, self.head.method == Method::Head);
        self.respond_to(head, body, version, head_req);
    }

    /// Writes an answer written ahead ([`WholeAnswer`]) to the current
    /// request, when it is what [`Conn::respond`] would write: an HTTP/1.1
    /// request but `HEAD`, on a connection kept alive, not taken by an
    /// HTTP/2 lane's native answer. Returns whether it was written (else
    /// the caller answers through [`Conn::respond`]). `now` is the
    /// scheduler turn's tick: the `Date` is read once per turn (0: read
    /// now, see [`crate::http1::DateCache::get_in_turn`]).
    ///
    /// [`WholeAnswer`]: crate::stream::msg::WholeAnswer
    pub(crate) fn respond_whole(&mut self, a: &crate::stream::msg::WholeAnswer, now: Tick) -> bool {
        if self.closing
            || self.head.version != Version::Http11
            || self.head.method == Method::Head
            || self.native.as_deref().is_some_and(|n| n.armed)
        {
            return false;
        }
        let date = *self.w.date.borrow_mut().get_in_turn(now);
        a.write(&mut self.wbuf, &date);
        true
    }

    /// Writes only the head of an answer to the current request; its body
    /// leaves from [`Conn::body`] (a file, with `sendfile`).
    pub(crate) fn respond_head(&mut self, head: RespHead<'_>) {
        let (version, head_req) = (self.head.version, self.head.method == Method::Head);
        if self.take_native(&head, None, version, head_req) {
            return;
        }
        let mut o = self.out(version, head_req);
        o.put(Msg::Head(head));
        if o.closing() {
            self.closing = true;
        }
    }

    /// [`Conn::respond`] for a request of `version` (`head_req`: a HEAD).
    fn respond_to(&mut self, head: RespHead<'_>, body: &[&[u8]], version: Version, head_req: bool) {
        if self.take_native(&head, Some(body), version, head_req) {
            return;
        }
        let mut o = self.out(version, head_req);
        o.whole(head, body);
        if o.closing() {
            self.closing = true;
        }
    }

    /// An answer armed [`Conn::native`] takes instead of its HTTP/1
    /// bytes (`body` `None`: its head, the body following). Returns
    /// whether it was taken.
    fn take_native(
        &mut self,
        head: &RespHead<'_>,
        body: Option<&[&[u8]]>,
        version: Version,
        head_req: bool,
    ) -> bool {
        let Some(n) = self.native.as_deref_mut().filter(|n| n.armed) else {
            return false;
        };
        if self.wpos != self.wbuf.len() || self.body.is_some() {
            return false;
        }
        let date = *self.w.date.borrow_mut().get();
        use crate::mux::h2::native::Take;
        match n.take(head, body, version, head_req, !self.closing, &date) {
            Take::No => false,
            Take::Keep => true,
            Take::Close => {
                self.closing = true;
                true
            }
        }
    }

    fn out(&mut self, version: Version, head_req: bool) -> H1Out<'_> {
        let date = *self.w.date.borrow_mut().get();
        let keep_alive = !self.closing;
        H1Out::new(&mut self.wbuf, date, version, head_req, keep_alive)
            .with_case(self.fe.h1_case.as_deref())
    }

    /// Writes ebb's error answer for `status` (or the frontend's errorfile
    /// for it): an HTML page naming the status, `Content-Type: text/html`,
    /// `Cache-Control: no-cache`, then `extra` (`Allow` for 405, say).
    pub(crate) fn error_response(
        &mut self,
        status: u16,
        keep_alive: bool,
        version: Version,
        head_req: bool,
        extra: &[(&[u8], &[u8])],
    ) {
        if let Some(f) = self.fe.errorfile(status) {
            // An errorfile is a whole HTTP/1 answer, sent as written; its
            // framing is its own, so the connection ends after it.
            let at = self.wbuf.len();
            self.wbuf.extend_from_slice(f);
            if let Some(m) = &self.fe.h1_case {
                m.adjust_head(self.wbuf.get_mut(at..).unwrap_or(&mut []));
            }
            self.closing = true;
            return;
        }
        let (pre, post) = error_page(status);
        let reason = error_reason(status);
        let len = (pre.len() + reason.len() + post.len()) as u64;
        // The thread's: the answer is written at once.
        let mut fields = self.w.error_fields.take();
        fields.clear();
        // HAProxy 2.6's order (its `http_err_msgs`): the length, then
        // these, `Connection` last.
        fields.push(b"Cache-Control", b"no-cache");
        fields.push(b"Content-Type", b"text/html");
        for (n, v) in extra {
            fields.push(n, v);
        }
        let head = RespHead {
            extra: fields.fields(),
            close: !keep_alive,
            reason: reason.as_bytes(),
            length_at: Some(0),
            ..RespHead::new(status, BodySize::Exact(len))
        };
        let body = [pre.as_bytes(), reason.as_bytes(), post.as_bytes()];
        self.respond_to(head, &body, version, head_req);
        self.w.error_fields.set(fields);
    }

    /// The answer to a request that could not be read (400, 408): HAProxy
    /// 2.6's raw page there ([`crate::http1::write_parse_error`]), or the
    /// frontend's errorfile; the connection ends after it.
    fn parse_error_response(&mut self, status: u16) {
        let native = self.native.as_deref().is_some_and(|n| n.armed);
        if native || self.fe.errorfile(status).is_some() {
            self.error_response(status, false, Version::Http11, false, &[]);
            return;
        }
        let date = *self.w.date.borrow_mut().get();
        let at = self.wbuf.len();
        crate::http1::write_parse_error(&mut self.wbuf, status, &date);
        if let Some(m) = &self.fe.h1_case {
            m.adjust_head(self.wbuf.get_mut(at..).unwrap_or(&mut []));
        }
        self.closing = true;
    }

    /// The connection's timer fired: 408 for a head that did not arrive in
    /// time, a plain close for an idle or stalled connection.
    /// Whether a keep-alive connection found past its idle timeout has the
    /// client's next request waiting in the socket: sent in time, it is
    /// read and answered rather than closed unanswered when the thread
    /// came to the connection late (a loaded machine; the timer and the
    /// bytes reported in the same turn). Only between requests: the
    /// first request's and a started head's `timeout http-request` still
    /// run from their own start. One `recv(MSG_PEEK)`, only at a timeout.
    fn request_waiting(&self) -> bool {
        if self.lane_of.is_some()
            || self.requests() == 0
            || self.req_start.is_some()
            || !matches!(self.input, In::Head)
            || self.has_output()
        {
            return false;
        }
        let mut b = [0u8; 1];
        matches!(self.tr.tcp().peek(&mut b), Ok(n) if n > 0)
    }

    fn on_timeout(&mut self, ctx: &mut Ctx) -> Status {
        if self.wbuf.capacity() == 0 {
            self.wbuf = self.w.get_wbuf();
        }
        if self.tr.is_handshaking() {
            self.conn_error(format!(
                "{} [{}] {}: SSL handshake timeout{}",
                self.sess.peer,
                self.fe.name,
                self.fe.name,
                self.tr.hello_note()
            ));
            return self.close(ctx);
        }
        if matches!(self.input, In::Head) && !self.has_output() {
            self.unfinished_request(ctx, 408, "cR");
        }
        self.close(ctx)
    }

    /// A connection error before any request (a TLS handshake that failed
    /// or timed out), HAProxy's `session_kill_embryonic` line: the
    /// frontend's `error-log-format` when it has one and logs (with its
    /// `log-format-sd`; no request: status 0, `PR`, `<BADREQ>`), else
    /// `line`.
    fn conn_error(&self, line: String) {
        let level = self.fe.err_level();
        let fmt = self.fe.error_log_format.as_ref();
        let Some(fmt) = fmt.filter(|_| self.w.logging(&self.fe)) else {
            self.w.log_fe_error(&self.fe, line.into_bytes(), level);
            return;
        };
        let tt = std::time::SystemTime::now()
            .duration_since(self.sess.accepted())
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut e = self.log_entry(LogFacts {
            backend: &self.fe.name,
            server: "<NOSRV>",
            times: [-1, -1, -1, -1, tt],
            status: 0,
            bytes: 0,
            term: "PR",
            request_line: b"<BADREQ>",
        });
        e.fmt = Some(fmt);
        // No stream yet: HAProxy's `%ST` 0.
        e.txn = false;
        let sd = self.fe.log_sd(&e);
        self.w.log_access_sd(crate::log::format(&e), sd, level);
    }

    /// A connection that ends before a request came whole, as HAProxy's
    /// HTTP/1 side ends it: with part of a request, `status` (400 when
    /// the client closed, 408 at `timeout http-request`) and a
    /// `<BADREQ>` line (`term`, `CR` or `cR`). A new connection that sent
    /// nothing (a browser's pre-connect, a port probe) ends the same way,
    /// except that `option dontlognull` leaves its line out and `option
    /// http-ignore-probes` its status and line both; one idle between
    /// keep-alive requests, or an HTTP/2 lane, ends silently.
    fn unfinished_request(&mut self, ctx: &mut Ctx, status: u16, term: &str) {
        let null = self.rstart == self.rend;
        if self.lane_of.is_some()
            || self.tr.is_handshaking()
            || null && (self.requests() > 0 || self.fe.ignore_probes)
        {
            return;
        }
        if self.wbuf.capacity() == 0 {
            self.wbuf = self.w.get_wbuf();
        }
        self.count_failed_request(status);
        self.parse_error_response(status);
        // To a client that closed only its sending side, the answer gets
        // through; to one gone, the write fails, as HAProxy's.
        let _ = self.flush();
        // A frontend without log targets sends its error lines to stderr
        // (see [`Worker::log_fe_error`]): not a probe's, which carried no
        // request to see.
        if null && (self.fe.dontlognull || !self.w.logging(&self.fe)) {
            return;
        }
        let tt = self.elapsed(ctx, self.req_start.or(Some(self.idle_since)));
        // No request came whole: nothing counted (HAProxy's `%U` 0).
        self.bytes_in = 0;
        let e = self.log_entry(LogFacts {
            backend: &self.fe.name,
            server: "<NOSRV>",
            times: [-1, -1, -1, -1, tt],
            status,
            // No exchange carried bytes (HAProxy's figure too).
            bytes: 0,
            term,
            request_line: b"<BADREQ>",
        });
        let sd = self.fe.log_sd(&e);
        self.w
            .log_fe_error_sd(&self.fe, crate::log::format(&e), sd, self.fe.err_level());
    }

    /// The next date this connection must act by, given its state.
    fn next_deadline(&self) -> Tick {
        let t = &self.fe.timeouts;
        if let Some(d) = self.st.as_ref().and_then(|s| s.deadline()) {
            // The server side's own date; the client's applies only while
            // it holds our output back.
            return if self.has_output() {
                ticks::first(d, ticks::add(self.idle_since, t.client))
            } else {
                d
            };
        }
        if self.has_output() || !matches!(self.input, In::Head) {
            return ticks::add(self.idle_since, t.client);
        }
        let d = match self.req_start {
            Some(s) => return ticks::add(s, t.http_request),
            None if self.requests() == 0 => ticks::add(self.idle_since, t.http_request),
            None => ticks::add(self.idle_since, t.keep_alive),
        };
        // Idle during a stop: closed after its grace (crate::drain).
        ticks::first(d, self.stop_deadline())
    }

    /// When a stop closes this connection while it idles (crate::drain).
    fn stop_deadline(&self) -> Tick {
        let ico = self.fe.idle_close_on_response;
        crate::drain::idle_deadline(self.stopping, self.idle_since, ico, self.fd as u64)
    }

    fn close(&mut self, ctx: &mut Ctx) -> Status {
        if self.lingering {
            return self.end(ctx);
        }
        self.with_stream(|st, c| st.client_gone(c, ctx));
        // A clean stream serves the thread's next connection: it goes to
        // the pool, and a warm place this connection held goes back
        // (kept, both would be freed with the connection: two heap blocks
        // allocated and freed per connection).
        self.warm = None;
        self.park_in(false);
        if let Some(mux) = self.lane_of {
            // A lane: its HTTP/2 connection holds the socket and counts
            // the connection; it learns of the end through the pipe.
            self.w.sessions.remove(&self.sess);
            let _ = self.tr.shutdown();
            self.release_buffers();
            ctx.tasklet_wakeup(mux);
            return Status::Done;
        }
        if self.linger_wanted() {
            return self.linger(ctx);
        }
        self.end(ctx)
    }

    /// Whether the client may still send when its connection ends, so
    /// that closing now could reset the answer (see [`Conn::linger`]):
    /// bytes of a request not read to their end (a bad request's rest, a
    /// body ebb did not read, a stream's request under way), requests
    /// pipelined behind the last answer, bytes the socket reported and
    /// nothing read, and every TLS connection (a client answers our
    /// `close_notify` with its own). Not when the client closed already,
    /// nor for `option nolinger` (its close is a reset by design) or a
    /// `silent-drop`, nor during a TLS handshake (a failure or a
    /// timeout: nothing to answer). A request read whole and answered,
    /// its socket drained at the last read (a connection per request),
    /// closes at once: no system call more than the close.
    fn linger_wanted(&self) -> bool {
        if self.silent || self.eof || self.fe.nolinger || self.tr.is_handshaking() {
            return false;
        }
        self.tr.is_tls()
            || self.unread
            || self.rd_ready
            || self.rstart < self.rend
            || !matches!(self.input, In::Head)
            || self.next_input.is_some()
            || self.closing && !matches!(self.head.framing, crate::http1::BodyFraming::None)
    }

    /// A lingering close (nginx's `lingering_close`; Apache's): the
    /// connection ends its side (TLS's `close_notify`, then the FIN after
    /// the answer) and reads on, dropping what comes, until the client
    /// closes too (its FIN, its `close_notify`), so that no byte arrives
    /// to a closed socket, whose kernel would answer with a reset (and
    /// one over bytes unread drops our unsent answer from the send
    /// queue). Bounded: `timeout client` from the start (HAProxy's limit
    /// for a client half-closed, `timeout client-fin` being unknown to
    /// ebb; not renewed by what comes) and [`LINGER_MAX_BYTES`], past
    /// which it closes with what is left unread (a reset). The
    /// connection still counts (`maxconn`) until then; it is out of
    /// `show sess` (no stream).
    ///
    /// HAProxy 2.6 on the HTTP/1 client side shuts its sending side and
    /// closes at once (`h1_shutw_conn`, then `h1_release`): a byte that
    /// comes after, or sat unread, gets a reset; its only drain,
    /// `conn_ctrl_drain` (two reads of a buffer), is for failed TLS
    /// handshakes and `silent-drop`. So a client that pipelines behind a
    /// `Connection: close` answer, or sends a body an answer refused, can
    /// lose that answer to HAProxy's reset; not to ebb's.
    fn linger(&mut self, ctx: &mut Ctx) -> Status {
        self.w.sessions.remove(&self.sess);
        self.lingering = true;
        self.release_buffers();
        self.tr.close_notify();
        self.linger_left = LINGER_MAX_BYTES;
        self.deadline = ticks::add(ctx.now(), self.fe.timeouts.client);
        if let Some(me) = self.me {
            ctx.tasklet_set_expire(me, self.deadline);
        }
        self.linger_step(ctx)
    }

    /// A run of a lingering connection: the end of its TLS records, its
    /// FIN, then what the client sends, read and dropped until its end
    /// (the connection closes), the bound (closes with a reset) or no
    /// more for now (waits for the socket's next edge).
    fn linger_step(&mut self, ctx: &mut Ctx) -> Status {
        if self.stopping {
            // The process stops: no longer than an idle connection's
            // grace (crate::drain), not a whole `timeout client`.
            let d = ticks::first(
                self.deadline,
                ticks::add(ctx.now(), crate::drain::IDLE_GRACE_MS),
            );
            if d != self.deadline {
                self.deadline = d;
                if let Some(me) = self.me {
                    ctx.tasklet_set_expire(me, d);
                }
            }
        }
        if ticks::is_expired(self.deadline, ctx.now()) {
            return self.end(ctx);
        }
        if self.tr.has_pending_output() && self.wr_ready {
            match self.tr.flush_pending() {
                Ok(true) => {}
                Ok(false) => self.wr_ready = false,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wr_ready = false,
                Err(_) => return self.end(ctx),
            }
        }
        if !self.wr_shut && !self.tr.has_pending_output() {
            self.tr.shut_write();
            self.wr_shut = true;
        }
        let mut buf = [0u8; 16 * 1024];
        while self.rd_ready {
            match self.tr.read(&mut buf) {
                Ok(0) => return self.end(ctx),
                Ok(n) => {
                    let Some(left) = self.linger_left.checked_sub(n as u32) else {
                        return self.end(ctx);
                    };
                    self.linger_left = left;
                    if n < buf.len() && !self.rd_hup && !self.tr.read_pending() {
                        self.rd_ready = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.rd_ready = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.end(ctx),
            }
        }
        Status::Continue
    }

    /// The connection's end: out of the registry and the counts, its
    /// buffers back to the pools, its socket closed with its state.
    fn end(&mut self, ctx: &mut Ctx) -> Status {
        // No `epoll_ctl(DEL)`: the socket is closed when this tasklet's
        // state is dropped (no other descriptor shares it), which takes it
        // out of the poller; an event in between finds a freed tasklet
        // slot and is ignored.
        if !self.lingering {
            self.w.sessions.remove(&self.sess);
        }
        self.w.debug(|| {
            format!(
                "closed {} on frontend {} after {} requests",
                self.sess.peer,
                self.fe.name,
                self.requests()
            )
        });
        // A plain socket is this connection's own descriptor: closing it
        // (when the state drops) sends the FIN, or the RST over unread
        // bytes, as `shutdown` then `close` would, one system call fewer.
        // TLS first sends its `close_notify` (a lingering close did).
        if !self.silent && !self.lingering && !matches!(self.tr, Transport::Plain(_)) {
            let _ = self.tr.shutdown();
        }
        self.release_buffers();
        self.w.conn_closed(ctx, &self.fe);
        Status::Done
    }

    fn release_buffers(&mut self) {
        if !self.rbuf.is_empty() {
            self.w.put_buf(std::mem::take(&mut self.rbuf));
            // The head's index points into that buffer: it goes too.
            self.w
                .put_head_index(std::mem::take(&mut self.head.headers));
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
                    Ok(m) if self.requests() == 0 && self.tr.alpn() == Some(b"h2") => {
                        if !self.tr.is_handshaking() && self.lane_of.is_none() {
                            // The client took the `h2` offer.
                            return self.hand_to_h2(ctx);
                        }
                        moved |= m;
                    }
                    Ok(m)
                        if self.requests() == 0
                            && self.lane_of.is_none()
                            && !self.fe.disable_h2_upgrade
                            && !self.h1_only
                            && self.h2_preface() =>
                    {
                        // HAProxy's implicit upgrade: an HTTP/1 connection
                        // whose first bytes are the HTTP/2 preface (prior
                        // knowledge) is served HTTP/2.
                        let _ = m;
                        return self.hand_to_h2(ctx);
                    }
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
                            self.conn_error(format!(
                                "{} [{}] {}: {what}: {e}",
                                self.sess.peer, self.fe.name, self.fe.name
                            ));
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
            } else if self.closing && !self.st.as_ref().is_some_and(|s| s.active()) {
                return self.close(ctx);
            }
            if !moved {
                break;
            }
            if !self.rd_ready
                && matches!(self.input, In::Head)
                && self.rstart == self.rend
                && !self.has_output()
            {
                // Nothing can move in another pass: no read is due (the
                // socket was drained), no request is buffered, nothing
                // waits to be written (a keep-alive answer that left
                // whole: the usual end of a request's run).
                break;
            }
        }
        if self.eof && self.st.as_ref().is_some_and(|s| s.reading_request()) {
            // The client left before its request was all sent.
            return self.close(ctx);
        }
        let idle = matches!(self.input, In::Head) && self.rstart == self.rend && !self.has_output();
        if idle {
            let stop_at = self.stop_deadline();
            if self.eof || (stop_at != ticks::ETERNITY && ticks::is_expired(stop_at, ctx.now())) {
                if self.eof && !self.closing {
                    // Closed before any request byte: a probe.
                    self.unfinished_request(ctx, 400, "CR");
                }
                if !self.eof && !self.rd_ready && !self.closing && self.lane_of.is_none() {
                    // The stop's run may come before the poller saw the
                    // client's next request arrive: a close over unread
                    // bytes would reset it unanswered. Look once; a request
                    // that came is answered (with `Connection: close`).
                    if let Ok(true) = self.read_in() {
                        return self.pump(ctx);
                    }
                }
                return self.close(ctx);
            }
            self.release_buffers();
            self.park();
        } else if self.eof && matches!(self.input, In::Head) && !self.has_output() {
            // The client closed in the middle of a head: 400 (it may
            // still read) and a line.
            if !self.closing {
                self.unfinished_request(ctx, 400, "CR");
            }
            return self.close(ctx);
        }
        let d = self.next_deadline();
        if d != self.deadline {
            self.deadline = d;
            if let Some(me) = self.me {
                ctx.tasklet_set_expire(me, d);
            }
        }
        Status::Continue
    }
}

/// The tasklet of a lane (`h2_stream`): its client side, shared with its
/// HTTP/2 connection.
struct LaneTask<S>(Rc<RefCell<Conn<S>>>);

impl<S: Exchange + Default + 'static> TaskletFn for LaneTask<S> {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        match self.0.try_borrow_mut() {
            Ok(mut c) => c.run(ctx, me, why),
            Err(_) => {
                // Never while its HTTP/2 connection runs it inline (one
                // thread, no nesting); if it were, run again.
                ctx.tasklet_wakeup(me);
                Status::Continue
            }
        }
    }
}

impl<S: Exchange + Default + 'static> TaskletFn for Conn<S> {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        self.me = Some(me);
        self.sent_run = 0;
        if let Some(mux) = self.lane_of {
            // A lane has no socket: every wake-up may bring request bytes
            // or room for the answer.
            self.rd_ready = true;
            self.wr_ready = true;
            let st = self.run_inner(ctx, me, why);
            if st == Status::Continue {
                let dirty = self
                    .tr
                    .lane_pipe()
                    .is_some_and(|p| std::mem::take(&mut p.borrow_mut().dirty));
                if dirty {
                    ctx.tasklet_wakeup(mux);
                }
            }
            return st;
        }
        let st = self.run_inner(ctx, me, why);
        // Writability is watched only once a write blocked (HAProxy's
        // `fd_want_send`): a connection whose answers always leave whole
        // is never woken by its socket's writable edges.
        let blocked = self.has_output() && !self.wr_ready;
        if st == Status::Continue && self.registered && blocked && ctx.want_write(self.fd).is_err()
        {
            // (Only when the poller cannot: out of memory.)
            return self.close(ctx);
        }
        if st == Status::Continue && !self.registered && self.needs_poller() {
            if let Err(e) = ctx.register_fd(self.fd, me, blocked) {
                self.w.log_fe_error(
                    &self.fe,
                    format!(
                        "{}: cannot poll a connection from {}: {e}",
                        self.fe.name, self.sess.peer
                    )
                    .into_bytes(),
                    self.fe.err_level(),
                );
                return self.close(ctx);
            }
            self.registered = true;
        }
        st
    }
}

/// A plain HTTP/1 client connection's tasklet: its whole state while
/// it works ([`Conn`], taken back from the heap at each run that finds
/// it idle), or only what lasts between two exchanges ([`Idle`]).
enum H1Task<S> {
    Busy(Box<Conn<S>>),
    Idle(Idle),
    /// Only while the state changes form.
    Gone,
}

/// What an idle connection keeps (issue 12: an idle connection's
/// memory): its socket, its addresses, its frontend, its registry entry,
/// its variables and trackers, its timer's dates and readiness. What an
/// exchange uses (buffers' positions, the request head's spans, the
/// body's state, the stream) is in [`Conn`] only while one is under way.
struct Idle {
    tr: Transport,
    dst: Option<Box<SocketAddr>>,
    fe: Arc<FrontendRt>,
    w: Rc<Worker>,
    sess: Arc<crate::registry::SessInfo>,
    vars: crate::sample::vars::ConnVars,
    /// `None`: nothing tracked (a new one is made, dated `stk_now`).
    stk: Option<Box<crate::table::Stk>>,
    stk_now: u32,
    me: TaskletId,
    fd: RawFd,
    idle_since: Tick,
    deadline: Tick,
    /// `rd_ready`, `rd_hup`, `wr_ready`, `eof`, `silent`, `stopping`,
    /// `registered`, `h1_only` (bits 0 to 7).
    flags: u8,
}

impl<S: Exchange + Default + 'static> TaskletFn for H1Task<S> {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        if let H1Task::Idle(_) = self {
            if let H1Task::Idle(i) = std::mem::replace(self, H1Task::Gone) {
                *self = H1Task::Busy(Conn::from_idle(i));
            }
        }
        let H1Task::Busy(c) = self else {
            return Status::Done;
        };
        let st = c.run(ctx, me, why);
        if st == Status::Continue && c.idle_form() {
            if let H1Task::Busy(c) = std::mem::replace(self, H1Task::Gone) {
                *self = H1Task::Idle(c.into_idle());
            }
        }
        st
    }
}

impl<S: Exchange + Default + 'static> Conn<S> {
    /// Whether the connection, left open by a run, waits on its socket's
    /// events (and must join the poller): output the socket did not take,
    /// or input it wants (a request, its body, a tunnel's bytes, the
    /// client's close under `abortonclose`). A request read whole whose
    /// exchange then waits on its server needs none: the client is
    /// registered only when it next needs reading (the answer given, its
    /// next request awaited) or writing, and a connection per request
    /// answered with `Connection: close` never joins the poller, as in
    /// HAProxy (it subscribes a client only when a read finds nothing).
    fn needs_poller(&self) -> bool {
        if self.lingering || self.has_output() && !self.wr_ready {
            return true;
        }
        match self.input {
            In::Stream => self.st.as_ref().is_none_or(|s| s.watches_client()),
            _ => true,
        }
    }

    /// Whether nothing of an exchange is left (see [`Idle`]): no stream
    /// (in the pool, not kept in a warm place), no buffer, no output, no
    /// head begun, registered with the poller.
    fn idle_form(&self) -> bool {
        self.warm.is_none()
            && self.upgraded.is_none()
            && self.parked
            && self.st.is_none()
            && self.registered
            && self.lane_of.is_none()
            && !self.heavy
            && !self.closing
            && self.me.is_some()
            && matches!(self.input, In::Head)
            && self.next_input.is_none()
            && self.req_start.is_none()
            && self.rend == 0
            && self.rbuf.is_empty()
            && self.wbuf.capacity() == 0
            && self.head.headers.capacity() == 0
            && self.body.is_none()
            && self.native.is_none()
            && !self.tr.has_pending_output()
            && !self.tr.is_handshaking()
            && !self.lingering
    }

    /// The idle form of a connection [`Conn::idle_form`] found idle.
    fn into_idle(self: Box<Self>) -> Idle {
        let Conn {
            tr,
            fd,
            dst,
            fe,
            w,
            rd_ready,
            rd_hup,
            wr_ready,
            eof,
            silent,
            stopping,
            idle_since,
            deadline,
            me,
            vars,
            stk,
            sess,
            registered,
            h1_only,
            ..
        } = *self;
        let stk_now = stk.now();
        let stk = (!stk.is_clear()).then(|| Box::new(stk));
        let flags = [
            rd_ready, rd_hup, wr_ready, eof, silent, stopping, registered, h1_only,
        ]
        .iter()
        .enumerate()
        .fold(0u8, |f, (i, b)| f | (u8::from(*b) << i));
        Idle {
            tr,
            dst,
            fe,
            w,
            sess,
            vars,
            stk,
            stk_now,
            me: me.unwrap_or(TaskletId::from_local(0, u64::MAX)),
            fd,
            idle_since,
            deadline,
            flags,
        }
    }

    /// The whole state again, for a run of an idle connection: what
    /// lasts from `i`, what an exchange uses as a new connection has it.
    fn from_idle(mut i: Idle) -> Box<Self> {
        let stk = match i.stk.take() {
            Some(s) => *s,
            None => {
                let s = crate::table::Stk::new(Arc::clone(&i.fe.tables));
                s.set_now(i.stk_now);
                s
            }
        };
        Self::with_lasting(i, stk)
    }

    /// A connection's state from what lasts (`i`, its trackers `stk`
    /// apart), between two exchanges.
    fn with_lasting(i: Idle, stk: crate::table::Stk) -> Box<Self> {
        let bit = |n: u8| i.flags & (1 << n) != 0;
        Box::new(Conn {
            rd_ready: bit(0),
            rd_hup: bit(1),
            wr_ready: bit(2),
            eof: bit(3),
            silent: bit(4),
            stopping: bit(5),
            registered: bit(6),
            tr: i.tr,
            fd: i.fd,
            heavy: false,
            dst: i.dst,
            fe: i.fe,
            w: i.w,
            rbuf: Vec::new(),
            rstart: 0,
            rend: 0,
            wbuf: Vec::new(),
            wpos: 0,
            body: None,
            input: In::Head,
            // Its header index comes from the thread's pool with the read
            // buffer, and goes back to it while the connection idles.
            head: RequestHead::default(),
            closing: false,
            req_start: None,
            bytes_in: 0,
            idle_since: i.idle_since,
            deadline: i.deadline,
            me: Some(i.me),
            next_input: None,
            vars: i.vars,
            stk,
            sess: i.sess,
            sent_run: 0,
            // The next request takes a stream from the thread's pool.
            st: None,
            parked: true,
            warm: None,
            lane_of: None,
            native: None,
            upgraded: None,
            h1_only: bit(7),
            lingering: false,
            wr_shut: false,
            unread: false,
            linger_left: 0,
        })
    }

    fn run_inner(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        if why.intersects(Reasons::IO) && self.lane_of.is_none() {
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
            crate::drain::saw_stop(ctx.now());
        }
        match self.sess.kill.load(std::sync::atomic::Ordering::Relaxed) {
            0 => {}
            // `shutdown session` from the CLI: an exchange with a server
            // is ended as HAProxy's (`KH`: a 502 while the answer is
            // awaited), then the connection closes; anything else closes.
            crate::registry::KILL_CLI => {
                if !self.st.as_ref().is_some_and(|s| s.active()) {
                    return self.close(ctx);
                }
                self.sess
                    .kill
                    .store(0, std::sync::atomic::Ordering::Relaxed);
                // (The exchange's end marks the connection closing.)
                self.with_stream(|st, c| st.server_shutdown(c, ctx, crate::registry::KILL_CLI));
            }
            why => {
                // A server's `on-marked-down` / `on-marked-up`: the
                // exchange with it ends (an exchange over by now is left
                // alone, as HAProxy's stream no longer on that server).
                self.sess
                    .kill
                    .store(0, std::sync::atomic::Ordering::Relaxed);
                self.with_stream(|st, c| st.server_shutdown(c, ctx, why));
            }
        }
        if self.lingering {
            return self.linger_step(ctx);
        }
        if why.intersects(Reasons::TIMER) && ticks::is_expired(self.deadline, ctx.now()) {
            let server_side = self
                .with_stream(|st, c| st.on_timer(c, ctx))
                .unwrap_or(false);
            if !server_side && ticks::is_expired(self.next_deadline(), ctx.now()) {
                if !self.request_waiting() {
                    return self.on_timeout(ctx);
                }
                // Read it now, whether or not this run saw its edge.
                self.rd_ready = true;
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

#[cfg(test)]
mod size {
    /// A connection's state is allocated and freed once per connection:
    /// glibc serves blocks of up to 1,032 bytes from its per-thread cache
    /// (tcache) without locking or searching its bins, so the state must
    /// stay below that (the variables are boxed apart for this reason).
    #[test]
    fn connection_state_fits_the_allocators_thread_cache() {
        let n = std::mem::size_of::<super::Conn<crate::stream::Stream>>();
        println!("Conn<Stream> is {n} bytes");
        assert!(n <= 1024, "Conn<Stream> is {n} bytes");
    }

    /// What an idle connection's state is made of (issue 12: measured,
    /// not guessed).
    #[test]
    fn idle_connection_pieces() {
        use std::mem::size_of;
        for (what, n) in [
            (
                "Conn<Stream>",
                size_of::<super::Conn<crate::stream::Stream>>(),
            ),
            ("Idle", size_of::<super::Idle>()),
            (
                "H1Task<Stream>",
                size_of::<super::H1Task<crate::stream::Stream>>(),
            ),
            ("Transport", size_of::<crate::transport::Transport>()),
            ("SocketAddr", size_of::<std::net::SocketAddr>()),
            (
                "Option<SocketAddr>",
                size_of::<Option<std::net::SocketAddr>>(),
            ),
            ("RequestHead", size_of::<crate::http1::RequestHead>()),
            ("Option<Body>", size_of::<Option<super::Body>>()),
            ("In", size_of::<super::In>()),
            ("Option<In>", size_of::<Option<super::In>>()),
            ("ConnVars", size_of::<crate::sample::vars::ConnVars>()),
            ("Stk", size_of::<crate::table::Stk>()),
            ("SessInfo", size_of::<crate::registry::SessInfo>()),
            ("Option<TaskletId>", size_of::<Option<sched::TaskletId>>()),
            ("SystemTime", size_of::<std::time::SystemTime>()),
            ("Stream", size_of::<crate::stream::Stream>()),
            ("VarStore", size_of::<crate::sample::VarStore>()),
        ] {
            println!("{what}: {n} bytes");
        }
    }
}
