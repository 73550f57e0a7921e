//! Loading a bind line's certificates: the `crt` files and directories,
//! `crt-list` files with their per-line options and SNI filters, the key
//! and `.ocsp` files beside a certificate, and the checks done at load
//! (key against leaf, OCSP response format). Each loaded file is recorded
//! in the certificate store ([`super::ckch`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::ckch;
use crate::config::{tls_bind_option, BindSsl, ClientVerify, TlsOptionsOf};

/// One loaded certificate: the key, and the DNS names it answers for
/// (lower case; wildcards kept as `*.domain`): its SAN names, or the SNI
/// filters of its `crt-list` line.
pub(crate) struct LoadedCert {
    pub(crate) key: Arc<CertifiedKey>,
    pub(crate) names: Vec<String>,
    /// `!name` filters of its `crt-list` line: names its wildcards skip.
    pub(super) excluded: Vec<String>,
}

/// Reads a whole file, with the error text of a config message.
pub(super) fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| e.to_string())
}

/// Reads the chain and key of one certificate: the key from the PEM file
/// itself, else from `<crt>.key` beside it (HAProxy's extra file; `NAME.key`
/// for `NAME.crt` under `ssl-load-extra-del-ext`), else
/// from the line's `key FILE`. A `<crt>.ocsp` file beside it (a DER OCSP
/// response) is stapled. Errors are the "why" of `cannot load certificate
/// X: why`.
fn read_ckch(crt: &Path, key: Option<&Path>) -> Result<ckch::Ckch, String> {
    let pem = read_file(crt)?;
    let mut chain = Vec::new();
    for c in CertificateDer::pem_slice_iter(&pem) {
        chain.push(c.map_err(|e| format!("bad PEM: {e}"))?);
    }
    if chain.is_empty() {
        return Err("no certificate (no BEGIN CERTIFICATE block) in it".into());
    }
    // `ssl-load-extra-del-ext`: `NAME.crt` has `NAME.key` beside it.
    let stem = match crt.to_str().and_then(|s| s.strip_suffix(".crt")) {
        Some(s) if super::extra_del_ext() => Path::new(s),
        _ => crt,
    };
    let sibling = |ext: &str| {
        let mut p = stem.as_os_str().to_owned();
        p.push(ext);
        std::path::PathBuf::from(p)
    };
    let side_key = sibling(".key");
    let key = if side_key.is_file() {
        Some(side_key.as_path())
    } else {
        key
    };
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
            None => {
                return Err(
                    "no private key in it, no .key file beside it, and no `key FILE` given".into(),
                )
            }
        },
        Err(e) => return Err(format!("bad PEM: {e}")),
    };
    let ocsp = sibling(".ocsp");
    let ocsp = if ocsp.exists() {
        let der = read_file(&ocsp).map_err(|e| format!("OCSP file {}: {e}", ocsp.display()))?;
        check_ocsp(&der).map_err(|e| format!("OCSP file {}: {e}", ocsp.display()))?;
        Some(der)
    } else {
        None
    };
    Ok(ckch::Ckch {
        chain,
        key: Some(pkey),
        ocsp,
    })
}

/// Loads one certificate file (see [`read_ckch`]) and records what it
/// holds in the certificate store ([`ckch`]) under its path. `names`: the
/// leaf's DNS names are wanted (a server's certificate; a client's may be
/// one that webpki cannot read, X.509 v1).
pub(super) fn load_cert(
    crt: &Path,
    key: Option<&Path>,
    provider: &CryptoProvider,
    names: bool,
) -> Result<LoadedCert, String> {
    let c = read_ckch(crt, key)?;
    let loaded = certify(&c, provider, names)?;
    ckch::record(&crt.display().to_string(), c);
    Ok(loaded)
}

