//! # The slab
//!
//! Tasks and tasklets share one slab of [`Slot`]s addressed by
//! `(slot, generation)` ids. Free slots are chained through their `next`
//! link and reused first. Freeing bumps the generation: old ids, old inbox
//! messages and old epoll registrations all become detected no-ops, so
//! the wake-after-free and delete-while-next bugs of C schedulers cannot
//! happen.
//!
//! Lookups check the thread, the generation and the flags: a killed
//! entry (freed when its running callback returns) is already invisible,
//! a task id never names a tasklet and the reverse, and the stand-in of a
//! picked shared task (`PROXY`) is never a tasklet. Freeing unlinks the
//! slot from every structure it is in (class list, run and wait queues)
//! and keeps the live counts; the callback is handed back so that the
//! caller drops it after the slab is consistent again (its `Drop` may
//! call into the scheduler's handle).

use super::types::{sf, Cb, Slot, NIL};
use super::Ctx;
use crate::sys::Events;
use crate::task::{Reasons, TaskId, TaskletId};
use crate::ticks::ETERNITY;

impl Ctx {
    pub(super) fn alloc(&mut self, flags: u16, prof: u16, cb: Cb) -> usize {
        let slot = Slot {
            gen: 0,
            flags,
            class: 0,
            nice: 0,
            prof,
            reasons: Reasons::NONE,
            events: Events::NONE,
            io_seq: 0,
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
    pub(super) fn task_idx(&self, id: TaskId) -> Option<usize> {
        if id.thread as usize != self.tid {
            return None;
        }
        let s = self.slots.get(id.slot as usize)?;
        (s.gen == id.gen && s.flags & (sf::LIVE | sf::TASK | sf::KILLED) == (sf::LIVE | sf::TASK))
            .then_some(id.slot as usize)
    }

    /// Index of a live, not killed tasklet of this thread.
    #[inline]
    pub(super) fn tasklet_idx(&self, id: TaskletId) -> Option<usize> {
        if id.thread as usize != self.tid {
            return None;
        }
        self.tasklet_idx_raw(id.slot, id.gen)
    }

    #[inline]
    pub(super) fn tasklet_idx_raw(&self, slot: u32, gen: u32) -> Option<usize> {
        let s = self.slots.get(slot as usize)?;
        (s.gen == gen && s.flags & (sf::LIVE | sf::TASK | sf::KILLED | sf::PROXY) == sf::LIVE)
            .then_some(slot as usize)
    }

    /// Unlinks a slot from everything and frees it; returns the callback
    /// so that it is dropped by the caller.
    pub(super) fn free_slot(&mut self, i: usize) -> Cb {
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
            self.wq_delete(h);
        }
        if flags & sf::PROXY == 0 {
            self.live -= 1;
        }
        if flags & sf::STOP_HOOK != 0 {
            self.hooked_live -= 1;
        }
        cb
    }
}
