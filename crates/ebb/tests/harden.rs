//! Hardening (issue 17): bodies nobody reads are drained only up to
//! `tune.http.drain-max`; chunked bodies reach servers with canonical chunk
//! sizes; CONNECT to the file server is answered 405; h2c upgrades are
//! not forwarded.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::origin::{Mode, Origin};
use common::*;

const RETURN_CFG: &str = "defaults\n    mode http\n    timeout client 10s\n\
     frontend fe\n    bind BIND\n\
     http-request return status 200 content-type text/plain string ok\n";

/// Sends `head` then `fill` over and over until the server stops taking
/// bytes or `cap` bytes were sent, while another thread reads the answer.
/// Returns (body bytes the server took, everything read back).
fn push_body(a: SocketAddr, head: &[u8], fill: &[u8], cap: usize) -> (usize, Vec<u8>) {
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(head).unwrap();
    let mut r = s.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut tmp = [0u8; 4096];
        while let Ok(n) = r.read_retry(&mut tmp) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&tmp[..n]);
        }
        got
    });
    let mut sent = 0;
    while sent < cap {
        match s.write(fill) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    if sent >= cap {
        // Still taking bytes: let the reader end.
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    (sent, reader.join().unwrap())
}

const CAP: usize = 1 << 30;
/// What the kernel's socket buffers may take on both sides of loopback
/// besides what ebb reads (Linux autotunes them to a few MiB).
const KERNEL_SLACK: usize = 64 << 20;

#[test]
fn a_huge_declared_body_is_not_read_after_an_early_answer() {
    let e = Ebb::start(RETURN_CFG);
    let head = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000000\r\n\r\n";
    let (sent, got) = push_body(e.addr(), head, &[b'a'; 65536], CAP);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\r\n\r\nok"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    assert!(
        sent < KERNEL_SLACK,
        "ebb took {sent} bytes of an unread body"
    );
}

#[test]
fn an_endless_chunked_body_is_drained_up_to_the_bound_then_closed() {
    let e = Ebb::start(RETURN_CFG);
    let head = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut chunk = b"8000\r\n".to_vec();
    chunk.extend_from_slice(&[b'b'; 0x8000]);
    chunk.extend_from_slice(b"\r\n");
    let (sent, got) = push_body(e.addr(), head, &chunk, CAP);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        sent < KERNEL_SLACK,
        "ebb took {sent} bytes of an unread body"
    );
}

#[test]
fn a_small_body_is_drained_and_the_connection_kept() {
    // Within `tune.http.drain-max` (here 64k) the body is read to its end
    // and the next request on the connection is answered; past it (a
    // 100k body), the answer closes.
    let cfg = format!("global\n    tune.http.drain-max 64k\n{RETURN_CFG}");
    let e = Ebb::start(&cfg);
    let mut c = Client::connect(e.addr());
    let body = vec![b'x'; 60_000];
    c.send(b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 60000\r\n\r\n");
    c.send(&body);
    let r = c.read_resp();
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    assert_ne!(r.header("connection"), Some("close"));
    c.send(
        b"POST /b HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
    assert_eq!(c.read_resp().status, 200);
    c.send(b"GET /c HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
    let r = c.read_resp();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed());
}

#[test]
fn a_file_answer_does_not_read_a_huge_body_either() {
    let d = scratch("harden-files");
    std::fs::write(d.join("f.txt"), "file\n").unwrap();
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 10s\n\
         frontend fe\n    bind BIND\n    default_backend files\n\
         backend files\n    serve-files {}\n",
        d.display()
    );
    let e = Ebb::start(&cfg);
    let head = b"GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000000\r\n\r\n";
    let (sent, got) = push_body(e.addr(), head, &[b'a'; 65536], CAP);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("file\n"), "{text}");
    assert!(
        sent < KERNEL_SLACK,
        "ebb took {sent} bytes of an unread body"
    );
}

#[test]
fn drain_max_is_checked_at_start() {
    let d = scratch("harden-cfg");
    let p = d.join("bad.cfg");
    std::fs::write(&p, "global\n    tune.http.drain-max lots\n").unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", p.to_str().unwrap()], &d);
    assert_ne!(code, 0);
    assert!(err.contains("bad.cfg:2"), "{err}");
}

