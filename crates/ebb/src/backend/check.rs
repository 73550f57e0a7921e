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

use super::tcpcheck::TcpProbe;
use super::{Farm, ServerRt};
use crate::blocking::Submitter;
use crate::config::{CheckConnect, CheckStatus, ExpectKind, HttpCheck};

/// An HTTP check's sequence, prepared once: connects, requests and
/// expect rules (HAProxy's `http-check` ruleset).
#[derive(Clone)]
pub struct HttpProbe {
    pub steps: Vec<HttpStep>,
    /// `http-check send-state`: each request carries
    /// `X-Haproxy-Server-State`.
    pub send_state: bool,
}

#[derive(Clone)]
pub enum HttpStep {
    Connect(CheckConnect),
    Send(Vec<u8>),
    /// A request with log-format parts (`uri-lf`, `body-lf`, header
    /// values), rendered at each check.
    SendFmt(Box<ReqFmt>),
    Expect(HttpRule),
    /// `http-check set-var|set-var-fmt|unset-var`.
    Var(crate::sample::VarAction),
}

/// An expect rule with its reporting options.
#[derive(Clone)]
pub struct HttpRule {
    pub expect: Expect,
    pub min_recv: Option<usize>,
    pub ok_status: CheckStatus,
    pub error_status: Option<CheckStatus>,
    pub tout_status: CheckStatus,
    pub comment: Option<String>,
}

impl HttpRule {
    fn plain(expect: Expect) -> HttpRule {
        HttpRule {
            expect,
            min_recv: None,
            ok_status: CheckStatus::L7Ok,
            error_status: None,
            tout_status: CheckStatus::L7Tout,
            comment: None,
        }
    }
}

#[derive(Clone)]
pub enum Expect {
    /// 2xx and 3xx, HAProxy's default.
    Default,
    Status(Vec<(u16, u16)>, bool),
    RStatus(Regex, bool),
    String(Vec<u8>, bool),
    RString(Regex, bool),
    /// `hdr` / `fhdr` (`full`), negated or not.
    Hdr {
        full: bool,
        name: HdrPat,
        value: Option<HdrPat>,
        neg: bool,
    },
}

/// A header name or value pattern of `http-check expect hdr`: fixed, or
/// a log-format string (`name-lf`, `value-lf`) rendered at each check
/// into a pattern of the same method.
#[derive(Clone)]
pub enum HdrPat {
    Fixed(NameMatch),
    Fmt(crate::sample::LogFormat, crate::config::HdrMatch),
}

impl HdrPat {
    fn new(m: &crate::config::HdrMatch, ci: bool) -> Result<HdrPat, String> {
        use crate::config::HdrMatch as H;
        Ok(match m {
            H::Fmt(inner) => {
                let text = match &**inner {
                    H::Str(p) | H::Beg(p) | H::End(p) | H::Sub(p) | H::Reg(p) => p,
                    H::Fmt(_) => return Err("nested log-format pattern".into()),
                };
                let f = crate::sample::LogFormat::parse(text, crate::sample::Scope::Response)?;
                HdrPat::Fmt(f, (**inner).clone())
            }
            m => HdrPat::Fixed(NameMatch::new(m, ci)?),
        })
    }

    /// The pattern for this check; Err: HAProxy's report of a log-format
    /// string that rendered nothing.
    fn resolve(
        &self,
        render: &dyn Fn(&crate::sample::LogFormat) -> Vec<u8>,
    ) -> Result<NameMatch, Verdict> {
        use crate::config::HdrMatch as H;
        let (f, kind) = match self {
            HdrPat::Fixed(m) => return Ok(m.clone()),
            HdrPat::Fmt(f, k) => (f, k),
        };
        let p = render(f);
        if p.is_empty() {
            return Err(Verdict::new(
                CheckStatus::L7Rsp,
                "log-format string evaluated to an empty string",
            ));
        }
        Ok(match kind {
            H::Beg(_) => NameMatch::Beg(p),
            H::End(_) => NameMatch::End(p),
            H::Sub(_) => NameMatch::Sub(p),
            _ => NameMatch::Str(p),
        })
    }
}

/// A compiled `-m` match of `http-check expect hdr`.
#[derive(Clone)]
pub enum NameMatch {
    Str(Vec<u8>),
    Beg(Vec<u8>),
    End(Vec<u8>),
    Sub(Vec<u8>),
    Reg(Regex),
}

impl NameMatch {
    /// `ci`: a header name's pattern (a regex then ignores case too).
    fn new(m: &crate::config::HdrMatch, ci: bool) -> Result<NameMatch, String> {
        use crate::config::HdrMatch as H;
        Ok(match m {
            H::Str(s) => NameMatch::Str(s.as_bytes().to_vec()),
            H::Beg(s) => NameMatch::Beg(s.as_bytes().to_vec()),
            H::End(s) => NameMatch::End(s.as_bytes().to_vec()),
            H::Sub(s) => NameMatch::Sub(s.as_bytes().to_vec()),
            H::Reg(p) => NameMatch::Reg(
                regex::bytes::RegexBuilder::new(p)
                    .case_insensitive(ci)
                    .build()
                    .map_err(|x| format!("invalid regex '{p}': {x}"))?,
            ),
            H::Fmt(_) => return Err("a log-format pattern is rendered at each check".into()),
        })
    }

    /// Whether `v` matches; `ci`: case-insensitively (header names).
    fn matches(&self, v: &[u8], ci: bool) -> bool {
        let eq = |a: &[u8], b: &[u8]| {
            if ci {
                a.eq_ignore_ascii_case(b)
            } else {
                a == b
            }
        };
        match self {
            NameMatch::Str(p) => eq(v, p),
            NameMatch::Beg(p) => v.len() >= p.len() && eq(&v[..p.len()], p),
            NameMatch::End(p) => v.len() >= p.len() && eq(&v[v.len() - p.len()..], p),
            NameMatch::Sub(p) => p.is_empty() || v.windows(p.len()).any(|w| eq(w, p)),
            NameMatch::Reg(re) => re.is_match(v),
        }
    }
}

/// A text of a check's request: as written, or a log-format string.
#[derive(Clone)]
pub enum Text {
    Plain(String),
    Fmt(crate::sample::LogFormat),
}

/// A check's request with log-format parts.
#[derive(Clone)]
pub struct ReqFmt {
    method: String,
    uri: Text,
    version: String,
    headers: Vec<(String, crate::sample::LogFormat)>,
    body: Option<Text>,
    host: String,
}

impl ReqFmt {
    /// The request for this check: an empty URI is `/`, a header whose
    /// value renders empty is left out (HAProxy's rules).
    fn render(&self, cx: &crate::sample::Ctx<'_>) -> Vec<u8> {
        let text = |t: &Text| match t {
            Text::Plain(s) => s.clone(),
            Text::Fmt(f) => {
                let mut out = Vec::new();
                f.render(cx, &mut out);
                String::from_utf8_lossy(&out).into_owned()
            }
        };
        let headers: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|(n, f)| (n.clone(), text(&Text::Fmt(f.clone()))))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let body = self.body.as_ref().map(text);
        request_bytes(
            &self.method,
            &text(&self.uri),
            &self.version,
            &headers,
            body.as_deref(),
            &self.host,
        )
    }
}

/// The step sending one request: its bytes made once, or a template
/// when a part of it is a log-format string.
fn send_step(q: &crate::config::HttpSend, host: &str) -> Result<HttpStep, String> {
    let (uri_lf, body_lf) = (q.uri_lf, q.body_lf);
    let (method, uri, version, headers) = (&q.method, &q.uri, &q.version, &q.headers);
    let body = q.body.as_deref();
    if !uri_lf && !body_lf && !headers.iter().any(|(_, v)| v.contains('%')) {
        return Ok(HttpStep::Send(request_bytes(
            method, uri, version, headers, body, host,
        )));
    }
    let fmt = |t: &str| crate::sample::LogFormat::parse(t, crate::sample::Scope::Response);
    let text = |t: &str, lf: bool| -> Result<Text, String> {
        Ok(if lf {
            Text::Fmt(fmt(t)?)
        } else {
            Text::Plain(t.to_string())
        })
    };
    Ok(HttpStep::SendFmt(Box::new(ReqFmt {
        method: method.to_string(),
        uri: text(uri, uri_lf)?,
        version: version.to_string(),
        headers: headers
            .iter()
            .map(|(n, v)| Ok((n.clone(), fmt(v)?)))
            .collect::<Result<_, String>>()?,
        body: body.map(|b| text(b, body_lf)).transpose()?,
        host: host.to_string(),
    })))
}

