//! The CLI's OCSP commands, HAProxy 2.6's: `show ssl ocsp-response [ID]`
//! and `show ssl cert FILE.ocsp`. The responses are the `.ocsp` ones of
//! the certificate store ([`crate::tls::ckch`]); the text is what
//! HAProxy prints, OpenSSL's `OCSP_RESPONSE_print` (the `openssl ocsp
//! -respin F -text` layout), read here from the DER (RFC 6960 §4.2.1).

use std::fmt::Write as _;

use crate::tls::ckch;
use crate::tls::der_tlv;

/// HAProxy's longest certificate ID (`OCSP_MAX_CERTID_ASN1_LENGTH`): IDs
/// are compared on that many bytes, zero-padded.
const MAX_CERTID: usize = 128;

/// The element at the start of `b`: (tag, contents); `b` moves past it.
fn next<'a>(b: &mut &'a [u8]) -> Option<(u8, &'a [u8])> {
    let t = der_tlv(b)?;
    *b = t.rest;
    Some((t.tag, t.body))
}

/// The element at the start of `b` if its tag is `tag`.
fn next_if<'a>(b: &mut &'a [u8], tag: u8) -> Option<&'a [u8]> {
    match b.first() {
        Some(&t) if t == tag => next(b).map(|(_, v)| v),
        _ => None,
    }
}

/// The DER CertID of an OCSP response's first SingleResponse, the key
/// HAProxy files the response under ("OCSP Response Key").
pub(super) fn certid(der: &[u8]) -> Option<Vec<u8>> {
    let tbs = basic(der)?.tbs;
    let mut r = tbs_fields(tbs)?.responses;
    let (_, single) = next(&mut r)?;
    let t = der_tlv(single)?;
    (t.tag == 0x30).then(|| t.whole.to_vec())
}

/// The parts of a BasicOCSPResponse.
struct Basic<'a> {
    tbs: &'a [u8],
    sig_alg: &'a [u8],
    sig: &'a [u8],
    certs: Option<&'a [u8]>,
}

/// The BasicOCSPResponse of an OCSPResponse, when it has one.
fn basic(der: &[u8]) -> Option<Basic<'_>> {
    let mut d = der;
    let (0x30, mut resp) = next(&mut d)? else {
        return None;
    };
    next(&mut resp)?; // responseStatus
    let mut rb = next_if(&mut resp, 0xa0)?;
    let (_, mut rb) = next(&mut rb)?;
    let (0x06, oid) = next(&mut rb)? else {
        return None;
    };
    if oid != OCSP_BASIC {
        return None;
    }
    let mut b = next_if(&mut rb, 0x04)?;
    let (0x30, mut b) = next(&mut b)? else {
        return None;
    };
    let (0x30, tbs) = next(&mut b)? else {
        return None;
    };
    let (_, sig_alg) = next(&mut b)?;
    let sig = next_if(&mut b, 0x03)?;
    let certs = next_if(&mut b, 0xa0);
    Some(Basic {
        tbs,
        sig_alg,
        sig,
        certs,
    })
}

/// id-pkix-ocsp-basic, 1.3.6.1.5.5.7.48.1.1.
const OCSP_BASIC: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x01];

/// The fields of a ResponseData.
struct Tbs<'a> {
    version: u64,
    /// (tag, contents) of the ResponderID choice.
    responder: (u8, &'a [u8]),
    produced: &'a [u8],
    responses: &'a [u8],
    exts: Option<&'a [u8]>,
}

fn tbs_fields(mut t: &[u8]) -> Option<Tbs<'_>> {
    let version = match next_if(&mut t, 0xa0) {
        Some(mut v) => uint(next_if(&mut v, 0x02)?)?,
        None => 0,
    };
    let responder = next(&mut t)?;
    let produced = next_if(&mut t, 0x18)?;
    let responses = next_if(&mut t, 0x30)?;
    let exts = next_if(&mut t, 0xa1);
    Some(Tbs {
        version,
        responder,
        produced,
        responses,
        exts,
    })
}

