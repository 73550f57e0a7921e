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
//!
//! No worker thread ever waits on a log target, as in HAProxy, which drops
//! a message rather than block: syslog sockets are non-blocking, and lines
//! for standard output and error go through a bounded queue to one writer
//! thread, so a reader that stops reading (a stalled log collector, a pipe
//! nobody drains) costs lines, counted in `show info`'s `DroppedLogs`,
//! never a worker. The queue is drained when the process ends.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::{LogDest, LogFormat, LogLevel, LogTarget};
pub use crate::syslog::{
    header, structured_data, Ident, LOG_ALERT, LOG_EMERG, LOG_ERR, LOG_INFO, LOG_NOTICE,
};

/// Where log lines go.
pub enum Sink {
    Stdout,
    Stderr,
    File(File),
    /// Syslog over UDP: one datagram per message, never blocking (a full
    /// socket buffer drops the message, as HAProxy does).
    Udp(UdpSocket, SocketAddr),
    /// A syslog UNIX datagram socket, addressed by path on every message
    /// (so a restarted syslog daemon is found again).
    Unix(UnixDatagram, PathBuf),
    /// A ring (`ring@NAME`, `tcp@`): messages take the ring's format.
    Ring(std::sync::Arc<crate::ring::Ring>),
    /// `fd@N`: an inherited descriptor, non-blocking unless a terminal
    /// (HAProxy's); a message it does not take at once is dropped.
    Fd(std::sync::Arc<File>),
}

/// The `fd@N` descriptors taken so far: every `log fd@N` line (and every
/// reload's) writes through the same one.
static LOG_FDS: std::sync::Mutex<Vec<(i32, std::sync::Arc<File>)>> =
    std::sync::Mutex::new(Vec::new());

/// The descriptor of `log fd@N`, taken on first use (it must be open).
fn log_fd(n: i32) -> io::Result<std::sync::Arc<File>> {
    let mut fds = LOG_FDS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, f)) = fds.iter().find(|(m, _)| *m == n) {
        return Ok(std::sync::Arc::clone(f));
    }
    let f = File::from(crate::sys::take_inherited_fd(n)?);
    if !std::io::IsTerminal::is_terminal(&f) {
        socket2::SockRef::from(&f).set_nonblocking(true)?;
    }
    let f = std::sync::Arc::new(f);
    fds.push((n, std::sync::Arc::clone(&f)));
    Ok(f)
}

