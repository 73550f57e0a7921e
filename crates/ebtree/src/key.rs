//! Key types: the bit operations the tree needs.
//!
//! Bits are numbered from the least significant (bit 0) up to `BITS - 1`, the
//! most significant, which is the first one a descent tests. Three families:
//!
//! - `u32`, `u64`: plain unsigned numbers (the scheduler's ticks and keys).
//! - [`MbKey<N>`]: fixed-length byte keys compared as big-endian numbers,
//!   i.e. lexicographically, as HAProxy's `ebmb` trees do (IPv4 `MbKey<4>`,
//!   IPv6 `MbKey<16>`, binary keys of a fixed length). `Copy`, stored inline.
//! - [`BytesKey`]: byte strings of any length, NULs included, ordered as
//!   `[u8]` orders them (a prefix sorts first), as HAProxy's `ebst` string
//!   trees do for NUL-terminated strings. See its doc for the bit layout.

use std::fmt::Debug;

/// A key the tree can split on bit by bit. The order of `Ord` must be the
/// order of the bit strings, most significant bit first.
pub trait Key: Clone + Ord + Eq + Default + Debug {
    /// Width of the key in bits (for variable-length keys: a bound larger
    /// than any key's bit length).
    const BITS: u32;
    /// Value (0 or 1) of bit `b`.
    fn bit(&self, b: u32) -> usize;
    /// Whether `self` and `other` differ on some bit above bit `b`.
    fn differs_above(&self, other: &Self, b: u32) -> bool;
    /// Index of the highest bit on which `self` and `other` differ. They must
    /// differ.
    fn highest_diff_bit(&self, other: &Self) -> u32;
    /// Whether `self`'s bits from `b` up are greater than `other`'s.
    fn prefix_gt(&self, other: &Self, b: u32) -> bool;
}

macro_rules! impl_key {
    ($t:ty) => {
        impl Key for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline(always)]
            fn bit(&self, b: u32) -> usize {
                ((*self >> b) & 1) as usize
            }
            #[inline(always)]
            fn differs_above(&self, other: &Self, b: u32) -> bool {
                ((*self ^ *other) >> b) >= 2
            }
            #[inline(always)]
            fn highest_diff_bit(&self, other: &Self) -> u32 {
                debug_assert!(self != other);
                Self::BITS - 1 - (*self ^ *other).leading_zeros()
            }
            #[inline(always)]
            fn prefix_gt(&self, other: &Self, b: u32) -> bool {
                (*self >> b) > (*other >> b)
            }
        }
    };
}

impl_key!(u32);
impl_key!(u64);

/// A fixed-length byte key of `N` bytes (HAProxy's `ebmb` key): byte 0 is
/// the most significant, so the tree's order is the lexicographic order of
/// the bytes, which for addresses in network order is the numeric order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MbKey<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for MbKey<N> {
    fn default() -> Self {
        MbKey([0; N])
    }
}

impl<const N: usize> Debug for MbKey<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl<const N: usize> From<[u8; N]> for MbKey<N> {
    fn from(a: [u8; N]) -> Self {
        MbKey(a)
    }
}

impl<const N: usize> MbKey<N> {
    /// Highest differing bit (bit numbering of [`Key`]), if any.
    #[inline(always)]
    fn diff(&self, other: &Self) -> Option<u32> {
        for j in 0..N {
            let x = self.0[j] ^ other.0[j];
            if x != 0 {
                return Some(8 * (N - 1 - j) as u32 + 7 - x.leading_zeros());
            }
        }
        None
    }

    /// The key with every bit below its first `len` bits cleared (a network
    /// prefix of `len` bits).
    pub fn masked(&self, len: u32) -> Self {
        let mut k = *self;
        for (j, b) in k.0.iter_mut().enumerate() {
            let first = 8 * j as u32;
            if len <= first {
                *b = 0;
            } else if len < first + 8 {
                *b &= 0xffu8 << (8 - (len - first));
            }
        }
        k
    }
}

