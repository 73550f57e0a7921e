//! # State shared between threads
//!
//! Everything another thread may touch lives here, behind an `Arc`:
//!
//! * per thread ([`Remote`], cache-line padded): the inbox, the sleep word,
//!   the eventfd, the isolation and watchdog words, the activity counters
//!   and the profiling table. The owner thread's trees and lists are *not*
//!   here: they live in its [`crate::Ctx`], which never leaves its thread.
//! * the **shared queues** ([`GlobalQueues`]) of tasks that may run on
//!   several threads, under one mutex: a slab of such tasks, a scope-aware
//!   run queue (each entry carries its thread mask, each tree node the OR
//!   of its subtree's masks, so a thread finds its next task in O(log n))
//!   and a wait queue keyed by expiry. Atomic summaries (`gq_rq_threads`,
//!   `gq_wq_next`, `gq_live`) let threads skip the lock when there is
//!   nothing for them, which is the common case.
//! * the runtime's flags: stopping, hard stop, isolation, profiling mode.
//!
//! ## Who may touch what
//!
//! | field                     | writers             | readers        |
//! |---------------------------|---------------------|----------------|
//! | `Remote::inbox`           | any thread (push)   | owner (pop)    |
//! | `Remote::sleep`           | owner + wakers (CAS)| wakers         |
//! | `Remote::activity`, `prof`| owner               | any (reports)  |
//! | `Remote::harmless`        | owner               | isolator       |
//! | `GlobalQueues`            | any, under `gq`     | any, under `gq`|
//!
//! A cross-thread wakeup of a thread-bound task or tasklet is a message in
//! the owner's inbox: `(slot, generation)` plus the reasons. The owner
//! checks the generation when it pops the message, so waking an id whose
//! task was freed meanwhile is a detected no-op.

use crate::activity::Activity;
use crate::inbox::{Inbox, Msg};
use crate::notify::SleepState;
use crate::profile::{ProfilingMode, Registry, ThreadProfile};
use crate::sys::EventFd;
use crate::task::{Reasons, TaskFn, TaskId, SHARED_THREAD};
use crate::ticks::{self, Clock, Tick};
use crossbeam_utils::CachePadded;
use ebtree::{Eb32ScTree, Eb32Tree, Handle, Visits};
use std::io;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

thread_local! {
    /// `(runtime address, thread number)` of the worker running on this OS
    /// thread, so that a handle call made from a worker knows it is one.
    static WORKER: std::cell::Cell<Option<(usize, usize)>> = const { std::cell::Cell::new(None) };
}

/// The number of the scheduler thread running the caller (from 0), of
/// whichever runtime; `None` off a worker.
pub fn worker_thread() -> Option<usize> {
    WORKER.with(|w| w.get().map(|(_, t)| t))
}

/// Monotonic nanoseconds since the first call in the process (vDSO clock),
/// never 0. One clock read and a subtraction: a turn reads it twice.
#[inline]
pub(crate) fn mono_ns() -> u64 {
    static ORIGIN: OnceLock<u64> = OnceLock::new();
    let now = crate::sys::monotonic_ns();
    now.saturating_sub(*ORIGIN.get_or_init(|| now)) + 1
}

/// Message kinds in the second word of an inbox message.
pub(crate) const MSG_TASK: u64 = 1;
pub(crate) const MSG_TASKLET: u64 = 2;
/// Tasklet wakeup to run next (head of the urgent list).
pub(crate) const MSG_INSTANT: u64 = 4;

/// Encodes a wakeup for the owner's inbox.
#[inline]
pub(crate) fn encode(slot: u32, gen: u32, kind: u64, why: Reasons) -> Msg {
    Msg {
        a: (u64::from(slot) << 32) | u64::from(gen),
        b: kind | (u64::from(why.0) << 16),
    }
}

/// Decodes an inbox message: `(slot, gen, kind bits, reasons)`; the send
/// date (low 32 bits of [`mono_ns`], 0 if unknown) is `m.b >> 32`.
#[inline]
pub(crate) fn decode(m: Msg) -> (u32, u32, u64, Reasons) {
    (
        (m.a >> 32) as u32,
        m.a as u32,
        m.b & 0xffff,
        Reasons((m.b >> 16) as u16),
    )
}

