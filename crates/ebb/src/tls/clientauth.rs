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
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::config::{ClientAuthConf, ClientVerify};

/// Error IDs ebb refuses in `ca-ignore-err`/`crt-ignore-err` lists: after
/// them webpki's verification cannot go on (OpenSSL's would check the
/// rest), so ignoring them would accept chains not otherwise checked.
/// 7: certificate signature failure; 8: CRL signature failure.
pub const NOT_IGNORABLE: &[i64] = &[7, 8];

// OpenSSL's X509_V_ERR_* numbers ebb reports.
const UNSPECIFIED: i32 = 1;
const GET_ISSUER_CERT: i32 = 2;
const GET_CRL: i32 = 3;
const CERT_SIGNATURE_FAILURE: i32 = 7;
const CRL_SIGNATURE_FAILURE: i32 = 8;
const CERT_NOT_YET_VALID: i32 = 9;
const CERT_HAS_EXPIRED: i32 = 10;
const CRL_HAS_EXPIRED: i32 = 12;
const DEPTH_ZERO_SELF_SIGNED: i32 = 18;
const SELF_SIGNED_IN_CHAIN: i32 = 19;
const GET_ISSUER_CERT_LOCALLY: i32 = 20;
const UNABLE_TO_VERIFY_LEAF_SIGNATURE: i32 = 21;
const CERT_REVOKED: i32 = 23;
const INVALID_CA: i32 = 24;
const INVALID_PURPOSE: i32 = 26;

/// What verifying a client's chain found: HAProxy's `ssl_c_verify` (the
/// last error, 0: none), `ssl_c_err` (the first at depth 0),
/// `ssl_c_ca_err` and `ssl_c_ca_err_depth` (the first at depth > 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyNote {
    pub verify: i32,
    pub crt_err: i32,
    pub ca_err: i32,
    pub ca_err_depth: i32,
}

impl VerifyNote {
    fn add(&mut self, code: i32, depth: i32) {
        self.verify = code;
        if depth == 0 {
            if self.crt_err == 0 {
                self.crt_err = code;
            }
        } else if self.ca_err == 0 {
            self.ca_err = code;
            self.ca_err_depth = depth;
        }
    }
}

thread_local! {
    static NOTE: Cell<Option<VerifyNote>> = const { Cell::new(None) };
}

/// The note of the client chain verified last on this thread, taken (the
/// connection calls this after each `process_new_packets`).
pub fn take_note() -> Option<VerifyNote> {
    NOTE.with(|n| n.take())
}

/// What the `ssl_c_*` fetches read of a connection: the chain the client
/// presented (the leaf first; also after a resumption, from the session)
/// and the note of its verification in this handshake (`None`: none was
/// sent in this handshake, `ssl_fc_has_crt` false).
#[derive(Clone, Copy, Debug)]
pub struct ClientCertView<'a> {
    pub chain: &'a [CertificateDer<'static>],
    pub note: Option<VerifyNote>,
    /// `ssl_c_verify`: the note's, or a resumed session's.
    pub verify: i32,
}

/// An owned [`ClientCertView`], for the lanes of an HTTP/2 connection.
#[derive(Clone, Debug, Default)]
pub struct ClientCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub note: Option<VerifyNote>,
    pub verify: i32,
}

impl ClientCert {
    pub fn view(&self) -> ClientCertView<'_> {
        ClientCertView {
            chain: &self.chain,
            note: self.note,
            verify: self.verify,
        }
    }
}

