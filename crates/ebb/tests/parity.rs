//! HAProxy 2.6 parity of the master CLI, the answers to requests that
//! could not be read, the log line of a broken request body, and the
//! redirect cookies. Real binary on loopback, real clients; haproxy run
//! beside ebb where it is installed.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::origin::{drain, exchange, read_head, serve_each};
use common::{haproxy_beside, run_ebb, scratch, wait_until, Ebb, ReadRetry, Syslog};

fn mcli(path: &Path, cmd: &str) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    // The master CLI keeps a connection for more commands: the client's
    // end says there are none (as `socat` does).
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn reloads(show: &str) -> Option<String> {
    show.lines()
        .find(|l| l.contains("master"))
        .and_then(|l| l.split_whitespace().nth(2))
        .map(str::to_string)
}

/// A master (`-W -S`) serving a fixed answer: the process and its master
/// CLI socket.
fn master(name: &str) -> (Ebb, std::path::PathBuf) {
    let dir = scratch(name);
    master_on(
        &dir,
        "defaults\n    mode http\n    timeout client 5s\n\
         frontend f\n    bind 127.0.0.1:0\n    http-request return status 200\n",
    )
}

/// A master (`-W -S`) on configuration `text` in `dir`.
fn master_on(dir: &Path, text: &str) -> (Ebb, std::path::PathBuf) {
    let cfg = dir.join("ebb.cfg");
    std::fs::write(&cfg, text).unwrap();
    let sock = dir.join("master.sock");
    let args = [
        "-W",
        "-S",
        sock.to_str().unwrap(),
        "-f",
        cfg.to_str().unwrap(),
    ];
    (Ebb::start_args(&args, dir.to_path_buf()), sock)
}

/// Silent master CLI clients (connected, nothing sent; one with half a
/// line) no longer hold the master: `show proc` and `reload` from another
/// client are answered while they wait, a SIGUSR2 reload goes through,
/// and the silent ones are closed at their deadline. Before, the master
/// read each connection blocking for up to 5 s: ten silent clients held
/// it 50 s.
#[test]
fn a_silent_master_cli_client_delays_nothing() {
    let (e, sock) = master("mcli-silent");
    let mut silent: Vec<UnixStream> = (0..10)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    silent[0].write_all(b"show pr").unwrap();
    // Answered well before the first silent client's 5 s are up, let
    // alone ten of them.
    let t = Instant::now();
    let show = mcli(&sock, "show proc");
    assert!(show.contains("# workers"), "{show}");
    assert_eq!(reloads(&show).as_deref(), Some("0"), "{show}");
    mcli(&sock, "reload");
    wait_until("the CLI reload", || {
        reloads(&mcli(&sock, "show proc")).as_deref() == Some("1")
    });
    e.signal("USR2");
    wait_until("the SIGUSR2 reload", || {
        reloads(&mcli(&sock, "show proc")).as_deref() == Some("2")
    });
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t.elapsed()
    );
    // The silent clients: closed by their deadline, or by the reloads'
    // re-executions, unanswered.
    for s in &mut silent {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut b = Vec::new();
        let _ = s.read_to_end(&mut b);
        assert!(b.is_empty(), "{}", String::from_utf8_lossy(&b));
    }
    // A line sent in pieces is put together.
    let mut s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    for part in ["sh", "ow ", "proc\n"] {
        s.write_all(part.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.contains("# workers"), "{out}");
}

