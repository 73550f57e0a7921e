//! The HTTP cache (`cache` sections, `cache-use`, `cache-store`, `show
//! cache`) and `http-errors` sections through the real binary, for what
//! HAProxy's reg-tests do not pin: the memory bound, request directives
//! that bypass the cache, HEAD on a stored GET, the `Age` field, the CLI
//! listing, and the configuration errors. HAProxy 2.6 behaves the same on
//! each point (cache.c, http_ana.c); its answers are not compared here
//! because the assertions are on counts of requests reaching the origin.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{cli_cmd, raw, run_ebb, scratch, Client, Ebb};

/// An origin answering every request with a body of the size asked in the
/// path (`/N/anything`), `Cache-Control: max-age=60` and the request
/// count in `X-N`; counts the requests it got.
struct Origin {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

fn origin() -> Origin {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let h2 = Arc::clone(&hits);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let h3 = Arc::clone(&h2);
            std::thread::spawn(move || serve(s, &h3));
        }
    });
    Origin { addr, hits }
}

fn serve(s: TcpStream, hits: &AtomicUsize) {
    answer_requests(s, |path| {
        let n = hits.fetch_add(1, Ordering::SeqCst) + 1;
        let size: usize = path
            .trim_start_matches('/')
            .split('/')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10);
        let head = format!(
            "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nX-N: {n}\r\nContent-Length: {size}\r\n\r\n"
        );
        let mut out = head.into_bytes();
        out.extend(vec![b'x'; size]);
        out
    });
}

/// Reads the requests of `s` one after the other (a Content-Length body
/// read and dropped) and writes `answer(path)` to each.
fn answer_requests(s: TcpStream, answer: impl Fn(&str) -> Vec<u8>) {
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or("/");
        if w.write_all(&answer(path)).is_err() {
            return;
        }
    }
}

fn config(o: &Origin, cache: &str, sock: &std::path::Path) -> String {
    format!(
        "global\n stats socket {} level admin\ndefaults\n mode http\n timeout client 10s\n timeout server 10s\n timeout connect 5s\nfrontend fe\n bind BIND\n default_backend be\nbackend be\n http-request cache-use c\n http-response cache-store c\n http-response set-header X-Hit %[res.cache_hit]\n server o {}\ncache c\n{cache}",
        sock.display(),
        o.addr
    )
}

fn get(c: &mut Client, path: &str, extra: &str) -> common::Resp {
    c.send(format!("GET {path} HTTP/1.1\r\nHost: h\r\n{extra}\r\n").as_bytes());
    c.read_resp()
}

#[test]
fn hits_come_from_the_cache_with_an_age_and_head_gets_no_body() {
    let o = origin();
    let dir = scratch("cache-hit");
    let sock = dir.join("cli.sock");
    let ebb = Ebb::start(&config(&o, " total-max-size 4\n max-age 60\n", &sock));
    let mut c = Client::connect(ebb.addr());
    let r = get(&mut c, "/100/a", "");
    assert_eq!((r.status, r.body.len()), (200, 100));
    assert_eq!(r.header("x-hit"), Some("0"));
    let r = get(&mut c, "/100/a", "");
    assert_eq!((r.status, r.body.len()), (200, 100));
    assert_eq!(r.header("x-hit"), Some("1"));
    assert_eq!(r.header("x-n"), Some("1"));
    assert!(r.header("age").is_some(), "a hit carries Age");
    assert_eq!(o.hits.load(Ordering::SeqCst), 1);
    // HEAD is answered from the stored GET, without its body.
    c.send(b"HEAD /100/a HTTP/1.1\r\nHost: h\r\n\r\n");
    let r = c.read_resp_opt(true).expect("an answer to HEAD");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("100"));
    assert_eq!(r.header("x-hit"), Some("1"));
    // Request directives that bypass the cache (HAProxy's
    // http_check_request_for_cacheability), and Authorization.
    for extra in [
        "Cache-Control: no-cache\r\n",
        "Cache-Control: max-age=0\r\n",
        "Pragma: no-cache\r\n",
        "Authorization: Basic eDp5\r\n",
    ] {
        let r = get(&mut c, "/100/a", extra);
        assert_eq!(r.header("x-hit"), Some("0"), "{extra}");
    }
    assert_eq!(o.hits.load(Ordering::SeqCst), 5);
    // The CLI lists the entry.
    let out = cli_cmd(&sock, "show cache");
    assert!(out.contains(": c (shctx:"), "{out}");
    assert_eq!(out.matches(" hash:").count(), 1, "{out}");
}

