//! Log lines: `log-format` strings with HAProxy's `%` variables
//! (configuration.txt 8.2.4), and the formats HAProxy uses when none is
//! given (`option httplog`).
//!
//! A log line differs from the log-format strings of header values
//! (`super::LogFormat`) in three ways, all HAProxy's: a variable or sample
//! with no value writes `-` (`""` when quoted with `%{+Q}`); runs of spaces
//! in the format are separators, written once and only after something
//! was written, so an empty `%hr` leaves no double space; and values come
//! from the finished exchange (timers, status, bytes, captures), given as
//! an [`Entry`].
//!
//! Variables ebb does not measure are refused at start with their name.
//! `%[...]` samples are evaluated at log time, when the request and the
//! response heads are gone: they read variables, names, addresses and
//! constants (a request value is kept for the log with `set-var` or a
//! capture).

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{BackLocal, Ctx, Expr, Scope};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Var {
    ClientIp,
    ClientPort,
    FrontIp,
    FrontPort,
    AcceptDate,
    RequestDate,
    AcceptGmt,
    RequestGmt,
    AcceptLocal,
    RequestLocal,
    AcceptTs,
    AcceptMs,
    Frontend,
    FrontendXprt,
    Backend,
    Server,
    TR,
    Tw,
    Tc,
    Tr,
    Td,
    Ta,
    Status,
    Bytes,
    BytesIn,
    CookieClient,
    CookieServer,
    Term,
    TermCookie,
    ActConn,
    FeConn,
    BeConn,
    SrvConn,
    Retries,
    SrvQueue,
    BeQueue,
    HdrReq,
    HdrReqList,
    HdrRes,
    HdrResList,
    Request,
    HttpPath,
    HttpPathOnly,
    HttpQuery,
    HttpUri,
    HttpMethod,
    HttpVersion,
    Hostname,
    Pid,
    UniqueId,
    Th,
    Ti,
    Tq,
    Tt,
    Tu,
    SrvIp,
    SrvPort,
    BackIp,
    BackPort,
    ReqCounter,
}

fn var(name: &str) -> Result<Var, String> {
    use Var::*;
    Ok(match name {
        "ci" => ClientIp,
        "cp" => ClientPort,
        "fi" => FrontIp,
        "fp" => FrontPort,
        "t" => AcceptDate,
        "tr" => RequestDate,
        "T" => AcceptGmt,
        "trg" => RequestGmt,
        "Tl" => AcceptLocal,
        "trl" => RequestLocal,
        "Ts" => AcceptTs,
        "ms" => AcceptMs,
        "f" => Frontend,
        "ft" => FrontendXprt,
        "b" => Backend,
        "s" => Server,
        "TR" => TR,
        "Tw" => Tw,
        "Tc" => Tc,
        "Tr" => Tr,
        "Td" => Td,
        "Ta" => Ta,
        "ST" => Status,
        "B" => Bytes,
        "CC" => CookieClient,
        "CS" => CookieServer,
        "ts" => Term,
        "tsc" => TermCookie,
        "ac" => ActConn,
        "fc" => FeConn,
        "bc" => BeConn,
        "sc" => SrvConn,
        "rc" => Retries,
        "sq" => SrvQueue,
        "bq" => BeQueue,
        "hr" => HdrReq,
        "hrl" => HdrReqList,
        "hs" => HdrRes,
        "hsl" => HdrResList,
        "r" => Request,
        "HP" => HttpPath,
        "HPO" => HttpPathOnly,
        "HQ" => HttpQuery,
        "HU" => HttpUri,
        "HM" => HttpMethod,
        "HV" => HttpVersion,
        "H" => Hostname,
        "pid" => Pid,
        "ID" => UniqueId,
        "rt" => ReqCounter,
        "Th" => Th,
        "Ti" => Ti,
        "Tq" => Tq,
        "Tt" => Tt,
        "Tu" => Tu,
        "si" => SrvIp,
        "sp" => SrvPort,
        "U" => BytesIn,
        "bi" | "bp" => {
            crate::sample::BACK_LOCAL.store(true, std::sync::atomic::Ordering::Relaxed);
            if name == "bi" {
                BackIp
            } else {
                BackPort
            }
        }
        o => {
            return Err(format!(
                "unknown log-format variable '%{o}' (supported: %ci %cp %fi %fp %bi %bp %si %sp %t %tr %T %trg %Tl %trl %Ts %ms %f %ft %b %s %Th %Ti %TR %Tq %Tw %Tc %Tr %Td %Ta %Tt %Tu %ST %B %U %CC %CS %ts %tsc %ac %fc %bc %sc %rc %sq %bq %hr %hrl %hs %hsl %r %HP %HPO %HQ %HU %HM %HV %H %pid %ID %rt %sslv %sslc, and %[sample])"
            ))
        }
    })
}

#[derive(Clone, Debug)]
enum Part {
    Text(Vec<u8>),
    /// One or more spaces of the format.
    Sep,
    Var {
        v: Var,
        quote: bool,
        /// `X`: addresses, ports, `%Ts`, `%ms` and `%pid` in hexadecimal.
        hex: bool,
        /// `E`: `"`, `\` and `]` escaped with a `\`.
        esc: bool,
    },
    Expr {
        e: Box<Expr>,
        quote: bool,
        esc: bool,
    },
}

/// A compiled log line format.
#[derive(Clone, Debug)]
pub struct LogLine {
    parts: Vec<Part>,
    src: String,
}

impl PartialEq for LogLine {
    fn eq(&self, o: &LogLine) -> bool {
        self.src == o.src
    }
}
impl Eq for LogLine {}

/// HAProxy 2.6's `option httplog` format (log.c, default_http_log_format).
pub const HTTPLOG: &str = "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r";

