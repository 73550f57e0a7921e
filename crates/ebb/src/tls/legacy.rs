//! Certificate chains webpki cannot read, verified as OpenSSL 3.0 (which
//! HAProxy 2.6 uses on Debian) verifies them: X.509 v1 certificates in
//! the chain a peer presents, and X.509 v1 CRLs (no extensions, no
//! version field), which webpki refuses for their version.
//!
//! The steps and their order are OpenSSL's `X509_verify_cert`: the chain
//! is built from the leaf, looking for each issuer among the trusted
//! certificates first, then among the presented ones; then the CA and
//! purpose rules, the signature strength (security level 1: SHA-1 or
//! MD5 signatures refused below the trust anchor, CA keys under 80
//! bits), the CRLs (every certificate of the chain: HAProxy's
//! `CRL_CHECK_ALL`), and last the signatures and dates from the anchor
//! down. Each error is handed to a callback with its depth, which says
//! whether verification goes on (an ignored error), as OpenSSL's verify
//! callback does.
//!
//! Signatures are checked with ring: RSA PKCS#1 v1.5 (SHA-1, SHA-256,
//! SHA-384, SHA-512; 1024-bit keys and up), RSA-PSS (SHA-256/384/512,
//! MGF1 with the same digest), ECDSA P-256/P-384 (SHA-256/384) and
//! Ed25519.

use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::revocation_list::CertificateRevocationList;

// OpenSSL 3.0's X509_V_ERR_* numbers (79: 1.1's 24).
pub(crate) const UNSPECIFIED: i32 = 1;
pub(crate) const GET_ISSUER_CERT: i32 = 2;
pub(crate) const GET_CRL: i32 = 3;
pub(crate) const CERT_SIGNATURE_FAILURE: i32 = 7;
pub(crate) const CRL_SIGNATURE_FAILURE: i32 = 8;
pub(crate) const CERT_NOT_YET_VALID: i32 = 9;
pub(crate) const CERT_HAS_EXPIRED: i32 = 10;
const CRL_NOT_YET_VALID: i32 = 11;
pub(crate) const CRL_HAS_EXPIRED: i32 = 12;
pub(crate) const DEPTH_ZERO_SELF_SIGNED: i32 = 18;
pub(crate) const SELF_SIGNED_IN_CHAIN: i32 = 19;
pub(crate) const GET_ISSUER_CERT_LOCALLY: i32 = 20;
pub(crate) const UNABLE_TO_VERIFY_LEAF_SIGNATURE: i32 = 21;
const CERT_CHAIN_TOO_LONG: i32 = 22;
pub(crate) const CERT_REVOKED: i32 = 23;
const PATH_LENGTH_EXCEEDED: i32 = 25;
pub(crate) const INVALID_PURPOSE: i32 = 26;
const UNHANDLED_CRITICAL_EXTENSION: i32 = 34;
const UNABLE_TO_GET_CRL_ISSUER: i32 = 33;
const KEYUSAGE_NO_CRL_SIGN: i32 = 35;
const CA_KEY_TOO_SMALL: i32 = 67;
const CA_MD_TOO_WEAK: i32 = 68;
pub(crate) const INVALID_CA: i32 = 79;

/// The extensions OpenSSL knows (`X509_supported_extension`): a critical
/// one not among them fails the certificate (34).
const HANDLED: &[&str] = &[
    "2.16.840.1.113730.1.1", // nsCertType
    "2.5.29.15",             // keyUsage
    "2.5.29.17",             // subjectAltName
    "2.5.29.19",             // basicConstraints
    "2.5.29.32",             // certificatePolicies
    "2.5.29.37",             // extKeyUsage
    "1.3.6.1.5.5.7.1.7",     // sbgp-ipAddrBlock
    "1.3.6.1.5.5.7.1.8",     // sbgp-autonomousSysNum
    "2.5.29.36",             // policyConstraints
    "1.3.6.1.5.5.7.1.14",    // proxyCertInfo
    "2.5.29.30",             // nameConstraints
    "2.5.29.33",             // policyMappings
    "2.5.29.54",             // inhibitAnyPolicy
];

