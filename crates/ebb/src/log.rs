//! Access and event logs.
//!
//! One line per request in HAProxy's `httplog` layout, so the tools people
//! already run on HAProxy logs read ebb's:
//!
//! ```text
//! 127.0.0.1:40312 [22/Nov/2026:00:05:12.123] fe be/<files> 0/-1/-1/0/0 200 1234 - - ---- 1/1/0/0/0 0/0 "GET / HTTP/1.1"
//! ```
//!
//! Fields: client address, accept date (UTC, ms), frontend, backend/server
//! (`<files>` when ebb served the file, `<NOSRV>` for answers made by a
//! rule), timers Tq/Tw/Tc/Tr/Tt in ms (`-1` where a phase did not happen:
//! no queue and no connect for local answers), status, bytes sent,
//! captured cookies (none: `- -`), termination state (`----` or a
//! two-letter cause for errors), connection counts (process/frontend/
//! backend/server/retries), queue positions, the request line.
//!
//! Each line goes out in a single `write` (atomic for a file opened in
//! append mode and for lines under `PIPE_BUF` on a pipe), so threads need no
//! lock to share a target.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::LogDest;

/// Where log lines go.
pub enum Sink {
    Stdout,
    Stderr,
    File(File),
}

impl Sink {
    /// Opens a destination (a file in append mode, created if missing).
    pub fn open(d: &LogDest) -> io::Result<Sink> {
        Ok(match d {
            LogDest::Stdout => Sink::Stdout,
            LogDest::Stderr => Sink::Stderr,
            LogDest::File(p) => Sink::File(open_append(p)?),
        })
    }

    /// Writes one line (the newline is added here).
    pub fn line(&self, mut l: Vec<u8>) {
        l.push(b'\n');
        // A full disk or a closed pipe must not stop the server: a log line
        // is dropped rather than blocking or failing the request.
        let _ = match self {
            Sink::Stdout => io::stdout().lock().write_all(&l),
            Sink::Stderr => io::stderr().lock().write_all(&l),
            Sink::File(f) => (&*f).write_all(&l),
        };
    }
}

fn open_append(p: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(p)
}

/// Several sinks (one per `log` line).
#[derive(Default)]
pub struct Logger {
    sinks: Vec<Sink>,
}

impl Logger {
    pub fn new(sinks: Vec<Sink>) -> Logger {
        Logger { sinks }
    }
    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }
    pub fn line(&self, l: Vec<u8>) {
        if let Some((last, rest)) = self.sinks.split_last() {
            for s in rest {
                s.line(l.clone());
            }
            last.line(l);
        }
    }
}

/// `dd/Mon/yyyy:HH:MM:SS.mmm` in UTC.
pub fn fmt_date(t: SystemTime, out: &mut Vec<u8>) {
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days((secs / 86_400) as i64);
    let sod = secs % 86_400;
    let _ = write!(
        out,
        "{:02}/{}/{}:{:02}:{:02}:{:02}.{:03}",
        day,
        MON[(m - 1) as usize],
        y,
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        d.subsec_millis()
    );
}

/// Days since 1970-01-01 to (year, month 1..=12, day 1..=31), Howard
/// Hinnant's `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The pieces of one access-log line.
pub struct Entry<'a> {
    pub client: std::net::SocketAddr,
    pub accept: SystemTime,
    pub frontend: &'a str,
    pub backend: &'a str,
    pub server: &'a str,
    pub tq: i64,
    pub tw: i64,
    pub tc: i64,
    pub tr: i64,
    pub tt: i64,
    pub status: u16,
    pub bytes: u64,
    /// Two letters: who ended the session and in which state; `--`.
    pub term: &'a str,
    pub actconn: u32,
    pub feconn: u32,
    pub request_line: &'a [u8],
}

/// Formats an access-log line.
pub fn format(e: &Entry<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + e.request_line.len());
    let _ = write!(out, "{} [", e.client);
    fmt_date(e.accept, &mut out);
    let _ = write!(
        out,
        "] {} {}/{} {}/{}/{}/{}/{} {} {} - - {}-- {}/{}/0/0/0 0/0 \"",
        e.frontend,
        e.backend,
        e.server,
        e.tq,
        e.tw,
        e.tc,
        e.tr,
        e.tt,
        e.status,
        e.bytes,
        e.term,
        e.actconn,
        e.feconn
    );
    // The request line as received, with control bytes escaped so a line
    // cannot be split or forged through the log.
    for &b in e.request_line {
        if b < 0x20 || b == 0x7f || b == b'"' || b == b'\\' {
            let _ = write!(out, "#{:02X}", b);
        } else {
            out.push(b);
        }
    }
    out.push(b'"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_are_utc_with_millis() {
        let mut v = Vec::new();
        fmt_date(UNIX_EPOCH + Duration::from_millis(951_782_400_123), &mut v);
        assert_eq!(String::from_utf8(v).unwrap(), "29/Feb/2000:00:00:00.123");
        let mut v = Vec::new();
        fmt_date(UNIX_EPOCH + Duration::from_secs(1_795_305_599), &mut v);
        assert_eq!(String::from_utf8(v).unwrap(), "21/Nov/2026:23:59:59.000");
    }

    #[test]
    fn line_layout_and_escaping() {
        let l = format(&Entry {
            client: "127.0.0.1:4000".parse().unwrap(),
            accept: UNIX_EPOCH,
            frontend: "fe",
            backend: "be",
            server: "<files>",
            tq: 1,
            tw: -1,
            tc: -1,
            tr: 0,
            tt: 2,
            status: 200,
            bytes: 10,
            term: "--",
            actconn: 3,
            feconn: 2,
            request_line: b"GET /a\"b\r\n HTTP/1.1",
        });
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "127.0.0.1:4000 [01/Jan/1970:00:00:00.000] fe be/<files> 1/-1/-1/0/2 200 10 - - ---- 3/2/0/0/0 0/0 \"GET /a#22b#0D#0A HTTP/1.1\""
        );
    }
}
