//! ebb's own deflate encoder for the lowest level (`tune.comp.maxlevel 1`,
//! HAProxy's default): fast, stateless, and a little less tight than zlib.
//!
//! The idea is the one libslz published (a stateless deflate trading ratio
//! for speed); this code is written from RFC 1951 (deflate), RFC 1950
//! (zlib) and RFC 1952 (gzip):
//!
//! - **Stateless.** Each call to [`FastDeflate::compress`] looks for
//!   repeats only inside the bytes it is given (the caller hands one
//!   buffer at a time, 16 KiB by default), so the encoder keeps no window:
//!   its whole state is a few words (the bit accumulator, the checksum).
//!   The hash table of recent positions is one per thread, shared by every
//!   answer on it: positions count up per thread, and an entry below the
//!   current call's start is stale by construction, so the table is never
//!   cleared between calls (only when the counter would wrap).
//! - **One probe, no chains.** A 4-byte hash indexes a 2^14-entry table (64 KiB)
//!   holding the last position that hashed there; a candidate is taken if
//!   its 4 bytes are equal and it is within the 32 KiB window, then the
//!   match is extended up to 258 bytes. Positions inside a match are not
//!   hashed (zlib level 1 does about the same). Misses in a row make the
//!   scan step longer, so incompressible bytes cost little.
//! - **Fixed Huffman codes** (RFC 1951 §3.2.6): no frequency count, no
//!   tree to build or send. One block stays open across calls until a
//!   flush or the end. A call whose coded form would be longer than its
//!   bytes (random or already compressed data) is rolled back and sent in
//!   stored blocks instead, so the output never grows by more than a few
//!   bytes per call.
//! - **Flush** (what zlib calls a sync flush): the open block ends and an
//!   empty stored block byte-aligns the stream, so everything given so
//!   far decodes. **Finish**: an empty final block, then the wrapper's
//!   trailer: gzip's CRC-32 and length (the CRC from flate2, which takes
//!   it from zlib-rs), or zlib's Adler-32 (from zlib-rs).

use std::cell::RefCell;

/// Which wrapper goes around the deflate stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wrap {
    /// Bare RFC 1951 deflate.
    Raw,
    /// RFC 1950: a 2-byte header, Adler-32 at the end.
    Zlib,
    /// RFC 1952: a 10-byte header, CRC-32 and length at the end.
    Gzip,
}

/// Bits of the hash (the table has 2^HASH_BITS positions).
const HASH_BITS: u32 = 14;
/// Deflate's window: a match reaches at most this far back.
const WINDOW: usize = 32 * 1024;
/// Deflate's longest match.
const MAX_MATCH: usize = 258;
/// The positions of one call must fit the counter; bigger inputs are
/// taken this much at a time (matches do not cross these cuts).
const MAX_CALL: usize = 1 << 24;
/// The counter is reset (and the table cleared) past this value.
const POS_LIMIT: u32 = 1 << 31;

/// `code`'s `len` low bits in reverse order: Huffman codes are sent most
/// significant bit first into an LSB-first bit stream (RFC 1951 §3.1.1).
const fn reverse(code: u32, len: u32) -> u32 {
    let mut r = 0;
    let mut i = 0;
    while i < len {
        r = (r << 1) | ((code >> i) & 1);
        i += 1;
    }
    r
}

/// The fixed literal/length code of symbol `sym` (0..=287): (bits as sent,
/// length).
const fn fixed_code(sym: u32) -> (u32, u32) {
    if sym < 144 {
        (reverse(0x30 + sym, 8), 8)
    } else if sym < 256 {
        (reverse(0x190 + sym - 144, 9), 9)
    } else if sym < 280 {
        (reverse(sym - 256, 7), 7)
    } else {
        (reverse(0xc0 + sym - 280, 8), 8)
    }
}

/// A code or code-plus-extra-bits packed as `bits | count << 24`.
const fn pack(bits: u32, count: u32) -> u32 {
    bits | (count << 24)
}

/// Literal bytes' codes.
const LITERALS: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let (c, l) = fixed_code(i as u32);
        t[i] = pack(c, l);
        i += 1;
    }
    t
};

/// End of block (symbol 256): seven zero bits.
const END_OF_BLOCK: (u32, u32) = (0, 7);

/// First length of each length code 257..=285, and its extra bits.
const LEN_BASE: [u32; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u32; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];

