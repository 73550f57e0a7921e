//! HAProxy 2.6 compatibility of the sample engine and the CLI through the
//! real binary (issue 14): header values keep their spaces, the CLI's
//! `get var`/`set var` and `experimental-mode`; each compared with
//! `haproxy` side by side where it is installed.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::*;

/// Sends `req` on a new connection and returns the response head's field
/// lines exactly as received (no trimming), up to the empty line.
fn raw_head(addr: SocketAddr, req: &str) -> Vec<Vec<u8>> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(buf.len());
    buf[..end]
        .split(|&c| c == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec())
        .collect()
}

/// The value of field `name` as sent, every byte after `name: `.
fn raw_field(head: &[Vec<u8>], name: &str) -> Option<Vec<u8>> {
    head.iter().find_map(|l| {
        let p = l.iter().position(|&c| c == b':')?;
        if !l[..p].eq_ignore_ascii_case(name.as_bytes()) {
            return None;
        }
        let v = &l[p + 1..];
        Some(v.strip_prefix(b" ").unwrap_or(v).to_vec())
    })
}

/// A proxy section that answers itself, with the rules `rules`.
fn answering(bind: &str, rules: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
frontend fe\n    bind {bind}\n{rules}    http-request return status 200\n"
    )
}

const SPACES: &str = "    http-request set-var(txn.url) url\n\
    http-request set-var(txn.enc) str(foo=bar+42\\ 42\\ ),url_enc\n\
    http-after-response set-header x-dec0 \"%[var(txn.url),url_dec]\"\n\
    http-after-response set-header x-dec1 \"%[var(txn.url),url_dec(1)]\"\n\
    http-after-response set-header x-enc \"%[var(txn.enc)]\"\n\
    http-after-response set-header x-back \"%[var(txn.enc),url_dec]\"\n\
    http-after-response set-header x-lead \"  a \"\n";

fn spaces_seen(addr: SocketAddr) -> Vec<Option<Vec<u8>>> {
    let head = raw_head(
        addr,
        "GET /bla+%20?foo%3Dbar%2B42+42%20 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    ["x-dec0", "x-dec1", "x-enc", "x-back", "x-lead"]
        .iter()
        .map(|n| raw_field(&head, n))
        .collect()
}

/// HAProxy's reg-tests converter/url_dec and converter/url_enc: a value
/// ending (or starting) with spaces is sent with them.
#[test]
fn header_values_keep_their_spaces() {
    let ebb = Ebb::start(&answering("BIND", SPACES));
    let seen = spaces_seen(ebb.addr());
    let want: Vec<Option<Vec<u8>>> = [
        "/bla+ ?foo=bar+42 42 ",
        "/bla  ?foo=bar+42 42 ",
        "foo%3Dbar%2B42%2042%20",
        "foo=bar+42 42 ",
        "  a ",
    ]
    .iter()
    .map(|v| Some(v.as_bytes().to_vec()))
    .collect();
    assert_eq!(seen, want);
    let port = free_port();
    if let Some(_h) = haproxy_with(
        "hap-spaces",
        &answering(&format!("127.0.0.1:{port}"), SPACES),
    ) {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_until("haproxy's listener", || TcpStream::connect(addr).is_ok());
        assert_eq!(spaces_seen(addr), want, "haproxy");
    }
}
