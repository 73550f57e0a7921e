//! Health analysis of live traffic (`observe`, `error-limit`,
//! `on-error`): what streams report of a server, counted until its check
//! task is handed `on-error`'s action.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use sched::{Reasons, RuntimeHandle, TaskId};

use crate::backend::ServerRt;

/// What live traffic showed of a server, for `observe` (HAProxy's
/// `HANA_STATUS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A connection to it was established (or one kept was used).
    L4Ok,
    /// A connect failed or timed out.
    L4Err,
    /// A response status from 100 to 499, or 501 or 505.
    HttpOk,
    /// Another status (5xx but 501 and 505).
    HttpSts,
    /// A response head that is not valid HTTP.
    HttpHdrRsp,
    /// A response body that is not valid HTTP.
    HttpRsp,
    /// `timeout server` before the response head.
    ReadTimeout,
    /// The server closed (or reset) before the response head.
    BrokenPipe,
}

impl Seen {
    /// HAProxy's description, in the `on-error` report.
    fn text(self) -> &'static str {
        match self {
            Seen::L4Ok => "L4 successful connection",
            Seen::L4Err => "L4 unsuccessful connection",
            Seen::HttpOk => "Correct http response",
            Seen::HttpSts => "Wrong http response",
            Seen::HttpHdrRsp => "Invalid http response (headers)",
            Seen::HttpRsp => "Invalid http response",
            Seen::ReadTimeout => "Read timeout (http)",
            Seen::BrokenPipe => "Close from server (http)",
        }
    }

    /// Under `observe o`: an error (true), a success (false, which clears
    /// the count) or nothing (None), as HAProxy's table: a connect error
    /// counts in both modes, an established connection clears only in
    /// `layer4`, the HTTP events count only in `layer7`.
    pub(super) fn judge(self, o: crate::config::Observe) -> Option<bool> {
        use crate::config::Observe;
        match (o, self) {
            (Observe::None, _) => None,
            (_, Seen::L4Err) => Some(true),
            (Observe::Layer4, Seen::L4Ok) => Some(false),
            (Observe::Layer4, _) | (Observe::Layer7, Seen::L4Ok) => None,
            (Observe::Layer7, Seen::HttpOk) => Some(false),
            (Observe::Layer7, _) => Some(true),
        }
    }

    /// A response status, judged as HAProxy's: 501 and 505 answer the
    /// client's request, not a failing server.
    pub fn status(code: u16) -> Seen {
        if code >= 100 && (code < 500 || code == 501 || code == 505) {
            Seen::HttpOk
        } else {
            Seen::HttpSts
        }
    }
}

/// A server's health analysis (`observe`, `error-limit`, `on-error`): the
/// consecutive errors of its traffic, and the `on-error` report waiting
/// for its check task.
#[derive(Default)]
pub struct Hana {
    errors: std::sync::atomic::AtomicU32,
    /// `on-error` actions taken (the stats' `hanafail`).
    pub failed: std::sync::atomic::AtomicU64,
    /// The report for the check task to act on ("Detected N consecutive
    /// errors, last one was: ...").
    pub(super) pending: Mutex<Option<String>>,
    /// The check task, once started, and how to wake it.
    pub(super) task: std::sync::OnceLock<(RuntimeHandle, TaskId)>,
}

/// Counts what live traffic showed of `s` under its `observe` mode
/// (HAProxy's health_adjust): `error-limit` consecutive errors hand
/// `on-error`'s action to its check task. Nothing without `observe` or
/// without a running health check (a test of one byte on the request
/// path then).
#[inline]
pub fn observe(s: &ServerRt, seen: Seen) {
    if s.opts.observe != crate::config::Observe::None {
        adjust(s, seen);
    }
}

fn adjust(s: &ServerRt, seen: Seen) {
    let Some(bad) = seen.judge(s.opts.observe) else {
        return;
    };
    let h = &s.hana;
    let Some((handle, task)) = h.task.get() else {
        return;
    };
    if !bad {
        if h.errors.load(Ordering::Relaxed) != 0 {
            h.errors.store(0, Ordering::Relaxed);
        }
        return;
    }
    let n = h.errors.fetch_add(1, Ordering::AcqRel) + 1;
    if n < s.opts.error_limit.max(1) {
        return;
    }
    h.errors.store(0, Ordering::Release);
    h.failed.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut p) = h.pending.lock() {
        *p = Some(format!(
            "Detected {n} consecutive errors, last one was: {}",
            seen.text()
        ));
    }
    handle.wake_task(*task, Reasons::MSG);
}
