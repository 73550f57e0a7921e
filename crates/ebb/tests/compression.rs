//! Compression (`compression algo|type|offload`, `serve-files ...
//! precompressed`) end to end with curl and raw clients: what is
//! compressed, what is not, and the fields that come with it.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::*;

/// Text that compresses well, `n` bytes.
fn text(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| b"lorem ipsum dolor sit amet, consectetur adipiscing elit. "[i % 57])
        .collect()
}

/// An origin answering each path with a fixed raw response; it records
/// the request heads it received.
struct Scripted {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

fn resp(fields: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\n{fields}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn chunked_resp(fields: &str, body: &[u8]) -> Vec<u8> {
    let mut r =
        format!("HTTP/1.1 200 OK\r\n{fields}Transfer-Encoding: chunked\r\n\r\n").into_bytes();
    for c in body.chunks(3000) {
        r.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        r.extend_from_slice(c);
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"0\r\n\r\n");
    r
}

impl Scripted {
    fn start(routes: HashMap<&'static str, Vec<u8>>) -> Scripted {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let heads: Arc<Mutex<Vec<String>>> = Arc::default();
        let h2 = Arc::clone(&heads);
        let routes = Arc::new(routes);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let (h, routes) = (Arc::clone(&h2), Arc::clone(&routes));
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut tmp = [0u8; 8192];
                    loop {
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
                            buf.drain(..end + 4);
                            let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                            h.lock().unwrap().push(head);
                            let r = routes.get(path.as_str()).cloned().unwrap_or_else(|| {
                                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec()
                            });
                            if s.write_all(&r).is_err() {
                                return;
                            }
                        }
                        match s.read_retry(&mut tmp) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    }
                });
            }
        });
        Scripted { addr, heads }
    }
}

fn routes() -> HashMap<&'static str, Vec<u8>> {
    let big = text(20_000);
    let mut m = HashMap::new();
    m.insert(
        "/text",
        resp("Content-Type: text/plain\r\nETag: \"v1\"\r\n", &big),
    );
    m.insert(
        "/chunked",
        chunked_resp("Content-Type: text/html\r\n", &big),
    );
    m.insert("/small", resp("Content-Type: text/plain\r\n", &text(100)));
    m.insert("/http10", {
        let mut r = resp("Content-Type: text/plain\r\n", &big);
        r[..8].copy_from_slice(b"HTTP/1.0");
        r
    });
    m.insert("/image", resp("Content-Type: image/png\r\n", &big));
    m.insert(
        "/encoded",
        resp("Content-Type: text/plain\r\nContent-Encoding: br\r\n", &big),
    );
    m.insert(
        "/notransform",
        resp(
            "Content-Type: text/plain\r\nCache-Control: public, no-transform\r\n",
            &big,
        ),
    );
    m.insert(
        "/partial",
        {
            let mut r = b"HTTP/1.1 206 Partial Content\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-999/20000\r\nContent-Length: 1000\r\n\r\n"
                .to_vec();
            r.extend_from_slice(&big[..1000]);
            r
        },
    );
    m.insert("/big", resp("Content-Type: text/plain\r\n", &text(3 << 20)));
    m
}

fn proxy_cfg(origin: SocketAddr, extra: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend fe\n    bind BIND\n    default_backend be\n\
         backend be\n{extra}    server s1 {origin}\n"
    )
}

/// curl with `args`; (status, headers lowercased, body).
fn curl(args: &[&str]) -> (u16, String, Vec<u8>) {
    let d = scratch("curl");
    let hf = d.join("h");
    let out = Command::new("curl")
        .args(["-s", "-D", hf.to_str().unwrap()])
        .args(args)
        .output()
        .expect("curl");
    let h = std::fs::read_to_string(&hf).unwrap_or_default();
    let status = h
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, h.to_ascii_lowercase(), out.stdout)
}

#[test]
fn proxied_answers_are_compressed_for_curl() {
    let o = Scripted::start(routes());
    let e = Ebb::start(&proxy_cfg(o.addr, "    compression algo gzip br zstd\n"));
    let base = format!("http://{}", e.addr());
    for path in ["/text", "/chunked"] {
        let (st, h, body) = curl(&["--compressed", &format!("{base}{path}")]);
        assert_eq!(st, 200, "{path}");
        assert!(h.contains("content-encoding: "), "{path}: {h}");
        assert!(h.contains("vary: accept-encoding"), "{path}: {h}");
        assert!(!h.contains("content-length"), "{path}: {h}");
        assert_eq!(body, text(20_000), "{path}");
    }
    // The strong ETag becomes weak.
    let (_, h, _) = curl(&["-H", "Accept-Encoding: gzip", &format!("{base}/text")]);
    assert!(h.contains("content-encoding: gzip"), "{h}");
    assert!(h.contains("etag: w/\"v1\""), "{h}");
    // Each coding, by the client's choice.
    for (ae, ce) in [
        ("br", "br"),
        ("zstd", "zstd"),
        ("gzip;q=0.5, zstd;q=0.9", "zstd"),
    ] {
        let (_, h, _) = curl(&[
            "-H",
            &format!("Accept-Encoding: {ae}"),
            &format!("{base}/text"),
        ]);
        assert!(h.contains(&format!("content-encoding: {ce}")), "{ae}: {h}");
    }
    // Any size is compressed without `minsize-res` (HAProxy 2.6 has no
    // minimum), even 100 bytes.
    let (_, h, body) = curl(&["--compressed", &format!("{base}/small")]);
    assert!(h.contains("content-encoding: gzip"), "{h}");
    assert_eq!(body, text(100));
    // Without Accept-Encoding: as is, the strong ETag, and no Vary (as
    // HAProxy 2.6: reg-test compression/vary.vtc).
    let (_, h, body) = curl(&[&format!("{base}/text")]);
    assert!(!h.contains("content-encoding"), "{h}");
    assert!(!h.contains("vary") && h.contains("etag: \"v1\""), "{h}");
    assert_eq!(body, text(20_000));
}

