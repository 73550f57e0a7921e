//! The connection core driven by a scripted client: no sockets. One test
//! per behaviour of RFC 9113 the mux relies on, and one per attack bound
//! (see the table in `conn.rs`).

use super::conn::{
    FLOOD_LIMIT, MAX_CONTINUATIONS, MAX_PENDING_CONTROL, RESET_BURST, STATUS_RECORD,
};
use super::frame::{self, flag, kind, setting, FrameHeader, PREFACE};
use super::hpack::{Decoder, Encoder, HeaderList, HuffmanMode, Indexing};
use super::*;

#[derive(Debug, PartialEq)]
pub(super) enum Ev {
    Request {
        id: u32,
        method: String,
        path: String,
        end: bool,
    },
    Data {
        id: u32,
        data: Vec<u8>,
        end: bool,
    },
    Trailers {
        id: u32,
        fields: Vec<(String, String)>,
    },
    Reset {
        id: u32,
        code: ErrorCode,
        remote: bool,
    },
    Window(u32),
    GoAway(u32, ErrorCode),
    Closed(ErrorCode),
    /// Client role: a response head.
    Response {
        id: u32,
        status: u16,
        end: bool,
    },
}

pub(super) fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Feeds `input` (all of it, frame by frame) and collects the events.
pub(super) fn feed(c: &mut Connection, input: &[u8], now: u32) -> Vec<Ev> {
    let mut evs = Vec::new();
    let mut off = 0;
    loop {
        let p = c.recv(&input[off..], now);
        off += p.consumed;
        let ev = match p.event {
            None if p.consumed == 0 => break,
            None => continue,
            Some(Event::Request {
                id,
                head,
                end_stream,
            }) => Ev::Request {
                id,
                method: s(head.method()),
                path: s(head.path().unwrap_or(b"")),
                end: end_stream,
            },
            Some(Event::Data {
                id,
                data,
                end_stream,
            }) => Ev::Data {
                id,
                data: data.to_vec(),
                end: end_stream,
            },
            Some(Event::Trailers { id, fields }) => Ev::Trailers {
                id,
                fields: fields.iter().map(|(n, v)| (s(n), s(v))).collect(),
            },
            Some(Event::Reset { id, code, remote }) => Ev::Reset { id, code, remote },
            Some(Event::WindowOpened { id }) => Ev::Window(id),
            Some(Event::GoAway { last_stream, code }) => Ev::GoAway(last_stream, code),
            Some(Event::Closed { code }) => Ev::Closed(code),
            Some(Event::Response {
                id,
                head,
                end_stream,
            }) => Ev::Response {
                id,
                status: head.status,
                end: end_stream,
            },
        };
        evs.push(ev);
    }
    assert_eq!(off, input.len(), "input not consumed: {evs:?}");
    evs
}

/// The frames in `out`, as (header, payload).
pub(super) fn frames(out: &[u8]) -> Vec<(FrameHeader, Vec<u8>)> {
    let mut v = Vec::new();
    let mut off = 0;
    while let Some(h) = FrameHeader::parse(&out[off..]) {
        let end = off + 9 + h.len as usize;
        v.push((h, out[off + 9..end].to_vec()));
        off = end;
    }
    assert_eq!(off, out.len());
    v
}

/// Takes the output and returns its frames.
pub(super) fn take(c: &mut Connection) -> Vec<(FrameHeader, Vec<u8>)> {
    let f = frames(c.output());
    let n = c.output().len();
    c.consume_output(n);
    f
}

pub(super) fn goaway(f: &[(FrameHeader, Vec<u8>)]) -> Option<ErrorCode> {
    f.iter()
        .find(|(h, _)| h.kind == kind::GOAWAY)
        .map(|(_, p)| ErrorCode(u32::from_be_bytes([p[4], p[5], p[6], p[7]])))
}

pub(super) fn rsts(f: &[(FrameHeader, Vec<u8>)]) -> Vec<(u32, ErrorCode)> {
    f.iter()
        .filter(|(h, _)| h.kind == kind::RST_STREAM)
        .map(|(h, p)| {
            (
                h.stream,
                ErrorCode(u32::from_be_bytes([p[0], p[1], p[2], p[3]])),
            )
        })
        .collect()
}

struct Client {
    enc: Encoder,
}

impl Client {
    fn new() -> Client {
        Client {
            enc: Encoder::new(4096, HuffmanMode::Shorter),
        }
    }

    fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (n, v) in fields {
            self.enc
                .encode_with(n.as_bytes(), v.as_bytes(), Indexing::Incremental, &mut b);
        }
        b
    }

    fn headers(&mut self, id: u32, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
        let b = self.block(fields);
        let mut out = Vec::new();
        frame::write_headers(&mut out, id, &b, end_stream, 16_384);
        out
    }

    fn get(&mut self, id: u32, path: &str) -> Vec<u8> {
        self.headers(id, &req("GET", path), true)
    }
}

fn req<'a>(method: &'a str, path: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        (":method", method),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", path),
    ]
}

pub(super) fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_settings(&mut v, params);
    v
}

/// A connection past the preface, its first output taken.
fn open() -> (Connection, Client) {
    open_with(Config::default(), &[])
}

fn open_with(cfg: Config, client_settings: &[(u16, u32)]) -> (Connection, Client) {
    let mut c = Connection::new(cfg);
    let mut input = PREFACE.to_vec();
    input.extend(settings(client_settings));
    assert_eq!(feed(&mut c, &input, 1), []);
    let f = take(&mut c);
    assert_eq!(f[0].0.kind, kind::SETTINGS);
    assert!(f
        .iter()
        .any(|(h, _)| h.kind == kind::SETTINGS && h.has(flag::ACK)));
    (c, Client::new())
}

fn response_fields(f: &[(FrameHeader, Vec<u8>)], dec: &mut Decoder) -> Vec<(String, String)> {
    let mut block = Vec::new();
    for (h, p) in f {
        if h.kind == kind::HEADERS || h.kind == kind::CONTINUATION {
            block.extend_from_slice(p);
        }
    }
    let mut l = HeaderList::default();
    dec.decode(&block, 1 << 20, &mut l).unwrap();
    l.iter().map(|(n, v)| (s(n), s(v))).collect()
}

// --- the protocol ------------------------------------------------------------

#[test]
fn preface_then_settings_then_a_request_and_its_answer() {
    let (mut c, mut cl) = open();
    let ev = feed(&mut c, &cl.get(1, "/a"), 2);
    assert_eq!(
        ev,
        [Ev::Request {
            id: 1,
            method: "GET".into(),
            path: "/a".into(),
            end: true
        }]
    );
    c.send_response(1, 200, &[(b"content-type", b"text/plain")], false)
        .unwrap();
    assert_eq!(c.send_data(1, b"hello", true, 3), Ok(5));
    let f = take(&mut c);
    let mut dec = Decoder::new(4096);
    assert_eq!(
        response_fields(&f, &mut dec),
        [
            (":status".to_string(), "200".to_string()),
            ("content-type".to_string(), "text/plain".to_string())
        ]
    );
    let (h, p) = f.last().unwrap();
    assert_eq!(
        (h.kind, h.flags, h.stream),
        (kind::DATA, flag::END_STREAM, 1)
    );
    assert_eq!(p, b"hello");
    assert_eq!(c.open_streams(), 0);
}

