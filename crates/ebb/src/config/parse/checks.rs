//! `http-check` lines: the requests health checks send (`send`; the first
//! one completes the request `option httpchk` describes), what they expect
//! of the answer (`expect`), where they connect (`connect`), and variables
//! and comments between those steps.
//!
//! The steps of a section run in order; HAProxy's rules on that order
//! hold here: a `connect` must come first when there is one, and a
//! `send` must be followed by an `expect` before the next `connect`. A
//! section's own rules replace those of its defaults. `tcp-check` lines
//! are parsed in `config::tcpcheck`; `http-check connect` reuses that
//! parser.

use super::arg;
use super::rules::{is_var_action, parse_var_action};
use crate::config::types::*;
use crate::config::values::*;
use crate::sample::{LogFormat as LfFormat, Scope, VarAction};

/// An `http-check` line of a backend (or defaults) section: its step
/// added to the section's health check rules.
pub(super) fn http_check_kw(px: &mut Proxy, w: &[String], loc: &Loc) -> Result<(), String> {
    match w.get(1).map(String::as_str) {
        Some("expect") => {
            let e = parse_http_expect(&w[2..], loc)?;
            px.http_check.own_rules();
            push_http_rule(&mut px.http_check, HttpCheckStep::Expect(e.0), e.1, loc)?;
        }
        Some("connect") => {
            // The words of `tcp-check connect`, with its meaning.
            let (cc, comment) = crate::config::tcpcheck::parse_connect(&w[2..], true)?;
            px.http_check.own_rules();
            push_http_rule(&mut px.http_check, HttpCheckStep::Connect(cc), comment, loc)?;
        }
        Some("comment") => {
            let [c] = &w[2..] else {
                return Err("'http-check comment' expects one message".to_string());
            };
            px.http_check.own_rules();
            push_http_rule(&mut px.http_check, HttpCheckStep::Comment, Some(c.clone()), loc)?;
        }
        Some("send") => {
            // http-check send [meth M] [uri U] [ver V] [hdr N V]*
            // [body STR] (HAProxy 2.2+). The first completes the
            // request of this section's `option httpchk` (its
            // method, URI and version unless given here; its
            // headers and body replaced), which it also enables;
            // the next ones are requests of their own.
            let hc = &mut px.http_check;
            hc.own_rules();
            let first = !hc.explicit_send;
            let mut req = HttpSend {
                method: "OPTIONS".into(),
                uri: "/".into(),
                version: "HTTP/1.0".into(),
                headers: Vec::new(),
                body: None,
                uri_lf: false,
                body_lf: false,
            };
            if first {
                req.method = std::mem::take(&mut hc.method);
                req.uri = std::mem::take(&mut hc.uri);
                req.version = std::mem::take(&mut hc.version);
                req.body = hc.body.take();
                req.uri_lf = hc.uri_lf;
                req.body_lf = hc.body_lf;
            }
            let comment = {
                let mut ws = w[2..].to_vec();
                match ws.iter().position(|x| x == "comment") {
                    Some(i) if i + 1 < ws.len() => {
                        let c = ws.remove(i + 1);
                        ws.remove(i);
                        parse_http_send(&ws, &mut req)?;
                        Some(c)
                    }
                    Some(_) => return Err("'comment' expects a message".into()),
                    None => {
                        parse_http_send(&ws, &mut req)?;
                        None
                    }
                }
            };
            if first {
                hc.method = req.method;
                hc.uri = req.uri;
                hc.version = req.version;
                hc.headers = req.headers;
                hc.body = req.body;
                hc.uri_lf = req.uri_lf;
                hc.body_lf = req.body_lf;
                hc.explicit_send = true;
                push_http_rule(hc, HttpCheckStep::Send(None), comment, loc)?;
            } else {
                push_http_rule(hc, HttpCheckStep::Send(Some(req)), comment, loc)?;
            }
            hc.enabled = true;
        }
        Some("send-state") => {
            if w.len() > 2 {
                return Err("'http-check send-state' takes no argument".into());
            }
            px.http_check.send_state = true;
        }
        Some("disable-on-404") => {
            if w.len() > 2 {
                return Err("'http-check disable-on-404' takes no argument".into());
            }
            px.http_check.disable_404 = true;
        }
        Some(a) if is_var_action(a) => {
            // `http-check set-var(VAR) EXPR`, `set-var-fmt(VAR)
            // FMT`, `unset-var(VAR)`; HAProxy's scopes for checks:
            // proc, sess, check.
            let va = check_var_action("http-check", a, &w[2..])?;
            px.http_check.own_rules();
            push_http_rule(&mut px.http_check, HttpCheckStep::Var(va), None, loc)?;
        }
        Some(o) => {
            return Err(format!(
            "unsupported 'http-check {o}' (supported: http-check comment, connect, disable-on-404, send, send-state, expect, set-var, unset-var)"
        ))
        }
        None => return Err("'http-check' expects comment, connect, disable-on-404, send, send-state, expect, set-var or unset-var".to_string()),
    }
    Ok(())
}

