//! Sample fetches (configuration.txt 7.3.2 to 7.3.6): what a sample
//! expression starts from.

use std::cell::Cell;
use std::io::Write;

use super::{each_field, Ctx, Res, Scope, Scratch, Type, Val};
use crate::http1::Version;

/// The user of userlist `list` the request's `Authorization` names, when
/// its credentials are valid.
fn auth_user(ctx: &Ctx<'_>, list: &str) -> Option<(std::sync::Arc<super::auth::Userlist>, usize)> {
    let r = ctx.req?;
    let v = r.head.header(r.buf, "authorization")?;
    super::auth::check(list, v)
}

/// Which occurrence of a header a fetch reads: HAProxy's `occ` argument
/// (positive from the first, negative from the last; no argument or 0:
/// the last in an expression, every one in an ACL).
#[derive(Clone, Copy, Debug)]
pub(super) enum Occ {
    Default,
    Nth(i64),
}

#[derive(Clone, Debug)]
pub(super) enum Fetch {
    Src,
    SrcPort,
    Dst,
    DstPort,
    FeName,
    BeName,
    SrvName,
    /// `srv_id`: the server's id (noted in the exchange's `TxnInfo`).
    SrvId,
    Method,
    Path,
    /// `pathq`: the path with its query string (no scheme nor authority).
    PathQ,
    Query,
    Url,
    /// `http_first_req`: the first request of the connection.
    FirstReq,
    /// `url_param(NAME[,DELIM])`: a query-string parameter's value
    /// (`None`: the value after the first `=`, see `next_param`).
    UrlParam {
        name: Option<String>,
        delim: u8,
    },
    Base,
    ReqVer,
    /// `res.ver`, `resp_ver`: the response's version (`1.1`; `2.0` from
    /// an HTTP/2 server).
    ResVer,
    /// `hdr`/`req.hdr`/`res.hdr` (comma-split values) or `req.fhdr`/
    /// `res.fhdr` (full lines); lower-case name; response side.
    Hdr {
        name: String,
        occ: Occ,
        full: bool,
        res: bool,
    },
    HdrCnt {
        name: String,
        full: bool,
        res: bool,
    },
    /// `req.hdr_ip`/`hdr_ip`/`res.hdr_ip`/`shdr_ip`: a header value that
    /// is an address (IPv4, optionally with `:PORT`, or IPv6).
    HdrIp {
        name: String,
        occ: Occ,
        res: bool,
    },
    /// `req.hdr_val`/`hdr_val`/`res.hdr_val`/`shdr_val`: a header value
    /// as an integer (HAProxy's `strl2ic`, see `super::strl2ic`).
    HdrVal {
        name: String,
        occ: Occ,
        res: bool,
    },
    /// `req.cook([NAME])` (`None`: the first cookie); `req.cook_cnt`,
    /// `req.cook_val` (its value as an integer); with `true`, `res.cook`,
    /// `res.cook_cnt`, `res.cook_val` (`scook`...): the response's
    /// Set-Cookie fields, one cookie each.
    Cook(Option<String>, bool),
    CookCnt(Option<String>, bool),
    CookVal(Option<String>, bool),
    SslFc,
    SslFcSni,
    Status,
    /// `ipv4(A)`, `ipv6(A)`: a constant address.
    Addr(std::net::IpAddr),
    /// `str(TEXT)`: its bytes (`\xHH` escapes of the configuration may
    /// make them other than UTF-8).
    Str(Vec<u8>),
    /// `bin(HEX)`: a binary constant.
    Bin(Vec<u8>),
    Int(i64),
    Bool(bool),
    /// `env(NAME)`: read once at start (the environment does not change
    /// afterwards); `None`: not set.
    Env(Option<String>),
    Date(i64),
    Rand(Option<u64>),
    Uuid,
    /// `var(NAME[,DEFAULT])`.
    Var(super::VarRef, Option<String>),
    /// A stick-table fetch (`sc_*`, `sc0_*`, `src_*`, `table_*`).
    Stk(super::stk::StkFetch),
    /// `unique-id`: the exchange's `unique-id-format` value.
    UniqueId,
    /// `so_name`: the `name` of the connection's bind line (none without).
    SoName,
    /// `fc_pp_authority`, `fc_pp_unique_id`: the value of the last TLV of
    /// that type in the PROXY header the connection began with.
    PpTlv(u8),
    /// `fc_rcvd_proxy`: the connection began with a PROXY header.
    RcvdProxy,
    /// `stopping`: the process is stopping (a stop signal came, also
    /// while global `grace` keeps it serving).
    Stopping,
    /// `last_rule_file`, `last_rule_line` (`line`): where the last final
    /// rule the exchange ran was written (`tcp-request content` accept,
    /// reject...; `http-request`/`http-response` allow, deny, redirect,
    /// return...); nothing before one ran.
    LastRule {
        line: bool,
    },
    /// `wait_end`: true once content inspection is final (the inspect
    /// delay expired, the buffer is full or the input ended; always in an
    /// HTTP proxy, whose rules see whole heads); before, no answer that
    /// may change (a rule waits on it).
    WaitEnd,
    /// `internal.strm.is_htx`: the exchange is an HTTP one (HAProxy: its
    /// buffers hold HTX); false in a tcp session.
    IsHtx,
    /// `req.proto_http` (the predefined ACL `HTTP`): the request is HTTP:
    /// an HTTP exchange's always; a tcp session's when its first bytes
    /// parse as a whole HTTP/1 request head, or are the HTTP/2 preface
    /// (HAProxy's HTTP/1 parser takes its `PRI * HTTP/2.0` line for one).
    ProtoHttp,
    /// `fc_src`, `fc_src_port`, `fc_dst`, `fc_dst_port`: the connection's
    /// addresses (`tcp-request connection` rules and a PROXY header
    /// change them; later rules change only the session's, `src`...).
    FcAddr {
        dst: bool,
        port: bool,
    },
    /// `fe_conn([FE])`, `be_conn([BE])`, `srv_conn([BE/]SRV)`: live
    /// connection counts (no proxy named: the exchange's).
    Count {
        what: super::Count,
        proxy: Option<String>,
        server: Option<String>,
    },
    /// `capture.req.hdr(N)`, `capture.res.hdr(N)`: capture slot N of the
    /// request or response side, when it holds a value.
    Capture {
        res: bool,
        idx: usize,
    },
    /// `req.len`: bytes of a TCP-mode request received so far.
    ReqLen,
    /// `req.ssl_sni`: the SNI of the ClientHello in those bytes.
    ReqSslSni,
    /// `req.ssl_hello_type`: the handshake type of the first TLS record.
    ReqSslHelloType,
    /// `req.payload(OFFSET,LENGTH)`: those bytes of a TCP-mode request
    /// (length 0: to the end of what arrived).
    ReqPayload(usize, usize),
    /// `res.len`, `res.payload(OFFSET,LENGTH)`: the server's first bytes
    /// (`tcp-response content` rules).
    ResLen,
    ResPayload(usize, usize),
    /// `res.cache_hit`, `res.cache_name`: the answer came from a cache
    /// (noted in the exchange's `TxnInfo`).
    CacheHit,
    CacheName,
    /// `req.body`, `req.body_len`, `req.body_size`: the request's body
    /// as far as it is in the buffer (de-chunked), its length, its
    /// announced length (the length there for a chunked one).
    ReqBody,
    ReqBodyLen,
    ReqBodySize,
    /// `req.body_param([NAME[,i]])`: a parameter of a url-encoded body
    /// (`None`: the first; `true`: the name compared case-insensitively).
    ReqBodyParam(Option<String>),
    /// `res.body`, `res.body_len`, `res.body_size`: the same of a
    /// response whose body a rule waited for.
    ResBody,
    ResBodyLen,
    ResBodySize,
    /// `http_auth(L)`: the request's Basic credentials are valid in
    /// userlist L; `http_auth_group(L)`: the user's name (in an ACL, its
    /// groups are what the patterns match).
    HttpAuth(String),
    HttpAuthGroup(String),
    /// `cur_server_timeout`, `cur_tunnel_timeout`: the exchange's
    /// (`set-timeout`), else its backend's.
    CurTimeout {
        tunnel: bool,
    },
    /// `capture.req.method`, `capture.req.uri`, `capture.req.ver`: from
    /// the request line kept for the exchange (request and response).
    CaptureReq(u8),
}

