//! HTTP/1 keywords of HAProxy 2.6 users have in their configurations,
//! through the real binary and beside HAProxy when it is installed:
//! `h1-case-adjust`, `h1-case-adjust-file` with `option
//! h1-case-adjust-bogus-client|server`, and `http-request early-hint`.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use common::origin::{Mode, Origin};
use common::*;

/// Sends `req` on a new connection and reads until the peer closes.
fn exchange(a: SocketAddr, req: &[u8]) -> String {
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(req).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

/// The field lines of `head` (after its first line, up to the empty one).
fn field_lines(head: &str) -> Vec<String> {
    head.split("\r\n")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

const CANNED: &[u8] =
    b"HTTP/1.1 200 OK\r\nx-mixed-case: a\r\nx-other: b\r\ncontent-length: 2\r\n\r\nok";

fn case_cfg(sock: &Path, bind: &str, file: &Path, o: SocketAddr, opts: (&str, &str)) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         \x20   h1-case-adjust x-foo X-FOO\n\
         \x20   h1-case-adjust x-mixed-case X-MiXeD-CaSe\n\
         \x20   h1-case-adjust-file {}\n\
         defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\
         \x20   option h1-case-adjust-bogus-client\n\
         frontend fe\n    bind {bind}\n    {}\n    default_backend be\n\
         backend be\n    {}\n    server s {o}\n",
        sock.display(),
        file.display(),
        opts.0,
        opts.1,
    )
}

/// `option h1-case-adjust-bogus-server` (backend) writes the request's
/// names the map has in the map's case, `-client` (frontend) the
/// response's; names not in the map are left alone; a `from` that is not
/// lower case never matches, as in HAProxy (which looks up lower-case
/// names).
#[test]
fn h1_case_adjust_names_on_the_sides_the_options_name() {
    let dir = scratch("h1case");
    let file = dir.join("hdrs.map");
    std::fs::write(
        &file,
        "# the map\n\n   content-length\tContent-Length  \nx-bar X-Bar\r\nX-Never x-never\n",
    )
    .unwrap();
    let origin = Origin::start("case", Mode::Canned(CANNED));
    let req: &[u8] = b"POST / HTTP/1.1\r\nHost: x\r\nx-foo: 1\r\nX-BAR: 2\r\nX-Never: 3\r\nx-keep: 4\r\ncontent-length: 0\r\nConnection: close\r\n\r\n";
    let opts = (
        "# client side from defaults",
        "option h1-case-adjust-bogus-server",
    );
    let check = |fe: SocketAddr| {
        let got = exchange(fe, req);
        let (head, body) = got.split_once("\r\n\r\n").expect("a head");
        assert!(head.starts_with("HTTP/1.1 200"), "{got}");
        assert_eq!(body, "ok");
        let fields = field_lines(&format!("{head}\r\n\r\n"));
        assert!(
            fields.contains(&"X-MiXeD-CaSe: a".to_string()),
            "{fields:?}"
        );
        let seen = origin.heads.lock().unwrap().pop().expect("a request");
        let fields = field_lines(&seen);
        for want in ["X-FOO: 1", "X-Bar: 2", "Content-Length: 0"] {
            assert!(fields.contains(&want.to_string()), "{want} in {fields:?}");
        }
        // Not in the map (its entry is not lower case): as received, or
        // lower case from HAProxy.
        assert!(
            fields.iter().any(|f| f.eq_ignore_ascii_case("x-never: 3")),
            "{fields:?}"
        );
        assert!(!fields.contains(&"X-NEVER: 3".to_string()));
        // From an HTTP/2 client (lower-case names) too.
        if have("curl") {
            let url = format!("http://{fe}/h2");
            let (ok, _, err) = curl(&["--http2-prior-knowledge", "-H", "x-foo: 5", &url]);
            assert!(ok, "{err}");
            let seen = origin.heads.lock().unwrap().pop().expect("a request");
            assert!(
                field_lines(&seen).contains(&"X-FOO: 5".to_string()),
                "{seen}"
            );
        }
        fields
    };
    let (ebb, _) = ebb_with_admin("h1case", |k, b| case_cfg(k, b, &file, origin.addr, opts));
    let ours = check(ebb.addr());
    // ebb keeps the client's case where the map says nothing.
    assert!(ours.contains(&"x-keep: 4".to_string()), "{ours:?}");
    assert!(ours.contains(&"X-Never: 3".to_string()), "{ours:?}");
    if let Some((_h, fe)) =
        haproxy_beside("h1case", |k, b| case_cfg(k, b, &file, origin.addr, opts))
    {
        check(fe);
    }
}

