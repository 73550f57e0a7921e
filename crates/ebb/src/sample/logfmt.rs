//! Log-format strings (configuration.txt 8.2.4) as header values,
//! `lf-string` bodies and dynamic backend names: text, `%%`, `%[expr]`,
//! and the `%ci`-style aliases, each optionally preceded by `%{+Q}`-style
//! flags.
//!
//! Where a value is missing the string gets nothing (HAProxy writes "-"
//! only in log lines). Aliases ebb cannot evaluate where the string is used
//! (timers, counters, captures) are refused at start.

use std::io::Write;

use super::{Ctx, Expr, Parser, Res, Scope};
use crate::http1::Version;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Alias {
    ClientIp,
    ClientPort,
    FrontIp,
    FrontPort,
    Frontend,
    Backend,
    Server,
    Status,
    Method,
    PathNoQuery,
    Uri,
    Query,
    Version,
    RequestLine,
    Hostname,
    Pid,
    /// `%t`, `%T`, `%Tl` (the accept date) and `%tr`, `%trg`, `%trl` (the
    /// request's), in their zones.
    Date {
        request: bool,
        zone: super::logline::Zone,
    },
    /// `%Ts`, `%ms`: the accept date's seconds since the epoch, and its
    /// milliseconds (3 digits).
    AcceptTs,
    AcceptMs,
    /// `%rt`: the exchange's number (HAProxy's request counter).
    ReqCounter,
}

#[derive(Clone, Debug)]
enum Part {
    Text(Vec<u8>),
    /// A `%[...]` value, and whether `+E` escapes it.
    Expr(Box<Expr>, bool),
    Alias {
        a: Alias,
        f: Flags,
    },
}

/// The `%{+Q,+X,+E}` flags of an item: quoted (`Q`), addresses, ports
/// and numbers in hexadecimal (`X`, HAProxy's LOG_OPT_HEXA), and `"`, `\`
/// and `]` of the value written with a `\` before them (`E`, HAProxy's
/// LOG_OPT_ESC, for RFC 5424 structured data). `%{...}o` sets them for
/// every item after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Flags {
    pub quote: bool,
    pub hex: bool,
    pub esc: bool,
}

/// `+E` (HAProxy 2.6's LOG_OPT_ESC with its `rfc5424_escape_map`): a `\`
/// before each `"`, `\` and `]` of `out[start..]`. `edges`: the region is
/// wrapped in the quotes of `+Q`, which stay as they are; `dquote`: a `"`
/// inside is escaped too (fields whose value was `#XX`-encoded have no `"`
/// of their own left: every `"` there is a quote of `+Q`).
pub(super) fn esc_region(out: &mut Vec<u8>, start: usize, edges: bool, dquote: bool) {
    let special = |c: u8| c == b'\\' || c == b']' || (dquote && c == b'"');
    let (lo, hi) = if edges && out.len() >= start + 2 {
        (start + 1, out.len() - 1)
    } else {
        (start, out.len())
    };
    if !out[lo..hi].iter().any(|&c| special(c)) {
        return;
    }
    let tail = out.split_off(lo);
    let inner = hi - lo;
    for (i, &c) in tail.iter().enumerate() {
        if i < inner && special(c) {
            out.push(b'\\');
        }
        out.push(c);
    }
}

/// An address's IP (`ip`) or port as HAProxy's `lf_ip`/`lf_port` write
/// them with `X`: their bytes in hexadecimal; `false` without an address.
pub(super) fn hex_addr(a: Option<std::net::SocketAddr>, ip: bool, out: &mut Vec<u8>) -> bool {
    let Some(a) = a else {
        return false;
    };
    let b: Vec<u8> = match (ip, a.ip()) {
        (false, _) => a.port().to_be_bytes().to_vec(),
        (true, std::net::IpAddr::V4(v)) => v.octets().to_vec(),
        (true, std::net::IpAddr::V6(v)) => v.octets().to_vec(),
    };
    for x in b {
        let _ = write!(out, "{x:02X}");
    }
    true
}

