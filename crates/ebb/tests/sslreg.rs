//! What HAProxy's TLS reg-tests (`reg-tests/ssl/`) need of ebb, through
//! the real binary: servers on UNIX socket paths (`unix@PATH` or a bare
//! `/PATH`, with and without `ssl`), `tune.ssl.capture-buffer-size`, and
//! the answers of `-cc` about the TLS library. Side by side with haproxy
//! when it is installed.

mod common;

use std::path::Path;

use common::*;

/// A self-signed certificate and its key in one file, for `crt`.
fn cert(dir: &Path) -> std::path::PathBuf {
    let ck = rcgen::generate_simple_self_signed(vec!["inner.test".to_string()]).unwrap();
    let p = dir.join("inner.pem");
    std::fs::write(
        &p,
        format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
    )
    .unwrap();
    p
}

/// Two proxies whose servers are UNIX sockets bound by two inner ones:
/// `/PATH` in clear, `unix@PATH` with TLS and an SNI. The inner proxies
/// answer with what they saw (`plain`, the SNI).
fn unix_servers_cfg(d: &Path, bind: &str, bind2: &str) -> String {
    let crt = cert(d);
    format!(
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\
         listen plain\n    bind {bind}\n    server s {d}/plain.sock\n\
         listen tls\n    bind {bind2}\n    server s unix@{d}/tls.sock ssl verify none sni str(inner.test)\n\
         listen inner_plain\n    bind {d}/plain.sock\n    http-request return status 200 content-type text/plain string plain\n\
         listen inner_tls\n    bind {d}/tls.sock ssl crt {crt}\n    http-request return status 200 content-type text/plain lf-string \"sni=%[ssl_fc_sni]\"\n",
        d = d.display(),
        crt = crt.display(),
    )
}

/// HAProxy beside ebb on `cfg` with its two listeners on loopback ports
/// (a scratch directory of its own, made ready by `prep`): the running
/// haproxy and the two addresses, once it listens; `None` without haproxy.
fn haproxy_pair(
    name: &str,
    prep: impl Fn(&Path) -> bool,
    cfg: impl Fn(&Path, &str, &str) -> String,
) -> Option<(Hap, std::net::SocketAddr, std::net::SocketAddr)> {
    if !have("haproxy") {
        return None;
    }
    let hd = scratch(&format!("{name}-h"));
    assert!(prep(&hd));
    let (p1, p2) = (free_port(), free_port());
    let text = cfg(&hd, &format!("127.0.0.1:{p1}"), &format!("127.0.0.1:{p2}"));
    let h = haproxy_with(&format!("{name}-hap"), &text).expect("haproxy starts");
    let a = |p: u16| std::net::SocketAddr::from(([127, 0, 0, 1], p));
    wait_until("haproxy listens", || {
        std::net::TcpStream::connect(a(p2)).is_ok()
    });
    Some((h, a(p1), a(p2)))
}

/// `probe` run on ebb and, when installed, on haproxy, each on `cfg` in
/// a scratch directory of its own made ready by `prep` (`None`: `prep`
/// says the tools it needs are missing); ebb's directory comes back.
fn both_ways<T>(
    name: &str,
    prep: fn(&Path) -> bool,
    cfg: fn(&Path, &str, &str) -> String,
    probe: fn(std::net::SocketAddr, std::net::SocketAddr) -> T,
) -> Option<(T, Option<T>, std::path::PathBuf)> {
    let d = scratch(name);
    if !prep(&d) {
        return None;
    }
    let e = Ebb::start(&cfg(&d, "BIND", "BIND"));
    let ours = probe(e.addrs[0], e.addrs[1]);
    let theirs = haproxy_pair(name, prep, cfg).map(|(_h, a1, a2)| probe(a1, a2));
    Some((ours, theirs, d))
}

fn bodies(a: std::net::SocketAddr, b: std::net::SocketAddr) -> (String, String) {
    (get(a, "/").text(), get(b, "/").text())
}

