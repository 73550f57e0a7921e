//! `resolvers` sections at run time: server names resolved while ebb runs.
//!
//! Each section is one tasklet on thread 0 with its own non-blocking UDP
//! socket (one per address family its UDP nameservers use), and for each
//! `tcp@` nameserver one TCP connection (RFC 7766: each message preceded by
//! its length in two bytes, queries pipelined, opened when a query is to be
//! sent, closed after [`TCP_IDLE`] with no query under way, opened again
//! at the next query after the server closed it), all registered with that
//! thread's poller like any other socket; retries and timeouts are the
//! tasklet's timer on the wait queue. Nothing blocks: no `getaddrinfo`
//! after start. A message longer than `accepted_payload_size` is dropped
//! and counted `too_big`, over TCP too (HAProxy 2.6's rule).
//!
//! A *resolution* is one name (and for A/AAAA, the family preferred):
//! every server that resolves the same name shares it, as in HAProxy, so
//! that `server-template` slots share one answer. A round sends the query
//! to every nameserver; the first valid answer is applied; when every
//! nameserver answered with an error, the other family is tried (A and
//! AAAA), then the preferred family again, `resolve_retries` queries in
//! all; `timeout retry` without answer costs one query. The next round
//! comes `timeout resolve` after the end of the last one (HAProxy 2.6's
//! period, whatever the status); `hold valid` is how long the last valid
//! answer serves a server that joins the resolution (a reload, `set
//! server fqdn`) without a new query. The tasklet runs at least every `timeout
//! resolve` (HAProxy's period) and resolves at once the names of servers
//! it has not seen before (a reload, `set server fqdn`).
//!
//! Applying an answer (HAProxy's rules):
//! - A/AAAA: each server keeps its address while it is listed, else takes
//!   the first listed one of its preferred family that no other server of
//!   the same name holds (`resolve-opts allow-dup-ip` lifts that); no
//!   address left: `MAINT (resolution)`. An address missing from answers
//!   for longer than `hold obsolete` is forgotten.
//! - SRV: `server-template` slots keep the record they had while it is
//!   listed; new records fill free slots; a slot gets the record's port,
//!   its weight (`weight / 256 + 1`, unless `resolve-opts ignore-weight`)
//!   and the address the additional section gives for its target; a slot
//!   without a record is in `MAINT (resolution)`.
//! - A failure (NX, refused, timeout, other) takes the servers down only
//!   when no valid answer came within that status' `hold` period.
//!
//! Streams ask for names too (`do-resolve`, [`lookup`]): a name asked for
//! joins the resolution of that name, or makes one that lives while
//! streams wait for it.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::{ticks, Ctx, Reasons, Status, TaskletId};

use crate::backend::{Farm, ServerRt};
use crate::config::Resolvers as Cfg;
use crate::dns::{self, Failure, QType, SrvTarget};

pub mod lookup;
pub use lookup::{ask, dn_name, Asked, Lookup};

/// One nameserver's counters, HAProxy's `show resolvers` names.
#[derive(Default)]
pub struct NsCounters {
    pub sent: AtomicU64,
    pub snd_error: AtomicU64,
    pub valid: AtomicU64,
    pub update: AtomicU64,
    pub cname: AtomicU64,
    pub cname_error: AtomicU64,
    pub any_err: AtomicU64,
    pub nx: AtomicU64,
    pub timeout: AtomicU64,
    pub refused: AtomicU64,
    pub other: AtomicU64,
    pub invalid: AtomicU64,
    pub too_big: AtomicU64,
    pub truncated: AtomicU64,
    pub outdated: AtomicU64,
}

impl NsCounters {
    /// (name, value) in HAProxy's order.
    pub fn fields(&self) -> [(&'static str, u64); 15] {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("sent", l(&self.sent)),
            ("snd_error", l(&self.snd_error)),
            ("valid", l(&self.valid)),
            ("update", l(&self.update)),
            ("cname", l(&self.cname)),
            ("cname_error", l(&self.cname_error)),
            ("any_err", l(&self.any_err)),
            ("nx", l(&self.nx)),
            ("timeout", l(&self.timeout)),
            ("refused", l(&self.refused)),
            ("other", l(&self.other)),
            ("invalid", l(&self.invalid)),
            ("too_big", l(&self.too_big)),
            ("truncated", l(&self.truncated)),
            ("outdated", l(&self.outdated)),
        ]
    }
}

