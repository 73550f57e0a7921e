//! # Timers
//!
//! Tasks and tasklets have an expiry tick (eternity: none), kept in one
//! wait queue per thread (and one shared, for shared tasks) keyed by
//! expiry and scanned from `now - 2^31` in circular order, so dates work
//! across the u32 wrap.
//!
//! A key is a *lower bound* of the real expiry: moving an expiry later
//! leaves the node where it is (lazy requeue, fixed when it surfaces in
//! the scan); moving it earlier reinserts at once; eternity leaves the
//! node to be dropped at its scan (`unqueue` removes it at once). Among
//! timers due in the same turn, one moved later that is already due when
//! its old node surfaces fires at that position (HAProxy does the same);
//! dates are never missed or fired early.
//!
//! A fired timer is consumed (the expiry is reset to eternity) before the
//! entry runs with [`Reasons::TIMER`]; the callback arms a new one. A date
//! set from the entry's own callback is queued when the callback returns.
//! A task due joins the run queue; a tasklet due is queued like any
//! wakeup from outside a callback (urgent, or heavy if flagged). Wakeups
//! and timers coexist: a wakeup never moves the timer, and a timer firing
//! while the entry is queued only ORs its reason in.

use super::types::{sf, Place, Slot};
use super::Ctx;
use crate::activity::Activity;
use crate::shared::{gf, GSlot, Shared};
use crate::task::{Reasons, TaskId, TaskletId};
use crate::ticks::{self, Tick, ETERNITY};
use ebtree::{Eb32Tree, Handle};
use std::sync::atomic::Ordering;

impl Ctx {
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
                self.wq_delete(h);
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

    /// Removes a node from the local wait queue; `wq_low` follows when
    /// it was the first one (a cancelled timer does not shorten a poll).
    pub(super) fn wq_delete(&mut self, h: Handle) {
        let first = self.wq.key(h) == Some(self.wq_low);
        self.wq.delete(h);
        if first {
            let start = self.now.wrapping_sub(ticks::TICK_HALF);
            self.wq_low = self
                .wq
                .lookup_ge_wrap(start)
                .and_then(|h| self.wq.key(h))
                .unwrap_or(ETERNITY);
        }
    }

    pub(super) fn queue_local(&mut self, i: usize) {
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
                    self.wq_low = ticks::first(self.wq_low, exp);
                }
            }
            None => {
                let h = self.wq.insert(exp, i as u32);
                self.slots[i].wq = Some(h);
                self.wq_low = ticks::first(self.wq_low, exp);
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
                self.wq_delete(h);
            }
        }
    }

    /// Wakes expired timers, local then shared, at most `depth` each.
    pub(super) fn wake_expired(&mut self) {
        let now = self.now;
        let mut woken = 0u64;
        let mut budget = self.depth;
        // Nothing in the local queue is due before `wq_low`.
        if !ticks::is_expired(self.wq_low, now) {
            budget = 0;
        }
        while budget > 0 {
            let i = match pop_expired(&mut self.wq, &mut self.slots, now) {
                Ok(i) => i,
                Err(next) => {
                    self.wq_low = next;
                    break;
                }
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
    pub(super) fn wake_expired_shared(&mut self) -> u64 {
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
                let Ok(i) = pop_expired(&mut gq.wq, &mut gq.slots, now) else {
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

impl Timed for GSlot {
    fn timer(&mut self) -> (&mut Tick, &mut Option<Handle>) {
        (&mut self.expire, &mut self.wq)
    }
}

/// The next due entry of a wait queue (local or shared), scanned in wrap
/// order from `now - 2^31`: entries whose timer was cancelled are dropped,
/// entries whose expiry moved later are requeued at it (lazy requeue), and
/// the first really due one is unlinked, its expiry cleared, and returned.
/// When nothing is due: `Err` with the first key left (eternity: none).
fn pop_expired<T: Timed>(
    wq: &mut Eb32Tree<u32>,
    slots: &mut [T],
    now: Tick,
) -> Result<usize, Tick> {
    let start = now.wrapping_sub(ticks::TICK_HALF);
    loop {
        let Some((h, (key, &i))) = wq
            .lookup_ge_wrap(start)
            .and_then(|h| Some((h, wq.entry(h)?)))
        else {
            return Err(ETERNITY);
        };
        if ticks::is_lt(now, key) {
            return Err(key);
        }
        let i = i as usize;
        let Some(slot) = slots.get_mut(i) else {
            return Err(key);
        };
        let (exp, wqh) = slot.timer();
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
        return Ok(i);
    }
}
