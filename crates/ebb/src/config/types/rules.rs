//! ACLs and conditions (fetches, match methods, patterns, `if`/`unless`
//! terms), and the HTTP rules they guard: `use_backend`, `http-request`
//! and `http-response` actions, `return`, `redirect`, header edits.

use std::path::PathBuf;

use crate::loc::Loc;
use crate::net::IpNet;

use super::tcp::AddrField;

/// What an ACL test fetches from the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetch {
    /// The path (no query string).
    Path,
    /// The whole request target as sent.
    Url,
    Method,
    /// The client address.
    Src,
    /// Values of a header (name in lower case), each comma-separated value
    /// tested on its own, as HAProxy's `hdr()` does.
    Hdr(String),
    /// `req.ver`: "1.0", "1.1".
    ReqVer,
    /// `always_true` / `always_false` (and the TRUE / FALSE predefined ACLs).
    Always(bool),
    /// Any other sample expression (fetch and converters), matched by the
    /// type it produces.
    Sample(Box<crate::sample::Expr>),
}

/// How patterns are compared (HAProxy's `-m` methods).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchMethod {
    /// Exact string.
    Str,
    /// Prefix.
    Beg,
    /// Suffix.
    End,
    /// Substring.
    Sub,
    /// A slash-delimited segment.
    Dir,
    /// A dot- or slash-delimited domain component.
    Dom,
    /// Regular expression (pattern kept as a string; compiled by the server).
    Reg,
    /// The fetch exists (no pattern).
    Found,
    /// IP address or network (for `src`).
    Ip,
    /// Integer ranges (`-m int`; `eq|ne|lt|le|gt|ge N`, `A:B`).
    Int,
    /// Hex-string patterns equal to the sample's bytes (`-m bin`).
    Bin,
    /// The sample as a boolean (`-m bool`): true when non-zero.
    Bool,
    /// The length of the sample as a string in integer ranges (`-m len`,
    /// the `_len` ACLs; patterns as `-m int`).
    Len,
}

