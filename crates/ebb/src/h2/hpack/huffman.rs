//! The HPACK Huffman code (RFC 7541 §5.2 and Appendix B).
//!
//! The code is canonical: within one length, codes rise with the symbol.
//! So the decoder needs no tree: per length it keeps the first code and
//! where that length's symbols start in a list sorted by (length, symbol),
//! both computed at compile time from [`CODES`]. Decoding reads the input
//! a 64-bit word at a time and looks its next 11 bits up in a table of the
//! one or two codes they start with (every character of paths, names and
//! values but rare punctuation has a code of up to 11 bits); it reads a
//! longer code by the canonical order.
//!
//! Padding (§5.2): at the end, fewer than 8 bits may remain and they must be
//! all ones (a prefix of EOS); a decoded EOS is an error.

/// (code, length in bits) for symbols 0..=255 and EOS (256), typed from
/// RFC 7541 Appendix B (code aligned to the least significant bit).
pub const CODES: [(u32, u8); 257] = [
    // 0..=31
    (0x1ff8, 13),
    (0x7fffd8, 23),
    (0xfffffe2, 28),
    (0xfffffe3, 28),
    (0xfffffe4, 28),
    (0xfffffe5, 28),
    (0xfffffe6, 28),
    (0xfffffe7, 28),
    (0xfffffe8, 28),
    (0xffffea, 24),
    (0x3ffffffc, 30),
    (0xfffffe9, 28),
    (0xfffffea, 28),
    (0x3ffffffd, 30),
    (0xfffffeb, 28),
    (0xfffffec, 28),
    (0xfffffed, 28),
    (0xfffffee, 28),
    (0xfffffef, 28),
    (0xffffff0, 28),
    (0xffffff1, 28),
    (0xffffff2, 28),
    (0x3ffffffe, 30),
    (0xffffff3, 28),
    (0xffffff4, 28),
    (0xffffff5, 28),
    (0xffffff6, 28),
    (0xffffff7, 28),
    (0xffffff8, 28),
    (0xffffff9, 28),
    (0xffffffa, 28),
    (0xffffffb, 28),
    // 32..=63: ' ' ! " # $ % & ' ( ) * + , - . / 0-9 : ; < = > ?
    (0x14, 6),
    (0x3f8, 10),
    (0x3f9, 10),
    (0xffa, 12),
    (0x1ff9, 13),
    (0x15, 6),
    (0xf8, 8),
    (0x7fa, 11),
    (0x3fa, 10),
    (0x3fb, 10),
    (0xf9, 8),
    (0x7fb, 11),
    (0xfa, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6),
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1a, 6),
    (0x1b, 6),
    (0x1c, 6),
    (0x1d, 6),
    (0x1e, 6),
    (0x1f, 6),
    (0x5c, 7),
    (0xfb, 8),
    (0x7ffc, 15),
    (0x20, 6),
    (0xffb, 12),
    (0x3fc, 10),
    // 64..=95: @ A-Z [ \ ] ^ _
    (0x1ffa, 13),
    (0x21, 6),
    (0x5d, 7),
    (0x5e, 7),
    (0x5f, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7),
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7),
    (0x69, 7),
    (0x6a, 7),
    (0x6b, 7),
    (0x6c, 7),
    (0x6d, 7),
    (0x6e, 7),
    (0x6f, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xfc, 8),
    (0x73, 7),
    (0xfd, 8),
    (0x1ffb, 13),
    (0x7fff0, 19),
    (0x1ffc, 13),
    (0x3ffc, 14),
    (0x22, 6),
    // 96..=127: ` a-z { | } ~ DEL
    (0x7ffd, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5),
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7),
    (0x28, 6),
    (0x29, 6),
    (0x2a, 6),
    (0x7, 5),
    (0x2b, 6),
    (0x76, 7),
    (0x2c, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2d, 6),
    (0x77, 7),
    (0x78, 7),
    (0x79, 7),
    (0x7a, 7),
    (0x7b, 7),
    (0x7ffe, 15),
    (0x7fc, 11),
    (0x3ffd, 14),
    (0x1ffd, 13),
    (0xffffffc, 28),
    // 128..=159
    (0xfffe6, 20),
    (0x3fffd2, 22),
    (0xfffe7, 20),
    (0xfffe8, 20),
    (0x3fffd3, 22),
    (0x3fffd4, 22),
    (0x3fffd5, 22),
    (0x7fffd9, 23),
    (0x3fffd6, 22),
    (0x7fffda, 23),
    (0x7fffdb, 23),
    (0x7fffdc, 23),
    (0x7fffdd, 23),
    (0x7fffde, 23),
    (0xffffeb, 24),
    (0x7fffdf, 23),
    (0xffffec, 24),
    (0xffffed, 24),
    (0x3fffd7, 22),
    (0x7fffe0, 23),
    (0xffffee, 24),
    (0x7fffe1, 23),
    (0x7fffe2, 23),
    (0x7fffe3, 23),
    (0x7fffe4, 23),
    (0x1fffdc, 21),
    (0x3fffd8, 22),
    (0x7fffe5, 23),
    (0x3fffd9, 22),
    (0x7fffe6, 23),
    (0x7fffe7, 23),
    (0xffffef, 24),
    // 160..=191
    (0x3fffda, 22),
    (0x1fffdd, 21),
    (0xfffe9, 20),
    (0x3fffdb, 22),
    (0x3fffdc, 22),
    (0x7fffe8, 23),
    (0x7fffe9, 23),
    (0x1fffde, 21),
    (0x7fffea, 23),
    (0x3fffdd, 22),
    (0x3fffde, 22),
    (0xfffff0, 24),
    (0x1fffdf, 21),
    (0x3fffdf, 22),
    (0x7fffeb, 23),
    (0x7fffec, 23),
    (0x1fffe0, 21),
    (0x1fffe1, 21),
    (0x3fffe0, 22),
    (0x1fffe2, 21),
    (0x7fffed, 23),
    (0x3fffe1, 22),
    (0x7fffee, 23),
    (0x7fffef, 23),
    (0xfffea, 20),
    (0x3fffe2, 22),
    (0x3fffe3, 22),
    (0x3fffe4, 22),
    (0x7ffff0, 23),
    (0x3fffe5, 22),
    (0x3fffe6, 22),
    (0x7ffff1, 23),
    // 192..=223
    (0x3ffffe0, 26),
    (0x3ffffe1, 26),
    (0xfffeb, 20),
    (0x7fff1, 19),
    (0x3fffe7, 22),
    (0x7ffff2, 23),
    (0x3fffe8, 22),
    (0x1ffffec, 25),
    (0x3ffffe2, 26),
    (0x3ffffe3, 26),
    (0x3ffffe4, 26),
    (0x7ffffde, 27),
    (0x7ffffdf, 27),
    (0x3ffffe5, 26),
    (0xfffff1, 24),
    (0x1ffffed, 25),
    (0x7fff2, 19),
    (0x1fffe3, 21),
    (0x3ffffe6, 26),
    (0x7ffffe0, 27),
    (0x7ffffe1, 27),
    (0x3ffffe7, 26),
    (0x7ffffe2, 27),
    (0xfffff2, 24),
    (0x1fffe4, 21),
    (0x1fffe5, 21),
    (0x3ffffe8, 26),
    (0x3ffffe9, 26),
    (0xffffffd, 28),
    (0x7ffffe3, 27),
    (0x7ffffe4, 27),
    (0x7ffffe5, 27),
    // 224..=255
    (0xfffec, 20),
    (0xfffff3, 24),
    (0xfffed, 20),
    (0x1fffe6, 21),
    (0x3fffe9, 22),
    (0x1fffe7, 21),
    (0x1fffe8, 21),
    (0x7ffff3, 23),
    (0x3fffea, 22),
    (0x3fffeb, 22),
    (0x1ffffee, 25),
    (0x1ffffef, 25),
    (0xfffff4, 24),
    (0xfffff5, 24),
    (0x3ffffea, 26),
    (0x7ffff4, 23),
    (0x3ffffeb, 26),
    (0x7ffffe6, 27),
    (0x3ffffec, 26),
    (0x3ffffed, 26),
    (0x7ffffe7, 27),
    (0x7ffffe8, 27),
    (0x7ffffe9, 27),
    (0x7ffffea, 27),
    (0x7ffffeb, 27),
    (0xffffffe, 28),
    (0x7ffffec, 27),
    (0x7ffffed, 27),
    (0x7ffffee, 27),
    (0x7ffffef, 27),
    (0x7fffff0, 27),
    (0x3ffffee, 26),
    // EOS
    (0x3fffffff, 30),
];

