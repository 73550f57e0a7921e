//! Load-balancing keywords through the real binary, side by side with
//! HAProxy 2.6 when it is installed: a persisted stream whose server's
//! own queue is full (`maxqueue`), with and without `option redispatch`;
//! the order of the queues (a new stream never passes those waiting, a
//! freed slot goes to the oldest waiter of the server's and the backend's
//! queues); `option prefer-last-server` on a full server, and `no option
//! prefer-last-server`; `disable health`/`enable health`;
//! `hash-balance-factor`.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;

use common::origin::{Gate, Mode, Origin};
use common::*;

/// One request carrying the persistence cookie `SRV=a`: the status and
/// the body (the origin's name and the path).
fn get_cookie(a: SocketAddr) -> (u16, String) {
    let mut c = Client::connect(a);
    c.send(b"GET /x HTTP/1.1\r\nHost: t\r\nCookie: SRV=a\r\nConnection: close\r\n\r\n");
    let r = c.read_resp();
    (r.status, r.text())
}

/// Cookie persistence to a slow server `a` (`maxconn 1 maxqueue 1`),
/// three concurrent requests carrying its cookie: the first is served by
/// `a`, the second waits in `a`'s queue, the third finds that queue full.
/// With `option redispatch` HAProxy 2.6 hands it to the load balancer
/// (`b` answers it at once); without, it is refused with 503 at once.
/// Beside haproxy.
#[test]
fn persisted_stream_on_a_full_server_queue_as_haproxy() {
    let gate = Gate::default();
    let oa = Origin::start("a", Mode::Gate(gate.clone()));
    let ob = Origin::start("b", Mode::Ok);
    let (aa, ab) = (oa.addr, ob.addr);
    for redispatch in [true, false] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 20s\n    timeout server 20s\n    timeout connect 5s\n    timeout queue 20s\n\
                 listen px\n    bind {bind}\n    balance roundrobin\n    cookie SRV\n{}\
                 \x20   server a {aa} maxconn 1 maxqueue 1 cookie a\n\
                 \x20   server b {ab} cookie b\n",
                sock.display(),
                if redispatch {
                    "    option redispatch\n"
                } else {
                    ""
                }
            )
        };
        let run = |a: SocketAddr, sock: &Path| -> Vec<(u16, String)> {
            gate.close();
            let busy = oa.busy.load(Ordering::SeqCst);
            let send = move || std::thread::spawn(move || get_cookie(a));
            let first = send();
            wait_until("the first request at server a", || {
                oa.busy.load(Ordering::SeqCst) > busy
            });
            let second = send();
            wait_until("the second request in a's queue", || {
                stat_row(sock, "px", "a")
                    .get("qcur")
                    .is_some_and(|q| q == "1")
            });
            // Answered while `a` is still held: by `b`, or refused.
            let third = send().join().unwrap();
            gate.open();
            vec![first.join().unwrap(), second.join().unwrap(), third]
        };
        let third = if redispatch {
            (200, "b /x".to_string())
        } else {
            (503, String::new())
        };
        let check = |who: &str, got: Vec<(u16, String)>| {
            assert_eq!(got[0], (200, "a /x".to_string()), "{who} {redispatch}");
            assert_eq!(got[1], (200, "a /x".to_string()), "{who} {redispatch}");
            assert_eq!(got[2].0, third.0, "{who} redispatch {redispatch}");
            if redispatch {
                assert_eq!(got[2].1, third.1, "{who} redispatch {redispatch}");
            }
        };
        let (e, sock) = ebb_with_admin("kw-lb-maxqueue", cfg);
        check("ebb", run(e.addr(), &sock));
        drop(e);
        if let Some((h, a)) = haproxy_beside("kw-lb-maxqueue", cfg) {
            check("haproxy", run(a, &h.sock));
        }
    }
}

/// A `listen px` on `bind` with the lines `lb` and `servers`, 30 s
/// timeouts (`timeout queue` too), its admin socket at `sock`.
fn px_cfg(sock: &Path, bind: &str, lb: &str, servers: &str) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n    timeout queue 30s\n\
         listen px\n    bind {bind}\n    {lb}\n    {servers}\n",
        sock.display()
    )
}