/// Without the options (or with `no option ...` after a `defaults` that
/// sets them) the map changes nothing: the names go as ebb writes them
/// (HAProxy writes them lower case).
#[test]
fn h1_case_adjust_without_the_options_changes_nothing() {
    let dir = scratch("h1case-off");
    let file = dir.join("hdrs.map");
    std::fs::write(&file, "content-length CONTENT-LENGTH\n").unwrap();
    let origin = Origin::start("case-off", Mode::Canned(CANNED));
    let req: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nx-foo: 1\r\nConnection: close\r\n\r\n";
    let opts = (
        "no option h1-case-adjust-bogus-client",
        "# no server option",
    );
    let check = |fe: SocketAddr| {
        let got = exchange(fe, req);
        assert!(!got.contains("X-MiXeD-CaSe"), "{got}");
        assert!(!got.contains("CONTENT-LENGTH"), "{got}");
        let seen = origin.heads.lock().unwrap().pop().expect("a request");
        assert!(!seen.contains("X-FOO"), "{seen}");
        assert!(seen.contains("x-foo: 1"), "{seen}");
    };
    let (ebb, _) = ebb_with_admin("h1case-off", |k, b| {
        case_cfg(k, b, &file, origin.addr, opts)
    });
    check(ebb.addr());
    if let Some((_h, fe)) = haproxy_beside("h1case-off", |k, b| {
        case_cfg(k, b, &file, origin.addr, opts)
    }) {
        check(fe);
    }
}