/// What other threads may touch of one thread.
pub(crate) struct Remote {
    /// Cross-thread wakeups for this thread's tasks and tasklets.
    pub(crate) inbox: Inbox,
    /// The sleeping/notified word (see [`crate::notify`]).
    pub(crate) sleep: CachePadded<SleepState>,
    /// Written to wake this thread from `epoll_wait`.
    pub(crate) efd: EventFd,
    /// The thread's epoll fd while its `Ctx` lives (-1 otherwise), for
    /// another thread taking one of its fds ([`crate::Ctx::deregister_fd_of`]);
    /// the lock keeps it from closing under that call.
    pub(crate) epfd: Mutex<i32>,
    /// Parked at a safe point (polling, or waiting out an isolation).
    pub(crate) harmless: AtomicBool,
    /// The thread left its loop: wakeups to it are dropped.
    pub(crate) exited: AtomicBool,
    /// A `Ctx` exists for this thread number.
    pub(crate) claimed: AtomicBool,
    /// Watchdog: bumped at each callback start and end.
    pub(crate) progress: AtomicU64,
    /// Watchdog: profile index of the running callback, `u32::MAX` if none.
    pub(crate) cur_cb: AtomicU32,
    /// Watchdog: the thread's CPU clock id (negative, as Linux encodes
    /// them), `i64::MIN` until known.
    pub(crate) cpu_clock: AtomicI64,
    pub(crate) activity: CachePadded<Activity>,
    pub(crate) prof: ThreadProfile,
}

// Each thread's remote block starts on its own cache line(s), so one
// thread's counters never share a line with its neighbour's.
const _: () = assert!(std::mem::align_of::<CachePadded<Remote>>() >= 64);

/// A shared task's slot.
pub(crate) struct GSlot {
    pub(crate) gen: u32,
    pub(crate) flags: u16,
    pub(crate) mask: u64,
    pub(crate) prof: u16,
    pub(crate) nice: i16,
    pub(crate) reasons: Reasons,
    pub(crate) expire: Tick,
    pub(crate) rq: Option<Handle>,
    pub(crate) wq: Option<Handle>,
    pub(crate) wake_ns: u64,
    pub(crate) cb: Option<Box<dyn TaskFn + Send>>,
}

/// Shared-slot flags.
pub(crate) mod gf {
    pub(crate) const LIVE: u16 = 1;
    /// Its callback is out, running on some thread.
    pub(crate) const RUNNING: u16 = 2;
    /// Taken from the run queue by a thread, not yet started.
    pub(crate) const PICKED: u16 = 4;
    /// Killed while running or picked: freed by the thread holding it.
    pub(crate) const KILLED: u16 = 8;
    /// Woken while running or picked: requeued when it returns.
    pub(crate) const WOKEN_RUN: u16 = 16;
}

/// The shared run and wait queues and the shared tasks' slab.
pub(crate) struct GlobalQueues {
    pub(crate) slots: Vec<GSlot>,
    pub(crate) free: Vec<u32>,
    pub(crate) rq: Eb32ScTree<u32>,
    pub(crate) wq: Eb32Tree<u32>,
    pub(crate) rq_ticks: u32,
    pub(crate) niced: u32,
    /// Per thread, queued shared tasks it may run.
    pub(crate) rq_threads: [u32; 64],
}

impl Default for GlobalQueues {
    fn default() -> Self {
        GlobalQueues {
            slots: Vec::new(),
            free: Vec::new(),
            rq: Eb32ScTree::new(),
            wq: Eb32Tree::new(),
            rq_ticks: 0,
            niced: 0,
            rq_threads: [0; 64],
        }
    }
}

impl GlobalQueues {
    /// Counts a task of `mask` entering (`add`) or leaving the run queue.
    pub(crate) fn rq_account(&mut self, mask: u64, add: bool) {
        let mut m = mask;
        while m != 0 {
            let t = m.trailing_zeros() as usize;
            m &= m - 1;
            if add {
                self.rq_threads[t] += 1;
            } else {
                self.rq_threads[t] = self.rq_threads[t].saturating_sub(1);
            }
        }
    }

