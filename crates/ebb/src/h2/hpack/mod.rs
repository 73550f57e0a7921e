//! HPACK (RFC 7541): header compression for HTTP/2, decoder and encoder.
//!
//! Written for ebb rather than taken from crates.io: the maintained HPACK
//! code in Rust lives inside `h2` (not public API); the standalone crates
//! (`hpack`, `httlib-hpack`, `fluke-hpack`/`loona-hpack`) allocate a
//! `Vec` per field or per table entry, are unmaintained, or both. ebb's
//! hot path wants a decoder that writes into a reused buffer and a table
//! that does not allocate per entry, so both are here.
//!
//! - [`Decoder::decode`] reads one complete header block (the HEADERS
//!   fragment plus its CONTINUATIONs) into a reused [`HeaderList`]: field
//!   bytes go into one buffer, fields are offset pairs. Table state is
//!   updated even when the list is refused, so the connection stays in sync
//!   (§2.2: the decoder must process every block).
//! - **HPACK bomb.** A few bytes can name a 4 KB table entry again and
//!   again. The decoder counts the list size as RFC 9113 §6.5.2 defines it
//!   (name + value + 32 per field) and, past `max_list`, stops copying and
//!   only keeps the table in sync: work is bounded by the block's length
//!   (itself bounded by the connection, see `conn.rs`), memory by
//!   `max_list`. The caller answers such a request 431 or resets it.
//! - Every decoding error is a connection error COMPRESSION_ERROR (RFC 9113
//!   §4.3).
//! - [`Encoder`] encodes responses: indexed when the static or dynamic table
//!   has the field, else a literal with incremental indexing (never
//!   indexing for fields that carry secrets, no indexing for fields that
//!   change with every message), Huffman when it is shorter (or as set).

mod huffman;
mod table;

use crate::h2::request::props;

pub use huffman::HuffmanError;
pub use table::{DynTable, ENTRY_OVERHEAD, STATIC};

/// The default and, for ebb, the largest dynamic table size (RFC 9113
/// §6.5.2 SETTINGS_HEADER_TABLE_SIZE initial value; HAProxy uses 4096 too).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// Why a header block was refused: every variant is COMPRESSION_ERROR.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HpackError {
    /// The block ends inside a representation.
    Truncated,
    /// An integer longer than ebb accepts (over 2^28) (§5.1 allows refusing).
    IntegerOverflow,
    /// Index 0 or past the end of the static and dynamic tables (§2.3.3).
    BadIndex,
    /// A Huffman string with EOS or bad padding (§5.2).
    Huffman(HuffmanError),
    /// A dynamic table size update above the SETTINGS value (§6.3).
    SizeUpdateTooLarge,
    /// A dynamic table size update after a field representation (§4.2).
    SizeUpdateNotFirst,
    /// More fields in the block than [`Decoder::set_max_fields`] allows
    /// (HAProxy 2.6's list of 2 x `tune.http.maxhdr` entries, one of which
    /// ends it).
    TooManyFields,
}

/// One decoded field: spans into [`HeaderList::bytes`], the record the
/// HTTP/1 parser writes too, so a list is a `stream::msg::Fields` view
/// without a copy.
pub type Field = crate::http1::HeaderSpan;

/// A decoded header list. Reuse one per connection: [`HeaderList::clear`]
/// keeps the capacity.
#[derive(Clone, Debug, Default)]
pub struct HeaderList {
    /// The fields in order, each as its HTTP/1 line (`name: value` CRLF):
    /// a run of them is written to an HTTP/1 head in one copy
    /// (`RequestHead::write_h1`).
    buf: Vec<u8>,
    fields: Vec<Field>,
    /// Per field: what the §8 checks need to know of it
    /// ([`crate::h2::request::props`]), and whether it was sent "never
    /// indexed" (§6.2.3), which an intermediary keeps so.
    props: Vec<u16>,
    /// RFC 9113 §6.5.2 size of the list (counted even past the limit).
    pub list_size: usize,
    /// The list exceeded `max_list`: its fields are incomplete; answer 431
    /// or reset the stream.
    pub too_large: bool,
    /// Fields decoded, kept or not (past `max_list` they are only counted).
    count: usize,
}

impl HeaderList {
    /// Empties the list, keeping its allocations.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.fields.clear();
        self.props.clear();
        self.list_size = 0;
        self.too_large = false;
        self.count = 0;
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Field `i` as (name, value).
    #[inline]
    pub fn get(&self, i: usize) -> (&[u8], &[u8]) {
        let f = &self.fields[i];
        (self.slice(f.name), self.slice(f.value))
    }

