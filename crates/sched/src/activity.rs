//! # Activity counters
//!
//! One block of counters per thread, each block on its own cache lines
//! (`CachePadded`), so the owner's increments never bounce a line that
//! another thread's counters share. Only the owner writes (plain load +
//! store); any thread reads, which is how `show activity` is produced from
//! the CLI while the workers run. A read racing with a write sees the old
//! or the new value of each counter, never a torn one.
//!
//! [`format_report`] prints them like HAProxy's `show activity`: one line
//! per counter, the total first, then one column per thread.

use crate::profile::bump;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// One thread's counters (owner writes, anyone reads).
        #[derive(Debug, Default)]
        pub(crate) struct Activity {
            $( $(#[$doc])* pub(crate) $name: AtomicU64, )*
        }

        /// A copy of one thread's counters.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct ActivitySnapshot {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl Activity {
            pub(crate) fn snapshot(&self) -> ActivitySnapshot {
                ActivitySnapshot { $( $name: self.$name.load(Ordering::Relaxed), )* }
            }
        }

        impl ActivitySnapshot {
            /// `(name, value)` of every counter, in report order.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![ $( (stringify!($name), self.$name), )* ]
            }
        }
    };
}

counters! {
    /// Loop turns.
    loops,
    /// Callbacks run (tasks and tasklets): context switches.
    ctxsw,
    /// Tasks run (a subset of `ctxsw`).
    tasksw,
    /// Entries run from the heavy class (e.g. TLS handshake steps).
    heavy,
    /// Turns that found nothing to run.
    empty_rq,
    /// Turns that used their whole budget (work was left).
    long_rq,
    /// Tasks woken by their timer.
    wake_tasks,
    /// Times this thread was woken through its eventfd.
    wake_signal,
    /// Polls that returned fd events.
    poll_io,
    /// Polls that returned nothing (timeout or immediate).
    poll_exp,
    /// fd events dispatched to tasklets.
    poll_events,
    /// Wakeups received from other threads (inbox messages).
    xthr_wake,
    /// Lookups of this thread's next task in the shared run queue.
    sq_lookups,
    /// Tree nodes visited by those lookups after the key descent (with
    /// `scope_lookups` off, one per queued entry examined: a lower bound).
    sq_nodes,
    /// Connections accepted (counted by the server through the context).
    accepts,
    /// Nanoseconds spent sleeping in the poller.
    idle_ns,
    /// Nanoseconds since the thread started its loop.
    total_ns,
    /// Average loop time in µs (sliding average, excluding sleep).
    avg_loop_us,
}

impl Activity {
    #[inline(always)]
    pub(crate) fn add(c: &AtomicU64, v: u64) {
        bump(c, v);
    }
}

impl ActivitySnapshot {
    /// CPU use in percent: time not spent sleeping in the poller.
    pub fn cpu_use_pct(&self) -> u64 {
        if self.total_ns == 0 {
            return 0;
        }
        100 - (self.idle_ns.min(self.total_ns) * 100 / self.total_ns)
    }

    /// Nodes visited per shared-queue lookup, one decimal (`-` when no
    /// lookup was made).
    pub fn sq_avg_nodes(&self) -> String {
        avg_str(self.sq_nodes, self.sq_lookups)
    }
}

/// `num / den` with one decimal, `-` for no denominator.
fn avg_str(num: u64, den: u64) -> String {
    if den == 0 {
        return "-".into();
    }
    let tenths = (u128::from(num) * 10 + u128::from(den) / 2) / u128::from(den);
    format!("{}.{}", tenths / 10, tenths % 10)
}

/// Formats per-thread counters like HAProxy's `show activity`:
/// `name: total [ thread1 thread2 ... ]`. `avg_loop_us` and `cpu_use` show the average over
/// threads in the total column.
pub fn format_report(threads: &[ActivitySnapshot]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "thread_id: {} (1..{})", threads.len(), threads.len());
    let n = threads.len().max(1) as u64;
    let fields: Vec<Vec<(&'static str, u64)>> = threads.iter().map(|t| t.fields()).collect();
    let names: Vec<&'static str> = ActivitySnapshot::default()
        .fields()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    for (i, name) in names.iter().enumerate() {
        let vals: Vec<u64> = fields.iter().map(|f| f[i].1).collect();
        let sum: u64 = vals.iter().sum();
        let tot = if *name == "avg_loop_us" { sum / n } else { sum };
        let _ = write!(s, "{:<12} {} [", format!("{}:", name), tot);
        for v in vals {
            let _ = write!(s, " {}", v);
        }
        s.push_str(" ]\n");
    }
    let nodes: u64 = threads.iter().map(|t| t.sq_nodes).sum();
    let lookups: u64 = threads.iter().map(|t| t.sq_lookups).sum();
    let _ = write!(s, "{:<12} {} [", "sq_avg_nodes:", avg_str(nodes, lookups));
    for t in threads {
        let _ = write!(s, " {}", t.sq_avg_nodes());
    }
    s.push_str(" ]\n");
    let cpu: Vec<u64> = threads.iter().map(|t| t.cpu_use_pct()).collect();
    let _ = write!(s, "{:<12} {} [", "cpu_use:", cpu.iter().sum::<u64>() / n);
    for v in cpu {
        let _ = write!(s, " {}", v);
    }
    s.push_str(" ]\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_has_total_then_threads() {
        let a = ActivitySnapshot {
            loops: 3,
            ctxsw: 10,
            ..Default::default()
        };
        let b = ActivitySnapshot {
            loops: 4,
            ctxsw: 1,
            ..Default::default()
        };
        let r = format_report(&[a, b]);
        assert!(
            r.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>()
                    == ["loops:", "7", "[", "3", "4", "]"]),
            "{r}"
        );
        assert!(
            r.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["ctxsw:", "11", "[", "10", "1", "]"]),
            "{r}"
        );
    }
}
