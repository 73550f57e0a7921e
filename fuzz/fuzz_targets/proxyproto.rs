//! The PROXY protocol parser never panics; a header it accepts was taken
//! from the input's start, and re-encoding it parses back to the same header.
#![no_main]

use ebb::proxyproto::{encode_v1, encode_v2, parse, Parsed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