impl ClientCertView<'_> {
    pub fn to_owned(self) -> ClientCert {
        ClientCert {
            chain: self.chain.to_vec(),
            note: self.note,
            verify: self.verify,
        }
    }
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
        let mut roots = RootCertStore::empty();
        let mut hints = Vec::new();
        for (kw, path, named) in [
            ("ca-file", &conf.ca_file, !conf.no_ca_names),
            ("ca-verify-file", &conf.ca_verify_file, false),
        ] {
            let Some(path) = path else { continue };
            let certs = ca_certs(path)
                .map_err(|e| format!("'{kw}' : unable to load {}: {e}", path.display()))?;
            let mut store = RootCertStore::empty();
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
        if let Some(path) = &conf.crl_file {
            let bad = |e: String| format!("'crl-file' : unable to load {}: {e}", path.display());
            let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
            for c in CertificateRevocationListDer::pem_slice_iter(&pem) {
                let der = c.map_err(|e| bad(format!("bad PEM: {e}")))?;
                let owned = webpki::OwnedCertRevocationList::from_der(der.as_ref())
                    .map_err(|e| bad(format!("bad CRL: {e:?}")))?;
                crls.push(webpki::CertRevocationList::Owned(owned));
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
            if crls.is_empty() {
                return Err(bad("no CRL (no BEGIN X509 CRL block) in it".into()));
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
        })))
    }

    fn ignored(&self, code: i32, depth: i32) -> bool {
        let mask = if depth == 0 {
            self.crt_ignore
        } else {
            self.ca_ignore
        };
        (0..64).contains(&code) && mask & (1u64 << code) != 0
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

// ---- What the fetches read of a certificate ----

/// OpenSSL's short name of an attribute or algorithm OID, else the dotted
/// form (as OpenSSL prints an OID it has no name for).
fn short_name(oid: &str) -> String {
    let n = match oid {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.13" => "description",
        "2.5.4.15" => "businessCategory",
        "2.5.4.17" => "postalCode",
        "2.5.4.41" => "name",
        "2.5.4.42" => "GN",
        "2.5.4.43" => "initials",
        "2.5.4.44" => "generationQualifier",
        "2.5.4.46" => "dnQualifier",
        "2.5.4.65" => "pseudonym",
        "2.5.4.97" => "organizationIdentifier",
        "1.2.840.113549.1.9.1" => "emailAddress",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.3.6.1.4.1.311.60.2.1.1" => "jurisdictionL",
        "1.3.6.1.4.1.311.60.2.1.2" => "jurisdictionST",
        "1.3.6.1.4.1.311.60.2.1.3" => "jurisdictionC",
        // Signature algorithms.
        "1.2.840.113549.1.1.4" => "RSA-MD5",
        "1.2.840.113549.1.1.5" => "RSA-SHA1",
        "1.2.840.113549.1.1.11" => "RSA-SHA256",
        "1.2.840.113549.1.1.12" => "RSA-SHA384",
        "1.2.840.113549.1.1.13" => "RSA-SHA512",
        "1.2.840.113549.1.1.14" => "RSA-SHA224",
        "1.2.840.113549.1.1.10" => "RSASSA-PSS",
        "1.2.840.10045.4.1" => "ecdsa-with-SHA1",
        "1.2.840.10045.4.3.1" => "ecdsa-with-SHA224",
        "1.2.840.10045.4.3.2" => "ecdsa-with-SHA256",
        "1.2.840.10045.4.3.3" => "ecdsa-with-SHA384",
        "1.2.840.10045.4.3.4" => "ecdsa-with-SHA512",
        "1.3.101.112" => "ED25519",
        "1.3.101.113" => "ED448",
        // Key algorithms.
        "1.2.840.113549.1.1.1" => "rsaEncryption",
        "1.2.840.10045.2.1" => "id-ecPublicKey",
        "1.2.840.10040.4.1" => "DSA",
        _ => return oid.to_string(),
    };
    n.to_string()
}

/// Which field of the client's certificate a fetch reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertField {
    /// `ssl_c_s_dn` / `ssl_c_i_dn` (`issuer`): the whole DN, one entry
    /// (`entry`, occurrence `occ`: from the start when positive, from
    /// the end when negative), or the RFC 2253 form.
    Dn {
        issuer: bool,
        entry: Option<String>,
        occ: i64,
        rfc2253: bool,
    },
    Serial,
    Sha1,
    Der,
    ChainDer,
    NotBefore,
    NotAfter,
    Version,
    SigAlg,
    KeyAlg,
}

/// The value of `field` for a chain (leaf first): bytes (strings as
/// UTF-8 or raw), or an integer for `Version`. `None`: no such value.
pub enum FieldVal {
    Bytes(Vec<u8>),
    Int(i64),
}