/// A section as the CLI and metrics see it.
pub struct Section {
    pub cfg: Cfg,
    /// One per nameserver, in `cfg.nameservers` order.
    pub ns: Vec<NsCounters>,
    /// The section's tasklet, woken by [`kick`].
    wake: std::sync::OnceLock<(sched::RuntimeHandle, TaskletId)>,
    /// Names streams asked for, not yet taken by the tasklet.
    asks: Mutex<Vec<Arc<Lookup>>>,
    /// The valid answers of the resolutions under way (see [`lookup`]).
    fresh: Mutex<lookup::Fresh>,
}

/// Wakes every section's tasklet: servers changed (a reload swapped the
/// configuration in, `set server fqdn`), their names are looked at now.
pub fn kick() {
    for s in sections() {
        if let Some((h, id)) = s.wake.get() {
            h.wake_tasklet(*id);
        }
    }
}

static SECTIONS: Mutex<Vec<Arc<Section>>> = Mutex::new(Vec::new());

/// The sections of the running process (`show resolvers`).
pub fn sections() -> Vec<Arc<Section>> {
    SECTIONS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// What a resolution's servers are: every farm of the running
/// configuration (read again at each run: a reload may bring servers).
pub type Farms = Arc<dyn Fn() -> Vec<Arc<Farm>> + Send + Sync>;

/// Where changes are logged.
pub type LogFn = Arc<dyn Fn(&str, String) + Send + Sync>;

/// Starts one tasklet per section on the calling thread (thread 0).
pub fn start(ctx: &mut Ctx, cfgs: &[Cfg], farms: Farms, log: LogFn) -> std::io::Result<()> {
    let mut all = Vec::new();
    for cfg in cfgs {
        let sec = Arc::new(Section {
            ns: cfg
                .nameservers
                .iter()
                .map(|_| NsCounters::default())
                .collect(),
            cfg: cfg.clone(),
            wake: std::sync::OnceLock::new(),
            asks: Mutex::new(Vec::new()),
            fresh: Mutex::new(HashMap::new()),
        });
        all.push(Arc::clone(&sec));
        let mut socks = Vec::new();
        for v6 in [false, true] {
            if cfg
                .nameservers
                .iter()
                .any(|n| !n.tcp && n.addr.is_ipv6() == v6)
            {
                let bind = SocketAddr::new(dns::unspecified(v6), 0);
                let s = UdpSocket::bind(bind)?;
                s.set_nonblocking(true)?;
                socks.push(s);
            }
        }
        let fds: Vec<_> = socks.iter().map(|s| s.as_raw_fd()).collect();
        let seed = (Instant::now().elapsed().as_nanos() as u64)
            ^ u64::from(crate::sys::pid())
            ^ (std::ptr::addr_of!(*sec) as u64);
        let r = Runner {
            sec: Arc::clone(&sec),
            socks,
            streams: cfg.nameservers.iter().map(|_| TcpNs::default()).collect(),
            farms: Arc::clone(&farms),
            log: Arc::clone(&log),
            res: HashMap::new(),
            targets: HashMap::new(),
            known: std::collections::HashSet::new(),
            waiting: HashMap::new(),
            rng: seed | 1,
            buf: vec![0u8; 65535],
        };
        let id = ctx.new_tasklet_obj("resolvers", r);
        let _ = sec.wake.set((ctx.handle(), id));
        for fd in fds {
            if let Err(e) = ctx.register_fd(fd, id, false) {
                ctx.kill_tasklet(id);
                return Err(e);
            }
        }
        ctx.on_stop_tasklet(id);
        ctx.tasklet_wakeup(id);
    }
    *SECTIONS.lock().unwrap_or_else(|p| p.into_inner()) = all;
    Ok(())
}

/// Which resolution a server belongs to.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Key {
    name: String,
    srv: bool,
    prefer_v4: bool,
}

/// A query under way.
struct Pending {
    id: u16,
    qtype: QType,
    sent: Instant,
    /// Queries left, this one included.
    tries: u32,
    /// Nameservers that answered this query, and the last error among them.
    answered: Vec<bool>,
    last_error: Option<Failure>,
    /// The other family was tried in this round.
    fell_back: bool,
}

/// A valid answer kept: addresses with TTLs, SRV records, who gave it.
type Cached = (Vec<(IpAddr, u32)>, Vec<SrvTarget>, String);

struct Resolution {
    pending: Option<Pending>,
    /// End of the last round, and whether it was valid.
    last_run: Option<(Instant, bool)>,
    last_valid: Option<Instant>,
    /// A/AAAA addresses known, with when they were last listed.
    addrs: Vec<(IpAddr, Instant)>,
    /// SRV slots (one per template server, in order).
    slots: Vec<Option<dns::Slot>>,
    last_srv: Option<Instant>,
    /// The last valid answer (addresses, SRV records, who gave it): a new
    /// server takes it while it is within `hold valid`.
    cached: Option<Cached>,
}

