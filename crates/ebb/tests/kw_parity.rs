//! Keywords ebb accepts, as they show from outside, side by side with
//! HAProxy 2.6 where it is installed: a UNIX bind's socket file (`mode`,
//! `user`, `group`, `uid`, `gid`), the HTTP/2 SETTINGS a client receives
//! (`tune.h2.initial-window-size`, `header-table-size`,
//! `max-concurrent-streams`) and the values HAProxy refuses at start.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

use common::{assert_refused, haproxy_with, have, scratch, wait_until, Ebb};

/// The socket files' modes and owners: `(mode, uid, gid)` in bind order.
fn owners(paths: &[std::path::PathBuf]) -> Vec<(u32, u32, u32)> {
    paths
        .iter()
        .map(|p| {
            let md = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (md.permissions().mode() & 0o7777, md.uid(), md.gid())
        })
        .collect()
}

/// `bind unix@PATH` with `mode` (octal), `user`/`group` by name and
/// `uid`/`gid` by number, alone or together: the socket file gets the
/// same mode and owner from ebb as from haproxy (without `mode`, the
/// umask's; without an owner, the process's). The owners need root.
#[test]
fn a_unix_bind_socket_file_has_haproxys_mode_and_owner() {
    let root = String::from_utf8_lossy(&Command::new("id").arg("-u").output().unwrap().stdout)
        .trim()
        == "0";
    let mut opts = vec!["mode 600", "", "mode 0770", "mode 644"];
    if root {
        opts.extend([
            "mode 600 user nobody group nogroup",
            "mode 644 uid 1 gid 1",
            "user daemon",
            "group daemon mode 0660",
        ]);
    }
    let run = |who: &str| {
        let d = scratch(&format!("unixbind-{who}"));
        let paths: Vec<_> = (0..opts.len())
            .map(|i| d.join(format!("s{i}.sock")))
            .collect();
        let binds: String = paths
            .iter()
            .zip(&opts)
            .map(|(p, o)| format!("    bind unix@{} {o}\n", p.display()))
            .collect();
        let rest = format!(
            "defaults\n    mode http\n    timeout client 10s\n\
             frontend f\n{binds}    http-request return status 200\n"
        );
        if who == "ebb" {
            let e = Ebb::start(&rest);
            let got = owners(&paths);
            drop(e);
            Some(got)
        } else {
            let h = haproxy_with("unixbind", &rest)?;
            // Each file, named: a missing one fails as such.
            wait_until("haproxy's socket files", || {
                paths.iter().all(|p| p.exists())
            });
            let got = owners(&paths);
            drop(h);
            Some(got)
        }
    };
    let ebb = run("ebb").unwrap();
    assert_eq!(ebb[0].0, 0o600);
    assert_eq!(ebb[2].0, 0o770);
    assert_eq!(ebb[3].0, 0o644);
    if root {
        assert_eq!(ebb[4], (0o600, 65534, 65534));
        assert_eq!(ebb[5], (0o644, 1, 1));
        assert_eq!((ebb[6].1, ebb[7].2, ebb[7].0), (1, 1, 0o660));
    }
    if let Some(hap) = run("haproxy") {
        assert_eq!(ebb, hap, "{opts:?}");
    }
}

/// `tune.h2.initial-window-size`, `header-table-size`,
/// `max-concurrent-streams`.
type Tunables = (u32, u32, u32);

/// The settings of the server's first SETTINGS frame as `nghttp -v`
/// shows them (`NAME(0xN):VALUE`), sorted; ebb's own
/// `SETTINGS_MAX_HEADER_LIST_SIZE` (HAProxy 2.6 sends none) left out.
fn server_settings(port: u16) -> Vec<String> {
    let out = Command::new("nghttp")
        .args(["-v", "-t", "30", &format!("http://127.0.0.1:{port}/")])
        .output()
        .expect("nghttp");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let mut got = Vec::new();
    // The first `recv SETTINGS` that is no ACK: its `[NAME:VALUE]` lines.
    while let Some(l) = lines.next() {
        if l.contains("recv SETTINGS frame") && !l.contains("flags=0x01") {
            for l in lines.by_ref() {
                let l = l.trim();
                if l.starts_with('[') && l.ends_with(']') {
                    got.push(l.trim_matches(['[', ']']).to_string());
                } else if !l.starts_with('(') {
                    break;
                }
            }
            break;
        }
    }
    got.retain(|s| !s.starts_with("SETTINGS_MAX_HEADER_LIST_SIZE"));
    got.sort();
    got
}

/// `tune.h2.initial-window-size`, `header-table-size` and
/// `max-concurrent-streams` as an HTTP/2 client sees them: the same
/// settings from ebb as from haproxy, a default value not sent, and no
/// SETTINGS_MAX_CONCURRENT_STREAMS at all for `0` (no limit; ebb sent
/// 4294967295). Values HAProxy 2.6 refuses are refused with `file:line`
/// (a header table below 4096 bytes: ebb took it).
#[test]
fn h2_tunables_show_in_the_settings_as_haproxys() {
    if !have("nghttp") {
        println!("nghttp is not installed: skipped");
        return;
    }
    // (initial-window-size, header-table-size, max-concurrent-streams)
    // and the settings sent.
    let cases: [(Tunables, &[&str]); 3] = [
        (
            (12345, 8192, 7),
            &[
                "SETTINGS_ENABLE_CONNECT_PROTOCOL(0x08):1",
                "SETTINGS_HEADER_TABLE_SIZE(0x01):8192",
                "SETTINGS_INITIAL_WINDOW_SIZE(0x04):12345",
                "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):7",
            ],
        ),
        (
            (65535, 4096, 100),
            &[
                "SETTINGS_ENABLE_CONNECT_PROTOCOL(0x08):1",
                "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):100",
            ],
        ),
        (
            (0, 65536, 0),
            &[
                "SETTINGS_ENABLE_CONNECT_PROTOCOL(0x08):1",
                "SETTINGS_HEADER_TABLE_SIZE(0x01):65536",
                "SETTINGS_INITIAL_WINDOW_SIZE(0x04):0",
            ],
        ),
    ];
    for ((win, table, streams), want) in cases {
        let rest = |bind: &str| {
            format!(
                "global\n    tune.h2.initial-window-size {win}\n\
                 \x20   tune.h2.header-table-size {table}\n\
                 \x20   tune.h2.max-concurrent-streams {streams}\n\
                 defaults\n    mode http\n    timeout client 10s\n\
                 frontend f\n    bind {bind} proto h2\n\
                 \x20   http-request return status 200 content-type text/plain string hi\n"
            )
        };
        let e = Ebb::start(&rest("BIND"));
        assert_eq!(
            server_settings(e.addr().port()),
            want,
            "ebb {win} {table} {streams}"
        );
        let port = common::free_port();
        // (after haproxy_with's own `global` section: HAProxy reads both)
        if let Some(_h) = haproxy_with("h2settings", &rest(&format!("127.0.0.1:{port}"))) {
            assert_eq!(
                server_settings(port),
                want,
                "haproxy {win} {table} {streams}"
            );
        }
    }
    let d = scratch("h2tune-refused");
    for bad in [
        "tune.h2.header-table-size 4095",
        "tune.h2.header-table-size 65537",
        "tune.h2.max-concurrent-streams 2147483648",
        "tune.h2.initial-window-size 2147483648",
    ] {
        assert_refused(
            &d,
            "h.cfg",
            &format!("global\n    {bad}\ndefaults\n    mode http\n"),
            "h.cfg:2",
            true,
        );
    }
}