    /// Field `i`'s value (the name is not sliced).
    #[inline]
    pub fn value(&self, i: usize) -> &[u8] {
        self.slice(self.fields[i].value)
    }

    /// The fields in order, as (name, value).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields
            .iter()
            .map(|f| (self.slice(f.name), self.slice(f.value)))
    }

    /// The field records (spans into [`HeaderList::bytes`]).
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The bytes the field spans index: each field as its line, `name:
    /// value` CRLF, in order, side by side.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Whether field `i` was sent "never indexed".
    pub fn never_indexed(&self, i: usize) -> bool {
        self.props.get(i).is_some_and(|p| p & props::NEVER != 0)
    }

    /// Each field's [`crate::h2::request::props`], in order.
    #[inline]
    pub fn props(&self) -> &[u16] {
        &self.props
    }

    #[inline]
    fn slice(&self, s: crate::http1::Span) -> &[u8] {
        &self.buf[s.start as usize..s.end as usize]
    }

    #[inline(always)]
    fn push(&mut self, name: &[u8], value: &[u8], props: u16, max_list: usize) {
        if !self.room(name.len() + value.len(), max_list) {
            return;
        }
        let a = self.buf.len();
        self.buf.reserve(name.len() + value.len() + 4);
        self.buf.extend_from_slice(name);
        self.buf.extend_from_slice(b": ");
        self.buf.extend_from_slice(value);
        self.buf.extend_from_slice(b"\r\n");
        self.note(a, name.len(), props);
    }

    /// [`HeaderList::push`] of a field already in its line form
    /// (`name: value` CRLF, the name its first `name_len` bytes), as a
    /// dynamic table entry is: one copy.
    #[inline(always)]
    fn push_line(&mut self, line: &[u8], name_len: usize, props: u16, max_list: usize) {
        if !self.room(line.len().saturating_sub(4), max_list) {
            return;
        }
        let a = self.buf.len();
        self.buf.extend_from_slice(line);
        self.note(a, name_len, props);
    }

    /// Counts a field of `len` bytes (name and value) in the list's size:
    /// whether it is kept (the list is not past `max_list`).
    #[inline(always)]
    fn room(&mut self, len: usize, max_list: usize) -> bool {
        self.count += 1;
        self.list_size = self.list_size.saturating_add(len + ENTRY_OVERHEAD);
        if self.too_large || self.list_size > max_list {
            self.too_large = true;
            return false;
        }
        true
    }

    /// Records the field line just copied to `buf[at..]` (`name: value`
    /// CRLF), its name the first `name_len` bytes.
    /// A regular field's value with surrounding SP/HTAB
    /// ([`props::EDGE_WS`]) is kept without them: its line is rewritten
    /// as if the value had come trimmed.
    #[inline(always)]
    fn note(&mut self, at: usize, name_len: usize, props: u16) {
        if props & props::EDGE_WS != 0 {
            self.trim_last(at + name_len + 2);
        }
        let a = at as u32;
        let b = (at + name_len) as u32;
        let c = self.buf.len().saturating_sub(2) as u32;
        self.fields.push(Field {
            name: crate::http1::Span { start: a, end: b },
            value: crate::http1::Span {
                start: b + 2,
                end: c,
            },
        });
        self.props.push(props);
    }

    /// Takes the SP/HTAB off both ends of the value of the line last
    /// appended (its value from `vs` to the CRLF that ends `buf`).
    #[cold]
    fn trim_last(&mut self, vs: usize) {
        let end = self.buf.len().saturating_sub(2);
        let vs = vs.min(end);
        let ws = |x: &&u8| matches!(**x, b' ' | b'\t');
        let lead = self.buf[vs..end].iter().take_while(ws).count();
        let trail = self.buf[vs + lead..end].iter().rev().take_while(ws).count();
        self.buf.truncate(end - trail);
        self.buf.drain(vs..vs + lead);
        self.buf.extend_from_slice(b"\r\n");
    }
}