/// `KW set-var(VAR) EXPR`, `set-var-fmt(VAR) FMT`, `unset-var(VAR)` of
/// `http-check` and `tcp-check` (`a`: the action word), on the scopes
/// HAProxy allows in checks: proc, sess, check.
pub(super) fn check_var_action(kw: &str, a: &str, rest: &[String]) -> Result<VarAction, String> {
    let va = parse_var_action(kw, a, rest, Scope::Response)?;
    let r = match &va {
        VarAction::Set(r, _) | VarAction::SetFmt(r, _) | VarAction::Unset(r) => r,
    };
    use crate::sample::vars::VarScope as V;
    if !matches!(r.scope, V::Proc | V::Sess | V::Check) {
        return Err(format!(
            "'{kw} {a}': the scopes allowed for {kw} are proc, sess and check"
        ));
    }
    Ok(va)
}

/// Adds an `http-check` rule: a `connect` must start the rules when there
/// is one (comments aside), as HAProxy requires.
fn push_http_rule(
    hc: &mut HttpCheck,
    step: HttpCheckStep,
    comment: Option<String>,
    loc: &Loc,
) -> Result<(), String> {
    // A `set-var`, `unset-var` or comment may come before the first
    // connect (HAProxy's rule).
    let first = hc
        .rules
        .iter()
        .find(|r| !matches!(r.step, HttpCheckStep::Comment | HttpCheckStep::Var(_)));
    if matches!(step, HttpCheckStep::Connect(_))
        && first.is_some_and(|r| !matches!(r.step, HttpCheckStep::Connect(_)))
    {
        return Err(
            "first step MUST also be a 'connect' when there is a 'connect' step in the http-check ruleset"
                .into(),
        );
    }
    let last = hc
        .rules
        .iter()
        .rfind(|r| !matches!(r.step, HttpCheckStep::Comment));
    if matches!(step, HttpCheckStep::Connect(_))
        && last.is_some_and(|r| matches!(r.step, HttpCheckStep::Send(_)))
    {
        // HAProxy's refusal: the answer to that request would be read by
        // nothing.
        return Err(
            "'http-check connect': unable to add http-check connect rule (missing expect rule after the previous 'send')"
                .into(),
        );
    }
    hc.rules.push(HttpCheckRule {
        step,
        comment,
        loc: loc.clone(),
    });
    Ok(())
}

/// A log-format string of `http-check send`, compiled as the checks
/// evaluate it (no request; the last answer, variables, names).
fn check_fmt(v: &str, what: &str) -> Result<(), String> {
    LfFormat::parse(v, Scope::Response)
        .map(|_| ())
        .map_err(|e| format!("'http-check send {what}': {e}"))
}

