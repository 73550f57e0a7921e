//! Byte classes tested eight bytes at a time: a `u64` read little-endian
//! from eight bytes of a head (`u64::from_le_bytes` on `first_chunk`),
//! and masks with the top bit of each byte that is in the class.
//!
//! The tests work on each byte's low seven bits ([`low7`]), where no
//! sum carries into the next byte: for `v` below 0x80, `v + 0x80 - lo`
//! has its top bit set exactly when `v >= lo`. A byte from 0x80 up is
//! in none of the classes here ([`ascii`] clears it).

/// 0x01 in every byte.
pub(super) const ONES: u64 = 0x0101_0101_0101_0101;
/// 0x80 in every byte.
pub(super) const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The word's bytes with their top bits cleared.
#[inline(always)]
pub(super) const fn low7(w: u64) -> u64 {
    w & (ONES * 0x7f)
}

/// `mask` less the bytes of `w` from 0x80 up.
#[inline(always)]
pub(super) const fn ascii(mask: u64, w: u64) -> u64 {
    mask & !w & HIGHS
}

/// The bytes of `v` (a [`low7`] word) in `lo..=hi`; `lo` at least 1.
#[inline(always)]
pub(super) const fn in_range(v: u64, lo: u8, hi: u8) -> u64 {
    let ge = v + ONES * (0x80 - lo as u64);
    let gt = v + ONES * (0x7f - hi as u64);
    ge & !gt & HIGHS
}

/// The bytes of `v` (a [`low7`] word) equal to `c` (below 0x80).
#[inline(always)]
pub(super) const fn equal(v: u64, c: u8) -> u64 {
    // A byte of `v ^ c` is zero exactly where `c` was; adding 0x7f sets
    // the top bit of every other byte.
    !((v ^ (ONES * c as u64)) + ONES * 0x7f) & HIGHS
}

/// The letters of `v` (a [`low7`] word), either case: `| 0x20` folds
/// `A`..`Z` onto `a`..`z` and nothing else onto them.
#[inline(always)]
pub(super) const fn letters(v: u64) -> u64 {
    in_range(v | (ONES * 0x20), b'a', b'z')
}

/// The digits of `v` (a [`low7`] word).
#[inline(always)]
pub(super) const fn digits(v: u64) -> u64 {
    in_range(v, b'0', b'9')
}

/// The index of the byte a mask's lowest mark is in.
#[inline(always)]
pub(super) const fn first(mask: u64) -> usize {
    (mask.trailing_zeros() / 8) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every class against its byte-at-a-time definition, each byte value
    /// at every place of a word whose other bytes take every value too
    /// (so a carry or borrow across bytes would show).
    #[test]
    fn classes_agree_with_bytes() {
        type Class = (fn(u64) -> u64, fn(u8) -> bool);
        let classes: [Class; 6] = [
            (|w| ascii(letters(low7(w)), w), |b| b.is_ascii_alphabetic()),
            (|w| ascii(digits(low7(w)), w), |b| b.is_ascii_digit()),
            (|w| ascii(equal(low7(w), b'-'), w), |b| b == b'-'),
            (|w| ascii(equal(low7(w), b':'), w), |b| b == b':'),
            (
                |w| ascii(in_range(low7(w), 1, 0x7f), w),
                |b| (1..0x80).contains(&b),
            ),
            (
                |w| ascii(in_range(low7(w), b'!', b'~'), w),
                |b| (b'!'..=b'~').contains(&b),
            ),
        ];
        for (word_class, byte_class) in classes {
            for b in 0..=255u8 {
                for other in 0..=255u8 {
                    for place in [0, 3, 7] {
                        let mut bytes = [other; 8];
                        bytes[place] = b;
                        let m = word_class(u64::from_le_bytes(bytes));
                        for (i, &x) in bytes.iter().enumerate() {
                            let marked = m >> (8 * i + 7) & 1 == 1;
                            assert_eq!(marked, byte_class(x), "{x:#x} in {bytes:x?}");
                            assert_eq!(m >> (8 * i) & 0x7f, 0);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn first_marks() {
        assert_eq!(first(0x80), 0);
        assert_eq!(first(HIGHS), 0);
        assert_eq!(first(0x8000_0080_0000_0000), 4);
    }
}