impl<const N: usize> Key for MbKey<N> {
    const BITS: u32 = 8 * N as u32;
    #[inline(always)]
    fn bit(&self, b: u32) -> usize {
        let j = N - 1 - (b / 8) as usize;
        ((self.0[j] >> (b % 8)) & 1) as usize
    }
    #[inline(always)]
    fn differs_above(&self, other: &Self, b: u32) -> bool {
        matches!(self.diff(other), Some(h) if h > b)
    }
    #[inline(always)]
    fn highest_diff_bit(&self, other: &Self) -> u32 {
        let d = self.diff(other);
        debug_assert!(d.is_some());
        d.unwrap_or(0)
    }
    #[inline(always)]
    fn prefix_gt(&self, other: &Self, b: u32) -> bool {
        match self.diff(other) {
            Some(h) if h >= b => self.bit(h) == 1,
            _ => false,
        }
    }
}

/// A byte string of any length (HAProxy's `ebst`/`ebmb` string keys, but NULs
/// allowed), ordered as `[u8]` is: byte by byte, a proper prefix first.
///
/// A radix tree needs distinct keys to differ on some bit, which zero-padding
/// would break (`"a"` and `"a\0"`). So the tree sees each byte as 9 bits: a
/// *present* marker `1` followed by the byte's 8 bits, most significant
/// first; after the last byte comes a marker `0` and zeros forever:
///
/// ```text
///   "a"    1 01100001 0 00000000 0 ...
///   "a\0"  1 01100001 1 00000000 0 ...   differs at the second marker
///   "ab"   1 01100001 1 01100010 0 ...
/// ```
///
/// This encoding is injective and keeps the byte order, and for NUL-free
/// strings it splits where HAProxy's NUL-terminated strings split.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BytesKey(pub Box<[u8]>);

impl Debug for BytesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

impl From<&[u8]> for BytesKey {
    fn from(b: &[u8]) -> Self {
        BytesKey(b.into())
    }
}

impl From<&str> for BytesKey {
    fn from(s: &str) -> Self {
        BytesKey(s.as_bytes().into())
    }
}

impl BytesKey {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Position (from the start, 9 per byte) of the first differing bit.
    #[inline(always)]
    fn diff_pos(&self, other: &Self) -> Option<u64> {
        let (a, b) = (&self.0, &other.0);
        let n = a.len().min(b.len());
        for j in 0..n {
            let x = a[j] ^ b[j];
            if x != 0 {
                return Some(9 * j as u64 + 1 + x.leading_zeros() as u64);
            }
        }
        (a.len() != b.len()).then_some(9 * n as u64)
    }

    /// Bit at position `p` from the start.
    #[inline(always)]
    fn bit_at(&self, p: u64) -> usize {
        let j = (p / 9) as usize;
        let r = (p % 9) as u32;
        match self.0.get(j) {
            None => 0,
            Some(_) if r == 0 => 1,
            Some(b) => ((b >> (8 - r)) & 1) as usize,
        }
    }

    #[inline(always)]
    fn pos(b: u32) -> u64 {
        (Self::BITS - 1 - b) as u64
    }
}

impl Key for BytesKey {
    /// Keys of up to (2^31 - 1) / 9 bytes (about 238 MB).
    const BITS: u32 = i32::MAX as u32;
    #[inline(always)]
    fn bit(&self, b: u32) -> usize {
        self.bit_at(Self::pos(b))
    }
    #[inline(always)]
    fn differs_above(&self, other: &Self, b: u32) -> bool {
        matches!(self.diff_pos(other), Some(p) if p < Self::pos(b))
    }
    #[inline(always)]
    fn highest_diff_bit(&self, other: &Self) -> u32 {
        let p = self.diff_pos(other);
        debug_assert!(p.is_some());
        (Self::BITS as u64 - 1).saturating_sub(p.unwrap_or(0)) as u32
    }
    #[inline(always)]
    fn prefix_gt(&self, other: &Self, b: u32) -> bool {
        match self.diff_pos(other) {
            Some(p) if p <= Self::pos(b) => self.bit_at(p) == 1,
            _ => false,
        }
    }
}
