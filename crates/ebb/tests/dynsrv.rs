//! Servers added on the CLI and the server TLS switches, beside haproxy
//! 2.6 where it runs: `add server` into a `listen` section without
//! servers, `track` on an added server (and HAProxy's refusals), checks
//! of an added server (TLS and PROXY header only when asked), `set server
//! B/S ssl on|off` with `show servers state`'s `srv_use_ssl`, `addr
//! IP:PORT`, the log line of a DOWN server entering maintenance, a
//! deleted server's certificate ("Unused"), and `pool-low-conn`.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use common::origin::{Mode, Origin};
use common::*;

fn track_cfg(sock: &Path, bind: &str, a: &Origin) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         listen li\n    bind {bind}\n    balance roundrobin\n\
         backend be_check\n    server chk {a} check inter 1h\n    server nochk {a}\n\
         \x20   server ssl1 {a} no-ssl\n    default-server ssl verify none\n    server ssl2 {a} no-ssl\n",
        sock.display(),
        a = a.addr,
    )
}

/// What a client and the CLI see, in order.
fn track_run(addr: SocketAddr, sock: &Path, a: &Origin) -> Vec<String> {
    let mut seen = vec![get(addr, "/").status.to_string()];
    let a = a.addr;
    let mut cmd = |c: &str| seen.push(cli_cmd(sock, c).trim().to_string());
    for c in [
        format!("add server be_check/t1 {a} track be_check/nochk"),
        format!("add server be_check/t1 {a} track be_check/chk"),
        format!("add server be_check/t2 {a} track be_check/t1"),
        format!("add server be_check/t3 {a} check track be_check/chk"),
        format!("add server be_check/t4 {a} track nope/chk"),
        format!("add server be_check/t4 {a} track nope"),
        format!("add server li/s1 {a}"),
        "enable server li/s1".into(),
        "set server be_check/ssl1 ssl on".into(),
        "set server be_check/ssl2 ssl maybe".into(),
        "set server be_check/t1 ssl on".into(),
    ] {
        cmd(&c);
    }
    seen.push(get(addr, "/").status.to_string());
    // `srv_use_ssl`: -1 after `no-ssl`, 0 by default, 1 once switched on.
    let ssl = |seen: &mut Vec<String>| {
        for s in ["nochk", "ssl1", "ssl2", "t1"] {
            let l = servers_state_line(sock, "be_check", s);
            seen.push(format!("{s} ssl={}", l[20]));
        }
    };
    ssl(&mut seen);
    seen.push(
        cli_cmd(sock, "set server be_check/ssl2 ssl on")
            .trim()
            .into(),
    );
    ssl(&mut seen);
    seen.push(
        cli_cmd(sock, "set server be_check/ssl2 ssl off")
            .trim()
            .into(),
    );
    ssl(&mut seen);
    // The tracked server passes its maintenance on, and can no longer go.
    seen.push(cli_cmd(sock, "disable server be_check/chk").trim().into());
    let t1 = servers_state_line(sock, "be_check", "t1");
    seen.push(format!("t1 op={} admin={}", t1[5], t1[6]));
    seen.push(cli_cmd(sock, "del server be_check/chk").trim().into());
    seen
}

#[test]
fn added_servers_track_join_a_listen_and_switch_tls_as_haproxy() {
    let a = Origin::start("a", Mode::Ok);
    let (e, sock) = ebb_with_admin("dyn-track", |k, b| track_cfg(k, b, &a));
    let ours = track_run(e.addr(), &sock, &a);
    let nochk = "unable to use be_check/nochk for tracking as it does not have any check nor agent enabled.";
    assert_eq!(ours[0], "503", "{ours:?}");
    assert_eq!(ours[1], nochk, "{ours:?}");
    assert_eq!(ours[2], "New server registered.", "{ours:?}");
    assert_eq!(
        ours[3], "unable to use be_check/t1 for tracking as it is a dynamic server.",
        "{ours:?}"
    );
    assert_eq!(ours[12], "200", "{ours:?}");
    assert!(ours.contains(&"ssl2 ssl=1".to_string()), "{ours:?}");
    assert!(ours.contains(&"ssl1 ssl=-1".to_string()), "{ours:?}");
    assert_eq!(
        ours.last().map(String::as_str),
        Some("This server cannot be removed at runtime due to other configuration elements pointing to it."),
        "{ours:?}"
    );
    let Some((h, hap)) = haproxy_beside("dyn-track", |k, b| track_cfg(k, b, &a)) else {
        return;
    };
    assert_eq!(
        track_run(hap, &h.sock, &a),
        ours,
        "haproxy (left), ebb (right)"
    );
}

