//! The keywords of `frontend`, `backend`, `listen` and `defaults`
//! sections, one line at a time, into a [`Proxy`].
//!
//! Each keyword first says where it belongs ([`Ctx::allow`](super::Ctx)):
//! a frontend keyword in a backend, or a keyword `defaults` cannot hold,
//! is an error naming the section, as in HAProxy. `defaults` values are
//! copied into each proxy when its header is read, so a keyword here only
//! ever writes the section being read. Conditions name ACLs declared above
//! the line. The larger groups have files of their own: `option` lines in
//! [`options`](super::options), `server` lines in [`server`](super::server),
//! `bind` in [`bind`](super::bind), `http-check` in
//! [`checks`](super::checks), rule actions in [`rules`](super::rules),
//! errorfiles and replies in [`reply`](super::reply); `balance`, `stats`,
//! `compression` and `serve-files` are read here.

use std::path::PathBuf;

use super::bind::parse_bind;
use super::checks::http_check_kw;
use super::global::check_node_name;
use super::log::parse_log_target;
use super::options::{parse_tcpka_param, proxy_option};
use super::reply::{errorfile_code, parse_reply, read_errorfile, set_errorfile, static_reply};
use super::rules::{http_response_kw, parse_http_request, parse_redirect, request_scope};
use super::server::{nonzero_time, parse_server_opts, server_kw};
use super::{arg, cond_of, split_cond, Ctx, BE, FE};
use crate::config::acl::parse_condition;
use crate::config::types::*;
use crate::config::values::*;
use crate::sample::{Expr, LogFormat as LfFormat, Scope};

/// Keywords of proxy sections, for "did you mean" hints.
const PROXY_KEYWORDS: &[&str] = &[
    "external-check",
    "max-session-srv-conns",
    "stick-table",
    "filter",
    "stick",
    "mode",
    "timeout",
    "maxconn",
    "rate-limit",
    "fullconn",
    "max-keep-alive-queue",
    "dynamic-cookie-key",
    "email-alert",
    "option",
    "log",
    "bind",
    "default_backend",
    "use_backend",
    "acl",
    "http-request",
    "redirect",
    "http-response",
    "errorfile",
    "errorfiles",
    "http-error",
    "errorloc",
    "errorloc302",
    "errorloc303",
    "backlog",
    "id",
    "description",
    "source",
    "stats",
    "balance",
    "dispatch",
    "retries",
    "retry-on",
    "http-reuse",
    "default-server",
    "server",
    "http-check",
    "load-server-state-from-file",
    "server-state-file-name",
    "serve-files",
    "compression",
    "hash-type",
    "hash-balance-factor",
    "clitcpka-idle",
    "clitcpka-intvl",
    "clitcpka-cnt",
    "srvtcpka-idle",
    "srvtcpka-intvl",
    "srvtcpka-cnt",
    "tcp-request",
    "tcp-response",
    "tcp-check",
    "cookie",
    "unique-id-format",
    "unique-id-header",
    "http-send-name-header",
    "log-tag",
    "log-format-sd",
    "error-log-format",
    "disabled",
    "enabled",
    "monitor-uri",
    "monitor",
    "force-persist",
    "ignore-persist",
];

/// HAProxy 2.6's filters ebb does not have (`filter NAME`).
const HAPROXY_FILTERS_UNSUPPORTED: &[&str] = &["opentracing", "spoe", "trace"];

/// `use-fcgi-app NAME` or `filter fcgi-app NAME`: one application per
/// backend (the same one may be named again).
fn set_fcgi_app(px: &mut Proxy, kw: &str, name: &str, loc: &Loc) -> Result<(), String> {
    match &px.fcgi_app {
        Some(a) if a.value != name => {
            Err(format!("'{kw}' : only one fcgi-app supported per backend"))
        }
        Some(_) => Ok(()),
        None => {
            px.fcgi_app = Some(Spanned {
                value: name.to_string(),
                loc: loc.clone(),
            });
            Ok(())
        }
    }
}

/// `filter compression` or `filter cache NAME` (HAProxy 2.6 `parse_filter`
/// and the two filters' parsers, with their messages).
fn parse_filter(px: &mut Proxy, ctx: &Ctx<'_>, w: &[String]) -> Result<(), String> {
    let Some(name) = w.get(1) else {
        return Err(format!(
            "missing argument for 'filter' in {} '{}'.",
            px.kind.type_str(),
            px.name
        ));
    };
    let (cache, rest) = match name.as_str() {
        "compression" => {
            if px.filters.iter().any(|f| f.cache.is_none()) {
                return Err(format!(
                    "'filter' : '{}: Proxy supports only one compression filter'",
                    px.name
                ));
            }
            (None, &w[2..])
        }
        "cache" => {
            let Some(c) = w.get(2) else {
                return Err("'filter' : 'cache : expects a <name> argument'".into());
            };
            if px.filters.iter().any(|f| f.cache.as_ref() == Some(c)) {
                return Err(format!(
                    "'filter' : '{}: multiple explicit declarations of the cache filter '{c}''",
                    px.name
                ));
            }
            (Some(c.clone()), &w[3..])
        }
        "fcgi-app" => {
            let Some(app) = w.get(2) else {
                return Err("'filter' : 'fcgi-app : expects a <name> argument'".into());
            };
            if let Some(x) = w.get(3) {
                return Err(format!("'filter {name}' : unknown keyword '{x}'."));
            }
            // Its place among the filters changes nothing ebb does.
            return set_fcgi_app(px, "filter fcgi-app", app, ctx.loc);
        }
        n if HAPROXY_FILTERS_UNSUPPORTED.contains(&n) => {
            return Err(format!("HAProxy filter '{n}' is not supported by ebb"))
        }
        n => {
            return Err(format!(
                "'filter' : unknown keyword '{n}' (supported: cache, compression, fcgi-app{})",
                if n.starts_with("bwlim") {
                    "; the bandwidth limitation filters came with HAProxy 2.7"
                } else {
                    ""
                }
            ))
        }
    };
    if let Some(x) = rest.first() {
        return Err(format!("'filter {name}' : unknown keyword '{x}'."));
    }
    px.filters.push(FilterDecl {
        cache,
        loc: ctx.loc.clone(),
    });
    Ok(())
}

/// The one argument of `kw`, a field name (`unique-id-header NAME`).
fn header_name_arg<'a>(kw: &str, w: &'a [String]) -> Result<&'a str, String> {
    let [_, h] = w else {
        return Err(format!("'{kw}' expects a header name"));
    };
    if !crate::net::is_token(h) {
        return Err(format!("'{kw}': invalid header name '{h}'"));
    }
    Ok(h)
}