/// `GET path` on a new connection with `Cookie: SRV=a` when `cookie`,
/// in a thread: the status.
fn send_get(a: SocketAddr, path: &str, cookie: bool) -> std::thread::JoinHandle<u16> {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\n{}Connection: close\r\n\r\n",
        if cookie { "Cookie: SRV=a\r\n" } else { "" }
    );
    std::thread::spawn(move || {
        let mut c = Client::connect(a);
        c.send(req.as_bytes());
        c.read_resp().status
    })
}

/// A server with a free slot takes no new stream while others wait in
/// its queue (HAProxy 2.6's assign_server_and_queue). `balance uri` binds
/// every stream to server `a` (`minconn 1 maxconn 10`, `fullconn 20`):
/// its limit is `max(1, load x 10 / 20)`, the load counting the arriving
/// stream. Five requests arrive one after the other while `a` holds
/// them: the first is served, the next ones queue; at the fifth the limit
/// is 2 (a slot free) but four wait: it queues behind them. Beside
/// haproxy.
#[test]
fn a_new_stream_queues_behind_those_waiting_for_its_server() {
    let gate = Gate::default();
    let oa = Origin::start("a", Mode::Gate(gate.clone()));
    let aa = oa.addr;
    let cfg = |sock: &Path, bind: &str| {
        let lb = "balance uri\n    fullconn 20";
        px_cfg(
            sock,
            bind,
            lb,
            &format!("server a {aa} minconn 1 maxconn 10"),
        )
    };
    let run = |a: SocketAddr, sock: &Path| -> Vec<usize> {
        gate.close();
        let base = oa.busy.load(Ordering::SeqCst);
        let mut ths = Vec::new();
        let mut busy = Vec::new();
        for i in 0..5usize {
            ths.push(send_get(a, &format!("/q{i}"), false));
            wait_until(&format!("request {i} served or queued"), || {
                let q: usize = (stat_row(sock, "px", "a").get("qcur"))
                    .and_then(|q| q.parse().ok())
                    .unwrap_or(0);
                oa.busy.load(Ordering::SeqCst) - base + q == i + 1
            });
            busy.push(oa.busy.load(Ordering::SeqCst) - base);
        }
        gate.open();
        for t in ths {
            assert_eq!(t.join().unwrap(), 200);
        }
        busy
    };
    let (e, sock) = ebb_with_admin("kw-lb-behind", cfg);
    let ours = run(e.addr(), &sock);
    drop(e);
    assert_eq!(ours, vec![1; 5]);
    if let Some((h, a)) = haproxy_beside("kw-lb-behind", cfg) {
        assert_eq!(run(a, &h.sock), ours, "ebb vs haproxy");
    }
}

/// A freed slot goes to the older of the first waiters of the server's
/// queue and the backend's (HAProxy 2.6's pendconn_process_next_strm),
/// not to the server's queue first. One server `a` (`maxconn 1`),
/// cookie persistence: /1 is served; /2 (no cookie) waits in the
/// backend's queue; /3 (the cookie: bound to `a`) in `a`'s queue; /4 in
/// the backend's, behind /2. `a` then serves them in their order of
/// arrival. Beside haproxy.
#[test]
fn a_freed_slot_goes_to_the_oldest_waiter_of_either_queue() {
    let gate = Gate::default();
    let oa = Origin::start("a", Mode::Gate(gate.clone()));
    let aa = oa.addr;
    let cfg = |sock: &Path, bind: &str| {
        let lb = "balance roundrobin\n    cookie SRV";
        px_cfg(sock, bind, lb, &format!("server a {aa} maxconn 1 cookie a"))
    };
    let run = |a: SocketAddr, sock: &Path| -> Vec<String> {
        gate.close();
        oa.heads.lock().unwrap().clear();
        let base = oa.busy.load(Ordering::SeqCst);
        let q = |srv: &str| -> usize {
            (stat_row(sock, "px", srv).get("qcur"))
                .and_then(|q| q.parse().ok())
                .unwrap_or(0)
        };
        let mut ths = vec![send_get(a, "/1", false)];
        wait_until("/1 at a", || oa.busy.load(Ordering::SeqCst) > base);
        // HAProxy orders its queues by the millisecond of arrival (the
        // server's queue first on a tie): each waiter arrives in a later
        // millisecond than the one before.
        let tick = || std::thread::sleep(std::time::Duration::from_millis(3));
        ths.push(send_get(a, "/2", false));
        wait_until("/2 in the backend's queue", || q("BACKEND") == 1);
        tick();
        ths.push(send_get(a, "/3", true));
        wait_until("/3 in a's queue", || q("a") == 1);
        tick();
        ths.push(send_get(a, "/4", false));
        wait_until("/4 in the backend's queue", || q("BACKEND") == 2);
        gate.open();
        for t in ths {
            assert_eq!(t.join().unwrap(), 200);
        }
        let heads = oa.heads.lock().unwrap();
        heads
            .iter()
            .filter_map(|h| h.split_whitespace().nth(1).map(String::from))
            .collect()
    };
    let want: Vec<String> = ["/1", "/2", "/3", "/4"].map(String::from).to_vec();
    let (e, sock) = ebb_with_admin("kw-lb-oldest", cfg);
    assert_eq!(run(e.addr(), &sock), want);
    drop(e);
    if let Some((h, a)) = haproxy_beside("kw-lb-oldest", cfg) {
        assert_eq!(run(a, &h.sock), want, "haproxy");
    }
}

