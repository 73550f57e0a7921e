//! `http-request normalize-uri`: HAProxy 2.6's URI normalizers (its
//! `uri_normalizer.c`), giving the same results on the same input.
//!
//! Each works on the request's path and query (`pq`: what follows the
//! scheme and authority of an absolute-form target; nothing for `*` and
//! authority-form targets, which are left alone, as HAProxy finds no path
//! there). The `path-*` ones change the path and keep the query,
//! `query-sort-by-name` the query, the others the whole `pq`.

use crate::config::Normalizer;

/// What a normalizer makes of a path and query.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Same,
    New(Vec<u8>),
    /// A `strict` normalizer met a `%` not followed by two hex digits
    /// (HAProxy answers 400).
    Invalid,
}

/// Applies `n` to `pq`.
pub fn apply(n: Normalizer, pq: &[u8]) -> Outcome {
    if pq.is_empty() {
        return Outcome::Same;
    }
    let q = pq.iter().position(|&c| c == b'?').unwrap_or(pq.len());
    let (path, query) = pq.split_at(q);
    let with_query = |p: Vec<u8>| [&p[..], query].concat();
    let new = match n {
        Normalizer::PathMergeSlashes => with_query(merge_slashes(path)),
        Normalizer::PathStripDot => with_query(strip_dot(path)),
        Normalizer::PathStripDotdot { full } => with_query(strip_dotdot(path, full)),
        Normalizer::QuerySortByName => {
            if query.is_empty() {
                return Outcome::Same;
            }
            [path, &sort_query(query)[..]].concat()
        }
        Normalizer::PercentToUppercase { strict } => match percent(pq, strict, false) {
            Some(v) => v,
            None => return Outcome::Invalid,
        },
        Normalizer::PercentDecodeUnreserved { strict } => match percent(pq, strict, true) {
            Some(v) => v,
            None => return Outcome::Invalid,
        },
        Normalizer::FragmentStrip => {
            let end = pq.iter().position(|&c| c == b'#').unwrap_or(pq.len());
            pq[..end].to_vec()
        }
        Normalizer::FragmentEncode => {
            let mut v = Vec::with_capacity(pq.len());
            for &c in pq {
                if c == b'#' {
                    v.extend_from_slice(b"%23");
                } else {
                    v.push(c);
                }
            }
            v
        }
    };
    if new == pq {
        Outcome::Same
    } else {
        Outcome::New(new)
    }
}

/// `path-merge-slashes`: runs of `/` become one.
fn merge_slashes(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for &c in path {
        if c == b'/' && out.last() == Some(&b'/') {
            continue;
        }
        out.push(c);
    }
    out
}

/// `path-strip-dot`: `.` segments go, with the `/` ending them.
fn strip_dot(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    let mut rest = path;
    while !rest.is_empty() {
        let (seg, ended, next) = match rest.iter().position(|&c| c == b'/') {
            Some(i) => (&rest[..i], true, &rest[i + 1..]),
            None => (rest, false, &rest[rest.len()..]),
        };
        if seg != b"." {
            out.extend_from_slice(seg);
            if ended {
                out.push(b'/');
            }
        }
        rest = next;
    }
    out
}

/// `path-strip-dotdot [full]`: each `/..` removes the segment before it,
/// read from the end as HAProxy does; the ones left over at the start
/// stay (`full`: go).
fn strip_dotdot(path: &[u8], full: bool) -> Vec<u8> {
    // Built backwards, turned round at the end.
    let mut rev = Vec::with_capacity(path.len());
    let at = |i: usize, s: &[u8]| i + 1 >= s.len() && path[i + 1 - s.len()..=i] == *s;
    let mut up = 0usize;
    // `off`: one past the byte to look at next (0: done).
    let mut off = path.len();
    if off >= 3 && at(off - 1, b"/..") {
        up += 1;
        off -= 2;
    }
    while off > 0 {
        let i = off - 1;
        if i >= 3 && at(i, b"/../") {
            up += 1;
            off -= 3;
            continue;
        }
        if up > 0 {
            // The `/` (skipped), then the segment before it.
            off -= 1;
            if off > 0 {
                up -= 1;
                while off > 0 && path[off - 1] != b'/' {
                    off -= 1;
                }
            }
        } else {
            rev.push(path[i]);
            off -= 1;
            while off > 0 && path[off - 1] != b'/' {
                rev.push(path[off - 1]);
                off -= 1;
            }
        }
    }
    if up > 0 {
        rev.push(b'/');
        if !full {
            for _ in 0..up {
                rev.extend_from_slice(b"../");
            }
        }
    }
    rev.reverse();
    rev
}

/// `query-sort-by-name`: the `&`-separated parameters of `query` (which
/// starts with `?`) ordered by name, those of one name kept in order.
fn sort_query(query: &[u8]) -> Vec<u8> {
    // As HAProxy's istsplit loop: nothing after a last `&` (or after a
    // lone `?`) is a parameter.
    let mut params: Vec<&[u8]> = query[1..].split(|&c| c == b'&').collect();
    if params.last().is_some_and(|p| p.is_empty()) {
        params.pop();
    }
    let name = |p: &[u8]| {
        let end = p.iter().position(|&c| c == b'=').unwrap_or(p.len());
        p[..end].to_vec()
    };
    params.sort_by_key(|p| name(p));
    let mut out = vec![b'?'];
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            out.push(b'&');
        }
        out.extend_from_slice(p);
    }
    out
}