pub(super) fn proxy_kw(px: &mut Proxy, ctx: &Ctx<'_>, words: &[String]) -> Result<(), String> {
    let (no, w) = if words[0] == "no" {
        if words.len() < 2 {
            return Err("'no' expects a keyword".to_string());
        }
        (true, &words[1..])
    } else {
        (false, words)
    };
    let kw = w[0].as_str();
    if no && kw != "option" && kw != "log" {
        return Err(format!("'no {kw}' is not supported"));
    }
    let loc = ctx.loc;
    match kw {
        "grace" => {
            // HAProxy 2.6 refuses it too (global `grace` is another keyword).
            return Err(
                "the 'grace' keyword is not supported any more since HAProxy version 2.5"
                    .to_string(),
            );
        }
        "email-alert" => {
            ctx.allow(kw, FE | BE, true)?;
            crate::config::mailers::email_alert_kw(&mut px.email_alert, w)?;
        }
        "mode" => {
            ctx.allow(kw, FE | BE, true)?;
            match arg(w, 1, kw)? {
                "http" | "tcp" if w.len() > 2 => {
                    return Err("'mode' expects exactly one argument".to_string())
                }
                "http" => px.mode = ProxyMode::Http,
                "tcp" => px.mode = ProxyMode::Tcp,
                m => return Err(format!("unknown mode '{m}' (expected http or tcp)")),
            }
        }
        "timeout" => {
            let which = arg(w, 1, kw)?;
            let caps = match which {
                "client" => FE,
                "server" | "connect" | "queue" | "tunnel" | "check" => BE,
                "http-request" | "http-keep-alive" | "tarpit" => FE | BE,
                o => {
                    return Err(format!(
                        "unknown timeout '{o}' (supported: client, server, connect, http-request, http-keep-alive, queue, tunnel, check, tarpit)"
                    ))
                }
            };
            ctx.allow(&format!("timeout {which}"), caps, true)?;
            let v = arg(w, 2, &format!("timeout {which}"))?;
            if w.len() > 3 {
                return Err(format!("'timeout {which}' expects exactly one argument"));
            }
            let d = parse_time(v)?;
            // A zero timeout means "none", as in HAProxy.
            let d = if d.is_zero() { None } else { Some(d) };
            let t = &mut px.timeouts;
            match which {
                "client" => t.client = d,
                "server" => t.server = d,
                "connect" => t.connect = d,
                "queue" => t.queue = d,
                "tunnel" => t.tunnel = d,
                "check" => t.check = d,
                "http-request" => t.http_request = d,
                "tarpit" => t.tarpit = d,
                _ => t.http_keep_alive = d,
            }
        }
        "maxconn" => {
            ctx.allow(kw, FE, true)?;
            if w.len() != 2 {
                return Err("'maxconn' expects exactly one argument".to_string());
            }
            px.maxconn = Some(parse_u32_range(kw, &w[1], 1, u32::MAX)?);
        }
        "option" => proxy_option(px, ctx, no, w)?,
        "log" => {
            ctx.allow(kw, FE | BE, true)?;
            if no {
                if w.len() > 1 {
                    return Err("'no log' takes no argument".to_string());
                }
                px.log.clear();
            } else if w.get(1).map(String::as_str) == Some("global") {
                if w.len() > 2 {
                    return Err("'log global' takes no argument".to_string());
                }
                px.log.push(ProxyLog::Global);
            } else {
                px.log
                    .push(ProxyLog::Target(parse_log_target(&w[1..], loc)?));
            }
        }
        "bind" => {
            ctx.allow(kw, FE, false)?;
            let b = parse_bind(&w[1..], ctx)?;
            px.binds.push(b);
        }
        "default_backend" => {
            ctx.allow(kw, FE, true)?;
            if w.len() != 2 {
                return Err("'default_backend' expects a backend name".to_string());
            }
            px.default_backend = Some(Spanned {
                value: w[1].clone(),
                loc: loc.clone(),
            });
        }
        "use-fcgi-app" => {
            if ctx.defaults || ctx.caps & BE == 0 {
                // HAProxy's words.
                return Err(format!(
                    "'{kw}' only available in backend or listen section"
                ));
            }
            let [_, name] = w else {
                return Err(format!("'{kw}' expects <name> as argument"));
            };
            set_fcgi_app(px, kw, name, loc)?;
        }
        "use_backend" => {
            ctx.allow(kw, FE, false)?;
            let (args, c) = split_cond(&w[1..]);
            let name = match args {
                [n] => n.clone(),
                [] => return Err("'use_backend' expects a backend name".to_string()),
                _ => {
                    return Err(
                        "'use_backend' expects a backend name then 'if' or 'unless'".to_string()
                    )
                }
            };
            // HAProxy: a name with a log-format sequence is dynamic.
            let dynamic = if name.contains('%') {
                Some(LfFormat::parse(&name, Scope::Request { backend: false })?)
            } else {
                None
            };
            let cond = cond_of(c, px, loc)?;
            px.use_backends.push(UseBackend {
                backend: name,
                dynamic,
                cond,
                loc: loc.clone(),
            });
        }
        "acl" => {
            ctx.allow(kw, FE | BE, false)?;
            let name = arg(w, 1, kw)?;
            crate::config::acl::declare(&mut px.acls, name, &w[2..], loc)?;
        }
        "tcp-request" | "tcp-response" => {
            let which = w.get(1).map_or("", String::as_str);
            let caps = match (kw, which) {
                ("tcp-response", _) => BE,
                (_, "connection" | "session") => FE,
                _ => FE | BE,
            };
            // HAProxy 2.5+: in named defaults sections only; the rules
            // run before the inheriting proxy's own.
            ctx.allow(kw, caps, true)?;
            if ctx.anon_defaults {
                return Err(format!(
                    "'{kw} {which}' is not allowed in anonymous 'defaults' sections (name the section, as HAProxy requires)"
                ));
            }
            if kw == "tcp-request" {
                crate::config::tcpreq::parse(px, &w[1..], loc)?;
            } else {
                crate::config::tcpreq::parse_response(px, &w[1..], loc)?;
            }
        }
        "http-request" => {
            ctx.allow_rules(kw)?;
            let rule = parse_http_request(px, ctx, &w[1..])?;
            misplaced(px, loc, kw, Later::Redirect);
            // Before the `redirect` lines: HAProxy runs every
            // `http-request` rule first (and warns of one placed after).
            let at = px
                .http_request
                .iter()
                .position(|r| matches!(&r.action, HttpRequestAction::Redirect(rd) if rd.late))
                .unwrap_or(px.http_request.len());
            px.http_request.insert(at, rule);
        }
        "redirect" => {
            ctx.allow(kw, FE | BE, false)?;
            misplaced(px, loc, kw, Later::UseBackend);
            let (args, c) = split_cond(&w[1..]);
            let mut r = parse_redirect(args, request_scope(px), false)?;
            r.late = true;
            let cond = cond_of(c, px, loc)?;
            px.http_request.push(HttpRequestRule {
                action: HttpRequestAction::Redirect(r),
                cond,
                loc: loc.clone(),
            });
        }
        "cookie" => {
            ctx.allow(kw, BE, true)?;
            px.cookie = Some(crate::config::cookie::parse(&w[1..])?);
        }
        "use-server" => {
            ctx.allow(kw, BE, false)?;
            let Some(name) = w.get(1).filter(|n| !n.is_empty()) else {
                return Err("'use-server' expects a server name".to_string());
            };
            let (args, c) = split_cond(&w[2..]);
            if !args.is_empty() || c.is_none() {
                return Err(
                    "'use-server' requires either 'if' or 'unless' followed by a condition"
                        .to_string(),
                );
            }
            let cond =
                cond_of(c, px, ctx.loc)?.ok_or("'use-server' needs a condition".to_string())?;
            // A name with `%` is a log-format string (HAProxy keeps a
            // string that is text only as a plain name).
            let scope = crate::sample::Scope::Request { backend: true };
            let f = crate::sample::LogFormat::parse(name, scope)?;
            let target = match f.as_text() {
                Some(t) => UseServerTarget::Name(t),
                None => UseServerTarget::Format(f),
            };
            px.use_server.push(UseServer {
                target,
                cond,
                loc: ctx.loc.clone(),
            });
        }
        "force-persist" | "ignore-persist" => {
            // HAProxy evaluates the backend's rules only.
            ctx.allow(kw, BE, false)?;
            let (args, c) = split_cond(&w[1..]);
            if !args.is_empty() || c.is_none() {
                return Err(format!("'{kw}' expects 'if' or 'unless' and a condition"));
            }
            let cond =
                cond_of(c, px, ctx.loc)?.ok_or_else(|| format!("'{kw}' needs a condition"))?;
            px.persist_rules.push((kw == "force-persist", cond));
        }
        "unique-id-format" => {
            ctx.allow(kw, FE, true)?;
            let [_, f] = w else {
                return Err("'unique-id-format' expects one format string (quote it)".to_string());
            };
            let scope = crate::sample::Scope::Request { backend: false };
            px.unique_id_format = Some(crate::sample::LogFormat::parse_http(f, scope)?);
        }
        "monitor-uri" => {
            ctx.allow(kw, FE, true)?;
            let [_, u] = w else {
                return Err("'monitor-uri' expects an URI".to_string());
            };
            px.monitor_uri = Some(u.clone());
        }
        "monitor" => {
            ctx.allow(kw, FE, false)?;
            let (args, c) = split_cond(&w[1..]);
            if args != ["fail"] || c.is_none() {
                return Err(
                    "'monitor' expects 'fail' followed by 'if' or 'unless' and a condition"
                        .to_string(),
                );
            }
            let cond = cond_of(c, px, ctx.loc)?.ok_or("'monitor fail' needs a condition")?;
            misplaced(px, loc, "monitor fail", Later::HttpRequest);
            px.monitor_fail.push(cond);
        }
        "unique-id-header" => {
            ctx.allow(kw, FE, true)?;
            px.unique_id_header = Some(header_name_arg(kw, w)?.to_string());
        }
        "disabled" | "enabled" => {
            ctx.allow(kw, FE | BE, true)?;
            if w.len() > 1 {
                return Err(format!("'{kw}' takes no argument"));
            }
            px.disabled = (kw == "disabled").then(|| loc.clone());
        }
        "log-tag" => {
            ctx.allow(kw, FE | BE, true)?;
            let [_, t] = w else {
                return Err("'log-tag' expects one tag for use in syslog".to_string());
            };
            px.log_tag = Some(t.clone());
        }
        "http-send-name-header" => {
            ctx.allow(kw, BE, true)?;
            // HAProxy 2.6 requires the name (no default field).
            px.send_name_header = Some(header_name_arg(kw, w)?.to_ascii_lowercase());
        }
        "log-format" | "log-format-sd" | "error-log-format" => {
            ctx.allow(kw, FE, true)?;
            let [_, f] = w else {
                return Err(format!("'{kw}' expects one format string (quote it)"));
            };
            let l = Some(Spanned {
                value: crate::sample::logline::LogLine::parse(f)?,
                loc: loc.clone(),
            });
            match kw {
                "log-format" => px.log_format = l,
                "log-format-sd" => px.log_format_sd = l,
                _ => px.error_log_format = l,
            }
        }
        "capture" => {
            ctx.allow(kw, FE, false)?;
            let (response, name, len) = match &w[1..] {
                [side, h, name, l, n] if h == "header" && l == "len" => {
                    let response = match side.as_str() {
                        "request" => false,
                        "response" => true,
                        o => {
                            return Err(format!(
                                "'capture {o}': expected 'capture request header' or 'capture response header'"
                            ))
                        }
                    };
                    (
                        response,
                        name,
                        parse_u32_range("capture len", n, 1, 65_536)?,
                    )
                }
                [c, name, l, n] if c == "cookie" && l == "len" => {
                    if px.capture_cookie.is_some() {
                        return Err("only one 'capture cookie' is allowed per frontend".to_string());
                    }
                    px.capture_cookie = Some(crate::config::cookie::CaptureCookie {
                        name: name.clone(),
                        len: parse_u32_range("capture cookie len", n, 1, 65_536)? as usize,
                    });
                    return Ok(());
                }
                _ => return Err(
                    "'capture' expects 'request header NAME len N' or 'response header NAME len N'"
                        .to_string(),
                ),
            };
            if !crate::net::is_token(name) {
                return Err(format!("'capture': invalid header name '{name}'"));
            }
            px.captures.push(crate::sample::logline::CaptureHdr {
                response,
                name: Some(name.to_ascii_lowercase()),
                len: len as usize,
            });
        }
        "declare" => {
            ctx.allow(kw, FE, false)?;
            let [_, c, side, l, n] = w else {
                return Err("'declare' expects 'capture request|response len N'".to_string());
            };
            if c != "capture" || l != "len" {
                return Err("'declare' expects 'capture request|response len N'".to_string());
            }
            let response = match side.as_str() {
                "request" => false,
                "response" => true,
                o => {
                    return Err(format!(
                        "'declare capture {o}': expected request or response"
                    ))
                }
            };
            px.captures.push(crate::sample::logline::CaptureHdr {
                response,
                name: None,
                len: parse_u32_range("declare capture len", n, 1, 65_536)? as usize,
            });
        }
        "http-response" | "http-after-response" => http_response_kw(px, ctx, kw, w)?,
        "errorfile" => {
            ctx.allow(kw, FE | BE, true)?;
            let [_, code, file] = w else {
                return Err("'errorfile' expects CODE FILE".to_string());
            };
            let e = read_errorfile(ctx, code, file)?;
            px.error_replies.retain(|(s, _)| *s != e.status);
            set_errorfile(&mut px.errorfiles, e);
        }
        "http-error" => {
            ctx.allow(kw, FE | BE, true)?;
            if w.get(1).map(String::as_str) != Some("status") {
                return Err("'http-error' expects 'status CODE' first".to_string());
            }
            let code = arg(w, 2, "http-error status")?;
            let status = errorfile_code("http-error", code)?;
            let r = parse_reply("http-error", &w[1..], ctx, request_scope(px), false)?;
            px.error_replies.retain(|(s, _)| *s != status);
            match &r.body {
                ReturnBody::Errorfile(Some(raw)) => set_errorfile(
                    &mut px.errorfiles,
                    ErrorFile {
                        status,
                        path: PathBuf::new(),
                        content: raw.clone(),
                        loc: ctx.loc.clone(),
                    },
                ),
                // The proxy's errorfile for the status goes: ebb's page.
                ReturnBody::Errorfile(None) => px.errorfiles.retain(|e| e.status != status),
                _ => match static_reply(&r) {
                    Some(raw) => set_errorfile(
                        &mut px.errorfiles,
                        ErrorFile {
                            status,
                            path: PathBuf::new(),
                            content: raw,
                            loc: ctx.loc.clone(),
                        },
                    ),
                    None => {
                        px.errorfiles.retain(|e| e.status != status);
                        px.error_replies.push((status, r));
                    }
                },
            }
        }
        "source" => {
            ctx.allow(kw, BE, true)?;
            let Some(a) = w.get(1) else {
                return Err("'source' expects <addr>[:<port>] as argument".to_string());
            };
            match w.get(2).map(String::as_str) {
                None => {}
                Some("usesrc") => {
                    return Err("'source ... usesrc' (connecting from the client's or another foreign address) is not supported by ebb".to_string())
                }
                Some("interface") => {
                    return Err("'source ... interface' is not supported by ebb".to_string())
                }
                Some(x) => return Err(format!("unexpected argument '{x}' after 'source {a}'")),
            }
            if a.rsplit(':').next().is_some_and(|p| p.contains('-')) {
                return Err(format!(
                    "'source {a}': port ranges are not supported by ebb"
                ));
            }
            let (host, port) = parse_server_addr(a)?;
            let ip: std::net::IpAddr =
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| format!("'source' expects an IP address, not '{host}'"))?;
            px.source = Some(Spanned {
                value: std::net::SocketAddr::new(ip, port),
                loc: ctx.loc.clone(),
            });
        }
        "fullconn" => {
            ctx.allow(kw, BE, true)?;
            let [_, n] = w else {
                return Err("'fullconn' expects an integer argument".to_string());
            };
            // HAProxy's atol: 0 is "unset" (the default is computed).
            px.fullconn = Some(parse_u32_range(kw, n, 0, i32::MAX as u32)?).filter(|n| *n > 0);
        }
        "dynamic-cookie-key" => {
            ctx.allow(kw, BE, true)?;
            // HAProxy takes the first word (later ones are not looked at).
            let Some(k) = w.get(1).filter(|k| !k.is_empty()) else {
                return Err("'dynamic-cookie-key' expects <secret_key> as argument.".to_string());
            };
            px.dynamic_cookie_key = Some(k.clone());
        }
        "max-keep-alive-queue" => {
            ctx.allow(kw, BE, true)?;
            let [_, n] = w else {
                return Err(
                    "'max-keep-alive-queue' expects an integer value (or -1 to disable)"
                        .to_string(),
                );
            };
            // HAProxy's strtol (base 0); -1 (its default) is no limit.
            px.max_keep_alive_queue = match n.as_str() {
                "-1" => None,
                n => Some(parse_c_uint(n).filter(|v| *v < i32::MAX as u32).ok_or_else(|| {
                    format!("'max-keep-alive-queue': '{n}' is not an integer from -1 to 2147483646")
                })?),
            };
        }
        "rate-limit" => {
            ctx.allow(kw, FE, true)?;
            // HAProxy's only kind, and its integer reading (strtoul, base
            // 0: `0x10` and `010` are numbers too).
            if arg(w, 1, kw)? != "sessions" {
                return Err(format!(
                    "'rate-limit' only supports 'sessions' (got '{}')",
                    w[1]
                ));
            }
            let [_, _, n] = w else {
                return Err(
                    "'rate-limit sessions' expects an integer value (in sessions/second)"
                        .to_string(),
                );
            };
            px.rate_limit_sessions = parse_c_uint(n).ok_or_else(|| {
                format!("'rate-limit sessions': '{n}' is not an integer in range 0..4294967295")
            })?;
        }
        "backlog" => {
            ctx.allow(kw, FE, true)?;
            let [_, n] = w else {
                return Err("'backlog' expects an integer argument".to_string());
            };
            // 0: the default, as HAProxy's unset value.
            let n: u32 = n
                .parse()
                .ok()
                .filter(|n| i32::try_from(*n).is_ok())
                .ok_or_else(|| format!("'backlog' expects an integer argument, not '{n}'"))?;
            px.backlog = (n > 0).then_some(n);
        }
        "id" => {
            if ctx.defaults {
                return Err("'id' not allowed in 'defaults' section".to_string());
            }
            let [_, n] = w else {
                return Err("'id' expects an integer argument".to_string());
            };
            let n: u32 = n
                .parse()
                .ok()
                .filter(|n| *n > 0 && i32::try_from(*n).is_ok())
                .ok_or_else(|| format!("custom id has to be > 0 (not '{n}')"))?;
            px.id = Some(Spanned {
                value: n,
                loc: ctx.loc.clone(),
            });
        }
        "description" => {
            if ctx.defaults {
                return Err("'description' not allowed in 'defaults' section".to_string());
            }
            if w.len() < 2 {
                return Err("'description' expects a string argument".to_string());
            }
            // HAProxy joins the words with one space.
            px.description = Some(w[1..].join(" "));
        }
        "errorloc" | "errorloc302" | "errorloc303" => {
            ctx.allow(kw, FE | BE, true)?;
            let [_, code, url] = w else {
                return Err(format!(
                    "'{kw}' expects <status_code> and <url> as arguments"
                ));
            };
            let status = errorfile_code(kw, code)?;
            if url.is_empty() || url.bytes().any(|b| b.is_ascii_control()) {
                return Err(format!(
                    "'{kw}': the URL must be a non-empty field value without control characters"
                ));
            }
            // HAProxy's answer (http_htx.c): a redirect with no body and
            // no caching, in place of the status ebb would send.
            let what = if kw == "errorloc303" {
                "303 See Other"
            } else {
                "302 Found"
            };
            let content = format!(
                "HTTP/1.1 {what}\r\nCache-Control: no-cache\r\nContent-length: 0\r\nLocation: {url}\r\n\r\n"
            );
            px.error_replies.retain(|(s, _)| *s != status);
            set_errorfile(
                &mut px.errorfiles,
                ErrorFile {
                    status,
                    path: PathBuf::new(),
                    content: content.into_bytes(),
                    loc: ctx.loc.clone(),
                },
            );
        }
        "errorfiles" => {
            ctx.allow(kw, FE | BE, true)?;
            let Some(name) = w.get(1) else {
                return Err("'errorfiles' expects the name of an http-errors section".to_string());
            };
            let Some(sec) = ctx.http_errors.iter().find(|s| &s.name == name) else {
                return Err(format!(
                    "'errorfiles {name}': no http-errors section '{name}' declared before this line"
                ));
            };
            let mut codes = Vec::new();
            for c in &w[2..] {
                codes.push(errorfile_code("errorfiles", c)?);
            }
            for e in &sec.files {
                if codes.is_empty() || codes.contains(&e.status) {
                    px.error_replies.retain(|(s, _)| *s != e.status);
                    set_errorfile(&mut px.errorfiles, e.clone());
                }
            }
        }
        "stats" => parse_stats(px, ctx, w)?,
        "balance" => {
            ctx.allow(kw, BE, true)?;
            px.balance = parse_balance(&w[1..])?;
            px.balance_set = true;
        }
        "dispatch" => {
            if ctx.defaults {
                return Err("'dispatch' is not allowed in a 'defaults' section".to_string());
            }
            ctx.allow(kw, BE, false)?;
            let [_, a] = w else {
                return Err("'dispatch' expects exactly one argument: ADDR:PORT".to_string());
            };
            px.dispatch = Some(Spanned {
                value: crate::config::values::parse_host_port(a)?,
                loc: ctx.loc.clone(),
            });
        }
        "hash-type" => {
            ctx.allow(kw, BE, true)?;
            let bf = px.hash_type.balance_factor;
            px.hash_type = parse_hash_type(&w[1..])?;
            px.hash_type.balance_factor = bf;
        }
        "hash-balance-factor" => {
            ctx.allow(kw, BE, true)?;
            let n = arg(w, 1, "hash-balance-factor")?;
            let f: u32 = n
                .parse()
                .map_err(|_| format!("'hash-balance-factor' expects a number, not '{n}'"))?;
            if f != 0 && f <= 100 {
                return Err("'hash-balance-factor' must be 0 or greater than 100.".to_string());
            }
            if let Some(x) = w.get(2) {
                return Err(format!(
                    "unexpected argument '{x}' after 'hash-balance-factor'"
                ));
            }
            px.hash_type.balance_factor = f;
        }
        "retries" => {
            ctx.allow(kw, BE, true)?;
            if w.len() != 2 {
                return Err("'retries' expects exactly one argument".to_string());
            }
            // HAProxy accepts any count; more than 100 is surely a mistake.
            px.retries = parse_u32_range(kw, &w[1], 0, 100)?;
        }
        "retry-on" => {
            ctx.allow(kw, BE, true)?;
            px.retry_on = parse_retry_on(&w[1..])?;
        }
        "http-reuse" => {
            ctx.allow(kw, BE, true)?;
            px.http_reuse = match w {
                [_, m] => match m.as_str() {
                    "never" => HttpReuse::Never,
                    "safe" => HttpReuse::Safe,
                    "aggressive" => HttpReuse::Aggressive,
                    "always" => HttpReuse::Always,
                    o => {
                        return Err(format!(
                            "unknown 'http-reuse' mode '{o}' (expected never, safe, aggressive or always)"
                        ))
                    }
                },
                _ => return Err("'http-reuse' expects exactly one argument".to_string()),
            };
        }
        "default-server" => {
            ctx.allow(kw, BE, true)?;
            parse_server_opts(&w[1..], &mut px.default_server, ctx)?;
            if px.default_server.id.take().is_some() {
                // HAProxy's keyword table: `id` is not for default-server.
                return Err(
                    "'id' option is not accepted in default-server sections (HAProxy's alert)"
                        .into(),
                );
            }
        }
        "server" => {
            ctx.allow(kw, BE, false)?;
            server_kw(px, ctx, w)?;
        }
        "server-template" => {
            ctx.allow(kw, BE, false)?;
            let mut opts = px.default_server.clone();
            parse_server_opts(w.get(4..).unwrap_or(&[]), &mut opts, ctx)?;
            let slots = crate::config::resolvers::server_template(w, opts, loc)?;
            for s in &slots {
                if px.servers.iter().any(|x| x.name == s.name) {
                    return Err(format!(
                        "server-template: server '{}' already exists",
                        s.name
                    ));
                }
            }
            px.servers.extend(slots);
        }
        "tcp-check" => {
            ctx.allow(kw, BE, true)?;
            match w.get(1).map(String::as_str) {
                Some(a) if super::rules::is_var_action(a) => {
                    let va = super::checks::check_var_action("tcp-check", a, &w[2..])?;
                    px.tcp_check.rules.push(crate::config::TcpCheckRule {
                        step: crate::config::TcpCheckStep::Var(va),
                        comment: None,
                        loc: loc.clone(),
                    });
                }
                _ => crate::config::tcpcheck::parse(&mut px.tcp_check, &w[1..], loc)?,
            }
        }
        "http-check" => {
            ctx.allow(kw, BE, true)?;
            http_check_kw(px, w, loc)?;
        }
        "load-server-state-from-file" => {
            ctx.allow(kw, BE, true)?;
            let v = match w {
                [_, m] => match m.as_str() {
                    "global" => LoadServerState::Global,
                    "local" => LoadServerState::Local,
                    "none" => LoadServerState::None,
                    o => {
                        return Err(format!(
                            "'load-server-state-from-file' expects global, local or none, got '{o}'"
                        ))
                    }
                },
                _ => {
                    return Err(
                        "'load-server-state-from-file' expects global, local or none".to_string(),
                    )
                }
            };
            px.load_server_state = Some(Spanned {
                value: v,
                loc: loc.clone(),
            });
        }
        "server-state-file-name" => {
            ctx.allow(kw, BE, false)?;
            px.server_state_file_name = Some(match w {
                [_] => px.name.clone(),
                [_, f] if f == "use-backend-name" => px.name.clone(),
                [_, f] => f.clone(),
                _ => return Err("'server-state-file-name' takes at most one argument".into()),
            });
        }
        "stick-table" => {
            ctx.allow(kw, FE | BE, false)?;
            let words: Vec<&str> = w[1..].iter().map(String::as_str).collect();
            let def = crate::table::parse_stick_table(&px.name, &words).map_err(|e| e.0)?;
            if let Some(t) = &px.stick_table {
                return Err(format!(
                    "only one 'stick-table' per proxy (the first is at {})",
                    t.loc
                ));
            }
            px.stick_table = Some(Spanned {
                value: def,
                loc: ctx.loc.clone(),
            });
        }
        "stick" => {
            ctx.allow(kw, BE, false)?;
            let (args, c) = split_cond(&w[1..]);
            let kind = match args.first().map(String::as_str) {
                Some("on") => StickKind::On,
                Some("match") => StickKind::Match,
                Some("store-request") => StickKind::StoreRequest,
                Some("store-response") => StickKind::StoreResponse,
                _ => {
                    return Err(
                        "'stick' expects on, match, store-request or store-response".to_string()
                    )
                }
            };
            let (pat, table) = match &args[1..] {
                [p] => (p, None),
                [p, t, name] if t == "table" => (p, Some(name.clone())),
                _ => {
                    return Err(format!(
                        "'stick {}' expects a pattern and an optional 'table NAME'",
                        args[0]
                    ))
                }
            };
            let scope = if kind == StickKind::StoreResponse {
                Scope::Response
            } else {
                Scope::Request { backend: true }
            };
            let pattern =
                Expr::parse(pat, scope).map_err(|e| format!("'stick {}': {e}", args[0]))?;
            crate::sample::note_table_ref(table.clone());
            let cond = cond_of(c, px, ctx.loc)?;
            px.stick_rules.push(StickRule {
                kind,
                pattern,
                table,
                cond,
                loc: ctx.loc.clone(),
            });
        }
        "filter" => {
            ctx.allow(kw, FE | BE, false)?;
            parse_filter(px, ctx, w)?;
        }
        "compression" => {
            ctx.allow(kw, FE | BE, true)?;
            parse_compression(&mut px.compression, ctx, &w[1..])?;
        }
        "clitcpka-idle" | "clitcpka-intvl" | "clitcpka-cnt" | "srvtcpka-idle"
        | "srvtcpka-intvl" | "srvtcpka-cnt" => {
            let cli = kw.starts_with("cli");
            ctx.allow(kw, if cli { FE } else { BE }, true)?;
            let [_, v] = w else {
                return Err(format!("'{kw}' expects one value"));
            };
            let ka = if cli {
                &mut px.options.clitcpka
            } else {
                &mut px.options.srvtcpka
            };
            parse_tcpka_param(ka, &kw[9..], kw, v)?;
        }
        "external-check" => {
            ctx.allow(kw, BE, true)?;
            // HAProxy's words and messages (`proxy_parse_extcheck`).
            let what = w
                .get(1)
                .ok_or_else(|| format!("missing argument after '{kw}'."))?;
            if !matches!(what.as_str(), "command" | "path") {
                return Err(format!(
                    "'{kw}' only supports 'command' and 'path'. but got '{what}'."
                ));
            }
            let v = match &w[2..] {
                [v] if !v.is_empty() => v,
                [_] | [] => return Err(format!("missing argument after '{what}'.")),
                _ => return Err(format!("'{kw} {what}' takes one argument")),
            };
            let v = Some(Spanned {
                value: v.clone(),
                loc: loc.clone(),
            });
            match what.as_str() {
                "command" => px.ext_check.command = v,
                _ => px.ext_check.path = v,
            }
        }
        "max-session-srv-conns" => {
            ctx.allow(kw, FE, true)?;
            let n = w
                .get(1)
                .ok_or_else(|| format!("'{kw}' expects a number. Got no argument"))?;
            // HAProxy reads it with atoi(); ebb takes a plain number only.
            px.max_session_srv_conns = Some(
                n.parse::<u32>()
                    .map_err(|_| format!("'{kw}' expects a non-negative integer, got '{n}'"))?,
            );
            if let Some(x) = w.get(2) {
                return Err(format!("unexpected argument '{x}' after '{kw} {n}'"));
            }
        }
        "serve-files" => {
            ctx.allow(kw, BE, false)?;
            px.serve_files = Some(parse_serve_files(&w[1..], ctx)?);
        }
        _ => {
            return Err(format!(
                "unknown keyword '{kw}' in '{}' section{}",
                ctx.section_name,
                suggest(kw, PROXY_KEYWORDS)
            ))
        }
    }
    Ok(())
}

