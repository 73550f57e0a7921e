//! HTTP/2 events to the stream layer's protocol-neutral messages
//! ([`crate::stream::msg`]) and back: what a `mux/h2` tasklet needs to put
//! each H2 stream on a stream of ebb. Sans-IO like the rest of `h2`.
//!
//! ```text
//!   server role (clients of ebb)             client role (servers behind ebb)
//!   Event::Request   -> ReqMsg::Head (+End)  ReqMsg  -> ClientSink -> HEADERS/DATA
//!   Event::Data      -> Data (+End)          Event::Response -> RespMsg::Head (+End)
//!   Event::Trailers  -> Trailers + End       Event::Data/Trailers/Reset as on the left
//!   Event::Reset     -> Abort
//!   RespMsg -> ServerSink -> HEADERS/DATA/trailers/RST_STREAM
//! ```
//!
//! Heads are views without copies: the regular fields of a decoded H2 head
//! are already [`crate::http1::HeaderSpan`]s over the HPACK list's bytes
//! ([`crate::h2::hpack::HeaderList`]), so [`Fields`] points at them; the
//! pseudo-header fields become the head's own parts. Going out, the sinks
//! write the fields a head gives ([`RespHead::each_field`] skips the
//! connection-specific and framing ones), lower-cased, and add
//! `content-length` from the head's [`BodySize`] (HTTP/2 has no other
//! framing). The sinks' [`MsgSink::room`] is the H2 stream's send window
//! (bounded by the connection's output buffer), so back-pressure is flow
//! control.
//!
//! Connection-level events (`WindowOpened`, `GoAway`, `Closed`) are the
//! mux's, not a stream's: [`request_msgs`] and [`response_msgs`] return
//! false for them.

use super::conn::{Connection, Event, HeadEncoder};
use super::frame::ErrorCode;
use super::hpack::HeaderList;
use super::request::{RequestHead, ResponseHead};
use crate::http1::Method;
use crate::stream::msg::{
    Abort, BodySize, Fields, Form, Msg, MsgSink, ReqHead, ReqMsg, RespHead, RespMsg, Version,
};

/// The fields of a decoded list from index `from` on, as a view.
fn fields_from(list: &HeaderList, from: usize) -> Fields<'_> {
    Fields {
        buf: list.bytes(),
        list: list.fields().get(from..).unwrap_or(&[]),
    }
}

fn body_size(end_stream: bool, content_length: Option<u64>) -> BodySize {
    match (end_stream, content_length) {
        (true, _) | (false, Some(0)) => BodySize::Empty,
        (false, Some(n)) => BodySize::Exact(n),
        (false, None) => BodySize::Unknown,
    }
}

/// The view of a checked H2 request head.
pub fn req_head(h: &RequestHead, end_stream: bool) -> ReqHead<'_> {
    let method_raw = h.method();
    let method = Method::from_bytes(method_raw);
    let path = h.path().unwrap_or(b"");
    let form = match (method, path) {
        (Method::Connect, _) => Form::Authority,
        (_, b"*") => Form::Asterisk,
        _ => Form::Origin,
    };
    let fields = fields_from(&h.list, h.first_regular());
    ReqHead {
        method,
        method_raw,
        form,
        scheme: h.scheme(),
        authority: h.authority(),
        path,
        version: Version::Http2,
        version_raw: None,
        fields,
        body: body_size(end_stream, h.content_length),
        expect_continue: fields
            .get(b"expect")
            .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue")),
        upgrade: None,
        close: false,
        wire_len: h.wire_len,
    }
}

/// The view of a checked H2 response head (client role).
pub fn resp_head(h: &ResponseHead, end_stream: bool) -> RespHead<'_> {
    RespHead {
        fields: fields_from(&h.list, 1),
        ..RespHead::new(h.status, body_size(end_stream, h.content_length))
    }
}

/// The messages of a body, trailers or reset event, for stream `id`;
/// false if `ev` is not one.
fn body_msgs<'a, H>(ev: &Event<'a>, f: &mut impl FnMut(u32, Msg<'a, H>)) -> bool {
    match *ev {
        Event::Data {
            id,
            data,
            end_stream,
        } => {
            if !data.is_empty() {
                f(id, Msg::Data(data));
            }
            if end_stream {
                f(id, Msg::End);
            }
        }
        Event::Trailers { id, fields } => {
            f(id, Msg::Trailers(fields_from(fields, 0)));
            f(id, Msg::End);
        }
        Event::Reset { id, remote, .. } => {
            // The client reset it, or ebb did for a protocol error.
            f(
                id,
                Msg::Abort(if remote { Abort::Gone } else { Abort::Protocol }),
            );
        }
        _ => return false,
    }
    true
}

/// Server role: the request messages an event carries, each with its
/// stream id (a head that ends the stream gives `Head` then `End`).
/// False for connection-level events.
pub fn request_msgs<'a>(ev: &Event<'a>, mut f: impl FnMut(u32, ReqMsg<'a>)) -> bool {
    if let Event::Request {
        id,
        head,
        end_stream,
    } = *ev
    {
        f(id, Msg::Head(req_head(head, end_stream)));
        if end_stream {
            f(id, Msg::End);
        }
        return true;
    }
    body_msgs(ev, &mut f)
}

