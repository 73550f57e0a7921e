//! The runtime CLI through the real binary: the `stats socket` line
//! protocol (one line, `;`-separated commands, `prompt` mode), every
//! command's output and effect on real traffic, levels refused, `show
//! sess` under concurrent traffic, profiling counts, the `ebb cli` client,
//! and the server-state file across a restart.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::origin::{Gate, Mode, Origin};
use common::*;

/// Sends one line, reads until the server closes.
fn cli(sock: &Path, line: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

struct Setup {
    e: Ebb,
    admin: PathBuf,
    oper: PathBuf,
    user: PathBuf,
}

fn start(backend: &str, global_extra: &str) -> Setup {
    let d = scratch("cli-sock");
    let admin = d.join("admin.sock");
    let oper = d.join("oper.sock");
    let user = d.join("user.sock");
    let cfg = format!(
        "global\n    nbthread 2\n    stats socket {} mode 600 level admin\n    stats socket {} level operator\n    stats socket {} level user\n{global_extra}\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe\n    bind BIND\n    default_backend be\nbackend be\n{backend}",
        admin.display(),
        oper.display(),
        user.display()
    );
    let e = Ebb::start(&cfg);
    Setup {
        e,
        admin,
        oper,
        user,
    }
}

fn srv(name: &str, o: &Origin, opts: &str) -> String {
    format!("    server {name} {} {opts}\n", o.addr)
}

fn hit(e: &Ebb, n: usize) {
    let mut c = Client::connect(e.addr());
    for i in 0..n {
        c.send(format!("GET /x{i} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
        let st = c.read_resp().status;
        assert_eq!(st, 200, "{:?}", e.stderr.lock().unwrap());
    }
}

#[test]
fn socket_mode_help_info_and_protocol() {
    let a = Origin::start("a", Mode::Ok);
    let s = start(&srv("a", &a, ""), "");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&s.admin).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    let info = cli(&s.admin, "show info");
    assert!(info.contains("Name: ebb\n"), "{info}");
    assert!(info.contains(&format!("Pid: {}\n", s.e.pid())), "{info}");
    assert!(info.contains("Nbthread: 2\n"), "{info}");
    assert!(
        info.ends_with("\n\n"),
        "answers end with an empty line: {info:?}"
    );

    // Help lists only what the level allows.
    let h = cli(&s.user, "help");
    assert!(h.contains("show info") && !h.contains("set server"), "{h}");
    assert!(cli(&s.admin, "help").contains("set server"));

    // Two commands on one line, each answer closed by an empty line.
    let two = cli(&s.user, "show backend; show backend");
    assert_eq!(two, "# name\nbe\n\n# name\nbe\n\n");
    // Unknown command: HAProxy's usage message (unknown_commands_as_haproxy).
    assert!(cli(&s.user, "frobnicate").starts_with("Unknown command, but maybe"));
    // One of HAProxy's that ebb lacks: ebb's list.
    assert!(cli(&s.user, "show fd").starts_with("Unknown command: 'show fd'"));

    // Interactive mode: a prompt after each answer, the connection stays.
    let mut c = UnixStream::connect(&s.oper).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"prompt\n").unwrap();
    let mut buf = [0u8; 4096];
    // The empty line that ends `prompt`'s (empty) answer, then the
    // prompt, as haproxy 2.6.12 writes them.
    let mut got = Vec::new();
    while !got.ends_with(b"> ") {
        let n = c.read_retry(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"\n> ");
    c.write_all(b"show backend\n").unwrap();
    let mut got = Vec::new();
    while !got.ends_with(b"> ") {
        let n = c.read_retry(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"# name\nbe\n\n> ");
    c.write_all(b"quit\n").unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");

    // The built-in client.
    let (code, out, _) = run_ebb(
        &["cli", s.admin.to_str().unwrap(), "show", "backend"],
        &s.e.dir,
    );
    assert_eq!(code, 0);
    assert_eq!(out, "# name\nbe\n\n");
    let (code, _, err) = run_ebb(&["cli", "/nonexistent/sock", "help"], &s.e.dir);
    assert_eq!(code, 1);
    assert!(err.contains("cannot connect"), "{err}");
}

#[test]
fn levels_are_refused_with_a_message() {
    let a = Origin::start("a", Mode::Ok);
    let s = start(&srv("a", &a, ""), "");
    for (sock, cmd, need) in [
        (&s.user, "show sess", "operator"),
        (&s.user, "clear counters", "operator"),
        (&s.user, "show tasks", "operator"),
        (&s.oper, "set server be/a state maint", "admin"),
        (&s.oper, "set server be/a weight 3", "admin"),
        (&s.oper, "disable server be/a", "admin"),
        (&s.oper, "enable server be/a", "admin"),
        (&s.oper, "set maxconn server be/a 3", "admin"),
        (&s.oper, "shutdown session 1", "admin"),
        (&s.oper, "shutdown sessions server be/a", "admin"),
        (&s.oper, "set profiling tasks on", "admin"),
        (&s.oper, "clear counters all", "admin"),
    ] {
        let out = cli(sock, cmd);
        assert!(
            out == "Permission denied\n\n",
            "{cmd} (needs {need}): {out}"
        );
    }
    // Nothing changed.
    let st = cli(&s.admin, "show servers state be");
    assert!(
        st.lines()
            .nth(2)
            .unwrap()
            // HAProxy numbers its CLI proxy 1, then fe 2, be 3.
            .starts_with("3 be 1 a 127.0.0.1 2 0 1 1 "),
        "{st}"
    );
    // Operator may do operator things.
    assert_eq!(cli(&s.oper, "clear counters"), "\n");
    assert!(!cli(&s.oper, "show sess").starts_with("Permission"));
}

#[test]
fn maint_drain_weight_and_maxconn_steer_traffic() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let be = format!(
        "    balance roundrobin\n{}{}",
        srv("a", &a, ""),
        srv("b", &b, "")
    );
    let s = start(&be, "");
    let n = |o: &Origin| o.requests.load(Ordering::SeqCst);

    hit(&s.e, 10);
    assert_eq!((n(&a), n(&b)), (5, 5));

    // maint: a gets nothing.
    assert_eq!(cli(&s.admin, "set server be/a state maint"), "\n");
    hit(&s.e, 10);
    assert_eq!((n(&a), n(&b)), (5, 15));
    let csv = cli(&s.admin, "show stat");
    let row_a = csv.lines().find(|l| l.starts_with("be,a,")).unwrap();
    assert!(row_a.contains(",MAINT,"), "{row_a}");

    // drain: no new traffic either.
    assert_eq!(cli(&s.admin, "set server be/a state drain"), "\n");
    hit(&s.e, 4);
    assert_eq!(n(&a), 5);
    let csv = cli(&s.user, "show stat");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("be,a,") && l.contains(",DRAIN,")),
        "{csv}"
    );

    // ready again, then weights 1:3.
    assert_eq!(cli(&s.admin, "enable server be/a"), "\n");
    assert_eq!(cli(&s.admin, "set server be/b weight 3"), "\n");
    let (a0, b0) = (n(&a), n(&b));
    hit(&s.e, 40);
    assert_eq!((n(&a) - a0, n(&b) - b0), (10, 30));
    // Percent of the configured weight: 100% of 1 is 1: back to 1:1.
    assert_eq!(cli(&s.admin, "set server be/b weight 100%"), "\n");
    let (a0, b0) = (n(&a), n(&b));
    hit(&s.e, 20);
    assert_eq!((n(&a) - a0, n(&b) - b0), (10, 10));
    // disable = maint.
    assert_eq!(cli(&s.admin, "disable server be/b"), "\n");
    let b0 = n(&b);
    hit(&s.e, 6);
    assert_eq!(n(&b), b0);
    // In maintenance a server is stopped: op state 0, as in HAProxy.
    assert!(cli(&s.admin, "show servers state be").contains(" b 127.0.0.1 0 1 1 1 "));

    // Errors name what is wrong.
    assert_eq!(
        cli(&s.admin, "set server be/zz state maint"),
        "No such server.\n\n"
    );
    assert_eq!(
        cli(&s.admin, "set server nope/a weight 1"),
        "No such backend.\n\n"
    );
    assert!(cli(&s.admin, "set server be/a weight 999").contains("at most 256"));
    assert!(
        cli(&s.admin, "set server be/a state sleepy").contains("expected ready, drain or maint")
    );

    // maxconn: visible in show stat's slim column.
    assert_eq!(cli(&s.admin, "set maxconn server be/a 7"), "\n");
    let csv = cli(&s.admin, "show stat");
    let hdr: Vec<&str> = csv
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let slim = hdr.iter().position(|h| *h == "slim").unwrap();
    let row_a: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with("be,a,"))
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(row_a[slim], "7");
    let stot = hdr.iter().position(|h| *h == "stot").unwrap();
    assert_eq!(row_a[stot], n(&a).to_string());
    let be_row: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with("be,BACKEND,"))
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(be_row[stot], (n(&a) + n(&b)).to_string());

    // clear counters all zeroes them.
    assert_eq!(cli(&s.admin, "clear counters all"), "\n");
    let csv = cli(&s.admin, "show stat");
    let row_a: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with("be,a,"))
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(row_a[stot], "0");
}

