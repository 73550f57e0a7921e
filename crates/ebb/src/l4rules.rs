//! The compiled layer-4 part of a proxy: `mode`, `tcp-request` rules,
//! `tcp-request inspect-delay`, `option tcplog`; and the checks HAProxy
//! makes on them at start.
//!
//! What HAProxy checks, and ebb with it:
//! - a `tcp-request connection` rule runs before any byte is read, so its
//!   condition may read only addresses, names, constants and variables;
//! - a tcp-mode proxy has no HTTP message: conditions reading HTTP,
//!   `http-request`/`http-response` rules and `serve-files` are refused
//!   there (HAProxy ignores rules with a warning; ebb refuses them); a
//!   stats page (often inherited from `defaults`) is not served, with a
//!   warning, and `errorfile`s are unused, as in HAProxy;
//! - HTTP options inherited from `defaults` that mean nothing in TCP
//!   (`forwardfor`, `httpclose`, `http-server-close`) are ignored with a
//!   warning, as HAProxy does, and `option httplog` falls back to
//!   `option tcplog` (HAProxy's rule and message);
//! - an http frontend cannot use a tcp backend (HAProxy: error), and a tcp
//!   frontend cannot use an http backend in ebb (HAProxy upgrades the
//!   stream to HTTP; ebb does not).
//!
//! Evaluation lives with the connections that use it; this module only
//! compiles.

use crate::config::{AclRef, Condition, ConfigError, Fetch, Loc, Proxy, ProxyMode, TcpRequestRule};
use crate::rules::{Cond, Matcher};
use crate::sample::Layer;

/// A compiled `tcp-request connection|content accept|reject` rule.
pub struct TcpRuleRt {
    pub accept: bool,
    pub cond: Option<Cond>,
}

/// The layer-4 part of a compiled proxy.
#[derive(Default)]
pub struct TcpRt {
    /// `mode tcp`.
    pub tcp_mode: bool,
    pub conn_rules: Vec<TcpRuleRt>,
    pub content_rules: Vec<TcpRuleRt>,
    /// `tcp-request inspect-delay`, ms; 0: content rules run on what the
    /// first read brought (HAProxy: without a delay they run at once).
    pub inspect_delay: u32,
    /// Some content rule or `use_backend` reads the request's bytes
    /// (`req.len`, `req.payload`, `req.ssl_*`), for `show`-style reports;
    /// waiting is decided per rule at run time (HAProxy's may-change).
    pub reads_payload: bool,
    /// `option tcplog` (or `option httplog` in a tcp proxy).
    pub tcplog: bool,
    pub dontlognull: bool,
    /// `timeout tunnel` when set (ms): it replaces `timeout client` and
    /// `timeout server` once a tcp session is connected.
    pub tunnel: Option<u32>,
}

/// `timeout tunnel` of a proxy, in ms.
pub fn tunnel_ms(p: &Proxy) -> Option<u32> {
    p.timeouts
        .tunnel
        .map(|d| d.as_millis().clamp(1, u32::MAX as u128 / 2) as u32)
}

fn err(loc: &Loc, message: impl Into<String>) -> ConfigError {
    ConfigError {
        loc: loc.clone(),
        message: message.into(),
    }
}

/// The deepest layer a condition reads.
pub fn cond_layer(p: &Proxy, c: &Condition) -> Layer {
    let test_layer = |f: &Fetch| match f {
        Fetch::Src | Fetch::Always(_) => Layer::L4,
        Fetch::Sample(e) => e.layer(),
        _ => Layer::Http,
    };
    c.terms
        .iter()
        .flatten()
        .map(|t| match &t.acl {
            AclRef::Inline(test) => test_layer(&test.fetch),
            AclRef::Named { index, .. } => p
                .acls
                .get(*index)
                .map(|a| a.tests.iter().map(|t| test_layer(&t.fetch)).max())
                .unwrap_or(None)
                .unwrap_or(Layer::L4),
        })
        .max()
        .unwrap_or(Layer::L4)
}

fn compile_rule(
    p: &Proxy,
    m: &Matcher,
    r: &TcpRequestRule,
    tcp: bool,
) -> Result<TcpRuleRt, ConfigError> {
    if let Some(c) = &r.cond {
        let layer = cond_layer(p, c);
        if !r.content && layer > Layer::L4 {
            return Err(err(
                &r.loc,
                "'tcp-request connection' runs before any byte is read: its condition may only use addresses, names and variables (use 'tcp-request content' with 'tcp-request inspect-delay')",
            ));
        }
        if tcp && layer == Layer::Http {
            return Err(err(
                &r.loc,
                format!(
                    "proxy '{}' is in 'mode tcp': this condition reads HTTP, which a tcp-mode proxy never parses",
                    p.name
                ),
            ));
        }
    }
    Ok(TcpRuleRt {
        accept: r.accept,
        cond: m.opt_cond(r.cond.as_ref())?,
    })
}