/// A command passed on to a worker that does not answer (stopped with
/// SIGSTOP here) holds only its own client: `show proc` from another
/// client is answered meanwhile, and the first gets the worker's answer
/// once it runs again. Before, the master waited for the worker's answer
/// blocking (up to 10 s), answering no one.
#[test]
fn a_stopped_worker_delays_no_other_master_cli_client() {
    let (e, sock) = master("mcli-stopped-worker");
    let show = mcli(&sock, "show proc");
    let worker = show
        .lines()
        .skip_while(|l| !l.starts_with("# workers"))
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{show}"))
        .to_string();
    let kill = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &worker])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} {worker}");
    };
    // What the master's descriptors are (a worker's readiness pipe may
    // still close: only new ones count).
    let fds = || -> std::collections::BTreeSet<std::path::PathBuf> {
        std::fs::read_dir(format!("/proc/{}/fd", e.pid()))
            .map(|d| {
                d.filter_map(|f| std::fs::read_link(f.ok()?.path()).ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = fds();
    kill("-STOP");
    struct Cont<F: Fn(&str)>(F);
    impl<F: Fn(&str)> Drop for Cont<F> {
        fn drop(&mut self) {
            (self.0)("-CONT");
        }
    }
    let cont = Cont(kill);
    // kill(2) returns once SIGSTOP is queued: the kernel wakes one thread
    // of the worker to start the stop, the others run on until that one
    // has, and one of them may answer the command meanwhile (9 runs in
    // 60 with two CPU burners: the master got its answer at once). The
    // command goes once every thread is stopped (`T` in its /proc stat).
    let states = || -> Vec<char> {
        std::fs::read_dir(format!("/proc/{worker}/task"))
            .map(|d| {
                d.filter_map(|t| {
                    let stat = std::fs::read_to_string(t.ok()?.path().join("stat")).ok()?;
                    stat.rsplit_once(") ")?.1.chars().next()
                })
                .collect()
            })
            .unwrap_or_default()
    };
    wait_until("the worker stopped", || {
        let s = states();
        !s.is_empty() && s.iter().all(|&c| c == 'T')
    });
    let mut held = UnixStream::connect(&sock).unwrap();
    held.write_all(b"@1 show info\n").unwrap();
    held.shutdown(std::net::Shutdown::Write).unwrap();
    // Its client's connection and the one to the worker: the command is
    // passed on.
    let t = Instant::now();
    wait_until("the command passed on", || {
        fds().difference(&before).count() >= 2
    });
    let show = mcli(&sock, "show proc");
    assert!(show.contains("# workers"), "{show}");
    // The held client has no answer yet: its worker is stopped (only
    // past the 10 s the worker has to answer, on a loaded machine, it
    // may have had the master's own word).
    held.set_nonblocking(true).unwrap();
    let mut b = [0u8; 64];
    let mut out = String::new();
    match held.read_retry(&mut b) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        r => {
            let got = r.map(|n| String::from_utf8_lossy(&b[..n]).into_owned());
            assert!(
                t.elapsed() >= Duration::from_secs(10)
                    && got
                        .as_deref()
                        .is_ok_and(|g| g.contains("Can't connect to the target CLI!")),
                "{got:?}"
            );
            out = got.unwrap_or_default();
        }
    }
    drop(cont);
    held.set_nonblocking(false).unwrap();
    held.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _ = held.read_to_string(&mut out);
    assert!(
        out.contains(&format!("Pid: {worker}"))
            || t.elapsed() >= Duration::from_secs(10)
                && out.contains("Can't connect to the target CLI!"),
        "{out}"
    );
}

/// More master CLI clients than it serves at once: the others wait in
/// the listen queue and are answered once a place frees.
#[test]
fn master_cli_connections_are_bounded() {
    let (_e, sock) = master("mcli-bound");
    let silent: Vec<UnixStream> = (0..64)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    // The 65th waits for a place: the silent ones leave at their 5 s.
    let t = Instant::now();
    let show = mcli(&sock, "show proc");
    assert!(show.contains("# workers"), "{show}");
    assert!(t.elapsed() >= Duration::from_secs(3), "{:?}", t.elapsed());
    drop(silent);
    assert!(mcli(&sock, "show proc").contains("# workers"));
}

/// The status line and the field names in order, lower case, without
/// ebb's own `Server` and `Date`; and the body.
/// `GET` of each path on a connection of its own: the answers' shapes.
fn get_each(a: SocketAddr, paths: &[&str]) -> Vec<(String, Vec<String>, String)> {
    paths
        .iter()
        .map(|p| {
            shape(&exchange(
                a,
                format!("GET {p} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").as_bytes(),
            ))
        })
        .collect()
}

fn shape(raw: &[u8]) -> (String, Vec<String>, String) {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("").to_string();
    let names = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| format!("{}: {}", n.to_ascii_lowercase(), v.trim()))
        .filter(|n| !n.starts_with("server:") && !n.starts_with("date:"))
        .collect();
    (status, names, body.to_string())
}

/// HAProxy's HTTP/1 layer answers a request it cannot parse (400) or
/// that does not come whole in time (408) with its raw page:
/// `Connection: close` before `Content-Type`. ebb's are the same, field
/// for field (ebb adds its `Server` and `Date`).
#[test]
fn parse_error_answers_have_haproxys_field_order() {
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 10s\n    timeout http-request 1s\n\
             frontend f\n    bind {bind}\n    http-request return status 200\n",
            sock.display()
        )
    };
    let e = Ebb::start(
        &cfg(Path::new("/nonexistent"), "BIND")
            .replace("    stats socket /nonexistent level admin\n", ""),
    );
    let cases: [&[u8]; 2] = [
        b"GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n",
    ];
    let ebb: Vec<_> = cases
        .iter()
        .map(|r| shape(&exchange(e.addr(), r)))
        .collect();
    assert_eq!(ebb[0].0, "HTTP/1.1 400 Bad request");
    assert_eq!(ebb[1].0, "HTTP/1.1 408 Request Time-out");
    for (_, names, body) in &ebb {
        assert_eq!(
            names,
            &[
                format!("content-length: {}", body.len()),
                "cache-control: no-cache".to_string(),
                "connection: close".to_string(),
                "content-type: text/html".to_string(),
            ]
        );
    }
    let Some((_h, ha)) = haproxy_beside("parse-err", cfg) else {
        return;
    };
    let hap: Vec<_> = cases.iter().map(|r| shape(&exchange(ha, r))).collect();
    assert_eq!(ebb, hap);
}

