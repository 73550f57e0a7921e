//! What a server's health does to its traffic, and what its traffic does
//! to its health, through the real binary and side by side with HAProxy
//! 2.6 when it is installed: `on-marked-down shutdown-sessions` (the
//! sessions on a server that goes DOWN or into maintenance are killed,
//! logged `D`), `on-marked-up shutdown-backup-sessions` (an active server
//! coming UP kills the backup servers' sessions, logged `U`), `observe`
//! with `error-limit` and `on-error` (live errors count as failed checks:
//! `HANA` in the stats, `hanafail`), the global `spread-checks`, and the
//! dates of the first checks at start.

mod common;

use std::any::Any;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::origin::{Mode, Origin};
use common::*;

/// ebb (`hap` false) or haproxy running `cfg(socket, bind)`: the process,
/// its admin socket and its frontend's address; None when haproxy is not
/// installed.
fn start(
    name: &str,
    hap: bool,
    cfg: &dyn Fn(&Path, &str) -> String,
) -> Option<(Box<dyn Any>, PathBuf, SocketAddr)> {
    if hap {
        let (h, fe) = haproxy_beside(name, cfg)?;
        let sock = h.sock.clone();
        Some((Box::new(h), sock, fe))
    } else {
        let (e, sock) = ebb_with_admin(name, cfg);
        let a = e.addr();
        Some((Box::new(e), sock, a))
    }
}

/// A server that reads what comes and never answers: its connections,
/// each once its first bytes arrived.
fn holding() -> (SocketAddr, Arc<Mutex<Vec<TcpStream>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let h = Arc::clone(&held);
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let mut b = [0u8; 2048];
            let _ = s.read_retry(&mut b);
            h.lock().unwrap().push(s);
        }
    });
    (a, held)
}

/// Both sides: ebb, then haproxy when installed.
fn sides() -> [bool; 2] {
    [false, true]
}

/// The first access-log line of backend `b`.
fn access_line(u: &Syslog) -> String {
    u.find("access log line", |l| l.contains(" fe b/"))
}

/// A log line (of the server's state) containing `needle`.
fn log_line(u: &Syslog, needle: &str) -> String {
    u.find("such log line", |l| l.contains(needle))
}

/// The termination state of an access-log line (`http`: HAProxy's HTTP
/// format, else its TCP one), and the status of an HTTP one.
fn term_of(line: &str, http: bool) -> (String, String) {
    let w: Vec<&str> = line.split_whitespace().collect();
    let i = w
        .iter()
        .position(|x| x.starts_with("b/"))
        .unwrap_or_else(|| panic!("no server field: {line}"));
    if http {
        (w[i + 6].to_string(), w[i + 2].to_string())
    } else {
        (w[i + 3].to_string(), String::new())
    }
}

/// A health-check target: a listener that accepts and closes, until it
/// is dropped (then connections are refused).
struct CheckPort(Origin);

impl CheckPort {
    fn on(bind: &str) -> CheckPort {
        CheckPort(Origin::start_on(bind, "chk", Mode::Close))
    }
    fn port(&self) -> u16 {
        self.0.addr.port()
    }
}

/// Waits until `s1` of backend `b` is UP after a passed check.
fn wait_checked_up(sock: &Path, srv: &str) {
    wait_until("a passed check", || {
        let r = stat_row(sock, "b", srv);
        r.get("status").is_some_and(|s| s == "UP")
            && r.get("check_status").is_some_and(|s| s == "L4OK")
    });
}

fn wait_status(sock: &Path, srv: &str, want: &str) {
    wait_until(&format!("{srv} {want}"), || {
        stat_row(sock, "b", srv)
            .get("status")
            .is_some_and(|s| s == want)
    });
}

/// Whether `show sess` lists a session on server `srv`.
fn sess_on(sock: &Path, srv: &str) -> bool {
    cli_cmd(sock, "show sess").contains(&format!(" srv={srv} "))
}

fn cfg(sock: &Path, bind: &str, log: SocketAddr, mode: &str, servers: &str) -> String {
    let fmt = if mode == "http" { "httplog" } else { "tcplog" };
    format!(
        "global\n    stats socket {} level admin\n    log {log} local0\n\
         defaults\n    mode {mode}\n    log global\n    option {fmt}\n\
         \x20   timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\
         frontend fe\n    bind {bind}\n    default_backend b\n\
         backend b\n{servers}",
        sock.display()
    )
}

