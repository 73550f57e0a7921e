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

const Q1: u32 = 0x9E37_79B1;
const Q2: u32 = 0x85EB_CA77;
const Q3: u32 = 0xC2B2_AE3D;
const Q4: u32 = 0x27D4_EB2F;
const Q5: u32 = 0x1656_67B1;

fn le32u(b: &[u8]) -> u32 {
    le32(b) as u32
}

/// XXH32 (the xxHash specification) with a seed.
pub fn xxh32(b: &[u8], seed: u32) -> u32 {
    let round = |acc: u32, lane: u32| {
        acc.wrapping_add(lane.wrapping_mul(Q2))
            .rotate_left(13)
            .wrapping_mul(Q1)
    };
    let mut rest = b;
    let mut h = if b.len() >= 16 {
        let mut v = [
            seed.wrapping_add(Q1).wrapping_add(Q2),
            seed.wrapping_add(Q2),
            seed,
            seed.wrapping_sub(Q1),
        ];
        while rest.len() >= 16 {
            for (i, x) in v.iter_mut().enumerate() {
                *x = round(*x, le32u(&rest[i * 4..]));
            }
            rest = &rest[16..];
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(Q5)
    };
    h = h.wrapping_add(b.len() as u32);
    while rest.len() >= 4 {
        h = h
            .wrapping_add(le32u(rest).wrapping_mul(Q3))
            .rotate_left(17)
            .wrapping_mul(Q4);
        rest = &rest[4..];
    }
    for &c in rest {
        h = h
            .wrapping_add((c as u32).wrapping_mul(Q5))
            .rotate_left(11)
            .wrapping_mul(Q1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(Q2);
    h ^= h >> 13;
    h = h.wrapping_mul(Q3);
    h ^ (h >> 16)
}

/// XXH3's default secret (the xxHash specification's `kSecret`).
const XXH3_SECRET: [u8; 192] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
];

const MX1: u64 = 0x1656_6791_9E37_79F9;
const MX2: u64 = 0x9FB2_1C65_1E98_DF25;

/// The 128-bit product of `a` and `b`, its halves XORed.
fn fold(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

fn xxh64_avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

fn xxh3_avalanche(mut h: u64) -> u64 {
    h ^= h >> 37;
    h = h.wrapping_mul(MX1);
    h ^ (h >> 32)
}

fn mix16(b: &[u8], sec: &[u8], seed: u64) -> u64 {
    fold(
        le64(b) ^ le64(sec).wrapping_add(seed),
        le64(&b[8..]) ^ le64(&sec[8..]).wrapping_sub(seed),
    )
}

/// XXH3's 64-bit hash (`XXH3_64bits_withSeed`, the xxHash
/// specification), as HAProxy's `xxh3` converter computes it.
pub fn xxh3(b: &[u8], seed: u64) -> u64 {
    let s = &XXH3_SECRET;
    let len = b.len();
    let l = len as u64;
    match len {
        0 => xxh64_avalanche(seed ^ le64(&s[56..]) ^ le64(&s[64..])),
        1..=3 => {
            let combined = ((b[0] as u32) << 16)
                | ((b[len >> 1] as u32) << 24)
                | (b[len - 1] as u32)
                | ((len as u32) << 8);
            let flip = ((le32u(s) ^ le32u(&s[4..])) as u64).wrapping_add(seed);
            xxh64_avalanche(combined as u64 ^ flip)
        }
        4..=8 => {
            let seed = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
            let in1 = le32(b);
            let in2 = le32(&b[len - 4..]);
            let flip = (le64(&s[8..]) ^ le64(&s[16..])).wrapping_sub(seed);
            let mut h = in2.wrapping_add(in1 << 32) ^ flip;
            h ^= h.rotate_left(49) ^ h.rotate_left(24);
            h = h.wrapping_mul(MX2);
            h ^= (h >> 35).wrapping_add(l);
            h = h.wrapping_mul(MX2);
            h ^ (h >> 28)
        }
        9..=16 => {
            let f1 = (le64(&s[24..]) ^ le64(&s[32..])).wrapping_add(seed);
            let f2 = (le64(&s[40..]) ^ le64(&s[48..])).wrapping_sub(seed);
            let lo = le64(b) ^ f1;
            let hi = le64(&b[len - 8..]) ^ f2;
            xxh3_avalanche(
                l.wrapping_add(lo.swap_bytes())
                    .wrapping_add(hi)
                    .wrapping_add(fold(lo, hi)),
            )
        }
        17..=128 => {
            let mut acc = l.wrapping_mul(P1);
            let mut add = |i: usize, j: usize, k: usize| {
                acc = acc
                    .wrapping_add(mix16(&b[i..], &s[k..], seed))
                    .wrapping_add(mix16(&b[j..], &s[k + 16..], seed));
            };
            if len > 32 {
                if len > 64 {
                    if len > 96 {
                        add(48, len - 64, 96);
                    }
                    add(32, len - 48, 64);
                }
                add(16, len - 32, 32);
            }
            add(0, len - 16, 0);
            xxh3_avalanche(acc)
        }
        129..=240 => {
            let mut acc = l.wrapping_mul(P1);
            for i in 0..8 {
                acc = acc.wrapping_add(mix16(&b[16 * i..], &s[16 * i..], seed));
            }
            acc = xxh3_avalanche(acc);
            for i in 8..len / 16 {
                acc = acc.wrapping_add(mix16(&b[16 * i..], &s[16 * (i - 8) + 3..], seed));
            }
            acc = acc.wrapping_add(mix16(&b[len - 16..], &s[136 - 17..], seed));
            xxh3_avalanche(acc)
        }
        _ => {
            // Past 240 bytes: stripes of 64 bytes in blocks, with a
            // secret derived from the seed.
            let mut sec = XXH3_SECRET;
            if seed != 0 {
                for (i, c) in sec.chunks_exact_mut(16).enumerate() {
                    let a = le64(&s[16 * i..]).wrapping_add(seed);
                    let z = le64(&s[16 * i + 8..]).wrapping_sub(seed);
                    c[..8].copy_from_slice(&a.to_le_bytes());
                    c[8..].copy_from_slice(&z.to_le_bytes());
                }
            }
            let mut acc: [u64; 8] = [Q3 as u64, P1, P2, P3, P4, Q2 as u64, P5, Q1 as u64];
            let stripe = |acc: &mut [u64; 8], d: &[u8], k: &[u8]| {
                for i in 0..8 {
                    let v = le64(&d[8 * i..]);
                    let key = v ^ le64(&k[8 * i..]);
                    acc[i ^ 1] = acc[i ^ 1].wrapping_add(v);
                    acc[i] = acc[i].wrapping_add((key & 0xffff_ffff).wrapping_mul(key >> 32));
                }
            };
            let per_block = (sec.len() - 64) / 8;
            let block = 64 * per_block;
            let blocks = (len - 1) / block;
            for n in 0..blocks {
                for k in 0..per_block {
                    stripe(&mut acc, &b[n * block + 64 * k..], &sec[8 * k..]);
                }
                let key = &sec[sec.len() - 64..];
                for (i, a) in acc.iter_mut().enumerate() {
                    let mut x = *a;
                    x ^= x >> 47;
                    x ^= le64(&key[8 * i..]);
                    *a = x.wrapping_mul(Q1 as u64);
                }
            }
            let stripes = ((len - 1) - block * blocks) / 64;
            for k in 0..stripes {
                stripe(&mut acc, &b[blocks * block + 64 * k..], &sec[8 * k..]);
            }
            stripe(&mut acc, &b[len - 64..], &sec[sec.len() - 64 - 7..]);
            let mut h = l.wrapping_mul(P1);
            for i in 0..4 {
                h = h.wrapping_add(fold(
                    acc[2 * i] ^ le64(&sec[11 + 16 * i..]),
                    acc[2 * i + 1] ^ le64(&sec[11 + 16 * i + 8..]),
                ));
            }
            xxh3_avalanche(h)
        }
    }
}
