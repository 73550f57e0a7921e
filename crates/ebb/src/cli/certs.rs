//! The CLI's certificate commands (HAProxy 2.6's): `show ssl cert`,
//! `new|set|commit|abort|del ssl cert`, `show|add|del ssl crt-list`. The store and the transaction are
//! [`crate::tls::ckch`]'s; this reads the commands and prints.

use std::fmt::Write as _;

use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use super::need;
use crate::clientcert::{CertField, FieldVal};
use crate::config::CliLevel;
use crate::tls::ckch;

/// Runs a certificate command given on one line; `None`: not one.
pub fn execute(level: CliLevel, w: &[&str]) -> Option<Result<String, String>> {
    use CliLevel::*;
    let arg = |i: usize| w.get(i).copied().unwrap_or("");
    Some(match w {
        ["show", "ssl", "cert", ..] => need(level, Operator).and_then(|_| {
            if w.len() > 3 {
                show(arg(3))
            } else {
                Ok(show_list())
            }
        }),
        ["show", "ssl", "ca-file", ..] => {
            need(level, Operator).and_then(|_| show_file(arg(3), crate::tls::cafile::Kind::Ca))
        }
        ["show", "ssl", "crl-file", ..] => {
            need(level, Operator).and_then(|_| show_file(arg(3), crate::tls::cafile::Kind::Crl))
        }
        [verb @ ("new" | "set" | "commit" | "abort" | "del"), "ssl", what @ ("ca-file" | "crl-file"), ..] =>
        {
            let kind = match *what {
                "ca-file" => crate::tls::cafile::Kind::Ca,
                _ => crate::tls::cafile::Kind::Crl,
            };
            need(level, Admin).and_then(|_| ca_transaction(verb, kind, arg(3), None))
        }
        // HAProxy 2.6 asks no level for these two.
        ["set", "ssl", "ocsp-response", ..] => super::ocsp::set_response(arg(3)),
        ["show", "ssl", "ocsp-response", ..] => super::ocsp::show_responses(arg(3)),
        ["show", "ssl", "crt-list", rest @ ..] => {
            need(level, Admin).and_then(|_| ckch::show_lists(rest))
        }
        ["add", "ssl", "crt-list", ..] => {
            need(level, Admin).and_then(|_| ckch::add_to_list(arg(3), arg(4), None))
        }
        ["del", "ssl", "crt-list", ..] => {
            need(level, Admin).and_then(|_| ckch::del_from_list(arg(3), arg(4)))
        }
        ["set", "ssl", "cert", ..] => need(level, Admin).and_then(|_| {
            Err("'set ssl cert expects a filename and a certificate as a payload\n".into())
        }),
        ["commit", "ssl", "cert", ..] => need(level, Admin).and_then(|_| ckch::commit(arg(3))),
        ["abort", "ssl", "cert", ..] => need(level, Admin).and_then(|_| ckch::abort(arg(3))),
        ["new", "ssl", "cert", ..] => need(level, Admin).and_then(|_| ckch::new(arg(3))),
        ["del", "ssl", "cert", ..] => need(level, Admin).and_then(|_| ckch::del(arg(3))),
        _ => return None,
    })
}

/// Whether a command's answer is printed as it is, as HAProxy does (its
/// errors without a line end: `wrong CA index after colons in 'F:0'!`).
pub fn exact(w: &[&str]) -> bool {
    matches!(w, ["show", "ssl", "ca-file" | "crl-file", _, ..])
}

