//! The actions of `http-request`, `http-response` and
//! `http-after-response` rules, and the ones `tcp-request` rules share
//! with them (variables, stick counters).
//!
//! A rule is an action, its arguments, then an optional `if`/`unless`
//! condition naming ACLs declared before it. Expressions and log-format
//! strings are compiled now, in the scope the rule runs in (a frontend's
//! request rules before a backend is chosen, a backend's after, response
//! rules on the answer), so a fetch that has no meaning there is refused
//! at the line. The rewriting actions (`replace-header`, `set-path`,
//! `set-status`...) are parsed in `config::rewrite`, `tcp-request` lines in
//! `config::tcpreq`, replies (`return`, `deny` with an answer) in
//! [`reply`](super::reply).

use super::log::log_level;
use super::reply::{parse_reply, parse_return};
use super::{arg, cond_of, split_cond, Ctx, BE, FE};
use crate::config::types::*;
use crate::config::values::*;
use crate::sample::{Expr, LogFormat as LfFormat, Scope, VarAction, VarRef};

/// `set-log-level`'s argument: a syslog level's number, or `None` for
/// `silent`.
pub(in crate::config) fn set_log_level_arg(
    kw: &str,
    args: &[String],
) -> Result<Option<u8>, String> {
    match args {
        [l] if l == "silent" => Ok(None),
        [l] => match log_level(l) {
            Some(v) => Ok(Some(v as u8)),
            None => Err(format!(
                "'{kw} set-log-level': unknown level '{l}' (emerg, alert, crit, err, warning, notice, info, debug or silent)"
            )),
        },
        _ => Err(format!(
            "'{kw} set-log-level' expects exactly 1 argument (log level name or 'silent')"
        )),
    }
}

/// The `NORMALIZER [full|strict]` of `http-request normalize-uri`.
fn parse_normalizer(args: &[String]) -> Result<Normalizer, String> {
    use Normalizer as N;
    let (name, opt) = match args {
        [n] => (n.as_str(), None),
        [n, o] => (n.as_str(), Some(o.as_str())),
        [] => {
            return Err("'http-request normalize-uri': missing argument <normalizer>".to_string())
        }
        [_, _, x, ..] => return Err(format!("'http-request normalize-uri': unexpected '{x}'")),
    };
    let flag = |word: &str| match opt {
        None => Ok(false),
        Some(o) if o == word => Ok(true),
        Some(o) => Err(format!("unknown argument '{o}' for '{name}' normalizer")),
    };
    let n = match name {
        "path-merge-slashes" => N::PathMergeSlashes,
        "path-strip-dot" => N::PathStripDot,
        "path-strip-dotdot" => N::PathStripDotdot { full: flag("full")? },
        "query-sort-by-name" => N::QuerySortByName,
        "percent-to-uppercase" => N::PercentToUppercase { strict: flag("strict")? },
        "percent-decode-unreserved" => N::PercentDecodeUnreserved { strict: flag("strict")? },
        "fragment-strip" => N::FragmentStrip,
        "fragment-encode" => N::FragmentEncode,
        o => return Err(format!("unknown normalizer '{o}' (supported: path-merge-slashes, path-strip-dot, path-strip-dotdot [full], query-sort-by-name, percent-to-uppercase [strict], percent-decode-unreserved [strict], fragment-strip, fragment-encode)")),
    };
    if opt.is_some()
        && !matches!(
            n,
            N::PathStripDotdot { .. }
                | N::PercentToUppercase { .. }
                | N::PercentDecodeUnreserved { .. }
        )
    {
        return Err(format!("'{name}' normalizer takes no argument"));
    }
    Ok(n)
}