/// A compiled log-format string.
#[derive(Clone, Debug)]
pub struct LogFormat {
    parts: Vec<Part>,
    src: String,
    /// HAProxy's `LOG_OPT_HTTP`: a string of an HTTP action (header
    /// values, request-line rewrites, redirect targets, `return` fields and
    /// bodies, `unique-id-format`), whose `%[...]` values have their
    /// control bytes (all but HTAB) written `%XX`, see [`LogFormat::parse_http`].
    http: bool,
}

impl PartialEq for LogFormat {
    fn eq(&self, o: &LogFormat) -> bool {
        self.src == o.src
    }
}
impl Eq for LogFormat {}

/// `%sslv` and `%sslc`: the client connection's TLS version and cipher,
/// which are the fetches `ssl_fc_protocol` and `ssl_fc_cipher`.
pub(super) fn ssl_alias(name: &str) -> Option<&'static str> {
    match name {
        "sslv" => Some("ssl_fc_protocol"),
        "sslc" => Some("ssl_fc_cipher"),
        _ => None,
    }
}

fn alias(name: &str, scope: Scope) -> Result<Alias, String> {
    let req = matches!(scope, Scope::Request { .. });
    let a = match name {
        "ci" => Alias::ClientIp,
        "cp" => Alias::ClientPort,
        "fi" => Alias::FrontIp,
        "fp" => Alias::FrontPort,
        "f" | "ft" => Alias::Frontend,
        "b" => Alias::Backend,
        "s" => Alias::Server,
        "ST" => Alias::Status,
        "HM" => Alias::Method,
        "HP" => Alias::PathNoQuery,
        "HU" => Alias::Uri,
        "HQ" => Alias::Query,
        "HV" => Alias::Version,
        "r" => Alias::RequestLine,
        "H" => Alias::Hostname,
        "pid" => Alias::Pid,
        "t" | "T" | "Tl" | "tr" | "trg" | "trl" => {
            use super::logline::Zone;
            Alias::Date {
                request: name.starts_with("tr"),
                zone: match name {
                    "t" | "tr" => Zone::LocalPlain,
                    "T" | "trg" => Zone::Gmt,
                    _ => Zone::LocalOffset,
                },
            }
        }
        "Ts" => Alias::AcceptTs,
        "ms" => Alias::AcceptMs,
        "rt" => Alias::ReqCounter,
        o => {
            return Err(format!(
                "log-format alias '%{o}' is not supported here (supported: %ci %cp %fi %fp %f %ft %b %s %ST %HM %HP %HU %HQ %HV %r %H %pid %t %T %Tl %tr %trg %trl %Ts %ms %rt %sslv %sslc, and %[sample])"
            ))
        }
    };
    let needs_req = matches!(
        a,
        Alias::Method
            | Alias::PathNoQuery
            | Alias::Uri
            | Alias::Query
            | Alias::Version
            | Alias::RequestLine
    );
    if needs_req && !req {
        return Err(format!(
            "log-format alias '%{name}' reads the request, which is not available in a response rule"
        ));
    }
    if a == Alias::Status && req {
        return Err("log-format alias '%ST' (status) is not known in a request rule".to_string());
    }
    if a == Alias::Server && req {
        return Err("log-format alias '%s' (server) is not known in a request rule".to_string());
    }
    Ok(a)
}

/// What follows a `%` in a log-format string (other than `%%`).
pub(super) enum Item<'t> {
    /// `%[expr]`.
    Expr(Expr),
    /// `%name`: a variable or alias name (letters and digits).
    Name(&'t str),
}

