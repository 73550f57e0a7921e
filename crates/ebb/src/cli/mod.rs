//! The runtime CLI: commands on the `stats socket`, HAProxy's line
//! protocol.
//!
//! **Protocol.** A client sends a line; the line may hold several commands
//! separated by `;` (`\;` is a literal semicolon). Each command's answer
//! ends with an empty line. Without `prompt`, the connection closes after
//! the first line's answers (so `echo "show info" | socat - UNIX:sock`
//! works); `prompt` switches to interactive mode, where a `> ` prompt
//! follows each answer and the connection stays open until `quit` or the
//! `stats timeout`.
//!
//! **Levels.** A socket has a level (`user` < `operator` < `admin`); each
//! command needs one, and a command above the socket's level is refused
//! with a message naming both. `help` lists only what the level allows.
//!
//! **Sessions.** `show sess` and `shutdown sessions` walk every thread's
//! session table under thread isolation (the caller passes the means to
//! isolate), listing only sessions older than the command's epoch.
//!
//! This module only parses and executes; [`socket`] carries the bytes.

pub mod socket;

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use sched::{ProfilingMode, ReportOpts, SortBy};

use crate::backend::{ADMIN_DRAIN, ADMIN_MAINT, ADMIN_READY};
use crate::config::CliLevel;
use crate::proxy::BackendKind;
use crate::registry::Process;
use crate::stats;

/// What one line produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// Every command's answer, each ending with an empty line.
    pub text: String,
    /// `quit` was among the commands.
    pub quit: bool,
    /// `prompt` toggled interactive mode this many times.
    pub prompt_toggles: u32,
}

fn rank(l: CliLevel) -> u8 {
    match l {
        CliLevel::User => 0,
        CliLevel::Operator => 1,
        CliLevel::Admin => 2,
    }
}

fn level_name(l: CliLevel) -> &'static str {
    match l {
        CliLevel::User => "user",
        CliLevel::Operator => "operator",
        CliLevel::Admin => "admin",
    }
}

/// The commands: (words, arguments, level needed, help).
const COMMANDS: &[(&str, &str, CliLevel, &str)] = &[
    (
        "help",
        "",
        CliLevel::User,
        "list the commands this socket allows",
    ),
    (
        "prompt",
        "",
        CliLevel::User,
        "toggle interactive mode with a prompt",
    ),
    ("quit", "", CliLevel::User, "close the connection"),
    ("show info", "", CliLevel::User, "process information"),
    (
        "show stat",
        "",
        CliLevel::User,
        "statistics of frontends, backends and servers (CSV)",
    ),
    ("show backend", "", CliLevel::User, "list the backends"),
    (
        "show servers state",
        "[BACKEND]",
        CliLevel::User,
        "servers' state in the server-state file format",
    ),
    (
        "show activity",
        "[THREAD]",
        CliLevel::User,
        "scheduler activity counters per thread",
    ),
    (
        "show profiling",
        "[tasks] [bytime] [N]",
        CliLevel::User,
        "per-callback calls, CPU time and latency",
    ),
    (
        "show tasks",
        "",
        CliLevel::Operator,
        "tasks and tasklets queued to run now, by callback and thread",
    ),
    (
        "show sess",
        "[all]",
        CliLevel::Operator,
        "client sessions that exist now",
    ),
    (
        "clear counters",
        "[all]",
        CliLevel::Operator,
        "reset maxima; 'all' (admin) zeroes every counter",
    ),
    (
        "set profiling tasks",
        "on|auto|off",
        CliLevel::Admin,
        "turn per-callback profiling on, off or automatic",
    ),
    (
        "shutdown session",
        "ID",
        CliLevel::Admin,
        "close one client session",
    ),
    (
        "shutdown sessions server",
        "BACKEND/SERVER",
        CliLevel::Admin,
        "close the sessions using a server",
    ),
    (
        "set server",
        "BACKEND/SERVER state ready|drain|maint",
        CliLevel::Admin,
        "change a server's admin state",
    ),
    (
        "set server",
        "BACKEND/SERVER weight N[%]",
        CliLevel::Admin,
        "change a server's weight",
    ),
    (
        "enable server",
        "BACKEND/SERVER",
        CliLevel::Admin,
        "put a server back in service (state ready)",
    ),
    (
        "disable server",
        "BACKEND/SERVER",
        CliLevel::Admin,
        "put a server in maintenance",
    ),
    (
        "set maxconn server",
        "BACKEND/SERVER N",
        CliLevel::Admin,
        "change a server's maxconn (0: unlimited)",
    ),
];