/// One request of an HTTP check.
fn request_bytes(
    method: &str,
    uri: &str,
    version: &str,
    headers: &[(String, String)],
    body: Option<&str>,
    host: &str,
) -> Vec<u8> {
    let mut req = format!(
        "{} {} {}\r\n",
        if method.is_empty() { "OPTIONS" } else { method },
        if uri.is_empty() { "/" } else { uri },
        if version.is_empty() {
            "HTTP/1.0"
        } else {
            version
        }
    );
    let (mut has_host, mut has_conn) = (false, false);
    for (n, v) in headers {
        if n.eq_ignore_ascii_case("content-length") {
            continue; // set from the body, as HAProxy does
        }
        has_host |= n.eq_ignore_ascii_case("host");
        has_conn |= n.eq_ignore_ascii_case("connection");
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    if !has_host && version.eq_ignore_ascii_case("HTTP/1.1") {
        req.push_str(&format!("Host: {host}\r\n"));
    }
    if !has_conn {
        req.push_str("Connection: close\r\n");
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    req.into_bytes()
}

fn compile_expect(e: &crate::config::HttpExpect) -> Result<Expect, String> {
    Ok(match &e.kind {
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
        ExpectKind::Hdr { full, name, value } => Expect::Hdr {
            full: *full,
            name: HdrPat::new(name, true)?,
            value: value.as_ref().map(|v| HdrPat::new(v, false)).transpose()?,
            neg: e.negate,
        },
    })
}

impl HttpProbe {
    /// Builds the sequence of `option httpchk` / `http-check` lines:
    /// an implicit connect first unless the rules start with one, the
    /// section's request where no `http-check send` is given, and the
    /// default expect (2xx/3xx) after the last request if no expect
    /// follows it.
    pub fn new(c: &HttpCheck, host: &str) -> Result<HttpProbe, String> {
        use crate::config::HttpCheckStep as S;
        let main = || {
            let q = crate::config::HttpSend {
                method: c.method.clone(),
                uri: c.uri.clone(),
                version: c.version.clone(),
                headers: c.headers.clone(),
                body: c.body.clone(),
                uri_lf: c.uri_lf,
                body_lf: c.body_lf,
            };
            send_step(&q, host)
        };
        let mut steps = Vec::new();
        let first = c
            .rules
            .iter()
            .find(|r| !matches!(r.step, S::Comment | S::Var(_)));
        if !matches!(first, Some(r) if matches!(r.step, S::Connect(_))) {
            steps.push(HttpStep::Connect(CheckConnect {
                default: true,
                ..CheckConnect::default()
            }));
        }
        let has_send = c.rules.iter().any(|r| matches!(r.step, S::Send(_)));
        let mut sent = false;
        let mut comment: Option<String> = None;
        for r in &c.rules {
            let note = r.comment.clone().or_else(|| comment.take());
            match &r.step {
                S::Comment => {
                    comment = r.comment.clone();
                    continue;
                }
                S::Connect(c) => steps.push(HttpStep::Connect(c.clone())),
                S::Var(v) => steps.push(HttpStep::Var(v.clone())),
                S::Send(None) => steps.push(main()?),
                S::Send(Some(q)) => steps.push(send_step(q, host)?),
                S::Expect(e) => {
                    if !has_send && !sent {
                        steps.push(main()?);
                        sent = true;
                    }
                    steps.push(HttpStep::Expect(HttpRule {
                        expect: compile_expect(e)?,
                        min_recv: e.min_recv,
                        ok_status: e.ok_status,
                        error_status: e.error_status,
                        tout_status: e.tout_status,
                        comment: note,
                    }));
                }
            }
        }
        if !has_send && !sent {
            steps.push(main()?);
        }
        // The last request gets the default expect if none follows it.
        let last_send = steps
            .iter()
            .rposition(|s| matches!(s, HttpStep::Send(_) | HttpStep::SendFmt(_)));
        if let Some(i) = last_send {
            if !steps[i..].iter().any(|s| matches!(s, HttpStep::Expect(_))) {
                steps.push(HttpStep::Expect(HttpRule::plain(Expect::Default)));
            }
        }
        Ok(HttpProbe {
            steps,
            send_state: c.send_state,
        })
    }
}

/// What a check does after its connect: an HTTP exchange (`option
/// httpchk`) or a `tcp-check` sequence (`option tcp-check`, a protocol
/// check).
#[derive(Clone)]
pub enum Probe {
    Http(HttpProbe),
    Tcp(Arc<TcpProbe>),
}

/// A check's report, as HAProxy keeps it: the status, the code (HTTP,
/// SMTP, LDAP, MySQL...; reported from `L7OK` on) and the description.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub st: CheckStatus,
    pub code: i64,
    pub desc: String,
    /// What the log line says instead of `desc`: a protocol check's
    /// parser reports the server's version or "Success" in the log, then
    /// HAProxy's end of sequence empties the stored description.
    pub note: Option<String>,
}

impl Verdict {
    pub fn new(st: CheckStatus, desc: impl Into<String>) -> Verdict {
        Verdict {
            st,
            code: 0,
            desc: desc.into(),
            note: None,
        }
    }

    pub fn passed(&self) -> bool {
        self.st.passed()
    }

    /// HAProxy's `reason: ...` text (`srv_append_status`): the
    /// description of the status, `, code: N` from `L7OK` on, `, info:
    /// "..."` with the description (non-printable bytes, `<`, `>` and
    /// `"` as `<XX>`).
    pub fn reason(&self) -> String {
        let mut r = self.st.text().to_string();
        if self.st.has_code() {
            r.push_str(&format!(", code: {}", self.code));
        }
        let desc = self.note.as_deref().unwrap_or(&self.desc);
        if !desc.is_empty() {
            r.push_str(", info: \"");
            for b in desc.bytes() {
                if (0x20..0x7f).contains(&b) && !matches!(b, b'<' | b'>' | b'"') {
                    r.push(b as char);
                } else {
                    r.push_str(&format!("<{b:02X}>"));
                }
            }
            r.push('"');
        }
        r
    }
}

/// A check's connection, clear or TLS (or HTTP/2 over either).
pub(super) trait Wire: Read + Write {
    /// The protocol the server chose by ALPN (TLS only).
    fn alpn(&self) -> Option<&[u8]> {
        None
    }
}
impl Wire for TcpStream {}
impl Wire for rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }
}

/// How a server's checks connect beyond their address, TLS and PROXY
/// header: the protocol of an HTTP check, the server's SOCKS4 proxy and
/// whether its default connect goes through it (`check-via-socks4`).
#[derive(Copy, Clone, Debug, Default)]
pub struct CheckHow {
    pub mux: CheckMux,
    pub socks4: Option<SocketAddr>,
    pub via_socks4: bool,
}

impl CheckHow {
    pub fn of(o: &crate::config::ServerOptions) -> CheckHow {
        CheckHow {
            mux: CheckMux::of(o),
            socks4: o.socks4,
            via_socks4: o.check_via_socks4,
        }
    }

    /// The proxy a connect step goes through (HAProxy's rule): its own
    /// `via-socks4`, or `check-via-socks4` for the default connect.
    fn socks_for(&self, cc: &CheckConnect) -> Option<SocketAddr> {
        self.socks4
            .filter(|_| cc.via_socks4 || (cc.default && self.via_socks4))
    }
}

/// The protocol of an HTTP check's default connection (HAProxy's check
/// multiplexer): `check-proto`, else the server's `proto`, else what
/// ALPN chose when the check offers its own list (`check-alpn`), else
/// HTTP/1. (HAProxy 2.6 installs its HTTP/1 multiplexer at once when the
/// check has no ALPN list of its own, even if the server's `alpn` makes
/// the handshake choose `h2`: such a check fails, `L7RSP`.)
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum CheckMux {
    /// HTTP/2 if the TLS handshake chose `h2`, else HTTP/1.
    Alpn,
    #[default]
    H1,
    H2,
}

impl CheckMux {
    /// A server's: `check-proto h1|h2`, else `proto h2`, else by ALPN
    /// with `check-alpn`, else HTTP/1.
    pub fn of(o: &crate::config::ServerOptions) -> CheckMux {
        match o.check_proto {
            Some(crate::config::CheckProto::H1) => CheckMux::H1,
            Some(crate::config::CheckProto::H2) => CheckMux::H2,
            _ if o.proto_h2 => CheckMux::H2,
            _ if o.check_alpn.is_some() => CheckMux::Alpn,
            _ => CheckMux::H1,
        }
    }
}

