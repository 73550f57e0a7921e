//! HTTP health checks through the real binary: `http-check expect hdr|fhdr`
//! with their matching methods, several `http-check connect|send|expect`
//! steps in one check, `http-check comment`; each backend's `show stat`
//! check fields compared with HAProxy 2.6's (Debian's haproxy, run beside
//! ebb against the same servers) when it is installed.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::*;

/// A server answering every request with `answer`; what `keep` takes
/// of each request's head (given the server's address) is kept.
fn server_keeping(
    answer: String,
    keep: impl Fn(&str, SocketAddr) -> Option<String> + Send + Sync + 'static,
) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    let keep = Arc::new(keep);
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let (seen, keep, answer) = (Arc::clone(&s2), Arc::clone(&keep), Arc::clone(&answer));
            std::thread::spawn(move || {
                let mut c = c;
                let mut buf = Vec::new();
                let mut tmp = [0u8; 2048];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read_retry(&mut tmp) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                    }
                }
                if let Some(v) = keep(&String::from_utf8_lossy(&buf), addr) {
                    seen.lock().unwrap().push(v);
                }
                let _ = c.write_all(answer.as_bytes());
            });
        }
    });
    (addr, seen)
}

/// A server answering every request with `answer`; the request lines it
/// got are kept.
fn server(answer: &'static str) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    server_keeping(answer.to_string(), |head, _| {
        Some(head.lines().next().unwrap_or("").to_string())
    })
}

/// The answer of HAProxy's `checks/http-check-expect` reg-test server.
const ANSWER: &str = "HTTP/1.1 202 Accepted\r\nx-test1: true, next value\r\nx-test2: true, begin-value, value-end, value-sub-string, value-reg-123ABC\r\nx-begin-test: 1\r\nx-test-end: 1\r\nx-sub-test: 1\r\nx-reg-test1: 1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
const SECOND: &str =
    "HTTP/1.1 200 OK\r\nx-second: yes\r\nContent-Length: 6\r\nConnection: close\r\n\r\nsecond";

fn haproxy(backends: &str) -> Option<Hap> {
    haproxy_with("httpcheck-hap", &common_cfg(backends, free_port()))
}

fn common_cfg(backends: &str, port: u16) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 2s\n    timeout check 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend ok\n{backends}"
    )
}

/// Each backend's server row: (check_status, check_code, last_chk).
fn checks(sock: &Path) -> HashMap<String, (String, String, String)> {
    let csv = cli_cmd(sock, "show stat");
    let mut lines = csv.lines();
    let head: Vec<&str> = lines
        .next()
        .unwrap_or("")
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (st, code, last) = (col("check_status"), col("check_code"), col("last_chk"));
    lines
        .filter(|l| l.contains(",srv,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let g = |i: usize| f.get(i).unwrap_or(&"").trim_start_matches("* ").to_string();
            (f[0].to_string(), (g(st), g(code), g(last)))
        })
        .collect()
}

/// Waits until each backend of `want` (name, (check_status, check_code,
/// last_chk)) shows all three, and returns them; after 30 s, fails on the
/// first that differs. A row that shows the status only is not enough:
/// while the next check runs, the status stays and `last_chk` is empty
/// (HAProxy's too), and a row read then differed.
fn settled_checks(
    sock: &Path,
    want: &[(&str, (&str, &str, &str))],
) -> HashMap<String, (String, String, String)> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let all = loop {
        let c = checks(sock);
        let done = want.iter().all(|(be, (st, code, last))| {
            c.get(*be)
                .is_some_and(|x| (x.0.as_str(), x.1.as_str(), x.2.as_str()) == (*st, *code, *last))
        });
        if done || std::time::Instant::now() > until {
            break c;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut out = HashMap::new();
    for (be, (st, code, last)) in want {
        let got = &all[*be];
        assert_eq!(
            (got.0.as_str(), got.1.as_str(), got.2.as_str()),
            (*st, *code, *last),
            "backend {be}"
        );
        out.insert(be.to_string(), got.clone());
    }
    out
}

/// When haproxy is installed: its checks on `backends` settle as `want`
/// says, with the fields ebb reported (`ours`).
fn same_as_haproxy(
    backends: &str,
    want: &[(&str, (&str, &str, &str))],
    ours: &HashMap<String, (String, String, String)>,
) {
    if let Some(h) = haproxy(backends) {
        assert_eq!(
            &settled_checks(&h.sock, want),
            ours,
            "ebb (right), haproxy (left)"
        );
    }
}

/// ebb on `backends` with an admin socket: its scratch directory, the
/// socket, the process.
fn ebb_with_socket(name: &str, backends: &str) -> (std::path::PathBuf, std::path::PathBuf, Ebb) {
    let d = scratch(name);
    let sock = d.join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{}",
        sock.display(),
        common_cfg(backends, free_port())
    ));
    (d, sock, e)
}