/// The certificate of a chain, key and OCSP response, with the key
/// checked against the leaf.
pub(crate) fn certify(
    c: &ckch::Ckch,
    provider: &CryptoProvider,
    want_names: bool,
) -> Result<LoadedCert, String> {
    let (Some(leaf), Some(pkey)) = (c.chain.first(), c.key.as_ref()) else {
        return Err("a certificate and a private key are needed".into());
    };
    let names = if want_names {
        cert_names(leaf)?
    } else {
        Vec::new()
    };
    let chain = c.chain.clone();
    let checked = CertifiedKey::from_der(chain.clone(), pkey.clone_key(), provider);
    let mut ck = match checked {
        Ok(ck) => ck,
        // A certificate webpki cannot read (X.509 v1, which OpenSSL
        // serves and sends as any other): used as it is once its public
        // key is the key's (x509-parser reads it).
        Err(rustls::Error::InvalidCertificate(_)) => {
            let k = provider
                .key_provider
                .load_private_key(pkey.clone_key())
                .map_err(|e| format!("unusable private key: {e}"))?;
            if key_matches(leaf, k.as_ref()) == Some(false) {
                return Err("the private key does not match the certificate".to_string());
            }
            CertifiedKey::new(chain, k)
        }
        Err(rustls::Error::InconsistentKeys(_)) => {
            return Err("the private key does not match the certificate".to_string())
        }
        Err(e) => return Err(format!("unusable private key: {e}")),
    };
    ck.ocsp = c.ocsp.clone();
    Ok(LoadedCert {
        key: Arc::new(ck),
        names,
        excluded: Vec::new(),
    })
}

/// One DER element: its tag, the whole element, its contents, and what
/// follows it.
pub(crate) struct Tlv<'a> {
    pub tag: u8,
    pub whole: &'a [u8],
    pub body: &'a [u8],
    pub rest: &'a [u8],
}

/// Reads the DER element at the start of `b` (lengths up to 3 bytes).
pub(crate) fn der_tlv(b: &[u8]) -> Option<Tlv<'_>> {
    let (&tag, after) = b.split_first()?;
    let (&l0, after) = after.split_first()?;
    let (len, after) = if l0 < 0x80 {
        (l0 as usize, after)
    } else {
        let n = (l0 & 0x7f) as usize;
        if n == 0 || n > 3 || after.len() < n {
            return None;
        }
        let len = after[..n].iter().fold(0usize, |a, &x| a << 8 | x as usize);
        (len, &after[n..])
    };
    if after.len() < len {
        return None;
    }
    let hdr = b.len() - after.len();
    Some(Tlv {
        tag,
        whole: &b[..hdr + len],
        body: &after[..len],
        rest: &after[len..],
    })
}

/// Checks that `der` is an OCSP response (RFC 6960 §4.2.1) whose status is
/// `successful` and that carries response bytes: a file in some other
/// format, or an error answer from the responder, is refused at load
/// rather than stapled. Whether it is about this certificate, signed, and
/// current is for the client to verify, as with any stapled response.
pub(super) fn check_ocsp(der: &[u8]) -> Result<(), String> {
    let tlv = |b| der_tlv(b).map(|t| (t.tag, t.body, t.rest));
    let bad = || "not a DER OCSP response".to_string();
    let (tag, body, trailing) = tlv(der).ok_or_else(bad)?;
    if tag != 0x30 || !trailing.is_empty() {
        return Err(bad());
    }
    let (tag, status, rest) = tlv(body).ok_or_else(bad)?;
    if tag != 0x0a || status.len() != 1 {
        return Err(bad());
    }
    if status[0] != 0 {
        return Err(format!(
            "the responder's answer is not 'successful' (responseStatus {})",
            status[0]
        ));
    }
    match tlv(rest) {
        Some((0xa0, _, _)) => Ok(()),
        _ => Err(bad()),
    }
}

