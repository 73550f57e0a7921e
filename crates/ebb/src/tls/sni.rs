//! The server-side certificate resolver of a bind line: picks a
//! certificate by SNI (exact names, then `*.domain` wildcards, `crt-list`
//! filters) and by what the client can use, and ([`SniSwap`]) is replaced
//! whole when the CLI commits a certificate it serves.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::certload::LoadedCert;
use super::ckch;

/// Picks a certificate by SNI and by what the client can verify; the first
/// is the default.
#[derive(Debug)]
pub(super) struct SniResolver {
    /// Empty only when `strict-sni` and the CLI deleted every line.
    keys: Vec<Arc<CertifiedKey>>,
    /// Exact names (lower case) -> indexes in `keys`, in load order.
    exact: HashMap<String, Vec<usize>>,
    /// `*.domain` certificates, keyed by `domain` (lower case).
    wildcard: HashMap<String, Vec<usize>>,
    /// Names a certificate's wildcard must not answer (`!name` filters).
    excluded: Vec<Vec<String>>,
    /// The default: the first certificate and those with the same names
    /// (RSA and ECDSA versions of it).
    pub(super) default: Vec<usize>,
    /// Names per certificate, for [`TlsAcceptor::names`].
    pub(super) names: Vec<Vec<String>>,
    /// `strict-sni`: no certificate for an unknown or missing name.
    pub(super) strict: bool,
    /// The bind line's suites, to match a TLS 1.2 client's offer.
    suites: Vec<rustls::SupportedCipherSuite>,
    /// The TLS policy of each certificate (0: the bind line's; else the
    /// options of its `crt-list` line).
    pub(super) policy: Vec<usize>,
}

impl SniResolver {
    fn new(
        certs: Vec<LoadedCert>,
        strict: bool,
        suites: Vec<rustls::SupportedCipherSuite>,
    ) -> Self {
        let mut r = SniResolver {
            strict,
            keys: Vec::with_capacity(certs.len()),
            exact: HashMap::new(),
            wildcard: HashMap::new(),
            excluded: Vec::with_capacity(certs.len()),
            default: Vec::new(),
            names: Vec::with_capacity(certs.len()),
            suites,
            policy: Vec::new(),
        };
        for (i, c) in certs.into_iter().enumerate() {
            for n in &c.names {
                match n.strip_prefix("*.") {
                    Some(dom) => r.wildcard.entry(dom.to_string()).or_default().push(i),
                    None => r.exact.entry(n.clone()).or_default().push(i),
                };
            }
            r.keys.push(c.key);
            r.names.push(c.names);
            r.excluded.push(c.excluded);
        }
        r.default = (0..r.names.len())
            .filter(|&i| r.names[i] == r.names[0])
            .collect();
        r
    }

    /// The certificates whose names fit `sni`, if some do.
    pub(super) fn find(&self, sni: Option<&str>) -> Option<&[usize]> {
        let name = sni?;
        let lower;
        let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            lower = name.to_ascii_lowercase();
            lower.as_str()
        } else {
            name
        };
        if let Some(v) = self.exact.get(name) {
            return Some(v);
        }
        if let Some((_, dom)) = name.split_once('.') {
            if let Some(v) = self.wildcard.get(dom) {
                if v.iter()
                    .any(|&i| !self.excluded[i].iter().any(|x| x == name))
                {
                    return Some(v);
                }
            }
        }
        None
    }

    /// Of `cands`, the certificate this client can use: ECDSA (and other
    /// non-RSA) keys before RSA ones, a key the client's signature schemes
    /// accept, and for a client without TLS 1.3 suites one that an offered
    /// TLS 1.2 suite can use. Falls back to the first candidate (the
    /// handshake then fails on the client's lack, as with OpenSSL).
    fn choose(&self, cands: &[usize], hello: &ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let schemes = hello.signature_schemes();
        let offered = hello.cipher_suites();
        let has13 = offered.iter().any(|c| {
            self.suites
                .iter()
                .any(|s| s.suite() == *c && s.tls13().is_some())
        });
        let usable = |i: usize| -> bool {
            let k = &self.keys[i];
            if k.key.choose_scheme(schemes).is_none() {
                return false;
            }
            has13
                || self.suites.iter().any(|s| {
                    s.tls13().is_none()
                        && offered.contains(&s.suite())
                        && s.usable_for_signature_algorithm(k.key.algorithm())
                })
        };
        self.pick(cands, usable)
    }

    /// Of `cands`, the first `usable` one, ECDSA (and other non-RSA) keys
    /// before RSA ones; else the first candidate.
    pub(super) fn pick(
        &self,
        cands: &[usize],
        usable: impl Fn(usize) -> bool,
    ) -> Option<Arc<CertifiedKey>> {
        let rsa = |i: &usize| self.keys[*i].key.algorithm() == rustls::SignatureAlgorithm::RSA;
        cands
            .iter()
            .filter(|i| !rsa(i))
            .chain(cands.iter().filter(|i| rsa(i)))
            .copied()
            .find(|&i| usable(i))
            .or(cands.first().copied())
            .and_then(|i| self.keys.get(i).cloned())
    }

    /// The certificates a name may get: its own, else the default ones
    /// (none under `strict-sni`).
    pub(super) fn candidates(&self, name: Option<&str>) -> Option<&[usize]> {
        match self.find(name) {
            Some(c) => Some(c),
            None if self.strict => None,
            None => Some(&self.default),
        }
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // No candidate: rustls ends the handshake with an alert (the
        // hello gate refused this one already with unrecognized_name).
        let k = self
            .candidates(hello.server_name())
            .and_then(|c| self.choose(c, &hello));
        if let Some(k) = &k {
            CHOSEN.with(|c| c.replace(Some(Arc::clone(k))));
        }
        k
    }
}

