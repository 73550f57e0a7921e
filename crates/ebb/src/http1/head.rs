//! Types shared by request and response heads, and the field analysis both
//! run: framing (Content-Length / Transfer-Encoding), Connection options,
//! Host, Expect, Upgrade.
//!
//! A head never copies bytes out of the connection's buffer: names, values,
//! the target and the reason phrase are [`Span`]s, byte offsets into the
//! buffer the head was parsed from. Read them back with [`Span::get`] on that
//! same buffer, and do not move the bytes while the head is in use (or shift
//! every span by the same amount).

use super::error::HttpError;

/// Byte offsets `start..end` into the buffer a head was parsed from.
///
/// `u32` offsets: a head is bounded by [`Limits::max_head_bytes`], far below
/// 4 GiB, and two u32s keep a [`HeaderSpan`] at 16 bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The bytes this span covers in `buf`; empty if `buf` is too short
    /// (never panics, even on a foreign buffer).
    #[inline]
    pub fn get(self, buf: &[u8]) -> &[u8] {
        buf.get(self.start as usize..self.end as usize)
            .unwrap_or(&[])
    }

    /// Length in bytes.
    #[inline]
    pub const fn len(self) -> usize {
        self.end.saturating_sub(self.start) as usize
    }

    /// True when the span covers no byte.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.end <= self.start
    }

    /// The offsets as a `usize` range.
    #[inline]
    pub const fn range(self) -> core::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    /// The span of `sub`, a subslice of `base`. Callers only pass slices that
    /// httparse (or this module) cut from `base`; anything else yields an
    /// empty span rather than garbage offsets.
    #[inline]
    pub(crate) fn of(base: &[u8], sub: &[u8]) -> Span {
        let b = base.as_ptr() as usize;
        let s = sub.as_ptr() as usize;
        match s.checked_sub(b) {
            Some(start) if start + sub.len() <= base.len() => Span {
                start: start as u32,
                end: (start + sub.len()) as u32,
            },
            _ => Span::default(),
        }
    }

    /// `start..end` relative to an outer span's start.
    #[inline]
    pub(crate) const fn sub(self, from: usize, to: usize) -> Span {
        Span {
            start: self.start + from as u32,
            end: self.start + to as u32,
        }
    }
}

/// One field line: its name and its value (without surrounding whitespace).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderSpan {
    /// The field name as sent (case preserved).
    pub name: Span,
    /// The field value, leading and trailing whitespace removed.
    pub value: Span,
}

/// HTTP version of a message. Only these two exist on an HTTP/1 wire that ebb
/// accepts (a request's other `HTTP/x.y` reads as one of them); anything
/// else is refused with 400 (requests) or 502 (responses).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0
    Http10,
    /// HTTP/1.1
    Http11,
}

/// How the body of a message is delimited (RFC 9112 §6.3).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body follows the head.
    None,
    /// Exactly this many bytes follow.
    ContentLength(u64),
    /// A chunked body follows; feed it to a
    /// [`ChunkedDecoder`](super::ChunkedDecoder).
    Chunked,
    /// Responses only: the body runs until the origin closes the connection.
    UntilClose,
}