/// `ebb -c` on `backends`: refused, its error output.
fn refused(d: &Path, backends: &str) -> String {
    let bad = d.join("bad.cfg");
    std::fs::write(&bad, common_cfg(backends, free_port())).unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", bad.to_str().unwrap()], d);
    assert!(code != 0, "accepted: {backends}");
    err
}

#[test]
fn header_rules_and_sequences_report_as_haproxy() {
    let (a, _) = server(ANSWER);
    let (b, seen_b) = server(SECOND);
    let srv = |extra: &str| format!("    server srv {a} check inter 100ms rise 1 fall 1{extra}\n");
    let backends = format!(
        "backend ok\n    option httpchk\n    http-check expect status 200-399\n\
         \x20   http-check expect hdr name \"x-test1\"\n\
         \x20   http-check expect hdr name -m str \"X-Test2\"\n\
         \x20   http-check expect hdr name -m beg \"X-Begin-\"\n\
         \x20   http-check expect hdr name -m end \"-End\"\n\
         \x20   http-check expect hdr name -m sub \"-Sub-\"\n\
         \x20   http-check expect hdr name -m reg \"^[a-z]+-Reg-[a-z]+[0-9]\\$\"\n\
         \x20   http-check expect fhdr name \"x-test1\" value \"true, next value\"\n\
         \x20   http-check expect hdr name \"x-test2\" value -m str \"true\"\n\
         \x20   http-check expect hdr name -m beg \"x-test\" value -m beg \"begin-\"\n\
         \x20   http-check expect hdr name -m beg \"x-test\" value -m end \"-end\"\n\
         \x20   http-check expect hdr name -m beg \"x-test\" value -m sub \"-sub-\"\n\
         \x20   http-check expect hdr name -m beg \"x-test\" value -m reg \"^value-reg-[A-Z0-9]+\\$\"\n\
         \x20   http-check expect fhdr name -m beg \"x-test\" value -m reg \"value-reg-[A-Z0-9]+\"\n{}\
         backend fhdr\n    option httpchk\n    http-check expect fhdr name x-test1 value true\n{}\
         backend neg\n    option httpchk\n    http-check expect ! hdr name -m sub test\n{}\
         backend second\n    option httpchk\n    http-check expect status 202\n    http-check expect comment \"no such header\" hdr name x-none\n{}\
         backend seq\n    option httpchk\n    http-check connect\n    http-check send meth GET uri /first\n    http-check expect status 202\n\
         \x20   http-check connect port {} linger\n    http-check send meth GET uri /second ver HTTP/1.1 hdr host example.org\n    http-check expect hdr name x-second value yes\n    http-check expect string second\n{}\
         backend addrport\n    option httpchk\n    http-check connect addr 127.0.0.1:{}\n    http-check send uri /ap\n    http-check expect status 200\n{}\
         backend seqfail\n    option httpchk\n    http-check connect\n    http-check send uri /a\n    http-check expect status 202\n    http-check connect port {}\n    http-check send uri /b\n    http-check comment \"the body\"\n    http-check expect string nope\n{}",
        srv(""),
        srv(""),
        srv(""),
        srv(""),
        b.port(),
        srv(""),
        b.port(),
        srv(""),
        b.port(),
        srv(""),
    );
    let (d, sock, _e) = ebb_with_socket("httpcheck-ebb", &backends);
    let hap = haproxy(&backends);
    let want: &[(&str, (&str, &str, &str))] = &[
        ("ok", ("L7OK", "202", "")),
        ("fhdr", ("L7STS", "202", "Accepted")),
        ("neg", ("L7STS", "202", "Accepted")),
        (
            "second",
            ("L7STS", "202", "Accepted comment: no such header"),
        ),
        ("seq", ("L7OK", "200", "")),
        // `addr IP:PORT` sends the check to the second server's port.
        ("addrport", ("L7OK", "200", "")),
        (
            "seqfail",
            (
                "L7RSP",
                "",
                "HTTP content check did not match comment: the body",
            ),
        ),
    ];
    let ours = settled_checks(&sock, want);
    // A connect right after a send is refused, as HAProxy does.
    let err = refused(
        &d,
        "backend ok\n    option httpchk\n    http-check connect\n    http-check send uri /a\n    http-check connect port 81\n",
    );
    assert!(err.contains("missing expect rule"), "{err}");
    // The sequence went to the second port with its own request.
    assert!(seen_b
        .lock()
        .unwrap()
        .iter()
        .any(|l| l == "GET /second HTTP/1.1"));
    if let Some(h) = &hap {
        assert_eq!(
            settled_checks(&h.sock, want),
            ours,
            "ebb (right), haproxy (left)"
        );
    }
}

