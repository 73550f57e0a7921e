//! HTTP/2 toward servers (`server ... proto h2`): one connection to a
//! server carries the exchanges of several streams, as HAProxy's H2 mux
//! does on its backend side.
//!
//! A connection is one tasklet (`h2_srv`) owning the socket and an
//! [`h2::Connection`](crate::h2::Connection) in the client role. A stream
//! of ebb that picked such a server does not get a socket: its server side
//! ([`crate::mux::h1::server::ServerSide`]) gets a [`Pipe`] to one of these
//! connections instead. The stream writes its request into the pipe as it
//! writes it for any server (an HTTP/1.1 head, then the body by length or
//! chunks) and reads the answer back as HTTP/1.1 bytes; this side turns
//! the request into HEADERS and DATA by RFC 9113 §8.3.1 (through
//! [`ClientSink`]: `:authority` from `Host`, the connection-specific
//! fields left out, `te: trailers` kept when the client sent it) and the
//! response events of the core ([`response_msgs`]) into a head, a body
//! (by `content-length`, else chunked) and the trailers as the last
//! chunk's.
//!
//! ```text
//!   stream (h1_conn / lane)     ServerSide        h2_srv (this)         server
//!   request head + body  ──>  obuf ──> Pipe.req ──> HEADERS, DATA  ──>  socket
//!   response via proxy_io <── ibuf <── Pipe.resp <── HEADERS, DATA, trailers
//! ```
//!
//! Flow control: the server's answer is granted back (WINDOW_UPDATE) as
//! the stream reads it from the pipe, so a slow client slows only its own
//! stream; request bytes wait in the pipe (bounded by [`REQ_MAX`]) for the
//! server's window.
//!
//! Sharing follows `http-reuse` as HAProxy applies it to multiplexed
//! connections (see [`Reuse`]): connections are per thread and per
//! server, and one with a free stream (under the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS, 100 until it says) takes new streams.
//! Until the server's SETTINGS come only the first stream goes out; the
//! others it took wait for them, then for a free stream if the server
//! takes fewer: none is refused for going over the limit, while new
//! streams go to other connections. A connection with no stream left is
//! one of its server's idle connections (safe, as HAProxy lists it),
//! closed when the server's purge timer gives its thread one to close
//! (see [`crate::backend::pool`]), at once with `http-reuse never` or when
//! the pool is full.
//!
//! Failures: a connect that fails is the stream's connect failure (the
//! proxy retries it); a stream the server refused (RST_STREAM
//! REFUSED_STREAM, or above the last-stream-id of its GOAWAY) or a
//! connection that closed ends the stream's answer: the proxy sends a safe
//! request again, on a new connection, when the one it tried was reused,
//! and answers 502 otherwise (502 or a cut body once the answer started).
//! A stream reset otherwise, or cut by ebb's GOAWAY for the server's
//! protocol error, or at or below the last-stream-id of the server's
//! GOAWAY, may have been processed: its pipe says `no_replay`, and it is
//! a 502 whatever the connection.
//!
//! The answer, as HTTP/1.1, is what HAProxy 2.6's HTTP/1 side makes of
//! it: no reason phrase, a final head ending the stream without a length
//! chunked for an HTTP/1 client, no body for HEAD, 204 and 304.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;

use sched::{ticks, Ctx, Reasons, Status, TaskletFn, TaskletId, Tick, ETERNITY};

use crate::h2::msg::{response_msgs, ClientSink, H1Answer};
use crate::h2::{Config, Connection, ErrorCode, Event, SendError};
use crate::http1::{parse_request, ChunkedDecoder, Limits, Status as PStatus};
use crate::proxy::H2Counters;
use crate::stream::msg::{BodySize, Msg, MsgSink, ReqHead};
use crate::transport::Transport;

/// Request bytes a pipe holds before the stream waits for the server's
/// window.
pub(crate) const REQ_MAX: usize = 64 * 1024;
/// Period of the core's timer while streams are open (stalled windows).
const TICK_MS: u32 = srvconn::IDLE_TICK_MS;
/// Streams per connection until the server's SETTINGS say (HAProxy's
/// `tune.h2.max-concurrent-streams` default).
const DEFAULT_STREAMS: usize = 100;