#[test]
fn servers_on_unix_socket_paths_in_clear_and_tls() {
    let d = scratch("sslreg-unix");
    let e = Ebb::start(&unix_servers_cfg(&d, "BIND", "BIND"));
    let ours = bodies(e.addrs[0], e.addrs[1]);
    assert_eq!(ours, ("plain".to_string(), "sni=inner.test".to_string()));
    if let Some((_h, a1, a2)) = haproxy_pair("sslreg-unix", |_| true, unix_servers_cfg) {
        assert_eq!(bodies(a1, a2), ours, "haproxy differs");
    }
}

#[test]
fn unix_socket_servers_refuse_what_ebb_cannot_do_on_them() {
    let d = scratch("sslreg-unix-refused");
    let head = "defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\nbackend b\n";
    for (line, what) in [
        (
            "server s /tmp/x.sock check",
            "'check' and 'resolvers' on a UNIX socket server",
        ),
        (
            "server s unix@/tmp/x.sock check",
            "'check' and 'resolvers' on a UNIX socket server",
        ),
        ("server s unix@", "a UNIX socket path of 1 to 107 bytes"),
        (
            "server s abns@x check",
            "'check' and 'resolvers' on an abns@ server",
        ),
    ] {
        assert_refused(&d, "u.cfg", &format!("{head}    {line}\n"), what, false);
    }
    // Accepted: a path, `unix@PATH`, with TLS options.
    std::fs::write(
        d.join("ok.cfg"),
        format!("{head}    server s /tmp/x.sock ssl verify none\n    server t unix@/tmp/y.sock\n"),
    )
    .unwrap();
    let (rc, _, err) = run_ebb(&["-c", "-f", "ok.cfg"], &d);
    assert_eq!(rc, 0, "{err}");
}

#[test]
fn capture_buffer_size_is_taken_once_and_its_fetches_are_refused() {
    let d = scratch("sslreg-capture");
    // (A listener: without one `haproxy -c` says the file will not start;
    // `-c` binds nothing.)
    let tail = "defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n\
                frontend f\n    bind 127.0.0.1:8443\n    default_backend b\nbackend b\n    server s 127.0.0.1:1\n";
    std::fs::write(
        d.join("ok.cfg"),
        format!("global\n    tune.ssl.capture-buffer-size 1\n{tail}"),
    )
    .unwrap();
    let (rc, _, err) = run_ebb(&["-c", "-f", "ok.cfg"], &d);
    assert_eq!(rc, 0, "{err}");
    if let Some(refused) = haproxy_refuses(&d.join("ok.cfg")) {
        assert!(!refused, "haproxy refused tune.ssl.capture-buffer-size 1");
    }
    assert_refused(
        &d,
        "twice.cfg",
        &format!(
            "global\n    tune.ssl.capture-buffer-size 1\n    tune.ssl.capture-buffer-size 2\n{tail}"
        ),
        "'tune.ssl.capture-buffer-size' is already configured.",
        true,
    );
    assert_refused(
        &d,
        "neg.cfg",
        &format!("global\n    tune.ssl.capture-buffer-size -1\n{tail}"),
        "tune.ssl.capture-buffer-size",
        true,
    );
    for f in [
        "ssl_fc_cipherlist_bin",
        "ssl_fc_cipherlist_hex",
        "ssl_fc_cipherlist_str",
        "ssl_fc_cipherlist_xxh",
        "ssl_fc_extlist_bin",
        "ssl_fc_eclist_bin",
        "ssl_fc_ecformats_bin",
    ] {
        assert_refused(
            &d,
            "fetch.cfg",
            &format!(
                "global\n    tune.ssl.capture-buffer-size 64\n{tail}    http-request set-header x %[{f}]\n"
            ),
            &format!("sample fetch '{f}' is not supported by ebb"),
            false,
        );
    }
}

#[test]
fn check_condition_answers_about_the_tls_library() {
    let d = scratch("sslreg-cc");
    for (cond, want) in [
        // ebb has TLS: HAProxy's name for that feature.
        ("feature(OPENSSL)", 0),
        ("feature(LUA)", 1),
        // Its library is rustls, never OpenSSL.
        ("ssllib_name_startswith(OpenSSL)", 1),
        ("ssllib_name_startswith(rustls)", 0),
        // No OpenSSL version to compare with: an error, as in a HAProxy
        // built without it...
        ("openssl_version_atleast(1.1.1)", 2),
        // ...that a false operand before it spares (HAProxy stops there).
        (
            "feature(OPENSSL) && ssllib_name_startswith(OpenSSL) && openssl_version_atleast(1.1.1)",
            1,
        ),
    ] {
        let (rc, out, err) = run_ebb(&["-cc", cond], &d);
        assert_eq!(rc, want, "{cond}: {out}{err}");
    }
}

