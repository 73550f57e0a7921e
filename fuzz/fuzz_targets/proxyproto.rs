//! The PROXY protocol parser never panics; a header it accepts was taken
//! from the input's start, and re-encoding it parses back to the same header.
//! The NetScaler Client IP parser (its magic: the input's first 4 bytes)
//! never panics either; a header it accepts lies within the input, and
//! one encoded for its addresses parses back to them.
#![no_main]

use ebb::proxyproto::cip::{self, Cip};
use ebb::proxyproto::{encode_v1, encode_v2, parse, Parsed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let magic = data
        .get(..4)
        .map_or(0, |m| u32::from_be_bytes([m[0], m[1], m[2], m[3]]));
    if let Cip::Done { len, src, dst } = cip::parse(data, magic) {
        assert!(len <= data.len());
        for legacy in [true, false] {
            let again = cip::encode(magic, legacy, src, dst);
            let want = Cip::Done {
                len: again.len(),
                src,
                dst,
            };
            // An IPv4-mapped pair is encoded as IPv6: compare ports.
            match cip::parse(&again, magic) {
                Cip::Done { len, src: s, dst: d } if src.is_ipv4() == s.is_ipv4() => {
                    assert_eq!(Cip::Done { len, src: s, dst: d }, want)
                }
                Cip::Done { src: s, dst: d, .. } => {
                    assert_eq!((s.port(), d.port()), (src.port(), dst.port()))
                }
                other => panic!("re-encoded CIP header does not parse: {other:?}"),
            }
        }
    }
    match parse(data) {
        Parsed::Done(h, n) => {
            assert!(n > 0 && n <= data.len());
            // Any prefix shorter than the header is not Done.
            assert!(!matches!(parse(&data[..n - 1]), Parsed::Done(..)));
            let again = if h.version == 1 {
                encode_v1(&h)
            } else {
                encode_v2(&h, false).expect("a parsed header fits")
            };
            match parse(&again) {
                Parsed::Done(h2, n2) => {
                    assert_eq!(n2, again.len());
                    assert_eq!(h2.addrs, h.addrs);
                    assert_eq!(h2.command, h.command);
                }
                other => panic!("re-encoded header does not parse: {other:?}"),
            }
        }
        Parsed::Partial => assert!(data.len() < 16 + 65535),
        Parsed::Error(_) => {}
    }
});
