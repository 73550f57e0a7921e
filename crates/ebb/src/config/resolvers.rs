//! `resolvers` sections, the server options that name them, and
//! `server-template` (HAProxy 2.6, section 5.3).

use std::net::{IpAddr, SocketAddr};

use super::types::*;
use super::values::{parse_time, parse_u32_range};

/// One line of a `resolvers` section.
pub(super) fn resolvers_kw(r: &mut Resolvers, w: &[String], loc: &Loc) -> Result<(), String> {
    let kw = w[0].as_str();
    let one = |what: &str| -> Result<&str, String> {
        match w.get(1..) {
            Some([v]) => Ok(v.as_str()),
            _ => Err(format!("'{what}' expects exactly one argument")),
        }
    };
    match kw {
        "nameserver" => {
            let (Some(name), Some(addr)) = (w.get(1), w.get(2)) else {
                return Err("'nameserver' expects a name and an address".to_string());
            };
            if w.len() > 3 {
                return Err(format!(
                    "'nameserver {name}': unexpected '{}' (ebb's nameservers take no parameter)",
                    w[3]
                ));
            }
            if r.nameservers.iter().any(|n| n.name == *name) {
                return Err(format!(
                    "nameserver '{name}' already exists in resolvers '{}'",
                    r.name
                ));
            }
            let (addr, tcp) = nameserver_addr(addr)?;
            r.nameservers.push(Nameserver {
                name: name.clone(),
                addr,
                tcp,
            });
        }
        "parse-resolv-conf" => {
            if w.len() > 1 {
                return Err("'parse-resolv-conf' takes no argument".to_string());
            }
            let text = std::fs::read_to_string("/etc/resolv.conf")
                .map_err(|e| format!("parse-resolv-conf: cannot read /etc/resolv.conf: {e}"))?;
            for a in crate::dns::parse_resolv_conf(&text) {
                // HAProxy names them after the file and its line; ebb after
                // the file and the address.
                let name = format!("resolvconf/{a}");
                if !r.nameservers.iter().any(|n| n.name == name) {
                    r.nameservers.push(Nameserver {
                        name,
                        addr: a,
                        tcp: false,
                    });
                }
            }
        }
        "resolve_retries" => r.resolve_retries = parse_u32_range(kw, one(kw)?, 1, 1_000)?,
        "accepted_payload_size" => {
            let v = parse_u32_range(kw, one(kw)?, 512, 65535)?;
            r.accepted_payload_size = v as u16;
        }
        "timeout" => {
            let (Some(ev), Some(v), None) = (w.get(1), w.get(2), w.get(3)) else {
                return Err("'timeout' expects an event (resolve, retry) and a time".to_string());
            };
            let d = parse_time(v)?;
            if d.is_zero() {
                return Err(format!("'timeout {ev}' must be greater than zero"));
            }
            match ev.as_str() {
                "resolve" => r.timeout_resolve = d,
                "retry" => r.timeout_retry = d,
                o => {
                    return Err(format!(
                        "unknown resolvers timeout '{o}' (expected resolve or retry)"
                    ))
                }
            }
        }
        "hold" => {
            let (Some(st), Some(v), None) = (w.get(1), w.get(2), w.get(3)) else {
                return Err("'hold' expects a status and a period".to_string());
            };
            r.holds.set(st, parse_time(v)?)?;
        }
        o => {
            let _ = loc;
            return Err(format!(
                "unknown keyword '{o}' in resolvers section '{}' (supported: nameserver, parse-resolv-conf, resolve_retries, timeout resolve|retry, hold, accepted_payload_size)",
                r.name
            ));
        }
    }
    Ok(())
}

/// The first of `prefixes` `a` starts with, and the rest of `a`.
fn strip_any<'a>(a: &'a str, prefixes: &[&'static str]) -> Option<(&'static str, &'a str)> {
    prefixes
        .iter()
        .find_map(|p| a.strip_prefix(*p).map(|r| (*p, r)))
}