/// Each match length 3..=258: its code and extra bits, packed. 258 is
/// code 285 (code 284 with all extra bits set is not valid for it).
const LENGTHS: [u32; MAX_MATCH + 1] = {
    let mut t = [0u32; MAX_MATCH + 1];
    let mut k = 0;
    while k < 29 {
        let (c, l) = fixed_code(257 + k as u32);
        let mut e = 0;
        while e < (1 << LEN_EXTRA[k]) {
            let len = LEN_BASE[k] + e;
            if len <= MAX_MATCH as u32 {
                t[len as usize] = pack(c | (e << l), l + LEN_EXTRA[k]);
            }
            e += 1;
        }
        k += 1;
    }
    t
};

/// The distance codes 0..=29 as sent (five bits, reversed).
const DISTANCES: [u32; 30] = {
    let mut t = [0u32; 30];
    let mut i = 0;
    while i < 30 {
        t[i] = reverse(i as u32, 5);
        i += 1;
    }
    t
};

/// Extra bits of distance code `c` (RFC 1951 §3.2.5).
const fn dist_extra(c: u32) -> u32 {
    if c < 4 {
        0
    } else {
        c / 2 - 1
    }
}

/// Distance code `c`'s first distance minus one.
const fn dist_base(c: u32) -> u32 {
    if c < 4 {
        c
    } else {
        (2 + (c & 1)) << dist_extra(c)
    }
}

/// The code of `d - 1` (`n`): `DIST_CODE[n]` below 256, else
/// `DIST_CODE[256 + (n >> 7)]` (from code 16 on, the codes start on
/// multiples of 128), as zlib tabulates it.
const DIST_CODE: [u8; 512] = {
    let mut t = [0u8; 512];
    let mut c = 0;
    while c < 30 {
        let mut n = dist_base(c);
        while n < dist_base(c) + (1 << dist_extra(c)) {
            if n < 256 {
                t[n as usize] = c as u8;
            } else {
                t[256 + (n as usize >> 7)] = c as u8;
            }
            n += 1;
        }
        c += 1;
    }
    t
};

/// Each distance code as sent with its bit count, packed (the extra bits
/// are added above the five).
const DIST_PACKED: [u32; 30] = {
    let mut t = [0u32; 30];
    let mut c = 0;
    while c < 30 {
        t[c] = pack(DISTANCES[c], 5 + dist_extra(c as u32));
        c += 1;
    }
    t
};

/// Each distance code's first distance minus one.
const DIST_BASE: [u32; 30] = {
    let mut t = [0u32; 30];
    let mut c = 0;
    while c < 30 {
        t[c] = dist_base(c as u32);
        c += 1;
    }
    t
};

/// For each index of [`DIST_CODE`], that code as sent with its bit count
/// (packed, low half) and its first distance minus one (high half): one
/// load gives all [`distance`] needs.
const DIST_INFO: [u64; 512] = {
    let mut t = [0u64; 512];
    let mut k = 0;
    while k < 512 {
        let c = DIST_CODE[k] as usize;
        t[k] = DIST_PACKED[c] as u64 | ((DIST_BASE[c] as u64) << 32);
        k += 1;
    }
    t
};

/// A distance 1..=32768: its code and extra bits, packed.
#[inline(always)]
fn distance(d: usize) -> u32 {
    let n = (d - 1) & (WINDOW - 1);
    let k = if n < 256 { n } else { 256 + (n >> 7) };
    let e = DIST_INFO[k];
    // The extra bits land above the code's five, below the count.
    (e as u32) + ((n as u32 - (e >> 32) as u32) << 5)
}

/// Entries of the hash table.
const TABLE: usize = 1 << HASH_BITS;

/// The per-thread table of recent positions (see the module essay).
struct Positions {
    /// Position + 1 of the last 4 bytes that hashed here (0: none). (An
    /// array: a hash, shifted under `HASH_BITS`, needs no bounds check.)
    table: Box<[u32; TABLE]>,
    /// The thread's position counter: the next call starts here.
    next: u32,
}

thread_local! {
    static POSITIONS: RefCell<Positions> = RefCell::new(Positions {
        table: Box::new([0; TABLE]),
        next: 0,
    });
}

#[inline]
fn read32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

#[inline]
fn read64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline]
fn hash(word: u32) -> usize {
    (word.wrapping_mul(0x9e37_79b1) >> (32 - HASH_BITS)) as usize
}

