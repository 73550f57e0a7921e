//! The message interface: what a stream receives from its client side and
//! sends back, and what it sends to and receives from its server side,
//! whatever protocol carries it.
//!
//! An exchange is two messages, a request and a response. Each is a
//! sequence of [`Msg`]s:
//!
//! ```text
//!   Head --> Data* --> Trailers? --> End          (or Abort at any point)
//! ```
//!
//! A mux (HTTP/1 or HTTP/2, client or server side) turns its protocol's
//! bytes into these and back; the stream (one exchange: rules, choice of
//! answer, log line) sees only these. So the stream code is the same for
//! H1->H1, H2->H1 and, later, H1->H2.
//!
//! # Heads are views, not copies
//!
//! A head is a *view* ([`ReqHead`], [`RespHead`]) over bytes its mux keeps
//! still: the method, target parts and field values are slices of one
//! buffer, the fields a list of [`Field`] spans into it ([`Fields`]). The
//! HTTP/1 mux builds the view over its read buffer and the spans its parser
//! already wrote (no copy, no allocation per request); the HTTP/2 mux over
//! the per-stream [`FieldBuf`] it decodes HPACK into (one `Vec<u8>` and one
//! `Vec<Field>` per stream slot, cleared and reused: after warm-up no
//! allocation per request either). Pseudo-header fields are not fields
//! here: they are the head's own parts (method, scheme, authority, path,
//! status).
//!
//! A view borrows its mux, so it cannot be kept across runs. The bytes
//! stay where they are until the stream *releases* the head (the H1 mux
//! then consumes the head from its buffer; the H2 mux frees the slot): a
//! stream that waits (on the disk, the server queue, a stats page) asks its
//! client side for the view again when it resumes.
//!
//! # Fields the mux owns
//!
//! Connection-specific fields (RFC 9110 §7.6.1: `Connection` and what it
//! names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Transfer-Encoding`,
//! `Upgrade`) and `Content-Length` belong to the protocol, not the
//! message. A mux leaves them out of the [`Fields`] it *produces* where it
//! can do so without copying, says what they meant in the head's own parts
//! ([`BodySize`], [`ReqHead::close`], [`ReqHead::upgrade`]), and writes its
//! own from those parts when it *consumes* a head, skipping any such field
//! a view still holds (see [`is_framing_field`]). The stream never relies
//! on them passing through.
//!
//! # Edits without copies
//!
//! `http-request`/`http-response` rules delete and add fields. The stream
//! does not rebuild the list: a head carries the source fields, an
//! [`omit`](RespHead::omit) test for the names the rules delete, and the
//! [`extra`](RespHead::extra) fields the rules add (written into the
//! stream's own reusable [`FieldBuf`]). A mux writes `fields` minus
//! `omit`, then `extra`: [`RespHead::each_field`] walks exactly that.
//!
//! # Bodies and back-pressure
//!
//! [`Msg::Data`] borrows its bytes from the producer's buffer. A consumer
//! takes what it has room for and says how much ([`MsgSink::put`] returns
//! the count); the producer keeps the rest and offers it again when the
//! consumer signals room. H1 chunked framing is the mux's business: the
//! stream sees the chunk data, never the chunk lines. HTTP/2 flow-control
//! windows are the H2 mux's: it takes no more than the window allows.

use crate::http1::{HeaderSpan, Method};

/// One field line: name and value as spans into a head's buffer (the H1
/// parser's own record, 16 bytes).
pub type Field = HeaderSpan;

/// The protocol version a message arrived with or leaves with.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0
    Http10,
    /// HTTP/1.1
    Http11,
    /// HTTP/2
    Http2,
}

impl Version {
    /// The version of an HTTP/1 head.
    pub fn from_h1(v: crate::http1::Version) -> Version {
        match v {
            crate::http1::Version::Http10 => Version::Http10,
            crate::http1::Version::Http11 => Version::Http11,
        }
    }
}