/// A client whose request (`http`) or bytes wait on the server that
/// never answers, until the session is killed: what it reads, to the end.
fn client(fe: SocketAddr, http: bool) -> (TcpStream, std::thread::JoinHandle<Vec<u8>>) {
    let mut c = TcpStream::connect(fe).unwrap();
    if http {
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    } else {
        c.write_all(b"hello\r\n\r\n").unwrap();
    }
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = c.try_clone().unwrap();
    let t = std::thread::spawn(move || {
        let mut got = Vec::new();
        if !http {
            let _ = r.read_to_end(&mut got);
            return got;
        }
        // An answer, whole (HAProxy may keep the connection open after
        // it), or what came before the close.
        read_answer(&mut r)
    });
    (c, t)
}

/// What `r` reads up to a whole answer, or to its close.
fn read_answer(r: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while response_len(&got, false).is_none() {
        match r.read_retry(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
    got
}

/// `on-marked-down shutdown-sessions`: a server that goes DOWN by its
/// check, or into maintenance (`disable server`), has its sessions
/// killed: an HTTP exchange waiting for the answer gets a 502 logged
/// `DH`, a tcp session is cut, logged `D-` (HAProxy's, compared). Without
/// the option the session stays.
#[test]
fn on_marked_down_kills_the_sessions_of_the_server() {
    for hap in sides() {
        for (mode, how, opt) in [
            ("http", "check", true),
            ("tcp", "check", true),
            ("http", "maint", true),
            ("tcp", "maint", true),
            ("tcp", "check", false),
        ] {
            let http = mode == "http";
            let (srv, held) = holding();
            let chk = CheckPort::on("127.0.0.1:0");
            let log = Syslog::new();
            let servers = format!(
                "    server s1 {} check port {} inter 100ms fall 1 rise 1{}\n",
                srv,
                chk.port(),
                if opt {
                    " on-marked-down shutdown-sessions"
                } else {
                    ""
                }
            );
            let name = format!("down-{mode}-{how}");
            let c = |k: &Path, b: &str| cfg(k, b, log.addr(), mode, &servers);
            let Some((_p, sock, fe)) = start(&name, hap, &c) else {
                continue;
            };
            wait_checked_up(&sock, "s1");
            let (conn, reader) = client(fe, http);
            wait_until("the session on s1", || sess_on(&sock, "s1"));
            // The bytes reached the server (an exchange waits for its
            // answer, not for a connect).
            wait_until("the bytes at the server", || {
                !held.lock().unwrap().is_empty()
            });
            if how == "check" {
                drop(chk);
                wait_status(&sock, "s1", "DOWN");
            } else {
                assert_eq!(cli_cmd(&sock, "disable server b/s1"), "\n");
                wait_status(&sock, "s1", "MAINT");
            }
            // Both log the change once the sessions were told to end.
            log_line(&log, " DOWN");
            if !opt {
                // Nothing ended it: the server's bytes still reach the
                // client.
                assert!(sess_on(&sock, "s1"), "hap={hap}");
                let mut h = held.lock().unwrap();
                h[0].write_all(b"pong").unwrap();
                h[0].shutdown(std::net::Shutdown::Both).unwrap();
                drop(h);
                assert_eq!(reader.join().unwrap(), b"pong", "hap={hap}");
                continue;
            }
            let got = reader.join().unwrap();
            let line = access_line(&log);
            let (term, status) = term_of(&line, http);
            if http {
                assert!(got.starts_with(b"HTTP/1.1 502"), "hap={hap}: {got:?}");
                assert_eq!(
                    (term.as_str(), status.as_str()),
                    ("DH--", "502"),
                    "hap={hap}: {line}"
                );
                // The client connection goes on after the 502 (HAProxy
                // 2.6's): the next request gets an answer, a 503 with
                // the server out.
                let mut c = conn;
                c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                let next = read_answer(&mut c);
                assert!(next.starts_with(b"HTTP/1.1 503"), "hap={hap}: {next:?}");
            } else {
                assert!(got.is_empty(), "hap={hap}: {got:?}");
                assert_eq!(term, "D-", "hap={hap}: {line}");
            }
            wait_until("no session left", || !sess_on(&sock, "s1"));
        }
    }
}

/// The answer had started: the exchange is cut, logged `DD` with the
/// server's status (HAProxy's).
#[test]
fn on_marked_down_cuts_an_answer_under_way() {
    for hap in sides() {
        // A server that answers a head and part of the body, then waits.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let srv = l.local_addr().unwrap();
        let held = Arc::new(Mutex::new(Vec::new()));
        let h2 = Arc::clone(&held);
        std::thread::spawn(move || {
            for mut s in l.incoming().map_while(Result::ok) {
                let mut b = [0u8; 2048];
                let _ = s.read_retry(&mut b);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
                h2.lock().unwrap().push(s);
            }
        });
        let chk = CheckPort::on("127.0.0.1:0");
        let log = Syslog::new();
        let servers = format!(
            "    server s1 {srv} check port {} inter 100ms fall 1 rise 1 on-marked-down shutdown-sessions\n",
            chk.port()
        );
        let c = |k: &Path, b: &str| cfg(k, b, log.addr(), "http", &servers);
        let Some((_p, sock, fe)) = start("down-data", hap, &c) else {
            continue;
        };
        wait_checked_up(&sock, "s1");
        let (_c, reader) = client(fe, true);
        wait_until("the answer under way", || !held.lock().unwrap().is_empty());
        drop(chk);
        let got = reader.join().unwrap();
        assert!(got.starts_with(b"HTTP/1.1 200"), "hap={hap}: {got:?}");
        let line = access_line(&log);
        let (term, status) = term_of(&line, true);
        assert_eq!(
            (term.as_str(), status.as_str()),
            ("DD--", "200"),
            "hap={hap}: {line}"
        );
    }
}

/// `on-marked-up shutdown-backup-sessions`: while the active server is
/// DOWN the client is on the backup server; when the active one comes
/// UP, the backup's sessions are killed, logged `U` (HAProxy's).
#[test]
fn on_marked_up_kills_the_backup_servers_sessions() {
    for hap in sides() {
        for mode in ["tcp", "http"] {
            let http = mode == "http";
            let (srv, _) = holding();
            let (bk, bk_held) = holding();
            // The active server's check port: nothing there yet.
            let port = free_port();
            let log = Syslog::new();
            let servers = format!(
                "    server s1 {} check port {port} inter 100ms fall 1 rise 1 on-marked-up shutdown-backup-sessions\n\
                 \x20   server bk {} backup\n",
                srv, bk
            );
            let c = |k: &Path, b: &str| cfg(k, b, log.addr(), mode, &servers);
            let Some((_p, sock, fe)) = start(&format!("up-{mode}"), hap, &c) else {
                continue;
            };
            wait_status(&sock, "s1", "DOWN");
            let (_c, reader) = client(fe, http);
            wait_until("the session on the backup", || sess_on(&sock, "bk"));
            wait_until("the bytes at the backup", || {
                !bk_held.lock().unwrap().is_empty()
            });
            let _chk = CheckPort::on(&format!("127.0.0.1:{port}"));
            let got = reader.join().unwrap();
            let line = access_line(&log);
            assert!(line.contains(" fe b/bk "), "hap={hap}: {line}");
            let (term, status) = term_of(&line, http);
            if http {
                assert!(got.starts_with(b"HTTP/1.1 502"), "hap={hap}: {got:?}");
                assert_eq!(
                    (term.as_str(), status.as_str()),
                    ("UH--", "502"),
                    "hap={hap}: {line}"
                );
            } else {
                assert_eq!(term, "U-", "hap={hap}: {line}");
            }
        }
    }
}

/// An HTTP server answering every request with `status`.
fn answering(status: u16) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let mut b = [0u8; 2048];
            let _ = s.read_retry(&mut b);
            let _ = s.write_all(
                format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            );
        }
    });
    a
}

