//! Rewriting actions of `http-request`, `http-response` and
//! `http-after-response` rules as the configuration states them: their
//! parsing and the checks made at start. Their execution, in HAProxy's
//! order, is the `rewrite` module's.

use regex::bytes::Regex;

use super::HeaderEdit;
use crate::sample::{LogFormat, Scope};

/// A regular expression with its source (equality and messages use it).
#[derive(Clone, Debug)]
pub struct Re {
    pub src: String,
    pub re: Regex,
}

impl PartialEq for Re {
    fn eq(&self, o: &Re) -> bool {
        self.src == o.src
    }
}
impl Eq for Re {}

impl Re {
    pub fn new(src: &str) -> Result<Re, String> {
        Ok(Re {
            src: src.to_string(),
            re: Regex::new(src).map_err(|e| format!("invalid regular expression '{src}': {e}"))?,
        })
    }
}

/// How `del-header NAME -m METH` compares field names (ASCII case is
/// ignored, as header names are case-insensitive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameMatch {
    Beg(String),
    End(String),
    Sub(String),
    Reg(Re),
}

impl NameMatch {
    pub(crate) fn matches(&self, name: &[u8]) -> bool {
        let lower = name.to_ascii_lowercase();
        match self {
            NameMatch::Beg(p) => lower.starts_with(p.as_bytes()),
            NameMatch::End(p) => lower.ends_with(p.as_bytes()),
            NameMatch::Sub(p) => lower.windows(p.len().max(1)).any(|w| w == p.as_bytes()),
            NameMatch::Reg(r) => r.re.is_match(name),
        }
    }
}

/// The part of the request target a URI action works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UriPart {
    /// From the first `/` after an optional scheme and authority, to
    /// before the `?`.
    Path,
    /// The path and its query string.
    PathQ,
    /// After the first `?`.
    Query,
    /// The whole target as sent.
    Uri,
}

/// A rewriting action (besides `set-header`/`add-header`/`del-header`,
/// which are [`HeaderEdit`]s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// `del-header NAME -m beg|end|sub|reg` (`-m str` is a [`HeaderEdit`]).
    DelMatching(NameMatch),
    /// `replace-header NAME REGEX FMT` (whole values) or `replace-value`
    /// (`each_value`: every comma-separated value on its own).
    Replace {
        name: String,
        re: Re,
        fmt: LogFormat,
        each_value: bool,
    },
    /// `set-path`, `set-pathq`, `set-query`, `set-uri`.
    SetUri { part: UriPart, fmt: LogFormat },
    /// `replace-path`, `replace-pathq`, `replace-uri`.
    ReplaceUri {
        part: UriPart,
        re: Re,
        fmt: LogFormat,
    },
    /// `set-method FMT`.
    SetMethod(LogFormat),
    /// `set-status CODE [reason STR]` (responses).
    SetStatus { code: u16, reason: Option<String> },
}

/// Fields a response rule may not touch: ebb writes them itself.
pub(crate) fn reserved(name: &str) -> bool {
    ["content-length", "transfer-encoding", "connection"]
        .iter()
        .any(|r| name.eq_ignore_ascii_case(r))
}