/// What a fetch reads, for the rules that may run before a layer exists
/// (HAProxy refuses `tcp-request connection` rules that read content,
/// and a tcp-mode proxy's rules that read HTTP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    /// Addresses, names, constants, variables: known at accept.
    L4,
    /// The request's first bytes (`req.len`, `req.ssl_*`).
    Payload,
    /// An HTTP message.
    Http,
}

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

fn hdr_name(fetch: &str, a: &str) -> Result<String, String> {
    if a.is_empty() || !crate::net::is_token(a) {
        return Err(format!("fetch '{fetch}': invalid header name '{a}'"));
    }
    Ok(a.to_ascii_lowercase())
}

impl Fetch {
    pub(super) fn compile(name: &str, args: &[String], scope: Scope) -> Result<Fetch, String> {
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
            arg_count(name, args, 1, 2)?;
            // HAProxy 2.6 reads an explicit 0 as no occurrence given: the
            // last in an expression, every one in an ACL.
            // Its `val_hdr`: HAProxy keeps the last 10 occurrences' places.
            let occ = match args.get(1) {
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
                name: hdr_name(name, &args[0])?,
                occ,
                full,
                res,
            })
        };
        let cnt = |full: bool, res: bool| -> Result<Fetch, String> {
            arg_count(name, args, 1, 1)?;
            Ok(Fetch::HdrCnt {
                name: hdr_name(name, &args[0])?,
                full,
                res,
            })
        };
        if let Some(f) = super::stk::StkFetch::compile(name, args) {
            return f.map(Fetch::Stk);
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
            "srv_name" => res_only(none(Fetch::SrvName)?),
            "srv_id" => res_only(none(Fetch::SrvId)?),
            "method" => req_only(none(Fetch::Method)?),
            "path" => req_only(none(Fetch::Path)?),
            "pathq" => req_only(none(Fetch::PathQ)?),
            "url_param" | "urlp" => {
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
            "hdr" | "req.hdr" => req_only(hdr(false, false)?),
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
            "wait_end" => none(Fetch::WaitEnd),
            "internal.strm.is_htx" => none(Fetch::IsHtx),
            "fc_src" | "fc_src_port" | "fc_dst" | "fc_dst_port" => none(Fetch::FcAddr {
                dst: name.starts_with("fc_dst"),
                port: name.ends_with("_port"),
            }),
            "be_server_timeout" | "be_tunnel_timeout" | "fe_client_timeout" => {
                let what = match name {
                    "be_server_timeout" => super::Count::BeServerTimeout,
                    "be_tunnel_timeout" => super::Count::BeTunnelTimeout,
                    _ => super::Count::FeClientTimeout,
                };
                if what != super::Count::FeClientTimeout
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
            "fe_conn" | "be_conn" | "srv_conn" | "srv_sess_rate" => {
                let what = match name {
                    "fe_conn" => super::Count::FeConn,
                    "be_conn" => super::Count::BeConn,
                    "srv_conn" => super::Count::SrvConn,
                    _ => super::Count::SrvSessRate,
                };
                let per_server = matches!(what, super::Count::SrvConn | super::Count::SrvSessRate);
                let (proxy, server) = if per_server {
                    arg_count(name, args, 1, 1)?;
                    match args[0].split_once('/') {
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
                    if what == super::Count::BeConn
                        && proxy.is_none()
                        && scope == (Scope::Request { backend: false })
                    {
                        return Err(
                            "fetch 'be_conn' without a backend name needs a backend, which is not known yet in a frontend's http-request rules"
                                .to_string(),
                        );
                    }
                    (proxy, None)
                };
                super::note_proxy_ref(what, proxy.clone(), server.clone());
                Ok(Fetch::Count {
                    what,
                    proxy,
                    server,
                })
            }
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
                    super::VarRef::parse(&args[0])?,
                    args.get(1).cloned(),
                ))
            }
            "unique-id" => {
                if matches!(scope, Scope::Request { .. }) {
                    return Err(
                        "fetch 'unique-id' is not supported in request rules: ebb computes the id once the request goes to a server (it may be read in response rules and log formats)"
                            .to_string(),
                    );
                }
                none(Fetch::UniqueId)
            }
            "req.len" | "req_len" => req_only(none(Fetch::ReqLen)?),
            "req.ssl_sni" | "req_ssl_sni" => req_only(none(Fetch::ReqSslSni)?),
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
                super::auth::note_ref(&args[0]);
                req_only(if name == "http_auth" {
                    Fetch::HttpAuth(args[0].clone())
                } else {
                    Fetch::HttpAuthGroup(args[0].clone())
                })
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
            _ => Err(format!("unknown sample fetch '{name}'")),
        }
    }

    /// Whether the fetch needs nothing of a connection or an exchange
    /// (HAProxy's fetches valid while the configuration is parsed, for
    /// `global set-var`): constants, the environment, the date, random
    /// values and variables (only `proc` ones have a value then).
    pub(super) fn context_free(&self) -> bool {
        self.literal()
            || matches!(
                self,
                Fetch::Date(_) | Fetch::Rand(_) | Fetch::Uuid | Fetch::Var(..)
            )
    }

    /// A fetch whose value is fixed at load: a literal or `env()`.
    pub(super) fn literal(&self) -> bool {
        matches!(
            self,
            Fetch::Str(_)
                | Fetch::Addr(_)
                | Fetch::Bin(_)
                | Fetch::Int(_)
                | Fetch::Bool(_)
                | Fetch::Env(_)
        )
    }

    /// What this fetch reads.
    pub(super) fn layer(&self) -> Layer {
        match self {
            Fetch::Src
            | Fetch::SrcPort
            | Fetch::Dst
            | Fetch::DstPort
            | Fetch::FeName
            | Fetch::BeName
            | Fetch::SslFc
            | Fetch::SslFcSni
            | Fetch::Str(_)
            | Fetch::Addr(_)
            | Fetch::Bin(_)
            | Fetch::Int(_)
            | Fetch::Bool(_)
            | Fetch::Env(_)
            | Fetch::Date(_)
            | Fetch::Rand(_)
            | Fetch::Uuid
            | Fetch::UniqueId
            | Fetch::SoName
            | Fetch::PpTlv(_)
            | Fetch::RcvdProxy
            | Fetch::Stopping
            | Fetch::LastRule { .. }
            | Fetch::WaitEnd
            | Fetch::IsHtx
            | Fetch::FcAddr { .. }
            | Fetch::Count { .. }
            | Fetch::CurTimeout { .. }
            | Fetch::Var(..)
            // Stick-table counters: known without reading the connection.
            | Fetch::Stk(_) => Layer::L4,
            Fetch::ReqLen
            | Fetch::ReqSslSni
            | Fetch::ReqSslHelloType
            | Fetch::ReqPayload(..)
            | Fetch::ResLen
            | Fetch::ResPayload(..) => Layer::Payload,
            _ => Layer::Http,
        }
    }

    /// Which message the fetch reads: `Some(false)` the request,
    /// `Some(true)` the response, `None` neither.
    pub(super) fn reads_response(&self) -> Option<bool> {
        match self {
            Fetch::Method
            | Fetch::Path
            | Fetch::PathQ
            | Fetch::Query
            | Fetch::Url
            | Fetch::Base
            | Fetch::ReqVer
            | Fetch::UrlParam { .. }
            | Fetch::ReqBody
            | Fetch::ReqBodyLen
            | Fetch::ReqBodySize
            | Fetch::ReqBodyParam(..)
            | Fetch::HttpAuth(_)
            | Fetch::HttpAuthGroup(_) => Some(false),
            Fetch::Hdr { res, .. }
            | Fetch::HdrCnt { res, .. }
            | Fetch::HdrIp { res, .. }
            | Fetch::HdrVal { res, .. } => Some(*res),
            Fetch::Cook(_, res) | Fetch::CookCnt(_, res) | Fetch::CookVal(_, res) => Some(*res),
            Fetch::Status
            | Fetch::ResVer
            | Fetch::SrvName
            | Fetch::SrvId
            | Fetch::CacheHit
            | Fetch::CacheName
            | Fetch::ResLen
            | Fetch::ResPayload(..)
            | Fetch::ResBody
            | Fetch::ResBodyLen
            | Fetch::ResBodySize => Some(true),
            Fetch::ReqLen | Fetch::ReqSslSni | Fetch::ReqSslHelloType | Fetch::ReqPayload(..) => {
                Some(false)
            }
            _ => None,
        }
    }

    pub(super) fn out_type(&self) -> Type {
        match self {
            Fetch::ReqLen
            | Fetch::ReqSslHelloType
            | Fetch::ResLen
            | Fetch::ReqBodyLen
            | Fetch::ReqBodySize
            | Fetch::ResBodyLen
            | Fetch::ResBodySize => Type::Int,
            Fetch::FcAddr { port: true, .. } | Fetch::LastRule { line: true } => Type::Int,
            Fetch::Src
            | Fetch::Dst
            | Fetch::HdrIp { .. }
            | Fetch::Addr(_)
            | Fetch::FcAddr { port: false, .. } => Type::Ip,
            Fetch::SrcPort
            | Fetch::Count { .. }
            | Fetch::CurTimeout { .. }
            | Fetch::DstPort
            | Fetch::HdrCnt { .. }
            | Fetch::HdrVal { .. }
            | Fetch::CookCnt(..)
            | Fetch::CookVal(..)
            | Fetch::Status
            | Fetch::SrvId
            | Fetch::Int(_)
            | Fetch::Date(_)
            | Fetch::Rand(_) => Type::Int,
            Fetch::SslFc
            | Fetch::Bool(_)
            | Fetch::FirstReq
            | Fetch::ProtoHttp
            | Fetch::CacheHit
            | Fetch::RcvdProxy
            | Fetch::Stopping
            | Fetch::WaitEnd
            | Fetch::IsHtx
            | Fetch::HttpAuth(_) => Type::Bool,
            // Typed when set; converters cast at run time from a string.
            Fetch::Var(..) => Type::Str,
            Fetch::Method => Type::Meth,
            Fetch::Stk(f) => f.out_type(),
            Fetch::ReqPayload(..)
            | Fetch::ResPayload(..)
            | Fetch::Bin(_)
            | Fetch::ReqBody
            | Fetch::ReqBodyParam(_)
            | Fetch::ResBody => Type::Bin,
            _ => Type::Str,
        }
    }

    pub(super) fn eval(&self, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
        let put = |s: &mut Scratch, b: &[u8]| {
            s.cur.clear();
            s.cur.extend_from_slice(b);
            Some(Val::Str)
        };
        match self {
            Fetch::Stk(f) => f.eval(ctx),
            Fetch::Src => Some(Val::Ip(ctx.src_addr().ip())),
            Fetch::SrcPort => Some(Val::Int(ctx.src_addr().port() as i64)),
            Fetch::Dst => Some(Val::Ip(ctx.dst_addr()?.ip())),
            Fetch::DstPort => Some(Val::Int(ctx.dst_addr()?.port() as i64)),
            Fetch::FeName => put(s, ctx.fe.as_bytes()),
            // Before a backend is chosen, HAProxy's stream has the
            // frontend as its backend: `be_name` in an ACL of a
            // frontend's http-request rules is the frontend's name
            // (HAProxy warns that it "will never match"; it does).
            Fetch::BeName => match ctx.be {
                Some(b) => put(s, b.as_bytes()),
                None if ctx.req.is_some() => put(s, ctx.fe.as_bytes()),
                None => None,
            },
            Fetch::SrvName => put(s, ctx.srv?.as_bytes()),
            Fetch::SrvId => {
                ctx.srv?;
                let st = ctx.vars?.try_borrow().ok()?;
                Some(Val::Int(i64::from(st.info.srv_id?)))
            }
            Fetch::CacheHit => {
                let st = ctx.vars?.try_borrow().ok()?;
                Some(Val::Bool(st.info.cache_hit.is_some()))
            }
            Fetch::CacheName => {
                let name = {
                    let st = ctx.vars?.try_borrow().ok()?;
                    st.info.cache_hit.clone()?
                };
                put(s, name.as_bytes())
            }
            Fetch::Method => {
                let r = ctx.req?;
                put(s, r.head.method_span.get(r.buf))?;
                Some(Val::Meth)
            }
            Fetch::Path => {
                let r = ctx.req?;
                let p = found_path(r.head.target.get(r.buf))?;
                put(s, split_q(p).0)
            }
            Fetch::PathQ => {
                let r = ctx.req?;
                put(s, found_path(r.head.target.get(r.buf))?)
            }
            Fetch::UrlParam { name, delim } => {
                let q = url_query(ctx, *delim)?;
                let (a, b) = next_param(q, 0, name.as_deref(), *delim)?;
                put(s, &q[a..b])
            }
            Fetch::ReqBody => {
                put(s, ctx.req?.body)?;
                Some(Val::Bin)
            }
            Fetch::ReqBodyLen => Some(Val::Int(ctx.req?.body.len() as i64)),
            Fetch::HttpAuth(l) => {
                // HAProxy: no sample without well-formed Basic credentials.
                let r = ctx.req?;
                super::auth::basic(r.head.header(r.buf, "authorization")?)?;
                Some(Val::Bool(auth_user(ctx, l).is_some()))
            }
            Fetch::HttpAuthGroup(l) => {
                let (list, i) = auth_user(ctx, l)?;
                put(s, list.users[i].name.as_bytes())
            }
            Fetch::ResBody => {
                put(s, ctx.res_body?.0)?;
                Some(Val::Bin)
            }
            Fetch::ResBodyLen => Some(Val::Int(ctx.res_body?.0.len() as i64)),
            Fetch::ResBodySize => Some(Val::Int(ctx.res_body?.1 as i64)),
            Fetch::ReqBodySize => {
                let r = ctx.req?;
                Some(Val::Int(match r.head.framing {
                    crate::http1::BodyFraming::ContentLength(n) => n as i64,
                    _ => r.body.len() as i64,
                }))
            }
            Fetch::ReqBodyParam(name) => {
                // Declared binary (an ACL needs `-m`), a string when read
                // (HAProxy's smp_fetch_param): a NUL does not end it.
                let body = ctx.req?.body;
                let (a, b) = next_param(body, 0, name.as_deref(), b'&')?;
                put(s, &body[a..b])
            }
            Fetch::FirstReq => {
                let n = ctx.vars?.try_borrow().ok()?.requests;
                Some(Val::Bool(n == 1))
            }
            Fetch::ProtoHttp => {
                if ctx.req.is_some() {
                    return Some(Val::Bool(true));
                }
                // A tcp session whose bytes are not a whole HTTP/1 head
                // (the session waited while one could still come).
                const PRI: &[u8] = b"PRI * HTTP/2.0\r\n\r\n";
                let p = ctx.payload.filter(|p| !p.response)?;
                if p.bytes.len() < PRI.len() && PRI.starts_with(p.bytes) {
                    p.unsure();
                    if p.partial {
                        return None;
                    }
                }
                Some(Val::Bool(p.bytes.starts_with(PRI)))
            }
            Fetch::Query => {
                let r = ctx.req?;
                let q = split_q(r.head.path.get(r.buf)).1?;
                put(s, q)
            }
            Fetch::Url => {
                let r = ctx.req?;
                put(s, r.head.target.get(r.buf))
            }
            // HAProxy's smp_fetch_base: the host, then the path without
            // its query when it starts with `/`; without a host, `path`.
            Fetch::Base => {
                let r = ctx.req?;
                let host = r.head.host.map(|h| h.get(r.buf)).unwrap_or(b"");
                let p = found_path(r.head.target.get(r.buf)).map(|p| split_q(p).0);
                if host.is_empty() {
                    return put(s, p?);
                }
                s.cur.clear();
                s.cur.extend_from_slice(host);
                s.cur
                    .extend_from_slice(p.filter(|p| p.starts_with(b"/")).unwrap_or(b""));
                Some(Val::Str)
            }
            Fetch::ReqVer => {
                let r = ctx.req?;
                // An HTTP/2 stream reaches the rules as HTTP/1.1 (its lane);
                // HAProxy says 2.0 for it.
                let h2 = ctx.vars.is_some_and(|v| v.borrow().h2);
                if !h2 {
                    // The digits as received (`HTTP/1.2` is 1.2, read as
                    // 1.1), as HAProxy keeps the line's version.
                    let st = ctx.vars.and_then(|v| v.try_borrow().ok());
                    let ver = st.as_ref().and_then(|st| received_version(&st.req_line));
                    if let Some(v) = ver.and_then(|v| v.strip_prefix(b"HTTP/")) {
                        return put(s, v);
                    }
                }
                put(
                    s,
                    match r.head.version {
                        _ if h2 => b"2.0",
                        Version::Http10 => b"1.0",
                        Version::Http11 => b"1.1",
                    },
                )
            }
            Fetch::Hdr {
                name,
                occ,
                full,
                res,
            } => {
                let n = match occ {
                    Occ::Default => -1,
                    Occ::Nth(n) => *n,
                };
                nth_value(ctx, *res, name, *full, n, s).then_some(Val::Str)
            }
            Fetch::HdrIp { name, occ, res } | Fetch::HdrVal { name, occ, res } => {
                let n = match occ {
                    Occ::Default => -1,
                    Occ::Nth(n) => *n,
                };
                if !nth_value(ctx, *res, name, false, n, s) {
                    return None;
                }
                typed_value(self, &s.cur)
            }
            Fetch::HdrCnt { name, full, res } => {
                let mut c = 0;
                if !values(ctx, *res, name, *full, &mut |_| {
                    c += 1;
                    false
                }) {
                    return None;
                }
                Some(Val::Int(c))
            }
            Fetch::Cook(name, res) | Fetch::CookVal(name, res) => {
                // The last occurrence, as HAProxy's req.cook in a sample
                // (without a name: the first cookie).
                let mut found = false;
                s.cur.clear();
                cookies(ctx, *res, name.as_deref(), &mut |v| {
                    s.cur.clear();
                    s.cur.extend_from_slice(v);
                    found = true;
                    name.is_none()
                });
                if !found {
                    return None;
                }
                match self {
                    Fetch::CookVal(..) => Some(Val::Int(super::strl2ic(&s.cur))),
                    _ => Some(Val::Str),
                }
            }
            Fetch::CookCnt(name, res) => {
                let mut n = 0;
                if !cookies(ctx, *res, name.as_deref(), &mut |_| {
                    n += 1;
                    false
                }) {
                    return None;
                }
                Some(Val::Int(n))
            }
            Fetch::SslFc => Some(Val::Bool(ctx.tls)),
            Fetch::SslFcSni => {
                if !ctx.tls {
                    return None;
                }
                put(s, ctx.sni?.as_bytes())
            }
            Fetch::ResVer => {
                let v: &[u8] = match ctx.res? {
                    _ if ctx
                        .vars
                        .is_some_and(|v| v.try_borrow().is_ok_and(|v| v.info.srv_h2)) =>
                    {
                        b"2.0"
                    }
                    Res::H1 { head, .. } if head.version == Version::Http10 => b"1.0",
                    // An answer ebb makes is HTTP/1.1, as HAProxy's.
                    _ => b"1.1",
                };
                put(s, v)
            }
            Fetch::Status => Some(Val::Int(match ctx.res? {
                Res::H1 { head, .. } => head.status as i64,
                Res::List { status, .. } => status as i64,
            })),
            Fetch::Str(v) => put(s, v),
            Fetch::Bin(v) => {
                put(s, v);
                Some(Val::Bin)
            }
            Fetch::Int(i) => Some(Val::Int(*i)),
            Fetch::Addr(a) => Some(Val::Ip(*a)),
            Fetch::Bool(b) => Some(Val::Bool(*b)),
            Fetch::Env(v) => put(s, v.as_ref()?.as_bytes()),
            Fetch::Date(off) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0);
                Some(Val::Int(now.saturating_add(*off)))
            }
            Fetch::Rand(range) => {
                let r = next_rand();
                let v = match range {
                    // HAProxy: (rand32 * range) >> 32.
                    Some(n) => ((r & 0xffff_ffff) * n) >> 32,
                    None => r & 0xffff_ffff,
                };
                Some(Val::Int(v as i64))
            }
            Fetch::Var(r, default) => {
                let v = ctx.vars.and_then(|v| v.try_borrow_mut().ok()?.get(r, s));
                // HAProxy 2.6: an unset variable gives the default, as a
                // string, when one is given.
                match (v, default) {
                    (None, Some(d)) => put(s, d.as_bytes()),
                    (v, _) => v,
                }
            }
            Fetch::Capture { res, idx } => {
                let st = ctx.vars?.try_borrow().ok()?;
                let slots = if *res { &st.res_caps } else { &st.req_caps };
                let v = slots.get(*idx)?.as_deref()?;
                s.cur.clear();
                s.cur.extend_from_slice(v);
                Some(Val::Str)
            }
            Fetch::Count {
                what,
                proxy,
                server,
            } => {
                let p = match (what, proxy) {
                    (_, Some(p)) => p.as_str(),
                    (super::Count::FeConn | super::Count::FeClientTimeout, None) => ctx.fe,
                    (_, None) => ctx.be?,
                };
                Some(Val::Int(super::count(*what, p, server.as_deref())?))
            }
            Fetch::CaptureReq(what) => {
                let st = ctx.vars?.try_borrow().ok()?;
                let line = &st.req_line[..];
                let mut parts = line.splitn(3, |&b| b == b' ');
                let (method, target, ver) = (parts.next()?, parts.next()?, parts.next());
                let v: &[u8] = match what {
                    b'm' => method,
                    // From the first slash (no scheme nor authority).
                    b'u' => {
                        let from = if target.starts_with(b"/") {
                            0
                        } else {
                            let after = target
                                .windows(3)
                                .position(|w| w == b"://")
                                .map_or(0, |p| p + 3);
                            target[after..]
                                .iter()
                                .position(|&b| b == b'/')
                                .map_or(target.len(), |p| after + p)
                        };
                        &target[from..]
                    }
                    // HAProxy's flag for 1.1 and up (`HTTP/1.2`, `2.0`).
                    _ => match ver? {
                        [b'H', b'T', b'T', b'P', b'/', a, b'.', b]
                            if *a > b'1' || *a == b'1' && *b >= b'1' =>
                        {
                            b"HTTP/1.1"
                        }
                        _ => b"HTTP/1.0",
                    },
                };
                s.cur.clear();
                s.cur.extend_from_slice(v);
                Some(Val::Str)
            }
            Fetch::CurTimeout { tunnel } => {
                let own = ctx.vars.and_then(|v| {
                    let i = &v.try_borrow().ok()?.info;
                    if *tunnel {
                        i.timeout_tunnel
                    } else {
                        i.timeout_server
                    }
                });
                if let Some(t) = own {
                    return Some(Val::Int(i64::from(t)));
                }
                let what = if *tunnel {
                    super::Count::BeTunnelTimeout
                } else {
                    super::Count::BeServerTimeout
                };
                Some(Val::Int(super::count(what, ctx.be?, None)?))
            }
            Fetch::SoName => {
                let name = ctx.vars?.try_borrow().ok()?.so_name.clone()?;
                put(s, name.as_bytes())
            }
            Fetch::PpTlv(kind) => {
                let st = ctx.vars?.try_borrow().ok()?;
                let t = st
                    .pp_tlvs
                    .as_ref()?
                    .iter()
                    .rev()
                    .find(|t| t.kind == *kind)?;
                put(s, &t.value)
            }
            Fetch::RcvdProxy => {
                let st = ctx.vars?.try_borrow().ok()?;
                Some(Val::Bool(st.pp_tlvs.is_some()))
            }
            Fetch::Stopping => Some(Val::Bool(crate::sys::stopping())),
            Fetch::LastRule { line } => {
                let st = ctx.vars?.try_borrow().ok()?;
                let loc = st.info.last_rule.as_ref()?;
                if *line {
                    return Some(Val::Int(i64::from(loc.line)));
                }
                s.cur.clear();
                s.cur.extend_from_slice(loc.file.as_bytes());
                Some(Val::Str)
            }
            // Only an HTTP exchange begins requests (tcp sessions count
            // none).
            Fetch::IsHtx => {
                let st = ctx.vars?.try_borrow().ok()?;
                Some(Val::Bool(st.requests > 0))
            }
            Fetch::WaitEnd => match ctx.payload {
                Some(p) if p.partial => {
                    p.unsure();
                    None
                }
                _ => Some(Val::Bool(true)),
            },
            Fetch::FcAddr { dst, port } => {
                let fc = ctx
                    .vars
                    .and_then(|v| v.try_borrow().ok())
                    .and_then(|v| v.fc_addrs);
                let a = match (fc, dst) {
                    (Some((src, _)), false) => src,
                    (Some((_, Some(d))), true) => d,
                    // Not asked at accept: no rule moved `dst`.
                    (Some((_, None)) | None, true) => (ctx.dst)()?,
                    (None, false) => ctx.src,
                };
                Some(if *port {
                    Val::Int(i64::from(a.port()))
                } else {
                    Val::Ip(a.ip())
                })
            }
            Fetch::UniqueId => {
                let st = ctx.vars?.try_borrow().ok()?;
                let v = st.info.unique_id.as_deref()?;
                s.cur.clear();
                s.cur.extend_from_slice(v);
                Some(Val::Str)
            }
            // An HTTP request (no raw bytes under inspection): HAProxy
            // gives the size of its HTX form, "not accurate but kept for
            // backward compatibility": the start line (20 bytes of
            // header, method, URI, version), each field's name and value
            // (Connection without `close`/`keep-alive`), one byte for the
            // end of the head, the body received.
            Fetch::ReqLen if ctx.payload.is_none() => {
                let r = ctx.req?;
                let h = r.head;
                let line = h.method_span.get(r.buf).len() + h.target.get(r.buf).len() + 8;
                let fields: usize = h
                    .headers
                    .iter()
                    .map(|f| {
                        let (n, v) = (f.name.get(r.buf), f.value.get(r.buf));
                        if !n.eq_ignore_ascii_case(b"connection") {
                            return n.len() + v.len();
                        }
                        // HAProxy's parser drops `close` and `keep-alive`
                        // from Connection, and the field when none is left.
                        let rest: Vec<&[u8]> = v
                            .split(|&c| c == b',')
                            .map(<[u8]>::trim_ascii)
                            .filter(|t| {
                                !t.is_empty()
                                    && !t.eq_ignore_ascii_case(b"close")
                                    && !t.eq_ignore_ascii_case(b"keep-alive")
                            })
                            .collect();
                        match rest.len() {
                            0 => 0,
                            k => {
                                n.len() + rest.iter().map(|t| t.len()).sum::<usize>() + 2 * (k - 1)
                            }
                        }
                    })
                    .sum();
                Some(Val::Int((20 + line + fields + 1 + r.body.len()) as i64))
            }
            Fetch::ReqLen | Fetch::ResLen => {
                let p = ctx
                    .payload
                    .filter(|p| p.response == matches!(self, Fetch::ResLen))?;
                p.unsure();
                Some(Val::Int(p.bytes.len() as i64))
            }
            Fetch::ReqSslSni => {
                let p = ctx.payload.filter(|p| !p.response)?;
                if p.hello_partial {
                    p.unsure();
                }
                put(s, p.sni?.as_bytes())
            }
            Fetch::ReqSslHelloType => {
                // A handshake record (22) of TLS or SSLv3 (major 3): the
                // type of its first message (HAProxy's check). Fewer bytes
                // that may still become one: not known yet.
                let p = ctx.payload.filter(|p| !p.response)?;
                let b = p.bytes;
                if b.len() < 6 && b.first().is_none_or(|&c| c == 0x16) {
                    p.unsure();
                }
                (b.len() >= 6 && b[0] == 0x16 && b[1] == 3).then(|| Val::Int(b[5] as i64))
            }
            Fetch::ReqPayload(off, len) | Fetch::ResPayload(off, len) => {
                // Not there yet: nothing, and it may come.
                let res = matches!(self, Fetch::ResPayload(..));
                let p = ctx.payload.filter(|p| p.response == res)?;
                let b = p.bytes;
                let end = if *len == 0 {
                    p.unsure();
                    b.len()
                } else {
                    off.checked_add(*len)?
                };
                if end > b.len() {
                    p.unsure();
                }
                let v = b.get(*off..end)?;
                s.cur.clear();
                s.cur.extend_from_slice(v);
                Some(Val::Bin)
            }
            Fetch::Uuid => {
                let a = next_rand();
                let b = next_rand();
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&a.to_be_bytes());
                bytes[8..].copy_from_slice(&b.to_be_bytes());
                bytes[6] = (bytes[6] & 0x0f) | 0x40;
                bytes[8] = (bytes[8] & 0x3f) | 0x80;
                s.cur.clear();
                for (i, x) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        s.cur.push(b'-');
                    }
                    let _ = write!(s.cur, "{x:02x}");
                }
                Some(Val::Str)
            }
        }
    }

    /// For ACLs: every value of a multi-valued fetch (header fetches
    /// without an occurrence, cookies); `None` for single-valued fetches.
    pub(super) fn each(
        &self,
        ctx: &Ctx<'_>,
        s: &mut Scratch,
        f: &mut dyn FnMut(Val, &mut Scratch) -> bool,
    ) -> Option<bool> {
        match self {
            // In an ACL: each group of the authenticated user.
            Fetch::HttpAuthGroup(l) => {
                let Some((list, i)) = auth_user(ctx, l) else {
                    return Some(false);
                };
                Some(list.users[i].groups.iter().any(|g| {
                    s.cur.clear();
                    s.cur.extend_from_slice(g.as_bytes());
                    f(Val::Str, s)
                }))
            }
            Fetch::Hdr {
                name,
                occ: Occ::Default,
                full,
                res,
            } => {
                let mut hit = false;
                values(ctx, *res, name, *full, &mut |v| {
                    s.cur.clear();
                    s.cur.extend_from_slice(v);
                    hit = f(Val::Str, s);
                    hit
                });
                Some(hit)
            }
            Fetch::HdrIp {
                name,
                occ: Occ::Default,
                res,
            }
            | Fetch::HdrVal {
                name,
                occ: Occ::Default,
                res,
            } => {
                let mut hit = false;
                values(ctx, *res, name, false, &mut |v| {
                    if let Some(v) = typed_value(self, v) {
                        hit = f(v, s);
                    }
                    hit
                });
                Some(hit)
            }
            // In an ACL: each parameter of that name (each value after an
            // `=` without a name), as HAProxy's fetch reports more while
            // the query goes on.
            Fetch::UrlParam { name, delim } => {
                let Some(q) = url_query(ctx, *delim) else {
                    return Some(false);
                };
                Some(each_param(q, name.as_deref(), *delim, s, f))
            }
            Fetch::ReqBodyParam(name) => {
                let Some(body) = ctx.req.map(|r| r.body) else {
                    return Some(false);
                };
                Some(each_param(body, name.as_deref(), b'&', s, f))
            }
            // In an ACL: each value, as HAProxy iterates on them (`_val`:
            // each as an integer).
            Fetch::Cook(name, res) | Fetch::CookVal(name, res) => {
                let int = matches!(self, Fetch::CookVal(..));
                let mut hit = false;
                cookies(ctx, *res, name.as_deref(), &mut |v| {
                    hit = if int {
                        f(Val::Int(super::strl2ic(v)), s)
                    } else {
                        s.cur.clear();
                        s.cur.extend_from_slice(v);
                        f(Val::Str, s)
                    };
                    hit
                });
                Some(hit)
            }
            _ => None,
        }
    }
}

