//! The typed configuration the server reads. Every value that the server may
//! have to report about later (a bind that fails, a certificate that does not
//! load, a backend name) keeps the [`Loc`] of the line it came from.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::loc::Loc;

/// A configuration error: `file:line: what is wrong`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub loc: Loc,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.loc, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// A value with the line it was set on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spanned<T> {
    pub value: T,
    pub loc: Loc,
}

/// The whole configuration, in the order of the files.
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub global: Global,
    /// Frontends, backends and listens in declaration order. A `listen` is one
    /// proxy with both capabilities, as in HAProxy.
    pub proxies: Vec<Proxy>,
    /// `resolvers` sections, in declaration order.
    pub resolvers: Vec<Resolvers>,
    /// `peers` sections, in declaration order.
    pub peers: Vec<super::peers::PeersSection>,
    /// `cache` sections, in declaration order.
    pub caches: Vec<CacheSection>,
    /// `userlist` sections.
    pub userlists: Vec<crate::sample::auth::Userlist>,
    /// `program` sections, in declaration order (master-worker mode only).
    pub programs: Vec<Program>,
    /// This instance's peer name (`-L`, `localpeer`, or the host name).
    pub local_peer: String,
    /// The `disabled` backends and listens, each reduced to its name, mode
    /// and id: not started, not listed, but frontends route to them (and
    /// get 503 there, as with HAProxy's, which never sets them up).
    pub stopped: Vec<Proxy>,
    /// Each `disabled` proxy, as the number of started proxies declared
    /// before it and its `id` if set: HAProxy numbers them too.
    pub disabled_ids: Vec<(usize, Option<u32>)>,
}

impl Config {
    /// Every stick table: the proxies' (named after them), then the
    /// `table` lines of the peers sections (named `SECTION/T`).
    pub fn stick_tables(&self) -> impl Iterator<Item = &Spanned<crate::table::TableDef>> {
        self.proxies
            .iter()
            .filter_map(|p| p.stick_table.as_ref())
            .chain(self.peers.iter().flat_map(|s| s.tables.iter()))
    }
}

/// A `program NAME` section (HAProxy 2.6 configuration.txt section 3.7):
/// a command the master starts beside its workers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    /// `command`: the program and its arguments (looked up in `PATH`).
    pub command: Vec<String>,
    /// `user` / `group`, resolved when the configuration is read.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// `[no] option start-on-reload` (on): a reload starts a new instance
    /// (the running one is told to stop); off, the running one is kept.
    pub start_on_reload: bool,
    pub loc: Loc,
}

/// A `nameserver` line of a `resolvers` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nameserver {
    pub name: String,
    pub addr: SocketAddr,
    /// `tcp@`: DNS over TCP (RFC 7766), else over UDP.
    pub tcp: bool,
}

/// A `cache NAME` section (HAProxy's section 6.2; run by
/// the `httpcache` module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSection {
    pub name: String,
    /// `total-max-size` in megabytes (required, 1 to 4095).
    pub total_max_size_mb: u32,
    /// `max-age` in seconds (60).
    pub max_age: u32,
    /// `max-object-size` in bytes (0: a 256th of the total).
    pub max_object_size: u32,
    /// `process-vary on|off` (off).
    pub process_vary: bool,
    /// `max-secondary-entries` (10).
    pub max_secondary_entries: u32,
    pub loc: Loc,
}

/// A `resolvers NAME` section: where and how server names are resolved
/// while ebb runs (HAProxy's section 5.3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolvers {
    pub name: String,
    /// `nameserver NAME [udp@|tcp@]ADDR:PORT`, and those
    /// `parse-resolv-conf` read, in order.
    pub nameservers: Vec<Nameserver>,
    /// `resolve_retries`: queries sent for one resolution before giving up
    /// (3).
    pub resolve_retries: u32,
    /// `timeout resolve`: time between two resolutions of a name whose
    /// last answer was not valid (1 s).
    pub timeout_resolve: Duration,
    /// `timeout retry`: time to wait for an answer before asking again (1 s).
    pub timeout_retry: Duration,
    /// `hold STATUS PERIOD`.
    pub holds: crate::dns::Holds,
    /// `accepted_payload_size` (512, at most 65535).
    pub accepted_payload_size: u16,
    pub loc: Loc,
}

impl Resolvers {
    pub fn new(name: &str, loc: Loc) -> Resolvers {
        Resolvers {
            name: name.to_string(),
            nameservers: Vec::new(),
            resolve_retries: 3,
            timeout_resolve: Duration::from_secs(1),
            timeout_retry: Duration::from_secs(1),
            holds: crate::dns::Holds::default(),
            accepted_payload_size: 512,
            loc,
        }
    }
}

/// One method of `init-addr`: where a server's address comes from at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitAddr {
    /// The address saved in the server-state file.
    Last,
    /// The system resolver, once, at start.
    Libc,
    /// No address: the server starts in maintenance until resolved.
    None,
    /// This address.
    Ip(std::net::IpAddr),
}

impl Config {
    /// Proxies that accept connections (`frontend` and `listen`).
    pub fn frontends(&self) -> impl Iterator<Item = &Proxy> {
        self.proxies.iter().filter(|p| p.kind.is_frontend())
    }
    /// Proxies that hold servers or files (`backend` and `listen`).
    pub fn backends(&self) -> impl Iterator<Item = &Proxy> {
        self.proxies.iter().filter(|p| p.kind.is_backend())
    }
    /// The backend (or listen) of that name.
    pub fn backend(&self, name: &str) -> Option<&Proxy> {
        self.backends().find(|p| p.name == name)
    }
    /// The frontend (or listen) of that name.
    pub fn frontend(&self, name: &str) -> Option<&Proxy> {
        self.frontends().find(|p| p.name == name)
    }
}

