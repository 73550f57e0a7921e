//! The sizes HAProxy 2.6 counts for an HTTP message (its HTX size): what
//! `%B` and `%U` log and the stats' `bin`/`bout` add up in HTTP mode,
//! whatever the wire carried.
//!
//! A head counts 20 for its start line's record plus the length of the
//! line's three parts (method, target and version; version, status and
//! reason), each field's name and value, and 1 for its end. HAProxy's
//! HTTP/1 parser removes the `close` and `keep-alive` options of a
//! `Connection` field (the field with them, when nothing else is left):
//! they are not counted. A body counts its data (de-chunked); a chunked
//! message adds 1 for its end and its trailer fields' names and values
//! ([`crate::http1::ChunkedDecoder::htx_tail`]).
//!
//! The head's size is summed over the field spans the parser made (no
//! pass over the bytes); the body's as it is forwarded.

use super::head::eq_nocase;
use super::HeaderSpan;

/// The HTX size of a head: `start` the length of its start line's three
/// parts, `headers` its fields in `buf`.
pub fn head_size(start: usize, buf: &[u8], headers: &[HeaderSpan]) -> u64 {
    let mut n = 20 + start + 1;
    for f in headers {
        // On every request and answer: lengths from the spans alone; only
        // a 10-byte name is read (it may be `Connection`).
        let name_len = f.name.len();
        if name_len == 10 && eq_nocase(f.name.get(buf), b"connection") {
            n += connection_size(f.value.get(buf));
        } else {
            n += name_len + f.value.len();
        }
    }
    n as u64
}

/// What a `Connection` field counts once its `close` and `keep-alive`
/// options are gone: its name and the other options joined by `,`; 0 when
/// none is left (the field is dropped).
fn connection_size(value: &[u8]) -> usize {
    // The usual values first, a word compare each.
    if eq_nocase(value, b"keep-alive") || eq_nocase(value, b"close") {
        return 0;
    }
    let mut kept = 0;
    let mut words = 0;
    let mut dropped = false;
    for w in value.split(|&c| c == b',') {
        let w = w.trim_ascii();
        if w.is_empty() {
            continue;
        }
        if w.eq_ignore_ascii_case(b"close") || w.eq_ignore_ascii_case(b"keep-alive") {
            dropped = true;
            continue;
        }
        kept += w.len();
        words += 1;
    }
    match (dropped, words) {
        (_, 0) => 0,
        // Nothing removed: the value as it came.
        (false, _) => 10 + value.len(),
        (true, n) => 10 + kept + n - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::{parse_request, parse_response, Limits, Method, Status};

    #[test]
    fn heads_count_as_haproxy_counts_them() {
        // Sizes HAProxy 2.6 logged (%B, %U) for these heads.
        let res = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n";
        let Ok(Status::Complete(r)) = parse_response(res, &Limits::default(), Method::Get) else {
            panic!()
        };
        let start = 8 + 3 + r.reason.get(res).len();
        assert_eq!(head_size(start, res, &r.headers), 49);
        let req = b"GET /fixed HTTP/1.1\r\nHost: 127.0.0.1:19222\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";
        let Ok(Status::Complete(q)) = parse_request(req, &Limits::default()) else {
            panic!()
        };
        let start = q.method_span.get(req).len() + q.target.get(req).len() + 8;
        assert_eq!(head_size(start, req, &q.headers), 87);
    }

    #[test]
    fn connection_keeps_its_other_options() {
        assert_eq!(connection_size(b"close"), 0);
        assert_eq!(connection_size(b"Keep-Alive"), 0);
        assert_eq!(connection_size(b"upgrade"), 17);
        assert_eq!(connection_size(b"close, upgrade"), 17);
        assert_eq!(connection_size(b"te, close, upgrade"), 20);
    }
}
