//! A certificate as OpenSSL 3's `X509_print` writes it, then as PEM: what
//! HAProxy 2.6 prints of the certificates an OCSP response carries (`show
//! ssl ocsp-response`). Only what ebb prints exactly as OpenSSL does is
//! printed: RSA and named-curve EC keys, and the extensions basic
//! constraints, subject and authority key identifiers, key usage, extended
//! key usage and subject alternative names. Anything else is `Err` with
//! what it is, rather than a text that differs from OpenSSL's.

use std::fmt::Write as _;

use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::public_key::PublicKey;

/// OpenSSL's `BIO_indent` then text.
fn indent(s: &mut String, n: usize) {
    s.extend(std::iter::repeat_n(' ', n));
}

/// `ASN1_buf_print`: lower-case hex with colons, 15 bytes a line.
fn buf_print(s: &mut String, b: &[u8], ind: usize) {
    for (i, x) in b.iter().enumerate() {
        if i % 15 == 0 {
            if i > 0 {
                s.push('\n');
            }
            indent(s, ind);
        }
        let _ = write!(s, "{x:02x}");
        if i + 1 != b.len() {
            s.push(':');
        }
    }
    s.push('\n');
}

/// `ASN1_bn_print` of an unsigned big-endian number.
fn bn_print(s: &mut String, label: &str, n: &[u8], ind: usize) {
    let start = n.iter().position(|x| *x != 0).unwrap_or(n.len());
    let n = &n[start..];
    indent(s, ind);
    if n.is_empty() {
        let _ = writeln!(s, "{label} 0");
    } else if n.len() <= 8 {
        let v = n.iter().fold(0u64, |a, x| a << 8 | u64::from(*x));
        let _ = writeln!(s, "{label} {v} (0x{v:x})");
    } else {
        let _ = writeln!(s, "{label}");
        let mut b = Vec::with_capacity(n.len() + 1);
        if n[0] & 0x80 != 0 {
            b.push(0);
        }
        b.extend_from_slice(n);
        buf_print(s, &b, ind + 4);
    }
}

/// `X509_signature_dump` after `Signature Value:`: lower-case hex with
/// colons, 18 bytes a line at indent 8.
pub(super) fn signature_dump(s: &mut String, sig: &[u8]) {
    for (i, x) in sig.iter().enumerate() {
        if i % 18 == 0 {
            s.push_str("\n        ");
        }
        let _ = write!(s, "{x:02x}");
        if i + 1 != sig.len() {
            s.push(':');
        }
    }
    s.push('\n');
}

