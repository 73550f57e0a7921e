//! Rings (HAProxy 2.6's sinks of type buffer): in-memory buffers of log
//! messages that `log ring@NAME` writes to, `show events NAME` prints,
//! and forwarders send to syslog servers over TCP.
//!
//! A ring keeps HAProxy's byte count: `size` bytes hold one counter byte,
//! then per message a counter byte, its length as HAProxy's varint and the
//! message. A message that does not fit pushes the oldest out, unless a
//! forwarder has not sent that one yet: then the new message is dropped
//! and counted; the next write that fits first stores `N events dropped`
//! (level notice), as HAProxy's `sink_announce_dropped`.
//!
//! A forwarder is a thread of its own with blocking sockets (a worker never
//! waits on it): it connects (`timeout connect`), sends every message from
//! the oldest the ring holds when it first connects, then each new one
//! (`MSG\n`, or `LEN MSG` with `log-proto octet-count`), with `timeout
//! server` on each write, and connects again a second after a failure,
//! where it was.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use crate::config::ring::{RingSection, RingServer, DEFAULT_SIZE};
use crate::config::LogFormat;
use crate::syslog::Ident;

/// Bytes of HAProxy's varint encoding of `v` (`varint_bytes`).
fn varint_bytes(mut v: u64) -> usize {
    let mut len = 1;
    if v >= 240 {
        v = (v - 240) >> 4;
        loop {
            len += 1;
            if v < 128 {
                break;
            }
            v = (v - 128) >> 7;
        }
    }
    len
}

struct State {
    msgs: VecDeque<Vec<u8>>,
    /// The number of the oldest message held.
    first: u64,
    /// Bytes used, HAProxy's way (starts at 1: the tail counter).
    data: usize,
    /// Each forwarder's next message, once it has connected.
    readers: Vec<Option<u64>>,
    /// Messages that found no room since the last announcement.
    dropped: u64,
    /// What `show events -w` connections want run at the next message,
    /// one per connection (its token).
    waiters: Vec<(u64, Box<dyn FnOnce() + Send>)>,
}

impl State {
    fn end(&self) -> u64 {
        self.first + self.msgs.len() as u64
    }
}

/// One ring.
pub struct Ring {
    pub name: String,
    pub description: String,
    format: LogFormat,
    maxlen: usize,
    size: usize,
    st: Mutex<State>,
    cv: Condvar,
}

impl Ring {
    fn new(name: &str, description: &str, format: LogFormat, maxlen: usize, size: usize) -> Ring {
        Ring {
            name: name.to_string(),
            description: description.to_string(),
            format,
            maxlen,
            size,
            st: Mutex::new(State {
                msgs: VecDeque::new(),
                first: 0,
                data: 1,
                readers: Vec::new(),
                dropped: 0,
                waiters: Vec::new(),
            }),
            cv: Condvar::new(),
        }
    }

    /// Stores `m` (cut to `maxlen`); false when there is no room.
    fn put(&self, st: &mut State, mut m: Vec<u8>) -> bool {
        m.truncate(self.maxlen);
        let need = varint_bytes(m.len() as u64) + m.len() + 1;
        if need + 1 > self.size {
            return false;
        }
        while self.size - st.data < need {
            if st.readers.contains(&Some(st.first)) {
                return false;
            }
            let Some(old) = st.msgs.pop_front() else {
                return false;
            };
            st.data -= 1 + varint_bytes(old.len() as u64) + old.len();
            st.first += 1;
        }
        st.data += need;
        st.msgs.push_back(m);
        true
    }

    /// The ring's header for a message at `level` of `facility`.
    fn header(&self, out: &mut Vec<u8>, facility: u8, level: u8, id: &Ident, sd: Option<&[u8]>) {
        if self.format == LogFormat::Raw {
            return;
        }
        crate::syslog::header(out, self.format, facility, level, id, SystemTime::now());
        if self.format == LogFormat::Rfc5424 {
            crate::syslog::structured_data(out, sd);
        }
    }

    /// Writes one log message in the ring's format; a message that finds
    /// no room is counted as dropped.
    pub fn write(&self, facility: u8, level: u8, id: &Ident, sd: Option<&[u8]>, msg: &[u8]) {
        let Ok(mut st) = self.st.lock() else { return };
        if st.dropped > 0 {
            let n = st.dropped;
            let mut m = Vec::new();
            self.header(&mut m, facility, crate::syslog::LOG_NOTICE, id, None);
            m.extend_from_slice(
                format!("{n} event{} dropped", if n > 1 { "s" } else { "" }).as_bytes(),
            );
            if !self.put(&mut st, m) {
                st.dropped += 1;
                return;
            }
            st.dropped = 0;
        }
        let mut m = Vec::with_capacity(64 + msg.len());
        self.header(&mut m, facility, level, id, sd);
        m.extend_from_slice(msg);
        if self.put(&mut st, m) {
            self.cv.notify_all();
            for (_, w) in st.waiters.drain(..) {
                w();
            }
        } else {
            st.dropped += 1;
        }
    }

