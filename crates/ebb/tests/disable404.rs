//! `http-check disable-on-404` through the real binary, side by side
//! with HAProxy 2.6 when it is installed: a server whose HTTP check
//! answers 404 while it is UP goes NOLB (HAProxy's STOPPING state): it
//! takes no new load-balanced traffic but keeps its persistent (cookie)
//! traffic, `show stat` says `NOLB` (`NOLB n/fall` while checks fail),
//! `show servers state` op state 3, the log says `is stopping`; a 2xx
//! takes it back UP. A 404 to a server that is DOWN is a failure.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use common::*;

/// An origin named `name`: `GET /chk` answers the status in `chk`
/// (switched by the test), any other path 200 with `NAME PATH`; one
/// request per connection.
fn origin(name: &'static str, chk: Arc<AtomicU16>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let chk = Arc::clone(&chk);
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut b = [0u8; 2048];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read_retry(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (code, body) = if path == "/chk" {
                    (chk.load(Ordering::SeqCst), String::new())
                } else {
                    (200, format!("{name} {path}"))
                };
                let reason = match code {
                    200 => "OK",
                    404 => "Not Found",
                    _ => "Server Error",
                };
                let _ = s.write_all(
                    format!(
                        "HTTP/1.1 {code} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            });
        }
    });
    a
}

/// Origins `a` and `b` whose checks pass, and a log receiver.
fn two_origins() -> (SocketAddr, SocketAddr, Syslog) {
    let a = origin("a", Arc::new(AtomicU16::new(200)));
    let b = origin("b", Arc::new(AtomicU16::new(200)));
    (a, b, Syslog::new())
}

/// A configuration logging to `la` whose `fe` uses backend `b`, `be`
/// its lines (after the first's indentation).
fn fe_to_b(sock: &Path, la: SocketAddr, bind: &str, be: &str) -> String {
    format!(
        "{}listen fe\n    bind {bind}\n    use_backend b\nbackend b\n    {be}",
        logged_head(sock, la, "http")
    )
}

/// Waits for server `a`'s first check to pass.
fn a_checked(sock: &Path) {
    wait_until("a's first check", || {
        stat_row(sock, "b", "a")
            .get("check_status")
            .is_some_and(|x| x == "L7OK")
    });
}

/// `GET /x` on a new connection, with `Cookie: SRV=a` when `cookie`: the
/// body (the origin's name and the path).
fn body_of(fe: SocketAddr, cookie: bool) -> String {
    let mut c = Client::connect(fe);
    let ck = if cookie { "Cookie: SRV=a\r\n" } else { "" };
    c.send(format!("GET /x HTTP/1.1\r\nHost: t\r\n{ck}Connection: close\r\n\r\n").as_bytes());
    let r = c.read_resp();
    assert_eq!(r.status, 200);
    r.text()
}

fn wait_status(sock: &Path, srv: &str, want: impl Fn(&str) -> bool, what: &str) {
    wait_until(&format!("{srv} {what}"), || {
        stat_row(sock, "b", srv)
            .get("status")
            .is_some_and(|s| want(s))
    });
}

/// A log line containing `needle`, with its check duration's figure
/// replaced by `N` and the syslog header dropped.
fn log_text(u: &Syslog, needle: &str) -> String {
    let l = u.find(needle, |l| l.contains(needle));
    let t = l.split_once("]: ").map_or(l.as_str(), |x| x.1).trim_end();
    match t.split_once("check duration: ") {
        Some((a, b)) => {
            let rest = b.trim_start_matches(|c: char| c.is_ascii_digit());
            format!("{a}check duration: N{rest}")
        }
        None => t.to_string(),
    }
}

/// The fields of `srv`'s line of `show servers state b`: op state, admin
/// state, check status, check result, check health, and check state
/// without its "in progress" bit.
fn state_fields(sock: &Path, srv: &str) -> Vec<String> {
    let w = servers_state_line(sock, "b", srv);
    let cst = w[13].parse::<u32>().unwrap_or(99) & !1;
    vec![
        w[5].clone(),
        w[6].clone(),
        w[10].clone(),
        w[11].clone(),
        w[12].clone(),
        cst.to_string(),
    ]
}