/// What a stream's server side and the HTTP/2 connection share.
#[derive(Default)]
pub(crate) struct Pipe {
    /// HTTP/1.1 request bytes from the stream, not yet sent.
    pub(crate) req: Vec<u8>,
    /// HTTP/1.1 answer bytes for the stream, from `resp_pos` on.
    pub(crate) resp: Vec<u8>,
    pub(crate) resp_pos: usize,
    /// Answer bytes the stream took since the connection last looked.
    pub(crate) read_count: usize,
    /// The connection is established (the stream's connect is done).
    pub(crate) connected: bool,
    /// The connection could not be established.
    pub(crate) failed: bool,
    /// ... for a server certificate that does not name the SNI sent: the
    /// connect is not retried (HAProxy 2.6's rule).
    pub(crate) sni_mismatch: bool,
    /// No more answer bytes will come: the answer ended, or the stream
    /// was reset or refused, or the connection closed.
    pub(crate) end: bool,
    /// The stream waits for room in `req`.
    pub(crate) want_room: bool,
    /// The stream let go of its exchange (done, failed or aborted).
    pub(crate) closed: bool,
    /// The exchange ended for a fault of the server's (ebb closed the
    /// connection for its protocol error, or reset the stream, or the
    /// server reset it with a code other than REFUSED_STREAM): the
    /// request may have been processed, so it is not sent again even on
    /// a reused connection (502 `SH`, as HAProxy 2.6).
    pub(crate) no_replay: bool,
    /// `alpn`: the server chose HTTP/1.1 (or nothing): the connection,
    /// handshake done, for the stream's server side to use as HTTP/1.1.
    pub(crate) h1: Option<Transport>,
    /// Its count among the server's connections in use, which goes with it.
    pub(crate) h1_used: Option<crate::backend::pool::UsedConn>,
    /// The client half-closed its tunnel: the stream's END_STREAM goes
    /// once `req` is sent.
    pub(crate) req_end: bool,
    /// The `content-length` the server gave an answer that goes to an
    /// HTTP/2 client chunked all the same (trailers may follow its
    /// DATA, and HTTP/1.1 carries them only after chunks): the stream
    /// passes the length on beside the chunks.
    pub(crate) length: Option<u64>,
    /// The connection's local end (`%bi`, `%bp`, `bc_src`), once it is
    /// established, when something reads it.
    pub(crate) local: Option<crate::sample::BackLocal>,
    /// What the `ssl_s_*` and `ssl_bc*` fetches read of the connection's
    /// TLS, once its handshake ended (when something reads them).
    pub(crate) tls: Option<std::sync::Arc<crate::clientcert::ServerTls>>,
    /// The server's TLS refused a `proto h2` connection once the client's
    /// side of the handshake was over (TLS 1.3: its alert, refusing the
    /// client certificate, follows our Finished), before any HTTP/2 byte
    /// from it. HAProxy 2.6's HTTP/2 mux, there from the connect, reads
    /// that alert before its stream takes the connection as established:
    /// a failed connect (retried, then 503 `SC`), not a broken answer.
    pub(crate) refused_late: bool,
    /// The connection ended on an error (a reset, a TLS alert, a failed
    /// write), not a close: see `ServerSide::errored`.
    pub(crate) conn_error: bool,
    /// The pipe is a FastCGI request's ([`crate::mux::fcgi`]), whose
    /// answer ebb writes as HTTP/1.1 (no HTTP/2 framing to account for).
    pub(crate) fcgi: bool,
    /// A FastCGI exchange refused before its answer's head: the status
    /// the stream answers itself (500: the request could not be made into
    /// parameters; 400: a chunked body too large to count; 502: an
    /// answer that is not CGI, or a broken record).
    pub(crate) fault: Option<u16>,
}

/// How a stream may share connections: `http-reuse`, as HAProxy 2.6
/// applies it to a multiplexed server connection (`connect_server()`):
/// every mode but `never` first takes a connection its own session (the
/// client connection) opened; then `always` takes any connection with a
/// free stream, even one still connecting; `aggressive` one that already
/// completed an exchange; `safe` the same, but not for a session's first
/// request. Otherwise a new connection.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// A connection of its own, closed after the exchange.
    Never,
    Safe {
        /// The session's first request.
        first: bool,
    },
    Aggressive,
    Always,
}

impl Reuse {
    /// Whether a stream may take a connection (with room) that its own
    /// session opened (`mine`), or that completed an exchange
    /// (`proven`).
    pub(crate) fn allows(self, mine: bool, proven: bool) -> bool {
        match self {
            Reuse::Never => false,
            Reuse::Safe { first } => mine || (!first && proven),
            Reuse::Aggressive => mine || proven,
            Reuse::Always => true,
        }
    }
}

/// A stream's hold on a connection.
pub(crate) struct Attached {
    pub(crate) pipe: Rc<RefCell<Pipe>>,
    /// The connection's tasklet: woken when the stream wrote or let go.
    pub(crate) mux: TaskletId,
    /// The connection existed before this stream.
    pub(crate) reused: bool,
}

/// What a stream tells its HTTP/2 server side beyond its HTTP/1.1 head.
#[derive(Copy, Clone, Default)]
pub(crate) struct Hints {
    /// The client accepts trailers (`te: trailers` to the server).
    pub(crate) te: bool,
    /// The scheme the client's request carried (an HTTP/2 client's
    /// `:scheme`, the head itself being in origin form); without it,
    /// `:scheme` is `https`, as HAProxy sends an origin-form request.
    pub(crate) scheme: Option<&'static [u8]>,
    /// The client speaks HTTP/1 (not a stream of an HTTP/2 client).
    pub(crate) h1_client: bool,
}

/// What a new connection needs.
pub(crate) struct Target {
    /// Per-server key (the server's uid).
    pub(crate) key: u64,
    /// `alpn` without `proto h2`: HTTP/2 only if the server picks `h2`
    /// in the handshake, else the connection goes to the first stream as
    /// HTTP/1.1.
    pub(crate) negotiate: bool,
    /// A new connection in any case: the request goes again after its
    /// attempt on a reused one failed (a REFUSED_STREAM, a GOAWAY that
    /// left it out, the connection closed), so not on that one.
    pub(crate) fresh: bool,
    pub(crate) limits: Limits,
    /// The backend's HTTP/2 counters.
    pub(crate) counters: Arc<H2Counters>,
    /// The server (its connection counts: in use, idle).
    pub(crate) srv: Arc<crate::backend::ServerRt>,
}

use crate::mux::srvconn::{self, ConnCount as Count};

