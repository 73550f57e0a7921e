//! TLS policy and certificates through the real binary, checked with
//! `openssl s_client` (and HAProxy 2.6 side by side where it is
//! installed): protocol alerts, cipher order, curves, RSA + ECDSA for one
//! name, `crt DIR`, `crt-list`, OCSP stapling and its reload, `ebb -c`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `NAME.pem` (certificate + key) for `names`, self-signed, key `kind`
/// ("rsa" or "ec").
fn selfsigned(dir: &Path, file: &str, kind: &str, names: &[&str]) -> PathBuf {
    let san = names
        .iter()
        .map(|n| format!("DNS:{n}"))
        .collect::<Vec<_>>()
        .join(",");
    let key = format!("{file}.k");
    let crt = format!("{file}.c");
    let mut args = vec!["req", "-x509", "-nodes", "-days", "30", "-newkey"];
    match kind {
        "rsa" => args.push("rsa:2048"),
        _ => args.extend(["ec", "-pkeyopt", "ec_paramgen_curve:P-256"]),
    }
    let subj = format!("/CN={}", names[0]);
    let san = format!("subjectAltName={san}");
    args.extend([
        "-keyout", &key, "-out", &crt, "-subj", &subj, "-addext", &san,
    ]);
    openssl(dir, &args);
    let pem = dir.join(file);
    let text = std::fs::read_to_string(dir.join(&crt)).unwrap()
        + &std::fs::read_to_string(dir.join(&key)).unwrap();
    std::fs::write(&pem, text).unwrap();
    std::fs::remove_file(dir.join(&crt)).unwrap();
    std::fs::remove_file(dir.join(&key)).unwrap();
    pem
}