/// ebb on `cfg` (its `stats socket` line left out) and, where it is
/// installed, haproxy beside it: the processes, kept while they serve,
/// and the addresses to try, ebb's first.
fn ebb_and_haproxy(
    name: &str,
    cfg: impl Fn(&Path, &str) -> String,
) -> (Ebb, Option<common::Hap>, Vec<(&'static str, SocketAddr)>) {
    let e =
        Ebb::start(&cfg(Path::new("/x"), "BIND").replace("    stats socket /x level admin\n", ""));
    let mut targets = vec![("ebb", e.addr())];
    let hap = haproxy_beside(name, cfg).map(|(h, a)| {
        targets.push(("haproxy", a));
        h
    });
    (e, hap, targets)
}

/// An origin that reads a request head, says so, answers the start of a
/// chunked answer when `answer`, and keeps reading until the close.
fn body_origin(answer: bool) -> (SocketAddr, std::sync::mpsc::Receiver<()>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let a = serve_each(move |mut c| {
        if read_head(&mut c).is_none() {
            return;
        }
        if answer {
            let _ =
                c.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n");
        }
        let _ = tx.send(());
        drain(&mut c);
    });
    (a, rx)
}

/// The log line's status and termination state (`400 PH--`): httplog's
/// `%ST %B %CC %CS %tsc`.
fn status_and_term(line: &str) -> (String, String) {
    let w: Vec<&str> = line.split_whitespace().collect();
    let i = w
        .iter()
        .position(|x| x.len() == 4 && x.ends_with("--"))
        .unwrap_or(0);
    let status = i.checked_sub(4).and_then(|j| w.get(j)).map_or("", |x| x);
    (status.to_string(), w.get(i).map_or("", |x| x).to_string())
}

/// A chunked request body with a bad chunk size after its head went to
/// the server: HAProxy 2.6 answers 400 and logs `PH--` (the proxy
/// refused while waiting for the answer's head); once the server's answer
/// started, it cuts both sides and logs the server's status with `PD--`.
/// ebb logged `CR--` for both. Side by side with haproxy.
#[test]
fn a_bad_chunk_after_the_head_is_logged_as_haproxy() {
    for (answer, want_status, want_term) in [(false, "400", "PH--"), (true, "200", "PD--")] {
        let (origin, heads) = body_origin(answer);
        let log = Syslog::new();
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    log {} local0\n    option httplog\n\
                 \x20   timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
                 frontend f\n    bind {bind}\n    default_backend b\n\
                 backend b\n    server s {origin}\n",
                sock.display(),
                log.addr()
            )
        };
        let (_e, _hap, targets) = ebb_and_haproxy("badchunk", cfg);
        for (who, a) in targets {
            let mut s = TcpStream::connect(a).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s.write_all(
                b"POST /bad HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
            )
            .unwrap();
            heads
                .recv_timeout(Duration::from_secs(30))
                .expect("the head at the origin");
            let mut out = Vec::new();
            if answer {
                // The answer's start is through before the bad chunk.
                let mut b = [0u8; 4096];
                while !out.ends_with(b"ok\r\n") {
                    let n = s.read_retry(&mut b).unwrap();
                    assert!(n > 0, "{who}: closed");
                    out.extend_from_slice(&b[..n]);
                }
            }
            s.write_all(b"zz\r\nabc\r\n0\r\n\r\n").unwrap();
            let _ = s.read_to_end(&mut out);
            let text = String::from_utf8_lossy(&out);
            assert!(
                text.starts_with(&format!("HTTP/1.1 {want_status} ")),
                "{who}: {text}"
            );
            let line = log.find("the log line", |l| l.contains("/bad"));
            assert_eq!(
                status_and_term(&line),
                (want_status.to_string(), want_term.to_string()),
                "{who}: {line}"
            );
            assert!(line.contains(" f b/s "), "{who}: {line}");
        }
    }
}

/// `redirect ... set-cookie NAME[=VALUE]` and `clear-cookie NAME[=]`
/// (the last of the two wins): a `Set-Cookie` after `Location` and
/// `Cache-Control`, `NAME=VALUE; path=/;` or `NAME; path=/; Max-Age=0;`,
/// as HAProxy 2.6 writes it; an empty value is refused as haproxy does.
/// `redirect` lines run after the `http-request` rules, as HAProxy's.
#[test]
fn redirect_cookies_are_haproxys() {
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 10s\n\
             frontend f\n    bind {bind}\n\
             \x20   redirect location /x set-cookie SEEN=1 if {{ path /a }}\n\
             \x20   redirect prefix /p code 301 clear-cookie USERID= if {{ path /b }}\n\
             \x20   redirect location /y set-cookie A=1 clear-cookie B if {{ path /c }}\n\
             \x20   http-request redirect location /z code 308 set-cookie NOEQ if {{ path /d }}\n\
             \x20   redirect location /late if {{ path /order }}\n\
             \x20   http-request return status 200 if {{ path /order }}\n",
            sock.display()
        )
    };
    let e =
        Ebb::start(&cfg(Path::new("/x"), "BIND").replace("    stats socket /x level admin\n", ""));
    let paths = ["/a", "/b", "/c", "/d", "/order"];
    let run = |a: SocketAddr| get_each(a, &paths);
    let ebb = run(e.addr());
    let cookie = |i: usize| {
        ebb[i]
            .1
            .iter()
            .find_map(|f| f.strip_prefix("set-cookie: "))
            .map(str::to_string)
    };
    assert_eq!(cookie(0).as_deref(), Some("SEEN=1; path=/;"));
    assert_eq!(cookie(1).as_deref(), Some("USERID=; path=/; Max-Age=0;"));
    assert_eq!(cookie(2).as_deref(), Some("B; path=/; Max-Age=0;"));
    assert_eq!(cookie(3).as_deref(), Some("NOEQ; path=/;"));
    // A `redirect` line runs after every `http-request` rule, wherever it
    // stands (HAProxy warns of an `http-request` rule placed after one).
    assert_eq!(ebb[4].0, "HTTP/1.1 200 OK");
    assert_eq!(
        ebb[0].1,
        [
            "content-length: 0",
            "location: /x",
            "cache-control: no-cache",
            "set-cookie: SEEN=1; path=/;",
            "connection: close"
        ]
    );
    let dir = scratch("rdcookie");
    common::assert_refused(
        &dir,
        "e.cfg",
        "defaults\n    mode http\nfrontend f\n    bind 127.0.0.1:0\n    redirect location /x set-cookie \"\"\n",
        "e.cfg:5",
        true,
    );
    if let Some((_h, ha)) = haproxy_beside("rdcookie", cfg) {
        assert_eq!(ebb, run(ha));
    }
}

