//! # Class lists
//!
//! The four class lists (urgent, normal, bulk, heavy) are intrusive
//! doubly-linked lists over slab indices: linking or unlinking never
//! allocates and is O(1) wherever the entry sits, which instant wakeups
//! (insert at the head or after a given entry) and kills (remove from the
//! middle) need. An entry is in at most one list, flagged `IN_LIST`, its
//! class recorded in the slot. Every link and unlink also keeps the
//! per-callback count of queued entries that `show tasks` prints.

use super::types::{sf, Place, NIL};
use super::Ctx;
use crate::task::Class;

impl Ctx {
    /// Keeps the per-name count of queued entries (`show tasks`). Shared
    /// tasks picked by this thread are counted by the shared queue's
    /// owner, not here.
    #[inline(always)]
    pub(super) fn count_queued(&self, i: usize, up: bool) {
        let s = &self.slots[i];
        if s.flags & sf::PROXY == 0 {
            self.remote().prof.queued(s.prof, up);
        }
    }

    #[inline]
    pub(super) fn list_link(&mut self, c: Class, i: usize, place: Place) {
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

    #[inline]
    pub(super) fn list_remove(&mut self, i: usize) {
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

    pub(super) fn list_pop(&mut self, c: Class) -> Option<usize> {
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
}
