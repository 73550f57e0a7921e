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
//!   (rustls has nothing older). `alpn http/1.1` lists the protocols in
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
//! - Every loaded certificate file is recorded in the certificate store
//!   ([`ckch`]); the CLI's `commit ssl cert` replaces it in memory in each
//!   bind line's resolver (`SniSwap`) and server's certificate.
//!
//! Client side ([`client_config`]): `verify required` checks the server's
//! chain against `ca-file`, or against the system's roots when no
//! `ca-file` is given; `verify none` accepts any certificate (see
//! [`client_config`]).
//!
//! The crypto provider is ring, or aws-lc-rs with ebb's `aws-lc-rs` cargo
//! feature.

use std::path::Path;
use std::sync::{Arc, OnceLock, RwLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::{ProducesTickets, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use crate::config::{
    BindSsl, ClientVerify, Config, ConfigError, Loc, ServerTlsPolicy, TlsVersion, Verify,
};
use crate::tls::hello::HelloGate;

pub mod cafile;
mod certload;
pub mod ckch;
pub mod clientauth;
pub mod hello;
mod legacy;
mod sni;

use certload::{cert_specs, load_cert, read_file};
pub(crate) use certload::{certify, der_tlv};
pub use sni::take_chosen;
pub(crate) use sni::SniSwap;
use sni::{CertSrc, SniResolver};

#[cfg(test)]
pub mod testutil;

/// Entries of the server-side session-ID cache of one `bind` line.
///
/// 20,000 is HAProxy's `tune.ssl.cachesize` default. The cache only serves
/// TLS 1.2 clients that do not take tickets (tickets are stateless and
/// cost no server memory). An entry is a 32-byte session ID (kept twice,
/// in rustls' map and its eviction queue) plus the encoded session state
/// (about 100 bytes: secret, suite, SNI, ALPN, times), roughly 250 bytes
/// with allocation overhead, so a full cache is about 5 MB per `bind`
/// line. rustls evicts the oldest entries past the limit.
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

/// The gates of the server configurations built here, so that a
/// connection set up from the configuration alone finds its gate. Entries
/// die with their configuration (the `Weak` keeps its address from being
/// reused while the entry exists); dead ones are dropped at each build.
type GateEntry = (std::sync::Weak<ServerConfig>, Arc<Gate>);
static GATES: RwLock<Vec<GateEntry>> = RwLock::new(Vec::new());

fn register_gate(config: &Arc<ServerConfig>, gate: Arc<Gate>) {
    let mut g = GATES.write().unwrap_or_else(|p| p.into_inner());
    g.retain(|(w, _)| w.strong_count() > 0);
    g.push((Arc::downgrade(config), gate));
}

/// The hello gate of a configuration built by [`TlsAcceptor`] (one read
/// lock and a scan of a list as long as the live `bind ... ssl` lines).
pub fn gate_for(config: &Arc<ServerConfig>) -> Option<Arc<dyn HelloGate>> {
    let g = GATES.read().unwrap_or_else(|p| p.into_inner());
    g.iter()
        .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(config)))
        .map(|(_, gate)| Arc::clone(gate) as Arc<dyn HelloGate>)
}

/// One TLS policy's configurations: the bind line's, or a `crt-list`
/// line's with its own options.
struct Policy {
    /// Versions it allows (wire numbers).
    versions: Vec<u16>,
    config: Arc<ServerConfig>,
    /// In server order, the same configuration with the ChaCha20 suites
    /// first, for clients that list ChaCha20 first (OpenSSL's
    /// `SSL_OP_PRIORITIZE_CHACHA`, which HAProxy sets): clients without AES
    /// instructions keep their fast cipher.
    chacha: Option<Arc<ServerConfig>>,
    /// Its client-certificate verifier (`verify optional|required`).
    client_auth: Option<Arc<clientauth::ClientAuth>>,
}

/// The bind line's look at the ClientHello (see [`crate::tls::hello`]).
struct Gate {
    resolver: Arc<SniSwap>,
    /// INVARIANT: not empty; 0 is the bind line's. The resolver gives
    /// each certificate's index in it.
    policies: Vec<Policy>,
}

/// ChaCha20-Poly1305 suites (TLS 1.3, ECDHE-RSA, ECDHE-ECDSA).
fn is_chacha(id: u16) -> bool {
    matches!(id, 0x1303 | 0xcca8 | 0xcca9)
}

impl Gate {
    /// The policy of the certificate a name gets (`found`: its
    /// candidates; the first, or the default one for an unknown name).
    fn policy_index(&self, r: &SniResolver, found: Option<&[usize]>) -> usize {
        let cert = found
            .and_then(|c| c.first())
            .or(r.default.first())
            .copied()
            .unwrap_or(0);
        r.policy.get(cert).copied().unwrap_or(0)
    }
}

impl HelloGate for Gate {
    fn own_cert(&self, h: &hello::HelloInfo) -> Option<Arc<CertifiedKey>> {
        // Without the offer's signature schemes every candidate is usable:
        // the resolver's own preference (its choice replaces this one when
        // it runs: a full handshake).
        let r = self.resolver.get();
        r.pick(r.candidates(h.sni.as_deref())?, |_| true)
    }

    fn client_auth(&self, h: &hello::HelloInfo) -> Option<Arc<clientauth::ClientAuth>> {
        let r = self.resolver.get();
        let pi = self.policy_index(&r, r.find(h.sni.as_deref()));
        self.policies
            .get(pi)
            .or(self.policies.first())?
            .client_auth
            .clone()
    }

    fn check(&self, h: &hello::HelloInfo) -> Result<Option<Arc<ServerConfig>>, (u8, String)> {
        let r = self.resolver.get();
        let found = r.find(h.sni.as_deref());
        if r.strict && found.is_none() {
            return Err((
                112,
                "strict-sni: no certificate for the name asked for (alert unrecognized_name sent)"
                    .to_string(),
            ));
        }
        let pi = self.policy_index(&r, found);
        let Some(p) = self.policies.get(pi).or(self.policies.first()) else {
            return Ok(None);
        };
        if !p.versions.iter().any(|v| h.offers(*v)) {
            let allowed: Vec<String> = p.versions.iter().map(|v| hello::version_name(*v)).collect();
            return Err((
                70,
                format!(
                    "no TLS version in common: the client offers {} at most, this bind allows {} (alert protocol_version sent)",
                    hello::version_name(h.max_version()),
                    allowed.join(", ")
                ),
            ));
        }
        if h.first_suite.is_some_and(is_chacha) {
            if let Some(c) = &p.chacha {
                return Ok(Some(Arc::clone(c)));
            }
        }
        if pi == 0 {
            Ok(None)
        } else {
            Ok(Some(Arc::clone(&p.config)))
        }
    }
}

/// What a reload replaces: the rustls config and the names it serves,
/// and the settings of its policies (the bind line's, then each
/// `crt-list` overlay's), to rebuild them when a CA or CRL file is
/// committed on the CLI.
struct Current {
    config: Arc<ServerConfig>,
    resolver: Arc<SniSwap>,
    ssl: BindSsl,
    overlays: Vec<BindSsl>,
}

/// What every thread's listener of a bind line shares, and what a CA or
/// CRL commit rebuilds ([`cafile::TrustUser`]).
struct Shared {
    sessions: Arc<ServerSessionMemoryCache>,
    ticketer: Arc<dyn ProducesTickets>,
    current: RwLock<Current>,
}

/// The TLS side of one `bind ... ssl` line, shared by every thread's
/// listener for it (`Send + Sync`; one read lock per accepted connection).
pub struct TlsAcceptor {
    ssl: BindSsl,
    loc: Loc,
    shared: Arc<Shared>,
}

/// Whether a policy verifies client certificates with the file at `path`.
fn verifies_with(ssl: &BindSsl, path: &str) -> bool {
    trust_files(ssl).iter().any(|p| p == path)
}