/// A chunked body broken in the bytes that came with its head: HAProxy
/// 2.6's HTTP/1 layer reads those with the head, so the request is a bad
/// one (its raw 400, `PR--`, no server asked); ebb now reads them so
/// too, where it connected to the server and logged `CR--`.
#[test]
fn a_bad_chunk_with_the_head_is_a_bad_request_as_haproxy() {
    let (origin, heads) = body_origin(false);
    let log = Syslog::new();
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    log {} local0\n    option httplog\n\
             \x20   timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
             frontend f\n    bind {bind}\n    default_backend b\n\
             backend b\n    server s {origin}\n",
            sock.display(),
            log.addr()
        )
    };
    let (_e, _hap, targets) = ebb_and_haproxy("badchunk-early", cfg);
    let mut answers = Vec::new();
    for (who, a) in targets {
        let out = exchange(
            a,
            b"POST /early HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\nabc\r\n0\r\n\r\n",
        );
        answers.push(shape(&out));
        let line = log.find("the log line", |l| {
            l.contains(" PR-- ") || l.contains("/early")
        });
        assert_eq!(
            status_and_term(&line),
            ("400".to_string(), "PR--".to_string()),
            "{who}: {line}"
        );
        // (Both write `<BADREQ>` for the request, as for every head
        // they refuse.)
        assert!(line.trim_end().ends_with("\"<BADREQ>\""), "{who}: {line}");
        assert!(line.contains(" f f/<NOSRV> "), "{who}: {line}");
    }
    assert_eq!(answers[0].0, "HTTP/1.1 400 Bad request");
    if answers.len() == 2 {
        assert_eq!(answers[0], answers[1]);
    }
    assert!(heads.try_recv().is_err(), "a server was asked");
}

/// A redirect's words in any order (HAProxy 2.6 reads `code 301 location
/// X` as `location X code 301`), `ignore-empty` (a location whose format
/// gives nothing skips the rule: mass redirects through a map, as the
/// reg-test `http-rules/map_redirect`), and a standalone `redirect` line
/// whose target is taken as written, `%` included (HAProxy's old-style
/// static rule), where `http-request redirect` evaluates it. Beside
/// haproxy where it is installed.
#[test]
fn redirect_words_in_any_order_and_ignore_empty_as_haproxy() {
    let dir = scratch("rdorder");
    let map = dir.join("r.map");
    std::fs::write(&map, "/old /new\n/gone /there\n").unwrap();
    let map = map.display().to_string();
    let cfg = move |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 10s\n\
             frontend f\n    bind {bind}\n\
             \x20   http-request redirect code 301 location %[path,map_str({map})] ignore-empty\n\
             \x20   http-request redirect code 303 location %[path,map_str({map})] if {{ path /keep }}\n\
             \x20   http-request redirect drop-query code 307 prefix /pre if {{ path /q }}\n\
             \x20   http-request return status 200 if {{ path /stay }}\n\
             \x20   redirect code 308 location /a%20b%[path] if {{ path /static }}\n",
            sock.display()
        )
    };
    let e =
        Ebb::start(&cfg(Path::new("/x"), "BIND").replace("    stats socket /x level admin\n", ""));
    let paths = ["/old", "/gone?x=1", "/stay", "/keep", "/q?a=b", "/static"];
    let run = |a: SocketAddr| get_each(a, &paths);
    let ebb = run(e.addr());
    let location = |i: usize| {
        ebb[i]
            .1
            .iter()
            .find_map(|f| f.strip_prefix("location: "))
            .map(str::to_string)
    };
    assert_eq!(ebb[0].0, "HTTP/1.1 301 Moved Permanently");
    assert_eq!(location(0).as_deref(), Some("/new"));
    assert_eq!(location(1).as_deref(), Some("/there"));
    // No map entry: the rule is skipped, the next ones run.
    assert_eq!(ebb[2].0, "HTTP/1.1 200 OK");
    // Without ignore-empty the rule answers, with an empty location.
    assert_eq!(ebb[3].0, "HTTP/1.1 303 See Other");
    assert_eq!(location(3).as_deref(), Some(""));
    assert_eq!(ebb[4].0, "HTTP/1.1 307 Temporary Redirect");
    assert_eq!(location(4).as_deref(), Some("/pre/q"));
    assert_eq!(location(5).as_deref(), Some("/a%20b%[path]"));
    common::assert_refused(
        &dir,
        "e.cfg",
        "defaults\n    mode http\nfrontend f\n    bind 127.0.0.1:0\n    http-request redirect code 301\n",
        "e.cfg:5",
        true,
    );
    if let Some((_h, ha)) = haproxy_beside("rdorder", cfg) {
        assert_eq!(ebb, run(ha));
    }
}

