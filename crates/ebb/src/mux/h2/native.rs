//! Native HTTP/2 answers: a stream answered at once, with no HTTP/1 bytes
//! on the way back and no wake-up of its lane's tasklet.
//!
//! The H2 connection runs the start of a new stream (its rules and the
//! choice of its answer) inline, on its lane's client side (the lane's
//! `Conn`, shared with the lane's tasklet), with a [`Captured`] armed on
//! that side. When the stream answers with a whole message at once (a
//! `return`, a redirect, a deny, an error page: the stream's
//! [`Conn::respond`](crate::mux::h1::Conn::respond) with a head and its
//! whole body), the capture keeps the head's fields and the body instead
//! of writing them as HTTP/1; the H2 connection then sends them as HEADERS
//! and DATA. Any other answer (a file, a page being built, a server, bytes
//! written as they are such as an errorfile) goes the lane's way: its
//! bytes reach the H2 connection through the lane's pipe, as before.
//!
//! The fields sent are those the HTTP/1 encoding would have written
//! ([`crate::mux::h1::out`]): `Server` and `Date`, the head's fields that
//! are valid (a name that is a token, a value without control bytes), and
//! `Content-Length` when the answer is framed by one. The log counts the
//! bytes that answer would have had on HTTP/1 (what the lane's answer
//! counted), so log lines do not change with the path taken.

use crate::h2::hpack::Encoder;
use crate::http1::{is_field_value, is_token, reason_phrase, BodyFraming, Version, DATE_LEN};
use crate::stream::msg::{BodySize, RespHead};

/// A whole answer kept for the H2 connection instead of being written as
/// HTTP/1.
#[derive(Default)]
pub(crate) struct Captured {
    /// The client side takes the next whole answer.
    pub(crate) armed: bool,
    /// An answer was taken.
    pub(crate) done: bool,
    pub(crate) status: u16,
    /// The fields to send, in order, as the HPACK encoder takes them
    /// ([`Encoder::push_field`]'s list, names in lower case): the H2
    /// connection copies the list once, not field by field.
    pub(crate) fields: Vec<u8>,
    /// The fields' size as HTTP/1 lines (`name: value` CRLF).
    fields_h1: usize,
    /// The body (empty when none is sent: HEAD, 204, 304).
    pub(crate) body: Vec<u8>,
    /// A head taken alone (a file's): the body bytes that follow it on
    /// the client side (its output buffer, or its file), 0 when none is
    /// sent.
    pub(crate) follows: u64,
    /// What the answer would have been on HTTP/1, in bytes (for the log).
    pub(crate) h1_len: u64,
}

/// Each byte in lower case when it is a `tchar`, 0 when it is not (no
/// `tchar` is 0): a field name is checked and lowered with one load a byte.
static LOWER_TCHAR: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        if crate::http1::tchar(i as u8) {
            t[i] = (i as u8).to_ascii_lowercase();
        }
        i += 1;
    }
    t
};

/// `server: ebb`, then `date: ` with room for its value, as records of
/// the encoder's list ([`Encoder::push_field`]'s form): the two fields
/// every answer starts with, added in one copy with the date filled in.
const SERVER_DATE: [u8; SERVER_DATE_LEN] = {
    let s = crate::http1::SERVER;
    let mut r = [0u8; SERVER_DATE_LEN];
    r[0] = 6;
    r[2] = s.len() as u8;
    let mut i = 0;
    while i < 6 {
        r[6 + i] = b"server"[i];
        i += 1;
    }
    let mut i = 0;
    while i < s.len() {
        r[12 + i] = s[i];
        i += 1;
    }
    let d = 12 + s.len();
    r[d] = 4;
    r[d + 2] = DATE_LEN as u8;
    let mut i = 0;
    while i < 4 {
        r[d + 6 + i] = b"date"[i];
        i += 1;
    }
    r
};
const SERVER_DATE_LEN: usize = 12 + crate::http1::SERVER.len() + 10 + DATE_LEN;
/// Their size as HTTP/1 lines.
const SERVER_DATE_H1: usize = 6 + crate::http1::SERVER.len() + 4 + 4 + DATE_LEN + 4;