/// The `global` section.
#[derive(Clone, Debug)]
pub struct Global {
    /// `localpeer NAME` (`-L` beats it).
    pub localpeer: Option<String>,
    /// `set-var proc.NAME EXPR` and `set-var-fmt proc.NAME FMT`, in order.
    pub set_vars: Vec<crate::sample::VarAction>,
    /// `setenv`, `presetenv`, `unsetenv`, `resetenv`: the environment as
    /// the configuration left it (applied to the process at start).
    pub environ: crate::environ::Overlay,
    /// `node NAME`: the name `show info` and the stats page give this
    /// instance (default: the host name).
    pub node: Option<String>,
    /// `cpu-map` lines: the CPUs of the process and of each thread.
    pub cpu_map: Option<Box<super::cpumap::CpuMap>>,
    /// `description TEXT`: `show info`'s and the stats page's description.
    pub description: Option<String>,
    /// `nbthread N`; `None`: one per CPU.
    pub nbthread: Option<Spanned<u32>>,
    /// `maxconn N`: process-wide connection limit.
    pub maxconn: Option<u32>,
    /// `tune.bufsize`, in bytes. 16384 is HAProxy's default.
    pub bufsize: usize,
    /// `tune.runqueue-depth`; `None`: the scheduler's default by thread count.
    pub runqueue_depth: Option<u32>,
    /// `tune.sched.low-latency on|off`.
    pub low_latency: bool,
    /// `tune.idle-pool.shared on|off` (default on): a thread may take
    /// another thread's idle server connections.
    pub idle_pool_shared: bool,
    /// `tune.sched.scope-lookups on|off` (ebb's own; default on): `off`
    /// finds shared tasks by the naive walk, for before/after measurements.
    pub scope_lookups: bool,
    /// `tune.heavy-tasklets on|off` (ebb): whether the heavy class is used.
    pub heavy_tasklets: bool,
    /// `tune.ssl.cachesize N`: TLS session-ID cache entries per bind line
    /// (0: no cache); `None`: the TLS layer's default (HAProxy's 20,000).
    pub ssl_cachesize: Option<u32>,
    /// `profiling.tasks on|auto|off`.
    pub profiling_tasks: ProfilingMode,
    /// `hard-stop-after T`.
    pub hard_stop_after: Option<Duration>,
    /// `grace T`: after SIGUSR1, how long the process goes on serving
    /// and accepting as before (only "stopping" shows the stop) before
    /// its soft stop begins; `None` (or `grace 0`): at once.
    pub grace: Option<Duration>,
    /// `log ...` lines, in order.
    pub log: Vec<LogTarget>,
    /// `pidfile PATH`.
    pub pidfile: Option<Spanned<PathBuf>>,
    /// `stats socket ...` lines.
    pub stats_sockets: Vec<StatsSocket>,
    /// `stats timeout T` for CLI connections.
    pub stats_timeout: Option<Duration>,
    /// `server-state-file PATH`.
    pub server_state_file: Option<Spanned<PathBuf>>,
    /// `server-state-base DIR`.
    pub server_state_base: Option<Spanned<PathBuf>>,
    /// `h1-case-adjust FROM TO` lines, then the `h1-case-adjust-file`'s
    /// entries once the configuration is read ([`crate::http1::CaseMap`]).
    pub h1_case: crate::http1::CaseMap,
    /// The last `h1-case-adjust-file PATH` (HAProxy reads only the last).
    pub h1_case_file: Option<Spanned<PathBuf>>,
    /// `daemon`: run in the background (as `-D`; `-d` keeps the foreground).
    pub daemon: bool,
    /// `quiet`: no message on standard error at start or after (as `-q`).
    pub quiet: bool,
    /// `maxsslconn N`: most TLS connections open at once, client and
    /// server sides together (0: no limit).
    pub maxsslconn: u32,
    /// `set-dumpable` (`no set-dumpable` undoes it): after `chroot`,
    /// `user` and `group`, the file-size and core-size limits raised to
    /// unlimited and the process marked dumpable again, so a crash can
    /// leave a core.
    pub set_dumpable: bool,
    /// `external-check`: backends may run external checks.
    pub external_check: bool,
    /// `insecure-fork-wanted` (`no insecure-fork-wanted` undoes it): ebb
    /// may start processes (external checks) while it serves. Without it
    /// HAProxy 2.6 forbids forks (an `RLIMIT_NPROC` of 0), which binds
    /// only an unprivileged process: ebb then refuses to start external
    /// checks unless it runs as root.
    pub insecure_fork: bool,
    /// `insecure-setuid-wanted` (`no insecure-setuid-wanted` undoes it):
    /// without it ebb sets `PR_SET_NO_NEW_PRIVS` before it serves, as
    /// HAProxy 2.6's workers do, so a command it runs (an external check)
    /// gains no privilege from a setuid or file-capability executable.
    pub insecure_setuid: bool,
    /// `chroot DIR`: entered after binding, before serving.
    pub chroot: Option<Spanned<PathBuf>>,
    /// `user NAME` / `uid N`: the user ebb runs as after binding.
    pub uid: Option<u32>,
    /// `group NAME` / `gid N`: the group ebb runs as after binding.
    pub gid: Option<u32>,
    /// `log-tag NAME`: the syslog tag (default: the program's name).
    pub log_tag: Option<String>,
    /// `log-send-hostname [NAME]`: the host name put in syslog headers.
    pub log_send_hostname: Option<String>,
    /// `tune.maxrewrite N`: buffer room kept free of the request head
    /// (HAProxy's default 1024, at most half of `tune.bufsize`).
    pub maxrewrite: Option<usize>,
    /// `ulimit-n N`: the open-files limit, set at start (default: raised
    /// to what `maxconn` needs).
    pub ulimit_n: Option<u64>,
    /// `tune.http.drain-max SIZE` (ebb's): most bytes of an unread request
    /// body dropped after an early answer (default 16k).
    pub drain_max: Option<u64>,
    /// `tune.http.maxhdr N`: at most N - 1 fields in a request or a
    /// response head (HAProxy counts the start line; default 101).
    pub max_hdr: Option<usize>,
    /// `maxconnrate N` / `maxsessrate N`: most connections / sessions
    /// accepted per second by the process (0: no limit).
    pub max_conn_rate: u32,
    pub max_sess_rate: u32,
    /// `tune.comp.maxlevel N`: the compression level (HAProxy's default 1).
    pub comp_maxlevel: Option<u32>,
    /// `tune.h2.max-concurrent-streams N` (HAProxy's default 100; 0: no
    /// limit).
    pub h2_max_concurrent_streams: Option<u32>,
    /// `tune.h2.initial-window-size N` (default 65535).
    pub h2_initial_window_size: Option<u32>,
    /// `tune.h2.header-table-size N` (default 4096, at most 65536).
    pub h2_header_table_size: Option<u32>,
    /// `tune.h2.max-frame-size N` (16384 to 16777215): the largest frame
    /// ebb announces it receives, at most `tune.bufsize` (the default).
    pub h2_max_frame_size: Option<u32>,
    /// `close-spread-time T|infinite`: how a soft stop spreads the closing
    /// of connections (see the `drain` module).
    pub close_spread: Option<CloseSpread>,
    /// `master-worker` (as `-W`): a master process runs the workers.
    pub master_worker: bool,
    /// `ssl-server-verify none|required`: the verification of servers
    /// whose line has no `verify` (HAProxy's default: required).
    pub ssl_server_verify: Option<Verify>,
    /// `spread-checks N` (0..50): each check's next date moves by a random
    /// amount of up to N % of its interval, either way.
    pub spread_checks: Option<u32>,
    /// `max-spread-checks T`: the most the first checks are spread over
    /// at start (None or zero: the smallest check interval).
    pub max_spread_checks: Option<Duration>,
}

