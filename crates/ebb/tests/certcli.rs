//! The CLI's certificate commands (`set|commit|abort|new|del|show ssl
//! cert`): the flow ACME clients use to renew a certificate without a
//! reload, checked with openssl s_client, and the answers beside
//! haproxy 2.6's for the same steps.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use common::*;

/// A test CA and certificates it signs.
struct Pki {
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new() -> Pki {
        Pki::named("Ebb Test CA")
    }

    /// A CA whose subject's common name is `cn`.
    fn named(cn: &str) -> Pki {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, "Ebb Test");
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = p.self_signed(&ca_key).unwrap();
        Pki { ca, ca_key }
    }

    /// A certificate for `names` (the first one its CN) with serial
    /// `serial`: (certificate PEM, key PEM).
    fn leaf(&self, names: &[&str], serial: u64) -> (String, String) {
        let mut p =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        p.serial_number = Some(rcgen::SerialNumber::from(serial));
        p.distinguished_name
            .push(rcgen::DnType::CommonName, names[0]);
        let key = rcgen::KeyPair::generate().unwrap();
        let c = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        (c.pem(), key.serialize_pem())
    }
}

/// The serial (upper-case hex) of the certificate a new TLS connection
/// to `port` with SNI `name` gets, read from openssl s_client's output.
fn served_serial(port: u16, name: &str) -> String {
    let o = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            name,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let pem = out
        .split("-----BEGIN CERTIFICATE-----")
        .nth(1)
        .and_then(|r| r.split("-----END CERTIFICATE-----").next())
        .unwrap_or_else(|| panic!("no certificate from s_client: {out}"));
    let pem = format!("-----BEGIN CERTIFICATE-----{pem}-----END CERTIFICATE-----\n");
    let mut x = Command::new("openssl")
        .args(["x509", "-noout", "-serial"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    x.stdin.take().unwrap().write_all(pem.as_bytes()).unwrap();
    let o = x.wait_with_output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .trim_start_matches("serial=")
        .to_string()
}

/// A command with a payload (`CMD <<`, the payload, an empty line).
fn cli_payload(sock: &Path, cmd: &str, payload: &str) -> String {
    cli_cmd(sock, &format!("{cmd} <<\n{}\n", payload.trim_end()))
}

/// A TLS keep-alive connection held by openssl s_client: requests go in
/// on its stdin, what comes back is gathered.
struct Held {
    child: std::process::Child,
    got: Arc<Mutex<Vec<u8>>>,
}

impl Held {
    fn open(port: u16, name: &str) -> Held {
        Held::open_with(port, name, &[])
    }

    /// With more arguments to s_client (`-cert F -key F`).
    fn open_with(port: u16, name: &str, more: &[&str]) -> Held {
        let mut child = Command::new("openssl")
            .args([
                "s_client",
                "-quiet",
                "-connect",
                &format!("127.0.0.1:{port}"),
                "-servername",
                name,
            ])
            .args(more)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = Arc::clone(&got);
        std::thread::spawn(move || {
            let mut b = [0u8; 4096];
            while let Ok(n) = out.read_retry(&mut b) {
                if n == 0 {
                    break;
                }
                g.lock().unwrap().extend_from_slice(&b[..n]);
            }
        });
        Held { child, got }
    }

    /// Sends a request and waits for the `n`th answer's body `ok`.
    fn request(&mut self, n: usize) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        stdin.flush().unwrap();
        wait_until("an answer on the held connection", || {
            let g = self.got.lock().unwrap();
            String::from_utf8_lossy(&g).matches("HTTP/1.1 200").count() >= n
        });
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The configuration after `global`'s stats socket line: a TLS frontend
/// on `bind` with `default.pem` first (the default certificate) and
/// `site.pem`.
fn tls_cfg(dir: &Path, bind: &str) -> String {
    format!(
        "    nbthread 2\ndefaults\n    mode http\n    timeout client 30s\n    timeout server 5s\n    timeout connect 5s\n\
         frontend fe\n    bind {bind} ssl crt {d}/default.pem crt {d}/site.pem\n\
         \x20   http-request return status 200 content-type text/plain string ok\n",
        d = dir.display()
    )
}

fn setup(name: &str) -> Option<(Pki, PathBuf)> {
    if !have("openssl") {
        eprintln!("openssl missing: certcli tests skipped");
        return None;
    }
    let pki = Pki::new();
    let d = scratch(name);
    let (c, k) = pki.leaf(&["default.test"], 0x1000);
    std::fs::write(d.join("default.pem"), format!("{c}{k}")).unwrap();
    let (c, k) = pki.leaf(&["a.test", "www.a.test"], 0x1001);
    std::fs::write(d.join("site.pem"), format!("{c}{k}")).unwrap();
    Some((pki, d))
}

/// ebb on [`tls_cfg`] and `more` lines: the process and its admin socket.
fn start(name: &str, d: &Path, more: &str) -> (Ebb, PathBuf) {
    ebb_with_admin(name, |sock, bind| {
        format!(
            "global\n    stats socket {} level admin\n{}{more}",
            sock.display(),
            tls_cfg(d, bind)
        )
    })
}

#[test]
fn acme_flow_swaps_the_certificate_for_new_handshakes_only() {
    let Some((pki, d)) = setup("certcli-flow") else {
        return;
    };
    let (e, sock) = start("certcli-flow-s", &d, "");
    let port = e.addr().port();
    let site = d.join("site.pem");
    let site = site.display().to_string();
    assert_eq!(served_serial(port, "a.test"), "1001");
    assert_eq!(served_serial(port, "b.test"), "1000", "the default");

    // A keep-alive connection that got the old certificate.
    let mut held = Held::open(port, "a.test");
    held.request(1);

    // The renewal: new names, new serial, its chain.
    let (c, k) = pki.leaf(&["b.test"], 0x2002);
    let ca = pki.ca.pem();
    let a = cli_payload(
        &sock,
        &format!("set ssl cert {site}"),
        &format!("{c}{ca}{k}"),
    );
    assert_eq!(
        a,
        format!("Transaction created for certificate {site}!\n\n")
    );
    // Nothing changes before the commit.
    assert_eq!(served_serial(port, "a.test"), "1001");
    let list = cli_cmd(&sock, "show ssl cert");
    assert!(
        list.starts_with(&format!("# transaction\n*{site}\n# filename\n")),
        "{list}"
    );
    let a = cli_cmd(&sock, &format!("commit ssl cert {site}"));
    assert_eq!(a, format!("Committing {site}.\nSuccess!\n\n"));

    // New handshakes get it by its new names; the old names are gone.
    assert_eq!(served_serial(port, "b.test"), "2002");
    assert_eq!(served_serial(port, "a.test"), "1000", "the default now");
    // The connection made before goes on with its certificate.
    held.request(2);
    let show = cli_cmd(&sock, &format!("show ssl cert {site}"));
    assert!(show.contains("Serial: 2002\n"), "{show}");
    assert!(
        show.contains("Subject Alternative Name: DNS:b.test\n"),
        "{show}"
    );
    assert!(
        show.contains("\nChain Subject: /CN=Ebb Test CA/O=Ebb Test\n"),
        "{show}"
    );
    assert!(!cli_cmd(&sock, "show ssl cert").contains("# transaction"));

    // A key alone (`.key`) completes a PEM without one.
    let (c, k) = pki.leaf(&["c.test"], 0x3003);
    cli_payload(&sock, &format!("set ssl cert {site}"), &c);
    let a = cli_cmd(&sock, &format!("commit ssl cert {site}"));
    assert!(
        a.starts_with("The transaction must contain at least a certificate and a private key!\n"),
        "{a}"
    );
    let a = cli_payload(&sock, &format!("set ssl cert {site}.key"), &k);
    assert_eq!(
        a,
        format!("Transaction updated for certificate {site}!\n\n")
    );
    cli_cmd(&sock, &format!("commit ssl cert {site}"));
    assert_eq!(served_serial(port, "c.test"), "3003");
    drop(e);
}

/// The same steps on ebb and on haproxy 2.6 (same files, same paths):
/// the same answers, errors included.
#[test]
fn answers_as_haproxy_for_the_same_steps() {
    let Some((pki, d)) = setup("certcli-parity") else {
        return;
    };
    let (e, sock) = start("certcli-parity-s", &d, "");
    let hport = free_port();
    let h = haproxy_with(
        "certcli-parity-h",
        &tls_cfg(&d, &format!("127.0.0.1:{hport}")),
    );
    let site = d.join("site.pem").display().to_string();
    let (c2, k2) = pki.leaf(&["b.test", "www.b.test"], 0x2002);
    let (_, other_key) = pki.leaf(&["x.test"], 0x9);
    let ca = pki.ca.pem();
    let fresh = d.join("fresh.pem").display().to_string();
    // (command, payload)
    let steps: Vec<(String, Option<String>)> = vec![
        ("show ssl cert".into(), None),
        (format!("show ssl cert {site}"), None),
        ("show ssl cert /nowhere.pem".into(), None),
        (format!("commit ssl cert {site}"), None),
        (format!("abort ssl cert {site}"), None),
        (
            format!("set ssl cert {site}"),
            Some("garbage, no PEM here".into()),
        ),
        (
            format!("set ssl cert {site}"),
            Some(format!(
                "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n{k2}"
            )),
        ),
        (
            "set ssl cert /nowhere.pem".into(),
            Some(format!("{c2}{k2}")),
        ),
        (
            format!("set ssl cert {site}"),
            Some(format!("{c2}{ca}{other_key}")),
        ),
        ("show ssl cert".into(), None),
        (format!("show ssl cert *{site}"), None),
        (format!("commit ssl cert {site}"), None),
        ("abort ssl cert /nowhere.pem".into(), None),
        (format!("abort ssl cert {site}"), None),
        (format!("show ssl cert *{site}"), None),
        (format!("set ssl cert {site}"), Some(c2.clone())),
        (format!("commit ssl cert {site}"), None),
        (format!("set ssl cert {site}.key"), Some("not a key".into())),
        (format!("set ssl cert {site}.key"), Some(k2.clone())),
        (format!("commit ssl cert {site}"), None),
        (format!("show ssl cert {site}"), None),
        (format!("del ssl cert {site}"), None),
        (format!("new ssl cert {fresh}"), None),
        (format!("new ssl cert {fresh}"), None),
        (format!("show ssl cert {fresh}"), None),
        ("show ssl cert".into(), None),
        (format!("set ssl cert {fresh}"), Some(format!("{c2}{k2}"))),
        (format!("commit ssl cert {fresh}"), None),
        (format!("show ssl cert {fresh}"), None),
        (format!("del ssl cert {fresh}"), None),
        (format!("del ssl cert {fresh}"), None),
        ("commit ssl cert".into(), None),
        ("new ssl cert".into(), None),
    ];
    let ours = run_steps(&sock, &steps);
    // Spot checks that hold without haproxy.
    assert_eq!(
        ours[3],
        format!("No ongoing transaction! !\nCan't commit {site}!\n\n")
    );
    assert_eq!(
        ours[5],
        format!("unable to load certificate from file '{site}'.\nCan't load the payload\nCan't update {site}!\n\n")
    );
    assert_eq!(
        ours[11],
        format!("inconsistencies between private key and certificate loaded '{site}'.\nCan't commit {site}!\n\n")
    );
    assert!(
        ours[20].contains("Serial: 2002\nnotBefore: "),
        "{}",
        ours[20]
    );
    assert!(ours[20].contains("Status: Used\n"), "{}", ours[20]);
    assert!(
        ours[24].starts_with(&format!("Filename: {fresh}\nStatus: Empty\n")),
        "{}",
        ours[24]
    );
    assert!(ours[28].contains("Status: Unused\n"), "{}", ours[28]);
    if let Some(h) = h {
        same_as_haproxy(&steps, &ours, &h);
    }
    drop(e);
}

/// The answers to `steps` (command, payload) on the CLI at `sock`.
fn run_steps(sock: &Path, steps: &[(String, Option<String>)]) -> Vec<String> {
    steps
        .iter()
        .map(|(cmd, p)| match p {
            Some(p) => cli_payload(sock, cmd, p),
            None => cli_cmd(sock, cmd),
        })
        .collect()
}

/// Checks that haproxy `h` answers `steps` as ebb did (`ours`).
fn same_as_haproxy(steps: &[(String, Option<String>)], ours: &[String], h: &Hap) {
    let theirs = run_steps(&h.sock, steps);
    for (i, ((cmd, _), (o, t))) in steps.iter().zip(ours.iter().zip(&theirs)).enumerate() {
        // haproxy's HTTP client loads the system's CAs (`@system-ca`);
        // ebb has none. haproxy 2.6 writes a NUL byte after an `alpn` list.
        let t: String = t
            .split_inclusive('\n')
            .filter(|l| !l.starts_with("@system-ca "))
            .collect::<String>()
            .replace('\0', "");
        assert_eq!(*o, t, "step {i}: {cmd}");
    }
}

/// Where ebb's answer differs from haproxy 2.6's, on purpose.
#[test]
fn a_second_file_and_unsupported_parts_are_refused() {
    let Some((pki, d)) = setup("certcli-refuse") else {
        return;
    };
    std::fs::copy(d.join("site.pem"), d.join("two.pem")).unwrap();
    let two_bind = format!("    bind BIND ssl crt {}/two.pem\n", d.display());
    let (e, sock) = start("certcli-refuse-s", &d, &two_bind);
    let site = d.join("site.pem").display().to_string();
    let two = d.join("two.pem").display().to_string();
    let (c, k) = pki.leaf(&["b.test"], 0x2002);
    cli_payload(&sock, &format!("set ssl cert {site}"), &format!("{c}{k}"));
    // haproxy 2.6 silently puts this in the transaction of site.pem.
    let a = cli_payload(&sock, &format!("set ssl cert {two}"), &format!("{c}{k}"));
    assert_eq!(
        a,
        format!("The ongoing transaction is about '{site}' but you are trying to set '{two}'\nCan't update {two}!\n\n")
    );
    let a = cli_payload(&sock, &format!("set ssl cert {site}.issuer"), &pki.ca.pem());
    assert!(a.starts_with("ebb does not support '.issuer' files"), "{a}");
    assert!(
        a.ends_with(&format!("Can't update {site}.issuer!\n\n")),
        "{a}"
    );
    drop(e);
}

/// A server's `crt` (the client certificate ebb shows a server that asks)
/// is an entry too: a commit changes what new connections to the server
/// show.
#[test]
fn a_servers_crt_changes_for_new_connections() {
    let Some((pki, d)) = setup("certcli-srv") else {
        return;
    };
    let (c, k) = pki.leaf(&["client.test"], 0x4004);
    std::fs::write(d.join("client.pem"), format!("{c}{k}")).unwrap();
    std::fs::write(d.join("ca.pem"), pki.ca.pem()).unwrap();
    let back = free_port();
    let more = format!(
        "backend be\n    http-reuse never\n    server s 127.0.0.1:{back} ssl verify none crt {d}/client.pem\n\
         frontend plain\n    bind BIND\n    default_backend be\n\
         frontend tlsback\n    bind 127.0.0.1:{back} ssl crt {d}/default.pem verify optional ca-file {d}/ca.pem\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"serial=%[ssl_c_serial,hex]\"\n",
        d = d.display()
    );
    let (e, sock) = start("certcli-srv-s", &d, &more);
    let plain = e.addrs[1];
    assert_eq!(get(plain, "/").text(), "serial=4004");
    let client = d.join("client.pem").display().to_string();
    let show = cli_cmd(&sock, &format!("show ssl cert {client}"));
    assert!(show.contains("Status: Used\n"), "{show}");
    let (c, k) = pki.leaf(&["client.test"], 0x5005);
    cli_payload(&sock, &format!("set ssl cert {client}"), &format!("{c}{k}"));
    let a = cli_cmd(&sock, &format!("commit ssl cert {client}"));
    assert_eq!(a, format!("Committing {client}.\nSuccess!\n\n"));
    assert_eq!(get(plain, "/").text(), "serial=5005");
    // A reload reads the files again.
    e.signal("HUP");
    wait_until("the file's certificate again after SIGHUP", || {
        get(plain, "/").text() == "serial=4004"
    });
    drop(e);
}

/// Under master-worker the change lives in the worker: made on its
/// `stats socket`, committed through the master CLI (`@1`), gone after a
/// reload (the new worker reads the files).
#[test]
fn master_worker_keeps_the_change_in_the_worker() {
    let Some((pki, d)) = setup("certcli-mw") else {
        return;
    };
    let sock = d.join("admin.sock");
    let master = d.join("master.sock");
    let cfg = d.join("ebb.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n    stats socket {} level admin\n{}",
            sock.display(),
            tls_cfg(&d, "127.0.0.1:0")
        ),
    )
    .unwrap();
    let e = Ebb::start_args(
        &[
            "-W",
            "-S",
            master.to_str().unwrap(),
            "-f",
            cfg.to_str().unwrap(),
        ],
        d.clone(),
    );
    let port = e.addr().port();
    let site = d.join("site.pem").display().to_string();
    let (c, k) = pki.leaf(&["a.test"], 0x2002);
    cli_payload(&sock, &format!("set ssl cert {site}"), &format!("{c}{k}"));
    let a = cli_cmd(&master, &format!("@1 show ssl cert *{site}"));
    assert!(a.contains("Serial: 2002\n"), "{a}");
    let a = cli_cmd(&master, &format!("@1 commit ssl cert {site}"));
    assert!(
        a.starts_with(&format!("Committing {site}.\nSuccess!\n")),
        "{a}"
    );
    assert_eq!(served_serial(port, "a.test"), "2002");
    cli_cmd(&master, "reload");
    wait_until("the new worker serves the file's certificate", || {
        served_serial(port, "a.test") == "1001"
    });
    drop(e);
}

/// `show ssl crt-list`: the lists and `crt` directories loaded, one's
/// entries (`-n`: with line numbers), as haproxy 2.6 prints them.
#[test]
fn show_crt_list_as_haproxy() {
    let Some((pki, d)) = setup("certcli-lists") else {
        return;
    };
    let dir = d.join("dir");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, n) in ["x.test", "y.test"].iter().enumerate() {
        let (c, k) = pki.leaf(&[n], 0x10 + i as u64);
        std::fs::write(dir.join(format!("{i}.pem")), format!("{c}{k}")).unwrap();
    }
    let p = d.display();
    std::fs::write(
        d.join("list.txt"),
        format!(
            "# comment\n{p}/site.pem\n{p}/default.pem [ssl-min-ver TLSv1.2 verify none alpn h2,http/1.1] b.test !www.b.test\n\n\
             {p}/site.pem *.a.test\n{p}/default.pem [curves X25519 ciphers ECDHE-ECDSA-AES128-GCM-SHA256]\n"
        ),
    )
    .unwrap();
    let rest = |b1: &str, b2: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 5s\n\
             frontend fe\n    bind {b1} ssl crt-list {p}/list.txt\n    bind {b2} ssl crt {p}/dir/\n\
             \x20   http-request return status 200\n"
        )
    };
    let sock = d.join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{}",
        sock.display(),
        rest("BIND", "BIND")
    ));
    let steps = [
        "show ssl crt-list".to_string(),
        format!("show ssl crt-list {p}/list.txt"),
        format!("show ssl crt-list -n {p}/list.txt"),
        format!("show ssl crt-list {p}/dir/"),
        format!("show ssl crt-list -n {p}/dir"),
        "show ssl crt-list /nowhere".to_string(),
        "show ssl crt-list -n".to_string(),
        "show ssl cert".to_string(),
    ];
    let ours: Vec<String> = steps.iter().map(|c| cli_cmd(&sock, c)).collect();
    assert_eq!(ours[0], format!("{p}/dir\n{p}/list.txt\n\n"));
    assert!(
        ours[2].contains(&format!(
            "\n{p}/default.pem:3 [alpn h2,http/1.1 verify none ssl-min-ver TLSv1.2] b.test !www.b.test\n"
        )),
        "{}",
        ours[2]
    );
    let bind = || format!("127.0.0.1:{}", free_port());
    if let Some(h) = haproxy_with("certcli-lists-h", &rest(&bind(), &bind())) {
        for (c, o) in steps.iter().zip(&ours) {
            // haproxy 2.6 writes a NUL byte after an `alpn` list.
            let theirs = cli_cmd(&h.sock, c).replace('\0', "");
            assert_eq!(*o, theirs, "{c}");
        }
    }
    drop(e);
}

