//! Server options through the real binary, side by side with HAProxy 2.6
//! when it is installed: `id N` (the numbering of the others, `srv_id`,
//! `show stat`'s `sid`, `show servers state`, `balance first`, duplicates
//! refused), the health check's own `port` and `addr`, the PROXY header
//! rule of `check-send-proxy`, and `check-ssl`.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::origin::{Mode, Origin};
use common::*;

fn ids_cfg(sock: &Path, bind: &str, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n    http-response set-header x-sid %[srv_id]\n\
         backend be\n    balance first\n\
         \x20   server a {o} id 9\n    server b {o}\n    server c {o} id 1\n    server d {o}\n",
        sock.display()
    )
}

/// `(srv_id, srv_name)` of each server in `show servers state be`.
fn state_ids(sock: &Path) -> Vec<(String, String)> {
    cli_cmd(sock, "show servers state be")
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (w.get(1) == Some(&"be")).then(|| (w[2].to_string(), w[3].to_string()))
        })
        .collect()
}

fn sids(sock: &Path) -> Vec<String> {
    ["a", "b", "c", "d"]
        .iter()
        .map(|s| stat_row(sock, "be", s)["sid"].clone())
        .collect()
}

/// Servers without `id` take the first free id at or after their
/// position's counter: a=9, b=2, c=1, d=4 (HAProxy's numbering); `balance
/// first` takes the lowest id, `srv_id` and the stats show them.
#[test]
fn server_ids_are_numbered_as_haproxy_numbers_them() {
    let origin = Origin::start("o", Mode::Ok);
    let (ebb, sock) = ebb_with_admin("ids", |k, b| ids_cfg(k, b, origin.addr));
    let want = vec!["9", "2", "1", "4"];
    assert_eq!(sids(&sock), want);
    let r = get(ebb.addr(), "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-sid"), Some("1"));
    let ours = state_ids(&sock);
    assert_eq!(
        ours,
        vec![
            ("9".to_string(), "a".to_string()),
            ("2".to_string(), "b".to_string()),
            ("1".to_string(), "c".to_string()),
            ("4".to_string(), "d".to_string()),
        ]
    );
    if let Some((h, fe)) = haproxy_beside("ids", |k, b| ids_cfg(k, b, origin.addr)) {
        assert_eq!(sids(&h.sock), want);
        assert_eq!(state_ids(&h.sock), ours);
        let r = get(fe, "/");
        assert_eq!(r.header("x-sid"), Some("1"));
    }
}

/// A duplicate id, an id of 0 and `id` on `default-server` are refused
/// with the line, as HAProxy refuses the first two; so are what ebb does
/// not do, with the reason: `tfo` on a server; a `url_param` modifier
/// other than `check_post`, with HAProxy's message.
#[test]
fn bad_server_ids_and_unsupported_options_are_refused() {
    let dir = scratch("ids-refused");
    let head = "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\nfrontend fe\n    bind 127.0.0.1:1\n    default_backend be\nbackend be\n";
    for (i, (lines, what)) in [
        (
            "    server a 127.0.0.1:1 id 7\n    server b 127.0.0.1:2 id 7\n",
            "f0.cfg:11: 'id' : custom id 7 already used at f0.cfg:10 ('server a')",
        ),
        ("    server a 127.0.0.1:1 id 0\n", "custom id has to be > 0"),
        (
            "    default-server id 3\n",
            "not accepted in default-server",
        ),
        (
            "    balance url_param id check 64\n    server a 127.0.0.1:1\n",
            "f3.cfg:10: 'balance url_param' only accepts 'check_post' modifier (got 'check').",
        ),
    ]
    .iter()
    .enumerate()
    {
        let text = format!("{head}{lines}");
        assert_refused(&dir, &format!("f{i}.cfg"), &text, what, i != 2);
    }
}

/// A health-check responder: keeps the first bytes of each check, answers
/// 200 and closes.
fn responder(ip: &str) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let l = TcpListener::bind((ip, 0)).unwrap();
    let a = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut got = Vec::new();
            let mut b = [0u8; 4096];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read_retry(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&b[..n]),
                }
            }
            s2.lock().unwrap().push(got);
            let _ = c.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    (a, seen)
}

