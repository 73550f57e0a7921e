//! Reading an HTTP message as HAProxy 2.6's fetches do: the query
//! parameters (`url_param`, `req.body_param`), the values of a header
//! (comma-separated or whole lines, by occurrence), an address in a
//! header (`hdr_ip`), the path of a target, and cookies (`Cookie` lists,
//! `Set-Cookie` fields).

use crate::sample::{each_field, Ctx, Scratch, Val};

/// The query string `url_param` reads: what follows the first `delim`
/// of the path.
pub(super) fn url_query<'a>(ctx: &Ctx<'a>, delim: u8) -> Option<&'a [u8]> {
    let r = ctx.req?;
    let pq = r.head.path.get(r.buf);
    Some(&pq[pq.iter().position(|&c| c == delim)? + 1..])
}

/// HAProxy 2.6's http_find_next_url_param on `q` from `start`: where the
/// next value is. Parameters are separated by `&`, `;` or `delim`
/// (`http_is_param_delimiter`). With a name, the value after the next
/// `NAME=` that starts a parameter (names compared byte for byte);
/// without one (or an empty one), the value after the next `=` wherever
/// it is (`a&b=1` gives `1`). A value ends at a separator.
pub(super) fn next_param(
    q: &[u8],
    start: usize,
    name: Option<&str>,
    delim: u8,
) -> Option<(usize, usize)> {
    let sep = |c: u8| c == b'&' || c == b';' || c == delim;
    let vstart = match name.map(str::as_bytes).filter(|n| !n.is_empty()) {
        None => start + q.get(start..)?.iter().position(|&c| c == b'=')? + 1,
        Some(n) => {
            let mut pos = start;
            loop {
                let eq = pos + n.len();
                if eq >= q.len() {
                    return None;
                }
                if q[eq] == b'=' {
                    if &q[pos..eq] == n {
                        break eq + 1;
                    }
                    pos = eq + 1;
                }
                pos += q.get(pos..)?.iter().position(|&c| sep(c))? + 1;
            }
        }
    };
    let rest = q.get(vstart..)?;
    Some((
        vstart,
        vstart + rest.iter().position(|&c| sep(c)).unwrap_or(rest.len()),
    ))
}

/// Calls `f` on each value `next_param` finds in turn (HAProxy's fetch
/// says more follow while the value ends before the text); stops at the
/// first `true`.
pub(super) fn each_param(
    q: &[u8],
    name: Option<&str>,
    delim: u8,
    s: &mut Scratch,
    f: &mut dyn FnMut(Val, &mut Scratch) -> bool,
) -> bool {
    let mut at = 0;
    while let Some((a, b)) = next_param(q, at, name, delim) {
        s.cur.clear();
        s.cur.extend_from_slice(&q[a..b]);
        if f(Val::Str, s) {
            return true;
        }
        if b >= q.len() {
            break;
        }
        at = b;
    }
    false
}

/// Puts occurrence `n` of header `name`'s values (comma-separated unless
/// `full`; from the last when negative) in `s.cur`; whether it exists.
pub(super) fn nth_value(
    ctx: &Ctx<'_>,
    res: bool,
    name: &str,
    full: bool,
    n: i64,
    s: &mut Scratch,
) -> bool {
    let want = if n < 0 {
        let mut total = 0;
        values(ctx, res, name, full, &mut |_| {
            total += 1;
            false
        });
        total + n + 1
    } else {
        n
    };
    if want < 1 {
        return false;
    }
    let (mut i, mut found) = (0, false);
    values(ctx, res, name, full, &mut |v| {
        i += 1;
        if i == want {
            s.cur.clear();
            s.cur.extend_from_slice(v);
            found = true;
        }
        found
    });
    found
}

/// A header value as `hdr_ip` reads it (HAProxy's `url2ipv4`, then
/// `inet_pton`): four dotted decimal octets (leading zeros allowed),
/// alone or followed by `:PORT` (0 to 65535), or an IPv6 address.
pub(super) fn header_ip(v: &[u8]) -> Option<std::net::IpAddr> {
    header_ipv4(v).or_else(|| {
        std::str::from_utf8(v)
            .ok()?
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(std::net::IpAddr::V6)
    })
}

