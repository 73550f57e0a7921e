//! A bounded soak of mixed traffic against the real binary: keep-alive and
//! pipelined clients, one request per connection, proxying to an origin,
//! static files (small from memory, large by sendfile), fixed answers,
//! redirects, and errors (400, 404, 502, 503, abandoned heads). Open fds,
//! RSS and threads are sampled once warm and again when the traffic has
//! stopped and connections have idled out; the test fails on growth beyond
//! a small bound, or on RSS still climbing in the second half of the run.
//!
//! Ignored by default (minutes long):
//!   cargo test -p ebb --test soak -- --ignored --nocapture
//! EBB_SOAK_SECS sets the traffic time (default 75).
//!
//! What the time buys is the size of the smallest RSS leak it sees: about
//! 3,700 answers a second in CI (2 CPUs, debug build), so 75 s make some
//! 280,000 answers, and the bounds below (4 MiB overall, 2 MiB between the
//! halves' peaks) fail a leak of 16 bytes or more per answer, less than
//! the smallest allocation (32 bytes with malloc's header). That is what
//! 150 s with twice the bounds saw; the RSS measured moves by 50 to 150 kB
//! (warm-up to idle, and half to half). fd and thread leaks are seen at
//! any length (a few leaked descriptors fail it).

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::origin::{Mode, Origin};
use common::*;

#[derive(Clone, Copy, Debug)]
struct Sample {
    fds: usize,
    rss_kb: u64,
    threads: usize,
}

fn sample(pid: u32) -> Sample {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(0);
    let rss_kb = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    Sample {
        fds,
        rss_kb,
        threads,
    }
}

/// Counts of answers by kind, shared by the workers.
#[derive(Default)]
struct Counts {
    ok: AtomicUsize,
    expected_errors: AtomicUsize,
    wrong: AtomicUsize,
    connect_errors: AtomicUsize,
    /// Requests written after the connection had sat idle near ebb's 2 s
    /// `timeout http-keep-alive`/`http-request` (a descheduled client
    /// thread on a loaded machine) and closed unanswered: the timeout
    /// doing its job, as HAProxy's does, not a lost request.
    idle_races: AtomicUsize,
    /// The first wrong answers: what was asked, what was due, what came.
    wrong_seen: std::sync::Mutex<Vec<String>>,
}

/// The requests of the mix and the status each must get.
const MIX: &[(&str, u16)] = &[
    ("/api/users", 200),
    ("/static/small.html", 200),
    ("/static/big.bin", 200),
    ("/fixed", 200),
    ("/old/x", 301),
    ("/static/missing", 404),
    ("/down/x", 503),
    ("/bad/x", 502),
    ("/api/other?q=1", 200),
];

/// How long a connection may have sat idle before a request is written
/// for a close without answer to count as ebb's 2 s timeout firing: the
/// client's clock starts after ebb's (ebb's idle time is longer), and on
/// a loaded machine either side may be late by a fraction of a second.
const NEAR_TIMEOUT: Duration = Duration::from_millis(1500);

