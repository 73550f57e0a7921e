//! The relaxed reading of HAProxy 2.6's `option accept-invalid-http-request`
//! (frontends) and `option accept-invalid-http-response` (backends), and
//! the error position `show errors` reports.
//!
//! The strict parsers (`request`, `response`) run first, always: this
//! scanner only runs on a head they refused, so a valid head costs nothing
//! more. It reads a head as HAProxy's HTTP/1 parser reads it with the
//! option, and takes exactly what the option lets through:
//!
//! - in a field name, any byte but `:`, CR, LF and NUL (HAProxy 2.6 takes
//!   CR and NUL too, and sends them on: ebb keeps refusing those two,
//!   which split or cut a field at the next hop); an empty name is
//!   still refused;
//! - in a request target, `#` and the bytes from 0x80 up (controls, SP
//!   and DEL are still refused);
//! - a version of any of HAProxy's version bytes (`A`-`Z`, `0`-`9`, `.`,
//!   `/`): read as HTTP/1.1 when it has 8 bytes whose sixth and eighth say
//!   1.1 or more (HAProxy's test), else as HTTP/1.0;
//! - a request line without a version (HTTP/0.9): `GET` with a target
//!   only, read as `HTTP/1.0` with no field;
//! - (requests) a Host that is not the absolute target's authority, which
//!   [`super::Limits::accept_invalid`] tells `complete_request_into`.
//!
//! Everything else keeps ebb's rules: CRLF line ends, no obs-fold, field
//! values without controls, and every framing rule (Content-Length,
//! Transfer-Encoding), which the same `complete_*` functions apply.
//!
//! As in HAProxy, the first relaxed byte's offset is kept (`err_pos`), so
//! that the accepted head is captured for `show errors`; a version or an
//! HTTP/0.9 line alone is accepted without a capture, as HAProxy does.

use super::error::HttpError;
use super::head::{is_field_value_byte, is_tchar, HeaderSpan, Span};

/// HAProxy's version bytes (`HTTP_IS_VER_TOKEN`).
fn ver_byte(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'.' || b == b'/'
}

/// What a scan found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// The head is not whole yet.
    Partial,
    /// Refused at this offset (even with the option when `relaxed`).
    Bad(usize),
    /// A head: its start line's parts and its length.
    Head(Line),
}

/// The start line and the head's extent.
#[derive(Debug, PartialEq, Eq, Default)]
pub(crate) struct Line {
    /// Request: method, target. Response: version, status (3 digits),
    /// reason.
    pub a: Span,
    pub b: Span,
    pub c: Span,
    /// Read as HTTP/1.1 (else HTTP/1.0).
    pub v11: bool,
    /// Bytes of the head, empty line included.
    pub head_len: usize,
    /// The first byte only the option lets through (HAProxy's `err_pos`).
    pub err_pos: Option<usize>,
}

fn span(a: usize, b: usize) -> Span {
    Span {
        start: a as u32,
        end: b as u32,
    }
}

/// HAProxy's reading of a version: 1.1 and up when it has 8 bytes whose
/// sixth is above `1`, or `1` with an eighth of `1` or more.
fn reads_as_11(v: &[u8]) -> bool {
    v.len() == 8 && (v[5] > b'1' || v[5] == b'1' && v[7] >= b'1')
}

/// `HTTP/` DIGIT `.` DIGIT.
fn strict_version(v: &[u8]) -> bool {
    matches!(v, [b'H', b'T', b'T', b'P', b'/', a, b'.', b] if a.is_ascii_digit() && b.is_ascii_digit())
}

/// Skips the empty lines a message may follow (CRLF each).
fn skip_empty_lines(buf: &[u8]) -> Result<usize, Scan> {
    let mut i = 0;
    loop {
        match buf.get(i) {
            None => return Err(Scan::Partial),
            Some(b'\r') => match buf.get(i + 1) {
                None => return Err(Scan::Partial),
                Some(b'\n') => i += 2,
                Some(_) => return Err(Scan::Bad(i + 1)),
            },
            Some(b'\n') => return Err(Scan::Bad(i)),
            Some(_) => return Ok(i),
        }
    }
}