#[test]
fn maxconn_from_the_cli_releases_the_queue() {
    // The server holds every request until the gate opens.
    let gate = Gate::default();
    let a = Origin::start("a", Mode::Gate(gate.clone()));
    let s = start(&srv("a", &a, "maxconn 1"), "");
    // Four clients at once on a server with one slot: they queue.
    let addr = s.e.addr();
    let hs: Vec<_> = (0..4)
        .map(|i| std::thread::spawn(move || get(addr, &format!("/q{i}")).status))
        .collect();
    // One at the server, three in the backend's queue...
    wait_until("one busy, three queued", || {
        a.busy.load(Ordering::SeqCst) == 1 && backend_qcur(&s.admin, "be") == Some(3)
    });
    // ...until the limit is raised: all four are at the server at once,
    // with the gate still closed.
    assert_eq!(cli(&s.admin, "set maxconn server be/a 4"), "\n");
    wait_until("four at the server", || a.busy.load(Ordering::SeqCst) == 4);
    assert_eq!(backend_qcur(&s.admin, "be"), Some(0));
    gate.open();
    for h in hs {
        assert_eq!(h.join().unwrap(), 200);
    }
    assert_eq!(a.max_busy.load(Ordering::SeqCst), 4);
}

#[test]
fn show_sess_under_traffic_and_shutdown() {
    // Server a answers while its gate is open; the slow exchange waits
    // behind it until it is cut (a fixed delay made the test a race: a
    // loaded machine could finish the exchange before the cut).
    let gate = Gate::default();
    gate.open();
    let a = Origin::start("a", Mode::Gate(gate.clone()));
    let b = Origin::start("b", Mode::Ok);
    let s = start(
        &format!("{}{}", srv("a", &a, ""), srv("b", &b, "backup")),
        "",
    );
    let addr = s.e.addr();

    // Idle keep-alive clients, and traffic hammering in the background.
    let idle: Vec<Client> = (0..5)
        .map(|_| {
            let mut c = Client::connect(addr);
            c.send(b"GET /idle HTTP/1.1\r\nHost: h\r\n\r\n");
            let _ = c.read_resp();
            c
        })
        .collect();
    let _ = &idle;
    gate.close();
    let stop = Arc::new(AtomicBool::new(false));
    let bg: Vec<_> = (0..3)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let mut c = Client::connect(addr);
                    c.send(b"GET /bg HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
                    let _ = c.read_resp_opt(false);
                    n += 1;
                }
                n
            })
        })
        .collect();
    // One slow request in flight on server a.
    let mut slow = Client::connect(addr);
    slow.send(b"GET /slow HTTP/1.1\r\nHost: h\r\n\r\n");
    wait_until("the slow request at server a", || {
        a.heads
            .lock()
            .unwrap()
            .iter()
            .any(|h| h.starts_with("GET /slow "))
    });

    for _ in 0..20 {
        let out = cli(&s.oper, "show sess");
        assert!(out.ends_with("\n\n"), "{out}");
        let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
        // At least the five idle ones and the slow one.
        assert!(lines.len() >= 6, "{out}");
        for l in &lines {
            assert!(
                l.starts_with("0x")
                    && l.contains(" proto=tcpv4 src=127.0.0.1:")
                    && l.contains(" fe=fe "),
                "{l}"
            );
        }
    }
    let all = cli(&s.oper, "show sess all");
    assert!(all.contains(" epoch="), "{all}");
    let out = cli(&s.oper, "show sess");
    let slow_line = out
        .lines()
        .find(|l| l.contains("be=be srv=a"))
        .unwrap_or_else(|| panic!("no session on be/a: {out}"));
    assert!(slow_line.contains("reqs=1"), "{slow_line}");

    // shutdown sessions server: the slow exchange ends as HAProxy 2.6
    // ends it, a 502 while the answer is awaited, then the close.
    assert_eq!(cli(&s.admin, "shutdown sessions server be/a"), "\n");
    assert_eq!(slow.read_resp_opt(false).map(|r| r.status), Some(502));
    assert!(slow.closed(), "the session was not closed");
    // Server a answers again: the background traffic flows.
    gate.open();

    // shutdown session ID: one idle client goes away.
    let mut victim = Client::connect(addr);
    victim.send(b"GET /v HTTP/1.1\r\nHost: h\r\n\r\n");
    let _ = victim.read_resp();
    let local = victim.s.local_addr().unwrap().to_string();
    let out = cli(&s.oper, "show sess");
    let line = out
        .lines()
        .find(|l| l.contains(&format!("src={local} ")))
        .unwrap_or_else(|| panic!("{local} not in {out}"));
    let id = line.split(':').next().unwrap();
    assert_eq!(cli(&s.admin, &format!("shutdown session {id}")), "\n");
    assert!(victim.closed());
    assert!(cli(&s.admin, &format!("shutdown session {id}")).starts_with("No such session"));

    stop.store(true, Ordering::Relaxed);
    let total: usize = bg.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(total > 0);
}