/// OpenSSL's default chain depth limit (HAProxy sets none).
const MAX_DEPTH: usize = 100;

/// The purpose a chain is checked for: a client's certificate on a bind
/// line (OpenSSL's "ssl_client"), a server's on a server line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    SslClient,
    SslServer,
}

/// Whether this chain or these CRLs need this path: a presented
/// certificate webpki refuses for its version (v1), or a CRL it does
/// not read (`crls_v1`, known when the CRLs were loaded).
pub(crate) fn needed(leaf: &[u8], presented: &[&[u8]], crls_v1: bool) -> bool {
    crls_v1
        || std::iter::once(leaf)
            .chain(presented.iter().copied())
            .any(|d| X509Certificate::from_der(d).is_ok_and(|(_, c)| c.version().0 == 0))
}

/// Whether a CRL (DER) is one this path reads: an X.509 v1 CRL.
pub(crate) fn is_v1_crl(der: &[u8]) -> bool {
    CertificateRevocationList::from_der(der).is_ok_and(|(_, c)| c.version().is_none())
}

/// Whether a certificate (DER) parses as X.509 (any version).
pub(crate) fn parses(der: &[u8]) -> bool {
    X509Certificate::from_der(der).is_ok()
}

/// HAProxy's name check of a server certificate verified here: the
/// subjectAltName DNS names, else (none) the subject's CNs, matched
/// without case; a `*` stands for the whole first label only.
pub(crate) fn name_matches(leaf: &[u8], host: &str) -> bool {
    use x509_parser::extensions::GeneralName;
    let Ok((_, c)) = X509Certificate::from_der(leaf) else {
        return false;
    };
    let mut names: Vec<String> = match c.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|g| match g {
                GeneralName::DNSName(d) => Some(d.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if names.is_empty() {
        names = c
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok().map(str::to_string))
            .collect();
    }
    names.iter().any(|n| host_matches(n, host))
}

/// HAProxy's `ssl_sock_srv_hostcheck` (RFC 6125 6.4.3): the same name
/// without case, or one `*` in the pattern's first label standing for
/// any part of the host's first label (the other labels equal).
fn host_matches(pattern: &str, host: &str) -> bool {
    if pattern.eq_ignore_ascii_case(host) {
        return true;
    }
    let (p, h) = (pattern.as_bytes(), host.as_bytes());
    let Some(pdot) = p.iter().position(|b| *b == b'.') else {
        return false;
    };
    let first = &p[..pdot];
    if first.iter().filter(|b| **b == b'*').count() != 1 {
        return false;
    }
    let Some(hdot) = h.iter().position(|b| *b == b'.') else {
        return false;
    };
    if !p[pdot..].eq_ignore_ascii_case(&h[hdot..]) || hdot + 1 < pdot {
        return false;
    }
    let star = first.iter().position(|b| *b == b'*').unwrap_or(0);
    let (prefix, suffix) = (&first[..star], &first[star + 1..]);
    let label = &h[..hdot];
    label[..prefix.len()].eq_ignore_ascii_case(prefix)
        && label[hdot - suffix.len()..].eq_ignore_ascii_case(suffix)
}

struct Link<'a> {
    x: X509Certificate<'a>,
    trusted: bool,
}

/// What a chain was checked against.
pub(crate) struct Inputs<'a> {
    pub leaf: &'a [u8],
    pub presented: &'a [&'a [u8]],
    pub trusted: &'a [Vec<u8>],
    pub crls: &'a [Vec<u8>],
    /// Seconds since the epoch.
    pub now: i64,
    pub purpose: Purpose,
}

