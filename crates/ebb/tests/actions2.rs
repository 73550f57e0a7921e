//! HAProxy 2.6's rule actions on pattern files, replies and counters,
//! side by side with haproxy when it is installed: `add-acl`, `del-acl`,
//! `set-map`, `del-map` in `http-request` and `http-response` rules (a
//! request that adds its source to a blocklist is denied at the next
//! one; a response that feeds a map), and the start-time checks of those
//! actions.
//!
//! Each check runs the same configuration on ebb and on haproxy, with
//! the same files (they are read at start: the changes live in the
//! process).

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;

use common::origin::{read_head, serve_each, Mode};
use common::*;

/// The value of field `n` in the request head `h`.
fn field_of(h: &[u8], n: &str) -> Option<String> {
    String::from_utf8_lossy(h).lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(n).then(|| v.trim().to_string())
    })
}

/// An origin that answers each request with the fields `x-k` and `x-v`
/// set to the request's `x-rk` and `x-rv` (when it has them).
fn echo_origin() -> SocketAddr {
    serve_each(|mut s| {
        while let Some(h) = read_head(&mut s) {
            let field = |n: &str| field_of(&h, n);
            let mut out = String::from("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
            if let Some(k) = field("x-rk") {
                out.push_str(&format!("x-k: {k}\r\n"));
            }
            if let Some(v) = field("x-rv") {
                out.push_str(&format!("x-v: {v}\r\n"));
            }
            out.push_str("\r\nok");
            if s.write_all(out.as_bytes()).is_err() {
                break;
            }
        }
    })
}

fn patref_cfg(sock: &Path, bind: &str, dir: &Path, origin: SocketAddr) -> String {
    let d = dir.display();
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n\
         \x20   timeout connect 5s\n\
         frontend f\n    bind {bind}\n\
         \x20   acl banned src -f {d}/ban.lst\n\
         \x20   http-request del-acl({d}/ban.lst) %[req.hdr(x-unban)] if {{ path /unban }}\n\
         \x20   http-request deny if banned\n\
         \x20   http-request add-acl({d}/ban.lst) %[src] if {{ path /ban }}\n\
         \x20   http-request set-map({d}/m.map) %[req.hdr(x-k)] %[req.hdr(x-v)] if {{ path /set }}\n\
         \x20   http-request del-map({d}/m.map) %[req.hdr(x-k)] if {{ path /del }}\n\
         \x20   http-request add-acl({d}/w.lst) %[req.hdr(x-k)] if {{ path /addw }}\n\
         \x20   http-request del-acl({d}/w.lst) %[req.hdr(x-k)] if {{ path /delw }}\n\
         \x20   http-request add-acl({d}/none.lst) x if {{ path /none }}\n\
         \x20   http-request set-map({d}/i.map) %[req.hdr(x-k)] %[req.hdr(x-v)] if {{ path /seti }}\n\
         \x20   http-request return status 201 hdr x-v %[req.hdr(x-k),map({d}/m.map,none)] if {{ req.hdr(x-k) -f {d}/w.lst }} !{{ path_beg /srv }}\n\
         \x20   http-request return status 200 hdr x-v %[req.hdr(x-k),map({d}/m.map,none)] hdr x-i %[req.hdr(x-k),map_str_int({d}/i.map,-1)] if !{{ path_beg /srv }}\n\
         \x20   default_backend b\n\
         backend b\n\
         \x20   http-response set-map({d}/m.map) %[res.hdr(x-k)] %[res.hdr(x-v)] if {{ res.hdr(x-v) -m found }}\n\
         \x20   http-response del-map({d}/m.map) %[res.hdr(x-k)] if {{ res.hdr(x-k) -m found }} !{{ res.hdr(x-v) -m found }}\n\
         \x20   http-response add-acl({d}/w.lst) %[res.hdr(x-k)] if {{ res.hdr(x-k) -m found }}\n\
         \x20   server s {origin}\n",
        sock.display()
    )
}

