//! The certificate store (HAProxy's "ckch store"): what every certificate
//! file the configuration loaded holds (chain, key, OCSP response), by
//! path, who serves it (bind lines, servers), and the CLI's one pending
//! change (`set ssl cert` ... `commit ssl cert`).
//!
//! A commit replaces the certificate in memory for new handshakes on
//! every bind line and server that uses the file (the bind lines' resolvers
//! are shared by every thread); connections already running keep the
//! certificate they got. Nothing is written to disk: a reload (a new
//! worker, or SIGHUP) reads the files again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock, Weak};

use rustls::client::{
    ClientSessionMemoryCache, ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::sign::CertifiedKey;
use rustls::NamedGroup;

use super::SniSwap;

/// What a certificate file holds; an empty chain is an empty store
/// (`new ssl cert`).
pub struct Ckch {
    /// The leaf first, then the rest of the chain.
    pub chain: Vec<CertificateDer<'static>>,
    pub key: Option<PrivateKeyDer<'static>>,
    /// A DER OCSP response, stapled.
    pub ocsp: Option<Vec<u8>>,
}

impl Clone for Ckch {
    fn clone(&self) -> Self {
        Ckch {
            chain: self.chain.clone(),
            key: self.key.as_ref().map(|k| k.clone_key()),
            ocsp: self.ocsp.clone(),
        }
    }
}

/// A server's `crt`: the certificate it shows, swappable, and the TLS
/// sessions kept to resume with that server, dropped when the certificate
/// changes (as HAProxy frees a server's sessions at a commit): a resumed
/// session would keep showing the old certificate's identity.
#[derive(Debug)]
pub struct CertSlot {
    key: RwLock<Arc<CertifiedKey>>,
    sessions: RwLock<Arc<ClientSessionMemoryCache>>,
    /// Its server was deleted (`del server`): it no longer uses the
    /// stored certificate (`show ssl cert` says "Unused").
    released: std::sync::atomic::AtomicBool,
}

/// rustls' default number of client sessions kept.
const CLIENT_SESSIONS: usize = 256;

impl CertSlot {
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        CertSlot {
            key: RwLock::new(key),
            sessions: RwLock::new(Arc::new(ClientSessionMemoryCache::new(CLIENT_SESSIONS))),
            released: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Its server left (`del server`): the stored certificate loses this
    /// user.
    pub fn release(&self) {
        self.released
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn get(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.key.read().unwrap_or_else(|p| p.into_inner()))
    }

    fn set(&self, key: &Arc<CertifiedKey>) {
        *self.key.write().unwrap_or_else(|p| p.into_inner()) = Arc::clone(key);
        self.forget_sessions();
    }

    /// Drops the TLS sessions kept (a commit changed how the server is
    /// verified).
    pub(crate) fn forget_sessions(&self) {
        *self.sessions.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(ClientSessionMemoryCache::new(CLIENT_SESSIONS));
    }

    fn cache(&self) -> Arc<ClientSessionMemoryCache> {
        Arc::clone(&self.sessions.read().unwrap_or_else(|p| p.into_inner()))
    }
}

impl ClientSessionStore for CertSlot {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.cache().set_kx_hint(server_name, group)
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.cache().kx_hint(server_name)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.cache().set_tls12_session(server_name, value)
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.cache().tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.cache().remove_tls12_session(server_name)
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: Tls13ClientSessionValue,
    ) {
        self.cache().insert_tls13_ticket(server_name, value)
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<Tls13ClientSessionValue> {
        self.cache().take_tls13_ticket(server_name)
    }
}

/// Something that serves a stored certificate.
pub(crate) enum User {
    /// A bind line's resolver.
    Bind(Weak<SniSwap>),
    /// A server's certificate.
    Server(Weak<CertSlot>),
}

impl User {
    /// Whether it still serves `path` (a bind line may have stopped, by
    /// `del ssl crt-list`).
    fn serves(&self, path: &str) -> bool {
        match self {
            User::Bind(w) => w.upgrade().is_some_and(|r| r.serves(path)),
            User::Server(w) => w
                .upgrade()
                .is_some_and(|s| !s.released.load(std::sync::atomic::Ordering::Relaxed)),
        }
    }
}

struct Entry {
    ckch: Ckch,
    users: Vec<User>,
}

impl Entry {
    fn used(&mut self, path: &str) -> bool {
        self.users.retain(|u| u.serves(path));
        !self.users.is_empty()
    }
}

struct Store {
    files: BTreeMap<String, Entry>,
    /// The pending change: the file and what it will hold.
    tx: Option<(String, Ckch)>,
}

/// One line of a `crt-list` (or one file of a `crt DIR`, line 0), as
/// `show ssl crt-list` prints it.
#[derive(Clone, Debug)]
pub struct ListEntry {
    pub crt: String,
    pub line: usize,
    /// ` [options]` in HAProxy's order, or nothing.
    pub opts: String,
    /// The SNI filters as written (`!name` included).
    pub filters: Vec<String>,
}

/// A `crt-list` file or `crt` directory as loaded, and changed on the CLI.
struct List {
    entries: Vec<ListEntry>,
    /// The number of the last line (an added line gets the next one).
    lines: usize,
    /// The bind line's `crt-base`, for a relative path added on the CLI.
    crt_base: std::path::PathBuf,
    /// The bind line's `ca-base`, for the files of options added on the
    /// CLI when no bind line uses the list.
    ca_base: std::path::PathBuf,
    /// A `crt DIR`: one entry per file, no options or filters.
    dir: bool,
    /// The bind lines that use it.
    users: Vec<Weak<SniSwap>>,
}

/// The `crt-list` files and `crt` directories loaded, by path.
static LISTS: Mutex<BTreeMap<String, List>> = Mutex::new(BTreeMap::new());

fn lists() -> std::sync::MutexGuard<'static, BTreeMap<String, List>> {
    LISTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records a list's entries when it is (re)loaded (`lines`: its number
/// of lines).
pub(crate) fn record_list(
    path: &str,
    entries: Vec<ListEntry>,
    lines: usize,
    ssl: &crate::config::BindSsl,
    dir: bool,
) {
    let mut l = lists();
    let users = l.remove(path).map(|x| x.users).unwrap_or_default();
    l.insert(
        path.to_string(),
        List {
            entries,
            lines,
            crt_base: ssl.crt_base.clone(),
            ca_base: ssl.ca_base.clone(),
            dir,
            users,
        },
    );
}

/// Notes that a bind line's resolver uses the list `path`.
pub(crate) fn attach_list(path: &str, user: Weak<SniSwap>) {
    if let Some(l) = lists().get_mut(path) {
        l.users.retain(|u| u.strong_count() > 0);
        l.users.push(user);
    }
}

/// `add ssl crt-list LIST CERT`, or with a one-line payload `CERT
/// [[options]] [filters]`: the certificate (in the store) served by every
/// bind line that uses the list, after its other certificates, with the
/// line's options over each bind line's settings.
pub fn add_to_list(list: &str, cert: &str, payload: Option<&str>) -> Result<String, String> {
    if list.is_empty() || (payload.is_none() && cert.is_empty()) {
        return Err("'add ssl crtlist' expects a filename and a certificate name\n".into());
    }
    let fail = |e: String| format!("Can't edit the crt-list: {e}\n");
    let list = list.trim_end_matches('/');
    let mut lists = lists();
    let Some(l) = lists.get_mut(list) else {
        return Err(fail(format!("crt-list '{list}' does not exist!")));
    };
    let (cert, opts, filters) = match payload {
        Some(p) => {
            let p = p.trim_end_matches('\n');
            if p.contains('\n') {
                return Err(fail("only one line of payload is supported!".into()));
            }
            if p.trim().is_empty() {
                return Err(fail(
                    "'add ssl crtlist' should contain the certificate name in the payload".into(),
                ));
            }
            let (c, opts, rest) =
                super::certload::split_crt_list_line(p).map_err(|e| fail(format!("CLI:1: {e}")))?;
            let filters = rest.split_whitespace().map(str::to_string).collect();
            (c.to_string(), opts, filters)
        }
        None => (cert.to_string(), None, Vec::new()),
    };
    if l.dir && cert.rsplit_once('/').is_none_or(|(d, _)| d != list) {
        return Err(fail(format!(
            "'{list}' is a directory, certificate path '{cert}' must contain the directory path"
        )));
    }
    let cert = if cert.starts_with('/') {
        cert
    } else {
        l.crt_base.join(&cert).display().to_string()
    };
    l.users.retain(|u| u.strong_count() > 0);
    let users: Vec<Arc<SniSwap>> = l.users.iter().filter_map(Weak::upgrade).collect();
    // The options over each bind line's settings, read before anything
    // changes; the text `show ssl crt-list` prints.
    let mut overlays = Vec::with_capacity(users.len());
    let mut opts_text = String::new();
    if let Some(o) = opts {
        let base = crate::config::BindSsl {
            ca_base: l.ca_base.clone(),
            ..Default::default()
        };
        let checked = users.first().map_or_else(
            || super::certload::line_overlay(o, &base, true).map(|(_, t)| t),
            |r| r.line_overlay(o).map(|(_, t)| t),
        );
        opts_text = checked.map_err(&fail)?;
        for r in &users {
            overlays.push(Some(r.line_overlay(o).map_err(&fail)?.0));
        }
    } else {
        overlays.resize(users.len(), None);
    }
    let mut s = store();
    let Some(e) = s.files.get_mut(&cert) else {
        return Err(fail(format!("certificate '{cert}' does not exist!")));
    };
    if e.ckch.chain.is_empty() {
        return Err(fail(format!("certificate '{cert}' is empty!")));
    }
    if l.dir && l.entries.iter().any(|x| x.crt == cert) {
        return Err(fail("file already exists in this directory!".into()));
    }
    if l.dir && (!filters.is_empty() || opts.is_some()) {
        return Err(fail(
            "this is a directory, SSL configuration and filters are not allowed".into(),
        ));
    }
    let mut out = format!("Inserting certificate '{cert}' in crt-list '{list}'");
    let loaded = match super::certify(&e.ckch, &super::provider(), true) {
        Ok(c) => c,
        Err(why) => return Err(format!("{out}\n{why}\nFailed!\n")),
    };
    let line = l.lines + 1;
    for (r, overlay) in users.iter().zip(overlays) {
        if let Err(why) = r.add(
            &cert,
            &filters,
            &loaded.key,
            &loaded.names,
            (list.to_string(), line),
            overlay,
        ) {
            return Err(format!("{out}\n{why}\nFailed!\n"));
        }
        e.users.push(User::Bind(Arc::downgrade(r)));
        out.push('.');
    }
    l.lines = line;
    l.entries.push(ListEntry {
        crt: cert,
        line,
        opts: opts_text,
        filters,
    });
    out.push_str("\nSuccess!\n");
    Ok(out)
}

/// `del ssl crt-list LIST CERT[:LINE]`: the line's certificate no longer
/// served by the bind lines that use the list (the default certificate of
/// a bind line without `strict-sni` is kept).
pub fn del_from_list(list: &str, cert: &str) -> Result<String, String> {
    if list.is_empty() || cert.is_empty() {
        return Err("'del ssl crtlist' expects a filename and a certificate name\n".into());
    }
    let fail = |e: String| format!("Can't delete the entry: {e}\n");
    let (cert, line) = match cert.split_once(':') {
        Some((c, n)) => match n.parse::<usize>() {
            Ok(n) => (c, n),
            _ => return Err(fail(format!("wrong line number after colons in '{cert}'!"))),
        },
        None => (cert, 0),
    };
    let list = list.trim_end_matches('/');
    let mut lists = lists();
    let Some(l) = lists.get_mut(list) else {
        return Err(fail(format!("crt-list '{list}' does not exist!")));
    };
    {
        let s = store();
        match s.files.get(cert) {
            None => return Err(fail(format!("certificate '{cert}' does not exist!"))),
            Some(e) if e.ckch.chain.is_empty() => {
                return Err(fail(format!("certificate '{cert}' is empty!")))
            }
            Some(_) => {}
        }
    }
    let found: Vec<usize> = (0..l.entries.len())
        .filter(|&i| l.entries[i].crt == cert)
        .collect();
    if found.is_empty() {
        return Err(fail(format!(
            "certificate '{cert}' can't be found in crt-list '{list}'!"
        )));
    }
    let numbers: Vec<String> = found
        .iter()
        .map(|&i| l.entries[i].line.to_string())
        .collect();
    let numbers = numbers.join(", ");
    let Some(&at) = found
        .iter()
        .find(|&&i| line == 0 || l.entries[i].line == line)
    else {
        return Err(fail(format!(
            "found a certificate '{cert}' but the line number is incorrect, please specify a correct line number preceded by colons ({numbers})!"
        )));
    };
    if line == 0 && found.len() > 1 {
        return Err(fail(format!(
            "found the certificate '{cert}' in several entries, please specify a line number preceded by colons ({numbers})!"
        )));
    }
    let line = l.entries[at].line;
    l.users.retain(|u| u.strong_count() > 0);
    let users: Vec<Arc<SniSwap>> = l.users.iter().filter_map(Weak::upgrade).collect();
    let defaults: Vec<&Arc<SniSwap>> = users
        .iter()
        .filter(|r| r.is_default(list, line, cert))
        .collect();
    if !defaults.is_empty() {
        let mut e = format!("certificate '{cert}' cannot be deleted, it is used as default certificate by the following frontends:\n");
        for r in defaults {
            e.push_str(&format!("\t- {}\n", r.bind()));
        }
        return Err(fail(e));
    }
    for r in &users {
        r.remove(list, line, cert);
        // Options no line uses any more, and the files they verified with.
        r.release();
    }
    l.entries.remove(at);
    Ok(format!("Entry '{cert}' deleted in crtlist '{list}'!\n"))
}

/// `show ssl crt-list [-n] [LIST]`.
pub fn show_lists(args: &[&str]) -> Result<String, String> {
    let (numbers, name) = match args {
        ["-n", rest @ ..] => match rest.first() {
            Some(n) if !n.is_empty() => (true, Some(*n)),
            _ => return Err("'show ssl crt-list -n' expects a filename or a directory\n".into()),
        },
        [n, ..] => (false, Some(*n)),
        [] => (false, None),
    };
    let lists = lists();
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return Ok(lists.keys().map(|k| format!("{k}\n")).collect());
    };
    let name = name.trim_end_matches('/');
    let entries = &lists
        .get(name)
        .ok_or_else(|| "didn't find the specified filename\n".to_string())?
        .entries;
    let mut out = format!("# {name}\n");
    for e in entries {
        out.push_str(&e.crt);
        if numbers {
            out.push_str(&format!(":{}", e.line));
        }
        out.push_str(&e.opts);
        for f in &e.filters {
            out.push(' ');
            out.push_str(f);
        }
        out.push('\n');
    }
    Ok(out)
}

static STORE: Mutex<Store> = Mutex::new(Store {
    files: BTreeMap::new(),
    tx: None,
});

fn store() -> std::sync::MutexGuard<'static, Store> {
    STORE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records what a file held when it was (re)loaded.
pub(crate) fn record(path: &str, ckch: Ckch) {
    let mut s = store();
    match s.files.get_mut(path) {
        Some(e) => e.ckch = ckch,
        None => {
            s.files.insert(
                path.to_string(),
                Entry {
                    ckch,
                    users: Vec::new(),
                },
            );
        }
    }
}

/// What the store holds for `path` now (a committed change included),
/// if it was loaded or created.
pub(crate) fn stored(path: &str) -> Option<Ckch> {
    store().files.get(path).map(|e| e.ckch.clone())
}

/// Notes that `user` serves the certificate of `path` (already recorded).
pub(crate) fn attach(path: &str, user: User) {
    let mut s = store();
    if let Some(e) = s.files.get_mut(path) {
        e.users.retain(|u| u.serves(path));
        e.users.push(user);
    }
}

/// The files `set ssl cert NAME.EXT` may change besides the PEM file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Pem,
    Key,
    Ocsp,
    Issuer,
    Sctl,
}

