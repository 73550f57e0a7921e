//! `option NAME` and `no option NAME` lines of proxy sections.
//!
//! Each option belongs to frontends, backends or both, as in HAProxy, and
//! is refused where it has no effect. `no` turns a flag off (a connection
//! mode goes back to keep-alive); `tcpka` and the options that take
//! arguments, `redispatch` aside, refuse it. The last of `option httpchk`,
//! `option tcp-check` and the built-in protocol checks wins. The
//! keep-alive parameters of `{cli,srv}tcpka-*` lines are read here too.

use super::{arg, Ctx, BE, FE};
use crate::config::types::*;
use crate::config::values::*;

/// HAProxy `option` names ebb does not implement.
const HAPROXY_OPTIONS_UNSUPPORTED: &[&str] = &["http-use-htx"];

const OPTIONS: &[&str] = &[
    "persist",
    "checkcache",
    "transparent",
    "http-keep-alive",
    "http-server-close",
    "httpclose",
    "http-pretend-keepalive",
    "http-no-delay",
    "forwardfor",
    "originalto",
    "redispatch",
    "httpchk",
    "tcp-check",
    "external-check",
    "redis-check",
    "smtpchk",
    "pgsql-check",
    "mysql-check",
    "ldap-check",
    "spop-check",
    "ssl-hello-chk",
    "httplog",
    "httpslog",
    "tcplog",
    "dontlognull",
    "logasap",
    "prefer-last-server",
    "log-health-checks",
    "idle-close-on-response",
    "contstats",
    "disable-h2-upgrade",
    "http-buffer-request",
    "splice-auto",
    "splice-request",
    "splice-response",
    "abortonclose",
    "socket-stats",
    "http-restrict-req-hdr-names",
    "tcpka",
    "clitcpka",
    "srvtcpka",
    "nolinger",
    "independent-streams",
    "dontlog-normal",
    "log-separate-errors",
    "allbackups",
    "tcp-smart-accept",
    "tcp-smart-connect",
    "http-ignore-probes",
    "h1-case-adjust-bogus-client",
    "h1-case-adjust-bogus-server",
    "accept-invalid-http-request",
    "accept-invalid-http-response",
];

