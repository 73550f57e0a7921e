//! Backends with servers: server state, slots (`maxconn`), queues and the
//! hand-over of a freed slot to the first waiting stream.
//!
//! A [`Farm`] is a backend's set of servers. Every thread's streams use it
//! at once, so its state is atomics plus two kinds of short locks, taken
//! only when a stream waits or a waiter is served:
//!
//! - each server's queue (streams bound to that server: hash algorithms),
//! - the backend's queue (streams that any server may take).
//!
//! **Picking takes no shared lock** but `roundrobin`'s. The balancing
//! state (hash tables, the server map, scratch lists of eligible servers)
//! is per thread: a thread locks only its own slot, which no other thread
//! touches (unless more than [`LB_SLOTS`] threads pick). What every thread
//! must agree on is an atomic: the map's position, the slots in use,
//! weights and states. `roundrobin` is HAProxy's fast weighted round
//! robin, whose state (one per backend, [`lb::Shared`]) each pick updates
//! under a short lock, as HAProxy's. A pick allocates nothing once the
//! thread's slot is warm.
//!
//! **Slots.** A stream that gets a server holds one of its `maxconn` slots
//! until its exchange ends ([`Farm::release`]). A stream that finds every
//! eligible server full waits in a queue, FIFO, bounded by `timeout queue`
//! (and a server's queue by its `maxqueue`; the backend's has no bound).
//!
//! **Hand-over.** When a stream releases a slot and somebody waits, the slot
//! is not given back: it goes straight to the first waiter (server queue
//! first, then the backend's queue), which is woken by an *instant* wakeup
//! on whatever thread it lives, through that thread's inbox: no shared run
//! queue, no thundering herd. The queue lock is held only to unlink the
//! waiter.
//!
//! **No lost slot.** A stream enqueues itself under the same lock under which
//! a releasing stream checks the queue before giving its slot back, and
//! re-checks for a free slot before waiting; so a slot is never freed while
//! a waiter sleeps on an empty check. When nobody waits (an atomic count
//! of each queue's streams says so), a release takes neither lock: it
//! checks the count, gives the slot back and checks again, while a stream
//! about to queue counts itself before its last look for a slot; all
//! sequentially consistent, so one of the two sees the other (the
//! argument is at [`Farm::release`]).
//!
//! Lock order: a server's queue, then the backend's queue.

pub mod agent;
pub mod check;
pub mod cookie;
pub mod dynamic;
pub mod error;
pub mod extra;
pub mod h2check;
pub mod lb;
pub mod pool;
pub mod socks4;
pub mod tcpcheck;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use sched::{RuntimeHandle, TaskletId};

use crate::config::{Balance, HttpCheck, HttpReuse, ServerOptions};
pub use dynamic::ServerList;

/// A server as a `server` line or `add server` makes it.
pub fn new_server(
    idx: usize,
    id: u32,
    backend: &str,
    name: String,
    addr: Option<SocketAddr>,
    opts: ServerOptions,
    tls: Option<ServerTls>,
) -> Arc<ServerRt> {
    Arc::new(ServerRt {
        backend_target: false,
        idx,
        id,
        uid: NEXT_SERVER_UID.fetch_add(1, Ordering::Relaxed),
        backend: backend.to_string(),
        weight: AtomicU32::new(opts.weight),
        // HAProxy: a `minconn` above `maxconn` (or alone) raises `maxconn`
        // to it; a `maxconn` alone is its own `minconn` (a fixed limit).
        maxconn: AtomicU32::new(opts.maxconn.unwrap_or(0).max(opts.minconn.unwrap_or(0))),
        minconn: opts.minconn.unwrap_or(0),
        // A server without address that resolvers will look up waits in
        // resolution maintenance, not forced.
        admin: AtomicU8::new(
            if opts.disabled || (addr.is_none() && opts.resolvers.is_none() && opts.abns.is_none())
            {
                ADMIN_MAINT
            } else {
                ADMIN_READY
            },
        ),
        rmaint: AtomicBool::new(addr.is_none() && opts.resolvers.is_some()),
        fqdn: Mutex::new(None),
        hostname: Mutex::new(None),
        moved: AtomicBool::new(false),
        map_ports: AtomicBool::new(opts.map_ports),
        deleted: AtomicBool::new(false),
        check_on: AtomicBool::new(opts.check),
        check_ok: AtomicBool::new(true),
        check_streak: AtomicU32::new(0),
        agent: agent::AgentRt::new(&opts),
        port: AtomicU16::new(addr.map_or(0, |a| a.port())),
        up: AtomicBool::new(true),
        up_since: AtomicInstant::new(
            Instant::now()
                .checked_sub(opts.slowstart.unwrap_or_default())
                .unwrap_or_else(Instant::now),
        ),
        cur: AtomicU32::new(0),
        idle_conns: AtomicU32::new(0),
        queue: Mutex::new(VecDeque::new()),
        waiting: AtomicU32::new(0),
        counters: Counters::default(),
        check_status: Mutex::new(check::Verdict::default()),
        hana: check::Hana::default(),
        ext: extra::SrvExtra::default(),
        tracked: OnceLock::new(),
        trackers: Mutex::new(Vec::new()),
        iadmin: AtomicU8::new(ADMIN_READY),
        tls,
        name,
        addr: AtomicAddr::new(addr),
        opts,
    })
}

/// The backend itself as the target of its connections (HAProxy's
/// `dispatch ADDR:PORT`, or with `None`, `option transparent`: the
/// address the client connected to). Not one of the farm's servers (no
/// stats row, `<NOSRV>` in logs); its connections stay private to their
/// client connection, as HAProxy keeps a connection to no server.
pub fn backend_target(
    backend: &str,
    addr: Option<SocketAddr>,
    sock: crate::config::SrvSock,
) -> Arc<ServerRt> {
    let name = "<NOSRV>".to_string();
    let opts = ServerOptions {
        sock,
        ..ServerOptions::default()
    };
    let mut s = new_server(0, 0, backend, name, addr, opts, None);
    if let Some(m) = Arc::get_mut(&mut s) {
        m.admin = AtomicU8::new(ADMIN_READY);
        m.backend_target = true;
    }
    s
}

/// Starts a non-blocking connect to `addr` (with `TCP_NODELAY`): the
/// socket is returned while the connect is under way; its outcome is the
/// first write edge (writable without an error: connected; otherwise
/// `SO_ERROR`, then a peer address, tell).
pub fn connect_nb(addr: SocketAddr) -> std::io::Result<std::net::TcpStream> {
    connect_nb_from(addr, None, false)
}

/// [`connect_nb`] from the local address `source` (a backend's `source`;
/// port 0: one the system picks). `delack`: `TCP_QUICKACK` off before the
/// connect (`option tcp-smart-connect` with bytes to send): the kernel
/// does not acknowledge the server's SYN-ACK on its own, the first bytes
/// written carry that ACK.
pub fn connect_nb_from(
    addr: SocketAddr,
    source: Option<SocketAddr>,
    delack: bool,
) -> std::io::Result<std::net::TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    // Non-blocking from the start: no `fcntl` pair per connection.
    let s = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )?;
    s.set_tcp_nodelay(true)?;
    if delack {
        s.set_tcp_quickack(false)?;
    }
    if let Some(src) = source {
        // As HAProxy: a fixed source port may be reused at once.
        s.set_reuse_address(true)?;
        s.bind(&src.into())?;
    }
    match s.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(s.into())
}

/// Whether a connecting socket has a peer now (its connect completed),
/// whatever its family (a TCP or a UNIX socket).
pub fn connected(s: &std::net::TcpStream) -> bool {
    socket2::SockRef::from(s).peer_addr().is_ok()
}

/// The outcome of a connect under way at an event of its socket: Some(ok)
/// once known, None while it goes on; the one rule of both proxy modes
/// (`mode tcp` sessions, HTTP server sides).
///
/// `writable` and `hup` are what the poller said since the connect began,
/// of this socket alone (the caller drops what an earlier socket left
/// before connecting, and registers no other socket with the same
/// tasklet meanwhile). A connecting socket turns writable only once
/// established; a failed one is reported with `EPOLLERR`/`EPOLLHUP`. So a
/// writable edge without a hang-up settles it with no system call, as in
/// HAProxy; otherwise the socket is asked: an error pending means refused
/// or reset, no error and no peer yet means still under way. With
/// `socks4`, the proxy's handshake is part of the connect.
pub fn connect_outcome(
    s: &std::net::TcpStream,
    socks: &mut Option<Box<socks4::Socks4>>,
    writable: bool,
    hup: bool,
) -> Option<bool> {
    match connect_outcome_reset(s, socks, writable, hup) {
        Some(Ok(ok)) => Some(ok),
        Some(Err(Reset)) => Some(false),
        None => None,
    }
}

/// The server reset a connection it had accepted (see
/// [`connect_outcome_reset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reset;