/// Client role: the response messages an event carries (interim heads
/// included: their status is 1xx). False for connection-level events.
pub fn response_msgs<'a>(ev: &Event<'a>, mut f: impl FnMut(u32, RespMsg<'a>)) -> bool {
    if let Event::Response {
        id,
        head,
        end_stream,
    } = *ev
    {
        f(id, Msg::Head(resp_head(head, end_stream)));
        if end_stream {
            f(id, Msg::End);
        }
        return true;
    }
    body_msgs(ev, &mut f)
}

/// An HTTP/2 server's answer as HTTP/1.1 bytes: what an HTTP/1.1 reader
/// (a stream's server side, a health check) takes from an HTTP/2 server.
/// The body goes by `content-length` when the head gives its size, else
/// chunked, the trailers as the last chunk's.
#[derive(Default)]
pub struct H1Answer {
    /// The body is written chunked.
    pub chunked: bool,
    /// The status line has an empty reason (HTTP/2 carries none; a health
    /// check reports it as HAProxy does), not the code's standard one.
    pub no_reason: bool,
}

impl H1Answer {
    /// Appends an HTTP/1.1 status line with the code's standard reason.
    pub fn status_line(out: &mut Vec<u8>, status: u16) {
        Self::status_with(out, status, crate::http1::reason_phrase(status));
    }

    fn status_with(out: &mut Vec<u8>, status: u16, reason: &str) {
        out.extend_from_slice(b"HTTP/1.1 ");
        crate::http1::push_decimal(out, u64::from(status));
        out.push(b' ');
        out.extend_from_slice(reason.as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    /// Appends one `name: value` line.
    pub fn field(out: &mut Vec<u8>, n: &[u8], v: &[u8]) {
        out.extend_from_slice(n);
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }

    /// Appends the head (final or interim) with its framing field.
    pub fn head(&mut self, out: &mut Vec<u8>, h: &RespHead<'_>) {
        match self.no_reason {
            true => Self::status_with(out, h.status, ""),
            false => Self::status_line(out, h.status),
        }
        let mut cl = None;
        for (n, v) in h.fields.iter() {
            if n.eq_ignore_ascii_case(b"content-length") {
                cl = Some(v);
                continue;
            }
            Self::field(out, n, v);
        }
        if h.status >= 200 {
            match h.body {
                BodySize::Exact(n) => {
                    out.extend_from_slice(b"content-length: ");
                    crate::http1::push_decimal(out, n);
                    out.extend_from_slice(b"\r\n");
                }
                BodySize::Unknown => {
                    self.chunked = true;
                    out.extend_from_slice(b"transfer-encoding: chunked\r\n");
                }
                BodySize::Empty => {
                    // A HEAD or 304 answer keeps the length it declared
                    // (one number: `5, 5` is written `5`, as HAProxy 2.6
                    // does); others say 0.
                    match cl.map(|v| (v, super::request::parse_cl_list(v))) {
                        Some((_, Some(n))) => {
                            out.extend_from_slice(b"content-length: ");
                            crate::http1::push_decimal(out, n);
                            out.extend_from_slice(b"\r\n");
                        }
                        Some((v, None)) => Self::field(out, b"content-length", v),
                        None if !matches!(h.status, 204 | 304) => {
                            Self::field(out, b"content-length", b"0")
                        }
                        None => {}
                    }
                }
            }
        }
        out.extend_from_slice(b"\r\n");
    }

    /// Appends body bytes.
    pub fn data(&self, out: &mut Vec<u8>, d: &[u8]) {
        if self.chunked {
            out.extend_from_slice(format!("{:x}\r\n", d.len()).as_bytes());
            out.extend_from_slice(d);
            out.extend_from_slice(b"\r\n");
        } else {
            out.extend_from_slice(d);
        }
    }

    /// Appends the trailers (HTTP/1.1 carries them only after chunks).
    pub fn trailers(&mut self, out: &mut Vec<u8>, t: &Fields<'_>) {
        if self.chunked {
            out.extend_from_slice(b"0\r\n");
            for (n, v) in t.iter() {
                Self::field(out, n, v);
            }
            out.extend_from_slice(b"\r\n");
            self.chunked = false;
        }
    }

    /// Appends the end of the body.
    pub fn end(&mut self, out: &mut Vec<u8>) {
        if self.chunked {
            out.extend_from_slice(b"0\r\n\r\n");
            self.chunked = false;
        }
    }
}

/// Writes `content-length` for an exact body size.
fn add_length(h: &mut HeadEncoder<'_>, body: BodySize) {
    if let BodySize::Exact(n) = body {
        let mut b = [0u8; 20];
        h.field(b"content-length", crate::http1::decimal(n, &mut b));
    }
}

/// Sends body steps common to both sinks; returns the bytes taken.
fn put_body<H>(c: &mut Connection, id: u32, m: Msg<'_, H>, now: u32, abort: ErrorCode) -> usize {
    match m {
        Msg::Data(d) => c.send_data(id, d, false, now).unwrap_or(0),
        Msg::Trailers(t) => {
            let _ = c.send_trailers_with(id, |h| {
                for (n, v) in t.iter() {
                    h.field(n, v);
                }
            });
            0
        }
        Msg::End => {
            // After trailers the stream has ended already: refused, fine.
            let _ = c.send_data(id, &[], true, now);
            0
        }
        Msg::Abort(a) => {
            let code = if a == Abort::Protocol {
                abort
            } else {
                ErrorCode::CANCEL
            };
            let _ = c.reset(id, code, now);
            0
        }
        Msg::Head(_) => 0,
    }
}

/// Server role: a response's messages onto H2 stream `id`.
pub struct ServerSink<'c> {
    /// The connection.
    pub conn: &'c mut Connection,
    /// The stream.
    pub id: u32,
    /// The clock (ms), for the stall timer.
    pub now: u32,
}

impl MsgSink<RespHead<'_>> for ServerSink<'_> {
    fn room(&self) -> usize {
        self.conn.send_room(self.id)
    }

