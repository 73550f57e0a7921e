//! `fcgi-app NAME` sections (HAProxy 2.6 configuration.txt section 10):
//! the FastCGI application a backend's `proto fcgi` servers run
//! (`use-fcgi-app NAME`).
//!
//! A section is read and checked as HAProxy reads it (unknown keywords,
//! missing arguments, ACLs, conditions, the regular expression, a
//! document root) and kept whole: its rules' values are log-format
//! strings that HAProxy, and ebb, parse for each backend that uses the
//! application (`proxy::fcgi`), so an unused section's values are not
//! parsed. A new section starts with HAProxy's implicit rules: `set-param
//! REMOTE_USER %[http_auth_user]`, `set-param AUTH_TYPE
//! %[http_auth_type]`, and the hop-by-hop fields, `Authorization`,
//! `Proxy`, `Proxy-Authorization`, `Proxy-Authenticate`, `TE`,
//! `Trailers`, `Transfer-Encoding` and `Upgrade` hidden (a `pass-header`
//! passes one).

use super::acl::{declare, parse_condition};
use super::types::{Acl, Condition, ConfigError, Loc, LogTarget};
use super::values::valid_name;

/// An `fcgi-app` section.
#[derive(Clone, Debug)]
pub struct FcgiApp {
    pub name: String,
    pub loc: Loc,
    pub docroot: Option<String>,
    /// `index NAME`.
    pub index: Option<String>,
    /// `path-info REGEX` (checked when read).
    pub path_info: Option<String>,
    /// The section's private ACLs, for its rules' conditions.
    pub acls: Vec<Acl>,
    /// `set-param` and `pass-header` rules (and the implicit ones), in
    /// order.
    pub rules: Vec<FcgiRule>,
    /// `option keep-conn` (on unless `no option keep-conn`).
    pub keep_conn: bool,
    /// `option get-values`.
    pub get_values: bool,
    /// `option mpxs-conns`.
    pub mpxs_conns: bool,
    /// `option max-reqs N` (1 by default).
    pub max_reqs: u32,
    /// `log-stderr` lines: where the application's error stream goes.
    pub log_stderr: Vec<FcgiLog>,
}

/// A `log-stderr` line.
#[derive(Clone, Debug)]
pub enum FcgiLog {
    /// `log-stderr global`: the global `log` targets.
    Global,
    Target(LogTarget),
}

/// What a rule does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FcgiRuleKind {
    /// `set-param NAME FMT`: NAME as HAProxy keeps it (letters and
    /// digits lower-cased, other bytes `_`), the log-format text.
    SetParam { name: String, value: String },
    /// `pass-header NAME` (lower-cased).
    PassHeader(String),
    /// An implicit rule hiding a field (lower-case name).
    HideHeader(String),
}

/// A rule of the section, with its condition and line.
#[derive(Clone, Debug)]
pub struct FcgiRule {
    pub kind: FcgiRuleKind,
    pub cond: Option<Condition>,
    pub loc: Loc,
}

/// HAProxy's name for a `set-param` (`fcgi_param_name` less its prefix).
fn param_rule_name(n: &str) -> String {
    n.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                b.to_ascii_lowercase() as char
            } else {
                '_'
            }
        })
        .collect()
}

/// The fields HAProxy hides from every application.
const HIDDEN: &[&str] = &[
    "connection",
    "keep-alive",
    "authorization",
    "proxy",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
];

/// Opens an `fcgi-app NAME` section.
pub(super) fn open(apps: &[FcgiApp], words: &[String], loc: &Loc) -> Result<FcgiApp, String> {
    let name = match words {
        [_, n] => n,
        [_] => return Err("'fcgi-app' expects <name> as argument".to_string()),
        _ => return Err("'fcgi-app' takes one name".to_string()),
    };
    if !valid_name(name) {
        return Err(format!(
            "invalid fcgi-app name '{name}' (letters, digits, '-', '_', '.' and ':' only)"
        ));
    }
    if let Some(a) = apps.iter().find(|a| &a.name == name) {
        return Err(format!(
            "fcgi-app section '{name}' has the same name as another one declared at {}",
            a.loc
        ));
    }
    let rule = |kind| FcgiRule {
        kind,
        cond: None,
        loc: loc.clone(),
    };
    let mut rules = vec![
        rule(FcgiRuleKind::SetParam {
            name: "remote_user".into(),
            value: "%[http_auth_user]".into(),
        }),
        rule(FcgiRuleKind::SetParam {
            name: "auth_type".into(),
            value: "%[http_auth_type]".into(),
        }),
    ];
    rules.extend(
        HIDDEN
            .iter()
            .map(|h| rule(FcgiRuleKind::HideHeader(h.to_string()))),
    );
    Ok(FcgiApp {
        name: name.clone(),
        loc: loc.clone(),
        docroot: None,
        index: None,
        path_info: None,
        acls: Vec::new(),
        rules,
        keep_conn: true,
        get_values: false,
        mpxs_conns: false,
        max_reqs: 1,
        log_stderr: Vec::new(),
    })
}

