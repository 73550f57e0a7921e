//! The sample engine: HAProxy's fetches, converters and log-format strings
//! (configuration.txt sections 7.3 and 8.2.4), compiled once at
//! configuration load and evaluated per request.
//!
//! A *sample* is a typed value (boolean, integer, IP address, string,
//! binary, method). An *expression* is a fetch followed by converters:
//! `req.hdr(host),lower,field(1,:)`. A *log-format string* mixes text,
//! expressions in `%[...]` and the `%ci`-style aliases; it is what header
//! values, `lf-string` bodies and dynamic `use_backend` names are.
//!
//! Compilation checks everything it can: the fetch and converter names,
//! their arguments, that each converter accepts what the previous step
//! produces (HAProxy's cast table), and that the fetch is available where
//! the expression is used (a response fetch in a request rule is refused,
//! as HAProxy refuses it). Any error is a message the parser prefixes with
//! `file:line`.
//!
//! Evaluation reads a [`Ctx`] the call site fills (addresses, the request
//! and response heads over their buffers, proxy names). Bytes produced on
//! the way live in two per-thread scratch buffers that keep their capacity,
//! so a warm evaluation allocates nothing unless a value outgrows them.

pub mod auth;
mod conv;
mod conv_extra;
pub(crate) use conv::base64_encode;
pub use conv_extra::take_sink_refs;
mod crypto;
pub(crate) use conv::{websocket_accept, websocket_key};
mod fetch;
mod fix;
pub use crate::hash;
mod jsonq;
mod logfmt;
pub mod logline;
pub(crate) mod map;
mod mqtt;
pub mod patref;
mod protobuf;
mod stk;
mod strftime;
#[cfg(test)]
mod tests;
pub mod vars;

use std::cell::RefCell;

/// Set at start when a log format (`%bi`, `%bp`) or a sample (`bc_src`,
/// `bc_src_port`) reads the local address of server connections: each
/// connection installed for an exchange then asks the kernel for it (one
/// `getsockname`), which nothing pays for otherwise.
pub static BACK_LOCAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The local end of a server connection (`%bi`, `%bp`, `bc_src`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BackLocal {
    /// An IPv4 or IPv6 address and port.
    Addr(std::net::SocketAddr),
    /// A UNIX socket: HAProxy 2.6 logs `unix` and port 0 (its
    /// `addr_to_str`), and `bc_src` has no value.
    Unix,
}

impl BackLocal {
    /// The address, for an IP connection.
    pub fn addr(self) -> Option<std::net::SocketAddr> {
        match self {
            BackLocal::Addr(a) => Some(a),
            BackLocal::Unix => None,
        }
    }
}

/// The local end of a server connection `s`, when something reads it
/// ([`BACK_LOCAL`]).
pub fn back_local(s: &std::net::TcpStream) -> Option<BackLocal> {
    if !BACK_LOCAL.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    let a = socket2::SockRef::from(s).local_addr().ok()?;
    match a.as_socket() {
        Some(a) => Some(BackLocal::Addr(a)),
        None if a.is_unix() => Some(BackLocal::Unix),
        None => None,
    }
}
use std::net::{IpAddr, SocketAddr};

use crate::http1::{RequestHead, ResponseHead};

pub use fetch::{Layer, SRV_TLS};
pub(crate) use logfmt::hostname;
pub use logfmt::LogFormat;
pub use stk::{note_table_ref, sample_key, take_refs, StkConv, StkFetch, TrackedRead};
pub use vars::{CacheFacts, VarAction, VarRef, VarStore};

/// `set-log-level` (http and tcp rules): noted with the exchange's facts
/// for its log line.
pub(crate) fn set_log_level(ctx: &Ctx<'_>, level: Option<u8>) {
    if let Some(mut v) = ctx.vars.and_then(|v| v.try_borrow_mut().ok()) {
        v.info.log_level = Some(level);
    }
}

/// A live count a fetch reads from the running proxies: `fe_conn`,
/// `be_conn`, `srv_conn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// Connections established on a frontend.
    FeConn,
    /// Connections established on a backend's servers.
    BeConn,
    /// Connections established on a server.
    SrvConn,
    /// Sessions handed to a server per second (`srv_sess_rate`).
    SrvSessRate,
    /// The configured `timeout server`, `timeout tunnel` of a backend and
    /// `timeout client` of a frontend, in ms (0 when unset).
    BeServerTimeout,
    BeTunnelTimeout,
    FeClientTimeout,
    /// The proxy's id (`fe_id`, `be_id`: HAProxy's numbering, see
    /// `proxy::proxy_uuid`).
    FeId,
    BeId,
    /// `nbsrv`: the backend's usable servers (HAProxy's `be_usable_srv`:
    /// the active ones, else 1 for the first backup, or every backup
    /// with `option allbackups`).
    Nbsrv,
    /// `connslots`: free connection and queue slots of the servers not
    /// down (-1 when one has no `maxconn` or `maxqueue`).
    Connslots,
    /// `queue`: streams waiting in the backend's and its servers' queues;
    /// `avg_queue`: that per usable server, rounded up (twice it without
    /// one).
    Queue,
    AvgQueue,
    /// `be_sess_rate`, `fe_sess_rate`, `fe_req_rate`: sessions (requests)
    /// per second, HAProxy's sliding counters.
    BeSessRate,
    FeSessRate,
    FeReqRate,
    /// `be_conn_free`: free slots of the servers the load balancer may
    /// pick (-1 when one has no `maxconn`).
    BeConnFree,
    /// `srv_is_up`: not in maintenance, and not down by its checks (1 or
    /// 0, a boolean sample).
    SrvIsUp,
    /// `srv_conn_free`: free slots under its (dynamic) `maxconn`, -1
    /// without one.
    SrvConnFree,
    /// `srv_queue`: streams in the server's queue.
    SrvQueue,
    /// `srv_weight` (effective), `srv_iweight` (configured), `srv_uweight`
    /// (in force: `set server ... weight`).
    SrvWeight,
    SrvIweight,
    SrvUweight,
    /// `dst_conn`: connections open on the listener (its index in the
    /// frontend) the session came through.
    DstConn(u32),
}