/// A listener that keeps the first bytes of each connection and answers
/// `answer` once 5 bytes arrived.
fn raw_server(answer: &'static [u8]) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g2 = Arc::clone(&got);
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let got = Arc::clone(&g2);
            std::thread::spawn(move || {
                let mut c = c;
                let mut buf = Vec::new();
                let mut tmp = [0u8; 512];
                // The whole hello (5-byte header + its length).
                while buf.len() < 5
                    || buf.len() < 5 + usize::from(u16::from_be_bytes([buf[3], buf[4]]))
                {
                    match c.read_retry(&mut tmp) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                    }
                }
                got.lock().unwrap().push(buf);
                let _ = c.write_all(answer);
            });
        }
    });
    (addr, got)
}

#[test]
fn ssl_hello_chk_sends_haproxys_hello() {
    // A TLS server refusing SSLv3 answers an alert record (0x15): the
    // server speaks SSL, L6OK. An HTTP server's answer is not: L6RSP.
    let (tls, hellos) = raw_server(b"\x15\x03\x00\x00\x02\x02\x46");
    let (plain, _) = raw_server(b"HTTP/1.1 400 Bad Request\r\n\r\n");
    let backends = format!(
        "backend ok\n    option ssl-hello-chk\n    server srv {tls} check inter 100ms rise 1 fall 1\n\
         backend plain\n    option ssl-hello-chk\n    server srv {plain} check inter 100ms rise 1 fall 1\n"
    );
    let d = scratch("sslhello-ebb");
    let sock = d.join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{}",
        sock.display(),
        common_cfg(&backends, free_port())
    ));
    let settled = |s: &Path| {
        let c = checks(s);
        c.get("ok").is_some_and(|x| x.0 == "L6OK") && c.get("plain").is_some_and(|x| x.0 == "L6RSP")
    };
    wait_until("ebb's checks", || settled(&sock));
    let ours = checks(&sock);
    let hello = hellos.lock().unwrap()[0].clone();
    drop(e);
    assert_eq!(hello.len(), 126);
    assert_eq!(hello[..11], [0x16, 3, 0, 0, 0x79, 1, 0, 0, 0x75, 3, 0]);
    assert_eq!(&hello[15..43], b"HAPROXYSSLCHK\nHAPROXYSSLCHK\n");
    // The time, within a day of now.
    let t = u32::from_be_bytes([hello[11], hello[12], hello[13], hello[14]]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    assert!(now.abs_diff(t) < 86_400, "{t} vs {now}");
    if let Some(h) = haproxy(&backends) {
        hellos.lock().unwrap().clear();
        wait_until("haproxy's checks", || settled(&h.sock));
        let theirs = checks(&h.sock);
        assert_eq!(ours["ok"], theirs["ok"]);
        assert_eq!(ours["plain"], theirs["plain"]);
        // A hello of haproxy's (its checks run every 100 ms).
        wait_until("haproxy's hello", || !hellos.lock().unwrap().is_empty());
        let hs = hellos.lock().unwrap()[0].clone();
        // The same bytes but the time.
        assert_eq!((&hs[..11], &hs[15..]), (&hello[..11], &hello[15..]));
    }
}