fn checks_cfg(sock: &Path, bind: &str, d: &Path) -> (String, SocketAddr, SocketAddr) {
    let tls = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let pp = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let pem = d.join("srv.pem");
    self_signed_pem(&pem, "srv.test");
    let cfg = format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         backend be\n    option httpchk GET /\n    balance roundrobin\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         frontend tls\n    bind {tls} ssl crt {}\n    http-request return status 200\n\
         frontend pp\n    bind {pp} accept-proxy\n    http-request return status 200\n",
        sock.display(),
        pem.display(),
    );
    (cfg, tls, pp)
}

/// Adds checked servers (to a TLS frontend, to a PROXY-header one), with
/// and without `check-ssl` and `check-send-proxy`, and waits for each
/// one's state: "name status check_status".
fn checks_run(sock: &Path, tls: SocketAddr, pp: SocketAddr) -> Vec<String> {
    let opts = "check inter 100ms rise 1 fall 1";
    let mut seen = Vec::new();
    for (name, line) in [
        ("s1", format!("{tls} ssl verify none {opts}")),
        ("s2", format!("{tls} ssl verify none {opts} check-ssl")),
        ("s3", format!("{pp} send-proxy {opts}")),
        ("s4", format!("{pp} send-proxy {opts} check-send-proxy")),
    ] {
        seen.push(
            cli_cmd(sock, &format!("add server be/{name} {line}"))
                .trim()
                .to_string(),
        );
        cli_cmd(sock, &format!("enable server be/{name}"));
        cli_cmd(sock, &format!("enable health be/{name}"));
    }
    for name in ["s1", "s2", "s3", "s4"] {
        let mut st = String::new();
        wait_until(&format!("a check of be/{name}"), || {
            let r = stat_row(sock, "be", name);
            let s = r.get("status").cloned().unwrap_or_default();
            // ("* " marks a check under way.)
            let c = r
                .get("check_status")
                .map(|c| c.trim_start_matches("* ").to_string())
                .unwrap_or_default();
            st = format!("{name} {s} {c}");
            // A check has run: its result is not the initial one.
            !c.is_empty() && !c.starts_with("INI") && (s == "UP" || s == "DOWN")
        });
        // A DOWN server's check status depends on how the origin closed:
        // its state is what both agree on.
        seen.push(st.split(' ').take(2).collect::<Vec<_>>().join(" "));
    }
    seen
}

#[test]
fn added_servers_check_over_tls_and_proxy_only_when_asked() {
    let d = scratch("dyn-checks");
    let (cfg, tls, pp) = checks_cfg(&d.join("admin.sock"), "BIND", &d);
    let sock = d.join("admin.sock");
    let e = Ebb::start(&cfg);
    let _ = e.addr();
    let ours = checks_run(&sock, tls, pp);
    assert_eq!(
        ours[4..],
        ["s1 DOWN", "s2 UP", "s3 DOWN", "s4 UP"],
        "{ours:?}"
    );
    drop(e);
    let hd = scratch("dyn-checks-h");
    let hbind = format!("127.0.0.1:{}", free_port());
    let (hcfg, htls, hpp) = checks_cfg(&hd.join("h.sock"), &hbind, &hd);
    let Some(rest) = hcfg.split_once("level admin\n").map(|x| x.1.to_string()) else {
        return;
    };
    let Some(h) = haproxy_with("dyn-checks", &rest) else {
        return;
    };
    assert_eq!(
        checks_run(&h.sock, htls, hpp),
        ours,
        "haproxy (left), ebb (right)"
    );
}

fn maint_cfg(sock: &Path, bind: &str, log: SocketAddr, dead: u16, o: &Origin) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    log {log} daemon\n\
         \x20   server dead 127.0.0.1:{dead} check inter 100ms rise 1 fall 1\n\
         \x20   server viaaddr 127.0.0.1:{dead} check inter 100ms rise 1 fall 1 addr {}\n",
        sock.display(),
        o.addr,
    )
}

/// A DOWN server entering maintenance says so in a notice (no server
/// count: it carried nothing), and a check's `addr IP:PORT` goes to that
/// port.
fn maint_run(sock: &Path, log: &Syslog) -> Vec<String> {
    log.next("Server be/dead is DOWN");
    wait_until("be/viaaddr checked", || {
        stat_row(sock, "be", "viaaddr")
            .get("check_status")
            .is_some_and(|s| s == "L4OK")
    });
    cli_cmd(sock, "disable server be/dead");
    vec![
        log.next("Server be/dead "),
        stat_row(sock, "be", "viaaddr")["status"].clone(),
    ]
}

