//! # The per-thread scheduler
//!
//! A [`Ctx`] is one thread's scheduler: its slab of tasks and tasklets, its
//! run queue, wait queue and tasklet lists, its epoll instance. It never
//! leaves its thread (it is not `Send`), so none of these structures takes
//! a lock, and a task's state may be anything, `Send` or not. Callbacks
//! receive `&mut Ctx` and do everything through it: create, wake, schedule
//! and kill tasks and tasklets, register fds, read `now`.
//!
//! ## Storage
//!
//! Tasks and tasklets share one slab of `Slot`s addressed by
//! `(slot, generation)` ids. A slot holds the callback (boxed), the state
//! flags, the wakeup reasons, and the links of every structure it can be
//! in: the run-queue and wait-queue tree handles (a task can be in both at
//! once, so an I/O wakeup does not move its timer) and an intrusive
//! doubly-linked list link for its class list. Freeing bumps the
//! generation: old ids, old inbox messages and old epoll registrations all
//! become detected no-ops.
//!
//! A callback runs with its box *taken out* of the slot, so the callback
//! can borrow the whole `Ctx` mutably; the box goes back when it returns
//! (or is dropped if the callback returned [`Status::Done`] or killed
//! itself).
//!
//! ## Run queue and wait queue
//!
//! Waking a task inserts it in the run-queue tree with key
//! `rq_ticks + nice * depth` (a wrapping insertion counter, so FIFO among
//! equal nice; a negative nice jumps ahead by that many turns' worth of
//! wakeups, HAProxy's formula). The tree is read from `rq_ticks - 2^31` in
//! circular order. Waking a task already queued only ORs the reason in;
//! waking a running task records the reason and requeues it when the
//! callback returns.
//!
//! The wait queue is keyed by expiry and scanned from `now - 2^31` in
//! circular order. A key is a *lower bound* of the real expiry: moving an
//! expiry later leaves the node (lazy requeue, fixed when it surfaces);
//! moving it earlier reinserts at once. Among timers due in the same turn,
//! one moved later that is already due when its old node surfaces fires at
//! that position (HAProxy does the same); dates are never missed or fired
//! early. A fired timer is consumed (the
//! expiry is reset to eternity) before the task runs with
//! [`Reasons::TIMER`]; the callback arms a new one with
//! [`Ctx::schedule`] or [`Ctx::set_expire`].
//!
//! Tasklets may have a timer too ([`Ctx::tasklet_set_expire`]), in the
//! same wait queue under the same rules. An expired tasklet is queued like
//! any wakeup from outside a callback (urgent, or heavy if flagged) with
//! [`Reasons::TIMER`]; a timer set from its own callback is queued when
//! the callback returns, as for tasks.
//!
//! ## Classes and budgets (one loop turn)
//!
//! ```text
//!  max = depth            ((depth + 3) / 4 if niced tasks are queued)
//!  while max > 0 and work:
//!    budgets among non-empty classes: ceil(max * w / sum(w)),
//!        w = urgent 64, normal 48, bulk 16, heavy 1
//!    heavy (once per turn): 1 in low-latency mode, else 1 + queued/1024,
//!        or 1 + queued/128 when only heavy work waits
//!    pick tasks from the local and shared run queues into `normal`
//!        (older key first, local on ties) up to normal's budget
//!    run urgent, normal, bulk, heavy, each up to its budget, FIFO
//!        (low-latency: before each entry go back to the highest class
//!         with work and budget; return early to refill when a higher
//!         class has work but no budget left)
//! ```
//!
//! A tasklet woken outside any callback (fd event, inbox, init) joins
//! *urgent*; woken by a callback, the class being served; woken by itself
//! while running, *bulk*; woken from another thread, *urgent*; flagged
//! heavy, always *heavy*. An **instant** wakeup puts it at the head of the
//! class being served (urgent outside callbacks), so it runs next.

use crate::activity::Activity;
use crate::profile::{auto_decide, ProfilingMode};
use crate::shared::{
    self, decode, encode, gf, mono_ns, GSlot, Shared, MSG_INSTANT, MSG_TASK, MSG_TASKLET,
};
use crate::sys::{self, Epoll, Events};
use crate::task::{
    Class, Reasons, Status, TaskFn, TaskId, TaskletFn, TaskletId, NB_CLASSES, SHARED_THREAD,
};
use crate::ticks::{self, Tick, ETERNITY};
use ebtree::{Eb32Tree, Handle};
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const NIL: u32 = u32::MAX;

/// epoll events fetched per poll: HAProxy's `tune.maxpollevents` default.
const MAX_POLL_EVENTS: usize = 200;

/// Longest sleep in the poller, ms: a thread wakes at least once a minute
/// even with no timer (DESIGN.md, "The loop").
pub const MAX_POLL_MS: u32 = 60_000;

/// epoll data of the thread's own eventfd.
const EFD_TOKEN: u64 = u64::MAX;

/// Window (in loop turns) of the average loop time that drives `auto`
/// profiling: about 32 ms of reaction at the 1 ms threshold.
const LOOP_AVG_WINDOW: u64 = 32;

/// Slot flags (a decoder is in [`flags_str`]).
mod sf {
    /// The slot holds a task or tasklet.
    pub(super) const LIVE: u16 = 1;
    /// A task (else a tasklet).
    pub(super) const TASK: u16 = 2;
    /// Its callback is running.
    pub(super) const RUNNING: u16 = 4;
    /// Killed while running: freed when the callback returns.
    pub(super) const KILLED: u16 = 8;
    /// Linked in a class list.
    pub(super) const IN_LIST: u16 = 16;
    /// Heavy tasklet: always joins the heavy class.
    pub(super) const HEAVY: u16 = 32;
    /// Task woken while running: requeued when it returns.
    pub(super) const WOKEN_RUN: u16 = 64;
    /// Woken with SIGNAL when a graceful stop starts.
    pub(super) const STOP_HOOK: u16 = 128;
    /// Stand-in for a picked shared task (not counted as live).
    pub(super) const PROXY: u16 = 256;
    /// Self-waking tasklet: always joins the bulk class.
    pub(super) const SELF_WAKING: u16 = 512;
}

/// Decodes slot flags, for debugging.
pub(crate) fn flags_str(f: u16) -> String {
    const N: [&str; 10] = [
        "LIVE",
        "TASK",
        "RUNNING",
        "KILLED",
        "IN_LIST",
        "HEAVY",
        "WOKEN_RUN",
        "STOP_HOOK",
        "PROXY",
        "SELF_WAKING",
    ];
    let v: Vec<&str> = (0..N.len())
        .filter(|b| f & (1 << b) != 0)
        .map(|b| N[b])
        .collect();
    v.join("|")
}

enum Cb {
    None,
    Task(Box<dyn TaskFn>),
    Tasklet(Box<dyn TaskletFn>),
    /// A shared task picked by this thread: `(shared slot, generation)`.
    Proxy(u32, u32),
}

/// One task or tasklet. Kept within one and a half cache lines: the hot
/// fields of a wakeup (gen, flags, links, tree handles) sit together.
struct Slot {
    gen: u32,
    flags: u16,
    /// Class list it is linked in. INVARIANT: meaningful with IN_LIST.
    class: u8,
    nice: i16,
    prof: u16,
    reasons: Reasons,
    events: Events,
    /// Class list links, or the free-list link for a free slot.
    prev: u32,
    next: u32,
    expire: Tick,
    rq: Option<Handle>,
    wq: Option<Handle>,
    /// Monotonic ns of the wakeup, when profiling (0 otherwise).
    wake_ns: u64,
    cb: Cb,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("gen", &self.gen)
            .field("flags", &flags_str(self.flags))
            .field("reasons", &self.reasons)
            .field("expire", &self.expire)
            .finish()
    }
}

// A slab slot must stay small: a thread holds one per connection and
// more, and the loop touches one per callback.
const _: () = assert!(std::mem::size_of::<Slot>() <= 96);

#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// Where a tasklet wakeup puts it in its class list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Tail,
    Head,
    After(u32),
}