/// A connect error as HAProxy reports it: an error of the `connect()`
/// call itself (no route, no permission, no local address) is a
/// "General socket error (...)"; a refusal or a timeout reported later on
/// the socket is the system's text alone.
fn connect_error(e: &std::io::Error) -> Verdict {
    if timed_out(e) {
        return Verdict::new(CheckStatus::L4Tout, "");
    }
    let sync = matches!(
        e.raw_os_error(),
        Some(libc::ENETUNREACH | libc::EACCES | libc::EPERM | libc::EAFNOSUPPORT | libc::EINVAL)
    );
    if sync {
        Verdict::new(
            CheckStatus::L4Con,
            format!("General socket error ({})", os_text(e)),
        )
    } else if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
        Verdict::new(CheckStatus::L4Con, "Can't connect to server: no free ports")
    } else {
        Verdict::new(CheckStatus::L4Con, os_text(e))
    }
}

/// Connects for a check: TCP, a PROXY header first when `proxy_hdr`
/// holds one, then a TLS handshake when `tls` is set; everything within
/// `timeout` from `start`. `linger`: the connection is reset when
/// dropped, not closed (`tcp-check connect linger`).
pub(super) fn open(
    addr: SocketAddr,
    start: Instant,
    timeout: Duration,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
    linger: bool,
    socks: Option<SocketAddr>,
) -> Result<Box<dyn Wire>, Verdict> {
    let to = socks.unwrap_or(addr);
    let mut s = TcpStream::connect_timeout(&to, timeout).map_err(|e| connect_error(&e))?;
    if linger {
        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    }
    // Every read and write below is bounded by what is left of `timeout`.
    let left = timeout
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(1));
    let _ = s.set_read_timeout(Some(left));
    let _ = s.set_write_timeout(Some(left));
    if socks.is_some() {
        // HAProxy's report: the request unsent, layer 4 is not up; once
        // sent it is, and a failure is a socket error (TLS: layer 6's).
        super::socks4::blocking(&mut s, addr).map_err(|f| match f {
            Some(super::socks4::Fail::Send) => {
                Verdict::new(CheckStatus::L4Con, super::socks4::Fail::Send.text())
            }
            Some(f) if tls.is_some() => Verdict::new(CheckStatus::L6Rsp, f.text()),
            Some(f) => Verdict::new(CheckStatus::SockErr, f.text()),
            None if tls.is_some() => Verdict::new(CheckStatus::L6Tout, ""),
            None => Verdict::new(CheckStatus::L7Tout, ""),
        })?;
    }
    if !proxy_hdr.is_empty() {
        s.write_all(proxy_hdr).map_err(|e| {
            Verdict::new(CheckStatus::L4Con, format!("PROXY header: {}", os_text(&e)))
        })?;
    }
    let Some((cfg, sni)) = tls else {
        return Ok(Box::new(s));
    };
    let l6 = |e: String| Verdict::new(CheckStatus::L6Rsp, e);
    let name = rustls::pki_types::ServerName::try_from(sni.clone())
        .map_err(|e| l6(format!("invalid server name: {e}")))?;
    let conn = rustls::ClientConnection::new(Arc::clone(cfg), name)
        .map_err(|e| l6(format!("TLS setup: {e}")))?;
    let mut t = rustls::StreamOwned::new(conn, s);
    while t.conn.is_handshaking() {
        if start.elapsed() > timeout {
            return Err(Verdict::new(
                CheckStatus::L6Tout,
                "timeout during TLS handshake",
            ));
        }
        if let Err(e) = t.conn.complete_io(&mut t.sock) {
            return Err(if timed_out(&e) {
                Verdict::new(CheckStatus::L6Tout, "timeout during TLS handshake")
            } else {
                l6(format!("TLS handshake: {e}"))
            });
        }
    }
    Ok(Box::new(t))
}

/// A `connect` step of a check: to the server's address unless the step
/// names its own address or port; the server's PROXY header and TLS with
/// `default`, a v1 PROXY header with `send-proxy`.
pub(super) fn connect_step(
    cc: &CheckConnect,
    addr: SocketAddr,
    start: Instant,
    timeout: Duration,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
    how: CheckHow,
) -> Result<Box<dyn Wire>, Verdict> {
    let mut target = addr;
    if let Some(a) = cc.addr {
        target.set_ip(a);
    }
    if let Some(p) = cc.port {
        target.set_port(p);
    }
    let hdr: Vec<u8> = if cc.send_proxy {
        crate::proxyproto::header_for(1, None)
    } else if cc.default {
        proxy_hdr.to_vec()
    } else {
        Vec::new()
    };
    let tls = if cc.default { tls } else { None };
    open(
        target,
        start,
        timeout,
        tls,
        &hdr,
        cc.linger,
        how.socks_for(cc),
    )
}

/// An I/O error as HAProxy words it: the system's text without Rust's
/// ` (os error N)`.
pub(super) fn os_text(e: &std::io::Error) -> String {
    let t = e.to_string();
    match t.rfind(" (os error ") {
        Some(i) if t.ends_with(')') => t[..i].to_string(),
        _ => t,
    }
}

pub(super) fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
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
    if let (Some((name, _)), Some(r)) = (&p.tcp_check.builtin, p.tcp_check.rules.first()) {
        return Err((
            &r.loc,
            format!(
                "'tcp-check' rules in backend '{}' would not run: 'option {name}' has its own sequence",
                p.name
            ),
        ));
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

/// A check's response, parsed: status, reason, headers and body.
struct Resp<'a> {
    code: u16,
    code_b: &'a [u8],
    reason: String,
    headers: Vec<(&'a [u8], &'a [u8])>,
    body: &'a [u8],
}

/// Parses what arrived; Err: HAProxy's report of a malformed answer.
fn parse_resp(resp: &[u8]) -> Result<Resp<'_>, Verdict> {
    let rsp = |d: &str| Verdict::new(CheckStatus::L7Rsp, d);
    let Some(line_end) = resp.windows(2).position(|w| w == b"\r\n") else {
        return Err(rsp("no status line"));
    };
    let line = &resp[..line_end];
    let mut parts = line.splitn(3, |&c| c == b' ');
    let ver = parts.next().unwrap_or(b"");
    if !ver.starts_with(b"HTTP/1.") {
        return Err(rsp("not HTTP"));
    }
    let code_b = parts.next().unwrap_or(b"");
    let Some(code) = std::str::from_utf8(code_b)
        .ok()
        .and_then(|s| s.parse::<u16>().ok())
    else {
        return Err(rsp("bad status"));
    };
    let reason = String::from_utf8_lossy(parts.next().unwrap_or(b"")).into_owned();
    let head_end = resp.windows(4).position(|w| w == b"\r\n\r\n");
    let head = &resp[line_end + 2..head_end.map_or(resp.len(), |i| i + 2)];
    let headers = head
        .split(|c| *c == b'\n')
        .filter_map(|l| {
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            let i = l.iter().position(|c| *c == b':')?;
            Some((&l[..i], l[i + 1..].trim_ascii()))
        })
        .collect();
    let body = head_end.map_or(&b""[..], |i| &resp[i + 4..]);
    Ok(Resp {
        code,
        code_b,
        reason,
        headers,
        body,
    })
}

/// Whether a header of the response matches `hdr`/`fhdr`'s patterns.
fn header_matches(r: &Resp<'_>, full: bool, name: &NameMatch, value: Option<&NameMatch>) -> bool {
    r.headers.iter().any(|(n, v)| {
        if !name.matches(n, true) {
            return false;
        }
        let Some(vm) = value else {
            return true;
        };
        if full {
            vm.matches(v, false)
        } else {
            v.split(|c| *c == b',')
                .map(<[u8]>::trim_ascii)
                .any(|x| vm.matches(x, false))
        }
    })
}

/// Judges an HTTP check response (status line, and body for strings).
#[cfg(test)]
pub fn judge(resp: &[u8], expect: &Expect) -> Verdict {
    judge_rule(resp, &HttpRule::plain(expect.clone()), &|_| Vec::new())
}

