//! The client role: a client [`Connection`] driven against a server
//! [`Connection`] in memory (the bytes of one fed to the other), and
//! against scripted server frames for what a well-behaved server never
//! sends. No sockets.

use super::frame::{self, flag, kind, setting};
use super::hpack::{Encoder, HuffmanMode, Indexing};
use super::tests::{feed, frames, goaway, rsts, settings, take, Ev};
use super::*;

type Fields<'a> = [(&'a [u8], &'a [u8])];

fn get(path: &str) -> Vec<(&'static [u8], Vec<u8>)> {
    req("GET", path)
}

fn req(method: &'static str, path: &str) -> Vec<(&'static [u8], Vec<u8>)> {
    vec![
        (b":method" as &[u8], method.as_bytes().to_vec()),
        (b":scheme", b"https".to_vec()),
        (b":authority", b"example.com".to_vec()),
        (b":path", path.as_bytes().to_vec()),
    ]
}

fn as_fields<'a>(v: &'a [(&'static [u8], Vec<u8>)]) -> Vec<(&'a [u8], &'a [u8])> {
    v.iter().map(|(n, x)| (*n, x.as_slice())).collect()
}

/// A client and a server connection wired back to back.
struct Pair {
    c: Connection,
    s: Connection,
    now: u32,
}

impl Pair {
    fn new(ccfg: Config, scfg: Config) -> Pair {
        let mut p = Pair {
            c: Connection::client(ccfg),
            s: Connection::new(scfg),
            now: 1,
        };
        // Only the connection window the client grants at start is news
        // (the server grants its own with the first DATA frame).
        let (ce, se) = p.pump();
        assert_eq!((ce, se), (vec![], vec![Ev::Window(0)]));
        p
    }

    fn default() -> Pair {
        Pair::new(Config::default(), Config::default())
    }

    /// Moves bytes both ways until both outputs are empty; returns the
    /// client's and the server's events.
    fn pump(&mut self) -> (Vec<Ev>, Vec<Ev>) {
        let (mut ce, mut se) = (Vec::new(), Vec::new());
        while !self.c.output().is_empty() || !self.s.output().is_empty() {
            let out = self.c.output().to_vec();
            self.c.consume_output(out.len());
            se.extend(feed(&mut self.s, &out, self.now));
            let out = self.s.output().to_vec();
            self.s.consume_output(out.len());
            ce.extend(feed(&mut self.c, &out, self.now));
        }
        (ce, se)
    }

    fn request(&mut self, fields: &Fields, end_stream: bool) -> u32 {
        self.c.send_request(fields, end_stream).unwrap()
    }
}

fn data(id: u32, d: &[u8], end: bool) -> Ev {
    Ev::Data {
        id,
        data: d.to_vec(),
        end,
    }
}

#[test]
fn client_preface_and_settings() {
    let mut c = Connection::client(Config::default());
    let out = c.output().to_vec();
    assert!(out.starts_with(frame::PREFACE));
    let f = frames(&out[frame::PREFACE.len()..]);
    assert_eq!(f[0].0.kind, kind::SETTINGS);
    let params: Vec<_> = frame::settings_iter(&f[0].1).collect();
    assert!(params.contains(&(setting::ENABLE_PUSH, 0)));
    assert_eq!(c.role(), Role::Client);
    // The server's first frame must be SETTINGS (§3.4).
    c.consume_output(out.len());
    let mut ping = Vec::new();
    frame::write_ping(&mut ping, false, [0; 8]);
    assert_eq!(
        feed(&mut c, &ping, 1),
        [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]
    );
    assert_eq!(goaway(&take(&mut c)), Some(ErrorCode::PROTOCOL_ERROR));
}

#[test]
fn request_response_body_and_trailers_both_ways() {
    let mut p = Pair::default();
    // GET without body.
    let id = p.request(&as_fields(&get("/a")), true);
    assert_eq!(id, 1);
    let (_, se) = p.pump();
    assert_eq!(
        se,
        [Ev::Request {
            id: 1,
            method: "GET".into(),
            path: "/a".into(),
            end: true
        }]
    );
    p.s.send_response(1, 200, &[(b"content-length", b"5")], false)
        .unwrap();
    assert_eq!(p.s.send_data(1, b"hello", true, 1), Ok(5));
    let (ce, _) = p.pump();
    assert_eq!(
        ce,
        [
            Ev::Response {
                id: 1,
                status: 200,
                end: false
            },
            data(1, b"hello", true)
        ]
    );
    assert_eq!((p.c.open_streams(), p.s.open_streams()), (0, 0));
    // POST with a body and trailers, answered with trailers.
    let id = p.request(&as_fields(&req("POST", "/up")), false);
    assert_eq!(id, 3);
    assert_eq!(p.c.send_data(3, b"body", false, 1), Ok(4));
    p.c.send_trailers(3, &[(b"x-sum", b"1")]).unwrap();
    let (_, se) = p.pump();
    assert_eq!(se.len(), 3);
    assert_eq!(se[1], data(3, b"body", false));
    assert_eq!(
        se[2],
        Ev::Trailers {
            id: 3,
            fields: vec![("x-sum".into(), "1".into())]
        }
    );
    p.s.send_response(3, 200, &[], false).unwrap();
    p.s.send_data(3, b"ok", false, 1).unwrap();
    p.s.send_trailers(3, &[(b"grpc-status", b"0")]).unwrap();
    let (ce, _) = p.pump();
    assert_eq!(
        ce[2],
        Ev::Trailers {
            id: 3,
            fields: vec![("grpc-status".into(), "0".into())]
        }
    );
    assert_eq!((p.c.open_streams(), p.s.open_streams()), (0, 0));
    // A server command is refused in the client role, and the reverse.
    assert_eq!(
        p.c.send_response(3, 200, &[], true),
        Err(SendError::BadState)
    );
    assert_eq!(
        p.s.send_request(&as_fields(&get("/")), true),
        Err(SendError::BadState)
    );
}

/// 300 KB up and 300 KB down through 64 KB stream windows: each side
/// sends only what the other's windows allow, and the windows reopen as
/// the receiver releases what it consumed.
#[test]
fn flow_control_both_ways() {
    let mut p = Pair::default();
    let body: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
    let id = p.request(&as_fields(&req("POST", "/")), false);
    let mut sent = 0;
    let mut got = Vec::new();
    let mut rounds = 0;
    while got.len() < body.len() {
        sent += p.c.send_data(id, &body[sent..], true, 1).unwrap();
        let (_, se) = p.pump();
        for e in se {
            if let Ev::Data { data, .. } = e {
                p.s.release(id, data.len());
                got.extend(data);
            }
        }
        rounds += 1;
        assert!(rounds < 100, "stuck at {sent}");
    }
    assert_eq!(got, body);
    // Without release the sender stops at the window.
    p.s.send_response(id, 200, &[], false).unwrap();
    p.pump();
    let n = p.s.send_data(id, &body, false, 1).unwrap();
    assert_eq!(n, frame::DEFAULT_WINDOW as usize);
    let (ce, _) = p.pump();
    assert_eq!(p.s.send_data(id, &body[n..], true, 1), Ok(0));
    assert_eq!(ce.len(), 4, "16 KiB DATA frames");
    let mut got = Vec::new();
    for e in ce {
        if let Ev::Data { data, .. } = e {
            got.extend(data);
        }
    }
    assert_eq!(got.len(), n);
    // Releasing reopens it.
    p.c.release(id, n);
    let (_, se) = p.pump();
    assert!(se.contains(&Ev::Window(id)));
    assert!(p.s.send_data(id, &body[n..], true, 1).unwrap() > 0);
}

#[test]
fn concurrency_follows_the_servers_setting() {
    let scfg = Config {
        max_concurrent_streams: 2,
        ..Config::default()
    };
    let mut p = Pair::new(Config::default(), scfg);
    let a = p.request(&as_fields(&get("/1")), true);
    let b = p.request(&as_fields(&get("/2")), true);
    assert_eq!(
        p.c.send_request(&as_fields(&get("/3")), true),
        Err(SendError::Busy)
    );
    p.pump();
    p.s.send_response(a, 204, &[], true).unwrap();
    p.pump();
    let c = p.request(&as_fields(&get("/3")), true);
    assert_eq!((a, b, c), (1, 3, 5));
}

#[test]
fn server_graceful_goaway_drains_then_refuses() {
    let mut p = Pair::default();
    let a = p.request(&as_fields(&get("/1")), true);
    let b = p.request(&as_fields(&get("/2")), true);
    p.pump();
    p.s.shutdown();
    let (ce, _) = p.pump();
    // GOAWAY with the largest id, then (after the PING) the real one.
    assert_eq!(
        ce,
        [
            Ev::GoAway(frame::MAX_WINDOW, ErrorCode::NO_ERROR),
            Ev::GoAway(3, ErrorCode::NO_ERROR)
        ]
    );
    assert_eq!(
        p.c.send_request(&as_fields(&get("/3")), true),
        Err(SendError::GoingAway)
    );
    // Both streams below the last id finish.
    for id in [a, b] {
        p.s.send_response(id, 200, &[], false).unwrap();
        p.s.send_data(id, b"x", true, 1).unwrap();
    }
    let (ce, _) = p.pump();
    assert_eq!(ce.len(), 4);
    assert!(p.c.is_done() && p.s.is_done());
}

#[test]
fn streams_above_a_goaway_last_id_are_dropped() {
    let mut p = Pair::default();
    let a = p.request(&as_fields(&get("/1")), true);
    let b = p.request(&as_fields(&get("/2")), true);
    let mut g = Vec::new();
    frame::write_goaway(&mut g, a, ErrorCode::NO_ERROR);
    assert_eq!(feed(&mut p.c, &g, 1), [Ev::GoAway(a, ErrorCode::NO_ERROR)]);
    assert_eq!(p.c.open_streams(), 1);
    assert_eq!(p.c.send_data(b, b"x", true, 1), Err(SendError::NoStream));
    assert!(!p.c.is_done());
    p.pump();
    p.s.send_response(a, 204, &[], true).unwrap();
    p.pump();
    assert!(p.c.is_done());
}

#[test]
fn a_cancelled_stream_ignores_the_answer_in_flight() {
    let mut p = Pair::default();
    let id = p.request(&as_fields(&get("/slow")), true);
    p.pump();
    // The server answers while the client cancels: the frames cross.
    p.s.send_response(id, 200, &[(b"x-big", b"header value to index")], false)
        .unwrap();
    p.s.send_data(id, b"late body", true, 1).unwrap();
    p.c.reset(id, ErrorCode::CANCEL, 1).unwrap();
    let to_client = p.s.output().to_vec();
    p.s.consume_output(to_client.len());
    assert_eq!(feed(&mut p.c, &to_client, 1), []);
    let (_, se) = p.pump();
    assert!(se.is_empty(), "the server had ended the stream: {se:?}");
    // HPACK stayed in sync: the next answer decodes.
    let id = p.request(&as_fields(&get("/next")), true);
    p.pump();
    p.s.send_response(id, 200, &[(b"x-big", b"header value to index")], true)
        .unwrap();
    let (ce, _) = p.pump();
    assert_eq!(
        ce,
        [Ev::Response {
            id,
            status: 200,
            end: true
        }]
    );
}

#[test]
fn client_shutdown_lets_streams_finish() {
    let mut p = Pair::default();
    let id = p.request(&as_fields(&get("/")), true);
    p.c.shutdown();
    let (_, se) = p.pump();
    assert_eq!(se[1], Ev::GoAway(0, ErrorCode::NO_ERROR));
    assert!(!p.c.is_done());
    assert_eq!(
        p.c.send_request(&as_fields(&get("/")), true),
        Err(SendError::GoingAway)
    );
    p.s.send_response(id, 204, &[], true).unwrap();
    p.pump();
    assert!(p.c.is_done());
}

// --- scripted servers ------------------------------------------------------------

/// A client past the server's SETTINGS with one request open (id 1), and
/// the scripted server's HPACK encoder.
fn scripted(method: &'static str) -> (Connection, Encoder) {
    let mut c = Connection::client(Config::default());
    take_all(&mut c);
    assert_eq!(feed(&mut c, &settings(&[]), 1), []);
    c.send_request(&as_fields(&req(method, "/")), true).unwrap();
    take_all(&mut c);
    (c, Encoder::new(4096, HuffmanMode::Never))
}

fn take_all(c: &mut Connection) {
    let n = c.output().len();
    c.consume_output(n);
}

fn head(enc: &mut Encoder, id: u32, fields: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        enc.encode_with(n.as_bytes(), v.as_bytes(), Indexing::Never, &mut b);
    }
    let mut out = Vec::new();
    frame::write_headers(&mut out, id, &b, end_stream, 16_384);
    out
}

