//! `max-keep-alive-queue` through the real binary, beside HAProxy 2.6: with
//! `option prefer-last-server`, a keep-alive client's next request goes to
//! its connection's server only while that server has a free slot or
//! fewer than N streams queued; else it is balanced (HAProxy's
//! assign_server). Every wait is on an event (the origin's busy count,
//! the CLI's `qcur`).

mod common;

use std::net::SocketAddr;
use std::path::Path;

use common::origin::{Gate, Mode, Origin};
use common::*;

fn cfg(k: &Path, bind: &str, kaq: &str, a: SocketAddr, b: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n    timeout queue 10s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    balance roundrobin\n    option prefer-last-server\n    http-reuse never\n{kaq}\
         \x20   server a {a} maxconn 1\n    server b {b} maxconn 1\n",
        k.display()
    )
}

fn first_word(r: &Resp) -> String {
    r.text().split(' ').next().unwrap_or("?").to_string()
}

/// Client 1 is on server a (its connection's server); client 3 fills a's
/// one slot; client 1's next request: with `max-keep-alive-queue 0` it is
/// balanced to b at once; without the keyword (or with 1: a's queue is
/// empty) it waits in a's queue and a answers it.
#[test]
fn a_full_last_server_is_left_past_the_keep_alive_queue() {
    let gate = Gate::default();
    gate.open();
    let a = Origin::start("A", Mode::Gate(gate.clone()));
    let b = Origin::start("B", Mode::Ok);
    let run = |fe: SocketAddr, sock: &Path| -> String {
        gate.open();
        let mut c1 = Client::connect(fe);
        c1.send(b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n");
        let first = first_word(&c1.read_resp());
        // Round robin's next is b: client 2 takes it and is answered.
        let r2 = get(fe, "/2");
        gate.close();
        let busy = a.busy.load(std::sync::atomic::Ordering::SeqCst);
        // Client 3 goes to a and waits at its gate, holding a's slot.
        let mut c3 = Client::connect(fe);
        c3.send(b"GET /3 HTTP/1.1\r\nHost: x\r\n\r\n");
        wait_until("a busy", || {
            a.busy.load(std::sync::atomic::Ordering::SeqCst) > busy
        });
        c1.send(b"GET /4 HTTP/1.1\r\nHost: x\r\n\r\n");
        let q = || {
            stat_row(sock, "be", "a")
                .get("qcur")
                .cloned()
                .unwrap_or_default()
        };
        // Either answered at once by b, or queued on a until the gate
        // opens.
        let answered = |c: &Client| {
            c.s.set_nonblocking(true).unwrap();
            let n = c.s.peek(&mut [0u8; 1]).unwrap_or(0);
            c.s.set_nonblocking(false).unwrap();
            n > 0
        };
        let mut second = None;
        wait_until("c1 answered or queued", || {
            if answered(&c1) {
                second = Some(first_word(&c1.read_resp()));
                return true;
            }
            q() == "1"
        });
        gate.open();
        let second = second.unwrap_or_else(|| first_word(&c1.read_resp()));
        let third = first_word(&c3.read_resp());
        format!("{first}{}{third}{second}", first_word(&r2))
    };
    let mut ours = Vec::new();
    let kaqs = [
        "",
        "    max-keep-alive-queue 0\n",
        "    max-keep-alive-queue 1\n",
    ];
    for (i, kaq) in kaqs.into_iter().enumerate() {
        let name = format!("kaq{i}");
        let (e, s) = ebb_with_admin(&name, |k, bd| cfg(k, bd, kaq, a.addr, b.addr));
        ours.push(run(e.addr(), &s));
        drop(e);
        if let Some((h, fe)) = haproxy_beside(&name, |k, bd| cfg(k, bd, kaq, a.addr, b.addr)) {
            assert_eq!(run(fe, &h.sock), *ours.last().unwrap(), "{kaq}");
        }
    }
    assert_eq!(ours, ["ABAA", "ABAB", "ABAA"]);
}

#[test]
fn bad_values_are_refused() {
    let d = scratch("kaq-refused");
    for (text, what) in [
        (
            "backend b\n    max-keep-alive-queue\n",
            "expects an integer value",
        ),
        (
            "backend b\n    max-keep-alive-queue x1\n",
            "is not an integer",
        ),
        (
            "frontend f\n    bind 127.0.0.1:0\n    max-keep-alive-queue 3\n",
            "max-keep-alive-queue",
        ),
    ] {
        assert_refused(&d, "t.cfg", text, what, false);
    }
}
