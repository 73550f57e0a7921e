//! A backend's set of servers ([`Farm`]) and the pick of one for a stream.
//!
//! Every thread's streams use a farm at once, so its state is atomics
//! plus short locks. **Picking takes no shared lock** but `roundrobin`'s.
//! The balancing state (hash tables, the server map, scratch lists of
//! eligible servers) is per thread: a thread locks only its own slot,
//! which no other thread touches (unless more than [`LB_SLOTS`] threads
//! pick). What every thread must agree on is an atomic: the map's
//! position, the slots in use, weights and states. `roundrobin` is
//! HAProxy's fast weighted round robin, whose state (one per backend,
//! [`lb::Shared`]) each pick updates under a short lock, as HAProxy's. A
//! pick allocates nothing once the thread's slot is warm.
//!
//! The algorithms themselves are in [`lb`]; a pick that finds no room
//! queues the stream ([`super::queue`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use sched::{RuntimeHandle, TaskletId};

use super::{
    check, extra, lb, new_server, register, Counters, Prio, ServerList, ServerRt, ServerTls,
    WaitQueue, Waiter,
};
use crate::config::{Balance, HttpCheck, HttpReuse, ServerOptions};

/// The result of asking for a server.
pub enum Pick {
    /// A slot of this server is ours.
    Server(Arc<ServerRt>),
    /// Wait: we are in a queue.
    Queued(Arc<Waiter>),
    /// No server can take the stream (all down): 503.
    NoServer(&'static str),
    /// The server the stream was assigned to has its queue at its
    /// `maxqueue`: 503 (HAProxy's queue error, `SQ`).
    QueueFull(Arc<ServerRt>),
}

/// What the load balancer may look at in the request.
#[derive(Default, Clone, Copy)]
pub struct LbInput<'a> {
    pub src: Option<std::net::IpAddr>,
    pub uri: &'a [u8],
    pub hdr: Option<&'a [u8]>,
    /// `balance url_param`: the body of a POST request as far as it
    /// came (de-chunked), looked at when the URL lacks the parameter.
    pub post: Option<&'a [u8]>,
    /// Where the stream waits in a queue ([`Prio`]).
    pub prio: Prio,
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
    pub(super) hash: OnceLock<crate::config::HashType>,
    /// The balancing state every thread shares (round-robin positions).
    pub(super) rr: lb::Shared,
    /// Balancing state per thread: see the module's introduction.
    pub(super) slots: Box<[ThreadSlot]>,
    pub queue: Mutex<WaitQueue>,
    /// The backend queue's `ServerRt::waiting`.
    pub(super) waiting: AtomicU32,
    /// The next waiter's place in the order of arrival ([`Waiter`]).
    pub(super) qseq: AtomicU64,
    /// `fullconn`: the backend's load at which servers with a `minconn`
    /// reach their `maxconn` (see [`Farm::limit`]).
    pub fullconn: u32,
    pub counters: Counters,
    /// The backend's own state history (`show stat`'s backend `chkdown`,
    /// `lastchg`, `downtime`): it is down while no server is usable.
    pub be_ext: extra::SrvExtra,
    pub(super) be_up: std::sync::atomic::AtomicBool,
    /// The backend's options for server sockets, given to the servers
    /// added at run time too.
    pub sock: crate::config::SrvSock,
    /// `option allbackups`: all usable backups share the load when no
    /// active server is usable, instead of the first one alone.
    pub allbackups: bool,
    /// `dynamic-cookie-key` and whether dynamic cookies are on (`cookie
    /// ... dynamic`); the CLI changes both.
    pub dyncookie: Mutex<DynCookies>,
}

/// A backend's dynamic cookies: its key, and whether they are on.
#[derive(Clone, Debug, Default)]
pub struct DynCookies {
    pub key: Option<String>,
    pub on: bool,
}