/// Runs a certificate command given with a payload; `None`: not one.
pub fn execute_payload(
    level: CliLevel,
    cmd: &str,
    payload: &str,
) -> Option<Result<String, String>> {
    let words = super::maps::words(cmd);
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["set", "ssl", "cert", rest @ ..] => Some(
            need(level, CliLevel::Admin)
                .and_then(|_| ckch::set(rest.first().copied().unwrap_or(""), payload)),
        ),
        ["set", "ssl", what @ ("ca-file" | "crl-file"), rest @ ..] => {
            let kind = match *what {
                "ca-file" => crate::tls::cafile::Kind::Ca,
                _ => crate::tls::cafile::Kind::Crl,
            };
            let name = rest.first().copied().unwrap_or("");
            Some(
                need(level, CliLevel::Admin)
                    .and_then(|_| ca_transaction("set", kind, name, Some(payload))),
            )
        }
        ["set", "ssl", "ocsp-response", ..] => Some(super::ocsp::set_response(payload)),
        ["add", "ssl", "crt-list", rest @ ..] => {
            Some(need(level, CliLevel::Admin).and_then(|_| {
                let arg = |i: usize| rest.get(i).copied().unwrap_or("");
                ckch::add_to_list(arg(0), arg(1), Some(payload))
            }))
        }
        _ => None,
    }
}

/// `new|set|commit|abort|del ssl ca-file|crl-file NAME` (see
/// [`crate::tls::cafile`]).
fn ca_transaction(
    verb: &str,
    kind: crate::tls::cafile::Kind,
    name: &str,
    payload: Option<&str>,
) -> Result<String, String> {
    use crate::tls::cafile;
    match verb {
        "new" => cafile::new_file(kind, name),
        "set" => cafile::set(kind, name, payload),
        "commit" => cafile::commit(kind, name),
        "abort" => cafile::abort(kind, name),
        _ => cafile::del(kind, name),
    }
}

fn show_list() -> String {
    let (tx, files) = ckch::list();
    let mut s = String::new();
    if let Some(t) = tx {
        let _ = writeln!(s, "# transaction\n*{t}");
    }
    s.push_str("# filename\n");
    for f in files {
        let _ = writeln!(s, "{f}");
    }
    s
}

fn show(name: &str) -> Result<String, String> {
    let not_found = || "Can't display the certificate: Not found or the certificate is a bundle!\n";
    if let Some(file) = name.strip_suffix(".ocsp") {
        return super::ocsp::show_cert(file);
    }
    let (status, c) = ckch::lookup(name).ok_or_else(not_found)?;
    let mut s = format!("Filename: {name}\nStatus: ");
    s.push_str(match status {
        ckch::Status::Empty => "Empty\n",
        ckch::Status::Unused => "Unused\n",
        ckch::Status::Used => "Used\n",
    });
    if let Some(leaf) = c.chain.first() {
        detail(&mut s, leaf, &c.chain[1..]);
    }
    s.push_str("OCSP Response Key: ");
    if let Some(id) = c.ocsp.as_deref().and_then(super::ocsp::certid) {
        for b in id {
            let _ = write!(s, "{b:02x}");
        }
    }
    s.push('\n');
    Ok(s)
}

