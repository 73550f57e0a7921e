//! The one error type of the H1 layer.
//!
//! Every way a message can be refused is a variant, so tests can say *which*
//! rule fired, and the connection code gets both the status to answer with
//! ([`HttpError::status`]) and a short phrase for the log line
//! ([`HttpError::reason`]). The enum is `Copy` and carries no data: an error
//! costs nothing to return and nothing to keep in a stream's state.
//!
//! Errors from [`parse_response`](super::parse_response) (an origin's answer)
//! use the same variants; the proxy answers those with 502 whatever
//! [`HttpError::status`] says, see [`HttpError::PROXY_STATUS`].

use core::fmt;

/// Why a message was refused. See the module doc.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HttpError {
    // --- start line -------------------------------------------------------
    /// The request line is not `method SP request-target SP HTTP-version CRLF`
    /// (e.g. two spaces, missing parts, lower-case `http/1.1`).
    BadRequestLine,
    /// The method is not a token.
    BadMethod,
    /// The request-target has a control, DEL, non-ASCII byte or a `#`,
    /// userinfo, an unsupported scheme, or a form the method forbids.
    BadTarget,
    /// The request-target is longer than [`Limits::max_uri`](super::Limits).
    UriTooLong,
    /// `HTTP/x` (one digit), or an HTTP/0.9 request line (`HTTP/x.y`
    /// requests are served as 1.1 or 1.0, as HAProxy serves them; in a
    /// response, any version other than 1.0 and 1.1). A request gets 400,
    /// as from HAProxy 2.6.
    UnsupportedVersion,
    /// The status line of a response is malformed, or its code is outside
    /// 100..=599.
    BadStatusLine,

    // --- field lines ------------------------------------------------------
    /// A field name with a non-token byte, or whitespace before the colon.
    BadHeaderName,
    /// A field value with a control byte (NUL, CR, DEL, ...).
    BadHeaderValue,
    /// A field line that starts with whitespace (obs-fold, RFC 9112 §5.2).
    ObsFold,
    /// A CR not followed by LF anywhere in the head.
    BareCr,
    /// A line ended by LF alone while [`Limits::allow_bare_lf`](super::Limits)
    /// is off.
    BareLf,
    /// The head is larger than [`Limits::max_head_bytes`](super::Limits).
    HeadTooLarge,
    /// More field lines than [`Limits::max_headers`](super::Limits).
    TooManyHeaders,

    // --- host -------------------------------------------------------------
    /// An HTTP/1.1 request without Host.
    MissingHost,
    /// More than one Host field line.
    DuplicateHost,
    /// A Host value that is not `uri-host [ ":" port ]`, or that does not
    /// name an absolute-form target's authority.
    BadHost,

    // --- framing ----------------------------------------------------------
    /// Content-Length is not `1*DIGIT` (sign, hex, empty, list, overflow).
    BadContentLength,
    /// Several Content-Length values (lines or list members) that are not
    /// all accepted as identical.
    ConflictingContentLength,
    /// Both Content-Length and Transfer-Encoding.
    ContentLengthWithTransferEncoding,
    /// Transfer-Encoding in an HTTP/1.0 message.
    TransferEncodingInHttp10,
    /// Transfer-Encoding whose last coding is not `chunked`, or that names
    /// `chunked` twice (RFC 9112 §6.3: 400 for a request).
    ChunkedNotFinal,
    /// Transfer-Encoding that is not a list of transfer-codings (an empty
    /// member, a non-token byte).
    BadTransferEncoding,
    /// A transfer-coding other than `chunked` before the final `chunked`
    /// (e.g. `gzip, chunked`): ebb decodes none, RFC 9112 §6.1 says 501.
    UnknownTransferCoding,
    /// A 1xx or 204 response that declares a body.
    BodyNotAllowed,
    /// An upgrade to `websocket` without exactly one valid
    /// `Sec-WebSocket-Key` and `Sec-WebSocket-Version` (RFC 6455 §4.1).
    BadWebSocketHandshake,
    /// A 101 without `Upgrade` or without `upgrade` in `Connection`
    /// (RFC 9110 §7.8: the server names the protocol it switches to).
    BadSwitch,

    // --- chunked body -----------------------------------------------------
    /// A chunk-size line that is not `1*HEXDIG [ chunk-ext ] CRLF`.
    BadChunkSize,
    /// A chunk size over 16 hex digits (more than u64 can hold).
    ChunkSizeOverflow,
    /// A chunk extension longer than the per-chunk or per-body limit.
    ChunkExtTooLong,
    /// Chunk data not followed by CRLF.
    BadChunkEnd,
    /// A malformed trailer field line.
    BadTrailer,
    /// A framing or routing field (Content-Length, Transfer-Encoding, Host)
    /// sent as a trailer.
    ForbiddenTrailer,
    /// The trailer section is larger than its limit.
    TrailerTooLarge,
}