#[test]
fn a_404_takes_an_up_server_out_of_balancing_as_haproxy() {
    for hap in [false, true] {
        let chk_a = Arc::new(AtomicU16::new(200));
        let chk_c = Arc::new(AtomicU16::new(500));
        let a = origin("a", Arc::clone(&chk_a));
        let b = origin("b", Arc::new(AtomicU16::new(200)));
        let c = origin("c", Arc::clone(&chk_c));
        let log = Syslog::new();
        let la = log.addr();
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "{}listen fe\n    bind {bind}\n    balance roundrobin\n    use_backend b\n\
                 backend b\n    balance roundrobin\n    cookie SRV\n    option httpchk GET /chk\n    http-check disable-on-404\n\
                 \x20   server a {a} cookie a check inter 200ms rise 1 fall 100\n\
                 \x20   server b {b} cookie b check inter 200ms rise 1 fall 100\n\
                 \x20   server c {c} cookie c check inter 200ms rise 1 fall 1\n\
                 backend b2\n    http-check disable-on-404\n    server t {b} track b/a\n",
                logged_head(sock, la, "http")
            )
        };
        let Some((_keep, sock, fe, who)) = ebb_or_haproxy(hap, "disable404", cfg) else {
            continue;
        };
        wait_until("a and b checked UP", || {
            ["a", "b"].iter().all(|s| {
                let r = stat_row(&sock, "b", s);
                r.get("status").is_some_and(|x| x == "UP")
                    && r.get("check_status").is_some_and(|x| x == "L7OK")
            })
        });
        // c is DOWN: its 404 is a failure, not a conditional pass.
        wait_status(&sock, "c", |s| s == "DOWN", "DOWN");
        chk_c.store(404, Ordering::SeqCst);
        wait_until("c's 404 seen", || {
            stat_row(&sock, "b", "c")
                .get("check_code")
                .is_some_and(|x| x == "404")
        });
        let r = stat_row(&sock, "b", "c");
        assert_eq!(r["status"], "DOWN", "{who}");
        assert_eq!(r["check_status"], "L7STS", "{who}");

        // a answers 404: NOLB.
        chk_a.store(404, Ordering::SeqCst);
        wait_status(&sock, "a", |s| s == "NOLB", "NOLB");
        let r = stat_row(&sock, "b", "a");
        assert_eq!(r["check_status"], "L7OKC", "{who}");
        assert_eq!(r["check_code"], "404", "{who}");
        assert_eq!(
            log_text(&log, "Server b/a is stopping"),
            "Server b/a is stopping, reason: Layer7 check conditionally passed, code: 404, check duration: Nms. 1 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.",
            "{who}"
        );
        // Its tracker follows.
        assert_eq!(
            log_text(&log, "Server b2/t is stopping"),
            "Server b2/t is stopping via b/a. 0 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.",
            "{who}"
        );
        assert_eq!(
            stat_row(&sock, "b2", "t").get("status").map(String::as_str),
            Some("NOLB"),
            "{who}"
        );
        assert_eq!(
            state_fields(&sock, "a"),
            ["3", "0", "16", "4", "100", "6"],
            "{who}: op state, admin state, check status, result, health, state"
        );
        // No new balanced traffic for a; its persistent traffic stays.
        for _ in 0..4 {
            assert_eq!(body_of(fe, false), "b /x", "{who}");
        }
        assert_eq!(body_of(fe, true), "a /x", "{who}");

        // A failure while NOLB: NOLB 99/100; a 404 again: NOLB.
        chk_a.store(500, Ordering::SeqCst);
        wait_status(&sock, "a", |s| s.starts_with("NOLB 9"), "NOLB going down");
        chk_a.store(404, Ordering::SeqCst);
        wait_status(&sock, "a", |s| s == "NOLB", "NOLB again");
        // A 2xx: UP again, balanced traffic comes back.
        chk_a.store(200, Ordering::SeqCst);
        wait_status(&sock, "a", |s| s == "UP", "UP");
        assert_eq!(
            log_text(&log, "Server b/a is UP"),
            "Server b/a is UP, reason: Layer7 check passed, code: 200, check duration: Nms. 2 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.",
            "{who}"
        );
        assert_eq!(
            log_text(&log, "Server b2/t is UP"),
            "Server b2/t is UP via b/a. 1 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.",
            "{who}"
        );
        assert_eq!(
            state_fields(&sock, "a")[..4],
            ["2", "0", "15", "3"],
            "{who}"
        );
        let seen: Vec<String> = (0..4).map(|_| body_of(fe, false)).collect();
        assert!(seen.iter().any(|s| s == "a /x"), "{who}: {seen:?}");
    }
}

