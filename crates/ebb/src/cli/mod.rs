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

mod certs;
pub(crate) mod fuzz;
mod maps;
mod ocsp;
mod servers;
pub mod socket;

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use sched::{ProfilingMode, ReportOpts, SortBy};

use crate::backend::{ADMIN_DRAIN, ADMIN_MAINT, ADMIN_READY};
use crate::config::CliLevel;
use crate::proxy::BackendKind;
use crate::registry::Process;
use crate::serve::stats;

/// What one line produced.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// Every command's answer, each ending with an empty line.
    pub text: String,
    /// `quit` was among the commands.
    pub quit: bool,
    /// `prompt` toggled interactive mode this many times.
    pub prompt_toggles: u32,
    /// `show events RING -w`: the ring, and the number of the next message
    /// to print; the command's answer goes on until the client sends
    /// something (the commands after it on the line are not run).
    pub watch: Option<(String, u64)>,
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
    (
        "operator",
        "",
        CliLevel::Operator,
        "lower the level of the current CLI session to operator",
    ),
    (
        "user",
        "",
        CliLevel::User,
        "lower the level of the current CLI session to user",
    ),
    (
        "show cli level",
        "",
        CliLevel::User,
        "display the level of the current CLI session",
    ),
    (
        "show version",
        "",
        CliLevel::User,
        "show the version of the current process",
    ),
    (
        "show info",
        "[typed|json]",
        CliLevel::User,
        "process information",
    ),
    (
        "show stat",
        "[{IID|PROXY} TYPE SID] [typed|json] [up|no-maint]",
        CliLevel::User,
        "statistics of frontends, backends and servers (CSV)",
    ),
    ("show backend", "", CliLevel::User, "list the backends"),
    (
        "get var",
        "proc.NAME",
        CliLevel::Operator,
        "show a process-wide variable's type and value",
    ),
    (
        "set var",
        "proc.NAME [expr|fmt] VALUE",
        CliLevel::Operator,
        "set a process-wide variable (experimental mode)",
    ),
    (
        "add server",
        "BACKEND/NAME ADDR:PORT [options]",
        CliLevel::Admin,
        "add a server (in maintenance; 'enable server' starts it)",
    ),
    (
        "enable dynamic-cookie backend",
        "BACKEND",
        CliLevel::Admin,
        "enable dynamic cookies on a backend",
    ),
    (
        "disable dynamic-cookie backend",
        "BACKEND",
        CliLevel::Admin,
        "disable dynamic cookies on a backend",
    ),
    (
        "set dynamic-cookie-key backend",
        "BACKEND KEY",
        CliLevel::Admin,
        "change a backend's secret key for dynamic cookies",
    ),
    (
        "del server",
        "BACKEND/NAME",
        CliLevel::Admin,
        "remove a server in maintenance without connections",
    ),
    (
        "enable health",
        "BACKEND/NAME",
        CliLevel::Admin,
        "resume a server's health checks",
    ),
    (
        "disable health",
        "BACKEND/NAME",
        CliLevel::Admin,
        "stop a server's health checks (it counts as UP)",
    ),
    (
        "enable agent",
        "BACKEND/NAME",
        CliLevel::Admin,
        "resume a server's agent checks",
    ),
    (
        "disable agent",
        "BACKEND/NAME",
        CliLevel::Admin,
        "stop a server's agent checks (answers under way are ignored)",
    ),
    (
        "show resolvers",
        "[NAME]",
        CliLevel::User,
        "nameservers' counters of the resolvers sections",
    ),
    (
        "show servers state",
        "[BACKEND]",
        CliLevel::User,
        "servers' state in the server-state file format",
    ),
    (
        "show servers conn",
        "[BACKEND]",
        CliLevel::User,
        "servers' connections: in use, estimated need, idle (safe or not), by thread",
    ),
    (
        "show events",
        "[RING] [-n]",
        CliLevel::User,
        "list the rings, or print a ring's messages (operator)",
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
        "show errors",
        "[<px>] [request|response]",
        CliLevel::Operator,
        "the last invalid request and answer of each proxy",
    ),
    (
        "show sess",
        "[all]",
        CliLevel::Operator,
        "client sessions that exist now",
    ),
    (
        "show map|acl",
        "[MAP|#ID]",
        CliLevel::User,
        "the map or ACL files, or one file's entries",
    ),
    (
        "get map|acl",
        "MAP|#ID VALUE",
        CliLevel::User,
        "what each use of the file finds for VALUE",
    ),
    (
        "add map|acl",
        "MAP|#ID KEY [VALUE]",
        CliLevel::Operator,
        "add an entry to a map or ACL file (a map: payload supported instead of KEY VALUE)",
    ),
    (
        "set map",
        "MAP|#ID KEY|#ENTRY VALUE",
        CliLevel::Operator,
        "change the value of a map's entries",
    ),
    (
        "del map|acl",
        "MAP|#ID KEY|#ENTRY",
        CliLevel::Operator,
        "remove entries",
    ),
    (
        "clear map|acl",
        "MAP|#ID",
        CliLevel::Operator,
        "remove every entry",
    ),
    (
        "show table",
        "[NAME [data.TYPE OP VALUE]... | [key KEY]]",
        CliLevel::User,
        "stick tables, or one table's entries",
    ),
    (
        "show peers",
        "[dict|-] [SECTION]",
        CliLevel::User,
        "the peers sections, their peers and shared tables",
    ),
    (
        "show cache",
        "",
        CliLevel::Admin,
        "the caches and their entries",
    ),
    (
        "clear table",
        "NAME [data.TYPE OP VALUE]... | [key KEY]",
        CliLevel::Operator,
        "remove a table's unreferenced entries",
    ),
    (
        "set table",
        "NAME key KEY [data.TYPE VALUE]...",
        CliLevel::Admin,
        "create or update a table entry",
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
        "BACKEND/SERVER health up|stopping|down",
        CliLevel::Admin,
        "force a server's health check state",
    ),
    (
        "set server",
        "BACKEND/SERVER addr IP [port P] | fqdn NAME",
        CliLevel::Admin,
        "change a server's address, or the name it is resolved by",
    ),
    (
        "set server",
        "BACKEND/SERVER weight N[%]",
        CliLevel::Admin,
        "change a server's weight",
    ),
    (
        "set server",
        "BACKEND/SERVER agent up|down | agent-addr ADDR [port P] | agent-port P | agent-send STRING",
        CliLevel::Admin,
        "force a server's agent state, or change where and what its agent check sends",
    ),
    (
        "show ssl cert",
        "[[*]FILE]",
        CliLevel::Operator,
        "the certificate files in memory, or one's details ('*': the pending change)",
    ),
    (
        "show ssl crt-list",
        "[-n] [LIST]",
        CliLevel::Admin,
        "the crt-lists and crt directories, or one's entries (-n: line numbers)",
    ),
    (
        "show ssl ca-file",
        "[[*]FILE[:N]]",
        CliLevel::Operator,
        "the CA files loaded (and their number of certificates), or one's certificates",
    ),
    (
        "show ssl crl-file",
        "[[*]FILE[:N]]",
        CliLevel::Operator,
        "the CRL files loaded, or one's revocation lists",
    ),
    (
        "show ssl ocsp-response",
        "[ID]",
        CliLevel::User,
        "the IDs of the OCSP responses served, or one's details",
    ),
    (
        "set ssl ocsp-response",
        "BASE64 | <<",
        CliLevel::User,
        "staple a new OCSP response for the certificates it is about",
    ),
    (
        "new ssl ca-file|crl-file",
        "FILE",
        CliLevel::Admin,
        "create an empty CA or CRL file entry",
    ),
    (
        "set ssl ca-file|crl-file",
        "FILE <<",
        CliLevel::Admin,
        "start or update the change of a CA or CRL file (PEM payload)",
    ),
    (
        "commit ssl ca-file|crl-file",
        "FILE",
        CliLevel::Admin,
        "verify new handshakes with the changed file wherever it is used",
    ),
    (
        "abort ssl ca-file|crl-file",
        "FILE",
        CliLevel::Admin,
        "drop the pending change of a CA or CRL file",
    ),
    (
        "del ssl ca-file|crl-file",
        "FILE",
        CliLevel::Admin,
        "delete a CA or CRL file entry nothing uses",
    ),
    (
        "add ssl crt-list",
        "LIST CERT | LIST <<",
        CliLevel::Admin,
        "serve a certificate of the store on the bind lines using LIST (payload: CERT [filters])",
    ),
    (
        "del ssl crt-list",
        "LIST CERT[:LINE]",
        CliLevel::Admin,
        "stop serving a crt-list line's certificate (not a bind line's default one)",
    ),
    (
        "new ssl cert",
        "FILE",
        CliLevel::Admin,
        "create an empty certificate entry",
    ),
    (
        "set ssl cert",
        "FILE[.key|.ocsp] <<",
        CliLevel::Admin,
        "start or update the change of a certificate file (PEM payload; .ocsp: base64)",
    ),
    (
        "commit ssl cert",
        "FILE",
        CliLevel::Admin,
        "serve the changed certificate for new handshakes wherever the file is used",
    ),
    (
        "abort ssl cert",
        "FILE",
        CliLevel::Admin,
        "drop the pending change of a certificate file",
    ),
    (
        "del ssl cert",
        "FILE",
        CliLevel::Admin,
        "delete a certificate entry nothing uses",
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

/// A CLI connection's modes, HAProxy's: `experimental-mode` (the
/// commands marked experimental) and `expert-mode` (ebb has no command
/// that needs it: the mode is kept and reported, as HAProxy's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modes {
    pub experimental: bool,
    pub expert: bool,
}

