//! Request heads: httparse does the tokenising, this module the RFC 9112
//! rules httparse leaves to its caller (see the policy list in `mod.rs`).

use core::mem::MaybeUninit;

use super::error::HttpError;
use super::head::{
    analyze, classify_field_error, for_each_member, head_has_bare_lf, is_valid_authority,
    parse_decimal, BodyFraming, Fields, HeaderSpan, Limits, Span, Version, MAX_HEADERS_CAP,
};
use super::scan;
pub use httparse::Status;

/// Request methods ebb treats specially; any other valid token is
/// [`Method::Other`] (its bytes are in [`RequestHead::method_span`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET
    Get,
    /// HEAD
    Head,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
    /// CONNECT
    Connect,
    /// OPTIONS
    Options,
    /// TRACE
    Trace,
    /// PATCH
    Patch,
    /// Any other token (methods are case-sensitive: `get` is Other).
    Other,
}

impl Method {
    /// The method of a token (case-sensitive).
    #[inline]
    pub fn from_bytes(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"CONNECT" => Method::Connect,
            b"OPTIONS" => Method::Options,
            b"TRACE" => Method::Trace,
            b"PATCH" => Method::Patch,
            _ => Method::Other,
        }
    }

    /// GET, HEAD, OPTIONS, TRACE, PUT, DELETE: a request a proxy may send
    /// again after a failure (RFC 9110 §9.2.2 idempotent methods).
    pub const fn is_idempotent(self) -> bool {
        matches!(
            self,
            Method::Get
                | Method::Head
                | Method::Options
                | Method::Trace
                | Method::Put
                | Method::Delete
        )
    }
}

/// The four request-target forms of RFC 9112 §3.2.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TargetForm {
    /// `/path?query`
    Origin,
    /// `http://authority/path?query` (the authority is the effective Host)
    Absolute,
    /// `host:port`, CONNECT only
    Authority,
    /// `*`, OPTIONS only
    Asterisk,
}

/// A parsed request head. All spans index the buffer given to the parser.
#[derive(Clone, Debug)]
pub struct RequestHead {
    /// The method, classified.
    pub method: Method,
    /// The method's bytes.
    pub method_span: Span,
    /// The request-target as sent.
    pub target: Span,
    /// Which form the target has.
    pub target_form: TargetForm,
    /// Path and query of the target (for absolute-form, the part after the
    /// authority; empty for authority- and asterisk-form).
    pub path: Span,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// A version other than `HTTP/1.0` read as HTTP/1.0, which `option
    /// accept-invalid-http-request` let through (`HTTP/1.10`, `FOO`): it
    /// goes on to the server as it came, as HAProxy sends it.
    pub version_raw: Option<Span>,
    /// Field lines in order, duplicates kept.
    pub headers: Vec<HeaderSpan>,
    /// Bytes of the head, including the empty line: the body (or the next
    /// pipelined request) starts at `head_len`.
    pub head_len: usize,
    /// How the body is delimited.
    pub framing: BodyFraming,
    /// Whether the connection may carry another request after this one's
    /// response (before the server's own reasons to close).
    pub keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    pub expect_continue: bool,
    /// The effective host: the authority of an absolute-form target,
    /// otherwise the Host value; None only for HTTP/1.0 without Host.
    pub host: Option<Span>,
    /// The Upgrade value when this is an upgrade request (HTTP/1.1, Upgrade
    /// present and `upgrade` listed in Connection).
    pub upgrade: Option<Span>,
}

impl Default for RequestHead {
    fn default() -> Self {
        RequestHead {
            method: Method::Get,
            method_span: Span::default(),
            target: Span::default(),
            target_form: TargetForm::Origin,
            path: Span::default(),
            version: Version::Http11,
            version_raw: None,
            headers: Vec::new(),
            head_len: 0,
            framing: BodyFraming::None,
            keep_alive: false,
            expect_continue: false,
            host: None,
            upgrade: None,
        }
    }
}

impl RequestHead {
    /// An empty head whose header list can hold `n` fields without growing.
    pub fn with_capacity(n: usize) -> Self {
        RequestHead {
            headers: Vec::with_capacity(n),
            ..RequestHead::default()
        }
    }

    /// Becomes a copy of `from`, keeping its own header list's
    /// allocation (a derived `clone_from` would make a new one).
    pub fn assign(&mut self, from: &RequestHead) {
        let headers = std::mem::take(&mut self.headers);
        *self = RequestHead { headers, ..*from };
        self.headers.clear();
        self.headers.extend_from_slice(&from.headers);
    }