/// A plain `check` (layer 4) connects and resets before the handshake's
/// last ACK, as HAProxy's smart-connect checks do: the server's
/// application is never handed an empty connection per check (an HTTP
/// server would log an error for each). HAProxy behaves the same.
#[test]
fn layer4_check_hands_the_server_no_connection() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    let d = scratch("l4check");
    let sock = d.join("admin.sock");
    let rest = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
             frontend fe\n    bind {bind}\n    default_backend be\n\
             backend be\n    server s1 {addr} check inter 100ms\n"
        )
    };
    let _e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{}",
        sock.display(),
        rest("BIND")
    ));
    let checked = |sock: &Path| stat_row(sock, "be", "s1").get("check_status").cloned();
    wait_until("ebb's check", || checked(&sock).as_deref() == Some("L4OK"));
    assert!(
        l.accept().is_err(),
        "ebb's check gave the server a connection"
    );
    drop(_e);
    let Some(h) = haproxy_with("l4check", &rest(&format!("127.0.0.1:{}", free_port()))) else {
        return;
    };
    wait_until("haproxy's check", || {
        checked(&h.sock).as_deref() == Some("L4OK")
    });
    assert!(
        l.accept().is_err(),
        "haproxy's check gave the server a connection"
    );
}

/// An answer carrying the name of another of its headers, and who it is
/// for (HAProxy's `checks/http-check-expect` reg-test uses the first).
const NAMED: &str = "HTTP/1.1 200 OK\r\nx-hdr-name: x-test1\r\nx-test1: true, next value\r\nx-who: vars/srv\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

#[test]
fn check_variables_and_log_format_patterns_as_haproxy() {
    let (a, _) = server(NAMED);
    let srv = format!("    server srv {a} check inter 100ms rise 1 fall 1\n");
    let backends = format!(
        "backend ok\n    server srv {a}\n\
         backend vars\n    option httpchk\n    http-check expect status 200\n\
         \x20   http-check set-var(check.hdr_name) res.fhdr(x-hdr-name)\n\
         \x20   http-check expect hdr name-lf -m str \"%[var(check.hdr_name)]\"\n\
         \x20   http-check expect hdr name-lf -m beg \"%[res.fhdr(x-hdr-name)]\" value-lf -m sub \"%[str(next)]\"\n\
         \x20   http-check set-var-fmt(check.who) \"%[be_name]/%[srv_name]\"\n\
         \x20   http-check expect fhdr name x-who value-lf \"%[var(check.who)]\"\n{srv}\
         backend unset\n    option httpchk\n    http-check set-var(check.n) str(x-test1)\n    http-check unset-var(check.n)\n\
         \x20   http-check expect hdr name-lf \"%[var(check.n)]\"\n{srv}\
         backend other\n    option httpchk\n    http-check set-var(check.n) str(x-none)\n\
         \x20   http-check expect hdr name-lf \"%[var(check.n)]\"\n{srv}\
         backend vars_first\n    option httpchk\n    http-check set-var(sess.p) str(/probe)\n    http-check connect\n\
         \x20   http-check send uri /p\n    http-check expect hdr name x-who value-lf -m beg \"%[be_name]\"\n{srv}"
    );
    // The names are the backends' own: `vars_first` is not `vars/srv`.
    let want: &[(&str, (&str, &str, &str))] = &[
        ("vars", ("L7OK", "200", "")),
        (
            "unset",
            (
                "L7RSP",
                "",
                "log-format string evaluated to an empty string",
            ),
        ),
        ("other", ("L7STS", "200", "OK")),
        ("vars_first", ("L7STS", "200", "OK")),
    ];
    let (d, sock, _e) = ebb_with_socket("httpcheck-vars", &backends);
    let ours = settled_checks(&sock, want);
    // Scopes a check has no use for are refused.
    let err = refused(
        &d,
        "backend ok\n    option httpchk\n    http-check set-var(txn.x) str(a)\n",
    );
    assert!(
        err.contains("bad.cfg:12: ") && err.contains("proc, sess and check"),
        "{err}"
    );
    same_as_haproxy(&backends, want, &ours);
}