/// A CA, a client certificate it signed (X.509 v3, clientAuth) with its
/// key in the same file, and a server certificate: made with `openssl`.
fn client_pki(d: &Path) -> bool {
    if !have("openssl") {
        eprintln!("openssl missing: server 'crt' test skipped");
        return false;
    }
    let script = "set -e
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj '/CN=Test CA' 2>/dev/null
openssl req -new -newkey rsa:2048 -nodes -keyout cl.key -out cl.csr -subj '/O=Ebb/CN=client one' 2>/dev/null
printf 'basicConstraints=CA:FALSE\\nkeyUsage=digitalSignature\\nextendedKeyUsage=clientAuth\\n' > ext.cnf
openssl x509 -req -in cl.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cl.pem -days 365 -extfile ext.cnf 2>/dev/null
cat cl.pem cl.key > client.pem
";
    openssl_script(d, script)
}

/// Two proxies to one inner TLS proxy that requires a client certificate
/// from `ca.pem` and answers with its CN: one server line with `crt`, one
/// without. `crt-base` makes the relative `crt` name work.
fn server_crt_cfg(d: &Path, bind: &str, bind2: &str) -> String {
    let srv = cert(d);
    format!(
        "global\n    crt-base {d}\n\
         defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\
         listen with_crt\n    bind {bind}\n    server s {d}/in.sock ssl verify none crt client.pem\n\
         listen without\n    bind {bind2}\n    server s {d}/in.sock ssl verify none\n\
         listen inner\n    bind {d}/in.sock ssl crt {srv} ca-file {d}/ca.pem verify required\n    http-request return status 200 content-type text/plain lf-string \"cn=%[ssl_c_s_dn(cn)] verify=%[ssl_c_verify]\"\n",
        d = d.display(),
        srv = srv.display(),
    )
}

fn statuses(a: std::net::SocketAddr, b: std::net::SocketAddr) -> (String, u16) {
    let r = get(a, "/");
    (format!("{} {}", r.status, r.text()), get(b, "/").status)
}

#[test]
fn server_crt_is_sent_to_a_server_that_asks() {
    let d = scratch("sslreg-crt");
    if !client_pki(&d) {
        return;
    }
    let e = Ebb::start(&server_crt_cfg(&d, "BIND", "BIND"));
    let ours = statuses(e.addrs[0], e.addrs[1]);
    assert_eq!(ours, ("200 cn=client one verify=0".to_string(), 502));
    if let Some((_h, a1, a2)) = haproxy_pair("sslreg-crt", client_pki, server_crt_cfg) {
        let theirs = statuses(a1, a2);
        assert_eq!(theirs.0, ours.0, "haproxy differs");
        // Known difference: the server refuses the missing certificate
        // after the client's side of the TLS 1.3 handshake ended (its
        // Finished sent), when ebb's connect is done: the request fails
        // (502). HAProxy's answer depends on when the server's alert comes:
        // read before its stream took the connection as established, a
        // failed connect (503, the usual case on an idle machine); after,
        // a failed request as ebb's (502: 3 runs in 10 with two CPU
        // burners beside).
        assert!(matches!(theirs.1, 502 | 503), "haproxy: {}", theirs.1);
    }
    // A missing file is refused at start with the line.
    let bad = "defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n\
               backend b\n    server s 127.0.0.1:1 ssl verify none crt /nonexistent/client.pem\n";
    assert_refused(
        &d,
        "bad.cfg",
        bad,
        "unable to load certificate from file '/nonexistent/client.pem'",
        false,
    );
}

