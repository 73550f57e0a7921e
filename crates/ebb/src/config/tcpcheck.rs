//! `option tcp-check` and `tcp-check comment|connect|send|send-binary|
//! expect` (configuration.txt 4.2): a health check as a sequence of
//! steps. What ebb supports of each is listed in the errors; anything
//! else is refused at its line, never ignored.

use std::net::IpAddr;

use super::Loc;
use crate::config::types::{CheckConnect, ConnectProto};

/// The `tcp-check` rules of a backend and whether `option tcp-check` is
/// set (the last of `option httpchk` / `option tcp-check` / a protocol
/// check wins, as in HAProxy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpCheck {
    pub enabled: bool,
    pub rules: Vec<TcpCheckRule>,
    /// A protocol check (`option redis-check`, `smtpchk`...): its name
    /// and its built-in sequence, which replaces `rules` when it runs.
    pub builtin: Option<(&'static str, Vec<TcpCheckRule>)>,
}

/// One `tcp-check` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpCheckRule {
    pub step: TcpCheckStep,
    /// `comment <msg>`: appended to the report when the step fails.
    pub comment: Option<String>,
    pub loc: Loc,
}

/// HAProxy's health check statuses (its `healthcheck_status`, in its
/// order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckStatus {
    #[default]
    Ini,
    /// An agent's answer that changes no health (HAProxy's `CHECKED`).
    Checked,
    /// Live traffic's errors (`observe`) made `on-error` fail a check
    /// (HAProxy's `HANA`).
    Hana,
    SockErr,
    L4Ok,
    L4Tout,
    L4Con,
    L6Ok,
    L6Tout,
    L6Rsp,
    L7Tout,
    L7Rsp,
    L7Ok,
    L7OkC,
    L7Sts,
    /// An external check's command failed (`PROCERR`).
    ProcErr,
    /// An external check's command took too long (`PROCTOUT`).
    ProcTout,
    /// An external check's command exited with 0 (`PROCOK`).
    ProcOk,
}

impl CheckStatus {
    /// The short name (`show stat`'s `check_status`, `ok-status` values).
    pub fn short(self) -> &'static str {
        use CheckStatus::*;
        match self {
            Ini => "INI",
            Checked => "CHECKED",
            Hana => "HANA",
            SockErr => "SOCKERR",
            L4Ok => "L4OK",
            L4Tout => "L4TOUT",
            L4Con => "L4CON",
            L6Ok => "L6OK",
            L6Tout => "L6TOUT",
            L6Rsp => "L6RSP",
            L7Tout => "L7TOUT",
            L7Rsp => "L7RSP",
            L7Ok => "L7OK",
            L7OkC => "L7OKC",
            L7Sts => "L7STS",
            ProcErr => "PROCERR",
            ProcTout => "PROCTOUT",
            ProcOk => "PROCOK",
        }
    }

    /// The description (`check_desc`, the logs' `reason:`).
    pub fn text(self) -> &'static str {
        use CheckStatus::*;
        match self {
            Ini => "Initializing",
            Checked => "No status change",
            Hana => "Health analyze",
            SockErr => "Socket error",
            L4Ok => "Layer4 check passed",
            L4Tout => "Layer4 timeout",
            L4Con => "Layer4 connection problem",
            L6Ok => "Layer6 check passed",
            L6Tout => "Layer6 timeout",
            L6Rsp => "Layer6 invalid response",
            L7Tout => "Layer7 timeout",
            L7Rsp => "Layer7 invalid response",
            L7Ok => "Layer7 check passed",
            L7OkC => "Layer7 check conditionally passed",
            L7Sts => "Layer7 wrong status",
            ProcErr => "External check error",
            ProcTout => "External check timeout",
            ProcOk => "External check passed",
        }
    }

    /// HAProxy's number (`show servers state`'s `srv_check_status`).
    pub fn num(self) -> u32 {
        use CheckStatus::*;
        match self {
            Ini => 1,
            Checked => 3,
            Hana => 4,
            SockErr => 5,
            L4Ok => 6,
            L4Tout => 7,
            L4Con => 8,
            L6Ok => 9,
            L6Tout => 10,
            L6Rsp => 11,
            L7Tout => 12,
            L7Rsp => 13,
            L7Ok => 15,
            L7OkC => 16,
            L7Sts => 17,
            ProcErr => 18,
            ProcTout => 19,
            ProcOk => 20,
        }
    }

    /// A passing status (the server's health counts up).
    pub fn passed(self) -> bool {
        use CheckStatus::*;
        matches!(self, L4Ok | L6Ok | L7Ok | L7OkC | ProcOk)
    }

    /// Whether the status carries a code (HAProxy's `>= L57DATA`).
    pub fn has_code(self) -> bool {
        self >= CheckStatus::L7Ok
    }

    /// One of `allowed` by its short name, in any case (HAProxy's
    /// `ok-status`, `error-status`, `tout-status` values).
    pub(crate) fn parse(
        s: &str,
        allowed: &[CheckStatus],
        what: &str,
    ) -> Result<CheckStatus, String> {
        allowed
            .iter()
            .copied()
            .find(|c| c.short().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<&str> = allowed.iter().map(|c| c.short()).collect();
                format!("'{what}' expects one of {} (got '{s}')", names.join(", "))
            })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcpCheckStep {
    /// `tcp-check comment <msg>`.
    Comment,
    /// `tcp-check connect [default] [port N] [addr IP] [send-proxy]
    /// [via-socks4] [linger] [ssl] [sni NAME] [alpn LIST] [proto none]`.
    Connect(CheckConnect),
    /// `send <string>` or `send-binary <hex>` (and their `-lf` forms when
    /// the format is plain text).
    Send(Vec<u8>),
    /// `send-lf FMT`, `send-binary-lf FMT` with fields: rendered at each
    /// check (the hex string of `send-binary-lf` then decoded).
    SendFmt { fmt: String, binary: bool },
    /// `tcp-check set-var(VAR) EXPR`, `set-var-fmt(VAR) FMT`,
    /// `unset-var(VAR)`: run when the sequence reaches them.
    Var(crate::sample::VarAction),
    /// `expect [min-recv N] [!] string|rstring|binary|rbinary PATTERN`
    /// and its options.
    Expect {
        kind: ExpectMatch,
        /// The bytes to find (`string`, `binary`), or the regex.
        pattern: Vec<u8>,
        negate: bool,
        /// `min-recv`: `None` (-1, the default) waits for more data on a
        /// mismatch; `Some(n)` waits for n bytes, then concludes.
        min_recv: Option<usize>,
        opts: Box<ExpectOpts>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectMatch {
    String,
    Binary,
    RString,
    /// A regex over the hex dump of the answer (upper case).
    RBinary,
    /// A protocol check's own parser (HAProxy's `expect custom`).
    Custom(CustomExpect),
    /// `string-lf FMT`, `binary-lf FMT`: the pattern is a log-format
    /// string rendered at each check (a hex string for `binary-lf`).
    StringLf,
    BinaryLf,
}

/// The answers the protocol checks parse themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CustomExpect {
    /// MySQL's initial handshake packet.
    MysqlHandshake,
    /// MySQL's OK packet after the handshake.
    MysqlOk,
    /// An LDAPv3 bind response.
    LdapBind,
    /// An SPOP AGENT-HELLO frame.
    SpopHello,
}

/// What an `expect` reports: the status on success, on failure and on a
/// timeout, the message (`on-success`, `on-error`) and the code
/// (`status-code`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectOpts {
    pub ok_status: CheckStatus,
    pub error_status: CheckStatus,
    pub tout_status: CheckStatus,
    pub on_success: Option<Info>,
    pub on_error: Option<Info>,
    pub status_code: Option<StatusCode>,
}

