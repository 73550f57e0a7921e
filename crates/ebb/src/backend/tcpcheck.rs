//! The `tcp-check` engine: a compiled sequence of connect, send and
//! expect steps run over one blocking connection (on the checks' thread
//! pool), reporting HAProxy's status, code and description.
//!
//! The protocol checks (`option redis-check`, `smtpchk`, `pgsql-check`,
//! `mysql-check`, `ldap-check`, `spop-check`) are sequences of the same
//! steps, as in HAProxy 2.x; MySQL, LDAP and SPOP answers are parsed by
//! their own expect functions (`CustomExpect`).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use regex::bytes::Regex;

use super::check::{connect_step, leading_int, step_is_tls, timed_out, CheckTls, Verdict, Wire};
use crate::config::{
    CheckConnect, CheckStatus, CustomExpect, ExpectMatch, ExpectOpts, TcpCheckStep,
};

/// A compiled `tcp-check` sequence.
pub struct TcpProbe {
    steps: Vec<TcpStep>,
    /// A protocol check: failures carry no `at step N` text (HAProxy's
    /// rule for its built-in sequences).
    proto: bool,
    /// `option ssl-hello-chk`: its CLIENT HELLO carries the time.
    ssl3: bool,
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
    /// `default`: the server's check settings (and the implicit connect).
    Connect(CheckConnect),
    Send(Vec<u8>),
    /// `send-lf`, `send-binary-lf` with fields.
    SendFmt(crate::sample::LogFormat, bool),
    Var(crate::sample::VarAction),
    Expect {
        m: TcpMatch,
        negate: bool,
        min_recv: Option<usize>,
        opts: ExpectOpts,
        /// `on-success`, `on-error`, `status-code`, compiled.
        say: Box<Say>,
    },
}

/// An expect's messages and code, ready to evaluate.
#[derive(Default)]
struct Say {
    on_success: Option<Msg>,
    on_error: Option<Msg>,
    code: Option<Code>,
}

enum Msg {
    Fixed(crate::config::Info),
    Fmt(crate::sample::LogFormat),
}

enum Code {
    Payload(crate::config::Payload),
    Expr(crate::sample::Expr),
}

impl Say {
    fn new(o: &ExpectOpts) -> Result<Say, String> {
        use crate::config::{Info, StatusCode};
        use crate::sample::Scope::Response;
        let msg = |i: &Option<Info>| -> Result<Option<Msg>, String> {
            Ok(match i {
                Some(Info::Fmt(f)) => Some(Msg::Fmt(crate::sample::LogFormat::parse(f, Response)?)),
                Some(i) => Some(Msg::Fixed(i.clone())),
                None => None,
            })
        };
        Ok(Say {
            on_success: msg(&o.on_success)?,
            on_error: msg(&o.on_error)?,
            code: match &o.status_code {
                Some(StatusCode::Payload(p)) => Some(Code::Payload(*p)),
                Some(StatusCode::Expr(e)) => {
                    Some(Code::Expr(crate::sample::Expr::parse(e, Response)?))
                }
                None => None,
            },
        })
    }

    /// The message for the answer `buf` (a C string: up to a NUL).
    fn render(m: &Msg, env: &Env<'_>, buf: &[u8]) -> String {
        match m {
            Msg::Fixed(i) => cstr(i.render(buf).as_bytes()),
            Msg::Fmt(f) => {
                let mut out = Vec::new();
                env.with(buf, |cx| f.render(cx, &mut out));
                cstr(&out)
            }
        }
    }

    /// The code (`status-code`, read as an integer; 0 without one or
    /// when it finds nothing).
    fn code(&self, env: &Env<'_>, buf: &[u8]) -> i64 {
        match &self.code {
            Some(Code::Payload(p)) => payload_code(p, buf),
            Some(Code::Expr(e)) => {
                // HAProxy fetches it as a string, then casts that.
                let mut out = Vec::new();
                match env.with(buf, |cx| e.render(cx, &mut out)) {
                    true => leading_int(&out),
                    false => 0,
                }
            }
            None => 0,
        }
    }
}

