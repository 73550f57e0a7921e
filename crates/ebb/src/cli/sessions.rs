//! The sessions and the tasks: `show sess`, `show tasks`, `shutdown
//! session(s)`, each walking every thread's table under thread
//! isolation.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use crate::registry::Process;

pub(super) fn parse_id(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

pub(super) fn kill(p: &Process, s: &crate::registry::SessInfo) {
    s.end(crate::registry::KILL_CLI, &p.handle);
}

/// `show tasks`: the tasks and tasklets queued to run right now, by
/// callback, thread by thread (HAProxy's `show tasks`), taken while every
/// other thread is parked so the counts are one consistent picture.
pub(super) fn show_tasks(p: &Process, isolate: &mut dyn FnMut(&mut dyn FnMut())) -> String {
    let mut rows = Vec::new();
    let mut f = || rows = p.handle.queued_tasks();
    isolate(&mut f);
    let total: u32 = rows.iter().map(|(_, v)| v.iter().sum::<u32>()).sum();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Queued tasks and tasklets: {total} ({} threads)",
        p.nbthread
    );
    let _ = write!(s, "  {:<32} {:>8} {:>6}", "function", "places", "%");
    for t in 0..p.nbthread {
        let _ = write!(s, " {:>6}", format!("t{t}"));
    }
    s.push('\n');
    for (name, per) in &rows {
        let n: u32 = per.iter().sum();
        let pct = if total > 0 {
            100.0 * f64::from(n) / f64::from(total)
        } else {
            0.0
        };
        let _ = write!(s, "  {name:<32} {n:>8} {pct:>5.1}%");
        for c in per {
            let _ = write!(s, " {c:>6}");
        }
        s.push('\n');
    }
    s
}

pub(super) fn show_sess(
    p: &Process,
    all: bool,
    isolate: &mut dyn FnMut(&mut dyn FnMut()),
) -> String {
    let mut out = String::new();
    let mut f = || {
        let epoch = p.sessions.epoch();
        let list = p.sessions.snapshot(epoch);
        let now = SystemTime::now();
        for s in list {
            let age = now
                .duration_since(s.accepted())
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let (be, srv) = crate::backend::server_by_uid(s.target.load(Ordering::Relaxed))
                .map(|t| (t.backend.clone(), t.name.clone()))
                .unwrap_or_else(|| ("<NONE>".into(), "<none>".into()));
            let proto = if s.peer.is_ipv4() { "tcpv4" } else { "tcpv6" };
            let _ = write!(
                out,
                "0x{:x}: proto={proto} src={} fe={} be={be} srv={srv} age={age}s thread={} reqs={}",
                s.id,
                s.peer,
                s.frontend(),
                u32::from(s.thread) + 1,
                s.requests.load(Ordering::Relaxed),
            );
            if s.lingering.load(Ordering::Relaxed) {
                // Its answers are out; it drops the client's last bytes
                // until the client closes (crate::mux::Linger).
                out.push_str(" state=linger");
            }
            let [a, b] = s.half_term.load(Ordering::Relaxed).to_be_bytes();
            if a != 0 {
                let _ = write!(out, " term={}{}", char::from(a), char::from(b));
            }
            if all {
                let _ = write!(
                    out,
                    " epoch={} kill={}",
                    s.id,
                    u8::from(s.kill.load(Ordering::Relaxed) != 0)
                );
            }
            out.push('\n');
        }
    };
    isolate(&mut f);
    out
}

/// `shutdown sessions server BACKEND/SERVER`: ends every session on that
/// server.
pub(super) fn shutdown_server(
    p: &Process,
    backend: &str,
    server: &str,
    isolate: &mut dyn FnMut(&mut dyn FnMut()),
) {
    let mut f = || {
        let epoch = p.sessions.epoch();
        for s in p.sessions.snapshot(epoch) {
            let hit = crate::backend::server_by_uid(s.target.load(Ordering::Relaxed))
                .is_some_and(|t| t.backend == backend && t.name == server);
            if hit {
                kill(p, &s);
            }
        }
    };
    isolate(&mut f);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert_eq!(parse_id("0x1f"), Some(31));
        assert_eq!(parse_id("12"), Some(12));
        assert_eq!(parse_id("zz"), None);
    }
}