/// `NAME` or `NAME.EXT` as HAProxy reads it: the part a file name's
/// ending names, and the name without it.
fn split_part(name: &str) -> (&str, Part) {
    if let Some((base, ext)) = name.rsplit_once('.') {
        let part = match ext {
            "crt" => Some(Part::Pem),
            "key" => Some(Part::Key),
            "ocsp" => Some(Part::Ocsp),
            "issuer" => Some(Part::Issuer),
            "sctl" => Some(Part::Sctl),
            _ => None,
        };
        if let Some(p) = part {
            return (base, p);
        }
    }
    (name, Part::Pem)
}

/// Reads a PEM payload as HAProxy does: the first private key if any, the
/// first certificate, the other certificates as its chain.
fn parse_pem(name: &str, payload: &str) -> Result<Ckch, String> {
    let bad = || format!("unable to load certificate from file '{name}'.\n");
    let mut chain = Vec::new();
    for c in CertificateDer::pem_slice_iter(payload.as_bytes()) {
        let c = c.map_err(|_| {
            if chain.is_empty() {
                bad()
            } else {
                format!("unable to load certificate chain from file '{name}'.\n")
            }
        })?;
        use x509_parser::prelude::{FromDer, X509Certificate};
        if X509Certificate::from_der(c.as_ref()).is_err() {
            return Err(if chain.is_empty() {
                bad()
            } else {
                format!("unable to load certificate chain from file '{name}'.\n")
            });
        }
        chain.push(c);
    }
    if chain.is_empty() {
        return Err(bad());
    }
    let key = PrivateKeyDer::from_pem_slice(payload.as_bytes()).ok();
    Ok(Ckch {
        chain,
        key,
        ocsp: None,
    })
}

