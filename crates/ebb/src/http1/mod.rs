//! HTTP/1.1 message parsing and writing: a socket-free, deterministic core.
//!
//! This module turns bytes into decisions and decisions into bytes; it does
//! no I/O, keeps no clock of its own (the [`DateCache`] is given the time)
//! and never panics on input. The connection code owns the buffers and calls:
//!
//! ```text
//!   read bytes ──► parse_request_into(buf, &limits, &mut head)
//!                    Partial  → read more (the parser starts over; it is
//!                               stateless) — 408 on `timeout http-request`
//!                    Err(e)   → write_error_response(e.status()), close
//!                    Complete → head.framing says what follows at head_len:
//!                        None              next request at head_len
//!                        ContentLength(n)  n bytes of body
//!                        Chunked           ChunkedDecoder::decode(...)
//!   answer ──► ResponseWriter::new(out, status, date_cache.get())
//!                .header(..)* .finish(framing, keep_alive, head.version)
//!              ChunkedEncoder for streamed bodies
//!   proxy  ──► parse_response_into(buf, &limits, req.method, &mut resp)
//!              Err → 502; forwardable() skips the fields ebb writes again;
//!              is_interim() → forward and parse again; tunnel → splice.
//! ```
//!
//! Every head refers to its buffer by [`Span`] offsets: nothing is copied,
//! and a reused [`RequestHead`] / [`ResponseHead`] keeps its header list's
//! capacity, so a warm connection parses without allocating.
//!
//! # Conformance policy (what ebb refuses, and why)
//!
//! ebb sits in front of servers that may read a message differently from it;
//! every ambiguity it lets through is a request-smuggling or response-
//! splitting vector. So where RFC 9110/9112 leave a choice, ebb takes the
//! strict one, and every refusal closes the connection.
//!
//! Requests (status in parentheses):
//! - Start line: exactly `method SP target SP HTTP/x.y CRLF` (400); method a
//!   token (400); any `HTTP/` DIGIT `.` DIGIT, as HAProxy 2.6: 1.1 and up
//!   (`HTTP/1.2`, `HTTP/2.0`) read as 1.1 (RFC 9110 §2.5), below as 1.0;
//!   `HTTP/3` and an HTTP/0.9 line without version (400, as HAProxy's);
//!   target longer than `max_uri` (414).
//! - Target bytes: HAProxy 2.6's set, every visible ASCII byte but `#`
//!   (so also `"`, `<`, `>`, `\`, `^`, backquote, `{`, `|`, `}`, and a `%`
//!   that starts no valid escape, passed on as they came); no CTL, SP, DEL,
//!   byte from 0x80 up, nor `#` (fragments are never sent; cf.
//!   CVE-2023-45539) (400). `option accept-invalid-http-request` relaxes
//!   this and a few other rules as HAProxy's does: see the `lax` module.
//!   Origin-form (`/...`); `*` with OPTIONS only; authority-form
//!   (`host:port`) with CONNECT only and CONNECT with nothing else;
//!   absolute-form with `http`/`https` only, no userinfo, non-empty host
//!   (400).
//! - Absolute-form: the target's authority *is* the host; a Host field
//!   may be missing, even on 1.1 (HAProxy 2.6 serves it and sends none
//!   on), and one sent must be valid and name the authority (400
//!   otherwise, as HAProxy 2.6.12: compared up to the first `/`, without
//!   the scheme's default port, case aside; RFC 9112 §3.2.2 would let a
//!   proxy replace it); it goes on as sent. [`RequestHead::host`] is the
//!   effective host.
//! - Fields: names are tokens, no whitespace before the colon, values free
//!   of NUL/CR/LF/other CTL except HTAB (400); obs-fold (400); a bare CR
//!   anywhere (400); **bare LF line endings refused** (400) unless
//!   [`Limits::allow_bare_lf`] (RFC 9112 §2.2 MAY accept them; HAProxy does;
//!   ebb does not, a mismatch with an origin being the risk). An answer's
//!   head may use them (as HAProxy): [`ResponseHead::bare_lf`] says so, and
//!   the head is written again with CRLF before it goes on.
//! - Limits: head over `max_head_bytes` or more than `max_headers` fields
//!   (431).
//! - Host: exactly one on 1.1 (at most one beside an absolute target),
//!   at most one on 1.0, a valid
//!   `uri-host [":" port]` (an empty value is valid per RFC 9112 §3.2) (400).
//! - Content-Length: `1*DIGIT` only — `+5`, `-1`, `0x5`, empty, `5 5`,
//!   overflow (400). **Any repeat is refused, even an identical one**
//!   (`5, 5` or two lines) (400): RFC 9110 §8.6 allows refusing; nginx does;
//!   no real client sends it.
//! - Transfer-Encoding: HTTP/1.0 (400); with Content-Length (400) (RFC 9112
//!   §6.3 would let TE win; refusing is safer); last coding not `chunked`,
//!   or `chunked` twice, or an empty member or non-token (400); a coding
//!   other than chunked before the final chunked (`gzip, chunked`) (501),
//!   as RFC 9112 §6.1 says for codings a server does not understand
//!   (ebb decodes none). `chunked;x=1` is not `chunked`.
//! - Connection: `close` ends the connection after the answer; 1.0 stays
//!   open only with `keep-alive`. `Expect: 100-continue` counts on 1.1 only;
//!   other expectations are ignored. Upgrade counts on 1.1 with the
//!   `upgrade` Connection option only (RFC 9110 §7.8).
//!
//! Chunked bodies: see [`ChunkedDecoder`] and its module doc (hex only,
//! at most 16 digits, bounded extensions, CRLF everywhere, validated and bounded trailers without
//! Content-Length, Transfer-Encoding or Host) (400).
//!
//! Responses from origins (every refusal is 502 to the client): the same
//! field rules; status 100..=599; TE in HTTP/1.0, TE with Content-Length,
//! differing Content-Length, Content-Length/TE on 1xx or 204 (a
//! `Content-Length: 0` is tolerated) are refused. An identical repeated
//! Content-Length *is* accepted (RFC 9110 §8.6 MAY; legacy stacks do it)
//! and flagged so the proxy forwards one. Framing per RFC 9112 §6.3: HEAD,
//! 1xx, 204, 304 have no body; 101 and 2xx-to-CONNECT become a tunnel;
//! final coding chunked → chunked; another final coding or no length →
//! read until close.