impl Count {
    /// Whether it reads a frontend (else a backend): which kind of proxy
    /// a name in its argument must be.
    pub fn of_frontend(self) -> bool {
        matches!(
            self,
            Count::FeConn
                | Count::FeClientTimeout
                | Count::FeId
                | Count::FeSessRate
                | Count::FeReqRate
                | Count::DstConn(_)
        )
    }

    /// Whether its argument names a server (`[BACKEND/]SERVER`).
    pub fn per_server(self) -> bool {
        matches!(
            self,
            Count::SrvConn
                | Count::SrvSessRate
                | Count::SrvIsUp
                | Count::SrvConnFree
                | Count::SrvQueue
                | Count::SrvWeight
                | Count::SrvIweight
                | Count::SrvUweight
        )
    }

    /// The fetch's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Count::FeConn => "fe_conn",
            Count::BeConn => "be_conn",
            Count::SrvConn => "srv_conn",
            Count::SrvSessRate => "srv_sess_rate",
            Count::BeServerTimeout => "be_server_timeout",
            Count::BeTunnelTimeout => "be_tunnel_timeout",
            Count::FeClientTimeout => "fe_client_timeout",
            Count::FeId => "fe_id",
            Count::BeId => "be_id",
            Count::Nbsrv => "nbsrv",
            Count::Connslots => "connslots",
            Count::Queue => "queue",
            Count::AvgQueue => "avg_queue",
            Count::BeSessRate => "be_sess_rate",
            Count::FeSessRate => "fe_sess_rate",
            Count::FeReqRate => "fe_req_rate",
            Count::BeConnFree => "be_conn_free",
            Count::SrvIsUp => "srv_is_up",
            Count::SrvConnFree => "srv_conn_free",
            Count::SrvQueue => "srv_queue",
            Count::SrvWeight => "srv_weight",
            Count::SrvIweight => "srv_iweight",
            Count::SrvUweight => "srv_uweight",
            Count::DstConn(_) => "dst_conn",
        }
    }

    /// The state fetches that take an optional proxy or a server
    /// argument, by name.
    pub(crate) fn by_name(name: &str) -> Option<Count> {
        Some(match name {
            "fe_conn" => Count::FeConn,
            "be_conn" => Count::BeConn,
            "srv_conn" => Count::SrvConn,
            "srv_sess_rate" => Count::SrvSessRate,
            "nbsrv" => Count::Nbsrv,
            "connslots" => Count::Connslots,
            "queue" => Count::Queue,
            "avg_queue" => Count::AvgQueue,
            "be_sess_rate" => Count::BeSessRate,
            "fe_sess_rate" => Count::FeSessRate,
            "fe_req_rate" => Count::FeReqRate,
            "be_conn_free" => Count::BeConnFree,
            "srv_is_up" => Count::SrvIsUp,
            "srv_conn_free" => Count::SrvConnFree,
            "srv_queue" => Count::SrvQueue,
            "srv_weight" => Count::SrvWeight,
            "srv_iweight" => Count::SrvIweight,
            "srv_uweight" => Count::SrvUweight,
            _ => return None,
        })
    }
}

/// `tune.bufsize` in force (`payload_lv`: a block longer than a buffer
/// never comes).
pub static BUFSIZE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(16_384);

