//! # Ticks: wrapping milliseconds
//!
//! Time in the scheduler is a [`Tick`]: milliseconds in a `u32` that wraps
//! about every 49.7 days. The value `0` is reserved and means **eternity**
//! (no expiry); a computed date that lands on 0 is moved to 1, one
//! millisecond late, which no timer can notice.
//!
//! Two dates are compared through their signed difference, so every
//! comparison is right as long as the dates are less than 2^31 ms (24.8
//! days) apart, wherever the wrap falls. That is HAProxy's `ticks.h` rule and
//! the reason the wait queue is scanned from `now - 2^31` in circular
//! order.
//!
//! The current date comes from a [`Clock`]. The runtime reads it once per
//! loop turn (`now` does not move during a turn). The default
//! [`MonotonicClock`] starts 20 seconds before the u32 wrap, as HAProxy
//! does, so that any wrap bug shows within 20 s of every start instead of
//! after seven weeks. Tests inject a [`ManualClock`] and step time by hand.

use crate::shared::mono_ns;
use std::sync::atomic::{AtomicU64, Ordering};

/// A date or a duration in wrapping milliseconds; `0` is eternity.
pub type Tick = u32;

/// The eternity tick: a timer set to it never fires.
pub const ETERNITY: Tick = 0;

/// Half the tick space: dates further apart than this compare wrongly.
pub const TICK_HALF: u32 = 1 << 31;

/// Whether `t` is a real date (not eternity).
#[inline(always)]
pub fn is_set(t: Tick) -> bool {
    t != ETERNITY
}

/// `now + ms`, never eternity (a result of 0 becomes 1).
#[inline(always)]
pub fn add(now: Tick, ms: u32) -> Tick {
    let r = now.wrapping_add(ms);
    if r == 0 {
        1
    } else {
        r
    }
}

/// `now + ms`, or eternity when `ms` is `None` (HAProxy's `tick_add_ifset`).
#[inline(always)]
pub fn add_ifset(now: Tick, ms: Option<u32>) -> Tick {
    match ms {
        Some(ms) => add(now, ms),
        None => ETERNITY,
    }
}

/// Whether `a` is strictly before `b` (both set), wrap-safe.
#[inline(always)]
pub fn is_lt(a: Tick, b: Tick) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Whether `a` is before or at `b` (both set), wrap-safe.
#[inline(always)]
pub fn is_le(a: Tick, b: Tick) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

/// The earlier of two dates; eternity loses to any set date.
#[inline(always)]
pub fn first(a: Tick, b: Tick) -> Tick {
    if !is_set(a) {
        b
    } else if !is_set(b) || is_lt(a, b) {
        a
    } else {
        b
    }
}

/// The later of two dates; eternity wins.
#[inline(always)]
pub fn last(a: Tick, b: Tick) -> Tick {
    if !is_set(a) || !is_set(b) {
        ETERNITY
    } else if is_lt(a, b) {
        b
    } else {
        a
    }
}

/// Whether `t` is set and reached at `now`.
#[inline(always)]
pub fn is_expired(t: Tick, now: Tick) -> bool {
    is_set(t) && is_le(t, now)
}

/// Milliseconds from `now` to `t`: `Some(0)` when expired, `None` for
/// eternity.
#[inline(always)]
pub fn remain(now: Tick, t: Tick) -> Option<u32> {
    if !is_set(t) {
        None
    } else if is_le(t, now) {
        Some(0)
    } else {
        Some(t.wrapping_sub(now))
    }
}

/// Monotonic nanoseconds since the process's first reading: the clock of
/// [`crate::Ctx::now_ns`], read now (off a worker, or between turns).
#[inline]
pub fn mono_now_ns() -> u64 {
    mono_ns()
}

/// A source of monotonic milliseconds, read once per loop turn.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic milliseconds; only differences matter, wrapping is fine.
    fn now_ms(&self) -> u64;
    /// What [`Clock::now_ms`] reads at the instant the scheduler's own
    /// nanosecond clock read `mono_ns`, when this clock follows that one:
    /// a loop turn then takes its tick from the reading its poll made on
    /// waking, with no second clock read. `None` (the default): the turn
    /// calls `now_ms`.
    fn ms_at(&self, _mono_ns: u64) -> Option<u64> {
        None
    }
}

/// Milliseconds since the clock's creation, offset so that the u32 tick
/// wraps 20 s after start (HAProxy's `now_offset`, for the same reason:
/// find wrap bugs in minutes, not in weeks).
#[derive(Debug)]
pub struct MonotonicClock {
    /// The scheduler's nanosecond clock at creation.
    start_ns: u64,
    offset: u64,
}

impl MonotonicClock {
    /// A clock whose tick wraps 20 s from now.
    pub fn new() -> Self {
        MonotonicClock {
            start_ns: mono_ns(),
            offset: u64::from(u32::MAX - 20_000),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        self.offset + mono_ns().saturating_sub(self.start_ns) / 1_000_000
    }

    fn ms_at(&self, mono_ns: u64) -> Option<u64> {
        Some(self.offset + mono_ns.saturating_sub(self.start_ns) / 1_000_000)
    }
}

/// A clock that moves only when told: for deterministic timer tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    ms: AtomicU64,
}

impl ManualClock {
    /// A clock showing `ms`.
    pub fn new(ms: u64) -> Self {
        ManualClock {
            ms: AtomicU64::new(ms),
        }
    }
    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }
    /// Sets the clock.
    pub fn set(&self, ms: u64) {
        self.ms.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.ms.load(Ordering::SeqCst)
    }
}

/// The tick for a clock reading: the low 32 bits, 0 moved to 1.
#[inline(always)]
pub fn from_ms(ms: u64) -> Tick {
    let t = ms as u32;
    if t == 0 {
        1
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_safe_comparisons() {
        let before = u32::MAX - 5;
        let after = add(before, 10); // wraps past 0 (skipping it)
        assert_eq!(after, 4);
        assert!(is_lt(before, after));
        assert!(!is_lt(after, before));
        assert!(is_expired(before, after));
        assert!(!is_expired(after, before));
        assert_eq!(first(before, after), before);
        assert_eq!(first(ETERNITY, after), after);
        assert_eq!(first(after, ETERNITY), after);
        assert_eq!(last(before, after), after);
        assert_eq!(last(before, ETERNITY), ETERNITY);
        assert_eq!(remain(before, after), Some(10));
        assert_eq!(remain(after, before), Some(0));
        assert_eq!(remain(after, ETERNITY), None);
        assert!(!is_expired(ETERNITY, after));
        assert_eq!(add(u32::MAX, 1), 1, "0 is eternity, never a date");
        assert_eq!(from_ms(1u64 << 32), 1);
        assert_eq!(add_ifset(5, None), ETERNITY);
    }

    #[test]
    fn monotonic_clock_wraps_soon() {
        let c = MonotonicClock::new();
        let t = from_ms(c.now_ms());
        assert!(t > u32::MAX - 21_000);
    }

    #[test]
    fn monotonic_clock_reads_back_the_schedulers_instants() {
        // A turn's tick from its poll's clock reading is the one now_ms
        // would have given then: never ahead of a later now_ms, and as
        // the reading moves, so does the tick.
        let c = MonotonicClock::new();
        let at = mono_ns();
        let then = c.ms_at(at).unwrap();
        let now = c.now_ms();
        assert!(then <= now && now - then < 1_000, "{then} {now}");
        assert_eq!(c.ms_at(at + 5_000_000), Some(then + 5));
        assert_eq!(ManualClock::new(7).ms_at(at), None);
    }
}
