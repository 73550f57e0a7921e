//! The ClientHello sniffer never panics, and never says "complete" for a
//! prefix of bytes it later reads differently: a prefix is `Need` or the
//! same verdict as the whole input's.
#![no_main]

use ebb::tls::hello::{sniff, Sniff};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = sniff(data);
    if let Sniff::Hello(h) = &whole {
        if let Some(sni) = &h.sni {
            assert!(sni.bytes().all(|b| b.is_ascii_graphic()));
        }
    }
    // Every shorter prefix is still incomplete or already decided the same
    // way (bytes after a whole hello do not change it).
    for cut in [data.len() / 2, data.len().saturating_sub(1)] {
        let part = sniff(&data[..cut]);
        if part != Sniff::Need {
            assert_eq!(part, whole, "prefix of {cut} bytes");
        }
    }
});
