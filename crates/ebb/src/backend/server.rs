//! One server at run time ([`ServerRt`]): what a `server` line or `add
//! server` makes, its address (changed by DNS answers and the CLI without
//! a lock for readers: [`AtomicAddr`]), its slots in use, its weight with
//! `slowstart`'s ramp, and whether the balancer may use it
//! ([`ServerRt::usable`]) or a persistent stream may ([`ServerRt::persist_ok`]).
//!
//! Its state is atomics: every thread's streams read it at each pick.
//! How the state changes (maintenance, drain, health, `track`) is in
//! [`super::state`]; its queue is served by [`super::queue`]. Servers are
//! also registered by uid, for readers that keep only a uid.

use std::net::SocketAddr;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering,
};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::{agent, check, extra, Counters, Farm, ServerList, WaitQueue};
use crate::config::ServerOptions;

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
            if opts.disabled || (addr.is_none() && opts.resolvers.is_none() && opts.unix.is_none())
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
        unchecked_health: AtomicU32::new(opts.rise.max(1)),
        agent: agent::AgentRt::new(&opts),
        port: AtomicU16::new(addr.map_or(0, |a| a.port())),
        up: AtomicBool::new(true),
        stopping: AtomicBool::new(false),
        up_since: AtomicInstant::new(
            Instant::now()
                .checked_sub(opts.slowstart.unwrap_or_default())
                .unwrap_or_else(Instant::now),
        ),
        cur: AtomicU32::new(0),
        idle_conns: AtomicU32::new(0),
        idle_safe: AtomicU32::new(0),
        idle_thr: std::array::from_fn(|_| AtomicU32::new(0)),
        safe_thr: std::array::from_fn(|_| AtomicU32::new(0)),
        kill_thr: std::array::from_fn(|_| AtomicU32::new(0)),
        used_conns: AtomicU32::new(0),
        max_used: AtomicU32::new(0),
        est_need: AtomicU32::new(0),
        next_roll: AtomicU32::new(0),
        queue: Mutex::new(WaitQueue::default()),
        waiting: AtomicU32::new(0),
        counters: Counters::default(),
        check_status: Mutex::new(check::Verdict::default()),
        hana: check::Hana::default(),
        ext: extra::SrvExtra::default(),
        tracked: OnceLock::new(),
        trackers: Mutex::new(Vec::new()),
        iadmin: AtomicU8::new(ADMIN_READY),
        dyn_cookie: Mutex::new(
            opts.dyncookie_key
                .as_deref()
                .and_then(|k| dyn_cookie(k, addr)),
        ),
        dyn_key: Mutex::new(opts.dyncookie_key.clone()),
        use_ssl: std::sync::atomic::AtomicI8::new(if opts.ssl {
            1
        } else if opts.no_ssl {
            -1
        } else {
            0
        }),
        tls_ctx: tls,
        pinned: AtomicBool::new(false),
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