/// The LSB-first bit writer (RFC 1951 §3.1.1).
#[derive(Clone, Copy, Default)]
struct Bits {
    acc: u64,
    count: u32,
}

impl Bits {
    /// Appends `count` bits (at most 32; the accumulator holds under 32).
    #[inline]
    fn put(&mut self, out: &mut Vec<u8>, bits: u32, count: u32) {
        self.acc |= u64::from(bits) << self.count;
        self.count += count;
        if self.count >= 32 {
            out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.count -= 32;
        }
    }

    /// Writes the whole bytes held (fewer than 8 bits stay).
    fn bytes(&mut self, out: &mut Vec<u8>) {
        while self.count >= 8 {
            out.push(self.acc as u8);
            self.acc >>= 8;
            self.count -= 8;
        }
    }

    /// Pads with zero bits to a byte boundary and writes everything.
    fn align(&mut self, out: &mut Vec<u8>) {
        self.bytes(out);
        if self.count > 0 {
            out.push(self.acc as u8);
            self.acc = 0;
            self.count = 0;
        }
    }
}

/// Bytes the LZ77 loop's sink gathers before it appends them to the
/// output (under glibc's size for `rep movsb`, which callgrind counts a
/// byte at a time; a zeroed output of the worst case's size cost more).
const SPILL: usize = 1024;

/// The bit writer of the LZ77 loop: an LSB-first accumulator stored 8
/// bytes at a time into a small buffer, appended to the output when full.
struct Sink<'a> {
    out: &'a mut Vec<u8>,
    buf: [u8; SPILL + 8],
    /// Bytes in `buf` (under `SPILL` between writes).
    pos: usize,
    acc: u64,
    /// Bits in `acc` (under 32 between writes).
    count: u32,
}

impl Sink<'_> {
    /// Appends `count` bits (at most 32).
    #[inline(always)]
    fn put(&mut self, bits: u64, count: u32) {
        self.acc |= bits << self.count;
        self.count += count;
        if self.count >= 32 {
            // All 8 bytes are stored (`pos` < SPILL); the whole ones count.
            if let Some(w) = self.buf.get_mut(self.pos..self.pos + 8) {
                w.copy_from_slice(&self.acc.to_le_bytes());
            }
            let whole = self.count >> 3;
            self.pos += whole as usize;
            self.acc >>= whole * 8;
            self.count &= 7;
            if self.pos >= SPILL {
                self.spill();
            }
        }
    }

    /// Appends the whole bytes gathered to the output.
    #[inline(never)]
    fn spill(&mut self) {
        self.out.extend_from_slice(&self.buf[..self.pos]);
        self.pos = 0;
    }

    #[inline(always)]
    fn literal(&mut self, b: u8) {
        let p = LITERALS[usize::from(b)];
        self.put(u64::from(p & 0x00ff_ffff), p >> 24);
    }
}

/// The running checksum of the wrapper.
enum Check {
    None,
    Adler(u32),
    Crc(flate2::Crc),
}

/// One deflate stream (see the module essay).
pub struct FastDeflate {
    wrap: Wrap,
    bits: Bits,
    /// A fixed-code block is open (its header sent, no end yet).
    in_block: bool,
    /// The wrapper's header is out.
    started: bool,
    /// Bits were written since the last flush (a flush of nothing sends
    /// nothing).
    dirty: bool,
    finished: bool,
    check: Check,
}