fn check_cfg(sock: &Path, bind: &str, dead: u16, p1: u16, p2: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n    timeout check 2s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    option httpchk GET /chk\n\
         \x20   server s1 127.0.0.1:{dead} send-proxy check inter 200ms port {p1}\n\
         \x20   server s2 127.0.0.1:{dead} send-proxy-v2 check-send-proxy check inter 200ms port {} addr {}\n\
         \x20   server s3 127.0.0.1 check inter 200ms port {p1}\n",
        sock.display(),
        p2.port(),
        p2.ip()
    )
}

/// `port` and `addr` send the checks elsewhere than the traffic (nothing
/// listens on the servers' own port, yet they are UP; `port` lets a server
/// without a port be checked); with them, a
/// `send-proxy` server's checks carry no PROXY header unless
/// `check-send-proxy` asks for one (HAProxy's rule).
#[test]
fn checks_go_to_port_and_addr_with_the_proxy_header_rule() {
    let dead = free_port();
    let (a1, seen1) = responder("127.0.0.1");
    let (a2, seen2) = responder("127.0.0.2");
    let run = |sock: &Path, seen1: &Arc<Mutex<Vec<Vec<u8>>>>, seen2: &Arc<Mutex<Vec<Vec<u8>>>>| {
        // A server with `check` may show UP before its first check (both
        // ebb and HAProxy start it so): wait for a passed check on each.
        wait_until("every server checked and UP", || {
            ["s1", "s2", "s3"].iter().all(|s| {
                let r = stat_row(sock, "be", s);
                r["status"] == "UP" && r["check_status"] == "L7OK"
            })
        });
        let c1 = seen1.lock().unwrap().clone();
        let c2 = seen2.lock().unwrap().clone();
        assert!(!c1.is_empty() && !c2.is_empty());
        assert!(c1.iter().all(|c| c.starts_with(b"GET /chk ")), "{c1:?}");
        let v2 = b"\r\n\r\n\0\r\nQUIT\n";
        assert!(c2.iter().all(|c| c.starts_with(v2)), "{c2:?}");
        // (HAProxy marks a check under way with "* ": the next one may
        // have started since the wait.)
        assert_eq!(
            stat_row(sock, "be", "s2")["check_status"].trim_start_matches("* "),
            "L7OK"
        );
    };
    let (_ebb, sock) = ebb_with_admin("chkport", |k, b| check_cfg(k, b, dead, a1.port(), a2));
    run(&sock, &seen1, &seen2);
    let (b1, hseen1) = responder("127.0.0.1");
    let (b2, hseen2) = responder("127.0.0.2");
    if let Some((h, _)) = haproxy_beside("chkport", |k, b| check_cfg(k, b, dead, b1.port(), b2)) {
        run(&h.sock, &hseen1, &hseen2);
    }
}

/// `check-ssl`: a server without `ssl` is checked over TLS (here on a
/// TLS frontend of a second ebb, its check port).
#[test]
fn check_ssl_checks_over_tls() {
    let dir = scratch("checkssl");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let pem = dir.join("both.pem");
    std::fs::write(
        &pem,
        format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
    )
    .unwrap();
    let tls_port = free_port();
    let _tls = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend tls\n    bind 127.0.0.1:{tls_port} ssl crt {}\n    http-request return status 200 if {{ ssl_fc }}\n    http-request return status 503\n",
        pem.display()
    ));
    let dead = free_port();
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n    timeout check 2s\n\
             frontend fe\n    bind {bind}\n    default_backend be\n\
             backend be\n    option httpchk GET /\n\
             \x20   server s 127.0.0.1:{dead} check check-ssl verify none inter 200ms port {tls_port}\n",
            sock.display()
        )
    };
    let settled = |sock: &Path| {
        wait_until("the check to pass", || {
            stat_row(sock, "be", "s")["check_status"] == "L7OK"
        });
        stat_row(sock, "be", "s")["status"].clone()
    };
    let (_ebb, sock) = ebb_with_admin("checkssl", cfg);
    assert_eq!(settled(&sock), "UP");
    if let Some((h, _)) = haproxy_beside("checkssl", cfg) {
        assert_eq!(settled(&h.sock), "UP");
    }
}