/// `status-code`: the check's code after the expect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatusCode {
    /// A protocol check's (`res.payload(O,L)`).
    Payload(Payload),
    /// `status-code EXPR`: a sample expression, read as an integer.
    Expr(String),
}

impl Default for ExpectOpts {
    fn default() -> Self {
        ExpectOpts {
            ok_status: CheckStatus::L7Ok,
            error_status: CheckStatus::L7Rsp,
            tout_status: CheckStatus::L7Tout,
            on_success: None,
            on_error: None,
            status_code: None,
        }
    }
}

/// The values of an expect's `ok-status`.
pub const OK_STATUSES: &[CheckStatus] = &[
    CheckStatus::L7Ok,
    CheckStatus::L7OkC,
    CheckStatus::L6Ok,
    CheckStatus::L4Ok,
];

/// The values of an expect's `error-status`.
pub const ERROR_STATUSES: &[CheckStatus] = &[
    CheckStatus::L7Rsp,
    CheckStatus::L7Sts,
    CheckStatus::L7OkC,
    CheckStatus::L6Rsp,
    CheckStatus::L4Con,
];

/// The message of an expect: a plain log-format string, or the answer's
/// bytes from an offset as the protocol checks take them
/// (`%[res.payload(N,0),ltrim(' '),cut_crlf]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Info {
    Text(String),
    /// `on-success FMT`, `on-error FMT`: a log-format string, rendered
    /// with the answer (`res.payload`, `res.len`), the names and the
    /// check's variables.
    Fmt(String),
    Answer {
        from: usize,
        ltrim_space: bool,
        cut_crlf: bool,
    },
}

/// `res.payload(offset,length)` (length 0: to the end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Payload {
    pub offset: usize,
    pub len: usize,
}

impl Payload {
    /// The bytes of `buf` it designates (none if the answer is too short,
    /// as HAProxy's fetch fails).
    pub fn of<'a>(&self, buf: &'a [u8]) -> Option<&'a [u8]> {
        let rest = buf.get(self.offset..)?;
        if self.len == 0 {
            Some(rest)
        } else {
            rest.get(..self.len)
        }
    }
}