/// Splits a line into commands on unescaped `;`.
pub fn split_commands(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&';') => {
                cur.push(';');
                chars.next();
            }
            ';' => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// Runs one line of commands. `isolate` runs a closure with every other
/// scheduler thread parked.
pub fn execute_line(
    p: &Process,
    level: CliLevel,
    line: &str,
    isolate: &mut dyn FnMut(&mut dyn FnMut()),
) -> Reply {
    let mut r = Reply::default();
    for cmd in split_commands(line) {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        match words.as_slice() {
            ["quit"] => {
                r.quit = true;
                break;
            }
            ["prompt"] => {
                r.prompt_toggles += 1;
                continue;
            }
            _ => {}
        }
        let mut out = match execute(p, level, &words, isolate) {
            Ok(s) => s,
            Err(e) => e,
        };
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push('\n');
        r.text.push_str(&out);
    }
    r
}

fn need(level: CliLevel, want: CliLevel, what: &str) -> Result<(), String> {
    if rank(level) >= rank(want) {
        Ok(())
    } else {
        Err(format!(
            "Permission denied: '{what}' needs level {} (this socket is level {}).",
            level_name(want),
            level_name(level)
        ))
    }
}

fn help(level: CliLevel) -> String {
    let mut s = String::from("The following commands are valid at this level:\n");
    for (w, a, l, h) in COMMANDS {
        if rank(level) >= rank(*l) {
            let full = if a.is_empty() {
                w.to_string()
            } else {
                format!("{w} {a}")
            };
            let _ = writeln!(s, "  {full:<50} : {h}");
        }
    }
    s
}