/// `retry-on KEYWORD...`: replaces what was set before (HAProxy's rule,
/// not cumulative); `none` only alone.
fn parse_retry_on(words: &[String]) -> Result<RetryOn, String> {
    if words.is_empty() {
        return Err("'retry-on' needs at least one keyword to specify when to retry".to_string());
    }
    let mut bits = 0;
    for w in words {
        bits |= match w.as_str() {
            "none" if words.len() == 1 => 0,
            "none" => return Err("'retry-on': 'none' is only usable alone".to_string()),
            "conn-failure" => RetryOn::CONN_FAILURE,
            "empty-response" => RetryOn::EMPTY_RESPONSE,
            "junk-response" => RetryOn::JUNK_RESPONSE,
            "response-timeout" => RetryOn::RESPONSE_TIMEOUT,
            "0rtt-rejected" => RetryOn::ZERO_RTT,
            "all-retryable-errors" => RetryOn::all_retryable(),
            o => match o.parse::<u16>().ok().and_then(RetryOn::status_bit) {
                Some(b) => b,
                None => {
                    return Err(format!(
                        "'retry-on': unknown keyword '{o}' (expected none, conn-failure, empty-response, junk-response, response-timeout, 0rtt-rejected, all-retryable-errors, 401, 403, 404, 408, 425, 500, 501, 502, 503 or 504)"
                    ))
                }
            },
        };
    }
    Ok(RetryOn(bits))
}