/// How long a message's body is, as far as its head says.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BodySize {
    /// No body: the head is followed by [`Msg::End`] (or trailers).
    Empty,
    /// Exactly this many bytes (H1 `Content-Length`, H2 `content-length`).
    Exact(u64),
    /// Unknown until [`Msg::End`]: H1 chunked, an H1 response read until
    /// close, an H2 message without `content-length`.
    Unknown,
}

/// The form of a request's target (RFC 9112 §3.2); H2 requests are origin
/// form, or authority form for CONNECT.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Form {
    /// `/path?query`
    Origin,
    /// `scheme://authority/path?query`
    Absolute,
    /// `host:port` (CONNECT)
    Authority,
    /// `*` (OPTIONS)
    Asterisk,
}

/// A list of fields over one buffer: what a head carries.
#[derive(Copy, Clone, Debug)]
pub struct Fields<'a> {
    /// The bytes the spans index.
    pub buf: &'a [u8],
    /// The field spans, in order, duplicates kept.
    pub list: &'a [Field],
}

impl<'a> Fields<'a> {
    /// No field.
    pub const EMPTY: Fields<'static> = Fields {
        buf: &[],
        list: &[],
    };

    /// The fields as (name, value), in order.
    pub fn iter(self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        self.list
            .iter()
            .map(move |f| (f.name.get(self.buf), f.value.get(self.buf)))
    }

    /// The first value of field `name` (ASCII case-insensitive).
    #[inline]
    pub fn get(self, name: &[u8]) -> Option<&'a [u8]> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Number of fields.
    pub fn len(self) -> usize {
        self.list.len()
    }

    /// Whether there is no field.
    pub fn is_empty(self) -> bool {
        self.list.is_empty()
    }
}

/// An owned, reusable field list: the H2 mux's decoded heads and
/// trailers, the fields a stream's rules add. [`FieldBuf::clear`] keeps
/// the capacity, so a warm one does not allocate.
#[derive(Clone, Debug, Default)]
pub struct FieldBuf {
    buf: Vec<u8>,
    list: Vec<Field>,
}

impl FieldBuf {
    /// Empties the list, keeping its allocations.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.list.clear();
    }

    /// Appends a field.
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        let name = self.put(name);
        let value = self.put(value);
        self.list.push(Field { name, value });
    }

    /// Appends a field whose value `value` writes (an evaluated format),
    /// unless that value is empty: then nothing (HAProxy's
    /// http_reply_to_htx adds no such field).
    pub fn push_nonempty_with(&mut self, name: &[u8], value: impl FnOnce(&mut Vec<u8>)) {
        let mark = self.buf.len();
        let name = self.put(name);
        let start = self.buf.len() as u32;
        value(&mut self.buf);
        if self.buf.len() as u32 == start {
            self.buf.truncate(mark);
            return;
        }
        let value = crate::http1::Span {
            start,
            end: self.buf.len() as u32,
        };
        self.list.push(Field { name, value });
    }

    /// Appends every field of `f`.
    pub fn extend(&mut self, f: Fields<'_>) {
        for (n, v) in f.iter() {
            self.push(n, v);
        }
    }

    /// Stores bytes that are not a field (an H2 head's pseudo-header
    /// values, say) and returns where they are: [`FieldBuf::bytes`]
    /// indexed by the span gives them back.
    pub fn put(&mut self, bytes: &[u8]) -> crate::http1::Span {
        let start = self.buf.len() as u32;
        self.buf.extend_from_slice(bytes);
        crate::http1::Span {
            start,
            end: self.buf.len() as u32,
        }
    }

    /// The stored bytes (what the spans index).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The fields as a view.
    pub fn fields(&self) -> Fields<'_> {
        Fields {
            buf: &self.buf,
            list: &self.list,
        }
    }
}

