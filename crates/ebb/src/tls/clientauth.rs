//! Client certificates on `bind ... ssl` lines: `verify none|optional|
//! required`, `ca-file`, `ca-verify-file`, `crl-file`, `ca-ignore-err`,
//! `crt-ignore-err`, `no-ca-names` (HAProxy 2.6's meaning), and what the
//! `ssl_c_*` fetches read of the certificate a client presented.
//!
//! Verification is webpki's (the library rustls uses), run by ebb so that
//! a failure becomes the OpenSSL `X509_V_ERR_*` number HAProxy reports
//! (`ssl_c_verify`, `ssl_c_err`, `ssl_c_ca_err`) and, when that number is
//! ignored, verification goes on past it as OpenSSL's does: a time error
//! is checked again at a time the certificates are valid, a revocation
//! error without the lists, a purpose error with any purpose, so an
//! ignored error never lets another one through. An unknown issuer ends
//! the path: ignored, only the leaf's dates are still checked.
//!
//! The result of a verification is handed to the connection through a
//! thread-local slot: rustls calls the verifier inside the connection's
//! `process_new_packets`, on the connection's thread, and the connection
//! takes the slot right after (see [`take_note`]).

use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore};
use x509_parser::prelude::{FromDer, X509Certificate};

pub use crate::clientcert::{ClientCert, ClientCertView, VerifyNote};
use crate::config::{ClientAuthConf, ClientVerify};
use crate::tls::legacy;

// OpenSSL's X509_V_ERR_* numbers ebb reports.
use crate::tls::legacy::{
    CERT_HAS_EXPIRED, CERT_NOT_YET_VALID, CERT_REVOKED, CERT_SIGNATURE_FAILURE, CRL_HAS_EXPIRED,
    CRL_SIGNATURE_FAILURE, DEPTH_ZERO_SELF_SIGNED, GET_CRL, GET_ISSUER_CERT,
    GET_ISSUER_CERT_LOCALLY, INVALID_CA, INVALID_PURPOSE, SELF_SIGNED_IN_CHAIN,
    UNABLE_TO_VERIFY_LEAF_SIGNATURE, UNSPECIFIED,
};

thread_local! {
    static NOTE: Cell<Option<VerifyNote>> = const { Cell::new(None) };
}

/// The note of the client chain verified last on this thread, taken (the
/// connection calls this after each `process_new_packets`).
pub fn take_note() -> Option<VerifyNote> {
    NOTE.with(|n| n.take())
}

/// The verifier of one `bind` line (see the module doc).
#[derive(Debug)]
pub struct ClientAuth {
    mandatory: bool,
    roots: RootCertStore,
    hints: Vec<DistinguishedName>,
    crls: Vec<webpki::CertRevocationList<'static>>,
    /// The CRLs' issuers, revoked serials and next update, for the depth
    /// of a revocation error.
    crl_facts: Vec<CrlFacts>,
    ca_ignore: u64,
    crt_ignore: u64,
    /// Checks the handshake signatures (and holds the provider).
    sigs: crate::tls::NoVerify,
    /// The CA files' certificates and the CRLs, for chains webpki cannot
    /// read (see `tls::legacy`).
    ca_ders: Vec<Vec<u8>>,
    crl_ders: Vec<Vec<u8>>,
    /// A CRL is X.509 v1 (webpki reads none): every chain goes through
    /// `tls::legacy`.
    crls_v1: bool,
}

#[derive(Debug)]
struct CrlFacts {
    issuer: Vec<u8>,
    revoked: Vec<Vec<u8>>,
    next_update: Option<i64>,
}

/// The files named in `ca-file` (a PEM file, or a directory whose `.pem`,
/// `.crt`, `.cer` files are read, dot-files skipped, as HAProxy).
fn ca_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let files = if path.is_dir() {
        let mut v: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                !name.starts_with('.') && [".pem", ".crt", ".cer"].iter().any(|x| name.ends_with(x))
            })
            .collect();
        v.sort();
        v
    } else {
        vec![path.to_path_buf()]
    };
    let mut out = Vec::new();
    for f in files {
        let pem = std::fs::read(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        for c in CertificateDer::pem_slice_iter(&pem) {
            out.push(c.map_err(|e| format!("{}: bad PEM: {e}", f.display()))?);
        }
    }
    if out.is_empty() {
        return Err("no certificate (no BEGIN CERTIFICATE block) in it".into());
    }
    Ok(out)
}