/// Streams answered out of order, each ending while others stay open
/// (their places in the connection's list move as ended ones leave): every
/// answer goes to its own stream, and one already ended is no stream.
#[test]
fn streams_found_by_id_while_others_end() {
    let (mut c, mut cl) = open();
    let mut input = Vec::new();
    for id in [1, 3, 5, 7] {
        input.extend(cl.get(id, &format!("/{id}")));
    }
    assert_eq!(feed(&mut c, &input, 2).len(), 4);
    for id in [1, 7, 3, 5] {
        // Looked up first for another stream, so the lookup cannot rely
        // on the last place it found one.
        let _ = c.send_window(if id == 1 { 3 } else { 1 });
        c.send_response(id, 200, &[], false).unwrap();
        let body = format!("answer {id}");
        assert_eq!(c.send_data(id, body.as_bytes(), true, 3), Ok(body.len()));
        assert_eq!(c.send_data(id, b"late", true, 3), Err(SendError::NoStream));
    }
    assert_eq!(c.open_streams(), 0);
    let f = take(&mut c);
    let data: Vec<(u32, String)> = f
        .iter()
        .filter(|(h, _)| h.kind == kind::DATA)
        .map(|(h, p)| (h.stream, s(p)))
        .collect();
    let want: Vec<(u32, String)> = [1, 7, 3, 5]
        .iter()
        .map(|&id| (id, format!("answer {id}")))
        .collect();
    assert_eq!(data, want);
}

#[test]
fn bad_preface_and_first_frame_not_settings() {
    let mut c = Connection::new(Config::default());
    let ev = feed(&mut c, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1);
    assert_eq!(ev, [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]);
    let mut c = Connection::new(Config::default());
    let mut input = PREFACE.to_vec();
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, false, [0; 8]);
    input.extend(ping);
    assert_eq!(
        feed(&mut c, &input, 1),
        [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]
    );
    // Bytes dribbled one at a time are fine.
    let mut c = Connection::new(Config::default());
    let mut input = PREFACE.to_vec();
    input.extend(settings(&[]));
    let mut rest: Vec<u8> = Vec::new();
    for b in input {
        rest.push(b);
        let p = c.recv(&rest, 1);
        assert!(p.event.is_none());
        let n = p.consumed;
        rest.drain(..n);
    }
    assert!(rest.is_empty());
}

#[test]
fn ping_is_answered_and_settings_acked() {
    let (mut c, _) = open();
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, false, *b"12345678");
    feed(&mut c, &ping, 2);
    let f = take(&mut c);
    assert_eq!(f.len(), 1);
    assert!(f[0].0.has(flag::ACK));
    assert_eq!(f[0].1, b"12345678");
}

#[test]
fn request_body_flow_control_and_release() {
    let (mut c, mut cl) = open();
    let mut input = cl.headers(1, &req("POST", "/up"), false);
    for _ in 0..4 {
        frame::write_data(&mut input, 1, &[7u8; 10_000], false);
    }
    let ev = feed(&mut c, &input, 2);
    assert_eq!(ev.len(), 5);
    assert!(matches!(ev[4], Ev::Data { id: 1, ref data, end: false } if data.len() == 10_000));
    // Nothing granted back before the caller releases, except the
    // connection window's enlargement, deferred to the first DATA frame.
    let f = take(&mut c);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.stream), (kind::WINDOW_UPDATE, 0));
    c.release(1, 40_000);
    let f = take(&mut c);
    let wu: Vec<_> = f
        .iter()
        .filter(|(h, _)| h.kind == kind::WINDOW_UPDATE)
        .collect();
    assert_eq!(
        wu.len(),
        1,
        "stream update (the connection's waits for half of 1 MiB)"
    );
    assert_eq!(wu[0].0.stream, 1);
    // Past the stream window without updates: FLOW_CONTROL_ERROR.
    let (mut c, mut cl) = open();
    let mut input = cl.headers(1, &req("POST", "/up"), false);
    for _ in 0..4 {
        frame::write_data(&mut input, 1, &[0u8; 16_384], false);
    }
    let ev = feed(&mut c, &input, 2);
    assert_eq!(
        ev.last(),
        Some(&Ev::Reset {
            id: 1,
            code: ErrorCode::FLOW_CONTROL_ERROR,
            remote: false
        })
    );
}

#[test]
fn padded_data_is_unpadded_and_counted() {
    let (mut c, mut cl) = open();
    let mut input = cl.headers(1, &req("POST", "/"), false);
    frame::write_header(
        &mut input,
        1 + 3 + 4,
        kind::DATA,
        flag::PADDED | flag::END_STREAM,
        1,
    );
    input.push(4);
    input.extend_from_slice(b"abc\0\0\0\0");
    let ev = feed(&mut c, &input, 2);
    assert_eq!(
        ev[1],
        Ev::Data {
            id: 1,
            data: b"abc".to_vec(),
            end: true
        }
    );
}

#[test]
fn content_length_must_match_data() {
    let (mut c, mut cl) = open();
    let mut h = req("POST", "/");
    h.push(("content-length", "5"));
    let mut input = cl.headers(1, &h, false);
    frame::write_data(&mut input, 1, b"abcdef", true);
    let ev = feed(&mut c, &input, 2);
    assert_eq!(
        ev[1],
        Ev::Reset {
            id: 1,
            code: ErrorCode::PROTOCOL_ERROR,
            remote: false
        }
    );
    let mut input = cl.headers(3, &h, false);
    frame::write_data(&mut input, 3, b"abc", true);
    let ev = feed(&mut c, &input, 2);
    assert!(matches!(
        ev[1],
        Ev::Reset {
            id: 3,
            code: ErrorCode::PROTOCOL_ERROR,
            ..
        }
    ));
    let mut input = cl.headers(5, &h, false);
    frame::write_data(&mut input, 5, b"abcde", true);
    let ev = feed(&mut c, &input, 2);
    assert!(matches!(
        ev[1],
        Ev::Data {
            id: 5,
            end: true,
            ..
        }
    ));
}

#[test]
fn trailers_end_the_request() {
    let (mut c, mut cl) = open();
    let mut input = cl.headers(1, &req("POST", "/"), false);
    frame::write_data(&mut input, 1, b"x", false);
    input.extend(cl.headers(1, &[("grpc-status", "0")], true));
    let ev = feed(&mut c, &input, 2);
    assert_eq!(
        ev[2],
        Ev::Trailers {
            id: 1,
            fields: vec![("grpc-status".into(), "0".into())]
        }
    );
    // Trailers without END_STREAM, or with a pseudo-header: malformed.
    let mut input = cl.headers(3, &req("POST", "/"), false);
    input.extend(cl.headers(3, &[("x", "y")], false));
    let ev = feed(&mut c, &input, 2);
    assert!(matches!(
        ev[1],
        Ev::Reset {
            id: 3,
            code: ErrorCode::PROTOCOL_ERROR,
            ..
        }
    ));
    let mut input = cl.headers(5, &req("POST", "/"), false);
    input.extend(cl.headers(5, &[(":path", "/")], true));
    let ev = feed(&mut c, &input, 2);
    assert!(matches!(
        ev[1],
        Ev::Reset {
            id: 5,
            code: ErrorCode::PROTOCOL_ERROR,
            ..
        }
    ));
}