    fn put(&mut self, m: RespMsg<'_>) -> usize {
        let Msg::Head(h) = m else {
            // A server behind ebb that broke its answer: the client sees
            // INTERNAL_ERROR (§8.1: a response cut short).
            return put_body(self.conn, self.id, m, self.now, ErrorCode::INTERNAL_ERROR);
        };
        let _ = self
            .conn
            .send_response_with(self.id, h.status, false, |enc| {
                h.each_field(|n, v| enc.field(n, v));
                add_length(enc, h.body);
            });
        0
    }
}

/// Client role: a request's messages onto a new H2 stream of `conn`
/// (opened by the head; [`ClientSink::id`] then says which).
pub struct ClientSink<'c> {
    /// The connection.
    pub conn: &'c mut Connection,
    /// The stream, once the head is sent.
    pub id: Option<u32>,
    /// `:scheme` when the head has none (an origin-form H1 request):
    /// `https` to a TLS server, else `http`.
    pub scheme: &'static [u8],
    /// The clock (ms).
    pub now: u32,
    /// Why the head could not be sent (the server's stream limit, or a
    /// GOAWAY): the stream waits or goes elsewhere.
    pub refused: Option<super::SendError>,
    /// The client accepts trailers: `te: trailers` goes to the server (the
    /// only `te` HTTP/2 allows, §8.2.2; gRPC servers require it).
    pub te_trailers: bool,
    /// An HTTP/1.1 upgrade to this protocol: the head goes as an extended
    /// CONNECT (RFC 8441 §4: `:method CONNECT`, `:protocol`), without
    /// END_STREAM.
    pub protocol: Option<&'c [u8]>,
}

impl<'c> ClientSink<'c> {
    /// A sink for one request on `conn`.
    pub fn new(conn: &'c mut Connection, scheme: &'static [u8], now: u32) -> ClientSink<'c> {
        ClientSink {
            conn,
            id: None,
            scheme,
            now,
            refused: None,
            te_trailers: false,
            protocol: None,
        }
    }
}

impl MsgSink<ReqHead<'_>> for ClientSink<'_> {
    fn room(&self) -> usize {
        self.id.map_or(0, |id| self.conn.send_room(id))
    }

    fn put(&mut self, m: ReqMsg<'_>) -> usize {
        let h = match m {
            Msg::Head(h) => h,
            m => {
                let Some(id) = self.id else { return 0 };
                return put_body(self.conn, id, m, self.now, ErrorCode::CANCEL);
            }
        };
        let scheme = self.scheme;
        let te = self.te_trailers;
        let protocol = self.protocol;
        // RFC 9113 §8.3.1: the authority goes in `:authority`, not `host`.
        let r = self.conn.send_request_with(false, |enc| {
            match protocol {
                Some(p) => {
                    enc.field(b":method", b"CONNECT");
                    enc.field(b":protocol", p);
                }
                None => enc.field(b":method", h.method_raw),
            }
            if h.form != Form::Authority {
                enc.field(b":scheme", h.scheme.unwrap_or(scheme));
            }
            if let Some(a) = h.authority {
                enc.field(b":authority", a);
            }
            match h.form {
                Form::Authority => {}
                Form::Asterisk => enc.field(b":path", b"*"),
                _ => enc.field(b":path", if h.path.is_empty() { b"/" } else { h.path }),
            }
            for (n, v) in h.fields.iter() {
                if !crate::stream::msg::is_framing_field(n) && !n.eq_ignore_ascii_case(b"host") {
                    enc.field(n, v);
                }
            }
            if te {
                enc.field(b"te", b"trailers");
            }
            if protocol.is_none() {
                add_length(enc, h.body);
            }
        });
        match r {
            Ok(id) => self.id = Some(id),
            Err(e) => self.refused = Some(e),
        }
        0
    }
}
