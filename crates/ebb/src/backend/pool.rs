//! Idle HTTP/1 server connections, shared by the threads of the process
//! as HAProxy 2.6 shares them (`tune.idle-pool.shared on`, its default).
//!
//! Each thread has its own list per server, behind a lock only another
//! thread looking for a connection takes (with `try_lock`, skipping a
//! busy list): a thread uses its own idle connections first and takes
//! one of another thread only when its own list has none that fits.
//!
//! A connection is idle from the end of its answer, as in HAProxy: any
//! request `http-reuse` allows may take it then. Its client keeps a
//! [`Parked`] place for it, where the connection stays registered with
//! the client's server-side tasklet: the client's next request to that
//! server takes it back without a system call (the keep-alive hot path
//! touches only that place's uncontended lock). When the client leaves,
//! the registration passes to its thread's idle watcher tasklet, still
//! without a system call ([`sched::Ctx::move_fd`]), so a connection a
//! leaving client freed is taken by the next one as cheaply. Another
//! request that takes it re-points that registration (on this thread's
//! table, or removes it from the other thread's poller when it lives
//! there: [`sched::Ctx::deregister_fd_of`]).
//!
//! Every idle connection of a server holds an [`IdleTicket`], counted in
//! [`ServerRt::idle_conns`] against its `pool-max-conn`: those in the
//! lists and HTTP/2 connections without streams. A connection the pool
//! refuses is closed, as HAProxy closes one its server's idle list
//! refuses ([`ServerRt::idle_ticket`]: HAProxy's conditions). A
//! connection in use holds a [`UsedConn`] instead (a private one kept
//! for its client too).
//!
//! Idle connections close as HAProxy 2.6 closes them: each server with
//! idle connections has a purge timer of `pool-purge-delay`; at its end
//! half of the idle connections beyond the estimate of those the server
//! needs close, and the estimate follows the most in use, decaying by
//! halves ([`ServerRt::purge_timer`]). One thread runs the timers once a
//! second; each thread closes its share in its own lists
//! ([`IdlePools::purge`]), an idle HTTP/2 connection its own.
//!
//! A connection is *safe* once it carried a request after its first one
//! (it proved the server keeps connections open): `http-reuse aggressive`
//! and `always` send a client's first request over safe ones first.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sched::{ticks, TaskletId, Tick};

use super::ServerRt;
use crate::transport::{Movable, Transport};

/// Idle connections a thread keeps per server when `pool-max-conn` is
/// not set: a bound on the descriptors an unlimited setting could pin.
const DEFAULT_THREAD_MAX: usize = 1024;

/// One idle connection counted in its server's pool, in its thread's
/// share of it (the thread whose list or tasklet holds it), and among the
/// safe ones when it is safe.
pub struct IdleTicket {
    srv: Arc<ServerRt>,
    thread: usize,
    safe: bool,
}