/// Verifies `inp`; `report(code, depth)` is called for each error and
/// returns whether to go on. `Ok`: accepted (no error, or all ignored);
/// `Err(code)`: the error that ended it. `Err(0)`: the leaf is not X.509.
pub(crate) fn verify(
    inp: &Inputs<'_>,
    report: &mut dyn FnMut(i32, i32) -> bool,
) -> Result<(), i32> {
    let mut fail = |code: i32, depth: usize| -> Result<(), i32> {
        if report(code, depth as i32) {
            Ok(())
        } else {
            Err(code)
        }
    };
    let Ok((_, leaf)) = X509Certificate::from_der(inp.leaf) else {
        return Err(0);
    };
    let trusted: Vec<X509Certificate<'_>> = inp
        .trusted
        .iter()
        .filter_map(|d| X509Certificate::from_der(d).ok().map(|(_, c)| c))
        .collect();
    let presented: Vec<X509Certificate<'_>> = inp
        .presented
        .iter()
        .filter_map(|d| X509Certificate::from_der(d).ok().map(|(_, c)| c))
        .collect();
    let leaf_trusted = trusted.iter().any(|t| t.as_ref() == leaf.as_ref());
    let mut chain = vec![Link {
        x: leaf,
        trusted: leaf_trusted,
    }];

    // 1. The chain, trusted issuers first.
    let mut used = vec![false; presented.len()];
    let build_err = loop {
        let Some(cur) = chain.last().map(|l| l.x.clone()) else {
            break None;
        };
        if self_signed(&cur) {
            if chain.last().is_some_and(|l| l.trusted) {
                break None;
            }
            let code = if chain.len() == 1 {
                DEPTH_ZERO_SELF_SIGNED
            } else {
                SELF_SIGNED_IN_CHAIN
            };
            break Some(code);
        }
        if chain.len() > MAX_DEPTH {
            break Some(CERT_CHAIN_TOO_LONG);
        }
        let in_chain = |c: &X509Certificate<'_>| chain.iter().any(|l| l.x.as_ref() == c.as_ref());
        let free: Vec<bool> = trusted.iter().map(|t| !in_chain(t)).collect();
        if let Some(i) = pick(&cur, &trusted, &free, inp.now) {
            chain.push(Link {
                x: trusted[i].clone(),
                trusted: true,
            });
            continue;
        }
        if chain.iter().any(|l| l.trusted) {
            break Some(GET_ISSUER_CERT);
        }
        let free: Vec<bool> = presented
            .iter()
            .zip(&used)
            .map(|(c, u)| !u && !in_chain(c))
            .collect();
        match pick(&cur, &presented, &free, inp.now) {
            Some(i) => {
                used[i] = true;
                chain.push(Link {
                    x: presented[i].clone(),
                    trusted: false,
                });
            }
            None => break Some(GET_ISSUER_CERT_LOCALLY),
        }
    };
    let num = chain.len();
    if let Some(code) = build_err {
        fail(code, num - 1)?;
    }

    // 2. CA rules, purposes, path lengths.
    let mut plen = 0u32;
    for (i, l) in chain.iter().enumerate() {
        let c = &l.x;
        if c.extensions()
            .iter()
            .any(|e| e.critical && !HANDLED.contains(&e.oid.to_id_string().as_str()))
        {
            // Reported, but never gone past: haproxy 2.6 fails such a
            // handshake even under `crt-ignore-err all` (alert
            // certificate_unknown).
            let _ = fail(UNHANDLED_CRITICAL_EXTENSION, i);
            return Err(UNHANDLED_CRITICAL_EXTENSION);
        }
        if i > 0 {
            let ca = check_ca(c);
            let ok = if i + 1 < num { ca == 1 } else { ca != 0 };
            if !ok {
                fail(INVALID_CA, i)?;
            }
        }
        // A trusted self-signed certificate is trusted for any purpose.
        if !(purpose_ok(c, inp.purpose, i > 0) || l.trusted && self_signed(c)) {
            fail(INVALID_PURPOSE, i)?;
        }
        if i > 1 {
            if let Some(n) = path_len(c) {
                if plen > n {
                    fail(PATH_LENGTH_EXCEEDED, i)?;
                }
            }
        }
        if i > 0 && c.subject().as_raw() != c.issuer().as_raw() {
            plen += 1;
        }
    }

    // 3. Security level 1: CA keys of 80 bits, no SHA-1/MD5 signature
    // below the anchor.
    for (i, l) in chain.iter().enumerate() {
        if i > 0 && key_bits(&l.x).is_some_and(|b| b < 80) {
            fail(CA_KEY_TOO_SMALL, i)?;
        }
        if i + 1 < num && weak_digest(&l.x) {
            fail(CA_MD_TOO_WEAK, i)?;
        }
    }

    // 4. Revocation, every certificate of the chain.
    if !inp.crls.is_empty() {
        let crls: Vec<CertificateRevocationList<'_>> = inp
            .crls
            .iter()
            .filter_map(|d| CertificateRevocationList::from_der(d).ok().map(|(_, c)| c))
            .collect();
        for i in 0..num {
            check_revocation(&chain, i, &crls, inp.now, &mut fail)?;
        }
    }

    // 5. Signatures and dates, from the top down.
    let mut n = num - 1;
    let top = &chain[n].x;
    let mut issuer_idx = n;
    if !self_signed(top) {
        if n == 0 {
            fail(UNABLE_TO_VERIFY_LEAF_SIGNATURE, 0)?;
            return check_time(top, 0, inp.now, &mut fail);
        }
        n -= 1;
    }
    loop {
        let subject = &chain[n].x;
        if n != issuer_idx {
            let issuer = &chain[issuer_idx].x;
            if !signed_by(
                subject.tbs_certificate.as_ref(),
                &subject.signature_algorithm,
                &subject.signature_value.data,
                issuer,
            ) {
                fail(CERT_SIGNATURE_FAILURE, n)?;
            }
        }
        check_time(subject, n, inp.now, &mut fail)?;
        if n == 0 {
            return Ok(());
        }
        issuer_idx = n;
        n -= 1;
    }
}