/// A header value as `hdr_ip` (an address, none when it is not one) or
/// `hdr_val` (an integer) reads it.
fn typed_value(f: &Fetch, v: &[u8]) -> Option<Val> {
    match f {
        Fetch::HdrIp { .. } => header_ip(v).map(Val::Ip),
        _ => Some(Val::Int(super::strl2ic(v))),
    }
}

/// The query string `url_param` reads: what follows the first `delim`
/// of the path.
fn url_query<'a>(ctx: &Ctx<'a>, delim: u8) -> Option<&'a [u8]> {
    let r = ctx.req?;
    let pq = r.head.path.get(r.buf);
    Some(&pq[pq.iter().position(|&c| c == delim)? + 1..])
}

/// HAProxy 2.6's http_find_next_url_param on `q` from `start`: where the
/// next value is. Parameters are separated by `&`, `;` or `delim`
/// (`http_is_param_delimiter`). With a name, the value after the next
/// `NAME=` that starts a parameter (names compared byte for byte);
/// without one (or an empty one), the value after the next `=` wherever
/// it is (`a&b=1` gives `1`). A value ends at a separator.
fn next_param(q: &[u8], start: usize, name: Option<&str>, delim: u8) -> Option<(usize, usize)> {
    let sep = |c: u8| c == b'&' || c == b';' || c == delim;
    let vstart = match name.map(str::as_bytes).filter(|n| !n.is_empty()) {
        None => start + q.get(start..)?.iter().position(|&c| c == b'=')? + 1,
        Some(n) => {
            let mut pos = start;
            loop {
                let eq = pos + n.len();
                if eq >= q.len() {
                    return None;
                }
                if q[eq] == b'=' {
                    if &q[pos..eq] == n {
                        break eq + 1;
                    }
                    pos = eq + 1;
                }
                pos += q.get(pos..)?.iter().position(|&c| sep(c))? + 1;
            }
        }
    };
    let rest = q.get(vstart..)?;
    Some((
        vstart,
        vstart + rest.iter().position(|&c| sep(c)).unwrap_or(rest.len()),
    ))
}

