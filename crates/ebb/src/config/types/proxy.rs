//! A proxy section (`frontend`, `backend`, `listen`, `defaults`):
//! [`Proxy`] and what it holds besides binds, rules and servers: its mode,
//! timeouts, options, `compression`, `email-alert`, `errorfile` and
//! `http-errors`, the stats page, `balance` and `hash-type`, `retry-on`,
//! `http-reuse`, `use-server`.

use std::path::PathBuf;
use std::time::Duration;

use crate::loc::Loc;
use crate::net::{IpNet, TcpKa};

use super::bind::Bind;
use super::check::HttpCheck;
use super::log::ProxyLog;
use super::rules::{Acl, Condition, HttpRequestRule, HttpResponseRule, ReturnAction, UseBackend};
use super::server::{ServeFiles, Server, ServerOptions};
use super::tcp::{StickRule, TcpRequestRule};
use super::Spanned;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyKind {
    Frontend,
    Backend,
    Listen,
}

impl ProxyKind {
    /// HAProxy's name of the kind in its messages (`proxy_type_str`).
    pub fn type_str(self) -> &'static str {
        match self {
            ProxyKind::Listen => "proxy",
            k => k.name(),
        }
    }
    pub fn is_frontend(self) -> bool {
        matches!(self, ProxyKind::Frontend | ProxyKind::Listen)
    }
    pub fn is_backend(self) -> bool {
        matches!(self, ProxyKind::Backend | ProxyKind::Listen)
    }
    pub fn name(self) -> &'static str {
        match self {
            ProxyKind::Frontend => "frontend",
            ProxyKind::Backend => "backend",
            ProxyKind::Listen => "listen",
        }
    }
}

/// A backend's external checks: `option external-check` (the last of it,
/// `option httpchk`, `option tcp-check` and the protocol checks wins),
/// `external-check command CMD` and `external-check path PATH`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtCheck {
    /// Where `option external-check` is (when it is the check).
    pub enabled: Option<Loc>,
    /// The command and where it is written.
    pub command: Option<Spanned<String>>,
    /// `external-check path`: the command's `PATH` (HAProxy's default:
    /// empty).
    pub path: Option<Spanned<String>>,
}

