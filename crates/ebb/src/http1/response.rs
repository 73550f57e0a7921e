//! Response heads from origin servers (the proxy side), with the same
//! strictness as requests: a response ebb cannot frame without guessing is
//! refused, and the proxy answers its client 502.

use core::mem::MaybeUninit;

use super::error::HttpError;
use super::head::{
    analyze, classify_field_error, head_has_bare_lf, BodyFraming, HeaderSpan, Limits, Span,
    Version, MAX_HEADERS_CAP,
};
use super::request::Method;
use super::scan;
pub use httparse::Status;

/// A parsed response head. All spans index the buffer given to the parser.
#[derive(Clone, Debug)]
pub struct ResponseHead {
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// The status code, 100..=599.
    pub status: u16,
    /// The reason phrase (possibly empty).
    pub reason: Span,
    /// Field lines in order, duplicates kept.
    pub headers: Vec<HeaderSpan>,
    /// Bytes of the head including the empty line.
    pub head_len: usize,
    /// How the body is delimited (RFC 9112 §6.3, given the request method).
    pub framing: BodyFraming,
    /// Whether the origin connection may be reused after this response.
    pub keep_alive: bool,
    /// After this head the connection is a tunnel: 101 Switching Protocols,
    /// or a 2xx answer to CONNECT.
    pub tunnel: bool,
    /// Content-Length came several times with one value (accepted, RFC 9110
    /// §8.6): the proxy must forward a single Content-Length.
    pub content_length_repeated: bool,
    /// Transfer-Encoding with Content-Length, or in an HTTP/1.0 answer:
    /// HAProxy closes both connections after this exchange.
    pub force_close: bool,
    /// A line of the head ends with a lone LF (accepted, RFC 9112 §2.2):
    /// whoever forwards the head writes it again with CRLF.
    pub bare_lf: bool,
    /// The length `Content-Length` declares, once read (`16, 16` is 16),
    /// whatever the framing: a HEAD's or a 304's goes on as this number.
    pub declared_length: Option<u64>,
    /// A version other than `HTTP/1.0` read as HTTP/1.0 (`HTTP/1.10`,
    /// `FOO/1.1`, which `option accept-invalid-http-response` let
    /// through): it goes on to the client as it came, as HAProxy sends it.
    pub version_raw: Option<Span>,
}

impl Default for ResponseHead {
    fn default() -> Self {
        ResponseHead {
            version: Version::Http11,
            status: 0,
            reason: Span::default(),
            headers: Vec::new(),
            head_len: 0,
            framing: BodyFraming::None,
            keep_alive: false,
            tunnel: false,
            content_length_repeated: false,
            force_close: false,
            bare_lf: false,
            declared_length: None,
            version_raw: None,
        }
    }
}

impl ResponseHead {
    /// An interim 1xx other than 101: forward it and parse the final
    /// response that follows at `head_len`.
    pub const fn is_interim(&self) -> bool {
        self.status >= 100 && self.status < 200 && self.status != 101
    }

