//! Sample fetches (configuration.txt 7.3.2 to 7.3.6): what a sample
//! expression starts from.
//!
//! A fetch is compiled once, when the configuration is read, into a
//! [`Fetch`]: its name and arguments checked and resolved (`parse`), then
//! evaluated on each connection or exchange (`eval`), which reads the
//! message through the helpers of `msg` (query parameters, header values,
//! cookies as HAProxy 2.6 splits them). This module holds the compiled
//! form and what the configuration asks of it before any traffic: whether
//! it is a constant, which layer and which message it reads, its type.

use super::Type;

mod conn;
mod eval;
mod extra;
mod msg;
mod parse;
mod sslc;
pub use sslc::SRV_TLS;

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
    /// (`None`: the value after the first `=`, see `next_param`);
    /// `urlp_val` (`val`): that value as HAProxy's `strl2ic` reads it.
    UrlParam {
        name: Option<String>,
        delim: u8,
        val: bool,
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
    /// `ssl_c_*`, `ssl_fc_has_crt`: the client's certificate.
    SslC(sslc::SslC),
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
    /// `so_id`: the listener's id in its frontend (each address of each
    /// bind line from 1, as HAProxy numbers them without `id`).
    SoId,
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
    /// `prio_class`, `prio_offset` (`offset`): the stream's queue
    /// priority as `set-priority-class`/`set-priority-offset` left it (0
    /// by default).
    Prio {
        offset: bool,
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
    /// `bc_src`, `bc_src_port`: the server connection's local address
    /// (known from the response on, and in the log).
    BcSrc {
        port: bool,
    },
    /// `fe_conn([FE])`, `be_conn([BE])`, `srv_conn([BE/]SRV)`: live
    /// connection counts (no proxy named: the exchange's).
    Count {
        what: super::Count,
        proxy: Option<String>,
        server: Option<String>,
    },
    /// `fe_defbe`: the name of the frontend's `default_backend`.
    FeDefbe,
    /// One of `extra`'s.
    Extra(extra::Extra),
    /// One of `conn`'s.
    Conn(conn::Conn),
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
    /// `req.ssl_alpn`: the ALPN protocol names of the ClientHello in
    /// those bytes (the first one; an ACL tries each).
    ReqSslAlpn,
    /// `req.rdp_cookie([NAME])` (`cnt`: `req.rdp_cookie_cnt`, 1 when
    /// found, 0 when not): the RDP cookie (`Cookie: NAME=VALUE` CRLF
    /// after the 11 bytes of the TPKT and X.224 headers) of a TCP-mode
    /// request; no name: the first.
    RdpCookie {
        name: Option<String>,
        cnt: bool,
    },
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
    /// `res.comp`, `res.comp_algo` (`true`): ebb compresses the server's
    /// answer, with that algorithm (its `compression algo` name).
    ResComp(bool),
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
    /// `http_auth_bearer([HDR])`: the token of the request's Bearer
    /// credentials (in `Authorization`, or in header HDR).
    HttpAuthBearer(Option<String>),
    /// `http_auth_type`: the scheme of the request's credentials,
    /// `Basic` or `Bearer`; `http_auth_user`: the user of Basic ones.
    HttpAuthType,
    HttpAuthUser,
    /// `fcgi.docroot`, `fcgi.index`: the backend's FastCGI application's.
    FcgiDocroot,
    FcgiIndex,
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

impl Fetch {
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
            Fetch::Extra(f) => f.layer(),
            Fetch::Src
            | Fetch::SrcPort
            | Fetch::Dst
            | Fetch::DstPort
            | Fetch::FeName
            | Fetch::BeName
            | Fetch::SslFc
            | Fetch::SslFcSni
            | Fetch::SslC(_)
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
            | Fetch::SoId
            | Fetch::PpTlv(_)
            | Fetch::RcvdProxy
            | Fetch::Stopping
            | Fetch::LastRule { .. }
            | Fetch::Prio { .. }
            | Fetch::WaitEnd
            | Fetch::IsHtx
            | Fetch::FcAddr { .. }
            | Fetch::BcSrc { .. }
            | Fetch::Count { .. }
            | Fetch::FeDefbe
            | Fetch::Conn(_)
            | Fetch::CurTimeout { .. }
            | Fetch::Var(..)
            // Stick-table counters: known without reading the connection.
            | Fetch::Stk(_) => Layer::L4,
            Fetch::ReqLen
            | Fetch::ReqSslSni
            | Fetch::ReqSslAlpn
            | Fetch::ReqSslHelloType
            | Fetch::RdpCookie { .. }
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
            Fetch::Extra(f) => f.reads_response(),
            Fetch::Conn(f) if f.reads_server_conn() => Some(true),
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
            | Fetch::HttpAuthBearer(_)
            | Fetch::HttpAuthType
            | Fetch::HttpAuthUser
            | Fetch::FcgiDocroot
            | Fetch::FcgiIndex
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
            | Fetch::BcSrc { .. }
            | Fetch::CacheHit
            | Fetch::CacheName
            | Fetch::ResComp(_)
            | Fetch::ResLen
            | Fetch::ResPayload(..)
            | Fetch::ResBody
            | Fetch::ResBodyLen
            | Fetch::ResBodySize => Some(true),
            Fetch::ReqLen
            | Fetch::ReqSslSni
            | Fetch::ReqSslAlpn
            | Fetch::ReqSslHelloType
            | Fetch::RdpCookie { .. }
            | Fetch::ReqPayload(..) => Some(false),
            // `ssl_bc*`: the server connection, as `bc_src`.
            Fetch::SslC(f) if f.reads_server_conn() => Some(true),
            _ => None,
        }
    }

    pub(super) fn out_type(&self) -> Type {
        match self {
            Fetch::Extra(f) => f.out_type(),
            Fetch::Conn(f) => f.out_type(),
            Fetch::ReqLen
            | Fetch::ReqSslHelloType
            | Fetch::RdpCookie { cnt: true, .. }
            | Fetch::ResLen
            | Fetch::ReqBodyLen
            | Fetch::ReqBodySize
            | Fetch::ResBodyLen
            | Fetch::ResBodySize => Type::Int,
            // HAProxy declares `bc_src` an integer (it gives an address).
            Fetch::FcAddr { port: true, .. }
            | Fetch::BcSrc { .. }
            | Fetch::LastRule { line: true } => Type::Int,
            Fetch::Src
            | Fetch::Dst
            | Fetch::HdrIp { .. }
            | Fetch::Addr(_)
            | Fetch::FcAddr { port: false, .. } => Type::Ip,
            Fetch::Count {
                what: super::Count::SrvIsUp,
                ..
            } => Type::Bool,
            Fetch::SrcPort
            | Fetch::Count { .. }
            | Fetch::CurTimeout { .. }
            | Fetch::Prio { .. }
            | Fetch::DstPort
            | Fetch::HdrCnt { .. }
            | Fetch::HdrVal { .. }
            | Fetch::UrlParam { val: true, .. }
            | Fetch::CookCnt(..)
            | Fetch::CookVal(..)
            | Fetch::Status
            | Fetch::SrvId
            | Fetch::SoId
            | Fetch::Int(_)
            | Fetch::Date(_)
            | Fetch::Rand(_) => Type::Int,
            Fetch::SslFc
            | Fetch::Bool(_)
            | Fetch::FirstReq
            | Fetch::ProtoHttp
            | Fetch::CacheHit
            | Fetch::ResComp(false)
            | Fetch::RcvdProxy
            | Fetch::Stopping
            | Fetch::WaitEnd
            | Fetch::IsHtx
            | Fetch::HttpAuth(_) => Type::Bool,
            // Typed when set; converters cast at run time from a string.
            Fetch::Var(..) => Type::Str,
            Fetch::Method => Type::Meth,
            Fetch::Stk(f) => f.out_type(),
            Fetch::SslC(f) => f.out_type(),
            Fetch::ReqPayload(..)
            | Fetch::ResPayload(..)
            | Fetch::Bin(_)
            | Fetch::ReqBody
            | Fetch::ReqBodyParam(_)
            | Fetch::ResBody => Type::Bin,
            _ => Type::Str,
        }
    }
}