/// HAProxy's `url2ipv4` on a whole value: digits and dots up to another
/// character, four octets; then nothing, or `:PORT`.
pub(super) fn header_ipv4(v: &[u8]) -> Option<std::net::IpAddr> {
    let (ip, end) = crate::sample::ipv4_prefix(v)?;
    let port_ok = |p: &[u8]| {
        !p.is_empty()
            && p.iter().all(u8::is_ascii_digit)
            && std::str::from_utf8(p)
                .ok()
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|p| p <= 65535)
    };
    (end == v.len() || (v[end] == b':' && port_ok(&v[end + 1..]))).then_some(ip)
}

/// The path (with its query) of a request target as HAProxy's
/// `http_parse_path` finds it (`crate::sample::target_path`): none in `*`,
/// in an absolute URI without one (`http://h`, `http://h?q`), or in a
/// target a rule rewrote to something else than a path or an absolute
/// URI (`set-path a`); the user part of an authority is skipped
/// (`http://u@h/p` gives `/p`).
pub(super) fn found_path(t: &[u8]) -> Option<&[u8]> {
    match crate::sample::target_path(t) {
        [] => None,
        p => Some(p),
    }
}

/// Path and query (after `?`) of a path-and-query.
pub(super) fn split_q(p: &[u8]) -> (&[u8], Option<&[u8]>) {
    match p.iter().position(|&c| c == b'?') {
        Some(i) => (&p[..i], Some(&p[i + 1..])),
        None => (p, None),
    }
}

/// Calls `f` on each value of header `name` (every header's when empty,
/// as HAProxy's `http_find_header` without a name): each comma-separated
/// value (trimmed) unless `full`, where each line counts whole. `f` returns
/// `true` to stop. Returns whether the message exists.
pub(super) fn values(
    ctx: &Ctx<'_>,
    res: bool,
    name: &str,
    full: bool,
    f: &mut dyn FnMut(&[u8]) -> bool,
) -> bool {
    let mut stop = false;
    let mut clean = Vec::new();
    each_field(ctx, res, &mut |n, v| {
        if !name.is_empty() && !n.eq_ignore_ascii_case(name.as_bytes()) {
            return false;
        }
        // A request's Connection field as HAProxy's parser left it
        // (`close` and `keep-alive` dropped; the field gone when nothing
        // is left), as `req.hdrs` shows it.
        let v = if !res && n.eq_ignore_ascii_case(b"connection") {
            clean.clear();
            clean_connection(v, &mut clean);
            if clean.is_empty() {
                return false;
            }
            &clean[..]
        } else {
            v
        };
        if full {
            // HAProxy's http_find_header: the value without the spaces
            // around it (a rule may have set one with them).
            let t = |c: &u8| *c != b' ' && *c != b'\t';
            let v = match (v.iter().position(t), v.iter().rposition(t)) {
                (Some(a), Some(b)) => &v[a..=b],
                _ => &v[..0],
            };
            stop = f(v);
            return stop;
        }
        for part in crate::sample::split_values(v) {
            if f(part) {
                stop = true;
                return true;
            }
        }
        false
    })
}

/// Calls `f` on each value of cookie `name` (every cookie without a
/// name; `f` returns `true` to stop) in the request's Cookie fields, or
/// with `res` in the response's Set-Cookie fields, as HAProxy 2.6 reads
/// them: each comma-separated value of the field (`http_find_header`),
/// skipped when shorter than the name and one byte, then its cookies
/// (`http_extract_cookie_value`, a list of them in a request; a response's
/// field names one, in its first `name=value`). Returns whether the
/// message exists.
pub(super) fn cookies(
    ctx: &Ctx<'_>,
    res: bool,
    name: Option<&str>,
    f: &mut dyn FnMut(&[u8]) -> bool,
) -> bool {
    let field = if res { "set-cookie" } else { "cookie" };
    let name = name.map_or(&b""[..], str::as_bytes);
    values(ctx, res, field, false, &mut |v| {
        if v.len() < name.len() + 1 {
            return false;
        }
        let mut at = 0;
        while let Some((a, b, next)) = extract_cookie(v, at, name, !res) {
            if f(&v[a..b]) {
                return true;
            }
            at = next;
        }
        false
    })
}