impl Shared {
    /// Links the bind line to the CA and CRL files its policies verify
    /// client certificates with (HAProxy links them under `verify
    /// optional|required` only).
    fn attach(self: &Arc<Self>) {
        let cur = self.current.read().unwrap_or_else(|p| p.into_inner());
        cur.resolver.set_owner(Arc::downgrade(self));
        for ssl in std::iter::once(&cur.ssl).chain(&cur.overlays) {
            for p in trust_files(ssl) {
                let me: std::sync::Weak<dyn cafile::TrustUser> =
                    Arc::downgrade(self) as std::sync::Weak<Shared>;
                cafile::attach(&p, me);
            }
        }
    }
}

/// The CA and CRL files a policy verifies client certificates with.
fn trust_files(ssl: &BindSsl) -> Vec<String> {
    let c = &ssl.client;
    if c.verify == ClientVerify::None {
        return Vec::new();
    }
    [&c.ca_file, &c.ca_verify_file, &c.crl_file]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect()
}

impl Shared {
    /// A `crt-list` line's `[options]` added on the CLI over the bind
    /// line's settings, and their text.
    fn line_overlay(&self, opts: &str) -> Result<(BindSsl, String), String> {
        let ssl = {
            let cur = self.current.read().unwrap_or_else(|p| p.into_inner());
            cur.ssl.clone()
        };
        certload::line_overlay(opts, &ssl, true)
    }

    /// New policies and the configuration holding them, from the stored
    /// CA and CRL files, for new handshakes.
    fn rebuild_policies(&self, cur: &mut Current, overlays: Vec<BindSsl>) -> Result<(), String> {
        let policies = make_policies(
            &cur.ssl,
            &overlays,
            &cur.resolver,
            &self.sessions,
            &self.ticketer,
            true,
        )?;
        let config = Arc::clone(&policies[0].config);
        let gate = Arc::new(Gate {
            resolver: Arc::clone(&cur.resolver),
            policies,
        });
        register_gate(&config, gate);
        cur.config = config;
        cur.overlays = overlays;
        Ok(())
    }

    /// The policy of a line added on the CLI with options (`o`: the bind
    /// line's settings with them): an existing one with the same
    /// settings, else a new one.
    fn policy_for(self: &Arc<Self>, o: BindSsl) -> Result<usize, String> {
        let idx = {
            let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = cur.overlays.iter().position(|x| *x == o) {
                return Ok(i + 1);
            }
            let mut overlays = cur.overlays.clone();
            overlays.push(o);
            self.rebuild_policies(&mut cur, overlays)?;
            cur.overlays.len()
        };
        self.attach();
        Ok(idx)
    }

    /// Turns the policies no certificate uses (`used`: the policy of each
    /// certificate) into copies of the bind line's (indexes are kept), and
    /// lets go of the CA and CRL files only they verified with (a `del ssl
    /// crt-list` of a line added with options).
    fn prune(self: &Arc<Self>, used: &[usize]) {
        let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
        let mut overlays = cur.overlays.clone();
        let mut dropped = Vec::new();
        for (i, o) in overlays.iter_mut().enumerate() {
            if !used.contains(&(i + 1)) && *o != cur.ssl {
                dropped.extend(trust_files(o));
                *o = cur.ssl.clone();
            }
        }
        if dropped.is_empty() && overlays == cur.overlays {
            return;
        }
        if self.rebuild_policies(&mut cur, overlays).is_err() {
            // (The policies in place stay; they verify with files the
            // store still holds.)
            return;
        }
        let kept: Vec<String> = std::iter::once(&cur.ssl)
            .chain(&cur.overlays)
            .flat_map(trust_files)
            .collect();
        let me: std::sync::Weak<dyn cafile::TrustUser> =
            Arc::downgrade(self) as std::sync::Weak<Shared>;
        for f in dropped.iter().filter(|f| !kept.contains(f)) {
            cafile::detach(f, &me);
        }
    }
}

impl cafile::TrustUser for Shared {
    /// New policies (client-certificate verifiers and the configurations
    /// holding them) from the stored files, the certificates and their
    /// resolver kept: handshakes under way and connections keep theirs.
    fn refresh(&self, path: &str) -> Result<usize, String> {
        let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
        let uses: Vec<bool> = std::iter::once(&cur.ssl)
            .chain(&cur.overlays)
            .map(|s| verifies_with(s, path))
            .collect();
        if !uses.contains(&true) {
            return Ok(0);
        }
        let overlays = cur.overlays.clone();
        self.rebuild_policies(&mut cur, overlays)?;
        // A dot per certificate of a policy that uses the file, as
        // HAProxy rebuilds each certificate's instance.
        let r = cur.resolver.get();
        Ok(r.policy
            .iter()
            .filter(|p| uses.get(**p).copied().unwrap_or(false))
            .count())
    }
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
    /// The session-ID cache of a bind line (`tune.ssl.cachesize`; at
    /// least one entry, since rustls' cache needs one; 0 is handled by
    /// not using it).
    fn cache(ssl: &BindSsl) -> Arc<ServerSessionMemoryCache> {
        let n = ssl
            .cache_size
            .map_or(SESSION_CACHE_SIZE, |n| (n as usize).max(1));
        ServerSessionMemoryCache::new(n)
    }

    /// Loads the files of `ssl`. Errors are `file:line: cannot load
    /// certificate X: why` (the `bind` line's location).
    pub fn new(ssl: &BindSsl, loc: &Loc) -> Result<TlsAcceptor, ConfigError> {
        let err = |message: String| ConfigError {
            loc: loc.clone(),
            message,
        };
        let ticketer =
            new_ticketer().map_err(|e| err(format!("cannot set up TLS session tickets: {e}")))?;
        let sessions = Self::cache(ssl);
        let current = build(ssl, loc, &sessions, &ticketer)?;
        let shared = Arc::new(Shared {
            sessions,
            ticketer,
            current: RwLock::new(current),
        });
        shared.attach();
        Ok(TlsAcceptor {
            ssl: ssl.clone(),
            loc: loc.clone(),
            shared,
        })
    }

    /// The configuration new handshakes use now.
    pub fn config(&self) -> Arc<ServerConfig> {
        let cur = self
            .shared
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner());
        Arc::clone(&cur.config)
    }

    /// The SAN DNS names of each certificate, in `crt` order (the first is
    /// the default certificate).
    pub fn names(&self) -> Vec<Vec<String>> {
        let cur = self
            .shared
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner());
        cur.resolver.get().names.clone()
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
        let next = build(ssl, loc, &self.shared.sessions, &self.shared.ticketer)?;
        {
            let mut cur = self
                .shared
                .current
                .write()
                .unwrap_or_else(|p| p.into_inner());
            *cur = next;
        }
        self.shared.attach();
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
    if ssl.crts.is_empty() && ssl.crt_lists.is_empty() {
        return Err(err("'ssl' needs at least one 'crt FILE'".into()));
    }
    let provider = bind_provider(ssl).map_err(&err)?;
    let mut srcs = Vec::new();
    let mut overlays: Vec<BindSsl> = Vec::new();
    for spec in cert_specs(ssl).map_err(&err)? {
        let c = load_cert(&spec.path, ssl.key.as_deref(), &provider, true).map_err(|why| {
            err(format!(
                "cannot load certificate {}: {why}",
                spec.path.display()
            ))
        })?;
        srcs.push(CertSrc {
            path: spec.path.display().to_string(),
            filter: spec.names,
            excluded: spec.excluded,
            key: c.key,
            own: c.names,
            list: spec.list,
            // Policy 0 is the bind line's; a crt-list line with options
            // gets its own (shared by lines with the same options).
            policy: match spec.overlay {
                None => 0,
                Some(o) => match overlays.iter().position(|x| *x == o) {
                    Some(i) => i + 1,
                    None => {
                        overlays.push(o);
                        overlays.len()
                    }
                },
            },
        });
    }
    let resolver = Arc::new(SniSwap::new(
        srcs,
        ssl.strict_sni,
        provider.cipher_suites.clone(),
        format!("{}:{}", loc.file, loc.line),
    ));
    let policies =
        make_policies(ssl, &overlays, &resolver, sessions, ticketer, false).map_err(&err)?;
    let config = Arc::clone(&policies[0].config);
    let gate = Arc::new(Gate {
        resolver: Arc::clone(&resolver),
        policies,
    });
    register_gate(&config, gate);
    resolver.attach();
    Ok(Current {
        config,
        resolver,
        ssl: ssl.clone(),
        overlays,
    })
}

