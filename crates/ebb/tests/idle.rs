//! Idle keep-alive HTTP/1 connections (issue 12): between two exchanges a
//! connection gives its exchange state (its stream, its variables' store,
//! its buffers) back to its thread's pools, and takes them again when the
//! next request comes, without one connection seeing what another left.

mod common;

use std::net::SocketAddr;

use common::*;

/// The body of the answer to one request on `c`, with the request's
/// `extra` header lines.
fn ask(c: &mut Client, extra: &str) -> String {
    c.send(format!("GET / HTTP/1.1\r\nHost: t\r\n{extra}\r\n").as_bytes());
    let r = c.read_resp();
    assert_eq!(r.status, 200);
    r.text()
}

/// Connections keep what lasts (the request count, session variables)
/// and only that: a transaction variable of one connection is not seen
/// by the next connection that reuses the pooled state.
fn check_variables(a: SocketAddr) {
    let mut one = Client::connect(a);
    assert_eq!(ask(&mut one, "x-who: one\r\n"), "txn=one sess= first=1");
    // `one` idles; `two` takes the pooled state.
    let mut two = Client::connect(a);
    assert_eq!(ask(&mut two, ""), "txn= sess= first=1");
    // `one` comes back: not its first request any more.
    assert_eq!(ask(&mut one, ""), "txn= sess= first=0");
    // A session variable lasts from one request of its connection to the
    // next, and only there.
    let mut three = Client::connect(a);
    assert_eq!(ask(&mut three, "x-sess: s3\r\n"), "txn= sess=s3 first=1");
    let mut four = Client::connect(a);
    assert_eq!(ask(&mut four, ""), "txn= sess= first=1");
    assert_eq!(ask(&mut three, ""), "txn= sess=s3 first=0");
    assert_eq!(ask(&mut two, "x-who: two\r\n"), "txn=two sess= first=0");
    assert_eq!(ask(&mut four, ""), "txn= sess= first=0");
}

const RULES: &str = "\
    http-request set-var(txn.who) req.hdr(x-who) if { req.hdr(x-who) -m found }
    http-request set-var(sess.seen) req.hdr(x-sess) if { req.hdr(x-sess) -m found }
    http-request return status 200 content-type text/plain lf-string \"txn=%[var(txn.who)] sess=%[var(sess.seen)] first=%[http_first_req]\"
";

/// Runs `check` against ebb serving `rules` on one thread, then
/// against haproxy (`name`) with the same rules: the same answers.
fn side_by_side(name: &str, rules: &str, check: fn(SocketAddr)) {
    let e = Ebb::start(&format!(
        "global\n    nbthread 1\ndefaults\n    mode http\n    timeout client 30s\n\
         frontend fe\n    bind BIND\n{rules}"
    ));
    check(e.addr());
    let port = free_port();
    let hap = haproxy_with(
        name,
        &format!(
            "defaults\n    mode http\n    timeout client 30s\n\
             frontend fe\n    bind 127.0.0.1:{port}\n{rules}"
        ),
    );
    if hap.is_some() {
        check(format!("127.0.0.1:{port}").parse().unwrap());
    }
}

/// [`side_by_side`] with [`RULES`].
fn with_rules_side_by_side(name: &str, check: fn(SocketAddr)) {
    side_by_side(name, RULES, check);
}

#[test]
fn idle_connections_keep_their_session_and_nothing_of_others() {
    with_rules_side_by_side("idle-hap", check_variables);
}

/// More idle connections than the thread lets keep their state: those
/// that keep it and those that take a pooled one both start each
/// exchange with no transaction variable of the last, and count their
/// requests.
fn check_many(a: SocketAddr) {
    let mut conns: Vec<Client> = (0..WARM + 8).map(|_| Client::connect(a)).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        let want = format!("txn=c{i} sess= first=1");
        assert_eq!(ask(c, &format!("x-who: c{i}\r\n")), want);
    }
    for c in conns.iter_mut().rev() {
        assert_eq!(ask(c, ""), "txn= sess= first=0");
    }
}

#[test]
fn connections_that_keep_their_state_while_idle_carry_nothing_over() {
    with_rules_side_by_side("idle-many-hap", check_many);
}

/// Connections that close after their answer (`Connection: close`) give
/// their state to the thread's pools for the next connection (instead of
/// keeping it in a warm place, freed with them): the next one sees
/// nothing of theirs, nor does a connection that idled in a warm place
/// before it closed.
fn check_closing(a: SocketAddr) {
    for i in 0..4 {
        let mut c = Client::connect(a);
        let extra = format!("x-who: c{i}\r\nx-sess: s{i}\r\nConnection: close\r\n");
        assert_eq!(ask(&mut c, &extra), format!("txn=c{i} sess=s{i} first=1"));
        assert!(c.closed());
        let mut d = Client::connect(a);
        assert_eq!(ask(&mut d, "Connection: close\r\n"), "txn= sess= first=1");
        assert!(d.closed());
    }
    let mut one = Client::connect(a);
    assert_eq!(ask(&mut one, "x-sess: kept\r\n"), "txn= sess=kept first=1");
    let last = "x-who: one\r\nConnection: close\r\n";
    assert_eq!(ask(&mut one, last), "txn=one sess=kept first=0");
    assert!(one.closed());
    let mut two = Client::connect(a);
    assert_eq!(ask(&mut two, ""), "txn= sess= first=1");
    assert_eq!(ask(&mut two, ""), "txn= sess= first=0");
}

#[test]
fn closing_connections_leave_nothing_to_the_next() {
    with_rules_side_by_side("idle-close-hap", check_closing);
}