/// [`connect_outcome`], telling a connection that was established and
/// then reset before its first event was seen (`Err(Reset)`: the
/// kernel's `ECONNRESET`, or `EPIPE` after the server's FIN) from a
/// failed connect (a refusal is `ECONNREFUSED`). A server that accepts
/// and resets at once is then an established connection ending on a
/// server error (`SD` in a tcp session, as HAProxy logs it when it saw
/// the connect first), not a failed connect to retry. The error is
/// taken from the socket here: its next read finds the end.
pub fn connect_outcome_reset(
    s: &std::net::TcpStream,
    socks: &mut Option<Box<socks4::Socks4>>,
    writable: bool,
    hup: bool,
) -> Option<Result<bool, Reset>> {
    if writable && !hup {
        return socks4::settle(socks, s).map(Ok);
    }
    match (s.take_error(), connected(s)) {
        (Ok(None), true) => socks4::settle(socks, s).map(Ok),
        (Ok(None), false) => None,
        (Ok(Some(e)), _)
            if socks.is_none()
                && matches!(e.raw_os_error(), Some(libc::ECONNRESET | libc::EPIPE)) =>
        {
            Some(Err(Reset))
        }
        _ => Some(Ok(false)),
    }
}

/// Starts a non-blocking connect to the Linux abstract UNIX socket
/// `abns@NAME` (the name padded with zeros to the length HAProxy binds
/// it with). The socket is carried as a stream like a TCP one.
pub fn connect_abns_nb(name: &str) -> std::io::Result<std::net::TcpStream> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let mut path = vec![0u8];
    path.extend_from_slice(name.as_bytes());
    path.resize(1 + crate::listener::ABNS_LEN, 0);
    let addr =
        SockAddr::unix(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&path))?;
    let s = Socket::new(Domain::UNIX, Type::STREAM.nonblocking(), None)?;
    match s.connect(&addr) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(s.into())
}

/// A connect under way, and the SOCKS4 handshake to complete once it
/// is (`socks4`).
pub type Connecting = (std::net::TcpStream, Option<Box<socks4::Socks4>>);

/// Starts a connect to server `s`: its abstract UNIX socket, or `addr`
/// (through its `socks4` proxy if it has one). `has_data`: bytes wait to
/// be sent once connected (HAProxy's condition, with a PROXY header, for
/// `option tcp-smart-connect`'s delayed ACK).
pub fn connect_server_nb(
    s: &ServerRt,
    addr: impl FnOnce() -> Option<SocketAddr>,
    has_data: bool,
) -> std::io::Result<Connecting> {
    match &s.opts.abns {
        Some(name) => Ok((connect_abns_nb(name)?, None)),
        None => {
            let a =
                addr().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrNotAvailable))?;
            let src = s.opts.sock.source;
            let delack = s.opts.sock.smart_connect && (has_data || s.opts.send_proxy > 0);
            let (st, socks) = match s.opts.socks4 {
                Some(proxy) => (
                    connect_nb_from(proxy, src, delack)?,
                    Some(socks4::Socks4::new(a)),
                ),
                None => (connect_nb_from(a, src, delack)?, None),
            };
            let o = &s.opts.sock;
            if o.tcpka.on || o.nolinger {
                // The backend's `option srvtcpka` and `option nolinger`.
                let r = socket2::SockRef::from(&st);
                o.tcpka.apply(&r, false)?;
                if o.nolinger {
                    crate::net::set_nolinger(&r, true)?;
                }
            }
            Ok((st, socks))
        }
    }
}

/// Administrative state (the CLI's `set server ... state`).
pub const ADMIN_READY: u8 = 0;
pub const ADMIN_DRAIN: u8 = 1;
pub const ADMIN_MAINT: u8 = 2;

/// Per-server counters (monotonic; read by the stats).
#[derive(Default)]
pub struct Counters {
    pub sessions: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub conn_errors: AtomicU64,
    pub resp_errors: AtomicU64,
    pub retries: AtomicU64,
    pub redispatches: AtomicU64,
    pub queued_total: AtomicU64,
    pub queue_timeouts: AtomicU64,
    /// HTTP responses by status class (1xx..5xx, other).
    pub hrsp: [AtomicU64; 6],
    /// Connections to it attempted, and connections reused for a stream
    /// (HAProxy's `connect` and `reuse`).
    pub connects: AtomicU64,
    pub reuses: AtomicU64,
    /// When the last stream was handed to it: milliseconds since the
    /// process's time origin, plus one; 0 never.
    last_sess: AtomicU64,
    /// Transfers aborted by the client, and by the server (HAProxy's
    /// `cli_abrt`, `srv_abrt`).
    pub cli_aborts: AtomicU64,
    pub srv_aborts: AtomicU64,
    /// The longest its own queue was (HAProxy's `qmax`).
    pub qmax: AtomicU64,
    /// Queue, connect, response and total times of its streams.
    pub times: TimeStats,
    /// Streams handed to it over the last second (`srv_sess_rate`).
    sess_rate: crate::table::SharedFreqCtr,
}

/// HAProxy's window of the time averages (`TIME_STATS_SAMPLES`).
const TIME_SAMPLES: u64 = 1024;

/// HAProxy's time statistics (`qtime`, `ctime`, `rtime`, `ttime` and
/// their maxima): per time a sliding sum over the last 1024 streams, read
/// as an average, in milliseconds.
#[derive(Default)]
pub struct TimeStats {
    /// Streams counted (HAProxy's `cum_req`): the window while under 1024.
    n: AtomicU64,
    sums: [AtomicU64; 4],
    max: [AtomicU64; 4],
}

impl TimeStats {
    /// Counts one stream, with its queue, connect, response and total
    /// times when it reached a server (HAProxy's stream_update_time_stats:
    /// a stream that never connected or never had an answer counts in the
    /// window but adds no sample).
    pub fn note(&self, times: Option<[u64; 4]>) {
        let n = self.n.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(t) = times else { return };
        // Until the window is full every sample adds up; then each one
        // takes the place of an average one.
        let w = if n > TIME_SAMPLES { TIME_SAMPLES } else { 0 };
        for (i, v) in t.into_iter().enumerate() {
            if v == 0 && (w == 0 || self.sums[i].load(Ordering::Relaxed) == 0) {
                // Nothing to add and nothing to take off (a zero time, the
                // usual queue and connect times of a kept connection):
                // the update would leave the sum as it is.
                continue;
            }
            let _ = self.sums[i].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                let drop = if w > 0 { old.div_ceil(w) } else { 0 };
                Some(old - drop + v)
            });
            // A maximum only grows: a read spares the locked update
            // when this sample is not above it.
            if v > self.max[i].load(Ordering::Relaxed) {
                self.max[i].fetch_max(v, Ordering::Relaxed);
            }
        }
    }

    /// The averages of the four times, in milliseconds (rounded up as
    /// HAProxy's swrate_avg): over the streams counted while under 1024
    /// (`show stat`), or always over 1024 (`full`: HAProxy 2.6's
    /// Prometheus exporter divides so, even after one stream).
    pub fn averages(&self, full: bool) -> [u64; 4] {
        let n = self.n.load(Ordering::Relaxed);
        let w = if n > 0 && n < TIME_SAMPLES && !full {
            n
        } else {
            TIME_SAMPLES
        };
        std::array::from_fn(|i| self.sums[i].load(Ordering::Relaxed).div_ceil(w))
    }

    /// The longest of each time seen, in milliseconds.
    pub fn maxima(&self) -> [u64; 4] {
        std::array::from_fn(|i| self.max[i].load(Ordering::Relaxed))
    }

    /// Forgets the maxima (`clear counters`).
    pub fn clear_maxima(&self) {
        for m in &self.max {
            m.store(0, Ordering::Relaxed);
        }
    }

    /// Forgets everything (`clear counters all`).
    pub fn clear(&self) {
        self.clear_maxima();
        self.n.store(0, Ordering::Relaxed);
        for s in &self.sums {
            s.store(0, Ordering::Relaxed);
        }
    }
}

impl Counters {
    /// A stream was handed to the server at `now_ns`, the scheduler turn's
    /// date ([`sched::Ctx::now_ns`]: no clock read of its own; HAProxy
    /// dates it with its loop's `now` too).
    pub fn note_session(&self, now_ns: u64) {
        self.sessions.fetch_add(1, Ordering::Relaxed);
        let ms = now_ns / 1_000_000;
        self.last_sess.store(ms + 1, Ordering::Relaxed);
        self.sess_rate.add(1000, ms as u32, 1);
    }

    /// Streams handed over during the last second (HAProxy's sliding
    /// `sess_per_sec`).
    pub fn sess_rate(&self) -> u32 {
        let ms = sched::ticks::mono_now_ns() / 1_000_000;
        self.sess_rate.read(1000, ms as u32)
    }

    /// Seconds since the last stream was handed over; `None` never.
    pub fn last_session_age(&self) -> Option<u64> {
        let at = self.last_sess.load(Ordering::Relaxed).checked_sub(1)?;
        let now = sched::ticks::mono_now_ns() / 1_000_000;
        Some(now.saturating_sub(at) / 1000)
    }
}