#[test]
fn response_trailers_and_reset_command() {
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.get(1, "/"), 2);
    c.send_response(1, 200, &[], false).unwrap();
    c.send_data(1, b"body", false, 2).unwrap();
    c.send_trailers(1, &[(b"grpc-status", b"0")]).unwrap();
    let f = take(&mut c);
    let last = &f.last().unwrap().0;
    assert_eq!(last.kind, kind::HEADERS);
    assert!(last.has(flag::END_STREAM));
    assert_eq!(c.send_data(1, b"more", true, 2), Err(SendError::NoStream));
    feed(&mut c, &cl.get(3, "/"), 2);
    c.reset(3, ErrorCode::CANCEL, 2).unwrap();
    assert_eq!(rsts(&take(&mut c)), [(3, ErrorCode::CANCEL)]);
}

#[test]
fn send_respects_windows_and_settings_changes() {
    let (mut c, mut cl) = open_with(
        Config::default(),
        &[
            (setting::INITIAL_WINDOW_SIZE, 0),
            (setting::MAX_FRAME_SIZE, 16_384),
        ],
    );
    feed(&mut c, &cl.get(1, "/"), 2);
    c.send_response(1, 200, &[], false).unwrap();
    assert_eq!(c.send_data(1, &[1; 100], true, 2), Ok(0));
    take(&mut c);
    // SETTINGS raising the initial window opens it.
    let ev = feed(&mut c, &settings(&[(setting::INITIAL_WINDOW_SIZE, 30)]), 3);
    assert_eq!(ev, [Ev::Window(0)]);
    assert_eq!(c.send_data(1, &[1; 100], true, 3), Ok(30));
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 1, 70);
    assert_eq!(feed(&mut c, &wu, 4), [Ev::Window(1)]);
    assert_eq!(c.send_data(1, &[1; 70], true, 4), Ok(70));
    let f = take(&mut c);
    let data: usize = f
        .iter()
        .filter(|(h, _)| h.kind == kind::DATA)
        .map(|(h, _)| h.len as usize)
        .sum();
    assert_eq!(data, 100);
    // Window overflow past 2^31-1 is FLOW_CONTROL_ERROR (connection).
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 0, frame::MAX_WINDOW);
    assert_eq!(
        feed(&mut c, &wu, 5),
        [Ev::Closed(ErrorCode::FLOW_CONTROL_ERROR)]
    );
}

#[test]
fn big_response_heads_use_continuation() {
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.get(1, "/"), 2);
    let big = "v".repeat(40_000);
    c.send_response(1, 200, &[(b"x-big", big.as_bytes())], true)
        .unwrap();
    let f = take(&mut c);
    assert_eq!(f[0].0.kind, kind::HEADERS);
    assert!(f[1..].iter().all(|(h, _)| h.kind == kind::CONTINUATION));
    assert!(f.last().unwrap().0.has(flag::END_HEADERS));
    let mut dec = Decoder::new(4096);
    assert_eq!(response_fields(&f, &mut dec)[1].1.len(), 40_000);
}

#[test]
fn graceful_goaway_drains_then_is_done() {
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.get(1, "/"), 2);
    c.shutdown();
    let f = take(&mut c);
    assert_eq!(goaway(&f), Some(ErrorCode::NO_ERROR));
    let ping = f.iter().find(|(h, _)| h.kind == kind::PING).unwrap();
    // A stream the client sent before seeing GOAWAY is still served...
    let ev = feed(&mut c, &cl.get(3, "/"), 3);
    assert!(matches!(ev[0], Ev::Request { id: 3, .. }));
    // ...then the PING ack: the final GOAWAY names stream 3.
    let mut ack = Vec::new();
    frame::write_ping(&mut ack, true, ping.1.clone().try_into().unwrap());
    feed(&mut c, &ack, 4);
    let f = take(&mut c);
    let (_, p) = f.iter().find(|(h, _)| h.kind == kind::GOAWAY).unwrap();
    assert_eq!(u32::from_be_bytes([p[0], p[1], p[2], p[3]]), 3);
    assert!(!c.is_done());
    c.send_response(1, 204, &[], true).unwrap();
    c.send_response(3, 204, &[], true).unwrap();
    assert!(c.is_done());
}

#[test]
fn goaway_now_names_the_last_stream_at_once() {
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.get(1, "/"), 2);
    let _ = take(&mut c);
    c.goaway_now();
    let f = take(&mut c);
    let (_, p) = f.iter().find(|(h, _)| h.kind == kind::GOAWAY).unwrap();
    assert_eq!(u32::from_be_bytes([p[0], p[1], p[2], p[3]]), 1);
    assert!(f.iter().all(|(h, _)| h.kind != kind::PING));
    // Stream 1 finishes; a later one is not served.
    let ev = feed(&mut c, &cl.get(3, "/"), 3);
    assert!(!ev.iter().any(|e| matches!(e, Ev::Request { id: 3, .. })));
    assert!(!c.is_done());
    c.send_response(1, 204, &[], true).unwrap();
    assert!(c.is_done());
}

#[test]
fn client_goaway_and_reset_are_events() {
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.get(1, "/"), 2);
    let mut input = Vec::new();
    frame::write_rst(&mut input, 1, ErrorCode::CANCEL);
    frame::write_goaway(&mut input, 0, ErrorCode::NO_ERROR);
    let ev = feed(&mut c, &input, 2);
    assert_eq!(
        ev,
        [
            Ev::Reset {
                id: 1,
                code: ErrorCode::CANCEL,
                remote: true
            },
            Ev::GoAway(0, ErrorCode::NO_ERROR)
        ]
    );
}

#[test]
fn priority_frames_are_accepted_and_ignored() {
    let (mut c, mut cl) = open();
    let mut input = Vec::new();
    frame::write_header(&mut input, 5, kind::PRIORITY, 0, 3);
    input.extend_from_slice(&[0, 0, 0, 0, 15]);
    input.extend(cl.get(1, "/"));
    let ev = feed(&mut c, &input, 2);
    assert!(matches!(ev[..], [Ev::Request { id: 1, .. }]));
    // A stream depending on itself: stream error PROTOCOL_ERROR.
    let mut input = Vec::new();
    frame::write_header(&mut input, 5, kind::PRIORITY, 0, 5);
    input.extend_from_slice(&[0, 0, 0, 5, 15]);
    feed(&mut c, &input, 2);
    assert_eq!(rsts(&take(&mut c)), [(5, ErrorCode::PROTOCOL_ERROR)]);
}

// --- request checks (RFC 9113 §8) ---------------------------------------------

fn malformed(fields: &[(&str, &str)]) -> bool {
    let (mut c, mut cl) = open();
    let ev = feed(&mut c, &cl.headers(1, fields, true), 2);
    match &ev[..] {
        [Ev::Reset {
            id: 1,
            code: ErrorCode::PROTOCOL_ERROR,
            remote: false,
        }] => true,
        [Ev::Request { .. }] => false,
        other => panic!("{other:?}"),
    }
}