/// One thread's scheduler; see the module documentation.
pub struct Ctx {
    tid: usize,
    shared: Arc<Shared>,
    slots: Vec<Slot>,
    free_head: u32,
    /// Live tasks and tasklets (not counting proxies).
    live: usize,
    /// Live ones registered for the stop signal.
    hooked_live: usize,
    lists: [List; NB_CLASSES],
    rq: Eb32Tree<u32>,
    rq_ticks: u32,
    /// Niced tasks in the local run queue.
    niced: u32,
    wq: Eb32Tree<u32>,
    now: Tick,
    /// Running entry's slot, NIL between callbacks.
    current: u32,
    /// Class being served, None outside callbacks.
    current_class: Option<Class>,
    epoll: Epoll,
    events: Vec<libc::epoll_event>,
    depth: u32,
    low_latency: bool,
    prof_active: bool,
    heavy_granted: bool,
    stop_seen: bool,
    /// Sliding sum for the average loop time (µs * window).
    loop_sum: u64,
    loop_start_ns: u64,
    started_ns: u64,
    names: HashMap<&'static str, u16>,
    /// Reused buffer for draining the inbox.
    inbox_buf: Vec<crate::inbox::Msg>,
}

impl Ctx {
    pub(crate) fn new(shared: Arc<Shared>, tid: usize) -> io::Result<Ctx> {
        let r = &shared.threads[tid];
        if r.claimed.swap(true, Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a scheduler context already exists for this thread",
            ));
        }
        // A runtime run again: this thread takes wakeups again.
        r.exited.store(false, Ordering::SeqCst);
        let epoll = match Epoll::new().and_then(|e| {
            e.add(r.efd.fd(), EFD_TOKEN, false, false)?;
            Ok(e)
        }) {
            Ok(e) => e,
            Err(e) => {
                r.claimed.store(false, Ordering::SeqCst);
                return Err(e);
            }
        };
        if let Ok(id) = sys::own_cpu_clock() {
            r.cpu_clock.store(i64::from(id), Ordering::Relaxed);
        }
        let depth = shared.depth;
        let low_latency = shared.low_latency;
        let now = shared.now_tick();
        let now_ns = mono_ns();
        let mut c = Ctx {
            tid,
            shared,
            slots: Vec::new(),
            free_head: NIL,
            live: 0,
            hooked_live: 0,
            lists: [List::EMPTY; NB_CLASSES],
            rq: Eb32Tree::new(),
            rq_ticks: 0,
            niced: 0,
            wq: Eb32Tree::new(),
            now,
            current: NIL,
            current_class: None,
            epoll,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_POLL_EVENTS],
            depth,
            low_latency,
            prof_active: false,
            heavy_granted: false,
            stop_seen: false,
            loop_sum: 0,
            loop_start_ns: now_ns,
            started_ns: now_ns,
            names: HashMap::new(),
            inbox_buf: Vec::new(),
        };
        c.update_profiling();
        // Not harmless from here on: init code runs like a callback.
        c.shared.park(tid);
        c.shared.set_current_worker(Some(tid));
        Ok(c)
    }

    // ------------------------------------------------------------------
    // Accessors
    // ------------------------------------------------------------------

    /// The date of the current loop turn.
    #[inline]
    pub fn now(&self) -> Tick {
        self.now
    }

    /// This thread's number (0-based).
    #[inline]
    pub fn thread_id(&self) -> usize {
        self.tid
    }

    /// Number of threads of the runtime.
    #[inline]
    pub fn nbthread(&self) -> usize {
        self.shared.nbthread()
    }

    /// Whether a graceful (or hard) stop was requested.
    #[inline]
    pub fn stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::Relaxed)
    }

    /// The runtime's handle (stop, remote wakeups, reports).
    pub fn handle(&self) -> crate::RuntimeHandle {
        crate::RuntimeHandle {
            shared: self.shared.clone(),
        }
    }

    /// Live tasks and tasklets owned by this thread.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Whether this thread records profiling data at the moment.
    pub fn profiling_active(&self) -> bool {
        self.prof_active
    }

    /// Counts `n` accepted connections in this thread's activity counters.
    pub fn count_accepts(&self, n: u64) {
        Activity::add(&self.remote().activity.accepts, n);
    }

    #[inline]
    fn remote(&self) -> &shared::Remote {
        &self.shared.threads[self.tid]
    }

    fn intern(&mut self, name: &'static str) -> u16 {
        if let Some(&i) = self.names.get(name) {
            return i;
        }
        let i = self.shared.registry.intern(name);
        self.names.insert(name, i);
        i
    }

    // ------------------------------------------------------------------
    // Slab
    // ------------------------------------------------------------------

    fn alloc(&mut self, flags: u16, prof: u16, cb: Cb) -> usize {
        let slot = Slot {
            gen: 0,
            flags,
            class: 0,
            nice: 0,
            prof,
            reasons: Reasons::NONE,
            events: Events::NONE,
            prev: NIL,
            next: NIL,
            expire: ETERNITY,
            rq: None,
            wq: None,
            wake_ns: 0,
            cb,
        };
        if flags & sf::PROXY == 0 {
            self.live += 1;
        }
        if self.free_head != NIL {
            let i = self.free_head as usize;
            self.free_head = self.slots[i].next;
            let gen = self.slots[i].gen;
            self.slots[i] = Slot { gen, ..slot };
            i
        } else {
            self.slots.push(slot);
            self.slots.len() - 1
        }
    }

    /// Index of a live, not killed task of this thread.
    #[inline]
    fn task_idx(&self, id: TaskId) -> Option<usize> {
        if id.thread as usize != self.tid {
            return None;
        }
        let s = self.slots.get(id.slot as usize)?;
        (s.gen == id.gen && s.flags & (sf::LIVE | sf::TASK | sf::KILLED) == (sf::LIVE | sf::TASK))
            .then_some(id.slot as usize)
    }

    /// Index of a live, not killed tasklet of this thread.
    #[inline]
    fn tasklet_idx(&self, id: TaskletId) -> Option<usize> {
        if id.thread as usize != self.tid {
            return None;
        }
        self.tasklet_idx_raw(id.slot, id.gen)
    }

    #[inline]
    fn tasklet_idx_raw(&self, slot: u32, gen: u32) -> Option<usize> {
        let s = self.slots.get(slot as usize)?;
        (s.gen == gen && s.flags & (sf::LIVE | sf::TASK | sf::KILLED | sf::PROXY) == sf::LIVE)
            .then_some(slot as usize)
    }

    /// Unlinks a slot from everything and frees it; returns the callback
    /// so that it is dropped by the caller.
    fn free_slot(&mut self, i: usize) -> Cb {
        if self.slots[i].flags & sf::IN_LIST != 0 {
            self.list_remove(i);
        }
        let s = &mut self.slots[i];
        let rq = s.rq.take();
        let wq = s.wq.take();
        let flags = s.flags;
        let niced = s.nice != 0;
        let cb = std::mem::replace(&mut s.cb, Cb::None);
        s.gen = s.gen.wrapping_add(1);
        s.flags = 0;
        s.next = self.free_head;
        self.free_head = i as u32;
        if let Some(h) = rq {
            self.rq.delete(h);
            self.count_queued(i, false);
            if niced {
                self.niced = self.niced.saturating_sub(1);
            }
        }
        if let Some(h) = wq {
            self.wq.delete(h);
        }
        if flags & sf::PROXY == 0 {
            self.live -= 1;
        }
        if flags & sf::STOP_HOOK != 0 {
            self.hooked_live -= 1;
        }
        cb
    }

    // ------------------------------------------------------------------
    // Class lists (intrusive, over slab indices)
    // ------------------------------------------------------------------

    /// Keeps the per-name count of queued entries (`show tasks`). Shared
    /// tasks picked by this thread are counted by the shared queue's
    /// owner, not here.
    #[inline(always)]
    fn count_queued(&self, i: usize, up: bool) {
        let s = &self.slots[i];
        if s.flags & sf::PROXY == 0 {
            self.remote().prof.queued(s.prof, up);
        }
    }

    fn list_link(&mut self, c: Class, i: usize, place: Place) {
        let ci = c as usize;
        let i32_ = i as u32;
        let (prev, next) = match place {
            Place::Tail => (self.lists[ci].tail, NIL),
            Place::Head => (NIL, self.lists[ci].head),
            Place::After(a) => (a, self.slots[a as usize].next),
        };
        {
            let s = &mut self.slots[i];
            s.prev = prev;
            s.next = next;
            s.class = ci as u8;
            s.flags |= sf::IN_LIST;
        }
        self.count_queued(i, true);
        if prev == NIL {
            self.lists[ci].head = i32_;
        } else {
            self.slots[prev as usize].next = i32_;
        }
        if next == NIL {
            self.lists[ci].tail = i32_;
        } else {
            self.slots[next as usize].prev = i32_;
        }
        self.lists[ci].len += 1;
    }

    fn list_remove(&mut self, i: usize) {
        let (prev, next, ci) = {
            let s = &mut self.slots[i];
            s.flags &= !sf::IN_LIST;
            (s.prev, s.next, s.class as usize)
        };
        self.count_queued(i, false);
        if prev == NIL {
            self.lists[ci].head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[ci].tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        self.lists[ci].len -= 1;
    }

    fn list_pop(&mut self, c: Class) -> Option<usize> {
        let h = self.lists[c as usize].head;
        if h == NIL {
            return None;
        }
        self.list_remove(h as usize);
        Some(h as usize)
    }

    /// Number of entries queued in a class list.
    pub fn class_len(&self, c: Class) -> usize {
        self.lists[c as usize].len as usize
    }

    // ------------------------------------------------------------------
    // Tasklets
    // ------------------------------------------------------------------

    /// Creates a tasklet from a closure (not queued: wake it to run it).
    pub fn new_tasklet<F>(&mut self, name: &'static str, f: F) -> TaskletId
    where
        F: FnMut(&mut Ctx, TaskletId, Reasons) -> Status + 'static,
    {
        self.new_tasklet_obj(name, f)
    }

    /// Creates a tasklet from any [`TaskletFn`] (a connection's state, say).
    pub fn new_tasklet_obj(&mut self, name: &'static str, f: impl TaskletFn) -> TaskletId {
        let prof = self.intern(name);
        let i = self.alloc(sf::LIVE, prof, Cb::Tasklet(Box::new(f)));
        TaskletId {
            thread: self.tid as u16,
            slot: i as u32,
            gen: self.slots[i].gen,
        }
    }

    /// Flags a tasklet heavy (it then always joins the heavy class).
    pub fn set_heavy(&mut self, id: TaskletId, heavy: bool) {
        if let Some(i) = self.tasklet_idx(id) {
            if heavy {
                self.slots[i].flags |= sf::HEAVY;
            } else {
                self.slots[i].flags &= !sf::HEAVY;
            }
        }
    }

    /// Flags a tasklet self-waking (HAProxy's `TASK_SELF_WAKING`): it then
    /// always joins the bulk class, like a tasklet that wakes itself.
    pub fn set_self_waking(&mut self, id: TaskletId, on: bool) {
        if let Some(i) = self.tasklet_idx(id) {
            if on {
                self.slots[i].flags |= sf::SELF_WAKING;
            } else {
                self.slots[i].flags &= !sf::SELF_WAKING;
            }
        }
    }

    /// Whether `id` names a live tasklet of this thread.
    pub fn tasklet_alive(&self, id: TaskletId) -> bool {
        self.tasklet_idx(id).is_some()
    }

    /// Wakes a tasklet (any thread's: other threads' go through their
    /// inbox). A no-op for a stale id or one already queued.
    #[inline]
    pub fn tasklet_wakeup(&mut self, id: TaskletId) {
        self.tasklet_wakeup_why(id, Reasons::OTHER);
    }

    /// Wakes a tasklet with explicit reasons.
    pub fn tasklet_wakeup_why(&mut self, id: TaskletId, why: Reasons) {
        if id.thread as usize != self.tid {
            self.remote_tasklet(id, why, false);
            return;
        }
        if let Some(i) = self.tasklet_idx(id) {
            self.tasklet_wake_local(i, why, Place::Tail);
        }
    }

    /// Instant wakeup: the tasklet runs next (head of the class being
    /// served). From another thread it goes to the head of the owner's
    /// urgent list.
    pub fn tasklet_wakeup_instant(&mut self, id: TaskletId) {
        if id.thread as usize != self.tid {
            self.remote_tasklet(id, Reasons::OTHER, true);
            return;
        }
        if let Some(i) = self.tasklet_idx(id) {
            if self.slots[i].flags & sf::IN_LIST != 0 {
                self.list_remove(i);
            }
            self.tasklet_wake_local(i, Reasons::OTHER, Place::Head);
        }
    }

    /// Wakes `id` right after `after` (or at the head when `after` is
    /// `None` or not queued) in the class being served, and returns `id`:
    /// chaining `w = wakeup_after(w, x)` keeps several tasklets in order
    /// ahead of the rest. Local tasklets only (others: plain wakeup).
    pub fn tasklet_wakeup_after(
        &mut self,
        after: Option<TaskletId>,
        id: TaskletId,
    ) -> Option<TaskletId> {
        if id.thread as usize != self.tid {
            self.remote_tasklet(id, Reasons::OTHER, false);
            return Some(id);
        }
        let i = self.tasklet_idx(id)?;
        if self.slots[i].flags & sf::IN_LIST != 0 {
            self.list_remove(i);
        }
        let place = match after.and_then(|a| self.tasklet_idx(a)) {
            Some(a) if self.slots[a].flags & sf::IN_LIST != 0 => Place::After(a as u32),
            _ => Place::Head,
        };
        self.tasklet_wake_local(i, Reasons::OTHER, place);
        Some(id)
    }

    fn remote_tasklet(&self, id: TaskletId, why: Reasons, instant: bool) {
        let kind = MSG_TASKLET | if instant { MSG_INSTANT } else { 0 };
        self.shared
            .send(id.thread as usize, encode(id.slot, id.gen, kind, why));
    }

    /// Queues a local tasklet by the class rules (module documentation).
    fn tasklet_wake_local(&mut self, i: usize, why: Reasons, place: Place) {
        let s = &mut self.slots[i];
        s.reasons |= why;
        if s.flags & sf::IN_LIST != 0 {
            return;
        }
        if self.prof_active {
            s.wake_ns = mono_ns();
        }
        let class = if s.flags & sf::HEAVY != 0 {
            Class::Heavy
        } else if self.current == i as u32 || s.flags & sf::SELF_WAKING != 0 {
            Class::Bulk
        } else {
            match place {
                Place::After(a) => match self.slots[a as usize].class {
                    0 => Class::Urgent,
                    1 => Class::Normal,
                    2 => Class::Bulk,
                    _ => Class::Heavy,
                },
                _ => self.current_class.unwrap_or(Class::Urgent),
            }
        };
        let place = match place {
            Place::After(a) if self.slots[a as usize].class != class as u8 => Place::Head,
            p => p,
        };
        self.list_link(class, i, place);
    }

    /// Whether a tasklet is queued to run.
    pub fn tasklet_queued(&self, id: TaskletId) -> bool {
        self.tasklet_idx(id)
            .is_some_and(|i| self.slots[i].flags & sf::IN_LIST != 0)
    }

    /// Kills a tasklet: unqueued and freed now, or when its callback
    /// returns if it is running. Stale ids are ignored.
    pub fn kill_tasklet(&mut self, id: TaskletId) {
        if let Some(i) = self.tasklet_idx(id) {
            if self.slots[i].flags & sf::RUNNING != 0 {
                if self.slots[i].flags & sf::IN_LIST != 0 {
                    self.list_remove(i);
                }
                self.slots[i].flags |= sf::KILLED;
            } else {
                drop(self.free_slot(i));
            }
        }
    }

    /// A tasklet's expiry date (eternity if none, or for a stale id).
    pub fn tasklet_expire(&self, id: TaskletId) -> Tick {
        self.tasklet_idx(id)
            .map(|i| self.slots[i].expire)
            .unwrap_or(ETERNITY)
    }

    /// Sets a tasklet's expiry date: when it is reached the tasklet runs
    /// with [`Reasons::TIMER`] (joining *urgent*, or *heavy* if flagged,
    /// like any wakeup from outside a callback). The rules are the tasks'
    /// ([`Self::set_expire`]): later than before, lazy; earlier, requeued
    /// now; eternity, dropped at the next scan. A fired timer is consumed
    /// before the callback runs; set from the tasklet's own callback, the
    /// timer is queued when it returns. Wakeups and the timer coexist: a
    /// wakeup does not move the timer, a timer firing while the tasklet is
    /// queued only ORs [`Reasons::TIMER`] in. Local tasklets only: another
    /// thread's id is ignored.
    pub fn tasklet_set_expire(&mut self, id: TaskletId, when: Tick) {
        if let Some(i) = self.tasklet_idx(id) {
            self.slots[i].expire = when;
            if self.slots[i].flags & sf::RUNNING == 0 {
                self.queue_local(i);
            }
        }
    }

    /// Makes the tasklet expire no later than `when`: its expiry becomes
    /// the earlier of the current one and `when` (as [`Self::schedule`]).
    pub fn tasklet_schedule(&mut self, id: TaskletId, when: Tick) {
        let e = ticks::first(self.tasklet_expire(id), when);
        self.tasklet_set_expire(id, e);
    }

    /// Cancels a tasklet's timer now: the expiry becomes eternity and the
    /// wait-queue node is removed at once (as [`Self::unqueue`]).
    pub fn tasklet_unqueue(&mut self, id: TaskletId) {
        if let Some(i) = self.tasklet_idx(id) {
            self.slots[i].expire = ETERNITY;
            if let Some(h) = self.slots[i].wq.take() {
                self.wq.delete(h);
            }
        }
    }

    /// Takes the fd events accumulated for a tasklet since the last call.
    pub fn take_events(&mut self, id: TaskletId) -> Events {
        match self.tasklet_idx(id) {
            Some(i) => std::mem::take(&mut self.slots[i].events),
            None => Events::NONE,
        }
    }

    // ------------------------------------------------------------------
    // Tasks
    // ------------------------------------------------------------------

    /// Creates a task bound to this thread from a closure (not queued, no
    /// timer).
    pub fn new_task<F>(&mut self, name: &'static str, f: F) -> TaskId
    where
        F: FnMut(&mut Ctx, TaskId, Reasons) -> Status + 'static,
    {
        self.new_task_obj(name, f)
    }

    /// Creates a task bound to this thread from any [`TaskFn`].
    pub fn new_task_obj(&mut self, name: &'static str, f: impl TaskFn) -> TaskId {
        let prof = self.intern(name);
        let i = self.alloc(sf::LIVE | sf::TASK, prof, Cb::Task(Box::new(f)));
        TaskId {
            thread: self.tid as u16,
            slot: i as u32,
            gen: self.slots[i].gen,
        }
    }

    /// Creates a task that may run on any thread of `mask` (bit n = thread
    /// n; bits beyond the runtime's threads are ignored). Its state must be
    /// `Send`. It lives in the shared queues, under their lock.
    pub fn new_shared_task<F>(&mut self, name: &'static str, mask: u64, f: F) -> TaskId
    where
        F: FnMut(&mut Ctx, TaskId, Reasons) -> Status + Send + 'static,
    {
        self.new_shared_task_obj(name, mask, f)
    }

    /// Creates a shared task from any `TaskFn + Send`.
    pub fn new_shared_task_obj(
        &mut self,
        name: &'static str,
        mask: u64,
        f: impl TaskFn + Send,
    ) -> TaskId {
        let prof = self.intern(name);
        new_shared_task(&self.shared, prof, mask, Box::new(f))
    }

    /// Whether `id` names a live task (of this thread, or shared).
    pub fn task_alive(&self, id: TaskId) -> bool {
        if id.is_shared() {
            return self.shared.lock_gq().idx(id).is_some();
        }
        self.task_idx(id).is_some()
    }

    /// Sets a task's nice value (clamped to -1024..=1024); applies at its
    /// next wakeup.
    pub fn set_nice(&mut self, id: TaskId, nice: i32) {
        let n = nice.clamp(-1024, 1024) as i16;
        if id.is_shared() {
            let mut q = self.shared.lock_gq();
            if let Some(i) = q.idx(id) {
                q.slots[i].nice = n;
            }
        } else if let Some(i) = self.task_idx(id) {
            self.slots[i].nice = n;
        }
    }

    /// Wakes a task with `why` (any thread's or shared). Queued: the reason
    /// is ORed in. Running: requeued when its callback returns.
    pub fn wakeup(&mut self, id: TaskId, why: Reasons) {
        if id.thread as usize == self.tid {
            if let Some(i) = self.task_idx(id) {
                self.task_wake_local(i, why);
            }
        } else {
            self.shared.wake_task(id, why);
        }
    }

    fn task_wake_local(&mut self, i: usize, why: Reasons) {
        let depth = self.depth;
        let s = &mut self.slots[i];
        s.reasons |= why;
        if s.flags & sf::RUNNING != 0 {
            s.flags |= sf::WOKEN_RUN;
            return;
        }
        if s.rq.is_some() || s.flags & sf::IN_LIST != 0 {
            return;
        }
        if self.prof_active {
            s.wake_ns = mono_ns();
        }
        let mut key = self.rq_ticks;
        self.rq_ticks = self.rq_ticks.wrapping_add(1);
        if s.nice != 0 {
            // HAProxy: a niced task moves by nice * runqueue-depth positions.
            key = key.wrapping_add((i32::from(s.nice) * depth as i32) as u32);
            self.niced += 1;
        }
        let h = self.rq.insert(key, i as u32);
        self.slots[i].rq = Some(h);
        self.count_queued(i, true);
    }

    /// A task's expiry date (eternity if none, or for a stale id).
    pub fn expire(&self, id: TaskId) -> Tick {
        if id.is_shared() {
            let q = self.shared.lock_gq();
            return q.idx(id).map(|i| q.slots[i].expire).unwrap_or(ETERNITY);
        }
        self.task_idx(id)
            .map(|i| self.slots[i].expire)
            .unwrap_or(ETERNITY)
    }

    /// Sets a task's expiry date and queues it (HAProxy: `t->expire = x;
    /// task_queue(t)`). Later than before: lazy; earlier: requeued now;
    /// eternity: the timer is dropped at its next scan.
    pub fn set_expire(&mut self, id: TaskId, when: Tick) {
        if id.is_shared() {
            let now = self.now;
            let mut q = self.shared.lock_gq();
            if let Some(i) = q.idx(id) {
                q.slots[i].expire = when;
                if q.slots[i].flags & gf::RUNNING == 0 {
                    Shared::gq_queue_locked(&mut q, i);
                }
                self.shared.gq_publish(&q, now);
            }
            return;
        }
        if let Some(i) = self.task_idx(id) {
            self.slots[i].expire = when;
            if self.slots[i].flags & sf::RUNNING == 0 {
                self.queue_local(i);
            }
        }
    }

    /// Cancels a task's timer now (HAProxy's `task_unlink_wq`): the expiry
    /// becomes eternity and the wait-queue node is removed at once, where
    /// `set_expire(id, ETERNITY)` leaves it for the next scan.
    pub fn unqueue(&mut self, id: TaskId) {
        if id.is_shared() {
            let now = self.now;
            let mut q = self.shared.lock_gq();
            if let Some(i) = q.idx(id) {
                q.slots[i].expire = ETERNITY;
                if let Some(h) = q.slots[i].wq.take() {
                    q.wq.delete(h);
                }
                self.shared.gq_publish(&q, now);
            }
            return;
        }
        if let Some(i) = self.task_idx(id) {
            self.slots[i].expire = ETERNITY;
            if let Some(h) = self.slots[i].wq.take() {
                self.wq.delete(h);
            }
        }
    }

    /// Queues the task's current expiry in the wait queue (`task_queue`).
    pub fn queue(&mut self, id: TaskId) {
        let e = self.expire(id);
        self.set_expire(id, e);
    }

    /// Makes the task expire no later than `when` (`task_schedule`): its
    /// expiry becomes the earlier of the current one and `when`.
    pub fn schedule(&mut self, id: TaskId, when: Tick) {
        let e = ticks::first(self.expire(id), when);
        self.set_expire(id, e);
    }

    fn queue_local(&mut self, i: usize) {
        let exp = self.slots[i].expire;
        if !ticks::is_set(exp) {
            return;
        }
        match self.slots[i]
            .wq
            .and_then(|h| self.wq.key(h).map(|k| (h, k)))
        {
            Some((h, k)) => {
                if ticks::is_lt(exp, k) {
                    self.wq.requeue(h, exp);
                }
            }
            None => {
                let h = self.wq.insert(exp, i as u32);
                self.slots[i].wq = Some(h);
            }
        }
    }

    /// Kills a task: freed now, or when its callback returns if running.
    /// Shared tasks held by another thread are freed by that thread.
    pub fn kill(&mut self, id: TaskId) {
        if id.is_shared() {
            kill_shared(&self.shared, id);
            return;
        }
        if let Some(i) = self.task_idx(id) {
            if self.slots[i].flags & sf::RUNNING != 0 {
                self.slots[i].flags |= sf::KILLED;
            } else {
                drop(self.free_slot(i));
            }
        }
    }

    // ------------------------------------------------------------------
    // Stop hooks
    // ------------------------------------------------------------------

    fn hook(&mut self, i: usize) {
        if self.slots[i].flags & sf::STOP_HOOK == 0 {
            self.slots[i].flags |= sf::STOP_HOOK;
            self.hooked_live += 1;
        }
        if self.stop_seen {
            self.wake_hooked(i);
        }
    }

    /// Registers a task to be woken with [`Reasons::SIGNAL`] when a
    /// graceful stop starts. While any registered task or tasklet of a
    /// thread lives, a graceful stop waits for it. Thread-bound tasks only
    /// (a shared task's id is ignored).
    pub fn on_stop(&mut self, id: TaskId) {
        if let Some(i) = self.task_idx(id) {
            self.hook(i);
        }
    }

    /// Registers a tasklet like [`Self::on_stop`].
    pub fn on_stop_tasklet(&mut self, id: TaskletId) {
        if let Some(i) = self.tasklet_idx(id) {
            self.hook(i);
        }
    }

    fn wake_hooked(&mut self, i: usize) {
        if self.slots[i].flags & sf::TASK != 0 {
            self.task_wake_local(i, Reasons::SIGNAL);
        } else {
            self.tasklet_wake_local(i, Reasons::SIGNAL, Place::Tail);
        }
    }

    // ------------------------------------------------------------------
    // File descriptors
    // ------------------------------------------------------------------

    /// Registers `fd` with this thread's epoll, edge-triggered, for the
    /// tasklet `id`: readiness wakes it with [`Reasons::IO`] (urgent class)
    /// and [`Self::take_events`] tells what fired. `write` also watches
    /// writability. Once per connection: no further `epoll_ctl` is needed.
    pub fn register_fd(&mut self, fd: RawFd, id: TaskletId, write: bool) -> io::Result<()> {
        if self.tasklet_idx(id).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "register_fd: not a live tasklet of this thread",
            ));
        }
        let data = (u64::from(id.slot) << 32) | u64::from(id.gen);
        self.epoll.add(fd, data, true, write)
    }

    /// Removes `fd` from this thread's epoll (before closing it).
    pub fn deregister_fd(&mut self, fd: RawFd) -> io::Result<()> {
        self.epoll.delete(fd)
    }

    // ------------------------------------------------------------------
    // Isolation
    // ------------------------------------------------------------------

    /// Runs `f` while every other thread of the runtime is parked at a safe
    /// point of its loop (between two turns, or polling).
    pub fn isolate<R>(&mut self, f: impl FnOnce(&mut Ctx) -> R) -> R {
        let shared = self.shared.clone();
        let tid = self.tid;
        shared.isolate(Some(tid), || f(self))
    }

    // ------------------------------------------------------------------
    // The loop
    // ------------------------------------------------------------------

    /// Runs the loop until the thread has nothing left, or the stop rules
    /// say it is done (see [`crate::runtime`]).
    pub fn run(&mut self) -> io::Result<()> {
        let r = self.run_inner();
        let rem = self.remote();
        rem.exited.store(true, Ordering::SeqCst);
        rem.harmless.store(true, Ordering::SeqCst);
        rem.sleep.awake();
        r
    }

    fn run_inner(&mut self) -> io::Result<()> {
        self.started_ns = mono_ns();
        self.shared.park(self.tid);
        loop {
            if self.should_exit() {
                return Ok(());
            }
            self.turn(true)?;
        }
    }

    /// Whether the thread is done: hard stop; graceful stop with every
    /// registered task finished; or nothing left at all.
    pub fn should_exit(&self) -> bool {
        if self.shared.hard_stop.load(Ordering::Relaxed) {
            return true;
        }
        if self.stop_seen && self.hooked_live == 0 {
            return true;
        }
        self.live == 0 && self.shared.gq_live.load(Ordering::Relaxed) == 0
    }

    /// One loop turn: inbox, timers, runnable work by class budgets, then a
    /// poll (sleeping until the next timer if `may_sleep` and nothing is
    /// left to run; else a non-blocking poll). Returns the number of
    /// callbacks run.
    pub fn turn(&mut self, may_sleep: bool) -> io::Result<usize> {
        self.loop_start_ns = mono_ns();
        self.now = self.shared.now_tick();
        self.update_profiling();
        self.shared.park(self.tid);
        self.check_stop();
        self.drain_inbox();
        self.wake_expired();
        let (ran, exhausted) = self.process_runnable();
        {
            let a = &self.remote().activity;
            Activity::add(&a.loops, 1);
            if ran == 0 {
                Activity::add(&a.empty_rq, 1);
            }
            if exhausted {
                Activity::add(&a.long_rq, 1);
            }
        }
        self.account_loop();
        #[cfg(all(feature = "strict", debug_assertions))]
        self.check_invariants();
        let timeout = if may_sleep { self.poll_timeout() } else { 0 };
        self.poll(timeout)?;
        Ok(ran)
    }

    /// Turns until nothing is runnable and no timer is due (never sleeps);
    /// for tests and tools driving a context by hand. Returns the number of
    /// callbacks run. Stops after `max_turns` turns.
    pub fn run_until_idle(&mut self, max_turns: usize) -> io::Result<usize> {
        let mut total = 0;
        for _ in 0..max_turns {
            let ran = self.turn(false)?;
            total += ran;
            if ran == 0 && !self.has_runnable() {
                break;
            }
        }
        Ok(total)
    }

    fn check_stop(&mut self) {
        if self.stop_seen || !self.shared.stopping.load(Ordering::Relaxed) {
            return;
        }
        self.stop_seen = true;
        for i in 0..self.slots.len() {
            let f = self.slots[i].flags;
            if f & sf::LIVE != 0 && f & sf::STOP_HOOK != 0 && f & sf::KILLED == 0 {
                self.wake_hooked(i);
            }
        }
    }

    fn drain_inbox(&mut self) {
        // Bounded by one ring's worth per turn (plus what overflowed) so
        // that a flood of remote wakeups cannot starve this thread's own
        // work.
        let mut batch = std::mem::take(&mut self.inbox_buf);
        batch.clear();
        let n = self
            .remote()
            .inbox
            .pop_batch(&mut batch, crate::inbox::DEFAULT_CAPACITY) as u64;
        let now32 = if self.prof_active { mono_ns() } else { 0 };
        for &m in &batch {
            let sent = (m.b >> 32) as u32;
            let wake_at = if sent != 0 && now32 != 0 {
                now32.saturating_sub(u64::from((now32 as u32).wrapping_sub(sent)))
            } else {
                0
            };
            let (slot, gen, kind, why) = decode(m);
            if kind & MSG_TASK != 0 {
                let id = TaskId {
                    thread: self.tid as u16,
                    slot,
                    gen,
                };
                if let Some(i) = self.task_idx(id) {
                    self.task_wake_local(i, why);
                    self.backdate_wakeup(i, wake_at);
                }
            } else if let Some(i) = self.tasklet_idx_raw(slot, gen) {
                // Woken from another thread: urgent, whatever is served.
                let s = &mut self.slots[i];
                s.reasons |= why;
                let instant = kind & MSG_INSTANT != 0;
                if s.flags & sf::IN_LIST != 0 {
                    if !instant {
                        continue;
                    }
                    self.list_remove(i);
                }
                if self.prof_active {
                    self.slots[i].wake_ns = mono_ns();
                }
                let class = if self.slots[i].flags & sf::HEAVY != 0 {
                    Class::Heavy
                } else {
                    Class::Urgent
                };
                let place = if instant { Place::Head } else { Place::Tail };
                self.list_link(class, i, place);
                self.backdate_wakeup(i, wake_at);
            }
        }
        self.inbox_buf = batch;
        if n != 0 {
            Activity::add(&self.remote().activity.xthr_wake, n);
        }
    }

    /// Moves a queued entry's wakeup date back to when a remote thread sent
    /// the wakeup (profiling only).
    #[inline]
    fn backdate_wakeup(&mut self, i: usize, at: u64) {
        let s = &mut self.slots[i];
        if at != 0 && s.wake_ns != 0 && at < s.wake_ns {
            s.wake_ns = at;
        }
    }

    /// Wakes expired timers, local then shared, at most `depth` each.
    fn wake_expired(&mut self) {
        let now = self.now;
        let mut woken = 0u64;
        let mut budget = self.depth;
        while budget > 0 {
            let Some(i) = pop_expired(&mut self.wq, &mut self.slots, now) else {
                break;
            };
            if self.slots[i].flags & sf::TASK != 0 {
                self.task_wake_local(i, Reasons::TIMER);
            } else {
                // Outside any callback: joins urgent (heavy if flagged).
                self.tasklet_wake_local(i, Reasons::TIMER, Place::Tail);
            }
            woken += 1;
            budget -= 1;
        }
        let next = self.shared.gq_wq_next.load(Ordering::SeqCst);
        if ticks::is_expired(next, now) {
            woken += self.wake_expired_shared();
        }
        if woken != 0 {
            Activity::add(&self.remote().activity.wake_tasks, woken);
        }
    }

    #[cold]
    fn wake_expired_shared(&mut self) -> u64 {
        let now = self.now;
        let prof = self.prof_active;
        let mut masks = 0u64;
        let mut woken = 0;
        {
            let sh = self.shared.clone();
            let mut q = sh.lock_gq();
            let mut budget = self.depth;
            while budget > 0 {
                let gq = &mut *q;
                let Some(i) = pop_expired(&mut gq.wq, &mut gq.slots, now) else {
                    break;
                };
                if let Some(m) = sh.gq_wakeup_locked(&mut q, i, Reasons::TIMER, prof) {
                    masks |= m;
                }
                woken += 1;
                budget -= 1;
            }
            sh.gq_publish(&q, now);
        }
        if masks & !(1u64 << self.tid) != 0 {
            self.shared.notify_mask(masks & !(1u64 << self.tid));
        }
        woken
    }

    /// Whether some shared task may be waiting for this thread.
    #[inline]
    fn shared_rq_work(&self) -> bool {
        self.shared.gq_rq_threads.load(Ordering::Relaxed) & (1u64 << self.tid) != 0
    }

    fn has_runnable(&self) -> bool {
        self.lists.iter().any(|l| l.len != 0) || !self.rq.is_empty() || self.shared_rq_work()
    }

    /// Runs runnable work by class budgets; returns (entries run, whether
    /// the turn's budget ran out with work left).
    fn process_runnable(&mut self) -> (usize, bool) {
        let mut max = if self.niced != 0 || self.shared_niced() {
            // Niced tasks present: shorter turns so that priorities take
            // effect sooner (HAProxy's (depth + 3) / 4).
            self.depth.div_ceil(4)
        } else {
            self.depth
        };
        self.heavy_granted = false;
        let mut done = 0usize;
        while max > 0 {
            let lens = [
                self.lists[0].len,
                self.lists[1].len,
                self.lists[2].len,
                self.lists[3].len,
            ];
            let tree_work = !self.rq.is_empty() || self.shared_rq_work();
            let active = [
                lens[0] != 0,
                lens[1] != 0 || tree_work,
                lens[2] != 0,
                lens[3] != 0 && !self.heavy_granted,
            ];
            if !active.iter().any(|&a| a) {
                break;
            }
            let sum: u32 = Class::ALL
                .iter()
                .filter(|c| active[**c as usize])
                .map(|c| c.weight())
                .sum();
            let mut budgets = [0u32; NB_CLASSES];
            for c in Class::ALL {
                if active[c as usize] {
                    budgets[c as usize] = (max * c.weight()).div_ceil(sum);
                }
            }
            if active[3] {
                let q = lens[3];
                let only_heavy = !active[0] && !active[1] && !active[2];
                budgets[3] = if self.low_latency {
                    1
                } else if only_heavy {
                    // Only handshakes wait: let a backlog drain faster.
                    1 + q / 128
                } else {
                    1 + q / 1024
                };
                self.heavy_granted = true;
            }
            if budgets[1] > lens[1] {
                self.pick_from_trees(budgets[1] - lens[1]);
            }
            let n = self.run_lists(&mut budgets, max);
            done += n as usize;
            max = max.saturating_sub(n);
            if n == 0 {
                break;
            }
        }
        (done, max == 0 && self.has_runnable())
    }

    fn shared_niced(&self) -> bool {
        // Only looked at when shared tasks are queued.
        self.shared_rq_work() && self.shared.lock_gq().niced != 0
    }

    /// Moves up to `n` tasks from the local and shared run queues to the
    /// tail of the normal list, older key first (local on ties).
    fn pick_from_trees(&mut self, n: u32) {
        let lstart = self.rq_ticks.wrapping_sub(ticks::TICK_HALF);
        let mask = 1u64 << self.tid;
        let sh = self.shared.clone();
        let mut gq = if self.shared_rq_work() {
            Some(sh.lock_gq())
        } else {
            None
        };
        let gstart = gq
            .as_ref()
            .map(|q| q.rq_ticks.wrapping_sub(ticks::TICK_HALF))
            .unwrap_or(0);
        let mut picked = 0;
        while picked < n {
            let l = self
                .rq
                .lookup_ge_wrap(lstart)
                .and_then(|h| self.rq.key(h).map(|k| (h, k)));
            let g = gq.as_ref().and_then(|q| {
                q.rq.lookup_ge_wrap_in_scope(gstart, mask)
                    .and_then(|h| q.rq.key(h).map(|k| (h, k)))
            });
            let take_local = match (l, g) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                // Keys from two counters: the older (wrap-safe) wins.
                (Some((_, lk)), Some((_, gk))) => {
                    (lk.wrapping_sub(lstart)) <= (gk.wrapping_sub(gstart))
                }
            };
            if take_local {
                let Some((h, _)) = l else { break };
                let Some(i) = self.rq.delete(h) else { break };
                let i = i as usize;
                self.slots[i].rq = None;
                self.count_queued(i, false);
                if self.slots[i].nice != 0 {
                    self.niced = self.niced.saturating_sub(1);
                }
                self.list_link(Class::Normal, i, Place::Tail);
            } else {
                let (Some((h, _)), Some(q)) = (g, gq.as_mut()) else {
                    break;
                };
                let Some(gi) = q.rq.delete(h) else { break };
                let gmask = q.slots[gi as usize].mask;
                q.rq_account(gmask, false);
                let s = &mut q.slots[gi as usize];
                s.rq = None;
                s.flags |= gf::PICKED;
                let gen = s.gen;
                if s.nice != 0 {
                    q.niced = q.niced.saturating_sub(1);
                }
                let i = self.alloc(sf::LIVE | sf::TASK | sf::PROXY, 0, Cb::Proxy(gi, gen));
                self.list_link(Class::Normal, i, Place::Tail);
            }
            picked += 1;
        }
        if let Some(q) = gq {
            sh.gq_publish(&q, self.now);
        }
    }

    /// Runs entries from the class lists within `budgets`, at most `max`;
    /// returns how many ran.
    fn run_lists(&mut self, budgets: &mut [u32; NB_CLASSES], max: u32) -> u32 {
        let mut done = 0;
        let mut c = 0usize;
        while c < NB_CLASSES && done < max {
            if self.low_latency {
                // Go back to the highest class with work and budget; if a
                // higher class has work but no budget, return to refill.
                let back = (0..c)
                    .find(|&hc| self.lists[hc].len != 0 || (hc == 1 && !self.rq.is_empty()))
                    .map(|hc| (hc, budgets[hc] != 0 && self.lists[hc].len != 0));
                match back {
                    Some((hc, true)) => c = hc,
                    Some((_, false)) if done != 0 => return done,
                    _ => {}
                }
            }
            if budgets[c] == 0 {
                c += 1;
                continue;
            }
            let class = Class::ALL[c];
            let Some(i) = self.list_pop(class) else {
                c += 1;
                continue;
            };
            budgets[c] -= 1;
            done += 1;
            if class == Class::Heavy {
                Activity::add(&self.remote().activity.heavy, 1);
            }
            self.run_entry(i, class);
        }
        done
    }

    /// Runs one entry popped from a class list.
    fn run_entry(&mut self, i: usize, class: Class) {
        let prof = self.prof_active;
        let start = if prof { mono_ns() } else { 0 };
        let (why, cb, pidx, wake_ns, gen, flags) = {
            let s = &mut self.slots[i];
            s.flags |= sf::RUNNING;
            let why = std::mem::take(&mut s.reasons);
            let cb = std::mem::replace(&mut s.cb, Cb::None);
            (
                why,
                cb,
                s.prof,
                std::mem::take(&mut s.wake_ns),
                s.gen,
                s.flags,
            )
        };
        let prev_cur = self.current;
        let prev_class = self.current_class;
        self.current = i as u32;
        self.current_class = Some(class);
        {
            let r = self.remote();
            crate::profile::bump(&r.progress, 1);
            r.cur_cb.store(u32::from(pidx), Ordering::Relaxed);
        }
        let mut pidx = pidx;
        let mut lat_from = wake_ns;
        match cb {
            Cb::Task(mut f) => {
                let id = TaskId {
                    thread: self.tid as u16,
                    slot: i as u32,
                    gen,
                };
                let st = f.run(self, id, why);
                self.after_task(i, st, Cb::Task(f));
                Activity::add(&self.remote().activity.tasksw, 1);
            }
            Cb::Tasklet(mut f) => {
                let id = TaskletId {
                    thread: self.tid as u16,
                    slot: i as u32,
                    gen,
                };
                let st = f.run(self, id, why);
                self.after_tasklet(i, st, Cb::Tasklet(f));
            }
            Cb::Proxy(gi, ggen) => {
                debug_assert!(flags & sf::PROXY != 0);
                drop(self.free_slot(i));
                if let Some((p, w)) = self.run_shared(gi, ggen) {
                    pidx = p;
                    lat_from = w;
                }
                Activity::add(&self.remote().activity.tasksw, 1);
            }
            Cb::None => {
                // Cannot happen: a queued live slot always holds its
                // callback. Free it rather than loop on it.
                drop(self.free_slot(i));
            }
        }
        self.current = prev_cur;
        self.current_class = prev_class;
        let r = self.remote();
        crate::profile::bump(&r.progress, 1);
        r.cur_cb.store(u32::MAX, Ordering::Relaxed);
        Activity::add(&r.activity.ctxsw, 1);
        if prof {
            let end = mono_ns();
            let lat = if lat_from != 0 {
                start.saturating_sub(lat_from)
            } else {
                0
            };
            r.prof.record(pidx, end - start, lat);
        }
    }

    fn after_task(&mut self, i: usize, st: Status, cb: Cb) {
        let s = &mut self.slots[i];
        s.flags &= !sf::RUNNING;
        if st == Status::Done || s.flags & sf::KILLED != 0 {
            drop(self.free_slot(i));
            drop(cb);
            return;
        }
        s.cb = cb;
        if s.flags & sf::WOKEN_RUN != 0 {
            s.flags &= !sf::WOKEN_RUN;
            self.task_wake_local(i, Reasons::NONE);
        }
        self.queue_local(i);
    }

    fn after_tasklet(&mut self, i: usize, st: Status, cb: Cb) {
        let s = &mut self.slots[i];
        s.flags &= !sf::RUNNING;
        if st == Status::Done || s.flags & sf::KILLED != 0 {
            drop(self.free_slot(i));
            drop(cb);
            return;
        }
        s.cb = cb;
        // A timer set by the callback is queued now that it returned.
        self.queue_local(i);
    }

    /// Runs a picked shared task; returns its profile index and wake date.
    fn run_shared(&mut self, gi: u32, ggen: u32) -> Option<(u16, u64)> {
        let sh = self.shared.clone();
        let id = TaskId {
            thread: SHARED_THREAD,
            slot: gi,
            gen: ggen,
        };
        let (mut f, why, pidx, wake) = {
            let mut q = sh.lock_gq();
            let i = gi as usize;
            let s = q.slots.get_mut(i)?;
            if s.gen != ggen || s.flags & gf::LIVE == 0 {
                return None;
            }
            s.flags &= !gf::PICKED;
            if s.flags & gf::KILLED != 0 {
                let cb = sh.gq_free_locked(&mut q, i);
                sh.gq_publish(&q, self.now);
                drop(q);
                drop(cb);
                return None;
            }
            s.flags |= gf::RUNNING;
            s.flags &= !gf::WOKEN_RUN;
            let cb = s.cb.take()?;
            (cb, std::mem::take(&mut s.reasons), s.prof, s.wake_ns)
        };
        // The watchdog names the shared task, not its proxy.
        self.remote()
            .cur_cb
            .store(u32::from(pidx), Ordering::Relaxed);
        let st = f.run(self, id, why);
        let mut notify = None;
        let dropped = {
            let mut q = sh.lock_gq();
            let i = gi as usize;
            let s = &mut q.slots[i];
            s.flags &= !gf::RUNNING;
            let dropped = if st == Status::Done || s.flags & gf::KILLED != 0 {
                s.cb = Some(f);
                sh.gq_free_locked(&mut q, i)
            } else {
                s.cb = Some(f);
                if s.flags & gf::WOKEN_RUN != 0 {
                    s.flags &= !gf::WOKEN_RUN;
                    notify = sh.gq_wakeup_locked(&mut q, i, Reasons::NONE, self.prof_active);
                }
                Shared::gq_queue_locked(&mut q, i);
                None
            };
            sh.gq_publish(&q, self.now);
            dropped
        };
        drop(dropped);
        if let Some(m) = notify {
            sh.notify_mask(m);
        }
        Some((pidx, wake))
    }

    /// Checks every structural invariant of this thread's queues (the
    /// `strict` feature, which the crate's own tests enable, in debug builds
    /// only so that benchmarks are not slowed): the trees,
    /// the class lists and their counts, the slots' links back to them and
    /// the live counts. O(n) per turn, so never in production builds.
    #[cfg(all(feature = "strict", debug_assertions))]
    fn check_invariants(&self) {
        if let Err(e) = self.rq.validate() {
            panic!("run queue: {e}");
        }
        if let Err(e) = self.wq.validate() {
            panic!("wait queue: {e}");
        }
        for (h, _, &i) in self.rq.iter() {
            assert_eq!(self.slots[i as usize].rq, Some(h), "rq node of slot {i}");
        }
        for (h, _, &i) in self.wq.iter() {
            assert_eq!(self.slots[i as usize].wq, Some(h), "wq node of slot {i}");
        }
        for (c, l) in self.lists.iter().enumerate() {
            let mut n = 0;
            let mut prev = NIL;
            let mut cur = l.head;
            while cur != NIL {
                let s = &self.slots[cur as usize];
                assert!(
                    s.flags & sf::IN_LIST != 0 && s.class as usize == c,
                    "list {c}"
                );
                assert_eq!(s.prev, prev, "back link in list {c}");
                prev = cur;
                cur = s.next;
                n += 1;
            }
            assert_eq!(prev, l.tail, "tail of list {c}");
            assert_eq!(n, l.len, "length of list {c}");
        }
        let live = self
            .slots
            .iter()
            .filter(|s| s.flags & sf::LIVE != 0 && s.flags & sf::PROXY == 0)
            .count();
        assert_eq!(live, self.live, "live count");
        let hooked = self
            .slots
            .iter()
            .filter(|s| s.flags & sf::LIVE != 0 && s.flags & sf::STOP_HOOK != 0)
            .count();
        assert_eq!(hooked, self.hooked_live, "stop-hooked count");
    }

    /// Updates the average loop time and the `auto` profiling decision.
    fn account_loop(&mut self) {
        let now_ns = mono_ns();
        let us = now_ns.saturating_sub(self.loop_start_ns) / 1000;
        // Sliding average over LOOP_AVG_WINDOW turns (HAProxy's swrate).
        self.loop_sum = self.loop_sum - self.loop_sum / LOOP_AVG_WINDOW + us;
        let avg = self.loop_sum / LOOP_AVG_WINDOW;
        let r = self.remote();
        r.activity.avg_loop_us.store(avg, Ordering::Relaxed);
        r.activity
            .total_ns
            .store(now_ns - self.started_ns, Ordering::Relaxed);
    }

    fn update_profiling(&mut self) {
        let mode = ProfilingMode::from_u8(self.shared.profiling.load(Ordering::Relaxed));
        let avg = self.loop_sum / LOOP_AVG_WINDOW;
        self.prof_active = match mode {
            ProfilingMode::Off => false,
            ProfilingMode::On => true,
            ProfilingMode::Auto => auto_decide(self.prof_active, avg),
        };
        self.remote()
            .prof
            .active
            .store(u8::from(self.prof_active), Ordering::Relaxed);
    }

    /// Test hook: forces the average loop time (µs) seen by `auto`.
    #[doc(hidden)]
    pub fn set_avg_loop_us_for_test(&mut self, us: u64) {
        self.loop_sum = us * LOOP_AVG_WINDOW;
        self.update_profiling();
    }

    /// The poll timeout for this turn: 0 if work remains, else until the
    /// next timer + 1 ms (`now` is truncated to the ms, so the +1 keeps a
    /// timer from being polled for with a 0 timeout), at most
    /// [`MAX_POLL_MS`].
    pub fn poll_timeout(&self) -> i32 {
        if self.has_runnable() || self.remote().inbox.has_msg() {
            return 0;
        }
        if self.should_exit() {
            return 0;
        }
        let start = self.now.wrapping_sub(ticks::TICK_HALF);
        let local = self
            .wq
            .lookup_ge_wrap(start)
            .and_then(|h| self.wq.key(h))
            .unwrap_or(ETERNITY);
        let next = ticks::first(local, self.shared.gq_wq_next.load(Ordering::Relaxed));
        match ticks::remain(self.now, next) {
            None => MAX_POLL_MS as i32,
            Some(0) => 0,
            Some(ms) => ms.saturating_add(1).min(MAX_POLL_MS) as i32,
        }
    }

    /// Whether another thread published work for us (re-check after
    /// announcing sleep; the announce's fence orders these loads).
    fn work_arrived(&self) -> bool {
        self.remote().inbox.has_msg()
            || self.shared.gq_rq_threads.load(Ordering::SeqCst) & (1u64 << self.tid) != 0
            || (self.shared.stopping.load(Ordering::SeqCst) && !self.stop_seen)
            || self.shared.hard_stop.load(Ordering::SeqCst)
            || self.shared.isolating.load(Ordering::SeqCst) != 0
    }

    fn poll(&mut self, mut timeout: i32) -> io::Result<()> {
        let sh = self.shared.clone();
        let r = &sh.threads[self.tid];
        let mut announced = false;
        if timeout != 0 {
            r.sleep.announce_sleep();
            announced = true;
            if self.work_arrived() {
                timeout = 0;
            }
        }
        let t0 = if timeout != 0 { mono_ns() } else { 0 };
        r.harmless.store(true, Ordering::SeqCst);
        let res = self.epoll.wait(&mut self.events, timeout);
        sh.park(self.tid);
        if announced {
            r.sleep.awake();
        }
        if timeout != 0 {
            Activity::add(&r.activity.idle_ns, mono_ns() - t0);
        }
        let n = res?;
        let mut fd_events = 0u64;
        for k in 0..n {
            let ev = self.events[k];
            let data = ev.u64;
            let bits = ev.events;
            if data == EFD_TOKEN {
                r.efd.drain()?;
                Activity::add(&r.activity.wake_signal, 1);
                continue;
            }
            fd_events += 1;
            let (slot, gen) = ((data >> 32) as u32, data as u32);
            if let Some(i) = self.tasklet_idx_raw(slot, gen) {
                self.slots[i].events |= Events::from_epoll(bits);
                // Outside any callback: joins urgent.
                self.tasklet_wake_local(i, Reasons::IO, Place::Tail);
            }
        }
        if fd_events != 0 {
            Activity::add(&r.activity.poll_io, 1);
            Activity::add(&r.activity.poll_events, fd_events);
        } else {
            Activity::add(&r.activity.poll_exp, 1);
        }
        Ok(())
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        let r = &self.shared.threads[self.tid];
        r.exited.store(true, Ordering::SeqCst);
        r.harmless.store(true, Ordering::SeqCst);
        r.claimed.store(false, Ordering::SeqCst);
        self.shared.set_current_worker(None);
    }
}