/// One request from source `src` with the fields `hdrs`: its status and
/// its `x-v` and `x-i` fields.
fn ask(
    a: SocketAddr,
    src: &str,
    path: &str,
    hdrs: &[(&str, &str)],
) -> (u16, Option<String>, Option<String>) {
    let mut c = connect_from(src, a);
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n");
    for (n, v) in hdrs {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    c.send(req.as_bytes());
    let r = c.read_resp();
    (
        r.status,
        r.header("x-v").map(str::to_string),
        r.header("x-i").map(str::to_string),
    )
}

fn entries(sock: &Path, kind: &str, file: &Path) -> Vec<String> {
    cli_cmd(sock, &format!("show {kind} {}", file.display()))
        .lines()
        .filter(|l| !l.is_empty())
        // The entry's id, then the key (and value).
        .map(|l| l.split_once(' ').map_or("", |x| x.1).to_string())
        .collect()
}

fn check_patref(a: SocketAddr, sock: &Path, dir: &Path, who: &str) {
    let v = |x: &str| Some(x.to_string());
    // A source bans itself: its next request is denied, others' are not.
    assert_eq!(ask(a, "127.0.0.5", "/", &[]).0, 200, "{who}");
    assert_eq!(ask(a, "127.0.0.5", "/ban", &[]).0, 200, "{who}");
    assert_eq!(ask(a, "127.0.0.5", "/", &[]).0, 403, "{who}");
    assert_eq!(ask(a, "127.0.0.6", "/", &[]).0, 200, "{who}");
    assert_eq!(ask(a, "127.0.0.6", "/ban", &[]).0, 200, "{who}");
    assert_eq!(ask(a, "127.0.0.6", "/ban", &[]).0, 403, "{who}");
    let ban = dir.join("ban.lst");
    assert_eq!(
        entries(sock, "acl", &ban),
        ["10.9.9.9", "127.0.0.5", "127.0.0.6"],
        "{who}"
    );
    // del-acl removes it.
    let unban = ask(a, "127.0.0.7", "/unban", &[("x-unban", "127.0.0.5")]);
    assert_eq!(unban.0, 200, "{who}");
    assert_eq!(ask(a, "127.0.0.5", "/", &[]).0, 200, "{who}");
    assert_eq!(ask(a, "127.0.0.6", "/", &[]).0, 403, "{who}");

    // set-map: a new entry, then the same one changed (not a second).
    let set = |k: &str, val: &str| ask(a, "127.0.0.1", "/set", &[("x-k", k), ("x-v", val)]);
    assert_eq!(set("k1", "one"), (200, v("one"), v("-1")), "{who}");
    assert_eq!(set("k1", "uno"), (200, v("uno"), v("-1")), "{who}");
    // A key the file had from the start: every entry with it changes.
    assert_eq!(set("dup", "both"), (200, v("both"), v("-1")), "{who}");
    let map = dir.join("m.map");
    assert_eq!(
        entries(sock, "map", &map),
        ["dup both", "a va", "dup both", "k1 uno"],
        "{who}"
    );
    let del = |k: &str| ask(a, "127.0.0.1", "/del", &[("x-k", k)]);
    assert_eq!(del("dup"), (200, v("none"), v("-1")), "{who}");
    assert_eq!(del("nothing"), (200, v("none"), v("-1")), "{who}");
    assert_eq!(entries(sock, "map", &map), ["a va", "k1 uno"], "{who}");
    // A value an integer map cannot take is not stored; one it can is.
    let seti = |k: &str, val: &str| ask(a, "127.0.0.1", "/seti", &[("x-k", k), ("x-v", val)]);
    assert_eq!(seti("n", "abc"), (200, v("none"), v("-1")), "{who}");
    assert_eq!(seti("n", "42"), (200, v("none"), v("42")), "{who}");
    assert_eq!(seti("n", "x"), (200, v("none"), v("42")), "{who}");
    // A file no ACL nor map reads: nothing happens.
    assert_eq!(ask(a, "127.0.0.1", "/none", &[]).0, 200, "{who}");

    // add-acl and del-acl on a string ACL.
    let q = |k: &str| ask(a, "127.0.0.1", "/q", &[("x-k", k)]).0;
    assert_eq!(q("w1"), 200, "{who}");
    // Added once: the key is looked for before.
    for _ in 0..2 {
        assert_eq!(
            ask(a, "127.0.0.1", "/addw", &[("x-k", "w1")]).0,
            201,
            "{who}"
        );
    }
    assert_eq!(entries(sock, "acl", &dir.join("w.lst")), ["w1"], "{who}");
    assert_eq!(q("w1"), 201, "{who}");
    assert_eq!(
        ask(a, "127.0.0.1", "/delw", &[("x-k", "w1")]).0,
        200,
        "{who}"
    );
    assert_eq!(q("w1"), 200, "{who}");

    // Response rules: the server's fields feed the map and the ACL.
    let srv = |k: &str, val: Option<&str>| {
        let mut h = vec![("x-rk", k)];
        if let Some(val) = val {
            h.push(("x-rv", val));
        }
        ask(a, "127.0.0.1", "/srv", &h).0
    };
    assert_eq!(srv("r1", Some("from-server")), 200, "{who}");
    assert_eq!(
        ask(a, "127.0.0.1", "/", &[("x-k", "r1")]),
        (201, v("from-server"), None),
        "{who}"
    );
    assert_eq!(srv("r1", None), 200, "{who}");
    assert_eq!(
        ask(a, "127.0.0.1", "/", &[("x-k", "r1")]),
        (201, v("none"), None),
        "{who}"
    );
    assert_eq!(entries(sock, "acl", &dir.join("w.lst")), ["r1"], "{who}");
}

#[test]
fn rules_change_acl_and_map_files() {
    let o = echo_origin();
    let dir = scratch("actions2-patref");
    std::fs::write(dir.join("ban.lst"), "10.9.9.9\n").unwrap();
    std::fs::write(dir.join("m.map"), "dup a\na va\ndup b\n").unwrap();
    std::fs::write(dir.join("w.lst"), "").unwrap();
    std::fs::write(dir.join("i.map"), "").unwrap();
    let (ebb, sock) = ebb_with_admin("actions2-patref", |s, b| patref_cfg(s, b, &dir, o));
    check_patref(ebb.addr(), &sock, &dir, "ebb");
    if let Some((h, a)) = haproxy_beside("actions2-patref", |s, b| patref_cfg(s, b, &dir, o)) {
        check_patref(a, &h.sock, &dir, "haproxy");
    }
}

#[test]
fn pattern_file_actions_are_checked_at_start() {
    let dir = scratch("actions2-patref-cfg");
    let cfg = |rule: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
             listen f\n    bind 127.0.0.1:19850\n    {rule}\n    http-request return status 200\n"
        )
    };
    for (rule, what) in [
        (
            "http-request set-map(m.map) %[src]",
            "expects exactly 2 arguments",
        ),
        ("http-request add-acl(a.lst)", "expects exactly 1 argument"),
        (
            "http-request del-acl(a.lst) x y",
            "expects exactly 1 argument",
        ),
        ("http-response del-map(m.map)", "expects exactly 1 argument"),
        ("http-request add-acl(a.lst) %[res.hdr(x)]", "res.hdr"),
        (
            "http-after-response set-map(m.map) a b",
            "unknown 'http-after-response' action",
        ),
        (
            "http-after-response return",
            "unknown 'http-after-response' action",
        ),
        (
            "http-after-response track-sc0 src",
            "unknown 'http-after-response' action",
        ),
        (
            "http-after-response silent-drop",
            "unknown 'http-after-response' action",
        ),
        ("http-response silent-drop now", "unexpected 'now'"),
        (
            "http-response track-sc0 src table nope",
            "no stick-table named 'nope'",
        ),
        ("http-response sc-inc-gpc0(3)", "sc-inc-gpc0(0)"),
        ("http-response return status 99", "status"),
        ("http-request wait-for-handshake now", "unexpected 'now'"),
        (
            "http-request do-resolve(txn.x,nope) src",
            "Can't find resolvers section 'nope' for do-resolve action",
        ),
        (
            "http-request do-resolve(txn.x,nope,ipv5) src",
            "'ipv4' and 'ipv6'",
        ),
        (
            "http-request do-resolve(txn.x) src",
            "do-resolve(<varname>,<resolvers>",
        ),
        (
            "http-request do-resolve(txn.x,nope) src src",
            "do-resolve(<varname>,<resolvers>",
        ),
        (
            "http-response do-resolve(txn.x,nope) src",
            "unknown 'http-response' action",
        ),
        (
            "tcp-request connection do-resolve(txn.x,nope) src",
            "not supported by ebb",
        ),
        (
            "tcp-request content do-resolve(txn.x,nope) src",
            "Can't find resolvers section",
        ),
        (
            "http-response wait-for-handshake",
            "unknown 'http-response' action",
        ),
    ] {
        assert_refused(&dir, "c.cfg", &cfg(rule), what, true);
    }
    // An http proxy's content rules run once on the whole head in ebb:
    // a do-resolve there cannot wait within an inspect delay.
    let rule = "tcp-request inspect-delay 1s\n    tcp-request content do-resolve(txn.x,nope) src";
    let what = "supported in the content rules of a tcp frontend or listen section only";
    assert_refused(&dir, "c.cfg", &cfg(rule), what, false);
    // HAProxy's `set-nice` orders its stream tasks in its scheduler;
    // ebb's streams have no priority: refused with the reason.
    for rule in [
        "http-request set-nice 10",
        "http-response set-nice -5",
        "tcp-request content set-nice 1",
        "tcp-response content set-nice 1",
    ] {
        let what = "streams have no scheduling priority";
        assert_refused(&dir, "c.cfg", &cfg(rule), what, false);
    }
}

