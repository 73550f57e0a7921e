//! Key types: the bit operations the tree needs, for `u32` and `u64`.

use std::fmt::Debug;

/// An unsigned integer key. The tree compares keys as plain unsigned numbers;
/// wrap-aware ordering (ticks) is the caller's business, helped by
/// [`crate::EbTree::lookup_ge_wrap`].
pub trait Key: Copy + Ord + Eq + Default + Debug {
    /// Width of the key in bits.
    const BITS: u32;
    /// Value (0 or 1) of bit `b`.
    fn bit(self, b: u32) -> usize;
    /// Whether `self` and `other` differ on some bit above bit `b`.
    fn differs_above(self, other: Self, b: u32) -> bool;
    /// Index of the highest bit on which `self` and `other` differ. They must
    /// differ.
    fn highest_diff_bit(self, other: Self) -> u32;
    /// Whether `self`'s bits from `b` up are greater than `other`'s.
    fn prefix_gt(self, other: Self, b: u32) -> bool;
}

macro_rules! impl_key {
    ($t:ty) => {
        impl Key for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline(always)]
            fn bit(self, b: u32) -> usize {
                ((self >> b) & 1) as usize
            }
            #[inline(always)]
            fn differs_above(self, other: Self, b: u32) -> bool {
                ((self ^ other) >> b) >= 2
            }
            #[inline(always)]
            fn highest_diff_bit(self, other: Self) -> u32 {
                debug_assert!(self != other);
                Self::BITS - 1 - (self ^ other).leading_zeros()
            }
            #[inline(always)]
            fn prefix_gt(self, other: Self, b: u32) -> bool {
                (self >> b) > (other >> b)
            }
        }
    };
}

impl_key!(u32);
impl_key!(u64);