/// HAProxy's server ids: an `id N` as written; the others, in order, the
/// first id not taken at or after a counter that starts at 1 and moves
/// one past each server's position.
pub(super) fn server_ids(given: impl Iterator<Item = Option<u32>> + Clone) -> Vec<u32> {
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
            queue: Mutex::new(WaitQueue::default()),
            waiting: AtomicU32::new(0),
            qseq: AtomicU64::new(0),
            fullconn: 1,
            counters: Counters::default(),
            be_ext: extra::SrvExtra::default(),
            be_up: std::sync::atomic::AtomicBool::new(true),
            sock: crate::config::SrvSock::default(),
            allbackups: false,
            dyncookie: Mutex::new(DynCookies::default()),
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
    pub(super) fn slot(&self, seed: usize) -> Box<Slot> {
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
    pub(super) fn balance_hashes(&self) -> bool {
        matches!(
            self.balance,
            Balance::Source | Balance::Uri { .. } | Balance::UrlParam { .. } | Balance::Hdr { .. }
        )
    }

    /// Servers the balancer may use now, into `out`: the active ones, or
    /// else the first usable backup (HAProxy's default), or every usable
    /// backup with `option allbackups`.
    pub(super) fn eligible(&self, out: &mut Vec<usize>) {
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
            if self.waiting.load(Ordering::Relaxed) == 0 && self.try_take_new(s) {
                Self::note_lb(s, avoid);
                return Pick::Server(Arc::clone(s));
            }
            // Full (or raced to full): the backend's queue.
            return self.enqueue_backend(&[s.idx], me, input.prio, handle);
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
        // HAProxy 2.6 (assign_server): with `first`, `roundrobin` or
        // `static-rr`, streams waiting in the backend's queue mean every
        // server is full: a new one waits behind them, unless the queue
        // holds every stream of the backend.
        let fifo_algo = matches!(
            self.balance,
            Balance::RoundRobin | Balance::StaticRr | Balance::First
        );
        if fifo_algo && self.backend_queue_behind() {
            return self.enqueue_backend(elig, me, input.prio, handle);
        }
        let leastconn = matches!(self.balance, Balance::LeastConn);
        // A round robin among the active servers moves on with one left
        // (HAProxy's position advances), so it picks even then.
        let choice = if elig.len() == 1 && !self.balance_hashes() && (backup || !rr_kind) {
            // One server to choose from and no key to bind the stream to
            // it: it takes the stream if it has room, else the stream
            // waits in the backend's queue, whatever the algorithm.
            let i = elig[0];
            if self.takes_new(&self.servers[i]) {
                lb::Choice::Server(i)
            } else {
                lb::Choice::AllFull
            }
        } else {
            // Static weights: no slowstart ramp (HAProxy). Round robin
            // and leastconn weigh in HAProxy's sixteenths of a weight
            // (a slowstart's ramp moves by them); the others in units.
            let static_w = self.static_weights();
            let sixteenths = matches!(self.balance, Balance::RoundRobin | Balance::LeastConn);
            weights.clear();
            cur.clear();
            room.clear();
            for &i in elig.iter() {
                let s = &self.servers[i];
                weights.push(if static_w {
                    s.weight.load(Ordering::Relaxed)
                } else if sixteenths {
                    s.eweight16()
                } else {
                    s.effective_weight()
                });
                if leastconn {
                    // HAProxy's leastconn weighs the streams served and
                    // queued, and passes over a server only when both
                    // reach its limit plus its `maxqueue`.
                    let c = s.cur.load(Ordering::Relaxed);
                    let q = s.waiting.load(Ordering::Relaxed);
                    cur.push(c.saturating_add(q));
                    let m = self.limit_with(s, 1);
                    let mq = s.opts.maxqueue.unwrap_or(0);
                    room.push(m == 0 || c.saturating_add(q) < m.saturating_add(mq));
                } else {
                    cur.push(s.cur.load(Ordering::Relaxed));
                    room.push(self.takes_new(s));
                }
            }
            let (b, sh, grp) = (&self.balance, &self.rr, lb::Group { backup, avoid });
            lb::choose(b, st, elig, weights, cur, room, input, sh, grp)
        };
        let elig: &[usize] = elig;
        match choice {
            lb::Choice::Server(i) => {
                let s = &self.servers[i];
                // HAProxy counts the balancer's choice (assign_server),
                // whether the server then takes the stream or queues it.
                Self::note_lb(s, avoid);
                if self.try_take_new(s) {
                    return Pick::Server(Arc::clone(s));
                }
                // Full, or streams wait for it: a server the balancer
                // assigned takes the stream in its own queue (HAProxy's
                // assign_server_and_queue; leastconn's choice may be such
                // a server), except after a lost race among the others.
                if leastconn || self.balance_hashes() {
                    self.enqueue_server(i, me, input.prio, handle)
                } else {
                    self.enqueue_backend(elig, me, input.prio, handle)
                }
            }
            lb::Choice::Bound(i) => {
                Self::note_lb(&self.servers[i], avoid);
                self.enqueue_server(i, me, input.prio, handle)
            }
            lb::Choice::AllFull => self.enqueue_backend(elig, me, input.prio, handle),
        }
    }

    /// The balancer chose `s` (HAProxy's `cum_lbconn`, the `lbtot`
    /// column): counted unless it is the server a redispatch left
    /// (HAProxy's `srv != prev_srv`).
    fn note_lb(s: &ServerRt, avoid: Option<usize>) {
        if avoid != Some(s.idx) {
            s.counters.lb_picks.fetch_add(1, Ordering::Relaxed);
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
                self.pick_direct(i, false, input, me, handle)
            }
            _ => self.pick(input, avoid, me, handle),
        }
    }

    /// Server `i`, which persistence chose (a cookie, a `stick match`, a
    /// `use-server` rule), takes the stream or queues it. When its own
    /// queue is at its `maxqueue`, HAProxy 2.6 (srv_redispatch_connect on
    /// SRV_STATUS_FULL in direct mode) hands the stream to the load
    /// balancer with `option redispatch`, `i` avoided (a redispatch,
    /// counted on `i`, which the backend's row sums), unless a `force-persist` rule held (`stay`); otherwise
    /// it is refused (503).
    pub(super) fn pick_direct(
        &self,
        i: usize,
        stay: bool,
        input: &LbInput<'_>,
        me: TaskletId,
        handle: impl FnOnce() -> RuntimeHandle,
    ) -> Pick {
        match self.try_enqueue_server(i, me, input.prio, handle) {
            Ok(p) => p,
            Err(handle) if self.redispatch && !stay => {
                self.servers[i]
                    .counters
                    .redispatches
                    .fetch_add(1, Ordering::Relaxed);
                self.pick(input, Some(i), me, handle)
            }
            Err(_) => self.queue_full(i),
        }
    }

    /// Server `i`, the one this client's previous request used (`option
    /// prefer-last-server`), takes the stream or queues it; its queue at
    /// its `maxqueue`, the stream is refused (503, `SQ`) even with
    /// `option redispatch`: HAProxy 2.6 redispatches on a full queue only
    /// a stream persistence sent there (`SF_DIRECT`).
    pub fn pick_last(
        &self,
        i: usize,
        me: TaskletId,
        prio: Prio,
        handle: impl FnOnce() -> RuntimeHandle,
    ) -> Pick {
        match self.try_enqueue_server(i, me, prio, handle) {
            Ok(p) => p,
            Err(_) => self.queue_full(i),
        }
    }
}

impl Farm {
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

    /// Whether streams wait in the backend's queue while others of the
    /// backend are served or wait for a server (HAProxy's
    /// `queue.length && queue.length != beconn`).
    pub(super) fn backend_queue_behind(&self) -> bool {
        let w = self.waiting.load(Ordering::SeqCst);
        w != 0 && self.load() != w
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

/// Threads with a balancing slot of their own in every farm; more threads
/// share slots (still correct: a slot is a lock, only not a free one).
pub const LB_SLOTS: usize = 64;

/// A thread's balancing state and scratch lists (kept for their capacity).
pub(super) struct Slot {
    /// The farm's generation it was built for.
    pub(super) gen: u64,
    elig: Vec<usize>,
    weights: Vec<u32>,
    cur: Vec<u32>,
    room: Vec<bool>,
    st: lb::State,
}

/// One thread's balancing slot, filled at its first pick.
pub(super) type ThreadSlot = Padded<Mutex<Option<Box<Slot>>>>;

/// Keeps each thread's slot on its own cache line.
#[repr(align(64))]
pub(super) struct Padded<T>(pub(super) T);

/// This thread's slot index, given at its first pick.
pub(super) fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed) % LB_SLOTS;
    }
    SLOT.with(|s| *s)
}