#[test]
fn server_side_events_do_not_run_the_client_side() {
    // A new server connection per request: its connect completes with a
    // write event on the server socket, which only the server side's
    // tasklet (h1_srv) must see; the client side (h1_conn) runs for the
    // request and for the response it forwards, not for the connect. The
    // test's one client connection is the only one that runs h1_conn.
    let a = Origin::start("a", Mode::Ok);
    // (`http-server-close`: `http-reuse never` keeps the connection for
    // its client, as HAProxy does.)
    let be = format!("    option http-server-close\n{}", srv("a", &a, ""));
    let s = start(&be, "    profiling.tasks on\n");
    let n = 40;
    hit(&s.e, n);
    let p = cli(&s.user, "show profiling");
    let calls = |name: &str| -> u64 {
        p.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let (client, server) = (calls("h1_conn"), calls("h1_srv"));
    assert_eq!(a.conns.load(Ordering::SeqCst), n, "{p}");
    // Each connect and each response is a server-side event.
    assert!(server >= n as u64, "{p}");
    // When both sides shared one tasklet, the client side ran for the
    // connect too (3 runs per request); now 2, with a little room for a
    // response split in two reads. The margin stays far below 3n.
    assert!(
        client <= 2 * n as u64 + n as u64 / 4,
        "client {client}\n{p}"
    );
}

#[test]
fn profiling_and_activity_after_known_work() {
    let a = Origin::start("a", Mode::Ok);
    let s = start(&srv("a", &a, ""), "");
    assert_eq!(cli(&s.admin, "set profiling tasks on"), "\n");
    // Give the threads a turn to apply the mode.
    std::thread::sleep(Duration::from_millis(100));
    hit(&s.e, 50);
    let p = cli(&s.user, "show profiling");
    assert!(
        p.starts_with("Per-task CPU profiling              : on"),
        "{p}"
    );
    let calls = |name: &str| -> u64 {
        p.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    // Every request runs the client connection's tasklet at least once.
    assert!(calls("h1_conn") >= 50, "{p}");
    // The CLI's own task shows up too.
    let p2 = cli(&s.user, "show profiling bytime 2");
    let rows = p2.lines().skip(3).filter(|l| !l.trim().is_empty()).count();
    assert_eq!(rows, 2, "{p2}");
    assert!(cli(&s.user, "show profiling x").contains("expected tasks, bytime or a row count"));
    // What is queued right now: the header and the per-thread columns
    // (the counts themselves are tested in sched's observability tests).
    let t = cli(&s.oper, "show tasks");
    assert!(t.starts_with("Queued tasks and tasklets: "), "{t}");
    assert!(t.contains("(2 threads)"), "{t}");
    assert!(
        t.contains("function") && t.contains(" t0 ") && t.contains(" t1"),
        "{t}"
    );

    let act = cli(&s.user, "show activity");
    assert!(act.starts_with("thread_id: 2 (1..2)"), "{act}");
    // The total is the largest number on the line, whatever the layout
    // (total then one value per thread).
    let accepts: u64 = act
        .lines()
        .find(|l| l.starts_with("accepts"))
        .map(|l| {
            l.split(|c: char| !c.is_ascii_digit())
                .filter_map(|v| v.parse::<u64>().ok())
                .max()
                .unwrap_or(0)
        })
        .unwrap();
    assert!(accepts >= 1, "{act}");
    let one = cli(&s.user, "show activity 2");
    assert!(
        one.starts_with("thread_id: 2\n") && one.contains("loops"),
        "{one}"
    );
    assert!(cli(&s.user, "show activity 9").starts_with("No thread 9"));

    assert_eq!(cli(&s.admin, "set profiling tasks off"), "\n");
    assert!(cli(&s.user, "show profiling").starts_with("Per-task CPU profiling              : off"));
}

#[test]
fn the_cli_answers_under_load() {
    let a = Origin::start("a", Mode::Ok);
    let s = start(&srv("a", &a, ""), "");
    let addr = s.e.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let bg: Vec<_> = (0..6)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                while !stop.load(Ordering::Relaxed) {
                    c.send(b"GET /l HTTP/1.1\r\nHost: h\r\n\r\n");
                    if c.read_resp_opt(false).is_none() {
                        break;
                    }
                }
            })
        })
        .collect();
    // Measured once the traffic flows (a loaded machine starts the
    // clients late).
    wait_until("traffic through the proxy", || {
        a.requests.load(Ordering::SeqCst) >= 50
    });
    let mut worst = Duration::ZERO;
    for _ in 0..20 {
        let t = Instant::now();
        assert!(cli(&s.user, "show info").contains("Name: ebb"));
        worst = worst.max(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    for h in bg {
        let _ = h.join();
    }
    // A CLI starved by the traffic answers only when the clients stop,
    // which they do after this loop: its first command fails there, by
    // cli()'s 20 s. What is left to check is that no answer comes close
    // to that (the meaning is "does not hang"); 15 s leaves a loaded
    // machine, where an answer can wait seconds for a CPU, all the room
    // it needs.
    assert!(
        worst < Duration::from_secs(15),
        "slowest CLI answer {worst:?}"
    );
}

fn state_cfg(dir: &Path, sock: &Path, a: &Origin, b: &Origin, extra: &str) -> String {
    format!(
        "global\n    nbthread 2\n    stats socket {} level admin\n    server-state-base {}\n    server-state-file state\n\
         defaults\n    mode http\n    timeout client 10s\n    load-server-state-from-file global\n\
         frontend fe\n    bind BIND\n    default_backend be\n\
         backend be\n    balance roundrobin\n    server a {} weight 2\n    server b {}\n{extra}",
        sock.display(),
        dir.display(),
        a.addr,
        b.addr
    )
}

#[test]
fn server_state_survives_a_restart() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let b2 = Origin::start("b2", Mode::Ok);
    let dir = scratch("state");
    let sock = dir.join("s.sock");
    let cfg = state_cfg(&dir, &sock, &a, &b, "");
    let e = Ebb::start(&cfg);
    assert_eq!(cli(&sock, "set server be/a state maint"), "\n");
    assert_eq!(cli(&sock, "set server be/b weight 7"), "\n");
    let dump = cli(&sock, "show servers state");
    assert!(
        dump.starts_with("1\n# be_id be_name srv_id srv_name srv_addr"),
        "{dump}"
    );
    // The operator moved b to another address meanwhile: edit the dump as
    // a tool would, then save it (without the answer's empty line).
    let moved = dump.replace(
        &format!(" b {} ", b.addr.ip()),
        &format!(" b {} ", b2.addr.ip()),
    );
    let moved = moved.replace(
        &format!(" {} - 0 0 - - 0\n", b.addr.port()),
        &format!(" {} - 0 0 - - 0\n", b2.addr.port()),
    );
    std::fs::write(
        dir.join("state"),
        moved.trim_end_matches('\n').to_string() + "\n",
    )
    .unwrap();
    drop(e);

    let e = Ebb::start(&cfg);
    let st = cli(&sock, "show servers state be");
    let la = st.lines().find(|l| l.contains(" a ")).unwrap();
    let lb = st.lines().find(|l| l.contains(" b ")).unwrap();
    let f: Vec<&str> = la.split(' ').collect();
    assert_eq!(
        (f[6], f[7], f[8]),
        ("1", "2", "2"),
        "a: admin maint, weight 2: {la}"
    );
    let f: Vec<&str> = lb.split(' ').collect();
    assert_eq!((f[6], f[7]), ("0", "7"), "b: ready, weight 7: {lb}");
    assert_eq!(f[18], b2.addr.port().to_string(), "b's saved address: {lb}");
    // Traffic follows the restored state: a in maint, b at its new address.
    hit(&e, 6);
    assert_eq!(a.requests.load(Ordering::SeqCst), 0);
    assert_eq!(b.requests.load(Ordering::SeqCst), 0);
    assert_eq!(b2.requests.load(Ordering::SeqCst), 6);
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `load-server-state-from-file local` with `server-state-file-name`: the
/// backend's own file, named under `server-state-base` or by an absolute
/// path (`use-backend-name`, or no argument: the backend's name). A state
/// saved by one ebb puts server a in maintenance in the next, and in
/// HAProxy reading the same file.
#[test]
fn local_state_files_by_name() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let dir = scratch("state-local");
    let sock = dir.join("s.sock");
    // Saved from a running ebb: a in maintenance.
    let e = Ebb::start(&state_cfg(&dir, &sock, &a, &b, ""));
    assert_eq!(cli(&sock, "set server be/a state maint"), "\n");
    let dump = cli(&sock, "show servers state be");
    drop(e);
    let saved = dump.trim_end_matches('\n').to_string() + "\n";
    std::fs::write(dir.join("mine"), &saved).unwrap();
    std::fs::write(dir.join("be"), &saved).unwrap();
    let abs = dir.join("elsewhere");
    std::fs::write(&abs, &saved).unwrap();
    let admin_of_a = |sock: &Path| -> String {
        let st = cli(sock, "show servers state be");
        let la = st.lines().find(|l| l.contains(" a ")).unwrap().to_string();
        la.split(' ').nth(6).unwrap().to_string()
    };
    let local = |name: &str| {
        state_cfg(&dir, &sock, &a, &b, &format!("    {name}\n")).replace(
            "load-server-state-from-file global",
            "load-server-state-from-file local",
        )
    };
    for (line, want) in [
        ("server-state-file-name mine".to_string(), "1"),
        (format!("server-state-file-name {}", abs.display()), "1"),
        ("server-state-file-name use-backend-name".to_string(), "1"),
        ("server-state-file-name".to_string(), "1"),
        ("server-state-file-name nosuchfile".to_string(), "0"),
    ] {
        let e = Ebb::start(&local(&line));
        assert_eq!(admin_of_a(&sock), want, "{line}");
        drop(e);
        let port = free_port();
        let text = local(&line).replace("BIND", &format!("127.0.0.1:{port}"));
        let rest = text.split_once("level admin\n").unwrap().1;
        if let Some(h) = haproxy_with("state-local", rest) {
            assert_eq!(admin_of_a(&h.sock), want, "haproxy: {line}");
        }
    }
}

