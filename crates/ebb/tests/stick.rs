//! Stick tables through the real binary: a client above a request rate is
//! denied while another is not (two source addresses), entries expire
//! (waiting on the CLI showing the table empty), `tarpit`, the counters
//! and the `show table` output side by side with HAProxy 2.6.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use common::*;

fn request(c: &mut Client, path: &str) -> Option<Resp> {
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    c.read_resp_opt(false)
}

fn sock_cfg(dir: &Path) -> (PathBuf, String) {
    let sock = dir.join("admin.sock");
    let g = format!("global\n    stats socket {} level admin\n", sock.display());
    (sock, g)
}

const DEFAULTS: &str =
    "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n";

/// The entry line of `key` in a `show table` answer.
fn entry<'a>(table: &'a str, key: &str) -> Option<&'a str> {
    table.lines().find(|l| l.contains(&format!(" key={key} ")))
}

#[test]
fn a_client_above_the_rate_is_denied_while_another_is_not() {
    let dir = scratch("stick-rate");
    let (sock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!(
        "{global}{DEFAULTS}frontend f\n    bind BIND\n    stick-table type ip size 1m expire 30s store http_req_rate(10s),http_req_cnt,conn_cur\n    http-request track-sc0 src\n    http-request deny deny_status 429 if {{ sc_http_req_rate(0) gt 20 }}\n    http-request return status 200 content-type text/plain string ok\n"
    ));
    // Client A, keep-alive from 127.0.0.1: its first 20 requests pass; the
    // 21st is above the rate and refused (the rate may only fall if the
    // machine stalls for seconds, so A goes on until refused).
    let mut a = connect_from("127.0.0.1", e.addr());
    for i in 1..=20 {
        let r = request(&mut a, "/").expect("answer");
        assert_eq!(r.status, 200, "request {i} of A");
    }
    let mut refused = None;
    for i in 21..200 {
        let r = request(&mut a, "/").expect("answer");
        if r.status == 429 {
            refused = Some(i);
            break;
        }
        assert_eq!(r.status, 200);
    }
    assert!(refused.is_some(), "A was never refused");
    // Client B, from 127.0.0.2, is not concerned.
    let mut b = connect_from("127.0.0.2", e.addr());
    for _ in 0..3 {
        assert_eq!(request(&mut b, "/").unwrap().status, 200);
    }
    // A again, on a new connection: still refused.
    let mut a2 = connect_from("127.0.0.1", e.addr());
    assert_eq!(request(&mut a2, "/").unwrap().status, 429);
    drop((a, a2, b));
    let t = cli_cmd(&sock, "show table f");
    assert!(
        t.starts_with("# table: f, type: ip, size:1048576, used:2\n"),
        "{t}"
    );
    let la = entry(&t, "127.0.0.1").expect("A's entry");
    let lb = entry(&t, "127.0.0.2").expect("B's entry");
    assert!(lb.contains(" http_req_cnt=3"), "{lb}");
    assert!(lb.contains(" http_req_rate(10000)=3"), "{lb}");
    let n = refused.unwrap() + 1;
    assert!(la.contains(&format!(" http_req_cnt={n}")), "{la}");
    // Filters select entries by value.
    let hot = cli_cmd(&sock, "show table f data.http_req_cnt gt 10");
    assert!(entry(&hot, "127.0.0.1").is_some() && entry(&hot, "127.0.0.2").is_none());
    // The connections are closed: nobody holds an entry any more.
    wait_until("conn_cur back to 0", || {
        let t = cli_cmd(&sock, "show table f");
        let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("0x")).collect();
        rows.len() == 2
            && rows
                .iter()
                .all(|l| l.contains(" use=0 ") && l.contains(" conn_cur=0"))
    });
    // `clear table ... key` forgets A: it passes again.
    assert_eq!(cli_cmd(&sock, "clear table f key 127.0.0.1"), "\n");
    let mut a3 = connect_from("127.0.0.1", e.addr());
    assert_eq!(request(&mut a3, "/").unwrap().status, 200);
}

