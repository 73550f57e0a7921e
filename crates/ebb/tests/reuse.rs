//! `http-reuse` and the idle pool of server connections, with HAProxy 2.6's
//! meaning, checked side by side with `haproxy` where it is installed: an
//! origin names each answer's connection (`X-Conn`, in accept order) and
//! its rank on that connection (`X-Nth`), and each scenario's trace must be
//! the same through both.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;

/// An origin answering every request `200` with `X-Conn: N` (the
/// connection's number, from 1) and `X-Nth: K` (the request's rank on it).
struct Tagger {
    addr: SocketAddr,
    conns: Arc<AtomicUsize>,
}

impl Tagger {
    fn start() -> Tagger {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let conns = Arc::new(AtomicUsize::new(0));
        let n = Arc::clone(&conns);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                let id = n.fetch_add(1, Ordering::SeqCst) + 1;
                std::thread::spawn(move || serve_tagged(s, id));
            }
        });
        Tagger { addr, conns }
    }

    fn conns(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }
}

/// Answers bodiless requests until the connection closes.
fn serve_tagged(mut s: TcpStream, id: usize) {
    let mut buf = Vec::new();
    let mut nth = 0;
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            nth += 1;
            let r = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Conn: {id}\r\nX-Nth: {nth}\r\n\r\n"
            );
            if s.write_all(r.as_bytes()).is_err() {
                return;
            }
        }
        match s.read_retry(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A proxy under test: its address and its CLI socket.
struct Under {
    addr: SocketAddr,
    sock: PathBuf,
}

/// The proxy's connections now (`CurrConns` of `show info`); `None` when
/// the CLI did not answer (asked again).
fn curr_conns(sock: &Path) -> Option<u64> {
    let mut s = std::os::unix::net::UnixStream::connect(sock).ok()?;
    s.write_all(b"show info\n").ok()?;
    let mut info = String::new();
    s.read_to_string(&mut info).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("CurrConns: "))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits for a CLI answer and returns it.
fn curr_conns_now(sock: &Path) -> u64 {
    let mut n = None;
    wait_until("the CLI answers", || {
        n = curr_conns(sock);
        n.is_some()
    });
    n.unwrap_or_default()
}

/// Clients one after the other, each sending `n` requests on its own
/// connection then closing it; the trace is `(X-Conn, X-Nth)` per answer.
/// Between clients, the proxy is left to see the close (the server
/// connection the client had goes back to the pool then).
fn clients(u: &Under, per_client: &[usize]) -> Vec<Vec<(String, String)>> {
    let idle = curr_conns_now(&u.sock);
    let mut trace = Vec::new();
    for &n in per_client {
        let mut c = Client::connect(u.addr);
        let mut mine = Vec::new();
        for _ in 0..n {
            c.send(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
            let r = c.read_resp();
            assert_eq!(r.status, 200);
            let h = |n: &str| r.header(n).unwrap_or("-").to_string();
            mine.push((h("x-conn"), h("x-nth")));
        }
        drop(c);
        wait_until("the client's close seen", || {
            curr_conns(&u.sock).is_some_and(|n| n <= idle)
        });
        trace.push(mine);
    }
    trace
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The same proxy section for ebb and haproxy: `lines` after its `bind`,
/// where `ORIGIN` stands for the origin's address.
fn section(bind: &str, lines: &str, o: &Tagger) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 2s\n\
         listen px\n    bind {bind}\n{}",
        lines
            .replace("ORIGIN_PORT", &o.addr.port().to_string())
            .replace("ORIGIN", &o.addr.to_string())
    )
}

/// `http-reuse REUSE` and one server to the origin.
fn reuse_lines(reuse: &str, srv_opts: &str) -> String {
    format!("    http-reuse {reuse}\n    server s ORIGIN {srv_opts}\n")
}

/// Runs `scenario` through ebb (two threads, `global_extra` in its global
/// section) and, when installed, through haproxy (two threads too); both
/// results are returned (haproxy's `None` when it is absent).
fn both<T>(
    lines: &str,
    global_extra: &str,
    scenario: impl Fn(&Under, &Tagger) -> T,
) -> (T, Option<T>) {
    let o = Tagger::start();
    let dir = scratch("reuse");
    let sock = dir.join("ebb.sock");
    let e = Ebb::start(&format!(
        "global\n    nbthread 2\n    stats socket {} level admin\n{global_extra}{}",
        sock.display(),
        section("BIND", lines, &o)
    ));
    let ours = scenario(
        &Under {
            addr: e.addr(),
            sock,
        },
        &o,
    );
    let o = Tagger::start();
    let port = free_port();
    let theirs = haproxy_with(
        "reuse-hap",
        &format!(
            "    nbthread 2\n{global_extra}{}",
            section(&format!("127.0.0.1:{port}"), lines, &o)
        ),
    )
    .map(|h| {
        let u = Under {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            sock: h.sock.clone(),
        };
        scenario(&u, &o)
    });
    (ours, theirs)
}

/// [`both`], then: the trace through ebb is `want`, and haproxy's the
/// same.
fn as_haproxy<T: PartialEq + std::fmt::Debug>(
    lines: &str,
    scenario: impl Fn(&Under, &Tagger) -> T,
    want: T,
) {
    let (ours, theirs) = both(lines, "", scenario);
    assert_eq!(ours, want);
    if let Some(t) = theirs {
        assert_eq!(t, ours, "haproxy differs");
    }
}

/// Only the rank of each answer on its connection.
fn ranks(t: &[Vec<(String, String)>]) -> Vec<Vec<String>> {
    t.iter()
        .map(|c| c.iter().map(|(_, n)| n.clone()).collect())
        .collect()
}

#[test]
fn never_keeps_each_server_connection_for_its_client() {
    // Private: the client's connection carries all its requests, and is
    // never another client's.
    let want = vec![
        pairs(&[("1", "1"), ("1", "2"), ("1", "3")]),
        pairs(&[("2", "1"), ("2", "2"), ("2", "3")]),
    ];
    let run = |u: &Under, o: &Tagger| (clients(u, &[3, 3]), o.conns());
    as_haproxy(&reuse_lines("never", ""), run, (want, 2));
}

#[test]
fn safe_gives_first_requests_their_own_connection_within_pool_max_conn() {
    // A first request opens a connection; the pool holds one, so a later
    // client's own connection is closed after its first answer and its
    // next requests go on the pooled one.
    let want = vec![
        pairs(&[("1", "1"), ("1", "2"), ("1", "3")]),
        pairs(&[("2", "1"), ("1", "4"), ("1", "5")]),
        pairs(&[("3", "1"), ("1", "6"), ("1", "7")]),
    ];
    let run = |u: &Under, o: &Tagger| (clients(u, &[3, 3, 3]), o.conns());
    as_haproxy(&reuse_lines("safe", "pool-max-conn 1"), run, (want, 3));
}

#[test]
fn aggressive_sends_first_requests_on_proven_connections_only() {
    // The second client's first request may not take the connection that
    // carried one request only: a new one; its second request reuses one
    // (proving it), which the third client's first request then takes.
    let want: Vec<Vec<String>> = [&["1"][..], &["1", "2"], &["3"]]
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let run = |u: &Under, o: &Tagger| (ranks(&clients(u, &[1, 2, 1])), o.conns());
    as_haproxy(&reuse_lines("aggressive", ""), run, (want, 2));
}

#[test]
fn always_shares_idle_connections_between_threads() {
    // Every client, whichever thread accepted it, finds the one idle
    // connection (`tune.idle-pool.shared on`, the default).
    let want: Vec<_> = (1..=8).map(|n| pairs(&[("1", &n.to_string())])).collect();
    let run = |u: &Under, o: &Tagger| (clients(u, &[1; 8]), o.conns());
    as_haproxy(&reuse_lines("always", ""), run, (want, 1));
}

#[test]
fn idle_pool_not_shared_keeps_connections_with_their_thread() {
    let (ours, _) = both(
        &reuse_lines("always", ""),
        "    tune.idle-pool.shared off\n",
        |u, o| {
            clients(u, &[1; 8]);
            o.conns()
        },
    );
    // At most one connection per thread (two threads).
    assert!((1..=2).contains(&ours), "{ours} server connections");
}

#[test]
fn dispatch_connections_stay_private_to_their_client() {
    // A backend without servers sends everything to its dispatch address;
    // HAProxy keeps such a connection to no server for its client, even
    // with `http-reuse always`.
    private_per_client("    http-reuse always\n    dispatch ORIGIN\n");
}

/// Two clients of two requests each through a proxy made of `lines`: each
/// client's requests go on a server connection of its own.
fn private_per_client(lines: &str) {
    let want = vec![
        pairs(&[("1", "1"), ("1", "2")]),
        pairs(&[("2", "1"), ("2", "2")]),
    ];
    let run = |u: &Under, o: &Tagger| (clients(u, &[2, 2]), o.conns());
    as_haproxy(lines, run, (want, 2));
}

#[test]
fn dispatch_in_a_tcp_proxy() {
    let want = vec![pairs(&[("1", "1"), ("1", "2")])];
    let run = |u: &Under, o: &Tagger| (clients(u, &[2]), o.conns());
    as_haproxy("    mode tcp\n    dispatch ORIGIN\n", run, (want, 1));
}

#[test]
fn transparent_goes_where_the_client_connected() {
    // No netfilter on loopback: the destination is the bind address, with
    // the port a `tcp-request connection` rule set (else ebb would connect
    // to itself).
    private_per_client(
        "    option transparent\n    tcp-request connection set-dst-port int(ORIGIN_PORT)\n",
    );
}

/// `-c` on a configuration: ebb's exit code and stderr, and haproxy's
/// exit code when it is installed.
fn check_both(cfg: &str) -> (i32, String, Option<i32>) {
    let dir = scratch("reuse-check");
    let path = dir.join("t.cfg");
    std::fs::write(&path, cfg).unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", path.to_str().unwrap()], &dir);
    let hap = have("haproxy").then(|| {
        std::process::Command::new("haproxy")
            .args(["-c", "-q", "-f", path.to_str().unwrap()])
            .output()
            .map_or(-1, |o| o.status.code().unwrap_or(-1))
    });
    (code, err, hap)
}

#[test]
fn dispatch_and_transparent_against_balance_as_haproxy() {
    let head = "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n";
    // `balance` with `option transparent`: refused by both.
    let (code, err, hap) = check_both(&format!(
        "{head}listen l\n    bind 127.0.0.1:8080\n    balance roundrobin\n    option transparent\n"
    ));
    assert_ne!(code, 0);
    assert!(
        err.contains("t.cfg:9:") && err.contains("transparent and balance"),
        "{err}"
    );
    assert!(hap.is_none_or(|c| c != 0));
    // `balance` (in the defaults) with `dispatch`: a warning, dispatch ignored.
    let (code, err, hap) = check_both(&format!(
        "{head}    balance roundrobin\nlisten l\n    bind 127.0.0.1:8080\n    dispatch 127.0.0.1:1\n"
    ));
    assert_eq!(code, 0, "{err}");
    assert!(hap.is_none_or(|c| c == 0));
    let e = Ebb::start(&format!(
        "{head}    balance roundrobin\nlisten l\n    bind BIND\n    dispatch 127.0.0.1:1\n"
    ));
    let warned = e.wait_stderr("will be ignored in balance mode", Duration::from_secs(10));
    assert!(
        warned.as_ref().is_some_and(|w| w.contains(":9:")),
        "{warned:?}"
    );
    // No server then: 503, as HAProxy answers.
    assert_eq!(get(e.addr(), "/").status, 503);
    // `dispatch` in the defaults: refused by both.
    let (code, _, hap) = check_both(&format!("{head}    dispatch 127.0.0.1:1\n"));
    assert_ne!(code, 0);
    assert!(hap.is_none_or(|c| c != 0));
    // A port is required.
    let (code, _, hap) = check_both(&format!(
        "{head}listen l\n    bind 127.0.0.1:8080\n    dispatch 127.0.0.1\n"
    ));
    assert_ne!(code, 0);
    assert!(hap.is_none_or(|c| c != 0));
    // With servers too, HAProxy would send cookie-persistent requests to
    // them and the rest to dispatch: ebb refuses that mix.
    let (code, err, _) = check_both(&format!(
        "{head}listen l\n    bind 127.0.0.1:8080\n    dispatch 127.0.0.1:1\n    server s 127.0.0.1:2\n"
    ));
    assert_ne!(code, 0);
    assert!(
        err.contains("t.cfg:8:") && err.contains("not supported by ebb"),
        "{err}"
    );
}

#[test]
fn transparent_to_the_port_an_http_request_rule_set() {
    // HAProxy's reg-test connection/http_reuse_be_transparent's setting.
    private_per_client("    option transparent\n    http-request set-dst-port int(ORIGIN_PORT)\n");
}

#[test]
fn http_request_set_dst_port_changes_one_request_only() {
    let lines = "    http-request set-dst-port int(1234) if { path /a }\n\
                 \x20   http-request set-dst str(127.0.0.9) if { path /c }\n\
                 \x20   http-request return status 200 hdr x-dst \"%[dst]:%[dst_port]\"\n";
    let (ours, theirs) = both(lines, "", |u, _| {
        let mut c = Client::connect(u.addr);
        let mut seen = Vec::new();
        for p in ["/a", "/b", "/c"] {
            c.send(format!("GET {p} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
            let r = c.read_resp();
            // The proxy's own port stands as `BIND` (it differs).
            let d = r.header("x-dst").unwrap_or("-");
            seen.push(d.replace(&format!(":{}", u.addr.port()), ":BIND"));
        }
        seen
    });
    // The next request of the connection has the connection's again.
    assert_eq!(ours, ["127.0.0.1:1234", "127.0.0.1:BIND", "127.0.0.9:BIND"]);
    if let Some(t) = theirs {
        assert_eq!(t, ours, "haproxy differs");
    }
}

#[test]
fn a_connection_is_idle_for_others_from_the_end_of_its_answer() {
    // The first client stays connected: its server connection is idle all
    // the same, and the second client's request takes it (on whichever
    // thread either runs); then the first client's next request takes it
    // back.
    let run = |u: &Under, o: &Tagger| {
        let get = |c: &mut Client| {
            c.send(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
            let r = c.read_resp();
            let h = |n: &str| r.header(n).unwrap_or("-").to_string();
            (h("x-conn"), h("x-nth"))
        };
        let mut c1 = Client::connect(u.addr);
        let mut c2 = Client::connect(u.addr);
        let t = vec![get(&mut c1), get(&mut c2), get(&mut c1)];
        (t, o.conns())
    };
    let want = pairs(&[("1", "1"), ("1", "2"), ("1", "3")]);
    // haproxy gives this trace too, but not every time: it makes the
    // connection idle a moment after the answer left, which the second
    // client's request may beat. ebb is compared with the trace only.
    let (ours, _) = both(&reuse_lines("always", ""), "", run);
    assert_eq!(ours, (want, 1));
}

#[test]
fn addresses_expand_environment_variables_unquoted() {
    // HAProxy expands `$NAME`/`${NAME}` in an address whether the word is
    // quoted or not; an unset one gives nothing (`:`: the any address,
    // no port; a log target there goes to port 514).
    let o = Tagger::start();
    std::env::set_var("EBB_REUSE_T_ADDR", "127.0.0.1");
    std::env::set_var("EBB_REUSE_T_PORT", o.addr.port().to_string());
    let lines = "    server s ${EBB_REUSE_T_ADDR}:${EBB_REUSE_T_PORT}\n\
                 \x20   server unused ${EBB_REUSE_UNSET_A}:${EBB_REUSE_UNSET_P} disabled\n\
                 \x20   log ${EBB_REUSE_UNSET_A}:${EBB_REUSE_UNSET_P} local0\n";
    let e = Ebb::start(&section("BIND", lines, &o));
    let r = get(e.addr(), "/");
    assert_eq!((r.status, r.header("x-conn")), (200, Some("1")));
    let (code, err, hap) = check_both(&section("127.0.0.1:8080", lines, &o));
    assert_eq!(code, 0, "{err}");
    assert!(hap.is_none_or(|c| c == 0));
}

#[test]
fn a_server_without_an_address_goes_to_the_clients_destination() {
    // `0.0.0.0` (or no host): the address the client connected to, with
    // the server's port. On 127.0.0.2 (0.0.0.0 itself would reach
    // 127.0.0.1, where nothing listens on that port).
    let l = TcpListener::bind("127.0.0.2:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for (id, s) in l.incoming().enumerate() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || serve_tagged(s, id + 1));
        }
    });
    let cfg = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 2s\n\
             listen px\n    bind {bind}\n    server s 0.0.0.0:{port}\n"
        )
    };
    let dir = scratch("reuse-any");
    std::fs::write(dir.join("ebb.cfg"), cfg("127.0.0.2:0")).unwrap();
    let e = Ebb::start_args(&["-f", "ebb.cfg"], dir);
    let r = get(e.addr(), "/");
    assert_eq!((r.status, r.header("x-nth")), (200, Some("1")));
    let hp = free_port();
    if let Some(_h) = haproxy_with("reuse-any-hap", &cfg(&format!("127.0.0.2:{hp}"))) {
        let r = get(SocketAddr::from(([127, 0, 0, 2], hp)), "/");
        assert_eq!((r.status, r.header("x-nth")), (200, Some("1")));
    }
}

/// One client sending `n` requests on one connection: the trace.
fn one_client(u: &Under, n: usize) -> Vec<(String, String)> {
    let mut c = Client::connect(u.addr);
    (0..n)
        .map(|_| {
            c.send(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
            let r = c.read_resp();
            let h = |n: &str| r.header(n).unwrap_or("-").to_string();
            (h("x-conn"), h("x-nth"))
        })
        .collect()
}

#[test]
fn servers_on_abstract_unix_sockets() {
    // A proxy whose server is `abns@NAME`, bound by a second proxy that
    // forwards to the origin (the name made unique by the origin's port).
    for mode in ["http", "tcp"] {
        let lines = format!(
            "    mode {mode}\n    server s abns@ebb-reuse-ORIGIN_PORT\n\
             listen inner\n    mode {mode}\n    bind abns@ebb-reuse-ORIGIN_PORT\n    server o ORIGIN\n"
        );
        let run = |u: &Under, o: &Tagger| (one_client(u, 2), o.conns());
        as_haproxy(&lines, run, (pairs(&[("1", "1"), ("1", "2")]), 1));
    }
}
