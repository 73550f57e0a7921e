//! Backends with servers: server state, slots (`maxconn`), queues and the
//! hand-over of a freed slot to the first waiting stream.
//!
//! A [`Farm`] is a backend's set of servers. Every thread's streams use it
//! at once, so its state is atomics plus two kinds of short locks:
//!
//! - each server's queue (streams bound to that server: hash algorithms),
//! - the backend's queue (streams that any server may take).
//!
//! **Slots.** A stream that gets a server holds one of its `maxconn` slots
//! until its exchange ends ([`Farm::release`]). A stream that finds every
//! eligible server full waits in a queue, FIFO, bounded by `maxqueue` and
//! `timeout queue`.
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
//! a waiter sleeps on an empty check.
//!
//! Lock order: a server's queue, then the backend's queue.

pub mod check;
pub mod error;
pub mod extra;
pub mod lb;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sched::{RuntimeHandle, TaskletId};

use crate::config::{Balance, HttpCheck, HttpReuse, ServerOptions};

/// Starts a non-blocking connect to `addr` (with `TCP_NODELAY`): the
/// socket is returned while the connect is under way; its outcome is the
/// first write edge (`SO_ERROR`, then a peer address).
pub fn connect_nb(addr: SocketAddr) -> std::io::Result<std::net::TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_nonblocking(true)?;
    s.set_tcp_nodelay(true)?;
    match s.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(s.into())
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
}

/// One `server` line at run time.
pub struct ServerRt {
    /// Index in its farm.
    pub idx: usize,
    /// Unique in the process (idle-pool key).
    pub uid: u64,
    pub name: String,
    pub backend: String,
    /// Resolved at start; `None` when the name did not resolve (the server
    /// then stays in maintenance).
    pub addr: Option<SocketAddr>,
    pub opts: ServerOptions,
    /// Weight in force (`set server ... weight` changes it).
    pub weight: AtomicU32,
    /// `maxconn` in force; 0 = unlimited.
    pub maxconn: AtomicU32,
    pub admin: AtomicU8,
    /// Health: true unless checks said DOWN.
    pub up: AtomicBool,
    /// When it last came UP (slowstart).
    pub up_since: Mutex<Instant>,
    /// Slots in use.
    pub cur: AtomicU32,
    pub queue: Mutex<VecDeque<Arc<Waiter>>>,
    pub counters: Counters,
    /// Last check result, for logs and stats.
    pub check_status: Mutex<String>,
    /// `ssl`: TLS to this server.
    pub tls: Option<ServerTls>,
    /// What `show stat` reports beyond the above (maxima, check history).
    pub ext: extra::SrvExtra,
}

/// TLS settings of a server: the client configuration and the name sent
/// as SNI and checked in its certificate.
pub struct ServerTls {
    pub config: Arc<rustls::ClientConfig>,
    pub sni: String,
}

impl ServerRt {
    /// Whether the load balancer may pick this server now.
    pub fn usable(&self) -> bool {
        self.addr.is_some()
            && self.up.load(Ordering::Relaxed)
            && self.admin.load(Ordering::Relaxed) == ADMIN_READY
            && self.weight.load(Ordering::Relaxed) > 0
    }

    /// Whether a slot is free.
    pub fn has_room(&self) -> bool {
        let m = self.maxconn.load(Ordering::Relaxed);
        m == 0 || self.cur.load(Ordering::Relaxed) < m
    }

