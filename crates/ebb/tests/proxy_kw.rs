//! HAProxy keywords of proxies and fetches, through the real binary and
//! side by side with HAProxy 2.6 when it is installed: the `stopping`
//! fetch during a soft stop's `grace`, `max-session-srv-conns` (the
//! idle server connections a client keeps for itself), `option
//! contstats` on HTTP, `bind ... v4v6|v6only`, `slowstart`, `downinter`,
//! server weights and the order of `roundrobin` and `static-rr`,
//! `maxqueue` (a server's queue only), `stats
//! hide-version`, `set-pathq`/`replace-pathq`, `option
//! idle-close-on-response`, `http-after-response allow`, `monitor fail
//! unless`, `stats admin unless`, the `http-reuse` modes and
//! `log-send-hostname`.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::origin::{drain, read_head, serve_each};
use common::*;

/// The `x-stopping` and `x-acl` fields of an answer from `a` on a new
/// connection (None: no answer).
fn stopping_fields(a: SocketAddr) -> Option<(String, String)> {
    let s = TcpStream::connect(a).ok()?;
    let mut c = Client::from_stream(s);
    c.send(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    let r = c.read_resp_opt(false)?;
    let f = |n: &str| r.header(n).unwrap_or("").to_string();
    Some((f("x-stopping"), f("x-acl")))
}

/// `stopping` says 0 while serving, 1 once SIGUSR1 came (the listener
/// still answers under global `grace`), in ACLs too.
#[test]
fn stopping_fetch_follows_the_soft_stop_as_haproxy() {
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n    grace 3s\n\
             defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 10s\n\
             frontend fe\n    bind {bind}\n    http-request return status 200\n\
             \x20   http-after-response set-header x-stopping %[stopping]\n\
             \x20   http-after-response set-header x-acl yes if {{ stopping }}\n",
            sock.display()
        )
    };
    let run = |who: &str, stop: &dyn Fn(), a: SocketAddr| {
        let before = stopping_fields(a);
        assert_eq!(before, Some(("0".to_string(), String::new())), "{who}");
        stop();
        let seen = came_within(Duration::from_secs(10), || {
            stopping_fields(a) == Some(("1".to_string(), "yes".to_string()))
        });
        assert!(seen, "{who}: stopping never said 1 during the grace");
    };
    let (mut e, _sock) = ebb_with_admin("stopping", cfg);
    run("ebb", &|| e.signal("USR1"), e.addr());
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
    if let Some((h, a)) = haproxy_beside("stopping", cfg) {
        // (`Ebb::signal`'s way, for haproxy.)
        let pid = h.pid().to_string();
        let stop = || {
            let st = std::process::Command::new("kill")
                .args(["-USR1", &pid])
                .status();
            assert!(st.is_ok_and(|s| s.success()), "kill -USR1 haproxy");
        };
        run("haproxy", &stop, a);
    }
}

/// An HTTP/1.1 server answering every request on a connection with its
/// own name; counts the connections it accepted.
fn counting_server(name: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = Arc::clone(&n);
    let a = serve_each(move |mut s| {
        n2.fetch_add(1, Ordering::SeqCst);
        let mut buf = Vec::new();
        let mut b = [0u8; 4096];
        loop {
            let Ok(k) = s.read_retry(&mut b) else { return };
            if k == 0 {
                return;
            }
            buf.extend_from_slice(&b[..k]);
            while let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                buf.drain(..i + 4);
                let body = name.as_bytes();
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                if s.write_all(head.as_bytes()).is_err() || s.write_all(body).is_err() {
                    return;
                }
            }
        }
    });
    (a, n)
}