/// Compiles a proxy's layer-4 part, with HAProxy's start-time checks.
/// `warnings` receives what HAProxy warns about and ignores.
pub fn compile(p: &Proxy, m: &Matcher, warnings: &mut Vec<String>) -> Result<TcpRt, ConfigError> {
    let tcp = p.mode == ProxyMode::Tcp;
    let mut rt = TcpRt {
        tcp_mode: tcp,
        inspect_delay: p
            .inspect_delay
            .map(|d| d.as_millis().min(u32::MAX as u128 / 2) as u32)
            .unwrap_or(0),
        tcplog: p.options.tcplog || (tcp && p.options.httplog),
        dontlognull: p.options.dontlognull,
        tunnel: tunnel_ms(p),
        ..TcpRt::default()
    };
    for r in &p.tcp_request {
        if r.content && !tcp {
            return Err(err(
                &r.loc,
                format!(
                    "'tcp-request content' in proxy '{}' (mode http) is not supported by ebb: its rules run in 'mode tcp' only (use 'http-request' rules)",
                    p.name
                ),
            ));
        }
        let c = compile_rule(p, m, r, tcp)?;
        if r.content {
            rt.reads_payload |= r
                .cond
                .as_ref()
                .is_some_and(|c| cond_layer(p, c) == Layer::Payload);
            rt.content_rules.push(c);
        } else {
            rt.conn_rules.push(c);
        }
    }
    if !tcp {
        return Ok(rt);
    }
    // What a tcp-mode section may not hold.
    let refuse = |what: &str, loc: &Loc| {
        Err(err(
            loc,
            format!(
                "proxy '{}' is in 'mode tcp': {what} needs 'mode http'",
                p.name
            ),
        ))
    };
    if let Some(r) = p.http_request.first() {
        return refuse("'http-request' (or 'redirect')", &r.loc);
    }
    if let Some(r) = p.http_response.first() {
        return refuse("'http-response'", &r.loc);
    }
    if p.serve_files.is_some() {
        return refuse("'serve-files'", &p.loc);
    }
    if let Some(r) = p.stick_rules.first() {
        // HAProxy sticks tcp sessions too; ebb's tcp sessions do not use
        // stick tables yet, so the rule is refused rather than ignored.
        return Err(err(
            &r.loc,
            format!(
                "'stick' rules in proxy '{}' (mode tcp) are not supported by ebb yet: tcp sessions do not use stick tables",
                p.name
            ),
        ));
    }
    if p.stats.effective_uri().is_some() {
        warnings.push(format!(
            "{}: the stats page of proxy '{}' is not served as it requires HTTP mode.",
            p.loc, p.name
        ));
    }
    for u in &p.use_backends {
        if u.cond
            .as_ref()
            .is_some_and(|c| cond_layer(p, c) == Layer::Http)
        {
            return Err(err(
                &u.loc,
                format!(
                    "proxy '{}' is in 'mode tcp': this condition reads HTTP, which a tcp-mode proxy never parses",
                    p.name
                ),
            ));
        }
        if u.cond
            .as_ref()
            .is_some_and(|c| cond_layer(p, c) == Layer::Payload)
        {
            rt.reads_payload = true;
        }
    }
    if p.kind.is_frontend() && p.options.httplog && !p.options.tcplog {
        warnings.push(format!(
            "{}: 'option httplog' not usable with proxy '{}' (needs 'mode http'). Falling back to 'option tcplog'.",
            p.loc, p.name
        ));
    }
    if p.options.forwardfor.is_some() {
        warnings.push(format!(
            "{}: 'option forwardfor' ignored for proxy '{}' as it requires HTTP mode.",
            p.loc, p.name
        ));
    }
    if p.options.conn_mode != crate::config::HttpConnMode::KeepAlive {
        warnings.push(format!(
            "{}: 'option httpclose'/'http-server-close' ignored for proxy '{}' as it requires HTTP mode.",
            p.loc, p.name
        ));
    }
    Ok(rt)
}

/// The balance algorithm a backend runs: in a tcp backend, the layer-7
/// hashes (`uri`, `hdr`) fall back to round robin with a warning, as in
/// HAProxy ("Layer 7 hash not possible ... Falling back to round robin").
pub fn balance_for_mode(p: &Proxy, warnings: &mut Vec<String>) -> crate::config::Balance {
    use crate::config::Balance;
    match &p.balance {
        Balance::Uri { .. } | Balance::Hdr { .. } if p.mode == ProxyMode::Tcp => {
            warnings.push(format!(
                "{}: Layer 7 hash not possible for backend '{}' (needs 'mode http'). Falling back to round robin.",
                p.loc, p.name
            ));
            Balance::RoundRobin
        }
        b => b.clone(),
    }
}