/// How the request of a stream goes out.
enum Req {
    Head,
    Len(u64),
    Chunked(Box<ChunkedDecoder>),
    /// An upgrade sent as an extended CONNECT (RFC 8441), or a CONNECT:
    /// the stream's bytes go as DATA as they come, until the exchange
    /// ends or the client half-closes.
    Tunnel,
    Done,
}

/// An HTTP/1.1 upgrade request sent as an extended CONNECT: what its
/// 2xx answer becomes for the stream (HAProxy's translation): a 101 with
/// `connection: upgrade`, `upgrade:` the protocol, and for a websocket a
/// `sec-websocket-accept` computed from the client's key if the server
/// sent none.
struct Upgrade {
    protocol: Vec<u8>,
    accept: Option<Vec<u8>>,
}

struct SrvStream {
    pipe: Rc<RefCell<Pipe>>,
    /// The stream's server-side tasklet.
    side: TaskletId,
    /// The H2 stream, once its head went out.
    id: Option<u32>,
    /// The client accepts trailers (`te: trailers` to the server).
    te: bool,
    /// The request's own scheme, when the HTTP/1.1 head has none.
    scheme: Option<&'static [u8]>,
    req: Req,
    /// Decoded request chunk data waiting for window.
    stage: Vec<u8>,
    /// The answer as HTTP/1.1 (chunked or not).
    answer: H1Answer,
    /// The request is an upgrade, sent as an extended CONNECT.
    upgrade: Option<Box<Upgrade>>,
    /// The request is a CONNECT (RFC 9113 §8.5): a 2xx answer opens the
    /// tunnel.
    connect: bool,
    /// Answer bytes given to the stream, not yet granted back.
    unreleased: usize,
    /// The request is a HEAD.
    head_req: bool,
    /// The client speaks HTTP/1.
    h1_client: bool,
    /// The answer has no body (HEAD, 204, 304): DATA the server sends
    /// anyway are dropped, as HAProxy 2.6 drops them.
    bodyless: bool,
}

/// One HTTP/2 connection to a server.
pub(crate) struct SrvConn {
    tr: Transport,
    fd: RawFd,
    /// Its local end, once HTTP/2 is spoken (see [`Pipe::local`]).
    local: Option<crate::sample::BackLocal>,
    /// Its TLS, once HTTP/2 is spoken (see [`Pipe::tls`]).
    tls: Option<std::sync::Arc<crate::clientcert::ServerTls>>,
    h2: Connection,
    rbuf: Vec<u8>,
    rlen: usize,
    /// The TCP connect completed.
    connected: bool,
    /// HTTP/2 is spoken (after the connect, and the ALPN choice if any).
    ready: bool,
    /// Some HTTP/2 byte came from the server.
    heard: bool,
    /// See [`Pipe::refused_late`].
    refused_late: bool,
    /// See [`Pipe::conn_error`].
    conn_error: bool,
    /// Waiting for the TLS handshake's ALPN choice.
    negotiating: bool,
    /// HTTP/2 by the ALPN choice (`alpn h2`), not by `proto h2`.
    negotiated: bool,
    /// `http-reuse never`.
    never: bool,
    dead: bool,
    io: super::super::Ready,
    streams: Vec<SrvStream>,
    key: u64,
    /// Takes new streams (not with `http-reuse never`, nor after a
    /// GOAWAY, a soft stop or a stalled connect); closes when it has none.
    shared: bool,
    /// Completed an exchange.
    proven: bool,
    /// Streams it was given in all (HAProxy's `stream_cnt`).
    streams_seen: u32,
    /// The session (client connection tasklet) that opened it.
    owner: Option<TaskletId>,
    /// DATA nobody reads, to grant back after the event.
    release: Vec<(u32, usize)>,
    limits: Limits,
    counters: Arc<H2Counters>,
    srv: Arc<crate::backend::ServerRt>,
    count: Count,
    me: Option<TaskletId>,
    deadline: Tick,
}

thread_local! {
    /// This thread's connections that may take more streams.
    static POOL: srvconn::Pool<SrvConn> = const { RefCell::new(Vec::new()) };
}

fn bump(c: &std::sync::atomic::AtomicU64, up: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    if up {
        c.fetch_add(1, Relaxed);
    } else {
        c.fetch_sub(1, Relaxed);
    }
}

impl SrvConn {
    /// The server's `max-reuse N` is reached: the connection carried
    /// N + 1 streams (its first and N reuses, as HAProxy 2.6's H2 mux
    /// counts them in `h2_avail_streams`) and takes no other.
    fn spent(&self) -> bool {
        self.srv
            .opts
            .max_reuse
            .is_some_and(|n| self.streams_seen > n)
    }

    fn limit(&self) -> usize {
        match self.h2.peer_max_streams() {
            u32::MAX => DEFAULT_STREAMS,
            n => n as usize,
        }
    }

    fn takes(&self, key: u64, reuse: Reuse, owner: Option<TaskletId>) -> bool {
        let mine = owner.is_some() && self.owner == owner;
        !self.dead
            && self.shared
            // A stream that gave up waiting for it (`timeout connect`)
            // makes a connection still connecting take no other, though
            // it has not run since: a retry connects again.
            && (self.ready || !self.streams.iter().any(|s| s.pipe.borrow().closed))
            && self.key == key
            && !self.h2.going_away()
            && self.streams.len() < self.limit()
            && reuse.allows(mine, self.proven)
    }
}