/// Parses a rewriting action of `kw` (`http-request`, `http-response`,
/// `http-after-response`); `Ok(None)` when `action` is not one.
pub fn parse(
    kw: &str,
    action: &str,
    args: &[String],
    scope: Scope,
) -> Result<Option<Rewrite>, String> {
    let request = kw == "http-request";
    let fmt =
        |s: &str| LogFormat::parse_http(s, scope).map_err(|e| format!("'{kw} {action}': {e}"));
    let name_ok = |n: &str| -> Result<String, String> {
        if n.is_empty() || !crate::net::is_token(n) {
            return Err(format!("'{kw} {action}': invalid header name '{n}'"));
        }
        if !request && reserved(n) {
            return Err(format!(
                "'{kw} {action} {n}': ebb writes this field itself; response rules cannot change it"
            ));
        }
        Ok(n.to_string())
    };
    let r = match action {
        "del-header" => match args {
            [n, m, meth] if m == "-m" => {
                let p = n.to_ascii_lowercase();
                match meth.as_str() {
                    // Exact: an ordinary del-header (the caller's).
                    "str" => return Ok(None),
                    "beg" => Rewrite::DelMatching(NameMatch::Beg(p)),
                    "end" => Rewrite::DelMatching(NameMatch::End(p)),
                    "sub" => Rewrite::DelMatching(NameMatch::Sub(p)),
                    "reg" => Rewrite::DelMatching(NameMatch::Reg(Re::new(&format!("(?i){n}"))?)),
                    o => {
                        return Err(format!(
                            "'{kw} del-header': unknown matching method '{o}' (supported: str, beg, end, sub, reg)"
                        ))
                    }
                }
            }
            _ => return Ok(None),
        },
        // HAProxy 2.6 takes an empty word ("") as a missing argument.
        "replace-header" | "replace-value" => match args {
            [n, re, f] if !re.is_empty() && !f.is_empty() => Rewrite::Replace {
                name: name_ok(n)?,
                re: Re::new(re)?,
                fmt: fmt(f)?,
                each_value: action == "replace-value",
            },
            _ => return Err(format!("'{kw} {action}' expects NAME REGEX FORMAT")),
        },
        "set-path" | "set-pathq" | "set-query" | "set-uri" if request => {
            let part = match action {
                "set-path" => UriPart::Path,
                "set-pathq" => UriPart::PathQ,
                "set-query" => UriPart::Query,
                _ => UriPart::Uri,
            };
            match args {
                [f] if !f.is_empty() => Rewrite::SetUri { part, fmt: fmt(f)? },
                _ => return Err(format!("'{kw} {action}' expects one format string")),
            }
        }
        "replace-path" | "replace-pathq" | "replace-uri" if request => {
            let part = match action {
                "replace-path" => UriPart::Path,
                "replace-pathq" => UriPart::PathQ,
                _ => UriPart::Uri,
            };
            match args {
                [re, f] if !re.is_empty() && !f.is_empty() => Rewrite::ReplaceUri {
                    part,
                    re: Re::new(re)?,
                    fmt: fmt(f)?,
                },
                _ => return Err(format!("'{kw} {action}' expects REGEX FORMAT")),
            }
        }
        "set-method" if request => match args {
            [f] if !f.is_empty() => Rewrite::SetMethod(fmt(f)?),
            _ => return Err(format!("'{kw} set-method' expects one format string")),
        },
        "set-status" if !request => {
            let code = match args.first().map(|c| c.parse::<u16>()) {
                Some(Ok(c)) if (100..=999).contains(&c) => c,
                _ => {
                    return Err(format!(
                        "'{kw} set-status' expects a status code between 100 and 999"
                    ))
                }
            };
            let reason = match &args[1..] {
                [] => None,
                [k, r] if k == "reason" => {
                    if r.bytes().any(|c| matches!(c, b'\r' | b'\n' | 0)) {
                        return Err(format!("'{kw} set-status': invalid reason '{r}'"));
                    }
                    Some(r.clone())
                }
                [x, ..] => {
                    return Err(format!(
                        "unexpected '{x}' after '{kw} set-status {code}' (supported: reason STR)"
                    ))
                }
            };
            Rewrite::SetStatus { code, reason }
        }
        _ => return Ok(None),
    };
    Ok(Some(r))
}

/// Checks a header edit of a response rule: the fields ebb writes itself
/// are refused.
pub fn check_response_edit(kw: &str, e: &HeaderEdit) -> Result<(), String> {
    if reserved(&e.name) {
        return Err(format!(
            "'{kw}' on '{}': ebb writes this field itself; response rules cannot change it",
            e.name
        ));
    }
    Ok(())
}