/// The commands that depend on the connection's modes (`experimental-mode`)
/// or take escaped words (`get var`, `set var`); `None` for the others.
/// A successful answer is complete as returned: no newline is added to it before
/// the empty line that ends it (HAProxy's `get var` line has none).
fn execute_moded(level: CliLevel, cmd: &str, modes: &mut Modes) -> Option<Result<String, String>> {
    use CliLevel::*;
    let w = maps::words(cmd);
    let w: Vec<&str> = w.iter().map(String::as_str).collect();
    Some(match w.as_slice() {
        [m @ ("experimental-mode" | "expert-mode"), rest @ ..] => need(level, Admin).map(|_| {
            let flag = if *m == "expert-mode" {
                &mut modes.expert
            } else {
                &mut modes.experimental
            };
            match rest.first() {
                None => format!("{m} is {}\n", if *flag { "ON" } else { "OFF" }),
                Some(v) => {
                    *flag = *v == "on";
                    String::new()
                }
            }
        }),
        ["get", "var", rest @ ..] => need(level, Operator).and_then(|_| match rest {
            [] => Err("Missing process-wide variable identifier.\n".into()),
            [name, ..] => crate::sample::vars::cli_get(name),
        }),
        ["set", "var", rest @ ..] => {
            if !modes.experimental {
                Err("This command is restricted to experimental mode only.\n".into())
            } else {
                need(level, Operator).and_then(|_| {
                    let args: Vec<String> = rest.iter().map(|a| a.to_string()).collect();
                    crate::sample::vars::cli_set(&args).map(|_| String::new())
                })
            }
        }
        _ => return None,
    })
}