/// Reads the item after the `%` at `text[i - 1]`: optional `{+Q,-X...}`
/// flags changing `defaults`, then `[expr]` or a name. Returns it, its
/// flags, and where the text goes on.
pub(super) fn item(
    text: &str,
    mut i: usize,
    scope: Scope,
    defaults: Flags,
) -> Result<(Item<'_>, Flags, usize), String> {
    let b = text.as_bytes();
    let mut fl = defaults;
    if b.get(i) == Some(&b'{') {
        let Some(end) = text[i..].find('}') else {
            return Err(format!("missing '}}' after '%{{' in '{text}'"));
        };
        for flag in text[i + 1..i + end].split(',') {
            match flag {
                "+Q" => fl.quote = true,
                "-Q" => fl.quote = false,
                "+X" => fl.hex = true,
                "-X" => fl.hex = false,
                "+E" => fl.esc = true,
                "-E" => fl.esc = false,
                "" => {}
                o => {
                    return Err(format!(
                        "log-format flag '{o}' is not supported (supported: +Q, -Q, +X, -X, +E, -E)"
                    ))
                }
            }
        }
        i += end + 1;
    }
    if b.get(i) == Some(&b'[') {
        let mut p = Parser::new(text);
        p.pos = i + 1;
        let e = p.expr(scope)?;
        if b.get(p.pos) != Some(&b']') {
            return Err(format!(
                "missing ']' after sample expression '{}' in '{text}'",
                e.text()
            ));
        }
        return Ok((Item::Expr(e), fl, p.pos + 1));
    }
    let start = i;
    while i < b.len() && b[i].is_ascii_alphanumeric() {
        i += 1;
    }
    if start == i {
        return Err(format!(
            "'%' must be followed by a variable name, '[' or '%' in '{text}' (write '%%' for a '%')"
        ));
    }
    Ok((Item::Name(&text[start..i]), fl, i))
}

impl LogFormat {
    /// The string's text when it holds no item (`%%` written `%`), as
    /// HAProxy treats such a log-format string as a plain word.
    pub fn as_text(&self) -> Option<String> {
        let mut t = Vec::new();
        for p in &self.parts {
            match p {
                Part::Text(b) => t.extend_from_slice(b),
                _ => return None,
            }
        }
        String::from_utf8(t).ok()
    }