fn uint(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 8 || b[0] & 0x80 != 0 {
        return None;
    }
    Some(b.iter().fold(0u64, |a, x| a << 8 | u64::from(*x)))
}

/// OpenSSL's `i2a_ASN1_STRING`: upper-case hex, a `\` and a line end
/// every 35 bytes, `0` for nothing.
fn hex_wrapped(b: &[u8]) -> String {
    if b.is_empty() {
        return "0".into();
    }
    let mut s = String::new();
    for (i, x) in b.iter().enumerate() {
        if i != 0 && i % 35 == 0 {
            s.push_str("\\\n");
        }
        let _ = write!(s, "{x:02X}");
    }
    s
}

/// OpenSSL's `i2a_ASN1_INTEGER` of a DER INTEGER's contents.
fn integer(b: &[u8]) -> String {
    let neg = b.first().is_some_and(|x| x & 0x80 != 0);
    if neg {
        // The magnitude of a two's complement number.
        let mut m: Vec<u8> = b.iter().map(|x| !x).collect();
        for x in m.iter_mut().rev() {
            let (v, carry) = x.overflowing_add(1);
            *x = v;
            if !carry {
                break;
            }
        }
        let start = m.iter().position(|x| *x != 0).unwrap_or(m.len());
        return format!("-{}", hex_wrapped(&m[start..]));
    }
    let start = b.iter().position(|x| *x != 0).unwrap_or(b.len());
    if start == b.len() {
        return "00".into();
    }
    hex_wrapped(&b[start..])
}