impl Sink {
    /// Opens a destination (a file in append mode, created if missing; an
    /// unbound datagram socket for syslog).
    pub fn open(d: &LogDest) -> io::Result<Sink> {
        Ok(match d {
            LogDest::Stdout => Sink::Stdout,
            LogDest::Stderr => Sink::Stderr,
            LogDest::File(p) => Sink::File(open_append(p)?),
            LogDest::Udp(a) => {
                let local: SocketAddr = if a.is_ipv6() {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                } else {
                    (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
                };
                let s = UdpSocket::bind(local)?;
                s.set_nonblocking(true)?;
                Sink::Udp(s, *a)
            }
            LogDest::Unix(p) => {
                let s = UnixDatagram::unbound()?;
                s.set_nonblocking(true)?;
                Sink::Unix(s, p.clone())
            }
            LogDest::Ring(n) => Sink::Ring(crate::ring::find(n).ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("no ring named '{n}'"))
            })?),
            LogDest::Fd(n) => Sink::Fd(log_fd(*n)?),
        })
    }

    /// Writes one line (the newline is added here).
    pub fn line(&self, mut l: Vec<u8>) {
        l.push(b'\n');
        self.write(&l);
    }

    fn write(&self, l: &[u8]) {
        // A full disk, a closed pipe or an absent syslog daemon must not
        // stop the server: a log line is dropped rather than blocking or
        // failing the request.
        let r = match self {
            Sink::Stdout => return std_queue(false, l),
            Sink::Stderr => return std_queue(true, l),
            Sink::File(f) => (&*f).write_all(l),
            Sink::Udp(s, a) => s.send_to(l, a).map(drop),
            Sink::Unix(s, p) => s.send_to(l, p).map(drop),
            // One write: what it does not take is lost, as HAProxy's
            // writev.
            Sink::Fd(f) => (&**f).write(l).map(drop),
            Sink::Ring(r) => {
                r.write(
                    1,
                    LOG_INFO,
                    &Ident::default(),
                    None,
                    l.strip_suffix(b"\n").unwrap_or(l),
                );
                return;
            }
        };
        if matches!(&r, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Log messages dropped since start (`DroppedLogs`): a full syslog socket
/// buffer, or a full queue toward standard output or error.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Messages dropped since start.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Lines queued toward standard output and error at most; past it a line
/// is dropped.
const STD_QUEUE: usize = 65_536;

/// The queue toward the writer of standard output and error, and how many
/// lines it holds (for [`flush_std`]).
struct StdQueue {
    tx: SyncSender<(bool, Vec<u8>)>,
    pending: AtomicU64,
}

static STD: OnceLock<Option<StdQueue>> = OnceLock::new();

fn std_writer() -> Option<&'static StdQueue> {
    STD.get_or_init(|| {
        let (tx, rx) = sync_channel::<(bool, Vec<u8>)>(STD_QUEUE);
        std::thread::Builder::new()
            .name("ebb-log".into())
            .spawn(move || {
                while let Ok((err, l)) = rx.recv() {
                    write_std(err, &l);
                    if let Some(Some(q)) = STD.get() {
                        q.pending.fetch_sub(1, Ordering::AcqRel);
                    }
                }
            })
            .ok()?;
        Some(StdQueue {
            tx,
            pending: AtomicU64::new(0),
        })
    })
    .as_ref()
}

/// Writes a line to standard error (`err`) or output, blocking.
fn write_std(err: bool, l: &[u8]) {
    let _ = if err {
        io::stderr().lock().write_all(l)
    } else {
        io::stdout().lock().write_all(l)
    };
}

/// Hands a line to the writer thread; drops it when the queue is full.
fn std_queue(err: bool, l: &[u8]) {
    let Some(q) = std_writer() else {
        // No thread could be started: written here, as before.
        write_std(err, l);
        return;
    };
    q.pending.fetch_add(1, Ordering::AcqRel);
    if q.tx.try_send((err, l.to_vec())).is_err() {
        q.pending.fetch_sub(1, Ordering::AcqRel);
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Waits, at most `limit`, until the lines queued toward standard output
/// and error are written (the process is about to end).
pub fn flush_std(limit: std::time::Duration) {
    let Some(Some(q)) = STD.get() else { return };
    let end = std::time::Instant::now() + limit;
    while q.pending.load(Ordering::Acquire) > 0 && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn open_append(p: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(p)
}

fn level_num(l: LogLevel) -> u8 {
    l as u8
}

/// The facility's number (RFC 5424 table, HAProxy's names).
fn facility_num(f: &str) -> u8 {
    const NAMES: [&str; 24] = [
        "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "auth2",
        "ftp", "ntp", "audit", "alert", "cron2", "local0", "local1", "local2", "local3", "local4",
        "local5", "local6", "local7",
    ];
    NAMES.iter().position(|n| *n == f).unwrap_or(1) as u8
}

/// One `log` line, opened.
pub struct Target {
    sink: Sink,
    format: LogFormat,
    facility: u8,
    /// Messages less severe than this are not sent.
    level: u8,
    /// More severe messages are sent with this level.
    min_level: u8,
    max_len: usize,
    /// `sample`: ranges, size, and messages seen so far.
    sample: Option<(crate::config::LogSample, std::sync::atomic::AtomicU64)>,
}

impl Target {
    /// Whether the next message is in the sample (always without one).
    fn sampled(&self) -> bool {
        match &self.sample {
            None => true,
            Some((s, n)) => {
                let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let k = (i % u64::from(s.size.max(1))) as u32 + 1;
                s.ranges.iter().any(|&(lo, hi)| lo <= k && k <= hi)
            }
        }
    }

    /// Opens `t`; `host`: global `log-send-hostname` is set (a target
    /// without `format` then writes `rfc3164`'s header, with the host, as
    /// HAProxy's unspecified format).
    pub fn open(t: &LogTarget, host: bool) -> io::Result<Target> {
        Ok(Target {
            sink: Sink::open(&t.dest)?,
            format: if host && !t.format_given {
                LogFormat::Rfc3164
            } else {
                t.format
            },
            // No facility on the line (ebb allows that): syslog(3)'s user.
            facility: t.facility.as_deref().map_or(1, facility_num),
            level: t.level.map_or(7, level_num),
            min_level: t.min_level.map_or(0, level_num),
            max_len: t.max_len.max(80) as usize,
            sample: t
                .sample
                .clone()
                .map(|s| (s, std::sync::atomic::AtomicU64::new(0))),
        })
    }
}

/// Several targets (one per `log` line).
#[derive(Default)]
pub struct Logger {
    targets: Vec<Target>,
    ident: Ident,
}

impl Logger {
    pub fn new(targets: Vec<Target>, ident: Ident) -> Logger {
        Logger { targets, ident }
    }
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }
    /// An access-log line (level `info`, as HAProxy sends traffic logs).
    pub fn line(&self, l: Vec<u8>) {
        self.send(LOG_INFO, &l);
    }
    /// Sends `msg` at `level` to every target that takes that level.
    pub fn send(&self, level: u8, msg: &[u8]) {
        self.send_sd(level, msg, None);
    }

    /// [`Logger::send`] with the RFC 5424 structured data `sd` (a
    /// frontend's `log-format-sd`), written by `rfc5424` targets only;
    /// `None` or empty: `-`.
    pub fn send_sd(&self, level: u8, msg: &[u8], sd: Option<&[u8]>) {
        if self.targets.is_empty() {
            return;
        }
        let now = SystemTime::now();
        for t in &self.targets {
            if level > t.level || !t.sampled() {
                continue;
            }
            let lv = level.max(t.min_level);
            if let Sink::Ring(r) = &t.sink {
                // The ring writes its own header (HAProxy's sink format);
                // the line's `len` cuts the message first.
                let mut m = msg;
                while let Some((&b, rest)) = m.split_last() {
                    if b != b'\n' && b != 0 {
                        break;
                    }
                    m = rest;
                }
                r.write(
                    t.facility,
                    lv,
                    &self.ident,
                    sd,
                    &m[..m.len().min(t.max_len)],
                );
                continue;
            }
            let mut out = Vec::with_capacity(64 + msg.len());
            header(&mut out, t.format, t.facility, lv, &self.ident, now);
            if t.format == LogFormat::Rfc5424 {
                structured_data(&mut out, sd);
            }
            out.extend_from_slice(msg);
            while out.last().is_some_and(|&b| b == b'\n' || b == 0) {
                out.pop();
            }
            out.truncate(t.max_len);
            out.push(b'\n');
            t.sink.write(&out);
        }
    }
}

/// `dd/Mon/yyyy:HH:MM:SS.mmm` in UTC.
pub fn fmt_date(t: SystemTime, out: &mut Vec<u8>) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days((secs / 86_400) as i64);
    let sod = secs % 86_400;
    let _ = write!(
        out,
        "{:02}/{}/{}:{:02}:{:02}:{:02}.{:03}",
        day,
        crate::calendar::month_abbr(m),
        y,
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        d.subsec_millis()
    );
}

use crate::calendar::civil_from_days;
pub use crate::sample::logline::Entry;

/// Formats an access-log line: the frontend's `log-format`, else
/// HAProxy's `option httplog` format.
pub fn format(e: &Entry<'_>) -> Vec<u8> {
    let fmt = match e.fmt {
        Some(f) => f,
        None => crate::sample::logline::httplog(),
    };
    let dst = || e.local;
    let ctx = crate::sample::Ctx {
        src: e.client,
        dst: &dst,
        fe: e.frontend,
        be: Some(e.backend),
        srv: (e.server != "<NOSRV>").then_some(e.server),
        tls: e.tls,
        sni: e.client_cert.and_then(|c| c.facts.sni),
        client_cert: e.client_cert,
        req: None,
        res: None,
        vars: e.vars,
        payload: None,
        res_body: None,
        fc: e.fc,
        early: false,
        stk: None,
    };
    let mut out = Vec::with_capacity(160 + e.request_line.len());
    fmt.render(e, &ctx, &mut out);
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
            client_cert: None,
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
            bytes_in: 0,
            txn: true,
            term: "--",
            actconn: 3,
            feconn: 2,
            request_line: b"GET /a\"b\r\n\\ HTTP/1.1",
            request_date: None,
            local: None,
            tls: false,
            cookie_flags: "--",
            h2: false,
            vars: None,
            ncaps: (0, 0),
            fmt: None,
            asap: false,
            fc: None,
        });
        if crate::sys::utc_offset(0) != 0 {
            // The date below is UTC; HAProxy writes local time.
            return;
        }
        // HAProxy's httplog line: '"', '#' and control bytes of the
        // request line as #XX (its url_encode_map), the backslash kept.
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "127.0.0.1:4000 [01/Jan/1970:00:00:00.000] fe be/<files> 1/-1/-1/0/2 200 10 - - ---- 3/2/0/0/0 0/0 \"GET /a#22b#0D#0A\\ HTTP/1.1\""
        );
    }

    fn hdr(f: LogFormat) -> String {
        let id = Ident {
            tag: "ebb".into(),
            host: None,
        };
        let mut v = Vec::new();
        // 2026-11-03 04:05:06.789012 UTC; local0 (16), info (6).
        let t = UNIX_EPOCH + Duration::from_micros(1_793_678_706_789_012);
        header(&mut v, f, 16, 6, &id, t);
        if f == LogFormat::Rfc5424 {
            structured_data(&mut v, None);
        }
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn structured_data_loses_trailing_spaces_and_defaults_to_dash() {
        let sd = |s: Option<&[u8]>| {
            let mut v = Vec::new();
            structured_data(&mut v, s);
            String::from_utf8(v).unwrap()
        };
        assert_eq!(sd(None), "- ");
        assert_eq!(sd(Some(b"  ")), "- ");
        assert_eq!(sd(Some(b"[x@1 b=\"2\"]  ")), "[x@1 b=\"2\"] ");
    }

    #[test]
    fn syslog_headers_as_haproxy_writes_them() {
        let pid = crate::sys::pid();
        if crate::sys::utc_offset(1_793_678_706) != 0 {
            // The dates below are UTC; another zone shifts them.
            return;
        }
        assert_eq!(
            hdr(LogFormat::Local),
            format!("<134>Nov  3 04:05:06 ebb[{pid}]: ")
        );
        assert_eq!(
            hdr(LogFormat::Rfc3164),
            format!("<134>Nov  3 04:05:06 localhost ebb[{pid}]: ")
        );
        assert_eq!(
            hdr(LogFormat::Rfc5424),
            format!("<134>1 2026-11-03T04:05:06.789012+00:00 - ebb {pid} - - ")
        );
        assert_eq!(hdr(LogFormat::Priority), "<134>");
        assert_eq!(hdr(LogFormat::Short), "<6>");
        assert_eq!(
            hdr(LogFormat::Timed),
            "<6>2026-11-03T04:05:06.789012+00:00 "
        );
        assert_eq!(hdr(LogFormat::Iso), "2026-11-03T04:05:06.789012+00:00 ");
        assert_eq!(hdr(LogFormat::Raw), "");
    }

    #[test]
    fn levels_filter_and_minlevel_and_len() {
        let dir = std::env::temp_dir().join(format!("ebb-log-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let p = dir.join("l.log");
        let t = |level, min_level, max_len| crate::config::LogTarget {
            dest: LogDest::File(p.clone()),
            facility: Some("local0".into()),
            level,
            min_level,
            loc: crate::config::Loc {
                file: "t".into(),
                line: 1,
            },
            format: LogFormat::Short,
            format_given: true,
            max_len,
            sample: None,
        };
        let l = Logger::new(
            vec![
                Target::open(&t(Some(LogLevel::Notice), None, 1024), false).unwrap(),
                Target::open(&t(None, Some(LogLevel::Err), 80), false).unwrap(),
            ],
            Ident::default(),
        );
        l.send(LOG_INFO, b"info");
        l.send(LOG_ALERT, b"alert");
        l.send(LOG_INFO, &[b'x'; 200]);
        let got = std::fs::read_to_string(&p).unwrap();
        let x77 = "x".repeat(77);
        // info passes the second target only; alert both, lowered to err
        // by the second; the long line is cut to 80 bytes with its header.
        assert_eq!(got, format!("<6>info\n<1>alert\n<3>alert\n<6>{x77}\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sample_sends_the_numbered_messages_of_each_cycle() {
        let dir = std::env::temp_dir().join(format!("ebb-logs-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let p = dir.join("s.log");
        let t = crate::config::LogTarget {
            dest: LogDest::File(p.clone()),
            facility: None,
            level: None,
            min_level: None,
            loc: crate::config::Loc {
                file: "t".into(),
                line: 1,
            },
            format: LogFormat::Raw,
            format_given: true,
            max_len: 1024,
            sample: Some(crate::config::LogSample {
                ranges: vec![(1, 1), (3, 3)],
                size: 5,
            }),
        };
        let l = Logger::new(vec![Target::open(&t, false).unwrap()], Ident::default());
        for i in 1..=10 {
            l.line(format!("m{i}").into_bytes());
        }
        // HAProxy's reg-test log/load_balancing: `sample 1,3:5`.
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "m1\nm3\nm6\nm8\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
