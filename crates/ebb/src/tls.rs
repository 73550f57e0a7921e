//! TLS configuration: what a `bind ... ssl` line and a `server ... ssl`
//! option turn into (rustls configs), and the acceptor that keeps a
//! listener's certificates swappable for reloads.
//!
//! Server side ([`TlsAcceptor`]):
//! - Each `crt FILE` is a PEM file with the certificate chain (leaf first)
//!   and, HAProxy style, the private key; a `key FILE` on the line gives the
//!   key to every `crt` file that holds none. The key must match the leaf
//!   (checked at load, so a mismatch is a start-up error, not a failed
//!   handshake later).
//! - SNI: each certificate answers for the DNS names of its subjectAltName
//!   extension (the subject CN is ignored, as browsers and webpki do). A
//!   name is matched exactly (ASCII case-insensitively), then as a
//!   `*.domain` wildcard covering one label. When two certificates claim a
//!   name, the first listed wins. The first `crt` is the default: it
//!   answers a client that sent no SNI or an unknown name (HAProxy's
//!   behaviour with a default certificate), so an unknown name is never a
//!   failed handshake here; the client's own verification decides.
//! - `ssl-min-ver TLSv1.3` offers TLS 1.3 only; otherwise 1.2 and 1.3
//!   (rustls has nothing older). `alpn h2,http/1.1` lists the protocols in
//!   the server's order of preference: rustls picks the first of them that
//!   the client offers. A client offering ALPN but none of these fails the
//!   handshake (RFC 7301 §3.2, `no_application_protocol`); a client
//!   offering no ALPN gets none.
//! - Resumption: stateless tickets (the crypto provider's `Ticketer`, keys
//!   rotated by rustls every 6 h) for clients that take them, and a
//!   server-side session-ID cache for TLS 1.2 clients that do not. Both are
//!   per acceptor and survive [`TlsAcceptor::reload`], so a reload does not
//!   force full handshakes on every returning client.
//! - [`TlsAcceptor::reload`] re-reads the files; new handshakes use the new
//!   certificates, connections already running keep theirs. A file that
//!   does not load leaves the old configuration in place.
//!
//! Client side ([`client_config`]): `verify required` checks the server's
//! chain against `ca-file`, or against the system's roots when no
//! `ca-file` is given; `verify none` accepts any certificate (see
//! [`client_config`]).
//!
//! The crypto provider is ring, or aws-lc-rs with ebb's `aws-lc-rs` cargo
//! feature.

use std::collections::HashMap;
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, OnceLock, RwLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use crate::config::{BindSsl, ConfigError, Loc, TlsVersion, Verify};
use crate::transport::Transport;

#[cfg(test)]
pub mod testutil;

/// Entries of the server-side session-ID cache of one `bind` line.
///
/// 20,000 is HAProxy's `tune.ssl.cachesize` default. The cache only serves
/// TLS 1.2 clients that do not take tickets (tickets are stateless and
/// cost no server memory), and an entry is the session ID plus rustls'
/// encoded session state: about 150 bytes, so a full cache is about 3 MB.
/// rustls evicts the oldest entries past the limit.
pub const SESSION_CACHE_SIZE: usize = 20_000;

/// The crypto provider: ring, or aws-lc-rs with the `aws-lc-rs` feature.
pub fn provider() -> Arc<CryptoProvider> {
    static P: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    P.get_or_init(|| {
        #[cfg(feature = "aws-lc-rs")]
        let p = rustls::crypto::aws_lc_rs::default_provider();
        #[cfg(not(feature = "aws-lc-rs"))]
        let p = rustls::crypto::ring::default_provider();
        Arc::new(p)
    })
    .clone()
}

fn new_ticketer() -> Result<Arc<dyn ProducesTickets>, rustls::Error> {
    #[cfg(feature = "aws-lc-rs")]
    return rustls::crypto::aws_lc_rs::Ticketer::new();
    #[cfg(not(feature = "aws-lc-rs"))]
    return rustls::crypto::ring::Ticketer::new();
}

/// One loaded `crt` file: the key, and the SAN DNS names it answers for
/// (lower case; wildcards kept as `*.domain`).
struct LoadedCert {
    key: Arc<CertifiedKey>,
    names: Vec<String>,
}

/// Reads a whole file, with the error text of a config message.
fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| e.to_string())
}