pub(super) fn proxy_option(
    px: &mut Proxy,
    ctx: &Ctx<'_>,
    no: bool,
    w: &[String],
) -> Result<(), String> {
    let name = arg(w, 1, "option")?;
    let caps = match name {
        "http-keep-alive"
        | "httpclose"
        | "http-server-close"
        | "forwardfor"
        | "originalto"
        | "http-restrict-req-hdr-names" => FE | BE,
        "redispatch" | "httpchk" | "tcp-check" | "external-check" | "log-health-checks"
        | "persist" | "checkcache" | "transparent" | "redis-check" | "smtpchk" | "pgsql-check"
        | "mysql-check" | "ldap-check" | "spop-check" | "ssl-hello-chk" => BE,
        "http-buffer-request" | "splice-auto" | "splice-request" | "splice-response" => FE | BE,
        "abortonclose"
        | "srvtcpka"
        | "allbackups"
        | "prefer-last-server"
        | "http-pretend-keepalive" => BE,
        "http-no-delay" => FE | BE,
        "tcpka" | "nolinger" | "independent-streams" => FE | BE,
        "clitcpka"
        | "dontlog-normal"
        | "log-separate-errors"
        | "tcp-smart-accept"
        | "http-ignore-probes" => FE,
        "tcp-smart-connect" => BE,
        "h1-case-adjust-bogus-client" => FE,
        "h1-case-adjust-bogus-server" => BE,
        "accept-invalid-http-request" => FE,
        "accept-invalid-http-response" => BE,
        "httplog"
        | "httpslog"
        | "tcplog"
        | "dontlognull"
        | "logasap"
        | "idle-close-on-response"
        | "contstats"
        | "disable-h2-upgrade"
        | "socket-stats" => FE,
        // Removed from HAProxy before 2.6, which refuses them with these
        // words.
        "forceclose" => {
            return Err(
                "option 'forceclose' is not supported any more since HAProxy 2.0, \
                 please just remove it, or use 'option httpclose' if absolutely needed."
                    .into(),
            )
        }
        "http_proxy" => {
            return Err(
                "option 'http_proxy' is not supported any more since HAProxy 2.5. \
                 This option stopped working in HAProxy 1.9 and usually had nasty side \
                 effects. It can be more reliably implemented with combinations of \
                 'http-request set-dst' and 'http-request set-uri', and even 'http-request \
                 do-resolve' if DNS resolution is desired."
                    .into(),
            )
        }
        o if HAPROXY_OPTIONS_UNSUPPORTED.contains(&o) => {
            return Err(format!("HAProxy option '{o}' is not supported by ebb"))
        }
        o => {
            return Err(format!(
                "unknown option '{o}'{} (supported: {})",
                suggest(o, OPTIONS),
                OPTIONS.join(", ")
            ))
        }
    };
    ctx.allow(&format!("option {name}"), caps, true)?;
    let rest = &w[2..];
    let no_args = |rest: &[String]| -> Result<(), String> {
        match rest.first() {
            Some(x) => Err(format!("unexpected argument '{x}' after 'option {name}'")),
            None => Ok(()),
        }
    };
    let o = &mut px.options;
    match name {
        "http-keep-alive" | "httpclose" | "http-server-close" => {
            no_args(rest)?;
            let mode = match name {
                "http-keep-alive" => HttpConnMode::KeepAlive,
                "httpclose" => HttpConnMode::Close,
                _ => HttpConnMode::ServerClose,
            };
            if !no {
                o.conn_mode = mode;
            } else if o.conn_mode == mode {
                o.conn_mode = HttpConnMode::KeepAlive;
            }
        }
        "redispatch" => {
            o.redispatch = !no;
            // HAProxy's interval: every Nth retry, or (negative) the Nth
            // before the end; -1 (the last retry) when not written.
            o.redispatch_after = match rest {
                _ if no => {
                    no_args(rest)?;
                    0
                }
                [] => -1,
                [n] => n.parse::<i32>().map_err(|_| {
                    format!("'option redispatch' expects an integer interval, got '{n}'")
                })?,
                _ => return Err("'option redispatch' takes at most one argument".into()),
            };
        }
        "splice-auto" | "splice-request" | "splice-response" => {
            no_args(rest)?;
            let bit = match name {
                "splice-auto" => crate::config::SPLICE_AUTO,
                "splice-request" => crate::config::SPLICE_REQUEST,
                _ => crate::config::SPLICE_RESPONSE,
            };
            if no {
                o.splice &= !bit;
            } else {
                o.splice |= bit;
                o.splice_loc.get_or_insert_with(|| ctx.loc.clone());
            }
            if o.splice == 0 {
                o.splice_loc = None;
            }
        }
        "transparent" => {
            no_args(rest)?;
            px.transparent = (!no).then(|| ctx.loc.clone());
        }
        "tcp-check" => {
            if no {
                return Err("'no option tcp-check' is not supported".to_string());
            }
            crate::config::tcpcheck::enable(&mut px.tcp_check, rest)?;
            // The last of `option httpchk` / `option tcp-check` wins.
            px.http_check.enabled = false;
            px.ext_check.enabled = None;
        }
        "external-check" => {
            if no {
                return Err("'no option external-check' is not supported".to_string());
            }
            no_args(rest)?;
            // The last check option wins (HAProxy's `PR_O2_CHK_ANY`).
            px.http_check.enabled = false;
            px.tcp_check.enabled = false;
            px.tcp_check.builtin = None;
            px.ext_check.enabled = Some(ctx.loc.clone());
        }
        "redis-check" | "smtpchk" | "pgsql-check" | "mysql-check" | "ldap-check" | "spop-check"
        | "ssl-hello-chk" => {
            if no {
                return Err(format!("'no option {name}' is not supported"));
            }
            crate::config::tcpcheck::builtin(&mut px.tcp_check, name, rest, ctx.loc)?;
            px.http_check.enabled = false;
            px.ext_check.enabled = None;
        }
        "persist" => {
            no_args(rest)?;
            o.persist = !no;
        }
        "checkcache" => {
            no_args(rest)?;
            o.checkcache = !no;
        }
        "http-pretend-keepalive" => {
            no_args(rest)?;
            o.pretend_keepalive = !no;
        }
        "http-no-delay" => {
            no_args(rest)?;
            o.http_no_delay = !no;
        }
        "tcp-smart-accept" => {
            no_args(rest)?;
            o.smart_accept = Some(!no);
        }
        "tcp-smart-connect" => {
            no_args(rest)?;
            o.smart_connect = !no;
        }
        "http-ignore-probes" => {
            no_args(rest)?;
            o.http_ignore_probes = !no;
        }
        "httplog" => {
            no_args(rest)?;
            o.httplog = !no;
            o.httpslog = false;
        }
        // HAProxy: httplog's line with the TLS fields after it.
        "httpslog" => {
            no_args(rest)?;
            o.httplog = !no;
            o.httpslog = !no;
        }
        "dontlognull" => {
            no_args(rest)?;
            o.dontlognull = !no;
        }
        "logasap" => {
            no_args(rest)?;
            o.logasap = !no;
        }
        "tcplog" => {
            no_args(rest)?;
            o.tcplog = !no;
            if !no {
                // HAProxy: the last of httplog/tcplog wins.
                o.httplog = false;
                o.httpslog = false;
            }
        }
        "log-health-checks" => {
            no_args(rest)?;
            o.log_health_checks = !no;
        }
        "h1-case-adjust-bogus-client" => {
            no_args(rest)?;
            o.h1_case_client = !no;
        }
        "h1-case-adjust-bogus-server" => {
            no_args(rest)?;
            o.h1_case_server = !no;
        }
        "accept-invalid-http-request" => {
            no_args(rest)?;
            o.accept_invalid_req = !no;
        }
        "accept-invalid-http-response" => {
            no_args(rest)?;
            o.accept_invalid_resp = !no;
        }
        "idle-close-on-response" => {
            no_args(rest)?;
            o.idle_close_on_response = !no;
        }
        "contstats" => {
            no_args(rest)?;
            o.contstats = !no;
        }
        "disable-h2-upgrade" => {
            no_args(rest)?;
            o.disable_h2_upgrade = !no;
        }
        "http-buffer-request" => {
            no_args(rest)?;
            o.buffer_request = !no;
        }
        "abortonclose" => {
            no_args(rest)?;
            o.abortonclose = !no;
        }
        "prefer-last-server" => {
            no_args(rest)?;
            o.prefer_last_server = !no;
        }
        "tcpka" => {
            if no {
                return Err("negation is not supported for option 'tcpka'".to_string());
            }
            no_args(rest)?;
            // HAProxy: the client side where the proxy has a frontend,
            // the server side where it has a backend.
            if ctx.caps & FE != 0 {
                o.clitcpka.on = true;
            }
            if ctx.caps & BE != 0 {
                o.srvtcpka.on = true;
            }
        }
        "clitcpka" => {
            no_args(rest)?;
            o.clitcpka.on = !no;
        }
        "srvtcpka" => {
            no_args(rest)?;
            o.srvtcpka.on = !no;
        }
        "nolinger" => {
            no_args(rest)?;
            o.nolinger = !no;
        }
        "independent-streams" => {
            no_args(rest)?;
            o.indep_streams = (!no).then(|| ctx.loc.clone());
        }
        "allbackups" => {
            no_args(rest)?;
            o.allbackups = !no;
        }
        "dontlog-normal" => {
            no_args(rest)?;
            o.dontlog_normal = !no;
        }
        "log-separate-errors" => {
            no_args(rest)?;
            o.log_separate_errors = !no;
        }
        "socket-stats" => {
            no_args(rest)?;
            o.socket_stats = !no;
        }
        "http-restrict-req-hdr-names" => {
            if no {
                return Err(format!("'no option {name}' is not supported"));
            }
            let [mode] = rest else {
                return Err(format!(
                    "option '{name}' expects 'preserve', 'reject' or 'delete' option"
                ));
            };
            o.restrict_hdr_names = Some(match mode.as_str() {
                "preserve" => RestrictHdrNames::Preserve,
                "delete" => RestrictHdrNames::Delete,
                "reject" => RestrictHdrNames::Reject,
                m => {
                    return Err(format!(
                        "invalid parameter '{m}'. option '{name}' expects 'preserve', 'reject' or 'delete' option"
                    ))
                }
            });
        }
        "forwardfor" | "originalto" => {
            if no {
                return Err(format!("'no option {name}' is not supported"));
            }
            let orig = name == "originalto";
            let mut ff = ForwardFor {
                except: None,
                header: if orig {
                    "x-original-to"
                } else {
                    "x-forwarded-for"
                }
                .to_string(),
                if_none: false,
            };
            let mut i = 0;
            while i < rest.len() {
                match rest[i].as_str() {
                    "except" => {
                        ff.except = Some(parse_ipnet(arg(rest, i + 1, "except")?)?);
                        i += 2;
                    }
                    "header" => {
                        ff.header = header_name(arg(rest, i + 1, "header")?)?.to_ascii_lowercase();
                        i += 2;
                    }
                    "if-none" if !orig => {
                        ff.if_none = true;
                        i += 1;
                    }
                    x if orig => {
                        return Err(format!(
                            "unknown 'option originalto' argument '{x}' (supported: except, header)"
                        ))
                    }
                    x => {
                        return Err(format!(
                            "unknown 'option forwardfor' argument '{x}' (supported: except, header, if-none)"
                        ))
                    }
                }
            }
            if orig {
                o.originalto = Some(ff);
            } else {
                o.forwardfor = Some(ff);
            }
        }
        _ => {
            // httpchk [URI] | [METHOD URI [VERSION]]
            if no {
                return Err("'no option httpchk' is not supported".to_string());
            }
            // The last of `option httpchk` / `option tcp-check` wins.
            px.tcp_check.enabled = false;
            px.tcp_check.builtin = None;
            px.ext_check.enabled = None;
            let hc = &mut px.http_check;
            hc.enabled = true;
            hc.own_rules();
            // The version may carry headers after CRLFs (HAProxy's old
            // form: `HTTP/1.1\r\nHost:\ www`); a blank line starts a body.
            let (mut meth, mut uri, mut ver) = (None, None, None);
            match rest {
                [] => {}
                [u] => uri = Some(u.clone()),
                [m, u] | [m, u, _] => {
                    if !is_token(m) {
                        return Err(format!("invalid HTTP method '{m}' in 'option httpchk'"));
                    }
                    meth = Some(m.clone());
                    uri = Some(u.clone());
                    ver = rest.get(2).cloned();
                }
                _ => return Err("'option httpchk' expects at most METHOD URI VERSION".to_string()),
            }
            if let Some(u) = &uri {
                if !u.starts_with('/') && u != "*" {
                    return Err(format!("'option httpchk' URI '{u}' must start with '/'"));
                }
            }
            let mut headers = Vec::new();
            let mut body = None;
            if let Some(v) = ver.take() {
                let (head, b) = match v.split_once("\r\n\r\n") {
                    Some((h, b)) => (h.to_string(), Some(b.to_string())),
                    None => (v.clone(), None),
                };
                let mut lines = head.split("\r\n");
                ver = lines.next().map(String::from);
                for l in lines {
                    let (n, val) = l
                        .split_once(':')
                        .ok_or_else(|| format!("'option httpchk': invalid header line '{l}'"))?;
                    headers.push((header_name(n.trim())?, val.trim().to_string()));
                }
                body = b;
            }
            if hc.explicit_send {
                // Merged into this section's `http-check send`.
                if let Some(m) = meth {
                    hc.method = m;
                }
                if let Some(u) = uri {
                    hc.uri = u;
                    hc.uri_lf = false;
                }
                if let Some(v) = ver {
                    hc.version = v;
                }
                hc.headers = headers;
                if body.is_some() {
                    hc.body = body;
                }
            } else {
                hc.method = meth.unwrap_or_else(|| "OPTIONS".into());
                hc.uri = uri.unwrap_or_else(|| "/".into());
                hc.version = ver.unwrap_or_else(|| "HTTP/1.0".into());
                hc.headers = headers;
                hc.body = body;
            }
        }
    }
    Ok(())
}