/// The error for a frontend using a backend of another mode, if any.
pub fn mode_mismatch(fe: &Proxy, be: &Proxy, loc: &Loc) -> Option<ConfigError> {
    match (fe.mode, be.mode) {
        (ProxyMode::Http, ProxyMode::Tcp) => Some(err(
            loc,
            format!(
                "frontend '{}' (mode http) cannot use backend '{}' (mode tcp)",
                fe.name, be.name
            ),
        )),
        (ProxyMode::Tcp, ProxyMode::Http) => Some(err(
            loc,
            format!(
                "frontend '{}' (mode tcp) cannot use backend '{}' (mode http): ebb does not upgrade a tcp stream to HTTP",
                fe.name, be.name
            ),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    /// The first compile error of a configuration, as printed.
    fn compile_err(cfg: &str) -> String {
        let c = crate::config::parse_str("t.cfg", cfg).unwrap();
        match crate::proxy::compile(&c) {
            Ok(_) => panic!("compiled"),
            Err(e) => e[0].to_string(),
        }
    }

    fn compiles(cfg: &str) -> crate::proxy::Compiled {
        let c = crate::config::parse_str("t.cfg", cfg).unwrap();
        match crate::proxy::compile(&c) {
            Ok(c) => c,
            Err(e) => panic!("{}", e[0]),
        }
    }

    #[test]
    fn modes_must_match_across_use_backend() {
        let e = compile_err(
            "frontend f\n    mode http\n    bind :80\n    default_backend b\nbackend b\n    mode tcp\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ")
                && e.contains("(mode http) cannot use backend 'b' (mode tcp)"),
            "{e}"
        );
        let e = compile_err(
            "frontend f\n    mode tcp\n    bind :80\n    use_backend b if TRUE\nbackend b\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ") && e.contains("does not upgrade"),
            "{e}"
        );
    }

    #[test]
    fn tcp_sessions_refuse_stick_tables_they_do_not_use() {
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    stick-table type ip size 1k\n    stick on src\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:5: ") && e.contains("'stick' rules") && e.contains("mode tcp"),
            "{e}"
        );
        // The counters of a stick table are read on HTTP exchanges only.
        let e = compile_err(
            "frontend f\n    bind :80\n    stick-table type ip size 1k store conn_rate(10s)\n    tcp-request connection reject if { src_conn_rate gt 10 }\n    default_backend b\nbackend b\n    server s 127.0.0.1:1\n",
        );
        assert!(e.starts_with("t.cfg:4: "), "{e}");
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    stick-table type ip size 1k store gpc0\n    tcp-request content reject if { sc0_get_gpc0 gt 0 }\n    server s 127.0.0.1:1\n",
        );
        assert!(e.starts_with("t.cfg:5: "), "{e}");
    }

    #[test]
    fn rules_read_only_what_their_layer_has() {
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    tcp-request connection reject if { req.len gt 0 }\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ") && e.contains("before any byte is read"),
            "{e}"
        );
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    acl p path /x\n    tcp-request content reject if p\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:5: ") && e.contains("reads HTTP"),
            "{e}"
        );
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    http-request deny\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ") && e.contains("needs 'mode http'"),
            "{e}"
        );
        let e = compile_err(
            "frontend f\n    bind :80\n    tcp-request content reject\n    default_backend b\nbackend b\n    server s 127.0.0.1:1\n",
        );
        assert!(e.starts_with("t.cfg:3: ") && e.contains("mode tcp"), "{e}");
        // Connection rules work in HTTP mode too; SNI routing compiles.
        let c = compiles(
            "frontend f\n    mode tcp\n    bind :443\n    tcp-request inspect-delay 5s\n    tcp-request connection accept if { src 127.0.0.1 }\n    use_backend a if { req.ssl_sni -i a.example }\n    default_backend b\nbackend a\n    mode tcp\n    server s 127.0.0.1:1\nbackend b\n    mode tcp\n    timeout tunnel 1h\n    server s 127.0.0.1:2\n",
        );
        let f = &c.frontends[0];
        assert!(f.l4.tcp_mode && f.l4.reads_payload && f.l4.inspect_delay == 5000);
        assert_eq!(f.l4.conn_rules.len(), 1);
        assert_eq!(c.backends[1].l4.tunnel, Some(3_600_000));
        assert_eq!(c.backends[0].l4.tunnel, None);
    }

    #[test]
    fn http_options_inherited_by_a_tcp_proxy_warn_as_haproxy_does() {
        let c = compiles(
            "defaults\n    mode http\n    option httplog\n    option forwardfor\nlisten l\n    mode tcp\n    bind :80\n    server s 127.0.0.1:1\n",
        );
        assert!(c.frontends[0].l4.tcplog, "httplog falls back to tcplog");
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("Falling back to 'option tcplog'")));
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("'option forwardfor' ignored")));
    }
}
