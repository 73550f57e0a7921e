//! The HTTP/1 encoding of an answer: what the client side makes of the
//! response messages ([`crate::stream::msg`]) its stream gives it.
//!
//! A stream says *what* it answers: a [`RespHead`] view (status, fields,
//! how much body follows, whether it wants the connection ended), then
//! [`Msg::Data`], maybe [`Msg::Trailers`], and [`Msg::End`]. [`H1Out`]
//! says *how* on HTTP/1: the status line with `Server` and `Date`, the
//! fields (the connection-specific and framing ones a view may still hold
//! are skipped, [`RespHead::each_field`]), the framing field chosen from
//! the body size and the request's version (`Content-Length`, chunked on
//! HTTP/1.1, read-until-close on HTTP/1.0), the one `Connection:` decision,
//! chunk lines around the data, and no body at all for `HEAD` or a
//! status that has none (1xx, 204, 304; RFC 9110 §6.4.1).
//!
//! It is socket-free: it appends to the client side's output buffer, and
//! the client side writes that buffer (and a file body after it, with
//! `sendfile`) as before. The HTTP/2 client side turns the same messages
//! into HEADERS and DATA frames (`h2::msg::ServerSink`).

use crate::http1::{
    is_field_value, is_token, BodyFraming, ChunkedEncoder, ResponseWriter, Version, CHUNK_END,
    DATE_LEN,
};
use crate::stream::msg::{BodySize, Msg, MsgSink, RespHead, RespMsg, WholeAnswer};

/// One answer being written as HTTP/1 bytes into `out`.
pub(crate) struct H1Out<'a> {
    out: &'a mut Vec<u8>,
    date: [u8; DATE_LEN],
    /// The request's version (an HTTP/1.0 client gets no chunks, and an
    /// explicit `Connection: keep-alive`).
    version: Version,
    /// The request was `HEAD`: the head says what GET would send, no body
    /// follows.
    head_req: bool,
    /// The stream keeps the connection for another request, unless the
    /// head asks to close ([`RespHead::close`]) or the framing forbids it.
    keep_alive: bool,
    /// The body goes in chunks (`None`: as it is).
    chunked: Option<ChunkedEncoder>,
    no_body: bool,
    /// The body is complete (its end or its trailers were written).
    ended: bool,
    closing: bool,
    /// `option h1-case-adjust-bogus-client`: the head's names as the map
    /// says.
    case: Option<&'a crate::http1::CaseMap>,
}

impl<'a> H1Out<'a> {
    /// An encoder for the answer to a request of `version` (`head_req`:
    /// it was `HEAD`), appending to `out`; `date` is the `Date` value.
    pub(crate) fn new(
        out: &'a mut Vec<u8>,
        date: [u8; DATE_LEN],
        version: Version,
        head_req: bool,
        keep_alive: bool,
    ) -> H1Out<'a> {
        H1Out {
            out,
            date,
            version,
            head_req,
            keep_alive,
            chunked: None,
            no_body: false,
            ended: false,
            closing: !keep_alive,
            case: None,
        }
    }

    /// The head's field names go through `case` (`option
    /// h1-case-adjust-bogus-client`).
    pub(crate) fn with_case(mut self, case: Option<&'a crate::http1::CaseMap>) -> Self {
        self.case = case;
        self
    }

    /// Writes the head of an answer (the status line, the fields, the
    /// framing and connection fields, the empty line).
    fn head(&mut self, h: RespHead<'_>) {
        let mut w = ResponseWriter::with_reason(self.out, h.status, h.reason, &self.date);
        let prepared = h.prepared();
        let f = framing(h.status, h.body, self.version);
        // The length in the place the answer asks for (HAProxy's order in
        // the answers it makes), else with the framing after the fields.
        let mut early = match (h.length_at, f) {
            (Some(at), BodyFraming::ContentLength(n)) => Some((usize::from(at), n)),
            _ => None,
        };
        let length_first = early.is_some();
        let mut seen = 0usize;
        // A field that is not a token, or a value with a control
        // byte, is refused by the writer (no response splitting).
        match prepared {
            Some(p) => {
                for line in p.h1.split_inclusive(|&b| b == b'\n') {
                    length_here(&mut w, &mut early, &mut seen);
                    w.checked_lines(line);
                }
                h.each_extra(|n, v| {
                    length_here(&mut w, &mut early, &mut seen);
                    let _ = w.header(n, v);
                });
            }
            None => h.each_field(|n, v| {
                length_here(&mut w, &mut early, &mut seen);
                let _ = w.header(n, v);
            }),
        }
        if let Some((_, n)) = early {
            let _ = w.header_u64(b"Content-Length", n);
        }
        // `Connection` and `Upgrade` as a stream's own answer set
        // them (`http-request return ... hdr connection ...`): a 101
        // carrying `upgrade` goes with `Connection: upgrade` and
        // the connection ends after it (no tunnel follows an answer
        // ebb made); `close` closes after any answer.
        // Prepared fields hold no framing field (`msg::Prepared`): only
        // the added ones may then carry these.
        let field = |n: &[u8]| match prepared {
            Some(_) => h.extra.get(n),
            None => h.fields.get(n).or_else(|| h.extra.get(n)),
        };
        if h.status == 101 {
            if let Some(u) = field(b"upgrade") {
                let _ = w.header(b"Connection", b"upgrade");
                let _ = w.header(b"Upgrade", u);
                w.finish_bare();
                self.chunked = None;
                self.no_body = true;
                self.closing = true;
                return;
            }
        }
        // An `upgrade` the stream set on its own answer is sent
        // (HAProxy sends a `return`'s fields as given): a rule
        // may make the answer a 101 (`http-after-response
        // set-status 101`).
        if let Some(u) = h.extra.get(b"upgrade") {
            let _ = w.header(b"upgrade", u);
        }
        let close = field(b"connection").is_some_and(|v| {
            v.split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
        });
        let keep = self.keep_alive && !h.close && !close && f != BodyFraming::UntilClose;
        w.finish(
            if length_first { BodyFraming::None } else { f },
            keep,
            self.version,
        );
        self.chunked = (f == BodyFraming::Chunked).then(ChunkedEncoder::new);
        self.no_body = self.head_req || f == BodyFraming::None;
        self.closing = !keep;
    }

    /// Whether the connection must end once this answer is out.
    pub(crate) fn closing(&self) -> bool {
        self.closing
    }

    /// Writes a whole answer: the head, each body part, the end.
    pub(crate) fn whole(&mut self, head: RespHead<'_>, body: &[&[u8]]) {
        self.put(Msg::Head(head));
        for b in body {
            self.put(Msg::Data(b));
        }
        self.put(Msg::End);
    }
}