/// One keep-alive client asks each server in turn, `rounds` times
/// (`use-server` by path): the connections each server accepted.
fn rounds_through(
    fe: SocketAddr,
    servers: &[(SocketAddr, Arc<AtomicUsize>)],
    rounds: usize,
) -> Vec<usize> {
    let mut c = Client::connect(fe);
    for _ in 0..rounds {
        for i in 0..servers.len() {
            c.send(format!("GET /s{i} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes());
            let r = c.read_resp();
            assert_eq!(r.status, 200);
            assert_eq!(r.text(), format!("s{i}"));
        }
    }
    servers
        .iter()
        .map(|(_, n)| n.load(Ordering::SeqCst))
        .collect()
}

/// `max-session-srv-conns N`: a client session keeps at most N idle
/// private server connections (`http-reuse never`), HAProxy's default 5;
/// a connection that would be one more is closed after its answer.
#[test]
fn max_session_srv_conns_bounds_the_clients_idle_connections() {
    for max in [None, Some(2), Some(0)] {
        let servers: Vec<_> = ["s0", "s1", "s2"]
            .map(counting_server)
            .into_iter()
            .collect();
        let cfg = |sock: &Path, bind: &str| {
            let mut t = format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 10s\n\
                 frontend fe\n    bind {bind}\n    default_backend be\n",
                sock.display()
            );
            if let Some(m) = max {
                t.push_str(&format!("    max-session-srv-conns {m}\n"));
            }
            t.push_str("backend be\n    http-reuse never\n");
            for (i, (a, _)) in servers.iter().enumerate() {
                t.push_str(&format!("    use-server s{i} if {{ path /s{i} }}\n"));
                let _ = a;
            }
            for (i, (a, _)) in servers.iter().enumerate() {
                t.push_str(&format!("    server s{i} {a}\n"));
            }
            t
        };
        // Three servers, three rounds: with room for all (default 5)
        // each server sees one connection; with 2 the third server's is
        // closed each time; with 0 none is kept.
        let want = match max {
            None => vec![1, 1, 1],
            Some(2) => vec![1, 1, 3],
            _ => vec![3, 3, 3],
        };
        let (_e, _sock) = ebb_with_admin("msc", cfg);
        let base: Vec<usize> = servers
            .iter()
            .map(|(_, n)| n.load(Ordering::SeqCst))
            .collect();
        let got = rounds_through(_e.addr(), &servers, 3);
        let got: Vec<usize> = got.iter().zip(&base).map(|(g, b)| g - b).collect();
        assert_eq!(got, want, "ebb, max-session-srv-conns {max:?}");
        drop(_e);
        if let Some((_h, a)) = haproxy_beside("msc", cfg) {
            let base: Vec<usize> = servers
                .iter()
                .map(|(_, n)| n.load(Ordering::SeqCst))
                .collect();
            let got = rounds_through(a, &servers, 3);
            let got: Vec<usize> = got.iter().zip(&base).map(|(g, b)| g - b).collect();
            assert_eq!(got, want, "haproxy, max-session-srv-conns {max:?}");
        }
    }
}

/// An HTTP server that answers each request (its head read) with a
/// 10 MB body sent as 100 chunks of 100 kB, one every 40 ms (a long
/// download: 4 s, which the test's 200 ms polls see move 20 times and
/// more; 10 s before, 40 s of the test's four downloads), then closes.
fn trickle_http_server() -> SocketAddr {
    serve_each(|mut s| {
        if read_head(&mut s).is_none() {
            return;
        }
        let h = "HTTP/1.1 200 OK\r\ncontent-length: 10000000\r\nconnection: close\r\n\r\n";
        if s.write_all(h.as_bytes()).is_err() {
            return;
        }
        for _ in 0..100 {
            if s.write_all(&[b'x'; 100_000]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(40));
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        drain(&mut s);
    })
}

/// The `bout` of the rows FRONTEND, s1 and BACKEND of proxy `px`.
fn bouts(sock: &Path) -> [u64; 3] {
    let csv = cli_cmd(sock, "show stat");
    ["FRONTEND", "s1", "BACKEND"].map(|r| {
        stat_row_of(&csv, "px", r)
            .get("bout")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

/// A 10 MB download taking 4 s through `a` (admin socket `sock`): the
/// `bout` of each row once all three moved with the bytes the client
/// had then (None: they had not moved before the last 10 % of the
/// bytes), and the rows' `bout` at the end.
fn http_download_counts(sock: &Path, a: SocketAddr) -> (Option<([u64; 3], u64)>, [u64; 3]) {
    let got = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let g2 = Arc::clone(&got);
    let mut c = TcpStream::connect(a).unwrap();
    c.write_all(b"GET /big HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut b = vec![0u8; 65536];
        while let Ok(n) = c.read_retry(&mut b) {
            if n == 0 {
                break;
            }
            g2.fetch_add(n as u64, Ordering::SeqCst);
        }
    });
    // (Watched until the last 10 % of the bytes: counters that move only
    // at the end may move before the client read the last bytes.)
    let mut moved = None;
    while !reader.is_finished() && got.load(Ordering::SeqCst) < 9_000_000 {
        let b = bouts(sock);
        let had = got.load(Ordering::SeqCst);
        if b.iter().all(|&v| v > 0) && had < 9_000_000 {
            moved = Some((b, had));
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    reader.join().unwrap();
    let mut end = [0; 3];
    came_within(Duration::from_secs(20), || {
        end = bouts(sock);
        end.iter().all(|&v| v >= 10_000_000)
    });
    (moved, end)
}

/// `option contstats` on HTTP streams: `show stat`'s `bout` of the
/// frontend, the server and the backend moves while a long download
/// runs (HAProxy 2.6: at each run of the stream, every 5 s at least),
/// without it only once the exchange ended; the totals at the end are
/// the same either way, and the same as haproxy's. Beside haproxy.
#[test]
fn contstats_counts_a_long_http_download_as_it_flows() {
    let origin = trickle_http_server();
    let mut ends = Vec::new();
    for cont in [true, false] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
                 listen px\n    bind {bind}\n{}    server s1 {origin}\n",
                sock.display(),
                if cont { "    option contstats\n" } else { "" },
            )
        };
        let check = |who: &str, (moved, end): (Option<([u64; 3], u64)>, [u64; 3])| {
            if cont {
                assert!(moved.is_some(), "{who}: no bout moved before the end");
            } else {
                assert_eq!(moved, None, "{who} without contstats");
            }
            assert!(end.iter().all(|&v| v > 10_000_000), "{who}: {end:?}");
            end
        };
        let (e, sock) = ebb_with_admin("contstats-http", cfg);
        ends.push(check("ebb", http_download_counts(&sock, e.addr())));
        drop(e);
        if let Some((h, a)) = haproxy_beside("contstats-http", cfg) {
            let end = check("haproxy", http_download_counts(&h.sock, a));
            assert_eq!(ends[ends.len() - 1], end, "ebb, haproxy (contstats {cont})");
        }
    }
    assert_eq!(ends[0], ends[1], "with and without contstats");
}

/// Whether a connection to `a` is answered 200.
fn answers(a: SocketAddr) -> bool {
    TcpStream::connect_timeout(&a, Duration::from_secs(5)).is_ok_and(|s| {
        let mut c = Client::from_stream(s);
        c.send(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        c.read_resp_opt(false).is_some_and(|r| r.status == 200)
    })
}

/// `bind :::PORT` takes IPv4 connections too unless the system binds
/// IPv6 sockets to IPv6 only (`net.ipv6.bindv6only`, 0 on Linux), as in
/// HAProxy 2.6; `v6only` refuses them, `v4v6` takes them whatever the
/// system's default. IPv6 connections are taken in every case. Beside
/// haproxy. (ebb bound every IPv6 socket v6only, ignoring `v4v6`.)
#[test]
fn bind_v6only_and_v4v6_as_haproxy() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        println!("no IPv6 loopback: skipped");
        return;
    }
    let sys_v6only =
        std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only").is_ok_and(|v| v.trim() == "1");
    for (opt, v4) in [("", !sys_v6only), (" v6only", false), (" v4v6", true)] {
        let cfg = |port: u16| {
            format!(
                "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\
                 frontend fe\n    bind :::{port}{opt}\n    http-request return status 200\n"
            )
        };
        let port = free_port();
        let e = Ebb::start(&cfg(port));
        let v4a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let v6a: SocketAddr = format!("[::1]:{port}").parse().unwrap();
        assert!(answers(v6a), "ebb{opt}: IPv6");
        assert_eq!(answers(v4a), v4, "ebb{opt}: IPv4");
        drop(e);
        let port = free_port();
        if let Some(_h) = haproxy_with("v6only", &cfg(port)) {
            let v4a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let v6a: SocketAddr = format!("[::1]:{port}").parse().unwrap();
            assert!(answers(v6a), "haproxy{opt}: IPv6");
            assert_eq!(answers(v4a), v4, "haproxy{opt}: IPv4");
        }
    }
}

/// `show stat`'s `status`, `throttle`, `weight` and `uweight` of `px/s1`.
fn slowstart_row(sock: &Path) -> (String, String, u64, u64) {
    let r = stat_row(sock, "px", "s1");
    let n = |k: &str| r.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
    (
        r.get("status").cloned().unwrap_or_default(),
        r.get("throttle").cloned().unwrap_or_default(),
        n("weight"),
        n("uweight"),
    )
}

/// `slowstart`: not applied at start; once a server that went DOWN is
/// UP again, `show stat` shows its `throttle` (a percentage under 100)
/// and its effective `weight` under the configured `uweight` until the
/// period ends, then neither; every value on the way is one of HAProxy's
/// once-a-second steps of sixteenths of the weight. (ebb showed the
/// configured weight as the effective one, then ramped by the
/// millisecond.) Beside haproxy.
#[test]
fn slowstart_ramps_a_server_back_up_as_haproxy() {
    let port = free_port();
    let listen = || {
        // (Bound with SO_REUSEADDR: the port is taken back at once.)
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.set_reuse_address(true).unwrap();
        let a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        s.bind(&a.into()).unwrap();
        // (Never accepted from: room for every check's connection.)
        s.listen(4096).unwrap();
        s
    };
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 1s\n\
             listen px\n    bind {bind}\n    server s1 127.0.0.1:{port} check inter 200 fall 1 rise 1 weight 50 slowstart 5s\n",
            sock.display()
        )
    };
    let mut held = Some(listen());
    let run = |who: &str, sock: &Path, held: &mut Option<socket2::Socket>| {
        wait_until("UP", || slowstart_row(sock).0 == "UP");
        let (_, throttle, w, uw) = slowstart_row(sock);
        assert_eq!((throttle.as_str(), w, uw), ("", 50, 50), "{who}: at start");
        *held = None;
        wait_until("DOWN", || slowstart_row(sock).0.starts_with("DOWN"));
        *held = Some(listen());
        wait_until("UP again", || slowstart_row(sock).0 == "UP");
        let (_, throttle, w, uw) = slowstart_row(sock);
        let pct: u64 = throttle.trim_end_matches(" %").parse().unwrap_or(100);
        assert!(
            pct < 100 && w < uw && uw == 50,
            "{who}: {throttle:?} {w}/{uw}"
        );
        // HAProxy's steps (`server_recalc_eweight`): once a second the
        // weight is 50 x (16 t + 5) / 5 sixteenths, shown rounded up, and
        // the throttle that share in percent, `(100 e + 15) / (16 x 50)`.
        let steps = [(4, 6), (13, 25), (22, 43), (32, 62), (41, 81)];
        assert!(steps.contains(&(w, pct)), "{who}: {w} {pct}");
        wait_until("the end of the slowstart", || {
            let (_, t, w, _) = slowstart_row(sock);
            if let Ok(p) = t.trim_end_matches(" %").parse::<u64>() {
                assert!(steps.contains(&(w, p)), "{who}: {w} {t}");
            }
            t.is_empty() && w == 50
        });
    };
    let (e, sock) = ebb_with_admin("slowstart", cfg);
    run("ebb", &sock, &mut held);
    drop(e);
    if let Some((h, _)) = haproxy_beside("slowstart", cfg) {
        run("haproxy", &h.sock, &mut held);
    }
}