/// One keyword of an `fcgi-app` section. `log_target` reads a
/// `log-stderr` target as the `log` keyword does.
pub(super) fn fcgi_kw(
    app: &mut FcgiApp,
    words: &[String],
    loc: &Loc,
    log_target: &dyn Fn(&[String]) -> Result<LogTarget, String>,
) -> Result<(), String> {
    let (no, w) = match words[0].as_str() {
        "no" => (true, &words[1..]),
        _ => (false, words),
    };
    let Some(kw) = w.first().map(String::as_str) else {
        return Err("'no' expects a keyword".to_string());
    };
    if no && kw != "option" && kw != "log-stderr" {
        return Err(format!(
            "'no' is not supported for '{kw}' in an fcgi-app section"
        ));
    }
    let one = |what: &str| -> Result<&String, String> {
        match w {
            [_, v] => Ok(v),
            [_] => Err(format!("'{kw}' expects <{what}> as argument")),
            _ => Err(format!("'{kw}' takes one argument")),
        }
    };
    match kw {
        "docroot" => app.docroot = Some(one("path")?.clone()),
        "index" => app.index = Some(one("filename")?.clone()),
        "path-info" => {
            let re = one("regex")?;
            regex::bytes::Regex::new(re)
                .map_err(|e| format!("invalid regular expression '{re}': {e}"))?;
            app.path_info = Some(re.clone());
        }
        "acl" => {
            let name = w
                .get(1)
                .ok_or_else(|| "'acl' expects a name and a criterion".to_string())?;
            if name.eq_ignore_ascii_case("or") {
                return Err(format!(
                    "acl name '{name}' will never match ('or' expresses a disjunction in a condition)"
                ));
            }
            declare(&mut app.acls, name, &w[2..], loc)?;
        }
        "set-param" | "pass-header" => {
            let nargs = if kw == "set-param" { 3 } else { 2 };
            if w.len() < nargs {
                return Err(if kw == "set-param" {
                    "'set-param' expects <name> and <value> as arguments".to_string()
                } else {
                    "'pass-header' expects <name> as argument".to_string()
                });
            }
            // HAProxy reads the value (log-format) only for a backend that
            // uses the application: like HAProxy, an unused section's
            // values are not parsed.
            let cond = match w.get(nargs).map(String::as_str) {
                None => None,
                Some(c @ ("if" | "unless")) => Some(parse_condition(
                    c == "unless",
                    &w[nargs + 1..],
                    &app.acls,
                    loc,
                )?),
                Some(x) => {
                    return Err(format!(
                        "'{kw}': unexpected '{x}' (expects 'if' or 'unless' and a condition)"
                    ))
                }
            };
            let kind = if kw == "set-param" {
                FcgiRuleKind::SetParam {
                    name: param_rule_name(&w[1]),
                    value: w[2].clone(),
                }
            } else {
                FcgiRuleKind::PassHeader(w[1].to_ascii_lowercase())
            };
            app.rules.push(FcgiRule {
                kind,
                cond,
                loc: loc.clone(),
            });
        }
        "option" => {
            let opt = w
                .get(1)
                .ok_or_else(|| "'option' expects an option name".to_string())?;
            match opt.as_str() {
                "keep-conn" | "get-values" | "mpxs-conns" => {
                    if w.len() > 2 {
                        return Err(format!("'option {opt}' takes no argument"));
                    }
                    *match opt.as_str() {
                        "keep-conn" => &mut app.keep_conn,
                        "get-values" => &mut app.get_values,
                        _ => &mut app.mpxs_conns,
                    } = !no;
                }
                "max-reqs" => {
                    if no {
                        return Err("negation is not supported for option 'max-reqs'".to_string());
                    }
                    let [_, _, v] = w else {
                        return Err("option 'max-reqs' expects one integer argument".to_string());
                    };
                    match v.parse::<u64>() {
                        Ok(n) if n > 0 => app.max_reqs = u32::try_from(n).unwrap_or(u32::MAX),
                        _ => {
                            return Err(format!(
                                "option 'max-reqs' expects a strictly positive integer argument, got '{v}'"
                            ))
                        }
                    }
                }
                o => {
                    return Err(format!(
                        "unknown option '{o}' in an fcgi-app section (supported: keep-conn, get-values, mpxs-conns, max-reqs)"
                    ))
                }
            }
        }
        "log-stderr" => {
            if no {
                if w.len() > 1 {
                    return Err("'no log-stderr' takes no argument".to_string());
                }
                app.log_stderr.clear();
            } else if w.get(1).map(String::as_str) == Some("global") {
                if w.len() > 2 {
                    return Err("'log-stderr global' takes no argument".to_string());
                }
                app.log_stderr.push(FcgiLog::Global);
            } else {
                app.log_stderr.push(FcgiLog::Target(log_target(&w[1..])?));
            }
        }
        o => {
            return Err(format!(
                "unknown keyword '{o}' in 'fcgi-app' section (supported: docroot, index, path-info, acl, set-param, pass-header, option, log-stderr)"
            ))
        }
    }
    Ok(())
}

