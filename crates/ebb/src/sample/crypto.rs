//! The cryptographic converters (configuration.txt 7.3.1): `digest`,
//! `hmac`, `secure_memcmp`, and the JSON Web Token ones, `jwt_verify`,
//! `jwt_header_query` and `jwt_payload_query`.
//!
//! Digests come from ring (SHA-1, SHA-256/384/512), the `sha2` crate
//! (SHA-224, SHA-512/224, SHA-512/256) and the `md-5` crate; HMAC is
//! RFC 2104 over them. Signatures are checked with ring (RSA PKCS#1 v1.5,
//! ECDSA over P-256 and P-384) and the `p521` crate (ECDSA over P-521).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// A message digest `digest` and `hmac` name as OpenSSL does
/// (`EVP_get_digestbyname`, case-insensitive, with its aliases).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Md {
    Md5,
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
    Sha512_224,
    Sha512_256,
}

impl Md {
    /// The digest OpenSSL 3 finds under `name` (its short and long names,
    /// the `RSA-` and `WithRSAEncryption` signature aliases that map to
    /// the digest, the `ssl3-` ones, and the OIDs); `None` for a name
    /// OpenSSL does not know, and for those ebb does not compute (SHA-3,
    /// SHAKE, BLAKE2, RIPEMD-160, MD4, SM3, `md5-sha1`).
    pub(super) fn by_name(name: &str) -> Option<Md> {
        let n = name.to_ascii_lowercase();
        Some(match n.as_str() {
            "md5" | "ssl3-md5" | "rsa-md5" | "md5withrsaencryption" | "1.2.840.113549.2.5" => {
                Md::Md5
            }
            "sha1"
            | "sha-1"
            | "ssl3-sha1"
            | "rsa-sha1"
            | "sha1withrsaencryption"
            | "1.3.14.3.2.26" => Md::Sha1,
            "sha224"
            | "sha-224"
            | "sha2-224"
            | "rsa-sha224"
            | "sha224withrsaencryption"
            | "2.16.840.1.101.3.4.2.4" => Md::Sha224,
            "sha256"
            | "sha-256"
            | "sha2-256"
            | "rsa-sha256"
            | "sha256withrsaencryption"
            | "2.16.840.1.101.3.4.2.1" => Md::Sha256,
            "sha384"
            | "sha-384"
            | "sha2-384"
            | "rsa-sha384"
            | "sha384withrsaencryption"
            | "2.16.840.1.101.3.4.2.2" => Md::Sha384,
            "sha512"
            | "sha-512"
            | "sha2-512"
            | "rsa-sha512"
            | "sha512withrsaencryption"
            | "2.16.840.1.101.3.4.2.3" => Md::Sha512,
            "sha512-224" | "sha-512/224" | "sha2-512/224" | "2.16.840.1.101.3.4.2.5" => {
                Md::Sha512_224
            }
            "sha512-256" | "sha-512/256" | "sha2-512/256" | "2.16.840.1.101.3.4.2.6" => {
                Md::Sha512_256
            }
            _ => return None,
        })
    }

    /// The size of the blocks the digest reads (HMAC pads its key to it).
    fn block_len(self) -> usize {
        match self {
            Md::Md5 | Md::Sha1 | Md::Sha224 | Md::Sha256 => 64,
            Md::Sha384 | Md::Sha512 | Md::Sha512_224 | Md::Sha512_256 => 128,
        }
    }

    /// The digest of the concatenation of `parts`, appended to `out`.
    pub(super) fn digest(self, parts: &[&[u8]], out: &mut Vec<u8>) {
        fn rc<D: sha2::Digest>(parts: &[&[u8]], out: &mut Vec<u8>) {
            let mut d = D::new();
            for p in parts {
                d.update(p);
            }
            out.extend_from_slice(&d.finalize());
        }
        let ring_alg = match self {
            Md::Md5 => return rc::<md5::Md5>(parts, out),
            Md::Sha224 => return rc::<sha2::Sha224>(parts, out),
            Md::Sha512_224 => return rc::<sha2::Sha512_224>(parts, out),
            Md::Sha512_256 => return rc::<sha2::Sha512_256>(parts, out),
            Md::Sha1 => &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
            Md::Sha256 => &ring::digest::SHA256,
            Md::Sha384 => &ring::digest::SHA384,
            Md::Sha512 => &ring::digest::SHA512,
        };
        let mut c = ring::digest::Context::new(ring_alg);
        for p in parts {
            c.update(p);
        }
        out.extend_from_slice(c.finish().as_ref());
    }

