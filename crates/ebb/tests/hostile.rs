//! Hostile peers against the real binary, each bounded: a CLI client that
//! sends commands without reading the answers; ebb's memory stays bounded
//! and no answer is lost.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::origin::{exchange_within, read_head, serve_each};
use common::*;

/// ebb's resident memory in KiB.
fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Interactive mode, then `show backend` lines written without reading
/// the answers: ebb stops reading once the unsent answers pass its bound,
/// so the client's writes block (before, ebb read every line and kept
/// every answer: 1 MiB of `help` lines grew it by 600 MiB). Then every
/// line written is answered, in order.
#[test]
fn a_cli_client_that_never_reads_is_held_by_its_socket() {
    let sock = scratch("hostile-cli").join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n    stats timeout 60s\n\
         defaults\n    mode http\n\
         frontend fe\n    bind BIND\n    http-request return status 200\n\
         backend b1\n    server s1 127.0.0.1:1\n",
        sock.display()
    ));
    let rss0 = rss_kb(e.pid());
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(b"prompt\n").unwrap();
    const LINE: &[u8] = b"show backend\n";
    let batch: Vec<u8> = LINE.repeat(4096);
    const CAP: usize = 32 << 20;
    // A write that waits 3 s: ebb takes no more (the bound holds). Before,
    // ebb took all 32 MiB (and answered into its memory).
    s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut sent = 0;
    while sent < CAP {
        match s.write(&batch) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    let rss1 = rss_kb(e.pid());
    assert!(
        sent < CAP,
        "ebb read all {sent} bytes of commands while nobody read its answers"
    );
    assert!(
        rss1 < rss0 + 64 * 1024,
        "RSS {rss0} kB -> {rss1} kB while the answers were not read"
    );
    // The rest of a cut line, then the end: every whole line is answered.
    let cut = sent % LINE.len();
    if cut != 0 {
        s.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut r = s.try_clone().unwrap();
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        });
        s.write_all(&LINE[cut..]).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let out = reader.join().unwrap();
        check_answers(&out, sent / LINE.len() + 1);
    } else {
        s.shutdown(std::net::Shutdown::Write).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        check_answers(&out, sent / LINE.len());
    }
}

fn check_answers(out: &[u8], lines: usize) {
    let text = String::from_utf8_lossy(out);
    let answers = text.matches("# name\n").count();
    assert_eq!(answers, lines, "every line written is answered once");
}

/// A server that reads a request head and answers what `answer` writes
/// (given the bytes read so far; it writes until the peer closes).
fn bad_origin(
    answer: fn(&mut std::net::TcpStream, Vec<u8>) -> std::io::Result<()>,
) -> std::net::SocketAddr {
    serve_each(move |mut c| {
        if let Some(head) = read_head(&mut c) {
            let _ = answer(&mut c, head);
        }
    })
}

/// How long an exchange here reads before it stops waiting for the
/// close (some of them end so).
const LIMIT: Duration = Duration::from_secs(20);

fn status_of(out: &[u8]) -> String {
    String::from_utf8_lossy(out.split(|c| *c == b'\r').next().unwrap_or_default()).into_owned()
}