/// Sends `GET path` on `c` (kept alive): the status and the body.
fn ka_get(c: &mut Client, path: &str) -> (u16, String) {
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    let r = c.read_resp();
    (r.status, r.text())
}

/// `option prefer-last-server` sends a client's next request to the
/// server of its previous one even when that server is full; its queue
/// at its `maxqueue`, HAProxy 2.6 refuses the request with 503 (a failed
/// connection counted on the server: `econ`), `option redispatch` or not:
/// it redispatches on a full queue only what persistence sent there.
/// Servers `a` and `b` (`maxconn 1 maxqueue 1`, `http-reuse never`, so the
/// client keeps its server connection): the client's first request shows
/// its server X; two requests carrying X's cookie fill X (one served,
/// one queued); the client's second request is refused. Beside haproxy.
#[test]
fn prefer_last_server_on_a_full_queue_is_refused_as_haproxy() {
    let (ga, gb) = (Gate::default(), Gate::default());
    let oa = Origin::start("a", Mode::Gate(ga.clone()));
    let ob = Origin::start("b", Mode::Gate(gb.clone()));
    let (aa, ab) = (oa.addr, ob.addr);
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n    timeout queue 30s\n\
             listen px\n    bind {bind}\n    balance roundrobin\n    cookie SRV\n    http-reuse never\n\
             \x20   option prefer-last-server\n    option redispatch\n\
             \x20   server a {aa} maxconn 1 maxqueue 1 cookie a\n\
             \x20   server b {ab} maxconn 1 maxqueue 1 cookie b\n",
            sock.display()
        )
    };
    let run = |a: SocketAddr, sock: &Path| {
        ga.open();
        gb.open();
        let mut c = Client::connect(a);
        let (st, body) = ka_get(&mut c, "/first");
        assert_eq!(st, 200);
        let x = if body.starts_with("a ") { "a" } else { "b" };
        let (ox, gx) = if x == "a" { (&oa, &ga) } else { (&ob, &gb) };
        gx.close();
        let base = ox.busy.load(Ordering::SeqCst);
        let held = |path: &'static str| {
            let req = format!(
                "GET {path} HTTP/1.1\r\nHost: t\r\nCookie: SRV={x}\r\nConnection: close\r\n\r\n"
            );
            std::thread::spawn(move || {
                let mut c = Client::connect(a);
                c.send(req.as_bytes());
                c.read_resp().status
            })
        };
        let h1 = held("/h1");
        wait_until("/h1 at X", || ox.busy.load(Ordering::SeqCst) > base);
        let h2 = held("/h2");
        wait_until("/h2 in X's queue", || {
            stat_row(sock, "px", x)
                .get("qcur")
                .is_some_and(|q| q == "1")
        });
        let (st, _) = ka_get(&mut c, "/second");
        assert_eq!(st, 503, "the client's second request, its server {x} full");
        let row = stat_row(sock, "px", x);
        gx.open();
        assert_eq!(h1.join().unwrap(), 200);
        assert_eq!(h2.join().unwrap(), 200);
        assert_eq!(row.get("econ").map(String::as_str), Some("1"), "{row:?}");
        assert_eq!(row.get("wredis").map(String::as_str), Some("0"), "{row:?}");
    };
    let (e, sock) = ebb_with_admin("kw-lb-last-full", cfg);
    run(e.addr(), &sock);
    drop(e);
    if let Some((h, a)) = haproxy_beside("kw-lb-last-full", cfg) {
        run(a, &h.sock);
    }
}