/// Set at start when a `dst_conn` fetch reads the connections of a
/// listener: frontends then count them per listener (as `option
/// socket-stats` has them do).
pub static DST_CONN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Set at start when a fetch reads a proxy's session or request rate
/// (`fe_sess_rate`, `fe_req_rate`, `be_sess_rate`): frontends and
/// backends then count them (a shared counter per event, which nothing
/// pays for otherwise).
pub static RATES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Answers a [`Count`] for a proxy name (and a server name for
/// `SrvConn`); `None` when there is no such proxy or server.
pub type CountFn = dyn Fn(Count, &str, Option<&str>) -> Option<i64> + Send + Sync;

static COUNTS: std::sync::OnceLock<Box<CountFn>> = std::sync::OnceLock::new();

/// Installs what answers the count fetches (the server does, at start:
/// the sample engine does not see the running proxies itself).
pub fn set_counts(f: Box<CountFn>) {
    let _ = COUNTS.set(f);
}

fn count(c: Count, proxy: &str, server: Option<&str>) -> Option<i64> {
    COUNTS.get()?(c, proxy, server)
}

/// Answers `fe_defbe`: the name of a frontend's default backend.
pub type DefaultBackendFn = dyn Fn(&str) -> Option<String> + Send + Sync;

static DEFAULT_BACKEND: std::sync::OnceLock<Box<DefaultBackendFn>> = std::sync::OnceLock::new();

/// Installs what answers `fe_defbe` (the server does, at start, as for
/// [`set_counts`]).
pub fn set_default_backend(f: Box<DefaultBackendFn>) {
    let _ = DEFAULT_BACKEND.set(f);
}

fn default_backend(fe: &str) -> Option<String> {
    DEFAULT_BACKEND.get()?(fe)
}

/// Renders the `unique-id-format` of the frontend named for the context
/// (`None`: no such frontend, or none set there).
pub type UniqueIdFn = dyn Fn(&str, &Ctx<'_>) -> Option<Vec<u8>> + Send + Sync;

static UNIQUE_ID: std::sync::OnceLock<Box<UniqueIdFn>> = std::sync::OnceLock::new();

/// Installs what renders a frontend's `unique-id-format` (the server
/// does, at start, as for [`set_counts`]).
pub fn set_unique_id(f: Box<UniqueIdFn>) {
    let _ = UNIQUE_ID.set(f);
}

/// The FastCGI application of the backend named: its document root and
/// index (`None`: no such backend, or none set there).
pub type FcgiAppFn = dyn Fn(&str) -> Option<(Vec<u8>, Option<Vec<u8>>)> + Send + Sync;

static FCGI_APP: std::sync::OnceLock<Box<FcgiAppFn>> = std::sync::OnceLock::new();

/// Installs what answers the `fcgi.docroot` and `fcgi.index` fetches
/// (the server does, at start, as for [`set_counts`]).
pub fn set_fcgi_app(f: Box<FcgiAppFn>) {
    let _ = FCGI_APP.set(f);
}

/// The document root and index of the exchange's backend's FastCGI
/// application, once a backend is known.
pub(crate) fn fcgi_app(ctx: &Ctx<'_>) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    FCGI_APP.get().and_then(|f| f(ctx.be?))
}

thread_local! {
    static MAKING_ID: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The exchange's unique id: made on first use from its frontend's
/// `unique-id-format` and kept (HAProxy's `stream_generate_unique_id`);
/// nothing without a format, or while the format itself is being
/// rendered (a `%[unique-id]` in it).
pub(crate) fn unique_id(ctx: &Ctx<'_>) -> Option<Vec<u8>> {
    let vars = ctx.vars?;
    if let Some(v) = vars.try_borrow().ok()?.info.unique_id.clone() {
        return Some(v);
    }
    if MAKING_ID.with(|m| m.replace(true)) {
        return None;
    }
    let v = UNIQUE_ID.get().and_then(|f| f(ctx.fe, ctx));
    MAKING_ID.with(|m| m.set(false));
    let v = v?;
    vars.try_borrow_mut().ok()?.info.unique_id = Some(v.clone());
    Some(v)
}

/// A proxy (and server) a count fetch names; `None`: the rule's own.
pub type ProxyRef = (Count, Option<String>, Option<String>);

thread_local! {
    static PROXY_REFS: RefCell<Vec<ProxyRef>> = const { RefCell::new(Vec::new()) };
}

/// The proxies and servers the count fetches compiled on this thread
/// since the last call name (`None`: the proxy of the rule), for the
/// parser's checks.
pub fn take_proxy_refs() -> Vec<ProxyRef> {
    PROXY_REFS.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

fn note_proxy_ref(c: Count, proxy: Option<String>, server: Option<String>) {
    PROXY_REFS.with(|r| r.borrow_mut().push((c, proxy, server)));
}

thread_local! {
    static RAW_CLAIMS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Notes a text that carried bytes that are not UTF-8 (see
/// `config::word_bytes`) and compiled with them where they are read as
/// bytes.
fn claim_raw(text: &str) {
    if crate::rawword::has_raw(text) {
        RAW_CLAIMS.with(|r| r.borrow_mut().push(text.to_string()));
    }
}

/// The texts with bytes that are not UTF-8 compiled on this thread since
/// the last call: the configuration parser refuses a line where such bytes
/// went anywhere else.
pub fn take_raw_claims() -> Vec<String> {
    RAW_CLAIMS.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// Where an expression is evaluated: decides which fetches exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `http-request` rules, `use_backend`, ACLs of request rules, `return`
    /// bodies. `backend` says whether a backend is known (its rules).
    Request { backend: bool },
    /// `http-response` rules: the request head is gone.
    Response,
}

/// The request a sample may read.
#[derive(Clone, Copy)]
pub struct Req<'a> {
    pub buf: &'a [u8],
    pub head: &'a RequestHead,
    /// The part of the body received so far (`req.body`), de-chunked;
    /// empty when none arrived or none was waited for.
    pub body: &'a [u8],
}

/// The response a sample may read.
#[derive(Clone, Copy)]
pub enum Res<'a> {
    /// A server's response head over its buffer.
    H1 {
        buf: &'a [u8],
        head: &'a ResponseHead,
    },
    /// An answer ebb builds itself (files): status and fields.
    List {
        status: u16,
        hdrs: &'a [(&'a [u8], &'a [u8])],
    },
}

/// The first bytes of a TCP-mode request, for `tcp-request content`
/// rules and a tcp frontend's `use_backend`: `req.len`, `req.payload`,
/// `req.ssl_hello_type`, and the SNI of the ClientHello they hold
/// (`req.ssl_sni`, read by the caller: the TLS layer sits above this one).
#[derive(Clone, Copy)]
pub struct Payload<'a> {
    pub bytes: &'a [u8],
    pub sni: Option<&'a str>,
    /// The ClientHello in `bytes` is not complete yet.
    pub hello_partial: bool,
    /// More bytes may still come (inspection under way): a fetch whose
    /// answer could change with them says so in `may_change` (HAProxy's
    /// `SMP_F_MAY_CHANGE`), and a rule that does not hold then waits.
    pub partial: bool,
    pub may_change: &'a std::cell::Cell<bool>,
    /// The bytes are the server's (`tcp-response content` rules: `res.len`,
    /// `res.payload`), not the client's.
    pub response: bool,
}

impl Payload<'_> {
    /// Notes that the answer being computed may change with more bytes.
    pub(crate) fn unsure(&self) {
        if self.partial {
            self.may_change.set(true);
        }
    }
}

/// What an evaluation may read. Call sites fill it; fields a context does
/// not have stay `None` (a fetch that needs them finds nothing).
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// The client's address.
    pub src: SocketAddr,
    /// The local address the client reached (a system call: only asked
    /// for when `dst`/`dst_port`/`%fi`/`%fp` is evaluated).
    pub dst: &'a dyn Fn() -> Option<SocketAddr>,
    pub fe: &'a str,
    pub be: Option<&'a str>,
    pub srv: Option<&'a str>,
    /// TLS on the client connection, and the SNI it sent.
    pub tls: bool,
    pub sni: Option<&'a str>,
    /// The client's certificate and its verification (`ssl_c_*`; `None`
    /// without TLS).
    pub client_cert: Option<crate::clientcert::ClientCertView<'a>>,
    pub req: Option<Req<'a>>,
    pub res: Option<Res<'a>>,
    /// The exchange's variables (`None`: `var()` finds nothing and
    /// `set-var` does nothing).
    pub vars: Option<&'a RefCell<VarStore>>,
    /// The connection's stick-table trackers and the tables (`None`: the
    /// stick-table fetches find nothing).
    pub stk: Option<&'a crate::table::Stk>,
    /// TCP mode: the request's first bytes (`None` in HTTP mode).
    pub payload: Option<Payload<'a>>,
    /// What arrived of the response's body (`res.body`), de-chunked, and
    /// its announced size (`res.body_size`); `None` when none was waited
    /// for (`http-response wait-for-body`).
    pub res_body: Option<(&'a [u8], u64)>,
    /// The client connection's socket (`set-mark`, `set-tos`), under TLS
    /// or HTTP/2 too; `None` outside an exchange (checks, start-up).
    pub fc: Option<&'a std::net::TcpStream>,
    /// `tcp-request connection` and `session` rules: no stream exists yet
    /// (HAProxy's fetches that need one, `fc_rtt`..., find nothing).
    pub early: bool,
}

impl<'a> Ctx<'a> {
    /// A context with no connection (`global` lines, constants): only
    /// `vars` to read or set.
    pub fn detached(
        dst: &'a dyn Fn() -> Option<SocketAddr>,
        vars: Option<&'a RefCell<VarStore>>,
    ) -> Ctx<'a> {
        Ctx {
            src: SocketAddr::from(([0, 0, 0, 0], 0)),
            dst,
            fe: "",
            be: None,
            srv: None,
            tls: false,
            sni: None,
            client_cert: None,
            req: None,
            res: None,
            vars,
            stk: None,
            payload: None,
            res_body: None,
            fc: None,
            early: false,
        }
    }
    /// Notes `loc` as the exchange's last final rule (`last_rule_file`,
    /// `last_rule_line`).
    pub fn note_last_rule(&self, loc: &crate::loc::Loc) {
        if let Some(Ok(mut v)) = self.vars.map(|v| v.try_borrow_mut()) {
            v.info.note_last_rule(loc);
        }
    }

    /// The source the stream has: the one an `http-request set-src` or
    /// `set-src-port` gave it, else the connection's (`src`).
    pub fn src_addr(&self) -> SocketAddr {
        let set = self
            .vars
            .and_then(|v| v.try_borrow().ok().and_then(|v| v.info.src));
        set.unwrap_or(self.src)
    }

    /// The destination the stream has: the one an `http-request set-dst`
    /// or `set-dst-port` gave it, else the connection's.
    pub fn dst_addr(&self) -> Option<SocketAddr> {
        let set = self
            .vars
            .and_then(|v| v.try_borrow().ok().and_then(|v| v.info.dst));
        set.or_else(|| (self.dst)())
    }
}

/// A sample's type (HAProxy's SMP_T_*; IPv4 and IPv6 are one type here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Bool,
    Int,
    Ip,
    Str,
    Bin,
    Meth,
}