/// Reads an integer with an `n`-bit prefix (§5.1) at `src[*pos]`.
pub fn decode_int(src: &[u8], pos: &mut usize, n: u8) -> Result<usize, HpackError> {
    let mask = (1usize << n) - 1;
    let first = *src.get(*pos).ok_or(HpackError::Truncated)?;
    *pos += 1;
    let mut v = usize::from(first) & mask;
    if v < mask {
        return Ok(v);
    }
    let mut shift = 0u32;
    loop {
        let b = *src.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        v += usize::from(b & 0x7f) << shift;
        shift += 7;
        if v > 1 << 28 {
            return Err(HpackError::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            return Ok(v);
        }
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
    }
}

/// Writes `v` with an `n`-bit prefix, `flags` in the bits above it (§5.1).
pub fn encode_int(v: usize, n: u8, flags: u8, out: &mut Vec<u8>) {
    let mask = (1usize << n) - 1;
    if v < mask {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = v - mask;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// The HPACK decoder of one connection (its dynamic table).
#[derive(Debug)]
pub struct Decoder {
    table: DynTable,
    /// The SETTINGS_HEADER_TABLE_SIZE ebb announced: the largest size an
    /// update may ask for.
    settings_max: usize,
    /// The last Huffman-coded literal whose name is the static table's,
    /// as it came and as it was read: a client sends most of a
    /// connection's requests' `:path` this way (nghttp2 and browsers do
    /// not index it), often the same bytes again, which are then copied
    /// rather than Huffman-decoded and checked again. (A plain literal is
    /// read about as fast as it would be compared: not kept.)
    last: LastLiteral,
    /// Most fields a block may decode to ([`HpackError::TooManyFields`]
    /// past it).
    max_fields: usize,
}

/// A literal field with a static-table name (`idx`, 1-61): its value's
/// encoded bytes (`raw`, length prefix and Huffman flag included), and
/// what reading them gave: the value and its props
/// (`request::field_props`). `idx` 0: none yet.
#[derive(Debug, Default)]
struct LastLiteral {
    idx: usize,
    raw: Vec<u8>,
    value: Vec<u8>,
    props: u16,
}

/// Values longer than this are not kept in [`LastLiteral`] (a request's
/// usual path is shorter; a long one costs its decoding anyway).
const LAST_LITERAL_MAX: usize = 256;

impl Decoder {
    /// A decoder whose peer may use up to `settings_max` bytes of table.
    pub fn new(settings_max: usize) -> Decoder {
        Decoder {
            table: DynTable::new(settings_max),
            settings_max,
            last: LastLiteral::default(),
            max_fields: usize::MAX,
        }
    }

    /// Sets the most fields (pseudo-header fields included) a block may
    /// decode to: past it [`Decoder::decode`] fails with
    /// [`HpackError::TooManyFields`], a connection error as every HPACK
    /// failure, as HAProxy 2.6 fails a block that overflows its list.
    pub fn set_max_fields(&mut self, n: usize) {
        self.max_fields = n;
    }

    /// The dynamic table (for tests and `show` commands).
    pub fn table(&self) -> &DynTable {
        &self.table
    }

    /// Decodes one complete header block into `out` (cleared first).
    /// Fields past `max_list` (RFC 9113 §6.5.2 size) are dropped and
    /// `out.too_large` set; the table is still updated.
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list: usize,
        out: &mut HeaderList,
    ) -> Result<(), HpackError> {
        out.clear();
        let mut pos = 0;
        let mut fields_seen = false;
        while pos < block.len() {
            let b = block[pos];
            if b & 0x80 != 0 {
                // §6.1 indexed field.
                let idx = decode_int(block, &mut pos, 7)?;
                // Past the limit `push` only counts (the bomb case).
                if idx > STATIC.len() {
                    let (line, nl, props) = self
                        .table
                        .get_line(idx - STATIC.len() - 1)
                        .ok_or(HpackError::BadIndex)?;
                    out.push_line(line, nl, props, max_list);
                } else {
                    // A static entry's line, in one copy.
                    let p = match idx {
                        1..=61 => table::STATIC_PROPS[idx - 1],
                        _ => return Err(HpackError::BadIndex),
                    };
                    let (line, nl) = table::static_line(idx - 1).ok_or(HpackError::BadIndex)?;
                    out.push_line(line, nl, p, max_list);
                }
                fields_seen = true;
            } else if b & 0x40 != 0 {
                // §6.2.1 literal with incremental indexing.
                self.literal(block, &mut pos, 6, true, false, max_list, out)?;
                fields_seen = true;
            } else if b & 0x20 != 0 {
                // §6.3 dynamic table size update.
                if fields_seen {
                    return Err(HpackError::SizeUpdateNotFirst);
                }
                let n = decode_int(block, &mut pos, 5)?;
                if n > self.settings_max {
                    return Err(HpackError::SizeUpdateTooLarge);
                }
                self.table.set_max(n);
            } else {
                // §6.2.2 without indexing (0000), §6.2.3 never indexed (0001).
                let never = b & 0x10 != 0;
                self.literal(block, &mut pos, 4, false, never, max_list, out)?;
                fields_seen = true;
            }
            if out.count > self.max_fields {
                return Err(HpackError::TooManyFields);
            }
        }
        Ok(())
    }

    /// Entry `idx` of the static or dynamic table, with its props.
    #[inline]
    fn lookup(&self, idx: usize) -> Result<(&[u8], &[u8], u16), HpackError> {
        match idx {
            0 => Err(HpackError::BadIndex),
            1..=61 => {
                let (n, v) = STATIC[idx - 1];
                Ok((n, v, table::STATIC_PROPS[idx - 1]))
            }
            _ => self.table.get_with(idx - 62).ok_or(HpackError::BadIndex),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn literal(
        &mut self,
        block: &[u8],
        pos: &mut usize,
        prefix: u8,
        index: bool,
        never: bool,
        max_list: usize,
        out: &mut HeaderList,
    ) -> Result<(), HpackError> {
        let idx = decode_int(block, pos, prefix)?;
        let raw_start = *pos;
        // Only a Huffman-coded value is worth the memo: a plain one is
        // read as fast as it is compared, and kept it costs two copies.
        let huffman = block.get(raw_start).is_some_and(|&b| b & 0x80 != 0);
        if huffman && idx != 0 && idx == self.last.idx {
            let end = string_end(block, *pos)?;
            if block.get(raw_start..end) == Some(&self.last.raw[..]) {
                *pos = end;
                let (name, value, p) = (STATIC[idx - 1].0, &self.last.value, self.last.props);
                out.push(name, value, p | (u16::from(never) * props::NEVER), max_list);
                if index {
                    self.table.insert_with(name, value, p);
                }
                return Ok(());
            }
        }
        // The name and value are read straight into the list's bytes as
        // their line (no copy between), then kept there or, past
        // `max_list`, dropped.
        let at = out.buf.len();
        let read = (|| {
            let named = if idx == 0 {
                read_string(block, pos, &mut out.buf)?;
                None
            } else if idx <= STATIC.len() {
                out.buf.extend_from_slice(STATIC[idx - 1].0);
                Some(table::STATIC_NAME_PROPS[idx - 1])
            } else {
                let (name, _, _) = self.lookup(idx)?;
                out.buf.extend_from_slice(name);
                None
            };
            let name_len = out.buf.len() - at;
            out.buf.extend_from_slice(b": ");
            read_string(block, pos, &mut out.buf)?;
            Ok((name_len, named))
        })();
        let (name_len, named) = match read {
            Ok(r) => r,
            Err(e) => {
                out.buf.truncate(at);
                return Err(e);
            }
        };
        let (name, value) = out.buf[at..].split_at(name_len);
        let value = value.get(2..).unwrap_or_default();
        // A name from the static table is known: only the value is read.
        let p = match named {
            Some(np) => crate::h2::request::field_props_named(np, value),
            None => crate::h2::request::field_props(name, value),
        };
        if index {
            self.table.insert_with(name, value, p);
        }
        if huffman && (1..=STATIC.len()).contains(&idx) && value.len() <= LAST_LITERAL_MAX {
            let l = &mut self.last;
            l.idx = idx;
            l.raw.clear();
            l.raw
                .extend_from_slice(block.get(raw_start..*pos).unwrap_or_default());
            l.value.clear();
            l.value.extend_from_slice(value);
            l.props = p;
        }
        out.buf.extend_from_slice(b"\r\n");
        let len = out.buf.len() - at - 4;
        if out.room(len, max_list) {
            out.note(at, name_len, p | (u16::from(never) * props::NEVER));
        } else {
            out.buf.truncate(at);
        }
        Ok(())
    }
}

/// Where the string literal (§5.2) at `src[pos]` ends.
fn string_end(src: &[u8], mut pos: usize) -> Result<usize, HpackError> {
    let len = decode_int(src, &mut pos, 7)?;
    let end = pos.checked_add(len).ok_or(HpackError::Truncated)?;
    if end > src.len() {
        return Err(HpackError::Truncated);
    }
    Ok(end)
}

/// Reads a string literal (§5.2) at `src[*pos]`, appending it to `out`.
fn read_string(src: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> Result<(), HpackError> {
    let huff = src.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = decode_int(src, pos, 7)?;
    let end = pos.checked_add(len).ok_or(HpackError::Truncated)?;
    let raw = src.get(*pos..end).ok_or(HpackError::Truncated)?;
    *pos = end;
    if huff {
        huffman::decode(raw, out).map_err(HpackError::Huffman)
    } else {
        out.extend_from_slice(raw);
        Ok(())
    }
}

/// When the encoder Huffman-codes string literals.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HuffmanMode {
    /// Never (RFC 7541 C.3/C.5 style).
    Never,
    /// Always (C.4/C.6 style).
    Always,
    /// When it makes the string shorter (the default).
    Shorter,
}

/// How the encoder may index a field.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// Add to the dynamic table (§6.2.1).
    Incremental,
    /// Literal without indexing (§6.2.2): values that change every time.
    No,
    /// Never indexed (§6.2.3): secrets (RFC 7541 §7.1.3).
    Never,
}

impl Indexing {
    /// ebb's choice for a response field: secrets never indexed, fields
    /// that change with each message not indexed, the rest incremental.
    /// `date` is indexed: it is the same for every answer of a second, so
    /// all but the first of them send one byte for it (a Huffman-coded
    /// literal each time cost more than the rest of a small answer's
    /// head). `content-length`, `etag` and `last-modified` are indexed
    /// too (as h2o does): a file asked again on the connection, or files
    /// of one size or one deployment, then cost a byte each instead of
    /// ~40 bytes of literals per answer; a value that never comes back
    /// costs one table entry, evicted oldest first.
    pub fn for_name(name: &[u8]) -> Indexing {
        match name {
            b"set-cookie" | b"authorization" | b"proxy-authorization" | b"cookie" => {
                Indexing::Never
            }
            b"location" | b"content-range" | b"age" | b"expires" | b":path" => Indexing::No,
            _ => Indexing::Incremental,
        }
    }
}

/// The HPACK encoder of one connection.
#[derive(Debug)]
pub struct Encoder {
    table: DynTable,
    huffman: HuffmanMode,
    /// Smallest table size set since the last block, and the final one:
    /// both must be signalled (§4.2).
    pending: Option<(usize, usize)>,
    /// The last block [`Encoder::encode_fields`] encoded without changing
    /// the table: its fields (as given) and its bytes, at `memo_gen` (the
    /// table's [`DynTable::generation`]): the same fields encode to the
    /// same bytes while the table stays as it is.
    memo_fields: Vec<u8>,
    memo_block: Vec<u8>,
    memo_gen: Option<u64>,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder::new(DEFAULT_TABLE_SIZE, HuffmanMode::Shorter)
    }
}

impl Encoder {
    /// An encoder with a table of `max` bytes.
    pub fn new(max: usize, huffman: HuffmanMode) -> Encoder {
        Encoder {
            table: DynTable::new(max),
            huffman,
            pending: None,
            memo_fields: Vec::new(),
            memo_block: Vec::new(),
            memo_gen: None,
        }
    }

    /// Adds field (`name`, `value`) to `list`, the form
    /// [`Encoder::encode_fields`] reads: name length (2 bytes), value
    /// length (4 bytes), both little-endian, then the bytes. A name longer
    /// than 65,535 bytes is cut (no field list ebb sends has one). SP and
    /// HTAB around the value are left out (§8.2.1 forbids them; a
    /// configuration's `set-header X " v"` may make one), as HAProxy 2.6
    /// trims them on output since February 2025: every block ebb sends is
    /// built here.
    pub fn push_field(list: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        let value = crate::http1::trim_ows(value);
        let name = &name[..name.len().min(usize::from(u16::MAX))];
        let vlen = u32::try_from(value.len()).unwrap_or(u32::MAX);
        let value = &value[..vlen as usize];
        let nl = (name.len() as u16).to_le_bytes();
        let vl = vlen.to_le_bytes();
        list.reserve(6 + name.len() + value.len());
        list.extend_from_slice(&[nl[0], nl[1], vl[0], vl[1], vl[2], vl[3]]);
        list.extend_from_slice(name);
        list.extend_from_slice(value);
    }

    /// The fields of a list built with [`Encoder::push_field`], in order
    /// (a cut last record ends it).
    pub fn list_fields(list: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut rest = list;
        std::iter::from_fn(move || {
            let [a, b, c, d, e, f, ..] = *rest else {
                return None;
            };
            let nl = usize::from(u16::from_le_bytes([a, b]));
            let vl = u32::from_le_bytes([c, d, e, f]) as usize;
            let body = rest.get(6..6 + nl + vl)?;
            rest = &rest[6 + nl + vl..];
            Some(body.split_at(nl))
        })
    }

    /// Encodes a whole header block of the fields in `list` (built with
    /// [`Encoder::push_field`], names lower-case) into `out`, the pending
    /// size update first. A block whose fields are those of the last one
    /// encoded, with the table as it left it (that block inserted nothing
    /// and nothing changed since), is the same bytes again: they are
    /// copied, not encoded (a server's answers on one connection mostly
    /// repeat their fields, `date` changing once a second).
    pub fn encode_fields(&mut self, list: &[u8], out: &mut Vec<u8>) {
        let gen = self.table.generation();
        if self.pending.is_none() && self.memo_gen == Some(gen) && self.memo_fields == list {
            out.extend_from_slice(&self.memo_block);
            return;
        }
        let start = out.len();
        self.begin_block(out);
        for (name, value) in Encoder::list_fields(list) {
            self.encode(name, value, out);
        }
        if self.table.generation() == gen {
            self.memo_fields.clear();
            self.memo_fields.extend_from_slice(list);
            self.memo_block.clear();
            self.memo_block.extend_from_slice(&out[start..]);
            self.memo_gen = Some(gen);
        } else {
            self.memo_gen = None;
        }
    }

    /// The dynamic table.
    pub fn table(&self) -> &DynTable {
        &self.table
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE changed: use at most
    /// `min(n, DEFAULT_TABLE_SIZE)` and signal it in the next block.
    pub fn set_max_table_size(&mut self, n: usize) {
        let n = n.min(DEFAULT_TABLE_SIZE);
        if n == self.table.max_size() && self.pending.is_none() {
            return;
        }
        let low = self.pending.map_or(n, |(low, _)| low.min(n));
        self.pending = Some((low, n));
        self.table.set_max(n);
    }

    /// Starts a header block: emits any pending size update.
    pub fn begin_block(&mut self, out: &mut Vec<u8>) {
        if let Some((low, last)) = self.pending.take() {
            if low < last {
                encode_int(low, 5, 0x20, out);
            }
            encode_int(last, 5, 0x20, out);
        }
    }

    /// Encodes one field with ebb's indexing choice for its name.
    pub fn encode(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        self.encode_with(name, value, Indexing::for_name(name), out);
    }

    /// Encodes one field (`name` lower-case).
    pub fn encode_with(&mut self, name: &[u8], value: &[u8], ix: Indexing, out: &mut Vec<u8>) {
        let mut name_idx = 0;
        if ix != Indexing::Never {
            for i in table::static_named(name) {
                if STATIC[i].1 == value {
                    encode_int(i + 1, 7, 0x80, out);
                    return;
                }
                if name_idx == 0 {
                    name_idx = i + 1;
                }
            }
            for i in 0..self.table.len() {
                if let Some((n, v)) = self.table.get(i) {
                    if n == name {
                        if v == value {
                            encode_int(62 + i, 7, 0x80, out);
                            return;
                        }
                        if name_idx == 0 {
                            name_idx = 62 + i;
                        }
                    }
                }
            }
        } else if let Some(i) = table::static_named(name).next() {
            name_idx = i + 1;
        }
        let (prefix, flags) = match ix {
            Indexing::Incremental => (6, 0x40),
            Indexing::No => (4, 0x00),
            Indexing::Never => (4, 0x10),
        };
        encode_int(name_idx, prefix, flags, out);
        if name_idx == 0 {
            self.string(name, out);
        }
        self.string(value, out);
        if ix == Indexing::Incremental {
            self.table.insert(name, value);
        }
    }

    fn string(&self, s: &[u8], out: &mut Vec<u8>) {
        let hlen = huffman::encoded_len(s);
        let huff = match self.huffman {
            HuffmanMode::Never => false,
            HuffmanMode::Always => true,
            HuffmanMode::Shorter => hlen < s.len(),
        };
        if huff {
            encode_int(hlen, 7, 0x80, out);
            huffman::encode(s, out);
        } else {
            encode_int(s.len(), 7, 0, out);
            out.extend_from_slice(s);
        }
    }
}

#[cfg(test)]
mod tests;