/// `\t- FILE:LINE` (a bind line named in an answer) with the file left
/// out: ebb's and haproxy's configuration files differ.
fn without_cfg_path(answer: &str) -> String {
    answer
        .lines()
        .map(|l| match (l.strip_prefix("\t- "), l.rsplit_once(':')) {
            (Some(_), Some((_, n))) => format!("\t- CFG:{n}\n"),
            _ => format!("{l}\n"),
        })
        .collect()
}

/// `add|del ssl crt-list`: a certificate of the store served on every
/// bind line using the list (checked with s_client), gone again after the
/// `del`, and the same answers as haproxy 2.6 for the same steps, errors
/// included.
#[test]
fn add_and_del_crt_list_entries_as_haproxy() {
    let Some((pki, d)) = setup("certcli-addlist") else {
        return;
    };
    let p = d.display();
    std::fs::write(
        d.join("list.txt"),
        format!("{p}/default.pem\n# comment\n{p}/site.pem\n"),
    )
    .unwrap();
    let dir = d.join("dir");
    std::fs::create_dir_all(&dir).unwrap();
    let (c, k) = pki.leaf(&["x.test"], 0x10);
    std::fs::write(dir.join("0.pem"), format!("{c}{k}")).unwrap();
    let rest = |b1: &str, b2: &str, b3: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 5s\n\
             frontend fe\n    bind {b1} ssl crt-list {p}/list.txt\n    bind {b2} ssl crt-list {p}/list.txt\n\
             \x20   bind {b3} ssl strict-sni crt {p}/dir\n\
             \x20   http-request return status 200\n"
        )
    };
    let sock = d.join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{}",
        sock.display(),
        rest("BIND", "BIND", "BIND")
    ));
    let (c1, k1) = pki.leaf(&["c.test"], 0x3003);
    let new = format!("{p}/new.pem");
    let list = format!("{p}/list.txt");
    let (c2, k2) = pki.leaf(&["y.test"], 0x11);
    let dnew = format!("{p}/dir/1.pem");
    // (command, payload)
    let steps: Vec<(String, Option<String>)> = vec![
        (format!("add ssl crt-list {list} {new}"), None),
        (format!("new ssl cert {new}"), None),
        (format!("add ssl crt-list {list} {new}"), None),
        (format!("set ssl cert {new}"), Some(format!("{c1}{k1}"))),
        (format!("commit ssl cert {new}"), None),
        (format!("add ssl crt-list {p}/nowhere.txt {new}"), None),
        (format!("add ssl crt-list {list}"), None),
        (format!("add ssl crt-list {list} {new}"), None),
        (
            format!("add ssl crt-list {list}"),
            Some(format!("{new} d.test !e.test")),
        ),
        (
            format!("add ssl crt-list {list}"),
            Some(format!("{new}\n{new}")),
        ),
        (format!("show ssl crt-list -n {list}"), None),
        (format!("show ssl cert {new}"), None),
        (format!("del ssl cert {new}"), None),
        (format!("del ssl crt-list {list} {new}"), None),
        (format!("del ssl crt-list {list} {new}:9"), None),
        (format!("del ssl crt-list {list} {new}:x"), None),
        (format!("del ssl crt-list {list} {p}/nowhere.pem"), None),
        (format!("del ssl crt-list {list} {p}/dir/0.pem"), None),
        (format!("del ssl crt-list {list} {p}/default.pem"), None),
        (format!("del ssl crt-list {list} {new}:4"), None),
        (format!("show ssl crt-list -n {list}"), None),
        (format!("new ssl cert {dnew}"), None),
        (format!("set ssl cert {dnew}"), Some(format!("{c2}{k2}"))),
        (format!("commit ssl cert {dnew}"), None),
        (format!("add ssl crt-list {p}/dir {new}"), None),
        (
            format!("add ssl crt-list {p}/dir/"),
            Some(format!("{dnew} z.test")),
        ),
        (format!("add ssl crt-list {p}/dir/ {dnew}"), None),
        (format!("add ssl crt-list {p}/dir/ {dnew}"), None),
        (format!("del ssl crt-list {p}/dir {p}/dir/0.pem"), None),
        (format!("show ssl crt-list {p}/dir"), None),
        ("del ssl crt-list".into(), None),
    ];
    // `after(i)` runs once step i is answered.
    let run = |sock: &Path, after: &mut dyn FnMut(usize)| -> Vec<String> {
        let mut out = Vec::new();
        for (i, (cmd, p)) in steps.iter().enumerate() {
            let a = match p {
                Some(p) => cli_payload(sock, cmd, p),
                None => cli_cmd(sock, cmd),
            };
            out.push(without_cfg_path(&a));
            after(i);
        }
        out
    };
    let port = e.addrs[0].port();
    let port2 = e.addrs[1].port();
    let dport = e.addrs[2].port();
    assert_eq!(served_serial(port, "c.test"), "1000", "the default before");
    let ours = run(&sock, &mut |i| {
        match i {
            // After the first add: served on both bind lines.
            7 => {
                assert_eq!(served_serial(port, "c.test"), "3003");
                assert_eq!(served_serial(port2, "c.test"), "3003");
            }
            // The payload's filters: its names instead of the cert's.
            8 => {
                assert_eq!(served_serial(port, "d.test"), "3003");
                assert_eq!(served_serial(port, "e.test"), "1000");
            }
            // Line 4 (the first add) deleted, line 5 left.
            19 => {
                assert_eq!(served_serial(port, "c.test"), "1000");
                assert_eq!(served_serial(port2, "d.test"), "3003");
            }
            26 => assert_eq!(served_serial(dport, "y.test"), "11"),
            28 => assert_eq!(served_serial(dport, "y.test"), "11"),
            _ => {}
        }
    });
    assert_eq!(
        ours[7],
        format!("Inserting certificate '{new}' in crt-list '{list}'..\nSuccess!\n\n")
    );
    assert_eq!(
        ours[10],
        format!("# {list}\n{p}/default.pem:1\n{p}/site.pem:3\n{new}:4\n{new}:5 d.test !e.test\n\n")
    );
    assert_eq!(
        ours[18],
        format!("Can't delete the entry: certificate '{p}/default.pem' cannot be deleted, it is used as default certificate by the following frontends:\n\t- CFG:7\n\t- CFG:8\n\n\n")
    );
    assert_eq!(
        ours[19],
        format!("Entry '{new}' deleted in crtlist '{list}'!\n\n")
    );
    let bind = || format!("127.0.0.1:{}", free_port());
    if let Some(h) = haproxy_with("certcli-addlist-h", &rest(&bind(), &bind(), &bind())) {
        let theirs = run(&h.sock, &mut |_| {});
        for (i, ((cmd, _), (o, t))) in steps.iter().zip(ours.iter().zip(&theirs)).enumerate() {
            assert_eq!(o, t, "step {i}: {cmd}");
        }
    }
    drop(e);
}

