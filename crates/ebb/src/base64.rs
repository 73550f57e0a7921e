//! Standard base64 decoding, lenient as the stats page's `Authorization:
//! Basic` and the CLI's OCSP payloads need it (what follows a `=` is
//! ignored); a module of its own that imports nothing, so the TLS side and
//! the services both use it without importing each other.

/// Decodes standard base64 (`A-Z a-z 0-9 + /`), up to the first `=`;
/// `None` on any other byte.
pub fn decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}