/// `disable-on-404` takes no argument, and a server tracked from another
/// backend must agree on it: refused by both.
#[test]
fn disable_on_404_takes_no_argument() {
    let d = scratch("disable404-c");
    assert_refused(
        &d,
        "x.cfg",
        "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
         backend b\n    option httpchk\n    http-check disable-on-404 now\n    server s 127.0.0.1:1 check\n",
        "x.cfg:8",
        true,
    );
    assert_refused(
        &d,
        "y.cfg",
        "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
         backend b\n    option httpchk\n    http-check disable-on-404\n    server s 127.0.0.1:1 check\n\
         backend b2\n    server t 127.0.0.1:2 track b/s\n",
        "y.cfg:11: unable to use b/s for tracking: disable-on-404 option inconsistency",
        true,
    );
}

/// `set server B/S health up|stopping|down` forces the state (NOLB from
/// UP or straight from DOWN) with HAProxy's lines, `changed from CLI`;
/// refused on a tracking server and for another word, with HAProxy's
/// answers.
#[test]
fn set_server_health_forces_the_state_as_haproxy() {
    for hap in [false, true] {
        let (a, b, log) = two_origins();
        let la = log.addr();
        let be = format!(
            "option httpchk GET /chk\n\
             \x20   server a {a} check inter 1h\n    server b {b} check inter 1h\n\
             \x20   server bk {b} check inter 1h backup\n\
             backend b2\n    server t {b} track b/a\n"
        );
        let cfg = |sock: &Path, bind: &str| fe_to_b(sock, la, bind, &be);
        let Some((_keep, sock, _, who)) = ebb_or_haproxy(hap, "health-cli", cfg) else {
            continue;
        };
        a_checked(&sock);
        let set = |h: &str| {
            cli_cmd(&sock, &format!("set server b/a health {h}"))
                .trim()
                .to_string()
        };
        let status = || stat_row(&sock, "b", "a")["status"].clone();
        let online = "backup servers online. 0 sessions requeued, 0 total in queue.";
        let left = "backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.";
        for (h, st, line) in [
            (
                "stopping",
                "NOLB",
                format!("stopping, changed from CLI. 1 active and 1 {online}"),
            ),
            (
                "down",
                "DOWN",
                format!("DOWN, changed from CLI. 1 active and 1 {left}"),
            ),
            (
                "stopping",
                "NOLB",
                format!("stopping, changed from CLI. 1 active and 1 {online}"),
            ),
            (
                "up",
                "UP",
                format!("UP, changed from CLI. 2 active and 1 {online}"),
            ),
        ] {
            assert_eq!(set(h), "", "{who} {h}");
            assert_eq!(status(), st, "{who} {h}");
            let needle = format!("Server b/a is {}", st_word(st));
            assert_eq!(
                log_text(&log, &needle),
                format!("Server b/a is {line}"),
                "{who} {h}"
            );
        }
        assert_eq!(
            set("sideways"),
            "'set server <srv> health' expects 'up', 'stopping', or 'down'.",
            "{who}"
        );
        // A backup server's lines say so.
        assert_eq!(
            cli_cmd(&sock, "set server b/bk health down").trim(),
            "",
            "{who}"
        );
        assert_eq!(
            log_text(&log, "Server b/bk is DOWN"),
            format!("Backup Server b/bk is DOWN, changed from CLI. 2 active and 0 {left}"),
            "{who}"
        );
        assert_eq!(
            cli_cmd(&sock, "set server b2/t health up").trim(),
            "cannot change health on a tracking server.",
            "{who}"
        );
    }
}