/// Whether a new TLS connection to `port` for the name `sni` showing the
/// client certificate `who` (`DIR/who.crt`, `DIR/who.key`) gets an answer.
fn passes_for(d: &Path, port: u16, sni: &str, who: &str) -> bool {
    let cert = d.join(format!("{who}.crt"));
    let key = d.join(format!("{who}.key"));
    let url = format!("https://{sni}:{port}/");
    let resolve = format!("{sni}:{port}:127.0.0.1");
    let args = [
        "-k",
        "--resolve",
        &resolve,
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        &url,
    ];
    curl(&args).0
}

/// `add ssl crt-list` with `[options]` in the payload: the line's
/// `ca-file` (a file made on the CLI: no disk is read) verifies the client
/// certificates of the handshakes that get its certificate, the others
/// keep the bind line's; `show ssl crt-list` prints the options as
/// haproxy 2.6 does; a file the store does not hold is refused; once the
/// line is deleted its CA file is no longer in use. Beside haproxy: the
/// same answers and the same verification.
#[test]
fn a_line_added_with_options_verifies_with_its_own_files() {
    let Some((pki, d)) = setup("certcli-addopts") else {
        return;
    };
    let pki2 = Pki::named("Ebb Test CA2");
    let (c, k) = pki2.leaf(&["c2.test"], 0x602);
    std::fs::write(d.join("c2.crt"), c).unwrap();
    std::fs::write(d.join("c2.key"), k).unwrap();
    std::fs::write(d.join("ca.pem"), pki.ca.pem()).unwrap();
    let p = d.display();
    std::fs::write(d.join("list.txt"), format!("{p}/default.pem\n")).unwrap();
    let rest = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 30s\n    timeout server 5s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind} ssl crt-list {p}/list.txt verify required ca-file {p}/ca.pem\n\
             \x20   http-request return status 200 content-type text/plain string ok\n"
        )
    };
    let (e, sock) = ebb_with_admin("certcli-addopts-s", |sock, bind| {
        format!(
            "global\n    stats socket {} level admin\n{}",
            sock.display(),
            rest(bind)
        )
    });
    let hport = free_port();
    let h = haproxy_with("certcli-addopts-h", &rest(&format!("127.0.0.1:{hport}")));
    let ports: Vec<u16> = std::iter::once(e.addr().port())
        .chain(h.as_ref().map(|_| hport))
        .collect();
    let check = |sni: &str, want: bool, when: &str| {
        for port in &ports {
            assert_eq!(
                passes_for(&d, *port, sni, "c2"),
                want,
                "c2 for {sni} on port {port} {when}"
            );
        }
    };
    check("c.test", false, "at start");
    let (cn, kn) = pki.leaf(&["c.test"], 0x3003);
    let (new, list, ca2) = (
        format!("{p}/new.pem"),
        format!("{p}/list.txt"),
        format!("{p}/ca2.pem"),
    );
    let steps1: Vec<(String, Option<String>)> = vec![
        (format!("new ssl ca-file {ca2}"), None),
        (format!("set ssl ca-file {ca2}"), Some(pki2.ca.pem())),
        (format!("commit ssl ca-file {ca2}"), None),
        (format!("new ssl cert {new}"), None),
        (format!("set ssl cert {new}"), Some(format!("{cn}{kn}"))),
        (format!("commit ssl cert {new}"), None),
        (
            format!("add ssl crt-list {list}"),
            Some(format!("{new} [ca-file {p}/nowhere.pem] c.test")),
        ),
        (
            format!("add ssl crt-list {list}"),
            Some(format!("{new} [crl-file {p}/nowhere.pem] c.test")),
        ),
        (
            format!("add ssl crt-list {list}"),
            Some(format!(
                "{new} [ssl-max-ver TLSv1.3 ca-file {ca2} alpn h2,http/1.1 verify required] c.test"
            )),
        ),
        (format!("show ssl crt-list -n {list}"), None),
        (format!("show ssl ca-file {ca2}"), None),
        (format!("del ssl ca-file {ca2}"), None),
    ];
    let ours = run_steps(&sock, &steps1);
    assert_eq!(
        ours[6],
        format!("Can't edit the crt-list: 'ca-file' : unable to load {p}/nowhere.pem\n\n")
    );
    assert_eq!(
        ours[9],
        format!("# {list}\n{p}/default.pem:1\n{new}:2 [alpn h2,http/1.1 verify required ca-file {ca2} ssl-max-ver TLSv1.3] c.test\n\n")
    );
    assert!(ours[10].contains("Status: Used\n"), "{}", ours[10]);
    if let Some(h) = &h {
        same_as_haproxy(&steps1, &ours, h);
    }
    check("c.test", true, "with the line's CA file");
    check("default.test", false, "on the bind line's CA file");
    let steps2: Vec<(String, Option<String>)> = vec![
        (format!("del ssl crt-list {list} {new}"), None),
        (format!("show ssl ca-file {ca2}"), None),
        (format!("del ssl ca-file {ca2}"), None),
    ];
    let ours = run_steps(&sock, &steps2);
    assert_eq!(ours[2], format!("CA file '{ca2}' deleted!\n\n"));
    if let Some(h) = &h {
        same_as_haproxy(&steps2, &ours, h);
    }
    check("c.test", false, "once the line is deleted");
    drop(e);
}

