//! The `debug` converter beside HAProxy 2.6 when it is installed: each
//! value it sees goes to the `buf0` ring as HAProxy writes it (`[debug]
//! PREFIX: type=TYPE <VALUE>`, bytes that do not print as `.`), and the
//! value goes on unchanged; a sink that is not declared above the line
//! is refused.

mod common;

use std::path::Path;

use common::*;

#[test]
fn debug_writes_values_to_the_ring_as_haproxy() {
    let mut seen = Vec::new();
    for hap in [false, true] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 2s\n\
                 frontend fe\n    bind {bind}\n\
                 \x20   http-request set-var(txn.x) str(hi\\x01),debug(pfx)\n\
                 \x20   http-request set-var(txn.y) src,debug(ip,buf0)\n\
                 \x20   http-request set-var(txn.z) int(7),debug,add(1)\n\
                 \x20   http-request return status 200 content-type text/plain lf-string \"%[var(txn.x)] %[var(txn.y)] %[var(txn.z)]\"\n",
                sock.display()
            )
        };
        let Some((_keep, sock, fe, who)) = ebb_or_haproxy(hap, "conv-debug", cfg) else {
            continue;
        };
        let body = get(fe, "/").text();
        let mut events = String::new();
        wait_until(&format!("{who}: three events"), || {
            events = cli_cmd(&sock, "show events buf0");
            events.lines().filter(|l| l.contains("[debug]")).count() == 3
        });
        // Without the timestamps.
        let lines: Vec<String> = events
            .lines()
            .filter_map(|l| l.split_once(" [debug]").map(|x| format!("[debug]{}", x.1)))
            .collect();
        println!("{who}: {body:?} {lines:?}");
        seen.push((body, lines));
    }
    // (A control byte of an HTTP action string is written %XX.)
    assert_eq!(seen[0].0, "hi%01 127.0.0.1 8");
    assert_eq!(
        seen[0].1,
        [
            "[debug] pfx: type=str <hi.>",
            "[debug] ip: type=ipv4 <127.0.0.1>",
            "[debug] : type=sint <7>",
        ]
    );
    if let Some(h) = seen.get(1) {
        assert_eq!(&seen[0], h);
    }
    let d = scratch("conv-debug-refused");
    let head = "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n";
    assert_refused(
        &d,
        "late.cfg",
        &format!(
            "{head}frontend fe\n    bind 127.0.0.1:0\n    http-request set-var(txn.x) str(a),debug(p,r1)\n\
             ring r1\n    size 32768\n"
        ),
        "late.cfg:8: ",
        true,
    );
    std::fs::write(
        d.join("early.cfg"),
        format!(
            "ring r1\n    size 32768\n{head}frontend fe\n    bind 127.0.0.1:0\n    http-request set-var(txn.x) str(a),debug(p,r1)\n"
        ),
    )
    .unwrap();
    let (rc, _, err) = run_ebb(&["-c", "-f", "early.cfg"], &d);
    assert_eq!(rc, 0, "{err}");
}