/// A frontend, backend or listen section, with the `defaults` it inherited
/// already applied.
#[derive(Clone, Debug)]
pub struct Proxy {
    /// `monitor-uri`: the URI answered 200 (or 503 when a `monitor fail`
    /// condition holds) without rules, logs or backend.
    pub monitor_uri: Option<String>,
    /// `monitor fail if|unless COND`.
    pub monitor_fail: Vec<Condition>,
    /// HAProxy's warnings of rules placed after rules that run later
    /// ("a 'monitor fail' rule placed after an 'http-request' rule will
    /// still be processed before"), given at start.
    pub misplaced: Vec<String>,
    pub name: String,
    pub kind: ProxyKind,
    /// The section header line.
    pub loc: Loc,
    /// `maxconn` (frontends).
    pub maxconn: Option<u32>,
    /// `backlog N` (frontends): the listen queue of its binds that do not
    /// set their own.
    pub backlog: Option<u32>,
    /// `fullconn N` (backends): the backend's load at which its servers
    /// reach their `maxconn` (see `minconn`); unset, HAProxy's default.
    pub fullconn: Option<u32>,
    /// `max-keep-alive-queue N` (backends; -1, the default, is None): with
    /// `option prefer-last-server`, a client's next request keeps to its
    /// connection's server only if that server has a free slot or fewer
    /// than N streams queued; else it is balanced.
    pub max_keep_alive_queue: Option<u32>,
    /// `dynamic-cookie-key KEY` (for `cookie ... dynamic`).
    pub dynamic_cookie_key: Option<String>,
    /// `rate-limit sessions N` (frontends): most new sessions per second;
    /// 0 or unset, none.
    pub rate_limit_sessions: u32,
    /// `id N`: the proxy's numeric id, instead of the next free one.
    pub id: Option<Spanned<u32>>,
    /// `description TEXT`.
    pub description: Option<String>,
    /// `source ADDR[:PORT]` (backends): the local address of server
    /// connections.
    pub source: Option<Spanned<std::net::SocketAddr>>,
    pub timeouts: Timeouts,
    pub options: ProxyOptions,
    pub log: Vec<ProxyLog>,
    /// `bind` lines (frontends).
    pub binds: Vec<Bind>,
    /// Named ACLs; several `acl` lines with one name are ORed into one entry.
    pub acls: Vec<Acl>,
    pub http_request: Vec<HttpRequestRule>,
    pub http_response: Vec<HttpResponseRule>,
    /// `http-after-response` rules: run on every answer, ebb's own too.
    pub http_after_response: Vec<HttpResponseRule>,
    /// `log-format` (frontends; inherited from `defaults`).
    pub log_format: Option<Spanned<crate::sample::logline::LogLine>>,
    /// `log-format-sd`: the RFC 5424 structured data of this frontend's
    /// lines (frontends; inherited from `defaults`).
    pub log_format_sd: Option<Spanned<crate::sample::logline::LogLine>>,
    /// `error-log-format`: the format of connection-error lines (a failed
    /// TLS handshake, a bad PROXY header) (frontends; from `defaults`).
    pub error_log_format: Option<Spanned<crate::sample::logline::LogLine>>,
    /// `capture request|response header NAME len N` (frontends).
    pub captures: Vec<crate::sample::logline::CaptureHdr>,
    pub use_backends: Vec<UseBackend>,
    pub default_backend: Option<Spanned<String>>,
    /// `errorfile CODE FILE`, files already read; a later line for the same
    /// code replaces the earlier one.
    pub errorfiles: Vec<ErrorFile>,
    /// `http-error status N ...` answers evaluated per request (with a
    /// log-format body or field); the others become `errorfiles` entries.
    pub error_replies: Vec<(u16, ReturnAction)>,
    pub stats: Stats,
    // Backend side.
    pub balance: Balance,
    /// A `balance` line was given (here or in the defaults): HAProxy then
    /// ignores `dispatch` and refuses `option transparent`.
    pub balance_set: bool,
    /// `dispatch ADDR:PORT`: where a backend without servers sends its
    /// connections (host as written, port).
    pub dispatch: Option<Spanned<(String, u16)>>,
    /// `option transparent`: a backend without servers connects to the
    /// address the client connected to.
    pub transparent: Option<Loc>,
    /// `hash-type` and `hash-balance-factor`.
    pub hash_type: HashType,
    /// `retries N` (HAProxy's default: 3).
    pub retries: u32,
    /// `retry-on` (default `conn-failure`).
    pub retry_on: RetryOn,
    pub http_reuse: HttpReuse,
    /// `default-server` options, used as the base of each `server` below it.
    pub default_server: ServerOptions,
    pub servers: Vec<Server>,
    pub serve_files: Option<ServeFiles>,
    pub http_check: HttpCheck,
    /// `option tcp-check` and the `tcp-check` rules.
    pub tcp_check: crate::config::TcpCheck,
    /// `option external-check` and `external-check command|path`.
    pub ext_check: ExtCheck,
    /// `max-session-srv-conns N` (frontends): most idle server
    /// connections a client session keeps for itself (HAProxy's default:
    /// 5, `MAX_SRV_LIST`).
    pub max_session_srv_conns: Option<u32>,
    pub load_server_state: Option<Spanned<LoadServerState>>,
    /// `server-state-file-name [use-backend-name|FILE]`: the state file of
    /// `load-server-state-from-file local` (unset: the backend's name).
    pub server_state_file_name: Option<String>,
    /// `stick-table` (its name is the proxy's).
    pub stick_table: Option<Spanned<crate::table::TableDef>>,
    /// `stick on|match|store-request|store-response` rules, in order.
    pub stick_rules: Vec<StickRule>,
    /// `compression algo|type|offload`.
    pub compression: Compression,
    /// `filter compression` and `filter cache NAME` lines, in order.
    pub filters: Vec<FilterDecl>,
    /// `use-fcgi-app NAME` (or `filter fcgi-app NAME`): the FastCGI
    /// application of the backend's `proto fcgi` servers.
    pub fcgi_app: Option<Spanned<String>>,
    /// `mode http|tcp` (HAProxy's default: tcp; ebb's: http, which it
    /// served alone before, so configs without `mode` keep working).
    pub mode: ProxyMode,
    /// `tcp-request connection|content` rules, in order.
    pub tcp_request: Vec<TcpRequestRule>,
    /// `tcp-request inspect-delay`.
    pub inspect_delay: Option<Duration>,
    /// `tcp-response content` rules (their `when` is `Content`).
    pub tcp_response: Vec<TcpRequestRule>,
    /// `tcp-response inspect-delay`.
    pub res_inspect_delay: Option<Duration>,
    /// `cookie NAME ...` (backends): the persistence cookie.
    pub cookie: Option<crate::config::cookie::CookieCfg>,
    /// `force-persist` (true) / `ignore-persist` (false) rules, in order.
    pub persist_rules: Vec<(bool, Condition)>,
    /// `use-server NAME|FORMAT if|unless COND` rules, in order.
    pub use_server: Vec<UseServer>,
    /// `capture cookie NAME len N` (frontends).
    pub capture_cookie: Option<crate::config::cookie::CaptureCookie>,
    /// `unique-id-format FMT` and `unique-id-header NAME` (frontends).
    pub unique_id_format: Option<crate::sample::LogFormat>,
    pub unique_id_header: Option<String>,
    /// `http-send-name-header NAME` (backends): the field, lowercased, that
    /// names the server a request goes to.
    pub send_name_header: Option<String>,
    /// `log-tag TAG`: the syslog tag of the proxy's lines (else the
    /// global one).
    pub log_tag: Option<String>,
    /// `disabled` (where it was said; `enabled` clears it): the proxy is
    /// checked and not started.
    pub disabled: Option<Loc>,
    /// `email-alert ...`: mail on its servers' changes of state.
    pub email_alert: EmailAlert,
}

