//! The common head's quick reading: a start line and field lines of plain
//! ASCII, each line ended by CRLF, read in one pass without httparse,
//! eight bytes a step (the method, the target, names and values: see
//! `word` for the byte classes tested a word at a time).
//!
//! It gives an answer only when it is sure to give httparse's: every byte
//! it accepts httparse accepts the same way, and it cuts names, values,
//! the method, the target and the reason phrase where httparse cuts them.
//! Anything else (an incomplete head, empty lines before the start line,
//! a byte from 0x80 up, a control other than HTAB, a bare LF, obs-fold,
//! more fields than `max`, a status line without reason) makes it give
//! up (`None`), and the caller reads the head with httparse as before:
//! same result, same errors. The unit tests hold it to httparse's answer
//! on every head it takes.

use super::head::{is_tchar, HeaderSpan, Span};

use super::word::{ascii, digits, equal, first, letters, low7, HIGHS, ONES};

/// Where the first byte of `w` (little-endian) that is not `lo`..`~`
/// lies, as a bit index of its byte's top bit (64 when none). Exact for
/// the lowest such byte: the borrows that may mark bytes above it
/// wrongly never reach below it (`lo` is SP or `!`).
#[inline(always)]
fn first_outside(w: u64, lo: u8) -> u32 {
    let below = w.wrapping_sub(ONES * u64::from(lo)) & !w;
    let del = w ^ (ONES * 0x7f);
    let is_del = del.wrapping_sub(ONES) & !del;
    ((below | is_del | w) & HIGHS).trailing_zeros()
}

/// The first byte from `at` in `buf` that is not `lo`..`~`: its index
/// and value; `None` when `buf` ends first. Eight bytes a step.
#[inline(always)]
fn run_end(buf: &[u8], at: usize, lo: u8) -> Option<(usize, u8)> {
    let mut i = at;
    loop {
        let rest = buf.get(i..)?;
        match rest.first_chunk::<8>() {
            Some(w) => {
                let bit = first_outside(u64::from_le_bytes(*w), lo);
                if bit == 64 {
                    i += 8;
                    continue;
                }
                let k = (bit / 8) as usize;
                return Some((i + k, *w.get(k)?));
            }
            None => {
                let k = rest.iter().position(|b| !(lo..=b'~').contains(b))?;
                return Some((i + k, rest[k]));
            }
        }
    }
}

/// Where the field value (or reason phrase) of SP..`~` and HTAB bytes
/// at `at` in `buf` ends: the index of the CR after it; `None` at any
/// other byte or when `buf` ends first. Eight bytes a step.
#[inline(always)]
fn value_end(buf: &[u8], at: usize) -> Option<usize> {
    let mut i = at;
    loop {
        let (end, b) = run_end(buf, i, b' ')?;
        match b {
            b'\r' => return Some(end),
            b'\t' => i = end + 1,
            _ => return None,
        }
    }
}

/// The bytes of `w` that are not a letter, a digit or `-` (the tchars
/// nearly every name and method is made of), each marked by its top bit.
#[inline(always)]
fn not_alnum_dash(w: u64) -> u64 {
    let v = low7(w);
    !ascii(letters(v) | digits(v) | equal(v, b'-'), w) & HIGHS
}

/// Where the token at `at` in `buf` ends, at the byte `end` that must
/// follow it: its bytes all tchars and at least one; `None` otherwise
/// (another byte first, or `buf` ends first). Eight bytes a step while
/// they are letters, digits and `-`; any other byte is looked up on its
/// own.
#[inline(always)]
fn token_end(buf: &[u8], at: usize, end: u8) -> Option<usize> {
    let mut i = at;
    loop {
        let (k, b) = match buf.get(i..).and_then(|r| r.first_chunk::<8>()) {
            Some(w) => {
                let odd = not_alnum_dash(u64::from_le_bytes(*w));
                if odd == 0 {
                    i += 8;
                    continue;
                }
                let k = first(odd);
                (k, *w.get(k)?)
            }
            None => {
                let rest = buf.get(i..)?;
                let k = rest.iter().position(|&b| !is_tchar(b))?;
                (k, rest[k])
            }
        };
        i += k;
        if b == end {
            return (i != at).then_some(i);
        }
        if !is_tchar(b) {
            return None;
        }
        i += 1;
    }
}