/// Judges a response against one expect rule and its options; `render`
/// evaluates the rule's log-format patterns.
fn judge_rule(
    resp: &[u8],
    rule: &HttpRule,
    render: &dyn Fn(&crate::sample::LogFormat) -> Vec<u8>,
) -> Verdict {
    let r = match parse_resp(resp) {
        Ok(r) => r,
        Err(v) => return v,
    };
    // A status or header rule fails with L7STS and the reason phrase; a
    // content rule with L7RSP and HAProxy's text.
    let (ok, content, neg) = match &rule.expect {
        Expect::Default => ((200..400).contains(&r.code), false, false),
        Expect::Status(rg, neg) => (
            rg.iter().any(|(a, b)| (*a..=*b).contains(&r.code)) != *neg,
            false,
            *neg,
        ),
        Expect::RStatus(re, neg) => (re.is_match(r.code_b) != *neg, false, *neg),
        Expect::String(s, neg) => (
            (!s.is_empty() && r.body.windows(s.len()).any(|w| w == s.as_slice())) != *neg,
            true,
            *neg,
        ),
        Expect::RString(re, neg) => (re.is_match(r.body) != *neg, true, *neg),
        Expect::Hdr {
            full,
            name,
            value,
            neg,
        } => {
            // The status code is the check's code whatever happens next.
            let failed = |mut v: Verdict| {
                v.code = i64::from(r.code);
                v
            };
            let name = match name.resolve(render) {
                Ok(n) => n,
                Err(v) => return failed(v),
            };
            let value = match value.as_ref().map(|v| v.resolve(render)).transpose() {
                Ok(v) => v,
                Err(v) => return failed(v),
            };
            (
                header_matches(&r, *full || value.is_none(), &name, value.as_ref()) != *neg,
                false,
                *neg,
            )
        }
    };
    let mut v = if ok {
        Verdict::new(rule.ok_status, "")
    } else if !content {
        Verdict::new(rule.error_status.unwrap_or(CheckStatus::L7Sts), r.reason)
    } else if r.body.is_empty() {
        Verdict::new(
            rule.error_status.unwrap_or(CheckStatus::L7Rsp),
            "HTTP content check could not find a response body",
        )
    } else if neg {
        Verdict::new(
            rule.error_status.unwrap_or(CheckStatus::L7Rsp),
            "HTTP check matched unwanted content",
        )
    } else {
        Verdict::new(
            rule.error_status.unwrap_or(CheckStatus::L7Rsp),
            "HTTP content check did not match",
        )
    };
    if !ok {
        if let Some(c) = &rule.comment {
            v.desc.push_str(&format!(" comment: {c}"));
        }
    }
    v.code = i64::from(r.code);
    v
}

/// Whether `buf` holds a whole response: its head, and its body by
/// Content-Length or chunked framing (otherwise it ends at the close).
fn complete(buf: &[u8]) -> bool {
    let Some(h) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let body = &buf[h + 4..];
    let Ok(r) = parse_resp(buf) else {
        return true; // judged malformed at once
    };
    if (100..200).contains(&r.code) || r.code == 204 || r.code == 304 {
        return true;
    }
    let get = |n: &[u8]| {
        r.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| *v)
    };
    if get(b"transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case(b"chunked")) {
        return body.ends_with(b"0\r\n\r\n");
    }
    match get(b"content-length").and_then(|v| std::str::from_utf8(v).ok()?.parse::<usize>().ok()) {
        Some(n) => body.len() >= n,
        None => false,
    }
}

/// TLS for the checks of an `ssl` server: client configuration and name.
pub type CheckTls = (Arc<rustls::ClientConfig>, String);

/// The PROXY header a check sends first (`check-send-proxy`, or a server
/// with `send-proxy[-v2]` whose checks have neither `port` nor `addr`,
/// HAProxy's rule): v1 `UNKNOWN` or a v2 LOCAL command, since a check
/// relays no client. Empty: none.
pub fn check_proxy_header(o: &crate::config::ServerOptions) -> Vec<u8> {
    let same_target = o.check_port.is_none() && o.check_addr.is_none();
    if !o.check_send_proxy && (o.send_proxy == 0 || !same_target) {
        return Vec::new();
    }
    crate::proxyproto::header_for(o.send_proxy.max(1), None)
}

/// One check, blocking: connect (a PROXY header first when `proxy_hdr`
/// holds one, then a TLS handshake for an `ssl` server), then the probe
/// (an HTTP sequence or a `tcp-check` sequence) within `timeout`.
pub fn run_check(
    addr: SocketAddr,
    timeout: Duration,
    probe: Option<&Probe>,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
    who: (&str, &str, Option<&str>),
    how: CheckHow,
) -> Verdict {
    // A plain connect is the default one.
    let socks = how.socks4.filter(|_| how.via_socks4);
    match probe {
        Some(Probe::Tcp(t)) => {
            super::tcpcheck::run_tcp_check(addr, timeout, t, tls, proxy_hdr, how)
        }
        Some(Probe::Http(p)) => run_http(addr, timeout, p, tls, proxy_hdr, who, how),
        None if tls.is_none() && proxy_hdr.is_empty() && socks.is_none() => {
            match l4_probe(addr, timeout) {
                Err(v) => v,
                Ok(()) => Verdict::new(CheckStatus::L4Ok, ""),
            }
        }
        None => {
            let start = Instant::now();
            match open(addr, start, timeout, tls, proxy_hdr, false, socks) {
                Err(v) => v,
                Ok(_) if tls.is_some() => Verdict::new(CheckStatus::L6Ok, ""),
                Ok(_) => Verdict::new(CheckStatus::L4Ok, ""),
            }
        }
    }
}

/// A layer-4 check as HAProxy runs it: connect with delayed ACKs (its
/// checks' smart-connect: the handshake's last ACK waits for data that
/// never comes) and reset, so the server's application is not handed an
/// empty connection for each check.
fn l4_probe(addr: SocketAddr, timeout: Duration) -> Result<(), Verdict> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(|e| connect_error(&e))?;
    let _ = sock.set_tcp_quickack(false);
    sock.connect_timeout(&addr.into(), timeout)
        .map_err(|e| connect_error(&e))?;
    let _ = sock.set_linger(Some(Duration::ZERO));
    Ok(())
}

/// A check's request with `X-Haproxy-Server-State: STATE` as the last
/// field of its head.
fn with_state_header<'a>(req: &'a [u8], state: &str) -> std::borrow::Cow<'a, [u8]> {
    let Some(end) = req.windows(4).position(|w| w == b"\r\n\r\n") else {
        return std::borrow::Cow::Borrowed(req);
    };
    let mut out = Vec::with_capacity(req.len() + state.len() + 32);
    out.extend_from_slice(&req[..end + 2]);
    out.extend_from_slice(b"X-Haproxy-Server-State: ");
    out.extend_from_slice(state.as_bytes());
    out.extend_from_slice(&req[end..]);
    std::borrow::Cow::Owned(out)
}

/// HAProxy's `X-Haproxy-Server-State` value: the health as the stats
/// show it (`UP`, `UP 2/3` while failing, `DOWN`, `DOWN 1/2` while
/// recovering, `no check`), then the address, port, names, node, the
/// server's and the farm's usable weight, the server's and the backend's
/// streams, its queue and, while it ramps up, `throttle`. `streak`: the
/// checker's failures while UP or successes while DOWN.
pub fn server_state_header(farm: &Farm, s: &ServerRt, streak: u32) -> String {
    let o = &s.opts;
    let (rise, fall) = (o.rise.max(1), o.fall.max(1));
    let running =
        s.up.load(Ordering::Relaxed) && s.admin_state() != super::ADMIN_MAINT && s.has_addr();
    let health = if !s.check_on.load(Ordering::Relaxed) {
        "no check".to_string()
    } else if running {
        if streak == 0 {
            "UP".to_string()
        } else {
            format!("UP {}/{fall}", fall.saturating_sub(streak))
        }
    } else if streak == 0 {
        "DOWN".to_string()
    } else {
        format!("DOWN {streak}/{rise}")
    };
    let (addr, port) = match s.addr() {
        Some(a) => (a.ip().to_string(), a.port().to_string()),
        None => (String::new(), String::new()),
    };
    let usable = |backup: bool| -> u32 {
        farm.servers
            .iter()
            .filter(|x| x.opts.backup == backup && x.usable())
            .map(|x| x.effective_weight())
            .sum()
    };
    let total = match usable(false) {
        0 => usable(true),
        n => n,
    };
    let queued = |x: &ServerRt| x.queue.lock().map(|q| q.len()).unwrap_or(0);
    let be_streams: usize = farm
        .servers
        .iter()
        .map(|x| x.cur.load(Ordering::Relaxed) as usize + queued(x))
        .sum();
    let mut v = format!(
        "{health}; address={addr}; port={port}; name={}/{}; node={}; weight={}/{total}; scur={}/{be_streams}; qcur={}",
        farm.name,
        s.name,
        crate::sample::hostname(),
        s.effective_weight(),
        s.cur.load(Ordering::Relaxed),
        queued(s),
    );
    if let Some(ss) = o.slowstart.filter(|d| !d.is_zero()) {
        let since = s.up_since.elapsed();
        if running && since < ss {
            let ratio = (100 * since.as_millis() / ss.as_millis()).max(1);
            v.push_str(&format!("; throttle={ratio}%"));
        }
    }
    v
}