/// `set server B/S health down` on a server without `check` (HAProxy
/// 2.6 takes it): DOWN with HAProxy's line and health 0 in the state
/// file, requests going to the other server; `up` gives it full health
/// (`rise + fall - 1`); leaving a maintenance takes it UP (`no check`)
/// with its health as it was. Before, ebb refused `down` there.
#[test]
fn set_server_health_on_a_server_without_check() {
    for hap in [false, true] {
        let (a, b, log) = two_origins();
        let la = log.addr();
        let be = format!("server a {a}\n    server b {b}\n");
        let cfg = |sock: &Path, bind: &str| fe_to_b(sock, la, bind, &be);
        let Some((_keep, sock, fe, who)) = ebb_or_haproxy(hap, "health-nocheck", cfg) else {
            continue;
        };
        let cmd = |c: &str| cli_cmd(&sock, c).trim().to_string();
        let status = || stat_row(&sock, "b", "a")["status"].clone();
        let health = || servers_state_line(&sock, "b", "a")[12].clone();
        assert_eq!(cmd("set server b/a health down"), "", "{who}");
        assert_eq!((status(), health()), ("DOWN".into(), "0".into()), "{who}");
        assert_eq!(
            log_text(&log, "Server b/a is DOWN"),
            "Server b/a is DOWN, changed from CLI. 1 active and 0 backup servers left. \
             0 sessions active, 0 requeued, 0 remaining in queue.",
            "{who}"
        );
        for _ in 0..3 {
            assert!(body_of(fe, false).starts_with('b'), "{who}");
        }
        assert_eq!(cmd("set server b/a health up"), "", "{who}");
        assert_eq!(
            (status(), health()),
            ("no check".into(), "4".into()),
            "{who}"
        );
        assert_eq!(
            log_text(&log, "Server b/a is UP"),
            "Server b/a is UP, changed from CLI. 2 active and 0 backup servers online. \
             0 sessions requeued, 0 total in queue.",
            "{who}"
        );
        assert_eq!(cmd("set server b/a health down"), "", "{who}");
        assert_eq!(cmd("set server b/a state maint"), "", "{who}");
        assert_eq!(cmd("set server b/a state ready"), "", "{who}");
        assert_eq!(
            (status(), health()),
            ("no check".into(), "0".into()),
            "{who}"
        );
    }
}