#[test]
fn corrupted_state_files_are_ignored_with_the_line() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let dir = scratch("state-bad");
    let sock = dir.join("s.sock");
    let good = |srv: &str, admin: u32| {
        format!("2 be 1 {srv} 127.0.0.1 2 {admin} 1 1 0 1 0 0 0 0 0 0 - 0 - 0 0 - - 0\n")
    };
    let cases: Vec<(String, &str)> = vec![
        // Wrong field count on line 4.
        (
            format!("1\n# header\n{}2 be 2 b 127.0.0.1 2 1 1\n", good("a", 1)),
            "line 4: 8 fields",
        ),
        // Last line cut short (no newline).
        (
            format!("1\n{}{}", good("a", 1), good("b", 1).trim_end()),
            "line 3: truncated",
        ),
        // Wrong version.
        (
            format!("2\n{}", good("a", 1)),
            "line 1: unsupported version",
        ),
        // Comma is not a separator: one field.
        (
            format!("1\n{}", good("a", 1).replace(' ', ",")),
            "line 2: 1 fields",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(dir.join("state"), &text).unwrap();
        let e = Ebb::start(&state_cfg(&dir, &sock, &a, &b, ""));
        let w = e
            .wait_stderr("server-state", Duration::from_secs(30))
            .unwrap_or_else(|| panic!("no warning for {text:?}: {:?}", e.stderr.lock().unwrap()));
        assert!(
            w.contains(want) && w.contains("ignored"),
            "{w} (wanted {want})"
        );
        // Nothing applied: a stays ready.
        let st = cli(&sock, "show servers state be");
        let la = st.lines().find(|l| l.contains(" a ")).unwrap();
        assert_eq!(la.split(' ').nth(6), Some("0"), "{la}");
    }
    // A server that no longer exists is reported; the others apply.
    std::fs::write(
        dir.join("state"),
        format!("1\n{}{}", good("a", 1), good("gone", 0)),
    )
    .unwrap();
    let e = Ebb::start(&state_cfg(&dir, &sock, &a, &b, ""));
    let w = e.wait_stderr("be/gone", Duration::from_secs(30)).unwrap();
    assert!(w.contains("no longer in the configuration"), "{w}");
    let st = cli(&sock, "show servers state be");
    assert!(
        st.lines()
            .any(|l| l.contains(" a ") && l.split(' ').nth(6) == Some("1")),
        "{st}"
    );
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn state_file_applies_on_reload_and_sockets_are_exclusive() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let dir = scratch("state-reload");
    let sock = dir.join("s.sock");
    let e = Ebb::start(&state_cfg(&dir, &sock, &a, &b, ""));
    // A second ebb cannot take a socket the first one answers on.
    let d2 = scratch("second");
    let cfg2 = format!(
        "global\n    stats socket {}\ndefaults\n    mode http\nfrontend f\n    bind 127.0.0.1:0\n    default_backend x\nbackend x\n    serve-files {}\n",
        sock.display(),
        d2.display()
    );
    std::fs::write(d2.join("e.cfg"), cfg2).unwrap();
    let (code, _, err) = run_ebb(&["-f", "e.cfg"], &d2);
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot bind stats socket") && err.contains("another process answers"),
        "{err}"
    );

    // Save a state with b in drain and weight 0 for a, then reload.
    assert_eq!(
        cli(
            &sock,
            "set server be/b state drain; set server be/a weight 5"
        ),
        "\n\n"
    );
    let dump = cli(&sock, "show servers state");
    std::fs::write(
        dir.join("state"),
        dump.trim_end_matches('\n').to_string() + "\n",
    )
    .unwrap();
    assert_eq!(
        cli(
            &sock,
            "set server be/b state ready; set server be/a weight 1"
        ),
        "\n\n"
    );
    e.signal("HUP");
    e.wait_stderr("configuration reloaded", Duration::from_secs(30))
        .expect("reload");
    let st = cli(&sock, "show servers state be");
    let f = |n: &str| -> Vec<String> {
        st.lines()
            .find(|l| l.contains(&format!(" {n} ")))
            .unwrap()
            .split(' ')
            .map(String::from)
            .collect()
    };
    assert_eq!((f("a")[6].as_str(), f("a")[7].as_str()), ("0", "5"), "{st}");
    assert_eq!(f("b")[6], "8", "b back in drain: {st}");
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&d2);
}