impl Drop for IdleTicket {
    fn drop(&mut self) {
        let s = &self.srv;
        s.idle_conns.fetch_sub(1, Ordering::AcqRel);
        if let Some(n) = s.idle_thr.get(self.thread) {
            n.fetch_sub(1, Ordering::AcqRel);
        }
        if self.safe {
            s.idle_safe.fetch_sub(1, Ordering::AcqRel);
            if let Some(n) = s.safe_thr.get(self.thread) {
                n.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// One connection to a server in use (HAProxy's `srv_use_conn`): held by
/// whatever owns the connection while it is not idle in the pool.
pub struct UsedConn(Arc<ServerRt>);

impl Drop for UsedConn {
    fn drop(&mut self) {
        self.0.used_conns.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What `show servers conn` and the stats show of a server's
/// connections (HAProxy's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnCounts {
    pub used_cur: u32,
    pub used_max: u32,
    pub need_est: u32,
    /// Idle, not (yet) safe.
    pub unsafe_nb: u32,
    pub safe_nb: u32,
    /// All idle ones.
    pub idle_cur: u32,
}

fn at(a: &[AtomicU32], i: usize) -> u32 {
    a.get(i).map_or(0, |n| n.load(Ordering::Acquire))
}

impl ServerRt {
    /// A place in the server's idle pool for a connection that `thread`
    /// keeps, whose [`UsedConn`] its owner has just let go, or `None`
    /// when the server keeps it not (it is closed then). HAProxy 2.6's
    /// `srv_add_to_idle_list`: not with `pool-purge-delay 0`, not beyond
    /// `pool-max-conn`, and only when this thread has no idle connection
    /// of the kind to that server yet (a safe one: none safe; one not
    /// safe: none at all) or when the server's connections, in use and
    /// idle, stay within the estimate of those it needs plus its
    /// `pool-low-conn`.
    pub fn idle_ticket(
        self: &Arc<Self>,
        thread: usize,
        safe: bool,
        now: Tick,
    ) -> Option<IdleTicket> {
        if self.opts.pool_purge_delay.is_zero() {
            return None;
        }
        let first = at(&self.safe_thr, thread) == 0 && (safe || at(&self.idle_thr, thread) == 0);
        if !first {
            // (HAProxy counts the connection among those in use here.)
            let used = self.used_conns.load(Ordering::Acquire) + 1;
            let idle = self.idle_conns.load(Ordering::Acquire);
            let room = used
                .max(self.est_need.load(Ordering::Acquire))
                .saturating_add(self.opts.pool_low_conn);
            if used + idle > room {
                return None;
            }
        }
        let max = self.opts.pool_max_conn.unwrap_or(u32::MAX);
        self.idle_conns
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        // The purge timer starts with the first idle connection
        // ([`ServerRt::purge_timer`]); once it runs, a read suffices (no
        // write to the shared line on each parked connection).
        if self.next_roll.load(Ordering::Acquire) == 0 {
            let _ = self.next_roll.compare_exchange(
                0,
                ticks::add(now, purge_ms(self)) | 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        if let Some(n) = self.idle_thr.get(thread) {
            n.fetch_add(1, Ordering::AcqRel);
        }
        if safe {
            self.idle_safe.fetch_add(1, Ordering::AcqRel);
            if let Some(n) = self.safe_thr.get(thread) {
                n.fetch_add(1, Ordering::AcqRel);
            }
        }
        Some(IdleTicket {
            srv: Arc::clone(self),
            thread,
            safe,
        })
    }

    /// Idle connections per thread (the first `nbthread`).
    pub fn idle_per_thread(&self, nbthread: usize) -> Vec<u32> {
        (0..nbthread).map(|t| at(&self.idle_thr, t)).collect()
    }

    /// Idle connections to this server now (all threads).
    pub fn idle_count(&self) -> u32 {
        self.idle_conns.load(Ordering::Acquire)
    }

    /// Counts a connection in use until the mark drops; the most in use
    /// and the estimate follow it up at once (HAProxy's order).
    pub fn used_conn(self: &Arc<Self>) -> UsedConn {
        let n = self.used_conns.fetch_add(1, Ordering::AcqRel) + 1;
        // (A read first: the maxima rarely move, and a read keeps the
        // line shared between the threads.)
        if self.max_used.load(Ordering::Relaxed) < n {
            self.max_used.fetch_max(n, Ordering::AcqRel);
        }
        if self.est_need.load(Ordering::Relaxed) < n {
            self.est_need.fetch_max(n, Ordering::AcqRel);
        }
        UsedConn(Arc::clone(self))
    }

    /// HAProxy's purge timer of idle server connections, run once a
    /// second by one thread: a server with idle connections has a timer
    /// of `pool-purge-delay` (started by its first idle one). At its end,
    /// with idle connections still there, half of those beyond the
    /// estimate of the connections it needs (rounded up; the estimate
    /// being the larger of it and the most in use since the last time)
    /// are to close: each thread's share (its part of the idle ones, plus
    /// one) goes to that thread ([`ServerRt::take_kill`]), not safe ones
    /// first. The estimate then moves half way to that most in use (never
    /// below it), the most in use starts again from those in use now, and
    /// the timer runs again. Without idle connections the timer stops.
    pub fn purge_timer(&self, now: Tick) {
        let when = self.next_roll.load(Ordering::Acquire);
        if when == 0 || !ticks::is_expired(when, now) {
            return;
        }
        let idle = self.idle_conns.load(Ordering::Acquire);
        if idle == 0 {
            self.next_roll.store(0, Ordering::Release);
            return;
        }
        let used = self.used_conns.load(Ordering::Acquire);
        let max = self.max_used.load(Ordering::Acquire);
        let est = self.est_need.load(Ordering::Acquire);
        let exceed = i64::from(used) + i64::from(idle) - i64::from(max.max(est));
        let half = exceed / 2 + (exceed & 1);
        self.est_need
            .store(((est + max) / 2).max(max), Ordering::Release);
        self.max_used.store(used, Ordering::Release);
        for (k, n) in self.kill_thr.iter().enumerate() {
            let mine = i64::from(at(&self.idle_thr, k));
            let share = if half > 0 && mine > 0 {
                half * mine / i64::from(idle) + 1
            } else {
                0
            };
            n.store(u32::try_from(share).unwrap_or(u32::MAX), Ordering::Release);
        }
        self.next_roll
            .store(ticks::add(now, purge_ms(self)) | 1, Ordering::Release);
    }

    /// Gives every thread its idle connections of this server to close at
    /// its next purge pass (within a second): `set server ... ssl` changed
    /// how new connections speak (HAProxy's `srv_cleanup_connections`).
    pub fn close_idle(&self) {
        for (k, n) in self.kill_thr.iter().enumerate() {
            n.store(at(&self.idle_thr, k), Ordering::Release);
        }
    }

    /// Takes up to `n` of the idle connections `thread` is to close
    /// ([`ServerRt::purge_timer`]): how many it may close.
    pub fn take_kill(&self, thread: usize, n: u32) -> u32 {
        let Some(k) = self.kill_thr.get(thread) else {
            return 0;
        };
        match k.fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
            (q > 0).then(|| q - q.min(n))
        }) {
            Ok(q) => q.min(n),
            Err(_) => 0,
        }
    }

    pub fn conn_counts(&self) -> ConnCounts {
        let idle = self.idle_conns.load(Ordering::Acquire);
        let safe = self.idle_safe.load(Ordering::Acquire).min(idle);
        ConnCounts {
            used_cur: self.used_conns.load(Ordering::Acquire),
            used_max: self.max_used.load(Ordering::Acquire),
            need_est: self.est_need.load(Ordering::Acquire),
            unsafe_nb: idle - safe,
            safe_nb: safe,
            idle_cur: idle,
        }
    }
}

/// Which idle connections a request may take (`http-reuse`, and whether
/// it is its client's first request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Any, the not yet safe ones first (they are kept from first
    /// requests): a later request.
    Any,
    /// Safe ones only (`aggressive`, a first request).
    Safe,
    /// Safe ones, else any (`always`, a first request).
    SafeFirst,
}

struct Entry {
    conn: Movable,
    /// When it was parked (the oldest close first when the purge timer
    /// says some are to close).
    since: Tick,
    safe: bool,
    /// The tasklet whose thread's poller still has the socket (its
    /// client's, while the client lives).
    reg: Option<TaskletId>,
    /// That tasklet's [`sched::Ctx::io_mark`] when the connection was
    /// parked: the same mark when it is taken means the poller reported
    /// nothing on it (no close, no stray bytes), and it needs no `peek`.
    mark: Option<u32>,
    /// Holds the server's counts until the entry leaves the pool.
    ticket: IdleTicket,
    /// What the connection is kept for (HAProxy's connection hash): the
    /// PROXY header it began with, the SNI it sent when that depends on
    /// the exchange, the destination of a server that takes the
    /// client's; empty for a connection any request may take.
    key: Vec<u8>,
}

/// One place: empty once its connection was taken.
type Slot = Mutex<Place>;

/// A place and whether a thread's list holds it. A list holds only places
/// with a connection and those emptied since its last walk (the walk that
/// finds one empty drops it): a request looking for a connection walks
/// the idle connections, not every client's place. A client that parks
/// its connection again in its own place lists it again if it was
/// dropped. `listed` changes with both the place's and the list's lock.
struct Place {
    entry: Option<Entry>,
    listed: bool,
}

impl Place {
    /// Looks at the connection here (`alive`): an open one stays, with
    /// `mark`; a dead one leaves the pool (its ticket with it) and is
    /// returned, for the caller to forget its registration and drop it.
    fn check(&mut self, mark: Option<u32>) -> Option<Transport> {
        match checked(self.entry.take()?, mark) {
            Ok(e) => {
                self.entry = Some(e);
                None
            }
            Err(t) => Some(t),
        }
    }
}

/// A client's place for its idle connection to one server.
pub struct Parked {
    uid: u64,
    slot: Arc<Slot>,
}

impl Parked {
    /// The server (uid) of the connection parked here.
    pub fn server_uid(&self) -> u64 {
        self.uid
    }

    /// A handle on this place for the tasklet the parked connection stays
    /// registered with (the client's server side), which does not keep the
    /// place ([`IdlePools::check_parked`]).
    pub fn watch(&self) -> ParkedWatch {
        ParkedWatch(Arc::downgrade(&self.slot))
    }

    /// Whether `w` is a handle on this place (a client parking again in
    /// its own place keeps its handle: no count to change).
    pub fn watched_by(&self, w: &ParkedWatch) -> bool {
        std::ptr::eq(w.0.as_ptr(), Arc::as_ptr(&self.slot))
    }
}

/// See [`Parked::watch`].
#[derive(Debug)]
pub struct ParkedWatch(std::sync::Weak<Slot>);

/// An idle connection taken from the pool.
pub struct Taken {
    pub st: Transport,
    /// It carried more than one request.
    pub safe: bool,
    /// Still registered with this tasklet's poller (its thread's).
    pub reg: Option<TaskletId>,
}

type Lists = HashMap<u64, Vec<Arc<Slot>>, BuildHasherDefault<UidHash>>;

/// The lists' hash of a server uid (a process-unique counter, never from
/// outside input): one multiplication spreads it over the high bits the
/// table probes with, where SipHash's rounds would buy nothing.
#[derive(Default)]
struct UidHash(u64);

impl Hasher for UidHash {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The idle lists of every thread.
pub struct IdlePools {
    threads: Box<[Mutex<Lists>]>,
    /// `tune.idle-pool.shared`: a thread may take another's connections.
    shared: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl IdlePools {
    pub fn new(nbthread: usize, shared: bool) -> IdlePools {
        IdlePools {
            threads: (0..nbthread.max(1))
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            shared,
        }
    }

    /// Parks an idle connection to `s` (whose place `ticket` holds, safe
    /// or not) in
    /// `thread`'s list: in the client's own place `parked` when it has one
    /// for that server, else in a new one it keeps (`reg`: the tasklet the
    /// socket stays registered with, and its [`sched::Ctx::io_mark`] now).
    /// A lane is not kept.
    #[allow(clippy::too_many_arguments)]
    pub fn park(
        &self,
        thread: usize,
        parked: &mut Option<Parked>,
        s: &ServerRt,
        st: Transport,
        ticket: IdleTicket,
        reg: Option<(TaskletId, Option<u32>)>,
        now: Tick,
        key: Vec<u8>,
    ) {
        let Some(conn) = st.into_movable() else {
            return;
        };
        let e = Entry {
            key,
            conn,
            since: now,
            safe: ticket.safe,
            reg: reg.map(|r| r.0),
            mark: reg.and_then(|r| r.1),
            ticket,
        };
        if let Some(p) = parked.as_ref().filter(|p| p.uid == s.uid) {
            // Its own place: listed again if a walk dropped it empty.
            let mut g = lock(&p.slot);
            g.entry = Some(e);
            if !g.listed {
                self.list(thread, s, &p.slot, &mut g);
            }
            return;
        }
        let slot = Arc::new(Mutex::new(Place {
            entry: Some(e),
            listed: false,
        }));
        self.list(thread, s, &slot, &mut lock(&slot));
        *parked = Some(Parked { uid: s.uid, slot });
    }

    /// Puts a place (whose lock `g` is held) in `thread`'s list of `s`.
    fn list(&self, thread: usize, s: &ServerRt, slot: &Arc<Slot>, g: &mut Place) {
        let Some(m) = self.threads.get(thread) else {
            return;
        };
        let mut lists = lock(m);
        let list = lists.entry(s.uid).or_default();
        if s.opts.pool_max_conn.is_none() && list.len() >= DEFAULT_THREAD_MAX {
            // The oldest place no client holds goes, with its connection.
            if let Some(i) = list.iter().position(|x| Arc::strong_count(x) == 1) {
                list.remove(i);
            }
        }
        list.push(Arc::clone(slot));
        g.listed = true;
    }

    /// The client's own parked connection, if no other request took it.
    pub fn unpark(&self, p: &Parked) -> Option<Taken> {
        let e = lock(&p.slot).entry.take()?;
        Some(taken(e))
    }

    /// The client lets its place go (it leaves, or its next connection is
    /// to another server): a connection still there stays for others.
    /// `rehome(fd, reg, mark)` moves its registration off the client's
    /// tasklet `reg` (the mark it had when parked) and says which tasklet
    /// has it now and that one's mark, or `None` when it removed it.
    ///
    /// A connection an event reached while its client held it (a close,
    /// stray bytes: its mark is gone) is looked at now, as HAProxy closes
    /// an idle connection on its poller's event: a dead one goes out of
    /// the pool (its place freed, so it counts no more among the server's
    /// idle connections) and is returned, for the caller to forget its
    /// registration and drop it.
    pub fn release(
        &self,
        p: Parked,
        rehome: impl FnOnce(
            std::os::fd::RawFd,
            TaskletId,
            Option<u32>,
        ) -> Option<(TaskletId, Option<u32>)>,
    ) -> Option<Transport> {
        let mut g = lock(&p.slot);
        let e = g.entry.as_mut()?;
        let mark = e.mark.take();
        if let Some(reg) = e.reg.take() {
            let now = rehome(e.conn.raw_fd(), reg, mark);
            e.reg = now.map(|r| r.0);
            e.mark = now.and_then(|r| r.1);
        }
        if e.mark.is_some() {
            return None;
        }
        g.check(None)
    }

    /// The tasklet `reg` a client's parked connection is registered with
    /// had an event while that client stays: the connection, if it is
    /// still there and still registered with `reg`, is looked at; a dead
    /// one leaves the pool and is returned (to forget and drop), an open
    /// one takes `reg`'s new `mark`.
    pub fn check_parked(
        &self,
        w: &ParkedWatch,
        reg: TaskletId,
        mark: Option<u32>,
    ) -> Option<Transport> {
        let slot = w.0.upgrade()?;
        let mut g = slot.try_lock().ok()?;
        g.entry.as_ref().filter(|e| e.reg == Some(reg))?;
        g.check(mark)
    }

    /// The watcher `watch` of `thread`'s idle connections had events on
    /// `fds` (every one of its connections when `all`): each of those
    /// registered with it is looked at, a dead one leaves the pool and is
    /// returned in `dead` (to forget and drop); the others, quiet since,
    /// take the watcher's new `mark`, so a taker needs no `peek`.
    pub fn check_watched(
        &self,
        thread: usize,
        watch: TaskletId,
        fds: &[std::os::fd::RawFd],
        all: bool,
        mark: Option<u32>,
        dead: &mut Vec<Transport>,
    ) {
        let Some(m) = self.threads.get(thread) else {
            return;
        };
        let lists = lock(m);
        for slot in lists.values().flatten() {
            // A place its client or a taker holds is theirs to look at.
            let Ok(mut g) = slot.try_lock() else {
                continue;
            };
            let Some(e) = g.entry.as_mut().filter(|e| e.reg == Some(watch)) else {
                continue;
            };
            if !all && !fds.contains(&e.conn.raw_fd()) {
                e.mark = mark;
                continue;
            }
            dead.extend(g.check(mark));
        }
    }

    /// An open idle connection to `s` that `want` allows: `thread`'s own
    /// first, then (pool shared) another thread's. Closed ones found on
    /// the way are dropped. `quiet(reg, mark)` says whether the
    /// tasklet a connection is registered with still has the mark it had
    /// when the connection was parked: no event since, so the connection
    /// is known open without a `peek` (as HAProxy learns of a close from
    /// its poller only).
    pub fn take(
        &self,
        thread: usize,
        s: &ServerRt,
        want: Want,
        key: &[u8],
        quiet: &dyn Fn(TaskletId, u32) -> bool,
    ) -> Option<Taken> {
        let classes: &[Class] = match want {
            Want::Any => &[Class::Any],
            Want::Safe => &[Class::Safe],
            Want::SafeFirst => &[Class::Safe, Class::Any],
        };
        for &class in classes {
            if let Some(found) = self.take_class(thread, s, class, key, quiet) {
                return Some(found);
            }
        }
        None
    }

    fn take_class(
        &self,
        thread: usize,
        s: &ServerRt,
        class: Class,
        key: &[u8],
        quiet: &dyn Fn(TaskletId, u32) -> bool,
    ) -> Option<Taken> {
        // Its own list, locked (only another thread looking competes).
        if let Some(m) = self.threads.get(thread) {
            while let Some(e) = pop(&mut lock(m), s, class, key) {
                if let Some(found) = usable(e, s, quiet) {
                    return Some(found);
                }
            }
        }
        // `pool-low-conn`: too few idle connections to take another
        // thread's (HAProxy's rule while descriptors are plenty).
        let idle = s.idle_count();
        if !self.shared || idle == 0 || idle < s.opts.pool_low_conn {
            return None;
        }
        let n = self.threads.len();
        for i in (1..n).map(|k| (thread + k) % n) {
            let Some(m) = self.threads.get(i) else {
                continue;
            };
            loop {
                // A list in use by its thread is skipped, never waited for.
                let e = match m.try_lock() {
                    Ok(mut l) => pop(&mut l, s, class, key),
                    Err(_) => None,
                };
                let Some(e) = e else {
                    break;
                };
                if let Some(found) = usable(e, s, quiet) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Closes the idle connections in `thread`'s lists that the purge
    /// timer of their server gave this thread to close
    /// ([`ServerRt::purge_timer`]; its purge task runs this once a second
    /// after it): those not safe first, the oldest first. Forgets the
    /// empty places no client holds.
    pub fn purge(&self, thread: usize, now: Tick) -> usize {
        let Some(m) = self.threads.get(thread) else {
            return 0;
        };
        let mut lists = lock(m);
        let mut n = 0;
        for list in lists.values_mut() {
            // The connections here: (safe, age, index).
            let mut here = Vec::new();
            let mut srv = None;
            for (i, slot) in list.iter().enumerate() {
                let Ok(g) = slot.try_lock() else {
                    continue;
                };
                if let Some(e) = &g.entry {
                    srv.get_or_insert_with(|| Arc::clone(&e.ticket.srv));
                    here.push((e.safe, now.wrapping_sub(e.since), i));
                }
            }
            if let Some(s) = srv {
                // The whole share is taken: what this list cannot use was
                // meant for connections gone since, and none parked later
                // closes for it.
                let quota = s.take_kill(thread, u32::MAX).min(here.len() as u32);
                here.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
                for &(_, _, i) in here.iter().take(quota as usize) {
                    if let Some(slot) = list.get(i) {
                        if let Ok(mut g) = slot.try_lock() {
                            n += usize::from(g.entry.take().is_some());
                        }
                    }
                }
            }
            list.retain(|slot| {
                let Ok(mut g) = slot.try_lock() else {
                    return true;
                };
                g.listed = g.entry.is_some();
                g.listed
            });
        }
        lists.retain(|_, l| !l.is_empty());
        n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Not yet safe ones first, then safe ones.
    Any,
    Safe,
}

fn purge_ms(s: &ServerRt) -> u32 {
    s.opts
        .pool_purge_delay
        .as_millis()
        .min(u32::MAX as u128 / 2) as u32
}

fn taken(e: Entry) -> Taken {
    Taken {
        st: Transport::from(e.conn),
        safe: e.safe,
        reg: e.reg,
    }
}

/// An idle connection looked at (`alive`): back as an entry with `mark`
/// when it is open and quiet, else its connection, out of the pool (the
/// entry's ticket goes with it).
fn checked(e: Entry, mark: Option<u32>) -> Result<Entry, Transport> {
    let Entry {
        conn,
        since,
        safe,
        reg,
        mark: _,
        ticket,
        key,
    } = e;
    let mut st = Transport::from(conn);
    if !super::alive(&mut st) {
        return Err(st);
    }
    let conn = match st {
        Transport::Plain(s) => Movable::Plain(s),
        Transport::Tls(t) => Movable::Tls(t),
        // (Never: it came from a `Movable`.)
        lane @ Transport::Lane(_) => return Err(lane),
    };
    Ok(Entry {
        conn,
        since,
        safe,
        reg,
        mark,
        ticket,
        key,
    })
}

/// Takes the newest connection to `s` of `class` out of a list (places
/// another thread or its client holds locked are skipped, places left
/// empty leave the list).
fn pop(lists: &mut Lists, s: &ServerRt, class: Class, key: &[u8]) -> Option<Entry> {
    let list = lists.get_mut(&s.uid)?;
    let passes: &[bool] = match class {
        Class::Safe => &[true],
        Class::Any => &[false, true],
    };
    let mut found = None;
    for &safe in passes {
        found = list.iter().rev().find_map(|slot| {
            let mut g = slot.try_lock().ok()?;
            let e = g.entry.as_ref()?;
            if e.safe == safe && e.key == key {
                g.entry.take()
            } else {
                None
            }
        });
        if found.is_some() {
            break;
        }
    }
    list.retain(|slot| {
        let Ok(mut g) = slot.try_lock() else {
            return true;
        };
        g.listed = g.entry.is_some();
        g.listed
    });
    found
}

/// The connection of an entry taken from a list, if it is still open and
/// still goes to the server's address (else it closes, its place in the
/// pool given back). Open is known without a `peek` when its tasklet saw
/// no event since it was parked (`quiet`).
fn usable(e: Entry, s: &ServerRt, quiet: &dyn Fn(TaskletId, u32) -> bool) -> Option<Taken> {
    let q = matches!((e.reg, e.mark), (Some(r), Some(m)) if quiet(r, m));
    let mut t = taken(e);
    ((q || super::alive(&mut t.st)) && s.still_there(&t.st)).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    /// The walk a request takes covers the idle connections, not every
    /// client's emptied place; a client parking again is found again.
    #[test]
    fn lists_hold_the_places_with_a_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let s = super::super::new_server(0, 1, "be", "s".into(), Some(a), Default::default(), None);
        let pools = IdlePools::new(1, true);
        let mut peers = Vec::new();
        let mut conn = || {
            let c = TcpStream::connect(a).unwrap();
            // Nonblocking, as the proxy's: the liveness peek must not wait.
            c.set_nonblocking(true).unwrap();
            peers.push(l.accept().unwrap().0);
            Transport::plain(c)
        };
        let listed = |p: &IdlePools| lock(&p.threads[0]).get(&s.uid).map_or(0, Vec::len);
        // Three in use at once: the estimate keeps three idle.
        drop((0..3).map(|_| s.used_conn()).collect::<Vec<_>>());
        let mut places: Vec<Option<Parked>> = (0..3).map(|_| None).collect();
        for p in &mut places {
            let t = s.idle_ticket(0, true, 1).unwrap();
            pools.park(0, p, &s, conn(), t, None, 1, Vec::new());
        }
        assert_eq!(listed(&pools), 3);
        // Another request takes the newest; its emptied place leaves.
        assert!(pools.take(0, &s, Want::Any, &[], &|_, _| false).is_some());
        assert_eq!(listed(&pools), 2);
        let last = places[2].as_ref().unwrap();
        assert!(pools.unpark(last).is_none(), "its connection was taken");
        // Its client parks a connection again: listed again, found first.
        let t = s.idle_ticket(0, true, 1).unwrap();
        let c = conn();
        let fd = c.tcp().local_addr().unwrap();
        pools.park(0, &mut places[2], &s, c, t, None, 1, Vec::new());
        assert_eq!(listed(&pools), 3);
        let got = pools.take(0, &s, Want::Any, &[], &|_, _| false).unwrap();
        assert_eq!(got.st.tcp().local_addr().unwrap(), fd);
        // The client's own connection comes back without a walk, and its
        // place stays listed until a walk finds it empty.
        assert!(pools.unpark(places[0].as_ref().unwrap()).is_some());
        assert_eq!(listed(&pools), 2);
        assert_eq!(s.idle_count(), 1);
        drop(peers);
    }

    /// HAProxy's admission: a thread's first idle connection of a kind is
    /// kept, more only within the estimate; `pool-purge-delay 0` keeps
    /// none. Its purge timer: half the excess over the estimate, each
    /// thread its share plus one; the estimate decays by halves.
    #[test]
    fn the_estimate_bounds_the_idle_ones_and_the_timer_closes_half_the_excess() {
        let a = "127.0.0.1:1".parse().ok();
        let s = super::super::new_server(0, 1, "be", "s".into(), a, Default::default(), None);
        let first = s.idle_ticket(1, false, 100).unwrap();
        // Not the first of this thread, beyond the estimate (0).
        assert!(s.idle_ticket(1, false, 100).is_none());
        // The first safe one of the thread; the first of another thread.
        let safe = s.idle_ticket(1, true, 100).unwrap();
        let other = s.idle_ticket(0, false, 100).unwrap();
        assert_eq!(
            s.conn_counts(),
            ConnCounts {
                used_cur: 0,
                used_max: 0,
                need_est: 0,
                unsafe_nb: 2,
                safe_nb: 1,
                idle_cur: 3,
            }
        );
        assert_eq!(s.idle_per_thread(2), [1, 2]);
        // The timer (5 s, from the first idle one) has not run out.
        s.purge_timer(5000);
        assert_eq!(s.take_kill(1, 9), 0);
        // Excess 3, half of it 2 (rounded up): thread 1 has two thirds
        // of the idle ones, 2 * 2 / 3 + 1 = 2; thread 0, 2 * 1 / 3 + 1 = 1.
        s.purge_timer(5101);
        assert_eq!(s.take_kill(1, 1), 1);
        assert_eq!(s.take_kill(1, 9), 1);
        assert_eq!(s.take_kill(0, 9), 1);
        drop((first, safe, other));
        // In use: the estimate follows at once, decays by halves at each
        // end of the timer (which runs while idle ones are there).
        let used: Vec<_> = (0..4).map(|_| s.used_conn()).collect();
        drop(used);
        let _idle = s.idle_ticket(0, false, 6000).unwrap();
        let est = |t| {
            s.purge_timer(t);
            s.conn_counts().need_est
        };
        assert_eq!([est(11001), est(16002), est(21003)], [4, 2, 1]);
        let o = crate::config::ServerOptions {
            pool_purge_delay: std::time::Duration::ZERO,
            ..Default::default()
        };
        let none = super::super::new_server(0, 1, "be", "n".into(), a, o, None);
        assert!(none.idle_ticket(0, false, 1).is_none());
    }
}