/// A value; strings, binaries and methods keep their bytes in the
/// scratch buffer the evaluation was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val {
    Bool(bool),
    Int(i64),
    Ip(IpAddr),
    Str,
    Bin,
    Meth,
}

impl Val {
    pub fn ty(&self) -> Type {
        match self {
            Val::Bool(_) => Type::Bool,
            Val::Int(_) => Type::Int,
            Val::Ip(_) => Type::Ip,
            Val::Str => Type::Str,
            Val::Bin => Type::Bin,
            Val::Meth => Type::Meth,
        }
    }
}

/// Whether a value of type `from` can be given to something expecting
/// `to` (HAProxy's sample_casts table, IPv4/IPv6 merged).
pub fn can_cast(from: Type, to: Type) -> bool {
    use Type::*;
    match (from, to) {
        (a, b) if a == b => true,
        (Bool | Int, Bool | Int | Str | Bin) => true,
        (Int, Ip) => true,
        (Ip, Int | Str | Bin) => true,
        (Str, Bool | Int | Ip | Bin | Meth) => true,
        (Bin, Str) => true,
        (Meth, Str | Bin) => true,
        _ => false,
    }
}

/// The two buffers an evaluation writes into: `cur` holds the bytes of
/// the current value, `tmp` receives a converter's output before the swap.
#[derive(Default)]
pub struct Scratch {
    pub cur: Vec<u8>,
    pub tmp: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    static NAME: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's cleared name buffer (dynamic backend names
/// are rendered there without allocating once warm).
pub fn with_name_buf<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    NAME.with(|n| match n.try_borrow_mut() {
        Ok(mut n) => {
            n.clear();
            f(&mut n)
        }
        Err(_) => f(&mut Vec::new()),
    })
}

/// Runs `f` with this thread's scratch buffers (a nested call, which the
/// engine never makes, gets fresh ones instead of panicking).
pub fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut Scratch::default()),
    })
}