/// What the sample expressions of a check's rules read: the backend and
/// server names, the check's variables, and the response read last
/// (`res.*` fetches), if any.
fn check_sample<R>(
    who: (&str, &str),
    vars: &std::cell::RefCell<crate::sample::VarStore>,
    resp: Option<&[u8]>,
    f: impl FnOnce(&crate::sample::Ctx<'_>) -> R,
) -> R {
    let head = resp.and_then(|b| {
        match crate::http1::parse_response(
            b,
            &crate::http1::Limits::default(),
            crate::http1::Method::Get,
        ) {
            Ok(crate::http1::Status::Complete(h)) => Some(h),
            _ => None,
        }
    });
    let dst = || None;
    let ctx = crate::sample::Ctx {
        src: SocketAddr::from(([0, 0, 0, 0], 0)),
        dst: &dst,
        fe: "",
        be: Some(who.0),
        srv: Some(who.1),
        tls: false,
        sni: None,
        req: None,
        res: match (resp, head.as_ref()) {
            (Some(buf), Some(head)) => Some(crate::sample::Res::H1 { buf, head }),
            _ => None,
        },
        vars: Some(vars),
        stk: None,
        payload: None,
        res_body: None,
    };
    f(&ctx)
}

/// Runs an HTTP check's sequence: each expect judges the response to
/// the request before it (read whole, at most 16 KiB). `who`: the
/// backend's and the server's names, and the server's state for
/// `http-check send-state`.
fn run_http(
    addr: SocketAddr,
    timeout: Duration,
    p: &HttpProbe,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
    who: (&str, &str, Option<&str>),
    how: CheckHow,
) -> Verdict {
    let (be, srv, state) = who;
    let who = (be, srv);
    // The `check` and `sess` variables live for one run.
    let vars = std::cell::RefCell::new(crate::sample::VarStore::for_check());
    let start = Instant::now();
    let mut conn: Option<Box<dyn Wire>> = None;
    let mut buf: Vec<u8> = Vec::new();
    // The response to the last request was read (until complete or
    // closed).
    let mut have = false;
    let mut last: Option<Verdict> = None;
    for st in &p.steps {
        match st {
            HttpStep::Connect(cc) => {
                drop(conn.take());
                match connect_step(cc, addr, start, timeout, tls, proxy_hdr, how) {
                    // The server's protocol applies to a default connect.
                    Ok(c) if cc.default && h2_for(how.mux, c.alpn()) => {
                        let tls = cc.default && tls.is_some();
                        conn = Some(Box::new(super::h2check::H2Wire::new(c, tls)));
                    }
                    Ok(c) => conn = Some(c),
                    Err(v) => return v,
                }
                buf.clear();
                have = false;
            }
            HttpStep::Send(_) | HttpStep::SendFmt(_) => {
                let Some(c) = conn.as_mut() else {
                    return Verdict::new(CheckStatus::SockErr, "no connection");
                };
                let rendered;
                let req: &[u8] = match st {
                    HttpStep::SendFmt(f) => {
                        let resp = have.then_some(&buf[..]);
                        rendered = check_sample(who, &vars, resp, |cx| f.render(cx));
                        &rendered
                    }
                    HttpStep::Send(b) => b,
                    _ => &[],
                };
                let req = match state.filter(|_| p.send_state) {
                    Some(st) => with_state_header(req, st),
                    None => std::borrow::Cow::Borrowed(req),
                };
                if let Err(e) = c.write_all(&req).and_then(|()| c.flush()) {
                    return Verdict::new(CheckStatus::SockErr, os_text(&e));
                }
                buf.clear();
                have = false;
            }
            HttpStep::Expect(rule) => {
                if !have {
                    let Some(c) = conn.as_mut() else {
                        return Verdict::new(CheckStatus::SockErr, "no connection");
                    };
                    if let Err(v) = read_response(c, &mut buf, start, timeout, rule) {
                        return v;
                    }
                    have = true;
                }
                let render = |f: &crate::sample::LogFormat| {
                    let mut out = Vec::new();
                    check_sample(who, &vars, Some(&buf), |cx| f.render(cx, &mut out));
                    out
                };
                let v = judge_rule(&buf, rule, &render);
                if !v.passed() {
                    return v;
                }
                last = Some(v);
            }
            HttpStep::Var(a) => {
                let resp = have.then_some(&buf[..]);
                check_sample(who, &vars, resp, |cx| a.run(cx));
            }
        }
    }
    last.unwrap_or_else(|| {
        if tls.is_some() {
            Verdict::new(CheckStatus::L6Ok, "")
        } else {
            Verdict::new(CheckStatus::L4Ok, "")
        }
    })
}

/// Whether a default connection speaks HTTP/2: `mux`, and ALPN's choice.
fn h2_for(mux: CheckMux, alpn: Option<&[u8]>) -> bool {
    match mux {
        CheckMux::H2 => true,
        CheckMux::H1 => false,
        CheckMux::Alpn => alpn == Some(b"h2"),
    }
}

/// Reads a response into `buf` until it is complete, the server closes,
/// 16 KiB arrived or `min-recv` bytes are there.
fn read_response(
    s: &mut Box<dyn Wire>,
    buf: &mut Vec<u8>,
    start: Instant,
    timeout: Duration,
    rule: &HttpRule,
) -> Result<(), Verdict> {
    let mut tmp = [0u8; 4096];
    loop {
        if buf.len() >= 16 * 1024
            || complete(buf)
            || rule.min_recv.is_some_and(|n| n > 0 && buf.len() >= n)
        {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return if buf.is_empty() {
                Err(Verdict::new(rule.tout_status, ""))
            } else {
                Ok(())
            };
        }
        match s.read(&mut tmp) {
            // Nothing at all: judged as such ("no status line").
            Ok(0) => return Ok(()),
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                if !buf.is_empty() {
                    return Ok(());
                }
                return Err(if timed_out(&e) {
                    Verdict::new(rule.tout_status, "")
                } else {
                    Verdict::new(CheckStatus::SockErr, os_text(&e))
                });
            }
        }
    }
}

/// What live traffic showed of a server, for `observe` (HAProxy's
/// `HANA_STATUS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A connection to it was established (or one kept was used).
    L4Ok,
    /// A connect failed or timed out.
    L4Err,
    /// A response status from 100 to 499, or 501 or 505.
    HttpOk,
    /// Another status (5xx but 501 and 505).
    HttpSts,
    /// A response head that is not valid HTTP.
    HttpHdrRsp,
    /// A response body that is not valid HTTP.
    HttpRsp,
    /// `timeout server` before the response head.
    ReadTimeout,
    /// The server closed (or reset) before the response head.
    BrokenPipe,
}

impl Seen {
    /// HAProxy's description, in the `on-error` report.
    fn text(self) -> &'static str {
        match self {
            Seen::L4Ok => "L4 successful connection",
            Seen::L4Err => "L4 unsuccessful connection",
            Seen::HttpOk => "Correct http response",
            Seen::HttpSts => "Wrong http response",
            Seen::HttpHdrRsp => "Invalid http response (headers)",
            Seen::HttpRsp => "Invalid http response",
            Seen::ReadTimeout => "Read timeout (http)",
            Seen::BrokenPipe => "Close from server (http)",
        }
    }

    /// Under `observe o`: an error (true), a success (false, which clears
    /// the count) or nothing (None), as HAProxy's table: a connect error
    /// counts in both modes, an established connection clears only in
    /// `layer4`, the HTTP events count only in `layer7`.
    fn judge(self, o: crate::config::Observe) -> Option<bool> {
        use crate::config::Observe;
        match (o, self) {
            (Observe::None, _) => None,
            (_, Seen::L4Err) => Some(true),
            (Observe::Layer4, Seen::L4Ok) => Some(false),
            (Observe::Layer4, _) | (Observe::Layer7, Seen::L4Ok) => None,
            (Observe::Layer7, Seen::HttpOk) => Some(false),
            (Observe::Layer7, _) => Some(true),
        }
    }

    /// A response status, judged as HAProxy's: 501 and 505 answer the
    /// client's request, not a failing server.
    pub fn status(code: u16) -> Seen {
        if code >= 100 && (code < 500 || code == 501 || code == 505) {
            Seen::HttpOk
        } else {
            Seen::HttpSts
        }
    }
}

