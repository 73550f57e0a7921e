//! Small origin servers for the proxy tests: a well-behaved one that
//! answers with what it received, and misbehaving ones (closes, stalls,
//! garbage). Each runs on its own threads on 127.0.0.1 and stops when
//! dropped. And the pieces of the servers a test writes for itself
//! ([`serve_each`], [`read_head`], [`drain`]) and of its one-shot
//! exchanges ([`exchange`], [`exchange_within`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A server of the test's own making: listens on 127.0.0.1 and hands
/// each connection it accepts to `conn`, on a thread of its own, for as
/// long as the test runs. Its address.
pub fn serve_each(conn: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("origin bind");
    let addr = l.local_addr().unwrap();
    let conn = Arc::new(conn);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let conn = Arc::clone(&conn);
            std::thread::spawn(move || conn(s));
        }
    });
    addr
}

/// Reads from `s` to the end of a head (`\r\n\r\n`): the bytes read, the
/// head and any after it; None when the peer closes first (or an error).
pub fn read_head(s: &mut impl Read) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut b = [0u8; 4096];
    while find(&head, b"\r\n\r\n").is_none() {
        match super::retry_eintr(|| s.read(&mut b)) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&b[..n]),
        }
    }
    Some(head)
}

/// Reads and drops what the peer sends until it closes.
pub fn drain(s: &mut impl Read) {
    let mut b = [0u8; 4096];
    while matches!(super::retry_eintr(|| s.read(&mut b)), Ok(n) if n > 0) {}
}

/// Sends `req` on a new connection to `a` and reads until the close (or
/// 30 s). A write cut short is no failure: the proxy may answer and close
/// before it takes all of `req`.
pub fn exchange(a: SocketAddr, req: &[u8]) -> Vec<u8> {
    exchange_within(a, req, Duration::from_secs(30))
}

