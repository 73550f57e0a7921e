//! X.509 v1 client certificates and v1 CRLs (which webpki does not
//! read) on `bind ... ssl verify`: verified as OpenSSL 3.0 does for
//! HAProxy 2.6, each refusal with OpenSSL's number; side by side with
//! haproxy when it is installed (the same answers). The PKI is made by
//! `openssl ca` without extensions (v1 certificates, a v1 CRL signed
//! with SHA-1, as HAProxy's own reg-tests use).

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

const PKI: &str = r#"set -e
cat > ca.cnf <<'X'
[ ca ]
default_ca = myca
[ myca ]
dir = .
database = index.txt
new_certs_dir = newcerts
serial = serial
default_md = sha256
policy = anything
default_crl_days = 30
unique_subject = no
[ anything ]
commonName = supplied
X
mkdir -p newcerts; : > index.txt; echo 10 > serial
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj "/CN=V1 Test CA" 2>/dev/null
# A v1 CRL that revokes nothing.
openssl ca -batch -config ca.cnf -md sha1 -cert ca.pem -keyfile ca.key -gencrl -out crl0.pem 2>/dev/null
# Same name, another key: what it signs does not verify under ca.pem.
openssl req -x509 -newkey rsa:2048 -nodes -keyout fake.key -out fake.pem -days 3650 -subj "/CN=V1 Test CA" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout srv.key -out srv.pem -days 3650 -subj "/CN=localhost" 2>/dev/null
cat srv.pem srv.key > srv-both.pem
# A v1 self-signed root (a CA by OpenSSL's rule for v1 roots).
openssl req -new -newkey rsa:2048 -nodes -keyout v1root.key -out v1root.csr -subj "/CN=V1 Root" 2>/dev/null
openssl x509 -req -in v1root.csr -signkey v1root.key -days 3650 -out v1root.pem 2>/dev/null
# ca, cert, key, name, [md], [start end]
mk() {
  [ -f $3 ] || openssl req -new -newkey rsa:2048 -nodes -keyout $3 -out $2.csr -subj "/CN=$4" 2>/dev/null
  [ -f $2.csr ] || openssl req -new -key $3 -out $2.csr -subj "/CN=$4" 2>/dev/null
  if [ -n "$6" ]; then
    openssl ca -batch -config ca.cnf -md ${5:-sha256} -cert $1.pem -keyfile $1.key -in $2.csr -out $2.pem -startdate $6 -enddate $7 -notext 2>/dev/null
  else
    openssl ca -batch -config ca.cnf -md ${5:-sha256} -cert $1.pem -keyfile $1.key -in $2.csr -out $2.pem -days 365 -notext 2>/dev/null
  fi
}
mk ca good good.key "good client"
mk ca revoked revoked.key "revoked client"
mk ca sha1 sha1.key "sha1 client" sha1
mk ca expired expired.key "expired client" sha256 20200101000000Z 20210101000000Z
mk ca future future.key "future client" sha256 20990101000000Z 20991231000000Z
mk fake forged forged.key "forged client"
mk v1root rooted rooted.key "rooted client"
# A v1 intermediate (not a CA for OpenSSL) and a client under it.
mk ca inter inter.key "V1 Inter"
mk inter chained chained.key "chained client"
cat chained.pem inter.pem > chained-chain.pem; cp chained.key chained-chain.key; cp inter.pem chained-chain.chain
# v3 certificates checked on the same path (the CRL is v1): a client
# certificate for servers only, and a chain past a CA's path length.
cat > ext.cnf <<'X'
[ srvonly ]
basicConstraints = CA:FALSE
extendedKeyUsage = serverAuth
[ ca0 ]
basicConstraints = critical,CA:TRUE,pathlen:0
keyUsage = keyCertSign,cRLSign
[ ca ]
basicConstraints = critical,CA:TRUE
keyUsage = keyCertSign,cRLSign
[ crit ]
basicConstraints = CA:FALSE
1.2.3.4 = critical,ASN1:NULL
X
openssl req -new -newkey rsa:2048 -nodes -keyout crit.key -out crit.csr -subj "/CN=crit client" 2>/dev/null
openssl ca -batch -config ca.cnf -extfile ext.cnf -extensions crit -cert ca.pem -keyfile ca.key -in crit.csr -out crit.pem -days 365 -notext 2>/dev/null
openssl req -new -newkey rsa:2048 -nodes -keyout eku.key -out eku.csr -subj "/CN=eku client" 2>/dev/null
openssl ca -batch -config ca.cnf -extfile ext.cnf -extensions srvonly -cert ca.pem -keyfile ca.key -in eku.csr -out eku.pem -days 365 -notext 2>/dev/null
openssl req -new -newkey rsa:2048 -nodes -keyout int0.key -out int0.csr -subj "/CN=Int0" 2>/dev/null
openssl ca -batch -config ca.cnf -extfile ext.cnf -extensions ca0 -cert ca.pem -keyfile ca.key -in int0.csr -out int0.pem -days 365 -notext 2>/dev/null
openssl req -new -newkey rsa:2048 -nodes -keyout int1.key -out int1.csr -subj "/CN=Int1" 2>/dev/null
openssl ca -batch -config ca.cnf -extfile ext.cnf -extensions ca -cert int0.pem -keyfile int0.key -in int1.csr -out int1.pem -days 365 -notext 2>/dev/null
mk int1 deep deep.key "deep client"
cat int1.pem int0.pem > deep.chain
# Servers' v1 certificates (no subjectAltName: HAProxy reads the CN).
mk ca sgood sgood.key "localhost"
mk ca srevoked srevoked.key "localhost"
mk ca sother sother.key "other.example"
mk ca ssha1 ssha1.key "localhost" sha1
mk fake sforged sforged.key "localhost"
for s in sgood srevoked sother ssha1 sforged; do cat $s.pem $s.key > $s-both.pem; done
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -revoke srevoked.pem 2>/dev/null
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -revoke revoked.pem 2>/dev/null
openssl ca -batch -config ca.cnf -md sha1 -cert ca.pem -keyfile ca.key -gencrl -crl_lastupdate 20250101000000Z -out crl.pem 2>/dev/null
# A newer list from the same CA that revokes nothing: of two lists,
# OpenSSL uses the newer.
: > index0.txt; sed 's/^database = index.txt/database = index0.txt/' ca.cnf > ca0.cnf
openssl ca -batch -config ca0.cnf -cert ca.pem -keyfile ca.key -gencrl -out crlnew.pem 2>/dev/null
cat crl.pem crlnew.pem > two.pem; cat crlnew.pem crl.pem > tworev.pem
# The same list signed by the other key.
openssl ca -batch -config ca.cnf -md sha1 -cert fake.pem -keyfile fake.key -gencrl -out badcrl.pem 2>/dev/null
openssl crl -in crl.pem -noout -text | grep -q 'Version 1' || { echo 'not a v1 CRL' >&2; exit 1; }
openssl x509 -in good.pem -noout -text | grep -q 'Version: 1' || { echo 'not a v1 certificate' >&2; exit 1; }
"#;

