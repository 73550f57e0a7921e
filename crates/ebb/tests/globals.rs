//! Global keywords about the start itself, side by side with haproxy
//! where it is installed: `zero-warning` (and `-dW`), which refuses a
//! configuration that gives a warning; `strict-limits` (HAProxy 2.6's
//! default) and `no strict-limits`, which decide whether a descriptor
//! limit that cannot be raised stops the start.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// A tcp frontend with `option httplog` and no log target: two warnings
/// in HAProxy 2.6 and in ebb (the fallback to tcplog, and a log format
/// with no log address).
fn warned(global: &str, port: u16) -> String {
    format!(
        "global\n{global}defaults\n    mode tcp\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
         frontend f\n    bind 127.0.0.1:{port}\n    option httplog\n    default_backend b\n\
         backend b\n    server s 127.0.0.1:9\n"
    )
}

/// haproxy's exit status and standard error for `args` in `dir`; None
/// when it is not installed.
fn haproxy(args: &[&str], dir: &Path) -> Option<(i32, String)> {
    if !have("haproxy") {
        return None;
    }
    let out = Command::new("haproxy")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    Some((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[test]
fn zero_warning_refuses_a_configuration_with_warnings() {
    let d = scratch("globals-zw");
    let port = free_port();
    std::fs::write(d.join("zw.cfg"), warned("    zero-warning\n", port)).unwrap();
    std::fs::write(d.join("plain.cfg"), warned("", port)).unwrap();
    let abort = "Some warnings were found and 'zero-warning' is set. Aborting.";
    // The check, the keyword then the flag.
    for args in [
        &["-c", "-f", "zw.cfg"][..],
        &["-dW", "-c", "-f", "plain.cfg"],
    ] {
        let (rc, out, err) = run_ebb(args, &d);
        assert_eq!(rc, 1, "{args:?}: {out}{err}");
        assert!(err.contains(abort), "{err}");
        assert!(err.contains("'option httplog' not usable"), "{err}");
        assert!(
            err.contains("log format ignored for frontend 'f' since it has no log address."),
            "{err}"
        );
        if let Some((rc, err)) = haproxy(args, &d) {
            assert_eq!(rc, 1, "haproxy {args:?}: {err}");
            assert!(err.contains(abort), "haproxy: {err}");
        }
    }
    // Without it: valid, the warnings printed.
    let (rc, out, err) = run_ebb(&["-c", "-f", "plain.cfg"], &d);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("Configuration file is valid"), "{out}");
    assert!(err.contains("since it has no log address"), "{err}");
    if let Some((rc, err)) = haproxy(&["-c", "-f", "plain.cfg"], &d) {
        assert_eq!(rc, 0, "haproxy: {err}");
    }
    // A start (not a check) is refused too, before it listens.
    let (rc, _, err) = run_ebb(&["-f", "zw.cfg"], &d);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains(abort), "{err}");
    // A warning-free configuration starts under `zero-warning`.
    let clean = "global\n    zero-warning\ndefaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
         frontend f\n    bind BIND\n    http-request return status 200\n";
    let e = Ebb::start(clean);
    assert_eq!(get(e.addr(), "/").status, 200);
}

/// The most descriptors any process may have (`fs.nr_open`): a `maxconn`
/// that needs more cannot be served, whoever runs the test.
fn nr_open() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[test]
fn strict_limits_stop_a_start_whose_maxconn_cannot_have_its_descriptors() {
    let Some(max) = nr_open() else { return };
    let d = scratch("globals-strict");
    let maxconn = max / 2 + 100;
    let cfg = |extra: &str, port: u16| {
        format!(
            "global\n    maxconn {maxconn}\n{extra}defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
             frontend f\n    bind 127.0.0.1:{port}\n    http-request return status 200\n"
        )
    };
    // HAProxy 2.6's default, and the keyword saying it.
    for (name, extra) in [("default.cfg", ""), ("strict.cfg", "    strict-limits\n")] {
        std::fs::write(d.join(name), cfg(extra, free_port())).unwrap();
        let (rc, _, err) = run_ebb(&["-f", name], &d);
        assert_eq!(rc, 1, "{name}: {err}");
        assert!(err.contains("cannot raise FD limit"), "{err}");
        if let Some((rc, err)) = haproxy(&["-db", "-f", name], &d) {
            assert_eq!(rc, 1, "haproxy {name}: {err}");
            assert!(err.contains("Cannot raise FD limit"), "haproxy: {err}");
        }
    }
    // `no strict-limits`: a warning, and it serves.
    let text = cfg("    no strict-limits\n", 0).replace("127.0.0.1:0", "BIND");
    let e = Ebb::start(&text);
    assert_eq!(get(e.addr(), "/").status, 200);
    let w = e.wait_stderr(
        "warning: cannot raise FD limit",
        std::time::Duration::from_secs(30),
    );
    assert!(w.is_some(), "{:?}", e.stderr.lock().unwrap());
    // Arguments are refused, as HAProxy's `alertif_too_many_args`.
    for kw in ["zero-warning", "strict-limits", "no strict-limits"] {
        let text = format!("global\n    {kw} x\n");
        assert_refused(&d, "args.cfg", &text, "takes no argument", true);
    }
}

/// HAProxy's warnings for rules written after rules that run later (its
/// `warnif_misplaced_*` chain), each at its rule's line, the same four
/// as haproxy's; `zero-warning` then refuses the configuration.
#[test]
fn misplaced_rules_are_warned_of_as_haproxy() {
    let d = scratch("globals-misplaced");
    let text = |zero: &str| {
        format!(
            "global\n{zero}defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
             frontend f\n    bind 127.0.0.1:{}\n    use_backend b if {{ path /x }}\n    redirect location /y if {{ path /z }}\n\
             \x20   http-request deny if {{ path /d }}\n    monitor fail if {{ path /m }}\n    default_backend b\n\
             backend b\n    use-server s if TRUE\n    http-request deny if {{ path /q }}\n    server s 127.0.0.1:9\n",
            free_port()
        )
    };
    std::fs::write(d.join("m.cfg"), text("")).unwrap();
    let want = [
        "m.cfg:10: a 'redirect' rule placed after a 'use_backend' rule",
        "m.cfg:11: a 'http-request' rule placed after a 'redirect' rule",
        "m.cfg:12: a 'monitor fail' rule placed after an 'http-request' rule",
        "m.cfg:16: a 'http-request' rule placed after a 'use-server' rule",
    ];
    let (rc, _, err) = run_ebb(&["-c", "-f", "m.cfg"], &d);
    assert_eq!(rc, 0, "{err}");
    for w in want {
        assert!(err.contains(w), "{w}: {err}");
    }
    assert_eq!(
        err.matches("will still be processed before").count(),
        4,
        "{err}"
    );
    if let Some((rc, err)) = haproxy(&["-c", "-f", "m.cfg"], &d) {
        assert_eq!(rc, 0, "haproxy: {err}");
        for w in want {
            let (at, what) = w.split_once(": ").unwrap();
            assert!(
                err.contains(&format!("parsing [{at}] : {what}")),
                "haproxy {w}: {err}"
            );
        }
    }
    std::fs::write(d.join("z.cfg"), text("    zero-warning\n")).unwrap();
    let (rc, _, err) = run_ebb(&["-c", "-f", "z.cfg"], &d);
    assert_eq!(rc, 1, "{err}");
    if let Some((rc, err)) = haproxy(&["-c", "-f", "z.cfg"], &d) {
        assert_eq!(rc, 1, "haproxy: {err}");
    }
}