/// The next value of cookie `name` (any cookie when empty) in the field
/// value `v` from `at`: where it starts and ends, and where to look on
/// from. A request's field (`list`) holds cookies separated by `;` or
/// `,`; a response's looks no further than the first `name=value` (past
/// the attributes `$...` and the words without `=` before it). Values
/// may be quoted (`;` and `,` inside do not end them).
pub(super) fn extract_cookie(
    v: &[u8],
    mut at: usize,
    name: &[u8],
    list: bool,
) -> Option<(usize, usize, usize)> {
    let sp = |c: u8| c == b' ' || c == b'\t';
    while at + name.len() + 1 < v.len() {
        while at < v.len() && sp(v[at]) {
            at += 1;
        }
        // The name ends before the spaces in front of `=` or a separator.
        let (mut eq, mut name_end) = (at, at);
        while eq < v.len() {
            let c = v[eq];
            if c == b'=' || c == b';' || (list && c == b',') {
                break;
            }
            eq += 1;
            if !sp(c) {
                name_end = eq;
            }
        }
        let (a, b, next) = if v.get(eq) == Some(&b'=') {
            let mut a = eq + 1;
            while a < v.len() && sp(v[a]) {
                a += 1;
            }
            let next = cookie_value_end(v, a);
            let mut b = next;
            while b > a && sp(v[b - 1]) {
                b -= 1;
            }
            (a, b, next)
        } else {
            (eq, eq, eq)
        };
        // `$Path`... attributes and words without `=` are passed over.
        if v.get(at) == Some(&b'$') || eq == next {
            at = next + 1;
            continue;
        }
        if name.is_empty() || &v[at..name_end] == name {
            return Some((a, b, next + 1));
        }
        if !list {
            return None;
        }
        at = next + 1;
    }
    None
}

/// Where a cookie value starting at `a` ends: at the first `;` or `,`
/// outside a quoted string (`\` escapes a byte inside one).
pub(super) fn cookie_value_end(v: &[u8], a: usize) -> usize {
    let (mut quoted, mut pair) = (false, false);
    for (i, &c) in v.iter().enumerate().skip(a) {
        if pair {
            pair = false;
        } else if quoted {
            if c == b'\\' {
                pair = true;
            } else if c == b'"' {
                quoted = false;
            }
        } else if c == b'"' {
            quoted = true;
        } else if c == b',' || c == b';' {
            return i;
        }
    }
    v.len()
}

/// The value of the RDP cookie of a TCP-mode request (HAProxy's
/// `fetch_rdp_cookie_name`): after the 11 bytes of the TPKT and X.224
/// headers, `Cookie:` (any case), spaces, `NAME=` (the given name in any
/// case, else any name up to the first `=` on the line), the value up to
/// a CR that a LF follows. `Err`: too few bytes to tell; `Ok(None)`: not
/// a cookie.
pub(super) fn rdp_cookie<'b>(data: &'b [u8], name: Option<&str>) -> Result<Option<&'b [u8]>, ()> {
    // HAProxy wants more than the bytes it compares each time.
    let rest = data.get(11..).filter(|r| r.len() > 7).ok_or(())?;
    if !rest[..7].eq_ignore_ascii_case(b"Cookie:") {
        return Ok(None);
    }
    let mut rest = &rest[7..];
    while let [b' ', r @ ..] = rest {
        rest = r;
    }
    match name {
        Some(n) => {
            let n = n.as_bytes();
            if rest.len() <= n.len() {
                return Err(());
            }
            if rest[n.len()] != b'=' || !rest[..n.len()].eq_ignore_ascii_case(n) {
                return Ok(None);
            }
            rest = &rest[n.len() + 1..];
        }
        None => {
            let Some(eq) = rest.iter().position(|&c| matches!(c, b'=' | b'\r' | b'\n')) else {
                return Err(());
            };
            if rest[eq] != b'=' {
                return Ok(None);
            }
            rest = &rest[eq + 1..];
        }
    }
    let end = rest.iter().position(|&c| c == b'\r').unwrap_or(rest.len());
    if rest.len() - end < 2 {
        return Err(());
    }
    if rest[end + 1] != b'\n' {
        return Ok(None);
    }
    Ok(Some(&rest[..end]))
}