const FETCHES: &str =
    "verify=%[ssl_c_verify] err=%[ssl_c_err] caerr=%[ssl_c_ca_err] depth=%[ssl_c_ca_err_depth]";

const FRONTENDS: &[(&str, &str)] = &[
    (
        "req",
        "verify required ca-file D/ca.pem crl-file D/crl.pem",
    ),
    (
        "ign",
        "verify required ca-file D/ca.pem crl-file D/crl.pem crt-ignore-err all ca-ignore-err all",
    ),
    ("nocrl", "verify required ca-file D/ca.pem"),
    ("v1root", "verify required ca-file D/v1root.pem"),
    (
        "two",
        "verify required ca-file D/ca.pem crl-file D/two.pem",
    ),
    (
        "tworev",
        "verify required ca-file D/ca.pem crl-file D/tworev.pem",
    ),
    (
        "badcrl",
        "verify required ca-file D/ca.pem crl-file D/badcrl.pem crt-ignore-err all ca-ignore-err all",
    ),
];

fn config(dir: &Path, binds: &[String]) -> String {
    let mut s = String::from(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n",
    );
    for ((name, opts), bind) in FRONTENDS.iter().zip(binds) {
        s.push_str(&format!(
            "frontend {name}\n    bind {bind} ssl crt {d}/srv-both.pem {opts}\n    http-request return status 200 content-type text/plain lf-string \"{FETCHES}\"\n",
            d = dir.display(),
            opts = opts.replace("D/", &format!("{}/", dir.display())),
        ));
    }
    s
}