impl LogLine {
    /// Parses a `log-format` string.
    pub fn parse(text: &str) -> Result<LogLine, String> {
        let b = text.as_bytes();
        let mut parts = Vec::new();
        let mut lit = Vec::new();
        let mut defaults = super::logfmt::Flags::default();
        let mut i = 0;
        let flush = |lit: &mut Vec<u8>, parts: &mut Vec<Part>| {
            if !lit.is_empty() {
                parts.push(Part::Text(std::mem::take(lit)));
            }
        };
        while i < b.len() {
            match b[i] {
                b' ' => {
                    flush(&mut lit, &mut parts);
                    if !matches!(parts.last(), Some(Part::Sep)) {
                        parts.push(Part::Sep);
                    }
                    i += 1;
                    continue;
                }
                b'%' => {}
                c => {
                    lit.push(c);
                    i += 1;
                    continue;
                }
            }
            i += 1;
            if b.get(i) == Some(&b'%') {
                lit.push(b'%');
                i += 1;
                continue;
            }
            let (it, fl, next) = super::logfmt::item(text, i, Scope::Response, defaults).map_err(|e| {
                if e.contains("reads the request") {
                    format!("{e}; in a log line, keep the value with 'http-request set-var' or a capture")
                } else {
                    e
                }
            })?;
            i = next;
            flush(&mut lit, &mut parts);
            parts.push(match it {
                super::logfmt::Item::Expr(e) => Part::Expr {
                    e: Box::new(e),
                    quote: fl.quote,
                    esc: fl.esc,
                },
                // `%o`: the flags for the items after it.
                super::logfmt::Item::Name("o") => {
                    defaults = fl;
                    continue;
                }
                super::logfmt::Item::Name(n) => match super::logfmt::ssl_alias(n) {
                    Some(fetch) => Part::Expr {
                        e: Box::new(Expr::parse(fetch, Scope::Response)?),
                        quote: fl.quote,
                        esc: fl.esc,
                    },
                    None => Part::Var {
                        v: var(n)?,
                        quote: fl.quote,
                        hex: fl.hex,
                        esc: fl.esc,
                    },
                },
            });
        }
        flush(&mut lit, &mut parts);
        Ok(LogLine {
            parts,
            src: text.to_string(),
        })
    }

    pub fn text(&self) -> &str {
        &self.src
    }

    /// Whether the line reads what only the session's end knows: HAProxy
    /// 2.6's LW_BYTES items (the sizes, the timers but the dates, the
    /// connection and queue counts, the retries, `%ts`, `%ID`). A tcp
    /// session whose format reads none is logged at its connect.
    pub fn waits_for_end(&self) -> bool {
        use Var::*;
        self.parts.iter().any(|p| {
            matches!(
                p,
                Part::Var {
                    v: Bytes
                        | BytesIn
                        | UniqueId
                        | Ta
                        | Tc
                        | Th
                        | Ti
                        | Tq
                        | Tr
                        | TR
                        | Td
                        | Tt
                        | Tu
                        | Tw
                        | ActConn
                        | FeConn
                        | BeConn
                        | SrvConn
                        | Retries
                        | SrvQueue
                        | BeQueue
                        | Term,
                    ..
                }
            )
        })
    }

    /// What a tcp proxy cannot log with this format: HAProxy's variables
    /// reserved for HTTP mode (`%r`, `%HU`, `%TR`...), or a sample that
    /// reads HTTP; the message says which.
    pub fn tcp_refusal(&self) -> Option<String> {
        use Var::*;
        self.parts.iter().find_map(|p| match p {
            Part::Var { v, .. } => {
                let name = match v {
                    CookieClient => "CC",
                    CookieServer => "CS",
                    Ta => "Ta",
                    Ti => "Ti",
                    Tq => "Tq",
                    Tr => "Tr",
                    TR => "TR",
                    HttpMethod => "HM",
                    HttpPath => "HP",
                    HttpPathOnly => "HPO",
                    HttpQuery => "HQ",
                    HttpUri => "HU",
                    HttpVersion => "HV",
                    Request => "r",
                    RequestDate => "tr",
                    RequestGmt => "trg",
                    RequestLocal => "trl",
                    _ => return None,
                };
                Some(format!(
                    "format variable '%{name}' is reserved for HTTP mode"
                ))
            }
            Part::Expr { e, .. } if e.layer() == super::Layer::Http => Some(format!(
                "'%[{}]' reads HTTP, which a tcp session does not have",
                e.text()
            )),
            _ => None,
        })
    }

    /// Whether the format reads the frontend's local address (a system
    /// call, made only then).
    pub fn needs_local(&self) -> bool {
        self.parts.iter().any(|p| {
            matches!(
                p,
                Part::Var {
                    v: Var::FrontIp | Var::FrontPort,
                    ..
                }
            )
        })
    }

    /// The captured headers of the exchange, one slot per configured
    /// capture (`None` when no capture of that side is configured).
    fn captures(&self, e: &Entry<'_>) -> Caps {
        let uses = self.parts.iter().any(|p| {
            matches!(
                p,
                Part::Var {
                    v: Var::HdrReq | Var::HdrReqList | Var::HdrRes | Var::HdrResList,
                    ..
                }
            )
        });
        if !uses {
            return (None, None);
        }
        let store = e.vars.and_then(|v| v.try_borrow().ok());
        let side = |n: usize, got: Option<&Vec<Option<Vec<u8>>>>| {
            (n > 0).then(|| {
                let mut v = got.cloned().unwrap_or_default();
                v.resize(n, None);
                v
            })
        };
        (
            side(e.ncaps.0, store.as_ref().map(|s| &s.req_caps)),
            side(e.ncaps.1, store.as_ref().map(|s| &s.res_caps)),
        )
    }

    /// The line for one exchange; `ctx` evaluates `%[...]` samples. The
    /// exchange's end is noted for the next one's `%Ti`.
    pub fn render(&self, e: &Entry<'_>, ctx: &Ctx<'_>, out: &mut Vec<u8>) {
        self.render_parts(e, ctx, out);
        if let Some(Ok(mut v)) = e.vars.map(|v| v.try_borrow_mut()) {
            v.last_log = Some(SystemTime::now());
        }
    }