/// Administrative state (the CLI's `set server ... state`).
pub const ADMIN_READY: u8 = 0;
pub const ADMIN_DRAIN: u8 = 1;
pub const ADMIN_MAINT: u8 = 2;

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
    pub(super) addr: AtomicAddr,
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
    pub(super) moved: AtomicBool,
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
    /// UP but out of load balancing (HAProxy's `SRV_ST_STOPPING`, shown
    /// `NOLB`): its HTTP check answered 404 under `http-check
    /// disable-on-404`. Persistent traffic still reaches it. A tracker
    /// takes it from the server it tracks ([`ServerRt::nolb`]).
    pub stopping: AtomicBool,
    /// The health check's own view: its health is at `rise` or more.
    pub check_ok: AtomicBool,
    /// The health check's streak: failures while `check_ok`, successes
    /// while not (the stats' `UP 2/3` going down, `DOWN 1/2` going up).
    pub check_streak: AtomicU32,
    /// A server without `check`: HAProxy's health counter (the state
    /// file's `srv_check_health`), `rise` until `set server B/S health`
    /// sets it full (`rise + fall - 1`: up, stopping) or to 0 (down).
    pub unchecked_health: AtomicU32,
    /// The agent check (`agent-check`) and its state.
    pub agent: agent::AgentRt,
    /// When it last came UP (slowstart).
    pub up_since: AtomicInstant,
    /// Slots in use.
    pub cur: AtomicU32,
    /// Idle connections to it, counted against `pool-max-conn`
    /// ([`pool::IdleTicket`]).
    pub(super) idle_conns: AtomicU32,
    /// Those of them that carried more than one request, or are HTTP/2
    /// (HAProxy's safe list, `curr_safe_nb`).
    pub(super) idle_safe: AtomicU32,
    /// Idle connections by thread (HAProxy's `curr_idle_thr`; thread
    /// masks are 64 bits wide, so are the threads).
    pub(super) idle_thr: [AtomicU32; 64],
    /// The safe ones by thread.
    pub(super) safe_thr: [AtomicU32; 64],
    /// Idle connections each thread is to close, given by the purge
    /// timer ([`ServerRt::purge_timer`]).
    pub(super) kill_thr: [AtomicU32; 64],
    /// Connections in use now: an exchange's, a `mode tcp` session's, a
    /// client's private one, an HTTP/2 connection with streams (HAProxy's
    /// `curr_used_conns`: [`pool::UsedConn`]).
    pub(super) used_conns: AtomicU32,
    /// The most in use since the last estimate (`max_used_conns`), and
    /// the estimate of those needed (`est_need_conns`), rolled once per
    /// `pool-purge-delay` ([`ServerRt::purge_timer`]).
    pub(super) max_used: AtomicU32,
    pub(super) est_need: AtomicU32,
    /// When the purge timer ends next (a tick; 0: no timer, the server
    /// has had no idle connection since it last ended).
    pub(super) next_roll: AtomicU32,
    pub queue: Mutex<WaitQueue>,
    /// Streams in `queue`, and those about to join it: counted before
    /// they look for a free slot a last time (see [`Farm::release`]).
    pub(super) waiting: AtomicU32,
    pub counters: Counters,
    /// Last check result, for logs and stats.
    pub check_status: Mutex<check::Verdict>,
    /// `observe`: what its traffic showed, for `on-error`.
    pub hana: check::Hana,
    /// The TLS settings prepared for this server (`ssl`, or `check-ssl`,
    /// or `ssl` before a `no-ssl`), whether its traffic uses them or not:
    /// see [`ServerRt::tls`].
    pub tls_ctx: Option<ServerTls>,
    /// HAProxy's `use_ssl`: 1 when the traffic speaks TLS, 0 when not, -1
    /// after `no-ssl`; `set server B/S ssl on|off` and a state file's
    /// `srv_use_ssl` change it when TLS settings were prepared.
    pub use_ssl: std::sync::atomic::AtomicI8,
    /// What `show stat` reports beyond the above (maxima, check history).
    pub ext: extra::SrvExtra,
    /// `track`: the server whose health this one takes, and the
    /// maintenance or drain it passes on (HAProxy's inherited states).
    pub tracked: OnceLock<Arc<ServerRt>>,
    /// A server added on the CLI tracks it: it can no longer be deleted
    /// (HAProxy's `SRV_F_NON_PURGEABLE`, kept after that server leaves).
    pub pinned: AtomicBool,
    /// The servers tracking this one, with their farms.
    pub trackers: Mutex<Vec<(Weak<Farm>, Weak<ServerRt>)>>,
    /// The administrative state inherited from the tracked server
    /// (HAProxy's IMAINT/IDRAIN): the server is in the stronger of it
    /// and its own.
    pub iadmin: AtomicU8,
    /// `cookie ... dynamic`'s value for a server without `cookie VALUE`,
    /// derived from its address (changed with it).
    pub dyn_cookie: Mutex<Option<String>>,
    /// The backend's `dynamic-cookie-key` while its dynamic cookies are
    /// on, for a server without `cookie VALUE` (None otherwise): a new
    /// address derives [`ServerRt::dyn_cookie`] from it. The CLI's
    /// `enable|disable dynamic-cookie` and `set dynamic-cookie-key`
    /// change both ([`Farm::set_dynamic_cookies`]).
    pub dyn_key: Mutex<Option<String>>,
}

