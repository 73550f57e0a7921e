//! A server's connections and counters as the CLI and the stats show
//! them: `show servers conn`, the stats' `idle_conn_cur`,
//! `safe_conn_cur`, `used_conn_cur`, `need_conn_est`, and what a server's
//! `stot`, `lbtot`, `req_tot` and `hrsp_*` count, side by side with
//! HAProxy 2.6.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use common::origin::{Gate, Mode, Origin};
use common::*;

fn cfg(sock: &Path, bind: &str, origin: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n    nbthread 1\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 2s\n\
         frontend f\n    bind {bind}\n    default_backend b\n\
         backend b\n    http-reuse always\n    server s1 {origin}\n    server s2 {origin} pool-max-conn 0\n    \
         server s3 {origin} pool-max-conn 5 pool-purge-delay 3s\n",
        sock.display()
    )
}

/// `show servers conn b` without its header, and the stats' four
/// columns of each server.
fn look(sock: &Path) -> (Vec<String>, Vec<String>) {
    let conn = cli_cmd(sock, "show servers conn b");
    let lines = conn
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let cols = ["s1", "s2", "s3"]
        .iter()
        .map(|s| {
            let r = stat_row(sock, "b", s);
            [
                "idle_conn_cur",
                "safe_conn_cur",
                "used_conn_cur",
                "need_conn_est",
            ]
            .iter()
            .map(|k| r.get(*k).cloned().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" ")
        })
        .collect();
    (lines, cols)
}

/// What one program shows: at rest, with a request waiting on `s1`, then
/// after seven requests on one keep-alive connection (round robin: `s1`
/// gets the first, fourth and seventh, the later ones on the idle
/// connection the first left, which is then safe; `s2` keeps no idle
/// connection, `pool-max-conn 0`).
fn run(a: SocketAddr, sock: &Path, gate: &Gate) -> Vec<(Vec<String>, Vec<String>)> {
    let mut seen = vec![look(sock)];
    gate.close();
    let mut waiting = Client::connect(a);
    waiting.send(b"GET /w HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    wait_until("the request in use on s1", || {
        look(sock).1[0].ends_with(" 1 1")
    });
    seen.push(look(sock));
    gate.open();
    assert_eq!(waiting.read_resp().status, 200);
    let mut c = Client::connect(a);
    for i in 0..7 {
        c.send(format!("GET /{i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        assert_eq!(c.read_resp().status, 200);
    }
    // The last answer's connection is parked once the answer is out.
    wait_until("s1's connection idle", || look(sock).1[0] == "0 1 0 1");
    seen.push(look(sock));
    seen
}

#[test]
fn show_servers_conn_counts_used_idle_safe_and_the_need_as_haproxy() {
    let gate = Gate::default();
    gate.open();
    let o = Origin::start("conns", Mode::Gate(gate.clone()));
    let (e, sock) = ebb_with_admin("srvconns", |s, b| cfg(s, b, o.addr));
    let head = cli_cmd(&sock, "show servers conn");
    assert!(
        head.starts_with("# bkname/svname bkid/svid addr port - purge_delay used_cur used_max need_est unsafe_nb safe_nb idle_lim idle_cur idle_per_thr[1]\n"),
        "{head}"
    );
    let ours = run(e.addr(), &sock, &gate);
    let port = o.addr.port();
    let line = |s: &str, id: u32, tail: &str| format!("b/{s} 3/{id} 127.0.0.1 {port} - {tail}");
    assert_eq!(
        ours[0].0,
        [
            line("s1", 1, "5000 0 0 0 0 0 -1 0 0"),
            line("s2", 2, "5000 0 0 0 0 0 0 0"),
            line("s3", 3, "3000 0 0 0 0 0 5 0 0"),
        ]
    );
    assert_eq!(ours[1].0[0], line("s1", 1, "5000 1 1 1 0 0 -1 0 0"));
    assert_eq!(
        ours[2].0,
        [
            line("s1", 1, "5000 0 1 1 0 1 -1 1 1"),
            line("s2", 2, "5000 0 1 1 0 0 0 0"),
            line("s3", 3, "3000 0 1 1 0 1 5 1 1"),
        ]
    );
    assert_eq!(ours[2].1, ["0 1 0 1", "0 0 0 1", "0 1 0 1"]);
    assert!(
        cli_cmd(&sock, "show servers conn nope").contains("Can't find backend 'nope'."),
        "an unknown backend"
    );
    drop(e);
    let Some((h, hap)) = haproxy_beside("srvconns", |s, b| cfg(s, b, o.addr)) else {
        return;
    };
    let theirs = run(hap, &h.sock, &gate);
    assert_eq!(theirs, ours.to_vec(), "haproxy (left), ebb (right)");
}

fn purge_cfg(sock: &Path, bind: &str, origin: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n    nbthread 1\n\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 2s\n\
         frontend f\n    bind {bind}\n    default_backend b\n\
         backend b\n    http-reuse always\n    server s1 {origin} pool-purge-delay 1500ms\n",
        sock.display()
    )
}