/// The ALPN protocol names of the TLS ClientHello at the start of `b`,
/// read as HAProxy 2.6's `smp_fetch_ssl_hello_alpn` reads them: a
/// handshake record of SSLv3 or later long enough to hold extensions, a
/// whole ClientHello of TLS 1.0 or later, its session id, cipher suites
/// and compression methods skipped, then the extension 16's names from
/// the start of its list (its own length unread), each up to the first
/// that overruns the extension. `Err(true)`: too few bytes yet (more may
/// make one); `Err(false)`: no ClientHello, or no ALPN in it.
pub(super) fn hello_alpn(b: &[u8]) -> Result<Vec<&[u8]>, bool> {
    let at = |i: usize| -> Result<usize, bool> { b.get(i).map(|&c| usize::from(c)).ok_or(true) };
    if at(0)? != 0x16 {
        return Err(false);
    }
    if at(2).is_err() {
        return Err(true);
    }
    if at(1)? < 3 {
        return Err(false);
    }
    let rec = at(3)? << 8 | at(4)?;
    if rec < 1 + 3 + 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + 2 {
        return Err(false);
    }
    if at(5)? != 0x01 {
        return Err(false);
    }
    let hs = at(6)? << 16 | at(7)? << 8 | at(8)?;
    if hs < 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 + 2 {
        return Err(false);
    }
    // The whole message (HAProxy waits for its length counted from the
    // message's own header; ebb for the header and the message both).
    let m = b.get(9..9 + hs).ok_or(true)?;
    if m[0] < 3 || m[1] < 1 {
        return Err(false);
    }
    let sid = usize::from(m[34]);
    if sid > 32 || sid > hs - 35 {
        return Err(false);
    }
    let g = |i: usize| m.get(i).map_or(0, |&c| usize::from(c));
    let mut left = hs - 35 - sid;
    let mut p = 35 + sid;
    let ciphers = g(p) << 8 | g(p + 1);
    if left < 4 || ciphers < 2 || ciphers > left {
        return Err(false);
    }
    left -= 2 + ciphers;
    p += 2 + ciphers;
    let comp = g(p);
    if left < 2 || comp < 1 || comp > left {
        return Err(false);
    }
    left -= 1 + comp;
    p += 1 + comp;
    let exts = g(p) << 8 | g(p + 1);
    if left < 2 || exts > left - 2 {
        return Err(false);
    }
    let mut left = exts;
    p += 2;
    while left >= 4 {
        let (ty, len) = (g(p) << 8 | g(p + 1), g(p + 2) << 8 | g(p + 3));
        if len > left - 4 {
            return Err(false);
        }
        if ty == 16 {
            if len < 3 {
                return Err(false);
            }
            let e = m.get(p..p + 4 + len).ok_or(false)?;
            let mut names = Vec::new();
            let mut off = 6;
            loop {
                let n = usize::from(e[off]);
                if n + off - 3 > len {
                    break;
                }
                names.push(&e[off + 1..off + 1 + n]);
                if n + off - 3 == len {
                    break;
                }
                off += n + 1;
            }
            return if names.is_empty() {
                Err(false)
            } else {
                Ok(names)
            };
        }
        left -= 4 + len;
        p += 4 + len;
    }
    Err(false)
}