/// `cookie ... dynamic`'s value for a server at `addr` (an IP address:
/// none without one): HAProxy 2.6's srv_set_dyncookie, XXH64 (seed 0) of
/// the key's bytes, the address's (4 or 16, network order) and the port
/// as 4 bytes in network order, written as 16 lower-case hex digits.
pub fn dyn_cookie(key: &str, addr: Option<SocketAddr>) -> Option<String> {
    let a = addr?;
    let mut buf = key.as_bytes().to_vec();
    match a.ip() {
        std::net::IpAddr::V4(v4) => buf.extend_from_slice(&v4.octets()),
        std::net::IpAddr::V6(v6) => buf.extend_from_slice(&v6.octets()),
    }
    buf.extend_from_slice(&u32::from(a.port()).to_be_bytes());
    Some(format!("{:016x}", crate::hash::xxh64(&buf, 0)))
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
    /// Its `crt`, as the certificate store knows it.
    pub cert: Option<Arc<crate::tls::ckch::CertSlot>>,
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
    /// The TLS of the server's traffic, when it speaks TLS now.
    pub fn tls(&self) -> Option<&ServerTls> {
        match self.use_ssl.load(Ordering::Relaxed) {
            1 => self.tls_ctx.as_ref(),
            _ => None,
        }
    }

    /// The address new connections (and health checks) go to now.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr.get()
    }

    /// Whether connections have somewhere to go: an IP address, or an
    /// UNIX socket (`abns@`, `unix@`).
    pub fn has_addr(&self) -> bool {
        self.opts.unix.is_some() || self.addr().is_some()
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
        // HAProxy derives a dynamic cookie again from the new address.
        let key = self
            .dyn_key
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(k) = key.as_deref() {
            *self.dyn_cookie.lock().unwrap_or_else(|p| p.into_inner()) = dyn_cookie(k, a);
        }
    }

    /// The server's persistence cookie value: `cookie VALUE`, else the
    /// one `cookie ... dynamic` derived from its address.
    pub fn cookie(&self) -> Option<std::borrow::Cow<'_, str>> {
        if let Some(c) = self.opts.cookie.as_deref() {
            return Some(std::borrow::Cow::Borrowed(c));
        }
        let g = self.dyn_cookie.lock().unwrap_or_else(|p| p.into_inner());
        g.clone().map(std::borrow::Cow::Owned)
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
            && !self.nolb()
    }

    /// UP but taking no load-balanced traffic (`NOLB`): its own check
    /// said so, or that of the server it tracks, down the chain.
    pub fn nolb(&self) -> bool {
        self.stopping.load(Ordering::Relaxed) || self.tracked.get().is_some_and(|t| t.nolb())
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

    /// HAProxy's effective weight in sixteenths (`cur_eweight` under a
    /// dynamic algorithm: the weight x `BE_WEIGHT_SCALE`). During a
    /// `slowstart` after the server came up it is `weight x w`, `w = (16 t
    /// + S) / S` for `t` whole seconds since and `S` the slowstart in whole
    /// seconds (rounded up), at most 16 (HAProxy 2.6's
    /// `server_recalc_eweight`): the ramp starts at a sixteenth of the
    /// weight and moves once a second, in steps of `16 / S` sixteenths.
    pub fn eweight16(&self) -> u32 {
        let w = self.weight.load(Ordering::Relaxed);
        let Some(ss) = self.opts.slowstart else {
            return w * 16;
        };
        let s = ss.as_millis().div_ceil(1000) as u64;
        let t = self.up_since.elapsed().as_secs();
        if s == 0 || t >= s {
            return w * 16;
        }
        w * ((16 * t + s) / s).min(16) as u32
    }

    /// The effective weight in the weight's units, as HAProxy shows it
    /// (`weight` in `show stat`: the sixteenths rounded up).
    pub fn effective_weight(&self) -> u32 {
        self.eweight16().div_ceil(16)
    }
}

impl std::fmt::Debug for ServerRt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.backend, self.name)
    }
}

pub(super) static NEXT_SERVER_UID: AtomicU64 = AtomicU64::new(1);

/// Every server by uid, for readers that keep only the uid (a session's
/// current server, which the stream sets without a lock).
pub(super) static BY_UID: Mutex<std::collections::BTreeMap<u64, std::sync::Weak<ServerRt>>> =
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

/// An instant that threads read and set without a lock: nanoseconds from
/// a process-wide origin (negative: before it).
pub struct AtomicInstant(AtomicI64);

pub(super) fn origin() -> Instant {
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
        if let Some(u) = &self.opts.unix {
            return Some(u.to_string());
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