/// An origin that records every byte it receives and answers each
/// connection's first request head with a 200 once it has seen `until`.
struct Recorder {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<u8>>>,
}

impl Recorder {
    fn start(until: &'static [u8]) -> Recorder {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let got: Arc<Mutex<Vec<u8>>> = Arc::default();
        let g = Arc::clone(&got);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let g = Arc::clone(&g);
                std::thread::spawn(move || {
                    let mut tmp = [0u8; 65536];
                    let mut mine = Vec::new();
                    while let Ok(n) = s.read_retry(&mut tmp) {
                        if n == 0 {
                            return;
                        }
                        mine.extend_from_slice(&tmp[..n]);
                        g.lock().unwrap().extend_from_slice(&tmp[..n]);
                        if mine.windows(until.len()).any(|w| w == until) {
                            let _ = s.write_all(
                                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                            );
                            return;
                        }
                    }
                });
            }
        });
        Recorder { addr, got }
    }

    fn got(&self) -> Vec<u8> {
        self.got.lock().unwrap().clone()
    }
}

fn proxy_cfg(origin: SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend fe\n    bind BIND\n    default_backend be\n\
         backend be\n    server s1 {origin}\n"
    )
}

/// The body part (after the head) of what the origin received.
fn body_of(got: &[u8]) -> Vec<u8> {
    let at = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    got[at + 4..].to_vec()
}

#[test]
fn chunk_sizes_reach_the_server_canonical() {
    let o = Recorder::start(b"X-Trailer: t\r\n\r\n");
    let e = Ebb::start(&proxy_cfg(o.addr));
    let mut c = Client::connect(e.addr());
    c.send(
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          000000000000000A\r\n0123456789\r\n\
          5;name=value;other=\"x y\"\r\nhello\r\n\
          00000\r\nX-Trailer: t\r\n\r\n",
    );
    let r = c.read_resp();
    assert_eq!(r.status, 200);
    let body = body_of(&o.got());
    // Each chunk's size is re-written (lowercase hex, no leading zero, no
    // extension; a chunk may come split in several), the data is the
    // same, the trailer section is kept.
    let text = String::from_utf8_lossy(&body).into_owned();
    assert!(!text.contains(';') && !text.contains("name="), "{text}");
    assert!(text.ends_with("\r\n0\r\nX-Trailer: t\r\n\r\n"), "{text}");
    let (lines, data) = chunks(&body);
    assert_eq!(data, b"0123456789hello");
    assert_eq!(lines.last().map(String::as_str), Some("0"), "{text}");
}