/// A proxy's `email-alert` settings (`mailers` sections: see
/// `config::mailers`). Usable once `targets` is filled, at the end of the
/// parse, when `mailers`, `from` and `to` are all there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmailAlert {
    /// Any `email-alert` line was read (here or in the defaults).
    pub set: bool,
    pub mailers: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    /// `myhostname` (else the host's name).
    pub myhostname: Option<String>,
    /// `level`, as a syslog number: alerts at this level or more urgent
    /// are sent (default 1, alert).
    pub level: u8,
    /// The section's `mailer` addresses, once resolved.
    pub targets: Vec<std::net::SocketAddr>,
    /// The section's `timeout mail`.
    pub timeout: std::time::Duration,
}

impl Default for EmailAlert {
    fn default() -> EmailAlert {
        EmailAlert {
            set: false,
            mailers: None,
            from: None,
            to: None,
            myhostname: None,
            level: 1,
            targets: Vec::new(),
            timeout: std::time::Duration::from_secs(10),
        }
    }
}

/// A `filter` line (HAProxy 2.6 configuration.txt sections 9.2 and 9.4):
/// it declares where a filter runs among the proxy's filters. ebb knows
/// the compression and the cache, which always run cache first (HAProxy
/// refuses the other order), so the lines change no behaviour; they are
/// checked as HAProxy checks them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterDecl {
    /// `None`: `filter compression`; `Some(NAME)`: `filter cache NAME`.
    pub cache: Option<String>,
    pub loc: Loc,
}