/// What the log-format strings and sample expressions of a tcp-check
/// read: the backend's and the server's names, the check's variables
/// (they live for one check), and the answer read so far (`res.payload`,
/// `res.len`).
pub(in crate::backend) struct Env<'a> {
    who: (&'a str, &'a str),
    vars: std::cell::RefCell<crate::sample::VarStore>,
}

impl<'a> Env<'a> {
    fn new(who: (&'a str, &'a str)) -> Env<'a> {
        Env {
            who,
            vars: std::cell::RefCell::new(crate::sample::VarStore::for_check()),
        }
    }

    fn with<R>(&self, buf: &[u8], f: impl FnOnce(&crate::sample::Ctx<'_>) -> R) -> R {
        let may_change = std::cell::Cell::new(false);
        let dst = || None;
        let ctx = crate::sample::Ctx {
            src: SocketAddr::from(([0, 0, 0, 0], 0)),
            dst: &dst,
            fe: "",
            be: Some(self.who.0),
            srv: Some(self.who.1),
            tls: false,
            sni: None,
            client_cert: None,
            req: None,
            res: None,
            vars: Some(&self.vars),
            stk: None,
            payload: Some(crate::sample::Payload {
                bytes: buf,
                sni: None,
                hello_partial: false,
                partial: false,
                may_change: &may_change,
                response: true,
            }),
            res_body: None,
            fc: None,
            early: false,
        };
        f(&ctx)
    }
}

enum TcpMatch {
    String(Vec<u8>),
    Binary(Vec<u8>),
    Regex(Regex),
    /// A regex over the upper-case hex dump of the answer.
    RBinary(Regex),
    Custom(CustomExpect),
    /// `string-lf`, `binary-lf` (`true`): rendered at each check.
    Fmt(crate::sample::LogFormat, bool),
}

impl TcpMatch {
    /// How HAProxy names the match in a timeout's report.
    fn what(&self) -> String {
        match self {
            TcpMatch::String(p) => format!(" (expect string '{}')", String::from_utf8_lossy(p)),
            TcpMatch::Binary(p) => format!(" (expect binary '{}')", hex(p)),
            TcpMatch::Regex(_) => " (expect regex)".into(),
            TcpMatch::RBinary(_) => " (expect binary regex)".into(),
            TcpMatch::Custom(_) => " (expect custom function)".into(),
            TcpMatch::Fmt(_, false) => " (expect log-format string)".into(),
            TcpMatch::Fmt(_, true) => " (expect log-format binary)".into(),
        }
    }