/// Loads the chain (and key, from `crt` itself or else from `key`) of one
/// certificate. Errors are the "why" of `cannot load certificate X: why`.
fn load_cert(
    crt: &Path,
    key: Option<&Path>,
    provider: &CryptoProvider,
) -> Result<LoadedCert, String> {
    let pem = read_file(crt)?;
    let mut chain = Vec::new();
    for c in CertificateDer::pem_slice_iter(&pem) {
        chain.push(c.map_err(|e| format!("bad PEM: {e}"))?);
    }
    if chain.is_empty() {
        return Err("no certificate (no BEGIN CERTIFICATE block) in it".into());
    }
    let pkey = match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(k) => k,
        Err(rustls::pki_types::pem::Error::NoItemsFound) => match key {
            Some(kp) => {
                let kpem = read_file(kp).map_err(|e| format!("key file {}: {e}", kp.display()))?;
                PrivateKeyDer::from_pem_slice(&kpem).map_err(|e| match e {
                    rustls::pki_types::pem::Error::NoItemsFound => {
                        format!("no private key in key file {}", kp.display())
                    }
                    e => format!("key file {}: bad PEM: {e}", kp.display()),
                })?
            }
            None => return Err("no private key in it, and no `key FILE` given".into()),
        },
        Err(e) => return Err(format!("bad PEM: {e}")),
    };
    let names = san_dns_names(&chain[0])?;
    let ck = CertifiedKey::from_der(chain, pkey, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            "the private key does not match the certificate".to_string()
        }
        e => format!("unusable private key: {e}"),
    })?;
    Ok(LoadedCert {
        key: Arc::new(ck),
        names,
    })
}

/// The DNS names of a certificate's subjectAltName extension, lower case.
///
/// Parsed with rustls-webpki (already in rustls' dependency tree, and the
/// parser rustls itself verifies with): `Cert::valid_dns_names` walks the
/// SAN extension and keeps well-formed DNS names and wildcards. That beats
/// a hand-written DER walk (more code that reads outside input) and a
/// second X.509 parser (a new dependency tree).
fn san_dns_names(leaf: &CertificateDer<'_>) -> Result<Vec<String>, String> {
    let ee = webpki::EndEntityCert::try_from(leaf)
        .map_err(|e| format!("cannot parse the certificate: {e}"))?;
    Ok(ee
        .valid_dns_names()
        .map(|n| n.to_ascii_lowercase())
        .collect())
}

/// Picks a certificate by SNI; the first is the default.
#[derive(Debug)]
struct SniResolver {
    /// INVARIANT: not empty.
    keys: Vec<Arc<CertifiedKey>>,
    /// Exact names (lower case) -> index in `keys`.
    exact: HashMap<String, usize>,
    /// `*.domain` certificates, keyed by `domain` (lower case).
    wildcard: HashMap<String, usize>,
    /// Names per certificate, for [`TlsAcceptor::names`].
    names: Vec<Vec<String>>,
}

impl SniResolver {
    fn new(certs: Vec<LoadedCert>) -> Self {
        let mut r = SniResolver {
            keys: Vec::with_capacity(certs.len()),
            exact: HashMap::new(),
            wildcard: HashMap::new(),
            names: Vec::with_capacity(certs.len()),
        };
        for (i, c) in certs.into_iter().enumerate() {
            for n in &c.names {
                match n.strip_prefix("*.") {
                    Some(dom) => r.wildcard.entry(dom.to_string()).or_insert(i),
                    None => r.exact.entry(n.clone()).or_insert(i),
                };
            }
            r.keys.push(c.key);
            r.names.push(c.names);
        }
        r
    }

    /// Index of the certificate for `sni` (the default, 0, when none fits).
    fn pick(&self, sni: Option<&str>) -> usize {
        let Some(name) = sni else { return 0 };
        let lower;
        let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            lower = name.to_ascii_lowercase();
            lower.as_str()
        } else {
            name
        };
        if let Some(&i) = self.exact.get(name) {
            return i;
        }
        if let Some((_, dom)) = name.split_once('.') {
            if let Some(&i) = self.wildcard.get(dom) {
                return i;
            }
        }
        0
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.keys.get(self.pick(hello.server_name())).cloned()
    }
}

/// What a reload replaces: the rustls config and the names it serves.
struct Current {
    config: Arc<ServerConfig>,
    names: Vec<Vec<String>>,
}

/// The TLS side of one `bind ... ssl` line, shared by every thread's
/// listener for it (`Send + Sync`; one read lock per accepted connection).
pub struct TlsAcceptor {
    ssl: BindSsl,
    loc: Loc,
    sessions: Arc<ServerSessionMemoryCache>,
    ticketer: Arc<dyn ProducesTickets>,
    current: RwLock<Current>,
}

impl std::fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("ssl", &self.ssl)
            .field("loc", &self.loc)
            .finish()
    }
}

impl TlsAcceptor {
    /// Loads the files of `ssl`. Errors are `file:line: cannot load
    /// certificate X: why` (the `bind` line's location).
    pub fn new(ssl: &BindSsl, loc: &Loc) -> Result<TlsAcceptor, ConfigError> {
        let err = |message: String| ConfigError {
            loc: loc.clone(),
            message,
        };
        let ticketer =
            new_ticketer().map_err(|e| err(format!("cannot set up TLS session tickets: {e}")))?;
        let sessions = ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
        let current = build(ssl, loc, &sessions, &ticketer)?;
        Ok(TlsAcceptor {
            ssl: ssl.clone(),
            loc: loc.clone(),
            sessions,
            ticketer,
            current: RwLock::new(current),
        })
    }