#[test]
fn the_cache_stays_within_total_max_size() {
    let o = origin();
    let dir = scratch("cache-size");
    let sock = dir.join("cli.sock");
    // 1 MB; objects up to 300,000 bytes: at most three 250,000-byte
    // answers fit at once.
    let ebb = Ebb::start(&config(
        &o,
        " total-max-size 1\n max-object-size 300000\n",
        &sock,
    ));
    let mut c = Client::connect(ebb.addr());
    for i in 0..10 {
        let r = get(&mut c, &format!("/250000/{i}"), "");
        assert_eq!((r.status, r.body.len()), (200, 250_000));
    }
    assert_eq!(o.hits.load(Ordering::SeqCst), 10);
    let out = cli_cmd(&sock, "show cache");
    let sizes: Vec<usize> = out
        .lines()
        .filter_map(|l| l.split(" size:").nth(1))
        .filter_map(|s| s.split(' ').next()?.parse().ok())
        .collect();
    assert!(!sizes.is_empty() && sizes.len() <= 4, "{out}");
    assert!(sizes.iter().sum::<usize>() <= 1024 * 1024, "{out}");
    // The last one stored is a hit; the first was evicted.
    let r = get(&mut c, "/250000/9", "");
    assert_eq!(r.header("x-hit"), Some("1"));
    let r = get(&mut c, "/250000/0", "");
    assert_eq!(r.header("x-hit"), Some("0"));
    // Larger than max-object-size: never stored.
    get(&mut c, "/400000/big", "");
    let r = get(&mut c, "/400000/big", "");
    assert_eq!(r.header("x-hit"), Some("0"));
}

#[test]
fn cache_configuration_errors_name_their_line() {
    let dir = scratch("cache-cfg");
    let cases = [
        (
            "defaults\n mode http\nfrontend fe\n bind 127.0.0.1:0\n http-request cache-use nope\n default_backend be\nbackend be\n server s 127.0.0.1:1\n",
            "ebb.cfg:5: ",
            "unable to find the cache 'nope'",
        ),
        (
            "cache c\n max-age 10\ndefaults\n mode http\n",
            "ebb.cfg:1: ",
            "Size not specified",
        ),
        (
            "cache c\n total-max-size 1\n max-object-size 900000\n",
            "ebb.cfg:1: ",
            "limited to half",
        ),
        (
            "cache c\n total-max-size 1\n process-vary maybe\n",
            "ebb.cfg:3: ",
            "expects \"on\" or \"off\"",
        ),
        (
            "cache c\n total-max-size 1\n bogus 1\n",
            "ebb.cfg:3: ",
            "unknown keyword 'bogus'",
        ),
        (
            "defaults\n mode http\n errorfiles nope\n",
            "ebb.cfg:3: ",
            "no http-errors section 'nope'",
        ),
    ];
    for (cfg, at, what) in cases {
        let p = dir.join("ebb.cfg");
        std::fs::write(&p, cfg).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", p.to_str().unwrap()], &dir);
        assert_ne!(code, 0, "{cfg}");
        assert!(err.contains(at) && err.contains(what), "{cfg}\n{err}");
    }
}

