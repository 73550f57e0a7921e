//! parse_response never panics; a complete head has its spans inside the
//! head, a status in 100..=599 and the framing RFC 9112 §6.3 gives it.
#![no_main]

use ebb::http1::{
    parse_response, parse_response_lax, BodyFraming, Limits, Method, ResponseHead, Span, Status,
};
use libfuzzer_sys::fuzz_target;

fn check(buf: &[u8], h: &ResponseHead, method: Method, limits: &Limits) {
    assert!(h.head_len <= buf.len() && h.head_len <= limits.max_head_bytes);
    let inside = |s: Span| s.start <= s.end && (s.end as usize) <= h.head_len;
    assert!(inside(h.reason));
    let mut counted = 0;
    for f in &h.headers {
        assert!(inside(f.name) && inside(f.value));
        // HAProxy does not count a Connection field naming only close or
        // keep-alive against tune.http.maxhdr.
        let plain_connection = f.name.get(buf).eq_ignore_ascii_case(b"connection")
            && f.value
                .get(buf)
                .split(|&b| b == b',')
                .map(|t| t.trim_ascii())
                .filter(|t| !t.is_empty())
                .all(|t| t.eq_ignore_ascii_case(b"close") || t.eq_ignore_ascii_case(b"keep-alive"));
        counted += usize::from(!plain_connection);
    }
    assert!(counted <= limits.max_headers);
    assert!((100..=599).contains(&h.status));
    let no_body = method == Method::Head
        || (100..200).contains(&h.status)
        || h.status == 204
        || h.status == 304
        || h.tunnel;
    if no_body {
        assert_eq!(h.framing, BodyFraming::None);
    }
    let te = h.header(buf, "transfer-encoding").is_some();
    let cl = h.header(buf, "content-length").is_some();
    // Transfer-Encoding wins over Content-Length (as HAProxy).
    if te && cl && !no_body {
        assert_eq!(h.framing, BodyFraming::Chunked);
    }
    match h.framing {
        BodyFraming::Chunked => assert!(te),
        // `Content-Length: 0` stays a length (a proxy passes it on).
        BodyFraming::ContentLength(_) => assert!(cl),
        BodyFraming::UntilClose => assert!(!h.keep_alive),
        BodyFraming::None => {}
    }
    for cut in [h.head_len.saturating_sub(1), h.head_len / 2] {
        if cut < h.head_len {
            assert!(matches!(
                parse_response(&buf[..cut], limits, method),
                Ok(Status::Partial)
            ));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, buf)) = data.split_first() else {
        return;
    };
    let method = match cfg & 3 {
        0 => Method::Get,
        1 => Method::Head,
        2 => Method::Connect,
        _ => Method::Post,
    };
    let limits = Limits {
        allow_bare_lf: cfg & 4 != 0,
        max_headers: if cfg & 8 != 0 { 4 } else { 101 },
        max_head_bytes: if cfg & 16 != 0 { 128 } else { 15 * 1024 },
        ..Limits::default()
    };
    // Interim responses are followed by the final one.
    let mut pos = 0;
    for _ in 0..8 {
        match parse_response(&buf[pos..], &limits, method) {
            Ok(Status::Complete(h)) => {
                check(&buf[pos..], &h, method, &limits);
                if !h.is_interim() {
                    return;
                }
                pos += h.head_len;
            }
            Ok(Status::Partial) => return,
            Err(_) => {
                // As `option accept-invalid-http-response` reads it again
                // (and, without it, HAProxy's strict version test).
                let mut h = ResponseHead::default();
                let relaxed = cfg & 32 != 0;
                let rest = &buf[pos..];
                if let Ok(Status::Complete(err)) =
                    parse_response_lax(rest, &limits, method, &mut h, relaxed)
                {
                    let inside = |s: Span| (s.end as usize) <= h.head_len && s.start <= s.end;
                    assert!(h.head_len <= rest.len() && inside(h.reason));
                    assert!(err.is_none_or(|p| p < h.head_len) && (relaxed || err.is_none()));
                    for f in &h.headers {
                        assert!(inside(f.name) && inside(f.value));
                        assert!(!f.name.get(rest).iter().any(|b| b"\r\n\0:".contains(b)));
                    }
                }
                return;
            }
        }
    }
});