/// The shared run queue's lookups (health checks are shared tasks) are
/// counted in `show activity`, with scope-aware lookups on (the default)
/// and off (`tune.sched.scope-lookups off`, the naive walk).
#[test]
fn show_activity_counts_shared_queue_lookups() {
    let a = Origin::start("a", Mode::Ok);
    for extra in ["", "    tune.sched.scope-lookups off\n"] {
        let s = start(&srv("a", &a, "check inter 50ms"), extra);
        // Wait on the event (a few checks ran), not on a duration; the
        // limit only keeps a broken build from hanging the suite.
        let total = |act: &str, name: &str| -> Option<String> {
            act.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .map(str::to_string)
        };
        let t = Instant::now();
        let act = loop {
            let act = cli(&s.user, "show activity");
            let n: u64 = total(&act, "sq_lookups:")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if n >= 3 {
                break act;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "no lookups: {act}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let nodes: u64 = total(&act, "sq_nodes:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        // A lookup that finds a task visits at least its node; one that
        // finds nothing (another thread took it) may visit none.
        assert!(nodes >= 1, "{act}");
        let avg = total(&act, "sq_avg_nodes:").unwrap_or_default();
        assert!(avg.parse::<f64>().is_ok_and(|v| v > 0.0), "{extra}{act}");
        let one = cli(&s.user, "show activity 1");
        assert!(one.contains("sq_avg_nodes"), "{one}");
    }
}

/// HAProxy 2.6's `show stat` header (its order), for when haproxy itself
/// is not installed to ask.
const HAPROXY_STAT_HEADER: &str = "pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status,check_code,check_duration,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,hanafail,req_rate,req_rate_max,req_tot,cli_abrt,srv_abrt,comp_in,comp_out,comp_byp,comp_rsp,lastsess,last_chk,last_agt,qtime,ctime,rtime,ttime,agent_status,agent_code,agent_duration,check_desc,agent_desc,check_rise,check_fall,check_health,agent_rise,agent_fall,agent_health,addr,cookie,mode,algo,conn_rate,conn_rate_max,conn_tot,intercepted,dcon,dses,wrew,connect,reuse,cache_lookups,cache_hits,srv_icur,src_ilim,qtime_max,ctime_max,rtime_max,ttime_max,eint,idle_conn_cur,safe_conn_cur,used_conn_cur,need_conn_est,uweight,agg_server_status,agg_server_check_status,agg_check_status,-,ssl_sess,ssl_reused_sess,ssl_failed_handshake,h2_headers_rcvd,h2_data_rcvd,h2_settings_rcvd,h2_rst_stream_rcvd,h2_goaway_rcvd,h2_detected_conn_protocol_errors,h2_detected_strm_protocol_errors,h2_rst_stream_resp,h2_goaway_resp,h2_open_connections,h2_backend_open_streams,h2_total_connections,h2_backend_total_streams,h1_open_connections,h1_open_streams,h1_total_connections,h1_total_streams,h1_bytes_in,h1_bytes_out,h1_spliced_bytes_in,h1_spliced_bytes_out";

fn header(csv: &str) -> Vec<String> {
    csv.lines()
        .next()
        .unwrap()
        .trim_start_matches("# ")
        .strip_suffix(',')
        .unwrap()
        .split(',')
        .map(String::from)
        .collect()
}

/// The rows of a CSV as maps column -> value, each row checked to have
/// exactly the header's number of fields.
fn rows(csv: &str) -> Vec<std::collections::HashMap<String, String>> {
    let h = header(csv);
    csv.lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.strip_suffix(',').unwrap_or(l).split(',').collect();
            assert_eq!(
                f.len(),
                h.len(),
                "row has {} fields, header {}: {l}",
                f.len(),
                h.len()
            );
            h.iter()
                .cloned()
                .zip(f.iter().map(|x| x.to_string()))
                .collect()
        })
        .collect()
}