#[test]
fn what_is_not_compressed() {
    let o = Scripted::start(routes());
    let e = Ebb::start(&proxy_cfg(
        o.addr,
        "    compression algo gzip\n    compression type text/\n    compression minsize-res 256\n",
    ));
    let base = format!("http://{}", e.addr());
    // ("/http10": an HTTP/1.0 answer. HAProxy 2.6, checked side by side
    // with curl: neither an HTTP/1.0 answer nor an HTTP/1.0 request
    // (`curl -0` below) gets compressed.)
    for path in [
        "/small",
        "/image",
        "/encoded",
        "/notransform",
        "/partial",
        "/http10",
    ] {
        let (_, h, _) = curl(&["-H", "Accept-Encoding: gzip", &format!("{base}{path}")]);
        let ce = h.lines().find(|l| l.starts_with("content-encoding"));
        let want = if path == "/encoded" {
            Some("content-encoding: br")
        } else {
            None
        };
        assert_eq!(ce.map(str::trim), want, "{path}: {h}");
    }
    // HEAD, a Range request, an HTTP/1.0 client: as is.
    let (_, h, _) = curl(&["-I", "-H", "Accept-Encoding: gzip", &format!("{base}/text")]);
    assert!(!h.contains("content-encoding"), "{h}");
    let (_, h, _) = curl(&[
        "-H",
        "Accept-Encoding: gzip",
        "-H",
        "Range: bytes=0-9",
        &format!("{base}/text"),
    ]);
    assert!(!h.contains("content-encoding"), "{h}");
    let (_, h, body) = curl(&["-0", "-H", "Accept-Encoding: gzip", &format!("{base}/text")]);
    assert!(!h.contains("content-encoding"), "{h}");
    assert_eq!(body.len(), 20_000);
}

#[test]
fn offload_removes_accept_encoding_toward_the_server() {
    let o = Scripted::start(routes());
    let e = Ebb::start(&proxy_cfg(
        o.addr,
        "    compression algo gzip\n    compression offload\n",
    ));
    let (_, h, body) = curl(&["--compressed", &format!("http://{}/text", e.addr())]);
    assert!(h.contains("content-encoding: gzip"), "{h}");
    assert_eq!(body, text(20_000));
    let heads = o.heads.lock().unwrap().clone();
    assert!(!heads.is_empty());
    assert!(
        heads
            .iter()
            .all(|h| !h.to_ascii_lowercase().contains("accept-encoding")),
        "{heads:?}"
    );
}

/// The head fields `compression algo identity` leaves on `/text` and
/// `/chunked` for a client sending no `Accept-Encoding` (curl without
/// `--compressed`): (transfer-encoding, content-length, content-encoding,
/// etag, vary), values lowercased, and the body's length.
fn identity_fields(base: &str, path: &str) -> (Vec<Option<String>>, usize) {
    let (st, h, body) = curl(&[&format!("{base}{path}")]);
    assert_eq!(st, 200, "{h}");
    let field = |n: &str| {
        h.lines()
            .find_map(|l| l.strip_prefix(&format!("{n}: ")))
            .map(|v| v.trim().to_string())
    };
    let f = [
        "transfer-encoding",
        "content-length",
        "content-encoding",
        "etag",
        "vary",
    ];
    (f.iter().map(|n| field(n)).collect(), body.len())
}

#[test]
fn identity_is_a_coding_that_rechunks() {
    // HAProxy 2.6 treats a chosen `identity` as any other algorithm
    // (reg-test compression/basic.vtc, c3): the bytes are unchanged but
    // the length goes, the answer is chunked, the ETag weakened and Vary
    // added; there is no Content-Encoding.
    let o = Scripted::start(routes());
    let e = Ebb::start(&proxy_cfg(
        o.addr,
        "    compression algo identity
",
    ));
    let base = format!("http://{}", e.addr());
    let some = |v: &str| Some(v.to_string());
    let want_text = vec![
        some("chunked"),
        None,
        None,
        some("w/\"v1\""),
        some("accept-encoding"),
    ];
    let got = identity_fields(&base, "/text");
    assert_eq!(got, (want_text.clone(), 20_000));
    let want_chunked = vec![some("chunked"), None, None, None, some("accept-encoding")];
    assert_eq!(
        identity_fields(&base, "/chunked"),
        (want_chunked.clone(), 20_000)
    );
    // A client asking for gzip gets identity too (the only coding
    // offered).
    let (_, h, _) = curl(&["-H", "Accept-Encoding: gzip", &format!("{base}/text")]);
    assert!(h.contains("transfer-encoding: chunked"), "{h}");
    let port = free_port();
    let hap_cfg = proxy_cfg(
        o.addr,
        "    compression algo identity
",
    )
    .replace("BIND", &format!("127.0.0.1:{port}"));
    if let Some(_h) = haproxy_with("comp-identity", &hap_cfg) {
        let hbase = format!("http://127.0.0.1:{port}");
        assert_eq!(identity_fields(&hbase, "/text"), (want_text, 20_000));
        assert_eq!(identity_fields(&hbase, "/chunked"), (want_chunked, 20_000));
    }
}

