//! # Watchdog
//!
//! A thread stuck in one callback stalls every connection it owns. The
//! watchdog is one extra thread per runtime that samples, every quarter of
//! the limit, each worker's *progress* word (bumped when a callback starts
//! and when it returns) and the running callback's name. When a worker is
//! in a callback and its progress has not moved, the watchdog reads that
//! worker's CPU clock (`pthread_getcpuclockid`, so a thread blocked in a
//! syscall or descheduled is not blamed for others' load):
//!
//! * CPU spent since the stall was first seen above the limit: the first
//!   expiry, reported (callback name, thread, CPU time);
//! * above twice the limit, still without progress: the second expiry,
//!   reported as fatal; the default handler then aborts the process, so a stuck thread
//!   never hangs silently.
//!
//! Workers pay two relaxed stores per callback for this; no timer signal
//! and no per-callback clock read.

use crate::shared::Shared;
use crate::sys;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the watchdog saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchdogReport {
    /// The stuck thread.
    pub thread: usize,
    /// The running callback's name.
    pub callback: &'static str,
    /// CPU time spent without progress.
    pub cpu: Duration,
    /// Second expiry: the default handler aborts.
    pub fatal: bool,
}

/// Called with each report.
pub type WatchdogHook = Arc<dyn Fn(&WatchdogReport) + Send + Sync>;

/// The default handler: print, and abort on the second expiry.
pub fn default_hook(r: &WatchdogReport) {
    eprintln!(
        "watchdog: thread {} stuck in callback '{}' for {:?} of CPU{}",
        r.thread,
        r.callback,
        r.cpu,
        if r.fatal { ", aborting" } else { "" }
    );
    if r.fatal {
        std::process::abort();
    }
}

#[derive(Clone, Copy, Default)]
struct Seen {
    progress: u64,
    cpu_at: u64,
    warned: bool,
}

/// The watchdog thread's body: runs until `done` is set.
pub(crate) fn run(sh: Arc<Shared>, limit: Duration, hook: WatchdogHook, done: Arc<AtomicBool>) {
    let n = sh.nbthread();
    let mut seen = vec![Seen::default(); n];
    // A quarter of the limit: a stall is seen within 1.25 x limit.
    let period = (limit / 4).max(Duration::from_millis(1));
    let limit_ns = limit.as_nanos() as u64;
    while !done.load(Ordering::Acquire) {
        // Woken early (unparked) when the runtime ends.
        std::thread::park_timeout(period);
        if done.load(Ordering::Acquire) {
            break;
        }
        for (t, r) in sh.threads.iter().enumerate() {
            let cur = r.cur_cb.load(Ordering::Relaxed);
            let p = r.progress.load(Ordering::Relaxed);
            let clock = r.cpu_clock.load(Ordering::Relaxed);
            if cur == u32::MAX || clock == i64::MIN || r.exited.load(Ordering::Relaxed) {
                seen[t] = Seen {
                    progress: p,
                    cpu_at: 0,
                    warned: false,
                };
                continue;
            }
            let Ok(cpu) = sys::cpu_clock_ns(clock as libc::clockid_t) else {
                continue;
            };
            let s = &mut seen[t];
            if s.progress != p || s.cpu_at == 0 {
                *s = Seen {
                    progress: p,
                    cpu_at: cpu,
                    warned: false,
                };
                continue;
            }
            let spent = cpu.saturating_sub(s.cpu_at);
            let report = |fatal| WatchdogReport {
                thread: t,
                callback: sh.registry.name(cur as u16),
                cpu: Duration::from_nanos(spent),
                fatal,
            };
            if !s.warned && spent > limit_ns {
                s.warned = true;
                hook(&report(false));
            } else if s.warned && spent > 2 * limit_ns {
                hook(&report(true));
                // Report a fatal stall once; a hook that does not abort
                // gets a new first expiry later.
                *s = Seen {
                    progress: p,
                    cpu_at: cpu,
                    warned: false,
                };
            }
        }
    }
}
