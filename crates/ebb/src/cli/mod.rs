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

mod activity;
mod certs;
mod events;
pub(crate) mod fuzz;
mod haproxy_commands;
mod help;
mod info;
mod maps;
mod ocsp;
mod servers;
mod sessions;
pub mod socket;
pub(crate) mod usage;
mod x509print;

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

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
    /// `set timeout cli`: the connection's idle timeout from now on.
    pub timeout_ms: Option<u32>,
}

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
                if level < want {
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
                r.text.push_str(level.name());
                r.text.push_str("\n\n");
                continue;
            }
            ["quit"] => {
                r.quit = true;
                break;
            }
            ["set", "timeout", rest @ ..] => {
                // HAProxy's `set timeout cli <delay>`: this connection's
                // idle timeout, seconds by default, at least one second.
                match rest {
                    ["cli"] => r.text.push_str("Expects an integer value.\n"),
                    ["cli", d, ..] => {
                        match crate::config::parse_time_unit(d, 1_000_000) {
                            // (In whole seconds, rounded up as HAProxy's
                            // parse_time_err: `500ms` is one second.)
                            Ok(t) if !t.is_zero() => {
                                let secs = t.as_micros().div_ceil(1_000_000);
                                let ms =
                                    u64::try_from(secs).unwrap_or(u64::MAX).saturating_mul(1000);
                                r.timeout_ms = Some(u32::try_from(ms).unwrap_or(u32::MAX));
                            }
                            _ => r.text.push_str("Invalid timeout value.\n"),
                        }
                    }
                    _ => r.text.push_str("'set timeout' only supports 'cli'.\n"),
                }
                r.text.push('\n');
                continue;
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
                match events::show_events(level, name, opts) {
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
        // The certificate commands read their words as HAProxy's CLI
        // gives them: `\` escapes undone (`show ssl crl-file \*F`).
        let escaped = maps::words(&cmd);
        let esc: Vec<&str> = escaped.iter().map(String::as_str).collect();
        let exact = matches!(moded, Some(Ok(_))) || certs::exact(&esc);
        let res = moded
            .or_else(|| maps::execute(level, &cmd))
            .or_else(|| certs::execute(level, &esc))
            .unwrap_or_else(|| execute(p, level, &words, *modes, isolate));
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
    if level >= want {
        Ok(())
    } else {
        // HAProxy 2.6's words.
        Err("Permission denied\n".to_string())
    }
}

/// Runs one command; `Err` carries the error text (still an answer).
pub fn execute(
    p: &Process,
    level: CliLevel,
    w: &[&str],
    modes: Modes,
    isolate: &mut dyn FnMut(&mut dyn FnMut()),
) -> Result<String, String> {
    use CliLevel::*;
    match w {
        [] => Ok(String::new()),
        ["help"] => Ok(help::help(level)),
        ["help", ..] => Ok(help::help_words(w, modes)),
        ["show", "version"] => Ok(format!("{}\n", env!("CARGO_PKG_VERSION"))),
        ["show", "info"] => Ok(info::show_info(p, "")),
        ["show", "info", form @ ("typed" | "json"), ..] => Ok(info::show_info(p, form)),
        ["show", "stat", rest @ ..] => info::show_stat(p, rest),
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
        ["show", "events"] => Ok(events::list()),
        ["show", "events", name, opts @ ..] => {
            events::show_events(level, name, opts).map(|(t, _)| t)
        }
        ["show", "activity", rest @ ..] => activity::show_activity(p, rest),
        ["show", "profiling", rest @ ..] => activity::show_profiling(p, rest),
        ["show", "tasks"] => {
            need(level, Operator)?;
            Ok(sessions::show_tasks(p, isolate))
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
            Ok(sessions::show_sess(p, all, isolate))
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
            activity::set_profiling(p, m)
        }
        ["set", "profiling", ..] => Err("Usage: set profiling tasks on|auto|off".into()),
        ["shutdown", "session", id] => {
            need(level, Admin)?;
            let n = sessions::parse_id(id).ok_or_else(|| format!("'{id}': not a session id."))?;
            let s = p
                .sessions
                .get(n)
                .ok_or_else(|| format!("No such session (0x{n:x})."))?;
            sessions::kill(p, &s);
            Ok(String::new())
        }
        ["shutdown", "sessions", "server", spec] => {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (farm, srv) = stats::find_server(&c, spec)?;
            sessions::shutdown_server(p, &farm.name, &srv.name, isolate);
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
        ["set", "server", spec, "ssl", rest @ ..] => {
            need(level, Admin)?;
            let c = p.live.compiled();
            let (_, srv) = stats::find_server(&c, spec)?;
            servers::set_ssl(&srv, rest.first().copied())
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
        _ => Err(help::unknown(level, w, modes)),
    }
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
        assert!(help::help(CliLevel::User).contains("show info"));
        assert!(!help::help(CliLevel::User).contains("set server"));
        assert!(help::help(CliLevel::Admin).contains("set server"));
    }
}