/// `openssl s_client` (curl refuses a SHA-1 client certificate) with
/// certificate `who` (and the chain in `who.chain`, if any): the
/// answer's line, or "FAIL".
fn ask(dir: &Path, who: &str, addr: std::net::SocketAddr) -> String {
    // The chain sent after the certificate, when it has one.
    let extra = if dir.join(format!("{who}.chain")).exists() {
        format!("-cert_chain {who}.chain")
    } else {
        String::new()
    };
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf 'GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n' | openssl s_client -quiet -connect {addr} -cert {who}.pem -key {who}.key {extra} -cipher DEFAULT@SECLEVEL=0 2>/dev/null"
        ))
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.lines()
        .find(|l| l.starts_with("verify="))
        .unwrap_or("FAIL")
        .to_string()
}

const CLIENTS: &[&str] = &[
    "good",
    "revoked",
    "sha1",
    "expired",
    "future",
    "forged",
    "rooted",
    "chained-chain",
    "eku",
    "deep",
    "crit",
];

/// What HAProxy 2.6 (OpenSSL 3.0, security level 1) answers, by
/// frontend and client.
const EXPECTED: &[(&str, &str, &str)] = &[
    ("req", "good", "verify=0 err=0 caerr=0 depth=0"),
    ("req", "revoked", "FAIL"),
    ("req", "sha1", "FAIL"),
    ("req", "expired", "FAIL"),
    ("req", "future", "FAIL"),
    ("req", "forged", "FAIL"),
    ("req", "rooted", "FAIL"),
    ("req", "chained-chain", "FAIL"),
    ("ign", "good", "verify=0 err=0 caerr=0 depth=0"),
    ("ign", "revoked", "verify=23 err=23 caerr=0 depth=0"),
    // A SHA-1 signature below the anchor (68), then the revocation
    // check (it is not revoked).
    ("ign", "sha1", "verify=68 err=68 caerr=0 depth=0"),
    ("ign", "expired", "verify=10 err=10 caerr=0 depth=0"),
    ("ign", "future", "verify=9 err=9 caerr=0 depth=0"),
    ("ign", "forged", "verify=7 err=7 caerr=0 depth=0"),
    // Unknown CA: 20, then 21 (a lone certificate), as for v3.
    ("ign", "rooted", "verify=21 err=20 caerr=0 depth=0"),
    // A v1 intermediate is not a CA (79, then 26 its purpose), and has
    // no CRL for its client (3).
    ("ign", "chained-chain", "verify=3 err=3 caerr=79 depth=1"),
    // Purpose: a client certificate for servers only (26).
    ("req", "eku", "FAIL"),
    ("ign", "eku", "verify=26 err=26 caerr=0 depth=0"),
    ("nocrl", "eku", "FAIL"),
    // Past Int0's path length 0 (25 at its depth), and the
    // intermediates have no CRLs (3).
    ("req", "deep", "FAIL"),
    ("ign", "deep", "verify=3 err=3 caerr=25 depth=2"),
    // An unknown critical extension (34).
    ("req", "crit", "FAIL"),
    // (Not even past `crt-ignore-err all`, as haproxy.)
    ("ign", "crit", "FAIL"),
    ("nocrl", "crit", "FAIL"),
    ("nocrl", "good", "verify=0 err=0 caerr=0 depth=0"),
    // Two lists of one CA: the newer counts, whatever their order.
    ("two", "revoked", "verify=0 err=0 caerr=0 depth=0"),
    ("tworev", "revoked", "verify=0 err=0 caerr=0 depth=0"),
    ("nocrl", "revoked", "verify=0 err=0 caerr=0 depth=0"),
    ("nocrl", "sha1", "FAIL"),
    ("nocrl", "rooted", "FAIL"),
    ("v1root", "rooted", "verify=0 err=0 caerr=0 depth=0"),
    ("v1root", "good", "FAIL"),
    // The CRL does not verify under the CA's key: 8, for the client and
    // for the CA (every certificate's CRL is checked, the root's too),
    // and what it lists is not believed.
    ("badcrl", "good", "verify=8 err=8 caerr=8 depth=1"),
    ("badcrl", "revoked", "verify=8 err=8 caerr=8 depth=1"),
];