    /// How HAProxy names the pattern in a mismatch's report.
    fn pattern(&self) -> String {
        match self {
            TcpMatch::String(p) => format!(" '{}'", String::from_utf8_lossy(p)),
            TcpMatch::Binary(_) => " (binary)".into(),
            TcpMatch::Regex(_) => " (regex)".into(),
            TcpMatch::RBinary(_) => " (binary regex)".into(),
            TcpMatch::Custom(_) => " (custom function)".into(),
            TcpMatch::Fmt(_, false) => " (log-format string)".into(),
            TcpMatch::Fmt(_, true) => " (log-format binary)".into(),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02X}")).collect()
}

/// The largest answer a tcp-check reads (HAProxy's buffer size).
const CHECK_BUF: usize = 16 * 1024;

impl TcpProbe {
    /// Compiles `tcp-check` rules (or a protocol check's); without a
    /// `connect` first (comments aside) an implicit one opens the
    /// sequence, as in HAProxy.
    pub fn new(c: &crate::config::TcpCheck) -> Result<TcpProbe, String> {
        let (rules, proto) = match &c.builtin {
            Some((_, r)) => (r, true),
            None => (&c.rules, false),
        };
        let ssl3 = matches!(&c.builtin, Some((n, _)) if *n == "ssl-hello-chk");
        let mut steps = Vec::new();
        // (Variables and comments may come before the first connect.)
        let first = rules
            .iter()
            .find(|r| !matches!(r.step, TcpCheckStep::Comment | TcpCheckStep::Var(_)));
        if !matches!(first, Some(r) if matches!(r.step, TcpCheckStep::Connect(_))) {
            steps.push(TcpStep {
                id: 0,
                kind: StepKind::Connect(CheckConnect {
                    default: true,
                    ..CheckConnect::default()
                }),
                comment: None,
            });
        }
        for (i, r) in rules.iter().enumerate() {
            let kind = match &r.step {
                TcpCheckStep::Comment => StepKind::Comment,
                TcpCheckStep::Connect(cc) => StepKind::Connect(cc.clone()),
                TcpCheckStep::Send(d) => StepKind::Send(d.clone()),
                TcpCheckStep::SendFmt { fmt, binary } => StepKind::SendFmt(
                    crate::sample::LogFormat::parse(fmt, crate::sample::Scope::Response)?,
                    *binary,
                ),
                TcpCheckStep::Var(v) => StepKind::Var(v.clone()),
                TcpCheckStep::Expect {
                    kind,
                    pattern,
                    negate,
                    min_recv,
                    opts,
                } => {
                    let re = || {
                        let src = String::from_utf8_lossy(pattern);
                        Regex::new(&src).map_err(|e| format!("invalid regex '{src}': {e}"))
                    };
                    let m = match kind {
                        ExpectMatch::String => TcpMatch::String(pattern.clone()),
                        ExpectMatch::Binary => TcpMatch::Binary(pattern.clone()),
                        ExpectMatch::RString => TcpMatch::Regex(re()?),
                        ExpectMatch::RBinary => TcpMatch::RBinary(re()?),
                        ExpectMatch::Custom(c) => TcpMatch::Custom(*c),
                        ExpectMatch::StringLf | ExpectMatch::BinaryLf => TcpMatch::Fmt(
                            crate::sample::LogFormat::parse(
                                &String::from_utf8_lossy(pattern),
                                crate::sample::Scope::Response,
                            )?,
                            *kind == ExpectMatch::BinaryLf,
                        ),
                    };
                    StepKind::Expect {
                        m,
                        negate: *negate,
                        min_recv: *min_recv,
                        opts: (**opts).clone(),
                        say: Box::new(Say::new(opts)?),
                    }
                }
            };
            steps.push(TcpStep {
                id: i + 1,
                kind,
                comment: r.comment.clone(),
            });
        }
        Ok(TcpProbe { steps, proto, ssl3 })
    }

    /// A connect step has `ssl`.
    pub fn connects_ssl(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(&s.kind, StepKind::Connect(c) if c.ssl))
    }
}

/// What an expect step concluded.
enum Eval {
    /// Matched: go on (a custom parser may set the report if it is last).
    Next(Option<Verdict>),
    /// More bytes are needed.
    Wait,
    /// Failed: the report.
    Stop(Verdict),
}

/// A C string's view of bytes: up to the first NUL (HAProxy's messages
/// are C strings).
fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// `res.payload(...)` as an integer.
fn payload_code(p: &crate::config::Payload, buf: &[u8]) -> i64 {
    p.of(buf).map_or(0, leading_int)
}

/// Runs a `tcp-check` sequence against `addr` within `timeout`.
pub fn run_tcp_check(
    addr: SocketAddr,
    timeout: Duration,
    probe: &TcpProbe,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
    who: (&str, &str),
    how: super::check::CheckHow,
) -> Verdict {
    let start = std::cell::Cell::new(Instant::now());
    run_steps(probe, &start, timeout, tls.is_some(), who, &mut |cc| {
        connect_step(cc, addr, &start, timeout, tls, proxy_hdr, &how)
    })
}