#[test]
fn section_8_request_checks() {
    let base = req("GET", "/");
    assert!(!malformed(&base));
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut v = base.clone();
        v.extend_from_slice(extra);
        v
    };
    for bad in [
        &[("connection", "close")][..],
        &[("keep-alive", "1")],
        &[("proxy-connection", "x")],
        &[("transfer-encoding", "chunked")],
        &[("upgrade", "h2c")],
        &[("te", "gzip")],
        &[("X-Upper", "1")],
        &[("x y", "1")],
        &[("x", "a\r\nb")],
        &[("x", "a\0b")],
        &[("content-length", "1x")],
        &[(":unknown", "1")],
        &[(":status", "200")],
        &[("host", "example.com"), ("host", "example.com")],
    ] {
        assert!(malformed(&with(bad)), "{bad:?}");
    }
    // A regular value with surrounding whitespace is trimmed, not
    // refused (HAProxy 2.6 since its fix of February 2025); a
    // pseudo-header field's is refused.
    assert!(!malformed(&with(&[("x", " lead"), ("y", "trail\t")])));
    // (A method or scheme with one is no token: 400, as below.)
    assert!(malformed(&[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/ ")
    ]));
    assert!(malformed(&[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", " example.com")
    ]));
    // A host other than the authority is ignored (the authority names
    // the target), as HAProxy does.
    assert!(!malformed(&with(&[("host", "other.example")])));
    // A method that is not a token, a scheme that is not RFC 3986's: a
    // 400 answer, then the stream ends (HAProxy's reg-test
    // http-messaging/h2_desync_attacks).
    for fields in [
        vec![(":method", "GET?"), (":scheme", "http"), (":path", "/")],
        vec![
            (":method", "GET"),
            (":scheme", "http://localhost/?"),
            (":path", "/"),
        ],
    ] {
        let (mut c, mut cl) = open();
        let ev = feed(&mut c, &cl.headers(1, &fields, true), 2);
        assert!(
            !ev.iter().any(|e| matches!(e, Ev::Request { .. })),
            "{ev:?}"
        );
        let out = take(&mut c);
        let mut dec = Decoder::new(4096);
        let f = response_fields(&out, &mut dec);
        assert_eq!(
            f[0],
            (":status".to_string(), "400".to_string()),
            "{fields:?}"
        );
    }
    assert!(!malformed(&with(&[
        ("te", "trailers"),
        ("host", "example.com")
    ])));
    // Pseudo-header after a regular field; duplicates; missing; empty path.
    assert!(malformed(&[
        (":method", "GET"),
        (":scheme", "https"),
        ("x", "1"),
        (":path", "/")
    ]));
    assert!(malformed(&[
        (":method", "GET"),
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/")
    ]));
    assert!(malformed(&[(":method", "GET"), (":path", "/")]));
    assert!(malformed(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "")
    ]));
    assert!(!malformed(&[
        (":method", "OPTIONS"),
        (":scheme", "https"),
        (":path", "*")
    ]));
    assert!(!malformed(&[
        (":method", "CONNECT"),
        (":authority", "a:443")
    ]));
    assert!(malformed(&[
        (":method", "CONNECT"),
        (":authority", "a:443"),
        (":path", "/")
    ]));
}

#[test]
fn h1_translation_joins_cookies() {
    let (mut c, mut cl) = open();
    let mut h = req("GET", "/p?q=1");
    h.extend([
        ("cookie", "a=1"),
        ("accept", "*/*"),
        ("cookie", "b=2"),
        ("te", "trailers"),
    ]);
    let input = cl.headers(1, &h, true);
    let mut off = 0;
    let mut text = Vec::new();
    while off < input.len() {
        let p = c.recv(&input[off..], 2);
        off += p.consumed;
        if let Some(Event::Request { head, .. }) = p.event {
            head.write_h1(&[(b"content-length", b"0")], &mut text);
        }
    }
    assert_eq!(
        s(&text),
        "GET https://example.com/p?q=1 HTTP/1.1\r\nhost: example.com\r\naccept: */*\r\n\
         cookie: a=1; b=2\r\ncontent-length: 0\r\n\r\n"
    );
}

/// The head written with its spans is the head the HTTP/1 parser cuts
/// from the same bytes (method, target, version, fields, host, framing),
/// and a head the parser would refuse is not given spans.
#[test]
fn h1_translation_with_spans_is_what_the_parser_reads() {
    use crate::http1::{complete_request_into, parse_request_into, RequestHead, Status};
    let cases: Vec<Vec<(&str, &str)>> = vec![
        vec![
            ("accept", "*/*"),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
            ("x-y", "z"),
        ],
        vec![
            ("content-length", "0"),
            ("user-agent", "h2load nghttp2/1.52.0"),
        ],
        vec![("x-ctl", "a\u{1}b")],
        vec![("x-del", "a\u{7f}")],
        // Runs of fields written whole, cut by the ones left out.
        vec![
            ("x-a", "1"),
            ("host", "example.com"),
            ("x-b", "2"),
            ("x-c", ""),
            ("te", "trailers"),
            ("x-d", "4"),
        ],
    ];
    let limits = crate::http1::Limits::default();
    for (i, extra) in cases.iter().enumerate() {
        let (mut c, mut cl) = open();
        let mut h = req("GET", "/p?q=1");
        h.extend(extra.iter().copied());
        let input = cl.headers(1, &h, true);
        let mut off = 0;
        let (mut plain, mut built, mut spans) = (Vec::new(), Vec::new(), Vec::new());
        let mut line = None;
        while off < input.len() {
            let p = c.recv(&input[off..], 2);
            off += p.consumed;
            if let Some(Event::Request { head, .. }) = p.event {
                head.write_h1(&[], &mut plain);
                line = head.write_h1_spans(&[], &mut built, Some((&mut spans, 100)));
            }
        }
        assert_eq!(s(&plain), s(&built), "case {i}");
        let mut parsed = RequestHead::default();
        let r = parse_request_into(&plain, &limits, &mut parsed);
        let Some(line) = line else {
            // Refused by the parser: no spans given (case 2, 3).
            assert!(r.is_err(), "case {i}: {r:?}");
            assert!(i == 2 || i == 3, "case {i}");
            continue;
        };
        assert!(matches!(r, Ok(Status::Complete(()))), "case {i}");
        let mut from_spans = RequestHead {
            headers: spans.clone(),
            ..RequestHead::default()
        };
        let r = complete_request_into(
            &built,
            line,
            crate::http1::Version::Http11,
            built.len(),
            &limits,
            &mut from_spans,
            false,
        );
        assert!(matches!(r, Ok(Status::Complete(()))), "case {i}");
        assert_eq!(format!("{parsed:?}"), format!("{from_spans:?}"), "case {i}");
    }
}

/// Stream 1's request HEADERS (END_STREAM): `https`, `:authority` when
/// not empty, then `fields`.
fn request_block(
    cl: &mut Client,
    method: &str,
    authority: &str,
    path: &str,
    fields: &[(&str, &str)],
) -> Vec<u8> {
    let mut h = vec![(":method", method), (":scheme", "https"), (":path", path)];
    if !authority.is_empty() {
        h.push((":authority", authority));
    }
    h.extend(fields.iter().copied());
    cl.headers(1, &h, true)
}