/// `(used_max, need_est, idle_cur)` of `b/s1`, each new value once, from
/// one request until its idle connection is closed.
fn purge_steps(a: SocketAddr, sock: &Path) -> Vec<(String, String, String)> {
    let mut c = Client::connect(a);
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.read_resp().status, 200);
    let mut steps: Vec<(String, String, String)> = Vec::new();
    wait_until("the idle connection purged", || {
        let out = cli_cmd(sock, "show servers conn b");
        let Some(l) = out.lines().find(|l| l.starts_with("b/s1 ")) else {
            return false;
        };
        let f: Vec<&str> = l.split(' ').collect();
        let now = (f[7].to_string(), f[8].to_string(), f[12].to_string());
        if steps.last() != Some(&now) {
            steps.push(now);
        }
        steps.len() > 1 && steps.last().is_some_and(|s| s.2 == "0")
    });
    steps
}

/// `pool-purge-delay` as HAProxy 2.6 means it: every period, half of the
/// idle connections beyond the estimate of those the server needs close.
/// One request leaves one idle connection; the estimate (1) keeps it for
/// two periods while it decays, and the third closes it.
#[test]
fn an_idle_connection_lasts_while_the_estimate_needs_it() {
    let o = Origin::start("purge", Mode::Ok);
    let (e, sock) = ebb_with_admin("srvpurge", |s, b| purge_cfg(s, b, o.addr));
    let ours = purge_steps(e.addr(), &sock);
    let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        ours,
        [
            s("1", "1", "1"),
            s("0", "1", "1"),
            s("0", "0", "1"),
            s("0", "0", "0")
        ]
    );
    drop(e);
    let Some((h, hap)) = haproxy_beside("srvpurge", |s, b| purge_cfg(s, b, o.addr)) else {
        return;
    };
    assert_eq!(
        purge_steps(hap, &h.sock),
        ours,
        "haproxy (left), ebb (right)"
    );
}

fn count_cfg(sock: &Path, bind: &str, servers: &[SocketAddr; 4]) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 2s\n\
         frontend f\n    bind {bind}\n    default_backend b\n\
         backend b\n    retries 1\n    server ok {}\n    server bad {}\n    server none {}\n    server early {}\n",
        sock.display(),
        servers[0],
        servers[1],
        servers[2],
        servers[3],
    )
}

