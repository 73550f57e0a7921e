//! External checks (`option external-check`) through the real binary,
//! side by side with HAProxy 2.6 when it is installed: one script checks
//! a server for both, writing its arguments and environment to a file
//! and exiting by a flag file; the server goes DOWN (`PROCERR` with the
//! exit code) and UP (`PROCOK`) as the flag flips, a command that hangs
//! is killed (`PROCTOUT`), and the arguments and environment are
//! HAProxy's.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;

/// The check script: writes `argv|...` and its environment to
/// `out.<proxy port>` in `dir`, then hangs while `hang` exists, exits 0
/// while `up` exists, else 3.
fn script(dir: &Path) -> std::path::PathBuf {
    let d = dir.display();
    let text = format!(
        "#!/bin/sh\n\
         {{ echo \"argv|$0|$1|$2|$3|$4|$#\"; env; }} > \"{d}/out.$2.tmp\"\n\
         mv \"{d}/out.$2.tmp\" \"{d}/out.$2\"\n\
         [ -e \"{d}/hang\" ] && exec sleep 5\n\
         [ -e \"{d}/up\" ] && exit 0\n\
         exit 3\n"
    );
    let p = dir.join("check.sh");
    std::fs::write(&p, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn cfg(sock: &Path, bind: &str, script: &Path, srv: &str) -> String {
    format!(
        "global
    stats socket {} level admin
    external-check
    insecure-fork-wanted
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
listen app
    bind {bind}
    option external-check
    external-check path \"/usr/bin:/bin\"
    external-check command {}
    server s1 {srv} check inter 400 fall 1 rise 1 maxconn 7
",
        sock.display(),
        script.display()
    )
}

/// What the script saw for the proxy listening on `port`: its argv line
/// and the environment.
fn seen(dir: &Path, port: u16) -> Option<(String, BTreeMap<String, String>)> {
    let text = std::fs::read_to_string(dir.join(format!("out.{port}"))).ok()?;
    let mut lines = text.lines();
    let argv = lines.next()?.to_string();
    let env = lines
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Some((argv, env))
}

fn status_is(sock: &Path, st: &str, code: &str, status: &str) -> bool {
    let r = stat_row(sock, "app", "s1");
    r.get("check_status").map(|s| s.trim_start_matches("* ")) == Some(st)
        && r.get("check_code").map(String::as_str) == Some(code)
        && r.get("status").map(String::as_str) == Some(status)
}

#[test]
fn external_check_follows_the_command_as_haproxy() {
    let dir = scratch("extcheck");
    let sh = script(&dir);
    std::fs::write(dir.join("up"), "").unwrap();
    // The server is never connected to: any address does.
    let srv = format!("127.0.0.1:{}", free_port());
    // A port of its own (not `:0`): the command is told the configured
    // one.
    let bind = format!("127.0.0.1:{}", free_port());
    let (e, sock) = ebb_with_admin("extcheck", |s, _| cfg(s, &bind, &sh, &srv));
    let hap = haproxy_beside("extcheck", |s, b| cfg(s, b, &sh, &srv));
    let mut socks = vec![(sock.clone(), e.addr().port())];
    if let Some((h, a)) = &hap {
        socks.push((h.sock.clone(), a.port()));
    }
    for (s, _) in &socks {
        wait_until("PROCOK", || status_is(s, "PROCOK", "0", "UP"));
    }
    std::fs::remove_file(dir.join("up")).unwrap();
    for (s, _) in &socks {
        wait_until("PROCERR", || status_is(s, "PROCERR", "3", "DOWN"));
    }
    std::fs::write(dir.join("up"), "").unwrap();
    for (s, _) in &socks {
        wait_until("PROCOK again", || status_is(s, "PROCOK", "0", "UP"));
    }
    // A command that outlives `inter` is killed: the check times out and
    // keeps the last code.
    std::fs::write(dir.join("hang"), "").unwrap();
    for (s, _) in &socks {
        wait_until("PROCTOUT", || status_is(s, "PROCTOUT", "0", "DOWN"));
    }
    std::fs::remove_file(dir.join("hang")).unwrap();
    for (s, _) in &socks {
        wait_until("PROCOK after a timeout", || {
            status_is(s, "PROCOK", "0", "UP")
        });
    }
    // The arguments and the environment: HAProxy's, but for the
    // listener's port.
    let (argv, env) = seen(&dir, e.addr().port()).expect("the script ran for ebb");
    let port = e.addr().port();
    assert_eq!(
        argv,
        format!(
            "argv|{}|127.0.0.1|{port}|127.0.0.1|{}|4",
            sh.display(),
            &srv[10..]
        )
    );
    let want = [
        ("PATH", "/usr/bin:/bin".to_string()),
        ("HAPROXY_PROXY_NAME", "app".into()),
        ("HAPROXY_PROXY_ID", "2".into()),
        ("HAPROXY_PROXY_ADDR", "127.0.0.1".into()),
        ("HAPROXY_PROXY_PORT", port.to_string()),
        ("HAPROXY_SERVER_NAME", "s1".into()),
        ("HAPROXY_SERVER_ID", "1".into()),
        ("HAPROXY_SERVER_ADDR", "127.0.0.1".into()),
        ("HAPROXY_SERVER_PORT", srv[10..].to_string()),
        ("HAPROXY_SERVER_MAXCONN", "7".into()),
        ("HAPROXY_SERVER_CURCONN", "0".into()),
        ("HAPROXY_SERVER_SSL", "0".into()),
        ("HAPROXY_SERVER_PROTO", "h1".into()),
    ];
    for (k, v) in &want {
        assert_eq!(env.get(*k), Some(v), "{k} in {env:?}");
    }
    // Nothing of ebb's own environment (the shell adds PWD and the like).
    let ours = |env: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        env.iter()
            .filter(|(k, _)| *k == "PATH" || k.starts_with("HAPROXY_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(ours(&env).len(), want.len(), "{env:?}");
    assert!(!env.contains_key("CARGO"), "{env:?}");
    if let Some((_, a)) = &hap {
        let (hargv, henv) = seen(&dir, a.port()).expect("the script ran for haproxy");
        assert_eq!(
            hargv.replace(&a.port().to_string(), "P"),
            argv.replace(&port.to_string(), "P")
        );
        let mut mine = ours(&env);
        let mut theirs = ours(&henv);
        mine.remove("HAPROXY_PROXY_PORT");
        theirs.remove("HAPROXY_PROXY_PORT");
        assert_eq!(mine, theirs);
        let keys = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
        let skip = ["PWD", "OLDPWD", "SHLVL", "_"];
        let rest = |m: &BTreeMap<String, String>| {
            keys(m)
                .into_iter()
                .filter(|k| !skip.contains(&k.as_str()))
                .collect::<Vec<_>>()
        };
        assert_eq!(rest(&env), rest(&henv));
    }
}

#[test]
fn external_check_needs_its_global_and_command() {
    let d = scratch("extcheck-refused");
    let head = "global\n    external-check\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n";
    assert_refused(
        &d,
        "noglobal.cfg",
        "backend b\n    option external-check\n    external-check command /bin/true\n    server s 127.0.0.1:1 check\n",
        "unable to find required 'global.external-check'",
        true,
    );
    assert_refused(
        &d,
        "nocmd.cfg",
        &format!("{head}backend b\n    option external-check\n    server s 127.0.0.1:1 check\n"),
        "unable to find required 'external-check command'",
        true,
    );
    assert_refused(
        &d,
        "relative.cfg",
        &format!("{head}backend b\n    option external-check\n    external-check command true\n    server s 127.0.0.1:1 check\n"),
        "does not have a leading '/'",
        true,
    );
    assert_refused(
        &d,
        "badword.cfg",
        &format!("{head}backend b\n    external-check run /bin/true\n"),
        "only supports 'command' and 'path'",
        true,
    );
    assert_refused(
        &d,
        "noarg.cfg",
        &format!("{head}backend b\n    external-check command\n"),
        "missing argument after 'command'",
        true,
    );
    // Accepted as HAProxy accepts it: a command found through `path`
    // (without `insecure-fork-wanted`: a warning at start).
    std::fs::write(
        d.join("ok.cfg"),
        format!("{head}frontend f\n    bind 127.0.0.1:19401\n    default_backend b\nbackend b\n    option external-check\n    external-check path /usr/bin:/bin\n    external-check command true\n    server s 127.0.0.1:1 check\n"),
    )
    .unwrap();
    let (rc, _out, err) = run_ebb(&["-c", "-f", "ok.cfg"], &d);
    assert_eq!(rc, 0, "{err}");
    if let Some(refused) = haproxy_refuses(&d.join("ok.cfg")) {
        assert!(!refused);
    }
}
