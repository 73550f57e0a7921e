//! Test harness: starts the real `ebb` binary on ephemeral loopback ports
//! and talks to it with real clients. Every process started here is killed
//! when its handle drops, so a failing test leaves nothing running.
#![allow(dead_code)]

pub mod dnsd;
pub mod origin;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const EBB: &str = env!("CARGO_BIN_EXE_ebb");

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A fresh scratch directory under the system temp dir. Directories the
/// harness leaves behind (a `run_ebb` directory, a haproxy's, a test that
/// panicked) are swept by the next test process: the first call removes
/// every `ebb-it-*` directory whose owning process is gone.
pub fn scratch(name: &str) -> PathBuf {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(sweep_scratch);
    let d = std::env::temp_dir().join(format!(
        "ebb-it-{}-{}-{}",
        name,
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Removes the scratch directories of test processes that have exited:
/// their names end in `-PID-SEQ`, and a PID with no `/proc` entry owns
/// nothing any more.
fn sweep_scratch() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix("ebb-it-") else {
            continue;
        };
        let mut parts = rest.rsplitn(3, '-');
        let (Some(_seq), Some(pid)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A running ebb.
pub struct Ebb {
    pub child: Child,
    /// Addresses in the order of the `listening on` lines.
    pub addrs: Vec<SocketAddr>,
    /// Every line ebb printed on stdout after `ready` (access logs...).
    pub stdout: Arc<Mutex<Vec<String>>>,
    pub stderr: Arc<Mutex<Vec<String>>>,
    pub dir: PathBuf,
}

impl Ebb {
    /// Starts ebb on a configuration text; `BIND` in it is replaced by
    /// `127.0.0.1:0` (an ephemeral port).
    pub fn start(cfg: &str) -> Ebb {
        let dir = scratch("cfg");
        let path = dir.join("ebb.cfg");
        std::fs::write(&path, cfg.replace("BIND", "127.0.0.1:0")).unwrap();
        Ebb::start_args(&["-f", path.to_str().unwrap()], dir)
    }

    pub fn start_args(args: &[&str], dir: PathBuf) -> Ebb {
        let mut child = Command::new(EBB)
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ebb");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let err_lines = Arc::new(Mutex::new(Vec::new()));
        let e2 = Arc::clone(&err_lines);
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                e2.lock().unwrap().push(l);
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let out_lines = Arc::new(Mutex::new(Vec::new()));
        let o2 = Arc::clone(&out_lines);
        std::thread::spawn(move || {
            let mut ready = false;
            let mut addrs = Vec::new();
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if ready {
                    o2.lock().unwrap().push(l);
                    continue;
                }
                if let Some(a) = l.split(" listening on ").nth(1) {
                    // A UNIX socket (`unix@`, `abns@`) is not an address.
                    if let Ok(a) = a.trim().parse::<SocketAddr>() {
                        addrs.push(a);
                    }
                } else if l.starts_with("ebb: ready") {
                    ready = true;
                    let _ = tx.send(addrs.clone());
                }
            }
        });
        // Up to 60 s: a debug build starting on a loaded machine (the
        // wait ends on the ready line).
        let addrs = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("ebb did not start: {:?}", err_lines.lock().unwrap());
            }
        };
        Ebb {
            child,
            addrs,
            stdout: out_lines,
            stderr: err_lines,
            dir,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} failed");
    }

    /// Waits for the process to exit; returns its exit code.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let t = Instant::now();
        while t.elapsed() < limit {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Waits until some stdout line after `ready` contains `needle`.
    pub fn wait_stdout(&self, needle: &str, limit: Duration) -> Option<String> {
        wait_line(&self.stdout, needle, limit)
    }

    pub fn wait_stderr(&self, needle: &str, limit: Duration) -> Option<String> {
        wait_line(&self.stderr, needle, limit)
    }
}

fn wait_line(v: &Arc<Mutex<Vec<String>>>, needle: &str, limit: Duration) -> Option<String> {
    let t = Instant::now();
    loop {
        if let Some(l) = v.lock().unwrap().iter().find(|l| l.contains(needle)) {
            return Some(l.clone());
        }
        if t.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Ebb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs ebb to completion (e.g. `-c`), returning (code, stdout, stderr).
pub fn run_ebb(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = Command::new(EBB)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run ebb");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A parsed HTTP/1.1 response.
#[derive(Debug, Clone)]
pub struct Resp {
    /// The status line's version (`HTTP/1.1`).
    pub version: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body, decoded when it came chunked.
    pub body: Vec<u8>,
    /// A chunked body's trailer fields.
    pub trailers: Vec<(String, String)>,
    /// Why the body is not whole: a chunked body whose framing broke or
    /// that was cut short (`body` holds what decoded before). `read_resp`
    /// fails the test on it; a test that expects it reads with
    /// `read_resp_opt` and looks.
    pub broken: Option<String>,
}

impl Resp {
    pub fn header(&self, n: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A raw client connection.
pub struct Client {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(a: SocketAddr) -> Client {
        Client::from_stream(TcpStream::connect(a).unwrap())
    }

    pub fn from_stream(s: TcpStream) -> Client {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client { s, buf: Vec::new() }
    }

    /// Bytes read from the socket but not consumed by a response yet.
    pub fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    pub fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    /// Reads more; false at the end (EOF, an error, the read timeout).
    /// A read interrupted by a signal is read again: with a read timeout
    /// set, a stop and resume of the test process ends it with EINTR
    /// (signal(7)); taken for the end, it made "no response" failures of
    /// several tests at once on a loaded machine (sslreg, proxy_opts).
    fn fill(&mut self) -> bool {
        let mut tmp = [0u8; 65536];
        match retry_eintr(|| self.s.read(&mut tmp)) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                true
            }
        }
    }

    /// Reads one response, by its framing: no body after a HEAD
    /// (`head_req`), a 1xx, 204 or 304; a chunked body (its trailers
    /// kept apart); a `Content-Length` one; else the bytes to the close.
    /// It returns as soon as the message ends, so a response on a
    /// connection kept open costs no read timeout. None when no head
    /// came, or a `Content-Length` body was cut short. A chunked body cut
    /// short or broken is returned as far as it decoded, with `broken`
    /// saying what went wrong (the bytes after the break are dropped).
    pub fn read_resp_opt(&mut self, head_req: bool) -> Option<Resp> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if !self.fill() {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next()?;
        let status: u16 = status_line.split(' ').nth(1)?.parse().ok()?;
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let mut r = Resp {
            version: status_line.split(' ').next().unwrap_or("").to_string(),
            status,
            headers,
            body: Vec::new(),
            trailers: Vec::new(),
            broken: None,
        };
        if head_req || status == 304 || status == 204 || status < 200 {
            return Some(r);
        }
        // RFC 9112 §6.3: a chunked transfer coding (the last one) wins
        // over `Content-Length`.
        let chunked = r.header("transfer-encoding").is_some_and(|te| {
            te.rsplit(',')
                .next()
                .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"))
        });
        if chunked {
            if let Err(why) = self.read_chunked(&mut r) {
                r.broken = Some(why.to_string());
                self.buf.clear();
            }
        } else if let Some(cl) = r.header("content-length") {
            let n: usize = cl.parse().ok()?;
            r.body = self.take(n)?;
        } else {
            while self.fill() {}
            r.body = std::mem::take(&mut self.buf);
        }
        Some(r)
    }

    /// The next `n` bytes, reading more as needed; None when the stream
    /// ends first.
    fn take(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill() {
                return None;
            }
        }
        Some(self.buf.drain(..n).collect())
    }

    /// The next line without its CRLF (or bare LF), reading more as
    /// needed; None when the stream ends first.
    fn line(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let mut l: Vec<u8> = self.buf.drain(..=i).collect();
                l.pop();
                if l.last() == Some(&b'\r') {
                    l.pop();
                }
                return Some(l);
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// Decodes a chunked body into `r.body`, its trailers into
    /// `r.trailers`; an error when the stream ended or the framing broke
    /// before the end of the trailers (the data of a chunk cut short is
    /// in `r.body`).
    fn read_chunked(&mut self, r: &mut Resp) -> Result<(), &'static str> {
        const CUT: &str = "the chunked body was cut short";
        loop {
            let l = self.line().ok_or(CUT)?;
            let l = String::from_utf8_lossy(&l).into_owned();
            let size = l.split(';').next().unwrap_or("").trim();
            if size.is_empty() || !size.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("a bad chunk size line");
            }
            let n = usize::from_str_radix(size, 16).map_err(|_| "a chunk size too large")?;
            if n == 0 {
                break;
            }
            match self.take(n) {
                Some(mut d) => r.body.append(&mut d),
                None => {
                    r.body.append(&mut self.buf);
                    return Err(CUT);
                }
            }
            match self.line() {
                None => return Err(CUT),
                Some(l) if !l.is_empty() => return Err("no CRLF after a chunk's data"),
                Some(_) => {}
            }
        }
        loop {
            let l = self.line().ok_or(CUT)?;
            if l.is_empty() {
                return Ok(());
            }
            if let Some((k, v)) = String::from_utf8_lossy(&l).split_once(':') {
                r.trailers
                    .push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }

    /// [`Client::read_resp_opt`], failing the test when no response
    /// came or its chunked body broke.
    pub fn read_resp(&mut self) -> Resp {
        let r = self.read_resp_opt(false).expect("no response");
        if let Some(why) = &r.broken {
            panic!(
                "{why}: {} {:?}, body as far as it decoded: {:?}",
                r.status,
                r.headers,
                r.text()
            );
        }
        r
    }

    /// True when the server closed the connection within the timeout: EOF,
    /// or a reset (a close over bytes the server had not read, such as a
    /// request sent after a refused one, is a reset; whether those bytes
    /// came before the close is a matter of timing). A reset is looked for
    /// on the first read too: a read after a reset sees EOF, so a reset
    /// first, EOF second was taken for an open connection.
    pub fn closed(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let reset = |r: &std::io::Result<usize>| matches!(r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset);
        let mut tmp = [0u8; 1024];
        let first = retry_eintr(|| self.s.read(&mut tmp));
        matches!(first, Ok(0)) || reset(&first) || reset(&retry_eintr(|| self.s.read(&mut tmp)))
    }
}

/// The length of the whole response at the start of `b` (bytes as they
/// came): its head and the body its framing gives (none after a HEAD,
/// `head_req`, nor in a 1xx, 204 or 304; `Content-Length`; chunked, to
/// the end of its trailers). None while it is incomplete, or when only
/// the close can end it (no framing) or its framing is broken: for a
/// reader of raw bytes that stops at the end of a message rather than at
/// a read timeout.
pub fn response_len(b: &[u8], head_req: bool) -> Option<usize> {
    let end = b.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&b[..end]);
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    if head_req || status < 200 || status == 204 || status == 304 {
        return Some(end);
    }
    let (mut cl, mut chunked) = (None, false);
    for (k, v) in lines.filter_map(|l| l.split_once(':')) {
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = v
                .rsplit(',')
                .next()
                .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
        } else if k.eq_ignore_ascii_case("content-length") {
            cl = v.parse::<usize>().ok();
        }
    }
    if chunked {
        return chunked_len(&b[end..]).map(|n| end + n);
    }
    let n = end.checked_add(cl?)?;
    (b.len() >= n).then_some(n)
}

/// The length of the chunked body at the start of `b`, to the end of its
/// trailers; None while it is incomplete or when it is broken.
pub fn chunked_len(b: &[u8]) -> Option<usize> {
    let line_end = |at: usize| b[at..].windows(2).position(|w| w == b"\r\n");
    let mut at = 0;
    loop {
        let le = line_end(at)?;
        let line = std::str::from_utf8(&b[at..at + le]).ok()?;
        let size = line.split(';').next()?.trim();
        if size.is_empty() || !size.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let n = usize::from_str_radix(size, 16).ok()?;
        at += le + 2;
        if n == 0 {
            break;
        }
        at = at.checked_add(n)?.checked_add(2)?;
        if b.len() < at {
            return None;
        }
    }
    loop {
        let le = line_end(at)?;
        at += le + 2;
        if le == 0 {
            return Some(at);
        }
    }
}

/// One request on a new connection.
pub fn get(a: SocketAddr, path: &str) -> Resp {
    let mut c = Client::connect(a);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
    c.read_resp()
}

/// One raw request on a new connection; the response, if any.
pub fn raw(a: SocketAddr, req: &[u8]) -> Option<Resp> {
    let mut c = Client::connect(a);
    c.send(req);
    c.read_resp_opt(false)
}

/// Runs curl (silent, errors shown, 60 s at most); returns (success,
/// stdout, stderr).
pub fn curl(args: &[&str]) -> (bool, String, String) {
    let o = Command::new("curl")
        .args(["-sS", "--max-time", "60"])
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Runs `script` (sh) in a new scratch directory, a test PKI made with
/// `openssl`: the directory, or `None` (the test skipped) without
/// openssl.
pub fn openssl_pki(name: &str, script: &str) -> Option<PathBuf> {
    if !have("openssl") {
        eprintln!("openssl missing: {name} skipped");
        return None;
    }
    let d = scratch(name);
    let ok = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&d)
        .status()
        .unwrap()
        .success();
    assert!(ok, "making the test PKI failed");
    Some(d)
}

/// Whether a command is available.
pub fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Waits until `cond` holds, checking every few milliseconds; panics with
/// `what` after 30 s (a bound far from any expected wait, so a loaded
/// machine does not fail the test: the wait ends on the event, not time).
pub fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    assert!(
        came_within(Duration::from_secs(30), cond),
        "never happened: {what}"
    );
}

/// Whether `cond` comes to hold within `limit`, checked every few
/// milliseconds (the wait ends as soon as it does).
pub fn came_within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + limit;
    while !cond() {
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// One command on a CLI socket; the whole answer.
pub fn cli_cmd(sock: &Path, line: &str) -> String {
    String::from_utf8(cli_bytes(sock, line)).expect("a CLI answer in UTF-8")
}

/// One command on a CLI socket; the whole answer, bytes that are not
/// UTF-8 replaced. For haproxy's answers only: HAProxy 2.6 can show bytes
/// that are not UTF-8 in `show stat` (seen in `last_agt` while it reports
/// an agent's incomplete line).
pub fn cli_cmd_lossy(sock: &Path, line: &str) -> String {
    String::from_utf8_lossy(&cli_bytes(sock, line)).into_owned()
}

fn cli_bytes(sock: &Path, line: &str) -> Vec<u8> {
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(format!("{line}\n").as_bytes()).unwrap();
    // No more commands (a master CLI would wait for them).
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

/// The calls `show profiling` counts for tasklets named `name` (0 when
/// none ran).
pub fn profiling_calls(show_profiling: &str, name: &str) -> u64 {
    show_profiling
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The backend row's current queue (`qcur`) in `show stat`.
pub fn backend_qcur(sock: &Path, be: &str) -> Option<u64> {
    let csv = cli_cmd(sock, "show stat");
    let row = csv
        .lines()
        .find(|l| l.starts_with(&format!("{be},BACKEND,")))?;
    row.split(',').nth(2)?.parse().ok()
}

/// The headless Chromium on PATH, if any (Debian's `chromium`).
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| have(c))
}

/// Headless Chromium with a fresh profile in `profile`, nothing running
/// in the background.
pub fn chromium_cmd(bin: &str, profile: &Path) -> Command {
    let mut c = Command::new(bin);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// A client connection from a chosen loopback source address.
pub fn connect_from(src: &str, to: SocketAddr) -> Client {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let from: SocketAddr = format!("{src}:0").parse().unwrap();
    s.bind(&from.into()).unwrap();
    s.connect(&to.into()).unwrap();
    Client::from_stream(TcpStream::from(s))
}

/// A loopback port free right now (for configurations that must name an
/// address before the process starts).
///
/// The port is drawn below the kernel's ephemeral range (32768 and up on
/// Linux), never from it: a port handed out by `bind(:0)` is free again
/// the moment the probe closes, so another process's `:0` listener (ebb
/// started right after haproxy, say) could be given the same one, and with
/// SO_REUSEPORT on both sides the two would silently share it. CI saw
/// exactly that: half of one haproxy frontend's connections reached ebb.
///
/// A port is handed out once per test process: the tests of a file run in
/// parallel, and a port drawn but not bound yet (or never: a peer that is
/// meant to stay absent) was free to be drawn again by another test, whose
/// listener then answered the first test's connections (a peer `z` meant
/// to be silent could be another test's ebb).
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    for _ in 0..1000 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u64(DRAWS.fetch_add(1, Ordering::Relaxed));
        let port = 12000 + (h.finish() % 20000) as u16;
        if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
    panic!("no free loopback port between 12000 and 32000");
}

/// A loopback port that refuses connections for as long as this lives: a
/// socket bound to it that never listens. Nothing else can take the port
/// meanwhile (the socket has no `SO_REUSEADDR`), where a port merely
/// released can become another process's listener during a long test (a
/// soak run's "dead" server answered 200 so, on a machine running other
/// tests).
pub struct ClosedPort {
    _held: socket2::Socket,
    pub addr: std::net::SocketAddr,
}

pub fn closed_port() -> ClosedPort {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let any = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    s.bind(&any.into()).unwrap();
    let addr = s.local_addr().unwrap().as_socket().unwrap();
    ClosedPort { _held: s, addr }
}

impl ClosedPort {
    /// The port opened at last: its socket starts to listen (no other
    /// process could have taken the port meanwhile).
    pub fn listen(self) -> std::net::TcpListener {
        self._held.listen(128).unwrap();
        self._held.into()
    }
}

/// A server's (or `BACKEND`/`FRONTEND` row's) columns of `show stat`, by
/// name.
pub fn stat_row(sock: &Path, be: &str, srv: &str) -> std::collections::HashMap<String, String> {
    stat_row_of(&cli_cmd(sock, "show stat"), be, srv)
}

/// A configuration's `global` (admin socket `sock`, logs to `log`) and
/// `defaults` (`mode`, `log global`, 30 s client and server timeouts, 5 s
/// connect) sections, for the proxies that follow.
pub fn logged_head(sock: &Path, log: SocketAddr, mode: &str) -> String {
    format!(
        "global\n    stats socket {} level admin\n    log {log} local0\n\
         defaults\n    mode {mode}\n    log global\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n",
        sock.display()
    )
}

/// The fields of `srv`'s line of `show servers state BE`.
pub fn servers_state_line(sock: &Path, be: &str, srv: &str) -> Vec<String> {
    let out = cli_cmd(sock, &format!("show servers state {be}"));
    out.lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|w| w.get(1).is_some_and(|b| b == be) && w.get(3).is_some_and(|n| n == srv))
        .unwrap_or_else(|| panic!("no line of {be}/{srv}: {out}"))
}

/// The columns of the row of `be`/`srv` in a `show stat` answer.
pub fn stat_row_of(csv: &str, be: &str, srv: &str) -> std::collections::HashMap<String, String> {
    let mut lines = csv.lines();
    let head: Vec<String> = lines
        .next()
        .unwrap_or("")
        .trim_start_matches("# ")
        .split(',')
        .map(String::from)
        .collect();
    let row = lines
        .find(|l| l.starts_with(&format!("{be},{srv},")))
        .unwrap_or("");
    head.into_iter()
        .zip(row.split(',').map(String::from))
        .collect()
}

/// Writes a self-signed certificate for `name` and its key as one PEM
/// file (for a `bind ... ssl crt` line) at `path`.
pub fn self_signed_pem(path: &Path, name: &str) {
    let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    std::fs::write(path, ck.cert.pem() + &ck.key_pair.serialize_pem()).unwrap();
}

/// Debian's Python 3 (tests' helper servers: `h2srvd.py`, `fcgiapp.py`).
pub const PY: &str = "/usr/bin/python3";

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Debian's haproxy 2.6, run beside ebb for side-by-side comparisons.
pub struct Hap {
    child: Child,
    /// Its admin stats socket.
    pub sock: PathBuf,
}

impl Hap {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Hap {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts haproxy on `rest` (the configuration after `global`'s stats
/// socket line), once its socket answers; None when it is not installed.
pub fn haproxy_with(name: &str, rest: &str) -> Option<Hap> {
    if !have("haproxy") {
        println!("haproxy is not installed: ebb is checked on its own");
        return None;
    }
    let d = scratch(name);
    let sock = d.join("h.sock");
    let cfg = format!(
        "global\n    stats socket {} level admin\n{rest}",
        sock.display()
    );
    std::fs::write(d.join("h.cfg"), cfg).unwrap();
    let child = Command::new("haproxy")
        .args(["-db", "-f", d.join("h.cfg").to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // A connect succeeds once the socket listens, before haproxy has
    // bound the listeners after it (UNIX binds of a frontend come after
    // the global stats socket): an answer comes from the running loop,
    // after every bind.
    wait_until("haproxy's answer on its socket", || {
        let Ok(mut c) = std::os::unix::net::UnixStream::connect(&sock) else {
            return false;
        };
        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
        if c.write_all(b"show info\n").is_err() {
            return false;
        }
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out.contains("Pid:")
    });
    Some(Hap { child, sock })
}

/// Writes `text` as `dir/file` and asserts that `ebb -c` refuses it with
/// an error containing `what`; with `haproxy_too`, that `haproxy -c`
/// refuses it as well (when haproxy is installed).
pub fn assert_refused(dir: &Path, file: &str, text: &str, what: &str, haproxy_too: bool) {
    std::fs::write(dir.join(file), text).unwrap();
    let (rc, _out, err) = run_ebb(&["-c", "-f", file], dir);
    assert_ne!(rc, 0, "{text}");
    assert!(err.contains(what), "{err}");
    if haproxy_too {
        let refused = haproxy_refuses(&dir.join(file));
        assert!(refused != Some(false), "haproxy accepted {text}");
    }
}

/// Whether `haproxy -c` refuses the configuration file `cfg` (run in
/// that file's directory); None when haproxy is not installed.
pub fn haproxy_refuses(cfg: &Path) -> Option<bool> {
    if !have("haproxy") {
        return None;
    }
    let mut c = Command::new("haproxy");
    c.arg("-c").arg("-f").arg(cfg);
    if let Some(d) = cfg.parent().filter(|d| !d.as_os_str().is_empty()) {
        c.current_dir(d);
    }
    Some(!c.output().expect("run haproxy -c").status.success())
}

/// Starts haproxy beside ebb on the configuration `cfg(socket, bind)`
/// gives (its `global` section's first line the admin `stats socket`
/// line, as for ebb): the process and the address its frontend listens
/// on. None when haproxy is not installed.
pub fn haproxy_beside(
    name: &str,
    cfg: impl Fn(&Path, &str) -> String,
) -> Option<(Hap, SocketAddr)> {
    let d = scratch(&format!("{name}-h"));
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let text = cfg(&d.join("h.sock"), &bind);
    let rest = text.split_once("level admin\n")?.1.to_string();
    let h = haproxy_with(name, &rest)?;
    Some((h, bind.parse().ok()?))
}

/// HAProxy (`hap`, when installed: `None` otherwise) or ebb running
/// `cfg(socket, bind)`: what keeps it running, its admin socket, its
/// frontend's address and its name.
pub fn ebb_or_haproxy(
    hap: bool,
    name: &str,
    cfg: impl Fn(&Path, &str) -> String,
) -> Option<(Box<dyn std::any::Any>, PathBuf, SocketAddr, &'static str)> {
    if hap {
        let (h, fe) = haproxy_beside(name, cfg)?;
        let s = h.sock.clone();
        Some((Box::new(h), s, fe, "haproxy"))
    } else {
        let (e, s) = ebb_with_admin(name, cfg);
        let fe = e.addr();
        Some((Box::new(e), s, fe, "ebb"))
    }
}

/// Starts ebb on the configuration `cfg(socket, "BIND")` gives: the
/// process and its admin socket.
pub fn ebb_with_admin(name: &str, cfg: impl Fn(&Path, &str) -> String) -> (Ebb, PathBuf) {
    let sock = scratch(name).join("admin.sock");
    (Ebb::start(&cfg(&sock, "BIND")), sock)
}

/// Runs `work` while strace follows every thread of process `pid`
/// (attached once the process is up, so its start is not seen), quietly
/// (`-f -qq`), with the options `opts`, writing to `out`; returns once
/// strace has stopped and written its output.
pub fn strace_during(pid: u32, opts: &[&str], out: &Path, work: impl FnOnce()) {
    let tids: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    let mut argv: Vec<String> = ["-f", "-qq"]
        .iter()
        .chain(opts)
        .map(|s| s.to_string())
        .collect();
    argv.extend(["-o".to_string(), out.display().to_string()]);
    for t in &tids {
        argv.push("-p".into());
        argv.push(t.clone());
    }
    let mut st = Command::new("strace")
        .args(&argv)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start strace");
    let traced = |t: &String| {
        std::fs::read_to_string(format!("/proc/{pid}/task/{t}/status"))
            .map(|s| {
                s.lines()
                    .any(|l| l.starts_with("TracerPid:") && !l.ends_with("\t0"))
            })
            .unwrap_or(true)
    };
    wait_until("strace attached", || tids.iter().all(traced));
    work();
    let ok = Command::new("kill")
        .args(["-INT", &st.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    st.wait().unwrap();
}

/// Segments the kernel counted into a socket of this process that is
/// still open (`ss`'s `segs_in`, found by the socket's two addresses);
/// None when `ss` cannot say.
pub fn segs_in(c: &TcpStream) -> Option<u64> {
    let local = c.local_addr().ok()?.to_string();
    let peer = c.peer_addr().ok()?.to_string();
    let out = Command::new("ss")
        .args(["-Htin", "src", &local, "dst", &peer])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(|w| w.strip_prefix("segs_in:"))
        .and_then(|v| v.parse().ok())
}

/// Runs a receive again when a signal interrupted it: a socket with a
/// read timeout gives EINTR after its process was stopped and resumed
/// (a tracer attaching, a loaded machine), signal(7).
pub fn retry_eintr(mut f: impl FnMut() -> std::io::Result<usize>) -> std::io::Result<usize> {
    loop {
        match f() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// `read` run again when a signal interrupted it ([`retry_eintr`]): the
/// tests' own read loops call `read_retry` on their sockets (and any
/// other reader), so a stop and resume of the test process is not taken
/// for an error or the end of the stream.
pub trait ReadRetry: Read {
    fn read_retry(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        retry_eintr(|| self.read(b))
    }
}

impl<R: Read + ?Sized> ReadRetry for R {}

/// Whether the tests run as root: a process with `CAP_NET_ADMIN`, which
/// `silent-drop`'s `TCP_REPAIR` needs.
pub fn as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// What the client on `s` hears of a `silent-drop`, as HAProxy 2.6 drops:
/// asserts nothing within 2 s when the server may use `TCP_REPAIR` (the
/// tests run as root, as ebb then does), else a reset (the fallback's
/// linger-0 close; its time-to-live of 1 does not stop it on loopback).
/// The client must have sent nothing the server did not read (an unread
/// segment arriving after the close is answered with a reset).
pub fn assert_silently_dropped(s: &mut std::net::TcpStream) {
    let mut b = [0u8; 16];
    if as_root() {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let r = s.read_retry(&mut b);
        assert!(
            matches!(&r, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
            "a silent-drop's client heard {r:?}"
        );
    } else {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let r = s.read_retry(&mut b);
        assert!(
            matches!(&r, Err(x) if x.kind() == std::io::ErrorKind::ConnectionReset),
            "{r:?}"
        );
    }
}

/// A syslog receiver on 127.0.0.1 (its datagrams are waited for 30 s at
/// most). Lines come from several threads (a check's state change, the
/// sessions it ends, the exchanges), in no fixed order: a line read while
/// looking for another is kept for a later search.
pub struct Syslog {
    u: std::net::UdpSocket,
    kept: std::cell::RefCell<Vec<String>>,
}

impl Syslog {
    pub fn new() -> Syslog {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        u.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Syslog {
            u,
            kept: Default::default(),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.u.local_addr().unwrap()
    }

    /// The first line (kept or arriving) that `pick` accepts, whole.
    pub fn find(&self, what: &str, pick: impl Fn(&str) -> bool) -> String {
        let mut kept = self.kept.borrow_mut();
        if let Some(i) = kept.iter().position(|l| pick(l)) {
            return kept.remove(i);
        }
        let mut b = [0u8; 4096];
        loop {
            let n =
                retry_eintr(|| self.u.recv(&mut b)).unwrap_or_else(|e| panic!("no {what}: {e}"));
            let l = String::from_utf8_lossy(&b[..n]).into_owned();
            if pick(&l) {
                return l;
            }
            kept.push(l);
        }
    }

    /// The text (after the `tag[pid]: ` header) of the first line whose
    /// text starts with `prefix`.
    pub fn next(&self, prefix: &str) -> String {
        let text = |l: &str| {
            l.split_once("]: ")
                .map_or(l, |x| x.1)
                .trim_end()
                .to_string()
        };
        text(&self.find("syslog datagram", |l| text(l).starts_with(prefix)))
    }
}

/// A rustls client trusting `ca` only.
pub fn client_trusting(ca: &Path) -> std::sync::Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).unwrap();
    use rustls::pki_types::pem::PemObject;
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(c.unwrap()).unwrap();
    }
    std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

/// The loop of [`proc_sockets`]: each TCP socket (IPv4 or IPv6) of
/// process `argv[1]`, taken with `pidfd_getfd` (Linux 5.6, root or
/// ptrace rights) as `s`, with `l` its address and `p` its peer's (None
/// for a listener), then the caller's lines.
const PROC_SOCKETS: &str = r#"
import ctypes, os, socket, sys
pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(pid)
for fd in os.listdir("/proc/%d/fd" % pid):
    try:
        if not os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:"):
            continue
    except OSError:
        continue
    n = libc.syscall(438, pidfd, int(fd), 0)
    if n < 0:
        sys.exit("pidfd_getfd: errno %d" % ctypes.get_errno())
    s = socket.socket(fileno=n)
    try:
        if s.family not in (socket.AF_INET, socket.AF_INET6) or s.type != socket.SOCK_STREAM:
            continue
        l = s.getsockname()
        try:
            p = s.getpeername()
        except OSError:
            p = None
        EACH
    except OSError:
        pass
    finally:
        s.close()
"#;

/// Runs `each` (Python, indented by 8 spaces from its second line on)
/// for every TCP socket of process `pid`, read through `pidfd_getfd`
/// (see `PROC_SOCKETS`); the lines it printed, or None when the sockets
/// cannot be read (no pidfd_getfd rights).
pub fn proc_sockets(pid: u32, each: &str) -> Option<Vec<String>> {
    let script = PROC_SOCKETS.replace("EACH", each);
    let out = Command::new("python3")
        .args(["-c", &script, &pid.to_string()])
        .output()
        .ok()?;
    if !out.status.success() {
        println!(
            "sockets of {pid} unread: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect(),
    )
}
