//! `bind` lines: addresses or sockets, their options, and their TLS
//! settings (`ssl crt ...`).

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::loc::Loc;

/// `bind ADDR:PORT[,ADDR:PORT...] [name N] [ssl crt F ...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bind {
    /// All addresses of the line (comma lists and port ranges expanded).
    /// `:80` and `*:80` are `0.0.0.0:80`; `:::80` is `[::]:80`.
    pub addrs: Vec<SocketAddr>,
    pub name: Option<String>,
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
    /// `maxconn N`: each listener of the line (each address, each other
    /// socket) accepts at most N connections at once, the others wait in
    /// the kernel's backlog; 0 (the default): the frontend's limit only.
    pub maxconn: u32,
    /// Socket options of the line's TCP listeners.
    pub tcp: TcpBindOpts,
    /// `accept-netscaler-cip MAGIC`: every connection starts with a
    /// NetScaler Client IP header with that magic number (after the
    /// PROXY header when `accept-proxy` is there too), whose addresses
    /// are then the client's.
    pub netscaler_cip: Option<u32>,
}

/// The socket options of a bind line's TCP listeners (its addresses),
/// HAProxy 2.6's: ignored on `fd@`, UNIX and abstract sockets, as
/// `defer-accept` is.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TcpBindOpts {
    /// `mss N` (1 to 65535 either sign): a positive N is the MSS the
    /// listener advertises (`TCP_MAXSEG`); a negative one is taken and,
    /// as by HAProxy 2.6, not applied (the system's MSS stays).
    pub mss: Option<i32>,
    /// `tcp-ut T`: `TCP_USER_TIMEOUT` of the accepted connections, in
    /// milliseconds (0: the system's).
    pub user_timeout_ms: u32,
    /// `tfo`: TCP fast open on the listener (`TCP_FASTOPEN`, its queue
    /// the listener's backlog).
    pub tfo: bool,
    /// `transparent`: the listener may bind an address that is not
    /// local (`IP_TRANSPARENT`/`IPV6_TRANSPARENT`, else `IP_FREEBIND`).
    /// Set on sockets ebb creates only.
    pub transparent: bool,
    /// `interface NAME`: the listener takes packets from that interface
    /// only (`SO_BINDTODEVICE`). Set on sockets ebb creates only.
    pub interface: Option<String>,
    /// `namespace NAME`: the listener's socket is made in the network
    /// namespace [`NETNS_DIR`]`/NAME` (iproute2's named namespaces).
    pub namespace: Option<String>,
}

/// Where `bind ... namespace NAME` finds NAME (iproute2's directory, and
/// HAProxy's).
pub const NETNS_DIR: &str = "/var/run/netns";

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

/// `verify` on a `bind ... ssl` line: whether client certificates are
/// asked for (HAProxy's default: `none`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ClientVerify {
    /// Not asked for.
    #[default]
    None,
    /// Asked for; a client may send none, one it sends must verify
    /// (unless its error is ignored).
    Optional,
    /// Asked for and needed: the handshake fails without one.
    Required,
}

impl ClientVerify {
    /// `verify`'s value on a bind or `crt-list` line (HAProxy's message).
    pub fn parse(v: &str) -> Result<ClientVerify, String> {
        match v {
            "none" => Ok(ClientVerify::None),
            "optional" => Ok(ClientVerify::Optional),
            "required" => Ok(ClientVerify::Required),
            o => Err(format!(
                "'verify' : unknown verify method '{o}', only 'none', 'optional', and 'required' are supported"
            )),
        }
    }
}

/// Client-certificate settings of a `bind ... ssl` line (`verify`,
/// `ca-file`, `ca-verify-file`, `crl-file`, `ca-ignore-err`,
/// `crt-ignore-err`, `no-ca-names`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ClientAuthConf {
    pub verify: ClientVerify,
    /// CAs that verify client certificates, also named in the
    /// CertificateRequest (unless `no_ca_names`). A file or a directory.
    pub ca_file: Option<PathBuf>,
    /// CAs that verify client certificates but are not named.
    pub ca_verify_file: Option<PathBuf>,
    /// Revocation lists (PEM); every CA of the chain needs one.
    pub crl_file: Option<PathBuf>,
    /// OpenSSL verify error IDs ignored at depth > 0 (bit N: ID N;
    /// `all`: every bit).
    pub ca_ignore_err: u64,
    /// The same at depth 0 (the client's own certificate).
    pub crt_ignore_err: u64,
    pub no_ca_names: bool,
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
    /// Client certificates (`verify`, `ca-file`...).
    pub client: ClientAuthConf,
    /// Where relative `ca-file`/`crl-file` paths of a `crt-list` line
    /// point (`ca-base`, resolved like every config path).
    pub ca_base: PathBuf,
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