/// How long a TCP nameserver's connection stays open with no query under
/// way (HAProxy closes idle DNS sessions in batches every 5 s).
pub const TCP_IDLE: Duration = Duration::from_secs(5);

/// A `tcp@` nameserver's connection.
#[derive(Default)]
struct TcpNs {
    sock: Option<TcpStream>,
    /// Framed queries not written yet; `pos` bytes of the first are.
    out: VecDeque<Vec<u8>>,
    pos: usize,
    /// Bytes read, up to a whole framed message.
    inp: Vec<u8>,
    /// Last query queued or answer read.
    last: Option<Instant>,
}

struct Runner {
    sec: Arc<Section>,
    socks: Vec<UdpSocket>,
    /// One per nameserver, in `cfg.nameservers` order (used for `tcp@`
    /// ones only).
    streams: Vec<TcpNs>,
    farms: Farms,
    log: LogFn,
    res: HashMap<Key, Resolution>,
    /// SRV slots whose target came without an address in the additional
    /// section: resolved on their own (server uid, target).
    targets: HashMap<u64, String>,
    /// Servers seen at the last run: a new one (a reload, `set server
    /// fqdn`) has its name resolved at once, not after `hold valid`.
    known: std::collections::HashSet<u64>,
    /// Streams waiting for a resolution, each with when it asked.
    waiting: HashMap<Key, Vec<(Instant, Arc<Lookup>)>>,
    rng: u64,
    buf: Vec<u8>,
}

/// The servers of one resolution, with their farms.
type Members = Vec<(Arc<Farm>, Arc<ServerRt>)>;

impl sched::TaskletFn for Runner {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, _why: Reasons) -> Status {
        if ctx.stopping() {
            // Nothing more comes: the streams waiting go on without.
            for (_, l) in self.waiting.drain().flat_map(|(_, v)| v) {
                l.finish(None);
            }
            return Status::Done;
        }
        let now = Instant::now();
        self.take_asks(now);
        let mut members = self.members();
        for k in self.waiting.keys() {
            members.entry(k.clone()).or_default();
        }
        // Resolutions no server nor stream needs any more go.
        self.res.retain(|k, _| members.contains_key(k));
        let mut seen = std::collections::HashSet::new();
        let hold_valid = self.sec.cfg.holds.valid;
        for (k, m) in &members {
            let fresh = m.iter().any(|(_, s)| !self.known.contains(&s.uid));
            seen.extend(m.iter().map(|(_, s)| s.uid));
            let Some(r) = self.res.get_mut(k).filter(|_| fresh) else {
                continue;
            };
            // HAProxy's trigger: the cached answer while `hold valid`
            // lasts, else a resolution now.
            let cache = r.cached.clone().filter(|_| {
                r.last_valid
                    .is_some_and(|t| now.duration_since(t) <= hold_valid)
            });
            match cache {
                Some((addrs, srv, by)) => {
                    self.apply(k, m, &addrs, &srv, now, &by);
                }
                None if r.pending.is_none() => r.last_run = None,
                None => {}
            }
        }
        self.known = seen;
        self.receive(&members, now);
        self.receive_tcp(ctx, &members, now);
        // At least every `timeout resolve` (HAProxy's resolvers task
        // period): servers a reload or `set server fqdn` brought are seen.
        let mut next = now + self.sec.cfg.timeout_resolve;
        let keys: Vec<Key> = members.keys().cloned().collect();
        for k in keys {
            let at = self.step(&k, &members[&k], now);
            next = next.min(at);
        }
        if let Some(at) = self.flush_tcp(ctx, me, now) {
            next = next.min(at);
        }
        self.deliver(&members);
        self.publish();
        let wait = next.saturating_duration_since(Instant::now());
        let ms = wait.as_millis().clamp(1, 3_600_000) as u32;
        ctx.tasklet_set_expire(me, ticks::add(ctx.now(), ms));
        Status::Continue
    }
}

impl Runner {
    /// Takes the names streams asked for: answered from a fresh valid
    /// answer, else waiting for their resolution, started now unless it
    /// runs (HAProxy's `resolv_trigger_resolution`).
    fn take_asks(&mut self, now: Instant) {
        let asks = std::mem::take(&mut *self.sec.asks.lock().unwrap_or_else(|p| p.into_inner()));
        let hold = self.sec.cfg.holds.valid;
        for l in asks {
            let k = Key {
                name: l.name.clone(),
                srv: false,
                prefer_v4: l.prefer_v4,
            };
            if let Some(r) = self.res.get_mut(&k) {
                let valid = r.last_valid.is_some_and(|t| now.duration_since(t) <= hold);
                if let Some((addrs, _, _)) = r.cached.as_ref().filter(|_| valid) {
                    l.finish(dns::preferred(addrs, !k.prefer_v4));
                    continue;
                }
                if r.pending.is_none() {
                    r.last_run = None;
                }
            }
            self.waiting.entry(k).or_default().push((now, l));
        }
    }