/// One `server` line at run time.
pub struct ServerRt {
    /// Index in its farm.
    pub idx: usize,
    /// HAProxy's server id (`srv_id`, the stats' `sid`): the position in
    /// the configuration, or the lowest free one for `add server` (the id
    /// of a deleted server is used again).
    pub id: u32,
    /// Unique in the process (idle-pool key).
    pub uid: u64,
    /// The backend's own target ([`backend_target`]), not a server.
    pub backend_target: bool,
    pub name: String,
    pub backend: String,
    /// Where connections go: resolved at start, changed at run time by
    /// DNS answers and `set server ... addr` ([`ServerRt::addr`]).
    addr: AtomicAddr,
    /// The name its `resolvers` section resolves while ebb runs (`None`:
    /// an IP address, or no `resolvers`); `set server ... fqdn` changes it.
    pub fqdn: Mutex<Option<String>>,
    /// A `server-template` SRV slot's target host name (`srv_fqdn`).
    pub hostname: Mutex<Option<String>>,
    /// In maintenance because resolution gave no address (HAProxy's
    /// `MAINT (resolution)`, admin bit 0x20).
    pub rmaint: AtomicBool,
    /// The port connections go to (the configured one until an SRV
    /// record or `set server ... port` changes it).
    pub port: AtomicU16,
    /// The address changed at run time at least once.
    moved: AtomicBool,
    /// No port of its own (`server s 10.0.0.1`): connections go to the
    /// port the client connected to (HAProxy's `SRV_F_MAPPORTS`, offset
    /// 0); `set server ... addr IP port P` gives it one.
    pub map_ports: AtomicBool,
    /// Removed by `del server`: never picked, never listed again.
    pub(crate) deleted: AtomicBool,
    /// Health checks run (`check`, and not `disable health`).
    pub check_on: AtomicBool,
    pub opts: ServerOptions,
    /// Weight in force (`set server ... weight` changes it).
    pub weight: AtomicU32,
    /// `maxconn` in force; 0 = unlimited.
    pub maxconn: AtomicU32,
    /// `minconn` (0: none, a fixed `maxconn`): see [`Farm::limit`].
    pub minconn: u32,
    pub admin: AtomicU8,
    /// Health: true unless checks said DOWN (the health check's and the
    /// agent's views combined: [`check::refresh_up`]).
    pub up: AtomicBool,
    /// The health check's own view: its health is at `rise` or more.
    pub check_ok: AtomicBool,
    /// The health check's streak: failures while `check_ok`, successes
    /// while not (the stats' `UP 2/3` going down, `DOWN 1/2` going up).
    pub check_streak: AtomicU32,
    /// The agent check (`agent-check`) and its state.
    pub agent: agent::AgentRt,
    /// When it last came UP (slowstart).
    pub up_since: AtomicInstant,
    /// Slots in use.
    pub cur: AtomicU32,
    /// Idle connections to it, counted against `pool-max-conn`
    /// ([`pool::IdleTicket`]).
    idle_conns: AtomicU32,
    pub queue: Mutex<VecDeque<Arc<Waiter>>>,
    /// Streams in `queue`, and those about to join it: counted before
    /// they look for a free slot a last time (see [`Farm::release`]).
    waiting: AtomicU32,
    pub counters: Counters,
    /// Last check result, for logs and stats.
    pub check_status: Mutex<check::Verdict>,
    /// `observe`: what its traffic showed, for `on-error`.
    pub hana: check::Hana,
    /// `ssl`: TLS to this server.
    pub tls: Option<ServerTls>,
    /// What `show stat` reports beyond the above (maxima, check history).
    pub ext: extra::SrvExtra,
    /// `track`: the server whose health this one takes, and the
    /// maintenance or drain it passes on (HAProxy's inherited states).
    pub tracked: OnceLock<Arc<ServerRt>>,
    /// The servers tracking this one, with their farms.
    pub trackers: Mutex<Vec<(Weak<Farm>, Weak<ServerRt>)>>,
    /// The administrative state inherited from the tracked server
    /// (HAProxy's IMAINT/IDRAIN): the server is in the stronger of it
    /// and its own.
    pub iadmin: AtomicU8,
}

/// TLS settings of a server: the client configuration and the name sent
/// as SNI and checked in its certificate.
pub struct ServerTls {
    pub config: Arc<rustls::ClientConfig>,
    /// The name sent and verified: a constant `sni`; empty without one,
    /// HAProxy's default: no SNI (the connection names the server by its
    /// address, which rustls does not send) and the certificate's names
    /// not checked unless `verifyhost` says ([`crate::tls`]).
    pub sni: String,
    /// `sni` with an expression that depends on the exchange (evaluated
    /// for each new connection; [`ServerTls::sni`] when it gives nothing).
    pub sni_expr: Option<crate::sample::Expr>,
}

impl ServerTls {
    /// The name a new connection to `dest` sends and verifies: `dynamic`
    /// (an `sni` evaluated for it), the constant `sni`, else the address.
    pub fn name_for(&self, dynamic: Option<&str>, dest: Option<SocketAddr>) -> String {
        match dynamic {
            Some(n) => n.to_string(),
            None if !self.sni.is_empty() => self.sni.clone(),
            None => dest.map_or_else(|| "0.0.0.0".to_string(), |a| a.ip().to_string()),
        }
    }
}

impl ServerRt {
    /// The address new connections (and health checks) go to now.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr.get()
    }

    /// Whether connections have somewhere to go: an IP address, or an
    /// abstract UNIX socket (`abns@`).
    pub fn has_addr(&self) -> bool {
        self.opts.abns.is_some() || self.addr().is_some()
    }

    /// Where a connection for a client that connected to `dst()` goes:
    /// the server's address, with the client's destination port for a
    /// server without a port of its own (`dst` is only asked then: a
    /// system call).
    pub fn dest(&self, dst: impl FnOnce() -> Option<SocketAddr>) -> Option<SocketAddr> {
        if self.backend_target && self.addr().is_none() {
            // `option transparent`: where the client connected.
            return dst();
        }
        let a = self.addr()?;
        let any = a.ip().is_unspecified();
        if !self.map_ports.load(Ordering::Relaxed) && !any {
            return Some(a);
        }
        // A server without a port takes the client's destination port; one
        // without an address (0.0.0.0) its destination address.
        let d = dst()?;
        let ip = if any { d.ip() } else { a.ip() };
        let port = if self.map_ports.load(Ordering::Relaxed) {
            d.port()
        } else {
            a.port()
        };
        Some(SocketAddr::new(ip, port))
    }

    /// Where connections go depends on the client's destination (a server
    /// without a port or without an address).
    pub fn follows_client_dst(&self) -> bool {
        self.map_ports.load(Ordering::Relaxed)
            || self.addr().is_some_and(|a| a.ip().is_unspecified())
    }

    /// Changes the address: the next connection and check use it;
    /// connections already open stay where they are (an idle one to the
    /// old address is not reused: [`ServerRt::still_there`]).
    pub fn set_addr(&self, a: Option<SocketAddr>) {
        if let Some(a) = a {
            self.port.store(a.port(), Ordering::Relaxed);
        }
        self.moved.store(true, Ordering::Relaxed);
        self.addr.set(a);
    }

    /// Whether a server connection still goes to this server's address:
    /// always, unless the address changed at run time (then its peer is
    /// compared, one `getpeername`, for servers that moved only).
    pub fn still_there(&self, st: &crate::transport::Transport) -> bool {
        if !self.moved.load(Ordering::Relaxed) {
            return true;
        }
        st.tcp().peer_addr().ok() == self.addr()
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    /// Whether the load balancer may pick this server now.
    pub fn usable(&self) -> bool {
        !self.is_deleted()
            && self.has_addr()
            && !self.rmaint.load(Ordering::Relaxed)
            && self.up.load(Ordering::Relaxed)
            && self.admin_state() == ADMIN_READY
            && self.weight.load(Ordering::Relaxed) > 0
    }

    /// Whether a persistent request (`stick match`) may go to this
    /// server: it is not down and not in maintenance (HAProxy sends such
    /// requests to a draining server too).
    pub fn persist_ok(&self) -> bool {
        !self.is_deleted()
            && self.has_addr()
            && !self.rmaint.load(Ordering::Relaxed)
            && self.up.load(Ordering::Relaxed)
            && self.admin_state() != ADMIN_MAINT
    }

    /// Whether a slot is free under the limit `m` (0: none; the farm's
    /// [`Farm::limit`]).
    pub fn has_room_under(&self, m: u32) -> bool {
        m == 0 || self.cur.load(Ordering::Relaxed) < m
    }

    /// Takes a slot if one is free under the limit `m` (0: none).
    pub fn try_take_under(&self, m: u32) -> bool {
        // SeqCst: a queuing stream's last look for a slot, which
        // `Farm::release`'s fast path is argued against.
        let now = if m == 0 {
            self.cur.fetch_add(1, Ordering::SeqCst)
        } else {
            match self
                .cur
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| {
                    (c < m).then_some(c + 1)
                }) {
                Ok(c) => c,
                Err(_) => return false,
            }
        };
        self.ext.smax.fetch_max(now + 1, Ordering::Relaxed);
        true
    }

    /// Weight for the load balancer, ramped after coming UP with
    /// `slowstart` (at least 1 while usable).
    pub fn effective_weight(&self) -> u32 {
        let w = self.weight.load(Ordering::Relaxed);
        let Some(ss) = self.opts.slowstart else {
            return w;
        };
        let since = self.up_since.elapsed();
        if since >= ss || ss.is_zero() {
            return w;
        }
        let ramp = (u128::from(w) * since.as_millis() / ss.as_millis().max(1)) as u32;
        ramp.clamp(1, w.max(1))
    }
}