/// `option prefer-last-server` in `defaults` keeps a client's requests
/// on one server; `no option prefer-last-server` in the backend turns it
/// off: the round robin alternates them. Beside haproxy.
#[test]
fn no_option_prefer_last_server_as_haproxy() {
    let oa = Origin::start("a", Mode::Ok);
    let ob = Origin::start("b", Mode::Ok);
    let (aa, ab) = (oa.addr, ob.addr);
    for no in [false, true] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
                 \x20   option prefer-last-server\n    http-reuse never\n\
                 listen px\n    bind {bind}\n    balance roundrobin\n{}\
                 \x20   server a {aa}\n    server b {ab}\n",
                sock.display(),
                if no {
                    "    no option prefer-last-server\n"
                } else {
                    ""
                }
            )
        };
        let run = |a: SocketAddr| -> Vec<String> {
            let mut c = Client::connect(a);
            (0..4)
                .map(|i| {
                    let (st, body) = ka_get(&mut c, &format!("/p{i}"));
                    assert_eq!(st, 200);
                    body.split(' ').next().unwrap_or("").to_string()
                })
                .collect()
        };
        let check = |who: &str, got: Vec<String>| {
            let same = got.iter().all(|s| *s == got[0]);
            let alternate = got.windows(2).all(|w| w[0] != w[1]);
            assert!(if no { alternate } else { same }, "{who} no={no}: {got:?}");
        };
        let (e, _sock) = ebb_with_admin("kw-lb-no-last", cfg);
        check("ebb", run(e.addr()));
        drop(e);
        if let Some((_h, a)) = haproxy_beside("kw-lb-no-last", cfg) {
            check("haproxy", run(a));
        }
    }
}

/// `disable health` stops a server's check and nothing else: a DOWN
/// server stays DOWN and takes no traffic (HAProxy 2.6's code; its
/// manual says "considered UP"), `show stat` hides its check and `show
/// servers state` gives the check as configured but not enabled (state
/// 2); `enable health` resumes the check; on a server without `check` it
/// is refused with HAProxy's message. Beside haproxy.
#[test]
fn disable_health_keeps_a_down_server_down_as_haproxy() {
    let dead = closed_port();
    let ot = Origin::start("t", Mode::Ok);
    let (sa, ta) = (dead.addr, ot.addr);
    let cfg = |sock: &Path, bind: &str| {
        px_cfg(
            sock,
            bind,
            "balance roundrobin",
            &format!(
                "server s {sa} check inter 100ms fall 1 rise 1\n    server t {ta} check inter 100ms\n    server u {ta}"
            ),
        )
    };
    let run = |a: SocketAddr, sock: &Path| -> Vec<String> {
        let status = || {
            stat_row(sock, "px", "s")
                .get("status")
                .cloned()
                .unwrap_or_default()
        };
        wait_until("s DOWN", || status() == "DOWN");
        assert_eq!(cli_cmd(sock, "disable health px/s").trim(), "");
        assert_eq!(status(), "DOWN");
        let row = stat_row(sock, "px", "s");
        assert_eq!(
            row.get("check_status").map(String::as_str),
            Some(""),
            "{row:?}"
        );
        for i in 0..4 {
            assert_eq!(get(a, &format!("/d{i}")).status, 200);
        }
        assert_eq!(status(), "DOWN");
        let state = cli_cmd(sock, "show servers state px");
        let line: Vec<String> = (state.lines())
            .find(|l| l.split(' ').nth(3) == Some("s"))
            .unwrap_or("")
            .split(' ')
            .map(String::from)
            .collect();
        let refused = cli_cmd(sock, "enable health px/u");
        assert_eq!(cli_cmd(sock, "enable health px/s").trim(), "");
        assert_eq!(status(), "DOWN");
        // Columns 5 to 14 but the time since the last change (9).
        let mut got: Vec<String> = line.get(5..15).unwrap_or(&[]).to_vec();
        if got.len() > 4 {
            got.remove(4);
        }
        got.push(refused.trim_end().to_string());
        got
    };
    let (e, sock) = ebb_with_admin("kw-lb-dhealth", cfg);
    let ours = run(e.addr(), &sock);
    drop(e);
    assert_eq!(
        ours,
        ["0", "0", "1", "1", "8", "2", "0", "2", "0"]
            .map(String::from)
            .into_iter()
            .chain(["Health check was not configured on this server, cannot enable.".to_string()])
            .collect::<Vec<_>>()
    );
    if let Some((h, a)) = haproxy_beside("kw-lb-dhealth", cfg) {
        assert_eq!(run(a, &h.sock), ours, "ebb vs haproxy");
    }
}