/// The steps of a `tcp-check` sequence; `connect` opens each connection
/// (a socket, or a script of answers for the fuzz target), `tls`: the
/// default connection is TLS (the success of a bare connect is layer 6's).
pub(in crate::backend) fn run_steps(
    probe: &TcpProbe,
    start: &std::cell::Cell<Instant>,
    timeout: Duration,
    tls: bool,
    who: (&str, &str),
    connect: &mut super::check::Connector<'_>,
) -> Verdict {
    let env = Env::new(who);
    let mut conn: Option<Box<dyn Wire>> = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut must_read = true;
    let mut closed = false;
    // The last step that ran and what a custom parser reported.
    let mut last: Option<&TcpStep> = None;
    let mut custom_ok: Option<Verdict> = None;
    let proto = probe.proto;
    // The last connection is TLS (a sequence that ends on it passes at
    // layer 6, HAProxy's `ssl_sock_is_ssl`).
    let mut conn_tls = false;
    // The ` at step N of tcp-check (...)` part of a report.
    let at = |st: &TcpStep, what: &str| -> String {
        if proto {
            return String::new();
        }
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
    let last_rule = probe
        .steps
        .iter()
        .rposition(|s| !matches!(s.kind, StepKind::Comment));
    for (idx, st) in probe.steps.iter().enumerate() {
        match &st.kind {
            StepKind::Comment => continue,
            StepKind::Connect(cc) => {
                drop(conn.take());
                conn_tls = step_is_tls(cc, tls);
                let what = match cc.port {
                    Some(p) => format!(" (connect port {p})"),
                    None => " (connect)".to_string(),
                };
                match connect(cc) {
                    Ok(c) => conn = Some(c),
                    Err(mut v) => {
                        // HAProxy's connect step is over once the SOCKS4
                        // request left: a refusal names no step kind.
                        let what = match super::socks4::Fail::reported(&v.desc) {
                            true => String::new(),
                            false => what,
                        };
                        v.desc.push_str(&at(st, &what));
                        return v;
                    }
                }
                buf.clear();
                must_read = true;
                closed = false;
            }
            StepKind::Var(a) => env.with(&buf, |cx| a.run(cx)),
            StepKind::Send(_) | StepKind::SendFmt(..) => {
                let rendered;
                let d: &Vec<u8> = match &st.kind {
                    StepKind::SendFmt(f, binary) => {
                        let mut out = Vec::new();
                        env.with(&buf, |cx| f.render(cx, &mut out));
                        if out.is_empty() {
                            // HAProxy sends nothing and goes on.
                            last = Some(st);
                            continue;
                        }
                        rendered = match binary {
                            false => Some(out),
                            true => crate::config::unhex_bytes(&out),
                        };
                        match &rendered {
                            Some(d) => d,
                            None => {
                                return Verdict::new(
                                    CheckStatus::L7Rsp,
                                    format!(
                                    "tcp-check send : failed to build log-format string at step {}",
                                    st.id
                                ),
                                )
                            }
                        }
                    }
                    StepKind::Send(d) => d,
                    _ => continue,
                };
                let Some(c) = conn.as_mut() else {
                    return Verdict::new(
                        CheckStatus::SockErr,
                        format!("no connection{}", at(st, " (send)")),
                    );
                };
                let mut d = std::borrow::Cow::Borrowed(d.as_slice());
                let t = crate::config::SSL3_HELLO_TIME_AT;
                if probe.ssl3 && d.len() >= t + 4 {
                    // HAProxy's `%[date(),htonl,hex]`.
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |t| t.as_secs() as u32);
                    d.to_mut()[t..t + 4].copy_from_slice(&now.to_be_bytes());
                }
                if let Err(e) = c.write_all(&d).and_then(|()| c.flush()) {
                    return Verdict::new(
                        CheckStatus::SockErr,
                        format!("{}{}", super::check::os_text(&e), at(st, " (send)")),
                    );
                }
                buf.clear();
                must_read = true;
                closed = false;
            }
            StepKind::Expect {
                m,
                negate,
                min_recv,
                opts,
                say,
            } => {
                let Some(c) = conn.as_mut() else {
                    return Verdict::new(
                        CheckStatus::SockErr,
                        format!("no connection{}", at(st, &m.what())),
                    );
                };
                let is_last = last_rule == Some(idx);
                loop {
                    if must_read && !closed {
                        let tout = || Verdict::new(opts.tout_status, at(st, &m.what()).to_string());
                        if start.get().elapsed() > timeout {
                            return tout();
                        }
                        let mut tmp = [0u8; 4096];
                        match c.read(&mut tmp) {
                            Ok(0) => closed = true,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(e) if timed_out(&e) => return tout(),
                            // An error after some data (a reset that
                            // followed the answer): HAProxy judges the
                            // data, as at the end of the stream.
                            Err(_) if !buf.is_empty() => closed = true,
                            Err(e) => {
                                return Verdict::new(
                                    CheckStatus::SockErr,
                                    format!("{}{}", super::check::os_text(&e), at(st, &m.what())),
                                )
                            }
                        }
                        must_read = false;
                        if closed && buf.is_empty() {
                            let mut d = format!("TCPCHK got an empty response at step {}", st.id);
                            if let Some(cm) = &st.comment {
                                d.push_str(&format!(" comment: '{cm}'"));
                            }
                            return Verdict::new(opts.error_status, d);
                        }
                    }
                    let last_read = closed || buf.len() >= CHECK_BUF;
                    let how = Judge {
                        st,
                        last_read,
                        is_last,
                        proto,
                        env: &env,
                        say,
                    };
                    match expect(m, *negate, *min_recv, opts, &buf, &how) {
                        Eval::Wait => must_read = true,
                        Eval::Stop(v) => return v,
                        Eval::Next(v) => {
                            if v.is_some() {
                                custom_ok = v;
                            }
                            break;
                        }
                    }
                }
            }
        }
        last = Some(st);
    }
    if let Some(mut v) = custom_ok {
        // HAProxy logs the parser's text, then its end of sequence
        // stores an empty description.
        v.note = Some(std::mem::take(&mut v.desc));
        return v;
    }
    match last.map(|s| &s.kind) {
        Some(StepKind::Expect { opts, say, .. }) => {
            let desc = match &say.on_success {
                Some(m) => Say::render(m, &env, &buf),
                None if proto => String::new(),
                None => "(tcp-check)".to_string(),
            };
            Verdict {
                code: say.code(&env, &buf),
                ..Verdict::new(opts.ok_status, desc)
            }
        }
        Some(StepKind::Connect(_)) if last.is_some_and(|s| s.id == 0) => {
            Verdict::new(CheckStatus::L4Ok, "")
        }
        Some(StepKind::Connect(_)) => {
            let st = if conn_tls {
                CheckStatus::L6Ok
            } else {
                CheckStatus::L4Ok
            };
            Verdict::new(st, "(tcp-check)")
        }
        _ => Verdict::new(CheckStatus::L7Ok, "(tcp-check)"),
    }
}

