//! The sample engine through the real binary: what an origin receives
//! from `http-request set-header` with log-format values, what a client
//! gets from `http-response` edits and `lf-string` answers, dynamic
//! `use_backend`, and ACLs over sample expressions; the same
//! configuration run by HAProxy 2.6 side by side where it is installed.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::origin::{Mode, Origin};
use common::*;

/// The frontend and backends shared by ebb and HAProxy in these tests.
fn config(bind: &str, a: &Origin, b: &Origin) -> String {
    format!(
        "global\n    nbthread 1\ndefaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 2s\n\
frontend fe\n    bind {bind}\n\
    acl many_x req.hdr_cnt(x-a) gt 1\n\
    http-request deny deny_status 429 if many_x\n\
    http-request return status 200 content-type text/plain lf-string \"lf %[path] %[req.hdr(host),lower] %ci\" if {{ path_beg /lf }}\n\
    http-request set-header X-Real-IP %[src]\n\
    http-request set-header X-Path %[path,upper]\n\
    http-request set-header X-Host %[req.hdr(host),lower,field(1,:)]\n\
    http-request add-header X-Hash %[str(abc),djb2]/%[str(abc),wt6]/%[str(abc),xxh64]\n\
    http-request set-header X-Mixed \"fe=%f m=%HM u=%HU 100%%\"\n\
    http-request set-header X-Cookie %[req.cook(sid)]\n\
    http-request del-header X-Secret\n\
    http-request set-header X-Tls %[ssl_fc]\n\
    http-request set-var(txn.host) req.hdr(host),lower\n\
    http-request set-var-fmt(txn.who) \"%[src] on %f\"\n\
    http-request set-var(req.tmp) str(gone)\n\
    http-response set-header X-Var \"%[var(txn.host)] %[var(txn.who)] <%[var(req.tmp)]>\"\n\
    use_backend be_%[req.hdr(x-be),lower]\n\
    default_backend be_a\n\
backend be_a\n    http-request set-header X-Be %[be_name]\n    http-response set-header X-Status %[status]\n    http-response set-header X-Srv %[srv_name]\n    http-response add-header X-Resp \"%s via %b\"\n    server a {}\n\
backend be_b\n    http-request set-header X-Be %[be_name]\n    server b {}\n",
        a.addr, b.addr
    )
}

