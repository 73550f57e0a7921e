//! Health checks.
//!
//! Each server with `check` has one **shared task** (it may run on any
//! thread: it lives in the scheduler's shared run and wait queues). On its
//! timer it hands the check itself to a small pool of blocking threads
//! reserved for checks (a TCP connect, and for `option httpchk` one HTTP
//! request and its status line), so a slow or silent server never holds an
//! event loop; the pool's completion wakes the task, which counts
//! successes and failures against `rise` and `fall`, changes the server's
//! state, logs the change with its reason, and sets its next date: `inter`
//! while stable, `fastinter` while the state is in doubt, `downinter`
//! while DOWN.
//!
//! When a server goes DOWN, the streams waiting in its queue pick another
//! server; when it comes back UP, the backend's waiters are offered its
//! slots and `slowstart` ramps its weight from its UP date.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use regex::bytes::Regex;
use sched::{ticks, Ctx, Reasons, RuntimeHandle, Status, TaskId};

use super::{Farm, ServerRt};
use crate::blocking::Submitter;
use crate::config::{ExpectKind, HttpCheck};

/// What an HTTP check sends and expects, prepared once.
#[derive(Clone)]
pub struct HttpProbe {
    pub request: Vec<u8>,
    pub expect: Expect,
}

#[derive(Clone)]
pub enum Expect {
    /// 2xx and 3xx, HAProxy's default.
    Default,
    Status(Vec<(u16, u16)>, bool),
    RStatus(Regex, bool),
    String(Vec<u8>, bool),
    RString(Regex, bool),
}

