//! `show errors`: the last invalid request of each frontend and the last
//! invalid answer of each backend, as HAProxy 2.6 keeps them
//! (`proxy_capture_error`) and prints them (`cli_io_handler_show_errors`).
//!
//! A capture is taken only when a message is refused by the HTTP/1 parser,
//! or accepted thanks to `option accept-invalid-http-request|response`:
//! never on the valid path. Each proxy keeps one per direction (a new one
//! replaces the old), at most `tune.bufsize` bytes of what its buffer held.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::Compiled;

/// Events captured since start (HAProxy's `error_snapshot_id`): each
/// capture's number, and the total `show errors` prints.
static EVENTS: AtomicU32 = AtomicU32::new(0);

/// A proxy on the other side of the exchange, or its server: name and id.
pub type Named = Option<(String, i64)>;

/// One captured message.
pub struct Snapshot {
    when: SystemTime,
    event: u32,
    src: Option<SocketAddr>,
    /// The backend (for a request: none, as the HTTP/1 layer captures it
    /// before a stream picks one) or the frontend (for an answer).
    other: Named,
    server: Named,
    /// `tune.bufsize` when captured.
    bufsize: usize,
    bytes: Box<[u8]>,
    err_pos: usize,
}

/// The last capture of one proxy in one direction.
#[derive(Default)]
pub struct Capture(Mutex<Option<Arc<Snapshot>>>);

impl Capture {
    /// Keeps `bytes` (at most `bufsize` of them) as this proxy's last
    /// invalid message; `err_pos` is the offset of the byte at fault.
    #[cold]
    pub fn store(
        &self,
        bytes: &[u8],
        err_pos: usize,
        bufsize: usize,
        src: Option<SocketAddr>,
        other: Named,
        server: Named,
    ) {
        let snap = Snapshot {
            when: SystemTime::now(),
            event: EVENTS.fetch_add(1, Ordering::Relaxed),
            src,
            other,
            server,
            bufsize,
            bytes: bytes[..bytes.len().min(bufsize)].into(),
            err_pos,
        };
        if let Ok(mut g) = self.0.lock() {
            *g = Some(Arc::new(snap));
        }
    }

    fn get(&self) -> Option<Arc<Snapshot>> {
        self.0.lock().ok().and_then(|g| g.clone())
    }
}

/// `src ADDR:PORT` as HAProxy writes it (an IPv6 address without
/// brackets; `unix:0` for a client of a UNIX socket).
fn src_text(s: Option<SocketAddr>) -> String {
    match s {
        Some(a) => format!("{}:{}", a.ip(), a.port()),
        None => "unix:0".into(),
    }
}

fn named(n: &Named) -> (&str, i64) {
    match n {
        Some((name, id)) => (name, *id),
        None => ("<NONE>", -1),
    }
}

/// HAProxy's `dump_text_line`: the bytes from `ptr` to the end of their
/// line, at most 79 characters a line (a longer one goes on in the next,
/// its offset followed by `+`), each byte printable ASCII but `\` as it
/// is, `\t` `\n` `\r` `\e` `\\` so, the others `\xNN`. Returns where it
/// stopped and whether that is a line's start.
fn dump_line(out: &mut String, buf: &[u8], mut ptr: usize, bol: bool) -> (usize, bool) {
    let start = out.len();
    let end = start + 80;
    let _ = write!(out, "  {ptr:05}{} ", if bol { ' ' } else { '+' });
    while ptr < buf.len() {
        let c = buf[ptr];
        let room = end - out.len().min(end);
        if (0x20..0x7f).contains(&c) && c != b'\\' {
            if room < 2 {
                break;
            }
            out.push(c as char);
        } else if matches!(c, b'\t' | b'\n' | b'\r' | 0x1b | b'\\') {
            if room < 3 {
                break;
            }
            out.push('\\');
            out.push(match c {
                b'\t' => 't',
                b'\n' => 'n',
                b'\r' => 'r',
                0x1b => 'e',
                _ => '\\',
            });
        } else {
            if room < 5 {
                break;
            }
            let _ = write!(out, "\\x{c:02x}");
        }
        ptr += 1;
        if c == b'\n' {
            out.push('\n');
            return (ptr, true);
        }
    }
    out.push('\n');
    (ptr, false)
}

fn date(t: SystemTime, out: &mut String) {
    let mut v = Vec::new();
    crate::sample::logline::fmt_local_ms(t, &mut v);
    out.push_str(&String::from_utf8_lossy(&v));
}