/// The size lines and the data of the complete chunks at the start of a
/// chunked body; panics on a size line that is not canonical.
fn chunks(mut rest: &[u8]) -> (Vec<String>, Vec<u8>) {
    let (mut lines, mut data) = (Vec::new(), Vec::new());
    while let Some(le) = rest.windows(2).position(|w| w == b"\r\n") {
        let line = String::from_utf8_lossy(&rest[..le]).into_owned();
        let canonical = line == "0"
            || (!line.is_empty()
                && !line.starts_with('0')
                && line
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert!(canonical, "size line {line:?}");
        let n = usize::from_str_radix(&line, 16).unwrap();
        lines.push(line);
        if n == 0 || rest.len() < le + 2 + n + 2 {
            break;
        }
        data.extend_from_slice(&rest[le + 2..le + 2 + n]);
        rest = &rest[le + 2 + n + 2..];
    }
    (lines, data)
}

#[test]
fn a_chunk_size_past_32_bits_is_not_forwarded_as_sent() {
    // 0x100000005: a server truncating sizes to 32 bits would read 5 and
    // take what follows for a new request. ebb sends what it has as
    // chunks of their real size.
    let o = Recorder::start(b"never sent");
    let e = Ebb::start(&proxy_cfg(o.addr));
    let mut c = Client::connect(e.addr());
    c.send(
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          100000005\r\nhelloGET /smuggled HTTP/1.1\r\n",
    );
    let want = b"helloGET /smuggled HTTP/1.1\r\n";
    wait_until("the body reaches the server", || {
        let got = o.got();
        got.windows(9).any(|w| w == b"100000005") || got.ends_with(b"smuggled HTTP/1.1\r\n\r\n")
    });
    let body = body_of(&o.got());
    let text = String::from_utf8_lossy(&body).into_owned();
    assert!(!text.contains("100000005"), "{text}");
    assert_eq!(chunks(&body).1, want, "{text}");
}

#[test]
fn seventeen_digit_chunk_sizes_are_refused() {
    let o = Recorder::start(b"0\r\n\r\n");
    let e = Ebb::start(&proxy_cfg(o.addr));
    let r = raw(
        e.addr(),
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          0000000000000000a\r\n0123456789\r\n0\r\n\r\n",
    )
    .expect("an answer");
    assert_eq!(r.status, 400);
    let text = String::from_utf8_lossy(&o.got()).into_owned();
    assert!(!text.contains("0000000000000000a"), "{text}");
}

/// A CONNECT the file server would answer (it opens no tunnel; one routed
/// to servers is forwarded, see tests/proxy.rs) is answered 405 with an
/// `Allow` field, logged, and the connection goes on.
#[test]
fn connect_to_the_file_server_is_answered_405_and_logged() {
    let d = scratch("connect-files");
    std::fs::write(d.join("next"), "file").unwrap();
    let e = Ebb::start(&format!(
        "global\n    log stdout\ndefaults\n    mode http\n    log global\n    timeout client 5s\n\
         frontend fe\n    bind BIND\n    default_backend files\n\
         backend files\n    serve-files {}\n",
        d.display()
    ));
    let mut c = Client::connect(e.addr());
    c.send(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    let r = c.read_resp();
    assert_eq!(r.status, 405);
    let allow = r.header("allow").expect("an Allow field");
    assert!(
        allow.contains("GET") && !allow.contains("CONNECT"),
        "{allow}"
    );
    // The connection goes on: an ordinary request after it is served.
    c.send(b"GET /next HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_resp().status, 200);
    let l = e
        .wait_stdout("CONNECT example.com:443", Duration::from_secs(10))
        .expect("a log line for the CONNECT");
    assert!(l.contains(" 405 "), "{l}");
}

#[test]
fn an_h2c_upgrade_is_not_forwarded() {
    let o = Recorder::start(b"\r\n\r\n");
    let e = Ebb::start(&proxy_cfg(o.addr));
    let r = raw(
        e.addr(),
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\n\
          Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
    )
    .expect("an answer");
    assert_eq!(r.status, 200);
    let got = String::from_utf8_lossy(&o.got()).to_ascii_lowercase();
    assert!(got.starts_with("get / http/1.1\r\n"), "{got}");
    assert!(!got.contains("upgrade"), "{got}");
    assert!(!got.contains("http2-settings"), "{got}");
}

/// `log stdout` to a pipe nobody reads: the lines wait in the writer's
/// queue (or are dropped past it, counted in `DroppedLogs`), and the
/// worker goes on answering; before, the worker blocked in its write once
/// the pipe's 64 KiB were full (about 400 lines) and answered nothing
/// more, not even a stop signal. Then a stop ends the process at once.
#[test]
fn a_stdout_log_nobody_reads_never_stops_the_worker() {
    let dir = scratch("stalled-log");
    let port = free_port();
    let sock = dir.join("admin.sock");
    std::fs::write(
        dir.join("ebb.cfg"),
        format!(
            "global\n    nbthread 1\n    log stdout format raw local0\n    stats socket {} level admin\n\
             defaults\n    mode http\n    log global\n    option httplog\n    timeout client 10s\n\
             \x20   timeout server 10s\n    timeout connect 5s\n\
             frontend fe\n    bind 127.0.0.1:{port}\n\
             \x20   http-request return status 200 content-type text/plain string ok\n",
            sock.display()
        ),
    )
    .unwrap();
    // stdout piped and never read; stderr to a file.
    let mut child = std::process::Command::new(EBB)
        .args(["-f", "ebb.cfg"])
        .current_dir(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(dir.join("err")).unwrap())
        .spawn()
        .unwrap();
    let a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_until("ebb listens", || TcpStream::connect(a).is_ok());
    // Each log line is about 150 bytes: 3,000 of them are seven times
    // what the pipe holds.
    let mut c = Client::connect(a);
    for i in 0..3000 {
        c.send(format!("GET /{i} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
        assert_eq!(c.read_resp().status, 200, "request {i}");
    }
    let info = cli_cmd(&sock, "show info");
    assert!(info.contains("DroppedLogs: "), "{info}");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    // The stop waits at most a second for the queued lines.
    let mut code = None;
    wait_until("ebb exits", || {
        code = child.try_wait().ok().flatten();
        code.is_some()
    });
    assert_eq!(code.and_then(|c| c.code()), Some(0));
    let mut out = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut out);
    assert!(out.contains("GET /0 HTTP/1.1"), "{out}");
}

/// ebb, and HAProxy 2.6 beside it when installed, proxying to `origin`:
/// the processes (kept while they serve) and their addresses, ebb's
/// first.
fn both_proxying(answer: &'static [u8]) -> ((Ebb, Option<Hap>, Origin), Vec<SocketAddr>) {
    let o = Origin::start("canned", Mode::Canned(answer));
    let origin = o.addr;
    let e = Ebb::start(&proxy_cfg(origin));
    let h = haproxy_beside("harden-h", |_, bind| {
        format!(
            "global\n    stats socket x level admin\n{}",
            proxy_cfg(origin).replace("BIND", bind)
        )
    });
    let mut targets = vec![e.addr()];
    targets.extend(h.as_ref().map(|h| h.1));
    ((e, h.map(|h| h.0), o), targets)
}

/// Sends `req` on a new connection and reads what comes back, until the
/// close or an end the bytes show: a whole answer by its framing, or
/// after a 101 the server's `FROM-SERVER` (a tunnel stays open). Those
/// tell the end of every answer these tests expect or fear, so no wait
/// on a silence; what they do not end fails the caller's checks after a
/// 10 s silence.
fn exchange(a: SocketAddr, req: &[u8]) -> Vec<u8> {
    exchange_until(a, req, |got| {
        got.ends_with(b"FROM-SERVER")
            || (!got.starts_with(b"HTTP/1.1 101 ") && response_len(got, false).is_some())
    })
}

/// [`exchange`], ended when `done` holds of what came.
fn exchange_until(a: SocketAddr, req: &[u8], done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req).unwrap();
    let mut got = Vec::new();
    let mut tmp = [0u8; 4096];
    while let Ok(n) = s.read_retry(&mut tmp) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&tmp[..n]);
        if done(&got) {
            break;
        }
    }
    got
}

/// RFC 9110 §7.8: a server switches protocols only to one the request
/// named in `Upgrade`. A 101 answering a request that asked for none (or
/// one whose `Upgrade` ebb did not forward: HTTP/1.0) is an invalid
/// answer (502), not a tunnel: before, ebb passed the 101 on and joined
/// the two connections, whatever the client meant to send next went to
/// the server raw. HAProxy 2.6 answers 502 too (checked beside it).
#[test]
fn a_switch_the_request_did_not_ask_for_is_a_502() {
    let (_procs, targets) = both_proxying(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\nFROM-SERVER",
    );
    for &a in &targets {
        for req in [
            &b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: t\r\nUpgrade: foo\r\n\r\n",
        ] {
            let got = String::from_utf8_lossy(&exchange(a, req)).into_owned();
            assert!(got.starts_with("HTTP/1.1 502 "), "{a}: {got}");
            assert!(!got.contains("FROM-SERVER"), "{a}: {got}");
        }
        // Asked for, the switch goes through: both ways.
        let got = exchange(
            a,
            b"GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n",
        );
        let got = String::from_utf8_lossy(&got).into_owned();
        assert!(got.starts_with("HTTP/1.1 101 "), "{a}: {got}");
        assert!(got.ends_with("\r\n\r\nFROM-SERVER"), "{a}: {got}");
    }
}

/// RFC 9110 §7.8, §15.2.2: a 101 names the protocol it switches to in
/// `Upgrade`, listed in `Connection`. One without is refused (502), even
/// when the request asked for an upgrade. HAProxy 2.6 refuses one whose
/// `Connection` does not list `upgrade` (checked beside it) but passes
/// one without `Upgrade`.
#[test]
fn a_switch_that_names_no_protocol_is_a_502() {
    for (answer, as_haproxy) in [
        (
            &b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\nFROM-SERVER"[..],
            false,
        ),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\n\r\nFROM-SERVER",
            true,
        ),
    ] {
        let answer: &'static [u8] = Box::leak(answer.to_vec().into_boxed_slice());
        let (_procs, mut targets) = both_proxying(answer);
        targets.truncate(if as_haproxy { 2 } else { 1 });
        for a in targets {
            let got = exchange(
                a,
                b"GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n",
            );
            let got = String::from_utf8_lossy(&got).into_owned();
            assert!(got.starts_with("HTTP/1.1 502 "), "{a}: {got}");
            assert!(!got.contains("FROM-SERVER"), "{a}: {got}");
        }
    }
}