impl ClientAuth {
    /// The verifier of `conf`, `None` under `verify none`. The files are
    /// read even then, so that `ebb -c` reports a bad one as HAProxy does.
    /// Errors are complete messages for the bind line's location.
    pub fn load(
        conf: &ClientAuthConf,
        provider: Arc<CryptoProvider>,
    ) -> Result<Option<Arc<ClientAuth>>, String> {
        Self::load_from(conf, provider, false)
    }

    /// As [`ClientAuth::load`]; `stored`: the files as the CA/CRL store
    /// holds them (after a CLI commit) rather than read again.
    pub fn load_from(
        conf: &ClientAuthConf,
        provider: Arc<CryptoProvider>,
        stored: bool,
    ) -> Result<Option<Arc<ClientAuth>>, String> {
        use crate::tls::cafile;
        let used = conf.verify != ClientVerify::None;
        let mut roots = RootCertStore::empty();
        let mut hints = Vec::new();
        let mut ca_ders = Vec::new();
        for (kw, path, named) in [
            ("ca-file", &conf.ca_file, !conf.no_ca_names),
            ("ca-verify-file", &conf.ca_verify_file, false),
        ] {
            let Some(path) = path else { continue };
            let name = path.display().to_string();
            let kind = cafile::Kind::Ca;
            // (A file a commit gave the other kind holds nothing of this one.)
            let certs = match stored.then(|| cafile::contents(&name, kind).unwrap_or_default()) {
                Some(ders) => ders.into_iter().map(CertificateDer::from).collect(),
                None => {
                    let certs = ca_certs(path)
                        .map_err(|e| format!("'{kw}' : unable to load {}: {e}", path.display()))?;
                    cafile::record(&name, kind, certs.iter().map(|c| c.as_ref()), used);
                    certs
                }
            };
            let mut store = RootCertStore::empty();
            ca_ders.extend(certs.iter().map(|c| c.as_ref().to_vec()));
            for c in certs {
                store
                    .add(c)
                    .map_err(|e| format!("'{kw}' : unable to load {}: {e}", path.display()))?;
            }
            if named {
                hints.extend(store.subjects());
            }
            roots.extend(store.roots);
        }
        let mut crls = Vec::new();
        let mut crl_facts = Vec::new();
        let mut crl_ders = Vec::new();
        let mut crls_v1 = false;
        if let Some(path) = &conf.crl_file {
            let name = path.display().to_string();
            let kind = cafile::Kind::Crl;
            let loaded = match stored.then(|| cafile::contents(&name, kind).unwrap_or_default()) {
                Some(ders) => crate::tls::crls_from_ders(ders)?,
                None => {
                    let loaded = crate::tls::crls_from_file(path)?;
                    cafile::record(&name, kind, loaded.iter().map(|(d, _)| d.as_ref()), used);
                    loaded
                }
            };
            for (der, owned) in loaded {
                crl_ders.push(der.as_ref().to_vec());
                match owned {
                    Some(o) => crls.push(webpki::CertRevocationList::Owned(o)),
                    None => crls_v1 = true,
                }
                if let Ok((_, crl)) =
                    x509_parser::revocation_list::CertificateRevocationList::from_der(der.as_ref())
                {
                    crl_facts.push(CrlFacts {
                        issuer: crl.issuer().as_raw().to_vec(),
                        revoked: crl
                            .iter_revoked_certificates()
                            .map(|r| r.serial().to_bytes_be())
                            .collect(),
                        next_update: crl.next_update().map(|t| t.timestamp()),
                    });
                }
            }
        }
        if conf.verify == ClientVerify::None {
            return Ok(None);
        }
        Ok(Some(Arc::new(ClientAuth {
            mandatory: conf.verify == ClientVerify::Required,
            roots,
            hints,
            crls,
            crl_facts,
            ca_ignore: conf.ca_ignore_err,
            crt_ignore: conf.crt_ignore_err,
            sigs: crate::tls::NoVerify(provider),
            ca_ders,
            crl_ders,
            crls_v1,
        })))
    }