/// Converts `v` (bytes in `s.cur`) to `to`; `None` when the value does
/// not convert (a string that is no number, an IPv6 address as integer).
pub fn cast(v: Val, to: Type, s: &mut Scratch) -> Option<Val> {
    use std::io::Write;
    if v.ty() == to {
        return Some(v);
    }
    Some(match (v, to) {
        (Val::Bool(b), Type::Int) => Val::Int(b as i64),
        (Val::Int(i), Type::Bool) => Val::Bool(i != 0),
        (Val::Bool(_) | Val::Int(_), Type::Str | Type::Bin) => {
            let i = match v {
                Val::Bool(b) => b as i64,
                Val::Int(i) => i,
                _ => 0,
            };
            s.cur.clear();
            if to == Type::Str {
                let _ = write!(s.cur, "{i}");
                Val::Str
            } else {
                // HAProxy's c_int2bin: 8 bytes, network order.
                s.cur.extend_from_slice(&i.to_be_bytes());
                Val::Bin
            }
        }
        (Val::Int(i), Type::Ip) => Val::Ip(IpAddr::V4((i as u32).into())),
        (Val::Ip(ip), Type::Int) => match ip {
            IpAddr::V4(a) => Val::Int(u32::from(a) as i64),
            IpAddr::V6(_) => return None,
        },
        (Val::Ip(ip), Type::Str) => {
            s.cur.clear();
            let _ = write!(s.cur, "{ip}");
            Val::Str
        }
        (Val::Ip(ip), Type::Bin) => {
            s.cur.clear();
            match ip {
                IpAddr::V4(a) => s.cur.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => s.cur.extend_from_slice(&a.octets()),
            }
            Val::Bin
        }
        // HAProxy's c_bin2str: a binary value ends at its first NUL.
        (Val::Bin, Type::Str) => {
            if let Some(i) = s.cur.iter().position(|&c| c == 0) {
                s.cur.truncate(i);
            }
            Val::Str
        }
        (Val::Str | Val::Meth, Type::Str) => Val::Str,
        (Val::Str | Val::Bin | Val::Meth, Type::Bin) => Val::Bin,
        (Val::Str, Type::Meth) => Val::Meth,
        (Val::Str, Type::Int) => Val::Int(str_to_int(&s.cur)?),
        (Val::Str, Type::Bool) => Val::Bool(str_to_int(&s.cur)? != 0),
        (Val::Str, Type::Ip) => Val::Ip(str_to_addr(&s.cur)?),
        _ => return None,
    })
}

/// HAProxy's `buf2ip`: four dotted decimal octets (leading zeros
/// allowed) at the start of `v`, up to the first byte that is neither a
/// digit nor a dot; the address and where it ended.
pub(crate) fn ipv4_prefix(v: &[u8]) -> Option<(IpAddr, usize)> {
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
    (n == 4).then(|| (IpAddr::from(oct.map(|o| o as u8)), end))
}

/// A string cast to an address as HAProxy 2.6 casts it (`c_str2addr`):
/// an IPv4 address at its start, whatever follows (`10.0.0.1:80` is
/// 10.0.0.1: `buf2ip`), else the whole string as an IPv6 address
/// (`inet_pton`, at most 46 bytes), else none.
pub fn str_to_addr(v: &[u8]) -> Option<IpAddr> {
    if let Some((ip, _)) = ipv4_prefix(v) {
        return Some(ip);
    }
    if v.len() > 46 {
        return None;
    }
    std::str::from_utf8(v)
        .ok()?
        .parse::<std::net::Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

/// The path (with query) HAProxy 2.6's http_parse_path finds in a
/// request target: the target itself when it starts with `/`; after
/// `scheme://` and the authority (up to the first `/`) otherwise, none
/// when there is no scheme, nothing after the authority, or for `*`.
pub(crate) fn target_path(t: &[u8]) -> &[u8] {
    match t.first() {
        None | Some(b'*') => b"",
        Some(b'/') => t,
        // The usual absolute URI (an HTTP/2 request's, as HAProxy writes
        // it): the scheme known at once, the authority's end found a word
        // at a time.
        Some(b'h') if t.starts_with(b"http://") => after_authority(&t[7..]),
        Some(b'h') if t.starts_with(b"https://") => after_authority(&t[8..]),
        Some(c) if c.is_ascii_alphabetic() => {
            let n = t[1..]
                .iter()
                .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))
                .map_or(t.len(), |i| i + 1);
            match t[n..].strip_prefix(b"://") {
                Some(rest) => rest
                    .iter()
                    .position(|&c| c == b'/')
                    .map_or(b"", |i| &rest[i..]),
                None => b"",
            }
        }
        Some(_) => b"",
    }
}

/// What follows the authority at the start of `rest` (from its first
/// `/`), empty when there is no `/`.
fn after_authority(rest: &[u8]) -> &[u8] {
    rest.get(find_byte(rest, b'/')..).unwrap_or_default()
}

/// The index of the first `b` in `hay`, else its length: eight bytes a
/// step (the usual authority, `host:port`, is one or two steps).
pub(crate) fn find_byte(hay: &[u8], b: u8) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pat = LO.wrapping_mul(u64::from(b));
    let mut chunks = hay.chunks_exact(8);
    let mut at = 0;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let x = u64::from_le_bytes(w) ^ pat;
        // A zero byte of `x` is a `b` in the chunk; the lowest one set
        // is exact (bytes above a match may be flagged falsely, never
        // below it).
        let found = x.wrapping_sub(LO) & !x & HI;
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + chunks
        .remainder()
        .iter()
        .position(|&c| c == b)
        .unwrap_or(chunks.remainder().len())
}

/// HAProxy's string-to-integer cast (`c_str2int`, `read_int64`): an
/// optional `-` or `+`, then the leading digits (none gives 0: `abc` is
/// 0, `12ab` 12), clamped to the 64-bit range; only an empty string does
/// not convert.
pub fn str_to_int(b: &[u8]) -> Option<i64> {
    if b.is_empty() {
        return None;
    }
    let (neg, d) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let mut v: u64 = 0;
    for &c in d.iter().take_while(|c| c.is_ascii_digit()) {
        v = v.saturating_mul(10).saturating_add(u64::from(c - b'0'));
    }
    Some(if neg {
        0i64.checked_sub_unsigned(v).unwrap_or(i64::MIN)
    } else {
        i64::try_from(v).unwrap_or(i64::MAX)
    })
}

