//! The chunked transfer coding (RFC 9112 §7.1): an incremental decoder and a
//! streaming encoder.
//!
//! The decoder is a byte-driven state machine that keeps no input: it can be
//! fed a body in pieces of any size (one byte at a time included) and gives
//! the same answer. Each call to [`ChunkedDecoder::decode`] says how many
//! input bytes it consumed and which of them (if any) are chunk data, as a
//! range of the input: nothing is copied. That serves both users:
//!
//! - a server reading a body takes the data ranges and ignores the rest;
//! - a proxy forwarding the body unchanged sends `input[..consumed]` as it
//!   is, and stops at [`Decoded::done`]: the decoder tells it where the
//!   message ends, so bytes of the next pipelined message are never sent
//!   along with this one.
//!
//! Strictness (each refusal is an [`HttpError`], 400 for a request, 502 for
//! a response): hex digits only (no `0x`, sign or whitespace before them), at
//! most 16 digits, whitespace after the size only before `;`, extension bytes
//! limited in count per chunk and per body, CRLF (never a bare LF) after the
//! size line and after the data, trailer lines validated like header lines
//! and bounded, and no Content-Length, Transfer-Encoding or Host in trailers.
//! An answer's decoder ([`ChunkedDecoder::answer`]) also takes a lone LF
//! where CRLF belongs, as HAProxy 2.6 does (RFC 9112 §2.2 lets a recipient
//! do so); the recoder then writes CRLF, so no lone LF goes on.
//! In decoding mode the trailers are checked and dropped (RFC 9110 §6.5.1
//! lets a recipient discard them); in pass-through mode they go out with the
//! rest of the bytes.

use core::ops::Range;

use super::error::HttpError;
use super::head::{is_field_value_byte, is_tchar};

/// Limits of the chunked decoder.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ChunkedLimits {
    /// Longest chunk extension on one size line. Default 1 KiB: extensions
    /// have no use ebb knows of; this leaves room for any real one.
    pub max_ext_per_chunk: usize,
    /// Total extension bytes over a whole body. Default 16 KiB, hyper's
    /// figure for the same bound, against bodies made of tiny chunks with
    /// long extensions (the resource-exhaustion class of Node's
    /// CVE-2024-22019).
    pub max_ext_total: u64,
    /// Largest trailer section. Default 16 KiB: about a head's budget.
    pub max_trailer_bytes: usize,
}

impl Default for ChunkedLimits {
    fn default() -> Self {
        ChunkedLimits {
            max_ext_per_chunk: 1024,
            max_ext_total: 16 * 1024,
            max_trailer_bytes: 16 * 1024,
        }
    }
}

/// What one call to [`ChunkedDecoder::decode`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Input bytes consumed (framing and data); pass-through forwards
    /// exactly `input[..consumed]`.
    pub consumed: usize,
    /// Chunk data within `input[..consumed]`; empty when none.
    pub data: Range<usize>,
    /// The last chunk and the trailer section are complete: the message
    /// ends at `consumed`.
    pub done: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    /// Reading the hex size; `digits` read so far.
    Size { digits: u8 },
    /// Whitespace after the size: only `;` may follow.
    SizeWs,
    /// Inside chunk extensions, until CR.
    Ext,
    /// CR of the size line seen, LF expected.
    SizeLf,
    /// Inside chunk data; `remaining` bytes left.
    Data { remaining: u64 },
    /// After data: CR expected.
    DataCr,
    /// After data: LF expected.
    DataLf,
    /// At the start of a trailer line (or the final empty line).
    TrailerStart,
    /// Inside a trailer field name.
    TrailerName,
    /// Inside a trailer field value.
    TrailerValue,
    /// CR of a trailer line seen, LF expected.
    TrailerLf,
    /// CR of the final empty line seen, LF expected.
    EndLf,
    /// The message is complete.
    Done,
    /// A previous call failed; the same error is returned again.
    Failed(HttpError),
}