    /// RFC 2104's HMAC of `msg` under `key`, appended to `out`.
    pub(super) fn hmac(self, key: &[u8], msg: &[u8], out: &mut Vec<u8>) {
        let b = self.block_len();
        // A key longer than a block is its digest; then zeros to a block.
        let mut k = Vec::with_capacity(b);
        if key.len() > b {
            self.digest(&[key], &mut k);
        } else {
            k.extend_from_slice(key);
        }
        k.resize(b, 0);
        let ipad: Vec<u8> = k.iter().map(|x| x ^ 0x36).collect();
        let opad: Vec<u8> = k.iter().map(|x| x ^ 0x5c).collect();
        let mut inner = Vec::new();
        self.digest(&[&ipad, msg], &mut inner);
        self.digest(&[&opad, &inner], out);
    }
}

/// Whether `a` and `b` hold the same bytes, in a time that depends on
/// their length only (as OpenSSL's `CRYPTO_memcmp`).
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut acc = 0u8;
    for (x, y) in a.iter().zip(b) {
        acc |= std::hint::black_box(x ^ y);
    }
    acc == 0
}

/// The algorithms of a JWS's `alg` (RFC 7518 §3.1) HAProxy 2.6 knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum JwtAlg {
    None,
    Hs(Md),
    Rs(Md),
    Es(Md),
    Ps,
}

impl JwtAlg {
    /// HAProxy 2.6's `jwt_parse_alg`: the exact names, case-sensitive.
    pub(super) fn parse(a: &[u8]) -> Option<JwtAlg> {
        let md = |b: &[u8]| match b {
            b"256" => Some(Md::Sha256),
            b"384" => Some(Md::Sha384),
            b"512" => Some(Md::Sha512),
            _ => None,
        };
        if a == b"none" {
            return Some(JwtAlg::None);
        }
        if a.len() != 5 || a[1] != b'S' {
            return None;
        }
        let m = md(&a[2..])?;
        Some(match a[0] {
            b'H' => JwtAlg::Hs(m),
            b'R' => JwtAlg::Rs(m),
            b'E' => JwtAlg::Es(m),
            b'P' => JwtAlg::Ps,
            _ => return None,
        })
    }
}

/// HAProxy 2.6's `jwt_verify` results (`enum jwt_vrfy_status`).
pub(super) const JWT_KO: i64 = 0;
pub(super) const JWT_OK: i64 = 1;
pub(super) const JWT_UNKNOWN_ALG: i64 = -1;
pub(super) const JWT_UNMANAGED_ALG: i64 = -2;
pub(super) const JWT_INVALID_TOKEN: i64 = -3;
pub(super) const JWT_UNKNOWN_CERT: i64 = -5;

/// A public key read from a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) file.
pub(super) enum PubKey {
    /// The PKCS#1 RSAPublicKey (what ring reads).
    Rsa(Vec<u8>),
    /// An EC point on P-256 or P-384 (uncompressed, as ring reads it).
    P256(Vec<u8>),
    P384(Vec<u8>),
    P521(p521::ecdsa::VerifyingKey),
}

impl std::fmt::Debug for PubKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PubKey::Rsa(_) => "RSA",
            PubKey::P256(_) => "P-256",
            PubKey::P384(_) => "P-384",
            PubKey::P521(_) => "P-521",
        })
    }
}

/// The keys `jwt_verify` loaded at start, by the path it was given
/// (HAProxy's `jwt_cert_tree`): a key named at run time by a variable
/// must be one a literal argument loaded.
static KEYS: RwLock<Option<HashMap<String, Arc<PubKey>>>> = RwLock::new(None);

/// Loads the public key at `path` (once per path: a second call returns
/// the first one's key).
pub(super) fn load_key(path: &str) -> Result<Arc<PubKey>, String> {
    if let Some(k) = find_key(path.as_bytes()) {
        return Ok(k);
    }
    let k = Arc::new(read_key(path)?);
    if let Ok(mut m) = KEYS.write() {
        m.get_or_insert_with(HashMap::new)
            .insert(path.to_string(), k.clone());
    }
    Ok(k)
}