    fn render_parts(&self, e: &Entry<'_>, ctx: &Ctx<'_>, out: &mut Vec<u8>) {
        // HAProxy's last_isspace: a separator is written only after data.
        let mut last_space = true;
        let caps = self.captures(e);
        for p in &self.parts {
            match p {
                Part::Sep => {
                    if !last_space {
                        out.push(b' ');
                        last_space = true;
                    }
                }
                Part::Text(t) => {
                    out.extend_from_slice(t);
                    last_space = false;
                }
                Part::Expr { e: x, quote, esc } => {
                    let mut v = Vec::new();
                    let found = x.render(ctx, &mut v);
                    // Control bytes would split or forge a line in a file
                    // or on a terminal: escaped as '#XX'.
                    let v = escape(&v, |c| c < 0x20 || c == 0x7f);
                    let start = out.len();
                    text(out, found.then_some(&v[..]), *quote);
                    if *esc {
                        super::logfmt::esc_region(out, start, *quote, true);
                    }
                    last_space = false;
                }
                Part::Var { v, quote, hex, esc } => {
                    let start = out.len();
                    if (*hex && render_hex(*v, e, out)) || render_var(*v, *quote, e, &caps, out) {
                        last_space = false;
                    }
                    if *esc {
                        // The fields HAProxy writes `#XX`-encoded have no
                        // `"` of their own; the others may.
                        let encoded = matches!(
                            v,
                            Var::CookieClient
                                | Var::CookieServer
                                | Var::HdrReq
                                | Var::HdrRes
                                | Var::HdrReqList
                                | Var::HdrResList
                                | Var::Request
                                | Var::HttpMethod
                                | Var::HttpUri
                                | Var::HttpPath
                                | Var::HttpPathOnly
                                | Var::HttpQuery
                                | Var::HttpVersion
                        );
                        super::logfmt::esc_region(out, start, *quote && !encoded, !encoded);
                    }
                }
            }
        }
    }
}

/// The `X` form of the variables that have one (HAProxy's LOG_OPT_HEXA:
/// addresses and ports byte by byte, `%Ts` and `%pid` on at least four
/// digits, `%ms` on two); `false` for the others or a missing value.
fn render_hex(v: Var, e: &Entry<'_>, out: &mut Vec<u8>) -> bool {
    use super::logfmt::hex_addr;
    let srv = || {
        e.vars
            .and_then(|s| s.try_borrow().ok())
            .and_then(|s| s.info.srv_addr)
    };
    match v {
        Var::ClientIp | Var::ClientPort => hex_addr(Some(e.client), v == Var::ClientIp, out),
        Var::FrontIp | Var::FrontPort => hex_addr(e.local, v == Var::FrontIp, out),
        Var::SrvIp | Var::SrvPort => hex_addr(srv(), v == Var::SrvIp, out),
        Var::BackIp | Var::BackPort => {
            let local = e
                .vars
                .and_then(|s| s.try_borrow().ok())
                .and_then(|s| s.info.srv_local)
                .and_then(crate::sample::BackLocal::addr);
            hex_addr(local, v == Var::BackIp, out)
        }
        Var::AcceptTs | Var::AcceptMs => {
            let s = e.accept.duration_since(UNIX_EPOCH).unwrap_or_default();
            let _ = if v == Var::AcceptTs {
                write!(out, "{:04X}", s.as_secs())
            } else {
                write!(out, "{:02X}", s.subsec_millis())
            };
            true
        }
        Var::Pid => {
            let _ = write!(out, "{:04X}", crate::sys::pid());
            true
        }
        _ => false,
    }
}

/// Writes a text value as HAProxy's lf_text does in a log line: `-` when
/// missing or empty, `""` when quoted.
fn text(out: &mut Vec<u8>, v: Option<&[u8]>, quote: bool) {
    if quote {
        out.push(b'"');
    }
    match v {
        Some(v) if !v.is_empty() => out.extend_from_slice(v),
        _ if !quote => out.push(b'-'),
        _ => {}
    }
    if quote {
        out.push(b'"');
    }
}

/// `#XX` for each byte `esc` selects (HAProxy's encode_string).
pub(super) fn escape(v: &[u8], esc: impl Fn(u8) -> bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    escape_into(&mut out, v, esc);
    out
}

/// [`escape`], appended to `out` (no vector of its own).
pub(super) fn escape_into(out: &mut Vec<u8>, v: &[u8], esc: impl Fn(u8) -> bool) {
    hex_escape_into(out, v, b'#', esc);
}