/// `content-length` as the head of a record of the encoder's list
/// ([`Encoder::push_field`]'s form), the value's length (byte 2) and the
/// value to add.
const CONTENT_LENGTH_RECORD: [u8; 20] = *b"\x0e\x00\x00\x00\x00\x00content-length";

/// What [`Captured::take`] decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Not taken: the caller writes it as HTTP/1.
    No,
    /// Taken; the connection (the lane) ends after it.
    Close,
    /// Taken; the lane stays for the next stream.
    Keep,
}

impl Captured {
    /// Arms the capture for the next answer.
    pub(crate) fn arm(&mut self) {
        self.armed = true;
        self.done = false;
        self.fields.clear();
        self.fields_h1 = 0;
        self.body.clear();
        self.follows = 0;
        self.h1_len = 0;
    }

    /// Adds `content-length: n` as one record: its head, then the digits
    /// (the list has room for them: [`Captured::take`] reserved it).
    fn push_content_length(&mut self, n: u64) {
        let mut d = [0u8; 20];
        let digits = crate::http1::decimal(n, &mut d);
        let at = self.fields.len();
        self.fields.extend_from_slice(&CONTENT_LENGTH_RECORD);
        if let Some(l) = self.fields.get_mut(at + 2) {
            *l = digits.len() as u8;
        }
        self.fields.extend_from_slice(digits);
        self.fields_h1 += b"content-length".len() + digits.len() + 4;
    }

    /// Adds a field of the head if the HTTP/1 writer would send it (a
    /// name that is a token, a value without control bytes), its name in
    /// lower case: the name is checked and lowered in the one pass over
    /// its copy in the list.
    fn push_valid(&mut self, n: &[u8], v: &[u8]) {
        if n.is_empty() || !is_field_value(v) {
            return;
        }
        let start = self.fields.len();
        Encoder::push_field(&mut self.fields, n, v);
        let kept = n.len().min(usize::from(u16::MAX));
        // (A name longer than the list keeps is checked whole all the same.)
        let mut ok = kept == n.len() || is_token(&n[kept..]);
        if let Some(name) = self.fields.get_mut(start + 6..start + 6 + kept) {
            for b in name {
                let l = LOWER_TCHAR[usize::from(*b)];
                ok &= l != 0;
                *b = l;
            }
        }
        if ok {
            self.fields_h1 += n.len() + v.len() + 4;
        } else {
            self.fields.truncate(start);
        }
    }