/// The `http-request` rules after an unconditional final one (return,
/// redirect, deny, allow, use-service...) of the same section: they never
/// run. HAProxy 2.6 warns at each (cfgparse-listen.c: "previous '...'
/// action is final and has no condition attached, further entries are
/// NOOP") and keeps them; ebb does the same (a warning at start).
pub fn unreachable_rules(px: &Proxy) -> Vec<String> {
    let is_final = |r: &HttpRequestRule| {
        r.cond.is_none()
            && !matches!(
                r.action,
                HttpRequestAction::Header(_)
                    | HttpRequestAction::EarlyHint(_)
                    | HttpRequestAction::Var(_)
                    | HttpRequestAction::TrackSc { .. }
                    | HttpRequestAction::ScIncGpc0(_)
                    | HttpRequestAction::ScIncGpc1(_)
                    | HttpRequestAction::ScSetGpt0(..)
                    | HttpRequestAction::ScIncGpc { .. }
                    | HttpRequestAction::ScSetGpt { .. }
                    | HttpRequestAction::Rewrite(_)
                    | HttpRequestAction::Capture(_)
                    | HttpRequestAction::WaitForBody(_)
                    | HttpRequestAction::SetTimeout { .. }
                    | HttpRequestAction::StrictMode(_)
                    | HttpRequestAction::DisableL7Retry
                    | HttpRequestAction::SetAddr(..)
                    | HttpRequestAction::NormalizeUri(_)
            )
            // A location that may give nothing skips the rule.
            && !matches!(&r.action, HttpRequestAction::Redirect(rd) if rd.ignore_empty && rd.fmt.is_some())
    };
    // `redirect` lines are a list of their own in HAProxy, run after.
    let late =
        |r: &HttpRequestRule| matches!(&r.action, HttpRequestAction::Redirect(rd) if rd.late);
    let Some(first) = px.http_request.iter().position(|r| !late(r) && is_final(r)) else {
        return Vec::new();
    };
    let f = &px.http_request[first];
    px.http_request[first + 1..]
        .iter()
        .filter(|r| !late(r))
        .map(|r| {
            format!(
                "{}: previous 'http-request' action at {} is final and has no condition attached, further entries are NOOP",
                r.loc, f.loc
            )
        })
        .collect()
}