/// What a waiting stream gets.
#[derive(Debug, Clone)]
pub enum WaitState {
    Waiting,
    /// A slot of this server was handed over.
    Assigned(Arc<ServerRt>),
    /// The server it waited for went down or into maintenance: pick again.
    Redispatch,
    /// The stream gave up (timeout, client gone).
    Cancelled,
}

impl std::fmt::Debug for ServerRt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.backend, self.name)
    }
}

/// A stream waiting for a slot.
pub struct Waiter {
    pub state: Mutex<WaitState>,
    pub tasklet: TaskletId,
    pub handle: RuntimeHandle,
    /// Streams ahead of this one in its queue when it joined (the log's
    /// `%sq` or `%bq`).
    pub ahead: u32,
    /// It waits in the backend's queue (`%bq`), not a server's (`%sq`).
    pub on_backend: bool,
}

impl Waiter {
    /// Hands a slot over if the waiter still waits; returns whether it did.
    fn assign(&self, s: &Arc<ServerRt>) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(*st, WaitState::Waiting) {
            *st = WaitState::Assigned(Arc::clone(s));
            drop(st);
            self.handle.wake_tasklet_instant(self.tasklet);
            true
        } else {
            false
        }
    }

    fn redispatch(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(*st, WaitState::Waiting) {
            *st = WaitState::Redispatch;
            drop(st);
            self.handle.wake_tasklet_instant(self.tasklet);
        }
    }

    /// The stream gives up waiting. Returns a slot it was given meanwhile
    /// (which it must use or release).
    pub fn cancel(&self) -> Option<Arc<ServerRt>> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::replace(&mut *st, WaitState::Cancelled) {
            WaitState::Assigned(s) => Some(s),
            _ => None,
        }
    }

    pub fn current(&self) -> WaitState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The result of asking for a server.
pub enum Pick {
    /// A slot of this server is ours.
    Server(Arc<ServerRt>),
    /// Wait: we are in a queue.
    Queued(Arc<Waiter>),
    /// No server can take the stream (all down, or queues full): 503.
    NoServer(&'static str),
}

/// What the load balancer may look at in the request.
#[derive(Default, Clone, Copy)]
pub struct LbInput<'a> {
    pub src: Option<std::net::IpAddr>,
    pub uri: &'a [u8],
    pub hdr: Option<&'a [u8]>,
}

/// A backend's servers, balancing state and queue.
pub struct Farm {
    pub name: String,
    pub servers: ServerList,
    /// Bumped when a server joins or leaves: threads rebuild their
    /// balancing state ([`dynamic`]).
    pub(crate) gen: AtomicU64,
    /// What the health checks of servers added at run time need.
    pub check_ctx: OnceLock<check::CheckCtx>,
    pub balance: Balance,
    pub retries: u32,
    /// `retry-on`: which failures a retry follows.
    pub retry_on: crate::config::RetryOn,
    pub redispatch: bool,
    /// `option redispatch N` ([`Farm::redispatch_on`]).
    pub redispatch_after: i32,
    pub reuse: HttpReuse,
    pub check: HttpCheck,
    /// `dispatch` or `option transparent` in a backend without servers:
    /// every stream goes there.
    pub target: Option<Arc<ServerRt>>,
    /// `hash-type`, set once before the first pick.
    hash: OnceLock<crate::config::HashType>,
    /// The balancing state every thread shares (round-robin positions).
    rr: lb::Shared,
    /// Balancing state per thread: see the module's introduction.
    slots: Box<[ThreadSlot]>,
    pub queue: Mutex<VecDeque<Arc<Waiter>>>,
    /// The backend queue's `ServerRt::waiting`.
    waiting: AtomicU32,
    /// `fullconn`: the backend's load at which servers with a `minconn`
    /// reach their `maxconn` (see [`Farm::limit`]).
    pub fullconn: u32,
    pub counters: Counters,
    /// The backend's own state history (`show stat`'s backend `chkdown`,
    /// `lastchg`, `downtime`): it is down while no server is usable.
    pub be_ext: extra::SrvExtra,
    be_up: std::sync::atomic::AtomicBool,
    /// The backend's options for server sockets, given to the servers
    /// added at run time too.
    pub sock: crate::config::SrvSock,
    /// `option allbackups`: all usable backups share the load when no
    /// active server is usable, instead of the first one alone.
    pub allbackups: bool,
}

static NEXT_SERVER_UID: AtomicU64 = AtomicU64::new(1);

/// HAProxy's server ids: an `id N` as written; the others, in order, the
/// first id not taken at or after a counter that starts at 1 and moves
/// one past each server's position.
fn server_ids(given: impl Iterator<Item = Option<u32>> + Clone) -> Vec<u32> {
    let mut used: std::collections::BTreeSet<u32> = given.clone().flatten().collect();
    let mut next = 1u32;
    given
        .map(|g| {
            let id = g.unwrap_or_else(|| {
                while used.contains(&next) {
                    next = next.saturating_add(1);
                }
                used.insert(next);
                next
            });
            next = next.saturating_add(1);
            id
        })
        .collect()
}

impl Farm {
    pub fn new(
        name: String,
        servers: Vec<(String, Option<SocketAddr>, ServerOptions, Option<ServerTls>)>,
        balance: Balance,
        retries: u32,
        redispatch: bool,
        reuse: HttpReuse,
        check: HttpCheck,
    ) -> Farm {
        let ids = server_ids(servers.iter().map(|s| s.2.id));
        let servers: Vec<Arc<ServerRt>> = servers
            .into_iter()
            .zip(ids)
            .enumerate()
            .map(|(idx, ((sname, addr, opts, tls), id))| {
                new_server(idx, id, &name, sname, addr, opts, tls)
            })
            .collect();
        register(&servers);
        Farm {
            name,
            servers: ServerList::new(servers),
            gen: AtomicU64::new(0),
            check_ctx: OnceLock::new(),
            balance,
            retries,
            retry_on: crate::config::RetryOn::default(),
            redispatch,
            redispatch_after: -1,
            reuse,
            check,
            target: None,
            hash: OnceLock::new(),
            rr: lb::Shared::default(),
            slots: (0..LB_SLOTS).map(|_| Padded(Mutex::new(None))).collect(),
            queue: Mutex::new(VecDeque::new()),
            waiting: AtomicU32::new(0),
            fullconn: 1,
            counters: Counters::default(),
            be_ext: extra::SrvExtra::default(),
            be_up: std::sync::atomic::AtomicBool::new(true),
            sock: crate::config::SrvSock::default(),
            allbackups: false,
        }
    }

    /// Notes a server's change of state on the backend's own history: the
    /// backend goes down when no server is usable any more, and up again
    /// with the first usable one.
    pub fn note_state(&self) {
        let up = self.servers.iter().any(|s| s.usable());
        if self.be_up.swap(up, Ordering::AcqRel) != up {
            if !up {
                self.be_ext.chkdown.fetch_add(1, Ordering::Relaxed);
            }
            self.be_ext.changed(up);
        }
    }

    /// Sets the backend's `hash-type` (the hash algorithms' lookup), once,
    /// before the first pick; a later call changes nothing.
    pub fn set_hash(&self, h: crate::config::HashType) {
        let _ = self.hash.set(h);
    }

    /// Whether retry number `k` (1 for the first) goes to another server
    /// (`option redispatch [N]`, HAProxy's rule: `k % N == 0` for N > 0,
    /// `k % (retries + 1 + N) == 0` for N < 0).
    pub fn redispatch_on(&self, k: u32) -> bool {
        let n = i64::from(self.redispatch_after);
        let every = if n < 0 {
            i64::from(self.retries) + 1 + n
        } else {
            n
        };
        self.redispatch && every != 0 && i64::from(k) % every == 0
    }

    /// Whether a layer-7 retry, number `k`, leaves `s` for another server
    /// (HAProxy 2.6.0's stream_choose_redispatch): with `option
    /// redispatch`, unless a rule forced the server (`forced`), when `s`
    /// is no longer usable, when [`Farm::redispatch_on`] says so, or when
    /// persistence did not choose it (`direct`) and the balancing is a
    /// round robin among more than one usable active server.
    pub fn leave_on_retry(&self, k: u32, s: &ServerRt, direct: bool, forced: bool) -> bool {
        use crate::config::Balance;
        let rr = matches!(
            self.balance,
            Balance::RoundRobin | Balance::StaticRr | Balance::Random { .. }
        );
        self.redispatch
            && !forced
            && (!s.usable()
                || self.redispatch_on(k)
                || (!direct && rr && self.usable_counts().0 > 1))
    }

    /// A new thread's balancing state.
    fn slot(&self, seed: usize) -> Box<Slot> {
        let mut st = lb::State::new(seed as u64);
        let w: Vec<u32> = self.servers.all().map(|s| s.opts.weight).collect();
        st.set_hash(self.hash.get().copied().unwrap_or_default(), &w);
        let mut ids = vec![0; self.servers.len()];
        for s in self.servers.all() {
            if let Some(x) = ids.get_mut(s.idx) {
                *x = s.id;
            }
        }
        st.set_ids(ids);
        Box::new(Slot {
            gen: self.gen.load(Ordering::Acquire),
            elig: Vec::with_capacity(self.servers.len()),
            weights: Vec::with_capacity(self.servers.len()),
            cur: Vec::with_capacity(self.servers.len()),
            room: Vec::with_capacity(self.servers.len()),
            st,
        })
    }