/// Size limits of the parsers. Each default says where it comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest request-target, in bytes, before 414. Default 8 KiB: nginx
    /// answers 414 past its 8 KiB `large_client_header_buffers`.
    pub max_uri: usize,
    /// Largest head (start line + field lines + the empty line) before 431.
    /// Default 15 KiB: HAProxy's `tune.bufsize` (16384) less its
    /// `tune.maxrewrite` (1024), the room a head may use in a buffer.
    pub max_head_bytes: usize,
    /// Most field lines (else 400, 502 for a response). Default 100:
    /// HAProxy's `tune.http.maxhdr` (101) counts the start line too.
    /// Capped at [`MAX_HEADERS_CAP`].
    pub max_headers: usize,
    /// Accept a request line ended by a lone LF (RFC 9112 §2.2 MAY).
    /// Default off: a recipient that disagrees with a peer about line ends
    /// is a smuggling vector, and no real client sends bare LF. (Answers
    /// are taken with lone LFs whatever this says, as HAProxy 2.6 takes
    /// them, their heads written again with CRLF.)
    pub allow_bare_lf: bool,
    /// Most bytes of a request body read and dropped after an early answer
    /// (`tune.http.drain-max`, see [`super::Drain`]). Default 16 KiB:
    /// HAProxy's buffer size, about what HAProxy 2.6 takes in before it
    /// closes such a connection.
    pub max_drain: u64,
    /// `tune.bufsize` (16 KiB): the room a rewritten head shares with
    /// the body bytes that arrived with it (HAProxy's room for rewrites).
    pub buf_size: usize,
    /// The head is one rules rewrote, not one a client sent: as HAProxy
    /// edits its message in place, a request without a `Host`
    /// (`del-header host`) or with a `Host` that is no authority
    /// (`replace-value host (.*) <\1>`) goes on, and a target that is no path,
    /// absolute URI or `*` (`set-path a`) is forwarded as it is (its span
    /// is the path's; the `path` fetch finds none in it, as HAProxy's).
    pub rebuilt: bool,
    /// The head is an HTTP/2 request's HTTP/1 form (a lane's): its `host`
    /// came from `:authority`, and a CONNECT's keeps its default port
    /// (HAProxy 2.6 normalizes only an HTTP/1 client's).
    pub h2_lane: bool,
    /// `option accept-invalid-http-request` (a frontend's) or `option
    /// accept-invalid-http-response` (a backend's): what the relaxed
    /// scanner (`lax`) took goes through the rules too (a target with `#`
    /// or bytes from 0x80 up; a Host that is not the absolute target's
    /// authority). Never set for the strict parse.
    pub accept_invalid: bool,
}

/// Whether a parsed head has more fields than `max` as HAProxy counts
/// them against `tune.http.maxhdr`: its parser drops a `Connection`
/// field naming only `close` or `keep-alive` and (in a request) a `Host`
/// repeating the first one's value, and counts neither. The parser is
/// given [`MAX_HEADERS_CAP`] slots; this says whether the head is over.
pub(super) fn too_many_fields(fields: &[httparse::Header<'_>], max: usize, request: bool) -> bool {
    if fields.len() <= max {
        return false;
    }
    let mut host: Option<&[u8]> = None;
    let counted = fields
        .iter()
        .filter(|f| {
            if f.name.eq_ignore_ascii_case("connection") {
                return f.value.split(|&b| b == b',').any(|t| {
                    let t = t.trim_ascii();
                    !t.is_empty()
                        && !t.eq_ignore_ascii_case(b"close")
                        && !t.eq_ignore_ascii_case(b"keep-alive")
                });
            }
            if request && f.name.eq_ignore_ascii_case("host") {
                match host {
                    Some(v) if v.eq_ignore_ascii_case(f.value) => return false,
                    Some(_) => {}
                    None => host = Some(f.value),
                }
            }
            true
        })
        .count();
    counted > max
}

/// Hard ceiling on [`Limits::max_headers`]: the parser keeps that many
/// httparse slots on the stack (uninitialised, 32 bytes each). Room for
/// the HTTP/1 form of the largest HTTP/2 head the largest accepted
/// `tune.http.maxhdr` (257) lets in: 2 x 257 - 1 decoded fields (two of
/// them at least pseudo-header fields), a `host` line and the mux's
/// framing and upgrade lines (the limits an HTTP/2 stream's lane reads
/// its head with).
pub const MAX_HEADERS_CAP: usize = 2 * 257 + 6;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_uri: 8 * 1024,
            max_head_bytes: 15 * 1024,
            max_headers: 100,
            allow_bare_lf: false,
            max_drain: 16 * 1024,
            buf_size: 16 * 1024,
            rebuilt: false,
            h2_lane: false,
            accept_invalid: false,
        }
    }
}