/// Eight requests in round robin; then each server's counters.
fn counts(a: SocketAddr, sock: &Path) -> Vec<String> {
    let mut statuses = Vec::new();
    for i in 0..8 {
        let mut c = Client::connect(a);
        c.send(format!("GET /{i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
        let mut r = c.read_resp();
        while r.status < 200 {
            r = c.read_resp();
        }
        statuses.push(r.status);
    }
    assert_eq!(statuses, [200, 502, 503, 200, 200, 502, 503, 200]);
    ["ok", "bad", "none", "early", "BACKEND"]
        .iter()
        .map(|s| {
            let r = stat_row(sock, "b", s);
            let k = [
                "stot", "lbtot", "econ", "eresp", "wretr", "req_tot", "hrsp_1xx", "hrsp_2xx",
                "hrsp_5xx",
            ];
            let v: Vec<String> = k
                .iter()
                .map(|k| format!("{k}={}", r.get(*k).cloned().unwrap_or_default()))
                .collect();
            format!("{s} {}", v.join(" "))
        })
        .collect()
}

/// A server's `hrsp_*` and `req_tot` count the heads it sent (an
/// interim 100 too), not the 502 and 503 the proxy answers for it; its
/// `stot` counts each connection attempt (a retry too), `lbtot` each
/// stream handed to it.
#[test]
fn a_servers_counters_count_what_it_did() {
    let ok = Origin::start("ok", Mode::Ok);
    let bad = Origin::start("bad", Mode::Garbage);
    let none = closed_port();
    let early = Origin::start(
        "early",
        Mode::Canned(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
    );
    let servers = [ok.addr, bad.addr, none.addr, early.addr];
    let (e, sock) = ebb_with_admin("srvcount", |s, b| count_cfg(s, b, &servers));
    let ours = counts(e.addr(), &sock);
    assert_eq!(
        ours,
        [
            "ok stot=2 lbtot=2 econ=0 eresp=0 wretr=0 req_tot=2 hrsp_1xx=0 hrsp_2xx=2 hrsp_5xx=0",
            "bad stot=2 lbtot=2 econ=0 eresp=2 wretr=0 req_tot=0 hrsp_1xx=0 hrsp_2xx=0 hrsp_5xx=0",
            "none stot=4 lbtot=2 econ=2 eresp=0 wretr=2 req_tot=0 hrsp_1xx=0 hrsp_2xx=0 hrsp_5xx=0",
            "early stot=2 lbtot=2 econ=0 eresp=0 wretr=0 req_tot=4 hrsp_1xx=2 hrsp_2xx=2 hrsp_5xx=0",
            "BACKEND stot=8 lbtot=8 econ=2 eresp=2 wretr=2 req_tot=8 hrsp_1xx=0 hrsp_2xx=4 hrsp_5xx=4",
        ]
    );
    drop(e);
    let Some((h, hap)) = haproxy_beside("srvcount", |s, b| count_cfg(s, b, &servers)) else {
        return;
    };
    assert_eq!(counts(hap, &h.sock), ours, "haproxy (left), ebb (right)");
}

fn persist_cfg(sock: &Path, bind: &str, servers: &[SocketAddr; 2]) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 2s\n\
         frontend f\n    bind {bind}\n    default_backend b\n\
         backend b\n    use-server s1 if {{ path_beg /p }}\n    server s1 {}\n    server s2 {}\n",
        sock.display(),
        servers[0],
        servers[1],
    )
}

/// Three requests `use-server` sends to s1 and four the balancer spreads;
/// then `clear counters all`.
fn persist_counts(a: SocketAddr, sock: &Path) -> Vec<String> {
    for path in ["/p1", "/a", "/p2", "/b", "/c", "/p3", "/d"] {
        let mut c = Client::connect(a);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
        assert_eq!(c.read_resp().status, 200, "{path}");
    }
    let row = |s: &str| {
        let r = stat_row(sock, "b", s);
        let v: Vec<String> = ["stot", "lbtot"]
            .iter()
            .map(|k| format!("{k}={}", r.get(*k).cloned().unwrap_or_default()))
            .collect();
        format!("{s} {}", v.join(" "))
    };
    let mut out: Vec<String> = ["s1", "s2", "BACKEND"].iter().map(|s| row(s)).collect();
    cli_cmd(sock, "clear counters all");
    out.extend(["s1", "s2", "BACKEND"].iter().map(|s| row(s)));
    out
}

/// `lbtot` counts the balancer's choices, not the streams persistence
/// (`use-server`) sent to a server, which `stot` counts; `clear counters
/// all` zeroes both.
#[test]
fn lbtot_counts_the_balancers_choices_only() {
    let s1 = Origin::start("s1", Mode::Ok);
    let s2 = Origin::start("s2", Mode::Ok);
    let servers = [s1.addr, s2.addr];
    let (e, sock) = ebb_with_admin("srvlb", |s, b| persist_cfg(s, b, &servers));
    let ours = persist_counts(e.addr(), &sock);
    assert_eq!(
        ours,
        [
            "s1 stot=5 lbtot=2",
            "s2 stot=2 lbtot=2",
            "BACKEND stot=7 lbtot=4",
            "s1 stot=0 lbtot=0",
            "s2 stot=0 lbtot=0",
            "BACKEND stot=0 lbtot=0",
        ]
    );
    drop(e);
    let Some((h, hap)) = haproxy_beside("srvlb", |s, b| persist_cfg(s, b, &servers)) else {
        return;
    };
    assert_eq!(
        persist_counts(hap, &h.sock),
        ours,
        "haproxy (left), ebb (right)"
    );
}

fn broke_cfg(sock: &Path, bind: &str, servers: &[SocketAddr; 2]) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 2s\n\
         frontend f\n    bind {bind}\n    default_backend b\n\
         backend b\n    server reset {}\n    server close {}\n",
        sock.display(),
        servers[0],
        servers[1],
    )
}