/// One snapshot, as HAProxy prints it.
fn dump(out: &mut String, s: &Snapshot, px: (&str, usize), response: bool) {
    out.push_str(" \n[");
    date(s.when, out);
    out.push(']');
    let (oname, oid) = named(&s.other);
    if response {
        let _ = write!(
            out,
            " backend {} (#{}): invalid response\n  frontend {oname} (#{oid})",
            px.0, px.1
        );
    } else {
        let _ = write!(
            out,
            " frontend {} (#{}): invalid request\n  backend {oname} (#{oid})",
            px.0, px.1
        );
    }
    let (sname, sid) = named(&s.server);
    let len = s.bytes.len();
    // ebb's buffer does not wrap and a capture starts at the message's
    // first byte: nothing forwarded before it, the wrap at the buffer's end.
    let _ = write!(
        out,
        ", server {sname} (#{sid}), event #{}, src {}\n  buffer starts at 0 (including 0 out), {} free,\n  len {len}, wraps at {}, error at position {}\n  \n",
        s.event,
        src_text(s.src),
        s.bufsize.saturating_sub(len),
        s.bufsize,
        s.err_pos,
    );
    let (mut ptr, mut bol) = (0, true);
    while ptr < len {
        let (p, b) = dump_line(out, &s.bytes, ptr, bol);
        if p == ptr {
            break;
        }
        (ptr, bol) = (p, b);
    }
}

/// `show errors [<iid>|<proxy>] [request|response]`.
pub fn show(c: &Compiled, args: &[&str]) -> Result<String, String> {
    let iid: i64 = match args.first() {
        None => -1,
        Some(a) => {
            let by_name = c
                .frontends
                .iter()
                .map(|f| (&f.name, f.uuid))
                .chain(c.backends.iter().map(|b| (&b.name, b.uuid)))
                .find(|(n, _)| n.as_str() == *a)
                .map(|(_, id)| id as i64);
            // HAProxy's `atoi`: leading digits (and sign), else 0.
            let n = by_name.unwrap_or_else(|| atoi(a));
            if n == 0 {
                return Err("No such proxy.\n".into());
            }
            n
        }
    };
    let (want_req, want_resp) = match args.get(1) {
        Some(&"request") => (true, false),
        Some(&"response") => (false, true),
        _ => (true, true),
    };
    let mut out = String::from("Total events captured on [");
    date(SystemTime::now(), &mut out);
    let _ = writeln!(out, "] : {}", EVENTS.load(Ordering::Relaxed));
    // Proxies in id order, each its request then its answer.
    let mut ids: Vec<usize> = c
        .frontends
        .iter()
        .map(|f| f.uuid)
        .chain(c.backends.iter().map(|b| b.uuid))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let other_is = |s: &Snapshot| s.other.as_ref().is_some_and(|o| o.1 == iid);
    for id in ids {
        if want_req {
            for f in c.frontends.iter().filter(|f| f.uuid == id) {
                if let Some(s) = f.invalid_req.get() {
                    if iid < 0 || id as i64 == iid || other_is(&s) {
                        dump(&mut out, &s, (&f.name, id), false);
                    }
                }
            }
        }
        if want_resp {
            for b in c.backends.iter().filter(|b| b.uuid == id) {
                if let Some(s) = b.invalid_rep.get() {
                    if iid < 0 || id as i64 == iid || other_is(&s) {
                        dump(&mut out, &s, (&b.name, id), true);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// C's `atoi`: optional blanks, a sign, the digits that follow; 0 when
/// none.
fn atoi(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits: String = t
        .chars()
        .take_while(char::is_ascii_digit)
        .take(18)
        .collect();
    let n = digits.parse::<i64>().unwrap_or(0);
    if neg {
        -n
    } else {
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_haproxys() {
        let mut o = String::new();
        let buf = b"GET /a#b HTTP/1.1\r\nHost: x\r\n\r\n";
        let mut p = (0, true);
        while p.0 < buf.len() {
            p = dump_line(&mut o, buf, p.0, p.1);
        }
        assert_eq!(
            o,
            "  00000  GET /a#b HTTP/1.1\\r\\n\n  00019  Host: x\\r\\n\n  00028  \\r\\n\n"
        );
        // A long line breaks at 79 characters, the rest after `+`.
        let long = [b'a'; 100];
        let mut o = String::new();
        let (p, bol) = dump_line(&mut o, &long, 0, true);
        assert_eq!((o.len(), p, bol), (80, 70, false));
        let mut o = String::new();
        dump_line(&mut o, &long, p, bol);
        assert!(o.starts_with("  00070+ aaa"));
        assert_eq!(atoi("-1"), -1);
        assert_eq!(atoi("x"), 0);
        assert_eq!(atoi("3abc"), 3);
    }
}
