//! The static table (RFC 7541 Appendix A) and the dynamic table (§2.3.2,
//! §4).
//!
//! The dynamic table keeps every entry's bytes in one `Vec<u8>` (as the
//! entry's HTTP/1 line, `name: value` CRLF, which a decoded list copies
//! whole) and the entries in a ring of (offset, name length, value length),
//! newest at the back. Eviction pops from the front and leaves the bytes
//! as a dead prefix, compacted when it outgrows the live part, so a warm
//! table inserts and evicts without allocating: its store never exceeds
//! twice the table's maximum size plus one entry.

use std::collections::VecDeque;

/// RFC 7541 Appendix A, index 1..=61 at positions 0..=60.
pub const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The [`crate::h2::request::props`] of each [`STATIC`] entry.
pub(crate) const STATIC_PROPS: [u16; 61] = {
    let mut t = [0u16; 61];
    let mut i = 0;
    while i < STATIC.len() {
        t[i] = crate::h2::request::const_props(STATIC[i].0, STATIC[i].1);
        i += 1;
    }
    t
};

/// The bytes of all [`STATIC`] entries as lines (`name: value` CRLF),
/// in order.
const STATIC_LINES_LEN: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < STATIC.len() {
        n += STATIC[i].0.len() + STATIC[i].1.len() + 4;
        i += 1;
    }
    n
};

/// Each [`STATIC`] entry as its line (`name: value` CRLF), side by side,
/// with where each starts (and, last, where the last ends): an indexed
/// static field is copied into a decoded list in one piece, as a dynamic
/// table entry is.
pub(crate) static STATIC_LINES: ([u8; STATIC_LINES_LEN], [u16; 62]) = {
    let mut b = [0u8; STATIC_LINES_LEN];
    let mut at = [0u16; 62];
    let mut o = 0;
    let mut i = 0;
    while i < STATIC.len() {
        at[i] = o as u16;
        let parts = [STATIC[i].0, b": ", STATIC[i].1, b"\r\n"];
        let mut p = 0;
        while p < parts.len() {
            let mut k = 0;
            while k < parts[p].len() {
                b[o] = parts[p][k];
                o += 1;
                k += 1;
            }
            p += 1;
        }
        i += 1;
    }
    at[61] = o as u16;
    (b, at)
};

/// [`STATIC`] entry `i` (0-based) as its line, and its name's length.
#[inline]
pub(crate) fn static_line(i: usize) -> Option<(&'static [u8], usize)> {
    let (b, at) = &STATIC_LINES;
    let (from, to) = (*at.get(i)? as usize, *at.get(i + 1)? as usize);
    Some((b.get(from..to)?, STATIC.get(i)?.0.len()))
}

/// The props of each [`STATIC`] entry's name alone (a literal that names
/// it by its index: only its value is read).
pub(crate) const STATIC_NAME_PROPS: [u16; 61] = {
    let mut t = [0u16; 61];
    let mut i = 0;
    while i < STATIC.len() {
        t[i] = crate::h2::request::const_name_props(STATIC[i].0);
        i += 1;
    }
    t
};

/// The longest name in [`STATIC`] (`access-control-allow-origin`).
const STATIC_NAME_MAX: usize = 27;
/// Room per name length in [`STATIC_BY_LEN`] (the most entries whose
/// names share a length, 14 of 7 bytes, fit).
const STATIC_SAME_LEN: usize = 16;

/// [`STATIC`]'s positions grouped by name length, each group in table
/// order and ended by `u8::MAX` when shorter than the room: an encoder
/// looking a field up compares its name with the few entries of the same
/// length instead of walking all 61. Built at compile time (a group
/// outgrowing its room fails the build).
const STATIC_BY_LEN: [[u8; STATIC_SAME_LEN]; STATIC_NAME_MAX + 1] = {
    let mut t = [[u8::MAX; STATIC_SAME_LEN]; STATIC_NAME_MAX + 1];
    let mut fill = [0usize; STATIC_NAME_MAX + 1];
    let mut i = 0;
    while i < STATIC.len() {
        let l = STATIC[i].0.len();
        t[l][fill[l]] = i as u8;
        fill[l] += 1;
        i += 1;
    }
    t
};

/// The positions in [`STATIC`] (0-based, in table order) of the entries
/// whose name is `name`.
pub fn static_named(name: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let group: &[u8] = STATIC_BY_LEN.get(name.len()).map_or(&[], |g| &g[..]);
    group
        .iter()
        .take_while(|&&i| i != u8::MAX)
        .map(|&i| i as usize)
        .filter(move |&i| STATIC[i].0 == name)
}