/// The head [`RequestHead::write_h1_head`] fills without reading the
/// bytes is the head the HTTP/1 parser cuts from them, field for field,
/// for every head it vouches for; the others are left to the completion
/// or the parser, which then gives the same answer as before.
#[test]
fn h1_head_filled_from_the_checks_is_what_the_parser_reads() {
    use crate::h2::Written;
    use crate::http1::{complete_request_into, parse_request_into, RequestHead, Status};
    // (`:authority` ("": none), `:path`, the regular fields, whether
    // `te: trailers` is added, whether the head is filled whole)
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], bool, bool);
    let cookies = [
        ("cookie", "a=1"),
        ("expect", "100-Continue"),
        ("cookie", "b=2"),
        ("content-length", "0"),
        ("te", "trailers"),
    ];
    let cases: &[Case] = &[
        // h2load's request; the default port (removed later by the
        // normalisation).
        (
            "127.0.0.1:8443",
            "/",
            &[("user-agent", "h2load nghttp2/1.52.0")],
            false,
            true,
        ),
        ("example.com:443", "/a?b", &[("accept", "*/*")], false, true),
        // No authority: origin form, an empty host, or `host` checked as
        // HTTP/1 checks it.
        ("", "/x", &[], false, true),
        ("", "/x", &[("host", "a.example:81")], false, true),
        ("", "/x", &[("host", "a b")], false, false),
        // An authority HTTP/1 does not take in a URI (userinfo): origin.
        ("u@h", "/", &[], false, false),
        // Cookies joined, expect, a declared length, `te: trailers`.
        ("h", "/p", &cookies, true, true),
        // A repeated content-length: HTTP/1 refuses it; left to it.
        (
            "h",
            "/",
            &[("content-length", "0"), ("content-length", "0")],
            false,
            false,
        ),
        // A bad escape, taken as HAProxy 2.6 takes it; a target HTTP/1
        // refuses (a space).
        ("h", "/%zz", &[], false, true),
        ("h", "/a b", &[], false, false),
        // A good escape; an authority ending in `%` (the path's `/`
        // cannot complete it).
        ("h", "/a%41", &[], false, true),
        ("h%", "/x", &[], false, true),
        // OPTIONS * in absolute form (no path).
        ("h", "*", &[], false, true),
        // Bytes HTTP/2 allows and HTTP/1 does not (a control byte, DEL),
        // in a field and in the authority: left to the parser.
        ("h", "/", &[("x-c", "a\u{1}b")], false, false),
        ("h", "/", &[("x-d", "a\u{7f}")], false, false),
        ("h\u{1}", "/", &[], false, false),
        // An empty cookie crumb: the joined line ends with a space.
        ("h", "/", &[("cookie", "a=1"), ("cookie", "")], false, false),
    ];
    let limits = crate::http1::Limits::default();
    for (i, &(authority, path, fields, te, whole)) in cases.iter().enumerate() {
        let (mut c, mut cl) = open();
        let method = if path == "*" { "OPTIONS" } else { "GET" };
        let input = request_block(&mut cl, method, authority, path, fields);
        let mut off = 0;
        let (mut plain, mut built) = (Vec::new(), Vec::new());
        let mut filled = RequestHead::default();
        let mut written = Written::Parse;
        let extra: &[(&[u8], &[u8])] = if te { &[(b"te", b"trailers")] } else { &[] };
        while off < input.len() {
            let p = c.recv(&input[off..], 2);
            off += p.consumed;
            if let Some(Event::Request { head, .. }) = p.event {
                head.write_h1(extra, &mut plain);
                written = head.write_h1_head(extra, &mut built, &limits, &mut filled);
            }
        }
        assert_eq!(s(&plain), s(&built), "case {i}");
        assert_eq!(written == Written::Complete, whole, "case {i}: {written:?}");
        let mut parsed = RequestHead::default();
        let r = parse_request_into(&plain, &limits, &mut parsed);
        match written {
            Written::Complete => {
                assert!(matches!(r, Ok(Status::Complete(()))), "case {i}: {r:?}");
                assert_eq!(format!("{parsed:?}"), format!("{filled:?}"), "case {i}");
            }
            Written::Spans(m, t) => {
                let mut from_spans = filled.clone();
                let r2 = complete_request_into(
                    &built,
                    (m, t),
                    crate::http1::Version::Http11,
                    built.len(),
                    &limits,
                    &mut from_spans,
                    false,
                );
                assert_eq!(format!("{r:?}"), format!("{r2:?}"), "case {i}");
            }
            Written::Parse => {}
        }
    }
}

/// The usual head's writing (`write_h1_usual`) gives the bytes, spans
/// and verdict the general writing gives, appended after bytes already
/// there, with or without the field spans; it takes the heads it should
/// (h2load's, a browser's without cookies, origin form, `*`) and leaves
/// the others to the general writing.
#[test]
fn usual_h1_head_is_written_as_the_general_writing_writes_it() {
    use crate::http1::HeaderSpan;
    type Case<'a> = (&'a str, &'a str, &'a str, &'a [(&'a str, &'a str)], bool);
    let browser: &[(&str, &str)] = &[
        ("user-agent", "Mozilla/5.0 (X11; Linux x86_64)"),
        ("accept", "text/html,*/*;q=0.8"),
        ("accept-language", "en-US,en;q=0.5"),
        ("accept-encoding", "gzip, deflate, br"),
        ("content-length", "0"),
        ("expect", "100-continue"),
        ("x-empty", ""),
    ];
    // (method, `:authority` ("": none), `:path`, fields, taken by the
    // usual writing)
    let cases: &[Case] = &[
        (
            "GET",
            "127.0.0.1:8443",
            "/?v=1",
            &[("user-agent", "h2load nghttp2/1.52.0")],
            true,
        ),
        ("GET", "example.com", "/a/b?c=d", browser, true),
        ("POST", "example.com:80", "/", &[], true),
        ("GET", "", "/x", &[("accept", "*/*")], true),
        ("OPTIONS", "h", "*", &[], true),
        ("OPTIONS", "", "*", &[], true),
        // Not an absolute URI's authority: origin form.
        ("GET", "u@h", "/", &[("a", "1")], true),
        ("GET", "h", "/%41%zz", &[], true),
        // `host`, `te` or a cookie: the general writing.
        ("GET", "", "/x", &[("host", "a.example:81")], false),
        ("GET", "h", "/x", &[("host", "h"), ("a", "b")], false),
        ("GET", "h", "/x", &[("te", "trailers")], false),
        ("GET", "h", "/x", &[("cookie", "a=1"), ("b", "2")], false),
        // A value HTTP/1 does not take.
        ("GET", "h", "/", &[("x-c", "a\u{1}b")], false),
    ];
    for (i, &(method, authority, path, fields, usual)) in cases.iter().enumerate() {
        let (mut c, mut cl) = open();
        let input = request_block(&mut cl, method, authority, path, fields);
        let mut off = 0;
        let mut seen = false;
        while off < input.len() {
            let p = c.recv(&input[off..], 2);
            off += p.consumed;
            let Some(Event::Request { head, .. }) = p.event else {
                continue;
            };
            seen = true;
            for (before, max) in [(&b""[..], 64), (b"GET / HTTP/1.1\r\n\r\n", 64), (b"", 1)] {
                let (mut a, mut b) = (before.to_vec(), before.to_vec());
                let (mut fa, mut fb) = (vec![HeaderSpan::default()], Vec::new());
                let got = head.write_h1_usual(&[], &mut a, &mut Some((&mut fa, max)));
                assert_eq!(got.is_some(), usual, "case {i}");
                let Some(got) = got else {
                    assert_eq!(a, before, "case {i}");
                    continue;
                };
                let want = head.write_h1_general(&[], &mut b, Some((&mut fb, max)));
                assert_eq!(s(&a), s(&b), "case {i}");
                assert_eq!(format!("{got:?}"), format!("{want:?}"), "case {i}");
                assert_eq!(format!("{fa:?}"), format!("{fb:?}"), "case {i}");
                // Without the spans: the same bytes.
                let mut c2 = before.to_vec();
                assert!(head.write_h1_usual(&[], &mut c2, &mut None).is_some());
                assert_eq!(c2, a, "case {i}");
            }
            // Anything added: the general writing.
            let extra: &[(&[u8], &[u8])] = &[(b"te", b"trailers")];
            assert!(head
                .write_h1_usual(extra, &mut Vec::new(), &mut None)
                .is_none());
        }
        assert!(seen, "case {i}");
    }
}

// --- stream states (RFC 9113 §5.1) ---------------------------------------------