impl Info {
    /// The message for the answer `buf`.
    pub fn render(&self, buf: &[u8]) -> String {
        match self {
            Info::Text(t) | Info::Fmt(t) => t.clone(),
            Info::Answer {
                from,
                ltrim_space,
                cut_crlf,
            } => {
                let mut b = buf.get(*from..).unwrap_or(b"");
                if *ltrim_space {
                    while let [b' ', r @ ..] = b {
                        b = r;
                    }
                }
                if *cut_crlf {
                    let end = b.iter().position(|c| *c == b'\r' || *c == b'\n');
                    b = &b[..end.unwrap_or(b.len())];
                }
                String::from_utf8_lossy(b).into_owned()
            }
        }
    }
}

impl super::Proxy {
    /// Whether the section's check rules have a `connect ssl` step
    /// (HAProxy's `PR_O_TCPCHK_SSL`, set by any such rule, whichever
    /// check runs): its servers' TLS settings are then in use.
    pub fn checks_connect_ssl(&self) -> bool {
        let tcp = self
            .tcp_check
            .rules
            .iter()
            .any(|r| matches!(&r.step, TcpCheckStep::Connect(c) if c.ssl));
        let http = self
            .http_check
            .rules
            .iter()
            .any(|r| matches!(&r.step, super::HttpCheckStep::Connect(c) if c.ssl));
        tcp || http
    }
}

/// A hex string rendered at run time (`send-binary-lf`,
/// `expect binary-lf`), decoded; None when it is not one.
pub fn unhex_bytes(b: &[u8]) -> Option<Vec<u8>> {
    std::str::from_utf8(b).ok().and_then(|s| unhex(s).ok())
}

/// A hex string (`send-binary`, `expect binary`).
pub(super) fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() % 2 != 0 {
        return Err(format!("'{s}' is not an even-length hex string"));
    }
    b.chunks(2)
        .map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("'{s}' is not a hex string"))
        })
        .collect()
}

/// Takes `comment <msg>` out of the words, wherever it is.
fn take_comment(w: &mut Vec<String>) -> Result<Option<String>, String> {
    match w.iter().position(|x| x == "comment") {
        None => Ok(None),
        Some(i) if i + 1 < w.len() => {
            let c = w.remove(i + 1);
            w.remove(i);
            Ok(Some(c))
        }
        Some(_) => Err("'comment' expects a message".to_string()),
    }
}

/// `option tcp-check`.
pub(super) fn enable(tc: &mut TcpCheck, rest: &[String]) -> Result<(), String> {
    if let Some(x) = rest.first() {
        return Err(format!(
            "unexpected argument '{x}' after 'option tcp-check'"
        ));
    }
    tc.enabled = true;
    tc.builtin = None;
    Ok(())
}

/// A log-format string ebb can evaluate: plain text (`%%` is a `%`).
/// Formats with `%` fields are refused, never sent unevaluated.
pub(super) fn plain_format(s: &str, what: &str) -> Result<String, String> {
    let t = s.replace("%%", "\u{0}");
    if t.contains('%') {
        return Err(format!(
            "'{what}': ebb takes plain text here, not log-format fields ('{s}')"
        ));
    }
    Ok(t.replace('\u{0}', "%"))
}

/// Parses the words after `tcp-check`.
pub(super) fn parse(tc: &mut TcpCheck, w: &[String], loc: &Loc) -> Result<(), String> {
    let Some(verb) = w.first().map(String::as_str) else {
        return Err("'tcp-check' expects comment, connect, send, send-binary, send-lf, send-binary-lf or expect".into());
    };
    let mut args: Vec<String> = w[1..].to_vec();
    let (step, comment) = match verb {
        "comment" => {
            let [c] = args.as_slice() else {
                return Err("'tcp-check comment' expects one message".to_string());
            };
            (TcpCheckStep::Comment, Some(c.clone()))
        }
        "connect" => {
            let (cc, comment) = parse_connect(&args, false)?;
            (TcpCheckStep::Connect(cc), comment)
        }
        "send" | "send-binary" | "send-lf" | "send-binary-lf" => {
            let comment = take_comment(&mut args)?;
            let [d] = args.as_slice() else {
                return Err(format!("'tcp-check {verb}' expects one data argument"));
            };
            let d = if verb.ends_with("-lf") {
                match plain_format(d, &format!("tcp-check {verb}")) {
                    Ok(t) => t,
                    Err(_) => {
                        crate::sample::LogFormat::parse(d, crate::sample::Scope::Response)
                            .map_err(|e| format!("'{d}' invalid log-format string ({e})."))?;
                        let step = TcpCheckStep::SendFmt {
                            fmt: d.clone(),
                            binary: verb == "send-binary-lf",
                        };
                        tc.rules.push(TcpCheckRule {
                            step,
                            comment,
                            loc: loc.clone(),
                        });
                        return Ok(());
                    }
                }
            } else {
                d.clone()
            };
            let data = if verb.starts_with("send-binary") {
                unhex(&d).map_err(|e| format!("'tcp-check {verb}': {e}"))?
            } else {
                d.into_bytes()
            };
            (TcpCheckStep::Send(data), comment)
        }
        "expect" => {
            let (step, comment) = parse_expect(&args)?;
            (step, comment)
        }
        o => {
            return Err(format!(
                "'tcp-check {o}' is not supported by ebb (supported: comment, connect, send, send-binary, send-lf, send-binary-lf, expect)"
            ))
        }
    };
    tc.rules.push(TcpCheckRule {
        step,
        comment,
        loc: loc.clone(),
    });
    Ok(())
}

