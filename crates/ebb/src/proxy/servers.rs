//! A backend's servers compiled: addresses resolved (`init-addr`,
//! `resolvers`), TLS toward them, `fullconn`, the saved state
//! (`load-server-state-from-file`) applied, external checks checked, and
//! the farm built ([`compile_servers`]).

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use crate::backend::Farm;
use crate::config::{Config, ConfigError, HttpConnMode, Proxy};
use crate::statefile::SrvState;

use super::backends::{BeTimeouts, ServersRt, DEFAULT_CONNECT_MS, DEFAULT_SERVER_MS};
use super::compile::{err, ms, proxy_uuid};

/// Reads the server-state files the backends ask for
/// (`load-server-state-from-file global|local`), each once; a file that
/// does not parse is ignored whole, with a warning naming the line.
pub(super) fn load_states(
    cfg: &Config,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, BTreeMap<String, SrvState>> {
    use crate::config::LoadServerState as L;
    let base = cfg
        .global
        .server_state_base
        .as_ref()
        .map(|b| b.value.as_path());
    let file = cfg
        .global
        .server_state_file
        .as_ref()
        .map(|f| f.value.as_path());
    let mut global: Option<crate::statefile::Tree> = None;
    let mut out = BTreeMap::new();
    let read = |path: &std::path::Path, warnings: &mut Vec<String>| -> crate::statefile::Tree {
        match std::fs::metadata(path) {
            // No file yet (first start): nothing to restore, nothing to say.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Default::default(),
            _ => {}
        }
        match crate::statefile::load(path) {
            Ok(t) => t,
            Err(e) => {
                warnings.push(format!("server-state: {e}"));
                Default::default()
            }
        }
    };
    for p in cfg.backends() {
        let mode = p.load_server_state.as_ref().map(|m| m.value);
        let tree = match mode {
            Some(L::Global) => {
                let Some(path) = crate::statefile::global_path(file, base) else {
                    warnings.push(format!(
                        "{}: 'load-server-state-from-file global' without a 'server-state-file' in global",
                        p.load_server_state.as_ref().map_or_else(String::new, |m| m.loc.to_string())
                    ));
                    continue;
                };
                if global.is_none() {
                    global = Some(read(&path, warnings));
                }
                global.as_ref().and_then(|g| g.get(&p.name).cloned())
            }
            Some(L::Local) => {
                // `server-state-file-name`, else the backend's name; an
                // absolute path as is, else under `server-state-base`.
                let name = p.server_state_file_name.as_deref().unwrap_or(&p.name);
                let path = match base {
                    Some(b) if !name.starts_with('/') => b.join(name),
                    _ => std::path::PathBuf::from(name),
                };
                read(&path, warnings).remove(&p.name)
            }
            Some(L::None) | None => None,
        };
        if let Some(t) = tree {
            out.insert(p.name.clone(), t);
        }
    }
    if let Some(g) = &global {
        for be in g.keys() {
            if !cfg.backends().any(|p| &p.name == be) {
                warnings.push(format!(
                    "server-state: backend {be} is in the state file but no longer in the configuration"
                ));
            }
        }
    }
    out
}

/// TLS towards a server with `ssl` (its client configuration and SNI).
pub fn server_tls(
    o: &crate::config::ServerOptions,
) -> Result<Option<crate::backend::ServerTls>, String> {
    // Settings prepared with `ssl` or `check-ssl` (even under a later
    // `no-ssl`): `set server ... ssl on` may use them.
    if !o.ssl && !o.ssl_ctx {
        return Ok(None);
    }
    let (mut config, cert) =
        crate::tls::client_config_slot(o.verify(), o.ca_file.as_deref(), &o.tls, o.dynamic)
            .map_err(|e| e.to_string())?;
    if !o.alpn.is_empty() {
        let mut c = (*config).clone();
        c.alpn_protocols = o.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        config = Arc::new(c);
    }
    // A constant `sni` (`str(NAME)`) is one name for every connection
    // (and the idle pool shares them); any other is evaluated per
    // connection, on the request as sent.
    let (sni, sni_expr) = match &o.sni {
        Some(e) if e.constant() => {
            let text = e.constant_text().unwrap_or_default();
            let name =
                String::from_utf8(text).map_err(|_| "'sni' is not valid UTF-8".to_string())?;
            (name, None)
        }
        Some(e) => (String::new(), Some(e.clone())),
        None => (String::new(), None),
    };
    Ok(Some(crate::backend::ServerTls {
        config,
        sni,
        sni_expr,
        cert,
    }))
}

/// A server's address at start by its `init-addr` methods, the first that
/// gives one; `none` gives none (the server waits for its resolvers, or
/// stays in maintenance); none of them working is an error (HAProxy's).
fn init_addr(
    s: &crate::config::Server,
    methods: &[crate::config::InitAddr],
    saved: Option<&SrvState>,
) -> Result<Option<SocketAddr>, ConfigError> {
    use crate::config::InitAddr as M;
    let literal = s.host.parse::<std::net::IpAddr>().ok();
    if let Some(ip) = literal {
        return Ok(Some(SocketAddr::new(ip, s.port)));
    }
    for m in methods {
        let a = match m {
            M::Last => saved.and_then(|st| crate::statefile::saved_addr(st, None)),
            M::Libc if !s.srv => resolve(&s.host, s.port),
            M::Libc => None,
            M::None => return Ok(None),
            M::Ip(ip) => Some(SocketAddr::new(*ip, s.port)),
        };
        if a.is_some() {
            return Ok(a);
        }
    }
    Err(err(
        &s.loc,
        format!(
            "server {}: could not resolve address '{}' with init-addr",
            s.name, s.host
        ),
    ))
}

/// Resolves `host:port` once (at start or reload).
fn resolve(host: &str, port: u16) -> Option<SocketAddr> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Some(SocketAddr::new(ip, port));
    }
    (host, port).to_socket_addrs().ok()?.next()
}