fn check_time(
    c: &X509Certificate<'_>,
    depth: usize,
    now: i64,
    fail: &mut dyn FnMut(i32, usize) -> Result<(), i32>,
) -> Result<(), i32> {
    let v = c.validity();
    if now < v.not_before.timestamp() {
        fail(CERT_NOT_YET_VALID, depth)?;
    }
    if now > v.not_after.timestamp() {
        fail(CERT_HAS_EXPIRED, depth)?;
    }
    Ok(())
}

/// The CRL checks of `chain[i]` (OpenSSL's `check_cert`).
fn check_revocation(
    chain: &[Link<'_>],
    i: usize,
    crls: &[CertificateRevocationList<'_>],
    now: i64,
    fail: &mut dyn FnMut(i32, usize) -> Result<(), i32>,
) -> Result<(), i32> {
    let x = &chain[i].x;
    let issuer = match chain.get(i + 1) {
        Some(l) => Some(&l.x),
        None if self_signed(x) => Some(x),
        None => None,
    };
    let named: Vec<&CertificateRevocationList<'_>> = crls
        .iter()
        .filter(|c| c.issuer().as_raw() == x.issuer().as_raw())
        .collect();
    // The best: signed by the issuer and current (else any), and of
    // those equally good the newest (`lastUpdate`), as OpenSSL picks.
    let score = |c: &CertificateRevocationList<'_>| {
        issuer.is_some_and(|is| crl_signed_by(c, is)) && crl_time_ok(c, now)
    };
    let Some(crl) = named
        .iter()
        .copied()
        .rev()
        .max_by_key(|c| (score(c), c.last_update().timestamp()))
    else {
        return fail(GET_CRL, i);
    };
    match issuer {
        None => fail(UNABLE_TO_GET_CRL_ISSUER, i)?,
        Some(is) => {
            if key_usage(is).is_some_and(|ku| !ku.crl_sign()) {
                fail(KEYUSAGE_NO_CRL_SIGN, i)?;
            }
        }
    }
    if now < crl.last_update().timestamp() {
        fail(CRL_NOT_YET_VALID, i)?;
    }
    if crl.next_update().is_some_and(|t| now > t.timestamp()) {
        fail(CRL_HAS_EXPIRED, i)?;
    }
    if let Some(is) = issuer {
        if !crl_signed_by(crl, is) {
            // Ignored, the list is still not believed: OpenSSL reports
            // no revocation from it.
            return fail(CRL_SIGNATURE_FAILURE, i);
        }
    }
    let serial = x.raw_serial();
    if crl
        .iter_revoked_certificates()
        .any(|r| r.raw_serial() == serial)
    {
        fail(CERT_REVOKED, i)?;
    }
    Ok(())
}

fn crl_time_ok(c: &CertificateRevocationList<'_>, now: i64) -> bool {
    now >= c.last_update().timestamp() && c.next_update().is_none_or(|t| now <= t.timestamp())
}

fn crl_signed_by(c: &CertificateRevocationList<'_>, issuer: &X509Certificate<'_>) -> bool {
    signed_by(
        c.tbs_cert_list.as_ref(),
        &c.signature_algorithm,
        &c.signature_value.data,
        issuer,
    )
}

/// The issuer of `cur` among the `free` ones of `cands` (an index):
/// names and key identifiers match; one valid at `now` is preferred (as
/// OpenSSL does).
fn pick(
    cur: &X509Certificate<'_>,
    cands: &[X509Certificate<'_>],
    free: &[bool],
    now: i64,
) -> Option<usize> {
    let all: Vec<usize> = (0..cands.len())
        .filter(|i| free.get(*i).copied().unwrap_or(false) && issued_by(cur, &cands[*i]))
        .collect();
    let valid = |i: &&usize| {
        let v = cands[**i].validity();
        now >= v.not_before.timestamp() && now <= v.not_after.timestamp()
    };
    all.iter().find(valid).or(all.first()).copied()
}

fn issued_by(subject: &X509Certificate<'_>, issuer: &X509Certificate<'_>) -> bool {
    if subject.issuer().as_raw() != issuer.subject().as_raw() {
        return false;
    }
    match (akid(subject), skid(issuer)) {
        (Some(a), Some(s)) => a == s,
        _ => true,
    }
}

fn self_signed(c: &X509Certificate<'_>) -> bool {
    issued_by(c, c)
}

fn akid<'a>(c: &X509Certificate<'a>) -> Option<&'a [u8]> {
    use x509_parser::extensions::ParsedExtension;
    c.extensions()
        .iter()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::AuthorityKeyIdentifier(a) => Some(a.key_identifier.as_ref()?.0),
            _ => None,
        })
}

