//! The glue between H2 events and the stream layer's messages: a client
//! [`Connection`] fed by a [`ClientSink`] talks to a server [`Connection`]
//! read through [`request_msgs`]; the server answers through a
//! [`ServerSink`], read back through [`response_msgs`]. No sockets.

use super::msg::{request_msgs, response_msgs, ClientSink, ServerSink};
use super::*;
use crate::http1::Method;
use crate::stream::msg::{
    Abort, BodySize, FieldBuf, Form, Msg, MsgSink, ReqHead, ReqMsg, RespHead, RespMsg, Version,
};

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn fields_of(f: crate::stream::msg::Fields<'_>) -> Vec<(String, String)> {
    f.iter().map(|(n, v)| (s(n), s(v))).collect()
}

/// A request message as text, for comparisons.
fn req_text(id: u32, m: &ReqMsg<'_>) -> String {
    match m {
        Msg::Head(h) => format!(
            "{id} head {} {:?} {:?} {} {} {:?} {:?} {:?} {}",
            s(h.method_raw),
            h.form,
            h.scheme.map(s),
            h.authority.map(s).unwrap_or_default(),
            s(h.path),
            h.version,
            h.body,
            fields_of(h.fields),
            h.expect_continue
        ),
        m => body_text(id, m),
    }
}

fn resp_text(id: u32, m: &RespMsg<'_>) -> String {
    match m {
        Msg::Head(h) => format!(
            "{id} head {} {:?} {:?}",
            h.status,
            h.body,
            fields_of(h.fields)
        ),
        m => body_text(id, m),
    }
}

fn body_text<H>(id: u32, m: &Msg<'_, H>) -> String {
    match m {
        Msg::Data(d) => format!("{id} data {}", s(d)),
        Msg::Trailers(t) => format!("{id} trailers {:?}", fields_of(*t)),
        Msg::End => format!("{id} end"),
        Msg::Abort(a) => format!("{id} abort {a:?}"),
        Msg::Head(_) => unreachable!(),
    }
}

struct Pair {
    c: Connection,
    s: Connection,
}

impl Pair {
    fn new(scfg: Config) -> Pair {
        let mut p = Pair {
            c: Connection::client(Config::default()),
            s: Connection::new(scfg),
        };
        p.deliver_to_server();
        p.deliver_to_client();
        p.deliver_to_server();
        p
    }

    /// Feeds the client's output to the server; its request messages.
    fn deliver_to_server(&mut self) -> Vec<String> {
        let input = self.c.output().to_vec();
        self.c.consume_output(input.len());
        let mut out = Vec::new();
        let mut off = 0;
        loop {
            let p = self.s.recv(&input[off..], 1);
            off += p.consumed;
            match p.event {
                None if p.consumed == 0 => break,
                None => {}
                Some(ev) => {
                    let stream = request_msgs(&ev, |id, m| out.push(req_text(id, &m)));
                    if !stream {
                        out.push(format!("conn {ev:?}"));
                    }
                }
            }
        }
        out
    }