    /// Threads with shared work queued for them.
    pub(crate) fn rq_threads_mask(&self) -> u64 {
        self.rq_threads
            .iter()
            .enumerate()
            .filter(|(_, &n)| n != 0)
            .fold(0, |m, (t, _)| m | (1u64 << t))
    }

    /// The first queued task at or after `start` (circular order) that a
    /// thread of `mask` may run, adding the tree nodes visited after the
    /// key descent to `nodes`. `scoped`: the scope-aware walk, which skips
    /// every subtree whose mask misses ours (O(log n)); else the naive
    /// walk, entry by entry (O(n)), one count per entry examined. Both
    /// return the same entry; the naive one exists only to measure the
    /// difference (`tune.sched.scope-lookups off`).
    pub(crate) fn rq_lookup(
        &self,
        start: u32,
        mask: u64,
        scoped: bool,
        nodes: &mut u64,
    ) -> Option<Handle> {
        let hits = |h: Handle| self.rq.scope_of(h).is_some_and(|s| s & mask != 0);
        if scoped {
            let mut v = Visits::default();
            let found = match self.rq.lookup_ge(start) {
                Some(h) => {
                    v.0 += 1;
                    if hits(h) {
                        Some(h)
                    } else {
                        self.rq.next_in_scope_counted(h, mask, &mut v)
                    }
                }
                None => None,
            }
            .or_else(|| self.rq.first_in_scope_counted(mask, &mut v));
            *nodes += v.0;
            return found;
        }
        let mut cur = self.rq.lookup_ge(start);
        while let Some(h) = cur {
            *nodes += 1;
            if hits(h) {
                return Some(h);
            }
            cur = self.rq.next(h);
        }
        // Wrap: the entries below `start`.
        let mut cur = self.rq.first();
        while let Some(h) = cur {
            if self.rq.key(h).is_some_and(|k| k >= start) {
                return None;
            }
            *nodes += 1;
            if hits(h) {
                return Some(h);
            }
            cur = self.rq.next(h);
        }
        None
    }

    /// Index of a live, not killed shared task.
    pub(crate) fn idx(&self, id: TaskId) -> Option<usize> {
        if id.thread != SHARED_THREAD {
            return None;
        }
        let i = id.slot as usize;
        let s = self.slots.get(i)?;
        (s.gen == id.gen && s.flags & gf::LIVE != 0 && s.flags & gf::KILLED == 0).then_some(i)
    }
}

/// Runtime-wide state.
pub(crate) struct Shared {
    /// Each thread's block, behind its own `Arc` so that the owner's
    /// [`Ctx`](crate::Ctx) holds it directly (one load, no index).
    pub(crate) threads: Box<[Arc<CachePadded<Remote>>]>,
    pub(crate) depth: u32,
    pub(crate) low_latency: bool,
    /// Scope-aware shared-queue lookups (else the naive walk).
    pub(crate) scope_lookups: bool,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) profiling: AtomicU8,
    pub(crate) registry: Registry,
    pub(crate) stopping: AtomicBool,
    pub(crate) hard_stop: AtomicBool,
    /// 0: no isolation; else 1 + the isolating thread (or `usize::MAX` for
    /// a thread outside the runtime).
    pub(crate) isolating: AtomicUsize,
    pub(crate) gq: Mutex<GlobalQueues>,
    /// Bit t set while the shared run queue holds a task thread t may run.
    pub(crate) gq_rq_threads: AtomicU64,
    /// Next shared expiry (a lower bound), 0 if none.
    pub(crate) gq_wq_next: AtomicU32,
    pub(crate) gq_live: AtomicUsize,
}