/// Applies a payload to `ckch` (a copy of the stored file, or of the
/// pending change).
fn apply(ckch: &mut Ckch, part: Part, name: &str, payload: &str) -> Result<(), String> {
    match part {
        Part::Pem => {
            // A new PEM replaces everything, its OCSP response included.
            *ckch = parse_pem(name, payload)?;
        }
        Part::Key => {
            let k = PrivateKeyDer::from_pem_slice(payload.as_bytes())
                .map_err(|_| format!("unable to load private key from file '{name}'.\n"))?;
            ckch.key = Some(k);
        }
        Part::Ocsp => {
            let b64: String = payload
                .chars()
                .filter(|c| *c != '\r' && *c != '\n')
                .collect();
            let der = crate::base64::decode(&b64)
                .ok_or_else(|| "Error reading OCSP response in base64 format\n".to_string())?;
            super::certload::check_ocsp(&der)
                .map_err(|e| format!("OCSP response of '{name}': {e}.\n"))?;
            ckch.ocsp = Some(der);
        }
        Part::Issuer | Part::Sctl => {
            let what = if part == Part::Issuer {
                "'.issuer' files (ebb staples the '.ocsp' response as it is; nothing uses an issuer)"
            } else {
                "'.sctl' files (Certificate Transparency lists)"
            };
            return Err(format!("ebb does not support {what}.\n"));
        }
    }
    Ok(())
}