/// The end of a line at `i` (CR then LF): the offset after it.
fn eol(buf: &[u8], i: usize) -> Result<usize, Scan> {
    match (buf.get(i), buf.get(i + 1)) {
        (None, _) | (Some(b'\r'), None) => Err(Scan::Partial),
        (Some(b'\r'), Some(b'\n')) => Ok(i + 2),
        (Some(b'\r'), Some(_)) => Err(Scan::Bad(i + 1)),
        _ => Err(Scan::Bad(i)),
    }
}

/// Where the field-value bytes (a value, a reason) from `i` end: at a CR.
fn text_end(buf: &[u8], mut i: usize) -> Result<usize, Scan> {
    loop {
        match buf.get(i) {
            None => return Err(Scan::Partial),
            Some(b'\r') => break,
            Some(&b) if is_field_value_byte(b) => i += 1,
            Some(_) => return Err(Scan::Bad(i)),
        }
    }
    Ok(i)
}

/// Reads the field lines from `i` to the empty line; `relaxed` lets
/// HAProxy's option's name bytes through, noting the first in `err`.
fn fields(
    buf: &[u8],
    mut i: usize,
    relaxed: bool,
    err: &mut Option<usize>,
    out: &mut Vec<HeaderSpan>,
) -> Result<usize, Scan> {
    out.clear();
    loop {
        match buf.get(i) {
            None => return Err(Scan::Partial),
            Some(b'\r') => return eol(buf, i),
            Some(b' ' | b'\t') if !out.is_empty() => return Err(Scan::Bad(i)), // obs-fold
            _ => {}
        }
        let ns = i;
        loop {
            let Some(&b) = buf.get(i) else {
                return Err(Scan::Partial);
            };
            if b == b':' {
                break;
            }
            if !is_tchar(b) {
                if !relaxed || matches!(b, b'\r' | b'\n' | 0) {
                    return Err(Scan::Bad(i));
                }
                err.get_or_insert(i);
            }
            i += 1;
        }
        if i == ns {
            return Err(Scan::Bad(i));
        }
        let name = span(ns, i);
        i += 1;
        while matches!(buf.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        let vs = i;
        i = text_end(buf, i)?;
        let mut ve = i;
        while ve > vs && matches!(buf[ve - 1], b' ' | b'\t') {
            ve -= 1;
        }
        out.push(HeaderSpan {
            name,
            value: span(vs, ve),
        });
        i = eol(buf, i)?;
    }
}

/// Scans a head as HAProxy 2.6 reads it, a request's or (`response`) an
/// answer's; `relaxed`: with `option accept-invalid-http-request` or
/// `option accept-invalid-http-response`. `out` gets its fields.
pub(crate) fn scan(buf: &[u8], response: bool, relaxed: bool, out: &mut Vec<HeaderSpan>) -> Scan {
    let r = if response {
        scan_response(buf, relaxed, out)
    } else {
        scan_request(buf, relaxed, out)
    };
    r.map_or_else(|s| s, Scan::Head)
}

/// Where the run of bytes of `class` from `i` ends.
fn run_end(buf: &[u8], mut i: usize, class: impl Fn(u8) -> bool) -> usize {
    while buf.get(i).is_some_and(|&b| class(b)) {
        i += 1;
    }
    i
}

/// A request head (see [`scan`]).
fn scan_request(buf: &[u8], relaxed: bool, out: &mut Vec<HeaderSpan>) -> Result<Line, Scan> {
    let mut err = None;
    let ms = skip_empty_lines(buf)?;
    let mut i = run_end(buf, ms, is_tchar);
    let me = i;
    match buf.get(i) {
        None => return Err(Scan::Partial),
        Some(b' ') if me > ms => i += 1,
        // No method, or `GET` alone: HTTP/0.9 needs a target.
        Some(_) => return Err(Scan::Bad(i)),
    }
    let ts = i;
    loop {
        match buf.get(i) {
            None => return Err(Scan::Partial),
            Some(b' ' | b'\r' | b'\n') => break,
            Some(&b) if b > b' ' && b < 0x7f && b != b'#' => {}
            Some(&b) if relaxed && (b == b'#' || b >= 0x80) => {
                err.get_or_insert(i);
            }
            Some(_) => return Err(Scan::Bad(i)),
        }
        i += 1;
    }
    let te = i;
    if ts == te {
        return Err(Scan::Bad(i));
    }
    let line = |c: Span, v11, head_len, err_pos| Line {
        a: span(ms, me),
        b: span(ts, te),
        c,
        v11,
        head_len,
        err_pos,
    };
    if buf[i] == b' ' {
        i += 1;
    }
    let vs = i;
    let i = run_end(buf, vs, ver_byte);
    let v = &buf[vs..i];
    match buf.get(i) {
        None => return Err(Scan::Partial),
        Some(b'\r') => {}
        Some(_) => return Err(Scan::Bad(i)),
    }
    if v.is_empty() {
        // HTTP/0.9: `GET` and a target, the head ends with its line.
        let end = eol(buf, i)?;
        if !relaxed || &buf[ms..me] != b"GET" {
            return Err(Scan::Bad(vs));
        }
        out.clear();
        return Ok(line(Span::default(), false, end, err));
    }
    if !relaxed && !strict_version(v) {
        return Err(Scan::Bad(vs));
    }
    let v11 = reads_as_11(v);
    let c = span(vs, i);
    let i = eol(buf, i)?;
    let end = fields(buf, i, relaxed, &mut err, out)?;
    Ok(line(c, v11, end, err))
}

/// An answer's head (see [`scan`]): its status has 3 digits, its reason
/// field-value bytes.
fn scan_response(buf: &[u8], relaxed: bool, out: &mut Vec<HeaderSpan>) -> Result<Line, Scan> {
    let mut err = None;
    let vs = skip_empty_lines(buf)?;
    let mut i = run_end(buf, vs, ver_byte);
    let v = &buf[vs..i];
    match buf.get(i) {
        None => return Err(Scan::Partial),
        // HAProxy's answer starts with a token byte (`/` is none).
        Some(b' ') if v.first().is_some_and(|&b| b != b'/') => {}
        Some(_) => return Err(Scan::Bad(i)),
    }
    // HAProxy's strict test: 8 bytes, `/` DIGIT `.` DIGIT at the end.
    let haproxy_strict = v.len() == 8
        && v[4] == b'/'
        && v[5].is_ascii_digit()
        && v[6] == b'.'
        && v[7].is_ascii_digit();
    if !relaxed && !haproxy_strict {
        return Err(Scan::Bad(vs));
    }
    let ve = i;
    i += 1;
    let cs = i;
    i = run_end(buf, cs, |b| b.is_ascii_digit());
    match buf.get(i) {
        None => return Err(Scan::Partial),
        Some(b' ' | b'\r') if i - cs == 3 => {}
        Some(_) => return Err(Scan::Bad(i)),
    }
    let ce = i;
    if buf[i] == b' ' {
        i += 1;
    }
    let rs = i;
    i = text_end(buf, i)?;
    let re = i;
    let i = eol(buf, i)?;
    let end = fields(buf, i, relaxed, &mut err, out)?;
    Ok(Line {
        a: span(vs, ve),
        b: span(cs, ce),
        c: span(rs, re),
        v11: reads_as_11(v),
        head_len: end,
        err_pos: err,
    })
}

/// Where HAProxy's parser would stop on a head ebb refused with `e` (the
/// offset `show errors` reports): the scanner's refusal; for a head whose
/// syntax passes, the value of the field HAProxy refuses as it reads it
/// (a Content-Length not plain digits or the second one, a request's
/// Transfer-Encoding with a coding after `chunked`, the second Host, a Host that
/// is not the absolute target's authority), else the head's
/// end, as HAProxy reports its parser's last position then (a framing
/// rule, a broken body); the end of what came for a head cut short.
pub(crate) fn error_position(buf: &[u8], response: bool, e: HttpError) -> usize {
    let mut fields = Vec::new();
    let l = match scan(buf, response, false, &mut fields) {
        Scan::Bad(p) => return p,
        Scan::Partial => return buf.len(),
        Scan::Head(l) => l,
    };
    let values = |name: &'static [u8]| {
        fields
            .iter()
            .filter(move |f| f.name.get(buf).eq_ignore_ascii_case(name))
            .map(|f| f.value)
    };
    let at = match e {
        HttpError::BadContentLength | HttpError::ConflictingContentLength => {
            values(b"content-length")
                .find(|v| !v.get(buf).iter().all(u8::is_ascii_digit) || v.is_empty())
                .or_else(|| values(b"content-length").nth(1))
        }
        // A request's coding after `chunked`, or `chunked` twice: HAProxy
        // refuses the value as it reads it (without `chunked`, at the end).
        HttpError::BadTransferEncoding | HttpError::ChunkedNotFinal if !response => {
            values(b"transfer-encoding").find(|v| {
                let v = v.get(buf);
                v.windows(7).any(|w| w.eq_ignore_ascii_case(b"chunked"))
            })
        }
        HttpError::DuplicateHost => values(b"host").nth(1),
        HttpError::BadHost => values(b"host").next(),
        _ => None,
    };
    at.map_or(l.head_len, |v| v.start as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(b: &[u8], relaxed: bool) -> Scan {
        scan(b, false, relaxed, &mut Vec::new())
    }

    /// The head `b` is, with the option.
    fn head(b: &[u8]) -> Line {
        match req(b, true) {
            Scan::Head(l) => l,
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn relaxations_and_their_positions() {
        let r = b"GET /a#b HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n";
        assert_eq!(req(r, false), Scan::Bad(6));
        let l = head(r);
        assert_eq!((l.err_pos, l.head_len, l.v11), (Some(6), r.len(), true));
        // CR, NUL in a name, an empty name: refused all the same.
        for bad in [
            &b"GET / HTTP/1.1\r\nA\rb: 1\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nA\0b: 1\r\n\r\n",
            b"GET / HTTP/1.1\r\n: 1\r\n\r\n",
            b"GET /\x01 HTTP/1.1\r\n\r\n",
            b"POST /a\r\n",
            b" / HTTP/1.1\r\n\r\n",
            b"GET\r\n",
        ] {
            assert!(matches!(req(bad, true), Scan::Bad(_)), "{bad:?}");
        }
        let l = head(b"GET /a\r\nHost: x\r\n\r\n");
        assert_eq!((l.head_len, l.v11, l.err_pos), (8, false, None));
        let l = head(b"GET /a FOO\r\n\r\n");
        assert_eq!((l.v11, l.err_pos), (false, None));
        assert_eq!(req(b"GET /a FOO\r\n\r\n", false), Scan::Bad(7));
        assert_eq!(req(b"GET /a HTTP/1.1\r\nHo", true), Scan::Partial);
        let resp = b"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(error_position(resp, true, HttpError::BadHeaderName), 20);
        // HAProxy's positions (haproxy 2.6.12's `show errors`).
        let two = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab";
        assert_eq!(error_position(two, false, HttpError::BadContentLength), 60);
        let host = b"GET http://a/ HTTP/1.1\r\nHost: b\r\n\r\n";
        assert_eq!(error_position(host, false, HttpError::BadHost), 30);
        let te = b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n";
        assert_eq!(error_position(te, false, HttpError::ChunkedNotFinal), 44);
        let te = b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n";
        assert_eq!(
            error_position(te, false, HttpError::ChunkedNotFinal),
            te.len()
        );
    }
}
