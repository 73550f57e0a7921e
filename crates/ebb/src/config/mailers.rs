//! `mailers` sections (HAProxy 2.6's section 3.6) and the proxies'
//! `email-alert` lines that name them.
//!
//! ```text
//! mailers NAME
//!     mailer NAME IP:PORT        # an SMTP server (port required)
//!     timeout mail TIME          # the whole exchange's limit (10s)
//!
//! backend B
//!     email-alert mailers NAME   # all three of mailers, from and to
//!     email-alert from ADDR      # are needed, else HAProxy warns and
//!     email-alert to ADDR        # sends nothing
//!     email-alert level LEVEL    # alert (default) ... debug
//!     email-alert myhostname H   # the HELO name (default: the host's)
//! ```
//!
//! The proxy's settings are resolved against the sections once every file
//! is read ([`resolve`]): an unknown section is an error, as in HAProxy
//! ("unable to find mailers"). The top-level `mailers` module sends the
//! mail.

use std::net::SocketAddr;
use std::time::Duration;

use super::types::{EmailAlert, Loc, Proxy};

/// HAProxy's `DEF_MAILALERTTIME`: 10 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A `mailers` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MailersSection {
    pub name: String,
    pub loc: Loc,
    /// `mailer NAME IP:PORT` lines, in order.
    pub mailers: Vec<(String, SocketAddr)>,
    /// `timeout mail`.
    pub timeout: Duration,
}

/// Opens a section at its `mailers NAME` header.
pub(crate) fn open(
    known: &[MailersSection],
    w: &[String],
    loc: &Loc,
) -> Result<MailersSection, String> {
    let name = match w {
        [_] => return Err("missing name for mailers section".into()),
        [_, n] => n,
        _ => return Err("'mailers' takes one name".into()),
    };
    if !super::values::valid_name(name) {
        return Err(format!("invalid mailers section name '{name}'"));
    }
    if let Some(o) = known.iter().find(|m| &m.name == name) {
        return Err(format!(
            "mailers section '{name}' has the same name as another mailers section declared at {}",
            o.loc
        ));
    }
    Ok(MailersSection {
        name: name.clone(),
        loc: loc.clone(),
        mailers: Vec::new(),
        timeout: DEFAULT_TIMEOUT,
    })
}

/// One line of a `mailers` section.
pub(crate) fn mailers_kw(m: &mut MailersSection, w: &[String]) -> Result<(), String> {
    match w[0].as_str() {
        "mailer" => {
            let (name, addr) = match w {
                [_, n, a] => (n, a),
                [_, _, _, x, ..] => {
                    return Err(format!("'mailer': unexpected word '{x}' after the address"))
                }
                _ => return Err("'mailer' expects <name> and <addr>:<port> as arguments".into()),
            };
            if !super::values::valid_name(name) {
                return Err(format!("invalid mailer name '{name}'"));
            }
            let a = super::values::parse_bind_addrs(addr)
                .map_err(|e| format!("'mailer {name}': {e}"))?;
            match a.as_slice() {
                [one] if one.port() != 0 && !one.ip().is_unspecified() => {
                    m.mailers.push((name.clone(), *one))
                }
                [one] if one.port() == 0 => {
                    return Err(format!("'mailer {name}': a port is required in '{addr}'"))
                }
                [_] => {
                    return Err(format!(
                        "'mailer {name}': '{addr}' is not an address to connect to"
                    ))
                }
                _ => {
                    return Err(format!(
                        "'mailer {name}': one address and one port expected"
                    ))
                }
            }
        }
        "timeout" => match w {
            [_, k, t] if k == "mail" => {
                let d = super::values::parse_time(t).map_err(|e| format!("'timeout mail': {e}"))?;
                if d.as_millis() > i32::MAX as u128 {
                    return Err(format!(
                        "timer overflow in argument <{t}> to <timeout mail>, maximum value is 2147483647 ms (~24.8 days)"
                    ));
                }
                m.timeout = d;
            }
            [_, k, ..] if k == "mail" => return Err("'timeout mail' expects one <time>".into()),
            [_, k, ..] => {
                return Err(format!(
                    "'timeout' expects 'mail' and <time> as arguments got '{k}'"
                ))
            }
            _ => return Err("'timeout' expects 'mail' and <time> as arguments".into()),
        },
        k => return Err(format!("unknown keyword '{k}' in 'mailers' section")),
    }
    Ok(())
}

/// One `email-alert` line of a proxy (or defaults) section.
pub(crate) fn email_alert_kw(e: &mut EmailAlert, w: &[String]) -> Result<(), String> {
    let (what, v) = match w {
        [_] => return Err("missing argument after 'email-alert'".into()),
        [_, k] => return Err(format!("missing argument after 'email-alert {k}'")),
        [_, k, v] => (k.as_str(), v),
        [_, k, _, x, ..] => {
            return Err(format!(
                "'email-alert {k}' takes one argument (unexpected '{x}')"
            ))
        }
        [] => return Err("missing argument after 'email-alert'".into()),
    };
    match what {
        "from" => e.from = Some(v.clone()),
        "to" => e.to = Some(v.clone()),
        "mailers" => e.mailers = Some(v.clone()),
        "myhostname" => e.myhostname = Some(v.clone()),
        "level" => {
            e.level = match super::parse::log_level_num(v) {
                Some(l) => l,
                None => return Err(format!("unknown log level '{v}' after 'level'")),
            }
        }
        k => return Err(format!("email-alert: unknown argument '{k}'")),
    }
    e.set = true;
    Ok(())
}

/// Resolves each proxy's `email-alert` settings against the sections:
/// an error (at the proxy's header) for an unknown section. Settings that
/// lack one of mailers/from/to stay unresolved: see [`ignored`].
pub(crate) fn resolve(sections: &[MailersSection], proxies: &mut [Proxy]) -> Vec<(Loc, String)> {
    let mut errs = Vec::new();
    for p in proxies.iter_mut() {
        let e = &mut p.email_alert;
        let (true, Some(name), Some(_), Some(_)) = (e.set, &e.mailers, &e.from, &e.to) else {
            continue;
        };
        match sections.iter().find(|s| &s.name == name) {
            Some(s) => {
                e.targets = s.mailers.iter().map(|m| m.1).collect();
                e.timeout = s.timeout;
            }
            None => errs.push((
                p.loc.clone(),
                format!("Proxy '{}': unable to find mailers '{name}'.", p.name),
            )),
        }
    }
    errs
}

/// HAProxy's warning for a proxy whose `email-alert` lines lack one of
/// mailers, from and to: none is sent.
pub fn ignored(p: &Proxy) -> Option<String> {
    let e = &p.email_alert;
    (e.set && (e.mailers.is_none() || e.from.is_none() || e.to.is_none())).then(|| {
        format!(
            "'email-alert' will be ignored for {} '{}' (the presence any of 'email-alert from', 'email-alert level' 'email-alert mailers', 'email-alert myhostname', or 'email-alert to' requires each of 'email-alert from', 'email-alert mailers' and 'email-alert to' to be present).",
            p.kind.name(),
            p.name
        )
    })
}
