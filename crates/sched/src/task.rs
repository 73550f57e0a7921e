//! # Task and tasklet types
//!
//! The vocabulary shared by every other module: identifiers, wakeup
//! reasons, the status a callback returns, the callback traits and the
//! tasklet classes. The operations live in [`crate::ctx`].
//!
//! ## Tasks and tasklets
//!
//! A **task** has a priority (nice), a timer (expiry tick) and a thread
//! binding: one thread (its state need not be `Send`) or any thread of a
//! mask (a *shared* task, whose state must be `Send`). A **tasklet** has
//! no priority: it runs as soon as possible in FIFO order within its
//! class, always on its owner thread, and is what an fd wakes. It may
//! carry a timer (an expiry tick, kept by the task rules) so that one
//! object owns a connection's readiness and its timeouts.
//!
//! ## Identifiers
//!
//! [`TaskId`] and [`TaskletId`] are `(thread, slot, generation)`. Slots are
//! reused; the generation is bumped on each free, so an id outliving its
//! task names nothing: every operation on it is a detected no-op (the
//! wake-after-free and delete-while-next bugs of C schedulers cannot
//! happen). Ids are plain data, `Copy + Send`, so they can be handed to
//! other threads and woken from there through the owner's inbox.

use crate::ctx::Ctx;

/// Thread number used in the ids of shared tasks.
pub(crate) const SHARED_THREAD: u16 = u16::MAX;

/// Names a task: its owner thread (or shared), slot and generation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaskId {
    pub(crate) thread: u16,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

/// Names a tasklet: its owner thread, slot and generation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaskletId {
    pub(crate) thread: u16,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

impl TaskId {
    /// Owner thread, or `None` for a shared task.
    pub fn thread(self) -> Option<usize> {
        (self.thread != SHARED_THREAD).then_some(self.thread as usize)
    }
    /// Whether the task may run on several threads.
    pub fn is_shared(self) -> bool {
        self.thread == SHARED_THREAD
    }
}

impl TaskletId {
    /// Owner thread.
    pub fn thread(self) -> usize {
        self.thread as usize
    }

    /// The id without its thread, in one word (an atomic can hold it,
    /// where the thread is known apart): see [`TaskletId::from_local`].
    pub fn local_bits(self) -> u64 {
        (u64::from(self.slot) << 32) | u64::from(self.gen)
    }

    /// The id of `thread`'s tasklet whose [`TaskletId::local_bits`] are
    /// `bits`. A made-up value names no live tasklet (the generation is
    /// checked at every use).
    pub fn from_local(thread: u16, bits: u64) -> TaskletId {
        TaskletId {
            thread,
            slot: (bits >> 32) as u32,
            gen: bits as u32,
        }
    }
}

impl std::fmt::Debug for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_shared() {
            write!(f, "Task(shared:{}#{})", self.slot, self.gen)
        } else {
            write!(f, "Task({}:{}#{})", self.thread, self.slot, self.gen)
        }
    }
}

impl std::fmt::Debug for TaskletId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tasklet({}:{}#{})", self.thread, self.slot, self.gen)
    }
}

/// Why a task or tasklet was woken: a set of bits, ORed across wakeups
/// until the callback runs and receives them.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Reasons(pub(crate) u16);

impl Reasons {
    /// No reason (never passed to a callback by the scheduler itself).
    pub const NONE: Reasons = Reasons(0);
    /// First run after creation.
    pub const INIT: Reasons = Reasons(1);
    /// The task's expiry date was reached.
    pub const TIMER: Reasons = Reasons(2);
    /// An fd registered for this tasklet became ready.
    pub const IO: Reasons = Reasons(4);
    /// A stop hook: a graceful stop has started.
    pub const SIGNAL: Reasons = Reasons(8);
    /// A message is waiting (woken by another task).
    pub const MSG: Reasons = Reasons(16);
    /// A resource became available (e.g. a server slot).
    pub const RES: Reasons = Reasons(32);
    /// Anything else.
    pub const OTHER: Reasons = Reasons(64);

    /// Whether every bit of `o` is set.
    #[inline]
    pub fn contains(self, o: Reasons) -> bool {
        self.0 & o.0 == o.0 && o.0 != 0
    }
    /// Whether some bit of `o` is set.
    #[inline]
    pub fn intersects(self, o: Reasons) -> bool {
        self.0 & o.0 != 0
    }
    /// Whether no bit is set.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Raw bits.
    #[inline]
    pub fn bits(self) -> u16 {
        self.0
    }
}

impl std::ops::BitOr for Reasons {
    type Output = Reasons;
    fn bitor(self, o: Reasons) -> Reasons {
        Reasons(self.0 | o.0)
    }
}

impl std::ops::BitOrAssign for Reasons {
    fn bitor_assign(&mut self, o: Reasons) {
        self.0 |= o.0;
    }
}

impl std::fmt::Debug for Reasons {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [&str; 7] = ["INIT", "TIMER", "IO", "SIGNAL", "MSG", "RES", "OTHER"];
        let mut first = true;
        for (i, n) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        if first {
            f.write_str("NONE")?;
        }
        Ok(())
    }
}

/// What a callback tells the scheduler when it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Keep the task or tasklet. A task's timer (if set) is (re)queued.
    Continue,
    /// Free it now: its id becomes stale, its state is dropped.
    Done,
}

/// A task's callback. Implemented for every matching `FnMut` closure; a
/// struct holding a connection's state can implement it directly.
pub trait TaskFn: 'static {
    /// Runs the task; `why` holds every reason it was woken for since its
    /// last run.
    fn run(&mut self, ctx: &mut Ctx, me: TaskId, why: Reasons) -> Status;
}

impl<F> TaskFn for F
where
    F: FnMut(&mut Ctx, TaskId, Reasons) -> Status + 'static,
{
    #[inline]
    fn run(&mut self, ctx: &mut Ctx, me: TaskId, why: Reasons) -> Status {
        self(ctx, me, why)
    }
}

/// A tasklet's callback, like [`TaskFn`].
pub trait TaskletFn: 'static {
    /// Runs the tasklet; `why` holds the reasons since its last run.
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status;
}

impl<F> TaskletFn for F
where
    F: FnMut(&mut Ctx, TaskletId, Reasons) -> Status + 'static,
{
    #[inline]
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        self(ctx, me, why)
    }
}

/// Tasklet classes, served in this order each loop turn with a budget each
/// (see the budgets in [`crate::ctx`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Woken from I/O or from another thread: latency matters most.
    Urgent = 0,
    /// Ordinary work, and every task picked from the run queues.
    Normal = 1,
    /// Self-waking tasklets: throughput work that must not starve others.
    Bulk = 2,
    /// Expensive callbacks (TLS handshakes): few per turn.
    Heavy = 3,
}

/// Number of classes.
pub(crate) const NB_CLASSES: usize = 4;

impl Class {
    pub(crate) const ALL: [Class; NB_CLASSES] =
        [Class::Urgent, Class::Normal, Class::Bulk, Class::Heavy];

    /// Weight of the class when splitting a turn's budget among the
    /// non-empty classes: HAProxy's 64/48/16 for urgent/normal/bulk, and 1
    /// for heavy, whose budget is then capped separately.
    pub(crate) const fn weight(self) -> u32 {
        match self {
            Class::Urgent => 64,
            Class::Normal => 48,
            Class::Bulk => 16,
            Class::Heavy => 1,
        }
    }
}
