//! The worker CLI's list of commands, as `help` prints it.

use std::fmt::Write as _;

use super::haproxy_commands::WORKER_KEYWORDS;
use super::usage::{usage, Keyword};
use super::Modes;
use crate::config::CliLevel;

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
    (
        "set timeout cli",
        "DELAY",
        CliLevel::User,
        "this connection's idle timeout (seconds by default)",
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
        "get weight",
        "BACKEND/SERVER",
        CliLevel::User,
        "a server's weight, and its initial one",
    ),
    (
        "set weight",
        "BACKEND/SERVER WEIGHT[%]",
        CliLevel::Admin,
        "change a server's weight (as 'set server ... weight')",
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

pub(super) fn help(level: CliLevel) -> String {
    let mut s = String::from("The following commands are valid at this level:\n");
    for (w, a, l, h) in COMMANDS {
        if level >= *l {
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

/// The answer to a command ebb does not run: for one of HAProxy's that
/// ebb lacks, ebb's list of what it has; for any other, HAProxy 2.6's
/// usage message (the closest of HAProxy's commands), byte for byte as
/// long as those are commands ebb runs: one ebb lacks is never proposed
/// (its words still count as known, as HAProxy's unlisted ones).
pub(super) fn unknown(level: CliLevel, w: &[&str], modes: Modes) -> String {
    let haproxys = WORKER_KEYWORDS
        .iter()
        .any(|k| w.len() >= k.words.len() && k.words == &w[..k.words.len()]);
    if haproxys {
        return format!("Unknown command: '{}'.\n{}", w.join(" "), help(level));
    }
    usage(&ebb_keywords(), w, modes.expert, modes.experimental)
}

/// `help WORDS`: HAProxy 2.6's list of the commands those words start
/// (the usage message), of those ebb runs.
pub(super) fn help_words(w: &[&str], modes: Modes) -> String {
    usage(&ebb_keywords(), w, modes.expert, modes.experimental)
}

/// HAProxy's worker commands as its usage message knows them, listed
/// only for those ebb runs (a command ebb lacks is never proposed; its
/// words still count as known, as HAProxy's unlisted ones).
fn ebb_keywords() -> Vec<Keyword> {
    // (ebb's list writes alternatives as `map|acl`.)
    let ebb_runs = |words: &[&str]| {
        COMMANDS.iter().any(|(cw, ..)| {
            let cw: Vec<&str> = cw.split_whitespace().collect();
            cw.len() >= words.len()
                && cw
                    .iter()
                    .zip(words)
                    .all(|(c, w)| c.split('|').any(|alt| alt == *w))
        })
    };
    WORKER_KEYWORDS
        .iter()
        .map(|k| Keyword {
            words: k.words,
            usage: k.usage.filter(|_| ebb_runs(k.words)),
            mode: k.mode,
        })
        .collect()
}
