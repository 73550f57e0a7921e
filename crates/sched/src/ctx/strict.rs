//! # Strict checks
//!
//! With the `strict` feature (which the crate's own tests enable) and in
//! debug builds only, every loop turn ends by checking every structural
//! invariant of the thread's queues: both trees validate, every tree node
//! and every list entry points back at a slot that points at it, the class
//! lists' links and lengths agree, and the live and stop-hooked counts
//! match the slab. O(n) per turn, so never in benchmarks or production.

use super::types::{sf, NIL};
use super::Ctx;

impl Ctx {
    /// Checks every structural invariant of this thread's queues (the
    /// `strict` feature, which the crate's own tests enable, in debug builds
    /// only so that benchmarks are not slowed): the trees,
    /// the class lists and their counts, the slots' links back to them and
    /// the live counts. O(n) per turn, so never in production builds.
    #[cfg(all(feature = "strict", debug_assertions))]
    pub(super) fn check_invariants(&self) {
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
}