/// A redirect rule's words, in any order as HAProxy 2.6 reads them
/// (`code 301 location /x` is `location /x code 301`; a type given twice:
/// the last one). `use_fmt`: the target is a log-format string (the
/// `http-request`/`http-response` actions); a standalone `redirect` line
/// takes it as written, `%` included (HAProxy's old-style static rule).
pub(super) fn parse_redirect(
    args: &[String],
    scope: Scope,
    use_fmt: bool,
) -> Result<Redirect, String> {
    let mut r = Redirect {
        kind: RedirectKind::Location,
        target: String::new(),
        fmt: None,
        code: 302,
        drop_query: false,
        append_slash: false,
        cookie: None,
        late: false,
        ignore_empty: false,
    };
    let mut kind = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            o @ ("location" | "prefix" | "scheme") => {
                kind = Some(match o {
                    "location" => RedirectKind::Location,
                    "prefix" => RedirectKind::Prefix,
                    _ => RedirectKind::Scheme,
                });
                r.target = header_value(arg(args, i + 1, o)?)?;
                i += 2;
            }
            "code" => {
                let c = arg(args, i + 1, "code")?;
                r.code = match c.parse::<u16>() {
                    Ok(n @ (301 | 302 | 303 | 307 | 308)) => n,
                    _ => {
                        return Err(format!(
                            "invalid redirect code '{c}' (expected 301, 302, 303, 307 or 308)"
                        ))
                    }
                };
                i += 2;
            }
            "drop-query" => {
                r.drop_query = true;
                i += 1;
            }
            "append-slash" => {
                r.append_slash = true;
                i += 1;
            }
            "ignore-empty" => {
                r.ignore_empty = true;
                i += 1;
            }
            // HAProxy 2.6's: the last of the two wins; the value as
            // written, then its fixed attributes.
            o @ ("set-cookie" | "clear-cookie") => {
                let c = header_value(arg(args, i + 1, o)?)?;
                if c.is_empty() {
                    return Err(format!("'{o}' expects an argument"));
                }
                r.cookie = Some(if o == "set-cookie" {
                    format!("{c}; path=/;")
                } else {
                    format!("{c}; path=/; Max-Age=0;")
                });
                i += 2;
            }
            o => {
                return Err(format!(
                    "unknown redirect option '{o}' (expects location, prefix, scheme, code, drop-query, append-slash, ignore-empty, set-cookie or clear-cookie)"
                ))
            }
        }
    }
    r.kind =
        kind.ok_or_else(|| "'redirect' expects a type: location, prefix or scheme".to_string())?;
    // HAProxy leaves `prefix /` unparsed (it inserts nothing).
    let plain_root = r.kind == RedirectKind::Prefix && r.target == "/";
    if use_fmt && !plain_root && r.target.contains('%') {
        r.fmt = Some(
            crate::sample::LogFormat::parse_http(&r.target, scope)
                .map_err(|e| format!("redirect target: {e}"))?,
        );
    }
    Ok(r)
}