impl Shared {
    pub(crate) fn new(
        nbthread: usize,
        depth: u32,
        low_latency: bool,
        clock: Arc<dyn Clock>,
        profiling: ProfilingMode,
        inbox_cap: usize,
    ) -> io::Result<Shared> {
        let mut threads = Vec::with_capacity(nbthread);
        for _ in 0..nbthread {
            threads.push(Arc::new(CachePadded::new(Remote {
                inbox: Inbox::with_lanes(inbox_cap, nbthread, crate::inbox::DEFAULT_LANE_CAPACITY),
                sleep: CachePadded::new(SleepState::new()),
                efd: EventFd::new()?,
                epfd: Mutex::new(-1),
                harmless: AtomicBool::new(true),
                exited: AtomicBool::new(false),
                claimed: AtomicBool::new(false),
                progress: AtomicU64::new(0),
                cur_cb: AtomicU32::new(u32::MAX),
                cpu_clock: AtomicI64::new(i64::MIN),
                activity: CachePadded::new(Activity::default()),
                prof: ThreadProfile::new(),
            })));
        }
        Ok(Shared {
            threads: threads.into_boxed_slice(),
            depth,
            low_latency,
            scope_lookups: true,
            clock,
            profiling: AtomicU8::new(profiling.to_u8()),
            registry: Registry::default(),
            stopping: AtomicBool::new(false),
            hard_stop: AtomicBool::new(false),
            isolating: AtomicUsize::new(0),
            gq: Mutex::new(GlobalQueues::default()),
            gq_rq_threads: AtomicU64::new(0),
            gq_wq_next: AtomicU32::new(0),
            gq_live: AtomicUsize::new(0),
        })
    }

    pub(crate) fn nbthread(&self) -> usize {
        self.threads.len()
    }

    pub(crate) fn now_tick(&self) -> Tick {
        ticks::from_ms(self.clock.now_ms())
    }

    /// [`Shared::now_tick`] at the instant [`mono_ns`] read `ns` (a turn's
    /// start), without reading the clock again when it follows that one.
    pub(crate) fn now_tick_at(&self, ns: u64) -> Tick {
        let ms = self.clock.ms_at(ns);
        ticks::from_ms(ms.unwrap_or_else(|| self.clock.now_ms()))
    }

    pub(crate) fn lock_gq(&self) -> MutexGuard<'_, GlobalQueues> {
        match self.gq.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Wakes `thread` if it sleeps and was not yet notified. Called after
    /// publishing the work it must find.
    #[inline]
    pub(crate) fn notify(&self, thread: usize) {
        let r = &self.threads[thread];
        if r.sleep.should_notify() {
            // The only failure of an eventfd write is a bad fd, which the
            // runtime owns for its whole life; nothing to report.
            let _ = r.efd.write();
        }
    }

    /// Sends a wakeup message to another thread and notifies it.
    #[inline]
    pub(crate) fn send(&self, thread: usize, m: Msg) {
        let Some(r) = self.threads.get(thread) else {
            return;
        };
        if r.exited.load(Ordering::Acquire) {
            return;
        }
        let mut m = m;
        if self.profiling.load(Ordering::Relaxed) != 0 {
            // Low 32 bits of the send date (ns, wraps every 4.3 s), so the
            // owner measures the wakeup latency from here, not from when
            // it drained its inbox.
            m.b |= u64::from(mono_ns() as u32) << 32;
        }
        match self.current_worker() {
            // A worker of this runtime: its own lane, no RMW.
            Some(me) => r.inbox.push_lane(me, m),
            None => r.inbox.push(m),
        }
        self.notify(thread);
    }

    /// After shared work for `mask` was published: if no thread of the
    /// mask is awake (an awake one finds it before sleeping), notify the
    /// first sleeping one.
    pub(crate) fn notify_mask(&self, mask: u64) {
        crate::sync::fence(Ordering::SeqCst);
        let mut sleeper = None;
        for (t, r) in self.threads.iter().enumerate().take(64) {
            if mask & (1u64 << t) == 0 || r.exited.load(Ordering::Acquire) {
                continue;
            }
            if !r.sleep.is_sleeping() {
                return;
            }
            sleeper.get_or_insert(t);
        }
        if let Some(t) = sleeper {
            self.notify(t);
        }
    }

    /// Updates the lock-free summaries of the shared queues.
    pub(crate) fn gq_publish(&self, q: &GlobalQueues, now: Tick) {
        self.gq_rq_threads
            .store(q.rq_threads_mask(), Ordering::SeqCst);
        let next =
            q.wq.lookup_ge_wrap(now.wrapping_sub(ticks::TICK_HALF))
                .and_then(|h| q.wq.key(h))
                .unwrap_or(0);
        self.gq_wq_next.store(next, Ordering::SeqCst);
    }