fn hex_upper(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

fn bytes(v: Option<FieldVal>) -> Vec<u8> {
    match v {
        Some(FieldVal::Bytes(b)) => b,
        _ => Vec::new(),
    }
}

fn dn(der: &CertificateDer<'_>, issuer: bool) -> String {
    let f = CertField::Dn {
        issuer,
        entry: None,
        occ: 0,
        rfc2253: false,
    };
    String::from_utf8_lossy(&bytes(crate::clientcert::field(
        std::slice::from_ref(der),
        &f,
    )))
    .into_owned()
}

/// A date as OpenSSL's ASN1_TIME_print: `Sep 13 21:20:24 2019 GMT`.
pub(super) fn asn1_date(ts: i64) -> String {
    let (y, m, d) = crate::calendar::civil_from_days(ts.div_euclid(86_400));
    let secs = ts.rem_euclid(86_400);
    let month = crate::calendar::month_abbr(m);
    format!(
        "{month} {d:2} {:02}:{:02}:{:02} {y} GMT",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The fields HAProxy's `show ssl cert FILE` prints of a certificate and
/// its chain.
fn detail(s: &mut String, leaf: &CertificateDer<'_>, chain: &[CertificateDer<'static>]) {
    let Ok((_, c)) = X509Certificate::from_der(leaf.as_ref()) else {
        return;
    };
    let _ = writeln!(s, "Serial: {}", hex_upper(c.raw_serial()));
    let _ = writeln!(
        s,
        "notBefore: {}",
        asn1_date(c.validity().not_before.timestamp())
    );
    let _ = writeln!(
        s,
        "notAfter: {}",
        asn1_date(c.validity().not_after.timestamp())
    );
    s.push_str("Subject Alternative Name: ");
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for (i, g) in san.value.general_names.iter().enumerate() {
            // HAProxy's separator comes before every entry but the first,
            // whatever its type; only DNS names are printed.
            if i > 0 {
                s.push_str(", ");
            }
            if let GeneralName::DNSName(n) = g {
                let _ = write!(s, "DNS:{n}");
            }
        }
    }
    s.push('\n');
    use x509_parser::public_key::PublicKey;
    let algo = match c.public_key().parsed() {
        Ok(PublicKey::RSA(k)) => format!("RSA{}", k.key_size()),
        Ok(PublicKey::EC(k)) => format!("EC{}", ec_bits(&c, k.key_size())),
        Ok(PublicKey::DSA(k)) => format!("DSA{}", k.len().saturating_sub(1) * 8),
        _ => String::new(),
    };
    if !algo.is_empty() {
        let _ = writeln!(s, "Algorithm: {algo}");
    }
    let sha1 = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, leaf.as_ref());
    let _ = writeln!(s, "SHA1 FingerPrint: {}", hex_upper(sha1.as_ref()));
    let _ = writeln!(s, "Subject: {}", dn(leaf, false));
    let _ = writeln!(s, "Issuer: {}", dn(leaf, true));
    for ca in chain {
        let _ = writeln!(s, "Chain Subject: {}", dn(ca, false));
        let _ = writeln!(s, "Chain Issuer: {}", dn(ca, true));
    }
}

/// An EC key's size in bits, from its named curve (x509-parser gives the
/// point's size).
fn ec_bits(c: &X509Certificate<'_>, point_bits: usize) -> usize {
    let curve = c
        .public_key()
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok())
        .map(|o| o.to_id_string());
    match curve.as_deref() {
        Some("1.2.840.10045.3.1.7") => 256,
        Some("1.3.132.0.34") => 384,
        Some("1.3.132.0.35") => 521,
        Some("1.3.132.0.10") => 256,
        _ => point_bits.saturating_sub(8) / 2,
    }
}

/// `NAME[:INDEX]` of `show ssl ca-file|crl-file`: the name and the index
/// (from 1; 0: all); `what` names the index in the error.
fn name_index<'a>(arg: &'a str, what: &str) -> Result<(&'a str, usize), String> {
    match arg.split_once(':') {
        None => Ok((arg, 0)),
        Some((n, i)) => match i.parse::<usize>() {
            Ok(i) if i > 0 => Ok((n, i)),
            _ => Err(format!("wrong {what} index after colons in '{arg}'!")),
        },
    }
}