#[test]
fn add_server_takes_a_unix_socket_path_with_ssl_and_crt() {
    // The reg-test ssl/dynamic_server_ssl's `add server B/S /PATH ssl
    // verify none crt FILE`, towards the inner proxy of the `crt` test.
    let d = scratch("sslreg-add");
    if !client_pki(&d) {
        return;
    }
    let inner = server_crt_cfg(&d, "BIND", "BIND");
    let (e, sock) = ebb_with_admin("sslreg-add-cli", |s, bind| {
        format!(
            "global\n    stats socket {} level admin\n{}\
             frontend fe\n    bind {bind}\n    default_backend test\n\
             backend test\n",
            s.display(),
            inner.replace("global\n", "")
        )
    });
    let fe = e.addrs[2];
    let answer = cli_cmd(
        &sock,
        &format!(
            "add server test/s1 {}/in.sock ssl verify none crt {}/client.pem",
            d.display(),
            d.display()
        ),
    );
    assert!(answer.contains("New server registered."), "{answer}");
    // Refused there as on a server line.
    let answer = cli_cmd(
        &sock,
        &format!("add server test/s2 {}/in.sock check", d.display()),
    );
    assert!(
        answer.contains("on a UNIX socket server are not supported"),
        "{answer}"
    );
    cli_cmd(&sock, "enable server test/s1");
    let r = get(fe, "/");
    assert_eq!(
        (r.status, r.text()),
        (200, "cn=client one verify=0".to_string())
    );
    // `show stat` says `unix` for its address, as HAProxy does.
    assert_eq!(stat_row(&sock, "test", "s1")["addr"], "unix");
}

/// Runs an `openssl` shell script in `d` (it must succeed): true.
fn openssl_script(d: &Path, script: &str) -> bool {
    let ok = std::process::Command::new("sh")
        .args(["-c", script])
        .current_dir(d)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "openssl failed");
    true
}

/// A CA that signed two server certificates for `inner.test`, and its CRL
/// revoking the second, made with `openssl ca`.
fn revoking_pki(d: &Path) -> bool {
    if !have("openssl") {
        eprintln!("openssl missing: server 'crl-file' test skipped");
        return false;
    }
    let script = r#"set -e
printf '%s\n' '[ca]' 'default_ca=c' '[c]' 'dir=.' 'database=index.txt' 'new_certs_dir=.' \
  'serial=serial' 'crlnumber=crlnumber' 'default_md=sha256' 'policy=p' 'default_crl_days=30' \
  '[p]' 'commonName=supplied' '[srv]' 'basicConstraints=CA:FALSE' \
  'subjectAltName=DNS:inner.test' 'extendedKeyUsage=serverAuth' > ca.cnf
: > index.txt; echo 1000 > serial; echo 1000 > crlnumber
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj '/CN=Test CA' -addext 'keyUsage=keyCertSign,cRLSign' 2>/dev/null
mk() {
  openssl req -new -newkey rsa:2048 -nodes -keyout $1.key -out $1.csr -subj "/CN=$1" 2>/dev/null
  openssl ca -batch -config ca.cnf -extensions srv -cert ca.pem -keyfile ca.key -in $1.csr -out $1.crt -days 365 -notext 2>/dev/null
  cat $1.crt $1.key > $1.pem
}
mk good; mk revoked
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -revoke revoked.crt 2>/dev/null
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -gencrl -out crl.pem 2>/dev/null
"#;
    openssl_script(d, script)
}

/// Three proxies verifying their server's certificate: a good one and a
/// revoked one with `crl-file`, the revoked one without.
fn server_crl_cfg(d: &Path, binds: [&str; 3]) -> String {
    let verify = format!(
        "ssl verify required ca-file {d}/ca.pem sni str(inner.test)",
        d = d.display()
    );
    format!(
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\
         listen good\n    bind {b0}\n    server s {d}/good.sock {verify} crl-file {d}/crl.pem\n\
         listen revoked\n    bind {b1}\n    server s {d}/revoked.sock {verify} crl-file {d}/crl.pem\n\
         listen no_crl\n    bind {b2}\n    server s {d}/revoked.sock {verify}\n\
         listen inner_good\n    bind {d}/good.sock ssl crt {d}/good.pem\n    http-request return status 200\n\
         listen inner_revoked\n    bind {d}/revoked.sock ssl crt {d}/revoked.pem\n    http-request return status 200\n",
        d = d.display(),
        b0 = binds[0],
        b1 = binds[1],
        b2 = binds[2],
    )
}

