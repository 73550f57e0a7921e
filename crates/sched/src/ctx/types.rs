//! # Types of the per-thread scheduler
//!
//! What a [`Ctx`](super::Ctx) is made of, apart from what it does: the
//! slot every task and tasklet lives in, the slot flags (one line each,
//! and [`flags_str`] to decode them), the class-list header and the
//! constants of the loop with the reason for each value.
//!
//! A [`Slot`] holds the callback (boxed), the state flags, the wakeup
//! reasons, and the links of every structure it can be in: the run-queue
//! and wait-queue tree handles (a task can be in both at once, so an I/O
//! wakeup does not move its timer; a tasklet uses only the wait-queue
//! one, for its timer) and an intrusive doubly-linked link for its class
//! list. Its size is checked at compile time: a thread holds one per
//! connection and more, and the loop touches one per callback.

use crate::sys::Events;
use crate::task::{Reasons, TaskFn, TaskletFn};
use crate::ticks::Tick;
use ebtree::Handle;

pub(super) const NIL: u32 = u32::MAX;

/// epoll events fetched per poll: HAProxy's `tune.maxpollevents` default.
pub(super) const MAX_POLL_EVENTS: usize = 200;
/// The fds kept for [`Ctx::log_fds`](super::Ctx::log_fds) tasklets between
/// two takes; past it the log says some were lost.
pub(super) const FD_LOG_MAX: usize = 4096;

/// Longest sleep in the poller, ms: a thread wakes at least once a minute
/// even with no timer (DESIGN.md, "The loop").
pub const MAX_POLL_MS: u32 = 60_000;

/// epoll data of the thread's own eventfd (never an fd's: fds are below
/// 2^31).
pub(super) const EFD_TOKEN: u64 = u64::MAX;

/// What the thread's poller knows of one fd number: the epoll data of its
/// registration is `(fd, gen)`, and `owner` names the tasklet its events
/// go to (its `(slot, generation)` data, [`FdEnt::NONE`] when none), so
/// that another tasklet of the thread takes the fd over without a system
/// call. `rw`: writability is watched.
#[derive(Clone, Copy)]
pub(super) struct FdEnt {
    pub(super) gen: u32,
    pub(super) rw: bool,
    pub(super) owner: u64,
}

impl FdEnt {
    /// No tasklet: events of the registration are dropped.
    pub(super) const NONE: u64 = u64::MAX;
    pub(super) const FREE: FdEnt = FdEnt {
        gen: 0,
        rw: false,
        owner: FdEnt::NONE,
    };
}

/// Window (in loop turns) of the average loop time that drives `auto`
/// profiling: about 32 ms of reaction at the 1 ms threshold.
pub(super) const LOOP_AVG_WINDOW: u64 = 32;

/// Slot flags (a decoder is in [`flags_str`]).
pub(super) mod sf {
    /// The slot holds a task or tasklet.
    pub(in crate::ctx) const LIVE: u16 = 1;
    /// A task (else a tasklet).
    pub(in crate::ctx) const TASK: u16 = 2;
    /// Its callback is running.
    pub(in crate::ctx) const RUNNING: u16 = 4;
    /// Killed while running: freed when the callback returns.
    pub(in crate::ctx) const KILLED: u16 = 8;
    /// Linked in a class list.
    pub(in crate::ctx) const IN_LIST: u16 = 16;
    /// Heavy tasklet: always joins the heavy class.
    pub(in crate::ctx) const HEAVY: u16 = 32;
    /// Task woken while running: requeued when it returns.
    pub(in crate::ctx) const WOKEN_RUN: u16 = 64;
    /// Woken with SIGNAL when a graceful stop starts.
    pub(in crate::ctx) const STOP_HOOK: u16 = 128;
    /// Stand-in for a picked shared task (not counted as live).
    pub(in crate::ctx) const PROXY: u16 = 256;
    /// Self-waking tasklet: always joins the bulk class.
    pub(in crate::ctx) const SELF_WAKING: u16 = 512;
    /// Keeps the numbers of the fds its events came from
    /// ([`Ctx::log_fds`](super::super::Ctx::log_fds)).
    pub(in crate::ctx) const FD_LOG: u16 = 1024;
}

/// Decodes slot flags, for debugging.
pub(crate) fn flags_str(f: u16) -> String {
    const N: [&str; 11] = [
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
        "FD_LOG",
    ];
    let v: Vec<&str> = (0..N.len())
        .filter(|b| f & (1 << b) != 0)
        .map(|b| N[b])
        .collect();
    v.join("|")
}

pub(super) enum Cb {
    None,
    Task(Box<dyn TaskFn>),
    Tasklet(Box<dyn TaskletFn>),
    /// A shared task picked by this thread: `(shared slot, generation)`.
    Proxy(u32, u32),
}

/// One task or tasklet. Kept within one and a half cache lines: the hot
/// fields of a wakeup (gen, flags, links, tree handles) sit together.
pub(super) struct Slot {
    pub(super) gen: u32,
    pub(super) flags: u16,
    /// Class list it is linked in. INVARIANT: meaningful with IN_LIST.
    pub(super) class: u8,
    pub(super) nice: i16,
    pub(super) prof: u16,
    pub(super) reasons: Reasons,
    pub(super) events: Events,
    /// fd events the poller passed it so far (wrapping): see
    /// [`Ctx::io_mark`](super::Ctx::io_mark).
    pub(super) io_seq: u32,
    /// Class list links, or the free-list link for a free slot.
    pub(super) prev: u32,
    pub(super) next: u32,
    pub(super) expire: Tick,
    pub(super) rq: Option<Handle>,
    pub(super) wq: Option<Handle>,
    /// Monotonic ns of the wakeup, when profiling (0 otherwise).
    pub(super) wake_ns: u64,
    pub(super) cb: Cb,
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
pub(super) struct List {
    pub(super) head: u32,
    pub(super) tail: u32,
    pub(super) len: u32,
}

impl List {
    pub(super) const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// Where a tasklet wakeup puts it in its class list.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Tail,
    Head,
    After(u32),
}