/// `downinter`: a DOWN server is checked at that interval instead of
/// `inter` (10 s here): six more checks come within 40 s once it is
/// DOWN (1.2 s at 200 ms; at `inter`, 50 s at least). Beside haproxy.
#[test]
fn downinter_checks_a_down_server_at_its_own_interval() {
    let (origin, n) = counting_server("s1");
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 1s\n\
             listen px\n    bind {bind}\n    option httpchk GET /\n    http-check expect status 503\n\
             \x20   server s1 {origin} check inter 10s downinter 200 fall 1 rise 1\n",
            sock.display()
        )
    };
    let run = |who: &str, sock: &Path| {
        wait_until("DOWN", || {
            stat_row(sock, "px", "s1")
                .get("status")
                .is_some_and(|s| s.starts_with("DOWN"))
        });
        let n0 = n.load(Ordering::SeqCst);
        // 40 s: a bound for a loaded machine that `inter` cannot meet.
        let fast = came_within(Duration::from_secs(40), || {
            n.load(Ordering::SeqCst) >= n0 + 6
        });
        assert!(
            fast,
            "{who}: {} checks in 40 s",
            n.load(Ordering::SeqCst) - n0
        );
    };
    let (e, sock) = ebb_with_admin("downinter", cfg);
    run("ebb", &sock);
    drop(e);
    if let Some((h, _)) = haproxy_beside("downinter", cfg) {
        run("haproxy", &h.sock);
    }
}