    /// The fields kept, in order.
    #[cfg(test)]
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        Encoder::list_fields(&self.fields)
    }

    /// Takes the whole answer `head` + `body` to a request of `version`
    /// (`head_req`: HEAD) if it can go out as HTTP/2 frames as it is:
    /// a final status, a body of the size the head says, no upgrade.
    /// `body` `None`: the head alone, its body (of the size the head
    /// says) to follow from the client side ([`Captured::follows`]).
    /// `keep_alive` is the client side's state; `date` the `Date` value.
    pub(crate) fn take(
        &mut self,
        head: &RespHead<'_>,
        body: Option<&[&[u8]]>,
        version: Version,
        head_req: bool,
        keep_alive: bool,
        date: &[u8; DATE_LEN],
    ) -> Take {
        if !self.armed || self.done || !(200..=999).contains(&head.status) {
            return Take::No;
        }
        let total = body.map(|b| b.iter().map(|b| b.len() as u64).sum::<u64>());
        let framing = match (head.body, total) {
            (BodySize::Empty, Some(0) | None) => BodyFraming::ContentLength(0),
            (BodySize::Exact(n), None) => BodyFraming::ContentLength(n),
            (BodySize::Exact(n), Some(t)) if n == t => BodyFraming::ContentLength(n),
            _ => return Take::No,
        };
        let framing = match head.status {
            204 | 304 => BodyFraming::None,
            _ => framing,
        };
        if head.upgrade.is_some() || head.extra.get(b"upgrade").is_some() {
            return Take::No;
        }
        let pre = head.prepared();
        // Room for what is known to come (`server`, `date`, the prepared
        // fields, `content-length`): one reservation, no growth between.
        self.fields.clear();
        self.fields.reserve(
            SERVER_DATE_LEN + pre.map_or(0, |p| p.h2.len()) + CONTENT_LENGTH_RECORD.len() + 20,
        );
        self.fields
            .extend_from_slice(&SERVER_DATE[..SERVER_DATE_LEN - DATE_LEN]);
        self.fields.extend_from_slice(date);
        self.fields_h1 = SERVER_DATE_H1;
        // What the HTTP/1 writer refuses is not sent either.
        match pre {
            // Checked and lowered when they were prepared.
            Some(p) => {
                self.fields.extend_from_slice(p.h2);
                self.fields_h1 += p.h1.len();
                head.each_extra(|n, v| self.push_valid(n, v));
            }
            None => head.each_field(|n, v| self.push_valid(n, v)),
        }
        if let BodyFraming::ContentLength(n) = framing {
            self.push_content_length(n);
        }
        // Prepared fields hold no framing field (`msg::Prepared`, as the
        // HTTP/1 writer reads them): only the added ones may say `close`.
        let field = |n: &[u8]| match pre {
            Some(_) => head.extra.get(n),
            None => head.fields.get(n).or_else(|| head.extra.get(n)),
        };
        let close_asked = field(b"connection").is_some_and(|v| {
            v.split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
        });
        let keep = keep_alive && !head.close && !close_asked;
        let no_body = head_req || framing == BodyFraming::None;
        self.body.clear();
        self.follows = 0;
        match (no_body, body, framing) {
            (true, _, _) => {}
            (false, Some(body), _) => {
                for b in body {
                    self.body.extend_from_slice(b);
                }
            }
            (false, None, BodyFraming::ContentLength(n)) => self.follows = n,
            (false, None, _) => {}
        }
        // The HTTP/1 size: status line, fields, the `Connection` line,
        // the empty line, the body.
        let mut len = 9 + 4 + reason_phrase(head.status).len() + 2;
        len += self.fields_h1;
        if !keep {
            len += b"Connection: close\r\n".len();
        } else if version == Version::Http10 {
            len += b"Connection: keep-alive\r\n".len();
        }
        len += 2 + self.body.len();
        // (A body that follows is counted by the caller, as on HTTP/1.)
        self.h1_len = len as u64;
        self.status = head.status;
        self.done = true;
        self.armed = false;
        if keep {
            Take::Keep
        } else {
            Take::Close
        }
    }

    /// The HTTP/1 size of the answer taken for the current request (0:
    /// none was).
    pub(crate) fn sent(&self) -> u64 {
        if self.done {
            self.h1_len
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mux::h1::out::H1Out;
    use crate::stream::msg::{FieldBuf, Fields};

    /// The value of the field kept named `name`.
    fn kept<'c>(c: &'c Captured, name: &[u8]) -> Option<&'c [u8]> {
        c.fields().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    const DATE: [u8; crate::http1::DATE_LEN] = *b"Mon, 23 Nov 2026 18:00:00 GMT";

    /// The HTTP/1 bytes of the same answer, and whether that side closes.
    fn h1(head: RespHead<'_>, body: &[&[u8]], v: Version, head_req: bool) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, v, head_req, true);
        o.whole(head, body);
        let closing = o.closing();
        (out, closing)
    }

    fn cap(head: RespHead<'_>, body: &[&[u8]], v: Version, head_req: bool) -> (Captured, Take) {
        let mut c = Captured::default();
        c.arm();
        let t = c.take(&head, Some(body), v, head_req, true, &DATE);
        (c, t)
    }

    /// The fields kept are `server`, `date`, then `rest`.
    fn assert_sent(c: &Captured, rest: &[(&[u8], &[u8])]) {
        let mut want: Vec<(&[u8], &[u8])> = vec![(b"server", b"ebb"), (b"date", &DATE)];
        want.extend_from_slice(rest);
        assert_eq!(c.fields().collect::<Vec<_>>(), want);
    }

    #[test]
    fn a_fixed_answer_is_taken_with_the_fields_and_size_of_its_http1_form() {
        let mut extra = FieldBuf::default();
        extra.push(b"Content-Type", b"text/plain");
        extra.push(b"X-Bad", b"a\x01b");
        extra.push(b"Content-Length", b"99");
        let head = RespHead {
            extra: extra.fields(),
            ..RespHead::new(200, BodySize::Exact(5))
        };
        let body: [&[u8]; 2] = [b"hel", b"lo"];
        let (c, t) = cap(head, &body, Version::Http11, false);
        assert_eq!(t, Take::Keep);
        assert_sent(
            &c,
            &[(b"content-type", b"text/plain"), (b"content-length", b"5")],
        );
        assert_eq!(c.body, b"hello");
        let (raw, closing) = h1(head, &body, Version::Http11, false);
        assert!(!closing);
        assert_eq!(c.sent(), raw.len() as u64);
    }

    #[test]
    fn names_that_are_not_tokens_are_dropped_and_the_others_lowered() {
        let mut extra = FieldBuf::default();
        let names: [&[u8]; 5] = [b"X-MiXed_Case~1", b"X Space", b"X:Colon", b"X-\xe9", b""];
        for n in names {
            extra.push(n, b"v");
        }
        extra.push(b"ETag", b"\"5f-64\"");
        let head = RespHead {
            extra: extra.fields(),
            ..RespHead::new(200, BodySize::Exact(2))
        };
        let (c, _) = cap(head, &[b"ok"], Version::Http11, false);
        let got: Vec<_> = c.fields().skip(2).map(|(n, _)| n).collect();
        let want: [&[u8]; 3] = [b"x-mixed_case~1", b"etag", b"content-length"];
        assert_eq!(got, want);
        let (raw, _) = h1(head, &[b"ok"], Version::Http11, false);
        assert_eq!(c.sent(), raw.len() as u64);
    }

    #[test]
    fn sizes_match_http1_for_close_head_and_bodiless_statuses() {
        let mut extra = FieldBuf::default();
        extra.push(b"Connection", b"close");
        extra.push(b"Location", b"/x");
        for (status, size, body, head_req) in [
            (302u16, BodySize::Empty, &b""[..], false),
            (200, BodySize::Exact(3), b"abc", true),
            (204, BodySize::Empty, b"", false),
            (403, BodySize::Exact(4), b"nope", false),
        ] {
            let head = RespHead {
                extra: extra.fields(),
                ..RespHead::new(status, size)
            };
            let (c, t) = cap(head, &[body], Version::Http11, head_req);
            let (raw, closing) = h1(head, &[body], Version::Http11, head_req);
            assert_eq!(t, Take::Close, "{status}");
            assert!(closing);
            assert_eq!(c.sent(), raw.len() as u64, "{status}");
            if head_req || status == 204 {
                assert!(c.body.is_empty());
            }
            let cl = kept(&c, b"content-length").map(<[u8]>::to_vec);
            let raw_s = String::from_utf8_lossy(&raw).to_ascii_lowercase();
            assert_eq!(cl.is_some(), raw_s.contains("content-length:"), "{status}");
        }
    }

    #[test]
    fn content_length_records_are_push_field_records() {
        for n in [0u64, 7, 10, 100, 99_999, u64::MAX] {
            let mut c = Captured::default();
            c.push_content_length(n);
            let mut want = Vec::new();
            Encoder::push_field(&mut want, b"content-length", n.to_string().as_bytes());
            assert_eq!(c.fields, want, "{n}");
            assert_eq!(c.fields_h1, format!("Content-Length: {n}\r\n").len());
        }
    }

    #[test]
    fn prepared_fields_go_as_they_are_and_only_added_ones_may_close() {
        let mut own = crate::proxy::PreparedFields::default();
        own.push(b"Content-Type", b"text/plain");
        own.push(b"ETag", b"\"64-1\"");
        let mut close = FieldBuf::default();
        close.push(b"Connection", b"close");
        for (extra, want) in [(FieldBuf::default(), Take::Keep), (close, Take::Close)] {
            let head = RespHead {
                fields: own.fields(),
                pre: Some(own.prepared()),
                extra: extra.fields(),
                ..RespHead::new(200, BodySize::Exact(2))
            };
            let (c, t) = cap(head, &[b"ok"], Version::Http11, false);
            assert_eq!(t, want);
            let own_sent: [(&[u8], &[u8]); 3] = [
                (b"content-type", b"text/plain"),
                (b"etag", b"\"64-1\""),
                (b"content-length", b"2"),
            ];
            assert_sent(&c, &own_sent);
            let (raw, closing) = h1(head, &[b"ok"], Version::Http11, false);
            assert_eq!(closing, want == Take::Close);
            assert_eq!(c.sent(), raw.len() as u64);
        }
    }

    #[test]
    fn a_head_alone_says_what_body_follows() {
        let mut extra = FieldBuf::default();
        extra.push(b"Content-Type", b"text/plain");
        let head = RespHead {
            extra: extra.fields(),
            ..RespHead::new(200, BodySize::Exact(11))
        };
        let mut c = Captured::default();
        c.arm();
        let t = c.take(&head, None, Version::Http11, false, true, &DATE);
        assert_eq!(t, Take::Keep);
        assert_eq!(c.follows, 11);
        assert!(c.body.is_empty());
        assert_eq!(kept(&c, b"content-length"), Some(&b"11"[..]));
        // The head's size as HTTP/1 (the body is counted apart).
        let (raw, _) = h1(head, &[], Version::Http11, true);
        assert_eq!(c.sent(), raw.len() as u64);
        // HEAD, or a 304: nothing follows.
        c.arm();
        c.take(&head, None, Version::Http11, true, true, &DATE);
        assert_eq!(c.follows, 0);
        c.arm();
        let nm = RespHead::new(304, BodySize::Empty);
        c.take(&nm, None, Version::Http11, false, true, &DATE);
        assert_eq!(c.follows, 0);
        assert!(kept(&c, b"content-length").is_none());
    }

    #[test]
    fn interim_upgrade_and_unknown_sizes_are_left_to_http1() {
        let unknown = RespHead::new(200, BodySize::Unknown);
        assert_eq!(cap(unknown, &[b"x"], Version::Http11, false).1, Take::No);
        let wrong = RespHead::new(200, BodySize::Exact(4));
        assert_eq!(cap(wrong, &[b"x"], Version::Http11, false).1, Take::No);
        let interim = RespHead::new(101, BodySize::Empty);
        assert_eq!(cap(interim, &[], Version::Http11, false).1, Take::No);
        let mut up = FieldBuf::default();
        up.push(b"upgrade", b"websocket");
        let h = RespHead {
            extra: up.fields(),
            ..RespHead::new(200, BodySize::Empty)
        };
        assert_eq!(cap(h, &[], Version::Http11, false).1, Take::No);
        // Not armed: nothing taken; taken once per arming.
        let mut c = Captured::default();
        let ok = RespHead::new(200, BodySize::Empty);
        assert_eq!(
            c.take(&ok, Some(&[]), Version::Http11, false, true, &DATE),
            Take::No
        );
        c.arm();
        assert_eq!(
            c.take(&ok, Some(&[]), Version::Http11, false, true, &DATE),
            Take::Keep
        );
        assert_eq!(
            c.take(&ok, Some(&[]), Version::Http11, false, true, &DATE),
            Take::No
        );
        assert_eq!(Fields::EMPTY.len(), 0);
    }
}
