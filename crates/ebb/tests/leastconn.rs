//! `balance leastconn`'s choice as HAProxy 2.6 makes it, side by side
//! with haproxy when it is installed: a server's key is (streams + 1) x
//! 4096 / its weight in sixteenths (0 with no stream), so with weights 1
//! and 3, one stream on the first and four on the second, the next
//! stream goes to the second (512 against 426), where comparing streams
//! per weight (1 against 4/3) would pick the first.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;

use common::origin::{Gate, Mode, Origin};
use common::*;

fn get(a: SocketAddr, path: &'static str) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut c = Client::connect(a);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
        c.read_resp().text()
    })
}

#[test]
fn leastconn_counts_the_next_stream_as_haproxy() {
    let gate = Gate::default();
    let oa = Origin::start("a", Mode::Gate(gate.clone()));
    let ob = Origin::start("b", Mode::Gate(gate.clone()));
    let (aa, ab) = (oa.addr, ob.addr);
    let cfg = |sock: &Path, bind: &str| {
        format!(
            "global\n    stats socket {} level admin\n\
             defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             listen px\n    bind {bind}\n    balance leastconn\n\
             \x20   use-server a if {{ path_beg /a }}\n    use-server b if {{ path_beg /b }}\n\
             \x20   server a {aa} weight 1\n    server b {ab} weight 3\n",
            sock.display()
        )
    };
    let run = |fe: SocketAddr| -> String {
        gate.close();
        let (a0, b0) = (
            oa.busy.load(Ordering::SeqCst),
            ob.busy.load(Ordering::SeqCst),
        );
        let mut held = vec![get(fe, "/a")];
        for _ in 0..4 {
            held.push(get(fe, "/b"));
        }
        wait_until("1 stream on a and 4 on b", || {
            oa.busy.load(Ordering::SeqCst) == a0 + 1 && ob.busy.load(Ordering::SeqCst) == b0 + 4
        });
        let probe = get(fe, "/x");
        wait_until("the probe at a server", || {
            oa.busy.load(Ordering::SeqCst) + ob.busy.load(Ordering::SeqCst) == a0 + b0 + 6
        });
        gate.open();
        for h in held {
            h.join().unwrap();
        }
        probe.join().unwrap()
    };
    let (e, _sock) = ebb_with_admin("leastconn", cfg);
    assert_eq!(run(e.addr()), "b /x", "ebb");
    drop(e);
    if let Some((_h, fe)) = haproxy_beside("leastconn", cfg) {
        assert_eq!(run(fe), "b /x", "haproxy");
    }
}
