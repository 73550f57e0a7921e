//! Client certificates on `bind ... ssl` (`verify`, `ca-file`,
//! `crl-file`, `ca-ignore-err`, `crt-ignore-err`) and the `ssl_c_*`
//! fetches, through the real binary with curl as the client and a small
//! PKI made by `openssl` in the test; side by side with haproxy when it
//! is installed (the same answers, byte for byte).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// A root CA, an intermediate, another CA, a server certificate, client
/// certificates (good, expired, revoked, from the other CA, under the
/// intermediate) and the root's CRL revoking one, made with `openssl ca`
/// (which can back-date a certificate and revoke one).
const PKI: &str = r#"set -e
cat > ca.cnf <<'X'
[ ca ]
default_ca = myca
[ myca ]
dir = .
database = index.txt
new_certs_dir = newcerts
serial = serial
crlnumber = crlnumber
default_md = sha256
policy = anything
copy_extensions = none
default_crl_days = 30
unique_subject = no
[ anything ]
countryName = optional
stateOrProvinceName = optional
organizationName = optional
organizationalUnitName = optional
commonName = supplied
emailAddress = optional
[ client ]
basicConstraints = CA:FALSE
keyUsage = digitalSignature
extendedKeyUsage = clientAuth
[ v3ca ]
basicConstraints = critical,CA:TRUE
keyUsage = keyCertSign,cRLSign
X
mkdir -p newcerts; : > index.txt; echo 1000 > serial; echo 1000 > crlnumber
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj "/C=FR/O=Ebb Test/CN=Test Root CA" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 3650 -subj "/CN=Other CA" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout srv.key -out srv.pem -days 3650 -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost" 2>/dev/null
cat srv.pem srv.key > srv-both.pem
openssl req -new -newkey rsa:2048 -nodes -keyout inter.key -out inter.csr -subj "/O=Ebb Test/CN=Test Inter CA" 2>/dev/null
openssl ca -batch -config ca.cnf -extensions v3ca -cert ca.pem -keyfile ca.key -in inter.csr -out inter.pem -days 3650 -notext 2>/dev/null
mk() {
  openssl req -new -newkey rsa:2048 -nodes -keyout $1.key -out $1.csr -subj "$2" 2>/dev/null
  if [ -n "$5" ]; then
    openssl ca -batch -config ca.cnf -extensions client -cert $4 -keyfile $3 -in $1.csr -out $1.pem -startdate $5 -enddate $6 -notext 2>/dev/null
  else
    openssl ca -batch -config ca.cnf -extensions client -cert $4 -keyfile $3 -in $1.csr -out $1.pem -days 365 -notext 2>/dev/null
  fi
}
mk good "/C=FR/ST=Paris/O=Ebb Test/OU=QA/OU=Dev, Ops/CN=client one/emailAddress=a@b.example" ca.key ca.pem
mk expired "/CN=expired client" ca.key ca.pem 20200101000000Z 20210101000000Z
mk revoked "/CN=revoked client" ca.key ca.pem
mk stranger "/CN=stranger" other.key other.pem
mk chained "/CN=chained client" inter.key inter.pem
cat chained.pem inter.pem > chained-chain.pem
cp chained.key chained-chain.key
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -revoke revoked.pem 2>/dev/null
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -gencrl -out crl.pem 2>/dev/null
"#;

/// Makes the PKI in a scratch directory; `None` (test skipped) without
/// openssl or curl.
fn pki(name: &str) -> Option<PathBuf> {
    if !have("curl") {
        eprintln!("curl missing: client-certificate tests skipped");
        return None;
    }
    openssl_pki(name, PKI)
}

