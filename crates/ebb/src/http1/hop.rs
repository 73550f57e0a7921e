//! Hop-by-hop fields (RFC 9110 §7.6.1) and what ebb forwards of them.
//!
//! The RFC's fixed list is Connection, Keep-Alive, Proxy-Connection, TE,
//! Trailer, Transfer-Encoding, Upgrade, plus every field named as an
//! option in a Connection field. ebb forwards what HAProxy 2.6 forwards
//! between HTTP/1 peers ([`forwardable`]): all but the framing, `TE` and
//! `Upgrade`, and the Connection options the proxy answers itself
//! (`close`, `keep-alive`, `upgrade`); the fields Connection names go on.
//! The proxy writes the framing it chose itself (Content-Length or
//! `Transfer-Encoding: chunked`), its own Connection, and, for an upgrade
//! it lets through, `Connection: upgrade` with the Upgrade value again. A
//! head for an HTTP/2 peer loses the connection-specific fields there.
//!
//! All checks work on the spans of a parsed head and allocate nothing.

use super::head::{eq_nocase, for_each_member, name_is, HeaderSpan};

/// True for the `Connection` options ebb answers itself: `close` and
/// `keep-alive` (the connection's persistence, said again on each side),
/// `upgrade` (written again with the Upgrade field for an upgrade) and
/// `HTTP2-Settings` (the h2c upgrade's, which ebb never passes on: see
/// [`forwardable`]).
fn own_option(m: &[u8]) -> bool {
    m.is_empty()
        || eq_nocase(m, b"close")
        || eq_nocase(m, b"keep-alive")
        || eq_nocase(m, b"upgrade")
        || eq_nocase(m, b"http2-settings")
}

/// True when a Connection field's value names an option besides those
/// ebb answers itself ([`own_option`]): the field goes on with those.
pub fn connection_goes_on(value: &[u8]) -> bool {
    if own_option(value) {
        // A lone option ebb answers (the usual `keep-alive` or `close`):
        // no walk through a list.
        return false;
    }
    let mut other = false;
    for_each_member(value, |m, _| other |= !own_option(m));
    other
}

/// Writes the value a forwarded field goes on with: a Connection field's
/// options but `close`, `keep-alive` and `upgrade`, as HAProxy 2.6 passes
/// them; any other field's value as it came.
pub fn push_forwarded_value(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    if !eq_nocase(name, b"connection") {
        out.extend_from_slice(value);
        return;
    }
    let mut first = true;
    for_each_member(value, |m, _| {
        if !own_option(m) {
            if !first {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(m);
            first = false;
        }
    });
}

/// The fields of a head a proxy forwards, in order: as HAProxy 2.6 does,
/// every field but `Transfer-Encoding` (the proxy writes the framing
/// it chose), `TE` (its `trailers` member the request's writer passes),
/// `Upgrade` (written again for an upgrade) and the Connection fields
/// that name only what the proxy says itself ([`connection_goes_on`]; the
/// others go on through [`push_forwarded_value`]). The fields a
/// Connection field names go on, as HAProxy forwards them, and so do
/// `Keep-Alive`, `Proxy-Connection` and `Trailer`. Unlike HAProxy 2.6,
/// the h2c upgrade (`Upgrade: h2c` with its `HTTP2-Settings`) is not
/// passed on at all: a server that took it would speak HTTP/2 to the
/// client through a tunnel the proxy's rules no longer see (h2c
/// smuggling); the request goes on as plain HTTP/1.1.
///
/// A field costs a length dispatch; a Connection field a look at its
/// options.
pub fn forwardable<'h>(
    buf: &'h [u8],
    headers: &'h [HeaderSpan],
) -> impl Iterator<Item = &'h HeaderSpan> + 'h {
    headers.iter().filter(move |h| goes_on(buf, h))
}

/// Whether one field goes on to the next hop (see [`forwardable`]).
pub fn goes_on(buf: &[u8], h: &HeaderSpan) -> bool {
    let name = h.name.get(buf);
    match name.len() {
        2 => !eq_nocase(name, b"te"),
        7 => !eq_nocase(name, b"upgrade"),
        10 if eq_nocase(name, b"connection") => connection_goes_on(h.value.get(buf)),
        14 => !eq_nocase(name, b"http2-settings"),
        17 => !eq_nocase(name, b"transfer-encoding"),
        _ => true,
    }
}

/// The value of the first field named `name` (ASCII case-insensitive).
pub fn find_header<'b>(buf: &'b [u8], headers: &[HeaderSpan], name: &str) -> Option<&'b [u8]> {
    headers
        .iter()
        .find(|h| name_is(h.name.get(buf), name.as_bytes()))
        .map(|h| h.value.get(buf))
}
