//! HAProxy-grammar configuration parser.
//!
//! ebb reads HAProxy's configuration language so that users bring their
//! `haproxy.cfg`. This module turns one or more files into a typed
//! [`Config`] and does nothing else: no socket is opened, no name resolved,
//! no certificate loaded. The only files it reads are those whose content is
//! part of the configuration (`errorfile`, `http-request return ... file`),
//! as HAProxy does.
//!
//! # Pipeline
//!
//! ```text
//!  bytes ──lines──> lexer::tokenize ──words──> parse::Parser::line
//!                   (quotes, escapes,          (section state machine,
//!                    comments, "${ENV}")         keyword handlers)
//!                                                      │
//!                          Config <── cross-checks <───┘
//!                                    (backend names, binds, duplicates)
//! ```
//!
//! # Rules
//!
//! - Every error carries the `file:line` of the line at fault and the parser
//!   carries on, so a single run lists every problem ([`ConfigError`]).
//! - An unknown keyword, a keyword in a section where it has no effect, an
//!   unsupported option or a bad value is an error, never ignored.
//! - `defaults` values are copied into each following proxy when its header
//!   is read; a new `defaults` section starts from scratch (or from `from
//!   NAME`), as in HAProxy.
//! - A `listen` is one [`Proxy`] with both capabilities.
//! - ACLs must be declared before the rule that uses them (HAProxy's rule);
//!   a condition holds the index of each named ACL it uses.
//! - No panics on any input; the proptest in `tests.rs` feeds it noise.

mod acl;
mod cache;
pub mod cond;
pub mod cookie;
pub mod cpumap;
mod fcgi;
pub(crate) use fcgi::{App, Meta, Pairs};
pub use fcgi::{FcgiApp, FcgiLog, FcgiRule, FcgiRuleKind};
mod lexer;
pub(crate) mod mailers;

mod parse;
mod peers;
mod program;
mod resolvers;
pub(crate) mod rewrite;
pub(crate) mod ring;
mod tcpcheck;
mod tcpreq;
mod types;
mod values;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

pub use tcpcheck::{
    unhex_bytes, CheckStatus, CustomExpect, ExpectMatch, ExpectOpts, Info, Payload, StatusCode,
    TcpCheck, TcpCheckRule, TcpCheckStep, ERROR_STATUSES, OK_STATUSES, SSL3_HELLO_TIME_AT,
};
pub use types::*;

pub use parse::{
    agent_addr, parse_dynamic_server, parse_octal_mode, parse_sock_spec, quiet_seen,
    unix_owner_opt, unreachable_rules,
};
pub(crate) use parse::{tls_bind_option, TlsOptionsOf};
pub use peers::{local_peer_name, set_local_peer_arg, PeerDef, PeerListen, PeersSection};
pub use values::parse_bind_addrs;
pub(crate) use values::parse_time_unit;

/// Quotes `s` as one configuration word that the parser reads back exactly,
/// whatever it holds (spaces, quotes, `#`, `$`, backslashes, newlines). For
/// programs that generate configuration text, e.g. a `serve-files` root taken
/// from the command line.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            // Close the strong quote, add an escaped character, reopen.
            '\'' => out.push_str("'\\''"),
            '\n' => out.push_str("'\\n'"),
            '\r' => out.push_str("'\\r'"),
            _ => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Reads and parses several files in order (`ebb -f a -f b`). Sections do
/// not span files; `defaults` do carry over from one file to the next.
pub fn parse_files(paths: &[PathBuf]) -> Result<Config, Vec<ConfigError>> {
    let env = |name: &str| std::env::var(name).ok();
    let mut p = parse::Parser::new(&env);
    for path in paths {
        let name = path.display().to_string();
        match std::fs::read(path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => p.parse_text(&name, &text),
                Err(e) => {
                    let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
                    let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
                    p.error(
                        Loc {
                            file: Arc::from(name.as_str()),
                            line: u32::try_from(line).unwrap_or(u32::MAX),
                        },
                        "invalid UTF-8",
                    );
                }
            },
            Err(e) => p.error(
                Loc {
                    file: Arc::from(name.as_str()),
                    line: 0,
                },
                format!("cannot read configuration file: {e}"),
            ),
        }
    }
    p.finish()
}

/// Parses configuration text; `name` is used as the file name in errors.
pub fn parse_str(name: &str, text: &str) -> Result<Config, Vec<ConfigError>> {
    let env = |name: &str| std::env::var(name).ok();
    parse_str_with_env(name, text, &env)
}

/// As [`parse_str`], with environment variables looked up through `env`.
pub fn parse_str_with_env(
    name: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, Vec<ConfigError>> {
    let mut p = parse::Parser::new(env);
    p.parse_text(name, text);
    p.finish()
}
