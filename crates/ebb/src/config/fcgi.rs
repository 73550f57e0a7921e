//! `fcgi-app NAME` sections (HAProxy 2.6 configuration.txt section 10).
//!
//! ebb has no FastCGI client. A section that no backend uses has no
//! behaviour in HAProxy either, so ebb reads it and checks its syntax as
//! HAProxy does (unknown keywords, missing arguments, ACLs, conditions,
//! regular expressions, a document root), and refuses
//! what would give it a behaviour: `use-fcgi-app` in a proxy and `proto
//! fcgi` on a server (in `parse/proxy.rs` and `parse/server.rs`).

use super::acl::{declare, parse_condition};
use super::types::{Acl, ConfigError, Loc};
use super::values::valid_name;

/// What ebb keeps of a section: enough for the checks made once the whole
/// configuration is read.
#[derive(Debug)]
pub(super) struct FcgiApp {
    pub name: String,
    pub loc: Loc,
    docroot: Option<String>,
    /// The section's private ACLs, for its `set-param`/`pass-header`
    /// conditions.
    acls: Vec<Acl>,
}

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
    Ok(FcgiApp {
        name: name.clone(),
        loc: loc.clone(),
        docroot: None,
        acls: Vec::new(),
    })
}

/// One keyword of an `fcgi-app` section. `log_target` checks a
/// `log-stderr` target as the `log` keyword does.
pub(super) fn fcgi_kw(
    app: &mut FcgiApp,
    words: &[String],
    loc: &Loc,
    log_target: &dyn Fn(&[String]) -> Result<(), String>,
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
        "index" => {
            one("filename")?;
        }
        "path-info" => {
            let re = one("regex")?;
            regex::bytes::Regex::new(re)
                .map_err(|e| format!("invalid regular expression '{re}': {e}"))?;
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
            // uses the application, which ebb refuses: like HAProxy, an
            // unused section's values are not parsed.
            match w.get(nargs).map(String::as_str) {
                None => {}
                Some(c @ ("if" | "unless")) => {
                    parse_condition(c == "unless", &w[nargs + 1..], &app.acls, loc)?;
                }
                Some(x) => {
                    return Err(format!(
                        "'{kw}': unexpected '{x}' (expects 'if' or 'unless' and a condition)"
                    ))
                }
            }
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
                }
                "max-reqs" => {
                    if no {
                        return Err("negation is not supported for option 'max-reqs'".to_string());
                    }
                    let [_, _, v] = w else {
                        return Err("option 'max-reqs' expects one integer argument".to_string());
                    };
                    match v.parse::<u64>() {
                        Ok(n) if n > 0 => {}
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
            } else if w.get(1).map(String::as_str) == Some("global") {
                if w.len() > 2 {
                    return Err("'log-stderr global' takes no argument".to_string());
                }
            } else {
                log_target(&w[1..])?;
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

/// The check HAProxy makes once the configuration is read: every
/// application has a document root.
pub(super) fn check(apps: &[FcgiApp]) -> Vec<ConfigError> {
    apps.iter()
        .filter(|a| a.docroot.is_none())
        .map(|a| ConfigError {
            loc: a.loc.clone(),
            message: format!("fcgi-app '{}': no docroot configured", a.name),
        })
        .collect()
}
