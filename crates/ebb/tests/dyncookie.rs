//! A backend's dynamic cookies changed on the CLI, side by side with
//! HAProxy 2.6 when it is installed: `set dynamic-cookie-key backend B
//! KEY`, `enable|disable dynamic-cookie backend B`, and what a server
//! added at run time gets (none until its address is set again), read
//! in `show stat`'s `cookie` column; and the answers to bad commands.

mod common;

use std::path::Path;

use common::*;

/// The `cookie` column of servers `names` of backend `b`.
fn cookies(sock: &Path, names: &[&str]) -> Vec<String> {
    let st = cli_cmd(sock, "show stat");
    names
        .iter()
        .map(|n| {
            stat_row_of(&st, "b", n)
                .get("cookie")
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// What the sequence of commands shows: each step's cookies and
/// answers.
fn run(sock: &Path) -> Vec<String> {
    let mut seen = Vec::new();
    let three = ["s1", "s2", "s3"];
    let mut note = |what: &str, v: Vec<String>| seen.push(format!("{what}: {}", v.join(",")));
    note("start", cookies(sock, &three));
    let answer = |l: &str| cli_cmd(sock, l).trim().to_string();
    note(
        "set key",
        vec![answer("set dynamic-cookie-key backend b k2")],
    );
    note("k2", cookies(sock, &three));
    note("disable", vec![answer("disable dynamic-cookie backend b")]);
    note("off", cookies(sock, &three));
    note(
        "key while off",
        vec![answer("set dynamic-cookie-key backend b k3")],
    );
    note("still off", cookies(sock, &three));
    note("enable", vec![answer("enable dynamic-cookie backend b")]);
    note("k3", cookies(sock, &three));
    note("add", vec![answer("add server b/s4 127.0.0.1:4")]);
    note("added", cookies(sock, &["s4"]));
    note(
        "addr",
        vec![answer("set server b/s4 addr 127.0.0.1 port 5")
            .lines()
            .next()
            .unwrap_or("")
            .to_string()],
    );
    note("moved", cookies(sock, &["s4"]));
    note(
        "no backend",
        vec![answer("enable dynamic-cookie backend nope")],
    );
    note("no name", vec![answer("disable dynamic-cookie backend")]);
    note("no key", vec![answer("set dynamic-cookie-key backend b")]);
    seen
}

#[test]
fn dynamic_cookie_commands_as_haproxy() {
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 1s\n\
             frontend fe\n    bind {bind}\n    default_backend b\n\
             backend b\n    balance roundrobin\n    cookie SRV insert indirect nocache dynamic\n    dynamic-cookie-key k1\n\
             \x20   server s1 127.0.0.1:1\n    server s2 127.0.0.2:2\n    server s3 127.0.0.1:3 cookie fixed\n",
            sock.display()
        )
    };
    let (e, sock) = ebb_with_admin("dyncookie", cfg);
    let ebb = run(&sock);
    drop(e);
    // On its own: every step changes what it should.
    let at = |k: &str| {
        ebb.iter()
            .find_map(|l| l.strip_prefix(&format!("{k}: ")))
            .unwrap_or_else(|| panic!("no {k}: {ebb:?}"))
            .to_string()
    };
    let start: Vec<String> = at("start").split(',').map(String::from).collect();
    assert!(
        start[0].len() == 16 && start[1].len() == 16 && start[0] != start[1],
        "{ebb:?}"
    );
    assert_eq!(start[2], "fixed");
    assert_ne!(at("k2"), at("start"));
    assert_eq!(at("off"), ",,fixed");
    assert_eq!(at("still off"), ",,fixed");
    assert!(
        at("k3") != at("k2") && !at("k3").starts_with(','),
        "{ebb:?}"
    );
    assert_eq!(at("added"), "");
    assert_eq!(at("moved").len(), 16, "{ebb:?}");
    assert_eq!(at("no backend"), "No such backend.");
    assert_eq!(at("no name"), "A backend name is expected.");
    assert_eq!(at("no key"), "String value expected.");
    if let Some((h, _)) = haproxy_beside("dyncookie", cfg) {
        let hap = run(&h.sock);
        assert_eq!(ebb, hap);
    }
}

/// Servers whose dynamic cookies are equal (same address and port, one
/// key): HAProxy 2.6 warns at start, once for each earlier server out
/// of maintenance with the same value (`t`: `s`; `v`: `s` and `t`; the
/// `disabled` `u` is skipped both ways), with the backend's name. ebb
/// writes the same warnings as HAProxy's `-c` does. Before, ebb said
/// nothing.
#[test]
fn equal_dynamic_cookies_are_warned_of_at_start() {
    let cfg = "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\
               frontend fe\n    bind BIND\n    default_backend b\n\
               backend b\n    cookie SRV insert dynamic\n    dynamic-cookie-key abc\n\
               \x20   server s 127.0.0.1:9\n    server t 127.0.0.1:9\n\
               \x20   server u 127.0.0.1:9 disabled\n    server v 127.0.0.1:9\n\
               \x20   server w 127.0.0.2:9\n";
    let text = "We generated two equal cookies for two different servers.";
    let e = Ebb::start(cfg);
    assert!(e
        .wait_stderr(
            "Please change the secret key for 'b'.",
            std::time::Duration::from_secs(30)
        )
        .is_some());
    let got = e
        .stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(text))
        .count();
    assert_eq!(got, 3);
    if have("haproxy") {
        let dir = scratch("dyncookie-dup");
        let f = dir.join("h.cfg");
        std::fs::write(
            &f,
            cfg.replace("BIND", &format!("127.0.0.1:{}", free_port())),
        )
        .unwrap();
        let o = std::process::Command::new("haproxy")
            .args(["-c", "-f"])
            .arg(&f)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.matches(text).count(), 3, "{err}");
        assert_eq!(
            err.matches("Please change the secret key for 'b'.").count(),
            3,
            "{err}"
        );
    }
}