/// Calls `f` on each value `next_param` finds in turn (HAProxy's fetch
/// says more follow while the value ends before the text); stops at the
/// first `true`.
fn each_param(
    q: &[u8],
    name: Option<&str>,
    delim: u8,
    s: &mut Scratch,
    f: &mut dyn FnMut(Val, &mut Scratch) -> bool,
) -> bool {
    let mut at = 0;
    while let Some((a, b)) = next_param(q, at, name, delim) {
        s.cur.clear();
        s.cur.extend_from_slice(&q[a..b]);
        if f(Val::Str, s) {
            return true;
        }
        if b >= q.len() {
            break;
        }
        at = b;
    }
    false
}

/// Puts occurrence `n` of header `name`'s values (comma-separated unless
/// `full`; from the last when negative) in `s.cur`; whether it exists.
fn nth_value(ctx: &Ctx<'_>, res: bool, name: &str, full: bool, n: i64, s: &mut Scratch) -> bool {
    let want = if n < 0 {
        let mut total = 0;
        values(ctx, res, name, full, &mut |_| {
            total += 1;
            false
        });
        total + n + 1
    } else {
        n
    };
    if want < 1 {
        return false;
    }
    let (mut i, mut found) = (0, false);
    values(ctx, res, name, full, &mut |v| {
        i += 1;
        if i == want {
            s.cur.clear();
            s.cur.extend_from_slice(v);
            found = true;
        }
        found
    });
    found
}

