//! `tcp-request connection|session|content ACTION [if|unless COND]` and
//! `tcp-request inspect-delay TIME` (configuration.txt 4.2).
//!
//! Actions: `accept`, `reject`, `silent-drop`, `expect-proxy layer4`
//! (connection rules only), and those shared with `http-request`:
//! `track-sc0|1|2 KEY [table T]`, `sc-inc-gpc0(N)`, `sc-set-gpt0(N)`,
//! `set-var(V)`, `set-var-fmt(V)`, `unset-var(V)`. Any other action is
//! refused at its line, never ignored.

use super::parse::{cond_of, is_shared_action, request_scope, shared_action, split_cond};
use super::values::parse_time;
use super::{Loc, Proxy, TcpAction, TcpRequestRule, TcpWhen};
use crate::sample::Scope;

/// Parses the words after `tcp-request`.
pub(super) fn parse(px: &mut Proxy, w: &[String], loc: &Loc) -> Result<(), String> {
    let which = w
        .first()
        .map(String::as_str)
        .ok_or("'tcp-request' expects 'connection', 'session', 'content' or 'inspect-delay'")?;
    let when = match which {
        "inspect-delay" => {
            let [_, t] = w else {
                return Err("'tcp-request inspect-delay' expects one time value".to_string());
            };
            px.inspect_delay = Some(parse_time(t)?);
            return Ok(());
        }
        "connection" => TcpWhen::Connection,
        "session" => TcpWhen::Session,
        "content" => TcpWhen::Content,
        o => {
            return Err(format!(
                "unknown 'tcp-request {o}' (expected connection, session, content or inspect-delay)"
            ))
        }
    };
    let (words, cond) = split_cond(&w[1..]);
    let Some(action) = words.first().map(String::as_str) else {
        return Err(format!("'tcp-request {which}' expects an action"));
    };
    let args = &words[1..];
    let kw = format!("tcp-request {which}");
    let no_args = |a: TcpAction| {
        if let Some(x) = args.first() {
            return Err(format!("unexpected '{x}' after '{kw} {action}'"));
        }
        Ok(a)
    };
    let act = match action {
        "accept" => no_args(TcpAction::Accept)?,
        "reject" => no_args(TcpAction::Reject)?,
        "silent-drop" => no_args(TcpAction::SilentDrop)?,
        "expect-proxy" => {
            if when != TcpWhen::Connection {
                return Err(format!(
                    "'{kw} expect-proxy' is only valid in 'tcp-request connection' rules"
                ));
            }
            match args {
                [l] if l == "layer4" => TcpAction::ExpectProxy,
                _ => return Err(format!("'{kw} expect-proxy' expects 'layer4'")),
            }
        }
        a if is_shared_action(a) => {
            TcpAction::Common(shared_action(&kw, a, args, request_scope(px))?)
        }
        o => {
            return Err(format!(
                "'{kw} {o}' is not supported by ebb (supported actions: accept, reject, silent-drop, expect-proxy layer4, track-sc0, track-sc1, track-sc2, sc-inc-gpc0, sc-set-gpt0, set-var, set-var-fmt, unset-var)"
            ))
        }
    };
    let cond = cond_of(cond, px, loc)?;
    px.tcp_request.push(TcpRequestRule {
        when,
        action: act,
        cond,
        loc: loc.clone(),
    });
    Ok(())
}

/// Parses the words after `tcp-response`: `inspect-delay TIME`, or
/// `content ACTION [if|unless COND]` with ACTION one of `accept`,
/// `reject`, `close`, `silent-drop`, `sc-inc-gpc0(N)`, `sc-set-gpt0(N)`,
/// `set-var(V)`, `unset-var(V)`.
pub(super) fn parse_response(px: &mut Proxy, w: &[String], loc: &Loc) -> Result<(), String> {
    match w.first().map(String::as_str) {
        Some("inspect-delay") => {
            let [_, t] = w else {
                return Err("'tcp-response inspect-delay' expects one time value".to_string());
            };
            px.res_inspect_delay = Some(parse_time(t)?);
            return Ok(());
        }
        Some("content") => {}
        Some(o) => {
            return Err(format!(
                "unknown 'tcp-response {o}' (expected content or inspect-delay)"
            ))
        }
        None => return Err("'tcp-response' expects 'content' or 'inspect-delay'".to_string()),
    }
    let (words, cond) = split_cond(&w[1..]);
    let Some(action) = words.first().map(String::as_str) else {
        return Err("'tcp-response content' expects an action".to_string());
    };
    let args = &words[1..];
    let simple = |a: TcpAction| match args.first() {
        Some(x) => Err(format!(
            "unexpected '{x}' after 'tcp-response content {action}'"
        )),
        None => Ok(a),
    };
    let act = match action {
        "accept" => simple(TcpAction::Accept)?,
        "reject" => simple(TcpAction::Reject)?,
        "close" => simple(TcpAction::Close)?,
        "silent-drop" => simple(TcpAction::SilentDrop)?,
        a if is_shared_action(a) && !a.starts_with("track-sc") && !a.starts_with("set-var-fmt") => {
            TcpAction::Common(shared_action("tcp-response content", a, args, Scope::Response)?)
        }
        o => {
            return Err(format!(
                "'tcp-response content {o}' is not supported by ebb (supported actions: accept, reject, close, silent-drop, sc-inc-gpc0, sc-set-gpt0, set-var, unset-var)"
            ))
        }
    };
    let cond = cond_of(cond, px, loc)?;
    px.tcp_response.push(TcpRequestRule {
        when: TcpWhen::Content,
        action: act,
        cond,
        loc: loc.clone(),
    });
    Ok(())
}
