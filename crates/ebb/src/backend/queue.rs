//! Slots (`maxconn`), queues and the hand-over of a freed slot to the
//! first waiting stream.
//!
//! Two kinds of queue, each a short lock taken only when a stream waits
//! or a waiter is served:
//!
//! - each server's queue (streams bound to that server: hash algorithms,
//!   persistence),
//! - the backend's queue (streams that any server may take).
//!
//! **Slots.** A stream that gets a server holds one of its `maxconn` slots
//! until its exchange ends ([`Farm::release`]). A stream that finds every
//! eligible server full waits in a queue, bounded by `timeout queue`
//! (and a server's queue by its `maxqueue`; the backend's has no bound).
//!
//! **Order.** A queue is ordered as HAProxy's: by the stream's priority
//! class first (`set-priority-class`, lower first), then by its arrival
//! time moved by its priority offset (`set-priority-offset`, in
//! milliseconds, lower first), then by its order of arrival. Streams
//! that set neither wait first in, first out. ([`WaitQueue`]; HAProxy
//! keeps the shifted time in 20 bits, so an offset wraps after 8m44s:
//! ebb's does not.)
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

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use sched::{RuntimeHandle, TaskletId};

use super::{Farm, Pick, ServerRt};

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
    /// Its place in its queue: its priority, then its place in the farm's
    /// order of arrival. A freed slot goes to the first (lower key) of its
    /// server queue's and the backend queue's first waiters.
    pub(super) key: QKey,
}

/// A stream's queue priority: HAProxy's priority class (-2047..=2047,
/// lower first) and its arrival time in milliseconds moved by its
/// priority offset (lower first). The default (0, 0) of a test queues
/// in arrival order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Prio {
    pub class: i16,
    pub at_ms: i64,
}

impl Prio {
    /// A stream's priority now: its class, and the scheduler's clock
    /// (ms) moved by its offset.
    pub fn of((class, offset): (i16, i32), ctx: &sched::Ctx) -> Prio {
        let now_ms = i64::try_from(ctx.now_ns() / 1_000_000).unwrap_or(i64::MAX);
        Prio {
            class,
            at_ms: now_ms.saturating_add(i64::from(offset)),
        }
    }
}

/// A waiter's key in its queue: its priority, then its order of arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct QKey {
    prio: Prio,
    seq: u64,
}

/// Streams waiting for a slot, in the order they are served (see the
/// module's introduction).
#[derive(Default)]
pub struct WaitQueue {
    map: BTreeMap<QKey, Arc<Waiter>>,
}

impl WaitQueue {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// How many waiters a new key would have before it (its `%sq`/`%bq`):
    /// all of them when it comes last, as every key does when no stream
    /// sets a priority (no count then).
    fn ahead_of(&self, k: QKey) -> usize {
        match self.map.last_key_value() {
            Some((last, _)) if *last > k => self.map.range(..k).count(),
            _ => self.map.len(),
        }
    }

    fn push(&mut self, w: Arc<Waiter>) {
        self.map.insert(w.key, w);
    }

    pub(super) fn front(&self) -> Option<&Arc<Waiter>> {
        self.map.first_key_value().map(|(_, w)| w)
    }

    pub(super) fn pop_front(&mut self) -> Option<Arc<Waiter>> {
        self.map.pop_first().map(|(_, w)| w)
    }

    /// Takes `w` out; whether it was there.
    fn remove(&mut self, w: &Arc<Waiter>) -> bool {
        match self.map.get(&w.key) {
            Some(x) if Arc::ptr_eq(x, w) => self.map.remove(&w.key).is_some(),
            _ => false,
        }
    }

    /// Takes every waiter out, in order.
    fn drain(&mut self) -> Vec<Arc<Waiter>> {
        std::mem::take(&mut self.map).into_values().collect()
    }
}