/// Every client-certificate fetch, one line.
const FETCHES: &str = "used=%[ssl_c_used] has=%[ssl_fc_has_crt] verify=%[ssl_c_verify] err=%[ssl_c_err] caerr=%[ssl_c_ca_err] depth=%[ssl_c_ca_err_depth] sdn=%[ssl_c_s_dn] idn=%[ssl_c_i_dn] cn=%[ssl_c_s_dn(CN)] ou2=%[ssl_c_s_dn(OU,2)] oum1=%[ssl_c_s_dn(OU,-1)] ou0=%[ssl_c_s_dn(OU,0)] rfc=%[ssl_c_s_dn(,0,rfc2253)] irfc=%[ssl_c_i_dn(,0,rfc2253)] serial=%[ssl_c_serial,hex] sha1=%[ssl_c_sha1,hex] nb=%[ssl_c_notbefore] na=%[ssl_c_notafter] v=%[ssl_c_version] sig=%[ssl_c_sig_alg] key=%[ssl_c_key_alg] der=%[ssl_c_der,sha1,hex] chain=%[ssl_c_chain_der,sha1,hex]";

/// The bind options of each frontend after `ssl`, by name (`D/`: the
/// PKI's directory).
const FRONTENDS: &[(&str, &str)] = &[
    (
        "req",
        "crt D/srv-both.pem verify required ca-file D/ca.pem crl-file D/crl.pem",
    ),
    ("opt", "crt D/srv-both.pem verify optional ca-file D/ca.pem"),
    (
        "ign",
        "crt D/srv-both.pem verify required ca-file D/ca.pem crl-file D/crl.pem crt-ignore-err all ca-ignore-err all",
    ),
    ("none", "crt D/srv-both.pem"),
    (
        "some",
        "crt D/srv-both.pem verify optional ca-file D/ca.pem crt-ignore-err 10,20",
    ),
    (
        "h2",
        "crt D/srv-both.pem verify required ca-file D/ca.pem alpn h2,http/1.1",
    ),
    // CAs that do not issue the client's: the depth of the error.
    (
        "other",
        "crt D/srv-both.pem verify optional ca-file D/other.pem ca-ignore-err all crt-ignore-err all",
    ),
    // A crt-list line's own options (its line: `[verify required
    // ca-file ca.pem]`, ca-file under `ca-base`).
    ("list", "crt-list D/list.txt"),
];

fn config(dir: &Path, binds: &[String]) -> String {
    let mut s = format!("global\n    ca-base {}\n", dir.display());
    s += "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n";
    for ((name, opts), bind) in FRONTENDS.iter().zip(binds) {
        s.push_str(&format!(
            "frontend {name}\n    bind {bind} ssl {opts}\n    http-request return status 200 content-type text/plain lf-string \"{FETCHES}\"\n",
            opts = opts.replace("D/", &format!("{}/", dir.display())),
        ));
    }
    s
}

/// curl with client certificate `who` (`None`: none) to `addr`: the
/// body, or `Err` when the handshake (or request) failed.
fn ask(
    dir: &Path,
    who: Option<&str>,
    addr: std::net::SocketAddr,
    h2: bool,
) -> Result<String, String> {
    let url = format!("https://{addr}/");
    let mut args: Vec<String> = vec!["-k".into()];
    if let Some(w) = who {
        args.extend([
            "--cert".into(),
            dir.join(format!("{w}.pem")).display().to_string(),
            "--key".into(),
            dir.join(format!("{w}.key")).display().to_string(),
        ]);
    }
    if h2 {
        args.push("--http2".into());
        args.extend(["-w".into(), " proto=%{http_version}".into()]);
    }
    args.push(url);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out, err) = curl(&a);
    if ok {
        Ok(out)
    } else {
        Err(err)
    }
}

fn field<'a>(body: &'a str, name: &str) -> &'a str {
    let start = body
        .find(&format!("{name}="))
        .unwrap_or_else(|| panic!("{name} in {body}"))
        + name.len()
        + 1;
    let rest = &body[start..];
    // Values may hold spaces: up to the next " key=" field.
    let end = rest
        .match_indices(' ')
        .find(|(i, _)| {
            let r = &rest[i + 1..];
            r.split_once('=')
                .is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric()))
        })
        .map_or(rest.len(), |(i, _)| i);
    &rest[..end]
}