/// Incremental chunked decoder. See the module doc.
#[derive(Clone, Debug)]
pub struct ChunkedDecoder {
    state: State,
    /// Chunk size being read.
    size: u64,
    /// Extension bytes of the current size line.
    ext_len: usize,
    /// Extension bytes of the whole body.
    ext_total: u64,
    /// Trailer section bytes so far.
    trailer_len: usize,
    /// The trailer fields' names and values without their blanks (their
    /// HTX size, [`ChunkedDecoder::htx_tail`]); `blanks` the blanks of the
    /// current value not counted yet (kept if more of the value follows).
    trailer_htx: u32,
    blanks: u32,
    /// Lower-cased prefix of the current trailer name, enough to recognise
    /// the forbidden ones; `name_len` counts the whole name.
    name: [u8; 17],
    name_len: usize,
    limits: ChunkedLimits,
    /// Return from `decode` when the last chunk's size line is read, so a
    /// re-encoder knows where the trailer section starts.
    stop_at_trailers: bool,
    /// A lone LF may end a line (an answer's body): see the module doc.
    bare_lf: bool,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder::new(ChunkedLimits::default())
    }
}

/// Fields that must not come as trailers: they would change framing or
/// routing after the fact (RFC 9110 §6.5.1).
const FORBIDDEN_TRAILERS: [&[u8]; 3] = [b"content-length", b"transfer-encoding", b"host"];

impl ChunkedDecoder {
    /// A decoder at the start of a body.
    pub fn new(limits: ChunkedLimits) -> Self {
        ChunkedDecoder {
            state: State::Size { digits: 0 },
            size: 0,
            ext_len: 0,
            ext_total: 0,
            trailer_len: 0,
            trailer_htx: 0,
            blanks: 0,
            name: [0; 17],
            name_len: 0,
            limits,
            stop_at_trailers: false,
            bare_lf: false,
        }
    }

    /// A decoder of an answer's body: a lone LF may end its size lines,
    /// the CRLF after each chunk's data, its trailer lines and its last
    /// line (HAProxy 2.6 takes them; requests keep CRLF).
    pub fn answer() -> Self {
        ChunkedDecoder {
            bare_lf: true,
            ..ChunkedDecoder::default()
        }
    }

    /// A decoder that returns from `decode` once the last chunk's size
    /// line is read (see [`ChunkedDecoder::in_trailers`]): what follows is
    /// the trailer section, for a caller that forwards it apart.
    pub fn stopping_at_trailers() -> Self {
        ChunkedDecoder {
            stop_at_trailers: true,
            ..ChunkedDecoder::default()
        }
    }

    /// Back to the start of a new body (same limits).
    pub fn reset(&mut self) {
        let (stop, lf) = (self.stop_at_trailers, self.bare_lf);
        *self = ChunkedDecoder::new(self.limits);
        self.stop_at_trailers = stop;
        self.bare_lf = lf;
    }

    /// Whether the last chunk was read: what `decode` consumes from now on
    /// is the trailer section and the final empty line.
    pub fn in_trailers(&self) -> bool {
        matches!(
            self.state,
            State::TrailerStart
                | State::TrailerName
                | State::TrailerValue
                | State::TrailerLf
                | State::EndLf
                | State::Done
        )
    }

    /// What the body adds to HAProxy's HTX size past its data (see
    /// `crate::http1::htx`): 1 for the end of the message and its trailer
    /// fields' names and values (what came of them so far).
    pub fn htx_tail(&self) -> u64 {
        1 + u64::from(self.trailer_htx)
    }

    /// True once the whole body, trailers included, was consumed.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Bytes of data left in the current chunk (0 outside chunk data). A
    /// proxy may use it to splice or forward a large chunk without calling
    /// the decoder per read.
    pub fn data_remaining(&self) -> u64 {
        match self.state {
            State::Data { remaining } => remaining,
            _ => 0,
        }
    }

    fn fail(&mut self, e: HttpError) -> Result<Decoded, HttpError> {
        self.state = State::Failed(e);
        Err(e)
    }