/// `close-spread-time`: a window over which a soft stop closes
/// connections, or `infinite`: it closes none itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseSpread {
    Window(Duration),
    Infinite,
}

impl Default for Global {
    fn default() -> Self {
        Global {
            localpeer: None,
            set_vars: Vec::new(),
            environ: Default::default(),
            node: None,
            cpu_map: None,
            description: None,
            nbthread: None,
            maxconn: None,
            bufsize: 16384,
            runqueue_depth: None,
            low_latency: false,
            idle_pool_shared: true,
            scope_lookups: true,
            heavy_tasklets: true,
            ssl_cachesize: None,
            profiling_tasks: ProfilingMode::Auto,
            hard_stop_after: None,
            grace: None,
            log: Vec::new(),
            pidfile: None,
            stats_sockets: Vec::new(),
            stats_timeout: None,
            server_state_file: None,
            server_state_base: None,
            h1_case: Default::default(),
            h1_case_file: None,
            daemon: false,
            quiet: false,
            maxsslconn: 0,
            set_dumpable: false,
            external_check: false,
            insecure_fork: false,
            insecure_setuid: false,
            chroot: None,
            uid: None,
            gid: None,
            log_tag: None,
            log_send_hostname: None,
            maxrewrite: None,
            ulimit_n: None,
            drain_max: None,
            max_hdr: None,
            max_conn_rate: 0,
            max_sess_rate: 0,
            h2_max_concurrent_streams: None,
            h2_initial_window_size: None,
            h2_header_table_size: None,
            h2_max_frame_size: None,
            comp_maxlevel: None,
            close_spread: None,
            master_worker: false,
            ssl_server_verify: None,
            spread_checks: None,
            max_spread_checks: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfilingMode {
    On,
    Auto,
    Off,
}

/// Syslog severities, most severe first (RFC 5424 order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Emerg,
    Alert,
    Crit,
    Err,
    Warning,
    Notice,
    Info,
    Debug,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogDest {
    Stdout,
    Stderr,
    /// A path that is not a socket when ebb starts: a file, appended to (an
    /// ebb extension; in HAProxy a path is always a syslog socket).
    File(PathBuf),
    /// `udp@HOST:PORT`, `HOST:PORT` or `HOST` (port 514): syslog over UDP.
    Udp(std::net::SocketAddr),
    /// `unix@PATH`, `/dev/log`: a syslog UNIX datagram socket, addressed by
    /// path on every message (inside a `chroot`, the path in the jail).
    Unix(PathBuf),
}

/// The syslog header of a log target (`format` on a `log` line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// No `format`: HAProxy's default, RFC 3164 without the host name
    /// (`<PRI>Mmm dd hh:mm:ss TAG[PID]: `).
    #[default]
    Local,
    Rfc3164,
    Rfc5424,
    /// `<PRI>` only.
    Priority,
    /// `<LEVEL>` only (no facility).
    Short,
    /// `<LEVEL>` and an ISO 8601 date.
    Timed,
    /// An ISO 8601 date only.
    Iso,
    /// The message alone.
    Raw,
}

/// `log TARGET [FACILITY [LEVEL [MINLEVEL]]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogTarget {
    pub dest: LogDest,
    pub facility: Option<String>,
    /// Only messages at least this severe are sent.
    pub level: Option<LogLevel>,
    /// More severe messages are sent with this level instead (HAProxy's
    /// `minlevel`).
    pub min_level: Option<LogLevel>,
    pub loc: Loc,
    /// `format F`; without it `Local` (HAProxy's unspecified format: its
    /// header is `local`'s, or `rfc3164`'s when `log-send-hostname`
    /// gives a host, see `format_given`).
    pub format: LogFormat,
    /// The line says `format F`.
    pub format_given: bool,
    /// `len N`: a message with its header is cut to N bytes (HAProxy's
    /// default 1024).
    pub max_len: u32,
    /// `sample RANGES:SIZE`: of every SIZE messages, only those whose
    /// number (1..SIZE) is in one of the ranges are sent.
    pub sample: Option<LogSample>,
}

/// `sample 1,3-4:5`: ranges (inclusive, 1-based, sorted, disjoint) and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSample {
    pub ranges: Vec<(u32, u32)>,
    pub size: u32,
}