/// `hash-type map-based|consistent [sdbm|djb2|wt6|crc32] [avalanche]`.
/// `consistent` without a function means sdbm with avalanche (HAProxy's
/// rule); HAProxy 2.6 knows no `none` function, nor does ebb.
fn parse_hash_type(w: &[String]) -> Result<HashType, String> {
    let mut h = HashType::default();
    match w.first().map(String::as_str) {
        Some("map-based") => {}
        Some("consistent") => {
            h.consistent = true;
            h.avalanche = w.len() == 1;
        }
        Some(o) => {
            return Err(format!(
                "'hash-type': unknown method '{o}' (expected map-based or consistent)"
            ))
        }
        None => return Err("'hash-type' expects map-based or consistent".to_string()),
    }
    let mut rest = &w[1..];
    if let Some(f) = rest.first() {
        let func = match f.as_str() {
            "sdbm" => Some(HashFunction::Sdbm),
            "djb2" => Some(HashFunction::Djb2),
            "wt6" => Some(HashFunction::Wt6),
            "crc32" => Some(HashFunction::Crc32),
            _ => None,
        };
        if let Some(func) = func {
            h.function = func;
            rest = &rest[1..];
        }
    }
    match rest {
        [] => {}
        [a] if a == "avalanche" => h.avalanche = true,
        [x, ..] => {
            return Err(format!(
                "'hash-type': unexpected '{x}' (functions: sdbm, djb2, wt6, crc32; modifier: avalanche)"
            ))
        }
    }
    Ok(h)
}