    /// The messages held, oldest first (none with `new_only`: `-n`).
    pub fn events(&self, new_only: bool) -> Vec<Vec<u8>> {
        match self.st.lock() {
            Ok(st) if !new_only => st.msgs.iter().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// The messages from number `from` on (from the oldest held if those
    /// are gone; `None`: the oldest, or the end with `new_only`), and the
    /// number of the next one.
    pub fn events_from(&self, from: Option<u64>, new_only: bool) -> (Vec<Vec<u8>>, u64) {
        let Ok(st) = self.st.lock() else {
            return (Vec::new(), from.unwrap_or(0));
        };
        let from = match from {
            Some(f) => f.max(st.first),
            None if new_only => st.end(),
            None => st.first,
        };
        let skip = (from.min(st.end()) - st.first) as usize;
        (
            st.msgs.iter().skip(skip).cloned().collect(),
            st.end().max(from),
        )
    }

    /// Runs `wake` at the first message numbered `next` or later: now if
    /// it is there, else when it is written. A connection's (`token`)
    /// earlier request is replaced.
    pub fn wait_after(&self, next: u64, token: u64, wake: Box<dyn FnOnce() + Send>) {
        let Ok(mut st) = self.st.lock() else { return };
        st.waiters.retain(|(t, _)| *t != token);
        if st.end() > next {
            drop(st);
            wake();
        } else {
            st.waiters.push((token, wake));
        }
    }

    /// Forgets a connection's request.
    pub fn unwait(&self, token: u64) {
        if let Ok(mut st) = self.st.lock() {
            st.waiters.retain(|(t, _)| *t != token);
        }
    }

    /// Messages dropped since the last announcement.
    pub fn dropped(&self) -> u64 {
        self.st.lock().map_or(0, |s| s.dropped)
    }
}

/// The rings of this process: `buf0` (HAProxy's built-in one: 1 MiB,
/// `timed`), then the configuration's.
static RINGS: RwLock<Vec<Arc<Ring>>> = RwLock::new(Vec::new());

/// The ring of that name.
pub fn find(name: &str) -> Option<Arc<Ring>> {
    RINGS.read().ok()?.iter().find(|r| r.name == name).cloned()
}

/// Every ring, in HAProxy's order.
pub fn all() -> Vec<Arc<Ring>> {
    RINGS.read().map(|r| r.clone()).unwrap_or_default()
}

/// The forwarders [`install`] made, which [`start_forwarders`] starts.
type Pending = (
    Arc<Ring>,
    usize,
    RingServer,
    Option<Duration>,
    Option<Duration>,
);
static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());

/// Makes the configuration's rings (kept when a ring of that name exists
/// already) and their forwarders, started by [`start_forwarders`] (after
/// `daemon`'s fork: no thread may run before it).
pub fn install(rings: &[RingSection]) {
    // The `debug` converter's lines to a ring.
    crate::sample::set_ring_writer(|name, line| {
        if let Some(r) = find(name) {
            r.write(0, 0, &crate::syslog::Ident::default(), None, line);
        }
    });
    let Ok(mut all) = RINGS.write() else { return };
    if all.is_empty() {
        all.push(Arc::new(Ring::new(
            "buf0",
            "in-memory ring buffer",
            LogFormat::Timed,
            DEFAULT_SIZE,
            1_048_576,
        )));
    }
    for r in rings {
        if all.iter().any(|x| x.name == r.name) {
            continue;
        }
        let ring = Arc::new(Ring::new(
            &r.name,
            &r.description,
            r.format,
            r.maxlen,
            r.size,
        ));
        for s in &r.servers {
            let Ok(mut st) = ring.st.lock() else { continue };
            st.readers.push(None);
            let idx = st.readers.len() - 1;
            drop(st);
            if let Ok(mut p) = PENDING.lock() {
                p.push((
                    ring.clone(),
                    idx,
                    s.clone(),
                    r.timeout_connect,
                    r.timeout_server,
                ));
            }
        }
        all.push(ring);
    }
}

/// Starts the forwarders [`install`] made.
pub fn start_forwarders() {
    let Ok(mut p) = PENDING.lock() else { return };
    for (ring, idx, srv, tc, ts) in p.drain(..) {
        let _ = std::thread::Builder::new()
            .name(format!("ebb-ring-{}", ring.name))
            .spawn(move || forward(&ring, idx, &srv, tc, ts));
    }
}

/// A forwarder's loop: connect, send, wait for more; connect again a
/// second after a failure.
fn forward(ring: &Ring, idx: usize, srv: &RingServer, tc: Option<Duration>, ts: Option<Duration>) {
    loop {
        let conn = match tc {
            Some(t) => TcpStream::connect_timeout(&srv.addr, t),
            None => TcpStream::connect(srv.addr),
        };
        if let Ok(mut c) = conn {
            let _ = c.set_write_timeout(ts);
            let _ = c.set_nodelay(true);
            send_all(ring, idx, srv, &mut c);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Whether the server closed its side (what it sent is read and thrown
/// away, as HAProxy does).
fn closed(c: &mut TcpStream) -> bool {
    if c.set_nonblocking(true).is_err() {
        return true;
    }
    let mut b = [0u8; 512];
    let gone = loop {
        match c.read(&mut b) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break true,
        }
    };
    gone || c.set_nonblocking(false).is_err()
}

/// Sends the ring's messages on `c` until the connection fails.
fn send_all(ring: &Ring, idx: usize, srv: &RingServer, c: &mut TcpStream) {
    loop {
        let (batch, from) = {
            let Ok(mut st) = ring.st.lock() else { return };
            // The first connection starts at the oldest message held.
            let pos = match st.readers.get(idx).copied().flatten() {
                Some(p) => p.max(st.first),
                None => st.first,
            };
            if let Some(r) = st.readers.get_mut(idx) {
                *r = Some(pos);
            }
            while st.end() == pos {
                let Ok((s, _)) = ring.cv.wait_timeout(st, Duration::from_secs(1)) else {
                    return;
                };
                st = s;
                if st.end() == pos {
                    drop(st);
                    if closed(c) {
                        return;
                    }
                    st = match ring.st.lock() {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                }
            }
            let skip = (pos - st.first) as usize;
            let batch: Vec<Vec<u8>> = st.msgs.iter().skip(skip).cloned().collect();
            (batch, pos)
        };
        let mut out = Vec::new();
        for m in &batch {
            if srv.octet_count {
                out.extend_from_slice(format!("{} ", m.len()).as_bytes());
                out.extend_from_slice(m);
            } else {
                out.extend_from_slice(m);
                out.push(b'\n');
            }
        }
        if c.write_all(&out).is_err() {
            return;
        }
        if let Ok(mut st) = ring.st.lock() {
            if let Some(r) = st.readers.get_mut(idx) {
                *r = Some(from + batch.len() as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Ident {
        Ident {
            tag: "t".into(),
            host: None,
        }
    }

    #[test]
    fn varints_as_haproxy_counts_them() {
        assert_eq!(varint_bytes(0), 1);
        assert_eq!(varint_bytes(239), 1);
        assert_eq!(varint_bytes(240), 2);
        assert_eq!(varint_bytes(240 + 16 * 128 - 1), 2);
        assert_eq!(varint_bytes(240 + 16 * 128), 3);
    }

    #[test]
    fn a_full_ring_drops_the_oldest_unless_a_reader_holds_it() {
        let r = Ring::new("r", "r", LogFormat::Raw, 100, 100);
        // Each 30-byte message costs 32 bytes; 1 byte is the tail counter.
        for i in 0..4u8 {
            r.write(1, 6, &id(), None, &[b'a' + i; 30]);
        }
        let ev = r.events(false);
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[0], vec![b'b'; 30]);
        // A reader at the oldest: the next message is dropped, counted,
        // then announced once there is room again.
        r.st.lock().unwrap().readers.push(Some(1));
        r.write(1, 6, &id(), None, b"x");
        assert_eq!(r.dropped(), 0);
        r.write(1, 6, &id(), None, &[b'y'; 60]);
        assert_eq!(r.dropped(), 1);
        r.st.lock().unwrap().readers[0] = Some(5);
        r.write(1, 6, &id(), None, b"z");
        let ev = r.events(false);
        assert_eq!(
            ev[ev.len() - 2..],
            [b"1 event dropped".to_vec(), b"z".to_vec()]
        );
        // Longer than maxlen: cut; larger than the ring: dropped.
        let r = Ring::new("r", "r", LogFormat::Raw, 10, 16_384);
        r.write(1, 6, &id(), None, b"0123456789abc");
        assert_eq!(r.events(false), [b"0123456789".to_vec()]);
        assert!(r.events(true).is_empty());
    }
}