/// The words of `http-check send` after `send`.
fn parse_http_send(w: &[String], req: &mut HttpSend) -> Result<(), String> {
    let mut i = 0;
    let mut headers_given = false;
    while i < w.len() {
        let opt = w[i].as_str();
        let v = arg(w, i + 1, opt)
            .map_err(|_| format!("'http-check send' option '{opt}' expects a value"))?;
        match opt {
            "meth" => {
                if !is_token(v) {
                    return Err(format!("invalid HTTP method '{v}'"));
                }
                req.method = v.to_string();
            }
            "uri" => {
                if !v.starts_with('/') && v != "*" {
                    return Err(format!("'http-check send' URI '{v}' must start with '/'"));
                }
                req.uri = v.to_string();
                req.uri_lf = false;
            }
            "uri-lf" => {
                check_fmt(v, "uri-lf")?;
                req.uri = v.to_string();
                req.uri_lf = true;
            }
            "body-lf" => {
                check_fmt(v, "body-lf")?;
                req.body = Some(v.to_string());
                req.body_lf = true;
            }
            "ver" => req.version = header_value(v)?,
            "hdr" => {
                let value =
                    arg(w, i + 2, "hdr").map_err(|_| "'hdr' expects NAME VALUE".to_string())?;
                if !headers_given {
                    req.headers.clear();
                    headers_given = true;
                }
                let value = header_value(value)?;
                check_fmt(&value, "hdr")?;
                req.headers.push((header_name(v)?, value));
                i += 1;
            }
            "body" => {
                req.body = Some(v.to_string());
                req.body_lf = false;
            }
            o => {
                return Err(format!(
                    "unsupported 'http-check send' option '{o}' (supported: meth, uri, uri-lf, ver, hdr, body, body-lf, comment)"
                ))
            }
        }
        i += 2;
    }
    Ok(())
}

/// `http-check expect [options] [!] MATCH PATTERN`, its options in any
/// order around the match. Returns the expect and its comment.
fn parse_http_expect(w: &[String], loc: &Loc) -> Result<(HttpExpect, Option<String>), String> {
    use crate::config::CheckStatus::*;
    let mut e = HttpExpect {
        negate: false,
        kind: ExpectKind::Status(Vec::new()),
        loc: loc.clone(),
        min_recv: None,
        ok_status: L7Ok,
        error_status: None,
        tout_status: L7Tout,
        on_success: None,
        on_error: None,
        status_code: None,
    };
    let (mut comment, mut kind) = (None, None);
    let mut i = 0;
    let pick = crate::config::CheckStatus::parse;
    while let Some(a) = w.get(i).map(String::as_str) {
        let val = || arg(w, i + 1, a).map_err(|_| format!("'{a}' expects a value"));
        match a {
            "min-recv" => {
                let v = val()?;
                let n: i64 = v
                    .parse()
                    .map_err(|_| format!("'min-recv': invalid number '{v}'"))?;
                e.min_recv = usize::try_from(n).ok();
            }
            "comment" => comment = Some(val()?.to_string()),
            // L7OKC: a conditional pass (the server goes NOLB), also
            // as the status of a failed expect (HAProxy's).
            "ok-status" => e.ok_status = pick(val()?, crate::config::OK_STATUSES, a)?,
            "error-status" => {
                e.error_status = Some(pick(val()?, crate::config::ERROR_STATUSES, a)?)
            }
            "tout-status" => e.tout_status = pick(val()?, &[L7Tout, L6Tout, L4Tout], a)?,
            "on-success" | "on-error" => {
                let v = val()?;
                crate::sample::LogFormat::parse(v, Scope::Response)
                    .map_err(|x| format!("'{v}' invalid log-format string ({x})."))?;
                match a {
                    "on-success" => e.on_success = Some(v.to_string()),
                    _ => e.on_error = Some(v.to_string()),
                }
            }
            "status-code" => {
                let v = val()?;
                crate::sample::Expr::parse(v, Scope::Response).map_err(|x| {
                    format!("error detected while parsing status-code expression : {x}")
                })?;
                e.status_code = Some(v.to_string());
            }
            "!" => {
                e.negate = true;
                i += 1;
                continue;
            }
            m => {
                if kind.is_some() {
                    return Err(format!("unexpected argument '{m}' in 'http-check expect'"));
                }
                let m = match m.strip_prefix('!') {
                    Some(r) => {
                        e.negate = true;
                        r
                    }
                    None => m,
                };
                let pat = arg(w, i + 1, m).map_err(|_| {
                    format!("'http-check expect {m}' expects an argument (the pattern)")
                })?;
                kind = Some(match m {
                    "status" => ExpectKind::Status(parse_status_list(pat)?),
                    "rstatus" => {
                        regex::Regex::new(pat).map_err(|x| format!("invalid rstatus '{pat}': {x}"))?;
                        ExpectKind::RStatus(pat.to_string())
                    }
                    "string" => ExpectKind::String(pat.to_string()),
                    "string-lf" => {
                        crate::sample::LogFormat::parse(pat, Scope::Response)
                            .map_err(|x| format!("'{pat}' invalid log-format string ({x})."))?;
                        ExpectKind::StringLf(pat.to_string())
                    }
                    "rstring" => {
                        regex::Regex::new(pat).map_err(|x| format!("invalid rstring '{pat}': {x}"))?;
                        ExpectKind::RString(pat.to_string())
                    }
                    "hdr" | "fhdr" => {
                        let (k, used) = parse_hdr_expect(&w[i + 1..], m == "fhdr")?;
                        i += used + 1;
                        kind = Some(k);
                        continue;
                    }
                    o => {
                        return Err(format!(
                            "unknown 'http-check expect' match '{o}' (supported: status, rstatus, string, rstring, string-lf, hdr, fhdr)"
                        ))
                    }
                });
            }
        }
        i += 2;
    }
    e.kind = kind.ok_or("'http-check expect' expects a match (status, rstatus, string, rstring, string-lf, hdr, fhdr) and a pattern")?;
    Ok((e, comment))
}