#[test]
fn interim_responses_come_before_the_final_one() {
    let (mut c, mut enc) = scripted("GET");
    let mut input = head(&mut enc, 1, &[(":status", "103"), ("link", "</a>")], false);
    input.extend(head(&mut enc, 1, &[(":status", "200")], true));
    assert_eq!(
        feed(&mut c, &input, 2),
        [
            Ev::Response {
                id: 1,
                status: 103,
                end: false
            },
            Ev::Response {
                id: 1,
                status: 200,
                end: true
            }
        ]
    );
    assert_eq!(c.open_streams(), 0);
    // An interim head that ends the stream is malformed.
    let (mut c, mut enc) = scripted("GET");
    let input = head(&mut enc, 1, &[(":status", "100")], true);
    assert_eq!(
        feed(&mut c, &input, 2),
        [Ev::Reset {
            id: 1,
            code: ErrorCode::PROTOCOL_ERROR,
            remote: false
        }]
    );
}

#[test]
fn malformed_responses_are_stream_errors() {
    let cases: [&[(&str, &str)]; 6] = [
        &[("content-type", "text/plain")],            // no :status
        &[(":status", "200"), (":path", "/")],        // request pseudo
        &[(":status", "2000")],                       // not 3 digits
        &[(":status", "200"), ("Content-Type", "x")], // upper case
        &[(":status", "200"), ("connection", "close")],
        &[(":status", "101")],
    ];
    for fields in cases {
        let (mut c, mut enc) = scripted("GET");
        let input = head(&mut enc, 1, fields, true);
        assert_eq!(
            feed(&mut c, &input, 2),
            [Ev::Reset {
                id: 1,
                code: ErrorCode::PROTOCOL_ERROR,
                remote: false
            }],
            "{fields:?}"
        );
        assert_eq!(rsts(&take(&mut c)), [(1, ErrorCode::PROTOCOL_ERROR)]);
    }
    // DATA before the head, and DATA past content-length.
    let (mut c, _) = scripted("GET");
    let mut d = Vec::new();
    frame::write_data(&mut d, 1, b"x", true);
    assert!(matches!(
        feed(&mut c, &d, 2)[..],
        [Ev::Reset {
            id: 1,
            code: ErrorCode::PROTOCOL_ERROR,
            ..
        }]
    ));
    assert_eq!(c.open_streams(), 0);
    let (mut c2, mut enc) = scripted("GET");
    let mut input = head(
        &mut enc,
        1,
        &[(":status", "200"), ("content-length", "2")],
        false,
    );
    frame::write_data(&mut input, 1, b"abc", true);
    let ev = feed(&mut c2, &input, 2);
    assert_eq!(
        ev[1],
        Ev::Reset {
            id: 1,
            code: ErrorCode::PROTOCOL_ERROR,
            remote: false
        }
    );
}