/// A proxy's `log` lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProxyLog {
    /// `log global`: use the global targets.
    Global,
    Target(LogTarget),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CliLevel {
    User,
    Operator,
    Admin,
}

/// `stats socket PATH [mode OCTAL] [level user|operator|admin]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsSocket {
    /// A UNIX socket path, or `ADDR:PORT` / `ipv4@...` for TCP, as written.
    pub path: String,
    pub mode: Option<u32>,
    /// `operator` when not given (HAProxy's documented default level).
    pub level: CliLevel,
    /// `nice N` (-1024..1024); `None`: the CLI's own default, which should
    /// be better than traffic's so the socket answers under load.
    pub nice: Option<i32>,
    /// `expose-fd listeners`: `_getsocks` hands the listening sockets to
    /// a new process (`-x`).
    pub expose_fd: bool,
    pub loc: Loc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyKind {
    Frontend,
    Backend,
    Listen,
}

impl ProxyKind {
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
    pub tcp_check: super::TcpCheck,
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
    pub cookie: Option<super::cookie::CookieCfg>,
    /// `force-persist` (true) / `ignore-persist` (false) rules, in order.
    pub persist_rules: Vec<(bool, Condition)>,
    /// `use-server NAME|FORMAT if|unless COND` rules, in order.
    pub use_server: Vec<UseServer>,
    /// `capture cookie NAME len N` (frontends).
    pub capture_cookie: Option<super::cookie::CaptureCookie>,
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

/// When a `tcp-request` rule runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TcpWhen {
    /// `connection`: at accept, before any byte is read (and before a
    /// PROXY header).
    Connection,
    /// `session`: once the connection is a session (after the PROXY
    /// header), before any byte of content.
    Session,
    /// `content`: on the request's first bytes, within `inspect-delay`.
    Content,
}

/// What a `tcp-request` rule does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcpAction {
    Accept,
    Reject,
    /// `silent-drop`: the connection is reset and forgotten (no log).
    SilentDrop,
    /// `close` (`tcp-response content`): the server connection is closed
    /// at once; what it sent still reaches the client.
    Close,
    /// `expect-proxy layer4` (connection rules): a PROXY header must come
    /// first, as with `accept-proxy` on the bind.
    ExpectProxy,
    /// `set-src EXPR`, `set-dst EXPR`, `set-src-port EXPR`,
    /// `set-dst-port EXPR`: the client's address as the rest of the
    /// connection (or session) sees it.
    SetAddr(AddrField, Box<crate::sample::Expr>),
    /// An action shared with `http-request`: `track-scN`, `sc-inc-gpc0`,
    /// `sc-set-gpt0`, `set-var`, `set-var-fmt`, `unset-var`.
    Common(HttpRequestAction),
    /// `switch-mode http [proto h1|h2]` (content rules of a frontend): the
    /// tcp stream becomes HTTP (`None`: HTTP/1, or HTTP/2 on its preface;
    /// `Some(true)`: HTTP/2 only; `Some(false)`: HTTP/1 only). On a stream
    /// that is HTTP already it ends the walk as `accept`.
    SwitchMode(Option<bool>),
}

/// Which part of the client's addresses a `set-*` action changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrField {
    Src,
    Dst,
    SrcPort,
    DstPort,
}

impl AddrField {
    /// The action's name.
    pub fn name(self) -> &'static str {
        match self {
            AddrField::Src => "set-src",
            AddrField::Dst => "set-dst",
            AddrField::SrcPort => "set-src-port",
            AddrField::DstPort => "set-dst-port",
        }
    }
}

/// `tcp-request connection|session|content ACTION [if|unless COND]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpRequestRule {
    pub when: TcpWhen,
    pub action: TcpAction,
    pub cond: Option<Condition>,
    pub loc: Loc,
}

/// What a `stick` rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickKind {
    /// `stick on`: match, then store the request's pattern.
    On,
    Match,
    StoreRequest,
    StoreResponse,
}

/// `stick on|match|store-request|store-response PATTERN [table T] [if|unless COND]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StickRule {
    pub kind: StickKind,
    pub pattern: crate::sample::Expr,
    /// `None`: the backend's own table.
    pub table: Option<String>,
    pub cond: Option<Condition>,
    pub loc: Loc,
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
    /// `option http-restrict-req-hdr-names`.
    pub restrict_hdr_names: RestrictHdrNames,
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

pub use crate::net::TcpKa;

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

pub use crate::net::IpNet;

