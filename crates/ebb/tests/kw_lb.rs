//! Load-balancing keywords through the real binary, side by side with
//! HAProxy 2.6 when it is installed: a persisted stream whose server's
//! own queue is full (`maxqueue`), with and without `option redispatch`.

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