/// Upper-case hex with colons (`OPENSSL_buf2hexstr`).
fn hex_colons(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `X509_NAME_print` (the compatible flags): the one-line form
/// (`/C=FR/O=...`) with each `/` before `X=` or `XY=` made `, `.
fn name_print(name: &x509_parser::x509::X509Name<'_>) -> String {
    let one = crate::clientcert::name_oneline(name);
    let b = one.as_bytes();
    if b.is_empty() {
        return String::new();
    }
    let mut out = Vec::new();
    let mut c = 1;
    let mut i = 1;
    loop {
        let at = |k: usize| b.get(k).copied().unwrap_or(0);
        let cut = i >= b.len()
            || (b[i] == b'/'
                && at(i + 1).is_ascii_uppercase()
                && (at(i + 2) == b'=' || (at(i + 2).is_ascii_uppercase() && at(i + 3) == b'=')));
        if cut {
            out.extend_from_slice(b.get(c..i).unwrap_or_default());
            c = i + 1;
            if i < b.len() {
                out.extend_from_slice(b", ");
            }
        }
        if i >= b.len() {
            break;
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A GeneralName as `i2v_GENERAL_NAME` gives it.
fn general_name(g: &GeneralName<'_>) -> Result<String, String> {
    Ok(match g {
        GeneralName::DNSName(n) => format!("DNS:{n}"),
        GeneralName::RFC822Name(n) => format!("email:{n}"),
        GeneralName::URI(n) => format!("URI:{n}"),
        GeneralName::DirectoryName(n) => {
            format!("DirName:{}", crate::clientcert::name_oneline(n))
        }
        GeneralName::IPAddress(b) => match b.len() {
            4 => format!("IP Address:{}.{}.{}.{}", b[0], b[1], b[2], b[3]),
            16 => {
                let words: Vec<String> = b
                    .chunks(2)
                    .map(|w| format!("{:X}", u16::from_be_bytes([w[0], w[1]])))
                    .collect();
                format!("IP Address:{}", words.join(":"))
            }
            _ => return Err("an IP address of an odd length".into()),
        },
        _ => return Err("a general name of a kind ebb does not print".into()),
    })
}

/// OpenSSL's long name of an extended key usage.
fn eku_name(oid: &str) -> Result<&'static str, String> {
    Ok(match oid {
        "1.3.6.1.5.5.7.3.1" => "TLS Web Server Authentication",
        "1.3.6.1.5.5.7.3.2" => "TLS Web Client Authentication",
        "1.3.6.1.5.5.7.3.3" => "Code Signing",
        "1.3.6.1.5.5.7.3.4" => "E-mail Protection",
        "1.3.6.1.5.5.7.3.8" => "Time Stamping",
        "1.3.6.1.5.5.7.3.9" => "OCSP Signing",
        "2.5.29.37.0" => "Any Extended Key Usage",
        o => return Err(format!("the extended key usage {o}")),
    })
}

/// One extension's name and value lines (`X509V3_EXT_print` at indent
/// `ind`), for those ebb prints.
fn extension(
    oid: &str,
    parsed: &ParsedExtension<'_>,
    ind: usize,
) -> Result<(&'static str, String), String> {
    let pad = " ".repeat(ind);
    Ok(match parsed {
        ParsedExtension::BasicConstraints(bc) => {
            let mut v = format!("{pad}CA:{}", if bc.ca { "TRUE" } else { "FALSE" });
            if let Some(n) = bc.path_len_constraint {
                let _ = write!(v, ", pathlen:{n}");
            }
            ("X509v3 Basic Constraints", v)
        }
        ParsedExtension::SubjectKeyIdentifier(k) => (
            "X509v3 Subject Key Identifier",
            format!("{pad}{}", hex_colons(k.0)),
        ),
        ParsedExtension::AuthorityKeyIdentifier(a) => {
            // Multi-line: one value a line.
            let mut vals = Vec::new();
            if let Some(k) = &a.key_identifier {
                vals.push(format!("keyid:{}", hex_colons(k.0)));
            }
            for g in a.authority_cert_issuer.iter().flatten() {
                vals.push(general_name(g)?);
            }
            if let Some(sn) = a.authority_cert_serial {
                vals.push(format!("serial:{}", hex_colons(sn)));
            }
            let v = vals
                .iter()
                .map(|x| format!("{pad}{x}"))
                .collect::<Vec<_>>()
                .join("\n");
            ("X509v3 Authority Key Identifier", v)
        }
        ParsedExtension::KeyUsage(ku) => {
            let names = [
                (ku.digital_signature(), "Digital Signature"),
                (ku.non_repudiation(), "Non Repudiation"),
                (ku.key_encipherment(), "Key Encipherment"),
                (ku.data_encipherment(), "Data Encipherment"),
                (ku.key_agreement(), "Key Agreement"),
                (ku.key_cert_sign(), "Certificate Sign"),
                (ku.crl_sign(), "CRL Sign"),
                (ku.encipher_only(), "Encipher Only"),
                (ku.decipher_only(), "Decipher Only"),
            ];
            let on: Vec<&str> = names.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect();
            ("X509v3 Key Usage", format!("{pad}{}", on.join(", ")))
        }
        ParsedExtension::ExtendedKeyUsage(e) => {
            let mut names = Vec::new();
            let flags = [
                (e.server_auth, "1.3.6.1.5.5.7.3.1"),
                (e.client_auth, "1.3.6.1.5.5.7.3.2"),
                (e.code_signing, "1.3.6.1.5.5.7.3.3"),
                (e.email_protection, "1.3.6.1.5.5.7.3.4"),
                (e.time_stamping, "1.3.6.1.5.5.7.3.8"),
                (e.ocsp_signing, "1.3.6.1.5.5.7.3.9"),
                (e.any, "2.5.29.37.0"),
            ];
            if !e.other.is_empty() {
                return Err("an extended key usage ebb does not print".into());
            }
            // (x509-parser keeps flags, not the order: printed in the
            // order of the certificate only when there is one.)
            let set: Vec<&str> = flags.iter().filter(|(b, _)| *b).map(|(_, o)| *o).collect();
            if set.len() > 1 {
                return Err("several extended key usages".into());
            }
            for o in set {
                names.push(eku_name(o)?);
            }
            (
                "X509v3 Extended Key Usage",
                format!("{pad}{}", names.join(", ")),
            )
        }
        ParsedExtension::SubjectAlternativeName(san) => {
            let names = san
                .general_names
                .iter()
                .map(general_name)
                .collect::<Result<Vec<_>, _>>()?;
            (
                "X509v3 Subject Alternative Name",
                format!("{pad}{}", names.join(", ")),
            )
        }
        _ => return Err(format!("the extension {oid}")),
    })
}

/// The public key lines at indent 12 (`Public Key Algorithm:` and the key).
fn public_key(s: &mut String, c: &X509Certificate<'_>) -> Result<(), String> {
    let spki = c.public_key();
    match spki.parsed() {
        Ok(PublicKey::RSA(k)) => {
            s.push_str("            Public Key Algorithm: rsaEncryption\n");
            indent(s, 16);
            let _ = writeln!(s, "Public-Key: ({} bit)", k.key_size());
            bn_print(s, "Modulus:", k.modulus, 16);
            bn_print(s, "Exponent:", k.exponent, 16);
        }
        Ok(PublicKey::EC(p)) => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|x| x.as_oid().ok())
                .map(|o| o.to_id_string());
            let (bits, sn, nist) = match curve.as_deref() {
                Some("1.2.840.10045.3.1.7") => (256, "prime256v1", "P-256"),
                Some("1.3.132.0.34") => (384, "secp384r1", "P-384"),
                Some("1.3.132.0.35") => (521, "secp521r1", "P-521"),
                _ => return Err("an EC key on a curve ebb does not print".into()),
            };
            s.push_str("            Public Key Algorithm: id-ecPublicKey\n");
            let _ = writeln!(
                s,
                "                Public-Key: ({bits} bit)\n                pub:"
            );
            buf_print(s, p.data(), 20);
            let _ = writeln!(
                s,
                "                ASN1 OID: {sn}\n                NIST CURVE: {nist}"
            );
        }
        _ => return Err("a public key of a kind ebb does not print".into()),
    }
    Ok(())
}

/// `X509_print` then `PEM_write_bio_X509` of `der`.
pub(super) fn print(s: &mut String, der: &[u8]) -> Result<(), String> {
    let (_, c) = X509Certificate::from_der(der)
        .map_err(|_| "a certificate that does not read".to_string())?;
    if c.tbs_certificate.issuer_uid.is_some() || c.tbs_certificate.subject_uid.is_some() {
        return Err("a certificate with unique identifiers".into());
    }
    s.push_str("Certificate:\n    Data:\n");
    let v = c.version().0;
    if v > 2 {
        return Err("a certificate of an unknown version".into());
    }
    let _ = writeln!(s, "        Version: {} (0x{v:x})", v + 1);
    s.push_str("        Serial Number:");
    let serial = c.raw_serial();
    if serial.first().is_some_and(|b| b & 0x80 != 0) {
        return Err("a negative serial number".into());
    }
    let start = serial.iter().position(|b| *b != 0).unwrap_or(serial.len());
    let mag = &serial[start..];
    if mag.len() <= 8 {
        let n = mag.iter().fold(0u64, |a, x| a << 8 | u64::from(*x));
        let _ = writeln!(s, " {n} (0x{n:x})");
    } else {
        s.push_str("\n            ");
        let hex: Vec<String> = mag.iter().map(|x| format!("{x:02x}")).collect();
        let _ = writeln!(s, "{}", hex.join(":"));
    }
    let alg = |a: &x509_parser::x509::AlgorithmIdentifier<'_>| -> Result<String, String> {
        let oid = a.algorithm.to_id_string();
        let name = super::certs::sig_name(&oid);
        if name == oid || name == "rsassaPss" {
            return Err(format!("the signature algorithm {oid}"));
        }
        Ok(name)
    };
    let _ = writeln!(
        s,
        "        Signature Algorithm: {}",
        alg(&c.tbs_certificate.signature)?
    );
    let _ = writeln!(s, "        Issuer: {}", name_print(c.issuer()));
    let _ = writeln!(
        s,
        "        Validity\n            Not Before: {}\n            Not After : {}",
        super::certs::asn1_date(c.validity().not_before.timestamp()),
        super::certs::asn1_date(c.validity().not_after.timestamp())
    );
    let _ = writeln!(s, "        Subject: {}", name_print(c.subject()));
    s.push_str("        Subject Public Key Info:\n");
    public_key(s, &c)?;
    let exts = c.extensions();
    if !exts.is_empty() {
        s.push_str("        X509v3 extensions:\n");
        for e in exts {
            let oid = e.oid.to_id_string();
            let (name, value) = extension(&oid, e.parsed_extension(), 16)?;
            let _ = writeln!(
                s,
                "            {name}: {}\n{value}",
                if e.critical { "critical" } else { "" }
            );
        }
    }
    let _ = write!(
        s,
        "    Signature Algorithm: {}\n    Signature Value:",
        alg(&c.signature_algorithm)?
    );
    signature_dump(s, &c.signature_value.data);
    s.push_str("-----BEGIN CERTIFICATE-----\n");
    let mut b64 = Vec::new();
    crate::sample::base64_encode(der, &mut b64);
    for line in b64.chunks(64) {
        s.push_str(&String::from_utf8_lossy(line));
        s.push('\n');
    }
    s.push_str("-----END CERTIFICATE-----\n");
    Ok(())
}