/// `[udp@|udp4@|udp6@|ipv4@|ipv6@|tcp@|tcp4@|tcp6@]IP:PORT`: the address,
/// and whether it is a stream (TCP) nameserver.
fn nameserver_addr(a: &str) -> Result<(SocketAddr, bool), String> {
    let (family, rest, tcp) = if let Some((p, r)) = strip_any(a, &["tcp@", "tcp4@", "tcp6@"]) {
        (p, r, true)
    } else if let Some((p, r)) = strip_any(a, &["udp@", "udp4@", "udp6@", "ipv4@", "ipv6@"]) {
        (p, r, false)
    } else if let Some(at) = a.find('@') {
        return Err(format!(
            "nameserver '{a}': address family '{}' is not supported (udp@, tcp@, ipv4@, ipv6@)",
            &a[..=at]
        ));
    } else {
        ("", a, false)
    };
    match rest.parse::<SocketAddr>() {
        Ok(sa) if sa.port() > 0 => {
            let v6 = family.contains('6');
            let v4 = family.contains('4');
            if (v6 && !sa.is_ipv6()) || (v4 && !sa.is_ipv4()) {
                return Err(format!(
                    "nameserver '{a}': the address is not of the family '{family}' names"
                ));
            }
            Ok((sa, tcp))
        }
        // HAProxy 2.6 wants the port too.
        _ if rest
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok() =>
        {
            Err(format!(
                "nameserver '{a}': missing port specification (IP:PORT, e.g. port 53)"
            ))
        }
        _ => Err(format!(
            "nameserver '{a}': expected IP:PORT (a host name is not accepted)"
        )),
    }
}

/// The resolution options of a `server` line.
pub(super) fn server_opt(opt: &str, v: &str, o: &mut ServerOptions) -> Result<(), String> {
    match opt {
        "resolvers" => o.resolvers = Some(v.to_string()),
        "resolve-prefer" => {
            o.resolve_prefer_v4 = match v {
                "ipv4" => true,
                "ipv6" => false,
                x => return Err(format!("'resolve-prefer' expects ipv4 or ipv6, got '{x}'")),
            }
        }
        "init-addr" => {
            let mut list = Vec::new();
            for m in v.split(',') {
                let m = match m {
                    "last" => InitAddr::Last,
                    "libc" => InitAddr::Libc,
                    "none" => InitAddr::None,
                    x => match x.parse::<IpAddr>() {
                        Ok(ip) => InitAddr::Ip(ip),
                        Err(_) => {
                            return Err(format!(
                                "'init-addr': unknown method '{x}' (expected last, libc, none or an IP address)"
                            ))
                        }
                    },
                };
                if list.contains(&m) {
                    return Err(format!("'init-addr': '{v}' lists a method twice"));
                }
                list.push(m);
            }
            o.init_addr = Some(list);
        }
        "resolve-opts" => {
            for x in v.split(',') {
                match x {
                    "allow-dup-ip" => o.allow_dup_ip = true,
                    "prevent-dup-ip" => o.allow_dup_ip = false,
                    "ignore-weight" => o.ignore_weight = true,
                    x => {
                        return Err(format!(
                            "'resolve-opts': unknown option '{x}' (expected allow-dup-ip, prevent-dup-ip or ignore-weight)"
                        ))
                    }
                }
            }
        }
        "resolve-net" => {
            if v.is_empty() {
                return Err("'resolve-net' expects a list of networks.".to_string());
            }
            for n in v.split(',') {
                // HAProxy's limit.
                if o.resolve_net.len() >= 5 {
                    return Err("'resolve-net' exceed 5 networks.".to_string());
                }
                let net = crate::net::parse_ipnet(n)
                    .map_err(|_| format!("'resolve-net' invalid network '{n}'."))?;
                o.resolve_net.push(net);
            }
        }
        _ => return Err(format!("server option '{opt}' is not supported by ebb")),
    }
    Ok(())
}

/// Most slots one `server-template` line may declare (a typo such as
/// `1-100000` would otherwise make that many servers).
const MAX_SLOTS: u32 = 4096;

