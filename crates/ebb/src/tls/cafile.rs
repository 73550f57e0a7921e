//! The CA files and CRL files the configuration loaded (HAProxy's
//! "cafile tree"), by path, for `show ssl ca-file` and `show ssl
//! crl-file`: what each holds, and whether a bind line verifies client
//! certificates with it ("Used"; a server's `ca-file` is "Unused" unless
//! the server has a `crt`, as in HAProxy 2.6, whose server contexts are
//! linked to the entry only through their certificate instance).
//!
//! The CLI's transactions (`new|set|commit|abort|del ssl ca-file|crl-file`)
//! change an entry in memory; a commit rebuilds the verification of every
//! user of the file ([`TrustUser`]) for new handshakes. Nothing is written
//! to disk: a reload reads the files again.

use crate::tls::legacy;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

/// What a file holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Ca,
    Crl,
}

impl Kind {
    fn index(self) -> usize {
        match self {
            Kind::Ca => 0,
            Kind::Crl => 1,
        }
    }

    /// "CA" or "CRL", as HAProxy's messages name the kind.
    fn word(self) -> &'static str {
        match self {
            Kind::Ca => "CA",
            Kind::Crl => "CRL",
        }
    }

    fn cmd(self) -> &'static str {
        match self {
            Kind::Ca => "ca-file",
            Kind::Crl => "crl-file",
        }
    }
}

/// Something that verifies with a stored file (a bind line's client
/// certificates, a server's certificate): rebuilt from the store when
/// the file is committed.
pub(crate) trait TrustUser: Send + Sync {
    /// Rebuilds the verification that uses `path` from the store, for new
    /// handshakes; the number of certificate instances rebuilt (HAProxy
    /// prints a dot for each), 0 when it no longer uses the file.
    fn refresh(&self, path: &str) -> Result<usize, String>;
}

struct Entry {
    kind: Kind,
    /// DER certificates (deduplicated, in the order `show` prints them)
    /// or CRLs.
    ders: Vec<Vec<u8>>,
    used: bool,
    /// Made by `new ssl ca-file|crl-file` and not committed yet.
    empty: bool,
    users: Vec<Weak<dyn TrustUser>>,
}

impl Entry {
    fn in_use(&self) -> bool {
        self.used || self.users.iter().any(|u| u.strong_count() > 0)
    }
}

/// The one pending change of each kind: the file and what it will hold.
struct Tx {
    path: String,
    ders: Vec<Vec<u8>>,
}

struct Store {
    files: BTreeMap<String, Entry>,
    /// By [`Kind::index`].
    tx: [Option<Tx>; 2],
}

static FILES: Mutex<Store> = Mutex::new(Store {
    files: BTreeMap::new(),
    tx: [None, None],
});

fn files() -> std::sync::MutexGuard<'static, Store> {
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

/// A file's contents as the store keeps them: a certificate once, in
/// the order OpenSSL's store leaves them after loading. Each addition
/// first looks for the certificate, which sorts the list (by subject, its
/// canonical encoding compared length first), then appends it: all but
/// the last added end up sorted.
fn normalize<'a>(kind: Kind, ders: impl IntoIterator<Item = &'a [u8]>) -> Vec<Vec<u8>> {
    let mut list: Vec<Vec<u8>> = Vec::new();
    if kind == Kind::Crl {
        list.extend(ders.into_iter().map(<[u8]>::to_vec));
        return list;
    }
    for d in ders {
        list.sort_by_cached_key(|d| {
            let c = canon_subject(d);
            (c.len(), c)
        });
        if !list.iter().any(|x| x == d) {
            list.push(d.to_vec());
        }
    }
    list
}

/// Records what a file held when it was (re)loaded; `used`: by a bind
/// line.
pub(crate) fn record<'a>(
    path: &str,
    kind: Kind,
    ders: impl IntoIterator<Item = &'a [u8]>,
    used: bool,
) {
    let list = normalize(kind, ders);
    let mut f = files();
    let old = f.files.remove(path);
    let used = used || old.as_ref().is_some_and(|e| e.used && e.kind == kind);
    let users = old.map(|e| e.users).unwrap_or_default();
    f.files.insert(
        path.to_string(),
        Entry {
            kind,
            ders: list,
            used,
            empty: false,
            users,
        },
    );
}