/// The words after `tcp-check connect` (`http`: after `http-check
/// connect`, whose `proto` names an HTTP protocol): the step and its
/// comment.
pub(super) fn parse_connect(
    args: &[String],
    http: bool,
) -> Result<(CheckConnect, Option<String>), String> {
    let kw = if http { "http-check" } else { "tcp-check" };
    let mut cc = CheckConnect::default();
    let mut comment = None;
    // `addr IP:PORT`: the port, unless `port` gives one (HAProxy's
    // order).
    let mut addr_port = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |what: &str| {
            it.next()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("'{kw} connect {a}' expects {what}"))
        };
        match a.as_str() {
            "default" => cc.default = true,
            "send-proxy" => cc.send_proxy = true,
            "linger" => cc.linger = true,
            "via-socks4" => cc.via_socks4 = true,
            "ssl" => cc.ssl = true,
            "comment" => comment = Some(val("a string")?.clone()),
            "port" => {
                let v = val("a port")?;
                cc.port = Some(
                    v.parse::<u16>()
                        .ok()
                        .filter(|p| *p > 0)
                        .ok_or_else(|| format!("'{kw} connect port': invalid port '{v}' (ebb takes a number)"))?,
                );
            }
            "addr" => {
                let v = val("an address")?;
                let bad = || format!("'{kw} connect addr': invalid address '{v}'");
                match v.parse::<IpAddr>() {
                    Ok(ip) => cc.addr = Some(ip),
                    Err(_) => {
                        let sa = v.parse::<std::net::SocketAddr>().map_err(|_| bad())?;
                        cc.addr = Some(sa.ip());
                        addr_port = Some(sa.port()).filter(|p| *p > 0);
                    }
                }
            }
            "sni" => {
                let v = val("a string")?;
                // rustls sends a DNS name, or none for an address: any
                // other text could not be sent as written.
                rustls::pki_types::ServerName::try_from(v.as_str()).map_err(|_| {
                    format!("'{kw} connect sni': ebb sends a DNS name or an address, not '{v}'")
                })?;
                cc.sni = Some(v.clone());
            }
            "alpn" => {
                let v = val("a protocol list")?;
                cc.alpn = Some(
                    super::values::alpn_list(v)
                        .map_err(|e| format!("'{kw} connect alpn' : {e}"))?,
                );
            }
            "proto" => {
                let v = val("a MUX protocol")?;
                let p = match v.as_str() {
                    "none" => ConnectProto::None,
                    "h1" => ConnectProto::H1,
                    "h2" => ConnectProto::H2,
                    "fcgi" => ConnectProto::Fcgi,
                    o => return Err(format!("'proto' : unknown MUX protocol '{o}'.")),
                };
                if http == (p == ConnectProto::None) {
                    return Err(format!("'proto' : invalid MUX protocol '{v}' for {kw}"));
                }
                cc.proto = Some(p);
            }
            o => {
                return Err(format!(
                    "'{kw} connect' expects 'comment', 'port', 'addr', 'send-proxy', 'ssl', 'sni', 'alpn' or 'via-socks4', 'linger', 'default' but got '{o}' as argument."
                ))
            }
        }
    }
    cc.port = cc.port.or(addr_port);
    Ok((cc, comment))
}