/// A header value as `hdr_ip` reads it (HAProxy's `url2ipv4`, then
/// `inet_pton`): four dotted decimal octets (leading zeros allowed),
/// alone or followed by `:PORT` (0 to 65535), or an IPv6 address.
fn header_ip(v: &[u8]) -> Option<std::net::IpAddr> {
    header_ipv4(v).or_else(|| {
        std::str::from_utf8(v)
            .ok()?
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(std::net::IpAddr::V6)
    })
}

/// HAProxy's `url2ipv4` on a whole value: digits and dots up to another
/// character, four octets; then nothing, or `:PORT`.
fn header_ipv4(v: &[u8]) -> Option<std::net::IpAddr> {
    let mut oct = [0u32; 4];
    let (mut n, mut digit, mut end) = (0usize, false, v.len());
    for (i, &c) in v.iter().enumerate() {
        if c.is_ascii_digit() {
            if !digit {
                n += 1;
                if n > 4 {
                    return None;
                }
                digit = true;
            }
            oct[n - 1] = oct[n - 1] * 10 + u32::from(c - b'0');
            if oct[n - 1] > 255 {
                return None;
            }
        } else if c == b'.' {
            if !digit || n == 4 {
                return None;
            }
            digit = false;
        } else {
            end = i;
            break;
        }
    }
    if n < 4 {
        return None;
    }
    let port_ok = |p: &[u8]| {
        !p.is_empty()
            && p.iter().all(u8::is_ascii_digit)
            && std::str::from_utf8(p)
                .ok()
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|p| p <= 65535)
    };
    (end == v.len() || (v[end] == b':' && port_ok(&v[end + 1..])))
        .then(|| std::net::IpAddr::from(oct.map(|o| o as u8)))
}

