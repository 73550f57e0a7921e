//! The master's own commands: `show proc`, `reload`, `show version`,
//! `show cli level`, `show cli sockets`, `help`, and the session's words
//! when a prefix sends them to the master (`@master operator`).

use std::time::SystemTime;

use super::super::Master;
use super::conn::CliConn;
use crate::cli::usage::{usage, Keyword, Mode};
use crate::config::CliLevel;

impl Master {
    /// Runs one of the master's own commands at the level and in the
    /// modes of session `c`, its answer (ended by an empty line, as the
    /// CLI's) added to `out`. True: `reload`.
    pub(super) fn master_command(&self, cmd: &str, c: &CliConn, out: &mut String) -> bool {
        let level = c.level;
        let words: Vec<&str> = cmd.split_whitespace().collect();
        // As HAProxy: a command's first words name it, the words after
        // them are not looked at.
        match words[..] {
            ["show", "proc", ..] => out.push_str(&self.show_proc()),
            ["reload", ..] if level < CliLevel::Operator => out.push_str("Permission denied\n\n"),
            ["reload", ..] => return true,
            // HAProxy 2.6's master lists none of its sockets here (it
            // has no stats frontend): an empty answer.
            ["show", "cli", "sockets", ..] => out.push('\n'),
            ["show", "version", ..] => {
                out.push_str(env!("CARGO_PKG_VERSION"));
                out.push_str("\n\n");
            }
            ["show", "cli", "level", ..] => {
                out.push_str(level.name());
                out.push_str("\n\n");
            }
            // Sent with a prefix (`@master operator`): HAProxy's master
            // runs them for that command alone, the session unchanged.
            [lvl @ ("operator" | "user"), ..] => {
                let want = CliLevel::from_name(lvl).unwrap_or(CliLevel::User);
                out.push_str(if level < want {
                    "Permission denied\n\n"
                } else {
                    "\n"
                });
            }
            [m @ ("experimental-mode" | "expert-mode" | "mcli-debug-mode"), ref rest @ ..] => {
                if level < CliLevel::Admin {
                    out.push_str("Permission denied\n\n");
                } else if rest.is_empty() {
                    let on = match m {
                        "experimental-mode" => c.experimental,
                        "expert-mode" => c.expert,
                        _ => c.debug,
                    };
                    let state = if on { "ON" } else { "OFF" };
                    out.push_str(&format!("{m} is {state}\n\n"));
                } else {
                    out.push('\n');
                }
            }
            // `help`, and anything else: HAProxy's usage message.
            _ => {
                out.push_str(&usage(MASTER_KEYWORDS, &words, false, false));
                out.push('\n');
            }
        }
        false
    }

    /// Workers, newest first.
    pub(super) fn by_age(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.workers.len()).collect();
        v.sort_by_key(|&i| std::cmp::Reverse((self.workers[i].gen, self.workers[i].started)));
        v
    }

    fn show_proc(&self) -> String {
        let up = |t: SystemTime| {
            let s = SystemTime::now()
                .duration_since(t)
                .map_or(0, |d| d.as_secs());
            format!(
                "{}d{:02}h{:02}m{:02}s",
                s / 86400,
                s / 3600 % 24,
                s / 60 % 60,
                s % 60
            )
        };
        let ver = env!("CARGO_PKG_VERSION");
        let row = crate::program::show_proc_row;
        let mut o = row(&"#<PID>", "<type>", &"<reloads>", "<uptime>", "<version>");
        o.push_str(&row(
            &crate::sys::pid(),
            "master",
            &format!("{} [failed: {}]", self.reloads, self.failed),
            &up(self.started),
            ver,
        ));
        // The current workers, then the old ones (still finishing; the
        // title only when there are some, as HAProxy), each section in
        // `by_age` order.
        for (title, old) in [("# workers\n", false), ("# old workers\n", true)] {
            if old && !self.workers.iter().any(|w| w.old) {
                continue;
            }
            o.push_str(title);
            for &i in &self.by_age() {
                let w = &self.workers[i];
                if w.old == old {
                    o.push_str(&row(
                        &w.pid,
                        "worker",
                        &(self.reloads - w.gen),
                        &up(w.started),
                        ver,
                    ));
                }
            }
        }
        o.push_str(&crate::program::show(&self.programs, &up));
        o.push('\n');
        o
    }
}

/// The master's commands, in HAProxy 2.6's order (its CLI's, then its
/// master's): those its usage message lists, and those it does not but
/// whose words count as known.
const MASTER_KEYWORDS: &[Keyword] = &[
    kw(&["help"], None),
    kw(&["prompt"], None),
    kw(&["quit"], None),
    kw(&["expert-mode"], None),
    kw(&["experimental-mode"], None),
    kw(&["mcli-debug-mode"], None),
    kw(
        &["show", "cli", "sockets"],
        Some("show cli sockets                        : dump list of cli sockets"),
    ),
    kw(
        &["show", "cli", "level"],
        Some("show cli level                          : display the level of the current CLI session"),
    ),
    kw(
        &["show", "version"],
        Some("show version                            : show version of the current process"),
    ),
    kw(
        &["operator"],
        Some("operator                                : lower the level of the current CLI session to operator"),
    ),
    kw(
        &["user"],
        Some("user                                    : lower the level of the current CLI session to user"),
    ),
    kw(
        &["@<relative pid>"],
        Some("@<relative pid>                         : send a command to the <relative pid> process"),
    ),
    kw(
        &["@!<pid>"],
        Some("@!<pid>                                 : send a command to the <pid> process"),
    ),
    kw(
        &["@master"],
        Some("@master                                 : send a command to the master process"),
    ),
    kw(
        &["show", "proc"],
        Some("show proc                               : show processes status"),
    ),
    kw(
        &["reload"],
        Some("reload                                  : reload haproxy"),
    ),
];

const fn kw(words: &'static [&'static str], usage: Option<&'static str>) -> Keyword {
    Keyword {
        words,
        usage,
        mode: Mode::Any,
    }
}