/// A request head, as a view over its mux's bytes.
#[derive(Copy, Clone, Debug)]
pub struct ReqHead<'a> {
    /// The method, classified.
    pub method: Method,
    /// The method's bytes (for [`Method::Other`] and logs).
    pub method_raw: &'a [u8],
    /// The target's form.
    pub form: Form,
    /// `:scheme`, or an absolute-form target's scheme.
    pub scheme: Option<&'a [u8]>,
    /// The authority: `:authority` (else `host`) for H2; an absolute-form
    /// target's authority, else `Host`, for H1.
    pub authority: Option<&'a [u8]>,
    /// Path and query (empty for authority and asterisk form).
    pub path: &'a [u8],
    /// The version the client spoke.
    pub version: Version,
    /// An HTTP/1 version HAProxy passes on as it came (see
    /// [`crate::http1::RequestHead::version_raw`]).
    pub version_raw: Option<&'a [u8]>,
    /// The fields (connection-specific ones may remain: see the module
    /// doc).
    pub fields: Fields<'a>,
    /// How much body follows.
    pub body: BodySize,
    /// `Expect: 100-continue` (H1) or the same field on H2.
    pub expect_continue: bool,
    /// The protocol an H1 upgrade asks for (`Upgrade` listed in
    /// `Connection`); H2 has none (extended CONNECT is a method).
    pub upgrade: Option<&'a [u8]>,
    /// The client asked to end its connection after this exchange (H1
    /// `Connection: close`, HTTP/1.0 without keep-alive). Always false on
    /// H2, whose streams do not own the connection.
    pub close: bool,
    /// The head's size on the wire (for the request byte counters).
    pub wire_len: usize,
}

impl<'a> ReqHead<'a> {
    /// The view of an HTTP/1 head parsed from `buf`.
    pub fn from_h1(buf: &'a [u8], h: &'a crate::http1::RequestHead) -> ReqHead<'a> {
        use crate::http1::{BodyFraming, TargetForm};
        let form = match h.target_form {
            TargetForm::Origin => Form::Origin,
            TargetForm::Absolute => Form::Absolute,
            TargetForm::Authority => Form::Authority,
            TargetForm::Asterisk => Form::Asterisk,
        };
        let scheme = match form {
            Form::Absolute => {
                let t = h.target.get(buf);
                t.iter().position(|&c| c == b':').map(|i| &t[..i])
            }
            _ => None,
        };
        ReqHead {
            method: h.method,
            method_raw: h.method_span.get(buf),
            form,
            scheme,
            authority: h.host.map(|s| s.get(buf)),
            path: h.path.get(buf),
            version: Version::from_h1(h.version),
            version_raw: h.version_raw.map(|s| s.get(buf)),
            fields: Fields {
                buf,
                list: &h.headers,
            },
            body: match h.framing {
                BodyFraming::None | BodyFraming::UntilClose => BodySize::Empty,
                BodyFraming::ContentLength(0) => BodySize::Empty,
                BodyFraming::ContentLength(n) => BodySize::Exact(n),
                BodyFraming::Chunked => BodySize::Unknown,
            },
            expect_continue: h.expect_continue,
            upgrade: h.upgrade.map(|s| s.get(buf)),
            close: !h.keep_alive,
            wire_len: h.head_len,
        }
    }
}

/// A test on a field name: the fields a response's rules delete.
pub type Omit<'a> = &'a dyn Fn(&[u8]) -> bool;

/// A response head, as a view: from a server's mux, or built by the
/// stream (a fixed answer, a file, an error).
#[derive(Copy, Clone)]
pub struct RespHead<'a> {
    /// The status code.
    pub status: u16,
    /// An H1 reason phrase; empty: the code's standard one. H2 has none.
    pub reason: &'a [u8],
    /// The fields from the source (a server's head, a prepared answer).
    pub fields: Fields<'a>,
    /// Names the response rules delete from `fields` (`None`: none).
    pub omit: Option<Omit<'a>>,
    /// Fields added after `fields` (rules, the stream's own such as
    /// `Location`).
    pub extra: Fields<'a>,
    /// `fields` as each mux writes them, prepared ahead (`None`: not);
    /// not used when `omit` is set.
    pub pre: Option<Prepared<'a>>,
    /// How much body follows.
    pub body: BodySize,
    /// The stream wants the client connection ended after this answer
    /// (H1 writes `Connection: close`; H2 ignores it).
    pub close: bool,
    /// A 101 answer switching to this protocol: after it, bytes flow both
    /// ways untouched (H1 only).
    pub upgrade: Option<&'a [u8]>,
    /// An answer ebb makes: its `Content-Length` goes before the field of
    /// this index among those written (`fields`, then `extra`), where
    /// HAProxy 2.6 puts it in its own answers (H1 only; `None`: after
    /// them all).
    pub length_at: Option<u8>,
}