    /// The value of the first field named `name` (ASCII case-insensitive).
    pub fn header<'b>(&self, buf: &'b [u8], name: &str) -> Option<&'b [u8]> {
        super::hop::find_header(buf, &self.headers, name)
    }

    /// The head as parsed from `buf`, written again at the end of `out`
    /// with CRLF line ends: the start line, each field line as
    /// `name: value`, the empty line. For a head with a lone LF
    /// ([`ResponseHead::bare_lf`]) forwarded otherwise as it came.
    pub fn write_crlf(&self, buf: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(match self.version {
            Version::Http10 => b"HTTP/1.0 ",
            Version::Http11 => b"HTTP/1.1 ",
        });
        super::push_decimal(out, u64::from(self.status));
        out.push(b' ');
        out.extend_from_slice(self.reason.get(buf));
        out.extend_from_slice(b"\r\n");
        for f in &self.headers {
            out.extend_from_slice(f.name.get(buf));
            out.extend_from_slice(b": ");
            out.extend_from_slice(f.value.get(buf));
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// Parses a response head at the start of `buf`; `method` is the request's
/// (HEAD and CONNECT change the framing). See [`parse_request`] for
/// `Partial`; every error means 502 to the client.
///
/// [`parse_request`]: super::parse_request
pub fn parse_response(
    buf: &[u8],
    limits: &Limits,
    method: Method,
) -> Result<Status<ResponseHead>, HttpError> {
    let mut head = ResponseHead::default();
    match parse_response_into(buf, limits, method, &mut head)? {
        Status::Complete(()) => Ok(Status::Complete(head)),
        Status::Partial => Ok(Status::Partial),
    }
}

/// As [`parse_response`], filling a reused `head`.
pub fn parse_response_into(
    buf: &[u8],
    limits: &Limits,
    method: Method,
    head: &mut ResponseHead,
) -> Result<Status<()>, HttpError> {
    let max_head = limits.max_head_bytes.min(u32::MAX as usize);
    // A head past the limit goes to httparse, which counts as HAProxy.
    let quick_max = limits.max_headers.min(MAX_HEADERS_CAP);
    // The common head in one pass (httparse's very cut, see `scan`).
    if let Some((minor, code, reason, head_len)) = scan::response(buf, quick_max, &mut head.headers)
    {
        return complete_response(
            buf,
            limits,
            method,
            head,
            (minor, code, reason, head_len),
            true,
        );
    }
    let mut slots: [MaybeUninit<httparse::Header<'_>>; MAX_HEADERS_CAP] =
        [const { MaybeUninit::uninit() }; MAX_HEADERS_CAP];
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp, buf,
        // All the slots: the limit is checked on the fields HAProxy counts.
        &mut slots,
    );
    let head_len = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > max_head {
                return Err(HttpError::HeadTooLarge);
            }
            return Ok(Status::Partial);
        }
        Err(e) => {
            return Err(match e {
                httparse::Error::TooManyHeaders => HttpError::TooManyHeaders,
                httparse::Error::HeaderName => classify_field_error(buf, HttpError::BadHeaderName),
                httparse::Error::HeaderValue => {
                    classify_field_error(buf, HttpError::BadHeaderValue)
                }
                httparse::Error::Version if buf.starts_with(b"HTTP/") => {
                    HttpError::UnsupportedVersion
                }
                _ => classify_field_error(buf, HttpError::BadStatusLine),
            })
        }
    };
    if super::head::too_many_fields(resp.headers, limits.max_headers, false) {
        return Err(HttpError::TooManyHeaders);
    }
    head.headers.clear();
    head.headers.extend(resp.headers.iter().map(|h| HeaderSpan {
        name: Span::of(buf, h.name.as_bytes()),
        value: Span::of(buf, h.value),
    }));
    let (Some(minor), Some(code)) = (resp.version, resp.code) else {
        return Err(HttpError::BadStatusLine);
    };
    let reason = resp
        .reason
        .map_or(Span::default(), |r| Span::of(buf, r.as_bytes()));
    complete_response(
        buf,
        limits,
        method,
        head,
        (minor, code, reason, head_len),
        false,
    )
}

/// A response head the strict [`parse_response_into`] refused, read again
/// as HAProxy 2.6 reads it with `option accept-invalid-http-response` (see
/// `lax`'s module doc). On `Complete`, the offset of the first byte only
/// the option took, if any (what `show errors` captures); `Err` when the
/// head is refused even so (the caller keeps the strict parse's error).
pub fn parse_response_lax(
    buf: &[u8],
    limits: &Limits,
    method: Method,
    head: &mut ResponseHead,
    relaxed: bool,
) -> Result<Status<Option<usize>>, HttpError> {
    let l = match super::lax::scan(buf, true, relaxed, &mut head.headers) {
        super::lax::Scan::Partial => {
            if buf.len() > limits.max_head_bytes {
                return Err(HttpError::HeadTooLarge);
            }
            return Ok(Status::Partial);
        }
        super::lax::Scan::Bad(_) => return Err(HttpError::BadStatusLine),
        super::lax::Scan::Head(l) => l,
    };
    if head.headers.len() > limits.max_headers {
        return Err(HttpError::TooManyHeaders);
    }
    let code =
        l.b.get(buf)
            .iter()
            .fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    let line = (u8::from(l.v11), code, l.c, l.head_len);
    match complete_response(buf, limits, method, head, line, true)? {
        Status::Complete(()) => {
            let v = l.a.get(buf);
            if !l.v11 && v != b"HTTP/1.0" {
                head.version_raw = Some(l.a);
            }
            Ok(Status::Complete(l.err_pos))
        }
        Status::Partial => Ok(Status::Partial),
    }
}