#[test]
fn a_big_answer_is_compressed_in_slices() {
    // 3 MiB of text, compressed a slice per scheduler run (the
    // connection wakes itself between slices): all of it arrives, whole.
    let o = Scripted::start(routes());
    let e = Ebb::start(&proxy_cfg(o.addr, "    compression algo gzip\n"));
    let base = format!("http://{}", e.addr());
    let (st, h, body) = curl(&["--compressed", &format!("{base}/big")]);
    assert_eq!(st, 200);
    assert!(h.contains("content-encoding: gzip"), "{h}");
    assert_eq!(body, text(3 << 20));
}

#[test]
fn compression_keywords_are_checked() {
    let d = scratch("comp-cfg");
    for (bad, want) in [
        (
            "    compression algo lzma\n",
            "unknown compression algorithm 'lzma'",
        ),
        (
            "    compression algo deflate raw-deflate\n",
            "both answer to 'deflate'",
        ),
        (
            "    compression direction sideways\n",
            "expects 'request', 'response', or 'both'",
        ),
        (
            "    compression algo-req gzip br\n",
            "expects exactly one algorithm",
        ),
        (
            "    compression type-req\n",
            "expects at least one MIME type",
        ),
        ("    compression\n", "expects algo, algo-req, type"),
        ("    compression minsize-res\n", "expects a size"),
    ] {
        let p = d.join("c.cfg");
        std::fs::write(&p, format!("defaults\n    mode http\n{bad}")).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", p.to_str().unwrap()], &d);
        assert_ne!(code, 0, "{bad}");
        assert!(
            err.contains("c.cfg:3") && err.contains(want),
            "{bad}: {err}"
        );
    }
    let p = d.join("c.cfg");
    std::fs::write(&p, "defaults\n    mode http\n    compression offload\n").unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", p.to_str().unwrap()], &d);
    assert_ne!(code, 0);
    assert!(err.contains("c.cfg:3"), "{err}");
}

fn files_cfg(dir: &std::path::Path, fe_extra: &str, sf_extra: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n\
         frontend fe\n    bind BIND\n{fe_extra}    default_backend files\n\
         backend files\n    serve-files {}{sf_extra}\n",
        dir.display()
    )
}

#[test]
fn files_are_compressed_on_the_fly() {
    let d = scratch("comp-files");
    std::fs::write(d.join("small.txt"), text(5_000)).unwrap();
    std::fs::write(d.join("big.html"), text(300_000)).unwrap();
    std::fs::write(d.join("tiny.txt"), text(100)).unwrap();
    std::fs::write(d.join("pic.png"), text(5_000)).unwrap();
    let e = Ebb::start(&files_cfg(
        &d,
        "    compression algo gzip br\n    compression type text/\n    compression minsize-res 256\n",
        "",
    ));
    let base = format!("http://{}", e.addr());
    for (path, n) in [("/small.txt", 5_000), ("/big.html", 300_000)] {
        let (st, h, body) = curl(&["--compressed", &format!("{base}{path}")]);
        assert_eq!(st, 200);
        assert!(h.contains("content-encoding: "), "{path}: {h}");
        assert!(h.contains("transfer-encoding: chunked"), "{path}: {h}");
        assert!(h.contains("vary: accept-encoding"), "{path}: {h}");
        assert!(h.contains("etag: w/\""), "{path}: {h}");
        assert_eq!(body, text(n), "{path}");
    }
    // Keep-alive goes on after a compressed file: two on one connection.
    let url = format!("{base}/big.html");
    let (_, _, both) = curl(&["--compressed", &url, &url]);
    assert_eq!(both.len(), 600_000);
    // Not compressed: too small, a type not listed, HEAD, a Range.
    for path in ["/tiny.txt", "/pic.png"] {
        let (_, h, _) = curl(&["-H", "Accept-Encoding: gzip", &format!("{base}{path}")]);
        assert!(!h.contains("content-encoding"), "{path}: {h}");
    }
    let (_, h, _) = curl(&[
        "-I",
        "-H",
        "Accept-Encoding: gzip",
        &format!("{base}/small.txt"),
    ]);
    assert!(!h.contains("content-encoding"), "{h}");
    let (st, h, body) = curl(&[
        "-H",
        "Accept-Encoding: gzip",
        "-r",
        "0-9",
        &format!("{base}/small.txt"),
    ]);
    assert_eq!(st, 206);
    assert!(!h.contains("content-encoding"), "{h}");
    assert_eq!(body, &text(10)[..]);
    // Without Accept-Encoding: as is, the strong ETag, ranges offered.
    let (_, h, body) = curl(&[&format!("{base}/small.txt")]);
    assert!(
        !h.contains("content-encoding") && !h.contains("vary"),
        "{h}"
    );
    assert!(
        h.contains("etag: \"") && h.contains("accept-ranges: bytes"),
        "{h}"
    );
    assert_eq!(body, text(5_000));
}