const MAX_LEN: usize = 30;

/// Decoding tables derived from [`CODES`] at compile time.
struct Canon {
    /// Number of codes of each length.
    count: [u16; MAX_LEN + 1],
    /// The first (smallest) code of each length.
    first: [u32; MAX_LEN + 1],
    /// Index in `syms` of each length's first symbol.
    start: [u16; MAX_LEN + 1],
    /// Symbols sorted by (length, symbol).
    syms: [u16; 257],
}

const fn build() -> Canon {
    let mut count = [0u16; MAX_LEN + 1];
    let mut i = 0;
    while i < 257 {
        count[CODES[i].1 as usize] += 1;
        i += 1;
    }
    let mut start = [0u16; MAX_LEN + 1];
    let mut first = [0u32; MAX_LEN + 1];
    let mut code = 0u32;
    let mut idx = 0u16;
    let mut len = 1;
    while len <= MAX_LEN {
        code <<= 1;
        first[len] = code;
        start[len] = idx;
        code += count[len] as u32;
        idx += count[len];
        len += 1;
    }
    let mut syms = [0u16; 257];
    let mut fill = start;
    let mut s = 0;
    while s < 257 {
        let l = CODES[s].1 as usize;
        // Canonical: the code must be the next one of its length.
        assert!(CODES[s].0 == first[l] + (fill[l] - start[l]) as u32);
        syms[fill[l] as usize] = s as u16;
        fill[l] += 1;
        s += 1;
    }
    Canon {
        count,
        first,
        start,
        syms,
    }
}

