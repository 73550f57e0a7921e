//! Stops and reloads under load lose nothing: graceful stop, master-worker
//! reloads (SIGUSR2 and the master CLI), `-sf` and `-x` hand-overs. Real
//! binary, loopback, keep-alive and new-connection clients counting every
//! request that went unanswered.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use common::origin::{Mode, Origin};
use common::{free_port, scratch, wait_until, Ebb, ReadRetry};

/// What the clients saw.
#[derive(Default)]
struct Counts {
    ok: AtomicUsize,
    /// A request was sent and the connection ended before its answer.
    unanswered: AtomicUsize,
    /// A connect failed.
    refused: AtomicUsize,
    /// An answer that was not the origin's 200.
    bad: AtomicUsize,
    errors: Mutex<Vec<String>>,
    /// The test is about to close the listeners (a stop): a connection
    /// the kernel completed but the process never accepted is reset when
    /// the listener closes, which is a refusal (the client may retry it
    /// as one), not a request the process lost.
    closing: std::sync::atomic::AtomicBool,
}

impl Counts {
    fn note(&self, what: String) {
        let mut e = self.errors.lock().unwrap();
        if e.len() < 10 {
            e.push(what);
        }
    }
}

/// Client threads sending GETs until told to stop: `keep` threads reuse
/// their connection while the server allows it, `fresh` threads open one
/// per request. Targets are read under a lock held while connecting, so
/// the test can take an address away and know no connect to it is under
/// way once the write lock is held.
struct Load {
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(
        targets: Arc<RwLock<Vec<SocketAddr>>>,
        keep: usize,
        fresh: usize,
        end_on_refusal: bool,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let mut threads = Vec::new();
        for i in 0..keep + fresh {
            let (stop, counts, targets) = (stop.clone(), counts.clone(), targets.clone());
            let reuse = i < keep;
            threads.push(std::thread::spawn(move || {
                client(i, reuse, &targets, &stop, &counts, end_on_refusal)
            }));
        }
        Load {
            stop,
            counts,
            threads,
        }
    }

    fn ok(&self) -> usize {
        self.counts.ok.load(Ordering::SeqCst)
    }

    /// Stops the clients; returns the counts.
    fn finish(self) -> Arc<Counts> {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
        self.counts
    }
}