/// `hash-balance-factor 150` under `hash-type consistent`: requests for
/// one URI go to its server while it serves fewer than its share of the
/// streams in use (plus the arriving one) times 1.5, then to the next
/// server on the ring (HAProxy 2.6's chash_server_is_eligible). Eight
/// requests for /same arrive one after the other at two servers that
/// hold them: the streams each serves after each arrival, beside
/// haproxy; without the factor all would go to one server.
#[test]
fn hash_balance_factor_spreads_one_key_as_haproxy() {
    let gate = Gate::default();
    let oa = Origin::start("a", Mode::Gate(gate.clone()));
    let ob = Origin::start("b", Mode::Gate(gate.clone()));
    let (aa, ab) = (oa.addr, ob.addr);
    let cfg = |sock: &Path, bind: &str| {
        px_cfg(
            sock,
            bind,
            "balance uri\n    hash-type consistent\n    hash-balance-factor 150",
            &format!("server a {aa}\n    server b {ab}"),
        )
    };
    let run = |a: SocketAddr| -> Vec<(usize, usize)> {
        gate.close();
        let base = (
            oa.busy.load(Ordering::SeqCst),
            ob.busy.load(Ordering::SeqCst),
        );
        let now = || {
            (
                oa.busy.load(Ordering::SeqCst) - base.0,
                ob.busy.load(Ordering::SeqCst) - base.1,
            )
        };
        let mut ths = Vec::new();
        let mut seen = Vec::new();
        for i in 0..8usize {
            ths.push(send_get(a, "/same", false));
            wait_until(&format!("request {i} at a server"), || {
                let (x, y) = now();
                x + y == i + 1
            });
            seen.push(now());
        }
        gate.open();
        for t in ths {
            assert_eq!(t.join().unwrap(), 200);
        }
        seen
    };
    let (e, _sock) = ebb_with_admin("kw-lb-hbf", cfg);
    let ours = run(e.addr());
    drop(e);
    println!("served by a, b after each arrival: {ours:?}");
    let last = ours[ours.len() - 1];
    assert!(last.0 > 0 && last.1 > 0, "{ours:?}");
    if let Some((_h, a)) = haproxy_beside("kw-lb-hbf", cfg) {
        assert_eq!(run(a), ours, "ebb vs haproxy");
    }
}