fn redispatch_cfg(sock: &Path, bind: &str, dead: u16, o: SocketAddr) -> String {
    let mut c = format!(
        "global\n    stats socket {} level admin\n    log stdout format raw local0\n\
         defaults\n    mode http\n    log global\n    timeout connect 200ms\n    timeout client 10s\n    timeout server 10s\n    retries 3\n    balance first\n\
         frontend fe\n    bind {bind}\n    log-format \"%b %ST %rc\"\n",
        sock.display()
    );
    for b in ["b1", "bm2", "bd", "b0"] {
        c.push_str(&format!("    use_backend {b} if {{ path /{b} }}\n"));
    }
    for (b, opt) in [
        ("b1", "option redispatch 1"),
        ("bm2", "option redispatch -2"),
        ("bd", "option redispatch"),
        ("b0", "option redispatch 0"),
    ] {
        c.push_str(&format!(
            "backend {b}\n    {opt}\n    server dead 127.0.0.1:{dead}\n    server ok {o}\n"
        ));
    }
    c
}

/// `option redispatch N`: with `retries 3`, the request leaves the dead
/// server (the first one `balance first` takes) on retry 1 with `1`, 2
/// with `-2`, 3 with the default (the last retry), and never with `0`
/// (503 after the retries): the log's `%rc` (`+` when redispatched) and
/// `show stat`'s `wredis`. HAProxy 2.6.0's rule; not compared with
/// Debian's 2.6.12, which also redispatches on the first retry for any
/// algorithm but the hashes (its backport of 406efb96d).
#[test]
fn redispatch_interval() {
    let dead = free_port();
    let origin = Origin::start("o", Mode::Ok);
    let run = |fe: SocketAddr, sock: &Path| -> Vec<(u16, String)> {
        ["b1", "bm2", "bd", "b0"]
            .iter()
            .map(|b| {
                let r = get(fe, &format!("/{b}"));
                (r.status, stat_row(sock, b, "dead")["wredis"].clone())
            })
            .collect()
    };
    let (ebb, sock) = ebb_with_admin("redisp", |k, b| redispatch_cfg(k, b, dead, origin.addr));
    let want: Vec<(u16, String)> = [(200, "1"), (200, "1"), (200, "1"), (503, "0")]
        .iter()
        .map(|(s, e)| (*s, e.to_string()))
        .collect();
    assert_eq!(run(ebb.addr(), &sock), want);
    for line in ["b1 200 +1", "bm2 200 +2", "bd 200 +3", "b0 503 3"] {
        assert!(
            ebb.wait_stdout(line, std::time::Duration::from_secs(20))
                .is_some(),
            "{line}: {:?}",
            ebb.stdout.lock().unwrap()
        );
    }
}

fn url_param_cfg(sock: &Path, bind: &str, o: SocketAddr) -> String {
    let mut c = format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    use_backend cons if {{ path_beg /c }}\n    default_backend map\n    http-response set-header x-s %[srv_name]\n",
        sock.display()
    );
    for (b, extra) in [("map", ""), ("cons", "    hash-type consistent\n")] {
        c.push_str(&format!("backend {b}\n    balance url_param id\n{extra}"));
        for s in ["s1", "s2", "s3", "s4"] {
            c.push_str(&format!("    server {s} {o}\n"));
        }
    }
    c
}

/// `balance url_param id` (map-based and consistent): each value goes to
/// the server HAProxy sends it to, whatever comes around it in the query.
#[test]
fn balance_url_param_maps_as_haproxy() {
    let origin = Origin::start("o", Mode::Ok);
    let paths: Vec<String> = (0..24)
        .map(|i| match i % 3 {
            0 => format!("/m?id={i}"),
            1 => format!("/c?a=1&id=user{i}&b=2"),
            _ => format!("/m?xid=1&id=v{i}"),
        })
        .collect();
    let run = |fe: SocketAddr| -> Vec<String> {
        paths
            .iter()
            .map(|p| get(fe, p).header("x-s").unwrap_or("-").to_string())
            .collect()
    };
    let (ebb, _sock) = ebb_with_admin("urlp", |k, b| url_param_cfg(k, b, origin.addr));
    let ours = run(ebb.addr());
    // The same value, the same server.
    assert_eq!(ours, run(ebb.addr()));
    assert!(ours.iter().collect::<std::collections::BTreeSet<_>>().len() > 1);
    if let Some((_h, fe)) = haproxy_beside("urlp", |k, b| url_param_cfg(k, b, origin.addr)) {
        assert_eq!(run(fe), ours, "haproxy (left), ebb (right)");
    }
}