impl HttpProbe {
    /// Builds the probe of `option httpchk` / `http-check` lines.
    pub fn new(c: &HttpCheck, host: &str) -> Result<HttpProbe, String> {
        let mut req = format!(
            "{} {} {}\r\n",
            if c.method.is_empty() {
                "OPTIONS"
            } else {
                &c.method
            },
            if c.uri.is_empty() { "/" } else { &c.uri },
            if c.version.is_empty() {
                "HTTP/1.0"
            } else {
                &c.version
            }
        );
        let mut has_host = false;
        for (n, v) in &c.headers {
            has_host |= n.eq_ignore_ascii_case("host");
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        if !has_host && c.version.eq_ignore_ascii_case("HTTP/1.1") {
            req.push_str(&format!("Host: {host}\r\n"));
        }
        req.push_str("Connection: close\r\n\r\n");
        let expect = match &c.expect {
            None => Expect::Default,
            Some(e) => match &e.kind {
                ExpectKind::Status(r) => Expect::Status(r.clone(), e.negate),
                ExpectKind::RStatus(p) => Expect::RStatus(
                    Regex::new(p).map_err(|x| format!("invalid rstatus '{p}': {x}"))?,
                    e.negate,
                ),
                ExpectKind::String(s) => Expect::String(s.as_bytes().to_vec(), e.negate),
                ExpectKind::RString(p) => Expect::RString(
                    Regex::new(p).map_err(|x| format!("invalid rstring '{p}': {x}"))?,
                    e.negate,
                ),
            },
        };
        Ok(HttpProbe {
            request: req.into_bytes(),
            expect,
        })
    }
}

/// What a check does after its connect: an HTTP exchange (`option
/// httpchk`) or a `tcp-check` sequence (`option tcp-check`).
#[derive(Clone)]
pub enum Probe {
    Http(HttpProbe),
    Tcp(Arc<TcpProbe>),
}

/// A compiled `tcp-check` sequence.
pub struct TcpProbe {
    steps: Vec<TcpStep>,
}

struct TcpStep {
    /// HAProxy's step number (`at step N`): the rule's position from 1;
    /// 0 for the implicit connect.
    id: usize,
    kind: StepKind,
    comment: Option<String>,
}

enum StepKind {
    Comment,
    Connect {
        /// The server's check settings (implicit connect, `default`).
        default: bool,
        port: Option<u16>,
        addr: Option<std::net::IpAddr>,
        send_proxy: bool,
    },
    Send(Vec<u8>),
    Expect {
        m: TcpMatch,
        /// The pattern as HAProxy reports it (`'OK'`, ` (binary)`...).
        text: String,
        negate: bool,
        min_recv: Option<usize>,
    },
}

enum TcpMatch {
    Bytes(Vec<u8>),
    Regex(Regex),
}

/// The largest answer a tcp-check reads (HAProxy's buffer size).
const CHECK_BUF: usize = 16 * 1024;

impl TcpProbe {
    /// Compiles `tcp-check` rules; without a `connect` first (comments
    /// aside) an implicit one opens the sequence, as in HAProxy.
    pub fn new(c: &crate::config::TcpCheck) -> Result<TcpProbe, String> {
        use crate::config::{ExpectMatch, TcpCheckStep};
        let mut steps = Vec::new();
        let first = c.rules.iter().find(|r| r.step != TcpCheckStep::Comment);
        if !matches!(first, Some(r) if matches!(r.step, TcpCheckStep::Connect { .. })) {
            steps.push(TcpStep {
                id: 0,
                kind: StepKind::Connect {
                    default: true,
                    port: None,
                    addr: None,
                    send_proxy: false,
                },
                comment: None,
            });
        }
        for (i, r) in c.rules.iter().enumerate() {
            let kind = match &r.step {
                TcpCheckStep::Comment => StepKind::Comment,
                TcpCheckStep::Connect {
                    default,
                    port,
                    addr,
                    send_proxy,
                } => StepKind::Connect {
                    default: *default,
                    port: *port,
                    addr: *addr,
                    send_proxy: *send_proxy,
                },
                TcpCheckStep::Send(d) => StepKind::Send(d.clone()),
                TcpCheckStep::Expect {
                    kind,
                    pattern,
                    negate,
                    min_recv,
                } => {
                    let (m, text) = match kind {
                        ExpectMatch::String => (
                            TcpMatch::Bytes(pattern.clone()),
                            format!(" '{}'", String::from_utf8_lossy(pattern)),
                        ),
                        ExpectMatch::Binary => {
                            (TcpMatch::Bytes(pattern.clone()), " (binary)".to_string())
                        }
                        ExpectMatch::RString => {
                            let src = String::from_utf8_lossy(pattern);
                            let re = Regex::new(&src)
                                .map_err(|e| format!("invalid rstring '{src}': {e}"))?;
                            (TcpMatch::Regex(re), " (regex)".to_string())
                        }
                    };
                    StepKind::Expect {
                        m,
                        text,
                        negate: *negate,
                        min_recv: *min_recv,
                    }
                }
            };
            steps.push(TcpStep {
                id: i + 1,
                kind,
                comment: r.comment.clone(),
            });
        }
        Ok(TcpProbe { steps })
    }
}

/// A check's connection, clear or TLS.
trait Wire: Read + Write {}
impl<T: Read + Write> Wire for T {}

/// Connects for a check: TCP, a PROXY header first when `proxy_hdr`
/// holds one, then a TLS handshake when `tls` is set; everything within
/// `timeout` from `start`.
fn open(
    addr: SocketAddr,
    start: Instant,
    timeout: Duration,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
) -> Result<Box<dyn Wire>, String> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("Layer4 connection problem: {}", os_text(&e)))?;
    // Every read and write below is bounded by what is left of `timeout`.
    let left = timeout
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(1));
    let _ = s.set_read_timeout(Some(left));
    let _ = s.set_write_timeout(Some(left));
    if !proxy_hdr.is_empty() {
        s.write_all(proxy_hdr)
            .map_err(|e| format!("Layer4 connection problem: PROXY header: {e}"))?;
    }
    let Some((cfg, sni)) = tls else {
        return Ok(Box::new(s));
    };
    let name = rustls::pki_types::ServerName::try_from(sni.clone())
        .map_err(|e| format!("Layer6 invalid server name: {e}"))?;
    let conn = rustls::ClientConnection::new(Arc::clone(cfg), name)
        .map_err(|e| format!("Layer6 TLS setup: {e}"))?;
    let mut t = rustls::StreamOwned::new(conn, s);
    while t.conn.is_handshaking() {
        if start.elapsed() > timeout {
            return Err("Layer6 timeout during TLS handshake".into());
        }
        t.conn
            .complete_io(&mut t.sock)
            .map_err(|e| format!("Layer6 invalid response: TLS handshake: {e}"))?;
    }
    Ok(Box::new(t))
}