/// `set ssl cert NAME` with a payload.
pub fn set(name: &str, payload: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("'set ssl cert expects a filename and a certificate as a payload\n".into());
    }
    let fail = |e: String| format!("{e}Can't update {name}!\n");
    let (base, part) = split_part(name);
    // `ssl-load-extra-del-ext`: `NAME.key` (...) is about `NAME.crt`.
    let crt = (super::extra_del_ext() && part != Part::Pem).then(|| format!("{base}.crt"));
    let crt = crt.as_deref();
    let mut s = store();
    // The file the change is about and what it holds now.
    let (path, part, mut ckch) = match &s.tx {
        Some((p, c)) if p == base => (p.clone(), part, c.clone()),
        Some((p, c)) if Some(p.as_str()) == crt => (p.clone(), part, c.clone()),
        Some((p, c)) if p == name => (p.clone(), Part::Pem, c.clone()),
        Some((p, _)) => {
            return Err(fail(format!(
                "The ongoing transaction is about '{p}' but you are trying to set '{base}'\n"
            )))
        }
        None => {
            let by_crt = crt.and_then(|c| s.files.get(c).map(|e| (c.to_string(), e.ckch.clone())));
            match (s.files.get(base), by_crt, s.files.get(name)) {
                (Some(e), _, _) => (base.to_string(), part, e.ckch.clone()),
                (None, Some((c, k)), _) => (c, part, k),
                (None, None, Some(e)) => (name.to_string(), Part::Pem, e.ckch.clone()),
                (None, None, None) => return Err(fail(
                    "Can't replace a certificate which is not referenced by the configuration!\n"
                        .into(),
                )),
            }
        }
    };
    let target = if part == Part::Pem {
        path.as_str()
    } else {
        base
    };
    apply(&mut ckch, part, target, payload)
        .map_err(|e| fail(format!("{e}Can't load the payload\n")))?;
    let created = s.tx.is_none();
    s.tx = Some((path.clone(), ckch));
    Ok(if created {
        format!("Transaction created for certificate {path}!\n")
    } else {
        format!("Transaction updated for certificate {path}!\n")
    })
}