fn skid<'a>(c: &X509Certificate<'a>) -> Option<&'a [u8]> {
    use x509_parser::extensions::ParsedExtension;
    c.extensions()
        .iter()
        .find_map(|e| match e.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0),
            _ => None,
        })
}

fn key_usage(c: &X509Certificate<'_>) -> Option<x509_parser::extensions::KeyUsage> {
    c.key_usage().ok().flatten().map(|k| *k.value)
}

/// OpenSSL's `check_ca`: 1 a CA by its basic constraints; 3 a v1
/// self-signed certificate; 4 a key usage that allows signing
/// certificates without basic constraints; 0 not a CA.
fn check_ca(c: &X509Certificate<'_>) -> u8 {
    if key_usage(c).is_some_and(|ku| !ku.key_cert_sign()) {
        return 0;
    }
    match c.basic_constraints() {
        Ok(Some(bc)) => u8::from(bc.value.ca),
        Err(_) => 0,
        Ok(None) if c.version().0 == 0 && self_signed(c) => 3,
        Ok(None) if key_usage(c).is_some() => 4,
        Ok(None) => 0,
    }
}

fn path_len(c: &X509Certificate<'_>) -> Option<u32> {
    c.basic_constraints()
        .ok()
        .flatten()
        .and_then(|b| b.value.path_len_constraint)
}

