//! Compiling a fetch: its name (with HAProxy 2.6's aliases, `req.`/`res.`
//! forms and the deprecated short names) and arguments checked as HAProxy
//! checks them, with the scope of the rule (a response rule cannot read
//! the request) into a [`Fetch`]. Errors are the text reported after the
//! rule's `file:line`.

use super::{Fetch, Occ};
use crate::sample::Scope;

fn arg_count(name: &str, args: &[String], min: usize, max: usize) -> Result<(), String> {
    if args.len() < min || args.len() > max {
        let want = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(format!(
            "fetch '{name}' expects {want} argument(s), got {}",
            args.len()
        ));
    }
    Ok(())
}

/// An integer argument: digits with an optional sign, nothing around
/// (HAProxy's `read_int64` on the whole argument).
fn int_arg(what: &str, a: &str) -> Result<i64, String> {
    a.parse::<i64>()
        .map_err(|_| format!("{what}: '{a}' is not an integer"))
}

/// The name no header has (a space): what `hdr` without an argument
/// looks for.
const NO_HEADER: &str = " ";

/// A header name argument as HAProxy 2.6 reads it: an empty one (`hdr()`,
/// `hdr(,1)`) is every header; none finds nothing (`smp_fetch_hdr` wants
/// a string argument) except for the counts (`hdr_cnt`: every header).
fn hdr_name(fetch: &str, a: Option<&String>, count: bool) -> Result<String, String> {
    let Some(a) = a else {
        return Ok(if count { "" } else { NO_HEADER }.to_string());
    };
    if a.is_empty() {
        return Ok(String::new());
    }
    if !crate::net::is_token(a) {
        return Err(format!("fetch '{fetch}': invalid header name '{a}'"));
    }
    Ok(a.to_ascii_lowercase())
}

impl Fetch {
    /// The fetches that read a header by name (`hdr()` is not `hdr`).
    pub(in crate::sample) fn is_header_fetch(name: &str) -> bool {
        let n = name
            .strip_prefix("req.")
            .or_else(|| name.strip_prefix("res."))
            .or_else(|| name.strip_prefix('s'))
            .unwrap_or(name);
        matches!(
            n,
            "hdr" | "fhdr" | "hdr_cnt" | "fhdr_cnt" | "hdr_ip" | "hdr_val"
        )
    }