/// The servers answering `n` requests to `a`, each on a new connection.
fn answered_by(a: SocketAddr, n: usize) -> Vec<String> {
    (0..n).map(|_| get(a, "/").text()).collect()
}

/// Server `weight` with `balance roundrobin` and `static-rr`: a server
/// of weight 3 beside one of weight 1 takes three requests in four, in
/// the same order as haproxy's. Beside haproxy.
#[test]
fn weights_split_roundrobin_and_static_rr_as_haproxy() {
    let (a1, _) = counting_server("s1");
    let (a2, _) = counting_server("s2");
    for algo in ["roundrobin", "static-rr"] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
                 listen px\n    bind {bind}\n    balance {algo}\n\
                 \x20   server s1 {a1} weight 1\n    server s2 {a2} weight 3\n",
                sock.display()
            )
        };
        let (e, _sock) = ebb_with_admin("weights", cfg);
        let got = answered_by(e.addr(), 16);
        drop(e);
        let n1 = got.iter().filter(|s| *s == "s1").count();
        assert_eq!((n1, got.len() - n1), (4, 12), "ebb {algo}: {got:?}");
        if let Some((_h, a)) = haproxy_beside("weights", cfg) {
            let theirs = answered_by(a, 16);
            let t1 = theirs.iter().filter(|s| *s == "s1").count();
            assert_eq!(
                (t1, theirs.len() - t1),
                (4, 12),
                "haproxy {algo}: {theirs:?}"
            );
        }
    }
}

