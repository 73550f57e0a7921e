//! # Profiling: per-callback calls, time and wakeup latency
//!
//! Every task and tasklet carries the name of its callback (a
//! `&'static str`). Names are interned once per runtime into a small index
//! (`Registry`) when a task is created, never when it runs; each thread
//! owns a fixed table of counters indexed by it (`ThreadProfile`), written
//! only by that thread (plain load + store, no read-modify-write) and read
//! by anyone, so a report can be produced from any thread (the CLI's) while
//! the workers run.
//!
//! Per call the scheduler records: one call, the time spent in the callback
//! and the wakeup latency (from the wakeup to the start of the run). Time
//! is wall-clock monotonic time around the call, as HAProxy's `cpu_time`
//! is: reading the real per-thread CPU clock is a system call (not in the
//! vDSO) and would cost more than most callbacks.
//!
//! ## Modes
//!
//! `off` records nothing (one predictable branch per call), `on` records
//! always, `auto` lets each thread switch itself on when its average loop
//! time reaches [`AUTO_ON_US`] and off again below [`AUTO_OFF_US`]. The gap
//! between the two thresholds is hysteresis, so a thread hovering at 1 ms
//! does not flap. Unlike HAProxy (whose auto mode in practice never turns
//! off again), both transitions are taken: see [`auto_decide`].
//!
//! ## Report
//!
//! [`format_report`] prints HAProxy's `show profiling` task section:
//! function, calls, cpu_tot, cpu_avg, lat_tot, lat_avg, times in short
//! units, sorted by calls or by time, with an optional row limit.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

/// Names a runtime can profile separately. HAProxy has a few dozen task
/// callbacks; 256 leaves room while keeping a thread's table at 6 KiB.
/// Names past the limit share the last row, shown as `other`.
pub const MAX_NAMES: usize = 256;

/// Average loop time (µs) at which `auto` turns profiling on (HAProxy's 1 ms).
pub const AUTO_ON_US: u64 = 1000;
/// Average loop time (µs) below which `auto` turns it off (HAProxy's 0.99 ms).
pub const AUTO_OFF_US: u64 = 990;

/// Profiling mode (`profiling.tasks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfilingMode {
    /// Never record.
    Off,
    /// Always record.
    On,
    /// Record while the thread's average loop time is high.
    Auto,
}

impl ProfilingMode {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            ProfilingMode::Off => 0,
            ProfilingMode::On => 1,
            ProfilingMode::Auto => 2,
        }
    }
    pub(crate) fn from_u8(v: u8) -> ProfilingMode {
        match v {
            1 => ProfilingMode::On,
            2 => ProfilingMode::Auto,
            _ => ProfilingMode::Off,
        }
    }
}

/// The `auto` decision: whether profiling is active after a loop whose
/// running average is `avg_loop_us`, given whether it was active before.
#[inline]
pub fn auto_decide(active: bool, avg_loop_us: u64) -> bool {
    if active {
        avg_loop_us >= AUTO_OFF_US
    } else {
        avg_loop_us >= AUTO_ON_US
    }
}

/// Interned callback names of one runtime.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    inner: Mutex<(Vec<&'static str>, HashMap<&'static str, u16>)>,
}

impl Registry {
    /// The index of `name`, interning it on first sight.
    pub(crate) fn intern(&self, name: &'static str) -> u16 {
        let mut g = match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(&i) = g.1.get(name) {
            return i;
        }
        let i = g.0.len().min(MAX_NAMES - 1) as u16;
        if g.0.len() < MAX_NAMES - 1 {
            g.0.push(name);
            g.1.insert(name, i);
        }
        i
    }

    /// The name of index `i`.
    pub(crate) fn name(&self, i: u16) -> &'static str {
        let g = match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.0.get(i as usize).copied().unwrap_or("other")
    }

    pub(crate) fn names(&self) -> Vec<&'static str> {
        let g = match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.0.clone()
    }
}

/// Counters of one callback name on one thread.
#[derive(Debug, Default)]
pub(crate) struct Cell {
    calls: AtomicU64,
    cpu_ns: AtomicU64,
    lat_ns: AtomicU64,
}

/// One thread's counters; written by the owner only.
#[derive(Debug)]
pub(crate) struct ThreadProfile {
    cells: Box<[Cell]>,
    /// Entries queued to run now (class lists and the local run queue),
    /// by callback name: what `show tasks` prints. Owner writes only.
    queued: Box<[AtomicU32]>,
    /// Whether this thread currently records (mode on, or auto and busy).
    pub(crate) active: AtomicU8,
}

/// Owner-only increment: a load and a store, no locked instruction.
#[inline(always)]
pub(crate) fn bump(a: &AtomicU64, v: u64) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
}

impl ThreadProfile {
    pub(crate) fn new() -> Self {
        ThreadProfile {
            cells: (0..MAX_NAMES).map(|_| Cell::default()).collect(),
            queued: (0..MAX_NAMES).map(|_| AtomicU32::new(0)).collect(),
            active: AtomicU8::new(0),
        }
    }

    /// One more (`up`) or one fewer entry of `idx` queued; owner only.
    #[inline]
    pub(crate) fn queued(&self, idx: u16, up: bool) {
        let q = &self.queued[idx as usize % MAX_NAMES];
        let v = q.load(Ordering::Relaxed);
        q.store(
            if up {
                v.wrapping_add(1)
            } else {
                v.saturating_sub(1)
            },
            Ordering::Relaxed,
        );
    }