/// `tfo` on a server: the request goes in the SYN (TCP fast open), seen by
/// an origin that reads the kernel's TCPI_OPT_SYN_DATA of each connection
/// (`tests/tfod.py`); `no-tfo` after a `default-server tfo` sends it after
/// the handshake. Over HTTP/2 (`proto h2`, HAProxy as the origin) the
/// preface is the write that sends the held SYN. The whole run is in a
/// network namespace of its own (`unshare -rn`), whose
/// `net.ipv4.tcp_fastopen` allows fast open without cookies both ways
/// (0x207), so the host's setting is left alone; skipped where `unshare`
/// is not allowed. (HAProxy 2.6 does not send the request in the SYN:
/// its `tfo` tests the response buffer for data, fixed in 3.4 by
/// 933cb7646; this is what the fixed one does.)
#[test]
fn tfo_sends_the_request_in_the_syn() {
    use std::process::Command;
    if !have("unshare")
        || !have("ip")
        || !have("curl")
        || !Command::new("unshare")
            .args(["-rn", "true"])
            .status()
            .is_ok_and(|s| s.success())
    {
        eprintln!("SKIP: unshare -rn is not allowed here");
        return;
    }
    let h2 = have("haproxy");
    let dir = scratch("tfo");
    let cfg = dir.join("ebb.cfg");
    std::fs::write(
        &cfg,
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n    http-reuse never\n\
         frontend fe\n    bind 127.0.0.1:8080\n    use_backend h2 if { path /h2 }\n    use_backend off if { path /off }\n    default_backend on\n\
         backend on\n    server s 127.0.0.1:8081 tfo\n\
         backend off\n    default-server tfo\n    server s 127.0.0.1:8081 no-tfo\n\
         backend h2\n    retries 0\n    server s 127.0.0.1:8082 tfo proto h2\n",
    )
    .unwrap();
    let hcfg = dir.join("origin.cfg");
    std::fs::write(
        &hcfg,
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\
         frontend o\n    bind 127.0.0.1:8082 proto h2 tfo\n    http-request return status 200 content-type text/plain lf-string \"ver=%[req.ver]\"\n",
    )
    .unwrap();
    // Each process says when it is ready on a FIFO read to its end.
    let script = format!(
        "cd {dir} || exit 1\n\
         pids=\n\
         trap 'kill $pids 2>/dev/null' EXIT\n\
         ip link set lo up && echo 519 > /proc/sys/net/ipv4/tcp_fastopen || {{ echo SKIP; exit 0; }}\n\
         mkfifo o.fifo e.fifo h.fifo\n\
         python3 -u {tfod} 8081 > o.fifo 2>/dev/null & pids=\"$pids $!\"\n\
         read ready < o.fifo\n\
         {ebb} -f {cfg} > e.fifo 2>&1 & pids=\"$pids $!\"\n\
         grep -q -m1 ready e.fifo\n\
         cat e.fifo > /dev/null 2>&1 & pids=\"$pids $!\"\n\
         if [ {h2} = true ]; then\n\
           haproxy -db -f {hcfg} > h.fifo 2>&1 & pids=\"$pids $!\"\n\
           cat h.fifo > /dev/null 2>&1 & pids=\"$pids $!\"\n\
         fi\n\
         for p in on on on off off; do curl -sS --max-time 20 http://127.0.0.1:8080/$p; echo; done\n\
         if [ {h2} = true ]; then\n\
           curl -s --retry-connrefused --retry 100 --retry-delay 0 --max-time 20 -o /dev/null http://127.0.0.1:8082/\n\
           for i in 1 2; do curl -sS --max-time 20 http://127.0.0.1:8080/h2; echo; done\n\
         fi\n",
        dir = dir.display(),
        tfod = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tfod.py"),
        ebb = env!("CARGO_BIN_EXE_ebb"),
        cfg = cfg.display(),
        hcfg = hcfg.display(),
    );
    let out = Command::new("unshare")
        .args(["-rn", "sh", "-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    if lines.first() == Some(&"SKIP") {
        eprintln!("SKIP: the namespace's tcp_fastopen cannot be set here");
        return;
    }
    let want_h1 = [
        "syn_data=1",
        "syn_data=1",
        "syn_data=1",
        "syn_data=0",
        "syn_data=0",
    ];
    assert_eq!(
        &lines[..lines.len().min(5)],
        &want_h1,
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if h2 {
        assert_eq!(&lines[5..], &["ver=2.0", "ver=2.0"], "{text}");
    }
}