/// `dispatch ADDR:PORT` or `option transparent`, as HAProxy 2.6 takes
/// them: with a `balance` line, `dispatch` is ignored (a warning) and
/// `option transparent` refused; without, every connection of the backend
/// goes there (`dispatch` wins over `option transparent`). A backend that
/// also has servers sends HAProxy's cookie-persistent requests to them and
/// the rest there: ebb refuses that mix.
fn backend_target(
    p: &Proxy,
    warnings: &mut Vec<String>,
) -> Result<Option<Arc<crate::backend::ServerRt>>, ConfigError> {
    let (dispatch, transparent) = (p.dispatch.as_ref(), p.transparent.as_ref());
    if p.balance_set {
        if let Some(loc) = transparent {
            return Err(err(
                loc,
                format!(
                    "proxy '{}' cannot use both transparent and balance mode",
                    p.name
                ),
            ));
        }
        if let Some(d) = dispatch {
            warnings.push(format!(
                "{}: dispatch address of proxy '{}' will be ignored in balance mode",
                d.loc, p.name
            ));
        }
        return Ok(None);
    }
    let loc = match (dispatch, transparent) {
        (Some(d), _) => &d.loc,
        (None, Some(l)) => l,
        (None, None) => return Ok(None),
    };
    if !p.servers.is_empty() {
        return Err(err(
            loc,
            format!(
                "'{}' in proxy '{}' which has servers is not supported by ebb (HAProxy would send only cookie-persistent requests to the servers)",
                if dispatch.is_some() { "dispatch" } else { "option transparent" },
                p.name
            ),
        ));
    }
    let addr =
        match dispatch {
            Some(d) => {
                let (host, port) = &d.value;
                Some(resolve(host, *port).ok_or_else(|| {
                    err(&d.loc, format!("dispatch: cannot resolve address '{host}'"))
                })?)
            }
            None => None,
        };
    Ok(Some(crate::backend::backend_target(
        &p.name,
        addr,
        srv_sock(p),
    )))
}

/// A backend's options for its server sockets.
fn srv_sock(p: &Proxy) -> crate::config::SrvSock {
    crate::config::SrvSock {
        tcpka: p.options.srvtcpka,
        nolinger: p.options.nolinger,
        smart_connect: p.options.smart_connect,
        source: p.source.as_ref().map(|s| s.value),
    }
}