/// The names a certificate answers for without `crt-list` filters, as
/// HAProxy 2.6 takes them: every DNS name of its subjectAltName
/// extension, then every CN of its subject, lower case (a `*.domain` one
/// a wildcard). Read with x509-parser, which also reads X.509 v1
/// certificates (webpki, rustls' verifier, refuses them).
fn cert_names(leaf: &CertificateDer<'_>) -> Result<Vec<String>, String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let (_, c) = X509Certificate::from_der(leaf.as_ref())
        .map_err(|e| format!("cannot parse the certificate: {e}"))?;
    let mut names: Vec<String> = Vec::new();
    let mut add = |n: &str| {
        let n = n.to_ascii_lowercase();
        if !n.is_empty() && !names.contains(&n) {
            names.push(n);
        }
    };
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for g in &san.value.general_names {
            if let GeneralName::DNSName(n) = g {
                add(n);
            }
        }
    }
    for cn in c.subject().iter_common_name() {
        if let Ok(n) = cn.as_str() {
            add(n);
        }
    }
    Ok(names)
}

/// Whether `key` is the private half of `leaf`'s public key, for a
/// certificate webpki cannot read (X.509 v1): their SubjectPublicKeyInfo
/// compared. `None`: it cannot be told (a key type without one).
fn key_matches(leaf: &CertificateDer<'_>, key: &dyn rustls::sign::SigningKey) -> Option<bool> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, c) = X509Certificate::from_der(leaf.as_ref()).ok()?;
    let spki = key.public_key()?;
    Some(c.public_key().raw == spki.as_ref())
}

/// One certificate file to load, with its `crt-list` SNI filters.
pub(super) struct CertSpec {
    pub(super) path: PathBuf,
    /// `None`: the names of the certificate; else the positive filters.
    pub(super) names: Option<Vec<String>>,
    pub(super) excluded: Vec<String>,
    /// The bind line's settings with a `crt-list` line's `[options]`.
    pub(super) overlay: Option<BindSsl>,
    /// The `crt-list` (or `crt DIR`) and line it comes from.
    pub(super) list: Option<(String, usize)>,
}

/// File name endings HAProxy reserves for the files beside a certificate;
/// `crt DIR` skips them.
const RESERVED_EXT: [&str; 4] = [".key", ".ocsp", ".issuer", ".sctl"];

/// The certificate files a `crt PATH` names, HAProxy's way: a directory
/// gives every file in it in name order (skipping dot-files and the
/// reserved endings); a missing `x.pem` with `x.pem.rsa`/`.ecdsa`/`.dsa`
/// beside it is that bundle.
fn expand_crt(path: &Path) -> Result<Vec<PathBuf>, String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            let rd = std::fs::read_dir(path).map_err(|e| {
                format!(
                    "unable to scan directory '{}' for SSL certificates: {e}",
                    path.display()
                )
            })?;
            let mut files = Vec::new();
            for ent in rd {
                let ent =
                    ent.map_err(|e| format!("unable to scan directory '{}': {e}", path.display()))?;
                let name = ent.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') || RESERVED_EXT.iter().any(|x| name.ends_with(x)) {
                    continue;
                }
                let p = ent.path();
                if p.is_file() {
                    files.push(p);
                }
            }
            files.sort();
            if files.is_empty() {
                return Err(format!(
                    "no SSL certificate in directory '{}'",
                    path.display()
                ));
            }
            Ok(files)
        }
        Ok(_) => Ok(vec![path.to_path_buf()]),
        Err(e) => {
            let bundle: Vec<PathBuf> = [".rsa", ".ecdsa", ".dsa"]
                .iter()
                .map(|x| {
                    let mut p = path.as_os_str().to_owned();
                    p.push(x);
                    PathBuf::from(p)
                })
                .filter(|p| p.is_file())
                .collect();
            if bundle.is_empty() {
                return Err(format!(
                    "unable to stat SSL certificate from file '{}': {e}",
                    path.display()
                ));
            }
            Ok(bundle)
        }
    }
}