/// `show events RING [-w] [-n]`: the messages (one a line), and with `-w`
/// the number of the next one, for the connection to wait for.
fn show_events(
    level: CliLevel,
    name: &str,
    opts: &[&str],
) -> Result<(String, Option<u64>), String> {
    need(level, CliLevel::Operator)?;
    let ring = match crate::ring::find(name) {
        Some(r) => r,
        None if matches!(name, "stdout" | "stderr") => {
            return Ok(("Nothing to report for this sink".into(), None))
        }
        None => return Err("No such event sink".into()),
    };
    let (mut wait, mut new_only) = (false, false);
    for o in opts {
        match *o {
            "-n" => new_only = true,
            "-w" => wait = true,
            "-nw" | "-wn" => (wait, new_only) = (true, true),
            _ => return Err("unknown option".into()),
        }
    }
    let (msgs, next) = ring.events_from(None, new_only);
    let mut s = String::new();
    for m in msgs {
        s.push_str(&String::from_utf8_lossy(&m));
        s.push('\n');
    }
    Ok((s, wait.then_some(next)))
}

/// Runs one line of commands. `modes` are the connection's
/// (`experimental-mode`, `expert-mode`); `isolate` runs a closure with every other
/// scheduler thread parked.
pub fn execute_line(
    p: &Process,
    level_now: &mut CliLevel,
    line: &str,
    modes: &mut Modes,
    isolate: &mut dyn FnMut(&mut dyn FnMut()),
) -> Reply {
    let mut r = Reply::default();
    for cmd in split_commands(line) {
        let level = *level_now;
        let words: Vec<&str> = cmd.split_whitespace().collect();
        match words.as_slice() {
            // HAProxy's session levels: `operator` and `user` lower the
            // connection's level (never raise it) and end its
            // experimental mode; a `-` after it leaves out the empty line
            // that ends an answer (the master CLI sends `user -` before
            // each command of a session at that level).
            [lvl @ ("operator" | "user"), rest @ ..] => {
                let want = if *lvl == "operator" {
                    CliLevel::Operator
                } else {
                    CliLevel::User
                };
                if rank(level) < rank(want) {
                    r.text.push_str("Permission denied\n");
                } else {
                    *level_now = want;
                    *modes = Modes::default();
                }
                if rest.first() != Some(&"-") {
                    r.text.push('\n');
                }
                continue;
            }
            ["show", "cli", "level"] => {
                r.text.push_str(level_name(level));
                r.text.push_str("\n\n");
                continue;
            }
            ["quit"] => {
                r.quit = true;
                break;
            }
            ["prompt"] => {
                // Its answer is empty: the empty line that ends one (so
                // `\n> ` on turning it on), as HAProxy 2.6 writes it.
                r.prompt_toggles += 1;
                r.text.push('\n');
                continue;
            }
            ["show", "events", name, opts @ ..]
                if opts.iter().any(|o| matches!(*o, "-w" | "-nw" | "-wn")) =>
            {
                match show_events(level, name, opts) {
                    Ok((text, Some(next))) => {
                        r.text.push_str(&text);
                        r.watch = Some((name.to_string(), next));
                        break;
                    }
                    Ok((text, None)) | Err(text) => {
                        // One newline after it, as HAProxy (its messages
                        // have none of their own).
                        r.text.push_str(&text);
                        r.text.push('\n');
                        continue;
                    }
                }
            }
            _ => {}
        }
        let moded = execute_moded(level, &cmd, modes);
        let exact = matches!(moded, Some(Ok(_))) || certs::exact(&words);
        let res = moded
            .or_else(|| maps::execute(level, &cmd))
            .or_else(|| certs::execute(level, &words))
            .unwrap_or_else(|| execute(p, level, &words, isolate));
        let mut out = match res {
            Ok(s) => s,
            Err(e) => e,
        };
        // HAProxy's answers without a newline of their own (`show events
        // RING`, `del server`, `add server`'s first checks) are followed
        // by one newline only, not the empty line that ends the others.
        let bare = !out.ends_with('\n')
            && match words.as_slice() {
                ["show", "events", _, ..] | ["del", "server", ..] => true,
                ["add", "server", ..] => [
                    "Require 'backend/server'.",
                    "No such backend.",
                    "Backend has no servers (it serves files).",
                ]
                .contains(&out.as_str()),
                _ => false,
            };
        if !exact && !bare && !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        // `experimental-mode on -`, `expert-mode on -`: no empty line after it (HAProxy's
        // form for the master CLI).
        let nolf = matches!(words.first(), Some(&("experimental-mode" | "expert-mode")))
            && words.get(2) == Some(&"-");
        if !nolf {
            out.push('\n');
        }
        r.text.push_str(&out);
    }
    r
}