/// ebb's own answers (an error, a `return`) and the fields it writes
/// itself go through the client side's map too.
#[test]
fn h1_case_adjust_applies_to_ebbs_own_answers() {
    let cfg = "global\n    h1-case-adjust content-type CONTENT-TYPE\n    h1-case-adjust x-r X-R\n\
               defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\
               frontend fe\n    bind BIND\n    option h1-case-adjust-bogus-client\n\
               \x20   http-request return status 200 content-type text/plain string hi hdr x-r 1 if { path /r }\n\
               \x20   http-request deny\n";
    let ebb = Ebb::start(cfg);
    let got = exchange(
        ebb.addr(),
        b"GET /r HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let fields = field_lines(&got);
    assert!(
        fields.contains(&"CONTENT-TYPE: text/plain".to_string()),
        "{got}"
    );
    assert!(fields.contains(&"X-R: 1".to_string()), "{got}");
    let got = exchange(
        ebb.addr(),
        b"GET /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(got.starts_with("HTTP/1.1 403"), "{got}");
    assert!(
        field_lines(&got).contains(&"CONTENT-TYPE: text/html".to_string()),
        "{got}"
    );
}

/// The configuration errors HAProxy 2.6 makes, each with its `file:line`
/// (a bad line of the map file as that file's line).
#[test]
fn h1_case_adjust_refusals() {
    let dir = scratch("h1case-refused");
    let head = "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n";
    let cases = [
        (
            "global\n    h1-case-adjust x-a X-B\n",
            "f0.cfg:2: <from> and <to> must not differ except the case",
            true,
        ),
        (
            "global\n    h1-case-adjust x-a X-A\n    h1-case-adjust x-a x-A\n",
            "f1.cfg:3: duplicate entry 'x-a'",
            true,
        ),
        (
            "global\n    h1-case-adjust x-a\n",
            "f2.cfg:2: 'h1-case-adjust' expects <from> and <to> as argument.",
            true,
        ),
        (
            "global\n    h1-case-adjust x-a X-A X-A\n",
            "f3.cfg:2: 'h1-case-adjust' cannot handle unexpected argument 'X-A'",
            true,
        ),
        (
            "global\n    h1-case-adjust-file\n",
            "f4.cfg:2: 'h1-case-adjust-file' expects <file> as argument.",
            true,
        ),
        (
            "global\n    h1-case-adjust-file nowhere.map\n",
            "f5.cfg:2: h1-case-adjust-file 'nowhere.map': failed to open file",
            true,
        ),
        (
            "global\n    h1-case-adjust x-b X-B\n    h1-case-adjust-file bad.map\n",
            "bad.map:4: duplicate entry 'x-b' (the 'h1-case-adjust-file' of f6.cfg:3)",
            true,
        ),
        (
            "global\n    h1-case-adjust-file bad2.map\n",
            "bad2.map:2: expect <to> (the 'h1-case-adjust-file' of f7.cfg:2)",
            true,
        ),
    ];
    std::fs::write(dir.join("bad.map"), "# x\nx-a X-A\n\nx-b X-b\n").unwrap();
    std::fs::write(dir.join("bad2.map"), "x-a X-A\n  x-c   \n").unwrap();
    for (i, (text, what, hap)) in cases.iter().enumerate() {
        let text = format!("{text}{head}");
        assert_refused(&dir, &format!("f{i}.cfg"), &text, what, *hap);
    }
    // The options where they apply only.
    assert_refused(
        &dir,
        "o0.cfg",
        &format!("{head}backend be\n    option h1-case-adjust-bogus-client\n"),
        "o0.cfg:7: 'option h1-case-adjust-bogus-client' is not allowed",
        false,
    );
    assert_refused(
        &dir,
        "o1.cfg",
        &format!(
            "{head}frontend fe\n    bind 127.0.0.1:1\n    option h1-case-adjust-bogus-server x\n"
        ),
        "o1.cfg:8: 'option h1-case-adjust-bogus-server' is not allowed",
        false,
    );
}

fn hint_cfg(sock: &Path, bind: &str, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n\
         \x20   http-request early-hint link \"</a.css>; rel=preload; as=style\"\n\
         \x20   http-request early-hint link \"<%[path]>; rel=preload\"\n\
         \x20   http-request set-header x-after 1\n\
         \x20   http-request early-hint x-second %[req.hdr(host)] if {{ path /two }}\n\
         \x20   http-request early-hint x-never no if {{ path /never }}\n\
         \x20   default_backend be\n\
         backend be\n    http-request early-hint x-be be\n    server s {o}\n",
        sock.display(),
    )
}

/// The 103s a response text starts with, lower-cased (HAProxy writes the
/// names lower case), and what follows them.
fn hints_of(got: &str) -> (Vec<String>, &str) {
    let mut rest = got;
    let mut hints = Vec::new();
    while rest.starts_with("HTTP/1.1 103") {
        let Some((h, after)) = rest.split_once("\r\n\r\n") else {
            break;
        };
        hints.push(h.to_ascii_lowercase());
        rest = after;
    }
    (hints, rest)
}

/// `http-request early-hint`: adjacent rules make one `103 Early Hints`,
/// each proxy's rules their own, log-format values; sent to HTTP/1.1
/// clients before the final answer, not to HTTP/1.0 ones.
#[test]
fn early_hint_sends_103s_before_the_answer() {
    let origin = Origin::start("hints", Mode::Ok);
    let check = |fe: SocketAddr| {
        let got = exchange(
            fe,
            b"GET /two HTTP/1.1\r\nHost: h.example\r\nConnection: close\r\n\r\n",
        );
        let (hints, rest) = hints_of(&got);
        assert_eq!(
            hints,
            vec![
                "http/1.1 103 early hints\r\nlink: </a.css>; rel=preload; as=style\r\nlink: </two>; rel=preload",
                "http/1.1 103 early hints\r\nx-second: h.example",
                "http/1.1 103 early hints\r\nx-be: be",
            ],
            "{got}"
        );
        assert!(rest.starts_with("HTTP/1.1 200"), "{got}");
        let got = exchange(fe, b"GET /one HTTP/1.0\r\nHost: h.example\r\n\r\n");
        assert!(
            got.starts_with("HTTP/1.0 200") || got.starts_with("HTTP/1.1 200"),
            "{got}"
        );
        assert!(!got.contains(" 103 "), "{got}");
    };
    // curl prints each answer's head: the 103s, then the final one; over
    // HTTP/2 too (prior knowledge on the plain bind).
    let with_curl = |fe: SocketAddr| {
        let url = format!("http://{fe}/x");
        let (ok, out, err) = curl(&["-v", &url]);
        assert!(ok, "{err}");
        assert!(err.contains("< HTTP/1.1 103 Early Hints"), "{err}");
        assert!(
            err.to_ascii_lowercase()
                .contains("< link: </x>; rel=preload"),
            "{err}"
        );
        assert!(err.contains("< HTTP/1.1 200"), "{err}");
        assert!(out.contains("hints /x"), "{out}");
        let (ok, out, err) = curl(&["-v", "--http2-prior-knowledge", &url]);
        assert!(ok, "{err}");
        let err = err.to_ascii_lowercase();
        assert_eq!(err.matches("< http/2 103").count(), 2, "{err}");
        assert!(err.contains("< link: </x>; rel=preload"), "{err}");
        assert!(err.contains("< x-be: be"), "{err}");
        assert!(err.contains("< http/2 200"), "{err}");
        assert!(out.contains("hints /x"), "{out}");
    };
    let (ebb, _) = ebb_with_admin("hints", |k, b| hint_cfg(k, b, origin.addr));
    check(ebb.addr());
    if have("curl") {
        with_curl(ebb.addr());
    }
    if let Some((_h, fe)) = haproxy_beside("hints", |k, b| hint_cfg(k, b, origin.addr)) {
        check(fe);
        if have("curl") {
            with_curl(fe);
        }
    }
}

/// `early-hint` takes a name and a value, as HAProxy's.
#[test]
fn early_hint_refusals() {
    let dir = scratch("hints-refused");
    let head = "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\nfrontend fe\n    bind 127.0.0.1:1\n";
    assert_refused(
        &dir,
        "f0.cfg",
        &format!("{head}    http-request early-hint link\n"),
        "f0.cfg:8: 'http-request early-hint' expects exactly 2 arguments",
        true,
    );
}