/// An origin that answers with the status in the request's `x-st` (200
/// without it) and the field `x-s: ` the request's `x-rs` (or `1`).
fn status_origin() -> SocketAddr {
    serve_each(|mut s| {
        while let Some(h) = read_head(&mut s) {
            let field = |n: &str| field_of(&h, n);
            let st = field("x-st").unwrap_or_else(|| "200".into());
            let xs = field("x-rs").unwrap_or_else(|| "1".into());
            let out = format!("HTTP/1.1 {st} X\r\nContent-Length: 2\r\nX-S: {xs}\r\n\r\nok");
            if s.write_all(out.as_bytes()).is_err() {
                break;
            }
        }
    })
}

fn response_cfg(sock: &Path, bind: &str, log: SocketAddr, origin: SocketAddr) -> String {
    format!(
        "{}frontend f\n    bind {bind}\n\
         \x20   log-format \"%ST %tsc %HP %Tr\"\n\
         \x20   http-request set-var(txn.p) path\n\
         \x20   default_backend b\n\
         backend b\n\
         \x20   stick-table type ip size 10 store http_req_cnt,http_err_cnt,http_fail_cnt,gpc0,gpc1,gpt0\n\
         \x20   http-response track-sc0 src\n\
         \x20   http-response track-sc1 res.hdr(x-s) table t2\n\
         \x20   http-response track-sc1 src if {{ var(txn.p) -m str /never }}\n\
         \x20   http-response sc-inc-gpc0(0)\n\
         \x20   http-response sc-inc-gpc1(0) if {{ status 404 }}\n\
         \x20   http-response sc-inc-gpc(1,1)\n\
         \x20   http-response sc-set-gpt0(0) res.hdr(x-s),mul(7)\n\
         \x20   http-response sc-set-gpt(1,1) 9\n\
         \x20   \
         \x20   http-response silent-drop if {{ var(txn.p) -m str /drop }}\n\
         \x20   http-response return status 201 content-type text/plain lf-string \"ret %[var(txn.p)]\" hdr x-r %[var(txn.p)] if {{ var(txn.p) -m str /ret }}\n\
         \x20   http-response return if {{ var(txn.p) -m str /empty }}\n\
         \x20   http-response set-header x-after 1\n\
         \x20   http-after-response set-header x-aft 1\n\
         \x20   server s {origin}\n\
         backend t2\n\
         \x20   stick-table type string len 16 size 10 store http_req_cnt,gpc(2),gpt(2)\n",
        logged_head(sock, log, "http")
    )
}