/// Gives a stream a connection to the server `t` names: one of this
/// thread's with a free stream when `reuse` allows, else a new one that
/// `open` connects (non-blocking). `owner` is the stream's session (its
/// client connection's tasklet); `side` is the stream's server-side
/// tasklet, woken when the pipe has news; `te` says whether the client
/// accepts trailers.
pub(crate) fn attach(
    ctx: &mut Ctx,
    t: &Target,
    reuse: Reuse,
    owner: Option<TaskletId>,
    side: TaskletId,
    hints: Hints,
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
        connected: c.ready,
        local: c.local,
        tls: c.tls.clone(),
        ..Pipe::default()
    }));
    c.streams.push(SrvStream {
        pipe: Rc::clone(&pipe),
        side,
        id: None,
        te: hints.te,
        scheme: hints.scheme,
        req: Req::Head,
        upgrade: None,
        connect: false,
        stage: Vec::new(),
        // No reason phrase: HTTP/2 has none, and HAProxy 2.6 gives an
        // HTTP/1.1 client `HTTP/1.1 200 ` (the code, a space, nothing).
        answer: H1Answer {
            chunked: false,
            no_reason: true,
        },
        unreleased: 0,
        head_req: false,
        h1_client: hints.h1_client,
        bodyless: false,
    });
    c.streams_seen = c.streams_seen.saturating_add(1);
    if c.spent() {
        // Closed once its streams are over (HAProxy's idle list refuses
        // a connection with no stream left to give).
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
) -> io::Result<Rc<RefCell<SrvConn>>> {
    let tr = open()?;
    let fd = tr.raw_fd();
    // HAProxy's HPACK list of 2 x `tune.http.maxhdr` entries (the end
    // mark one of them); `max_headers` is `tune.http.maxhdr` - 1.
    let cfg = Config {
        max_fields: u32::try_from(2 * t.limits.max_headers + 1).unwrap_or(u32::MAX),
        ..Config::default()
    };
    let conn = Rc::new(RefCell::new(SrvConn {
        tr,
        fd,
        h2: Connection::client(cfg),
        rbuf: vec![0u8; cfg.max_frame_size as usize + 9 + 1024],
        rlen: 0,
        connected: false,
        ready: false,
        heard: false,
        refused_late: false,
        conn_error: false,
        local: None,
        tls: None,
        negotiating: t.negotiate,
        negotiated: t.negotiate,
        never: reuse == Reuse::Never,
        dead: false,
        io: super::super::Ready::default(),
        streams: Vec::new(),
        key: t.key,
        shared: reuse != Reuse::Never && !t.negotiate,
        proven: false,
        streams_seen: 0,
        owner,
        release: Vec::new(),
        limits: t.limits,
        counters: Arc::clone(&t.counters),
        srv: Arc::clone(&t.srv),
        count: Count::Used(t.srv.used_conn()),
        me: None,
        deadline: ETERNITY,
    }));
    let task = SrvTask {
        conn: Rc::clone(&conn),
    };
    let id = srvconn::start_tasklet(ctx, "h2_srv", task, fd)?;
    conn.borrow_mut().me = Some(id);
    {
        let c = &conn.borrow().counters;
        bump(&c.open_conns, true);
        bump(&c.total_conns, true);
    }
    if reuse != Reuse::Never {
        POOL.with(|p| p.borrow_mut().push(Rc::clone(&conn)));
    }
    Ok(conn)
}

/// Wakes a stream's server side with the I/O reason (it then looks at
/// its pipe).
fn wake(ctx: &mut Ctx, side: TaskletId) {
    ctx.tasklet_wakeup_why(side, Reasons::IO);
}

impl SrvConn {
    fn now(ctx: &Ctx) -> u32 {
        ctx.now() | 1
    }

    fn has_output(&self) -> bool {
        !self.h2.output().is_empty() || self.tr.has_pending_output()
    }

    /// Whether the connect completed (or failed: `dead`). (With `tfo`,
    /// the first write, the preface, may complete it.)
    fn check_connect(&mut self, ctx: &mut Ctx) -> bool {
        match srvconn::connect_outcome(&self.tr, self.srv.opts.tfo, &mut self.io) {
            Some(true) => {
                self.connected = true;
                if !self.negotiating && !self.tr.is_handshaking() {
                    self.set_ready(ctx);
                }
                true
            }
            None => false,
            Some(false) => {
                for s in &self.streams {
                    s.pipe.borrow_mut().failed = true;
                }
                self.dead = true;
                false
            }
        }
    }

    /// HTTP/2 is spoken: the streams waiting for the connection go on.
    fn set_ready(&mut self, ctx: &mut Ctx) {
        self.ready = true;
        self.local = crate::sample::back_local(self.tr.tcp());
        self.tls = self.tr.server_tls();
        for s in &self.streams {
            let mut p = s.pipe.borrow_mut();
            p.connected = true;
            p.local = self.local;
            p.tls = self.tls.clone();
            drop(p);
            wake(ctx, s.side);
        }
    }