/// The bind line's policy, then each `crt-list` overlay's, serving
/// `resolver`'s certificates; `stored`: the CA and CRL files as the store
/// holds them (a CLI commit) instead of read from disk.
fn make_policies(
    ssl: &BindSsl,
    overlays: &[BindSsl],
    resolver: &Arc<SniSwap>,
    sessions: &Arc<ServerSessionMemoryCache>,
    ticketer: &Arc<dyn ProducesTickets>,
    stored: bool,
) -> Result<Vec<Policy>, String> {
    let mut policies = Vec::with_capacity(overlays.len() + 1);
    // A crt-list line's own `verify`/`ca-file`/... (else the line's copy
    // of the bind line's).
    for o in std::iter::once(ssl).chain(overlays) {
        let p = bind_provider(o)?;
        let auth = clientauth::ClientAuth::load_from(&o.client, p.clone(), stored)?;
        policies.push(make_policy(
            o,
            p,
            resolver,
            sessions,
            ticketer,
            auth.as_ref(),
        )?);
    }
    Ok(policies)
}

/// `base` with its cipher suites chosen and ordered by a `ciphers` (TLS 1.2)
/// and a `ciphersuites` (TLS 1.3) string, on a bind or a server line.
fn with_suites(
    base: &CryptoProvider,
    ciphers: Option<&str>,
    ciphersuites: Option<&str>,
) -> Result<CryptoProvider, String> {
    let t12 = ciphers.map(crate::tls_policy::ciphers12).transpose()?;
    let t13 = ciphersuites.map(crate::tls_policy::ciphers13).transpose()?;
    let mut prov = base.clone();
    prov.cipher_suites =
        crate::tls_policy::select_suites(&base.cipher_suites, t12.as_deref(), t13.as_deref());
    Ok(prov)
}

/// The crypto provider of a TLS policy: ring's (or aws-lc-rs') suites and
/// groups, chosen and ordered by `ciphers`, `ciphersuites` and `curves`.
fn bind_provider(ssl: &BindSsl) -> Result<Arc<CryptoProvider>, String> {
    let base = provider();
    let groups = ssl
        .curves
        .as_deref()
        .map(crate::tls_policy::curves)
        .transpose()?;
    let mut prov = with_suites(&base, ssl.ciphers.as_deref(), ssl.ciphersuites.as_deref())?;
    prov.kx_groups = crate::tls_policy::select_groups(&base.kx_groups, groups.as_deref());
    if prov.kx_groups.is_empty() {
        return Err("no curve left that ebb's TLS library implements".into());
    }
    Ok(Arc::new(prov))
}

/// The server configurations of one TLS policy (see [`Policy`]).
fn make_policy(
    ssl: &BindSsl,
    provider: Arc<CryptoProvider>,
    resolver: &Arc<SniSwap>,
    sessions: &Arc<ServerSessionMemoryCache>,
    ticketer: &Arc<dyn ProducesTickets>,
    client_auth: Option<&Arc<clientauth::ClientAuth>>,
) -> Result<Policy, String> {
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    let mut wire = Vec::new();
    for v in ssl.versions().iter().rev() {
        match v {
            TlsVersion::Tls13 => {
                versions.push(&rustls::version::TLS13);
                wire.push(hello::TLS13);
            }
            TlsVersion::Tls12 => {
                versions.push(&rustls::version::TLS12);
                wire.push(hello::TLS12);
            }
        }
    }
    if versions.is_empty() {
        return Err("no TLS version left (TLSv1.2, TLSv1.3)".into());
    }
    let make = |provider: Arc<CryptoProvider>| -> Result<Arc<ServerConfig>, String> {
        let builder = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS settings refused: {e}"))?;
        // `verify optional|required`: client certificates asked for.
        let builder = match client_auth {
            Some(v) => builder.with_client_cert_verifier(
                Arc::clone(v) as Arc<dyn rustls::server::danger::ClientCertVerifier>
            ),
            None => builder.with_no_client_auth(),
        };
        let mut config =
            builder.with_cert_resolver(Arc::clone(resolver) as Arc<dyn ResolvesServerCert>);
        // HAProxy's default: the server's cipher order, unless
        // `prefer-client-ciphers`.
        config.ignore_client_order = !ssl.prefer_client_ciphers;
        config.alpn_protocols = ssl.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        if ssl.cache_size != Some(0) {
            config.session_storage = Arc::clone(sessions) as _;
        } else {
            // `tune.ssl.cachesize 0`: no server-side session state at all.
            config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        }
        if ssl.no_tls_tickets {
            // `no-tls-tickets`: no stateless tickets; TLS 1.3 resumption then
            // needs the session cache (stateful tickets), TLS 1.2 uses IDs.
            if ssl.cache_size == Some(0) {
                config.send_tls13_tickets = 0;
            }
        } else {
            config.ticketer = Arc::clone(ticketer);
        }
        Ok(Arc::new(config))
    };
    let chacha = if ssl.prefer_client_ciphers {
        None
    } else {
        // The same suites, ChaCha20 ones first (stable within each group).
        let mut p = (*provider).clone();
        p.cipher_suites
            .sort_by_key(|s| !is_chacha(u16::from(s.suite())));
        if p.cipher_suites == provider.cipher_suites {
            None
        } else {
            Some(make(Arc::new(p))?)
        }
    };
    Ok(Policy {
        versions: wire,
        config: make(provider)?,
        chacha,
        client_auth: client_auth.cloned(),
    })
}

