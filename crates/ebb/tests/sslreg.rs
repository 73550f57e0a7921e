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
            "'check' and 'resolvers' on an UNIX socket server",
        ),
        (
            "server s unix@/tmp/x.sock check",
            "'check' and 'resolvers' on an UNIX socket server",
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