fn find_key(path: &[u8]) -> Option<Arc<PubKey>> {
    let path = std::str::from_utf8(path).ok()?;
    KEYS.read().ok()?.as_ref()?.get(path).cloned()
}

fn read_key(path: &str) -> Result<PubKey, String> {
    use rustls::pki_types::pem::PemObject;
    use x509_parser::prelude::FromDer;
    let der = rustls::pki_types::SubjectPublicKeyInfoDer::from_pem_file(path)
        .map_err(|e| format!("cannot read a PEM public key from '{path}': {e}"))?;
    let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(der.as_ref())
        .map_err(|e| format!("'{path}': bad public key: {e}"))?;
    let bits = spki.subject_public_key.data.to_vec();
    let (alg, curve) = crate::tls_policy::spki_kind(&spki);
    match (alg.as_str(), curve.as_deref()) {
        ("1.2.840.113549.1.1.1", _) => Ok(PubKey::Rsa(bits)),
        ("1.2.840.10045.2.1", Some("1.2.840.10045.3.1.7")) => Ok(PubKey::P256(bits)),
        ("1.2.840.10045.2.1", Some("1.3.132.0.34")) => Ok(PubKey::P384(bits)),
        ("1.2.840.10045.2.1", Some("1.3.132.0.35")) => {
            p521::ecdsa::VerifyingKey::from_sec1_bytes(&bits)
                .map(PubKey::P521)
                .map_err(|_| format!("'{path}': bad P-521 public key"))
        }
        _ => Err(format!(
            "'{path}': unsupported public key (RSA, or EC on P-256, P-384 or P-521)"
        )),
    }
}

/// The key `jwt_verify` checks signatures with: loaded at start from a
/// literal path, or named at run time (a variable's value, looked up in
/// [`KEYS`]; an HMAC secret then too).
#[derive(Clone, Debug)]
pub(super) enum JwtKey {
    /// A literal: the secret (and path), with its loaded key if any.
    Lit(Vec<u8>, Option<Arc<PubKey>>),
    Var(super::VarRef),
}

/// HAProxy 2.6's `jwt_tokenize` over at most `max` dot-separated parts:
/// the parts, or `None` when the token has more.
fn jwt_parts(t: &[u8], max: usize) -> Option<Vec<&[u8]>> {
    let parts: Vec<&[u8]> = t.splitn(max + 1, |&c| c == b'.').collect();
    (parts.len() <= max).then_some(parts)
}

/// The part `i` (0 the header, 1 the claims) of a JWT, base64url-decoded
/// into `out` (HAProxy 2.6's `sample_conv_jwt_member_query`): a token
/// with fewer parts or a bad encoding has none.
pub(super) fn jwt_member(t: &[u8], i: usize, out: &mut Vec<u8>) -> Option<()> {
    let part = t.split(|&c| c == b'.').nth(i)?;
    super::conv::ub64_decode(part, out)
}

/// HAProxy 2.6's `jwt_verify` of `token` signed with `alg` and checked
/// with `key` (the secret, or the key file's path) and `loaded` (its key
/// when the argument was a literal).
pub(super) fn jwt_verify(
    token: &[u8],
    alg: &[u8],
    key: &[u8],
    loaded: Option<&Arc<PubKey>>,
) -> i64 {
    let Some(alg) = JwtAlg::parse(alg) else {
        return JWT_UNKNOWN_ALG;
    };
    let Some(parts) = jwt_parts(token, 3) else {
        return JWT_INVALID_TOKEN;
    };
    if parts.len() != 3 && !(alg == JwtAlg::None && parts.len() == 2) {
        return JWT_INVALID_TOKEN;
    }
    let sig = parts.get(2).copied().unwrap_or_default();
    if alg == JwtAlg::None {
        return if sig.is_empty() { JWT_OK } else { JWT_KO };
    }
    if sig.is_empty() {
        return JWT_INVALID_TOKEN;
    }
    let mut raw = Vec::new();
    if super::conv::ub64_decode(sig, &mut raw).is_none() {
        return JWT_INVALID_TOKEN;
    }
    // The signed input: the header and the claims with their dot.
    let signed = &token[..parts[0].len() + 1 + parts[1].len()];
    match alg {
        JwtAlg::Hs(md) => {
            let mut mac = Vec::new();
            md.hmac(key, signed, &mut mac);
            i64::from(same_bytes(&mac, &raw))
        }
        JwtAlg::Rs(md) | JwtAlg::Es(md) => {
            let found = loaded.cloned().or_else(|| find_key(key));
            let Some(k) = found else {
                return JWT_UNKNOWN_CERT;
            };
            i64::from(verify(&k, md, matches!(alg, JwtAlg::Es(_)), signed, &raw))
        }
        JwtAlg::Ps => JWT_UNMANAGED_ALG,
        JwtAlg::None => JWT_KO,
    }
}