/// `openssl s_client` against `port` with `args`; its whole output.
fn s_client(port: u16, args: &[&str]) -> String {
    let o = Command::new("openssl")
        .arg("s_client")
        .arg("-connect")
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("s_client");
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// The alert number s_client reports, if any.
fn alert(out: &str) -> Option<u32> {
    let i = out.find("SSL alert number ")?;
    out[i + 17..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The negotiated cipher as s_client prints it.
fn cipher(out: &str) -> String {
    out.lines()
        .find_map(|l| l.split(", Cipher is ").nth(1))
        .unwrap_or("")
        .trim()
        .to_string()
}

fn tools() -> bool {
    if !have("openssl") {
        eprintln!("openssl missing: TLS policy tests skipped");
        return false;
    }
    true
}

/// HAProxy 2.6 on the same configuration text, when installed.
struct Haproxy(std::process::Child, u16);

impl Haproxy {
    fn start(dir: &Path, cfg: &str) -> Option<Haproxy> {
        if !have("haproxy") {
            return None;
        }
        let port = free_port();
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, cfg.replace("BIND", &format!("127.0.0.1:{port}"))).unwrap();
        let child = Command::new("haproxy")
            .args(["-db", "-f", path.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // Ready when it accepts (a loaded machine may take a while); none
        // when it exits instead (a configuration it refuses).
        let mut h = Haproxy(child, port);
        let mut exited = false;
        wait_until("haproxy listens", || {
            exited = matches!(h.0.try_wait(), Ok(Some(_)));
            exited || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        (!exited).then_some(h)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const DEFAULTS: &str =
    "defaults\n    mode http\n    timeout client 5s\n    timeout connect 2s\n    timeout server 5s\n";

#[test]
fn refusals_get_the_rfc_alert_and_a_log_line_with_the_sni() {
    if !tools() {
        return;
    }
    let d = scratch("alerts");
    let pem = selfsigned(&d, "a.pem", "ec", &["a.test"]);
    let cfg = format!(
        "{DEFAULTS}frontend fe\n    bind BIND ssl crt {} strict-sni\n    http-request return status 200\n",
        pem.display()
    );
    let e = Ebb::start(&cfg);
    let port = e.addr().port();
    let hap = Haproxy::start(&d, &cfg);
    let cases: [(&[&str], u32, &str); 4] = [
        (
            &["-tls1", "-servername", "a.test"],
            70,
            "the client offers TLSv1.0 at most",
        ),
        (
            &["-tls1_1", "-servername", "a.test"],
            70,
            "the client offers TLSv1.1 at most",
        ),
        (
            &["-servername", "nope.test"],
            112,
            "strict-sni: no certificate for the name asked for (alert unrecognized_name sent) (SNI \"nope.test\")",
        ),
        (&["-noservername"], 112, "(no SNI)"),
    ];
    for (args, want, log) in cases {
        let out = s_client(port, args);
        assert_eq!(alert(&out), Some(want), "ebb {args:?}: {out}");
        assert!(
            e.wait_stderr(log, Duration::from_secs(30)).is_some(),
            "no log line with {log:?}"
        );
        if let Some(h) = &hap {
            let out = s_client(h.1, args);
            assert_eq!(alert(&out), Some(want), "haproxy {args:?}: {out}");
        }
    }
    // A known name still works.
    let out = s_client(port, &["-servername", "a.test"]);
    assert_eq!(alert(&out), None, "{out}");
    assert!(out.contains("TLSv1.3"), "{out}");
}

#[test]
fn a_client_that_drops_an_unknown_name_is_logged() {
    if !tools() || !have("curl") {
        return;
    }
    let d = scratch("dropped");
    let pem = selfsigned(&d, "a.pem", "ec", &["a.test"]);
    let e = Ebb::start(&format!(
        "{DEFAULTS}frontend fe\n    bind BIND ssl crt {}\n    http-request return status 200\n",
        pem.display()
    ));
    let port = e.addr().port();
    // curl does not trust the default certificate it gets for this name.
    let st = Command::new("curl")
        .args([
            "-s",
            "--resolve",
            &format!("unknown.test:{port}:127.0.0.1"),
            &format!("https://unknown.test:{port}/"),
        ])
        .status()
        .unwrap();
    assert!(!st.success());
    let line = e
        .wait_stderr("(SNI \"unknown.test\")", Duration::from_secs(30))
        .expect("a log line naming the SNI");
    assert!(line.contains("SSL handshake failure"), "{line}");
}

#[test]
fn server_cipher_order_unless_prefer_client_ciphers_and_curves() {
    if !tools() {
        return;
    }
    let d = scratch("order");
    let pem = selfsigned(&d, "a.pem", "ec", &["a.test"]);
    let global = "global\n    ssl-default-bind-ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256\n    ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256\n    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets\n";
    let cfg = |extra: &str| {
        format!(
            "{global}{DEFAULTS}frontend fe\n    bind BIND ssl crt {} {extra}\n    http-request return status 200\n",
            pem.display()
        )
    };
    let client12 = [
        "-tls1_2",
        "-cipher",
        "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256",
    ];
    let client13 = [
        "-tls1_3",
        "-ciphersuites",
        "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256",
    ];
    let servers: Vec<(String, u16, Option<Haproxy>, Ebb)> = ["", "prefer-client-ciphers"]
        .iter()
        .map(|x| {
            let e = Ebb::start(&cfg(x));
            let h = Haproxy::start(&scratch("order-hap"), &cfg(x));
            (x.to_string(), e.addr().port(), h, e)
        })
        .collect();
    for (extra, port, hap, _e) in &servers {
        let (w12, w13) = if extra.is_empty() {
            ("ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_AES_128_GCM_SHA256")
        } else {
            ("ECDHE-ECDSA-AES256-GCM-SHA384", "TLS_AES_256_GCM_SHA384")
        };
        assert_eq!(cipher(&s_client(*port, &client12)), w12, "ebb {extra}");
        assert_eq!(cipher(&s_client(*port, &client13)), w13, "ebb {extra}");
        if let Some(h) = hap {
            assert_eq!(cipher(&s_client(h.1, &client12)), w12, "haproxy {extra}");
            assert_eq!(cipher(&s_client(h.1, &client13)), w13, "haproxy {extra}");
        }
        // A client listing ChaCha20 first gets it even in server order
        // (OpenSSL's SSL_OP_PRIORITIZE_CHACHA, set by HAProxy).
        let c12 = [
            "-tls1_2",
            "-cipher",
            "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES256-GCM-SHA384",
        ];
        let c13 = [
            "-tls1_3",
            "-ciphersuites",
            "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384",
        ];
        let mut ports = vec![("ebb", *port)];
        if let Some(h) = hap {
            ports.push(("haproxy", h.1));
        }
        for (who, p) in ports {
            assert_eq!(
                cipher(&s_client(p, &c12)),
                "ECDHE-ECDSA-CHACHA20-POLY1305",
                "{who} {extra}"
            );
            assert_eq!(
                cipher(&s_client(p, &c13)),
                "TLS_CHACHA20_POLY1305_SHA256",
                "{who} {extra}"
            );
        }
    }
    // curves, ciphers and ssl-max-ver on the bind line.
    let e = Ebb::start(&cfg(
        "curves P-384 ssl-max-ver TLSv1.2 ciphers ECDHE-ECDSA-AES256-GCM-SHA384",
    ));
    // A suite outside the list is not negotiated.
    let out = s_client(
        e.addr().port(),
        &["-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"],
    );
    assert_eq!(alert(&out), Some(40), "{out}");
    let out = s_client(e.addr().port(), &["-groups", "X25519:P-384"]);
    assert!(out.contains("Protocol  : TLSv1.2"), "{out}");
    assert!(out.contains("Server Temp Key: ECDH, secp384r1"), "{out}");
    let out = s_client(e.addr().port(), &["-tls1_3"]);
    assert_eq!(alert(&out), Some(70), "{out}");
}

#[test]
fn rsa_and_ecdsa_for_one_name_by_signature_schemes() {
    if !tools() {
        return;
    }
    let d = scratch("dual");
    let rsa = selfsigned(&d, "rsa.pem", "rsa", &["a.test"]);
    let ec = selfsigned(&d, "ec.pem", "ec", &["a.test"]);
    let e = Ebb::start(&format!(
        "{DEFAULTS}frontend fe\n    bind BIND ssl crt {} crt {}\n    http-request return status 200\n",
        rsa.display(),
        ec.display()
    ));
    let port = e.addr().port();
    let out = s_client(port, &["-servername", "a.test"]);
    assert!(out.contains("Server public key is 256 bit"), "{out}");
    for v in ["-tls1_2", "-tls1_3"] {
        let out = s_client(
            port,
            &[
                v,
                "-servername",
                "a.test",
                "-sigalgs",
                "RSA-PSS+SHA256:RSA+SHA256",
            ],
        );
        assert!(out.contains("Server public key is 2048 bit"), "{v}: {out}");
    }
    // TLS 1.2 with RSA suites only.
    let out = s_client(
        port,
        &[
            "-tls1_2",
            "-servername",
            "a.test",
            "-cipher",
            "ECDHE-RSA-AES128-GCM-SHA256",
        ],
    );
    assert_eq!(cipher(&out), "ECDHE-RSA-AES128-GCM-SHA256", "{out}");
    // The default (no SNI) has both too.
    let out = s_client(port, &["-noservername", "-sigalgs", "RSA-PSS+SHA256"]);
    assert!(out.contains("Server public key is 2048 bit"), "{out}");
}

/// A CA, a leaf it signed for `name`, and an OCSP response for the leaf.
fn ca_leaf_ocsp(d: &Path, name: &str) -> (PathBuf, PathBuf) {
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-nodes",
            "-days",
            "30",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=test ca",
        ],
    );
    openssl(
        d,
        &[
            "req",
            "-new",
            "-nodes",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
            "-subj",
            &format!("/CN={name}"),
        ],
    );
    std::fs::write(d.join("ext"), format!("subjectAltName=DNS:{name}\n")).unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            "ext",
            "-out",
            "leaf.crt",
        ],
    );
    let serial = {
        let o = Command::new("openssl")
            .args(["x509", "-in", "leaf.crt", "-noout", "-serial"])
            .current_dir(d)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .trim_start_matches("serial=")
            .to_string()
    };
    std::fs::write(
        d.join("index.txt"),
        format!("V\t301231235959Z\t\t{serial}\tunknown\t/CN={name}\n"),
    )
    .unwrap();
    openssl(
        d,
        &[
            "ocsp",
            "-issuer",
            "ca.crt",
            "-cert",
            "leaf.crt",
            "-no_nonce",
            "-reqout",
            "req.der",
        ],
    );
    openssl(
        d,
        &[
            "ocsp",
            "-index",
            "index.txt",
            "-rsigner",
            "ca.crt",
            "-rkey",
            "ca.key",
            "-CA",
            "ca.crt",
            "-reqin",
            "req.der",
            "-respout",
            "resp.der",
            "-ndays",
            "1",
        ],
    );
    let pem = d.join("leaf.pem");
    let text = std::fs::read_to_string(d.join("leaf.crt")).unwrap()
        + &std::fs::read_to_string(d.join("leaf.key")).unwrap();
    std::fs::write(&pem, text).unwrap();
    (pem, d.join("resp.der"))
}

#[test]
fn ocsp_response_beside_the_certificate_is_stapled_and_reloaded() {
    if !tools() {
        return;
    }
    let d = scratch("ocsp");
    let (pem, resp) = ca_leaf_ocsp(&d, "a.test");
    let e = Ebb::start(&format!(
        "{DEFAULTS}frontend fe\n    bind BIND ssl crt {}\n    http-request return status 200\n",
        pem.display()
    ));
    let port = e.addr().port();
    let out = s_client(port, &["-servername", "a.test", "-status"]);
    assert!(out.contains("OCSP response: no response sent"), "{out}");
    // The file appears; SIGHUP reloads the certificate with it.
    std::fs::copy(&resp, d.join("leaf.pem.ocsp")).unwrap();
    e.signal("HUP");
    assert!(e
        .wait_stderr("SIGHUP: configuration reloaded", Duration::from_secs(10))
        .is_some());
    let out = s_client(port, &["-servername", "a.test", "-status"]);
    assert!(out.contains("OCSP Response Status: successful"), "{out}");
    assert!(out.contains("Cert Status: good"), "{out}");
    // A file that is not an OCSP response is a start-up error.
    std::fs::write(d.join("leaf.pem.ocsp"), b"junk").unwrap();
    std::fs::write(
        d.join("c.cfg"),
        format!(
            "{DEFAULTS}frontend fe\n    bind 127.0.0.1:0 ssl crt {}\n    http-request return status 200\n",
            pem.display()
        ),
    )
    .unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", "c.cfg"], &d);
    assert_eq!(code, 1);
    assert!(
        err.contains("c.cfg:7:") && err.contains("not a DER OCSP response"),
        "{err}"
    );
}

/// `set ssl cert FILE.ocsp` (a base64 OCSP response) then `commit ssl
/// cert FILE` staples it without a reload; `show ssl cert FILE` prints
/// its CertID as "OCSP Response Key", as haproxy 2.6 does.
#[test]
fn ocsp_response_set_on_the_cli_is_stapled() {
    if !tools() {
        return;
    }
    let d = scratch("ocsp-cli");
    let (leaf, resp) = ca_leaf_ocsp(&d, "a.test");
    // The chain in the file: haproxy needs the issuer for the response's
    // CertID (ebb staples the response as it is).
    let pem = d.join("chain.pem");
    let text = std::fs::read_to_string(&leaf).unwrap()
        + &std::fs::read_to_string(d.join("ca.crt")).unwrap();
    std::fs::write(&pem, text).unwrap();
    let rest = |bind: &str| {
        format!(
            "{DEFAULTS}frontend fe\n    bind {bind} ssl crt {}\n    http-request return status 200\n",
            pem.display()
        )
    };
    let sock = d.join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{}",
        sock.display(),
        rest("BIND")
    ));
    let port = e.addr().port();
    let out = s_client(port, &["-servername", "a.test", "-status"]);
    assert!(out.contains("OCSP response: no response sent"), "{out}");
    let b64 = {
        let o = Command::new("openssl")
            .args(["base64", "-A", "-in"])
            .arg(&resp)
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap()
    };
    let name = pem.display().to_string();
    let steps = [
        format!("set ssl cert {name}.ocsp <<\nnot base64 !\n"),
        format!("set ssl cert {name}.ocsp <<\n{b64}\n"),
        format!("show ssl cert *{name}"),
        format!("commit ssl cert {name}"),
        format!("show ssl cert {name}"),
    ];
    let ours: Vec<String> = steps.iter().map(|c| cli_cmd(&sock, c)).collect();
    assert_eq!(
        ours[1],
        format!("Transaction created for certificate {name}!\n\n")
    );
    assert!(ours[4].contains("\nOCSP Response Key: 30"), "{}", ours[4]);
    let out = s_client(port, &["-servername", "a.test", "-status"]);
    assert!(out.contains("OCSP Response Status: successful"), "{out}");
    assert!(out.contains("Cert Status: good"), "{out}");
    let hport = free_port();
    if let Some(h) = haproxy_with("ocsp-cli-h", &rest(&format!("127.0.0.1:{hport}"))) {
        // The first step's text differs: haproxy runs its base64 error
        // into the next line ("...formatCan't load the payload").
        for (c, o) in steps.iter().zip(&ours).skip(1) {
            assert_eq!(*o, cli_cmd(&h.sock, c), "{c}");
        }
    }
    assert!(ours[0].starts_with("Error reading OCSP response in base64 format"));
}

#[test]
fn crt_dir_crt_list_bases_and_checks() {
    if !tools() {
        return;
    }
    let d = scratch("crtdir");
    let certs = d.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    selfsigned(&certs, "a.pem", "ec", &["a.test"]);
    selfsigned(&certs, "b.pem", "ec", &["b.test"]);
    // Split certificate and `<crt>.key`, a dot-file and reserved names:
    // the last three are skipped by `crt DIR`.
    let c = selfsigned(&certs, "c.pem", "ec", &["c.test"]);
    let text = std::fs::read_to_string(&c).unwrap();
    let cut = text.find("-----BEGIN PRIVATE KEY").unwrap();
    std::fs::write(&c, &text[..cut]).unwrap();
    std::fs::write(certs.join("c.pem.key"), &text[cut..]).unwrap();
    std::fs::write(certs.join(".hidden.pem"), "junk").unwrap();
    std::fs::write(certs.join("x.issuer"), "junk").unwrap();
    let fp = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("subject="))
            .unwrap_or("")
            .to_string()
    };
    let e = Ebb::start(&format!(
        "global\n    crt-base {}\n{DEFAULTS}frontend fe\n    bind BIND ssl crt certs/\n    http-request return status 200\n",
        d.display()
    ));
    let port = e.addr().port();
    for n in ["a.test", "b.test", "c.test"] {
        let out = s_client(port, &["-servername", n]);
        assert!(fp(&out).contains(n), "{n}: {out}");
    }
    // The first file in name order is the default.
    assert!(fp(&s_client(port, &["-servername", "zzz.test"])).contains("a.test"));
    // crt-list: SNI filters replace the certificate's names.
    std::fs::write(
        d.join("list.txt"),
        "# default first\ncerts/b.pem !*\n\ncerts/a.pem *.w.test !no.w.test\ncerts/c.pem [ssl-min-ver TLSv1.3 ciphersuites TLS_CHACHA20_POLY1305_SHA256 alpn http/1.0]\n",
    )
    .unwrap();
    let e = Ebb::start(&format!(
        "global\n    crt-base {}\n{DEFAULTS}frontend fe\n    bind BIND ssl crt-list list.txt\n    http-request return status 200\n",
        d.display()
    ));
    let port = e.addr().port();
    for (sni, want) in [
        ("x.w.test", "a.test"),
        ("no.w.test", "b.test"),
        ("a.test", "b.test"),
        ("b.test", "b.test"),
        ("c.test", "c.test"),
    ] {
        assert!(
            fp(&s_client(port, &["-servername", sni])).contains(want),
            "{sni}"
        );
    }
    // The `[options]` of c.pem's line apply to handshakes that get it.
    let out = s_client(
        port,
        &["-servername", "c.test", "-alpn", "http/1.0,http/1.1"],
    );
    assert_eq!(cipher(&out), "TLS_CHACHA20_POLY1305_SHA256", "{out}");
    assert!(out.contains("ALPN protocol: http/1.0"), "{out}");
    let out = s_client(port, &["-servername", "c.test", "-tls1_2"]);
    assert_eq!(alert(&out), Some(70), "{out}");
    let out = s_client(
        port,
        &["-servername", "b.test", "-tls1_2", "-alpn", "http/1.0"],
    );
    assert_eq!(alert(&out), None, "{out}");
    assert!(!out.contains("ALPN protocol: http/1.0"), "{out}");
    // ebb -c: every certificate is loaded, errors name the line.
    let check = |cfg: &str| {
        std::fs::write(
            d.join("t.cfg"),
            format!("{DEFAULTS}frontend fe\n{cfg}\n    http-request return status 200\n"),
        )
        .unwrap();
        run_ebb(&["-c", "-f", "t.cfg"], &d)
    };
    let (code, _, err) = check("    bind 127.0.0.1:0 ssl crt /nonexistent.pem");
    assert_eq!(code, 1);
    assert!(
        err.contains("t.cfg:7: unable to stat SSL certificate from file '/nonexistent.pem'"),
        "{err}"
    );
    // A crt-list line may offer h2 (served by mux::h2 once chosen).
    std::fs::write(
        d.join("opts.txt"),
        "certs/a.pem [alpn h2,http/1.1] a.test\n",
    )
    .unwrap();
    let (code, _, err) = check(&format!(
        "    bind 127.0.0.1:0 ssl crt-list {}",
        d.join("opts.txt").display()
    ));
    assert_eq!(code, 0, "{err}");
    // `verify` there needs a CA (as on a bind line); `npn` is refused.
    std::fs::write(d.join("opts.txt"), "certs/a.pem [verify required] a.test\n").unwrap();
    let (code, _, err) = check(&format!(
        "    bind 127.0.0.1:0 ssl crt-list {}",
        d.join("opts.txt").display()
    ));
    assert_eq!(code, 1);
    assert!(
        err.contains("line 1: verify is enabled but no CA file specified"),
        "{err}"
    );
    std::fs::write(d.join("opts.txt"), "certs/a.pem [npn h2] a.test\n").unwrap();
    let (code, _, err) = check(&format!(
        "    bind 127.0.0.1:0 ssl crt-list {}",
        d.join("opts.txt").display()
    ));
    assert_eq!(code, 1);
    assert!(
        err.contains("line 1: per-certificate option 'npn' is not supported"),
        "{err}"
    );
    let (code, _, err) = check(&format!(
        "    bind 127.0.0.1:0 ssl crt {} ciphers DHE-RSA-AES128-GCM-SHA256",
        certs.join("a.pem").display()
    ));
    assert_eq!(code, 1);
    assert!(
        err.contains("t.cfg:7: no TLSv1.2 cipher that ebb implements"),
        "{err}"
    );
    let (code, out, _) = check(&format!("    bind 127.0.0.1:0 ssl crt {}", certs.display()));
    assert_eq!(code, 0, "{out}");
}