#[test]
fn head_204_and_304_answers_have_no_body() {
    let (mut c, mut enc) = scripted("HEAD");
    let input = head(
        &mut enc,
        1,
        &[(":status", "200"), ("content-length", "1000")],
        true,
    );
    assert_eq!(
        feed(&mut c, &input, 2),
        [Ev::Response {
            id: 1,
            status: 200,
            end: true
        }]
    );
    let (mut c, mut enc) = scripted("GET");
    let input = head(
        &mut enc,
        1,
        &[(":status", "304"), ("content-length", "1000")],
        true,
    );
    assert_eq!(feed(&mut c, &input, 2).len(), 1);
    assert!(c.output().is_empty(), "no RST_STREAM");
}

#[test]
fn push_and_server_opened_streams_are_refused() {
    // PUSH_PROMISE (push is disabled).
    let (mut c, _) = scripted("GET");
    let mut input = Vec::new();
    frame::write_header(&mut input, 4, kind::PUSH_PROMISE, flag::END_HEADERS, 1);
    input.extend_from_slice(&[0, 0, 0, 2]);
    assert_eq!(
        feed(&mut c, &input, 2),
        [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]
    );
    // HEADERS on an even id, and on an odd id the client never opened.
    for id in [2, 5] {
        let (mut c, mut enc) = scripted("GET");
        let input = head(&mut enc, id, &[(":status", "200")], true);
        assert_eq!(
            feed(&mut c, &input, 2),
            [Ev::Closed(ErrorCode::PROTOCOL_ERROR)],
            "id {id}"
        );
    }
    // SETTINGS_ENABLE_PUSH 1 from a server.
    let (mut c, _) = scripted("GET");
    assert_eq!(
        feed(&mut c, &settings(&[(setting::ENABLE_PUSH, 1)]), 2),
        [Ev::Closed(ErrorCode::PROTOCOL_ERROR)]
    );
    // HEADERS on a stream both sides ended: STREAM_CLOSED.
    let (mut c, mut enc) = scripted("GET");
    let input = head(&mut enc, 1, &[(":status", "204")], true);
    feed(&mut c, &input, 2);
    let input = head(&mut enc, 1, &[(":status", "204")], true);
    assert_eq!(
        feed(&mut c, &input, 2),
        [Ev::Closed(ErrorCode::STREAM_CLOSED)]
    );
}

#[test]
fn stream_ids_run_out_into_going_away() {
    let mut c = Connection::client(Config::default());
    take_all(&mut c);
    feed(&mut c, &settings(&[]), 1);
    // Open and reset streams up to the last id.
    let mut last = 0;
    loop {
        match c.send_request(&as_fields(&get("/")), true) {
            Ok(id) => {
                last = id;
                c.reset(id, ErrorCode::CANCEL, 1).unwrap();
                take_all(&mut c);
                if id < frame::MAX_WINDOW - 10 {
                    // Skip ahead: the bound is what is tested.
                    c.skip_ids_for_test(frame::MAX_WINDOW - 4);
                }
            }
            Err(e) => {
                assert_eq!(e, SendError::GoingAway);
                break;
            }
        }
    }
    assert_eq!(last, frame::MAX_WINDOW);
}