/// A server answering `status` to every request; the values of its
/// requests' `X-Haproxy-Server-State` fields are kept (its port as `P`:
/// ebb's and haproxy's servers differ by it).
fn state_server(status: u16) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let answer = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    server_keeping(answer, |head, addr| {
        head.lines()
            .find_map(|l| {
                let (n, v) = l.split_once(": ")?;
                n.eq_ignore_ascii_case("x-haproxy-server-state")
                    .then_some(v)
            })
            .map(|v| v.replace(&format!("port={}", addr.port()), "port=P"))
    })
}

/// What two servers (one answering 200, one 500) are told of their state
/// by the checks of `http-check send-state`: the states each was told in
/// turn (a repeated one once), until `ok` was told of `ko`'s fall and
/// `ko` got three checks. How many checks of `ok` come before `ko`'s
/// first check took it DOWN is a matter of timing (each runs every
/// 100 ms on its own: a loaded machine once gave ebb's `ok` two checks
/// before it, haproxy's one).
fn send_state_run(start: impl FnOnce(&str) -> Box<dyn std::any::Any>) -> Vec<Vec<String>> {
    let (a, seen_a) = state_server(200);
    let (b, seen_b) = state_server(500);
    let backends = format!(
        "backend ok\n\
         backend st\n    option httpchk\n    http-check send-state\n    http-check send meth GET uri /state hdr x-a b\n\
         \x20   server ok {a} check inter 100ms rise 1 fall 1 weight 3\n    server ko {b} check inter 100ms rise 1 fall 1\n"
    );
    let _keep = start(&backends);
    wait_until("ok told of ko's fall, three checks of ko", || {
        seen_a
            .lock()
            .unwrap()
            .iter()
            .any(|v| v.contains("weight=3/3"))
            && seen_b.lock().unwrap().len() >= 3
    });
    let told = |s: &Arc<Mutex<Vec<String>>>, upto: &dyn Fn(&str) -> bool| {
        let mut v: Vec<String> = Vec::new();
        for x in s.lock().unwrap().iter() {
            if v.last() != Some(x) {
                v.push(x.clone());
            }
            if upto(x) {
                break;
            }
        }
        v
    };
    vec![
        told(&seen_a, &|x| x.contains("weight=3/3")),
        told(&seen_b, &|x| x.starts_with("DOWN")),
    ]
}

#[test]
fn send_state_tells_the_server_what_haproxy_tells_it() {
    let ours = send_state_run(|b| Box::new(ebb_with_socket("sendstate", b)));
    let node = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let node = node.trim();
    assert_eq!(
        ours[0].last().map(String::as_str),
        Some(
            format!(
                "UP; address=127.0.0.1; port=P; name=st/ok; node={node}; weight=3/3; scur=0/0; qcur=0"
            )
            .as_str()
        )
    );
    assert_eq!(ours[1].len(), 2, "{ours:?}");
    assert!(
        ours[1][1].starts_with("DOWN; address=127.0.0.1; port=P; name=st/ko;"),
        "{ours:?}"
    );
    // A configuration refuses an argument.
    let d = scratch("sendstate-bad");
    let err = refused(
        &d,
        "backend ok\n    option httpchk\n    http-check send-state now\n",
    );
    assert!(err.contains("takes no argument"), "{err}");
    if have("haproxy") {
        let theirs = send_state_run(|b| Box::new(haproxy(b)));
        assert_eq!(theirs, ours, "haproxy (left), ebb (right)");
    }
}

/// What a check request carried: its line, `x-test`, whether `x-empty`
/// came, and the body that arrived with the head.
fn lf_request(head: &str, _: SocketAddr) -> Option<String> {
    let (h, body) = head.split_once("\r\n\r\n").unwrap_or((head, ""));
    let field = |name: &str| {
        h.lines().find_map(|l| {
            let (n, v) = l.split_once(": ")?;
            n.eq_ignore_ascii_case(name).then(|| v.to_string())
        })
    };
    Some(format!(
        "{} | x-test={:?} | x-empty={:?} | body={body}",
        h.lines().next().unwrap_or(""),
        field("x-test"),
        field("x-empty"),
    ))
}