/// A GeneralizedTime (`YYYYMMDDHHMMSS[.f]Z`) as seconds since the epoch.
fn gtime_secs(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let s = s.strip_suffix('Z')?;
    let digits = s.get(..14)?;
    if !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| digits[r].parse::<u32>().ok();
    let (mo, d) = (n(4..6)?, n(6..8)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let days = crate::calendar::days_from_civil(i64::from(n(0..4)?), mo, d);
    Some(
        days * 86_400
            + i64::from(n(8..10)?) * 3600
            + i64::from(n(10..12)?) * 60
            + i64::from(n(12..14)?),
    )
}

/// HAProxy's `OCSP_MAX_RESPONSE_TIME_SKEW`, in seconds.
const MAX_SKEW: i64 = 300;

/// Checks an OCSP response as HAProxy 2.6 does before it takes one
/// (`ssl_sock_load_ocsp_response`): its error text otherwise.
fn check_update(der: &[u8]) -> Result<(), String> {
    let mut d = der;
    let Some((0x30, mut resp)) = next(&mut d) else {
        return Err("Unable to parse OCSP response".into());
    };
    match next(&mut resp) {
        Some((0x0a, [0])) => {}
        Some((0x0a, _)) => return Err("OCSP response status not successful".into()),
        _ => return Err("Unable to parse OCSP response".into()),
    }
    let basic_resp = basic(der).and_then(|b| tbs_fields(b.tbs));
    let Some(tbs) = basic_resp else {
        return Err("Failed to get basic response from OCSP Response".into());
    };
    let mut singles = Vec::new();
    let mut rs = tbs.responses;
    while !rs.is_empty() {
        match next(&mut rs) {
            Some((_, one)) => singles.push(one),
            None => return Err("Failed to get OCSP single response".into()),
        }
    }
    if singles.len() > 1 {
        return Err(format!(
            "OCSP response ignored because contains multiple single responses ({})",
            singles.len()
        ));
    }
    let mut one = *singles
        .first()
        .ok_or_else(|| "Failed to get OCSP single response".to_string())?;
    let unknown = || "OCSP single response: certificate status is unknown".to_string();
    next_if(&mut one, 0x30).ok_or_else(unknown)?;
    match next(&mut one) {
        Some((0x80 | 0xa1, _)) => {}
        _ => return Err(unknown()),
    }
    let this = next_if(&mut one, 0x18).and_then(gtime_secs);
    let next_update = next_if(&mut one, 0xa0)
        .and_then(|mut n| next_if(&mut n, 0x18))
        .and_then(gtime_secs);
    let Some(next_update) = next_update else {
        return Err("OCSP single response: missing nextupdate".into());
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    // OpenSSL's OCSP_check_validity with HAProxy's skew and no age limit.
    let valid = this.is_some_and(|t| t <= now + MAX_SKEW && t <= next_update)
        && next_update >= now - MAX_SKEW;
    if !valid {
        return Err("OCSP single response: no longer valid.".into());
    }
    Ok(())
}

/// `set ssl ocsp-response <base64 DER>` (or as a payload): the response
/// stapled from now on by every certificate whose response has its
/// certificate ID, as HAProxy 2.6 (which files responses by that ID).
pub(super) fn set_response(arg: &str) -> Result<String, String> {
    let b64: String = arg.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    if b64.is_empty() {
        return Err("'set ssl ocsp-response' expects response in base64 encoding.\n".into());
    }
    let der = crate::base64::decode(&b64).ok_or_else(|| {
        "'set ssl ocsp-response' received invalid base64 encoded response.\n".to_string()
    })?;
    check_update(&der).map_err(|e| format!("{e}.\n"))?;
    let no_match = || {
        "OCSP single response: Certificate ID does not match any certificate or issuer.\n"
            .to_string()
    };
    let id = certid(&der)
        .filter(|i| i.len() <= MAX_CERTID)
        .ok_or_else(no_match)?;
    let key = padded(&id);
    let n = ckch::set_ocsp(
        |old| certid(old).is_some_and(|o| o.len() <= MAX_CERTID && padded(&o) == key),
        &der,
    );
    if n == 0 {
        return Err(no_match());
    }
    Ok("OCSP Response updated!\n".into())
}

/// A GeneralizedTime as OpenSSL's `ASN1_TIME_print`:
/// `Sep 13 21:20:24 2019 GMT`, fractions of a second kept.
fn gtime(b: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(b).ok()?;
    let s = s.strip_suffix('Z')?;
    if s.len() < 14 || !s.is_char_boundary(14) || !s[..14].bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s[r].parse::<u32>().ok();
    let (y, mo, d) = (n(0..4)?, n(4..6)?, n(6..8)?);
    let (h, mi, sec) = (n(8..10)?, n(10..12)?, n(12..14)?);
    if !(1..=12).contains(&mo) {
        return None;
    }
    let frac = &s[14..];
    let frac_ok = match frac.strip_prefix('.') {
        Some(f) => !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()),
        None => frac.is_empty(),
    };
    if !frac_ok {
        return None;
    }
    Some(format!(
        "{} {d:2} {h:02}:{mi:02}:{sec:02}{frac} {y} GMT",
        crate::calendar::month_abbr(mo)
    ))
}

fn oid_text(b: &[u8]) -> String {
    use x509_parser::der_parser::oid::Oid;
    Oid::new(std::borrow::Cow::Borrowed(b)).to_id_string()
}

/// OpenSSL's long name of a digest (a CertID's hash algorithm).
fn hash_name(oid: &str) -> String {
    match oid {
        "1.3.14.3.2.26" => "sha1",
        "1.2.840.113549.2.5" => "md5",
        "2.16.840.1.101.3.4.2.1" => "sha256",
        "2.16.840.1.101.3.4.2.2" => "sha384",
        "2.16.840.1.101.3.4.2.3" => "sha512",
        "2.16.840.1.101.3.4.2.4" => "sha224",
        other => other,
    }
    .to_string()
}

/// The OID of an AlgorithmIdentifier's contents, as text.
fn alg_oid(mut alg: &[u8]) -> Option<String> {
    next_if(&mut alg, 0x06).map(oid_text)
}

/// OpenSSL's `OCSP_crl_reason_str`.
fn reason(n: u64) -> &'static str {
    match n {
        0 => "unspecified",
        1 => "keyCompromise",
        2 => "cACompromise",
        3 => "affiliationChanged",
        4 => "superseded",
        5 => "cessationOfOperation",
        6 => "certificateHold",
        8 => "removeFromCRL",
        9 => "privilegeWithdrawn",
        10 => "aACompromise",
        _ => "(UNKNOWN)",
    }
}

