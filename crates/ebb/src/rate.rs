//! Events-per-second limits: the process's `maxconnrate` and
//! `maxsessrate`, a frontend's `rate-limit sessions`. A listener asks
//! [`RateLimit::wait_ms`] before it accepts and pauses that long; each
//! event is counted with [`RateLimit::note`].

use std::sync::atomic::{AtomicU32, AtomicU64};

/// An events-per-second limit (`maxconnrate`, `maxsessrate`, a frontend's
/// `rate-limit sessions`),
/// measured as HAProxy's frequency counters: the events of the current
/// second plus those of the previous one weighted by what is left of the
/// current second.
#[derive(Default)]
pub struct RateLimit {
    /// Events per second allowed; 0: no limit.
    pub limit: u32,
    /// The current second (in scheduler ticks / 1000) in the high half,
    /// its events in the low half.
    cur: AtomicU64,
    /// The previous second's events.
    prev: AtomicU32,
}

impl RateLimit {
    pub fn new(limit: u32) -> RateLimit {
        RateLimit {
            limit,
            ..RateLimit::default()
        }
    }

    /// The current second's events and the previous one's, the counter
    /// moved on to `now`'s second first.
    fn rotate(&self, now: sched::Tick) -> (u32, u32) {
        use std::sync::atomic::Ordering::Relaxed;
        let sec = u64::from(now / 1000);
        loop {
            let c = self.cur.load(Relaxed);
            let (at, n) = (c >> 32, c as u32);
            if at == sec {
                return (n, self.prev.load(Relaxed));
            }
            if self
                .cur
                .compare_exchange(c, sec << 32, Relaxed, Relaxed)
                .is_ok()
            {
                // A second without events between them: none before.
                let p = if (at + 1) & 0xffff_ffff == sec { n } else { 0 };
                self.prev.store(p, Relaxed);
                return (0, p);
            }
        }
    }

    /// Counts one event at `now`.
    pub fn note(&self, now: sched::Tick) {
        if self.limit == 0 {
            return;
        }
        self.rotate(now);
        self.cur.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long to wait, in ms, before one more event keeps the rate
    /// within the limit; `None`: it may happen now.
    pub fn wait_ms(&self, now: sched::Tick) -> Option<u32> {
        if self.limit == 0 {
            return None;
        }
        let (cur, prev) = self.rotate(now);
        let left = 1000 - now % 1000;
        let past = u64::from(prev) * u64::from(left) / 1000;
        if u64::from(cur) + past < u64::from(self.limit) {
            return None;
        }
        if cur >= self.limit {
            // Not before the next second.
            return Some(left.max(1));
        }
        // Until the previous second's weight falls enough: past `until`
        // ms into this second, `prev * (1000 - ms) / 1000 < limit - cur`.
        let room = u64::from(self.limit - cur);
        let until = 1000 - (room * 1000 / u64::from(prev.max(1))).min(1000) as u32;
        Some(until.saturating_sub(1000 - left).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::RateLimit;

    #[test]
    fn rate_counts_this_second_and_the_weighted_previous_one() {
        let r = RateLimit::new(5);
        for _ in 0..5 {
            assert_eq!(r.wait_ms(0), None);
            r.note(0);
        }
        // Full: not before the next second.
        assert_eq!(r.wait_ms(0), Some(1000));
        assert_eq!(r.wait_ms(400), Some(600));
        // At 1000 the previous five weigh 5; at 1001, 4.995 (4).
        assert_eq!(r.wait_ms(1000), Some(1));
        assert_eq!(r.wait_ms(1001), None);
        r.note(1001);
        // 1 + 5 * (1000 - ms) / 1000 < 5 from 200 ms on.
        assert_eq!(r.wait_ms(1001), Some(199));
        assert_eq!(r.wait_ms(1201), None);
        // A second without events: none counted before.
        assert_eq!(r.wait_ms(3000), None);
        // No limit: never waits.
        let free = RateLimit::new(0);
        free.note(0);
        assert_eq!(free.wait_ms(0), None);
    }
}