/// Checks signature `sig` of `msg` with key `k` and digest `md`. An ES
/// signature is R and S side by side (RFC 7518 §3.4, as HAProxy 2.6.12
/// reads it) or, at any other length, DER (as HAProxy 2.6.0 read it);
/// an RS one on an EC key is DER (OpenSSL's own form).
fn verify(k: &PubKey, md: Md, es: bool, msg: &[u8], sig: &[u8]) -> bool {
    use ring::signature as rs;
    let (point, half) = match k {
        PubKey::Rsa(der) => {
            if es {
                return false;
            }
            let alg: &dyn rs::VerificationAlgorithm = match md {
                Md::Sha256 => &rs::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY,
                Md::Sha384 => &rs::RSA_PKCS1_2048_8192_SHA384,
                _ => &rs::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY,
            };
            return rs::UnparsedPublicKey::new(alg, der)
                .verify(msg, sig)
                .is_ok();
        }
        PubKey::P256(p) => (p.as_slice(), 32),
        PubKey::P384(p) => (p.as_slice(), 48),
        PubKey::P521(_) => (&[][..], 66),
    };
    let Some((r, s)) = (if es && sig.len() == 2 * half {
        Some((&sig[..half], &sig[half..]))
    } else {
        der_sig(sig)
    }) else {
        return false;
    };
    if let PubKey::P521(vk) = k {
        use p521::ecdsa::signature::hazmat::PrehashVerifier;
        let mut fixed = vec![0u8; 2 * half];
        if !left_pad(r, &mut fixed[..half]) || !left_pad(s, &mut fixed[half..]) {
            return false;
        }
        let Ok(sig) = p521::ecdsa::Signature::from_slice(&fixed) else {
            return false;
        };
        let mut h = Vec::new();
        md.digest(&[msg], &mut h);
        return vk.verify_prehash(&h, &sig).is_ok();
    }
    let alg: &dyn rs::VerificationAlgorithm = match (half, md) {
        (32, Md::Sha256) => &rs::ECDSA_P256_SHA256_ASN1,
        (32, Md::Sha384) => &rs::ECDSA_P256_SHA384_ASN1,
        (48, Md::Sha256) => &rs::ECDSA_P384_SHA256_ASN1,
        (48, Md::Sha384) => &rs::ECDSA_P384_SHA384_ASN1,
        // ring has no other pairs (P-256 or P-384 with SHA-512).
        _ => return false,
    };
    rs::UnparsedPublicKey::new(alg, point)
        .verify(msg, &der_encode(r, s))
        .is_ok()
}

/// `v` (big-endian, leading zeros allowed) right-aligned in `out`; false
/// when it does not fit.
fn left_pad(v: &[u8], out: &mut [u8]) -> bool {
    let v = &v[v.iter().take_while(|&&b| b == 0).count()..];
    if v.len() > out.len() {
        return false;
    }
    let at = out.len() - v.len();
    out[at..].copy_from_slice(v);
    true
}