/// `bind ADDR:PORT[,ADDR:PORT...] [name N] [ssl crt F ...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bind {
    /// All addresses of the line (comma lists and port ranges expanded).
    /// `:80` and `*:80` are `0.0.0.0:80`; `:::80` is `[::]:80`.
    pub addrs: Vec<SocketAddr>,
    pub name: Option<String>,
    /// `nice N` (-1024..1024): the scheduling priority of this listener's
    /// connections; negative runs sooner.
    pub nice: i32,
    /// `v6only` (true) / `v4v6` (false); `None`: the system default.
    pub v6only: Option<bool>,
    pub ssl: Option<BindSsl>,
    pub loc: Loc,
    /// Listening sockets other than TCP addresses: `fd@N`, `unix@PATH` (or
    /// a path), `abns@NAME`. A bind line has either `addrs` or one of these.
    pub sockets: Vec<SockSpec>,
    /// `mode OCTAL` for a UNIX socket path.
    pub unix_mode: Option<u32>,
    /// `user`/`uid` and `group`/`gid` owning a UNIX socket path.
    pub unix_owner: (Option<u32>, Option<u32>),
    /// `backlog N`: the listen queue (default 1024).
    pub backlog: Option<u32>,
    /// `accept-proxy`: every connection starts with a PROXY protocol
    /// header (v1 or v2), whose source is then the client's address.
    pub accept_proxy: bool,
    /// `defer-accept`: the kernel hands over a connection only once its
    /// first bytes arrived, or after its first retransmitted SYN-ACK
    /// (`TCP_DEFER_ACCEPT`, one second). TCP addresses only: HAProxy
    /// ignores it on other sockets (UNIX, `fd@`).
    pub defer_accept: bool,
    /// `proto h2`: connections speak HTTP/2 from their first byte
    /// (cleartext with prior knowledge, or TLS whatever ALPN chose).
    pub proto_h2: bool,
    /// `proto h1`: HTTP/1 only (the HTTP/2 preface is a bad request).
    pub proto_h1: bool,
    /// `proto none` (a tcp frontend's): the connection never becomes
    /// HTTP (`switch-mode http` or an HTTP backend ends it).
    pub proto_none: bool,
}

/// A listening socket that is not a TCP address ebb binds itself.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SockSpec {
    /// `fd@N`: a socket inherited already open (from VTest, systemd's
    /// `LISTEN_FDS`, or a parent process).
    Fd(i32),
    /// `unix@PATH` or a path starting with `/`: a UNIX stream socket.
    Unix(PathBuf),
    /// `abns@NAME`: a UNIX socket in Linux's abstract namespace.
    Abns(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// TLS settings of a `bind ... ssl` line. Files are not read by the parser;
/// the TLS layer loads them and reports problems with `loc`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BindSsl {
    /// `crt` files in order; the first is the default certificate.
    pub crts: Vec<PathBuf>,
    /// `key FILE` when the key is not in the `crt` file.
    pub key: Option<PathBuf>,
    /// `alpn h2,http/1.1`: a client that picks h2 is served HTTP/2.
    pub alpn: Vec<String>,
    pub min_ver: Option<TlsVersion>,
    /// `strict-sni`: refuse a handshake whose SNI names no certificate
    /// (and one without SNI) instead of using the default certificate.
    pub strict_sni: bool,
    /// `no-tls-tickets`: no session tickets (resumption only through the
    /// session-ID cache, if any).
    pub no_tls_tickets: bool,
    /// Session-ID cache entries (`tune.ssl.cachesize`, from `global`; set
    /// by the server at start; `None`: the TLS layer's default).
    pub cache_size: Option<u32>,
    /// `crt-list FILE`s, each with the number of `crt` entries before it
    /// on the line (certificates load in line order; the first is the
    /// default).
    pub crt_lists: Vec<(usize, PathBuf)>,
    /// `ciphers` (OpenSSL string for TLS 1.2), checked by the parser;
    /// `None`: every suite ebb has.
    pub ciphers: Option<String>,
    /// `ciphersuites` (TLS 1.3 list), checked by the parser.
    pub ciphersuites: Option<String>,
    /// `curves` (OpenSSL group names), checked by the parser.
    pub curves: Option<String>,
    /// `ssl-max-ver`.
    pub max_ver: Option<TlsVersion>,
    /// `no-tlsv12` / `no-tlsv13`.
    pub no_tls12: bool,
    pub no_tls13: bool,
    /// `prefer-client-ciphers`: the client's cipher order instead of the
    /// server's.
    pub prefer_client_ciphers: bool,
    /// Where relative certificate paths inside a `crt-list` point
    /// (`crt-base`, resolved like every config path).
    pub crt_base: PathBuf,
}

impl BindSsl {
    /// The TLS versions this line allows, lowest first (empty: none; the
    /// parser refuses that).
    pub fn versions(&self) -> Vec<TlsVersion> {
        [TlsVersion::Tls12, TlsVersion::Tls13]
            .into_iter()
            .filter(|v| self.min_ver.is_none_or(|m| *v >= m))
            .filter(|v| self.max_ver.is_none_or(|m| *v <= m))
            .filter(|v| match v {
                TlsVersion::Tls12 => !self.no_tls12,
                TlsVersion::Tls13 => !self.no_tls13,
            })
            .collect()
    }
}

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
            MatchMethod::Int => How::Int,
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
    /// Extra headers, names in the case written.
    pub headers: Vec<(String, String)>,
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
    Rewrite(super::rewrite::Rewrite),
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
    Rewrite(super::rewrite::Rewrite),
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
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponseRule {
    pub action: HttpResponseAction,
    pub cond: Option<Condition>,
    pub loc: Loc,
}

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

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verify {
    None,
    #[default]
    Required,
}