impl Waiter {
    /// Hands a slot over if the waiter still waits; returns whether it did.
    pub(super) fn assign(&self, s: &Arc<ServerRt>) -> bool {
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

    pub(super) fn redispatch(&self) {
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

impl Farm {
    /// A waiter for `q` (not in it yet), its `ahead` counted there.
    pub(super) fn waiter(
        &self,
        me: TaskletId,
        handle: RuntimeHandle,
        prio: Prio,
        q: &WaitQueue,
        on_backend: bool,
    ) -> Arc<Waiter> {
        let key = QKey {
            prio,
            seq: self.qseq.fetch_add(1, Ordering::Relaxed),
        };
        Arc::new(Waiter {
            state: Mutex::new(WaitState::Waiting),
            tasklet: me,
            handle,
            ahead: u32::try_from(q.ahead_of(key)).unwrap_or(u32::MAX),
            on_backend,
            key,
        })
    }

    /// Queues on one server (hash algorithms bind a stream to its server).
    pub(super) fn enqueue_server(
        &self,
        i: usize,
        me: TaskletId,
        prio: Prio,
        handle: impl FnOnce() -> RuntimeHandle,
    ) -> Pick {
        self.try_enqueue_server(i, me, prio, handle)
            .unwrap_or_else(|_| self.queue_full(i))
    }

    /// Refuses a stream server `i` was assigned to, its queue at its
    /// `maxqueue`: HAProxy 2.6 counts a failed connection on the server
    /// (and so the backend) and answers 503 (`SQ`).
    pub(super) fn queue_full(&self, i: usize) -> Pick {
        match self.servers.get(i) {
            Some(s) => {
                s.counters.conn_errors.fetch_add(1, Ordering::Relaxed);
                Pick::QueueFull(Arc::clone(s))
            }
            None => Pick::NoServer("no server available"),
        }
    }

    /// [`Farm::enqueue_server`], giving `handle` back when the server's
    /// queue is at its `maxqueue` (the caller may then pick another
    /// server: [`Farm::pick_direct`]).
    pub(super) fn try_enqueue_server<H: FnOnce() -> RuntimeHandle>(
        &self,
        i: usize,
        me: TaskletId,
        prio: Prio,
        handle: H,
    ) -> Result<Pick, H> {
        let s = &self.servers[i];
        let mut q = s.queue.lock().unwrap_or_else(|p| p.into_inner());
        // Counted first, then a last look for a slot (under the lock a
        // releasing stream's slow path takes; its fast path skips the
        // lock, see `release`).
        // Only with nobody queued before it (HAProxy's
        // assign_server_and_queue: a queue not empty means queue behind
        // it, even with a slot free).
        s.waiting.fetch_add(1, Ordering::SeqCst);
        if q.is_empty() && self.try_take(s) {
            s.waiting.fetch_sub(1, Ordering::SeqCst);
            return Ok(Pick::Server(Arc::clone(s)));
        }
        if s.opts.maxqueue.is_some_and(|m| q.len() as u32 >= m) {
            s.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(handle);
        }
        let w = self.waiter(me, handle(), prio, &q, false);
        q.push(Arc::clone(&w));
        s.counters.queued_total.fetch_add(1, Ordering::Relaxed);
        s.counters.qmax.fetch_max(q.len() as u64, Ordering::Relaxed);
        Ok(Pick::Queued(w))
    }

    /// Queues on the backend: any eligible server may hand us a slot.
    pub(super) fn enqueue_backend(
        &self,
        elig: &[usize],
        me: TaskletId,
        prio: Prio,
        handle: impl FnOnce() -> RuntimeHandle,
    ) -> Pick {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        // Counted before the last look for a slot: see `release`.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        // Behind streams already waiting (FIFO, as HAProxy): no last look
        // then; a release serves the queue's head, which every release
        // sees (they count before it) and hands its slot to.
        // A server whose own queue holds streams serves them first.
        let behind = !q.is_empty();
        for &i in elig.iter().filter(|_| !behind) {
            let s = &self.servers[i];
            if s.waiting.load(Ordering::SeqCst) == 0 && self.try_take(s) {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                return Pick::Server(Arc::clone(&self.servers[i]));
            }
        }
        // No bound but `timeout queue`: a server's `maxqueue` bounds only
        // its own queue (HAProxy 2.6 queues a stream no server can take
        // on the backend whatever the servers' maxqueue).
        let w = self.waiter(me, handle(), prio, &q, true);
        q.push(Arc::clone(&w));
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
        self.limit_with(s, 0)
    }

    /// [`Farm::limit`] with `extra` streams more in the backend's load: a
    /// stream asking for a slot before it counts in any queue counts
    /// itself (HAProxy's `beconn` counts a stream from the moment it
    /// enters the backend).
    pub(super) fn limit_with(&self, s: &ServerRt, extra: u32) -> u32 {
        let m = s.maxconn.load(Ordering::Relaxed);
        if m == 0 || (s.minconn == 0 && s.opts.slowstart.is_none()) {
            return m;
        }
        let mut max = m;
        if s.minconn != 0 && s.minconn < m {
            let load = self.load().saturating_add(extra);
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
    pub(super) fn load(&self) -> u32 {
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

    /// Whether a new stream (not yet counted in any queue) may take a
    /// slot of `s` at once: no limit, or nobody in its queue and a slot
    /// free (HAProxy's rule in its balancers and assign_server_and_queue:
    /// a stream never passes those already waiting for the server).
    pub fn takes_new(&self, s: &ServerRt) -> bool {
        let m = self.limit_with(s, 1);
        m == 0 || (s.waiting.load(Ordering::SeqCst) == 0 && s.has_room_under(m))
    }

    /// Takes a slot of `s` for a new stream if [`Farm::takes_new`].
    pub fn try_take_new(&self, s: &ServerRt) -> bool {
        let m = self.limit_with(s, 1);
        (m == 0 || s.waiting.load(Ordering::SeqCst) == 0) && s.try_take_under(m)
    }

    /// Takes a slot of `s` if one is free under [`Farm::limit`].
    pub fn try_take(&self, s: &ServerRt) -> bool {
        s.try_take_under(self.limit(s))
    }

    /// Whether a stream waits (or is about to) for a slot `s` frees.
    pub(super) fn anyone_waits(&self, s: &ServerRt) -> bool {
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
            // The first (by priority, then age) of the two queues' first
            // waiters takes the slot (HAProxy's pendconn_process_next_strm;
            // a tie goes to the server's queue there, to the older here),
            // the backend's queue
            // only for a server the balancer may use (not a backup while
            // an active server is up: HAProxy's `px_ok`).
            let dynamic = s.minconn != 0 || s.opts.slowstart.is_some();
            let mut bq = (self.serves_backend_queue(s)
                && (sq.is_empty() || dynamic || self.waiting.load(Ordering::SeqCst) != 0))
                .then(|| self.queue.lock().unwrap_or_else(|p| p.into_inner()));
            loop {
                let from_backend = match (sq.front(), bq.as_ref().and_then(|q| q.front())) {
                    (Some(a), Some(b)) => b.key < a.key,
                    (Some(_), None) => false,
                    (None, Some(_)) => true,
                    (None, None) => break,
                };
                let w = if from_backend {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    bq.as_mut().and_then(|q| q.pop_front())
                } else {
                    s.waiting.fetch_sub(1, Ordering::SeqCst);
                    sq.pop_front()
                };
                let Some(w) = w else { break };
                // A dynamic limit may have grown with the load: the queues
                // are served while there is room (HAProxy dequeues up to
                // the limit at each release), each waiter with a slot of
                // its own.
                if w.assign(s) && !(dynamic && self.try_take(s)) {
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

    /// Whether a slot `s` frees may go to the backend's queue: `s` is an
    /// active server, or a backup the balancer uses now (no active server
    /// usable, and it is the first usable backup or `option allbackups`).
    fn serves_backend_queue(&self, s: &ServerRt) -> bool {
        if !s.opts.backup {
            return true;
        }
        if self.servers.iter().any(|x| !x.opts.backup && x.usable()) {
            return false;
        }
        self.allbackups
            || (self.servers.iter())
                .find(|x| x.opts.backup && x.usable())
                .is_some_and(|x| x.idx == s.idx)
    }

    /// A waiter gave up: take it out of whichever queue holds it.
    pub fn unqueue(&self, w: &Arc<Waiter>) {
        for s in &self.servers {
            let mut q = s.queue.lock().unwrap_or_else(|p| p.into_inner());
            if q.remove(w) {
                s.waiting.fetch_sub(1, Ordering::SeqCst);
                return;
            }
        }
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.remove(w) {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A server went DOWN or into maintenance: its waiters pick again.
    pub fn redispatch_queue_of(&self, s: &ServerRt) {
        let waiters: Vec<_> = {
            let mut q = s.queue.lock().unwrap_or_else(|p| p.into_inner());
            let n = q.len() as u32;
            s.waiting.fetch_sub(n, Ordering::SeqCst);
            q.drain()
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
}
