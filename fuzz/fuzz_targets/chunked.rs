//! The chunked decoder never panics, gives the same answer whatever the
//! input's split into reads, and decodes the encoder's output back.
#![no_main]

use ebb::http1::{ChunkedDecoder, ChunkedEncoder, HttpError};
use libfuzzer_sys::fuzz_target;

/// Decodes `input` fed in pieces of `step` bytes: (data, consumed, done, error).
fn run(input: &[u8], step: usize) -> (Vec<u8>, usize, bool, Option<HttpError>) {
    let mut d = ChunkedDecoder::default();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < input.len() {
        let end = (pos + step).min(input.len());
        let mut p = pos;
        while p < end {
            match d.decode(&input[p..end]) {
                Ok(r) => {
                    assert!(r.consumed <= end - p);
                    assert!(r.data.start <= r.data.end && r.data.end <= r.consumed);
                    out.extend_from_slice(&input[p + r.data.start..p + r.data.end]);
                    p += r.consumed;
                    if r.done {
                        assert!(d.is_done());
                        return (out, p, true, None);
                    }
                    assert!(r.consumed > 0, "no progress on non-empty input");
                }
                Err(e) => {
                    assert_eq!(e.status(), 400);
                    return (out, p, false, Some(e));
                }
            }
        }
        pos = end;
    }
    (out, pos, false, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    // 1. Any split gives the same data, end and error as one big read.
    let whole = run(input, usize::MAX);
    let split = run(input, usize::from(sel % 13) + 1);
    assert_eq!(whole.0, split.0);
    assert_eq!(whole.2, split.2);
    assert_eq!(whole.3, split.3);
    if whole.2 {
        assert_eq!(whole.1, split.1);
    }

    // 2. Round trip: cut the input into pieces, encode, decode.
    let mut pieces = Vec::new();
    let mut rest = input;
    let mut k = usize::from(sel);
    while !rest.is_empty() {
        let n = (k % 97 + 1).min(rest.len());
        pieces.push(&rest[..n]);
        rest = &rest[n..];
        k = k.wrapping_mul(31).wrapping_add(7);
    }
    let mut enc = ChunkedEncoder::new();
    let mut wire = Vec::new();
    for p in &pieces {
        enc.write(&mut wire, p);
    }
    enc.finish(&mut wire);
    let (out, used, done, err) = run(&wire, usize::from(sel % 7) + 1);
    assert_eq!(err, None);
    assert!(done);
    assert_eq!(used, wire.len());
    assert_eq!(out, input);
});