#[test]
fn a_down_server_enters_maintenance_with_a_notice_and_addr_takes_a_port() {
    let o = Origin::start("o", Mode::Ok);
    let dead = closed_port();
    let log = Syslog::new();
    let (_e, sock) = ebb_with_admin("dyn-maint", |k, b| {
        maint_cfg(k, b, log.addr(), dead.addr.port(), &o)
    });
    let ours = maint_run(&sock, &log);
    assert_eq!(
        ours,
        ["Server be/dead was DOWN and now enters maintenance.", "UP"],
        "{ours:?}"
    );
    let hlog = Syslog::new();
    let Some((h, _)) = haproxy_beside("dyn-maint", |k, b| {
        maint_cfg(k, b, hlog.addr(), dead.addr.port(), &o)
    }) else {
        return;
    };
    assert_eq!(
        maint_run(&h.sock, &hlog),
        ours,
        "haproxy (left), ebb (right)"
    );
}

fn cert_cfg(sock: &Path, bind: &str, pem: &Path) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    server s1 127.0.0.1:9 ssl verify none crt {}\n",
        sock.display(),
        pem.display()
    )
}

/// `show ssl cert`'s status of a server's certificate as its server
/// leaves (`del server`) and another comes with it (`add server`).
fn cert_run(sock: &Path, pem: &Path) -> Vec<String> {
    let status = || {
        cli_cmd(sock, &format!("show ssl cert {}", pem.display()))
            .lines()
            .find(|l| l.starts_with("Status:"))
            .unwrap_or("")
            .to_string()
    };
    let mut seen = vec![status()];
    cli_cmd(sock, "disable server be/s1");
    seen.push(cli_cmd(sock, "del server be/s1").trim().to_string());
    seen.push(status());
    seen.push(
        cli_cmd(
            sock,
            &format!(
                "add server be/s2 127.0.0.1:9 ssl verify none crt {}",
                pem.display()
            ),
        )
        .trim()
        .to_string(),
    );
    seen.push(status());
    seen
}

#[test]
fn a_deleted_servers_certificate_is_unused() {
    let d = scratch("dyn-cert");
    let pem = d.join("client.pem");
    self_signed_pem(&pem, "client.test");
    let (_e, sock) = ebb_with_admin("dyn-cert", |k, b| cert_cfg(k, b, &pem));
    let ours = cert_run(&sock, &pem);
    assert_eq!(
        ours,
        [
            "Status: Used",
            "Server deleted.",
            "Status: Unused",
            "New server registered.",
            "Status: Used"
        ],
        "{ours:?}"
    );
    let Some((h, _)) = haproxy_beside("dyn-cert", |k, b| cert_cfg(k, b, &pem)) else {
        return;
    };
    assert_eq!(cert_run(&h.sock, &pem), ours, "haproxy (left), ebb (right)");
}

#[test]
fn pool_low_conn_takes_a_number() {
    let d = scratch("dyn-lowconn");
    let cfg = |v: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
             frontend fe\n    bind 127.0.0.1:{}\n    default_backend be\n\
             backend be\n    server s1 127.0.0.1:9 pool-low-conn {v}\n",
            free_port()
        )
    };
    for ok in ["2", "0", "-1"] {
        std::fs::write(d.join("ok.cfg"), cfg(ok)).unwrap();
        let (rc, _, err) = run_ebb(&["-c", "-f", "ok.cfg"], &d);
        assert_eq!(rc, 0, "pool-low-conn {ok}: {err}");
        assert_eq!(
            haproxy_refuses(&d.join("ok.cfg")),
            Some(false).filter(|_| have("haproxy"))
        );
    }
    assert_refused(
        &d,
        "bad.cfg",
        &cfg("two"),
        "'pool-low-conn' expects an integer, got 'two'",
        false,
    );
}

fn dst_cfg(sock: &Path, bind: &str, r1: u16, r2: u16) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         listen sender\n    bind {bind}\n    http-request set-dst-port hdr(x-dst-port)\n\
         \x20   server s 127.0.0.1:0\n\
         listen r1\n    bind 127.0.0.1:{r1}\n    http-request return status 200 hdr x-dst r1\n\
         listen r2\n    bind 127.0.0.1:{r2}\n    http-request return status 200 hdr x-dst r2\n",
        sock.display()
    )
}

/// One client's requests to a server of port 0 (the stream's destination
/// port, here set from a header): each goes where it says, a kept
/// connection being reused only for its own destination.
fn dst_run(addr: SocketAddr, r1: u16, r2: u16) -> Vec<String> {
    let mut c = Client::connect(addr);
    let mut seen = Vec::new();
    for p in [r1, r1, r2, r1, r2] {
        c.send(format!("GET / HTTP/1.1\r\nhost: x\r\nx-dst-port: {p}\r\n\r\n").as_bytes());
        let r = c.read_resp();
        seen.push(format!("{} {}", r.status, r.header("x-dst").unwrap_or("-")));
    }
    seen
}

