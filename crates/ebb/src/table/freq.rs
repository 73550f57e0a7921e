//! Event rates over a sliding period, with HAProxy's `freq_ctr` semantics.
//!
//! A counter keeps the events of the current period (`curr`, started at
//! `curr_tick`) and of the previous one (`prev`). The rate read at `now` is
//! `curr + prev * (period - elapsed) / period`, where `elapsed` is the time
//! since the current period began: the previous period's count is weighted
//! by the share of it that still lies inside the sliding window
//! (HAProxy's `read_freq_ctr_period`). A period with no event rotates to
//! zero; two periods without one read as 0.
//!
//! Times are `sched` ticks (wrapping milliseconds); `now` is a parameter,
//! so the arithmetic is tested without clocks. Threads read their clocks
//! at slightly different instants, so a `now` a little before the current
//! period's start (the wrapped difference past `i32::MAX`) is taken as
//! that start, never as a date two periods away.
//!
//! [`SharedFreqCtr`] is the same counter for one written by every thread
//! at once (a server's `srv_sess_rate`): the current period's start and
//! count share one atomic word, so an event is one compare-and-swap, never
//! a lock.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Milliseconds from `tick` to `now`; 0 when `now` is (by a clock's skew)
/// before `tick`.
fn since(now: u32, tick: u32) -> u32 {
    let d = now.wrapping_sub(tick);
    if d > i32::MAX as u32 {
        0
    } else {
        d
    }
}

/// A rate counter over a period given at each call (the table's definition
/// holds it, as HAProxy's stick-table data does).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FreqCtr {
    curr_tick: u32,
    curr: u32,
    prev: u32,
}

impl FreqCtr {
    /// A counter whose current period starts at `now`.
    pub fn new(now: u32) -> Self {
        FreqCtr {
            curr_tick: now,
            curr: 0,
            prev: 0,
        }
    }

    /// Rotates the periods so that `now` falls in the current one.
    fn rotate(&mut self, period: u32, now: u32) {
        let period = period.max(1);
        let elapsed = since(now, self.curr_tick);
        if elapsed < period {
            return;
        }
        self.prev = if elapsed < 2 * period { self.curr } else { 0 };
        self.curr = 0;
        // Periods stay aligned on the first one, as HAProxy's do.
        self.curr_tick = now.wrapping_sub(elapsed % period);
    }

    /// Adds `inc` events at `now`; returns the current period's count.
    pub fn add(&mut self, period: u32, now: u32, inc: u32) -> u32 {
        self.rotate(period, now);
        self.curr = self.curr.saturating_add(inc);
        self.curr
    }

    /// Events over the last `period` at `now`.
    pub fn read(&self, period: u32, now: u32) -> u32 {
        let period = period.max(1);
        let elapsed = since(now, self.curr_tick);
        let (curr, prev, elapsed) = if elapsed >= 2 * period {
            return 0;
        } else if elapsed >= period {
            (0, self.curr, elapsed - period)
        } else {
            (self.curr, self.prev, elapsed)
        };
        let weighted = prev as u64 * (period - elapsed) as u64 / period as u64;
        curr.saturating_add(weighted as u32)
    }

    /// Sets the count of a period starting at `now` (`set table ...
    /// data.X_rate V`): the rate reads `v` until the period turns.
    pub fn set(&mut self, now: u32, v: u32) {
        *self = FreqCtr {
            curr_tick: now,
            curr: v,
            prev: 0,
        };
    }

    /// The counter as the peers protocol carries it: milliseconds since
    /// the current period began (at `now`), its count, the previous one's.
    pub fn to_wire(&self, now: u32) -> (u32, u32, u32) {
        (now.wrapping_sub(self.curr_tick), self.curr, self.prev)
    }

    /// A counter received from a peer: its current period began
    /// `elapsed` ms before `now`.
    pub fn from_wire(now: u32, elapsed: u32, curr: u32, prev: u32) -> FreqCtr {
        FreqCtr {
            curr_tick: now.wrapping_sub(elapsed),
            curr,
            prev,
        }
    }
}

/// A [`FreqCtr`] many threads add to at once without a lock: the current
/// period's start (high half) and count (low half) in one word, the
/// previous period's count beside it, written by the thread that turned
/// the period (a reader in that instant may see the older one).
#[derive(Debug, Default)]
pub struct SharedFreqCtr {
    tick_curr: AtomicU64,
    prev: AtomicU32,
}

impl SharedFreqCtr {
    /// Adds `inc` events at `now`; returns the current period's count.
    pub fn add(&self, period: u32, now: u32, inc: u32) -> u32 {
        let period = period.max(1);
        let pack = |tick: u32, curr: u32| (u64::from(tick) << 32) | u64::from(curr);
        let mut old = self.tick_curr.load(Ordering::Relaxed);
        loop {
            let (tick, curr) = ((old >> 32) as u32, old as u32);
            let elapsed = since(now, tick);
            let (new, turned) = if elapsed < period {
                (pack(tick, curr.saturating_add(inc)), None)
            } else {
                // Periods stay aligned on the first one, as in FreqCtr.
                let prev = if elapsed < 2 * period { curr } else { 0 };
                (pack(now.wrapping_sub(elapsed % period), inc), Some(prev))
            };
            match self.tick_curr.compare_exchange_weak(
                old,
                new,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if let Some(prev) = turned {
                        self.prev.store(prev, Ordering::Relaxed);
                    }
                    return new as u32;
                }
                Err(seen) => old = seen,
            }
        }
    }

    /// Events over the last `period` at `now` (as [`FreqCtr::read`]).
    pub fn read(&self, period: u32, now: u32) -> u32 {
        let w = self.tick_curr.load(Ordering::Relaxed);
        FreqCtr {
            curr_tick: (w >> 32) as u32,
            curr: w as u32,
            prev: self.prev.load(Ordering::Relaxed),
        }
        .read(period, now)
    }
}