/// An I/O error as HAProxy words it: the system's text without Rust's
/// ` (os error N)`.
fn os_text(e: &std::io::Error) -> String {
    let t = e.to_string();
    match t.rfind(" (os error ") {
        Some(i) if t.ends_with(')') => t[..i].to_string(),
        _ => t,
    }
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Runs a `tcp-check` sequence against `addr` within `timeout`. Ok: the
/// status text HAProxy reports (`L7OK` after an expect or a send, `L4OK`
/// when the last step is a connect, each with `(tcp-check)`). Err: the
/// failure, as `Layer4 connection problem: ...`, `Layer7 invalid
/// response: TCPCHK did not match content 'X' at step N` and the like.
pub fn run_tcp_check(
    addr: SocketAddr,
    timeout: Duration,
    probe: &TcpProbe,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
) -> Result<String, String> {
    let start = Instant::now();
    let mut conn: Option<Box<dyn Wire>> = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut must_read = true;
    let mut closed = false;
    let mut last = "L7OK";
    for st in &probe.steps {
        let at = |what: &str| {
            let mut m = if st.id == 0 {
                " at initial connection step of tcp-check".to_string()
            } else {
                format!(" at step {} of tcp-check{what}", st.id)
            };
            if let Some(c) = &st.comment {
                m.push_str(&format!(" comment: '{c}'"));
            }
            m
        };
        match &st.kind {
            StepKind::Comment => continue,
            StepKind::Connect {
                default,
                port,
                addr: a,
                send_proxy,
            } => {
                drop(conn.take());
                let mut target = addr;
                if let Some(a) = a {
                    target.set_ip(*a);
                }
                if let Some(p) = port {
                    target.set_port(*p);
                }
                let hdr: Vec<u8> = if *send_proxy {
                    crate::proxyproto::header_for(1, None)
                } else if *default {
                    proxy_hdr.to_vec()
                } else {
                    Vec::new()
                };
                let tls = if *default { tls } else { None };
                let what = match port {
                    Some(p) => format!(" (connect port {p})"),
                    None => " (connect)".to_string(),
                };
                conn = Some(open(target, start, timeout, tls, &hdr).map_err(|e| e + &at(&what))?);
                buf.clear();
                must_read = true;
                closed = false;
                last = "L4OK";
            }
            StepKind::Send(d) => {
                let Some(c) = conn.as_mut() else {
                    return Err(format!(
                        "Layer7 send failed: no connection{}",
                        at(" (send)")
                    ));
                };
                c.write_all(d)
                    .and_then(|()| c.flush())
                    .map_err(|e| format!("Layer7 send failed: {e}{}", at(" (send)")))?;
                buf.clear();
                must_read = true;
                closed = false;
                last = "L7OK";
            }
            StepKind::Expect {
                m,
                text,
                negate,
                min_recv,
            } => {
                let Some(c) = conn.as_mut() else {
                    return Err(format!("Layer7 invalid response: no connection{}", at("")));
                };
                let what = match m {
                    TcpMatch::Bytes(_) if text.starts_with(" '") => {
                        format!(" (expect string{text})")
                    }
                    TcpMatch::Bytes(_) => " (expect binary)".to_string(),
                    TcpMatch::Regex(_) => " (expect regex)".to_string(),
                };
                loop {
                    if must_read && !closed {
                        if start.elapsed() > timeout {
                            return Err(format!(
                                "Layer7 timeout or read error: timed out{}",
                                at(&what)
                            ));
                        }
                        let mut tmp = [0u8; 4096];
                        match c.read(&mut tmp) {
                            Ok(0) => closed = true,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(e) if timed_out(&e) => {
                                return Err(format!(
                                    "Layer7 timeout or read error: timed out{}",
                                    at(&what)
                                ))
                            }
                            Err(e) => {
                                return Err(format!(
                                    "Layer7 timeout or read error: {e}{}",
                                    at(&what)
                                ))
                            }
                        }
                        must_read = false;
                    }
                    let final_read = closed || buf.len() >= CHECK_BUF;
                    let need = match m {
                        TcpMatch::Bytes(p) => p.len(),
                        TcpMatch::Regex(_) => 0,
                    };
                    if !final_read && (buf.len() < need || min_recv.is_some_and(|n| buf.len() < n))
                    {
                        must_read = true;
                        continue;
                    }
                    let found = match m {
                        TcpMatch::Bytes(p) => {
                            !p.is_empty() && buf.windows(p.len()).any(|w| w == p.as_slice())
                        }
                        TcpMatch::Regex(re) => re.is_match(&buf),
                    };
                    if !found && !final_read && min_recv.is_none() {
                        must_read = true;
                        continue;
                    }
                    if found != *negate {
                        break;
                    }
                    let mut msg = if buf.is_empty() {
                        format!("TCPCHK got an empty response at step {}", st.id)
                    } else {
                        format!(
                            "{}{text} at step {}",
                            if found {
                                "TCPCHK matched unwanted content"
                            } else {
                                "TCPCHK did not match content"
                            },
                            st.id
                        )
                    };
                    if let Some(cm) = &st.comment {
                        msg.push_str(&format!(" comment: {cm}"));
                    }
                    return Err(format!("Layer7 invalid response: {msg}"));
                }
                last = "L7OK";
            }
        }
    }
    Ok(format!("{last}: (tcp-check)"))
}

/// The probe of a backend's checks: `option httpchk`, `option
/// tcp-check` (the last given wins), or none (a plain connect). `tcp-check`
/// rules without `option tcp-check` are refused (HAProxy would not run
/// them).
pub fn probe_for<'a>(
    p: &'a crate::config::Proxy,
    host: &str,
) -> Result<Option<Probe>, (&'a crate::config::Loc, String)> {
    if p.http_check.enabled {
        return HttpProbe::new(&p.http_check, host)
            .map(|h| Some(Probe::Http(h)))
            .map_err(|e| (&p.loc, e));
    }
    if p.tcp_check.enabled {
        return TcpProbe::new(&p.tcp_check)
            .map(|t| Some(Probe::Tcp(Arc::new(t))))
            .map_err(|e| (&p.loc, e));
    }
    match p.tcp_check.rules.first() {
        Some(r) => Err((
            &r.loc,
            format!(
                "'tcp-check' rules in backend '{}' need 'option tcp-check' (checks would not run them)",
                p.name
            ),
        )),
        None => Ok(None),
    }
}