    /// Consumes framing bytes from `input` until it reaches chunk data (then
    /// returns that data's range, at most to the end of `input`), the end of
    /// the message, or the end of `input`. Call again with the unconsumed
    /// rest (and more bytes when it is empty); `consumed == 0` with `done`
    /// false means `input` was empty.
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, HttpError> {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Data { remaining } => {
                    let avail = (input.len() - i) as u64;
                    let take = remaining.min(avail) as usize;
                    let left = remaining - take as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data { remaining: left }
                    };
                    return Ok(Decoded {
                        consumed: i + take,
                        data: i..i + take,
                        done: false,
                    });
                }
                State::Done => break,
                State::Failed(e) => return Err(e),
                _ => {}
            }
            let b = input[i];
            i += 1;
            if let Err(e) = self.step(b) {
                return self.fail(e);
            }
            // Just past the last chunk's size line (no trailer byte yet).
            let at_trailers =
                self.stop_at_trailers && self.state == State::TrailerStart && self.trailer_len == 0;
            if self.state == State::Done || at_trailers {
                break;
            }
        }
        Ok(Decoded {
            consumed: i,
            data: i..i,
            done: self.state == State::Done,
        })
    }

    /// One framing byte.
    #[inline]
    fn step(&mut self, b: u8) -> Result<(), HttpError> {
        match self.state {
            State::Size { digits } => {
                if let Some(d) = hex_value(b) {
                    if digits >= 16 {
                        return Err(HttpError::ChunkSizeOverflow);
                    }
                    // 16 hex digits fit a u64 exactly: no overflow possible.
                    self.size = (self.size << 4) | u64::from(d);
                    self.state = State::Size { digits: digits + 1 };
                } else if digits == 0 {
                    return Err(HttpError::BadChunkSize);
                } else {
                    match b {
                        b';' => self.state = State::Ext,
                        b' ' | b'\t' => self.state = State::SizeWs,
                        b'\r' => self.state = State::SizeLf,
                        b'\n' if self.bare_lf => self.size_line_end(),
                        _ => return Err(HttpError::BadChunkSize),
                    }
                }
            }
            State::SizeWs => match b {
                b' ' | b'\t' => self.count_ext()?,
                b';' => self.state = State::Ext,
                _ => return Err(HttpError::BadChunkSize),
            },
            State::Ext => match b {
                b'\r' => self.state = State::SizeLf,
                b'\n' if self.bare_lf => self.size_line_end(),
                b if is_field_value_byte(b) => self.count_ext()?,
                _ => return Err(HttpError::BadChunkSize),
            },
            State::SizeLf => {
                if b != b'\n' {
                    return Err(HttpError::BadChunkSize);
                }
                self.size_line_end();
            }
            State::DataCr => match b {
                b'\r' => self.state = State::DataLf,
                b'\n' if self.bare_lf => self.state = State::Size { digits: 0 },
                _ => return Err(HttpError::BadChunkEnd),
            },
            State::DataLf => {
                if b != b'\n' {
                    return Err(HttpError::BadChunkEnd);
                }
                self.state = State::Size { digits: 0 };
            }
            State::TrailerStart => {
                self.count_trailer()?;
                if b == b'\r' {
                    self.state = State::EndLf;
                } else if b == b'\n' && self.bare_lf {
                    self.state = State::Done;
                } else if is_tchar(b) {
                    self.name_len = 0;
                    self.push_name(b);
                    self.state = State::TrailerName;
                } else {
                    // SP/HTAB here would be obs-fold; anything else is junk.
                    return Err(HttpError::BadTrailer);
                }
            }
            State::TrailerName => {
                self.count_trailer()?;
                if is_tchar(b) {
                    self.push_name(b);
                } else if b == b':' {
                    let n = &self.name[..self.name_len.min(self.name.len())];
                    if self.name_len <= self.name.len() && FORBIDDEN_TRAILERS.contains(&n) {
                        return Err(HttpError::ForbiddenTrailer);
                    }
                    self.trailer_htx += self.name_len as u32;
                    // Leading blanks are not part of the value.
                    self.blanks = u32::MAX;
                    self.state = State::TrailerValue;
                } else {
                    return Err(HttpError::BadTrailer);
                }
            }
            State::TrailerValue => {
                self.count_trailer()?;
                if b == b'\r' {
                    self.state = State::TrailerLf;
                } else if b == b'\n' && self.bare_lf {
                    self.state = State::TrailerStart;
                } else if !is_field_value_byte(b) {
                    return Err(HttpError::BadTrailer);
                } else if b == b' ' || b == b'\t' {
                    // (u32::MAX, before the value, stays.)
                    self.blanks = self.blanks.saturating_add(1);
                } else {
                    self.trailer_htx += self.blanks.wrapping_add(1).max(1);
                    self.blanks = 0;
                }
            }
            State::TrailerLf => {
                self.count_trailer()?;
                if b != b'\n' {
                    return Err(HttpError::BadTrailer);
                }
                self.state = State::TrailerStart;
            }
            State::EndLf => {
                if b != b'\n' {
                    return Err(HttpError::BadTrailer);
                }
                self.state = State::Done;
            }
            // Not reached: decode() handles these before calling step().
            State::Data { .. } | State::Done | State::Failed(_) => {}
        }
        Ok(())
    }

    /// The end of a size line: the chunk's data next, or the trailers.
    #[inline]
    fn size_line_end(&mut self) {
        self.state = if self.size == 0 {
            State::TrailerStart
        } else {
            State::Data {
                remaining: self.size,
            }
        };
        self.size = 0;
        self.ext_len = 0;
    }

    #[inline]
    fn count_ext(&mut self) -> Result<(), HttpError> {
        self.ext_len += 1;
        self.ext_total += 1;
        if self.ext_len > self.limits.max_ext_per_chunk
            || self.ext_total > self.limits.max_ext_total
        {
            return Err(HttpError::ChunkExtTooLong);
        }
        Ok(())
    }

    #[inline]
    fn count_trailer(&mut self) -> Result<(), HttpError> {
        self.trailer_len += 1;
        if self.trailer_len > self.limits.max_trailer_bytes {
            return Err(HttpError::TrailerTooLarge);
        }
        Ok(())
    }

    #[inline]
    fn push_name(&mut self, b: u8) {
        if let Some(slot) = self.name.get_mut(self.name_len) {
            *slot = b.to_ascii_lowercase();
        }
        self.name_len = self.name_len.saturating_add(1);
    }

    /// Decodes all of `input` it can, appending the data to `out`. Returns
    /// the bytes consumed and whether the body is complete. For tests and
    /// for small bodies a server reads whole; the streaming paths use
    /// [`decode`](Self::decode).
    pub fn decode_to_vec(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, bool), HttpError> {
        let mut pos = 0;
        loop {
            let d = self.decode(&input[pos..])?;
            out.extend_from_slice(&input[pos + d.data.start..pos + d.data.end]);
            pos += d.consumed;
            if d.done || d.consumed == 0 {
                return Ok((pos, d.done));
            }
        }
    }
}