/// A server's health analysis (`observe`, `error-limit`, `on-error`): the
/// consecutive errors of its traffic, and the `on-error` report waiting
/// for its check task.
#[derive(Default)]
pub struct Hana {
    errors: std::sync::atomic::AtomicU32,
    /// `on-error` actions taken (the stats' `hanafail`).
    pub failed: std::sync::atomic::AtomicU64,
    /// The report for the check task to act on ("Detected N consecutive
    /// errors, last one was: ...").
    pending: Mutex<Option<String>>,
    /// The check task, once started, and how to wake it.
    task: std::sync::OnceLock<(RuntimeHandle, TaskId)>,
}

/// Counts what live traffic showed of `s` under its `observe` mode
/// (HAProxy's health_adjust): `error-limit` consecutive errors hand
/// `on-error`'s action to its check task. Nothing without `observe` or
/// without a running health check (a test of one byte on the request
/// path then).
#[inline]
pub fn observe(s: &ServerRt, seen: Seen) {
    if s.opts.observe != crate::config::Observe::None {
        adjust(s, seen);
    }
}

fn adjust(s: &ServerRt, seen: Seen) {
    let Some(bad) = seen.judge(s.opts.observe) else {
        return;
    };
    let h = &s.hana;
    let Some((handle, task)) = h.task.get() else {
        return;
    };
    if !bad {
        if h.errors.load(Ordering::Relaxed) != 0 {
            h.errors.store(0, Ordering::Relaxed);
        }
        return;
    }
    let n = h.errors.fetch_add(1, Ordering::AcqRel) + 1;
    if n < s.opts.error_limit.max(1) {
        return;
    }
    h.errors.store(0, Ordering::Release);
    h.failed.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut p) = h.pending.lock() {
        *p = Some(format!(
            "Detected {n} consecutive errors, last one was: {}",
            seen.text()
        ));
    }
    handle.wake_task(*task, Reasons::MSG);
}

/// `spread-checks`: the share (0..50 %) of its interval by which each
/// check's next date moves at random, either way.
static SPREAD: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Sets the global `spread-checks` (at start).
pub fn set_spread(pct: u32) {
    SPREAD.store(pct.min(50), Ordering::Relaxed);
}

/// A check task's generator for [`spread`]: distinct per server.
pub fn spread_seed(uid: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    (uid.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ t) | 1
}

/// `d`, moved by `spread-checks`: HAProxy's next check date, the interval
/// plus a random amount between -N % and +N % of it.
pub fn spread(d: Duration, rng: &mut u64) -> Duration {
    spread_by(d, SPREAD.load(Ordering::Relaxed), rng)
}

/// [`spread`] by `pct` %.
fn spread_by(d: Duration, pct: u32, rng: &mut u64) -> Duration {
    let pct = u64::from(pct);
    if pct == 0 {
        return d;
    }
    let ms = d.as_millis().min(u128::from(u32::MAX)) as u64;
    let span = ms * pct / 100;
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    Duration::from_millis(ms - span + *rng % (2 * span + 1))
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
    result: Arc<Mutex<Option<Verdict>>>,
    in_flight: bool,
    /// Consecutive successes while DOWN / failures while UP.
    streak: u32,
    log: LogFn,
    /// `option log-health-checks`: log each change of the check's status.
    log_checks: bool,
    /// When the check in flight started (its duration is logged).
    started: Instant,
    /// The generator of `spread-checks`.
    rng: u64,
    /// The date of the next check (`ETERNITY` while one runs or before
    /// the first).
    next_at: ticks::Tick,
}

