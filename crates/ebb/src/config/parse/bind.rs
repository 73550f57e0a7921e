//! `bind` lines: the addresses a frontend listens on (TCP address lists
//! and port ranges, `fd@`, `unix@` or a path, `abns@`) and their options,
//! TLS ones included.
//!
//! An option ebb does not implement is refused by name, never ignored.
//! TLS options need `ssl` on the line; what the line leaves unset is
//! taken from `global`'s `ssl-default-bind-*` and `crt-base` as they
//! stand when the line is read, as in HAProxy. Socket ownership and mode
//! apply to UNIX sockets only.

use std::path::PathBuf;

use super::tls::{tls_bind_option, with_base, TlsOptionsOf};
use super::{arg, Ctx};
use crate::config::types::*;
use crate::config::values::*;

/// An octal permission mode (`660`, `0600`).
pub fn parse_octal_mode(arg: &str) -> Result<u32, String> {
    u32::from_str_radix(arg, 8)
        .ok()
        .filter(|m| *m <= 0o7777 && !arg.is_empty())
        .ok_or_else(|| format!("invalid octal mode '{arg}'"))
}

/// A UNIX socket's `user NAME`, `group NAME`, `uid N` or `gid N` option
/// (`bind`, `stats socket`, the master CLI's `-S`): sets the owner or
/// the group in `owner` (uid, gid).
pub fn unix_owner_opt(
    opt: &str,
    v: &str,
    owner: &mut (Option<u32>, Option<u32>),
) -> Result<(), String> {
    let id = match opt {
        "uid" | "gid" => parse_u32_range(opt, v, 0, u32::MAX)?,
        "user" => match crate::sys::user_by_name(v) {
            Ok(Some((uid, _))) => uid,
            Ok(None) => return Err(format!("unknown user '{v}'")),
            Err(e) => return Err(format!("cannot look up user '{v}': {e}")),
        },
        _ => match crate::sys::group_by_name(v) {
            Ok(Some(gid)) => gid,
            Ok(None) => return Err(format!("unknown group '{v}'")),
            Err(e) => return Err(format!("cannot look up group '{v}': {e}")),
        },
    };
    if opt == "user" || opt == "uid" {
        owner.0 = Some(id);
    } else {
        owner.1 = Some(id);
    }
    Ok(())
}

/// A bind address that is not a TCP address: `fd@N`, `unix@PATH` or a
/// path, `abns@NAME`. `None`: a TCP address (or a refused family, which
/// the TCP parser reports).
pub fn parse_sock_spec(addr: &str) -> Option<Result<SockSpec, String>> {
    if let Some(n) = addr.strip_prefix("fd@") {
        return Some(match n.parse::<i32>() {
            Ok(n) if n >= 0 => Ok(SockSpec::Fd(n)),
            _ => Err(format!(
                "'{addr}': 'fd@' expects a file descriptor number (is the variable set?)"
            )),
        });
    }
    if let Some(p) = addr.strip_prefix("unix@") {
        return Some(if p.is_empty() {
            Err("'unix@' expects a path".to_string())
        } else {
            Ok(SockSpec::Unix(PathBuf::from(p)))
        });
    }
    if addr.starts_with('/') {
        return Some(Ok(SockSpec::Unix(PathBuf::from(addr))));
    }
    if let Some(n) = addr.strip_prefix("abns@") {
        return Some(if n.is_empty() || n.len() > 100 {
            Err("'abns@' expects a name of 1 to 100 bytes".to_string())
        } else {
            Ok(SockSpec::Abns(n.to_string()))
        });
    }
    for (pfx, what) in [
        (
            "sockpair@",
            "socket pairs (sockpair@) are not supported yet",
        ),
        ("udp@", "a bind on UDP is not supported (ebb serves TCP)"),
        ("udp4@", "a bind on UDP is not supported (ebb serves TCP)"),
        ("udp6@", "a bind on UDP is not supported (ebb serves TCP)"),
        ("quic4@", "QUIC is not supported"),
        ("quic6@", "QUIC is not supported"),
        ("rhttp@", "reverse HTTP is not supported"),
    ] {
        if addr.starts_with(pfx) {
            return Some(Err(format!("'{addr}': {what}")));
        }
    }
    None
}

/// `mss N`: HAProxy's `atoi`, refused at 0 or beyond 65535 either way.
fn parse_mss(v: &str) -> Result<i32, String> {
    let n = v
        .strip_prefix('-')
        .unwrap_or(v)
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=65535).contains(n));
    match n {
        Some(n) if v.starts_with('-') => Ok(-(n as i32)),
        Some(n) => Ok(n as i32),
        None => {
            Err("'mss' : expects an MSS with and absolute value between 1 and 65535".to_string())
        }
    }
}

/// `tcp-ut T`: a delay, milliseconds by default, a part of a millisecond
/// rounded up (HAProxy's `parse_time_err`); 0 leaves the system's.
fn parse_tcp_ut(v: &str) -> Result<u32, String> {
    let d = parse_time(v).map_err(|_| {
        if v.starts_with('-') {
            "'tcp-ut' : expects a positive delay in milliseconds".to_string()
        } else {
            format!("'tcp-ut' : invalid delay '{v}' (expects a delay in milliseconds by default)")
        }
    })?;
    Ok(u32::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u32::MAX))
}