/// `cookie SRV insert dynamic` with `dynamic-cookie-key`: a server
/// without `cookie VALUE` gets HAProxy 2.6's derived value (XXH64 of the
/// key, its address and port), the same byte for byte as haproxy's in
/// `show stat` (IPv4 and IPv6, a server in maintenance too), in the
/// `Set-Cookie` it inserts, and to persist on; `set server ... addr`
/// derives it again. Beside haproxy.
#[test]
fn dynamic_cookies_are_haproxys() {
    let oa = Origin::start("a", Mode::Ok);
    let ob = Origin::start("b", Mode::Ok);
    let (aa, ab) = (oa.addr, ob.addr);
    let cfg = |sock: &Path, bind: &str| {
        px_cfg(
            sock,
            bind,
            "cookie SRV insert dynamic\n    dynamic-cookie-key MySecretKey",
            &format!(
                "server s {aa}\n    server t {ab} cookie fixed\n    server u [::1]:{} disabled",
                aa.port()
            ),
        )
    };
    let run = |a: SocketAddr, sock: &Path| -> Vec<String> {
        let col = |srv: &str| {
            stat_row(sock, "px", srv)
                .get("cookie")
                .cloned()
                .unwrap_or_default()
        };
        let mut seen: Vec<String> = ["s", "t", "u", "BACKEND"].iter().map(|s| col(s)).collect();
        // The inserted cookies, and persistence on the derived one.
        let mut set = std::collections::BTreeSet::new();
        for _ in 0..2 {
            let r = get(a, "/x");
            set.insert(r.header("set-cookie").unwrap_or("").to_string());
        }
        seen.extend(set);
        for _ in 0..3 {
            let mut c = Client::connect(a);
            let req = format!(
                "GET /p HTTP/1.1\r\nHost: t\r\nCookie: SRV={}\r\nConnection: close\r\n\r\n",
                seen[0]
            );
            c.send(req.as_bytes());
            assert_eq!(c.read_resp().text(), "a /p");
        }
        cli_cmd(sock, "set server px/s addr 127.0.0.2");
        seen.push(col("s"));
        seen
    };
    let (e, sock) = ebb_with_admin("kw-lb-dyncookie", cfg);
    let ours = run(e.addr(), &sock);
    drop(e);
    println!("{ours:?}");
    assert_eq!(ours[0].len(), 16, "{ours:?}");
    assert_eq!(ours[1], "fixed");
    assert_eq!(ours[3], "SRV");
    assert_ne!(Some(&ours[0]), ours.last(), "{ours:?}");
    // The key is required, by both.
    let d = scratch("kw-lb-dyncookie-bad");
    let text = "defaults\n    mode http\nbackend be\n    cookie SRV insert dynamic\n    dynamic-cookie-key\n    server s 127.0.0.1:9\n";
    let what = "e.cfg:5: 'dynamic-cookie-key' expects <secret_key> as argument.";
    assert_refused(&d, "e.cfg", text, what, true);
    if let Some((h, a)) = haproxy_beside("kw-lb-dyncookie", cfg) {
        assert_eq!(run(a, &h.sock), ours, "ebb vs haproxy");
    }
}

/// In a tcp proxy too, a stream the balancer binds to a server whose
/// queue is at its `maxqueue` is refused with HAProxy's queue error: the
/// log's termination state `SQ` (was `SC`), with the server's name (was
/// `<NOSRV>`). `balance source` binds every
/// connection to `a` (`maxconn 1 maxqueue 1`): the first is served, the
/// second waits in `a`'s queue, the third is refused. Beside haproxy.
#[test]
fn tcp_stream_on_a_full_server_queue_logs_sq_as_haproxy() {
    let gate = Gate::default();
    let oa = Origin::start("a", Mode::Gate(gate.clone()));
    let aa = oa.addr;
    let run = |log: &Syslog, a: SocketAddr, sock: &Path| -> String {
        gate.close();
        let base = oa.busy.load(Ordering::SeqCst);
        let send = move || {
            std::thread::spawn(move || {
                let mut c = Client::connect(a);
                c.send(b"GET /t HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
                c.read_resp_opt(false).map(|r| r.status)
            })
        };
        let first = send();
        wait_until("the first at a", || oa.busy.load(Ordering::SeqCst) > base);
        let second = send();
        wait_until("the second in a's queue", || {
            stat_row(sock, "px", "a")
                .get("qcur")
                .is_some_and(|q| q == "1")
        });
        let third = send().join().unwrap();
        assert_eq!(third, None, "the third is closed");
        let line = log.next("127.0.0.1:");
        gate.open();
        assert_eq!(first.join().unwrap(), Some(200));
        assert_eq!(second.join().unwrap(), Some(200));
        println!("{line}");
        let f: Vec<&str> = line.split_whitespace().collect();
        format!("{} {}", f.get(3).unwrap_or(&""), f.get(6).unwrap_or(&""))
    };
    let cfg = |log: SocketAddr| {
        move |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode tcp\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n    timeout queue 30s\n\
                 listen px\n    bind {bind}\n    log {log} local0\n    option tcplog\n    balance source\n\
                 \x20   server a {aa} maxconn 1 maxqueue 1\n",
                sock.display()
            )
        }
    };
    let log = Syslog::new();
    let (e, sock) = ebb_with_admin("kw-lb-tcp-sq", cfg(log.addr()));
    assert_eq!(run(&log, e.addr(), &sock), "px/a SQ");
    drop(e);
    let hlog = Syslog::new();
    if let Some((h, a)) = haproxy_beside("kw-lb-tcp-sq", cfg(hlog.addr())) {
        assert_eq!(run(&hlog, a, &h.sock), "px/a SQ", "haproxy");
    }
}