/// Judges an HTTP check response (status line, and body for strings).
pub fn judge(resp: &[u8], expect: &Expect) -> Result<(), String> {
    let line_end = resp
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or("Layer7 invalid response: no status line")?;
    let line = &resp[..line_end];
    let mut parts = line.splitn(3, |&c| c == b' ');
    let ver = parts.next().unwrap_or(b"");
    if !ver.starts_with(b"HTTP/1.") {
        return Err("Layer7 invalid response: not HTTP".into());
    }
    let code_b = parts.next().unwrap_or(b"");
    let code: u16 = std::str::from_utf8(code_b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("Layer7 invalid response: bad status")?;
    let body = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| &resp[i + 4..])
        .unwrap_or(b"");
    let ok = match expect {
        Expect::Default => (200..400).contains(&code),
        Expect::Status(r, neg) => r.iter().any(|(a, b)| (*a..=*b).contains(&code)) != *neg,
        Expect::RStatus(re, neg) => re.is_match(code_b) != *neg,
        Expect::String(s, neg) => {
            (!s.is_empty() && body.windows(s.len()).any(|w| w == s.as_slice())) != *neg
        }
        Expect::RString(re, neg) => re.is_match(body) != *neg,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("Layer7 wrong status, code: {code}"))
    }
}

/// TLS for the checks of an `ssl` server: client configuration and name.
pub type CheckTls = (Arc<rustls::ClientConfig>, String);

/// The PROXY header a check sends first (`check-send-proxy`, or a server
/// with `send-proxy[-v2]`, HAProxy's rule): v1 `UNKNOWN` or a v2 LOCAL
/// command, since a check relays no client. Empty: none.
pub fn check_proxy_header(o: &crate::config::ServerOptions) -> Vec<u8> {
    if o.send_proxy == 0 && !o.check_send_proxy {
        return Vec::new();
    }
    crate::proxyproto::header_for(o.send_proxy.max(1), None)
}