pub(super) fn parse_http_request(
    px: &mut Proxy,
    ctx: &Ctx<'_>,
    w: &[String],
) -> Result<HttpRequestRule, String> {
    let action = arg(w, 0, "http-request")?;
    let (args, c) = split_cond(&w[1..]);
    let loc = ctx.loc;
    let rewrite = crate::config::rewrite::parse("http-request", action, args, request_scope(px))?;
    let act = match action {
        "return" => HttpRequestAction::Return(Box::new(parse_return(
            args,
            ctx,
            request_scope(px),
        )?)),
        "redirect" => HttpRequestAction::Redirect(parse_redirect(args, request_scope(px), true)?),
        "deny" => {
            let mut status = 403;
            match args {
                [] => HttpRequestAction::Deny { status },
                [k, s] if k == "deny_status" || k == "status" => {
                    status = parse_status("deny_status", s, 200, 599)?;
                    HttpRequestAction::Deny { status }
                }
                // An answer of its own, as `return` takes it.
                _ => HttpRequestAction::Return(Box::new(parse_reply(
                    "http-request deny",
                    args,
                    ctx,
                    request_scope(px),
                    true,
                )?)),
            }
        }
        "allow" => {
            if let Some(x) = args.first() {
                return Err(format!("unexpected '{x}' after 'http-request allow'"));
            }
            HttpRequestAction::Allow
        }
        _ if rewrite.is_some() => match rewrite {
            Some(r) => HttpRequestAction::Rewrite(r),
            None => return Err("internal: rewrite action lost".to_string()),
        },
        "set-header" | "add-header" | "del-header" => HttpRequestAction::Header(
            parse_header_edit("http-request", action, args, request_scope(px))?,
        ),
        "early-hint" => HttpRequestAction::EarlyHint(parse_early_hint(args, request_scope(px))?),
        "reject" => {
            if let Some(x) = args.first() {
                return Err(format!("unexpected '{x}' after 'http-request reject'"));
            }
            HttpRequestAction::Reject
        }
        "set-log-level" => HttpRequestAction::SetLogLevel(set_log_level_arg("http-request", args)?),
        "disable-l7-retry" => {
            if let Some(x) = args.first() {
                return Err(format!(
                    "unexpected '{x}' after 'http-request disable-l7-retry'"
                ));
            }
            HttpRequestAction::DisableL7Retry
        }
        "silent-drop" => {
            if let Some(x) = args.first() {
                return Err(format!("unexpected '{x}' after 'http-request silent-drop'"));
            }
            HttpRequestAction::SilentDrop
        }
        "set-mark" | "set-tos" => HttpRequestAction::SockOpt(parse_sock_opt("http-request", action, args)?),
        "set-nice" => return Err(set_nice_refused("http-request")),
        a if a.starts_with("do-resolve(") => HttpRequestAction::DoResolve(Box::new(
            parse_do_resolve("http-request", a, args, request_scope(px))?,
        )),
        "wait-for-handshake" => match args {
            [] => HttpRequestAction::WaitForHandshake,
            [x, ..] => return Err(format!("unexpected '{x}' after 'http-request wait-for-handshake'")),
        },
        "set-priority-class" | "set-priority-offset" => {
            parse_set_priority("http-request", action, args, request_scope(px))?
        }
        "tarpit" => {
            let mut status = 500;
            match args {
                [] => {}
                [k, s] if k == "deny_status" || k == "status" => {
                    status = parse_status("deny_status", s, 200, 599)?;
                }
                [x, ..] => {
                    return Err(format!(
                        "unexpected '{x}' after 'http-request tarpit' (supported: deny_status N)"
                    ))
                }
            }
            HttpRequestAction::Tarpit { status }
        }
        a if is_shared_action(a) => shared_action("http-request", a, args, request_scope(px))?,
        a if is_pat_edit(a) => {
            HttpRequestAction::PatEdit(parse_pat_edit("http-request", a, args, request_scope(px))?)
        }
        "capture" => HttpRequestAction::Capture(parse_capture_action(px, ctx, false, args)?),
        "set-dst" | "set-dst-port" | "set-src" | "set-src-port" => {
            let f = match action {
                "set-dst" => crate::config::AddrField::Dst,
                "set-dst-port" => crate::config::AddrField::DstPort,
                "set-src" => crate::config::AddrField::Src,
                _ => crate::config::AddrField::SrcPort,
            };
            HttpRequestAction::SetAddr(f, Box::new(crate::config::tcpreq::addr_expr("http-request", f, args, px)?))
        }
        "wait-for-body" => HttpRequestAction::WaitForBody(parse_wait_for_body("http-request", args)?),
        "normalize-uri" => {
            if !ctx.experimental {
                return Err("'http-request normalize-uri' is experimental: it needs 'expose-experimental-directives' in the 'global' section before it (as HAProxy)".to_string());
            }
            HttpRequestAction::NormalizeUri(parse_normalizer(args)?)
        }
        "strict-mode" => HttpRequestAction::StrictMode(parse_strict_mode("http-request", args)?),
        "set-timeout" => {
            if ctx.caps & BE == 0 {
                return Err(format!("proxy '{}' has no backend capability", px.name));
            }
            let [which, v] = args else {
                return Err("'http-request set-timeout' expects exactly 2 arguments".to_string());
            };
            let tunnel = match which.as_str() {
                "server" => false,
                "tunnel" => true,
                o => {
                    return Err(format!(
                        "'set-timeout' rule supports 'server'/'tunnel' (got '{o}')"
                    ))
                }
            };
            let value = match parse_time(v) {
                Ok(d) => {
                    let ms = u32::try_from(d.as_millis())
                        .ok()
                        .filter(|&m| m <= i32::MAX as u32)
                        .ok_or_else(|| format!("timer overflow in argument '{v}' to rule 'set-timeout {which}' (maximum value is 2147483647 ms or ~24.8 days)"))?;
                    if ms == 0 {
                        return Err(format!("null value is not valid for a 'set-timeout {which}' rule"));
                    }
                    TimeoutValue::Ms(ms)
                }
                Err(_) => {
                    let e = Expr::parse(v, request_scope(px))
                        .map_err(|e| format!("'set-timeout {which}': {e}"))?;
                    if !crate::sample::can_cast(e.out_type(), crate::sample::Type::Int) {
                        return Err(format!("'set-timeout {which}': '{v}' does not give an integer"));
                    }
                    TimeoutValue::Expr(Box::new(e))
                }
            };
            HttpRequestAction::SetTimeout { tunnel, value }
        }
        "auth" => match args {
            [] => HttpRequestAction::Auth { realm: None },
            [k, r] if k == "realm" => HttpRequestAction::Auth {
                realm: Some(r.clone()),
            },
            [k] if k == "realm" => return Err("missing realm value".to_string()),
            [x, ..] => {
                return Err(format!(
                    "unexpected '{x}' after 'http-request auth' (supported: realm R)"
                ))
            }
        },
        "cache-use" => match args {
            [n] => HttpRequestAction::CacheUse(n.clone()),
            [] => return Err("'http-request cache-use' expects a cache name".to_string()),
            [_, x, ..] => return Err(format!("unexpected '{x}' after 'http-request cache-use NAME'")),
        },
        "use-service" => match args {
            [s] if s == "prometheus-exporter" => {
                HttpRequestAction::UseService(Service::PrometheusExporter)
            }
            [s] => {
                return Err(format!(
                    "unknown service '{s}' (supported: prometheus-exporter)"
                ))
            }
            _ => return Err("'http-request use-service' expects a service name".to_string()),
        },
        o => {
            return Err(format!(
                "unknown 'http-request' action '{o}' (supported: add-acl, add-header, allow, auth, cache-use, capture, del-acl, del-header, del-map, deny, disable-l7-retry, do-resolve, early-hint, normalize-uri, redirect, reject, replace-header, replace-path, replace-pathq, replace-uri, replace-value, return, sc-inc-gpc, sc-inc-gpc0, sc-inc-gpc1, sc-set-gpt, sc-set-gpt0, set-dst, set-dst-port, set-header, set-log-level, set-map, set-mark, set-method, set-path, set-pathq, set-priority-class, set-priority-offset, set-query, set-src, set-src-port, set-timeout, set-tos, set-uri, set-var, set-var-fmt, silent-drop, strict-mode, tarpit, track-sc0, track-sc1, track-sc2, unset-var, use-service, wait-for-body, wait-for-handshake)"
            ))
        }
    };
    let cond = cond_of(c, px, loc)?;
    Ok(HttpRequestRule {
        action: act,
        cond,
        loc: loc.clone(),
    })
}