pub(super) fn parse_bind(w: &[String], ctx: &Ctx<'_>) -> Result<Bind, String> {
    let Some(addr) = w.first() else {
        return Err("'bind' expects an address (ADDR:PORT)".to_string());
    };
    let (addrs, sockets) = match parse_sock_spec(addr) {
        Some(spec) => (Vec::new(), vec![spec?]),
        None => (parse_bind_addrs(addr)?, Vec::new()),
    };
    let mut unix_mode = None;
    let mut accept_proxy = false;
    let mut defer_accept = false;
    let mut proto_h2 = false;
    let mut proto_h1 = false;
    let mut proto_none = false;
    let mut unix_owner = (None, None);
    let mut backlog = None;
    let mut maxconn = 0;
    let mut tcp = TcpBindOpts::default();
    let mut netscaler_cip = None;
    let mut name = None;
    let mut v6only = None;
    let mut ssl = false;
    let mut strict_sni = false;
    // What the line itself sets; `global`'s defaults fill the rest.
    let mut b = BindSsl::default();
    let mut tls_opts = false;
    let mut i = 1;
    while i < w.len() {
        let opt = w[i].as_str();
        match opt {
            "ssl" | "v4v6" | "v6only" | "strict-sni" | "tfo" | "transparent" => {
                match opt {
                    "ssl" => ssl = true,
                    "strict-sni" => strict_sni = true,
                    "v4v6" => v6only = Some(false),
                    "tfo" => tcp.tfo = true,
                    "transparent" => tcp.transparent = true,
                    _ => v6only = Some(true),
                }
                i += 1;
                continue;
            }
            _ => {}
        }
        let ca_path = |v: &str| with_base(ctx, ctx.tls.ca_base.as_ref(), v);
        let next = w.get(i + 1).map(String::as_str);
        if let Some(n) = tls_bind_option(opt, next, TlsOptionsOf::BindLine, &mut b, &ca_path)? {
            tls_opts = true;
            i += 1 + n;
            continue;
        }
        let v = arg(w, i + 1, opt).map_err(|_| format!("bind option '{opt}' expects a value"));
        match opt {
            "name" => name = Some(v?.to_string()),
            "mode" => {
                if !matches!(sockets.first(), Some(SockSpec::Unix(_))) {
                    return Err("bind option 'mode' applies to a UNIX socket path only".to_string());
                }
                unix_mode = Some(parse_octal_mode(v?)?);
            }
            "user" | "group" | "uid" | "gid" => {
                if !matches!(sockets.first(), Some(SockSpec::Unix(_))) {
                    return Err(format!("bind option '{opt}' applies to a UNIX socket path only"));
                }
                unix_owner_opt(opt, v?, &mut unix_owner)?;
            }
            "proto" => {
                let v = v?;
                // Which mode may use it is checked with the frontend's.
                match v {
                    "h2" => proto_h2 = true,
                    "h1" => proto_h1 = true,
                    "none" => proto_none = true,
                    _ => {
                        return Err(format!(
                            "'proto {v}' is not supported (ebb serves HTTP/1.x, and h2 with 'proto h2' or ALPN; 'proto h1' forces HTTP/1, 'proto none' raw tcp)"
                        ))
                    }
                }
            }
            "backlog" => backlog = Some(parse_u32_range(opt, v?, 1, i32::MAX as u32)?),
            // 0: no limit of the listener's own (HAProxy's default).
            "maxconn" => maxconn = parse_u32_range(opt, v?, 0, i32::MAX as u32)?,
            "mss" => tcp.mss = Some(parse_mss(v?)?),
            "tcp-ut" => tcp.user_timeout_ms = parse_tcp_ut(v?)?,
            "interface" => {
                let v = v?;
                // The kernel's IFNAMSIZ (16) holds the name and its NUL.
                if v.is_empty() || v.len() > 15 || v.contains('/') {
                    return Err(format!(
                        "'interface' : invalid interface name '{v}' (1 to 15 bytes)"
                    ));
                }
                tcp.interface = Some(v.to_string());
            }
            "namespace" => {
                let v = v?;
                // HAProxy opens the namespace while it reads the line.
                let p = std::path::Path::new(NETNS_DIR).join(v);
                if v.is_empty() || v.contains('/') || std::fs::File::open(&p).is_err() {
                    return Err(format!("Cannot open namespace '{v}'."));
                }
                tcp.namespace = Some(v.to_string());
            }
            "accept-netscaler-cip" => {
                // HAProxy reads it with `atol` into 32 bits and refuses 0.
                let v = v?;
                match v.parse::<u32>() {
                    Ok(n) if n > 0 => netscaler_cip = Some(n),
                    _ => {
                        return Err(format!(
                            "'accept-netscaler-cip' : invalid value '{v}' (a magic number from 1 to 4294967295)"
                        ))
                    }
                }
            }
            // A stats socket's option (`stats socket ... expose-fd
            // listeners`: `_getsocks` answered there, for `-x`), which
            // HAProxy 2.6 also takes on a proxy's bind line, where it
            // means nothing: no CLI command reaches a proxy's listener. In
            // master-worker mode neither needs it: the master hands the
            // listeners to each new worker itself (the handover module).
            "expose-fd" => {
                let v = v?;
                if v != "listeners" {
                    return Err(format!("'expose-fd' only supports 'listeners' (got '{v}')"));
                }
            }
            "process" | "thread" | "shards" | "level" | "severity-output" => {
                return Err(format!("bind option '{opt}' is not supported yet"))
            }
            // HAProxy's priority of the listener's connections in its
            // scheduler: ebb's connections run as tasklets, which have
            // classes, not a nice (as `set-nice`, refused too). It was
            // parsed and not used before the twenty-fourth session.
            "nice" => {
                parse_nice(v?)?;
                return Err(
                    "bind option 'nice' is not supported yet (ebb's connections have no scheduling priority of their own)"
                        .to_string(),
                );
            }
            "crt" => b.crts.push(with_base(ctx, ctx.tls.crt_base.as_ref(), v?)),
            "crt-list" => {
                let p = with_base(ctx, ctx.tls.crt_base.as_ref(), v?);
                b.crt_lists.push((b.crts.len(), p));
            }
            "key" => b.key = Some(with_base(ctx, ctx.tls.crt_base.as_ref(), v?)),
            "accept-proxy" => {
                accept_proxy = true;
                i += 1;
                continue;
            }
            "defer-accept" => {
                defer_accept = true;
                i += 1;
                continue;
            }
            o => {
                return Err(format!(
                    "unknown bind option '{o}' (supported: name, v4v6, v6only, mode, user, group, uid, gid, proto, backlog, maxconn, accept-proxy, accept-netscaler-cip, defer-accept, mss, tcp-ut, tfo, transparent, interface, namespace, expose-fd, ssl, crt, crt-list, key, verify, ca-file, ca-verify-file, crl-file, ca-ignore-err, crt-ignore-err, no-ca-names, alpn, ciphers, ciphersuites, curves, ssl-min-ver, ssl-max-ver, no-sslv3, no-tlsv10, no-tlsv11, no-tlsv12, no-tlsv13, force-tlsv12, force-tlsv13, prefer-client-ciphers, strict-sni, no-tls-tickets)"
                ))
            }
        }
        i += 2;
    }
    let ssl = if ssl {
        if b.crts.is_empty() && b.crt_lists.is_empty() {
            return Err(
                "'bind ... ssl' needs at least one 'crt FILE' or 'crt-list FILE'".to_string(),
            );
        }
        let d = &ctx.tls.bind;
        b.ciphers = b.ciphers.or_else(|| d.ciphers.clone());
        b.ciphersuites = b.ciphersuites.or_else(|| d.ciphersuites.clone());
        b.curves = b.curves.or_else(|| d.curves.clone());
        b.min_ver = b.min_ver.or(d.min_ver);
        b.max_ver = b.max_ver.or(d.max_ver);
        b.no_tls12 |= d.no_tls12;
        b.no_tls13 |= d.no_tls13;
        b.no_tls_tickets |= d.no_tls_tickets;
        b.prefer_client_ciphers |= d.prefer_client_ciphers;
        b.strict_sni = strict_sni;
        let base = |p: Option<&PathBuf>| {
            ctx.resolve(
                &p.map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            )
        };
        b.ca_base = base(ctx.tls.ca_base.as_ref());
        b.crt_base = base(ctx.tls.crt_base.as_ref());
        if b.client.verify != ClientVerify::None
            && b.client.ca_file.is_none()
            && b.client.ca_verify_file.is_none()
        {
            return Err(
                "verify is enabled but no CA file specified ('ca-file' or 'ca-verify-file')"
                    .to_string(),
            );
        }
        if b.versions().is_empty() {
            return Err(
                "the TLS version options leave no version ebb speaks (TLSv1.2, TLSv1.3)"
                    .to_string(),
            );
        }
        Some(b)
    } else {
        if !b.crts.is_empty()
            || !b.crt_lists.is_empty()
            || b.key.is_some()
            || !b.alpn.is_empty()
            || b.ciphers.is_some()
            || b.ciphersuites.is_some()
            || b.curves.is_some()
            || tls_opts
            || strict_sni
            || b.client != ClientAuthConf::default()
        {
            return Err(
                "TLS options ('crt', 'crt-list', 'key', 'verify', 'ca-file', 'crl-file', 'alpn', 'ciphers', 'ciphersuites', 'curves', version options, 'strict-sni', 'no-tls-tickets', 'prefer-client-ciphers') need 'ssl' on the bind line"
                    .to_string(),
            );
        }
        None
    };
    Ok(Bind {
        addrs,
        name,
        v6only,
        ssl,
        loc: ctx.loc.clone(),
        sockets,
        unix_mode,
        unix_owner,
        backlog,
        accept_proxy,
        defer_accept,
        proto_h2,
        proto_h1,
        proto_none,
        maxconn,
        tcp,
        netscaler_cip,
    })
}