impl FastDeflate {
    pub fn new(wrap: Wrap) -> FastDeflate {
        FastDeflate {
            wrap,
            bits: Bits::default(),
            in_block: false,
            started: false,
            dirty: false,
            finished: false,
            check: match wrap {
                Wrap::Raw => Check::None,
                Wrap::Zlib => Check::Adler(1),
                Wrap::Gzip => Check::Crc(flate2::Crc::new()),
            },
        }
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        match self.wrap {
            Wrap::Raw => {}
            // CM 8 (deflate), CINFO 7 (32 KiB window); FLEVEL 0 (fastest),
            // no dictionary, FCHECK making the pair a multiple of 31.
            Wrap::Zlib => out.extend_from_slice(&[0x78, 0x01]),
            // ID1 ID2, CM 8, no flags, no time, XFL 4 (fastest), OS 3 (Unix).
            Wrap::Gzip => out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 3]),
        }
    }

    /// Compresses all of `input`, appending to `out`. Everything but the
    /// last few bits is in `out` on return.
    pub fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.finished || input.is_empty() {
            return;
        }
        self.start(out);
        match &mut self.check {
            Check::None => {}
            Check::Adler(a) => *a = zlib_rs::adler32::adler32(*a, input),
            Check::Crc(c) => c.update(input),
        }
        for piece in input.chunks(MAX_CALL) {
            self.piece(piece, out);
        }
        self.bits.bytes(out);
        self.dirty = true;
    }

    /// One call's worth of input: coded with fixed codes, or stored when
    /// that would be longer.
    fn piece(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let (mark, bits, in_block) = (out.len(), self.bits, self.in_block);
        out.reserve(input.len() + input.len() / 8 + 16);
        if !self.in_block {
            // BFINAL 0, BTYPE 01 (fixed codes).
            self.bits.put(out, 0b010, 3);
            self.in_block = true;
        }
        POSITIONS.with(|p| {
            let mut p = p.borrow_mut();
            if p.next >= POS_LIMIT {
                p.table.fill(0);
                p.next = 0;
            }
            let base = p.next;
            p.next += input.len() as u32 + 1;
            self.lz77(input, &mut p.table, base, out);
        });
        let coded =
            (out.len() - mark) as u64 * 8 + u64::from(self.bits.count) - u64::from(bits.count);
        // A stored block costs its bytes, 4 length bytes and a header.
        let stored = (input.len() as u64 + 5) * 8 + 16;
        if coded > stored {
            out.truncate(mark);
            self.bits = bits;
            self.in_block = in_block;
            self.stored(input, out);
        }
    }

    /// Greedy LZ77 over `input` with one probe per position.
    fn lz77(&mut self, input: &[u8], table: &mut [u32; TABLE], base: u32, out: &mut Vec<u8>) {
        let mut sink = Sink {
            out,
            buf: [0; SPILL + 8],
            pos: 0,
            acc: self.bits.acc,
            count: self.bits.count,
        };
        let n = input.len();
        let mut i = 0;
        let mut misses = 0usize;
        while i + 4 <= n {
            let word = read32(input, i);
            let h = hash(word);
            let here = base + i as u32 + 1;
            let cand = table[h];
            table[h] = here;
            // The candidate's distance: 1..=i (in this call; 0 in the
            // table is never) and within the window, in one comparison.
            let dist = here.wrapping_sub(cand) as usize;
            if dist.wrapping_sub(1) < i.min(WINDOW) {
                let c = i - dist;
                if read32(input, c) == word {
                    let len = match_len(input, c, i);
                    // Length and distance codes in one write (at most
                    // 13 + 18 bits).
                    let l = LENGTHS[len];
                    let d = distance(dist);
                    sink.put(
                        u64::from(l & 0x00ff_ffff) | (u64::from(d & 0x00ff_ffff) << (l >> 24)),
                        (l >> 24) + (d >> 24),
                    );
                    i += len;
                    misses = 0;
                    continue;
                }
            }
            // No match: one literal, or a few after many misses in a row.
            misses += 1;
            if misses <= 32 {
                sink.literal(input[i]);
                i += 1;
            } else {
                let step = 1 + ((misses - 1) >> 5);
                for &b in &input[i..(i + step).min(n)] {
                    sink.literal(b);
                }
                i += step;
            }
        }
        for &b in &input[i.min(n)..] {
            sink.literal(b);
        }
        sink.spill();
        self.bits = Bits {
            acc: sink.acc,
            count: sink.count,
        };
    }

    /// Sends `input` in stored blocks (after ending an open block).
    fn stored(&mut self, input: &[u8], out: &mut Vec<u8>) {
        self.end_block(out);
        for part in input.chunks(0xffff) {
            // BFINAL 0, BTYPE 00, then LEN and NLEN from a byte boundary.
            self.bits.put(out, 0, 3);
            self.bits.align(out);
            let len = part.len() as u16;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(part);
        }
    }

    fn end_block(&mut self, out: &mut Vec<u8>) {
        if self.in_block {
            self.bits.put(out, END_OF_BLOCK.0, END_OF_BLOCK.1);
            self.in_block = false;
        }
    }

    /// Makes everything compressed so far decodable: ends the open block
    /// and byte-aligns with an empty stored block (zlib's sync flush).
    pub fn flush(&mut self, out: &mut Vec<u8>) {
        if self.finished || !self.dirty {
            return;
        }
        self.end_block(out);
        self.bits.put(out, 0, 3);
        self.bits.align(out);
        out.extend_from_slice(&[0, 0, 0xff, 0xff]);
        self.dirty = false;
    }

    /// Ends the stream: an empty final block and the wrapper's trailer.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        self.start(out);
        self.end_block(out);
        // BFINAL 1, BTYPE 01, and at once the end of that block.
        self.bits.put(out, 0b011, 3);
        self.bits.put(out, END_OF_BLOCK.0, END_OF_BLOCK.1);
        self.bits.align(out);
        match &self.check {
            Check::None => {}
            Check::Adler(a) => out.extend_from_slice(&a.to_be_bytes()),
            Check::Crc(c) => {
                out.extend_from_slice(&c.sum().to_le_bytes());
                out.extend_from_slice(&c.amount().to_le_bytes());
            }
        }
        self.finished = true;
    }
}

