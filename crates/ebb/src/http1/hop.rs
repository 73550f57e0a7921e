//! Hop-by-hop fields (RFC 9110 §7.6.1): what a proxy must not forward.
//!
//! The fixed list — Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
//! Transfer-Encoding, Upgrade — plus every field named as an option in a
//! Connection field of the same message. The proxy writes the framing it
//! chose itself (Content-Length or `Transfer-Encoding: chunked`), its own
//! Connection, and, for an upgrade it lets through, `Connection: upgrade`
//! with the Upgrade value again.
//!
//! All checks work on the spans of a parsed head and allocate nothing; a
//! head with n fields and c Connection options costs O(n·c) comparisons,
//! both small.

use super::head::{eq_nocase, for_each_member, name_is, HeaderSpan};

/// The fields that are hop-by-hop whatever Connection says (lower case).
pub const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// True when `name` is on the fixed hop-by-hop list (case-insensitive).
/// Every field of a forwarded head asks this: the length picks the one or
/// two names to compare (most fields have a length none of them has).
#[inline(always)]
pub fn is_hop_by_hop_name(name: &[u8]) -> bool {
    match name.len() {
        2 => eq_nocase(name, b"te"),
        7 => eq_nocase(name, b"trailer") || eq_nocase(name, b"upgrade"),
        10 => eq_nocase(name, b"connection") || eq_nocase(name, b"keep-alive"),
        16 => eq_nocase(name, b"proxy-connection"),
        17 => eq_nocase(name, b"transfer-encoding"),
        _ => false,
    }
}

/// True when `name` is listed as an option in a Connection field of
/// `headers`.
pub fn named_in_connection(buf: &[u8], headers: &[HeaderSpan], name: &[u8]) -> bool {
    let mut found = false;
    for h in headers {
        if !eq_nocase(h.name.get(buf), b"connection") {
            continue;
        }
        for_each_member(h.value.get(buf), |m, _| {
            if !m.is_empty() && m.eq_ignore_ascii_case(name) {
                found = true;
            }
        });
        if found {
            return true;
        }
    }
    false
}

/// True when a field named `name` must not be forwarded.
pub fn is_hop_by_hop(buf: &[u8], headers: &[HeaderSpan], name: &[u8]) -> bool {
    is_hop_by_hop_name(name) || named_in_connection(buf, headers, name)
}

/// The fields of a head a proxy forwards, in order.
///
/// One look at the Connection fields first: when they name nothing beyond
/// the fixed list and `close` (the usual head), a field costs the fixed
/// list's length dispatch (and a `close` comparison when one was named);
/// otherwise each field is also looked up among the Connection options.
pub fn forwardable<'h>(
    buf: &'h [u8],
    headers: &'h [HeaderSpan],
) -> impl Iterator<Item = &'h HeaderSpan> + 'h {
    let (mut close, mut other) = (false, false);
    for h in headers {
        if !eq_nocase(h.name.get(buf), b"connection") {
            continue;
        }
        let value = h.value.get(buf);
        if eq_nocase(value, b"keep-alive") {
            continue;
        }
        for_each_member(value, |m, _| {
            if eq_nocase(m, b"close") {
                close = true;
            } else {
                other |= !m.is_empty() && !is_hop_by_hop_name(m);
            }
        });
    }
    headers.iter().filter(move |h| {
        let name = h.name.get(buf);
        let dropped = is_hop_by_hop_name(name)
            || (close && eq_nocase(name, b"close"))
            || (other && named_in_connection(buf, headers, name));
        !dropped
    })
}

/// The value of the first field named `name` (ASCII case-insensitive).
pub fn find_header<'b>(buf: &'b [u8], headers: &[HeaderSpan], name: &str) -> Option<&'b [u8]> {
    headers
        .iter()
        .find(|h| name_is(h.name.get(buf), name.as_bytes()))
        .map(|h| h.value.get(buf))
}
