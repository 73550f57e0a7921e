//! CLI commands that change where servers are: `set server B/S addr`,
//! `set server B/S fqdn`, and `show resolvers`; and a backend's dynamic
//! cookies (`enable|disable dynamic-cookie backend B`, `set
//! dynamic-cookie-key backend B KEY`).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;

use crate::backend::{Farm, ServerRt};

/// `set server B/S addr IP [port P]`: new connections and checks go to
/// the new address; open connections stay. HAProxy's answer text.
pub fn set_addr(s: &ServerRt, args: &[&str]) -> Result<String, String> {
    let usage = || "Usage: set server BACKEND/SERVER addr IP [port PORT]".to_string();
    let (ip, port) = match args {
        [ip] => (*ip, None),
        [ip, "port", p] => (*ip, Some(*p)),
        _ => return Err(usage()),
    };
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| format!("Invalid addr '{ip}': expected an IPv4 or IPv6 address."))?;
    let own_port = port.is_some();
    let port = match port {
        None => s.port.load(Ordering::Relaxed),
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("Invalid port '{p}'."))?,
    };
    let old = s.addr();
    if own_port {
        // A port of its own from now on (HAProxy drops the mapped ports).
        s.map_ports.store(false, Ordering::Relaxed);
    }
    s.set_addr(Some(SocketAddr::new(ip, port)));
    let mut msg = match old {
        Some(o) if o.ip() == ip => "no need to change the addr".to_string(),
        Some(o) => format!("IP changed from '{}' to '{ip}'", o.ip()),
        None => format!("IP changed from '(none)' to '{ip}'"),
    };
    match old.map(|o| o.port()) {
        Some(p) if p != port => msg.push_str(&format!(", port changed from '{p}' to '{port}'")),
        None => msg.push_str(&format!(", port changed from '0' to '{port}'")),
        _ => msg.push_str(", no need to change the port"),
    }
    msg.push_str(" by 'stats socket command'\n");
    Ok(msg)
}

/// `set server B/S fqdn NAME`: the server's resolvers look the new name up
/// from their next round.
pub fn set_fqdn(s: &ServerRt, name: &str) -> Result<String, String> {
    if s.opts.resolvers.is_none() {
        return Err("set server <b>/<s> fqdn failed because no resolution is configured.".into());
    }
    let n = name.trim_end_matches('.');
    if crate::dns::encode_query(0, n, crate::dns::QType::A, 512).is_err() {
        return Err(format!(
            "could not update {}/{} FQDN by 'stats socket command'",
            s.backend, s.name
        ));
    }
    let mut g = s.fqdn.lock().unwrap_or_else(|p| p.into_inner());
    let old = g.replace(n.to_ascii_lowercase()).unwrap_or_default();
    drop(g);
    crate::resolvers::kick();
    Ok(format!(
        "{}/{} changed its FQDN from {old} to {n} by 'stats socket command'\n",
        s.backend, s.name
    ))
}

/// `set server B/S ssl on|off`: new connections speak TLS or not, with
/// the TLS settings prepared at start (HAProxy's texts); idle connections
/// close.
pub fn set_ssl(s: &ServerRt, arg: Option<&str>) -> Result<String, String> {
    if s.opts.dynamic {
        return Err("'set server <srv> ssl' not supported on dynamic servers\n".into());
    }
    if s.tls_ctx.is_none() {
        return Err(
            "'set server <srv> ssl' cannot be set.  default-server should define ssl settings\n"
                .into(),
        );
    }
    let v = match arg {
        Some("on") => 1,
        Some("off") => 0,
        _ => return Err("'set server <srv> ssl' expects 'on' or 'off'.\n".into()),
    };
    s.use_ssl.store(v, Ordering::Relaxed);
    s.close_idle();
    Ok("server ssl setting updated.\n".into())
}

/// Dispatches `set server B/S addr|fqdn ...`.
pub fn set(_farm: &Farm, s: &ServerRt, kw: &str, rest: &[&str]) -> Result<String, String> {
    match (kw, rest) {
        ("addr", a) => set_addr(s, a),
        ("fqdn", [n]) => set_fqdn(s, n),
        _ => Err("Usage: set server BACKEND/SERVER fqdn NAME".into()),
    }
}