/// One check, blocking: connect (a PROXY header first when `proxy_hdr`
/// holds one, then a TLS handshake for an `ssl` server), then the probe
/// (an HTTP exchange or a `tcp-check` sequence) within `timeout`. Ok:
/// the status text to report.
pub fn run_check(
    addr: SocketAddr,
    timeout: Duration,
    probe: Option<&Probe>,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
) -> Result<String, String> {
    if let Some(Probe::Tcp(t)) = probe {
        return run_tcp_check(addr, timeout, t, tls, proxy_hdr);
    }
    let start = Instant::now();
    let s = open(addr, start, timeout, tls, proxy_hdr)?;
    let http = match probe {
        Some(Probe::Http(p)) => Some(p),
        _ => None,
    };
    exchange(s, start, timeout, http).map(|()| "L7OK".to_string())
}

/// The HTTP part of a check, over TCP or TLS.
fn exchange<S: Read + Write>(
    mut s: S,
    start: Instant,
    timeout: Duration,
    probe: Option<&HttpProbe>,
) -> Result<(), String> {
    let Some(p) = probe else {
        return Ok(());
    };
    s.write_all(&p.request)
        .and_then(|()| s.flush())
        .map_err(|e| format!("Layer7 send failed: {e}"))?;
    let mut buf = Vec::with_capacity(1024);
    let mut tmp = [0u8; 4096];
    // Read until the server closes (we asked it to), the head is complete
    // and no string match needs the body, or 16 KiB arrived.
    let need_body = matches!(p.expect, Expect::String(..) | Expect::RString(..));
    while start.elapsed() <= timeout {
        match s.read(&mut tmp) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&tmp[..n]);
                if buf.len() >= 16 * 1024 {
                    break;
                }
                if !need_body && buf.windows(2).any(|w| w == b"\r\n") {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                if buf.is_empty() {
                    return Err(format!("Layer7 timeout or read error: {e}"));
                }
                break;
            }
        }
    }
    judge(&buf, &p.expect)
}

/// Logs a check event.
pub type LogFn = Arc<dyn Fn(String) + Send + Sync>;

struct Checker {
    srv: Weak<ServerRt>,
    farm: Weak<Farm>,
    probe: Option<Probe>,
    tls: Option<CheckTls>,
    timeout: Duration,
    pool: Submitter,
    handle: RuntimeHandle,
    result: Arc<Mutex<Option<Result<String, String>>>>,
    in_flight: bool,
    /// Consecutive successes while DOWN / failures while UP.
    streak: u32,
    log: LogFn,
    /// `option log-health-checks`: log each change of the check's status.
    log_checks: bool,
    /// When the check in flight started (its duration is logged).
    started: Instant,
}

impl Checker {
    fn interval(&self, s: &ServerRt) -> Duration {
        let o = &s.opts;
        if !s.up.load(Ordering::Relaxed) {
            if self.streak > 0 {
                o.fastinter.unwrap_or(o.inter)
            } else {
                o.downinter.unwrap_or(o.inter)
            }
        } else if self.streak > 0 {
            o.fastinter.unwrap_or(o.inter)
        } else {
            o.inter
        }
    }

    fn apply(&mut self, s: &Arc<ServerRt>, r: Result<String, String>) {
        let up = s.up.load(Ordering::Relaxed);
        let status = match &r {
            Ok(t) => t.clone(),
            Err(e) => e.clone(),
        };
        let l4_only = status.starts_with("L4OK");
        let changed = match s.check_status.lock() {
            Ok(mut cs) => {
                let changed = *cs != status;
                *cs = status;
                changed
            }
            Err(_) => false,
        };
        let failed = r.as_ref().err().cloned();
        // A server's change of state is logged after the check line that
        // caused it, in HAProxy's order.
        let mut transition = None;
        // Whether HAProxy's health counter moves: a failure while any
        // health is left, a success while not at full health.
        let moved = match (up, &r) {
            (true, Err(_)) | (false, Ok(_)) => true,
            _ => self.streak > 0,
        };
        let ok = r.is_ok();
        match (up, r) {
            (true, Ok(_)) | (false, Err(_)) => self.streak = 0,
            (true, Err(e)) => {
                self.streak += 1;
                if self.streak >= s.opts.fall.max(1) {
                    s.up.store(false, Ordering::Relaxed);
                    self.streak = 0;
                    transition = Some(format!(
                        "Server {}/{} is DOWN, reason: {e}. {} active servers left.",
                        s.backend,
                        s.name,
                        self.farm.upgrade().map_or(0, |f| f
                            .servers
                            .iter()
                            .filter(|x| x.usable())
                            .count())
                    ));
                    if let Some(f) = self.farm.upgrade() {
                        f.redispatch_queue_of(s);
                    }
                }
            }
            (false, Ok(_)) => {
                self.streak += 1;
                if self.streak >= s.opts.rise.max(1) {
                    s.up_since.set(Instant::now());
                    s.up.store(true, Ordering::Relaxed);
                    self.streak = 0;
                    transition = Some(format!(
                        "Server {}/{} is UP, reason: check passed.",
                        s.backend, s.name
                    ));
                    if let Some(f) = self.farm.upgrade() {
                        f.kick_backend_queue();
                    }
                }
            }
        }
        s.ext.on_check(ok, up, s.up.load(Ordering::Relaxed));
        if self.log_checks && (changed || moved) {
            self.log_check(s, failed, l4_only);
        }
        if let Some(t) = transition {
            (self.log)(t);
        }
    }