/// `server-template PREFIX N|LOW-HIGH FQDN[:PORT] [options]` (options
/// already parsed into `opts`): the slots, named PREFIX then the number.
pub(super) fn server_template(
    w: &[String],
    opts: ServerOptions,
    loc: &Loc,
) -> Result<Vec<Server>, String> {
    let (Some(prefix), Some(range), Some(fqdn)) = (w.get(1), w.get(2), w.get(3)) else {
        return Err("'server-template' expects PREFIX, N or LOW-HIGH, and FQDN[:PORT]".to_string());
    };
    let (lo, hi) = match range.split_once('-') {
        Some((a, b)) => (
            parse_u32_range("server-template range", a, 1, u32::MAX)?,
            parse_u32_range("server-template range", b, 1, u32::MAX)?,
        ),
        None => (
            1,
            parse_u32_range("server-template count", range, 1, u32::MAX)?,
        ),
    };
    if lo > hi || hi - lo >= MAX_SLOTS {
        return Err(format!(
            "server-template: invalid range '{range}' (LOW-HIGH with LOW <= HIGH, at most {MAX_SLOTS} slots)"
        ));
    }
    let srv = fqdn.starts_with('_');
    let (host, port) = if srv {
        if fqdn.contains(':') {
            return Err(format!(
                "server-template: '{fqdn}' is an SRV name: its ports come from the SRV records"
            ));
        }
        (fqdn.to_ascii_lowercase(), 0)
    } else if fqdn.contains(':') {
        super::values::parse_host_port(fqdn)?
    } else {
        (fqdn.clone(), 0)
    };
    let mut opts = opts;
    // No port: the client's destination port (an SRV record gives one).
    opts.map_ports = port == 0 && !srv;
    super::parse::no_check_port(prefix, &opts, false)?;
    Ok((lo..=hi)
        .map(|i| Server {
            name: format!("{prefix}{i}"),
            host: host.clone(),
            port,
            opts: opts.clone(),
            loc: loc.clone(),
            srv,
        })
        .collect())
}

/// Why a `tcp-request content do-resolve` is refused where ebb would not
/// wait for its answer.
const NO_WAIT: &str = "'tcp-request content do-resolve' with a 'tcp-request inspect-delay' is supported in the content rules of a tcp frontend or listen section only: HAProxy waits there for the answer within the delay, ebb runs an http proxy's content rules once on the whole request head and a backend's once on what the frontend's took (use 'http-request do-resolve', or no delay: then, as in HAProxy, only an answer a resolution of the name holds already is taken)";

/// Checks that need every section: the `resolvers` a server names exist,
/// SRV slots have resolvers, each section has a nameserver.
pub(super) fn cross_check(res: &[Resolvers], proxies: &[Proxy]) -> Vec<ConfigError> {
    let mut errs = Vec::new();
    let mut e = |loc: &Loc, message: String| {
        errs.push(ConfigError {
            loc: loc.clone(),
            message,
        })
    };
    for r in res {
        if r.nameservers.is_empty() {
            e(&r.loc, format!("resolvers '{}' has no nameserver", r.name));
        }
    }
    for p in proxies {
        // `do-resolve` rules (HAProxy's check_action_do_resolve). Where
        // HAProxy would wait for the answer within the inspect delay but
        // ebb runs the content rules once on what came (an http proxy's,
        // on the whole head; a backend's, on what the frontend's took),
        // a content rule is refused.
        let no_wait = p.inspect_delay.is_some_and(|d| !d.is_zero())
            && (p.mode == ProxyMode::Http || p.kind == ProxyKind::Backend);
        let tcp = p.tcp_request.iter().filter_map(|r| match &r.action {
            TcpAction::Common(a) => Some((a, &r.loc, true)),
            _ => None,
        });
        let http = p.http_request.iter().map(|r| (&r.action, &r.loc, false));
        for (a, loc, content) in http.chain(tcp) {
            let HttpRequestAction::DoResolve(d) = a else {
                continue;
            };
            if content && no_wait {
                e(loc, NO_WAIT.to_string());
            }
            if !res.iter().any(|r| r.name == d.resolvers) {
                e(
                    loc,
                    format!(
                        "Can't find resolvers section '{}' for do-resolve action",
                        d.resolvers
                    ),
                );
            }
        }
        for s in &p.servers {
            match &s.opts.resolvers {
                Some(n) if !res.iter().any(|r| &r.name == n) => e(
                    &s.loc,
                    format!(
                        "server {}/{}: no resolvers section named '{n}'",
                        p.name, s.name
                    ),
                ),
                None if s.srv => e(
                    &s.loc,
                    format!(
                        "server {}/{}: the SRV name '{}' needs 'resolvers NAME'",
                        p.name, s.name, s.host
                    ),
                ),
                _ => {}
            }
        }
    }
    errs
}