#[test]
fn verify_modes_and_fetches_beside_haproxy() {
    let Some(d) = pki("mtls") else { return };
    std::fs::write(
        d.join("list.txt"),
        format!(
            "{}/srv-both.pem [verify required ca-file ca.pem]\n",
            d.display()
        ),
    )
    .unwrap();
    let e = Ebb::start(&config(&d, &vec!["BIND".to_string(); FRONTENDS.len()]));
    assert_eq!(e.addrs.len(), FRONTENDS.len());
    let clients = [
        None,
        Some("good"),
        Some("expired"),
        Some("revoked"),
        Some("stranger"),
        Some("chained-chain"),
    ];
    let mut ours = Vec::new();
    for (i, (fe, _)) in FRONTENDS.iter().enumerate() {
        for c in clients {
            let r = ask(&d, c, e.addrs[i], *fe == "h2");
            ours.push((fe.to_string(), c, r));
        }
    }
    let get = |fe: &str, c: Option<&str>| -> Result<String, String> {
        ours.iter()
            .find(|(f, w, _)| f == fe && *w == c)
            .map(|(_, _, r)| r.clone())
            .unwrap()
    };
    // Required: a good certificate passes, with every fetch as HAProxy
    // prints it; no, expired, revoked, unknown-CA certificates fail.
    let good = get("req", Some("good")).unwrap();
    assert_eq!(field(&good, "used"), "1");
    assert_eq!(field(&good, "has"), "1");
    assert_eq!(field(&good, "verify"), "0");
    assert_eq!(
        field(&good, "sdn"),
        "/C=FR/ST=Paris/O=Ebb Test/OU=QA/OU=Dev, Ops/CN=client one/emailAddress=a@b.example"
    );
    assert_eq!(field(&good, "idn"), "/C=FR/O=Ebb Test/CN=Test Root CA");
    assert_eq!(field(&good, "cn"), "client one");
    assert_eq!(field(&good, "ou2"), "Dev, Ops");
    assert_eq!(field(&good, "oum1"), "Dev, Ops");
    assert_eq!(field(&good, "ou0"), "");
    assert_eq!(
        field(&good, "rfc"),
        "emailAddress=a@b.example,CN=client one,OU=Dev\\, Ops,OU=QA,O=Ebb Test,ST=Paris,C=FR"
    );
    assert_eq!(field(&good, "serial"), "1001");
    assert_eq!(field(&good, "v"), "3");
    assert_eq!(field(&good, "sig"), "RSA-SHA256");
    assert_eq!(field(&good, "key"), "rsaEncryption");
    assert_eq!(field(&good, "chain"), "", "one certificate: no chain");
    assert_eq!(field(&good, "nb").len(), 13, "{good}");
    for c in [None, Some("expired"), Some("revoked"), Some("stranger")] {
        assert!(get("req", c).is_err(), "req accepted {c:?}");
    }
    // Optional: none is fine (nothing to read), a bad one still fails.
    let none = get("opt", None).unwrap();
    assert!(none.starts_with("used=0 has=0 verify=0 err=0"), "{none}");
    assert!(get("opt", Some("expired")).is_err());
    assert!(get("opt", Some("good")).is_ok());
    // Revocation is only checked with a crl-file.
    assert!(get("opt", Some("revoked")).is_ok());
    // Ignored errors: the handshake goes on and the numbers are OpenSSL's.
    let exp = get("ign", Some("expired")).unwrap();
    assert_eq!((field(&exp, "verify"), field(&exp, "err")), ("10", "10"));
    assert_eq!(field(&exp, "nb"), "200101000000Z");
    assert_eq!(field(&exp, "na"), "210101000000Z");
    let rev = get("ign", Some("revoked")).unwrap();
    assert_eq!((field(&rev, "verify"), field(&rev, "err")), ("23", "23"));
    let st = get("ign", Some("stranger")).unwrap();
    assert_eq!((field(&st, "verify"), field(&st, "err")), ("21", "20"));
    assert!(get("ign", None).is_err(), "required: no certificate fails");
    // An intermediate sent by the client: verified to the root; the
    // chain fetch holds the certificates after the client's own.
    let ch = get("opt", Some("chained-chain")).unwrap();
    assert_eq!(field(&ch, "verify"), "0");
    assert_eq!(field(&ch, "idn"), "/O=Ebb Test/CN=Test Inter CA");
    assert_ne!(field(&ch, "chain"), "");
    // Only some IDs ignored: 20 is, 21 (what OpenSSL finds next for a
    // lone certificate from an unknown CA) is not.
    assert!(get("some", Some("stranger")).is_err());
    let exp = get("some", Some("expired")).unwrap();
    assert_eq!(field(&exp, "verify"), "10");
    // No verify: nothing asked, nothing read.
    let n = get("none", Some("good")).unwrap();
    assert!(n.starts_with("used=0 has=0 verify=0"), "{n}");
    // The intermediate's issuer is unknown: error 20 at depth 1.
    let o = get("other", Some("chained-chain")).unwrap();
    assert_eq!(
        (
            field(&o, "verify"),
            field(&o, "err"),
            field(&o, "caerr"),
            field(&o, "depth")
        ),
        ("20", "0", "20", "1")
    );
    // The crt-list line's verify.
    assert!(get("list", None).is_err());
    assert!(get("list", Some("expired")).is_err());
    assert_eq!(field(&get("list", Some("good")).unwrap(), "verify"), "0");
    // HTTP/2: the lanes read the same.
    let h = get("h2", Some("good")).unwrap();
    assert!(h.ends_with("proto=2"), "{h}");
    assert_eq!(field(&h, "cn"), "client one");

    // A resumed session (TLS 1.2 session ID or ticket, TLS 1.3 ticket):
    // the chain is the session's (`ssl_c_used`), none was presented now
    // (`ssl_fc_has_crt`), `ssl_c_verify` keeps its value, `ssl_c_err` is
    // this handshake's (0).
    let resumed = |addr: std::net::SocketAddr| -> Vec<String> {
        let mut out = Vec::new();
        for v in ["-tls1_2", "-tls1_3"] {
            let sess = d.join(format!("sess{v}"));
            let _ = std::fs::remove_file(&sess);
            for io in ["-sess_out", "-sess_in"] {
                let o = Command::new("sh")
                    .arg("-c")
                    .arg(format!(
                        "printf 'GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n' | openssl s_client -quiet {v} -connect {addr} -cert expired.pem -key expired.key {io} {} 2>/dev/null",
                        sess.display()
                    ))
                    .current_dir(&d)
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                let line = text.lines().find(|l| l.starts_with("used=")).unwrap_or("");
                out.push(line.split(" sdn=").next().unwrap_or("").to_string());
            }
        }
        out
    };
    let ign = FRONTENDS.iter().position(|(n, _)| *n == "ign").unwrap();
    let r = resumed(e.addrs[ign]);
    let first = "used=1 has=1 verify=10 err=10 caerr=0 depth=0";
    let again = "used=1 has=0 verify=10 err=0 caerr=0 depth=0";
    assert_eq!(r, [first, again, first, again]);

    // haproxy, on the same files: the same answers (or failures).
    let ports: Vec<String> = FRONTENDS
        .iter()
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let Some(_h) = haproxy_with("mtls", &config(&d, &ports)) else {
        return;
    };
    let hap_ign = ports[ign].parse().unwrap();
    wait_until("haproxy listening", || {
        std::net::TcpStream::connect(hap_ign).is_ok()
    });
    assert_eq!(resumed(hap_ign), r, "haproxy, resumed");
    for (i, (fe, _)) in FRONTENDS.iter().enumerate() {
        let addr = ports[i].parse().unwrap();
        wait_until("haproxy listening", || {
            std::net::TcpStream::connect(addr).is_ok()
        });
        for c in clients {
            let theirs = ask(&d, c, addr, *fe == "h2");
            let mine = get(fe, c);
            match (&mine, &theirs) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{fe} {c:?}"),
                (Err(_), Err(_)) => {}
                _ => panic!("{fe} {c:?}: ebb {mine:?}, haproxy {theirs:?}"),
            }
        }
    }
}

