//! The HPACK Huffman code (RFC 7541 §5.2 and Appendix B).
//!
//! The decoder walks the code's binary tree (built from [`CODES`] at
//! compile time) four bits of input at a time: a table gives, for each
//! inner node (the bits read since the last symbol) and the next four bits,
//! the node reached and the symbol completed on the way, if any. A step
//! is about a dozen instructions and no branch, whatever the codes'
//! lengths.
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

/// Why a Huffman string is refused (all map to COMPRESSION_ERROR).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// The EOS symbol inside the string.
    Eos,
    /// Padding longer than 7 bits or not all ones.
    BadPadding,
}

/// A child in [`Tree`]: a leaf (this bit set, the symbol below it) or an
/// inner node's number.
const LEAF: u16 = 0x8000;

/// The code's binary tree, built from [`CODES`] at compile time: its 256
/// inner nodes (0 the root), each one's two children, its depth, and
/// whether the path to it is all ones.
struct Tree {
    kids: [[u16; 2]; 256],
    depth: [u8; 256],
    ones: [bool; 256],
}

const fn build_tree() -> Tree {
    let mut t = Tree {
        kids: [[0; 2]; 256],
        depth: [0; 256],
        ones: [false; 256],
    };
    t.ones[0] = true;
    let mut next = 1u16;
    let mut s = 0;
    while s < 257 {
        let (code, len) = CODES[s];
        let mut node = 0usize;
        let mut i = len as u32 - 1;
        while i > 0 {
            let bit = ((code >> i) & 1) as usize;
            if t.kids[node][bit] == 0 {
                assert!(next < 256);
                t.kids[node][bit] = next;
                t.depth[next as usize] = t.depth[node] + 1;
                t.ones[next as usize] = t.ones[node] && bit == 1;
                next += 1;
            }
            let k = t.kids[node][bit];
            // A code is no prefix of another.
            assert!(k & LEAF == 0);
            node = k as usize;
            i -= 1;
        }
        let bit = (code & 1) as usize;
        assert!(t.kids[node][bit] == 0);
        t.kids[node][bit] = LEAF | s as u16;
        s += 1;
    }
    // The code is complete: every inner node has both children.
    assert!(next == 256);
    let mut n = 0;
    while n < 256 {
        assert!(t.kids[n][0] != 0 && t.kids[n][1] != 0);
        n += 1;
    }
    t
}

static TREE: Tree = build_tree();

/// An entry of [`STEP`]: EOS was completed (the string is refused at
/// its end).
const EOS: u32 = 2;

/// The decoder's steps, four bits of input at a time. An entry, by state
/// (the inner node reached by the bits since the last symbol) times 16
/// plus the next four bits, holds: in bit 0 whether a symbol was completed
/// on the way (at most one: no code is shorter than 5 bits), in bit 1
/// whether EOS was ([`EOS`]), in bits 8-15 the symbol, in bits 20-31 the
/// next state times 16 (the next lookup's base: shifted down, it indexes
/// the table with no bounds check).
const fn build_step() -> [u32; 256 * 16] {
    let mut t = [0u32; 256 * 16];
    let mut state = 0;
    while state < 256 {
        let mut nib = 0;
        while nib < 16 {
            let mut node = state;
            let mut e = 0u32;
            let mut k = 4;
            while k > 0 {
                k -= 1;
                let c = TREE.kids[node][(nib >> k) & 1];
                if c & LEAF == 0 {
                    node = c as usize;
                } else {
                    let sym = (c & !LEAF) as u32;
                    e |= if sym == 256 { EOS } else { 1 | sym << 8 };
                    node = 0;
                }
            }
            t[state * 16 + nib] = e | (node as u32 * 16) << 20;
            nib += 1;
        }
        state += 1;
    }
    t
}

static STEP: [u32; 256 * 16] = build_step();

/// Whether a string may end in each state: the bits since the last
/// symbol are padding, fewer than 8 and all ones (a prefix of EOS).
static END_OK: [bool; 256] = {
    let mut t = [false; 256];
    let mut n = 0;
    while n < 256 {
        t[n] = TREE.ones[n] && TREE.depth[n] < 8;
        n += 1;
    }
    t
};

/// Decodes `src`, appending the bytes to `out`.
///
/// Walks the code's tree four bits at a time through [`STEP`], a symbol
/// at most per step, the bytes gathered in a block on the stack and added
/// to `out` a block at a time; an EOS met on the way is noted and the
/// string refused at its end.
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let mut block = [0u8; 64];
    // The last entry (its bits 20-31: the state times 16), and every
    // entry's bits or-ed (for [`EOS`]).
    let mut f = 0u32;
    let mut seen = 0u32;
    // 31 bytes give at most 62 symbols: a block's worth.
    for chunk in src.chunks(31) {
        let mut n = 0;
        for &b in chunk {
            let e = STEP[(f >> 20) as usize | usize::from(b >> 4)];
            block[n & 63] = (e >> 8) as u8;
            n += (e & 1) as usize;
            f = STEP[(e >> 20) as usize | usize::from(b & 0xf)];
            block[n & 63] = (f >> 8) as u8;
            n += (f & 1) as usize;
            seen |= e | f;
        }
        out.extend_from_slice(&block[..n]);
    }
    if seen & EOS != 0 {
        Err(HuffmanError::Eos)
    } else if END_OK[(f >> 24) as usize] {
        Ok(())
    } else {
        Err(HuffmanError::BadPadding)
    }
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