/// An `http-response` or `http-after-response` line (`kw`): its rule,
/// added to the proxy's list.
pub(super) fn http_response_kw(
    px: &mut Proxy,
    ctx: &Ctx<'_>,
    kw: &str,
    w: &[String],
) -> Result<(), String> {
    let loc = ctx.loc;
    ctx.allow_rules(kw)?;
    let action = arg(w, 1, kw)?;
    let (args, c) = split_cond(&w[2..]);
    let act = match action {
        a if is_var_action(a) => {
            HttpResponseAction::Var(parse_var_action(kw, a, args, Scope::Response)?)
        }
        "capture" if kw == "http-response" => {
            HttpResponseAction::Capture(parse_capture_action(px, ctx, true, args)?)
        }
        "set-log-level" if kw == "http-response" => {
            HttpResponseAction::SetLogLevel(set_log_level_arg(kw, args)?)
        }
        "allow" => match args {
            [] => HttpResponseAction::Allow,
            [x, ..] => return Err(format!("unexpected '{x}' after '{kw} allow'")),
        },
        "strict-mode" => HttpResponseAction::StrictMode(parse_strict_mode(kw, args)?),
        "set-mark" | "set-tos" if kw == "http-response" => {
            HttpResponseAction::SockOpt(parse_sock_opt(kw, action, args)?)
        }
        "deny" if kw == "http-response" => {
            // HAProxy's default status for a denied response: 502.
            let given = args.iter().any(|a| a == "deny_status" || a == "status");
            let mut a: Vec<String> = Vec::new();
            if !given {
                a.extend(["status".to_string(), "502".to_string()]);
            }
            a.extend(args.iter().cloned());
            let mut r = if args.is_empty() || (args.len() == 2 && given) {
                // Only a status: the proxy's error answer for it.
                let st = parse_status("deny_status", &a[1], 200, 599)?;
                ReturnAction {
                    status: st,
                    content_type: None,
                    body: ReturnBody::Errorfile(None),
                    headers: Vec::new(),
                    deny: true,
                }
            } else {
                parse_reply("http-response deny", &a, ctx, Scope::Response, true)?
            };
            r.deny = true;
            HttpResponseAction::Deny(Box::new(r))
        }
        "redirect" if kw == "http-response" => {
            let r = parse_redirect(args, Scope::Response, true)?;
            if r.kind != RedirectKind::Location {
                return Err(
                    "'http-response redirect': response only supports redirect type 'location'"
                        .to_string(),
                );
            }
            HttpResponseAction::Redirect(r)
        }
        "return" if kw == "http-response" => HttpResponseAction::Return(Box::new(parse_reply(
            "http-response return",
            args,
            ctx,
            Scope::Response,
            false,
        )?)),
        "silent-drop" if kw == "http-response" => match args {
            [] => HttpResponseAction::SilentDrop,
            [x, ..] => {
                return Err(format!(
                    "unexpected '{x}' after 'http-response silent-drop'"
                ))
            }
        },
        a if kw == "http-response" && is_shared_action(a) => {
            HttpResponseAction::Stk(Box::new(shared_action(kw, a, args, Scope::Response)?))
        }
        "set-nice" => return Err(set_nice_refused(kw)),
        a if kw == "http-response" && is_pat_edit(a) => {
            HttpResponseAction::PatEdit(parse_pat_edit(kw, a, args, Scope::Response)?)
        }
        "wait-for-body" if kw == "http-response" => {
            HttpResponseAction::WaitForBody(parse_wait_for_body(kw, args)?)
        }
        "cache-store" if kw == "http-response" => match args {
            [n] => HttpResponseAction::CacheStore(n.clone()),
            [] => return Err("'http-response cache-store' expects a cache name".to_string()),
            [_, x, ..] => {
                return Err(format!(
                    "unexpected '{x}' after 'http-response cache-store NAME'"
                ))
            }
        },
        a => match crate::config::rewrite::parse(kw, a, args, Scope::Response)? {
            Some(r) => HttpResponseAction::Rewrite(r),
            None if matches!(a, "set-header" | "add-header" | "del-header") => {
                let e = parse_header_edit(kw, a, args, Scope::Response)?;
                crate::config::rewrite::check_response_edit(kw, &e)?;
                HttpResponseAction::Header(e)
            }
            None => {
                return Err(format!(
                    "unknown '{kw}' action '{a}' (supported: {})",
                    if kw == "http-response" {
                        "add-acl, add-header, allow, cache-store, capture, del-acl, del-header, del-map, deny, redirect, replace-header, replace-value, return, sc-inc-gpc, sc-inc-gpc0, sc-inc-gpc1, sc-set-gpt, sc-set-gpt0, set-header, set-log-level, set-map, set-mark, set-status, set-tos, set-var, set-var-fmt, silent-drop, strict-mode, track-sc0, track-sc1, track-sc2, unset-var, wait-for-body"
                    } else {
                        "add-header, allow, del-header, replace-header, replace-value, set-header, set-status, set-var, set-var-fmt, strict-mode, unset-var"
                    }
                ))
            }
        },
    };
    let cond = cond_of(c, px, loc)?;
    let rule = HttpResponseRule {
        action: act,
        cond,
        loc: loc.clone(),
    };
    if kw == "http-response" {
        px.http_response.push(rule);
    } else {
        px.http_after_response.push(rule);
    }
    Ok(())
}