/// [`exchange`], reading until the close or a pause of `limit`.
pub fn exchange_within(a: SocketAddr, req: &[u8], limit: Duration) -> Vec<u8> {
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    let _ = s.write_all(req);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// How an origin behaves.
#[derive(Clone)]
pub enum Mode {
    /// Answers `200` with body `NAME PATH`, echoing some request headers
    /// back as `X-Got-*`; keeps connections open.
    Ok,
    /// Like `Ok` after sleeping this long per request.
    Slow(Duration),
    /// Like `Ok`, but closes every connection after its first answer
    /// without saying so (`Connection: close` absent), after a short idle.
    CloseIdle(Duration),
    /// Closes each connection as soon as it is accepted.
    Close,
    /// Answers bytes that are not HTTP.
    Garbage,
    /// Accepts, reads, never answers.
    Stall,
    /// Answers a body of this many bytes, chunked.
    BigChunked(usize),
    /// Echoes the request body back (Content-Length).
    Echo,
    /// Answers every request with these bytes as they are.
    Canned(&'static [u8]),
    /// Accepts an `Upgrade: echo` request with 101, then echoes bytes.
    Upgrade,
    /// Like `Ok` once the gate is open: requests wait (and count as busy)
    /// until the test calls [`Gate::open`].
    Gate(Gate),
}

/// A gate the test opens to let a `Mode::Gate` origin answer.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    pub fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }

    /// Makes the requests that come from now on wait again.
    pub fn close(&self) {
        *self.0 .0.lock().unwrap() = false;
    }

    fn wait(&self) {
        let mut g = self.0 .0.lock().unwrap();
        while !*g {
            g = self.0 .1.wait(g).unwrap();
        }
    }
}

pub struct Origin {
    pub addr: SocketAddr,
    pub name: String,
    /// Requests answered.
    pub requests: Arc<AtomicUsize>,
    /// Connections accepted.
    pub conns: Arc<AtomicUsize>,
    /// Requests being handled right now, and the most seen at once.
    pub busy: Arc<AtomicUsize>,
    pub max_busy: Arc<AtomicUsize>,
    /// Heads of the requests received.
    pub heads: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    /// The connections open now (by accept number), for
    /// [`Origin::close_all`]; one leaves when its thread ends.
    open: Arc<Mutex<Vec<(usize, TcpStream)>>>,
}

impl Origin {
    pub fn start(name: &str, mode: Mode) -> Origin {
        Origin::start_on("127.0.0.1:0", name, mode)
    }

    pub fn start_on(bind: &str, name: &str, mode: Mode) -> Origin {
        Origin::try_start_on(bind, name, mode).expect("origin bind")
    }

    /// [`Origin::start_on`], the bind's error returned (a port another
    /// process took first, for a caller that tries another).
    pub fn try_start_on(bind: &str, name: &str, mode: Mode) -> std::io::Result<Origin> {
        let l = TcpListener::bind(bind)?;
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let o = Origin {
            addr,
            name: name.to_string(),
            requests: Arc::default(),
            conns: Arc::default(),
            busy: Arc::default(),
            max_busy: Arc::default(),
            heads: Arc::default(),
            stop: Arc::default(),
            open: Arc::default(),
        };
        let (stop, conns, open) = (o.stop.clone(), o.conns.clone(), o.open.clone());
        let ctx = Shared {
            name: name.to_string(),
            mode,
            requests: o.requests.clone(),
            busy: o.busy.clone(),
            max_busy: o.max_busy.clone(),
            heads: o.heads.clone(),
            stop: o.stop.clone(),
        };
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((s, _)) => {
                        let id = conns.fetch_add(1, Ordering::SeqCst);
                        if let Ok(k) = s.try_clone() {
                            open.lock().unwrap().push((id, k));
                        }
                        let c = ctx.clone();
                        let open = open.clone();
                        std::thread::spawn(move || {
                            serve(s, c);
                            // Its copy goes too: the connection closes.
                            open.lock().unwrap().retain(|(i, _)| *i != id);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Ok(o)
    }

    /// Closes every connection accepted so far, as a server closing its
    /// idle connections does (their threads see EOF and end).
    pub fn close_all(&self) {
        for (_, c) in self.open.lock().unwrap().iter() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Whether a client (the proxy) still holds an established connection
    /// to it, from the kernel's table: when none is left, the closes it
    /// sent have reached the proxy's sockets.
    pub fn peer_established(&self) -> bool {
        let port = format!(":{:04X}", self.addr.port());
        let tab = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        tab.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[2].ends_with(&port) && f[3] == "01"
        })
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[derive(Clone)]
struct Shared {
    name: String,
    mode: Mode,
    requests: Arc<AtomicUsize>,
    busy: Arc<AtomicUsize>,
    max_busy: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

fn find(h: &[u8], pat: &[u8]) -> Option<usize> {
    h.windows(pat.len()).position(|w| w == pat)
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Reads one request (head and body; `buf` keeps what came after it);
/// None at EOF.
pub fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let mut tmp = [0u8; 65536];
    let end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        match super::retry_eintr(|| s.read(&mut tmp)) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end);
    let mut body = Vec::new();
    if let Some(cl) = header(&head, "content-length").and_then(|v| v.parse::<usize>().ok()) {
        while buf.len() < cl {
            match super::retry_eintr(|| s.read(&mut tmp)) {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
        body = buf.drain(..cl).collect();
    } else if header(&head, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        // Good enough for tests: data chunks then the last chunk.
        loop {
            let Some(le) = find(buf, b"\r\n") else {
                match super::retry_eintr(|| s.read(&mut tmp)) {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                }
                continue;
            };
            let size = usize::from_str_radix(
                std::str::from_utf8(&buf[..le])
                    .ok()?
                    .split(';')
                    .next()?
                    .trim(),
                16,
            )
            .ok()?;
            while buf.len() < le + 2 + size + 2 {
                match super::retry_eintr(|| s.read(&mut tmp)) {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => buf.extend_from_slice(&tmp[..n]),
                }
            }
            body.extend_from_slice(&buf[le + 2..le + 2 + size]);
            buf.drain(..le + 2 + size + 2);
            if size == 0 {
                break;
            }
        }
    }
    Some((head, body))
}

fn serve(mut s: TcpStream, c: Shared) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    // Every write goes out at once: a close (CloseIdle, Stall) never
    // finds a segment Nagle still holds back.
    let _ = s.set_nodelay(true);
    if matches!(c.mode, Mode::Close) {
        return;
    }
    let mut buf = Vec::new();
    while let Some((head, body)) = read_request(&mut s, &mut buf) {
        if c.stop.load(Ordering::SeqCst) {
            return;
        }
        c.heads.lock().unwrap().push(head.clone());
        let b = c.busy.fetch_add(1, Ordering::SeqCst) + 1;
        c.max_busy.fetch_max(b, Ordering::SeqCst);
        let path = head.split(' ').nth(1).unwrap_or("").to_string();
        let xff = header(&head, "x-forwarded-for").unwrap_or("-").to_string();
        let conn = header(&head, "connection").unwrap_or("-").to_string();
        let ok_body = format!("{} {}", c.name, path);
        let mut out = Vec::new();
        let mut close_after = None;
        match &c.mode {
            Mode::Ok | Mode::Slow(_) | Mode::CloseIdle(_) | Mode::Gate(_) => {
                if let Mode::Slow(d) = c.mode {
                    std::thread::sleep(d);
                }
                if let Mode::Gate(g) = &c.mode {
                    g.wait();
                }
                if let Mode::CloseIdle(d) = c.mode {
                    close_after = Some(d);
                }
                out.extend_from_slice(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nX-Got-XFF: {}\r\nX-Got-Connection: {}\r\nKeep-Alive: timeout=5\r\n\r\n{}",
                        ok_body.len(),
                        xff,
                        conn,
                        ok_body
                    )
                    .as_bytes(),
                );
                if head.starts_with("HEAD ") {
                    let cut = find(&out, b"\r\n\r\n").unwrap() + 4;
                    out.truncate(cut);
                }
            }
            Mode::Close => return,
            Mode::Garbage => out.extend_from_slice(b"this is not http\r\n\r\n"),
            Mode::Stall => {
                std::thread::sleep(Duration::from_secs(5));
                return;
            }
            Mode::BigChunked(n) => {
                out.extend_from_slice(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
                let _ = s.write_all(&out);
                out.clear();
                let chunk = vec![b'x'; 65536];
                let mut left = *n;
                while left > 0 {
                    let k = left.min(chunk.len());
                    if s.write_all(format!("{k:x}\r\n").as_bytes()).is_err()
                        || s.write_all(&chunk[..k]).is_err()
                        || s.write_all(b"\r\n").is_err()
                    {
                        return;
                    }
                    left -= k;
                }
                out.extend_from_slice(b"0\r\n\r\n");
            }
            Mode::Canned(answer) => out.extend_from_slice(answer),
            Mode::Echo => {
                out.extend_from_slice(
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(),
                );
                out.extend_from_slice(&body);
            }
            Mode::Upgrade => {
                let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n");
                let mut tmp = [0u8; 4096];
                if !buf.is_empty() {
                    let _ = s.write_all(&buf);
                }
                loop {
                    match super::retry_eintr(|| s.read(&mut tmp)) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&tmp[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        }
        c.requests.fetch_add(1, Ordering::SeqCst);
        c.busy.fetch_sub(1, Ordering::SeqCst);
        if s.write_all(&out).is_err() {
            return;
        }
        if let Some(d) = close_after {
            std::thread::sleep(d);
            return;
        }
    }
}
