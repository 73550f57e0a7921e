//! Stops and reloads under load lose nothing: graceful stop, master-worker
//! reloads (SIGUSR2 and the master CLI), `-sf` and `-x` hand-overs. Real
//! binary, loopback, keep-alive and new-connection clients counting every
//! request that went unanswered.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use common::origin::{Mode, Origin};
use common::{wait_until, Ebb};

/// What the clients saw.
#[derive(Default)]
struct Counts {
    ok: AtomicUsize,
    /// A request was sent and the connection ended before its answer.
    unanswered: AtomicUsize,
    /// A connect failed.
    refused: AtomicUsize,
    /// An answer that was not the origin's 200.
    bad: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

impl Counts {
    fn note(&self, what: String) {
        let mut e = self.errors.lock().unwrap();
        if e.len() < 10 {
            e.push(what);
        }
    }
}

/// Client threads sending GETs until told to stop: `keep` threads reuse
/// their connection while the server allows it, `fresh` threads open one
/// per request. Targets are read under a lock held while connecting, so
/// the test can take an address away and know no connect to it is under
/// way once the write lock is held.
struct Load {
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(
        targets: Arc<RwLock<Vec<SocketAddr>>>,
        keep: usize,
        fresh: usize,
        end_on_refusal: bool,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let mut threads = Vec::new();
        for i in 0..keep + fresh {
            let (stop, counts, targets) = (stop.clone(), counts.clone(), targets.clone());
            let reuse = i < keep;
            threads.push(std::thread::spawn(move || {
                client(i, reuse, &targets, &stop, &counts, end_on_refusal)
            }));
        }
        Load {
            stop,
            counts,
            threads,
        }
    }

    fn ok(&self) -> usize {
        self.counts.ok.load(Ordering::SeqCst)
    }

    /// Stops the clients; returns the counts.
    fn finish(self) -> Arc<Counts> {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
        self.counts
    }
}

fn client(
    i: usize,
    reuse: bool,
    targets: &RwLock<Vec<SocketAddr>>,
    stop: &AtomicBool,
    c: &Counts,
    end_on_refusal: bool,
) {
    let mut n = i;
    let req: &[u8] = if reuse {
        b"GET /k HTTP/1.1\r\nHost: t\r\n\r\n"
    } else {
        b"GET /f HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    };
    'conn: while !stop.load(Ordering::SeqCst) {
        let s = {
            let t = targets.read().unwrap();
            n += 1;
            let a = t[n % t.len()];
            TcpStream::connect(a).map_err(|e| (a, e))
        };
        let mut s = match s {
            Ok(s) => s,
            Err((a, e)) => {
                if end_on_refusal {
                    return;
                }
                c.refused.fetch_add(1, Ordering::SeqCst);
                c.note(format!("connect {a}: {e}"));
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        let mut buf = Vec::new();
        loop {
            if let Err(e) = s.write_all(req) {
                c.unanswered.fetch_add(1, Ordering::SeqCst);
                c.note(format!("write: {e}"));
                continue 'conn;
            }
            match read_answer(&mut s, &mut buf) {
                Ok((200, close)) => {
                    c.ok.fetch_add(1, Ordering::SeqCst);
                    if close || !reuse || stop.load(Ordering::SeqCst) {
                        continue 'conn;
                    }
                }
                Ok((st, _)) => {
                    c.bad.fetch_add(1, Ordering::SeqCst);
                    c.note(format!("status {st}"));
                    continue 'conn;
                }
                Err(e) => {
                    c.unanswered.fetch_add(1, Ordering::SeqCst);
                    c.note(format!("read: {e}"));
                    continue 'conn;
                }
            }
        }
    }
}

/// Reads one answer with a Content-Length body: (status, whether it says
/// `Connection: close`).
fn read_answer(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(u16, bool), String> {
    let mut tmp = [0u8; 16384];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match s.read(&mut tmp) {
            Ok(0) => return Err(format!("EOF after {} bytes", buf.len())),
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e) => return Err(e.to_string()),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|x| x.parse().ok())
        .ok_or("no status")?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or("no content-length")?;
    let close = head.lines().any(|l| l == "connection: close");
    while buf.len() < end + len {
        match s.read(&mut tmp) {
            Ok(0) => return Err("EOF in body".into()),
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e) => return Err(e.to_string()),
        }
    }
    buf.drain(..end + len);
    Ok((status, close))
}

fn assert_clean(c: &Counts, refused_ok: bool) {
    let (un, bad, refused) = (
        c.unanswered.load(Ordering::SeqCst),
        c.bad.load(Ordering::SeqCst),
        c.refused.load(Ordering::SeqCst),
    );
    let errs = c.errors.lock().unwrap().clone();
    assert_eq!(un, 0, "unanswered requests: {errs:?}");
    assert_eq!(bad, 0, "wrong answers: {errs:?}");
    if !refused_ok {
        assert_eq!(refused, 0, "refused connections: {errs:?}");
    }
}

fn proxy_cfg(global: &str, binds: &[&str], origin: SocketAddr) -> String {
    let mut s = format!(
        "global\n    nbthread 2\n{global}defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n    timeout http-keep-alive 30s\nfrontend fe\n"
    );
    for b in binds {
        s.push_str(&format!("    bind {b}\n"));
    }
    s.push_str(&format!(
        "    default_backend be\nbackend be\n    server s1 {origin}\n"
    ));
    s
}

/// SIGUSR1 under keep-alive load through the proxy: every request sent
/// gets its answer (the last one on each connection with `Connection:
/// close`); only connects after the listener closed fail.
#[test]
fn graceful_stop_answers_every_request_sent() {
    let o = Origin::start("o", Mode::Ok);
    let e = Ebb::start(&proxy_cfg("", &["BIND"], o.addr));
    let targets = Arc::new(RwLock::new(vec![e.addr()]));
    let load = Load::start(targets, 16, 4, true);
    wait_until("traffic flows", || load.ok() > 500);
    e.signal("USR1");
    let mut e = e;
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
    let c = load.finish();
    assert_clean(&c, true);
    assert_eq!(
        o.requests.load(Ordering::SeqCst),
        c.ok.load(Ordering::SeqCst)
    );
}