/// One certificate of a bind line as loaded, kept so that a committed
/// change (`commit ssl cert`) rebuilds the resolver without the files.
#[derive(Debug, Clone)]
pub(super) struct CertSrc {
    /// Its file, the certificate store's key.
    pub(super) path: String,
    /// The names of its `crt-list` line, instead of its own.
    pub(super) filter: Option<Vec<String>>,
    /// `!name` filters of its `crt-list` line.
    pub(super) excluded: Vec<String>,
    pub(super) key: Arc<CertifiedKey>,
    /// The names of the certificate (SAN DNS names, subject CNs).
    pub(super) own: Vec<String>,
    /// The `crt-list` (or `crt DIR`) and line it comes from.
    pub(super) list: Option<(String, usize)>,
    /// Its TLS policy (see [`SniResolver::policy`]).
    pub(super) policy: usize,
}

impl CertSrc {
    fn is_line(&self, list: &str, line: usize, path: &str) -> bool {
        self.path == path
            && self
                .list
                .as_ref()
                .is_some_and(|(l, n)| l == list && *n == line)
    }

    fn loaded(&self) -> LoadedCert {
        let mut names = self.filter.clone().unwrap_or_else(|| self.own.clone());
        // `!name` removes a name the certificate would answer for; `!*`
        // all of them (the certificate then only serves as the default).
        if self.excluded.iter().any(|x| x == "*") {
            names.clear();
        }
        names.retain(|n| !self.excluded.contains(n));
        LoadedCert {
            key: Arc::clone(&self.key),
            names,
            excluded: self.excluded.clone(),
        }
    }
}

/// A bind line's resolver, replaced whole when a certificate it serves is
/// committed on the CLI (new handshakes on every thread take the new one;
/// running connections keep the certificate they got).
#[derive(Debug)]
pub(crate) struct SniSwap {
    cur: RwLock<Arc<SniResolver>>,
    srcs: std::sync::Mutex<Vec<CertSrc>>,
    strict: bool,
    suites: Vec<rustls::SupportedCipherSuite>,
    /// The bind line's `file:line`, for the CLI's messages.
    bind: String,
    /// What the bind line's listeners share (its TLS policies), for the
    /// options of a `crt-list` line added on the CLI.
    owner: std::sync::OnceLock<std::sync::Weak<super::Shared>>,
}

/// The resolver of a bind line's certificates.
fn resolver(
    srcs: &[CertSrc],
    strict: bool,
    suites: &[rustls::SupportedCipherSuite],
) -> SniResolver {
    let mut r = SniResolver::new(
        srcs.iter().map(CertSrc::loaded).collect(),
        strict,
        suites.to_vec(),
    );
    r.policy = srcs.iter().map(|s| s.policy).collect();
    r
}

impl SniSwap {
    pub(super) fn new(
        srcs: Vec<CertSrc>,
        strict: bool,
        suites: Vec<rustls::SupportedCipherSuite>,
        bind: String,
    ) -> Self {
        let r = resolver(&srcs, strict, &suites);
        SniSwap {
            cur: RwLock::new(Arc::new(r)),
            srcs: std::sync::Mutex::new(srcs),
            strict,
            suites,
            bind,
            owner: std::sync::OnceLock::new(),
        }
    }

    /// Links the resolver to what its bind line's listeners share.
    pub(super) fn set_owner(&self, owner: std::sync::Weak<super::Shared>) {
        let _ = self.owner.set(owner);
    }

    fn owner(&self) -> Result<Arc<super::Shared>, String> {
        self.owner
            .get()
            .and_then(std::sync::Weak::upgrade)
            .ok_or_else(|| format!("the bind line at {} is gone", self.bind))
    }

    /// A `crt-list` line's `[options]` over this bind line's settings, and
    /// their text (see [`super::certload::line_overlay`]).
    pub(crate) fn line_overlay(
        &self,
        opts: &str,
    ) -> Result<(crate::config::BindSsl, String), String> {
        self.owner()?.line_overlay(opts)
    }