/// A backend's `fullconn`: its own, else HAProxy's default, a tenth of
/// the `maxconn` of the frontends that route to it (`default_backend`,
/// or a `use_backend` naming it, each frontend once; a listen without
/// `default_backend` counts for itself), at least 1. A frontend without
/// `maxconn` has the global one; where neither is set HAProxy's default
/// follows its file descriptor limit, so a server with a `minconn` below
/// its `maxconn` there is refused (its limit would be another's).
pub(super) fn fullconn_of(cfg: &Config, p: &Proxy) -> Result<u32, ConfigError> {
    if let Some(n) = p.fullconn {
        return Ok(n);
    }
    let mut total: u64 = 0;
    let mut unknown = None;
    for fe in cfg.frontends() {
        let reaches = match &fe.default_backend {
            Some(d) => d.value == p.name,
            None => fe.kind == crate::config::ProxyKind::Listen && fe.name == p.name,
        } || fe.use_backends.iter().any(|u| {
            u.dynamic.is_none()
                && u.backend == p.name
                && fe
                    .default_backend
                    .as_ref()
                    .is_none_or(|d| d.value != p.name)
        });
        if reaches {
            match fe.maxconn.or(cfg.global.maxconn) {
                Some(m) => total += u64::from(m),
                None => unknown = unknown.or(Some(&fe.name)),
            }
        }
    }
    let dynamic = p.servers.iter().find(|s| {
        s.opts
            .minconn
            .is_some_and(|mi| s.opts.maxconn.is_some_and(|ma| mi < ma))
    });
    if let (Some(fe), Some(s)) = (unknown, dynamic) {
        return Err(err(
            &s.loc,
            format!(
                "server {}/{}: 'minconn' below 'maxconn' needs the backend's 'fullconn', or a 'maxconn' on frontend '{fe}' (or in global): HAProxy's default there follows its file descriptor limit",
                p.name, s.name
            ),
        ));
    }
    Ok(u32::try_from(total.div_ceil(10)).unwrap_or(u32::MAX).max(1))
}