/// `ebb -c` reads the files: a bad CA file or CRL is `file:line`, as
/// HAProxy refuses them; so are `verify` without a CA and bad error IDs.
#[test]
fn config_checks() {
    let Some(d) = pki("mtls-c") else { return };
    std::fs::write(d.join("junk.pem"), "not a certificate\n").unwrap();
    let bind = |opts: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 1s\nfrontend f\n    bind 127.0.0.1:0 ssl crt srv-both.pem {opts}\n    http-request return status 200\n"
        )
    };
    for (opts, what) in [
        (
            "verify required ca-file junk.pem",
            "t.cfg:5: 'ca-file' : unable to load",
        ),
        (
            "verify required ca-file missing.pem",
            "t.cfg:5: 'ca-file' : unable to load",
        ),
        (
            "verify required ca-file ca.pem crl-file ca.pem",
            "t.cfg:5: 'crl-file' : unable to load",
        ),
        (
            "verify required",
            "t.cfg:5: verify is enabled but no CA file specified",
        ),
        (
            "verify sometimes ca-file ca.pem",
            "unknown verify method 'sometimes'",
        ),
        (
            "verify required ca-file ca.pem crt-ignore-err 0",
            "ID '0' out of range",
        ),
        (
            "verify required ca-file ca.pem ca-ignore-err 64",
            "ID '64' out of range",
        ),
    ] {
        assert_refused(&d, "t.cfg", &bind(opts), what, true);
    }
    // ca-base for a relative ca-file.
    let text = format!(
        "global\n    ca-base {}\n{}",
        d.display(),
        bind("verify optional ca-file ca.pem crl-file crl.pem")
    );
    let sub = d.join("elsewhere");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::copy(d.join("srv-both.pem"), sub.join("srv-both.pem")).unwrap();
    std::fs::write(sub.join("t.cfg"), &text).unwrap();
    let (rc, _, err) = run_ebb(&["-c", "-f", "t.cfg"], &sub);
    assert_eq!(rc, 0, "{err}");
}