/// OpenSSL's `check_purpose_ssl_client`/`_server`.
fn purpose_ok(c: &X509Certificate<'_>, purpose: Purpose, ca: bool) -> bool {
    if let Ok(Some(eku)) = c.extended_key_usage() {
        let e = eku.value;
        let ok = match purpose {
            Purpose::SslClient => e.client_auth,
            // (Netscape's and Microsoft's server gated crypto count too.)
            Purpose::SslServer => {
                e.server_auth
                    || e.other.iter().any(|o| {
                        let s = o.to_id_string();
                        s == "2.16.840.1.113730.4.1" || s == "1.3.6.1.4.1.311.10.3.3"
                    })
            }
        };
        if !ok {
            return false;
        }
    }
    if ca {
        return check_ca(c) != 0;
    }
    match key_usage(c) {
        None => true,
        Some(ku) => match purpose {
            Purpose::SslClient => ku.digital_signature() || ku.key_agreement(),
            Purpose::SslServer => {
                ku.digital_signature() || ku.key_encipherment() || ku.key_agreement()
            }
        },
    }
}

/// A public key's security bits as OpenSSL counts them (RSA by modulus
/// size, EC by half the curve's order size), `None` when unknown.
fn key_bits(c: &X509Certificate<'_>) -> Option<u32> {
    use x509_parser::public_key::PublicKey;
    let bits = match c.public_key().parsed().ok()? {
        PublicKey::RSA(r) => {
            let m = r.modulus.iter().skip_while(|b| **b == 0).count() as u32 * 8;
            return Some(match m {
                m if m >= 15360 => 256,
                m if m >= 7680 => 192,
                m if m >= 3072 => 128,
                m if m >= 2048 => 112,
                m if m >= 1024 => 80,
                _ => 0,
            });
        }
        PublicKey::EC(p) => p.key_size() as u32 / 2,
        _ => return None,
    };
    Some(bits)
}

fn weak_digest(c: &X509Certificate<'_>) -> bool {
    matches!(
        c.signature_algorithm.algorithm.to_id_string().as_str(),
        // sha1WithRSA, md5WithRSA, ecdsa-with-SHA1, dsa-with-sha1
        "1.2.840.113549.1.1.5" | "1.2.840.113549.1.1.4" | "1.2.840.10045.4.1" | "1.2.840.10040.4.3"
    )
}

/// Whether `tbs` is signed by `issuer`'s key with `alg`.
fn signed_by(
    tbs: &[u8],
    alg: &x509_parser::x509::AlgorithmIdentifier<'_>,
    sig: &[u8],
    issuer: &X509Certificate<'_>,
) -> bool {
    use ring::signature as s;
    let spki = issuer.public_key();
    let key: &[u8] = &spki.subject_public_key.data;
    let (key_alg, curve) = crate::tls_policy::spki_kind(spki);
    let rsa = key_alg == "1.2.840.113549.1.1.1";
    let ec = key_alg == "1.2.840.10045.2.1";
    let p256 = curve.as_deref() == Some("1.2.840.10045.3.1.7");
    let p384 = curve.as_deref() == Some("1.3.132.0.34");
    let v: &dyn s::VerificationAlgorithm = match alg.algorithm.to_id_string().as_str() {
        "1.2.840.113549.1.1.5" if rsa => &s::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY,
        "1.2.840.113549.1.1.11" if rsa => &s::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY,
        "1.2.840.113549.1.1.12" if rsa => &s::RSA_PKCS1_2048_8192_SHA384,
        "1.2.840.113549.1.1.13" if rsa => &s::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY,
        "1.2.840.113549.1.1.10" if rsa => match pss_digest(alg) {
            Some(256) => &s::RSA_PSS_2048_8192_SHA256,
            Some(384) => &s::RSA_PSS_2048_8192_SHA384,
            Some(512) => &s::RSA_PSS_2048_8192_SHA512,
            _ => return false,
        },
        "1.2.840.10045.4.3.2" if ec && p256 => &s::ECDSA_P256_SHA256_ASN1,
        "1.2.840.10045.4.3.2" if ec && p384 => &s::ECDSA_P384_SHA256_ASN1,
        "1.2.840.10045.4.3.3" if ec && p256 => &s::ECDSA_P256_SHA384_ASN1,
        "1.2.840.10045.4.3.3" if ec && p384 => &s::ECDSA_P384_SHA384_ASN1,
        "1.3.101.112" if key_alg == "1.3.101.112" => &s::ED25519,
        _ => return false,
    };
    s::UnparsedPublicKey::new(v, key).verify(tbs, sig).is_ok()
}