/// `ssl-load-extra-del-ext`: the files beside a certificate `NAME.crt`
/// are `NAME.key`, `NAME.ocsp`, and `set ssl cert NAME.key` changes
/// `NAME.crt`.
static EXTRA_DEL_EXT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sets `ssl-load-extra-del-ext` for the certificates loaded from now on
/// and the CLI's `set ssl cert`.
pub fn set_extra_del_ext(on: bool) {
    EXTRA_DEL_EXT.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn extra_del_ext() -> bool {
    EXTRA_DEL_EXT.load(std::sync::atomic::Ordering::Relaxed)
}

/// Loads every `bind ... ssl` line's certificates, keys and lists (what
/// start-up does) for `ebb -c`: the errors, with the lines they come from.
pub fn check_config(cfg: &Config) -> Vec<ConfigError> {
    set_extra_del_ext(cfg.global.ssl_load_extra_del_ext);
    let mut errs = Vec::new();
    for fe in cfg.frontends() {
        for b in &fe.binds {
            if let Some(ssl) = &b.ssl {
                let ssl = BindSsl {
                    cache_size: Some(0),
                    ..ssl.clone()
                };
                if let Err(e) = TlsAcceptor::new(&ssl, &b.loc) {
                    errs.push(e);
                }
            }
        }
    }
    // Peers over TLS: the `bind ... ssl` line, each `ssl` peer's options.
    for s in cfg.peers.iter().filter(|s| !s.disabled) {
        if let Some(ssl) = &s.bind_ssl {
            let loc = s.bind.as_ref().map_or(&s.loc, |b| &b.loc);
            if let Err(e) = TlsAcceptor::new(ssl, loc) {
                errs.push(e);
            }
        }
        for p in &s.peers {
            if let Some(o) = &p.tls {
                if let Err(message) = client_config_with(o.verify(), o.ca_file.as_deref(), &o.tls) {
                    errs.push(ConfigError {
                        loc: p.loc.clone(),
                        message,
                    });
                }
            }
        }
    }
    errs
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
    client_config_with(verify, ca_file, &ServerTlsPolicy::default())
}

/// [`client_config`] with a `server` line's TLS policy: `ciphers` and
/// `ciphersuites` (offered in that order; see [`policy`]), the version
/// options, and `no-tls-tickets` (TLS 1.2 sessions resume by session ID
/// only; TLS 1.3 has only tickets, which OpenSSL clients also keep).
pub fn client_config_with(
    verify: Verify,
    ca_file: Option<&Path>,
    tls: &ServerTlsPolicy,
) -> Result<Arc<ClientConfig>, String> {
    client_config_slot(verify, ca_file, tls, false).map(|(c, _)| c)
}

/// The CA file the store holds under `path` (loaded before, or created on
/// the CLI with `new ssl ca-file`), for a server added at run time: HAProxy
/// looks its store up first. `None`: not there (read the file).
fn stored_roots(path: &Path) -> Option<Result<RootCertStore, String>> {
    let ders = cafile::contents(&path.display().to_string(), cafile::Kind::Ca)
        .filter(|d| !d.is_empty())?;
    let mut roots = RootCertStore::empty();
    for d in ders {
        if let Err(e) = roots.add(CertificateDer::from(d)) {
            return Some(Err(format!(
                "cannot load CA file {}: unusable certificate: {e}",
                path.display()
            )));
        }
    }
    Some(Ok(roots))
}

/// A `ca-file` on `add server` loads (from the store, else the file),
/// whether the server verifies or not: HAProxy's `'ca-file' : unable to
/// load PATH.`.
pub fn server_ca_file_loads(path: &Path) -> Result<(), String> {
    stored_roots(path)
        .unwrap_or_else(|| roots_from_file(path))
        .map(|_| ())
        .map_err(|_| format!("'ca-file' : unable to load {}.", path.display()))
}

/// [`client_config_with`], and the slot of the server's `crt` (which
/// [`ckch::CertSlot::release`] detaches from the store when the server is
/// deleted).
///
/// `from_store`: a server added at run time, whose `crt` and `ca-file`
/// come from the certificate store first (what a commit put there); a
/// configured server reads its files (a reload reads them again).
pub fn client_config_slot(
    verify: Verify,
    ca_file: Option<&Path>,
    tls: &ServerTlsPolicy,
    from_store: bool,
) -> Result<(Arc<ClientConfig>, Option<Arc<ckch::CertSlot>>), String> {
    let provider = Arc::new(with_suites(
        &provider(),
        tls.ciphers.as_deref(),
        tls.ciphersuites.as_deref(),
    )?);
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    for v in tls.versions().iter().rev() {
        versions.push(match v {
            TlsVersion::Tls13 => &rustls::version::TLS13,
            TlsVersion::Tls12 => &rustls::version::TLS12,
        });
    }
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS settings refused: {e}"))?;
    // `crt FILE`: the certificate (and key) shown to a server that asks
    // for one, loaded as a bind line's.
    let client_cert = match &tls.crt {
        Some(p) => {
            // A server added on the CLI takes the store's certificate
            // first (what a commit put there, as HAProxy's), else the file.
            let stored = from_store
                .then(|| ckch::stored(&p.display().to_string()))
                .flatten()
                .filter(|c| !c.chain.is_empty());
            let loaded = match stored {
                Some(c) => certify(&c, &provider, false),
                None => load_cert(p, None, &provider, false),
            };
            let key = loaded
                .map_err(|e| {
                    format!(
                        "unable to load certificate from file '{}': {e}",
                        p.display()
                    )
                })?
                .key;
            let slot = Arc::new(ckch::CertSlot::new(key));
            ckch::attach(
                &p.display().to_string(),
                ckch::User::Server(Arc::downgrade(&slot)),
            );
            Some(slot)
        }
        None => None,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match verify {
        Verify::None => Arc::new(NoVerify(Arc::clone(&provider))),
        Verify::Required => {
            let roots = match ca_file {
                Some(p) => match from_store.then(|| stored_roots(p)).flatten() {
                    Some(r) => r?,
                    None => roots_from_file(p)?,
                },
                None => system_roots()?,
            };
            let crl_path = tls.crl_file.as_deref();
            let crls = match &tls.crl_file {
                Some(p) => {
                    let crls: Vec<_> = crls_from_file(p)?.into_iter().map(|(der, _)| der).collect();
                    let name = p.display().to_string();
                    cafile::record(
                        &name,
                        cafile::Kind::Crl,
                        crls.iter().map(|d| d.as_ref()),
                        false,
                    );
                    crls
                }
                None => Vec::new(),
            };
            let ca_ders = ca_file
                .and_then(|p| cafile::contents(&p.display().to_string(), cafile::Kind::Ca))
                .unwrap_or_default();
            let trust = Arc::new(ServerTrust {
                inner: RwLock::new(server_verifier(roots, ca_ders, crls, &provider)?),
                ca_file: ca_file.map(|p| p.display().to_string()),
                crl_file: crl_path.map(|p| p.display().to_string()),
                provider: Arc::clone(&provider),
                slot: client_cert.clone(),
            });
            // HAProxy 2.6 links a server to its CA and CRL files through
            // its certificate instance: only a server with a `crt` follows
            // a commit (the others keep what they loaded).
            if client_cert.is_some() {
                for p in [&trust.ca_file, &trust.crl_file].into_iter().flatten() {
                    let me: std::sync::Weak<dyn cafile::TrustUser> =
                        Arc::downgrade(&trust) as std::sync::Weak<ServerTrust>;
                    cafile::attach(p, me);
                }
            }
            let inner = trust;
            let verify_host = match tls.verify_host.as_deref() {
                Some(h) => Some(
                    ServerName::try_from(h.to_owned())
                        .map_err(|e| format!("'verifyhost {h}': {e}"))?,
                ),
                None => None,
            };
            Arc::new(ChainThenName { inner, verify_host })
        }
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match &client_cert {
        Some(c) => builder.with_client_cert_resolver(Arc::new(OwnCert(Arc::clone(c)))),
        None => builder.with_no_client_auth(),
    };
    // With a `crt`, the sessions are the certificate's (dropped when a
    // commit changes it).
    let slot = client_cert.clone();
    let resumption = match client_cert {
        Some(c) => rustls::client::Resumption::store(c),
        None => rustls::client::Resumption::default(),
    };
    config.resumption = if tls.no_tls_tickets {
        resumption.tls12_resumption(rustls::client::Tls12Resumption::SessionIdOnly)
    } else {
        resumption
    };
    Ok((Arc::new(config), slot))
}

/// CRLs as they come and as webpki parsed them (`None`: an X.509 v1 CRL,
/// which webpki does not read and `legacy` does).
pub(crate) type LoadedCrls = Vec<(
    rustls::pki_types::CertificateRevocationListDer<'static>,
    Option<webpki::OwnedCertRevocationList>,
)>;

/// One CRL read: by webpki, else as an X.509 v1 CRL; the error is
/// webpki's.
fn parse_crl(der: &[u8]) -> Result<Option<webpki::OwnedCertRevocationList>, String> {
    match webpki::OwnedCertRevocationList::from_der(der) {
        Ok(o) => Ok(Some(o)),
        Err(_) if legacy::is_v1_crl(der) => Ok(None),
        Err(e) => Err(format!("bad CRL: {e:?}")),
    }
}

/// The CRLs of a `crl-file` (PEM blocks), each checked and parsed by
/// webpki (or read as v1 CRLs): a bind line's (client certificates) and a
/// server's. Errors are the `-c` line's text.
pub(crate) fn crls_from_file(path: &Path) -> Result<LoadedCrls, String> {
    let why = |m: String| format!("'crl-file' : unable to load {}: {m}", path.display());
    let pem = read_file(path).map_err(why)?;
    let mut out = Vec::new();
    for c in rustls::pki_types::CertificateRevocationListDer::pem_slice_iter(&pem) {
        let c = c.map_err(|e| why(format!("bad PEM: {e}")))?;
        let owned = parse_crl(c.as_ref()).map_err(why)?;
        out.push((c, owned));
    }
    if out.is_empty() {
        return Err(why("no CRL (no BEGIN X509 CRL block) in it".into()));
    }
    Ok(out)
}

/// A server's chain verifier: `roots`, and with CRLs every certificate of
/// the chain is checked, one whose issuer has no CRL failing (OpenSSL's
/// CRL_CHECK_ALL, which HAProxy sets).
/// X.509 v1 CRLs (or a chain with a v1 certificate) make every chain go
/// through `legacy` with `ca_ders` (the CA file's certificates).
fn server_verifier(
    roots: RootCertStore,
    ca_ders: Vec<Vec<u8>>,
    crls: Vec<rustls::pki_types::CertificateRevocationListDer<'static>>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<ServerChecks>, String> {
    let crls_v1 = crls.iter().any(|c| legacy::is_v1_crl(c.as_ref()));
    let crl_ders = crls.iter().map(|c| c.as_ref().to_vec()).collect();
    let webpki_crls: Vec<_> = crls
        .into_iter()
        .filter(|c| !legacy::is_v1_crl(c.as_ref()))
        .collect();
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::clone(provider),
    )
    .with_crls(webpki_crls)
    .build()
    .map_err(|e| format!("TLS verification settings refused: {e}"))?;
    Ok(Arc::new(ServerChecks {
        webpki,
        ca_ders,
        crl_ders,
        crls_v1,
    }))
}

/// A server's chain verifier: webpki's, and what `legacy` needs.
#[derive(Debug)]
struct ServerChecks {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    ca_ders: Vec<Vec<u8>>,
    crl_ders: Vec<Vec<u8>>,
    crls_v1: bool,
}

/// A `verify required` server's chain verifier, replaced when a CLI
/// commit changes its `ca-file` or `crl-file` (see [`client_config_with`]).
#[derive(Debug)]
struct ServerTrust {
    inner: RwLock<Arc<ServerChecks>>,
    ca_file: Option<String>,
    crl_file: Option<String>,
    provider: Arc<CryptoProvider>,
    /// The server's `crt`, whose TLS sessions a commit drops (as HAProxy
    /// frees a server's sessions when it rebuilds its context).
    slot: Option<Arc<ckch::CertSlot>>,
}

impl ServerTrust {
    fn get(&self) -> Arc<ServerChecks> {
        Arc::clone(&self.inner.read().unwrap_or_else(|p| p.into_inner()))
    }
}

impl cafile::TrustUser for ServerTrust {
    fn refresh(&self, path: &str) -> Result<usize, String> {
        if self.ca_file.as_deref() != Some(path) && self.crl_file.as_deref() != Some(path) {
            return Ok(0);
        }
        let (roots, ca_ders) = match &self.ca_file {
            Some(p) => {
                let mut roots = RootCertStore::empty();
                let ders = cafile::contents(p, cafile::Kind::Ca).unwrap_or_default();
                roots.add_parsable_certificates(ders.iter().cloned().map(CertificateDer::from));
                (roots, ders)
            }
            None => (system_roots()?, Vec::new()),
        };
        let crls = match &self.crl_file {
            Some(p) => cafile::contents(p, cafile::Kind::Crl)
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            None => Vec::new(),
        };
        let v = server_verifier(roots, ca_ders, crls, &self.provider)?;
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = v;
        if let Some(s) = &self.slot {
            s.forget_sessions();
        }
        Ok(1)
    }
}

/// The CRLs the store holds for a file (checked when they were set).
pub(crate) fn crls_from_ders(ders: Vec<Vec<u8>>) -> Result<LoadedCrls, String> {
    ders.into_iter()
        .map(|d| {
            let owned = parse_crl(&d)?;
            Ok((d.into(), owned))
        })
        .collect()
}

fn roots_from_file(path: &Path) -> Result<RootCertStore, String> {
    let why = |m: String| format!("cannot load CA file {}: {m}", path.display());
    let pem = read_file(path).map_err(why)?;
    let mut roots = RootCertStore::empty();
    let mut ders = Vec::new();
    for c in CertificateDer::pem_slice_iter(&pem) {
        let c = c.map_err(|e| why(format!("bad PEM: {e}")))?;
        ders.push(c.clone());
        roots
            .add(c)
            .map_err(|e| why(format!("unusable certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(why("no certificate in it".into()));
    }
    let name = path.display().to_string();
    cafile::record(
        &name,
        cafile::Kind::Ca,
        ders.iter().map(|d| d.as_ref()),
        false,
    );
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

/// A server's `crt`: sent whenever the server asks for a certificate,
/// whatever CA names it lists (as OpenSSL sends the one it was given).
#[derive(Debug)]
struct OwnCert(Arc<ckch::CertSlot>);

impl rustls::client::ResolvesClientCert for OwnCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.get())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// `verify none`: accepts any server certificate (see [`client_config`]).
/// Also what checks the handshake signatures of client certificates
/// (`clientauth`).
#[derive(Debug)]
pub(crate) struct NoVerify(pub(crate) Arc<CryptoProvider>);

thread_local! {
    /// The last server certificate this thread's verifier refused was
    /// refused for a name that is not the SNI sent (see
    /// [`take_sni_mismatch`]).
    static SNI_MISMATCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the server certificate refused last on this thread (the
/// handshake that fails calls this at once, on the thread that verified)
/// was refused for not naming the SNI sent: HAProxy 2.6's
/// `CO_ER_SSL_MISMATCH_SNI`, after which a connect is not retried (the
/// name may come from the client, which must not provoke retries).
pub(crate) fn take_sni_mismatch() -> bool {
    SNI_MISMATCH.with(|m| m.replace(false))
}

/// `verify required` as HAProxy's: the chain always (against `ca-file`
/// or the system's roots); the names against the SNI sent, else against
/// `verifyhost`, else not at all ("when no name is found, the
/// certificate's names are ignored"). A connection made by IP address
/// sends no SNI (rustls sends none for an address).
#[derive(Debug)]
struct ChainThenName {
    inner: Arc<ServerTrust>,
    verify_host: Option<ServerName<'static>>,
}

impl ServerCertVerifier for ChainThenName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let no_sni = matches!(server_name, ServerName::IpAddress(_));
        // (What a check's verification left is not this one's.)
        SNI_MISMATCH.with(|m| m.set(false));
        let name = match &self.verify_host {
            Some(h) if no_sni => h,
            _ => server_name,
        };
        let checks = self.inner.get();
        let presented: Vec<&[u8]> = intermediates.iter().map(|c| c.as_ref()).collect();
        let r = if legacy::needed(end_entity.as_ref(), &presented, checks.crls_v1) {
            legacy_server_check(&checks, end_entity, &presented, name, now)
        } else {
            checks
                .webpki
                .verify_server_cert(end_entity, intermediates, name, ocsp_response, now)
        };
        match r {
            // The chain checked out (webpki checks it before the name).
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) if no_sni && self.verify_host.is_none() => Ok(ServerCertVerified::assertion()),
            Err(
                e @ rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                ),
            ) if !no_sni => {
                SNI_MISMATCH.with(|m| m.set(true));
                Err(e)
            }
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // (As webpki's, and a v1 certificate's key too.)
        NoVerify(Arc::clone(&self.inner.provider)).verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // (As webpki's, and a v1 certificate's key too.)
        NoVerify(Arc::clone(&self.inner.provider)).verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.get().webpki.supported_verify_schemes()
    }
}

/// A server chain with a v1 certificate, or checked against v1 CRLs:
/// `legacy`'s verification (no error is ignored on a server line), then
/// the name as HAProxy checks it (subjectAltName DNS names, else the CN).
fn legacy_server_check(
    checks: &ServerChecks,
    end_entity: &CertificateDer<'_>,
    presented: &[&[u8]],
    name: &ServerName<'_>,
    now: UnixTime,
) -> Result<ServerCertVerified, rustls::Error> {
    let inputs = legacy::Inputs {
        leaf: end_entity.as_ref(),
        presented,
        trusted: &checks.ca_ders,
        crls: &checks.crl_ders,
        now: now.as_secs() as i64,
        purpose: legacy::Purpose::SslServer,
    };
    legacy::verify(&inputs, &mut |_, _| false).map_err(legacy::error_for)?;
    match name {
        // (An address: no name to check, see `ChainThenName`.)
        ServerName::IpAddress(_) => Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName,
        )),
        ServerName::DnsName(d) if legacy::name_matches(end_entity.as_ref(), d.as_ref()) => {
            Ok(ServerCertVerified::assertion())
        }
        _ => Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName,
        )),
    }
}