/// `tcp-check expect` and its options, in any order around the match.
fn parse_expect(args: &[String]) -> Result<(TcpCheckStep, Option<String>), String> {
    use CheckStatus::*;
    let (mut min_recv, mut comment, mut negate) = (None, None, false);
    let mut opts = ExpectOpts::default();
    let mut matched: Option<(ExpectMatch, String)> = None;
    let mut i = 0;
    while let Some(a) = args.get(i).map(String::as_str) {
        let val = |what: &str| {
            args.get(i + 1)
                .map(String::as_str)
                .ok_or_else(|| format!("'{what}' expects a value"))
        };
        match a {
            "min-recv" => {
                let v = val(a)?;
                let n: i64 = v
                    .parse()
                    .map_err(|_| format!("'min-recv': invalid number '{v}'"))?;
                min_recv = usize::try_from(n).ok();
            }
            "comment" => comment = Some(val(a)?.to_string()),
            // L7OKC: a conditional pass (the server goes NOLB), also
            // as the status of a failed expect (HAProxy's).
            "ok-status" => opts.ok_status = CheckStatus::parse(val(a)?, OK_STATUSES, a)?,
            "error-status" => opts.error_status = CheckStatus::parse(val(a)?, ERROR_STATUSES, a)?,
            "tout-status" => {
                opts.tout_status = CheckStatus::parse(val(a)?, &[L7Tout, L6Tout, L4Tout], a)?
            }
            "on-success" | "on-error" => {
                let v = val(a)?;
                crate::sample::LogFormat::parse(v, crate::sample::Scope::Response)
                    .map_err(|e| format!("'{v}' invalid log-format string ({e})."))?;
                let m = Some(Info::Fmt(v.to_string()));
                match a {
                    "on-success" => opts.on_success = m,
                    _ => opts.on_error = m,
                }
            }
            "status-code" => {
                let v = val(a)?;
                crate::sample::Expr::parse(v, crate::sample::Scope::Response).map_err(|e| {
                    format!("error detected while parsing status-code expression : {e}")
                })?;
                opts.status_code = Some(StatusCode::Expr(v.to_string()));
            }
            "!" => {
                negate = true;
                i += 1;
                continue;
            }
            m => {
                if matched.is_some() {
                    return Err(format!("unexpected '{m}' in 'tcp-check expect'"));
                }
                let (neg2, m) = match m.strip_prefix('!') {
                    Some(r) => (true, r),
                    None => (false, m),
                };
                negate |= neg2;
                let kind = match m {
                    "string" => ExpectMatch::String,
                    "binary" => ExpectMatch::Binary,
                    "rstring" => ExpectMatch::RString,
                    "rbinary" => ExpectMatch::RBinary,
                    "string-lf" => ExpectMatch::StringLf,
                    "binary-lf" => ExpectMatch::BinaryLf,
                    o => {
                        return Err(format!(
                            "'tcp-check expect {o}' is not supported by ebb (supported: string, rstring, binary, rbinary, string-lf, binary-lf; options min-recv, comment, ok-status, error-status, tout-status, on-success, on-error, status-code, !)"
                        ))
                    }
                };
                let p = args
                    .get(i + 1)
                    .ok_or_else(|| format!("'tcp-check expect {m}' expects a pattern"))?;
                matched = Some((kind, p.clone()));
            }
        }
        i += 2;
    }
    let (kind, pat) = matched.ok_or(
        "'tcp-check expect' expects a match (string, rstring, binary, rbinary) and a pattern",
    )?;
    let pattern = match kind {
        ExpectMatch::String => pat.into_bytes(),
        ExpectMatch::Binary => {
            unhex(&pat).map_err(|e| format!("'tcp-check expect binary': {e}"))?
        }
        ExpectMatch::StringLf | ExpectMatch::BinaryLf => {
            crate::sample::LogFormat::parse(&pat, crate::sample::Scope::Response)
                .map_err(|e| format!("'{pat}' invalid log-format string ({e})."))?;
            pat.into_bytes()
        }
        _ => {
            regex::bytes::Regex::new(&pat)
                .map_err(|e| format!("'tcp-check expect': invalid regex: {e}"))?;
            pat.into_bytes()
        }
    };
    let step = TcpCheckStep::Expect {
        kind,
        pattern,
        negate,
        min_recv,
        opts: Box::new(opts),
    };
    Ok((step, comment))
}

/// The words of a protocol check's rule, parsed like a `tcp-check` line.
fn rule(line: &[&str], loc: &Loc) -> TcpCheckRule {
    let w: Vec<String> = line.iter().map(|s| s.to_string()).collect();
    let mut tc = TcpCheck::default();
    // The built-in lines below are fixed and valid.
    if let Err(e) = parse(&mut tc, &w, loc) {
        debug_assert!(false, "{line:?}: {e}");
    }
    tc.rules.pop().unwrap_or(TcpCheckRule {
        step: TcpCheckStep::Comment,
        comment: None,
        loc: loc.clone(),
    })
}

/// An expect rule with a protocol check's messages and code.
fn expect(
    line: &[&str],
    loc: &Loc,
    on_error: Option<Info>,
    on_success: Option<Info>,
    code: Option<Payload>,
) -> TcpCheckRule {
    let mut r = rule(line, loc);
    if let TcpCheckStep::Expect { opts, .. } = &mut r.step {
        opts.on_error = on_error;
        opts.on_success = on_success;
        opts.status_code = code.map(StatusCode::Payload);
    }
    r
}

fn custom(c: CustomExpect, min_recv: Option<usize>, loc: &Loc) -> TcpCheckRule {
    TcpCheckRule {
        step: TcpCheckStep::Expect {
            kind: ExpectMatch::Custom(c),
            pattern: Vec::new(),
            negate: false,
            min_recv,
            opts: Box::default(),
        },
        comment: None,
        loc: loc.clone(),
    }
}

/// The answer from `from`, left-trimmed and cut at its first line end.
fn answer(from: usize, ltrim_space: bool) -> Option<Info> {
    Some(Info::Answer {
        from,
        ltrim_space,
        cut_crlf: true,
    })
}