static CANON: Canon = build();

/// Why a Huffman string is refused (all map to COMPRESSION_ERROR).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// The EOS symbol inside the string.
    Eos,
    /// Padding longer than 7 bits or not all ones.
    BadPadding,
}

/// How many bits of input one lookup in [`PAIRS`] reads.
const PEEK: u32 = 11;

/// By the next [`PEEK`] bits of input, the codes they start with: the
/// first symbol (bits 0-7), the second (8-15), the length of the first
/// code (16-23, 0 when those bits start a code longer than [`PEEK`]), and
/// that of both codes (24-31; the first's alone when no second code fits
/// in the bits). The characters of paths, names and values have codes of
/// 5 to 8 bits, most of 5 or 6: a lookup decodes one or two of them.
const fn build_pairs() -> [u32; 1 << PEEK] {
    // The symbol and length of the code at the top of `bits` (`n` bits
    // long), if one of up to `n` bits is there.
    const fn code_at(bits: u32, n: u32) -> Option<(u32, u32)> {
        let mut s = 0;
        while s < 256 {
            let (code, len) = CODES[s];
            let len = len as u32;
            if len <= n && bits >> (n - len) == code {
                return Some((s as u32, len));
            }
            s += 1;
        }
        None
    }
    let mut t = [0u32; 1 << PEEK];
    let mut i = 0;
    while i < (1 << PEEK) {
        if let Some((s1, l1)) = code_at(i as u32, PEEK) {
            let rest = PEEK - l1;
            let low = i as u32 & ((1 << rest) - 1);
            let (s2, l12) = match code_at(low, rest) {
                Some((s2, l2)) => (s2, l1 + l2),
                None => (0, l1),
            };
            t[i] = s1 | (s2 << 8) | (l1 << 16) | (l12 << 24);
        }
        i += 1;
    }
    t
}

static PAIRS: [u32; 1 << PEEK] = build_pairs();

