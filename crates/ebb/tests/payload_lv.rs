//! `req.payload_lv` in a tcp frontend, beside HAProxy 2.6 when it is
//! installed: the block a length prefix announces routes the connection
//! (`use_backend` rules on it), with the block's offset implicit,
//! relative and absolute (as HAProxy 2.6 reads it); a block that has not all come yet makes the
//! rule wait for it (inspect delay).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use common::*;

/// A server that writes `name` to each connection, then closes it.
fn named_origin(name: &'static str) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            let _ = s.write_all(name.as_bytes());
        }
    });
    a
}

/// What the server the proxy chose for `parts` (each sent in its own
/// segment: the proxy often reads the first alone) wrote back.
fn route(fe: SocketAddr, parts: &[&[u8]]) -> String {
    let mut c = TcpStream::connect(fe).unwrap();
    c.set_nodelay(true).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for p in parts {
        c.write_all(p).unwrap();
    }
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

#[test]
fn payload_lv_routes_by_length_prefixed_blocks_as_haproxy() {
    let a = named_origin("abc");
    let b = named_origin("bc");
    let d = named_origin("default");
    let mut seen = Vec::new();
    for hap in [false, true] {
        let cfg = |sock: &Path, bind: &str| {
            format!(
                "global\n    stats socket {} level admin\n\
                 defaults\n    mode tcp\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
                 frontend fe\n    bind {bind}\n    tcp-request inspect-delay 30s\n\
                 \x20   tcp-request content accept if {{ req.payload_lv(0,1) -m found }}\n\
                 \x20   use_backend abc if {{ req.payload_lv(0,1) -m bin 616263 }}\n\
                 \x20   use_backend bc if {{ req.payload_lv(0,1,+1) -m bin 6263 }}\n\
                 \x20   use_backend bc if {{ req.payload_lv(1,2,12) -m bin 6263 }}\n\
                 \x20   use_backend abc if {{ req.payload_lv(1,2,3) -m bin 6263 }}\n\
                 \x20   default_backend dflt\n\
                 backend abc\n    server s {a}\n\
                 backend bc\n    server s {b}\n\
                 backend dflt\n    server s {d}\n",
                sock.display()
            )
        };
        let Some((_keep, _sock, fe, who)) = ebb_or_haproxy(hap, "payload-lv", cfg) else {
            continue;
        };
        let got = vec![
            route(fe, &[b"\x03abc"]),
            route(fe, &[b"\x02xbc"]),
            route(fe, &[b"\x03ab", b"c"]),
            route(fe, &[b"\x00\x00\x02...bc"]),
            route(fe, &[b"\x02zz"]),
            route(fe, &[b"\x00\x00\x02.bc....."]),
        ];
        println!("{who}: {got:?}");
        seen.push(got);
    }
    // HAProxy 2.6 halves an even absolute offset (12 is 6) and reads an
    // odd one as relative (3 is 1 after the length, at 4).
    assert_eq!(seen[0], ["abc", "bc", "abc", "bc", "default", "abc"]);
    if let Some(h) = seen.get(1) {
        assert_eq!(&seen[0], h);
    }
}