#[test]
fn precompressed_siblings_are_served_as_they_are() {
    let d = scratch("comp-pre");
    let plain = text(100_000);
    std::fs::write(d.join("app.js"), &plain).unwrap();
    // Siblings with recognisable bytes: served byte for byte, never
    // compressed again.
    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&plain).unwrap();
        e.finish().unwrap()
    };
    std::fs::write(d.join("app.js.gz"), &gz).unwrap();
    let zst = zstd::stream::encode_all(&plain[..], 19).unwrap();
    std::fs::write(d.join("app.js.zst"), &zst).unwrap();
    std::fs::write(d.join("only.css"), text(1_000)).unwrap();
    let e = Ebb::start(&files_cfg(
        &d,
        "    compression algo gzip\n",
        " precompressed br zstd gzip",
    ));
    let url = format!("http://{}/app.js", e.addr());
    let (st, h, body) = curl(&["-H", "Accept-Encoding: gzip", &url]);
    assert_eq!(st, 200);
    assert!(h.contains("content-encoding: gzip"), "{h}");
    assert!(h.contains(&format!("content-length: {}", gz.len())), "{h}");
    assert!(h.contains("vary: accept-encoding"), "{h}");
    assert_eq!(body, gz);
    // The client's weights, then its order, choose among the siblings
    // present (br has none); `*` takes the first configured one present.
    for ae in ["br, zstd, gzip", "gzip;q=0.5, zstd", "*"] {
        let (_, h, body) = curl(&["-H", &format!("Accept-Encoding: {ae}"), &url]);
        assert!(h.contains("content-encoding: zstd"), "{ae}: {h}");
        assert_eq!(body, zst, "{ae}");
    }
    // No sibling accepted: the file itself (compressed on the fly by the
    // frontend's policy for gzip only, so here as is).
    let (_, h, body) = curl(&["-H", "Accept-Encoding: br", &url]);
    assert!(!h.contains("content-encoding"), "{h}");
    assert!(h.contains("vary: accept-encoding"), "{h}");
    assert_eq!(body, plain);
    // A file without siblings is compressed on the fly.
    let (_, h, body) = curl(&["--compressed", &format!("http://{}/only.css", e.addr())]);
    assert!(h.contains("content-encoding: gzip"), "{h}");
    assert_eq!(body, text(1_000));
    // A large sibling (past the 32 KiB kept in memory) goes by sendfile,
    // byte for byte: ebb does not read or check what it holds.
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(d.join("big.txt"), text(1_000)).unwrap();
    std::fs::write(d.join("big.txt.gz"), &big).unwrap();
    let (_, h, body) = curl(&[
        "-H",
        "Accept-Encoding: gzip",
        &format!("http://{}/big.txt", e.addr()),
    ]);
    assert!(h.contains("content-encoding: gzip"), "{h}");
    assert!(body == big, "{} bytes", body.len());
    // A bad coding name is refused at start.
    let p = d.join("bad.cfg");
    std::fs::write(&p, files_cfg(&d, "", " precompressed lzma")).unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", p.to_str().unwrap()], &d);
    assert_ne!(code, 0);
    assert!(err.contains("bad.cfg:5") && err.contains("'lzma'"), "{err}");
}

#[test]
fn directory_listings_are_compressed_but_not_return_answers() {
    let d = scratch("comp-list");
    std::fs::write(d.join("a-file-with-a-long-name.txt"), "x").unwrap();
    let e = Ebb::start(&files_cfg(&d, "    compression algo gzip\n", " listing on"));
    let (st, h, body) = curl(&["--compressed", &format!("http://{}/", e.addr())]);
    assert_eq!(st, 200);
    assert!(h.contains("content-encoding: gzip"), "{h}");
    assert!(String::from_utf8_lossy(&body).contains("a-file-with-a-long-name.txt"));
    // `http-request return` answers are sent as they are, as HAProxy 2.6
    // sends them (its compression filter does not see them).
    let cfg = format!(
        "defaults\n    mode http\n    timeout client 10s\n\
         frontend fe\n    bind BIND\n    compression algo gzip\n\
         http-request return status 200 content-type text/plain string {}\n",
        "x".repeat(2000)
    );
    let e = Ebb::start(&cfg);
    let (st, h, body) = curl(&["--compressed", &format!("http://{}/", e.addr())]);
    assert_eq!(st, 200);
    assert!(!h.contains("content-encoding"), "{h}");
    assert_eq!(body.len(), 2000);
}

/// A Python origin that records every request it gets: `N.head` (the
/// head as received) and `N.body` (the body with its chunked framing
/// removed, still coded), then answers 200 with 5,000 bytes of text. It
/// prints its port on its first line.
const RECORDER: &str = r#"
import socket, sys, threading, os
out = sys.argv[1]
lock = threading.Lock()
count = [0]
def read_line(f):
    line = f.readline()
    if not line:
        raise EOFError
    return line
def serve(conn):
    f = conn.makefile("rb")
    try:
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                head += read_line(f)
            fields = {}
            for l in head.split(b"\r\n")[1:]:
                if b":" in l:
                    k, v = l.split(b":", 1)
                    fields[k.strip().lower()] = v.strip()
            body = b""
            if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
                while True:
                    size = int(read_line(f).split(b";")[0], 16)
                    if size == 0:
                        while read_line(f) != b"\r\n":
                            pass
                        break
                    body += f.read(size)
                    f.read(2)
            elif b"content-length" in fields:
                body = f.read(int(fields[b"content-length"]))
            with lock:
                count[0] += 1
                n = count[0]
            with open(os.path.join(out, "%d.body" % n), "wb") as w:
                w.write(body)
            with open(os.path.join(out, "%d.head" % n), "wb") as w:
                w.write(head)
            text = b"recorded request body and answered with text " * 110
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(text) + text)
    except (EOFError, OSError, ValueError):
        pass
    finally:
        conn.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