/// Whether an unanswered request was written after the connection sat
/// idle near ebb's timeout (counted apart, see `Counts::idle_races`).
fn idle_race(c: &Counts, r: &Option<Resp>, idle: Duration) -> bool {
    if r.is_none() && idle >= NEAR_TIMEOUT {
        c.idle_races.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    false
}

/// One request on a new connection (None if it cannot connect or gets no
/// answer); new connections are paced so the client side's ephemeral
/// ports are never exhausted.
fn once(a: SocketAddr, req: &[u8], c: &Counts) -> Option<Resp> {
    std::thread::sleep(Duration::from_millis(4));
    match TcpStream::connect(a) {
        Ok(s) => {
            let connected = Instant::now();
            let mut cl = Client::from_stream(s);
            let idle = connected.elapsed();
            cl.s.write_all(req).ok()?;
            let r = cl.read_resp_opt(false);
            if idle_race(c, &r, idle) {
                // Asked again, as a client does after such a close.
                return once(a, req, c);
            }
            r
        }
        Err(e) => {
            eprintln!("connect: {e}");
            c.connect_errors.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

fn check(c: &Counts, what: &str, r: Option<Resp>, want: u16) {
    match r {
        Some(r) if r.status == want && want < 400 => c.ok.fetch_add(1, Ordering::Relaxed),
        Some(r) if r.status == want => c.expected_errors.fetch_add(1, Ordering::Relaxed),
        r => {
            let got = r.map_or("no answer".to_string(), |r| format!("{}", r.status));
            let mut seen = c.wrong_seen.lock().unwrap();
            if seen.len() < 20 {
                seen.push(format!("{what}: want {want}, got {got}"));
            }
            c.wrong.fetch_add(1, Ordering::Relaxed)
        }
    };
}

fn worker(kind: usize, a: SocketAddr, stop: Arc<AtomicBool>, c: Arc<Counts>) {
    let mut i = kind;
    while !stop.load(Ordering::Relaxed) {
        match kind {
            // Keep-alive: many requests per connection.
            0 | 1 => {
                let Ok(s) = TcpStream::connect(a) else {
                    continue;
                };
                let mut cl = Client::from_stream(s);
                let mut last_answer = Instant::now();
                for _ in 0..200 {
                    let (p, want) = MIX[i % MIX.len()];
                    i += 1;
                    let idle = last_answer.elapsed();
                    if cl
                        .s
                        .write_all(format!("GET {p} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes())
                        .is_err()
                    {
                        break;
                    }
                    let r = cl.read_resp_opt(false);
                    last_answer = Instant::now();
                    let closed = r
                        .as_ref()
                        .is_none_or(|r| r.header("connection") == Some("close"));
                    if !idle_race(&c, &r, idle) {
                        check(&c, p, r, want);
                    }
                    if closed || stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
            }
            // One request per connection.
            2 => {
                let (p, want) = MIX[i % MIX.len()];
                i += 1;
                let req = format!("GET {p} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
                let r = once(a, req.as_bytes(), &c);
                check(&c, p, r, want);
            }
            // Pipelined batches of 8.
            3 => {
                let Ok(s) = TcpStream::connect(a) else {
                    continue;
                };
                let mut cl = Client::from_stream(s);
                let batch: Vec<(&str, u16)> = (0..8).map(|k| MIX[(i + k) % MIX.len()]).collect();
                i += 8;
                let mut req = String::new();
                for (p, _) in &batch {
                    req.push_str(&format!("GET {p} HTTP/1.1\r\nHost: h\r\n\r\n"));
                }
                if cl.s.write_all(req.as_bytes()).is_err() {
                    continue;
                }
                for (p, want) in &batch {
                    let r = cl.read_resp_opt(false);
                    let closed = r
                        .as_ref()
                        .is_none_or(|r| r.header("connection") == Some("close"));
                    check(&c, p, r, *want);
                    if closed {
                        break;
                    }
                }
            }
            // Hostile: malformed requests, bodies, abandoned heads.
            _ => {
                i += 1;
                match i % 4 {
                    0 => check(&c, "two content-lengths", once(a, b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &c), 400),
                    1 => check(&c, "control byte in target", once(a, b"GET /\x01 HTTP/1.1\r\nHost: h\r\n\r\n", &c), 400),
                    2 => check(
                        &c,
                        "chunked POST",
                        once(a, b"POST /api/post HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n", &c),
                        200,
                    ),
                    _ => {
                        // Half a head, then gone.
                        if let Ok(mut s) = TcpStream::connect(a) {
                            let _ = s.write_all(b"GET /api/x HTTP/1.1\r\nHost: h\r\nX-Half");
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
    }
}

/// The soak's origins, files and ebb.
struct SoakEnv {
    ebb: Ebb,
    root: std::path::PathBuf,
    _origins: (Origin, Origin),
    _dead: ClosedPort,
}

impl SoakEnv {
    fn start() -> SoakEnv {
        let origin = Origin::start("api", Mode::Ok);
        let bad = Origin::start("bad", Mode::Garbage);
        let closed = closed_port();
        let dead = closed.addr;
        let root = scratch("soak-www");
        std::fs::create_dir_all(root.join("static")).unwrap();
        std::fs::write(
            root.join("static/small.html"),
            "<h1>small</h1>\n".repeat(20),
        )
        .unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(root.join("static/big.bin"), big).unwrap();
        let cfg = format!(
            "global
        nbthread 2
    defaults
        mode http
        timeout client 20s
        timeout http-request 2s
        timeout http-keep-alive 2s
        timeout connect 5s
        timeout server 20s
    frontend fe
        bind BIND
        http-request redirect prefix /new code 301 if {{ path_beg /old }}
        http-request return status 200 content-type text/plain string ok if {{ path /fixed }}
        use_backend api if {{ path_beg /api }}
        use_backend down if {{ path_beg /down }}
        use_backend bad if {{ path_beg /bad }}
        default_backend files
    backend api
        default-server pool-purge-delay 1s
        server a {}
    backend down
        retries 0
        server d {dead}
    backend bad
        server b {}
    backend files
        serve-files {}
    ",
            origin.addr,
            bad.addr,
            root.display()
        );
        SoakEnv {
            ebb: Ebb::start(&cfg),
            root,
            _origins: (origin, bad),
            _dead: closed,
        }
    }
}

#[test]
#[ignore = "minutes long: cargo test -p ebb --test soak -- --ignored"]
fn soak_mixed_traffic_without_growth() {
    let secs: u64 = std::env::var("EBB_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(75);
    let env = SoakEnv::start();
    let mut e = env.ebb;
    let root = env.root.clone();
    let pid = e.pid();
    let a = e.addr();
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut ths = Vec::new();
    for kind in 0..6 {
        let (stop, c) = (Arc::clone(&stop), Arc::clone(&counts));
        ths.push(std::thread::spawn(move || worker(kind, a, stop, c)));
    }

    // Warm-up: pools, caches and the allocator reach their working size.
    let warm = Duration::from_secs((secs / 5).clamp(5, 20));
    std::thread::sleep(warm);
    let s0 = sample(pid);
    let t0 = Instant::now();
    let run = Duration::from_secs(secs);
    let mut rss_first_half = 0;
    let mut rss_second_half = 0;
    let mut fd_peak = 0;
    while t0.elapsed() < run {
        std::thread::sleep(Duration::from_secs(1));
        if let Ok(Some(st)) = e.child.try_wait() {
            stop.store(true, Ordering::SeqCst);
            let err = e.stderr.lock().unwrap().clone();
            panic!(
                "ebb exited ({st}) after {:?}: {:?}",
                t0.elapsed(),
                &err[err.len().saturating_sub(10)..]
            );
        }
        let s = sample(pid);
        fd_peak = fd_peak.max(s.fds);
        if t0.elapsed() < run / 2 {
            rss_first_half = rss_first_half.max(s.rss_kb);
        } else {
            rss_second_half = rss_second_half.max(s.rss_kb);
        }
    }
    stop.store(true, Ordering::SeqCst);
    for t in ths {
        t.join().unwrap();
    }
    let under_load = sample(pid);
    // Idle: keep-alive (2 s), heads (2 s) and pooled server connections
    // (1 s purge) time out; the bound is only a ceiling for a loaded
    // machine.
    let t = Instant::now();
    let mut s1 = sample(pid);
    while t.elapsed() < Duration::from_secs(60) && s1.fds > s0.fds.min(20) {
        std::thread::sleep(Duration::from_millis(200));
        s1 = sample(pid);
    }
    // Still serving.
    assert_eq!(get(a, "/fixed").status, 200);

    let ok = counts.ok.load(Ordering::SeqCst);
    let errs = counts.expected_errors.load(Ordering::SeqCst);
    let wrong = counts.wrong.load(Ordering::SeqCst);
    let cerr = counts.connect_errors.load(Ordering::SeqCst);
    let races = counts.idle_races.load(Ordering::SeqCst);
    println!(
        "soak {secs}s (after {}s warm-up): {ok} good answers, {errs} expected errors, {wrong} wrong or missing, {cerr} failed connects, {races} requests written after an idle time near ebb's timeout and closed unanswered ({:.0} answers/s)",
        warm.as_secs(),
        (ok + errs) as f64 / (secs + warm.as_secs()) as f64
    );
    println!(
        "warm: fds {} RSS {} kB threads {}; under load: fds {} (peak {fd_peak}) RSS {} kB; idle after: fds {} RSS {} kB threads {}",
        s0.fds, s0.rss_kb, s0.threads, under_load.fds, under_load.rss_kb, s1.fds, s1.rss_kb, s1.threads
    );
    println!(
        "RSS peak: first half {rss_first_half} kB, second half {rss_second_half} kB; growth warm -> idle {} kB",
        s1.rss_kb as i64 - s0.rss_kb as i64
    );
    assert_eq!(
        wrong,
        0,
        "answers missing or with the wrong status: {:?}",
        counts.wrong_seen.lock().unwrap()
    );
    assert_eq!(cerr, 0, "connections refused");
    assert!(ok > 1000, "too little traffic: {ok}");
    // Bounds: the idle fd count is back to the warm one (a few slack for
    // the blocking pool and pooled connections in their last second);
    // threads do not multiply; RSS grows by at most 4 MiB overall and by
    // at most 2 MiB from the first half's peak to the second's (a leak
    // keeps climbing; an allocator settles; see the top for the size).
    assert!(s1.fds <= s0.fds + 4, "fds {} -> {}", s0.fds, s1.fds);
    assert!(
        s1.threads <= s0.threads + 2,
        "threads {} -> {}",
        s0.threads,
        s1.threads
    );
    assert!(
        s1.rss_kb <= s0.rss_kb + 4 * 1024,
        "RSS {} -> {} kB",
        s0.rss_kb,
        s1.rss_kb
    );
    assert!(
        rss_second_half <= rss_first_half + 2 * 1024,
        "RSS still climbing: first half peak {rss_first_half} kB, second half {rss_second_half} kB"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Regression (found by the soak): pipelined batches mixing proxied,
/// fixed and file answers. A file's answer was counted from an output
/// offset taken when its request was parsed, but the output buffer had been
/// written out and emptied while the file was looked up on the blocking
/// pool: the subtraction underflowed (a panic that killed a scheduler
/// thread in debug builds, a wrong byte count in release ones).
#[test]
fn pipelined_mix_keeps_answer_accounting() {
    let env = SoakEnv::start();
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let a = env.ebb.addr();
    let ths: Vec<_> = (0..2)
        .map(|_| {
            let (stop, c) = (Arc::clone(&stop), Arc::clone(&counts));
            std::thread::spawn(move || worker(3, a, stop, c))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::SeqCst);
    for t in ths {
        t.join().unwrap();
    }
    let mut e = env.ebb;
    assert!(
        e.child.try_wait().unwrap().is_none(),
        "ebb died: {:?}",
        e.stderr.lock().unwrap()
    );
    assert_eq!(
        counts.wrong.load(Ordering::SeqCst),
        0,
        "{:?}",
        counts.wrong_seen.lock().unwrap()
    );
    assert!(counts.ok.load(Ordering::SeqCst) > 100);
    let _ = std::fs::remove_dir_all(&env.root);
}