/// Four requests in round robin to a server that resets after the
/// request and one that closes after it: each a 502; the servers' `eresp`.
fn broke_counts(a: SocketAddr, sock: &Path) -> Vec<String> {
    for i in 0..4 {
        assert_eq!(get(a, &format!("/{i}")).status, 502);
    }
    ["reset", "close", "BACKEND"]
        .iter()
        .map(|s| {
            let r = stat_row(sock, "b", s);
            let v = |k: &str| r.get(k).cloned().unwrap_or_default();
            format!(
                "{s} eresp={} econ={} wretr={}",
                v("eresp"),
                v("econ"),
                v("wretr")
            )
        })
        .collect()
}

/// A server connection's error before the answer (a reset) counts 2 in
/// `eresp`, a close 1: HAProxy 2.6's stream (process_stream, on the
/// connection's error) and its HTTP analyser each count an error (ebb
/// counted 1 for both).
#[test]
fn a_reset_counts_twice_in_eresp_a_close_once() {
    let reset = common::origin::serve_each(|mut s| {
        if common::origin::read_head(&mut s).is_some() {
            let _ = socket2::SockRef::from(&s).set_linger(Some(std::time::Duration::ZERO));
        }
    });
    let close = common::origin::serve_each(|mut s| {
        if common::origin::read_head(&mut s).is_some() {
            let _ = s.shutdown(std::net::Shutdown::Write);
            common::origin::drain(&mut s);
        }
    });
    let servers = [reset, close];
    let (e, sock) = ebb_with_admin("srvbroke", |s, b| broke_cfg(s, b, &servers));
    let ours = broke_counts(e.addr(), &sock);
    assert_eq!(
        ours,
        [
            "reset eresp=4 econ=0 wretr=0",
            "close eresp=2 econ=0 wretr=0",
            "BACKEND eresp=6 econ=0 wretr=0",
        ]
    );
    drop(e);
    let Some((h, hap)) = haproxy_beside("srvbroke", |s, b| broke_cfg(s, b, &servers)) else {
        return;
    };
    assert_eq!(
        broke_counts(hap, &h.sock),
        ours,
        "haproxy (left), ebb (right)"
    );
}