/// A table's entries as `show table` lists them, without the entry's
/// address and expiry (they differ between the two).
fn table(sock: &Path, name: &str) -> Vec<String> {
    cli_cmd(sock, &format!("show table {name}"))
        .lines()
        .filter(|l| l.starts_with("0x"))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter(|w| !w.starts_with("exp=") && !w.starts_with("use="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn check_response_actions(a: SocketAddr, sock: &Path, log: &Syslog, who: &str) {
    let mut c = Client::connect(a);
    // `return`: the server's answer is dropped for the rule's, the
    // `http-after-response` rules run on it, the connection goes on.
    c.send(b"GET /ret HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_resp();
    assert_eq!(r.status, 201, "{who}");
    assert_eq!(r.text(), "ret /ret", "{who}");
    assert_eq!(r.header("x-r"), Some("/ret"), "{who}");
    assert_eq!(r.header("x-aft"), Some("1"), "{who}");
    assert_eq!(r.header("x-s"), None, "{who}");
    assert_eq!(r.header("x-after"), None, "{who}");
    assert_eq!(log.next("201 "), "201 LH-- /ret -1", "{who}");
    c.send(b"GET /empty HTTP/1.1\r\nHost: t\r\nX-St: 404\r\n\r\n");
    let r = c.read_resp();
    assert_eq!((r.status, r.text().as_str()), (200, ""), "{who}");
    assert_eq!(log.next("200 "), "200 LH-- /empty -1", "{who}");
    // The server's 404 and 503 are counted on the counters tracked by
    // the response rules.
    c.send(b"GET /x HTTP/1.1\r\nHost: t\r\nX-St: 404\r\nX-Rs: 3\r\n\r\n");
    let r = c.read_resp();
    assert_eq!((r.status, r.header("x-after")), (404, Some("1")), "{who}");
    let l = log.next("404 ");
    assert!(
        l.starts_with("404 ---- /x ") && !l.ends_with("-1"),
        "{who} {l}"
    );
    c.send(b"GET /y HTTP/1.1\r\nHost: t\r\nX-St: 503\r\nX-Rs: 3\r\n\r\n");
    assert_eq!(c.read_resp().status, 503, "{who}");
    let l = log.next("503 ");
    assert!(
        l.starts_with("503 ---- /y ") && !l.ends_with("-1"),
        "{who} {l}"
    );
    // `silent-drop`: nothing more reaches the client.
    let mut d = Client::connect(a);
    d.send(b"GET /drop HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_silently_dropped(&mut d.s);
    assert_eq!(log.next("200 "), "200 PR-- /drop -1", "{who}");
    assert_eq!(
        table(sock, "b"),
        ["key=127.0.0.1 gpt0=7 gpc0=5 http_req_cnt=5 http_err_cnt=2 gpc1=2 http_fail_cnt=1"],
        "{who}"
    );
    assert_eq!(
        table(sock, "t2"),
        [
            "key=1 http_req_cnt=3 gpt0=0 gpt1=9 gpc0=0 gpc1=3",
            "key=3 http_req_cnt=2 gpt0=0 gpt1=9 gpc0=0 gpc1=2"
        ],
        "{who}"
    );
    let stat = cli_cmd(sock, "show stat");
    let row = |px: &str, sv: &str| stat_row_of(&stat, px, sv);
    for (px, sv) in [("f", "FRONTEND"), ("b", "BACKEND")] {
        let r = row(px, sv);
        assert_eq!(
            (r["dreq"].as_str(), r["dresp"].as_str()),
            ("1", "0"),
            "{who} {px}"
        );
    }
}

#[test]
fn response_rules_return_drop_and_track() {
    let o = status_origin();
    let log = Syslog::new();
    let la = log.addr();
    let (ebb, sock) = ebb_with_admin("actions2-resp", |s, b| response_cfg(s, b, la, o));
    check_response_actions(ebb.addr(), &sock, &log, "ebb");
    drop(ebb);
    if let Some((h, a)) = haproxy_beside("actions2-resp", |s, b| response_cfg(s, b, la, o)) {
        check_response_actions(a, &h.sock, &log, "haproxy");
    }
}

fn handshake_cfg(sock: &Path, bind: &str, pem: &Path) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n\
         \x20   timeout connect 5s\n\
         frontend f\n    bind {bind} ssl crt {}\n\
         \x20   http-request wait-for-handshake\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"tls=%[ssl_fc]\"\n",
        sock.display(),
        pem.display()
    )
}

/// `wait-for-handshake` holds early data only: without it (ebb takes
/// none, and curl sends none), the request goes on at once.
#[test]
fn wait_for_handshake_lets_requests_after_the_handshake_through() {
    let dir = scratch("actions2-hs");
    let pem = dir.join("c.pem");
    self_signed_pem(&pem, "localhost");
    let check = |a: SocketAddr, who: &str| {
        let url = format!("https://127.0.0.1:{}/", a.port());
        let (ok, out, err) = curl(&["-sk", &url]);
        assert!(ok, "{who}: {err}");
        assert_eq!(out, "tls=1", "{who}");
    };
    let (ebb, _sock) = ebb_with_admin("actions2-hs", |s, b| handshake_cfg(s, b, &pem));
    check(ebb.addr(), "ebb");
    if let Some((_h, a)) = haproxy_beside("actions2-hs", |s, b| handshake_cfg(s, b, &pem)) {
        check(a, "haproxy");
    }
}

/// The `global`, `resolvers dns` (the DNS server on port `dns`) and
/// `defaults` (`mode`) sections of the do-resolve tests.
fn dns_head(sock: &Path, dns: u16, mode: &str) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         resolvers dns\n    nameserver d 127.0.0.1:{dns}\n    resolve_retries 2\n\
         \x20   timeout retry 1s\n    hold valid 10s\n\
         defaults\n    mode {mode}\n    timeout client 30s\n    timeout server 30s\n\
         \x20   timeout connect 5s\n",
        sock.display()
    )
}

fn resolve_cfg(sock: &Path, bind: &str, dns: u16) -> String {
    format!(
        "{}frontend f\n    bind {bind}\n\
         \x20   http-request do-resolve(txn.v4,dns,ipv4) req.hdr(x-name)\n\
         \x20   http-request do-resolve(txn.v6,dns) req.hdr(x-name)\n\
         \x20   http-request set-var(txn.after) str(yes)\n\
         \x20   http-request return status 200 hdr x-v4 %[var(txn.v4)] hdr x-v6 %[var(txn.v6)] hdr x-after %[var(txn.after)]\n",
        dns_head(sock, dns, "http")
    )
}

/// The addresses `do-resolve` found for `name` (None: no `x-name`): the
/// `x-v4` and `x-v6` fields; the rules after it ran.
fn resolved(a: SocketAddr, name: Option<&str>, who: &str) -> (Option<String>, Option<String>) {
    let mut c = Client::connect(a);
    let field = name.map_or(String::new(), |n| format!("x-name: {n}\r\n"));
    c.send(format!("GET / HTTP/1.1\r\nHost: t\r\n{field}\r\n").as_bytes());
    let r = c.read_resp();
    assert_eq!(
        (r.status, r.header("x-after")),
        (200, Some("yes")),
        "{who} {name:?}"
    );
    let f = |n: &str| r.header(n).map(str::to_string);
    (f("x-v4"), f("x-v6"))
}

fn check_resolve(a: SocketAddr, who: &str) {
    let s = |x: &str| Some(x.to_string());
    assert_eq!(
        resolved(a, Some("app.test"), who),
        (s("127.0.0.2"), s("::2")),
        "{who}"
    );
    // No AAAA record: the other family.
    assert_eq!(
        resolved(a, Some("four.test"), who),
        (s("127.0.0.3"), s("127.0.0.3")),
        "{who}"
    );
    // Case and a trailing dot do not matter.
    assert_eq!(
        resolved(a, Some("APP.Test."), who),
        (s("127.0.0.2"), s("::2")),
        "{who}"
    );
    // Nothing found, no name, a name that cannot be asked: no variable.
    assert_eq!(resolved(a, Some("gone.test"), who), (None, None), "{who}");
    assert_eq!(resolved(a, None, who), (None, None), "{who}");
    assert_eq!(resolved(a, Some("a..test"), who), (None, None), "{who}");
    // An HTTP/2 stream waits as well.
    let url = format!("http://{a}/");
    let (ok, out, err) = curl(&[
        "--http2-prior-knowledge",
        "-D",
        "-",
        "-o",
        "/dev/null",
        "-H",
        "x-name: app.test",
        &url,
    ]);
    assert!(ok, "{who}: {err}");
    assert!(
        out.starts_with("HTTP/2 200") && out.contains("x-v6: ::2"),
        "{who}: {out}"
    );
    // Several at once, on several connections.
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let who = who.to_string();
            std::thread::spawn(move || resolved(a, Some("app.test"), &who))
        })
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), (s("127.0.0.2"), s("::2")), "{who}");
    }
}