/// The servers (`a`, `b`, `c`) `n` requests to `a` reach, one at a
/// time.
fn sequence(a: SocketAddr, n: usize) -> String {
    (0..n).map(|_| get(a, "/").text()).collect()
}

/// `balance roundrobin` and `static-rr` send requests in HAProxy's order
/// for several weight sets (5:1:1 is `aaabaac`, not an interleaving of
/// a), and after a `set weight` (roundrobin; static-rr refuses it) and
/// a server disabled then enabled. Beside haproxy (nbthread 1).
#[test]
fn round_robin_orders_are_haproxys() {
    let (sa, _) = counting_server("a");
    let (sb, _) = counting_server("b");
    let (sc, _) = counting_server("c");
    type Case = (
        &'static str,
        [u32; 3],
        &'static [&'static str],
        &'static str,
    );
    let cases: &[Case] = &[
        ("roundrobin", [5, 1, 1], &[], "aaabaacaaabaac"),
        ("roundrobin", [2, 3, 4], &[], "cbcabccbacbcab"),
        ("roundrobin", [10, 1, 5], &[], ""),
        (
            "roundrobin",
            [3, 1, 1],
            &["set weight px/a 1"],
            "aaba|cbacbacbacba",
        ),
        (
            "roundrobin",
            [3, 2, 1],
            &["disable server px/b", "enable server px/b"],
            "",
        ),
        ("static-rr", [5, 1, 1], &[], "aaabaacaaabaac"),
        ("static-rr", [3, 2, 1], &[], "aababcaababc"),
        ("static-rr", [10, 1, 5], &[], ""),
        (
            "static-rr",
            [3, 1, 1],
            &["set weight px/a 1"],
            "aaba|caabacaabaca",
        ),
        (
            "static-rr",
            [3, 2, 1],
            &["disable server px/b", "enable server px/b"],
            "",
        ),
    ];
    for (algo, w, changes, want) in cases {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n    nbthread 1\n\
                 defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
                 listen px\n    bind {bind}\n    balance {algo}\n\
                 \x20   server a {sa} weight {}\n    server b {sb} weight {}\n    server c {sc} weight {}\n",
                sock.display(),
                w[0],
                w[1],
                w[2]
            )
        };
        // 4 requests, then each change and 4 more, then 10 more.
        // (the CLI's answers apart).
        let run = |a: SocketAddr, sock: &Path| {
            let mut out = sequence(a, 4);
            let mut answers = Vec::new();
            for c in changes.iter() {
                out.push('|');
                answers.push(cli_cmd(sock, c).trim().to_string());
                out.push_str(&sequence(a, 4));
            }
            out.push_str(&sequence(a, 10));
            (out, answers)
        };
        let (e, sock) = ebb_with_admin("rr-order", cfg);
        let (ours, our_answers) = run(e.addr(), &sock);
        drop(e);
        if !want.is_empty() {
            assert!(
                ours.starts_with(want),
                "ebb {algo} {w:?} {changes:?}: {ours}"
            );
        }
        if let Some((h, a)) = haproxy_beside("rr-order", cfg) {
            let (theirs, their_answers) = run(a, &h.sock);
            assert_eq!(ours, theirs, "{algo} {w:?} {changes:?}: ebb, then haproxy");
            assert_eq!(our_answers, their_answers, "{algo} {changes:?}");
        }
    }
}