/// A server-state file's operational states, restored as HAProxy 2.6
/// restores them at start: 3 (stopping) is NOLB, for a server whose
/// checks then find a 404 (`disable-on-404`) as for one without `check`,
/// and 0 (stopped) DOWN with health 0, each with HAProxy's warning;
/// with no usable server left, requests get 503. Before, ebb restored
/// only the admin state, weight and address: all three came back UP.
#[test]
fn nolb_and_down_restored_from_a_server_state_file() {
    let dir = scratch("state-nolb");
    let file = dir.join("state");
    let a = origin("a", Arc::new(AtomicU16::new(404)));
    let port = a.port();
    let line = |id: u32, name: &str, op: u32, health: u32| {
        format!(
            "3 b {id} {name} 127.0.0.1 {op} 0 1 1 100 1 0 {health} 0 0 0 0 - {port} - 0 0 - - 0\n"
        )
    };
    std::fs::write(
        &file,
        format!(
            "1\n# be_id be_name srv_id srv_name ...\n{}{}{}",
            line(1, "s", 3, 3),
            line(2, "t", 3, 2),
            line(3, "u", 0, 2)
        ),
    )
    .unwrap();
    let log = Syslog::new();
    let la = log.addr();
    let cfg = |sock: &Path, bind: &str| {
        let be = format!(
            "option httpchk GET /chk\n    http-check disable-on-404\n\
             \x20   server s {a} check inter 1h\n    server t {a}\n    server u {a}\n"
        );
        fe_to_b(sock, la, bind, &be).replacen(
            "defaults\n",
            &format!(
                "    server-state-file {}\ndefaults\n    load-server-state-from-file global\n",
                file.display()
            ),
            1,
        )
    };
    let check = |who: &str, sock: &Path, fe: SocketAddr| {
        wait_until(&format!("{who}: s checked"), || {
            stat_row(sock, "b", "s")
                .get("check_status")
                .is_some_and(|x| x == "L7OKC")
        });
        for (srv, status, op, health) in [
            ("s", "NOLB", "3", None),
            ("t", "NOLB", "3", Some("2")),
            ("u", "DOWN", "0", Some("0")),
        ] {
            assert_eq!(stat_row(sock, "b", srv)["status"], status, "{who} {srv}");
            let w = servers_state_line(sock, "b", srv);
            assert_eq!(w[5], op, "{who} {srv}");
            if let Some(h) = health {
                assert_eq!(w[12], h, "{who} {srv}");
            }
        }
        let mut c = Client::connect(fe);
        c.send(b"GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        assert_eq!(c.read_resp().status, 503, "{who}");
    };
    let (e, sock) = ebb_with_admin("state-nolb", cfg);
    for l in [
        "Server b/s is stopping, changed from server-state after a reload. 2 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.",
        "Server b/t is stopping, changed from server-state after a reload. 1 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.",
        "Server b/u is DOWN, changed from server-state after a reload. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.",
    ] {
        assert!(e.wait_stderr(l, std::time::Duration::from_secs(30)).is_some(), "{l}");
    }
    check("ebb", &sock, e.addr());
    drop(e);
    if let Some((h, fe)) = haproxy_beside("state-nolb", cfg) {
        check("haproxy", &h.sock, fe);
    }
}

/// The syslog level of a server's DOWN line: a notice from NOLB (or
/// DRAIN), an alert from UP, as HAProxy 2.6's `srv_was_stopping`; the
/// same for `going DOWN for maintenance`. Before, ebb sent every DOWN
/// line as an alert.
#[test]
fn down_from_nolb_or_drain_is_a_notice() {
    for hap in [false, true] {
        let (a, b, log) = two_origins();
        let la = log.addr();
        let be = format!(
            "option httpchk GET /chk\n\
             \x20   server a {a} check inter 1h\n    server b {b} check inter 1h\n"
        );
        let cfg = |sock: &Path, bind: &str| fe_to_b(sock, la, bind, &be);
        let Some((_keep, sock, _, who)) = ebb_or_haproxy(hap, "down-level", cfg) else {
            continue;
        };
        a_checked(&sock);
        // (local0: 16 * 8 + the level: 1 alert, 5 notice.)
        for (cmds, needle, pri) in [
            (
                &["health stopping", "health down"][..],
                "Server b/a is DOWN",
                "<133>",
            ),
            (
                &["health up", "health down"][..],
                "Server b/a is DOWN",
                "<129>",
            ),
            (
                &["health up", "state drain", "state maint"][..],
                "Server b/a is going DOWN",
                "<133>",
            ),
            (
                &["state ready", "state maint"][..],
                "Server b/a is going DOWN",
                "<129>",
            ),
        ] {
            for c in cmds {
                assert_eq!(
                    cli_cmd(&sock, &format!("set server b/a {c}")).trim(),
                    "",
                    "{who} {c}"
                );
            }
            let l = log.find(needle, |l| l.contains(needle));
            assert!(l.starts_with(pri), "{who} {cmds:?}: {l}");
        }
    }
}

/// The word of HAProxy's line for a state: NOLB is "stopping".
fn st_word(st: &str) -> &str {
    if st == "NOLB" {
        "stopping"
    } else {
        st
    }
}

/// Under another protocol check (`option tcp-check`) the HTTP check
/// options are ignored with HAProxy's warning, at start.
#[test]
fn disable_on_404_under_tcp_check_is_ignored_with_a_warning() {
    let e = Ebb::start(
        "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
         frontend fe\n    bind BIND\n    default_backend b\n\
         backend b\n    option tcp-check\n    http-check disable-on-404\n    server s 127.0.0.1:1\n",
    );
    let w = "'disable-on-404' will be ignored for backend 'b' (requires 'option httpchk').";
    assert!(
        e.wait_stderr(w, std::time::Duration::from_secs(20))
            .is_some(),
        "no warning"
    );
}