    fn ignored(&self, code: i32, depth: i32) -> bool {
        let mask = if depth == 0 {
            self.crt_ignore
        } else {
            self.ca_ignore
        };
        match code {
            1..64 => mask & (1u64 << code) != 0,
            // OpenSSL 3's numbers past 63 (68 weak digest, 79 invalid
            // CA): ignored by `all`, as Debian's HAProxy 2.6 does.
            64.. => mask == u64::MAX,
            _ => false,
        }
    }

    /// Verifies a chain as OpenSSL would for HAProxy: the note, and the
    /// error that fails the handshake (`None`: accepted).
    pub fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> (VerifyNote, Option<rustls::Error>) {
        let mut note = VerifyNote::default();
        let presented: Vec<&[u8]> = intermediates.iter().map(|c| c.as_ref()).collect();
        if legacy::needed(end_entity.as_ref(), &presented, self.crls_v1) {
            let inputs = legacy::Inputs {
                leaf: end_entity.as_ref(),
                presented: &presented,
                trusted: &self.ca_ders,
                crls: &self.crl_ders,
                now: now.as_secs() as i64,
                purpose: legacy::Purpose::SslClient,
            };
            let r = legacy::verify(&inputs, &mut |code, depth| {
                note.add(code, depth);
                self.ignored(code, depth)
            });
            return (note, r.err().map(legacy::error_for));
        }
        let parsed: Vec<X509Certificate<'_>> = std::iter::once(end_entity)
            .chain(intermediates)
            .filter_map(|c| X509Certificate::from_der(c.as_ref()).ok().map(|(_, x)| x))
            .collect();
        let Ok(ee) = webpki::EndEntityCert::try_from(end_entity) else {
            note.add(UNSPECIFIED, 0);
            let e = rustls::Error::InvalidCertificate(CertificateError::BadEncoding);
            return if self.ignored(UNSPECIFIED, 0) {
                (note, None)
            } else {
                (note, Some(e))
            };
        };
        let algs = self.sigs.0.signature_verification_algorithms.all;
        let crl_refs: Vec<&webpki::CertRevocationList<'_>> = self.crls.iter().collect();
        let mut time = now;
        let mut use_crls = !crl_refs.is_empty();
        let mut any_purpose = false;
        let mut seen = Vec::new();
        let run = |time: UnixTime, use_crls: bool, any_purpose: bool| {
            let revocation = if use_crls {
                webpki::RevocationOptionsBuilder::new(&crl_refs)
                    .ok()
                    .map(|b| {
                        b.with_depth(webpki::RevocationCheckDepth::Chain)
                            .with_status_policy(webpki::UnknownStatusPolicy::Deny)
                            .with_expiration_policy(webpki::ExpirationPolicy::Enforce)
                            .build()
                    })
            } else {
                None
            };
            let roots = &self.roots.roots;
            if any_purpose {
                ee.verify_for_usage(
                    algs,
                    roots,
                    intermediates,
                    time,
                    AnyPurpose,
                    revocation,
                    None,
                )
                .map(|_| ())
            } else {
                let usage = webpki::KeyUsage::client_auth();
                ee.verify_for_usage(algs, roots, intermediates, time, usage, revocation, None)
                    .map(|_| ())
            }
        };
        loop {
            let Err(mut e) = run(time, use_crls, any_purpose) else {
                return (note, None);
            };
            // webpki checks the leaf's dates before looking for its issuer,
            // OpenSSL after building the chain: an unknown issuer comes
            // first there.
            if matches!(
                e,
                webpki::Error::CertExpired { .. } | webpki::Error::CertNotValidYet { .. }
            ) {
                if let Some(t) = valid_time(&parsed) {
                    if let Err(webpki::Error::UnknownIssuer) = run(t, use_crls, any_purpose) {
                        e = webpki::Error::UnknownIssuer;
                    }
                }
            }
            let (code, depth, err) = self.map_error(&e, &parsed, now);
            note.add(code, depth);
            if !self.ignored(code, depth) {
                return (note, Some(err));
            }
            if seen.contains(&code) {
                // No progress past an ignored error: nothing more to check.
                return (note, None);
            }
            seen.push(code);
            match code {
                CERT_NOT_YET_VALID | CERT_HAS_EXPIRED => match valid_time(&parsed) {
                    Some(t) => time = t,
                    None => return (note, None),
                },
                CERT_REVOKED | GET_CRL | CRL_HAS_EXPIRED => use_crls = false,
                INVALID_PURPOSE => any_purpose = true,
                DEPTH_ZERO_SELF_SIGNED
                | SELF_SIGNED_IN_CHAIN
                | GET_ISSUER_CERT_LOCALLY
                | GET_ISSUER_CERT => {
                    // No path: OpenSSL still checks what it can: a lone
                    // leaf's signature cannot be (21, "unable to verify
                    // the first certificate"), then the leaf's dates.
                    if code == GET_ISSUER_CERT_LOCALLY && depth == 0 {
                        note.add(UNABLE_TO_VERIFY_LEAF_SIGNATURE, 0);
                        if !self.ignored(UNABLE_TO_VERIFY_LEAF_SIGNATURE, 0) {
                            return (note, Some(err));
                        }
                    }
                    if let Some(leaf) = parsed.first() {
                        let v = leaf.validity();
                        let t = now.as_secs() as i64;
                        let c = if t < v.not_before.timestamp() {
                            Some(CERT_NOT_YET_VALID)
                        } else if t > v.not_after.timestamp() {
                            Some(CERT_HAS_EXPIRED)
                        } else {
                            None
                        };
                        if let Some(c) = c {
                            note.add(c, 0);
                            if !self.ignored(c, 0) {
                                let err = if c == CERT_HAS_EXPIRED {
                                    CertificateError::Expired
                                } else {
                                    CertificateError::NotValidYet
                                };
                                return (note, Some(rustls::Error::InvalidCertificate(err)));
                            }
                        }
                    }
                    return (note, None);
                }
                // Ignored with `all`: nothing more can be checked.
                _ => return (note, None),
            }
        }
    }