    /// After a line was deleted: the options no certificate uses any more
    /// are dropped, with the CA and CRL files only they verified with.
    pub(crate) fn release(&self) {
        let used: Vec<usize> = self.srcs().iter().map(|s| s.policy).collect();
        if let Ok(o) = self.owner() {
            o.prune(&used);
        }
    }

    fn srcs(&self) -> std::sync::MutexGuard<'_, Vec<CertSrc>> {
        self.srcs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn rebuild(&self, srcs: &[CertSrc]) {
        let r = resolver(srcs, self.strict, &self.suites);
        *self.cur.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(r);
    }

    /// Whether it serves the certificate of `path`.
    pub(crate) fn serves(&self, path: &str) -> bool {
        self.srcs().iter().any(|s| s.path == path)
    }

    /// The bind line's `file:line`.
    pub(crate) fn bind(&self) -> &str {
        &self.bind
    }

    /// Serves a certificate added to a `crt-list` it uses (`add ssl
    /// crt-list`), after the others: a name already served keeps its
    /// certificate. `overlay`: the line's options over the bind line's
    /// settings (else the bind line's policy).
    pub(crate) fn add(
        &self,
        path: &str,
        filters: &[String],
        key: &Arc<CertifiedKey>,
        own: &[String],
        list: (String, usize),
        overlay: Option<crate::config::BindSsl>,
    ) -> Result<(), String> {
        let policy = match overlay {
            None => 0,
            Some(o) => self.owner()?.policy_for(o)?,
        };
        let mut names = Vec::new();
        let mut excluded = Vec::new();
        for f in filters {
            match f.strip_prefix('!') {
                Some(x) => excluded.push(x.to_ascii_lowercase()),
                None => names.push(f.to_ascii_lowercase()),
            }
        }
        let mut srcs = self.srcs();
        srcs.push(CertSrc {
            path: path.to_string(),
            filter: if names.is_empty() { None } else { Some(names) },
            excluded,
            key: Arc::clone(key),
            own: own.to_vec(),
            list: Some(list),
            policy,
        });
        self.rebuild(&srcs);
        Ok(())
    }

    /// Whether the line `line` of `list` (certificate `path`) gives the
    /// default certificate (the bind line's first) and the bind line is
    /// not `strict-sni`: `del ssl crt-list` keeps it.
    pub(crate) fn is_default(&self, list: &str, line: usize, path: &str) -> bool {
        !self.strict
            && self
                .srcs()
                .first()
                .is_some_and(|s| s.is_line(list, line, path))
    }

    /// Stops serving what line `line` of `list` (certificate `path`) gave.
    pub(crate) fn remove(&self, list: &str, line: usize, path: &str) {
        let mut srcs = self.srcs();
        let before = srcs.len();
        srcs.retain(|s| !s.is_line(list, line, path));
        if srcs.len() != before {
            self.rebuild(&srcs);
        }
    }

    pub(super) fn get(&self) -> Arc<SniResolver> {
        Arc::clone(&self.cur.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Tells the certificate store which files this resolver serves.
    pub(super) fn attach(self: &Arc<Self>) {
        // Read first: the store's locks are taken without this one held
        // (a commit holds the store's and then takes this one).
        let mut paths: Vec<String> = Vec::new();
        let mut lists: Vec<String> = Vec::new();
        for s in self.srcs().iter() {
            if !paths.contains(&s.path) {
                paths.push(s.path.clone());
            }
            if let Some((l, _)) = &s.list {
                if !lists.contains(l) {
                    lists.push(l.clone());
                }
            }
        }
        for p in &paths {
            ckch::attach(p, ckch::User::Bind(Arc::downgrade(self)));
        }
        for l in &lists {
            ckch::attach_list(l, Arc::downgrade(self));
        }
    }

    /// Serves `key` (whose own names are `own`) wherever `path` was
    /// served; how many places took it.
    pub(crate) fn replace(&self, path: &str, key: &Arc<CertifiedKey>, own: &[String]) -> usize {
        let mut srcs = self.srcs();
        let mut n = 0;
        for s in srcs.iter_mut().filter(|s| s.path == path) {
            s.key = Arc::clone(key);
            s.own = own.to_vec();
            n += 1;
        }
        if n > 0 {
            self.rebuild(&srcs);
        }
        n
    }
}

impl ResolvesServerCert for SniSwap {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.get().resolve(hello)
    }
}

thread_local! {
    /// The certificate the resolver gave the handshake it served last on
    /// this thread (rustls calls it inside the connection's
    /// `process_new_packets`; the connection takes it right after).
    static CHOSEN: std::cell::RefCell<Option<Arc<CertifiedKey>>> =
        const { std::cell::RefCell::new(None) };
}

/// The certificate chosen for the handshake this thread served last
/// (`ssl_f_*`), taken.
pub fn take_chosen() -> Option<Arc<CertifiedKey>> {
    CHOSEN.with(|c| c.borrow_mut().take())
}