    /// Parses a log-format string for use in `scope`.
    pub fn parse(text: &str, scope: Scope) -> Result<LogFormat, String> {
        let b = text.as_bytes();
        let mut parts = Vec::new();
        let mut lit = Vec::new();
        let mut defaults = Flags::default();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'%' {
                lit.push(b[i]);
                i += 1;
                continue;
            }
            i += 1;
            if b.get(i) == Some(&b'%') {
                lit.push(b'%');
                i += 1;
                continue;
            }
            let (it, f, next) = item(text, i, scope, defaults)?;
            i = next;
            if !lit.is_empty() {
                parts.push(Part::Text(crate::rawword::word_bytes(&std::mem::take(
                    &mut lit,
                ))));
            }
            let name = match it {
                // HAProxy 2.6 applies no quoting to %[...] in these strings.
                Item::Expr(e) => {
                    parts.push(Part::Expr(Box::new(e), f.esc));
                    continue;
                }
                // `%o`: the flags for the items after it.
                Item::Name("o") => {
                    defaults = f;
                    continue;
                }
                Item::Name(n) => match ssl_alias(n) {
                    Some(fetch) => {
                        parts.push(Part::Expr(Box::new(Expr::parse(fetch, scope)?), f.esc));
                        continue;
                    }
                    None => n,
                },
            };
            // Aliases are the longest known name at this point: `%cip`
            // is not `%ci` followed by `p`, so refuse unknown names whole.
            parts.push(Part::Alias {
                a: alias(name, scope)?,
                f,
            });
        }
        if !lit.is_empty() {
            parts.push(Part::Text(crate::rawword::word_bytes(&lit)));
        }
        super::claim_raw(text);
        Ok(LogFormat {
            parts,
            src: text.to_string(),
            http: false,
        })
    }

    /// [`LogFormat::parse`] for a string of an HTTP action: as HAProxy 2.6
    /// (its `LOG_OPT_HTTP` strings, `http_encode_map`), the bytes 0x00 to
    /// 0x08, 0x0A to 0x1F and 0x7F of a `%[...]` value are written `%XX`
    /// (upper-case hex), so CR, LF and NUL never reach a field; HTAB and
    /// bytes from 0x80 up go as they are. `set-var-fmt`, `use_backend`
    /// and the others write values as they are.
    pub fn parse_http(text: &str, scope: Scope) -> Result<LogFormat, String> {
        let mut f = LogFormat::parse(text, scope)?;
        f.http = true;
        Ok(f)
    }

    pub fn text(&self) -> &str {
        &self.src
    }

    /// Whether every part can be evaluated without a connection (text and
    /// context-free expressions; no alias).
    pub fn context_free(&self) -> bool {
        self.parts.iter().all(|p| match p {
            Part::Text(_) => true,
            Part::Expr(e, _) => e.context_free(),
            Part::Alias { .. } => false,
        })
    }

    /// What the string reads, at most (its expressions' layers; the
    /// HTTP aliases read the message).
    pub fn layer(&self) -> super::Layer {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Text(_) => super::Layer::L4,
                Part::Expr(e, _) => e.layer(),
                Part::Alias { a, .. } => match a {
                    Alias::Status
                    | Alias::Method
                    | Alias::PathNoQuery
                    | Alias::Uri
                    | Alias::Query
                    | Alias::Version
                    | Alias::RequestLine => super::Layer::Http,
                    _ => super::Layer::L4,
                },
            })
            .max()
            .unwrap_or(super::Layer::L4)
    }

    /// A string with no `%` part: its value is known at start.
    pub fn as_literal(&self) -> Option<&[u8]> {
        match self.parts.as_slice() {
            [] => Some(b""),
            [Part::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// Appends the string's value for this context to `out`.
    pub fn render(&self, ctx: &Ctx<'_>, out: &mut Vec<u8>) {
        for p in &self.parts {
            match p {
                Part::Text(t) => out.extend_from_slice(t),
                Part::Expr(e, esc) if self.http => {
                    let start = out.len();
                    e.render(ctx, out);
                    http_encode(out, start);
                    if *esc {
                        esc_region(out, start, false, true);
                    }
                }
                Part::Expr(e, esc) => {
                    // HAProxy copies the value as a C string
                    // (`lf_text_len`): it ends at its first NUL.
                    let start = out.len();
                    e.render(ctx, out);
                    if let Some(n) = out[start..].iter().position(|&c| c == 0) {
                        out.truncate(start + n);
                    }
                    if *esc {
                        esc_region(out, start, false, true);
                    }
                }
                Part::Alias { a, f } => {
                    // HAProxy writes hexadecimal forms unquoted.
                    if f.hex && render_hex(*a, ctx, out) {
                        continue;
                    }
                    let start = out.len();
                    if f.quote {
                        out.push(b'"');
                    }
                    render_alias(*a, ctx, out);
                    if f.quote {
                        out.push(b'"');
                    }
                    if f.esc {
                        esc_region(out, start, f.quote, true);
                    }
                }
            }
        }
    }
}

/// Writes the control bytes of `out[start..]` but HTAB as `%XX`
/// (HAProxy's `http_encode_map`).
fn http_encode(out: &mut Vec<u8>, start: usize) {
    let enc = |c: u8| c < 0x20 && c != b'\t' || c == 0x7f;
    if !out[start..].iter().any(|&c| enc(c)) {
        return;
    }
    let tail = out.split_off(start);
    super::logline::hex_escape_into(out, &tail, b'%', enc);
}

/// The exchange's accept date (`%t`...), or its request's date (`%tr`...),
/// when the exchange noted it.
fn date(ctx: &Ctx<'_>, request: bool) -> Option<std::time::SystemTime> {
    let v = ctx.vars?.try_borrow().ok()?;
    if request {
        v.info.request_date()
    } else {
        v.info.accept_date
    }
}

/// `%Ts` and `%ms`: the accept date since the epoch.
fn accept_since_epoch(ctx: &Ctx<'_>) -> Option<std::time::Duration> {
    let t = date(ctx, false)?;
    Some(t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default())
}

/// `%rt`: the exchange's number (taken at the first ask).
fn request_counter(ctx: &Ctx<'_>) -> Option<u64> {
    Some(ctx.vars?.try_borrow_mut().ok()?.info.request_counter())
}

/// The `X` form of the aliases that have one (addresses, ports, the pid);
/// `false` for the others, or when the value is missing.
fn render_hex(a: Alias, ctx: &Ctx<'_>, out: &mut Vec<u8>) -> bool {
    match a {
        Alias::ClientIp | Alias::ClientPort => {
            hex_addr(Some(ctx.src_addr()), a == Alias::ClientIp, out)
        }
        Alias::FrontIp | Alias::FrontPort => hex_addr((ctx.dst)(), a == Alias::FrontIp, out),
        Alias::Pid => {
            let _ = write!(out, "{:04X}", std::process::id());
            true
        }
        Alias::AcceptTs | Alias::AcceptMs => {
            let Some(d) = accept_since_epoch(ctx) else {
                return false;
            };
            if a == Alias::AcceptTs {
                let _ = write!(out, "{:04X}", d.as_secs() as u32);
            } else {
                let _ = write!(out, "{:02X}", d.subsec_millis());
            }
            true
        }
        Alias::ReqCounter => {
            let Some(n) = request_counter(ctx) else {
                return false;
            };
            let _ = write!(out, "{:04X}", n as u32);
            true
        }
        _ => false,
    }
}

fn render_alias(a: Alias, ctx: &Ctx<'_>, out: &mut Vec<u8>) {
    match a {
        Alias::ClientIp => {
            let _ = write!(out, "{}", ctx.src_addr().ip());
        }
        Alias::ClientPort => {
            let _ = write!(out, "{}", ctx.src_addr().port());
        }
        Alias::FrontIp => {
            if let Some(d) = ctx.dst_addr() {
                let _ = write!(out, "{}", d.ip());
            }
        }
        Alias::FrontPort => {
            if let Some(d) = ctx.dst_addr() {
                let _ = write!(out, "{}", d.port());
            }
        }
        Alias::Frontend => out.extend_from_slice(ctx.fe.as_bytes()),
        Alias::Backend => out.extend_from_slice(ctx.be.unwrap_or(ctx.fe).as_bytes()),
        Alias::Server => out.extend_from_slice(ctx.srv.unwrap_or("<NOSRV>").as_bytes()),
        Alias::Status => {
            if let Some(r) = ctx.res {
                let st = match r {
                    Res::H1 { head, .. } => head.status,
                    Res::List { status, .. } => status,
                };
                let _ = write!(out, "{st}");
            }
        }
        Alias::Method
        | Alias::PathNoQuery
        | Alias::Uri
        | Alias::Query
        | Alias::Version
        | Alias::RequestLine => received_line(ctx, |l| request_line_part(a, l, out)),
        Alias::Hostname => out.extend_from_slice(hostname().as_bytes()),
        Alias::Date { request, zone } => {
            if let Some(t) = date(ctx, request) {
                super::logline::fmt_date(t, zone, out);
            }
        }
        Alias::AcceptTs | Alias::AcceptMs => {
            if let Some(d) = accept_since_epoch(ctx) {
                if a == Alias::AcceptTs {
                    let _ = write!(out, "{}", d.as_secs());
                } else {
                    let _ = write!(out, "{:03}", d.subsec_millis());
                }
            }
        }
        Alias::ReqCounter => {
            if let Some(n) = request_counter(ctx) {
                let _ = write!(out, "{n}");
            }
        }
        Alias::Pid => {
            let _ = write!(out, "{}", std::process::id());
        }
    }
}

/// Calls `f` on the request line as the client sent it: HAProxy's `%HM`,
/// `%HU`, `%HP`, `%HQ`, `%HV` and `%r` read the line it kept on receipt
/// (`txn->uri`), not the request the rules rewrote, and an absolute
/// target stays whole (`%HU` `http://h/p?q`, `%HP` `http://h/p`). Without
/// the exchange's store (no connection), the current request's line.
/// An HTTP/2 stream's line ends in `HTTP/2.0`, as HAProxy's start line
/// says (its lane here carries it as HTTP/1.1).
fn received_line(ctx: &Ctx<'_>, f: impl FnOnce(&[u8])) {
    if let Some(v) = ctx.vars.and_then(|v| v.try_borrow().ok()) {
        if v.h2 && !v.req_line.is_empty() {
            return f(&super::logline::h2_line(&v.req_line));
        }
        if !v.req_line.is_empty() {
            return f(&v.req_line);
        }
    }
    if let Some(r) = ctx.req {
        let mut l = r.head.method_span.get(r.buf).to_vec();
        l.push(b' ');
        l.extend_from_slice(r.head.target.get(r.buf));
        l.push(b' ');
        l.extend_from_slice(version(r.head.version));
        f(&l);
    }
}

/// The part of request line `l` that alias `a` shows, cut as HAProxy's
/// log.c does: the method up to the first space, the URI after it up to
/// the next space (`%HP` also stops at a `?`), the query from the line's
/// first `?` to the next space, the version after the URI; each with
/// HAProxy's url_encode_map escapes (`"`, `#`, controls and 8-bit bytes
/// as `#XX`), as its log.c writes them.
fn request_line_part(a: Alias, l: &[u8], out: &mut Vec<u8>) {
    let mut put = |v: &[u8]| super::logline::escape_into(out, v, super::logline::url_esc);
    let sp = |c: &u8| *c == b' ' || *c == b'\t';
    let m_end = l.iter().position(sp).unwrap_or(l.len());
    let u_start = m_end + l[m_end..].iter().take_while(|c| sp(c)).count();
    let u_len = l[u_start..]
        .iter()
        .position(sp)
        .unwrap_or(l.len() - u_start);
    let uri = &l[u_start..u_start + u_len];
    match a {
        Alias::Method => put(&l[..m_end]),
        Alias::Uri => put(uri),
        Alias::PathNoQuery => {
            let end = uri.iter().position(|&c| c == b'?').unwrap_or(uri.len());
            put(&uri[..end]);
        }
        Alias::Query => {
            if let Some(q) = l.iter().position(|&c| c == b'?') {
                let n = l[q..].iter().position(sp).unwrap_or(l.len() - q);
                put(&l[q..q + n]);
            }
        }
        Alias::Version => {
            let rest = &l[u_start + u_len..];
            put(&rest[rest.iter().take_while(|c| sp(c)).count()..]);
        }
        _ => put(l),
    }
}

/// Every alias of `l`, `|`-separated (`%r %HU %HP %HQ %HM %HV`).
#[cfg(test)]
pub(super) fn request_line_part_for_test(l: &[u8], out: &mut Vec<u8>) {
    let all = [
        Alias::RequestLine,
        Alias::Uri,
        Alias::PathNoQuery,
        Alias::Query,
        Alias::Method,
        Alias::Version,
    ];
    for (i, a) in all.into_iter().enumerate() {
        if i > 0 {
            out.push(b'|');
        }
        request_line_part(a, l, out);
    }
}

fn version(v: Version) -> &'static [u8] {
    match v {
        Version::Http10 => b"HTTP/1.0",
        Version::Http11 => b"HTTP/1.1",
    }
}

/// The host name, read once (HAProxy's `%H`).
pub(crate) fn hostname() -> &'static str {
    static H: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    H.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
}