/// `add server BACKEND/NAME ADDR[:PORT] [options]` (no port: the client's
/// destination port, as HAProxy).
pub fn add(c: &crate::proxy::Compiled, spec: &str, rest: &[&str]) -> Result<String, String> {
    let (b, name) = spec
        .split_once('/')
        .filter(|(b, n)| !b.is_empty() && !n.is_empty())
        .ok_or("Require 'backend/server'.")?;
    let be = c
        .backends
        .iter()
        .find(|x| x.name == b)
        .ok_or("No such backend.")?;
    let crate::proxy::BackendKind::Servers(sv) = &be.kind else {
        return Err("Backend has no servers (it serves files).".into());
    };
    if !name
        .bytes()
        .all(|x| x.is_ascii_alphanumeric() || b"-_.:".contains(&x))
    {
        return Err(format!("Invalid server name '{name}'."));
    }
    let words: Vec<String> = rest.iter().map(|w| w.to_string()).collect();
    let (host, port, opts) = crate::config::parse_dynamic_server(&words)?;
    if (be.l4.tcp_mode && (opts.proto_h2 || opts.proto_h1 || opts.proto_fcgi))
        || (!be.l4.tcp_mode && opts.proto_none)
    {
        // HAProxy 2.6's answer: the h2 mux is an HTTP one.
        return Err("MUX protocol is not usable for server.".into());
    }
    if !be.l4.tcp_mode
        && opts.send_proxy > 0
        && (opts.speaks_h2() || opts.ws == crate::config::WsProto::H2)
    {
        // As at start: ebb's HTTP/2 server side sends no PROXY header.
        return Err(
            "'send-proxy' on a 'proto h2', 'alpn h2' or 'ws h2' server is not supported by ebb."
                .into(),
        );
    }
    if opts.proto_fcgi {
        // As at start: a FastCGI server needs its backend's application
        // (HAProxy's check at start), and ebb's FastCGI side speaks
        // neither TLS, PROXY nor SOCKS4.
        if sv.fcgi.is_none() {
            return Err(format!(
                "proxy '{b}': FCGI server '{name}' has no FCGI app configured."
            ));
        }
        let what = if opts.ssl {
            Some("ssl")
        } else if opts.send_proxy > 0 {
            Some("send-proxy")
        } else if opts.socks4.is_some() {
            Some("socks4")
        } else {
            None
        };
        if let Some(w) = what {
            return Err(format!(
                "'{w}' on a 'proto fcgi' server is not supported by ebb."
            ));
        }
    }
    if be.l4.tcp_mode && opts.observe == crate::config::Observe::Layer7 {
        // HAProxy's alert, as at start.
        return Err("'layer7' can only be used in http proxies.".into());
    }
    if be.l4.tcp_mode && opts.sni.as_ref().is_some_and(|e| !e.constant()) {
        // As at start: a tcp session's connect evaluates no expression.
        return Err(
            "'sni' with an expression of the session is supported by ebb in 'mode http' only."
                .into(),
        );
    }
    if opts.check && opts.track.is_some() {
        // HAProxy's alert.
        return Err("unable to enable checks and tracking at the same time!".into());
    }
    if opts.map_ports && opts.check && opts.check_port.or(opts.check_addr_port).is_none() {
        // HAProxy 2.6's answer (ebb has no check port to give).
        return Err(format!(
            "config: backend '{b}': server '{name}' has neither service port nor check port nor tcp_check rule 'connect' with port information."
        ));
    }
    // HAProxy's `init-addr none`: a name is not resolved.
    let addr = host
        .parse::<IpAddr>()
        .ok()
        .map(|ip| SocketAddr::new(ip, port));
    if sv.farm.sock.source.is_some() && (opts.check || opts.agent_check) {
        // As at start: ebb's checks would not connect from that address.
        return Err(format!(
            "backend '{b}' has a 'source': health checks on its servers are not supported yet."
        ));
    }
    let tracked = match &opts.track {
        Some(spec) => Some(track_target(c, b, spec)?),
        None => None,
    };
    if let Some(p) = &opts.ca_file {
        // Loaded (or found in the store, `new ssl ca-file`) whether the
        // server verifies or not, as HAProxy's keyword does.
        crate::tls::server_ca_file_loads(p)?;
    }
    let tls = crate::proxy::server_tls(&opts)?;
    let s = sv.farm.add_server(name, addr, opts, tls)?;
    s.port.store(port, Ordering::Relaxed);
    if let Some(t) = tracked {
        // It starts with the tracked server's state (HAProxy's
        // inherited maintenance and health); the tracked server can no
        // longer be deleted.
        crate::backend::link_track(&sv.farm, &s, &t);
        s.iadmin.store(t.admin_state(), Ordering::Relaxed);
        s.up.store(t.up.load(Ordering::Relaxed), Ordering::Relaxed);
        t.pinned.store(true, Ordering::Relaxed);
        sv.farm.note_state();
    }
    Ok("New server registered.\n".into())
}