/// `name [-m M] NAME [value [-m M] VALUE]` after `hdr`/`fhdr`; returns
/// the match and the words used.
fn parse_hdr_expect(w: &[String], full: bool) -> Result<(ExpectKind, usize), String> {
    let one = |at: usize, what: &str, lf: bool| -> Result<(HdrMatch, usize), String> {
        let (meth, at) = if w.get(at).map(String::as_str) == Some("-m") {
            let m = arg(w, at + 1, "-m").map_err(|_| "'-m' expects a method".to_string())?;
            (m, at + 2)
        } else {
            ("str", at)
        };
        let p = arg(w, at, what).map_err(|_| format!("'{what}' expects a pattern"))?;
        let p = p.to_string();
        if lf {
            if meth == "reg" {
                return Err(format!(
                    "'http-check expect hdr {what}': log-format string is not supported with a regex matching method"
                ));
            }
            crate::sample::LogFormat::parse(&p, Scope::Response)
                .map_err(|e| format!("'http-check expect hdr {what}': {e}"))?;
        }
        let m = match meth {
            "str" => HdrMatch::Str(p),
            "beg" => HdrMatch::Beg(p),
            "end" => HdrMatch::End(p),
            "sub" => HdrMatch::Sub(p),
            "reg" => {
                regex::Regex::new(&p).map_err(|x| format!("invalid regex '{p}': {x}"))?;
                HdrMatch::Reg(p)
            }
            o => {
                return Err(format!(
                "'http-check expect hdr': unknown matching method '{o}' (str, beg, end, sub, reg)"
            ))
            }
        };
        let m = if lf { HdrMatch::Fmt(Box::new(m)) } else { m };
        Ok((m, at + 1))
    };
    let name_lf = match w.first().map(String::as_str) {
        Some("name") => false,
        Some("name-lf") => true,
        _ => return Err("'http-check expect hdr' expects 'name' and a pattern".into()),
    };
    let name_kw = if name_lf { "name-lf" } else { "name" };
    let (name, mut at) = one(1, name_kw, name_lf)?;
    let mut value = None;
    if let Some(kw @ ("value" | "value-lf")) = w.get(at).map(String::as_str) {
        let (v, next) = one(at + 1, kw, kw == "value-lf")?;
        value = Some(v);
        at = next;
    }
    Ok((ExpectKind::Hdr { full, name, value }, at))
}

/// `200`, `200-399`, `200,204,300-399`.
fn parse_status_list(s: &str) -> Result<Vec<(u16, u16)>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let lo = parse_status("http-check expect status", a, 100, 599)?;
        let hi = parse_status("http-check expect status", b, 100, 599)?;
        if lo > hi {
            return Err(format!("invalid status range '{part}'"));
        }
        out.push((lo, hi));
    }
    Ok(out)
}