/// `ssl-load-extra-del-ext`: the key of `site.crt` is `site.key` (not
/// `site.crt.key`), and `set ssl cert site.key` changes `site.crt`'s key,
/// as in haproxy 2.6; without the keyword that key is not found.
#[test]
fn extra_files_without_the_crt_extension() {
    let Some((pki, d)) = setup("certcli-delext") else {
        return;
    };
    let (c, k) = pki.leaf(&["a.test"], 0x1001);
    std::fs::write(d.join("site.crt"), c).unwrap();
    std::fs::write(d.join("site.key"), k).unwrap();
    let p = d.display();
    let rest = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 30s\n\
             frontend fe\n    bind {bind} ssl crt {p}/site.crt\n\
             \x20   http-request return status 200 content-type text/plain string ok\n"
        )
    };
    let cfg = d.join("without.cfg");
    std::fs::write(&cfg, rest("127.0.0.1:1")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(["-c", "-f", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "no key without the keyword");
    let (e, sock) = ebb_with_admin("certcli-delext-s", |sock, bind| {
        format!(
            "global\n    ssl-load-extra-del-ext\n    stats socket {} level admin\n{}",
            sock.display(),
            rest(bind)
        )
    });
    let port = e.addr().port();
    assert_eq!(served_serial(port, "a.test"), "1001");
    let (c2, k2) = pki.leaf(&["a.test"], 0x2002);
    let steps: Vec<(String, Option<String>)> = vec![
        (format!("set ssl cert {p}/site.crt"), Some(c2)),
        (format!("set ssl cert {p}/site.key"), Some(k2)),
        (format!("commit ssl cert {p}/site.crt"), None),
    ];
    let ours = run_steps(&sock, &steps);
    assert_eq!(
        ours[1],
        format!("Transaction updated for certificate {p}/site.crt!\n\n")
    );
    assert_eq!(ours[2], format!("Committing {p}/site.crt.\nSuccess!\n\n"));
    assert_eq!(served_serial(port, "a.test"), "2002");
    let hcfg = format!(
        "global\n    ssl-load-extra-del-ext\n{}",
        rest(&format!("127.0.0.1:{}", free_port()))
    );
    if let Some(h) = haproxy_with("certcli-delext-h", &hcfg) {
        same_as_haproxy(&steps, &ours, &h);
    }
    drop(e);
}

/// `show ssl ca-file` and `show ssl crl-file`: the CA files and CRLs
/// loaded, a bind line's "Used", a server's "Unused", each certificate
/// (in OpenSSL's store order: by subject, shorter encoding first) and
/// CRL, as haproxy 2.6 prints them.
#[test]
fn show_ca_and_crl_files_as_haproxy() {
    let Some((pki, d)) = setup("certcli-cafile") else {
        return;
    };
    let p = d.display();
    // A second CA with a shorter subject, after the first in the file.
    let mut cp = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    cp.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    cp.distinguished_name.push(rcgen::DnType::CommonName, "Z");
    let k2 = rcgen::KeyPair::generate().unwrap();
    let ca2 = cp.self_signed(&k2).unwrap();
    std::fs::write(
        d.join("both.pem"),
        format!("{}{}{}", pki.ca.pem(), ca2.pem(), pki.ca.pem()),
    )
    .unwrap();
    std::fs::write(d.join("ca2.pem"), ca2.pem()).unwrap();
    // Three: each certificate added sorts the store before it goes in
    // at the end, so the last one stays last (Y after Z).
    let mut cp = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    cp.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    cp.distinguished_name.push(rcgen::DnType::CommonName, "Y");
    let ca3 = cp.self_signed(&k2).unwrap();
    std::fs::write(
        d.join("three.pem"),
        format!("{}{}{}", pki.ca.pem(), ca2.pem(), ca3.pem()),
    )
    .unwrap();
    let crl = rcgen::CertificateRevocationListParams {
        this_update: rcgen::date_time_ymd(2026, 1, 2),
        next_update: rcgen::date_time_ymd(2036, 3, 4),
        crl_number: rcgen::SerialNumber::from(7u64),
        issuing_distribution_point: None,
        revoked_certs: vec![
            rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from(0x1001u64),
                revocation_time: rcgen::date_time_ymd(2026, 1, 1),
                reason_code: None,
                invalidity_date: None,
            },
            rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from(0x80u64),
                revocation_time: rcgen::date_time_ymd(2025, 12, 31),
                reason_code: None,
                invalidity_date: None,
            },
        ],
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    }
    .signed_by(&pki.ca, &pki.ca_key)
    .unwrap();
    std::fs::write(d.join("crl.pem"), crl.pem().unwrap()).unwrap();
    let rest = |b1: &str, back: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\
             frontend fe\n    bind {b1} ssl crt {p}/default.pem verify required ca-file {p}/both.pem crl-file {p}/crl.pem\n\
             \x20   http-request return status 200\n\
             backend be\n    server s {back} ssl verify required ca-file {p}/ca2.pem\n\
             backend be3\n    server s {back} ssl verify required ca-file {p}/three.pem\n"
        )
    };
    let back = format!("127.0.0.1:{}", free_port());
    let sock = d.join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{}",
        sock.display(),
        rest("BIND", &back)
    ));
    let steps = [
        "show ssl ca-file".to_string(),
        format!("show ssl ca-file {p}/both.pem"),
        format!("show ssl ca-file {p}/both.pem:2"),
        format!("show ssl ca-file {p}/ca2.pem"),
        format!("show ssl ca-file {p}/ca2.pem:0"),
        format!("show ssl ca-file {p}/crl.pem"),
        "show ssl crl-file".to_string(),
        format!("show ssl crl-file {p}/crl.pem"),
        format!("show ssl crl-file {p}/crl.pem:1"),
        format!("show ssl crl-file {p}/crl.pem:x"),
        format!("show ssl crl-file {p}/both.pem"),
        format!("show ssl ca-file {p}/three.pem:1"),
        format!("show ssl ca-file {p}/three.pem:3"),
    ];
    let ours: Vec<String> = steps.iter().map(|c| cli_cmd(&sock, c)).collect();
    assert_eq!(
        ours[0],
        format!("# filename\n{p}/both.pem - 2 certificate(s)\n{p}/ca2.pem - 1 certificate(s)\n{p}/three.pem - 3 certificate(s)\n\n")
    );
    assert!(
        ours[1].starts_with(&format!(
            "Filename: {p}/both.pem\nStatus: Used\n \nCertificate #1:\nSerial: "
        )),
        "{}",
        ours[1]
    );
    assert!(ours[1].contains("\nSubject: /CN=Z\n"), "{}", ours[1]);
    assert!(ours[3].contains("Status: Unused\n"), "{}", ours[3]);
    assert!(ours[11].contains("\nSubject: /CN=Z\n"), "{}", ours[11]);
    assert!(ours[12].contains("\nSubject: /CN=Y\n"), "{}", ours[12]);
    assert_eq!(
        ours[4],
        format!("wrong CA index after colons in '{p}/ca2.pem:0'!\n")
    );
    assert!(
        ours[7].ends_with(
            "Revoked Certificates:\n    Serial Number: 1001\n        Revocation Date: Jan  1 00:00:00 2026 GMT\n\
             \x20   Serial Number: 80\n        Revocation Date: Dec 31 00:00:00 2025 GMT\n\n"
        ),
        "{}",
        ours[7]
    );
    if let Some(h) = haproxy_with(
        "certcli-cafile-h",
        &rest(&format!("127.0.0.1:{}", free_port()), &back),
    ) {
        for (c, o) in steps.iter().zip(&ours) {
            // haproxy's HTTP client loads the system's CAs (`@system-ca`);
            // ebb has none.
            let theirs: String = cli_cmd(&h.sock, c)
                .split_inclusive('\n')
                .filter(|l| !l.starts_with("@system-ca "))
                .collect();
            assert_eq!(*o, theirs, "{c}");
        }
    }
    drop(e);
}