/// `percent-to-uppercase` (`decode` false: `%xx` becomes `%XX`) and
/// `percent-decode-unreserved` (`decode`: `%XX` of an unreserved character
/// becomes that character). A `%` without two hex digits after it is kept
/// as it is, or with `strict` makes the whole input invalid (`None`).
fn percent(s: &[u8], strict: bool, decode: bool) -> Option<Vec<u8>> {
    use crate::http1::hex_value;
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        i += 1;
        if c != b'%' {
            out.push(c);
            continue;
        }
        let digits = s
            .get(i..i + 2)
            .and_then(|d| Some((d[0], d[1], hex_value(d[0])? * 16 + hex_value(d[1])?)));
        match digits {
            Some((h1, h2, d)) => {
                i += 2;
                if decode && (d.is_ascii_alphanumeric() || b"-._~".contains(&d)) {
                    out.push(d);
                } else if decode {
                    out.extend_from_slice(&[b'%', h1, h2]);
                } else {
                    out.extend_from_slice(&[
                        b'%',
                        h1.to_ascii_uppercase(),
                        h2.to_ascii_uppercase(),
                    ]);
                }
            }
            _ if strict => return None,
            _ => out.push(b'%'),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: Normalizer, s: &str) -> String {
        match apply(n, s.as_bytes()) {
            Outcome::Same => s.to_string(),
            Outcome::New(v) => String::from_utf8(v).unwrap(),
            Outcome::Invalid => "INVALID".to_string(),
        }
    }

    /// The cases of HAProxy's reg-test http-rules/normalize_uri.
    #[test]
    fn as_haproxys_reg_test() {
        use Normalizer as N;
        let cases: &[(N, &str, &str)] = &[
            (N::PathMergeSlashes, "///foo///bar///", "/foo/bar/"),
            (N::PathMergeSlashes, "//foo?bar=///", "/foo?bar=///"),
            (N::PathMergeSlashes, "///", "/"),
            (
                N::PathStripDotdot { full: false },
                "/foo/../../bar/",
                "/../bar/",
            ),
            (
                N::PathStripDotdot { full: true },
                "/foo/../../bar/",
                "/bar/",
            ),
            (
                N::PathStripDotdot { full: false },
                "/foo//../../bar/",
                "/bar/",
            ),
            (N::PathStripDotdot { full: false }, "/foo/..", "/"),
            (N::PathStripDotdot { full: false }, "/foo/bar/../", "/foo/"),
            (
                N::PathStripDotdot { full: false },
                "/foo/../?bar=/foo/../",
                "/?bar=/foo/../",
            ),
            (N::QuerySortByName, "/?z=a&a=z", "/?a=z&z=a"),
            (N::QuerySortByName, "/?c&b&a&z&x&y", "/?a&b&c&x&y&z"),
            (
                N::QuerySortByName,
                "/?aaaa=&a=&aa=&aaa=",
                "/?a=&aa=&aaa=&aaaa=",
            ),
            (
                N::QuerySortByName,
                "/?a=5&b=3&a=1&a=2&b=4",
                "/?a=5&a=1&a=2&b=3&b=4",
            ),
            (N::QuerySortByName, "/?", "/?"),
            (N::QuerySortByName, "/", "/"),
            (N::QuerySortByName, "/?b&&a&", "/?&a&b"),
            (
                N::PercentToUppercase { strict: false },
                "/%aa?a=%aa",
                "/%AA?a=%AA",
            ),
            (
                N::PercentToUppercase { strict: false },
                "/%zz?a=%zz",
                "/%zz?a=%zz",
            ),
            (
                N::PercentToUppercase { strict: true },
                "/%zz?a=%zz",
                "INVALID",
            ),
            (N::PathStripDot, "/a/.", "/a/"),
            (N::PathStripDot, "/./", "/"),
            (N::PathStripDot, "/a/./a", "/a/a"),
            (N::PathStripDot, "/a/../", "/a/../"),
            (N::PathStripDot, "/?a=/./", "/?a=/./"),
            (
                N::PercentDecodeUnreserved { strict: false },
                "/%61?%61=%61",
                "/a?a=a",
            ),
            (
                N::PercentDecodeUnreserved { strict: false },
                "/%3F?foo=bar",
                "/%3F?foo=bar",
            ),
            (
                N::PercentDecodeUnreserved { strict: false },
                "/%%36%36",
                "/%66",
            ),
            (
                N::PercentDecodeUnreserved { strict: true },
                "/%%36%36",
                "INVALID",
            ),
            (N::FragmentStrip, "/#foo", "/"),
            (N::FragmentStrip, "/%23foo", "/%23foo"),
            (N::FragmentEncode, "/#foo/#foo", "/%23foo/%23foo"),
            (N::PathMergeSlashes, "", ""),
        ];
        for (n, i, o) in cases {
            assert_eq!(run(*n, i), *o, "{n:?} {i}");
        }
    }
}