    /// `alpn`: drives the TLS handshake until the server's choice. `h2`:
    /// None, the connection goes on as HTTP/2 (and may be shared).
    /// Otherwise the connection is handed, as it is, to its first stream
    /// (HTTP/1.1; the others connect again) and this tasklet ends.
    fn negotiate(&mut self, ctx: &mut Ctx) -> Option<Status> {
        loop {
            if self.tr.has_pending_output() {
                match self.tr.flush_pending() {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return Some(self.close(ctx)),
                }
            }
            if !self.tr.is_handshaking() {
                break;
            }
            if !self.io.rd {
                return Some(Status::Continue);
            }
            let r =
                super::super::read_once(&mut self.tr, &mut self.rbuf, &mut self.rlen, &mut self.io);
            if r.is_err() || self.io.eof {
                return Some(self.close(ctx));
            }
        }
        self.negotiating = false;
        if self.tr.alpn() == Some(b"h2") {
            self.shared = !self.never && !self.spent();
            self.set_ready(ctx);
            return None;
        }
        // HTTP/1.1: the connection leaves this tasklet.
        let _ = ctx.deregister_fd(self.fd);
        self.dead = true;
        bump(&self.counters.open_conns, false);
        POOL.with(|p| srvconn::pool_prune(p, |c| c.dead));
        let first = self.streams.iter().position(|s| !s.pipe.borrow().closed);
        let dup = self.tr.tcp().try_clone();
        let mut taker = None;
        if let (Some(i), Ok(d), 0) = (first, dup, self.rlen) {
            let tr = std::mem::replace(&mut self.tr, Transport::plain(d));
            let mut p = self.streams[i].pipe.borrow_mut();
            p.h1 = Some(tr);
            if let Count::Used(u) = std::mem::replace(&mut self.count, Count::Off) {
                p.h1_used = Some(u);
            }
            drop(p);
            taker = Some(i);
        } else {
            let _ = self.tr.shutdown();
        }
        for (i, s) in self.streams.drain(..).enumerate() {
            if Some(i) != taker {
                s.pipe.borrow_mut().failed = true;
            }
            wake(ctx, s.side);
        }
        Some(Status::Done)
    }

    fn read_in(&mut self) -> io::Result<bool> {
        let r = super::super::read_once(&mut self.tr, &mut self.rbuf, &mut self.rlen, &mut self.io);
        match &r {
            Ok(m) => self.heard |= *m || self.rlen > 0,
            Err(_) => {
                self.conn_error = true;
                self.ended_unheard();
            }
        }
        if self.io.eof {
            self.ended_unheard();
        }
        r
    }

    /// The connection failed (the server's alert, a reset, a close, or a
    /// write that found it gone): before any HTTP/2 byte from a TLS
    /// server, the server refused it once the client's side of the
    /// handshake was over (see [`Pipe::refused_late`]). Not after an ALPN
    /// choice: HAProxy 2.6 then installs its HTTP/2 mux at the
    /// handshake's end, its stream takes the connection as established
    /// first, and the refusal is a 502 `SH` (6 runs in 6 beside it).
    fn ended_unheard(&mut self) {
        self.refused_late |=
            self.ready && !self.negotiated && !self.heard && self.rlen == 0 && self.tr.is_tls();
    }

    fn flush(&mut self) -> io::Result<bool> {
        super::super::write_h2(&mut self.tr, &mut self.h2, &mut self.io)
    }