pub(super) fn compile_servers(
    p: &Proxy,
    state: Option<&BTreeMap<String, SrvState>>,
    fullconn: u32,
    warnings: &mut Vec<String>,
) -> Result<ServersRt, ConfigError> {
    let mut list = Vec::with_capacity(p.servers.len());
    for s in &p.servers {
        let tls =
            server_tls(&s.opts).map_err(|e| err(&s.loc, format!("server {}: {e}", s.name)))?;
        if p.checks_connect_ssl() {
            // The settings `connect ssl` steps use (built when the checks
            // start): their errors now.
            crate::backend::check::connect_ssl_ctx(&s.opts, tls.as_ref())
                .map_err(|e| err(&s.loc, format!("server {}: {e}", s.name)))?;
        }
        let saved = state.and_then(|m| m.get(&s.name));
        let addr = match &s.opts.init_addr {
            // A UNIX socket has no IP address.
            _ if s.opts.unix.is_some() => None,
            // HAProxy's default `last,libc` (libc: once, here, at start).
            None => {
                let mut addr = if s.srv {
                    None
                } else {
                    resolve(&s.host, s.port)
                };
                if let Some(st) = saved {
                    // An address changed at run time survives the restart.
                    if let Some(a) = crate::statefile::saved_addr(st, addr) {
                        addr = Some(a);
                    }
                }
                addr
            }
            Some(methods) => init_addr(s, methods, saved)?,
        };
        if addr.is_none() && s.opts.resolvers.is_none() && s.opts.unix.is_none() {
            warnings.push(format!(
                "{}: server {}/{}: cannot resolve '{}': the server stays in maintenance",
                s.loc, p.name, s.name, s.host
            ));
        }
        let mut opts = s.opts.clone();
        opts.sock = srv_sock(p);
        // `cookie ... dynamic`: a server without a value of its own.
        if opts.cookie.is_none() && p.cookie.as_ref().is_some_and(|c| c.dynamic) {
            opts.dyncookie_key = p.dynamic_cookie_key.clone();
        }
        list.push((s.name.clone(), addr, opts, tls));
    }
    let host = p
        .servers
        .first()
        .map(|s| s.host.clone())
        .unwrap_or_default();
    let probe = crate::backend::check::probe_for(p, &host).map_err(|(l, e)| err(l, e))?;
    // HAProxy: the HTTP check options are ignored, with its warning,
    // under another protocol check (`option tcp-check`, `mysql-check`...).
    let tcp_proto = p.tcp_check.enabled || p.tcp_check.builtin.is_some();
    if !p.http_check.enabled && tcp_proto {
        for (on, kw) in [
            (p.http_check.disable_404, "disable-on-404"),
            (p.http_check.send_state, "send-state"),
        ] {
            if on {
                warnings.push(format!(
                    "{}: '{kw}' will be ignored for {} '{}' (requires 'option httpchk').",
                    p.loc,
                    p.kind.name(),
                    p.name
                ));
            }
        }
    }
    if p.hash_type.balance_factor > 0 && matches!(p.balance, crate::config::Balance::Random { .. })
    {
        return Err(err(
            &p.loc,
            "'hash-balance-factor' with 'balance random' is not supported by ebb (its random is not HAProxy's consistent-hash random)".to_string(),
        ));
    }
    let mut farm = Farm::new(
        p.name.clone(),
        list,
        crate::l4rules::balance_for_mode(p, warnings),
        p.retries,
        p.options.redispatch,
        p.http_reuse,
        p.http_check.clone(),
    );
    farm.redispatch_after = p.options.redispatch_after;
    farm.retry_on = p.retry_on;
    farm.target = backend_target(p, warnings)?;
    farm.sock = srv_sock(p);
    farm.allbackups = p.options.allbackups;
    farm.dyncookie = std::sync::Mutex::new(crate::backend::DynCookies {
        key: p.dynamic_cookie_key.clone(),
        on: p.cookie.as_ref().is_some_and(|c| c.dynamic),
    });
    farm.fullconn = fullconn;
    farm.set_hash(p.hash_type);
    for (rt, s) in farm.servers.iter().zip(&p.servers) {
        rt.port.store(s.port, std::sync::atomic::Ordering::Relaxed);
        if s.opts.resolvers.is_some() && s.host.parse::<std::net::IpAddr>().is_err() {
            if let Ok(mut g) = rt.fqdn.lock() {
                *g = Some(s.host.clone());
            }
        }
    }
    // HAProxy 2.6's warning for each server whose dynamic cookie equals
    // that of a server before it (both out of maintenance): persistence
    // could not tell them apart.
    for (i, s) in farm.servers.iter().enumerate() {
        let mine = match (&s.opts.cookie, s.cookie()) {
            (None, Some(c)) if !s.in_maint() => c,
            _ => continue,
        };
        for t in farm.servers.iter().take(i) {
            if !t.in_maint() && t.cookie().is_some_and(|c| c == mine) {
                warnings.push(format!(
                    "We generated two equal cookies for two different servers.\n\
                     Please change the secret key for '{}'.",
                    p.name
                ));
            }
        }
    }
    if let Some(m) = state {
        for s in &farm.servers {
            if let Some(st) = m.get(&s.name) {
                crate::statefile::apply(s, st);
                if let Some(w) = crate::statefile::apply_op(&farm, s, st) {
                    warnings.push(w);
                }
            }
        }
        for name in m.keys() {
            if !farm.servers.iter().any(|s| &s.name == name) {
                warnings.push(format!(
                    "server-state: server {}/{name} is in the state file but no longer in the configuration",
                    p.name
                ));
            }
        }
    }
    let t = &p.timeouts;
    let connect = ms(t.connect).unwrap_or(DEFAULT_CONNECT_MS);
    let server = ms(t.server).unwrap_or(DEFAULT_SERVER_MS);
    Ok(ServersRt {
        farm: Arc::new(farm),
        probe,
        check_timeout: t.check,
        check_connect_cap: t.check.and(t.connect),
        log_checks: p.options.log_health_checks,
        email_alert: p.email_alert.clone(),
        timeouts: BeTimeouts {
            connect,
            server,
            queue: ms(t.queue).unwrap_or(connect),
            tunnel: ms(t.tunnel).unwrap_or(server),
        },
        forwardfor: p.options.forwardfor.clone(),
        originalto: p.options.originalto.clone(),
        server_close: p.options.conn_mode != HttpConnMode::KeepAlive,
        pretend_keepalive: p.options.pretend_keepalive,
        close: p.options.conn_mode == HttpConnMode::Close,
        abort_on_close: p.options.abortonclose,
        cookie: p.cookie.clone().map(|mut c| {
            c.persist = p.options.persist;
            c
        }),
        persist_rules: Vec::new(),
        use_server: Vec::new(),
        persist: p.options.persist,
        send_name: p.send_name_header.clone(),
        fcgi: None,
        max_ka_queue: p.max_keep_alive_queue,
        prefer_last: p.options.prefer_last_server
            && !matches!(
                p.balance,
                crate::config::Balance::Source
                    | crate::config::Balance::Uri { .. }
                    | crate::config::Balance::UrlParam { .. }
                    | crate::config::Balance::Hdr { .. }
            ),
    })
}