    /// Takes a slot if one is free.
    pub fn try_take(&self) -> bool {
        let m = self.maxconn.load(Ordering::Relaxed);
        let now = if m == 0 {
            self.cur.fetch_add(1, Ordering::AcqRel)
        } else {
            match self
                .cur
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |c| {
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
        let since = self
            .up_since
            .lock()
            .map(|t| t.elapsed())
            .unwrap_or(Duration::MAX);
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
    pub servers: Vec<Arc<ServerRt>>,
    pub balance: Balance,
    pub retries: u32,
    pub redispatch: bool,
    pub reuse: HttpReuse,
    pub check: HttpCheck,
    lb: Mutex<lb::State>,
    pub queue: Mutex<VecDeque<Arc<Waiter>>>,
    /// `maxqueue` of the backend queue: the sum of the servers' when all
    /// set one, else unbounded (HAProxy bounds only per server).
    pub counters: Counters,
}

static NEXT_SERVER_UID: AtomicU64 = AtomicU64::new(1);

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
        let n = servers.len();
        let servers = servers
            .into_iter()
            .enumerate()
            .map(|(idx, (sname, addr, opts, tls))| {
                Arc::new(ServerRt {
                    idx,
                    uid: NEXT_SERVER_UID.fetch_add(1, Ordering::Relaxed),
                    backend: name.clone(),
                    weight: AtomicU32::new(opts.weight),
                    maxconn: AtomicU32::new(opts.maxconn.unwrap_or(0)),
                    admin: AtomicU8::new(if opts.disabled || addr.is_none() {
                        ADMIN_MAINT
                    } else {
                        ADMIN_READY
                    }),
                    up: AtomicBool::new(true),
                    up_since: Mutex::new(Instant::now() - opts.slowstart.unwrap_or_default()),
                    cur: AtomicU32::new(0),
                    queue: Mutex::new(VecDeque::new()),
                    counters: Counters::default(),
                    check_status: Mutex::new(String::new()),
                    ext: extra::SrvExtra::default(),
                    tls,
                    name: sname,
                    addr,
                    opts,
                })
            })
            .collect();
        Farm {
            name,
            servers,
            balance,
            retries,
            redispatch,
            reuse,
            check,
            lb: Mutex::new(lb::State::new(n)),
            queue: Mutex::new(VecDeque::new()),
            counters: Counters::default(),
        }
    }

    /// Sets the backend's `hash-type` (the hash algorithms' lookup).
    pub fn set_hash(&self, h: crate::config::HashType) {
        let w: Vec<u32> = self.servers.iter().map(|s| s.opts.weight).collect();
        let mut st = self.lb.lock().unwrap_or_else(|p| p.into_inner());
        st.set_hash(h, &w);
    }

    /// Whether weights are static (HAProxy's map-based hashing): a weight
    /// change while up is then only 0% or 100%.
    pub fn static_weights(&self) -> bool {
        matches!(
            self.balance,
            Balance::Source | Balance::Uri { .. } | Balance::Hdr { .. }
        ) && !self
            .lb
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .consistent()
    }

    /// Servers the balancer may use now: the active ones, or else the
    /// first usable backup (HAProxy's default without `allbackups`).
    fn eligible(&self) -> Vec<usize> {
        let active: Vec<usize> = self
            .servers
            .iter()
            .filter(|s| !s.opts.backup && s.usable())
            .map(|s| s.idx)
            .collect();
        if !active.is_empty() {
            return active;
        }
        self.servers
            .iter()
            .find(|s| s.opts.backup && s.usable())
            .map(|s| vec![s.idx])
            .unwrap_or_default()
    }

    /// Picks a server for a stream and takes a slot, or queues the stream
    /// (`me` is woken when a slot is handed over), or refuses. `avoid`
    /// names a server not to pick again (a redispatch after it failed).
    pub fn pick(
        &self,
        input: &LbInput<'_>,
        avoid: Option<usize>,
        me: TaskletId,
        handle: &RuntimeHandle,
    ) -> Pick {
        let mut elig = self.eligible();
        if let Some(a) = avoid {
            if elig.len() > 1 {
                elig.retain(|&i| i != a);
            }
        }
        if elig.is_empty() {
            return Pick::NoServer("no server available");
        }
        let static_w = self.static_weights();
        let weights: Vec<u32> = elig
            .iter()
            // Map-based hashing is static: no slowstart ramp (HAProxy).
            .map(|&i| {
                let s = &self.servers[i];
                if static_w {
                    s.weight.load(Ordering::Relaxed)
                } else {
                    s.effective_weight()
                }
            })
            .collect();
        let cur: Vec<u32> = elig
            .iter()
            .map(|&i| self.servers[i].cur.load(Ordering::Relaxed))
            .collect();
        let room: Vec<bool> = elig.iter().map(|&i| self.servers[i].has_room()).collect();
        let choice = {
            let mut st = self.lb.lock().unwrap_or_else(|p| p.into_inner());
            lb::choose(&self.balance, &mut st, &elig, &weights, &cur, &room, input)
        };
        match choice {
            lb::Choice::Server(i) => {
                let s = &self.servers[i];
                if s.try_take() {
                    return Pick::Server(Arc::clone(s));
                }
                // Raced to full: queue on the backend like any full case.
                self.enqueue_backend(&elig, me, handle)
            }
            lb::Choice::Bound(i) => self.enqueue_server(i, me, handle),
            lb::Choice::AllFull => self.enqueue_backend(&elig, me, handle),
        }
    }

    fn waiter(me: TaskletId, handle: &RuntimeHandle) -> Arc<Waiter> {
        Arc::new(Waiter {
            state: Mutex::new(WaitState::Waiting),
            tasklet: me,
            handle: handle.clone(),
        })
    }

    /// Queues on one server (hash algorithms bind a stream to its server).
    fn enqueue_server(&self, i: usize, me: TaskletId, handle: &RuntimeHandle) -> Pick {
        let s = &self.servers[i];
        let mut q = s.queue.lock().unwrap_or_else(|p| p.into_inner());
        // Re-check under the lock a releasing stream takes.
        if s.try_take() {
            return Pick::Server(Arc::clone(s));
        }
        if s.opts.maxqueue.is_some_and(|m| q.len() as u32 >= m) {
            return Pick::NoServer("server queue full");
        }
        let w = Self::waiter(me, handle);
        q.push_back(Arc::clone(&w));
        s.counters.queued_total.fetch_add(1, Ordering::Relaxed);
        Pick::Queued(w)
    }

    /// Queues on the backend: any eligible server may hand us a slot.
    fn enqueue_backend(&self, elig: &[usize], me: TaskletId, handle: &RuntimeHandle) -> Pick {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        for &i in elig {
            if self.servers[i].try_take() {
                return Pick::Server(Arc::clone(&self.servers[i]));
            }
        }
        // The backend queue is bounded by the sum of the servers'
        // maxqueue when every eligible server sets one.
        let bound: Option<u32> = elig
            .iter()
            .map(|&i| self.servers[i].opts.maxqueue)
            .sum::<Option<u32>>();
        if bound.is_some_and(|b| q.len() as u32 >= b) {
            return Pick::NoServer("backend queue full");
        }
        let w = Self::waiter(me, handle);
        q.push_back(Arc::clone(&w));
        self.counters.queued_total.fetch_add(1, Ordering::Relaxed);
        Pick::Queued(w)
    }

    /// Ends a stream's use of a slot of `s`: hands it to the first waiter,
    /// or gives it back.
    pub fn release(&self, s: &Arc<ServerRt>) {
        let mut sq = s.queue.lock().unwrap_or_else(|p| p.into_inner());
        // A server out of use takes no waiter: they are redispatched.
        let usable = s.usable();
        if usable {
            while let Some(w) = sq.pop_front() {
                if w.assign(s) {
                    return;
                }
            }
            let mut bq = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            while let Some(w) = bq.pop_front() {
                if w.assign(s) {
                    return;
                }
            }
            s.cur.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        s.cur.fetch_sub(1, Ordering::AcqRel);
        drop(sq);
        self.kick_backend_queue();
    }

    /// A waiter gave up: take it out of whichever queue holds it.
    pub fn unqueue(&self, w: &Arc<Waiter>) {
        for s in &self.servers {
            let mut q = s.queue.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(pos) = q.iter().position(|x| Arc::ptr_eq(x, w)) {
                q.remove(pos);
                return;
            }
        }
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pos) = q.iter().position(|x| Arc::ptr_eq(x, w)) {
            q.remove(pos);
        }
    }

    /// A server went DOWN or into maintenance: its waiters pick again.
    pub fn redispatch_queue_of(&self, s: &ServerRt) {
        let waiters: Vec<_> = s
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for w in waiters {
            w.redispatch();
        }
    }

    /// A server became usable, or freed a slot while unusable: let the
    /// backend's waiters try again.
    pub fn kick_backend_queue(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let elig = self.eligible();
        while !q.is_empty() {
            let Some(s) = elig
                .iter()
                .map(|&i| &self.servers[i])
                .find(|s| s.try_take())
            else {
                break;
            };
            let mut given = false;
            while let Some(w) = q.pop_front() {
                if w.assign(s) {
                    given = true;
                    break;
                }
            }
            if !given {
                s.cur.fetch_sub(1, Ordering::AcqRel);
                break;
            }
        }
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
pub fn server_status(s: &ServerRt) -> &'static str {
    match s.admin.load(Ordering::Relaxed) {
        ADMIN_MAINT => "MAINT",
        ADMIN_DRAIN if s.up.load(Ordering::Relaxed) => "DRAIN",
        _ if !s.up.load(Ordering::Relaxed) => "DOWN",
        _ if !s.opts.check => "no check",
        _ => "UP",
    }
}