/// Debian's stock global TLS lines pass `ebb -c` and serve.
#[test]
fn debian_stock_tls_globals_are_accepted() {
    if !tools() {
        return;
    }
    let d = scratch("stock");
    let pem = selfsigned(&d, "site.pem", "ec", &["a.test"]);
    let e = Ebb::start(&format!(
        "global\n    ca-base /etc/ssl/certs\n    crt-base {}\n    ssl-default-bind-ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384\n    ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256\n    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets\n{DEFAULTS}frontend fe\n    bind BIND ssl crt {}\n    http-request return status 200\n",
        d.display(),
        pem.file_name().unwrap().to_str().unwrap()
    ));
    let out = s_client(e.addr().port(), &["-tls1_2", "-servername", "a.test"]);
    assert_eq!(cipher(&out), "ECDHE-ECDSA-AES128-GCM-SHA256", "{out}");
}

/// `ssl-default-server-*` and the `server` line's own TLS options, seen
/// by an `openssl s_server -www` origin (its page shows what was agreed).
#[test]
fn server_side_tls_policy() {
    if !tools() {
        return;
    }
    let d = scratch("srvpol");
    let pem = selfsigned(&d, "o.pem", "ec", &["origin.test"]);
    // One single-threaded s_server per case, ready when it says ACCEPT.
    let page = |global: &str, opts: &str| {
        use std::io::BufRead;
        // A free port (below the ephemeral range) may still be taken by a
        // concurrent test before s_server binds it: try a few.
        let (port, mut origin) = (0..5)
            .find_map(|_| {
                let port = free_port();
                let mut origin = Command::new("openssl")
                    .args(["s_server", "-accept", &port.to_string(), "-cert"])
                    .arg(&pem)
                    .arg("-www")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let out = origin.stdout.take().unwrap();
                let ready = std::io::BufReader::new(out)
                    .lines()
                    .map_while(Result::ok)
                    .any(|l| l.contains("ACCEPT"));
                if ready {
                    Some((port, origin))
                } else {
                    let _ = origin.kill();
                    let _ = origin.wait();
                    None
                }
            })
            .expect("s_server did not start");
        // s_server -www answers without a length and ends with close_notify
        // in the same read as its last bytes: the answer must end there,
        // not at `timeout server` (an hour here, so the client's read
        // timeout fails the test if ebb waits for an edge that never comes).
        let e = Ebb::start(&format!(
            "global\n{global}defaults\n    mode http\n    timeout client 1h\n    timeout connect 5s\n    timeout server 1h\nfrontend fe\n    bind BIND\n    default_backend be\nbackend be\n    server o 127.0.0.1:{port} ssl verify none {opts}\n"
        ));
        // Read to the end of the stream: an answer that ends only at a
        // timeout makes `read_to_end` fail instead.
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(e.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut all = Vec::new();
        let done = c.read_to_end(&mut all);
        let _ = origin.kill();
        let _ = origin.wait();
        done.expect("the answer ends with the origin's close_notify");
        let text = String::from_utf8_lossy(&all).into_owned();
        // s_server answers in HTTP/1.0: its version goes on (HAProxy's).
        assert!(text.starts_with("HTTP/1.0 200"), "{text}");
        text
    };
    let p = page(
        "    ssl-default-server-ciphers ECDHE-ECDSA-AES256-GCM-SHA384\n    ssl-default-server-options ssl-max-ver TLSv1.2\n",
        "",
    );
    assert!(
        p.contains("TLSv1.2") && p.contains("ECDHE-ECDSA-AES256-GCM-SHA384"),
        "{p}"
    );
    // The line's own settings win over the defaults.
    let p = page(
        "    ssl-default-server-options ssl-max-ver TLSv1.2\n",
        "ciphers ECDHE-ECDSA-CHACHA20-POLY1305",
    );
    assert!(p.contains("ECDHE-ECDSA-CHACHA20-POLY1305"), "{p}");
    let p = page(
        "",
        "ciphersuites TLS_AES_256_GCM_SHA384 ssl-min-ver TLSv1.3",
    );
    assert!(
        p.contains("TLSv1.3") && p.contains("TLS_AES_256_GCM_SHA384"),
        "{p}"
    );
}

/// A client that sends its hello and then nothing: the handshake timeout's
/// log line names the SNI it asked for.
#[test]
fn a_stalled_handshake_is_logged_with_its_sni() {
    use std::io::Write;
    let d = scratch("stall");
    let pem = selfsigned_rcgen(&d, "slow.test");
    let e = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout client 5s\n    timeout http-request 300ms\nfrontend fe\n    bind BIND ssl crt {}\n    http-request return status 200\n",
        pem.display()
    ));
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("slow.test").unwrap();
    let mut c = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut hello).unwrap();
    }
    let mut s = std::net::TcpStream::connect(e.addr()).unwrap();
    s.write_all(&hello).unwrap();
    let line = e
        .wait_stderr("SSL handshake timeout", Duration::from_secs(10))
        .expect("a timeout log line");
    assert!(line.ends_with("(SNI \"slow.test\")"), "{line}");
    drop(s);
}

/// A combined PEM (certificate + key) for `name`, made with rcgen.
fn selfsigned_rcgen(dir: &Path, name: &str) -> PathBuf {
    let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    let p = dir.join(format!("{name}.pem"));
    std::fs::write(
        &p,
        format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
    )
    .unwrap();
    p
}