#[test]
fn server_crl_file_refuses_a_revoked_server_certificate() {
    let d = scratch("sslreg-crl");
    if !revoking_pki(&d) {
        return;
    }
    let e = Ebb::start(&server_crl_cfg(&d, ["BIND"; 3]));
    // A failed verification fails the connect (the TLS handshake is part
    // of it, as in HAProxy): retried, then 503.
    let codes = |a: &[std::net::SocketAddr]| {
        a.iter()
            .map(|a| get(*a, "/").status.to_string())
            .collect::<Vec<_>>()
    };
    let ours = codes(&e.addrs[..3]);
    assert_eq!(ours, ["200", "503", "200"]);
    if have("haproxy") {
        let hd = scratch("sslreg-crl-h");
        assert!(revoking_pki(&hd));
        let ports = [free_port(), free_port(), free_port()];
        let binds = ports.map(|p| format!("127.0.0.1:{p}"));
        let cfg = server_crl_cfg(&hd, [&binds[0], &binds[1], &binds[2]]);
        let _h = haproxy_with("sslreg-crl-hap", &cfg).expect("haproxy starts");
        let addrs = ports.map(|p| std::net::SocketAddr::from(([127, 0, 0, 1], p)));
        wait_until("haproxy listens", || {
            std::net::TcpStream::connect(addrs[2]).is_ok()
        });
        assert_eq!(codes(&addrs), ours, "haproxy differs");
    }
    // A file that is no CRL is refused at start, with its line.
    std::fs::write(d.join("nocrl.pem"), "nothing\n").unwrap();
    let bad = format!(
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n\
         backend b\n    server s 127.0.0.1:1 ssl verify required ca-file {d}/ca.pem crl-file {d}/nocrl.pem\n",
        d = d.display()
    );
    assert_refused(&d, "bad.cfg", &bad, "'crl-file' : unable to load", true);
}

/// Two server certificates made with `openssl`: `a.pem` (RSA, CN and name
/// a.test, serial 0x0A) and `b.pem` (ECDSA P-256, CN b.test, signed by a
/// CA `ca.pem`, whose certificate follows b's in the file).
fn two_names_pki(d: &Path) -> bool {
    if !have("openssl") {
        eprintln!("openssl missing: ssl_f_*/ssl_s_* test skipped");
        return false;
    }
    let script = "set -e
openssl req -x509 -newkey rsa:2048 -nodes -keyout a.key -out a.crt -days 365 -set_serial 10 -subj '/O=Ebb/CN=a.test' -addext 'subjectAltName=DNS:a.test' 2>/dev/null
cat a.crt a.key > a.pem
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj '/CN=NamesCA' 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout b.key -out b.csr -subj '/O=Ebb/CN=b.test' 2>/dev/null
printf 'subjectAltName=DNS:b.test\\n' > b.cnf
openssl x509 -req -in b.csr -CA ca.pem -CAkey ca.key -set_serial 11 -out b.crt -days 365 -extfile b.cnf 2>/dev/null
cat b.crt ca.pem b.key > b.pem
";
    openssl_script(d, script)
}

/// Two proxies to one inner TLS proxy serving a.test and b.test, each
/// proxy asking for one name. The inner one answers with what `ssl_f_*`
/// read of the certificate it served; the outer ones add what `ssl_s_*`
/// read of the one they were shown, and what a request rule reads of it
/// (nothing: no server connection yet).
fn cert_fetch_cfg(d: &Path, bind: &str, bind2: &str) -> String {
    two_ways_cfg(
        d,
        [("a.test", bind), ("b.test", bind2)],
        "http-request set-header x-req \"[%[ssl_s_sha1,hex]]\"\n\
         http-response set-header x-s \"%[ssl_s_s_dn(CN)] %[ssl_s_i_dn(CN)] %[ssl_s_serial,hex] %[ssl_s_key_alg] %[ssl_s_sig_alg] %[ssl_s_version]\"\n\
         http-response set-header x-s-sha1 %[ssl_s_sha1,hex]\n\
         http-response set-header x-s-der %[ssl_s_der,hex]\n\
         http-response set-header x-s-chain %[ssl_s_chain_der,hex]\n\
         http-response set-header x-s-dates \"%[ssl_s_notbefore] %[ssl_s_notafter]\"\n",
        "b.pem",
        "%[ssl_f_s_dn(CN)] %[ssl_f_i_dn(CN)] %[ssl_f_serial,hex] %[ssl_f_key_alg] %[ssl_f_sig_alg] %[ssl_f_version] %[ssl_f_sha1,hex] %[ssl_f_notbefore] %[ssl_f_notafter] %[ssl_f_der,hex] %[req.hdr(x-req)]",
    )
}

