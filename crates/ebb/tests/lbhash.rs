//! Hash balancing side by side with HAProxy 2.6: the same backends (same
//! origins, weights, `balance uri|hdr|source`, `hash-type map-based|
//! consistent` with each function) run under haproxy and under ebb, and
//! every key must reach the same server name through both. The origins
//! answer `NAME PATH`, so the name comes from the server that answered.
//!
//! Skipped, with the reason printed, only when haproxy is not installed
//! (`make test` installs it).

mod common;

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::origin::{Mode, Origin};
use common::*;

/// One backend under test: its `balance` and `hash-type` lines, and the
/// header its keys travel in (None: the key is the URI or the source).
struct Case {
    name: &'static str,
    lines: &'static str,
    key: Key,
}

#[derive(Clone, Copy, PartialEq)]
enum Key {
    Uri,
    Hdr(&'static str),
    Source,
    /// `url_param id`: the key in the query string.
    Param,
    /// `url_param id`: the key in a POST's form body (URL without it).
    Post,
}

const CASES: &[Case] = &[
    Case {
        name: "uri_map",
        lines: "balance uri",
        key: Key::Uri,
    },
    Case {
        name: "uri_map_djb2_aval",
        lines: "balance uri\n    hash-type map-based djb2 avalanche",
        key: Key::Uri,
    },
    Case {
        name: "uri_whole_crc32",
        lines: "balance uri whole\n    hash-type map-based crc32",
        key: Key::Uri,
    },
    Case {
        name: "uri_depth_len_wt6",
        lines: "balance uri depth 2 len 12\n    hash-type map-based wt6",
        key: Key::Uri,
    },
    Case {
        name: "uri_consistent",
        lines: "balance uri\n    hash-type consistent",
        key: Key::Uri,
    },
    Case {
        name: "uri_consistent_djb2",
        lines: "balance uri\n    hash-type consistent djb2",
        key: Key::Uri,
    },
    Case {
        name: "uri_consistent_wt6_aval",
        lines: "balance uri\n    hash-type consistent wt6 avalanche",
        key: Key::Uri,
    },
    Case {
        name: "hdr_map",
        lines: "balance hdr(X-Key)",
        key: Key::Hdr("X-Key"),
    },
    Case {
        name: "hdr_consistent_crc32",
        lines: "balance hdr(X-Key)\n    hash-type consistent crc32",
        key: Key::Hdr("X-Key"),
    },
    Case {
        name: "hdr_domain_map",
        lines: "balance hdr(X-Host) use_domain_only",
        key: Key::Hdr("X-Host"),
    },
    Case {
        name: "param_map",
        lines: "balance url_param id",
        key: Key::Param,
    },
    Case {
        name: "param_consistent",
        lines: "balance url_param id\n    hash-type consistent",
        key: Key::Param,
    },
    // HAProxy 2.6 hashes the body's parameter whether or not `check_post`
    // is there; `option http-buffer-request` makes the whole body be
    // there when the server is chosen, on both.
    Case {
        name: "param_post",
        lines: "balance url_param id\n    option http-buffer-request",
        key: Key::Post,
    },
    Case {
        name: "param_post_check",
        lines: "balance url_param id check_post 128\n    option http-buffer-request\n    hash-type consistent",
        key: Key::Post,
    },
    Case {
        name: "src_map",
        lines: "balance source",
        key: Key::Source,
    },
    Case {
        name: "src_consistent",
        lines: "balance source\n    hash-type consistent",
        key: Key::Source,
    },
    Case {
        name: "src_map_aval",
        lines: "balance source\n    hash-type map-based sdbm avalanche",
        key: Key::Source,
    },
];

/// Weights of the servers, in declaration order (a common divisor of 2 is
/// there on purpose: map-based divides it out).
const WEIGHTS: &[u32] = &[2, 4, 6, 2, 10];

struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn config(origins: &[Origin], bind: impl Fn(usize) -> String) -> String {
    let mut c = String::from(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n",
    );
    for (i, case) in CASES.iter().enumerate() {
        c.push_str(&format!(
            "frontend f_{n}\n    bind {b}\n    default_backend {n}\nbackend {n}\n    {l}\n",
            n = case.name,
            b = bind(i),
            l = case.lines
        ));
        for (o, w) in origins.iter().zip(WEIGHTS) {
            c.push_str(&format!("    server {} {} weight {w}\n", o.name, o.addr));
        }
    }
    c
}

/// The server that answered (the origin's body starts with its name).
fn who(r: &Resp) -> String {
    assert_eq!(r.status, 200, "{}", r.text());
    r.text().split(' ').next().unwrap_or("").to_string()
}

/// The keys of one case and the server each reached through `addr`.
fn route(addr: SocketAddr, key: Key, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if key == Key::Source {
        for i in 0..n {
            let src: std::net::Ipv4Addr = [
                127,
                1 + (i / 200) as u8,
                (i * 37 % 251) as u8,
                (i % 200 + 1) as u8,
            ]
            .into();
            let sock =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            sock.bind(&SocketAddr::new(src.into(), 0).into()).unwrap();
            sock.connect(&addr.into()).unwrap();
            let mut c = Client::from_stream(TcpStream::from(sock));
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            out.push((src.to_string(), who(&c.read_resp())));
        }
        return out;
    }
    let mut c = Client::connect(addr);
    for i in 0..n {
        let (k, req) = match key {
            Key::Uri => {
                let k = format!("/d{}/s{}/page{}.html?q={}", i % 7, i % 13, i, i * 31);
                (k.clone(), format!("GET {k} HTTP/1.1\r\nHost: t\r\n\r\n"))
            }
            Key::Hdr(h) => {
                let k = if h == "X-Host" {
                    format!("www{}.site{}.example{}.com", i % 3, i, i % 5)
                } else {
                    format!("user-{}-{}", i, i * 7919 % 1000)
                };
                (
                    k.clone(),
                    format!("GET /x HTTP/1.1\r\nHost: t\r\n{h}: {k}\r\n\r\n"),
                )
            }
            Key::Param => {
                let k = format!("user-{}-{}", i, i * 7919 % 1000);
                (
                    k.clone(),
                    format!("GET /x?a=1&id={k}&b=2 HTTP/1.1\r\nHost: t\r\n\r\n"),
                )
            }
            Key::Post => {
                // Some bodies without the parameter or not a form (the
                // value's first byte not a token character): no key,
                // round robin on both.
                let k = match i % 10 {
                    7 => "nothing=here".to_string(),
                    9 => "id=<b>".to_string(),
                    _ => format!("x=1&id=user-{}-{}&y=2", i, i * 7919 % 1000),
                };
                (
                    k.clone(),
                    format!(
                        "POST /x?a=1 HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{k}",
                        k.len()
                    ),
                )
            }
            Key::Source => unreachable!(),
        };
        c.send(req.as_bytes());
        out.push((k, who(&c.read_resp())));
    }
    out
}

fn wait_listening(addr: SocketAddr) {
    let t0 = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "haproxy did not listen on {addr}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn hash_balancing_matches_haproxy() {
    if !have("haproxy") {
        println!("SKIPPED hash_balancing_matches_haproxy: haproxy is not installed (apt-get install haproxy)");
        return;
    }
    let origins: Vec<Origin> = (1..=WEIGHTS.len())
        .map(|i| Origin::start(&format!("srv{i}"), Mode::Ok))
        .collect();
    let ports: Vec<u16> = CASES.iter().map(|_| free_port()).collect();
    let dir = scratch("lbhash");
    let hcfg = dir.join("haproxy.cfg");
    std::fs::write(
        &hcfg,
        config(&origins, |i| format!("127.0.0.1:{}", ports[i])),
    )
    .unwrap();
    let _hap = Haproxy(
        Command::new("haproxy")
            .args(["-db", "-f", hcfg.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy"),
    );
    let ebb = Ebb::start(&config(&origins, |_| "BIND".into()));
    assert_eq!(ebb.addrs.len(), CASES.len());
    for (i, case) in CASES.iter().enumerate() {
        let hap_addr: SocketAddr = format!("127.0.0.1:{}", ports[i]).parse().unwrap();
        wait_listening(hap_addr);
        let n = if case.key == Key::Source { 150 } else { 300 };
        let want = route(hap_addr, case.key, n);
        let got = route(ebb.addrs[i], case.key, n);
        let servers: std::collections::HashSet<&str> =
            want.iter().map(|(_, s)| s.as_str()).collect();
        assert!(
            servers.len() >= 3,
            "{}: haproxy used only {servers:?}",
            case.name
        );
        let diff: Vec<String> = want
            .iter()
            .zip(&got)
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, b)| format!("{} -> haproxy {} ebb {}", a.0, a.1, b.1))
            .collect();
        assert!(
            diff.is_empty(),
            "{}: {} of {n} keys differ, e.g. {:?}",
            case.name,
            diff.len(),
            &diff[..diff.len().min(5)]
        );
        println!("{}: {n} keys, same server in haproxy and ebb", case.name);
    }
}