#[test]
fn stream_id_reuse_regression_and_even_ids() {
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.get(5, "/"), 2);
    assert_eq!(
        feed(&mut c, &cl.get(3, "/"), 2),
        [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]
    );
    let (mut c, mut cl) = open();
    assert_eq!(
        feed(&mut c, &cl.get(2, "/"), 2),
        [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]
    );
    // Reuse of a closed stream.
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.get(1, "/"), 2);
    c.send_response(1, 204, &[], true).unwrap();
    assert_eq!(
        feed(&mut c, &cl.get(1, "/"), 2),
        [Ev::Closed(ErrorCode::STREAM_CLOSED)]
    );
}

#[test]
fn frames_on_idle_and_closed_streams() {
    // DATA, RST_STREAM, WINDOW_UPDATE on an idle stream: PROTOCOL_ERROR.
    for f in [
        {
            let mut v = Vec::new();
            frame::write_data(&mut v, 1, b"x", false);
            v
        },
        {
            let mut v = Vec::new();
            frame::write_rst(&mut v, 1, ErrorCode::CANCEL);
            v
        },
        {
            let mut v = Vec::new();
            frame::write_window_update(&mut v, 1, 1);
            v
        },
    ] {
        let (mut c, _) = open();
        assert_eq!(feed(&mut c, &f, 2), [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]);
    }
    // DATA on a stream closed normally: STREAM_CLOSED, connection alive.
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.get(1, "/"), 2);
    c.send_response(1, 204, &[], true).unwrap();
    take(&mut c);
    let mut d = Vec::new();
    frame::write_data(&mut d, 1, b"late", false);
    assert_eq!(feed(&mut c, &d, 3), []);
    assert_eq!(rsts(&take(&mut c)), [(1, ErrorCode::STREAM_CLOSED)]);
    // DATA on a stream ebb reset: ignored (it may have been in flight).
    feed(&mut c, &cl.headers(3, &req("POST", "/"), false), 3);
    c.reset(3, ErrorCode::CANCEL, 3).unwrap();
    take(&mut c);
    let mut d = Vec::new();
    frame::write_data(&mut d, 3, b"late", false);
    assert_eq!(feed(&mut c, &d, 4), []);
    assert!(take(&mut c).is_empty());
    // WINDOW_UPDATE and PRIORITY on closed streams: ignored.
    let mut d = Vec::new();
    frame::write_window_update(&mut d, 1, 10);
    assert_eq!(feed(&mut c, &d, 4), []);
}

#[test]
fn data_after_end_stream_is_stream_closed() {
    let (mut c, mut cl) = open();
    let mut input = cl.get(1, "/");
    frame::write_data(&mut input, 1, b"x", false);
    let ev = feed(&mut c, &input, 2);
    assert_eq!(
        ev[1],
        Ev::Reset {
            id: 1,
            code: ErrorCode::STREAM_CLOSED,
            remote: false
        }
    );
}

#[test]
fn oversized_frames_are_frame_size_errors() {
    let (mut c, _) = open();
    // Only the header: the payload is never waited for.
    let mut input = Vec::new();
    frame::write_header(&mut input, 16_385, kind::DATA, 0, 1);
    assert_eq!(
        feed(&mut c, &input, 2),
        [Ev::Closed(ErrorCode::FRAME_SIZE_ERROR)]
    );
    assert_eq!(goaway(&take(&mut c)), Some(ErrorCode::FRAME_SIZE_ERROR));
    // A PING of 7 bytes, a SETTINGS of 5.
    let (mut c, _) = open();
    let mut input = Vec::new();
    frame::write_header(&mut input, 7, kind::PING, 0, 0);
    input.extend_from_slice(&[0; 7]);
    assert_eq!(
        feed(&mut c, &input, 2),
        [Ev::Closed(ErrorCode::FRAME_SIZE_ERROR)]
    );
}

#[test]
fn more_streams_than_allowed_are_refused() {
    let cfg = Config {
        max_concurrent_streams: 3,
        ..Config::default()
    };
    let (mut c, mut cl) = open_with(cfg, &[]);
    let mut input = Vec::new();
    for id in (1..=9).step_by(2) {
        input.extend(cl.get(id, "/"));
    }
    let ev = feed(&mut c, &input, 2);
    assert_eq!(ev.len(), 3);
    assert_eq!(
        rsts(&take(&mut c)),
        [
            (7, ErrorCode::REFUSED_STREAM),
            (9, ErrorCode::REFUSED_STREAM)
        ]
    );
    // The HPACK state stayed in sync: the next request decodes.
    c.send_response(1, 204, &[], true).unwrap();
    let ev = feed(&mut c, &cl.get(11, "/x"), 3);
    assert!(matches!(&ev[..], [Ev::Request { id: 11, path, .. }] if path == "/x"));
}

// --- attacks ---------------------------------------------------------------------

/// CVE-2023-44487: open and reset streams as fast as possible.
#[test]
fn rapid_reset_ends_with_enhance_your_calm() {
    let (mut c, mut cl) = open();
    let mut closed_at = None;
    for i in 0..5_000u32 {
        let id = 2 * i + 1;
        let mut input = cl.get(id, "/");
        frame::write_rst(&mut input, id, ErrorCode::CANCEL);
        let ev = feed(&mut c, &input, 10);
        if ev.contains(&Ev::Closed(ErrorCode::ENHANCE_YOUR_CALM)) {
            closed_at = Some(i);
            break;
        }
        take(&mut c);
    }
    assert_eq!(closed_at, Some(RESET_BURST));
    assert_eq!(goaway(&take(&mut c)), Some(ErrorCode::ENHANCE_YOUR_CALM));
    // The same number spread over time (30 per second) is fine.
    let (mut c, mut cl) = open();
    for i in 0..3_000u32 {
        let id = 2 * i + 1;
        let mut input = cl.get(id, "/");
        frame::write_rst(&mut input, id, ErrorCode::CANCEL);
        let now = 1 + i * 34; // ms: slightly under 30 resets per second
        let ev = feed(&mut c, &input, now);
        assert!(!ev.iter().any(|e| matches!(e, Ev::Closed(_))), "at {i}");
        take(&mut c);
    }
}

/// CVE-2024-27316: an endless header block.
#[test]
fn continuation_flood_is_bounded() {
    // Many small CONTINUATIONs.
    let (mut c, _) = open();
    let mut input = Vec::new();
    frame::write_header(&mut input, 1, kind::HEADERS, 0, 1);
    input.push(0x82);
    for _ in 0..10_000 {
        frame::write_header(&mut input, 1, kind::CONTINUATION, 0, 1);
        input.push(0x82);
    }
    let ev = feed(&mut c, &input, 2);
    assert_eq!(ev, [Ev::Closed(ErrorCode::ENHANCE_YOUR_CALM)]);
    // Large ones: stopped once the block passes 2 x max_header_list_size.
    let (mut c, _) = open();
    let mut input = Vec::new();
    frame::write_header(&mut input, 0, kind::HEADERS, 0, 1);
    let mut frames_sent = 0;
    for _ in 0..MAX_CONTINUATIONS {
        frame::write_header(&mut input, 16_384, kind::CONTINUATION, 0, 1);
        input.extend(std::iter::repeat_n(0x82u8, 16_384));
        frames_sent += 1;
    }
    let ev = feed(&mut c, &input, 2);
    assert_eq!(ev, [Ev::Closed(ErrorCode::ENHANCE_YOUR_CALM)]);
    assert!(frames_sent > 2);
    // Empty CONTINUATIONs count too.
    let (mut c, _) = open();
    let mut input = Vec::new();
    frame::write_header(&mut input, 0, kind::HEADERS, 0, 1);
    for _ in 0..5_000 {
        frame::write_header(&mut input, 0, kind::CONTINUATION, 0, 1);
    }
    assert_eq!(
        feed(&mut c, &input, 2),
        [Ev::Closed(ErrorCode::ENHANCE_YOUR_CALM)]
    );
}

