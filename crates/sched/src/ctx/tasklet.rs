//! # Tasklets
//!
//! A tasklet has no priority: it runs as soon as possible, FIFO within its
//! class, always on its owner thread; it is what an fd wakes. It may carry
//! a timer (see `timers`). Which class a wakeup puts it in:
//!
//! * woken outside any callback (fd event, timer, init): *urgent*;
//! * woken by a callback: the class being served;
//! * woken by itself while running, or flagged self-waking: *bulk*;
//! * woken from another thread (through its inbox): *urgent*;
//! * flagged heavy: always *heavy*, whatever woke it.
//!
//! An **instant** wakeup puts it at the head of the class being served
//! (urgent outside callbacks), so it runs next; `tasklet_wakeup_after`
//! chains several in order ahead of the rest. A wakeup of a tasklet
//! already queued only ORs the reasons in. Another thread's tasklet is
//! never touched here: the wakeup becomes a message in its owner's inbox.

use super::types::{sf, Cb, Place};
use super::Ctx;
use crate::shared::{encode, mono_ns, MSG_INSTANT, MSG_TASKLET};
use crate::sys::Events;
use crate::task::{Class, Reasons, Status, TaskletFn, TaskletId};
use std::os::fd::RawFd;

impl Ctx {
    /// Creates a tasklet from a closure (not queued: wake it to run it).
    pub fn new_tasklet<F>(&mut self, name: &'static str, f: F) -> TaskletId
    where
        F: FnMut(&mut Ctx, TaskletId, Reasons) -> Status + 'static,
    {
        self.new_tasklet_obj(name, f)
    }

    /// Creates a tasklet from any [`TaskletFn`] (a connection's state, say).
    pub fn new_tasklet_obj(&mut self, name: &'static str, f: impl TaskletFn) -> TaskletId {
        self.new_tasklet_boxed(name, Box::new(f))
    }

    /// [`Ctx::new_tasklet_obj`] for a state already on the heap: a large
    /// one (a connection's) is built in its box and never moved again.
    pub fn new_tasklet_boxed(&mut self, name: &'static str, f: Box<dyn TaskletFn>) -> TaskletId {
        let prof = self.intern(name);
        let i = self.alloc(sf::LIVE, prof, Cb::Tasklet(f));
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

    pub(super) fn remote_tasklet(&self, id: TaskletId, why: Reasons, instant: bool) {
        let kind = MSG_TASKLET | if instant { MSG_INSTANT } else { 0 };
        self.shared
            .send(id.thread as usize, encode(id.slot, id.gen, kind, why));
    }

    /// Queues a local tasklet by the class rules (module documentation).
    pub(super) fn tasklet_wake_local(&mut self, i: usize, why: Reasons, place: Place) {
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

    /// Takes the fd events accumulated for a tasklet since the last call.
    pub fn take_events(&mut self, id: TaskletId) -> Events {
        match self.tasklet_idx(id) {
            Some(i) => std::mem::take(&mut self.slots[i].events),
            None => Events::NONE,
        }
    }

    /// Makes the poller keep, for tasklet `id`, the numbers of the fds its
    /// events come from, for [`Ctx::take_event_fds`]: for a tasklet many
    /// fds are registered with, which must know which one fired (a thread's
    /// watcher of idle connections). The others pay one flag test per
    /// event.
    pub fn log_fds(&mut self, id: TaskletId) {
        if let Some(i) = self.tasklet_idx(id) {
            self.slots[i].flags |= sf::FD_LOG;
        }
    }

    /// Moves into `out` the fds events came from for tasklet `id` (see
    /// [`Ctx::log_fds`]) since the last call, in their order (an fd may
    /// come more than once). `false` when some were not kept (more than
    /// the log holds between two runs): the caller then looks at all of
    /// its fds.
    pub fn take_event_fds(&mut self, id: TaskletId, out: &mut Vec<RawFd>) -> bool {
        let Some(i) = self.tasklet_idx(id) else {
            return true;
        };
        let i = i as u32;
        self.fd_log.retain(|&(slot, fd)| {
            if slot == i {
                out.push(fd);
            }
            slot != i
        });
        !std::mem::take(&mut self.fd_log_lost)
    }

    /// A mark of the fd events the poller passed tasklet `id` so far: the
    /// same mark taken later says no event reached it in between (an
    /// fd registered only with it, say an idle connection, saw neither a
    /// close nor bytes). `None` when `id` is not a live tasklet of this
    /// thread, or holds events it has not taken yet (they came before the
    /// mark and would be hidden by it).
    pub fn io_mark(&self, id: TaskletId) -> Option<u32> {
        let s = &self.slots[self.tasklet_idx(id)?];
        s.events.is_empty().then_some(s.io_seq)
    }
}
