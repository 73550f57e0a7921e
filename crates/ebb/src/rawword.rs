//! Configuration words that carry bytes which are not UTF-8 (`\xE0`):
//! the lexer makes them (`carry`), the sample engine reads them back
//! (`word_bytes`). Kept apart from `config` and `sample` so that neither
//! imports the other for it.

/// Bytes that are not UTF-8 (`\xE0`) travel in a word as the characters
/// U+10FF80..=U+10FFFF (byte B as U+10FF00 + B), which a configuration may
/// not contain itself; [`word_bytes`] gives the bytes back where the
/// sample engine reads a word (`str()` arguments, log-format text), and a
/// line whose such bytes end up anywhere else is refused.
const RAW_BASE: u32 = 0x10FF00;

pub(crate) fn is_raw(c: char) -> bool {
    (RAW_BASE + 0x80..=RAW_BASE + 0xFF).contains(&u32::from(c))
}

/// Whether a word carries bytes that are not UTF-8.
pub(crate) fn has_raw(s: &str) -> bool {
    s.chars().any(is_raw)
}

/// The bytes a word (or a piece of one) stands for.
pub(crate) fn word_bytes(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        // U+10FF80..=U+10FFBF are F4 8F BE 80..BF; U+10FFC0..=U+10FFFF
        // are F4 8F BF 80..BF.
        if let [0xF4, 0x8F, hi @ (0xBE | 0xBF), lo @ 0x80..=0xBF, ..] = s[i..] {
            out.push(if hi == 0xBE { lo } else { lo + 0x40 });
            i += 4;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// `bytes` as a word: valid UTF-8 as it is, other bytes carried.
pub(crate) fn carry(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            let mut s = String::new();
            for chunk in e.as_bytes().utf8_chunks() {
                s.push_str(chunk.valid());
                for &b in chunk.invalid() {
                    s.extend(char::from_u32(RAW_BASE + u32::from(b)));
                }
            }
            s
        }
    }
}