/// HPACK bomb: a 4 KB table entry named thousands of times, and a plainly
/// oversized header list: 431, the stream ends, the connection goes on.
#[test]
fn hpack_bomb_and_oversized_lists_get_431() {
    let (mut c, mut cl) = open();
    let big = "a".repeat(4000);
    let mut block = cl.block(&req("GET", "/"));
    // Insert a 4 KB entry, then index it 150 times (62 = newest): 600 KB
    // decoded, in fewer fields than a block may have (`max_fields`).
    cl.enc
        .encode_with(b"x-big", big.as_bytes(), Indexing::Incremental, &mut block);
    block.extend(std::iter::repeat_n(0xbe, 150));
    let mut input = Vec::new();
    frame::write_headers(&mut input, 1, &block, true, 16_384);
    assert_eq!(feed(&mut c, &input, 2), []);
    let f = take(&mut c);
    let mut dec = Decoder::new(4096);
    assert_eq!(
        response_fields(&f, &mut dec)[0],
        (":status".into(), "431".into())
    );
    assert_eq!(c.open_streams(), 0);
    // The connection and its HPACK state go on.
    let ev = feed(&mut c, &cl.get(3, "/next"), 3);
    assert!(matches!(&ev[..], [Ev::Request { id: 3, path, .. }] if path == "/next"));
}

/// A block of more fields than `max_fields` (HAProxy's HPACK list,
/// 2 x `tune.http.maxhdr` - 1) ends the connection (COMPRESSION_ERROR),
/// even when each field is a one-byte index; 201 fields are a request.
#[test]
fn more_fields_than_the_hpack_list_end_the_connection() {
    // 4 pseudo-header fields and `accept` (static 19) indexed k times.
    for k in [197, 198] {
        let (mut c, mut cl) = open();
        let mut block = cl.block(&req("GET", "/"));
        block.extend(std::iter::repeat_n(0x93, k));
        let mut input = Vec::new();
        frame::write_headers(&mut input, 1, &block, true, 16_384);
        let ev = feed(&mut c, &input, 2);
        match k {
            197 => assert!(matches!(&ev[..], [Ev::Request { id: 1, .. }]), "{ev:?}"),
            _ => assert_eq!(ev, [Ev::Closed(ErrorCode::COMPRESSION_ERROR)]),
        }
    }
}

/// A block of the same bytes as the request head before it, on the same
/// dynamic table, is that head again (reused without decoding it); once
/// the table changed, the same bytes are decoded anew.
#[test]
fn a_repeated_block_is_the_same_head_until_the_table_changes() {
    let (mut c, mut cl) = open();
    let path = |ev: &[Ev]| match ev {
        [Ev::Request { path, .. }] => path.clone(),
        _ => panic!("{ev:?}"),
    };
    // The first inserts the fields; the second is all indexes.
    assert_eq!(
        path(&feed(&mut c, &cl.headers(1, &req("GET", "/a"), true), 1)),
        "/a"
    );
    let again = cl.block(&req("GET", "/a"));
    let frame_of = |id: u32| {
        let mut f = Vec::new();
        frame::write_headers(&mut f, id, &again, true, 16_384);
        f
    };
    for id in [3, 5, 7] {
        assert_eq!(path(&feed(&mut c, &frame_of(id), id)), "/a");
    }
    // `/b` is inserted: index 62 is now its `:path`, and the same bytes
    // name other fields.
    assert_eq!(
        path(&feed(&mut c, &cl.headers(9, &req("GET", "/b"), true), 9)),
        "/b"
    );
    let ev = feed(&mut c, &frame_of(11), 11);
    assert!(
        !matches!(&ev[..], [Ev::Request { path, .. }] if path == "/a"),
        "{ev:?}"
    );
}

fn flood(frame_bytes: &[u8], read_output: bool) -> Option<usize> {
    let (mut c, _) = open();
    for i in 0..5_000 {
        let ev = feed(&mut c, frame_bytes, 2);
        if ev.contains(&Ev::Closed(ErrorCode::ENHANCE_YOUR_CALM)) {
            assert_eq!(goaway(&take(&mut c)), Some(ErrorCode::ENHANCE_YOUR_CALM));
            return Some(i);
        }
        if read_output {
            take(&mut c);
        }
        assert!(c.output().len() < 64 * 1024, "output grows unbounded");
    }
    None
}

#[test]
fn settings_ping_window_update_and_empty_data_floods() {
    let s = settings(&[(setting::MAX_FRAME_SIZE, 16_384)]);
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, false, [1; 8]);
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 0, 1);
    let mut prio = Vec::new();
    frame::write_header(&mut prio, 5, kind::PRIORITY, 0, 3);
    prio.extend_from_slice(&[0, 0, 0, 0, 1]);
    for (name, f) in [
        ("settings", &s),
        ("ping", &ping),
        ("window_update", &wu),
        ("priority", &prio),
    ] {
        // Peer reads our answers: bounded by the idle-frame limit.
        // (The client's first SETTINGS counted one already.)
        let n = flood(f, true);
        assert_eq!(n, Some(FLOOD_LIMIT as usize - 1), "{name} with reads");
        // Peer does not read: bounded by pending answers (or the above).
        let n = flood(f, false).unwrap();
        assert!(n <= MAX_PENDING_CONTROL as usize, "{name} without reads");
    }
    // Empty DATA frames on an open stream.
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.headers(1, &req("POST", "/"), false), 2);
    let mut empty = Vec::new();
    frame::write_data(&mut empty, 1, b"", false);
    let mut n = 0;
    loop {
        let ev = feed(&mut c, &empty, 2);
        if ev.contains(&Ev::Closed(ErrorCode::ENHANCE_YOUR_CALM)) {
            break;
        }
        n += 1;
        assert!(n <= FLOOD_LIMIT as usize);
    }
    // Useful work resets the count: a long download's WINDOW_UPDATEs pass.
    let (mut c, mut cl) = open();
    feed(&mut c, &cl.get(1, "/big"), 2);
    c.send_response(1, 200, &[], false).unwrap();
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 1, 1000);
    frame::write_window_update(&mut wu, 0, 1000);
    for _ in 0..3 * FLOOD_LIMIT {
        assert_eq!(c.send_data(1, &[0; 1000], false, 2), Ok(1000));
        take(&mut c);
        let ev = feed(&mut c, &wu, 2);
        assert_eq!(ev, [Ev::Window(1), Ev::Window(0)]);
    }
}

/// A client that opens no window: ebb queues no DATA, and resets the
/// stream once it has waited `stall_timeout_ms`.
#[test]
fn zero_window_slow_reader_is_reset() {
    let (mut c, mut cl) = open_with(Config::default(), &[(setting::INITIAL_WINDOW_SIZE, 0)]);
    feed(&mut c, &cl.get(1, "/"), 1000);
    c.send_response(1, 200, &[], false).unwrap();
    take(&mut c);
    let body = vec![0u8; 1 << 20];
    assert_eq!(c.send_data(1, &body, true, 1000), Ok(0));
    assert!(c.output().is_empty(), "nothing queued beyond the window");
    let mut reset = Vec::new();
    c.tick(1000 + 29_999, &mut reset);
    assert!(reset.is_empty());
    c.tick(1000 + 30_000, &mut reset);
    assert_eq!(reset, [1]);
    assert_eq!(rsts(&take(&mut c)), [(1, ErrorCode::CANCEL)]);
    assert_eq!(c.open_streams(), 0);
}