    /// Queues a shared task in the shared run queue (lock held). Returns the
    /// mask of threads to notify, if any.
    pub(crate) fn gq_wakeup_locked(
        &self,
        q: &mut GlobalQueues,
        i: usize,
        why: Reasons,
        prof: bool,
    ) -> Option<u64> {
        let depth = self.depth;
        let rq_ticks = q.rq_ticks;
        let s = &mut q.slots[i];
        s.reasons |= why;
        if s.flags & (gf::RUNNING | gf::PICKED) != 0 {
            s.flags |= gf::WOKEN_RUN;
            return None;
        }
        if s.rq.is_some() {
            return None;
        }
        s.wake_ns = if prof { mono_ns() } else { 0 };
        let mut key = rq_ticks;
        if s.nice != 0 {
            key = key.wrapping_add((i32::from(s.nice) * depth as i32) as u32);
        }
        let mask = s.mask;
        let niced = s.nice != 0;
        let h = q.rq.insert(key, mask, i as u32);
        q.rq_account(mask, true);
        q.slots[i].rq = Some(h);
        q.rq_ticks = rq_ticks.wrapping_add(1);
        if niced {
            q.niced += 1;
        }
        Some(mask)
    }

    /// Queues a shared task's timer (lock held), HAProxy's `task_queue`:
    /// insert if absent, move only if the expiry moved earlier.
    pub(crate) fn gq_queue_locked(q: &mut GlobalQueues, i: usize) {
        let exp = q.slots[i].expire;
        if !ticks::is_set(exp) {
            return;
        }
        match q.slots[i].wq {
            Some(h) => {
                if let Some(k) = q.wq.key(h) {
                    if ticks::is_lt(exp, k) {
                        q.wq.requeue(h, exp);
                    }
                } else {
                    let h = q.wq.insert(exp, i as u32);
                    q.slots[i].wq = Some(h);
                }
            }
            None => {
                let h = q.wq.insert(exp, i as u32);
                q.slots[i].wq = Some(h);
            }
        }
    }

    /// Frees a shared slot (lock held); returns its callback, to be dropped
    /// by the caller after releasing the lock.
    pub(crate) fn gq_free_locked(
        &self,
        q: &mut GlobalQueues,
        i: usize,
    ) -> Option<Box<dyn TaskFn + Send>> {
        let s = &mut q.slots[i];
        let rq = s.rq.take();
        let wq = s.wq.take();
        let niced = s.nice != 0;
        let mask = s.mask;
        let cb = s.cb.take();
        s.gen = s.gen.wrapping_add(1);
        s.flags = 0;
        if let Some(h) = rq {
            q.rq.delete(h);
            q.rq_account(mask, false);
            if niced {
                q.niced = q.niced.saturating_sub(1);
            }
        }
        if let Some(h) = wq {
            q.wq.delete(h);
        }
        q.free.push(i as u32);
        if self.gq_live.fetch_sub(1, Ordering::SeqCst) == 1 {
            // The last shared task is gone: a thread with nothing of its
            // own left may now exit, so wake the sleepers to notice.
            for t in 0..self.nbthread() {
                self.notify(t);
            }
        }
        cb
    }

    /// Wakes a shared task from any thread.
    pub(crate) fn wake_shared(&self, id: TaskId, why: Reasons) {
        let prof =
            ProfilingMode::from_u8(self.profiling.load(Ordering::Relaxed)) != ProfilingMode::Off;
        let now = self.now_tick();
        let mask = {
            let mut q = self.lock_gq();
            let Some(i) = q.idx(id) else {
                return;
            };
            let m = self.gq_wakeup_locked(&mut q, i, why, prof);
            self.gq_publish(&q, now);
            m
        };
        if let Some(m) = mask {
            self.notify_mask(m);
        }
    }

    /// Wakes a thread-bound task or a shared one, from any thread.
    pub(crate) fn wake_task(&self, id: TaskId, why: Reasons) {
        if id.is_shared() {
            self.wake_shared(id, why);
        } else {
            self.send(id.thread as usize, encode(id.slot, id.gen, MSG_TASK, why));
        }
    }