/// HAProxy's `strl2ic`, the integer of `cook_val` and `hdr_val`: digits read in a
/// 32-bit integer after an optional `-`, up to the first byte above `9`;
/// a byte below `0` is not refused but counted as its (negative) distance
/// from `0` (`"q"` gives -14), and a value with no digit gives 0.
pub fn strl2ic(b: &[u8]) -> i64 {
    let mut i: i32 = 0;
    let (neg, d) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        _ => (false, b),
    };
    for &c in d {
        let j = i32::from(c) - i32::from(b'0');
        if j > 9 {
            break;
        }
        let k = i.wrapping_mul(10);
        i = if neg {
            k.wrapping_sub(j)
        } else {
            k.wrapping_add(j)
        };
    }
    i64::from(i)
}

/// Writes a value as text (what a log-format string shows: HAProxy casts
/// it to a string, so a binary value stops at its first NUL).
pub fn write_text(v: Val, s: &Scratch, out: &mut Vec<u8>) {
    use std::io::Write;
    match v {
        Val::Bool(b) => out.push(if b { b'1' } else { b'0' }),
        Val::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Val::Ip(ip) => {
            let _ = write!(out, "{ip}");
        }
        Val::Bin => {
            let end = s.cur.iter().position(|&c| c == 0).unwrap_or(s.cur.len());
            out.extend_from_slice(&s.cur[..end]);
        }
        Val::Str | Val::Meth => out.extend_from_slice(&s.cur),
    }
}

/// A compiled expression: a fetch and its converters.
#[derive(Clone, Debug)]
pub struct Expr {
    fetch: fetch::Fetch,
    convs: Vec<conv::Conv>,
    /// The type the last step produces.
    out: Type,
    /// As written, for messages and equality.
    src: String,
}

impl PartialEq for Expr {
    fn eq(&self, o: &Expr) -> bool {
        self.src == o.src
    }
}
impl Eq for Expr {}

impl Expr {
    /// Parses and checks `fetch[(args)][,conv[(args)]]...`.
    pub fn parse(text: &str, scope: Scope) -> Result<Expr, String> {
        let mut p = Parser::new(text);
        let e = p.expr(scope)?;
        if p.pos < text.len() {
            return Err(format!(
                "unexpected '{}' after sample expression '{}'",
                &text[p.pos..],
                &text[..p.pos]
            ));
        }
        claim_raw(text);
        Ok(e)
    }

    /// Which message the expression's fetch reads: `Some(false)` the
    /// request, `Some(true)` the response, `None` neither.
    pub fn reads_response(&self) -> Option<bool> {
        self.fetch.reads_response()
    }

    /// Whether the expression can be evaluated without a connection (see
    /// `global set-var`): its fetch is context free and no converter reads
    /// a stick table.
    pub fn context_free(&self) -> bool {
        self.fetch.context_free() && !self.convs.iter().any(|c| matches!(c, conv::Conv::Stk(_)))
    }

    /// Whether the expression gives the same value anywhere and at any
    /// time: a literal fetch (`str()`, `int()`, `bin()`, `ipv4()`,
    /// `bool()`) or `env()`, with no converter.
    pub fn constant(&self) -> bool {
        self.convs.is_empty() && self.fetch.literal()
    }

    /// The expression's value as text (HAProxy's conversion to a
    /// string); `None` when the sample does not exist.
    pub fn eval_text(&self, ctx: &Ctx<'_>) -> Option<Vec<u8>> {
        let mut s = Scratch::default();
        let v = self.eval(ctx, &mut s)?;
        let mut out = Vec::new();
        write_text(v, &s, &mut out);
        Some(out)
    }

    /// The value of a [`Expr::constant`] expression as text, evaluated
    /// without a connection.
    pub fn constant_text(&self) -> Option<Vec<u8>> {
        self.eval_text(&Ctx::detached(&|| None, None))
    }

    /// The expression's fetch when it is a stick-table fetch alone (no
    /// converter): its one value is read without the sample machinery.
    pub fn stk_alone(&self) -> Option<&stk::StkFetch> {
        match (&self.fetch, &self.convs[..]) {
            (fetch::Fetch::Stk(k), []) => Some(k),
            _ => None,
        }
    }

    /// Whether the expression is `src` alone (no converter): a table key
    /// is then made from the address without a sample (see
    /// `stick::track_key`).
    pub fn is_src(&self) -> bool {
        matches!(self.fetch, fetch::Fetch::Src) && self.convs.is_empty()
    }

    /// The type the expression produces.
    pub fn out_type(&self) -> Type {
        self.out
    }

    /// Whether its type is known only at run time: a variable read as is
    /// (converters that keep their input's type after it), HAProxy's
    /// `SMP_T_ANY`, which any match method may read.
    pub fn any_type(&self) -> bool {
        matches!(self.fetch, fetch::Fetch::Var(..)) && self.convs.iter().all(|c| c.keeps_type())
    }

    /// Whether an ACL on it may leave out `-m`: HAProxy picks a match
    /// by the type it produces for booleans, integers, addresses and
    /// strings; a binary, a method, or a variable's value read as is
    /// (its type known only at run time) needs one (acl.c).
    pub fn has_default_match(&self) -> bool {
        let any = self.convs.iter().rev().find(|c| !c.keeps_type());
        if any.is_none() && matches!(self.fetch, fetch::Fetch::Var(..)) {
            return false;
        }
        matches!(self.out, Type::Bool | Type::Int | Type::Ip | Type::Str)
    }