/// The log line of a request head refused before any request was taken
/// (malformed, a framing HAProxy's HTTP/1 layer refuses, too large, late)
/// is HAProxy 2.6's `<BADREQ>` line: `%r` `<BADREQ>`, `%Tq` and `%TR` -1
/// even after the connection idled (ebb wrote 0, or the idle time), `%B`
/// and `%U` 0 (ebb counted its error page), `PR--` (`cR--` at `timeout
/// http-request`), in the default `option httplog` line as in a
/// `log-format`. Before, ebb wrote the request line it received and the
/// reason. Side by side with haproxy, by syslog capture.
#[test]
fn a_refused_head_is_logged_as_haproxys_badreq_line() {
    let big = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    // (request, idle first, ebb's status, haproxy's status, state)
    let cases: [(&[u8], bool, &str, &str, &str); 5] = [
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n",
            true,
            "400",
            "400",
            "PR--",
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\nabcde",
            false,
            "400",
            "400",
            "PR--",
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            false,
            "422",
            "422",
            "PR--",
        ),
        // ebb answers 431 (RFC 6585) where HAProxy says 400.
        (big.as_bytes(), false, "431", "400", "PR--"),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\n",
            false,
            "408",
            "408",
            "cR--",
        ),
    ];
    let custom = "    log-format \"%r Tq=%Tq TR=%TR B=%B U=%U ST=%ST %tsc\"\n";
    for fmt in ["    option httplog\n", custom] {
        let log = Syslog::new();
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    log {} local0\n{fmt}\
                 \x20   timeout client 10s\n    timeout http-request 1s\n\
                 frontend f\n    bind {bind}\n    http-request return status 200\n",
                sock.display(),
                log.addr()
            )
        };
        let (_e, _hap, targets) = ebb_and_haproxy("badreq-log", cfg);
        for (who, a) in targets {
            for (req, idle, ebb_st, hap_st, tsc) in cases {
                let st = if who == "ebb" { ebb_st } else { hap_st };
                let mut s = TcpStream::connect(a).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                if idle {
                    // Idle first: HAProxy's `%Tq` stays -1 all the same.
                    std::thread::sleep(Duration::from_millis(300));
                }
                let _ = s.write_all(req);
                let mut out = Vec::new();
                let _ = s.read_to_end(&mut out);
                let text = String::from_utf8_lossy(&out);
                assert!(
                    text.starts_with(&format!("HTTP/1.1 {st} ")),
                    "{who}: {text}"
                );
                let line = log.find("the <BADREQ> line", |l| l.contains("<BADREQ>"));
                let line = line.trim_end();
                if fmt == custom {
                    assert!(
                        line.ends_with(&format!("]: <BADREQ> Tq=-1 TR=-1 B=0 U=0 ST={st} {tsc}")),
                        "{who}: {line}"
                    );
                } else {
                    let w: Vec<&str> = line.split_whitespace().collect();
                    let at = w.iter().position(|x| *x == "f/<NOSRV>").unwrap_or(0);
                    assert!(w[at + 1].starts_with("-1/-1/-1/-1/"), "{who}: {line}");
                    assert_eq!(&w[at + 2..at + 6], [st, "0", "-", "-"], "{who}: {line}");
                    assert_eq!(w[at + 6], tsc, "{who}: {line}");
                    assert_eq!(w.last(), Some(&"\"<BADREQ>\""), "{who}: {line}");
                }
            }
        }
    }
}

/// An interactive master CLI client: each command's answer is read up to
/// the text that ends it (a prompt), or to the connection's end.
struct Talk(UnixStream);

