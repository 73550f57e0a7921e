//! Per-server figures kept for `show stat` beside the server's own state:
//! the most slots used at once, failed checks, transitions to DOWN, the
//! date of the last change, time spent DOWN, the last check's duration.
//! The request path and the checks update them; the CLI and the stats
//! page read them.

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

/// A server's figures for `show stat` that the request path and the
/// checks keep: the most slots used at once, failed checks, transitions to
/// DOWN, the date of the last state change, time spent DOWN, and how long
/// the last check took.
pub struct SrvExtra {
    pub smax: std::sync::atomic::AtomicU32,
    pub chkfail: std::sync::atomic::AtomicU64,
    pub chkdown: std::sync::atomic::AtomicU64,
    /// Milliseconds the last check took; `u64::MAX` before the first.
    pub check_ms: std::sync::atomic::AtomicU64,
    /// A health check is under way (`check_status` is then prefixed `* `,
    /// HAProxy's `CHK_ST_INPROGRESS`).
    pub check_busy: std::sync::atomic::AtomicBool,
    times: Mutex<Times>,
}

struct Times {
    changed: Instant,
    down_since: Option<Instant>,
    downtime: std::time::Duration,
}

impl Default for SrvExtra {
    fn default() -> SrvExtra {
        SrvExtra {
            smax: Default::default(),
            chkfail: Default::default(),
            chkdown: Default::default(),
            check_ms: std::sync::atomic::AtomicU64::new(u64::MAX),
            check_busy: Default::default(),
            times: Mutex::new(Times {
                changed: Instant::now(),
                down_since: None,
                downtime: std::time::Duration::ZERO,
            }),
        }
    }
}

impl SrvExtra {
    /// A check ended after `d`.
    pub fn check_took(&self, d: std::time::Duration) {
        self.check_ms.store(
            d.as_millis().min(u128::from(u32::MAX)) as u64,
            Ordering::Relaxed,
        );
    }

    /// A check's result, and the server's health before and after it.
    /// `chkfail` counts the failures while `was_up` (the check task
    /// passes whether any health was left: HAProxy's meaning).
    pub fn on_check(&self, ok: bool, was_up: bool, now_up: bool) {
        if !ok && was_up {
            self.chkfail.fetch_add(1, Ordering::Relaxed);
        }
        if was_up != now_up {
            if !now_up {
                self.chkdown.fetch_add(1, Ordering::Relaxed);
            }
            self.changed(now_up);
        }
    }

    /// The server changed state without going down or up (NOLB and
    /// back: HAProxy's last change, not its downtime).
    pub fn touched(&self) {
        let mut t = self.times.lock().unwrap_or_else(|p| p.into_inner());
        t.changed = Instant::now();
    }

    /// The server changed state (health or admin); `usable` after it.
    pub fn changed(&self, usable: bool) {
        let mut t = self.times.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        t.changed = now;
        match (usable, t.down_since) {
            (false, None) => t.down_since = Some(now),
            (true, Some(d)) => {
                t.downtime += now.duration_since(d);
                t.down_since = None;
            }
            _ => {}
        }
    }

    /// Seconds since the last change, and seconds spent down in all.
    pub fn ages(&self) -> (u64, u64) {
        let t = self.times.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let down = t.downtime
            + t.down_since
                .map_or(std::time::Duration::ZERO, |d| now.duration_since(d));
        (now.duration_since(t.changed).as_secs(), down.as_secs())
    }
}

/// HAProxy's check fields of a server's last report: (`check_status`,
/// `check_code`, `check_desc`, `last_chk`); the code from `L7OK` on.
pub fn check_code(v: &super::check::Verdict) -> (&'static str, Option<u64>, &'static str, String) {
    let code = v.st.has_code().then(|| u64::try_from(v.code).unwrap_or(0));
    (v.st.short(), code, v.st.text(), v.desc.clone())
}