    /// What the expression's fetch reads (converters read nothing more).
    pub fn layer(&self) -> Layer {
        self.fetch.layer()
    }

    pub fn text(&self) -> &str {
        &self.src
    }

    /// Evaluates the expression; `None` when the fetch finds nothing or a
    /// converter fails (HAProxy: the sample does not exist).
    pub fn eval(&self, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
        let mut v = self.fetch.eval(ctx, s)?;
        for c in &self.convs {
            v = c.apply(v, ctx, s)?;
        }
        Some(v)
    }

    /// Evaluates the expression as an integer (HAProxy's
    /// sample_fetch_as_type to SINT).
    pub fn eval_int(&self, ctx: &Ctx<'_>) -> Option<i64> {
        with_scratch(|s| match cast(self.eval(ctx, s)?, Type::Int, s)? {
            Val::Int(i) => Some(i),
            _ => None,
        })
    }

    /// Evaluates and appends the value as text; returns whether a value
    /// existed.
    pub fn render(&self, ctx: &Ctx<'_>, out: &mut Vec<u8>) -> bool {
        with_scratch(|s| match self.eval(ctx, s) {
            Some(v) => {
                write_text(v, s, out);
                true
            }
            None => false,
        })
    }

    /// For ACLs: calls `f` on each value the fetch yields (all comma
    /// separated values of every occurrence for header fetches, as HAProxy
    /// does in an ACL), each through the converters (HAProxy's
    /// `acl_exec_cond` runs the whole expression again for every value
    /// while the fetch says more follow); stops at the first `true`. A
    /// value a converter fails on ends the iteration without a match, as
    /// HAProxy then leaves the expression (`acl_exec_cond`: a failed
    /// `sample_process` goes to the ACL's next expression).
    pub fn any(&self, ctx: &Ctx<'_>, f: &mut dyn FnMut(Val, &Scratch) -> bool) -> bool {
        if let Some(k) = self.stk_alone() {
            // One integer or boolean, no bytes (no scratch buffer to
            // borrow; an empty one allocates nothing).
            return k.eval(ctx).is_some_and(|v| f(v, &Scratch::default()));
        }
        with_scratch(|s| {
            let convs = &self.convs;
            let mut failed = false;
            let each = self.fetch.each(ctx, s, &mut |mut v, s| {
                for c in convs {
                    match c.apply(v, ctx, s) {
                        Some(x) => v = x,
                        None => {
                            failed = true;
                            return true;
                        }
                    }
                }
                f(v, s)
            });
            if let Some(r) = each {
                return r && !failed;
            }
            match self.eval(ctx, s) {
                Some(v) => f(v, s),
                None => false,
            }
        })
    }
}

/// A cursor over an expression's text.
pub(crate) struct Parser<'t> {
    pub text: &'t str,
    pub pos: usize,
}