    pub(in crate::sample) fn compile(
        name: &str,
        args: &[String],
        scope: Scope,
    ) -> Result<Fetch, String> {
        let req_only = |f: Fetch| -> Result<Fetch, String> {
            match scope {
                Scope::Request { .. } => Ok(f),
                Scope::Response => Err(format!(
                    "fetch '{name}' reads the request, which is not available in a response rule (store it in a variable, e.g. 'http-request set-var(txn.x) {name}')"
                )),
            }
        };
        let res_only = |f: Fetch| -> Result<Fetch, String> {
            match scope {
                Scope::Response => Ok(f),
                Scope::Request { .. } => Err(format!(
                    "fetch '{name}' reads the response, which is not available in a request rule"
                )),
            }
        };
        let none = |f: Fetch| -> Result<Fetch, String> {
            arg_count(name, args, 0, 0)?;
            Ok(f)
        };
        let hdr = |full: bool, res: bool| -> Result<Fetch, String> {
            arg_count(name, args, 0, 2)?;
            // HAProxy 2.6 reads an explicit 0 as no occurrence given: the
            // last in an expression, every one in an ACL.
            // Its `val_hdr`: HAProxy keeps the last 10 occurrences' places.
            let occ = match crate::sample::conv::opt_arg(args, 1) {
                Some(o) => match int_arg(&format!("fetch '{name}' occurrence"), o)? {
                    0 => Occ::Default,
                    n if n < -10 => {
                        return Err(format!("fetch '{name}': header occurrence must be >= -10"))
                    }
                    n => Occ::Nth(n),
                },
                None => Occ::Default,
            };
            Ok(Fetch::Hdr {
                name: hdr_name(name, args.first(), false)?,
                occ,
                full,
                res,
            })
        };
        let cnt = |full: bool, res: bool| -> Result<Fetch, String> {
            arg_count(name, args, 0, 1)?;
            Ok(Fetch::HdrCnt {
                name: hdr_name(name, args.first(), true)?,
                full,
                res,
            })
        };
        if let Some(f) = crate::sample::stk::StkFetch::compile(name, args) {
            return f.map(Fetch::Stk);
        }
        if let Some(f) = super::extra::Extra::compile(name, args, scope == Scope::Response) {
            let f = f?;
            return match f.reads_response() {
                Some(false) => req_only(Fetch::Extra(f)),
                Some(true) => res_only(Fetch::Extra(f)),
                None => Ok(Fetch::Extra(f)),
            };
        }
        // HAProxy 2.6: the server connection (`ssl_bc*`, `bc_*`) does not
        // exist yet in a request rule.
        let server_conn = |needs: bool, f: Fetch| -> Result<Fetch, String> {
            if needs && scope != Scope::Response {
                return Err(format!(
                    "fetch '{name}' needs the server-side connection, which is not available in a request rule"
                ));
            }
            Ok(f)
        };
        if let Some(f) = super::conn::Conn::compile(name, args) {
            let f = f?;
            return server_conn(f.reads_server_conn(), Fetch::Conn(f));
        }
        if let Some(f) = super::sslc::SslC::compile(name, args) {
            let f = f?;
            return server_conn(f.reads_server_conn(), Fetch::SslC(f));
        }
        match name {
            "src" => none(Fetch::Src),
            "src_port" => none(Fetch::SrcPort),
            "dst" => none(Fetch::Dst),
            "dst_port" => none(Fetch::DstPort),
            "fe_name" => none(Fetch::FeName),
            "be_name" => {
                // HAProxy 2.6 refuses it in a frontend's http-request
                // log-format strings (an ACL on it is evaluated: below).
                if scope == (Scope::Request { backend: false }) {
                    return Err(
                        "fetch 'be_name' needs a backend, which is not known yet in a frontend's http-request rules"
                            .to_string(),
                    );
                }
                none(Fetch::BeName)
            }
            "fe_id" | "be_id" => {
                let what = if name == "fe_id" {
                    crate::sample::Count::FeId
                } else {
                    // As `be_name`.
                    if scope == (Scope::Request { backend: false }) {
                        return Err(
                            "fetch 'be_id' needs a backend, which is not known yet in a frontend's http-request rules"
                                .to_string(),
                        );
                    }
                    crate::sample::Count::BeId
                };
                none(Fetch::Count {
                    what,
                    proxy: None,
                    server: None,
                })
            }
            "so_id" => none(Fetch::SoId),
            "srv_name" => res_only(none(Fetch::SrvName)?),
            "srv_id" => res_only(none(Fetch::SrvId)?),
            "bc_src" | "bc_src_port" => {
                crate::sample::BACK_LOCAL.store(true, std::sync::atomic::Ordering::Relaxed);
                res_only(none(Fetch::BcSrc {
                    port: name == "bc_src_port",
                })?)
            }
            "method" => req_only(none(Fetch::Method)?),
            "path" => req_only(none(Fetch::Path)?),
            "pathq" => req_only(none(Fetch::PathQ)?),
            "url_param" | "urlp" | "urlp_val" => {
                arg_count(name, args, 0, 2)?;
                // The byte the parameters come after (HAProxy's
                // `http_find_param_list`): `?`, or the one given; an empty
                // one is HAProxy's NUL, never found in a target.
                let delim = match args.get(1).map(String::as_bytes) {
                    None => b'?',
                    Some(b"") => 0,
                    Some([d]) => *d,
                    Some(_) => {
                        return Err(format!("fetch '{name}': the delimiter is one character"))
                    }
                };
                req_only(Fetch::UrlParam {
                    name: args.first().filter(|n| !n.is_empty()).cloned(),
                    delim,
                    val: name == "urlp_val",
                })
            }
            // The connection's count outlives the request: HAProxy's
            // reg-tests read it in http-after-response rules too.
            "http_first_req" => none(Fetch::FirstReq),
            "req.proto_http" | "req_proto_http" => none(Fetch::ProtoHttp),
            "query" => req_only(none(Fetch::Query)?),
            "url" => req_only(none(Fetch::Url)?),
            "base" => req_only(none(Fetch::Base)?),
            "req.ver" | "req_ver" => req_only(none(Fetch::ReqVer)?),
            "res.ver" | "resp_ver" => res_only(none(Fetch::ResVer)?),
            // `hdr` and `cookie` read the message of the rule's direction.
            "hdr" if scope == Scope::Response => hdr(false, true),
            "hdr" | "req.hdr" => req_only(hdr(false, false)?),
            "cookie" => {
                arg_count(name, args, 0, 1)?;
                let n = args.first().filter(|a| !a.is_empty()).cloned();
                Ok(Fetch::Cook(n, scope == Scope::Response))
            }
            "always_true" => none(Fetch::Bool(true)),
            "always_false" => none(Fetch::Bool(false)),
            "proc" => none(Fetch::Int(1)),
            "req.fhdr" => req_only(hdr(true, false)?),
            "req.hdr_cnt" | "hdr_cnt" => req_only(cnt(false, false)?),
            "req.hdr_ip" | "hdr_ip" | "res.hdr_ip" | "shdr_ip" | "req.hdr_val" | "hdr_val"
            | "res.hdr_val" | "shdr_val" => {
                let res = name.starts_with('s') || name.starts_with("res.");
                let ip = name.ends_with("_ip");
                let Fetch::Hdr { name, occ, .. } = hdr(false, res)? else {
                    return Err(format!("fetch '{name}': bad arguments"));
                };
                let f = if ip {
                    Fetch::HdrIp { name, occ, res }
                } else {
                    Fetch::HdrVal { name, occ, res }
                };
                if res {
                    res_only(f)
                } else {
                    req_only(f)
                }
            }
            "req.fhdr_cnt" => req_only(cnt(true, false)?),
            "res.hdr" | "shdr" => res_only(hdr(false, true)?),
            "res.fhdr" => res_only(hdr(true, true)?),
            "res.hdr_cnt" | "shdr_cnt" => res_only(cnt(false, true)?),
            "res.fhdr_cnt" => res_only(cnt(true, true)?),
            "req.cook" | "cook" | "req.cook_cnt" | "cook_cnt" | "req.cook_val" | "cook_val"
            | "res.cook" | "scook" | "res.cook_cnt" | "scook_cnt" | "res.cook_val"
            | "scook_val" => {
                arg_count(name, args, 0, 1)?;
                let n = args.first().filter(|a| !a.is_empty()).cloned();
                let res = name.starts_with('s') || name.starts_with("res.");
                let f = if name.ends_with("_cnt") {
                    Fetch::CookCnt(n, res)
                } else if name.ends_with("_val") {
                    Fetch::CookVal(n, res)
                } else {
                    Fetch::Cook(n, res)
                };
                if res {
                    res_only(f)
                } else {
                    req_only(f)
                }
            }
            "status" => res_only(none(Fetch::Status)?),
            "res.cache_hit" => res_only(none(Fetch::CacheHit)?),
            "res.cache_name" => res_only(none(Fetch::CacheName)?),
            "res.comp" | "res.comp_algo" => res_only(none(Fetch::ResComp(name == "res.comp_algo"))?),
            "ssl_fc" => none(Fetch::SslFc),
            "ssl_fc_sni" => none(Fetch::SslFcSni),
            "str" => {
                arg_count(name, args, 0, 1)?;
                Ok(Fetch::Str(crate::rawword::word_bytes(
                    args.first().map_or(&b""[..], |a| a.as_bytes()),
                )))
            }
            "bin" => {
                arg_count(name, args, 1, 1)?;
                let h = args[0].as_bytes();
                let bad = || {
                    format!(
                        "fetch 'bin': '{}' is not an even number of hex digits",
                        args[0]
                    )
                };
                if h.len() % 2 != 0 {
                    return Err(bad());
                }
                let mut v = Vec::with_capacity(h.len() / 2);
                for p in h.chunks(2) {
                    let t = std::str::from_utf8(p).map_err(|_| bad())?;
                    v.push(u8::from_str_radix(t, 16).map_err(|_| bad())?);
                }
                Ok(Fetch::Bin(v))
            }
            "ipv4" | "ipv6" => {
                arg_count(name, args, 1, 1)?;
                let a = &args[0];
                let ip = if name == "ipv4" {
                    a.parse::<std::net::Ipv4Addr>()
                        .ok()
                        .map(std::net::IpAddr::V4)
                } else {
                    a.parse::<std::net::Ipv6Addr>()
                        .ok()
                        .map(std::net::IpAddr::V6)
                };
                ip.map(Fetch::Addr)
                    .ok_or_else(|| format!("fetch '{name}': '{a}' is not an {name} address"))
            }
            "int" => {
                arg_count(name, args, 1, 1)?;
                Ok(Fetch::Int(int_arg("fetch 'int'", &args[0])?))
            }
            "bool" => {
                // HAProxy's smp_check_const_bool: these four words only.
                arg_count(name, args, 1, 1)?;
                match args[0].to_ascii_lowercase().as_str() {
                    "true" | "1" => Ok(Fetch::Bool(true)),
                    "false" | "0" => Ok(Fetch::Bool(false)),
                    _ => Err(format!(
                        "fetch 'bool': '{}': expects 'true', 'false', '0' or '1'",
                        args[0]
                    )),
                }
            }
            "env" => {
                arg_count(name, args, 1, 1)?;
                Ok(Fetch::Env(crate::environ::get(&args[0])))
            }
            "date" => {
                arg_count(name, args, 0, 1)?;
                let off = match args.first() {
                    Some(a) => int_arg("fetch 'date' offset", a)?,
                    None => 0,
                };
                Ok(Fetch::Date(off))
            }
            "rand" => {
                arg_count(name, args, 0, 1)?;
                let r = match args.first() {
                    Some(a) => {
                        let v = int_arg("fetch 'rand' range", a)?;
                        if v <= 0 {
                            return Err("fetch 'rand': the range must be positive".to_string());
                        }
                        Some(v as u64)
                    }
                    None => None,
                };
                Ok(Fetch::Rand(r))
            }
            "uuid" => {
                arg_count(name, args, 0, 1)?;
                if args.first().is_some_and(|a| a != "4") {
                    return Err("fetch 'uuid': only version 4 is supported".to_string());
                }
                Ok(Fetch::Uuid)
            }
            "so_name" => none(Fetch::SoName),
            "fc_pp_authority" => none(Fetch::PpTlv(crate::proxyproto::tlv::AUTHORITY)),
            "fc_pp_unique_id" => none(Fetch::PpTlv(crate::proxyproto::tlv::UNIQUE_ID)),
            "fc_rcvd_proxy" => none(Fetch::RcvdProxy),
            "stopping" => none(Fetch::Stopping),
            "last_rule_file" => none(Fetch::LastRule { line: false }),
            "last_rule_line" => none(Fetch::LastRule { line: true }),
            "prio_class" => none(Fetch::Prio { offset: false }),
            "prio_offset" => none(Fetch::Prio { offset: true }),
            "wait_end" => none(Fetch::WaitEnd),
            "internal.strm.is_htx" => none(Fetch::IsHtx),
            "fc_src" | "fc_src_port" | "fc_dst" | "fc_dst_port" => none(Fetch::FcAddr {
                dst: name.starts_with("fc_dst"),
                port: name.ends_with("_port"),
            }),
            "be_server_timeout" | "be_tunnel_timeout" | "fe_client_timeout" => {
                let what = match name {
                    "be_server_timeout" => crate::sample::Count::BeServerTimeout,
                    "be_tunnel_timeout" => crate::sample::Count::BeTunnelTimeout,
                    _ => crate::sample::Count::FeClientTimeout,
                };
                if what != crate::sample::Count::FeClientTimeout
                    && scope == (Scope::Request { backend: false })
                {
                    return Err(format!(
                        "fetch '{name}' needs a backend, which is not known yet in a frontend's http-request rules"
                    ));
                }
                none(Fetch::Count {
                    what,
                    proxy: None,
                    server: None,
                })
            }
            "capture.req.method" => none(Fetch::CaptureReq(b'm')),
            "capture.req.uri" => none(Fetch::CaptureReq(b'u')),
            "capture.req.ver" => none(Fetch::CaptureReq(b'v')),
            "cur_server_timeout" | "cur_tunnel_timeout" => {
                if scope == (Scope::Request { backend: false }) {
                    return Err(format!(
                        "fetch '{name}' needs a backend, which is not known yet in a frontend's http-request rules"
                    ));
                }
                none(Fetch::CurTimeout {
                    tunnel: name == "cur_tunnel_timeout",
                })
            }
            n if crate::sample::Count::by_name(n).is_some() => {
                let Some(what) = crate::sample::Count::by_name(n) else {
                    return Err(format!("unknown sample fetch '{name}'"));
                };
                let (proxy, server) = if what.per_server() {
                    arg_count(name, args, 1, 1)?;
                    // HAProxy splits at the last '/'.
                    match args[0].rsplit_once('/') {
                        Some((b, s)) if !b.is_empty() && !s.is_empty() => {
                            (Some(b.to_string()), Some(s.to_string()))
                        }
                        None if !args[0].is_empty() => (None, Some(args[0].clone())),
                        _ => {
                            return Err(format!(
                                "fetch '{name}': expects [backend/]server, got '{}'",
                                args[0]
                            ))
                        }
                    }
                } else {
                    arg_count(name, args, 0, 1)?;
                    let proxy = args.first().filter(|a| !a.is_empty()).cloned();
                    if !what.of_frontend()
                        && proxy.is_none()
                        && scope == (Scope::Request { backend: false })
                    {
                        return Err(format!(
                            "fetch '{name}' without a backend name needs a backend, which is not known yet in a frontend's http-request rules"
                        ));
                    }
                    (proxy, None)
                };
                if matches!(
                    what,
                    crate::sample::Count::BeSessRate
                        | crate::sample::Count::FeSessRate
                        | crate::sample::Count::FeReqRate
                ) {
                    crate::sample::RATES.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                crate::sample::note_proxy_ref(what, proxy.clone(), server.clone());
                Ok(Fetch::Count {
                    what,
                    proxy,
                    server,
                })
            }
            "dst_conn" => {
                crate::sample::DST_CONN.store(true, std::sync::atomic::Ordering::Relaxed);
                none(Fetch::Count {
                    what: crate::sample::Count::DstConn(0),
                    proxy: None,
                    server: None,
                })
            }
            "fe_defbe" => none(Fetch::FeDefbe),
            "capture.req.hdr" | "capture.res.hdr" => {
                arg_count(name, args, 1, 1)?;
                let idx = usize::try_from(int_arg(&format!("fetch '{name}'"), &args[0])?)
                    .map_err(|_| format!("fetch '{name}': negative capture slot"))?;
                let f = Fetch::Capture {
                    res: name == "capture.res.hdr",
                    idx,
                };
                if name == "capture.res.hdr" {
                    res_only(f)
                } else {
                    Ok(f)
                }
            }
            "var" => {
                arg_count(name, args, 1, 2)?;
                Ok(Fetch::Var(
                    crate::sample::VarRef::parse(&args[0])?,
                    args.get(1).cloned(),
                ))
            }
            "unique-id" => none(Fetch::UniqueId),
            "req.len" | "req_len" => req_only(none(Fetch::ReqLen)?),
            "req.ssl_sni" | "req_ssl_sni" => req_only(none(Fetch::ReqSslSni)?),
            "req.ssl_alpn" => req_only(none(Fetch::ReqSslAlpn)?),
            "req.rdp_cookie" | "rdp_cookie" | "req.rdp_cookie_cnt" | "rdp_cookie_cnt" => {
                arg_count(name, args, 0, 1)?;
                req_only(Fetch::RdpCookie {
                    name: args.first().filter(|a| !a.is_empty()).cloned(),
                    cnt: name.ends_with("_cnt"),
                })
            }
            "req.ssl_hello_type" | "req_ssl_hello_type" => req_only(none(Fetch::ReqSslHelloType)?),
            "req.payload" | "payload" | "res.payload" => {
                arg_count(name, args, 2, 2)?;
                let n = |what: &str, a: &str| -> Result<usize, String> {
                    let v = int_arg(&format!("fetch '{name}' {what}"), a)?;
                    usize::try_from(v).map_err(|_| format!("fetch '{name}': negative {what}"))
                };
                let (off, len) = (n("offset", &args[0])?, n("length", &args[1])?);
                if name == "res.payload" {
                    res_only(Fetch::ResPayload(off, len))
                } else {
                    req_only(Fetch::ReqPayload(off, len))
                }
            }
            "res.len" => res_only(none(Fetch::ResLen)?),
            "req.body" => req_only(none(Fetch::ReqBody)?),
            "http_auth" | "http_auth_group" => {
                arg_count(name, args, 1, 1)?;
                crate::sample::auth::note_ref(&args[0]);
                req_only(if name == "http_auth" {
                    Fetch::HttpAuth(args[0].clone())
                } else {
                    Fetch::HttpAuthGroup(args[0].clone())
                })
            }
            "http_auth_type" => req_only(none(Fetch::HttpAuthType)?),
            "fcgi.docroot" => req_only(none(Fetch::FcgiDocroot)?),
            "fcgi.index" => req_only(none(Fetch::FcgiIndex)?),
            "http_auth_user" => req_only(none(Fetch::HttpAuthUser)?),
            "http_auth_bearer" => {
                arg_count(name, args, 0, 1)?;
                req_only(Fetch::HttpAuthBearer(args.first().cloned()))
            }
            "res.body" => res_only(none(Fetch::ResBody)?),
            "res.body_len" => res_only(none(Fetch::ResBodyLen)?),
            "res.body_size" => res_only(none(Fetch::ResBodySize)?),
            "req.body_len" => req_only(none(Fetch::ReqBodyLen)?),
            "req.body_size" => req_only(none(Fetch::ReqBodySize)?),
            "req.body_param" => {
                // HAProxy 2.6 takes the name alone (`,i` came in 2.8).
                arg_count(name, args, 0, 1)?;
                let n = args.first().filter(|a| !a.is_empty()).cloned();
                req_only(Fetch::ReqBodyParam(n))
            }
            // HAProxy's view of its own HTX buffer (blocks, metadata, the
            // EOM flag, free space for its layout): ebb holds messages
            // otherwise, so no value would mean what HAProxy's does.
            n if n.starts_with("internal.htx.") || n.starts_with("internal.htx_blk.") => {
                Err(format!(
                    "sample fetch '{name}' is not supported by ebb: it reads HAProxy's internal HTX message (blocks, metadata, EOM flag), which ebb does not have"
                ))
            }
            // HAProxy reads these from its copy of the ClientHello
            // (`tune.ssl.capture-buffer-size`); ebb's TLS library shows
            // the client's cipher list but not its extensions or point
            // formats, and ebb keeps no copy.
            "ssl_fc_cipherlist_bin"
            | "ssl_fc_cipherlist_hex"
            | "ssl_fc_cipherlist_str"
            | "ssl_fc_cipherlist_xxh"
            | "ssl_fc_extlist_bin"
            | "ssl_fc_eclist_bin"
            | "ssl_fc_ecformats_bin" => Err(format!(
                "sample fetch '{name}' is not supported by ebb: it reads the client's ClientHello as captured by 'tune.ssl.capture-buffer-size', which ebb does not keep"
            )),
            _ => Err(format!("unknown sample fetch '{name}'")),
        }
    }
}
