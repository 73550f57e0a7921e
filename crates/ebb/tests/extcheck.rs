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

/// The command runs with the open-files limit the proxy raised for its
/// connections, as HAProxy 2.6.12's (its child raises the limit back to
/// the one it started with only where that one was higher, never the
/// case): both are started with a soft limit of 1000 and `maxconn 5000`
/// (which raises it), and the script writes what it got. And without
/// global `insecure-setuid-wanted` the command (and the proxy) runs with
/// `NoNewPrivs` set (no privilege gained from a setuid executable), with
/// it not. Beside haproxy.
#[test]
fn external_check_command_limits_and_no_new_privs_as_haproxy() {
    let dir = scratch("extcheck-nofile");
    let d = dir.display();
    let text = format!(
        "#!/bin/sh\n\
         nnp=$(grep NoNewPrivs /proc/self/status | tr -dc 0-9)\n\
         echo \"$(ulimit -Sn) $(ulimit -Hn) $nnp\" > \"{d}/nofile.$2.tmp\"\n\
         mv \"{d}/nofile.$2.tmp\" \"{d}/nofile.$2\"\n\
         exit 0\n"
    );
    let sh = dir.join("nofile.sh");
    std::fs::write(&sh, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let field = |text: &str, name: &str, k: usize| -> String {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(k).map(String::from))
            .unwrap_or_default()
    };
    let mut progs = vec![EBB.to_string()];
    if have("haproxy") {
        progs.push("haproxy".to_string());
    }
    for prog in &progs {
        for setuid in [false, true] {
            let port = free_port();
            let cfg = format!(
                "global\n    maxconn 5000\n    external-check\n    insecure-fork-wanted\n{}\
                 defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
                 listen app\n    bind 127.0.0.1:{port}\n    option external-check\n    external-check path /usr/bin:/bin\n\
                 \x20   external-check command {}\n\
                 \x20   server s1 127.0.0.1:{} check inter 300\n",
                if setuid { "    insecure-setuid-wanted\n" } else { "" },
                sh.display(),
                free_port()
            );
            std::fs::write(dir.join("n.cfg"), cfg).unwrap();
            let mut child = std::process::Command::new("sh")
                .args(["-c", "ulimit -Sn 1000; exec \"$0\" -db -f n.cfg", prog])
                .current_dir(&dir)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let out = dir.join(format!("nofile.{port}"));
            let mut seen = String::new();
            let ran = came_within(std::time::Duration::from_secs(30), || {
                seen = std::fs::read_to_string(&out).unwrap_or_default();
                !seen.is_empty()
            });
            // The proxy itself runs with a raised soft limit.
            let own =
                std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap_or_default();
            let status =
                std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
            let _ = child.kill();
            let _ = child.wait();
            assert!(ran, "{prog}: the check never ran");
            let nnp = if setuid { 0 } else { 1 };
            let soft = field(&own, "Max open files", 3);
            let hard = field(&own, "Max open files", 4);
            assert!(soft.parse::<u64>().unwrap_or(0) > 1000, "{prog}: {own}");
            assert_eq!(
                seen.trim(),
                format!("{soft} {hard} {nnp}"),
                "{prog} setuid {setuid}"
            );
            assert_eq!(
                field(&status, "NoNewPrivs:", 1),
                nnp.to_string(),
                "{prog} setuid {setuid}"
            );
        }
    }
}