/// An origin whose connections the test closes: each accepted connection
/// is served on its own thread (requests without body, a 2-byte answer
/// each), its requests logged as `(connection number, path)`; the
/// connection a `close` names ends after its current answer.
struct Closer {
    addr: SocketAddr,
    log: std::sync::Arc<std::sync::Mutex<Vec<(usize, String)>>>,
    conns: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Closer {
    fn start() -> Closer {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (lg, cs) = (log.clone(), conns.clone());
        std::thread::spawn(move || {
            for (n, s) in l.incoming().enumerate() {
                let Ok(s) = s else { return };
                cs.lock().unwrap().push(s.try_clone().unwrap());
                let lg = lg.clone();
                std::thread::spawn(move || {
                    let mut s = s;
                    let mut buf = Vec::new();
                    while let Some((head, _)) = common::origin::read_request(&mut s, &mut buf) {
                        let path = head.split(' ').nth(1).unwrap_or("").to_string();
                        lg.lock().unwrap().push((n, path));
                        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        Closer { addr, log, conns }
    }

    /// Closes the origin's side of connection `n` (its FIN reaches the
    /// proxy at once).
    fn close(&self, n: usize) {
        let c = &self.conns.lock().unwrap()[n];
        let _ = c.shutdown(std::net::Shutdown::Both);
    }

    fn log(&self) -> Vec<(usize, String)> {
        self.log.lock().unwrap().clone()
    }
}

fn closer_cfg(sock: &Path, bind: &str, origin: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n    nbthread 1\n\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 2s\n\
         frontend f\n    bind {bind}\n    default_backend b\n\
         backend b\n    server s1 {origin} pool-purge-delay 60s\n",
        sock.display()
    )
}

/// `idle_cur` of `b/s1` (`show servers conn b`).
fn idle_cur(sock: &Path) -> String {
    let out = cli_cmd(sock, "show servers conn b");
    out.lines()
        .find(|l| l.starts_with("b/s1 "))
        .and_then(|l| l.split(' ').nth(12))
        .unwrap_or("?")
        .to_string()
}

/// When the server closes the first client's idle connection.
#[derive(Clone, Copy, Debug, PartialEq)]
enum CloseWhen {
    /// While the client is there; then the client leaves.
    ThenClientLeaves,
    /// After the client left.
    AfterClientLeft,
    /// While the client is there, which stays for its next requests.
    WhileClientStays,
}

/// One request of a first client leaves an idle connection, which the
/// server closes (`when`). The closed connection leaves the pool (idle
/// count back to 0); then two more requests (of a second client, or of
/// the first that stayed) go on one new connection, kept between them.
/// What the origin saw, by connection.
fn closed_idle_steps(
    a: SocketAddr,
    sock: &Path,
    o: &Closer,
    when: CloseWhen,
) -> Vec<(usize, String)> {
    let mut c1 = Client::connect(a);
    c1.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c1.read_resp().status, 200);
    wait_until("the first connection idle", || idle_cur(sock) == "1");
    match when {
        CloseWhen::AfterClientLeft => {
            drop(c1);
            // (The client's leave moves the connection to the thread's
            // idle watcher; nothing of the idle count changes.)
            wait_until("the client gone", || {
                stat_row(sock, "f", "FRONTEND")
                    .get("scur")
                    .map(String::as_str)
                    == Some("0")
            });
            o.close(0);
            c1 = Client::connect(a);
        }
        CloseWhen::ThenClientLeaves => {
            o.close(0);
            drop(c1);
            c1 = Client::connect(a);
        }
        CloseWhen::WhileClientStays => o.close(0),
    }
    wait_until("the closed idle connection out of the pool", || {
        idle_cur(sock) == "0"
    });
    for p in ["/b", "/c"] {
        c1.send(format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        assert_eq!(c1.read_resp().status, 200);
    }
    o.log()
}

/// A server's close of an idle connection takes it out of the pool at
/// once, as HAProxy 2.6 closes an idle connection on its poller's event:
/// whether the close came while the connection's client was still there
/// or after it left. Before, ebb kept such a connection until a request
/// tried it or the purge timer, and counted it idle meanwhile: the next
/// client's connection was then closed after its first answer (the pool
/// refuses a second idle connection when the server needs one), and its
/// next request went on a third connection (HAProxy's reg-test
/// compression/basic failed so, by timing).
#[test]
fn a_closed_idle_connection_leaves_the_pool_at_once() {
    let s = |n: usize, p: &str| (n, p.to_string());
    let want = [s(0, "/a"), s(1, "/b"), s(1, "/c")];
    let cases = [
        CloseWhen::ThenClientLeaves,
        CloseWhen::AfterClientLeft,
        CloseWhen::WhileClientStays,
    ];
    // Each case on a new program: the last connection stays idle after it.
    let ours = cases.map(|when| {
        let o = Closer::start();
        let (e, sock) = ebb_with_admin("srvclosed", |s, b| closer_cfg(s, b, o.addr));
        (when, closed_idle_steps(e.addr(), &sock, &o, when))
    });
    for (when, seen) in &ours {
        assert_eq!(seen, &want, "{when:?}");
    }
    let mut theirs = Vec::new();
    for when in cases {
        let o = Closer::start();
        let Some((h, hap)) = haproxy_beside("srvclosed", |s, b| closer_cfg(s, b, o.addr)) else {
            return;
        };
        theirs.push((when, closed_idle_steps(hap, &h.sock, &o, when)));
    }
    assert_eq!(theirs, ours.to_vec(), "haproxy (left), ebb (right)");
}