    /// HAProxy's `option log-health-checks` line: the result, its reason
    /// and the health counter as `a/b UP|DOWN` (successes needed to come
    /// up while DOWN; failures left before going down while UP).
    fn log_check(&self, s: &ServerRt, failed: Option<String>, l4_only: bool) {
        let o = &s.opts;
        let (rise, fall) = (o.rise.max(1), o.fall.max(1));
        let up = s.up.load(Ordering::Relaxed);
        let (a, b) = if up {
            (fall.saturating_sub(self.streak), fall)
        } else {
            (self.streak, rise)
        };
        let reason = match &failed {
            Some(e) => e.clone(),
            None if self.probe.is_some() && !l4_only => "Layer7 check passed".to_string(),
            None => "Layer4 check passed".to_string(),
        };
        (self.log)(format!(
            "Health check for {}server {}/{} {}, reason: {reason}, check duration: {}ms, status: {a}/{b} {}.",
            if o.backup { "backup " } else { "" },
            s.backend,
            s.name,
            if failed.is_some() {
                "failed"
            } else {
                "succeeded"
            },
            self.started.elapsed().as_millis(),
            if up { "UP" } else { "DOWN" }
        ));
    }

    fn run(&mut self, ctx: &mut Ctx, me: TaskId, _why: Reasons) -> Status {
        let Some(s) = self.srv.upgrade() else {
            return Status::Done; // the configuration it belonged to is gone
        };
        if s.is_deleted() {
            return Status::Done;
        }
        let on = s.check_on.load(Ordering::Relaxed);
        if self.in_flight {
            let r = self.result.lock().ok().and_then(|mut g| g.take());
            match r {
                Some(r) => {
                    self.in_flight = false;
                    // `disable health` meanwhile: the result is ignored.
                    if on {
                        self.apply(&s, r);
                    }
                }
                None => {
                    // Woken by the timer while the check runs: wait for it.
                    ctx.set_expire(me, ticks::add(ctx.now(), 100));
                    return Status::Continue;
                }
            }
        } else if let Some(addr) = s.addr().filter(|_| on) {
            let result = Arc::clone(&self.result);
            let probe = self.probe.clone();
            let tls = self.tls.clone();
            let timeout = self.timeout;
            let handle = self.handle.clone();
            let srv = self.srv.clone();
            let pp = check_proxy_header(&s.opts);
            let job = move || {
                let t0 = Instant::now();
                let r = run_check(addr, timeout, probe.as_ref(), tls.as_ref(), &pp);
                if let Some(s) = srv.upgrade() {
                    s.ext.check_took(t0.elapsed());
                }
                if let Ok(mut g) = result.lock() {
                    *g = Some(r);
                }
                handle.wake_task(me, Reasons::RES);
            };
            if self.pool.submit(job).is_ok() {
                self.in_flight = true;
                self.started = Instant::now();
                // A guard date: the job ends within `timeout`.
                let guard = self.timeout + Duration::from_millis(100);
                ctx.set_expire(me, ticks::add(ctx.now(), guard.as_millis() as u32));
                return Status::Continue;
            }
        }
        let next = self.interval(&s);
        ctx.set_expire(
            me,
            ticks::add(ctx.now(), next.as_millis().min(u32::MAX as u128 / 2) as u32),
        );
        Status::Continue
    }
}

/// What checks of a farm need, kept for servers added at run time.
pub struct CheckCtx {
    probe: Option<Probe>,
    timeout: Option<Duration>,
    pool: Submitter,
    handle: RuntimeHandle,
    log: LogFn,
    log_checks: bool,
}