fn client(
    i: usize,
    reuse: bool,
    targets: &RwLock<Vec<SocketAddr>>,
    stop: &AtomicBool,
    c: &Counts,
    end_on_refusal: bool,
) {
    let mut n = i;
    let req: &[u8] = if reuse {
        b"GET /k HTTP/1.1\r\nHost: t\r\n\r\n"
    } else {
        b"GET /f HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    };
    'conn: while !stop.load(Ordering::SeqCst) {
        let s = {
            let t = targets.read().unwrap();
            n += 1;
            let a = t[n % t.len()];
            TcpStream::connect(a).map_err(|e| (a, e))
        };
        let mut s = match s {
            Ok(s) => s,
            Err((a, e)) => {
                if end_on_refusal {
                    return;
                }
                c.refused.fetch_add(1, Ordering::SeqCst);
                c.note(format!("connect {a}: {e}"));
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        let mut buf = Vec::new();
        let mut answered_here = false;
        loop {
            if let Err(e) = s.write_all(req) {
                c.unanswered.fetch_add(1, Ordering::SeqCst);
                c.note(format!("write: {e}"));
                continue 'conn;
            }
            match read_answer(&mut s, &mut buf) {
                Ok((200, close)) => {
                    answered_here = true;
                    c.ok.fetch_add(1, Ordering::SeqCst);
                    if close || !reuse || stop.load(Ordering::SeqCst) {
                        continue 'conn;
                    }
                }
                Ok((st, _)) => {
                    c.bad.fetch_add(1, Ordering::SeqCst);
                    c.note(format!("status {st}"));
                    continue 'conn;
                }
                Err(e)
                    if !answered_here
                        && buf.is_empty()
                        && e.contains("reset")
                        && c.closing.load(Ordering::SeqCst) =>
                {
                    c.refused.fetch_add(1, Ordering::SeqCst);
                    c.note(format!("reset before any answer during the stop: {e}"));
                    continue 'conn;
                }
                Err(e) => {
                    c.unanswered.fetch_add(1, Ordering::SeqCst);
                    c.note(format!("read: {e}"));
                    continue 'conn;
                }
            }
        }
    }
}

/// Reads one answer with a Content-Length body: (status, whether it says
/// `Connection: close`).
fn read_answer(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(u16, bool), String> {
    let mut tmp = [0u8; 16384];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read_retry(&mut tmp) {
            Ok(0) => return Err(format!("EOF after {} bytes", buf.len())),
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e) => return Err(e.to_string()),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|x| x.parse().ok())
        .ok_or("no status")?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or("no content-length")?;
    let close = head.lines().any(|l| l == "connection: close");
    while buf.len() < end + len {
        match s.read_retry(&mut tmp) {
            Ok(0) => return Err("EOF in body".into()),
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e) => return Err(e.to_string()),
        }
    }
    buf.drain(..end + len);
    Ok((status, close))
}

fn assert_clean(c: &Counts, refused_ok: bool) {
    let (un, bad, refused) = (
        c.unanswered.load(Ordering::SeqCst),
        c.bad.load(Ordering::SeqCst),
        c.refused.load(Ordering::SeqCst),
    );
    let errs = c.errors.lock().unwrap().clone();
    assert_eq!(un, 0, "unanswered requests: {errs:?}");
    assert_eq!(bad, 0, "wrong answers: {errs:?}");
    if !refused_ok {
        assert_eq!(refused, 0, "refused connections: {errs:?}");
    }
}

fn proxy_cfg(global: &str, binds: &[&str], origin: SocketAddr) -> String {
    let mut s = format!(
        "global\n    nbthread 2\n{global}defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n    timeout http-keep-alive 30s\nfrontend fe\n"
    );
    for b in binds {
        s.push_str(&format!("    bind {b}\n"));
    }
    s.push_str(&format!(
        "    default_backend be\nbackend be\n    server s1 {origin}\n"
    ));
    s
}

/// SIGUSR1 under keep-alive load through the proxy: every request sent
/// gets its answer (the last one on each connection with `Connection:
/// close`); only connects after the listener closed fail, and connections
/// the kernel completed in the instant ebb closed its listener (reset
/// before their first answer, as with any server that stops listening).
#[test]
fn graceful_stop_answers_every_request_sent() {
    let o = Origin::start("o", Mode::Ok);
    let e = Ebb::start(&proxy_cfg("", &["BIND"], o.addr));
    let targets = Arc::new(RwLock::new(vec![e.addr()]));
    let load = Load::start(targets, 16, 4, true);
    wait_until("traffic flows", || load.ok() > 500);
    load.counts.closing.store(true, Ordering::SeqCst);
    e.signal("USR1");
    let mut e = e;
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
    let c = load.finish();
    assert_clean(&c, true);
    assert_eq!(
        o.requests.load(Ordering::SeqCst),
        c.ok.load(Ordering::SeqCst)
    );
}

/// SIGHUP (in-process reload) under keep-alive load: nothing lost.
#[test]
fn sighup_reloads_under_load_lose_nothing() {
    let o = Origin::start("o", Mode::Ok);
    let e = Ebb::start(&proxy_cfg("", &["BIND"], o.addr));
    let targets = Arc::new(RwLock::new(vec![e.addr()]));
    let load = Load::start(targets, 8, 2, false);
    for i in 1..=5 {
        let before = load.ok();
        e.signal("HUP");
        wait_until("the reload", || {
            e.stderr
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.contains("configuration reloaded"))
                .count()
                >= i
        });
        wait_until("traffic after the reload", || load.ok() > before + 50);
    }
    let c = load.finish();
    assert_clean(&c, false);
}

/// Lines `ebb: ready` printed after start (one per worker started since).
fn readies(e: &Ebb) -> usize {
    e.stdout
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("ebb: ready"))
        .count()
}

/// The last address a worker said it listens on for `host`.
fn last_addr(e: &Ebb, host: &str) -> Option<SocketAddr> {
    e.stdout
        .lock()
        .unwrap()
        .iter()
        .rev()
        .filter_map(|l| l.split(" listening on ").nth(1))
        .filter_map(|a| a.trim().parse::<SocketAddr>().ok())
        .find(|a| a.ip().to_string() == host)
}