    /// The value of the first field named `name` (ASCII case-insensitive).
    pub fn header<'b>(&self, buf: &'b [u8], name: &str) -> Option<&'b [u8]> {
        super::hop::find_header(buf, &self.headers, name)
    }
}

/// Parses a request head at the start of `buf`.
///
/// `Ok(Status::Partial)` means the head is not complete yet: call again with
/// more bytes (the parser keeps no state; it starts over). A head is refused
/// as soon as the bytes seen prove it bad, or once `buf` holds more than
/// [`Limits::max_head_bytes`] without an end (431), or a target longer than
/// [`Limits::max_uri`] (414).
///
/// This allocates a new header list; the connection code should reuse one
/// [`RequestHead`] with [`parse_request_into`].
pub fn parse_request(buf: &[u8], limits: &Limits) -> Result<Status<RequestHead>, HttpError> {
    let mut head = RequestHead::default();
    match parse_request_into(buf, limits, &mut head)? {
        Status::Complete(()) => Ok(Status::Complete(head)),
        Status::Partial => Ok(Status::Partial),
    }
}

/// As [`parse_request`], filling a reused `head` (its header list keeps its
/// capacity, so a warm connection parses without allocating). On `Partial`
/// or an error the content of `head` is unspecified.
pub fn parse_request_into(
    buf: &[u8],
    limits: &Limits,
    head: &mut RequestHead,
) -> Result<Status<()>, HttpError> {
    // A head past the limit goes to httparse, which counts as HAProxy.
    let quick_max = limits.max_headers.min(MAX_HEADERS_CAP);
    // The common head in one pass (httparse's very cut, see `scan`).
    if let Some((method, target, minor, head_len)) =
        scan::request(buf, quick_max, &mut head.headers)
    {
        let version = if minor == 0 {
            Version::Http10
        } else {
            Version::Http11
        };
        // The quick reading gave up on any bare LF: none to look for.
        return complete_request_into(buf, (method, target), version, head_len, limits, head, true);
    }
    let mut slots: [MaybeUninit<httparse::Header<'_>>; MAX_HEADERS_CAP] =
        [const { MaybeUninit::uninit() }; MAX_HEADERS_CAP];
    let mut req = httparse::Request::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut req, buf,
        // All the slots: the limit is checked on the fields HAProxy counts.
        &mut slots,
    );
    let head_len = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if let Some(e) = partial_limits(buf, limits) {
                return Err(e);
            }
            return Ok(Status::Partial);
        }
        Err(httparse::Error::Version) => {
            // The version may not have all come yet (`HTTP/1.` of
            // `HTTP/1.2`): it is read once its line is whole (the line
            // after the empty lines a request may follow).
            let line = buf.iter().position(|&b| b != b'\r' && b != b'\n');
            if !buf[line.unwrap_or(buf.len())..].contains(&b'\n') {
                return match partial_limits(buf, limits) {
                    Some(e) => Err(e),
                    None => Ok(Status::Partial),
                };
            }
            return match other_version(buf) {
                Some((at, v11)) => parse_other_version(buf, at, v11, limits, head),
                None => Err(map_error(buf, httparse::Error::Version, limits)),
            };
        }
        Err(e) => return Err(map_error(buf, e, limits)),
    };
    // httparse fills these on Complete; defend anyway (no unwrap on input).
    let (Some(method), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(HttpError::BadRequestLine);
    };
    if super::head::too_many_fields(req.headers, limits.max_headers, true) {
        return Err(HttpError::TooManyHeaders);
    }
    head.headers.clear();
    head.headers.extend(req.headers.iter().map(|h| HeaderSpan {
        name: Span::of(buf, h.name.as_bytes()),
        value: Span::of(buf, h.value),
    }));
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    let line = (
        Span::of(buf, method.as_bytes()),
        Span::of(buf, path.as_bytes()),
    );
    complete_request_into(buf, line, version, head_len, limits, head, false)
}