    /// Whether weights are static (`static-rr`, HAProxy's map-based
    /// hashing): a weight change while up is then only 0% or 100%, and
    /// no slowstart ramps them.
    pub fn static_weights(&self) -> bool {
        matches!(self.balance, Balance::StaticRr)
            || (self.balance_hashes() && !self.hash.get().is_some_and(|h| h.consistent))
    }

    /// Whether the algorithm hashes a key of the request (it may then bind
    /// the stream to a full server, to wait in that server's queue).
    fn balance_hashes(&self) -> bool {
        matches!(
            self.balance,
            Balance::Source | Balance::Uri { .. } | Balance::UrlParam { .. } | Balance::Hdr { .. }
        )
    }

    /// Servers the balancer may use now, into `out`: the active ones, or
    /// else the first usable backup (HAProxy's default), or every usable
    /// backup with `option allbackups`.
    fn eligible(&self, out: &mut Vec<usize>) {
        out.clear();
        out.extend(
            self.servers
                .iter()
                .filter(|s| !s.opts.backup && s.usable())
                .map(|s| s.idx),
        );
        if out.is_empty() {
            let mut backups = self.servers.iter().filter(|s| s.opts.backup && s.usable());
            if self.allbackups {
                out.extend(backups.map(|s| s.idx));
            } else {
                out.extend(backups.next().map(|s| s.idx));
            }
        }
    }

    /// Picks a server for a stream and takes a slot, or queues the stream
    /// (`me` is woken when a slot is handed over), or refuses. `avoid`
    /// names a server not to pick again (a redispatch after it failed).
    /// `handle` is called only to queue (a handle is a shared count the
    /// uncontended path need not touch).
    pub fn pick(
        &self,
        input: &LbInput<'_>,
        avoid: Option<usize>,
        me: TaskletId,
        handle: impl FnOnce() -> RuntimeHandle,
    ) -> Pick {
        if let Some(t) = &self.target {
            // `dispatch` / `option transparent`: no balancing, no queue.
            t.cur.fetch_add(1, Ordering::AcqRel);
            return Pick::Server(Arc::clone(t));
        }
        if self.servers.len() == 1 && !self.balance_hashes() {
            // A one-server backend (the usual reverse proxy): what the
            // general path below decides for one eligible server, without
            // its thread slot's lock or the eligible list. The server,
            // active or the backup, is eligible when usable.
            let Some(s) = self.servers.get(0).filter(|s| s.usable()) else {
                return Pick::NoServer("no server available");
            };
            // Streams waiting already go first (FIFO), as HAProxy's.
            if self.waiting.load(Ordering::Relaxed) == 0 && self.has_room(s) && self.try_take(s) {
                return Pick::Server(Arc::clone(s));
            }
            // Full (or raced to full): the backend's queue.
            return self.enqueue_backend(&[s.idx], me, handle);
        }
        let at = thread_slot();
        let mut guard = self.slots[at].0.lock().unwrap_or_else(|p| p.into_inner());
        // A server joined or left since: rebuild (one atomic load a pick).
        if guard
            .as_ref()
            .is_some_and(|s| s.gen != self.gen.load(Ordering::Acquire))
        {
            *guard = None;
        }
        let slot = guard.get_or_insert_with(|| self.slot(at));
        let Slot {
            gen: _,
            elig,
            weights,
            cur,
            room,
            st,
        } = &mut **slot;
        self.eligible(elig);
        // The round robins pass over the server to avoid themselves: their
        // state follows the usable servers.
        let rr_kind = matches!(self.balance, Balance::RoundRobin | Balance::StaticRr);
        if let Some(a) = avoid.filter(|_| !rr_kind) {
            if elig.len() > 1 {
                elig.retain(|&i| i != a);
            }
        }
        if elig.is_empty() {
            return Pick::NoServer("no server available");
        }
        let backup = self.servers[elig[0]].opts.backup;
        // A round robin among the active servers moves on with one left
        // (HAProxy's position advances), so it picks even then.
        let choice = if elig.len() == 1 && !self.balance_hashes() && (backup || !rr_kind) {
            // One server to choose from and no key to bind the stream to
            // it: it takes the stream if it has room, else the stream
            // waits in the backend's queue, whatever the algorithm.
            let i = elig[0];
            if self.has_room(&self.servers[i]) {
                lb::Choice::Server(i)
            } else {
                lb::Choice::AllFull
            }
        } else {
            // Static weights: no slowstart ramp (HAProxy).
            let static_w = self.static_weights();
            weights.clear();
            cur.clear();
            room.clear();
            for &i in elig.iter() {
                let s = &self.servers[i];
                weights.push(if static_w {
                    s.weight.load(Ordering::Relaxed)
                } else {
                    s.effective_weight()
                });
                cur.push(s.cur.load(Ordering::Relaxed));
                room.push(self.has_room(s));
            }
            let (b, sh, grp) = (&self.balance, &self.rr, lb::Group { backup, avoid });
            lb::choose(b, st, elig, weights, cur, room, input, sh, grp)
        };
        let elig: &[usize] = elig;
        match choice {
            lb::Choice::Server(i) => {
                let s = &self.servers[i];
                if self.try_take(s) {
                    return Pick::Server(Arc::clone(s));
                }
                // Raced to full: queue on the backend like any full case.
                self.enqueue_backend(elig, me, handle)
            }
            lb::Choice::Bound(i) => self.enqueue_server(i, me, handle),
            lb::Choice::AllFull => self.enqueue_backend(elig, me, handle),
        }
    }

    /// Like [`Farm::pick`], but server `prefer` (a `stick match`) takes
    /// the stream, or queues it, when it may (not the server to avoid,
    /// not down or in maintenance); else the balancer picks.
    pub fn pick_sticky(
        &self,
        prefer: Option<usize>,
        input: &LbInput<'_>,
        avoid: Option<usize>,
        me: TaskletId,
        handle: impl FnOnce() -> RuntimeHandle,
    ) -> Pick {
        match prefer {
            Some(i) if avoid != Some(i) && self.servers.get(i).is_some_and(|s| s.persist_ok()) => {
                self.enqueue_server(i, me, handle)
            }
            _ => self.pick(input, avoid, me, handle),
        }
    }

    fn waiter(me: TaskletId, handle: RuntimeHandle, ahead: usize, on_backend: bool) -> Arc<Waiter> {
        Arc::new(Waiter {
            state: Mutex::new(WaitState::Waiting),
            tasklet: me,
            handle,
            ahead: u32::try_from(ahead).unwrap_or(u32::MAX),
            on_backend,
        })
    }

    /// Queues on one server (hash algorithms bind a stream to its server).
    fn enqueue_server(
        &self,
        i: usize,
        me: TaskletId,
        handle: impl FnOnce() -> RuntimeHandle,
    ) -> Pick {
        let s = &self.servers[i];
        let mut q = s.queue.lock().unwrap_or_else(|p| p.into_inner());
        // Counted first, then a last look for a slot (under the lock a
        // releasing stream's slow path takes; its fast path skips the
        // lock, see `release`).
        s.waiting.fetch_add(1, Ordering::SeqCst);
        if self.try_take(s) {
            s.waiting.fetch_sub(1, Ordering::SeqCst);
            return Pick::Server(Arc::clone(s));
        }
        if s.opts.maxqueue.is_some_and(|m| q.len() as u32 >= m) {
            s.waiting.fetch_sub(1, Ordering::SeqCst);
            return Pick::NoServer("server queue full");
        }
        let w = Self::waiter(me, handle(), q.len(), false);
        q.push_back(Arc::clone(&w));
        s.counters.queued_total.fetch_add(1, Ordering::Relaxed);
        s.counters.qmax.fetch_max(q.len() as u64, Ordering::Relaxed);
        Pick::Queued(w)
    }

    /// Queues on the backend: any eligible server may hand us a slot.
    fn enqueue_backend(
        &self,
        elig: &[usize],
        me: TaskletId,
        handle: impl FnOnce() -> RuntimeHandle,
    ) -> Pick {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        // Counted before the last look for a slot: see `release`.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        // Behind streams already waiting (FIFO, as HAProxy): no last look
        // then; a release serves the queue's head, which every release
        // sees (they count before it) and hands its slot to.
        let behind = !q.is_empty();
        for &i in elig.iter().filter(|_| !behind) {
            if self.try_take(&self.servers[i]) {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                return Pick::Server(Arc::clone(&self.servers[i]));
            }
        }
        // No bound but `timeout queue`: a server's `maxqueue` bounds only
        // its own queue (HAProxy 2.6 queues a stream no server can take
        // on the backend whatever the servers' maxqueue).
        let w = Self::waiter(me, handle(), q.len(), true);
        q.push_back(Arc::clone(&w));
        self.counters.queued_total.fetch_add(1, Ordering::Relaxed);
        self.counters
            .qmax
            .fetch_max(q.len() as u64, Ordering::Relaxed);
        Pick::Queued(w)
    }