#[test]
fn do_resolve_sets_the_variable_from_a_resolvers_section() {
    let dir = scratch("actions2-resolve");
    let zone = r#"{"names": {
        "app.test": {"A": ["127.0.0.2"], "AAAA": ["::2"]},
        "four.test": {"A": ["127.0.0.3"]},
        "gone.test": {"rcode": "NXDOMAIN"}
    }}"#;
    let dns = common::dnsd::Dnsd::start(&dir, zone);
    let port = dns.port;
    let (ebb, _sock) = ebb_with_admin("actions2-resolve", |s, b| resolve_cfg(s, b, port));
    check_resolve(ebb.addr(), "ebb");
    drop(ebb);
    if let Some((_h, a)) = haproxy_beside("actions2-resolve", |s, b| resolve_cfg(s, b, port)) {
        check_resolve(a, "haproxy");
    }
}

fn tcp_resolve_cfg(sock: &Path, bind: &str, dns: u16, port: u16, other: u16) -> String {
    format!(
        "{}listen t\n    bind {bind}\n    tcp-request inspect-delay 10s\n\
         \x20   tcp-request content do-resolve(sess.ip,dns,ipv4) str(app.test)\n\
         \x20   tcp-request content do-resolve(sess.nx,dns) str(gone.test)\n\
         \x20   tcp-request content reject if {{ var(sess.nx) -m found }}\n\
         \x20   tcp-request content set-dst var(sess.ip)\n\
         \x20   server s 0.0.0.0:{port}\n\
         listen u\n    bind 127.0.0.1:{other}\n\
         \x20   tcp-request content do-resolve(sess.ip,dns,ipv4) str(app.test)\n\
         \x20   tcp-request content reject unless {{ var(sess.ip) -m found }}\n\
         \x20   server s 127.0.0.1:{port}\n",
        dns_head(sock, dns, "tcp")
    )
}

