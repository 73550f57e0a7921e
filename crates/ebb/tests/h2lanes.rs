//! The HTTP/2 stream layer seen from the stream: what an HTTP/2 request
//! looks like to rules, logs and servers (HAProxy's internal absolute
//! URI, scheme-based normalization), side by side with HAProxy 2.6 where
//! it is installed. Real clients: nghttp, curl, raw sockets.

mod common;

use common::origin::{Mode, Origin};
use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;

/// The request lines and `host` values an origin got, in order.
fn origin_lines(o: &Origin) -> Vec<String> {
    o.heads
        .lock()
        .unwrap()
        .iter()
        .map(|h| {
            let line = h.lines().next().unwrap_or("").to_string();
            let host = h
                .lines()
                .find_map(|l| {
                    let (n, v) = l.split_once(':')?;
                    n.eq_ignore_ascii_case("host").then(|| v.trim().to_string())
                })
                .unwrap_or_default();
            format!("{line} host={host}")
        })
        .collect()
}

/// The `x-*` fields of an nghttp -v run (`recv (stream_id=N) name: value`).
fn nghttp_fields(args: &[&str]) -> Vec<String> {
    let o = Command::new("nghttp")
        .args(["-v", "-t", "60"])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once(") x-").map(|(_, f)| format!("x-{f}")))
        .collect()
}

/// The `x-*` fields of an HTTP/1.1 answer.
fn h1_fields(a: SocketAddr, req: &str) -> Vec<String> {
    let mut s = TcpStream::connect(a).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("x-"))
        .map(|l| l.to_ascii_lowercase())
        .collect()
}

const NORMALIZE_FE: &str = "    http-request return status 200 hdr x-url \"%[url]\" hdr x-host \"%[req.hdr(host)]\" hdr x-path \"%[path]\" if { path /r }\n    default_backend b\n";

/// Every case of the normalization test on one proxy: its `proto h2` bind
/// `h2` and HTTP/1.1 bind `h1`.
fn normalize_cases(h2: SocketAddr, h1: SocketAddr) -> Vec<Vec<String>> {
    let u = |p: &str| format!("http://{h2}{p}");
    let mut out = vec![
        nghttp_fields(&["-H", ":authority: hostname:80", &u("/r")]),
        nghttp_fields(&["-H", ":authority: hostname:8080", &u("/r")]),
        nghttp_fields(&[
            "-H",
            ":scheme: https",
            "-H",
            ":authority: hostname:443",
            &u("/r"),
        ]),
        nghttp_fields(&[
            "-H",
            ":scheme: https",
            "-H",
            ":authority: hostname:80",
            &u("/r"),
        ]),
    ];
    // curl makes `:authority` of its Host field.
    let (ok, head, err) = curl(&[
        "--http2-prior-knowledge",
        "-H",
        "Host: Hostname:80",
        "-D",
        "-",
        "-o",
        "/dev/null",
        &u("/r?q=1"),
    ]);
    assert!(ok, "curl: {err}");
    out.push(
        head.lines()
            .filter(|l| l.starts_with("x-"))
            .map(str::to_string)
            .collect(),
    );
    // HTTP/1.1 absolute form gets the same normalization.
    out.push(h1_fields(
        h1,
        "GET http://hostname:80/r HTTP/1.1\r\nHost: hostname:80\r\nConnection: close\r\n\r\n",
    ));
    out.push(h1_fields(
        h1,
        "GET HTTPS://hostname:443/r HTTP/1.1\r\nHost: hostname:443\r\nConnection: close\r\n\r\n",
    ));
    out.push(h1_fields(
        h1,
        "GET http://hostname:443/r HTTP/1.1\r\nHost: hostname:443\r\nConnection: close\r\n\r\n",
    ));
    // To the server: an HTTP/2 request goes in origin form, with the
    // normalized host.
    nghttp_fields(&["-H", ":authority: hostname:80", &u("/x?y")]);
    out
}

/// HAProxy's reg-test http-messaging/scheme_based_normalize and more: an
/// HTTP/2 request is seen as `scheme://authority/path` by `url` (and `%r`),
/// a default port (80 for http, 443 for https) leaves the authority and
/// `host`, as for an HTTP/1.1 absolute-form request, and the server gets
/// the origin form. Before, `url` was `/r`, the port stayed and HTTP/1.1
/// absolute-form requests kept theirs.
#[test]
fn h2_requests_carry_the_absolute_uri_normalized_as_haproxy() {
    if !have("nghttp") || !have("curl") {
        println!("nghttp or curl missing: skipped");
        return;
    }
    let o = Origin::start("o", Mode::Ok);
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
         frontend f\n    bind BIND proto h2\n    bind BIND\n{NORMALIZE_FE}\
         backend b\n    server s {}\n",
        o.addr
    );
    let e = Ebb::start(&cfg);
    let got = normalize_cases(e.addrs[0], e.addrs[1]);
    let want: Vec<Vec<String>> = [
        ["http://hostname/r", "hostname", "/r"],
        ["http://hostname:8080/r", "hostname:8080", "/r"],
        ["https://hostname/r", "hostname", "/r"],
        ["https://hostname:80/r", "hostname:80", "/r"],
        ["http://Hostname/r?q=1", "Hostname", "/r"],
        ["http://hostname/r", "hostname", "/r"],
        ["https://hostname/r", "hostname", "/r"],
        ["http://hostname:443/r", "hostname:443", "/r"],
    ]
    .iter()
    .map(|[u, h, p]| {
        vec![
            format!("x-url: {u}"),
            format!("x-host: {h}"),
            format!("x-path: {p}"),
        ]
    })
    .collect();
    assert_eq!(got, want);
    wait_until("the origin got the request", || {
        !origin_lines(&o).is_empty()
    });
    assert_eq!(origin_lines(&o), ["GET /x?y HTTP/1.1 host=hostname"]);

    if !have("haproxy") {
        return;
    }
    let o2 = Origin::start("o", Mode::Ok);
    let (p2, p1) = (free_port(), free_port());
    let _h = haproxy_with(
        "normalize",
        &format!(
            "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             frontend f\n    bind 127.0.0.1:{p2} proto h2\n    bind 127.0.0.1:{p1}\n{NORMALIZE_FE}\
             backend b\n    server s {}\n",
            o2.addr
        ),
    );
    let a = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    wait_until("haproxy listens", || TcpStream::connect(a(p1)).is_ok());
    let theirs = normalize_cases(a(p2), a(p1));
    let fold = |v: Vec<Vec<String>>| -> Vec<Vec<String>> {
        v.into_iter()
            .map(|f| f.into_iter().map(|l| l.to_ascii_lowercase()).collect())
            .collect()
    };
    assert_eq!(fold(got), fold(theirs), "ebb (left) and haproxy (right)");
    wait_until("haproxy's origin got the request", || {
        !origin_lines(&o2).is_empty()
    });
    assert_eq!(origin_lines(&o), origin_lines(&o2));
}