pub fn field(chain: &[CertificateDer<'_>], field: &CertField) -> Option<FieldVal> {
    let der = chain.first()?;
    match field {
        CertField::Der => return Some(FieldVal::Bytes(der.to_vec())),
        // OpenSSL's peer chain on the server side: the certificates
        // after the client's own (none: no value, as HAProxy).
        CertField::ChainDer => {
            let rest = chain.get(1..).filter(|r| !r.is_empty())?;
            return Some(FieldVal::Bytes(
                rest.iter().flat_map(|c| c.iter().copied()).collect(),
            ));
        }
        CertField::Sha1 => {
            let d = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, der);
            return Some(FieldVal::Bytes(d.as_ref().to_vec()));
        }
        _ => {}
    }
    let (_, c) = X509Certificate::from_der(der.as_ref()).ok()?;
    Some(match field {
        CertField::Serial => FieldVal::Bytes(c.raw_serial().to_vec()),
        CertField::Version => FieldVal::Int(i64::from(c.version().0) + 1),
        CertField::NotBefore => FieldVal::Bytes(asn1_time(c.validity().not_before.timestamp())?),
        CertField::NotAfter => FieldVal::Bytes(asn1_time(c.validity().not_after.timestamp())?),
        CertField::SigAlg => FieldVal::Bytes(
            short_name(&c.signature_algorithm.algorithm.to_id_string()).into_bytes(),
        ),
        CertField::KeyAlg => FieldVal::Bytes(
            short_name(&c.public_key().algorithm.algorithm.to_id_string()).into_bytes(),
        ),
        CertField::Dn {
            issuer,
            entry,
            occ,
            rfc2253,
        } => {
            let name = if *issuer { c.issuer() } else { c.subject() };
            // (short name, raw value bytes, starts a new RDN)
            let mut entries: Vec<(String, Vec<u8>, bool)> = Vec::new();
            for rdn in name.iter_rdn() {
                for (i, a) in rdn.iter().enumerate() {
                    entries.push((
                        short_name(&a.attr_type().to_id_string()),
                        a.as_slice().to_vec(),
                        i == 0,
                    ));
                }
            }
            match entry {
                Some(e) => {
                    let matching: Vec<&Vec<u8>> = entries
                        .iter()
                        .filter(|(n, _, _)| n.eq_ignore_ascii_case(e))
                        .map(|(_, v, _)| v)
                        .collect();
                    // HAProxy counts from 1 (or -1): 0 finds nothing.
                    let v = if *occ > 0 {
                        matching.get(usize::try_from(*occ - 1).ok()?)
                    } else if *occ == 0 {
                        None
                    } else {
                        let k = usize::try_from(occ.unsigned_abs()).ok()?;
                        matching.len().checked_sub(k).and_then(|i| matching.get(i))
                    };
                    FieldVal::Bytes((*v?).clone())
                }
                None if *rfc2253 => {
                    // Last RDN first, `,` between RDNs, `+` inside one.
                    let mut rdns: Vec<Vec<&(String, Vec<u8>, bool)>> = Vec::new();
                    for e in &entries {
                        if e.2 || rdns.is_empty() {
                            rdns.push(Vec::new());
                        }
                        if let Some(r) = rdns.last_mut() {
                            r.push(e);
                        }
                    }
                    let mut out = Vec::new();
                    for (k, r) in rdns.iter().rev().enumerate() {
                        if k > 0 {
                            out.push(b',');
                        }
                        for (j, (n, v, _)) in r.iter().enumerate() {
                            if j > 0 {
                                out.push(b'+');
                            }
                            out.extend_from_slice(n.as_bytes());
                            out.push(b'=');
                            escape_2253(v, &mut out);
                        }
                    }
                    if out.is_empty() {
                        return None;
                    }
                    FieldVal::Bytes(out)
                }
                None => {
                    let mut out = Vec::new();
                    for (n, v, _) in &entries {
                        out.push(b'/');
                        out.extend_from_slice(n.as_bytes());
                        out.push(b'=');
                        out.extend_from_slice(v);
                    }
                    if out.is_empty() {
                        return None;
                    }
                    FieldVal::Bytes(out)
                }
            }
        }
        CertField::Der | CertField::ChainDer | CertField::Sha1 => return None,
    })
}

/// A DN value escaped as OpenSSL's RFC 2253 printing: `,+"\<>;` with a
/// backslash, `#` and a space at the start and a space at the end too,
/// control bytes and bytes past ASCII as `\XX`.
fn escape_2253(v: &[u8], out: &mut Vec<u8>) {
    let last = v.len().saturating_sub(1);
    for (i, &b) in v.iter().enumerate() {
        let special = matches!(b, b',' | b'+' | b'"' | b'\\' | b'<' | b'>' | b';')
            || (i == 0 && (b == b'#' || b == b' '))
            || (i == last && b == b' ');
        if special {
            out.push(b'\\');
            out.push(b);
        } else if !(0x20..0x7f).contains(&b) {
            out.extend_from_slice(format!("\\{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
}

/// A certificate date as HAProxy prints it: ASN.1 UTCTime
/// `YYMMDDhhmmssZ` for 1950 to 2049 (RFC 5280's rule for which form a
/// certificate holds), else GeneralizedTime less its century `20`
/// (HAProxy returns nothing for other centuries).
fn asn1_time(ts: i64) -> Option<Vec<u8>> {
    let days = ts.div_euclid(86_400);
    let secs = ts.rem_euclid(86_400);
    let (y, m, d) = crate::sample::logline::civil_from_days(days);
    let (hh, mm, ss) = (secs / 3600, secs / 60 % 60, secs % 60);
    let s = if (1950..2050).contains(&y) {
        format!("{:02}{m:02}{d:02}{hh:02}{mm:02}{ss:02}Z", y % 100)
    } else if (2000..2100).contains(&y) {
        format!("{:02}{m:02}{d:02}{hh:02}{mm:02}{ss:02}Z", y - 2000)
    } else {
        return None;
    };
    Some(s.into_bytes())
}

/// Loads `conf`'s files only (for `ebb -c` and start-up errors).
pub fn check_files(conf: &ClientAuthConf) -> Result<(), String> {
    ClientAuth::load(conf, crate::tls::provider()).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_escapes() {
        assert_eq!(asn1_time(0).unwrap(), b"700101000000Z");
        assert_eq!(asn1_time(1_767_225_600).unwrap(), b"260101000000Z");
        // 2050-01-01: GeneralizedTime less "20".
        assert_eq!(asn1_time(2_524_608_000).unwrap(), b"500101000000Z");
        let mut o = Vec::new();
        escape_2253(b" a,b\xc3\xa9 ", &mut o);
        assert_eq!(o, b"\\ a\\,b\\C3\\A9\\ ");
    }

    #[test]
    fn ignore_bits() {
        let mut n = VerifyNote::default();
        n.add(20, 0);
        n.add(10, 0);
        n.add(19, 2);
        assert_eq!(
            n,
            VerifyNote {
                verify: 19,
                crt_err: 20,
                ca_err: 19,
                ca_err_depth: 2
            }
        );
    }
}
