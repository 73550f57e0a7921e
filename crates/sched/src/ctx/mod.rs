//! # The per-thread scheduler
//!
//! A [`Ctx`] is one thread's scheduler: its slab of tasks and tasklets, its
//! run queue, wait queue and tasklet lists, its epoll instance. It never
//! leaves its thread (it is not `Send`), so none of these structures takes
//! a lock, and a task's state may be anything, `Send` or not. Callbacks
//! receive `&mut Ctx` and do everything through it: create, wake, schedule
//! and kill tasks and tasklets, register fds, read `now`.
//!
//! ## Where things are
//!
//! The [`Ctx`] type and its accessors are here; each part of its work is a
//! file of its own, types apart from operations (each opens with the rules
//! it keeps):
//!
//! | file         | what                                                        |
//! |--------------|-------------------------------------------------------------|
//! | `types`      | slot, slot flags and their decoder, class list, constants   |
//! | `slots`      | the slab: allocate, look up by id (generation-checked), free|
//! | `lists`      | the intrusive class lists (tasklets and picked tasks)       |
//! | `tasklet`    | the tasklet API and the class rules of a tasklet wakeup     |
//! | `task`       | the task API, the local run queue; shared tasks' creation   |
//! | `timers`     | expiry dates of tasks and tasklets, the wait-queue scan     |
//! | `stop`       | stop hooks: what a graceful stop wakes and waits for        |
//! | `turn`       | the loop and one turn: inbox, timers, class budgets, picks  |
//! | `run`        | running one entry: its callback out of the slot and back    |
//! | `poll`       | fds, the poll timeout, sleeping in epoll, dispatching events|
//! | `strict`     | O(n) invariant checks after every turn (`strict` feature)   |
//!
//! Private helpers shared between these files are `pub(super)`: nothing
//! outside `ctx` sees them. A helper with `_local` in its name works on
//! a slot index this thread owns and was already checked.

use crate::activity::Activity;
use crate::shared::{self, mono_ns, Shared};
use crate::sys::{self, Epoll};
use crate::task::{Class, NB_CLASSES};
use crate::ticks::Tick;
use crossbeam_utils::CachePadded;
use ebtree::Eb32Tree;
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

mod lists;
mod poll;
mod run;
mod slots;
mod stop;
#[cfg(all(feature = "strict", debug_assertions))]
mod strict;
mod task;
mod tasklet;
mod timers;
mod turn;
mod types;

pub(crate) use task::{kill_shared, new_shared_task};
pub use types::MAX_POLL_MS;
use types::{List, Slot, EFD_TOKEN, MAX_POLL_EVENTS, NIL};