/// `do-resolve(VAR,RESOLVERS[,ipv4|ipv6]) EXPR` of rule `kw` (HAProxy
/// 2.6's `resolv_parse_do_resolve`; the section is looked for once every
/// one is read).
pub(in crate::config) fn parse_do_resolve(
    kw: &str,
    a: &str,
    args: &[String],
    scope: Scope,
) -> Result<crate::config::DoResolve, String> {
    let usage = || {
        format!("'{kw} {a}': expects 'do-resolve(<varname>,<resolvers>[,<options>]) <expr>'. Available options are 'ipv4' and 'ipv6'")
    };
    let inner = a
        .strip_prefix("do-resolve(")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(usage)?;
    let mut parts = inner.split(',');
    let (Some(var), Some(resolvers)) = (parts.next(), parts.next()) else {
        return Err(usage());
    };
    if resolvers.is_empty() {
        return Err(usage());
    }
    // HAProxy's default: IPv6 first; the last option given wins.
    let mut prefer_v4 = false;
    for o in parts {
        prefer_v4 = match o {
            "ipv4" => true,
            "ipv6" => false,
            _ => return Err(usage()),
        };
    }
    let [e] = args else {
        return Err(usage());
    };
    let var = VarRef::parse(var).map_err(|x| format!("'{kw} {a}': {x}"))?;
    let expr = Expr::parse(e, scope).map_err(|x| format!("'{kw} {a}': {x}"))?;
    Ok(crate::config::DoResolve {
        var,
        resolvers: resolvers.to_string(),
        prefer_v4,
        expr,
    })
}

/// Why `set-nice` (HAProxy's priority of a stream's task in its
/// scheduler) is refused in rule `kw`.
pub(in crate::config) fn set_nice_refused(kw: &str) -> String {
    format!("'{kw} set-nice' is not supported: ebb's streams have no scheduling priority of their own (they run as tasklets, which have classes, not a nice)")
}

/// `strict-mode on|off`.
fn parse_strict_mode(kw: &str, args: &[String]) -> Result<bool, String> {
    match args {
        [v] if v == "on" => Ok(true),
        [v] if v == "off" => Ok(false),
        _ => Err(format!("'{kw} strict-mode' expects 'on' or 'off'")),
    }
}

/// `wait-for-body time T [at-least N]` (HAProxy's parse_http_wait_for_body:
/// `time` is required, `at-least` is a size, 0 by default).
fn parse_wait_for_body(kw: &str, args: &[String]) -> Result<crate::config::WaitForBody, String> {
    let usage = || format!("'{kw} wait-for-body' expects time <time> [ at-least <bytes> ]");
    let mut time = None;
    let mut at_least = 0;
    let mut i = 0;
    while i < args.len() {
        let v = args
            .get(i + 1)
            .ok_or_else(|| format!("missing argument for '{}'", args[i]))?;
        match args[i].as_str() {
            "time" => {
                let d = parse_time(v)?;
                let ms = u32::try_from(d.as_millis())
                    .ok()
                    .filter(|&m| m <= i32::MAX as u32)
                    .ok_or_else(|| {
                        "time overflow (maximum value is 2147483647 ms or ~24.8 days)".to_string()
                    })?;
                time = Some(ms);
            }
            "at-least" => at_least = parse_size(v)?,
            x => return Err(format!("{}: unexpected '{x}'", usage())),
        }
        i += 2;
    }
    let time_ms = time.ok_or_else(usage)?;
    Ok(crate::config::WaitForBody { time_ms, at_least })
}

/// Whether `a` is `add-acl(...)`, `del-acl(...)`, `set-map(...)` or
/// `del-map(...)`.
fn is_pat_edit(a: &str) -> bool {
    ["add-acl", "del-acl", "set-map", "del-map"]
        .iter()
        .any(|p| {
            a.strip_prefix(p)
                .is_some_and(|r| r.is_empty() || r.starts_with('('))
        })
}