/// Options `add server` takes: HAProxy 2.6's list for dynamic servers
/// that ebb implements (flags, then keywords with a value).
const DYNAMIC_FLAGS: &[&str] = &[
    "agent-check",
    "backup",
    "check",
    "check-send-proxy",
    "check-ssl",
    "disabled",
    "enabled",
    "send-proxy",
    "send-proxy-v2",
    "ssl",
    "no-tlsv12",
    "no-tlsv13",
    "force-tlsv12",
    "force-tlsv13",
    "no-tls-tickets",
    "tfo",
    "no-tfo",
];
const DYNAMIC_VALUED: &[&str] = &[
    "agent-addr",
    "addr",
    "alpn",
    "check-alpn",
    "check-proto",
    "port",
    "track",
    "proto",
    "ws",
    "agent-inter",
    "agent-port",
    "agent-send",
    "ca-file",
    "ciphers",
    "crl-file",
    "crt",
    "ciphersuites",
    "downinter",
    "error-limit",
    "fall",
    "observe",
    "on-error",
    "on-marked-down",
    "on-marked-up",
    "fastinter",
    "inter",
    "maxconn",
    "minconn",
    "maxqueue",
    "pool-low-conn",
    "pool-max-conn",
    "pool-purge-delay",
    "rise",
    "slowstart",
    "sni",
    "check-sni",
    "verifyhost",
    "ssl-max-ver",
    "ssl-min-ver",
    "verify",
    "weight",
];
/// HAProxy 2.6 accepts these on a dynamic server; ebb does not implement
/// them on any server.
const DYNAMIC_UNSUPPORTED: &[&str] = &[
    "allow-0rtt",
    "check-via-socks4",
    "id",
    "no-ssl-reuse",
    "npn",
    "proxy-v2-options",
    "send-proxy-v2-ssl",
    "send-proxy-v2-ssl-cn",
    "source",
    "tls-tickets",
    "usesrc",
    "force-sslv3",
    "force-tlsv10",
    "force-tlsv11",
    "no-sslv3",
    "no-tlsv10",
    "no-tlsv11",
];