/// Options of `server` and `default-server`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// 0..=256, 1 by default.
    pub weight: u32,
    /// `on-marked-down shutdown-sessions`: its sessions are killed when it
    /// goes DOWN or into maintenance (logged `D`).
    pub on_marked_down: bool,
    /// `on-marked-up shutdown-backup-sessions`: when this active server
    /// comes UP, the sessions of its backend's backup servers are killed
    /// (logged `U`).
    pub on_marked_up: bool,
    /// `observe layer4|layer7`: live traffic counts as checks.
    pub observe: Observe,
    /// `error-limit N` (10): consecutive errors that trigger `on-error`.
    pub error_limit: u32,
    /// `on-error`: what `error-limit` errors do.
    pub on_error: OnError,
    /// A sample fetch names this server (`srv_conn(b/s)`,
    /// `srv_sess_rate(b/s)`): `del server` refuses it, as HAProxy does.
    pub referenced: bool,
    /// `track [BACKEND/]SERVER`: the server whose state this one takes.
    pub track: Option<String>,
    pub maxconn: Option<u32>,
    /// `minconn N`: with `maxconn`, a dynamic limit between the two that
    /// follows the backend's load (`fullconn`).
    pub minconn: Option<u32>,
    pub maxqueue: Option<u32>,
    pub backup: bool,
    pub disabled: bool,
    pub check: bool,
    /// Check interval, 2 s by default (HAProxy's).
    pub inter: Duration,
    pub fastinter: Option<Duration>,
    pub downinter: Option<Duration>,
    /// Consecutive successes to go UP (2) and failures to go DOWN (3).
    pub rise: u32,
    pub fall: u32,
    pub slowstart: Option<Duration>,
    pub ssl: bool,
    /// `verify none|required`; unset: the process's default (see
    /// [`ServerOptions::verify`]).
    pub verify: Option<Verify>,
    pub ca_file: Option<PathBuf>,
    /// `sni EXPR`: the name sent to the server, a sample expression
    /// evaluated per connection (HAProxy's), e.g. `req.hdr(host)`.
    pub sni: Option<crate::sample::Expr>,
    /// `check-sni NAME`: the name the health checks send (a string).
    pub check_sni: Option<String>,
    /// `pool-max-conn`; `None` = unlimited (`-1`).
    pub pool_max_conn: Option<u32>,
    /// `pool-purge-delay`, 5 s by default (HAProxy's).
    pub pool_purge_delay: Duration,
    /// TLS towards the server: `ciphers`, `ciphersuites`, version options,
    /// `no-tls-tickets`, with `ssl-default-server-*` filling the rest.
    pub tls: ServerTlsPolicy,
    /// `send-proxy` (1) / `send-proxy-v2` (2): a PROXY header before the
    /// first byte to the server; 0: none.
    pub send_proxy: u8,
    /// `proxy-v2-options`: the TLVs a `send-proxy-v2` header carries.
    pub pp_v2: PpV2Options,
    /// `cookie VALUE`: the server's persistence cookie value.
    pub cookie: Option<String>,
    /// `check-send-proxy`: health checks send one too (they also do when
    /// `send_proxy` is set, HAProxy's rule with no `port`/`addr`).
    pub check_send_proxy: bool,
    /// `resolvers NAME`: the section that resolves this server's name
    /// while ebb runs.
    pub resolvers: Option<String>,
    /// `resolve-prefer ipv4|ipv6` (HAProxy's default: ipv6).
    pub resolve_prefer_v4: bool,
    /// `init-addr`; `None`: HAProxy's default `last,libc`.
    pub init_addr: Option<Vec<InitAddr>>,
    /// `resolve-opts allow-dup-ip`: an address another server of the
    /// backend has may be used (by default it is skipped).
    pub allow_dup_ip: bool,
    /// `resolve-opts ignore-weight`: an SRV record's weight is not applied.
    pub ignore_weight: bool,
    /// `proto h2`: requests go to this server over HTTP/2 (prior
    /// knowledge, cleartext or over `ssl`), several streams per connection.
    pub proto_h2: bool,
    /// `alpn h2,http/1.1`: the protocols offered in the TLS handshake; the
    /// server's choice decides HTTP/2 or HTTP/1.1 (HAProxy's mux choice).
    pub alpn: Vec<String>,
    /// `check-proto h1|h2|none`: the protocol of HTTP checks (HAProxy's
    /// check multiplexer); `None`: the server's.
    pub check_proto: Option<CheckProto>,
    /// `check-alpn LIST`: the protocols health checks offer in the TLS
    /// handshake; `None`: the server's `alpn`.
    pub check_alpn: Option<Vec<String>>,
    /// `socks4 ADDR:PORT`: connections to the server go through this
    /// SOCKS4 proxy (a CONNECT request, then the server's protocol).
    pub socks4: Option<std::net::SocketAddr>,
    /// `check-via-socks4`: health checks go through `socks4` too.
    pub check_via_socks4: bool,
    /// `resolve-net NET[,NET...]` (at most 5): among the answers, an
    /// address in one of these networks is preferred (after the family).
    pub resolve_net: Vec<IpNet>,
    /// The address had no port (`server s 10.0.0.1`, `add server B/S
    /// 10.0.0.1`): connections go to the port the client connected to
    /// (HAProxy's mapped ports, offset 0).
    pub map_ports: bool,
    /// `abns@NAME` as the address: a Linux abstract UNIX socket, the
    /// name as written (padded as HAProxy pads it at connect).
    pub abns: Option<String>,
    /// `agent-check` (`no-agent-check` clears it): an auxiliary agent
    /// check runs beside the health check.
    pub agent_check: bool,
    /// `agent-port`: the agent's TCP port (required with `agent-check`).
    pub agent_port: Option<u16>,
    /// `agent-addr`: where the agent listens (the server's address when
    /// unset).
    pub agent_addr: Option<std::net::IpAddr>,
    /// `id N`: the server's id (HAProxy's `puid`: `srv_id`, the stats'
    /// `sid`); unset: the first free one from its position on.
    pub id: Option<u32>,
    /// `port N`: the health check's port (and the agent's without
    /// `agent-port`); unset: the server's.
    pub check_port: Option<u16>,
    /// `addr IP`: the health check's address (and the agent's without
    /// `agent-addr`); unset: the server's.
    pub check_addr: Option<std::net::IpAddr>,
    /// `check-ssl`: health checks speak TLS even without `ssl`.
    pub check_ssl: bool,
    /// `agent-inter`: the agent's interval, 2 s by default (HAProxy's);
    /// also its timeout when `timeout check` is not set.
    pub agent_inter: Duration,
    /// `agent-send`: sent verbatim to the agent once connected.
    pub agent_send: Vec<u8>,
    /// The backend's options for its server sockets (no `server`
    /// keyword: set from the backend when its servers are built).
    pub sock: SrvSock,
}

