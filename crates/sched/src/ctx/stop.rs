//! # Stop hooks
//!
//! A task or tasklet registered with `on_stop` is woken with
//! [`Reasons::SIGNAL`] when a graceful stop starts (or at once, if it
//! registers after the stop began), and the thread's loop keeps running
//! until every registered entry has ended: listeners close and live
//! connections finish their exchange. Unregistered entries do not hold a
//! graceful stop; a hard stop holds for nothing.

use super::types::sf;
use super::types::Place;
use super::Ctx;
use crate::task::{Reasons, TaskId, TaskletId};
use std::sync::atomic::Ordering;

impl Ctx {
    pub(super) fn hook(&mut self, i: usize) {
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

    pub(super) fn wake_hooked(&mut self, i: usize) {
        if self.slots[i].flags & sf::TASK != 0 {
            self.task_wake_local(i, Reasons::SIGNAL);
        } else {
            self.tasklet_wake_local(i, Reasons::SIGNAL, Place::Tail);
        }
    }

    pub(super) fn check_stop(&mut self) {
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
}