    /// The slots `s` may hold now (0: no limit): its `maxconn`, unless
    /// it has a `minconn` below it, then HAProxy's dynamic limit: from
    /// `minconn` up to `maxconn` in proportion to the backend's load (the
    /// streams it serves and those waiting) against `fullconn`, `maxconn`
    /// from `fullconn` on; during a `slowstart` ramp (after coming UP),
    /// that share of it, at least 1, as HAProxy counts it (whole seconds).
    pub fn limit(&self, s: &ServerRt) -> u32 {
        let m = s.maxconn.load(Ordering::Relaxed);
        if m == 0 || (s.minconn == 0 && s.opts.slowstart.is_none()) {
            return m;
        }
        let mut max = m;
        if s.minconn != 0 && s.minconn < m {
            let load = self.load();
            if load < self.fullconn {
                let share = u64::from(load) * u64::from(m) / u64::from(self.fullconn.max(1));
                max = s.minconn.max(u32::try_from(share).unwrap_or(m));
            }
        }
        if let Some(ss) = s.opts.slowstart {
            let ss_s = ss.as_millis().div_ceil(1000) as u64;
            let since = s.up_since.elapsed().as_secs();
            if ss_s > 0 && since < ss_s {
                let ratio = 100 * since / ss_s;
                max = (u64::from(max) * ratio / 100).max(1) as u32;
            }
        }
        max
    }

    /// The backend's load for [`Farm::limit`] (HAProxy's `beconn`): the
    /// streams its servers serve and those waiting for one.
    fn load(&self) -> u32 {
        let mut n = self.waiting.load(Ordering::Relaxed);
        for s in self.servers.iter() {
            n = n
                .saturating_add(s.cur.load(Ordering::Relaxed))
                .saturating_add(s.waiting.load(Ordering::Relaxed));
        }
        n
    }

    /// Whether `s` has a free slot under [`Farm::limit`].
    pub fn has_room(&self, s: &ServerRt) -> bool {
        s.has_room_under(self.limit(s))
    }

    /// Takes a slot of `s` if one is free under [`Farm::limit`].
    pub fn try_take(&self, s: &ServerRt) -> bool {
        s.try_take_under(self.limit(s))
    }

    /// Whether a stream waits (or is about to) for a slot `s` frees.
    fn anyone_waits(&self, s: &ServerRt) -> bool {
        s.waiting.load(Ordering::SeqCst) != 0 || self.waiting.load(Ordering::SeqCst) != 0
    }

    /// Ends a stream's use of a slot of `s`: hands it to the first waiter,
    /// or gives it back.
    ///
    /// With both queues empty the slot is given back without their locks:
    /// check, give back, check again. A stream that queues meanwhile is
    /// served all the same (HAProxy's pendconn pattern): it counts itself
    /// in `waiting` *before* its last look for a free slot (`try_take`,
    /// under its queue's lock), and all four steps are SeqCst, so of this
    /// `cur` decrement followed by the second check, and its count
    /// followed by its look, one sees the other: either its look finds
    /// the slot given back, or the second check sees it and the slot is
    /// taken again to be handed over below. If another stream took the
    /// slot first, that one's release (whose own second check comes after
    /// its take, so after the count) hands it over. Otherwise the locks
    /// order a queuing stream against a releasing one.
    pub fn release(&self, s: &Arc<ServerRt>) {
        if !self.anyone_waits(s) {
            s.cur.fetch_sub(1, Ordering::SeqCst);
            if !self.anyone_waits(s) || !self.try_take(s) {
                return;
            }
        }
        let mut sq = s.queue.lock().unwrap_or_else(|p| p.into_inner());
        // A server out of use takes no waiter: they are redispatched.
        let usable = s.usable();
        // A dynamic limit (`minconn`, `slowstart`) now below the slots in
        // use: this one goes back instead (HAProxy serves a queue only
        // while the server is under it). One in use is always under it.
        let m = self.limit(s);
        if usable && m != 0 && s.cur.load(Ordering::SeqCst) > m {
            s.cur.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        if usable {
            while let Some(w) = sq.pop_front() {
                s.waiting.fetch_sub(1, Ordering::SeqCst);
                if w.assign(s) {
                    return;
                }
            }
            let mut bq = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            while let Some(w) = bq.pop_front() {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                if w.assign(s) {
                    // A dynamic limit may have grown with the load: serve
                    // the queue while there is room (HAProxy dequeues up
                    // to the limit at each release).
                    if (s.minconn != 0 || s.opts.slowstart.is_some()) && !bq.is_empty() {
                        drop(bq);
                        drop(sq);
                        self.kick_backend_queue();
                    }
                    return;
                }
            }
            s.cur.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        s.cur.fetch_sub(1, Ordering::SeqCst);
        drop(sq);
        self.kick_backend_queue();
    }

    /// A waiter gave up: take it out of whichever queue holds it.
    pub fn unqueue(&self, w: &Arc<Waiter>) {
        for s in &self.servers {
            let mut q = s.queue.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(pos) = q.iter().position(|x| Arc::ptr_eq(x, w)) {
                q.remove(pos);
                s.waiting.fetch_sub(1, Ordering::SeqCst);
                return;
            }
        }
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pos) = q.iter().position(|x| Arc::ptr_eq(x, w)) {
            q.remove(pos);
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A server went DOWN or into maintenance: its waiters pick again.
    pub fn redispatch_queue_of(&self, s: &ServerRt) {
        let waiters: Vec<_> = {
            let mut q = s.queue.lock().unwrap_or_else(|p| p.into_inner());
            let n = q.len() as u32;
            s.waiting.fetch_sub(n, Ordering::SeqCst);
            q.drain(..).collect()
        };
        for w in waiters {
            w.redispatch();
        }
    }

    /// A server became usable, or freed a slot while unusable: let the
    /// backend's waiters try again.
    pub fn kick_backend_queue(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let mut elig = Vec::new();
        self.eligible(&mut elig);
        let mut unused = None;
        while !q.is_empty() {
            let Some(s) = elig
                .iter()
                .map(|&i| &self.servers[i])
                .find(|s| self.try_take(s))
            else {
                break;
            };
            let mut given = false;
            while let Some(w) = q.pop_front() {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                if w.assign(s) {
                    given = true;
                    break;
                }
            }
            if !given {
                unused = Some(s);
                break;
            }
        }
        drop(q);
        // A slot taken for waiters that had all left goes back as any
        // release does: a stream may have queued on its server meanwhile.
        if let Some(s) = unused {
            self.release(s);
        }
    }

    /// Usable (active, backup) servers, as HAProxy's state-change logs
    /// count them.
    pub fn usable_counts(&self) -> (usize, usize) {
        self.servers
            .iter()
            .filter(|x| x.usable())
            .fold((0, 0), |(a, b), x| {
                if x.opts.backup {
                    (a, b + 1)
                } else {
                    (a + 1, b)
                }
            })
    }

    /// Streams waiting now, all queues together.
    pub fn queued(&self) -> usize {
        let b = self.queue.lock().map(|q| q.len()).unwrap_or(0);
        b + self
            .servers
            .iter()
            .map(|s| s.queue.lock().map(|q| q.len()).unwrap_or(0))
            .sum::<usize>()
    }
}

/// Every server by uid, for readers that keep only the uid (a session's
/// current server, which the stream sets without a lock).
static BY_UID: Mutex<std::collections::BTreeMap<u64, std::sync::Weak<ServerRt>>> =
    Mutex::new(std::collections::BTreeMap::new());

pub(crate) fn register(servers: &[Arc<ServerRt>]) {
    let mut m = BY_UID.lock().unwrap_or_else(|p| p.into_inner());
    m.retain(|_, w| w.strong_count() > 0);
    for s in servers {
        m.insert(s.uid, Arc::downgrade(s));
    }
}

/// The server with this uid, while it exists (0 is none).
pub fn server_by_uid(uid: u64) -> Option<Arc<ServerRt>> {
    BY_UID
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&uid)
        .and_then(std::sync::Weak::upgrade)
}

/// Threads with a balancing slot of their own in every farm; more threads
/// share slots (still correct: a slot is a lock, only not a free one).
pub const LB_SLOTS: usize = 64;

/// A thread's balancing state and scratch lists (kept for their capacity).
struct Slot {
    /// The farm's generation it was built for.
    gen: u64,
    elig: Vec<usize>,
    weights: Vec<u32>,
    cur: Vec<u32>,
    room: Vec<bool>,
    st: lb::State,
}

/// One thread's balancing slot, filled at its first pick.
type ThreadSlot = Padded<Mutex<Option<Box<Slot>>>>;

/// Keeps each thread's slot on its own cache line.
#[repr(align(64))]
struct Padded<T>(T);

/// This thread's slot index, given at its first pick.
fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed) % LB_SLOTS;
    }
    SLOT.with(|s| *s)
}

/// An instant that threads read and set without a lock: nanoseconds from
/// a process-wide origin (negative: before it).
pub struct AtomicInstant(AtomicI64);

fn origin() -> Instant {
    static O: OnceLock<Instant> = OnceLock::new();
    *O.get_or_init(Instant::now)
}