/// Reads a `crt-list` file: `CRT [[options]] [SNI-filter ...]` per line,
/// `#` comments. Of the per-line options, those that are a TLS policy
/// (`alpn`, `ciphers`, `ciphersuites`, `curves`, `ssl-min-ver`,
/// `ssl-max-ver`) apply to handshakes that get this certificate; the
/// others are refused.
fn read_crt_list(list: &Path, ssl: &BindSsl) -> Result<Vec<CertSpec>, String> {
    let text = std::fs::read_to_string(list)
        .map_err(|e| format!("unable to open crt-list '{}': {e}", list.display()))?;
    let mut out = Vec::new();
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let at = || format!("crt-list '{}' line {}", list.display(), n + 1);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (crt, opts, rest) = split_crt_list_line(line).map_err(|e| format!("{}: {e}", at()))?;
        let mut overlay = None;
        let mut opts_text = String::new();
        if let Some(opts) = opts {
            let (b, text) = line_overlay(opts, ssl, false).map_err(|e| format!("{}: {e}", at()))?;
            overlay = Some(b);
            opts_text = text;
        }
        let mut names = Vec::new();
        let mut excluded = Vec::new();
        for f in rest.split_whitespace() {
            match f.strip_prefix('!') {
                Some(x) => excluded.push(x.to_ascii_lowercase()),
                None => names.push(f.to_ascii_lowercase()),
            }
        }
        let p = Path::new(crt);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            ssl.crt_base.join(p)
        };
        let filters: Vec<String> = rest.split_whitespace().map(str::to_string).collect();
        for path in expand_crt(&p).map_err(|e| format!("{}: {e}", at()))? {
            entries.push(ckch::ListEntry {
                crt: path.display().to_string(),
                line: n + 1,
                opts: opts_text.clone(),
                filters: filters.clone(),
            });
            out.push(CertSpec {
                path,
                names: if names.is_empty() {
                    None
                } else {
                    Some(names.clone())
                },
                excluded: excluded.clone(),
                overlay: overlay.clone(),
                list: Some((list.display().to_string(), n + 1)),
            });
        }
    }
    if out.is_empty() {
        return Err(format!(
            "crt-list '{}' names no certificate",
            list.display()
        ));
    }
    ckch::record_list(
        &list.display().to_string(),
        entries,
        text.lines().count(),
        ssl,
        false,
    );
    Ok(out)
}

