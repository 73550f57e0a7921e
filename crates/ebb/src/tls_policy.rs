//! TLS policy strings as HAProxy passes them to OpenSSL, read for rustls.
//!
//! Sans-IO: strings in, ordered lists of what rustls implements out.
//!
//! - [`ciphers12`]: an OpenSSL cipher string (`ciphers`,
//!   `ssl-default-bind-ciphers`) for TLS 1.2 and older. OpenSSL's grammar
//!   is kept: elements separated by `:` (or `,`, `;`, space); an element is
//!   a cipher name or an alias (`HIGH`, `ECDHE`, `aRSA`, `AESGCM`...),
//!   several joined by `+` meaning all of them; prefix `!` removes for good,
//!   `-` removes (a later element may add back), `+` moves to the end;
//!   `@STRENGTH` sorts by key length; `DEFAULT` and `ALL` start from every
//!   suite. The list is evaluated over the six TLS 1.2 suites rustls
//!   implements (ECDHE with RSA or ECDSA, AES-128/256-GCM or
//!   ChaCha20-Poly1305) with OpenSSL's attributes for them (checked against
//!   `openssl ciphers` in the tests), so it selects what OpenSSL would
//!   select of those six, in the same order. Names of ciphers rustls does
//!   not implement (DHE, CBC, RC4...) and words OpenSSL does not know match
//!   nothing and are skipped, as OpenSSL skips unknown words. If nothing
//!   remains, it is an error (OpenSSL's "no cipher match").
//!   `@SECLEVEL=0..2` is accepted (ring refuses RSA keys under 2048 bits,
//!   which is level 2); higher levels, and the Suite B aliases, which change
//!   more than the list, are refused.
//! - [`ciphers13`]: a TLS 1.3 list (`ciphersuites`): exact names joined by
//!   `:`; names rustls lacks (the CCM suites) or OpenSSL does not know are
//!   skipped; none left is an error.
//! - [`curves`]: `curves` (OpenSSL group names, `:` separated). A name
//!   OpenSSL does not know is an error (as `SSL_CTX_set1_curves_list`);
//!   known groups rustls lacks (X448, P-521, ffdhe*) are skipped; none
//!   left is an error.

use rustls::crypto::SupportedKxGroup;
use rustls::{CipherSuite, NamedGroup, SupportedCipherSuite};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Auth {
    Rsa,
    Ecdsa,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Enc {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20,
}

/// A TLS 1.2 suite rustls implements, with OpenSSL's name and attributes.
struct Suite12 {
    name: &'static str,
    id: CipherSuite,
    auth: Auth,
    enc: Enc,
}

impl Suite12 {
    fn bits(&self) -> u32 {
        match self.enc {
            Enc::Aes128Gcm => 128,
            Enc::Aes256Gcm | Enc::Chacha20 => 256,
        }
    }
}

/// In OpenSSL's own order (`openssl ciphers -s ALL`).
const SUITES12: [Suite12; 6] = [
    Suite12 {
        name: "ECDHE-ECDSA-AES256-GCM-SHA384",
        id: CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        auth: Auth::Ecdsa,
        enc: Enc::Aes256Gcm,
    },
    Suite12 {
        name: "ECDHE-RSA-AES256-GCM-SHA384",
        id: CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        auth: Auth::Rsa,
        enc: Enc::Aes256Gcm,
    },
    Suite12 {
        name: "ECDHE-ECDSA-CHACHA20-POLY1305",
        id: CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        auth: Auth::Ecdsa,
        enc: Enc::Chacha20,
    },
    Suite12 {
        name: "ECDHE-RSA-CHACHA20-POLY1305",
        id: CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        auth: Auth::Rsa,
        enc: Enc::Chacha20,
    },
    Suite12 {
        name: "ECDHE-ECDSA-AES128-GCM-SHA256",
        id: CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        auth: Auth::Ecdsa,
        enc: Enc::Aes128Gcm,
    },
    Suite12 {
        name: "ECDHE-RSA-AES128-GCM-SHA256",
        id: CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        auth: Auth::Rsa,
        enc: Enc::Aes128Gcm,
    },
];

/// OpenSSL's name of a suite rustls negotiated (`ssl_fc_cipher`,
/// `%sslc`) and its key size in bits (`ssl_fc_use_keysize`).
pub fn suite_name(id: CipherSuite) -> Option<(&'static str, u32)> {
    if let Some(s) = SUITES12.iter().find(|s| s.id == id) {
        return Some((s.name, s.bits()));
    }
    // TLS 1.3 suites: OpenSSL names them as the RFC does.
    match id {
        CipherSuite::TLS13_AES_128_GCM_SHA256 => Some(("TLS_AES_128_GCM_SHA256", 128)),
        CipherSuite::TLS13_AES_256_GCM_SHA384 => Some(("TLS_AES_256_GCM_SHA384", 256)),
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => Some(("TLS_CHACHA20_POLY1305_SHA256", 256)),
        _ => None,
    }
}

/// OpenSSL's name of a protocol version (`ssl_fc_protocol`, `%sslv`).
pub fn version_name(v: rustls::ProtocolVersion) -> Option<&'static str> {
    Some(match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
        rustls::ProtocolVersion::TLSv1_1 => "TLSv1.1",
        rustls::ProtocolVersion::TLSv1_0 => "TLSv1",
        rustls::ProtocolVersion::SSLv3 => "SSLv3",
        _ => return None,
    })
}