/// Two outer proxies (`outer`: the SNI each sends, its bind), each with
/// the rules `rules`, to an inner TLS proxy serving a.pem (the default)
/// and `second`, which answers `answer` (a log-format).
fn two_ways_cfg(
    d: &Path,
    outer: [(&str, &str); 2],
    rules: &str,
    second: &str,
    answer: &str,
) -> String {
    let mut out = String::new();
    for (i, (sni, b)) in outer.iter().enumerate() {
        out.push_str(&format!(
            "listen out{i}\n    bind {b}\n{rules}    server s {d}/in.sock ssl verify none sni str({sni})\n",
            d = d.display()
        ));
    }
    format!(
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\
         {out}\
         listen inner\n    bind {d}/in.sock ssl crt {d}/a.pem crt {d}/{second}\n\
         http-request return status 200 content-type text/plain lf-string \"{answer}\"\n",
        d = d.display(),
    )
}

/// What the two proxies answer: for each, the inner body and the
/// headers the outer one added.
fn cert_fetches(a: std::net::SocketAddr, b: std::net::SocketAddr) -> Vec<Vec<String>> {
    [a, b]
        .iter()
        .map(|&to| {
            let r = get(to, "/");
            assert_eq!(r.status, 200, "{}", r.text());
            let mut v = vec![r.text()];
            for h in ["x-s", "x-s-sha1", "x-s-der", "x-s-chain", "x-s-dates"] {
                v.push(r.header(h).unwrap_or("(none)").to_string());
            }
            v
        })
        .collect()
}

#[test]
fn ssl_f_and_ssl_s_read_the_certificates_of_both_connections() {
    let Some((ours, theirs, _)) = both_ways(
        "sslreg-certfetch",
        two_names_pki,
        cert_fetch_cfg,
        cert_fetches,
    ) else {
        return;
    };
    for (got, (cn, issuer, serial, alg, sig)) in ours.iter().zip([
        ("a.test", "a.test", "0A", "rsaEncryption", "RSA-SHA256"),
        ("b.test", "NamesCA", "0B", "id-ecPublicKey", "RSA-SHA256"),
    ]) {
        let f: Vec<&str> = got[0].split(' ').collect();
        assert_eq!(
            &f[..6],
            &[cn, issuer, serial, alg, sig, "3"],
            "ssl_f_*: {got:?}"
        );
        // Both ends read the same certificate.
        assert_eq!(got[1], format!("{cn} {issuer} {serial} {alg} {sig} 3"));
        assert_eq!(f[6], got[2], "ssl_f_sha1 and ssl_s_sha1");
        assert_eq!(f[6].len(), 40);
        assert_eq!(format!("{} {}", f[7], f[8]), got[5], "the dates");
        assert!(f[7].ends_with('Z') && f[7].len() == 13, "{}", f[7]);
        assert_eq!(f[9], got[3], "ssl_f_der and ssl_s_der");
        assert_eq!(f[10], "[]", "ssl_s_* in a request rule");
        // The server's chain starts with its own certificate; b's has the CA's after it.
        assert!(got[4].starts_with(&got[3]), "ssl_s_chain_der");
        assert_eq!(got[4].len() > got[3].len(), cn == "b.test", "{cn}");
    }
    if let Some(theirs) = theirs {
        // Their certificates are other ones (made again): the same
        // fields but the hashes, DER and dates.
        for (t, o) in theirs.iter().zip(&ours) {
            let words = |s: &str| s.split(' ').take(6).collect::<Vec<_>>().join(" ");
            assert_eq!(words(&t[0]), words(&o[0]), "haproxy's ssl_f_*");
            assert_eq!(t[0].rsplit(' ').next(), Some("[]"));
            assert_eq!(t[1], o[1], "haproxy's ssl_s_*");
            assert_eq!(t[4].starts_with(&t[3]), o[4].starts_with(&o[3]));
            assert_eq!(t[4].len() > t[3].len(), o[4].len() > o[3].len());
        }
    }
}