/// Oversized inputs from a client, in its head or its body: refused with
/// their 4xx, a log line each, and ebb's memory stays where it was.
#[test]
fn oversized_client_input_is_refused_with_memory_flat() {
    // Reads a chunked body to its last chunk (no trailer), then answers.
    let origin = bad_origin(|c, mut got| {
        let mut b = [0u8; 65536];
        while !got.ends_with(b"0\r\n\r\n") {
            match c.read_retry(&mut b)? {
                0 => return Ok(()),
                n => got.extend_from_slice(&b[..n]),
            }
        }
        c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    });
    let e = Ebb::start(&format!(
        "global\n    log stdout format raw local0\n\
         defaults\n    mode http\n    log global\n    option httplog\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend fe\n    bind BIND\n    default_backend be\n\
         backend be\n    server s1 {origin}\n"
    ));
    let a = e.addr();
    let rss0 = rss_kb(e.pid());
    let get = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    // `Connection: close`: the answer that is not refused ends the
    // exchange at once (kept alive, the read waited for LIMIT).
    let post =
        b"POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "100k fields",
            [&get[..], &b"X: a\r\n".repeat(100_000), b"\r\n"].concat(),
            " 400",
        ),
        (
            "1 MB target",
            [
                b"GET /".as_slice(),
                &b"a".repeat(1 << 20),
                b" HTTP/1.1\r\n\r\n",
            ]
            .concat(),
            " 414",
        ),
        (
            "1 MB field",
            [&get[..], b"X: ", &b"a".repeat(1 << 20), b"\r\n\r\n"].concat(),
            " 431",
        ),
        (
            "50k chunk extensions",
            [
                &post[..],
                b"1",
                &b";a=b".repeat(50_000),
                b"\r\na\r\n0\r\n\r\n",
            ]
            .concat(),
            " 400",
        ),
        (
            "100k-field trailer",
            [
                &post[..],
                b"1\r\na\r\n0\r\n",
                &b"x: y\r\n".repeat(100_000),
                b"\r\n",
            ]
            .concat(),
            " 400",
        ),
    ];
    for (what, req, want) in &cases {
        let out = exchange_within(a, req, LIMIT);
        assert!(
            status_of(&out).contains(want),
            "{what}: {:?}",
            status_of(&out)
        );
    }
    // Many small chunks are fine: the origin gets them all.
    let body = [&post[..], &b"1\r\na\r\n".repeat(100_000), b"0\r\n\r\n"].concat();
    assert!(status_of(&exchange_within(a, &body, LIMIT)).contains(" 200"));
    let logged = || {
        let (o, e) = (e.stdout.lock().unwrap(), e.stderr.lock().unwrap());
        o.iter()
            .chain(e.iter())
            .filter(|l| [" 400 ", " 414 ", " 431 "].iter().any(|c| l.contains(c)))
            .count()
    };
    let all = came_within(Duration::from_secs(30), || logged() >= cases.len());
    assert!(
        all,
        "a log line per refused request: {:?} {:?}",
        e.stdout.lock().unwrap(),
        e.stderr.lock().unwrap()
    );
    let rss1 = rss_kb(e.pid());
    assert!(rss1 < rss0 + 16 * 1024, "RSS {rss0} kB -> {rss1} kB");
}

/// Servers that answer an endless head, endless fields, an endless chunk
/// extension or an endless trailer: 502 while nothing was sent, a cut
/// answer (no last chunk) once the head went; ebb's memory stays flat.
#[test]
fn endless_answers_from_a_server_are_cut() {
    fn fill(c: &mut std::net::TcpStream, first: &[u8], unit: &[u8]) -> std::io::Result<()> {
        c.write_all(first)?;
        let u = unit.repeat(1000);
        loop {
            c.write_all(&u)?;
        }
    }
    let heads = bad_origin(|c, _| {
        fill(
            c,
            b"HTTP/1.1 200 OK\r\n",
            b"X-Fill: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\r\n",
        )
    });
    let ext = bad_origin(|c, _| {
        fill(
            c,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1",
            b";a=b",
        )
    });
    let trailer = bad_origin(|c, _| {
        fill(
            c,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n",
            b"x: y\r\n",
        )
    });
    let e = Ebb::start(&format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend fe\n    bind BIND\n\
         use_backend ext if {{ path /ext }}\n    use_backend trailer if {{ path /trailer }}\n    default_backend heads\n\
         backend heads\n    server s1 {heads}\n\
         backend ext\n    server s1 {ext}\n\
         backend trailer\n    server s1 {trailer}\n"
    ));
    let a = e.addr();
    let rss0 = rss_kb(e.pid());
    // `Connection: close`: ebb closes after its 502 or cut answer, so each
    // exchange ends then (kept alive, the 502's waited for LIMIT, 20 s).
    let req =
        |p: &str| format!("GET {p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").into_bytes();
    // The endless head never makes an answer: 502.
    let out = exchange_within(a, &req("/"), LIMIT);
    assert!(status_of(&out).contains(" 502"), "{:?}", status_of(&out));
    // The endless chunk line: 502 while the head is still held (it waits
    // for the first data to leave with it), or, when a loaded machine let
    // a flush tick pass between the server's writes and the head went
    // alone, that head and nothing more (no data, no last chunk).
    let out = exchange_within(a, &req("/ext"), LIMIT);
    let text = String::from_utf8_lossy(&out);
    let cut = status_of(&out).contains(" 200") && text.ends_with("\r\n\r\n");
    assert!(status_of(&out).contains(" 502") || cut, "/ext: {text:?}");
    let out = exchange_within(a, &req("/trailer"), LIMIT);
    assert!(status_of(&out).contains(" 200"), "{:?}", status_of(&out));
    assert!(
        out.ends_with(b"1\r\nx\r\n"),
        "cut after the data, no last chunk: {:?}",
        String::from_utf8_lossy(&out)
    );
    let rss1 = rss_kb(e.pid());
    assert!(rss1 < rss0 + 16 * 1024, "RSS {rss0} kB -> {rss1} kB");
}