/// An OCSP response from `openssl ocsp` acting as the responder of
/// `pki`'s CA, about the certificate `crt` (a PEM file) of serial
/// `serial` (upper-case hex), `revoked` or good; `more`: more arguments.
fn ocsp_response(
    pki: &Pki,
    d: &Path,
    crt: &Path,
    serial: &str,
    revoked: bool,
    more: &[&str],
) -> Vec<u8> {
    let ca = d.join("ocsp-ca.pem");
    let key = d.join("ocsp-ca.key");
    std::fs::write(&ca, pki.ca.pem()).unwrap();
    std::fs::write(&key, pki.ca_key.serialize_pem()).unwrap();
    let index = d.join(format!("index-{serial}.txt"));
    let line = if revoked {
        format!("R\t301231000000Z\t250101000000Z,keyCompromise\t{serial}\tunknown\t/CN=x\n")
    } else {
        format!("V\t301231000000Z\t\t{serial}\tunknown\t/CN=x\n")
    };
    std::fs::write(&index, line).unwrap();
    let out = d.join(format!("resp-{serial}{}.der", more.concat()));
    let o = Command::new("openssl")
        .arg("ocsp")
        .arg("-index")
        .arg(&index)
        .arg("-rsigner")
        .arg(&ca)
        .arg("-rkey")
        .arg(&key)
        .arg("-CA")
        .arg(&ca)
        .arg("-issuer")
        .arg(&ca)
        .arg("-cert")
        .arg(crt)
        .arg("-respout")
        .arg(&out)
        .args(["-ndays", "7"])
        .args(more)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(&out).unwrap()
}