    /// Feeds the core what was read; answers go into the streams' pipes.
    fn process(&mut self, ctx: &mut Ctx) -> bool {
        let now = Self::now(ctx);
        let mut off = 0;
        let mut goaway: Option<u32> = None;
        let mut closed = false;
        loop {
            let p = self.h2.recv(&self.rbuf[off..self.rlen], now);
            off += p.consumed;
            let Some(ev) = p.event else {
                if p.consumed == 0 {
                    break;
                }
                continue;
            };
            let streams = &mut self.streams;
            let mut proven = false;
            let release = &mut self.release;
            // A reset that says nothing of whether the server processed
            // the request: all but the server's REFUSED_STREAM (RFC 9113
            // §8.7: not processed).
            let unsure = match ev {
                Event::Reset { id, code, remote } => {
                    (!remote || code != ErrorCode::REFUSED_STREAM).then_some(id)
                }
                _ => None,
            };
            let stream_ev = response_msgs(&ev, |id, m| {
                let s = streams.iter_mut().find(|s| s.id == Some(id));
                let Some(s) = s.filter(|s| !s.pipe.borrow().end) else {
                    // Nobody reads it: the window is granted back at once.
                    if let Msg::Data(d) = m {
                        release.push((id, d.len()));
                    }
                    return;
                };
                let mut pg = s.pipe.borrow_mut();
                let p = &mut *pg;
                let out = &mut p.resp;
                match m {
                    Msg::Head(h) if s.connect && (200..300).contains(&h.status) => {
                        // A CONNECT's tunnel is open: its 2xx, no length
                        // (HAProxy 2.6's `HTTP/1.1 200 `), then the DATA
                        // as they come.
                        out.extend_from_slice(b"HTTP/1.1 ");
                        out.extend_from_slice(h.status.to_string().as_bytes());
                        out.extend_from_slice(b" \r\n");
                        for (n, v) in h.fields.iter() {
                            if !n.eq_ignore_ascii_case(b"content-length") {
                                H1Answer::field(out, n, v);
                            }
                        }
                        out.extend_from_slice(b"\r\n");
                        s.answer.chunked = false;
                    }
                    Msg::Head(h) if s.upgrade.is_some() && (200..300).contains(&h.status) => {
                        // The tunnel is open: the stream gets HTTP/1.1's
                        // 101, then the DATA as they come.
                        let u = s.upgrade.as_deref();
                        // (No reason phrase, as any answer here.)
                        out.extend_from_slice(b"HTTP/1.1 101 \r\n");
                        let mut accept = false;
                        for (n, v) in h.fields.iter() {
                            if n.eq_ignore_ascii_case(b"content-length") {
                                continue;
                            }
                            accept |= n.eq_ignore_ascii_case(b"sec-websocket-accept");
                            H1Answer::field(out, n, v);
                        }
                        out.extend_from_slice(b"connection: upgrade\r\nupgrade: ");
                        out.extend_from_slice(u.map_or(&b""[..], |u| &u.protocol));
                        out.extend_from_slice(b"\r\n");
                        if let Some(a) = u.and_then(|u| u.accept.as_ref()).filter(|_| !accept) {
                            out.extend_from_slice(b"sec-websocket-accept: ");
                            out.extend_from_slice(a);
                            out.extend_from_slice(b"\r\n");
                        }
                        out.extend_from_slice(b"\r\n");
                        s.answer.chunked = false;
                    }
                    Msg::Head(mut h) => {
                        let no_body = matches!(h.status, 204 | 304);
                        if no_body {
                            // No framing field, whatever DATA follow.
                            h.body = BodySize::Empty;
                        } else if matches!(h.body, BodySize::Empty)
                            && s.h1_client
                            && h.status >= 200
                            && !s.head_req
                            && h.fields.get(b"content-length").is_none()
                        {
                            // A final head that ends the stream, with no
                            // `content-length`: HAProxy 2.6's HTTP/1.1
                            // side has no length for it and sends it
                            // chunked (the last chunk at once), not
                            // `content-length: 0`. (To an HTTP/2 client it
                            // stays one HEADERS frame: gRPC's
                            // trailers-only answer.)
                            h.body = BodySize::Unknown;
                        } else if let (false, true, BodySize::Exact(n)) =
                            (s.h1_client, h.status >= 200, h.body)
                        {
                            // To an HTTP/2 client, trailers after a body
                            // of known length go on as HAProxy 2.6 sends
                            // them (the length, the DATA, then trailers):
                            // the pipe carries the body chunked, the
                            // length beside it. (An HTTP/1.1 client gets
                            // the length and no trailers, as from
                            // HAProxy.)
                            h.body = BodySize::Unknown;
                            p.length = Some(n);
                        }
                        s.answer.head(out, &h);
                        if h.status >= 200 && (no_body || s.head_req) {
                            s.answer.chunked = false;
                            s.bodyless = true;
                        }
                    }
                    Msg::Data(d) if s.bodyless => release.push((id, d.len())),
                    Msg::Trailers(_) if s.bodyless => {}
                    Msg::Data(d) => {
                        s.answer.data(out, d);
                        s.unreleased += d.len();
                    }
                    Msg::Trailers(t) => s.answer.trailers(out, &t),
                    Msg::End => {
                        s.answer.end(out);
                        p.end = true;
                        proven = true;
                    }
                    Msg::Abort(_) => {
                        p.end = true;
                        p.no_replay |= unsure == Some(id);
                    }
                }
                drop(pg);
                wake(ctx, s.side);
            });
            self.proven |= proven;
            // Connection-level events (the stream ones were handled).
            let conn_ev = match ev {
                _ if stream_ev => None,
                Event::GoAway { last_stream, .. } => Some(Some(last_stream)),
                Event::Closed { .. } => Some(None),
                _ => None,
            };
            for (id, n) in self.release.drain(..) {
                self.h2.release(id, n);
            }
            match conn_ev {
                Some(Some(last)) => {
                    // Streams above `last` were not processed; those not
                    // opened yet never will be here.
                    goaway = Some(goaway.map_or(last, |l| l.min(last)));
                    self.shared = false;
                }
                Some(None) => {
                    // ebb's GOAWAY for the server's protocol error: the
                    // streams it cuts are not sent again.
                    for s in &self.streams {
                        s.pipe.borrow_mut().no_replay = true;
                    }
                    closed = true;
                    off = self.rlen;
                    break;
                }
                None => {}
            }
        }
        let moved = off > 0;
        self.rbuf.copy_within(off..self.rlen, 0);
        self.rlen -= off;
        if let Some(last) = goaway {
            for s in &mut self.streams {
                if s.id.is_none_or(|id| id > last) {
                    s.pipe.borrow_mut().end = true;
                    wake(ctx, s.side);
                } else {
                    // At or below `last`: the server may have processed
                    // it; if the connection closes before its answer, it
                    // is not sent again (502 `SH--`, as HAProxy 2.6).
                    s.pipe.borrow_mut().no_replay = true;
                }
            }
        }
        if closed {
            self.dead = true;
        }
        moved
    }