/// A request's `Connection` value as HAProxy's HTTP/1 parser leaves it
/// (`h1_parse_connection_header` with `H1_MF_CLEAN_CONN_HDR`): without its
/// `close` and `keep-alive` tokens; the value as written up to the first
/// token dropped, the tokens after it joined by a bare `,`. Appended to
/// `out` (nothing left: the field goes).
pub(super) fn clean_connection(v: &[u8], out: &mut Vec<u8>) {
    let lws = |c: u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let start = out.len();
    // Whether nothing was dropped yet (the value kept as written).
    let mut verbatim = true;
    // Each word starts after the previous one's comma (an empty one
    // between two commas is a word).
    let mut i = 0;
    let mut first = true;
    while i < v.len() {
        if !first {
            // Past the comma that ended the previous word.
            i += 1;
        }
        first = false;
        while i < v.len() && lws(v[i]) {
            i += 1;
        }
        if i >= v.len() {
            break;
        }
        let n = i + crate::sample::split_values_untrimmed(&v[i..])
            .next()
            .map_or(0, <[u8]>::len);
        let mut w = &v[i..n];
        while let [rest @ .., last] = w {
            if !lws(*last) {
                break;
            }
            w = rest;
        }
        if w.eq_ignore_ascii_case(b"keep-alive") || w.eq_ignore_ascii_case(b"close") {
            verbatim = false;
        } else if verbatim {
            out.truncate(start);
            out.extend_from_slice(&v[..n]);
        } else {
            if out.len() > start {
                out.push(b',');
            }
            out.extend_from_slice(w);
        }
        i = n;
    }
}

#[cfg(test)]
mod tests {
    use super::hello_alpn;

    /// A TLS 1.2 record holding a ClientHello with the ALPN extension
    /// `alpn` (its body as sent) after a server_name one.
    fn hello(alpn: &[u8]) -> Vec<u8> {
        let mut exts = vec![0, 0, 0, 5, 0, 3, 0, 0, 0]; // an empty-ish SNI
        exts.extend_from_slice(&[0, 16]);
        exts.extend_from_slice(&(alpn.len() as u16).to_be_bytes());
        exts.extend_from_slice(alpn);
        let mut m = vec![3, 3];
        m.extend_from_slice(&[7; 32]); // random
        m.push(0); // no session id
        m.extend_from_slice(&[0, 2, 0x13, 0x01]); // one cipher suite
        m.extend_from_slice(&[1, 0]); // null compression
        m.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        m.extend_from_slice(&exts);
        let mut hs = vec![1, 0];
        hs.extend_from_slice(&(m.len() as u16).to_be_bytes());
        hs.extend_from_slice(&m);
        let mut rec = vec![0x16, 3, 1];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    fn list(names: &[&str]) -> Vec<u8> {
        let mut l = Vec::new();
        for n in names {
            l.push(n.len() as u8);
            l.extend_from_slice(n.as_bytes());
        }
        let mut v = (l.len() as u16).to_be_bytes().to_vec();
        v.extend_from_slice(&l);
        v
    }

    #[test]
    fn alpn_names_of_a_client_hello() {
        let h = hello(&list(&["h2", "http/1.1"]));
        assert_eq!(hello_alpn(&h), Ok(vec![&b"h2"[..], b"http/1.1"]));
        let h = hello(&list(&["acme-tls/1"]));
        assert_eq!(hello_alpn(&h), Ok(vec![&b"acme-tls/1"[..]]));
        // Cut anywhere: more bytes could make it.
        for n in [0, 1, 4, 8, h.len() - 1] {
            assert_eq!(hello_alpn(&h[..n]), Err(true), "{n} bytes");
        }
        // Not TLS, no ALPN, a name past the extension's end.
        assert_eq!(hello_alpn(b"GET / HTTP/1.1\r\n"), Err(false));
        assert_eq!(hello_alpn(&hello(&[0, 0])), Err(false));
        let mut bad = list(&["h2", "http/1.1"]);
        bad[5] = 40; // the second name's length
        assert_eq!(hello_alpn(&hello(&bad)), Ok(vec![&b"h2"[..]]));
        bad[2] = 40; // the first one's
        assert_eq!(hello_alpn(&hello(&bad)), Err(false));
    }

    #[test]
    fn connection_loses_close_and_keep_alive_as_haproxy_writes_it() {
        let c = |v: &str| {
            let mut o = Vec::new();
            super::clean_connection(v.as_bytes(), &mut o);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(c("close"), "");
        assert_eq!(c("Keep-Alive, close"), "");
        assert_eq!(c("a, b"), "a, b");
        assert_eq!(c("a , close, b ,c"), "a ,b,c");
        assert_eq!(c("close, a"), "a");
        assert_eq!(c("a,,close,b"), "a,,b");
        assert_eq!(c(",a"), ",a");
    }
}
