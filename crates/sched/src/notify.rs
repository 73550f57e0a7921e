//! # The sleeping/notified handshake
//!
//! A thread about to sleep in `epoll_wait` and a thread that just queued a
//! wakeup for it must agree, without a lock, on whether the eventfd has to
//! be written. The rules (HAProxy's `sleeping_thread_mask` and
//! `TH_FL_NOTIFIED`, as one word per thread):
//!
//! ```text
//!   sleeper                              waker
//!   state = SLEEPING          (1)        publish the message       (a)
//!   fence(SeqCst)                        fence(SeqCst)
//!   re-check inbox/queues     (2)        s = state                 (b)
//!   nothing? epoll_wait                  if s == SLEEPING (not NOTIFIED):
//!   state = 0 after waking    (3)           CAS to SLEEPING|NOTIFIED,
//!                                           on success write eventfd
//! ```
//!
//! The two fences make this Dekker's pattern: either the sleeper's re-check
//! (2) sees the message (a), or the waker's load (b) sees SLEEPING (1) and
//! writes the eventfd. A wakeup aimed at a sleeping thread is never lost;
//! a thread that is awake (state 0) is never sent an eventfd write; and
//! among several wakers of one sleeping thread only the first writes
//! (NOTIFIED), so one sleep costs at most one `write`.
//!
//! Step (1) is a plain store, not an OR: a NOTIFIED bit left by a waker
//! while the thread was awake must not survive into the next sleep, or the
//! next waker would skip the eventfd. Such a waker's message was published
//! before its CAS, so the re-check (2) of the next sleep sees it.

use crate::sync::{AtomicU32, Ordering};

/// The thread is about to sleep or sleeps in the poller.
pub const SLEEPING: u32 = 1;
/// A waker already wrote (or is writing) the eventfd for this sleep.
pub const NOTIFIED: u32 = 2;

/// One thread's sleep state word.
#[derive(Debug)]
pub struct SleepState {
    bits: AtomicU32,
}

impl Default for SleepState {
    fn default() -> Self {
        Self::new()
    }
}

impl SleepState {
    /// An awake thread.
    pub fn new() -> SleepState {
        SleepState {
            bits: AtomicU32::new(0),
        }
    }

    /// Sleeper, step (1): announce the sleep. The caller must re-check for
    /// work afterwards and call [`Self::awake`] if it finds some.
    #[inline]
    pub fn announce_sleep(&self) {
        self.bits.store(SLEEPING, Ordering::SeqCst);
        crate::sync::fence(Ordering::SeqCst);
    }

    /// Sleeper, step (3): back to work (after polling or on finding work
    /// in the re-check).
    #[inline]
    pub fn awake(&self) {
        self.bits.store(0, Ordering::SeqCst);
    }

    /// Waker, step (b), after publishing its message: whether the caller
    /// must write the target's eventfd. True at most once per sleep.
    #[inline]
    pub fn should_notify(&self) -> bool {
        crate::sync::fence(Ordering::SeqCst);
        let mut s = self.bits.load(Ordering::SeqCst);
        loop {
            if s != SLEEPING {
                // Awake, or already notified for this sleep.
                return false;
            }
            match self
                .bits
                .compare_exchange(s, s | NOTIFIED, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(x) => s = x,
            }
        }
    }

    /// Whether the thread announced a sleep (diagnostics, tests).
    pub fn is_sleeping(&self) -> bool {
        self.bits.load(Ordering::SeqCst) & SLEEPING != 0
    }
}