    /// Moves every stream's request into the core and grants consumed
    /// answer bytes back; drops the streams that let go.
    fn serve(&mut self, ctx: &mut Ctx) -> bool {
        let now = Self::now(ctx);
        let mut moved = false;
        let limits = self.limits;
        let mut i = 0;
        while i < self.streams.len() {
            let s = &mut self.streams[i];
            let pipe = Rc::clone(&s.pipe);
            let mut p = pipe.borrow_mut();
            if p.closed {
                if let Some(id) = s.id {
                    // Still open on the server's side: no more interest.
                    self.h2.release(id, s.unreleased);
                    let _ = self.h2.reset(id, ErrorCode::CANCEL, now);
                }
                drop(p);
                let opened = self.streams.swap_remove(i).id.is_some();
                if opened {
                    bump(&self.counters.open_streams, false);
                }
                moved = true;
                continue;
            }
            i += 1;
            if p.end {
                // Answer over (or refused): request bytes have no use.
                p.req.clear();
                s.req = Req::Done;
                continue;
            }
            // Flow-control credit for the answer bytes the stream took.
            if let Some(id) = s.id {
                let read = std::mem::take(&mut p.read_count);
                let n = if p.resp_pos >= p.resp.len() {
                    s.unreleased
                } else {
                    read.min(s.unreleased)
                };
                if n > 0 {
                    s.unreleased -= n;
                    self.h2.release(id, n);
                }
            }
            let before = p.req.len();
            if matches!(s.req, Req::Head) {
                let head = match parse_request(&p.req, &limits) {
                    Ok(PStatus::Complete(h)) => h,
                    Ok(PStatus::Partial) => continue,
                    Err(_) => {
                        // ebb wrote it: cannot happen; end the exchange.
                        p.end = true;
                        wake(ctx, s.side);
                        continue;
                    }
                };
                let view = ReqHead::from_h1(&p.req, &head);
                let body = view.body;
                s.head_req = view.method == crate::http1::Method::Head;
                s.connect = view.method == crate::http1::Method::Connect;
                // An upgrade goes as an extended CONNECT (RFC 8441), to a
                // server that announced it; else the exchange fails (502),
                // as HAProxy refuses it.
                let protocol = view.upgrade.map(|u| {
                    let first = u.split(|&b| b == b',').next().unwrap_or(u);
                    first.trim_ascii().to_vec()
                });
                match self.h2.peer_ext_connect() {
                    // Its SETTINGS have not come yet: an upgrade waits to
                    // know whether it may go, and so does every stream but
                    // the first, to know how many the server takes. Sent
                    // before, a stream above a limit under 100 is refused
                    // (REFUSED_STREAM): HAProxy 2.6 answers those 502;
                    // ebb sent them again on a new connection, which the
                    // other waiting streams took and overran as well.
                    None if protocol.is_some() || self.h2.open_streams() > 0 => continue,
                    Some(false) if protocol.is_some() => {
                        // The stream it would have been is reset, as
                        // HAProxy does; the connection itself is sound
                        // and stays (closing it here left the server's
                        // next frames unread: the kernel's reset).
                        self.h2.reset_unopened(ErrorCode::INTERNAL_ERROR);
                        moved = true;
                        p.end = true;
                        s.req = Req::Done;
                        wake(ctx, s.side);
                        continue;
                    }
                    _ => {}
                }
                let scheme = s.scheme.unwrap_or(b"https");
                let mut sink = ClientSink::new(&mut self.h2, scheme, now);
                sink.te_trailers = s.te;
                sink.protocol = protocol.as_deref();
                sink.put(Msg::Head(view));
                match (sink.id, sink.refused) {
                    (Some(id), _) => {
                        s.id = Some(id);
                        bump(&self.counters.open_streams, true);
                        bump(&self.counters.total_streams, true);
                        if let Some(protocol) = protocol {
                            let websocket = protocol.eq_ignore_ascii_case(b"websocket");
                            let accept = view
                                .fields
                                .get(b"sec-websocket-key")
                                .filter(|_| websocket)
                                .map(crate::sample::websocket_accept);
                            s.upgrade = Some(Box::new(Upgrade { protocol, accept }));
                        }
                        s.req = match body {
                            _ if s.upgrade.is_some() || s.connect => Req::Tunnel,
                            BodySize::Empty => {
                                let _ = self.h2.send_data(id, &[], true, now);
                                Req::Done
                            }
                            BodySize::Exact(n) => Req::Len(n),
                            BodySize::Unknown => Req::Chunked(Box::default()),
                        };
                        let n = head.head_len;
                        p.req.drain(..n);
                        moved = true;
                    }
                    (None, Some(SendError::Busy)) => continue,
                    (None, _) => {
                        // GOAWAY: not sent; the proxy may send it again.
                        p.end = true;
                        wake(ctx, s.side);
                        continue;
                    }
                }
            }
            let Some(id) = s.id else { continue };
            loop {
                match &mut s.req {
                    Req::Head | Req::Done => break,
                    Req::Tunnel => {
                        if p.req.is_empty() {
                            if p.req_end {
                                // The client's half-close: END_STREAM.
                                let _ = self.h2.send_data(id, &[], true, now);
                                s.req = Req::Done;
                            }
                            break;
                        }
                        let sent = self.h2.send_data(id, &p.req, false, now).unwrap_or(0);
                        p.req.drain(..sent);
                        if !p.req.is_empty() || !p.req_end {
                            break;
                        }
                    }
                    Req::Len(left) => {
                        let n = (*left).min(p.req.len() as u64) as usize;
                        if n == 0 {
                            break;
                        }
                        let last = n as u64 == *left;
                        let sent = self.h2.send_data(id, &p.req[..n], last, now).unwrap_or(0);
                        p.req.drain(..sent);
                        *left -= sent as u64;
                        if *left == 0 {
                            s.req = Req::Done;
                        }
                        break;
                    }
                    Req::Chunked(dec) => {
                        if !s.stage.is_empty() {
                            let sent = self.h2.send_data(id, &s.stage, false, now).unwrap_or(0);
                            s.stage.drain(..sent);
                            if !s.stage.is_empty() {
                                break;
                            }
                        }
                        if p.req.is_empty() {
                            break;
                        }
                        let Ok(d) = dec.decode(&p.req) else {
                            let _ = self.h2.reset(id, ErrorCode::CANCEL, now);
                            p.end = true;
                            wake(ctx, s.side);
                            break;
                        };
                        s.stage.extend_from_slice(&p.req[d.data.clone()]);
                        p.req.drain(..d.consumed);
                        if d.done {
                            let _ = self.h2.send_data(id, &s.stage, false, now);
                            s.stage.clear();
                            let _ = self.h2.send_data(id, &[], true, now);
                            s.req = Req::Done;
                            break;
                        }
                        if d.consumed == 0 {
                            break;
                        }
                    }
                }
            }
            if p.req.len() < before {
                moved = true;
                if p.want_room && p.req.len() < REQ_MAX {
                    p.want_room = false;
                    wake(ctx, s.side);
                }
            }
        }
        moved
    }