    /// The configuration new handshakes use now.
    pub fn config(&self) -> Arc<ServerConfig> {
        let cur = self.current.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&cur.config)
    }

    /// Wraps an accepted socket in a server-side TLS stream.
    pub fn accept(&self, sock: TcpStream) -> std::io::Result<Transport> {
        Transport::accept_tls(sock, self.config())
    }

    /// The SAN DNS names of each certificate, in `crt` order (the first is
    /// the default certificate).
    pub fn names(&self) -> Vec<Vec<String>> {
        let cur = self.current.read().unwrap_or_else(|p| p.into_inner());
        cur.names.clone()
    }

    /// Re-reads the certificate files (SIGHUP). On error the running
    /// configuration stays and the error says which file failed and why.
    pub fn reload(&self) -> Result<(), ConfigError> {
        self.replace_with(&self.ssl, &self.loc)
    }

    /// As [`TlsAcceptor::reload`], from new settings (same `bind` line read
    /// again, whose files may have changed names). Sessions and ticket keys
    /// are kept. The settings are not remembered: a later `reload` reads
    /// the files given to [`TlsAcceptor::new`].
    pub fn replace_with(&self, ssl: &BindSsl, loc: &Loc) -> Result<(), ConfigError> {
        let next = build(ssl, loc, &self.sessions, &self.ticketer)?;
        let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
        *cur = next;
        Ok(())
    }
}

/// Builds the rustls server configuration of a `bind ... ssl` line.
fn build(
    ssl: &BindSsl,
    loc: &Loc,
    sessions: &Arc<ServerSessionMemoryCache>,
    ticketer: &Arc<dyn ProducesTickets>,
) -> Result<Current, ConfigError> {
    let err = |message: String| ConfigError {
        loc: loc.clone(),
        message,
    };
    if ssl.crts.is_empty() {
        return Err(err("'ssl' needs at least one 'crt FILE'".into()));
    }
    let provider = provider();
    let mut certs = Vec::with_capacity(ssl.crts.len());
    for crt in &ssl.crts {
        let c = load_cert(crt, ssl.key.as_deref(), &provider)
            .map_err(|why| err(format!("cannot load certificate {}: {why}", crt.display())))?;
        certs.push(c);
    }
    let versions: &[&'static rustls::SupportedProtocolVersion] = match ssl.min_ver {
        Some(TlsVersion::Tls13) => &[&rustls::version::TLS13],
        Some(TlsVersion::Tls12) | None => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let resolver = SniResolver::new(certs);
    let names = resolver.names.clone();
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| err(format!("TLS settings refused: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = ssl.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    config.session_storage = Arc::clone(sessions) as _;
    config.ticketer = Arc::clone(ticketer);
    Ok(Current {
        config: Arc::new(config),
        names,
    })
}

/// The rustls client configuration of `server ... ssl [verify none|required]
/// [ca-file FILE]`.
///
/// - `Verify::Required` with a `ca-file`: the server's chain must lead to a
///   certificate of that PEM file, and its name (the `sni` option, else the
///   server's address) must match.
/// - `Verify::Required` without `ca-file`: the same against the system's
///   trust store (`rustls-native-certs`: `/etc/ssl/certs` on Debian, or
///   `SSL_CERT_FILE`/`SSL_CERT_DIR`). HAProxy refuses this combination
///   instead; ebb takes the system roots since they exist. An empty store
///   is an error.
/// - `Verify::None`: **dangerous** — any certificate is accepted, from
///   anyone: the link is encrypted but not authenticated, so an active
///   attacker between ebb and the server can read and change the traffic.
///   The handshake signatures are still checked against the certificate
///   the server presented (the server proves it holds that key, whoever it
///   is). Meant for servers on a trusted network with self-signed
///   certificates, as HAProxy's `verify none`.
///
/// Clients keep rustls' default session cache (256 sessions), so pooled
/// reconnects to a server resume.
pub fn client_config(verify: Verify, ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS settings refused: {e}"))?;
    let config = match verify {
        Verify::None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth(),
        Verify::Required => {
            let roots = match ca_file {
                Some(p) => roots_from_file(p)?,
                None => system_roots()?,
            };
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    Ok(Arc::new(config))
}

fn roots_from_file(path: &Path) -> Result<RootCertStore, String> {
    let why = |m: String| format!("cannot load CA file {}: {m}", path.display());
    let pem = read_file(path).map_err(why)?;
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&pem) {
        let c = c.map_err(|e| why(format!("bad PEM: {e}")))?;
        roots
            .add(c)
            .map_err(|e| why(format!("unusable certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(why("no certificate in it".into()));
    }
    Ok(roots)
}

fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (_added, _ignored) = roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .first()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        return Err(format!(
            "no ca-file given and no system CA certificate found{why}; add 'ca-file FILE'"
        ));
    }
    Ok(roots)
}

/// `verify none`: accepts any server certificate (see [`client_config`]).
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