fn check_tcp_resolve(a: SocketAddr, other: u16, who: &str) {
    // The content rules wait for the answer within the inspect delay;
    // the server's address comes from it.
    let mut c = Client::connect(a);
    c.send(b"GET /p HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_resp();
    assert_eq!((r.status, r.text().as_str()), (200, "o /p"), "{who}");
    // Without a delay the rules decide at once: no answer yet, no
    // variable (HAProxy's final run).
    let mut c = Client::connect(SocketAddr::from(([127, 0, 0, 1], other)));
    c.send(b"GET /p HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(c.read_resp_opt(false).is_none(), "{who}");
}

#[test]
fn tcp_content_do_resolve_waits_within_the_inspect_delay() {
    let dir = scratch("actions2-tcp-resolve");
    let zone = r#"{"names": {
        "app.test": {"A": ["127.0.0.2"]},
        "gone.test": {"rcode": "NXDOMAIN"}
    }}"#;
    let dns = common::dnsd::Dnsd::start(&dir, zone);
    let port = free_port();
    let _o = common::origin::Origin::start_on(&format!("127.0.0.2:{port}"), "o", Mode::Ok);
    let (d, other) = (dns.port, free_port());
    let (ebb, _sock) = ebb_with_admin("actions2-tcpres", |s, b| {
        tcp_resolve_cfg(s, b, d, port, other)
    });
    check_tcp_resolve(ebb.addr(), other, "ebb");
    drop(ebb);
    let other = free_port();
    let h = haproxy_beside("actions2-tcpres", |s, b| {
        tcp_resolve_cfg(s, b, d, port, other)
    });
    if let Some((_h, a)) = h {
        check_tcp_resolve(a, other, "haproxy");
    }
}