// --- byte classes ----------------------------------------------------------

pub(crate) const fn tchar(b: u8) -> bool {
    matches!(b,
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9'
        | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+'
        | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

/// A byte class as a table of 256 answers, built at compile time from its
/// `const fn` (one load a byte on the hot paths).
macro_rules! byte_table {
    ($class:ident) => {{
        let mut t = [false; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = $class(i as u8);
            i += 1;
        }
        t
    }};
}
pub(crate) use byte_table;

static TCHAR: [bool; 256] = byte_table!(tchar);

/// RFC 9110 §5.6.2 `tchar`.
#[inline]
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// True when `s` is a non-empty token. Every byte is looked up (no
/// early exit): names are short and a valid one is read whole anyway.
#[inline]
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().fold(true, |ok, &b| ok & is_tchar(b))
}

/// RFC 9110 §5.5 field-vchar / SP / HTAB (what a field value may hold).
#[inline]
pub(crate) fn is_field_value_byte(b: u8) -> bool {
    b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80
}

/// True when every byte of `v` is a [`is_field_value_byte`]: written
/// without an early exit so that the compiler checks many bytes per
/// instruction (a value is read whole when it is valid, the common case).
#[inline]
pub(crate) fn is_field_value(v: &[u8]) -> bool {
    // Refused: the controls but HTAB (below SP), and DEL.
    v.iter().fold(0u8, |bad, &b| {
        bad | (u8::from(b < b' ') & u8::from(b != b'\t')) | u8::from(b == 0x7f)
    }) == 0
}

/// Trims RFC 9110 OWS (SP / HTAB) on both sides.
#[inline]
pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Calls `f` with each non-empty member of a comma-separated list (RFC 9110
/// §5.6.1), OWS removed, and its offset in `s`. Empty members are passed as
/// empty slices so callers can choose to refuse them.
pub(crate) fn for_each_member(s: &[u8], mut f: impl FnMut(&[u8], usize)) {
    let mut start = 0;
    loop {
        let end = s[start..]
            .iter()
            .position(|&b| b == b',')
            .map_or(s.len(), |p| start + p);
        let raw = &s[start..end];
        let lead = raw
            .iter()
            .position(|&b| b != b' ' && b != b'\t')
            .unwrap_or(raw.len());
        f(trim_ows(raw), start + lead);
        if end == s.len() {
            break;
        }
        start = end + 1;
    }
}

/// `1*DIGIT` as a u64, None on anything else (sign, space, hex, overflow).
pub(crate) fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

/// A byte of RFC 3986's `reg-name` (unreserved, pct-encoded's `%`,
/// sub-delims), which also covers an IPv4 address.
const fn host_char(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'%'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
        )
}

/// [`host_char`] for every byte: the check of a Host value is one load a
/// byte (it runs on every request, and on an HTTP/2 request's authority).
static HOST_CHAR: [bool; 256] = byte_table!(host_char);

/// RFC 3986 §3.2.2 `uri-host [ ":" port ]` (the Host field and the
/// authority of an absolute-form target). `port` may be empty (`*DIGIT`).
/// With `need_port`, the port must be present and non-empty (CONNECT's
/// authority-form).
pub(crate) fn is_valid_authority(s: &[u8], need_port: bool) -> bool {
    let (host, port) = if let Some(rest) = s.strip_prefix(b"[") {
        // IP-literal: hex digits, ':', '.', and IPvFuture's 'v' and unreserved.
        let Some(close) = rest.iter().position(|&b| b == b']') else {
            return false;
        };
        let lit = &rest[..close];
        if lit.is_empty()
            || !lit
                .iter()
                .all(|&b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.' | b'v' | b'V'))
        {
            return false;
        }
        let after = &rest[close + 1..];
        match after {
            [] => (&b""[..], None),
            [b':', port @ ..] => (&b"x"[..], Some(port)),
            _ => return false,
        }
    } else {
        match s.iter().rposition(|&b| b == b':') {
            Some(c) => (&s[..c], Some(&s[c + 1..])),
            None => (s, None),
        }
    };
    // Every byte looked up, no early exit (a valid authority, the common
    // case, is read whole anyway).
    let host_ok = host.iter().fold(true, |ok, &b| ok & HOST_CHAR[b as usize]);
    let port_ok = match port {
        Some(p) => {
            p.iter().fold(true, |ok, b| ok & b.is_ascii_digit()) && !(need_port && p.is_empty())
        }
        None => !need_port,
    };
    host_ok && port_ok
}

/// Case-insensitive comparison of a field name with a lower-case constant.
#[inline]
pub(crate) fn name_is(name: &[u8], lower: &[u8]) -> bool {
    name.len() == lower.len() && name.eq_ignore_ascii_case(lower)
}

/// [`name_is`] for a name known when compiling (`lower` in lower case).
/// Where `lower` has a letter, the name's byte gets the case bit set
/// (0x20: `A` becomes `a`, and only `A` and `a` become `a`); anywhere
/// else the bytes must be equal. The masks are constants and no byte
/// exits early, so the compiler compares the whole name in a few word
/// operations (the hot field names are 2 to 21 bytes).
#[inline(always)]
pub(crate) fn eq_nocase<const N: usize>(name: &[u8], lower: &[u8; N]) -> bool {
    let Ok(n) = <&[u8; N]>::try_from(name) else {
        return false;
    };
    // The case bits of `lower`'s letters (a constant once inlined).
    let case = |i: usize| {
        if lower[i].is_ascii_lowercase() {
            0x20
        } else {
            0
        }
    };
    if N < 8 {
        let mut diff = 0u8;
        for i in 0..N {
            diff |= (n[i] | case(i)) ^ lower[i];
        }
        return diff == 0;
    }
    // Eight bytes a word: words at 0, 8, ... and the last one ending at N
    // (overlapping the one before it when N is not a multiple of 8).
    let word = |b: &[u8], at: usize| {
        b.get(at..)
            .and_then(|s| s.first_chunk::<8>())
            .map(|w| u64::from_le_bytes(*w))
    };
    let mut diff = 0u64;
    let mut at = 0;
    loop {
        let start = at.min(N - 8);
        let mut mask = [0u8; 8];
        for (k, m) in mask.iter_mut().enumerate() {
            *m = case(start + k);
        }
        let (Some(w), Some(p)) = (word(n, start), word(lower, start)) else {
            return false;
        };
        diff |= (w | u64::from_le_bytes(mask)) ^ p;
        if start + 8 >= N {
            break;
        }
        at += 8;
    }
    diff == 0
}

// --- field analysis ---------------------------------------------------------

/// What the field lines say, before the request- or response-specific rules
/// turn it into a decision.
#[derive(Default)]
pub(crate) struct Fields {
    /// The single Content-Length value, if any.
    pub content_length: Option<u64>,
    /// Content-Length came more than once (lines or list members), always
    /// with the same value (otherwise analysis failed).
    pub content_length_repeated: bool,
    /// A Transfer-Encoding field line was present.
    pub te_present: bool,
    /// The last transfer-coding is `chunked`.
    pub te_chunked_final: bool,
    /// A coding other than `chunked` appears.
    pub te_unknown: bool,
    /// Connection options.
    pub conn_close: bool,
    pub conn_keep_alive: bool,
    pub conn_upgrade: bool,
    /// Host lines seen and the first one's value.
    pub host_count: u32,
    pub host: Option<Span>,
    /// `Expect: 100-continue` seen.
    pub expect_continue: bool,
    /// The Upgrade value, if present.
    pub upgrade: Option<Span>,
    /// `Sec-WebSocket-Key` lines seen and the first one's value.
    pub ws_key_count: u32,
    pub ws_key: Option<Span>,
    /// `Sec-WebSocket-Version` lines seen and the first one's value.
    pub ws_version_count: u32,
    pub ws_version: Option<Span>,
}

/// Runs over the field lines once. `allow_repeated_cl` accepts identical
/// repeated Content-Length values (RFC 9110 §8.6 MAY); otherwise a repeat is
/// [`HttpError::ConflictingContentLength`]. Inlined into its two callers:
/// the [`Fields`] it returns are read in place, not copied out.
#[inline(always)]
pub(crate) fn analyze(
    buf: &[u8],
    headers: &[HeaderSpan],
    allow_repeated_cl: bool,
) -> Result<Fields, HttpError> {
    let mut f = Fields::default();
    // Number of `chunked` members seen, and whether the last member was one.
    let mut chunked_seen = false;
    let mut te_error: Option<HttpError> = None;
    for h in headers {
        let name = h.name.get(buf);
        let value = h.value.get(buf);
        // Dispatch on length first: most fields match none of these.
        match name.len() {
            4 if eq_nocase(name, b"host") => {
                f.host_count += 1;
                if f.host.is_none() {
                    f.host = Some(h.value);
                }
            }
            6 if eq_nocase(name, b"expect") && eq_nocase(value, b"100-continue") => {
                f.expect_continue = true;
            }
            7 if eq_nocase(name, b"upgrade") => {
                f.upgrade = Some(h.value);
            }
            // A lone `keep-alive` or `close` (the usual value) needs no
            // walk through a list.
            10 if eq_nocase(name, b"connection") && eq_nocase(value, b"keep-alive") => {
                f.conn_keep_alive = true;
            }
            10 if eq_nocase(name, b"connection") && eq_nocase(value, b"close") => {
                f.conn_close = true;
            }
            10 if eq_nocase(name, b"connection") => {
                for_each_member(value, |m, _| {
                    if eq_nocase(m, b"close") {
                        f.conn_close = true;
                    } else if eq_nocase(m, b"keep-alive") {
                        f.conn_keep_alive = true;
                    } else if eq_nocase(m, b"upgrade") {
                        f.conn_upgrade = true;
                    }
                });
            }
            14 if eq_nocase(name, b"content-length") => {
                // Digits only (the usual value): the list's one member.
                if let Some(n) = parse_decimal(value) {
                    match f.content_length {
                        None => f.content_length = Some(n),
                        Some(prev) if prev == n && allow_repeated_cl => {
                            f.content_length_repeated = true
                        }
                        Some(_) => return Err(HttpError::ConflictingContentLength),
                    }
                    continue;
                }
                let mut err = None;
                for_each_member(value, |m, _| {
                    if err.is_some() {
                        return;
                    }
                    match parse_decimal(m) {
                        None => err = Some(HttpError::BadContentLength),
                        Some(n) => match f.content_length {
                            None => f.content_length = Some(n),
                            Some(prev) if prev == n && allow_repeated_cl => {
                                f.content_length_repeated = true
                            }
                            Some(_) => err = Some(HttpError::ConflictingContentLength),
                        },
                    }
                });
                if let Some(e) = err {
                    return Err(e);
                }
            }
            17 if eq_nocase(name, b"transfer-encoding") => {
                f.te_present = true;
                for_each_member(value, |m, _| {
                    if te_error.is_some() {
                        return;
                    }
                    // transfer-coding = token *( OWS ";" OWS transfer-parameter )
                    let coding = match m.iter().position(|&b| b == b';') {
                        Some(p) => trim_ows(&m[..p]),
                        None => m,
                    };
                    if !is_token(coding) {
                        te_error = Some(HttpError::BadTransferEncoding);
                        return;
                    }
                    if eq_nocase(m, b"chunked") {
                        if chunked_seen {
                            // chunked applied twice (RFC 9112 §7: MUST NOT).
                            te_error = Some(HttpError::ChunkedNotFinal);
                            return;
                        }
                        chunked_seen = true;
                        f.te_chunked_final = true;
                    } else {
                        // Anything after chunked, or any other coding
                        // (including `chunked;param`, which is not chunked).
                        f.te_unknown = true;
                        f.te_chunked_final = false;
                    }
                });
            }
            17 if eq_nocase(name, b"sec-websocket-key") => {
                f.ws_key_count += 1;
                f.ws_key.get_or_insert(h.value);
            }
            21 if eq_nocase(name, b"sec-websocket-version") => {
                f.ws_version_count += 1;
                f.ws_version.get_or_insert(h.value);
            }
            _ => {}
        }
    }
    if let Some(e) = te_error {
        return Err(e);
    }
    // chunked seen but not last: the unknown flag is set by what followed.
    if chunked_seen && !f.te_chunked_final {
        return Err(HttpError::ChunkedNotFinal);
    }
    Ok(f)
}

/// Scans a complete head for a line ended by LF alone. Branch-free over
/// byte pairs so the compiler vectorises it (a byte loop with an early exit
/// cost 250 ns on a 350-byte head; this is a few tens).
#[inline]
pub(crate) fn has_bare_lf(head: &[u8]) -> bool {
    if head.first() == Some(&b'\n') {
        return true;
    }
    let cur = head.get(1..).unwrap_or(&[]);
    let mut bad = false;
    for chunk in 0..cur.len().div_ceil(64) {
        let lo = chunk * 64;
        let hi = (lo + 64).min(cur.len());
        let mut acc = 0u8;
        for (&prev, &b) in head[lo..hi].iter().zip(&cur[lo..hi]) {
            acc |= u8::from(b == b'\n') & u8::from(prev != b'\r');
        }
        bad |= acc != 0;
    }
    bad
}

/// [`has_bare_lf`] for a head whose syntax is known: `head` a complete
/// head, `fields` its field lines, each name at the start of its line (as
/// httparse cuts them, or as ebb writes a head). In such a head an LF
/// only ends a line: the start line's, each field line's, the empty
/// line's (a field value, a target or a reason phrase holding an LF is
/// refused by the parser, and so is obs-fold), and every CR is followed
/// by an LF. So the two bytes before each field name and the last four
/// bytes tell all, a few loads instead of a pass over every byte. Empty
/// lines before the start line (rare: RFC 9112 §2.2 lets a server skip
/// them) take the full scan.
#[inline]
pub(crate) fn head_has_bare_lf(head: &[u8], fields: &[HeaderSpan]) -> bool {
    if matches!(head.first(), Some(b'\r' | b'\n')) {
        return has_bare_lf(head);
    }
    let crlf_before = |at: u32| {
        let at = at as usize;
        at >= 2 && at <= head.len() && head[at - 2] == b'\r' && head[at - 1] == b'\n'
    };
    let bare = !head.ends_with(b"\r\n\r\n") || !fields.iter().all(|f| crlf_before(f.name.start));
    debug_assert_eq!(bare, has_bare_lf(head), "{:?}", head.escape_ascii());
    bare
}

/// Names the rule a head broke when httparse refused it with a generic
/// header error: obs-fold and bare CR deserve their own log phrase.
#[cold]
pub(crate) fn classify_field_error(buf: &[u8], generic: HttpError) -> HttpError {
    let mut prev = 0u8;
    let mut prev2 = 0u8;
    for (i, &b) in buf.iter().enumerate() {
        if prev == b'\r' && b != b'\n' {
            return HttpError::BareCr;
        }
        // A line starting with SP/HTAB after a non-empty line: obs-fold.
        if (b == b' ' || b == b'\t') && prev == b'\n' && i >= 2 && prev2 != b'\n' {
            return HttpError::ObsFold;
        }
        prev2 = prev;
        prev = b;
    }
    generic
}