/// The server `track B/S` (or `track S`, in backend `from`) names for a
/// server added on the CLI, with HAProxy's refusals (`srv_apply_track`).
fn track_target(
    c: &crate::proxy::Compiled,
    from: &str,
    spec: &str,
) -> Result<std::sync::Arc<ServerRt>, String> {
    let (pname, sname) = spec.rsplit_once('/').unwrap_or((from, spec));
    let farm = c
        .backends
        .iter()
        .find_map(|x| match &x.kind {
            crate::proxy::BackendKind::Servers(sv) if x.name == pname => Some(&sv.farm),
            _ => None,
        })
        .ok_or_else(|| format!("unable to find required proxy '{pname}' for tracking."))?;
    let t = farm
        .servers
        .iter()
        .find(|x| x.name == sname)
        .ok_or_else(|| format!("unable to find required server '{sname}' for tracking."))?;
    if t.opts.dynamic {
        return Err(format!(
            "unable to use {pname}/{sname} for tracking as it is a dynamic server."
        ));
    }
    if !t.opts.check && !t.opts.agent_check && t.opts.track.is_none() {
        return Err(format!(
            "unable to use {pname}/{sname} for tracking as it does not have any check nor agent enabled."
        ));
    }
    Ok(std::sync::Arc::clone(t))
}

/// `del server BACKEND/NAME`.
pub fn del(farm: &Farm, s: &ServerRt) -> Result<String, String> {
    farm.del_server(s)?;
    Ok("Server deleted.".into())
}

pub use crate::backend::check_switch;

/// `set server B/S agent up|down`, `agent-addr ADDR [port P]`,
/// `agent-port P`, `agent-send STRING` (HAProxy's texts; a bad address or
/// port is a warning and changes nothing).
pub fn set_agent(farm: &Farm, s: &ServerRt, kw: &str, rest: &[&str]) -> Result<String, String> {
    let warn = |w: String| Ok(if w.is_empty() { w } else { w + "\n" });
    match (kw, rest) {
        ("agent", ["up"]) => crate::backend::agent::force(farm, s, true),
        ("agent", ["down"]) => crate::backend::agent::force(farm, s, false),
        ("agent", _) if !s.agent.enabled() => {
            Err("agent checks are not enabled on this server.\n".into())
        }
        ("agent", _) => Err("'set server <srv> agent' expects 'up' or 'down'.\n".into()),
        ("agent-addr", [a, "port", p, ..]) => {
            warn(crate::backend::agent::set_addr_port(s, Some(a), Some(p)))
        }
        ("agent-addr", [a, ..]) => warn(crate::backend::agent::set_addr_port(s, Some(a), None)),
        ("agent-addr", []) => {
            Err("set server <b>/<s> agent-addr requires an address and optionally a port.\n".into())
        }
        ("agent-port", [p, ..]) => warn(crate::backend::agent::set_addr_port(s, None, Some(p))),
        ("agent-port", []) => Err("set server <b>/<s> agent-port requires a port.\n".into()),
        ("agent-send", rest) => {
            crate::backend::agent::set_send(s, rest.first().copied().unwrap_or(""))
        }
        _ => Err("Usage: set server BACKEND/SERVER agent up|down".into()),
    }
}

/// The farm of backend `b` for the dynamic-cookie commands, with
/// HAProxy's answers when there is none.
fn cookie_farm(
    c: &crate::proxy::Compiled,
    b: Option<&str>,
) -> Result<std::sync::Arc<Farm>, String> {
    let b = b
        .filter(|b| !b.is_empty())
        .ok_or_else(|| "A backend name is expected.".to_string())?;
    let be = c
        .backends
        .iter()
        .find(|x| x.name == b)
        .ok_or_else(|| "No such backend.".to_string())?;
    match &be.kind {
        crate::proxy::BackendKind::Servers(sv) => Ok(std::sync::Arc::clone(&sv.farm)),
        crate::proxy::BackendKind::Files(_) => {
            Err(format!("Backend '{b}' has no servers (it serves files)."))
        }
    }
}

/// `enable|disable dynamic-cookie backend B`.
pub fn dynamic_cookie(
    c: &crate::proxy::Compiled,
    b: Option<&str>,
    on: bool,
) -> Result<String, String> {
    cookie_farm(c, b)?.set_dynamic_cookies(on);
    Ok(String::new())
}

/// `set dynamic-cookie-key backend B KEY`.
pub fn dynamic_cookie_key(
    c: &crate::proxy::Compiled,
    b: Option<&str>,
    key: Option<&str>,
) -> Result<String, String> {
    let farm = cookie_farm(c, b)?;
    let key = key
        .filter(|k| !k.is_empty())
        .ok_or_else(|| "String value expected.".to_string())?;
    farm.set_dynamic_cookie_key(key);
    Ok(String::new())
}
