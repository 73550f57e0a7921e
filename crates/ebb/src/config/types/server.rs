//! `server` lines and their options (`default-server` the same), the
//! TLS policy toward servers and its process-wide defaults
//! (`ssl-server-verify`, `-dV`), health-check observation, and
//! `serve-files`, a backend's alternative to servers.

use std::path::PathBuf;
use std::time::Duration;

use crate::loc::Loc;
use crate::net::{IpNet, TcpKa};
use crate::proxyproto::PpV2Options;

use super::bind::{BindSsl, TlsVersion};
use super::global::Global;
use super::sections::InitAddr;

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
    /// `pool-low-conn N`: below N idle connections of the server (all
    /// threads), a thread takes no idle connection of another thread, and
    /// a connection may go idle while the server's connections stay within
    /// N of the estimate of those it needs. 0 (the default): no threshold.
    pub pool_low_conn: u32,
    /// `pool-max-conn`; `None` = unlimited (`-1`).
    pub pool_max_conn: Option<u32>,
    /// `max-reuse N`: an HTTP/2 connection to the server carries at most
    /// N + 1 streams, then closes once they are over; `None` (-1, the
    /// default, or any negative value): no limit. HAProxy 2.6's HTTP/1
    /// side ignores it, and so does ebb's.
    pub max_reuse: Option<u32>,
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
    /// Without `cookie VALUE`, under `cookie ... dynamic`: the backend's
    /// `dynamic-cookie-key` (set when the backend is built), from which
    /// and its address the server's cookie value is derived.
    pub dyncookie_key: Option<String>,
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
    /// `proto fcgi`: FastCGI to this server, for the backend's
    /// `use-fcgi-app` application (`mux::fcgi`).
    pub proto_fcgi: bool,
    /// `proto h1`: HTTP/1.1 to this server whatever ALPN chooses (the
    /// handshake still offers `alpn`), and for its HTTP checks (HAProxy's
    /// H1 multiplexer forced); `mode http` only.
    pub proto_h1: bool,
    /// `ws auto|h1|h2`: the protocol of websocket streams.
    pub ws: WsProto,
    /// `tfo`: TCP fast open on connects to the server (the first attempt
    /// of an exchange with bytes to send: HAProxy's condition).
    pub tfo: bool,
    /// `proto none`: tcp mode's pass-through (its default); `mode tcp`
    /// only.
    pub proto_none: bool,
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
    /// A UNIX socket as the address: `abns@NAME` (a Linux abstract
    /// socket, padded as HAProxy pads it at connect), or `unix@PATH` or a
    /// path starting with `/` (a socket in the file system).
    pub unix: Option<UnixTarget>,
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
    /// The port written with `addr IP:PORT`: the check's port when `port`
    /// gives none (HAProxy's order: `port`, the address's, the server's).
    pub check_addr_port: Option<u16>,
    /// Added on the CLI (`add server`): its checks speak TLS only with
    /// `check-ssl` and send a PROXY header only with `check-send-proxy`,
    /// whatever the traffic does (HAProxy 2.6's rule for dynamic servers).
    pub dynamic: bool,
    /// `no-ssl` was the last word about TLS (HAProxy's `use_ssl` -1, which
    /// `show servers state` prints).
    pub no_ssl: bool,
    /// TLS settings were prepared: `ssl` or `check-ssl` was on at some
    /// point (`default-server ssl` included, even if `no-ssl` followed).
    /// `set server B/S ssl on|off` needs them (HAProxy's `ssl_ctx.ctx`).
    pub ssl_ctx: bool,
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
    /// `crt FILE`: the certificate and key (in FILE, else in `FILE.key`)
    /// sent to a server that asks for a client certificate.
    pub crt: Option<PathBuf>,
    /// `crl-file FILE`: under `verify required`, the revocation lists the
    /// server's chain is checked against (every certificate of it).
    pub crl_file: Option<PathBuf>,
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

    /// How a stream goes to the server, as HAProxy 2.6's `connect_server()`
    /// picks it: a websocket stream (`websocket`) follows `ws`. With a
    /// `proto`, or without `ssl` and `alpn`, the protocol is the server's
    /// (`ws auto`), HTTP/1.1 (`ws h1`) or HTTP/2 (`ws h2`, prior
    /// knowledge); otherwise ALPN decides. With `ssl` and `alpn` a
    /// websocket's handshake offers `http/1.1` alone (`ws h1`, or `ws
    /// auto` when the list has it) or `h2` alone (`ws h2`).
    pub fn route(&self, websocket: bool) -> Route {
        let tls_alpn = self.ssl && !self.alpn.is_empty();
        let alpn = match self.ws {
            _ if !websocket || !tls_alpn => None,
            WsProto::Auto => self
                .alpn
                .iter()
                .any(|p| p == "http/1.1")
                .then_some("http/1.1"),
            WsProto::H1 => Some("http/1.1"),
            WsProto::H2 => Some("h2"),
        };
        if self.proto_h2 || self.proto_h1 || !tls_alpn {
            // (Without `ssl`, an `alpn` list is for `connect ssl` check
            // steps only: HTTP/1.1, HAProxy's default multiplexer.)
            let h2 = match self.ws {
                _ if !websocket => self.proto_h2,
                WsProto::Auto => self.proto_h2,
                WsProto::H1 => false,
                WsProto::H2 => true,
            };
            return Route {
                h2,
                negotiate: false,
                alpn,
            };
        }
        let h2 = match alpn {
            Some(a) => a == "h2",
            None => self.alpn.iter().any(|p| p == "h2"),
        };
        Route {
            h2,
            negotiate: true,
            alpn,
        }
    }

    /// A websocket stream may take a connection the server's other
    /// streams use (HAProxy 2.6's `srv_check_reuse_ws`): its protocol is
    /// the same; with ALPN, the list is the one protocol `ws` asks for
    /// (any one protocol with `ws auto`). Otherwise it connects anew.
    pub fn ws_reuse(&self) -> bool {
        if self.proto_h2 || self.proto_h1 || !self.ssl || self.alpn.is_empty() {
            return match self.ws {
                WsProto::Auto => true,
                WsProto::H2 => self.proto_h2,
                WsProto::H1 => !self.proto_h2,
            };
        }
        match self.ws {
            WsProto::Auto => self.alpn.len() == 1,
            WsProto::H2 => self.alpn == ["h2"],
            WsProto::H1 => self.alpn == ["http/1.1"],
        }
    }

    /// HTTP/2 to the server: `proto h2`, or `alpn` offering `h2` (the
    /// handshake then decides) unless `proto h1` forces HTTP/1.1.
    pub fn speaks_h2(&self) -> bool {
        self.proto_h2 || (!self.proto_h1 && self.alpn.iter().any(|p| p == "h2"))
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
            max_reuse: None,
            pool_purge_delay: Duration::from_secs(5),
            tls: ServerTlsPolicy::default(),
            send_proxy: 0,
            pp_v2: PpV2Options::default(),
            check_send_proxy: false,
            cookie: None,
            dyncookie_key: None,
            resolvers: None,
            resolve_prefer_v4: false,
            init_addr: None,
            allow_dup_ip: false,
            ignore_weight: false,
            proto_h2: false,
            proto_fcgi: false,
            proto_h1: false,
            ws: WsProto::Auto,
            tfo: false,
            proto_none: false,
            alpn: Vec::new(),
            check_proto: None,
            check_alpn: None,
            socks4: None,
            check_via_socks4: false,
            resolve_net: Vec::new(),
            map_ports: false,
            unix: None,
            agent_check: false,
            agent_port: None,
            agent_addr: None,
            id: None,
            check_port: None,
            check_addr: None,
            check_addr_port: None,
            pool_low_conn: 0,
            dynamic: false,
            no_ssl: false,
            ssl_ctx: false,
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

/// `ws auto|h1|h2`: the protocol of a websocket stream to the server.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum WsProto {
    /// The server's own (with ALPN, `http/1.1` when its list has it).
    #[default]
    Auto,
    H1,
    H2,
}

/// How a stream reaches a server ([`ServerOptions::route`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Over HTTP/2 (when `negotiate`: if ALPN picks `h2`).
    pub h2: bool,
    /// ALPN decides between HTTP/2 and HTTP/1.1.
    pub negotiate: bool,
    /// The one protocol the TLS handshake offers instead of `alpn`.
    pub alpn: Option<&'static str>,
}

/// `check-proto`: HAProxy's multiplexers a health check may use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CheckProto {
    H1,
    H2,
    /// `fcgi`: FastCGI, with the backend's application.
    Fcgi,
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

/// A server's UNIX socket address (HAProxy's `abns@NAME`, `unix@PATH` or
/// `/PATH`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnixTarget {
    /// A Linux abstract socket, its name as written.
    Abns(String),
    /// A socket in the file system.
    Path(std::path::PathBuf),
}

impl std::fmt::Display for UnixTarget {
    /// As HAProxy writes the address (`abns@NAME`, `unix@PATH`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnixTarget::Abns(n) => write!(f, "abns@{n}"),
            UnixTarget::Path(p) => write!(f, "unix@{}", p.display()),
        }
    }
}