    /// Requests a graceful stop and wakes every thread so it notices.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for t in 0..self.nbthread() {
            self.notify(t);
        }
    }

    /// Requests a hard stop: every thread's eventfd is written at once.
    pub(crate) fn hard_stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.hard_stop.store(true, Ordering::SeqCst);
        for r in self.threads.iter() {
            let _ = r.efd.write();
        }
    }

    /// Runs `f` while every runtime thread other than `me` is parked at a
    /// safe point. `me` is the calling worker, or `None` for an outside
    /// thread. See [`crate::isolate`] for the protocol.
    pub(crate) fn isolate<R>(&self, me: Option<usize>, f: impl FnOnce() -> R) -> R {
        let me = me.or_else(|| self.current_worker());
        let token = me.map(|t| t + 1).unwrap_or(usize::MAX);
        if me.is_some() && self.isolating.load(Ordering::SeqCst) == token {
            // Nested isolation: already alone.
            return f();
        }
        // 1. Become the isolating thread; while another one is, stay
        //    harmless so that it can make progress.
        loop {
            if self
                .isolating
                .compare_exchange(0, token, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                break;
            }
            if let Some(t) = me {
                self.park(t);
            } else {
                std::thread::yield_now();
            }
        }
        if let Some(t) = me {
            self.threads[t].harmless.store(false, Ordering::SeqCst);
        }
        // 2. Wake every sleeper so it re-checks (a sleeper is already
        //    harmless, but must not start a turn before we are done).
        for (t, r) in self.threads.iter().enumerate() {
            if Some(t) != me {
                let _ = r.efd.write();
            }
        }
        // 3. Wait until every other thread is harmless.
        for (t, r) in self.threads.iter().enumerate() {
            if Some(t) == me {
                continue;
            }
            while !r.harmless.load(Ordering::SeqCst) {
                std::hint::spin_loop();
                std::thread::yield_now();
            }
        }
        let res = f();
        // 4. Release.
        self.isolating.store(0, Ordering::SeqCst);
        res
    }

    /// The calling thread's number if it is one of this runtime's workers.
    pub(crate) fn current_worker(&self) -> Option<usize> {
        let me = self as *const Shared as usize;
        WORKER.with(|w| match w.get() {
            Some((rt, t)) if rt == me => Some(t),
            _ => None,
        })
    }

    /// Marks the calling thread as worker `t` of this runtime (or not).
    pub(crate) fn set_current_worker(&self, t: Option<usize>) {
        let me = self as *const Shared as usize;
        WORKER.with(|w| w.set(t.map(|t| (me, t))));
    }

    /// Parks thread `t` while an isolation by another thread is in
    /// progress, then marks it busy again (HAProxy's `thread_harmless_end`).
    pub(crate) fn park(&self, t: usize) {
        self.park_at(&self.threads[t], t);
    }

    /// [`Self::park`] for a caller holding thread `t`'s block.
    #[inline]
    pub(crate) fn park_at(&self, r: &Remote, t: usize) {
        loop {
            r.harmless.store(false, Ordering::SeqCst);
            let iso = self.isolating.load(Ordering::SeqCst);
            if iso == 0 || iso == t + 1 {
                return;
            }
            r.harmless.store(true, Ordering::SeqCst);
            while self.isolating.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::GlobalQueues;

    /// The scope-aware and the naive lookup find the same entry for every
    /// start key and mask, on trees with duplicates and wrapped keys.
    #[test]
    fn scoped_and_naive_lookups_agree() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..50 {
            let mut q = GlobalQueues::default();
            let n = 1 + (rnd() % 300) as usize;
            for i in 0..n {
                // Keys clustered so that duplicates occur; masks of 4 threads.
                let key = if round % 2 == 0 {
                    (rnd() % 64) as u32
                } else {
                    rnd() as u32
                };
                let mask = 1 + rnd() % 15;
                q.rq.insert(key, mask, i as u32);
            }
            for _ in 0..100 {
                let start = if round % 2 == 0 {
                    (rnd() % 80) as u32
                } else {
                    rnd() as u32
                };
                let mask = 1u64 << (rnd() % 5);
                let (mut a, mut b) = (0, 0);
                let s = q.rq_lookup(start, mask, true, &mut a);
                let v = q.rq_lookup(start, mask, false, &mut b);
                assert_eq!(s, v, "round {round} start {start} mask {mask:b}");
                if s.is_some() {
                    assert!(a >= 1 && b >= 1);
                }
            }
        }
    }
}