struct Recorder {
    child: std::process::Child,
    addr: SocketAddr,
    dir: std::path::PathBuf,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Recorder {
    fn start() -> Recorder {
        use std::io::BufRead;
        let dir = scratch("recorder");
        let mut child = Command::new("python3")
            .args(["-c", RECORDER, dir.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("the recorder's port");
        Recorder {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
        }
    }

    /// Head (lowercased) and body of the n-th request (from 1); waits for
    /// the files (the answer is sent after they are written).
    fn request(&self, n: usize) -> (String, Vec<u8>) {
        let h = self.dir.join(format!("{n}.head"));
        wait_until(&format!("request {n} at the recorder"), || h.exists());
        let head = std::fs::read_to_string(&h).unwrap().to_ascii_lowercase();
        (
            head,
            std::fs::read(self.dir.join(format!("{n}.body"))).unwrap(),
        )
    }
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut plain)
        .expect("a gzip body");
    plain
}

/// `compression direction request` (HAProxy 2.8's keyword; 2.6 has
/// none): curl's request body reaches the server gzip-coded and chunked,
/// with `Content-Encoding: gzip` and no Content-Length, whether curl sent
/// a length or chunks; requests that do not qualify go as they are, and
/// answers are not compressed (responses are not in the direction).
#[test]
fn request_bodies_are_compressed_toward_the_server() {
    let o = Recorder::start();
    let e = Ebb::start(&proxy_cfg(
        o.addr,
        "    compression direction request\n    compression algo-req gzip\n    \
         compression type-req text/ application/json\n    compression algo gzip\n",
    ));
    let d = scratch("req-body");
    let file = d.join("body.txt");
    std::fs::write(&file, text(70_000)).unwrap();
    let data = format!("@{}", file.display());
    let url = format!("http://{}/up", e.addr());
    let post = |extra: &[&str]| {
        let mut a = vec!["--data-binary", &data, "-H", "Accept-Encoding: gzip"];
        a.extend_from_slice(extra);
        a.push(&url);
        curl(&a)
    };
    // 1. With a Content-Length.
    let (st, h, body) = post(&["-H", "Content-Type: text/plain"]);
    assert_eq!(st, 200, "{h}");
    // Not compressed back: `direction request` leaves answers alone.
    assert!(!h.contains("content-encoding"), "{h}");
    assert_eq!(body.len(), 4950);
    let (head, got) = o.request(1);
    assert!(head.contains("content-encoding: gzip\r\n"), "{head}");
    assert!(head.contains("transfer-encoding: chunked\r\n"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    assert!(got.len() < 70_000 / 4, "coded: {} bytes", got.len());
    assert_eq!(gunzip(&got), text(70_000));
    // 2. Chunked from the client.
    let (st, _, _) = post(&[
        "-H",
        "Content-Type: application/json",
        "-H",
        "Transfer-Encoding: chunked",
    ]);
    assert_eq!(st, 200);
    let (head, got) = o.request(2);
    assert!(head.contains("content-encoding: gzip\r\n"), "{head}");
    assert_eq!(gunzip(&got), text(70_000));
    // 3. What goes as it is: a type not in `type-req`, no Content-Type,
    //    a body already coded, an HTTP/1.0 request (HAProxy: only 1.1).
    let cases: [&[&str]; 4] = [
        &["-H", "Content-Type: image/png"],
        &["-H", "Content-Type:"],
        &[
            "-H",
            "Content-Type: text/plain",
            "-H",
            "Content-Encoding: br",
        ],
        &["-0", "-H", "Content-Type: text/plain"],
    ];
    for (i, extra) in cases.iter().enumerate() {
        let (st, _, _) = post(extra);
        assert_eq!(st, 200, "{extra:?}");
        let (head, got) = o.request(3 + i);
        assert!(
            head.contains("content-length: 70000\r\n"),
            "{extra:?}: {head}"
        );
        assert!(
            !head.contains("content-encoding: gzip"),
            "{extra:?}: {head}"
        );
        assert_eq!(got, text(70_000), "{extra:?}");
    }
    // 4. A request without a body is not touched.
    let (st, _, _) = curl(&["-H", "Content-Type: text/plain", &url]);
    assert_eq!(st, 200);
    let (head, got) = o.request(7);
    assert!(
        !head.contains("content-encoding") && !head.contains("transfer-encoding"),
        "{head}"
    );
    assert!(got.is_empty());
}

/// `compression direction both`: the request body coded toward the
/// server (with `algo-req br`, ebb's addition) and the answer coded
/// toward the client; a frontend's `direction request` and a backend's
/// response-side lines add up (HAProxy ORs the two proxies' directions).
#[test]
fn both_directions_and_frontend_backend_merge() {
    let o = Recorder::start();
    for (fe, be) in [
        (
            "",
            "    compression direction both\n    compression algo-req br\n    compression algo gzip\n",
        ),
        (
            "    compression direction request\n    compression algo-req br\n",
            "    compression algo gzip\n",
        ),
    ] {
        let cfg = format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
             frontend fe\n    bind BIND\n{fe}    default_backend be\n\
             backend be\n{be}    server s1 {}\n",
            o.addr
        );
        let e = Ebb::start(&cfg);
        let (st, h, body) = curl(&[
            "--compressed",
            "--data-binary",
            "some text to code, some text to code, some text to code",
            &format!("http://{}/both", e.addr()),
        ]);
        assert_eq!(st, 200, "{h}");
        assert!(h.contains("content-encoding: gzip"), "{fe}{be}: {h}");
        assert_eq!(body.len(), 4950);
    }
    for n in [1, 2] {
        let (head, got) = o.request(n);
        assert!(head.contains("content-encoding: br\r\n"), "{head}");
        let mut plain = Vec::new();
        brotli::BrotliDecompress(&mut &got[..], &mut plain).expect("a brotli body");
        assert_eq!(
            plain,
            b"some text to code, some text to code, some text to code"
        );
    }
}

/// A broken chunked body on its way to be compressed: the client gets a
/// 400 (nothing sane can be coded and sent on), ebb goes on serving, and
/// the server never sees a coded body that ends in garbage.
#[test]
fn a_broken_chunked_body_to_compress_is_a_400() {
    let o = Recorder::start();
    let e = Ebb::start(&proxy_cfg(
        o.addr,
        "    compression direction request\n    compression algo-req gzip\n",
    ));
    let r = raw(
        e.addr(),
        b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
    )
    .expect("an answer");
    assert_eq!(r.status, 400);
    // Still serving, and the next good body is coded whole.
    let (st, _, _) = curl(&[
        "--data-binary",
        "fine text",
        &format!("http://{}/ok", e.addr()),
    ]);
    assert_eq!(st, 200);
    // (The recorder numbers only whole requests: the cut one is not one.)
    let (head, got) = o.request(1);
    assert!(head.contains("post /ok"), "{head}");
    assert_eq!(gunzip(&got), b"fine text");
}

/// Reads a chunked gzip answer from `s` (appending to `raw`) until what
/// its chunks hold so far decodes to text containing `want`; a read that
/// times out fails the test.
fn read_until_decoded(s: &mut std::net::TcpStream, raw: &mut Vec<u8>, want: &[u8]) {
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let mut coded = Vec::new();
            let mut cd = ebb::http1::ChunkedDecoder::default();
            let _ = cd.decode_to_vec(&raw[p + 4..], &mut coded);
            let mut d = flate2::Decompress::new_gzip(15);
            let mut plain = Vec::with_capacity(1 << 16);
            let _ = d.decompress_vec(&coded, &mut plain, flate2::FlushDecompress::Sync);
            if plain.windows(want.len()).any(|w| w == want) {
                return;
            }
        }
        let n = s
            .read_retry(&mut tmp)
            .expect("the compressed bytes before the read timeout");
        assert!(
            n > 0,
            "closed early after {:?}",
            String::from_utf8_lossy(raw)
        );
        raw.extend_from_slice(&tmp[..n]);
    }
}

#[test]
fn a_paused_answer_is_flushed_to_the_client() {
    // The server sends a head and a first event, then waits until the
    // client has decoded that event before it sends the rest: ebb must
    // flush what it compressed when the server pauses (a streamed answer
    // is never held back by the encoder), and the stream goes on after.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = l.local_addr().unwrap();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let mut buf = [0u8; 4096];
        let mut head = Vec::new();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read_retry(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let first = b"event: one\ndata: hello hello hello\n\n";
        let mut r = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        r.extend_from_slice(format!("{:x}\r\n", first.len()).as_bytes());
        r.extend_from_slice(first);
        r.extend_from_slice(b"\r\n");
        let _ = s.write_all(&r);
        // Wait for the test's word (it has decoded the first event).
        if go_rx.recv().is_err() {
            return;
        }
        let second = b"event: two\ndata: world\n\n";
        let mut r = format!("{:x}\r\n", second.len()).into_bytes();
        r.extend_from_slice(second);
        r.extend_from_slice(b"\r\n0\r\n\r\n");
        let _ = s.write_all(&r);
    });
    let e = Ebb::start(&proxy_cfg(origin, "    compression algo gzip\n"));
    let mut s = std::net::TcpStream::connect(e.addr()).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    s.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    read_until_decoded(&mut s, &mut raw, b"hello hello hello\n\n");
    let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip"), "{head}");
    go_tx.send(()).unwrap();
    read_until_decoded(&mut s, &mut raw, b"data: world\n\n");
    // The whole body, to its last chunk, decodes to both events.
    while !raw.ends_with(b"0\r\n\r\n") {
        let mut tmp = [0u8; 4096];
        let n = s.read_retry(&mut tmp).unwrap();
        assert!(n > 0, "closed early");
        raw.extend_from_slice(&tmp[..n]);
    }
    let start = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(
        gunzip_chunked(&raw[start..]),
        b"event: one\ndata: hello hello hello\n\nevent: two\ndata: world\n\n"
    );
}

