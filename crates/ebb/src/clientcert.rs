//! What the `ssl_c_*` fetches read of a client's certificate, and the
//! note of its verification: shared by the TLS side (`tls::clientauth`,
//! which verifies the chain and fills the note) and the samples (which
//! read them), so that neither imports the other.

use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

/// Error IDs ebb refuses in `ca-ignore-err`/`crt-ignore-err` lists: after
/// them webpki's verification cannot go on (OpenSSL's would check the
/// rest), so ignoring them would accept chains not otherwise checked.
/// 7: certificate signature failure; 8: CRL signature failure.
pub const NOT_IGNORABLE: &[i64] = &[7, 8];

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
    pub(crate) fn add(&mut self, code: i32, depth: i32) {
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
    /// The certificate chain this side served (`ssl_f_*`).
    pub own: &'a [CertificateDer<'static>],
    /// What the handshake settled (`ssl_fc_protocol`, `ssl_fc_cipher`...).
    pub facts: TlsFacts<'a>,
}

/// What a TLS handshake settled, for the `ssl_fc_*`/`ssl_bc_*` fetches and
/// the `%sslv`/`%sslc` log variables.
#[derive(Clone, Copy, Debug, Default)]
pub struct TlsFacts<'a> {
    pub version: Option<rustls::ProtocolVersion>,
    pub suite: Option<rustls::CipherSuite>,
    pub resumed: bool,
    pub alpn: Option<&'a [u8]>,
    /// The name the client asked for (server side).
    pub sni: Option<&'a str>,
}

impl TlsFacts<'_> {
    /// The owned form, for an exchange's record of its server connection.
    pub fn to_owned(self) -> TlsFactsOwned {
        TlsFactsOwned {
            version: self.version,
            suite: self.suite,
            resumed: self.resumed,
            alpn: self.alpn.map(<[u8]>::to_vec),
            sni: self.sni.map(str::to_string),
        }
    }
}

/// An owned [`TlsFacts`].
#[derive(Clone, Debug, Default)]
pub struct TlsFactsOwned {
    pub version: Option<rustls::ProtocolVersion>,
    pub suite: Option<rustls::CipherSuite>,
    pub resumed: bool,
    pub alpn: Option<Vec<u8>>,
    pub sni: Option<String>,
}

impl TlsFactsOwned {
    pub fn view(&self) -> TlsFacts<'_> {
        TlsFacts {
            version: self.version,
            suite: self.suite,
            resumed: self.resumed,
            alpn: self.alpn.as_deref(),
            sni: self.sni.as_deref(),
        }
    }
}

/// What an exchange keeps of its server connection's TLS for the
/// `ssl_s_*` and `ssl_bc*` fetches: the certificates the server
/// presented (its own first) and what the handshake settled. Taken once
/// per connection when the handshake ends (shared by the streams of an
/// HTTP/2 connection and the exchanges of a kept one).
#[derive(Clone, Debug, Default)]
pub struct ServerTls {
    pub chain: Vec<CertificateDer<'static>>,
    pub facts: TlsFactsOwned,
}

/// An owned [`ClientCertView`], for the lanes of an HTTP/2 connection.
#[derive(Clone, Debug, Default)]
pub struct ClientCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub note: Option<VerifyNote>,
    pub verify: i32,
    pub own: Vec<CertificateDer<'static>>,
    pub facts: TlsFactsOwned,
}

impl ClientCert {
    pub fn view(&self) -> ClientCertView<'_> {
        ClientCertView {
            chain: &self.chain,
            note: self.note,
            verify: self.verify,
            own: &self.own,
            facts: self.facts.view(),
        }
    }
}

impl ClientCertView<'_> {
    pub fn to_owned(self) -> ClientCert {
        ClientCert {
            chain: self.chain.to_vec(),
            note: self.note,
            verify: self.verify,
            own: self.own.to_vec(),
            facts: self.facts.to_owned(),
        }
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
            let entries = name_entries(name);
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
                    let out = oneline(&entries);
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

/// A name's entries: (short name, raw value bytes, starts a new RDN).
fn name_entries(name: &x509_parser::x509::X509Name<'_>) -> Vec<(String, Vec<u8>, bool)> {
    let mut entries = Vec::new();
    for rdn in name.iter_rdn() {
        for (i, a) in rdn.iter().enumerate() {
            entries.push((
                short_name(&a.attr_type().to_id_string()),
                a.as_slice().to_vec(),
                i == 0,
            ));
        }
    }
    entries
}

/// OpenSSL's one-line form of a name: `/CN=x/O=y`.
fn oneline(entries: &[(String, Vec<u8>, bool)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v, _) in entries {
        out.push(b'/');
        out.extend_from_slice(n.as_bytes());
        out.push(b'=');
        out.extend_from_slice(v);
    }
    out
}

/// A name (a CRL's issuer) in OpenSSL's one-line form, as HAProxy prints it.
pub fn name_oneline(name: &x509_parser::x509::X509Name<'_>) -> String {
    String::from_utf8_lossy(&oneline(&name_entries(name))).into_owned()
}

/// A name as OpenSSL's `X509_NAME_print_ex` with `XN_FLAG_ONELINE`
/// prints it (an OCSP responder's): `O = x, CN = y`, RDNs in order, ` + `
/// inside one; a value holding one of `,+<>;` or starting with `#` or a
/// space, or ending with a space, in double quotes, `"` and `\` escaped
/// with a backslash, control bytes and bytes past ASCII as `\XX`.
pub fn name_print_oneline(name: &x509_parser::x509::X509Name<'_>) -> String {
    let mut out = Vec::new();
    for (i, (n, v, first)) in name_entries(name).iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(if *first { b", " } else { b" + " });
        }
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b" = ");
        let quote = v
            .iter()
            .any(|b| matches!(b, b',' | b'+' | b'<' | b'>' | b';'))
            || v.first().is_some_and(|b| *b == b'#' || *b == b' ')
            || v.last() == Some(&b' ');
        if quote {
            out.push(b'"');
        }
        for &b in v {
            push_escaped(b, b == b'"' || b == b'\\', &mut out);
        }
        if quote {
            out.push(b'"');
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One byte of a DN value as OpenSSL escapes it: a `special` one after a
/// backslash, control bytes and bytes past ASCII as `\XX`.
fn push_escaped(b: u8, special: bool, out: &mut Vec<u8>) {
    if special {
        out.push(b'\\');
        out.push(b);
    } else if !(0x20..0x7f).contains(&b) {
        out.extend_from_slice(format!("\\{b:02X}").as_bytes());
    } else {
        out.push(b);
    }
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
        push_escaped(b, special, out);
    }
}

/// A certificate date as HAProxy prints it: ASN.1 UTCTime
/// `YYMMDDhhmmssZ` for 1950 to 2049 (RFC 5280's rule for which form a
/// certificate holds), else GeneralizedTime less its century `20`
/// (HAProxy returns nothing for other centuries).
fn asn1_time(ts: i64) -> Option<Vec<u8>> {
    let days = ts.div_euclid(86_400);
    let secs = ts.rem_euclid(86_400);
    let (y, m, d) = crate::calendar::civil_from_days(days);
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