/// One request through the frontend; its status (0: no answer).
fn status_of(fe: SocketAddr) -> u16 {
    raw(
        fe,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .map_or(0, |r| r.status)
}

/// `observe layer7`, `error-limit 3`: three 500s in a row are three
/// errors, and `on-error` acts: `mark-down` takes the server DOWN at once
/// (the next request finds no server), `fail-check` counts one failed
/// check (still UP with `fall 3`); the stats show `HANA` and `hanafail`
/// 1, `chkfail` 1 (HAProxy's, compared). 501 and 505 are not errors, and
/// a good answer starts the count again.
#[test]
fn observe_layer7_errors_trigger_on_error() {
    for hap in sides() {
        for on_error in ["mark-down", "fail-check", "sudden-death"] {
            let bad = answering(500);
            let chk = CheckPort::on("127.0.0.1:0");
            let log = Syslog::new();
            let servers = format!(
                "    server s1 {bad} check port {} inter 30s rise 1 fall 3 observe layer7 error-limit 3 on-error {on_error}\n",
                chk.port()
            );
            let c = |k: &Path, b: &str| cfg(k, b, log.addr(), "http", &servers);
            let Some((_p, sock, fe)) = start(&format!("obs-{on_error}"), hap, &c) else {
                continue;
            };
            wait_checked_up(&sock, "s1");
            assert_eq!(stat_row(&sock, "b", "s1")["hanafail"], "0");
            for _ in 0..2 {
                assert_eq!(status_of(fe), 500);
            }
            assert_eq!(stat_row(&sock, "b", "s1")["hanafail"], "0", "hap={hap}");
            assert_eq!(status_of(fe), 500);
            wait_until("the on-error action", || {
                stat_row(&sock, "b", "s1")["hanafail"] == "1"
            });
            let r = stat_row(&sock, "b", "s1");
            assert_eq!(r["check_status"], "HANA", "hap={hap} {on_error}");
            assert_eq!(r["chkfail"], "1", "hap={hap} {on_error}");
            if on_error == "mark-down" {
                wait_status(&sock, "s1", "DOWN");
                assert_eq!(status_of(fe), 503, "hap={hap}");
                assert_eq!(r["chkdown"], "1", "hap={hap}");
            } else {
                assert!(r["status"].starts_with("UP"), "hap={hap} {on_error}: {r:?}");
                assert_eq!(r["chkdown"], "0", "hap={hap}");
            }
            if on_error == "sudden-death" {
                // One more failure (three more errors) and it is DOWN,
                // where `fail-check` would leave one to go.
                for _ in 0..3 {
                    assert_eq!(status_of(fe), 500);
                }
                wait_status(&sock, "s1", "DOWN");
            }
        }
    }
}

/// Statuses 501 and 505 answer the client's request: not errors; any
/// other answer clears the count (`error-limit 2` never reached).
#[test]
fn observe_layer7_spares_501_505_and_good_answers_clear_the_count() {
    for hap in sides() {
        let b500 = answering(500);
        let b501 = answering(501);
        let b505 = answering(505);
        let ok = answering(404);
        let chk = CheckPort::on("127.0.0.1:0");
        let log = Syslog::new();
        // One server, its address switched by the CLI between requests.
        let servers = format!(
            "    server s1 {b500} check port {} inter 30s observe layer7 error-limit 2 on-error mark-down\n",
            chk.port()
        );
        let c = |k: &Path, b: &str| cfg(k, b, log.addr(), "http", &servers);
        let Some((_p, sock, fe)) = start("obs-clear", hap, &c) else {
            continue;
        };
        wait_checked_up(&sock, "s1");
        let to = |a: SocketAddr| {
            cli_cmd(
                &sock,
                &format!("set server b/s1 addr {} port {}", a.ip(), a.port()),
            );
        };
        for (a, st) in [
            (b500, 500),
            (b501, 501),
            (b505, 505),
            (ok, 404),
            (b500, 500),
        ] {
            to(a);
            assert_eq!(status_of(fe), st, "hap={hap}");
        }
        // 500, 501, 505, 404, 500: never two errors in a row.
        let r = stat_row(&sock, "b", "s1");
        assert_eq!(r["hanafail"], "0", "hap={hap}: {r:?}");
        assert_eq!(r["status"], "UP", "hap={hap}");
        assert_eq!(status_of(fe), 500);
        wait_until("two errors in a row", || {
            stat_row(&sock, "b", "s1")["hanafail"] == "1"
        });
        wait_status(&sock, "s1", "DOWN");
    }
}

/// `observe layer4`: failed connects are errors (in `mode tcp` too); with
/// `on-error mark-down` the server goes DOWN though its checks pass.
#[test]
fn observe_layer4_counts_failed_connects() {
    for hap in sides() {
        // Nothing listens at the server's address; its checks go
        // elsewhere and pass.
        let dead = format!("127.0.0.1:{}", free_port());
        let chk = CheckPort::on("127.0.0.1:0");
        let log = Syslog::new();
        let servers = format!(
            "    retries 0\n    server s1 {dead} check port {} inter 30s observe layer4 error-limit 2 on-error mark-down\n",
            chk.port()
        );
        let c = |k: &Path, b: &str| cfg(k, b, log.addr(), "tcp", &servers);
        let Some((_p, sock, fe)) = start("obs-l4", hap, &c) else {
            continue;
        };
        wait_checked_up(&sock, "s1");
        for _ in 0..2 {
            let mut c = TcpStream::connect(fe).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let _ = c.write_all(b"x");
            let mut b = Vec::new();
            let _ = c.read_to_end(&mut b);
        }
        wait_status(&sock, "s1", "DOWN");
        let r = stat_row(&sock, "b", "s1");
        assert_eq!(r["hanafail"], "1", "hap={hap}: {r:?}");
        assert_eq!(r["check_status"], "HANA", "hap={hap}");
    }
}

/// `observe layer7` needs an HTTP proxy; the values are checked; the
/// others are refused with HAProxy's reasons (HAProxy refuses them too).
#[test]
fn bad_values_are_refused() {
    let dir = scratch("health-refused");
    let head = "defaults\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\nfrontend fe\n    bind 127.0.0.1:1\n    default_backend be\nbackend be\n";
    for (i, (lines, what, hap_refuses)) in [
        (
            "    server a 127.0.0.1:1 check observe layer7\n",
            "f0.cfg:9: server 'a': 'layer7' can only be used in http proxies.",
            false,
        ),
        (
            "    server a 127.0.0.1:1 check error-limit 0\n",
            "error-limit has to be > 0.",
            true,
        ),
        (
            "    server a 127.0.0.1:1 check on-error foo\n",
            "'on-error' expects one of 'fastinter', 'fail-check', 'sudden-death' or 'mark-down' but got 'foo'",
            true,
        ),
        (
            "    server a 127.0.0.1:1 on-marked-down stop\n",
            "'on-marked-down' expects 'shutdown-sessions' but got 'stop'",
            true,
        ),
        (
            "    server a 127.0.0.1:1 on-marked-up shutdown-sessions\n",
            "'on-marked-up' expects 'shutdown-backup-sessions' but got 'shutdown-sessions'",
            true,
        ),
        (
            "    server a 127.0.0.1:1 observe layer3\n",
            "'observe' expects one of 'none', 'layer4', 'layer7' but got 'layer3'",
            true,
        ),
    ]
    .iter()
    .enumerate()
    {
        let text = format!("{head}{lines}");
        assert_refused(&dir, &format!("f{i}.cfg"), &text, what, *hap_refuses);
    }
    for (i, v) in ["51", "-1", "x"].iter().enumerate() {
        let f = format!("g{i}.cfg");
        std::fs::write(
            dir.join(&f),
            format!("global\n    spread-checks {v}\n{head}"),
        )
        .unwrap();
        let (rc, _out, err) = run_ebb(&["-c", "-f", &f], &dir);
        assert_ne!(rc, 0, "spread-checks {v}");
        assert!(
            err.contains("'spread-checks' needs a positive value in range 0..50."),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `spread-checks 50`: the dates of a server's checks move at random by
/// up to half their interval either way. Without it a check never comes
/// before its interval is over; with it some come well before (checks
/// are late under load, never early, so the test holds on a loaded
/// machine). HAProxy's likewise.
#[test]
fn spread_checks_moves_check_dates() {
    for hap in sides() {
        // The check target (of HTTP checks: the date of an L4 check, which
        // both reset at once, would not reach an accept) notes when each
        // check arrives.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let dates = Arc::new(Mutex::new(Vec::<Instant>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (dates, stop) = (Arc::clone(&dates), Arc::clone(&stop));
            std::thread::spawn(move || {
                for mut s in l.incoming().map_while(Result::ok) {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    dates.lock().unwrap().push(Instant::now());
                    let mut b = [0u8; 2048];
                    let _ = s.read_retry(&mut b);
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                }
            });
        }
        let log = Syslog::new();
        let o = Origin::start("o", Mode::Ok);
        let servers = format!(
            "    option httpchk\n    server s1 {} check port {port} inter 400ms\n",
            o.addr
        );
        let c = |k: &Path, b: &str| {
            cfg(k, b, log.addr(), "http", &servers)
                .replace(" level admin\n", " level admin\n    spread-checks 50\n")
        };
        let Some((_p, _sock, _fe)) = start("spread", hap, &c) else {
            continue;
        };
        // 400 ms +/- 200: at 30 draws, one under 320 ms is all but sure
        // (each is with probability 0.3). The wait ends at the first such
        // gap (about the third), or after 30 checks without one.
        let gaps = || -> Vec<u128> {
            let d = dates.lock().unwrap();
            d.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect()
        };
        wait_until("a check early, or 30 checks", || {
            let g = gaps();
            g.len() >= 30 || g.iter().any(|g| *g < 320)
        });
        stop.store(true, Ordering::SeqCst);
        let gaps = gaps();
        assert!(gaps.iter().any(|g| *g < 320), "hap={hap}: {gaps:?}");
    }
}

/// The first checks at start, spread as HAProxy 2.6 spreads them: four
/// servers at `inter 2s` are first checked 0, 0.5, 1 and 1.5 s after
/// start (check i of n at i/n of the interval; checks come late under
/// load, never early, so each lower bound holds on a loaded machine);
/// before its first check a server shows `check_status` `INI` and takes
/// requests. The same on haproxy.
#[test]
fn first_checks_are_spread_over_the_interval() {
    for hap in sides() {
        // One HTTP check target per server (an L4 check's reset may never
        // reach an accept): the date of its first check.
        let firsts: Vec<Arc<Mutex<Option<Instant>>>> = (0..4).map(|_| Arc::default()).collect();
        let mut ports = Vec::new();
        for f in &firsts {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            ports.push(l.local_addr().unwrap().port());
            let f = Arc::clone(f);
            std::thread::spawn(move || {
                for mut s in l.incoming().map_while(Result::ok) {
                    f.lock().unwrap().get_or_insert_with(Instant::now);
                    let mut b = [0u8; 2048];
                    let _ = s.read_retry(&mut b);
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                }
            });
        }
        let log = Syslog::new();
        let o = Origin::start("o", Mode::Ok);
        let mut servers = "    option httpchk\n".to_string();
        for (i, p) in ports.iter().enumerate() {
            servers += &format!("    server s{i} {} check port {p} inter 2s\n", o.addr);
        }
        let c = |k: &Path, b: &str| cfg(k, b, log.addr(), "http", &servers);
        let t0 = Instant::now();
        let Some((_p, sock, fe)) = start("first-spread", hap, &c) else {
            continue;
        };
        // The last server's first check is 1.5 s away: not run yet
        // unless the machine stalled that long.
        let r = stat_row(&sock, "b", "s3");
        if t0.elapsed() < Duration::from_millis(1200) {
            assert_eq!(
                r.get("check_status").map(String::as_str),
                Some("INI"),
                "hap={hap}: {r:?}"
            );
            assert_eq!(
                r.get("status").map(String::as_str),
                Some("UP 1/3"),
                "hap={hap}"
            );
            assert_eq!(get(fe, "/").status, 200, "hap={hap}");
        }
        wait_until("every first check", || {
            firsts.iter().all(|f| f.lock().unwrap().is_some())
        });
        for (i, f) in firsts.iter().enumerate() {
            let at = f.lock().unwrap().unwrap().duration_since(t0);
            assert!(
                at >= Duration::from_millis(500 * i as u64),
                "hap={hap}: s{i} first checked after {at:?}"
            );
        }
    }
}

/// Whether `st` is `WORD n/of` with n in 1..of: HAProxy's transition
/// states of the stats (`UP 99/100` going down, `DOWN 1/100` going up).
fn transition(st: &str, word: &str, of: u32) -> bool {
    let Some((n, d)) = st
        .strip_prefix(word)
        .and_then(|r| r.strip_prefix(' '))
        .and_then(|r| r.split_once('/'))
    else {
        return false;
    };
    d == of.to_string() && n.parse::<u32>().is_ok_and(|n| (1..of).contains(&n))
}

/// `show stat`'s status between UP and DOWN, as HAProxy shows it: a
/// server starts UP with its health at `rise`, so the first failed check
/// takes it DOWN at once (not `fall` of them); passed checks while DOWN
/// show `DOWN n/rise`, failed ones while UP `UP n/fall` (the failures
/// left); one passed check at `rise 1` is full health, `UP`.
#[test]
fn stats_show_the_states_between_up_and_down() {
    for hap in sides() {
        let down_port = free_port();
        let up_chk = CheckPort::on("127.0.0.1:0");
        let log = Syslog::new();
        let servers = format!(
            "    server s1 127.0.0.1:{down_port} check inter 1s rise 100 fall 100\n\
             \x20   server s2 127.0.0.1:{} check inter 1s rise 1 fall 100\n",
            up_chk.port()
        );
        let c = |k: &Path, b: &str| cfg(k, b, log.addr(), "http", &servers);
        let Some((_p, sock, _fe)) = start("transitions", hap, &c) else {
            continue;
        };
        wait_status(&sock, "s1", "DOWN");
        // HAProxy's line for the change: the servers left and the queue.
        let l = log_line(&log, "Server b/s1 is DOWN, reason: ");
        assert!(
            l.trim_end().ends_with(
                "ms. 1 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue."
            ),
            "hap={hap}: {l}"
        );
        wait_status(&sock, "s2", "UP");
        let _s1_chk = CheckPort::on(&format!("127.0.0.1:{down_port}"));
        drop(up_chk);
        // The status, and whether `check_health` is the counter it shows
        // (successes while DOWN; `n/fall` UP is health `n + rise - 1`).
        let status = |srv: &str| {
            let mut r = stat_row(&sock, "b", srv);
            let st = r.remove("status").unwrap_or_default();
            let n = st.split([' ', '/']).nth(1).unwrap_or("").to_string();
            (st, r.get("check_health") == Some(&n))
        };
        wait_until("s1 going up", || {
            let (st, health) = status("s1");
            transition(&st, "DOWN", 100) && health
        });
        wait_until("s2 going down", || {
            let (st, health) = status("s2");
            transition(&st, "UP", 100) && health
        });
    }
}

/// `on-marked-down shutdown-sessions` on an HTTP/2 client's stream that
/// waits for its answer: the stream is reset REFUSED_STREAM (the client
/// may send it again), no 502, as HAProxy's.
#[test]
fn on_marked_down_refuses_an_http2_stream() {
    for hap in sides() {
        let (srv, held) = holding();
        let chk = CheckPort::on("127.0.0.1:0");
        let log = Syslog::new();
        let servers = format!(
            "    server s1 {srv} check port {} inter 100ms fall 1 rise 1 on-marked-down shutdown-sessions\n",
            chk.port()
        );
        let c = |k: &Path, b: &str| cfg(k, &format!("{b} proto h2"), log.addr(), "http", &servers);
        let Some((_p, sock, fe)) = start("down-h2", hap, &c) else {
            continue;
        };
        wait_checked_up(&sock, "s1");
        let url = format!("http://{fe}/");
        let client = std::thread::spawn(move || {
            let o = std::process::Command::new("nghttp")
                .args(["-v", "-t", "30", &url])
                .output()
                .expect("nghttp runs");
            String::from_utf8_lossy(&o.stdout).into_owned()
        });
        wait_until("the request at the server", || {
            !held.lock().unwrap().is_empty()
        });
        drop(chk);
        wait_status(&sock, "s1", "DOWN");
        let out = client.join().unwrap();
        assert!(
            out.contains("error_code=REFUSED_STREAM"),
            "hap={hap}: {out}"
        );
        assert!(!out.contains(":status:"), "hap={hap}: {out}");
    }
}

/// The fields of a server's line of `show servers state b`: its
/// operational state, its check's health and its check's state bits.
fn state_fields(sock: &Path, srv: &str) -> (String, String, String) {
    let w = servers_state_line(sock, "b", srv);
    (w[5].clone(), w[12].clone(), w[13].clone())
}

/// An HTTP check's target: each check is a connection it accepts and
/// answers (a plain connect may end before it is accepted, uncounted).
fn http_target(bind: &str) -> Origin {
    Origin::start_on(bind, "chk", Mode::Ok)
}

/// Waits until `srv` of backend `b` is UP after a passed HTTP check.
fn wait_http_checked_up(sock: &Path, srv: &str) {
    wait_until("a passed check", || {
        let r = stat_row(sock, "b", srv);
        r.get("status").is_some_and(|s| s == "UP")
            && r.get("check_status").is_some_and(|s| s == "L7OK")
    });
}

/// A server in maintenance is not checked (HAProxy 2.6 pauses its
/// check): `disable server` and the `disabled` keyword alike. Meanwhile
/// `show stat` shows no check status, bounds or health (the failure
/// counters stay), `show servers state` health 0 with the paused bit
/// (14), and failures count for nothing; `enable server` resumes the
/// check at health `rise`, one failure from DOWN.
#[test]
fn maintenance_pauses_the_health_check() {
    for hap in sides() {
        let chk = http_target("127.0.0.1:0");
        let port = chk.addr.port();
        let off = http_target("127.0.0.1:0");
        let log = Syslog::new();
        let servers = format!(
            "    option httpchk GET /\n\
             \x20   server s1 127.0.0.1:{port} check inter 100ms fall 3 rise 2\n\
             \x20   server s2 {} check inter 100ms fall 3 rise 2 disabled\n",
            off.addr
        );
        let c = |k: &Path, b: &str| cfg(k, b, log.addr(), "http", &servers);
        let Some((_p, sock, _fe)) = start("maint-pause", hap, &c) else {
            continue;
        };
        wait_http_checked_up(&sock, "s1");
        assert_eq!(cli_cmd(&sock, "disable server b/s1"), "\n");
        wait_status(&sock, "s1", "MAINT");
        for srv in ["s1", "s2"] {
            let r = stat_row(&sock, "b", srv);
            let empty = ["check_status", "check_desc", "check_rise", "check_health"];
            for k in empty {
                assert_eq!(r[k], "", "hap={hap} {srv} {k}");
            }
            assert_eq!(r["chkfail"], "0", "hap={hap} {srv}");
            // Paused (14); a check under way when maintenance began adds
            // 1 (CHK_ST_INPROGRESS) until it ends: waited for.
            let mut st = state_fields(&sock, srv);
            came_within(Duration::from_secs(30), || {
                st = state_fields(&sock, srv);
                st.2 != "15"
            });
            assert_eq!(st, ("0".into(), "0".into(), "14".into()), "hap={hap} {srv}");
        }
        // No check reaches either server, and failures count for nothing
        // (ten intervals: fewer on a loaded machine, never more; a check
        // under way when maintenance began may still land).
        drop(chk);
        let seen = off.conns.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(
            (seen, off.conns.load(Ordering::SeqCst)),
            (0, 0),
            "hap={hap}"
        );
        let r = stat_row(&sock, "b", "s1");
        let got = (r["status"].as_str(), r["chkfail"].as_str());
        assert_eq!(got, ("MAINT", "0"), "hap={hap}");
        // Back at health `rise`: the first failure takes it DOWN.
        assert_eq!(cli_cmd(&sock, "enable server b/s1"), "\n");
        log_line(
            &log,
            "Server b/s1 is UP/READY (leaving forced maintenance).",
        );
        wait_status(&sock, "s1", "DOWN");
        let r = stat_row(&sock, "b", "s1");
        assert_eq!(r["chkfail"], "1", "hap={hap}");
        let l = log_line(
            &log,
            "Server b/s1 is DOWN, reason: Layer4 connection problem",
        );
        assert!(l.contains("check duration"), "hap={hap}: {l}");
    }
}

/// A `disabled` server is not checked; leaving maintenance its health
/// starts at `rise`: `UP 1/3` at once (`fall 3`); a passed check then
/// brings it to full health (HAProxy's, compared).
#[test]
fn enable_server_resumes_at_health_rise() {
    for hap in sides() {
        let chk = http_target("127.0.0.1:0");
        let log = Syslog::new();
        let servers = format!(
            "    option httpchk GET /\n\
             \x20   server s1 {} check inter 100ms fall 3 rise 2 disabled\n",
            chk.addr
        );
        let c = |k: &Path, b: &str| cfg(k, b, log.addr(), "http", &servers);
        let Some((_p, sock, _fe)) = start("maint-resume", hap, &c) else {
            continue;
        };
        wait_status(&sock, "s1", "MAINT");
        // Five intervals without a check.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(chk.conns.load(Ordering::SeqCst), 0, "hap={hap}");
        assert_eq!(cli_cmd(&sock, "enable server b/s1"), "\n");
        // The next check comes at its date (HAProxy's paused task keeps
        // waking every `inter`): "UP 1/3" until then; a passed check at
        // `rise` or more is full health.
        let r = stat_row(&sock, "b", "s1");
        let now = (r["status"].as_str(), r["check_health"].as_str());
        assert!(
            matches!(now, ("UP 1/3", "2") | ("UP", "4")),
            "hap={hap}: {now:?}"
        );
        wait_http_checked_up(&sock, "s1");
        assert_eq!(stat_row(&sock, "b", "s1")["check_health"], "4");
        assert!(chk.conns.load(Ordering::SeqCst) >= 1, "hap={hap}");
    }
}