/// A handshake signature checked against the public key of a
/// certificate webpki cannot read (X.509 v1, which OpenSSL peers use as
/// any other): the key read with x509-parser, the signature checked by
/// webpki as a raw key's. `None`: not such a certificate, or a signature
/// that does not verify (the caller's error stands).
fn v1_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algs: &rustls::crypto::WebPkiSupportedAlgorithms,
    tls13: bool,
) -> Option<HandshakeSignatureValid> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    // (Any certificate webpki refused: v1, or one with a critical
    // extension it does not know, which the chain's verifier judges.)
    let (_, c) = X509Certificate::from_der(cert.as_ref()).ok()?;
    let spki = rustls::pki_types::SubjectPublicKeyInfoDer::from(c.public_key().raw);
    if tls13 {
        return rustls::crypto::verify_tls13_signature_with_raw_key(message, &spki, dss, algs).ok();
    }
    let key = webpki::RawPublicKeyEntity::try_from(&spki).ok()?;
    let (_, cands) = algs.mapping.iter().find(|(s, _)| *s == dss.scheme)?;
    cands
        .iter()
        .any(|alg| key.verify_signature(*alg, message, dss.signature()).is_ok())
        .then(HandshakeSignatureValid::assertion)
}

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
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
            .or_else(|e| v1_signature(message, cert, dss, algs, false).ok_or(e))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
            .or_else(|e| v1_signature(message, cert, dss, algs, true).ok_or(e))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