/// The digest of RSA-PSS parameters whose mask function uses the same
/// one (what ring checks): SHA-256, -384 or -512.
fn pss_digest(alg: &x509_parser::x509::AlgorithmIdentifier<'_>) -> Option<u32> {
    let raw: &[u8] = alg.parameters.as_ref()?.data;
    // The digests' OID bodies (2.16.840.1.101.3.4.2.1/2/3).
    let body = |n: u8| [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, n];
    let count = |n: u8| raw.windows(9).filter(|w| *w == body(n)).count();
    // hashAlgorithm and maskGenAlgorithm's digest: the same, twice.
    [(1, 256), (2, 384), (3, 512)]
        .into_iter()
        .find(|(n, _)| count(*n) == 2)
        .map(|(_, bits)| bits)
}

/// The rustls error (its alert) for an OpenSSL number, as OpenSSL's
/// `ssl_verify_alarm_type` picks the alert.
pub(crate) fn error_for(code: i32) -> rustls::Error {
    use rustls::CertificateError as C;
    let e = match code {
        CERT_HAS_EXPIRED | CRL_HAS_EXPIRED => C::Expired,
        CERT_NOT_YET_VALID | CRL_NOT_YET_VALID => C::NotValidYet,
        CERT_REVOKED => C::Revoked,
        GET_CRL => C::UnknownRevocationStatus,
        CERT_SIGNATURE_FAILURE | CRL_SIGNATURE_FAILURE => C::BadSignature,
        INVALID_PURPOSE => C::InvalidPurpose,
        GET_ISSUER_CERT
        | GET_ISSUER_CERT_LOCALLY
        | DEPTH_ZERO_SELF_SIGNED
        | SELF_SIGNED_IN_CHAIN
        | UNABLE_TO_VERIFY_LEAF_SIGNATURE
        | UNABLE_TO_GET_CRL_ISSUER
        | INVALID_CA
        | PATH_LENGTH_EXCEEDED
        | CERT_CHAIN_TOO_LONG => C::UnknownIssuer,
        // (bad_certificate, the alert OpenSSL sends for these.)
        0 | CA_KEY_TOO_SMALL | CA_MD_TOO_WEAK => C::BadEncoding,
        _ => C::Other(rustls::OtherError(std::sync::Arc::new(Refused(code)))),
    };
    rustls::Error::InvalidCertificate(e)
}

/// An OpenSSL verify error with no rustls kind of its own (a bad
/// certificate alert).
#[derive(Debug)]
struct Refused(i32);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "certificate refused (X509_V_ERR {})", self.0)
    }
}

impl std::error::Error for Refused {}

#[cfg(test)]
mod tests {
    use super::host_matches;

    #[test]
    fn host_check_is_haproxys() {
        for (p, h, want) in [
            ("www.example.com", "WWW.Example.COM", true),
            ("*.example.com", "a.example.com", true),
            ("*.example.com", "a.b.example.com", false),
            ("*.example.com", "example.com", false),
            ("w*.example.com", "www.example.com", true),
            ("*w.example.com", "aw.example.com", true),
            ("a*b.example.com", "ab.example.com", true),
            ("a*b.example.com", "axb.example.com", true),
            ("a*b.example.com", "b.example.com", false),
            ("**.example.com", "a.example.com", false),
            ("*.example.com", ".example.com", true),
            ("example.*", "example.com", false),
            ("*", "localhost", false),
        ] {
            assert_eq!(host_matches(p, h), want, "{p} {h}");
        }
    }
}