/// SPOP's HAPROXY-HELLO frame of a health check (SPOE 2.0): supported
/// version 2.0, max-frame-size 16380, no capabilities, healthcheck true.
pub fn spop_hello() -> Vec<u8> {
    fn kv(out: &mut Vec<u8>, k: &str) {
        out.push(k.len() as u8);
        out.extend_from_slice(k.as_bytes());
    }
    let mut f = vec![1u8, 0, 0, 0, 1, 0, 0];
    kv(&mut f, "supported-versions");
    f.push(8); // string
    kv(&mut f, "2.0");
    kv(&mut f, "max-frame-size");
    f.push(3); // uint32
    let mut n: u64 = 16380;
    f.push((n as u8) | 240);
    n = (n - 240) >> 4;
    while n >= 128 {
        f.push((n as u8) | 128);
        n = (n - 128) >> 7;
    }
    f.push(n as u8);
    kv(&mut f, "capabilities");
    f.push(8);
    f.push(0);
    kv(&mut f, "healthcheck");
    f.push(1 | 0x10); // boolean true
    let mut out = (f.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&f);
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02X}")).collect()
}

/// Where the time goes in [`ssl3_hello`] (the first bytes of the
/// random).
pub const SSL3_HELLO_TIME_AT: usize = 11;

/// `option ssl-hello-chk`'s CLIENT HELLO, time left at zero.
pub fn ssl3_hello() -> Vec<u8> {
    let mut h = vec![
        0x16, 0x03, 0x00, 0x00, 0x79, 0x01, 0x00, 0x00, 0x75, 0x03, 0x00,
    ];
    h.extend_from_slice(&[0; 4]);
    h.extend_from_slice(b"HAPROXYSSLCHK\nHAPROXYSSLCHK\n");
    h.push(0); // no session id
    h.extend_from_slice(&[0x00, 0x4e]);
    for c in (0x01u16..=0x1b).chain(0x2f..=0x3a) {
        h.extend_from_slice(&c.to_be_bytes());
    }
    h.extend_from_slice(&[0x01, 0x00]);
    h
}