/// The whole HTTP/1 answer of `head` and `body` to an HTTP/1.1 request
/// (not `HEAD`) on a connection kept alive, as [`H1Out`] writes it, with
/// the place of its `Date` value: see [`WholeAnswer`]. `None` when it
/// would end the connection (then no request can take it as it is).
pub(crate) fn whole_answer(head: RespHead<'_>, body: &[&[u8]]) -> Option<WholeAnswer> {
    let mut out = Vec::new();
    let mut o = H1Out::new(&mut out, [0; DATE_LEN], Version::Http11, false, true);
    o.whole(head, body);
    if o.closing() {
        return None;
    }
    // The date is the first field of every head, after the status line
    // and `Server`: its placeholder is the first NUL byte (no field
    // carries one; a body may, only after it).
    let at = out.iter().position(|&b| b == 0)?;
    let post = out.get(at + DATE_LEN..)?;
    Some(WholeAnswer::new(&out[..at], post))
}

/// Before the field numbered `seen`: the `Content-Length` when it goes
/// there ([`RespHead::length_at`]).
fn length_here(w: &mut ResponseWriter<'_>, early: &mut Option<(usize, u64)>, seen: &mut usize) {
    if let Some((at, n)) = *early {
        if *seen >= at {
            let _ = w.header_u64(b"Content-Length", n);
            *early = None;
        }
    }
    *seen += 1;
}

/// The framing an HTTP/1 answer gets.
fn framing(status: u16, body: BodySize, version: Version) -> BodyFraming {
    if status < 200 || status == 204 || status == 304 {
        return BodyFraming::None;
    }
    match body {
        BodySize::Empty => BodyFraming::ContentLength(0),
        BodySize::Exact(n) => BodyFraming::ContentLength(n),
        BodySize::Unknown if version == Version::Http11 => BodyFraming::Chunked,
        BodySize::Unknown => BodyFraming::UntilClose,
    }
}

impl MsgSink<RespHead<'_>> for H1Out<'_> {
    /// The output buffer grows: the client side stops asking its stream
    /// for more while the buffer is past its bound.
    fn room(&self) -> usize {
        usize::MAX
    }