/// Notes that `user` verifies with the file at `path` (already recorded):
/// a commit of the file rebuilds it, and the file is in use while it lives.
pub(crate) fn attach(path: &str, user: Weak<dyn TrustUser>) {
    let mut f = files();
    if let Some(e) = f.files.get_mut(path) {
        e.users
            .retain(|u| u.strong_count() > 0 && !Weak::ptr_eq(u, &user));
        e.users.push(user);
    }
}

/// Notes that `user` no longer verifies with the file at `path`.
pub(crate) fn detach(path: &str, user: &Weak<dyn TrustUser>) {
    let mut f = files();
    if let Some(e) = f.files.get_mut(path) {
        e.users
            .retain(|u| u.strong_count() > 0 && !Weak::ptr_eq(u, user));
    }
}

/// OpenSSL's canonical encoding of a certificate's subject (`x509_name_canon`):
/// each RDN's SET with its text values trimmed, inner runs of blanks made
/// one space, ASCII lower-cased, as UTF8String; the sequence's own header
/// left out.
fn canon_subject(der: &[u8]) -> Vec<u8> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let Ok((_, c)) = X509Certificate::from_der(der) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for rdn in c.subject().iter() {
        let mut set = Vec::new();
        for atv in rdn.iter() {
            let oid = atv.attr_type().as_bytes();
            let mut seq = Vec::new();
            push_tlv(&mut seq, 0x06, oid);
            let v = atv.attr_value();
            let text = matches!(
                v.header.tag().0,
                12 | 19 | 20 | 22 | 26 | 28 | 30 // UTF8, Printable, T61, IA5, Visible, Universal, BMP
            );
            match (text, atv.as_str()) {
                (true, Ok(s)) => {
                    let words: Vec<&str> = s.split_ascii_whitespace().collect();
                    let s = words.join(" ").to_ascii_lowercase();
                    push_tlv(&mut seq, 0x0c, s.as_bytes());
                }
                _ => push_tlv(&mut seq, v.header.tag().0 as u8, v.data),
            }
            push_tlv(&mut set, 0x30, &seq);
        }
        push_tlv(&mut out, 0x31, &set);
    }
    out
}

fn push_tlv(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    let n = body.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .iter()
            .copied()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(body);
}

/// `show ssl ca-file` / `show ssl crl-file` without a name: the pending
/// change (`# transaction`, `*FILE`), then `# filename` and each file of
/// that kind (a CA file with its number of certificates).
pub fn list(kind: Kind) -> String {
    let f = files();
    let mut s = String::new();
    if let Some(t) = &f.tx[kind.index()] {
        s.push_str("# transaction\n");
        match kind {
            Kind::Ca => s.push_str(&format!("*{} - {} certificate(s)\n", t.path, t.ders.len())),
            Kind::Crl => s.push_str(&format!("*{}\n", t.path)),
        }
    }
    s.push_str("# filename\n");
    for (p, e) in f.files.iter().filter(|(_, e)| e.kind == kind) {
        match kind {
            Kind::Ca => s.push_str(&format!("{p} - {} certificate(s)\n", e.ders.len())),
            Kind::Crl => s.push_str(&format!("{p}\n")),
        }
    }
    s
}

/// One file of `kind` (`*FILE`: the pending change of it): its status
/// (`Empty`, `Unused`, `Used`) and what it holds.
pub fn lookup(path: &str, kind: Kind) -> Option<(&'static str, Vec<Vec<u8>>)> {
    let f = files();
    if let Some(p) = path.strip_prefix('*') {
        let t = f.tx[kind.index()].as_ref().filter(|t| t.path == p)?;
        return Some(("Unused", t.ders.clone()));
    }
    let e = f.files.get(path).filter(|e| e.kind == kind)?;
    let status = if e.empty {
        "Empty"
    } else if e.in_use() {
        "Used"
    } else {
        "Unused"
    };
    Some((status, e.ders.clone()))
}