fn mcli(path: &std::path::Path, cmd: &str) -> String {
    let mut s = std::os::unix::net::UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The pids listed under `# old workers` in `show proc`.
fn old_workers(show: &str) -> Vec<String> {
    show.lines()
        .skip_while(|l| !l.starts_with("# old workers"))
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

/// 100 master-worker reloads (SIGUSR2 and the master CLI's `reload` in
/// turn) under keep-alive and new-connection load; halfway, a bind is
/// removed and another added. No connection refused, no request lost;
/// the old worker held by an unfinished request is gone after
/// `hard-stop-after`, well before its `timeout http-request`.
#[test]
fn master_worker_reloads_under_load_lose_nothing() {
    let o = Origin::start("o", Mode::Ok);
    let dir = scratch("mw");
    let cfg = dir.join("ebb.cfg");
    let global = "    hard-stop-after 3s\n";
    let write = |binds: &[&str]| {
        std::fs::write(&cfg, proxy_cfg(global, binds, o.addr)).unwrap();
    };
    write(&["127.0.0.1:0", "127.0.0.2:0"]);
    let sock = dir.join("master.sock");
    let e = Ebb::start_args(
        &[
            "-W",
            "-S",
            sock.to_str().unwrap(),
            "-f",
            cfg.to_str().unwrap(),
        ],
        dir.clone(),
    );
    let (a, b) = (e.addrs[0], e.addrs[1]);
    let targets = Arc::new(RwLock::new(vec![a, b]));
    let load = Load::start(targets.clone(), 8, 4, false);
    wait_until("traffic flows", || load.ok() > 200);
    let mut stuck = None;
    for i in 0..100 {
        if i == 50 {
            // B goes: no client connects to it any more (the write lock
            // waits for connects under way), then the reload closes it.
            targets.write().unwrap().retain(|x| *x != b);
            write(&["127.0.0.1:0", "127.0.0.3:0"]);
        }
        if i == 99 {
            // An unfinished request holds the last old worker: only
            // hard-stop-after ends it.
            let mut s = TcpStream::connect(a).unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").unwrap();
            stuck = Some(s);
        }
        let before = readies(&e);
        if i % 2 == 0 {
            e.signal("USR2");
        } else {
            mcli(&sock, "reload");
        }
        let t = std::time::Instant::now();
        while readies(&e) <= before {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "reload {i}: no new worker; stderr: {:?}",
                e.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        if i == 50 {
            let c = last_addr(&e, "127.0.0.3").expect("the added bind");
            targets.write().unwrap().push(c);
        }
    }
    let ok_before = load.ok();
    wait_until("traffic after the reloads", || load.ok() > ok_before + 200);
    let c = load.finish();
    assert_clean(&c, false);
    assert_eq!(
        o.requests.load(Ordering::SeqCst),
        c.ok.load(Ordering::SeqCst)
    );
    // B is closed: nothing listens there any more.
    assert!(
        TcpStream::connect(b).is_err(),
        "the removed bind still accepts"
    );
    let show = mcli(&sock, "show proc");
    assert!(show.contains("master          100 [failed: 0]"), "{show}");
    let t = std::time::Instant::now();
    wait_until("old workers gone", || {
        old_workers(&mcli(&sock, "show proc")).is_empty()
    });
    // Well before the unfinished request's 30 s timeout.
    assert!(t.elapsed() < Duration::from_secs(25));
    drop(stuck);
    let mut e = e;
    e.signal("USR1");
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
}

/// The master stops the old worker only once every scheduler thread of
/// the new one polls its listeners (until then the old one accepts), so
/// no connection waits in the backlog for a thread that has not started:
/// `-d` shows each thread's first poll and the master's stop, and at each
/// of 10 reloads of a 4-thread worker the four polls come first.
#[test]
fn the_old_worker_stops_once_every_new_thread_polls() {
    let o = Origin::start("o", Mode::Ok);
    let dir = scratch("mw-order");
    let cfg = dir.join("ebb.cfg");
    let text = proxy_cfg("", &["127.0.0.1:0"], o.addr).replace("nbthread 2", "nbthread 4");
    std::fs::write(&cfg, text).unwrap();
    let e = Ebb::start_args(&["-W", "-d", "-f", cfg.to_str().unwrap()], dir.clone());
    let lines = || e.stderr.lock().unwrap().clone();
    let polls = |l: &[String]| {
        l.iter()
            .filter(|x| x.contains("polls its listeners"))
            .count()
    };
    wait_until("the first worker polls", || polls(&lines()) == 4);
    for i in 1..=10 {
        e.signal("USR2");
        wait_until("the old worker is told to stop", || {
            lines().iter().filter(|x| x.ends_with(" stops")).count() == i
        });
        let l = lines();
        let stop = l
            .iter()
            .enumerate()
            .filter(|(_, x)| x.ends_with(" stops"))
            .map(|(k, _)| k)
            .nth(i - 1)
            .unwrap();
        // Every thread of this worker and of the ones before it.
        assert_eq!(polls(&l[..stop]), 4 * (i + 1), "reload {i}: {l:?}");
    }
    let mut e = e;
    e.signal("USR1");
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
}

/// Reload without a master: the new process takes the old one's sockets
/// with `-x` (`_getsocks` on its `expose-fd listeners` stats socket) and
/// stops it with `-sf` once ready. Under load: nothing refused or lost,
/// and the stats socket carries over.
#[test]
fn x_and_sf_hand_over_without_a_refused_connection() {
    let o = Origin::start("o", Mode::Ok);
    let dir = scratch("sf");
    let stats = dir.join("stats.sock");
    let port = free_port();
    let global = format!(
        "    stats socket {} level admin expose-fd listeners\n",
        stats.display()
    );
    let cfg = dir.join("ebb.cfg");
    std::fs::write(
        &cfg,
        proxy_cfg(&global, &[&format!("127.0.0.1:{port}")], o.addr),
    )
    .unwrap();
    let cfgs = cfg.to_str().unwrap().to_string();
    let old = Ebb::start_args(&["-f", &cfgs], dir.clone());
    let a = old.addr();
    let targets = Arc::new(RwLock::new(vec![a]));
    let load = Load::start(targets, 8, 4, false);
    wait_until("traffic flows", || load.ok() > 200);
    let pid = old.pid().to_string();
    let new = Ebb::start_args(
        &["-x", stats.to_str().unwrap(), "-sf", &pid, "-f", &cfgs],
        dir.clone(),
    );
    assert_eq!(new.addr(), a);
    let mut old = old;
    assert_eq!(old.wait_exit(Duration::from_secs(30)), Some(0));
    let ok = load.ok();
    wait_until("traffic on the new process", || load.ok() > ok + 200);
    let c = load.finish();
    assert_clean(&c, false);
    // The stats socket was handed over too, and the old process left its
    // file in place.
    let info = common::cli_cmd(&stats, "show info");
    assert!(info.contains(&format!("Pid: {}", new.pid())), "{info}");
}

/// A reload whose configuration does not load keeps the running worker
/// and its sockets; the next good reload takes over from it.
#[test]
fn a_failed_reload_keeps_the_running_worker() {
    let o = Origin::start("o", Mode::Ok);
    let dir = scratch("mwfail");
    let cfg = dir.join("ebb.cfg");
    std::fs::write(&cfg, proxy_cfg("", &["127.0.0.1:0"], o.addr)).unwrap();
    let sock = dir.join("master.sock");
    let e = Ebb::start_args(
        &[
            "-W",
            "-S",
            sock.to_str().unwrap(),
            "-f",
            cfg.to_str().unwrap(),
        ],
        dir.clone(),
    );
    let a = e.addr();
    std::fs::write(&cfg, "frontend broken\n    bogus keyword\n").unwrap();
    mcli(&sock, "reload");
    wait_until("the failed reload", || {
        mcli(&sock, "show proc").contains("1 [failed: 1]")
    });
    let show = mcli(&sock, "show proc");
    assert!(old_workers(&show).is_empty(), "{show}");
    assert_eq!(common::get(a, "/").status, 200);
    std::fs::write(&cfg, proxy_cfg("", &["127.0.0.1:0"], o.addr)).unwrap();
    let before = readies(&e);
    e.signal("USR2");
    wait_until("the new worker", || readies(&e) > before);
    // The same socket: the address did not change.
    assert_eq!(last_addr(&e, "127.0.0.1"), Some(a));
    assert_eq!(common::get(a, "/").status, 200);
    assert!(mcli(&sock, "show proc").contains("2 [failed: 1]"));
    let mut e = e;
    e.signal("TERM");
    // HAProxy 2.6's status for a master stopped by SIGTERM: 0.
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
    assert!(!sock.exists(), "the master CLI socket file stays");
}

/// `master-worker no-exit-on-failure`: a current worker that dies (killed
/// here) leaves the master and the other processes running (HAProxy 2.6's
/// documented meaning; Debian's haproxy 2.6.12 does not apply it: its
/// master kills every process, as without the option, measured by hand);
/// a reload starts a new worker, and
/// the master leaves with the first failure's status once no process is
/// left.
#[test]
fn no_exit_on_failure_keeps_the_master_and_its_programs() {
    let o = Origin::start("o", Mode::Ok);
    let dir = scratch("mwnoexit");
    let cfg = dir.join("ebb.cfg");
    let text = proxy_cfg(
        "    master-worker no-exit-on-failure\n",
        &["127.0.0.1:0"],
        o.addr,
    ) + "program sleeper\n    command sleep 1000\n";
    std::fs::write(&cfg, text).unwrap();
    let sock = dir.join("master.sock");
    let mut e = Ebb::start_args(
        &[
            "-W",
            "-S",
            sock.to_str().unwrap(),
            "-f",
            cfg.to_str().unwrap(),
        ],
        dir.clone(),
    );
    let show = mcli(&sock, "show proc");
    let w = current_workers(&show);
    assert_eq!(w.len(), 1, "{show}");
    let kill = |sig: &str, pid: &str| {
        std::process::Command::new("kill")
            .args([&format!("-{sig}"), pid])
            .status()
            .unwrap()
    };
    kill("KILL", &w[0]);
    wait_until("the master seeing its worker gone", || {
        current_workers(&mcli(&sock, "show proc")).is_empty()
    });
    assert!(e
        .wait_stderr(
            &format!("current worker {} exited with code 137", w[0]),
            Duration::from_secs(30)
        )
        .is_some());
    // The master and the program stay; a reload brings a worker back.
    let before = readies(&e);
    e.signal("USR2");
    wait_until("the new worker", || readies(&e) > before);
    assert_eq!(common::get(e.addr(), "/").status, 200);
    let show = mcli(&sock, "show proc");
    let w2 = current_workers(&show);
    assert_eq!(w2.len(), 1, "{show}");
    kill("KILL", &w2[0]);
    let prog = show
        .lines()
        .find(|l| l.contains("sleeper"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    assert!(!prog.is_empty(), "{show}");
    kill("TERM", &prog);
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(137));
}

/// The pids listed under `# workers` in `show proc`.
fn current_workers(show: &str) -> Vec<String> {
    show.lines()
        .skip_while(|l| !l.starts_with("# workers"))
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

/// An old worker that cannot run its own `hard-stop-after` (stopped with
/// SIGSTOP here) is killed by the master once that time has passed.
#[test]
fn the_master_kills_an_old_worker_stuck_past_hard_stop_after() {
    let o = Origin::start("o", Mode::Ok);
    let dir = scratch("mwstuck");
    let cfg = dir.join("ebb.cfg");
    std::fs::write(
        &cfg,
        proxy_cfg("    hard-stop-after 1s\n", &["127.0.0.1:0"], o.addr),
    )
    .unwrap();
    let sock = dir.join("master.sock");
    let e = Ebb::start_args(
        &[
            "-W",
            "-S",
            sock.to_str().unwrap(),
            "-f",
            cfg.to_str().unwrap(),
        ],
        dir.clone(),
    );
    let w = current_workers(&mcli(&sock, "show proc"));
    assert_eq!(w.len(), 1);
    let ok = std::process::Command::new("kill")
        .args(["-STOP", &w[0]])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let before = readies(&e);
    mcli(&sock, "reload");
    wait_until("the new worker", || readies(&e) > before);
    wait_until("the stuck worker killed", || {
        old_workers(&mcli(&sock, "show proc")).is_empty()
    });
    // The master's log line may follow the process table's change.
    assert!(e
        .wait_stderr(
            &format!("worker {} still there after hard-stop-after", w[0]),
            Duration::from_secs(60)
        )
        .is_some());
    assert_eq!(common::get(e.addr(), "/").status, 200);
    let mut e = e;
    e.signal("USR1");
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
}

/// The lines of one `show proc` section (`# programs`...): (pid, name).
fn proc_section(show: &str, title: &str) -> Vec<(String, String)> {
    show.lines()
        .skip_while(|l| *l != title)
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect()
}

/// What a master (ebb or haproxy, `prog`) did with two `program`
/// sections (`sleep`, which SIGUSR1 ends) over one reload and a stop: the
/// names under `# programs` and `# old programs` at start and once the
/// reload's old programs are gone, whether each instance is gone after the
/// stop, and the master's exit status.
type ProgramRun = (Vec<Vec<String>>, bool, Option<i32>);

fn run_programs(prog: &str, name: &str) -> ProgramRun {
    let dir = scratch(name);
    let port = common::free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n    server s 127.0.0.1:1\n\
         program foo\n    command sleep 1000\nprogram bar\n    command sleep 1000\n    no option start-on-reload\n"
    );
    std::fs::write(dir.join("p.cfg"), cfg).unwrap();
    let sock = dir.join("m.sock");
    let child = std::process::Command::new(prog)
        .args(["-W", "-S", sock.to_str().unwrap(), "-f", "p.cfg"])
        .current_dir(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let out: Vec<Box<dyn Read + Send>> = vec![
        Box::new(child.stdout.take().unwrap()),
        Box::new(child.stderr.take().unwrap()),
    ];
    for r in out {
        let l = Arc::clone(&lines);
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(r).lines().map_while(Result::ok) {
                l.lock().unwrap().push(line);
            }
        });
    }
    // A failed test stops the master, which stops its programs.
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let _ = self.0.wait();
        }
    }
    let mut child = Stop(child);
    // Nothing until the master CLI answers.
    let show = || {
        let Ok(mut s) = std::os::unix::net::UnixStream::connect(&sock) else {
            return String::new();
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        // Both masters keep a connection for more commands: the
        // client's end says there are none.
        let _ = s.write_all(b"show proc\n");
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    let section = |s: &str, t: &str| -> Vec<(String, String)> { proc_section(s, t) };
    let names = |v: &[(String, String)]| -> Vec<String> { v.iter().map(|x| x.1.clone()).collect() };
    // Asked once the master says it has loaded (haproxy: "Loading
    // success", ebb: its worker's "ready").
    wait_until(&format!("{prog}: loaded"), || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("Loading success") || l.starts_with("ebb: ready"))
    });
    let mut seen = Vec::new();
    let mut first = Vec::new();
    wait_until(&format!("{prog}: both programs"), || {
        first = section(&show(), "# programs");
        first.len() == 2
    });
    seen.push(names(&first));
    let _ = std::process::Command::new("kill")
        .args(["-USR2", &child.0.id().to_string()])
        .status();
    // SIGUSR1 ends both former instances; only foo has a new one.
    let mut now = Vec::new();
    wait_until(&format!("{prog}: the reload"), || {
        let s = show();
        now = section(&s, "# programs");
        !now.is_empty()
            && !now.iter().any(|p| first.contains(p))
            && section(&s, "# old programs").is_empty()
    });
    seen.push(names(&now));
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status();
    let code = (0..3000).find_map(|_| match child.0.try_wait() {
        Ok(Some(st)) => Some(st.code()),
        _ => {
            std::thread::sleep(Duration::from_millis(20));
            None
        }
    });
    let gone = first
        .iter()
        .chain(now.iter())
        .all(|(pid, _)| !std::path::Path::new(&format!("/proc/{pid}")).exists());
    (seen, gone, code.flatten())
}

/// `program` sections in master-worker mode: started with the master,
/// listed by `show proc`, told SIGUSR1 at a reload (a new instance only
/// with `start-on-reload`), stopped with the master, as haproxy does.
#[test]
fn programs_follow_the_master_as_haproxy() {
    let run = run_programs(common::EBB, "prog");
    let want = vec![
        vec!["foo".to_string(), "bar".to_string()],
        vec!["foo".to_string()],
    ];
    // haproxy 2.6.12 on the same configuration, by hand, lists the same
    // (`run_programs("haproxy", ..)` here: its master CLI leaves this
    // test's first `show proc` unanswered, which socat or python clients
    // do not see; not understood yet).
    assert_eq!(run, (want, true, Some(0)));
}

/// Outside master-worker mode a `program` section is refused (HAProxy:
/// "Can't use a 'program' section without master worker mode"), at `-c`
/// too; a section without a command is refused in any mode.
#[test]
fn a_program_needs_master_worker_mode_and_a_command() {
    let dir = scratch("progcheck");
    std::fs::write(dir.join("p.cfg"), "program foo\n    command sleep 10\n").unwrap();
    let (code, _, err) = common::run_ebb(&["-c", "-f", "p.cfg"], &dir);
    assert_eq!(code, 1);
    assert!(
        err.contains("p.cfg:1: 'program' section 'foo' needs master-worker mode"),
        "{err}"
    );
    let (code, _, err) = common::run_ebb(&["-W", "-c", "-f", "p.cfg"], &dir);
    assert_eq!(code, 0, "{err}");
    std::fs::write(dir.join("q.cfg"), "program foo\n    user\nprogram foo\n").unwrap();
    let (code, _, err) = common::run_ebb(&["-W", "-c", "-f", "q.cfg"], &dir);
    assert_eq!(code, 1);
    assert!(
        err.contains("q.cfg:1: the program section 'foo' lacks a command"),
        "{err}"
    );
    assert!(
        err.contains("q.cfg:2: 'user' expects one user name"),
        "{err}"
    );
    assert!(
        err.contains("q.cfg:3: 'foo' program section already exists"),
        "{err}"
    );
    if common::have("haproxy") {
        let hap = |args: &[&str]| {
            std::process::Command::new("haproxy")
                .args(args)
                .current_dir(&dir)
                .output()
                .unwrap()
                .status
                .code()
        };
        assert_ne!(hap(&["-c", "-f", "p.cfg"]), Some(0));
        assert_ne!(hap(&["-W", "-c", "-f", "q.cfg"]), Some(0));
    }
}

/// A current program that fails (status 3) stops the workers and the other
/// programs, and the master leaves with that status: HAProxy's
/// exit-on-failure, side by side.
#[test]
fn a_failing_program_stops_everything_with_its_status() {
    let dir = scratch("progfail");
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\
         frontend fe\n    bind 127.0.0.1:{}\n    default_backend be\nbackend be\n    server s 127.0.0.1:1\n\
         program ok\n    command sleep 1000\nprogram bad\n    command sh -c \"exit 3\"\n",
        common::free_port()
    );
    std::fs::write(dir.join("f.cfg"), cfg).unwrap();
    let status = |prog: &str| {
        std::process::Command::new(prog)
            .args(["-W", "-f", "f.cfg"])
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
            .status
            .code()
    };
    // `output` returns once the master and every process holding its
    // stdout (the workers, `sleep`) are gone.
    assert_eq!(status(common::EBB), Some(3));
    if common::have("haproxy") {
        assert_eq!(status("haproxy"), Some(3));
    }
}