/// `maxqueue` bounds a server's own queue only: a round robin whose
/// server is full queues every stream on the backend (no bound but
/// `timeout queue`), while a hash that binds streams to the full server
/// refuses those beyond its `maxqueue` with 503. Beside haproxy.
#[test]
fn maxqueue_bounds_only_a_servers_queue_as_haproxy() {
    use common::origin::{Gate, Mode, Origin};
    let gate = Gate::default();
    let o = Origin::start("a", Mode::Gate(gate.clone()));
    let oa = o.addr;
    for algo in ["roundrobin", "uri"] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 20s\n    timeout server 20s\n    timeout connect 5s\n    timeout queue 20s\n\
                 listen px\n    bind {bind}\n    balance {algo}\n\
                 \x20   server a {oa} maxconn 1 maxqueue 1\n",
                sock.display()
            )
        };
        let run = |a: SocketAddr, sock: &Path| -> Vec<u16> {
            gate.close();
            let busy = o.busy.load(Ordering::SeqCst);
            let send = move || std::thread::spawn(move || get(a, "/x").status);
            let first = send();
            wait_until("the first request at the server", || {
                o.busy.load(Ordering::SeqCst) > busy
            });
            let second = send();
            wait_until("the second request queued", || {
                let row = stat_row(sock, "px", "a");
                let srv = row.get("qcur").is_some_and(|q| q == "1");
                srv || backend_qcur(sock, "px") == Some(1)
            });
            let more: Vec<_> = (0..2).map(|_| send()).collect();
            if algo == "roundrobin" {
                wait_until("every request queued", || {
                    backend_qcur(sock, "px") == Some(3)
                });
            }
            let mut late: Vec<u16> = Vec::new();
            if algo == "uri" {
                // Refused at once, the gate still closed.
                late = more.into_iter().map(|t| t.join().unwrap()).collect();
                gate.open();
            } else {
                gate.open();
                late.extend(more.into_iter().map(|t| t.join().unwrap()));
            }
            let mut all = vec![first.join().unwrap(), second.join().unwrap()];
            all.extend(late);
            all
        };
        let want = if algo == "uri" {
            vec![200, 200, 503, 503]
        } else {
            vec![200; 4]
        };
        let (e, sock) = ebb_with_admin("maxqueue", cfg);
        assert_eq!(run(e.addr(), &sock), want, "ebb {algo}");
        drop(e);
        if let Some((h, a)) = haproxy_beside("maxqueue", cfg) {
            assert_eq!(run(a, &h.sock), want, "haproxy {algo}");
        }
    }
}

/// `stats hide-version`: the stats page names no version. Beside
/// haproxy.
#[test]
fn stats_hide_version_as_haproxy() {
    for hide in [false, true] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
                 listen px\n    bind {bind}\n    stats enable\n    stats uri /st\n{}",
                sock.display(),
                if hide { "    stats hide-version\n" } else { "" }
            )
        };
        let shows = |a: SocketAddr| get(a, "/st").text().contains("version");
        let (e, _sock) = ebb_with_admin("hide-version", cfg);
        assert_eq!(shows(e.addr()), !hide, "ebb, hide-version {hide}");
        drop(e);
        if let Some((_h, a)) = haproxy_beside("hide-version", cfg) {
            assert_eq!(shows(a), !hide, "haproxy, hide-version {hide}");
        }
    }
}

/// `http-request set-pathq FMT` and `replace-pathq REGEX FMT`: the path
/// and the query are replaced together (a query in the result replaces
/// the request's, none drops it). Beside haproxy.
#[test]
fn set_pathq_and_replace_pathq_as_haproxy() {
    let o = common::origin::Origin::start("pq", common::origin::Mode::Ok);
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
             listen px\n    bind {bind}\n\
             \x20   http-request set-pathq /new?x=%[query] if {{ path /a }}\n\
             \x20   http-request set-pathq /noq if {{ path /n }}\n\
             \x20   http-request replace-pathq ^/b([^?]*)(\\?.*)?$ /bb\\1 if {{ path_beg /b }}\n\
             \x20   server s1 {}\n",
            sock.display(),
            o.addr
        )
    };
    let cases = [
        ("/a?q=2", "pq /new?x=q=2"),
        ("/n?q=2", "pq /noq"),
        ("/b/c?d=1", "pq /bb/c"),
        ("/b/c", "pq /bb/c"),
    ];
    let run = |who: &str, a: SocketAddr| {
        for (path, want) in cases {
            assert_eq!(get(a, path).text(), want, "{who} {path}");
        }
    };
    let (e, _sock) = ebb_with_admin("pathq", cfg);
    run("ebb", e.addr());
    drop(e);
    if let Some((_h, a)) = haproxy_beside("pathq", cfg) {
        run("haproxy", a);
    }
}