#[test]
fn v1_client_certificates_and_crls_beside_haproxy() {
    let Some(d) = openssl_pki("v1pki", PKI) else {
        return;
    };
    let e = Ebb::start(&config(&d, &vec!["BIND".to_string(); FRONTENDS.len()]));
    assert_eq!(e.addrs.len(), FRONTENDS.len());
    let mut ours = Vec::new();
    for (i, (fe, _)) in FRONTENDS.iter().enumerate() {
        for c in CLIENTS {
            ours.push((*fe, *c, ask(&d, c, e.addrs[i])));
        }
    }
    let got = |fe: &str, c: &str| -> &str {
        ours.iter()
            .find(|(f, w, _)| *f == fe && *w == c)
            .map(|(_, _, r)| r.as_str())
            .unwrap()
    };
    for (fe, c, want) in EXPECTED {
        assert_eq!(got(fe, c), *want, "ebb: {fe} {c}");
    }

    let ports: Vec<String> = FRONTENDS
        .iter()
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let Some(_h) = haproxy_with("v1pki", &config(&d, &ports)) else {
        return;
    };
    for (i, (fe, _)) in FRONTENDS.iter().enumerate() {
        let addr = ports[i].parse().unwrap();
        wait_until("haproxy listening", || {
            std::net::TcpStream::connect(addr).is_ok()
        });
        for c in CLIENTS {
            assert_eq!(ask(&d, c, addr), got(fe, c), "haproxy: {fe} {c}");
        }
    }
}

/// Servers whose certificates are v1 (origins: ebb frontends serving
/// them), behind `server ... ssl verify required ca-file crl-file`:
/// (origin, server options, status expected, as haproxy answers).
const SERVERS: &[(&str, &str, u16)] = &[
    ("sgood", "", 200),
    ("srevoked", "", 503),
    // SHA-1 below the anchor: 68 at security level 1.
    ("ssha1", "", 503),
    ("sforged", "", 503),
    // No SNI, no verifyhost: the name is not checked.
    ("sother", "", 200),
    ("sother", "sni str(localhost)", 503),
    ("sgood", "sni str(localhost)", 200),
    ("sgood", "sni str(LocalHost)", 200),
    ("sgood", "verifyhost localhost", 200),
    ("sgood", "verifyhost nope.example", 503),
];