/// The value of one hexadecimal digit (either case).
#[inline]
pub(crate) fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

// --- canonical re-encoding ---------------------------------------------------

/// Re-emits a chunked body toward a server with canonical framing: each
/// piece of data as a chunk whose size is lowercase hex without leading
/// zeros, no chunk extensions, and the trailer section as received (it was
/// validated). A size the client wrote as `000000000000000a` or
/// `100000005` therefore never reaches a server that might read it
/// differently (one truncating sizes to 32 bits would see 5), and an
/// extension cannot carry bytes a server parses. HAProxy re-emits chunks
/// the same way (its HTX layer keeps only the data).
///
/// Chunk boundaries follow what was read, not what the client sent: a
/// chunk that arrives in two reads goes out as two chunks. The last chunk
/// and the trailer section are held until the section is complete and
/// valid (it is bounded, 16 KiB by default): a server never sees the end
/// of a message the client did not end properly.
#[derive(Clone, Debug)]
pub struct ChunkedRecoder {
    dec: ChunkedDecoder,
    /// The trailer section so far (from the last chunk on).
    trailers: Vec<u8>,
    /// Data bytes read so far.
    data: u64,
}

impl Default for ChunkedRecoder {
    fn default() -> Self {
        ChunkedRecoder {
            dec: ChunkedDecoder {
                stop_at_trailers: true,
                ..ChunkedDecoder::default()
            },
            trailers: Vec::new(),
            data: 0,
        }
    }
}

impl ChunkedRecoder {
    /// A recoder of an answer's body ([`ChunkedDecoder::answer`]).
    pub fn answer() -> Self {
        let mut r = ChunkedRecoder::default();
        r.dec.bare_lf = true;
        r
    }

    /// Reads what of the body `input` holds and appends its canonical form
    /// to `out`. Returns the input bytes consumed and whether the body
    /// (trailers included) is complete; bytes after its end are left.
    pub fn recode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(usize, bool), HttpError> {
        self.recode_with(input, out, |_| {})
    }