/// What a stored file holds now (`None`: not stored), for a rebuild.
pub(crate) fn contents(path: &str, kind: Kind) -> Option<Vec<Vec<u8>>> {
    let f = files();
    let e = f.files.get(path).filter(|e| e.kind == kind)?;
    Some(e.ders.clone())
}

/// `new ssl ca-file|crl-file NAME`: an empty entry, to fill with `set`
/// and `commit`.
pub fn new_file(kind: Kind, name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err(format!("'new ssl {}' expects a filename\n", kind.cmd()));
    }
    let mut f = files();
    if f.files.contains_key(name) {
        return Err(format!("{} file '{name}' already exists!\n", kind.word()));
    }
    f.files.insert(
        name.to_string(),
        Entry {
            kind,
            ders: Vec::new(),
            used: false,
            empty: true,
            users: Vec::new(),
        },
    );
    Ok(format!("New {} file created '{name}'!\n", kind.word()))
}

/// DER objects.
type Ders = Vec<Vec<u8>>;

/// The certificates and CRLs of a payload (either kind takes both, as
/// OpenSSL's loader that HAProxy uses): those of `kind`, then those of
/// the other kind; each checked as the verifiers will read it (webpki,
/// or `legacy` for X.509 v1). `None`: a PEM block that does not read.
fn parse_payload(kind: Kind, payload: &str) -> Option<(Ders, Ders)> {
    use rustls::pki_types::pem::{PemObject, SectionKind};
    let mut certs = Vec::new();
    let mut crls = Vec::new();
    for item in <(SectionKind, Vec<u8>)>::pem_slice_iter(payload.as_bytes()) {
        let (section, der) = item.ok()?;
        match section {
            SectionKind::Certificate => {
                let c = rustls::pki_types::CertificateDer::from(der.as_slice());
                // A trust anchor webpki reads, or a certificate `legacy`
                // reads (X.509 v1).
                if webpki::anchor_from_trusted_cert(&c).is_err() && !legacy::parses(&der) {
                    return None;
                }
                certs.push(der);
            }
            SectionKind::Crl => {
                if webpki::OwnedCertRevocationList::from_der(&der).is_err()
                    && !legacy::is_v1_crl(&der)
                {
                    return None;
                }
                crls.push(der);
            }
            _ => {}
        }
    }
    // OpenSSL reads nothing from a payload without a PEM object: an error.
    if certs.is_empty() && crls.is_empty() {
        return None;
    }
    let (mine, other) = match kind {
        Kind::Ca => (certs, crls),
        Kind::Crl => (crls, certs),
    };
    Some((normalize(kind, mine.iter().map(|d| d.as_slice())), other))
}

/// `set ssl ca-file|crl-file NAME` with a PEM payload: starts (or
/// updates) the pending change of that kind.
pub fn set(kind: Kind, name: &str, payload: Option<&str>) -> Result<String, String> {
    let Some(payload) = payload.filter(|_| !name.is_empty()) else {
        let what = match kind {
            Kind::Ca => "CAs",
            Kind::Crl => "CRLs",
        };
        return Err(format!(
            "'set ssl {} expects a filename and {what} as a payload\n",
            kind.cmd()
        ));
    };
    let fail = |e: String| format!("{e}Can't update {name}!\n");
    let mut f = files();
    let created = match &f.tx[kind.index()] {
        Some(t) if t.path != name => {
            return Err(fail(format!(
                "The ongoing transaction is about '{}' but you are trying to set '{name}'\n",
                t.path
            )))
        }
        Some(_) => false,
        None => {
            if !f.files.contains_key(name) {
                return Err(fail(format!(
                    "Can't replace a {} file which is not referenced by the configuration!\n",
                    kind.word()
                )));
            }
            true
        }
    };
    let (ders, _other) =
        parse_payload(kind, payload).ok_or_else(|| fail("Invalid payload\n".into()))?;
    f.tx[kind.index()] = Some(Tx {
        path: name.to_string(),
        ders,
    });
    Ok(format!(
        "transaction {} for {} {name}!\n",
        if created { "created" } else { "updated" },
        kind.word()
    ))
}