/// The CA names a CertificateRequest carries: `ca-file`'s, none with
/// `no-ca-names`, never `ca-verify-file`'s (as haproxy, through
/// `openssl s_client`).
#[test]
fn ca_names_in_the_certificate_request() {
    let Some(d) = pki("mtls-names") else { return };
    let cfg = |binds: &[String]| {
        let opts = [
            "verify optional ca-file ca.pem",
            "verify optional ca-file ca.pem no-ca-names",
            "verify optional ca-verify-file ca.pem ca-file other.pem",
        ];
        let mut s = format!(
            "global\n    ca-base {0}\n    crt-base {0}\ndefaults\n    mode http\n    timeout client 5s\n",
            d.display()
        );
        for (i, (o, b)) in opts.iter().zip(binds).enumerate() {
            s += &format!(
                "frontend f{i}\n    bind {b} ssl crt srv-both.pem {o}\n    http-request return status 200\n"
            );
        }
        s
    };
    let names = |addr: std::net::SocketAddr| -> String {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo | openssl s_client -connect {addr} 2>/dev/null"
            ))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut lines = text
            .lines()
            .skip_while(|l| !l.starts_with("Acceptable client certificate CA names"));
        lines.next();
        lines.next().unwrap_or("").to_string()
    };
    let e = Ebb::start(&cfg(&vec!["BIND".to_string(); 3]));
    let ours: Vec<String> = e.addrs.iter().map(|a| names(*a)).collect();
    assert_eq!(
        ours,
        [
            "C = FR, O = Ebb Test, CN = Test Root CA",
            "",
            "CN = Other CA"
        ]
    );
    let ports: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let Some(_h) = haproxy_with("mtls-names", &cfg(&ports)) else {
        return;
    };
    let theirs: Vec<String> = ports
        .iter()
        .map(|p| {
            let a = p.parse().unwrap();
            wait_until("haproxy listening", || {
                std::net::TcpStream::connect(a).is_ok()
            });
            names(a)
        })
        .collect();
    assert_eq!(ours, theirs);
}