fn parse_balance(w: &[String]) -> Result<Balance, String> {
    let Some(algo) = w.first() else {
        return Err("'balance' expects an algorithm".to_string());
    };
    let rest = &w[1..];
    let no_more = |b: Balance| -> Result<Balance, String> {
        match rest.first() {
            Some(x) => Err(format!("unexpected argument '{x}' after 'balance {algo}'")),
            None => Ok(b),
        }
    };
    if let Some(inner) = algo.strip_prefix("hdr(").and_then(|s| s.strip_suffix(')')) {
        if !is_token(inner) {
            return Err(format!("invalid header name '{inner}' in 'balance {algo}'"));
        }
        let use_domain_only = match rest {
            [] => false,
            [x] if x == "use_domain_only" => true,
            _ => {
                return Err(format!(
                    "'balance {algo}' accepts only 'use_domain_only' after it"
                ))
            }
        };
        return Ok(Balance::Hdr {
            name: inner.to_ascii_lowercase(),
            use_domain_only,
        });
    }
    match algo.as_str() {
        "roundrobin" => no_more(Balance::RoundRobin),
        "static-rr" => no_more(Balance::StaticRr),
        "leastconn" => no_more(Balance::LeastConn),
        "first" => no_more(Balance::First),
        "source" => no_more(Balance::Source),
        "random" => match rest {
            [] => Ok(Balance::Random { draws: 2 }),
            [n] => Ok(Balance::Random {
                // Beyond a few draws the choice is plain least-loaded;
                // 100 only catches typos.
                draws: parse_u32_range("balance random", n, 1, 100)?,
            }),
            _ => Err("'balance random' accepts at most a number of draws".to_string()),
        },
        "uri" => {
            let (mut whole, mut len, mut depth, mut path_only) = (false, None, None, false);
            let mut i = 0;
            while i < rest.len() {
                match rest[i].as_str() {
                    "whole" => whole = true,
                    "path-only" => path_only = true,
                    "len" => {
                        len = Some(parse_u32_range("len", arg(rest, i + 1, "len")?, 1, u32::MAX)?);
                        i += 1;
                    }
                    "depth" => {
                        depth = Some(parse_u32_range("depth", arg(rest, i + 1, "depth")?, 1, u32::MAX)?);
                        i += 1;
                    }
                    x => {
                        return Err(format!(
                            "unknown 'balance uri' argument '{x}' (supported: whole, len N, depth N, path-only)"
                        ))
                    }
                }
                i += 1;
            }
            Ok(Balance::Uri {
                whole,
                len,
                depth,
                path_only,
            })
        }
        "url_param" => match rest {
            // `check_post` changes nothing in HAProxy 2.6 (a POST's body
            // is looked at in any case) and what follows it, once its
            // `max_wait`, is ignored.
            [name] => Ok(Balance::UrlParam { name: name.to_string() }),
            [name, opt, ..] if opt == "check_post" => Ok(Balance::UrlParam { name: name.to_string() }),
            [] => Err("'balance url_param' requires an URL parameter name.".to_string()),
            [_, opt, ..] => Err(format!("'balance url_param' only accepts 'check_post' modifier (got '{opt}').")),
        },
        o => Err(format!(
            "unknown balance algorithm '{o}' (supported: roundrobin, static-rr, leastconn, first, source, uri, url_param NAME, hdr(NAME), random)"
        )),
    }
}