impl Checker {
    fn interval(&self, s: &ServerRt) -> Duration {
        let o = &s.opts;
        if !s.check_ok.load(Ordering::Relaxed) {
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

    /// Counts a check's result (`hana`: an `on-error` report, which has
    /// no duration).
    fn apply(&mut self, s: &Arc<ServerRt>, v: Verdict, hana: bool) {
        // The health check's own view (HAProxy's `check.health >= rise`);
        // the server's state also depends on its agent.
        let ok_before = s.check_ok.load(Ordering::Relaxed);
        let changed = match s.check_status.lock() {
            Ok(mut cs) => {
                let changed = cs.st != v.st;
                *cs = v.clone();
                changed
            }
            Err(_) => false,
        };
        let ok = v.passed();
        // HAProxy reports no duration for an `on-error` report.
        let took =
            (!hana).then(|| format!(", check duration: {}ms", self.started.elapsed().as_millis()));
        let took = took.unwrap_or_default();
        // Whether HAProxy's health counter moves: a failure while any
        // health is left, a success while not at full health.
        let moved = match (ok_before, ok) {
            (true, false) | (false, true) => true,
            _ => self.streak > 0,
        };
        match (ok_before, ok) {
            (true, true) | (false, false) => self.streak = 0,
            (true, false) => {
                self.streak += 1;
                if self.streak >= s.opts.fall.max(1) {
                    s.check_ok.store(false, Ordering::Relaxed);
                    self.streak = 0;
                }
            }
            (false, true) => {
                self.streak += 1;
                if self.streak >= s.opts.rise.max(1) {
                    s.check_ok.store(true, Ordering::Relaxed);
                    self.streak = 0;
                }
            }
        }
        let up = s.up.load(Ordering::Relaxed);
        s.ext.on_check(ok, up, up);
        if self.log_checks && (changed || moved) {
            self.log_check(s, &v, &took);
        }
        // A server's change of state is logged after the check line that
        // caused it, in HAProxy's order.
        if let Some(f) = self.farm.upgrade() {
            refresh_up(&f, s, || format!("reason: {}{took}", v.reason()));
        }
    }

    /// HAProxy's `option log-health-checks` line: the result, its reason
    /// and the health counter as `a/b UP|DOWN` (successes needed to come
    /// up while DOWN; failures left before going down while UP).
    fn log_check(&self, s: &ServerRt, v: &Verdict, took: &str) {
        let o = &s.opts;
        let (rise, fall) = (o.rise.max(1), o.fall.max(1));
        let up = s.check_ok.load(Ordering::Relaxed);
        let (a, b) = if up {
            (fall.saturating_sub(self.streak), fall)
        } else {
            (self.streak, rise)
        };
        (self.log)(format!(
            "Health check for {}server {}/{} {}, reason: {}{took}, status: {a}/{b} {}.",
            if o.backup { "backup " } else { "" },
            s.backend,
            s.name,
            match v.st {
                CheckStatus::L7OkC => "conditionally succeeded",
                st if st.passed() => "succeeded",
                _ => "failed",
            },
            v.reason(),
            match (up, s.weight.load(Ordering::Relaxed)) {
                (false, _) => "DOWN",
                (true, 0) => "DRAIN",
                _ => "UP",
            }
        ));
    }

    /// `on-error`'s action on a report of `observe` (HAProxy's
    /// health_adjust): a failed check (`fail-check`), one that leaves a
    /// single failure before DOWN (`sudden-death`), DOWN at once
    /// (`mark-down`), or none (`fastinter`); each brings the next check
    /// to `fastinter` if that is sooner.
    fn on_error(&mut self, s: &Arc<ServerRt>, desc: String, now: ticks::Tick) {
        use crate::config::OnError;
        let up = s.check_ok.load(Ordering::Relaxed);
        let fall = s.opts.fall.max(1);
        match s.opts.on_error {
            OnError::FastInter => {}
            e => {
                if up && e == OnError::SuddenDeath {
                    self.streak = self.streak.max(fall.saturating_sub(2));
                } else if up && e == OnError::MarkDown {
                    self.streak = fall - 1;
                }
                self.apply(
                    s,
                    Verdict::new(crate::config::CheckStatus::Hana, desc),
                    true,
                );
            }
        }
        if let Some(f) = s.opts.fastinter {
            let at = ticks::add(now, f.as_millis().min(u32::MAX as u128 / 2) as u32);
            self.next_at = ticks::first(at, self.next_at);
        }
    }

    fn run(&mut self, ctx: &mut Ctx, me: TaskId, _why: Reasons) -> Status {
        let Some(s) = self.srv.upgrade() else {
            return Status::Done; // the configuration it belonged to is gone
        };
        if s.is_deleted() {
            return Status::Done;
        }
        let on = s.check_on.load(Ordering::Relaxed);
        let report = s.hana.pending.lock().ok().and_then(|mut p| p.take());
        if let Some(desc) = report.filter(|_| on) {
            self.on_error(&s, desc, ctx.now());
            if !self.in_flight && !ticks::is_expired(self.next_at, ctx.now()) {
                // Not the check's date yet: only (maybe) an earlier one.
                ctx.set_expire(me, self.next_at);
                return Status::Continue;
            }
        }
        if self.in_flight {
            let r = self.result.lock().ok().and_then(|mut g| g.take());
            match r {
                Some(r) => {
                    self.in_flight = false;
                    // `disable health` meanwhile: the result is ignored.
                    if on {
                        self.apply(&s, r, false);
                    }
                }
                None => {
                    // Woken by the timer while the check runs: wait for it.
                    ctx.set_expire(me, ticks::add(ctx.now(), 100));
                    return Status::Continue;
                }
            }
        } else if let Some(addr) = s.addr().filter(|_| on) {
            // `addr` and `port`: the check's own target.
            let addr = SocketAddr::new(
                s.opts.check_addr.unwrap_or(addr.ip()),
                s.opts.check_port.unwrap_or(addr.port()),
            );
            let result = Arc::clone(&self.result);
            let probe = self.probe.clone();
            let tls = self.tls.clone();
            let timeout = self.timeout;
            let handle = self.handle.clone();
            let srv = self.srv.clone();
            let pp = check_proxy_header(&s.opts);
            let how = CheckHow::of(&s.opts);
            let farm = self.farm.upgrade();
            let be_name = farm.as_ref().map(|f| f.name.clone()).unwrap_or_default();
            let srv_name = s.name.clone();
            let state = match (&self.probe, &farm) {
                (Some(Probe::Http(p)), Some(f)) if p.send_state => {
                    Some(server_state_header(f, &s, self.streak))
                }
                _ => None,
            };
            let job = move || {
                let t0 = Instant::now();
                let who = (be_name.as_str(), srv_name.as_str(), state.as_deref());
                let r = run_check(addr, timeout, probe.as_ref(), tls.as_ref(), &pp, who, how);
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
        let next = spread(self.interval(&s), &mut self.rng);
        self.next_at = ticks::add(ctx.now(), next.as_millis().min(u32::MAX as u128 / 2) as u32);
        ctx.set_expire(me, self.next_at);
        Status::Continue
    }
}

/// Logs an event of a farm's servers where its checks log (the
/// backend's log targets).
pub fn log_event(farm: &Farm, line: String) {
    if let Some(cx) = farm.check_ctx.get() {
        (cx.log)(line);
    }
}

/// Sets a server's operational state from its checks, as HAProxy's
/// `check_notify_*`: UP while its health check (when configured and
/// enabled) and its agent (when enabled) both say so. A change is logged
/// with `why` (`reason: ..., check duration: ...` or `changed from CLI`)
/// and moves the queues. Returns whether the state changed.
pub fn refresh_up(farm: &Farm, s: &ServerRt, why: impl FnOnce() -> String) -> bool {
    let check =
        !s.opts.check || !s.check_on.load(Ordering::Relaxed) || s.check_ok.load(Ordering::Relaxed);
    let agent = !s.agent.enabled() || s.agent.healthy.load(Ordering::Relaxed);
    // `track`: the tracked server's health too (HAProxy's tracking
    // server goes down with it and comes up with it).
    let tracked = s.tracked.get().is_none_or(|t| t.up.load(Ordering::Relaxed));
    let up = check && agent && tracked;
    let was = s.up.swap(up, Ordering::AcqRel);
    if was == up {
        return false;
    }
    // Its trackers follow, down the chains, once its own change is done.
    struct Follow<'a>(&'a ServerRt);
    impl Drop for Follow<'_> {
        fn drop(&mut self) {
            for (f, t) in self.0.tracker_list() {
                refresh_up(&f, &t, || format!("via {}/{}", self.0.backend, self.0.name));
            }
        }
    }
    let _follow = Follow(s);
    s.ext.on_check(true, was, up);
    farm.note_state();
    if up {
        s.up_since.set(Instant::now());
        log_event(
            farm,
            format!("Server {}/{} is UP, {}.", s.backend, s.name, why()),
        );
        farm.kick_backend_queue();
        super::marked_up(farm, s);
    } else {
        super::marked_down(s);
        log_event(
            farm,
            format!(
                "Server {}/{} is DOWN, {}. {} active servers left.",
                s.backend,
                s.name,
                why(),
                farm.servers.iter().filter(|x| x.usable()).count()
            ),
        );
        farm.redispatch_queue_of(s);
        log_if_none_left(farm);
    }
    true
}

/// HAProxy's alert when a backend's last usable server leaves.
pub fn log_if_none_left(farm: &Farm) {
    if !farm.servers.iter().any(|x| x.usable()) {
        log_event(
            farm,
            format!("backend {} has no server available!", farm.name),
        );
    }
}

/// What checks of a farm need, kept for servers added at run time.
pub struct CheckCtx {
    probe: Option<Probe>,
    pub(super) timeout: Option<Duration>,
    pub(super) pool: Submitter,
    pub(super) handle: RuntimeHandle,
    pub(super) log: LogFn,
    pub(super) log_checks: bool,
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
        .flat_map(|s| [start_server(farm, s), start_agent(farm, s)])
        .flatten()
        .collect()
}

/// Starts the agent task of a server with `agent-check`.
pub fn start_agent(farm: &Arc<Farm>, s: &Arc<ServerRt>) -> Option<TaskId> {
    super::agent::start_server(farm, s, farm.check_ctx.get()?)
}

/// The TLS of a server's checks: its own (`ssl`), or with `check-ssl`
/// a client built from its TLS options (checked at start by
/// `proxy::server_tls`). HAProxy's checks send `check-sni`, never the
/// traffic's `sni`; else no name: the check's address, which rustls does
/// not send (and whose certificate names `verify required` checks only
/// against `verifyhost`).
fn check_ssl(s: &ServerRt) -> Option<super::ServerTls> {
    let o = &s.opts;
    let ip = o.check_addr.or(s.addr().map(|a| a.ip()));
    let ip = ip.unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    let sni = o.check_sni.clone().unwrap_or_else(|| ip.to_string());
    let config = match &s.tls {
        Some(t) => Arc::clone(&t.config),
        None if o.check_ssl => {
            crate::tls::client_config_with(o.verify, o.ca_file.as_deref(), &o.tls).ok()?
        }
        None => return None,
    };
    Some(super::ServerTls {
        config,
        sni,
        sni_expr: None,
    })
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
        tls: check_ssl(s).as_ref().map(|t| {
            // `check-alpn`: the checks' own ALPN list.
            let cfg = match &s.opts.check_alpn {
                Some(list) => {
                    let mut c = (*t.config).clone();
                    c.alpn_protocols = list.iter().map(|p| p.as_bytes().to_vec()).collect();
                    Arc::new(c)
                }
                None => Arc::clone(&t.config),
            };
            (cfg, t.sni.clone())
        }),
        timeout: t,
        pool: cx.pool.clone(),
        handle: cx.handle.clone(),
        result: Arc::new(Mutex::new(None)),
        in_flight: false,
        streak: 0,
        log: Arc::clone(&cx.log),
        log_checks: cx.log_checks,
        started: Instant::now(),
        rng: spread_seed(s.uid),
        next_at: ticks::ETERNITY,
    };
    let id = cx
        .handle
        .new_shared_task("health_check", u64::MAX, move |ctx: &mut Ctx, me, why| {
            c.run(ctx, me, why)
        });
    // `observe` reports to this task.
    let _ = s.hana.task.set((cx.handle.clone(), id));
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
        let v = judge(ok, &Expect::Default);
        assert_eq!((v.st, v.code), (CheckStatus::L7Ok, 200));
        let v = judge(bad, &Expect::Default);
        assert_eq!((v.st, v.code), (CheckStatus::L7Sts, 503));
        assert_eq!(
            v.reason(),
            "Layer7 wrong status, code: 503, info: \"Service Unavailable\""
        );
        assert!(judge(bad, &Expect::Status(vec![(500, 599)], false)).passed());
        assert!(!judge(ok, &Expect::Status(vec![(200, 200)], true)).passed());
        assert!(judge(ok, &Expect::RStatus(Regex::new("^2").unwrap(), false)).passed());
        assert!(judge(ok, &Expect::String(b"ok".to_vec(), false)).passed());
        let v = judge(ok, &Expect::String(b"nope".to_vec(), false));
        assert_eq!(v.st, CheckStatus::L7Rsp);
        assert_eq!(v.desc, "HTTP content check did not match");
        assert!(!judge(b"garbage", &Expect::Default).passed());
        assert!(!judge(b"SSH-2.0\r\n", &Expect::Default).passed());
    }

