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
//!
//! The parts: [`Conn`] and the types it works with are here; its
//! behaviour is in `accept` (the start), `run` (one run of the tasklet:
//! events, timer, the read-answer-write pass), `socket` (the socket's reads
//! and writes), `request` (heads parsed and handed to the stream),
//! `answer` (answers and log lines written), `timer` (deadlines and
//! timeouts), `close` (the end, lingering or not), `idle` (between
//! exchanges) and `lane` (an HTTP/2 stream's client side, and the
//! hand-off to HTTP/2).

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;

use sched::{Ctx, TaskletId, Tick};

use crate::http1::{Drain, RequestHead};
use crate::proxy::FrontendRt;
use crate::transport::Transport;
use crate::worker::Worker;

mod accept;
mod answer;
mod close;
mod idle;
mod lane;
mod request;
mod run;
mod socket;
mod timer;

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
    /// The poller reported the peer's close (see [`crate::mux::note_events`]).
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
    /// A lingering close's reading ([`Conn::linger`]).
    linger: crate::mux::Linger,
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