/// What [`parse_request_into`] makes of a request head once its syntax
/// is known, for a head whose syntax is known by other means: `buf`
/// holds the head (`head_len` bytes, lines ending CRLF), `line` the spans
/// of its method and target, `head.headers` its fields in order, each
/// as the parser would have cut it (a token name, a value of field-value
/// bytes without surrounding whitespace). The HTTP/2 side builds such a
/// head as it writes it (`h2::RequestHead::write_h1_spans`) and needs no
/// second parse. Same checks, same errors as after a parse.
/// `crlf`: every line of the head is known to end CRLF (no bare LF to
/// look for).
pub fn complete_request_into(
    buf: &[u8],
    line: (Span, Span),
    version: Version,
    head_len: usize,
    limits: &Limits,
    head: &mut RequestHead,
    crlf: bool,
) -> Result<Status<()>, HttpError> {
    // A head must fit in u32 offsets whatever the caller's limit says.
    let max_head = limits.max_head_bytes.min(u32::MAX as usize);
    let path = line.1.get(buf);
    // 414 before 431, as while the head is still arriving.
    if path.len() > limits.max_uri {
        return Err(HttpError::UriTooLong);
    }
    if head_len > max_head {
        return Err(HttpError::HeadTooLarge);
    }
    if !crlf && !limits.allow_bare_lf && head_has_bare_lf(&buf[..head_len], &head.headers) {
        return Err(HttpError::BareLf);
    }
    head.method = Method::from_bytes(line.0.get(buf));
    head.method_span = line.0;
    head.target = line.1;
    head.version = version;
    head.version_raw = None;
    head.head_len = head_len;

    let (form, authority, path_span) =
        match classify_target(path, head.target, head.method, limits.accept_invalid) {
            // A rewritten target that is no path, absolute URI or `*`, or
            // holds bytes a client may not send (`<`), goes as it is (see
            // `Limits::rebuilt`; the rewrite refused spaces and controls).
            Err(HttpError::BadTarget)
                if limits.rebuilt && head.method != Method::Connect && !path.is_empty() =>
            {
                (TargetForm::Origin, None, head.target)
            }
            r => r?,
        };
    head.target_form = form;
    head.path = path_span;

    let f = analyze(buf, &head.headers, false)?;
    let http11 = head.version == Version::Http11;

    // Host (RFC 9112 §3.2): exactly one on 1.1, at most one on 1.0, valid.
    if f.host_count > 1 {
        return Err(HttpError::DuplicateHost);
    }
    if let Some(h) = f.host {
        // A Host of the very bytes of the absolute target's authority
        // (what an HTTP/2 request's `:authority` gives both) passed the
        // same check in `classify_target`.
        // A rewritten Host goes as the rules left it (HAProxy edits its
        // message in place and checks the field only on receipt).
        let host = h.get(buf);
        let checked = limits.rebuilt || authority.is_some_and(|a| a.get(buf) == host);
        if !checked && !is_valid_authority(host, false) {
            return Err(HttpError::BadHost);
        }
        // An absolute target whose authority is not the Host is refused,
        // as HAProxy 2.6.12 refuses it (a request as received: not one
        // the rules rewrote).
        // `option accept-invalid-http-request` lets it through, as HAProxy's.
        if form == TargetForm::Absolute
            && !limits.rebuilt
            && !limits.accept_invalid
            && !host_is_authority(path, host)
        {
            return Err(HttpError::BadHost);
        }
        // CONNECT: the Host names the target's host and port, as HAProxy
        // 2.6.12 checks it (`h1_validate_connect_authority`), and a
        // default port (80, 443) is dropped from its value.
        if head.method == Method::Connect && !limits.rebuilt {
            match connect_host(path, host) {
                None => return Err(HttpError::BadHost),
                Some(keep) if keep < host.len() && !limits.h2_lane => {
                    if let Some(f) = head.headers.iter_mut().find(|f| f.value == h) {
                        f.value.end = f.value.start + keep as u32;
                    }
                }
                Some(_) => {}
            }
        }
    } else if http11 && !limits.rebuilt && form != TargetForm::Absolute {
        // An absolute target names the host itself: HAProxy 2.6 serves
        // it without Host (and sends none on); RFC 9112 §3.2's 400 is
        // kept for the other forms, where nothing names the host.
        return Err(HttpError::MissingHost);
    }
    // Absolute-form: the target's authority replaces Host (RFC 9112 §3.2.2).
    head.host = authority.or(f.host);

    // Framing (RFC 9112 §6.1, §6.3), as HAProxy 2.6 reads it: chunked
    // must be the final coding (400), once (400, in `analyze`); another
    // coding before it is not implemented (422). Transfer-Encoding wins
    // over Content-Length, which is dropped, and either that or an
    // HTTP/1.0 request with Transfer-Encoding closes the connection after
    // the answer (`force_close` below).
    let mut force_close = false;
    head.framing = if f.te_present {
        if !f.te_chunked_final {
            return Err(HttpError::ChunkedNotFinal);
        }
        if f.te_unknown {
            return Err(HttpError::UnknownTransferCoding);
        }
        force_close = !http11 || f.content_length.is_some();
        BodyFraming::Chunked
    } else {
        match f.content_length {
            Some(0) | None => BodyFraming::None,
            Some(n) => BodyFraming::ContentLength(n),
        }
    };

    if head.method == Method::Connect {
        // RFC 9110 §9.3.6: a CONNECT request has no content. The bytes
        // after its head are the tunnel's, sent on once a 2xx opens it
        // (or the next request after another answer), as HAProxy 2.6
        // reads them; its Content-Length or Transfer-Encoding is not
        // sent on (a server reading them as a body while another hop
        // reads a tunnel, or the next request, is a desync).
        head.framing = BodyFraming::None;
    }
    head.keep_alive = !force_close
        && if http11 {
            !f.conn_close
        } else {
            f.conn_keep_alive && !f.conn_close
        };
    // RFC 9110 §10.1.1: ignore 100-continue from an HTTP/1.0 client.
    head.expect_continue = http11 && f.expect_continue;
    // RFC 9110 §7.8: Upgrade counts only with the `upgrade` connection
    // option, and a server ignores it from HTTP/1.0 (HAProxy 2.6 does
    // not: it tunnels; ebb keeps to the RFC). As HAProxy 2.6, a request
    // with a body (chunked, or a length above 0) is no upgrade: its
    // Upgrade goes (a server's 101 to it is then a 502).
    let bodyless = head.framing == BodyFraming::None;
    head.upgrade = match f.upgrade {
        Some(u) if http11 && f.conn_upgrade && !u.is_empty() && bodyless => Some(u),
        _ => None,
    };
    if let Some(u) = head.upgrade {
        let mut websocket = false;
        let mut only_h2c = true;
        for_each_member(u.get(buf), |m, _| {
            websocket |= m.eq_ignore_ascii_case(b"websocket");
            only_h2c &= m.eq_ignore_ascii_case(b"h2c");
        });
        if only_h2c {
            // RFC 9113 §3.1 removed the h2c upgrade; a server still doing
            // it would switch to HTTP/2 inside a tunnel no rule sees. The
            // request goes on as plain HTTP/1.1 (Upgrade, Connection and
            // the HTTP2-Settings they name are hop-by-hop: not forwarded).
            head.upgrade = None;
            return Ok(Status::Complete(()));
        }
        if websocket && !websocket_handshake_ok(buf, &f) {
            return Err(HttpError::BadWebSocketHandshake);
        }
    }
    Ok(Status::Complete(()))
}