/// Starts the checks of a farm's servers that have `check`. Returns the
/// tasks (for tests and stats).
pub fn start(
    farm: &Arc<Farm>,
    probe: Option<Probe>,
    timeout: Option<Duration>,
    pool: &Submitter,
    handle: &RuntimeHandle,
    log: LogFn,
    log_checks: bool,
) -> Vec<TaskId> {
    let _ = farm.check_ctx.set(CheckCtx {
        probe,
        timeout,
        pool: pool.clone(),
        handle: handle.clone(),
        log,
        log_checks,
    });
    farm.servers
        .iter()
        .filter_map(|s| start_server(farm, s))
        .collect()
}

/// Starts the check task of one server with `check` (a server added at
/// run time: once the farm's checks started).
pub fn start_server(farm: &Arc<Farm>, s: &Arc<ServerRt>) -> Option<TaskId> {
    let cx = farm.check_ctx.get()?;
    // A server without an address yet (resolvers, `set server ... addr`)
    // is checked once it has one.
    if !s.opts.check {
        return None;
    }
    // HAProxy bounds a check by `timeout check`, else by `inter`.
    let t = cx
        .timeout
        .unwrap_or(s.opts.inter)
        .max(Duration::from_millis(10));
    let mut c = Checker {
        srv: Arc::downgrade(s),
        farm: Arc::downgrade(farm),
        probe: cx.probe.clone(),
        tls: s
            .tls
            .as_ref()
            .map(|t| (Arc::clone(&t.config), t.sni.clone())),
        timeout: t,
        pool: cx.pool.clone(),
        handle: cx.handle.clone(),
        result: Arc::new(Mutex::new(None)),
        in_flight: false,
        streak: 0,
        log: Arc::clone(&cx.log),
        log_checks: cx.log_checks,
        started: Instant::now(),
    };
    let id = cx
        .handle
        .new_shared_task("health_check", u64::MAX, move |ctx: &mut Ctx, me, why| {
            c.run(ctx, me, why)
        });
    cx.handle.wake_task(id, Reasons::INIT);
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judging_http_answers() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let bad = b"HTTP/1.1 503 Service Unavailable\r\n\r\n";
        assert!(judge(ok, &Expect::Default).is_ok());
        assert!(judge(bad, &Expect::Default).unwrap_err().contains("503"));
        assert!(judge(bad, &Expect::Status(vec![(500, 599)], false)).is_ok());
        assert!(judge(ok, &Expect::Status(vec![(200, 200)], true)).is_err());
        assert!(judge(ok, &Expect::RStatus(Regex::new("^2").unwrap(), false)).is_ok());
        assert!(judge(ok, &Expect::String(b"ok".to_vec(), false)).is_ok());
        assert!(judge(ok, &Expect::String(b"nope".to_vec(), false)).is_err());
        assert!(judge(b"garbage", &Expect::Default).is_err());
        assert!(judge(b"SSH-2.0\r\n", &Expect::Default).is_err());
    }

    #[test]
    fn probe_request() {
        let c = HttpCheck {
            enabled: true,
            method: "GET".into(),
            uri: "/health".into(),
            version: "HTTP/1.1".into(),
            headers: vec![],
            expect: None,
        };
        let p = HttpProbe::new(&c, "10.0.0.1:80").unwrap();
        assert_eq!(
            String::from_utf8(p.request).unwrap(),
            "GET /health HTTP/1.1\r\nHost: 10.0.0.1:80\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn tcp_and_http_checks_against_real_sockets() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten().take(2) {
                let mut b = [0u8; 512];
                let _ = s.read(&mut b);
                let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\nalive");
            }
        });
        assert!(run_check(addr, Duration::from_secs(2), None, None, &[]).is_ok());
        let probe = Probe::Http(HttpProbe {
            request: b"GET / HTTP/1.0\r\n\r\n".to_vec(),
            expect: Expect::String(b"alive".to_vec(), false),
        });
        assert!(run_check(addr, Duration::from_secs(2), Some(&probe), None, &[]).is_ok());
        // Nothing listens on a port we just released.
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let e = run_check(dead, Duration::from_millis(500), None, None, &[]).unwrap_err();
        assert!(e.starts_with("Layer4"), "{e}");
    }
}
