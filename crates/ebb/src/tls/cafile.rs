//! The CA files and CRL files the configuration loaded (HAProxy's
//! "cafile tree"), by path, for `show ssl ca-file` and `show ssl
//! crl-file`: what each holds, and whether a bind line verifies client
//! certificates with it ("Used"; a server's `ca-file` is "Unused", as in
//! HAProxy 2.6, whose server contexts hold no link to the entry).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// What a file holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Ca,
    Crl,
}

struct Entry {
    kind: Kind,
    /// DER certificates (deduplicated, in the order `show` prints them)
    /// or CRLs.
    ders: Vec<Vec<u8>>,
    used: bool,
}

static FILES: Mutex<BTreeMap<String, Entry>> = Mutex::new(BTreeMap::new());

fn files() -> std::sync::MutexGuard<'static, BTreeMap<String, Entry>> {
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records what a file held when it was (re)loaded; `used`: by a bind
/// line.
pub(crate) fn record<'a>(
    path: &str,
    kind: Kind,
    ders: impl IntoIterator<Item = &'a [u8]>,
    used: bool,
) {
    let mut list: Vec<Vec<u8>> = Vec::new();
    for d in ders {
        // An X509 store keeps a certificate once.
        if kind == Kind::Crl || !list.iter().any(|x| x == d) {
            list.push(d.to_vec());
        }
    }
    if kind == Kind::Ca {
        // OpenSSL keeps a store's certificates sorted by subject, its
        // canonical encoding compared length first.
        list.sort_by_cached_key(|d| {
            let c = canon_subject(d);
            (c.len(), c)
        });
    }
    let mut f = files();
    let used = used || f.get(path).is_some_and(|e| e.used && e.kind == kind);
    f.insert(
        path.to_string(),
        Entry {
            kind,
            ders: list,
            used,
        },
    );
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

/// `show ssl ca-file` / `show ssl crl-file` without a name: `# filename`
/// and each file of that kind (a CA file with its number of certificates).
pub fn list(kind: Kind) -> String {
    let mut s = String::from("# filename\n");
    for (p, e) in files().iter().filter(|(_, e)| e.kind == kind) {
        match kind {
            Kind::Ca => s.push_str(&format!("{p} - {} certificate(s)\n", e.ders.len())),
            Kind::Crl => s.push_str(&format!("{p}\n")),
        }
    }
    s
}

/// One file of `kind`: whether a bind line uses it, and what it holds.
pub fn lookup(path: &str, kind: Kind) -> Option<(bool, Vec<Vec<u8>>)> {
    let f = files();
    let e = f.get(path).filter(|e| e.kind == kind)?;
    Some((e.used, e.ders.clone()))
}