/// Which of the six suites one word (a name or an alias) matches, as a
/// bit set over [`SUITES12`]. Unknown words match nothing.
fn word_mask(w: &str) -> u8 {
    let all = 0b11_1111u8;
    let by = |f: &dyn Fn(&Suite12) -> bool| -> u8 {
        SUITES12
            .iter()
            .enumerate()
            .filter(|(_, s)| f(s))
            .fold(0, |m, (i, _)| m | (1 << i))
    };
    match w {
        // Every suite rustls has is ECDHE, AEAD, HIGH, TLSv1.2, FIPS-able.
        "ALL" | "DEFAULT" | "HIGH" | "kECDHE" | "kEECDH" | "ECDHE" | "EECDH" | "ECDH"
        | "TLSv1.2" => all,
        "aRSA" => by(&|s| s.auth == Auth::Rsa),
        "aECDSA" | "ECDSA" => by(&|s| s.auth == Auth::Ecdsa),
        "AES" => by(&|s| s.enc != Enc::Chacha20),
        "AESGCM" => by(&|s| s.enc != Enc::Chacha20),
        "AES128" => by(&|s| s.enc == Enc::Aes128Gcm),
        "AES256" => by(&|s| s.enc == Enc::Aes256Gcm),
        "CHACHA20" => by(&|s| s.enc == Enc::Chacha20),
        "FIPS" => by(&|s| s.enc != Enc::Chacha20),
        name => by(&|s| s.name == name),
    }
}

/// Aliases whose meaning goes beyond the list (OpenSSL's Suite B modes).
fn refused_word(w: &str) -> bool {
    w.starts_with("SUITEB")
}

/// Evaluates an OpenSSL cipher string; see the module doc. Returns the
/// chosen TLS 1.2 suites in order.
pub fn ciphers12(spec: &str) -> Result<Vec<CipherSuite>, String> {
    // (suite index, active) in list order; `killed` never comes back.
    let mut list: Vec<usize> = Vec::new();
    let mut killed = 0u8;
    let elems = spec
        .split([':', ',', ';', ' '])
        .filter(|e| !e.is_empty())
        .collect::<Vec<_>>();
    for (n, e) in elems.iter().enumerate() {
        if let Some(cmd) = e.strip_prefix('@') {
            if cmd == "STRENGTH" {
                // Stable sort, strongest first.
                list.sort_by_key(|&i| std::cmp::Reverse(SUITES12[i].bits()));
                continue;
            }
            if let Some(l) = cmd.strip_prefix("SECLEVEL=") {
                match l {
                    "0" | "1" | "2" => continue,
                    _ => {
                        return Err(format!(
                            "'@SECLEVEL={l}' is not supported (ebb honours levels 0 to 2)"
                        ))
                    }
                }
            }
            return Err(format!("unknown cipher string command '{e}'"));
        }
        let (op, body) = match e.as_bytes()[0] {
            b'!' => ('!', &e[1..]),
            b'-' => ('-', &e[1..]),
            b'+' => ('+', &e[1..]),
            _ => (' ', &e[..]),
        };
        if body == "DEFAULT" && n != 0 {
            // OpenSSL only expands DEFAULT as the first element.
            continue;
        }
        let mut mask = 0b11_1111u8;
        for w in body.split('+') {
            if refused_word(w) {
                return Err(format!(
                    "'{w}' (Suite B mode) is not supported by ebb's TLS library"
                ));
            }
            mask &= word_mask(w);
        }
        let has = |i: usize| mask & (1 << i) != 0;
        match op {
            '!' => {
                killed |= mask;
                list.retain(|&i| !has(i));
            }
            '-' => list.retain(|&i| !has(i)),
            '+' => {
                let (moved, kept): (Vec<usize>, Vec<usize>) = list.iter().partition(|&&i| has(i));
                list = kept;
                list.extend(moved);
            }
            _ => {
                for i in 0..SUITES12.len() {
                    if has(i) && killed & (1 << i) == 0 && !list.contains(&i) {
                        list.push(i);
                    }
                }
            }
        }
    }
    if list.is_empty() {
        return Err(format!(
            "no TLSv1.2 cipher that ebb implements in '{spec}' (ebb has: {})",
            SUITES12.map(|s| s.name).join(", ")
        ));
    }
    Ok(list.into_iter().map(|i| SUITES12[i].id).collect())
}