impl<'t> Parser<'t> {
    pub fn new(text: &'t str) -> Parser<'t> {
        Parser { text, pos: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    /// A keyword: letters, digits, `_`, `.`, `-`, `+` (`base32+src`).
    fn name(&mut self) -> &'t str {
        let b = self.text.as_bytes();
        let start = self.pos;
        while self.pos < b.len()
            && (b[self.pos].is_ascii_alphanumeric()
                || matches!(b[self.pos], b'_' | b'.' | b'-' | b'+'))
        {
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    /// `(a,b,...)` if present, read as HAProxy 2.6's make_arg_list: an
    /// argument ends at a `,` or `)` outside quotes (a `(` is an ordinary
    /// byte: parentheses do not nest, so `regsub((a),b)` ends its list
    /// after `(a`); `"` and `'` group text (a `'` inside `"` and the
    /// reverse are literal); outside single quotes `\` gives the next
    /// byte for `\`, space, `"` and `'`, a CR, LF or tab for `r`, `n`,
    /// `t`, and is kept as is before any other byte (which keeps its own
    /// meaning: `\,` still ends the argument).
    fn args(&mut self) -> Result<Vec<String>, String> {
        if self.peek() != Some(b'(') {
            return Ok(Vec::new());
        }
        self.pos += 1;
        let b = self.text.as_bytes();
        let mut out = Vec::new();
        let mut cur = Vec::new();
        let (mut squote, mut dquote) = (false, false);
        loop {
            let Some(&c) = b.get(self.pos) else {
                return Err(format!("expected ')' in '{}'", self.text));
            };
            self.pos += 1;
            match c {
                b'"' if !squote => dquote = !dquote,
                b'\'' if !dquote => squote = !squote,
                b'\\' if !squote => match b.get(self.pos) {
                    Some(&n @ (b'\\' | b' ' | b'"' | b'\'')) => {
                        cur.push(n);
                        self.pos += 1;
                    }
                    Some(&n @ (b'r' | b'n' | b't')) => {
                        cur.push(match n {
                            b'r' => b'\r',
                            b'n' => b'\n',
                            _ => b'\t',
                        });
                        self.pos += 1;
                    }
                    _ => cur.push(c),
                },
                b')' if !squote && !dquote => {
                    out.push(String::from_utf8_lossy(&cur).into_owned());
                    break;
                }
                b',' if !squote && !dquote => {
                    out.push(String::from_utf8_lossy(&std::mem::take(&mut cur)).into_owned());
                }
                _ => cur.push(c),
            }
        }
        // `f()` has no argument.
        if out.len() == 1 && out[0].is_empty() {
            out.clear();
        }
        Ok(out)
    }

    /// An expression, up to the end of the text or a character that
    /// cannot continue it (`]` in a log-format string).
    pub fn expr(&mut self, scope: Scope) -> Result<Expr, String> {
        let start = self.pos;
        let name = self.name();
        if name.is_empty() {
            return Err(format!("missing fetch name in '{}'", self.text));
        }
        let empty_parens = self.text[self.pos..].starts_with("()");
        let mut args = self.args()?;
        // HAProxy reads `hdr()` as one empty name (every header), `hdr`
        // as no name (nothing): see `fetch::parse`'s `hdr_name`.
        // So does `req.hdr_names()`: an empty delimiter (a NUL).
        if empty_parens && (fetch::Fetch::is_header_fetch(name) || name.ends_with(".hdr_names")) {
            args.push(String::new());
        }
        // Bytes that are not UTF-8 are read as bytes by str() alone.
        let raw = |args: &[String], what: &str| {
            match args.iter().any(|a| crate::rawword::has_raw(a)) {
            true => Err(format!(
                "bytes that are not UTF-8 (\\xHH) in the arguments of {what} are not supported (only in str() and log-format text)"
            )),
            false => Ok(()),
        }
        };
        if name != "str" {
            raw(&args, &format!("'{name}'"))?;
        }
        let fetch = fetch::Fetch::compile(name, &args, scope)?;
        let mut ty = fetch.out_type();
        let mut convs = Vec::new();
        while self.peek() == Some(b',') {
            self.pos += 1;
            let cname = self.name();
            if cname.is_empty() {
                return Err(format!("missing converter name in '{}'", self.text));
            }
            let cargs = self.args()?;
            raw(&cargs, &format!("'{cname}'"))?;
            let c = conv::Conv::compile(cname, &cargs)?;
            if !can_cast(ty, c.in_type()) {
                return Err(format!(
                    "converter '{cname}' cannot be applied to a {} sample",
                    type_name(ty)
                ));
            }
            ty = c.out_type(ty);
            convs.push(c);
        }
        Ok(Expr {
            fetch,
            convs,
            out: ty,
            src: self.text[start..self.pos].to_string(),
        })
    }
}

pub fn type_name(t: Type) -> &'static str {
    match t {
        Type::Bool => "boolean",
        Type::Int => "integer",
        Type::Ip => "address",
        Type::Str => "string",
        Type::Bin => "binary",
        Type::Meth => "method",
    }
}

/// Calls `f` on each (name, value) field line of the request or the
/// response, in order; `f` returns `true` to stop. `false` when the
/// message is not there.
pub(crate) fn each_field(
    ctx: &Ctx<'_>,
    response: bool,
    f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> bool {
    if response {
        match ctx.res {
            Some(Res::H1 { buf, head }) => {
                for h in &head.headers {
                    if f(h.name.get(buf), h.value.get(buf)) {
                        break;
                    }
                }
            }
            Some(Res::List { hdrs, .. }) => {
                for (n, v) in hdrs {
                    // A value a rule set keeps its spaces when sent; read
                    // back, it is trimmed as HAProxy's http_find_header
                    // trims (a parsed head's values already are).
                    if f(n, crate::http1::trim_ows(v)) {
                        break;
                    }
                }
            }
            None => return false,
        }
    } else {
        let Some(r) = ctx.req else {
            return false;
        };
        for h in &r.head.headers {
            if f(h.name.get(r.buf), h.value.get(r.buf)) {
                break;
            }
        }
    }
    true
}

/// The comma-separated values of a field value, as HAProxy's `hdr()`
/// sees them (`http_find_hdr_value_end`): a comma inside a quoted string
/// (`"a,b"`, with `\` escaping the next character there) does not split;
/// each value loses its leading and trailing spaces and tabs. A line
/// always yields at least one value, possibly empty.
pub fn split_values(v: &[u8]) -> SplitValues<'_> {
    SplitValues {
        v,
        pos: 0,
        done: false,
        trim: true,
    }
}

/// [`split_values`] with each value's spaces kept (what lies between two
/// separators), for edits that keep the values they leave alone as they
/// were.
pub fn split_values_untrimmed(v: &[u8]) -> SplitValues<'_> {
    SplitValues {
        trim: false,
        ..split_values(v)
    }
}

/// The iterator of [`split_values`].
pub struct SplitValues<'a> {
    v: &'a [u8],
    pos: usize,
    done: bool,
    trim: bool,
}

impl<'a> Iterator for SplitValues<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.done {
            return None;
        }
        let (mut quoted, mut pair) = (false, false);
        let mut end = self.pos;
        while end < self.v.len() {
            let c = self.v[end];
            if pair {
                pair = false;
            } else if quoted {
                match c {
                    b'\\' => pair = true,
                    b'"' => quoted = false,
                    _ => {}
                }
            } else if c == b'"' {
                quoted = true;
            } else if c == b',' {
                break;
            }
            end += 1;
        }
        let val = &self.v[self.pos..end];
        if end >= self.v.len() {
            self.done = true;
        } else {
            self.pos = end + 1;
        }
        if !self.trim {
            return Some(val);
        }
        let lws = |c: &u8| matches!(c, b' ' | b'\t');
        let a = val.iter().position(|c| !lws(c)).unwrap_or(val.len());
        let b = val.iter().rposition(|c| !lws(c)).map_or(a, |i| i + 1);
        Some(&val[a..b])
    }
}

/// Where the `debug` converter's lines go when it names a ring: the ring
/// module sets it when it installs the rings (it sits above this one).
static RING_WRITER: std::sync::OnceLock<fn(&str, &[u8])> = std::sync::OnceLock::new();

/// Sets the writer of [`ring_write`] (once; later calls change nothing).
pub fn set_ring_writer(f: fn(&str, &[u8])) {
    let _ = RING_WRITER.set(f);
}

/// Writes `line` to the ring `name` (nothing without such a ring).
pub(crate) fn ring_write(name: &str, line: &[u8]) {
    if let Some(f) = RING_WRITER.get() {
        f(name, line);
    }
}