/// `commit ssl cert NAME`: the pending change served wherever the file is.
pub fn commit(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("'commit ssl cert expects a filename\n".into());
    }
    let fail = |e: String| format!("{e}Can't commit {name}!\n");
    let mut s = store();
    let Some((path, ckch)) = &s.tx else {
        return Err(fail("No ongoing transaction! !\n".into()));
    };
    if path != name {
        return Err(fail(format!(
            "The ongoing transaction is about '{path}' but you are trying to set '{name}'\n"
        )));
    }
    if ckch.key.is_none() {
        return Err(fail(
            "The transaction must contain at least a certificate and a private key!\n".into(),
        ));
    }
    let loaded = super::certify(ckch, &super::provider(), true).map_err(|e| {
        fail(if e.contains("does not match") {
            format!("inconsistencies between private key and certificate loaded '{path}'.\n")
        } else {
            format!("{e}\n")
        })
    })?;
    let path = path.clone();
    let Some((_, ckch)) = s.tx.take() else {
        return Err(fail("No ongoing transaction! !\n".into()));
    };
    let mut out = format!("Committing {path}");
    if let Some(e) = s.files.get_mut(&path) {
        e.users.retain(|u| u.serves(&path));
        for u in &e.users {
            match u {
                User::Bind(w) => {
                    if let Some(r) = w.upgrade() {
                        for _ in 0..r.replace(&path, &loaded.key, &loaded.names) {
                            out.push('.');
                        }
                    }
                }
                User::Server(w) => {
                    if let Some(slot) = w.upgrade() {
                        slot.set(&loaded.key);
                        out.push('.');
                    }
                }
            }
        }
        e.ckch = ckch;
    }
    out.push_str("\nSuccess!\n");
    Ok(out)
}

