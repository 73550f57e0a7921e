//! The HTTP/2 client connection (ebb facing a server) fed arbitrary server
//! bytes (after a valid SETTINGS half the time), with requests open: never
//! panics, always makes progress or asks for more, gives the same events
//! whatever the split into reads, and keeps its output bounded.
#![no_main]

use ebb::h2::{Config, Connection, Event, SendError};
use libfuzzer_sys::fuzz_target;

const BODY: [u8; 100_000] = [b'x'; 100_000];

fn fields(method: &'static [u8]) -> [(&'static [u8], &'static [u8]); 4] {
    [
        (b":method", method),
        (b":scheme", b"https"),
        (b":authority", b"example.com"),
        (b":path", b"/"),
    ]
}

/// Runs `input` in reads of `step` bytes; returns a digest of the events.
fn run(input: &[u8], step: usize) -> Vec<String> {
    let mut c = Connection::client(Config::default());
    let mut log = Vec::new();
    // A fixed clock: the events must not depend on the split.
    let now = 1u32;
    c.send_request(&fields(b"GET"), true)
        .expect("first request");
    let post = c.send_request(&fields(b"POST"), false).expect("second");
    let mut sent = c.send_data(post, &BODY, true, now).expect("body");
    c.send_request(&fields(b"HEAD"), true).expect("third");
    let n = c.output().len();
    c.consume_output(n);
    let mut buf: Vec<u8> = Vec::new();
    for chunk in input.chunks(step.max(1)) {
        buf.extend_from_slice(chunk);
        let mut off = 0;
        loop {
            let p = c.recv(&buf[off..], now);
            assert!(p.consumed <= buf.len() - off);
            off += p.consumed;
            let mut more = false;
            match p.event {
                None if p.consumed == 0 => break,
                None => {}
                Some(Event::Data {
                    id,
                    data,
                    end_stream,
                }) => {
                    log.push(format!("data {id} {} {end_stream}", data.len()));
                    let n = data.len();
                    c.release(id, n);
                }
                Some(Event::Response {
                    id,
                    head,
                    end_stream,
                }) => log.push(format!("resp {id} {} {end_stream}", head.status)),
                Some(Event::WindowOpened { id }) => {
                    log.push(format!("window {id}"));
                    more = true;
                }
                Some(Event::Request { .. }) => panic!("a client gets no request"),
                Some(ev) => log.push(format!("{ev:?}")),
            }
            // The output is written after every step, so what the
            // client sends (bounded by `max_output`) does not depend on
            // the split into reads.
            let n = c.output().len();
            assert!(n < 4 << 20, "output {n}");
            c.consume_output(n);
            if more && sent < BODY.len() {
                match c.send_data(post, &BODY[sent..], true, now) {
                    Ok(n) => sent += n,
                    Err(SendError::NoStream) => sent = BODY.len(),
                    Err(e) => panic!("{e:?}"),
                }
            }
        }
        buf.drain(..off);
        let n = c.output().len();
        c.consume_output(n);
        let mut reset = Vec::new();
        c.tick(now, &mut reset);
    }
    // Opening another stream is refused or works, never panics.
    let _ = c.send_request(&fields(b"GET"), true);
    log
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut input = Vec::new();
    if sel & 1 == 0 {
        // The server's SETTINGS, so the fuzzer reaches the frames quickly.
        input.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    }
    input.extend_from_slice(rest);
    let whole = run(&input, input.len());
    let step = usize::from(sel >> 1) + 1;
    assert_eq!(run(&input, step), whole);
});