/// The path (with its query) of a request target as HAProxy's
/// `http_parse_path` finds it (`crate::sample::target_path`): none in `*`,
/// in an absolute URI without one (`http://h`, `http://h?q`), or in a
/// target a rule rewrote to something else than a path or an absolute
/// URI (`set-path a`); the user part of an authority is skipped
/// (`http://u@h/p` gives `/p`).
fn found_path(t: &[u8]) -> Option<&[u8]> {
    match crate::sample::target_path(t) {
        [] => None,
        p => Some(p),
    }
}

/// Path and query (after `?`) of a path-and-query.
fn split_q(p: &[u8]) -> (&[u8], Option<&[u8]>) {
    match p.iter().position(|&c| c == b'?') {
        Some(i) => (&p[..i], Some(&p[i + 1..])),
        None => (p, None),
    }
}

/// Calls `f` on each value of header `name`: each comma-separated value
/// (trimmed) unless `full`, where each line counts whole. `f` returns
/// `true` to stop. Returns whether the message exists.
fn values(
    ctx: &Ctx<'_>,
    res: bool,
    name: &str,
    full: bool,
    f: &mut dyn FnMut(&[u8]) -> bool,
) -> bool {
    let mut stop = false;
    each_field(ctx, res, &mut |n, v| {
        if !n.eq_ignore_ascii_case(name.as_bytes()) {
            return false;
        }
        if full {
            // HAProxy's http_find_header: the value without the spaces
            // around it (a rule may have set one with them).
            let t = |c: &u8| *c != b' ' && *c != b'\t';
            let v = match (v.iter().position(t), v.iter().rposition(t)) {
                (Some(a), Some(b)) => &v[a..=b],
                _ => &v[..0],
            };
            stop = f(v);
            return stop;
        }
        for part in super::split_values(v) {
            if f(part) {
                stop = true;
                return true;
            }
        }
        false
    })
}