/// `filter compression` and `filter cache NAME`: the orders HAProxy 2.6
/// takes and those it refuses (the compression before a cache, explicit
/// or implied by a rule), with its messages; each case is also given to
/// `haproxy -c`, which must agree on accepting or refusing it.
#[test]
fn filter_lines_are_checked_as_haproxy_checks_them() {
    let dir = scratch("cache-filters");
    // (`-c` binds nothing: the fixed port of the bind line is never used.)
    let head = "defaults\n mode http\n timeout client 1s\n timeout server 1s\n timeout connect 1s\ncache c\n total-max-size 4\ncache d\n total-max-size 4\nlisten a\n bind 127.0.0.1:19830\n";
    // (the proxy's lines, the errors: line and text; none: accepted)
    let cases: [(&str, &[(u32, &str)]); 14] = [
        (" filter cache c\n filter compression\n compression algo gzip\n http-response cache-store c\n", &[]),
        (" http-response cache-store c\n filter compression\n compression algo gzip\n", &[]),
        (" filter cache c\n http-request cache-use d\n filter compression\n compression algo gzip\n", &[]),
        (" filter compression\n filter cache c\n compression algo gzip\n http-response cache-store c\n", &[
            (12, "proxy 'a': unable to enable the compression filter before any cache filter."),
            (13, "proxy 'a': unable to enable the compression filter before the cache 'c'."),
        ]),
        // The rule implies a cache filter where it stands.
        (" filter compression\n compression algo gzip\n http-response cache-store c\n", &[
            (12, "before any cache filter."),
            (14, "proxy 'a': unable to enable the compression filter before the cache 'c'."),
        ]),
        // A later `filter cache` line moves the implied filter there.
        (" http-response cache-store c\n filter compression\n filter cache c\n compression algo gzip\n", &[
            (13, "before any cache filter."),
            (14, "before the cache 'c'."),
        ]),
        // Without `compression` lines, only the cache's own check.
        (" filter compression\n http-request cache-use c\n", &[(13, "before the cache 'c'.")]),
        (" filter compression\n filter compression\n", &[(13, "'filter' : 'a: Proxy supports only one compression filter'")]),
        (" filter cache c\n filter cache c\n", &[(13, "multiple explicit declarations of the cache filter 'c'")]),
        (" filter cache x\n", &[(12, "proxy 'a': unable to find the cache 'x' referenced by the filter 'cache'.")]),
        (" filter cache\n", &[(12, "'filter' : 'cache : expects a <name> argument'")]),
        (" filter\n", &[(12, "missing argument for 'filter' in proxy 'a'.")]),
        (" filter compression x\n", &[(12, "'filter compression' : unknown keyword 'x'.")]),
        (" filter foo\n", &[(12, "'filter' : unknown keyword 'foo'")]),
    ];
    let p = dir.join("ebb.cfg");
    for (lines, errors) in cases {
        let cfg = format!("{head}{lines} server s 127.0.0.1:1\n");
        std::fs::write(&p, &cfg).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", p.to_str().unwrap()], &dir);
        assert_eq!(code == 0, errors.is_empty(), "{cfg}\n{err}");
        for (line, what) in errors {
            let want = format!("ebb.cfg:{line}: ");
            let found = err.lines().any(|l| l.contains(&want) && l.contains(what));
            assert!(found, "{cfg}\nwanted {want}{what} in\n{err}");
        }
        if let Some(refused) = common::haproxy_refuses(&p) {
            assert_eq!(refused, !errors.is_empty(), "haproxy on\n{cfg}");
        }
    }
    // HAProxy has no `filter` in defaults, and ebb none of its other
    // filters (refused by name).
    let cfg = format!("{head} filter trace\n server s 127.0.0.1:1\n");
    common::assert_refused(
        &dir,
        "t.cfg",
        &cfg,
        "HAProxy filter 'trace' is not supported by ebb",
        false,
    );
    let cfg = "defaults\n mode http\n filter compression\n";
    common::assert_refused(
        &dir,
        "d.cfg",
        cfg,
        "d.cfg:3: 'filter' is not allowed in a 'defaults' section",
        true,
    );
}

#[test]
fn http_errors_sections_answer_deny_and_return() {
    let dir = scratch("errors");
    let f = dir.join("403.http");
    std::fs::write(
        &f,
        "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-From: section\r\n\r\nnope\n",
    )
    .unwrap();
    let ebb = Ebb::start(&format!(
        "http-errors e\n errorfile 403 {}\ndefaults\n mode http\nfrontend fe\n bind BIND\n http-request deny errorfiles e if {{ path /deny }}\n http-request return status 403 errorfiles e if {{ path /ret }}\n http-request deny status 500 content-type text/plain string oops if {{ path /oops }}\n http-request return status 200 content-type text/plain string ok\n",
        f.display()
    ));
    let r = raw(ebb.addr(), b"GET /deny HTTP/1.1\r\nHost: h\r\n\r\n").expect("an answer");
    assert_eq!((r.status, r.header("x-from")), (403, Some("section")));
    let r = raw(ebb.addr(), b"GET /ret HTTP/1.1\r\nHost: h\r\n\r\n").expect("an answer");
    assert_eq!((r.status, r.header("x-from")), (403, Some("section")));
    let r = raw(ebb.addr(), b"GET /oops HTTP/1.1\r\nHost: h\r\n\r\n").expect("an answer");
    assert_eq!((r.status, r.text()), (500, "oops".to_string()));
}