#[test]
fn send_log_format_parts_as_haproxy() {
    let run = |start: &dyn Fn(&str) -> Box<dyn std::any::Any>| {
        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let (a, seen) = server_keeping(answer.to_string(), lf_request);
        let backends = format!(
            "backend ok\n\
             backend lf\n    option httpchk\n    http-check set-var(check.path) str(/lf)\n\
             \x20   http-check send meth POST uri-lf \"%[var(check.path)]-%[srv_name]\" ver HTTP/1.1 hdr x-test \"be=%[be_name]\" hdr x-empty \"%[var(check.none)]\" body-lf \"on %[be_name]/%[srv_name]\"\n\
             \x20   http-check expect status 200\n\
             \x20   server srv {a} check inter 100ms rise 1 fall 1\n"
        );
        let _keep = start(&backends);
        wait_until("a check", || !seen.lock().unwrap().is_empty());
        let first = seen.lock().unwrap()[0].clone();
        first
    };
    let ours = run(&|b| Box::new(ebb_with_socket("sendlf", b)));
    assert_eq!(
        ours,
        "POST /lf-srv HTTP/1.1 | x-test=Some(\"be=lf\") | x-empty=None | body=on lf/srv"
    );
    if have("haproxy") {
        let theirs = run(&|b| Box::new(haproxy(b)));
        assert_eq!(theirs, ours, "haproxy (left), ebb (right)");
    }
}

/// An HTTP/2-only origin (ebb with `bind ... proto h2`): 503 on
/// `/bad`, else 200 with `h2-ok` as its body; the request lines it got
/// are logged.
fn h2_origin() -> Ebb {
    Ebb::start(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 2s\n\
         frontend li1\n    bind BIND proto h2\n\
         \x20   http-request return status 503 if { path /bad }\n\
         \x20   http-request return status 200 content-type text/plain string h2-ok\n",
    )
}

#[test]
fn http2_checks_speak_http2_to_h2_servers_as_haproxy() {
    let origin = h2_origin();
    let o = origin.addrs[0];
    let srv = |extra: &str| format!("    server srv {o} check inter 100ms rise 1 fall 1 {extra}\n");
    let backends = format!(
        "backend ok\n    option httpchk\n{}\
         backend sts\n    option httpchk GET /bad\n{}\
         backend checkproto\n    option httpchk GET /status HTTP/1.1\n{}\
         backend body\n    option httpchk\n    http-check send meth GET uri /b hdr x-a b body hello\n    http-check expect string h2-ok\n{}\
         backend nobody\n    option httpchk\n    http-check expect string other\n{}",
        srv("proto h2"),
        srv("proto h2"),
        srv("check-proto h2"),
        srv("proto h2"),
        srv("check-proto h2"),
    );
    let (d, sock, _e) = ebb_with_socket("h2check-ebb", &backends);
    let want: &[(&str, (&str, &str, &str))] = &[
        ("ok", ("L7OK", "200", "")),
        ("sts", ("L7STS", "503", "")),
        ("checkproto", ("L7OK", "200", "")),
        ("body", ("L7OK", "200", "")),
        ("nobody", ("L7RSP", "", "HTTP content check did not match")),
    ];
    let ours = settled_checks(&sock, want);
    // HAProxy's alert: an HTTP multiplexer for a TCP check, and back.
    for (opts, check) in [
        ("check-proto h2", ""),
        ("check-proto none", "option httpchk\n"),
    ] {
        let err = refused(
            &d,
            &format!("backend ok\n    {check}    server srv {o} check {opts}\n"),
        );
        assert!(err.contains("incompatible MUX protocol"), "{err}");
    }
    same_as_haproxy(&backends, want, &ours);
}