/// A proxy's `compression` lines (HAProxy's meaning: a backend's `algo`
/// and `type` lists win over its frontend's; `offload` in either holds).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compression {
    pub algos: Vec<crate::compress::Coding>,
    /// Lowercased type prefixes.
    pub types: Vec<String>,
    pub offload: bool,
    /// `compression minsize-res SIZE` (a later HAProxy's keyword; 2.6
    /// compresses any size, the default here too).
    pub minsize_res: Option<u64>,
    /// `compression algo-req NAME` (HAProxy 2.8+): the one coding a
    /// request body gets toward the server; the last line wins.
    pub algo_req: Option<crate::compress::Coding>,
    /// `compression type-req TYPE...` (HAProxy 2.8+), lowercased.
    pub types_req: Vec<String>,
    /// `compression direction request|response|both` (HAProxy 2.8+):
    /// (requests, responses); `None`: HAProxy's default, responses only.
    pub direction: Option<(bool, bool)>,
}

impl Compression {
    /// The directions this proxy compresses in, as HAProxy keeps them:
    /// a proxy with any `compression` line compresses responses unless
    /// `direction` says otherwise; one with none adds no direction.
    pub fn directions(&self) -> (bool, bool) {
        if *self == Compression::default() {
            return (false, false);
        }
        self.direction.unwrap_or((false, true))
    }
}

/// `mode http|tcp`; without a `mode` line a proxy is in `tcp`, as in
/// HAProxy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProxyMode {
    Http,
    #[default]
    Tcp,
}

impl Proxy {
    /// The named ACL, if declared in this proxy.
    pub fn acl(&self, name: &str) -> Option<&Acl> {
        self.acls.iter().find(|a| a.name == name)
    }
    /// The errorfile for that status, if any.
    pub fn errorfile(&self, status: u16) -> Option<&ErrorFile> {
        self.errorfiles.iter().find(|e| e.status == status)
    }
}

/// Timeouts; `None` means not set (HAProxy's meaning: no timeout, with a
/// warning; the server picks its own policy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeouts {
    pub client: Option<Duration>,
    pub server: Option<Duration>,
    pub connect: Option<Duration>,
    pub http_request: Option<Duration>,
    pub http_keep_alive: Option<Duration>,
    pub queue: Option<Duration>,
    pub tunnel: Option<Duration>,
    pub check: Option<Duration>,
    /// `timeout tarpit` (HAProxy: `timeout connect` when unset).
    pub tarpit: Option<Duration>,
}

/// How connections are handled after a response (`option http-keep-alive`,
/// `option http-server-close`, `option httpclose`; the last one set wins).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpConnMode {
    #[default]
    KeepAlive,
    ServerClose,
    Close,
}