/// An origin for `option checkcache`: each word of the path adds to the
/// answer (`cookie`: a `Set-Cookie`, `maxage`: `Cache-Control:
/// max-age=60`, `public`, `private`, `nocc`: `no-cache="set-cookie"`,
/// `etag`; `301`: that status), a 2-byte body.
fn checkcache_origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || answer_requests(s, checkcache_answer));
        }
    });
    addr
}

fn checkcache_answer(path: &str) -> Vec<u8> {
    let mut head = String::from(if path.contains("301") {
        "HTTP/1.1 301 Moved\r\n"
    } else {
        "HTTP/1.1 200 OK\r\n"
    });
    head.push_str("Content-Length: 2\r\n");
    for (w, f) in [
        ("cookie", "Set-Cookie: a=b\r\n"),
        ("maxage", "Cache-Control: max-age=60\r\n"),
        ("public", "Cache-Control: public\r\n"),
        ("private", "Cache-Control: private\r\n"),
        ("nocc", "Cache-Control: no-cache=\"set-cookie\"\r\n"),
        ("etag", "ETag: \"x\"\r\n"),
    ] {
        if path.contains(w) {
            head.push_str(f);
        }
    }
    head.push_str("\r\nok");
    head.into_bytes()
}

/// `option checkcache`: a server's answer a shared cache could keep that
/// carries its `Set-Cookie` is refused as HAProxy 2.6 refuses it (the
/// error page of the answer's status, 500's for a status without one,
/// logged with the server's status, `PH--` and no response time);
/// answers not cacheable (no freshness or validator, `private`,
/// `no-cache="set-cookie"`, a POST, a 302) pass. Each case is compared
/// with haproxy's answer and log line when it is installed.
#[test]
fn checkcache_blocks_cacheable_answers_with_a_cookie_as_haproxy() {
    // (method, path, status seen, flags logged)
    let cases = [
        ("GET", "/cookie/maxage", 200, "PH--"),
        ("GET", "/cookie/etag", 200, "PH--"),
        ("HEAD", "/cookie/maxage", 200, "PH--"),
        ("GET", "/cookie/maxage/301", 500, "PH--"),
        ("POST", "/cookie/maxage/public", 200, "PH--"),
        ("GET", "/maxage", 200, "----"),
        ("GET", "/cookie", 200, "----"),
        ("GET", "/cookie/public", 200, "----"),
        ("GET", "/cookie/maxage/private", 200, "----"),
        ("GET", "/cookie/maxage/nocc", 200, "----"),
        ("POST", "/cookie/maxage", 200, "----"),
    ];
    let alert = "Blocking cacheable cookie in response from instance px, server s.";
    refusals_beside_haproxy("checkcache", "option checkcache", &cases, Some(alert));
}

/// A server's answer refused by an `http-response deny` or `redirect`
/// rule is logged as haproxy logs it: no response time (`Tr` -1), `PH--`
/// for the deny, `LH--` for the redirect (ebb logged the time the answer
/// took and `PH--` for both).
#[test]
fn refused_answers_log_no_response_time_as_haproxy() {
    let rules = "http-response deny if { res.hdr(x-deny) -m found }\n    \
                 http-response redirect location /x if { res.hdr(set-cookie) -m found }";
    let cases = [
        ("GET", "/cookie", 302, "LH--"),
        ("GET", "/maxage", 200, "----"),
    ];
    refusals_beside_haproxy("refusals", rules, &cases, None);
    let rules = "http-response deny if { res.hdr(set-cookie) -m found }";
    let cases = [("GET", "/cookie", 502, "PH--")];
    refusals_beside_haproxy("refusals-deny", rules, &cases, None);
}

