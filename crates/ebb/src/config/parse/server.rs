//! `server` lines and the options they share with `default-server`,
//! `server-template` and the CLI's `add server`.
//!
//! A server starts from its backend's `default-server` options (a dynamic
//! one from none, as in HAProxy); the line's options then apply in order,
//! flags and `no-` flags overriding what came before. Names given for
//! `socks4` and `agent-addr` are resolved once, when the line is read.
//! TLS settings the line leaves unset come from `global`'s
//! `ssl-default-server-*`. Checks that need a port and have none are
//! refused with HAProxy's alert. `resolvers` options are parsed in
//! `config::resolvers`.

use std::sync::Arc;

use super::tls::{server_tls_option, with_base};
use super::{arg, Ctx, DefaultPath, TlsDefaults, BE};
use crate::config::types::*;
use crate::config::values::*;

/// A `server` line of a backend: the server, added to the backend's list.
pub(super) fn server_kw(px: &mut Proxy, ctx: &Ctx<'_>, w: &[String]) -> Result<(), String> {
    let loc = ctx.loc;
    let name = arg(w, 1, "server")?;
    if !valid_name(name) {
        return Err(format!("invalid server name '{name}'"));
    }
    let addr = w
        .get(2)
        .ok_or_else(|| format!("server '{name}' needs an address (ADDR:PORT)"))?;
    let unix = unix_target(addr)?;
    let (host, port) = match &unix {
        Some(_) => (addr.to_string(), 0),
        None => crate::config::values::parse_server_addr(addr)?,
    };
    let mut opts = px.default_server.clone();
    parse_server_opts(&w[3..], &mut opts, ctx)?;
    opts.map_ports = port == 0 && unix.is_none();
    if let Some(u) = &unix {
        unix_opts(name, u, &opts)?;
    }
    opts.unix = unix;
    if let Some(id) = opts.id {
        if let Some(o) = px.servers.iter().find(|x| x.opts.id == Some(id)) {
            return Err(format!(
                "'id' : custom id {id} already used at {}:{} ('server {}')",
                o.loc.file, o.loc.line, o.name
            ));
        }
    }
    // HAProxy asks a checked server for a port only when it has
    // an address: on 0.0.0.0 (or `::`, or none written) its check
    // goes to port 0 and fails.
    let any = host.is_empty()
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_unspecified());
    no_check_port(name, &opts, any)?;
    {
        // `ssl-default-server-*` fill what the line does not set (also
        // without `ssl`: a `connect ssl` check step uses them).
        let d = &ctx.tls.server;
        let t = &mut opts.tls;
        t.ciphers = t.ciphers.take().or_else(|| d.ciphers.clone());
        t.ciphersuites = t.ciphersuites.take().or_else(|| d.ciphersuites.clone());
        t.min_ver = t.min_ver.or(d.min_ver);
        t.max_ver = t.max_ver.or(d.max_ver);
        t.no_tls12 |= d.no_tls12;
        t.no_tls13 |= d.no_tls13;
        t.no_tls_tickets |= d.no_tls_tickets;
        if (opts.ssl || opts.check_ssl) && t.versions().is_empty() {
            return Err(format!(
                "server '{name}': the TLS version options leave no version ebb speaks (TLSv1.2, TLSv1.3)"
            ));
        }
    }
    px.servers.push(Server {
        name: name.to_string(),
        host,
        port,
        opts,
        loc: loc.clone(),
        srv: false,
    });
    Ok(())
}

/// A server address naming a UNIX socket: `abns@NAME`, `unix@PATH` or
/// a path starting with `/` (HAProxy's address parser: environment
/// variables expanded), or `None` for another address.
fn unix_target(addr: &str) -> Result<Option<UnixTarget>, String> {
    let addr = crate::config::values::env_expand(addr);
    if let Some(n) = addr.strip_prefix("abns@") {
        if n.is_empty() || n.len() > 100 {
            return Err("'abns@' expects a name of 1 to 100 bytes".to_string());
        }
        return Ok(Some(UnixTarget::Abns(n.to_string())));
    }
    let path = match addr.strip_prefix("unix@") {
        Some(p) => p,
        None if addr.starts_with('/') => &addr,
        None => return Ok(None),
    };
    // sun_path holds 108 bytes, the last one the terminating zero.
    if path.is_empty() || path.len() > 107 {
        return Err(format!(
            "'{addr}': a UNIX socket path of 1 to 107 bytes is expected"
        ));
    }
    Ok(Some(UnixTarget::Path(std::path::PathBuf::from(path))))
}