    /// [`ChunkedRecoder::recode`], giving `each` every piece of data as
    /// it goes (an answer being stored in a cache).
    pub fn recode_with(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        mut each: impl FnMut(&[u8]),
    ) -> Result<(usize, bool), HttpError> {
        let mut pos = 0;
        loop {
            let trailers = self.dec.in_trailers();
            let d = match self.dec.decode(&input[pos..]) {
                Ok(d) => d,
                // What came before the error goes first (as the decoder,
                // the recoder then fails again on the next call).
                Err(_) if pos > 0 => return Ok((pos, false)),
                Err(e) => return Err(e),
            };
            if trailers {
                // Trailer lines and the final CRLF, as received, once all
                // of them arrived.
                self.trailers
                    .extend_from_slice(&input[pos..pos + d.consumed]);
                if d.done {
                    out.extend_from_slice(b"0\r\n");
                    if self.dec.bare_lf {
                        // Each line ends with CRLF as it goes on.
                        for line in self.trailers.split_inclusive(|&b| b == b'\n') {
                            let text = line.strip_suffix(b"\n").unwrap_or(line);
                            out.extend_from_slice(text.strip_suffix(b"\r").unwrap_or(text));
                            out.extend_from_slice(b"\r\n");
                        }
                        self.trailers.clear();
                    } else {
                        out.append(&mut self.trailers);
                    }
                }
            } else if !d.data.is_empty() {
                let data = &input[pos + d.data.start..pos + d.data.end];
                self.data += data.len() as u64;
                each(data);
                out.extend_from_slice(ChunkHeader::new(data.len() as u64).as_ref());
                out.extend_from_slice(data);
                out.extend_from_slice(CHUNK_END);
            }
            pos += d.consumed;
            if d.done || d.consumed == 0 {
                return Ok((pos, d.done));
            }
        }
    }

    /// Its decoder's [`ChunkedDecoder::htx_tail`].
    pub fn htx_tail(&self) -> u64 {
        self.dec.htx_tail()
    }

    /// HAProxy's HTX size of the body read so far (see
    /// [`ChunkedDecoder::htx_tail`]): its data, and its tail once complete.
    pub fn htx_size(&self) -> u64 {
        self.data
            + if self.dec.is_done() {
                self.dec.htx_tail()
            } else {
                0
            }
    }
}

// --- encoder -----------------------------------------------------------------

/// The line that ends a chunked body with no trailers: last-chunk and the
/// empty line.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// What follows each chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";

/// A chunk-size line, `HEX CRLF`, on the stack (for `writev`).
#[derive(Copy, Clone, Debug)]
pub struct ChunkHeader {
    buf: [u8; 18],
    len: u8,
}

impl ChunkHeader {
    /// The line for a chunk of `len` bytes (lower-case hex, no leading zero).
    pub fn new(len: u64) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut buf = [0u8; 18];
        let digits = if len == 0 {
            1
        } else {
            (64 - len.leading_zeros()).div_ceil(4) as usize
        };
        for (i, slot) in buf[..digits].iter_mut().enumerate() {
            let shift = 4 * (digits - 1 - i);
            *slot = HEX[((len >> shift) & 0xf) as usize];
        }
        buf[digits] = b'\r';
        buf[digits + 1] = b'\n';
        ChunkHeader {
            buf,
            len: (digits + 2) as u8,
        }
    }
}

impl AsRef<[u8]> for ChunkHeader {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

/// Streaming chunked encoder: appends each piece of a body as one chunk.
#[derive(Clone, Debug, Default)]
pub struct ChunkedEncoder {
    finished: bool,
}

impl ChunkedEncoder {
    /// A new encoder.
    pub fn new() -> Self {
        ChunkedEncoder::default()
    }

    /// Appends `data` as one chunk. An empty `data` writes nothing (an
    /// empty chunk would end the body). Nothing is written after `finish`.
    pub fn write(&mut self, out: &mut Vec<u8>, data: &[u8]) {
        if data.is_empty() || self.finished {
            return;
        }
        out.extend_from_slice(ChunkHeader::new(data.len() as u64).as_ref());
        out.extend_from_slice(data);
        out.extend_from_slice(CHUNK_END);
    }

    /// Appends the last chunk; later calls do nothing.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.finished {
            out.extend_from_slice(LAST_CHUNK);
            self.finished = true;
        }
    }

    /// True once `finish` was called.
    pub fn is_finished(&self) -> bool {
        self.finished
    }
}