/// `option forwardfor [except NET] [header NAME] [if-none]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardFor {
    pub except: Option<IpNet>,
    /// Lower case; `x-forwarded-for` by default.
    pub header: String,
    pub if_none: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyOptions {
    pub conn_mode: HttpConnMode,
    pub forwardfor: Option<ForwardFor>,
    /// `option originalto [except NET] [header NAME]` (`if_none` unused).
    pub originalto: Option<ForwardFor>,
    pub redispatch: bool,
    /// `option redispatch N`: redispatch on every Nth retry (N > 0), on
    /// the Nth retry before the end (N < 0; -1 the last), never on a retry
    /// count alone (0).
    pub redispatch_after: i32,
    /// `option persist`: a persistence cookie naming a down server still
    /// sends the request there.
    pub persist: bool,
    /// `option checkcache` (backends): a server's answer a shared cache
    /// could store that carries the server's `Set-Cookie` is refused
    /// (HAProxy 2.6's check in `http_process_res_common`).
    pub checkcache: bool,
    /// `option http-pretend-keepalive` (backends): a request to a server
    /// whose connection closes after the answer (`http-server-close`,
    /// `httpclose`) does not say `Connection: close`; ebb closes it all
    /// the same once the answer is in.
    pub pretend_keepalive: bool,
    /// `option http-no-delay`: no outgoing data waits for more. ebb's
    /// HTTP paths never hold data back (every socket has TCP_NODELAY, no
    /// MSG_MORE or cork but on the last bytes before a FIN), so the
    /// option is met whatever its value; it is kept for `-c` and stats.
    pub http_no_delay: bool,
    pub httplog: bool,
    /// `option httpslog`: the httplog line with the TLS fields.
    pub httpslog: bool,
    /// `option tcplog`: HAProxy's TCP log line at the session's end.
    pub tcplog: bool,
    /// `option dontlognull`: no line for a connection that carried no
    /// data (a tcp session, or an HTTP connection that ended before any
    /// request byte).
    pub dontlognull: bool,
    /// `option logasap`: an HTTP exchange's line goes out when the
    /// response head is forwarded, a tcp session's when its server
    /// connection is established, with `+` before the sizes and times
    /// that would still grow.
    pub logasap: bool,
    /// `option http-ignore-probes`: an HTTP connection that ends or times
    /// out before its first byte gets no 400/408, no line, no count.
    pub http_ignore_probes: bool,
    /// `option log-health-checks`: log every change of a check's status,
    /// not only servers going UP or DOWN.
    pub log_health_checks: bool,
    /// `option idle-close-on-response`: a soft stop leaves idle client
    /// connections open until their next request, answered with close.
    pub idle_close_on_response: bool,
    /// `option contstats` (frontend): byte counters updated as data flows
    /// (every 5 s at least), not only at the end; tcp streams only.
    pub contstats: bool,
    /// `option h1-case-adjust-bogus-client`: the global `h1-case-adjust`
    /// map applies to the heads written to HTTP/1 clients.
    pub h1_case_client: bool,
    /// `option h1-case-adjust-bogus-server`: the map applies to the
    /// request heads written to HTTP/1 servers.
    pub h1_case_server: bool,
    /// `option accept-invalid-http-request` (frontend): the relaxed
    /// reading of `crate::http1::lax` for the HTTP/1 requests it refuses.
    pub accept_invalid_req: bool,
    /// `option accept-invalid-http-response` (backend): the same for the
    /// answers of its HTTP/1 servers.
    pub accept_invalid_resp: bool,
    /// `option disable-h2-upgrade`: an HTTP/1 bind does not serve a
    /// client that starts with the HTTP/2 preface as HTTP/2.
    pub disable_h2_upgrade: bool,
    /// `option http-buffer-request`: the request's body (up to a full
    /// buffer) is waited for before the rules run.
    pub buffer_request: bool,
    /// `option splice-auto|splice-request|splice-response` ([`SPLICE_AUTO`],
    /// [`SPLICE_REQUEST`], [`SPLICE_RESPONSE`]), and where the first was set.
    pub splice: u8,
    pub splice_loc: Option<Loc>,
    /// `option abortonclose` (backends).
    pub abortonclose: bool,
    /// `option prefer-last-server` (backends): a client's next request
    /// goes to the server its private connection is to, when usable.
    pub prefer_last_server: bool,
    /// `option socket-stats`: each listener of the frontend has its own
    /// statistics (`show stat` rows, `haproxy_listener_*` metrics).
    pub socket_stats: bool,
    /// `option http-restrict-req-hdr-names` (`None`: not set; see
    /// [`Proxy::restrict_hdr_names`]).
    pub restrict_hdr_names: Option<RestrictHdrNames>,
    /// `option clitcpka` (`option tcpka` in a proxy with a frontend) and
    /// `clitcpka-idle|intvl|cnt`: TCP keep-alive on client connections.
    pub clitcpka: TcpKa,
    /// `option srvtcpka` (`option tcpka` in a proxy with a backend) and
    /// `srvtcpka-idle|intvl|cnt`: TCP keep-alive on server connections.
    pub srvtcpka: TcpKa,
    /// `option allbackups` (backends).
    pub allbackups: bool,
    /// `option dontlog-normal`: only abnormal exchanges are logged.
    pub dontlog_normal: bool,
    /// `option log-separate-errors`: abnormal exchanges at level `err`.
    pub log_separate_errors: bool,
    /// `option nolinger`: connections on this side (the clients' in a
    /// frontend, the servers' in a backend) close with SO_LINGER 0 (RST).
    pub nolinger: bool,
    /// `option independent-streams`, where it was set: data sent to a side
    /// no longer refreshes that side's read timeout (the client's in a
    /// frontend, the server's in a backend). `mode tcp` only in ebb.
    pub indep_streams: Option<Loc>,
    /// `[no] option tcp-smart-accept` (frontends): Some(on) when written,
    /// None for HAProxy's automatic choice (on for an HTTP frontend and a
    /// TLS bind): `TCP_QUICKACK` off on the listener, so the answer
    /// carries the ACK of a new connection's first request.
    pub smart_accept: Option<bool>,
    /// `option tcp-smart-connect` (backends): `TCP_QUICKACK` off on a
    /// server socket with bytes to send before its connect, so the first
    /// request leaves with the handshake's last ACK.
    pub smart_connect: bool,
}