/// A whole chunked body holding one gzip stream, decoded.
fn gunzip_chunked(body: &[u8]) -> Vec<u8> {
    let mut coded = Vec::new();
    let mut cd = ebb::http1::ChunkedDecoder::default();
    let (_, done) = cd.decode_to_vec(body, &mut coded).unwrap();
    assert!(done, "a whole chunked body");
    gunzip(&coded)
}

/// `compression direction request` flushes a coded upload as it does an
/// answer: when the client pauses (its bytes ran out and none came for a
/// tick), not at every read. The client sends a first part and waits
/// until the server has decoded it (the pause was flushed), then the
/// rest, 2 MiB in one write: read by ebb 16 KiB at a time, it used to be
/// flushed at every read, each flush an empty stored block (bytes 00 00
/// ff ff) in the coded body, at least 128 of them; now only pauses are
/// (a few at most on a loaded machine, where the sender may stall).
#[test]
fn a_compressed_upload_is_flushed_at_pauses_only() {
    let first = b"first part of the upload, then a pause. ".repeat(20);
    let rest = text(2 << 20);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let want = first.clone();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let mut raw = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut told = false;
        loop {
            let n = match s.read_retry(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            raw.extend_from_slice(&buf[..n]);
            let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let mut coded = Vec::new();
            let mut cd = ebb::http1::ChunkedDecoder::default();
            let done = matches!(cd.decode_to_vec(&raw[p + 4..], &mut coded), Ok((_, true)));
            if !told {
                let mut d = flate2::Decompress::new_gzip(15);
                let mut plain = Vec::with_capacity(1 << 16);
                let _ = d.decompress_vec(&coded, &mut plain, flate2::FlushDecompress::Sync);
                if plain == want {
                    told = true;
                    let _ = tx.send(Vec::new());
                }
            }
            if done {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                let _ = tx.send(coded);
                return;
            }
        }
    });
    let e = Ebb::start(&proxy_cfg(
        origin,
        "    compression direction request\n    compression algo-req gzip\n",
    ));
    let mut s = std::net::TcpStream::connect(e.addr()).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    let head = format!(
        "POST /up HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        first.len() + rest.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&first).unwrap();
    // The first part reaches the server decodable while the client waits.
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the first part, flushed, at the server");
    assert!(got.is_empty());
    s.write_all(&rest).unwrap();
    let coded = rx
        .recv_timeout(std::time::Duration::from_secs(300))
        .expect("the whole coded body at the server");
    let mut answer = [0u8; 256];
    let n = s.read_retry(&mut answer).unwrap();
    assert!(answer[..n].starts_with(b"HTTP/1.1 200"));
    let mut whole = first.clone();
    whole.extend_from_slice(&rest);
    assert_eq!(gunzip(&coded), whole);
    let flushes = coded
        .windows(4)
        .filter(|w| *w == [0, 0, 0xff, 0xff])
        .count();
    assert!(
        (1..=32).contains(&flushes),
        "{flushes} flushes in {} coded bytes",
        coded.len()
    );
}