impl AtomicInstant {
    pub fn new(t: Instant) -> AtomicInstant {
        let a = AtomicInstant(AtomicI64::new(0));
        a.set(t);
        a
    }

    pub fn set(&self, t: Instant) {
        let o = origin();
        let n = match t.checked_duration_since(o) {
            Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            None => -i64::try_from((o - t).as_nanos()).unwrap_or(i64::MAX),
        };
        self.0.store(n, Ordering::Relaxed);
    }

    /// Time since the instant (zero if it is in the future).
    pub fn elapsed(&self) -> Duration {
        let now = i64::try_from(origin().elapsed().as_nanos()).unwrap_or(i64::MAX);
        let d = now.saturating_sub(self.0.load(Ordering::Relaxed));
        Duration::from_nanos(u64::try_from(d).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests;

/// Whether an idle connection is still open: nothing to read (a closed one
/// reads EOF, a confused one has bytes we never asked for).
pub(crate) fn alive(s: &mut crate::transport::Transport) -> bool {
    let mut b = [0u8; 1];
    if s.is_tls() {
        // TLS: records may come unasked (session tickets): read through
        // rustls; no plaintext and no close means alive.
        return matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    }
    matches!(s.tcp().peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// A server's state as the stats page, the CSV and the metrics name it.
pub fn server_status(s: &ServerRt) -> std::borrow::Cow<'static, str> {
    if s.iadmin.load(Ordering::Relaxed) == ADMIN_MAINT && !s.rmaint.load(Ordering::Relaxed) {
        if let Some(t) = s.tracked.get() {
            return format!("MAINT (via {}/{})", t.backend, t.name).into();
        }
    }
    let own = server_status_own(s);
    // HAProxy's transition states while checks fail or succeed: the
    // failures left before DOWN of `fall` ("UP 2/3", "DRAIN 2/3"), the
    // successes of `rise` while DOWN ("DOWN 1/2").
    let streak = s.check_streak.load(Ordering::Relaxed);
    let checking = streak > 0 && s.check_on.load(Ordering::Relaxed);
    match own {
        "UP" | "DRAIN" if checking && s.check_ok.load(Ordering::Relaxed) => {
            let fall = s.opts.fall.max(1);
            format!("{own} {}/{fall}", fall.saturating_sub(streak)).into()
        }
        "DOWN" if checking && !s.check_ok.load(Ordering::Relaxed) => {
            format!("DOWN {streak}/{}", s.opts.rise.max(1)).into()
        }
        _ => own.into(),
    }
}

fn server_status_own(s: &ServerRt) -> &'static str {
    let agent = s.agent.enabled();
    match s.admin_state() {
        ADMIN_MAINT => "MAINT",
        _ if s.rmaint.load(Ordering::Relaxed) => "MAINT (resolution)",
        ADMIN_DRAIN if s.up.load(Ordering::Relaxed) && agent => "DRAIN (agent)",
        ADMIN_DRAIN if s.up.load(Ordering::Relaxed) => "DRAIN",
        _ if !s.up.load(Ordering::Relaxed) && agent && !s.agent.healthy.load(Ordering::Relaxed) => {
            "DOWN (agent)"
        }
        _ if !s.up.load(Ordering::Relaxed) => "DOWN",
        _ if !s.checked() => "no check",
        _ => "UP",
    }
}

/// Ends the sessions whose exchange is with one of the servers named by
/// uid, for a reason (the letter their log gives): installed at start by
/// the layer that keeps the sessions, which the backend does not know.
pub type SessionKiller = Box<dyn Fn(&[u64], u8) + Send + Sync>;

static KILLER: OnceLock<SessionKiller> = OnceLock::new();

/// Its server went DOWN with `on-marked-down shutdown-sessions`: `D`.
pub const KILL_DOWN: u8 = b'D';
/// An active server came UP with `on-marked-up shutdown-backup-sessions`
/// while it was on a backup server: `U`.
pub const KILL_UP: u8 = b'U';

/// Installs the [`SessionKiller`] (once, at start).
pub fn set_session_killer(k: SessionKiller) {
    let _ = KILLER.set(k);
}

/// A server stopped serving (DOWN by its checks, its agent or the server
/// it tracks, or into maintenance while it was not DOWN): with
/// `on-marked-down shutdown-sessions` its sessions are killed, logged
/// `D` (HAProxy's srv_shutdown_streams with SF_ERR_DOWN).
pub fn marked_down(s: &ServerRt) {
    if s.opts.on_marked_down {
        if let Some(k) = KILLER.get() {
            k(&[s.uid], KILL_DOWN);
        }
    }
}

/// A server came UP (or left maintenance): an active one with
/// `on-marked-up shutdown-backup-sessions` that may take traffic (not
/// draining, a weight) kills the sessions of its backend's backup
/// servers, logged `U`.
pub fn marked_up(farm: &Farm, s: &ServerRt) {
    if !s.opts.on_marked_up || s.opts.backup || !s.usable() {
        return;
    }
    let backups: Vec<u64> = farm
        .servers
        .iter()
        .filter(|x| x.opts.backup)
        .map(|x| x.uid)
        .collect();
    if let Some(k) = KILLER.get() {
        k(&backups, KILL_UP);
    }
}

/// Sets a server's administrative state (`set server ... state`,
/// `enable|disable server`, an agent's `ready|drain|maint`), with
/// HAProxy's log lines on entering and leaving maintenance.
pub fn set_admin(farm: &Farm, s: &ServerRt, state: u8) -> Result<(), String> {
    if state == ADMIN_READY && !s.has_addr() && s.opts.resolvers.is_none() {
        return Err(format!(
            "Server {}/{} has no address: it stays in maintenance.",
            farm.name, s.name
        ));
    }
    let was = s.usable();
    let in_force = s.admin_state();
    let was_maint = s.in_maint();
    let before = s.admin.swap(state, Ordering::Relaxed);
    // Its health first: the trackers that leave maintenance with it
    // read it.
    maint_checks(farm, s, was_maint);
    if was != s.usable() {
        s.ext.changed(s.usable());
        farm.note_state();
    }
    if s.admin_state() != in_force {
        propagate_admin(s);
        admin_moved(farm, s, in_force);
    }
    // HAProxy's alert on entering maintenance and notice on leaving it.
    if state == ADMIN_MAINT && before != ADMIN_MAINT {
        let (act, bck) = farm.usable_counts();
        check::log_event(
            farm,
            format!(
                "Server {}/{} is going DOWN for maintenance. {act} active and {bck} backup servers left. {} sessions active, 0 requeued, {} remaining in queue.",
                farm.name,
                s.name,
                s.cur.load(Ordering::Relaxed),
                farm.queued()
            ),
        );
        check::log_if_none_left(farm);
    } else if before == ADMIN_MAINT && state != ADMIN_MAINT {
        // HAProxy names the state it leaves in: DOWN while its agent or
        // the server it tracks says so.
        check::log_event(
            farm,
            format!(
                "Server {}/{} is {}/READY (leaving forced maintenance).",
                farm.name,
                s.name,
                if s.up.load(Ordering::Relaxed) {
                    "UP"
                } else {
                    "DOWN"
                }
            ),
        );
    }
    if state == ADMIN_READY {
        farm.kick_backend_queue();
    } else {
        farm.redispatch_queue_of(s);
    }
    Ok(())
}

/// A socket address that threads read without a lock while a rare writer
/// (a DNS answer, the CLI) changes it: a sequence lock over atomics. A
/// reader retries only if it raced a write.
pub struct AtomicAddr {
    seq: AtomicU64,
    /// IPv6 address bits, or the IPv4 address in `lo`.
    hi: AtomicU64,
    lo: AtomicU64,
    /// bit 0: present; bit 1: IPv6; bits 16..32: port.
    meta: AtomicU64,
    writer: Mutex<()>,
}

impl AtomicAddr {
    pub fn new(a: Option<SocketAddr>) -> AtomicAddr {
        let x = AtomicAddr {
            seq: AtomicU64::new(0),
            hi: AtomicU64::new(0),
            lo: AtomicU64::new(0),
            meta: AtomicU64::new(0),
            writer: Mutex::new(()),
        };
        x.set(a);
        x
    }

    pub fn get(&self) -> Option<SocketAddr> {
        use std::sync::atomic::fence;
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let (hi, lo, meta) = (
                self.hi.load(Ordering::Relaxed),
                self.lo.load(Ordering::Relaxed),
                self.meta.load(Ordering::Relaxed),
            );
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != s1 {
                continue;
            }
            if meta & 1 == 0 {
                return None;
            }
            let port = (meta >> 16) as u16;
            let ip = if meta & 2 != 0 {
                std::net::IpAddr::V6(std::net::Ipv6Addr::from(
                    (u128::from(hi) << 64) | u128::from(lo),
                ))
            } else {
                std::net::IpAddr::V4(std::net::Ipv4Addr::from(lo as u32))
            };
            return Some(SocketAddr::new(ip, port));
        }
    }

    pub fn set(&self, a: Option<SocketAddr>) {
        use std::sync::atomic::fence;
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let (hi, lo, meta) = match a {
            None => (0, 0, 0),
            Some(SocketAddr::V4(v)) => (
                0,
                u64::from(u32::from(*v.ip())),
                1 | (u64::from(v.port()) << 16),
            ),
            Some(SocketAddr::V6(v)) => {
                let b = u128::from(*v.ip());
                ((b >> 64) as u64, b as u64, 3 | (u64::from(v.port()) << 16))
            }
        };
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.hi.store(hi, Ordering::Relaxed);
        self.lo.store(lo, Ordering::Relaxed);
        self.meta.store(meta, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }
}

/// `enable|disable health|agent BACKEND/NAME` (the CLI's and the stats
/// page's admin action).
pub fn check_switch(farm: &Farm, s: &ServerRt, on: bool, agent: bool) -> Result<String, String> {
    if agent {
        // HAProxy: enabling needs `agent-check`; disabling never fails.
        // Neither changes the server's state by itself.
        if on && !s.agent.configured {
            return Err("Agent was not configured on this server, cannot enable.\n".into());
        }
        s.agent.on.store(on, Ordering::Relaxed);
        return Ok(String::new());
    }
    if on && !s.opts.check {
        return Err("Health check was not configured on this server, cannot enable.\n".into());
    }
    s.check_on.store(on, Ordering::Relaxed);
    let agent_ok = !s.agent.enabled() || s.agent.healthy.load(Ordering::Relaxed);
    if !on && agent_ok && !s.up.swap(true, Ordering::AcqRel) {
        // Unchecked: considered UP unless the agent forces it down
        // (HAProxy's `disable health`).
        s.ext.changed(s.usable());
        farm.note_state();
        farm.kick_backend_queue();
    }
    Ok(String::new())
}

/// A backend's servers as the `stick` rules look them up.
impl crate::stick::StickFarm for ServerList {
    fn find(&self, n: crate::stick::Named<'_>) -> Option<usize> {
        use crate::stick::Named;
        // Servers in service, first in configuration order (HAProxy's
        // name and address trees keep equal keys in insertion order).
        let mut it = self.iter();
        let s = match n {
            Named::Id(id) => it.find(|s| u64::from(s.id) == id),
            Named::Name(name) => it.find(|s| s.name == name),
            Named::Addr(a) => it.find(|s| s.stick_addr().as_deref() == Some(a)),
        };
        s.map(|s| s.idx)
    }

    fn usable(&self, i: usize) -> bool {
        self.get(i).is_some_and(|s| s.persist_ok())
    }
}

impl ServerRt {
    /// The address as HAProxy keys it for `srvkey addr`: `IP:PORT`, with
    /// `+0` as the port of a server without one of its own, `abns@NAME`
    /// for an abstract socket; None without an address.
    pub fn stick_addr(&self) -> Option<String> {
        if let Some(n) = &self.opts.abns {
            return Some(format!("abns@{n}"));
        }
        let a = self.addr()?;
        Some(if self.map_ports.load(Ordering::Relaxed) {
            format!("{}:+0", a.ip())
        } else {
            format!("{}:{}", a.ip(), self.port.load(Ordering::Relaxed))
        })
    }
}

impl crate::stick::StickServer for ServerRt {
    fn id(&self) -> u32 {
        self.id
    }

    fn key(&self, k: crate::table::SrvKey) -> Option<String> {
        match k {
            crate::table::SrvKey::Name => Some(self.name.clone()),
            crate::table::SrvKey::Addr => self.stick_addr(),
        }
    }
}

impl ServerRt {
    /// The administrative state in force: its own or the one inherited
    /// from the server it tracks, the stronger (maintenance over drain).
    pub fn admin_state(&self) -> u8 {
        self.admin
            .load(Ordering::Relaxed)
            .max(self.iadmin.load(Ordering::Relaxed))
    }

    /// Whether the state comes from the tracked server only (HAProxy's
    /// "via"): the inherited state is stronger than its own.
    pub fn admin_via(&self) -> Option<&Arc<ServerRt>> {
        let own = self.admin.load(Ordering::Relaxed);
        (self.iadmin.load(Ordering::Relaxed) > own)
            .then(|| self.tracked.get())
            .flatten()
    }

    /// The servers tracking this one (those still there).
    pub fn tracker_list(&self) -> Vec<(Arc<Farm>, Arc<ServerRt>)> {
        let l = self.trackers.lock().unwrap_or_else(|p| p.into_inner());
        l.iter()
            .filter_map(|(f, s)| Some((f.upgrade()?, s.upgrade()?)))
            .collect()
    }

    /// Whether it is in maintenance: forced, inherited from the server it
    /// tracks, or for want of an address (HAProxy's `SRV_ADMF_MAINT`).
    pub fn in_maint(&self) -> bool {
        self.admin_state() == ADMIN_MAINT || self.rmaint.load(Ordering::Relaxed)
    }

    /// Whether its health check is paused: enabled, but the server is in
    /// maintenance (HAProxy's `CHK_ST_PAUSED`: no check runs, the stats
    /// show none of its fields).
    pub fn check_paused(&self) -> bool {
        self.opts.check && self.check_on.load(Ordering::Relaxed) && self.in_maint()
    }

    /// Whether it or the server at the end of its `track` chain runs
    /// health checks.
    pub fn checked(&self) -> bool {
        self.opts.check || self.tracked.get().is_some_and(|t| t.checked())
    }
}

/// Makes `s` (of `farm`) track `t`: it takes its health, maintenance and
/// drain from now on, starting with the current ones.
pub fn link_track(farm: &Arc<Farm>, s: &Arc<ServerRt>, t: &Arc<ServerRt>) {
    if s.tracked.set(Arc::clone(t)).is_err() {
        return;
    }
    t.trackers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((Arc::downgrade(farm), Arc::downgrade(s)));
}

/// The administrative state in force of `s` changed from `before`: into
/// maintenance while not DOWN ends its sessions, out of it may end the
/// backup servers' (`on-marked-down`, `on-marked-up`).
fn admin_moved(farm: &Farm, s: &ServerRt, before: u8) {
    let now = s.admin_state();
    if now == ADMIN_MAINT && before != ADMIN_MAINT && s.up.load(Ordering::Relaxed) {
        marked_down(s);
    } else if before == ADMIN_MAINT && now != ADMIN_MAINT {
        marked_up(farm, s);
    }
}

/// The maintenance of `s` (of `farm`) began or ended (`was`: before), as
/// HAProxy's srv_update_status: its health check pauses at health 0 (the
/// server stops; checks change nothing meanwhile, see
/// [`check::refresh_up`]) and resumes at health `rise`, one failure from
/// DOWN (`UP 1/3`), its next check at its usual date. Leaving, the
/// server's state is its views' again, without a line of its own (the
/// line leaving maintenance names it).
pub(crate) fn maint_checks(farm: &Farm, s: &ServerRt, was: bool) {
    let now = s.in_maint();
    if was == now {
        return;
    }
    if s.opts.check && s.check_on.load(Ordering::Relaxed) {
        let (ok, streak) = match now {
            true => (false, 0),
            false => (true, s.opts.fall.max(1) - 1),
        };
        s.check_ok.store(ok, Ordering::Relaxed);
        s.check_streak.store(streak, Ordering::Relaxed);
    }
    if !now {
        check::settle_up(farm, s);
    }
}

/// Passes a tracked server's administrative state in force on to its
/// trackers, down the chains (HAProxy's `srv_set_admin_flag` on the
/// inherited flags), with their state changes noted and logged.
pub fn propagate_admin(s: &ServerRt) {
    let st = s.admin_state();
    for (f, t) in s.tracker_list() {
        let was = t.usable();
        let before = t.admin_state();
        let was_maint = t.in_maint();
        t.iadmin.store(st, Ordering::Relaxed);
        if t.admin_state() == before {
            continue;
        }
        maint_checks(&f, &t, was_maint);
        if was != t.usable() {
            t.ext.changed(t.usable());
            f.note_state();
        }
        admin_moved(&f, &t, before);
        if t.admin_state() == ADMIN_MAINT {
            let (act, bck) = f.usable_counts();
            check::log_event(
                &f,
                format!(
                    "Server {}/{} is going DOWN for maintenance (via {}/{}). {act} active and {bck} backup servers left. {} sessions active, 0 requeued, {} remaining in queue.",
                    f.name,
                    t.name,
                    s.backend,
                    s.name,
                    t.cur.load(Ordering::Relaxed),
                    f.queued()
                ),
            );
            check::log_if_none_left(&f);
            f.redispatch_queue_of(&t);
        } else if before == ADMIN_MAINT {
            check::log_event(
                &f,
                format!(
                    "Server {}/{} is UP/READY (leaving maintenance via {}/{}).",
                    f.name, t.name, s.backend, s.name
                ),
            );
            f.kick_backend_queue();
        }
        propagate_admin(&t);
    }
}

/// The starting state of the servers tracking `s`, down the chains:
/// its maintenance or drain, and its health.
pub fn start_trackers(s: &ServerRt) {
    for (_, t) in s.tracker_list() {
        t.iadmin.store(s.admin_state(), Ordering::Relaxed);
        if !s.up.load(Ordering::Relaxed) {
            t.up.store(false, Ordering::Relaxed);
        }
        start_trackers(&t);
    }
}