/// OpenSSL's `X509V3_extensions_print` of the Extensions inside an
/// explicit tag: `title`, then each extension's name and value.
fn extensions(s: &mut String, title: &str, wrapped: Option<&[u8]>, indent: usize) -> Option<()> {
    let Some(mut w) = wrapped else {
        return Some(());
    };
    let mut exts = next_if(&mut w, 0x30)?;
    if exts.is_empty() {
        return Some(());
    }
    let _ = writeln!(s, "{:indent$}{title}:", "");
    let indent = indent + 4;
    while !exts.is_empty() {
        let (_, mut e) = next(&mut exts)?;
        let oid = next_if(&mut e, 0x06)?;
        let critical = next_if(&mut e, 0x01).is_some_and(|b| b.first().is_some_and(|x| *x != 0));
        let value = next_if(&mut e, 0x04)?;
        let id = oid_text(oid);
        let name = match id.as_str() {
            "1.3.6.1.5.5.7.48.1.2" => "OCSP Nonce",
            _ => id.as_str(),
        };
        let _ = writeln!(
            s,
            "{:indent$}{name}: {}",
            "",
            if critical { "critical" } else { "" }
        );
        let inner = indent + 4;
        if name == "OCSP Nonce" {
            let _ = write!(s, "{:inner$}{}", "", hex_wrapped(value));
        } else {
            // An extension OpenSSL has no printer for: its bytes, the
            // unprintable ones as dots (ASN1_STRING_print).
            let _ = write!(s, "{:inner$}", "");
            for &c in value {
                let printable = (b' '..=b'~').contains(&c) || c == b'\n' || c == b'\r';
                s.push(if printable { c as char } else { '.' });
            }
        }
        s.push('\n');
    }
    Some(())
}

/// What HAProxy 2.6 prints of an OCSP response (`ssl_ocsp_response_print`,
/// OpenSSL's `OCSP_RESPONSE_print` with every empty line given a space);
/// `None`: not a response ebb can read. The certificates it carries are
/// printed as OpenSSL's `X509_print` and PEM (see [`super::x509print`]),
/// or the response is refused when one has a part ebb does not print.
fn print(der: &[u8]) -> Result<Option<String>, String> {
    let Some(text) = print_raw(der)? else {
        return Ok(None);
    };
    Ok(Some(text.replace("\n\n", "\n \n").replace("\n\n", "\n \n")))
}

fn print_raw(der: &[u8]) -> Result<Option<String>, String> {
    let mut d = der;
    let Some((0x30, mut resp)) = next(&mut d) else {
        return Ok(None);
    };
    let Some(status) = next_if(&mut resp, 0x0a).and_then(uint) else {
        return Ok(None);
    };
    let status_text = match status {
        0 => "successful",
        1 => "malformedrequest",
        2 => "internalerror",
        3 => "trylater",
        5 => "sigrequired",
        6 => "unauthorized",
        _ => "(UNKNOWN)",
    };
    let mut s =
        format!("OCSP Response Data:\n    OCSP Response Status: {status_text} (0x{status:x})\n");
    if resp.is_empty() {
        return Ok(Some(s));
    }
    let Some(b) = basic(der) else {
        return Ok(None);
    };
    if body(&mut s, &b).is_none() {
        return Ok(None);
    }
    // The certificates it carries (a SEQUENCE of them in `[0]`).
    if let Some(mut certs) = b.certs.and_then(|mut c| next_if(&mut c, 0x30)) {
        while !certs.is_empty() {
            let before = certs;
            let Some((0x30, _)) = next(&mut certs) else {
                return Ok(None);
            };
            let der = &before[..before.len() - certs.len()];
            super::x509print::print(&mut s, der).map_err(|why| {
                format!("ebb does not print this response's certificate as OpenSSL would: {why}.\n")
            })?;
        }
    }
    Ok(Some(s))
}