/// What a backend asks of each of its server sockets: `option srvtcpka`
/// (and its parameters), `option nolinger`, `option tcp-smart-connect`
/// and `source`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrvSock {
    pub tcpka: TcpKa,
    pub nolinger: bool,
    /// `option tcp-smart-connect`.
    pub smart_connect: bool,
    /// The backend's `source`: bound before connecting.
    pub source: Option<std::net::SocketAddr>,
}

/// The TLS policy of a `server ... ssl` line (the client side).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ServerTlsPolicy {
    /// OpenSSL cipher string for TLS 1.2, checked by the parser.
    pub ciphers: Option<String>,
    /// TLS 1.3 suites, checked by the parser.
    pub ciphersuites: Option<String>,
    pub min_ver: Option<TlsVersion>,
    pub max_ver: Option<TlsVersion>,
    pub no_tls12: bool,
    pub no_tls13: bool,
    /// `no-tls-tickets`: TLS 1.2 sessions resume by session ID only.
    pub no_tls_tickets: bool,
    /// `verifyhost NAME`: under `verify required`, the name the
    /// certificate must carry when no SNI was sent (the health checks'
    /// too); without it and without SNI the names are not checked.
    pub verify_host: Option<String>,
}

impl ServerTlsPolicy {
    /// The TLS versions allowed, lowest first.
    pub fn versions(&self) -> Vec<TlsVersion> {
        BindSsl {
            min_ver: self.min_ver,
            max_ver: self.max_ver,
            no_tls12: self.no_tls12,
            no_tls13: self.no_tls13,
            ..BindSsl::default()
        }
        .versions()
    }
}

pub use crate::proxyproto::PpV2Options;

/// `ssl-server-verify none` or `-dV` in force (the last compiled
/// configuration's): a server without `verify` is not verified.
static SERVER_VERIFY_NONE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);
/// `-dV` was given.
static DASH_DV: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `-dV` on the command line: `ssl-server-verify none` unless the
/// configuration says `required`.
pub fn set_dash_dv() {
    DASH_DV.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Sets the servers' default verification from `g` (`ssl-server-verify`,
/// else `-dV`, else `required`), for the servers compiled from now on
/// (`add server` included).
pub fn set_server_verify_default(g: &Global) {
    use std::sync::atomic::Ordering::Relaxed;
    let none = match g.ssl_server_verify {
        Some(v) => v == Verify::None,
        None => DASH_DV.load(Relaxed),
    };
    SERVER_VERIFY_NONE.store(none, Relaxed);
}

impl ServerOptions {
    /// `verify` as written, else the default `ssl-server-verify` (or
    /// `-dV`) gives, `required` when neither says.
    pub fn verify(&self) -> Verify {
        self.verify.unwrap_or_else(|| {
            if SERVER_VERIFY_NONE.load(std::sync::atomic::Ordering::Relaxed) {
                Verify::None
            } else {
                Verify::Required
            }
        })
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            weight: 1,
            on_marked_down: false,
            on_marked_up: false,
            observe: Observe::None,
            error_limit: 10,
            on_error: OnError::FailCheck,
            referenced: false,
            track: None,
            maxconn: None,
            minconn: None,
            maxqueue: None,
            backup: false,
            disabled: false,
            check: false,
            inter: Duration::from_secs(2),
            fastinter: None,
            downinter: None,
            rise: 2,
            fall: 3,
            slowstart: None,
            ssl: false,
            verify: None,
            ca_file: None,
            sni: None,
            check_sni: None,
            pool_max_conn: None,
            pool_purge_delay: Duration::from_secs(5),
            tls: ServerTlsPolicy::default(),
            send_proxy: 0,
            pp_v2: PpV2Options::default(),
            check_send_proxy: false,
            cookie: None,
            resolvers: None,
            resolve_prefer_v4: false,
            init_addr: None,
            allow_dup_ip: false,
            ignore_weight: false,
            proto_h2: false,
            alpn: Vec::new(),
            check_proto: None,
            check_alpn: None,
            socks4: None,
            check_via_socks4: false,
            resolve_net: Vec::new(),
            map_ports: false,
            abns: None,
            agent_check: false,
            agent_port: None,
            agent_addr: None,
            id: None,
            check_port: None,
            check_addr: None,
            check_ssl: false,
            agent_inter: Duration::from_secs(2),
            agent_send: Vec::new(),
            sock: SrvSock::default(),
        }
    }
}

/// A server's `observe` mode (HAProxy's health analysis).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Observe {
    None,
    /// Connection errors count; an established connection clears them.
    Layer4,
    /// Connection errors, 5xx statuses (but 501 and 505), invalid or cut
    /// responses and response timeouts count; other statuses clear them.
    Layer7,
}

/// `on-error`: what `error-limit` consecutive errors of `observe` do.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OnError {
    /// Checks run at `fastinter`.
    FastInter,
    /// A failed check (and `fastinter`).
    FailCheck,
    /// A failed check that leaves one more before DOWN (and `fastinter`).
    SuddenDeath,
    /// DOWN at once (and `fastinter`).
    MarkDown,
}

/// `check-proto`: HAProxy's multiplexers a health check may use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CheckProto {
    H1,
    H2,
    /// `none`: raw TCP (a `tcp-check` sequence's own).
    None,
}

/// `server NAME ADDR:PORT [options]`. The address is not resolved here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    pub port: u16,
    pub opts: ServerOptions,
    pub loc: Loc,
    /// A slot of `server-template` whose name is an SRV name
    /// (`_service._proto.name`): address, port and weight come from the
    /// SRV records.
    pub srv: bool,
}