/// `show ssl ca-file|crl-file [NAME[:INDEX]]`, as HAProxy 2.6 prints it.
fn show_file(arg: &str, kind: crate::tls::cafile::Kind) -> Result<String, String> {
    use crate::tls::cafile::{self, Kind};
    if arg.is_empty() {
        return Ok(cafile::list(kind));
    }
    let (what, file, item) = match kind {
        Kind::Ca => ("CA", "CA file", "Certificate"),
        Kind::Crl => ("CRL", "CRL file", "Certificate Revocation List"),
    };
    let (name, index) = name_index(arg, what)?;
    let (status, ders) = cafile::lookup(name, kind)
        .ok_or_else(|| format!("Can't display the {file} : Not found!\n"))?;
    // For an index past the last CA HAProxy prints nothing at all (for
    // CRLs, the file's head), nor for a CA file without certificates.
    if kind == Kind::Ca && (index > ders.len() || ders.is_empty()) {
        return Ok(String::new());
    }
    let mut s = format!("Filename: {name}\nStatus: {status}\n");
    for (i, d) in ders.iter().enumerate() {
        if index > 0 && i + 1 != index {
            continue;
        }
        let _ = write!(s, " \n{item} #{}:\n", i + 1);
        match kind {
            Kind::Ca => detail(&mut s, &CertificateDer::from(d.as_slice()), &[]),
            Kind::Crl => crl_detail(&mut s, d),
        }
    }
    Ok(s)
}

/// OpenSSL's long name of a signature algorithm.
pub(super) fn sig_name(oid: &str) -> String {
    match oid {
        "1.2.840.113549.1.1.5" => "sha1WithRSAEncryption",
        "1.2.840.113549.1.1.11" => "sha256WithRSAEncryption",
        "1.2.840.113549.1.1.12" => "sha384WithRSAEncryption",
        "1.2.840.113549.1.1.13" => "sha512WithRSAEncryption",
        "1.2.840.113549.1.1.10" => "rsassaPss",
        "1.2.840.10045.4.1" => "ecdsa-with-SHA1",
        "1.2.840.10045.4.3.2" => "ecdsa-with-SHA256",
        "1.2.840.10045.4.3.3" => "ecdsa-with-SHA384",
        "1.2.840.10045.4.3.4" => "ecdsa-with-SHA512",
        "1.3.101.112" => "ED25519",
        "1.3.101.113" => "ED448",
        other => other,
    }
    .to_string()
}

/// The fields HAProxy's `show ssl crl-file` prints of a CRL.
fn crl_detail(s: &mut String, der: &[u8]) {
    use x509_parser::revocation_list::CertificateRevocationList;
    let Ok((_, crl)) = CertificateRevocationList::from_der(der) else {
        return;
    };
    let version = crl.version().map_or(0, |v| v.0);
    let _ = writeln!(s, "Version {}", version + 1);
    let _ = writeln!(
        s,
        "Signature Algorithm: {}",
        sig_name(&crl.signature_algorithm.algorithm.to_id_string())
    );
    let _ = writeln!(
        s,
        "Issuer: {}",
        crate::clientcert::name_oneline(crl.issuer())
    );
    let _ = writeln!(
        s,
        "Last Update: {}",
        asn1_date(crl.last_update().timestamp())
    );
    s.push_str("Next Update: ");
    // Without one, HAProxy's printing stops here.
    let Some(next) = crl.next_update() else {
        return;
    };
    let _ = writeln!(s, "{}", asn1_date(next.timestamp()));
    let revoked: Vec<_> = crl.iter_revoked_certificates().collect();
    if revoked.is_empty() {
        s.push_str("No Revoked Certificates.\n");
    } else {
        s.push_str("Revoked Certificates:\n");
    }
    for r in revoked {
        let _ = write!(
            s,
            "    Serial Number: {}\n        Revocation Date: {}\n",
            serial_text(r.raw_serial()),
            asn1_date(r.revocation_date.timestamp())
        );
    }
}

/// An integer as OpenSSL's i2a_ASN1_INTEGER: its magnitude in upper-case
/// hex (the sign byte of the DER left out), `00` for zero.
fn serial_text(raw: &[u8]) -> String {
    let start = raw.iter().position(|b| *b != 0).unwrap_or(raw.len());
    if start == raw.len() {
        return "00".into();
    }
    hex_upper(&raw[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_as_openssl() {
        assert_eq!(asn1_date(1_568_409_624), "Sep 13 21:20:24 2019 GMT");
        assert_eq!(asn1_date(0), "Jan  1 00:00:00 1970 GMT");
    }
}
