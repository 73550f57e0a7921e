//! HTTP checks (`option httpchk`, `http-check`): the sequence prepared
//! once from the configuration, its requests (with `send-state`'s
//! header), and the judging of each response against its expect rule.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use regex::bytes::Regex;

use super::{
    connect_step, os_text, step_is_tls, timed_out, CheckHow, CheckMux, CheckTls, Verdict, Wire,
};
use crate::backend::{Farm, ServerRt};
use crate::config::{CheckConnect, CheckStatus, ExpectKind, HttpCheck};

/// An HTTP check's sequence, prepared once: connects, requests and
/// expect rules (HAProxy's `http-check` ruleset).
#[derive(Clone)]
pub struct HttpProbe {
    pub steps: Vec<HttpStep>,
    /// `http-check send-state`: each request carries
    /// `X-Haproxy-Server-State`.
    pub send_state: bool,
    /// `http-check disable-on-404`: a 404 passes conditionally (`L7OKC`)
    /// while the server is not DOWN.
    pub disable_404: bool,
    /// The backend's FastCGI application (`use-fcgi-app`), for the checks
    /// of its `proto fcgi` servers.
    pub(crate) fcgi: Option<Arc<crate::fcgi::params::App>>,
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
    /// `on-success`, `on-error`, and `status-code` (as `%[EXPR]`).
    pub say: Option<std::sync::Arc<Say>>,
}

/// An expect's `on-success`, `on-error` and `status-code`, compiled.
pub struct Say {
    on_success: Option<crate::sample::LogFormat>,
    on_error: Option<crate::sample::LogFormat>,
    code: Option<crate::sample::LogFormat>,
}

impl Say {
    fn new(e: &crate::config::HttpExpect) -> Result<Option<std::sync::Arc<Say>>, String> {
        if e.on_success.is_none() && e.on_error.is_none() && e.status_code.is_none() {
            return Ok(None);
        }
        let f = |t: &str| crate::sample::LogFormat::parse(t, crate::sample::Scope::Response);
        Ok(Some(std::sync::Arc::new(Say {
            on_success: e.on_success.as_deref().map(f).transpose()?,
            on_error: e.on_error.as_deref().map(f).transpose()?,
            code: e
                .status_code
                .as_deref()
                .map(|x| f(&format!("%[{x}]")))
                .transpose()?,
        })))
    }
}

impl HttpRule {
    pub(super) fn plain(expect: Expect) -> HttpRule {
        HttpRule {
            expect,
            min_recv: None,
            ok_status: CheckStatus::L7Ok,
            error_status: None,
            tout_status: CheckStatus::L7Tout,
            comment: None,
            say: None,
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
    /// `string-lf`: the pattern rendered at each check.
    StringLf(crate::sample::LogFormat, bool),
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
        ExpectKind::StringLf(f) => Expect::StringLf(
            crate::sample::LogFormat::parse(f, crate::sample::Scope::Response)?,
            e.negate,
        ),
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
                        say: Say::new(e)?,
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
            disable_404: c.disable_404,
            fcgi: None,
        })
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
    judge_rule(resp, &HttpRule::plain(expect.clone()), &|_| Vec::new()).1
}