/// Staples `der` from now on for every certificate in use whose OCSP
/// response `matches` (`set ssl ocsp-response`, which files responses by
/// certificate ID); how many files took it.
pub(crate) fn set_ocsp(matches: impl Fn(&[u8]) -> bool, der: &[u8]) -> usize {
    let mut s = store();
    let provider = super::provider();
    let mut n = 0;
    for (path, e) in s.files.iter_mut() {
        if !e.ckch.ocsp.as_deref().is_some_and(&matches) {
            continue;
        }
        e.users.retain(|u| u.serves(path));
        if e.users.is_empty() {
            continue;
        }
        let mut ckch = e.ckch.clone();
        ckch.ocsp = Some(der.to_vec());
        let Ok(loaded) = super::certify(&ckch, &provider, true) else {
            continue;
        };
        for u in &e.users {
            if let User::Bind(w) = u {
                if let Some(r) = w.upgrade() {
                    r.replace(path, &loaded.key, &loaded.names);
                }
            }
        }
        e.ckch.ocsp = Some(der.to_vec());
        n += 1;
    }
    n
}

/// `abort ssl cert NAME`.
pub fn abort(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("'abort ssl cert' expects a filename\n".into());
    }
    let mut s = store();
    match &s.tx {
        None => Err("No ongoing transaction!\n".into()),
        Some((p, _)) if p != name => Err(format!(
            "The ongoing transaction is about '{p}' but you are trying to abort a transaction for '{name}'\n"
        )),
        Some(_) => {
            s.tx = None;
            Ok(format!("Transaction aborted for certificate '{name}'!\n"))
        }
    }
}