#[test]
fn entries_expire_and_the_table_empties() {
    let dir = scratch("stick-exp");
    let (sock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!(
        "{global}{DEFAULTS}frontend f\n    bind BIND\n    stick-table type ip size 100 expire 500ms store gpc0\n    http-request track-sc1 src\n    http-request sc-inc-gpc0(1)\n    http-request return status 200 content-type text/plain string ok\n"
    ));
    for _ in 0..3 {
        assert_eq!(get(e.addr(), "/").status, 200);
    }
    let t = cli_cmd(&sock, "show table f");
    // Still there right after (unless the machine stalled 500 ms: then
    // it may be gone already, which the wait below accepts too).
    assert!(t.contains("gpc0=3") || t.contains("used:0"), "{t}");
    // Expired by the table's task: the CLI shows it empty.
    wait_until("the entry expires", || {
        cli_cmd(&sock, "show table f") == "# table: f, type: ip, size:100, used:0\n\n"
    });
    // `set table` creates an entry, which expires as well.
    assert_eq!(
        cli_cmd(&sock, "set table f key 192.0.2.1 data.gpc0 9"),
        "\n"
    );
    assert!(cli_cmd(&sock, "show table f key 192.0.2.1").contains("key=192.0.2.1 use=0 exp="));
    wait_until("the set entry expires", || {
        cli_cmd(&sock, "show table f").contains("used:0")
    });
}

#[test]
fn tarpit_answers_after_its_timeout_and_counts_gpc0() {
    let dir = scratch("stick-tarpit");
    let (sock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!(
        "{global}{DEFAULTS}frontend f\n    bind BIND\n    timeout tarpit 300ms\n    stick-table type ip size 10 expire 1m store gpc0,gpt0\n    http-request track-sc0 src\n    http-request sc-set-gpt0(0) int(7)\n    http-request tarpit if {{ sc_get_gpc0(0) gt 0 }}\n    http-request sc-inc-gpc0(0) if {{ path /bad }}\n    http-request return status 200 content-type text/plain string ok\n"
    ));
    assert_eq!(get(e.addr(), "/bad").status, 200);
    let t0 = std::time::Instant::now();
    let r = get(e.addr(), "/");
    assert_eq!(r.status, 500);
    // Held at least `timeout tarpit` (a lower bound only).
    assert!(t0.elapsed() >= std::time::Duration::from_millis(300));
    let t = cli_cmd(&sock, "show table f");
    assert!(t.contains(" gpt0=7 gpc0=1\n"), "{t}");
}

