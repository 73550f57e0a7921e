//! Static files through the real binary: default mode, traversal attempts,
//! symlinks, ranges, conditionals, HEAD, methods, large files.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Command;

use common::*;

fn site(d: &Path) {
    std::fs::create_dir_all(d.join("www/sub")).unwrap();
    std::fs::write(d.join("www/index.html"), "<h1>home</h1>\n").unwrap();
    std::fs::write(d.join("www/a.txt"), "0123456789").unwrap();
    std::fs::write(d.join("www/sub/page.css"), "body{}").unwrap();
    std::fs::write(d.join("secret.txt"), "do not serve").unwrap();
    std::os::unix::fs::symlink(d.join("secret.txt"), d.join("www/out.txt")).unwrap();
    std::os::unix::fs::symlink(d.join("www/a.txt"), d.join("www/in.txt")).unwrap();
}

fn start_site(extra: &str) -> (Ebb, std::path::PathBuf) {
    let d = scratch("site");
    site(&d);
    let cfg = format!(
        "defaults\n mode http\n timeout client 5s\nfrontend fe\n bind BIND\n default_backend files\nbackend files\n serve-files \"{}\" {extra}\n",
        d.join("www").display()
    );
    (Ebb::start(&cfg), d)
}

#[test]
fn serves_files_with_types_and_validators() {
    let (e, _d) = start_site("max-age 60");
    let r = get(e.addr(), "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "<h1>home</h1>\n");
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("cache-control"), Some("max-age=60"));
    assert!(r.header("etag").is_some());
    assert!(r.header("last-modified").is_some());
    let r = get(e.addr(), "/sub/page.css");
    assert_eq!(r.header("content-type"), Some("text/css; charset=utf-8"));
    assert_eq!(r.text(), "body{}");
    let r = get(e.addr(), "/sub");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/sub/"));
    assert_eq!(get(e.addr(), "/sub/").status, 403); // no index, no listing
    assert_eq!(get(e.addr(), "/missing.txt").status, 404);
}

#[test]
fn traversal_and_symlinks_are_refused() {
    let (e, _d) = start_site("");
    for (p, st) in [
        ("/../secret.txt", 403),
        ("/sub/../../secret.txt", 403),
        ("/%2e%2e/secret.txt", 403),
        ("/sub%2f..%2f..%2fsecret.txt", 404),
        ("/a.txt%00.html", 404),
        ("/out.txt", 403),
    ] {
        let r = get(e.addr(), p);
        assert_eq!(r.status, st, "{p}");
        assert!(!r.text().contains("do not serve"), "{p}");
    }
    // A symlink inside the root is fine.
    assert_eq!(get(e.addr(), "/in.txt").text(), "0123456789");
    // Dot segments that stay inside resolve.
    assert_eq!(get(e.addr(), "/sub/../a.txt").text(), "0123456789");
    // A last `.` segment names a directory, as a trailing slash does: not
    // the file before it (RFC 3986's dot-segment removal keeps the `/`).
    assert_eq!(get(e.addr(), "/a.txt/").status, 404);
    assert_eq!(get(e.addr(), "/a.txt/.").status, 404);
    assert_eq!(get(e.addr(), "/a.txt/%2e").status, 404);
    assert_eq!(get(e.addr(), "/sub/.").status, 403); // the directory: no index
}

#[test]
fn follow_symlinks_and_listing_options() {
    let (e, _d) = start_site("follow-symlinks on listing on");
    assert_eq!(get(e.addr(), "/out.txt").text(), "do not serve");
    let r = get(e.addr(), "/sub/");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("page.css"));
}