impl std::fmt::Debug for RespHead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RespHead")
            .field("status", &self.status)
            .field("fields", &self.fields.len())
            .field("extra", &self.extra.len())
            .field("body", &self.body)
            .field("close", &self.close)
            .finish()
    }
}

impl<'a> RespHead<'a> {
    /// A head with only a status and a body size.
    pub fn new(status: u16, body: BodySize) -> RespHead<'static> {
        RespHead {
            status,
            reason: b"",
            fields: Fields::EMPTY,
            omit: None,
            extra: Fields::EMPTY,
            pre: None,
            body,
            close: false,
            upgrade: None,
            length_at: None,
        }
    }

    /// Every field a mux writes, in order: `fields` minus `omit`, then
    /// `extra`; connection-specific and framing fields are skipped (the
    /// mux writes its own).
    #[inline]
    pub fn each_field(&self, mut f: impl FnMut(&'a [u8], &'a [u8])) {
        let omit = self.omit;
        for (n, v) in self.fields.iter() {
            if is_framing_field(n) || omit.is_some_and(|o| o(n)) {
                continue;
            }
            f(n, v);
        }
        self.each_extra(f);
    }

    /// The fields of `extra` a mux writes (framing ones skipped).
    #[inline]
    pub fn each_extra(&self, mut f: impl FnMut(&'a [u8], &'a [u8])) {
        for (n, v) in self.extra.iter() {
            if !is_framing_field(n) {
                f(n, v);
            }
        }
    }

    /// `fields` as prepared ahead ([`RespHead::pre`]), when a mux may
    /// copy them instead of checking and encoding `fields` one by one.
    #[inline]
    pub fn prepared(&self) -> Option<Prepared<'a>> {
        self.pre.filter(|_| self.omit.is_none())
    }
}

/// A whole HTTP/1 answer written once, ahead of the requests it answers
/// (an all-literal `http-request return`): its bytes before the `Date`
/// value and after it, as the HTTP/1 encoder writes them for an HTTP/1.1
/// request (not `HEAD`) on a connection kept alive
/// (`mux::h1::out::whole_answer`). An answer to such a request is then
/// two copies and the date, the same bytes (the unit test
/// `a_whole_answer_is_what_the_encoder_writes` holds them to it); any
/// other request is answered through the encoder.
#[derive(Debug)]
pub struct WholeAnswer {
    pre: Box<[u8]>,
    post: Box<[u8]>,
}

impl WholeAnswer {
    /// The answer whose date goes between `pre` and `post`.
    pub fn new(pre: &[u8], post: &[u8]) -> WholeAnswer {
        WholeAnswer {
            pre: pre.into(),
            post: post.into(),
        }
    }

    /// Appends the answer dated `date` to `out`.
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>, date: &[u8]) {
        out.reserve(self.pre.len() + date.len() + self.post.len());
        out.extend_from_slice(&self.pre);
        out.extend_from_slice(date);
        out.extend_from_slice(&self.post);
    }
}

/// A head's `fields` written once in each mux's form by whoever built
/// them (a served file's own fields, made when its cache entry is
/// filled), for many answers: every name a token, every value free of
/// control bytes, no framing field. A mux copies its form instead of
/// checking and encoding the fields one by one; `fields` stays what any
/// other reader of the head sees.
#[derive(Copy, Clone, Debug)]
pub struct Prepared<'a> {
    /// As HTTP/1 lines: `Name: value` CRLF, each.
    pub h1: &'a [u8],
    /// As the HTTP/2 encoder's field list (`Encoder::push_field`'s form,
    /// names in lower case).
    pub h2: &'a [u8],
}