    /// Gives the streams whose resolution ended since they asked its
    /// answer: the address of the preferred family (else the other), or
    /// none after a failure. A resolution that served streams only ends
    /// with the last of them (HAProxy frees it then: a later stream
    /// asks again).
    fn deliver(&mut self, members: &HashMap<Key, Members>) {
        let res = &self.res;
        let mut ended = Vec::new();
        self.waiting.retain(|k, list| {
            let Some(r) = res.get(k).filter(|r| r.pending.is_none()) else {
                return true;
            };
            let Some((done_at, ok)) = r.last_run else {
                return true;
            };
            let addr = match &r.cached {
                Some((addrs, _, _)) if ok => dns::preferred(addrs, !k.prefer_v4),
                _ => None,
            };
            list.retain(|(since, l)| {
                if done_at < *since {
                    return true;
                }
                l.finish(addr);
                false
            });
            if list.is_empty() {
                ended.push(k.clone());
            }
            !list.is_empty()
        });
        for k in ended {
            if members.get(&k).is_none_or(|m| m.is_empty()) {
                self.res.remove(&k);
            }
        }
    }

    /// Publishes the valid answers of the resolutions (see [`lookup`]).
    fn publish(&self) {
        let fresh: lookup::Fresh = self
            .res
            .iter()
            .filter(|(k, _)| !k.srv)
            .filter_map(|(k, r)| {
                let (addrs, _, _) = r.cached.as_ref()?;
                Some((
                    (k.name.clone(), k.prefer_v4),
                    (r.last_valid?, addrs.clone()),
                ))
            })
            .collect();
        *self.sec.fresh.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
    }

    fn members(&self) -> HashMap<Key, Members> {
        let mut m: HashMap<Key, Members> = HashMap::new();
        for f in (self.farms)() {
            for s in &f.servers {
                if s.opts.resolvers.as_deref() != Some(self.sec.cfg.name.as_str()) {
                    continue;
                }
                let Some(name) = s.fqdn.lock().ok().and_then(|g| g.clone()) else {
                    continue;
                };
                let srv = name.starts_with('_');
                let k = Key {
                    name,
                    srv,
                    prefer_v4: s.opts.resolve_prefer_v4 && !srv,
                };
                m.entry(k)
                    .or_default()
                    .push((Arc::clone(&f), Arc::clone(s)));
                if let Some(t) = self.targets.get(&s.uid).filter(|_| srv) {
                    let k = Key {
                        name: t.clone(),
                        srv: false,
                        prefer_v4: s.opts.resolve_prefer_v4,
                    };
                    m.entry(k)
                        .or_default()
                        .push((Arc::clone(&f), Arc::clone(s)));
                }
            }
        }
        m
    }

    fn next_id(&mut self) -> u16 {
        loop {
            // xorshift64
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let id = (self.rng >> 24) as u16;
            if !self
                .res
                .values()
                .any(|r| r.pending.as_ref().is_some_and(|p| p.id == id))
            {
                return id;
            }
        }
    }