/// The `Allow` value of the 405 the file server answers a CONNECT with
/// (it opens no tunnel; a CONNECT routed to servers is forwarded): the
/// methods ebb answers or forwards.
pub const CONNECT_ALLOW: &[u8] = b"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

/// RFC 6455 §4.1 and §11.3: a websocket opening handshake carries exactly
/// one `Sec-WebSocket-Key`, the base64 form of 16 bytes (24 characters,
/// ending `==`), and exactly one `Sec-WebSocket-Version`, a number 0..=255
/// (which versions the origin speaks is its own answer: 426 with the ones
/// it does). Without them an origin may still answer 101 and open a tunnel
/// no rule sees; HAProxy refuses such requests with 400 too.
fn websocket_handshake_ok(buf: &[u8], f: &Fields) -> bool {
    // HAProxy 2.6 requires the key only (its reg-test
    // http-messaging/websocket sends no version); a version sent must be
    // valid.
    let Some(key) = f.ws_key else {
        return false;
    };
    if f.ws_key_count != 1 || f.ws_version_count > 1 {
        return false;
    }
    let key = key.get(buf);
    let b64 = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    // 16 bytes = 21 full base64 characters and one holding the last 2
    // bits, whose low 4 bits are zero: one of "AQgw".
    let key_ok = key.len() == 24
        && key[..21].iter().all(b64)
        && b"AQgw".contains(&key[21])
        && &key[22..] == b"==";
    let Some(ver) = f.ws_version else {
        return key_ok;
    };
    let ver = ver.get(buf);
    let ver_ok = !ver.is_empty()
        && ver.len() <= 3
        && ver.iter().all(u8::is_ascii_digit)
        && (ver.len() == 1 || ver[0] != b'0')
        && parse_decimal(ver).is_some_and(|v| v <= 255);
    key_ok && ver_ok
}