#[test]
fn v1_server_certificates_beside_haproxy() {
    let Some(d) = openssl_pki("v1pki-srv", PKI) else {
        return;
    };
    let mut names: Vec<&str> = SERVERS.iter().map(|s| s.0).collect();
    names.sort();
    names.dedup();
    let mut ocfg = String::from(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n",
    );
    for n in &names {
        ocfg.push_str(&format!(
            "frontend {n}\n    bind BIND ssl crt {d}/{n}-both.pem\n    http-request return status 200 content-type text/plain string ok\n",
            d = d.display()
        ));
    }
    let origins = Ebb::start(&ocfg);
    let at = |n: &str| origins.addrs[names.iter().position(|x| *x == n).unwrap()];
    let proxy = |binds: &[String]| -> String {
        let mut s = String::from(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n    retries 0\n",
        );
        for (i, ((origin, opts, _), bind)) in SERVERS.iter().zip(binds).enumerate() {
            s.push_str(&format!(
                "frontend p{i}\n    bind {bind}\n    default_backend b{i}\nbackend b{i}\n    server s {} ssl verify required ca-file {d}/ca.pem crl-file {d}/crl.pem {opts}\n",
                at(origin),
                d = d.display()
            ));
        }
        s
    };
    let e = Ebb::start(&proxy(&vec!["BIND".to_string(); SERVERS.len()]));
    for (i, (origin, opts, want)) in SERVERS.iter().enumerate() {
        let r = get(e.addrs[i], "/");
        assert_eq!(r.status, *want, "ebb: {origin} {opts}");
    }
    let ports: Vec<String> = SERVERS
        .iter()
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let Some(_h) = haproxy_with("v1pki-srv", &proxy(&ports)) else {
        return;
    };
    for (i, (origin, opts, want)) in SERVERS.iter().enumerate() {
        let r = get(ports[i].parse().unwrap(), "/");
        assert_eq!(r.status, *want, "haproxy: {origin} {opts}");
    }
}

/// `set ssl crl-file` and `set ssl ca-file` take v1 CRLs and v1
/// certificates (HAProxy's loader reads them), and the bind line
/// verifies with them after `commit`.
#[test]
fn cli_sets_v1_crls_and_cas() {
    let Some(d) = openssl_pki("v1pki-cli", PKI) else {
        return;
    };
    let sock = d.join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{}",
        sock.display(),
        config(&d, &vec!["BIND".to_string(); FRONTENDS.len()])
    ));
    let req = e.addrs[0];
    assert_eq!(ask(&d, "revoked", req), "FAIL");
    assert_eq!(ask(&d, "rooted", req), "FAIL");
    let file = |n: &str| std::fs::read_to_string(d.join(n)).unwrap();
    let set =
        |cmd: &str, payload: String| cli_cmd(&sock, &format!("{cmd} <<\n{}\n", payload.trim_end()));
    let crl = format!("{}/crl.pem", d.display());
    let out = set(&format!("set ssl crl-file {crl}"), file("crl0.pem"));
    assert!(out.starts_with("transaction created for CRL"), "{out}");
    // The pending list, named with HAProxy's CLI escape (`\*`: `*`).
    let out = cli_cmd(&sock, &format!("show ssl crl-file \\*{crl}"));
    assert!(out.starts_with(&format!("Filename: *{crl}\n")), "{out}");
    assert!(!out.contains("Revoked Certificates:"), "{out}");
    let out = cli_cmd(&sock, &format!("commit ssl crl-file {crl}"));
    assert!(out.contains("Success!"), "{out}");
    assert_eq!(ask(&d, "revoked", req), "verify=0 err=0 caerr=0 depth=0");
    // Back to the list that revokes it.
    set(&format!("set ssl crl-file {crl}"), file("crl.pem"));
    cli_cmd(&sock, &format!("commit ssl crl-file {crl}"));
    assert_eq!(ask(&d, "revoked", req), "FAIL");
    // A v1 root added to the CA file: its client is accepted (it has no
    // CRL in crl.pem: refused under the 'req' line, 3 ignored under 'ign').
    let ca = format!("{}/ca.pem", d.display());
    let out = set(
        &format!("set ssl ca-file {ca}"),
        file("ca.pem") + &file("v1root.pem"),
    );
    assert!(out.starts_with("transaction created for CA"), "{out}");
    let out = cli_cmd(&sock, &format!("commit ssl ca-file {ca}"));
    assert!(out.contains("Success!"), "{out}");
    assert_eq!(ask(&d, "rooted", req), "FAIL");
    assert_eq!(
        ask(&d, "rooted", e.addrs[1]),
        "verify=3 err=3 caerr=3 depth=1"
    );
    assert_eq!(
        ask(&d, "rooted", e.addrs[2]),
        "verify=0 err=0 caerr=0 depth=0"
    );
}