/// Runs one command; `Err` carries the error text (still an answer).
pub fn execute(
    p: &Process,
    level: CliLevel,
    w: &[&str],
    isolate: &mut dyn FnMut(&mut dyn FnMut()),
) -> Result<String, String> {
    use CliLevel::*;
    match w {
        [] => Ok(String::new()),
        ["help"] => Ok(help(level)),
        ["show", "info"] => Ok(show_info(p)),
        ["show", "stat", rest @ ..] => {
            let c = p.live.compiled();
            let only = rest.first().copied().filter(|x| *x != "-1");
            Ok(stats::csv(&stats::rows(&c, only), p.pid))
        }
        ["show", "backend"] => {
            let c = p.live.compiled();
            let mut s = String::from("# name\n");
            for b in &c.backends {
                let _ = writeln!(s, "{}", b.name);
            }
            Ok(s)
        }
        ["show", "servers", "state", rest @ ..] => {
            let c = p.live.compiled();
            if let Some(b) = rest.first() {
                if !c.backends.iter().any(|x| x.name == *b) {
                    return Err(format!("Can't find backend '{b}'."));
                }
            }
            let nfe = c.frontends.len();
            let farms = c.backends.iter().enumerate().filter_map(|(i, b)| {
                if rest.first().is_some_and(|x| *x != b.name) {
                    return None;
                }
                match &b.kind {
                    BackendKind::Servers(s) => Some((nfe + i + 1, &*s.farm)),
                    BackendKind::Files(_) => None,
                }
            });
            Ok(crate::statefile::dump(farms))
        }
        ["show", "activity", rest @ ..] => {
            let all = p.handle.activity();
            match rest.first() {
                None => Ok(p.handle.activity_report()),
                Some(t) => {
                    let n: usize = t.parse().map_err(|_| {
                        format!("'{t}': expected a thread number (1..{})", all.len())
                    })?;
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
            }
        }
        ["show", "profiling", rest @ ..] => {
            let mut o = ReportOpts::default();
            for a in rest {
                match *a {
                    "tasks" | "all" => {}
                    "bytime" => o.sort = SortBy::Time,
                    "byaddr" | "bycalls" => o.sort = SortBy::Calls,
                    n => {
                        o.limit =
                            Some(n.parse().map_err(|_| {
                                format!("'{n}': expected tasks, bytime or a row count")
                            })?)
                    }
                }
            }
            Ok(p.handle.profiling_report(o))
        }
        ["show", "tasks"] => {
            need(level, Operator, "show tasks")?;
            Ok(show_tasks(p, isolate))
        }
        ["show", "sess", rest @ ..] => {
            need(level, Operator, "show sess")?;
            let all = match rest {
                [] => false,
                ["all"] => true,
                _ => return Err("'show sess' takes nothing or 'all'.".into()),
            };
            Ok(show_sess(p, all, isolate))
        }
        ["clear", "counters"] => {
            need(level, Operator, "clear counters")?;
            stats::clear_maxima();
            Ok(String::new())
        }
        ["clear", "counters", "all"] => {
            need(level, Admin, "clear counters all")?;
            stats::clear_all(&p.live.compiled());
            p.handle.reset_profiling();
            Ok(String::new())
        }
        ["set", "profiling", "tasks", m] => {
            need(level, Admin, "set profiling")?;
            let mode = match *m {
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
        ["set", "profiling", ..] => Err("Usage: set profiling tasks on|auto|off".into()),
        ["shutdown", "session", id] => {
            need(level, Admin, "shutdown session")?;
            let n = parse_id(id).ok_or_else(|| format!("'{id}': not a session id."))?;
            let s = p
                .sessions
                .get(n)
                .ok_or_else(|| format!("No such session (0x{n:x})."))?;
            kill(p, &s);
            Ok(String::new())
        }
        ["shutdown", "sessions", "server", spec] => {
            need(level, Admin, "shutdown sessions server")?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            let mut n = 0;
            let mut f = || {
                let epoch = p.sessions.epoch();
                for s in p.sessions.snapshot(epoch) {
                    let hit = s
                        .target
                        .lock()
                        .map(|t| {
                            t.as_ref()
                                .is_some_and(|(b, sv)| **b == *farm.name && **sv == *srv.name)
                        })
                        .unwrap_or(false);
                    if hit {
                        kill(p, &s);
                        n += 1;
                    }
                }
            };
            isolate(&mut f);
            let _ = n;
            Ok(String::new())
        }
        ["set", "server", spec, "state", st] => {
            need(level, Admin, "set server")?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            let st = match *st {
                "ready" => ADMIN_READY,
                "drain" => ADMIN_DRAIN,
                "maint" => ADMIN_MAINT,
                o => return Err(format!("'{o}': expected ready, drain or maint.")),
            };
            stats::set_admin(&farm, &srv, st)?;
            Ok(String::new())
        }
        ["set", "server", spec, "weight", wt] => {
            need(level, Admin, "set server")?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            stats::set_weight(&farm, &srv, wt)?;
            Ok(String::new())
        }
        ["set", "server", ..] => {
            need(level, Admin, "set server")?;
            Err("Usage: set server BACKEND/SERVER state ready|drain|maint, or weight N[%]".into())
        }
        [verb @ ("enable" | "disable"), "server", spec] => {
            need(level, Admin, &format!("{verb} server"))?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            let st = if *verb == "enable" {
                ADMIN_READY
            } else {
                ADMIN_MAINT
            };
            stats::set_admin(&farm, &srv, st)?;
            Ok(String::new())
        }
        ["set", "maxconn", "server", spec, n] => {
            need(level, Admin, "set maxconn server")?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            stats::set_maxconn(&farm, &srv, n)?;
            Ok(String::new())
        }
        _ => Err(format!(
            "Unknown command: '{}'.\n{}",
            w.join(" "),
            help(level)
        )),
    }
}

fn parse_id(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn kill(p: &Process, s: &crate::registry::SessInfo) {
    s.kill.store(true, Ordering::Relaxed);
    let t = *s.tasklet.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = t {
        p.handle.wake_tasklet(t);
    }
}

fn uptime(start: SystemTime) -> (u64, String) {
    let s = start.elapsed().map(|d| d.as_secs()).unwrap_or(0);
    (
        s,
        format!(
            "{}d {}h{:02}m{:02}s",
            s / 86400,
            (s / 3600) % 24,
            (s / 60) % 60,
            s % 60
        ),
    )
}

fn show_info(p: &Process) -> String {
    let c = p.live.compiled();
    let (up_s, up) = uptime(p.start);
    let req: u64 = c
        .frontends
        .iter()
        .map(|f| f.http.requests.load(Ordering::Relaxed))
        .sum();
    let act = p.handle.activity();
    let n = act.len().max(1) as u64;
    let idle = 100 - act.iter().map(|a| a.cpu_use_pct()).sum::<u64>() / n;
    let maxconn = if p.shared.maxconn == u32::MAX {
        0
    } else {
        p.shared.maxconn
    };
    let mut s = String::new();
    let kv: Vec<(&str, String)> = vec![
        ("Name", "ebb".into()),
        ("Version", env!("CARGO_PKG_VERSION").into()),
        ("Nbthread", p.nbthread.to_string()),
        ("Nbproc", "1".into()),
        ("Process_num", "1".into()),
        ("Pid", p.pid.to_string()),
        ("Uptime", up),
        ("Uptime_sec", up_s.to_string()),
        ("Maxconn", maxconn.to_string()),
        (
            "CurrConns",
            p.shared.actconn.load(Ordering::Relaxed).to_string(),
        ),
        ("CumConns", p.sessions.epoch().saturating_sub(1).to_string()),
        ("CumReq", req.to_string()),
        ("Sessions", p.sessions.len().to_string()),
        ("Frontends", c.frontends.len().to_string()),
        ("Backends", c.backends.len().to_string()),
        (
            "Profiling",
            match p.handle.profiling_mode() {
                ProfilingMode::On => "on",
                ProfilingMode::Auto => "auto",
                ProfilingMode::Off => "off",
            }
            .into(),
        ),
        ("Idle_pct", idle.to_string()),
    ];
    for (k, v) in kv {
        let _ = writeln!(s, "{k}: {v}");
    }
    s
}

/// `show tasks`: the scheduler's callbacks by name with calls, CPU and
/// latency (the profiling rows, all of them), and the profiling mode. The
/// scheduler does not expose its run queues' content, so this is the view
/// by callback name rather than HAProxy's list of queued tasks.
/// `show tasks`: the tasks and tasklets queued to run right now, by
/// callback, thread by thread (HAProxy's `show tasks`), taken while every
/// other thread is parked so the counts are one consistent picture.
fn show_tasks(p: &Process, isolate: &mut dyn FnMut(&mut dyn FnMut())) -> String {
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

fn show_sess(p: &Process, all: bool, isolate: &mut dyn FnMut(&mut dyn FnMut())) -> String {
    let mut out = String::new();
    let mut f = || {
        let epoch = p.sessions.epoch();
        let list = p.sessions.snapshot(epoch);
        let now = SystemTime::now();
        for s in list {
            let age = now
                .duration_since(s.accepted)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let (be, srv) = s
                .target
                .lock()
                .ok()
                .and_then(|t| t.clone())
                .map(|(b, sv)| (b.to_string(), sv.to_string()))
                .unwrap_or_else(|| ("<NONE>".into(), "<none>".into()));
            let proto = if s.peer.is_ipv4() { "tcpv4" } else { "tcpv6" };
            let _ = write!(
                out,
                "0x{:x}: proto={proto} src={} fe={} be={be} srv={srv} age={age}s thread={} reqs={}",
                s.id,
                s.peer,
                s.frontend,
                s.thread + 1,
                s.requests.load(Ordering::Relaxed),
            );
            if all {
                let _ = write!(
                    out,
                    " epoch={} kill={}",
                    s.epoch,
                    u8::from(s.kill.load(Ordering::Relaxed))
                );
            }
            out.push('\n');
        }
    };
    isolate(&mut f);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_unescaped_semicolons() {
        assert_eq!(
            split_commands("show info; show stat"),
            vec!["show info", "show stat"]
        );
        assert_eq!(split_commands("a\\;b;c;;"), vec!["a;b", "c"]);
        assert!(split_commands("  ").is_empty());
    }

    #[test]
    fn levels_rank() {
        assert!(need(CliLevel::Admin, CliLevel::Operator, "x").is_ok());
        let e = need(CliLevel::User, CliLevel::Admin, "set server").unwrap_err();
        assert!(
            e.contains("needs level admin") && e.contains("level user"),
            "{e}"
        );
        assert!(help(CliLevel::User).contains("show info"));
        assert!(!help(CliLevel::User).contains("set server"));
        assert!(help(CliLevel::Admin).contains("set server"));
    }

    #[test]
    fn ids() {
        assert_eq!(parse_id("0x1f"), Some(31));
        assert_eq!(parse_id("12"), Some(12));
        assert_eq!(parse_id("zz"), None);
    }
}
