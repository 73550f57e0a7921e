//! ebb's own level-1 deflate encoder (`compress::fast`): whatever the
//! bytes, however they are cut into calls and wherever the stream is
//! flushed, flate2's decoder (zlib-rs) gives the bytes back, for each
//! wrapper; and a flushed prefix decodes on its own.
#![no_main]

use std::io::Read;

use ebb::compress::fast::{FastDeflate, Wrap};
use libfuzzer_sys::fuzz_target;

fn decode(wrap: Wrap, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let r = match wrap {
        Wrap::Raw => flate2::read::DeflateDecoder::new(data).read_to_end(&mut out),
        Wrap::Zlib => flate2::read::ZlibDecoder::new(data).read_to_end(&mut out),
        Wrap::Gzip => flate2::read::GzDecoder::new(data).read_to_end(&mut out),
    };
    assert!(r.is_ok(), "{wrap:?}: {r:?}");
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    let wrap = [Wrap::Raw, Wrap::Zlib, Wrap::Gzip][usize::from(sel % 3)];
    let mut e = FastDeflate::new(wrap);
    let mut out = Vec::new();
    let mut rest = input;
    let mut k = usize::from(sel);
    let mut flushed = (0, 0); // (input bytes, output bytes) at the last flush
    let mut given = 0;
    while !rest.is_empty() {
        let n = (k % 4099 + 1).min(rest.len());
        e.compress(&rest[..n], &mut out);
        given += n;
        rest = &rest[n..];
        k = k.wrapping_mul(31).wrapping_add(7);
        if k % 5 == 0 {
            e.flush(&mut out);
            flushed = (given, out.len());
        }
    }
    // Everything before the last flush decodes from the bytes out by then.
    if flushed.1 > 0 {
        let mut d = match wrap {
            Wrap::Gzip => flate2::Decompress::new_gzip(15),
            w => flate2::Decompress::new(w == Wrap::Zlib),
        };
        let mut plain = Vec::with_capacity(flushed.0 + 1);
        let r = d.decompress_vec(&out[..flushed.1], &mut plain, flate2::FlushDecompress::Sync);
        assert!(r.is_ok(), "{wrap:?}: {r:?}");
        assert_eq!(&plain[..], &input[..flushed.0]);
    }
    e.finish(&mut out);
    assert_eq!(decode(wrap, &out), input);
});