/// `two_names_pki`, and `v1.pem`: an X.509 v1 certificate (no extension,
/// so no subjectAltName: its one name is its CN, v1.test).
fn v1_pki(d: &Path) -> bool {
    two_names_pki(d)
        && openssl_script(
            d,
            "set -e
openssl req -new -newkey rsa:2048 -nodes -keyout v1.key -out v1.csr -subj '/O=Ebb/CN=v1.test' 2>/dev/null
openssl x509 -req -in v1.csr -key v1.key -out v1.crt -days 365 2>/dev/null
cat v1.crt v1.key > v1.pem
",
        )
}

/// One proxy per name asked for, to one inner TLS proxy serving a.pem
/// (the default) and v1.pem; the inner one answers with the CN of the
/// certificate it served, the outer one adds the version it was shown.
fn v1_cfg(d: &Path, bind: &str, bind2: &str) -> String {
    two_ways_cfg(
        d,
        [("v1.test", bind), ("other.test", bind2)],
        "http-response set-header x-version %[ssl_s_version]\n",
        "v1.pem",
        "%[ssl_f_s_dn(CN)]",
    )
}

fn cn_and_version(a: std::net::SocketAddr, b: std::net::SocketAddr) -> Vec<String> {
    [a, b]
        .iter()
        .map(|&to| {
            let r = get(to, "/");
            format!(
                "{} {} {}",
                r.status,
                r.text(),
                r.header("x-version").unwrap_or("-")
            )
        })
        .collect()
}

#[test]
fn an_x509_v1_certificate_is_served_and_a_cn_names_it() {
    // HAProxy takes a certificate's names from its subjectAltName DNS
    // entries and its subject's CNs: a v1 certificate (no extension) is
    // chosen by its CN; another name gets the first certificate.
    let Some((ours, theirs, d)) = both_ways("sslreg-v1", v1_pki, v1_cfg, cn_and_version) else {
        return;
    };
    assert_eq!(ours, ["200 v1.test 1", "200 a.test 3"]);
    if let Some(theirs) = theirs {
        assert_eq!(theirs, ours, "haproxy differs");
    }
    // A v1 certificate with another certificate's key is refused.
    std::fs::write(
        d.join("mixed.pem"),
        std::fs::read_to_string(d.join("v1.crt")).unwrap()
            + &std::fs::read_to_string(d.join("a.key")).unwrap(),
    )
    .unwrap();
    let bad = format!(
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n\
         frontend f\n    bind 127.0.0.1:0 ssl crt {}/mixed.pem\n",
        d.display()
    );
    assert_refused(
        &d,
        "mixed.cfg",
        &bad,
        "the private key does not match the certificate",
        false,
    );
}

/// Two inner TLS proxies that settle different handshakes (TLS 1.2 with
/// an ECDSA suite and `http/1.1`; TLS 1.3 with AES-256), each behind an
/// outer proxy: the inner ones answer what `ssl_fc_*` read, the outer ones
/// add what `ssl_bc_*` read.
fn settled_cfg(d: &Path, bind: &str, bind2: &str) -> String {
    let fc = "%[ssl_fc_protocol] %[ssl_fc_cipher] %[ssl_fc_alpn] %[ssl_fc_is_resumed] %[ssl_fc_use_keysize] %[ssl_fc_alg_keysize] %[fc_err] %[ssl_fc_err] %[ssl_fc_err,hex] %sslv %sslc";
    let bc = "%[ssl_bc] %[ssl_bc_protocol] %[ssl_bc_cipher] %[ssl_bc_alpn] %[ssl_bc_is_resumed] %[ssl_bc_use_keysize]";
    let mut out = String::from(
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n",
    );
    for (i, (b, opts)) in [
        (
            bind,
            "crt b.pem ssl-max-ver TLSv1.2 ciphers ECDHE-ECDSA-AES128-GCM-SHA256 alpn http/1.1",
        ),
        (
            bind2,
            "crt a.pem ssl-min-ver TLSv1.3 ciphersuites TLS_AES_256_GCM_SHA384",
        ),
    ]
    .iter()
    .enumerate()
    {
        out.push_str(&format!(
            "listen out{i}\n    bind {b}\n\
             http-response set-header x-bc \"{bc}\"\n\
             server s {d}/in{i}.sock ssl verify none alpn http/1.1\n\
             listen in{i}\n    bind {d}/in{i}.sock ssl {opts}\n\
             http-request return status 200 content-type text/plain lf-string \"{fc}\"\n",
            d = d.display()
        ));
    }
    format!("global\n    crt-base {}\n{out}", d.display())
}