/// What a client sees of one answer: status, the coding, ETag, Vary, the
/// framing, whether it has an `Age`, and whether its (decoded) body is
/// the text.
fn seen(h: &str, body: &[u8], status: u16, text: &[u8]) -> String {
    let field = |n: &str| {
        h.lines()
            .find_map(|l| l.strip_prefix(n).map(|v| v.trim().to_string()))
            .unwrap_or_default()
    };
    let framing = if h.contains("transfer-encoding: chunked") {
        "chunked"
    } else if h.contains("content-length:") {
        "length"
    } else {
        "none"
    };
    let decoded = if field("content-encoding:") == "gzip" {
        gunzip(body)
    } else {
        body.to_vec()
    };
    format!(
        "{status} ce={} etag={} vary={} {framing} age={} body={}",
        field("content-encoding:"),
        field("etag:"),
        field("vary:"),
        h.contains("\nage:"),
        if decoded == text {
            "text"
        } else if decoded.is_empty() {
            "empty"
        } else {
            "other"
        },
    )
}

/// A server answering `/c` with 3000 bytes of text, cacheable, with a
/// strong ETag; the text.
fn cached_origin() -> (Vec<u8>, Scripted) {
    let body = text(3000);
    let mut m = HashMap::new();
    m.insert(
        "/c",
        resp(
            "Content-Type: text/plain\r\nCache-Control: max-age=60\r\nETag: \"v1\"\r\n",
            &body,
        ),
    );
    (body, Scripted::start(m))
}

/// A backend with a cache and gzip compression in front of `origin`,
/// `rules` (whole lines) before its server line.
fn cache_comp_cfg(bind: &str, origin: SocketAddr, rules: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         cache c1\n    total-max-size 4\n    max-age 60\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    filter cache c1\n    filter compression\n    compression algo gzip\n\
         \x20   http-request cache-use c1\n    http-response cache-store c1\n{rules}    server s1 {origin}\n"
    )
}