/// `serve-files DIR [index FILE] [listing on|off] [follow-symlinks on|off] [max-age N]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeFiles {
    pub root: PathBuf,
    /// Index files tried in order for a directory (`index.html` by default).
    pub index: Vec<String>,
    pub listing: bool,
    pub follow_symlinks: bool,
    /// `Cache-Control: max-age` in seconds.
    pub max_age: Option<u32>,
    pub loc: Loc,
    /// `dotfiles allow|deny` (default deny: 404 for dot-files and
    /// dot-directories but `/.well-known/`).
    pub dotfiles: bool,
    /// `precompressed gzip|br|zstd ...`: codings whose sibling file
    /// (`F.gz`, `F.br`, `F.zst`) is served to a client accepting it.
    pub precompressed: Vec<crate::compress::Coding>,
}

/// `http-check expect [!] status|rstatus|string|rstring PATTERN`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpectKind {
    /// Inclusive ranges, e.g. `200`, `200-399`, `200,204`.
    Status(Vec<(u16, u16)>),
    RStatus(String),
    String(String),
    RString(String),
    /// `hdr|fhdr name [-m M] NAME [value [-m M] VALUE]`: a header whose
    /// name matches (case-insensitively) and, if given, one of whose
    /// values matches (`hdr`: each comma-separated value; `fhdr`: the
    /// whole value).
    Hdr {
        full: bool,
        name: HdrMatch,
        value: Option<HdrMatch>,
    },
}

/// How `http-check expect hdr` compares a header name or value (`-m`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HdrMatch {
    Str(String),
    Beg(String),
    End(String),
    Sub(String),
    Reg(String),
    /// `name-lf` / `value-lf`: the pattern of the match inside (never
    /// `Reg`) is a log-format string, rendered at each check.
    Fmt(Box<HdrMatch>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpExpect {
    pub negate: bool,
    pub kind: ExpectKind,
    pub loc: Loc,
    /// `min-recv N` (None: -1, HAProxy's default).
    pub min_recv: Option<usize>,
    /// `ok-status`, L7OK by default.
    pub ok_status: super::CheckStatus,
    /// `error-status`; None: HAProxy's default for the match (L7STS for
    /// status and header matches, L7RSP for the body).
    pub error_status: Option<super::CheckStatus>,
    /// `tout-status`, L7TOUT by default.
    pub tout_status: super::CheckStatus,
}

/// A check's `connect` step (`tcp-check connect`, `http-check connect`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckConnect {
    /// `default`: the server's check settings (its PROXY header and TLS).
    pub default: bool,
    pub port: Option<u16>,
    pub addr: Option<std::net::IpAddr>,
    pub send_proxy: bool,
    /// `linger`: close with a reset rather than a FIN.
    pub linger: bool,
    /// `via-socks4`: through the server's `socks4` proxy, if it has one.
    pub via_socks4: bool,
}

/// One step of an HTTP check's sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpCheckStep {
    /// `http-check comment MSG`: the comment of the rule that follows.
    Comment,
    /// `http-check connect [default] [port N] [addr IP] [send-proxy]
    /// [linger]`.
    Connect(CheckConnect),
    /// `http-check send ...`: None for the first, which is the section's
    /// request (`option httpchk` merged with it); later ones carry their
    /// own.
    Send(Option<HttpSend>),
    Expect(HttpExpect),
    /// `http-check set-var(VAR) EXPR`, `set-var-fmt(VAR) FMT`,
    /// `unset-var(VAR)`: run when the sequence reaches them.
    Var(crate::sample::VarAction),
}

/// A request of a later `http-check send` (HAProxy's defaults: OPTIONS,
/// `/`, HTTP/1.0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSend {
    pub method: String,
    pub uri: String,
    pub version: String,
    /// Values are log-format strings (HAProxy's); one that renders
    /// empty is not sent.
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// `uri-lf`, `body-lf`: the URI, the body are log-format strings.
    pub uri_lf: bool,
    pub body_lf: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpCheckRule {
    pub step: HttpCheckStep,
    pub comment: Option<String>,
    pub loc: Loc,
}

/// HTTP health checks: `option httpchk` and `http-check expect`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpCheck {
    /// `option httpchk` given: checks are HTTP, not TCP connects.
    pub enabled: bool,
    /// `OPTIONS` by default (HAProxy's).
    pub method: String,
    /// `/` by default.
    pub uri: String,
    /// `HTTP/1.0` by default.
    pub version: String,
    /// `http-check send ... hdr NAME VALUE` headers, in order.
    pub headers: Vec<(String, String)>,
    /// `http-check send ... body STR`.
    pub body: Option<String>,
    /// The first send's `uri-lf`, `body-lf`.
    pub uri_lf: bool,
    pub body_lf: bool,
    /// An `http-check send` line is in this section's rules.
    pub explicit_send: bool,
    /// The rules are this section's own, not inherited from `defaults`:
    /// HAProxy starts a new rule set at a section's first `option
    /// httpchk` or `http-check` line.
    pub own: bool,
    /// The `http-check connect|send|expect|comment` rules in order.
    pub rules: Vec<HttpCheckRule>,
    /// `http-check send-state`: each request carries the server's state
    /// (`X-Haproxy-Server-State`). A proxy option, not a rule: kept when
    /// a section starts its own rules.
    pub send_state: bool,
}

impl HttpCheck {
    /// Starts this section's own rules (dropping inherited ones) if it
    /// has not yet.
    pub fn own_rules(&mut self) {
        if !self.own {
            *self = HttpCheck {
                enabled: self.enabled,
                send_state: self.send_state,
                method: "OPTIONS".into(),
                uri: "/".into(),
                version: "HTTP/1.0".into(),
                own: true,
                ..HttpCheck::default()
            };
        }
    }
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