/// `option idle-close-on-response`: a soft stop (SIGUSR1) leaves an idle
/// keep-alive connection open; its next request is answered with
/// `Connection: close`, then the connection ends. Without the option
/// the idle connection is closed by the stop. Beside haproxy.
#[test]
fn idle_close_on_response_keeps_idle_connections_through_a_soft_stop() {
    for opt in [false, true] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 30s\n    timeout http-keep-alive 30s\n\
                 frontend fe\n    bind {bind}\n{}    http-request return status 200\n",
                sock.display(),
                if opt {
                    "    option idle-close-on-response\n"
                } else {
                    ""
                }
            )
        };
        let run = |who: &str, a: SocketAddr, stop: &dyn Fn()| {
            let mut c = Client::connect(a);
            c.s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            c.send(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n");
            assert_eq!(c.read_resp().status, 200, "{who}");
            stop();
            if !opt {
                assert!(c.closed(), "{who}: the idle connection stayed open");
                return;
            }
            // The stop is under way once the listener is closed; the
            // idle connection then outlives ebb's usual 1 s grace.
            wait_until("the listener closed", || TcpStream::connect(a).is_err());
            std::thread::sleep(Duration::from_millis(2500));
            c.send(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n");
            let r = c.read_resp();
            assert_eq!(r.status, 200, "{who}");
            assert_eq!(r.header("connection"), Some("close"), "{who}");
            assert!(c.closed(), "{who}");
        };
        let (mut e, _sock) = ebb_with_admin("idle-close", cfg);
        run("ebb", e.addr(), &|| e.signal("USR1"));
        let _ = e.wait_exit(Duration::from_secs(30));
        if let Some((h, a)) = haproxy_beside("idle-close", cfg) {
            let pid = h.pid().to_string();
            let stop = || {
                let _ = std::process::Command::new("kill")
                    .args(["-USR1", &pid])
                    .status();
            };
            run("haproxy", a, &stop);
        }
    }
}

/// `http-after-response allow`: the rest of this proxy's list is
/// skipped, the other proxy's list still runs; and `monitor fail unless
/// COND`: the monitor URI answers 503 unless COND holds. Beside haproxy.
#[test]
fn after_response_allow_and_monitor_fail_unless_as_haproxy() {
    let o = common::origin::Origin::start("ar", common::origin::Mode::Ok);
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind}\n    monitor-uri /up\n    monitor fail unless {{ src 10.0.0.0/8 }}\n\
             \x20   http-after-response set-header x-fe 1\n    default_backend be\n\
             backend be\n    http-request set-var(txn.p) path\n    http-after-response allow if {{ var(txn.p) -m str /a }}\n    http-after-response set-header x-be 1\n\
             \x20   server s1 {}\n",
            sock.display(),
            o.addr
        )
    };
    let run = |who: &str, a: SocketAddr| {
        let r = get(a, "/a");
        assert_eq!(
            (r.header("x-be"), r.header("x-fe")),
            (None, Some("1")),
            "{who} /a"
        );
        let r = get(a, "/b");
        assert_eq!(
            (r.header("x-be"), r.header("x-fe")),
            (Some("1"), Some("1")),
            "{who} /b"
        );
        assert_eq!(get(a, "/up").status, 503, "{who} monitor");
    };
    let (e, _sock) = ebb_with_admin("after-allow", cfg);
    run("ebb", e.addr());
    drop(e);
    if let Some((_h, a)) = haproxy_beside("after-allow", cfg) {
        run("haproxy", a);
    }
    // Unless it holds: 200.
    let ok = |sock: &Path, bind: &str| cfg(sock, bind).replace("10.0.0.0/8", "127.0.0.1");
    let (e, _sock) = ebb_with_admin("after-allow2", ok);
    assert_eq!(get(e.addr(), "/up").status, 200, "ebb monitor");
    drop(e);
    if let Some((_h, a)) = haproxy_beside("after-allow2", ok) {
        assert_eq!(get(a, "/up").status, 200, "haproxy monitor");
    }
}