/// Calls `f` on each value of cookie `name` (every cookie without a
/// name; `f` returns `true` to stop) in the request's Cookie fields, or
/// with `res` in the response's Set-Cookie fields, as HAProxy 2.6 reads
/// them: each comma-separated value of the field (`http_find_header`),
/// skipped when shorter than the name and one byte, then its cookies
/// (`http_extract_cookie_value`, a list of them in a request; a response's
/// field names one, in its first `name=value`). Returns whether the
/// message exists.
fn cookies(ctx: &Ctx<'_>, res: bool, name: Option<&str>, f: &mut dyn FnMut(&[u8]) -> bool) -> bool {
    let field = if res { "set-cookie" } else { "cookie" };
    let name = name.map_or(&b""[..], str::as_bytes);
    values(ctx, res, field, false, &mut |v| {
        if v.len() < name.len() + 1 {
            return false;
        }
        let mut at = 0;
        while let Some((a, b, next)) = extract_cookie(v, at, name, !res) {
            if f(&v[a..b]) {
                return true;
            }
            at = next;
        }
        false
    })
}

/// The next value of cookie `name` (any cookie when empty) in the field
/// value `v` from `at`: where it starts and ends, and where to look on
/// from. A request's field (`list`) holds cookies separated by `;` or
/// `,`; a response's looks no further than the first `name=value` (past
/// the attributes `$...` and the words without `=` before it). Values
/// may be quoted (`;` and `,` inside do not end them).
fn extract_cookie(
    v: &[u8],
    mut at: usize,
    name: &[u8],
    list: bool,
) -> Option<(usize, usize, usize)> {
    let sp = |c: u8| c == b' ' || c == b'\t';
    while at + name.len() + 1 < v.len() {
        while at < v.len() && sp(v[at]) {
            at += 1;
        }
        // The name ends before the spaces in front of `=` or a separator.
        let (mut eq, mut name_end) = (at, at);
        while eq < v.len() {
            let c = v[eq];
            if c == b'=' || c == b';' || (list && c == b',') {
                break;
            }
            eq += 1;
            if !sp(c) {
                name_end = eq;
            }
        }
        let (a, b, next) = if v.get(eq) == Some(&b'=') {
            let mut a = eq + 1;
            while a < v.len() && sp(v[a]) {
                a += 1;
            }
            let next = cookie_value_end(v, a);
            let mut b = next;
            while b > a && sp(v[b - 1]) {
                b -= 1;
            }
            (a, b, next)
        } else {
            (eq, eq, eq)
        };
        // `$Path`... attributes and words without `=` are passed over.
        if v.get(at) == Some(&b'$') || eq == next {
            at = next + 1;
            continue;
        }
        if name.is_empty() || &v[at..name_end] == name {
            return Some((a, b, next + 1));
        }
        if !list {
            return None;
        }
        at = next + 1;
    }
    None
}