/// The input's bits from bit `pos` on, left-aligned in a word: at least
/// 57 of them (or all there are); the bits past the end of `src` mean
/// nothing (a code that reaches them is the end of the string).
#[inline]
fn window(src: &[u8], pos: usize) -> u64 {
    let at = pos / 8;
    let n = src.len();
    let (word, skip) = if let Some(b) = src.get(at..at + 8) {
        (
            u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            pos % 8,
        )
    } else if at >= n {
        return 0;
    } else if let Some(b) = src.get(n.wrapping_sub(8)..) {
        // The last 8 bytes, those before `at` shifted out.
        let w = u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        (w, (at + 8 - n) * 8 + pos % 8)
    } else {
        // Fewer than 8 bytes in all (no copy: a call for a few bytes).
        let w = src.iter().fold(0u64, |w, &b| (w << 8) | u64::from(b));
        (w << ((8 - n) * 8), pos)
    };
    // (`skip` < 64: `at` < `n`.)
    word << skip
}

/// The symbol and code length of a code longer than [`PEEK`] bits at the
/// top of `x` (the canonical order: the first length whose range holds
/// the bits; 30 bits always hold one, EOS being all ones).
#[cold]
fn long_code(x: u64) -> (u16, u32) {
    let c = &CANON;
    let mut l = PEEK + 1;
    while l as usize <= MAX_LEN {
        let code = (x >> (64 - l)) as u32;
        let off = code.wrapping_sub(c.first[l as usize]);
        if off < u32::from(c.count[l as usize]) {
            return (c.syms[usize::from(c.start[l as usize]) + off as usize], l);
        }
        l += 1;
    }
    (256, MAX_LEN as u32)
}

/// The end of a string whose last `rest` bits (at the top of `x`) are
/// not a whole code: fewer than 8, all ones, are padding.
fn end(rest: u32, x: u64) -> Result<(), HuffmanError> {
    let ones = rest == 0 || x >> (64 - rest) == (1u64 << rest) - 1;
    if rest < 8 && ones {
        Ok(())
    } else {
        Err(HuffmanError::BadPadding)
    }
}

/// Decodes `src`, appending the bytes to `out`.
///
/// Reads a word of input at a time ([`window`]) and decodes the codes it
/// holds, one or two a lookup ([`PAIRS`]) while they are short; a code
/// that would run past the input's end is the end of the string. The
/// bytes gather in a block on the stack, added to `out` a block at a time.
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let total = src.len() * 8;
    let mut block = [0u8; 64];
    let mut n = 0;
    let mut pos = 0;
    let r = 'all: loop {
        let w = window(src, pos);
        let mut used = 0u32;
        // Short codes are read while [`PEEK`] bits lie within the
        // window's 57 sure bits, a long one while 30 bits do.
        loop {
            if n > block.len() - 2 {
                out.extend_from_slice(&block[..n]);
                n = 0;
            }
            let x = w << used;
            let e = PAIRS[(x >> (64 - PEEK)) as usize];
            let at = pos + used as usize;
            let (l1, l12) = ((e >> 16) & 0xff, e >> 24);
            if l1 != 0 && at + l12 as usize <= total {
                // One or two whole codes.
                block[n] = e as u8;
                block[n + 1] = (e >> 8) as u8;
                n += 1 + usize::from(l12 != l1);
                used += l12;
            } else {
                let (sym, len) = if l1 != 0 {
                    ((e & 0xff) as u16, l1)
                } else if used > 27 {
                    break;
                } else {
                    let rest = (total - at) as u32;
                    if rest <= PEEK {
                        // No code of more than PEEK bits fits.
                        break 'all end(rest, x);
                    }
                    long_code(x)
                };
                if at + len as usize > total {
                    // A code past the end needs bits there: what is left
                    // is not a whole code.
                    break 'all end((total - at) as u32, x);
                }
                if sym == 256 {
                    break 'all Err(HuffmanError::Eos);
                }
                block[n] = sym as u8;
                n += 1;
                used += len;
            }
            if used > 57 - PEEK {
                break;
            }
        }
        pos += used as usize;
    };
    out.extend_from_slice(&block[..n]);
    r
}

/// The encoded length of `src` in bytes.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src
        .iter()
        .map(|&b| usize::from(CODES[usize::from(b)].1))
        .sum();
    bits.div_ceil(8)
}

