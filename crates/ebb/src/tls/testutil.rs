//! Test certificates, generated at test time with rcgen (a dev-dependency).
//!
//! Used by the unit tests of `tls` and `transport`. Integration tests in
//! `crates/ebb/tests/` cannot see `#[cfg(test)]` items of the library, so
//! they include this file directly (it depends on nothing of ebb):
//!
//! ```ignore
//! #[path = "../src/tls/testutil.rs"]
//! mod testutil;
//! let (crt, key, pem) = testutil::test_cert(dir.path(), &["localhost"]);
//! ```
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Writes a fresh self-signed certificate for `names` (its SAN DNS names;
/// the first also names the files) into `dir`, and returns the paths of
/// the certificate PEM, the key PEM, and the combined PEM (chain then key,
/// HAProxy's `crt` format). The certificate is its own CA: use the
/// certificate file as a client's `ca-file`. Panics on failure (tests only).
pub fn test_cert(dir: &Path, names: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let base = names.first().cloned().unwrap_or_else(|| "cert".into());
    let base = base.replace('*', "_");
    let ck = rcgen::generate_simple_self_signed(names).expect("rcgen: generate certificate");
    let cert_pem = ck.cert.pem();
    let key_pem = ck.key_pair.serialize_pem();
    let crt = dir.join(format!("{base}.crt"));
    let key = dir.join(format!("{base}.key"));
    let both = dir.join(format!("{base}.pem"));
    std::fs::write(&crt, &cert_pem).expect("write certificate");
    std::fs::write(&key, &key_pem).expect("write key");
    std::fs::write(&both, format!("{cert_pem}{key_pem}")).expect("write combined PEM");
    (crt, key, both)
}

/// A fresh, empty directory under the system's temporary directory, unique
/// per call (tests run in parallel). The caller removes it if it cares.
pub fn temp_dir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ebb-tls-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}