/// `curl -si` against `addr`; returns the whole response text.
fn curl(addr: SocketAddr, path: &str, extra: &[&str]) -> String {
    let url = format!("http://{addr}{path}");
    let out = Command::new("curl")
        .args([
            "-si",
            "--max-time",
            "20",
            "-H",
            "Host: WWW.Example.COM:8080",
        ])
        .args(extra)
        .arg(&url)
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn header<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The last head an origin received.
fn last_head(o: &Origin) -> String {
    o.heads.lock().unwrap().last().cloned().unwrap_or_default()
}

/// Runs the checks against a proxy (ebb or HAProxy) in front of `a` and
/// `b`; returns the observations so two proxies can be compared.
fn observe(addr: SocketAddr, a: &Origin, b: &Origin) -> Vec<String> {
    let mut seen = Vec::new();
    let r = curl(
        addr,
        "/some/Path?q=1",
        &["-H", "X-Secret: s", "-H", "Cookie: a=1; sid=xyz"],
    );
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let h = last_head(a);
    for n in [
        "x-real-ip",
        "x-path",
        "x-host",
        "x-hash",
        "x-mixed",
        "x-cookie",
        "x-tls",
        "x-be",
        "x-secret",
    ] {
        seen.push(format!("origin {n}: {:?}", header(&h, n)));
    }
    for n in ["x-status", "x-srv", "x-resp", "x-var"] {
        seen.push(format!("client {n}: {:?}", header(&r, n)));
    }
    // Dynamic backend name.
    let r = curl(addr, "/dyn", &["-H", "X-Be: B"]);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    seen.push(format!("be_b x-be: {:?}", header(&last_head(b), "x-be")));
    // A name that is no backend: the default backend.
    let before = a.requests.load(std::sync::atomic::Ordering::SeqCst);
    let r = curl(addr, "/dyn2", &["-H", "X-Be: nope"]);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    seen.push(format!(
        "unknown dynamic name goes to default: {}",
        a.requests.load(std::sync::atomic::Ordering::SeqCst) == before + 1
    ));
    // lf-string answer.
    let r = curl(addr, "/lf/x", &[]);
    seen.push(format!(
        "lf body: {:?}",
        r.split("\r\n\r\n").nth(1).unwrap_or("")
    ));
    // ACL over an integer sample.
    let r = curl(addr, "/", &["-H", "X-A: 1", "-H", "X-A: 2"]);
    seen.push(format!("acl hdr_cnt: {}", &r[..12.min(r.len())]));
    seen
}

#[test]
fn header_values_are_evaluated_as_haproxy_does() {
    if !have("curl") {
        eprintln!("curl not installed: skipped");
        return;
    }
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let e = Ebb::start(&config("BIND", &a, &b));
    let got = observe(e.addr(), &a, &b);
    let expect = [
        "origin x-real-ip: Some(\"127.0.0.1\")",
        "origin x-path: Some(\"/SOME/PATH\")",
        "origin x-host: Some(\"www.example.com\")",
        "origin x-hash: Some(\"193485963/2483038440/4952883123889572249\")",
        "origin x-mixed: Some(\"fe=fe m=GET u=/some/Path?q=1 100%\")",
        "origin x-cookie: Some(\"xyz\")",
        "origin x-tls: Some(\"0\")",
        "origin x-be: Some(\"be_a\")",
        "origin x-secret: None",
        "client x-status: Some(\"200\")",
        "client x-srv: Some(\"a\")",
        "client x-resp: Some(\"a via be_a\")",
        "client x-var: Some(\"www.example.com:8080 127.0.0.1 on fe <>\")",
        "be_b x-be: Some(\"be_b\")",
        "unknown dynamic name goes to default: true",
        "lf body: \"lf /lf/x www.example.com:8080 127.0.0.1\"",
        "acl hdr_cnt: HTTP/1.1 429",
    ];
    assert_eq!(got, expect);
}

struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts HAProxy on the configuration `cfg` makes for a free loopback
/// address; returns it once that address accepts connections.
fn haproxy(cfg: impl Fn(SocketAddr) -> String) -> (Haproxy, SocketAddr) {
    // Below the ephemeral range (common::free_port): a port released from
    // `:0` could be given to an ebb's `:0` listener meanwhile, and
    // haproxy's SO_REUSEPORT would share it with that ebb.
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let dir = scratch("haproxy-sample");
    let path = dir.join("h.cfg");
    std::fs::write(&path, cfg(addr)).unwrap();
    let child = Command::new("haproxy")
        .args(["-db", "-f", path.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start haproxy");
    let h = Haproxy(child);
    // Wait for the listener (an event: the connect succeeds).
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "haproxy did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (h, addr)
}

#[test]
fn same_observations_as_haproxy() {
    if !have("curl") || !have("haproxy") {
        eprintln!("curl or haproxy not installed: skipped");
        return;
    }
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let e = Ebb::start(&config("BIND", &a, &b));
    let ours = observe(e.addr(), &a, &b);

    let a2 = Origin::start("a", Mode::Ok);
    let b2 = Origin::start("b", Mode::Ok);
    let (_h, addr) = haproxy(|a| config(&a.to_string(), &a2, &b2));
    let theirs = observe(addr, &a2, &b2);
    assert_eq!(ours, theirs);
}

/// ACLs over every value of a header, each through the converters; commas
/// inside quoted strings; `req.hdr_ip`, `ipmask` with IPv6 masks and
/// IPv4-mapped addresses; arithmetic with a variable; `var()` with a
/// default; `so_name`; `xxh3`/`xxh32`; `capture.req.hdr`.
fn compat_config(bind: &str) -> String {
    format!(
        "global\n    nbthread 1\n    set-var proc.twelve int(12)\n    set-var-fmt proc.msg \"twelve=%[var(proc.twelve)]\"\n\
defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 2s\n\
frontend f\n    bind {bind} name web\n\
    declare capture request len 8\n\
    http-request capture req.hdr(x-c) id 0\n\
    http-request set-var(txn.d) str(12)\n\
    acl one req.hdr(x-c),lower one\n\
    acl q req.hdr(x-q) -m sub \"b,c\"\n\
    acl ip req.hdr_ip(a2) 10.0.0.1\n\
    http-request return status 200 hdr x-r \"%[req.hdr_ip(a1)]|%[req.hdr_ip(a2)]|%[req.hdr_ip(a2,1)]|%[req.hdr_ip(a3)]|%[req.hdr_ip(a4),ipmask(24)]|%[req.hdr_ip(a1),ipmask(24)]|%[req.hdr_ip(a1),ipmask(24,ffff:ffff::)]|%[req.hdr_ip(a5)]|%[int(60),div(txn.d)]|%[int(60),div(txn.none)]|%[var(txn.none,60),div(txn.d)]|%[req.hdr(x-q)]|%[req.hdr(x-q,1)]|%[req.hdr_cnt(x-q)]\" hdr x-acl \"%[bool(1)]\" hdr x-more \"%[so_name]|%[str(abc),xxh3]|%[str(abc),xxh32(1)]|%[capture.req.hdr(0)]|%[var(proc.msg)]|%[int(60),div(proc.twelve)]|%[fe_conn]|%[be_conn(b)]|%[srv_conn(b/s)]\" if one q ip\n\
    http-request return status 200 hdr x-r \"%[req.hdr(x-q,1)]|%[req.hdr_cnt(x-q)]\" hdr x-acl no\n\
backend b\n    server s 127.0.0.1:9\n"
    )
}

/// The `x-` fields of two answers from `addr`.
fn compat_observe(addr: SocketAddr) -> Vec<String> {
    let mut seen = Vec::new();
    let first = [
        "-H",
        "A1: 2001:db8::1",
        "-H",
        "A2: 10.0.0.1:8080, junk",
        "-H",
        "A3: 192.168.1.300",
        "-H",
        "A4: ::FFFF:192.168.1.101",
        "-H",
        "A5: junk, 010.1.2.3",
        "-H",
        "X-C: One, two",
        "-H",
        "X-Q: \"a,b,c\", d",
    ];
    let second = ["-H", "X-C: two, One", "-H", "X-Q: \"a,b\", c"];
    for args in [&first[..], &second[..]] {
        let r = curl(addr, "/", args);
        for n in ["x-r", "x-acl", "x-more"] {
            seen.push(format!("{n}: {:?}", header(&r, n)));
        }
    }
    seen
}

#[test]
fn acl_values_hdr_ip_and_variables_as_haproxy() {
    if !have("curl") {
        eprintln!("curl not installed: skipped");
        return;
    }
    let e = Ebb::start(&compat_config("BIND"));
    let ours = compat_observe(e.addr());
    // What HAProxy 2.6 answers (the test below compares it live).
    let expect = [
        "x-r: Some(\"2001:db8::1||10.0.0.1||192.168.1.0||2001:db8::|10.1.2.3|5||5|d|\\\"a,b,c\\\"|2\")",
        "x-acl: Some(\"1\")",
        "x-more: Some(\"web|8696274497037089104|2856167679|two|twelve=12|5|1|0|0\")",
        "x-r: Some(\"\\\"a,b\\\"|2\")",
        "x-acl: Some(\"no\")",
        "x-more: None",
    ];
    assert_eq!(ours, expect);
}

#[test]
fn acl_values_hdr_ip_and_variables_same_as_haproxy() {
    if !have("curl") || !have("haproxy") {
        eprintln!("curl or haproxy not installed: skipped");
        return;
    }
    let e = Ebb::start(&compat_config("BIND"));
    let ours = compat_observe(e.addr());
    let (_h, addr) = haproxy(|a| compat_config(&a.to_string()));
    assert_eq!(ours, compat_observe(addr));
}