/// Where a cookie value starting at `a` ends: at the first `;` or `,`
/// outside a quoted string (`\` escapes a byte inside one).
fn cookie_value_end(v: &[u8], a: usize) -> usize {
    let (mut quoted, mut pair) = (false, false);
    for (i, &c) in v.iter().enumerate().skip(a) {
        if pair {
            pair = false;
        } else if quoted {
            if c == b'\\' {
                pair = true;
            } else if c == b'"' {
                quoted = false;
            }
        } else if c == b'"' {
            quoted = true;
        } else if c == b',' || c == b';' {
            return i;
        }
    }
    v.len()
}

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0) };
}

/// A per-thread xorshift64* generator seeded from the clock and the
/// thread: `rand` and `uuid` need spread, not cryptographic strength
/// (HAProxy uses a non-cryptographic generator too).
pub(super) fn next_rand() -> u64 {
    RNG.with(|c| {
        let mut x = c.get();
        if x == 0 {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x9e37_79b9_7f4a_7c15);
            let local = 0u8;
            x = t ^ (&local as *const u8 as u64).rotate_left(32) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

/// The version of a request line as received (`M T V`): its last word.
fn received_version(line: &[u8]) -> Option<&[u8]> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    parts.next()?;
    parts.next()?;
    parts.next().filter(|v| !v.is_empty())
}
