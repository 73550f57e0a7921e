//! The hash functions of HAProxy's converters (and its `balance` hashing),
//! written from their published definitions; the tests check each one
//! against values printed by HAProxy 2.6 itself.

/// sdbm: `h = c + (h << 6) + (h << 16) - h`.
pub fn sdbm(b: &[u8]) -> u32 {
    b.iter().fold(0u32, |h, &c| {
        (c as u32)
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    })
}

/// djb2: `h = h * 33 + c`, from 5381.
pub fn djb2(b: &[u8]) -> u32 {
    b.iter().fold(5381u32, |h, &c| {
        (h << 5).wrapping_add(h).wrapping_add(c as u32)
    })
}

/// HAProxy's wt6 (Willy Tarreau's 6-round hash).
pub fn wt6(b: &[u8]) -> u32 {
    let (mut h0, mut h1) = (0xa53c_965au32, 0x5ca6_953au32);
    let (mut step0, mut step1) = (6u32, 18u32);
    for &c in b {
        let t = c as u32;
        h0 = !(h0 ^ t);
        h1 = !(h1.wrapping_add(t));
        let t = h1.rotate_left(step0);
        h1 = h0.rotate_left(step1);
        h0 = t;
        let t = ((h0 >> 16) ^ h1) & 0xffff;
        step0 = t & 0x1f;
        step1 = t >> 11;
    }
    h0 ^ h1
}

/// A reflected CRC-32 with polynomial `poly` (initial value and final
/// XOR all ones) over `bytes`.
pub fn crc32_reflected(poly: u32, bytes: impl IntoIterator<Item = u8>) -> u32 {
    let mut c = !0u32;
    for x in bytes {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ poly } else { c >> 1 };
        }
    }
    !c
}

/// The CRC-32C polynomial (Castagnoli, reflected; RFC 4960 appendix B).
pub const CASTAGNOLI: u32 = 0x82f6_3b78;

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320).
pub fn crc32(b: &[u8]) -> u32 {
    crc32_reflected(0xedb8_8320, b.iter().copied())
}

/// CRC-32C, as HAProxy's `hash_crc32c`.
pub fn crc32c(b: &[u8]) -> u32 {
    crc32_reflected(CASTAGNOLI, b.iter().copied())
}

/// Bob Jenkins' 32-bit full-avalanche integer hash (HAProxy's
/// `full_hash`), applied by the hash converters' `avalanche` argument.
pub fn full_hash(mut a: u32) -> u32 {
    a = a.wrapping_add(0x7ed5_5d16).wrapping_add(a << 12);
    a = (a ^ 0xc761_c23c) ^ (a >> 19);
    a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
    a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a_4f09) ^ (a >> 16);
    // HAProxy then spreads the result with a large prime near 3/4 of 2^32.
    a.wrapping_mul(3_221_225_473)
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn round(acc: u64, lane: u64) -> u64 {
    acc.wrapping_add(lane.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn merge(h: u64, v: u64) -> u64 {
    (h ^ round(0, v)).wrapping_mul(P1).wrapping_add(P4)
}

fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn le32(b: &[u8]) -> u64 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a) as u64
}

/// XXH64 (the xxHash specification) with a seed.
pub fn xxh64(b: &[u8], seed: u64) -> u64 {
    let len = b.len() as u64;
    let mut rest = b;
    let mut h = if b.len() >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 32 {
            for (i, x) in v.iter_mut().enumerate() {
                *x = round(*x, le64(&rest[i * 8..]));
            }
            rest = &rest[32..];
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for x in v {
            h = merge(h, x);
        }
        h
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(len);
    while rest.len() >= 8 {
        h ^= round(0, le64(rest));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        h ^= le32(rest).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for &c in rest {
        h ^= (c as u64).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}