fn settled(a: std::net::SocketAddr, b: std::net::SocketAddr) -> Vec<String> {
    [a, b]
        .iter()
        .map(|&to| {
            let r = get(to, "/");
            format!("{} | {}", r.text(), r.header("x-bc").unwrap_or("-"))
        })
        .collect()
}

#[test]
fn what_each_handshake_settled_is_read_by_ssl_fc_and_ssl_bc() {
    let Some((ours, theirs, _)) = both_ways("sslreg-settled", two_names_pki, settled_cfg, settled)
    else {
        return;
    };
    let zero = "0000000000000000";
    assert_eq!(
        ours,
        [
            format!("TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256 http/1.1 0 128 128 0 0 {zero} TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256 | 1 TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256 http/1.1 0 128"),
            format!("TLSv1.3 TLS_AES_256_GCM_SHA384  0 256 256 0 0 {zero} TLSv1.3 TLS_AES_256_GCM_SHA384 | 1 TLSv1.3 TLS_AES_256_GCM_SHA384  0 256"),
        ]
    );
    if let Some(theirs) = theirs {
        assert_eq!(theirs, ours, "haproxy differs");
    }
    // The server connection does not exist in a request rule (HAProxy
    // refuses `ssl_bc*` there too).
    let d = scratch("sslreg-settled-refused");
    let bad = "defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n\
               backend b\n    http-request set-header x %[ssl_bc_protocol]\n    server s 127.0.0.1:1 ssl verify none\n";
    assert_refused(
        &d,
        "bc.cfg",
        bad,
        "fetch 'ssl_bc_protocol' needs the server-side connection",
        true,
    );
}

#[test]
fn option_httpslog_logs_the_tls_fields_as_haproxy() {
    // HAProxy 2.6's format: httplog's, then
    // `%[fc_err]/%[ssl_fc_err,hex]/%[ssl_c_err]/%[ssl_c_ca_err]/%[ssl_fc_is_resumed] %[ssl_fc_sni]/%sslv/%sslc`.
    let logs = Syslog::new();
    let cfg = |d: &Path, bind: &str, bind2: &str| {
        format!(
            "global\n    crt-base {d}\n    log {log} local0\n\
             defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\
             listen out\n    bind {bind}\n    server s {d}/in.sock ssl verify none sni str(b.test)\n\
             listen in\n    bind {d}/in.sock ssl crt b.pem ssl-max-ver TLSv1.2 ciphers ECDHE-ECDSA-AES128-GCM-SHA256\n\
             log global\n    option httpslog\n\
             http-request return status 200 content-type text/plain string ok\n\
             listen spare\n    bind {bind2}\n    http-request return status 200\n",
            d = d.display(),
            log = logs.addr(),
        )
    };
    let tail = |a: std::net::SocketAddr| {
        assert_eq!(get(a, "/slog").text(), "ok");
        let line = logs.next("");
        line.split_once("\"GET /slog HTTP/1.1\" ")
            .unwrap_or_else(|| panic!("{line}"))
            .1
            .to_string()
    };
    let d = scratch("sslreg-httpslog");
    if !two_names_pki(&d) {
        return;
    }
    let e = Ebb::start(&cfg(&d, "BIND", "BIND"));
    let ours = tail(e.addrs[0]);
    assert_eq!(
        ours,
        "0/0000000000000000/0/0/0 b.test/TLSv1.2/ECDHE-ECDSA-AES128-GCM-SHA256"
    );
    if let Some((_h, a, _)) = haproxy_pair("sslreg-httpslog", two_names_pki, cfg) {
        assert_eq!(tail(a), ours, "haproxy differs");
    }
}