    fn close(&mut self, ctx: &mut Ctx) -> Status {
        self.dead = true;
        self.count = Count::Off;
        let sni_mismatch = self.tr.sni_mismatch();
        for s in self.streams.drain(..) {
            let mut p = s.pipe.borrow_mut();
            if !self.ready {
                p.failed = true;
                p.sni_mismatch = sni_mismatch;
            }
            p.refused_late = self.refused_late;
            p.conn_error = self.conn_error;
            p.end = true;
            drop(p);
            wake(ctx, s.side);
            if s.id.is_some() {
                bump(&self.counters.open_streams, false);
            }
        }
        let _ = ctx.deregister_fd(self.fd);
        let _ = self.tr.shutdown();
        bump(&self.counters.open_conns, false);
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
        if self.connected && self.negotiating {
            if let Some(st) = self.negotiate(ctx) {
                return st;
            }
        } else if self.connected && !self.ready {
            // `proto h2` over TLS: the handshake completes the connect
            // (HAProxy's): its failure fails the streams' connects.
            match self.tr.handshake() {
                Ok(true) => {
                    // Records past it may wait: the next read looks.
                    self.io.rd = true;
                    self.io.wr = true;
                    self.set_ready(ctx);
                }
                Ok(false) => {
                    self.io.rd = false;
                    self.io.wr = false;
                }
                Err(_) => return self.close(ctx),
            }
        }
        if !self.ready {
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
            if self.io.rd && !self.io.eof {
                match self.read_in() {
                    Ok(m) => moved |= m,
                    Err(_) => return self.close(ctx),
                }
            }
            moved |= self.process(ctx);
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
                        self.ended_unheard();
                        return self.close(ctx);
                    }
                }
            }
            if !moved {
                break;
            }
        }
        if self.io.eof || (self.h2.is_done() && !self.has_output()) {
            return self.close(ctx);
        }
        let now = ctx.now();
        if self.streams.is_empty() && !self.shared {
            // No stream will come: `http-reuse never` (the connection was
            // its stream's), a GOAWAY, a soft stop.
            self.h2.shutdown();
            let _ = self.flush();
            return self.close(ctx);
        } else if self.streams.is_empty()
            && self.count.is_used()
            && !self.count.go_idle(&self.srv, ctx.thread_id(), now)
        {
            // Idle now: among the server's idle connections, or closed
            // when `pool-max-conn` are there already.
            self.h2.shutdown();
            let _ = self.flush();
            return self.close(ctx);
        }
        // (Idle, it looks once a second whether its server's purge timer
        // closes it.)
        let d = ticks::add(now, TICK_MS);
        srvconn::set_deadline(ctx, self.me, &mut self.deadline, d);
        Status::Continue
    }

    fn on_timer(&mut self, ctx: &mut Ctx) -> Status {
        if self.streams.is_empty() {
            if !self.count.purged(&self.srv, ctx.thread_id()) {
                // Not among those its server's purge timer closes: looked
                // at again in a second.
                let d = srvconn::next_look(ctx);
                srvconn::set_deadline(ctx, self.me, &mut self.deadline, d);
                return Status::Continue;
            }
            // One the purge timer closes: GOAWAY and close.
            self.h2.shutdown();
            let _ = self.flush();
            return self.close(ctx);
        }
        let mut reset = Vec::new();
        self.h2.tick(Self::now(ctx), &mut reset);
        for s in &self.streams {
            if s.id.is_some_and(|id| reset.contains(&id)) {
                let mut p = s.pipe.borrow_mut();
                p.end = true;
                p.no_replay = true;
                drop(p);
                wake(ctx, s.side);
            }
        }
        self.pump(ctx)
    }
}

/// The connection's tasklet.
struct SrvTask {
    conn: Rc<RefCell<SrvConn>>,
}

impl TaskletFn for SrvTask {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        let conn = Rc::clone(&self.conn);
        let mut c = conn.borrow_mut();
        if why.intersects(Reasons::IO) {
            let ev = ctx.take_events(me);
            if ev.readable() || ev.hup_or_err() {
                c.io.rd = true;
            }
            if ev.hup_or_err() {
                c.io.hup = true;
            }
            if ev.writable() || ev.hup_or_err() {
                c.io.wr = true;
            }
        }
        if (why.intersects(Reasons::SIGNAL) || ctx.stopping()) && !c.dead {
            // Soft stop: no new stream here; those open finish, then it
            // closes.
            c.shared = false;
        }
        if why.intersects(Reasons::TIMER) && ticks::is_expired(c.deadline, ctx.now()) {
            return c.on_timer(ctx);
        }
        c.pump(ctx)
    }
}