/// Creates a shared task (any thread, or the runtime handle).
pub(crate) fn new_shared_task(
    sh: &Shared,
    prof: u16,
    mask: u64,
    f: Box<dyn TaskFn + Send>,
) -> TaskId {
    let all = if sh.nbthread() >= 64 {
        u64::MAX
    } else {
        (1u64 << sh.nbthread()) - 1
    };
    let mask = if mask & all == 0 { all } else { mask & all };
    let mut q = sh.lock_gq();
    let slot = GSlot {
        gen: 0,
        flags: gf::LIVE,
        mask,
        prof,
        nice: 0,
        reasons: Reasons::NONE,
        expire: ETERNITY,
        rq: None,
        wq: None,
        wake_ns: 0,
        cb: Some(f),
    };
    let i = match q.free.pop() {
        Some(i) => {
            let gen = q.slots[i as usize].gen;
            q.slots[i as usize] = GSlot { gen, ..slot };
            i as usize
        }
        None => {
            q.slots.push(slot);
            q.slots.len() - 1
        }
    };
    sh.gq_live.fetch_add(1, Ordering::SeqCst);
    TaskId {
        thread: SHARED_THREAD,
        slot: i as u32,
        gen: q.slots[i].gen,
    }
}

/// Kills a shared task from any thread.
pub(crate) fn kill_shared(sh: &Shared, id: TaskId) {
    let now = sh.now_tick();
    let cb = {
        let mut q = sh.lock_gq();
        let Some(i) = q.idx(id) else {
            return;
        };
        if q.slots[i].flags & (gf::RUNNING | gf::PICKED) != 0 {
            q.slots[i].flags |= gf::KILLED;
            None
        } else {
            let cb = sh.gq_free_locked(&mut q, i);
            sh.gq_publish(&q, now);
            cb
        }
    };
    drop(cb);
}