/// `add-acl(FILE) KEYFMT`, `del-acl(FILE) KEYFMT`, `set-map(FILE) KEYFMT
/// VALUEFMT`, `del-map(FILE) KEYFMT` of rule `kw`: HAProxy 2.6's
/// `parse_http_set_map`, the formats read as its HTTP log-format strings.
fn parse_pat_edit(
    kw: &str,
    a: &str,
    args: &[String],
    scope: Scope,
) -> Result<crate::sample::patref::PatEdit, String> {
    use crate::sample::patref::{PatEdit, PatOp};
    let (name, rest) = a.split_at(7);
    let file = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .filter(|f| !f.is_empty())
        .ok_or_else(|| format!("'{kw} {a}': expected {name}(<file-name>)"))?;
    let op = match name {
        "add-acl" => PatOp::AddAcl,
        "set-map" => PatOp::SetMap,
        _ => PatOp::Del,
    };
    let fmt = |f: &str| LfFormat::parse_http(f, scope).map_err(|e| format!("'{kw} {a}': {e}"));
    let (key, value) = match (op, args) {
        (PatOp::SetMap, [k, v]) => (fmt(k)?, Some(fmt(v)?)),
        (PatOp::SetMap, _) => return Err(format!("'{kw} {a}' expects exactly 2 arguments")),
        (_, [k]) => (fmt(k)?, None),
        _ => return Err(format!("'{kw} {a}' expects exactly 1 argument")),
    };
    Ok(PatEdit {
        op,
        file: file.to_string(),
        key,
        value,
    })
}

/// Whether `a` names an action `http-request` and `tcp-request` share.
pub(in crate::config) fn is_shared_action(a: &str) -> bool {
    is_var_action(a)
        || a.starts_with("track-sc")
        || a.starts_with("sc-inc-gpc0(")
        || a.starts_with("sc-inc-gpc1(")
        || a.starts_with("sc-set-gpt0(")
        || a.starts_with("sc-inc-gpc(")
        || a.starts_with("sc-set-gpt(")
}

/// The actions `http-request` and `tcp-request` rules share: `set-var`,
/// `set-var-fmt`, `unset-var`, `track-scN KEY [table T]`,
/// `sc-inc-gpc0(N)`, `sc-set-gpt0(N) INT|EXPR`; `kw` names the rule.
/// `set-mark MARK` or `set-tos TOS` of rule `kw`: one number, decimal,
/// `0x` hexadecimal or `0` octal, as HAProxy reads them (strtoul, strtol);
/// a mark above 32 bits, a TOS outside 0-255 and a negative one, which
/// HAProxy would truncate, are refused.
pub(in crate::config) fn parse_sock_opt(
    kw: &str,
    action: &str,
    args: &[String],
) -> Result<crate::config::FcSockOpt, String> {
    let v = match args {
        [] => {
            return Err(format!(
                "'{kw} {action}' expects exactly 1 argument (integer/hex value)"
            ))
        }
        [v] => v,
        [v, x, ..] => return Err(format!("unexpected '{x}' after '{kw} {action} {v}'")),
    };
    let n = crate::config::values::parse_c_uint(v);
    if action == "set-mark" {
        let m = n.ok_or_else(|| {
            format!("'{kw} {action}': '{v}' is not an integer/hex value from 0 to 0xffffffff")
        })?;
        return Ok(crate::config::FcSockOpt::Mark(m));
    }
    match n.and_then(|t| i32::try_from(t).ok()).filter(|t| *t <= 255) {
        Some(t) => Ok(crate::config::FcSockOpt::Tos(t)),
        None => Err(format!(
            "'{kw} {action}': '{v}' is not an integer/hex value from 0 to 255"
        )),
    }
}

/// `set-priority-class EXPR` or `set-priority-offset EXPR` of rule `kw`:
/// one sample expression, read as an integer when the rule runs (a value
/// that is none leaves the priority as it was, as HAProxy).
pub(in crate::config) fn parse_set_priority(
    kw: &str,
    action: &str,
    args: &[String],
    scope: Scope,
) -> Result<HttpRequestAction, String> {
    let e = match args {
        [e] => e,
        [] => return Err(format!("'{kw} {action}' expects a sample expression")),
        [e, x, ..] => return Err(format!("unexpected '{x}' after '{kw} {action} {e}'")),
    };
    let expr = Expr::parse(e, scope).map_err(|x| format!("'{kw} {action}': {x}"))?;
    Ok(HttpRequestAction::SetPriority {
        offset: action == "set-priority-offset",
        expr: Box::new(expr),
    })
}