/// How far the bytes at `c` and at `i` (`c < i`, 4 known equal) agree,
/// up to deflate's longest match and the end of the input.
#[inline]
fn match_len(input: &[u8], c: usize, i: usize) -> usize {
    let max = (input.len() - i).min(MAX_MATCH);
    let mut len = 4;
    while len + 8 <= max {
        let x = read64(input, c + len) ^ read64(input, i + len);
        if x != 0 {
            return len + (x.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    while len < max && input[c + len] == input[i + len] {
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Read;

    fn decode(wrap: Wrap, data: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        match wrap {
            Wrap::Raw => flate2::read::DeflateDecoder::new(data).read_to_end(&mut out)?,
            Wrap::Zlib => flate2::read::ZlibDecoder::new(data).read_to_end(&mut out)?,
            Wrap::Gzip => flate2::read::GzDecoder::new(data).read_to_end(&mut out)?,
        };
        Ok(out)
    }

    /// Compresses `input` cut at `cuts` (offsets, any order), flushing
    /// after the pieces `flushes` picks, and finishes.
    fn encode(wrap: Wrap, input: &[u8], cuts: &[usize], flushes: u64) -> Vec<u8> {
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        at.push(0);
        at.push(input.len());
        at.sort_unstable();
        let mut e = FastDeflate::new(wrap);
        let mut out = Vec::new();
        for (k, w) in at.windows(2).enumerate() {
            e.compress(&input[w[0]..w[1]], &mut out);
            if flushes >> (k % 64) & 1 == 1 {
                e.flush(&mut out);
            }
        }
        e.finish(&mut out);
        out
    }

    /// Text-like bytes: words from a small vocabulary with numbers.
    fn text(seed: u64, n: usize) -> Vec<u8> {
        const WORDS: [&[u8]; 8] = [
            b"the ",
            b"server ",
            b"answer ",
            b"proxy ",
            b"buffer\n",
            b"<div>",
            b"</div>",
            b"{\"k\": ",
        ];
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(n + 16);
        while out.len() < n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            out.extend_from_slice(WORDS[(x >> 60) as usize & 7]);
            if x >> 40 & 3 == 0 {
                out.extend_from_slice((x >> 20 & 0xfff).to_string().as_bytes());
            }
        }
        out.truncate(n);
        out
    }

    #[test]
    fn tables_follow_rfc_1951() {
        // Literal 0 is 00110000 (8 bits), 144 is 110010000 (9), 256 is
        // 0000000 (7), 280 is 11000000 (8): sent reversed.
        assert_eq!(LITERALS[0], pack(0b0000_1100, 8));
        assert_eq!(LITERALS[144], pack(0b0_0001_0011, 9));
        // Length 3 is code 257 (0000001, reversed 1000000).
        assert_eq!(LENGTHS[3], pack(0b100_0000, 7));
        // Length 258 is code 285 (11000101) with no extra bits.
        assert_eq!(LENGTHS[258], pack(reverse(0xc5, 8), 8));
        // 257 is code 284 (11000100) with extra 30 in 5 bits.
        assert_eq!(LENGTHS[257], pack(reverse(0xc4, 8) | (30 << 8), 13));
        // Distances: 1 is code 0; 5 is code 4 + 1 extra bit 0; 32768 is
        // code 29 with 13 extra bits all set.
        assert_eq!(distance(1), pack(0, 5));
        assert_eq!(distance(5), pack(reverse(4, 5), 6));
        assert_eq!(distance(6), pack(reverse(4, 5) | (1 << 5), 6));
        assert_eq!(distance(32768), pack(reverse(29, 5) | (0x1fff << 5), 18));
        // Every distance against the rule: the top bit of d - 1 and the
        // one below it pick the code, the bits under them are extra.
        for d in 1..=WINDOW {
            let n = (d - 1) as u32;
            let want = if n < 4 {
                pack(DISTANCES[n as usize], 5)
            } else {
                let top = 31 - n.leading_zeros();
                let extra = top - 1;
                let code = 2 * top + ((n >> extra) & 1);
                pack(
                    DISTANCES[code as usize] | ((n & ((1 << extra) - 1)) << 5),
                    5 + extra,
                )
            };
            assert_eq!(distance(d), want, "{d}");
        }
    }

    #[test]
    fn wrappers_decode_and_text_shrinks() {
        let input = text(7, 256 * 1024);
        for wrap in [Wrap::Raw, Wrap::Zlib, Wrap::Gzip] {
            let out = encode(wrap, &input, &[16384, 32768, 100_000], 0);
            assert_eq!(decode(wrap, &out).unwrap(), input, "{wrap:?}");
            // Fixed codes spend 8 bits on a text literal: about 2.7x on
            // this text (zlib's level 1, dynamic codes, does better).
            assert!(out.len() < input.len() / 2, "{wrap:?}: {}", out.len());
        }
        // Empty input: a valid empty stream.
        for wrap in [Wrap::Raw, Wrap::Zlib, Wrap::Gzip] {
            let out = encode(wrap, b"", &[], 0);
            assert_eq!(decode(wrap, &out).unwrap(), b"", "{wrap:?}");
        }
    }

    #[test]
    fn random_bytes_are_stored_not_grown() {
        let mut x = 1u64;
        let input: Vec<u8> = (0..100_000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                (x >> 56) as u8
            })
            .collect();
        let out = encode(Wrap::Gzip, &input, &[16384, 50_000], 0);
        assert_eq!(decode(Wrap::Gzip, &out).unwrap(), input);
        assert!(out.len() < input.len() + 64, "{}", out.len());
    }

    #[test]
    fn a_flush_makes_everything_so_far_decodable() {
        let mut e = FastDeflate::new(Wrap::Gzip);
        let mut out = Vec::new();
        e.compress(b"hello, hello, hello", &mut out);
        e.flush(&mut out);
        let len = out.len();
        e.flush(&mut out); // nothing new: nothing sent
        assert_eq!(out.len(), len);
        let mut d = flate2::Decompress::new_gzip(15);
        let mut plain = Vec::with_capacity(64);
        d.decompress_vec(&out, &mut plain, flate2::FlushDecompress::Sync)
            .unwrap();
        assert_eq!(plain, b"hello, hello, hello");
        e.compress(b" world", &mut out);
        e.finish(&mut out);
        assert_eq!(
            decode(Wrap::Gzip, &out).unwrap(),
            b"hello, hello, hello world"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Random bytes cut anywhere, flushed anywhere, decode to themselves.
        #[test]
        fn random_input_round_trips(
            input in prop::collection::vec(any::<u8>(), 0..70_000),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
            flushes in any::<u64>(),
            w in 0..3u8,
        ) {
            let wrap = [Wrap::Raw, Wrap::Zlib, Wrap::Gzip][usize::from(w)];
            let out = encode(wrap, &input, &cuts, flushes);
            prop_assert_eq!(decode(wrap, &out).unwrap(), input);
        }

        /// Repetitive bytes (a small alphabet: long matches, distances of
        /// every size) and text, cut and flushed anywhere.
        #[test]
        fn repetitive_input_round_trips(
            seed in any::<u64>(),
            alphabet in 1..6u8,
            n in 0..300_000usize,
            cuts in prop::collection::vec(any::<usize>(), 0..12),
            flushes in any::<u64>(),
            w in 0..3u8,
        ) {
            let wrap = [Wrap::Raw, Wrap::Zlib, Wrap::Gzip][usize::from(w)];
            let input = if seed & 1 == 0 {
                text(seed, n)
            } else {
                let mut x = seed;
                (0..n)
                    .map(|_| {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        b'a' + ((x >> 59) as u8 % alphabet)
                    })
                    .collect()
            };
            let out = encode(wrap, &input, &cuts, flushes);
            prop_assert_eq!(decode(wrap, &out).unwrap(), input);
        }
    }
}