    /// Sends the pending query of `k` to every nameserver.
    fn send(&mut self, k: &Key) {
        let Some(p) = self.res.get(k).and_then(|r| r.pending.as_ref()) else {
            return;
        };
        let (id, qtype) = (p.id, p.qtype);
        let Ok(q) = dns::encode_query(id, &k.name, qtype, self.sec.cfg.accepted_payload_size)
        else {
            return;
        };
        let now = Instant::now();
        for (i, ns) in self.sec.cfg.nameservers.iter().enumerate() {
            let c = &self.sec.ns[i];
            if ns.tcp {
                // Written by `flush_tcp` at the end of this run.
                let t = &mut self.streams[i];
                let Ok(len) = u16::try_from(q.len()) else {
                    c.snd_error.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let mut frame = Vec::with_capacity(2 + q.len());
                frame.extend_from_slice(&len.to_be_bytes());
                frame.extend_from_slice(&q);
                t.out.push_back(frame);
                t.last = Some(now);
                c.sent.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let a = &ns.addr;
            let sock = self
                .socks
                .iter()
                .find(|s| s.local_addr().is_ok_and(|l| l.is_ipv6() == a.is_ipv6()));
            match sock.map(|s| s.send_to(&q, a)) {
                Some(Ok(_)) => c.sent.fetch_add(1, Ordering::Relaxed),
                _ => c.snd_error.fetch_add(1, Ordering::Relaxed),
            };
        }
    }

    /// Starts a query of `qtype` with `tries` left.
    fn query(&mut self, k: &Key, qtype: QType, tries: u32, fell_back: bool, now: Instant) {
        let id = self.next_id();
        let n = self.sec.cfg.nameservers.len();
        if let Some(r) = self.res.get_mut(k) {
            r.pending = Some(Pending {
                id,
                qtype,
                sent: now,
                tries,
                answered: vec![false; n],
                last_error: None,
                fell_back,
            });
        }
        self.send(k);
    }

    fn preferred(k: &Key) -> QType {
        if k.srv {
            QType::Srv
        } else if k.prefer_v4 {
            QType::A
        } else {
            QType::Aaaa
        }
    }

    /// Starts rounds that are due, times out queries; returns when this
    /// resolution next needs the tasklet.
    fn step(&mut self, k: &Key, members: &Members, now: Instant) -> Instant {
        let cfg = &self.sec.cfg;
        let (retry, resolve) = (cfg.timeout_retry, cfg.timeout_resolve);
        let r = self.res.entry(k.clone()).or_insert_with(|| Resolution {
            pending: None,
            last_run: None,
            last_valid: None,
            addrs: Vec::new(),
            slots: Vec::new(),
            last_srv: None,
            cached: None,
        });
        match &mut r.pending {
            Some(p) => {
                let due = p.sent + retry;
                if now < due {
                    return due;
                }
                // No valid answer within `timeout retry`.
                for (i, a) in p.answered.iter().enumerate() {
                    if !a {
                        self.sec.ns[i].timeout.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let (tries, qtype, err) = (p.tries, p.qtype, p.last_error);
                if tries > 1 {
                    self.query(k, qtype, tries - 1, false, now);
                    return now + retry;
                }
                let f = err.unwrap_or(Failure::Timeout);
                self.fail(k, members, f, now);
                now + resolve
            }
            None => {
                // HAProxy 2.6 resolves a server's name every `timeout
                // resolve`, whatever the last status.
                let due = r.last_run.map_or(now, |(t, _)| t + resolve);
                if now < due {
                    return due;
                }
                let tries = self.sec.cfg.resolve_retries.max(1);
                self.query(k, Self::preferred(k), tries, false, now);
                now + retry
            }
        }
    }

    /// Reads every datagram waiting.
    fn receive(&mut self, members: &HashMap<Key, Members>, now: Instant) {
        for si in 0..self.socks.len() {
            while let Ok((n, from)) = self.socks[si].recv_from(&mut self.buf) {
                let Some(ns) = self
                    .sec
                    .cfg
                    .nameservers
                    .iter()
                    .position(|n| !n.tcp && n.addr == from)
                else {
                    continue; // not from one of our nameservers
                };
                let msg = self.buf[..n].to_vec();
                self.answer(ns, &msg, members, now);
            }
        }
    }

    /// Reads what the TCP nameservers sent and answers each whole message.
    fn receive_tcp(&mut self, ctx: &mut Ctx, members: &HashMap<Key, Members>, now: Instant) {
        for i in 0..self.streams.len() {
            let mut closed = false;
            let t = &mut self.streams[i];
            if let Some(sock) = t.sock.as_mut() {
                loop {
                    match sock.read(&mut self.buf) {
                        Ok(0) => {
                            closed = true;
                            break;
                        }
                        // A message is at most 65537 bytes with its length:
                        // a server that sends more without our reading it
                        // is cut off.
                        Ok(n) if t.inp.len() + n > 4 * 65537 => {
                            closed = true;
                            break;
                        }
                        Ok(n) => t.inp.extend_from_slice(&self.buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            closed = true;
                            break;
                        }
                    }
                }
            }
            loop {
                let t = &mut self.streams[i];
                let (Some(&a), Some(&b)) = (t.inp.first(), t.inp.get(1)) else {
                    break;
                };
                let len = usize::from(u16::from_be_bytes([a, b]));
                if t.inp.len() < 2 + len {
                    break;
                }
                let msg: Vec<u8> = t.inp.drain(..2 + len).skip(2).collect();
                t.last = Some(now);
                self.answer(i, &msg, members, now);
            }
            if closed {
                self.close_tcp(ctx, i);
            }
        }
    }

    /// Drops a TCP nameserver's connection: its queries under way are lost
    /// (they time out as over UDP); the next query opens a new one.
    fn close_tcp(&mut self, ctx: &mut Ctx, i: usize) {
        let t = &mut self.streams[i];
        if let Some(s) = t.sock.take() {
            let _ = ctx.deregister_fd(s.as_raw_fd());
        }
        // Queries that never (wholly) left: a send error each.
        let unsent = t.out.len() as u64;
        t.out.clear();
        t.pos = 0;
        t.inp.clear();
        self.sec.ns[i]
            .snd_error
            .fetch_add(unsent, Ordering::Relaxed);
    }

    /// Connects the TCP nameservers that have queries to send, writes what
    /// the sockets take, closes idle connections; returns when an idle
    /// connection is due to close.
    fn flush_tcp(&mut self, ctx: &mut Ctx, me: TaskletId, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for i in 0..self.streams.len() {
            let addr = self.sec.cfg.nameservers[i].addr;
            let t = &mut self.streams[i];
            if t.sock.is_none() && !t.out.is_empty() {
                match crate::backend::connect_nb(addr) {
                    Ok(s) if ctx.register_fd(s.as_raw_fd(), me, true).is_ok() => t.sock = Some(s),
                    _ => {
                        self.close_tcp(ctx, i);
                        continue;
                    }
                }
            }
            let t = &mut self.streams[i];
            let Some(sock) = t.sock.as_mut() else {
                continue;
            };
            let mut failed = false;
            while let Some(f) = t.out.front() {
                match sock.write(&f[t.pos..]) {
                    Ok(0) => {
                        failed = true;
                        break;
                    }
                    Ok(n) => {
                        t.pos += n;
                        if t.pos == f.len() {
                            t.out.pop_front();
                            t.pos = 0;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            if failed {
                self.close_tcp(ctx, i);
                continue;
            }
            // Idle: nothing to write, nothing heard for TCP_IDLE (and for
            // longer than `timeout retry`: queries still unanswered by then
            // were given up).
            if t.out.is_empty() {
                let idle = TCP_IDLE.max(self.sec.cfg.timeout_retry);
                let due = t.last.map_or(now, |l| l + idle);
                if now >= due {
                    self.close_tcp(ctx, i);
                } else {
                    next = Some(next.map_or(due, |n| n.min(due)));
                }
            }
        }
        next
    }

    fn answer(&mut self, ns: usize, msg: &[u8], members: &HashMap<Key, Members>, now: Instant) {
        let sec = Arc::clone(&self.sec);
        let c = &sec.ns[ns];
        if msg.len() > usize::from(sec.cfg.accepted_payload_size) {
            c.too_big.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if msg.len() < 2 {
            c.invalid.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let id = u16::from_be_bytes([msg[0], msg[1]]);
        let found = self.res.iter().find_map(|(k, r)| {
            r.pending
                .as_ref()
                .filter(|p| p.id == id)
                .map(|p| (k.clone(), p.qtype))
        });
        let Some((k, qtype)) = found else {
            c.outdated.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let resp = match dns::decode_response(msg, id, &k.name, qtype) {
            Ok(r) => r,
            Err(dns::DnsError::NotOurs) => {
                c.outdated.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(_) => {
                c.invalid.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let Some(m) = members.get(&k) else { return };
        let failure: Option<Failure> = resp.status.into();
        match failure {
            None => {
                c.valid.fetch_add(1, Ordering::Relaxed);
                if resp.cname {
                    c.cname.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(r) = self.res.get_mut(&k) {
                    r.pending = None;
                    r.last_run = Some((now, true));
                    r.last_valid = Some(now);
                }
                let by = format!("{}/{}", sec.cfg.name, sec.cfg.nameservers[ns].name);
                if let Some(r) = self.res.get_mut(&k) {
                    r.cached = Some((resp.addrs.clone(), resp.srv.clone(), by.clone()));
                }
                if self.apply(&k, m, &resp.addrs, &resp.srv, now, &by) {
                    c.update.fetch_add(1, Ordering::Relaxed);
                }
            }
            Some(f) => {
                // One counter per answer, HAProxy 2.6's, in its order of
                // checks.
                let ctr = match f {
                    Failure::Nx => &c.nx,
                    Failure::Refused => &c.refused,
                    _ if resp.no_answer => &c.any_err,
                    _ if resp.truncated => &c.truncated,
                    // An alias that leads to no record of the type asked.
                    _ if resp.cname => &c.cname_error,
                    _ => &c.other,
                };
                ctr.fetch_add(1, Ordering::Relaxed);
                let Some(p) = self.res.get_mut(&k).and_then(|r| r.pending.as_mut()) else {
                    return;
                };
                p.answered[ns] = true;
                p.last_error = Some(f);
                if !p.answered.iter().all(|a| *a) {
                    return; // another nameserver may still answer well
                }
                let (tries, fell_back, qt) = (p.tries, p.fell_back, p.qtype);
                match qt.fallback() {
                    Some(other) if !fell_back && qt == Self::preferred(&k) => {
                        self.query(&k, other, tries, true, now);
                    }
                    _ if tries > 1 => self.query(&k, Self::preferred(&k), tries - 1, false, now),
                    _ => self.fail(&k, m, f, now),
                }
            }
        }
    }

    /// A round ended without a valid answer.
    fn fail(&mut self, k: &Key, members: &Members, f: Failure, now: Instant) {
        let holds = self.sec.cfg.holds;
        let Some(r) = self.res.get_mut(k) else { return };
        r.pending = None;
        r.last_run = Some((now, false));
        let since = r.last_valid.map(|t| now.duration_since(t));
        if !holds.takes_down(f, since) {
            return;
        }
        let why = match f {
            Failure::Nx => "DNS NX status",
            Failure::Refused => "DNS refused status",
            Failure::Timeout => "DNS timeout status",
            Failure::Other => "unspecified DNS error",
        };
        for (farm, s) in members {
            self.set_rmaint(farm, s, true, why);
        }
    }

    /// Puts a server into or out of resolution maintenance (its address
    /// is forgotten meanwhile, as HAProxy does).
    fn set_rmaint(&self, farm: &Farm, s: &ServerRt, on: bool, why: &str) {
        let was = s.usable();
        if s.rmaint.swap(on, Ordering::AcqRel) == on {
            return;
        }
        // Its health check pauses and resumes with it.
        let was_maint = !on || s.admin_state() == crate::backend::ADMIN_MAINT;
        crate::backend::maint_checks(farm, s, was_maint);
        if on {
            s.set_addr(None);
        }
        if was != s.usable() {
            s.ext.changed(s.usable());
            farm.note_state();
        }
        if on {
            if was {
                crate::backend::marked_down(s);
            }
            let queued = s.queue.lock().map(|q| q.len()).unwrap_or(0);
            farm.redispatch_queue_of(s);
            let (act, bck) = farm.usable_counts();
            (self.log)(
                &s.backend,
                format!(
                    "{}Server {}/{} is going DOWN for maintenance ({why}). {act} active and {bck} backup servers left. {} sessions active, {queued} requeued, {} remaining in queue.",
                    s.backup_word(),
                    s.backend,
                    s.name,
                    s.cur.load(Ordering::Relaxed),
                    farm.queued()
                ),
            );
        } else {
            farm.kick_backend_queue();
            crate::backend::marked_up(farm, s);
            (self.log)(
                &s.backend,
                format!(
                    "{}Server {}/{} ('{}') is UP/READY (resolves again).",
                    s.backup_word(),
                    s.backend,
                    s.name,
                    s.hostname
                        .lock()
                        .ok()
                        .and_then(|g| g.clone())
                        .or_else(|| s.fqdn.lock().ok().and_then(|g| g.clone()))
                        .unwrap_or_default()
                ),
            );
            (self.log)(
                &s.backend,
                format!(
                    "Server {}/{} administratively READY thanks to valid DNS answer.",
                    s.backend, s.name
                ),
            );
        }
    }

    /// Applies a valid answer; returns whether a server changed.
    fn apply(
        &mut self,
        k: &Key,
        members: &Members,
        addrs: &[(IpAddr, u32)],
        srv: &[SrvTarget],
        now: Instant,
        by: &str,
    ) -> bool {
        let obsolete = self.sec.cfg.holds.obsolete;
        let Some(r) = self.res.get_mut(k) else {
            return false;
        };
        if k.srv {
            let elapsed = r.last_srv.map_or(Duration::ZERO, |t| now.duration_since(t));
            r.last_srv = Some(now);
            r.slots.resize(members.len(), None);
            dns::assign_srv(&mut r.slots, srv, elapsed, obsolete);
            let slots = r.slots.clone();
            let mut changed = false;
            for ((farm, s), slot) in members.iter().zip(slots) {
                let Some(sl) = slot else {
                    self.targets.remove(&s.uid);
                    if let Ok(mut h) = s.hostname.lock() {
                        *h = None;
                    }
                    changed |= s.addr().is_some();
                    self.set_rmaint(farm, s, true, "No IP for server ");
                    continue;
                };
                let rec = &sl.record;
                if let Ok(mut h) = s.hostname.lock() {
                    *h = Some(rec.target.clone());
                }
                if !s.opts.ignore_weight {
                    // HAProxy 2.6's mapping of 0..65535 onto 0..256.
                    let hw = u32::from(rec.weight).div_ceil(256);
                    if s.weight.swap(hw, Ordering::Relaxed) != hw {
                        changed = true;
                    }
                }
                let addrs: Vec<(IpAddr, u32)> = rec.addrs.iter().map(|a| (*a, 0)).collect();
                match dns::preferred(&addrs, !s.opts.resolve_prefer_v4) {
                    Some(ip) => {
                        self.targets.remove(&s.uid);
                        let a = SocketAddr::new(ip, rec.port);
                        changed |= self.move_to(s, Some(a), "DNS additional record");
                        self.set_rmaint(farm, s, false, "");
                    }
                    None => {
                        // The target is resolved on its own (next run).
                        s.port.store(rec.port, Ordering::Relaxed);
                        if let Some(a) = s.addr().filter(|a| a.port() != rec.port) {
                            s.set_addr(Some(SocketAddr::new(a.ip(), rec.port)));
                        }
                        self.targets.insert(s.uid, rec.target.clone());
                    }
                }
            }
            return changed;
        }
        // The cache of addresses: listed now, or listed within `hold
        // obsolete`.
        for (ip, _) in addrs {
            match r.addrs.iter_mut().find(|(a, _)| a == ip) {
                Some(e) => e.1 = now,
                None => r.addrs.push((*ip, now)),
            }
        }
        r.addrs
            .retain(|(_, seen)| now.duration_since(*seen) <= obsolete);
        let known: Vec<IpAddr> = r.addrs.iter().map(|(a, _)| *a).collect();
        let mut changed = false;
        for (farm, s) in members {
            let cur = s.addr();
            let prefer_v6 = !s.opts.resolve_prefer_v4;
            // HAProxy's score: preferred family 8, in a `resolve-net`
            // network 4, not held by another server of the name 2, the
            // current address 1.
            let mut best: Option<(u32, IpAddr)> = None;
            for ip in &known {
                let held = members
                    .iter()
                    .any(|(_, o)| o.uid != s.uid && o.addr().is_some_and(|a| a.ip() == *ip));
                if held && !s.opts.allow_dup_ip {
                    continue;
                }
                let score = 8 * u32::from(ip.is_ipv6() == prefer_v6)
                    + 4 * u32::from(s.opts.resolve_net.iter().any(|n| n.contains(*ip)))
                    + 2 * u32::from(!held)
                    + u32::from(cur.is_some_and(|a| a.ip() == *ip));
                if best.is_none_or(|(b, _)| score > b) {
                    best = Some((score, *ip));
                }
            }
            match best {
                Some((_, ip)) => {
                    let port = cur.map_or(s.port.load(Ordering::Relaxed), |a| a.port());
                    changed |= self.move_to(s, Some(SocketAddr::new(ip, port)), by);
                    self.set_rmaint(farm, s, false, "");
                }
                None => {
                    changed |= s.addr().is_some();
                    self.set_rmaint(farm, s, true, "No IP for server ");
                }
            }
        }
        changed
    }

    /// Sets a server's address; logs a change as HAProxy does.
    fn move_to(&self, s: &ServerRt, a: Option<SocketAddr>, by: &str) -> bool {
        let cur = s.addr();
        if cur == a {
            return false;
        }
        s.set_addr(a);
        if let Some(new) = a {
            let from = cur.map_or_else(|| "(none)".to_string(), |c| c.ip().to_string());
            let port = match cur {
                Some(c) if c.port() != new.port() => {
                    format!(", port from {} to {}", c.port(), new.port())
                }
                _ => String::new(),
            };
            (self.log)(
                &s.backend,
                format!(
                    "{}/{} changed its IP from {from} to {}{port} by {by}.",
                    s.backend,
                    s.name,
                    new.ip()
                ),
            );
        }
        true
    }
}

/// `show resolvers [NAME]`, HAProxy 2.6's layout.
pub fn show(name: Option<&str>) -> Result<String, String> {
    let secs = sections();
    if let Some(n) = name {
        if !secs.iter().any(|s| s.cfg.name == n) {
            return Err("Can't find that resolvers section\n".to_string());
        }
    }
    let mut out = String::new();
    for s in secs.iter().filter(|s| name.is_none_or(|n| s.cfg.name == n)) {
        out.push_str(&format!("Resolvers section {}\n", s.cfg.name));
        for (ns, c) in s.cfg.nameservers.iter().zip(&s.ns) {
            out.push_str(&format!(" nameserver {}:\n", ns.name));
            for (f, v) in c.fields() {
                out.push_str(&format!("  {:<13}{v}\n", format!("{f}:")));
            }
        }
    }
    Ok(out)
}