/// What a wait-queue scan needs of a slot, local or shared: its expiry
/// date and its wait-queue handle.
pub(crate) trait Timed {
    fn timer(&mut self) -> (&mut Tick, &mut Option<Handle>);
}

impl Timed for Slot {
    fn timer(&mut self) -> (&mut Tick, &mut Option<Handle>) {
        (&mut self.expire, &mut self.wq)
    }
}

impl Timed for crate::shared::GSlot {
    fn timer(&mut self) -> (&mut Tick, &mut Option<Handle>) {
        (&mut self.expire, &mut self.wq)
    }
}

/// The next due entry of a wait queue (local or shared), scanned in wrap
/// order from `now - 2^31`: entries whose timer was cancelled are dropped,
/// entries whose expiry moved later are requeued at it (lazy requeue), and
/// the first really due one is unlinked, its expiry cleared, and returned.
/// `None` when nothing is due.
fn pop_expired<T: Timed>(wq: &mut Eb32Tree<u32>, slots: &mut [T], now: Tick) -> Option<usize> {
    let start = now.wrapping_sub(ticks::TICK_HALF);
    loop {
        let h = wq.lookup_ge_wrap(start)?;
        let (key, &i) = wq.entry(h)?;
        if ticks::is_lt(now, key) {
            return None;
        }
        let i = i as usize;
        let (exp, wqh) = slots.get_mut(i)?.timer();
        if !ticks::is_set(*exp) {
            wq.delete(h);
            *wqh = None;
            continue;
        }
        if !ticks::is_expired(*exp, now) {
            // Lazy requeue: the expiry moved later since it was queued.
            let later = *exp;
            wq.requeue(h, later);
            continue;
        }
        wq.delete(h);
        *wqh = None;
        *exp = ETERNITY;
        return Some(i);
    }
}