    /// A webpki error as OpenSSL's number, its depth, and the rustls
    /// error that fails the handshake (its alert).
    fn map_error(
        &self,
        e: &webpki::Error,
        chain: &[X509Certificate<'_>],
        now: UnixTime,
    ) -> (i32, i32, rustls::Error) {
        use webpki::Error as W;
        let t = now.as_secs() as i64;
        let leaf = chain.first();
        // The first certificate presented whose dates do not cover `t`
        // (else the CA's: one past the chain).
        let time_depth = || {
            chain
                .iter()
                .position(|c| {
                    let v = c.validity();
                    t < v.not_before.timestamp() || t > v.not_after.timestamp()
                })
                .unwrap_or(chain.len()) as i32
        };
        let leaf_issuer = leaf
            .map(|l| l.issuer().as_raw().to_vec())
            .unwrap_or_default();
        let bad = |c: CertificateError| rustls::Error::InvalidCertificate(c);
        match e {
            W::CertExpired { .. } => (
                CERT_HAS_EXPIRED,
                time_depth(),
                bad(CertificateError::Expired),
            ),
            W::CertNotValidYet { .. } => (
                CERT_NOT_YET_VALID,
                time_depth(),
                bad(CertificateError::NotValidYet),
            ),
            W::CertRevoked => {
                let serial = leaf
                    .map(|l| l.tbs_certificate.serial.to_bytes_be())
                    .unwrap_or_default();
                let at_leaf = self
                    .crl_facts
                    .iter()
                    .any(|f| f.issuer == leaf_issuer && f.revoked.contains(&serial));
                (
                    CERT_REVOKED,
                    if at_leaf { 0 } else { 1 },
                    bad(CertificateError::Revoked),
                )
            }
            W::UnknownRevocationStatus => {
                let has = self.crl_facts.iter().any(|f| f.issuer == leaf_issuer);
                (
                    GET_CRL,
                    if has { 1 } else { 0 },
                    bad(CertificateError::UnknownRevocationStatus),
                )
            }
            W::CrlExpired { .. } => {
                let leaf_crl_expired = self
                    .crl_facts
                    .iter()
                    .any(|f| f.issuer == leaf_issuer && f.next_update.is_some_and(|n| n < t));
                (
                    CRL_HAS_EXPIRED,
                    if leaf_crl_expired { 0 } else { 1 },
                    bad(CertificateError::ExpiredRevocationList),
                )
            }
            W::UnknownIssuer => {
                let (code, depth) = unknown_issuer(chain);
                (code, depth, bad(CertificateError::UnknownIssuer))
            }
            W::RequiredEkuNotFoundContext(_) => {
                (INVALID_PURPOSE, 0, bad(CertificateError::InvalidPurpose))
            }
            W::InvalidSignatureForPublicKey => (
                CERT_SIGNATURE_FAILURE,
                0,
                bad(CertificateError::BadSignature),
            ),
            W::InvalidCrlSignatureForPublicKey => (
                CRL_SIGNATURE_FAILURE,
                0,
                bad(CertificateError::BadSignature),
            ),
            W::CaUsedAsEndEntity | W::EndEntityUsedAsCa | W::PathLenConstraintViolated => {
                (INVALID_CA, 1, bad(CertificateError::UnknownIssuer))
            }
            _ => (
                UNSPECIFIED,
                0,
                bad(CertificateError::Other(rustls::OtherError(Arc::new(
                    VerifyError(format!("{e:?}")),
                )))),
            ),
        }
    }
}

#[derive(Debug)]
struct VerifyError(String);

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for VerifyError {}

/// OpenSSL's number and depth for a chain that leads to no trusted CA:
/// the chain is followed from the leaf through the certificates the
/// client sent (subject = issuer); its last one is self-signed (18 at
/// depth 0, 19 deeper) or not (20, "unable to get local issuer").
fn unknown_issuer(chain: &[X509Certificate<'_>]) -> (i32, i32) {
    let Some(leaf) = chain.first() else {
        return (GET_ISSUER_CERT_LOCALLY, 0);
    };
    let mut last = leaf;
    let mut depth = 0;
    let mut used = vec![false; chain.len()];
    used[0] = true;
    loop {
        if last.subject().as_raw() == last.issuer().as_raw() {
            let code = if depth == 0 {
                DEPTH_ZERO_SELF_SIGNED
            } else {
                SELF_SIGNED_IN_CHAIN
            };
            return (code, depth);
        }
        let next = chain
            .iter()
            .enumerate()
            .find(|(i, c)| !used[*i] && c.subject().as_raw() == last.issuer().as_raw());
        match next {
            Some((i, c)) => {
                used[i] = true;
                last = c;
                depth += 1;
            }
            None => return (GET_ISSUER_CERT_LOCALLY, depth),
        }
    }
}

/// A time inside every presented certificate's validity (the latest
/// start), to check the rest of a chain past an ignored date error.
fn valid_time(chain: &[X509Certificate<'_>]) -> Option<UnixTime> {
    let start = chain
        .iter()
        .map(|c| c.validity().not_before.timestamp())
        .max()?;
    let end = chain
        .iter()
        .map(|c| c.validity().not_after.timestamp())
        .min()?;
    (start <= end && start >= 0)
        .then(|| UnixTime::since_unix_epoch(std::time::Duration::from_secs(start as u64)))
}

/// Any extended key usage (a purpose error ignored).
struct AnyPurpose;

impl webpki::ExtendedKeyUsageValidator for AnyPurpose {
    fn validate(&self, _iter: webpki::KeyPurposeIdIter<'_, '_>) -> Result<(), webpki::Error> {
        Ok(())
    }
}

impl ClientCertVerifier for ClientAuth {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let (note, err) = self.check(end_entity, intermediates, now);
        NOTE.with(|n| n.set(Some(note)));
        match err {
            Some(e) => Err(e),
            None => Ok(ClientCertVerified::assertion()),
        }
    }

    // The handshake's signatures: as for servers (see `NoVerify`).
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.sigs.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.sigs.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.sigs.supported_verify_schemes()
    }
}

/// Loads `conf`'s files only (for `ebb -c` and start-up errors).
pub fn check_files(conf: &ClientAuthConf) -> Result<(), String> {
    ClientAuth::load(conf, crate::tls::provider()).map(|_| ())
}