/// The checks HAProxy makes once the configuration is read: every
/// application has a document root; without `mpxs-conns` nor
/// `get-values` an application takes one request per connection
/// (HAProxy warns that it ignores `max-reqs`).
pub(super) fn check(apps: &mut [FcgiApp]) -> Vec<ConfigError> {
    for a in apps.iter_mut() {
        if !a.mpxs_conns && !a.get_values {
            a.max_reqs = 1;
        }
    }
    apps.iter()
        .filter(|a| a.docroot.as_deref().is_none_or(str::is_empty))
        .map(|a| ConfigError {
            loc: a.loc.clone(),
            message: format!("fcgi-app '{}': no docroot configured", a.name),
        })
        .collect()
}

/// What an `fcgi-app` section says of each request's variables (the
/// part its connections need; its rules run in the stream).
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) name: String,
    pub(crate) docroot: Vec<u8>,
    pub(crate) index: Option<Vec<u8>>,
    pub(crate) path_info: Option<regex::bytes::Regex>,
    /// `option keep-conn` (on by default): BEGIN_REQUEST asks the
    /// application to keep the connection.
    pub(crate) keep_conn: bool,
    /// `option get-values`: GET_VALUES opens each connection.
    pub(crate) get_values: bool,
    /// `option mpxs-conns`: requests share a connection.
    pub(crate) mpxs_conns: bool,
    /// `option max-reqs N` (1 unless `mpxs-conns` or `get-values`).
    pub(crate) max_reqs: u32,
}

/// What the stream says of its request beyond the head it writes: its
/// `fcgi-app` rules' outcome and its connection's addresses.
#[derive(Debug, Default, Clone)]
pub(crate) struct Meta {
    /// The `set-param` values that apply, by name (lower-cased, bytes
    /// other than letters and digits as `_`), in name order, no empty one.
    pub(crate) set: Pairs,
    /// Field names (lower-case) not passed: the hop-by-hop ones,
    /// `Authorization` and the others HAProxy hides, less those a
    /// `pass-header` rule passes.
    pub(crate) hide: Vec<Vec<u8>>,
    /// `http-send-name-header`'s field name (lower-case): it goes after
    /// the `set-param` values, as HAProxy adds it.
    pub(crate) send_name: Option<Vec<u8>>,
    /// The client's address (REMOTE_ADDR, REMOTE_PORT).
    pub(crate) src: Option<std::net::SocketAddr>,
    /// The address the client reached (SERVER_PORT; SERVER_NAME without
    /// `Host`).
    pub(crate) dst: Option<std::net::SocketAddr>,
    /// The client's connection is TLS (HTTPS=on).
    pub(crate) https: bool,
    /// The client spoke HTTP/2 (SERVER_PROTOCOL HTTP/2.0).
    pub(crate) h2: bool,
}

/// Name-value pairs, names encoded.
pub(crate) type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