/// Runs a command given with a payload (`CMD <<`, then its lines up to
/// an empty one, HAProxy's CLI framing): `add map MAP <<` with a `KEY
/// VALUE` per line; the commands that take no payload say so.
pub fn execute_payload(level: CliLevel, cmd: &str, payload: &str) -> Reply {
    let res = maps::execute_payload(level, cmd, payload)
        .or_else(|| certs::execute_payload(level, cmd, payload));
    let mut out = match res {
        Some(Ok(s)) | Some(Err(s)) => s,
        None => "This command takes no payload ('<<') in ebb.\n".to_string(),
    };
    out.push('\n');
    Reply {
        text: out,
        ..Reply::default()
    }
}

fn need(level: CliLevel, want: CliLevel) -> Result<(), String> {
    if rank(level) >= rank(want) {
        Ok(())
    } else {
        // HAProxy 2.6's words.
        Err("Permission denied\n".to_string())
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
        ["show", "version"] => Ok(format!("{}\n", env!("CARGO_PKG_VERSION"))),
        ["show", "info"] => Ok(show_info(p, "")),
        ["show", "info", form @ ("typed" | "json"), ..] => Ok(show_info(p, form)),
        ["show", "stat", rest @ ..] => show_stat(p, rest),
        ["get", "weight", spec] => {
            let c = p.live.compiled();
            let (_, srv) = stats::find_server(&c, spec)?;
            Ok(format!(
                "{} (initial {})\n",
                srv.weight.load(Ordering::Relaxed),
                srv.opts.weight
            ))
        }
        ["get", "weight", ..] => Err("Require 'backend/server'.".into()),
        ["set", "weight", spec, wt] => {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            stats::set_weight(&farm, &srv, wt)?;
            Ok(String::new())
        }
        ["set", "weight", ..] => {
            need(level, Admin)?;
            Err("Require 'backend/server' and 'weight' or 'weight%'.".into())
        }
        ["show", "backend"] => {
            let c = p.live.compiled();
            let mut s = String::from("# name\n");
            for b in &c.backends {
                let _ = writeln!(s, "{}", b.name);
            }
            Ok(s)
        }
        ["show", "servers", what @ ("conn" | "state"), rest @ ..] => {
            let c = p.live.compiled();
            if let Some(b) = rest.first() {
                if !c.backends.iter().any(|x| x.name == *b) {
                    return Err(format!("Can't find backend '{b}'."));
                }
            }
            let farms = c.backends.iter().filter_map(|b| {
                if rest.first().is_some_and(|x| *x != b.name) {
                    return None;
                }
                match &b.kind {
                    BackendKind::Servers(s) => Some((b.uuid, &*s.farm)),
                    BackendKind::Files(_) => None,
                }
            });
            Ok(if *what == "conn" {
                crate::statefile::dump_conns(farms, p.nbthread)
            } else {
                crate::statefile::dump(farms)
            })
        }
        ["show", "events"] => {
            // HAProxy's list: its standard output and error sinks, then
            // the rings.
            let mut s = String::from(
                "Supported events sinks are listed below. Add -w(wait), -n(new). Any key to stop\n",
            );
            let _ = writeln!(
                s,
                "    {:<10} : type=fd, 0 dropped, standard output (fd#1)",
                "stdout"
            );
            let _ = writeln!(
                s,
                "    {:<10} : type=fd, 0 dropped, standard output (fd#2)",
                "stderr"
            );
            for r in crate::ring::all() {
                let _ = writeln!(
                    s,
                    "    {:<10} : type=buffer, {} dropped, {}",
                    r.name,
                    r.dropped(),
                    r.description
                );
            }
            Ok(s)
        }
        ["show", "events", name, opts @ ..] => show_events(level, name, opts).map(|(t, _)| t),
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
            need(level, Operator)?;
            Ok(show_tasks(p, isolate))
        }
        ["show", "errors", rest @ ..] => {
            need(level, Operator)?;
            crate::proxy::errors::show(&p.live.compiled(), rest)
        }
        ["show", "sess", rest @ ..] => {
            need(level, Operator)?;
            let all = match rest {
                [] => false,
                ["all"] => true,
                _ => return Err("'show sess' takes nothing or 'all'.".into()),
            };
            Ok(show_sess(p, all, isolate))
        }
        ["show", "table"] => Ok(crate::table::cli::show_all(&p.live.compiled().tables)),
        ["show", "peers", rest @ ..] => crate::peers::show(rest, p.handle.now()),
        ["show", "cache"] => {
            need(level, Admin)?;
            Ok(crate::httpcache::show(&p.live.compiled().caches))
        }
        ["show", "table", name, rest @ ..] => {
            crate::table::cli::show(&p.live.compiled().tables, name, rest, p.handle.now())
        }
        ["clear", "table", name, rest @ ..] => {
            need(level, Operator)?;
            crate::table::cli::clear(&p.live.compiled().tables, name, rest, p.handle.now())
        }
        ["clear", "table"] => {
            need(level, Operator)?;
            Err("Required arguments: <table> \"data.<store_data_type>\" <operator> <value> or <table> key <key>".into())
        }
        ["set", "table", name, rest @ ..] => {
            need(level, Admin)?;
            crate::table::cli::set(&p.live.compiled().tables, name, rest, p.handle.now())
        }
        ["set", "table"] => {
            need(level, Admin)?;
            Err(crate::table::cli::SET_USAGE.into())
        }
        ["clear", "counters"] => {
            need(level, Operator)?;
            stats::clear_maxima();
            stats::clear_server_maxima(&p.live.compiled());
            Ok(String::new())
        }
        ["clear", "counters", "all"] => {
            need(level, Admin)?;
            stats::clear_all(&p.live.compiled());
            p.handle.reset_profiling();
            Ok(String::new())
        }
        ["set", "profiling", "tasks", m] => {
            need(level, Admin)?;
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
            need(level, Admin)?;
            let n = parse_id(id).ok_or_else(|| format!("'{id}': not a session id."))?;
            let s = p
                .sessions
                .get(n)
                .ok_or_else(|| format!("No such session (0x{n:x})."))?;
            kill(p, &s);
            Ok(String::new())
        }
        ["shutdown", "sessions", "server", spec] => {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            let mut n = 0;
            let mut f = || {
                let epoch = p.sessions.epoch();
                for s in p.sessions.snapshot(epoch) {
                    let hit = crate::backend::server_by_uid(s.target.load(Ordering::Relaxed))
                        .is_some_and(|t| t.backend == farm.name && t.name == srv.name);
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
            need(level, Admin)?;
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
        ["set", "server", spec, "health", h] => {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            use crate::backend::check::Health;
            let h = match *h {
                "up" => Health::Up,
                "stopping" => Health::Stopping,
                "down" => Health::Down,
                _ => {
                    return Err(
                        "'set server <srv> health' expects 'up', 'stopping', or 'down'.".into(),
                    )
                }
            };
            crate::backend::check::force_health(&farm, &srv, h, "changed from CLI")?;
            Ok(String::new())
        }
        ["set", "server", spec, "weight", wt] => {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            stats::set_weight(&farm, &srv, wt)?;
            Ok(String::new())
        }
        ["set", "server", spec, kw @ ("addr" | "fqdn"), rest @ ..] => {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            servers::set(&farm, &srv, kw, rest)
        }
        ["set", "server", spec, kw @ ("agent" | "agent-addr" | "agent-port" | "agent-send"), rest @ ..] =>
        {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            servers::set_agent(&farm, &srv, kw, rest)
        }
        ["show", "resolvers"] => crate::resolvers::show(None),
        ["show", "resolvers", name] => crate::resolvers::show(Some(name)),
        ["set", "server", ..] => {
            need(level, Admin)?;
            Err("Usage: set server BACKEND/SERVER state ready|drain|maint, health up|stopping|down, weight N[%], addr IP [port P], fqdn NAME, agent up|down, agent-addr ADDR [port P], agent-port P or agent-send STRING".into())
        }
        [verb @ ("enable" | "disable"), "dynamic-cookie", "backend", rest @ ..] => {
            need(level, Admin)?;
            servers::dynamic_cookie(&p.live.compiled(), rest.first().copied(), *verb == "enable")
        }
        ["set", "dynamic-cookie-key", "backend", rest @ ..] => {
            need(level, Admin)?;
            let (b, k) = (rest.first().copied(), rest.get(1).copied());
            servers::dynamic_cookie_key(&p.live.compiled(), b, k)
        }
        ["add", "server", spec, rest @ ..] => {
            need(level, Admin)?;
            servers::add(&p.live.compiled(), spec, rest)
        }
        ["del", "server", spec] => {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            servers::del(&farm, &srv)
        }
        [verb @ ("enable" | "disable"), what @ ("health" | "agent"), spec] => {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (_, srv) = stats::find_server(&c, spec)?;
            servers::check_switch(&srv, *verb == "enable", *what == "agent")
        }
        [verb @ ("enable" | "disable"), "server", spec] => {
            need(level, Admin)?;
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
            need(level, Admin)?;
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

/// `show stat [{<iid>|<proxy>} <type> <sid>] [typed|json] [desc] [up|no-maint]`.
fn show_stat(p: &Process, args: &[&str]) -> Result<String, String> {
    let c = p.live.compiled();
    let (mut typed, mut json, mut up, mut no_maint) = (false, false, false, false);
    let mut pos = Vec::new();
    for a in args {
        match *a {
            "typed" => typed = true,
            "json" => json = true,
            "desc" => return Err("'desc' (field descriptions) is not supported by ebb.".into()),
            "up" => up = true,
            "no-maint" => no_maint = true,
            o => pos.push(o),
        }
    }
    let mut f = stats::Filter::default();
    // As HAProxy: the filter needs all three; fewer are ignored.
    if let [px, ty, sid, ..] = pos.as_slice() {
        if *px != "-1" {
            let exists = c
                .frontends
                .iter()
                .map(|x| (&x.name, x.uuid))
                .chain(c.backends.iter().map(|x| (&x.name, x.uuid)))
                .any(|(n, id)| n == px || id.to_string() == *px);
            if !exists {
                return Err("No such proxy.".into());
            }
            f.proxy = Some(px.to_string());
        }
        let t: i64 = ty.parse().map_err(|_| {
            format!("'{ty}': the type is a number (1 frontends, 2 backends, 4 servers, -1 all).")
        })?;
        f.types = (t != -1).then_some((t & 7) as u32);
        let sid: i64 = sid
            .parse()
            .map_err(|_| format!("'{sid}': the server id is a number (-1 all)."))?;
        f.sid = (sid != -1).then_some(sid.max(0) as usize);
    }
    let rows: Vec<stats::Row> = stats::rows(&c, None)
        .into_iter()
        .filter(|r| f.keep(r))
        .filter(|r| {
            r.kind != stats::Kind::Server
                || !((up && !(r.status == "UP" || r.status == "no check"))
                    || (no_maint && r.admin == Some(ADMIN_MAINT)))
        })
        .collect();
    Ok(if json {
        stats::json(&rows)
    } else if typed {
        stats::typed(&rows)
    } else {
        stats::csv(&rows)
    })
}

fn parse_id(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn kill(p: &Process, s: &crate::registry::SessInfo) {
    s.end(crate::registry::KILL_CLI, &p.handle);
}

/// HAProxy 2.6's `show info` fields in order, with typed tags and type.
const INFO_FIELDS: &[(&str, &str, &str)] = &[
    ("Name", "POS", "str"),
    ("Version", "POS", "str"),
    ("Release_date", "POS", "str"),
    ("Nbthread", "CGS", "u32"),
    ("Nbproc", "CGS", "u32"),
    ("Process_num", "KGP", "u32"),
    ("Pid", "SGP", "u32"),
    ("Uptime", "MDP", "str"),
    ("Uptime_sec", "MDP", "u32"),
    ("Memmax_MB", "CLP", "u32"),
    ("PoolAlloc_MB", "MGP", "u32"),
    ("PoolUsed_MB", "MGP", "u32"),
    ("PoolFailed", "MCP", "u32"),
    ("Ulimit-n", "CLP", "u32"),
    ("Maxsock", "CLP", "u32"),
    ("Maxconn", "CLP", "u32"),
    ("Hard_maxconn", "CLP", "u32"),
    ("CurrConns", "MGP", "u32"),
    ("CumConns", "MCP", "u32"),
    ("CumReq", "MCP", "u32"),
    ("MaxSslConns", "MMP", "u32"),
    ("CurrSslConns", "MGP", "u32"),
    ("CumSslConns", "MCP", "u32"),
    ("Maxpipes", "CLP", "u32"),
    ("PipesUsed", "MGP", "u32"),
    ("PipesFree", "MGP", "u32"),
    ("ConnRate", "MRP", "u32"),
    ("ConnRateLimit", "CLP", "u32"),
    ("MaxConnRate", "MMP", "u32"),
    ("SessRate", "MRP", "u32"),
    ("SessRateLimit", "CLP", "u32"),
    ("MaxSessRate", "MRP", "u32"),
    ("SslRate", "MRP", "u32"),
    ("SslRateLimit", "CLP", "u32"),
    ("MaxSslRate", "MMP", "u32"),
    ("SslFrontendKeyRate", "MGP", "u32"),
    ("SslFrontendMaxKeyRate", "MMP", "u32"),
    ("SslFrontendSessionReuse_pct", "MGP", "u32"),
    ("SslBackendKeyRate", "MRP", "u32"),
    ("SslBackendMaxKeyRate", "MMP", "u32"),
    ("SslCacheLookups", "MCP", "u32"),
    ("SslCacheMisses", "MCP", "u32"),
    ("CompressBpsIn", "MRP", "u32"),
    ("CompressBpsOut", "MRP", "u32"),
    ("CompressBpsRateLim", "CLP", "u32"),
    ("Tasks", "MGP", "u32"),
    ("Run_queue", "MGP", "u32"),
    ("Idle_pct", "MaP", "u32"),
    ("node", "COS", "str"),
    ("description", "COS", "str"),
    ("Stopping", "MGP", "u32"),
    ("Jobs", "MGP", "u32"),
    ("Unstoppable Jobs", "MGP", "u32"),
    ("Listeners", "MGP", "u32"),
    ("ActivePeers", "MGP", "u32"),
    ("ConnectedPeers", "MGP", "u32"),
    ("DroppedLogs", "MGP", "u32"),
    ("BusyPolling", "MGP", "u32"),
    ("FailedResolutions", "MGP", "u32"),
    ("TotalBytesOut", "MGP", "u64"),
    ("TotalSplicdedBytesOut", "MGP", "u64"),
    ("BytesOutRate", "MRP", "u64"),
    ("DebugCommandsIssued", "MGP", "u32"),
    ("CumRecvLogs", "MCP", "u32"),
    ("Build info", "POS", "str"),
    ("Memmax_bytes", "CLP", "u32"),
    ("PoolAlloc_bytes", "MGP", "u64"),
    ("PoolUsed_bytes", "MGP", "u64"),
    ("Start_time_sec", "MDP", "u32"),
    ("Tainted", "SGP", "str"),
];

/// `show info [typed|json]`: HAProxy's fields in its order, then ebb's own
/// (sessions, frontends, backends, profiling mode) in the plain form.
fn show_info(p: &Process, form: &str) -> String {
    let vals = crate::serve::info::info_values(p);
    let get = |k: &str| vals.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
    let mut s = String::new();
    match form {
        "typed" => {
            for (i, (name, tags, ty)) in INFO_FIELDS.iter().enumerate() {
                if let Some(v) = get(name) {
                    let _ = writeln!(s, "{i}.{name}.1:{tags}:{ty}:{v}");
                }
            }
        }
        "json" => {
            let mut items = Vec::new();
            for (i, (name, tags, ty)) in INFO_FIELDS.iter().enumerate() {
                if let Some(v) = get(name) {
                    let val = if *ty == "str" {
                        stats::Val::Str(v.to_string())
                    } else {
                        stats::Val::U(v.parse().unwrap_or(0))
                    };
                    items.push(format!(
                        "{{\"field\":{{\"pos\":{i},\"name\":{}}},\"processNum\":1,\"tags\":{},\"value\":{}}}",
                        stats::json_str(name),
                        stats::json_tags(tags),
                        stats::json_val(ty, &val)
                    ));
                }
            }
            let _ = writeln!(s, "[{}]", items.join(","));
        }
        _ => {
            for (name, _, _) in INFO_FIELDS {
                // HAProxy prints a description only when one is set.
                if *name == "description" && get(name).is_none() {
                    continue;
                }
                let _ = writeln!(s, "{name}: {}", get(name).unwrap_or(""));
            }
            let c = p.live.compiled();
            let _ = writeln!(s, "Sessions: {}", p.sessions.len());
            let _ = writeln!(s, "Frontends: {}", c.frontends.len());
            let _ = writeln!(s, "Backends: {}", c.backends.len());
            let mode = match p.handle.profiling_mode() {
                ProfilingMode::On => "on",
                ProfilingMode::Auto => "auto",
                ProfilingMode::Off => "off",
            };
            let _ = writeln!(s, "Profiling: {mode}");
        }
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
        assert!(need(CliLevel::Admin, CliLevel::Operator).is_ok());
        let e = need(CliLevel::User, CliLevel::Admin).unwrap_err();
        assert_eq!(e, "Permission denied\n");
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
