//! parse_request never panics; a complete head has every span inside the
//! head, framing consistent with its fields, and any shorter prefix of it is
//! Partial. The input is walked as a pipeline of requests with their bodies.
//! A head refused is read again as `option accept-invalid-http-request`
//! reads it: never a panic, and a head taken has its spans inside it, no
//! CR, LF, NUL or colon in a field name, and its relaxed byte inside it.
#![no_main]

use ebb::http1::{
    parse_request, parse_request_into, parse_request_lax, BodyFraming, ChunkedDecoder, Limits,
    Method, RequestHead, Span, Status, Version,
};
use libfuzzer_sys::fuzz_target;

fn limits_from(cfg: u8) -> Limits {
    Limits {
        allow_bare_lf: cfg & 1 != 0,
        max_uri: if cfg & 2 != 0 { 24 } else { 8 * 1024 },
        max_headers: if cfg & 4 != 0 { 4 } else { 101 },
        max_head_bytes: if cfg & 8 != 0 { 128 } else { 15 * 1024 },
        ..Limits::default()
    }
}

/// The fields HAProxy counts against `tune.http.maxhdr`: not a Connection
/// field naming only close or keep-alive, nor a Host repeating the first
/// Host's value.
fn counted(buf: &[u8], h: &RequestHead) -> usize {
    let mut first_host: Option<&[u8]> = None;
    let mut n = 0;
    for f in &h.headers {
        let (name, value) = (f.name.get(buf), f.value.get(buf));
        if name.eq_ignore_ascii_case(b"connection") {
            let only_close_or_ka = value
                .split(|&b| b == b',')
                .map(|t| t.trim_ascii())
                .filter(|t| !t.is_empty())
                .all(|t| t.eq_ignore_ascii_case(b"close") || t.eq_ignore_ascii_case(b"keep-alive"));
            if only_close_or_ka {
                continue;
            }
        } else if name.eq_ignore_ascii_case(b"host") {
            match first_host {
                Some(v) if v.eq_ignore_ascii_case(value) => continue,
                Some(_) => {}
                None => first_host = Some(value),
            }
        }
        n += 1;
    }
    n
}

fn check(buf: &[u8], h: &RequestHead, limits: &Limits) {
    assert!(h.head_len <= buf.len() && h.head_len <= limits.max_head_bytes);
    let inside = |s: Span| s.start <= s.end && (s.end as usize) <= h.head_len;
    assert!(inside(h.method_span) && inside(h.target) && inside(h.path));
    assert!(h.target.len() <= limits.max_uri);
    assert!(counted(buf, h) <= limits.max_headers);
    for f in &h.headers {
        assert!(inside(f.name) && inside(f.value));
        assert!(!f.name.get(buf).is_empty());
    }
    if let Some(host) = h.host {
        assert!(inside(host));
    } else {
        assert_eq!(h.version, Version::Http10);
    }
    if let Some(u) = h.upgrade {
        assert!(inside(u));
    }
    let te = h.header(buf, "transfer-encoding").is_some();
    let cl = h.header(buf, "content-length").is_some();
    if h.method == Method::Connect {
        // A CONNECT has no content whatever its fields say (RFC 9110
        // §9.3.6): the bytes after its head are the tunnel's.
        assert_eq!(h.framing, BodyFraming::None);
        return check_prefixes(buf, h, limits);
    }
    match h.framing {
        // Transfer-Encoding wins over Content-Length, in HTTP/1.0 too (as
        // HAProxy; the connection closes after such an exchange).
        BodyFraming::Chunked => assert!(te),
        BodyFraming::ContentLength(n) => assert!(cl && !te && n > 0),
        BodyFraming::None => assert!(!te),
        BodyFraming::UntilClose => panic!("a request framed until close"),
    }
    check_prefixes(buf, h, limits);
}

/// A head `parse_request_lax` took.
fn check_lax(buf: &[u8], h: &RequestHead, err: Option<usize>) {
    assert!(h.head_len <= buf.len());
    let inside = |s: Span| s.start <= s.end && (s.end as usize) <= h.head_len;
    assert!(inside(h.method_span) && inside(h.target) && inside(h.path));
    for f in &h.headers {
        assert!(inside(f.name) && inside(f.value));
        let name = f.name.get(buf);
        assert!(!name.is_empty() && !name.iter().any(|b| b"\r\n\0:".contains(b)));
    }
    assert!(err.is_none_or(|p| p < h.head_len));
    assert_ne!(h.framing, BodyFraming::UntilClose);
}

fn check_prefixes(buf: &[u8], h: &RequestHead, limits: &Limits) {
    if !limits.allow_bare_lf {
        let head = &buf[..h.head_len];
        for (i, &b) in head.iter().enumerate() {
            if b == b'\n' {
                assert!(i > 0 && head[i - 1] == b'\r', "bare LF accepted");
            }
        }
    }
    // Every shorter prefix is still incomplete (spot-check two of them).
    for cut in [h.head_len.saturating_sub(1), h.head_len / 2] {
        if cut < h.head_len {
            assert!(matches!(
                parse_request(&buf[..cut], limits),
                Ok(Status::Partial)
            ));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, buf)) = data.split_first() else {
        return;
    };
    let limits = limits_from(cfg);
    let mut head = RequestHead::default();
    let mut pos = 0;
    for _ in 0..32 {
        let rest = &buf[pos..];
        match parse_request_into(rest, &limits, &mut head) {
            Ok(Status::Complete(())) => {
                check(rest, &head, &limits);
                pos += head.head_len;
            }
            Ok(Status::Partial) => return,
            Err(e) => {
                assert!(matches!(e.status(), 400 | 414 | 422 | 431 | 501 | 505));
                if let Ok(Status::Complete(err)) = parse_request_lax(rest, &limits, &mut head) {
                    check_lax(rest, &head, err);
                }
                return;
            }
        }
        match head.framing {
            BodyFraming::ContentLength(n) => {
                pos += usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min(buf.len() - pos)
            }
            BodyFraming::Chunked => {
                let mut d = ChunkedDecoder::default();
                let mut out = Vec::new();
                match d.decode_to_vec(&buf[pos..], &mut out) {
                    Ok((used, true)) => pos += used,
                    _ => return,
                }
            }
            BodyFraming::None | BodyFraming::UntilClose => {}
        }
        if pos >= buf.len() {
            return;
        }
    }
});