/// Reads field lines from `at` up to and with the empty line, pushing
/// their spans on `out` (at most `max` of them); returns the head's
/// length. httparse's cut: a name of tchars right before the colon, the
/// value without the SP/HTAB around it (an empty value: an empty span
/// where its line's CR is). One cursor walks the head: the name and the
/// value are each read eight bytes a step.
#[inline(never)]
fn fields(buf: &[u8], mut at: usize, max: usize, out: &mut Vec<HeaderSpan>) -> Option<usize> {
    loop {
        if *buf.get(at)? == b'\r' {
            return (*buf.get(at + 1)? == b'\n').then_some(at + 2);
        }
        let colon = token_end(buf, at, b':')?;
        let mut vs = colon + 1;
        while let b' ' | b'\t' = *buf.get(vs)? {
            vs += 1;
        }
        let cr = value_end(buf, vs)?;
        if *buf.get(cr + 1)? != b'\n' || out.len() >= max {
            return None;
        }
        let mut ve = cr;
        while ve > vs && matches!(buf[ve - 1], b' ' | b'\t') {
            ve -= 1;
        }
        out.push(HeaderSpan {
            name: span(at, colon),
            value: span(vs, ve),
        });
        at = cr + 2;
    }
}

#[inline(always)]
fn span(start: usize, end: usize) -> Span {
    Span {
        start: start as u32,
        end: end as u32,
    }
}

/// `HTTP/1.0` or `HTTP/1.1` at `at`: the minor version.
#[inline(always)]
fn version(buf: &[u8], at: usize) -> Option<u8> {
    match buf.get(at..at + 8)? {
        b"HTTP/1.1" => Some(1),
        b"HTTP/1.0" => Some(0),
        _ => None,
    }
}

/// A request head's method, target, minor version and length.
pub(crate) type ReqLine = (Span, Span, u8, usize);
/// A response head's minor version, status, reason and length.
pub(crate) type StatusLine = (u8, u16, Span, usize);

/// The head's bytes (no more than u32 offsets reach) and an empty list.
#[inline(always)]
fn begin<'b>(buf: &'b [u8], out: &mut Vec<HeaderSpan>) -> Option<&'b [u8]> {
    out.clear();
    buf.get(..buf.len().min(u32::MAX as usize))
}

/// A request's start line and field lines: (method, target, minor
/// version, head length), the fields pushed on `out` (cleared first).
/// The head must fit in u32 offsets (the caller's limit sees to it:
/// a longer one is given up).
#[inline(always)]
pub(crate) fn request(buf: &[u8], max: usize, out: &mut Vec<HeaderSpan>) -> Option<ReqLine> {
    let buf = begin(buf, out)?;
    let m = token_end(buf, 0, b' ')?;
    // httparse's target bytes less those from 0x80 up (given up: it
    // also checks them for UTF-8).
    let (at, after) = run_end(buf, m + 1, b'!')?;
    if at == m + 1 || after != b' ' {
        return None;
    }
    let (method, target) = (span(0, m), span(m + 1, at));
    let minor = version(buf, at + 1)?;
    let at = at + 9;
    if buf.get(at..at + 2)? != b"\r\n" {
        return None;
    }
    let len = fields(buf, at + 2, max, out)?;
    Some((method, target, minor, len))
}