impl HttpError {
    /// What a proxy answers its client when an origin's *response* fails to
    /// parse, whatever the variant: 502 Bad Gateway (RFC 9110 §15.6.3).
    pub const PROXY_STATUS: u16 = 502;

    /// The status to answer a *request* refused for this reason with.
    pub const fn status(self) -> u16 {
        match self {
            HttpError::UriTooLong => 414,
            HttpError::HeadTooLarge => 431,
            // HAProxy's answer past `tune.http.maxhdr`.
            HttpError::TooManyHeaders => 400,
            HttpError::UnknownTransferCoding => 422,
            // HAProxy 2.6's answer to `HTTP/3`, an HTTP/0.9 line, a LF in
            // the target: a bad request (its parser knows no 505).
            HttpError::UnsupportedVersion => 400,
            _ => 400,
        }
    }

    /// A short phrase for the log line.
    pub const fn reason(self) -> &'static str {
        match self {
            HttpError::BadRequestLine => "malformed request line",
            HttpError::BadMethod => "invalid method token",
            HttpError::BadTarget => "invalid request-target",
            HttpError::UriTooLong => "request-target too long",
            HttpError::UnsupportedVersion => "unsupported HTTP version",
            HttpError::BadStatusLine => "malformed status line",
            HttpError::BadHeaderName => "invalid field name",
            HttpError::BadHeaderValue => "invalid field value",
            HttpError::ObsFold => "obsolete line folding",
            HttpError::BareCr => "bare CR",
            HttpError::BareLf => "bare LF line ending",
            HttpError::HeadTooLarge => "header section too large",
            HttpError::TooManyHeaders => "too many header fields",
            HttpError::MissingHost => "missing Host",
            HttpError::DuplicateHost => "duplicate Host",
            HttpError::BadHost => "invalid Host",
            HttpError::BadContentLength => "invalid Content-Length",
            HttpError::ConflictingContentLength => "conflicting Content-Length",
            HttpError::ContentLengthWithTransferEncoding => {
                "both Content-Length and Transfer-Encoding"
            }
            HttpError::TransferEncodingInHttp10 => "Transfer-Encoding in HTTP/1.0",
            HttpError::ChunkedNotFinal => "chunked is not the final transfer-coding",
            HttpError::BadTransferEncoding => "invalid Transfer-Encoding",
            HttpError::UnknownTransferCoding => "unsupported transfer-coding",
            HttpError::BodyNotAllowed => "body in a 1xx or 204 response",
            HttpError::BadWebSocketHandshake => "invalid websocket handshake",
            HttpError::BadSwitch => "101 without Upgrade",
            HttpError::BadChunkSize => "invalid chunk size",
            HttpError::ChunkSizeOverflow => "chunk size overflow",
            HttpError::ChunkExtTooLong => "chunk extension too long",
            HttpError::BadChunkEnd => "missing CRLF after chunk data",
            HttpError::BadTrailer => "invalid trailer field",
            HttpError::ForbiddenTrailer => "forbidden trailer field",
            HttpError::TrailerTooLarge => "trailer section too large",
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.reason(), self.status())
    }
}

impl std::error::Error for HttpError {}