#[test]
fn push_promise_from_a_client_is_a_protocol_error() {
    let (mut c, _) = open();
    let mut input = Vec::new();
    frame::write_header(&mut input, 4, kind::PUSH_PROMISE, flag::END_HEADERS, 1);
    input.extend_from_slice(&[0, 0, 0, 2]);
    assert_eq!(
        feed(&mut c, &input, 2),
        [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]
    );
}

#[test]
fn after_a_connection_error_input_is_ignored() {
    let (mut c, mut cl) = open();
    let mut input = Vec::new();
    frame::write_header(&mut input, 16_385, kind::DATA, 0, 1);
    feed(&mut c, &input, 2);
    assert!(c.is_done());
    take(&mut c);
    assert_eq!(feed(&mut c, &cl.get(1, "/"), 3), []);
    assert!(c.output().is_empty());
}

/// WINDOW_UPDATE with a 0 increment: on stream 0 a connection error, on a
/// stream a stream error whose RST_STREAM spends the reset budget, so a
/// flood of them ends with GOAWAY ENHANCE_YOUR_CALM.
#[test]
fn zero_increment_window_update_flood() {
    let (mut c, _) = open();
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 0, 0);
    assert_eq!(
        feed(&mut c, &wu, 2),
        [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]
    );

    let (mut c, mut cl) = open();
    feed(&mut c, &cl.headers(1, &req("POST", "/"), false), 2);
    let mut wu = Vec::new();
    frame::write_header(&mut wu, 4, kind::WINDOW_UPDATE, 0, 1);
    wu.extend_from_slice(&[0; 4]);
    let mut n = 0u32;
    loop {
        let ev = feed(&mut c, &wu, 2);
        take(&mut c);
        if ev.contains(&Ev::Closed(ErrorCode::ENHANCE_YOUR_CALM)) {
            break;
        }
        n += 1;
        assert!(n <= RESET_BURST, "not bounded");
    }
    assert_eq!(n, RESET_BURST);
}

/// Oversized header lists over and over: each one is answered 431 and
/// reset, and the resets spend the rapid-reset budget.
#[test]
fn repeated_oversized_lists_end_the_connection() {
    let cfg = Config {
        max_header_list_size: 100,
        reset_burst: 10,
        ..Config::default()
    };
    let (mut c, mut cl) = open_with(cfg, &[]);
    let big = "b".repeat(200);
    let mut closed = None;
    for i in 0..100u32 {
        let mut fields = req("GET", "/");
        fields.push(("x-big", &big));
        let ev = feed(&mut c, &cl.headers(2 * i + 1, &fields, true), 2);
        take(&mut c);
        if ev.contains(&Ev::Closed(ErrorCode::ENHANCE_YOUR_CALM)) {
            closed = Some(i);
            break;
        }
        assert_eq!(ev, []);
    }
    assert_eq!(closed, Some(10));
}

/// A client that opens huge windows and never reads: DATA is queued only
/// up to `max_output`, and the stream waiting on the output is reset once
/// it has waited `stall_timeout_ms`.
#[test]
fn unread_output_is_bounded_and_reset() {
    let cfg = Config {
        max_output: 32 * 1024,
        ..Config::default()
    };
    let (mut c, mut cl) = open_with(cfg, &[(setting::INITIAL_WINDOW_SIZE, frame::MAX_WINDOW)]);
    let mut wu = Vec::new();
    frame::write_window_update(&mut wu, 0, frame::MAX_WINDOW - frame::DEFAULT_WINDOW);
    feed(&mut c, &wu, 2);
    feed(&mut c, &cl.get(1, "/"), 2);
    c.send_response(1, 200, &[], false).unwrap();
    let body = vec![7u8; 1 << 20];
    let mut sent = 0;
    for _ in 0..100 {
        sent += c.send_data(1, &body[sent..], true, 10).unwrap();
    }
    assert!(sent < 32 * 1024, "queued {sent}");
    // Frame headers of the last DATA frames may pass it by 9 bytes each.
    assert!(c.output().len() <= 32 * 1024 + 64);
    let mut reset = Vec::new();
    c.tick(10 + 29_999, &mut reset);
    assert!(reset.is_empty());
    // Writing some output lets more DATA in; the wait starts again.
    c.consume_output(16 * 1024);
    assert!(c.send_data(1, &body[sent..], true, 20_000).unwrap() > 0);
    c.tick(20_000 + 29_999, &mut reset);
    assert!(reset.is_empty());
    c.tick(20_000 + 30_000, &mut reset);
    assert_eq!(reset, [1]);
}

#[test]
fn name_and_value_rules_hold_wherever_the_byte_is() {
    use super::request::{valid_name, valid_value};
    for b in 0..=255u8 {
        let tchar = b.is_ascii_digit() || b.is_ascii_lowercase() || b"!#$%&'*+-.^_`|~".contains(&b);
        let value_ok = !matches!(b, 0 | b'\r' | b'\n');
        for at in [0usize, 1, 15, 16, 32, 40] {
            let mut n = vec![b'a'; 41];
            n[at] = b;
            assert_eq!(valid_name(&n), tchar, "{b:#x} at {at}");
            let mut v = vec![b'a'; 41];
            v[at] = b;
            let edge_ws = matches!(b, b' ' | b'\t') && (at == 0 || at == 40);
            assert_eq!(valid_value(&v), value_ok && !edge_ws, "{b:#x} at {at}");
        }
    }
    assert!(!valid_name(b""));
    assert!(valid_value(b""));
}

#[test]
fn the_status_record_is_the_record_push_field_writes() {
    let mut list = Vec::new();
    Encoder::push_field(&mut list, b":status", b"000");
    assert_eq!(list, STATUS_RECORD);
}

/// The props of `:path` and `:authority` values (read in one pass for
/// the value rules and the target's bytes) are those each rule gives on
/// its own: every byte alone and beside `/`, escapes good and bad.
#[test]
fn target_props_in_one_pass_agree_with_each_rule() {
    use super::request::{field_props, props, valid_value};
    let mut values: Vec<Vec<u8>> = Vec::new();
    for b in 0..=255u8 {
        values.push(vec![b]);
        values.push(vec![b'/', b, b'x']);
        values.push(vec![b'/', b'%', b, b'0']);
    }
    for v in [
        &b"/a%2Fb"[..],
        b"/a%2",
        b"/a%zz",
        b"/%",
        b"/ok?x=1&y=%41",
        b" /lead",
        b"/trail\t",
        b"/\x7f",
        b"example.com:8080",
        b"",
    ] {
        values.push(v.to_vec());
    }
    for v in &values {
        for name in [&b":path"[..], b":authority"] {
            let p = field_props(name, v);
            assert_eq!(
                p & props::TARGET_OK != 0,
                crate::http1::valid_target_bytes(v),
                "{name:?} {v:?}"
            );
            assert_eq!(p & props::BAD_H2 == 0, valid_value(v), "{name:?} {v:?}");
            let h1_bad = v.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f);
            assert_eq!(p & props::BAD_H1 != 0, h1_bad, "{name:?} {v:?}");
        }
    }
}