/// Runs `cases` (method, path, status, flags) through ebb, then haproxy
/// when installed, each a listen proxy with `lines` in front of
/// [`checkcache_origin`]: the status seen, the status logged (the
/// server's), the flags and, for a refused answer (flags not `----`), no
/// response time and the `alert` line when given; an answer let through
/// is the server's.
fn refusals_beside_haproxy(
    name: &str,
    lines: &str,
    cases: &[(&str, &str, u16, &str)],
    alert: Option<&str>,
) {
    let o = checkcache_origin();
    let log = common::Syslog::new();
    let la = log.addr();
    let cfg = |sock: &std::path::Path, bind: &str| {
        format!(
            "{}    option httplog\nlisten px\n    bind {bind}\n    {lines}\n    server s {o}\n",
            common::logged_head(sock, la, "http")
        )
    };
    let check = |who: &str, fe: SocketAddr| {
        for &(method, path, status, want_flags) in cases {
            let body = if method == "POST" {
                "Content-Length: 0\r\n"
            } else {
                ""
            };
            let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\n{body}\r\n");
            let mut c = Client::connect(fe);
            c.send(req.as_bytes());
            let r = c.read_resp_opt(method == "HEAD").expect("an answer");
            assert_eq!(r.status, status, "{who} {method} {path}");
            let req_line = format!("\"{method} {path} HTTP/1.1\"");
            let line = log.find("its log line", |l| l.contains(&req_line));
            let text = line.split("]: ").nth(1).unwrap_or("");
            let f: Vec<&str> = text.split_whitespace().collect();
            // client [date] fe be/srv Tq/Tw/Tc/Tr/Ta status bytes - - flags
            let (times, logged, flags, bytes) = (f[4], f[5], f[9], f[6]);
            let tr = times.split('/').nth(3).unwrap_or("");
            let want_status = match status {
                302 | 502 => status.to_string(),
                _ if path.contains("301") => "301".into(),
                _ => "200".into(),
            };
            assert_eq!(logged, want_status, "{who} {method} {path}: {line}");
            assert_eq!(flags, want_flags, "{who} {method} {path}: {line}");
            if flags != "----" {
                assert_eq!(tr, "-1", "{who} {method} {path}: {line}");
                // The bytes logged count the server's refused head before
                // the answer sent instead: more than that answer's own
                // head and body (its status line and fields, each at
                // least its name, `: ` and CRLF).
                let sent = 17
                    + r.body.len()
                    + r.headers
                        .iter()
                        .map(|(n, v)| n.len() + v.len() + 4)
                        .sum::<usize>();
                let bytes: usize = bytes.parse().unwrap_or(0);
                assert!(
                    bytes > sent + 20,
                    "{who} {method} {path}: {bytes} vs {sent}: {line}"
                );
                if let Some(alert) = alert {
                    // At level alert (local0: 16 * 8 + 1).
                    log.find("the alert", |l| l.starts_with("<129>") && l.contains(alert));
                }
            } else {
                assert_eq!(r.body, b"ok".to_vec(), "{who} {method} {path}");
            }
        }
    };
    let (e, _sock) = common::ebb_with_admin(name, cfg);
    check("ebb", e.addr());
    drop(e);
    if let Some((_h, fe)) = common::haproxy_beside(name, cfg) {
        check("haproxy", fe);
        println!("haproxy agrees");
    }
}

/// `cookie ... insert nocache` makes a cacheable answer private as
/// HAProxy 2.6 judges it: a server's `Set-Cookie` does not make it
/// uncacheable (ebb took it so before), and an answer with neither
/// freshness nor validator is not cacheable. With `option checkcache`
/// beside, the answer so made private passes.
#[test]
fn nocache_judges_cacheability_as_haproxy() {
    let o = checkcache_origin();
    let cfg = |sock: &std::path::Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\nlisten px\n    bind {bind}\n    option checkcache\n    cookie SRV insert nocache\n    server s {o} cookie s1\n",
            sock.display()
        )
    };
    let cases = [
        ("/cookie/maxage", true),
        ("/maxage", true),
        ("/cookie/etag", true),
        ("/cookie", false),
        ("/cookie/public", false),
    ];
    let check = |who: &str, fe: SocketAddr| {
        for (path, private) in cases {
            let mut c = Client::connect(fe);
            c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
            let r = c.read_resp_opt(false).expect("an answer");
            assert_eq!((r.status, &r.body[..]), (200, &b"ok"[..]), "{who} {path}");
            let cc: Vec<String> = r
                .headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("cache-control"))
                .map(|(_, v)| v.to_ascii_lowercase())
                .collect();
            let has = cc.iter().any(|v| v == "private");
            assert_eq!(has, private, "{who} {path}: {cc:?}");
        }
    };
    let (e, _sock) = common::ebb_with_admin("nocache", cfg);
    check("ebb", e.addr());
    drop(e);
    if let Some((_h, fe)) = common::haproxy_beside("nocache", cfg) {
        check("haproxy", fe);
        println!("haproxy agrees");
    }
}