#[test]
fn ranges_conditionals_head_and_methods() {
    let (e, _d) = start_site("");
    let mut c = Client::connect(e.addr());
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=2-4\r\n\r\n");
    let r = c.read_resp();
    assert_eq!(r.status, 206);
    assert_eq!(r.text(), "234");
    assert_eq!(r.header("content-range"), Some("bytes 2-4/10"));
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=-3\r\n\r\n");
    assert_eq!(c.read_resp().text(), "789");
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: a\r\nRange: bytes=50-\r\n\r\n");
    let r = c.read_resp();
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */10"));
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = c.read_resp();
    let etag = r.header("etag").unwrap().to_string();
    let lm = r.header("last-modified").unwrap().to_string();
    c.send(format!("GET /a.txt HTTP/1.1\r\nHost: a\r\nIf-None-Match: {etag}\r\n\r\n").as_bytes());
    let r = c.read_resp();
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    c.send(format!("GET /a.txt HTTP/1.1\r\nHost: a\r\nIf-Modified-Since: {lm}\r\n\r\n").as_bytes());
    assert_eq!(c.read_resp().status, 304);
    c.send(b"HEAD /a.txt HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = c.read_resp_opt(true).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("10"));
    c.send(b"DELETE /a.txt HTTP/1.1\r\nHost: a\r\n\r\n");
    let r = c.read_resp();
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    // Still usable after all that.
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(c.read_resp().text(), "0123456789");
}

#[test]
fn large_file_arrives_intact() {
    let (e, d) = start_site("");
    // 5 MiB of non-repeating bytes, sent with sendfile.
    let mut data = Vec::with_capacity(5 << 20);
    let mut x: u32 = 12345;
    while data.len() < 5 << 20 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        data.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::File::create(d.join("www/big.bin"))
        .unwrap()
        .write_all(&data)
        .unwrap();
    let r = get(e.addr(), "/big.bin");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), data.len());
    assert!(r.body == data, "content differs");
    // A range in the middle of it.
    let mut c = Client::connect(e.addr());
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=1000000-2999999\r\n\r\n");
    let r = c.read_resp();
    assert_eq!(r.status, 206);
    assert!(r.body[..] == data[1_000_000..3_000_000]);
    // And with curl, checking the digest of what it saved.
    if have("curl") && have("sha256sum") {
        let out = d.join("dl.bin");
        let st = Command::new("curl")
            .args([
                "-sf",
                "-o",
                out.to_str().unwrap(),
                &format!("http://{}/big.bin", e.addr()),
            ])
            .status()
            .unwrap();
        assert!(st.success());
        let sum = |p: &Path| {
            let o = Command::new("sha256sum").arg(p).output().unwrap();
            String::from_utf8_lossy(&o.stdout)
                .split(' ')
                .next()
                .unwrap_or("")
                .to_string()
        };
        assert_eq!(sum(&out), sum(&d.join("www/big.bin")));
    }
}

#[test]
fn default_mode_serves_the_directory() {
    let d = scratch("default");
    std::fs::write(d.join("hello.txt"), "hi there").unwrap();
    let e = Ebb::start_args(&["--bind", "127.0.0.1:0"], d.clone());
    assert_eq!(get(e.addr(), "/hello.txt").text(), "hi there");
    // The default mode lists directories and logs to stdout.
    assert!(get(e.addr(), "/").text().contains("hello.txt"));
    assert!(e
        .wait_stdout("GET /hello.txt", std::time::Duration::from_secs(30))
        .is_some());
    let d2 = scratch("root");
    std::fs::write(d2.join("x.txt"), "root option").unwrap();
    let e2 = Ebb::start_args(
        &["--root", d2.to_str().unwrap(), "--bind", "127.0.0.1:0"],
        d.clone(),
    );
    assert_eq!(get(e2.addr(), "/x.txt").text(), "root option");
}

#[test]
fn edited_files_show_within_a_second() {
    let (e, d) = start_site("");
    assert_eq!(get(e.addr(), "/a.txt").text(), "0123456789");
    std::fs::write(d.join("www/a.txt"), "changed").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert_eq!(get(e.addr(), "/a.txt").text(), "changed");
}

/// `%B` and the stats' `bout` count a file answer's bytes once, head and
/// body, as sent: an HTTP/1 small file (its body copied after the head in
/// the output buffer), a larger one (sent from the cache entry), a HEAD
/// and a 206.
#[test]
fn a_file_answers_bytes_are_logged_and_counted_once() {
    let d = scratch("filebytes");
    std::fs::create_dir_all(d.join("www")).unwrap();
    std::fs::write(d.join("www/100b"), [b'x'; 100]).unwrap();
    std::fs::write(d.join("www/big"), vec![b'y'; 10_000]).unwrap();
    let sock = d.join("stats.sock");
    let cfg = format!(
        "global\n stats socket {} level admin\ndefaults\n mode http\n timeout client 5s\n\
         log stdout format raw local0\n\
         frontend fe\n bind BIND\n log global\n log-format \"bytes %{{+Q}}r B=%B\"\n default_backend files\n\
         backend files\n serve-files \"{}\"\n",
        sock.display(),
        d.join("www").display()
    );
    let e = Ebb::start(&cfg);
    let mut total = 0;
    for (line, extra, body) in [
        ("GET /100b HTTP/1.1", "", 100),
        ("GET /big HTTP/1.1", "", 10_000),
        ("HEAD /100b HTTP/1.1", "", 0),
        ("GET /100b HTTP/1.1", "Range: bytes=0-9\r\n", 10),
    ] {
        let mut s = std::net::TcpStream::connect(e.addr()).unwrap();
        let full = format!("{line}\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
        s.write_all(full.as_bytes()).unwrap();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut s, &mut got).unwrap();
        let head = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!(got.len() - head, body, "{full:?}");
        let l = e
            .wait_stdout(
                &format!("bytes \"{line}\" "),
                std::time::Duration::from_secs(20),
            )
            .unwrap_or_else(|| panic!("no log line for {full:?}"));
        e.stdout.lock().unwrap().retain(|x| *x != l);
        assert!(
            l.ends_with(&format!(" B={}", got.len())),
            "{full:?}: {l}, {} bytes sent",
            got.len()
        );
        total += got.len();
    }
    let r = stat_row(&sock, "fe", "FRONTEND");
    assert_eq!(r["bout"], total.to_string());
}