/// The response rules once the head's syntax is known: `line` is the
/// status line's (minor version, status, reason) and the head's length,
/// `head.headers` its fields; `crlf` when every line is known to end
/// CRLF (no bare LF to look for).
#[inline(always)]
fn complete_response(
    buf: &[u8],
    limits: &Limits,
    method: Method,
    head: &mut ResponseHead,
    line: (u8, u16, Span, usize),
    crlf: bool,
) -> Result<Status<()>, HttpError> {
    let (minor, code, reason, head_len) = line;
    if head_len > limits.max_head_bytes.min(u32::MAX as usize) {
        return Err(HttpError::HeadTooLarge);
    }
    // An answer's lines may end with a lone LF (RFC 9112 §2.2 MAY; HAProxy
    // 2.6's parser takes LF with or without CR before it, in answers as in
    // requests). ebb writes every head it forwards again with CRLF
    // (`head.bare_lf` tells the interim-answer path to do so).
    head.bare_lf = !crlf && head_has_bare_lf(&buf[..head_len], &head.headers);
    // RFC 9110 §15: values outside 100..=599 are invalid.
    if !(100..=599).contains(&code) {
        return Err(HttpError::BadStatusLine);
    }
    head.version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    head.status = code;
    head.version_raw = None;
    head.reason = reason;
    head.head_len = head_len;

    // Identical repeated Content-Length is tolerated from origins only.
    let f = analyze(buf, &head.headers, true)?;
    let http11 = head.version == Version::Http11;
    head.content_length_repeated = f.content_length_repeated;
    head.declared_length = f.content_length;
    // As HAProxy 2.6: a coding other than chunked is an invalid answer;
    // Transfer-Encoding wins over Content-Length (RFC 9112 §6.3), and
    // either that or an HTTP/1.0 answer with Transfer-Encoding closes the
    // server connection after it.
    if f.te_present && (f.te_unknown || !f.te_chunked_final) {
        return Err(HttpError::UnknownTransferCoding);
    }
    let force_close = f.te_present && (!http11 || f.content_length.is_some());
    head.force_close = force_close;
    // RFC 9110 §7.8, §15.2.2: a 101 names its protocol in `Upgrade`,
    // listed in `Connection` (HAProxy 2.6 answers 502 without the
    // latter, passes one without `Upgrade`).
    if code == 101 && !(f.upgrade.is_some() && f.conn_upgrade) {
        return Err(HttpError::BadSwitch);
    }
    head.tunnel = code == 101 || (method == Method::Connect && (200..300).contains(&code));
    let no_body =
        method == Method::Head || (100..200).contains(&code) || code == 204 || code == 304;
    if (100..200).contains(&code) || code == 204 {
        // RFC 9110 §8.6, §6.1: MUST NOT send Content-Length (other than 0,
        // which is common and harmless) or Transfer-Encoding here.
        if f.te_present || f.content_length.is_some_and(|n| n != 0) {
            return Err(HttpError::BodyNotAllowed);
        }
    }
    head.framing = if no_body || head.tunnel {
        BodyFraming::None
    } else if f.te_present {
        if f.te_chunked_final {
            BodyFraming::Chunked
        } else {
            // RFC 9112 §6.3 rule 4: a final coding other than chunked in a
            // response means read until close.
            BodyFraming::UntilClose
        }
    } else {
        match f.content_length {
            // `Content-Length: 0` stays a length: a proxy must pass it on,
            // or the client would read the answer until the close.
            Some(n) => BodyFraming::ContentLength(n),
            None => BodyFraming::UntilClose,
        }
    };
    head.keep_alive = head.framing != BodyFraming::UntilClose
        && !force_close
        && !head.tunnel
        && if http11 {
            !f.conn_close
        } else {
            f.conn_keep_alive && !f.conn_close
        };
    Ok(Status::Complete(()))
}