/// `user` and `group` in a `program` section: the command runs with them
/// (checked as root only; `id` reports its identity to a file).
#[test]
fn a_program_runs_as_its_user_and_group() {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !root {
        eprintln!("not root: user/group cannot be changed here");
        return;
    }
    let dir = scratch("proguser");
    // The directory must be writable by nobody.
    let out = std::path::PathBuf::from("/tmp").join(format!("ebb-proguser-{}", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\
         frontend fe\n    bind 127.0.0.1:{}\n    default_backend be\nbackend be\n    server s 127.0.0.1:1\n\
         program who\n    command sh -c \"id -u > {p}.tmp; id -g >> {p}.tmp; mv {p}.tmp {p}; exec sleep 1000\"\n\
         \x20   user nobody\n    group nogroup\n",
        common::free_port(),
        p = out.display()
    );
    std::fs::write(dir.join("u.cfg"), cfg).unwrap();
    let mut e = Ebb::start_args(&["-W", "-f", "u.cfg"], dir);
    wait_until("the program's report", || out.exists());
    let ids = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert_eq!(ids, "65534\n65534\n");
    e.signal("TERM");
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
}

/// The master's exit status on a stop signal, side by side with HAProxy
/// 2.6 (`-W`): SIGTERM 0, SIGINT 130, SIGUSR1 0 (HAProxy's master leaves
/// with its worker's status unless that is 0 or 143).
#[test]
fn master_stop_status_is_haproxys() {
    let dir = scratch("mw-status");
    // The statuses are HAProxy 2.6's (mworker.c; `haproxy -W -db` run by
    // hand: 0, 130, 0). HAProxy itself is not run here: under the test
    // harness its master sometimes keeps running after a stop signal that
    // comes right after its worker starts serving (seen for SIGINT and
    // SIGUSR1, the worker still listening), which would make this test
    // fail on HAProxy's account.
    for prog in [common::EBB] {
        for (sig, want) in [("TERM", 0), ("INT", 130), ("USR1", 0)] {
            let port = common::free_port();
            let cfg = format!(
                "defaults\n    mode tcp\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\nlisten l\n    bind 127.0.0.1:{port}\n    server s 127.0.0.1:1\n"
            );
            std::fs::write(dir.join("s.cfg"), cfg).unwrap();
            let mut child = std::process::Command::new(prog)
                .args(["-W", "-db", "-f", "s.cfg"])
                .current_dir(&dir)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            // A worker serves: it closes a connection whose server refuses.
            wait_until(&format!("{prog} serving"), || {
                let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
                    return false;
                };
                let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                let mut b = [0u8; 1];
                match c.read_retry(&mut b) {
                    Ok(n) => n == 0,
                    Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
                }
            });
            let _ = std::process::Command::new("kill")
                .args([&format!("-{sig}"), &child.id().to_string()])
                .status();
            // Bounded: a master that ignores its stop signal fails the test
            // instead of hanging it.
            let t = std::time::Instant::now();
            let code = loop {
                if let Some(st) = child.try_wait().unwrap() {
                    break st.code();
                }
                if t.elapsed() > Duration::from_secs(60) {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{prog} did not end on SIG{sig}");
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            assert_eq!(code, Some(want), "{prog} SIG{sig}");
        }
    }
}

/// What a process (`pid`, serving `a`) did after SIGUSR1 under global
/// `grace 3s`: how long after the signal a new connection was last
/// answered, whether a keep-alive connection's answers during that time
/// kept it open, whether `show info` on `sock` said `Stopping: 1` then,
/// and whether the listener then closed.
fn grace_run(pid: u32, a: SocketAddr, sock: &std::path::Path) -> (Duration, bool, bool, bool) {
    let req = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";
    let mut ka = common::Client::connect(a);
    ka.send(req);
    assert_eq!(ka.read_resp().status, 200);
    let t = std::time::Instant::now();
    let ok = std::process::Command::new("kill")
        .args(["-USR1", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let mut last_ok = Duration::ZERO;
    let mut kept_alive = true;
    let mut ka_live = true;
    let mut said_stopping = false;
    let refused = common::came_within(Duration::from_secs(40), || {
        let Ok(s) = TcpStream::connect(a) else {
            return true;
        };
        let mut c = common::Client::from_stream(s);
        c.send(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        if c.read_resp_opt(false).is_some_and(|r| r.status == 200) {
            last_ok = t.elapsed();
        }
        // The keep-alive connection, while the grace runs (a margin of a
        // second: the soft stop then closes it after its answer).
        if ka_live && t.elapsed() < Duration::from_secs(2) {
            ka.send(req);
            match ka.read_resp_opt(false) {
                Some(r) if r.status == 200 => {
                    kept_alive &= r.header("connection") != Some("close");
                }
                _ => kept_alive = false,
            }
            ka_live = kept_alive;
            said_stopping |= common::cli_cmd(sock, "show info")
                .lines()
                .any(|l| l == "Stopping: 1");
        }
        std::thread::sleep(Duration::from_millis(50));
        false
    });
    (last_ok, kept_alive, said_stopping, refused)
}

/// Global `grace 3s`: after SIGUSR1 the listener goes on accepting and
/// answering, keep-alive included, for the grace (`show info` says
/// `Stopping: 1` meanwhile); then the soft stop closes it. Beside haproxy.
#[test]
fn global_grace_delays_the_soft_stop_as_haproxy() {
    let cfg = |sock: &std::path::Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n    grace 3s\n\
             defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 10s\n\
             frontend fe\n    bind {bind}\n    http-request return status 200\n",
            sock.display()
        )
    };
    let check =
        |who: &str, (last_ok, kept_alive, stopping, refused): (Duration, bool, bool, bool)| {
            assert!(refused, "{who}: the listener did not close after the grace");
            assert!(kept_alive, "{who}: keep-alive ended during the grace");
            assert!(stopping, "{who}: show info did not say Stopping: 1");
            // Answered until at least a second into the grace (the connects
            // run every 50 ms): the stop did not close the listener at once.
            assert!(
                last_ok >= Duration::from_secs(1),
                "{who}: last answer {last_ok:?} after the signal"
            );
        };
    let (mut e, sock) = common::ebb_with_admin("grace", cfg);
    check("ebb", grace_run(e.pid(), e.addr(), &sock));
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
    if let Some((h, a)) = common::haproxy_beside("grace", cfg) {
        check("haproxy", grace_run(h.pid(), a, &h.sock));
    }
}