/// Where an expect step is judged: its step, whether the answer is
/// whole (`last_read`), whether it is the last rule, whether the sequence
/// is a protocol check's, and what its messages read.
struct Judge<'a> {
    st: &'a TcpStep,
    last_read: bool,
    is_last: bool,
    proto: bool,
    env: &'a Env<'a>,
    say: &'a Say,
}

/// Evaluates one expect step on the bytes read so far.
fn expect(
    m: &TcpMatch,
    negate: bool,
    min_recv: Option<usize>,
    opts: &ExpectOpts,
    buf: &[u8],
    j: &Judge<'_>,
) -> Eval {
    let (st, last_read, is_last, proto) = (j.st, j.last_read, j.is_last, j.proto);
    // A log-format pattern, rendered now (HAProxy's failures to render
    // are L7RSP with their own text).
    let lf = match m {
        TcpMatch::Fmt(f, binary) => {
            let mut out = Vec::new();
            j.env.with(buf, |cx| f.render(cx, &mut out));
            let p = match (out.is_empty(), binary) {
                (true, _) => Err("log-format string evaluated to an empty string"),
                (false, false) => Ok(out),
                (false, true) => crate::config::unhex_bytes(&out)
                    .ok_or("Failed to parse hexastring resulting of eval of a log-format string"),
            };
            match p {
                Ok(p) => Some(p),
                Err(e) => {
                    let mut desc = e.to_string();
                    if let Some(cm) = &st.comment {
                        desc.push_str(&format!(" comment: {cm}"));
                    }
                    return Eval::Stop(Verdict {
                        code: j.say.code(j.env, buf),
                        ..Verdict::new(CheckStatus::L7Rsp, desc)
                    });
                }
            }
        }
        _ => None,
    };
    if !last_read {
        let need = match m {
            TcpMatch::String(p) | TcpMatch::Binary(p) => p.len(),
            TcpMatch::Fmt(..) => lf.as_ref().map_or(0, Vec::len),
            _ => 0,
        };
        if buf.len() < need || min_recv.is_some_and(|n| buf.len() < n) {
            return Eval::Wait;
        }
    }
    let found = match m {
        TcpMatch::String(p) | TcpMatch::Binary(p) => {
            !p.is_empty() && buf.windows(p.len()).any(|w| w == p.as_slice())
        }
        TcpMatch::Regex(re) => re.is_match(buf),
        TcpMatch::RBinary(re) => re.is_match(hex(buf).as_bytes()),
        TcpMatch::Custom(c) => return custom(*c, opts, buf, last_read, is_last),
        TcpMatch::Fmt(..) => lf
            .as_deref()
            .is_some_and(|p| buf.windows(p.len()).any(|w| w == p)),
    };
    if !found && !last_read && min_recv.is_none() {
        return Eval::Wait;
    }
    if found != negate {
        return Eval::Next(None);
    }
    let mut desc = match &j.say.on_error {
        Some(msg) => Say::render(msg, j.env, buf),
        None if proto => String::new(),
        None => format!(
            "{}{} at step {}",
            if found {
                "TCPCHK matched unwanted content"
            } else {
                "TCPCHK did not match content"
            },
            m.pattern(),
            st.id
        ),
    };
    if let Some(cm) = &st.comment {
        desc.push_str(&format!(" comment: {cm}"));
    }
    Eval::Stop(Verdict {
        code: j.say.code(j.env, buf),
        ..Verdict::new(opts.error_status, desc)
    })
}