fn parse_stats(px: &mut Proxy, ctx: &Ctx<'_>, w: &[String]) -> Result<(), String> {
    let sub = arg(w, 1, "stats")?;
    let kw = format!("stats {sub}");
    ctx.allow(&kw, FE | BE, sub != "admin")?;
    let loc = ctx.loc;
    let one = || -> Result<&str, String> {
        match w {
            [_, _, v] => Ok(v.as_str()),
            _ => Err(format!("'{kw}' expects exactly one argument")),
        }
    };
    let st = &mut px.stats;
    match sub {
        "enable" => {
            if w.len() > 2 {
                return Err("'stats enable' takes no argument".to_string());
            }
        }
        "uri" => {
            let u = one()?;
            if !u.starts_with('/') {
                return Err(format!("'stats uri' must start with '/', got '{u}'"));
            }
            st.uri = Some(Spanned {
                value: u.to_string(),
                loc: loc.clone(),
            });
        }
        "refresh" => st.refresh = Some(nonzero_time(&kw, one()?)?),
        "realm" => st.realm = Some(one()?.to_string()),
        "hide-version" => {
            if w.len() > 2 {
                return Err("'stats hide-version' takes no argument".to_string());
            }
            st.hide_version = true;
        }
        "show-legends" => {
            if w.len() > 2 {
                return Err("'stats show-legends' takes no argument".to_string());
            }
            st.show_legends = true;
        }
        // HAProxy: the node name with the characters of the global `node`;
        // the description is every word after, joined by spaces.
        "show-node" => {
            let name = match w {
                [_, _] => None,
                [_, _, n] => {
                    check_node_name("stats show-node", n)?;
                    Some(n.clone())
                }
                _ => return Err("'stats show-node' expects at most a name".to_string()),
            };
            st.show_node = Some(name);
        }
        "show-desc" => {
            st.show_desc = Some((w.len() > 2).then(|| w[2..].join(" ")));
        }
        "auth" => {
            let v = one()?;
            let Some((user, password)) = v.split_once(':') else {
                return Err(format!("'stats auth' expects USER:PASSWORD, got '{v}'"));
            };
            if user.is_empty() {
                return Err("'stats auth' needs a user name before ':'".to_string());
            }
            st.auth.push(StatsUser {
                user: user.to_string(),
                password: password.to_string(),
            });
        }
        "admin" => {
            let (args, c) = split_cond(&w[2..]);
            if let Some(x) = args.first() {
                return Err(format!("unexpected '{x}': 'stats admin' expects 'if' or 'unless'"));
            }
            let Some(c) = c else {
                return Err("'stats admin' expects 'if' or 'unless' and a condition".to_string());
            };
            let cond = parse_condition(c.0, c.1, &px.acls, loc)?;
            px.stats.admin.push(cond);
        }
        o => {
            return Err(format!(
                "unknown 'stats {o}' (supported: enable, uri, refresh, auth, admin, realm, hide-version, show-node, show-desc, show-legends)"
            ))
        }
    }
    px.stats.enabled = true;
    Ok(())
}