/// `new ssl cert NAME`: an empty entry, to fill with `set ssl cert`.
pub fn new(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("'new ssl cert' expects a filename\n".into());
    }
    let mut s = store();
    if s.files.contains_key(name) {
        return Err(format!("Certificate '{name}' already exists!\n"));
    }
    s.files.insert(
        name.to_string(),
        Entry {
            ckch: Ckch {
                chain: Vec::new(),
                key: None,
                ocsp: None,
            },
            users: Vec::new(),
        },
    );
    Ok(format!("New empty certificate store '{name}'!\n"))
}

/// `del ssl cert NAME`: an entry nothing serves.
pub fn del(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("'del ssl cert' expects a certificate name\n".into());
    }
    let fail = |e: String| format!("Can't remove the certificate: {e}\n");
    let mut s = store();
    let in_tx = s.tx.as_ref().is_some_and(|(p, _)| p == name);
    let Some(e) = s.files.get_mut(name) else {
        return Err(fail(format!("certificate '{name}' doesn't exist!\n")));
    };
    if e.used(name) || in_tx {
        return Err(fail(format!(
            "certificate '{name}' in use, can't be deleted!\n"
        )));
    }
    s.files.remove(name);
    Ok(format!("Certificate '{name}' deleted!\n"))
}

/// What `show ssl cert` lists: the pending change's file, then every file.
pub fn list() -> (Option<String>, Vec<String>) {
    let s = store();
    (
        s.tx.as_ref().map(|(p, _)| p.clone()),
        s.files.keys().cloned().collect(),
    )
}

/// How `show ssl cert` qualifies an entry.
pub enum Status {
    Empty,
    Unused,
    Used,
}

/// One entry for `show ssl cert [*]NAME`: `*NAME` the pending change.
pub fn lookup(name: &str) -> Option<(Status, Ckch)> {
    let mut s = store();
    let (ckch, used) = match name.strip_prefix('*') {
        // The pending change is a copy that nothing serves yet: "Unused",
        // as HAProxy says.
        Some(n) => {
            let (_, c) = s.tx.as_ref().filter(|(p, _)| p == n)?;
            (c.clone(), false)
        }
        None => {
            let e = s.files.get_mut(name)?;
            (e.ckch.clone(), e.used(name))
        }
    };
    let status = if ckch.chain.is_empty() {
        Status::Empty
    } else if used {
        Status::Used
    } else {
        Status::Unused
    };
    Some((status, ckch))
}