/// The protocol checks' own answer parsers (HAProxy's
/// `tcpcheck_*_expect_*` functions).
fn custom(c: CustomExpect, opts: &ExpectOpts, buf: &[u8], last_read: bool, is_last: bool) -> Eval {
    let fail = |st: CheckStatus, code: i64, desc: String| {
        Eval::Stop(Verdict {
            code,
            ..Verdict::new(st, desc)
        })
    };
    let ok = |desc: String| Eval::Next(Some(Verdict::new(opts.ok_status, desc)));
    let short = |last_read: bool| {
        if last_read {
            fail(CheckStatus::L7Rsp, 0, String::new())
        } else {
            Eval::Wait
        }
    };
    match c {
        CustomExpect::MysqlHandshake | CustomExpect::MysqlOk => {
            // The OK packet follows the handshake packet.
            let offset = if c == CustomExpect::MysqlOk {
                match buf.get(..3) {
                    Some(h) => 4 + (h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16),
                    None => return short(last_read),
                }
            } else {
                0
            };
            let Some(h) = buf.get(offset..offset + 4) else {
                return short(last_read);
            };
            let plen = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
            if buf.len() < offset + plen + 4 {
                return short(last_read);
            }
            if buf.get(offset + 4) == Some(&0xff) {
                let err = buf
                    .get(offset + 5..offset + 7)
                    .map_or(0, |e| i64::from(e[0]) | i64::from(e[1]) << 8);
                let desc = cstr(buf.get(offset + 7..).unwrap_or(b""));
                return fail(CheckStatus::L7Sts, err, desc);
            }
            if !is_last {
                return Eval::Next(None);
            }
            // The server's version, from the handshake packet.
            ok(cstr(buf.get(5..).unwrap_or(b"")))
        }
        CustomExpect::LdapBind => ldap(buf, last_read, opts),
        CustomExpect::SpopHello => {
            let Some(h) = buf.get(..4) else {
                return short(last_read);
            };
            let size = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
            if !last_read && buf.len() < 4 + size {
                return Eval::Wait;
            }
            let frame = &buf[4..buf.len().min(4 + size)];
            match spop_hello(frame) {
                Ok(()) => ok("SPOA server is ok".into()),
                Err(e) => fail(CheckStatus::L7Rsp, 0, e.into()),
            }
        }
    }
}

