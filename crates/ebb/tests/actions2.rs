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

use common::origin::{read_head, serve_each};
use common::*;

/// An origin that answers each request with the fields `x-k` and `x-v`
/// set to the request's `x-rk` and `x-rv` (when it has them).
fn echo_origin() -> SocketAddr {
    serve_each(|mut s| {
        while let Some(h) = read_head(&mut s) {
            let text = String::from_utf8_lossy(&h).into_owned();
            let field = |n: &str| {
                text.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case(n).then(|| v.trim().to_string())
                })
            };
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
             frontend f\n    bind 127.0.0.1:19850\n    {rule}\n    http-request return status 200\n"
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
    ] {
        assert_refused(&dir, "c.cfg", &cfg(rule), what, true);
    }
}