    /// Feeds the server's output to the client; its response messages.
    fn deliver_to_client(&mut self) -> Vec<String> {
        let input = self.s.output().to_vec();
        self.s.consume_output(input.len());
        let mut out = Vec::new();
        let mut off = 0;
        loop {
            let p = self.c.recv(&input[off..], 1);
            off += p.consumed;
            match p.event {
                None if p.consumed == 0 => break,
                None => {}
                Some(ev) => {
                    let stream = response_msgs(&ev, |id, m| out.push(resp_text(id, &m)));
                    if !stream {
                        out.push(format!("conn {ev:?}"));
                    }
                }
            }
        }
        out
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// An HTTP/1 request head (what a client of ebb sent over H1) as a view.
fn h1_request(raw: &[u8]) -> (crate::http1::RequestHead, &[u8]) {
    let mut h = crate::http1::RequestHead::with_capacity(8);
    let r = crate::http1::parse_request_into(raw, &Default::default(), &mut h).unwrap();
    assert!(r.is_complete());
    (h, raw)
}

#[test]
fn an_h1_request_goes_out_as_h2_and_comes_in_as_a_view() {
    let mut p = Pair::new(Config::default());
    let (h, raw) = h1_request(
        b"POST /a?b HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\nX-A: 1\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\n",
    );
    let head = ReqHead::from_h1(raw, &h);
    let mut sink = ClientSink::new(&mut p.c, b"http", 1);
    assert_eq!(sink.room(), 0, "no stream yet");
    sink.put(Msg::Head(head));
    assert_eq!(sink.id, Some(1));
    assert!(sink.room() > 0);
    assert_eq!(sink.put(Msg::Data(b"abc")), 3);
    sink.put(Msg::End);
    let got = p.deliver_to_server();
    assert_eq!(
        got,
        strs(&[
            r#"1 head POST Origin Some("http") example.com /a?b Http2 Exact(3) [("x-a", "1"), ("expect", "100-continue"), ("content-length", "3")] true"#,
            "1 data abc",
            "1 end",
        ])
    );
}

#[test]
fn request_views_point_into_the_decoded_list() {
    let mut p = Pair::new(Config::default());
    p.c.send_request(
        &[
            (b":method", b"OPTIONS"),
            (b":scheme", b"https"),
            (b":authority", b"h.example"),
            (b":path", b"*"),
            (b"cookie", b"a=1"),
        ],
        true,
    )
    .unwrap();
    let input = p.c.output().to_vec();
    let mut off = 0;
    let mut seen = 0;
    loop {
        let r = p.s.recv(&input[off..], 1);
        off += r.consumed;
        match r.event {
            None if r.consumed == 0 => break,
            Some(Event::Request { head, .. }) => {
                let v = msg::req_head(head, true);
                assert_eq!(v.method, Method::Options);
                assert_eq!(v.form, Form::Asterisk);
                assert_eq!(v.body, BodySize::Empty);
                assert_eq!(v.version, Version::Http2);
                assert!(!v.close && v.upgrade.is_none());
                assert!(v.wire_len > 0);
                // Zero copy: the view's bytes are the HPACK list's.
                assert_eq!(v.fields.buf.as_ptr(), head.list.bytes().as_ptr());
                assert_eq!(fields_of(v.fields), [("cookie".into(), "a=1".into())]);
                seen += 1;
            }
            _ => {}
        }
    }
    assert_eq!(seen, 1);
}

#[test]
fn a_response_goes_out_through_the_server_sink() {
    let mut p = Pair::new(Config::default());
    p.c.send_request(
        &[
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"x"),
            (b":path", b"/"),
        ],
        true,
    )
    .unwrap();
    p.deliver_to_server();
    let mut src = FieldBuf::default();
    src.push(b"Content-Type", b"text/plain");
    src.push(b"Connection", b"close");
    src.push(b"Content-Length", b"999");
    src.push(b"Server", b"origin");
    let mut add = FieldBuf::default();
    add.push(b"X-Added", b"yes");
    let omit = |n: &[u8]| n.eq_ignore_ascii_case(b"server");
    let head = RespHead {
        fields: src.fields(),
        omit: Some(&omit),
        extra: add.fields(),
        close: true,
        ..RespHead::new(200, BodySize::Exact(5))
    };
    let mut sink = ServerSink {
        conn: &mut p.s,
        id: 1,
        now: 1,
    };
    sink.put(Msg::Head(head));
    assert_eq!(sink.put(Msg::Data(b"hello")), 5);
    let mut t = FieldBuf::default();
    t.push(b"X-Check", b"ok");
    sink.put(Msg::Trailers(t.fields()));
    sink.put(Msg::End);
    assert_eq!(
        p.deliver_to_client(),
        strs(&[
            r#"1 head 200 Exact(5) [("content-type", "text/plain"), ("x-added", "yes"), ("content-length", "5")]"#,
            "1 data hello",
            r#"1 trailers [("x-check", "ok")]"#,
            "1 end",
        ])
    );
    assert_eq!((p.c.open_streams(), p.s.open_streams()), (0, 0));
}

#[test]
fn room_is_the_window_and_aborts_are_resets() {
    let mut p = Pair::new(Config::default());
    let get = [
        (b":method" as &[u8], b"GET" as &[u8]),
        (b":scheme", b"https"),
        (b":authority", b"x"),
        (b":path", b"/"),
    ];
    p.c.send_request(&get, true).unwrap();
    p.deliver_to_server();
    let body = vec![b'z'; 100_000];
    let mut sink = ServerSink {
        conn: &mut p.s,
        id: 1,
        now: 1,
    };
    sink.put(Msg::Head(RespHead::new(200, BodySize::Unknown)));
    // The stream window, less what the output buffer already holds (the
    // head) under `max_output`.
    let room = sink.room();
    assert!(room > 65_000 && room <= 65_535, "{room}");
    assert_eq!(sink.put(Msg::Data(&body)), room);
    assert_eq!(sink.room(), 0);
    assert_eq!(sink.put(Msg::Data(&body[room..])), 0);
    let got = p.deliver_to_client();
    assert_eq!(got[0], r#"1 head 200 Unknown []"#);
    assert_eq!(got.len(), 1 + 4, "four DATA frames");
    p.c.release(1, room);
    p.deliver_to_server();
    let mut sink = ServerSink {
        conn: &mut p.s,
        id: 1,
        now: 1,
    };
    assert!(sink.room() > 0);
    // The server behind ebb broke its answer: the client sees a reset.
    sink.put(Msg::Abort(Abort::Protocol));
    assert_eq!(p.deliver_to_client(), strs(&["1 abort Gone"]));
    // A client reset reaches the stream as Abort(Gone); window events are
    // the connection's.
    p.c.send_request(&get, false).unwrap();
    p.c.reset(3, ErrorCode::CANCEL, 1).unwrap();
    let got = p.deliver_to_server();
    assert_eq!(got[1], "3 abort Gone");
}

#[test]
fn the_client_sink_reports_a_refused_stream() {
    let cfg = Config {
        max_concurrent_streams: 1,
        ..Config::default()
    };
    let mut p = Pair::new(cfg);
    let (h, raw) = h1_request(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    let head = ReqHead::from_h1(raw, &h);
    let mut sink = ClientSink::new(&mut p.c, b"https", 1);
    sink.put(Msg::Head(head));
    assert_eq!(sink.id, Some(1));
    sink.put(Msg::End);
    let mut sink = ClientSink::new(&mut p.c, b"https", 1);
    sink.put(Msg::Head(head));
    assert_eq!(sink.id, None);
    assert_eq!(sink.refused, Some(SendError::Busy));
    // Body steps before a head go nowhere.
    assert_eq!(sink.put(Msg::Data(b"x")), 0);
    let got = p.deliver_to_server();
    assert_eq!(
        got,
        strs(&[
            // The head cannot end the stream: trailers could follow it.
            r#"1 head GET Origin Some("https") a / Http2 Unknown [] false"#,
            "1 end"
        ])
    );
}