impl Proxy {
    /// `option http-restrict-req-hdr-names`, or its default: `delete` for
    /// a proxy with a FastCGI application (HAProxy's), else `preserve`.
    pub fn restrict_hdr_names(&self) -> RestrictHdrNames {
        self.options
            .restrict_hdr_names
            .unwrap_or(if self.fcgi_app.is_some() {
                RestrictHdrNames::Delete
            } else {
                RestrictHdrNames::Preserve
            })
    }
}

/// `option http-restrict-req-hdr-names preserve|delete|reject`: what the
/// proxy does, after its `http-request` rules, with request fields whose
/// name holds a character other than letters, digits and `-`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RestrictHdrNames {
    #[default]
    Preserve,
    /// Such fields are removed.
    Delete,
    /// Such a request is answered 403.
    Reject,
}

/// `option splice-auto`: a direction moves through a kernel pipe once it
/// streams (reads that fill the buffer).
pub const SPLICE_AUTO: u8 = 1;
/// `option splice-request`: client to server through a kernel pipe.
pub const SPLICE_REQUEST: u8 = 2;
/// `option splice-response`: server to client through a kernel pipe.
pub const SPLICE_RESPONSE: u8 = 4;

/// An `http-errors NAME` section: errorfiles a proxy imports with
/// `errorfiles NAME [CODE...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpErrorsSection {
    pub name: String,
    pub files: Vec<ErrorFile>,
    pub loc: Loc,
}

/// `errorfile CODE FILE`: the file's bytes are a full HTTP response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorFile {
    pub status: u16,
    pub path: PathBuf,
    pub content: Vec<u8>,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsUser {
    pub user: String,
    pub password: String,
}

/// The `stats` keywords of a proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `stats enable` or any of `stats uri|auth|refresh|admin`.
    pub enabled: bool,
    /// `stats uri`; HAProxy's default is `/haproxy?stats`.
    pub uri: Option<Spanned<String>>,
    pub refresh: Option<Duration>,
    pub auth: Vec<StatsUser>,
    pub realm: Option<String>,
    pub hide_version: bool,
    /// `stats admin if|unless COND`: admin actions allowed when any matches.
    pub admin: Vec<Condition>,
    /// `stats show-node [NAME]` and `stats show-desc [TEXT]` (`Some(None)`:
    /// the global `node`/`description`), `stats show-legends`.
    pub show_node: Option<Option<String>>,
    pub show_desc: Option<Option<String>>,
    pub show_legends: bool,
}