/// RFC 7541 §4.1: an entry's size is its name and value lengths plus 32.
pub const ENTRY_OVERHEAD: usize = 32;

/// The dynamic table of one direction of one connection.
#[derive(Debug, Default)]
pub struct DynTable {
    store: Vec<u8>,
    /// Bytes of `store` before the oldest live entry.
    dead: usize,
    /// (offset in `store`, name length, value length, the field's
    /// [`crate::h2::request::props`]), newest at the back.
    entries: VecDeque<(u32, u32, u32, u16)>,
    /// Sum of entry sizes (§4.1).
    size: usize,
    /// Current maximum size (§4.2), changed by size updates.
    max: usize,
    /// Bumped by every insertion and every new maximum: the same value
    /// means the same table.
    gen: u64,
}

impl DynTable {
    /// An empty table of maximum size `max`.
    pub fn new(max: usize) -> DynTable {
        DynTable {
            max,
            ..DynTable::default()
        }
    }

    /// The table's current size (§4.1).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The current maximum size.
    pub fn max_size(&self) -> usize {
        self.max
    }

    /// Bytes held by the store (live and dead), for the bound tests.
    pub fn store_len(&self) -> usize {
        self.store.len()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Which state of the table this is: it changed if the value did.
    pub fn generation(&self) -> u64 {
        self.gen
    }

    /// Sets the maximum size, evicting as needed (§4.3).
    pub fn set_max(&mut self, max: usize) {
        self.gen += 1;
        self.max = max;
        self.evict_to(max);
    }

    /// Entry `i` (0 = newest) as (name, value).
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.get_with(i).map(|(n, v, _)| (n, v))
    }

    /// Entry `i` (0 = newest) as (name, value, props given at insertion).
    #[inline]
    pub fn get_with(&self, i: usize) -> Option<(&[u8], &[u8], u16)> {
        let &(off, nl, vl, p) = self.entries.get(self.entries.len().checked_sub(i + 1)?)?;
        let (off, nl, vl) = (off as usize, nl as usize, vl as usize);
        let n = self.store.get(off..off + nl)?;
        let v = self.store.get(off + nl + 2..off + nl + 2 + vl)?;
        Some((n, v, p))
    }

    /// Entry `i` (0 the newest) as its line (`name: value` CRLF), the
    /// name's length and its props: the store keeps entries so, and a
    /// decoded list copies one in one piece.
    #[inline]
    pub fn get_line(&self, i: usize) -> Option<(&[u8], usize, u16)> {
        let &(off, nl, vl, p) = self.entries.get(self.entries.len().checked_sub(i + 1)?)?;
        let (off, nl, vl) = (off as usize, nl as usize, vl as usize);
        Some((self.store.get(off..off + nl + vl + 4)?, nl, p))
    }

    fn evict_to(&mut self, target: usize) {
        while self.size > target {
            let Some((_, nl, vl, _)) = self.entries.pop_front() else {
                break;
            };
            self.size -= nl as usize + vl as usize + ENTRY_OVERHEAD;
            self.dead += (nl + vl) as usize + 4;
        }
        if self.entries.is_empty() {
            self.store.clear();
            self.dead = 0;
        }
    }

    /// Inserts (name, value) as the newest entry (§4.4): evicts until it
    /// fits; an entry larger than the maximum empties the table and is not
    /// added.
    pub fn insert(&mut self, name: &[u8], value: &[u8]) {
        self.insert_with(name, value, 0);
    }

    /// [`DynTable::insert`], keeping `props` with the entry.
    pub fn insert_with(&mut self, name: &[u8], value: &[u8], props: u16) {
        self.gen += 1;
        let sz = name.len() + value.len() + ENTRY_OVERHEAD;
        if sz > self.max {
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max - sz);
        if self.dead > 0 && self.dead >= self.store.len() - self.dead {
            // Compact: move the live bytes to the front and rebase offsets.
            let dead = self.dead;
            self.store.drain(..dead);
            for e in self.entries.iter_mut() {
                e.0 -= dead as u32;
            }
            self.dead = 0;
        }
        let off = self.store.len();
        self.store.reserve(name.len() + value.len() + 4);
        self.store.extend_from_slice(name);
        self.store.extend_from_slice(b": ");
        self.store.extend_from_slice(value);
        self.store.extend_from_slice(b"\r\n");
        self.entries
            .push_back((off as u32, name.len() as u32, value.len() as u32, props));
        self.size += sz;
    }
}