/// TLS 1.3 suites by OpenSSL name; `None`: known to OpenSSL, not to rustls.
const SUITES13: [(&str, Option<CipherSuite>); 5] = [
    (
        "TLS_AES_256_GCM_SHA384",
        Some(CipherSuite::TLS13_AES_256_GCM_SHA384),
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        Some(CipherSuite::TLS13_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_AES_128_GCM_SHA256",
        Some(CipherSuite::TLS13_AES_128_GCM_SHA256),
    ),
    ("TLS_AES_128_CCM_SHA256", None),
    ("TLS_AES_128_CCM_8_SHA256", None),
];

/// Evaluates a TLS 1.3 `ciphersuites` list; see the module doc.
pub fn ciphers13(spec: &str) -> Result<Vec<CipherSuite>, String> {
    let mut out = Vec::new();
    for name in spec.split(':').filter(|n| !n.is_empty()) {
        if let Some((_, Some(id))) = SUITES13.iter().find(|(n, _)| *n == name) {
            if !out.contains(id) {
                out.push(*id);
            }
        }
    }
    if out.is_empty() {
        return Err(format!(
            "no TLSv1.3 cipher suite that ebb implements in '{spec}' (ebb has: TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_GCM_SHA256)"
        ));
    }
    Ok(out)
}

/// Key-exchange groups by OpenSSL name; `None`: rustls lacks it.
fn group(name: &str) -> Result<Option<NamedGroup>, ()> {
    Ok(match name {
        "X25519" | "x25519" => Some(NamedGroup::X25519),
        "P-256" | "prime256v1" | "secp256r1" => Some(NamedGroup::secp256r1),
        "P-384" | "secp384r1" => Some(NamedGroup::secp384r1),
        "X448" | "x448" | "P-521" | "secp521r1" | "ffdhe2048" | "ffdhe3072" | "ffdhe4096"
        | "ffdhe6144" | "ffdhe8192" | "brainpoolP256r1" | "brainpoolP384r1" | "brainpoolP512r1"
        | "secp224r1" | "P-224" | "secp256k1" => None,
        _ => return Err(()),
    })
}

/// Evaluates a `curves` list; see the module doc.
pub fn curves(spec: &str) -> Result<Vec<NamedGroup>, String> {
    let mut out = Vec::new();
    for name in spec.split(':') {
        match group(name) {
            Ok(Some(g)) => {
                if !out.contains(&g) {
                    out.push(g)
                }
            }
            Ok(None) => {}
            Err(()) => return Err(format!("unknown curve '{name}' in '{spec}'")),
        }
    }
    if out.is_empty() {
        return Err(format!(
            "no curve that ebb implements in '{spec}' (ebb has: X25519, P-256, P-384)"
        ));
    }
    Ok(out)
}

/// The provider's suites in the order of `tls12` then `tls13` (each
/// `None`: the provider's own list for that version).
pub fn select_suites(
    have: &[SupportedCipherSuite],
    tls12: Option<&[CipherSuite]>,
    tls13: Option<&[CipherSuite]>,
) -> Vec<SupportedCipherSuite> {
    let mut out = Vec::new();
    // TLS 1.3 first, as rustls' own list: the version is chosen before the
    // suite, so the order between versions does not matter.
    for (want, is13) in [(tls13, true), (tls12, false)] {
        let of_version = have.iter().filter(|s| s.tls13().is_some() == is13);
        match want {
            None => out.extend(of_version.copied()),
            Some(ids) => {
                for id in ids {
                    if let Some(s) = have.iter().find(|s| s.suite() == *id) {
                        out.push(*s);
                    }
                }
            }
        }
    }
    out
}

/// The provider's groups in the order of `want` (`None`: all of them).
pub fn select_groups(
    have: &[&'static dyn SupportedKxGroup],
    want: Option<&[NamedGroup]>,
) -> Vec<&'static dyn SupportedKxGroup> {
    match want {
        None => have.to_vec(),
        Some(ids) => ids
            .iter()
            .filter_map(|id| have.iter().find(|g| g.name() == *id).copied())
            .collect(),
    }
}

/// The OIDs of a public key's algorithm and, for an EC key, its curve
/// (dotted): the TLS code's and the `jwt_verify` converter's (here, a
/// module both may import).
pub(crate) fn spki_kind(
    spki: &x509_parser::x509::SubjectPublicKeyInfo<'_>,
) -> (String, Option<String>) {
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok())
        .map(|o| o.to_id_string());
    (spki.algorithm.algorithm.to_id_string(), curve)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ids: &[CipherSuite]) -> Vec<&'static str> {
        ids.iter()
            .map(|id| {
                SUITES12
                    .iter()
                    .find(|s| s.id == *id)
                    .map_or("?", |s| s.name)
            })
            .collect()
    }

    const CASES: &[&str] = &[
        "ALL",
        "HIGH",
        "DEFAULT",
        "ECDHE+AESGCM",
        "HIGH:!aNULL:!MD5",
        "DEFAULT:-ECDSA:+AES128",
        "ECDHE:-ALL:ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:HIGH",
        "HIGH:-aRSA:aRSA",
        "HIGH:!aRSA:aRSA",
        "HIGH:+CHACHA20",
        "AES128:@STRENGTH:CHACHA20",
        "CHACHA20:AES128:@STRENGTH",
        "foo:ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256,ECDHE-ECDSA-AES128-GCM-SHA256 AES256",
        "ECDHE-RSA-AES128-GCM-SHA256+aRSA",
        "aRSA+AES128:ECDSA",
        "!aRSA:HIGH",
        "AES:CHACHA20:@SECLEVEL=2",
        // Debian's stock haproxy.cfg (the Mozilla intermediate list).
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384",
    ];

    #[test]
    fn cipher_strings_select_in_order() {
        let got = |s: &str| names(&ciphers12(s).expect(s));
        assert_eq!(
            got("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:HIGH"),
            [
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-RSA-AES256-GCM-SHA384",
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-RSA-CHACHA20-POLY1305",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
            ]
        );
        assert_eq!(
            got("HIGH:!aRSA:aRSA"),
            [
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
            ]
        );
        assert_eq!(
            got("AES128:@STRENGTH:CHACHA20"),
            [
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "ECDHE-RSA-CHACHA20-POLY1305",
            ]
        );
        // Names rustls lacks are skipped; nothing left is an error.
        assert_eq!(
            got("DHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"),
            ["ECDHE-RSA-AES128-GCM-SHA256"]
        );
        for bad in [
            "DHE-RSA-AES128-GCM-SHA256:AES128-SHA",
            "RSA",
            "MEDIUM",
            "",
            "HIGH:!ALL",
            "@SECLEVEL=3:HIGH",
            "SUITEB128",
            "@FOO:HIGH",
        ] {
            assert!(ciphers12(bad).is_err(), "{bad}");
        }
    }

    /// The same strings through `openssl ciphers`, when it is installed:
    /// the six suites come out in the same order.
    #[test]
    fn cipher_strings_agree_with_openssl() {
        let Ok(v) = std::process::Command::new("openssl")
            .arg("version")
            .output()
        else {
            eprintln!("openssl not installed: comparison skipped");
            return;
        };
        assert!(v.status.success());
        for spec in CASES {
            let out = std::process::Command::new("openssl")
                .args(["ciphers", "-s", "-tls1_2", spec])
                .output()
                .expect("openssl ciphers");
            let text = String::from_utf8_lossy(&out.stdout);
            let want: Vec<&str> = text
                .trim()
                .split(':')
                .filter(|n| SUITES12.iter().any(|s| s.name == *n))
                .collect();
            let got = ciphers12(spec).map(|l| names(&l)).unwrap_or_default();
            assert_eq!(got, want, "{spec}");
        }
    }

    #[test]
    fn tls13_lists_and_curves() {
        assert_eq!(
            ciphers13("TLS_AES_128_GCM_SHA256:TLS_AES_128_CCM_SHA256:TLS_AES_256_GCM_SHA384")
                .expect("list"),
            [
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS13_AES_256_GCM_SHA384
            ]
        );
        assert!(ciphers13("TLS_AES_128_CCM_SHA256").is_err());
        assert!(ciphers13("").is_err());
        assert_eq!(
            curves("X448:P-256:x25519:secp384r1").expect("curves"),
            [
                NamedGroup::secp256r1,
                NamedGroup::X25519,
                NamedGroup::secp384r1
            ]
        );
        assert!(curves("X448:P-521").is_err());
        assert!(curves("P-256:P-257").unwrap_err().contains("P-257"));
    }

    #[test]
    fn selection_keeps_the_given_order() {
        let p = rustls::crypto::ring::default_provider();
        let s = select_suites(
            &p.cipher_suites,
            Some(&[CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]),
            Some(&[
                CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
                CipherSuite::TLS13_AES_128_GCM_SHA256,
            ]),
        );
        let ids: Vec<_> = s.iter().map(|s| s.suite()).collect();
        assert_eq!(
            ids,
            [
                CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            ]
        );
        let g = select_groups(&p.kx_groups, Some(&[NamedGroup::secp384r1]));
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].name(), NamedGroup::secp384r1);
    }
}