/// An LDAPv3 bind response (RFC 4511 4.2.2): `resultCode` 0 passes.
fn ldap(buf: &[u8], last_read: bool, opts: &ExpectOpts) -> Eval {
    let not_ldap = || Eval::Stop(Verdict::new(CheckStatus::L7Rsp, "Not LDAPv3 protocol"));
    let short = || {
        if last_read {
            Eval::Stop(Verdict::new(CheckStatus::L7Rsp, ""))
        } else {
            Eval::Wait
        }
    };
    let Some(&lb) = buf.get(1) else {
        return short();
    };
    let (nbytes, msglen) = if lb & 0x80 != 0 {
        let n = (lb & 0x7f) as usize;
        let Some(v) = buf.get(2..2 + n) else {
            return short();
        };
        let len = match n {
            4 => u32::from_be_bytes([v[0], v[1], v[2], v[3]]) as usize,
            2 => u16::from_be_bytes([v[0], v[1]]) as usize,
            _ => return not_ldap(),
        };
        (n, len)
    } else {
        (0, lb as usize)
    };
    if buf.len() < 2 + nbytes + msglen {
        return short();
    }
    let mut p = 2 + nbytes;
    // messageID 1, then protocolOp bindResponse (0x61).
    if buf.get(p..p + 4) != Some(b"\x02\x01\x01\x61") {
        return not_ldap();
    }
    p += 4;
    let n = match buf.get(p) {
        Some(b) if b & 0x80 != 0 => (b & 0x7f) as usize,
        Some(_) => 0,
        None => return not_ldap(),
    };
    p += 1 + n;
    // ldapResult: ENUMERATED resultCode.
    if buf.get(p..p + 2) != Some(b"\x0a\x01") {
        return not_ldap();
    }
    let code = buf.get(p + 2).copied().unwrap_or(0);
    if code != 0 {
        return Eval::Stop(Verdict {
            code: i64::from(code),
            ..Verdict::new(
                CheckStatus::L7Sts,
                "See RFC: http://tools.ietf.org/html/rfc4511#section-4.1.9",
            )
        });
    }
    Eval::Next(Some(Verdict::new(opts.ok_status, "Success")))
}

/// SPOP's variable-length integer.
fn varint(b: &[u8], p: &mut usize) -> Option<u64> {
    let mut v = u64::from(*b.get(*p)?);
    *p += 1;
    if v < 240 {
        return Some(v);
    }
    let mut r = 4;
    loop {
        let c = *b.get(*p)?;
        *p += 1;
        v = v.checked_add(u64::from(c).checked_shl(r)?)?;
        r += 7;
        if c < 128 || r > 63 {
            return Some(v);
        }
    }
}

/// A length-prefixed SPOP string.
fn spop_str<'a>(b: &'a [u8], p: &mut usize) -> Option<&'a [u8]> {
    let n = usize::try_from(varint(b, p)?).ok()?;
    let s = b.get(*p..p.checked_add(n)?)?;
    *p += n;
    Some(s)
}

/// Skips one typed SPOP value.
fn spop_skip(b: &[u8], p: &mut usize) -> Option<()> {
    let t = *b.get(*p)?;
    *p += 1;
    match t & 0x0f {
        2..=5 => {
            varint(b, p)?;
        }
        6 => *p += 4,
        7 => *p += 16,
        8 | 9 => {
            spop_str(b, p)?;
        }
        _ => {}
    }
    (*p <= b.len()).then_some(())
}