/// The options a UNIX socket server cannot have in ebb: SOCKS4 (it
/// reaches IPv4 addresses), and health checks and resolvers (they
/// work on IP addresses).
fn unix_opts(name: &str, u: &UnixTarget, o: &ServerOptions) -> Result<(), String> {
    let what = match u {
        UnixTarget::Abns(_) => "an abns@",
        UnixTarget::Path(_) => "a UNIX socket",
    };
    if o.socks4.is_some() {
        return Err(format!(
            "server '{name}': 'socks4' on {what} server is not supported by ebb (SOCKS4 reaches IPv4 addresses)"
        ));
    }
    if o.check || o.resolvers.is_some() {
        return Err(format!(
            "server '{name}': 'check' and 'resolvers' on {what} server are not supported by ebb"
        ));
    }
    Ok(())
}

/// `add server BACKEND/NAME ADDR[:PORT] [options]` after the name: the
/// host, port and options of a dynamic server (HAProxy: no `default-server`
/// settings apply; only the options its list allows).
pub fn parse_dynamic_server(w: &[String]) -> Result<(String, u16, ServerOptions), String> {
    let addr = w
        .first()
        .ok_or("'server' expects <name> and <addr>[:<port>] as arguments.")?;
    let unix = unix_target(addr)?;
    // A missing port is the client's destination port (HAProxy's).
    let (host, port) = match &unix {
        Some(_) => (addr.to_string(), 0),
        None => crate::config::values::parse_server_addr(addr)?,
    };
    crate::config::resolvers::dynamic_server_words(&w[1..])?;
    let loc = Loc {
        file: Arc::from("cli"),
        line: 0,
    };
    let tls = TlsDefaults::default();
    let ctx = Ctx {
        loc: &loc,
        default_path: &DefaultPath::Current,
        tls: &tls,
        caps: BE,
        defaults: false,
        anon_defaults: false,
        section_name: "backend",
        http_errors: &[],
        named_defaults: false,
        experimental: false,
    };
    let mut o = ServerOptions {
        dynamic: true,
        ..ServerOptions::default()
    };
    parse_server_opts(&w[1..], &mut o, &ctx)?;
    o.map_ports = port == 0 && unix.is_none();
    if let Some(u) = &unix {
        unix_opts(&host, u, &o)?;
    }
    o.unix = unix;
    if o.agent_check && o.agent_port.is_none_or(|p| p == 0) {
        return Err(
            "'agent-check' needs 'agent-port' (the server would have no agent port)".into(),
        );
    }
    Ok((host, port, o))
}

/// A server without a port cannot be checked unless its checks have a
/// port of their own, `port N` (HAProxy's alert, which it also lifts with
/// a `tcp-check connect port`, refused on such a server here).
pub(in crate::config) fn no_check_port(
    name: &str,
    o: &ServerOptions,
    any_addr: bool,
) -> Result<(), String> {
    if o.check && o.track.is_some() {
        // HAProxy's alert.
        return Err("unable to enable checks and tracking at the same time!".into());
    }
    if o.agent_check && o.agent_port.or(o.check_port).is_none_or(|p| p == 0) {
        // HAProxy's alert.
        return Err(format!(
            "server {name} does not have agent port. Agent check has been disabled."
        ));
    }
    if o.map_ports && o.check && !any_addr && o.check_port.or(o.check_addr_port).is_none() {
        return Err(format!(
            "server '{name}' has neither service port nor check port (give it a port, or `port N` for its checks)"
        ));
    }
    Ok(())
}