/// Whether a field belongs to the protocol rather than the message
/// (RFC 9110 §7.6.1, RFC 9113 §8.2.2): a mux consuming a head skips it.
#[inline]
pub fn is_framing_field(name: &[u8]) -> bool {
    const NAMES: [&[u8]; 7] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
    ];
    NAMES.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// Why a message stopped before its end.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Abort {
    /// The peer went away or reset (H1: closed; H2: RST_STREAM received).
    Gone,
    /// A protocol error in the message (a broken chunk, a DATA total that
    /// disagrees with `content-length`).
    Protocol,
    /// A timeout of the side that produced it.
    Timeout,
    /// The stream gave up on the exchange (its own error, a server that
    /// failed past the response head). H1 closes; H2 resets the stream.
    Cancel,
}

/// One step of a message, borrowing what it carries from its producer.
#[derive(Debug)]
pub enum Msg<'a, H> {
    /// The head.
    Head(H),
    /// Body bytes (de-framed: no chunk lines, no frame headers).
    Data(&'a [u8]),
    /// Trailer fields; [`Msg::End`] follows.
    Trailers(Fields<'a>),
    /// The message is complete.
    End,
    /// The message stopped early.
    Abort(Abort),
}

/// A request step, from a client side to its stream, or from a stream to
/// a server side.
pub type ReqMsg<'a> = Msg<'a, ReqHead<'a>>;
/// A response step, from a server side (or a service) to its stream, or
/// from a stream to its client side.
pub type RespMsg<'a> = Msg<'a, RespHead<'a>>;

/// What takes messages: a mux's sending half for one stream.
pub trait MsgSink<H> {
    /// Body bytes it can take now without buffering beyond its bound (a
    /// buffer's room, an H2 window); 0 means wait for its room signal.
    fn room(&self) -> usize;
    /// Takes a step. For [`Msg::Data`] returns the bytes taken (at most
    /// [`MsgSink::room`]); every other step is taken whole and returns 0.
    fn put(&mut self, m: Msg<'_, H>) -> usize;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_h1_head_is_a_view_over_its_buffer() {
        let raw = b"POST http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\nX-A: 1\r\n\r\nabc";
        let mut h = crate::http1::RequestHead::with_capacity(4);
        let r = crate::http1::parse_request_into(raw, &Default::default(), &mut h).unwrap();
        assert!(r.is_complete());
        let v = ReqHead::from_h1(raw, &h);
        assert_eq!(v.method, Method::Post);
        assert_eq!(v.form, Form::Absolute);
        assert_eq!(v.scheme, Some(&b"http"[..]));
        assert_eq!(v.authority, Some(&b"example.com"[..]));
        assert_eq!(v.path, b"/a?b");
        assert_eq!(v.body, BodySize::Exact(3));
        assert_eq!(v.version, Version::Http11);
        assert!(!v.close);
        assert_eq!(v.fields.get(b"x-a"), Some(&b"1"[..]));
        assert_eq!(v.wire_len, raw.len() - 3);
        // The spans point into the caller's buffer: nothing was copied.
        let p = v.path.as_ptr() as usize - raw.as_ptr() as usize;
        assert_eq!(&raw[p..p + 4], b"/a?b");
    }

    #[test]
    fn an_h1_1_0_head_asks_to_close_and_chunked_is_unknown() {
        let raw = b"GET / HTTP/1.0\r\n\r\n";
        let h = match crate::http1::parse_request(raw, &Default::default()).unwrap() {
            crate::http1::Status::Complete(h) => h,
            _ => panic!("partial"),
        };
        let v = ReqHead::from_h1(raw, &h);
        assert!(v.close);
        assert_eq!(v.version, Version::Http10);
        assert_eq!(v.body, BodySize::Empty);
        let raw = b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        let h = match crate::http1::parse_request(raw, &Default::default()).unwrap() {
            crate::http1::Status::Complete(h) => h,
            _ => panic!("partial"),
        };
        assert_eq!(ReqHead::from_h1(raw, &h).body, BodySize::Unknown);
    }

    #[test]
    fn a_field_buf_serves_an_h2_style_head_without_growing_when_warm() {
        // What an H2 mux does with a decoded HPACK list: pseudo-header
        // values stored as bytes, regular fields as fields.
        let mut fb = FieldBuf::default();
        let fill = |fb: &mut FieldBuf| {
            fb.clear();
            let path = fb.put(b"/index.html");
            let auth = fb.put(b"example.com");
            fb.push(b"accept", b"*/*");
            fb.push(b"cookie", b"a=1");
            (path, auth)
        };
        let (path, auth) = fill(&mut fb);
        let v = ReqHead {
            method: Method::Get,
            method_raw: b"GET",
            form: Form::Origin,
            scheme: Some(b"https"),
            authority: Some(auth.get(fb.bytes())),
            path: path.get(fb.bytes()),
            version: Version::Http2,
            version_raw: None,
            fields: fb.fields(),
            body: BodySize::Empty,
            expect_continue: false,
            upgrade: None,
            close: false,
            wire_len: 0,
        };
        assert_eq!(v.path, b"/index.html");
        assert_eq!(v.authority, Some(&b"example.com"[..]));
        assert_eq!(v.fields.len(), 2);
        assert_eq!(v.fields.get(b"Cookie"), Some(&b"a=1"[..]));
        // The next request on the slot reuses its allocations.
        let cap = (fb.buf.capacity(), fb.list.capacity());
        fill(&mut fb);
        assert_eq!((fb.buf.capacity(), fb.list.capacity()), cap);
    }

    #[test]
    fn each_field_applies_omit_and_extra_and_skips_framing() {
        let mut src = FieldBuf::default();
        src.push(b"Content-Type", b"text/plain");
        src.push(b"Content-Length", b"5");
        src.push(b"Server", b"origin");
        src.push(b"Connection", b"close");
        let mut add = FieldBuf::default();
        add.push(b"X-Added", b"yes");
        let omit = |n: &[u8]| n.eq_ignore_ascii_case(b"server");
        let h = RespHead {
            fields: src.fields(),
            omit: Some(&omit),
            extra: add.fields(),
            ..RespHead::new(200, BodySize::Exact(5))
        };
        let mut seen = Vec::new();
        h.each_field(|n, v| seen.push((n.to_vec(), v.to_vec())));
        assert_eq!(
            seen,
            vec![
                (b"Content-Type".to_vec(), b"text/plain".to_vec()),
                (b"X-Added".to_vec(), b"yes".to_vec()),
            ]
        );
    }

    #[test]
    fn a_sink_takes_what_it_has_room_for() {
        struct Window {
            room: usize,
            got: Vec<u8>,
            ended: bool,
        }
        impl MsgSink<RespHead<'_>> for Window {
            fn room(&self) -> usize {
                self.room
            }
            fn put(&mut self, m: RespMsg<'_>) -> usize {
                match m {
                    Msg::Data(d) => {
                        let n = d.len().min(self.room);
                        self.got.extend_from_slice(&d[..n]);
                        self.room -= n;
                        n
                    }
                    Msg::End => {
                        self.ended = true;
                        0
                    }
                    _ => 0,
                }
            }
        }
        let mut w = Window {
            room: 4,
            got: Vec::new(),
            ended: false,
        };
        w.put(Msg::Head(RespHead::new(200, BodySize::Exact(6))));
        let body = b"abcdef";
        let n = w.put(Msg::Data(body));
        assert_eq!(n, 4);
        w.room = 10;
        assert_eq!(w.put(Msg::Data(&body[n..])), 2);
        w.put(Msg::End);
        assert_eq!(w.got, body);
        assert!(w.ended);
    }
}