/// HAProxy's reading of an agent's answer to a health check HELLO:
/// Ok, or the SPOE error text.
fn spop_hello(f: &[u8]) -> Result<(), &'static str> {
    const INVALID: &str = "invalid frame received";
    // AGENT-DISCONNECT (102) and anything but AGENT-HELLO (101).
    if f.first() != Some(&101) || f.len() < 7 {
        return Err(INVALID);
    }
    let flags = u32::from_be_bytes([f[1], f[2], f[3], f[4]]);
    if flags & 1 == 0 {
        return Err("fragmentation not supported");
    }
    if f[5] != 0 || f[6] != 0 {
        return Err(INVALID);
    }
    let mut p = 7;
    let (mut vsn, mut mfs) = (false, false);
    while p < f.len() {
        let key = spop_str(f, &mut p)
            .filter(|k| !k.is_empty())
            .ok_or(INVALID)?;
        if key.starts_with(b"version") {
            if f.get(p).map(|t| t & 0x0f) != Some(8) {
                return Err(INVALID);
            }
            p += 1;
            let v = spop_str(f, &mut p).ok_or(INVALID)?;
            if spop_version(v) != Some(2000) {
                return Err("unsupported version");
            }
            vsn = true;
        } else if key.starts_with(b"max-frame-size") {
            if !matches!(f.get(p).map(|t| t & 0x0f), Some(2..=5)) {
                return Err(INVALID);
            }
            p += 1;
            let n = varint(f, &mut p).ok_or(INVALID)?;
            if !(256..=16380).contains(&n) {
                return Err("max-frame-size too big or too small");
            }
            mfs = true;
        } else if key.starts_with(b"capabilities") {
            if f.get(p).map(|t| t & 0x0f) != Some(8) {
                return Err(INVALID);
            }
            p += 1;
            spop_str(f, &mut p).ok_or(INVALID)?;
        } else {
            spop_skip(f, &mut p).ok_or(INVALID)?;
        }
    }
    if !vsn {
        return Err("version value not found");
    }
    if !mfs {
        return Err("max-frame-size value not found");
    }
    Ok(())
}

/// `MAJOR.MINOR` as HAProxy numbers SPOP versions (2.0 is 2000); None
/// when malformed.
fn spop_version(v: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(v).ok()?.trim();
    let (maj, min) = s.split_once('.')?;
    let maj: u32 = maj.parse().ok().filter(|m| *m > 0)?;
    let digits: String = min.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() || digits.len() != min.len() {
        return None;
    }
    let min: u32 = digits.parse().ok().filter(|m| *m <= 999)?;
    // A major past u32::MAX / 1000 is no version (HAProxy's int product
    // would wrap; ebb's arithmetic must not overflow).
    maj.checked_mul(1000)?.checked_add(min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The answers of HAProxy's spop-check reg-test, and their reports.
    #[test]
    fn spop_answers() {
        let f = |s: &str| spop_hello(&unhex(s)[4..]);
        assert_eq!(f("00000036 65 00000001 0000 0776657273696F6E 0803322E30 0E6D61782D6672616D652D73697A65 03FCF0 060C6361706162696C6974696573 0800"), Ok(()));
        assert_eq!(f("00000000"), Err("invalid frame received"));
        assert_eq!(
            f("00000007 65 00000000 0000"),
            Err("fragmentation not supported")
        );
        assert_eq!(
            f("00000014 65 00000001 0000 0776657273696F6E 0803312E30"),
            Err("unsupported version")
        );
        assert_eq!(
            f("00000007 65 00000001 0000"),
            Err("version value not found")
        );
        // A major version whose thousands pass u32 (it overflowed, a
        // panic in a debug build): unsupported, like any other.
        assert_eq!(spop_version(b"4294968.0"), None);
        assert_eq!(spop_version(b"4294967.296"), None);
        assert_eq!(spop_version(b"4294967.295"), Some(u32::MAX));
        assert_eq!(
            f("0000001C 65 00000001 0000 0776657273696F6E 080B343239343936382E303030"),
            Err("unsupported version")
        );
    }

    #[test]
    fn ldap_answers() {
        let o = ExpectOpts::default();
        let v = |s: &str| match ldap(&unhex(s), true, &o) {
            Eval::Next(Some(v)) | Eval::Stop(v) => v,
            _ => panic!("{s}"),
        };
        assert_eq!(v("300C020101 61 070A01 00 04000400").desc, "Success");
        assert_eq!(
            v("300C020101 60 070A01 00 04000400").desc,
            "Not LDAPv3 protocol"
        );
        let e = v("300C020101 61 070A01 01 04000400");
        assert_eq!((e.st, e.code), (CheckStatus::L7Sts, 1));
        assert_eq!(
            v("308400000010020101 61 84000000070A01 00 04000400").desc,
            "Success"
        );
        // Cut short: waits for more unless the server closed.
        assert!(matches!(
            ldap(&unhex("308400000010020101 61 84000000070A01"), false, &o),
            Eval::Wait
        ));
    }
}