/// R and S of a DER ECDSA signature (`SEQUENCE { INTEGER, INTEGER }`).
fn der_sig(d: &[u8]) -> Option<(&[u8], &[u8])> {
    fn tlv(d: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
        if *d.first()? != tag {
            return None;
        }
        let (len, at): (usize, usize) = match *d.get(1)? {
            n if n < 0x80 => (usize::from(n), 2),
            0x81 => (usize::from(*d.get(2)?), 3),
            0x82 => (usize::from(*d.get(2)?) << 8 | usize::from(*d.get(3)?), 4),
            _ => return None,
        };
        let body = d.get(at..at.checked_add(len)?)?;
        Some((body, &d[at + len..]))
    }
    let (seq, rest) = tlv(d, 0x30)?;
    if !rest.is_empty() {
        return None;
    }
    let (r, seq) = tlv(seq, 0x02)?;
    let (s, seq) = tlv(seq, 0x02)?;
    (seq.is_empty() && !r.is_empty() && !s.is_empty()).then_some((r, s))
}

/// The DER form of the ECDSA signature (`r`, `s`).
fn der_encode(r: &[u8], s: &[u8]) -> Vec<u8> {
    fn int(v: &[u8], out: &mut Vec<u8>) {
        let mut v = &v[v.iter().take_while(|&&b| b == 0).count()..];
        if v.is_empty() {
            v = &[0];
        }
        let pad = v[0] & 0x80 != 0;
        out.push(0x02);
        len(v.len() + usize::from(pad), out);
        if pad {
            out.push(0);
        }
        out.extend_from_slice(v);
    }
    fn len(n: usize, out: &mut Vec<u8>) {
        if n < 0x80 {
            out.push(n as u8);
        } else {
            out.push(0x81);
            out.push(n as u8);
        }
    }
    let mut body = Vec::new();
    int(r, &mut body);
    int(s, &mut body);
    let mut out = vec![0x30];
    len(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn dig(md: Md, m: &[u8]) -> String {
        let mut o = Vec::new();
        md.digest(&[m], &mut o);
        hex(&o)
    }

    #[test]
    fn digests_match_known_vectors() {
        // FIPS 180-4 / RFC 1321 examples ("abc", "").
        for (md, m, want) in [
            (Md::Md5, &b""[..], "d41d8cd98f00b204e9800998ecf8427e"),
            (Md::Md5, b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (Md::Sha1, b"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (Md::Sha224, b"abc", "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"),
            (Md::Sha256, b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (Md::Sha384, b"abc", "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"),
            (Md::Sha512, b"abc", "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
            (Md::Sha512_224, b"abc", "4634270f707b6a54daae7530460842e20e37ed265ceee9a43e8924aa"),
            (Md::Sha512_256, b"abc", "53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23"),
        ] {
            assert_eq!(dig(md, m), want, "{md:?}");
        }
    }

    #[test]
    fn digest_names_are_openssls() {
        assert_eq!(Md::by_name("SHA256"), Some(Md::Sha256));
        assert_eq!(Md::by_name("RSA-SHA1"), Some(Md::Sha1));
        assert_eq!(Md::by_name("sha2-512/256"), Some(Md::Sha512_256));
        assert_eq!(Md::by_name("2.16.840.1.101.3.4.2.4"), Some(Md::Sha224));
        assert_eq!(Md::by_name("ssl3-md5"), Some(Md::Md5));
        assert_eq!(Md::by_name("sha3-256"), None);
        assert_eq!(Md::by_name(" sha256"), None);
    }

    fn mac(md: Md, k: &[u8], m: &[u8]) -> String {
        let mut o = Vec::new();
        md.hmac(k, m, &mut o);
        hex(&o)
    }

    #[test]
    fn hmac_matches_rfc_vectors() {
        // RFC 4231 test case 2 (SHA-2), RFC 2202 test case 2 (MD5, SHA-1).
        let (k, m) = (b"Jefe", b"what do ya want for nothing?");
        for (md, want) in [
            (Md::Md5, "750c783e6ab0b503eaa86e310a5db738"),
            (Md::Sha1, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
            (Md::Sha224, "a30e01098bc6dbbf45690f3a7e9e6d0f8bbea2a39e6148008fd05e44"),
            (Md::Sha256, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            (Md::Sha384, "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649"),
            (Md::Sha512, "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"),
        ] {
            assert_eq!(mac(md, k, m), want, "{md:?}");
        }
        // RFC 4231 test case 6: a key longer than a block.
        assert_eq!(
            mac(
                Md::Sha256,
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            ),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn same_bytes_compares_whole_values() {
        assert!(same_bytes(b"abc", b"abc"));
        assert!(!same_bytes(b"abc", b"abd"));
        assert!(!same_bytes(b"abc", b"ab"));
        assert!(same_bytes(b"", b""));
    }

    #[test]
    fn jwt_alg_names_are_exact() {
        assert_eq!(JwtAlg::parse(b"HS256"), Some(JwtAlg::Hs(Md::Sha256)));
        assert_eq!(JwtAlg::parse(b"ES512"), Some(JwtAlg::Es(Md::Sha512)));
        assert_eq!(JwtAlg::parse(b"PS384"), Some(JwtAlg::Ps));
        assert_eq!(JwtAlg::parse(b"none"), Some(JwtAlg::None));
        for bad in [&b"hs256"[..], b"HS2560", b"HS25", b"XS256", b"NONE", b""] {
            assert_eq!(JwtAlg::parse(bad), None);
        }
    }

    // RFC 7515 appendix A.1's HS256 example.
    const A1: &str = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";

    fn a1_key() -> Vec<u8> {
        let mut k = Vec::new();
        super::super::conv::ub64_decode(
            b"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow",
            &mut k,
        )
        .unwrap();
        k
    }

    #[test]
    fn jwt_verify_hs256_rfc7515() {
        let k = a1_key();
        assert_eq!(jwt_verify(A1.as_bytes(), b"HS256", &k, None), JWT_OK);
        assert_eq!(jwt_verify(A1.as_bytes(), b"HS384", &k, None), JWT_KO);
        assert_eq!(jwt_verify(A1.as_bytes(), b"HS256", b"x", None), JWT_KO);
        assert_eq!(
            jwt_verify(A1.as_bytes(), b"XX256", &k, None),
            JWT_UNKNOWN_ALG
        );
        assert_eq!(
            jwt_verify(A1.as_bytes(), b"PS256", &k, None),
            JWT_UNMANAGED_ALG
        );
        assert_eq!(
            jwt_verify(A1.as_bytes(), b"RS256", b"/nonexistent", None),
            JWT_UNKNOWN_CERT
        );
        // Structure: a fourth part, two parts, no signature, bad base64.
        let four = format!("{A1}.x");
        assert_eq!(
            jwt_verify(four.as_bytes(), b"HS256", &k, None),
            JWT_INVALID_TOKEN
        );
        assert_eq!(jwt_verify(b"a.b", b"HS256", &k, None), JWT_INVALID_TOKEN);
        assert_eq!(jwt_verify(b"a.b.", b"HS256", &k, None), JWT_INVALID_TOKEN);
        assert_eq!(jwt_verify(b"a.b.c", b"HS256", &k, None), JWT_INVALID_TOKEN);
        // `none`: two parts, or an empty third.
        assert_eq!(jwt_verify(b"a.b", b"none", &k, None), JWT_OK);
        assert_eq!(jwt_verify(b"a.b.", b"none", &k, None), JWT_OK);
        assert_eq!(jwt_verify(b"a.b.cc", b"none", &k, None), JWT_KO);
        assert_eq!(jwt_verify(b"a", b"none", &k, None), JWT_INVALID_TOKEN);
    }

    #[test]
    fn jwt_members_decode() {
        let mut o = Vec::new();
        jwt_member(A1.as_bytes(), 0, &mut o).unwrap();
        assert_eq!(o, b"{\"typ\":\"JWT\",\r\n \"alg\":\"HS256\"}");
        assert!(jwt_member(b"e30", 1, &mut Vec::new()).is_none());
        assert!(jwt_member(b"e", 0, &mut Vec::new()).is_none());
    }

    #[test]
    fn der_signatures_round_trip() {
        let r = [0x80u8; 32];
        let s = [0x01u8; 32];
        let d = der_encode(&r, &s);
        let (r2, s2) = der_sig(&d).unwrap();
        let mut out = [0u8; 32];
        assert!(left_pad(r2, &mut out));
        assert_eq!(out, r);
        assert_eq!(s2, &s[..]);
        assert!(der_sig(&d[..d.len() - 1]).is_none());
        assert!(der_sig(b"").is_none());
    }
}