/// Encodes `src` appending to `out`, padded with ones.
pub fn encode(src: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut nbits = 0u32;
    for &b in src {
        let (code, len) = CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        nbits += u32::from(len);
        while nbits >= 8 {
            nbits -= 8;
            out.push((acc >> nbits) as u8);
        }
        acc &= (1u64 << nbits) - 1;
    }
    if nbits > 0 {
        let pad = 8 - nbits;
        out.push(((acc << pad) | ((1u64 << pad) - 1)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_symbol_round_trips() {
        let all: Vec<u8> = (0..=255u8).collect();
        let mut enc = Vec::new();
        encode(&all, &mut enc);
        assert_eq!(enc.len(), encoded_len(&all));
        let mut dec = Vec::new();
        decode(&enc, &mut dec).unwrap();
        assert_eq!(dec, all);
    }

    /// RFC 7541 §5.2 read bit by bit, the code looked up in [`CODES`]
    /// (`codes`: by code and length) as each bit comes: the decoder must
    /// agree with it on every input.
    fn reference(
        codes: &std::collections::HashMap<(u32, u8), usize>,
        src: &[u8],
    ) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        let (mut code, mut len) = (0u32, 0u8);
        for i in 0..src.len() * 8 {
            let bit = (src[i / 8] >> (7 - i % 8)) & 1;
            code = (code << 1) | u32::from(bit);
            len += 1;
            if let Some(&sym) = codes.get(&(code, len)) {
                if sym == 256 {
                    return Err(HuffmanError::Eos);
                }
                out.push(sym as u8);
                (code, len) = (0, 0);
            }
        }
        if len > 7 || code != (1 << len) - 1 {
            return Err(HuffmanError::BadPadding);
        }
        Ok(out)
    }

    #[test]
    fn every_input_of_up_to_two_bytes_and_longer_mixes_match_the_bitwise_reading() {
        let mut inputs: Vec<Vec<u8>> = (0..=255u8).map(|a| vec![a]).collect();
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                inputs.push(vec![a, b]);
            }
        }
        // Longer strings: encodings of mixed text (long codes included),
        // cut and with bytes flipped.
        let mut x = 0x2545_f491_u32;
        for n in 1..400usize {
            let text: Vec<u8> = (0..n % 37 + usize::from(n % 7 == 0) * 150)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    if x % 4 == 0 {
                        x as u8
                    } else {
                        b"/index.html?q=ab-c_d&x=%20"[x as usize % 26]
                    }
                })
                .collect();
            let mut enc = Vec::new();
            encode(&text, &mut enc);
            inputs.push(enc.clone());
            if !enc.is_empty() {
                let at = x as usize % enc.len();
                enc[at] ^= 1 << (n % 8);
                inputs.push(enc.clone());
                enc.truncate(at);
                inputs.push(enc);
            }
        }
        let codes = CODES.iter().enumerate().map(|(s, &c)| (c, s)).collect();
        for i in inputs {
            let mut got = Vec::new();
            let r = decode(&i, &mut got).map(|()| got);
            assert_eq!(r, reference(&codes, &i), "{i:02x?}");
        }
    }

    #[test]
    fn rfc_7541_c4_www_example_com() {
        let enc = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        let mut dec = Vec::new();
        decode(&enc, &mut dec).unwrap();
        assert_eq!(dec, b"www.example.com");
        let mut back = Vec::new();
        encode(b"www.example.com", &mut back);
        assert_eq!(back, enc);
    }

    #[test]
    fn padding_rules() {
        // 'a' = 00011 then 3 one bits: valid.
        let mut out = Vec::new();
        assert_eq!(decode(&[0b0001_1111], &mut out), Ok(()));
        assert_eq!(out, b"a");
        // Padding with a zero bit.
        assert_eq!(
            decode(&[0b0001_1110], &mut Vec::new()),
            Err(HuffmanError::BadPadding)
        );
        // 8 or more bits of padding (a whole 0xff byte after 'a').
        assert_eq!(
            decode(&[0b0001_1111, 0xff], &mut Vec::new()),
            Err(HuffmanError::BadPadding)
        );
        // EOS itself (30 ones) inside the string.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut Vec::new()),
            Err(HuffmanError::Eos)
        );
    }
}