const TRACKING: &str = "\
    tcp-request connection track-sc0 src table conns
    http-request track-sc1 req.hdr(x-key) table keys if { req.hdr(x-key) -m found }
    http-request return status 200 content-type text/plain lf-string \"cur=%[sc0_conn_cur] req=%[sc0_http_req_cnt] key=%[sc1_http_req_cnt]\"
backend conns
    stick-table type ip size 100 store conn_cur,http_req_cnt
backend keys
    stick-table type string len 32 size 100 store http_req_cnt
";

/// More idle connections than the thread lets keep their whole state:
/// those that idle in the small form keep their session trackers, and
/// their stream's trackers count as with the others.
fn check_tracking(a: SocketAddr) {
    let n = WARM + 8;
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = Client::connect(a);
        let want = format!("cur={} req={} key=1", i + 1, i + 1);
        assert_eq!(ask(&mut c, &format!("x-key: k{i}\r\n")), want);
        conns.push(c);
    }
    for (i, c) in conns.iter_mut().enumerate().rev() {
        let want = format!("cur={n} req={} key=2", 2 * n - i);
        assert_eq!(ask(c, &format!("x-key: k{i}\r\n")), want);
    }
}

#[test]
fn idle_connections_keep_their_trackers() {
    side_by_side("idle-track-hap", TRACKING, check_tracking);
}

/// An idle connection past the thread's warm places is still closed by
/// its keep-alive timeout, and `shutdown session` still reaches it.
#[test]
fn small_idle_connections_still_time_out_and_can_be_shut() {
    let dir = std::env::temp_dir().join(format!("ebb-idle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("admin.sock");
    let short = free_port();
    let e = Ebb::start(&format!(
        "global\n    nbthread 1\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 60s\n\
         \x20   timeout http-keep-alive 60s\n\
         frontend fe\n    bind BIND\n\
         \x20   http-request return status 200 content-type text/plain string hello\n\
         frontend short\n    bind 127.0.0.1:{}\n    timeout http-keep-alive 300ms\n\
         \x20   http-request return status 200 content-type text/plain string hello\n",
        sock.display(),
        short
    ));
    let mut conns: Vec<Client> = (0..WARM + 4).map(|_| Client::connect(e.addr())).collect();
    for c in conns.iter_mut() {
        assert_eq!(ask(c, ""), "hello");
    }
    // The last one idles in the small form (the warm places are taken):
    // `shutdown session` closes it.
    let peer = conns.last().unwrap().s.local_addr().unwrap().to_string();
    let list = cli_cmd(&sock, "show sess");
    let line = list
        .lines()
        .find(|l| l.contains(&format!("src={peer} ")))
        .unwrap_or_else(|| panic!("{peer} not in {list}"));
    let id = line.split(':').next().unwrap().trim().to_string();
    assert_eq!(cli_cmd(&sock, &format!("shutdown session {id}")), "\n");
    assert!(conns.last_mut().unwrap().closed());
    // Its neighbours still answer.
    assert_eq!(ask(&mut conns[WARM + 2], ""), "hello");
    // A connection of the frontend with a short keep-alive timeout idles
    // in the small form too (the warm places are still taken): its timer
    // closes it.
    let mut c = Client::connect(format!("127.0.0.1:{short}").parse().unwrap());
    assert_eq!(ask(&mut c, ""), "hello");
    assert!(c.closed());
    let _ = std::fs::remove_dir_all(&dir);
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// Open connections the test holds (below the usual 1,024 descriptors).
const IDLE: usize = 800;

/// Idle connections per thread that keep their exchange state (ebb's
/// `worker::WARM_IDLE_MAX`): a bounded cost per thread, not per
/// connection, so the measurement starts once they are taken.
const WARM: usize = 64;

#[test]
fn an_idle_keep_alive_connection_holds_no_exchange_state() {
    let e = Ebb::start(
        "global\n    nbthread 1\ndefaults\n    mode http\n    timeout client 60s\n\
         \x20   timeout http-keep-alive 60s\n\
         frontend fe\n    bind BIND\n\
         \x20   http-request return status 200 content-type text/plain string hello\n",
    );
    // Warm up: the pools hold a connection's exchange state, and the
    // thread's few idle connections that keep theirs are taken.
    for _ in 0..20 {
        assert_eq!(get(e.addr(), "/").status, 200);
    }
    let mut warm = Vec::with_capacity(WARM);
    for _ in 0..WARM {
        let mut c = Client::connect(e.addr());
        assert_eq!(ask(&mut c, ""), "hello");
        warm.push(c);
    }
    let before = rss_kb(e.pid());
    let mut conns = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        let mut c = Client::connect(e.addr());
        assert_eq!(ask(&mut c, ""), "hello");
        conns.push(c);
    }
    let after = rss_kb(e.pid());
    let per_conn = after.saturating_sub(before) * 1024 / IDLE as u64;
    println!("{per_conn} bytes per idle connection ({before} kB -> {after} kB)");
    // With its stream and its variables kept while idle, a connection
    // cost about 2,300 bytes; without them, about 1,280; with a smaller
    // state and registry entry, about 1,080; in the small idle form
    // (`Idle`) with a slab for the registry, about 670-750 (debug build).
    assert!(
        per_conn < 1_000,
        "{per_conn} bytes per idle connection ({before} kB -> {after} kB)"
    );
    // They all still answer.
    for c in conns.iter_mut().step_by(50) {
        assert_eq!(ask(c, ""), "hello");
    }
    for c in warm.iter_mut().step_by(16) {
        assert_eq!(ask(c, ""), "hello");
    }
}
