//! The scheduler's figures: `show activity`, `show profiling`, `set
//! profiling tasks`.

use std::fmt::Write as _;

use sched::{ProfilingMode, ReportOpts, SortBy};

use crate::registry::Process;

/// `show activity [THREAD]`: every thread's counters, or one thread's.
pub(super) fn show_activity(p: &Process, rest: &[&str]) -> Result<String, String> {
    let all = p.handle.activity();
    let Some(t) = rest.first() else {
        return Ok(p.handle.activity_report());
    };
    let n: usize = t
        .parse()
        .map_err(|_| format!("'{t}': expected a thread number (1..{})", all.len()))?;
    let snap = n
        .checked_sub(1)
        .and_then(|i| all.get(i))
        .ok_or_else(|| format!("No thread {n} (threads are 1..{}).", all.len()))?;
    let mut s = format!("thread_id: {n}\n");
    for (k, v) in snap.fields() {
        let _ = writeln!(s, "{k:<12} {v:>12}");
    }
    let _ = writeln!(s, "{:<12} {:>12}", "sq_avg_nodes", snap.sq_avg_nodes());
    let _ = writeln!(s, "{:<12} {:>12}", "cpu_use", snap.cpu_use_pct());
    Ok(s)
}

/// `show profiling [tasks|all|bytime|byaddr|bycalls|ROWS]...`.
pub(super) fn show_profiling(p: &Process, rest: &[&str]) -> Result<String, String> {
    let mut o = ReportOpts::default();
    for a in rest {
        match *a {
            "tasks" | "all" => {}
            "bytime" => o.sort = SortBy::Time,
            "byaddr" | "bycalls" => o.sort = SortBy::Calls,
            n => {
                o.limit = Some(
                    n.parse()
                        .map_err(|_| format!("'{n}': expected tasks, bytime or a row count"))?,
                )
            }
        }
    }
    Ok(p.handle.profiling_report(o))
}

/// `set profiling tasks on|auto|off`.
pub(super) fn set_profiling(p: &Process, m: &str) -> Result<String, String> {
    let mode = match m {
        "on" => ProfilingMode::On,
        "auto" => ProfilingMode::Auto,
        "off" => ProfilingMode::Off,
        o => return Err(format!("'{o}': expected on, auto or off.")),
    };
    if mode != ProfilingMode::Off && p.handle.profiling_mode() == ProfilingMode::Off {
        // Like HAProxy: turning profiling on starts from zero.
        p.handle.reset_profiling();
    }
    p.handle.set_profiling(mode);
    Ok(String::new())
}