/// `show ssl ocsp-response [ID]` and `show ssl cert FILE.ocsp`: the
/// responses served (a good one signed by name, a revoked one signed by
/// key hash with a nonce), one's details, a pending one, and the errors,
/// as haproxy 2.6 prints them.
#[test]
fn show_ocsp_responses_as_haproxy() {
    let Some((pki, d)) = setup("certcli-ocsp") else {
        return;
    };
    let ca = pki.ca.pem();
    // The issuer in the chain: haproxy wants it to file a response.
    for (file, names, serial) in [
        ("site", &["a.test"][..], 0x1001u64),
        ("b", &["b.test"][..], 0x2002),
    ] {
        let (c, k) = pki.leaf(names, serial);
        std::fs::write(d.join(format!("{file}.crt")), &c).unwrap();
        std::fs::write(d.join(format!("{file}.pem")), format!("{c}{ca}{k}")).unwrap();
    }
    let good = ocsp_response(
        &pki,
        &d,
        &d.join("site.crt"),
        "1001",
        false,
        &["-no_nonce", "-resp_no_certs"],
    );
    std::fs::write(d.join("site.pem.ocsp"), &good).unwrap();
    let revoked = ocsp_response(
        &pki,
        &d,
        &d.join("b.crt"),
        "2002",
        true,
        &["-resp_no_certs", "-resp_key_id"],
    );
    std::fs::write(d.join("b.pem.ocsp"), &revoked).unwrap();
    let with_certs = ocsp_response(&pki, &d, &d.join("b.crt"), "2002", false, &["-no_nonce"]);
    let renewed = ocsp_response(
        &pki,
        &d,
        &d.join("site.crt"),
        "1001",
        false,
        &["-no_nonce", "-resp_no_certs", "-nmin", "90"],
    );
    std::fs::write(d.join("renewed.der"), &renewed).unwrap();
    let b64 = |f: &str| {
        let o = Command::new("openssl")
            .args(["base64", "-A", "-in", f])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    std::fs::write(d.join("with-certs.der"), &with_certs).unwrap();
    std::fs::write(d.join("revoked.der"), &revoked).unwrap();
    let b_file = d.join("b.pem").display().to_string();
    let more = format!("    bind BIND ssl crt {b_file}\n");
    let (e, sock) = start("certcli-ocsp-s", &d, &more);
    let hport = free_port();
    let h = haproxy_with(
        "certcli-ocsp-h",
        &format!(
            "{}{}",
            tls_cfg(&d, &format!("127.0.0.1:{hport}")),
            more.replace("BIND", &format!("127.0.0.1:{}", free_port()))
        ),
    );
    let site = d.join("site.pem").display().to_string();
    let default = d.join("default.pem").display().to_string();
    let key_of = |f: &str| {
        let a = cli_cmd(&sock, &format!("show ssl cert {f}"));
        a.lines()
            .find_map(|l| l.strip_prefix("OCSP Response Key: "))
            .unwrap_or_else(|| panic!("no key: {a}"))
            .to_string()
    };
    let (k1, k2) = (key_of(&site), key_of(&b_file));
    assert!(k1.starts_with("303b300906052b0e03021a0500"), "{k1}");
    let steps: Vec<(String, Option<String>)> = vec![
        ("show ssl ocsp-response".into(), None),
        (format!("show ssl ocsp-response {k1}"), None),
        (format!("show ssl ocsp-response {k2}"), None),
        (format!("show ssl ocsp-response {k1}00"), None),
        (format!("show ssl ocsp-response {k1}0"), None),
        ("show ssl ocsp-response 30zz".into(), None),
        (format!("show ssl ocsp-response {}", k1.repeat(3)), None),
        (format!("show ssl cert {site}.ocsp"), None),
        (format!("show ssl cert {b_file}.ocsp"), None),
        (format!("show ssl cert {default}.ocsp"), None),
        ("show ssl cert /nowhere.pem.ocsp".into(), None),
        (format!("show ssl cert *{site}.ocsp"), None),
        (
            format!("set ssl cert {site}.ocsp"),
            Some(b64(&d.join("revoked.der").display().to_string())),
        ),
        (format!("show ssl cert *{site}.ocsp"), None),
        (format!("show ssl cert {site}.ocsp"), None),
        (format!("abort ssl cert {site}"), None),
        (
            format!("set ssl cert {default}"),
            Some(std::fs::read_to_string(d.join("default.pem")).unwrap()),
        ),
        (format!("show ssl cert *{default}.ocsp"), None),
        (format!("abort ssl cert {default}"), None),
        (
            format!("set ssl cert {site}.ocsp"),
            Some(b64(&d.join("renewed.der").display().to_string())),
        ),
        (format!("commit ssl cert {site}"), None),
        (format!("show ssl cert {site}.ocsp"), None),
        (format!("show ssl ocsp-response {k1}"), None),
        ("show ssl ocsp-response".into(), None),
    ];
    let ours = run_steps(&sock, &steps);
    // Spot checks that hold without haproxy.
    assert!(
        ours[0].starts_with(&format!(
            "# Certificate IDs\nCertificate ID key : {k1}\n Certificate ID:\n   Issuer Name Hash: "
        )),
        "{}",
        ours[0]
    );
    assert!(ours[0].contains("   Serial Number: 1001\n"), "{}", ours[0]);
    assert!(ours[0].contains("   Serial Number: 2002\n"), "{}", ours[0]);
    assert!(
        ours[1].starts_with("OCSP Response Data:\n    OCSP Response Status: successful (0x0)\n    Response Type: Basic OCSP Response\n    Version: 1 (0x0)\n    Responder Id: CN = Ebb Test CA, O = Ebb Test\n"),
        "{}",
        ours[1]
    );
    assert!(ours[1].contains("    Cert Status: good\n"), "{}", ours[1]);
    assert!(ours[2].contains("    Cert Status: revoked\n    Revocation Time: Jan  1 00:00:00 2025 GMT\n    Revocation Reason: keyCompromise (0x1)\n"), "{}", ours[2]);
    assert!(
        ours[2].contains("\n \n    Response Extensions:\n        OCSP Nonce: \n"),
        "{}",
        ours[2]
    );
    assert_eq!(ours[1], ours[7]);
    assert_eq!(
        ours[4],
        "Certificate ID does not match any certificate.\n\n"
    );
    assert_eq!(
        ours[6],
        "'show ssl ocsp-response' received a too big key.\n\n"
    );
    assert_eq!(ours[9], "\n");
    assert_eq!(ours[13], ours[2]);
    // After the commit, the renewed response (a later next update) is
    // the one served.
    assert_ne!(ours[21], ours[1]);
    assert_eq!(ours[21], ours[22]);
    if let Some(h) = &h {
        same_as_haproxy(&steps, &ours, h);
    }
    // A response that carries its signer's certificate: printed after it
    // as OpenSSL's `X509_print` and PEM, as haproxy does.
    let steps2: Vec<(String, Option<String>)> = vec![
        (
            format!("set ssl cert {site}.ocsp"),
            Some(b64(&d.join("with-certs.der").display().to_string())),
        ),
        (format!("show ssl cert *{site}.ocsp"), None),
        (format!("abort ssl cert {site}"), None),
    ];
    let ours2 = run_steps(&sock, &steps2);
    assert!(ours2[0].starts_with("Transaction created"), "{}", ours2[0]);
    assert!(
        ours2[1].contains("\nCertificate:\n    Data:\n        Version: 3 (0x2)\n"),
        "{}",
        ours2[1]
    );
    assert!(
        ours2[1].contains("X509v3 Basic Constraints: critical\n                CA:TRUE\n"),
        "{}",
        ours2[1]
    );
    assert!(
        ours2[1].ends_with("-----END CERTIFICATE-----\n\n"),
        "{}",
        ours2[1]
    );
    if let Some(h) = &h {
        same_as_haproxy(&steps2, &ours2, h);
    }
    drop(e);
}

/// A CRL of `pki`'s CA revoking `serials`.
fn crl_of(pki: &Pki, serials: &[u64]) -> String {
    rcgen::CertificateRevocationListParams {
        this_update: rcgen::date_time_ymd(2026, 1, 2),
        next_update: rcgen::date_time_ymd(2036, 3, 4),
        crl_number: rcgen::SerialNumber::from(serials.len() as u64 + 1),
        issuing_distribution_point: None,
        revoked_certs: serials
            .iter()
            .map(|s| rcgen::RevokedCertParams {
                serial_number: rcgen::SerialNumber::from(*s),
                revocation_time: rcgen::date_time_ymd(2026, 1, 1),
                reason_code: None,
                invalidity_date: None,
            })
            .collect(),
        key_identifier_method: rcgen::KeyIdMethod::Sha256,
    }
    .signed_by(&pki.ca, &pki.ca_key)
    .unwrap()
    .pem()
    .unwrap()
}

/// Whether a new TLS connection to `port` showing the client certificate
/// `who` (`DIR/who.crt`, `DIR/who.key`) gets an answer.
fn passes(d: &Path, port: u16, who: &str) -> bool {
    // (No SNI for an address.)
    passes_for(d, port, "127.0.0.1", who)
}

/// `set ssl ca-file` / `commit ssl ca-file` (and the same for CRL files)
/// change how new handshakes verify client certificates on the bind line
/// that uses the file; a connection already made is not touched. The CLI's
/// answers are haproxy 2.6's, and haproxy's verification changes the same
/// way.
#[test]
fn ca_and_crl_commits_change_client_verification() {
    let Some((pki, d)) = setup("certcli-cacommit") else {
        return;
    };
    let pki2 = Pki::named("Ebb Test CA2");
    for (who, ca, serial) in [
        ("c1", &pki, 0x501),
        ("c2", &pki2, 0x502),
        ("c3", &pki, 0x503),
    ] {
        let name = format!("{who}.test");
        let (c, k) = ca.leaf(&[name.as_str()], serial);
        std::fs::write(d.join(format!("{who}.crt")), c).unwrap();
        std::fs::write(d.join(format!("{who}.key")), k).unwrap();
    }
    std::fs::write(d.join("ca.pem"), pki.ca.pem()).unwrap();
    // Every CA of a chain needs a CRL: CA2's is there from the start.
    let empty_crls = format!("{}{}", crl_of(&pki, &[]), crl_of(&pki2, &[]));
    std::fs::write(d.join("crl.pem"), &empty_crls).unwrap();
    let p = d.display();
    let rest = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 30s\n    timeout server 5s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind} ssl crt {p}/default.pem verify required ca-file {p}/ca.pem crl-file {p}/crl.pem\n\
             \x20   http-request return status 200 content-type text/plain string ok\n"
        )
    };
    let (e, sock) = ebb_with_admin("certcli-cacommit-s", |sock, bind| {
        format!(
            "global\n    stats socket {} level admin\n{}",
            sock.display(),
            rest(bind)
        )
    });
    let port = e.addr().port();
    let hport = free_port();
    let h = haproxy_with("certcli-cacommit-h", &rest(&format!("127.0.0.1:{hport}")));
    let ports: Vec<u16> = std::iter::once(port)
        .chain(h.as_ref().map(|_| hport))
        .collect();
    let check = |who: &str, want: bool, when: &str| {
        for p in &ports {
            assert_eq!(passes(&d, *p, who), want, "{who} on port {p} {when}");
        }
    };
    check("c1", true, "at start");
    check("c2", false, "at start");
    // A connection made with c1 before its certificate is revoked.
    let (crt, key) = (d.join("c1.crt"), d.join("c1.key"));
    let mut held = Held::open_with(
        port,
        "x.test",
        &[
            "-cert",
            crt.to_str().unwrap(),
            "-key",
            key.to_str().unwrap(),
        ],
    );
    held.request(1);

    let ca = format!("{p}/ca.pem");
    let crl = format!("{p}/crl.pem");
    let both = format!("{}{}", pki.ca.pem(), pki2.ca.pem());
    let steps1: Vec<(String, Option<String>)> = vec![
        (format!("set ssl ca-file {ca}"), Some("garbage".into())),
        (format!("set ssl ca-file {ca}"), Some(both.clone())),
        ("show ssl ca-file".into(), None),
        (format!("show ssl ca-file *{ca}"), None),
        (format!("set ssl crl-file {crl}"), Some(empty_crls.clone())),
        (format!("commit ssl crl-file {ca}"), None),
        (format!("del ssl ca-file {ca}"), None),
        (format!("abort ssl crl-file {crl}"), None),
        (format!("set ssl ca-file {p}/none.pem"), Some(both.clone())),
    ];
    let ours = run_steps(&sock, &steps1);
    assert_eq!(ours[0], format!("Invalid payload\nCan't update {ca}!\n\n"));
    assert_eq!(ours[1], format!("transaction created for CA {ca}!\n\n"));
    assert!(
        ours[2].starts_with(&format!("# transaction\n*{ca} - 2 certificate(s)\n")),
        "{}",
        ours[2]
    );
    if let Some(h) = &h {
        same_as_haproxy(&steps1, &ours, h);
    }
    check("c2", false, "before the commit");
    let steps2: Vec<(String, Option<String>)> = vec![(format!("commit ssl ca-file {ca}"), None)];
    let ours = run_steps(&sock, &steps2);
    assert_eq!(ours[0], format!("Committing {ca}.\nSuccess!\n\n"));
    if let Some(h) = &h {
        same_as_haproxy(&steps2, &ours, h);
    }
    check("c2", true, "after the CA file's commit");
    check("c1", true, "after the CA file's commit");

    // A CRL that revokes c1.
    let revoking = format!("{}{}", crl_of(&pki, &[0x501]), crl_of(&pki2, &[]));
    let steps3: Vec<(String, Option<String>)> = vec![
        (format!("set ssl crl-file {crl}"), Some(revoking)),
        (format!("commit ssl crl-file {crl}"), None),
        (format!("show ssl crl-file {crl}:1"), None),
        (format!("del ssl crl-file {crl}"), None),
        (format!("new ssl crl-file {p}/fresh.crl"), None),
        (format!("show ssl crl-file {p}/fresh.crl"), None),
        (format!("del ssl crl-file {p}/fresh.crl"), None),
    ];
    let ours = run_steps(&sock, &steps3);
    assert_eq!(ours[1], format!("Committing {crl}.\nSuccess!\n\n"));
    assert!(ours[2].contains("Serial Number: 0501\n"), "{}", ours[2]);
    if let Some(h) = &h {
        same_as_haproxy(&steps3, &ours, h);
    }
    check("c1", false, "after the CRL's commit");
    check("c3", true, "after the CRL's commit");
    // The connection made before is not verified again.
    held.request(2);
    // A reload reads the files again.
    e.signal("HUP");
    wait_until("c1 passes again after SIGHUP", || passes(&d, port, "c1"));
    assert!(!passes(&d, port, "c2"), "the file's CA only after SIGHUP");
    drop(e);
}