/// Polls `show stat` until `srv`'s check status is no longer `INI`.
fn checked(sock: &Path, srv: &str) -> std::collections::HashMap<String, String> {
    let t0 = Instant::now();
    loop {
        let csv = cli(sock, "show stat");
        if let Some(mut r) = rows(&csv).into_iter().find(|r| r["svname"] == srv) {
            // `* ` marks a check in progress (HAProxy's): the last result
            // is what follows.
            let st = r["check_status"].trim_start_matches("* ").to_string();
            if !st.is_empty() && st != "INI" {
                r.insert("check_status".to_string(), st);
                return r;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no check result for {srv}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// haproxy 2.6 with a stats socket and the same backend, when installed.
struct Hap {
    child: std::process::Child,
    sock: PathBuf,
}

impl Drop for Hap {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn haproxy(backend: &str) -> Option<Hap> {
    if !have("haproxy") {
        println!("haproxy is not installed: comparing with HAProxy 2.6's header as recorded");
        return None;
    }
    let d = scratch("cli-hap");
    let sock = d.join("h.sock");
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n{backend}",
        sock.display()
    );
    std::fs::write(d.join("h.cfg"), cfg).unwrap();
    let child = std::process::Command::new("haproxy")
        .args(["-db", "-f", d.join("h.cfg").to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let t0 = Instant::now();
    while UnixStream::connect(&sock).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(30), "haproxy's socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(Hap { child, sock })
}

#[test]
fn show_stat_info_and_weights_as_tools_parse_them() {
    let a = Origin::start("a", Mode::Ok);
    let dead = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let backend = format!(
        "    option httpchk GET /\n    server a {} check inter 200 weight 3\n    server dead {dead} check inter 200 fall 2 rise 1\n",
        a.addr
    );
    let s = start(&backend, "");
    let hap = haproxy(&backend);

    // The header: HAProxy's names, count and order.
    let csv = cli(&s.user, "show stat");
    let want: Vec<String> = match &hap {
        Some(h) => header(&cli(&h.sock, "show stat")),
        None => HAPROXY_STAT_HEADER.split(',').map(String::from).collect(),
    };
    assert_eq!(header(&csv), want);
    assert!(want.len() > 120, "{}", want.len());

    // Traffic only once the dead server is DOWN (its first checks have
    // failed): a request sent to it before then would get 503, and the
    // counters below are about `a`.
    let t0 = Instant::now();
    while rows(&cli(&s.user, "show stat"))
        .iter()
        .find(|r| r["svname"] == "dead")
        .unwrap()["status"]
        != "DOWN"
    {
        assert!(t0.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(50));
    }
    hit(&s.e, 4);
    let dead_row = checked(&s.user, "dead");
    let a_row = checked(&s.user, "a");
    assert_eq!(dead_row["check_status"], "L4CON");
    assert_eq!(a_row["check_status"], "L7OK");
    assert_eq!(a_row["pid"], "1");
    assert_eq!(a_row["weight"], "3");
    assert_eq!(a_row["uweight"], "3");
    assert_eq!(a_row["check_rise"], "2");
    assert_eq!(a_row["check_fall"], "3");
    assert_eq!(a_row["addr"], a.addr.to_string());
    assert_eq!(a_row["mode"], "http");
    assert!(a_row["smax"].parse::<u64>().unwrap() >= 1, "{a_row:?}");
    // `clear counters` forgets maxima (no stream is running now).
    assert_eq!(cli(&s.admin, "clear counters"), "\n");
    let a_now = rows(&cli(&s.user, "show stat"))
        .into_iter()
        .find(|r| r["svname"] == "a")
        .unwrap();
    assert_eq!(a_now["smax"], "0");
    assert!(a_row["lastchg"].parse::<u64>().is_ok());
    assert!(a_row["check_duration"].parse::<u64>().is_ok(), "{a_row:?}");
    // Failures are counted while UP only: the server started at health
    // `rise` (1, HAProxy's start), so its first failure took it DOWN.
    let t0 = Instant::now();
    while checked(&s.user, "dead")["chkfail"] != "1" {
        assert!(t0.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(50));
    }
    // The dead server went DOWN once.
    let t0 = Instant::now();
    while rows(&cli(&s.user, "show stat"))
        .iter()
        .find(|r| r["svname"] == "dead")
        .unwrap()["status"]
        != "DOWN"
    {
        assert!(t0.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(50));
    }
    let dead_row = rows(&cli(&s.user, "show stat"))
        .into_iter()
        .find(|r| r["svname"] == "dead")
        .unwrap();
    assert_eq!(dead_row["chkdown"], "1");
    assert_eq!(dead_row["check_desc"], "Layer4 connection problem");
    let be_row = rows(&csv)
        .into_iter()
        .find(|r| r["svname"] == "BACKEND")
        .unwrap();
    assert_eq!(be_row["algo"], "roundrobin");
    assert_eq!(be_row["type"], "1");

    if let Some(h) = &hap {
        // Side by side: the dead server's row reads the same in HAProxy.
        let t0 = Instant::now();
        let hd = loop {
            let r = rows(&cli(&h.sock, "show stat"))
                .into_iter()
                .find(|r| r["svname"] == "dead")
                .unwrap();
            if r["status"] == "DOWN" {
                break r;
            }
            assert!(t0.elapsed() < Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(50));
        };
        for k in [
            "check_status",
            "check_desc",
            "status",
            "weight",
            "act",
            "bck",
            "pid",
            "type",
            "check_rise",
            "check_fall",
            "check_health",
            "chkdown",
            "mode",
        ] {
            assert_eq!(hd[k], dead_row[k], "column {k}");
        }
        // show servers state: the same numbers for the dead server.
        let pick = |t: &str| {
            t.lines()
                .find(|l| l.split(' ').nth(3) == Some("dead"))
                .unwrap()
                .split(' ')
                .skip(5)
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let hs = pick(&cli(&h.sock, "show servers state"));
        let es = pick(&cli(&s.user, "show servers state"));
        // op, admin, uweight, iweight, (time skipped), check status, result, health, state...
        for i in [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11] {
            assert_eq!(
                hs[i], es[i],
                "servers state column {i}: haproxy {hs:?} ebb {es:?}"
            );
        }
        // show info: HAProxy's field names, in its order.
        let names = |t: &str| -> Vec<String> {
            t.lines()
                .filter_map(|l| l.split_once(':'))
                .map(|(k, _)| k.to_string())
                .collect()
        };
        let hi = names(&cli(&h.sock, "show info"));
        let ei = names(&cli(&s.user, "show info"));
        assert_eq!(&ei[..hi.len()], &hi[..]);
        println!("side by side with haproxy: header, dead server row, servers state, show info names agree");
    }

    // Filters: iid -1 = all; type bits; server id.
    let only_srv = rows(&cli(&s.user, "show stat -1 4 -1"));
    assert_eq!(only_srv.len(), 2);
    assert!(only_srv.iter().all(|r| r["type"] == "2"));
    let be_only = rows(&cli(&s.user, "show stat be 2 -1"));
    assert_eq!(be_only.len(), 1);
    assert_eq!(be_only[0]["svname"], "BACKEND");
    let fe_be = rows(&cli(&s.user, "show stat -1 3 -1"));
    assert_eq!(
        fe_be
            .iter()
            .map(|r| r["svname"].as_str())
            .collect::<Vec<_>>(),
        ["FRONTEND", "BACKEND"]
    );
    let sid2 = rows(&cli(&s.user, "show stat -1 4 2"));
    assert_eq!(sid2.len(), 1);
    assert_eq!(sid2[0]["svname"], "dead");
    let iid = &be_only[0]["iid"];
    assert_eq!(
        rows(&cli(&s.user, &format!("show stat {iid} 4 1")))[0]["svname"],
        "a"
    );
    assert!(cli(&s.user, "show stat nope 1 -1").starts_with("No such proxy."));

    // Typed: one line per non-empty field, positions and names as the header.
    let typed = cli(&s.user, "show stat -1 4 1 typed");
    let names: Vec<String> = want.iter().filter(|n| *n != "-").cloned().collect();
    let mut n = 0;
    for l in typed.lines().filter(|l| !l.is_empty()) {
        let (key, rest) = l.split_once(':').unwrap();
        let k: Vec<&str> = key.split('.').collect();
        assert_eq!(k.len(), 6, "{l}");
        assert_eq!(k[0], "S");
        assert_eq!(k[2], "1");
        let pos: usize = k[3].parse().unwrap();
        assert_eq!(names[pos], k[4], "{l}");
        assert_eq!(k[5], "1");
        let mut r = rest.splitn(3, ':');
        assert_eq!(r.next().unwrap().len(), 3, "{l}");
        assert!(
            ["u32", "u64", "s32", "s64", "str"].contains(&r.next().unwrap()),
            "{l}"
        );
        n += 1;
    }
    assert!(n > 20, "{typed}");
    // `* ` while a check runs (HAProxy's mark).
    assert!(
        typed.contains(".36.check_status.1:MOP:str:L7OK\n")
            || typed.contains(".36.check_status.1:MOP:str:* L7OK\n"),
        "{typed}"
    );
    let json = cli(&s.user, "show stat -1 4 1 json");
    assert!(json.starts_with("[[{\"objType\":\"Server\""), "{json}");
    assert!(
        json.contains("\"field\":{\"pos\":36,\"name\":\"check_status\"}"),
        "{json}"
    );

    // show info typed/json.
    let it = cli(&s.user, "show info typed");
    assert!(it.starts_with("0.Name.1:POS:str:ebb\n"), "{it}");
    assert!(
        it.contains(&format!("6.Pid.1:SGP:u32:{}\n", s.e.pid())),
        "{it}"
    );
    assert!(cli(&s.user, "show info json").starts_with("[{\"field\":{\"pos\":0,\"name\":\"Name\"}"));

    // get weight / set weight.
    assert_eq!(cli(&s.user, "get weight be/a"), "3 (initial 3)\n\n");
    assert_eq!(cli(&s.user, "set weight be/a 5"), "Permission denied\n\n");
    assert_eq!(cli(&s.admin, "set weight be/a 5"), "\n");
    assert_eq!(cli(&s.user, "get weight be/a"), "5 (initial 3)\n\n");
    assert_eq!(cli(&s.admin, "set weight be/a 50%"), "\n");
    assert_eq!(cli(&s.user, "get weight be/a"), "1 (initial 3)\n\n");
    assert!(cli(&s.user, "get weight be/zz").starts_with("No such server"));
    assert_eq!(
        cli(&s.user, "get weight be"),
        "Require 'backend/server'.\n\n"
    );
}

#[test]
fn stats_page_csv_is_show_stat() {
    let a = Origin::start("a", Mode::Ok);
    let backend = format!(
        "{}frontend page\n    bind BIND\n    stats uri /st\n    default_backend be\n",
        srv("a", &a, "weight 7")
    );
    let s = start(&backend, "");
    hit(&s.e, 3);
    let page = get(s.e.addrs[1], "/st;csv");
    assert_eq!(page.status, 200);
    let page = page.text();
    let sock = cli(&s.user, "show stat");
    assert_eq!(header(&page), header(&sock));
    let (pr, sr) = (rows(&page), rows(&sock));
    assert_eq!(pr.len(), sr.len());
    for (p, q) in pr.iter().zip(&sr) {
        // Counters move between the two reads (the page request itself);
        // names, kinds, ids, weights and states do not.
        for k in [
            "pxname", "svname", "type", "iid", "sid", "pid", "weight", "status", "addr", "algo",
        ] {
            assert_eq!(p[k], q[k], "{k}");
        }
    }
    let a_row = sr.iter().find(|r| r["svname"] == "a").unwrap();
    assert_eq!(a_row["stot"], "3");
    assert_eq!(a_row["weight"], "7");
}

#[test]
fn map_based_hash_weights_are_static_as_in_haproxy() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let backend = format!(
        "    balance uri\n{}{}",
        srv("a", &a, "weight 2"),
        srv("b", &b, "")
    );
    let s = start(&backend, "");
    assert!(cli(&s.admin, "set weight be/a 1").starts_with(
        "Backend is using a static LB algorithm and only accepts weights '0%' and '100%'."
    ));
    assert_eq!(cli(&s.admin, "set weight be/a 0%"), "\n");
    assert_eq!(cli(&s.user, "get weight be/a"), "0 (initial 2)\n\n");
    // Weight 0: every key goes to b.
    for i in 0..20 {
        assert!(get(s.e.addr(), &format!("/k{i}")).text().starts_with("b "));
    }
    assert_eq!(cli(&s.admin, "set weight be/a 100%"), "\n");
    assert_eq!(cli(&s.user, "get weight be/a"), "2 (initial 2)\n\n");
}

fn sess_rate_cfg(sock: &Path, bind: &str, a: &Origin) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe\n    bind {bind}\n    acl s1_busy srv_sess_rate(test/s1) gt 50\n    http-request deny if s1_busy\n    default_backend test\n\
         backend test\n    http-response set-header x-rate %[srv_sess_rate(s1)]/%[srv_sess_rate(test/s2)]\n\
         \x20   server s1 {a}\n    server s2 {a} disabled\n    server s4 {a} disabled\n",
        sock.display(),
        a = a.addr,
    )
}

/// `srv_sess_rate`, and the answers of `del server` for a server a fetch
/// names and for one no configuration element points at, as HAProxy's.
fn sess_rate_run(addr: std::net::SocketAddr, sock: &Path) -> Vec<String> {
    let r = get(addr, "/x");
    let mut seen = vec![format!(
        "{} {}",
        r.status,
        r.header("x-rate").unwrap_or("-")
    )];
    for c in [
        "del server test/s1",
        "disable server test/s1",
        "del server test/s1",
        "del server test/s4",
        "show servers state test",
    ] {
        let out = cli_cmd(sock, c);
        // The state dump: the servers left, by name.
        let out = if c.starts_with("show") {
            out.lines()
                .skip(2)
                .filter_map(|l| l.split(' ').nth(3))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            out.trim().to_string()
        };
        seen.push(out);
    }
    seen
}

#[test]
fn srv_sess_rate_and_del_server_of_a_named_server() {
    let a = Origin::start("a", Mode::Ok);
    let (e, sock) = ebb_with_admin("sessrate", |k, b| sess_rate_cfg(k, b, &a));
    let ours = sess_rate_run(e.addr(), &sock);
    let refused = "This server cannot be removed at runtime due to other configuration elements pointing to it.";
    assert_eq!(
        ours,
        ["200 1/0", refused, "", refused, "Server deleted.", "s1 s2"],
        "{ours:?}"
    );
    let Some((h, hap)) = haproxy_beside("sessrate", |k, b| sess_rate_cfg(k, b, &a)) else {
        return;
    };
    assert_eq!(
        sess_rate_run(hap, &h.sock),
        ours,
        "haproxy (left), ebb (right)"
    );
}

/// Error answers byte for byte as haproxy 2.6's: the server lookups'
/// `Require 'backend/server'.`, `No such backend.`, `No such server.`
/// (an empty line after them), `Permission denied`, and the answers
/// HAProxy prints without a newline of their own, followed by one
/// newline only (`show events RING` errors, `del server`, `add server`'s
/// first checks). Before, ebb named the backend and server in its
/// messages, and ended these with an empty line as well.
#[test]
fn error_answers_as_haproxy() {
    let cfg = |sock: &Path, bind: &str| {
        let proxies = format!(
            "frontend f\n    bind {bind}\n    default_backend be\nbackend be\n    server s 127.0.0.1:9\n"
        );
        let timeouts = "timeout client 5s\n    timeout server 5s\n    timeout connect 5s";
        let socket = format!("stats socket {} level admin", sock.display());
        format!("global\n    {socket}\ndefaults\n    mode http\n    {timeouts}\n{proxies}")
    };
    let cmds = [
        "get weight x/y",
        "get weight be/zz",
        "get weight be",
        "disable server x/y",
        "set server be/zz state ready",
        "enable server x",
        "add server x",
        "add server x/y 127.0.0.1:9",
        "del server x/y",
        "del server be/zz",
        "del server x",
        "show events nosuch",
        "show events nosuch -w",
        "show events stdout",
        "show events stderr",
        "show table nosuch",
        "show map nosuch",
    ];
    let answers = |sock: &Path| -> Vec<String> { cmds.iter().map(|c| cli_cmd(sock, c)).collect() };
    let (_e, sock) = ebb_with_admin("cli-errors", |s, _| cfg(s, "127.0.0.1:0"));
    let got = answers(&sock);
    assert_eq!(got[0], "No such backend.\n\n");
    assert_eq!(got[8], "No such backend.\n");
    assert_eq!(got[11], "No such event sink\n");
    if let Some((h, _)) = haproxy_beside("cli-errors", cfg) {
        let want = answers(&h.sock);
        for ((c, g), w) in cmds.iter().zip(&got).zip(&want) {
            assert_eq!(g, w, "{c}");
        }
    }
}

/// Commands no HAProxy 2.6 worker knows, and the map/ACL commands short
/// of their identifier, to ask both.
const UNKNOWN: &[&str] = &[
    "foo",
    "show foo",
    "show",
    "frobnicate",
    "shwo stat",
    "set foo bar",
    "show servers foo",
    "show ssl foo",
    "debug dev",
    "expert-mode on;debug dev foo",
    "experimental-mode on;set varr",
    "disable foo",
    "x y z w v u t",
    "get acl",
    "clear acl",
    "clear map",
    "del acl",
    "help show",
    "help set",
    "help show ssl",
    "help frobnicate",
];

/// A command the worker's CLI does not know is answered HAProxy 2.6's
/// usage message, byte for byte beside haproxy where haproxy proposes
/// only commands ebb runs (ebb never proposes one it lacks): the commands
/// whose first words match, or the closest few past those (its
/// letter-pair fingerprints), expert and experimental ones only in those
/// modes; and
/// the ACL commands without their identifier in HAProxy's words (`ACL
/// identifier`). Before, ebb answered `Unknown command: 'foo'.` and its
/// own list, and `acl identifier`, `'clear acl' expects a acl identifier.`
#[test]
fn unknown_commands_as_haproxy() {
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 5s\n\
             frontend f\n    bind {bind}\n    http-request return status 200\n",
            sock.display()
        )
    };
    let (_e, sock) = ebb_with_admin("cli-unknown", cfg);
    let ours: Vec<String> = UNKNOWN.iter().map(|c| cli(&sock, c)).collect();
    // HAProxy's commands ebb does not run are never proposed.
    let lacks = |a: &str| {
        a.lines().any(|l| {
            ["  show fd", "  trace ", "  debug dev"]
                .iter()
                .any(|p| l.starts_with(p))
        })
    };
    assert_eq!(
        ours[0],
        "Unknown command, but maybe one of the following ones is a better match:
  add acl [@<ver>] <acl> <pattern>        : add an acl entry
  add map [@<ver>] <map> <key> <val>      : add a map entry (payload supported instead of key/val)
  show info [desc|json|typed|float]*      : report information about the running process
  show sess [id]                          : report the list of current sessions or dump this exact session
  user                                    : lower the level of the current CLI session to user
  help [<command>]                        : list matching or all commands
  prompt                                  : toggle interactive mode with prompt
  quit                                    : disconnect

"
    );
    for (c, a) in UNKNOWN.iter().zip(&ours) {
        assert!(!lacks(a), "{c:?}: {a}");
    }
    // An experimental command is proposed in that mode only.
    assert!(!ours[5].contains("set var "), "{}", ours[5]);
    assert!(ours[10].contains("set var "), "{}", ours[10]);
    if let Some((h, _)) = haproxy_beside("cli-unknown", cfg) {
        for (c, ours) in UNKNOWN.iter().zip(&ours) {
            let theirs = cli(&h.sock, c);
            if *ours == theirs {
                continue;
            }
            // Byte for byte but for the commands ebb lacks: each line
            // haproxy proposes and ebb does not names a command ebb
            // answers as unknown.
            for l in theirs.lines().filter(|l| l.starts_with("  ")) {
                if ours.lines().any(|o| o == l) {
                    continue;
                }
                let words: Vec<&str> = l
                    .split_whitespace()
                    .take_while(|w| !w.starts_with(['<', '[', '{', ':']))
                    .collect();
                let answer = cli(&sock, &words.join(" "));
                assert!(
                    answer.starts_with("Unknown command"),
                    "{c:?}: haproxy proposes {l:?}, which ebb runs: {ours}"
                );
            }
        }
    }
}

/// `set timeout cli DELAY`, HAProxy 2.6's: its answers (empty, or its
/// three error texts) beside haproxy, and its effect: a connection in
/// interactive mode under `stats timeout 1s` is still open 2.5 s after
/// `set timeout cli 60` (before, ebb answered `Unknown command` and the
/// connection closed after 1 s).
#[test]
fn set_timeout_cli_as_haproxy() {
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n    stats timeout 1s\n\
             defaults\n    mode http\n    timeout client 5s\n\
             frontend f\n    bind {bind}\n    http-request return status 200\n",
            sock.display()
        )
    };
    let lines = [
        "set timeout cli 5",
        "set timeout cli 1m",
        "set timeout cli",
        "set timeout cli x",
        "set timeout cli 0",
        "set timeout cli 500ms",
        "set timeout foo 5",
        "set timeout",
    ];
    let (_e, sock) = ebb_with_admin("cli-timeout", cfg);
    let ours: Vec<String> = lines.iter().map(|l| cli(&sock, l)).collect();
    assert_eq!(ours[0], "\n");
    assert_eq!(ours[2], "Expects an integer value.\n\n");
    assert_eq!(ours[4], "Invalid timeout value.\n\n");
    assert_eq!(ours[6], "'set timeout' only supports 'cli'.\n\n");
    // The effect, in interactive mode.
    let mut s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"prompt\nset timeout cli 60\n").unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 256];
    while got.windows(2).filter(|w| w == b"> ").count() < 2 {
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&b[..n]);
    }
    std::thread::sleep(Duration::from_millis(2500));
    s.write_all(b"show cli level\n").unwrap();
    let n = s.read(&mut b).unwrap();
    assert!(
        String::from_utf8_lossy(&b[..n]).contains("admin"),
        "{:?}",
        String::from_utf8_lossy(&b[..n])
    );
    if let Some((h, _)) = haproxy_beside("cli-timeout", cfg) {
        for (l, o) in lines.iter().zip(&ours) {
            assert_eq!(*o, cli(&h.sock, l), "{l}");
        }
    }
}
