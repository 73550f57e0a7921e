//! The HTTP/2 server connection fed arbitrary bytes (after a valid preface
//! half the time) never panics, always makes progress or asks for more,
//! gives the same events whatever the split into reads, keeps its output
//! bounded, and answers every request it reports.
#![no_main]

use ebb::h2::frame::PREFACE;
use ebb::h2::{Config, Connection, Event};
use libfuzzer_sys::fuzz_target;

/// Runs `input` in reads of `step` bytes; returns a digest of the events.
fn run(input: &[u8], step: usize) -> Vec<String> {
    let mut c = Connection::new(Config::default());
    let mut log = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    // A fixed clock: the events must not depend on the split, and the
    // token bucket and stall timer depend on time.
    let now = 1u32;
    for chunk in input.chunks(step.max(1)) {
        buf.extend_from_slice(chunk);
        let mut off = 0;
        loop {
            let p = c.recv(&buf[off..], now);
            assert!(p.consumed <= buf.len() - off);
            off += p.consumed;
            let mut answer = None;
            match p.event {
                None if p.consumed == 0 => break,
                None => {}
                Some(Event::Request { id, end_stream, .. }) => {
                    log.push(format!("req {id} {end_stream}"));
                    answer = Some(id);
                }
                Some(Event::Data { id, data, end_stream }) => {
                    log.push(format!("data {id} {} {end_stream}", data.len()));
                    let n = data.len();
                    c.release(id, n);
                }
                Some(ev) => log.push(format!("{ev:?}")),
            }
            if let Some(id) = answer {
                c.send_response(id, 200, &[(b"content-type", b"text/plain")], false)
                    .expect("a reported stream can be answered");
                let _ = c.send_data(id, b"ok", true, now);
            }
        }
        buf.drain(..off);
        let n = c.output().len();
        assert!(n < 4 << 20, "output {n}");
        c.consume_output(n);
        let mut reset = Vec::new();
        c.tick(now, &mut reset);
    }
    log
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut input = Vec::new();
    if sel & 1 == 0 {
        input.extend_from_slice(PREFACE);
        // An empty SETTINGS so the fuzzer reaches the frames quickly.
        input.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    }
    input.extend_from_slice(rest);
    let whole = run(&input, input.len());
    let step = usize::from(sel >> 1) + 1;
    assert_eq!(run(&input, step), whole);
});