/// A server with a `crt` follows a commit of its `ca-file` or `crl-file`
/// (haproxy 2.6 links a server to the files through its certificate); one
/// without keeps what it loaded and the file stays `Unused`, as haproxy's.
#[test]
fn a_servers_ca_and_crl_files_follow_a_commit_with_a_crt() {
    let Some((pki, d)) = setup("certcli-srvca") else {
        return;
    };
    let pki2 = Pki::named("Ebb Test CA2");
    let (c, k) = pki.leaf(&["client.test"], 0x4004);
    std::fs::write(d.join("client.pem"), format!("{c}{k}")).unwrap();
    for f in ["ca1.pem", "ca2.pem"] {
        std::fs::write(d.join(f), pki.ca.pem()).unwrap();
    }
    std::fs::write(d.join("crl.pem"), crl_of(&pki, &[])).unwrap();
    let origin = free_port();
    let p = d.display();
    let rest = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 30s\n    timeout server 5s\n    timeout connect 5s\n\
             frontend f\n    bind {bind}\n    use_backend b2 if {{ path_beg /nocrt }}\n    default_backend b1\n\
             backend b1\n    server s1 127.0.0.1:{origin} ssl verify required ca-file {p}/ca1.pem crl-file {p}/crl.pem crt {p}/client.pem\n\
             backend b2\n    server s2 127.0.0.1:{origin} ssl verify required ca-file {p}/ca2.pem\n"
        )
    };
    let (e, sock) = ebb_with_admin("certcli-srvca-s", |sock, bind| {
        format!(
            "global\n    stats socket {} level admin\n{}\
             frontend o\n    bind 127.0.0.1:{origin} ssl crt {p}/default.pem\n\
             \x20   http-request return status 200 content-type text/plain string ok\n",
            sock.display(),
            rest(bind)
        )
    });
    let hport = free_port();
    let h = haproxy_with("certcli-srvca-h", &rest(&format!("127.0.0.1:{hport}")));
    let addrs: Vec<std::net::SocketAddr> = std::iter::once(e.addrs[0])
        .chain(
            h.as_ref()
                .map(|_| format!("127.0.0.1:{hport}").parse().unwrap()),
        )
        .collect();
    let check = |path: &str, want: u16, when: &str| {
        for a in &addrs {
            assert_eq!(get(*a, path).status, want, "{path} through {a} {when}");
        }
    };
    check("/", 200, "at start");
    check("/nocrt", 200, "at start");
    let (ca1, ca2, crl) = (
        format!("{p}/ca1.pem"),
        format!("{p}/ca2.pem"),
        format!("{p}/crl.pem"),
    );
    let steps: Vec<(String, Option<String>)> = vec![
        (format!("show ssl ca-file {ca1}"), None),
        (format!("show ssl ca-file {ca2}"), None),
        (format!("set ssl ca-file {ca1}"), Some(pki2.ca.pem())),
        (format!("commit ssl ca-file {ca1}"), None),
        (format!("set ssl ca-file {ca2}"), Some(pki2.ca.pem())),
        (format!("commit ssl ca-file {ca2}"), None),
    ];
    let ours = run_steps(&sock, &steps);
    assert!(ours[0].contains("Status: Used\n"), "{}", ours[0]);
    assert!(ours[1].contains("Status: Unused\n"), "{}", ours[1]);
    assert_eq!(ours[3], format!("Committing {ca1}.\nSuccess!\n\n"));
    assert_eq!(ours[5], format!("Committing {ca2}\nSuccess!\n\n"));
    if let Some(h) = &h {
        same_as_haproxy(&steps, &ours, h);
    }
    check("/", 503, "once its CA file holds another CA");
    check("/nocrt", 200, "without a crt");
    let steps: Vec<(String, Option<String>)> = vec![
        (format!("set ssl ca-file {ca1}"), Some(pki.ca.pem())),
        (format!("commit ssl ca-file {ca1}"), None),
        // The origin's certificate (serial 1000) revoked.
        (
            format!("set ssl crl-file {crl}"),
            Some(crl_of(&pki, &[0x1000])),
        ),
        (format!("commit ssl crl-file {crl}"), None),
    ];
    let ours = run_steps(&sock, &steps);
    if let Some(h) = &h {
        same_as_haproxy(&steps, &ours, h);
    }
    check("/", 503, "once its CRL revokes the origin's certificate");
    let steps: Vec<(String, Option<String>)> = vec![
        (format!("set ssl crl-file {crl}"), Some(crl_of(&pki, &[]))),
        (format!("commit ssl crl-file {crl}"), None),
    ];
    let ours = run_steps(&sock, &steps);
    if let Some(h) = &h {
        same_as_haproxy(&steps, &ours, h);
    }
    check("/", 200, "with the CA and an empty CRL again");
    drop(e);
}