pub(crate) mod testserver;

#[cfg(test)]
mod tests {
    use super::testserver::{blocking_client, exchange, serve, Outcome};
    use super::testutil::{temp_dir, test_cert};
    use super::*;
    use crate::transport::Transport;
    use rustls::client::Resumption;
    use rustls::{HandshakeKind, ProtocolVersion};
    use std::io::{ErrorKind, Read, Write};
    use std::net::TcpStream;
    use std::path::PathBuf;

    fn loc() -> Loc {
        Loc {
            file: "test.cfg".into(),
            line: 7,
        }
    }

    fn ssl(crts: &[&PathBuf]) -> BindSsl {
        BindSsl {
            crts: crts.iter().map(|p| p.to_path_buf()).collect(),
            key: None,
            alpn: Vec::new(),
            min_ver: None,
            strict_sni: false,
            no_tls_tickets: false,
            cache_size: None,
            ..Default::default()
        }
    }

    /// A client config that accepts any certificate, for the given versions.
    fn any_client(versions: &[&'static rustls::SupportedProtocolVersion]) -> ClientConfig {
        ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(versions)
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider())))
            .with_no_client_auth()
    }

    fn both() -> Vec<&'static rustls::SupportedProtocolVersion> {
        vec![&rustls::version::TLS13, &rustls::version::TLS12]
    }

    /// Serves one connection with `acc`, runs a blocking client against it.
    fn one(acc: TlsAcceptor, client: ClientConfig, name: &str) -> (ClientResult, Outcome) {
        let acc = Arc::new(acc);
        let (addr, h) = serve(1, move |s| Transport::accept_tls(s, acc.config()));
        let r = blocking_client(addr, Arc::new(client), name, b"hello over tls");
        let mut o = h.join().expect("server thread");
        (r, o.remove(0))
    }

    type ClientResult = Result<rustls::ClientConnection, std::io::Error>;

    fn peer_leaf(c: &rustls::ClientConnection) -> Vec<u8> {
        c.peer_certificates()
            .and_then(|v| v.first())
            .map(|c| c.as_ref().to_vec())
            .unwrap_or_default()
    }

    fn leaf_of(pem: &Path) -> Vec<u8> {
        let data = std::fs::read(pem).expect("read");
        CertificateDer::pem_slice_iter(&data)
            .next()
            .expect("one cert")
            .expect("pem")
            .as_ref()
            .to_vec()
    }

    #[test]
    fn handshake_tls13_and_tls12() {
        let dir = temp_dir("versions");
        let (_, _, pem) = test_cert(&dir, &["localhost"]);
        for (v, want) in [
            (&rustls::version::TLS13, ProtocolVersion::TLSv1_3),
            (&rustls::version::TLS12, ProtocolVersion::TLSv1_2),
        ] {
            let acc = TlsAcceptor::new(&ssl(&[&pem]), &loc()).expect("acceptor");
            let (r, o) = one(acc, any_client(&[v]), "localhost");
            let c = r.expect("client handshake");
            assert_eq!(c.protocol_version(), Some(want));
            assert!(o.error.is_none(), "{:?}", o.error);
            assert_eq!(o.received, b"hello over tls");
            assert_eq!(o.info, Some((want, HandshakeKind::Full)));
            assert_eq!(o.sni.as_deref(), Some("localhost"));
        }
    }

    #[test]
    fn min_version_tls13_refuses_tls12() {
        let dir = temp_dir("minver");
        let (_, _, pem) = test_cert(&dir, &["localhost"]);
        let mut s = ssl(&[&pem]);
        s.min_ver = Some(TlsVersion::Tls13);
        let acc = TlsAcceptor::new(&s, &loc()).expect("acceptor");
        let (r, o) = one(acc, any_client(&[&rustls::version::TLS12]), "localhost");
        assert!(r.is_err());
        let e = o.error.expect("server error");
        assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
        assert!(!o.handshake_done);
        // TLS 1.3 clients still get in.
        let acc = TlsAcceptor::new(&s, &loc()).expect("acceptor");
        let (r, _) = one(acc, any_client(&both()), "localhost");
        assert_eq!(
            r.expect("tls13").protocol_version(),
            Some(ProtocolVersion::TLSv1_3)
        );
    }

    #[test]
    fn alpn_negotiation() {
        let dir = temp_dir("alpn");
        let (_, _, pem) = test_cert(&dir, &["localhost"]);
        let mut s = ssl(&[&pem]);
        s.alpn = vec!["h2".into(), "http/1.1".into()];
        type Offer = &'static [&'static [u8]];
        let cases: [(Offer, Option<&[u8]>); 3] = [
            (&[b"http/1.1"], Some(b"http/1.1")),
            // The server's order wins.
            (&[b"http/1.1", b"h2"], Some(b"h2")),
            (&[], None),
        ];
        for (offer, want) in cases {
            let mut c = any_client(&both());
            c.alpn_protocols = offer.iter().map(|p| p.to_vec()).collect();
            let acc = TlsAcceptor::new(&s, &loc()).expect("acceptor");
            let (r, o) = one(acc, c, "localhost");
            let c = r.expect("handshake");
            assert_eq!(c.alpn_protocol(), want);
            assert_eq!(o.alpn.as_deref(), want);
        }
        // A client offering only protocols the server lacks is refused.
        let mut c = any_client(&both());
        c.alpn_protocols = vec![b"spdy/3".to_vec()];
        let acc = TlsAcceptor::new(&s, &loc()).expect("acceptor");
        let (r, o) = one(acc, c, "localhost");
        assert!(r.is_err());
        let e = o.error.expect("server error");
        assert!(e.to_string().contains("protocol"), "{e}");
    }

    #[test]
    fn sni_selects_certificate_and_default() {
        let dir = temp_dir("sni");
        let (_, _, a) = test_cert(&dir, &["a.test"]);
        let (_, _, b) = test_cert(&dir, &["b.test", "*.w.test"]);
        let s = ssl(&[&a, &b]);
        let acc = TlsAcceptor::new(&s, &loc()).expect("acceptor");
        // The subjectAltName names, then the subject's CN (rcgen's own
        // CN here), as HAProxy takes them.
        let cn = "rcgen self signed cert";
        assert_eq!(
            acc.names(),
            vec![
                vec!["a.test".to_string(), cn.into()],
                vec!["b.test".into(), "*.w.test".into(), cn.into()]
            ]
        );
        let acc = Arc::new(acc);
        let cases = [
            ("a.test", &a, Some("a.test")),
            ("b.test", &b, Some("b.test")),
            ("B.Test", &b, Some("b.test")),
            ("x.w.test", &b, Some("x.w.test")),
            // A wildcard covers one label only.
            ("y.x.w.test", &a, Some("y.x.w.test")),
            // Unknown name: the default (first) certificate.
            ("unknown.test", &a, Some("unknown.test")),
            // An IP literal sends no SNI: the default.
            ("127.0.0.1", &a, None),
        ];
        for (name, want, sni) in cases {
            let acc2 = Arc::clone(&acc);
            let (addr, h) = serve(1, move |s| Transport::accept_tls(s, acc2.config()));
            let c = blocking_client(addr, Arc::new(any_client(&both())), name, b"x")
                .expect("handshake");
            let o = h.join().expect("server").remove(0);
            assert_eq!(peer_leaf(&c), leaf_of(want), "name {name}");
            assert_eq!(o.sni.as_deref(), sni, "name {name}");
        }
    }

    #[test]
    fn resumption_tickets_and_session_ids() {
        let dir = temp_dir("resume");
        let (_, _, pem) = test_cert(&dir, &["localhost"]);
        let acc = Arc::new(TlsAcceptor::new(&ssl(&[&pem]), &loc()).expect("acceptor"));
        // TLS 1.3 (tickets), TLS 1.2 with tickets, TLS 1.2 with session IDs
        // only (the server-side cache).
        let cases = [
            (
                &rustls::version::TLS13,
                rustls::client::Tls12Resumption::SessionIdOrTickets,
            ),
            (
                &rustls::version::TLS12,
                rustls::client::Tls12Resumption::SessionIdOrTickets,
            ),
            (
                &rustls::version::TLS12,
                rustls::client::Tls12Resumption::SessionIdOnly,
            ),
        ];
        for (v, how) in cases {
            let mut c = any_client(&[v]);
            c.resumption = Resumption::in_memory_sessions(16).tls12_resumption(how);
            let c = Arc::new(c);
            let acc2 = Arc::clone(&acc);
            let (addr, h) = serve(2, move |s| Transport::accept_tls(s, acc2.config()));
            let first = blocking_client(addr, Arc::clone(&c), "localhost", b"one").expect("1st");
            let second = blocking_client(addr, Arc::clone(&c), "localhost", b"two").expect("2nd");
            let o = h.join().expect("server");
            assert_eq!(first.handshake_kind(), Some(HandshakeKind::Full));
            assert_eq!(
                second.handshake_kind(),
                Some(HandshakeKind::Resumed),
                "{v:?} {how:?}"
            );
            assert_eq!(o[1].info.map(|i| i.1), Some(HandshakeKind::Resumed));
        }
        // Resumption survives a reload (same ticket keys and cache).
        let mut c = any_client(&[&rustls::version::TLS13]);
        c.resumption = Resumption::in_memory_sessions(16);
        let c = Arc::new(c);
        let acc2 = Arc::clone(&acc);
        let (addr, h) = serve(2, move |s| Transport::accept_tls(s, acc2.config()));
        blocking_client(addr, Arc::clone(&c), "localhost", b"one").expect("1st");
        acc.reload().expect("reload");
        let second = blocking_client(addr, Arc::clone(&c), "localhost", b"two").expect("2nd");
        h.join().expect("server");
        assert_eq!(second.handshake_kind(), Some(HandshakeKind::Resumed));
    }

    /// Connects a raw TCP client, sends `bytes`, optionally closes its write
    /// side, and returns what the server made of it.
    fn raw(acc: TlsAcceptor, bytes: &[u8], close: bool) -> (Outcome, Vec<u8>) {
        let acc = Arc::new(acc);
        let (addr, h) = serve(1, move |s| Transport::accept_tls(s, acc.config()));
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        s.write_all(bytes).expect("send");
        if close {
            s.shutdown(std::net::Shutdown::Write).expect("shutdown");
        }
        let mut back = Vec::new();
        let _ = s.read_to_end(&mut back);
        let o = h.join().expect("server").remove(0);
        (o, back)
    }

    #[test]
    fn hello_gate_sends_the_rfc_alert_and_names_the_sni() {
        use crate::tls::hello::tests::hello;
        let dir = temp_dir("gate");
        let (_, _, pem) = test_cert(&dir, &["a.test"]);
        let acc = || TlsAcceptor::new(&ssl(&[&pem]), &loc()).expect("acceptor");
        // A TLS 1.0 client: protocol_version, in its own record version.
        let (o, back) = raw(acc(), &hello(0x0301, None, Some("a.test"), 1000), false);
        assert_eq!(back, [0x15, 3, 1, 0, 2, 2, 70]);
        let e = o.error.expect("error").to_string();
        assert!(
            e.contains("offers TLSv1.0 at most") && e.ends_with("(SNI \"a.test\")"),
            "{e}"
        );
        // TLS 1.2 only against `ssl-min-ver TLSv1.3`.
        let mut s = ssl(&[&pem]);
        s.min_ver = Some(TlsVersion::Tls13);
        let acc13 = TlsAcceptor::new(&s, &loc()).expect("acceptor");
        let (o, back) = raw(acc13, &hello(0x0303, None, None, 7), false);
        assert_eq!(back, [0x15, 3, 1, 0, 2, 2, 70]);
        assert!(o.error.expect("error").to_string().ends_with("(no SNI)"));
        // strict-sni: unrecognized_name for an unknown name.
        let mut s = ssl(&[&pem]);
        s.strict_sni = true;
        let strict = TlsAcceptor::new(&s, &loc()).expect("acceptor");
        let h = hello(0x0303, Some(&[0x0304, 0x0303]), Some("b.test"), 1000);
        let (o, back) = raw(strict, &h, false);
        assert_eq!(back, [0x15, 3, 1, 0, 2, 2, 112]);
        let e = o.error.expect("error").to_string();
        assert!(e.contains("strict-sni") && e.contains("b.test"), "{e}");
    }

    /// A first flight that arrives a byte at a time is held back until the
    /// hello is whole, then the handshake goes on as usual.
    #[test]
    fn hello_split_into_many_segments() {
        let dir = temp_dir("split");
        let (_, _, pem) = test_cert(&dir, &["localhost"]);
        let acc = Arc::new(TlsAcceptor::new(&ssl(&[&pem]), &loc()).expect("acceptor"));
        let (addr, h) = serve(1, move |s| Transport::accept_tls(s, acc.config()));
        let name = ServerName::try_from("localhost").expect("name");
        let mut c =
            rustls::ClientConnection::new(Arc::new(any_client(&both())), name).expect("client");
        let mut first = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut first).expect("hello");
        }
        let mut sock = TcpStream::connect(addr).expect("connect");
        sock.set_nodelay(true).expect("nodelay");
        for b in &first {
            sock.write_all(std::slice::from_ref(b)).expect("byte");
        }
        while c.is_handshaking() {
            c.complete_io(&mut sock).expect("handshake");
        }
        c.writer().write_all(b"split").expect("write");
        c.complete_io(&mut sock).expect("send");
        let mut back = [0u8; 5];
        rustls::Stream::new(&mut c, &mut sock)
            .read_exact(&mut back)
            .expect("echo");
        drop(sock);
        let o = h.join().expect("server").remove(0);
        assert!(o.error.is_none(), "{:?}", o.error);
        assert_eq!(o.received, b"split");
        assert_eq!(o.sni.as_deref(), Some("localhost"));
    }

    #[test]
    fn plaintext_http_to_tls_port_is_an_error() {
        let dir = temp_dir("plain");
        let (_, _, pem) = test_cert(&dir, &["localhost"]);
        let acc = TlsAcceptor::new(&ssl(&[&pem]), &loc()).expect("acceptor");
        let (o, back) = raw(acc, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", false);
        let e = o.error.expect("error");
        assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
        assert!(o.received.is_empty());
        // Whatever went back is a TLS alert record (type 21), not HTTP.
        if let Some(&t) = back.first() {
            assert_eq!(t, 21, "{back:?}");
        }
    }

    #[test]
    fn truncated_and_garbage_handshakes_are_errors() {
        let dir = temp_dir("garbage");
        let (_, _, pem) = test_cert(&dir, &["localhost"]);
        let cases: Vec<(Vec<u8>, ErrorKind)> = vec![
            // A handshake record header promising 512 bytes, then EOF.
            (
                vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00],
                ErrorKind::UnexpectedEof,
            ),
            // Nothing at all, then EOF.
            (vec![], ErrorKind::UnexpectedEof),
            // A handshake record holding garbage.
            (
                [&[0x16u8, 0x03, 0x01, 0x00, 0x08][..], &[0xff; 8][..]].concat(),
                ErrorKind::InvalidData,
            ),
            // A record over the size limit.
            (vec![0x16, 0x03, 0x01, 0xff, 0xff], ErrorKind::InvalidData),
            // Noise.
            (
                (0..200u32).map(|i| (i * 37 % 251) as u8).collect(),
                ErrorKind::InvalidData,
            ),
        ];
        for (bytes, kind) in cases {
            let acc = TlsAcceptor::new(&ssl(&[&pem]), &loc()).expect("acceptor");
            let (o, _) = raw(acc, &bytes, true);
            let e = o.error.unwrap_or_else(|| panic!("no error for {bytes:?}"));
            assert_eq!(e.kind(), kind, "{bytes:?}: {e}");
            assert!(!o.handshake_done);
        }
    }

    /// A client that closes TCP after the handshake without close_notify
    /// ends the stream (Ok(0)), not an error: HTTP/1 frames its messages.
    #[test]
    fn tcp_close_without_close_notify_is_eof() {
        let dir = temp_dir("eof");
        let (_, _, pem) = test_cert(&dir, &["localhost"]);
        let acc = Arc::new(TlsAcceptor::new(&ssl(&[&pem]), &loc()).expect("acceptor"));
        let (addr, h) = serve(1, move |s| Transport::accept_tls(s, acc.config()));
        let name = ServerName::try_from("localhost").expect("name");
        let mut c =
            rustls::ClientConnection::new(Arc::new(any_client(&both())), name).expect("client");
        let mut sock = TcpStream::connect(addr).expect("connect");
        while c.is_handshaking() {
            c.complete_io(&mut sock).expect("handshake");
        }
        c.writer().write_all(b"last words").expect("write");
        c.complete_io(&mut sock).expect("send");
        let mut back = [0u8; 10];
        rustls::Stream::new(&mut c, &mut sock)
            .read_exact(&mut back)
            .expect("echo");
        drop(sock);
        let o = h.join().expect("server").remove(0);
        assert!(o.error.is_none(), "{:?}", o.error);
        assert_eq!(o.received, b"last words");
    }

    #[test]
    fn reload_good_then_bad_file() {
        let dir = temp_dir("reload");
        let (_, _, a) = test_cert(&dir, &["a.test"]);
        let (_, _, b) = test_cert(&dir, &["b.test"]);
        let live = dir.join("live.pem");
        std::fs::copy(&a, &live).expect("copy");
        let acc = Arc::new(TlsAcceptor::new(&ssl(&[&live]), &loc()).expect("acceptor"));
        let check = |want: &PathBuf| {
            let acc2 = Arc::clone(&acc);
            let (addr, h) = serve(1, move |s| Transport::accept_tls(s, acc2.config()));
            let c = blocking_client(addr, Arc::new(any_client(&both())), "x.test", b"x")
                .expect("handshake");
            h.join().expect("server");
            assert_eq!(peer_leaf(&c), leaf_of(want));
        };
        check(&a);
        std::fs::copy(&b, &live).expect("copy");
        acc.reload().expect("good reload");
        check(&b);
        assert_eq!(
            acc.names(),
            vec![vec!["b.test".to_string(), "rcgen self signed cert".into()]]
        );
        std::fs::write(&live, "not a certificate\n").expect("write");
        let e = acc.reload().expect_err("bad reload");
        assert_eq!(e.loc, loc());
        assert!(
            e.to_string().starts_with(&format!(
                "test.cfg:7: cannot load certificate {}:",
                live.display()
            )),
            "{e}"
        );
        // The old certificates still answer.
        check(&b);
    }

    #[test]
    fn load_errors_name_file_line_and_reason() {
        let dir = temp_dir("errors");
        let (crt, key, pem) = test_cert(&dir, &["a.test"]);
        let (_, other_key, _) = test_cert(&dir, &["b.test"]);
        let err = |s: &BindSsl| {
            TlsAcceptor::new(s, &loc())
                .expect_err("must fail")
                .to_string()
        };
        let missing = dir.join("missing.pem");
        let e = err(&ssl(&[&missing]));
        assert!(
            e.starts_with("test.cfg:7: unable to stat SSL certificate from file"),
            "{e}"
        );
        assert!(
            e.contains("missing.pem") && e.contains("No such file"),
            "{e}"
        );
        let e = err(&ssl(&[&crt]));
        assert!(e.contains("no private key"), "{e}");
        let e = err(&ssl(&[&key]));
        assert!(e.contains("no certificate"), "{e}");
        let mut s = ssl(&[&crt]);
        s.key = Some(other_key.clone());
        let e = err(&s);
        assert!(e.contains("does not match"), "{e}");
        let mut s = ssl(&[]);
        s.crts.clear();
        assert!(err(&s).contains("crt"));
        // crt + key works; a combined file ignores `key`.
        let mut s = ssl(&[&crt]);
        s.key = Some(key);
        TlsAcceptor::new(&s, &loc()).expect("crt + key");
        let mut s = ssl(&[&pem]);
        s.key = Some(other_key);
        TlsAcceptor::new(&s, &loc()).expect("combined pem");
    }

    #[test]
    fn client_to_server_verify_required_and_none() {
        let dir = temp_dir("client");
        let (crt, _, pem) = test_cert(&dir, &["backend.test"]);
        let (other_ca, _, _) = test_cert(&dir, &["other.test"]);
        let acc = Arc::new(TlsAcceptor::new(&ssl(&[&pem]), &loc()).expect("acceptor"));
        let run = |config: Arc<ClientConfig>, name: &str| {
            let acc2 = Arc::clone(&acc);
            let (addr, h) = serve(1, move |s| Transport::accept_tls(s, acc2.config()));
            let s = TcpStream::connect(addr).expect("connect");
            s.set_nonblocking(true).expect("nonblocking");
            let mut t = Transport::connect_tls(s, config, name).expect("connect_tls");
            assert!(t.is_handshaking() && !t.supports_sendfile());
            let r = exchange(&mut t, b"GET / HTTP/1.1\r\n\r\n");
            let o = h.join().expect("server").remove(0);
            (r, o, t.tls_info())
        };
        let required = client_config(Verify::Required, Some(&crt)).expect("config");
        let (r, o, info) = run(Arc::clone(&required), "backend.test");
        assert_eq!(r.expect("verified exchange"), b"GET / HTTP/1.1\r\n\r\n");
        assert!(o.error.is_none());
        assert_eq!(info.map(|i| i.1), Some(HandshakeKind::Full));
        // Wrong name, or a CA that did not sign it: refused by the client.
        let (r, _, _) = run(Arc::clone(&required), "wrong.test");
        let e = r.expect_err("name mismatch");
        assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
        let wrong_ca = client_config(Verify::Required, Some(&other_ca)).expect("config");
        let (r, o, _) = run(wrong_ca, "backend.test");
        // (rcgen gives every test certificate the same subject, so webpki
        // finds the "issuer" and then a bad signature.)
        let e = r.expect_err("not signed by the CA").to_string();
        assert!(e.contains("invalid peer certificate"), "{e}");
        // The server learns it from the client's alert.
        assert_eq!(o.error.map(|e| e.kind()), Some(ErrorKind::InvalidData));
        // verify none accepts it under any name.
        let none = client_config(Verify::None, None).expect("config");
        let (r, _, _) = run(none, "anything.test");
        assert_eq!(r.expect("unverified exchange"), b"GET / HTTP/1.1\r\n\r\n");
        // Client sessions resume on the next connection to the server.
        let (r, _, info) = run(required, "backend.test");
        r.expect("resumed exchange");
        assert_eq!(info.map(|i| i.1), Some(HandshakeKind::Resumed));
    }

    #[test]
    fn client_config_errors() {
        let dir = temp_dir("cacfg");
        let bad = dir.join("bad.pem");
        std::fs::write(&bad, "nothing\n").expect("write");
        let e = client_config(Verify::Required, Some(&bad)).expect_err("empty CA file");
        assert!(e.contains("no certificate"), "{e}");
        let e = client_config(Verify::Required, Some(&dir.join("nope.pem"))).expect_err("missing");
        assert!(e.contains("cannot load CA file"), "{e}");
    }
}