fn body(s: &mut String, b: &Basic<'_>) -> Option<()> {
    let t = tbs_fields(b.tbs)?;
    s.push_str("    Response Type: Basic OCSP Response\n");
    let _ = writeln!(s, "    Version: {} (0x{:x})", t.version + 1, t.version);
    s.push_str("    Responder Id: ");
    let (tag, mut v) = t.responder;
    match tag {
        0xa1 => {
            use x509_parser::prelude::FromDer;
            let (_, name) = x509_parser::x509::X509Name::from_der(v).ok()?;
            s.push_str(&crate::clientcert::name_print_oneline(&name));
        }
        0xa2 => s.push_str(&hex_wrapped(next_if(&mut v, 0x04)?)),
        _ => return None,
    }
    let _ = write!(
        s,
        "\n    Produced At: {}\n    Responses:\n",
        gtime(t.produced)?
    );
    let mut rs = t.responses;
    while !rs.is_empty() {
        let (_, mut one) = next(&mut rs)?;
        let mut id = next_if(&mut one, 0x30)?;
        let (_, alg) = next(&mut id)?;
        let name_hash = next_if(&mut id, 0x04)?;
        let key_hash = next_if(&mut id, 0x04)?;
        let serial = next_if(&mut id, 0x02)?;
        let _ = write!(
            s,
            "    Certificate ID:\n      Hash Algorithm: {}\n      Issuer Name Hash: {}\n      Issuer Key Hash: {}\n      Serial Number: {}\n",
            hash_name(&alg_oid(alg)?),
            hex_wrapped(name_hash),
            hex_wrapped(key_hash),
            integer(serial)
        );
        let (tag, mut st) = next(&mut one)?;
        match tag {
            0x80 => s.push_str("    Cert Status: good"),
            0x82 => s.push_str("    Cert Status: unknown"),
            0xa1 => {
                s.push_str("    Cert Status: revoked");
                let when = next_if(&mut st, 0x18)?;
                let _ = write!(s, "\n    Revocation Time: {}", gtime(when)?);
                if let Some(mut r) = next_if(&mut st, 0xa0) {
                    let n = uint(next_if(&mut r, 0x0a)?)?;
                    let _ = write!(s, "\n    Revocation Reason: {} (0x{n:x})", reason(n));
                }
            }
            _ => return None,
        }
        let this = next_if(&mut one, 0x18)?;
        let _ = write!(s, "\n    This Update: {}", gtime(this)?);
        if let Some(mut n) = next_if(&mut one, 0xa0) {
            let _ = write!(s, "\n    Next Update: {}", gtime(next_if(&mut n, 0x18)?)?);
        }
        s.push('\n');
        extensions(s, "Response Single Extensions", next_if(&mut one, 0xa1), 8)?;
        s.push('\n');
    }
    extensions(s, "Response Extensions", t.exts, 4)?;
    let _ = writeln!(
        s,
        "    Signature Algorithm: {}",
        super::certs::sig_name(&alg_oid(b.sig_alg)?)
    );
    s.push_str("    Signature Value:");
    super::x509print::signature_dump(s, b.sig.get(1..)?);
    Some(())
}

/// A key zero-padded to HAProxy's length, for comparing as its tree does.
fn padded(k: &[u8]) -> [u8; MAX_CERTID] {
    let mut p = [0u8; MAX_CERTID];
    let n = k.len().min(MAX_CERTID);
    p[..n].copy_from_slice(&k[..n]);
    p
}

/// The OCSP responses served (those of the certificates in use), by
/// certificate ID, in HAProxy's tree order; one per ID.
fn served() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for f in ckch::list().1 {
        let Some((ckch::Status::Used, c)) = ckch::lookup(&f) else {
            continue;
        };
        let Some(der) = c.ocsp else {
            continue;
        };
        let Some(id) = certid(&der) else {
            continue;
        };
        if id.len() <= MAX_CERTID && !v.iter().any(|(k, _)| padded(k) == padded(&id)) {
            v.push((id, der));
        }
    }
    v.sort_by_key(|(k, _)| padded(k));
    v
}