/// Appends `v` to `out`, each byte `esc` selects written as `prefix` and
/// its two upper-case hex digits: `#XX` in log lines (HAProxy's
/// encode_string), `%XX` in the HTTP strings of an `lf-string`
/// (`logfmt::http_encode`).
pub(super) fn hex_escape_into(out: &mut Vec<u8>, v: &[u8], prefix: u8, esc: impl Fn(u8) -> bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.reserve(v.len());
    for &c in v {
        if esc(c) {
            out.extend_from_slice(&[prefix, HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        } else {
            out.push(c);
        }
    }
}

/// HAProxy's url_encode_map (request line): controls, 8-bit, `"` and `#`.
pub(super) fn url_esc(c: u8) -> bool {
    !(0x20..0x7f).contains(&c) || c == b'"' || c == b'#'
}

/// HAProxy's hdr_encode_map (captures): controls, 8-bit, `"#{|}`.
fn hdr_esc(c: u8) -> bool {
    url_esc(c) || matches!(c, b'{' | b'|' | b'}')
}

/// HAProxy's `+` before a size or a time logged early (`option logasap`).
fn asap(out: &mut Vec<u8>, e: &Entry<'_>) {
    if e.asap {
        out.push(b'+');
    }
}

fn num(out: &mut Vec<u8>, n: i64, quote: bool) {
    if quote {
        let _ = write!(out, "\"{n}\"");
    } else {
        let _ = write!(out, "{n}");
    }
}

/// The parts of the request line: method, URI, version (HAProxy splits
/// its captured line the same way, on spaces).
fn split_line(l: &[u8]) -> (&[u8], Option<&[u8]>, Option<&[u8]>) {
    let mut it = l
        .split(|&c| c == b' ' || c == b'\t')
        .filter(|p| !p.is_empty());
    let m = it.next().unwrap_or(b"");
    (m, it.next(), it.next())
}

/// Writes a chunk of the request line, quoted if asked, `<BADREQ>` when
/// there is no request.
fn req_part(out: &mut Vec<u8>, v: Option<&[u8]>, quote: bool) {
    if quote {
        out.push(b'"');
    }
    match v {
        Some(v) => escape_into(out, v, url_esc),
        None => out.extend_from_slice(b"<BADREQ>"),
    }
    if quote {
        out.push(b'"');
    }
}

/// The path of a URI without its query (`%HPO`): after the scheme and
/// authority of an absolute URI.
fn path_only(uri: &[u8]) -> &[u8] {
    let p = if uri.first().is_some_and(u8::is_ascii_alphabetic) {
        match uri.windows(3).position(|w| w == b"://") {
            Some(s) => {
                let after = &uri[s + 3..];
                match after.iter().position(|&c| c == b'/') {
                    Some(i) => &after[i..],
                    None => b"",
                }
            }
            None => uri,
        }
    } else {
        uri
    };
    let end = p.iter().position(|&c| c == b'?').unwrap_or(p.len());
    &p[..end]
}

fn captures(out: &mut Vec<u8>, caps: &[Option<Vec<u8>>], quote: bool, list: bool) {
    for (i, c) in caps.iter().enumerate() {
        if list {
            if i > 0 {
                out.push(b' ');
            }
            if quote {
                out.push(b'"');
            }
            match c {
                Some(v) => escape_into(out, v, hdr_esc),
                None if !quote => out.push(b'-'),
                None => {}
            }
            if quote {
                out.push(b'"');
            }
        } else {
            if i > 0 {
                out.push(b'|');
            }
            if let Some(v) = c {
                escape_into(out, v, hdr_esc);
            }
        }
    }
}

/// Writes one variable; returns whether anything was written.
fn render_var(v: Var, quote: bool, e: &Entry<'_>, caps: &Caps, out: &mut Vec<u8>) -> bool {
    let at = out.len();
    let date = |t: SystemTime, out: &mut Vec<u8>, zone: Zone| {
        if quote {
            out.push(b'"');
        }
        fmt_date(t, zone, out);
        if quote {
            out.push(b'"');
        }
    };
    let req_date = e.request_date.unwrap_or(e.accept);
    let td = if e.tw < 0 || e.tc < 0 || e.tr < 0 {
        -1
    } else {
        e.tt - (e.tq + e.tw + e.tc + e.tr)
    };
    let line = Some(e.request_line).filter(|l| *l != b"<BADREQ>");
    // `%rt` may take its number now (the only write a log line makes).
    let rt = if v == Var::ReqCounter {
        e.vars
            .and_then(|v| v.try_borrow_mut().ok())
            .map(|mut s| s.info.request_counter())
    } else {
        None
    };
    let store = e.vars.and_then(|v| v.try_borrow().ok());
    let info = store.as_ref().map(|s| &s.info);
    // HAProxy's Ti: from the accept (or the previous exchange's end) to
    // the request's first byte.
    let idle_from = store
        .as_ref()
        .and_then(|s| s.last_log)
        .map_or(e.accept, |l| l.max(e.accept));
    let ti = req_date
        .duration_since(idle_from)
        .map_or(0, |d| d.as_millis() as i64);
    let (m, uri, ver) = match line {
        Some(l) => {
            let (m, u, v) = split_line(l);
            (Some(m), u, if e.h2 { Some(&b"HTTP/2.0"[..]) } else { v })
        }
        None => (None, None, None),
    };
    match v {
        Var::ClientIp => text(out, Some(e.client.ip().to_string().as_bytes()), quote),
        Var::ClientPort => num(out, i64::from(e.client.port()), quote),
        Var::FrontIp => match e.local {
            Some(a) => text(out, Some(a.ip().to_string().as_bytes()), quote),
            None => text(out, None, quote),
        },
        Var::FrontPort => match e.local {
            Some(a) => num(out, i64::from(a.port()), quote),
            None => text(out, None, quote),
        },
        Var::AcceptDate => date(e.accept, out, Zone::LocalPlain),
        Var::RequestDate => date(req_date, out, Zone::LocalPlain),
        Var::AcceptGmt => date(e.accept, out, Zone::Gmt),
        Var::RequestGmt => date(req_date, out, Zone::Gmt),
        Var::AcceptLocal => date(e.accept, out, Zone::LocalOffset),
        Var::RequestLocal => date(req_date, out, Zone::LocalOffset),
        Var::AcceptTs => {
            let s = e.accept.duration_since(UNIX_EPOCH).unwrap_or_default();
            num(out, s.as_secs() as i64, quote)
        }
        Var::AcceptMs => {
            let s = e.accept.duration_since(UNIX_EPOCH).unwrap_or_default();
            let _ = write!(out, "{:03}", s.subsec_millis());
        }
        Var::Frontend => text(out, Some(e.frontend.as_bytes()), quote),
        Var::FrontendXprt => {
            let mut f = e.frontend.as_bytes().to_vec();
            if e.tls {
                f.push(b'~');
            }
            text(out, Some(&f), quote)
        }
        Var::Backend => text(out, Some(e.backend.as_bytes()), quote),
        Var::Server => text(out, Some(e.server.as_bytes()), quote),
        Var::TR => num(out, e.tq, quote),
        Var::Tw => num(out, e.tw, quote),
        Var::Tc => num(out, e.tc, quote),
        Var::Tr => num(out, e.tr, quote),
        Var::Td => num(out, td, quote),
        Var::Ta => {
            asap(out, e);
            num(out, e.tt, quote)
        }
        // No answer: HAProxy's -1 (0 without a transaction).
        Var::Status => match e.status {
            0 if e.txn => num(out, -1, quote),
            st => num(out, i64::from(st), quote),
        },
        Var::Bytes => {
            asap(out, e);
            num(out, e.bytes as i64, quote)
        }
        // No `+` under `option logasap` (HAProxy's LOG_FMT_BYTES_UP).
        Var::BytesIn => num(out, e.bytes_in as i64, quote),
        Var::CookieClient | Var::CookieServer => {
            let v = info.and_then(|i| {
                if v == Var::CookieClient {
                    i.cap_cc.clone()
                } else {
                    i.cap_cs.clone()
                }
            });
            text(out, v.map(|v| escape(&v, hdr_esc)).as_deref(), quote)
        }
        Var::Term => out.extend_from_slice(e.term.as_bytes()),
        Var::TermCookie => {
            out.extend_from_slice(e.term.as_bytes());
            match info.filter(|i| i.ck_client != 0) {
                Some(i) => out.extend_from_slice(&[i.ck_client, i.ck_server]),
                None => out.extend_from_slice(e.cookie_flags.as_bytes()),
            }
        }
        Var::ActConn => num(out, i64::from(e.actconn), quote),
        Var::FeConn => num(out, i64::from(e.feconn), quote),
        Var::BeConn => num(out, info.map_or(0, |i| i64::from(i.be_conns)), quote),
        Var::SrvConn => num(out, info.map_or(0, |i| i64::from(i.srv_conns)), quote),
        Var::Retries => {
            // HAProxy writes '+' before the count after a redispatch.
            if info.is_some_and(|i| i.redispatched) {
                if quote {
                    out.push(b'"');
                }
                out.push(b'+');
                let _ = write!(out, "{}", info.map_or(0, |i| i.retries));
                if quote {
                    out.push(b'"');
                }
            } else {
                num(out, info.map_or(0, |i| i64::from(i.retries)), quote)
            }
        }
        Var::SrvQueue => num(out, info.map_or(0, |i| i64::from(i.srv_queue)), quote),
        Var::BeQueue => num(out, info.map_or(0, |i| i64::from(i.be_queue)), quote),
        // Handshake: ebb counts a TLS handshake in the idle time.
        Var::Th => num(out, 0, quote),
        Var::Ti => num(out, ti, quote),
        // No request taken (a `<BADREQ>` line): HAProxy's -1, whatever
        // the idle time.
        Var::Tq => num(out, if e.tq < 0 { -1 } else { ti + e.tq }, quote),
        Var::Tt => {
            asap(out, e);
            num(out, ti + e.tt, quote)
        }
        Var::Tu => {
            asap(out, e);
            num(out, e.tt, quote)
        }
        Var::SrvIp => match info.and_then(|i| i.srv_addr) {
            Some(a) => text(out, Some(a.ip().to_string().as_bytes()), quote),
            None => text(out, None, quote),
        },
        Var::SrvPort => match info.and_then(|i| i.srv_addr) {
            Some(a) => num(out, i64::from(a.port()), quote),
            None => text(out, None, quote),
        },
        Var::BackIp => match info.and_then(|i| i.srv_local) {
            Some(BackLocal::Addr(a)) => text(out, Some(a.ip().to_string().as_bytes()), quote),
            Some(BackLocal::Unix) => text(out, Some(b"unix"), quote),
            None => text(out, None, quote),
        },
        Var::BackPort => match info.and_then(|i| i.srv_local) {
            Some(BackLocal::Addr(a)) => num(out, i64::from(a.port()), quote),
            Some(BackLocal::Unix) => num(out, 0, quote),
            None => text(out, None, quote),
        },
        Var::HdrReq | Var::HdrRes => {
            let caps = if v == Var::HdrReq { &caps.0 } else { &caps.1 };
            if let Some(caps) = caps {
                if quote {
                    out.push(b'"');
                }
                out.push(b'{');
                captures(out, caps, false, false);
                out.push(b'}');
                if quote {
                    out.push(b'"');
                }
            }
        }
        Var::HdrReqList | Var::HdrResList => {
            let caps = if v == Var::HdrReqList {
                &caps.0
            } else {
                &caps.1
            };
            if let Some(caps) = caps {
                captures(out, caps, quote, true);
            }
        }
        Var::Request if e.h2 && uri.is_some() => {
            req_part(out, Some(&h2_line(line.unwrap_or(b""))), quote)
        }
        Var::Request => req_part(out, line, quote),
        Var::HttpMethod => req_part(out, m.filter(|_| uri.is_some()), quote),
        Var::HttpUri => req_part(out, uri, quote),
        Var::HttpPath => req_part(
            out,
            uri.map(|u| &u[..u.iter().position(|&c| c == b'?').unwrap_or(u.len())]),
            quote,
        ),
        Var::HttpPathOnly => req_part(out, uri.map(path_only), quote),
        Var::HttpQuery => req_part(
            out,
            line.map(|l| {
                let u = uri.unwrap_or(b"");
                match u.iter().position(|&c| c == b'?') {
                    Some(q) => &u[q..],
                    None => &l[..0],
                }
            }),
            quote,
        ),
        Var::HttpVersion => req_part(out, uri.map(|_| ver.unwrap_or(b"HTTP/0.9")), quote),
        Var::Hostname => text(out, Some(super::logfmt::hostname().as_bytes()), quote),
        Var::Pid => num(out, i64::from(crate::sys::pid()), quote),
        Var::ReqCounter => match rt {
            Some(n) => num(out, n as i64, quote),
            None => text(out, None, quote),
        },
        // '-' without `unique-id-format`, as HAProxy.
        Var::UniqueId => {
            let v = info.and_then(|i| i.unique_id.clone());
            text(
                out,
                v.map(|v| escape(&v, |c| c < 0x20 || c == 0x7f)).as_deref(),
                quote,
            )
        }
    }
    out.len() > at
}

/// Request line `l` (`METHOD URI HTTP/1.1`, as an HTTP/2 stream's lane
/// carries it) with the version HAProxy writes for an HTTP/2 request:
/// `METHOD URI HTTP/2.0`.
pub(crate) fn h2_line(l: &[u8]) -> Vec<u8> {
    let cut = l.len() - l.rsplit(|&c| c == b' ').next().map_or(0, <[u8]>::len);
    let mut v = Vec::with_capacity(cut + 8);
    v.extend_from_slice(&l[..cut]);
    v.extend_from_slice(b"HTTP/2.0");
    v
}

/// Request and response captures, when configured.
type Caps = (Option<Vec<Option<Vec<u8>>>>, Option<Vec<Option<Vec<u8>>>>);

/// A capture slot of a frontend: `capture request|response header NAME
/// len N` (`name` set), `declare capture request|response len N` and
/// `http-request capture SAMPLE len N` (no name: filled by rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureHdr {
    pub response: bool,
    /// Lower case; `None` for a slot filled by `capture` actions.
    pub name: Option<String>,
    pub len: usize,
}

/// Captures the configured headers of one side into the exchange's store:
/// each capture keeps the last occurrence of its header (HAProxy's
/// http_capture_headers), cut to its length. Slots filled by actions are
/// left as they are.
pub fn capture_headers(caps: &[CaptureHdr], response: bool, ctx: &Ctx<'_>) {
    // Most proxies capture no header: nothing is gathered for them.
    if !caps
        .iter()
        .any(|c| c.response == response && c.name.is_some())
    {
        return;
    }
    let mine: Vec<&CaptureHdr> = caps.iter().filter(|c| c.response == response).collect();
    let Some(store) = ctx.vars else {
        return;
    };
    let mut got: Vec<Option<Vec<u8>>> = vec![None; mine.len()];
    super::each_field(ctx, response, &mut |n, v| {
        for (i, c) in mine.iter().enumerate() {
            if c.name
                .as_deref()
                .is_some_and(|name| n.eq_ignore_ascii_case(name.as_bytes()))
            {
                got[i] = Some(v[..v.len().min(c.len)].to_vec());
            }
        }
        false
    });
    if let Ok(mut s) = store.try_borrow_mut() {
        let slots = if response {
            &mut s.res_caps
        } else {
            &mut s.req_caps
        };
        slots.resize(mine.len(), None);
        for (i, c) in mine.iter().enumerate() {
            if c.name.is_some() {
                slots[i] = got[i].take();
            }
        }
    }
}

/// `http-request|http-response capture SAMPLE len N|id N`: the sample as
/// text, cut to the slot's length, into slot `slot` of its side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureAction {
    pub expr: Box<Expr>,
    pub response: bool,
    pub slot: usize,
    pub len: usize,
}