/// Checks the words of `add server B/S ADDR [options]` after the address
/// against the options a dynamic server may have (HAProxy's messages).
pub(crate) fn dynamic_server_words(w: &[String]) -> Result<(), String> {
    let mut i = 0;
    while i < w.len() {
        let o = w[i].as_str();
        if DYNAMIC_FLAGS.contains(&o) {
            i += 1;
        } else if DYNAMIC_VALUED.contains(&o) {
            i += 2;
        } else if DYNAMIC_UNSUPPORTED.contains(&o) {
            return Err(format!("'{o}' option is not supported by ebb"));
        } else {
            return Err(format!("'{o}' option is not accepted for dynamic server"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::{parse_str, InitAddr};
    use std::time::Duration;

    const BE: &str = "defaults\n    mode http\nfrontend fe\n    bind 127.0.0.1:0\n    default_backend be\nbackend be\n";

    #[test]
    fn a_resolvers_section_and_its_servers() {
        let cfg = parse_str(
            "t.cfg",
            &format!(
                "resolvers dns\n    nameserver a 127.0.0.1:5353\n    nameserver b udp@[::1]:53\n    nameserver c tcp@127.0.0.1:53\n    resolve_retries 5\n    timeout resolve 2s\n    timeout retry 300ms\n    hold nx 7s\n    hold obsolete 1s\n    accepted_payload_size 8192\n\
                 {BE}    server s api.test:80 resolvers dns resolve-prefer ipv4 init-addr last,10.0.0.1,none resolve-opts allow-dup-ip,ignore-weight resolve-net 10.0.0.0/8,fd00::/8\n\
                 \x20   server-template web 3-5 _http._tcp.svc.test resolvers dns\n"
            ),
        )
        .unwrap();
        let r = &cfg.resolvers[0];
        assert_eq!(r.name, "dns");
        assert_eq!(r.nameservers.len(), 3);
        assert_eq!(r.nameservers[1].addr, "[::1]:53".parse().unwrap());
        assert!(!r.nameservers[1].tcp);
        assert!(r.nameservers[2].tcp);
        assert_eq!(r.nameservers[2].addr, "127.0.0.1:53".parse().unwrap());
        assert_eq!(r.resolve_retries, 5);
        assert_eq!(r.timeout_resolve, Duration::from_secs(2));
        assert_eq!(r.timeout_retry, Duration::from_millis(300));
        assert_eq!(r.holds.nx, Duration::from_secs(7));
        assert_eq!(r.holds.obsolete, Duration::from_secs(1));
        assert_eq!(r.holds.valid, Duration::from_secs(10), "default");
        assert_eq!(r.accepted_payload_size, 8192);
        let be = cfg.backend("be").unwrap();
        let s = &be.servers[0];
        assert_eq!(s.opts.resolvers.as_deref(), Some("dns"));
        assert!(s.opts.resolve_prefer_v4 && s.opts.allow_dup_ip && s.opts.ignore_weight);
        assert_eq!(s.opts.resolve_net.len(), 2);
        assert!(s.opts.resolve_net[0].contains("10.1.2.3".parse().unwrap()));
        assert!(s.opts.resolve_net[1].contains("fd00::1".parse().unwrap()));
        assert_eq!(
            s.opts.init_addr,
            Some(vec![
                InitAddr::Last,
                InitAddr::Ip("10.0.0.1".parse().unwrap()),
                InitAddr::None
            ])
        );
        let names: Vec<&str> = be.servers[1..].iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["web3", "web4", "web5"]);
        assert!(be.servers[1..].iter().all(|s| s.srv && s.port == 0));
    }

    #[test]
    fn refusals() {
        for (text, want) in [
            (
                "resolvers dns\n    nameserver a 127.0.0.1:53\n    timeout resolve 0\n",
                "t.cfg:3:",
            ),
            (
                "resolvers dns\n    nameserver a 127.0.0.1:53\n    nameserver a 127.0.0.2:53\n",
                "t.cfg:3: nameserver 'a' already exists",
            ),
            (
                "resolvers dns\n    nameserver a 127.0.0.1:53\nresolvers dns\n",
                "t.cfg:3: resolvers section 'dns' already declared",
            ),
            (
                "resolvers dns\n    nameserver a 127.0.0.1:53\n    bogus 1\n",
                "t.cfg:3: unknown keyword 'bogus'",
            ),
            (
                "resolvers dns\n    nameserver a tcp6@127.0.0.1:53\n",
                "t.cfg:2: nameserver 'tcp6@127.0.0.1:53': the address is not of the family",
            ),
            (
                "resolvers dns\n    nameserver a sctp@127.0.0.1:53\n",
                "t.cfg:2: nameserver 'sctp@127.0.0.1:53': address family 'sctp@'",
            ),
        ] {
            let e =
                parse_str("t.cfg", &format!("{text}{BE}    server s 127.0.0.1:80\n")).unwrap_err();
            let all: Vec<String> = e.iter().map(|x| x.to_string()).collect();
            assert!(all.iter().any(|m| m.contains(want)), "{text}: {all:?}");
        }
        for (line, want) in [
            ("server-template w 0 a.test:80", "t.cfg:7:"),
            ("server-template w 5-2 a.test:80", "invalid range"),
            (
                "server-template w 2 _http._tcp.a.test:80",
                "its ports come from the SRV records",
            ),
            (
                "server s a.test:80 init-addr libc,libc",
                "lists a method twice",
            ),
            (
                "server s a.test:80 resolve-prefer ipv5",
                "expects ipv4 or ipv6",
            ),
            (
                "server s a.test:80 resolve-opts nope",
                "unknown option 'nope'",
            ),
            (
                "server s a.test:80 resolve-net 10.0.0.0/33",
                "'resolve-net' invalid network '10.0.0.0/33'",
            ),
            (
                "server s a.test:80 resolve-net 1.0.0.0/8,2.0.0.0/8,3.0.0.0/8,4.0.0.0/8,5.0.0.0/8,6.0.0.0/8",
                "'resolve-net' exceed 5 networks",
            ),
        ] {
            let e = parse_str("t.cfg", &format!("{BE}    {line}\n")).unwrap_err();
            let all: Vec<String> = e.iter().map(|x| x.to_string()).collect();
            assert!(all.iter().any(|m| m.contains(want)), "{line}: {all:?}");
        }
    }
}