/// `http-reuse never|safe|aggressive|always`: a second client's first
/// request takes the server connection a first client's two requests
/// left idle only with `aggressive` (it was reused already, so the
/// server keeps connections alive) and `always`; `safe` and `never` open
/// a new one. Beside haproxy, one thread each (with two, HAProxy's
/// second client may land on the thread that holds no idle connection).
#[test]
fn http_reuse_modes_for_a_sessions_first_request_as_haproxy() {
    for (mode, want) in [("never", 2), ("safe", 2), ("aggressive", 1), ("always", 1)] {
        let (origin, n) = counting_server("s1");
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n    nbthread 1\n\
                 defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
                 listen px\n    bind {bind}\n    http-reuse {mode}\n    server s1 {origin}\n",
                sock.display()
            )
        };
        let run = |who: &str, a: SocketAddr| {
            let n0 = n.load(Ordering::SeqCst);
            let mut first = Client::connect(a);
            for _ in 0..2 {
                first.send(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n");
                assert_eq!(first.read_resp().status, 200);
            }
            let mut second = Client::connect(a);
            second.send(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n");
            assert_eq!(second.read_resp().status, 200);
            assert_eq!(
                n.load(Ordering::SeqCst) - n0,
                want,
                "{who}: http-reuse {mode}"
            );
        };
        let (e, _sock) = ebb_with_admin("reuse-modes", cfg);
        run("ebb", e.addr());
        drop(e);
        if let Some((_h, a)) = haproxy_beside("reuse-modes", cfg) {
            run("haproxy", a);
        }
    }
}

/// `log-send-hostname [NAME]`: the syslog header names the host (NAME,
/// else the system's host name) between the date and the tag; without
/// it, no host. Beside haproxy (header shape only: dates and pids
/// differ).
#[test]
fn log_send_hostname_as_haproxy() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    for (line, name) in [
        ("", None),
        ("    log-send-hostname myhost\n", Some("myhost".to_string())),
        ("    log-send-hostname\n", Some(host.clone())),
    ] {
        let syslog = Syslog::new();
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n    log {} local0\n    log-tag t\n{line}\
                 defaults\n    mode http\n    log global\n    option httplog\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
                 frontend fe\n    bind {bind}\n    http-request return status 200\n",
                sock.display(),
                syslog.addr()
            )
        };
        let shape = match &name {
            Some(h) => format!(
                r"^<\d+>[A-Z][a-z]{{2}} [ \d]\d \d\d:\d\d:\d\d {} t\[\d+\]: ",
                regex::escape(h)
            ),
            None => r"^<\d+>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d t\[\d+\]: ".to_string(),
        };
        let re = regex::Regex::new(&shape).unwrap();
        let run = |who: &str, a: SocketAddr| {
            assert_eq!(get(a, "/x").status, 200);
            let l = syslog.find("the access line", |l| l.contains("GET /x"));
            assert!(re.is_match(&l), "{who} ({line:?}): {l}");
        };
        let (e, _sock) = ebb_with_admin("sendhost", cfg);
        run("ebb", e.addr());
        drop(e);
        if let Some((_h, a)) = haproxy_beside("sendhost", cfg) {
            run("haproxy", a);
        }
    }
}

/// `stats admin unless COND`: the stats page's admin form acts unless
/// COND holds (from 127.0.0.1: `unless { src 10.0.0.0/8 }` allows,
/// `unless { src 127.0.0.0/8 }` does not): a POST putting `be/s1` into
/// maintenance takes effect or not. Beside haproxy.
#[test]
fn stats_admin_unless_as_haproxy() {
    let o = common::origin::Origin::start("adm", common::origin::Mode::Ok);
    for (net, allowed) in [("10.0.0.0/8", true), ("127.0.0.0/8", false)] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
                 frontend fe\n    bind {bind}\n    stats enable\n    stats uri /st\n    stats admin unless {{ src {net} }}\n\
                 backend be\n    server s1 {}\n",
                sock.display(),
                o.addr
            )
        };
        let run = |who: &str, sock: &Path, a: SocketAddr| {
            let body = "s=s1&action=maint&b=be";
            let req = format!(
                "POST /st HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            assert!(raw(a, req.as_bytes()).is_some(), "{who}: no answer");
            let st = stat_row(sock, "be", "s1")
                .get("status")
                .cloned()
                .unwrap_or_default();
            assert_eq!(st == "MAINT", allowed, "{who} unless {net}: {st}");
        };
        let (e, sock) = ebb_with_admin("stats-admin", cfg);
        run("ebb", &sock, e.addr());
        drop(e);
        if let Some((h, a)) = haproxy_beside("stats-admin", cfg) {
            run("haproxy", &h.sock, a);
        }
    }
}