#[test]
fn a_kept_connection_serves_its_own_destination_only() {
    let (r1, r2) = (free_port(), free_port());
    let (e, _) = ebb_with_admin("dyn-dst", |k, b| dst_cfg(k, b, r1, r2));
    let ours = dst_run(e.addr(), r1, r2);
    assert_eq!(
        ours,
        ["200 r1", "200 r1", "200 r2", "200 r1", "200 r2"],
        "{ours:?}"
    );
    drop(e);
    let Some((_h, hap)) = haproxy_beside("dyn-dst", |k, b| dst_cfg(k, b, r1, r2)) else {
        return;
    };
    assert_eq!(dst_run(hap, r1, r2), ours, "haproxy (left), ebb (right)");
}

fn pp_cfg(sock: &Path, bind: &str, recv: u16) -> String {
    format!(
        "global\n    stats socket {} level admin\n    nbthread 1\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         listen sender\n    bind {bind} accept-proxy\n    http-reuse always\n\
         \x20   server s 127.0.0.1:{recv} send-proxy pool-low-conn 4\n\
         listen receiver\n    bind 127.0.0.1:{recv} accept-proxy\n    http-request return status 200\n\
         \x20   http-after-response set-header first %[http_first_req]\n",
        sock.display()
    )
}

/// Clients one after the other, each with its own PROXY header (its
/// source port): a connection to a `send-proxy` server left idle by one
/// is taken by the next whose header is the same, not by another
/// (HAProxy's connection hash, with `http-reuse always`). One thread, and
/// `pool-low-conn` for room: the three idle connections stay whatever the
/// estimate of those needed says when the next one is released.
fn pp_run(addr: SocketAddr) -> Vec<String> {
    let mut seen = Vec::new();
    for (port, n) in [(40000, 2), (50000, 1), (40000, 1), (60000, 1), (50000, 2)] {
        let mut c = Client::connect(addr);
        c.send(
            format!(
                "PROXY TCP4 127.0.0.1 {} {port} {}\r\n",
                addr.ip(),
                addr.port()
            )
            .as_bytes(),
        );
        let mut firsts = Vec::new();
        for _ in 0..n {
            c.send(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n");
            let r = c.read_resp();
            firsts.push(format!("{}:{}", r.status, r.header("first").unwrap_or("-")));
        }
        seen.push(format!("{port} {}", firsts.join(" ")));
    }
    seen
}

#[test]
fn a_proxy_header_connection_serves_clients_of_that_header() {
    let recv = free_port();
    let (e, _) = ebb_with_admin("dyn-pp", |k, b| pp_cfg(k, b, recv));
    let ours = pp_run(e.addr());
    assert_eq!(
        ours,
        [
            "40000 200:1 200:0",
            "50000 200:1",
            "40000 200:0",
            "60000 200:1",
            "50000 200:0 200:0"
        ],
        "{ours:?}"
    );
    drop(e);
    let Some((_h, hap)) = haproxy_beside("dyn-pp", |k, b| pp_cfg(k, b, recv)) else {
        return;
    };
    assert_eq!(pp_run(hap), ours, "haproxy (left), ebb (right)");
}

fn trackers_cfg(sock: &Path, bind: &str, log: SocketAddr, o: &Origin) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    log {log} daemon\n    server srv {a} check inter 1h\n    server t {a} track srv\n",
        sock.display(),
        a = o.addr,
    )
}

/// The lines of a tracked server's maintenance and of its tracker's, in
/// HAProxy's order and words (the tracker's "via B/S" after the event).
fn trackers_run(sock: &Path, log: &Syslog) -> Vec<String> {
    cli_cmd(sock, "disable server be/srv");
    let mut seen = vec![
        log.next("Server be/srv is going"),
        log.next("Server be/t is going"),
    ];
    cli_cmd(sock, "enable server be/srv");
    seen.push(log.next("Server be/srv is UP"));
    seen.push(log.next("Server be/t is UP"));
    seen
}

#[test]
fn trackers_log_their_maintenance_as_haproxy() {
    let o = Origin::start("o", Mode::Ok);
    let log = Syslog::new();
    let (_e, sock) = ebb_with_admin("dyn-trk", |k, b| trackers_cfg(k, b, log.addr(), &o));
    let ours = trackers_run(&sock, &log);
    assert_eq!(
        ours,
        [
            "Server be/srv is going DOWN for maintenance. 1 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.",
            "Server be/t is going DOWN for maintenance via be/srv. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.",
            "Server be/srv is UP/READY (leaving forced maintenance).",
            "Server be/t is UP/READY (leaving maintenance).",
        ],
        "{ours:?}"
    );
    let hlog = Syslog::new();
    let Some((h, _)) = haproxy_beside("dyn-trk", |k, b| trackers_cfg(k, b, hlog.addr(), &o)) else {
        return;
    };
    assert_eq!(
        trackers_run(&h.sock, &hlog),
        ours,
        "haproxy (left), ebb (right)"
    );
}