/// Judges a response against one expect rule and its options; `render`
/// evaluates the rule's log-format patterns. Whether the rule held, and
/// the report (a failure's status may be `L7OKC`, `error-status`).
fn judge_rule(
    resp: &[u8],
    rule: &HttpRule,
    render: &dyn Fn(&crate::sample::LogFormat) -> Vec<u8>,
) -> (bool, Verdict) {
    let r = match parse_resp(resp) {
        Ok(r) => r,
        Err(v) => return (false, v),
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
        // No body: a failure whatever the negation (HAProxy 2.6's
        // `tcpcheck_eval_expect_http` fails every body rule on one,
        // `! string X` too).
        Expect::String(_, neg) | Expect::RString(_, neg) | Expect::StringLf(_, neg)
            if r.body.is_empty() =>
        {
            (false, true, *neg)
        }
        Expect::String(s, neg) => (
            (!s.is_empty() && r.body.windows(s.len()).any(|w| w == s.as_slice())) != *neg,
            true,
            *neg,
        ),
        Expect::RString(re, neg) => (re.is_match(r.body) != *neg, true, *neg),
        Expect::StringLf(f, neg) => {
            let p = render(f);
            if p.is_empty() {
                let mut v = Verdict::new(
                    CheckStatus::L7Rsp,
                    "log-format string evaluated to an empty string",
                );
                if let Some(c) = &rule.comment {
                    v.desc.push_str(&format!(" comment: {c}"));
                }
                v.code = i64::from(r.code);
                return (false, v);
            }
            let found = r.body.windows(p.len()).any(|w| w == p.as_slice());
            (found != *neg, true, *neg)
        }
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
                Err(v) => return (false, failed(v)),
            };
            let value = match value.as_ref().map(|v| v.resolve(render)).transpose() {
                Ok(v) => v,
                Err(v) => return (false, failed(v)),
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
    let say = rule.say.as_deref();
    let text = |f: &crate::sample::LogFormat| {
        let b = render(f);
        let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    // HAProxy's messages: `on-error` instead of the failure's text,
    // `on-success` (the check's report if this rule is the last).
    match (ok, say) {
        (
            false,
            Some(Say {
                on_error: Some(f), ..
            }),
        ) => v.desc = text(f),
        (
            true,
            Some(Say {
                on_success: Some(f),
                ..
            }),
        ) => v.desc = text(f),
        _ => {}
    }
    if !ok {
        if let Some(c) = &rule.comment {
            v.desc.push_str(&format!(" comment: {c}"));
        }
    }
    v.code = match say.and_then(|s| s.code.as_ref()) {
        Some(f) => leading_int(&render(f)),
        None => i64::from(r.code),
    };
    (ok, v)
}

/// HAProxy's string-to-integer cast: the leading digits (after spaces and
/// a sign); 0 when none.
pub(in crate::backend) fn leading_int(b: &[u8]) -> i64 {
    let s = String::from_utf8_lossy(b);
    let t = s.trim_start();
    let end = t
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || (*i == 0 && (*c == '-' || *c == '+'))))
        .map_or(t.len(), |(i, _)| i);
    t[..end].parse().unwrap_or(0)
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
/// show it (`UP`, `UP 2/3` while failing, `NOLB`, `NOLB 2/3`, `DOWN`, `DOWN 1/2` while
/// recovering, `no check`), then the address, port, names, node, the
/// server's and the farm's usable weight, the server's and the backend's
/// streams, its queue and, while it ramps up, `throttle`. `streak`: the
/// checker's failures while UP or successes while DOWN.
pub fn server_state_header(farm: &Farm, s: &ServerRt, streak: u32) -> String {
    let o = &s.opts;
    let (rise, fall) = (o.rise.max(1), o.fall.max(1));
    let running = s.up.load(Ordering::Relaxed)
        && s.admin_state() != crate::backend::ADMIN_MAINT
        && s.has_addr();
    let health = if !s.check_on.load(Ordering::Relaxed) {
        "no check".to_string()
    } else if running {
        // HAProxy's STOPPING state says NOLB.
        let st = if s.nolb() { "NOLB" } else { "UP" };
        if streak == 0 {
            st.to_string()
        } else {
            format!("{st} {}/{fall}", fall.saturating_sub(streak))
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
        client_cert: None,
        req: None,
        res: match (resp, head.as_ref()) {
            (Some(buf), Some(head)) => Some(crate::sample::Res::H1 { buf, head }),
            _ => None,
        },
        vars: Some(vars),
        stk: None,
        payload: None,
        res_body: None,
        fc: None,
        early: false,
    };
    f(&ctx)
}

/// Runs an HTTP check's sequence: each expect judges the response to
/// the request before it (read whole, at most 16 KiB). `who`: the
/// backend's and the server's names, and the server's state for
/// `http-check send-state`.
pub(super) fn run_http(
    addr: SocketAddr,
    timeout: Duration,
    p: &HttpProbe,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
    who: (&str, &str, Option<&str>),
    how: CheckHow,
) -> Verdict {
    let start = std::cell::Cell::new(Instant::now());
    let nolb_404 = p.disable_404 && how.running;
    run_steps(
        p,
        &start,
        timeout,
        tls.is_some(),
        who,
        nolb_404,
        &mut |cc| {
            // The server's protocol applies to a default connect.
            // (A default connect's `proto` is the server's, as in `mux_for`.)
            let fcgi_proto = match cc.proto {
                Some(pr) => pr == crate::config::ConnectProto::Fcgi,
                None => how.fcgi && cc.default,
            };
            let fcgi = p.fcgi.as_ref().filter(|_| fcgi_proto);
            match connect_step(cc, addr, &start, timeout, tls, proxy_hdr, &how)? {
                c if fcgi.is_some() => {
                    let app = fcgi.map(Arc::clone).ok_or_else(|| {
                        Verdict::new(CheckStatus::L7Rsp, "no FastCGI application")
                    })?;
                    let local = c.local_addr();
                    Ok(Box::new(crate::backend::fcgicheck::FcgiWire::new(
                        c,
                        app,
                        local,
                        Some(addr),
                    )))
                }
                c if h2_for(how.mux_for(cc), c.alpn()) => {
                    let tls = step_is_tls(cc, tls.is_some());
                    Ok(Box::new(crate::backend::h2check::H2Wire::new(c, tls)))
                }
                c => Ok(c),
            }
        },
    )
}

/// The steps of an HTTP check (see [`run_http`]); `connect` opens each
/// connection (a socket, or a script of answers for the fuzz target);
/// `tls`: the default connection is TLS. `nolb_404`: `disable-on-404`
/// applies (the server is not DOWN): as HAProxy 2.6, an expect rule that
/// reads a 404 is skipped, and a sequence whose last expect read one ends
/// conditionally passed (`L7OKC`, code 404, no description).
pub(in crate::backend) fn run_steps(
    p: &HttpProbe,
    start: &std::cell::Cell<Instant>,
    timeout: Duration,
    tls: bool,
    who: (&str, &str, Option<&str>),
    nolb_404: bool,
    connect: &mut super::Connector<'_>,
) -> Verdict {
    let (be, srv, state) = who;
    let who = (be, srv);
    // The `check` and `sess` variables live for one run.
    let vars = std::cell::RefCell::new(crate::sample::VarStore::for_check());
    let mut conn: Option<Box<dyn Wire>> = None;
    let mut buf: Vec<u8> = Vec::new();
    // The response to the last request was read (until complete or
    // closed).
    let mut have = false;
    let mut last: Option<Verdict> = None;
    // The last connection is TLS (a sequence that ends on it passes at
    // layer 6).
    let mut conn_tls = false;
    for st in &p.steps {
        match st {
            HttpStep::Connect(cc) => {
                drop(conn.take());
                conn_tls = step_is_tls(cc, tls);
                match connect(cc) {
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
                    if let Err(v) = read_response(c, &mut buf, start.get(), timeout, rule) {
                        return v;
                    }
                    have = true;
                    vars.borrow_mut().info.srv_h2 = c.h2();
                }
                if nolb_404 && parse_resp(&buf).is_ok_and(|r| r.code == 404) {
                    let mut v = Verdict::new(CheckStatus::L7OkC, "");
                    v.code = 404;
                    last = Some(v);
                    continue;
                }
                let render = |f: &crate::sample::LogFormat| {
                    let mut out = Vec::new();
                    check_sample(who, &vars, Some(&buf), |cx| f.render(cx, &mut out));
                    out
                };
                let (ok, v) = judge_rule(&buf, rule, &render);
                if !ok {
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
        if conn_tls {
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