impl Stats {
    /// The URI prefix the page answers on, when enabled.
    pub fn effective_uri(&self) -> Option<&str> {
        if !self.enabled {
            return None;
        }
        Some(
            self.uri
                .as_ref()
                .map(|u| u.value.as_str())
                .unwrap_or("/haproxy?stats"),
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Balance {
    RoundRobin,
    StaticRr,
    LeastConn,
    First,
    Source,
    Uri {
        whole: bool,
        len: Option<u32>,
        depth: Option<u32>,
        /// `path-only`: the key starts at the path's first `/` (an
        /// absolute URI's scheme and authority are left out).
        path_only: bool,
    },
    /// `url_param NAME`: the value of the query string's first `NAME=`
    /// parameter (round robin without one).
    UrlParam {
        name: String,
    },
    /// Header name in lower case.
    Hdr {
        name: String,
        use_domain_only: bool,
    },
    /// `random [DRAWS]`; 2 draws by default (power of two choices).
    Random {
        draws: u32,
    },
}

/// `hash-type <method> [<function>] [avalanche]` and `hash-balance-factor`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashType {
    pub consistent: bool,
    pub function: HashFunction,
    pub avalanche: bool,
    /// `hash-balance-factor`: 0 (off) or more than 100.
    pub balance_factor: u32,
}

/// The hash functions of `hash-type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HashFunction {
    #[default]
    Sdbm,
    Djb2,
    Wt6,
    Crc32,
}

/// `retry-on KEYWORD...`: the failures after which a request goes again
/// to a server (HAProxy's `retry_type` bits). Only `conn-failure` (the
/// default) acts in `mode tcp`; the others are layer-7 retries, which
/// need the whole request kept for a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryOn(pub u16);

impl RetryOn {
    pub const CONN_FAILURE: u16 = 1 << 0;
    pub const EMPTY_RESPONSE: u16 = 1 << 1;
    pub const JUNK_RESPONSE: u16 = 1 << 2;
    pub const RESPONSE_TIMEOUT: u16 = 1 << 3;
    /// `0rtt-rejected`: ebb sends no early data to servers, so it never
    /// meets that failure.
    pub const ZERO_RTT: u16 = 1 << 4;
    /// The statuses `retry-on` knows, each a bit from `1 << 5` on.
    pub const STATUSES: [u16; 10] = [401, 403, 404, 408, 425, 500, 501, 502, 503, 504];

    /// The bit of a status `retry-on` knows.
    pub fn status_bit(code: u16) -> Option<u16> {
        let i = Self::STATUSES.iter().position(|&s| s == code)?;
        Some(1 << (5 + i))
    }

    /// `all-retryable-errors`, as HAProxy 2.6 defines it.
    pub fn all_retryable() -> u16 {
        let st = [500, 502, 503, 504]
            .iter()
            .filter_map(|&c| Self::status_bit(c));
        st.fold(
            Self::CONN_FAILURE
                | Self::EMPTY_RESPONSE
                | Self::JUNK_RESPONSE
                | Self::RESPONSE_TIMEOUT
                | Self::ZERO_RTT,
            |a, b| a | b,
        )
    }

    pub fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }

    /// Whether a layer-7 condition (anything but `conn-failure`) is set:
    /// only then is the request kept for a replay.
    pub fn l7(self) -> bool {
        self.0 & !Self::CONN_FAILURE != 0
    }

    /// Whether an answer with this status is retried.
    pub fn status(self, code: u16) -> bool {
        Self::status_bit(code).is_some_and(|b| self.has(b))
    }
}

impl Default for RetryOn {
    fn default() -> Self {
        RetryOn(Self::CONN_FAILURE)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpReuse {
    Never,
    #[default]
    Safe,
    Aggressive,
    Always,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadServerState {
    Global,
    Local,
    None,
}

/// A `use-server` rule: the server's name, or a log-format string whose
/// value names it (`%[...]`), and its condition.
#[derive(Clone, Debug)]
pub struct UseServer {
    pub target: UseServerTarget,
    pub cond: Condition,
    pub loc: Loc,
}

/// What a `use-server` rule names.
#[derive(Clone, Debug)]
pub enum UseServerTarget {
    /// A server of the backend (checked at start).
    Name(String),
    /// A log-format string evaluated on each request.
    Format(crate::sample::LogFormat),
}
