//! HAProxy keywords of everyday configurations, through the real binary
//! and side by side with HAProxy 2.6 when it is installed:
//! `http-send-name-header`.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use common::origin::{Mode, Origin};
use common::*;

/// The lines of the request heads `o` received that name `field`
/// (case-insensitively), as `name: value` lowercased.
fn fields_seen(o: &Origin, field: &str) -> Vec<Vec<String>> {
    o.heads
        .lock()
        .unwrap()
        .iter()
        .map(|h| {
            h.lines()
                .filter(|l| {
                    l.split_once(':')
                        .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(field))
                })
                .map(|l| l.to_ascii_lowercase())
                .collect()
        })
        .collect()
}

fn name_hdr_cfg(sock: &Path, bind: &str, dead: u16, o: SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         \x20   http-send-name-header X-Server\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    balance first\n    retries 1\n    option redispatch\n\
         \x20   server dead 127.0.0.1:{dead}\n    server live {o}\n",
        sock.display()
    )
}

/// `http-send-name-header`: the server named in the field, any copy the
/// client sent removed; the first server refuses the connection, the
/// redispatched retry names the server it went to.
#[test]
fn send_name_header_names_the_server_tried_last() {
    let origin = Origin::start("live", Mode::Ok);
    let dead = free_port();
    let send = |fe: SocketAddr| {
        let r = raw(
            fe,
            b"GET / HTTP/1.1\r\nHost: x\r\nx-server: forged\r\nX-SERVER: again\r\nConnection: close\r\n\r\n",
        )
        .expect("an answer");
        assert_eq!(r.status, 200);
    };
    let (ebb, _sock) = ebb_with_admin("sendname", |k, b| name_hdr_cfg(k, b, dead, origin.addr));
    send(ebb.addr());
    let ours = fields_seen(&origin, "x-server");
    assert_eq!(ours, vec![vec!["x-server: live".to_string()]]);
    origin.heads.lock().unwrap().clear();
    if let Some((_h, fe)) = haproxy_beside("sendname", |k, b| name_hdr_cfg(k, b, dead, origin.addr))
    {
        send(fe);
        assert_eq!(fields_seen(&origin, "x-server"), ours);
    }
}

/// `http-send-name-header` without a name is refused with its line, as
/// HAProxy refuses it; so in a frontend.
#[test]
fn send_name_header_needs_a_name_and_a_backend() {
    let dir = scratch("sendname-refused");
    let head = "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n";
    for (i, (text, what)) in [
        (
            "backend be\n    http-send-name-header\n    server a 127.0.0.1:1\n",
            "f0.cfg:7: 'http-send-name-header' expects a header name",
        ),
        (
            "frontend fe\n    bind 127.0.0.1:1\n    http-send-name-header X-S\n",
            "f1.cfg:8: 'http-send-name-header' is not allowed",
        ),
    ]
    .iter()
    .enumerate()
    {
        let f = format!("f{i}.cfg");
        std::fs::write(dir.join(&f), format!("{head}{text}")).unwrap();
        let (rc, _out, err) = run_ebb(&["-c", "-f", &f], &dir);
        assert_ne!(rc, 0, "{text}");
        assert!(err.contains(what), "{err}");
    }
}