/// A `crt-list` line (not empty, not a comment): the certificate, what
/// its `[options]` hold if it has some, and the SNI filters after them.
pub(crate) fn split_crt_list_line(line: &str) -> Result<(&str, Option<&str>, &str), String> {
    let line = line.trim();
    let (crt, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim_start();
    match rest.strip_prefix('[') {
        Some(r) => {
            let Some((opts, after)) = r.split_once(']') else {
                return Err("'[' without ']'".into());
            };
            Ok((crt, Some(opts), after))
        }
        None => Ok((crt, None, rest)),
    }
}

/// A `crt-list` line's `[options]` over the bind line's settings `ssl`,
/// and the options as `show ssl crt-list` prints them. `from_cli`: a line
/// added on the CLI, whose `ca-file`, `ca-verify-file` and `crl-file`
/// must be files the store holds already (HAProxy reads no disk then).
pub(crate) fn line_overlay(
    opts: &str,
    ssl: &BindSsl,
    from_cli: bool,
) -> Result<(BindSsl, String), String> {
    let (b, words) = crt_list_options(opts, ssl)?;
    if from_cli {
        use super::cafile::{contents, Kind};
        for (kw, v) in &words {
            let kind = match kw.as_str() {
                "ca-file" | "ca-verify-file" => Kind::Ca,
                "crl-file" => Kind::Crl,
                _ => continue,
            };
            if let Some(path) = v {
                if contents(path, kind).is_none() {
                    return Err(format!("'{kw}' : unable to load {path}"));
                }
            }
        }
    }
    Ok((b, crt_list_options_text(&words)))
}

/// The words of a `crt-list` line's `[options]` with their values.
type CrtListWords = Vec<(String, Option<String>)>;

/// A `crt-list` line's `[options]` as `show ssl crt-list` prints them:
/// HAProxy's order (`alpn`, `verify`, `no-ca-names`, `ca-file`,
/// `crl-file`, `ciphers`, `ciphersuites`, `curves`, `ssl-min-ver`,
/// `ssl-max-ver`), the last of a repeated word, file paths after
/// `ca-base`, in brackets with a space before. `words`: what
/// [`crt_list_options`] read, in line order.
fn crt_list_options_text(words: &CrtListWords) -> String {
    const ORDER: [&str; 10] = [
        "alpn",
        "verify",
        "no-ca-names",
        "ca-file",
        "crl-file",
        "ciphers",
        "ciphersuites",
        "curves",
        "ssl-min-ver",
        "ssl-max-ver",
    ];
    let mut parts = Vec::new();
    for k in ORDER {
        if let Some((_, v)) = words.iter().rev().find(|(x, _)| x == k) {
            parts.push(match v {
                None => k.to_string(),
                Some(v) => format!("{k} {v}"),
            });
        }
    }
    format!(" [{}]", parts.join(" "))
}

/// A `crt-list` line's `[options]` over the bind line's settings (read by
/// the bind line's own parser, in its `crt-list` subset), and the words
/// read with their values (a file name after `ca-base`).
fn crt_list_options(opts: &str, ssl: &BindSsl) -> Result<(BindSsl, CrtListWords), String> {
    let mut b = ssl.clone();
    let words: Vec<&str> = opts.split_whitespace().collect();
    if words.is_empty() {
        return Err("empty '[]'".into());
    }
    let ca_path = |v: &str| {
        let p = Path::new(v);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            ssl.ca_base.join(p)
        }
    };
    let mut read = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let kw = words[i];
        let next = words.get(i + 1).copied();
        let Some(n) = tls_bind_option(kw, next, TlsOptionsOf::CrtListLine, &mut b, &ca_path)?
        else {
            return Err(format!(
                "per-certificate option '{kw}' is not supported by ebb (supported: alpn, ciphers, ciphersuites, curves, ssl-min-ver, ssl-max-ver, verify, ca-file, ca-verify-file, crl-file, no-ca-names)"
            ));
        };
        let v = next.filter(|_| n > 0).map(|v| match kw {
            "ca-file" | "ca-verify-file" | "crl-file" => ca_path(v).display().to_string(),
            _ => v.to_string(),
        });
        read.push((kw.to_string(), v));
        i += 1 + n;
    }
    if b.client.verify != ClientVerify::None
        && b.client.ca_file.is_none()
        && b.client.ca_verify_file.is_none()
    {
        return Err(
            "verify is enabled but no CA file specified ('ca-file' or 'ca-verify-file')".into(),
        );
    }
    if b.versions().is_empty() {
        return Err("the version options leave no TLS version (TLSv1.2, TLSv1.3)".into());
    }
    Ok((b, read))
}

/// Every certificate of a bind line, in load order.
pub(super) fn cert_specs(ssl: &BindSsl) -> Result<Vec<CertSpec>, String> {
    let mut out = Vec::new();
    let mut lists = ssl.crt_lists.iter().peekable();
    for i in 0..=ssl.crts.len() {
        while let Some((_, l)) = lists.next_if(|(at, _)| *at <= i) {
            out.extend(read_crt_list(l, ssl)?);
        }
        if let Some(c) = ssl.crts.get(i) {
            let files = expand_crt(c)?;
            let mut list = None;
            if c.is_dir() {
                // HAProxy loads a directory as a crt-list of its files.
                let name = c.display().to_string();
                let name = name.trim_end_matches('/');
                let entries = files
                    .iter()
                    .map(|f| ckch::ListEntry {
                        crt: f.display().to_string(),
                        line: 0,
                        opts: String::new(),
                        filters: Vec::new(),
                    })
                    .collect();
                let name = if name.is_empty() { "/" } else { name };
                ckch::record_list(name, entries, 0, ssl, true);
                list = Some((name.to_string(), 0));
            }
            for path in files {
                out.push(CertSpec {
                    path,
                    names: None,
                    excluded: Vec::new(),
                    overlay: None,
                    list: list.clone(),
                });
            }
        }
    }
    Ok(out)
}
