//! A server's statistics counters, the backend's too (a [`super::Farm`]
//! has one set): monotonic atomics every thread bumps without a lock,
//! read by `show stat`, the stats page and the Prometheus exporter, and
//! HAProxy's sliding averages of the queue, connect, response and total
//! times.

use std::sync::atomic::{AtomicU64, Ordering};

/// Per-server counters (monotonic; read by the stats).
#[derive(Default)]
pub struct Counters {
    /// Connection attempts (HAProxy's server `stot`, `cum_sess`: one per
    /// `connect_server`, a retry to the same server too).
    pub sessions: AtomicU64,
    /// Streams handed to it (once per stream and server: its backend's
    /// `stot` sums them).
    pub assigned: AtomicU64,
    /// Times the load balancer chose it (HAProxy's `cum_lbconn`, the
    /// `lbtot` column): not for a stream that persistence (`cookie`,
    /// `stick`, `use-server`), `prefer-last-server` or the backend's queue
    /// sent there, nor for a redispatch back to the server it left.
    pub lb_picks: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub conn_errors: AtomicU64,
    pub resp_errors: AtomicU64,
    /// Its responses refused by a rule or `checkcache` (`dresp`).
    pub denied_resp: AtomicU64,
    pub retries: AtomicU64,
    pub redispatches: AtomicU64,
    pub queued_total: AtomicU64,
    pub queue_timeouts: AtomicU64,
    /// HTTP responses by status class (1xx..5xx, other): a server's are
    /// the heads it sent, interim ones too (HAProxy counts each head it
    /// analyses, not its own error answers).
    pub hrsp: [AtomicU64; 6],
    /// A server's: those heads (HAProxy's server `req_tot`).
    pub heads: AtomicU64,
    /// Connections to it attempted, and connections reused for a stream
    /// (HAProxy's `connect` and `reuse`).
    pub connects: AtomicU64,
    pub reuses: AtomicU64,
    /// When the last stream was handed to it: milliseconds since the
    /// process's time origin, plus one; 0 never.
    last_sess: AtomicU64,
    /// Transfers aborted by the client, and by the server (HAProxy's
    /// `cli_abrt`, `srv_abrt`).
    pub cli_aborts: AtomicU64,
    pub srv_aborts: AtomicU64,
    /// The longest its own queue was (HAProxy's `qmax`).
    pub qmax: AtomicU64,
    /// Queue, connect, response and total times of its streams.
    pub times: TimeStats,
    /// Streams handed to it over the last second (`srv_sess_rate`).
    sess_rate: crate::table::SharedFreqCtr,
}

/// HAProxy's window of the time averages (`TIME_STATS_SAMPLES`).
pub(super) const TIME_SAMPLES: u64 = 1024;

/// HAProxy's time statistics (`qtime`, `ctime`, `rtime`, `ttime` and
/// their maxima): per time a sliding sum over the last 1024 streams, read
/// as an average, in milliseconds.
#[derive(Default)]
pub struct TimeStats {
    /// Streams counted (HAProxy's `cum_req`): the window while under 1024.
    n: AtomicU64,
    sums: [AtomicU64; 4],
    max: [AtomicU64; 4],
}

impl TimeStats {
    /// Counts one stream, with its queue, connect, response and total
    /// times when it reached a server (HAProxy's stream_update_time_stats:
    /// a stream that never connected or never had an answer counts in the
    /// window but adds no sample).
    pub fn note(&self, times: Option<[u64; 4]>) {
        let n = self.n.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(t) = times else { return };
        // Until the window is full every sample adds up; then each one
        // takes the place of an average one.
        let w = if n > TIME_SAMPLES { TIME_SAMPLES } else { 0 };
        for (i, v) in t.into_iter().enumerate() {
            if v == 0 && (w == 0 || self.sums[i].load(Ordering::Relaxed) == 0) {
                // Nothing to add and nothing to take off (a zero time, the
                // usual queue and connect times of a kept connection):
                // the update would leave the sum as it is.
                continue;
            }
            let _ = self.sums[i].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                let drop = if w > 0 { old.div_ceil(w) } else { 0 };
                Some(old - drop + v)
            });
            // A maximum only grows: a read spares the locked update
            // when this sample is not above it.
            if v > self.max[i].load(Ordering::Relaxed) {
                self.max[i].fetch_max(v, Ordering::Relaxed);
            }
        }
    }

    /// The averages of the four times, in milliseconds (rounded up as
    /// HAProxy's swrate_avg): over the streams counted while under 1024
    /// (`show stat`), or always over 1024 (`full`: HAProxy 2.6's
    /// Prometheus exporter divides so, even after one stream).
    pub fn averages(&self, full: bool) -> [u64; 4] {
        let n = self.n.load(Ordering::Relaxed);
        let w = if n > 0 && n < TIME_SAMPLES && !full {
            n
        } else {
            TIME_SAMPLES
        };
        std::array::from_fn(|i| self.sums[i].load(Ordering::Relaxed).div_ceil(w))
    }

    /// The longest of each time seen, in milliseconds.
    pub fn maxima(&self) -> [u64; 4] {
        std::array::from_fn(|i| self.max[i].load(Ordering::Relaxed))
    }

    /// Forgets the maxima (`clear counters`).
    pub fn clear_maxima(&self) {
        for m in &self.max {
            m.store(0, Ordering::Relaxed);
        }
    }

    /// Forgets everything (`clear counters all`).
    pub fn clear(&self) {
        self.clear_maxima();
        self.n.store(0, Ordering::Relaxed);
        for s in &self.sums {
            s.store(0, Ordering::Relaxed);
        }
    }
}

impl Counters {
    /// A stream was handed to the server at `now_ns`, the scheduler turn's
    /// date ([`sched::Ctx::now_ns`]: no clock read of its own; HAProxy
    /// dates it with its loop's `now` too).
    pub fn note_session(&self, now_ns: u64) {
        self.assigned.fetch_add(1, Ordering::Relaxed);
        self.note_attempt(now_ns);
    }

    /// Another connection attempt of a stream already handed to it (a
    /// retry): HAProxy counts it as a session of the server.
    pub fn note_attempt(&self, now_ns: u64) {
        self.sessions.fetch_add(1, Ordering::Relaxed);
        let ms = now_ns / 1_000_000;
        self.last_sess.store(ms + 1, Ordering::Relaxed);
        self.sess_rate.add(1000, ms as u32, 1);
    }

    /// Streams handed over during the last second (HAProxy's sliding
    /// `sess_per_sec`).
    pub fn sess_rate(&self) -> u32 {
        let ms = sched::ticks::mono_now_ns() / 1_000_000;
        self.sess_rate.read(1000, ms as u32)
    }

    /// Seconds since the last stream was handed over; `None` never.
    pub fn last_session_age(&self) -> Option<u64> {
        let at = self.last_sess.load(Ordering::Relaxed).checked_sub(1)?;
        let now = sched::ticks::mono_now_ns() / 1_000_000;
        Some(now.saturating_sub(at) / 1000)
    }
}
