//! `tcp-request connection|session|content ACTION [if|unless COND]` and
//! `tcp-request inspect-delay TIME` (configuration.txt 4.2).
//!
//! Actions: `accept`, `reject`, `silent-drop`, `expect-proxy layer4`
//! (connection rules only), and those shared with `http-request`:
//! `track-sc0|1|2 KEY [table T]`, `sc-inc-gpc0(N)`, `sc-set-gpt0(N)`,
//! `set-var(V)`, `set-var-fmt(V)`, `unset-var(V)`; and `capture SAMPLE
//! len N`, `do-resolve(V,RESOLVERS[,ipv4|ipv6]) EXPR` and `switch-mode
//! http [proto h1|h2]` (a frontend's, see `tcp::upgrade`) in content
//! rules. Any other action is refused at its line, never ignored
//! (`set-nice` with its reason).

use super::parse::{
    cond_of, is_shared_action, parse_do_resolve, parse_set_priority, parse_sock_opt, request_scope,
    set_log_level_arg, set_nice_refused, shared_action, split_cond,
};
use super::values::{parse_time, parse_u32_range};
use super::{AddrField, HttpRequestAction, Loc, Proxy, TcpAction, TcpRequestRule, TcpWhen};
use crate::sample::logline::{CaptureAction, CaptureHdr};
use crate::sample::{Expr, Scope};

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
        "set-src" | "set-dst" | "set-src-port" | "set-dst-port" => {
            let f = match action {
                "set-src" => AddrField::Src,
                "set-dst" => AddrField::Dst,
                "set-src-port" => AddrField::SrcPort,
                _ => AddrField::DstPort,
            };
            TcpAction::SetAddr(f, Box::new(addr_expr(&kw, f, args, px)?))
        }
        "switch-mode" if when == TcpWhen::Content => switch_mode(px, args)?,
        "set-mark" | "set-tos" => {
            TcpAction::Common(HttpRequestAction::SockOpt(parse_sock_opt(&kw, action, args)?))
        }
        "set-priority-class" | "set-priority-offset" if when == TcpWhen::Content => {
            TcpAction::Common(parse_set_priority(&kw, action, args, request_scope(px))?)
        }
        // HAProxy 2.6: content rules only.
        "set-log-level" if when == TcpWhen::Content => {
            TcpAction::Common(HttpRequestAction::SetLogLevel(set_log_level_arg(&kw, args)?))
        }
        "capture" if when == TcpWhen::Content => {
            TcpAction::Common(HttpRequestAction::Capture(capture(px, args)?))
        }
        a if is_shared_action(a) => {
            TcpAction::Common(shared_action(&kw, a, args, request_scope(px))?)
        }
        "set-nice" if when == TcpWhen::Content => return Err(set_nice_refused(&kw)),
        a if when == TcpWhen::Content && a.starts_with("do-resolve(") => TcpAction::Common(
            HttpRequestAction::DoResolve(Box::new(parse_do_resolve(&kw, a, args, request_scope(px))?)),
        ),
        o => {
            return Err(format!(
                "'{kw} {o}' is not supported by ebb (supported actions: accept, reject, silent-drop, expect-proxy layer4, set-src, set-dst, set-src-port, set-dst-port, set-mark, set-tos, track-sc0, track-sc1, track-sc2, sc-inc-gpc, sc-inc-gpc0, sc-inc-gpc1, sc-set-gpt, sc-set-gpt0, set-var, set-var-fmt, unset-var; and capture, do-resolve, set-log-level, set-priority-class, set-priority-offset, switch-mode http in content rules)"
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

/// `tcp-request content switch-mode http [proto h1|h2]`, with HAProxy
/// 2.6's checks: a frontend's only, the mode `http`, the protocol one
/// an HTTP frontend may speak.
fn switch_mode(px: &Proxy, args: &[String]) -> Result<TcpAction, String> {
    let kw = "tcp-request switch-mode";
    let Some(mode) = args.first() else {
        return Err(format!("'{kw}' expects a mode as argument."));
    };
    if !px.kind.is_frontend() {
        return Err(format!(
            "'{kw}' not allowed because {} '{}' has no frontend capability",
            px.kind.name(),
            px.name
        ));
    }
    if mode != "http" {
        return Err(format!("'{kw}' expects a valid mode (got '{mode}')."));
    }
    let proto = match &args[1..] {
        [] => None,
        [p] if p == "proto" => {
            return Err(format!("'{kw}': 'proto' expects a protocol as argument."))
        }
        [p, n] if p == "proto" => match n.as_str() {
            "h1" => Some(false),
            "h2" => Some(true),
            "fcgi" | "none" => {
                return Err(format!(
                    "'{kw}': MUX protocol '{n}' is not compatible with the selected mode"
                ))
            }
            _ => {
                return Err(format!(
                    "'{kw}': 'proto' expects a valid MUX protocol, if specified (got '{n}')"
                ))
            }
        },
        [x, ..] => return Err(format!("unexpected '{x}' after '{kw} {mode}'")),
    };
    Ok(TcpAction::SwitchMode(proto))
}

/// `tcp-request content capture SAMPLE len N`: a new request capture slot
/// of the frontend (HAProxy's, shown by `%hr` in the log), filled with the
/// sample cut to N bytes. Where it may run is checked at compile time
/// (the layer-4 compile step).
fn capture(px: &mut Proxy, args: &[String]) -> Result<CaptureAction, String> {
    let [e, l, n] = args else {
        return Err("'tcp-request content capture' expects SAMPLE len N".to_string());
    };
    if l != "len" {
        return Err(format!(
            "'tcp-request content capture' expects 'len' after the sample, not '{l}'"
        ));
    }
    let expr = Expr::parse(e, request_scope(px))
        .map_err(|x| format!("'tcp-request content capture': {x}"))?;
    let len = parse_u32_range("capture len", n, 1, 65_536)? as usize;
    let slot = px.captures.iter().filter(|c| !c.response).count();
    px.captures.push(CaptureHdr {
        response: false,
        name: None,
        len,
    });
    Ok(CaptureAction {
        expr: Box::new(expr),
        response: false,
        slot,
        len,
    })
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
        "set-nice" => return Err(set_nice_refused("tcp-response content")),
        "set-mark" | "set-tos" => TcpAction::Common(HttpRequestAction::SockOpt(parse_sock_opt(
            "tcp-response content",
            action,
            args,
        )?)),
        "set-log-level" => TcpAction::Common(HttpRequestAction::SetLogLevel(set_log_level_arg(
            "tcp-response content",
            args,
        )?)),
        a if is_shared_action(a) && !a.starts_with("track-sc") && !a.starts_with("set-var-fmt") => {
            TcpAction::Common(shared_action("tcp-response content", a, args, Scope::Response)?)
        }
        o => {
            return Err(format!(
                "'tcp-response content {o}' is not supported by ebb (supported actions: accept, reject, close, silent-drop, set-log-level, set-mark, set-tos, sc-inc-gpc, sc-inc-gpc0, sc-inc-gpc1, sc-set-gpt, sc-set-gpt0, set-var, unset-var)"
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

/// The sample expression of a `set-src`, `set-dst`, `set-src-port` or
/// `set-dst-port` action of rule `kw`: one, giving an address or an
/// integer as the action needs.
pub(super) fn addr_expr(
    kw: &str,
    f: AddrField,
    args: &[String],
    px: &Proxy,
) -> Result<Expr, String> {
    let action = f.name();
    let [e] = args else {
        return Err(format!("'{kw} {action}' expects one sample expression"));
    };
    let expr = Expr::parse(e, request_scope(px)).map_err(|x| format!("'{kw} {action}': {x}"))?;
    let want = match f {
        AddrField::Src | AddrField::Dst => crate::sample::Type::Ip,
        _ => crate::sample::Type::Int,
    };
    if !crate::sample::can_cast(expr.out_type(), want) {
        return Err(format!(
            "'{kw} {action}': '{e}' does not give {}",
            if want == crate::sample::Type::Ip {
                "an address"
            } else {
                "an integer"
            }
        ));
    }
    Ok(expr)
}
