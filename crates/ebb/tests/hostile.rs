//! Hostile peers against the real binary, each bounded: a CLI client that
//! sends commands without reading the answers; ebb's memory stays bounded
//! and no answer is lost.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

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