/// `show table` with what differs by nature blanked: the entry's address
/// and the milliseconds left.
fn normalize(t: &str) -> String {
    t.lines()
        .map(|l| {
            l.split(' ')
                .map(|w| {
                    if w.starts_with("0x") && w.ends_with(':') {
                        "ADDR:".to_string()
                    } else if w.starts_with("exp=") {
                        "exp=X".to_string()
                    } else {
                        w.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn show_table_matches_haproxy_side_by_side() {
    if !have("haproxy") {
        eprintln!("haproxy not installed: skipped");
        return;
    }
    let rules = "    stick-table type ip size 1m expire 30s store gpc0,gpt0,conn_cnt,conn_cur,conn_rate(10s),sess_cnt,http_req_cnt,http_req_rate(10s),http_err_cnt,gpc1,gpc1_rate(10s)\n    http-request track-sc0 src\n    http-request sc-inc-gpc0(0) if { path /inc }\n    http-request sc-inc-gpc1(0) if { path /inc } || { path /gpt }\n    http-request sc-set-gpt0(0) int(3) if { path /gpt }\n    http-request deny deny_status 429 if { sc_http_req_rate(0) gt 4 }\n    http-request return status 200 content-type text/plain string ok\nbackend strings\n    stick-table type string len 8 size 10 expire 1m store gpc0,http_req_cnt\n";
    let dir = scratch("stick-side");
    let Some((_h, haddr, hsock)) = haproxy_on(
        "stick-side-h",
        &format!("{DEFAULTS}frontend f\n    bind BIND\n{rules}"),
    ) else {
        return;
    };
    let (esock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!(
        "{global}{DEFAULTS}frontend f\n    bind BIND\n{rules}"
    ));
    // The same traffic to both: A (127.0.0.1) 5 requests on one
    // connection (refused at its 5th; the connection goes on after a
    // deny, in both), B (127.0.0.3) two on two.
    let mut statuses = Vec::new();
    for addr in [e.addr(), haddr] {
        let mut seen = Vec::new();
        let mut a = connect_from("127.0.0.1", addr);
        for p in ["/inc", "/inc", "/gpt", "/", "/"] {
            match request(&mut a, p) {
                Some(r) => seen.push(r.status),
                None => break,
            }
        }
        for p in ["/gpt", "/inc"] {
            let mut b = connect_from("127.0.0.3", addr);
            seen.push(request(&mut b, p).unwrap().status);
        }
        statuses.push(seen);
    }
    assert_eq!(statuses[0], statuses[1], "ebb vs haproxy statuses");
    let cmds = [
        "set table strings key abc data.gpc0 5",
        "set table strings key abcdefghijk data.http_req_cnt 2",
        "show table",
        "show table f",
        "show table f data.gpc0 gt 1",
        "show table f data.gpc1 gt 2",
        "set table f key 127.0.0.3 data.gpc1 7",
        "show table f data.gpc1 eq 7",
        "show table f data.http_req_cnt le 2",
        "show table f key 127.0.0.3",
        "show table strings",
        "clear table strings key abc",
        "show table strings",
        "show table nope",
        "set table f key 1.2.3.4 data.gpc0 x",
        "show table f data.nope gt 1",
        "show table f data.gpc0 xx 1",
        "show table f data.gpc0 gt",
        "show table f data.gpc0 gt 1 key 1.2.3.4",
        "show table f data.server_id gt 1",
        "show table f key zz",
        "show table f key",
        "show table f foo",
        "clear table f foo",
        "clear table",
        "clear table nope",
        "set table",
        "set table f foo",
        "set table f key",
        "set table f key 1.2.3.4 data.gpc0",
        "set table f key 1.2.3.4 foo 1",
        "set table f key 1.2.3.4 data.server_id 1",
        "set table f key 1.2.3.4 data.nope 1",
        "set table f key 127.0.0.9 data.gpc0 -1 data.conn_cnt -2",
        "show table f key 127.0.0.9",
        "show table f data.gpc0 gt -1",
        "set table strings key n data.gpc0 -7",
        "show table strings key n",
        "clear table f data.gpc0 gt 1",
        "show table f",
    ];
    // Left out on purpose: `set table f` without a key (HAProxy 2.6 then
    // empties the table; ebb refuses it with the usage), and `set` with a
    // key that is no address (HAProxy stores it as 0.0.0.0; ebb answers
    // "Invalid key").
    for c in cmds {
        let ours = cli_cmd(&esock, c);
        let theirs = cli_cmd(&hsock, c);
        assert_eq!(
            normalize(&ours),
            normalize(&theirs),
            "'{c}'\nebb:\n{ours}\nhaproxy:\n{theirs}"
        );
    }
    // Where ebb is stricter: no table emptied by a `set` without a key,
    // no entry made of a key that is no address.
    let n = cli_cmd(&esock, "show table f").lines().count();
    let r = cli_cmd(&esock, "set table f");
    assert!(
        r.starts_with("Required arguments: <table> key <key>"),
        "{r}"
    );
    assert_eq!(cli_cmd(&esock, "show table f").lines().count(), n);
    let r = cli_cmd(&esock, "set table f key zz data.gpc0 1");
    assert!(r.starts_with("Invalid key"), "{r}");
    let r = cli_cmd(&esock, "set table f key 1.2.3 data.gpc0 1");
    assert!(r.starts_with("Invalid key"), "{r}");
    assert_eq!(cli_cmd(&esock, "show table f").lines().count(), n);
    drop(e);
}

fn get_with(a: SocketAddr, path: &str, hdr: &str) -> Resp {
    let mut c = Client::connect(a);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{hdr}Connection: close\r\n\r\n").as_bytes());
    c.read_resp()
}

/// The origin that answered a request (the first word of its body).
fn answered_by(a: SocketAddr, path: &str, hdr: &str) -> String {
    get_with(a, path, hdr)
        .text()
        .split(' ')
        .next()
        .unwrap_or("")
        .to_string()
}

#[test]
fn stick_on_keeps_a_user_on_its_server_until_it_goes_away() {
    use common::origin::{Mode, Origin};
    let (o1, o2) = (Origin::start("s1", Mode::Ok), Origin::start("s2", Mode::Ok));
    let dir = scratch("stick-on");
    let (sock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!(
        "{global}{DEFAULTS}frontend f\n    bind BIND\n    default_backend be\nbackend be\n    balance roundrobin\n    stick-table type string len 32 size 1k expire 1m\n    stick on req.hdr(x-user)\n    server s1 {}\n    server s2 {}\n",
        o1.addr, o2.addr
    ));
    let who = |u: &str| answered_by(e.addr(), "/", &format!("X-User: {u}\r\n"));
    let alice = who("alice");
    let bob = who("bob");
    // Round robin alone would alternate; the table keeps each user.
    for _ in 0..4 {
        assert_eq!(who("alice"), alice);
        assert_eq!(who("bob"), bob);
    }
    let t = cli_cmd(&sock, "show table be");
    let id = if alice == "s1" { 1 } else { 2 };
    assert!(
        t.contains("key=alice use=0 exp=")
            && t.contains(&format!(" server_id={id} server_key={alice}\n")),
        "{t}"
    );
    // Alice's server goes into maintenance: she moves, and stays moved.
    assert_eq!(cli_cmd(&sock, &format!("disable server be/{alice}")), "\n");
    let moved = who("alice");
    assert_ne!(moved, alice);
    assert_eq!(cli_cmd(&sock, &format!("enable server be/{alice}")), "\n");
    for _ in 0..3 {
        assert_eq!(who("alice"), moved);
    }
}

#[test]
fn stick_store_response_then_match() {
    use common::origin::{Mode, Origin};
    let (o1, o2) = (Origin::start("s1", Mode::Ok), Origin::start("s2", Mode::Ok));
    let dir = scratch("stick-resp");
    let (sock, global) = sock_cfg(&dir);
    // The origins echo X-Forwarded-For as X-Got-XFF: the response names
    // the client, stored as an address, matched by `src` afterwards.
    let e = Ebb::start(&format!(
        "{global}{DEFAULTS}frontend f\n    bind BIND\n    default_backend be\nbackend be\n    option forwardfor\n    stick-table type ip size 1k expire 1m\n    stick match src\n    stick store-response res.hdr(x-got-xff)\n    server s1 {}\n    server s2 {}\n",
        o1.addr, o2.addr
    ));
    let first = get(e.addr(), "/").text();
    let srv = first.split(' ').next().unwrap().to_string();
    wait_until("the response's key is stored", || {
        cli_cmd(&sock, "show table be").contains("key=127.0.0.1 ")
    });
    for _ in 0..4 {
        assert!(get(e.addr(), "/").text().starts_with(&format!("{srv} ")));
    }
}

/// The usual application-session persistence: the server's Set-Cookie
/// value stored by `stick store-response res.cook(NAME)`, the client's
/// Cookie matched by `stick match req.cook(NAME)`.
#[test]
fn stick_store_response_of_a_set_cookie() {
    use common::origin::{Mode, Origin};
    let o1 = Origin::start(
        "s1",
        Mode::Canned(b"HTTP/1.1 200 OK\r\nSet-Cookie: JSESSIONID=one1; Path=/\r\nContent-Length: 3\r\n\r\ns1 "),
    );
    let o2 = Origin::start(
        "s2",
        Mode::Canned(b"HTTP/1.1 200 OK\r\nSet-Cookie: JSESSIONID=two2; Path=/\r\nContent-Length: 3\r\n\r\ns2 "),
    );
    let dir = scratch("stick-cook");
    let (sock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!(
        "{global}{DEFAULTS}frontend f\n    bind BIND\n    default_backend be\nbackend be\n    balance roundrobin\n    stick-table type string len 32 size 1k expire 1m\n    stick store-response res.cook(JSESSIONID)\n    stick match req.cook(JSESSIONID)\n    server s1 {}\n    server s2 {}\n",
        o1.addr, o2.addr
    ));
    // Round robin gives each server one exchange: both keys are stored.
    let a = answered_by(e.addr(), "/", "");
    let b = answered_by(e.addr(), "/", "");
    assert_ne!(a, b);
    wait_until("both sessions are stored", || {
        let t = cli_cmd(&sock, "show table be");
        t.contains("key=one1 ") && t.contains("key=two2 ")
    });
    // Each session stays on its server, where round robin would alternate.
    for (id, srv) in [("one1", "s1"), ("two2", "s2"), ("one1", "s1")] {
        let h = format!("Cookie: x=1; JSESSIONID={id}\r\n");
        for _ in 0..3 {
            assert_eq!(answered_by(e.addr(), "/", &h), srv);
        }
    }
}

/// HAProxy on `cfg` (its `BIND` replaced by a free port): the process,
/// its frontend's address and its admin socket; None when haproxy is not
/// installed.
fn haproxy_on(name: &str, cfg: &str) -> Option<(Hap, SocketAddr, PathBuf)> {
    let port = free_port();
    let h = haproxy_with(name, &cfg.replace("BIND", &format!("127.0.0.1:{port}")))?;
    let sock = h.sock.clone();
    Some((h, format!("127.0.0.1:{port}").parse().ok()?, sock))
}

#[test]
fn server_key_finds_the_server_by_name_or_address_as_haproxy_does() {
    use common::origin::{Mode, Origin};
    let (o1, o2) = (Origin::start("s1", Mode::Ok), Origin::start("s2", Mode::Ok));
    // Two tables, each shared by two backends listing the same servers in
    // the other order: by name (the default `srvkey`) and by address
    // (under other names). `server_id` alone would send each user to the
    // other origin in the second backend.
    let cfg = format!(
        "{DEFAULTS}frontend f\n    bind BIND\n    use_backend be2 if {{ path_beg /2 }}\n    use_backend be3 if {{ path_beg /3 }}\n    use_backend be4 if {{ path_beg /4 }}\n    default_backend be1\n\
backend byname\n    stick-table type string size 1k expire 1m\n\
backend byaddr\n    stick-table type string size 1k expire 1m srvkey addr\n\
backend be1\n    balance roundrobin\n    stick on req.hdr(x-user) table byname\n    server a {o1}\n    server b {o2}\n\
backend be2\n    balance roundrobin\n    stick on req.hdr(x-user) table byname\n    server b {o2}\n    server a {o1}\n\
backend be3\n    balance roundrobin\n    stick on req.hdr(x-user) table byaddr\n    server x {o1}\n    server y {o2}\n\
backend be4\n    balance roundrobin\n    stick on req.hdr(x-user) table byaddr\n    server q {o2}\n    server r {o1}\n",
        o1 = o1.addr,
        o2 = o2.addr
    );
    let dir = scratch("stick-srvkey");
    let (esock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!("{global}{cfg}"));
    let hap = haproxy_on("stick-srvkey-h", &cfg);
    let who =
        |a: SocketAddr, path: &str, u: &str| answered_by(a, path, &format!("X-User: {u}\r\n"));
    let steps = [
        ("/1", "alice"),
        ("/1", "bob"),
        ("/2", "alice"),
        ("/2", "bob"),
        ("/3", "carol"),
        ("/3", "dave"),
        ("/4", "carol"),
        ("/4", "dave"),
    ];
    let run = |a: SocketAddr| -> Vec<String> { steps.iter().map(|(p, u)| who(a, p, u)).collect() };
    let ours = run(e.addr());
    assert_eq!(ours, ["s1", "s2", "s1", "s2", "s1", "s2", "s1", "s2"]);
    // be4 stored carol last: its second server's id, the same address.
    let t = cli_cmd(&esock, "show table byaddr");
    assert!(
        entry(&t, "carol")
            .is_some_and(|l| l.ends_with(&format!(" server_id=2 server_key={}", o1.addr))),
        "{t}"
    );
    let Some((_h, haddr, hsock)) = hap else {
        return;
    };
    assert_eq!(ours, run(haddr), "ebb vs haproxy");
    for c in [
        "show table byname",
        "show table byaddr",
        "show table byname data.server_key eq 0",
        "show table byname data.server_key gt 0",
        "set table byname key zed data.server_key 3",
        "set table byname key zed data.server_id 2",
        "show table byname",
    ] {
        let (a, b) = (cli_cmd(&esock, c), cli_cmd(&hsock, c));
        assert_eq!(
            normalize(&a),
            normalize(&b),
            "'{c}'\nebb:\n{a}\nhaproxy:\n{b}"
        );
    }
}

/// `use-server`: a rule's server takes the request before the stick
/// table (which then stores it), a log-format name, a rule naming a
/// server in maintenance is passed over unless `option persist`; the
/// same requests to HAProxy 2.6 reach the same servers.
#[test]
fn use_server_comes_before_persistence_as_in_haproxy() {
    use common::origin::{Mode, Origin};
    let o: Vec<Origin> = ["s1", "s2", "s3"]
        .iter()
        .map(|n| Origin::start(n, Mode::Ok))
        .collect();
    let servers = format!(
        "    server s1 {}\n    server s2 {}\n    server s3 {}\n",
        o[0].addr, o[1].addr, o[2].addr
    );
    let rules = "    use-server s2 if { path_beg /two }\n    use-server %[req.hdr(x-srv)] if { req.hdr(x-srv) -m found }\n    use-server s3 if { path_beg /three }\n";
    let cfg = format!(
        "{DEFAULTS}frontend f\n    bind BIND\n    use_backend keep if {{ req.hdr(x-keep) -m found }}\n    default_backend be\n\
backend be\n    balance roundrobin\n    stick-table type string size 1k expire 1m\n    stick on req.hdr(x-user)\n{rules}{servers}\
backend keep\n    balance roundrobin\n    option persist\n{rules}{servers}"
    );
    let dir = scratch("stick-use-server");
    let (esock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!("{global}{cfg}"));
    let hap = haproxy_on("stick-use-server-h", &cfg);
    let who = answered_by;
    let run = |a: SocketAddr, sock: &Path| -> Vec<String> {
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(who(a, "/two", ""));
        }
        // Alice sticks to whatever the balancer gives her first ...
        let first = who(a, "/", "X-User: alice\r\n");
        seen.push(who(a, "/", "X-User: alice\r\n").eq(&first).to_string());
        // ... a rule sends her elsewhere, and the table follows it.
        seen.push(who(a, "/three", "X-User: alice\r\n"));
        seen.push(who(a, "/", "X-User: alice\r\n"));
        seen.push(who(a, "/", "X-Srv: s1\r\n"));
        seen.push(who(a, "/two", "X-Srv: s1\r\n"));
        // s3 in maintenance: passed over (the next rule, or the balancer
        // among s1 and s2), unless `option persist`.
        assert_eq!(cli_cmd(sock, "disable server be/s3"), "\n");
        assert_eq!(cli_cmd(sock, "disable server keep/s3"), "\n");
        seen.push(who(a, "/three", "X-Srv: s2\r\n"));
        seen.push((who(a, "/three", "") != "s3").to_string());
        seen.push(who(a, "/three", "X-Keep: 1\r\n"));
        seen.push(who(a, "/", "X-Keep: 1\r\nX-Srv: s3\r\n"));
        seen
    };
    let ours = run(e.addr(), &esock);
    assert_eq!(
        ours,
        ["s2", "s2", "s2", "true", "s3", "s3", "s1", "s2", "s2", "true", "s3", "s3"]
    );
    let Some((_h, haddr, hsock)) = hap else {
        return;
    };
    assert_eq!(ours, run(haddr, &hsock), "ebb vs haproxy");
}

/// `use-server` in a tcp proxy: every connection goes to the rule's
/// server (round robin alone would alternate).
#[test]
fn use_server_picks_the_server_of_a_tcp_session() {
    use common::origin::{Mode, Origin};
    let (o1, o2) = (Origin::start("s1", Mode::Ok), Origin::start("s2", Mode::Ok));
    let e = Ebb::start(&format!(
        "defaults\n    mode tcp\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\nlisten t\n    bind BIND\n    balance roundrobin\n    use-server s2 if {{ dst_port gt 0 }}\n    server s1 {}\n    server s2 {}\n",
        o1.addr, o2.addr
    ));
    for _ in 0..4 {
        assert!(get(e.addr(), "/").text().starts_with("s2 "));
    }
}

/// `option persist` and `force-persist` on `stick match`: a stored server
/// in maintenance still takes its user's requests (HAProxy's rule), where
/// without them the user moves; side by side with HAProxy 2.6.
#[test]
fn stick_match_keeps_a_down_server_with_option_persist_as_haproxy() {
    use common::origin::{Mode, Origin};
    let (o1, o2) = (Origin::start("s1", Mode::Ok), Origin::start("s2", Mode::Ok));
    let be = |name: &str, extra: &str| {
        format!(
            "backend {name}\n    balance roundrobin\n{extra}    stick-table type string size 1k expire 1m\n    stick on req.hdr(x-user)\n    server s1 {}\n    server s2 {}\n",
            o1.addr, o2.addr
        )
    };
    let cfg = format!(
        "{DEFAULTS}frontend f\n    bind BIND\n    use_backend keep if {{ path_beg /keep }}\n    use_backend force if {{ path_beg /force }}\n    default_backend plain\n{}{}{}",
        be("plain", ""),
        be("keep", "    option persist\n"),
        be("force", "    force-persist if { req.hdr(x-force) -m found }\n")
    );
    let dir = scratch("stick-persist");
    let (esock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!("{global}{cfg}"));
    let hap = haproxy_on("stick-persist-h", &cfg);
    let who = |a: SocketAddr, path: &str, hdr: &str| {
        answered_by(a, path, &format!("X-User: alice\r\n{hdr}"))
    };
    let run = |a: SocketAddr, sock: &Path| -> Vec<String> {
        // Alice lands on s1 in each backend (the first pick).
        for p in ["/", "/keep", "/force"] {
            assert_eq!(who(a, p, ""), "s1");
        }
        for b in ["plain", "keep", "force"] {
            assert_eq!(cli_cmd(sock, &format!("disable server {b}/s1")), "\n");
        }
        vec![
            who(a, "/keep", ""),
            who(a, "/force", "X-Force: 1\r\n"),
            who(a, "/", ""),
            who(a, "/force", ""),
        ]
    };
    let ours = run(e.addr(), &esock);
    assert_eq!(ours, ["s1", "s1", "s2", "s2"]);
    let Some((_h, haddr, hsock)) = hap else {
        return;
    };
    assert_eq!(ours, run(haddr, &hsock), "ebb vs haproxy");
}

/// `track-scN` without `table` tracks in the table of the proxy whose
/// rule it is (HAProxy 2.6: "the stick-table declared in the current
/// proxy"): a frontend's rule in the frontend's, a backend's in the
/// backend's, for `http-request` and `tcp-request content` rules alike
/// (ebb finds each rule's table when the configuration is loaded). A
/// backend's content rule counts the HTTP request too, as HAProxy's. The
/// tables read the same in HAProxy after the same requests.
#[test]
fn a_track_rule_without_table_uses_its_own_proxys_table() {
    let cfg = format!(
        "{DEFAULTS}frontend f\n    bind BIND\n    stick-table type ip size 1k expire 1m store http_req_cnt,conn_cnt\n    http-request track-sc0 src\n    default_backend b\n\
backend b\n    stick-table type ip size 1k expire 1m store http_req_cnt,conn_cnt,gpc0\n    tcp-request content track-sc1 src\n    http-request track-sc2 src\n    http-request sc-inc-gpc0(2)\n    http-request return status 200 content-type text/plain string ok\n    server never 127.0.0.1:1\n"
    );
    let dir = scratch("stick-own-table");
    let (esock, global) = sock_cfg(&dir);
    let e = Ebb::start(&format!("{global}{cfg}"));
    let hap = haproxy_on("stick-own-table-h", &cfg);
    let send = |a: SocketAddr| {
        let mut c = connect_from("127.0.0.1", a);
        for i in 0..3 {
            assert_eq!(request(&mut c, "/").expect("answer").status, 200, "{i}");
        }
    };
    send(e.addr());
    let f = cli_cmd(&esock, "show table f");
    let b = cli_cmd(&esock, "show table b");
    let lf = entry(&f, "127.0.0.1").expect("the frontend's rule tracked in f");
    assert!(lf.contains(" conn_cnt=3 http_req_cnt=3"), "{f}");
    // Both backend trackers count each request: the content rule's when
    // the backend's HTTP rules begin (HAProxy's order).
    let lb = entry(&b, "127.0.0.1").expect("the backend's rules tracked in b");
    assert!(lb.ends_with(" gpc0=3 conn_cnt=6 http_req_cnt=6"), "{b}");
    let Some((_h, haddr, hsock)) = hap else {
        return;
    };
    send(haddr);
    // The last exchange's trackers are released once its answer went.
    for sock in [&esock, &hsock] {
        wait_until("no entry in use", || {
            ["show table f", "show table b"].iter().all(|c| {
                let t = cli_cmd(sock, c);
                entry(&t, "127.0.0.1").is_some_and(|l| l.contains(" use=0 "))
            })
        });
    }
    for c in ["show table f", "show table b"] {
        let (ours, theirs) = (cli_cmd(&esock, c), cli_cmd(&hsock, c));
        assert_eq!(
            normalize(&ours),
            normalize(&theirs),
            "'{c}'\nebb:\n{ours}\nhaproxy:\n{theirs}"
        );
    }
}

/// A backend holding a stick table and rules but no server is a backend
/// like any (HAProxy's): a frontend routes to it, its rules track into
/// its table and answer, `show stat` reports it UP (HAProxy's rule for a
/// backend without servers), beside HAProxy. ebb used to take such a
/// backend for a bare table and refuse `default_backend` to it.
#[test]
fn a_backend_of_a_table_and_rules_without_servers_answers() {
    // (`sock`: ebb's admin socket; `haproxy_with` adds HAProxy's.)
    let cfg = |bind: &str, sock: Option<&Path>| {
        let global = sock
            .map(|p| format!("global\n    stats socket {} level admin\n", p.display()))
            .unwrap_or_default();
        format!(
            "{global}{DEFAULTS}\
             frontend fe\n    bind {bind}\n    default_backend b\n\
             backend b\n    stick-table type ip size 1k expire 30s store http_req_cnt\n\
             \x20   http-request track-sc1 src\n\
             \x20   http-request return status 200 content-type text/plain lf-string \"n=%[sc_http_req_cnt(1)]\"\n"
        )
    };
    let check = |addr: SocketAddr, sock: &Path, who: &str| {
        for n in 1..=2 {
            let r = get(addr, "/");
            assert_eq!(r.status, 200, "{who}");
            assert_eq!(String::from_utf8_lossy(&r.body), format!("n={n}"), "{who}");
        }
        let stat = cli_cmd(sock, "show stat");
        let row = stat
            .lines()
            .find(|l| l.starts_with("b,BACKEND,"))
            .unwrap_or_else(|| panic!("{who}: {stat}"));
        assert_eq!(row.split(',').nth(17), Some("UP"), "{who}: {row}");
    };
    let d = scratch("stick-nosrv");
    let sock = d.join("e.sock");
    let e = Ebb::start(&cfg("BIND", Some(&sock)));
    check(e.addr(), &sock, "ebb");
    let port = free_port();
    if let Some(h) = haproxy_with("stick-nosrv-hap", &cfg(&format!("127.0.0.1:{port}"), None)) {
        check(
            format!("127.0.0.1:{port}").parse().unwrap(),
            &h.sock,
            "haproxy",
        );
    }
}