/// One thread's scheduler; see the module documentation.
pub struct Ctx {
    tid: usize,
    shared: Arc<Shared>,
    /// This thread's block of `shared` (`shared.threads[tid]`), held
    /// directly: the turn reaches it a dozen times, one load each.
    me: Arc<CachePadded<shared::Remote>>,
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
    /// No key of `wq` is before this date (eternity: `wq` is empty); the
    /// turn looks in `wq` only once it is reached, and the poll sleeps
    /// until it. Lowered by every insertion; raised to the first key by
    /// a look that found nothing due (a deleted timer or one moved later
    /// leaves it low: one look more, at most one early wakeup).
    wq_low: Tick,
    now: Tick,
    /// Running entry's slot, NIL between callbacks.
    current: u32,
    /// Class being served, None outside callbacks.
    current_class: Option<Class>,
    epoll: Epoll,
    events: Vec<libc::epoll_event>,
    /// Per fd number: the registration's generation and owner tasklet.
    fds: Vec<types::FdEnt>,
    depth: u32,
    low_latency: bool,
    prof_active: bool,
    heavy_granted: bool,
    stop_seen: bool,
    /// Sliding sum for the average loop time (µs * window).
    loop_sum: u64,
    loop_start_ns: u64,
    /// When the last turn's accounting read the clock (the poll's start).
    turn_end_ns: u64,
    /// When the last sleeping poll returned, for the next turn's start (0:
    /// no clock read to reuse), so a turn reads the clock three times, not
    /// five.
    woke_ns: u64,
    started_ns: u64,
    names: HashMap<&'static str, u16>,
    /// The last names interned, by the address and length of their text:
    /// a tasklet created per connection finds its profiling id without
    /// hashing the name (the map above answers the rest).
    recent_names: [(usize, usize, u16); 4],
    recent_next: usize,
    /// Reused buffer for draining the inbox.
    inbox_buf: Vec<crate::inbox::Msg>,
    /// The fds the events of [`Ctx::log_fds`] tasklets came from, with
    /// their slot, until taken ([`Ctx::take_event_fds`]); `fd_log_lost`:
    /// some did not fit.
    fd_log: Vec<(u32, RawFd)>,
    fd_log_lost: bool,
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
        *r.epfd.lock().unwrap_or_else(|p| p.into_inner()) = epoll.raw();
        if let Ok(id) = sys::own_cpu_clock() {
            r.cpu_clock.store(i64::from(id), Ordering::Relaxed);
        }
        let depth = shared.depth;
        let low_latency = shared.low_latency;
        let now = shared.now_tick();
        let now_ns = mono_ns();
        let me = Arc::clone(r);
        let mut c = Ctx {
            tid,
            shared,
            me,
            slots: Vec::new(),
            free_head: NIL,
            live: 0,
            hooked_live: 0,
            lists: [List::EMPTY; NB_CLASSES],
            rq: Eb32Tree::new(),
            rq_ticks: 0,
            niced: 0,
            wq: Eb32Tree::new(),
            wq_low: crate::ticks::ETERNITY,
            now,
            current: NIL,
            current_class: None,
            epoll,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_POLL_EVENTS],
            fds: Vec::new(),
            depth,
            low_latency,
            prof_active: false,
            heavy_granted: false,
            stop_seen: false,
            loop_sum: 0,
            loop_start_ns: now_ns,
            turn_end_ns: now_ns,
            woke_ns: 0,
            started_ns: now_ns,
            names: HashMap::new(),
            recent_names: [(0, 0, 0); 4],
            recent_next: 0,
            inbox_buf: Vec::new(),
            fd_log: Vec::new(),
            fd_log_lost: false,
        };
        c.update_profiling();
        // Not harmless from here on: init code runs like a callback.
        c.shared.park_at(&c.me, tid);
        c.shared.set_current_worker(Some(tid));
        Ok(c)
    }

    /// The date of the current loop turn.
    #[inline]
    pub fn now(&self) -> Tick {
        self.now
    }

    /// The current loop turn's date on the process's monotonic nanosecond
    /// clock ([`crate::ticks::mono_now_ns`]): the reading [`Ctx::now`] comes
    /// from, for counters that outlive a tick's wrap (HAProxy's `now_ns`).
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.loop_start_ns
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
        &self.me
    }

    fn intern(&mut self, name: &'static str) -> u16 {
        let key = (name.as_ptr() as usize, name.len());
        if let Some(&(_, _, i)) = self
            .recent_names
            .iter()
            .find(|&&(p, l, _)| (p, l) == key && l != 0)
        {
            return i;
        }
        let i = match self.names.get(name) {
            Some(&i) => i,
            None => {
                let i = self.shared.registry.intern(name);
                self.names.insert(name, i);
                i
            }
        };
        self.recent_names[self.recent_next] = (key.0, key.1, i);
        self.recent_next = (self.recent_next + 1) % self.recent_names.len();
        i
    }

    /// Runs `f` while every other thread of the runtime is parked at a safe
    /// point of its loop (between two turns, or polling).
    pub fn isolate<R>(&mut self, f: impl FnOnce(&mut Ctx) -> R) -> R {
        let shared = self.shared.clone();
        let tid = self.tid;
        shared.isolate(Some(tid), || f(self))
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        let r = &self.me;
        // The epoll closes with this Ctx: no other thread may use it now.
        *r.epfd.lock().unwrap_or_else(|p| p.into_inner()) = -1;
        r.exited.store(true, Ordering::SeqCst);
        r.harmless.store(true, Ordering::SeqCst);
        r.claimed.store(false, Ordering::SeqCst);
        self.shared.set_current_worker(None);
    }
}