/// `commit ssl ca-file|crl-file NAME`: the pending change stored, and
/// every bind line and server that verifies with the file rebuilt for new
/// handshakes (a dot each, as HAProxy prints).
pub fn commit(kind: Kind, name: &str) -> Result<String, String> {
    if name.is_empty() {
        // (HAProxy 2.6 names `ca-file` for both.)
        return Err("'commit ssl ca-file expects a filename\n".into());
    }
    let fail = |e: String| format!("{e}Can't commit {name}!\n");
    let mut f = files();
    match &f.tx[kind.index()] {
        None => return Err(fail("No ongoing transaction! !\n".into())),
        Some(t) if t.path != name => {
            return Err(fail(format!(
                "The ongoing transaction is about '{}' but you are trying to set '{name}'\n",
                t.path
            )))
        }
        Some(_) => {}
    }
    let Some(tx) = f.tx[kind.index()].take() else {
        return Err(fail("No ongoing transaction! !\n".into()));
    };
    let entry = f.files.entry(tx.path.clone()).or_insert_with(|| Entry {
        kind,
        ders: Vec::new(),
        used: false,
        empty: true,
        users: Vec::new(),
    });
    entry.kind = kind;
    entry.ders = tx.ders;
    entry.empty = false;
    entry.users.retain(|u| u.strong_count() > 0);
    let users: Vec<Arc<dyn TrustUser>> = entry.users.iter().filter_map(|u| u.upgrade()).collect();
    // The users read the store to rebuild.
    drop(f);
    let mut out = format!("Committing {}", tx.path);
    for u in users {
        match u.refresh(&tx.path) {
            Ok(n) => out.push_str(&".".repeat(n)),
            Err(mut e) => {
                if !e.ends_with('\n') {
                    e.push('\n');
                }
                out.push_str(&format!("\n{e}Failed!\n"));
                return Ok(out);
            }
        }
    }
    out.push_str("\nSuccess!\n");
    Ok(out)
}

/// `abort ssl ca-file|crl-file NAME`.
pub fn abort(kind: Kind, name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err(format!("'abort ssl {}' expects a filename\n", kind.cmd()));
    }
    let mut f = files();
    match &f.tx[kind.index()] {
        None => Err("No ongoing transaction!\n".into()),
        Some(t) if t.path != name => Err(format!(
            "The ongoing transaction is about '{}' but you are trying to abort a transaction for '{name}'\n",
            t.path
        )),
        Some(_) => {
            f.tx[kind.index()] = None;
            Ok(format!("Transaction aborted for certificate '{name}'!\n"))
        }
    }
}

/// `del ssl ca-file|crl-file NAME`: a file nothing verifies with.
pub fn del(kind: Kind, name: &str) -> Result<String, String> {
    let word = kind.word();
    if name.is_empty() {
        return Err(format!(
            "'del ssl {}' expects a {word} file name\n",
            kind.cmd()
        ));
    }
    let fail = |e: String| format!("Can't remove the {word} file: {e}\n");
    let mut f = files();
    if f.tx[kind.index()].as_ref().is_some_and(|t| t.path == name) {
        return Err(fail(format!(
            "ongoing transaction for the {word} file '{name}'"
        )));
    }
    let Some(e) = f.files.get(name) else {
        return Err(fail(format!("{word} file '{name}' doesn't exist!\n")));
    };
    // (HAProxy 2.6's `del ssl ca-file` takes a CRL file too.)
    if kind == Kind::Crl && e.kind != Kind::Crl {
        return Err(fail(
            "'del ssl crl-file' does not work on CA files!\n".into(),
        ));
    }
    if e.in_use() {
        return Err(fail(format!(
            "{word} file '{name}' in use, can't be deleted!\n"
        )));
    }
    f.files.remove(name);
    Ok(format!("{word} file '{name}' deleted!\n"))
}
