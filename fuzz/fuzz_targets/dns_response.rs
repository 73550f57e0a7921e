//! A datagram from the network never panics the DNS answer reader, and
//! what it accepts keeps the reader's promises: a valid answer has a
//! record, every address is of the family asked, SRV targets are
//! non-empty lowercase names.
#![no_main]

use ebb::dns::{decode_response, QType, Status};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for (name, qtype) in [
        ("a.example", QType::A),
        ("a.example", QType::Aaaa),
        ("_http._tcp.example", QType::Srv),
    ] {
        let id = u16::from_be_bytes([data.first().copied().unwrap_or(0), data.get(1).copied().unwrap_or(0)]);
        let Ok(r) = decode_response(data, id, name, qtype) else {
            continue;
        };
        if r.status == Status::Valid {
            assert!(!r.addrs.is_empty() || !r.srv.is_empty());
            assert!(!r.truncated);
        }
        for (ip, _) in &r.addrs {
            assert_eq!(ip.is_ipv6(), qtype == QType::Aaaa);
        }
        for s in &r.srv {
            assert!(!s.target.is_empty());
            assert_eq!(s.target, s.target.to_ascii_lowercase());
        }
    }
});