/// `{cli,srv}tcpka-idle|intvl TIME` (seconds unless a unit is given,
/// rounded up, as HAProxy) and `{cli,srv}tcpka-cnt N`. 0 leaves the
/// system's value, as in HAProxy; a value Linux refuses (above 32767 s,
/// or 127 probes) is refused here rather than ignored at each connection.
pub(super) fn parse_tcpka_param(
    ka: &mut TcpKa,
    what: &str,
    kw: &str,
    v: &str,
) -> Result<(), String> {
    let (n, max) = if what == "cnt" {
        let n: u32 = v
            .parse()
            .map_err(|_| format!("'{kw}' expects an integer value, not '{v}'"))?;
        (n, 127)
    } else {
        let d = parse_time_unit(v, 1_000_000).map_err(|e| format!("'{kw}': {e}"))?;
        let s = d.as_micros().div_ceil(1_000_000);
        (u32::try_from(s).unwrap_or(u32::MAX), 32767)
    };
    if n > max {
        return Err(format!(
            "'{kw} {v}': Linux takes at most {max}{}",
            if what == "cnt" { " probes" } else { " seconds" }
        ));
    }
    let val = (n > 0).then_some(n);
    match what {
        "idle" => ka.idle = val,
        "intvl" => ka.intvl = val,
        _ => ka.cnt = val,
    }
    Ok(())
}