impl CaptureAction {
    pub fn run(&self, ctx: &Ctx<'_>) {
        let Some(store) = ctx.vars else {
            return;
        };
        let mut v = Vec::new();
        // A sample with no value captures nothing (HAProxy's rule).
        if !self.expr.render(ctx, &mut v) {
            return;
        }
        v.truncate(self.len);
        if let Ok(mut s) = store.try_borrow_mut() {
            let slots = if self.response {
                &mut s.res_caps
            } else {
                &mut s.req_caps
            };
            if slots.len() <= self.slot {
                slots.resize(self.slot + 1, None);
            }
            slots[self.slot] = Some(v);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Zone {
    /// `dd/Mon/yyyy:HH:MM:SS.mmm`, local time (HAProxy's %t, %tr).
    LocalPlain,
    /// `dd/Mon/yyyy:HH:MM:SS +0000` (%T, %trg).
    Gmt,
    /// `dd/Mon/yyyy:HH:MM:SS +hhmm`, local time (%Tl, %trl).
    LocalOffset,
}

/// `dd/Mon/yyyy:HH:MM:SS.mmm` in local time (HAProxy's `%t`, and the
/// dates of `show errors`).
pub(crate) fn fmt_local_ms(t: SystemTime, out: &mut Vec<u8>) {
    fmt_date(t, Zone::LocalPlain, out);
}

pub(super) fn fmt_date(t: SystemTime, zone: Zone, out: &mut Vec<u8>) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let off = match zone {
        Zone::Gmt => 0,
        _ => i64::from(crate::sys::utc_offset(secs)),
    };
    let local = secs + off;
    let (y, m, day) = civil_from_days(local.div_euclid(86_400));
    let sod = local.rem_euclid(86_400);
    let _ = write!(
        out,
        "{:02}/{}/{}:{:02}:{:02}:{:02}",
        day,
        crate::calendar::month_abbr(m),
        y,
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    );
    match zone {
        Zone::LocalPlain => {
            let _ = write!(out, ".{:03}", d.subsec_millis());
        }
        _ => {
            let sign = if off < 0 { '-' } else { '+' };
            let a = off.unsigned_abs();
            let _ = write!(out, " {sign}{:02}{:02}", a / 3600, a / 60 % 60);
        }
    }
}

/// `option tcplog`'s line as a format (configuration.txt 8.2.2), for the
/// HTTP exchanges of a tcp frontend's upgraded streams.
pub const TCPLOG: &str = "%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq";

/// HAProxy's default line of a tcp frontend without a log format, which
/// it logs for each stream (also each HTTP one of an upgraded stream).
pub const TCP_CONNECT: &str = "Connect from %ci:%cp to %fi:%fp (%f/TCP)";

/// [`TCPLOG`] (`connect` false) or [`TCP_CONNECT`], compiled once.
pub fn tcplog(connect: bool) -> &'static LogLine {
    static F: std::sync::OnceLock<[LogLine; 2]> = std::sync::OnceLock::new();
    let both = F.get_or_init(|| {
        [TCPLOG, TCP_CONNECT].map(|f| {
            LogLine::parse(f).unwrap_or(LogLine {
                parts: Vec::new(),
                src: String::new(),
            })
        })
    });
    &both[usize::from(connect)]
}

/// The default format's compiled form (parsed once).
pub fn httplog() -> &'static LogLine {
    static F: std::sync::OnceLock<LogLine> = std::sync::OnceLock::new();
    compiled(&F, HTTPLOG)
}