/// The external checks of backend `p` (`option external-check`), checked
/// as HAProxy 2.6 checks them at start: the global `external-check` and
/// a command are needed, a command without a '/' first needs
/// `external-check path`; without `insecure-fork-wanted` a warning says
/// they will likely fail. `external-check command|path` without the
/// option are ignored with HAProxy's warning.
pub(super) fn ext_probe(
    cfg: &Config,
    p: &Proxy,
    warnings: &mut Vec<String>,
) -> Result<Option<crate::backend::check::Probe>, ConfigError> {
    let e = &p.ext_check;
    let Some(on) = &e.enabled else {
        for (kw, v) in [("command", &e.command), ("path", &e.path)] {
            if let Some(v) = v {
                warnings.push(format!(
                    "{}: 'external-check {kw}' will be ignored for backend '{}' (requires 'option external-check')",
                    v.loc, p.name
                ));
            }
        }
        return Ok(None);
    };
    if !cfg.global.external_check {
        return Err(err(
            on,
            format!(
                "Proxy '{}' : 'option external-check' unable to find required 'global.external-check'",
                p.name
            ),
        ));
    }
    let Some(command) = &e.command else {
        return Err(err(
            on,
            format!(
                "Proxy '{}' : 'option external-check' unable to find required 'external-check command'",
                p.name
            ),
        ));
    };
    if !command.value.starts_with('/') && e.path.is_none() {
        return Err(err(
            &command.loc,
            format!(
                "Proxy '{}': 'external-check command' does not have a leading '/' and 'external-check path' is not set",
                p.name
            ),
        ));
    }
    if !cfg.global.insecure_fork {
        warnings.push(format!(
            "{on}: Proxy '{}' : 'insecure-fork-wanted' not enabled in the global section, 'option external-check' will likely fail (ebb starts the command only as root without it)",
            p.name
        ));
    }
    // HAProxy's first TCP or UNIX listener of the proxy.
    let (addr, port) = p
        .binds
        .iter()
        .find_map(|b| match b.addrs.first() {
            Some(a) => Some((a.ip().to_string(), a.port().to_string())),
            None => b.sockets.iter().find_map(|s| match s {
                crate::config::SockSpec::Unix(path) => {
                    Some((path.display().to_string(), "NOT_USED".to_string()))
                }
                crate::config::SockSpec::Abns(_) => Some((String::new(), "NOT_USED".to_string())),
                crate::config::SockSpec::Fd(_) => None,
            }),
        })
        .unwrap_or_else(|| ("NOT_USED".to_string(), "NOT_USED".to_string()));
    let t = &p.timeouts;
    Ok(Some(crate::backend::check::Probe::Ext(Arc::new(
        crate::backend::check::ExtProbe {
            command: command.value.clone(),
            path: e.path.as_ref().map(|v| v.value.clone()).unwrap_or_default(),
            proxy_name: p.name.clone(),
            proxy_id: proxy_uuid(cfg, p).to_string(),
            proxy_addr: addr,
            proxy_port: port,
            http: p.mode == crate::config::ProxyMode::Http,
            connect_cap: t.check.and(t.connect),
            fork_wanted: cfg.global.insecure_fork,
        },
    ))))
}