/// What `run` sees of haproxy 2.6 started with `cfg` (given its bind
/// address) on a free port; `None` when haproxy is not installed.
fn beside_haproxy(
    name: &str,
    cfg: &dyn Fn(&str) -> String,
    run: &dyn Fn(String) -> Vec<String>,
) -> Option<Vec<String>> {
    if !have("haproxy") {
        return None;
    }
    let d = scratch(name);
    let port = free_port();
    std::fs::write(d.join("h.cfg"), cfg(&format!("127.0.0.1:{port}"))).unwrap();
    let mut h = std::process::Command::new("haproxy")
        .args(["-db", "-f", d.join("h.cfg").to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("haproxy listening", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let got = run(format!("http://127.0.0.1:{port}"));
    let _ = h.kill();
    let _ = h.wait();
    Some(got)
}

/// A cache hit goes through the backend's compression as a server's
/// answer does (HAProxy 2.6's compression filter comes after its cache
/// filter): a hit for a client accepting gzip is compressed, with the
/// weak ETag and Vary; a hit for one that does not is sent as stored,
/// with the server's ETag (which the stored head keeps, so a conditional
/// request gets its 304). Side by side with haproxy 2.6. Before, ebb sent
/// every hit uncompressed and stored no ETag for an answer it compressed.
#[test]
fn cache_hits_are_compressed_as_haproxy_compresses_them() {
    let (body, o) = cached_origin();
    let cfg = |bind: &str| cache_comp_cfg(bind, o.addr, "");
    let run = |base: String| -> Vec<String> {
        let url = format!("{base}/c");
        let gz = ["-H", "Accept-Encoding: gzip"];
        let mut out = Vec::new();
        for args in [
            &gz[..],
            &gz[..],
            &[][..],
            &["-H", "If-None-Match: \"v1\""][..],
        ] {
            let mut a: Vec<&str> = args.to_vec();
            a.push(&url);
            let (st, h, b) = curl(&a);
            out.push(seen(&h, &b, st, &body));
        }
        out
    };
    let e = Ebb::start(&cfg("BIND"));
    let got = run(format!("http://{}", e.addr()));
    drop(e);
    let want = [
        // (curl's heads are read lowercased.)
        "200 ce=gzip etag=w/\"v1\" vary=accept-encoding chunked age=false body=text",
        "200 ce=gzip etag=w/\"v1\" vary=accept-encoding chunked age=true body=text",
        "200 ce= etag=\"v1\" vary= length age=true body=text",
        "304 ce= etag=\"v1\" vary= length age=true body=empty",
    ];
    assert_eq!(got, want);
    if let Some(hgot) = beside_haproxy("cachecomp-h", &cfg, &run) {
        assert_eq!(got, hgot, "ebb and haproxy 2.6");
    }
}

/// The `http-response` rules see a cache hit's head as stored: HAProxy
/// 2.6's compression filter edits the head (`Content-Encoding`, the weak
/// ETag, `Vary`) after the response rules, on a hit as on a server's
/// answer. Rules copy what they see into `X-` fields, and on hits (they
/// carry `Age`) replace the ETag: the compressed hit's ETag is the weak
/// form of the one the rules left. The `http-after-response` rules run
/// before the compression too (HAProxy's http_process_res_common).
/// Side by side with haproxy 2.6. Before, ebb compressed the hit's head
/// first: its rules saw `gzip`, `W/"v1"` and `Accept-Encoding`, and the
/// client got the rules' ETag strong.
#[test]
fn response_rules_see_a_cache_hit_before_its_compression() {
    let (body, o) = cached_origin();
    let rules = "    http-response set-header X-CE \"%[res.hdr(content-encoding)]\"\n\
         \x20   http-response set-header X-ETag \"%[res.hdr(etag)]\"\n\
         \x20   http-response set-header X-Vary \"%[res.hdr(vary)]\"\n\
         \x20   http-response set-header ETag '\"hit\"' if { res.hdr(age) -m found }\n\
         \x20   http-after-response set-header X-After \"%[res.hdr(content-encoding)],%[res.hdr(etag)]\"\n";
    let cfg = |bind: &str| cache_comp_cfg(bind, o.addr, rules);
    let run = |base: String| -> Vec<String> {
        let url = format!("{base}/c");
        let mut out = Vec::new();
        for args in [
            &["-H", "Accept-Encoding: gzip"][..],
            &["-H", "Accept-Encoding: gzip"][..],
            &[][..],
        ] {
            let mut a: Vec<&str> = args.to_vec();
            a.push(&url);
            let (st, h, b) = curl(&a);
            let field = |n: &str| {
                h.lines()
                    .find_map(|l| l.strip_prefix(n).map(|v| v.trim().to_string()))
                    .unwrap_or_default()
            };
            out.push(format!(
                "{} rules saw ce={} etag={} vary={} after {}",
                seen(&h, &b, st, &body),
                field("x-ce:"),
                field("x-etag:"),
                field("x-vary:"),
                field("x-after:"),
            ));
        }
        out
    };
    let e = Ebb::start(&cfg("BIND"));
    let got = run(format!("http://{}", e.addr()));
    drop(e);
    let want = [
        // The miss: the server's head, compressed after the rules.
        "200 ce=gzip etag=w/\"v1\" vary=accept-encoding chunked age=false body=text \
         rules saw ce= etag=\"v1\" vary= after ,\"v1\"",
        // The hits: the stored head, compressed after the rules (which
        // set the ETag that is then weakened).
        "200 ce=gzip etag=w/\"hit\" vary=accept-encoding chunked age=true body=text \
         rules saw ce= etag=\"v1\" vary= after ,\"hit\"",
        "200 ce= etag=\"hit\" vary= length age=true body=text \
         rules saw ce= etag=\"v1\" vary= after ,\"hit\"",
    ];
    assert_eq!(got, want);
    if let Some(hgot) = beside_haproxy("cacherules-h", &cfg, &run) {
        assert_eq!(got, hgot, "ebb and haproxy 2.6");
    }
}