pub(in crate::config) fn shared_action(
    kw: &str,
    a: &str,
    args: &[String],
    scope: Scope,
) -> Result<HttpRequestAction, String> {
    Ok(match a {
        a if is_var_action(a) => HttpRequestAction::Var(parse_var_action(kw, a, args, scope)?),
        a if a.starts_with("track-sc") => {
            let n = sc_index(a, "track-sc")?;
            let (key, table) = match args {
                [k] => (k, None),
                [k, t, name] if t == "table" => (k, Some(name.clone())),
                _ => {
                    return Err(format!(
                        "'{kw} {a}' expects a key expression and an optional 'table NAME'"
                    ))
                }
            };
            let key = Expr::parse(key, scope).map_err(|e| format!("'{kw} {a}': {e}"))?;
            crate::sample::note_table_ref(table.clone());
            HttpRequestAction::TrackSc {
                n,
                key: Box::new(key),
                table,
            }
        }
        a if a.starts_with("sc-inc-gpc0(") => {
            if !args.is_empty() {
                return Err(format!("'{kw} {a}' takes no argument"));
            }
            HttpRequestAction::ScIncGpc0(sc_paren(a, "sc-inc-gpc0")?)
        }
        a if a.starts_with("sc-inc-gpc1(") => {
            if !args.is_empty() {
                return Err(format!("'{kw} {a}' takes no argument"));
            }
            HttpRequestAction::ScIncGpc1(sc_paren(a, "sc-inc-gpc1")?)
        }
        a if a.starts_with("sc-inc-gpc(") => {
            if !args.is_empty() {
                return Err(format!("'{kw} {a}' takes no argument"));
            }
            let (idx, n) = sc_pair(a, "sc-inc-gpc")?;
            HttpRequestAction::ScIncGpc { idx, n }
        }
        a if a.starts_with("sc-set-gpt0(") || a.starts_with("sc-set-gpt(") => {
            let arr = if a.starts_with("sc-set-gpt(") {
                Some(sc_pair(a, "sc-set-gpt")?)
            } else {
                None
            };
            let n = match arr {
                Some((_, n)) => n,
                None => sc_paren(a, "sc-set-gpt0")?,
            };
            let [v] = args else {
                return Err(format!(
                    "'{kw} {a}' expects an integer or a sample expression"
                ));
            };
            // HAProxy takes an integer or an expression.
            let text = match v.parse::<i64>() {
                Ok(i) => format!("int({i})"),
                Err(_) => v.clone(),
            };
            let e = Expr::parse(&text, scope).map_err(|e| format!("'{kw} {a}': {e}"))?;
            if !crate::sample::can_cast(e.out_type(), crate::sample::Type::Int) {
                return Err(format!("'{kw} {a}': '{v}' does not give an integer"));
            }
            match arr {
                Some((idx, n)) => HttpRequestAction::ScSetGpt {
                    idx,
                    n,
                    expr: Box::new(e),
                },
                None => HttpRequestAction::ScSetGpt0(n, Box::new(e)),
            }
        }
        o => return Err(format!("unknown '{kw}' action '{o}'")),
    })
}

/// The counter of `track-scN`: 0, 1 or 2.
fn sc_index(a: &str, prefix: &str) -> Result<usize, String> {
    match a.strip_prefix(prefix) {
        Some("0") => Ok(0),
        Some("1") => Ok(1),
        Some("2") => Ok(2),
        _ => Err(format!(
            "'{a}': ebb has the tracked counters {prefix}0, {prefix}1 and {prefix}2 (HAProxy's default)"
        )),
    }
}

/// `http-request capture SAMPLE len N|id N`, `http-response capture SAMPLE
/// id N`: `len` adds a slot to the frontend, `id` names one declared
/// before (with `declare capture` or a `capture ... len` rule).
fn parse_capture_action(
    px: &mut Proxy,
    ctx: &Ctx<'_>,
    response: bool,
    args: &[String],
) -> Result<crate::sample::logline::CaptureAction, String> {
    let kw = if response {
        "http-response"
    } else {
        "http-request"
    };
    ctx.allow(&format!("{kw} capture"), FE, ctx.named_defaults)?;
    let [e, how, n] = args else {
        return Err(format!(
            "'{kw} capture' expects SAMPLE len N or SAMPLE id N"
        ));
    };
    let scope = if response {
        Scope::Response
    } else {
        request_scope(px)
    };
    let expr = Box::new(Expr::parse(e, scope).map_err(|x| format!("'{kw} capture': {x}"))?);
    let side: Vec<usize> = px
        .captures
        .iter()
        .enumerate()
        .filter(|(_, c)| c.response == response)
        .map(|(i, _)| i)
        .collect();
    match how.as_str() {
        "len" if !response => {
            let len = parse_u32_range("capture len", n, 1, 65_536)? as usize;
            px.captures.push(crate::sample::logline::CaptureHdr {
                response,
                name: None,
                len,
            });
            Ok(crate::sample::logline::CaptureAction {
                expr,
                response,
                slot: side.len(),
                len,
            })
        }
        "id" => {
            let id = parse_u32_range("capture id", n, 0, u32::MAX)? as usize;
            let Some(&at) = side.get(id) else {
                return Err(format!(
                    "'{kw} capture ... id {id}': no {} capture slot {id} is declared before this line (use 'declare capture {} len N')",
                    if response { "response" } else { "request" },
                    if response { "response" } else { "request" },
                ));
            };
            Ok(crate::sample::logline::CaptureAction {
                expr,
                response,
                slot: id,
                len: px.captures[at].len,
            })
        }
        _ => Err(format!(
            "'{kw} capture' expects SAMPLE {} N",
            if response { "id" } else { "len N or SAMPLE id" }
        )),
    }
}

/// The counter of `sc-inc-gpc0(N)`: 0, 1 or 2.
fn sc_paren(a: &str, name: &str) -> Result<usize, String> {
    match a
        .strip_prefix(name)
        .and_then(|r| r.strip_prefix('(')?.strip_suffix(')'))
    {
        Some("0") => Ok(0),
        Some("1") => Ok(1),
        Some("2") => Ok(2),
        _ => Err(format!("'{a}': expected {name}(0), {name}(1) or {name}(2)")),
    }
}