pub(super) fn parse_server_opts(
    w: &[String],
    o: &mut ServerOptions,
    ctx: &Ctx<'_>,
) -> Result<(), String> {
    let mut i = 0;
    while i < w.len() {
        let opt = w[i].as_str();
        i += 1;
        // Flags first.
        match opt {
            "backup" => o.backup = true,
            "no-backup" => o.backup = false,
            "disabled" => o.disabled = true,
            "enabled" => o.disabled = false,
            "check" => o.check = true,
            "no-check" => o.check = false,
            "ssl" => {
                o.ssl = true;
                o.no_ssl = false;
                o.ssl_ctx = true;
            }
            "no-ssl" => {
                o.ssl = false;
                o.no_ssl = true;
            }
            "send-proxy" => o.send_proxy = 1,
            "send-proxy-v2" => o.send_proxy = 2,
            "no-send-proxy" | "no-send-proxy-v2" => o.send_proxy = 0,
            "check-send-proxy" => o.check_send_proxy = true,
            "check-ssl" => {
                o.check_ssl = true;
                o.ssl_ctx = true;
            }
            "tfo" => o.tfo = true,
            "no-tfo" => o.tfo = false,
            "no-check-ssl" => o.check_ssl = false,
            "check-via-socks4" => o.check_via_socks4 = true,
            "agent-check" => o.agent_check = true,
            "no-agent-check" => o.agent_check = false,
            "send-proxy-v2-ssl" | "send-proxy-v2-ssl-cn" => {
                return Err(format!(
                    "server option '{opt}' is not supported (ebb sends 'send-proxy' and 'send-proxy-v2' headers, without SSL TLVs)"
                ))
            }
            _ if server_tls_option(opt, w.get(i).map(String::as_str), &mut o.tls)?.is_some_and(
                |n| {
                    i += n;
                    true
                },
            ) => {}
            _ => {
                let v = w
                    .get(i)
                    .map(String::as_str)
                    .ok_or_else(|| format!("server option '{opt}' expects a value"))?;
                i += 1;
                match opt {
                    // HAProxy's limits: weight 0..256.
                    "weight" => o.weight = parse_u32_range(opt, v, 0, 256)?,
                    "proxy-v2-options" => {
                        for p in v.split(',') {
                            match p {
                                "authority" => o.pp_v2.authority = true,
                                "crc32c" => o.pp_v2.crc32c = true,
                                "unique-id" => o.pp_v2.unique_id = true,
                                "ssl" | "cert-cn" | "cert-key" | "cert-sig" | "ssl-cipher" => {
                                    return Err(format!(
                                        "proxy v2 option '{p}' is not supported (ebb sends no SSL TLVs; supported: authority, crc32c, unique-id)"
                                    ))
                                }
                                _ => return Err(format!("'{p}' : proxy v2 option not implemented")),
                            }
                        }
                    }
                    "track" => o.track = Some(v.to_string()),
                    "on-marked-down" => match v {
                        "shutdown-sessions" => o.on_marked_down = true,
                        x => {
                            return Err(format!(
                                "'on-marked-down' expects 'shutdown-sessions' but got '{x}'"
                            ))
                        }
                    },
                    "on-marked-up" => match v {
                        "shutdown-backup-sessions" => o.on_marked_up = true,
                        x => {
                            return Err(format!(
                                "'on-marked-up' expects 'shutdown-backup-sessions' but got '{x}'"
                            ))
                        }
                    },
                    "observe" => {
                        o.observe = match v {
                            "none" => Observe::None,
                            "layer4" => Observe::Layer4,
                            // `mode http` is checked with the proxy's mode.
                            "layer7" => Observe::Layer7,
                            x => {
                                return Err(format!(
                                    "'observe' expects one of 'none', 'layer4', 'layer7' but got '{x}'"
                                ))
                            }
                        }
                    }
                    "error-limit" => {
                        o.error_limit = match v.parse::<i64>() {
                            Ok(n) if n > 0 => u32::try_from(n).unwrap_or(u32::MAX),
                            Ok(_) => return Err("error-limit has to be > 0.".into()),
                            Err(_) => {
                                return Err(format!("'error-limit' expects an integer argument, got '{v}'"))
                            }
                        }
                    }
                    "on-error" => {
                        o.on_error = match v {
                            "fastinter" => OnError::FastInter,
                            "fail-check" => OnError::FailCheck,
                            "sudden-death" => OnError::SuddenDeath,
                            "mark-down" => OnError::MarkDown,
                            x => {
                                return Err(format!(
                                    "'on-error' expects one of 'fastinter', 'fail-check', 'sudden-death' or 'mark-down' but got '{x}'"
                                ))
                            }
                        }
                    }
                    "maxconn" => o.maxconn = Some(parse_u32_range(opt, v, 0, u32::MAX)?).filter(|m| *m > 0),
                    "minconn" => o.minconn = Some(parse_u32_range(opt, v, 0, u32::MAX)?).filter(|m| *m > 0),
                    "maxqueue" => o.maxqueue = Some(parse_u32_range(opt, v, 0, u32::MAX)?).filter(|m| *m > 0),
                    "inter" => o.inter = nonzero_time(opt, v)?,
                    "fastinter" => o.fastinter = Some(nonzero_time(opt, v)?),
                    "downinter" => o.downinter = Some(nonzero_time(opt, v)?),
                    // At least one check; the cap only catches typos.
                    "rise" => o.rise = parse_u32_range(opt, v, 1, 1_000_000)?,
                    "fall" => o.fall = parse_u32_range(opt, v, 1, 1_000_000)?,
                    "slowstart" => {
                        let d = parse_time(v)?;
                        o.slowstart = if d.is_zero() { None } else { Some(d) };
                    }
                    "verify" => {
                        o.verify = Some(match v {
                            "none" => Verify::None,
                            "required" => Verify::Required,
                            x => {
                                return Err(format!(
                                    "'verify' expects 'none' or 'required', got '{x}'"
                                ))
                            }
                        })
                    }
                    "ca-file" => o.ca_file = Some(with_base(ctx, ctx.tls.ca_base.as_ref(), v)),
                    "crt" => o.tls.crt = Some(with_base(ctx, ctx.tls.crt_base.as_ref(), v)),
                    "crl-file" => {
                        o.tls.crl_file = Some(with_base(ctx, ctx.tls.ca_base.as_ref(), v))
                    }
                    "ciphers" => {
                        crate::tls_policy::ciphers12(v)?;
                        o.tls.ciphers = Some(v.to_string());
                    }
                    "ciphersuites" => {
                        crate::tls_policy::ciphers13(v)?;
                        o.tls.ciphersuites = Some(v.to_string());
                    }
                    "sni" => {
                        let scope = crate::sample::Scope::Request { backend: true };
                        let e = crate::sample::Expr::parse(v, scope).map_err(|e| {
                            format!("error detected while parsing sni expression : {e}")
                        })?;
                        o.sni = Some(e);
                    }
                    "check-sni" => o.check_sni = Some(v.to_string()),
                    "verifyhost" => {
                        rustls::pki_types::ServerName::try_from(v.to_string())
                            .map_err(|e| format!("'verifyhost {v}': not a host name ({e})"))?;
                        o.tls.verify_host = Some(v.to_string());
                    }
                    // HAProxy's muxes: h2, h1, fcgi, none (the last one
                    // given wins). ebb speaks HTTP/1.1 to servers by
                    // default, HTTP/2 with `h2`, FastCGI with `fcgi`;
                    // whether the mux suits the proxy's mode is checked
                    // with the proxy.
                    "proto" => {
                        let (h2, h1, fcgi, none) = match v {
                            "h2" => (true, false, false, false),
                            "h1" => (false, true, false, false),
                            "fcgi" => (false, false, true, false),
                            "none" => (false, false, false, true),
                            // HAProxy's message.
                            x => return Err(format!("'proto' :  unknown MUX protocol '{x}'.")),
                        };
                        (o.proto_h2, o.proto_h1, o.proto_fcgi, o.proto_none) = (h2, h1, fcgi, none);
                    }
                    "alpn" => o.alpn = alpn_list(v)?,
                    // HAProxy's messages.
                    "ws" => {
                        o.ws = match v {
                            "auto" => WsProto::Auto,
                            "h1" => WsProto::H1,
                            "h2" => WsProto::H2,
                            _ => return Err("'ws' has to be 'auto', 'h1' or 'h2'".into()),
                        }
                    }
                    "check-alpn" => o.check_alpn = Some(alpn_list(v)?),
                    // HAProxy's muxes: h1, h2 (HTTP checks), none (TCP).
                    "check-proto" => {
                        o.check_proto = Some(match v {
                            "h1" => CheckProto::H1,
                            "h2" => CheckProto::H2,
                            "fcgi" => CheckProto::Fcgi,
                            "none" => CheckProto::None,
                            // HAProxy's message.
                            x => return Err(format!("'check-proto' :  unknown MUX protocol '{x}'.")),
                        })
                    }
                    "socks4" => o.socks4 = Some(socks4_addr(opt, v)?),
                    "pool-max-conn" => {
                        o.pool_max_conn = if v == "-1" {
                            None
                        } else {
                            Some(parse_u32_range(opt, v, 0, u32::MAX)?)
                        }
                    }
                    // HAProxy reads it with atoi() into an unsigned: a
                    // negative number wraps (-1: never below); ebb takes a
                    // number only.
                    "pool-low-conn" => {
                        o.pool_low_conn = v
                            .parse::<i32>()
                            .map(|n| n as u32)
                            .map_err(|_| format!("'{opt}' expects an integer, got '{v}'"))?
                    }
                    "pool-purge-delay" => o.pool_purge_delay = parse_time(v)?,
                    // HAProxy reads it with atoi(): any negative value is
                    // no limit; ebb takes a number only.
                    "max-reuse" => {
                        o.max_reuse = match v.parse::<i64>() {
                            Ok(n) if n < 0 => None,
                            Ok(n) => Some(u32::try_from(n).unwrap_or(u32::MAX)),
                            Err(_) => {
                                return Err(format!(
                                    "'max-reuse' expects an integer (-1: no limit), got '{v}'"
                                ))
                            }
                        }
                    }
                    "cookie" => o.cookie = Some(v.to_string()),
                    "agent-port" => {
                        o.agent_port = Some(v.parse::<u16>().map_err(|_| {
                            format!("'agent-port' expects a port number (0..65535), got '{v}'")
                        })?)
                    }
                    "agent-addr" => o.agent_addr = Some(agent_addr(v)?),
                    // HAProxy's `atol`: a word that is no number reads 0.
                    "id" => match v.parse::<i64>().unwrap_or(0) {
                        n if n <= 0 => return Err("'id' : custom id has to be > 0".into()),
                        n => {
                            o.id = Some(u32::try_from(n).map_err(|_| {
                                format!("'id' : custom id {v} is out of range")
                            })?)
                        }
                    },
                    "port" => {
                        let p = v.parse::<u16>().map_err(|_| {
                            format!("'port' expects a port number (0..65535), got '{v}'")
                        })?;
                        o.check_port = Some(p).filter(|p| *p > 0);
                    }
                    "addr" => {
                        // An address, with a port or not (HAProxy's
                        // `str2sa_range` with the port optional).
                        let (ip, port) = match v.parse::<std::net::SocketAddr>() {
                            Ok(a) => (a.ip(), Some(a.port())),
                            Err(_) => match v.rsplit_once(':').filter(|(h, _)| !h.contains(':')) {
                                Some((h, p)) => (
                                    h.parse().or_else(|_| agent_addr(h)).map_err(|_| {
                                        format!("'addr' expects <ipv4|ipv6> as argument, got '{v}'")
                                    })?,
                                    Some(p.parse::<u16>().map_err(|_| {
                                        format!("'addr' : invalid port '{p}' in '{v}'")
                                    })?),
                                ),
                                None => (
                                    v.parse().or_else(|_| agent_addr(v)).map_err(|_| {
                                        format!("'addr' expects <ipv4|ipv6> as argument, got '{v}'")
                                    })?,
                                    None,
                                ),
                            },
                        };
                        o.check_addr = Some(ip);
                        o.check_addr_port = port.filter(|p| *p > 0);
                    }
                    "agent-inter" => o.agent_inter = nonzero_time(opt, v)?,
                    "agent-send" => o.agent_send = v.as_bytes().to_vec(),
                    "resolvers" | "resolve-prefer" | "init-addr" | "resolve-opts"
                    | "resolve-net" => crate::config::resolvers::server_opt(opt, v, o)?,
                    _ => {
                        return Err(format!(
                            "unknown server option '{opt}' (supported: weight, maxconn, minconn, maxqueue, backup, disabled, check, inter, fastinter, downinter, rise, fall, slowstart, agent-check, agent-port, agent-addr, agent-inter, agent-send, ssl, verify, ca-file, crt, crl-file, sni, check-sni, verifyhost, cookie, ciphers, ciphersuites, ssl-min-ver, ssl-max-ver, no-tlsv12, no-tlsv13, force-tlsv12, force-tlsv13, no-tls-tickets, pool-low-conn, pool-max-conn, pool-purge-delay, max-reuse, resolvers, resolve-prefer, resolve-opts, init-addr, proto, alpn, ws, check-proto, check-alpn, socks4, check-via-socks4, track, on-marked-down, on-marked-up, observe, error-limit, on-error, id, port, addr, check-ssl, check-send-proxy, send-proxy, send-proxy-v2, tfo, no-tfo)"
                        ))
                    }
                }
            }
        }
    }
    Ok(())
}

/// `socks4 ADDR:PORT`: the proxy's address, a name resolved once here
/// (HAProxy resolves it when it reads the line); the port is mandatory.
fn socks4_addr(kw: &str, v: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = v.parse::<std::net::SocketAddr>() {
        return Ok(a);
    }
    let bad = || format!("'{kw} {v}' : expects <addr>:<port> (a port is mandatory)");
    let (host, port) = v.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("'{kw} {v}' : could not resolve address '{host}'"))
}

/// `agent-addr ADDR`: an IP address, or a name resolved once here (as
/// HAProxy resolves it when it reads the line).
pub fn agent_addr(v: &str) -> Result<std::net::IpAddr, String> {
    if let Ok(ip) = v.parse() {
        return Ok(ip);
    }
    use std::net::ToSocketAddrs;
    (v, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| format!("parsing agent-addr failed. Check if '{v}' is correct address."))
}

pub(super) fn nonzero_time(what: &str, v: &str) -> Result<std::time::Duration, String> {
    let d = parse_time(v)?;
    if d.is_zero() {
        return Err(format!("'{what}' must be greater than zero"));
    }
    Ok(d)
}