/// HAProxy 2.6's `option httpslog` format (log.c, default_https_log_format).
pub const HTTPSLOG: &str = "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r %[fc_err]/%[ssl_fc_err,hex]/%[ssl_c_err]/%[ssl_c_ca_err]/%[ssl_fc_is_resumed] %[ssl_fc_sni]/%sslv/%sslc";

/// [`HTTPSLOG`], compiled once.
pub fn httpslog() -> &'static LogLine {
    static F: std::sync::OnceLock<LogLine> = std::sync::OnceLock::new();
    compiled(&F, HTTPSLOG)
}

fn compiled<'a>(cell: &'a std::sync::OnceLock<LogLine>, text: &str) -> &'a LogLine {
    cell.get_or_init(|| match LogLine::parse(text) {
        Ok(l) => l,
        // The constant above parses (a unit test says so); an empty
        // format would only lose the line.
        Err(_) => LogLine {
            parts: Vec::new(),
            src: String::new(),
        },
    })
}

use crate::calendar::civil_from_days;

/// The pieces of one access-log line.
pub struct Entry<'a> {
    /// The client's certificate (`ssl_c_*` in a `log-format`).
    pub client_cert: Option<crate::clientcert::ClientCertView<'a>>,
    pub client: std::net::SocketAddr,
    pub accept: std::time::SystemTime,
    pub frontend: &'a str,
    pub backend: &'a str,
    pub server: &'a str,
    pub tq: i64,
    pub tw: i64,
    pub tc: i64,
    pub tr: i64,
    pub tt: i64,
    pub status: u16,
    /// `%B`: what the client was answered; HTTP: HAProxy's HTX size of the
    /// answer as it came (`crate::http1::htx`), tcp: the bytes.
    pub bytes: u64,
    /// `%U`: what the client sent, counted the same way.
    pub bytes_in: u64,
    /// An HTTP transaction carried the exchange (HAProxy's `txn`): without
    /// one (a tcp session, a connection that failed before any request),
    /// `%ST` is 0, with one and no answer -1.
    pub txn: bool,
    /// Two letters: who ended the session and in which state; `--`.
    pub term: &'a str,
    pub actconn: u32,
    pub feconn: u32,
    pub request_line: &'a [u8],
    /// When the request started (HAProxy's %tr); `None`: the accept date.
    pub request_date: Option<std::time::SystemTime>,
    /// The frontend's local address, when the format reads it.
    pub local: Option<std::net::SocketAddr>,
    /// The client connection is TLS (`%ft` adds `~`).
    pub tls: bool,
    /// Persistence cookie flags of `%tsc` (`--`: no `cookie` in the backend).
    pub cookie_flags: &'a str,
    /// The request came over HTTP/2 (its line, kept as HTTP/1.1 by the
    /// lane that ran it, is logged with `HTTP/2.0` as HAProxy does).
    pub h2: bool,
    /// The exchange's variables and captures.
    pub vars: Option<&'a std::cell::RefCell<crate::sample::VarStore>>,
    /// Request and response captures configured on the frontend.
    pub ncaps: (usize, usize),
    /// The frontend's `log-format`; `None`: HAProxy's httplog format.
    pub fmt: Option<&'a LogLine>,
    /// Logged early (`option logasap`): `%B`, `%Ta`, `%Tt` and `%Tu` are
    /// what they were then, written with a `+` before them.
    pub asap: bool,
    /// The client connection's socket while it is open (`fc_rtt`...).
    pub fc: Option<&'a std::net::TcpStream>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn entry<'a>(
        line: &'a [u8],
        vars: Option<&'a std::cell::RefCell<super::super::VarStore>>,
    ) -> Entry<'a> {
        Entry {
            client_cert: None,
            client: "127.0.0.1:4000".parse().unwrap(),
            accept: UNIX_EPOCH + Duration::from_millis(1_000_123),
            frontend: "fe",
            backend: "be",
            server: "s1",
            tq: 1,
            tw: 0,
            tc: 2,
            tr: 3,
            tt: 10,
            status: 200,
            bytes: 42,
            bytes_in: 0,
            txn: true,
            term: "--",
            actconn: 1,
            feconn: 1,
            request_line: line,
            request_date: None,
            local: Some("127.0.0.2:8080".parse().unwrap()),
            tls: true,
            cookie_flags: "--",
            h2: false,
            vars,
            ncaps: (2, 0),
            fmt: None,
            asap: false,
            fc: None,
        }
    }

    fn render(fmt: &str, e: &Entry<'_>) -> String {
        let l = LogLine::parse(fmt).unwrap_or_else(|x| panic!("{fmt}: {x}"));
        let dst = || e.local;
        let ctx = Ctx {
            src: e.client,
            dst: &dst,
            fe: e.frontend,
            be: Some(e.backend),
            srv: Some(e.server),
            tls: e.tls,
            sni: None,
            client_cert: None,
            fc: None,
            early: false,
            req: None,
            res: None,
            vars: e.vars,
            payload: None,
            res_body: None,
            stk: None,
        };
        let mut out = Vec::new();
        l.render(e, &ctx, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn uri_parts_as_haproxy_logs_them() {
        // HAProxy's reg-test log/log_uri.
        let f = "hpo=%HPO hp=%HP hu=%HU hq=%HQ hm=%HM hv=%HV";
        let e = entry(b"GET /r/2?q=2 HTTP/1.1", None);
        assert_eq!(
            render(f, &e),
            "hpo=/r/2 hp=/r/2 hu=/r/2?q=2 hq=?q=2 hm=GET hv=HTTP/1.1"
        );
        let e = entry(b"GET http://localhost/r/4?q=4 HTTP/1.1", None);
        assert_eq!(
            render(f, &e),
            "hpo=/r/4 hp=http://localhost/r/4 hu=http://localhost/r/4?q=4 hq=?q=4 hm=GET hv=HTTP/1.1"
        );
        let e = entry(b"<BADREQ>", None);
        assert_eq!(
            render("%r %HU %{+Q}r", &e),
            "<BADREQ> <BADREQ> \"<BADREQ>\""
        );
    }

    #[test]
    fn hexadecimal_flag() {
        let e = entry(b"GET / HTTP/1.1", None);
        assert_eq!(
            render(
                "%{+X}ci:%{+X}cp %{+X}Ts.%{+X}ms %{+X}o %fi:%fp %{-X}fp %ft",
                &e
            ),
            "7F000001:0FA0 03E8.7B 7F000002:1F90 8080 fe~"
        );
        assert_eq!(
            render("%{+Q,+X}ci %{+Q}o %ci %{-Q}ci", &e),
            "7F000001 \"127.0.0.1\" 127.0.0.1"
        );
        assert!(LogLine::parse("%{+Z}ci").is_err());
    }

    #[test]
    fn escape_flag_as_haproxy_writes_it() {
        // Beside HAProxy 2.6.12: `GET /p"a]\q?x HTTP/1.1` logged with
        // `%{+E}r`, `%{+E}HU` and `%{+E,+Q}r`.
        let e = entry(b"GET /p\"a]\\q?x HTTP/1.1", None);
        assert_eq!(
            render("%{+E}r %{+E}HU %{+E,+Q}r %{-E}HU %{+E}ci", &e),
            "GET /p#22a\\]\\\\q?x HTTP/1.1 /p#22a\\]\\\\q?x \"GET /p#22a\\]\\\\q?x HTTP/1.1\" /p#22a]\\q?x 127.0.0.1"
        );
        let mut out = b"\"a\"]\"".to_vec();
        super::super::logfmt::esc_region(&mut out, 0, true, true);
        assert_eq!(out, b"\"a\\\"\\]\"".to_vec());
    }

    #[test]
    fn values_timers_and_separators() {
        let e = entry(b"GET / HTTP/1.1", None);
        assert_eq!(
            render("%ci:%cp %fi:%fp %ft %f %b/%s %TR/%Tw/%Tc/%Tr/%Td/%Ta %ST %B %CC %tsc %ac/%fc %ID %Ts.%ms", &e),
            "127.0.0.1:4000 127.0.0.2:8080 fe~ fe be/s1 1/0/2/3/4/10 200 42 - ---- 1/1 - 1000.123"
        );
        // A missing sample writes '-', quoted '""'; no value at all leaves
        // one separator, not two.
        assert_eq!(
            render("a %[var(txn.nope)] %{+Q}[var(txn.nope)] b", &e),
            "a - \"\" b"
        );
        assert_eq!(render("a   %hs  b", &e), "a b");
        assert_eq!(render("%{+Q}ST", &e), "\"200\"");
        assert_eq!(render("100%% %%", &e), "100% %");
    }

    #[test]
    fn captures_and_variables() {
        let vars = std::cell::RefCell::new(super::super::VarStore::default());
        vars.borrow_mut().req_caps = vec![Some(b"a|b\"c".to_vec())];
        let e = entry(b"GET / HTTP/1.1", Some(&vars));
        // Two request captures configured, the second saw nothing.
        // A separator is written after data even when nothing follows
        // (HAProxy's last_isspace rule).
        assert_eq!(render("%hr %hrl %hs", &e), "{a#7Cb#22c|} a#7Cb#22c - ");
        let v = super::super::VarRef::parse("txn.x").unwrap();
        let s = super::super::Scratch {
            cur: b"v\n1".to_vec(),
            tmp: Vec::new(),
        };
        vars.borrow_mut().set(&v, super::super::Val::Str, &s);
        assert_eq!(render("x=%[var(txn.x)]", &e), "x=v#0A1");
    }

    #[test]
    fn httplog_is_haproxy_s_default() {
        let mut e = entry(b"GET /a HTTP/1.1", None);
        e.ncaps = (0, 0);
        let l = render(HTTPLOG, &e);
        let date_end = l.find(']').unwrap();
        assert_eq!(
            &l[date_end..],
            "] fe~ be/s1 1/0/2/3/10 200 42 - - ---- 1/1/0/0/0 0/0 \"GET /a HTTP/1.1\""
        );
    }

    #[test]
    fn unmeasured_variables_and_request_samples_are_refused() {
        for (f, why) in [
            ("%zz", "unknown log-format variable"),
            ("%[path]", "set-var"),
            ("%{+Z}r", "not supported"),
        ] {
            let e = LogLine::parse(f).unwrap_err();
            assert!(e.contains(why), "{f}: {e}");
        }
    }

    #[test]
    fn captures_keep_the_last_occurrence_cut_to_len() {
        let raw = b"GET / HTTP/1.1\r\nHost: h\r\nX-A: first\r\nx-a: second-and-long\r\n\r\n";
        let Ok(crate::http1::Status::Complete(head)) =
            crate::http1::parse_request(raw, &crate::http1::Limits::default())
        else {
            panic!("bad request");
        };
        let vars = std::cell::RefCell::new(super::super::VarStore::default());
        let dst = || None;
        let ctx = Ctx {
            src: "127.0.0.1:1".parse().unwrap(),
            dst: &dst,
            fe: "f",
            be: None,
            srv: None,
            tls: false,
            sni: None,
            client_cert: None,
            fc: None,
            early: false,
            req: Some(super::super::Req {
                buf: raw,
                head: &head,
                body: b"",
            }),
            res: None,
            vars: Some(&vars),
            payload: None,
            res_body: None,
            stk: None,
        };
        let caps = [
            CaptureHdr {
                response: false,
                name: Some("x-a".into()),
                len: 9,
            },
            CaptureHdr {
                response: true,
                name: Some("x-a".into()),
                len: 9,
            },
            CaptureHdr {
                response: false,
                name: None,
                len: 9,
            },
            CaptureHdr {
                response: false,
                name: Some("x-none".into()),
                len: 9,
            },
        ];
        // A slot filled by an action keeps its value.
        vars.borrow_mut().req_caps = vec![None, Some(b"kept".to_vec())];
        capture_headers(&caps, false, &ctx);
        assert_eq!(
            vars.borrow().req_caps,
            vec![Some(b"second-an".to_vec()), Some(b"kept".to_vec()), None]
        );
        let a = CaptureAction {
            expr: Box::new(
                Expr::parse("req.hdr(host),upper", Scope::Request { backend: false }).unwrap(),
            ),
            response: false,
            slot: 1,
            len: 3,
        };
        a.run(&ctx);
        assert_eq!(vars.borrow().req_caps[1], Some(b"H".to_vec()));
        assert!(vars.borrow().res_caps.is_empty());
    }
}
