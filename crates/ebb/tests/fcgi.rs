//! FastCGI toward servers (`use-fcgi-app`, `server ... proto fcgi`,
//! `mux::fcgi`) with real peers: php-fpm (Debian's `php-fpm`, started
//! here on a UNIX socket in a scratch directory, in the foreground) and
//! `fcgiapp.py`, a FastCGI responder whose query string chooses what it
//! does (its answer lists the PARAMS it got, in order). Each case runs
//! beside HAProxy 2.6 where the behaviour is observable: the PARAMS, the
//! answers and their status lines, the refusals at start.
//!
//! Before `mux::fcgi`, `use-fcgi-app` and `proto fcgi` were refused at
//! start, so every test here failed at `Ebb::start`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// `fcgiapp.py` running: its address (`127.0.0.1:PORT`, or a UNIX socket
/// path) and the file its records are logged to.
struct App {
    _p: Proc,
    addr: String,
    log: PathBuf,
}

impl App {
    /// Started with `args` (`--max-reqs N`, `--mpxs 0|1`, `--unix PATH`).
    fn start(name: &str, args: &[&str]) -> App {
        let d = scratch(name);
        let log = d.join("records.log");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fcgiapp.py");
        let mut child = Command::new(PY)
            .arg(script)
            .arg("--log")
            .arg(&log)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let addr = match line.trim().strip_prefix("port ") {
            Some(p) => format!("127.0.0.1:{p}"),
            None => {
                let i = args.iter().position(|a| *a == "--unix").expect("a port");
                args[i + 1].to_string()
            }
        };
        App {
            _p: Proc(child),
            addr,
            log,
        }
    }