/// `NAME(I,N)` (`sc-inc-gpc`, `sc-set-gpt`): the array element I (0 to
/// 99, HAProxy's arrays hold at most 100) and the tracked counter N.
fn sc_pair(a: &str, name: &str) -> Result<(usize, usize), String> {
    let inner = a
        .strip_prefix(name)
        .and_then(|r| r.strip_prefix('(')?.strip_suffix(')'));
    let Some((i, n)) = inner.and_then(|x| x.split_once(',')) else {
        return Err(format!(
            "'{a}': expected {name}(<index>,<counter>), as {name}(0,0)"
        ));
    };
    let idx = match i.trim().parse::<usize>() {
        Ok(i) if i < crate::table::MAX_ARRAY => i,
        _ => {
            return Err(format!(
                "'{a}': the index must be an integer from 0 to {}",
                crate::table::MAX_ARRAY - 1
            ))
        }
    };
    let n = match n.trim() {
        "0" => 0,
        "1" => 1,
        "2" => 2,
        _ => {
            return Err(format!(
                "'{a}': invalid stick table track ID (0, 1 or 2: the max allowed ID is 2)"
            ))
        }
    };
    Ok((idx, n))
}

pub(super) fn is_var_action(a: &str) -> bool {
    ["set-var(", "set-var-fmt(", "unset-var("]
        .iter()
        .any(|p| a.starts_with(p))
}

/// `set-var(VAR) EXPR`, `set-var-fmt(VAR) FMT`, `unset-var(VAR)`.
pub(super) fn parse_var_action(
    kw: &str,
    action: &str,
    args: &[String],
    scope: Scope,
) -> Result<VarAction, String> {
    let (verb, rest) = action.split_once('(').unwrap_or((action, ""));
    let Some(var) = rest.strip_suffix(')') else {
        return Err(format!("missing ')' in '{kw} {action}'"));
    };
    let (var, conds) = match var.split_once(',') {
        Some((v, c)) if verb != "unset-var" => (
            v,
            crate::sample::vars::cond::parse(c).map_err(|e| format!("'{kw} {action}': {e}"))?,
        ),
        Some(_) => return Err(format!("'{kw} {action}': unset-var takes no condition")),
        None => (var, 0),
    };
    let mut r = VarRef::parse(var)?;
    r.conds = conds;
    match (verb, args) {
        ("set-var", [e]) => Ok(VarAction::Set(
            r,
            Box::new(Expr::parse(e, scope).map_err(|e| format!("'{kw} {action}': {e}"))?),
        )),
        ("set-var-fmt", [f]) => Ok(VarAction::SetFmt(
            r,
            LfFormat::parse(f, scope).map_err(|e| format!("'{kw} {action}': {e}"))?,
        )),
        ("unset-var", []) => Ok(VarAction::Unset(r)),
        ("unset-var", _) => Err(format!("'{kw} {action}' takes no argument")),
        _ => Err(format!("'{kw} {action}' expects one expression")),
    }
}

/// Where a proxy's `http-request` rules run: a frontend's before any
/// backend is chosen, a backend's (or a listen section's) after.
pub(in crate::config) fn request_scope(px: &Proxy) -> Scope {
    Scope::Request {
        backend: px.kind.is_backend(),
    }
}

/// `set-header|add-header NAME FMT`, `del-header NAME` of `http-request`
/// and `http-response` rules: one parser for both.
fn parse_header_edit(
    kw: &str,
    action: &str,
    args: &[String],
    scope: Scope,
) -> Result<HeaderEdit, String> {
    // HAProxy 2.6 takes an empty word ("") as a missing argument.
    let (op, n, v) = match (action, args) {
        ("set-header", [n, v]) if !v.is_empty() => (EditOp::Set, n, Some(v)),
        ("add-header", [n, v]) if !v.is_empty() => (EditOp::Add, n, Some(v)),
        ("del-header", [n]) => (EditOp::Del, n, None),
        ("del-header", [n, m, x]) if m == "-m" && x == "str" => (EditOp::Del, n, None),
        ("del-header", _) => return Err(format!("'{kw} del-header' expects NAME")),
        _ => return Err(format!("'{kw} {action}' expects NAME VALUE")),
    };
    let name = header_name(n)?;
    let value = match v {
        Some(v) => LfFormat::parse_http(&header_value(v)?, scope)
            .map_err(|e| format!("'{kw} {action} {name}': {e}"))?,
        None => LfFormat::parse("", scope)?,
    };
    Ok(HeaderEdit { op, name, value })
}

/// `http-request early-hint NAME FMT`: HAProxy's two arguments, a name
/// and a log-format value.
fn parse_early_hint(args: &[String], scope: Scope) -> Result<HeaderEdit, String> {
    let [n, v] = args else {
        return Err("'http-request early-hint' expects exactly 2 arguments".to_string());
    };
    let name = header_name(n)?;
    let value = LfFormat::parse(&header_value(v)?, scope)
        .map_err(|e| format!("'http-request early-hint {name}': {e}"))?;
    Ok(HeaderEdit {
        op: EditOp::Set,
        name,
        value,
    })
}
