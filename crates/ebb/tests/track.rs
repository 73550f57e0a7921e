//! The server option `track` through the real binary, beside HAProxy 2.6
//! on the same configuration: a tracking server (and one tracking it from
//! another backend) takes the tracked server's health and maintenance
//! (`show stat` status, where requests go), and the start-time checks.
//! Every wait is on the CLI showing the state.

mod common;

use std::net::TcpListener;
use std::path::Path;

use common::*;

const DEFAULTS: &str =
    "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n";

/// The `status` of each `(backend, server)` in `show stat`.
fn statuses(sock: &Path, rows: &[(&str, &str)]) -> Vec<String> {
    rows.iter()
        .map(|(b, s)| {
            stat_row(sock, b, s)
                .get("status")
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn a_tracking_server_takes_the_tracked_state_as_in_haproxy() {
    use common::origin::{Mode, Origin};
    let (o2, o3) = (Origin::start("s2", Mode::Ok), Origin::start("s3", Mode::Ok));
    // s1: only checked (a listener the test opens and closes).
    // Its port comes from free_port(), below the ephemeral range: no
    // connection's source port nor `:0` listener can take it while it is
    // closed, and this process hands it out once.
    let p1 = free_port();
    let mut l1 = Some(TcpListener::bind(("127.0.0.1", p1)).unwrap());
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n{DEFAULTS}frontend f\n    bind {bind}\n    default_backend other\n\
backend be\n    server s1 127.0.0.1:{p1} check inter 100 rise 1 fall 1\n    server s2 {o2} track s1\n\
backend other\n    balance roundrobin\n    server t {o2} track be/s2\n    server u {o3}\n",
            sock.display(),
            o2 = o2.addr,
            o3 = o3.addr
        )
    };
    let (e, esock) = ebb_with_admin("track-state", cfg);
    let hap = haproxy_beside("track-state", cfg);
    let mut socks = vec![(esock, e.addr())];
    if let Some((h, a)) = &hap {
        socks.push((h.sock.clone(), *a));
    }
    let rows = [("be", "s1"), ("be", "s2"), ("other", "t")];
    let wait = |want: &[&str]| {
        for (s, _) in &socks {
            wait_until(&format!("{want:?}"), || {
                statuses(s, &rows[..want.len()]) == want
            });
        }
    };
    let serve = |a| {
        (0..4)
            .map(|_| {
                get(a, "/")
                    .text()
                    .split(' ')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    wait(&["UP", "UP", "UP"]);
    for (s, a) in &socks {
        // `show stat`'s `tracked` column.
        assert_eq!(stat_row(s, "be", "s2")["tracked"], "be/s1");
        assert_eq!(stat_row(s, "other", "t")["tracked"], "be/s2");
        assert_eq!(stat_row(s, "be", "s1")["tracked"], "");
        let seen = serve(*a);
        assert!(seen.contains(&"s2".to_string()), "{seen:?}");
    }
    // The checked server goes down: its trackers with it, down the chain;
    // only u takes requests.
    drop(l1.take());
    wait(&["DOWN", "DOWN", "DOWN"]);
    for (_, a) in &socks {
        assert_eq!(serve(*a), ["s3"; 4]);
    }
    // Opened again; a bind refused meanwhile (another test process's
    // free_port() probe on it) is tried again.
    let mut again = None;
    wait_until("the checked port bound again", || {
        again = TcpListener::bind(("127.0.0.1", p1)).ok();
        again.is_some()
    });
    l1 = again;
    wait(&["UP", "UP", "UP"]);
    // Maintenance passes down too; enabling a tracker does not lift the
    // inherited one.
    for (s, _) in &socks {
        assert_eq!(cli_cmd(s, "disable server be/s1"), "\n");
    }
    wait(&["MAINT", "MAINT (via be/s1)", "MAINT (via be/s2)"]);
    for (s, a) in &socks {
        assert_eq!(cli_cmd(s, "enable server other/t"), "\n");
        assert_eq!(serve(*a), ["s3"; 4]);
        assert_eq!(cli_cmd(s, "disable server be/s2"), "\n");
        assert_eq!(cli_cmd(s, "enable server be/s1"), "\n");
    }
    wait(&["UP", "MAINT", "MAINT (via be/s2)"]);
    for (s, _) in &socks {
        assert_eq!(cli_cmd(s, "enable server be/s2"), "\n");
    }
    wait(&["UP", "UP", "UP"]);
    // A tracking server may be deleted (in maintenance); a tracked one
    // may not.
    for (s, _) in &socks {
        assert!(cli_cmd(s, "del server be/s2").starts_with(
            "This server cannot be removed at runtime due to other configuration elements pointing to it."
        ));
        assert_eq!(cli_cmd(s, "disable server other/t"), "\n");
        assert!(cli_cmd(s, "del server other/t").starts_with("Server deleted.\n"));
        assert_eq!(cli_cmd(s, "disable server be/s1"), "\n");
    }
    wait(&["MAINT", "MAINT (via be/s1)"][..]);
    drop(l1);
}

#[test]
fn track_lines_are_checked_at_start_as_haproxy_checks_them() {
    for (servers, msg) in [
        (
            "    server a 127.0.0.1:1\n    server b 127.0.0.1:2 track a\n",
            "unable to use be/a for tracking as it does not have any check nor agent enabled.",
        ),
        (
            "    server a 127.0.0.1:1 check\n    server b 127.0.0.1:2 track nope/a\n",
            "unable to find required proxy 'nope' for tracking.",
        ),
        (
            "    server a 127.0.0.1:1 check\n    server b 127.0.0.1:2 track c\n",
            "unable to find required server 'c' for tracking.",
        ),
        (
            "    server a 127.0.0.1:1 track b\n    server b 127.0.0.1:2 track a\n",
            "belongs to a tracking chain looping back to",
        ),
        (
            "    server a 127.0.0.1:1 check\n    server b 127.0.0.1:2 check track a\n",
            "unable to enable checks and tracking at the same time!",
        ),
    ] {
        let dir = scratch("track-cfg");
        let path = dir.join("t.cfg");
        std::fs::write(&path, format!("{DEFAULTS}backend be\n{servers}")).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ebb"))
            .args(["-c", "-f", path.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{servers}");
        assert!(err.contains(msg), "{servers}: {err}");
        assert!(
            haproxy_refuses(&path) != Some(false),
            "haproxy accepts {servers}"
        );
    }
}
