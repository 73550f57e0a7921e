//! Soft stop without losing a request: how a client connection ends while
//! the process stops (SIGUSR1/SIGTERM, or an old worker after a reload).
//!
//! A keep-alive connection cannot be closed at an arbitrary moment: the
//! client may have sent its next request already, and a close that crosses
//! it on the wire loses that request (the client reads an RST or EOF). So,
//! once the stop begins:
//! - an answer carries `Connection: close` and the connection ends after
//!   it ([`keep_alive`]); the client knows not to send more;
//! - an idle connection (no request, nothing to send) stays open for
//!   [`IDLE_GRACE_MS`] after its last answer (or its accept): a client that
//!   goes on sends its next request within that time and gets it answered
//!   with close; one that stays silent that long is idle, and closing it
//!   is the same race as its keep-alive timeout ([`idle_deadline`]).
//!
//! HAProxy's settings change this as in HAProxy 2.6:
//! - `close-spread-time T` spreads the closes over `T` from the start of
//!   the stop: an answer carries `Connection: close` with a probability
//!   that grows from 0 to 1 over the window, and each idle connection
//!   closes at its own point of the window (never before its grace);
//! - `close-spread-time infinite`: the stop closes nothing itself; answers
//!   keep their `Connection` header, idle connections end at their
//!   timeouts (or `hard-stop-after`);
//! - `option idle-close-on-response` (frontend): idle connections are not
//!   closed; each waits for its next request, answered with close.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sched::ticks::{self, Tick, ETERNITY};

use crate::config::CloseSpread;

/// How long an idle connection stays open, after its last answer, once a
/// stop began: enough for a client's next request, sent on receipt of that
/// answer, to arrive (a round trip on any network ebb serves).
pub const IDLE_GRACE_MS: u32 = 1000;

static SPREAD: OnceLock<Option<CloseSpread>> = OnceLock::new();
static STOP_START: OnceLock<Instant> = OnceLock::new();
/// A stop signal came: the process is stopping (`show info`'s
/// `Stopping`, the `stopping` fetch), though under global `grace` it
/// serves as before for now (the flag is kept in [`crate::sys`], which
/// the samples may read).
pub fn announce() {
    crate::sys::set_stopping();
}

/// Whether the process is stopping (HAProxy's `stopping`).
pub fn stopping() -> bool {
    crate::sys::stopping()
}

/// Sets the process's `close-spread-time` (once, at start).
pub fn configure(spread: Option<CloseSpread>) {
    let _ = SPREAD.set(spread);
}

/// The soft stop begins now (the first call wins).
pub fn begin() {
    announce();
    let _ = STOP_START.get_or_init(Instant::now);
}

fn spread() -> Option<CloseSpread> {
    SPREAD.get().copied().flatten()
}

/// Time since the stop began (zero if nobody called [`begin`] yet).
fn since_stop() -> Duration {
    STOP_START.get_or_init(Instant::now).elapsed()
}

/// A pseudo-random number in `0..n` (xorshift, one state per thread).
fn random_below(n: u64) -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            (t ^ (std::process::id() as u64) << 32) | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        if n == 0 {
            0
        } else {
            x % n
        }
    })
}

/// Whether an answer may keep its connection open: `ka` is what the
/// exchange allows; `stopping` whether this connection saw the stop.
pub fn keep_alive(ka: bool, stopping: bool) -> bool {
    if !ka || !stopping {
        return ka;
    }
    match spread() {
        None => false,
        Some(CloseSpread::Infinite) => true,
        Some(CloseSpread::Window(w)) => {
            let w = w.as_millis() as u64;
            let elapsed = since_stop().as_millis() as u64;
            // HAProxy's roll: close when the time left in the window is at
            // most a random share of it, so closes grow denser to the end.
            let left = w.saturating_sub(elapsed);
            left > 0 && left > random_below(w)
        }
    }
}

thread_local! {
    /// When this thread's connections first saw the stop.
    static STOP_TICK: std::cell::Cell<Tick> = const { std::cell::Cell::new(ETERNITY) };
}

/// A connection of this thread saw the stop at `now` (the first call
/// places the `close-spread-time` window of this thread).
pub fn saw_stop(now: Tick) {
    STOP_TICK.with(|t| {
        if t.get() == ETERNITY {
            t.set(now);
        }
    });
}

/// When an idle connection (nothing received, nothing to send) must close
/// during a stop: `idle_since` is its last answer or its accept, `key` a
/// number that differs between connections (its descriptor) to place it
/// in a `close-spread-time` window. [`ETERNITY`] when the stop does not
/// close it (its own timeouts still do).
pub fn idle_deadline(
    stopping: bool,
    idle_since: Tick,
    idle_close_on_response: bool,
    key: u64,
) -> Tick {
    if !stopping || idle_close_on_response {
        return ETERNITY;
    }
    let grace = ticks::add(idle_since, IDLE_GRACE_MS);
    match spread() {
        None => grace,
        Some(CloseSpread::Infinite) => ETERNITY,
        Some(CloseSpread::Window(w)) => {
            // A fixed point of the window per connection (a hash of its
            // key), so the deadline does not move at each wakeup.
            let w = w.as_millis().min(u128::from(u32::MAX / 2)) as u64;
            let at = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) % w.max(1);
            let start = STOP_TICK.with(|t| t.get());
            if start == ETERNITY {
                return grace;
            }
            ticks::last(grace, ticks::add(start, at as u32))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_stopping_keeps_what_the_exchange_allows() {
        assert!(keep_alive(true, false));
        assert!(!keep_alive(false, false));
        assert_eq!(idle_deadline(false, 100, false, 7), ETERNITY);
    }

    #[test]
    fn a_stop_closes_after_the_answer_and_after_the_grace() {
        // No close-spread-time in unit tests: the default policy.
        assert!(!keep_alive(true, true));
        assert_eq!(idle_deadline(true, 100, false, 7), 100 + IDLE_GRACE_MS);
    }

    #[test]
    fn idle_close_on_response_never_closes_an_idle_connection() {
        assert_eq!(idle_deadline(true, 100, true, 7), ETERNITY);
    }
}