/// A response's status line and field lines: (minor version, status,
/// reason, head length), the fields pushed on `out` (cleared first).
pub(crate) fn response(buf: &[u8], max: usize, out: &mut Vec<HeaderSpan>) -> Option<StatusLine> {
    let buf = begin(buf, out)?;
    let minor = version(buf, 0)?;
    let line = buf.get(8..13)?;
    let digit = |i: usize| line[i].is_ascii_digit().then(|| u16::from(line[i] - b'0'));
    if line[0] != b' ' || line[4] != b' ' {
        return None;
    }
    let status = digit(1)? * 100 + digit(2)? * 10 + digit(3)?;
    let cr = value_end(buf, 13)?;
    if *buf.get(cr + 1)? != b'\n' {
        return None;
    }
    let len = fields(buf, cr + 2, max, out)?;
    Some((minor, status, span(13, cr), len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::MaybeUninit;
    use proptest::prelude::*;

    type Fields = Vec<HeaderSpan>;

    fn spans(buf: &[u8], hs: &[httparse::Header<'_>]) -> Fields {
        hs.iter()
            .map(|h| HeaderSpan {
                name: Span::of(buf, h.name.as_bytes()),
                value: Span::of(buf, h.value),
            })
            .collect()
    }

    /// httparse's reading of a complete request head, as `request` gives it.
    fn reference_request(buf: &[u8], max: usize) -> Option<(Span, Span, u8, usize, Fields)> {
        let mut slots = vec![MaybeUninit::uninit(); max];
        let mut req = httparse::Request::new(&mut []);
        let cfg = httparse::ParserConfig::default();
        let Ok(httparse::Status::Complete(n)) =
            cfg.parse_request_with_uninit_headers(&mut req, buf, &mut slots)
        else {
            return None;
        };
        let m = Span::of(buf, req.method?.as_bytes());
        let t = Span::of(buf, req.path?.as_bytes());
        Some((m, t, req.version?, n, spans(buf, req.headers)))
    }

    /// The same for a response head, as `response` gives it.
    fn reference_response(buf: &[u8], max: usize) -> Option<(u8, u16, Span, usize, Fields)> {
        let mut slots = vec![MaybeUninit::uninit(); max];
        let mut r = httparse::Response::new(&mut []);
        match httparse::ParserConfig::default()
            .parse_response_with_uninit_headers(&mut r, buf, &mut slots)
        {
            Ok(httparse::Status::Complete(n)) => {
                let reason = Span::of(buf, r.reason?.as_bytes());
                Some((r.version?, r.code?, reason, n, spans(buf, r.headers)))
            }
            _ => None,
        }
    }

    /// Whenever the quick reading answers, httparse answers the same.
    fn agree<T: PartialEq + core::fmt::Debug>(
        buf: &[u8],
        quick: Option<T>,
        reference: impl FnOnce() -> Option<T>,
    ) -> bool {
        let Some(q) = quick else {
            return false;
        };
        assert_eq!(reference(), Some(q), "{:?}", buf.escape_ascii().to_string());
        true
    }

    fn agree_request(buf: &[u8], max: usize) -> bool {
        let mut out = Vec::new();
        let quick = request(buf, max, &mut out).map(|(m, t, v, n)| (m, t, v, n, out));
        agree(buf, quick, || reference_request(buf, max))
    }

    fn agree_response(buf: &[u8], max: usize) -> bool {
        let mut out = Vec::new();
        let quick = response(buf, max, &mut out).map(|(v, s, r, n)| (v, s, r, n, out));
        agree(buf, quick, || reference_response(buf, max))
    }

    const REQ: &[u8] = b"GET /a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent: curl/8.0 (x86_64)\r\nX-E:\r\nX-Sp: \t v a l \t \r\nAccept: */*\r\n\r\nbody";
    const RESP: &[u8] = b"HTTP/1.1 200 OK fine\r\nServer: nginx/1.22.1\r\nDate: Sat, 28 Nov 2026 22:57:49 GMT\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-E:  \r\nConnection: keep-alive\r\n\r\nhello";

    #[test]
    fn common_heads_are_read_as_httparse_reads_them() {
        assert!(agree_request(REQ, 101));
        assert!(agree_response(RESP, 101));
        assert!(agree_request(b"OPTIONS * HTTP/1.0\r\n\r\n", 101));
        assert!(agree_response(b"HTTP/1.0 404 \r\n\r\n", 101));
        // A value of every length around the 8-byte word, with an HTAB
        // and a special byte at every place.
        for len in 0..40 {
            let v: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let mut h = b"GET / HTTP/1.1\r\nX: ".to_vec();
            h.extend_from_slice(&v);
            h.extend_from_slice(b"\r\n\r\n");
            assert!(agree_request(&h, 101));
            for at in 0..len {
                for b in [b'\t', 0x7f, 0x80, 0xff, 0x00, b'\n', b'\r', 0x1f, b' '] {
                    let mut h2 = b"GET / HTTP/1.1\r\nX: ".to_vec();
                    let mut v2 = v.clone();
                    v2[at] = b;
                    h2.extend_from_slice(&v2);
                    h2.extend_from_slice(b"\r\n\r\n");
                    let took = agree_request(&h2, 101);
                    assert_eq!(took, b == b'\t' || b == b' ', "{b:#x} at {at} of {len}");
                }
            }
        }
    }

    #[test]
    fn unusual_heads_are_left_to_httparse() {
        // (head, read as a response, why it is given up)
        let heads: [(&[u8], bool, &str); 16] = [
            (b"\r\nGET / HTTP/1.1\r\n\r\n", false, "empty line first"),
            (
                b"GET / HTTP/1.1\n\r\n",
                false,
                "bare LF after the start line",
            ),
            (
                b"GET / HTTP/1.1\r\nA: b\n\r\n",
                false,
                "bare LF after a field",
            ),
            (
                b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
                false,
                "obs-fold",
            ),
            (
                b"GET / HTTP/1.1\r\nA : b\r\n\r\n",
                false,
                "space before the colon",
            ),
            (
                b"GET /\xc3\xa9 HTTP/1.1\r\n\r\n",
                false,
                "target byte from 0x80",
            ),
            (b"GET / HTTP/1.1\r\nA: b\r\n", false, "no empty line yet"),
            (
                b"GET / HTTP/1.1\r\nA: b\r\n\r",
                false,
                "half the empty line",
            ),
            (b"GET / HTTP/1.2\r\n\r\n", false, "version 1.2"),
            (b"GET  / HTTP/1.1\r\n\r\n", false, "two spaces"),
            (b"HTTP/1.1 200\r\n\r\n", true, "no reason"),
            (b"HTTP/1.1 200 \xe9\r\n\r\n", true, "obs-text reason"),
            (b"HTTP/1.1  200 OK\r\n\r\n", true, "two spaces"),
            (b"HTTP/1.1 2x0 OK\r\n\r\n", true, "status not digits"),
            (b"\r\nHTTP/1.1 200 OK\r\n\r\n", true, "empty line first"),
            (b"HTTP/1.1 200 OK\r\n", true, "no empty line yet"),
        ];
        for (h, response, why) in heads {
            let took = if response {
                agree_response(h, 101)
            } else {
                agree_request(h, 101)
            };
            assert!(!took, "{why}");
        }
        // More fields than the caller takes.
        assert!(!agree_request(b"GET / HTTP/1.1\r\nA: b\r\nC: d\r\n\r\n", 1));
    }

    /// Every byte at every place of names, methods and targets of every
    /// length around the word: the quick reading takes the head exactly
    /// when httparse's byte classes allow it (tchars in names and methods,
    /// `!`..`~` in targets), and then gives httparse's answer.
    #[test]
    fn every_byte_in_names_methods_and_targets() {
        // A token of `len` bytes cycling through letters of both cases,
        // digits, `-` and the other tchars.
        const TCHARS: &[u8] = b"aZ0-!#$%&'*+.^_`|~zA9";
        let token =
            |len: usize| -> Vec<u8> { (0..len).map(|i| TCHARS[i % TCHARS.len()]).collect() };
        let request = |m: &[u8], t: &[u8], n: &[u8]| -> Vec<u8> {
            let mut h = m.to_vec();
            h.push(b' ');
            h.extend_from_slice(t);
            h.extend_from_slice(b" HTTP/1.1\r\n");
            h.extend_from_slice(n);
            h.extend_from_slice(b": v\r\nHost: example.com\r\n\r\n");
            h
        };
        for len in 1..20 {
            let base = token(len);
            assert!(agree_request(&request(&base, b"/", &base), 101));
            assert!(agree_request(
                &request(b"GET", &b"/".repeat(len), b"A"),
                101
            ));
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut t = base.clone();
                    t[at] = b;
                    let tchar = is_tchar(b);
                    // In the name (a colon there ends it sooner).
                    let took = agree_request(&request(b"GET", b"/", &t), 101);
                    assert_eq!(took, tchar || (b == b':' && at > 0), "name {t:?}");
                    // In the method (a space there makes four words of
                    // the line).
                    let took = agree_request(&request(&t, b"/", b"A"), 101);
                    assert_eq!(took, tchar, "method {t:?}");
                    // In the target.
                    let mut target = b"/".repeat(len);
                    target[at] = b;
                    let took = agree_request(&request(b"GET", &target, b"A"), 101);
                    assert_eq!(took, (b'!'..=b'~').contains(&b), "target {target:?}");
                }
            }
        }
    }

    /// A head cut anywhere (mid-word included) is never taken, and whole
    /// heads with long names, methods and targets crossing word
    /// boundaries are.
    #[test]
    fn cut_heads_are_given_up() {
        let long = b"PROPFIND-LONGER-THAN-A-WORD /a/very/long/target/crossing/words?x=1&y=2 HTTP/1.1\r\nX-A-Name-Longer-Than-Two-Words_and.more: v\r\nhost: h\r\n\r\n";
        for head in [REQ, long] {
            let end = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            assert!(agree_request(&head[..end], 101));
            for cut in 0..end {
                let mut out = Vec::new();
                assert_eq!(request(&head[..cut], 101, &mut out), None, "cut at {cut}");
            }
        }
        let end = RESP.len() - 5;
        for cut in 0..end {
            let mut out = Vec::new();
            assert_eq!(response(&RESP[..cut], 101, &mut out), None, "cut at {cut}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// Common heads with a few bytes replaced or cut: wherever the
        /// quick reading answers, it is httparse's answer.
        #[test]
        fn mutated_heads_agree_with_httparse(
            edits in proptest::collection::vec((0usize..200, any::<u8>()), 0..4),
            cut in 0usize..220,
            max in 1usize..8,
        ) {
            for base in [REQ, RESP] {
                let mut h = base.to_vec();
                for &(at, b) in &edits {
                    if let Some(x) = h.get_mut(at) {
                        *x = [b, b' ', b'\t', b'\r', b'\n', b':'][usize::from(b % 6)];
                    }
                }
                h.truncate(cut.max(1));
                agree_request(&h, max);
                agree_response(&h, max);
            }
        }
    }
}