impl MatchMethod {
    /// How this method reads a pattern file (`-f`); `None` for the
    /// methods that take no pattern.
    pub fn file_how(self) -> Option<crate::sample::patref::How> {
        use crate::sample::patref::How;
        Some(match self {
            MatchMethod::Str => How::Str,
            MatchMethod::Beg => How::Beg,
            MatchMethod::End => How::End,
            MatchMethod::Sub => How::Sub,
            MatchMethod::Dir => How::Dir,
            MatchMethod::Dom => How::Dom,
            MatchMethod::Reg => How::Reg,
            MatchMethod::Ip => How::Ip,
            MatchMethod::Int | MatchMethod::Len => How::Int,
            MatchMethod::Found | MatchMethod::Bool | MatchMethod::Bin => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    Str(String),
    /// `-m bin`: the bytes of a hex string.
    Bin(Vec<u8>),
    Net(IpNet),
    /// An inclusive integer range.
    Int(i64, i64),
}

/// One ACL test: a fetch, a match method and patterns (ORed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclTest {
    pub fetch: Fetch,
    pub method: MatchMethod,
    /// `-i`.
    pub ignore_case: bool,
    pub patterns: Vec<Pattern>,
    /// `-f FILE`: the patterns of these files too.
    pub files: Vec<crate::sample::patref::PatFile>,
    /// The patterns' text as HAProxy keeps it (`gt 2` is `3:`).
    pub keys: Vec<String>,
    /// The reference of the patterns written on the line (HAProxy's, which
    /// `show acl` lists and `add acl #ID` changes); once the CLI changed
    /// it, its entries are the patterns.
    pub inline: Option<crate::sample::patref::PatFile>,
    pub loc: Loc,
}

/// A named ACL: true when any of its tests matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    pub name: String,
    pub tests: Vec<AclTest>,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AclRef {
    /// A named ACL of the proxy: `index` into `Proxy::acls`.
    Named { name: String, index: usize },
    /// An anonymous `{ ... }` ACL or a predefined one (TRUE, METH_GET, ...).
    Inline(AclTest),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CondTerm {
    /// `!` before the ACL.
    pub negate: bool,
    pub acl: AclRef,
}

/// `if|unless COND`: `terms` is an OR of ANDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `unless`.
    pub unless: bool,
    pub terms: Vec<Vec<CondTerm>>,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UseBackend {
    /// The name as written; a log-format string when it holds `%[`
    /// (`dynamic`), evaluated per request.
    pub backend: String,
    pub dynamic: Option<crate::sample::LogFormat>,
    pub cond: Option<Condition>,
    pub loc: Loc,
}

/// The body of an `http-request return`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReturnBody {
    None,
    String(String),
    /// `lf-string`: a log-format string, evaluated per request.
    LfString(crate::sample::LogFormat),
    /// `file F`: read at parse time.
    File {
        path: PathBuf,
        content: Vec<u8>,
    },
    /// `errorfile F` or `errorfiles NAME`: a whole HTTP answer sent as
    /// written (empty: the connection closes without one); `None` for
    /// `default-errorfiles` (or a section without that status): the
    /// proxy's own error answer for the status.
    Errorfile(Option<Vec<u8>>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReturnAction {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: ReturnBody,
    /// Extra headers, names in the case written, values log-format
    /// strings compiled once (with the rule: a map they read is the one
    /// its configuration installs).
    pub headers: Vec<(String, crate::sample::LogFormat)>,
    /// An `http-request deny` with an answer of its own: counted as
    /// denied, and the connection closes after it.
    pub deny: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedirectKind {
    Location,
    Prefix,
    Scheme,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    pub kind: RedirectKind,
    pub target: String,
    /// The target as a log-format string, when it holds `%` (evaluated
    /// for each request, as HAProxy does).
    pub fmt: Option<crate::sample::LogFormat>,
    /// 301, 302 (default), 303, 307 or 308.
    pub code: u16,
    pub drop_query: bool,
    pub append_slash: bool,
    /// `set-cookie NAME[=VALUE]` or `clear-cookie NAME[=]`: the
    /// `Set-Cookie` value of the answer, as HAProxy 2.6 makes it
    /// (`NAME=VALUE; path=/;`, or `NAME=; path=/; Max-Age=0;`).
    pub cookie: Option<String>,
    /// A `redirect` line (not `http-request redirect`): HAProxy 2.6 runs
    /// those after every `http-request` rule of their proxy, wherever
    /// they stand, so they stay at the end of its list.
    pub late: bool,
    /// `ignore-empty`: a `location` whose log-format gives nothing skips
    /// the rule (HAProxy 2.6; for mass redirects through a map).
    pub ignore_empty: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    PrometheusExporter,
}

/// `http-request normalize-uri NORMALIZER` (HAProxy 2.6, experimental).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Normalizer {
    PathMergeSlashes,
    PathStripDot,
    /// `path-strip-dotdot [full]`.
    PathStripDotdot {
        full: bool,
    },
    QuerySortByName,
    /// `percent-to-uppercase [strict]`.
    PercentToUppercase {
        strict: bool,
    },
    /// `percent-decode-unreserved [strict]`.
    PercentDecodeUnreserved {
        strict: bool,
    },
    FragmentStrip,
    FragmentEncode,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpRequestAction {
    Return(Box<ReturnAction>),
    Redirect(Redirect),
    /// `normalize-uri NORMALIZER`: the target's path and query normalized
    /// (module `rewrite::normalize`); a `strict` one meeting a bad `%`
    /// answers 400.
    NormalizeUri(Normalizer),
    /// `deny [deny_status N]` (403 by default).
    Deny {
        status: u16,
    },
    Allow,
    /// `set-header`, `add-header`, `del-header`.
    Header(HeaderEdit),
    /// `early-hint NAME FMT`: a field of the `103 Early Hints` answer the
    /// client gets before the final one (HTTP/1.1 and HTTP/2 requests
    /// only); adjacent `early-hint` rules make one 103 (`rewrite`). Kept
    /// as a `set-header` edit: its name as written, its value a log-format.
    EarlyHint(HeaderEdit),
    /// `set-var(VAR) EXPR`, `set-var-fmt(VAR) FMT`, `unset-var(VAR)`.
    Var(crate::sample::VarAction),
    UseService(Service),
    /// `track-sc0|1|2 KEY [table T]`: `n` is the counter.
    TrackSc {
        n: usize,
        key: Box<crate::sample::Expr>,
        table: Option<String>,
    },
    /// `sc-inc-gpc0(N)`.
    ScIncGpc0(usize),
    /// `sc-inc-gpc1(N)`.
    ScIncGpc1(usize),
    /// `sc-set-gpt0(N) INT|EXPR`.
    ScSetGpt0(usize, Box<crate::sample::Expr>),
    /// `sc-inc-gpc(I,N)`: element I of the gpc/gpc_rate arrays.
    ScIncGpc {
        idx: usize,
        n: usize,
    },
    /// `sc-set-gpt(I,N) INT|EXPR`: element I of the gpt array.
    ScSetGpt {
        idx: usize,
        n: usize,
        expr: Box<crate::sample::Expr>,
    },
    /// `reject`: the connection closes at once, no answer (a denied
    /// request, logged `PR`).
    Reject,
    /// `set-log-level LEVEL|silent`: the exchange's log line goes at that
    /// syslog level (0 emerg .. 7 debug), or not at all (`None`).
    SetLogLevel(Option<u8>),
    /// `silent-drop`: as `reject`, and the client gets no FIN: the socket
    /// is reset with a time-to-live of 1 (HAProxy's trick when TCP_REPAIR
    /// is not allowed), so a client beyond a router never hears of it.
    SilentDrop,
    /// `tarpit [deny_status N]` (500 by default): the answer waits
    /// `timeout tarpit`.
    Tarpit {
        status: u16,
    },
    /// `set-path`, `replace-header`, `del-header -m` ... (executed by the `rewrite` module).
    Rewrite(crate::config::rewrite::Rewrite),
    /// `capture SAMPLE len N|id N`.
    Capture(crate::sample::logline::CaptureAction),
    /// `cache-use NAME`.
    CacheUse(String),
    /// `set-dst EXPR` or `set-dst-port EXPR`: the stream's destination
    /// (where `option transparent` and a server without an address or
    /// port connect, what `dst` and `dst_port` give); `set-src EXPR` or
    /// `set-src-port EXPR`: its source (what `src`, the log line,
    /// `option forwardfor` and a PROXY header to the server give).
    SetAddr(AddrField, Box<crate::sample::Expr>),
    /// `wait-for-body time T [at-least N]`: the rules wait for the body.
    WaitForBody(WaitForBody),
    /// `auth [realm R]`: 401 asking for Basic credentials (realm: the
    /// rule's proxy's name by default).
    Auth {
        realm: Option<String>,
    },
    /// `set-timeout server|tunnel T|EXPR`: this exchange's timeout.
    SetTimeout {
        tunnel: bool,
        value: TimeoutValue,
    },
    /// `strict-mode on|off`: whether a failed rewrite of the rules that
    /// follow is an error (500) or ignored.
    StrictMode(bool),
    /// `disable-l7-retry`: the exchange is not retried after a failure
    /// other than a failed connect, whatever `retry-on` says.
    DisableL7Retry,
    /// `set-priority-class EXPR` (`offset`: false) or
    /// `set-priority-offset EXPR`: where the stream waits in a queue
    /// (`http-request`, `tcp-request content`; see `backend::Prio`).
    SetPriority {
        offset: bool,
        expr: Box<crate::sample::Expr>,
    },
    /// `set-mark MARK`, `set-tos TOS` (also `tcp-request` and `tcp-response`
    /// rules): an option of the client connection's socket.
    SockOpt(FcSockOpt),
    /// `do-resolve(VAR,RESOLVERS[,ipv4|ipv6]) EXPR` (also `tcp-request
    /// content`): the name EXPR gives resolved by a `resolvers` section,
    /// the rules waiting for the answer (see `resolvers::lookup`).
    DoResolve(Box<DoResolve>),
    /// `wait-for-handshake`: HAProxy holds a request that came as TLS
    /// early data until the handshake completes; ebb takes no early data
    /// (`allow-0rtt` is refused), so every request comes after it and the
    /// rule lets it through, as HAProxy 2.6 does on a connection without
    /// early data.
    WaitForHandshake,
    /// `add-acl(FILE) KEY`, `del-acl(FILE) KEY`, `set-map(FILE) KEY VALUE`,
    /// `del-map(FILE) KEY`: a change to a pattern file, as the CLI's.
    PatEdit(crate::sample::patref::PatEdit),
}

/// `do-resolve(VAR,RESOLVERS[,ipv4|ipv6]) EXPR`: VAR gets the address
/// (of the preferred family, IPv6 unless `ipv4`, else of the other) that
/// the section RESOLVERS finds for the name EXPR gives; nothing when it
/// finds none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoResolve {
    pub var: crate::sample::VarRef,
    pub resolvers: String,
    pub prefer_v4: bool,
    pub expr: crate::sample::Expr,
}

/// The value of `set-timeout`: milliseconds, or an expression giving them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeoutValue {
    Ms(u32),
    Expr(Box<crate::sample::Expr>),
}

/// `http-request|http-response wait-for-body time T [at-least N]`: wait
/// at most `time_ms` for the whole body, or its first `at_least` bytes
/// (0: all of it), or a full buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitForBody {
    pub time_ms: u32,
    pub at_least: u64,
}

/// What a header edit does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditOp {
    /// Remove every field of that name, then add one.
    Set,
    Add,
    Del,
}

/// `set-header|add-header|del-header NAME [FMT]`, one type for
/// `http-request` and `http-response` rules; the value is a log-format
/// string compiled for where the rule runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderEdit {
    pub op: EditOp,
    /// As written.
    pub name: String,
    /// Empty for `del-header`.
    pub value: crate::sample::LogFormat,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequestRule {
    pub action: HttpRequestAction,
    pub cond: Option<Condition>,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpResponseAction {
    Header(HeaderEdit),
    /// `set-log-level LEVEL|silent` (see the request action).
    SetLogLevel(Option<u8>),
    Var(crate::sample::VarAction),
    /// `set-status`, `replace-header`, `del-header -m` ... (executed by the `rewrite` module).
    Rewrite(crate::config::rewrite::Rewrite),
    /// `capture SAMPLE id N`.
    Capture(crate::sample::logline::CaptureAction),
    /// `cache-store NAME`.
    CacheStore(String),
    /// `allow`: the rest of this proxy's list (its defaults' rules and
    /// its own) is skipped; the next proxy's list still runs (HAProxy's
    /// HTTP_RULE_RES_STOP in `http_process_res_common`).
    Allow,
    /// `wait-for-body time T [at-least N]` (`http-response` only).
    WaitForBody(WaitForBody),
    /// `deny [deny_status N] [return options]` (`http-response` only):
    /// the server's answer is dropped, this one (502 by default) sent;
    /// the connection goes on when the exchange allows (HAProxy's).
    Deny(Box<ReturnAction>),
    /// `strict-mode on|off` (`http-response`, `http-after-response`).
    StrictMode(bool),
    /// `redirect location FMT [code N]...` (`http-response` only): the
    /// server's answer is replaced by a redirect (only `location` on
    /// responses, as HAProxy).
    Redirect(Redirect),
    /// `set-mark MARK`, `set-tos TOS` (`http-response` only).
    SockOpt(FcSockOpt),
    /// `add-acl`, `del-acl`, `set-map`, `del-map` (`http-response` only;
    /// see the request action).
    PatEdit(crate::sample::patref::PatEdit),
    /// `return [status N] ...` (`http-response` only): the server's answer
    /// is dropped and this one (200 by default) sent instead, as a local
    /// answer (`LH`, not counted as denied).
    Return(Box<ReturnAction>),
    /// `silent-drop` (`http-response` only): the client's connection is
    /// dropped without a word, as the request action's.
    SilentDrop,
    /// `track-sc0|1|2 KEY [table T]`, `sc-inc-gpc0(N)`, `sc-inc-gpc1(N)`,
    /// `sc-inc-gpc(I,N)`, `sc-set-gpt0(N) EXPR`, `sc-set-gpt(I,N) EXPR`
    /// (`http-response` only): the request actions of those names, their
    /// expressions read on the response.
    Stk(Box<HttpRequestAction>),
}

/// `set-mark MARK` or `set-tos TOS`: an option of the client connection's
/// socket, for the packets it sends from then on (HAProxy's
/// `conn_set_mark`/`conn_set_tos`): the netfilter mark (`SO_MARK`), or the
/// IPv4 TOS byte (`IP_TOS`; the IPv6 traffic class, `IPV6_TCLASS`, on an
/// IPv6 connection). An error (no privilege for a mark) changes nothing,
/// as in HAProxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FcSockOpt {
    Mark(u32),
    Tos(i32),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponseRule {
    pub action: HttpResponseAction,
    pub cond: Option<Condition>,
    pub loc: Loc,
}