/// `show ssl ocsp-response [ID]`.
pub(super) fn show_responses(id: &str) -> Result<String, String> {
    if id.is_empty() {
        let mut s = String::from("# Certificate IDs\n");
        for (k, _) in served() {
            s.push_str("Certificate ID key : ");
            for b in &k {
                let _ = write!(s, "{b:02x}");
            }
            let mut c = k.as_slice();
            let mut c = next_if(&mut c, 0x30).unwrap_or_default();
            let _alg = next(&mut c);
            let name = next_if(&mut c, 0x04).unwrap_or_default();
            let key = next_if(&mut c, 0x04).unwrap_or_default();
            let serial = next_if(&mut c, 0x02).unwrap_or_default();
            let _ = writeln!(
                s,
                "\n Certificate ID:\n   Issuer Name Hash: {}\n   Issuer Key Hash: {}\n   Serial Number: {}",
                hex_wrapped(name),
                hex_wrapped(key),
                integer(serial)
            );
        }
        return Ok(s);
    }
    if id.len() > MAX_CERTID * 2 {
        return Err("'show ssl ocsp-response' received a too big key.\n".into());
    }
    let not_found = || "Certificate ID does not match any certificate.\n".to_string();
    let key = unhex(id).ok_or_else(not_found)?;
    let (_, der) = served()
        .into_iter()
        .find(|(k, _)| padded(k) == padded(&key))
        .ok_or_else(not_found)?;
    Ok(print(&der)?.unwrap_or_default())
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `show ssl cert [*]NAME.ocsp` (`name` without `.ocsp`): the response
/// of the pending change as it is, or the one served under the ID of the
/// file's response; nothing when there is none.
pub(super) fn show_cert(name: &str) -> Result<String, String> {
    let not_found = || "Can't display the certificate: Not found or the certificate is a bundle!\n";
    let (_, c) = ckch::lookup(name).ok_or_else(not_found)?;
    if name.starts_with('*') {
        if let Some(der) = &c.ocsp {
            return Ok(print(der)?.unwrap_or_default());
        }
    }
    let Some(id) = c.ocsp.as_deref().and_then(certid) else {
        return Ok(String::new());
    };
    match served().into_iter().find(|(k, _)| padded(k) == padded(&id)) {
        Some((_, der)) => Ok(print(&der)?.unwrap_or_default()),
        None => Ok(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_prints_nothing() {
        assert!(certid(b"").is_none());
        assert!(certid(&[0x30, 0x03, 0x0a, 0x01, 0x00]).is_none());
        assert_eq!(print(b"").unwrap(), None);
        assert_eq!(print(&[0x30, 0x02, 0x0a, 0x00]).unwrap(), None);
        assert_eq!(
            print(&[0x30, 0x03, 0x0a, 0x01, 0x03]).unwrap().unwrap(),
            "OCSP Response Data:\n    OCSP Response Status: trylater (0x3)\n"
        );
    }

    #[test]
    fn times_and_numbers_print_as_openssl() {
        assert_eq!(
            gtime(b"20261207211145Z").unwrap(),
            "Dec  7 21:11:45 2026 GMT"
        );
        assert_eq!(
            gtime(b"20261207211145.25Z").unwrap(),
            "Dec  7 21:11:45.25 2026 GMT"
        );
        assert!(gtime(b"2026120721114Z").is_none());
        assert_eq!(integer(&[0x00, 0x90]), "90");
        assert_eq!(integer(&[0x00]), "00");
        assert_eq!(integer(&[0xff]), "-01");
        assert_eq!(hex_wrapped(&[0xab; 36]).matches("\\\n").count(), 1);
        assert_eq!(unhex("0aFf"), Some(vec![0x0a, 0xff]));
        assert_eq!(unhex("0a0"), None);
    }
}