    fn put(&mut self, m: RespMsg<'_>) -> usize {
        match m {
            Msg::Head(h) => {
                let at = self.out.len();
                self.head(h);
                if let Some(m) = self.case {
                    m.adjust_head(self.out.get_mut(at..).unwrap_or(&mut []));
                }
                0
            }
            Msg::Data(d) => {
                if self.no_body || self.ended {
                    return d.len();
                }
                match &mut self.chunked {
                    Some(enc) => enc.write(self.out, d),
                    None => self.out.extend_from_slice(d),
                }
                d.len()
            }
            Msg::Trailers(t) => {
                if self.chunked.is_some() && !self.no_body && !self.ended {
                    // The last chunk with trailer fields (RFC 9112 §7.1.2);
                    // a field that could split the message is left out.
                    self.out.extend_from_slice(b"0\r\n");
                    for (n, v) in t.iter() {
                        if is_token(n) && is_field_value(v) {
                            self.out.extend_from_slice(n);
                            self.out.extend_from_slice(b": ");
                            self.out.extend_from_slice(v);
                            self.out.extend_from_slice(CHUNK_END);
                        }
                    }
                    self.out.extend_from_slice(CHUNK_END);
                    self.ended = true;
                }
                0
            }
            Msg::End => {
                if let (Some(enc), false, false) = (&mut self.chunked, self.no_body, self.ended) {
                    enc.finish(self.out);
                }
                self.ended = true;
                0
            }
            Msg::Abort(_) => {
                // The answer cannot be completed: only closing tells the
                // client so.
                self.closing = true;
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::msg::{FieldBuf, Fields};

    const DATE: [u8; DATE_LEN] = *b"Mon, 23 Nov 2026 18:00:00 GMT";

    fn text(out: &[u8]) -> String {
        String::from_utf8_lossy(out).into_owned()
    }

    #[test]
    fn a_fixed_answer_has_its_length_and_no_connection_field_on_1_1() {
        let mut fb = FieldBuf::default();
        fb.push(b"Content-Type", b"text/plain");
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http11, false, true);
        let head = RespHead {
            extra: fb.fields(),
            ..RespHead::new(200, BodySize::Exact(5))
        };
        o.whole(head, &[b"he", b"llo"]);
        assert!(!o.closing());
        assert_eq!(
            text(&out),
            "HTTP/1.1 200 OK\r\nServer: ebb\r\nDate: Mon, 23 Nov 2026 18:00:00 GMT\r\n\
             Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"
        );
    }

    #[test]
    fn a_whole_answer_is_what_the_encoder_writes() {
        let mut fb = FieldBuf::default();
        fb.push(b"Content-Type", b"text/plain");
        fb.push(b"X-A", b"b");
        for (status, body) in [(200, &b"hello"[..]), (404, b"a\0b"), (204, b""), (599, b"")] {
            let head = || RespHead {
                extra: fb.fields(),
                ..RespHead::new(status, BodySize::Exact(body.len() as u64))
            };
            let mut want = Vec::new();
            H1Out::new(&mut want, DATE, Version::Http11, false, true).whole(head(), &[body]);
            let w = whole_answer(head(), &[body]).expect("kept alive");
            let mut got = b"before".to_vec();
            w.write(&mut got, &DATE);
            assert_eq!(text(&got[6..]), text(&want));
        }
        // An answer that ends its connection is not prepared.
        let head = RespHead {
            close: true,
            ..RespHead::new(200, BodySize::Exact(0))
        };
        assert!(whole_answer(head, &[]).is_none());
    }

    #[test]
    fn the_same_bytes_as_the_writer_for_an_error_page() {
        // The error page ebb always wrote, now through the message path.
        let mut old = Vec::new();
        crate::http1::write_error_response(
            &mut old,
            405,
            &DATE,
            false,
            Version::Http10,
            false,
            &[(b"Allow", b"GET")],
        );
        let mut fb = FieldBuf::default();
        fb.push(b"Cache-Control", b"no-cache");
        fb.push(b"Content-Type", b"text/html");
        fb.push(b"Allow", b"GET");
        let (pre, post) = crate::http1::error_page(405);
        let reason = crate::http1::error_reason(405);
        let len = pre.len() + reason.len() + post.len();
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http10, false, false);
        let head = RespHead {
            extra: fb.fields(),
            length_at: Some(0),
            ..RespHead::new(405, BodySize::Exact(len as u64))
        };
        o.whole(head, &[pre.as_bytes(), reason.as_bytes(), post.as_bytes()]);
        assert!(o.closing());
        assert_eq!(text(&out), text(&old));
        // HAProxy 2.6's order (its `http_err_msgs`): the length first,
        // `Connection` last.
        assert!(
            text(&out).contains(
                "GMT\r\nContent-Length: 146\r\nCache-Control: no-cache\r\n\
                 Content-Type: text/html\r\nAllow: GET\r\nConnection: close\r\n\r\n"
            ),
            "{}",
            text(&out)
        );
        // Elsewhere among the fields (a `return`'s, before its type), at
        // the end when the index is past them, and not on a bodiless
        // status.
        for (at, status, want) in [
            (
                Some(1),
                200,
                "GMT\r\nA: 1\r\nContent-Length: 2\r\nB: 2\r\n\r\n",
            ),
            (
                Some(9),
                200,
                "GMT\r\nA: 1\r\nB: 2\r\nContent-Length: 2\r\n\r\n",
            ),
            (Some(0), 304, "GMT\r\nA: 1\r\nB: 2\r\n\r\n"),
        ] {
            let mut fb = FieldBuf::default();
            fb.push(b"A", b"1");
            fb.push(b"B", b"2");
            let mut out = Vec::new();
            let head = RespHead {
                extra: fb.fields(),
                length_at: at,
                ..RespHead::new(status, BodySize::Exact(2))
            };
            H1Out::new(&mut out, DATE, Version::Http11, false, true).whole(head, &[b"ok"]);
            assert!(text(&out).contains(want), "{}", text(&out));
        }
    }

    #[test]
    fn head_requests_and_bodiless_statuses_send_no_body() {
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http11, true, true);
        o.whole(RespHead::new(200, BodySize::Exact(3)), &[b"abc"]);
        let t = text(&out);
        assert!(t.ends_with("Content-Length: 3\r\n\r\n"), "{t}");
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http11, false, true);
        o.whole(RespHead::new(304, BodySize::Exact(3)), &[b"abc"]);
        let t = text(&out);
        assert!(t.starts_with("HTTP/1.1 304 Not Modified\r\n"), "{t}");
        assert!(!t.contains("Content-Length"), "{t}");
        assert!(t.ends_with("\r\n\r\n"), "{t}");
    }

    #[test]
    fn an_unknown_length_is_chunked_on_1_1_and_closes_on_1_0() {
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http11, false, true);
        o.whole(
            RespHead::new(200, BodySize::Unknown),
            &[b"abc", b"", b"0123456789abcdef"],
        );
        assert!(!o.closing());
        let t = text(&out);
        assert!(
            t.ends_with(
                "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n"
            ),
            "{t}"
        );
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http10, false, true);
        o.whole(RespHead::new(200, BodySize::Unknown), &[b"abc"]);
        assert!(o.closing());
        let t = text(&out);
        assert!(t.ends_with("Connection: close\r\n\r\nabc"), "{t}");
    }

    #[test]
    fn keep_alive_on_1_0_is_said_and_a_head_can_ask_to_close() {
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http10, false, true);
        o.whole(RespHead::new(204, BodySize::Empty), &[]);
        assert!(!o.closing());
        assert!(text(&out).ends_with("Connection: keep-alive\r\n\r\n"));
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http11, false, true);
        let head = RespHead {
            close: true,
            ..RespHead::new(200, BodySize::Empty)
        };
        o.whole(head, &[]);
        assert!(o.closing());
        assert!(text(&out).ends_with("Content-Length: 0\r\nConnection: close\r\n\r\n"));
    }

    #[test]
    fn framing_fields_of_a_view_are_replaced_and_omitted_fields_dropped() {
        let mut src = FieldBuf::default();
        src.push(b"Content-Length", b"999");
        src.push(b"Transfer-Encoding", b"chunked");
        src.push(b"Connection", b"keep-alive");
        src.push(b"X-Drop", b"1");
        src.push(b"X-Keep", b"2");
        let omit = |n: &[u8]| n.eq_ignore_ascii_case(b"x-drop");
        let head = RespHead {
            fields: src.fields(),
            omit: Some(&omit),
            extra: Fields::EMPTY,
            ..RespHead::new(200, BodySize::Exact(2))
        };
        let mut out = Vec::new();
        H1Out::new(&mut out, DATE, Version::Http11, false, true).whole(head, &[b"ok"]);
        let t = text(&out);
        assert!(
            !t.contains("999") && !t.contains("X-Drop") && !t.contains("chunked"),
            "{t}"
        );
        assert!(
            t.ends_with("X-Keep: 2\r\nContent-Length: 2\r\n\r\nok"),
            "{t}"
        );
    }

    #[test]
    fn trailers_end_a_chunked_body_and_an_abort_closes() {
        let mut tr = FieldBuf::default();
        tr.push(b"X-Sum", b"7");
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http11, false, true);
        o.put(Msg::Head(RespHead::new(200, BodySize::Unknown)));
        o.put(Msg::Data(b"ab"));
        o.put(Msg::Trailers(tr.fields()));
        o.put(Msg::End);
        assert!(text(&out).ends_with("2\r\nab\r\n0\r\nX-Sum: 7\r\n\r\n"));
        let mut out = Vec::new();
        let mut o = H1Out::new(&mut out, DATE, Version::Http11, false, true);
        o.put(Msg::Head(RespHead::new(200, BodySize::Exact(10))));
        o.put(Msg::Data(b"ab"));
        assert!(!o.closing());
        o.put(Msg::Abort(crate::stream::msg::Abort::Cancel));
        assert!(o.closing());
    }
}