#[test]
fn alpn_h2_checks_speak_http2_over_tls_as_haproxy() {
    let d = scratch("h2check-alpn");
    let pem = d.join("localhost.pem");
    self_signed_pem(&pem, "localhost");
    // An origin offering h2 and http/1.1 over TLS: 503 on /bad.
    let origin = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout client 10s\n\
         frontend o\n    bind BIND ssl crt {} alpn h2,http/1.1\n\
         \x20   http-request return status 503 if {{ path /bad }}\n\
         \x20   http-request return status 200\n",
        pem.display()
    ));
    let o = origin.addrs[0];
    let srv = |extra: &str| {
        format!("    server srv {o} ssl verify none check inter 100ms rise 1 fall 1 {extra}\n")
    };
    // An HTTP/2 answer has no reason phrase: L7STS reports none.
    let backends = format!(
        "backend ok\n    option httpchk GET /bad\n{}\
         backend checkalpn\n    option httpchk GET /bad\n{}\
         backend alpnh1\n    option httpchk GET /bad\n{}",
        srv("alpn http/1.1 check-alpn h2,http/1.1"),
        srv("alpn h2,http/1.1 check-alpn h2"),
        srv("alpn http/1.1"),
    );
    let (_d, sock, _e) = ebb_with_socket("h2check-alpn-ebb", &backends);
    let want: &[(&str, (&str, &str, &str))] = &[
        ("ok", ("L7STS", "503", "")),
        ("checkalpn", ("L7STS", "503", "")),
        ("alpnh1", ("L7STS", "503", "Service Unavailable")),
    ];
    let ours = settled_checks(&sock, want);
    same_as_haproxy(&backends, want, &ours);
    // Without `check-alpn`, HAProxy 2.6 checks over HTTP/1 even when the
    // server's `alpn` makes the handshake choose h2: the answer is not
    // HTTP/1 (L7RSP; HAProxy's report has no text, ebb's says why).
    let only = format!(
        "backend ok\n    option httpchk GET /bad\n{}",
        srv("alpn h2")
    );
    let (_d, sock, _e) = ebb_with_socket("h2check-alpn-ebb2", &only);
    // The first status that is not a timeout: on a loaded machine a
    // check can overrun its 100 ms connect bound (haproxy reported
    // L7TOUT once); one that only ever times out still fails the wait.
    let status = |sock: &Path| {
        let mut st = String::new();
        wait_until("the check", || {
            st = checks(sock)
                .get("ok")
                .map(|c| c.0.clone())
                .unwrap_or_default();
            !st.is_empty() && !st.starts_with("INI") && !st.ends_with("TOUT")
        });
        st
    };
    assert_eq!(status(&sock), "L7RSP");
    if let Some(h) = haproxy(&only) {
        assert_eq!(status(&h.sock), "L7RSP", "haproxy");
    }
}

/// A body rule on an answer without a body fails, negated or not: HAProxy
/// 2.6's `tcpcheck_eval_expect_http` reports "could not find a response
/// body" (L7RSP) before it looks for the pattern, so `! string X` and
/// `! rstring X` fail too (ebb passed them). Beside haproxy.
#[test]
fn a_body_rule_on_an_empty_body_fails_even_negated() {
    let (a, _) = server("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let (full, _) = server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    let srv = |t: SocketAddr| format!("    server srv {t} check inter 100ms\n");
    let backends = format!(
        "backend ok\n    option httpchk\n    http-check expect status 200\n{}\
         backend negstr\n    option httpchk\n    http-check expect ! string X\n{}\
         backend negre\n    option httpchk\n    http-check expect ! rstring X\n{}\
         backend str\n    option httpchk\n    http-check expect string X\n{}\
         backend negfull\n    option httpchk\n    http-check expect ! string X\n{}",
        srv(a),
        srv(a),
        srv(a),
        srv(a),
        srv(full),
    );
    let (_d, sock, _e) = ebb_with_socket("httpcheck-emptybody", &backends);
    let none = (
        "L7RSP",
        "",
        "HTTP content check could not find a response body",
    );
    let want: &[(&str, (&str, &str, &str))] = &[
        ("ok", ("L7OK", "200", "")),
        ("negstr", none),
        ("negre", none),
        ("str", none),
        ("negfull", ("L7OK", "200", "")),
    ];
    let ours = settled_checks(&sock, want);
    same_as_haproxy(&backends, want, &ours);
}