    /// The records logged so far, one line each.
    fn records(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// The `defaults` both proxies run with.
const DEFAULTS: &str = "defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n";

/// ebb on `cfg` (a frontend `fe` on BIND is added), and HAProxy 2.6 on
/// the same beside it (`None` when it is not installed).
fn both(name: &str, cfg: &str) -> (Ebb, Option<(Hap, SocketAddr)>) {
    let fe = "frontend fe\n    bind BIND\n    default_backend be\n";
    let e = Ebb::start(&format!("{DEFAULTS}{fe}{cfg}"));
    let port = free_port();
    let hfe = fe.replace("BIND", &format!("127.0.0.1:{port}"));
    let h = haproxy_with(name, &format!("{DEFAULTS}{hfe}{cfg}"))
        .map(|h| (h, SocketAddr::from(([127, 0, 0, 1], port))));
    (e, h)
}

/// One request (raw bytes) on a new connection; the response.
fn ask(a: SocketAddr, req: &str) -> Resp {
    let mut c = Client::connect(a);
    c.send(req.as_bytes());
    c.read_resp_opt(req.starts_with("HEAD "))
        .unwrap_or_else(|| panic!("no response to {req:?}"))
}

fn get_q(a: SocketAddr, target: &str) -> Resp {
    ask(
        a,
        &format!("GET {target} HTTP/1.1\r\nHost: fcgi.test\r\nConnection: close\r\n\r\n"),
    )
}

/// The PARAMS of an answer of `fcgiapp.py`, those that differ between
/// the two proxies by nature (ports, the software's name) out.
fn params(r: &Resp) -> Vec<String> {
    r.text()
        .lines()
        .filter(|l| {
            !["REMOTE_PORT=", "SERVER_PORT=", "SERVER_SOFTWARE="]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .map(str::to_string)
        .collect()
}

/// An application that exercises the rules: `set-param` with and
/// without conditions, `pass-header`, `path-info`, `index`.
fn app_section(docroot: &str) -> String {
    format!(
        "fcgi-app app\n    docroot {docroot}\n    index index.php\n\
         \x20   path-info ^(/.+\\.php)(/.*)?$\n\
         \x20   acl pass req.hdr(x-pass) -m found\n\
         \x20   set-param MY.Param %[req.hdr(x-a)]\n\
         \x20   set-param my_param overridden if {{ req.hdr(x-b) -m found }}\n\
         \x20   set-param REQUEST_METHOD PUTX\n\
         \x20   set-param DOCUMENT_ROOT /elsewhere if {{ path_beg /other }}\n\
         \x20   pass-header Authorization if pass\n\
         \x20   pass-header X-Not-Hidden\n"
    )
}

/// The PARAMS HAProxy sends are the ones ebb sends, in the same order,
/// for requests that walk every rule: fields in order (hidden ones out),
/// `set-param` values in name order (conditions, the last rule of a name,
/// empty values, the implicit REMOTE_USER and AUTH_TYPE), the CGI/1.1
/// variables (path-info's captures, the index, the query string, a
/// replaced DOCUMENT_ROOT, a chunked body's length), HTTP/1.0.
#[test]
fn params_are_haproxys() {
    let app = App::start("fcgi-params", &[]);
    let cfg = format!(
        "backend be\n    use-fcgi-app app\n    http-send-name-header X-Srv\n\
         \x20   http-request set-header X-Doc %[fcgi.docroot]/%[fcgi.index]\n\
         \x20   server s1 {} proto fcgi\n{}",
        app.addr,
        app_section("/var/www")
    );
    let (e, h) = both("fcgi-params", &cfg);
    let reqs = [
        "GET /blog/index.php/a%20b/c?x=1&y=2 HTTP/1.1\r\nHost: fcgi.test\r\nX-A: hello\r\nAuthorization: Basic dXNlcjpwYXNz\r\nTE: trailers\r\nX-Weird_Name: dropped\r\nConnection: close\r\n\r\n",
        "GET /dir/?q HTTP/1.1\r\nHost: fcgi.test\r\nX-A: a\r\nX-B: b\r\nX-Pass: 1\r\nAuthorization: Bearer tok\r\nX-Not-Hidden: 1\r\nConnection: close\r\n\r\n",
        "POST /other/x.php HTTP/1.1\r\nHost: fcgi.test\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        "POST /c.php HTTP/1.1\r\nHost: fcgi.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        "GET /old.php HTTP/1.0\r\n\r\n",
        "GET /no-script/ HTTP/1.1\r\nHost: fcgi.test\r\nKeep-Alive: 5\r\nProxy: x\r\nConnection: close\r\n\r\n",
    ];
    for req in reqs {
        let r = ask(e.addr(), req);
        assert_eq!(r.status, 200, "{req:?}: {}", r.text());
        let mine = params(&r);
        let host = "HTTP_HOST=fcgi.test".to_string();
        assert!(
            req.contains("HTTP/1.0") || mine.contains(&host),
            "{req:?}: {mine:?}"
        );
        if let Some((_, a)) = &h {
            let theirs = params(&ask(*a, req));
            // (HAProxy's SERVER_NAME without `Host` is the address the
            // client reached, the same here.)
            assert_eq!(mine, theirs, "{req:?}");
        }
    }
    // What the first request's parameters are, whatever HAProxy says.
    let r = ask(e.addr(), reqs[0]);
    let t = r.text();
    for want in [
        "SCRIPT_NAME=/blog/index.php\n",
        "PATH_INFO=/a b/c\n",
        "PATH_TRANSLATED=/var/www/a b/c\n",
        "QUERY_STRING=x=1&y=2\n",
        "REMOTE_USER=user\n",
        "AUTH_TYPE=Basic\n",
        "MY_PARAM=hello\n",
        "HTTP_X_SRV=s1\n",
        "HTTP_X_DOC=/var/www/index.php\n",
        concat!("SERVER_SOFTWARE=ebb ", env!("CARGO_PKG_VERSION"), "\n"),
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }
    for absent in [
        "HTTP_AUTHORIZATION",
        "HTTP_TE",
        "HTTP_CONNECTION",
        "HTTP_X_WEIRD",
    ] {
        assert!(!t.contains(absent), "{absent}: {t}");
    }
}

/// How answers come back, beside HAProxy: the status from `Status` and
/// `Location` lines (the last one wins, an empty reason stays empty), a
/// body in records of any size and with padding, a length the answer
/// gives, a slow body (chunked), records of another request id skipped,
/// the application's own fields; STDERR ignored without `log-stderr`.
#[test]
fn answers_are_haproxys() {
    let app = App::start("fcgi-answers", &[]);
    let cfg = format!(
        "backend be\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /var/www\n",
        app.addr
    );
    let (e, h) = both("fcgi-answers", &cfg);
    let cases: &[(&str, u16, &str)] = &[
        ("/a.php?status=404", 404, ""),
        ("/a.php?status=404+Not+Found", 404, "Not Found"),
        ("/a.php?location=/x", 302, "Moved Temporarily"),
        ("/a.php?status=301+M&location=/y", 302, "Moved Temporarily"),
        ("/a.php?header=Location:/y&header=Status:301+M", 301, "M"),
        ("/a.php?big=100000&chunk=7000&pad=7", 200, "OK"),
        ("/a.php?big=5&length=1", 200, "OK"),
        ("/a.php?big=30000&pause=200", 200, "OK"),
        ("/a.php?noend=1&big=10", 200, "OK"),
        ("/a.php?bad=id&big=3", 200, "OK"),
        ("/a.php?header=X-Extra:1&header=Set-Cookie:a%3Db", 200, "OK"),
    ];
    for (target, status, reason) in cases {
        let line = |a: SocketAddr| {
            let mut c = Client::connect(a);
            c.send(
                format!("GET {target} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").as_bytes(),
            );
            let mut raw = Vec::new();
            let _ = std::io::Read::read_to_end(&mut c.s, &mut raw);
            let text = String::from_utf8_lossy(&raw).into_owned();
            let first = text.lines().next().unwrap_or("").to_string();
            (first, raw)
        };
        let (first, _) = line(e.addr());
        assert_eq!(first, format!("HTTP/1.1 {status} {reason}"), "{target}");
        let r = get_q(e.addr(), target);
        assert_eq!(r.status, *status, "{target}");
        assert!(r.header("status").is_none(), "{target}: {:?}", r.headers);
        assert!(r.header("date").is_some(), "{target}: {:?}", r.headers);
        if let Some((_, a)) = &h {
            let (theirs, _) = line(*a);
            assert_eq!(first, theirs, "{target}: beside HAProxy");
            let hr = get_q(*a, target);
            assert_eq!(params(&r), params(&hr), "{target}: the body beside HAProxy");
            for n in ["location", "x-extra", "set-cookie", "content-type"] {
                assert_eq!(r.header(n), hr.header(n), "{target}: {n}");
            }
        }
    }
    let r = get_q(e.addr(), "/a.php?big=100000&chunk=7000&pad=7");
    assert_eq!(r.body.len(), 100_000);
    assert!(
        r.body.starts_with(b"abcdefghijklmnopqrstuvwxyzabc"),
        "{:?}",
        String::from_utf8_lossy(&r.body[..60.min(r.body.len())])
    );
    // STDERR without `log-stderr`: dropped (not beside HAProxy 2.6.12,
    // which crashes on such a record alone in its buffer: its bug
    // 665703d45).
    let r = get_q(e.addr(), "/a.php?stderr=ignored&big=3");
    assert_eq!((r.status, r.text().as_str()), (200, "abc"));
}

/// What ebb refuses of an application's answer, and of a request: the
/// status HAProxy answers where both answer the same (lines that do not
/// parse, a close before the answer: 502; a path that does not decode,
/// `OPTIONS *`: 500; a chunked body past a buffer: 400); where HAProxy
/// passes a broken status line on (`Status: abc`, `Status: 600`) or waits
/// for `timeout server` (a record of another version, an END_REQUEST
/// with no answer), ebb answers 502 at once.
#[test]
fn broken_answers_and_requests() {
    let app = App::start("fcgi-broken", &[]);
    let cfg = format!(
        "backend be\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /var/www\n    path-info ^(/.+\\.php)(/.*)?$\n",
        app.addr
    );
    let (e, h) = both("fcgi-broken", &cfg);
    let big = format!(
        "POST /a.php HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4650\r\n{}\r\n0\r\n\r\n",
        "x".repeat(0x4650)
    );
    let same: &[(&str, u16)] = &[
        (
            "GET /a.php?bad=lines HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            502,
        ),
        (
            "GET /a.php?bad=close HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            502,
        ),
        (
            "GET /a.php?status=103 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            502,
        ),
        (
            "OPTIONS * HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            500,
        ),
        (
            "GET /a%2.php HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            500,
        ),
        (
            "GET /a%0A.php HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            500,
        ),
        (&big, 400),
    ];
    for (req, status) in same {
        let r = ask(e.addr(), req);
        assert_eq!(r.status, *status, "{:?}", &req[..40.min(req.len())]);
        if let Some((_, a)) = &h {
            // (HAProxy forwards the 103 before its 502.)
            let mut c = Client::connect(*a);
            c.send(req.as_bytes());
            let mut hr = c.read_resp();
            if hr.status == 103 {
                hr = c.read_resp();
            }
            assert_eq!(
                hr.status,
                *status,
                "HAProxy: {:?}",
                &req[..40.min(req.len())]
            );
        }
    }
    for q in [
        "status=abc",
        "status=600",
        "bad=version",
        "proto=2",
        "proto=3",
    ] {
        let r = get_q(e.addr(), &format!("/a.php?{q}"));
        assert_eq!(r.status, 502, "{q}");
    }
    // A short END_REQUEST after the answer began: 502 when its head had
    // not gone on yet, else the answer is cut (HAProxy's too, depending
    // on how the records arrive).
    let mut c = Client::connect(e.addr());
    c.send(b"GET /a.php?bad=endshort HTTP/1.1\r\nHost: h\r\n\r\n");
    let r = c.read_resp_opt(false).expect("a head");
    assert!(r.status == 502 || r.broken.is_some(), "{r:?}");
    // A cut body: the client's answer is cut too.
    let mut c = Client::connect(e.addr());
    c.send(b"GET /a.php?bad=half&big=100000 HTTP/1.1\r\nHost: h\r\n\r\n");
    let r = c.read_resp_opt(false).expect("a head");
    assert_eq!(r.status, 200);
    assert!(r.broken.is_some(), "a body cut short");
    // ebb still serves.
    assert_eq!(get_q(e.addr(), "/a.php").status, 200);
}

/// Large bodies both ways: a 5 MB upload streamed as STDIN (its md5 as
/// the application read it), a 2 MB answer in small records.
#[test]
fn large_bodies_stream_both_ways() {
    let app = App::start("fcgi-large", &[]);
    let e = Ebb::start(&format!(
        "{DEFAULTS}frontend fe\n    bind BIND\n    default_backend be\nbackend be\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n",
        app.addr
    ));
    let body: Vec<u8> = (0..5_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut c = Client::connect(e.addr());
    c.send(
        format!(
            "POST /up.php?echo=1 HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    c.s.write_all(&body).unwrap();
    let r = c.read_resp();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), body.len());
    assert!(r.body == body, "the body came back changed");
    let r = get_q(e.addr(), "/big.php?big=2000000&chunk=1000");
    assert_eq!(r.body.len(), 2_000_000);
    // Upload records are at most 65535 bytes.
    let stdin_lens: Vec<usize> = app
        .records()
        .iter()
        .filter(|l| l.contains(" type=5 "))
        .filter_map(|l| l.split(" len=").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert!(stdin_lens.iter().all(|&n| n <= 65535), "{stdin_lens:?}");
    assert_eq!(stdin_lens.iter().sum::<usize>(), body.len());
}

/// The ids and connections of `records` (`conn=C type=1 id=I ...`): the
/// BEGIN_REQUEST records' (connection, id, flags).
fn begins(records: &[String]) -> Vec<(u32, u32, String)> {
    records
        .iter()
        .filter(|l| l.contains(" type=1 "))
        .filter_map(|l| {
            let f = |k: &str| l.split(&format!("{k}=")).nth(1)?.split(' ').next();
            Some((
                f("conn")?.parse().ok()?,
                f("id")?.parse().ok()?,
                f("flags")?.to_string(),
            ))
        })
        .collect()
}

/// One request at a time per connection by default, on a connection kept
/// (FCGI_KEEP_CONN) and reused, ids odd from 1; `no option keep-conn`: a
/// connection per request, which the application closes. (One thread:
/// each thread has its own connections.)
#[test]
fn keep_conn_and_ids() {
    let app = App::start("fcgi-keep", &[]);
    let e = Ebb::start(&format!(
        "global\n    nbthread 1\n{DEFAULTS}frontend fe\n    bind BIND\n    default_backend be\nbackend be\n    http-reuse always\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n",
        app.addr
    ));
    for _ in 0..3 {
        assert_eq!(get_q(e.addr(), "/a.php").status, 200);
    }
    wait_until("three requests", || begins(&app.records()).len() == 3);
    let b = begins(&app.records());
    assert_eq!(
        b,
        [(1, 1, "1".into()), (1, 3, "1".into()), (1, 5, "1".into())]
    );

    let app = App::start("fcgi-nokeep", &[]);
    let e = Ebb::start(&format!(
        "{DEFAULTS}frontend fe\n    bind BIND\n    default_backend be\nbackend be\n    http-reuse always\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n    no option keep-conn\n",
        app.addr
    ));
    for _ in 0..3 {
        assert_eq!(get_q(e.addr(), "/a.php").status, 200);
    }
    wait_until("three closes", || {
        app.records()
            .iter()
            .filter(|l| l.ends_with("closed"))
            .count()
            == 3
    });
    let b = begins(&app.records());
    assert_eq!(
        b,
        [(1, 1, "0".into()), (2, 1, "0".into()), (3, 1, "0".into())]
    );
}

/// `option mpxs-conns` with `max-reqs`: concurrent requests share a
/// connection, each with its own id; `option get-values` takes what the
/// application says (GET_VALUES before any request), here no
/// multiplexing: a request at a time.
#[test]
fn multiplexing_and_get_values() {
    let app = App::start("fcgi-mpxs", &[]);
    let e = Ebb::start(&format!(
        "global\n    nbthread 1\n{DEFAULTS}frontend fe\n    bind BIND\n    default_backend be\nbackend be\n    http-reuse always\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n    option mpxs-conns\n    option max-reqs 4\n",
        app.addr
    ));
    let a = e.addr();
    // One first, so that the others find its connection.
    assert_eq!(get_q(a, "/a.php").status, 200);
    let threads: Vec<_> = (0..4)
        .map(|i| std::thread::spawn(move || get_q(a, &format!("/a.php?delay=300&n={i}"))))
        .collect();
    for t in threads {
        let r = t.join().unwrap();
        assert_eq!(r.status, 200);
    }
    let b = begins(&app.records());
    assert_eq!(b.len(), 5);
    assert!(b.iter().all(|(c, _, _)| *c == 1), "one connection: {b:?}");
    let mut ids: Vec<u32> = b.iter().map(|(_, i, _)| *i).collect();
    ids.sort();
    ids.dedup();
    assert!(ids.len() >= 2, "requests at once on the connection: {b:?}");
    assert!(ids.iter().all(|i| i % 2 == 1), "odd ids: {b:?}");

    // get-values: the application says it does not multiplex.
    let app = App::start("fcgi-values", &["--max-reqs", "10", "--mpxs", "0"]);
    let e = Ebb::start(&format!(
        "global\n    nbthread 1\n{DEFAULTS}frontend fe\n    bind BIND\n    default_backend be\nbackend be\n    http-reuse always\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n    option get-values\n    option max-reqs 8\n",
        app.addr
    ));
    let a = e.addr();
    let threads: Vec<_> = (0..3)
        .map(|i| std::thread::spawn(move || get_q(a, &format!("/a.php?delay=200&n={i}"))))
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().status, 200);
    }
    let recs = app.records();
    let first = recs
        .iter()
        .position(|l| l.contains(" type=9 "))
        .expect("GET_VALUES");
    let begin = recs.iter().position(|l| l.contains(" type=1 ")).unwrap();
    assert!(first < begin, "GET_VALUES first: {recs:?}");
    // No two requests at once on a connection.
    let mut open: std::collections::HashMap<u32, i32> = Default::default();
    for l in &recs {
        let conn: u32 = l
            .split("conn=")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if l.contains(" type=1 ") {
            let n = open.entry(conn).or_default();
            *n += 1;
            assert!(*n <= 1, "two requests at once: {recs:?}");
        } else if l.contains(" type=5 ") && l.contains(" len=0 ") {
            *open.entry(conn).or_default() -= 1;
        }
    }
}

/// A client that leaves before its answer: the request is aborted
/// (ABORT_REQUEST); the connection goes on serving others.
#[test]
fn a_client_that_leaves_aborts_its_request() {
    let app = App::start("fcgi-abort", &[]);
    let e = Ebb::start(&format!(
        "{DEFAULTS}    option abortonclose\nfrontend fe\n    bind BIND\n    default_backend be\nbackend be\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n",
        app.addr
    ));
    let mut c = Client::connect(e.addr());
    c.send(b"GET /a.php?delay=2000 HTTP/1.1\r\nHost: h\r\n\r\n");
    wait_until("the request begun", || {
        app.records().iter().any(|l| l.contains(" type=5 "))
    });
    drop(c);
    wait_until("ABORT_REQUEST", || {
        app.records().iter().any(|l| l.contains(" type=2 "))
    });
    assert_eq!(get_q(e.addr(), "/a.php").status, 200);
}

/// The application's STDERR goes to `log-stderr` targets, one line per
/// record, tagged with the application's name at level `err`, its control
/// bytes written `.` (HAProxy's line is the same but for those bytes, in
/// `php_fpm_beside_haproxy`; HAProxy 2.6.12 crashes on a STDERR record
/// that comes alone in its buffer, its bug 665703d45, fixed in 2.9).
#[test]
fn stderr_goes_to_log_stderr() {
    let app = App::start("fcgi-stderr", &[]);
    let log = Syslog::new();
    let cfg = format!(
        "backend be\n    use-fcgi-app php\n    server s1 {} proto fcgi\nfcgi-app php\n    docroot /d\n    log-stderr {} local0\n",
        app.addr,
        log.addr()
    );
    let e = Ebb::start(&format!(
        "{DEFAULTS}frontend fe\n    bind BIND\n    default_backend be\n{cfg}"
    ));
    let r = get_q(e.addr(), "/a.php?stderr=first+line%1b[31m%0Asecond");
    assert_eq!(r.status, 200);
    let l = log.find("ebb's STDERR line", |l| l.contains("first line"));
    assert!(l.starts_with("<131>"), "local0.err: {l}");
    assert!(l.contains(" php["), "tagged with the application: {l}");
    assert!(
        l.trim_end().ends_with(": first line.[31m.second"),
        "one line: {l:?}"
    );
}

/// The same application on a UNIX socket.
#[test]
fn a_server_on_a_unix_socket() {
    let d = scratch("fcgi-unix");
    let sock = d.join("app.sock");
    let app = App::start("fcgi-unix-app", &["--unix", sock.to_str().unwrap()]);
    let e = Ebb::start(&format!(
        "{DEFAULTS}frontend fe\n    bind BIND\n    default_backend be\nbackend be\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n",
        app.addr
    ));
    let r = get_q(e.addr(), "/u.php?x=1");
    assert_eq!(r.status, 200);
    assert!(
        r.text().contains("SCRIPT_FILENAME=/d/u.php\n"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("QUERY_STRING=x=1\n"));
}

/// Configurations HAProxy refuses, ebb refuses, each with its line; and
/// what ebb does not do on a FastCGI server.
#[test]
fn refusals_at_start() {
    let d = scratch("fcgi-refuse");
    let app = "fcgi-app php\n    docroot /var/www\n";
    let fe = "frontend fe\n    bind 127.0.0.1:8080\n    default_backend be\n";
    let cases = [
        (
            format!("{DEFAULTS}    use-fcgi-app php\n{fe}backend be\n    server s 127.0.0.1:9000 proto fcgi\n{app}"),
            "only available in backend or listen section",
            true,
        ),
        (
            format!("{DEFAULTS}frontend fe\n    bind 127.0.0.1:8080\n    use-fcgi-app php\n    default_backend be\nbackend be\n    server s 127.0.0.1:9000\n{app}"),
            "only available in backend or listen section",
            true,
        ),
        (
            format!("{DEFAULTS}{fe}backend be\n    use-fcgi-app php\n    use-fcgi-app other\n    server s 127.0.0.1:9000 proto fcgi\n{app}"),
            "only one fcgi-app supported per backend",
            true,
        ),
        (
            format!("{DEFAULTS}{fe}backend be\n    use-fcgi-app nope\n    server s 127.0.0.1:9000 proto fcgi\n"),
            "proxy 'be' : fcgi-app 'nope' not found.",
            true,
        ),
        (
            format!("{DEFAULTS}{fe}backend be\n    use-fcgi-app php\n    server s 127.0.0.1:9000\n{app}"),
            "proxy 'be': FCGI app configured but no FCGI server found.",
            true,
        ),
        (
            format!("{DEFAULTS}{fe}backend be\n    server s 127.0.0.1:9000 proto fcgi\n"),
            "proxy 'be': FCGI server 's' has no FCGI app configured.",
            true,
        ),
        (
            format!("defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\nlisten l\n    bind 127.0.0.1:8080\n    use-fcgi-app php\n    server s 127.0.0.1:9000 proto fcgi\n{app}"),
            "MUX protocol 'fcgi' is not usable for server",
            true,
        ),
        (
            format!("{DEFAULTS}{fe}backend be\n    use-fcgi-app php\n    server s 127.0.0.1:9000 proto fcgi\nfcgi-app php\n    docroot /d\n    set-param X %[nosuchfetch]\n"),
            "nosuchfetch",
            true,
        ),
        (
            format!("{DEFAULTS}{fe}backend be\n    use-fcgi-app php\n    server s 127.0.0.1:9000 proto fcgi ssl verify none\n{app}"),
            "'ssl' on a 'proto fcgi' server is not supported by ebb",
            false,
        ),
        (
            format!("{DEFAULTS}{fe}backend be\n    use-fcgi-app php\n    server s 127.0.0.1:9000 proto fcgi send-proxy\n{app}"),
            "'send-proxy' on a 'proto fcgi' server is not supported by ebb",
            false,
        ),
        // (HAProxy 2.6.12 takes these, then crashes at the first check.)
        (
            format!("{DEFAULTS}{fe}backend be\n    option httpchk\n    server s 127.0.0.1:9000 check check-proto fcgi\n"),
            "'check-proto fcgi' needs the backend's FastCGI application",
            false,
        ),
        (
            format!("{DEFAULTS}{fe}backend be\n    option httpchk\n    http-check connect proto fcgi\n    server s 127.0.0.1:9000 check\n"),
            "'http-check connect proto fcgi' needs the backend's FastCGI application",
            false,
        ),
    ];
    for (i, (text, what, hap)) in cases.iter().enumerate() {
        assert_refused(&d, &format!("c{i}.cfg"), text, what, *hap);
        let (_, _, err) = run_ebb(&["-c", "-f", &format!("c{i}.cfg")], &d);
        assert!(err.contains(&format!("c{i}.cfg:")), "{err}");
    }
    // Accepted by both: `filter fcgi-app`, TCP checks, HTTP checks
    // (through FastCGI, or with their own protocol).
    for (i, be) in [
        "    filter fcgi-app php\n    server s 127.0.0.1:9000 proto fcgi check\n",
        "    use-fcgi-app php\n    option httpchk\n    server s 127.0.0.1:9000 proto fcgi check\n    server t 127.0.0.1:9001 proto fcgi check check-proto h1 port 80\n",
    ]
    .iter()
    .enumerate()
    {
        let ok = format!("{DEFAULTS}{fe}backend be\n{be}{app}");
        let f = format!("ok{i}.cfg");
        std::fs::write(d.join(&f), &ok).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", &f], &d);
        assert_eq!(code, 0, "{err}");
        assert_ne!(haproxy_refuses(&d.join(&f)), Some(true), "{ok}");
    }
}

/// php-fpm (the Debian package), on a UNIX socket: a PHP script sees the
/// variables HAProxy gives it, reads a POST body, answers a status, a
/// redirect, a large body; `error_log()` comes as STDERR to `log-stderr`.
#[test]
fn php_fpm_beside_haproxy() {
    let Some(fpm) = ["php-fpm8.2", "php-fpm"].into_iter().find(|b| have(b)) else {
        println!("SKIP: php-fpm is not installed (Debian package php-fpm)");
        return;
    };
    let d = scratch("fcgi-php");
    let www = d.join("www");
    std::fs::create_dir_all(www.join("dir")).unwrap();
    let env = "<?php\nksort($_SERVER);\nforeach ($_SERVER as $k => $v) { if (is_string($v)) echo \"$k=$v\\n\"; }\n$in = file_get_contents('php://input');\necho 'BODY=' . strlen($in) . ':' . md5($in) . \"\\n\";\n";
    std::fs::write(www.join("env.php"), env).unwrap();
    std::fs::write(www.join("dir/index.php"), env).unwrap();
    std::fs::write(
        www.join("status.php"),
        "<?php\nif (isset($_GET['loc'])) { header('Location: ' . $_GET['loc']); exit; }\nhttp_response_code(intval($_GET['code'] ?? 200));\necho str_repeat('x', intval($_GET['n'] ?? 3));\n",
    )
    .unwrap();
    std::fs::write(
        www.join("err.php"),
        "<?php\nerror_log('oops from php');\necho \"ok\\n\";\n",
    )
    .unwrap();
    let sock = d.join("fpm.sock");
    let user = if as_root() {
        "user = root\ngroup = root\n"
    } else {
        ""
    };
    std::fs::write(
        d.join("fpm.conf"),
        format!(
            "[global]\nerror_log = {}\ndaemonize = no\npid = {}\n[www]\n{user}listen = {}\npm = static\npm.max_children = 8\nclear_env = yes\n",
            d.join("fpm.log").display(),
            d.join("fpm.pid").display(),
            sock.display()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(fpm);
    cmd.args(["-n", "-F", "-y"]).arg(d.join("fpm.conf"));
    if as_root() {
        cmd.arg("-R");
    }
    let _fpm = Proc(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("php-fpm"),
    );
    wait_until("php-fpm's socket", || {
        std::os::unix::net::UnixStream::connect(&sock).is_ok()
    });
    let log = Syslog::new();
    let cfg = format!(
        "backend be\n    http-reuse always\n    use-fcgi-app php\n    server fpm {} proto fcgi\nfcgi-app php\n    docroot {}\n    index index.php\n    path-info ^(/.+\\.php)(/.*)?$\n    log-stderr {} local0\n    set-param REDIRECT_STATUS 200\n",
        sock.display(),
        www.display(),
        log.addr()
    );
    let (e, h) = both("fcgi-php", &cfg);
    let vars = |r: &Resp| -> Vec<String> {
        r.text()
            .lines()
            .filter(|l| {
                ![
                    "REMOTE_PORT=",
                    "SERVER_PORT=",
                    "SERVER_SOFTWARE=",
                    "REQUEST_TIME",
                ]
                .iter()
                .any(|p| l.starts_with(p))
            })
            .map(str::to_string)
            .collect()
    };
    let reqs = [
        "GET /env.php/x/y?q=1 HTTP/1.1\r\nHost: php.test\r\nX-A: 1\r\nConnection: close\r\n\r\n".to_string(),
        "POST /env.php HTTP/1.1\r\nHost: php.test\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello=world".to_string(),
        "POST /env.php HTTP/1.1\r\nHost: php.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n".to_string(),
        "GET /dir/ HTTP/1.1\r\nHost: php.test\r\nAuthorization: Basic dXNlcjpwYXNz\r\nConnection: close\r\n\r\n".to_string(),
    ];
    for req in &reqs {
        let r = ask(e.addr(), req);
        assert_eq!(r.status, 200, "{req:?}: {}", r.text());
        let mine = vars(&r);
        assert!(
            mine.contains(&"REDIRECT_STATUS=200".to_string()),
            "{mine:?}"
        );
        if let Some((_, a)) = &h {
            assert_eq!(mine, vars(&ask(*a, req)), "{req:?}");
        }
    }
    let t = ask(e.addr(), &reqs[0]).text();
    for want in [
        "SCRIPT_NAME=/env.php\n",
        "PATH_INFO=/x/y\n",
        "HTTP_X_A=1\n",
        "QUERY_STRING=q=1\n",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }
    assert!(ask(e.addr(), &reqs[1]).text().contains("BODY=11:"));
    assert!(ask(e.addr(), &reqs[2])
        .text()
        .contains(&format!("BODY=3:{}", "900150983cd24fb0d6963f7d28e17f72")));
    let t = ask(e.addr(), &reqs[3]).text();
    assert!(t.contains("SCRIPT_NAME=/dir/index.php\n"), "{t}");
    assert!(!t.contains("HTTP_AUTHORIZATION"), "{t}");
    assert!(
        t.contains("REMOTE_USER=user\n") && t.contains("AUTH_TYPE=Basic\n"),
        "{t}"
    );
    for (target, status, loc) in [
        ("/status.php?loc=/elsewhere", 302, Some("/elsewhere")),
        ("/status.php?code=404&n=5", 404, None),
        ("/status.php?n=300000", 200, None),
    ] {
        let r = get_q(e.addr(), target);
        assert_eq!(r.status, status, "{target}");
        assert_eq!(r.header("location"), loc, "{target}");
        if let Some((_, a)) = &h {
            let hr = get_q(*a, target);
            assert_eq!(
                (hr.status, hr.body.len()),
                (r.status, r.body.len()),
                "{target}"
            );
        }
    }
    assert_eq!(get_q(e.addr(), "/status.php?n=300000").body.len(), 300_000);
    let r = ask(
        e.addr(),
        "HEAD /status.php?n=10 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(get_q(e.addr(), "/err.php").text(), "ok\n");
    let l = log.find("PHP's error_log line", |l| l.contains("oops from php"));
    assert!(l.starts_with("<131>") && l.contains(" php["), "{l}");
}

/// `add server ... proto fcgi` on the CLI: into a backend with an
/// application, it serves once ready; into one without, refused as at
/// start; with what ebb's FastCGI side does not do, refused.
#[test]
fn servers_added_at_run_time() {
    let app = App::start("fcgi-add", &[]);
    let (e, sock) = ebb_with_admin("fcgi-add", |s, bind| {
        format!(
            "global\n    stats socket {} level admin\n{DEFAULTS}frontend fe\n    bind {bind}\n    default_backend be\nbackend be\n    use-fcgi-app app\n    server s1 127.0.0.1:1 proto fcgi disabled\nbackend plain\n    server p 127.0.0.1:1\nfcgi-app app\n    docroot /d\n",
            s.display()
        )
    });
    let out = cli_cmd(&sock, &format!("add server be/s2 {} proto fcgi", app.addr));
    assert!(out.contains("New server registered."), "{out}");
    let out = cli_cmd(&sock, "set server be/s2 state ready");
    assert!(!out.to_lowercase().contains("error"), "{out}");
    let r = get_q(e.addr(), "/added.php");
    assert_eq!(r.status, 200);
    assert!(
        r.text().contains("SCRIPT_FILENAME=/d/added.php\n"),
        "{}",
        r.text()
    );
    for (cmd, want) in [
        (
            format!("add server plain/f {} proto fcgi", app.addr),
            "FCGI server 'f' has no FCGI app configured",
        ),
        (
            format!("add server be/t {} proto fcgi ssl verify none", app.addr),
            "'ssl' on a 'proto fcgi' server is not supported",
        ),
    ] {
        let out = cli_cmd(&sock, &cmd);
        assert!(out.contains(want), "{cmd}: {out}");
    }
}

/// `option httpchk` on a `proto fcgi` server checks through FastCGI, as
/// HAProxy's check takes the server's protocol (and so does `http-check
/// connect proto fcgi`): the check's request reaches the application as
/// PARAMS (an expect on its answer's body sees them), its answer's status
/// decides; beside HAProxy.
#[test]
fn http_checks_go_through_fastcgi() {
    let app = App::start("fcgi-check", &[]);
    let cfg = |s: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n{DEFAULTS}frontend fe\n    bind {bind}\n    default_backend be\n\
             backend be\n    use-fcgi-app app\n    option httpchk GET /health.php?x=1\n\
             \x20   http-check expect string SCRIPT_FILENAME=/d/health.php\n\
             \x20   server up {a} proto fcgi check inter 200\n\
             backend bad\n    use-fcgi-app app\n    option httpchk GET /health.php?status=503\n\
             \x20   server down {a} proto fcgi check inter 200\n\
             backend steps\n    use-fcgi-app app\n    option httpchk\n\
             \x20   http-check connect proto fcgi\n    http-check send meth GET uri /step.php\n\
             \x20   http-check expect string SCRIPT_NAME=/step.php\n\
             \x20   server st {a} proto fcgi check inter 200\n\
             fcgi-app app\n    docroot /d\n",
            s.display(),
            a = app.addr
        )
    };
    let (_e, sock) = ebb_with_admin("fcgi-check", cfg);
    let h = haproxy_beside("fcgi-check", cfg);
    let status = |sock: &Path, be: &str, srv: &str| {
        let r = stat_row(sock, be, srv);
        (
            r.get("status").cloned().unwrap_or_default(),
            r.get("check_status").cloned().unwrap_or_default(),
        )
    };
    let mut socks = vec![sock];
    if let Some((h, _)) = &h {
        socks.push(h.sock.clone());
    }
    for s in &socks {
        wait_until("checks settled", || {
            status(s, "be", "up").1 == "L7OK"
                && status(s, "bad", "down").0 == "DOWN"
                && status(s, "steps", "st").1 == "L7OK"
        });
        assert_eq!(status(s, "be", "up").0, "UP", "{}", s.display());
        assert_eq!(status(s, "bad", "down").1, "L7STS", "{}", s.display());
    }
    assert!(
        app.records().iter().any(|l| l.contains(" type=1 ")),
        "the checks spoke FastCGI"
    );
}

/// A kept connection the application closes after its answer: the next
/// request takes another (or, when it met the close, goes again on a new
/// one): none fails. An HTTP/2 client's request goes as any (SERVER_PROTOCOL
/// HTTP/2.0), its body and a large answer too.
#[test]
fn closed_connections_and_http2_clients() {
    let app = App::start("fcgi-closed", &[]);
    let e = Ebb::start(&format!(
        "global\n    nbthread 1\n{DEFAULTS}frontend fe\n    bind BIND\n    bind BIND proto h2\n    default_backend be\nbackend be\n    http-reuse always\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n",
        app.addr
    ));
    let a = e.addr();
    for i in 0..8 {
        let r = get_q(a, &format!("/a.php?closeafter=1&n={i}"));
        assert_eq!(r.status, 200, "request {i}");
    }
    let threads: Vec<_> = (0..4)
        .map(|i| std::thread::spawn(move || get_q(a, &format!("/a.php?closeafter=1&t={i}"))))
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().status, 200);
    }
    if !have("curl") {
        return;
    }
    let h2 = e.addrs[1];
    let (ok, out, err) = curl(&[
        "-s",
        "--http2-prior-knowledge",
        &format!("http://{h2}/h2.php?x=1"),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("SERVER_PROTOCOL=HTTP/2.0\n"), "{out}");
    assert!(out.contains("SCRIPT_NAME=/h2.php\n") && out.contains("QUERY_STRING=x=1\n"));
    let (ok, out, _) = curl(&[
        "-s",
        "--http2-prior-knowledge",
        &format!("http://{h2}/big.php?big=300000"),
    ]);
    assert!(ok && out.len() == 300_000, "{}", out.len());
    let (ok, out, _) = curl(&[
        "-s",
        "--http2-prior-knowledge",
        "--data-binary",
        "posted over h2",
        &format!("http://{h2}/p.php?echo=1"),
    ]);
    assert!(ok);
    assert_eq!(out, "posted over h2");
}

/// An application without GET_VALUES (it answers FCGI_UNKNOWN_TYPE) still
/// serves with `option get-values`; a connection whose aborted request
/// the application never ends is closed once `timeout server` passed.
#[test]
fn unknown_type_and_aborts_never_ended() {
    let app = App::start("fcgi-unknown", &["--no-values"]);
    let e = Ebb::start(&format!(
        "{DEFAULTS}frontend fe\n    bind BIND\n    default_backend be\nbackend be\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n    option get-values\n",
        app.addr
    ));
    assert_eq!(get_q(e.addr(), "/a.php").status, 200);
    assert!(app.records().iter().any(|l| l.contains(" type=9 ")));

    let app = App::start("fcgi-ignore-abort", &["--ignore-abort"]);
    let e = Ebb::start(&format!(
        "defaults\n    mode http\n    option abortonclose\n    timeout connect 5s\n    timeout client 30s\n    timeout server 1s\nfrontend fe\n    bind BIND\n    default_backend be\nbackend be\n    use-fcgi-app app\n    server s1 {} proto fcgi\nfcgi-app app\n    docroot /d\n",
        app.addr
    ));
    let mut c = Client::connect(e.addr());
    c.send(b"GET /a.php?delay=60000 HTTP/1.1\r\nHost: h\r\n\r\n");
    wait_until("the request begun", || {
        app.records().iter().any(|l| l.contains(" type=5 "))
    });
    drop(c);
    wait_until("ABORT_REQUEST", || {
        app.records().iter().any(|l| l.contains(" type=2 "))
    });
    wait_until("the connection closed", || {
        app.records().iter().any(|l| l.ends_with(" closed"))
    });
}