    /// `hdr` looks at each comma-separated value, `fhdr` at the whole
    /// value; names match case-insensitively, values exactly (the
    /// answer of HAProxy's http-check-expect reg-test).
    #[test]
    fn header_rules() {
        let r = b"HTTP/1.1 202 Accepted\r\nx-test1: true, next value\r\nx-test2: true, begin-value, value-end, value-sub-string, value-reg-123ABC\r\nx-begin-test: 1\r\n\r\n";
        let hdr = |full, n: NameMatch, v: Option<NameMatch>| Expect::Hdr {
            full,
            name: HdrPat::Fixed(n),
            value: v.map(HdrPat::Fixed),
            neg: false,
        };
        let s = |x: &str| x.as_bytes().to_vec();
        let re = |x: &str| NameMatch::Reg(Regex::new(x).unwrap());
        for e in [
            hdr(false, NameMatch::Str(s("X-Test2")), None),
            hdr(false, NameMatch::Beg(s("X-Begin-")), None),
            hdr(false, NameMatch::End(s("-TEST")), None),
            hdr(
                true,
                NameMatch::Str(s("x-test1")),
                Some(NameMatch::Str(s("true, next value"))),
            ),
            hdr(
                false,
                NameMatch::Str(s("x-test2")),
                Some(NameMatch::Str(s("true"))),
            ),
            hdr(
                false,
                NameMatch::Beg(s("x-test")),
                Some(NameMatch::End(s("-end"))),
            ),
            hdr(
                false,
                NameMatch::Beg(s("x-test")),
                Some(NameMatch::Sub(s("-sub-"))),
            ),
            hdr(
                false,
                NameMatch::Beg(s("x-test")),
                Some(re("^value-reg-[A-Z0-9]+$")),
            ),
            hdr(
                true,
                NameMatch::Beg(s("x-test")),
                Some(re("value-reg-[A-Z0-9]+")),
            ),
        ] {
            let v = judge(r, &e);
            assert_eq!((v.st, v.code), (CheckStatus::L7Ok, 202));
        }
        for e in [
            hdr(false, NameMatch::Str(s("x-none")), None),
            // fhdr: the whole value, not one of its items.
            hdr(
                true,
                NameMatch::Str(s("x-test1")),
                Some(NameMatch::Str(s("true"))),
            ),
            // Values are compared with their case.
            hdr(
                false,
                NameMatch::Str(s("x-test2")),
                Some(NameMatch::Str(s("TRUE"))),
            ),
        ] {
            let v = judge(r, &e);
            assert_eq!(v.st, CheckStatus::L7Sts);
            assert_eq!(v.desc, "Accepted");
        }
        let neg = Expect::Hdr {
            full: false,
            name: HdrPat::Fixed(NameMatch::Str(s("x-test1"))),
            value: None,
            neg: true,
        };
        assert!(!judge(r, &neg).passed());
    }

    /// HAProxy's table of what `observe` counts: a failed connect in both
    /// modes, an established connection clears only in layer4, the HTTP
    /// events only in layer7; 501 and 505 are good answers.
    #[test]
    fn observe_judges_as_haproxy() {
        use crate::config::Observe;
        let (l4, l7) = (Observe::Layer4, Observe::Layer7);
        assert_eq!(Seen::L4Err.judge(l4), Some(true));
        assert_eq!(Seen::L4Err.judge(l7), Some(true));
        assert_eq!(Seen::L4Ok.judge(l4), Some(false));
        assert_eq!(Seen::L4Ok.judge(l7), None);
        assert_eq!(Seen::HttpSts.judge(l4), None);
        assert_eq!(Seen::HttpSts.judge(l7), Some(true));
        assert_eq!(Seen::ReadTimeout.judge(l7), Some(true));
        assert_eq!(Seen::HttpOk.judge(l7), Some(false));
        assert_eq!(Seen::L4Err.judge(Observe::None), None);
        for code in [100, 200, 404, 499, 501, 505] {
            assert_eq!(Seen::status(code), Seen::HttpOk, "{code}");
        }
        for code in [99, 500, 502, 503, 504, 599] {
            assert_eq!(Seen::status(code), Seen::HttpSts, "{code}");
        }
    }

    /// `spread-checks N` keeps each date within N % of the interval,
    /// both ways, and does move it.
    #[test]
    fn spread_stays_within_its_share() {
        let mut rng = spread_seed(7);
        let sec = Duration::from_millis(1000);
        let d: Vec<u128> = (0..200)
            .map(|_| spread_by(sec, 50, &mut rng).as_millis())
            .collect();
        assert!(d.iter().all(|x| (500..=1500).contains(x)), "{d:?}");
        assert!(
            d.iter().any(|x| *x < 800) && d.iter().any(|x| *x > 1200),
            "{d:?}"
        );
        assert!((0..100).all(|_| (950..=1050).contains(&spread_by(sec, 5, &mut rng).as_millis())));
        assert_eq!(spread_by(sec, 0, &mut rng), sec);
    }

    /// HAProxy's `info` text escapes what is not printable.
    #[test]
    fn reasons_are_haproxys() {
        let v = Verdict::new(CheckStatus::L4Con, "Connection refused");
        assert_eq!(
            v.reason(),
            "Layer4 connection problem, info: \"Connection refused\""
        );
        let v = Verdict::new(CheckStatus::L7Ok, "a\"b<\x01");
        assert_eq!(
            v.reason(),
            "Layer7 check passed, code: 0, info: \"a<22>b<3C><01>\""
        );
        assert_eq!(
            Verdict::new(CheckStatus::L4Ok, "").reason(),
            "Layer4 check passed"
        );
    }

    #[test]
    fn probe_request() {
        let c = HttpCheck {
            enabled: true,
            method: "GET".into(),
            uri: "/health".into(),
            version: "HTTP/1.1".into(),
            headers: vec![],
            body: None,
            explicit_send: false,
            own: true,
            rules: vec![],
            send_state: false,
            uri_lf: false,
            body_lf: false,
        };
        let p = HttpProbe::new(&c, "10.0.0.1:80").unwrap();
        let HttpStep::Send(req) = &p.steps[1] else {
            panic!("connect, send, expect");
        };
        assert!(matches!(p.steps[2], HttpStep::Expect(_)));
        assert_eq!(
            String::from_utf8(req.clone()).unwrap(),
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
        assert!(run_check(
            addr,
            Duration::from_secs(2),
            None,
            None,
            &[],
            ("b", "s", None),
            CheckHow::default(),
        )
        .passed());
        let probe = Probe::Http(HttpProbe {
            steps: vec![
                HttpStep::Connect(CheckConnect {
                    default: true,
                    ..CheckConnect::default()
                }),
                HttpStep::Send(b"GET / HTTP/1.0\r\n\r\n".to_vec()),
                HttpStep::Expect(HttpRule::plain(Expect::String(b"alive".to_vec(), false))),
            ],
            send_state: false,
        });
        assert!(run_check(
            addr,
            Duration::from_secs(2),
            Some(&probe),
            None,
            &[],
            ("b", "s", None),
            CheckHow::default(),
        )
        .passed());
        // Nothing listens on a port we just released.
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let e = run_check(
            dead,
            Duration::from_millis(500),
            None,
            None,
            &[],
            ("b", "s", None),
            CheckHow::default(),
        );
        assert_eq!(e.st, CheckStatus::L4Con, "{e:?}");
        assert_eq!(e.desc, "Connection refused");
    }
}