    /// (name index, entries queued) for every name with some queued.
    pub(crate) fn queued_counts(&self) -> Vec<(usize, u32)> {
        self.queued
            .iter()
            .enumerate()
            .map(|(i, q)| (i, q.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Records one call; owner thread only.
    #[inline]
    pub(crate) fn record(&self, idx: u16, cpu_ns: u64, lat_ns: u64) {
        let c = &self.cells[idx as usize % MAX_NAMES];
        bump(&c.calls, 1);
        bump(&c.cpu_ns, cpu_ns);
        bump(&c.lat_ns, lat_ns);
    }

    /// Zeroes the counters. Called from any thread: a concurrent record
    /// may survive the reset, which a statistics reset tolerates.
    pub(crate) fn reset(&self) {
        for c in self.cells.iter() {
            c.calls.store(0, Ordering::Relaxed);
            c.cpu_ns.store(0, Ordering::Relaxed);
            c.lat_ns.store(0, Ordering::Relaxed);
        }
    }

    pub(crate) fn read(&self, idx: usize) -> (u64, u64, u64) {
        let c = &self.cells[idx];
        (
            c.calls.load(Ordering::Relaxed),
            c.cpu_ns.load(Ordering::Relaxed),
            c.lat_ns.load(Ordering::Relaxed),
        )
    }
}

/// One row of the profiling report: totals over every thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileRow {
    /// Callback name.
    pub name: &'static str,
    /// Number of calls.
    pub calls: u64,
    /// Total time spent in the callback, ns.
    pub cpu_ns: u64,
    /// Total wakeup latency, ns.
    pub lat_ns: u64,
}

impl ProfileRow {
    /// Average time per call, ns.
    pub fn cpu_avg(&self) -> u64 {
        self.cpu_ns / self.calls.max(1)
    }
    /// Average latency per call, ns.
    pub fn lat_avg(&self) -> u64 {
        self.lat_ns / self.calls.max(1)
    }
}

/// How to sort the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Most calls first (HAProxy's default).
    #[default]
    Calls,
    /// Most total time first (`bytime`).
    Time,
}

/// Options of the profiling report.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReportOpts {
    /// Sort order.
    pub sort: SortBy,
    /// At most this many rows (`None`: all).
    pub limit: Option<usize>,
}

/// Formats a duration in HAProxy's short units: `ns`, `us`, `ms`, `s`, `m`,
/// `h`, three significant digits.
pub fn short_time(ns: u64) -> String {
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    const M: u64 = 60 * S;
    const H: u64 = 60 * M;
    let f = ns as f64;
    if ns < US {
        format!("{}ns", ns)
    } else if ns < MS {
        format!("{:.3}us", f / US as f64)
    } else if ns < S {
        format!("{:.3}ms", f / MS as f64)
    } else if ns < M {
        format!("{:.3}s", f / S as f64)
    } else if ns < H {
        format!("{:.3}m", f / M as f64)
    } else {
        format!("{:.3}h", f / H as f64)
    }
}

/// Sorts rows and formats them like `show profiling` (tasks section).
pub fn format_report(mode: ProfilingMode, mut rows: Vec<ProfileRow>, opts: ReportOpts) -> String {
    match opts.sort {
        SortBy::Calls => rows.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.name.cmp(b.name))),
        SortBy::Time => rows.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then(a.name.cmp(b.name))),
    }
    if let Some(l) = opts.limit {
        rows.truncate(l);
    }
    let mode = match mode {
        ProfilingMode::Off => "off",
        ProfilingMode::On => "on",
        ProfilingMode::Auto => "auto",
    };
    let mut s = String::new();
    let _ = writeln!(s, "Per-task CPU profiling              : {}", mode);
    let _ = writeln!(s, "Tasks activity:");
    let _ = writeln!(
        s,
        "  {:<32} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "function", "calls", "cpu_tot", "cpu_avg", "lat_tot", "lat_avg"
    );
    for r in &rows {
        let _ = writeln!(
            s,
            "  {:<32} {:>10} {:>10} {:>10} {:>10} {:>10}",
            r.name,
            r.calls,
            short_time(r.cpu_ns),
            short_time(r.cpu_avg()),
            short_time(r.lat_ns),
            short_time(r.lat_avg()),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_units() {
        assert_eq!(short_time(999), "999ns");
        assert_eq!(short_time(1_500), "1.500us");
        assert_eq!(short_time(2_000_000), "2.000ms");
        assert_eq!(short_time(3_000_000_000), "3.000s");
        assert_eq!(short_time(90_000_000_000), "1.500m");
        assert_eq!(short_time(7_200_000_000_000), "2.000h");
    }

    #[test]
    fn auto_hysteresis() {
        assert!(!auto_decide(false, 999));
        assert!(auto_decide(false, 1000));
        assert!(auto_decide(true, 995), "stays on between the thresholds");
        assert!(!auto_decide(true, 989));
        assert!(!auto_decide(false, 995), "stays off between the thresholds");
    }

    #[test]
    fn report_sorts_and_limits() {
        let rows = vec![
            ProfileRow {
                name: "a",
                calls: 1,
                cpu_ns: 900,
                lat_ns: 0,
            },
            ProfileRow {
                name: "b",
                calls: 5,
                cpu_ns: 10,
                lat_ns: 5_000,
            },
            ProfileRow {
                name: "c",
                calls: 3,
                cpu_ns: 50,
                lat_ns: 0,
            },
        ];
        let r = format_report(ProfilingMode::On, rows.clone(), ReportOpts::default());
        let order: Vec<_> = r
            .lines()
            .skip(3)
            .map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(order, vec![Some("b"), Some("c"), Some("a")]);
        assert!(r.contains("1.000us"), "{r}");
        let r = format_report(
            ProfilingMode::On,
            rows,
            ReportOpts {
                sort: SortBy::Time,
                limit: Some(1),
            },
        );
        let order: Vec<_> = r
            .lines()
            .skip(3)
            .map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(order, vec![Some("a")]);
    }
}