/// When httparse wants more bytes: refuse a head that already broke a limit.
#[cold]
fn partial_limits(buf: &[u8], limits: &Limits) -> Option<HttpError> {
    if buf.len() > limits.max_uri {
        // Still in the request line with an over-long target? 414 first.
        let start = buf
            .iter()
            .position(|&b| b != b'\r' && b != b'\n')
            .unwrap_or(buf.len());
        let line = &buf[start..];
        let line = match line.iter().position(|&b| b == b'\n') {
            Some(p) => &line[..p],
            None => line,
        };
        if let Some(sp) = line.iter().position(|&b| b == b' ') {
            let rest = &line[sp + 1..];
            let tlen = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            if tlen > limits.max_uri {
                return Some(HttpError::UriTooLong);
            }
        }
    }
    if buf.len() > limits.max_head_bytes {
        return Some(HttpError::HeadTooLarge);
    }
    None
}

/// Where the request line's version is `HTTP/` DIGIT `.` DIGIT other than
/// 1.0 and 1.1 (`HTTP/1.2`, `HTTP/2.0`, `HTTP/0.9`), which HAProxy 2.6
/// serves: its offset in `buf`, and whether it reads as HTTP/1.1 (1.1 and
/// up, HAProxy's rule) rather than 1.0.
#[cold]
fn other_version(buf: &[u8]) -> Option<(usize, bool)> {
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let line = &buf[start..];
    let end = line.iter().position(|&b| b == b'\n')?;
    let line = line[..end].strip_suffix(b"\r").unwrap_or(&line[..end]);
    let mut parts = line.split(|&b| b == b' ');
    let (Some(m), Some(t), Some(v), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    match v {
        [b'H', b'T', b'T', b'P', b'/', a, b'.', b]
            if a.is_ascii_digit() && b.is_ascii_digit() && !m.is_empty() && !t.is_empty() =>
        {
            Some((
                start + m.len() + t.len() + 2,
                *a > b'1' || *a == b'1' && *b >= b'1',
            ))
        }
        _ => None,
    }
}

/// Parses a request whose version [`other_version`] found at `at` (its
/// line whole), as the same head saying `HTTP/1.1` (or `HTTP/1.0`): the
/// request line is cut here, the fields by httparse, all spans in `buf`
/// (nothing copied); the server gets `HTTP/1.1` (or `HTTP/1.0`), as from
/// HAProxy.
#[cold]
fn parse_other_version(
    buf: &[u8],
    at: usize,
    v11: bool,
    limits: &Limits,
    head: &mut RequestHead,
) -> Result<Status<()>, HttpError> {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    // `method SP target SP`, then the version's 8 bytes and the line's end.
    let line = buf.get(start..at).and_then(|l| l.strip_suffix(b" "));
    let Some((method, target)) = line.and_then(|l| {
        let sp = l.iter().position(|&b| b == b' ')?;
        Some((&l[..sp], &l[sp + 1..]))
    }) else {
        return Err(HttpError::BadRequestLine);
    };
    if !super::head::is_token(method) {
        return Err(HttpError::BadMethod);
    }
    let mut end = at + 8;
    if buf.get(end) == Some(&b'\r') {
        end += 1;
    }
    if buf.get(end) != Some(&b'\n') {
        return Err(HttpError::BadRequestLine);
    }
    end += 1;
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    let (n, fields) = match httparse::parse_headers(&buf[end..], &mut slots) {
        Ok(httparse::Status::Complete(r)) => r,
        Ok(httparse::Status::Partial) => {
            return match partial_limits(buf, limits) {
                Some(e) => Err(e),
                None => Ok(Status::Partial),
            };
        }
        Err(e) => return Err(map_error(buf, e, limits)),
    };
    if super::head::too_many_fields(fields, limits.max_headers, true) {
        return Err(HttpError::TooManyHeaders);
    }
    head.headers.clear();
    head.headers.extend(fields.iter().map(|h| HeaderSpan {
        name: Span::of(buf, h.name.as_bytes()),
        value: Span::of(buf, h.value),
    }));
    let version = if v11 {
        Version::Http11
    } else {
        Version::Http10
    };
    let line = (Span::of(buf, method), Span::of(buf, target));
    complete_request_into(buf, line, version, end + n, limits, head, false)
}

/// A request head the strict [`parse_request_into`] refused, read again as
/// HAProxy 2.6 reads it with `option accept-invalid-http-request` (see
/// `lax`'s module doc for what that lets through, and nothing more). On
/// `Complete`, the offset of the first byte only the option took, if any
/// (what `show errors` captures); `Err` when even so the head is refused
/// (the caller answers the strict parse's error).
pub fn parse_request_lax(
    buf: &[u8],
    limits: &Limits,
    head: &mut RequestHead,
) -> Result<Status<Option<usize>>, HttpError> {
    let l = match super::lax::scan(buf, false, true, &mut head.headers) {
        super::lax::Scan::Partial => {
            return match partial_limits(buf, limits) {
                Some(e) => Err(e),
                None => Ok(Status::Partial),
            }
        }
        super::lax::Scan::Bad(_) => return Err(HttpError::BadRequestLine),
        super::lax::Scan::Head(l) => l,
    };
    if head.headers.len() > limits.max_headers {
        return Err(HttpError::TooManyHeaders);
    }
    let version = if l.v11 {
        Version::Http11
    } else {
        Version::Http10
    };
    let limits = Limits {
        accept_invalid: true,
        ..*limits
    };
    match complete_request_into(buf, (l.a, l.b), version, l.head_len, &limits, head, true)? {
        Status::Complete(()) => {
            let v = l.c.get(buf);
            if !l.v11 && !v.is_empty() && v != b"HTTP/1.0" {
                head.version_raw = Some(l.c);
            }
            Ok(Status::Complete(l.err_pos))
        }
        Status::Partial => Ok(Status::Partial),
    }
}

/// Turns httparse's error into ebb's, naming the broken rule.
#[cold]
fn map_error(buf: &[u8], e: httparse::Error, limits: &Limits) -> HttpError {
    match e {
        httparse::Error::TooManyHeaders => HttpError::TooManyHeaders,
        httparse::Error::HeaderName => classify_field_error(buf, HttpError::BadHeaderName),
        httparse::Error::HeaderValue => classify_field_error(buf, HttpError::BadHeaderValue),
        httparse::Error::NewLine => classify_field_error(buf, HttpError::BadRequestLine),
        httparse::Error::Version | httparse::Error::Token | httparse::Error::Status => {
            classify_request_line(buf, limits)
        }
    }
}

/// The request line failed: tell an unsupported version (`HTTP/3`, an
/// HTTP/0.9 `GET /path` line: 400 all the same, as from HAProxy, but
/// logged apart) from another bad line, and 414 from both.
#[cold]
fn classify_request_line(buf: &[u8], limits: &Limits) -> HttpError {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    let line = &buf[start..];
    let line = match line.iter().position(|&b| b == b'\n') {
        Some(p) => line[..p].strip_suffix(b"\r").unwrap_or(&line[..p]),
        None => line,
    };
    let mut parts = line.split(|&b| b == b' ');
    let method = parts.next().unwrap_or(&[]);
    let target = parts.next();
    let version = parts.next();
    let extra = parts.next();
    if !super::head::is_token(method) {
        return HttpError::BadMethod;
    }
    if let Some(t) = target {
        if t.len() > limits.max_uri {
            return HttpError::UriTooLong;
        }
    }
    match (target, version, extra) {
        // `GET /` alone on its line: HTTP/0.9.
        (Some(t), None, None) if !t.is_empty() && line.len() < buf.len() - start => {
            HttpError::UnsupportedVersion
        }
        (Some(t), Some(v), None) if !t.is_empty() => {
            // Any `HTTP/x.y` is served (`other_version`).
            let supported = matches!(v, [b'H', b'T', b'T', b'P', b'/', a, b'.', b]
                if a.is_ascii_digit() && b.is_ascii_digit());
            if is_version_syntax(v) && !supported {
                HttpError::UnsupportedVersion
            } else if !valid_target_bytes(t) {
                HttpError::BadTarget
            } else {
                HttpError::BadRequestLine
            }
        }
        _ => HttpError::BadRequestLine,
    }
}

/// Whether `host` names what the absolute-form `target` does, as HAProxy
/// 2.6.12 compares them: the target's authority is all up to its first
/// `/` (a `?` and what follows included: `http://a?x` is not host `a`),
/// both without the scheme's default port (`:80` for http, `:443` for
/// https), equal but for case. A target of another scheme passes.
fn host_is_authority(target: &[u8], host: &[u8]) -> bool {
    let (rest, port): (&[u8], &[u8]) =
        if target.len() >= 7 && target[..7].eq_ignore_ascii_case(b"http://") {
            (&target[7..], b":80")
        } else if target.len() >= 8 && target[..8].eq_ignore_ascii_case(b"https://") {
            (&target[8..], b":443")
        } else {
            return true;
        };
    let auth = &rest[..rest.iter().position(|&b| b == b'/').unwrap_or(rest.len())];
    let bare = |a: &'_ [u8]| -> usize { a.len() - if a.ends_with(port) { port.len() } else { 0 } };
    auth[..bare(auth)].eq_ignore_ascii_case(&host[..bare(host)])
}

/// The port at the end of an authority (`:` and digits after it, at
/// least one, not at the start), as HAProxy's `http_get_host_port`: the
/// host before it and the port.
fn split_port(a: &[u8]) -> (&[u8], Option<&[u8]>) {
    let digits = a.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    let colon = a.len() - digits;
    if digits == 0 || colon < 2 || a[colon - 1] != b':' {
        return (a, None);
    }
    (&a[..colon - 1], Some(&a[colon..]))
}

/// A CONNECT's Host against its authority-form `target`, as HAProxy
/// 2.6.12 (`h1_validate_connect_authority`): with a port, the same host
/// (but for case) and the same port; without, the same host and a target
/// port of 80 or 443. `None` when they disagree, else how much of `host`
/// to keep: a port of 80 or 443 is dropped (HAProxy's normalization).
fn connect_host(target: &[u8], host: &[u8]) -> Option<usize> {
    let (t_host, t_port) = split_port(target);
    let t_port = t_port?;
    let default = t_port == b"80" || t_port == b"443";
    match split_port(host) {
        (h, Some(p)) if h.eq_ignore_ascii_case(t_host) && p == t_port => {
            Some(if default { h.len() } else { host.len() })
        }
        (h, None) if default && h.eq_ignore_ascii_case(t_host) => Some(host.len()),
        _ => None,
    }
}

/// `HTTP/` DIGIT `.` DIGIT (RFC 9112 §2.3), and also `HTTP/2` style
/// single digits, which a confused HTTP/2 or HTTP/3 client may send.
fn is_version_syntax(v: &[u8]) -> bool {
    match v.strip_prefix(b"HTTP/") {
        Some([a, b'.', b]) => a.is_ascii_digit() && b.is_ascii_digit(),
        Some([a]) => a.is_ascii_digit(),
        _ => false,
    }
}

// The bytes HAProxy 2.6 takes in a request-target: every visible ASCII
// byte but '#' (a fragment is never sent: RFC 9112 §3.2, HAProxy
// CVE-2023-45539), so RFC 3986's set and also '"', '<', '>', '\', '^',
// '`', '{', '|', '}'; a `%` need not start a valid escape (`/%zz` goes on
// as it is, as in HAProxy). Refused: CTL, SP, DEL, '#' and bytes >= 0x80
// (`option accept-invalid-http-request` takes the last two, as HAProxy's:
// see `lax` and `Limits::accept_invalid`). HAProxy 2.6's word-at-a-time scan lets DEL and
// 0x80..=0xa3 through when they share an aligned 4-byte word with other
// visible bytes (`/ab\x7f` passes, `/\x7f` does not): ebb refuses them
// wherever they are, as HAProxy's byte-by-byte check and its manual do.
pub(crate) const fn target_byte(b: u8) -> bool {
    b > b' ' && b < 0x7f && b != b'#'
}

static TARGET: [bool; 256] = super::head::byte_table!(target_byte);

/// Every byte allowed ([`target_byte`]).
pub(crate) fn valid_target_bytes(t: &[u8]) -> bool {
    // Every byte looked up without an early exit.
    t.iter().fold(true, |ok, &b| ok & TARGET[b as usize])
}

/// Validates the target against RFC 9112 §3.2 and the method; returns its
/// form, the authority span (absolute- and authority-form) and the path span.
fn classify_target(
    t: &[u8],
    span: Span,
    method: Method,
    lax: bool,
) -> Result<(TargetForm, Option<Span>, Span), HttpError> {
    // `lax` (`option accept-invalid-http-request`): `#` and the bytes from
    // 0x80 up as well, as HAProxy's option takes them.
    let lax_ok = |t: &[u8]| lax && t.iter().all(|&b| b > b' ' && b != 0x7f);
    if !(valid_target_bytes(t) || lax_ok(t)) {
        return Err(HttpError::BadTarget);
    }
    if method == Method::Connect {
        // CONNECT takes authority-form and nothing else (RFC 9112 §3.2.3).
        if !is_valid_authority(t, true) || t.starts_with(b"[") && !t.contains(&b']') {
            return Err(HttpError::BadTarget);
        }
        return Ok((TargetForm::Authority, Some(span), span.sub(0, 0)));
    }
    match t.first() {
        Some(b'/') => Ok((TargetForm::Origin, None, span)),
        Some(b'*') if t.len() == 1 => {
            if method == Method::Options {
                Ok((TargetForm::Asterisk, None, span.sub(0, 0)))
            } else {
                Err(HttpError::BadTarget)
            }
        }
        _ => {
            // absolute-form: only http and https (case-insensitive scheme).
            let after_scheme = if t.len() > 7 && t[..7].eq_ignore_ascii_case(b"http://") {
                7
            } else if t.len() > 8 && t[..8].eq_ignore_ascii_case(b"https://") {
                8
            } else {
                return Err(HttpError::BadTarget);
            };
            let rest = &t[after_scheme..];
            let auth_len = rest
                .iter()
                .position(|&b| b == b'/' || b == b'?')
                .unwrap_or(rest.len());
            let auth = &rest[..auth_len];
            // Userinfo is an error (RFC 9110 §4.2.4: `is_valid_authority`
            // refuses any `@`); an empty host is invalid for http(s) URIs
            // (RFC 9110 §4.2.1).
            if auth.is_empty() || auth.starts_with(b":") || !is_valid_authority(auth, false) {
                return Err(HttpError::BadTarget);
            }
            let a = span.sub(after_scheme, after_scheme + auth_len);
            let p = span.sub(after_scheme + auth_len, t.len());
            Ok((TargetForm::Absolute, Some(a), p))
        }
    }
}

/// RFC 3986 §6.2.3 scheme-based normalization, as HAProxy 2.5+ applies it
/// to an absolute-form target (an HTTP/1 one, or the absolute URI of an
/// HTTP/2 request): when the authority ends with the scheme's default port
/// (`:80` for http, `:443` for https, the scheme in any case), the port is
/// removed from the target and every `Host` value becomes the bare host.
/// Returns the head rewritten (its first `head.head_len` bytes of `buf`,
/// shorter than them), or `None` when nothing changes. The path is kept as
/// it is (an absolute URI without one stays without, as in HAProxy 2.6).
pub fn scheme_normalized(buf: &[u8], head: &RequestHead) -> Option<Vec<u8>> {
    if head.target_form != TargetForm::Absolute {
        return None;
    }
    let target = head.target.get(buf);
    let auth = head.host?;
    let a = auth.get(buf);
    // Only a default port is dropped: any other ends it here (the
    // scheme is not looked for).
    let (web, port): (&[u8], usize) = if a.ends_with(b":80") {
        (b"http", 2)
    } else if a.ends_with(b":443") {
        (b"https", 3)
    } else {
        return None;
    };
    let colon = a.len() - port - 1;
    let scheme = &target[..target.iter().position(|&b| b == b':')?];
    if !scheme.eq_ignore_ascii_case(web) {
        return None;
    }
    let host = &a[..colon];
    // The spans to replace, in order: the target's authority, then each
    // Host value.
    let mut cuts: Vec<(Span, &[u8])> = vec![(auth, host)];
    for f in &head.headers {
        if f.name.get(buf).eq_ignore_ascii_case(b"host") {
            cuts.push((f.value, host));
        }
    }
    let end = head.head_len.min(buf.len());
    let mut out = Vec::with_capacity(end);
    let mut at = 0usize;
    for (span, with) in cuts {
        let r = span.range();
        if r.start < at || r.end > end {
            return None;
        }
        out.extend_from_slice(&buf[at..r.start]);
        out.extend_from_slice(with);
        at = r.end;
    }
    out.extend_from_slice(&buf[at..end]);
    Some(out)
}