/// `option redis-check|smtpchk|pgsql-check|mysql-check|ldap-check|
/// spop-check ARGS`: HAProxy 2.6's built-in tcp-check sequences.
pub(super) fn builtin(
    tc: &mut TcpCheck,
    name: &str,
    rest: &[String],
    loc: &Loc,
) -> Result<(), String> {
    let r: Vec<&str> = rest.iter().map(String::as_str).collect();
    let too_many = |n: usize| -> Result<(), String> {
        match r.get(n) {
            Some(x) => Err(format!("unexpected argument '{x}' after 'option {name}'")),
            None => Ok(()),
        }
    };
    let rules = match name {
        "redis-check" => {
            too_many(0)?;
            vec![
                rule(&["send", "*1\r\n$4\r\nPING\r\n"], loc),
                expect(
                    &["expect", "string", "+PONG\r\n", "error-status", "L7STS"],
                    loc,
                    answer(0, false),
                    Some(Info::Text("Redis server is ok".into())),
                    None,
                ),
            ]
        }
        "smtpchk" => {
            too_many(2)?;
            let cmd = match r.as_slice() {
                [v @ ("EHLO" | "HELO"), host, ..] => format!("{v} {host}\r\n"),
                _ => "HELO localhost\r\n".to_string(),
            };
            let code = Some(Payload { offset: 0, len: 3 });
            vec![
                rule(&["connect", "default", "linger"], loc),
                expect(
                    &[
                        "expect",
                        "rstring",
                        "^[0-9]{3}[ \r]",
                        "min-recv",
                        "4",
                        "error-status",
                        "L7RSP",
                    ],
                    loc,
                    answer(0, false),
                    None,
                    None,
                ),
                expect(
                    &[
                        "expect",
                        "rstring",
                        "^2[0-9]{2}[ \r]",
                        "min-recv",
                        "4",
                        "error-status",
                        "L7STS",
                    ],
                    loc,
                    answer(4, true),
                    None,
                    code,
                ),
                rule(&["send", &cmd], loc),
                expect(
                    &[
                        "expect",
                        "rstring",
                        "^2[0-9]{2}[- \r]",
                        "min-recv",
                        "4",
                        "error-status",
                        "L7STS",
                    ],
                    loc,
                    answer(4, true),
                    answer(4, true),
                    code,
                ),
            ]
        }
        "pgsql-check" => {
            let user = match r.as_slice() {
                ["user", u] => *u,
                ["user", _, x, ..] => {
                    return Err(format!("unexpected argument '{x}' after 'option {name}'"))
                }
                [] | [_] => {
                    return Err(format!(
                        "'option {name}' expects 'user <username>' as argument"
                    ))
                }
                _ => {
                    return Err(format!(
                        "'option {name}' only supports optional values: 'user'"
                    ))
                }
            };
            let mut req = ((15 + user.len()) as u32).to_be_bytes().to_vec();
            req.extend_from_slice(b"\x00\x03\x00\x00user\x00");
            req.extend_from_slice(user.as_bytes());
            req.extend_from_slice(b"\x00\x00");
            vec![
                rule(&["connect", "default", "linger"], loc),
                rule(&["send-binary", &hex(&req)], loc),
                expect(
                    &[
                        "expect",
                        "!rstring",
                        "^E",
                        "min-recv",
                        "5",
                        "error-status",
                        "L7RSP",
                    ],
                    loc,
                    Some(Info::Answer {
                        from: 6,
                        ltrim_space: false,
                        cut_crlf: false,
                    }),
                    None,
                    None,
                ),
                expect(
                    &[
                        "expect",
                        "rbinary",
                        "^52000000(08|0A|0C)000000(00|02|03|04|05|06)",
                        "min-recv",
                        "9",
                        "error-status",
                        "L7STS",
                    ],
                    loc,
                    Some(Info::Text("PostgreSQL unknown error".into())),
                    Some(Info::Text("PostgreSQL server is ok".into())),
                    None,
                ),
            ]
        }
        "mysql-check" => {
            let (user, post41) = match r.as_slice() {
                [] => (None, true),
                ["user"] => {
                    return Err(format!(
                        "'option {name} user' expects <username> as argument"
                    ))
                }
                ["user", u] | ["user", u, "post-41"] => (Some(*u), true),
                ["user", u, "pre-41"] => (Some(*u), false),
                ["user", _, x] => {
                    return Err(format!(
                        "keyword 'user' only supports 'post-41' and 'pre-41' (got '{x}')"
                    ))
                }
                ["user", _, _, x, ..] => {
                    return Err(format!("unexpected argument '{x}' after 'option {name}'"))
                }
                [x, ..] => {
                    return Err(format!(
                        "'option {name}' only supports optional values: 'user' (got '{x}')"
                    ))
                }
            };
            let mut rules = vec![rule(&["connect", "default", "linger"], loc)];
            if let Some(u) = user {
                let len = u.len() + 7 + if post41 { 27 } else { 0 };
                let mut req = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, 1];
                if post41 {
                    req.extend_from_slice(&[0x00, 0x82, 0x00, 0x00, 0x00, 0x80, 0x00, 0x01, 0x21]);
                    req.extend_from_slice(&[0u8; 23]);
                } else {
                    req.extend_from_slice(&[0x00, 0x80, 0x00, 0x00, 0x01]);
                }
                req.extend_from_slice(u.as_bytes());
                req.extend_from_slice(&[0, 0, 1, 0, 0, 0, 1]);
                rules.push(rule(&["send-binary", &hex(&req)], loc));
                rules.push(custom(CustomExpect::MysqlHandshake, None, loc));
                rules.push(custom(CustomExpect::MysqlOk, None, loc));
            } else {
                rules.push(custom(CustomExpect::MysqlHandshake, None, loc));
            }
            rules
        }
        "ldap-check" => {
            too_many(0)?;
            vec![
                rule(&["send-binary", "300C020101600702010304008000"], loc),
                expect(
                    &["expect", "rbinary", "^30", "min-recv", "14"],
                    loc,
                    Some(Info::Text("Not LDAPv3 protocol".into())),
                    None,
                    None,
                ),
                custom(CustomExpect::LdapBind, None, loc),
            ]
        }
        "ssl-hello-chk" => {
            // An SSLv3 CLIENT HELLO (RFC 2246 A.3, A.4): record header,
            // handshake header, version 3.0, 32 random bytes (the first
            // four: the time, filled in at each check), no session, 39
            // common cipher suites, NULL compression. Any handshake or
            // alert record in answer passes at layer 6.
            too_many(0)?;
            vec![
                rule(&["send-binary", &hex(&ssl3_hello())], loc),
                rule(
                    &[
                        "expect",
                        "rbinary",
                        "^1[56]",
                        "min-recv",
                        "5",
                        "ok-status",
                        "L6OK",
                        "error-status",
                        "L6RSP",
                        "tout-status",
                        "L6TOUT",
                    ],
                    loc,
                ),
            ]
        }
        "spop-check" => {
            too_many(0)?;
            vec![
                rule(&["send-binary", &hex(&spop_hello())], loc),
                custom(CustomExpect::SpopHello, Some(4), loc),
            ]
        }
        o => return Err(format!("HAProxy option '{o}' is not supported by ebb")),
    };
    let name: &'static str = match name {
        "redis-check" => "redis-check",
        "smtpchk" => "smtpchk",
        "pgsql-check" => "pgsql-check",
        "mysql-check" => "mysql-check",
        "ldap-check" => "ldap-check",
        "ssl-hello-chk" => "ssl-hello-chk",
        _ => "spop-check",
    };
    tc.enabled = true;
    tc.builtin = Some((name, rules));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn steps_parse_as_haproxy_writes_them() {
        let loc = Loc {
            file: "t.cfg".into(),
            line: 1,
        };
        let mut tc = TcpCheck::default();
        for l in [
            "comment greeting",
            "connect port 6379 send-proxy comment redis",
            "send-binary 50494e470d0a",
            "send PING",
            "expect min-recv 4 ! string -ERR",
            "expect comment pong rstring ^\\+PONG",
            "expect binary 2b4f4b",
        ] {
            parse(&mut tc, &words(l), &loc).unwrap();
        }
        assert_eq!(tc.rules.len(), 7);
        parse(
            &mut tc,
            &words("expect string 250 ok-status L4OK error-status L7STS tout-status L4TOUT on-success fine on-error bad status-code res.payload(0,3) comment c"),
            &loc,
        )
        .unwrap();
        let TcpCheckStep::Expect { opts, .. } = &tc.rules[7].step else {
            panic!("{:?}", tc.rules[7]);
        };
        assert_eq!(opts.ok_status, CheckStatus::L4Ok);
        assert_eq!(opts.error_status, CheckStatus::L7Sts);
        assert_eq!(opts.tout_status, CheckStatus::L4Tout);
        assert_eq!(opts.on_success, Some(Info::Fmt("fine".into())));
        assert_eq!(
            opts.status_code,
            Some(StatusCode::Expr("res.payload(0,3)".into()))
        );
        assert_eq!(tc.rules[7].comment.as_deref(), Some("c"));
        parse(&mut tc, &words("send-lf 100%%"), &loc).unwrap();
        assert_eq!(tc.rules[8].step, TcpCheckStep::Send(b"100%".to_vec()));
        tc.rules.truncate(7);
        assert_eq!(tc.rules[2].step, TcpCheckStep::Send(b"PING\r\n".to_vec()));
        assert_eq!(
            tc.rules[4].step,
            TcpCheckStep::Expect {
                kind: ExpectMatch::String,
                pattern: b"-ERR".to_vec(),
                negate: true,
                min_recv: Some(4),
                opts: Box::default(),
            }
        );
        assert_eq!(tc.rules[5].comment.as_deref(), Some("pong"));
        assert_eq!(tc.rules[1].comment.as_deref(), Some("redis"));
        for (l, e) in [
            ("send-lf %[nosuch]", "invalid log-format"),
            ("expect string x on-error %[nosuch]", "invalid log-format"),
            (
                "expect string x status-code nosuch",
                "status-code expression",
            ),
            ("expect string x ok-status L7STS", "ok-status"),
            ("expect string x error-status L7OK", "error-status"),
            ("expect string-lf %[nosuch]", "invalid log-format"),
            ("expect rstring (", "invalid regex"),
            ("send-binary 0g", "hex"),
            ("connect tls", "but got 'tls'"),
            ("connect proto h2", "invalid MUX protocol"),
            ("expect custom x", "not supported"),
            ("expect string", "expects a pattern"),
        ] {
            let r = parse(&mut tc, &words(l), &loc).unwrap_err();
            assert!(r.contains(e), "{l}: {r}");
        }
    }
}