/// A proxied request with `Expect: 100-continue` and a body: the server
/// reads the body, so the client's connection stays open for its next
/// request, as HAProxy keeps it. Before, ebb closed it after every such
/// answer (`Connection: close`; a request pipelined behind was lost),
/// the close meant for an answer ebb makes without reading the body.
#[test]
fn a_proxied_expect_continue_request_keeps_its_connection() {
    let (_procs, targets) = both_proxying(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    for &a in &targets {
        let mut c = Client::connect(a);
        c.send(b"POST /a HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
        c.send(b"hello");
        let r = c.read_resp();
        assert_eq!(r.status, 200, "{a}");
        assert_eq!(r.header("connection"), None, "{a}");
        // The body and a request pipelined behind it in one segment.
        c.send(
            b"POST /b HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n\
              helloGET /c HTTP/1.1\r\nHost: t\r\n\r\n",
        );
        assert_eq!(c.read_resp().status, 200, "{a}");
        assert_eq!(c.read_resp().status, 200, "{a}");
    }
}

/// A chunked answer reaches the client re-framed, as a chunked request
/// body reaches the server: canonical sizes, no chunk extension, the
/// trailer section kept (HAProxy 2.6 re-frames answers too, checked
/// beside it). Before, ebb passed the server's size lines on as written:
/// a size with leading zeros or past 32 bits, which a client may read
/// otherwise than ebb did, went out as it came.
#[test]
fn chunk_sizes_reach_the_client_canonical() {
    let (_procs, targets) = both_proxying(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
          000000000000000A;name=value\r\n0123456789\r\n5 ; x=\"y z\"\r\nhello\r\n\
          0\r\nX-Trailer: t\r\n\r\n",
    );
    for &a in &targets {
        let got = exchange(a, b"GET / HTTP/1.1\r\nHost: t\r\nTE: trailers\r\n\r\n");
        let mut body = body_of(&got);
        if a != targets[0] {
            // HAProxy writes its sizes in upper case.
            body.make_ascii_lowercase();
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        assert!(
            !text.contains(';') && !text.contains("name="),
            "{a}: {text}"
        );
        let (lines, data) = chunks(&body);
        assert_eq!(data, b"0123456789hello", "{a}: {text}");
        assert_eq!(lines.last().map(String::as_str), Some("0"), "{a}: {text}");
        assert!(
            text.to_ascii_lowercase()
                .ends_with("\r\n0\r\nx-trailer: t\r\n\r\n"),
            "{a}: {text}"
        );
    }
    // A size of 2^64 - 1 (HAProxy refuses it: 502): what came goes as a
    // chunk of its real size, the size line never.
    let o = Origin::start(
        "canned",
        Mode::Canned(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc",
        ),
    );
    let e = Ebb::start(&proxy_cfg(o.addr));
    // The body never ends (the server stays silent after `abc`): read up
    // to the chunk that carries it.
    let got = exchange_until(e.addr(), b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", |g| {
        g.windows(4).any(|w| w == b"\r\n\r\n") && chunks(&body_of(g)).1 == b"abc"
    });
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(!text.contains("ffff"), "{text}");
    assert_eq!(chunks(&body_of(&got)).1, b"abc", "{text}");
}