/// The `Cert Status:` line of the OCSP response a new TLS connection to
/// `port` with SNI `name` gets stapled (openssl s_client -status).
fn stapled_status(port: u16, name: &str) -> String {
    let o = Command::new("openssl")
        .args(["s_client", "-status", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", name])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.contains("Cert Status:"))
        .map(|l| l.trim().to_string())
        .unwrap_or_default()
}

/// `set ssl ocsp-response`: a response for a certificate served replaces
/// its stapled one for new handshakes (`show ssl ocsp-response` shows it);
/// the errors as haproxy 2.6's (which takes the command at any level).
#[test]
fn set_ocsp_response_staples_the_new_one() {
    let Some((pki, d)) = setup("certcli-setocsp") else {
        return;
    };
    let ca = pki.ca.pem();
    for (file, name, serial) in [("site", "a.test", 0x1001u64), ("b", "b.test", 0x2002)] {
        let (c, k) = pki.leaf(&[name], serial);
        std::fs::write(d.join(format!("{file}.crt")), &c).unwrap();
        std::fs::write(d.join(format!("{file}.pem")), format!("{c}{ca}{k}")).unwrap();
    }
    let none: &[&str] = &["-no_nonce", "-resp_no_certs"];
    let good = ocsp_response(&pki, &d, &d.join("site.crt"), "1001", false, none);
    std::fs::write(d.join("site.pem.ocsp"), &good).unwrap();
    let revoked = ocsp_response(&pki, &d, &d.join("site.crt"), "1001", true, none);
    let other = ocsp_response(&pki, &d, &d.join("b.crt"), "2002", false, none);
    let b64 = |der: &[u8]| {
        let f = d.join("tmp.der");
        std::fs::write(&f, der).unwrap();
        let o = Command::new("openssl")
            .args(["base64", "-A", "-in"])
            .arg(&f)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let (revoked64, other64) = (b64(&revoked), b64(&other));
    let (e, sock) = start("certcli-setocsp-s", &d, "");
    let port = e.addr().port();
    let hport = free_port();
    let h = haproxy_with(
        "certcli-setocsp-h",
        &tls_cfg(&d, &format!("127.0.0.1:{hport}")),
    );
    let ports: Vec<u16> = std::iter::once(port)
        .chain(h.as_ref().map(|_| hport))
        .collect();
    for p in &ports {
        assert_eq!(
            stapled_status(*p, "a.test"),
            "Cert Status: good",
            "port {p}"
        );
    }
    // The payload form, base64 wrapped on lines.
    let wrapped: String = revoked64
        .as_bytes()
        .chunks(64)
        .map(|c| format!("{}\n", String::from_utf8_lossy(c)))
        .collect();
    let steps: Vec<(String, Option<String>)> = vec![
        ("set ssl ocsp-response".into(), None),
        ("set ssl ocsp-response !!".into(), None),
        ("set ssl ocsp-response AAAA".into(), None),
        (format!("set ssl ocsp-response {other64}"), None),
        ("set ssl ocsp-response".into(), Some(wrapped)),
        ("show ssl ocsp-response".into(), None),
        (format!("show ssl cert {}/site.pem.ocsp", d.display()), None),
        (format!("set ssl ocsp-response {revoked64}"), None),
    ];
    let ours = run_steps(&sock, &steps);
    assert_eq!(ours[2], "Unable to parse OCSP response.\n\n");
    assert_eq!(
        ours[3],
        "OCSP single response: Certificate ID does not match any certificate or issuer.\n\n"
    );
    assert_eq!(ours[4], "OCSP Response updated!\n\n");
    assert!(ours[6].contains("Cert Status: revoked\n"), "{}", ours[6]);
    if let Some(h) = &h {
        same_as_haproxy(&steps, &ours, h);
    }
    for p in &ports {
        assert_eq!(
            stapled_status(*p, "a.test"),
            "Cert Status: revoked",
            "port {p}"
        );
    }
    drop(e);
}