#[cfg(test)]
mod builtin_tests {
    use super::*;

    fn loc() -> Loc {
        Loc {
            file: "t.cfg".into(),
            line: 1,
        }
    }

    fn sent(tc: &TcpCheck) -> Vec<u8> {
        let (_, rules) = tc.builtin.as_ref().unwrap();
        rules
            .iter()
            .filter_map(|r| match &r.step {
                TcpCheckStep::Send(d) => Some(d.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// The requests are the bytes HAProxy 2.6 sends (the reg-tests'
    /// intermediate listeners match them).
    #[test]
    fn protocol_checks_send_haproxys_requests() {
        let mut tc = TcpCheck::default();
        let w = |s: &str| -> Vec<String> { s.split_whitespace().map(String::from).collect() };
        builtin(&mut tc, "mysql-check", &w("user user pre-41"), &loc()).unwrap();
        assert_eq!(hex(&sent(&tc)), "0B00000100800000017573657200000100000001");
        builtin(&mut tc, "mysql-check", &w("user user"), &loc()).unwrap();
        assert_eq!(
            hex(&sent(&tc)),
            "2600000100820000008000012100000000000000000000000000000000000000000000007573657200000100000001"
        );
        builtin(&mut tc, "pgsql-check", &w("user postgres"), &loc()).unwrap();
        assert_eq!(
            hex(&sent(&tc)),
            "00000017000300007573657200706F7374677265730000"
        );
        builtin(&mut tc, "spop-check", &[], &loc()).unwrap();
        let s = sent(&tc);
        assert_eq!(s.len(), 82);
        assert_eq!(&s[..4], &[0, 0, 0, 0x4e]);
        builtin(&mut tc, "smtpchk", &w("EHLO domain.tld"), &loc()).unwrap();
        assert_eq!(sent(&tc), b"EHLO domain.tld\r\n");
        builtin(&mut tc, "redis-check", &[], &loc()).unwrap();
        assert_eq!(sent(&tc), b"*1\r\n$4\r\nPING\r\n");
        for (n, a, e) in [
            ("pgsql-check", "", "expects 'user <username>'"),
            ("mysql-check", "user u post-42", "only supports 'post-41'"),
            ("redis-check", "x", "unexpected argument"),
        ] {
            let r = builtin(&mut tc, n, &w(a), &loc()).unwrap_err();
            assert!(r.contains(e), "{n} {a}: {r}");
        }
    }
}