impl Talk {
    fn connect(sock: &Path) -> Talk {
        let s = UnixStream::connect(sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Talk(s)
    }

    /// Sends `cmd` (as is) and reads until the answer ends with `end`
    /// (`""`: until the connection's end).
    fn say(&mut self, cmd: &str, end: &str) -> String {
        self.0.write_all(cmd.as_bytes()).unwrap();
        self.until(end)
    }

    fn until(&mut self, end: &str) -> String {
        let mut out = Vec::new();
        let mut b = [0u8; 4096];
        loop {
            if !end.is_empty() && out.ends_with(end.as_bytes()) {
                break;
            }
            match self.0.read_retry(&mut b) {
                Ok(0) => {
                    out.extend_from_slice(b"<EOF>");
                    break;
                }
                Ok(n) => out.extend_from_slice(&b[..n]),
                Err(e) => panic!("{e}: after {}", String::from_utf8_lossy(&out)),
            }
        }
        String::from_utf8(out).unwrap()
    }
}

/// A master's current worker pid, from `show proc`.
fn worker_pid(sock: &Path) -> String {
    let show = mcli(sock, "show proc");
    show.lines()
        .skip_while(|l| !l.starts_with("# workers"))
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{show}"))
        .to_string()
}

/// haproxy's master (`haproxy -W -S SOCK`) on `cfg`, stopped when dropped.
struct HapMaster(std::process::Child);

impl Drop for HapMaster {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

fn haproxy_master(name: &str, cfg: &str, s_arg: &str) -> Option<(HapMaster, std::path::PathBuf)> {
    if !common::have("haproxy") {
        println!("haproxy is not installed: ebb is checked on its own");
        return None;
    }
    let d = scratch(name);
    std::fs::write(d.join("h.cfg"), cfg).unwrap();
    let sock = d.join("hm.sock");
    let child = std::process::Command::new("haproxy")
        .arg("-W")
        .arg("-S")
        .arg(format!("{}{s_arg}", sock.display()))
        .arg("-f")
        .arg(d.join("h.cfg"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let h = HapMaster(child);
    wait_until("haproxy's master CLI and its worker", || {
        UnixStream::connect(&sock).is_ok() && mcli(&sock, "show proc").contains("worker")
    });
    Some((h, sock))
}

/// The steps of an interactive session on a master CLI and the answers
/// haproxy 2.6 gives (`PID` the current worker's pid).
const PROMPT_SESSION: &[(&str, &str)] = &[
    ("prompt\n", "master> "),
    ("show cli level\n", "admin\n\nmaster> "),
    ("show cli sockets\n", "\nmaster> "),
    ("@1\n", "PID> "),
    ("show cli level\n", "admin\n\nPID> "),
    ("@\n", "master> "),
    ("experimental-mode on\n", "master(x)> "),
    (
        "@1 experimental-mode\n",
        "experimental-mode is ON\n\nmaster(x)> ",
    ),
    ("expert-mode on\n", "master(xe)> "),
    ("@1 expert-mode\n", "expert-mode is ON\n\nmaster(xe)> "),
    ("expert-mode\n", "master(x)> "),
    ("experimental-mode off\n", "master> "),
    // mcli-debug-mode: in the prompt, never passed on to a worker (which
    // would answer an unknown command).
    ("mcli-debug-mode on\n", "master(d)> "),
    ("@1 show cli level\n", "admin\n\nmaster(d)> "),
    ("mcli-debug-mode\n", "master> "),
    ("experimental-mode on\n", "master(x)> "),
    // The mode stays on below admin, and is refused with each command.
    ("operator\n", "master(x)> "),
    (
        "show cli level;@1 show cli level\n",
        "Permission denied\noperator\n\nmaster(x)> Permission denied\noperator\n\nmaster(x)> ",
    ),
    (
        "@!PID show cli level\n",
        "Permission denied\noperator\n\nmaster(x)> ",
    ),
    (
        "@1 experimental-mode on\n",
        "Permission denied\nPermission denied\n\nmaster(x)> ",
    ),
    ("user\n", "master(x)> "),
    (
        "reload\n",
        "Permission denied\nPermission denied\n\nmaster(x)> ",
    ),
    ("prompt\n", ""),
    ("show cli level\n", "Permission denied\nuser\n\n"),
    ("operator\n", "Permission denied!\n<EOF>"),
];

/// Runs [`PROMPT_SESSION`] on a master CLI: the answers, `PID` for the
/// worker's pid.
fn prompt_session(sock: &Path) -> Vec<String> {
    let pid = worker_pid(sock);
    let mut t = Talk::connect(sock);
    PROMPT_SESSION
        .iter()
        .map(|(cmd, want)| {
            let cmd = cmd.replace("PID", &pid);
            let want = want.replace("PID", &pid);
            t.0.write_all(cmd.as_bytes()).unwrap();
            if want.is_empty() {
                // Nothing comes (the next answer would show it).
                return String::new();
            }
            // `""`: to the connection's end.
            let end = if want.ends_with("<EOF>") { "" } else { &want };
            t.until(end).replace(&pid, "PID")
        })
        .collect()
}

/// The master CLI's interactive mode (`prompt`), the default target (a
/// prefix alone), the session's levels (`operator`, `user`, passed on to
/// the worker's commands), `experimental-mode` in the prompt and passed
/// on, `reload` refused below operator, and `operator` refused at level
/// user (the connection ends), answer for answer as haproxy 2.6's master
/// CLI. Before, ebb's master answered one line per connection and knew
/// none of these words.
#[test]
fn master_cli_prompt_mode_as_haproxy() {
    let want: Vec<String> = PROMPT_SESSION.iter().map(|x| x.1.to_string()).collect();
    let (_e, sock) = master("mcli-prompt");
    assert_eq!(prompt_session(&sock), want);
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 5s\n\
         frontend f\n    bind 127.0.0.1:{}\n    http-request return status 200\n",
        common::free_port()
    );
    let help = mcli(&sock, "help");
    assert!(
        help.starts_with("The following commands are valid at this level:\n  @!<pid>  ")
            && help.ends_with("  quit                                    : disconnect\n\n"),
        "{help}"
    );
    if let Some((_h, hsock)) = haproxy_master("mcli-prompt-h", &cfg, "") {
        assert_eq!(prompt_session(&hsock), want);
        // HAProxy's list, byte for byte.
        assert_eq!(mcli(&hsock, "help"), help);
    }
}

/// Commands the master does not know, and `help` with words, to ask
/// both masters.
const MASTER_UNKNOWN: &[&str] = &[
    "foo",
    "show foo",
    "show",
    "",
    "help show",
    "help foo",
    "help help",
    "show cli",
    "shwo proc",
    "relaod",
    "oprator",
    "x y z w v u",
    "show cli levels",
    "sh v",
];

/// The master's answer to a command it does not know is HAProxy 2.6's
/// usage message: the commands whose first words match, or the closest
/// ones past those (`foo` gets five), then help, prompt and quit; and a
/// command's words after those that name it are not looked at (`show
/// version x` is `show version`). Before, ebb listed every command for
/// any unknown one, and answered `show version x` as unknown.
#[test]
fn master_cli_unknown_commands_as_haproxy() {
    let (_e, sock) = master("mcli-unknown");
    let ours: Vec<String> = MASTER_UNKNOWN.iter().map(|c| mcli(&sock, c)).collect();
    assert_eq!(
        ours[0],
        "Unknown command, but maybe one of the following ones is a better match:
  @!<pid>                                 : send a command to the <pid> process
  @master                                 : send a command to the master process
  operator                                : lower the level of the current CLI session to operator
  reload                                  : reload haproxy
  user                                    : lower the level of the current CLI session to user
  help [<command>]                        : list matching or all commands
  prompt                                  : toggle interactive mode with prompt
  quit                                    : disconnect

"
    );
    let version = mcli(&sock, "show version x");
    assert_eq!(
        version,
        format!("{}\n\n", mcli(&sock, "show version").trim_end())
    );
    assert!(!version.contains("Unknown"), "{version}");
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 5s\n\
         frontend f\n    bind 127.0.0.1:{}\n    http-request return status 200\n",
        common::free_port()
    );
    if let Some((_h, hsock)) = haproxy_master("mcli-unknown-h", &cfg, "") {
        let theirs: Vec<String> = MASTER_UNKNOWN.iter().map(|c| mcli(&hsock, c)).collect();
        for (i, c) in MASTER_UNKNOWN.iter().enumerate() {
            assert_eq!(ours[i], theirs[i], "{c:?}");
        }
        assert!(!mcli(&hsock, "show version x").contains("Unknown"));
    }
}

/// The session's words sent to the master with a prefix (`@master
/// operator`), one session, and what haproxy 2.6's master answers: each
/// runs for that command alone (the session's level and modes unchanged),
/// `experimental-mode` alone names the session's mode, and below admin
/// each is refused. Before, ebb answered each as an unknown command.
const PREFIXED_WORDS: &[(&str, &str)] = &[
    ("prompt", "master> "),
    ("@master mcli-debug-mode on", "\nmaster> "),
    ("@master experimental-mode on", "\nmaster> "),
    ("@0 operator", "\nmaster> "),
    ("show cli level", "admin\n\nmaster> "),
    (
        "@master mcli-debug-mode",
        "mcli-debug-mode is OFF\n\nmaster> ",
    ),
    ("experimental-mode on", "master(x)> "),
    (
        "@master experimental-mode",
        "experimental-mode is ON\n\nmaster(x)> ",
    ),
    ("operator", "master(x)> "),
    (
        "@master experimental-mode",
        "Permission denied\nPermission denied\n\nmaster(x)> ",
    ),
    ("@master user", "Permission denied\n\nmaster(x)> "),
];

/// [`PREFIXED_WORDS`], on ebb's master and on haproxy's.
#[test]
fn master_cli_session_words_with_a_prefix_as_haproxy() {
    let cmds: String = PREFIXED_WORDS
        .iter()
        .map(|(c, _)| format!("{c}\n"))
        .collect();
    let want: String = PREFIXED_WORDS.iter().map(|(_, a)| *a).collect();
    let (_e, sock) = master("mcli-prefixed");
    assert_eq!(mcli(&sock, cmds.trim_end()), want);
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 5s\n\
         frontend f\n    bind 127.0.0.1:{}\n    http-request return status 200\n",
        common::free_port()
    );
    if let Some((_h, hsock)) = haproxy_master("mcli-prefixed-h", &cfg, "") {
        assert_eq!(mcli(&hsock, cmds.trim_end()), want);
    }
}

/// The master's open descriptors (`/proc/PID/fd`).
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// `@1 show events RING -w` through the master CLI: each message comes
/// as the worker logs it, and the watch (the master's connection to the
/// worker) ends when the client closes. A command with a payload (`<<`)
/// goes to the worker with its lines, `+ ` after each in interactive mode
/// (haproxy 2.6's transcript). Before, the master shut its side after the
/// command, so the worker ended the watch at once, and it read one line.
#[test]
fn master_cli_relays_a_watch_as_it_comes_and_payloads() {
    let dir = scratch("mcli-watch");
    let port = common::free_port();
    let map = dir.join("m.map");
    std::fs::write(&map, "").unwrap();
    let (e, sock) = master_on(
        &dir,
        &format!(
            "ring r1\n    size 32768\n    format raw\n\
             defaults\n    mode http\n    timeout client 5s\n\
             frontend f\n    bind 127.0.0.1:{port}\n    log ring@r1 local0\n    log-format \"hit %HP\"\n\
             \x20   http-request set-header x %[path,map({})]\n    http-request return status 200\n",
            map.display()
        ),
    );
    let a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_until("the worker", || std::net::TcpStream::connect(a).is_ok());
    let before = fd_count(e.pid());
    let mut t = Talk::connect(&sock);
    // The messages already there come first: no need to wait for the
    // watch to be on.
    t.0.write_all(b"@1 show events r1 -w\n").unwrap();
    assert_eq!(common::get(a, "/one").status, 200);
    // (The readiness probe above logged a bad request first.)
    assert!(t.until("hit /one\n").ends_with("hit /one\n"));
    assert_eq!(common::get(a, "/two").status, 200);
    assert_eq!(t.until("hit /two\n"), "hit /two\n");
    drop(t);
    wait_until("the watch's end", || fd_count(e.pid()) <= before);

    let mut t = Talk::connect(&sock);
    let m = map.display();
    let steps = [
        ("prompt\n".to_string(), "master> "),
        (format!("@1 add map {m} <<\n"), "+ "),
        ("/a 1\n".to_string(), "+ "),
        ("/b 2\n".to_string(), "+ "),
        ("\n".to_string(), "\nmaster> "),
    ];
    for (cmd, want) in steps {
        assert_eq!(t.say(&cmd, want), want, "{cmd}");
    }
    let show = t.say(&format!("@1 show map {m}\n"), "\n\nmaster> ");
    let entries: Vec<&str> = show
        .lines()
        .filter(|l| l.starts_with("0x"))
        .filter_map(|l| l.split_once(' ').map(|x| x.1))
        .collect();
    assert_eq!(entries, ["/a 1", "/b 2"], "{show}");
}

/// The master CLI's `-S` options: `mode`, `uid`/`gid` (or `user`/`group`)
/// on the socket file, `level` for the session (`user`: `reload` and
/// `operator` refused, the worker's commands run at that level), and the
/// wrong ones refused at start with haproxy 2.6's words. Before, every
/// option but `mode` was refused.
#[test]
fn master_cli_socket_options() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = scratch("mcli-opts");
    let port = common::free_port();
    let cfg = dir.join("ebb.cfg");
    std::fs::write(
        &cfg,
        format!(
            "defaults\n    mode http\n    timeout client 5s\n\
             frontend f\n    bind 127.0.0.1:{port}\n    http-request return status 200\n"
        ),
    )
    .unwrap();
    let sock = dir.join("master.sock");
    // Root (as the tests run here) may give the file to anyone; another
    // user only to itself.
    let (uid, gid) = match std::fs::metadata(&dir).unwrap().uid() {
        0 => (1, 2),
        u => (u, std::fs::metadata(&dir).unwrap().gid()),
    };
    let arg = format!(
        "{},mode,600,,level,user,uid,{uid},gid,{gid},expose-fd,listeners",
        sock.display()
    );
    let _e = Ebb::start_args(
        &["-W", "-S", &arg, "-f", cfg.to_str().unwrap()],
        dir.clone(),
    );
    let m = std::fs::metadata(&sock).unwrap();
    assert_eq!(
        (m.permissions().mode() & 0o7777, m.uid(), m.gid()),
        (0o600, uid, gid)
    );
    assert_eq!(mcli(&sock, "show cli level"), "user\n\n");
    assert_eq!(mcli(&sock, "@1 show cli level"), "user\n\n");
    assert_eq!(mcli(&sock, "reload"), "Permission denied\n\n");
    assert_eq!(mcli(&sock, "operator"), "Permission denied!\n");
    assert_eq!(mcli(&sock, "@1 set weight b/s 1"), "Permission denied\n\n");
    for (opt, err) in [
        (
            ",level,foo",
            "'SOCK level' : ''level' only supports 'user', 'operator', and 'admin' (got 'foo')'",
        ),
        (",mode,600,level", "'SOCK mode' : ''level' : missing level'"),
        (
            ",mode,999",
            "'SOCK mode' : ''mode' : missing or invalid mode '999' (octal integer expected)'",
        ),
        (
            ",expose-fd,foo",
            "'SOCK expose-fd' : ''expose-fd' only supports 'listeners' (got 'foo')'",
        ),
        (",foo", "'SOCK foo' : unknown keyword 'foo'."),
        (
            ",user,nosuchuser",
            "'SOCK user' : ''user' : unknown user name 'nosuchuser''",
        ),
    ] {
        let bad = dir.join("bad.sock");
        let (code, _, out) = run_ebb(
            &[
                "-W",
                "-S",
                &format!("{}{opt}", bad.display()),
                "-f",
                cfg.to_str().unwrap(),
            ],
            &dir,
        );
        let err = err.replace("SOCK", &bad.display().to_string());
        assert_eq!(code, 1, "{opt}: {out}");
        assert!(out.contains(&err), "{opt}: {out}");
    }
}

/// A client that sends commands and never reads their answers is closed
/// 5 s after the master last wrote to it, outside interactive mode; the
/// master answers others meanwhile.
#[test]
fn a_master_cli_client_that_never_reads_is_closed() {
    let (_e, sock) = master("mcli-noread");
    let mut s = UnixStream::connect(&sock).unwrap();
    // Some 8 MiB of answers: far more than the socket buffers hold.
    let many = "help\n".repeat(8 * 1024);
    s.write_all(many.as_bytes()).unwrap();
    assert!(mcli(&sock, "show proc").contains("# workers"));
    // Once the master has closed it, a write fails (reading would take
    // answers, which is not what this client does).
    s.set_nonblocking(true).unwrap();
    wait_until(
        "the client closed",
        || matches!(s.write(b"\n"), Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe),
    );
}