/// `compression algo|algo-res NAME...`, `compression type|type-res
/// TYPE...` (each line adds to the list, as in HAProxy), `compression
/// offload`, and HAProxy 2.8's request side: `algo-req NAME`, `type-req
/// TYPE...`, `direction request|response|both` (HAProxy 2.6 has none of
/// these three; ebb follows 2.8's documented meaning).
fn parse_compression(c: &mut Compression, ctx: &Ctx<'_>, w: &[String]) -> Result<(), String> {
    use crate::compress::Coding;
    let algo = |name: &String| {
        Coding::parse(name).ok_or_else(|| {
            format!(
                "unknown compression algorithm '{name}' (supported: identity, gzip, deflate, raw-deflate, br, zstd)"
            )
        })
    };
    let kw = w.first().map_or("", String::as_str);
    match kw {
        "algo" | "algo-res" => {
            if w.len() < 2 {
                return Err(format!("'compression {kw}' expects at least one algorithm"));
            }
            for name in &w[1..] {
                let c2 = algo(name)?;
                if !c.algos.contains(&c2) {
                    c.algos.push(c2);
                }
            }
            if c.algos.contains(&Coding::Deflate) && c.algos.contains(&Coding::RawDeflate) {
                // Both answer to the token "deflate": one would never run.
                return Err(format!(
                    "'compression {kw}' cannot take both 'deflate' and 'raw-deflate' (both answer to 'deflate')"
                ));
            }
        }
        "algo-req" => {
            let [_, name] = w else {
                return Err("'compression algo-req' expects exactly one algorithm".to_string());
            };
            c.algo_req = Some(algo(name)?);
        }
        "type" | "type-res" | "type-req" => {
            if w.len() < 2 {
                return Err(format!("'compression {kw}' expects at least one MIME type"));
            }
            let list = if kw == "type-req" {
                &mut c.types_req
            } else {
                &mut c.types
            };
            list.extend(w[1..].iter().map(|t| t.to_ascii_lowercase()));
        }
        "direction" => {
            c.direction = Some(match w.get(1..).unwrap_or_default() {
                [d] if d == "request" => (true, false),
                [d] if d == "response" => (false, true),
                [d] if d == "both" => (true, true),
                _ => {
                    return Err(
                        "'compression direction' expects 'request', 'response', or 'both'"
                            .to_string(),
                    )
                }
            });
        }
        "offload" => {
            if w.len() > 1 {
                return Err("'compression offload' takes no argument".to_string());
            }
            if ctx.defaults {
                // HAProxy warns and ignores it there; ebb refuses.
                return Err(
                    "'compression offload' is not allowed in a 'defaults' section (HAProxy ignores it there)"
                        .to_string(),
                );
            }
            c.offload = true;
        }
        "minsize-res" => {
            let [_, v] = w else {
                return Err("'compression minsize-res' expects a size".to_string());
            };
            c.minsize_res = Some(parse_size(v)?);
        }
        "" => {
            return Err(
                "'compression' expects algo, algo-req, type, type-req, direction or offload"
                    .to_string(),
            )
        }
        o => {
            return Err(format!(
                "unknown 'compression {o}' (supported: algo, algo-res, algo-req, type, type-res, type-req, direction, offload, minsize-res)"
            ))
        }
    }
    Ok(())
}

fn parse_serve_files(w: &[String], ctx: &Ctx<'_>) -> Result<ServeFiles, String> {
    let Some(dir) = w.first() else {
        return Err("'serve-files' expects a directory".to_string());
    };
    let mut sf = ServeFiles {
        root: ctx.resolve(dir),
        index: vec!["index.html".to_string()],
        listing: false,
        follow_symlinks: false,
        max_age: None,
        loc: ctx.loc.clone(),
        dotfiles: false,
        precompressed: Vec::new(),
    };
    let mut custom_index = false;
    let mut i = 1;
    while i < w.len() {
        let opt = w[i].as_str();
        if opt == "precompressed" {
            // Codings up to the next option or the end of the line.
            i += 1;
            while let Some(name) = w.get(i) {
                use crate::compress::Coding;
                match Coding::parse(name) {
                    Some(c @ (Coding::Gzip | Coding::Br | Coding::Zstd)) => {
                        if !sf.precompressed.contains(&c) {
                            sf.precompressed.push(c);
                        }
                    }
                    _ if SERVE_FILES_OPTIONS.contains(&name.as_str()) => break,
                    _ => {
                        return Err(format!(
                            "'precompressed' takes gzip, br and zstd (the .gz, .br and .zst siblings), got '{name}'"
                        ))
                    }
                }
                i += 1;
            }
            if sf.precompressed.is_empty() {
                return Err("'precompressed' expects gzip, br or zstd".to_string());
            }
            continue;
        }
        let v = w
            .get(i + 1)
            .map(String::as_str)
            .ok_or_else(|| format!("'serve-files' option '{opt}' expects a value"))?;
        match opt {
            "index" => {
                if v.is_empty() || v.contains('/') {
                    return Err(format!("invalid index file name '{v}'"));
                }
                if !custom_index {
                    sf.index.clear();
                    custom_index = true;
                }
                sf.index.push(v.to_string());
            }
            "listing" => sf.listing = parse_on_off("listing", v)?,
            "dotfiles" => {
                sf.dotfiles = match v {
                    "allow" => true,
                    "deny" => false,
                    _ => return Err(format!("'dotfiles' expects 'allow' or 'deny', got '{v}'")),
                }
            }
            "follow-symlinks" => sf.follow_symlinks = parse_on_off("follow-symlinks", v)?,
            "max-age" => {
                // Seconds, as in Cache-Control; a unit may be given.
                let d = if v.bytes().all(|b| b.is_ascii_digit()) {
                    parse_time_unit(v, 1_000_000)?
                } else {
                    parse_time(v)?
                };
                let secs = u32::try_from(d.as_secs())
                    .map_err(|_| format!("'max-age' {v} is too large"))?;
                sf.max_age = Some(secs);
            }
            o => {
                return Err(format!(
                    "unknown 'serve-files' option '{o}' (supported: index, listing, dotfiles, follow-symlinks, max-age, precompressed)"
                ))
            }
        }
        i += 2;
    }
    Ok(sf)
}

const SERVE_FILES_OPTIONS: &[&str] = &[
    "index",
    "listing",
    "dotfiles",
    "follow-symlinks",
    "max-age",
    "precompressed",
];

/// The first kind of rule that runs after the one being parsed
/// (HAProxy's chain of `warnif_misplaced_*` checks): `monitor fail` runs
/// before `http-request` rules, which run before `redirect` lines, which
/// run before `use_backend` and `use-server`.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Later {
    HttpRequest,
    Redirect,
    UseBackend,
}

/// HAProxy's warning for a rule (`kw`, at `loc`) written after a rule
/// that runs later than it: the first such kind found, in HAProxy's
/// order.
fn misplaced(px: &mut Proxy, loc: &Loc, kw: &str, from: Later) {
    let late =
        |r: &HttpRequestRule| matches!(&r.action, HttpRequestAction::Redirect(rd) if rd.late);
    // The section's own rules: those a `defaults` section gave it run
    // apart in HAProxy (and came before it).
    let own = |r: &&HttpRequestRule| r.loc.file == px.loc.file && r.loc.line > px.loc.line;
    let rules = || px.http_request.iter().filter(own);
    let found = if from <= Later::HttpRequest && rules().any(|r| !late(r)) {
        Some("an 'http-request'")
    } else if from <= Later::Redirect && rules().any(late) {
        Some("a 'redirect'")
    } else if !px.use_backends.is_empty() {
        Some("a 'use_backend'")
    } else if !px.use_server.is_empty() {
        Some("a 'use-server'")
    } else {
        None
    };
    if let Some(after) = found {
        px.misplaced.push(format!(
            "{loc}: a '{kw}' rule placed after {after} rule will still be processed before."
        ));
    }
}