mod case;
mod chunked;
mod drain;
mod error;
mod head;
mod hop;
pub mod htx;
pub(crate) mod lax;
mod request;
mod response;
mod scan;
mod word;
mod writer;

#[cfg(test)]
mod tests;

pub use case::CaseMap;
pub(crate) use chunked::hex_value;
pub use chunked::{
    ChunkHeader, ChunkedDecoder, ChunkedEncoder, ChunkedLimits, ChunkedRecoder, Decoded, CHUNK_END,
    LAST_CHUNK,
};
pub use drain::{Drain, DrainStep};
pub use error::HttpError;
pub(crate) use head::{
    eq_nocase, is_field_value, is_field_value_byte, is_token, is_valid_authority, tchar, trim_ows,
};
pub use head::{BodyFraming, HeaderSpan, Limits, Span, Version, MAX_HEADERS_CAP};
pub use hop::{connection_goes_on, find_header, forwardable, goes_on, push_forwarded_value};
pub use request::{
    complete_request_into, parse_request, parse_request_into, parse_request_lax, scheme_normalized,
    Method, RequestHead, Status, TargetForm, CONNECT_ALLOW,
};
pub(crate) use request::{target_byte, valid_target_bytes};
pub use response::{parse_response, parse_response_into, parse_response_lax, ResponseHead};
pub(crate) use writer::decimal;
pub use writer::{
    error_page, error_reason, push_decimal, reason_phrase, write_error_response, write_parse_error,
    DateCache, Fields, ResponseWriter, DATE_LEN, SERVER,
};
