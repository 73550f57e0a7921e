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

fn bodies(a: std::net::SocketAddr, b: std::net::SocketAddr) -> (String, String) {
    (get(a, "/").text(), get(b, "/").text())
}

#[test]
fn servers_on_unix_socket_paths_in_clear_and_tls() {
    let d = scratch("sslreg-unix");
    let e = Ebb::start(&unix_servers_cfg(&d, "BIND", "BIND"));
    let ours = bodies(e.addrs[0], e.addrs[1]);
    assert_eq!(ours, ("plain".to_string(), "sni=inner.test".to_string()));
    if have("haproxy") {
        let hd = scratch("sslreg-unix-h");
        let (p1, p2) = (free_port(), free_port());
        let cfg = unix_servers_cfg(&hd, &format!("127.0.0.1:{p1}"), &format!("127.0.0.1:{p2}"));
        let _h = haproxy_with("sslreg-unix-hap", &cfg).expect("haproxy starts");
        let a = |p: u16| std::net::SocketAddr::from(([127, 0, 0, 1], p));
        wait_until("haproxy listens", || {
            std::net::TcpStream::connect(a(p2)).is_ok()
        });
        assert_eq!(bodies(a(p1), a(p2)), ours, "haproxy differs");
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
    if have("haproxy") {
        let hd = scratch("sslreg-crt-h");
        assert!(client_pki(&hd));
        let (p1, p2) = (free_port(), free_port());
        let cfg = server_crt_cfg(&hd, &format!("127.0.0.1:{p1}"), &format!("127.0.0.1:{p2}"));
        let _h = haproxy_with("sslreg-crt-hap", &cfg).expect("haproxy starts");
        let a = |p: u16| std::net::SocketAddr::from(([127, 0, 0, 1], p));
        wait_until("haproxy listens", || {
            std::net::TcpStream::connect(a(p2)).is_ok()
        });
        let theirs = statuses(a(p1), a(p2));
        assert_eq!(theirs.0, ours.0, "haproxy differs");
        // Known difference: the server refuses the missing certificate
        // after the client's side of the TLS 1.3 handshake ended (its
        // Finished sent), when ebb's connect is done: the request fails
        // (502); HAProxy counts it as a failed connect (503).
        assert_eq!(theirs.1, 503);
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
